/* routes_lock.c -- doctxd's lock routes, /v1/locks/..., and the admin's
 * force-release: each calls the library as `doctx lock` does
 * (src/cli/cmd_lock.c, docs/locks.md), with the body's fields for its
 * options ('-' written '_') and the same JSON as its answer.  A held lock
 * is a failed condition (409 NOMATCH, naming the holder), a token no
 * longer current too; a stale token on a fenced document write is 409
 * FENCED (the document routes' "fence").  Also dtx__srv_one, the answer
 * of a call that returns one document, which the pattern routes share. */
#include "server/server.h"

#include <string.h>

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
                        .deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0),
                        .max = dtx__srv_arg_int(c, "max", 0)};
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

/* A campaign waits until it leads (docs/locks.md, "Leader election"):
 * without "wait_ms", as long as the request's time allows. */
void dtx__srv_h_lock_campaign(dtx__srv_ctx_t *c) {
  dtx_lock_opts_t lo = lock_opts(c);
  json_t *out = NULL;
  if (lo.wait_ms == 0)
    lo.wait_ms = dtx__srv_budget(c, 0);
  int rc = dtx_lock_check(c->param[0], &lo);
  if (!rc)
    rc = dtx_lock_campaign(c->d->st, c->param[0], &lo, &out);
  if (!rc && out)
    json_object_del(out, "held"); /* what `doctx lock campaign` prints */
  dtx__srv_one(c, rc, &out, NULL);
}

void dtx__srv_h_lock_leader(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  dtx__srv_one(c, dtx_lock_leader(c->d->st, c->param[0], &out), &out, NULL);
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
  dtx__srv_list_t l;
  json_t *items = NULL;
  if (dtx__srv_list_page(c, &l, "locks", NULL, 0))
    return;
  int rc = dtx_lock_list(c->d->st, &l.page, &items);
  dtx__srv_list_answer(c, &l, "locks", rc, items);
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
