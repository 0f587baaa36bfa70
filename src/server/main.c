/* main.c -- doctxd: options, the libmicrohttpd glue and the drain.
 *
 *   doctxd [--store URI] [--listen 127.0.0.1:8420] --tokens FILE [...]
 *
 * Every option is checked, and the token file read and judged, before the
 * store is opened or a socket bound; a bad one exits 2 with a message.
 * libmicrohttpd's I/O threads (epoll) gather each request's raw target and
 * body here; a pool of --threads workers hands it to the pure
 * dtx__srv_dispatch() (dispatch.c) while the connection is suspended, so a
 * slow store call holds a worker, never another connection; its answer
 * goes back with the security headers every response carries.  A request
 * has --request-timeout-ms in all (its library call gets what is left as
 * its deadline; past it 503).  --metrics-listen serves /metrics on an
 * address of its own.  SIGTERM or SIGINT drains: /readyz and new requests
 * answer 503 while the requests already running finish (at most
 * --drain-ms); then the daemon stops, the store closes and doctxd exits 0
 * (1 when requests were still running at the deadline: they are left for
 * `doctx recover`, as an interrupted CLI command's are).  docs/server.md. */
#include "server/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define MAX_DRAIN_MS 3600000           /* an hour: a longer drain is a typo */
#define MAX_REQUEST_TIMEOUT_MS 3600000 /* an hour; INT64_MAX is refused */

typedef struct opts {
  const char *store, *listen, *tokens, *metrics_listen;
  long threads, max_conns, per_ip, timeout_s, drain_ms, request_timeout_ms;
  double rate, burst;
} opts_t;

static const char usage[] =
    "usage: doctxd [--store URI] [--listen HOST:PORT] --tokens FILE\n"
    "              [--threads N] [--rate N[/s]] [--burst N] [--max-conns N]\n"
    "              [--per-ip N] [--timeout-s N] [--drain-ms N]\n"
    "              [--request-timeout-ms N] [--metrics-listen HOST:PORT]\n"
    "Serves doctx over HTTP/JSON (docs/server.md).\n"
    "  --store URI     the store (default $DOCTX_STORE or sqlite:./doctx.db)\n"
    "  --listen H:P    IPv4 address and port (default 127.0.0.1:8420)\n"
    "  --tokens FILE   bearer tokens, lines NAME TOKEN SCOPES, mode 0600\n"
    "  --threads N     workers that run requests, 1..256 (default 16)\n"
    "  --rate N        requests per second per token, 0 = no limit (100)\n"
    "  --burst N       a token's bucket size, >= 1 (default 2 x rate)\n"
    "  --max-conns N   open connections at most, 1..65536 (default 512)\n"
    "  --per-ip N      connections per client address (default 128)\n"
    "  --timeout-s N   idle connection timeout, 1..3600 s (default 30)\n"
    "  --drain-ms N    how long SIGTERM waits for running requests,\n"
    "                  0..3600000 (default 10000)\n"
    "  --request-timeout-ms N\n"
    "                  a request's time, queue and store included; past it\n"
    "                  503 (1..3600000, default 30000)\n"
    "  --metrics-listen H:P\n"
    "                  serve GET /metrics there, without a token, and not\n"
    "                  on --listen\n";

static int bad_opt(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "doctxd: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n%s", usage);
  return EXIT_USAGE;
}

/* A decimal integer in [lo, hi]: 0, or -1.  Overflow is refused, never
 * wrapped (a duration near INT64_MAX is a typo, not a wish). */
static int num(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (!*s || *end || errno || v < lo || v > hi)
    return -1;
  *out = (long)v;
  return 0;
}

static int parse_opts(int argc, char **argv, opts_t *o) {
  *o = (opts_t){.listen = "127.0.0.1:8420",
                .threads = 16,
                .request_timeout_ms = 30000,
                .rate = 100,
                .burst = -1,
                .max_conns = 512,
                .per_ip = 128,
                .timeout_s = 30,
                .drain_ms = 10000};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      exit(0);
    }
    if (i + 1 >= argc || strncmp(a, "--", 2) != 0)
      return bad_opt("unknown option or missing value: '%s'%s", a, "");
    const char *v = argv[++i];
    long n;
    if (strcmp(a, "--store") == 0) {
      o->store = v;
    } else if (strcmp(a, "--listen") == 0) {
      o->listen = v;
    } else if (strcmp(a, "--tokens") == 0) {
      o->tokens = v;
    } else if (strcmp(a, "--threads") == 0) {
      if (num(v, 1, 256, &o->threads))
        return bad_opt("%s must be 1..256, got '%s'", a, v);
    } else if (strcmp(a, "--rate") == 0) {
      char buf[32];
      size_t len = strlen(v);
      if (len >= 3 && strcmp(v + len - 2, "/s") == 0 && len - 2 < sizeof buf) {
        memcpy(buf, v, len - 2);
        buf[len - 2] = '\0';
      } else if (len < sizeof buf) {
        memcpy(buf, v, len + 1);
      }
      if (len >= sizeof buf || num(buf, 0, 1000000, &n))
        return bad_opt("%s must be 0..1000000 requests a second, got '%s'", a,
                       v);
      o->rate = (double)n;
    } else if (strcmp(a, "--burst") == 0) {
      if (num(v, 1, 1000000, &n))
        return bad_opt("%s must be 1..1000000, got '%s'", a, v);
      o->burst = (double)n;
    } else if (strcmp(a, "--max-conns") == 0) {
      if (num(v, 1, 65536, &o->max_conns))
        return bad_opt("%s must be 1..65536, got '%s'", a, v);
    } else if (strcmp(a, "--per-ip") == 0) {
      if (num(v, 1, 65536, &o->per_ip))
        return bad_opt("%s must be 1..65536, got '%s'", a, v);
    } else if (strcmp(a, "--timeout-s") == 0) {
      if (num(v, 1, 3600, &o->timeout_s))
        return bad_opt("%s must be 1..3600 seconds, got '%s'", a, v);
    } else if (strcmp(a, "--metrics-listen") == 0) {
      o->metrics_listen = v;
    } else if (strcmp(a, "--request-timeout-ms") == 0) {
      if (num(v, 1, MAX_REQUEST_TIMEOUT_MS, &o->request_timeout_ms))
        return bad_opt("%s must be 1..3600000 ms, got '%s'", a, v);
    } else if (strcmp(a, "--drain-ms") == 0) {
      if (num(v, 0, MAX_DRAIN_MS, &o->drain_ms))
        return bad_opt("%s must be 0..3600000 ms, got '%s'", a, v);
    } else {
      return bad_opt("unknown option '%s'%s", a, "");
    }
  }
  if (!o->tokens)
    return bad_opt("--tokens FILE is required%s%s", "", "");
  if (o->burst < 0)
    o->burst = o->rate > 0 ? 2 * o->rate : 1;
  return 0;
}

/* HOST:PORT, IPv4 only; port 0..65535 (0: the kernel picks a free one,
 * which the "listening on" line names -- the tests use it). */
static int parse_listen(const char *s, struct sockaddr_in *sa) {
  char host[64];
  const char *colon = strrchr(s, ':');
  long port;
  if (!colon || (size_t)(colon - s) >= sizeof host)
    return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = '\0';
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  if (inet_pton(AF_INET, host, &sa->sin_addr) != 1 ||
      num(colon + 1, 0, 65535, &port))
    return -1;
  sa->sin_port = htons((uint16_t)port);
  return 0;
}

/* ---- the libmicrohttpd glue -------------------------------------------------
 *
 * Two kinds of threads (docs/server.md, "Threads"):
 *  - libmicrohttpd's I/O threads (IO_THREADS, epoll) read headers and
 *    bodies and write answers for every connection; they never call the
 *    store, so a slow store call blocks no other connection;
 *  - --threads workers run the dispatcher (and so the library).  A request
 *    whose body is in is queued, and its connection suspended
 *    (MHD_suspend_connection) until a worker -- or the watchdog, at
 *    --request-timeout-ms -- has its answer and resumes it.
 * /healthz (and /metrics, pure memory) are answered on the I/O thread at
 * once: they stay fast however busy the workers are. */

#define IO_THREADS 2

typedef struct conn_req {
  struct conn_req *next;            /* the work queue */
  struct conn_req *prev_p, *next_p; /* the pending list (the watchdog's) */
  struct MHD_Connection *con;
  char *target;    /* the raw request target, as sent */
  char method[16]; /* copied: a worker may outlive MHD's request */
  char *auth;
  char *ctype; /* the Content-Type header, copied as auth is */
  char *body;
  size_t len, cap;
  int started, too_big;
  size_t dropped; /* bytes of an oversized body read and thrown away */
  int refs;     /* the connection's, and a worker's while it runs it */
  int answered; /* resp holds the answer; the connection was resumed */
  int64_t t0_us, deadline_us;
  dtx__srv_resp_t resp;
} conn_req_t;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;       /* workers: a request queued, or stop */
  pthread_cond_t wcv;      /* the watchdog: a request pending, or stop */
  conn_req_t *head, *tail; /* queued, not yet taken by a worker */
  conn_req_t *pending;     /* queued or running, not yet answered */
  int busy;                /* workers inside the dispatcher */
  int stop;
  int64_t timeout_ms;
  dtx__srv_t *d;
  int metrics_apart; /* --metrics-listen: no /metrics on the main port */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
          .cv = PTHREAD_COND_INITIALIZER,
          .wcv = PTHREAD_COND_INITIALIZER};

static int64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void req_unref_locked(conn_req_t *r) {
  if (--r->refs > 0)
    return;
  free(r->target);
  free(r->auth);
  free(r->ctype);
  free(r->body);
  dtx__srv_resp_free(&r->resp);
  free(r);
}

static void pending_del_locked(conn_req_t *r) {
  if (r->prev_p)
    r->prev_p->next_p = r->next_p;
  else if (pool.pending == r)
    pool.pending = r->next_p;
  if (r->next_p)
    r->next_p->prev_p = r->prev_p;
  r->prev_p = r->next_p = NULL;
}

/* MHD calls this with the raw URI before it decodes anything; its return
 * is the request's state. */
static void *uri_cb(void *cls, const char *uri, struct MHD_Connection *con) {
  (void)cls, (void)con;
  conn_req_t *r = calloc(1, sizeof *r);
  if (r) {
    r->refs = 1;
    r->t0_us = mono_us();
    if (!(r->target = strdup(uri ? uri : ""))) {
      free(r);
      r = NULL;
    }
  }
  return r;
}

static void completed_cb(void *cls, struct MHD_Connection *con, void **state,
                         enum MHD_RequestTerminationCode why) {
  (void)con, (void)why;
  conn_req_t *r = *state;
  if (r && r->started)
    atomic_fetch_sub(&((dtx__srv_t *)cls)->inflight, 1);
  if (r) {
    pthread_mutex_lock(&pool.mu);
    req_unref_locked(r);
    pthread_mutex_unlock(&pool.mu);
  }
  *state = NULL;
}

static enum MHD_Result answer(dtx__srv_t *d, struct MHD_Connection *con,
                              dtx__srv_resp_t *resp) {
  struct MHD_Response *mr = MHD_create_response_from_buffer(
      resp->body_len, resp->body, MHD_RESPMEM_MUST_FREE);
  if (!mr) {
    dtx__srv_resp_free(resp);
    return MHD_NO;
  }
  resp->body = NULL; /* MHD owns it now */
  char ra[16];
  MHD_add_response_header(mr, "Content-Type", resp->ctype);
  MHD_add_response_header(mr, "Cache-Control", "no-store");
  MHD_add_response_header(mr, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(
      mr, "Content-Security-Policy",
      resp->csp ? resp->csp : "default-src 'none'; frame-ancestors 'none'");
  if (resp->allow[0])
    MHD_add_response_header(mr, "Allow", resp->allow);
  /* Every 503 says when to come back: the store away, a request past its
   * time, or the drain. */
  if (resp->status == 503 && !resp->retry_after)
    resp->retry_after = 1;
  if (resp->retry_after) {
    snprintf(ra, sizeof ra, "%d", resp->retry_after);
    MHD_add_response_header(mr, "Retry-After", ra);
  }
  if (resp->status == 401)
    MHD_add_response_header(mr, "WWW-Authenticate", "Bearer");
  if (atomic_load(&d->draining) || resp->status == 413 || resp->close)
    MHD_add_response_header(mr, "Connection", "close");
  enum MHD_Result ret = MHD_queue_response(con, (unsigned)resp->status, mr);
  MHD_destroy_response(mr);
  return ret;
}

static void timed_out(dtx__srv_resp_t *resp) {
  char detail[200];
  snprintf(detail, sizeof detail,
           "the request did not finish within --request-timeout-ms (%lld "
           "ms); its outcome is unknown: retry it (a write with the same id "
           "is safe)",
           (long long)pool.timeout_ms);
  dtx__srv_problem(resp, 503, "UNAVAILABLE", "store unavailable", detail);
}

/* Gives r its answer (under pool.mu) unless it has one: resp is taken.
 * Returns the connection to resume once pool.mu is released (MHD takes its
 * own locks there), or NULL.  Only the one that answered resumes it, and a
 * suspended connection cannot go away, so the pointer stays good. */
static struct MHD_Connection *finish_locked(conn_req_t *r,
                                            dtx__srv_resp_t *resp) {
  if (r->answered) {
    dtx__srv_resp_free(resp);
    return NULL;
  }
  r->answered = 1;
  r->resp = *resp;
  memset(resp, 0, sizeof *resp);
  pending_del_locked(r);
  return r->con;
}

static void *worker_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&pool.mu);
  for (;;) {
    while (!pool.head && !pool.stop)
      pthread_cond_wait(&pool.cv, &pool.mu);
    if (!pool.head)
      break;
    conn_req_t *r = pool.head;
    pool.head = r->next;
    if (!pool.head)
      pool.tail = NULL;
    if (r->answered) { /* the watchdog answered it while it queued */
      req_unref_locked(r);
      continue;
    }
    pool.busy++;
    pthread_mutex_unlock(&pool.mu);
    dtx__srv_resp_t resp = {0};
    int64_t left = (r->deadline_us - mono_us()) / 1000;
    if (pool.timeout_ms && left <= 0) {
      timed_out(&resp);
    } else {
      dtx__srv_req_t req = {.method = r->method,
                            .target = r->target,
                            .auth = r->auth,
                            .body = r->body ? r->body : "",
                            .body_len = r->len,
                            .budget_ms = pool.timeout_ms ? left : 0,
                            .ctype = r->ctype};
      dtx__srv_dispatch(pool.d, &req, &resp);
    }
    pthread_mutex_lock(&pool.mu);
    pool.busy--;
    struct MHD_Connection *con = finish_locked(r, &resp);
    req_unref_locked(r);
    pthread_cond_broadcast(&pool.cv); /* the drain waits for busy == 0 */
    if (con) {
      pthread_mutex_unlock(&pool.mu);
      MHD_resume_connection(con);
      pthread_mutex_lock(&pool.mu);
    }
  }
  pthread_mutex_unlock(&pool.mu);
  return NULL;
}

/* Answers 503 for every request past --request-timeout-ms, queued or
 * running: the library call got the same deadline, so one still running
 * is one without a deadline of its own (a document call, bounded by the
 * store's retry window), and its late answer is dropped. */
static void *watchdog_main(void *arg) {
  (void)arg;
  struct timespec nap = {0, 20 * 1000 * 1000};
  pthread_mutex_lock(&pool.mu);
  while (!pool.stop) {
    if (!pool.pending) { /* idle: no wake-ups until a request comes */
      pthread_cond_wait(&pool.wcv, &pool.mu);
      continue;
    }
    pthread_mutex_unlock(&pool.mu);
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&pool.mu);
    int64_t now = mono_us();
    struct MHD_Connection *late[64];
    int n = 0;
    for (conn_req_t *r = pool.pending, *nx; r && n < 64; r = nx) {
      nx = r->next_p;
      if (now >= r->deadline_us) {
        dtx__srv_resp_t resp = {0};
        timed_out(&resp);
        late[n++] = finish_locked(r, &resp);
      }
    }
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < n; i++) /* the rest: on the next round */
      MHD_resume_connection(late[i]);
    pthread_mutex_lock(&pool.mu);
  }
  pthread_mutex_unlock(&pool.mu);
  return NULL;
}

/* Counts the headers that frame a body: a request with two
 * Content-Lengths, or one with Transfer-Encoding too, is one a proxy in
 * front may read another way (request smuggling, RFC 9112 6.3). */
typedef struct framing {
  int cl, te;
} framing_t;
static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind,
                                     const char *key, const char *value) {
  framing_t *f = cls;
  (void)kind, (void)value;
  if (strcasecmp(key, "Content-Length") == 0)
    f->cl++;
  else if (strcasecmp(key, "Transfer-Encoding") == 0)
    f->te++;
  return MHD_YES;
}

static int path_is(const char *target, const char *path) {
  size_t n = strlen(path);
  return strncmp(target, path, n) == 0 &&
         (target[n] == '\0' || target[n] == '?');
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *con,
                               const char *url, const char *method,
                               const char *version, const char *upload,
                               size_t *upload_size, void **state) {
  dtx__srv_t *d = cls;
  conn_req_t *r = *state;
  dtx__srv_resp_t resp = {0};
  (void)url, (void)version;
  if (!r)
    return MHD_NO; /* out of memory in uri_cb: drop the connection */
  if (r->answered) /* resumed: a worker or the watchdog answered */
    return answer(d, con, &r->resp);
  if (!r->started) {
    /* In flight from here until completed_cb, body upload included: the
     * drain waits for these. */
    r->started = 1;
    atomic_fetch_add(&d->inflight, 1);
    framing_t fr = {0, 0};
    MHD_get_connection_values(con, MHD_HEADER_KIND, count_framing, &fr);
    if (fr.cl > 1 || (fr.cl && fr.te)) {
      dtx__srv_problem(&resp, 400, "INVAL", "bad request",
                       fr.cl > 1 ? "two Content-Length headers"
                                 : "Content-Length with Transfer-Encoding");
      resp.close = 1; /* what follows on this connection is not trusted */
      return answer(d, con, &resp);
    }
    const char *cl =
        MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length");
    /* A declared length past the limit: up to DTX__SRV_DROP_MAX the body
     * is read and thrown away, and the 413 sent after it.  A client that
     * writes its whole body before reading (Node's fetch, urllib) then
     * reads the 413, where an answer sent early and the connection
     * closed under its write gives it a broken pipe instead.  Past that
     * bound the answer is early: nothing that large is read. */
    if (cl && (strlen(cl) > 9 || atol(cl) > DTX__SRV_DROP_MAX)) {
      dtx__srv_problem(&resp, 413, "TOOLARGE", "request body too large",
                       "a request body is at most 1 MiB (1048576 bytes)");
      return answer(d, con, &resp); /* early, before reading it */
    }
    if (cl && atol(cl) > DTX__SRV_MAX_BODY)
      r->too_big = 1;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->too_big || r->len + n > DTX__SRV_MAX_BODY) {
      r->too_big = 1; /* keep reading, keep nothing, up to the bound */
      r->dropped += n;
      if (r->dropped <= DTX__SRV_DROP_MAX)
        return MHD_YES;
      dtx__srv_problem(&resp, 413, "TOOLARGE", "request body too large",
                       "a request body is at most 1 MiB (1048576 bytes)");
      return answer(d, con, &resp);
    }
    if (r->len + n > r->cap) {
      size_t cap = (r->len + n) * 2;
      char *p =
          realloc(r->body, cap > DTX__SRV_MAX_BODY ? DTX__SRV_MAX_BODY : cap);
      if (!p)
        return MHD_NO;
      r->body = p;
      r->cap = cap > DTX__SRV_MAX_BODY ? DTX__SRV_MAX_BODY : cap;
    }
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    return MHD_YES;
  }
  const char *auth =
      MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
  const char *ctype =
      MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Type");
  if (r->too_big) {
    dtx__srv_problem(&resp, 413, "TOOLARGE", "request body too large",
                     "a request body is at most 1 MiB (1048576 bytes)");
    return answer(d, con, &resp);
  }
  if (pool.metrics_apart && path_is(r->target, "/metrics")) {
    dtx__srv_problem(&resp, 404, "NOROUTE", "not found",
                     "/metrics is served on --metrics-listen");
    return answer(d, con, &resp);
  }
  /* Answered here, never queued: /healthz and /metrics read memory
   * only, and while draining every answer is the drain's 503 (or
   * /healthz's 200) without the store. */
  if (path_is(r->target, "/healthz") || path_is(r->target, "/metrics") ||
      atomic_load(&d->draining)) {
    dtx__srv_req_t req = {.method = method,
                          .target = r->target,
                          .auth = auth,
                          .body = r->body ? r->body : "",
                          .body_len = r->len,
                          .ctype = ctype};
    dtx__srv_dispatch(d, &req, &resp);
    return answer(d, con, &resp);
  }
  /* To a worker.  The method and the header are copied: a request
   * answered at its timeout ends in MHD while a worker still runs it. */
  snprintf(r->method, sizeof r->method, "%s", method);
  if ((auth && !(r->auth = strdup(auth))) ||
      (ctype && !(r->ctype = strdup(ctype))))
    return MHD_NO;
  r->con = con;
  r->deadline_us =
      pool.timeout_ms ? r->t0_us + pool.timeout_ms * 1000 : INT64_MAX;
  MHD_suspend_connection(con);
  pthread_mutex_lock(&pool.mu);
  r->refs++; /* the worker's */
  r->next = NULL;
  if (pool.tail)
    pool.tail->next = r;
  else
    pool.head = r;
  pool.tail = r;
  r->next_p = pool.pending;
  if (pool.pending)
    pool.pending->prev_p = r;
  pool.pending = r;
  pthread_cond_signal(&pool.cv);
  pthread_cond_signal(&pool.wcv);
  pthread_mutex_unlock(&pool.mu);
  return MHD_YES;
}

/* The --metrics-listen daemon: GET /metrics, no token (the address is
 * the guard), nothing else. */
static enum MHD_Result metrics_handler(void *cls, struct MHD_Connection *con,
                                       const char *url, const char *method,
                                       const char *version, const char *upload,
                                       size_t *upload_size, void **state) {
  dtx__srv_t *d = cls;
  dtx__srv_resp_t resp = {0};
  (void)version, (void)upload;
  if (!*state) { /* headers only; a body is read and dropped */
    *state = (void *)1;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (strcmp(url, "/metrics") != 0) {
    dtx__srv_problem(&resp, 404, "NOROUTE", "not found",
                     "this address serves GET /metrics only");
  } else if (strcmp(method, "GET") != 0) {
    dtx__srv_problem(&resp, 405, "METHOD", "method not allowed",
                     "GET /metrics only");
    snprintf(resp.allow, sizeof resp.allow, "GET");
  } else {
    size_t len = 0;
    char *text = dtx__srv_metrics_text(d, &len);
    if (!text) {
      dtx__srv_problem(&resp, 500, "NOMEM", "out of memory", "metrics");
    } else {
      resp.status = 200;
      resp.ctype = "text/plain; version=0.0.4; charset=utf-8";
      resp.body = text;
      resp.body_len = len;
    }
  }
  return answer(d, con, &resp);
}

/* s with a store URI's password masked, as dtx_store_uri shows it:
 * "//user:***@" and "password=***" -- a start-up error goes to logs. */
static void masked(const char *s, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = s; *p && o + 4 < cap;) {
    const char *at, *colon;
    if (strncmp(p, "://", 3) == 0 && (at = strpbrk(p + 3, "@/?")) &&
        *at == '@' && (colon = memchr(p + 3, ':', (size_t)(at - p - 3)))) {
      size_t n = (size_t)(colon + 1 - p);
      if (o + n + 4 >= cap)
        break;
      memcpy(out + o, p, n);
      o += n;
      memcpy(out + o, "***", 3);
      o += 3;
      p = at;
      continue;
    }
    if (strncasecmp(p, "password=", 9) == 0 && o + 13 < cap) {
      memcpy(out + o, p, 9);
      memcpy(out + o + 9, "***", 3);
      o += 12;
      p += 9;
      while (*p && *p != '&' && *p != ' ' && *p != '\'')
        p++;
      continue;
    }
    out[o++] = *p++;
  }
  out[o] = '\0';
}

static void log_line(const char *fmt, const char *a) {
  char ts[32];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fprintf(stderr, "%s doctxd: ", ts);
  fprintf(stderr, fmt, a);
  fputc('\n', stderr);
}

int main(int argc, char **argv) {
  opts_t o;
  struct sockaddr_in sa;
  char err[512];
  int rc = parse_opts(argc, argv, &o);
  if (rc)
    return rc;
  if (parse_listen(o.listen, &sa))
    return bad_opt("--listen wants IPV4:PORT (port 0..65535), got '%s'%s",
                   o.listen, "");
  struct sockaddr_in msa;
  if (o.metrics_listen && parse_listen(o.metrics_listen, &msa))
    return bad_opt(
        "--metrics-listen wants IPV4:PORT (port 0..65535), got '%s'%s",
        o.metrics_listen, "");
  static dtx__srv_t d;
  d.tokens.rate = o.rate;
  d.tokens.burst = o.burst;
  if (dtx__srv_tokens_load(o.tokens, &d.tokens, err, sizeof err)) {
    fprintf(stderr, "doctxd: %s\n", err);
    return EXIT_USAGE;
  }
  if (dtx__srv_init(&d)) {
    fprintf(stderr, "doctxd: out of memory\n");
    return 1;
  }
  /* Signals are taken by sigwait below, not by handlers: block them
   * before any thread starts, so every thread inherits the mask. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  signal(SIGPIPE, SIG_IGN);
  if ((rc = dtx_store_open(o.store, &d.st))) {
    char uri[512], detail[1024];
    masked(o.store ? o.store : "(default)", uri, sizeof uri);
    masked(dtx_errdetail(), detail, sizeof detail);
    fprintf(stderr, "doctxd: --store %s: %s: %s\n", uri, dtx_errname(rc),
            detail);
    return 1;
  }
  pool.d = &d;
  pool.timeout_ms = o.request_timeout_ms;
  pool.metrics_apart = o.metrics_listen != NULL;
  pthread_t *workers = calloc((size_t)o.threads, sizeof *workers), wd;
  if (!workers) {
    fprintf(stderr, "doctxd: out of memory\n");
    return 1;
  }
  for (long i = 0; i < o.threads; i++)
    if (pthread_create(&workers[i], NULL, worker_main, NULL)) {
      fprintf(stderr, "doctxd: cannot start worker threads\n");
      return 1;
    }
  if (pthread_create(&wd, NULL, watchdog_main, NULL)) {
    fprintf(stderr, "doctxd: cannot start the watchdog thread\n");
    return 1;
  }
  struct MHD_Daemon *mhd = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
          MHD_ALLOW_SUSPEND_RESUME,
      0, NULL, NULL, handler, &d, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)IO_THREADS,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)o.max_conns,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o.per_ip,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o.timeout_s,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536,
      MHD_OPTION_URI_LOG_CALLBACK, uri_cb, NULL, MHD_OPTION_NOTIFY_COMPLETED,
      completed_cb, &d, MHD_OPTION_END);
  if (!mhd) {
    fprintf(stderr, "doctxd: cannot listen on %s: %s\n", o.listen,
            strerror(errno));
    dtx_store_close(d.st);
    return 1;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
  char where[96];
  snprintf(where, sizeof where, "%.*s:%u",
           (int)(strrchr(o.listen, ':') - o.listen), o.listen,
           info ? (unsigned)info->port : 0u);
  struct MHD_Daemon *mmhd = NULL;
  if (o.metrics_listen) {
    mmhd = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL,
        metrics_handler, &d, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&msa,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)16,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o.timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384, MHD_OPTION_END);
    if (!mmhd) {
      fprintf(stderr, "doctxd: cannot listen on %s: %s\n", o.metrics_listen,
              strerror(errno));
      _exit(1); /* the workers hold the store: do not close it under them */
    }
    const union MHD_DaemonInfo *mi =
        MHD_get_daemon_info(mmhd, MHD_DAEMON_INFO_BIND_PORT);
    char mwhere[96];
    snprintf(mwhere, sizeof mwhere, "%.*s:%u",
             (int)(strrchr(o.metrics_listen, ':') - o.metrics_listen),
             o.metrics_listen, mi ? (unsigned)mi->port : 0u);
    log_line("metrics on %s", mwhere);
  }
  log_line("listening on %s", where);
  int sig = 0;
  while (sigwait(&sigs, &sig) != 0)
    ;
  atomic_store(&d.draining, 1);
  log_line("%s: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  struct timespec t0, now, nap = {0, 5 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms =
        (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
    pthread_mutex_lock(&pool.mu);
    /* A request answered 503 at its timeout may still be in the library
     * (busy): the store must not close under it. */
    int busy = pool.busy, idle = busy == 0 && !pool.head;
    pthread_mutex_unlock(&pool.mu);
    if (atomic_load(&d.inflight) == 0 && idle)
      break;
    if (ms >= o.drain_ms) {
      /* A request still in the library cannot be stopped safely, and the
       * store must not close under it: exit, leaving its work to
       * `doctx recover`. */
      char n[96];
      snprintf(n, sizeof n, "%d", atomic_load(&d.inflight));
      snprintf(n + strlen(n), sizeof n - strlen(n),
               " requests still running after --drain-ms (%d workers in "
               "the library)",
               busy);
      log_line("%s; exiting", n);
      fflush(stderr);
      _exit(1);
    }
    nanosleep(&nap, NULL);
  }
  MHD_stop_daemon(mhd);
  if (mmhd)
    MHD_stop_daemon(mmhd);
  pthread_mutex_lock(&pool.mu);
  pool.stop = 1;
  pthread_cond_broadcast(&pool.cv);
  pthread_cond_broadcast(&pool.wcv);
  pthread_mutex_unlock(&pool.mu);
  for (long i = 0; i < o.threads; i++)
    pthread_join(workers[i], NULL);
  pthread_join(wd, NULL);
  free(workers);
  dtx_store_close(d.st);
  dtx__srv_tokens_free(&d.tokens);
  dtx__srv_fini(&d);
  log_line("drained; stopped%s", "");
  return 0;
}
