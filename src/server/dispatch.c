/* dispatch.c -- doctxd's pure request dispatcher: (method, target,
 * Authorization, body) -> (status, content type, body, Allow /
 * Retry-After), with no socket in sight, so the libmicrohttpd glue
 * (main.c), the contract tests and tests/fuzz/fuzz_route.c run the same
 * code.  It matches the route table (routes.c), decodes the path
 * parameters, checks the token, its scope and its rate, the query keys
 * and the body, then calls the handler.  Every error leaves here as
 * application/problem+json through the one status table below
 * (docs/server.md, "Status codes"). */
#include "server/server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* THE table: every DTX_E* code and the HTTP status it is sent with.  Bad
 * input 400, a missing thing 404, a failed condition or constraint 409,
 * the store away or busy 503, the rest (the server's or the store's own
 * failure) 500.  The classes are the CLI's exit codes' (dtx__cli_exit_code:
 * 2 is 400, 3 is 409): TYPE, OVERFLOW, IMMUTABLE and LIMIT are what the
 * stored documents make of a well-formed request, so 409 as on the CLI
 * (tests/server/bad_input_http.sh sends its table both ways). */
static const struct {
  int rc, status;
} status_table[] = {
    {DTX_EINVAL, 400},      {DTX_EBADJSON, 400},     {DTX_EBADQUERY, 400},
    {DTX_EBADUPDATE, 400},  {DTX_EBADINDEX, 400},    {DTX_ETYPE, 409},
    {DTX_EOVERFLOW, 409},   {DTX_EIMMUTABLE, 409},   {DTX_ELIMIT, 409},
    {DTX_ENOTFOUND, 404},   {DTX_ENOACCOUNT, 404},   {DTX_ENOMATCH, 409},
    {DTX_EDUPKEY, 409},     {DTX_ECONFLICT, 409},    {DTX_EINSUFFICIENT, 409},
    {DTX_ESTATE, 409},      {DTX_ESTALE, 409},       {DTX_EFENCED, 409},
    {DTX_EVALIDATION, 409}, {DTX_EUNAVAILABLE, 503}, {DTX_EBUSY, 503},
    {DTX_ENOMEM, 500},      {DTX_EBADURI, 500},      {DTX_EBACKEND, 500},
    {DTX_EFAULT, 500},      {DTX_EAUDIT, 500},
};

int dtx__srv_status_of(int rc) {
  for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++)
    if (status_table[i].rc == rc)
      return status_table[i].status;
  return 500;
}

static const char *reason(int status) {
  switch (status) {
  case 400:
    return "bad request";
  case 401:
    return "no valid bearer token";
  case 403:
    return "the token lacks the scope this route needs";
  case 404:
    return "no such route";
  case 405:
    return "method not allowed on this path";
  case 413:
    return "request body too large";
  case 429:
    return "rate limit exceeded";
  case 503:
    return "draining: the server is shutting down";
  default:
    return "error";
  }
}

void dtx__srv_resp_free(dtx__srv_resp_t *resp) {
  free(resp->body);
  resp->body = NULL;
}

static void set_json(dtx__srv_resp_t *resp, int status, const char *ctype,
                     json_t *v) {
  free(resp->body);
  resp->status = status;
  resp->ctype = ctype;
  resp->body = v ? dtx_json_dump(v) : NULL;
  json_decref(v);
  if (!resp->body) { /* out of memory: a fixed answer */
    resp->status = 500;
    resp->ctype = "application/problem+json";
    resp->body = strdup("{\"status\":500,\"code\":\"NOMEM\"}");
  }
  resp->body_len = resp->body ? strlen(resp->body) : 0;
}

json_t *dtx__srv_problem_json(int rc, const char *detail) {
  char type[64];
  snprintf(type, sizeof type, "urn:doctx:error:%s", dtx_errname(rc));
  return json_pack("{s:s,s:s,s:i,s:s,s:s}", "type", type, "title",
                   dtx_strerror(rc), "status", dtx__srv_status_of(rc), "detail",
                   detail && *detail ? detail : dtx_strerror(rc), "code",
                   dtx_errname(rc));
}

void dtx__srv_problem(dtx__srv_resp_t *resp, int status, const char *code,
                      const char *title, const char *detail) {
  char type[64];
  snprintf(type, sizeof type, "urn:doctx:error:%s", code);
  set_json(resp, status, "application/problem+json",
           json_pack("{s:s,s:s,s:i,s:s,s:s}", "type", type, "title", title,
                     "status", status, "detail", detail, "code", code));
}

void dtx__srv_json(dtx__srv_ctx_t *c, int status, json_t *v) {
  set_json(c->resp, status, "application/json", v);
}

void dtx__srv_fail(dtx__srv_ctx_t *c, int rc, json_t *extra) {
  json_t *p = dtx__srv_problem_json(rc, dtx_errdetail());
  if (p && extra)
    json_object_update(p, extra);
  json_decref(extra);
  c->rc = rc;
  set_json(c->resp, dtx__srv_status_of(rc), "application/problem+json", p);
}

void dtx__srv_bad(dtx__srv_ctx_t *c, int rc, const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  c->rc = rc;
  set_json(c->resp, dtx__srv_status_of(rc), "application/problem+json",
           dtx__srv_problem_json(rc, detail));
}

int dtx__srv_init(dtx__srv_t *d) {
  d->stats = calloc(dtx__srv_nroutes + 1, sizeof *d->stats);
  d->start_s = (int64_t)time(NULL);
  return d->stats ? 0 : -1;
}

void dtx__srv_fini(dtx__srv_t *d) {
  free(d->stats);
  d->stats = NULL;
}

/* Matches path against pattern; on a match the decoded params go to
 * bufs/param.  1 match, 0 none, -1 a parameter that does not decode
 * (detail in why). */
static int match(const char *pattern, const char *path, size_t plen,
                 char bufs[][DTX__SRV_MAX_PARAM + 1], const char **param,
                 const char **why) {
  const char *p = pattern, *s = path, *end = path + plen;
  int np = 0;
  while (*p && s < end) {
    if (*p != '/' || *s != '/')
      return 0;
    p++, s++;
    const char *pe = strchr(p, '/'), *se = memchr(s, '/', (size_t)(end - s));
    if (!pe)
      pe = p + strlen(p);
    if (!se)
      se = end;
    if (*p == '{') {
      if (se == s)
        return 0; /* an empty parameter matches nothing */
      if (np >= DTX__SRV_MAX_PARAMS)
        return 0;
      if (dtx__srv_pct_decode(s, (size_t)(se - s), bufs[np],
                              DTX__SRV_MAX_PARAM + 1)) {
        *why = "a path parameter has a bad percent-escape, a NUL byte or "
               "more than 256 bytes";
        return -1;
      }
      param[np] = bufs[np];
      np++;
    } else if ((size_t)(pe - p) != (size_t)(se - s) ||
               memcmp(p, s, (size_t)(pe - p)) != 0) {
      return 0;
    }
    p = pe, s = se;
  }
  return *p == '\0' && s == end;
}

/* 1 when key is in the comma-separated list. */
static int listed(const char *list, const char *key, size_t klen) {
  for (const char *q = list; q && *q;) {
    const char *e = strchr(q, ',');
    size_t n = e ? (size_t)(e - q) : strlen(q);
    if (n == klen && memcmp(q, key, n) == 0)
      return 1;
    q = e ? e + 1 : NULL;
  }
  return 0;
}

/* Checks the query's keys against the route's list: 0, or answered. */
static int check_query(dtx__srv_ctx_t *c, const dtx__srv_route_t *r) {
  for (const char *q = c->query; *q;) {
    const char *amp = strchr(q, '&'), *eq;
    size_t n = amp ? (size_t)(amp - q) : strlen(q);
    eq = memchr(q, '=', n);
    size_t klen = eq ? (size_t)(eq - q) : n;
    char key[64];
    if (n &&
        (klen >= sizeof key || dtx__srv_pct_decode(q, klen, key, sizeof key) ||
         !listed(r->query, key, strlen(key)))) {
      dtx__srv_bad(
          c, DTX_EINVAL, "unknown query parameter '%.*s' (allowed: %s)",
          (int)(klen > 64 ? 64 : klen), q, r->query ? r->query : "none");
      return -1;
    }
    q = amp ? amp + 1 : q + n;
  }
  return 0;
}

static unsigned effective(unsigned s) {
  if (s & DTX__SRV_SCOPE_ADMIN)
    s |= DTX__SRV_SCOPE_WRITE | DTX__SRV_SCOPE_READ | DTX__SRV_SCOPE_METRICS;
  if (s & DTX__SRV_SCOPE_WRITE)
    s |= DTX__SRV_SCOPE_READ;
  return s;
}

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The dispatch proper; returns the route index (dtx__srv_nroutes: none). */
static size_t route(dtx__srv_t *d, const dtx__srv_req_t *req,
                    dtx__srv_ctx_t *c) {
  const char *target = req->target ? req->target : "";
  const char *qm = strchr(target, '?');
  size_t plen = qm ? (size_t)(qm - target) : strlen(target);
  char bufs[DTX__SRV_MAX_PARAMS][DTX__SRV_MAX_PARAM + 1];
  const char *why = NULL;
  size_t ri = dtx__srv_nroutes;
  c->query = qm ? qm + 1 : "";
  c->resp->allow[0] = '\0';
  if (req->body_len > DTX__SRV_MAX_BODY) {
    dtx__srv_problem(c->resp, 413, "TOOLARGE", reason(413),
                     "a request body is at most 1 MiB (1048576 bytes)");
    return ri;
  }
  for (size_t i = 0; i < dtx__srv_nroutes; i++) {
    const char *param[DTX__SRV_MAX_PARAMS] = {0};
    int m = match(dtx__srv_routes[i].pattern, target, plen, bufs, param, &why);
    if (m < 0) {
      dtx__srv_problem(c->resp, 400, "INVAL", dtx_strerror(DTX_EINVAL), why);
      return i;
    }
    if (!m)
      continue;
    if (strcmp(dtx__srv_routes[i].method, req->method ? req->method : "") !=
        0) {
      size_t n = strlen(c->resp->allow);
      snprintf(c->resp->allow + n, sizeof c->resp->allow - n, "%s%s",
               n ? ", " : "", dtx__srv_routes[i].method);
      continue;
    }
    ri = i; /* its params are decoded again below, into bufs */
    break;
  }
  if (ri == dtx__srv_nroutes) {
    if (c->resp->allow[0])
      dtx__srv_problem(c->resp, 405, "METHOD", reason(405),
                       "this path takes other methods (see Allow)");
    else
      dtx__srv_problem(c->resp, 404, "NOROUTE", reason(404),
                       "no route has this method and path (docs/server.md)");
    return ri;
  }
  const dtx__srv_route_t *r = &dtx__srv_routes[ri];
  c->resp->allow[0] = '\0';
  const char *param[DTX__SRV_MAX_PARAMS] = {0};
  (void)match(r->pattern, target, plen, bufs, param, &why);
  c->param[0] = param[0];
  c->param[1] = param[1];
  if (atomic_load(&d->draining) && r->fn != dtx__srv_h_healthz &&
      r->fn != dtx__srv_h_readyz) {
    dtx__srv_problem(c->resp, 503, "DRAINING", reason(503),
                     "the server is draining; retry on another instance");
    c->resp->retry_after = 1;
    return ri;
  }
  if (r->scope != DTX__SRV_SCOPE_NONE) {
    dtx__srv_token_t *tok = dtx__srv_tokens_find(&d->tokens, req->auth);
    if (!tok) {
      dtx__srv_problem(c->resp, 401, "UNAUTHORIZED", reason(401),
                       req->auth ? "the bearer token is not known"
                                 : "send Authorization: Bearer TOKEN");
      return ri;
    }
    if (!(effective(tok->scopes) & r->scope)) {
      char detail[160];
      snprintf(detail, sizeof detail, "token '%s' lacks the %s scope",
               tok->name,
               r->scope == DTX__SRV_SCOPE_READ    ? "read"
               : r->scope == DTX__SRV_SCOPE_WRITE ? "write"
               : r->scope == DTX__SRV_SCOPE_ADMIN ? "admin"
                                                  : "metrics");
      dtx__srv_problem(c->resp, 403, "FORBIDDEN", reason(403), detail);
      return ri;
    }
    int wait = dtx__srv_tokens_take(&d->tokens, tok);
    if (wait) {
      dtx__srv_problem(c->resp, 429, "RATELIMIT", reason(429),
                       "this token's request rate is over its limit");
      c->resp->retry_after = wait;
      return ri;
    }
  }
  if (check_query(c, r))
    return ri;
  if (r->fields) {
    if (dtx__srv_body_parse(c, req->body, req->body_len, r->fields, &c->body))
      return ri;
  } else if (req->body_len) {
    dtx__srv_bad(c, DTX_EINVAL, "%s %s takes no request body", r->method,
                 r->pattern);
    return ri;
  }
  r->fn(c);
  return ri;
}

void dtx__srv_dispatch(dtx__srv_t *d, const dtx__srv_req_t *req,
                       dtx__srv_resp_t *resp) {
  memset(resp, 0, sizeof *resp);
  dtx__srv_ctx_t c = {.d = d, .resp = resp, .budget_ms = req->budget_ms};
  int64_t t0 = now_us();
  size_t ri = route(d, req, &c);
  json_decref(c.body);
  if (!resp->ctype) /* a handler that answered nothing: a bug, said so */
    dtx__srv_problem(resp, 500, "BACKEND", "internal error",
                     "the handler gave no answer");
  dtx__srv_metrics_observe(d, (int)ri, req->method, resp->status, now_us() - t0,
                           c.rc);
  dtx__srv_ring_observe(d, ri, resp->status);
}

int64_t dtx__srv_budget(dtx__srv_ctx_t *c, int64_t asked) {
  if (c->budget_ms > 0 && (asked <= 0 || asked > c->budget_ms))
    return c->budget_ms;
  return asked;
}
