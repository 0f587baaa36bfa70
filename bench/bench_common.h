/* bench_common.h -- what the benchmarks share: the clock, the percentile
 * and the median, a transfer pair and one timed doctx transfer (so that
 * bench_transfer (SQLite) and bench_redis measure the doctx side the same
 * way), a field's sum over a collection (the check that no update was
 * lost), the scale knob, the progress line and the JSON results file.
 * Header-only (static inline, with static state): each benchmark is one
 * executable of one translation unit.
 *
 * Every benchmark's main calls bench_begin() first and returns
 * bench_end()'s result last, announces each phase with bench_phase(), and
 * records every figure it prints with bench_row() (before printing it:
 * bench_row clears the progress line).  With BENCH_RESULTS=DIR in the
 * environment (scripts/bench.sh sets bench/results), bench_end writes
 * DIR/<bench>[-<label>].json:
 *   {"bench", "label", "started" (UTC), "elapsed_s", "args": [...],
 *    "machine": {"host", "cpus", "cpu_model", "kernel", "sqlite",
 *                "load_start": [1, 5, 15 min], "load_end": [...],
 *                "git", "note"},
 *    "rows": [{"metric", "backend", "sync", "workload", "workers", "unit",
 *              "rounds", "doctx": {"ops_s", "p50_us", "p99_us"},
 *              "native": {"what", "ops_s", "p50_us", "p99_us"},
 *              "ratio" (doctx ops_s / native ops_s), ...extra}]}
 * (a figure not measured is null).  scripts/bench_plot.sh draws the
 * charts from these files. */
#ifndef DTX_BENCH_COMMON_H
#define DTX_BENCH_COMMON_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "doctx.h"

typedef struct pair {
  int from, to;
  int64_t amount;
} pair_t;

static inline double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Wall-clock microseconds: what a job's "finished" stamp (ms) compares to. */
static inline double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The p-quantile of v[0..n) (sorts v in place). */
static inline double pct(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[(int)(p * (n - 1))];
}

/* The median of v[0..n) (sorts v in place). */
static inline double bench_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* BENCH_SCALE (default 1, 0.01..1000): the factor on every benchmark's
 * default amount of work, for longer (or quicker) runs than make bench's
 * few minutes.  Explicit --ops/--transfers/... options are not scaled. */
static inline double bench_scale(void) {
  const char *s = getenv("BENCH_SCALE");
  double f = s ? atof(s) : 1;
  return f >= 0.01 && f <= 1000 ? f : 1;
}

/* n scaled by BENCH_SCALE, at least 1. */
static inline int bench_scaled(int n) {
  double v = n * bench_scale();
  return v < 1 ? 1 : v > 1e8 ? 100000000 : (int)v;
}

/* The sum of the integer field `field` over coll's documents, in *sum. */
static inline int bench_sum(dtx_store_t *st, const char *coll,
                            const char *field, int64_t *sum) {
  json_t *docs, *d;
  size_t i;
  int rc = dtx_store_find(st, coll, NULL, NULL, &docs);
  *sum = 0;
  if (rc < 0)
    return rc;
  json_array_foreach(docs, i, d) *sum += json_integer_value(json_object_get(d, field));
  json_decref(docs);
  return 0;
}

/* Fills p[0..n) with transfers among accounts (>= 2): from is account 0
 * for hot percent of them and uniform otherwise, to uniform among the
 * others, amounts 1..1000; the same list for the same arguments. */
static inline void bench_pairs(pair_t *p, int n, int accounts, int hot) {
  unsigned seed = 42;
  for (int i = 0; i < n; i++) {
    int from = (int)(rand_r(&seed) % 100) < hot
                   ? 0
                   : (int)(rand_r(&seed) % (unsigned)accounts);
    int to = (int)(rand_r(&seed) % (unsigned)(accounts - 1));
    if (to >= from)
      to++;
    p[i] = (pair_t){from, to, 1 + rand_r(&seed) % 1000};
  }
}

/* Removes a benchmark's temporary directory: 0, or 1 when it failed. */
static inline int bench_rmdir(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : 1;
}

/* ---- native SQLite: the baselines' connection and statements ---------------- */

/* A connection to path with the given synchronous setting and a long busy
 * timeout (the native workers wait for the write lock as doctx's do);
 * exits naming who on failure. */
static inline sqlite3 *bench_sq_open(const char *path, const char *sync,
                                     const char *who) {
  sqlite3 *db;
  char sql[64];
  if (sqlite3_open(path, &db) != SQLITE_OK) {
    fprintf(stderr, "%s: native open: %s\n", who, sqlite3_errmsg(db));
    exit(1);
  }
  sqlite3_busy_timeout(db, 60000);
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", sync);
  sqlite3_exec(db, sql, NULL, NULL, NULL);
  return db;
}

/* Prepares sql in *st; exits naming who on failure. */
static inline void bench_sq_prep(sqlite3 *db, const char *sql,
                                 sqlite3_stmt **st, const char *who) {
  if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK) {
    fprintf(stderr, "%s: native: %s: %s\n", who, sql, sqlite3_errmsg(db));
    exit(1);
  }
}

/* Runs a statement that returns no row, and resets it: 1 when it ran. */
static inline int bench_sq_done(sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE;
}

/* Runs one transfer a<from> -> a<to> to its end; *lat receives its
 * latency in microseconds.  Returns 1 when it succeeded. */
static inline int bench_transfer_one(dtx_store_t *st, const pair_t *p,
                                     double *lat) {
  char from[32], to[32];
  snprintf(from, sizeof from, "a%d", p->from);
  snprintf(to, sizeof to, "a%d", p->to);
  dtx_transfer_req_t req = {.from = from, .to = to, .amount = p->amount};
  json_t *tx = NULL;
  double t0 = now_us();
  int rc = dtx_transfer_execute(st, &req, NULL, &tx);
  *lat = now_us() - t0;
  const char *s = json_string_value(json_object_get(tx, "state"));
  int ok = rc == 0 && s && strcmp(s, "succeeded") == 0;
  json_decref(tx);
  return ok;
}

/* k transfers (k <= 256) of pairs in one dtx_transfer_execute_many call;
 * each one's latency is the call's.  Returns how many did not succeed. */
static inline int bench_transfer_many(dtx_store_t *st, const pair_t *p, int k,
                                      double *lat) {
  char ids[256][2][32];
  dtx_transfer_req_t req[256];
  dtx_transfer_result_t res[256];
  int bad = 0;
  for (int i = 0; i < k; i++) {
    snprintf(ids[i][0], sizeof ids[i][0], "a%d", p[i].from);
    snprintf(ids[i][1], sizeof ids[i][1], "a%d", p[i].to);
    req[i] = (dtx_transfer_req_t){
        .from = ids[i][0], .to = ids[i][1], .amount = p[i].amount};
  }
  double t0 = now_us();
  (void)dtx_transfer_execute_many(st, req, (size_t)k, NULL, res);
  double el = now_us() - t0;
  for (int i = 0; i < k; i++) {
    const char *s = json_string_value(json_object_get(res[i].tx, "state"));
    bad += !(res[i].rc == 0 && s && strcmp(s, "succeeded") == 0);
    lat[i] = el;
  }
  dtx_transfer_results_clear(res, (size_t)k);
  return bad;
}

/* A figure of one row; a negative value is "not measured" (null). */
typedef struct bench_side {
  double ops_s, p50_us, p99_us;
} bench_side_t;

/* ---- a timed pool of worker threads ------------------------------------------ */

/* Runs operation i (0..total) on worker w; returns 1 when it succeeded. */
typedef int (*bench_op_fn)(void *ctx, int w, int i);

typedef struct bench_pool {
  bench_op_fn op;
  void *ctx;
  int total, next, nw, errors; /* next, nw, errors: atomic */
  double *lat;                 /* per operation, microseconds */
} bench_pool_t;

static inline void *bench_pool_worker(void *arg) {
  bench_pool_t *p = arg;
  int w = __atomic_fetch_add(&p->nw, 1, __ATOMIC_RELAXED);
  for (;;) {
    int i = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED);
    if (i >= p->total)
      break;
    double t0 = now_us();
    int ok = p->op(p->ctx, w, i);
    p->lat[i] = now_us() - t0;
    if (!ok)
      __atomic_add_fetch(&p->errors, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

/* Runs total operations on workers threads (at most 256), each thread
 * taking the next index: ops/s over the wall time, p50/p99 of the
 * operations' latencies.  *errors (may be NULL) receives the count of
 * operations that did not succeed (a thread that did not start counts
 * as total). */
static inline bench_side_t bench_pool_run(int workers, int total,
                                          bench_op_fn op, void *ctx,
                                          int *errors) {
  bench_pool_t p = {.op = op, .ctx = ctx, .total = total};
  bench_side_t r = {-1, -1, -1};
  pthread_t th[256];
  int started = 0;
  if (!(p.lat = malloc(sizeof *p.lat * (size_t)(total > 0 ? total : 1)))) {
    if (errors)
      *errors = total;
    return r;
  }
  double t0 = now_us();
  for (int i = 0; i < workers && i < 256; i++)
    if (pthread_create(&th[started], NULL, bench_pool_worker, &p) == 0)
      started++;
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  double el = now_us() - t0;
  r.ops_s = total / (el / 1e6);
  r.p50_us = pct(p.lat, total, 0.50);
  r.p99_us = pct(p.lat, total, 0.99);
  free(p.lat);
  if (errors)
    *errors = p.errors + (started < workers ? total : 0);
  return r;
}

/* The median of rounds by ops/s (sorts v in place). */
static inline int bench_cmp_side(const void *a, const void *b) {
  return cmp_double(&((const bench_side_t *)a)->ops_s,
                    &((const bench_side_t *)b)->ops_s);
}
static inline bench_side_t bench_median_side(bench_side_t *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_side);
  return v[n / 2];
}

/* ---- progress line and results file --------------------------------------- */

/* One row of results: doctx beside its native baseline. */
typedef struct bench_row {
  const char *metric;   /* what is measured: "transfer", "post", ... */
  const char *backend;  /* "sqlite", "redis-standalone", "redis-cluster" */
  const char *sync;     /* "full", "normal", "aof-always", "none", ... */
  const char *workload; /* "uniform", "hot90", "batch16", ... */
  const char *unit;     /* of ops_s: "transfers/s", "ops/s", ... */
  const char *native;   /* what the baseline is, in a few words */
  int workers, rounds;
  bench_side_t doctx, nat;
  json_t *extra; /* more figures, an object (stolen; may be NULL) */
} bench_row_t;

static struct bench_state {
  pthread_mutex_t mu;
  pthread_t ticker;
  int tty, ticking, stop, shown;
  double t0;
  char name[64], label[64], phase[200];
  json_t *doc, *rows;
} bench_st = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Prints the progress line (bench_st.mu held): on a tty one line redrawn
 * in place, otherwise (newline) one line per phase. */
static inline void bench_progress_draw(int newline) {
  struct bench_state *b = &bench_st;
  fprintf(stderr, "%s[%s%s%s] %s  %.0f s%s", b->tty ? "\r\033[K" : "",
          b->name, b->label[0] ? " " : "", b->label, b->phase,
          (now_us() - b->t0) / 1e6, newline ? "\n" : "");
  fflush(stderr);
  b->shown = !newline;
}

/* Clears the progress line (bench_st.mu held), before stdout prints. */
static inline void bench_progress_clear(void) {
  if (bench_st.shown) {
    fputs("\r\033[K", stderr);
    fflush(stderr);
    bench_st.shown = 0;
  }
}

/* The ticker: redraws the line every second on a tty, so the elapsed
 * time runs even while one phase takes long. */
static inline void *bench_ticker(void *arg) {
  (void)arg;
  for (;;) {
    struct timespec ts = {0, 250 * 1000 * 1000};
    for (int i = 0; i < 4; i++) {
      nanosleep(&ts, NULL);
      pthread_mutex_lock(&bench_st.mu);
      int stop = bench_st.stop;
      pthread_mutex_unlock(&bench_st.mu);
      if (stop)
        return NULL;
    }
    pthread_mutex_lock(&bench_st.mu);
    if (bench_st.phase[0])
      bench_progress_draw(0);
    pthread_mutex_unlock(&bench_st.mu);
  }
}

/* The next phase, in printf's form: shown on the progress line. */
static inline void bench_phase(const char *fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&bench_st.mu);
  va_start(ap, fmt);
  vsnprintf(bench_st.phase, sizeof bench_st.phase, fmt, ap);
  va_end(ap);
  bench_progress_draw(!bench_st.tty);
  pthread_mutex_unlock(&bench_st.mu);
}

/* "v" of a figure: a number, or null when not measured. */
static inline json_t *bench_num(double v) {
  return v >= 0 ? json_real(v) : json_null();
}

static inline json_t *bench_loadavg(void) {
  double l[3] = {-1, -1, -1};
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf %lf %lf", &l[0], &l[1], &l[2]) != 3)
      l[0] = l[1] = l[2] = -1;
    fclose(f);
  }
  return json_pack("[ooo]", bench_num(l[0]), bench_num(l[1]),
                   bench_num(l[2]));
}

/* The machine the figures come from: they do not travel without it. */
static inline json_t *bench_machine(void) {
  char host[256] = "?", model[256] = "?", line[512];
  struct utsname u;
  gethostname(host, sizeof host);
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
      snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
      model[strcspn(model, "\n")] = 0;
      break;
    }
  if (f)
    fclose(f);
  const char *git = getenv("BENCH_GIT"), *note = getenv("BENCH_NOTE");
  return json_pack("{s:s,s:I,s:s,s:s,s:s,s:o,s:o,s:o}", "host", host, "cpus",
                   (json_int_t)sysconf(_SC_NPROCESSORS_ONLN), "cpu_model",
                   model, "kernel", uname(&u) == 0 ? u.release : "?",
                   "sqlite", sqlite3_libversion(), "load_start",
                   bench_loadavg(), "git",
                   git ? json_string(git) : json_null(), "note",
                   note ? json_string(note) : json_null());
}

/* Starts a benchmark run: name (e.g. "bench_transfer"), label (the
 * target, e.g. "redis-cluster"; NULL or "" for none), its arguments. */
static inline void bench_begin(const char *name, const char *label, int argc,
                               char **argv) {
  struct bench_state *b = &bench_st;
  char ts[32];
  time_t t = time(NULL);
  strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
  snprintf(b->name, sizeof b->name, "%s", name);
  snprintf(b->label, sizeof b->label, "%s", label ? label : "");
  b->t0 = now_us();
  b->tty = isatty(2);
  json_t *args = json_array();
  for (int i = 1; i < argc; i++)
    json_array_append_new(args, json_string(argv[i]));
  b->rows = json_array();
  b->doc = json_pack("{s:s,s:s,s:s,s:o,s:o}", "bench", name, "label",
                     b->label, "started", ts, "args", args, "machine",
                     bench_machine());
  if (b->tty && pthread_create(&b->ticker, NULL, bench_ticker, NULL) == 0)
    b->ticking = 1;
}

/* A label set once the arguments are read (the file is named after it). */
static inline void bench_label(const char *label) {
  pthread_mutex_lock(&bench_st.mu);
  snprintf(bench_st.label, sizeof bench_st.label, "%s", label ? label : "");
  json_object_set_new(bench_st.doc, "label", json_string(bench_st.label));
  pthread_mutex_unlock(&bench_st.mu);
}

/* Records one row (and clears the progress line: print the row after). */
static inline void bench_row(const bench_row_t *r) {
  json_t *o = json_pack(
      "{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:{s:o,s:o,s:o},s:{s:s,s:o,s:o,s:o},"
      "s:o}",
      "metric", r->metric, "backend", r->backend, "sync",
      r->sync ? r->sync : "", "workload", r->workload ? r->workload : "",
      "unit", r->unit ? r->unit : "ops/s", "workers", r->workers, "rounds",
      r->rounds, "doctx", "ops_s", bench_num(r->doctx.ops_s), "p50_us",
      bench_num(r->doctx.p50_us), "p99_us", bench_num(r->doctx.p99_us),
      "native", "what", r->native ? r->native : "", "ops_s",
      bench_num(r->nat.ops_s), "p50_us", bench_num(r->nat.p50_us), "p99_us",
      bench_num(r->nat.p99_us), "ratio",
      r->doctx.ops_s >= 0 && r->nat.ops_s > 0
          ? json_real(r->doctx.ops_s / r->nat.ops_s)
          : json_null());
  if (o && r->extra)
    json_object_update(o, r->extra);
  json_decref(r->extra);
  pthread_mutex_lock(&bench_st.mu);
  bench_progress_clear();
  json_array_append_new(bench_st.rows, o);
  pthread_mutex_unlock(&bench_st.mu);
}

/* Ends the run: stops the progress line and, with BENCH_RESULTS set,
 * writes the results file.  Returns rc, or 1 when rc was 0 and the file
 * could not be written. */
static inline int bench_end(int rc) {
  struct bench_state *b = &bench_st;
  pthread_mutex_lock(&b->mu);
  b->stop = 1;
  pthread_mutex_unlock(&b->mu);
  if (b->ticking)
    pthread_join(b->ticker, NULL);
  pthread_mutex_lock(&b->mu);
  bench_progress_clear();
  pthread_mutex_unlock(&b->mu);
  const char *dir = getenv("BENCH_RESULTS");
  if (dir && *dir && b->doc) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s%s%s.json", dir, b->name,
             b->label[0] ? "-" : "", b->label);
    json_object_set_new(json_object_get(b->doc, "machine"), "load_end",
                        bench_loadavg());
    json_object_set_new(b->doc, "elapsed_s",
                        json_real((now_us() - b->t0) / 1e6));
    json_object_set(b->doc, "rows", b->rows);
    if (json_dump_file(b->doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(6))) {
      fprintf(stderr, "%s: cannot write %s\n", b->name, path);
      rc = rc ? rc : 1;
    }
  }
  json_decref(b->doc);
  json_decref(b->rows);
  b->doc = b->rows = NULL;
  return rc;
}

#endif
