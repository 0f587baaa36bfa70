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
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* ---- domain metrics ------------------------------------------------------ */

/* What the store holds, counted at scrape time with the library's cheap
 * calls: transfers by state (dtx_store_count on "transfers", state being
 * indexed), jobs by queue and state (dtx_job_stats per queue; the queues
 * found by a skip-scan of the jobs' {state, queue, ...} index, at most
 * DOM_MAX_QUEUES), locks held (a count of "locks" with a live lease), and
 * the recovery actions /v1/admin/recover ran in this process.  The text
 * is kept DOM_TTL_MS, so a scrape storm costs the store one round of
 * counts per DOM_TTL_MS whatever the number of scrapers, and the lock
 * serialises the counting itself.  Labels: states, queue names, pattern
 * and action names -- never an id. */

#define DOM_TTL_MS 5000
#define DOM_MAX_QUEUES DTX__SRV_MAX_QUEUES
#define DOM_MAX_ACTIONS 64

static pthread_mutex_t dom_mu = PTHREAD_MUTEX_INITIALIZER;
static char *dom_text;            /* the cached families, or NULL */
static int64_t dom_at_ms;         /* when they were counted */
static const dtx_store_t *dom_st; /* the store they were counted on */
static struct {
  char pattern[32], action[64];
  uint64_t n;
} dom_rec[DOM_MAX_ACTIONS]; /* recovery actions run, by this process */
static size_t dom_nrec;

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dtx__srv_metrics_recovered(dtx__srv_t *d, const json_t *summary) {
  const char *pat, *act;
  json_t *p, *n;
  (void)d;
  pthread_mutex_lock(&dom_mu);
  json_object_foreach(json_object_get(summary, "patterns"), pat, p) {
    json_object_foreach(json_object_get(p, "ran"), act, n) {
      json_int_t v = json_integer_value(n);
      size_t i = 0;
      if (v <= 0)
        continue;
      while (i < dom_nrec && (strcmp(dom_rec[i].pattern, pat) ||
                              strcmp(dom_rec[i].action, act)))
        i++;
      if (i == dom_nrec) {
        if (dom_nrec == DOM_MAX_ACTIONS || strlen(pat) >= 32 ||
            strlen(act) >= 64)
          continue; /* the library's names are short and few */
        snprintf(dom_rec[i].pattern, sizeof dom_rec[i].pattern, "%s", pat);
        snprintf(dom_rec[i].action, sizeof dom_rec[i].action, "%s", act);
        dom_nrec++;
      }
      dom_rec[i].n += (uint64_t)v;
    }
  }
  pthread_mutex_unlock(&dom_mu);
}

/* A label value as the text format wants it (queue names are
 * [A-Za-z0-9_.:-] by the library's check; escaped anyway). */
static void put_label(buf_t *b, const char *v) {
  for (; *v; v++)
    if (*v == '"' || *v == '\\')
      put(b, "\\%c", *v);
    else if (*v == '\n')
      put(b, "\\n");
    else
      put(b, "%c", *v);
}

/* The queues holding jobs (any state), sorted, by a skip-scan: one
 * indexed find per (state, queue).  Their number, or -1 on a store
 * error.  Also the admin page's (routes_admin.c). */
int dtx__srv_job_queues(dtx_store_t *st, char q[][129]) {
  static const char *const states[] = {"ready",     "delayed", "running",
                                       "succeeded", "dead",    "canceled",
                                       "waiting",   "held"}; /* + flows */
  int nq = 0;
  for (size_t s = 0; s < sizeof states / sizeof *states; s++) {
    char last[129] = "";
    for (;;) {
      json_t *f =
          json_pack("{s:s,s:{s:s}}", "state", states[s], "queue", "$gt", last);
      json_t *sort = json_pack("{s:i,s:i}", "state", 1, "queue", 1);
      json_t *proj = json_pack("{s:i}", "queue", 1), *docs = NULL;
      dtx_find_opts_t fo = {.sort = sort, .projection = proj, .limit = 1};
      int rc = f && sort && proj ? dtx_store_find(st, DTX_JOBS, f, &fo, &docs)
                                 : DTX_ENOMEM;
      json_decref(f);
      json_decref(sort);
      json_decref(proj);
      const char *name =
          json_string_value(json_object_get(json_array_get(docs, 0), "queue"));
      if (rc || !name || strlen(name) > 128) {
        json_decref(docs);
        if (rc)
          return -1;
        break;
      }
      snprintf(last, sizeof last, "%s", name);
      json_decref(docs);
      int i = 0;
      while (i < nq && strcmp(q[i], last) < 0)
        i++;
      if (i < nq && strcmp(q[i], last) == 0)
        continue;
      if (nq == DOM_MAX_QUEUES)
        break;
      memmove(q[i + 1], q[i], (size_t)(nq - i) * sizeof q[0]);
      memcpy(q[i], last, sizeof last);
      nq++;
    }
  }
  return nq;
}

/* Counts the store's families into b; 0, or -1 when the store failed
 * (b then holds what was counted before). */
static int domain_count(dtx_store_t *st, buf_t *b) {
  static const char *const tstates[] = {"initiated", "preparing",
                                        "committed", "rolling_back",
                                        "succeeded", "failed"};
  char q[DOM_MAX_QUEUES + 1][129];
  int64_t n;
  put(b, "# HELP doctxd_transfers Transfers in the store by state.\n"
         "# TYPE doctxd_transfers gauge\n");
  for (size_t i = 0; i < sizeof tstates / sizeof *tstates; i++) {
    json_t *f = json_pack("{s:s}", "state", tstates[i]);
    int rc = f ? dtx_store_count(st, DTX_TRANSFERS, f, &n) : DTX_ENOMEM;
    json_decref(f);
    if (rc)
      return -1;
    put(b, "doctxd_transfers{state=\"%s\"} %lld\n", tstates[i], (long long)n);
  }
  int nq = dtx__srv_job_queues(st, q);
  if (nq < 0)
    return -1;
  put(b, "# HELP doctxd_queue_jobs Jobs in the store by queue and state "
         "(queue depth: ready, delayed, running).\n"
         "# TYPE doctxd_queue_jobs gauge\n");
  for (int i = 0; i < nq; i++) {
    json_t *stats = NULL, *v;
    const char *state;
    if (dtx_job_stats(st, q[i], &stats))
      return -1;
    json_object_foreach(stats, state, v) {
      if (strcmp(state, "total") == 0 || strcmp(state, "max_running") == 0 ||
          !json_is_integer(v))
        continue; /* the total; the settings (paused, max_running) */
      put(b, "doctxd_queue_jobs{queue=\"");
      put_label(b, q[i]);
      put(b, "\",state=\"%s\"} %lld\n", state,
          (long long)json_integer_value(v));
    }
    json_decref(stats);
  }
  /* A live lease: an owner, and expires in the future (docs/locks.md);
   * a semaphore's leases are its slots'. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  json_int_t now = (json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  json_t *f = json_pack(
      "{s:[{s:{s:s},s:{s:I}},{s:{s:{s:{s:s},s:{s:I}}}}]}", "$or", "owner",
      "$type", "string", "expires", "$gt", now, "slots", "$elemMatch",
      "owner", "$type", "string", "expires", "$gt", now);
  int rc = f ? dtx_store_count(st, "locks", f, &n) : DTX_ENOMEM;
  json_decref(f);
  if (rc)
    return -1;
  put(b,
      "# HELP doctxd_locks_held Locks with a live lease.\n"
      "# TYPE doctxd_locks_held gauge\ndoctxd_locks_held %lld\n",
      (long long)n);
  return 0;
}

/* The domain families: counted again when older than DOM_TTL_MS. */
static void domain_metrics(buf_t *b, dtx__srv_t *d) {
  pthread_mutex_lock(&dom_mu);
  int64_t now = mono_ms();
  if (!dom_text || dom_st != d->st || now - dom_at_ms >= DOM_TTL_MS) {
    buf_t t = {0};
    int ok = d->st ? domain_count(d->st, &t) == 0 : 0;
    put(&t,
        "# HELP doctxd_domain_up 1 when the store's counts above were "
        "read, 0 when the store failed (they are then missing).\n"
        "# TYPE doctxd_domain_up gauge\ndoctxd_domain_up %d\n",
        ok);
    if (!t.oom) {
      free(dom_text);
      dom_text = t.p;
      dom_at_ms = now;
      dom_st = d->st;
    } else {
      free(t.p);
    }
  }
  if (dom_text)
    put(b, "%s", dom_text);
  put(b, "# HELP doctxd_recovery_actions_total What /v1/admin/recover ran "
         "in this process, by pattern and action.\n"
         "# TYPE doctxd_recovery_actions_total counter\n");
  for (size_t i = 0; i < dom_nrec; i++)
    put(b,
        "doctxd_recovery_actions_total{pattern=\"%s\",action=\"%s\"} "
        "%llu\n",
        dom_rec[i].pattern, dom_rec[i].action,
        (unsigned long long)dom_rec[i].n);
  pthread_mutex_unlock(&dom_mu);
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
  domain_metrics(&b, d);
  jobs_metrics(&b);
  proc_metrics(&b, d);
  if (b.oom) {
    free(b.p);
    return NULL;
  }
  *len = b.n;
  return b.p;
}
