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
#include <strings.h>
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
    {DTX_ECORRUPT, 500},
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

/* detail made valid UTF-8 (dtx__srv_utf8_fix) into a malloc'd copy, so a
 * detail quoting bad or cut input still packs: no input turns a 400 into
 * a 500.  NULL out of memory. */
static char *clean(const char *detail) {
  size_t cap = strlen(detail) + 1;
  char *s = malloc(cap);
  if (s)
    dtx__srv_utf8_fix(detail, s, cap);
  return s;
}

json_t *dtx__srv_problem_json(int rc, const char *detail) {
  char type[64];
  char *d = clean(detail && *detail ? detail : dtx_strerror(rc));
  snprintf(type, sizeof type, "urn:doctx:error:%s", dtx_errname(rc));
  json_t *p = d ? json_pack("{s:s,s:s,s:i,s:s,s:s}", "type", type, "title",
                            dtx_strerror(rc), "status", dtx__srv_status_of(rc),
                            "detail", d, "code", dtx_errname(rc))
                : NULL;
  free(d);
  return p;
}

void dtx__srv_problem(dtx__srv_resp_t *resp, int status, const char *code,
                      const char *title, const char *detail) {
  char type[64];
  char *d = clean(detail);
  snprintf(type, sizeof type, "urn:doctx:error:%s", code);
  set_json(resp, status, "application/problem+json",
           d ? json_pack("{s:s,s:s,s:i,s:s,s:s}", "type", type, "title", title,
                         "status", status, "detail", d, "code", code)
             : NULL);
  free(d);
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
      if (!dtx__srv_utf8_ok(bufs[np], strlen(bufs[np]))) {
        *why = "a path parameter is not valid UTF-8";
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

/* Checks the query: each key as sent (not percent-decoded: the handlers
 * look keys up as sent, so "li%6dit" is refused, not ignored) in the
 * route's list and given once, each value percent-decoding to UTF-8
 * without a NUL.  0, or answered 400. */
static int check_query(dtx__srv_ctx_t *c, const dtx__srv_route_t *r) {
  for (const char *q = c->query; *q;) {
    const char *amp = strchr(q, '&'), *eq;
    size_t n = amp ? (size_t)(amp - q) : strlen(q);
    eq = memchr(q, '=', n);
    size_t klen = eq ? (size_t)(eq - q) : n;
    if (n && !listed(r->query, q, klen)) {
      dtx__srv_bad(
          c, DTX_EINVAL, "unknown query parameter '%.*s' (allowed: %s)",
          (int)(klen > 64 ? 64 : klen), q, r->query ? r->query : "none");
      return -1;
    }
    for (const char *p = c->query; n && p < q;) { /* given before? */
      const char *pa = strchr(p, '&'), *pe;
      size_t pn = pa ? (size_t)(pa - p) : strlen(p);
      pe = memchr(p, '=', pn);
      if ((size_t)((pe ? pe : p + pn) - p) == klen && memcmp(p, q, klen) == 0) {
        dtx__srv_bad(c, DTX_EINVAL, "query parameter '%.*s' is given twice",
                     (int)klen, q);
        return -1;
      }
      p = pa ? pa + 1 : p + pn;
    }
    if (eq) {
      size_t vlen = n - klen - 1;
      char *v = malloc(vlen + 1);
      int bad = !v || dtx__srv_pct_decode(eq + 1, vlen, v, vlen + 1) ||
                !dtx__srv_utf8_ok(v, strlen(v));
      free(v);
      if (bad) {
        dtx__srv_bad(c, DTX_EINVAL,
                     "query parameter '%.*s': a bad percent-escape, a NUL "
                     "byte or bytes that are not UTF-8",
                     (int)klen, q);
        return -1;
      }
    }
    q = amp ? amp + 1 : q + n;
  }
  return 0;
}

/* 1 when the body asks to bypass validation: its "bypass_validation",
 * or a bulk operation's "bypassDocumentValidation". */
static int bypass_asked(const json_t *body) {
  const json_t *ops = json_object_get(body, "ops"), *op;
  size_t i;
  if (json_is_true(json_object_get(body, "bypass_validation")))
    return 1;
  json_array_foreach(ops, i, op) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)op, k, v) {
      if (json_is_true(json_object_get(v, "bypassDocumentValidation")))
        return 1;
    }
  }
  return 0;
}

/* 1 when a body's Content-Type is JSON's (parameters aside) -- or curl's
 * default for -d, application/x-www-form-urlencoded, which scripts send
 * JSON under: the body is parsed as JSON whatever it says (docs/server.md,
 * "Requests"). */
static int json_ctype(const char *ct) {
  static const char *const ok[] = {"application/json",
                                   "application/x-www-form-urlencoded"};
  while (*ct == ' ' || *ct == '\t')
    ct++;
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    size_t n = strlen(ok[i]);
    if (strncasecmp(ct, ok[i], n) == 0 &&
        (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t'))
      return 1;
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
  /* HEAD is GET without the body (libmicrohttpd sends no body for it). */
  const char *method = req->method ? req->method : "";
  if (strcmp(method, "HEAD") == 0)
    method = "GET";
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
    if (strcmp(dtx__srv_routes[i].method, method) != 0) {
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
  dtx__srv_token_t *tok = NULL;
  if (r->scope != DTX__SRV_SCOPE_NONE) {
    tok = dtx__srv_tokens_find(&d->tokens, req->auth);
    if (!tok) {
      dtx__srv_problem(c->resp, 401, "UNAUTHORIZED", reason(401),
                       req->auth ? "the bearer token is not known"
                                 : "send Authorization: Bearer TOKEN");
      return ri;
    }
    if (!(effective(tok->scopes) & r->scope)) {
      char detail[160];
      snprintf(detail, sizeof detail, "this token lacks the %s scope",
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
  if (r->fields && req->body_len && req->ctype && !json_ctype(req->ctype)) {
    dtx__srv_problem(c->resp, 415, "MEDIATYPE", "unsupported media type",
                     "a request body is JSON: send Content-Type: "
                     "application/json");
    return ri;
  }
  if (r->fields) {
    if (dtx__srv_body_parse(c, req->body, req->body_len, r->fields, &c->body))
      return ri;
    /* Bypassing validation writes what no rule checked (money made up, a
     * lock deleted): the admin scope's alone, on every route, checked
     * here once (docs/server.md, "Scopes"). */
    if (bypass_asked(c->body) &&
        !(tok && (effective(tok->scopes) & DTX__SRV_SCOPE_ADMIN))) {
      dtx__srv_problem(c->resp, 403, "FORBIDDEN", reason(403),
                       "bypass_validation needs the admin scope; this token "
                       "lacks it");
      return ri;
    }
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
  c.deadline_us = req->budget_ms > 0 ? t0 + req->budget_ms * 1000 : 0;
  size_t ri = route(d, req, &c);
  json_decref(c.body);
  if (!resp->ctype) /* a handler that answered nothing: a bug, said so */
    dtx__srv_problem(resp, 500, "BACKEND", "internal error",
                     "the handler gave no answer");
  dtx__srv_metrics_observe(d, (int)ri, req->method, resp->status, now_us() - t0,
                           c.rc);
  dtx__srv_ring_observe(d, ri, resp->status);
}

/* What is left now, not at dispatch: a handler that calls the library
 * chunk after chunk (the batches) gives each what remains. */
int64_t dtx__srv_budget(dtx__srv_ctx_t *c, int64_t asked) {
  if (!c->deadline_us)
    return asked;
  int64_t left = (c->deadline_us - now_us()) / 1000;
  if (left < 1)
    left = 1;
  return asked <= 0 || asked > left ? left : asked;
}
