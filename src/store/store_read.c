/* store_read.c -- the public find, count and aggregate calls of the store
 * API (store.c has the rules they share): the filter is compiled here, the
 * backend chooses the documents, and projections are applied here after
 * it returns. */
#include "store/store_int.h"

#include "util/assert.h"
#include "util/err.h"

#include <string.h>

/* ---- find / count -------------------------------------------------------------------- */

/* The backend contract of a find (store.h): an array iff it succeeded,
 * of at most limit documents (0: no limit), each a document. */
static void check_find(int rc, int64_t limit, const json_t *docs) {
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc == 0 ? json_is_array(docs) : !docs, "store.out_iff_ok");
  DTX_ASSERT(limit == 0 || json_array_size(docs) <= (size_t)limit,
             "store.find.limit");
  DTX_ASSERT(json_array_size(docs) == 0 ||
                 json_is_object(json_array_get(docs, 0)),
             "store.find.documents");
}

int dtx_store_find(dtx_store_t *st, const char *coll, const json_t *filter,
                   const dtx_find_opts_t *opts, json_t **out) {
  dtx__err_clear();
  static const dtx_find_opts_t none;
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  if (!opts)
    opts = &none;
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0)
    return rc;
  if (opts->skip < 0)
    return dtx__err(DTX_EINVAL, "skip must be >= 0, not %lld",
                    (long long)opts->skip);
  if (opts->limit < 0)
    return dtx__err(DTX_EINVAL, "limit must be >= 0, not %lld",
                    (long long)opts->limit);
  st_compiled_t c;
  dtx__proj_t *proj = NULL;
  if ((rc = dtx__st_check_sort_proj(opts->sort, NULL)) < 0 ||
      (opts->projection &&
       (rc = dtx__proj_compile(opts->projection, &proj)) < 0))
    return rc;
  if ((proj && (rc = dtx__proj_check_query(proj, filter)) < 0) ||
      (rc = dtx__st_compile(filter, NULL, NULL, 0, &c)) < 0) {
    dtx__proj_free(proj);
    return rc;
  }
  json_t *docs = NULL;
  rc = st->m->find(st->b, coll, c.filter, c.f, opts->sort, opts->skip,
                   opts->limit, &docs);
  check_find(rc, opts->limit, docs);
  rc = dtx__st_match_error(&c, rc);
  for (size_t i = 0; rc == 0 && proj && i < json_array_size(docs); i++) {
    json_t *d = json_incref(json_array_get(docs, i));
    if ((rc = dtx__st_project_in_place(&d, proj, c.f, NULL)) < 0)
      json_decref(d);
    else
      json_array_set_new(docs, i, d);
  }
  dtx__st_compiled_free(&c);
  dtx__proj_free(proj);
  if (rc < 0) {
    json_decref(docs);
    return rc;
  }
  *out = docs;
  return 0;
}

int dtx_store_count(dtx_store_t *st, const char *coll, const json_t *filter,
                    int64_t *out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = 0;
  st_compiled_t c;
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0 || (rc = dtx__st_compile(filter, NULL, NULL, 0, &c)) < 0)
    return rc;
  rc = st->m->count(st->b, coll, c.filter, c.f, out);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc < 0 || *out >= 0, "store.count.not_negative");
  rc = dtx__st_match_error(&c, rc);
  dtx__st_compiled_free(&c);
  if (rc < 0)
    *out = 0;
  return rc;
}

/* ---- aggregation ------------------------------------------------------------ */

/* What dtx_store_aggregate and its $lookup read: the backend's find with
 * the filter compiled here, as dtx_store_find does. */
static int find_docs(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *sort, int64_t skip, int64_t limit,
                     json_t **out) {
  st_compiled_t c;
  int rc = dtx__st_compile(filter, NULL, NULL, 0, &c);
  if (rc < 0)
    return rc;
  rc = st->m->find(st->b, coll, c.filter, c.f, sort, skip, limit, out);
  check_find(rc, limit, *out);
  rc = dtx__st_match_error(&c, rc);
  dtx__st_compiled_free(&c);
  if (rc < 0) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}

static int lookup_find(void *ctx, const char *coll, const json_t *filter,
                       json_t **out) {
  dtx_store_t *st = ctx;
  *out = NULL;
  int rc = dtx__coll_check(coll);
  return rc < 0 ? rc : find_docs(st, coll, filter, NULL, 0, 0, out);
}

/* The pipeline's source runs in the backend's find (indexes apply); the
 * rest runs in src/doc over what it returns.  The result is an array, as
 * dtx_store_find's: memory is bounded where a pipeline collects ($group,
 * $sort) by opts->max_bytes. */
int dtx_store_aggregate(dtx_store_t *st, const char *coll,
                        const json_t *pipeline, const dtx_agg_opts_t *opts,
                        json_t **out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0)
    return rc;
  if (opts && opts->max_bytes < 0)
    return dtx__err(DTX_EINVAL, "max_bytes must be >= 0");
  dtx__pipeline_t *p;
  if ((rc = dtx__pipeline_compile(pipeline, &p)) < 0)
    return rc;
  const json_t *filter, *sort;
  int64_t skip, limit;
  dtx__pipeline_source(p, &filter, &sort, &skip, &limit);
  json_t *docs = NULL;
  if ((rc = find_docs(st, coll, filter, sort, skip, limit, &docs)) == 0) {
    dtx__agg_env_t env = {opts ? (size_t)opts->max_bytes : 0, lookup_find,
                          st};
    rc = dtx__pipeline_run(p, docs, &env, out);
  }
  dtx__pipeline_free(p);
  return rc;
}
