/* docs.c -- the document operations of the SQLite backend: insert, find,
 * count, modify_one (update, delete or upsert one document) and
 * modify_many; each write keeps its index rows (keyrows.c) in step.
 *
 * Writes run as group-commit operations (commit.c), so each runs inside
 * the batch's write transaction and its own savepoint: the filter check,
 * the update and the index rows of one document change together or not at
 * all.  Operations that handle several documents and keep those done
 * before a failure (insert of many, modify_many) set keep_partial and
 * wrap each document in a nested savepoint of their own.  Reads run in a
 * read transaction on a pooled connection and see one snapshot.
 *
 * An index row holds, per indexed field, the value's type bracket and the
 * value (numbers as INTEGER or REAL, strings as TEXT, booleans as 0/1,
 * null and missing as 0, objects and arrays as canonical JSON text, see
 * codec.c).  SQLite compares INTEGER and REAL by value, so 1 and 1.0 are
 * one key, as in MongoDB.  The keys are read from the bytes the write
 * stores (the new document's) and from those its cursor read (the old
 * one's: dtx__sq_cursor_open_write), never from the json_t.
 *
 * Fence tombstones (src/store/fence.c): a delete keeps the deleted
 * document's fence record in _dtx_fence (coll, id), and an insert of that
 * _id takes it over and removes it, both in the write transaction of the
 * delete or insert; no read looks there. */
#include "store/sqlite/sqlite_int.h"

#include "doc/bdoc.h"
#include "util/buf.h"
#include "util/err.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- binding ------------------------------------------------------------------------- */

int dtx__sq_bind_id(sqlite3_stmt *st, int i, const json_t *id) {
  int src;
  if (json_is_integer(id))
    src = sqlite3_bind_int64(st, i, json_integer_value(id));
  else if (json_is_real(id))
    src = sqlite3_bind_double(st, i, json_real_value(id));
  else if (json_is_string(id))
    src = sqlite3_bind_text(st, i, json_string_value(id),
                            (int)json_string_length(id), SQLITE_STATIC);
  else if (dtx__id_valid(id)) {
    /* Objects, null and booleans: their canonical text (numbers by value)
     * as a BLOB, which never equals a TEXT or numeric _id (codec.c). */
    char *text;
    size_t len;
    int rc = dtx__sq_text(id, 1, &text, &len);
    if (rc < 0)
      return rc;
    src = sqlite3_bind_blob(st, i, text, (int)len, free);
  } else
    return dtx__err(DTX_EINVAL, "_id cannot be an array");
  return src == SQLITE_OK ? 0
                          : dtx__err(DTX_EBACKEND, "sqlite: binding an _id");
}

/* ---- fence tombstones ------------------------------------------------------------------ */

/* The fence record at column 0 of st's row, a BSON document like a body
 * (format 4), into *rec. */
static int rec_get(sqlite3_stmt *st, const char *coll, json_t **rec) {
  char what[200];
  const uint8_t *p;
  uint32_t n;
  *rec = NULL;
  snprintf(what, sizeof what, "sqlite: a fence record of '%s' (_id ", coll);
  size_t k = strlen(what);
  dtx__sq_id_name(sqlite3_column_value(st, 1), what + k, sizeof what - k - 1);
  strncat(what, ")", sizeof what - strlen(what) - 1);
  int rc = dtx__sq_blob_check(st, 0, what, &p, &n);
  if (rc == 0 && (rc = dtx__bson_to_json(p, n, 0, rec)) < 0)
    rc = dtx__err_wrap(rc == DTX_ENOMEM ? rc : DTX_ECORRUPT, "%s", what);
  return rc;
}

/* The record a deleted document left under (co, id) in _dtx_fence
 * (src/store/fence.c): kept by the delete, taken by the next document of
 * that _id, both in the write transaction that deletes or creates it, so
 * no reader sees a document and its tombstone apart.  rm: 0 reads the
 * record into *rec (NULL when none), 1 removes it, 2 stores *rec. */
static int tomb(sq_wctx_t *w, const sq_coll_t *co, const json_t *id, int rm,
                json_t **rec) {
  static const char *const sql[] = {
      "SELECT rec, id FROM _dtx_fence WHERE coll=?1 AND id=?2",
      "DELETE FROM _dtx_fence WHERE coll=?1 AND id=?2",
      "INSERT OR REPLACE INTO _dtx_fence(coll, id, rec) VALUES(?1, ?2, ?3)",
  };
  sqlite3_stmt *st;
  if (rm == 0)
    *rec = NULL;
  if (!w->cat->has_fence && rm != 2)
    return 0; /* no delete ever kept a record in this store */
  int rc = dtx__sq_prep(w->c, sql[rm], 0, &st);
  if (rc < 0 || (rc = dtx__sq_bind_id(st, 2, id)) < 0)
    return rc;
  sqlite3_bind_text(st, 1, co->name, -1, SQLITE_STATIC);
  if (rm == 2) {
    uint8_t *bytes;
    size_t n;
    if ((rc = dtx__sq_body_bson(*rec, co->name, &bytes, &n)) < 0) {
      sqlite3_clear_bindings(st);
      return rc;
    }
    sqlite3_bind_blob(st, 3, bytes, (int)n, bson_free);
  }
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    rc = rec_get(st, co->name, rec);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (src != SQLITE_ROW && src != SQLITE_DONE)
    return dtx__sq_err(w->c, src, "reading or writing a fence record");
  return rc;
}

/* Every record coll's tombstones keep, in one read transaction. */
int dtx__sq_fence_records(dtx__backend_t *b, const char *coll, json_t **out) {
  sq_conn_t *c;
  sq_cat_t *cat;
  const sq_coll_t *co;
  sqlite3_stmt *st;
  *out = NULL;
  int rc = dtx__sq_read_begin(b, coll, &c, &cat, &co), src = SQLITE_DONE;
  if (rc < 0)
    return rc;
  json_t *arr = json_array();
  if (!arr)
    rc = dtx__err(DTX_ENOMEM, "reading the fence records of %s", coll);
  else if (co && cat->has_fence &&
           (rc = dtx__sq_prep(c,
                              "SELECT rec, id FROM _dtx_fence WHERE coll=?1",
                              0, &st)) == 0) {
    sqlite3_bind_text(st, 1, co->name, -1, SQLITE_STATIC);
    while (rc == 0 && (src = sqlite3_step(st)) == SQLITE_ROW) {
      json_t *rec = NULL;
      if ((rc = rec_get(st, coll, &rec)) == 0 &&
          json_array_append_new(arr, rec) < 0)
        rc = dtx__err(DTX_ENOMEM, "reading the fence records of %s", coll);
    }
    if (rc == 0 && src != SQLITE_DONE)
      rc = dtx__sq_err(c, src, "reading fence records");
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }
  dtx__sq_read_end(b, c, cat);
  if (rc < 0)
    json_decref(arr);
  else
    *out = arr;
  return rc;
}

/* ---- single-document writes --------------------------------------------------------------- */

/* The three writes below first pass the document to the shared check
 * (depth, validator, delete guard) with co's rules: co comes from the
 * catalog snapshot of this very write transaction.  An insert first takes
 * over the fence record its _id's last document left (fence.c), judging
 * the fenced upsert m by it (m NULL: a plain insert); doc is the caller's
 * private copy, and receives the record. */
static int insert_doc(sq_wctx_t *w, const sq_coll_t *co,
                      const dtx__modify_t *m, json_t *doc, int bypass) {
  sq_conn_t *c = w->c;
  const json_t *id = json_object_get(doc, "_id");
  sqlite3_stmt *st;
  json_t *rec;
  int rc = tomb(w, co, id, 0, &rec);
  if (rc == 0 && rec)
    rc = dtx__fence_revive(m, co->name, rec, doc);
  if (rc == 0)
    rc = dtx__doc_check_write(co->rules, co->name, NULL, doc, bypass);
  if (rc < 0) {
    json_decref(rec);
    return rc;
  }
  uint8_t *body = NULL;
  size_t blen;
  rc = dtx__sq_prep(c, co->sql[SQ_C_INS], co->h[SQ_C_INS], &st);
  if (rc < 0 || (rc = dtx__sq_bind_id(st, 1, id)) < 0 ||
      (rc = dtx__sq_body_bson(doc, co->name, &body, &blen)) < 0) {
    json_decref(rec);
    return rc;
  }
  /* The body outlives the statement: the index keys are read from it. */
  sqlite3_bind_blob(st, 2, body, (int)blen, SQLITE_STATIC);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (src != SQLITE_DONE) {
    bson_free(body);
    json_decref(rec);
    if ((src & 0xff) == SQLITE_CONSTRAINT) {
      return dtx__err_dupid(id);
    }
    return dtx__sq_err(c, src, "inserting a document");
  }
  int64_t seq = sqlite3_last_insert_rowid(c->db);
  for (size_t i = 0; rc == 0 && i < co->nidx; i++) {
    sq_keys_t keys;
    if ((rc = dtx__sq_keys_of(&co->idx[i], body, (uint32_t)blen, &keys)) == 0)
      rc = dtx__sq_keys_insert(w, &co->idx[i], &keys, seq);
    dtx__sq_keys_free(&keys);
  }
  bson_free(body);
  /* Last: a failed insert leaves the record where it was. */
  if (rc == 0 && rec)
    rc = tomb(w, co, id, 1, NULL);
  json_decref(rec);
  return rc;
}

/* update_doc's index rows: for each index whose fields the update
 * touched, the keys of the old bytes (obody) and of the new (body). */
static int update_keys(sq_wctx_t *w, const sq_coll_t *co, int64_t seq,
                       const json_t *old, const uint8_t *obody, uint32_t olen,
                       const json_t *doc, const uint8_t *body, size_t blen) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < co->nidx; i++) {
    const sq_idx_t *ix = &co->idx[i];
    sq_keys_t ko = {0}, kn = {0};
    if (dtx__index_fields_same(ix->spec, old, doc))
      continue;
    if ((rc = dtx__sq_keys_of(ix, obody, olen, &ko)) == 0 &&
        (rc = dtx__sq_keys_of(ix, body, (uint32_t)blen, &kn)) == 0)
      rc = dtx__sq_keys_update(w, ix, &ko, &kn, seq);
    dtx__sq_keys_free(&ko);
    dtx__sq_keys_free(&kn);
  }
  return rc;
}

/* old is the stored document and obody[0..olen) its stored bytes (the
 * write's cursor kept them: dtx__sq_cursor_open_write); doc replaces it. */
static int update_doc(sq_wctx_t *w, const sq_coll_t *co, int64_t seq,
                      const json_t *old, const uint8_t *obody, uint32_t olen,
                      const json_t *doc, int bypass) {
  sq_conn_t *c = w->c;
  sqlite3_stmt *st;
  int rc = dtx__doc_check_write(co->rules, co->name, old, doc, bypass);
  if (rc < 0)
    return rc;
  rc = dtx__sq_prep(c, co->sql[SQ_C_UPD], co->h[SQ_C_UPD], &st);
  if (rc < 0)
    return rc;
  uint8_t *body;
  size_t blen;
  if ((rc = dtx__sq_body_bson(doc, co->name, &body, &blen)) < 0)
    return rc;
  sqlite3_bind_int64(st, 1, seq);
  /* The body outlives the statement: the new keys are read from it. */
  sqlite3_bind_blob(st, 2, body, (int)blen, SQLITE_STATIC);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (src != SQLITE_DONE) {
    bson_free(body);
    return dtx__sq_err(c, src, "updating a document");
  }
  rc = update_keys(w, co, seq, old, obody, olen, doc, body, blen);
  bson_free(body);
  return rc;
}

/* Deletes old (row seq, stored bytes obody[0..olen)) by m, keeping its
 * fence record (fence.c) first: were the delete to fail after that, the
 * record would only repeat one the live document still holds.  Keeping the first record of a store
 * creates _dtx_fence, which reloads the snapshot: *cop is then the
 * collection in the new one. */
static int delete_doc(sq_wctx_t *w, const sq_coll_t **cop,
                      const dtx__modify_t *m, int64_t seq,
                      const json_t *old, const uint8_t *obody,
                      uint32_t olen) {
  sq_conn_t *c = w->c;
  sqlite3_stmt *st;
  json_t *rec = NULL;
  int rc = dtx__doc_check_write((*cop)->rules, (*cop)->name, old, NULL,
                                m->bypass);
  if (rc == 0)
    rc = dtx__fence_tombstone(m, old, &rec);
  if (rc == 0 && rec && !w->cat->has_fence &&
      (rc = dtx__sq_fence_table(w)) == 0 &&
      !(*cop = dtx__sq_coll_find(w->cat, m->coll)))
    rc = dtx__err(DTX_EBACKEND, "sqlite: collection '%s' vanished", m->coll);
  if (rc == 0 && rec)
    rc = tomb(w, *cop, json_object_get(old, "_id"), 2, &rec);
  json_decref(rec);
  if (rc < 0)
    return rc;
  const sq_coll_t *co = *cop;
  rc = dtx__sq_prep(c, co->sql[SQ_C_DEL], co->h[SQ_C_DEL], &st);
  if (rc < 0)
    return rc;
  sqlite3_bind_int64(st, 1, seq);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  if (src != SQLITE_DONE)
    return dtx__sq_err(c, src, "deleting a document");
  for (size_t i = 0; rc == 0 && i < co->nidx; i++) {
    sq_keys_t keys;
    if ((rc = dtx__sq_keys_of(&co->idx[i], obody, olen, &keys)) == 0)
      rc = dtx__sq_keys_delete(c, &co->idx[i], &keys, seq);
    dtx__sq_keys_free(&keys);
  }
  return rc;
}

/* A nested savepoint around one document's write when it may take more
 * than one statement: secondary index rows, or a fence record kept or
 * taken over (fence tombstones: a store that has _dtx_fence, or a delete,
 * which may create it).  Without either, a document's write is one
 * statement, atomic by itself.  On error the savepoint is rolled back, so
 * the document is unchanged.  on: the value savepoint_begin returned
 * (1: a savepoint was opened). */
static int savepoint_need(const sq_wctx_t *w, const sq_coll_t *co,
                          int is_delete) {
  return co->nidx || w->cat->has_fence || is_delete;
}

static int savepoint_begin(sq_conn_t *c, int on) {
  return on ? dtx__sq_exec(c, "SAVEPOINT doc") : 0;
}

static int savepoint_end(sq_conn_t *c, int on, int rc) {
  if (!on)
    return rc;
  if (rc < 0) {
    char keep[512];
    snprintf(keep, sizeof keep, "%s", dtx_errdetail());
    if (dtx__sq_exec(c, "ROLLBACK TO doc") < 0 ||
        dtx__sq_exec(c, "RELEASE doc") < 0)
      return dtx__err(DTX_EBACKEND, "%s; then the savepoint failed: %s",
                      keep, dtx_errdetail());
    dtx__err(rc, "%s", keep);
    return rc;
  }
  return dtx__sq_exec(c, "RELEASE doc");
}

/* ---- insert ---------------------------------------------------------------------------------- */

typedef struct ins_arg {
  const char *coll;
  json_t *const *docs;
  size_t n, done;
  int bypass;
} ins_arg_t;

static int insert_run(sq_wctx_t *w, sq_op_t *op) {
  ins_arg_t *a = op->arg;
  const sq_coll_t *co;
  int rc = dtx__sq_coll_ensure(w, a->coll, &co);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < a->n; i++) {
    int sp = a->n > 1 && savepoint_need(w, co, 0);
    if ((rc = savepoint_begin(w->c, sp)) < 0)
      return rc;
    rc = insert_doc(w, co, NULL, a->docs[i], a->bypass);
    rc = savepoint_end(w->c, sp, rc);
    if (rc < 0)
      return a->n > 1 ? dtx__err_wrap(rc, "document %zu", i) : rc;
    a->done++;
  }
  return 0;
}

static void insert_discard(sq_op_t *op) { ((ins_arg_t *)op->arg)->done = 0; }

int dtx__sq_insert(dtx__backend_t *b, const char *coll, json_t *const *docs,
                   size_t n, int bypass, size_t *ninserted) {
  ins_arg_t a = {coll, docs, n, 0, bypass};
  sq_op_t op = {.run = insert_run,
                .discard = insert_discard,
                .arg = &a,
                .keep_partial = n > 1};
  int rc = dtx__sq_submit(b, &op);
  if (ninserted)
    *ninserted = a.done;
  return rc;
}

/* ---- find and count ------------------------------------------------------------------------- */

int dtx__sq_find(dtx__backend_t *b, const char *coll, const json_t *fspec,
                 const dtx__filter_t *f, const json_t *sort, int64_t skip,
                 int64_t limit, json_t **out) {
  sq_conn_t *c;
  sq_cat_t *cat;
  const sq_coll_t *co;
  *out = NULL;
  int rc = dtx__sq_read_begin(b, coll, &c, &cat, &co);
  if (rc < 0)
    return rc;
  json_t *arr = json_array();
  if (!arr) {
    rc = dtx__err(DTX_ENOMEM, "finding documents");
  } else if (co) {
    sq_cursor_t cur;
    int64_t seq, nmatch = 0;
    json_t *doc;
    /* A sort an index walk delivers (sorted == 1) is as good as none. */
    int sorted = dtx__sq_cursor_open_sorted(&cur, c, co, fspec, f, sort);
    rc = sorted < 0 ? sorted : 0;
    if (sorted == 1)
      sort = NULL;
    if (rc == 0) {
      while ((rc = dtx__sq_cursor_next(&cur, &seq, &doc)) == 1) {
        /* Without sort, skip and limit apply as matches arrive, and the
         * scan stops once the page is full. */
        if (!sort && nmatch++ < skip) {
          json_decref(doc);
          continue;
        }
        if (json_array_append_new(arr, doc) < 0) {
          rc = dtx__err(DTX_ENOMEM, "finding documents");
          break;
        }
        if (!sort && limit > 0 && (int64_t)json_array_size(arr) >= limit) {
          rc = 0;
          break;
        }
      }
      dtx__sq_cursor_close(&cur);
    }
  }
  dtx__sq_read_end(b, c, cat);
  if (rc == 0 && sort && (rc = dtx__sort_array(arr, sort)) == 0)
    rc = dtx__page_array(&arr, skip, limit);
  if (rc < 0) {
    json_decref(arr);
    return rc;
  }
  *out = arr;
  return 0;
}

int dtx__sq_count(dtx__backend_t *b, const char *coll, const json_t *fspec,
                  const dtx__filter_t *f, int64_t *out) {
  sq_conn_t *c;
  sq_cat_t *cat;
  const sq_coll_t *co;
  *out = 0;
  int rc = dtx__sq_read_begin(b, coll, &c, &cat, &co);
  if (rc < 0)
    return rc;
  int64_t n = 0;
  if (co && (!fspec || json_object_size(fspec) == 0)) {
    sqlite3_stmt *st;
    if ((rc = dtx__sq_prep(c, co->sql[SQ_C_COUNT], co->h[SQ_C_COUNT], &st)) ==
        0) {
      int src = sqlite3_step(st);
      if (src == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
      else
        rc = dtx__sq_err(c, src, "counting documents");
      sqlite3_reset(st);
    }
  } else if (co) {
    sq_cursor_t cur;
    int64_t seq;
    json_t *doc;
    if ((rc = dtx__sq_cursor_open(&cur, c, co, fspec, f)) == 0) {
      while ((rc = dtx__sq_cursor_next(&cur, &seq, &doc)) == 1) {
        json_decref(doc);
        n++;
      }
      dtx__sq_cursor_close(&cur);
    }
  }
  dtx__sq_read_end(b, c, cat);
  if (rc < 0)
    return rc;
  *out = n;
  return 0;
}

/* ---- modify_one ------------------------------------------------------------------------------ */

typedef struct mod_arg {
  const dtx__modify_t *m;
  dtx__modify_result_t *res;
  int64_t matched, modified; /* modify_many */
} mod_arg_t;

/* The first match in insertion order, or with a sort the least one (the
 * earliest of equals, as a stable sort would give): the first one an
 * index walk in sort order meets, or else the least of all matches. */
static int pick_first(sq_conn_t *c, const sq_coll_t *co,
                      const dtx__modify_t *m, int64_t *seq, json_t **doc,
                      uint8_t **body, uint32_t *blen) {
  sq_cursor_t cur;
  *doc = NULL;
  *body = NULL;
  *blen = 0;
  int rc = dtx__sq_cursor_open_write(&cur, c, co, m->filter_spec, m->filter,
                                     m->sort);
  if (rc < 0)
    return rc;
  const json_t *sort = rc == 1 ? NULL : m->sort;
  int64_t s;
  json_t *d;
  uint8_t *b;
  uint32_t bl;
  while ((rc = dtx__sq_cursor_next_body(&cur, &s, &d, &b, &bl)) == 1) {
    if (!*doc || dtx__sort_cmp(sort, d, *doc) < 0) {
      json_decref(*doc);
      free(*body);
      *doc = d;
      *body = b;
      *blen = bl;
      *seq = s;
    } else {
      json_decref(d);
      free(b);
    }
    if (!sort)
      break;
  }
  dtx__sq_cursor_close(&cur);
  if (rc < 0) {
    json_decref(*doc);
    free(*body);
    *doc = NULL;
    *body = NULL;
    return rc;
  }
  return 0;
}

/* Inserts the document an upsert builds (dtx__upsert_doc). */
static int upsert(sq_wctx_t *w, const dtx__modify_t *m, int64_t now,
                  dtx__modify_result_t *res) {
  json_t *doc;
  int rc = dtx__modify_upsert_doc(m, now, &doc);
  if (rc == 0 && dtx__window_any(m))
    rc = dtx__window_test(m, doc, now);
  if (rc < 0) {
    json_decref(doc);
    return rc;
  }
  const sq_coll_t *co;
  if ((rc = dtx__sq_coll_ensure(w, m->coll, &co)) < 0 ||
      (rc = insert_doc(w, co, m, doc, m->bypass)) < 0) {
    json_decref(doc);
    return rc;
  }
  res->after = doc;
  res->upserted_id = json_incref(json_object_get(doc, "_id"));
  return 0;
}

static int modify_run(sq_wctx_t *w, sq_op_t *op) {
  mod_arg_t *a = op->arg;
  const dtx__modify_t *m = a->m;
  dtx__modify_result_t *res = a->res;
  const sq_coll_t *co = dtx__sq_coll_find(w->cat, m->coll);
  json_t *doc = NULL, *nd = NULL;
  uint8_t *body = NULL; /* doc's stored bytes, for its index keys */
  uint32_t blen = 0;
  int64_t seq = 0;
  int rc, changed;
  /* The store's clock for this write: read inside the write transaction,
   * under the write lock, so a time-bounded write (window.c) is judged at
   * its atomic step. */
  int64_t now = dtx__now_ms();
  if (co && (rc = pick_first(w->c, co, m, &seq, &doc, &body, &blen)) < 0)
    return rc;
  if (!doc)
    return m->upsert && m->update ? upsert(w, m, now, res) : 0;
  /* The update and the fence (fence.c), in this write transaction. */
  rc = dtx__modify_apply(m, doc, now, &nd, &changed);
  if (rc == 0 && changed && dtx__window_any(m))
    rc = dtx__window_test(m, doc, now);
  if (rc == 0 && !m->update) {
    rc = delete_doc(w, &co, m, seq, doc, body, blen);
    free(body);
    if (rc < 0) {
      json_decref(doc);
      return rc;
    }
    res->matched = res->modified = 1;
    res->before = doc;
    return 0;
  }
  if (rc == 0 && changed)
    rc = update_doc(w, co, seq, doc, body, blen, nd, m->bypass);
  free(body);
  if (rc < 0) {
    json_decref(doc);
    json_decref(nd);
    return rc;
  }
  res->matched = 1;
  res->modified = changed != 0;
  res->before = doc;
  res->after = nd;
  return 0;
}

static void modify_discard(sq_op_t *op) {
  dtx__modify_result_clear(((mod_arg_t *)op->arg)->res);
}

int dtx__sq_modify_one(dtx__backend_t *b, const dtx__modify_t *m,
                       dtx__modify_result_t *res) {
  memset(res, 0, sizeof *res);
  mod_arg_t a = {m, res, 0, 0};
  sq_op_t op = {.run = modify_run, .discard = modify_discard, .arg = &a};
  int rc = dtx__sq_submit(b, &op);
  if (rc < 0)
    dtx__modify_result_clear(res);
  return rc;
}

/* ---- modify_many ----------------------------------------------------------------------------- */

typedef struct match {
  int64_t seq;
  json_t *doc;
  uint8_t *body; /* doc's stored bytes, for its index keys */
  uint32_t blen;
} match_t;

/* All matches are collected before the first write, so the writes cannot
 * disturb the scan that finds them. */
static int collect_matches(sq_conn_t *c, const sq_coll_t *co,
                           const dtx__modify_t *m, match_t **out, size_t *n) {
  sq_cursor_t cur;
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  int rc = dtx__sq_cursor_open_write(&cur, c, co, m->filter_spec, m->filter,
                                     NULL);
  if (rc < 0)
    return rc;
  int64_t s;
  json_t *d;
  uint8_t *b;
  uint32_t bl;
  while ((rc = dtx__sq_cursor_next_body(&cur, &s, &d, &b, &bl)) == 1) {
    if (*n == cap && DTX__GROW(*out, cap, 16)) {
      json_decref(d);
      free(b);
      rc = dtx__err(DTX_ENOMEM, "collecting matches");
      break;
    }
    (*out)[(*n)++] = (match_t){s, d, b, bl};
  }
  dtx__sq_cursor_close(&cur);
  return rc < 0 ? rc : 0;
}

static int many_run(sq_wctx_t *w, sq_op_t *op) {
  mod_arg_t *a = op->arg;
  const dtx__modify_t *m = a->m;
  const sq_coll_t *co = dtx__sq_coll_find(w->cat, m->coll);
  if (!co)
    return 0;
  match_t *ms;
  size_t n;
  int rc = collect_matches(w->c, co, m, &ms, &n);
  int64_t now = dtx__now_ms();
  for (size_t i = 0; rc == 0 && i < n; i++) {
    a->matched++;
    json_t *nd = NULL;
    int changed = 1;
    if ((rc = dtx__modify_apply(m, ms[i].doc, now, &nd, &changed)) < 0 ||
        (changed && dtx__window_any(m) &&
         (rc = dtx__window_test(m, ms[i].doc, now)) < 0)) {
      json_decref(nd);
      break;
    }
    if (changed) {
      int sp = savepoint_need(w, co, !m->update);
      if ((rc = savepoint_begin(w->c, sp)) == 0) {
        rc = m->update ? update_doc(w, co, ms[i].seq, ms[i].doc, ms[i].body,
                                    ms[i].blen, nd, m->bypass)
                       : delete_doc(w, &co, m, ms[i].seq, ms[i].doc,
                                    ms[i].body, ms[i].blen);
        rc = savepoint_end(w->c, sp, rc);
      }
      if (rc == 0)
        a->modified++;
    }
    json_decref(nd);
  }
  for (size_t i = 0; i < n; i++) {
    json_decref(ms[i].doc);
    free(ms[i].body);
  }
  free(ms);
  return rc;
}

static void many_discard(sq_op_t *op) {
  mod_arg_t *a = op->arg;
  a->matched = a->modified = 0;
}

int dtx__sq_modify_many(dtx__backend_t *b, const dtx__modify_t *m,
                        int64_t *matched, int64_t *modified) {
  mod_arg_t a = {m, NULL, 0, 0};
  sq_op_t op = {.run = many_run,
                .discard = many_discard,
                .arg = &a,
                .keep_partial = 1};
  int rc = dtx__sq_submit(b, &op);
  if (matched)
    *matched = a.matched;
  if (modified)
    *modified = a.modified;
  return rc;
}

/* ---- bulk ---------------------------------------------------------------------------------------- */

/* One operation of a bulk write, as the group commit runs it: the same
 * run function as the single call, behind the bulk fault point, so an
 * injected error fails this op alone (its savepoint is rolled back) and
 * a crash loses the whole batch's transaction. */
typedef struct bulk_arg {
  dtx__bulk_op_t *op;
  mod_arg_t mod;
  ins_arg_t ins;
} bulk_arg_t;

static int bulk_run(sq_wctx_t *w, sq_op_t *op) {
  bulk_arg_t *a = op->arg;
  int rc = DTX_FAULTPOINT_INNER(DTX__FP_BULK_OP);
  if (rc < 0)
    return rc;
  sq_op_t inner = *op;
  inner.arg = a->op->doc ? (void *)&a->ins : (void *)&a->mod;
  return a->op->doc ? insert_run(w, &inner) : modify_run(w, &inner);
}

static void bulk_discard(sq_op_t *op) {
  bulk_arg_t *a = op->arg;
  dtx__modify_result_clear(&a->op->res);
}

int dtx__sq_bulk(dtx__backend_t *b, dtx__bulk_op_t *ops, size_t n) {
  size_t nrun = 0;
  for (size_t i = 0; i < n; i++)
    nrun += ops[i].rc == 0;
  if (nrun == 0)
    return 0;
  bulk_arg_t *args = calloc(nrun, sizeof *args);
  sq_op_t *sops = calloc(nrun, sizeof *sops);
  sq_op_t **list = calloc(nrun, sizeof *list);
  if (!args || !sops || !list) {
    free(args);
    free(sops);
    free(list);
    return dtx__err(DTX_ENOMEM, "a bulk write of %zu operations", n);
  }
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (ops[i].rc < 0)
      continue;
    bulk_arg_t *a = &args[k];
    a->op = &ops[i];
    a->mod = (mod_arg_t){&ops[i].m, &ops[i].res, 0, 0};
    a->ins = (ins_arg_t){ops[i].m.coll, &ops[i].doc, 1, 0, ops[i].m.bypass};
    sops[k] = (sq_op_t){.run = bulk_run, .discard = bulk_discard, .arg = a};
    list[k] = &sops[k];
    k++;
  }
  (void)dtx__sq_submit_many(b, list, nrun);
  for (size_t j = 0; j < nrun; j++) {
    dtx__bulk_op_t *op = args[j].op;
    op->rc = sops[j].rc;
    if (op->rc < 0) {
      memcpy(op->detail, sops[j].detail, sizeof op->detail);
      dtx__modify_result_clear(&op->res);
    }
  }
  free(args);
  free(sops);
  free(list);
  return 0;
}
