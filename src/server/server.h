/* server.h -- doctxd's pieces, shared by its files (docs/server.md).
 *
 * doctxd is a second front door beside the CLI: it calls only doctx.h, as
 * src/cli does.  A request goes through one pure function,
 * dtxd_dispatch(), which the libmicrohttpd glue (main.c), the contract
 * tests and the fuzz target (tests/fuzz/fuzz_route.c) all drive:
 *   (method, target, Authorization, body) -> (status, type, body, headers)
 * It finds the route in ONE table (routes.c), decodes and checks the path
 * parameters, checks the token's scope and its rate, parses and checks the
 * body, and calls the route's handler, which calls the library the way the
 * CLI's command does.  Errors become application/problem+json through ONE
 * table (dispatch.c).  Nothing here keeps state about the store's data:
 * several doctxd may serve one store. */
#ifndef DTXD_SERVER_H
#define DTXD_SERVER_H

#include "doctx.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define DTXD_MAX_BODY (1024 * 1024) /* bytes; past it 413 */
#define DTXD_MAX_DEPTH 64           /* JSON nesting of a request body */
#define DTXD_MAX_PARAM 256          /* bytes of a decoded path parameter */
#define DTXD_MAX_PAGE 1000          /* a list's or find's limit, at most */
#define DTXD_DEFAULT_PAGE 100
#define DTXD_MAX_BATCH 1000         /* items of a batch endpoint */
#define DTXD_MAX_TOKENS 256

/* Scopes: read < write < admin; metrics stands apart (admin has it). */
enum {
  DTXD_SCOPE_NONE = 0, /* no token needed: /healthz, /readyz */
  DTXD_SCOPE_READ = 1,
  DTXD_SCOPE_WRITE = 2,
  DTXD_SCOPE_ADMIN = 4,
  DTXD_SCOPE_METRICS = 8,
};

/* One bearer token of the --tokens file, with its rate bucket. */
typedef struct dtxd_token {
  char name[64];
  char *secret;
  size_t len;
  unsigned scopes; /* DTXD_SCOPE_* bits as granted (admin implies all) */
  pthread_mutex_t mu;
  double tokens;   /* the bucket's fill */
  int64_t last_us; /* when it was last refilled */
} dtxd_token_t;

typedef struct dtxd_tokens {
  dtxd_token_t *v;
  size_t n;
  double rate;  /* requests per second per token; 0: no limit */
  double burst; /* the bucket's size */
} dtxd_tokens_t;

/* Loads path (lines "NAME TOKEN SCOPES", scopes comma-separated from
 * read,write,admin,metrics; '#' starts a comment).  Refuses a file that
 * group or others may read or write, a token shorter than 16 characters,
 * a duplicate name or token, an unknown scope.  0, or -1 with a message
 * in err (errlen bytes). */
int dtxd_tokens_load(const char *path, dtxd_tokens_t *t, char *err,
                     size_t errlen);
void dtxd_tokens_free(dtxd_tokens_t *t);
/* The token the Authorization header value names ("Bearer X"), compared
 * in constant time against every token; NULL when none. */
dtxd_token_t *dtxd_tokens_find(dtxd_tokens_t *t, const char *auth);
/* Takes one request from tok's bucket: 0, or the seconds until one is
 * there (for Retry-After). */
int dtxd_tokens_take(dtxd_tokens_t *t, dtxd_token_t *tok);

/* ---- metrics (metrics.c) -------------------------------------------------- */

#define DTXD_NBUCKETS 14 /* 0.5 ms .. 5 s, then +Inf */
#define DTXD_NCODES 16   /* distinct status codes kept per route */
#define DTXD_NMETHODS 8

typedef struct dtxd_route_stats {
  _Atomic uint64_t by_code[DTXD_NMETHODS][DTXD_NCODES];
  _Atomic uint64_t bucket[DTXD_NBUCKETS];
  _Atomic uint64_t sum_us;
  _Atomic uint64_t count;
} dtxd_route_stats_t;

/* ---- the server ----------------------------------------------------------- */

typedef struct dtxd {
  dtx_store_t *st;
  dtxd_tokens_t tokens;
  atomic_int draining;  /* SIGTERM seen: readyz and new requests 503 */
  atomic_int inflight;  /* requests being answered now (counted by the
                           HTTP glue, from their headers to the response
                           sent, body upload included) */
  int64_t start_s;      /* process start, Unix seconds */
  dtxd_route_stats_t *stats; /* one per route, plus the unmatched one */
  _Atomic uint64_t store_errors[32]; /* by -DTX_E* */
} dtxd_t;

typedef struct dtxd_req {
  const char *method;
  const char *target; /* path[?query], still percent-encoded */
  const char *auth;   /* the Authorization header, or NULL */
  const char *body;   /* body bytes (need not be NUL-terminated) */
  size_t body_len;
} dtxd_req_t;

typedef struct dtxd_resp {
  int status;
  const char *ctype; /* static */
  char *body;        /* malloc'd; dtxd_resp_free */
  size_t body_len;
  char allow[64];    /* Allow header (405), or "" */
  int retry_after;   /* seconds, 0: none */
} dtxd_resp_t;

/* Answers req into *resp (always set; free it with dtxd_resp_free). */
void dtxd_dispatch(dtxd_t *d, const dtxd_req_t *req, dtxd_resp_t *resp);
void dtxd_resp_free(dtxd_resp_t *resp);
/* Allocates the route statistics of d (0, or -1 out of memory). */
int dtxd_init(dtxd_t *d);
void dtxd_fini(dtxd_t *d);

/* A finished request's answer to the fixed "draining" or "too large"
 * case the glue answers itself (413 early, 503 while draining). */
void dtxd_problem(dtxd_resp_t *resp, int status, const char *code,
                  const char *title, const char *detail);

/* ---- routes (routes.c, routes_doc.c, routes_txn.c) ------------------------ */

#define DTXD_MAX_PARAMS 2

/* What a handler gets: the decoded path params, the raw query, the body
 * (parsed and checked against the route's fields), and the response to
 * fill. */
typedef struct dtxd_ctx {
  dtxd_t *d;
  const char *param[DTXD_MAX_PARAMS]; /* decoded, NUL-free */
  const char *query;                  /* after '?', or "" */
  json_t *body;                       /* object, or NULL without a body */
  dtxd_resp_t *resp;
  int rc; /* the library error the answer came from (metrics), or 0 */
} dtxd_ctx_t;

typedef void (*dtxd_handler_fn)(dtxd_ctx_t *c);

/* One field a route's body may carry.  The type is checked before the
 * handler runs; a field not listed is refused by name. */
typedef enum {
  F_OBJ = 1, F_ARR, F_STR, F_INT, F_BOOL, F_INT_OR_STR
} dtxd_ftype_t;
typedef struct dtxd_field {
  const char *name;
  dtxd_ftype_t type;
} dtxd_field_t;

typedef struct dtxd_route {
  const char *method;
  const char *pattern; /* "/v1/c/{coll}/find" */
  unsigned scope;
  dtxd_handler_fn fn;
  const dtxd_field_t *fields; /* NULL-name terminated; NULL: no body */
  const char *query;          /* allowed query keys, "state,after,limit" */
} dtxd_route_t;

extern const dtxd_route_t dtxd_routes[];
extern const size_t dtxd_nroutes;

/* Handlers, by area. */
void dtxd_h_find(dtxd_ctx_t *c);
void dtxd_h_count(dtxd_ctx_t *c);
void dtxd_h_insert(dtxd_ctx_t *c);
void dtxd_h_update(dtxd_ctx_t *c);
void dtxd_h_fam(dtxd_ctx_t *c);
void dtxd_h_delete(dtxd_ctx_t *c);
void dtxd_h_bulk(dtxd_ctx_t *c);
void dtxd_h_aggregate(dtxd_ctx_t *c);
void dtxd_h_indexes(dtxd_ctx_t *c);
void dtxd_h_index_create(dtxd_ctx_t *c);
void dtxd_h_account_create(dtxd_ctx_t *c);
void dtxd_h_account_get(dtxd_ctx_t *c);
void dtxd_h_account_list(dtxd_ctx_t *c);
void dtxd_h_transfer(dtxd_ctx_t *c);
void dtxd_h_transfer_batch(dtxd_ctx_t *c);
void dtxd_h_transfer_get(dtxd_ctx_t *c);
void dtxd_h_transfer_list(dtxd_ctx_t *c);
void dtxd_h_transfer_cancel(dtxd_ctx_t *c);
void dtxd_h_audit(dtxd_ctx_t *c);
void dtxd_h_recover(dtxd_ctx_t *c);
void dtxd_h_healthz(dtxd_ctx_t *c);
void dtxd_h_readyz(dtxd_ctx_t *c);
void dtxd_h_metrics(dtxd_ctx_t *c);

/* ---- answers (dispatch.c) -------------------------------------------------- */

/* 200 (or status) with v as JSON; steals v. */
void dtxd_json(dtxd_ctx_t *c, int status, json_t *v);
/* The problem of a library error rc, with dtx_errdetail() as detail; extra
 * (may be NULL, stolen) adds members. */
void dtxd_fail(dtxd_ctx_t *c, int rc, json_t *extra);
/* The problem of an error the server found (bad field, cursor ...). */
void dtxd_bad(dtxd_ctx_t *c, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The HTTP status of a DTX_E* code (the one table). */
int dtxd_status_of(int rc);
/* The problem object of rc with detail (new reference). */
json_t *dtxd_problem_json(int rc, const char *detail);

/* ---- body and query helpers (body.c) -------------------------------------- */

/* Parses body bytes: an object, no NUL, no duplicate keys, nesting at
 * most DTXD_MAX_DEPTH, fields only from `fields`, each of its type.  An
 * empty body is {}.  0 with *out set, or an error answered in c. */
int dtxd_body_parse(dtxd_ctx_t *c, const char *body, size_t len,
                    const dtxd_field_t *fields, json_t **out);
/* A field of the body, or NULL when absent. */
json_t *dtxd_arg(dtxd_ctx_t *c, const char *name);
int64_t dtxd_arg_int(dtxd_ctx_t *c, const char *name, int64_t dflt);
int dtxd_arg_bool(dtxd_ctx_t *c, const char *name);
const char *dtxd_arg_str(dtxd_ctx_t *c, const char *name);
/* The fence of a write: "NAME:TOKEN" as the CLI's --fence; 0 (none or
 * set), or an error answered. */
int dtxd_arg_fence(dtxd_ctx_t *c, const char **name, int64_t *token);
/* Query parameter key (decoded into buf), or NULL when absent; an
 * undecodable one answers 400 and sets *bad. */
const char *dtxd_query(dtxd_ctx_t *c, const char *key, char *buf,
                       size_t buflen, int *bad);
/* Paging: limit (1..DTXD_MAX_PAGE, default DTXD_DEFAULT_PAGE) and the
 * cursor "after" (opaque; binds the skip to a digest of what it pages,
 * `what`).  0, or an error answered. */
int dtxd_page(dtxd_ctx_t *c, json_t *limit, const char *after,
              const char *what, int64_t *skip, int64_t *lim);
/* The cursor of the page after skip (new string reference). */
json_t *dtxd_cursor(const char *what, int64_t skip);
/* Percent-decodes s[0..n) into out (outlen bytes, NUL-terminated); -1 for
 * a bad escape, a NUL byte or a result that does not fit. */
int dtxd_pct_decode(const char *s, size_t n, char *out, size_t outlen);

/* ---- metrics (metrics.c) -------------------------------------------------- */

void dtxd_metrics_observe(dtxd_t *d, int route, const char *method,
                          int status, int64_t us, int rc);
char *dtxd_metrics_text(dtxd_t *d, size_t *len);

#endif
