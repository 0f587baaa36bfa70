/* openapi.c -- GET /openapi.json: doctxd's OpenAPI 3.1 description, built
 * from THE route table (routes.c) at each request, so it lists exactly the
 * routes the dispatcher serves: per route its method and path, the path
 * parameters ({name}), the query keys the route takes, the scope a token
 * needs (as the bearer scheme's role list), the body's fields with their
 * types (additionalProperties false: the dispatcher refuses any other
 * field by name) and the application/problem+json answers the dispatcher
 * can give.  The only things not in the table -- a one-line summary and a
 * success status other than 200 -- come from the small list below; a
 * route missing there is still described, under "METHOD PATH"
 * (docs/admin.md, tests/browser/openapi.test.mjs). */
#include "server/server.h"

#include <stdio.h>
#include <string.h>

/* An entry without a second status leaves ok2 zero on purpose. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const struct {
  const char *method, *pattern, *summary;
  int ok, ok2; /* the success status, and another one (0: none) */
} notes[] = {
    {"POST", "/v1/c/{coll}/find", "Find documents (cursor paging)", 200},
    {"POST", "/v1/c/{coll}/count", "Count documents", 200},
    {"POST", "/v1/c/{coll}/insert", "Insert documents", 200},
    {"POST", "/v1/c/{coll}/update", "Update documents", 200},
    {"POST", "/v1/c/{coll}/find-and-modify", "Update one and return it", 200},
    {"POST", "/v1/c/{coll}/delete", "Delete documents", 200},
    {"POST", "/v1/c/{coll}/bulk", "Ordered bulk of writes", 200},
    {"POST", "/v1/c/{coll}/aggregate", "Aggregation pipeline", 200},
    {"GET", "/v1/c/{coll}/indexes", "List indexes", 200},
    {"POST", "/v1/c/{coll}/indexes", "Create an index", 200},
    {"POST", "/v1/accounts", "Create an account", 201},
    {"GET", "/v1/accounts/{id}", "Show an account", 200},
    {"GET", "/v1/accounts", "List accounts", 200},
    {"POST", "/v1/transfers", "Make a transfer (idempotent by id)", 200},
    {"POST", "/v1/transfers/batch", "Make up to 1,000 transfers", 200},
    {"GET", "/v1/transfers/{id}", "Show a transfer", 200},
    {"GET", "/v1/transfers", "List transfers by state", 200},
    {"POST", "/v1/transfers/{id}/cancel", "Cancel an uncommitted transfer",
     200},
    {"POST", "/v1/queues/{q}/jobs", "Add a job (200: its id existed)", 201,
     200},
    {"GET", "/v1/queues/{q}/jobs", "List a queue's jobs by state", 200},
    {"POST", "/v1/queues/{q}/claim", "Claim due jobs with a lease", 200},
    {"GET", "/v1/queues/{q}/stats", "A queue's jobs by state", 200},
    {"GET", "/v1/queues/{q}/events",
     "A queue's job events after a cursor (wait_ms: long poll)", 200},
    {"GET", "/v1/jobs/{id}", "Show a job", 200},
    {"POST", "/v1/jobs/{id}/heartbeat", "Renew a claimed job's lease", 200},
    {"POST", "/v1/jobs/{id}/complete", "Complete a claimed job", 200},
    {"POST", "/v1/jobs/{id}/fail", "Fail a claimed job", 200},
    {"POST", "/v1/jobs/{id}/retry", "Retry a dead job", 200},
    {"POST", "/v1/jobs/{id}/cancel", "Cancel a job (a running one: request it)", 200},
    {"POST", "/v1/jobs/{id}/effect", "Apply a job's effect at most once", 200},
    {"POST", "/v1/job-schedules", "Add or replace a job schedule", 200},
    {"GET", "/v1/job-schedules", "List job schedules", 200},
    {"DELETE", "/v1/job-schedules/{name}", "Remove a job schedule", 200},
    {"GET", "/v1/job-queues", "The queues' settings (paused, max_running, rate)", 200},
    {"POST", "/v1/job-queues/{q}/pause",
     "Pause a queue: claims stop, running jobs finish", 200},
    {"POST", "/v1/job-queues/{q}/resume", "Resume a paused queue", 200},
    {"POST", "/v1/job-queues/{q}",
     "Set a queue's limits: at most max_running jobs run at once; at most "
     "rate N/MS claims per window (per rate_group value)", 200},
    {"POST", "/v1/jobs/{id}/progress", "Record a claimed job's progress", 200},
    {"POST", "/v1/locks/{name}/acquire", "Acquire a lock (a fencing token)",
     200},
    {"POST", "/v1/locks/{name}/campaign",
     "Campaign for leadership: wait until leading (the token is the term)",
     200},
    {"GET", "/v1/locks/{name}/leader", "A lock's leader and term", 200},
    {"POST", "/v1/locks/{name}/renew", "Renew a lock's lease", 200},
    {"POST", "/v1/locks/{name}/release", "Release a lock", 200},
    {"GET", "/v1/locks/{name}", "Show a lock", 200},
    {"GET", "/v1/locks", "List locks", 200},
    {"POST", "/v1/admin/locks/{name}/release", "Force-release a lock", 200},
    {"POST", "/v1/ledger/accounts", "Create a ledger account", 201},
    {"POST", "/v1/ledger/accounts/{id}/limit", "Set a ledger account's limit",
     200},
    {"POST", "/v1/ledger/accounts/{id}/close",
     "Close a ledger account at balance 0 with no hold", 200},
    {"GET", "/v1/ledger/accounts/{id}/balance", "A ledger account's balance",
     200},
    {"GET", "/v1/ledger/accounts/{id}/statement",
     "A ledger account's statement", 200},
    {"POST", "/v1/ledger/entries", "Post a ledger entry", 200},
    {"GET", "/v1/ledger/entries", "List ledger entries", 200},
    {"POST", "/v1/ledger/entries/batch", "Post up to 1,000 ledger entries",
     200},
    {"POST", "/v1/ledger/entries/{id}/post", "Post a pending entry", 200},
    {"POST", "/v1/ledger/entries/{id}/void", "Void a pending entry", 200},
    {"POST", "/v1/ledger/entries/{id}/reverse", "Reverse a posted entry", 200},
    {"GET", "/v1/ledger/entries/{id}", "Show a ledger entry", 200},
    {"POST", "/v1/ledger/unique-refs",
     "Make entry refs unique in the ledger from now on", 200},
    {"POST", "/v1/sync/{name}/rule", "Define a sync rule", 200},
    {"POST", "/v1/sync/{name}/update", "Update a master and its dependents",
     200},
    {"GET", "/v1/sync/{name}", "Show a sync rule", 200},
    {"POST", "/v1/sync/repair", "Repair interrupted syncs", 200},
    {"POST", "/v1/orders/{trade_id}/create", "Create an order", 200},
    {"POST", "/v1/orders/{trade_id}/confirm", "Confirm an order", 200},
    {"POST", "/v1/orders/confirm", "Confirm many orders", 200},
    {"POST", "/v1/orders/{trade_id}/cancel", "Cancel an order", 200},
    {"GET", "/v1/orders/{trade_id}", "Show an order", 200},
    {"GET", "/v1/orders", "List orders", 200},
    {"POST", "/v1/versions/{item}/put", "Write a new version", 200},
    {"GET", "/v1/versions/{item}", "Read a version", 200},
    {"GET", "/v1/versions/{item}/history", "An item's versions", 200},
    {"POST", "/v1/versions/gc", "Collect old versions", 200},
    {"POST", "/v1/txn",
     "Run a multi-document transaction script (200: committed, or aborted "
     "by a require)",
     200},
    {"POST", "/v1/txn/{id}/outcome",
     "A transaction's outcome (an id with no record is fenced: aborted)", 200},
    {"POST", "/v1/admin/audit", "Run the audit", 200},
    {"POST", "/v1/admin/recover", "Run recovery", 200},
    {"GET", "/v1/admin/stats", "Dashboard counts and the one-minute ring", 200},
    {"GET", "/healthz", "The process is up", 200},
    {"GET", "/readyz", "The store answers (503 while draining)", 200},
    {"GET", "/metrics", "Prometheus metrics", 200},
    {"GET", "/openapi.json", "This description", 200},
    {"GET", "/admin", "The admin page", 200},
    {"GET", "/admin/app.js", "The admin page's script", 200},
    {"GET", "/admin/app.css", "The admin page's style", 200},
};

static const char *scope_name(unsigned s) {
  switch (s) {
  case DTX__SRV_SCOPE_READ:
    return "read";
  case DTX__SRV_SCOPE_WRITE:
    return "write";
  case DTX__SRV_SCOPE_ADMIN:
    return "admin";
  default:
    return "metrics";
  }
}

static json_t *field_schema(dtx__srv_ftype_t t) {
  switch (t) {
  case F_OBJ:
    return json_pack("{s:s}", "type", "object");
  case F_ARR:
    return json_pack("{s:s}", "type", "array");
  case F_STR:
    return json_pack("{s:s}", "type", "string");
  case F_INT:
    return json_pack("{s:s,s:s}", "type", "integer", "format", "int64");
  case F_BOOL:
    return json_pack("{s:s}", "type", "boolean");
  case F_INT_OR_STR:
    return json_pack("{s:[{s:s,s:s},{s:s}]}", "oneOf", "type", "integer",
                     "format", "int64", "type", "string");
  default: /* a type that takes any JSON value: the empty schema */
    return json_object();
  }
}

/* The query key's schema: limit is a page size, the rest strings. */
static json_t *query_param(const char *key, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "%.*s", (int)n, key);
  json_t *schema = strcmp(name, "limit") == 0
                       ? json_pack("{s:s,s:i,s:i}", "type", "integer",
                                   "minimum", 1, "maximum", DTX__SRV_MAX_PAGE)
                       : json_pack("{s:s}", "type", "string");
  return json_pack("{s:s,s:s,s:b,s:o}", "name", name, "in", "query", "required",
                   0, "schema", schema);
}

/* "post_v1_c_coll_find": unique, since method and pattern are. */
static json_t *operation_id(const dtx__srv_route_t *r) {
  char id[160];
  size_t n = 0;
  for (const char *p = r->method; *p && n < sizeof id - 1; p++)
    id[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
  for (const char *p = r->pattern; *p && n < sizeof id - 1; p++) {
    char ch = *p;
    if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
        (ch >= 'A' && ch <= 'Z'))
      id[n++] = ch;
    else if (ch != '{' && ch != '}' && n && id[n - 1] != '_')
      id[n++] = '_';
  }
  id[n] = '\0';
  return json_string(id);
}

/* The success answer's media type: what the handler sends. */
static const char *ok_type(const dtx__srv_route_t *r) {
  if (r->fn == dtx__srv_h_metrics)
    return "text/plain";
  if (r->fn == dtx__srv_h_admin_page)
    return "text/html";
  if (r->fn == dtx__srv_h_admin_js)
    return "text/javascript";
  if (r->fn == dtx__srv_h_admin_css)
    return "text/css";
  return "application/json";
}

static json_t *operation(const dtx__srv_route_t *r, const char *tag) {
  const char *summary = NULL;
  int ok = 200, ok2 = 0;
  for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
    if (strcmp(notes[i].method, r->method) == 0 &&
        strcmp(notes[i].pattern, r->pattern) == 0) {
      summary = notes[i].summary;
      ok = notes[i].ok;
      ok2 = notes[i].ok2;
    }
  char fallback[160], code[8];
  if (!summary) {
    snprintf(fallback, sizeof fallback, "%s %s", r->method, r->pattern);
    summary = fallback;
  }
  json_t *op = json_pack("{s:s,s:o,s:[s]}", "summary", summary, "operationId",
                         operation_id(r), "tags", tag);
  /* parameters: the path's {name}s, then the query keys */
  json_t *params = json_array();
  for (const char *p = strchr(r->pattern, '{'); p; p = strchr(p + 1, '{')) {
    const char *e = strchr(p, '}');
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(e - p - 1), p + 1);
    json_array_append_new(
        params, json_pack("{s:s,s:s,s:b,s:{s:s,s:i,s:i}}", "name", name, "in",
                          "path", "required", 1, "schema", "type", "string",
                          "minLength", 1, "maxLength", DTX__SRV_MAX_PARAM));
  }
  for (const char *q = r->query; q && *q;) {
    const char *e = strchr(q, ',');
    size_t n = e ? (size_t)(e - q) : strlen(q);
    json_array_append_new(params, query_param(q, n));
    q = e ? e + 1 : NULL;
  }
  if (json_array_size(params))
    json_object_set_new(op, "parameters", params);
  else
    json_decref(params);
  if (r->fields) {
    json_t *props = json_object();
    for (const dtx__srv_field_t *f = r->fields; f->name; f++)
      json_object_set_new(props, f->name, field_schema(f->type));
    json_object_set_new(op, "requestBody",
                        json_pack("{s:b,s:{s:{s:{s:s,s:o,s:b}}}}", "required",
                                  0, "content", "application/json", "schema",
                                  "type", "object", "properties", props,
                                  "additionalProperties", 0));
  }
  if (r->scope == DTX__SRV_SCOPE_NONE)
    json_object_set_new(op, "security", json_array());
  else
    json_object_set_new(op, "security",
                        json_pack("[{s:[s]}]", "bearer", scope_name(r->scope)));
  /* answers: the success, then every problem the dispatcher can send for
   * a route like this one */
  json_t *resp = json_object();
  json_t *ok_schema = strcmp(ok_type(r), "application/json") == 0
                          ? json_pack("{s:s}", "type", "object")
                          : json_pack("{s:s}", "type", "string");
  for (int k = 0; k < 2; k++) {
    if (k == 1 && !ok2)
      break;
    snprintf(code, sizeof code, "%d", k ? ok2 : ok);
    json_object_set_new(resp, code,
                        json_pack("{s:s,s:{s:{s:O}}}", "description", "success",
                                  "content", ok_type(r), "schema", ok_schema));
  }
  json_decref(ok_schema);
  static const int bearer_codes[] = {400, 401, 403, 404, 405,
                                     409, 413, 429, 500, 503};
  static const int open_codes[] = {404, 405, 500, 503};
  const int *codes = r->scope ? bearer_codes : open_codes;
  size_t ncodes = r->scope ? sizeof bearer_codes / sizeof *bearer_codes
                           : sizeof open_codes / sizeof *open_codes;
  for (size_t i = 0; i < ncodes; i++) {
    snprintf(code, sizeof code, "%d", codes[i]);
    json_object_set_new(
        resp, code,
        json_pack("{s:s}", "$ref", "#/components/responses/Problem"));
  }
  json_object_set_new(op, "responses", resp);
  return op;
}

/* The tag of a route: its first path segment after /v1 ("c" is
 * "documents"), or "operations". */
static void tag_of(const char *pattern, char *tag, size_t n) {
  if (strncmp(pattern, "/v1/", 4) != 0) {
    snprintf(tag, n, "%s",
             strncmp(pattern, "/admin", 6) == 0 ? "admin page" : "operations");
    return;
  }
  const char *s = pattern + 4, *e = strchr(s, '/');
  size_t len = e ? (size_t)(e - s) : strlen(s);
  if (len == 1 && *s == 'c')
    snprintf(tag, n, "documents");
  else
    snprintf(tag, n, "%.*s", (int)len, s);
}

json_t *dtx__srv_openapi(void) {
  json_t *paths = json_object();
  for (size_t i = 0; i < dtx__srv_nroutes; i++) {
    const dtx__srv_route_t *r = &dtx__srv_routes[i];
    char method[16], tag[32];
    size_t k = 0;
    for (; r->method[k] && k < sizeof method - 1; k++)
      method[k] = (char)(r->method[k] >= 'A' && r->method[k] <= 'Z'
                             ? r->method[k] - 'A' + 'a'
                             : r->method[k]);
    method[k] = '\0';
    tag_of(r->pattern, tag, sizeof tag);
    json_t *item = json_object_get(paths, r->pattern);
    if (!item) {
      item = json_object();
      json_object_set_new(paths, r->pattern, item);
    }
    json_object_set_new(item, method, operation(r, tag));
  }
  json_t *problem = json_pack(
      "{s:s,s:[s,s,s],s:{s:{s:s},s:{s:s},s:{s:s},s:{s:s},s:{s:s}}}", "type",
      "object", "required", "status", "code", "title", "properties", "type",
      "type", "string", "title", "type", "string", "status", "type", "integer",
      "detail", "type", "string", "code", "type", "string");
  return json_pack(
      "{s:s,s:{s:s,s:s,s:s},s:o,s:{s:{s:{s:s,s:s,s:s}},s:{s:o},s:{s:{s:s,s:{"
      "s:{s:{s:s}}}}}}}",
      "openapi", "3.1.0", "info", "title", "doctxd", "version", DOCTX_VERSION,
      "description",
      "doctx over HTTP/JSON (docs/server.md). Errors are "
      "application/problem+json; scopes are read < write < admin, and "
      "metrics.",
      "paths", paths, "components", "securitySchemes", "bearer", "type", "http",
      "scheme", "bearer", "description",
      "a token of the --tokens file; the role list names the scope a route "
      "needs",
      "schemas", "Problem", problem, "responses", "Problem", "description",
      "an error (RFC 9457 problem details)", "content",
      "application/problem+json", "schema", "$ref",
      "#/components/schemas/Problem");
}

void dtx__srv_h_openapi(dtx__srv_ctx_t *c) {
  json_t *doc = dtx__srv_openapi();
  if (!doc) {
    dtx__srv_bad(c, DTX_ENOMEM, "openapi");
    return;
  }
  dtx__srv_json(c, 200, doc);
}
