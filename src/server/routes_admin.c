/* routes_admin.c -- the admin page (GET /admin and its script and style,
 * compiled into doctxd from src/server/admin/), its statistics route
 * (GET /v1/admin/stats: the one-minute ring of requests per route class,
 * plus counts by state read from the store) and GET /openapi.json, the
 * OpenAPI 3.1 description of doctxd, generated from the route table
 * (routes.c) when asked, so it cannot drift from what the dispatcher
 * serves (docs/admin.md).
 *
 * The ring is the only state doctxd keeps, and it is about this process's
 * traffic, never about the store: 60 one-second slots, each stamped with
 * its second.  A request bumps the slot of its second; the first request
 * of a new second claims the slot (a compare-and-swap of the stamp) and
 * zeroes it.  No lock: a request of the same second that lands between
 * the claim and the zeroing can be lost, which a throughput chart can
 * bear. */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the ring ------------------------------------------------------------ */

/* The route classes of the ring and the page's charts: the first path
 * segment after /v1/ (queues and jobs are one class; /v1/txn, a script of
 * document reads and writes, counts as documents), "ops" for the routes
 * outside /v1, and the requests no route matched. */
static const char *const classes[DTX__SRV_NCLASSES] = {
    "documents", "accounts", "transfers", "jobs",  "locks", "ledger",
    "sync",      "orders",   "versions",  "admin", "ops",   "unmatched"};

static int class_of(size_t route) {
  static const struct {
    const char *prefix;
    int cls;
  } map[] = {{"/v1/c/", 0},        {"/v1/txn", 0},      {"/v1/accounts", 1},
             {"/v1/transfers", 2}, {"/v1/queues", 3},   {"/v1/jobs", 3},
             {"/v1/locks", 4},     {"/v1/ledger", 5},   {"/v1/sync", 6},
             {"/v1/orders", 7},    {"/v1/versions", 8}, {"/v1/admin", 9}};
  if (route >= dtx__srv_nroutes)
    return DTX__SRV_NCLASSES - 1;
  const char *p = dtx__srv_routes[route].pattern;
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
    size_t n = strlen(map[i].prefix);
    if (strncmp(p, map[i].prefix, n) == 0 &&
        (p[n] == '\0' || p[n] == '/' || map[i].prefix[n - 1] == '/'))
      return map[i].cls;
  }
  return 10; /* ops: /healthz, /readyz, /metrics, /admin, /openapi.json */
}

static int64_t now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}

void dtx__srv_ring_observe(dtx__srv_t *d, size_t route, int status) {
  int64_t s = now_s();
  dtx__srv_ring_slot_t *slot = &d->ring[s % DTX__SRV_RING];
  int64_t old = atomic_load(&slot->sec);
  if (old != s && atomic_compare_exchange_strong(&slot->sec, &old, s)) {
    for (int k = 0; k < DTX__SRV_NCLASSES; k++) {
      atomic_store(&slot->req[k], 0);
      atomic_store(&slot->err4[k], 0);
      atomic_store(&slot->err5[k], 0);
    }
  }
  int k = class_of(route);
  atomic_fetch_add(&slot->req[k], 1);
  if (status >= 500)
    atomic_fetch_add(&slot->err5[k], 1);
  else if (status >= 400)
    atomic_fetch_add(&slot->err4[k], 1);
}

/* {CLASS: {"requests": [60], "client_errors": [60], "server_errors":
 * [60]}}, oldest second first, the current one last; a slot last written
 * more than a minute ago counts as zero. */
static json_t *ring_json(dtx__srv_t *d, int64_t now) {
  json_t *out = json_object();
  for (int k = 0; out && k < DTX__SRV_NCLASSES; k++) {
    json_t *req = json_array(), *e4 = json_array(), *e5 = json_array();
    for (int64_t s = now - DTX__SRV_RING + 1; s <= now; s++) {
      dtx__srv_ring_slot_t *slot = &d->ring[s % DTX__SRV_RING];
      int live = atomic_load(&slot->sec) == s;
      json_array_append_new(
          req, json_integer(live ? atomic_load(&slot->req[k]) : 0));
      json_array_append_new(
          e4, json_integer(live ? atomic_load(&slot->err4[k]) : 0));
      json_array_append_new(
          e5, json_integer(live ? atomic_load(&slot->err5[k]) : 0));
    }
    json_object_set_new(out, classes[k],
                        json_pack("{s:o,s:o,s:o}", "requests", req,
                                  "client_errors", e4, "server_errors", e5));
  }
  return out;
}

/* ---- GET /v1/admin/stats ----------------------------------------------------
 */

#define LOCKS_MAX 10000

static const char *const transfer_states[] = {"initiated",    "preparing",
                                              "committed",    "succeeded",
                                              "rolling_back", "failed"};

/* The counts of the dashboard: transfers by state (one count each, on the
 * state index), jobs by state over every queue and per queue (the first
 * DTX__SRV_MAX_QUEUES queues, dtx_job_stats each) and the
 * locks held (a live lease) among the first LOCKS_MAX ("more": there are
 * others).  0, or the library's error. */
static int counts_json(dtx__srv_t *d, json_t **out) {
  json_t *tx = json_object(), *jobs = NULL, *locks = NULL, *byq = NULL;
  int rc = 0;
  for (size_t i = 0;
       !rc && i < sizeof transfer_states / sizeof *transfer_states; i++) {
    int64_t n = 0;
    json_t *f = json_pack("{s:s}", "state", transfer_states[i]);
    rc = dtx_store_count(d->st, DTX_TRANSFERS, f, &n);
    json_decref(f);
    json_object_set_new(tx, transfer_states[i], json_integer(n));
  }
  if (!rc)
    rc = dtx_job_stats(d->st, NULL, &jobs);
  char q[DTX__SRV_MAX_QUEUES + 1][129];
  int nq = rc ? 0 : dtx__srv_job_queues(d->st, q);
  if (nq < 0)
    rc = DTX_EUNAVAILABLE;
  byq = json_object();
  for (int i = 0; !rc && i < nq; i++) {
    json_t *s = NULL;
    rc = dtx_job_stats(d->st, q[i], &s);
    json_object_set_new(byq, q[i], s ? s : json_object());
  }
  /* Locks are few (one per protected resource); the page reads at most
   * LOCKS_MAX of them each refresh and says when there were more. */
  dtx_page_t lp = {.skip = 0, .limit = LOCKS_MAX + 1};
  if (!rc)
    rc = dtx_lock_list(d->st, &lp, &locks);
  if (rc) {
    json_decref(tx);
    json_decref(jobs);
    json_decref(byq);
    json_decref(locks);
    return rc;
  }
  size_t i, held = 0, n = json_array_size(locks);
  json_t *l;
  int more = n > LOCKS_MAX;
  if (more)
    json_array_remove(locks, LOCKS_MAX), n = LOCKS_MAX;
  json_array_foreach(locks, i, l) held +=
      json_is_true(json_object_get(l, "held"));
  *out = json_pack("{s:o,s:o,s:o,s:{s:I,s:I,s:b}}", "transfers", tx, "jobs",
                   jobs, "jobs_by_queue", byq, "locks", "held",
                   (json_int_t)held, "total", (json_int_t)n, "more", more);
  json_decref(locks);
  return 0;
}

void dtx__srv_h_admin_stats(dtx__srv_ctx_t *c) {
  int64_t now = now_s();
  json_t *counts = NULL;
  int rc = counts_json(c->d, &counts);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  json_t *cls = json_array();
  for (int k = 0; k < DTX__SRV_NCLASSES; k++)
    json_array_append_new(cls, json_string(classes[k]));
  dtx__srv_json(c, 200,
                json_pack("{s:I,s:i,s:o,s:o,s:o,s:I}", "now", (json_int_t)now,
                          "window_s", DTX__SRV_RING, "classes", cls, "series",
                          ring_json(c->d, now), "counts", counts, "uptime_s",
                          (json_int_t)(now - c->d->start_s)));
}

/* ---- the page's static files ----------------------------------------------
 */

/* The page may run only its own script and style and talk only to this
 * origin: no inline script, no other host, no framing. */
static const char admin_csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'";

static void asset(dtx__srv_ctx_t *c, const char *name, const char *ctype) {
  for (size_t i = 0; i < dtx__srv_nassets; i++) {
    if (strcmp(dtx__srv_assets[i].name, name) != 0)
      continue;
    char *b = malloc(dtx__srv_assets[i].len + 1);
    if (!b)
      break;
    memcpy(b, dtx__srv_assets[i].data, dtx__srv_assets[i].len);
    b[dtx__srv_assets[i].len] = '\0';
    free(c->resp->body);
    c->resp->status = 200;
    c->resp->ctype = ctype;
    c->resp->body = b;
    c->resp->body_len = dtx__srv_assets[i].len;
    c->resp->csp = admin_csp;
    return;
  }
  dtx__srv_problem(c->resp, 500, "NOMEM", "internal error",
                   "the admin page's file could not be served");
}

void dtx__srv_h_admin_page(dtx__srv_ctx_t *c) {
  asset(c, "index.html", "text/html; charset=utf-8");
}
void dtx__srv_h_admin_js(dtx__srv_ctx_t *c) {
  asset(c, "app.js", "text/javascript; charset=utf-8");
}
void dtx__srv_h_admin_css(dtx__srv_ctx_t *c) {
  asset(c, "app.css", "text/css; charset=utf-8");
}
