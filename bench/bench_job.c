/* bench_job.c -- the job queue through doctx (dtx_job_add, then
 * dtx_job_work's claim, no-op handler and fenced completion) against a
 * native queue on the same kind of store, in the same run:
 *   - SQLite (no --store, or a sqlite: URI): a plain table
 *     q(id, queue, type, payload, state, priority, run_at, attempts,
 *     owner, lease_until, epoch, created, finished) claimed with
 *     UPDATE ... SET state='running' WHERE id = (SELECT id FROM q WHERE
 *     state='ready' AND run_at<=? ORDER BY priority DESC, run_at LIMIT 1)
 *     RETURNING ..., completed with an UPDATE fenced by the epoch; WAL, the
 *     same synchronous setting as doctx's URI, one connection per thread;
 *   - Redis (--store redis://..., standalone or Cluster): the reliable list
 *     queue, LPUSH to add, LMOVE ready -> processing to claim (BLMOVE while
 *     a submitter runs), LREM processing to complete; both lists under one
 *     hash tag, on the node that owns it.
 * For each worker count W (--workers, default 1,4,8) two workloads:
 *   drain    N no-op jobs are added first by one thread (add jobs/s), then
 *            W threads drain the queue: jobs/s from start to the last
 *            completion;
 *   latency  one submitter adds N/4 jobs at a fixed rate (half of doctx's
 *            drain rate of that W, the same for both sides) while W
 *            threads work: p50/p99 from the start of the add to the job's
 *            completion.
 * doctx's completion time is the job's "finished" stamp (wall-clock ms,
 * taken as the middle of that ms), so its latencies carry +-0.5 ms; the
 * native side stamps in microseconds.  An idle doctx worker sleeps
 * 1..50 ms between polls (the kit's pace); the native SQLite workers keep
 * the same pace, the native Redis workers block in BLMOVE (as a Redis
 * user's would).  Every round checks that all N jobs ended succeeded.
 *
 * usage: bench_job [--store URI] [--label L] [--jobs N] [--rounds R]
 *                  [--workers 1,4,8] [--sync full|normal|both]
 *                  [--phase drain] [--side doctx]   (for profiling)
 *                  [--batch K]   (the workers' claim batch; 0: default)
 * At sync=full each round runs half as many jobs (fsyncs are slow).
 * Prints a table, medians of the rounds ("p50 x": doctx's p50 over the
 * native one; "ratio": doctx's drain jobs/s over the native), and one
 * "RESULT bench=job key=value..." line per row.  Exits 1 when a job of
 * either side did not succeed. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"
#include "store/store.h"
#ifdef DTX_HAVE_REDIS
#include "bench_native.h"
#endif

#define QUEUE "bench"
#define TYPE "noop"
#define MAXW 64
#define TAG "jobq" /* native Redis keys: q:{jobq}:ready, q:{jobq}:processing */
#define IDLE_MAX_US 50000 /* the kit's DTX__IDLE_MAX_MS, for the native poll */

typedef struct cfg {
  int jobs, rounds, nw, workers[8];
  const char *store, *label, *sync, *dir;
  const char *backend; /* in the results file: sqlite, or the label */
  int redis;
  int drain_only, doctx_only; /* --phase drain, --side doctx (profiling) */
  int batch;                  /* dtx_job_work_opts_t.batch (0: default) */
  int limits; /* the limits row: 0 not in it; 1 limits off; 2 on (a
                 max_running and a rate that do not bind) */
#ifdef DTX_HAVE_REDIS
  rd_uri_t uri;
  char host[256]; /* native: the node owning TAG's slot */
  int port;
#endif
} cfg_t;

/* One side's figures for one round. */
typedef struct res {
  double add_jps, drain_jps, p50, p99, ops, rts, cmds;
  int errors;
} res_t;

/* One run: a side, a workload, W threads. */
typedef struct run {
  const cfg_t *c;
  int w;
  double rate;     /* latency: jobs/s the submitter adds; 0: drain */
  double *add_us;  /* wall-clock us at the start of job i's add */
  double *lat;     /* latency: per job, us */
  double t0, last; /* wall us: workers' start; the last completion */
  atomic_int done, errors, nconn;
  void *(*worker)(void *); /* a native side's worker thread */
  volatile int stop;
  dtx_store_t *st;
  const char *dbpath; /* native SQLite */
#ifdef DTX_HAVE_REDIS
  redisContext *conns[MAXW + 1]; /* native Redis: workers', then submitter */
#endif
} run_t;

/* Sleeps until wall-clock us t (a submitter's pace). */
static void sleep_until_us(double t) {
  double d = t - wall_us();
  if (d > 0) {
    struct timespec ts = {(time_t)(d / 1e6), (long)((d - (time_t)(d / 1e6) * 1e6) * 1e3)};
    nanosleep(&ts, NULL);
  }
}

static void note_done(run_t *r, double t) {
  double prev = r->last;
  while (t > prev &&
         !__atomic_compare_exchange(&r->last, &prev, &t, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
    ;
  atomic_fetch_add(&r->done, 1);
}

/* ---- the two workloads, for every side ------------------------------------ */

/* Adds job i, stamping r->add_us[i]; ctx: the side's submitter. */
typedef void (*add_fn)(run_t *r, void *ctx, int i);

/* Runs fn on W threads and joins them. */
static void run_threads(run_t *r, void *(*fn)(void *)) {
  pthread_t th[MAXW];
  int started = 0;
  for (int i = 0; i < r->w; i++)
    if (pthread_create(&th[started], NULL, fn, r) == 0)
      started++;
  if (started < r->w) {
    fprintf(stderr, "bench_job: only %d of %d threads started\n", started,
            r->w);
    atomic_fetch_add(&r->errors, 1);
  }
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
}

/* A native side's workers: r->worker on W threads. */
static void *native_pool(void *arg) {
  run_t *r = arg;
  run_threads(r, r->worker);
  return NULL;
}

/* Drain (r->rate 0): adds the N jobs, then runs workers, which return
 * when the queue is empty.  Latency: workers run on a thread of their own
 * while the N jobs are added at r->rate, until wait_done sees them all
 * complete.  Sets add jobs/s and, for a drain, store operations, round
 * trips and commands per job (doctx's; a native side overwrites them). */
static void drive(run_t *r, res_t *res, add_fn add, void *ctx,
                  void *(*workers)(void *), void (*wait_done)(run_t *)) {
  int n = r->c->jobs;
  double a0 = now_us(), s0 = wall_us();
  if (r->rate == 0) {
    for (int i = 0; i < n; i++)
      add(r, ctx, i);
    res->add_jps = n / ((now_us() - a0) / 1e6);
    int64_t ops0 = dtx__store_calls(), rt0 = dtx__store_round_trips(),
            cmd0 = dtx__store_commands();
    r->t0 = wall_us();
    workers(r);
    res->ops = (double)(dtx__store_calls() - ops0) / n;
    res->rts = (double)(dtx__store_round_trips() - rt0) / n;
    res->cmds = (double)(dtx__store_commands() - cmd0) / n;
    return;
  }
  pthread_t th;
  r->t0 = s0;
  if (pthread_create(&th, NULL, workers, r)) {
    atomic_fetch_add(&r->errors, n);
    return;
  }
  for (int i = 0; i < n; i++) {
    sleep_until_us(s0 + i * 1e6 / r->rate);
    add(r, ctx, i);
  }
  res->add_jps = n / ((now_us() - a0) / 1e6);
  wait_done(r);
  r->stop = 1;
  pthread_join(th, NULL);
}

/* The round's figures, once r->last and r->lat are known. */
static void figures(run_t *r, res_t *res) {
  int n = r->c->jobs;
  res->drain_jps = r->last > r->t0 ? n / ((r->last - r->t0) / 1e6) : 0;
  if (r->lat) {
    res->p50 = pct(r->lat, n, 0.50);
    res->p99 = pct(r->lat, n, 0.99);
  }
  res->errors = atomic_load(&r->errors);
}

/* ---- doctx --------------------------------------------------------------- */

static int noop(dtx_job_run_t *run, const json_t *job, void *arg) {
  (void)run;
  (void)job;
  (void)arg;
  return 0;
}

static void doctx_add(run_t *r, void *ctx, int i) {
  json_t *payload = json_pack("{s:i}", "i", i), *out = NULL;
  dtx_job_req_t req = {.queue = QUEUE, .type = TYPE, .payload = payload};
  r->add_us[i] = wall_us();
  int rc = dtx_job_add(r->st, &req, &out, NULL);
  if (rc) {
    fprintf(stderr, "bench_job: add: %s: %s\n", dtx_strerror(rc),
            dtx_errdetail());
    atomic_fetch_add(&r->errors, 1);
  }
  (void)ctx;
  json_decref(out);
  json_decref(payload);
}

static void *doctx_work(void *arg) {
  run_t *r = arg;
  dtx_job_handler_t h = {.type = TYPE, .fn = noop};
  dtx_job_work_opts_t o = {.queue = QUEUE, .handlers = &h, .nhandlers = 1,
                           .threads = r->w, .once = r->rate == 0,
                           .stop = &r->stop, .batch = r->c->batch};
  json_t *sum = NULL;
  int rc = dtx_job_work(r->st, &o, &sum);
  if (rc) {
    /* the detail was set on a worker thread: the summary's errors say it */
    char *e = json_dumps(json_object_get(sum, "errors"), JSON_COMPACT);
    fprintf(stderr, "bench_job: work: %s: %s\n", dtx_strerror(rc),
            e ? e : "?");
    free(e);
    atomic_fetch_add(&r->errors, 1);
  }
  json_decref(sum);
  return NULL;
}

/* Opens an empty doctx store for one run, with the job indexes made (by
 * one job of another queue) before any clock starts. */
static int doctx_open(const cfg_t *c, int w, int round, const char *phase,
                      dtx_store_t **st) {
  char uri[600];
  if (c->store && c->redis) {
    /* A namespace of its own per run: the job pattern's indexes are set
     * up once per store URI and process (dtx__kit_ensure), so a run on a
     * collection dropped and re-created under the same URI had none and
     * every claim scanned the queue (the Redis rounds after the first). */
    snprintf(uri, sizeof uri, "%s%cns=bj%d%c%d-%ld", c->store,
             strchr(c->store, '?') ? '&' : '?', w, phase[0], round,
             (long)getpid());
  } else {
    snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s-%s-%d-%d.db?sync=%s",
             c->dir, c->sync, phase, w, round, c->sync);
  }
  int rc = dtx_store_open(uri, st);
  if (!rc && c->redis)
    rc = dtx_store_drop_collection_ex(*st, DTX_JOBS, &(dtx_drop_opts_t){1});
  if (!rc && c->limits == 2) { /* docs/jobs.md, "Queue limits", "Rate" */
    json_t *set = NULL;
    const char *which = getenv("BENCH_JOB_LIMITS"); /* rate|max: one */
    dtx_job_queue_opts_t qo = {.set_max_running = 1,
                               .max_running = DTX_JOB_MAX_RUNNING_LIMIT,
                               .set_rate = 1, .rate_n = DTX_JOB_RATE_N_MAX,
                               .rate_ms = 1000};
    if (which && !strcmp(which, "rate"))
      qo.set_max_running = 0;
    if (which && !strcmp(which, "max"))
      qo.set_rate = 0;
    rc = dtx_job_queue_set(*st, QUEUE, &qo, &set);
    json_decref(set);
  }
  json_t *out = NULL;
  dtx_job_req_t warm = {.queue = "warm", .type = TYPE};
  if (!rc)
    rc = dtx_job_add(*st, &warm, &out, NULL);
  json_decref(out);
  if (rc) {
    fprintf(stderr, "bench_job: open %s: %s: %s\n", uri, dtx_strerror(rc),
            dtx_errdetail());
    if (*st)
      dtx_store_close(*st);
    *st = NULL;
  }
  return rc;
}

/* Reads the jobs back: each must have succeeded; r->last and (latency)
 * r->lat from their "finished" stamps. */
static void doctx_collect(run_t *r) {
  json_t *f = json_pack("{s:s}", "queue", QUEUE), *docs = NULL, *d;
  size_t k;
  int n = r->c->jobs, seen = 0;
  int rc = dtx_store_find(r->st, DTX_JOBS, f, NULL, &docs);
  json_decref(f);
  if (rc) {
    fprintf(stderr, "bench_job: reading jobs: %s\n", dtx_errdetail());
    atomic_fetch_add(&r->errors, n);
    return;
  }
  json_array_foreach(docs, k, d) {
    int i = (int)json_integer_value(
        json_object_get(json_object_get(d, "payload"), "i"));
    const char *s = json_string_value(json_object_get(d, "state"));
    if (i < 0 || i >= n || !s || strcmp(s, "succeeded")) {
      atomic_fetch_add(&r->errors, 1);
      continue;
    }
    double fin = (double)json_integer_value(json_object_get(d, "finished")) *
                     1e3 + 500;
    if (fin > r->last)
      r->last = fin;
    if (r->lat)
      r->lat[seen] = fin > r->add_us[i] ? fin - r->add_us[i] : 0;
    seen++;
  }
  if (seen != n) {
    fprintf(stderr, "bench_job: %d of %d jobs succeeded\n", seen, n);
    atomic_fetch_add(&r->errors, n - seen);
  }
  json_decref(docs);
}

/* Waits (bounded) until doctx reports all N jobs succeeded. */
static void doctx_wait_done(run_t *r) {
  json_t *f = json_pack("{s:s,s:s}", "queue", QUEUE, "state", "succeeded");
  double give_up = wall_us() + 120e6;
  for (;;) {
    int64_t n = 0;
    if (dtx_store_count(r->st, DTX_JOBS, f, &n) == 0 && n >= r->c->jobs)
      break;
    if (wall_us() > give_up) {
      fprintf(stderr, "bench_job: doctx: %lld of %d jobs done after 120 s\n",
              (long long)n, r->c->jobs);
      break;
    }
    usleep(20000);
  }
  json_decref(f);
}

static int run_doctx(const cfg_t *c, int w, double rate, int round,
                     double *add_us, double *lat, res_t *res) {
  run_t r = {.c = c, .w = w, .rate = rate, .add_us = add_us,
             .lat = rate > 0 ? lat : NULL};
  memset(res, 0, sizeof *res);
  if (doctx_open(c, w, round,
                 c->limits ? (c->limits == 2 ? "Lim" : "Off")
                 : rate > 0 ? "lat" : "drain",
                 &r.st))
    return -1;
  drive(&r, res, doctx_add, NULL, doctx_work, doctx_wait_done);
  doctx_collect(&r);
  figures(&r, res);
  dtx_store_close(r.st);
  return 0;
}

/* ---- native SQLite: a table queue ------------------------------------------ */

static sqlite3 *sq_open(const run_t *r) {
  sqlite3 *db;
  char sql[64];
  if (sqlite3_open(r->dbpath, &db) != SQLITE_OK) {
    fprintf(stderr, "bench_job: %s: %s\n", r->dbpath, sqlite3_errmsg(db));
    sqlite3_close(db);
    return NULL;
  }
  sqlite3_busy_timeout(db, 60000);
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", r->c->sync);
  sqlite3_exec(db, sql, NULL, NULL, NULL);
  return db;
}

/* Steps a write to its end, again while the store is busy. */
static int sq_step(sqlite3_stmt *s) {
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_BUSY || rc == SQLITE_LOCKED)
    sqlite3_reset(s);
  return rc;
}

static int64_t now_ms(void) { return (int64_t)(wall_us() / 1e3); }

static void sq_add(run_t *r, void *ctx, int i) {
  sqlite3_stmt *ins = ctx;
  char payload[32];
  snprintf(payload, sizeof payload, "{\"i\":%d}", i);
  r->add_us[i] = wall_us();
  int64_t now = now_ms();
  sqlite3_bind_int(ins, 1, i);
  sqlite3_bind_text(ins, 2, payload, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(ins, 3, now);
  sqlite3_bind_int64(ins, 4, now);
  if (sq_step(ins) != SQLITE_DONE)
    atomic_fetch_add(&r->errors, 1);
  sqlite3_reset(ins);
}

static const char *const SQ_INSERT =
    "INSERT INTO q(id, queue, type, payload, state, priority, run_at, "
    "created) VALUES(?1, '" QUEUE "', '" TYPE "', ?2, 'ready', 0, ?3, ?4)";

static void *sq_worker(void *arg) {
  run_t *r = arg;
  sqlite3 *db = sq_open(r);
  sqlite3_stmt *claim = NULL, *done = NULL;
  char owner[32];
  snprintf(owner, sizeof owner, "w%d", atomic_fetch_add(&r->nconn, 1));
  if (!db ||
      sqlite3_prepare_v2(
          db,
          "UPDATE q SET state='running', owner=?1, lease_until=?2, "
          "epoch=epoch+1 WHERE id = (SELECT id FROM q WHERE queue='" QUEUE
          "' AND state='ready' AND run_at<=?3 ORDER BY priority DESC, run_at "
          "LIMIT 1) RETURNING id, epoch, payload",
          -1, &claim, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "UPDATE q SET state='succeeded', attempts=attempts+1, "
                         "owner=NULL, lease_until=NULL, finished=?1 WHERE "
                         "id=?2 AND state='running' AND epoch=?3",
                         -1, &done, NULL) != SQLITE_OK) {
    fprintf(stderr, "bench_job: native worker: %s\n",
            db ? sqlite3_errmsg(db) : "no connection");
    atomic_fetch_add(&r->errors, 1);
    r->stop = 1;
    goto out;
  }
  sqlite3_bind_text(claim, 1, owner, -1, SQLITE_STATIC);
  int64_t pause = 0;
  while (!r->stop && atomic_load(&r->done) < r->c->jobs) {
    int64_t now = now_ms();
    sqlite3_bind_int64(claim, 2, now + 30000);
    sqlite3_bind_int64(claim, 3, now);
    int rc = sq_step(claim);
    if (rc != SQLITE_ROW) {
      sqlite3_reset(claim);
      if (rc != SQLITE_DONE) {
        atomic_fetch_add(&r->errors, 1);
        break;
      }
      if (r->rate == 0) /* drain: the queue is empty */
        break;
      /* the kit's pace: 1 ms, doubling to 50 ms */
      pause = pause ? (pause * 2 < IDLE_MAX_US ? pause * 2 : IDLE_MAX_US)
                    : 1000;
      usleep((useconds_t)pause);
      continue;
    }
    pause = 0;
    int64_t id = sqlite3_column_int64(claim, 0),
            epoch = sqlite3_column_int64(claim, 1);
    sqlite3_step(claim); /* SQLITE_DONE: the statement ends */
    sqlite3_reset(claim);
    /* the no-op handler runs here */
    sqlite3_bind_int64(done, 1, now_ms());
    sqlite3_bind_int64(done, 2, id);
    sqlite3_bind_int64(done, 3, epoch);
    rc = sq_step(done);
    int ok = rc == SQLITE_DONE && sqlite3_changes(db) == 1;
    sqlite3_reset(done);
    double t = wall_us();
    if (!ok) {
      atomic_fetch_add(&r->errors, 1);
      continue;
    }
    if (r->lat && id >= 0 && id < r->c->jobs)
      r->lat[id] = t - r->add_us[id];
    note_done(r, t);
  }
out:
  sqlite3_finalize(claim);
  sqlite3_finalize(done);
  sqlite3_close(db);
  return NULL;
}


static void native_wait_done(run_t *r) {
  double give_up = wall_us() + 120e6;
  while (atomic_load(&r->done) < r->c->jobs && !r->stop) {
    if (wall_us() > give_up) {
      fprintf(stderr, "bench_job: native: %d of %d jobs done after 120 s\n",
              atomic_load(&r->done), r->c->jobs);
      atomic_fetch_add(&r->errors, r->c->jobs - atomic_load(&r->done));
      break;
    }
    usleep(2000);
  }
  r->stop = 1;
}

static int run_sqlite(const cfg_t *c, int w, double rate, int round,
                      double *add_us, double *lat, res_t *res) {
  char path[512];
  snprintf(path, sizeof path, "%s/native-%s-%s-%d-%d.db", c->dir, c->sync,
           rate > 0 ? "lat" : "drain", w, round);
  unlink(path);
  run_t r = {.c = c, .w = w, .rate = rate, .add_us = add_us,
             .lat = rate > 0 ? lat : NULL, .dbpath = path};
  memset(res, 0, sizeof *res);
  sqlite3 *db = sq_open(&r);
  sqlite3_stmt *ins = NULL;
  if (!db ||
      sqlite3_exec(db,
                   "PRAGMA journal_mode=WAL;"
                   "CREATE TABLE q(id INTEGER PRIMARY KEY, queue TEXT NOT "
                   "NULL, type TEXT NOT NULL, payload TEXT, state TEXT NOT "
                   "NULL, priority INTEGER NOT NULL DEFAULT 0, run_at "
                   "INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
                   "owner TEXT, lease_until INTEGER, epoch INTEGER NOT NULL "
                   "DEFAULT 0, created INTEGER, finished INTEGER);"
                   "CREATE INDEX q_due ON q(queue, state, priority DESC, "
                   "run_at);",
                   NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, SQ_INSERT, -1, &ins, NULL) != SQLITE_OK) {
    fprintf(stderr, "bench_job: native setup: %s\n",
            db ? sqlite3_errmsg(db) : "no connection");
    sqlite3_close(db);
    return -1;
  }
  int n = c->jobs;
  r.worker = sq_worker;
  drive(&r, res, sq_add, ins, native_pool, native_wait_done);
  sqlite3_stmt *chk = NULL;
  int ok = 0;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM q WHERE state='succeeded'",
                         -1, &chk, NULL) == SQLITE_OK &&
      sqlite3_step(chk) == SQLITE_ROW)
    ok = sqlite3_column_int(chk, 0);
  sqlite3_finalize(chk);
  sqlite3_finalize(ins);
  sqlite3_close(db);
  if (ok != n) {
    fprintf(stderr, "bench_job: native: %d of %d jobs succeeded\n", ok, n);
    atomic_fetch_add(&r.errors, 1);
  }
  figures(&r, res);
  res->ops = 2; /* the claim UPDATE and the completing UPDATE */
  return 0;
}

/* ---- native Redis: a reliable list queue ---------------------------------------- */

#ifdef DTX_HAVE_REDIS
#define READY "q:{" TAG "}:ready"
#define PROCESSING "q:{" TAG "}:processing"

static void rd_add(run_t *r, void *ctx, int i) {
  redisContext *rc = ctx;
  char job[96];
  snprintf(job, sizeof job,
           "{\"i\":%d,\"queue\":\"" QUEUE "\",\"type\":\"" TYPE "\"}", i);
  r->add_us[i] = wall_us();
  redisReply *rep = redisCommand(rc, "LPUSH " READY " %s", job);
  if (!rep || rep->type != REDIS_REPLY_INTEGER)
    atomic_fetch_add(&r->errors, 1);
  freeReplyObject(rep);
}

static void *rd_worker(void *arg) {
  run_t *r = arg;
  redisContext *rc = r->conns[atomic_fetch_add(&r->nconn, 1)];
  while (!r->stop && atomic_load(&r->done) < r->c->jobs) {
    redisReply *rep =
        r->rate == 0
            ? redisCommand(rc, "LMOVE " READY " " PROCESSING " RIGHT LEFT")
            : redisCommand(rc, "BLMOVE " READY " " PROCESSING
                               " RIGHT LEFT 0.05");
    if (!rep || rep->type == REDIS_REPLY_ERROR) {
      fprintf(stderr, "bench_job: native worker: %s\n",
              rep ? rep->str : rc->errstr);
      freeReplyObject(rep);
      atomic_fetch_add(&r->errors, 1);
      break;
    }
    if (rep->type != REDIS_REPLY_STRING) { /* nil: empty */
      freeReplyObject(rep);
      if (r->rate == 0)
        break;
      continue;
    }
    const char *p = strstr(rep->str, "\"i\":");
    int i = p ? atoi(p + 4) : -1;
    /* the no-op handler runs here */
    redisReply *d = redisCommand(rc, "LREM " PROCESSING " 1 %b", rep->str,
                                 rep->len);
    int ok = d && d->type == REDIS_REPLY_INTEGER && d->integer == 1;
    freeReplyObject(d);
    freeReplyObject(rep);
    double t = wall_us();
    if (!ok || i < 0 || i >= r->c->jobs) {
      atomic_fetch_add(&r->errors, 1);
      continue;
    }
    if (r->lat)
      r->lat[i] = t - r->add_us[i];
    note_done(r, t);
  }
  return NULL;
}

static int run_redis(const cfg_t *c, int w, double rate, int round,
                     double *add_us, double *lat, res_t *res) {
  (void)round;
  run_t r = {.c = c, .w = w, .rate = rate, .add_us = add_us,
             .lat = rate > 0 ? lat : NULL};
  char why[512];
  int rc = 0, n = c->jobs;
  memset(res, 0, sizeof *res);
  /* Connections are opened before the clock starts, as doctx's pool is. */
  for (int i = 0; i <= w; i++)
    if (!(r.conns[i] = native_connect_to(&c->uri, c->host, c->port, why,
                                         sizeof why))) {
      fprintf(stderr, "bench_job: native: %s\n", why);
      while (i-- > 0)
        redisFree(r.conns[i]);
      return -1;
    }
  redisContext *sub = r.conns[w];
  freeReplyObject(redisCommand(sub, "DEL " READY " " PROCESSING));
  r.worker = rd_worker;
  drive(&r, res, rd_add, sub, native_pool, native_wait_done);
  redisReply *a = redisCommand(sub, "LLEN " READY),
             *b = redisCommand(sub, "LLEN " PROCESSING);
  if (!a || !b || a->integer || b->integer || atomic_load(&r.done) != n) {
    fprintf(stderr, "bench_job: native: %d of %d jobs done, lists not empty\n",
            atomic_load(&r.done), n);
    atomic_fetch_add(&r.errors, 1);
  }
  freeReplyObject(a);
  freeReplyObject(b);
  for (int i = 0; i <= w; i++)
    redisFree(r.conns[i]);
  figures(&r, res);
  res->ops = res->rts = res->cmds = 2; /* LMOVE, LREM */
  return rc;
}
#endif

/* ---- the table ---------------------------------------------------------------- */

/* A side left out (--side doctx): zero figures, nothing run. */
static int skip_native(const cfg_t *c, int w, double rate, int round,
                       double *add_us, double *lat, res_t *res) {
  (void)c, (void)w, (void)rate, (void)round, (void)add_us, (void)lat;
  memset(res, 0, sizeof *res);
  return 0;
}

static int cmp_drain(const void *a, const void *b) {
  return cmp_double(&((const res_t *)a)->drain_jps,
                    &((const res_t *)b)->drain_jps);
}
static int cmp_p50(const void *a, const void *b) {
  return cmp_double(&((const res_t *)a)->p50, &((const res_t *)b)->p50);
}

typedef int (*native_fn)(const cfg_t *, int, double, int, double *, double *,
                         res_t *);

/* The rounds of one workload (rate 0: drain), doctx and native
 * alternating so that drift in the machine touches both: the medians by
 * cmp in *dm and *nm, errors added to *derr and *nerr.  -1 on a setup
 * error (reported). */
static int rounds_of(const cfg_t *c, int w, double rate, native_fn native,
                     double *add_us, double *lat,
                     int (*cmp)(const void *, const void *), res_t *dm,
                     res_t *nm, int *derr, int *nerr) {
  res_t d[16], n[16];
  for (int k = 0; k < c->rounds; k++) {
    bench_phase("%s W=%d %s round %d/%d doctx", c->label, w,
                rate > 0 ? "latency" : "drain", k + 1, c->rounds);
    if (run_doctx(c, w, rate, k, add_us, lat, &d[k]) < 0)
      return -1;
    bench_phase("%s W=%d %s round %d/%d native", c->label, w,
                rate > 0 ? "latency" : "drain", k + 1, c->rounds);
    if (native(c, w, rate, k, add_us, lat, &n[k]) < 0)
      return -1;
    *derr += d[k].errors;
    *nerr += n[k].errors;
  }
  qsort(d, (size_t)c->rounds, sizeof *d, cmp);
  qsort(n, (size_t)c->rounds, sizeof *n, cmp);
  *dm = d[c->rounds / 2];
  *nm = n[c->rounds / 2];
  return 0;
}

/* W's row: drain medians, then latency at half doctx's drain rate. */
static int bench(const cfg_t *c, int w, native_fn native) {
  int n = c->jobs, rc = -1, derr = 0, nerr = 0;
  double *add_us = calloc((size_t)n, sizeof *add_us),
         *lat = calloc((size_t)n, sizeof *lat);
  res_t dm, nm, dlm = {0}, nlm = {0};
  if (!add_us || !lat ||
      rounds_of(c, w, 0, native, add_us, lat, cmp_drain, &dm, &nm, &derr,
                &nerr) < 0)
    goto out;
  double rate = dm.drain_jps / 2;
  if (rate < 10)
    rate = 10;
  /* a quarter as many jobs: at half the drain rate, a round takes half
   * as long as a drain */
  cfg_t lc = *c;
  lc.jobs = c->jobs / 4 > 0 ? c->jobs / 4 : 1;
  if (!c->drain_only &&
      rounds_of(&lc, w, rate, native, add_us, lat, cmp_p50, &dlm, &nlm, &derr,
                &nerr) < 0)
    goto out;
  double ratio = nm.drain_jps > 0 ? dm.drain_jps / nm.drain_jps : 0;
  bench_row(&(bench_row_t){
      .metric = "job", .backend = c->backend,
      .sync = c->redis ? "none" : c->sync, .workload = "noop drain",
      .unit = "jobs/s",
      .native = c->redis ? "LPUSH / LMOVE / LREM (one slot)"
                         : "table queue, UPDATE ... RETURNING",
      .workers = w, .rounds = c->rounds,
      .doctx = {dm.drain_jps, c->drain_only ? -1 : dlm.p50,
                c->drain_only ? -1 : dlm.p99},
      .nat = {c->doctx_only ? -1 : nm.drain_jps,
              c->drain_only || c->doctx_only ? -1 : nlm.p50,
              c->drain_only || c->doctx_only ? -1 : nlm.p99},
      .extra = json_pack("{s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:i,s:i}", "jobs", n,
                         "lat_jobs", lc.jobs, "latency_rate", rate,
                         "add_jps", dm.add_jps, "native_add_jps", nm.add_jps,
                         "ops_per_job", dm.ops, "rt_per_job", dm.rts,
                         "doctx_failed", derr, "native_failed", nerr)});
  printf("%-16s %2d | %7.0f %7.0f %5.1f %5.1f | %6.0f %7.0f %7.0f | "
         "%7.0f %7.0f | %7.0f %7.0f %5.2f | %5.2f%s\n",
         c->label, w, dm.add_jps, dm.drain_jps, dm.ops, dm.rts, rate, dlm.p50,
         dlm.p99, nm.add_jps, nm.drain_jps, nlm.p50, nlm.p99,
         nlm.p50 > 0 ? dlm.p50 / nlm.p50 : 0, ratio,
         derr || nerr ? "  (errors!)" : "");
  printf("RESULT bench=job label=%s workers=%d jobs=%d lat_jobs=%d "
         "add_jps=%.0f "
         "drain_jps=%.0f ops_per_job=%.2f rt_per_job=%.2f "
         "cmds_per_job=%.2f rate=%.0f p50_us=%.0f p99_us=%.0f "
         "native_add_jps=%.0f native_drain_jps=%.0f native_p50_us=%.0f "
         "native_p99_us=%.0f ratio=%.4f doctx_failed=%d native_failed=%d\n",
         c->label, w, n, lc.jobs, dm.add_jps, dm.drain_jps, dm.ops, dm.rts, dm.cmds,
         rate, dlm.p50, dlm.p99, nm.add_jps, nm.drain_jps, nlm.p50, nlm.p99,
         ratio, derr, nerr);
  fflush(stdout);
  rc = derr || nerr ? 1 : 0;
out:
  free(add_us);
  free(lat);
  return rc;
}

/* The limits row (docs/benchmarks.md, "Queue limits"): W threads drain
 * N no-op jobs with the queue's limits off, then on (max_running 256 and
 * a rate of 1,000,000 a second: neither binds), alternating, the same
 * run; the ratio of the medians (target >= 0.8). */
static int bench_limits(const cfg_t *c, int w) {
  res_t off[16], on[16];
  cfg_t lc = *c;
  int err = 0;
  double *add_us = calloc((size_t)c->jobs, sizeof *add_us);
  if (!add_us)
    return 1;
  for (int k = 0; k < c->rounds && err >= 0; k++) {
    bench_phase("%s W=%d limits round %d/%d off", c->label, w, k + 1,
                c->rounds);
    lc.limits = 1;
    if (run_doctx(&lc, w, 0, k, add_us, NULL, &off[k]) < 0) {
      err = -1;
      break;
    }
    bench_phase("%s W=%d limits round %d/%d on", c->label, w, k + 1,
                c->rounds);
    lc.limits = 2;
    if (run_doctx(&lc, w, 0, k, add_us, NULL, &on[k]) < 0) {
      err = -1;
      break;
    }
    err += off[k].errors + on[k].errors;
  }
  free(add_us);
  if (err < 0)
    return 1;
  qsort(off, (size_t)c->rounds, sizeof *off, cmp_drain);
  qsort(on, (size_t)c->rounds, sizeof *on, cmp_drain);
  res_t a = off[c->rounds / 2], b = on[c->rounds / 2];
  double ratio = a.drain_jps > 0 ? b.drain_jps / a.drain_jps : 0;
  bench_row(&(bench_row_t){
      .metric = "job_limits", .backend = c->backend,
      .sync = c->redis ? "none" : c->sync,
      .workload = "noop drain, limits on (max_running 256, rate 1e6/s)",
      .unit = "jobs/s", .native = "the same, limits off", .workers = w,
      .rounds = c->rounds, .doctx = {b.drain_jps, -1, -1},
      .nat = {a.drain_jps, -1, -1},
      .extra = json_pack("{s:i,s:f,s:f,s:i}", "jobs", c->jobs,
                         "rt_per_job_on", b.rts, "rt_per_job_off", a.rts,
                         "failed", err)});
  printf("%-16s %2d | limits on %7.0f jobs/s (%.2f rt/j), off %7.0f "
         "(%.2f rt/j): ratio %.2f%s\n",
         c->label, w, b.drain_jps, b.rts, a.drain_jps, a.rts, ratio,
         err ? "  (errors!)" : "");
  printf("RESULT bench=job_limits label=%s workers=%d jobs=%d "
         "on_drain_jps=%.0f off_drain_jps=%.0f ratio=%.4f failed=%d\n",
         c->label, w, c->jobs, b.drain_jps, a.drain_jps, ratio, err);
  fflush(stdout);
  return err ? 1 : 0;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_job [--store URI] [--label L] [--jobs N(1000)] "
                  "[--rounds R(3)]\n"
                  "                 [--workers 1,4,8] "
                  "[--sync full|normal|both]\n"
                  "                 [--phase drain] [--side doctx] "
                  "[--batch K]\n");
}

int main(int argc, char **argv) {
  cfg_t c = {.jobs = 0, .rounds = 3, .nw = 3, .workers = {1, 4, 8}};
  const char *sync = "both";
  char dir[] = "/tmp/dtx-bench-job-XXXXXX";
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "bench_job: %s needs a value\n", a);
      usage();
      return 2;
    }
    if (!strcmp(a, "--store")) {
      c.store = v;
    } else if (!strcmp(a, "--label")) {
      c.label = v;
    } else if (!strcmp(a, "--jobs")) {
      c.jobs = atoi(v);
    } else if (!strcmp(a, "--rounds")) {
      c.rounds = atoi(v);
    } else if (!strcmp(a, "--sync")) {
      sync = v;
    } else if (!strcmp(a, "--phase")) {
      c.drain_only = !strcmp(v, "drain");
    } else if (!strcmp(a, "--side")) {
      c.doctx_only = !strcmp(v, "doctx");
    } else if (!strcmp(a, "--batch")) {
      c.batch = atoi(v);
    } else if (!strcmp(a, "--workers")) {
      c.nw = 0;
      for (char *p = (char *)v; *p && c.nw < 8;) {
        c.workers[c.nw++] = (int)strtol(p, &p, 10);
        if (*p == ',')
          p++;
        else if (*p)
          c.nw = -100;
      }
    } else {
      fprintf(stderr, "bench_job: unknown option %s\n", a);
      usage();
      return 2;
    }
  }
  if (c.jobs == 0)
    c.jobs = bench_scaled(1000);
  int bad = c.jobs < 1 || c.jobs > 10000000 || c.rounds < 1 ||
            c.rounds > 16 || c.nw < 1 || c.batch < 0 || c.batch > 256;
  for (int i = 0; i < c.nw && !bad; i++)
    bad = c.workers[i] < 1 || c.workers[i] > MAXW;
  if (bad || (strcmp(sync, "both") && strcmp(sync, "full") &&
              strcmp(sync, "normal"))) {
    usage();
    return 2;
  }
  c.redis = c.store && !strncmp(c.store, "redis", 5);
  native_fn native = run_sqlite;
  if (c.store && !c.redis) {
    fprintf(stderr, "bench_job: --store takes a redis:// URI (SQLite is the "
                    "default)\n");
    return 2;
  }
  if (c.redis) {
#ifdef DTX_HAVE_REDIS
    int rc = dtx__rd_uri_parse(c.store, &c.uri);
    if (rc) {
      fprintf(stderr, "bench_job: %s: %s\n", dtx_strerror(rc),
              dtx_errdetail());
      return 2;
    }
    if (native_find_node(&c.uri, TAG, c.host, &c.port, "bench_job") < 0)
      return 1;
    native = run_redis;
#else
    fprintf(stderr, "bench_job: doctx was built without Redis\n");
    return 2;
#endif
  }
  if (c.doctx_only)
    native = skip_native;
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  c.dir = dir;
  c.backend = c.redis ? c.label ? c.label : "redis" : "sqlite";
  bench_begin("bench_job", c.redis ? c.backend : NULL, argc, argv);
  printf("jobs: %d no-op jobs per drain, %d per latency round (half at "
         "sync=full), median of %d rounds; native: %s\n",
         c.jobs, c.jobs / 4 > 0 ? c.jobs / 4 : 1, c.rounds,
         c.redis ? "LPUSH / LMOVE ready->processing / LREM, one hash tag"
                 : "table queue, UPDATE ... RETURNING claim, UPDATE done");
  printf("%-19s | %-27s | %-22s | %-15s | %-21s |\n", "", "doctx drain",
         "doctx latency at rate", "native drain", "native latency");
  printf("%-16s %2s | %7s %7s %5s %5s | %6s %7s %7s | %7s %7s | %7s %7s %5s | "
         "%s\n",
         "label", "W", "add/s", "drain/s", "ops/j", "rt/j", "rate/s",
         "p50(us)", "p99(us)", "add/s", "drain/s", "p50(us)", "p99(us)",
         "p50 x", "drain ratio");
  int rc = 0;
  const char *syncs[2] = {"normal", "full"};
  char label[128];
  for (int s = 0; s < 2; s++) {
    if (c.redis ? s > 0 : strcmp(sync, "both") && strcmp(sync, syncs[s]))
      continue;
    c.sync = syncs[s];
    /* each job pays an fsync or two at full: half as many keep it short */
    int jobs = c.jobs;
    if (!c.redis && s == 1 && c.jobs > 1)
      c.jobs /= 2;
    if (c.redis)
      c.label = c.label ? c.label : "redis";
    else {
      snprintf(label, sizeof label, "sqlite-%s", c.sync);
      c.label = label;
    }
    for (int i = 0; i < c.nw; i++)
      if (bench(&c, c.workers[i], native))
        rc = 1;
    /* the limits row: SQLite normal and Redis, 4 workers (or the most) */
    if (s == 0) {
      int w = 0;
      for (int i = 0; i < c.nw; i++)
        if (c.workers[i] <= 4 && c.workers[i] > w)
          w = c.workers[i];
      if (bench_limits(&c, w ? w : c.workers[0]))
        rc = 1;
    }
    c.jobs = jobs;
  }
#ifdef DTX_HAVE_REDIS
  if (c.redis)
    dtx__rd_uri_free(&c.uri);
#endif
  if (bench_rmdir(dir))
    rc = 1;
  return bench_end(rc);
}
