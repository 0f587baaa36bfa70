/* many.c -- the batched public calls (dtx_transfer_execute_many,
 * dtx_order_confirm_many, dtx_ledger_post_many): their results (kit.h,
 * "the results of a batched public call"). */
#include "txn/kit/kit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

/* ---- the results of a batched public call ------------------------------------ */

static dtx__many_res_t *many_at(const void *results, size_t i, size_t size) {
  return (dtx__many_res_t *)((char *)results + i * size);
}

void dtx__many_set(void *res, int rc, json_t *doc) {
  dtx__many_res_t *r = res;
  const char *d = dtx_errdetail();
  r->rc = rc;
  r->detail = rc ? strdup(d && *d ? d : dtx_strerror(rc)) : NULL;
  r->doc = doc;
}

void dtx__many_clear(void *results, size_t n, size_t size) {
  for (size_t i = 0; results && i < n; i++) {
    dtx__many_res_t *r = many_at(results, i, size);
    free(r->detail);
    json_decref(r->doc);
    memset(r, 0, size);
  }
}

int dtx__many_refuse(void *results, size_t n, size_t size, const char *fmt,
                     ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dtx__err_clear();
  int rc = dtx__err(DTX_EINVAL, "%s", msg);
  for (size_t i = 0; results && i < n; i++) {
    many_at(results, i, size)->rc = rc;
    many_at(results, i, size)->detail = strdup(dtx_errdetail());
  }
  return rc;
}

int dtx__many_begin(dtx_store_t *st, const void *reqs, const char *reqs_name,
                    size_t n, const dtx_exec_opts_t *opts, void *results,
                    size_t rsize, const char *fn, size_t isize,
                    dtx__exec_t *ex, dtx__call_t *c, void **items, int *rc) {
  *items = NULL;
  if (results)
    memset(results, 0, n * rsize);
  if (!st || !reqs || !results) {
    *rc = dtx__many_refuse(results, n, rsize, "%s: %s is NULL", fn,
                           !st ? "st" : !reqs ? reqs_name : "results");
    return 0;
  }
  if (n == 0) {
    dtx__err_clear();
    *rc = 0;
    return 0;
  }
  dtx__exec_from(ex, st, opts);
  dtx__call_begin(c, ex->deadline_ms);
  if (dtx__exec_check(ex)) { /* a bad owner: refused before any item */
    char msg[200];
    snprintf(msg, sizeof msg, "%s", dtx_errdetail());
    *rc = dtx__call_end(c, dtx__many_refuse(results, n, rsize, "%s: %s", fn,
                                            msg));
    return 0;
  }
  if (!(*items = calloc(n, isize))) {
    for (size_t i = 0; i < n; i++)
      many_at(results, i, rsize)->rc = DTX_ENOMEM;
    *rc = dtx__call_end(c, DTX_ENOMEM);
    return 0;
  }
  return 1;
}

int dtx__many_summary(const void *results, size_t n, size_t size,
                      const char *noun) {
  size_t failed = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (many_at(results, i, size)->rc && failed++ == 0)
      first = i;
  dtx__err_clear();
  if (!failed)
    return 0;
  const dtx__many_res_t *f = many_at(results, first, size);
  return dtx__err(f->rc, "%zu of %zu %s failed; first: #%zu: %s", failed, n,
                  noun, first, f->detail ? f->detail : dtx_strerror(f->rc));
}
