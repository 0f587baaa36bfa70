/* plan.c -- query planning for the SQLite backend, and the cursor that
 * yields matching documents.
 *
 * The planner reads the filter's top-level conjuncts (including those
 * inside $and, and the fields of an $elemMatch) of the forms
 *   {path: scalar}  {path: {$eq: scalar}}  {path: {$in: [scalars]}}
 *   {path: {$gt|$gte|$lt|$lte: number or string}}
 * and picks, in this order: the primary key for _id equality or $in; else
 * the secondary index whose leading fields have the most equalities (a
 * unique index fully covered by equalities wins), optionally followed by a
 * range on the next field; else a scan in seq order.  The index only
 * narrows the candidates: every candidate is loaded and checked with
 * dtx__filter_match, so an index may over-approximate but must never
 * miss a document.  Two rules keep it from missing one:
 *   - sparse indexes omit documents without the fields, so they are not
 *     used for null equality;
 *   - index keys pair fields that run through the same array element by
 *     element, while {a.x: 1, a.y: 2} may match x and y in different
 *     elements; so conditions on fields that share a first path segment
 *     are combined only when they come from one $elemMatch (which does
 *     require the same element) and differ right after its path;
 *   - likewise {a: {$gte: 2, $lt: 3}} matches a: [1, 5], so two bounds
 *     narrow one key only inside $elemMatch.
 * The last two rules apply to multikey indexes only: like MongoDB, an
 * index remembers whether any document ever gave it several keys, and
 * while none has, each document has one key tuple and conditions combine
 * freely.
 * Candidates are collected from the index first, sorted by seq and made
 * distinct (a multikey index lists a document once per matching key), so
 * results come in insertion order and the caller can stop early. */
#include "store/sqlite/sqlite_int.h"

#include "store/conds.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

enum { PLAN_SCAN, PLAN_IDS, PLAN_ONE, PLAN_INDEX, PLAN_SORTED };


static int range_bracket(const dtx__cond_t *r) {
  return dtx__value_bracket(r->lo ? r->lo : r->hi);
}

/* ---- candidates ----------------------------------------------------------------------- */

static int seqs_push(sq_cursor_t *cur, size_t *cap, int64_t seq) {
  if (cur->nseq == *cap) {
    size_t ncap = *cap ? *cap * 2 : 16;
    int64_t *n = realloc(cur->seqs, ncap * sizeof *n);
    if (!n)
      return dtx__err(DTX_ENOMEM, "collecting candidates");
    cur->seqs = n;
    *cap = ncap;
  }
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

static int bind_bound(sqlite3_stmt *st, int i, const json_t *v) {
  if (json_is_string(v))
    return sqlite3_bind_text(st, i, json_string_value(v),
                             (int)json_string_length(v), SQLITE_STATIC);
  if (json_is_integer(v))
    return sqlite3_bind_int64(st, i, json_integer_value(v));
  return sqlite3_bind_double(st, i, json_real_value(v));
}

static int index_candidates(sq_cursor_t *cur, const dtx__choice_t *ch) {
  const sq_idx_t *ix = ch->ix;
  char sql[1200];
  size_t n = (size_t)snprintf(sql, sizeof sql, "SELECT seq FROM %s WHERE ",
                              ix->table);
  int arg = 1;
  for (size_t f = 0; f < ch->neq; f++, arg += 2)
    n += (size_t)snprintf(sql + n, sizeof sql - n,
                          "%sb%zu=?%d AND v%zu=?%d", f ? " AND " : "", f, arg,
                          f, arg + 1);
  int rbr = 0;
  const json_t *lo = NULL, *hi = NULL;
  if (ch->range) {
    rbr = range_bracket(ch->range);
    lo = ch->range->lo;
    hi = ch->range->hi;
    /* {a: {$gte: 2, $lt: 3}} matches a: [1, 5] (each bound met by some
     * element), so in a multikey index both bounds narrow one key only
     * inside $elemMatch.  Bounds in two brackets are never combined. */
    if (lo && hi &&
        ((ix->multikey && !ch->range->one_elem) ||
         dtx__value_bracket(lo) != dtx__value_bracket(hi)))
      hi = NULL;
    size_t f = ch->neq;
    n += (size_t)snprintf(sql + n, sizeof sql - n, "%sb%zu=%d",
                          f ? " AND " : "", f, rbr);
    if (lo)
      n += (size_t)snprintf(sql + n, sizeof sql - n, " AND v%zu%s?%d", f,
                            ch->range->lo_incl ? ">=" : ">", arg);
    if (hi)
      n += (size_t)snprintf(sql + n, sizeof sql - n, " AND v%zu%s?%d", f,
                            ch->range->hi_incl ? "<=" : "<", arg + 1);
  }
  if (n >= sizeof sql)
    return dtx__err(DTX_EBACKEND, "sqlite: index query too long");
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(cur->c, sql, 0, &st);
  if (rc < 0)
    return rc;
  /* Odometer over the equality value sets. */
  size_t pos[16] = {0}, cap = 0;
  for (size_t f = 0; f < ch->neq; f++)
    if (json_array_size(ch->eq[f]->vals) == 0)
      return 0; /* $in: [] matches nothing */
  for (;;) {
    sqlite3_reset(st);
    for (size_t f = 0; f < ch->neq; f++)
      if ((rc = dtx__sq_bind_key(st, (int)(2 * f + 1),
                                 json_array_get(ch->eq[f]->vals, pos[f]))) <
          0)
        return rc;
    if (lo)
      bind_bound(st, arg, lo);
    if (hi)
      bind_bound(st, arg + 1, hi);
    if ((rc = collect_rows(cur, st, &cap)) < 0)
      return rc;
    size_t f = ch->neq;
    while (f > 0 && ++pos[f - 1] == json_array_size(ch->eq[f - 1]->vals))
      pos[--f] = 0;
    if (f == 0)
      break;
  }
  seqs_finish(cur);
  return 0;
}

/* ---- cursor -------------------------------------------------------------------------- */

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
    cur->one_seq = sqlite3_column_int64(st, 0);
    rc = dtx__sq_body_parse((const char *)sqlite3_column_text(st, 1),
                            sqlite3_column_bytes(st, 1), &cur->one);
  } else if (src != SQLITE_DONE) {
    rc = dtx__sq_err(cur->c, src, "reading a document");
  }
  sqlite3_reset(st);
  return rc;
}

int dtx__sq_cursor_open(sq_cursor_t *cur, sq_conn_t *c, const sq_coll_t *coll,
                        const json_t *filter_spec, const dtx__filter_t *f) {
  memset(cur, 0, sizeof *cur);
  cur->c = c;
  cur->coll = coll;
  cur->f = f;
  cur->kind = PLAN_SCAN;
  /* The primitive's usual filters, {_id: value} and {_id: value, more},
   * need no planning: a top-level _id equality is the plan the conditions
   * below would pick (the filter still checks the rest), and skipping them
   * saves collecting them into a ~5 KB struct, whose malloc showed in
   * profiles of batched transfers (malloc_consolidate). */
  if (json_is_object(filter_spec)) {
    const json_t *id = json_object_get(filter_spec, "_id");
    if (id && dtx__id_valid(id)) { /* never an operator document */
      cur->kind = PLAN_ONE;
      int rc = load_one(cur, id);
      if (rc < 0)
        dtx__sq_cursor_close(cur);
      return rc;
    }
  }
  dtx__conds_t *cs = malloc(sizeof *cs);
  if (!cs)
    return dtx__err(DTX_ENOMEM, "planning a query");
  dtx__conds_collect(cs, filter_spec);

  int rc = 0;
  const dtx__cond_t *idc = NULL;
  for (size_t i = 0; i < cs->n && !idc; i++)
    if (cs->c[i].kind == DTX__COND_EQ && cs->c[i].group == 0 &&
        strcmp(cs->c[i].path, "_id") == 0)
      idc = &cs->c[i];
  if (idc) {
    const json_t *v = json_array_get(idc->vals, 0);
    if (json_array_size(idc->vals) == 1 && dtx__id_valid(v)) {
      cur->kind = PLAN_ONE;
      rc = load_one(cur, v);
    } else {
      cur->kind = PLAN_IDS;
      rc = ids_candidates(cur, idc->vals);
    }
  } else {
    dtx__choice_t best = {0};
    for (size_t i = 0; i < coll->nidx; i++)
      dtx__conds_consider(cs, &coll->idx[i], coll->idx[i].spec,
                          coll->idx[i].multikey, &best);
    if (best.ix) {
      cur->kind = PLAN_INDEX;
      rc = index_candidates(cur, &best);
    } else {
      rc = dtx__sq_prep(c, coll->sql[SQ_C_SCAN], coll->h[SQ_C_SCAN],
                        &cur->scan);
    }
  }
  dtx__conds_free(cs);
  free(cs);
  if (rc < 0)
    dtx__sq_cursor_close(cur);
  return rc;
}

/* The walk of a sorted plan (dtx__conds_sorted): the index rows under
 * the equality prefix in primary-key order -- the remaining fields, then
 * seq -- which is the sort's order, ties in insertion order.  Stepped
 * lazily, so the first match ends a find_one_and_update's search. */
static int sorted_open(sq_cursor_t *cur, const dtx__choice_t *ch) {
  const sq_idx_t *ix = ch->ix;
  size_t nf = ix->spec->nfields;
  char sql[1200];
  size_t n = (size_t)snprintf(sql, sizeof sql, "SELECT seq FROM %s%s",
                              ix->table, ch->neq ? " WHERE " : "");
  for (size_t f = 0; f < ch->neq; f++)
    n += (size_t)snprintf(sql + n, sizeof sql - n,
                          "%sb%zu=?%zu AND v%zu=?%zu", f ? " AND " : "", f,
                          2 * f + 1, f, 2 * f + 2);
  n += (size_t)snprintf(sql + n, sizeof sql - n, " ORDER BY ");
  for (size_t f = ch->neq; f < nf; f++)
    n += (size_t)snprintf(sql + n, sizeof sql - n, "b%zu, v%zu, ", f, f);
  n += (size_t)snprintf(sql + n, sizeof sql - n, "seq");
  if (n >= sizeof sql)
    return dtx__err(DTX_EBACKEND, "sqlite: index query too long");
  int rc = dtx__sq_prep(cur->c, sql, 0, &cur->scan);
  for (size_t f = 0; rc == 0 && f < ch->neq; f++)
    rc = dtx__sq_bind_key(cur->scan, (int)(2 * f + 1),
                          json_array_get(ch->eq[f]->vals, 0));
  if (rc < 0)
    cur->scan = NULL;
  return rc;
}

int dtx__sq_cursor_open_sorted(sq_cursor_t *cur, sq_conn_t *c,
                               const sq_coll_t *coll,
                               const json_t *filter_spec,
                               const dtx__filter_t *f, const json_t *sort) {
  dtx__conds_t *cs = sort ? malloc(sizeof *cs) : NULL;
  if (!cs)
    return sort ? dtx__err(DTX_ENOMEM, "planning a query")
                : dtx__sq_cursor_open(cur, c, coll, filter_spec, f);
  dtx__conds_collect(cs, filter_spec);
  dtx__choice_t best = {0}, sorted = {0}, ch;
  int have_id = 0;
  for (size_t i = 0; i < cs->n && !have_id; i++)
    have_id = cs->c[i].kind == DTX__COND_EQ && cs->c[i].group == 0 &&
              strcmp(cs->c[i].path, "_id") == 0;
  for (size_t i = 0; i < coll->nidx && !have_id; i++) {
    dtx__conds_consider(cs, &coll->idx[i], coll->idx[i].spec,
                        coll->idx[i].multikey, &best);
    if (dtx__conds_sorted(cs, &coll->idx[i], coll->idx[i].spec,
                          coll->idx[i].multikey, sort, &ch) &&
        (!sorted.ix || ch.score > sorted.score))
      sorted = ch;
  }
  int rc = 0;
  /* An _id lookup, or an index with more equalities, reads fewer
   * documents than the walk would (which may pass non-matching ones). */
  if (sorted.ix && best.score <= sorted.score) {
    memset(cur, 0, sizeof *cur);
    cur->c = c;
    cur->coll = coll;
    cur->f = f;
    cur->kind = PLAN_SORTED;
    rc = sorted_open(cur, &sorted);
    if (rc == 0)
      rc = 1;
  }
  dtx__conds_free(cs);
  free(cs);
  if (rc == 0)
    rc = dtx__sq_cursor_open(cur, c, coll, filter_spec, f);
  return rc;
}

static int fetch_seq(sq_cursor_t *cur, int64_t seq, json_t **doc) {
  const sq_coll_t *co = cur->coll;
  sqlite3_stmt *st;
  *doc = NULL;
  int rc = dtx__sq_prep(cur->c, co->sql[SQ_C_BYSEQ], co->h[SQ_C_BYSEQ], &st);
  if (rc < 0)
    return rc;
  sqlite3_bind_int64(st, 1, seq);
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    rc = dtx__sq_body_parse((const char *)sqlite3_column_text(st, 0),
                            sqlite3_column_bytes(st, 0), doc);
  else if (src != SQLITE_DONE)
    rc = dtx__sq_err(cur->c, src, "reading a document");
  else
    rc = dtx__err(DTX_EBACKEND,
                  "sqlite: index of '%s' lists a missing document (seq %lld)",
                  co->name, (long long)seq);
  sqlite3_reset(st);
  return rc;
}

int dtx__sq_cursor_next(sq_cursor_t *cur, int64_t *seq, json_t **doc) {
  int rc;
  *doc = NULL;
  switch (cur->kind) {
  case PLAN_ONE:
    while (cur->one) {
      json_t *d = cur->one;
      cur->one = NULL;
      dtx__docs_examined++;
      if (dtx__filter_match(cur->f, d)) {
        *seq = cur->one_seq;
        *doc = d;
        return 1;
      }
      json_decref(d);
    }
    return 0;
  case PLAN_SCAN:
    for (;;) {
      int src = sqlite3_step(cur->scan);
      if (src != SQLITE_ROW) {
        sqlite3_reset(cur->scan);
        cur->kind = PLAN_IDS; /* exhausted: nothing more to step */
        return src == SQLITE_DONE ? 0
                                  : dtx__sq_err(cur->c, src, "scanning");
      }
      json_t *d;
      if ((rc = dtx__sq_body_parse(
               (const char *)sqlite3_column_text(cur->scan, 1),
               sqlite3_column_bytes(cur->scan, 1), &d)) < 0)
        return rc;
      dtx__docs_examined++;
      if (dtx__filter_match(cur->f, d)) {
        *seq = sqlite3_column_int64(cur->scan, 0);
        *doc = d;
        return 1;
      }
      json_decref(d);
    }
  case PLAN_SORTED:
    for (;;) {
      int src = sqlite3_step(cur->scan);
      if (src != SQLITE_ROW) {
        sqlite3_reset(cur->scan);
        cur->kind = PLAN_IDS; /* exhausted: nothing more to step */
        return src == SQLITE_DONE ? 0
                                  : dtx__sq_err(cur->c, src, "reading an index");
      }
      int64_t s = sqlite3_column_int64(cur->scan, 0);
      json_t *d;
      if ((rc = fetch_seq(cur, s, &d)) < 0)
        return rc;
      dtx__docs_examined++;
      if (dtx__filter_match(cur->f, d)) {
        *seq = s;
        *doc = d;
        return 1;
      }
      json_decref(d);
    }
  default:
    while (cur->pos < cur->nseq) {
      int64_t s = cur->seqs[cur->pos++];
      json_t *d;
      if ((rc = fetch_seq(cur, s, &d)) < 0)
        return rc;
      dtx__docs_examined++;
      if (dtx__filter_match(cur->f, d)) {
        *seq = s;
        *doc = d;
        return 1;
      }
      json_decref(d);
    }
    return 0;
  }
}

void dtx__sq_cursor_close(sq_cursor_t *cur) {
  if (cur->scan)
    sqlite3_reset(cur->scan);
  cur->scan = NULL;
  json_decref(cur->one);
  cur->one = NULL;
  free(cur->seqs);
  cur->seqs = NULL;
  cur->nseq = cur->pos = 0;
}
