/* store_write.c -- the public insert, update and delete calls of the store
 * API (store.c has the rules they share): each checks its arguments,
 * compiles its filter and update once, and hands the backend a request it
 * need not check again.  A fenced write reaches its fault point here. */
#include "store/store_int.h"

#include "util/assert.h"
#include "util/err.h"
#include "util/fault.h"

#include <string.h>

/* ---- insert ---------------------------------------------------------------------- */

int dtx_store_insert(dtx_store_t *st, const char *coll, const json_t *doc,
                     json_t **id_out) {
  return dtx_store_insert_ex(st, coll, doc, NULL, id_out);
}

int dtx_store_insert_ex(dtx_store_t *st, const char *coll, const json_t *doc,
                        const dtx_insert_opts_t *opts, json_t **id_out) {
  dtx__err_clear();
  if (id_out)
    *id_out = NULL;
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0)
    return rc;
  json_t *copy;
  if ((rc = dtx__st_prepare_doc(coll, doc, &copy)) < 0)
    return rc;
  size_t n = 0;
  rc = st->m->insert(st->b, coll, (json_t *const *)&copy, 1,
                     opts && opts->bypass_validation, &n);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(n == (rc == 0), "store.insert.count");
  if (rc == 0 && id_out)
    *id_out = json_incref(json_object_get(copy, "_id"));
  json_decref(copy);
  return rc;
}

int dtx_store_insert_many(dtx_store_t *st, const char *coll,
                          const json_t *docs, size_t *ninserted,
                          json_t **ids_out) {
  return dtx_store_insert_many_ex(st, coll, docs, NULL, ninserted, ids_out);
}

/* Every document is checked before the first goes in, so malformed input
 * inserts nothing.  Unlike most out-parameters, *ninserted and *ids_out
 * are also set on a backend error: they describe the documents that did
 * go in before it, which stay. */
int dtx_store_insert_many_ex(dtx_store_t *st, const char *coll,
                             const json_t *docs, const dtx_insert_opts_t *opts,
                             size_t *ninserted, json_t **ids_out) {
  dtx__err_clear();
  if (ninserted)
    *ninserted = 0;
  if (ids_out)
    *ids_out = NULL;
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0)
    return rc;
  if (!json_is_array(docs))
    return dtx__err(DTX_EINVAL, "documents must be an array");
  size_t n = json_array_size(docs);
  json_t **copies = calloc(n ? n : 1, sizeof *copies);
  if (!copies)
    return dtx__err(DTX_ENOMEM, "inserting %zu documents", n);
  size_t ncopied = 0, done = 0;
  for (; ncopied < n; ncopied++) {
    if ((rc = dtx__st_prepare_doc(coll, json_array_get(docs, ncopied),
                                  &copies[ncopied])) < 0) {
      dtx__err_wrap(rc, "document %zu", ncopied);
      goto out;
    }
  }
  if (n > 0) {
    rc = st->m->insert(st->b, coll, copies, n,
                       opts && opts->bypass_validation, &done);
    dtx__st_check_rc(rc, dtx_errdetail());
    /* All of them, or an error after the first `done`, which stay. */
    DTX_ASSERT(rc == 0 ? done == n : done < n, "store.insert.count");
  }
  if (ninserted)
    *ninserted = done;
  if (ids_out) {
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < done; i++)
      json_array_append(ids, json_object_get(copies[i], "_id"));
    if (!ids && rc == 0)
      rc = dtx__err(DTX_ENOMEM, "listing inserted ids");
    *ids_out = ids;
  }
out:
  for (size_t i = 0; i < ncopied; i++)
    json_decref(copies[i]);
  free(copies);
  return rc;
}

/* ---- update and delete ------------------------------------------------------------------ */

/* The checks every modifying call shares, then compiles filter (and update
 * unless this is a delete) into c and describes the request in m, which
 * borrows from c.  On error nothing is left to free. */
int dtx__st_modify_prepare(dtx_store_t *st, const char *coll,
                           const json_t *filter, const json_t *update,
                           const json_t *array_filters, int is_delete,
                           int bypass, const char *fence_name,
                           int64_t fence_token, dtx__modify_t *m,
                           st_compiled_t *c) {
  int rc;
  memset(m, 0, sizeof *m);
  memset(c, 0, sizeof *c);
  if ((rc = dtx__st_check_coll(st, coll)) < 0 ||
      (rc = dtx__fence_check_args(fence_name, fence_token)) < 0 ||
      (!is_delete && (rc = dtx__fence_check_update(update)) < 0) ||
      (rc = dtx__st_compile(filter, update, array_filters, !is_delete, c)) < 0)
    return rc;
  DTX_ASSERT(c->f && (is_delete || c->u), "store.compiled");
  m->fence_name = fence_name;
  m->fence_token = fence_token;
  /* A lock holder paused between deciding to write and writing is the
   * case fencing exists for: the fault point to stop it at. */
  if (fence_name && (rc = DTX_FAULTPOINT_INNER("fence.write")) < 0) {
    dtx__st_compiled_free(c);
    return rc;
  }
  m->coll = coll;
  m->filter_spec = c->filter;
  m->filter = c->f;
  m->update_spec = is_delete ? NULL : update;
  m->update = c->u;
  m->bypass = bypass;
  return 0;
}

/* updateMany has no upsert of its own in the method table: when nothing
 * matched, an upserting modify_one does it, which re-checks the filter
 * atomically, so a document inserted meanwhile is updated, not doubled. */
int dtx_store_update(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *update, const dtx_update_opts_t *opts,
                     dtx_update_result_t *res) {
  dtx__err_clear();
  static const dtx_update_opts_t none;
  dtx_update_result_t r = {0, 0, NULL};
  if (res)
    memset(res, 0, sizeof *res);
  if (!opts)
    opts = &none;
  dtx__modify_t m;
  st_compiled_t c;
  int rc = dtx__st_modify_prepare(st, coll, filter, update, opts->array_filters,
                                  0, opts->bypass_validation, opts->fence_name,
                                  opts->fence_token, &m, &c);
  if (rc < 0)
    return rc;
  if ((rc = dtx__window_set(&m, opts->not_before, opts->not_after)) < 0 ||
      (opts->many && (rc = dtx__many_check(c.u)) < 0)) {
    dtx__st_compiled_free(&c);
    return rc;
  }
  if (opts->many) {
    rc = st->m->modify_many(st->b, &m, &r.matched, &r.modified);
    dtx__st_check_rc(rc, dtx_errdetail());
    DTX_ASSERT(0 <= r.modified && r.modified <= r.matched,
               "store.modified<=matched");
  }
  if (rc == 0 && (!opts->many || (r.matched == 0 && opts->upsert))) {
    dtx__modify_result_t mr = {0};
    m.upsert = opts->upsert;
    rc = st->m->modify_one(st->b, &m, &mr);
    dtx__st_check_modify(&m, &mr, rc, dtx_errdetail());
    if (rc == 0) {
      r.matched = mr.matched ? 1 : 0;
      r.modified = mr.matched && mr.modified ? 1 : 0;
      r.upserted_id = json_incref(mr.upserted_id);
    }
    dtx__modify_result_clear(&mr);
  }
  rc = dtx__st_match_error(&c, rc);
  dtx__st_compiled_free(&c);
  if (rc < 0) {
    json_decref(r.upserted_id);
    return rc;
  }
  if (res)
    *res = r;
  else
    json_decref(r.upserted_id);
  return 0;
}

/* The primitive, and its delete twin (update NULL).  The returned document
 * is taken out of the backend's result, so it is not copied. */
static int find_one_and_modify(dtx_store_t *st, const char *coll,
                               const json_t *filter, const json_t *update,
                               const dtx_fam_opts_t *opts, json_t **out) {
  dtx__err_clear();
  static const dtx_fam_opts_t none;
  int is_delete = update == NULL;
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  if (!opts)
    opts = &none;
  dtx__modify_t m;
  st_compiled_t c;
  dtx__proj_t *proj = NULL;
  int rc = dtx__st_check_sort_proj(opts->sort, NULL);
  if (rc < 0 || (opts->projection &&
                 (rc = dtx__proj_compile(opts->projection, &proj)) < 0))
    return rc;
  if (proj && (rc = dtx__proj_check_query(proj, filter)) < 0) {
    dtx__proj_free(proj);
    return rc;
  }
  if ((rc = dtx__st_modify_prepare(
           st, coll, filter, update, is_delete ? NULL : opts->array_filters,
           is_delete, opts->bypass_validation, opts->fence_name,
           opts->fence_token, &m, &c)) < 0) {
    dtx__proj_free(proj);
    return rc;
  }
  if ((rc = dtx__window_set(&m, opts->not_before, opts->not_after)) < 0) {
    dtx__st_compiled_free(&c);
    dtx__proj_free(proj);
    return rc;
  }
  m.sort = opts->sort;
  m.upsert = !is_delete && opts->upsert;
  dtx__modify_result_t mr = {0};
  rc = st->m->modify_one(st->b, &m, &mr);
  dtx__st_check_modify(&m, &mr, rc, dtx_errdetail());
  rc = dtx__st_match_error(&c, rc);
  if (rc == 0 && !mr.matched && !mr.upserted_id)
    rc = dtx__err(DTX_ENOMATCH, "no document in '%s' matched the filter",
                  coll);
  json_t *doc = NULL;
  if (rc == 0) {
    /* The positional $ takes its element from the document the query
     * matched, also when the new one is returned. */
    json_t **pick = !is_delete && opts->return_new ? &mr.after : &mr.before;
    doc = *pick;
    *pick = NULL;
    /* (an upsert has no document before it) */
    DTX_ASSERT(doc || (mr.upserted_id && pick == &mr.before),
               "store.fam.returns_a_document");
    rc = dtx__st_project_in_place(&doc, proj, c.f, mr.before);
  }
  dtx__modify_result_clear(&mr);
  dtx__st_compiled_free(&c);
  dtx__proj_free(proj);
  if (rc < 0) {
    json_decref(doc);
    return rc;
  }
  *out = doc;
  return 0;
}

int dtx_store_find_one_and_update(dtx_store_t *st, const char *coll,
                                  const json_t *filter, const json_t *update,
                                  const dtx_fam_opts_t *opts, json_t **out) {
  if (!update) {
    dtx__err_clear();
    return dtx__err(DTX_EBADUPDATE, "update is NULL");
  }
  return find_one_and_modify(st, coll, filter, update, opts, out);
}

int dtx_store_find_one_and_delete(dtx_store_t *st, const char *coll,
                                  const json_t *filter,
                                  const dtx_fam_opts_t *opts, json_t **out) {
  return find_one_and_modify(st, coll, filter, NULL, opts, out);
}

int dtx_store_delete(dtx_store_t *st, const char *coll, const json_t *filter,
                     int many, int64_t *deleted) {
  dtx_delete_opts_t o = {.many = many};
  return dtx_store_delete_ex(st, coll, filter, &o, deleted);
}

int dtx_store_delete_ex(dtx_store_t *st, const char *coll,
                        const json_t *filter, const dtx_delete_opts_t *opts,
                        int64_t *deleted) {
  dtx__err_clear();
  static const dtx_delete_opts_t none;
  if (deleted)
    *deleted = 0;
  if (!opts)
    opts = &none;
  dtx__modify_t m;
  st_compiled_t c;
  int rc = dtx__st_modify_prepare(st, coll, filter, NULL, NULL, 1,
                                  opts->bypass_validation, opts->fence_name,
                                  opts->fence_token, &m, &c);
  if (rc < 0)
    return rc;
  int64_t matched = 0, n = 0;
  if (opts->many) {
    rc = st->m->modify_many(st->b, &m, &matched, &n);
    dtx__st_check_rc(rc, dtx_errdetail());
    /* Every document a delete matched goes. */
    DTX_ASSERT(rc < 0 ? 0 <= n && n <= matched : n == matched,
               "store.modified<=matched");
  } else {
    dtx__modify_result_t mr = {0};
    rc = st->m->modify_one(st->b, &m, &mr);
    dtx__st_check_modify(&m, &mr, rc, dtx_errdetail());
    DTX_ASSERT(mr.matched == mr.modified, "store.modified<=matched");
    n = rc == 0 && mr.matched ? 1 : 0;
    dtx__modify_result_clear(&mr);
  }
  rc = dtx__st_match_error(&c, rc);
  dtx__st_compiled_free(&c);
  /* deleteMany keeps what it removed before an error, so say how many. */
  if (deleted && (rc == 0 || opts->many))
    *deleted = n;
  return rc;
}
