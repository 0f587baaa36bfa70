/* server.h -- doctxd's pieces, shared by its files (docs/server.md).
 *
 * doctxd is a second front door beside the CLI: it calls only doctx.h, as
 * src/cli does.  A request goes through one pure function,
 * dtx__srv_dispatch(), which the libmicrohttpd glue (main.c), the contract
 * tests and the fuzz target (tests/fuzz/fuzz_route.c) all drive:
 *   (method, target, Authorization, body) -> (status, type, body, headers)
 * It finds the route in ONE table (routes.c), decodes and checks the path
 * parameters, checks the token's scope and its rate, parses and checks the
 * body, and calls the route's handler, which calls the library the way the
 * CLI's command does.  Errors become application/problem+json through ONE
 * table (dispatch.c).  Nothing here keeps state about the store's data:
 * several doctxd may serve one store. */
#ifndef DTX_SERVER_H
#define DTX_SERVER_H

#include "doctx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define DTX__SRV_MAX_BODY (1024 * 1024) /* bytes; past it 413 */
/* An oversized body up to this is read and dropped before the 413 (main.c,
 * "A declared length past the limit"); past it the 413 comes at once. */
#define DTX__SRV_DROP_MAX (8 * 1024 * 1024)
#define DTX__SRV_MAX_DEPTH 64           /* JSON nesting of a request body */
#define DTX__SRV_MAX_PARAM 256          /* bytes of a decoded path parameter */
#define DTX__SRV_MAX_PAGE 1000          /* a list's or find's limit, at most */
#define DTX__SRV_DEFAULT_PAGE 100
#define DTX__SRV_MAX_BATCH 1000 /* items of a batch endpoint */
#define DTX__SRV_MAX_TOKENS 256

/* Scopes: read < write < admin; metrics stands apart (admin has it). */
enum {
  DTX__SRV_SCOPE_NONE = 0, /* no token needed: /healthz, /readyz */
  DTX__SRV_SCOPE_READ = 1,
  DTX__SRV_SCOPE_WRITE = 2,
  DTX__SRV_SCOPE_ADMIN = 4,
  DTX__SRV_SCOPE_METRICS = 8,
};

/* One bearer token of the --tokens file, with its rate bucket. */
typedef struct dtx__srv_token {
  char name[64];
  char *secret;
  size_t len;
  unsigned scopes; /* DTX__SRV_SCOPE_* bits as granted (admin implies all) */
  pthread_mutex_t mu;
  double tokens;   /* the bucket's fill */
  int64_t last_us; /* when it was last refilled */
} dtx__srv_token_t;

typedef struct dtx__srv_tokens {
  dtx__srv_token_t *v;
  size_t n;
  double rate;  /* requests per second per token; 0: no limit */
  double burst; /* the bucket's size */
} dtx__srv_tokens_t;

/* Loads path (lines "NAME TOKEN SCOPES", scopes comma-separated from
 * read,write,admin,metrics; '#' starts a comment).  Refuses a file that
 * group or others may read or write, a token shorter than 16 characters,
 * a duplicate name or token, an unknown scope.  0, or -1 with a message
 * in err (errlen bytes). */
int dtx__srv_tokens_load(const char *path, dtx__srv_tokens_t *t, char *err,
                         size_t errlen);
void dtx__srv_tokens_free(dtx__srv_tokens_t *t);
/* The token the Authorization header value names ("Bearer X"), compared
 * in constant time against every token; NULL when none. */
dtx__srv_token_t *dtx__srv_tokens_find(dtx__srv_tokens_t *t, const char *auth);
/* Takes one request from tok's bucket: 0, or the seconds until one is
 * there (for Retry-After). */
int dtx__srv_tokens_take(dtx__srv_tokens_t *t, dtx__srv_token_t *tok);

/* ---- metrics (metrics.c) --------------------------------------------------
 */

#define DTX__SRV_NBUCKETS 14 /* 0.5 ms .. 5 s, then +Inf */
#define DTX__SRV_NCODES 16   /* distinct status codes kept per route */
#define DTX__SRV_NMETHODS 8

typedef struct dtx__srv_route_stats {
  _Atomic uint64_t by_code[DTX__SRV_NMETHODS][DTX__SRV_NCODES];
  _Atomic uint64_t bucket[DTX__SRV_NBUCKETS];
  _Atomic uint64_t sum_us;
  _Atomic uint64_t count;
} dtx__srv_route_stats_t;

/* ---- the server -----------------------------------------------------------
 */

/* The admin page's one-minute ring (routes_admin.c): per second, requests
 * and 4xx / 5xx answers per route class.  Atomics, zero-initialised: a
 * slot whose stamp is not its second counts as empty. */
#define DTX__SRV_RING 60
#define DTX__SRV_NCLASSES 12
typedef struct dtx__srv_ring_slot {
  _Atomic int64_t sec;
  _Atomic uint32_t req[DTX__SRV_NCLASSES];
  _Atomic uint32_t err4[DTX__SRV_NCLASSES];
  _Atomic uint32_t err5[DTX__SRV_NCLASSES];
} dtx__srv_ring_slot_t;

typedef struct dtxd {
  dtx_store_t *st;
  dtx__srv_tokens_t tokens;
  atomic_int draining;           /* SIGTERM seen: readyz and new requests 503 */
  atomic_int inflight;           /* requests being answered now (counted by the
                                    HTTP glue, from their headers to the response
                                    sent, body upload included) */
  int64_t start_s;               /* process start, Unix seconds */
  dtx__srv_route_stats_t *stats; /* one per route, plus the unmatched one */
  _Atomic uint64_t store_errors[32];        /* by -DTX_E* */
  dtx__srv_ring_slot_t ring[DTX__SRV_RING]; /* the admin page's charts */
} dtx__srv_t;

typedef struct dtx__srv_req {
  const char *method;
  const char *target; /* path[?query], still percent-encoded */
  const char *auth;   /* the Authorization header, or NULL */
  const char *body;   /* body bytes (need not be NUL-terminated) */
  size_t body_len;
  int64_t budget_ms; /* what is left of --request-timeout-ms; 0: none */
  const char *ctype; /* the Content-Type header, or NULL: a body of another
                        type than JSON is refused 415 */
} dtx__srv_req_t;

typedef struct dtx__srv_resp {
  int status;
  const char *ctype; /* static */
  char *body;        /* malloc'd; dtx__srv_resp_free */
  size_t body_len;
  char allow[64];  /* Allow header (405), or "" */
  int retry_after; /* seconds, 0: none */
  const char *csp; /* static Content-Security-Policy, or NULL: the strict
                      default (the admin page's files set their own) */
  int close;       /* close the connection after this answer */
} dtx__srv_resp_t;

/* Answers req into *resp (always set; free it with dtx__srv_resp_free). */
void dtx__srv_dispatch(dtx__srv_t *d, const dtx__srv_req_t *req,
                       dtx__srv_resp_t *resp);
void dtx__srv_resp_free(dtx__srv_resp_t *resp);
/* Allocates the route statistics of d (0, or -1 out of memory). */
int dtx__srv_init(dtx__srv_t *d);
void dtx__srv_fini(dtx__srv_t *d);

/* A finished request's answer to the fixed "draining" or "too large"
 * case the glue answers itself (413 early, 503 while draining). */
void dtx__srv_problem(dtx__srv_resp_t *resp, int status, const char *code,
                      const char *title, const char *detail);

/* ---- routes (routes.c, routes_doc.c, routes_txn.c) ------------------------
 */

#define DTX__SRV_MAX_PARAMS 2

/* What a handler gets: the decoded path params, the raw query, the body
 * (parsed and checked against the route's fields), and the response to
 * fill. */
typedef struct dtx__srv_ctx {
  dtx__srv_t *d;
  const char *param[DTX__SRV_MAX_PARAMS]; /* decoded, NUL-free */
  const char *query;                      /* after '?', or "" */
  json_t *body;                           /* object, or NULL without a body */
  dtx__srv_resp_t *resp;
  int rc; /* the library error the answer came from (metrics), or 0 */
  int64_t budget_ms;   /* the request's time left (dtx__srv_req_t); 0: none */
  int64_t deadline_us; /* when that time runs out (CLOCK_MONOTONIC); 0: none */
} dtx__srv_ctx_t;

typedef void (*dtx__srv_handler_fn)(dtx__srv_ctx_t *c);

/* One field a route's body may carry.  The type is checked before the
 * handler runs; a field not listed is refused by name. */
typedef enum {
  F_OBJ = 1,
  F_ARR,
  F_STR,
  F_INT,
  F_BOOL,
  F_INT_OR_STR,
  F_ANY /* any JSON value (a job's payload or result) */
} dtx__srv_ftype_t;
typedef struct dtx__srv_field {
  const char *name;
  dtx__srv_ftype_t type;
} dtx__srv_field_t;

typedef struct dtx__srv_route {
  const char *method;
  const char *pattern; /* "/v1/c/{coll}/find" */
  unsigned scope;
  dtx__srv_handler_fn fn;
  const dtx__srv_field_t *fields; /* NULL-name terminated; NULL: no body */
  const char *query;              /* allowed query keys, "state,after,limit" */
} dtx__srv_route_t;

extern const dtx__srv_route_t dtx__srv_routes[];
extern const size_t dtx__srv_nroutes;

/* Handlers, by area. */
void dtx__srv_h_find(dtx__srv_ctx_t *c);
void dtx__srv_h_count(dtx__srv_ctx_t *c);
void dtx__srv_h_insert(dtx__srv_ctx_t *c);
void dtx__srv_h_update(dtx__srv_ctx_t *c);
void dtx__srv_h_fam(dtx__srv_ctx_t *c);
void dtx__srv_h_delete(dtx__srv_ctx_t *c);
void dtx__srv_h_bulk(dtx__srv_ctx_t *c);
void dtx__srv_h_aggregate(dtx__srv_ctx_t *c);
void dtx__srv_h_indexes(dtx__srv_ctx_t *c);
void dtx__srv_h_index_create(dtx__srv_ctx_t *c);
void dtx__srv_h_account_create(dtx__srv_ctx_t *c);
void dtx__srv_h_account_get(dtx__srv_ctx_t *c);
void dtx__srv_h_account_list(dtx__srv_ctx_t *c);
void dtx__srv_h_transfer(dtx__srv_ctx_t *c);
void dtx__srv_h_transfer_batch(dtx__srv_ctx_t *c);
void dtx__srv_h_transfer_get(dtx__srv_ctx_t *c);
void dtx__srv_h_transfer_list(dtx__srv_ctx_t *c);
void dtx__srv_h_transfer_cancel(dtx__srv_ctx_t *c);
void dtx__srv_h_audit(dtx__srv_ctx_t *c);
void dtx__srv_h_recover(dtx__srv_ctx_t *c);
void dtx__srv_h_job_add(dtx__srv_ctx_t *c);
void dtx__srv_h_job_claim(dtx__srv_ctx_t *c);
void dtx__srv_h_job_stats(dtx__srv_ctx_t *c);
void dtx__srv_h_job_list(dtx__srv_ctx_t *c);
void dtx__srv_h_job_get(dtx__srv_ctx_t *c);
void dtx__srv_h_job_heartbeat(dtx__srv_ctx_t *c);
void dtx__srv_h_job_complete(dtx__srv_ctx_t *c);
void dtx__srv_h_job_fail(dtx__srv_ctx_t *c);
void dtx__srv_h_job_retry(dtx__srv_ctx_t *c);
void dtx__srv_h_job_cancel(dtx__srv_ctx_t *c);
/* job events (routes_job_events.c) */
void dtx__srv_h_job_events(dtx__srv_ctx_t *c);
void dtx__srv_h_job_effect(dtx__srv_ctx_t *c);
/* job schedules (routes_job_sched.c) */
void dtx__srv_h_job_schedule(dtx__srv_ctx_t *c);
void dtx__srv_h_job_schedules(dtx__srv_ctx_t *c);
void dtx__srv_h_job_unschedule(dtx__srv_ctx_t *c);
/* a queue's pause (routes_job.c) */
void dtx__srv_h_job_queues(dtx__srv_ctx_t *c);
void dtx__srv_h_job_pause(dtx__srv_ctx_t *c);
void dtx__srv_h_job_resume(dtx__srv_ctx_t *c);
void dtx__srv_h_job_queue_set(dtx__srv_ctx_t *c);
void dtx__srv_h_job_progress(dtx__srv_ctx_t *c);
void dtx__srv_h_healthz(dtx__srv_ctx_t *c);
void dtx__srv_h_readyz(dtx__srv_ctx_t *c);
void dtx__srv_h_metrics(dtx__srv_ctx_t *c);
/* The admin page, its statistics and the OpenAPI description
 * (routes_admin.c, openapi.c; docs/admin.md). */
void dtx__srv_h_admin_page(dtx__srv_ctx_t *c);
void dtx__srv_h_admin_js(dtx__srv_ctx_t *c);
void dtx__srv_h_admin_css(dtx__srv_ctx_t *c);
void dtx__srv_h_admin_stats(dtx__srv_ctx_t *c);
void dtx__srv_h_openapi(dtx__srv_ctx_t *c);
/* The OpenAPI 3.1 document of the route table (new reference). */
json_t *dtx__srv_openapi(void);
/* The queues that hold jobs, sorted, at most DTX__SRV_MAX_QUEUES of them,
 * into q (room for DTX__SRV_MAX_QUEUES + 1 names): their number, or -1 on
 * a store error (metrics.c; /metrics and /v1/admin/stats). */
int dtx__srv_job_queues(dtx_store_t *st, char q[][129]);
/* Counts a finished request in the ring (route: its index, or
 * dtx__srv_nroutes when none matched). */
void dtx__srv_ring_observe(dtx__srv_t *d, size_t route, int status);
/* The admin page's files (src/server/admin/), compiled in by CMake
 * (cmake/embed.cmake writes them into the build's admin_assets.c). */
typedef struct dtx__srv_asset {
  const char *name; /* "app.js" */
  const unsigned char *data;
  size_t len;
} dtx__srv_asset_t;
extern const dtx__srv_asset_t dtx__srv_assets[];
extern const size_t dtx__srv_nassets;

/* locks, ledger, sync, orders, versions (routes_lock.c, routes_ledger.c,
 * routes_more.c) */
void dtx__srv_h_lock_acquire(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_campaign(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_leader(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_renew(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_release(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_get(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_list(dtx__srv_ctx_t *c);
void dtx__srv_h_lock_force_release(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_account_create(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_account_limit(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_account_close(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_balance(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_statement(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_post(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_batch(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_post_pending(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_void(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_reverse(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_get(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_list(dtx__srv_ctx_t *c);
void dtx__srv_h_ledger_unique_refs(dtx__srv_ctx_t *c);
void dtx__srv_h_sync_rule(dtx__srv_ctx_t *c);
void dtx__srv_h_sync_update(dtx__srv_ctx_t *c);
void dtx__srv_h_sync_show(dtx__srv_ctx_t *c);
void dtx__srv_h_sync_repair(dtx__srv_ctx_t *c);
void dtx__srv_h_order_create(dtx__srv_ctx_t *c);
void dtx__srv_h_order_confirm(dtx__srv_ctx_t *c);
void dtx__srv_h_order_confirm_many(dtx__srv_ctx_t *c);
void dtx__srv_h_order_cancel(dtx__srv_ctx_t *c);
void dtx__srv_h_order_get(dtx__srv_ctx_t *c);
void dtx__srv_h_order_list(dtx__srv_ctx_t *c);
void dtx__srv_h_version_put(dtx__srv_ctx_t *c);
void dtx__srv_h_version_get(dtx__srv_ctx_t *c);
void dtx__srv_h_version_history(dtx__srv_ctx_t *c);
void dtx__srv_h_version_gc(dtx__srv_ctx_t *c);
/* multi-document transactions (routes_multi.c) */
void dtx__srv_h_txn(dtx__srv_ctx_t *c);
void dtx__srv_h_txn_outcome(dtx__srv_ctx_t *c);

/* Query and answer helpers of the list routes (page.c).  An int64 query
 * parameter key (dflt when absent): 0, or a 400 answered. */
int dtx__srv_qint(dtx__srv_ctx_t *c, const char *key, int64_t dflt,
                  int64_t *out);
/* ?limit= (1..DTX__SRV_MAX_PAGE, default DTX__SRV_DEFAULT_PAGE) and the
 * cursor after (the caller's ?after= or NULL) of what: *skip, *lim.  0, or
 * an error answered. */
int dtx__srv_qpage(dtx__srv_ctx_t *c, const char *after, const char *what,
                   int64_t *skip, int64_t *lim);
/* A list route's query: its filter ?KEY= (key NULL: none), decoded into
 * buf, at most cap - 1 bytes, and its page ?after=&limit=, the cursor
 * bound to what = PREFIX (with a key: PREFIX KEY=FILTER).  page reads one
 * item more than the page shows. */
typedef struct dtx__srv_list {
  const char *filter; /* ?KEY='s value, NULL when absent */
  char buf[160];
  char what[512];
  char after[160]; /* a keyset cursor's entry id: page.after */
  dtx_page_t page;
} dtx__srv_list_t;
/* Fills l from the query: 0, or an error answered. */
int dtx__srv_list_page(dtx__srv_ctx_t *c, dtx__srv_list_t *l,
                       const char *prefix, const char *key, size_t cap);
/* Answers {key: items (stolen), "next": cursor|null} of a list read with
 * l->page, or rc's problem. */
void dtx__srv_list_answer(dtx__srv_ctx_t *c, const dtx__srv_list_t *l,
                          const char *key, int rc, json_t *items);
/* 200 with *doc (stolen, read after rc's call; NULL: {}), or the problem
 * of rc, with *doc under the member `as` when both are given. */
void dtx__srv_one(dtx__srv_ctx_t *c, int rc, json_t **doc, const char *as);

/* ---- answers (dispatch.c) --------------------------------------------------
 */

/* 200 (or status) with v as JSON; steals v. */
void dtx__srv_json(dtx__srv_ctx_t *c, int status, json_t *v);
/* The problem of a library error rc, with dtx_errdetail() as detail; extra
 * (may be NULL, stolen) adds members. */
void dtx__srv_fail(dtx__srv_ctx_t *c, int rc, json_t *extra);
/* The problem of an error the server found (bad field, cursor ...). */
void dtx__srv_bad(dtx__srv_ctx_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The deadline_ms a library call gets: asked (a body's deadline_ms, 0:
 * none) capped by what is left of the request's time, so no call outlives
 * --request-timeout-ms (docs/server.md, "Operations"). */
int64_t dtx__srv_budget(dtx__srv_ctx_t *c, int64_t asked);
/* The HTTP status of a DTX_E* code (the one table). */
int dtx__srv_status_of(int rc);
/* The problem object of rc with detail (new reference). */
json_t *dtx__srv_problem_json(int rc, const char *detail);

/* ---- body and query helpers (body.c) --------------------------------------
 */

/* Parses body bytes: an object, no NUL, no duplicate keys, nesting at
 * most DTX__SRV_MAX_DEPTH, fields only from `fields`, each of its type.  An
 * empty body is {}.  0 with *out set, or an error answered in c. */
int dtx__srv_body_parse(dtx__srv_ctx_t *c, const char *body, size_t len,
                        const dtx__srv_field_t *fields, json_t **out);
/* A field of the body, or NULL when absent. */
json_t *dtx__srv_arg(dtx__srv_ctx_t *c, const char *name);
int64_t dtx__srv_arg_int(dtx__srv_ctx_t *c, const char *name, int64_t dflt);
int dtx__srv_arg_bool(dtx__srv_ctx_t *c, const char *name);
const char *dtx__srv_arg_str(dtx__srv_ctx_t *c, const char *name);
/* The fence of a write: "NAME:TOKEN" as the CLI's --fence; 0 (none or
 * set), or an error answered. */
int dtx__srv_arg_fence(dtx__srv_ctx_t *c, const char **name, int64_t *token);
/* Query parameter key (decoded into buf), or NULL when absent; an
 * undecodable one answers 400 and sets *bad. */
const char *dtx__srv_query(dtx__srv_ctx_t *c, const char *key, char *buf,
                           size_t buflen, int *bad);
/* Paging: limit (1..DTX__SRV_MAX_PAGE, default DTX__SRV_DEFAULT_PAGE) and the
 * cursor "after" (opaque; binds the skip to a digest of what it pages,
 * `what`).  0, or an error answered. */
int dtx__srv_page(dtx__srv_ctx_t *c, json_t *limit, const char *after,
                  const char *what, int64_t *skip, int64_t *lim);
/* An item of a batch (where: "NAME[i]: "): an object, else 400 "WHERE
 * SHAPE"; with keys from keys (NULL-terminated) only, else 400 naming the
 * key and the list.  0, or an error answered. */
int dtx__srv_item_check(dtx__srv_ctx_t *c, json_t *v, const char *where,
                        const char *shape, const char *const *keys);
/* FNV-1a of s: the digest a cursor carries of what it pages. */
uint64_t dtx__srv_fnv(const char *s);
/* The cursor of the page after skip (new string reference). */
json_t *dtx__srv_cursor(const char *what, int64_t skip);
/* The list routes' keyset cursor: resume after the entry id (NULL when
 * out of memory). */
json_t *dtx__srv_cursor_after(const char *what, const char *id);
/* Reads cursor cur of what: 0 with *skip (a skip cursor) or, when key is
 * given, key (a keyset cursor; "" for a skip one), else -1. */
int dtx__srv_cursor_parse(const char *what, const char *cur, int64_t *skip,
                          char *key, size_t keycap);
/* 1 when s[0..n) is valid UTF-8 (no overlong form, surrogate or code
 * point past U+10FFFF). */
int dtx__srv_utf8_ok(const char *s, size_t n);
/* Copies s into out (cap bytes, NUL-terminated) as valid UTF-8: an invalid
 * byte becomes '?', a character cut at the end is dropped -- so a problem
 * detail that quotes input always packs into JSON. */
void dtx__srv_utf8_fix(const char *s, char *out, size_t cap);
/* Percent-decodes s[0..n) into out (outlen bytes, NUL-terminated); -1 for
 * a bad escape, a NUL byte or a result that does not fit. */
int dtx__srv_pct_decode(const char *s, size_t n, char *out, size_t outlen);

/* ---- metrics (metrics.c) --------------------------------------------------
 */

/* Counts n job events (added, claimed, completed, failed, retried,
 * canceled) this process served for queue: doctxd_jobs_total.  Queue
 * names are the user's own; past DTX__SRV_MAX_QUEUES of them the rest
 * count under queue="_other", so the series stay bounded. */
#define DTX__SRV_MAX_QUEUES 64
void dtx__srv_metrics_job(const char *queue, const char *event, uint64_t n);

void dtx__srv_metrics_observe(dtx__srv_t *d, int route, const char *method,
                              int status, int64_t us, int rc);
char *dtx__srv_metrics_text(dtx__srv_t *d, size_t *len);
/* Counts what a recovery ran (summary: dtx_recover's) for
 * doctxd_recovery_actions_total. */
void dtx__srv_metrics_recovered(dtx__srv_t *d, const json_t *summary);

#endif
