/* routes_lock.c -- doctxd's lock routes, /v1/locks/..., and the admin's
 * force-release: each calls the library as `doctx lock` does
 * (src/cli/cmd_lock.c, docs/locks.md), with the body's fields for its
 * options ('-' written '_') and the same JSON as its answer.  A held lock
 * is a failed condition (409 NOMATCH, naming the holder), a token no
 * longer current too; a stale token on a fenced document write is 409
 * FENCED (the document routes' "fence").  Also the query-string helpers
 * the list routes of routes_ledger.c and routes_more.c share. */
#include "server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- query helpers (lists, ?N= options) ---------------------------------- */

int dtx__srv_qint(dtx__srv_ctx_t *c, const char *key, int64_t dflt,
                  int64_t *out) {
  char buf[32];
  int bad = 0;
  const char *v = dtx__srv_query(c, key, buf, sizeof buf, &bad);
  *out = dflt;
  if (bad)
    return -1;
  if (!v)
    return 0;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (end == v || *end || errno) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "query parameter '%s' must be an int64, "
                 "got '%.20s'",
                 key, v);
    return -1;
  }
  *out = (int64_t)n;
  return 0;
}

int dtx__srv_qpage(dtx__srv_ctx_t *c, const char *what, dtx_page_t *page) {
  char after[128];
  int bad = 0;
  const char *a = dtx__srv_query(c, "after", after, sizeof after, &bad);
  int64_t l;
  if (bad || dtx__srv_qint(c, "limit", DTX__SRV_DEFAULT_PAGE, &l))
    return -1;
  json_t *lj = json_integer(l);
  int64_t skip, lim;
  int rc = dtx__srv_page(c, lj, a, what, &skip, &lim);
  json_decref(lj);
  if (rc)
    return -1;
  /* One more than the page shows says whether a next page exists. */
  *page = (dtx_page_t){.skip = skip, .limit = lim + 1};
  return 0;
}

void dtx__srv_qanswer(dtx__srv_ctx_t *c, const char *key, const char *what,
                      const dtx_page_t *page, int rc, json_t *items) {
  if (rc) {
    json_decref(items);
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  json_t *next = json_null();
  int64_t lim = page->limit - 1;
  if ((int64_t)json_array_size(items) > lim) {
    json_array_remove(items, (size_t)lim);
    json_decref(next);
    next = dtx__srv_cursor(what, page->skip + lim);
  }
  dtx__srv_json(c, 200, json_pack("{s:o,s:o}", key, items, "next", next));
}

/* The answer of a call that returns one document: 200 with it, or the
 * problem of rc (with the document, when there is one and `as` names the
 * member: a 409's current state).  doc is a pointer so that a call's
 * result may be passed with the call itself as rc: it is read here,
 * after the call. */
void dtx__srv_one(dtx__srv_ctx_t *c, int rc, json_t **doc, const char *as) {
  json_t *d = *doc;
  *doc = NULL;
  if (!rc) {
    dtx__srv_json(c, 200, d ? d : json_object());
    return;
  }
  dtx__srv_fail(c, rc, d && as ? json_pack("{s:o}", as, d) : NULL);
  if (!as)
    json_decref(d);
}

/* ---- locks -------------------------------------------------------------- */

/* The body's "token": required, an integer (>= 1 is the library's rule). */
static int token_arg(dtx__srv_ctx_t *c, int64_t *token) {
  json_t *t = dtx__srv_arg(c, "token");
  if (!t) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'token' is required");
    return -1;
  }
  *token = (int64_t)json_integer_value(t);
  return 0;
}

/* An acquire's options: its wait and its deadline capped by what is left
 * of the request's time (dtx__srv_budget), so no wait holds a worker past
 * --request-timeout-ms.  A negative one stays for the library to refuse. */
static dtx_lock_opts_t lock_opts(dtx__srv_ctx_t *c) {
  dtx_lock_opts_t lo = {.ttl_ms = dtx__srv_arg_int(c, "ttl_ms", 0),
                        .owner = dtx__srv_arg_str(c, "owner"),
                        .wait_ms = dtx__srv_arg_int(c, "wait_ms", 0),
                        .deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  if (lo.wait_ms > 0)
    lo.wait_ms = dtx__srv_budget(c, lo.wait_ms);
  if (lo.deadline_ms >= 0)
    lo.deadline_ms = dtx__srv_budget(c, lo.deadline_ms);
  return lo;
}

void dtx__srv_h_lock_acquire(dtx__srv_ctx_t *c) {
  dtx_lock_opts_t lo = lock_opts(c);
  json_t *out = NULL;
  int rc = dtx_lock_check(c->param[0], &lo);
  if (!rc)
    rc = dtx_lock_acquire(c->d->st, c->param[0], &lo, &out);
  if (!rc && out)
    json_object_del(out, "held"); /* what `doctx lock acquire` prints */
  dtx__srv_one(c, rc, &out, NULL);
}

/* renew and release: only while the token is current (else 409 NOMATCH),
 * 404 when there is no such lock. */
void dtx__srv_h_lock_renew(dtx__srv_ctx_t *c) {
  dtx_lock_opts_t lo = {.ttl_ms = dtx__srv_arg_int(c, "ttl_ms", 0),
                        .deadline_ms = dtx__srv_budget(c, 0)};
  int64_t token;
  json_t *out = NULL;
  if (token_arg(c, &token))
    return;
  int rc = dtx_lock_check(c->param[0], &lo);
  if (!rc)
    rc = dtx_lock_renew(c->d->st, c->param[0], token, &lo, &out);
  dtx__srv_one(c, rc, &out, NULL);
}

void dtx__srv_h_lock_release(dtx__srv_ctx_t *c) {
  dtx_lock_opts_t lo = {.deadline_ms = dtx__srv_budget(c, 0)};
  int64_t token;
  json_t *out = NULL;
  if (token_arg(c, &token))
    return;
  int rc = dtx_lock_check(c->param[0], &lo);
  if (!rc)
    rc = dtx_lock_release(c->d->st, c->param[0], token, &out);
  dtx__srv_one(c, rc, &out, NULL);
}

void dtx__srv_h_lock_get(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  dtx__srv_one(c, dtx_lock_get(c->d->st, c->param[0], &out), &out, NULL);
}

void dtx__srv_h_lock_list(dtx__srv_ctx_t *c) {
  dtx_page_t page;
  json_t *items = NULL;
  if (dtx__srv_qpage(c, "locks", &page))
    return;
  int rc = dtx_lock_list(c->d->st, &page, &items);
  dtx__srv_qanswer(c, "locks", "locks", &page, rc, items);
}

/* The admin's force-release (the admin page's button): release with the
 * lock's current token as read now -- or with "token", the one the page
 * showed -- through the same conditional release as a holder's, so a
 * lock acquired again meanwhile (a newer token) is not freed: 409 NOMATCH.
 * The holder's later fenced writes are then refused by the next token. */
void dtx__srv_h_lock_force_release(dtx__srv_ctx_t *c) {
  dtx_lock_opts_t lo = {.deadline_ms = dtx__srv_budget(c, 0)};
  json_t *cur = NULL, *out = NULL;
  int rc = dtx_lock_check(c->param[0], &lo);
  if (!rc && !dtx__srv_arg(c, "token"))
    rc = dtx_lock_get(c->d->st, c->param[0], &cur);
  if (rc) {
    json_decref(cur);
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  int64_t token =
      cur ? (int64_t)json_integer_value(json_object_get(cur, "token"))
          : dtx__srv_arg_int(c, "token", 0);
  json_decref(cur);
  rc = dtx_lock_release(c->d->st, c->param[0], token, &out);
  dtx__srv_one(c, rc, &out, NULL);
}
