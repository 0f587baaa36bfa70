/* plan.c -- the SQLite backend's execution of a query plan (the one
 * planner, store/plan.h, chooses it), and the cursor that yields the
 * matching documents.
 *
 * An _id plan reads by primary key; an index plan selects the seqs of
 * the index rows under each combination of equality values (and within
 * the range), which are then sorted and made distinct (a multikey index
 * lists a document once per matching key), so results come in insertion
 * order and the caller can stop early; a sorted plan steps the index
 * rows in primary-key order; a scan steps the collection in seq order.
 * Every candidate is checked on its stored bytes with the filter's BSON
 * twin (doc/bfilter.h, compiled once per cursor from the bridged spec),
 * and only a match is converted to json_t; when the BSON filter does not
 * compile, each candidate is converted and checked with dtx__filter_match,
 * which answers the same for every document JSON can hold. */
#include "store/sqlite/sqlite_int.h"

#include "doc/bdoc.h"
#include "doc/bfilter.h"
#include "store/plan.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

/* The cursor's kinds, beside the plan's: one document loaded whole, and
 * a walk whose rows are exhausted. */
enum { CUR_ONE = DTX__PLAN_SCAN + 1, CUR_DONE };

/* ---- candidates ----------------------------------------------------------------------- */

static int seqs_push(sq_cursor_t *cur, size_t *cap, int64_t seq) {
  if (cur->nseq == *cap && DTX__GROW(cur->seqs, *cap, 16))
    return dtx__err(DTX_ENOMEM, "collecting candidates");
  cur->seqs[cur->nseq++] = seq;
  return 0;
}

static int i64_cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void seqs_finish(sq_cursor_t *cur) {
  if (cur->nseq < 2)
    return;
  qsort(cur->seqs, cur->nseq, sizeof *cur->seqs, i64_cmp);
  size_t w = 1;
  for (size_t r = 1; r < cur->nseq; r++)
    if (cur->seqs[r] != cur->seqs[w - 1])
      cur->seqs[w++] = cur->seqs[r];
  cur->nseq = w;
}

/* Steps st (already bound), appending column 0 of each row. */
static int collect_rows(sq_cursor_t *cur, sqlite3_stmt *st, size_t *cap) {
  int src, rc = 0;
  while ((src = sqlite3_step(st)) == SQLITE_ROW)
    if ((rc = seqs_push(cur, cap, sqlite3_column_int64(st, 0))) < 0)
      break;
  sqlite3_reset(st);
  if (rc == 0 && src != SQLITE_DONE)
    rc = dtx__sq_err(cur->c, src, "reading an index");
  return rc;
}

static int ids_candidates(sq_cursor_t *cur, const json_t *vals) {
  const sq_coll_t *co = cur->coll;
  size_t cap = 0, i;
  json_t *v;
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(cur->c, co->sql[SQ_C_SEQBYID], co->h[SQ_C_SEQBYID],
                        &st);
  if (rc < 0)
    return rc;
  json_array_foreach(vals, i, v) {
    if (!dtx__id_valid(v))
      continue; /* no stored _id is an array */
    sqlite3_reset(st);
    if ((rc = dtx__sq_bind_id(st, 1, v)) < 0 ||
        (rc = collect_rows(cur, st, &cap)) < 0)
      return rc;
  }
  seqs_finish(cur);
  return 0;
}

/* A range bound, copied into the statement (SQLITE_TRANSIENT): a sorted
 * walk steps after its plan is freed, and a bound the planner made (an
 * anchored $regex's prefix, plan.c's regex_range) dies with the plan. */
static int bind_bound(sqlite3_stmt *st, int i, const json_t *v) {
  if (json_is_string(v))
    return sqlite3_bind_text(st, i, json_string_value(v),
                             (int)json_string_length(v), SQLITE_TRANSIENT);
  if (json_is_integer(v))
    return sqlite3_bind_int64(st, i, json_integer_value(v));
  return sqlite3_bind_double(st, i, json_real_value(v));
}

/* The index queries' SQL: SQL_MAX holds the longest, a table name of
 * SQ_TABLE_MAX and 16 fields (the check after each is a safety net). */
#define SQL_MAX 1200

/* "SELECT seq FROM <index> WHERE b0=?1 AND v0=?2 AND ..." for p's
 * equalities into sql (and " WHERE " when more conditions follow); its
 * length. */
static size_t select_eq(char *sql, const dtx__plan_t *p, int more) {
  const sq_idx_t *ix = p->ix;
  size_t n = (size_t)snprintf(sql, SQL_MAX, "SELECT seq FROM %s%s", ix->table,
                              p->neq || more ? " WHERE " : "");
  for (size_t f = 0; f < p->neq; f++)
    n += (size_t)snprintf(sql + n, SQL_MAX - n, "%sb%zu=?%zu AND v%zu=?%zu",
                          f ? " AND " : "", f, 2 * f + 1, f, 2 * f + 2);
  return n;
}

/* Binds the equality values at pos to select_eq's parameters. */
static int bind_eq(sqlite3_stmt *st, const dtx__plan_t *p, const size_t *pos) {
  int rc = 0;
  for (size_t f = 0; rc == 0 && f < p->neq; f++)
    rc = dtx__sq_bind_key(st, (int)(2 * f + 1),
                          json_array_get(p->eq[f], pos[f]));
  return rc;
}

/* " AND b<f>=<bracket> AND v<f> >= ?<arg> ..." for p's range on field
 * neq (none: nothing) appended at sql + n; the new length. */
static size_t where_range(char *sql, size_t n, const dtx__plan_t *p, int arg) {
  if (!p->lo && !p->hi)
    return n;
  size_t f = p->neq;
  n += (size_t)snprintf(sql + n, SQL_MAX - n, "%sb%zu=%d", f ? " AND " : "",
                        f, dtx__value_bracket(p->lo ? p->lo : p->hi));
  if (p->lo)
    n += (size_t)snprintf(sql + n, SQL_MAX - n, " AND v%zu%s?%d", f,
                          p->lo_incl ? ">=" : ">", arg);
  if (p->hi)
    n += (size_t)snprintf(sql + n, SQL_MAX - n, " AND v%zu%s?%d", f,
                          p->hi_incl ? "<=" : "<", arg + 1);
  return n;
}

static void bind_range(sqlite3_stmt *st, const dtx__plan_t *p, int arg) {
  if (p->lo)
    bind_bound(st, arg, p->lo);
  if (p->hi)
    bind_bound(st, arg + 1, p->hi);
}

static int index_candidates(sq_cursor_t *cur, const dtx__plan_t *p) {
  char sql[SQL_MAX];
  size_t n = select_eq(sql, p, p->lo || p->hi);
  int arg = (int)(2 * p->neq + 1);
  n = where_range(sql, n, p, arg);
  if (n >= sizeof sql)
    return dtx__err(DTX_EBACKEND, "sqlite: index query too long");
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(cur->c, sql, 0, &st);
  if (rc < 0)
    return rc;
  /* Odometer over the equality value sets (none empty: DTX__PLAN_NONE). */
  size_t pos[16] = {0}, cap = 0;
  for (;;) {
    sqlite3_reset(st);
    if ((rc = bind_eq(st, p, pos)) < 0)
      return rc;
    bind_range(st, p, arg);
    if ((rc = collect_rows(cur, st, &cap)) < 0)
      return rc;
    size_t f = p->neq;
    while (f > 0 && ++pos[f - 1] == json_array_size(p->eq[f - 1]))
      pos[--f] = 0;
    if (f == 0)
      break;
  }
  seqs_finish(cur);
  return 0;
}

/* ---- cursor -------------------------------------------------------------------------- */

/* For a write's cursor (dtx__sq_cursor_open_write), a malloc'd copy of a
 * match's checked body p[0..n) in *body, *blen (the row's bytes are
 * SQLite's only until the statement steps); nothing for another cursor. */
static int body_keep(sq_cursor_t *cur, const uint8_t *p, uint32_t n,
                     uint8_t **body, uint32_t *blen) {
  if (!cur->want_body)
    return 0;
  free(*body);
  *body = malloc(n ? n : 1);
  *blen = *body ? n : 0;
  if (!*body)
    return dtx__err(DTX_ENOMEM, "keeping a stored document");
  memcpy(*body, p, n);
  return 0;
}

static int load_one(sq_cursor_t *cur, const json_t *id) {
  const sq_coll_t *co = cur->coll;
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(cur->c, co->sql[SQ_C_BYID], co->h[SQ_C_BYID], &st);
  if (rc < 0)
    return rc;
  if ((rc = dtx__sq_bind_id(st, 1, id)) < 0)
    return rc;
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    const uint8_t *p;
    uint32_t n;
    cur->one_seq = sqlite3_column_int64(st, 0);
    rc = dtx__sq_body_view(cur->c, co, cur->one_seq, st, 1, &p, &n);
    if (rc == 0 && (rc = body_keep(cur, p, n, &cur->one_body,
                                   &cur->one_blen)) == 0)
      rc = dtx__sq_body_json(co, cur->one_seq, p, n, &cur->one);
    if (dtx__corrupt_skip(rc))
      rc = 0;
  } else if (src != SQLITE_DONE) {
    rc = dtx__sq_err(cur->c, src, "reading a document");
  }
  sqlite3_reset(st);
  return rc;
}

/* The walk of a sorted plan: the index rows under the equality prefix
 * (and within the range on the next field, if any: keyset paging starts
 * the walk at its key) in primary-key order -- the remaining fields, then
 * seq -- which is the sort's order, ties in insertion order.  Stepped lazily, so the first
 * match ends a find_one_and_update's search. */
static int sorted_open(sq_cursor_t *cur, const dtx__plan_t *p) {
  size_t nf = ((const sq_idx_t *)p->ix)->spec->nfields, pos[16] = {0};
  char sql[SQL_MAX];
  size_t n = select_eq(sql, p, p->lo || p->hi);
  n = where_range(sql, n, p, (int)(2 * p->neq + 1));
  n += (size_t)snprintf(sql + n, sizeof sql - n, " ORDER BY ");
  for (size_t f = p->neq; f < nf; f++)
    n += (size_t)snprintf(sql + n, sizeof sql - n, "b%zu, v%zu, ", f, f);
  n += (size_t)snprintf(sql + n, sizeof sql - n, "seq");
  if (n >= sizeof sql)
    return dtx__err(DTX_EBACKEND, "sqlite: index query too long");
  int rc = dtx__sq_prep(cur->c, sql, 0, &cur->scan);
  if (rc == 0)
    rc = bind_eq(cur->scan, p, pos);
  if (rc == 0)
    bind_range(cur->scan, p, (int)(2 * p->neq + 1));
  if (rc < 0)
    cur->scan = NULL;
  return rc;
}

static int index_of(const void *coll, size_t i, dtx__plan_index_t *out) {
  const sq_idx_t *ix = &((const sq_coll_t *)coll)->idx[i];
  *out = (dtx__plan_index_t){ix, ix->spec, ix->multikey};
  return 1;
}

/* cur->bf: the BSON twin of the filter, or NULL (the empty filter, which
 * matches everything, or one the BSON engine does not compile: the json_t
 * matcher then judges, and the BSON engine's refusal is no error). */
static void bfilter_open(sq_cursor_t *cur, const json_t *filter_spec) {
  if (!json_is_object(filter_spec) || json_object_size(filter_spec) == 0)
    return;
  bson_t spec = BSON_INITIALIZER;
  if (dtx__bson_from_json(filter_spec, &spec) < 0 ||
      dtx__bfilter_compile(&spec, &cur->bf) < 0) {
    cur->bf = NULL;
    dtx__err_clear();
  }
  bson_destroy(&spec);
}

static int cursor_open(sq_cursor_t *cur, sq_conn_t *c, const sq_coll_t *coll,
                       const json_t *filter_spec, const dtx__filter_t *f,
                       const json_t *sort, int want_body) {
  memset(cur, 0, sizeof *cur);
  cur->want_body = want_body;
  cur->c = c;
  cur->coll = coll;
  cur->f = f;
  const json_t *id = dtx__plan_one_id(filter_spec);
  dtx__plan_t p = {.kind = CUR_ONE};
  int rc = id ? 0
              : dtx__plan_choose(filter_spec, sort, coll, coll->nidx,
                                 index_of, &p);
  if (rc < 0)
    return rc;
  if (p.kind == DTX__PLAN_IDS && json_array_size(p.ids) == 1 &&
      dtx__id_valid(json_array_get(p.ids, 0))) {
    p.kind = CUR_ONE;
    id = json_array_get(p.ids, 0);
  }
  cur->kind = p.kind;
  if (p.kind != CUR_ONE) /* one document is matched as json_t */
    bfilter_open(cur, filter_spec);
  switch (p.kind) {
  case CUR_ONE:
    rc = load_one(cur, id);
    break;
  case DTX__PLAN_IDS:
    rc = ids_candidates(cur, p.ids);
    break;
  case DTX__PLAN_INDEX:
    rc = index_candidates(cur, &p);
    break;
  case DTX__PLAN_SORTED:
    if ((rc = sorted_open(cur, &p)) == 0)
      rc = 1;
    break;
  case DTX__PLAN_SCAN:
    rc = dtx__sq_prep(c, coll->sql[SQ_C_SCAN], coll->h[SQ_C_SCAN],
                      &cur->scan);
    break;
  }
  dtx__plan_free(&p);
  if (rc < 0)
    dtx__sq_cursor_close(cur);
  return rc;
}

int dtx__sq_cursor_open_sorted(sq_cursor_t *cur, sq_conn_t *c,
                               const sq_coll_t *coll,
                               const json_t *filter_spec,
                               const dtx__filter_t *f, const json_t *sort) {
  return cursor_open(cur, c, coll, filter_spec, f, sort, 0);
}

int dtx__sq_cursor_open_write(sq_cursor_t *cur, sq_conn_t *c,
                              const sq_coll_t *coll,
                              const json_t *filter_spec,
                              const dtx__filter_t *f, const json_t *sort) {
  return cursor_open(cur, c, coll, filter_spec, f, sort, 1);
}

int dtx__sq_cursor_open(sq_cursor_t *cur, sq_conn_t *c, const sq_coll_t *coll,
                        const json_t *filter_spec, const dtx__filter_t *f) {
  return cursor_open(cur, c, coll, filter_spec, f, NULL, 0);
}

/* Steps the by-seq statement to the row of seq: *row is then that
 * statement, on its row (the caller resets it). */
static int fetch_seq(sq_cursor_t *cur, int64_t seq, sqlite3_stmt **row) {
  const sq_coll_t *co = cur->coll;
  sqlite3_stmt *st;
  *row = NULL;
  int rc = dtx__sq_prep(cur->c, co->sql[SQ_C_BYSEQ], co->h[SQ_C_BYSEQ], &st);
  if (rc < 0)
    return rc;
  sqlite3_bind_int64(st, 1, seq);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW) {
    *row = st;
    return 0;
  }
  sqlite3_reset(st);
  if (src != SQLITE_DONE)
    return dtx__sq_err(cur->c, src, "reading a document");
  return dtx__err(DTX_EBACKEND,
                  "sqlite: index of '%s' lists a missing document (seq %lld)",
                  co->name, (long long)seq);
}

/* The candidate at column col of row (the document at seq): *doc the
 * document when it matches, NULL when not.  With the BSON filter it is
 * judged on the stored bytes and only a match is converted; a match error
 * (a $regex past PCRE2's limits) is returned, as store.c returns the
 * json_t matcher's. */
static int judge_row(sq_cursor_t *cur, int64_t seq, sqlite3_stmt *row,
                     int col, json_t **doc) {
  const uint8_t *p;
  uint32_t n;
  *doc = NULL;
  dtx__docs_examined++;
  int rc = dtx__sq_body_view(cur->c, cur->coll, seq, row, col, &p, &n);
  if (rc == 0 && cur->bf && !dtx__bfilter_match(cur->bf, p, n))
    return dtx__bfilter_error(cur->bf);
  if (rc == 0)
    rc = dtx__sq_body_json(cur->coll, seq, p, n, doc);
  if (rc == 0 && ((!cur->bf && !dtx__filter_match(cur->f, *doc)) ||
                  (rc = body_keep(cur, p, n, &cur->body, &cur->blen)) < 0)) {
    json_decref(*doc); /* no match (or no copy of one) */
    *doc = NULL;
  }
  /* A body the bridge refuses is skipped by the audit's reads as one the
   * check refuses, whichever matcher judged it. */
  return dtx__corrupt_skip(rc) ? 0 : rc;
}

/* judge_row on the document of seq s, fetched by its own statement. */
static int judge_seq(sq_cursor_t *cur, int64_t s, json_t **d) {
  sqlite3_stmt *row;
  int rc = fetch_seq(cur, s, &row);
  if (rc < 0)
    return rc;
  rc = judge_row(cur, s, row, 0, d);
  sqlite3_reset(row);
  return rc;
}

int dtx__sq_cursor_next(sq_cursor_t *cur, int64_t *seq, json_t **doc) {
  int rc;
  *doc = NULL;
  for (;;) {
    int64_t s;
    json_t *d = NULL;
    if (cur->kind == CUR_ONE) {
      d = cur->one;
      s = cur->one_seq;
      cur->one = NULL;
      free(cur->body);
      cur->body = cur->one_body;
      cur->blen = cur->one_blen;
      cur->one_body = NULL;
      cur->kind = CUR_DONE;
      if (!d)
        return 0;
      dtx__docs_examined++;
      if (!dtx__filter_match(cur->f, d)) {
        json_decref(d);
        continue;
      }
    } else if (cur->kind == DTX__PLAN_SCAN || cur->kind == DTX__PLAN_SORTED) {
      int src = sqlite3_step(cur->scan);
      if (src != SQLITE_ROW) {
        sqlite3_reset(cur->scan);
        const char *what =
            cur->kind == DTX__PLAN_SCAN ? "scanning" : "reading an index";
        cur->kind = CUR_DONE; /* exhausted: nothing more to step */
        return src == SQLITE_DONE ? 0 : dtx__sq_err(cur->c, src, what);
      }
      s = sqlite3_column_int64(cur->scan, 0);
      if (cur->kind == DTX__PLAN_SCAN) {
        if ((rc = judge_row(cur, s, cur->scan, 1, &d)) < 0)
          return rc;
      } else if ((rc = judge_seq(cur, s, &d)) < 0) {
        return rc;
      }
    } else if (cur->pos < cur->nseq) {
      s = cur->seqs[cur->pos++];
      if ((rc = judge_seq(cur, s, &d)) < 0)
        return rc;
    } else {
      return 0;
    }
    if (d) {
      *seq = s;
      *doc = d;
      return 1;
    }
  }
}

void dtx__sq_cursor_close(sq_cursor_t *cur) {
  if (cur->scan)
    sqlite3_reset(cur->scan);
  cur->scan = NULL;
  json_decref(cur->one);
  cur->one = NULL;
  free(cur->one_body);
  free(cur->body);
  cur->one_body = cur->body = NULL;
  free(cur->seqs);
  cur->seqs = NULL;
  cur->nseq = cur->pos = 0;
  dtx__bfilter_free(cur->bf);
  cur->bf = NULL;
}

int dtx__sq_cursor_next_body(sq_cursor_t *cur, int64_t *seq, json_t **doc,
                             uint8_t **body, uint32_t *blen) {
  DTX_ASSERT(cur->want_body, "sqlite.cursor_body_wanted");
  *body = NULL;
  *blen = 0;
  int rc = dtx__sq_cursor_next(cur, seq, doc);
  if (rc == 1) {
    DTX_ASSERT(cur->body, "sqlite.cursor_match_has_body");
    *body = cur->body;
    *blen = cur->blen;
    cur->body = NULL;
  }
  return rc;
}
