/* main.c -- doctxd: options, the libmicrohttpd glue and the drain.
 *
 *   doctxd [--store URI] [--listen 127.0.0.1:8420] --tokens FILE [...]
 *
 * Every option is checked, and the token file read and judged, before the
 * store is opened or a socket bound; a bad one exits 2 with a message.
 * libmicrohttpd runs a thread pool (epoll); each request's raw target and
 * body are gathered here and handed to the pure dtx__srv_dispatch()
 * (dispatch.c), whose answer goes back with the security headers every
 * response carries.  SIGTERM or SIGINT drains: /readyz and new requests
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
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define MAX_DRAIN_MS 3600000 /* an hour: a longer drain is a typo */

typedef struct opts {
  const char *store, *listen, *tokens;
  long threads, max_conns, per_ip, timeout_s, drain_ms;
  double rate, burst;
} opts_t;

static const char usage[] =
    "usage: doctxd [--store URI] [--listen HOST:PORT] --tokens FILE\n"
    "              [--threads N] [--rate N[/s]] [--burst N] [--max-conns N]\n"
    "              [--per-ip N] [--timeout-s N] [--drain-ms N]\n"
    "Serves doctx over HTTP/JSON (docs/server.md).\n"
    "  --store URI     the store (default $DOCTX_STORE or sqlite:./doctx.db)\n"
    "  --listen H:P    IPv4 address and port (default 127.0.0.1:8420)\n"
    "  --tokens FILE   bearer tokens, lines NAME TOKEN SCOPES, mode 0600\n"
    "  --threads N     request threads, 1..256 (default 4)\n"
    "  --rate N        requests per second per token, 0 = no limit (100)\n"
    "  --burst N       a token's bucket size, >= 1 (default 2 x rate)\n"
    "  --max-conns N   open connections at most, 1..65536 (default 512)\n"
    "  --per-ip N      connections per client address (default 128)\n"
    "  --timeout-s N   idle connection timeout, 1..3600 s (default 30)\n"
    "  --drain-ms N    how long SIGTERM waits for running requests,\n"
    "                  0..3600000 (default 10000)\n";

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
                .threads = 4,
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
 */

typedef struct conn_req {
  char *target; /* the raw request target, as sent */
  char *body;
  size_t len, cap;
  int started, too_big;
} conn_req_t;

/* MHD calls this with the raw URI before it decodes anything; its return
 * is the request's state. */
static void *uri_cb(void *cls, const char *uri, struct MHD_Connection *con) {
  (void)cls, (void)con;
  conn_req_t *r = calloc(1, sizeof *r);
  if (r)
    r->target = strdup(uri ? uri : "");
  return r;
}

static void completed_cb(void *cls, struct MHD_Connection *con, void **state,
                         enum MHD_RequestTerminationCode why) {
  (void)con, (void)why;
  conn_req_t *r = *state;
  if (r && r->started)
    atomic_fetch_sub(&((dtx__srv_t *)cls)->inflight, 1);
  if (r) {
    free(r->target);
    free(r->body);
    free(r);
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
  if (resp->retry_after) {
    snprintf(ra, sizeof ra, "%d", resp->retry_after);
    MHD_add_response_header(mr, "Retry-After", ra);
  }
  if (resp->status == 401)
    MHD_add_response_header(mr, "WWW-Authenticate", "Bearer");
  if (atomic_load(&d->draining) || resp->status == 413)
    MHD_add_response_header(mr, "Connection", "close");
  enum MHD_Result ret = MHD_queue_response(con, (unsigned)resp->status, mr);
  MHD_destroy_response(mr);
  return ret;
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
  if (!r->started) {
    /* In flight from here until completed_cb, body upload included: the
     * drain waits for these. */
    r->started = 1;
    atomic_fetch_add(&d->inflight, 1);
    const char *cl =
        MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length");
    if (cl && (strlen(cl) > 9 || atol(cl) > DTX__SRV_MAX_BODY)) {
      dtx__srv_problem(&resp, 413, "TOOLARGE", "request body too large",
                       "a request body is at most 1 MiB (1048576 bytes)");
      return answer(d, con, &resp); /* early, before reading it */
    }
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->too_big || r->len + n > DTX__SRV_MAX_BODY) {
      r->too_big = 1; /* keep reading, keep nothing */
      return MHD_YES;
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
  if (r->too_big) {
    dtx__srv_problem(&resp, 413, "TOOLARGE", "request body too large",
                     "a request body is at most 1 MiB (1048576 bytes)");
  } else {
    dtx__srv_req_t req = {.method = method,
                          .target = r->target,
                          .auth = MHD_lookup_connection_value(
                              con, MHD_HEADER_KIND, "Authorization"),
                          .body = r->body ? r->body : "",
                          .body_len = r->len};
    dtx__srv_dispatch(d, &req, &resp);
  }
  return answer(d, con, &resp);
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
    fprintf(stderr, "doctxd: --store %s: %s: %s\n",
            o.store ? o.store : "(default)", dtx_errname(rc), dtx_errdetail());
    return 1;
  }
  struct MHD_Daemon *mhd = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL, handler,
      &d, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o.threads,
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
    if (atomic_load(&d.inflight) == 0)
      break;
    if (ms >= o.drain_ms) {
      /* A request still in the library cannot be stopped safely, and the
       * store must not close under it: exit, leaving its work to
       * `doctx recover`. */
      char n[16];
      snprintf(n, sizeof n, "%d", atomic_load(&d.inflight));
      log_line("%s requests still running after --drain-ms; exiting", n);
      fflush(stderr);
      _exit(1);
    }
    nanosleep(&nap, NULL);
  }
  MHD_stop_daemon(mhd);
  dtx_store_close(d.st);
  dtx__srv_tokens_free(&d.tokens);
  dtx__srv_fini(&d);
  log_line("drained; stopped%s", "");
  return 0;
}
