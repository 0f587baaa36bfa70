/* store_bulk.c -- dtx_store_bulk_write, the public bulk write of the store
 * API: each operation gets exactly the checks and compilation of the
 * single call of its kind (store.c, store_write.c), then the backend
 * applies the batch (its bulk method) and results are finished here. */
#include "store/store_int.h"

#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bulk writes ------------------------------------------------------------------------------ */

/* What store.c keeps per operation of a bulk write besides the backend's
 * dtx__bulk_op_t: the compiled filter/update the op borrows, and what is
 * applied to its result afterwards. */
typedef struct bulk_item {
  st_compiled_t c;
  dtx__proj_t *proj;
  int return_new;
} bulk_item_t;

/* The backend contract of a bulk (store.h): one outcome per operation,
 * each as modify_one (or insert) would give it alone; the operations
 * store_bulk.c failed itself (rc < 0 before the call) left as they were.
 * torun: how many went to the backend. */
static void check_bulk(const dtx__bulk_op_t *ops, size_t n, size_t torun) {
  size_t failed = 0;
  for (size_t i = 0; i < n; i++) {
    const dtx__bulk_op_t *op = &ops[i];
    failed += op->rc < 0;
    if (op->doc) /* an insert */
      dtx__st_check_rc(op->rc, op->detail);
    else
      dtx__st_check_modify(&op->m, &op->res, op->rc, op->detail);
  }
  DTX_ASSERT(failed >= n - torun, "store.bulk.one_result_per_op");
}

void dtx__bulk_op_fail(dtx__bulk_op_t *op, int rc) {
  op->rc = rc;
  snprintf(op->detail, sizeof op->detail, "%s", dtx_errdetail());
}

/* The checks and compilation of one operation, exactly those of the
 * single call of its kind (same options, same errors), into op and it.
 * The option structs are the single calls' own; each member they have is
 * mapped here as the single call maps it. */
static int bulk_prepare(dtx_store_t *st, const dtx_bulk_op_t *o,
                        dtx__bulk_op_t *op, bulk_item_t *it) {
  static const dtx_update_opts_t no_update;
  static const dtx_delete_opts_t no_delete;
  static const dtx_fam_opts_t no_fam;
  int rc;
  switch (o->kind) {
  case DTX_BULK_INSERT:
    if ((rc = dtx__st_check_coll(st, o->coll)) < 0 ||
        (rc = dtx__st_prepare_doc(o->coll, o->doc, &op->doc)) < 0)
      return rc;
    op->m.coll = o->coll;
    op->m.bypass = o->insert_opts && o->insert_opts->bypass_validation;
    return 0;
  case DTX_BULK_UPDATE_ONE: {
    const dtx_update_opts_t *u = o->update_opts ? o->update_opts : &no_update;
    if (u->many)
      return dtx__err(DTX_EINVAL, "a bulk updateOne cannot have many set");
    if ((rc = dtx__st_modify_prepare(st, o->coll, o->filter, o->update,
                                     u->array_filters, 0, u->bypass_validation,
                                     u->fence_name, u->fence_token, &op->m,
                                     &it->c)) < 0 ||
        (rc = dtx__window_set(&op->m, u->not_before, u->not_after)) < 0)
      return rc;
    op->m.upsert = u->upsert;
    return 0;
  }
  case DTX_BULK_DELETE_ONE: {
    const dtx_delete_opts_t *d = o->delete_opts ? o->delete_opts : &no_delete;
    if (d->many)
      return dtx__err(DTX_EINVAL, "a bulk deleteOne cannot have many set");
    return dtx__st_modify_prepare(st, o->coll, o->filter, NULL, NULL, 1,
                                  d->bypass_validation, d->fence_name,
                                  d->fence_token, &op->m, &it->c);
  }
  case DTX_BULK_FIND_ONE_AND_UPDATE:
  case DTX_BULK_FIND_ONE_AND_DELETE: {
    const dtx_fam_opts_t *f = o->fam_opts ? o->fam_opts : &no_fam;
    int is_delete = o->kind == DTX_BULK_FIND_ONE_AND_DELETE;
    if (!is_delete && !o->update)
      return dtx__err(DTX_EBADUPDATE, "update is NULL");
    if ((rc = dtx__st_check_sort_proj(f->sort, NULL)) < 0 ||
        (f->projection &&
         (rc = dtx__proj_compile(f->projection, &it->proj)) < 0) ||
        (it->proj && (rc = dtx__proj_check_query(it->proj, o->filter)) < 0))
      return rc;
    if ((rc = dtx__st_modify_prepare(
             st, o->coll, o->filter, is_delete ? NULL : o->update,
             is_delete ? NULL : f->array_filters, is_delete,
             f->bypass_validation, f->fence_name, f->fence_token, &op->m,
             &it->c)) < 0 ||
        (rc = dtx__window_set(&op->m, f->not_before, f->not_after)) < 0)
      return rc;
    op->m.sort = f->sort;
    op->m.upsert = !is_delete && f->upsert;
    it->return_new = !is_delete && f->return_new;
    return 0;
  }
  }
  return dtx__err(DTX_EINVAL, "unknown bulk operation kind %d", (int)o->kind);
}

/* Turns the backend's outcome of one operation into its public result,
 * as the single call of its kind would report it. */
static int bulk_finish(const dtx_bulk_op_t *o, dtx__bulk_op_t *op,
                       bulk_item_t *it, dtx_bulk_result_t *r) {
  int rc = it->c.f ? dtx__st_match_error(&it->c, 0) : 0;
  if (rc < 0)
    return rc;
  if ((rc = op->rc) < 0)
    return dtx__err(rc, "%s", op->detail);
  dtx__modify_result_t *mr = &op->res;
  switch (o->kind) {
  case DTX_BULK_INSERT:
    r->id = json_incref(json_object_get(op->doc, "_id"));
    return 0;
  case DTX_BULK_UPDATE_ONE:
    r->matched = mr->matched ? 1 : 0;
    r->modified = mr->matched && mr->modified ? 1 : 0;
    r->id = json_incref(mr->upserted_id);
    return 0;
  case DTX_BULK_DELETE_ONE:
    r->matched = r->modified = mr->matched ? 1 : 0;
    return 0;
  default: {
    if (!mr->matched && !mr->upserted_id)
      return dtx__err(DTX_ENOMATCH, "no document in '%s' matched the filter",
                      o->coll);
    r->id = json_incref(mr->upserted_id);
    json_t **pick = it->return_new ? &mr->after : &mr->before;
    json_t *doc = *pick;
    *pick = NULL;
    if ((rc = dtx__st_project_in_place(&doc, it->proj, it->c.f, mr->before)) <
        0) {
      json_decref(doc);
      return rc;
    }
    r->doc = doc;
    return 0;
  }
  }
}

void dtx_bulk_results_clear(dtx_bulk_result_t *results, size_t n) {
  for (size_t i = 0; results && i < n; i++) {
    free(results[i].detail);
    json_decref(results[i].id);
    json_decref(results[i].doc);
    memset(&results[i], 0, sizeof results[i]);
  }
}

static void bulk_result_error(dtx_bulk_result_t *r, int rc) {
  r->rc = rc;
  r->detail = strdup(dtx_errdetail());
}

/* Every operation is checked and compiled here first; the ones that fail
 * get their error and never reach the backend, which runs the rest in one
 * call.  Results are then built as the single calls build theirs. */
int dtx_store_bulk_write(dtx_store_t *st, const dtx_bulk_op_t *ops, size_t n,
                         dtx_bulk_result_t *results) {
  dtx__err_clear();
  if (!results)
    return dtx__err(DTX_EINVAL, "results is NULL");
  memset(results, 0, n * sizeof *results);
  int rc = 0;
  if (!st)
    rc = dtx__err(DTX_EINVAL, "store is NULL");
  else if (!ops && n > 0)
    rc = dtx__err(DTX_EINVAL, "ops is NULL");
  if (rc < 0) {
    for (size_t i = 0; i < n; i++)
      bulk_result_error(&results[i], rc);
    return rc;
  }
  if (n == 0)
    return 0;
  dtx__bulk_op_t *bops = calloc(n, sizeof *bops);
  bulk_item_t *items = calloc(n, sizeof *items);
  if (!bops || !items) {
    free(bops);
    free(items);
    rc = dtx__err(DTX_ENOMEM, "a bulk write of %zu operations", n);
    for (size_t i = 0; i < n; i++)
      bulk_result_error(&results[i], rc);
    return rc;
  }
  size_t torun = 0;
  for (size_t i = 0; i < n; i++) {
    dtx__err_clear();
    if ((rc = bulk_prepare(st, &ops[i], &bops[i], &items[i])) < 0)
      dtx__bulk_op_fail(&bops[i], rc);
    else
      torun++;
  }
  DTX_ASSERT(torun <= n, "store.bulk.one_result_per_op");
  if (torun > 0) {
    rc = st->m->bulk(st->b, bops, n);
    dtx__st_check_rc(rc, dtx_errdetail());
  }
  if (torun > 0 && rc < 0) {
    for (size_t i = 0; i < n; i++)
      if (bops[i].rc == 0)
        dtx__bulk_op_fail(&bops[i], rc);
  }
  check_bulk(bops, n, torun);
  size_t nfailed = 0, first = 0;
  int first_rc = 0;
  for (size_t i = 0; i < n; i++) {
    dtx__err_clear();
    if ((rc = bulk_finish(&ops[i], &bops[i], &items[i], &results[i])) < 0) {
      bulk_result_error(&results[i], rc);
      if (nfailed++ == 0) {
        first = i;
        first_rc = rc;
      }
    }
    dtx__modify_result_clear(&bops[i].res);
    json_decref(bops[i].doc);
    dtx__st_compiled_free(&items[i].c);
    dtx__proj_free(items[i].proj);
  }
  free(bops);
  free(items);
  dtx__err_clear();
  if (nfailed == 0)
    return 0;
  return dtx__err(first_rc, "%zu of %zu operations failed; first: #%zu: %s",
                  nfailed, n, first,
                  results[first].detail ? results[first].detail : "");
}
