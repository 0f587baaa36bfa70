/* metrics.c -- doctxd's /metrics in the Prometheus text format, written by
 * hand (Debian ships no C client): requests by route PATTERN, method and
 * code, a latency histogram per route pattern (0.5 ms .. 5 s), store
 * errors by code, and the process's own numbers from /proc.  Labels are
 * only ever from fixed sets -- the route table, eight methods, the status
 * codes, dtx_errname() -- never an id from a request, so the series stay
 * few whatever clients send.  Counters are atomics: no lock on the
 * request path. */
#include "server/server.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const double bounds[DTX__SRV_NBUCKETS - 1] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5};
static const char *const methods[DTX__SRV_NMETHODS] = {
    "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "other"};
static const int codes[DTX__SRV_NCODES] = {200, 201, 400, 401, 403, 404, 405,
                                           409, 413, 429, 500, 503, 0};

static int method_ix(const char *m) {
  for (int i = 0; i < DTX__SRV_NMETHODS - 1; i++)
    if (m && strcmp(m, methods[i]) == 0)
      return i;
  return DTX__SRV_NMETHODS - 1;
}

static int code_ix(int status) {
  for (int i = 0; i < DTX__SRV_NCODES && codes[i]; i++)
    if (codes[i] == status)
      return i;
  return 12; /* "other" */
}

void dtx__srv_metrics_observe(dtx__srv_t *d, int route, const char *method,
                              int status, int64_t us, int rc) {
  dtx__srv_route_stats_t *s = &d->stats[route];
  atomic_fetch_add(&s->by_code[method_ix(method)][code_ix(status)], 1);
  int b = 0;
  while (b < DTX__SRV_NBUCKETS - 1 && (double)us / 1e6 > bounds[b])
    b++;
  atomic_fetch_add(&s->bucket[b], 1);
  atomic_fetch_add(&s->sum_us, (uint64_t)(us < 0 ? 0 : us));
  atomic_fetch_add(&s->count, 1);
  if (rc < 0 && -rc < 32)
    atomic_fetch_add(&d->store_errors[-rc], 1);
}

typedef struct buf {
  char *p;
  size_t n, cap;
  int oom;
} buf_t;

static void put(buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(buf_t *b, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int k = b->oom ? 0 : vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (b->oom || k < 0)
      return;
    if ((size_t)k < b->cap - b->n) {
      b->n += (size_t)k;
      return;
    }
    size_t cap = (b->cap + (size_t)k + 1) * 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
}

static const char *route_name(size_t i) {
  return i < dtx__srv_nroutes ? dtx__srv_routes[i].pattern : "unmatched";
}

/* The process's numbers from /proc/self: cpu seconds, resident bytes and
 * open descriptors. */
static void proc_metrics(buf_t *b, const dtx__srv_t *d) {
  FILE *f = fopen("/proc/self/stat", "r");
  unsigned long long ut = 0, stt = 0;
  long rss = 0;
  if (f) {
    char line[1024];
    if (fgets(line, sizeof line, f)) {
      char *p = strrchr(line, ')');
      /* fields after the name: state(3) ... utime(14) stime(15) ...
       * rss(24) */
      if (p && sscanf(p + 2,
                      "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                      "%llu %llu %*d %*d %*d %*d %*d %*d %*u %*u %ld",
                      &ut, &stt, &rss) != 3)
        ut = stt = 0, rss = 0;
    }
    fclose(f);
  }
  long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  int fds = 0;
  DIR *dir = opendir("/proc/self/fd");
  if (dir) {
    struct dirent *e;
    while ((e = readdir(dir)))
      fds += e->d_name[0] != '.';
    closedir(dir);
    fds--; /* the directory's own descriptor */
  }
  put(b,
      "# HELP process_cpu_seconds_total User and system CPU time.\n"
      "# TYPE process_cpu_seconds_total counter\n"
      "process_cpu_seconds_total %.2f\n",
      hz > 0 ? (double)(ut + stt) / (double)hz : 0.0);
  put(b,
      "# HELP process_resident_memory_bytes Resident memory.\n"
      "# TYPE process_resident_memory_bytes gauge\n"
      "process_resident_memory_bytes %ld\n",
      rss * page);
  put(b,
      "# HELP process_open_fds Open file descriptors.\n"
      "# TYPE process_open_fds gauge\nprocess_open_fds %d\n",
      fds);
  put(b,
      "# HELP process_start_time_seconds Start time, Unix seconds.\n"
      "# TYPE process_start_time_seconds gauge\n"
      "process_start_time_seconds %lld\n",
      (long long)d->start_s);
}

/* ---- job events (doctxd_jobs_total{queue,event}) -------------------------
 * The one family labelled by user data: the queue's name, which the
 * library checked ([A-Za-z0-9_.:-], nothing to escape) before the event
 * was counted.  Bounded by the user's own queues, and by
 * DTX__SRV_MAX_QUEUES besides (the rest under "_other"); events are a
 * fixed set.  Per process: N doctxd count N shares (docs/server.md). */

static const char *const job_events[] = {"added",  "claimed", "completed",
                                         "failed", "retried", "canceled"};
#define NJOBEV (sizeof job_events / sizeof job_events[0])
static pthread_mutex_t jobs_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char name[129];
  uint64_t n[NJOBEV];
} jobq[DTX__SRV_MAX_QUEUES + 1]; /* the last: "_other" */
static size_t njobq;

void dtx__srv_metrics_job(const char *queue, const char *event, uint64_t n) {
  size_t e = 0, q;
  while (e < NJOBEV && strcmp(job_events[e], event) != 0)
    e++;
  if (e == NJOBEV || !queue || strlen(queue) >= sizeof jobq[0].name)
    return;
  pthread_mutex_lock(&jobs_mu);
  for (q = 0; q < njobq && strcmp(jobq[q].name, queue) != 0; q++)
    ;
  if (q == njobq) {
    if (njobq < DTX__SRV_MAX_QUEUES)
      snprintf(jobq[njobq++].name, sizeof jobq[0].name, "%s", queue);
    else
      q = DTX__SRV_MAX_QUEUES;
  }
  jobq[q].n[e] += n;
  pthread_mutex_unlock(&jobs_mu);
}

static void jobs_metrics(buf_t *b) {
  put(b, "# HELP doctxd_jobs_total Job events this process served, by queue "
         "and event.\n# TYPE doctxd_jobs_total counter\n");
  pthread_mutex_lock(&jobs_mu);
  for (size_t q = 0; q <= DTX__SRV_MAX_QUEUES; q++) {
    if (q >= njobq && q < DTX__SRV_MAX_QUEUES)
      continue;
    for (size_t e = 0; e < NJOBEV; e++)
      if (jobq[q].n[e])
        put(b, "doctxd_jobs_total{queue=\"%s\",event=\"%s\"} %llu\n",
            q < DTX__SRV_MAX_QUEUES ? jobq[q].name : "_other", job_events[e],
            (unsigned long long)jobq[q].n[e]);
  }
  pthread_mutex_unlock(&jobs_mu);
}

char *dtx__srv_metrics_text(dtx__srv_t *d, size_t *len) {
  buf_t b = {0};
  put(&b, "# HELP doctxd_http_requests_total Requests by route pattern, "
          "method and status code.\n"
          "# TYPE doctxd_http_requests_total counter\n");
  for (size_t r = 0; r <= dtx__srv_nroutes; r++)
    for (int m = 0; m < DTX__SRV_NMETHODS; m++)
      for (int k = 0; k < DTX__SRV_NCODES; k++) {
        uint64_t v = atomic_load(&d->stats[r].by_code[m][k]);
        char code[8];
        snprintf(code, sizeof code, "%d", codes[k]);
        if (v)
          put(&b,
              "doctxd_http_requests_total{route=\"%s\",method=\"%s\","
              "code=\"%s\"} %llu\n",
              route_name(r), methods[m], k == 12 ? "other" : code,
              (unsigned long long)v);
      }
  put(&b, "# HELP doctxd_http_request_duration_seconds Request latency by "
          "route pattern.\n"
          "# TYPE doctxd_http_request_duration_seconds histogram\n");
  for (size_t r = 0; r <= dtx__srv_nroutes; r++) {
    const dtx__srv_route_stats_t *s = &d->stats[r];
    uint64_t n = atomic_load(&s->count), cum = 0;
    if (!n)
      continue;
    for (int k = 0; k < DTX__SRV_NBUCKETS; k++) {
      cum += atomic_load(&s->bucket[k]);
      if (k < DTX__SRV_NBUCKETS - 1)
        put(&b,
            "doctxd_http_request_duration_seconds_bucket{route=\"%s\","
            "le=\"%g\"} %llu\n",
            route_name(r), bounds[k], (unsigned long long)cum);
      else
        put(&b,
            "doctxd_http_request_duration_seconds_bucket{route=\"%s\","
            "le=\"+Inf\"} %llu\n",
            route_name(r), (unsigned long long)cum);
    }
    put(&b,
        "doctxd_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
        "doctxd_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
        route_name(r), (double)atomic_load(&s->sum_us) / 1e6, route_name(r),
        (unsigned long long)n);
  }
  put(&b, "# HELP doctxd_store_errors_total Library errors answered, by "
          "code.\n# TYPE doctxd_store_errors_total counter\n");
  for (int e = 1; e < 32; e++) {
    uint64_t v = atomic_load(&d->store_errors[e]);
    if (v)
      put(&b, "doctxd_store_errors_total{code=\"%s\"} %llu\n", dtx_errname(-e),
          (unsigned long long)v);
  }
  put(&b,
      "# HELP doctxd_draining 1 while the server drains.\n"
      "# TYPE doctxd_draining gauge\ndoctxd_draining %d\n"
      "# HELP doctxd_inflight_requests Requests being answered.\n"
      "# TYPE doctxd_inflight_requests gauge\n"
      "doctxd_inflight_requests %d\n",
      atomic_load(&d->draining), atomic_load(&d->inflight));
  jobs_metrics(&b);
  proc_metrics(&b, d);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  *len = b.n;
  return b.p;
}
