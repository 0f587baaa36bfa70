/* check.c -- the public input checks (doctx.h, "checking input without a
 * store"): thin wrappers that run the very compilers and checkers the
 * store calls use, and throw the compiled form away.
 *
 * They exist for callers that must refuse bad input before opening a
 * store, because opening a SQLite path creates it: the CLI checks every
 * argument first, so a typo in a filter never leaves an empty store
 * behind.  Keeping them here, next to the store API, is what lets the CLI
 * use only doctx.h while each rule still lives once (in src/doc, or
 * dtx__coll_check in store.c). */
#include "doc/bdoc.h"
#include "doc/doc.h"
#include "store/store.h"
#include "util/err.h"

#include <string.h>

int dtx_json_parse(const char *text, json_t **out) {
  *out = NULL;
  if (!text)
    return dtx__err(DTX_EBADJSON, "no JSON text");
  return dtx__json_parse(text, out);
}

char *dtx_json_dump(const json_t *v) { return dtx__json_dump(v); }

int dtx_check_collection(const char *name) { return dtx__coll_check(name); }

int dtx_check_id(const json_t *id) {
  if (!id)
    return dtx__err(DTX_EINVAL, "no _id value");
  return dtx__id_check(id);
}

int dtx_check_filter(const json_t *filter) {
  if (!json_is_object(filter))
    return dtx__err(DTX_EBADQUERY, "a filter must be a JSON object");
  dtx__filter_t *f = NULL;
  int rc = dtx__filter_compile(filter, &f);
  dtx__filter_free(f);
  return rc;
}

int dtx_check_update(const json_t *update, const json_t *array_filters,
                     unsigned flags) {
  if (!json_is_object(update))
    return dtx__err(DTX_EBADUPDATE, "an update must be a JSON object");
  dtx__update_t *u = NULL;
  int rc = dtx__fence_check_update(update);
  if (rc == 0)
    rc = dtx__update_compile_ex(update, array_filters, &u);
  if (rc == 0 && (flags & DTX_CHECK_MANY))
    rc = dtx__many_check(u);
  if (u)
    dtx__update_free(u);
  return rc;
}

int dtx_check_sort(const json_t *sort) { return dtx__sort_check(sort); }

int dtx_check_projection(const json_t *projection) {
  return dtx__projection_check(projection);
}

int dtx_check_index(const json_t *keys, const dtx_index_opts_t *opts) {
  dtx__index_spec_t *spec = NULL;
  int rc = dtx__index_spec_parse(keys, opts, &spec);
  if (rc == 0)
    dtx__index_spec_free(spec);
  return rc;
}

int dtx_check_fence(const char *name, int64_t token) {
  if (!name)
    return dtx__err(DTX_EINVAL, "no lock name for the fence");
  return dtx__fence_check_args(name, token);
}

int dtx_check_pipeline(const json_t *pipeline) {
  dtx__pipeline_t *p = NULL;
  int rc = dtx__pipeline_compile(pipeline, &p);
  dtx__pipeline_free(p);
  return rc;
}

int dtx_check_rules(const dtx_collection_rules_t *rules) {
  dtx__err_clear();
  json_t *spec = json_pack("{s:O?,s:O?,s:O?}", "validator",
                           rules ? rules->validator : NULL, "delete_guard",
                           rules ? rules->delete_guard : NULL, "transition",
                           rules ? rules->transition : NULL);
  dtx__rules_t *r = NULL;
  int rc = spec ? dtx__rules_compile(spec, &r)
                : dtx__err(DTX_ENOMEM, "checking rules");
  json_decref(spec);
  dtx__rules_free(r);
  return rc;
}

/* ---- corrupt stored documents ---------------------------------------------- */

static _Thread_local json_t *corrupt_list;

void dtx__corrupt_collect(json_t *list) { corrupt_list = list; }

int dtx__corrupt_skip(int rc) {
  if (rc != DTX_ECORRUPT || !corrupt_list)
    return 0;
  /* One entry a document (the detail names it): a read may meet it more
   * than once (a find, then a count of the same collection). */
  const char *detail = dtx_errdetail();
  size_t i;
  json_t *e;
  int seen = 0;
  json_array_foreach(corrupt_list, i, e) {
    seen |= !strcmp(json_string_value(e), detail);
  }
  if (!seen)
    json_array_append_new(corrupt_list, json_string(detail));
  dtx__err_clear();
  return 1;
}

int dtx__store_body(const json_t *doc, const char *coll, bson_t *out) {
  int rc = dtx__bson_from_json(doc, out);
  if (rc < 0)
    return dtx__err_wrap(rc, "a document of %s", coll);
  if (out->len > DTX__DOC_MAX)
    return dtx__err(DTX_ELIMIT,
                    "a document of %s would hold more than 16 MiB (%zu "
                    "bytes), the limit of a document",
                    coll, DTX__DOC_MAX);
  return 0;
}
