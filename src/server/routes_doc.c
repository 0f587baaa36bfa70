/* routes_doc.c -- doctxd's document routes, /v1/c/{coll}/...: each calls
 * the library as the CLI's command of the same name does (src/cli/cmd_*.c,
 * docs/cli.md), with the body's fields for the command's arguments and
 * options ('-' written '_').  Every argument is checked by the library's
 * own dtx_check_* before the store is touched, so a refused request
 * writes nothing. */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The collection parameter (library check): 0, or answered. */
static int coll_ok(dtx__srv_ctx_t *c) {
  int rc = dtx_check_collection(c->param[0]);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  return rc;
}

/* Runs the library check fn on the field `name` when present. */
static int checked(dtx__srv_ctx_t *c, const char *name,
                   int (*fn)(const json_t *)) {
  json_t *v = dtx__srv_arg(c, name);
  int rc = v ? fn(v) : 0;
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  return rc;
}

/* The request's required field, or an answered 400. */
static json_t *need(dtx__srv_ctx_t *c, const char *name, int rc) {
  json_t *v = dtx__srv_arg(c, name);
  if (!v)
    dtx__srv_bad(c, rc, "field '%s' is required", name);
  return v;
}

/* The update with its array_filters (library check); many refuses a
 * replacement as update --many does. */
static int update_ok(dtx__srv_ctx_t *c, int many) {
  json_t *u = need(c, "update", DTX_EBADUPDATE);
  int rc;
  if (!u)
    return -1;
  if ((rc = dtx_check_update(u, dtx__srv_arg(c, "array_filters"),
                             many ? DTX_CHECK_MANY : 0))) {
    dtx__srv_fail(c, rc, NULL);
    return -1;
  }
  return 0;
}

/* What a find's cursor pages: the collection and the query's text. */
static char *find_what(dtx__srv_ctx_t *c) {
  json_t *w = json_pack("[s,O?,O?,O?]", c->param[0], dtx__srv_arg(c, "filter"),
                        dtx__srv_arg(c, "sort"), dtx__srv_arg(c, "projection"));
  char *s = w ? dtx_json_dump(w) : NULL;
  json_decref(w);
  return s;
}

void dtx__srv_h_find(dtx__srv_ctx_t *c) {
  int64_t skip, lim;
  json_t *docs = NULL;
  if (coll_ok(c) || checked(c, "filter", dtx_check_filter) ||
      checked(c, "sort", dtx_check_sort) ||
      checked(c, "projection", dtx_check_projection))
    return;
  char *what = find_what(c);
  if (!what) {
    dtx__srv_bad(c, DTX_ENOMEM, "find");
    return;
  }
  if (dtx__srv_arg(c, "after") && dtx__srv_arg(c, "skip")) {
    dtx__srv_bad(c, DTX_EINVAL, "give skip or after, not both");
  } else if (dtx__srv_arg_int(c, "skip", 0) < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "skip must be >= 0");
  } else if (!dtx__srv_page(c, dtx__srv_arg(c, "limit"),
                            dtx__srv_arg_str(c, "after"), what, &skip, &lim)) {
    if (!dtx__srv_arg(c, "after"))
      skip = dtx__srv_arg_int(c, "skip", 0);
    /* One more than the page shows says whether a next page exists. */
    dtx_find_opts_t fo = {.sort = dtx__srv_arg(c, "sort"),
                          .projection = dtx__srv_arg(c, "projection"),
                          .skip = skip,
                          .limit = lim + 1};
    int rc = dtx_store_find(c->d->st, c->param[0], dtx__srv_arg(c, "filter"),
                            &fo, &docs);
    if (rc) {
      dtx__srv_fail(c, rc, NULL);
    } else {
      json_t *next = json_null();
      if ((int64_t)json_array_size(docs) > lim) {
        json_array_remove(docs, (size_t)lim);
        json_decref(next);
        next = dtx__srv_cursor(what, skip + lim);
      }
      dtx__srv_json(c, 200, json_pack("{s:o,s:o}", "docs", docs, "next", next));
    }
  }
  free(what);
}

void dtx__srv_h_count(dtx__srv_ctx_t *c) {
  int64_t n = 0;
  int rc;
  if (coll_ok(c) || checked(c, "filter", dtx_check_filter))
    return;
  if ((rc = dtx_store_count(c->d->st, c->param[0], dtx__srv_arg(c, "filter"),
                            &n)))
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:I}", "count", (json_int_t)n));
}

void dtx__srv_h_insert(dtx__srv_ctx_t *c) {
  json_t *docs = need(c, "docs", DTX_EINVAL), *ids = NULL, *d;
  size_t n = 0, i;
  int rc;
  if (!docs || coll_ok(c))
    return;
  if (json_array_size(docs) == 0 ||
      json_array_size(docs) > DTX__SRV_MAX_BATCH) {
    dtx__srv_bad(c, DTX_EINVAL, "docs holds 1..%d documents",
                 DTX__SRV_MAX_BATCH);
    return;
  }
  json_array_foreach(docs, i, d) {
    json_t *id = json_object_get(d, "_id");
    if (!json_is_object(d)) {
      dtx__srv_bad(c, DTX_EINVAL, "docs[%zu] is not an object", i);
      return;
    }
    if (id && (rc = dtx_check_id(id))) {
      dtx__srv_fail(c, rc, json_pack("{s:I}", "index", (json_int_t)i));
      return;
    }
  }
  dtx_insert_opts_t io = {.bypass_validation =
                              dtx__srv_arg_bool(c, "bypass_validation")};
  rc = dtx_store_insert_many_ex(c->d->st, c->param[0], docs, &io, &n, &ids);
  json_t *r = json_pack("{s:I,s:o}", "inserted", (json_int_t)n, "ids",
                        ids ? ids : json_array());
  if (rc)
    dtx__srv_fail(c, rc, r); /* the documents before the failed one stay */
  else
    dtx__srv_json(c, 200, r);
}

void dtx__srv_h_update(dtx__srv_ctx_t *c) {
  dtx_update_opts_t uo = {.many = dtx__srv_arg_bool(c, "many"),
                          .upsert = dtx__srv_arg_bool(c, "upsert"),
                          .array_filters = dtx__srv_arg(c, "array_filters"),
                          .bypass_validation =
                              dtx__srv_arg_bool(c, "bypass_validation")};
  dtx_update_result_t res;
  int rc;
  if (coll_ok(c) || !need(c, "filter", DTX_EBADQUERY) ||
      checked(c, "filter", dtx_check_filter) || update_ok(c, uo.many) ||
      dtx__srv_arg_fence(c, &uo.fence_name, &uo.fence_token))
    return;
  if ((rc = dtx_store_update(c->d->st, c->param[0], dtx__srv_arg(c, "filter"),
                             dtx__srv_arg(c, "update"), &uo, &res))) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  json_t *r = json_pack("{s:I,s:I}", "matched", (json_int_t)res.matched,
                        "modified", (json_int_t)res.modified);
  if (r && res.upserted_id)
    json_object_set(r, "upserted", res.upserted_id);
  json_decref(res.upserted_id);
  dtx__srv_json(c, 200, r);
}

void dtx__srv_h_fam(dtx__srv_ctx_t *c) {
  dtx_fam_opts_t fo = {.sort = dtx__srv_arg(c, "sort"),
                       .projection = dtx__srv_arg(c, "projection"),
                       .upsert = dtx__srv_arg_bool(c, "upsert"),
                       .return_new = dtx__srv_arg_bool(c, "new"),
                       .array_filters = dtx__srv_arg(c, "array_filters"),
                       .bypass_validation =
                           dtx__srv_arg_bool(c, "bypass_validation")};
  json_t *doc = NULL;
  int rc;
  if (coll_ok(c) || !need(c, "filter", DTX_EBADQUERY) ||
      checked(c, "filter", dtx_check_filter) || update_ok(c, 0) ||
      checked(c, "sort", dtx_check_sort) ||
      checked(c, "projection", dtx_check_projection) ||
      dtx__srv_arg_fence(c, &fo.fence_name, &fo.fence_token))
    return;
  rc = dtx_store_find_one_and_update(c->d->st, c->param[0],
                                     dtx__srv_arg(c, "filter"),
                                     dtx__srv_arg(c, "update"), &fo, &doc);
  if (rc)
    dtx__srv_fail(c, rc, NULL); /* NOMATCH: the condition failed, 409 */
  else
    dtx__srv_json(c, 200, json_pack("{s:o}", "doc", doc ? doc : json_null()));
}

void dtx__srv_h_delete(dtx__srv_ctx_t *c) {
  dtx_delete_opts_t dopt = {.many = dtx__srv_arg_bool(c, "many"),
                            .bypass_validation =
                                dtx__srv_arg_bool(c, "bypass_validation")};
  int64_t n = 0;
  int rc;
  if (coll_ok(c) || !need(c, "filter", DTX_EBADQUERY) ||
      checked(c, "filter", dtx_check_filter) ||
      dtx__srv_arg_fence(c, &dopt.fence_name, &dopt.fence_token))
    return;
  if ((rc = dtx_store_delete_ex(c->d->st, c->param[0],
                                dtx__srv_arg(c, "filter"), &dopt, &n)))
    dtx__srv_fail(c, rc, json_pack("{s:I}", "deleted", (json_int_t)n));
  else
    dtx__srv_json(c, 200, json_pack("{s:I}", "deleted", (json_int_t)n));
}

void dtx__srv_h_aggregate(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  int rc;
  if (coll_ok(c) || !need(c, "pipeline", DTX_EBADQUERY) ||
      checked(c, "pipeline", dtx_check_pipeline))
    return;
  if ((rc = dtx_store_aggregate(c->d->st, c->param[0],
                                dtx__srv_arg(c, "pipeline"), NULL, &out)))
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:o}", "docs", out));
}

void dtx__srv_h_indexes(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  int rc;
  if (coll_ok(c))
    return;
  if ((rc = dtx_store_list_indexes(c->d->st, c->param[0], &out)))
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:o}", "indexes", out));
}

void dtx__srv_h_index_create(dtx__srv_ctx_t *c) {
  dtx_index_opts_t io = {.unique = dtx__srv_arg_bool(c, "unique"),
                         .sparse = dtx__srv_arg_bool(c, "sparse"),
                         .name = dtx__srv_arg_str(c, "name"),
                         .bypass_validation =
                             dtx__srv_arg_bool(c, "bypass_validation")};
  json_t *keys = need(c, "keys", DTX_EBADINDEX);
  char *name = NULL;
  int rc;
  if (!keys || coll_ok(c))
    return;
  if ((rc = dtx_check_index(keys, &io))) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  if ((rc = dtx_store_create_index(c->d->st, c->param[0], keys, &io, &name)))
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:s}", "name", name ? name : ""));
  free(name);
}

/* ---- bulk: MongoDB bulkWrite's operation shapes, as `doctx bulk` ------- */

static const struct {
  const char *name;
  dtx_bulk_kind_t kind;
  const char *const *keys;
} kinds[] = {
    {"insertOne", DTX_BULK_INSERT,
     (const char *const[]){"document", "bypassDocumentValidation", NULL}},
    {"updateOne", DTX_BULK_UPDATE_ONE,
     (const char *const[]){"filter", "update", "upsert", "arrayFilters",
                           "bypassDocumentValidation", NULL}},
    {"deleteOne", DTX_BULK_DELETE_ONE,
     (const char *const[]){"filter", "bypassDocumentValidation", NULL}},
    {"findOneAndUpdate", DTX_BULK_FIND_ONE_AND_UPDATE,
     (const char *const[]){"filter", "update", "upsert", "arrayFilters", "sort",
                           "projection", "returnDocument",
                           "bypassDocumentValidation", NULL}},
    {"findOneAndDelete", DTX_BULK_FIND_ONE_AND_DELETE,
     (const char *const[]){"filter", "sort", "projection",
                           "bypassDocumentValidation", NULL}},
};
#define NKINDS (sizeof kinds / sizeof kinds[0])

typedef struct bop {
  dtx_update_opts_t uo;
  dtx_fam_opts_t fo;
  dtx_insert_opts_t io;
  dtx_delete_opts_t dopt;
} bop_t;

/* Checks ops[i]'s shape and its parts with the library's checks; fills
 * op.  0, or answered naming the index. */
static int bulk_op(dtx__srv_ctx_t *c, size_t i, json_t *v, dtx_bulk_op_t *op,
                   bop_t *o) {
  if (!json_is_object(v) || json_object_size(v) != 1) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "ops[%zu]: an operation is an object with one "
                 "key: insertOne, updateOne, deleteOne, findOneAndUpdate or "
                 "findOneAndDelete",
                 i);
    return -1;
  }
  const char *name = json_object_iter_key(json_object_iter(v)), *key;
  json_t *body = json_object_iter_value(json_object_iter(v)), *f;
  size_t k = 0;
  while (k < NKINDS && strcmp(kinds[k].name, name) != 0)
    k++;
  if (k == NKINDS || !json_is_object(body)) {
    dtx__srv_bad(c, DTX_EINVAL, "ops[%zu]: %s '%.100s'", i,
                 k == NKINDS ? "unknown operation" : "needs an object:", name);
    return -1;
  }
  json_object_foreach(body, key, f) {
    size_t j = 0;
    while (kinds[k].keys[j] && strcmp(kinds[k].keys[j], key) != 0)
      j++;
    if (!kinds[k].keys[j]) {
      dtx__srv_bad(c, DTX_EINVAL, "ops[%zu]: unknown field '%.100s'", i, key);
      return -1;
    }
  }
  json_t *up = json_object_get(body, "upsert");
  json_t *by = json_object_get(body, "bypassDocumentValidation");
  json_t *ret = json_object_get(body, "returnDocument");
  json_t *afs = json_object_get(body, "arrayFilters");
  json_t *sort = json_object_get(body, "sort");
  json_t *proj = json_object_get(body, "projection");
  if ((up && !json_is_boolean(up)) || (by && !json_is_boolean(by))) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "ops[%zu]: upsert and bypassDocumentValidation "
                 "are booleans",
                 i);
    return -1;
  }
  if (ret && (!json_is_string(ret) ||
              (strcmp(json_string_value(ret), "before") != 0 &&
               strcmp(json_string_value(ret), "after") != 0))) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "ops[%zu]: returnDocument is \"before\" or "
                 "\"after\"",
                 i);
    return -1;
  }
  *op = (dtx_bulk_op_t){.kind = kinds[k].kind,
                        .coll = c->param[0],
                        .doc = json_object_get(body, "document"),
                        .filter = json_object_get(body, "filter"),
                        .update = json_object_get(body, "update")};
  int rc = 0;
  const char *part = "";
  if (op->kind == DTX_BULK_INSERT) {
    if (!json_is_object(op->doc)) {
      dtx__srv_bad(c, DTX_EINVAL,
                   "ops[%zu]: insertOne needs a \"document\" "
                   "object",
                   i);
      return -1;
    }
    json_t *id = json_object_get(op->doc, "_id");
    if (id && (rc = dtx_check_id(id)))
      part = "document";
  } else if (!json_is_object(op->filter)) {
    dtx__srv_bad(c, DTX_EBADQUERY, "ops[%zu]: \"filter\" must be an object", i);
    return -1;
  } else if ((rc = dtx_check_filter(op->filter))) {
    part = "filter";
  }
  if (!rc && (op->kind == DTX_BULK_UPDATE_ONE ||
              op->kind == DTX_BULK_FIND_ONE_AND_UPDATE)) {
    if (!json_is_object(op->update)) {
      dtx__srv_bad(c, DTX_EBADUPDATE, "ops[%zu]: \"update\" must be an object",
                   i);
      return -1;
    }
    if ((rc = dtx_check_update(op->update, afs, 0)))
      part = "update";
  }
  if (!rc && sort && (rc = dtx_check_sort(sort)))
    part = "sort";
  if (!rc && proj && (rc = dtx_check_projection(proj)))
    part = "projection";
  if (rc) {
    dtx__srv_bad(c, rc, "ops[%zu]: %s: %s", i, part, dtx_errdetail());
    return -1;
  }
  int upsert = json_is_true(up), bypass = json_is_true(by);
  switch (op->kind) {
  case DTX_BULK_INSERT:
    o->io.bypass_validation = bypass;
    op->insert_opts = &o->io;
    break;
  case DTX_BULK_UPDATE_ONE:
    o->uo = (dtx_update_opts_t){
        .upsert = upsert, .array_filters = afs, .bypass_validation = bypass};
    op->update_opts = &o->uo;
    break;
  case DTX_BULK_DELETE_ONE:
    o->dopt.bypass_validation = bypass;
    op->delete_opts = &o->dopt;
    break;
  default:
    o->fo = (dtx_fam_opts_t){
        .sort = sort,
        .projection = proj,
        .upsert = upsert,
        .return_new = ret && strcmp(json_string_value(ret), "after") == 0,
        .array_filters = afs,
        .bypass_validation = bypass};
    op->fam_opts = &o->fo;
  }
  return 0;
}

static json_t *bulk_result(const dtx_bulk_op_t *op,
                           const dtx_bulk_result_t *r) {
  json_t *j;
  if (r->rc < 0) {
    j = dtx__srv_problem_json(r->rc, r->detail);
    json_object_set_new(j, "ok", json_false());
    return j;
  }
  j = json_pack("{s:b}", "ok", 1);
  switch (op->kind) {
  case DTX_BULK_INSERT:
    json_object_set(j, "insertedId", r->id);
    break;
  case DTX_BULK_UPDATE_ONE:
    json_object_set_new(j, "matched", json_integer(r->matched));
    json_object_set_new(j, "modified", json_integer(r->modified));
    if (r->id)
      json_object_set(j, "upsertedId", r->id);
    break;
  case DTX_BULK_DELETE_ONE:
    json_object_set_new(j, "deleted", json_integer(r->modified));
    break;
  default:
    json_object_set(j, "doc", r->doc ? r->doc : json_null());
    if (r->id)
      json_object_set(j, "upsertedId", r->id);
  }
  return j;
}

void dtx__srv_h_bulk(dtx__srv_ctx_t *c) {
  json_t *ops = need(c, "ops", DTX_EINVAL), *v;
  size_t n, i;
  if (!ops || coll_ok(c))
    return;
  n = json_array_size(ops);
  if (n == 0 || n > DTX__SRV_MAX_BATCH) {
    dtx__srv_bad(c, DTX_EINVAL, "ops holds 1..%d operations",
                 DTX__SRV_MAX_BATCH);
    return;
  }
  dtx_bulk_op_t *bops = calloc(n, sizeof *bops);
  bop_t *o = calloc(n, sizeof *o);
  dtx_bulk_result_t *res = calloc(n, sizeof *res);
  json_t *out = json_array();
  if (!bops || !o || !res || !out) {
    dtx__srv_bad(c, DTX_ENOMEM, "bulk of %zu operations", n);
    goto done;
  }
  json_array_foreach(ops, i, v) {
    if (bulk_op(c, i, v, &bops[i], &o[i]))
      goto done; /* every op is checked before any runs */
  }
  (void)dtx_store_bulk_write(c->d->st, bops, n, res);
  for (i = 0; i < n; i++)
    json_array_append_new(out, bulk_result(&bops[i], &res[i]));
  dtx_bulk_results_clear(res, n);
  dtx__srv_json(c, 200, json_pack("{s:O}", "results", out));
done:
  json_decref(out);
  free(bops);
  free(o);
  free(res);
}
