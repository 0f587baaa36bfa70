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
 *   latency  one submitter adds N jobs at a fixed rate (half of doctx's
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
 * Prints a table, medians of the rounds, and one
 * "RESULT bench=job key=value..." line per row. */
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
  int redis;
  int drain_only, doctx_only; /* --phase drain, --side doctx (profiling) */
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

/* ---- doctx --------------------------------------------------------------- */

static int noop(dtx_job_run_t *run, const json_t *job, void *arg) {
  (void)run;
  (void)job;
  (void)arg;
  return 0;
}

static int doctx_add(run_t *r, int i) {
  json_t *payload = json_pack("{s:i}", "i", i), *out = NULL;
  dtx_job_req_t req = {.queue = QUEUE, .type = TYPE, .payload = payload};
  r->add_us[i] = wall_us();
  int rc = dtx_job_add(r->st, &req, &out, NULL);
  if (rc) {
    fprintf(stderr, "bench_job: add: %s: %s\n", dtx_strerror(rc),
            dtx_errdetail());
    atomic_fetch_add(&r->errors, 1);
  }
  json_decref(out);
  json_decref(payload);
  return rc;
}

static void *doctx_work(void *arg) {
  run_t *r = arg;
  dtx_job_handler_t h = {.type = TYPE, .fn = noop};
  dtx_job_work_opts_t o = {.queue = QUEUE, .handlers = &h, .nhandlers = 1,
                           .threads = r->w, .once = r->rate == 0,
                           .stop = &r->stop};
  json_t *sum = NULL;
  int rc = dtx_job_work(r->st, &o, &sum);
  if (rc) {
    fprintf(stderr, "bench_job: work: %s: %s\n", dtx_strerror(rc),
            dtx_errdetail());
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
    snprintf(uri, sizeof uri, "%s", c->store);
  } else {
    snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s-%s-%d-%d.db?sync=%s",
             c->dir, c->sync, phase, w, round, c->sync);
  }
  int rc = dtx_store_open(uri, st);
  if (!rc && c->redis)
    rc = dtx_store_drop_collection(*st, DTX_JOBS);
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
  if (doctx_open(c, w, round, rate > 0 ? "lat" : "drain", &r.st))
    return -1;
  int n = c->jobs;
  pthread_t th;
  if (rate == 0) {
    double a0 = now_us();
    for (int i = 0; i < n; i++)
      doctx_add(&r, i);
    res->add_jps = n / ((now_us() - a0) / 1e6);
    int64_t ops0 = dtx__store_calls(), rt0 = dtx__store_round_trips(),
            cmd0 = dtx__store_commands();
    r.t0 = wall_us();
    doctx_work(&r);
    res->ops = (double)(dtx__store_calls() - ops0) / n;
    res->rts = (double)(dtx__store_round_trips() - rt0) / n;
    res->cmds = (double)(dtx__store_commands() - cmd0) / n;
  } else {
    r.t0 = wall_us();
    if (pthread_create(&th, NULL, doctx_work, &r)) {
      dtx_store_close(r.st);
      return -1;
    }
    double a0 = now_us(), s0 = wall_us();
    for (int i = 0; i < n; i++) {
      sleep_until_us(s0 + i * 1e6 / rate);
      doctx_add(&r, i);
    }
    res->add_jps = n / ((now_us() - a0) / 1e6);
    doctx_wait_done(&r);
    r.stop = 1;
    pthread_join(th, NULL);
  }
  doctx_collect(&r);
  res->drain_jps = r.last > r.t0 ? n / ((r.last - r.t0) / 1e6) : 0;
  if (rate > 0) {
    res->p50 = pct(lat, n, 0.50);
    res->p99 = pct(lat, n, 0.99);
  }
  res->errors = atomic_load(&r.errors);
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

static void sq_add(run_t *r, sqlite3_stmt *ins, int i) {
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

/* Starts the W workers on a thread of their own while the caller submits. */
typedef struct pool {
  run_t *r;
  void *(*fn)(void *);
  pthread_t th;
} pool_t;

static void *pool_main(void *arg) {
  pool_t *p = arg;
  run_threads(p->r, p->fn);
  return NULL;
}

/* Waits (bounded) until the native workers completed every job. */
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
  if (rate == 0) {
    double a0 = now_us();
    for (int i = 0; i < n; i++)
      sq_add(&r, ins, i);
    res->add_jps = n / ((now_us() - a0) / 1e6);
    r.t0 = wall_us();
    run_threads(&r, sq_worker);
  } else {
    pool_t p = {.r = &r, .fn = sq_worker};
    r.t0 = wall_us();
    if (pthread_create(&p.th, NULL, pool_main, &p) == 0) {
      double a0 = now_us(), s0 = wall_us();
      for (int i = 0; i < n; i++) {
        sleep_until_us(s0 + i * 1e6 / rate);
        sq_add(&r, ins, i);
      }
      res->add_jps = n / ((now_us() - a0) / 1e6);
      native_wait_done(&r);
      pthread_join(p.th, NULL);
    } else {
      atomic_fetch_add(&r.errors, 1);
    }
  }
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
  res->drain_jps = r.last > r.t0 ? n / ((r.last - r.t0) / 1e6) : 0;
  if (rate > 0) {
    res->p50 = pct(lat, n, 0.50);
    res->p99 = pct(lat, n, 0.99);
  }
  res->ops = 2; /* the claim UPDATE and the completing UPDATE */
  res->errors = atomic_load(&r.errors);
  return 0;
}

/* ---- native Redis: a reliable list queue ---------------------------------------- */

#ifdef DTX_HAVE_REDIS
#define READY "q:{" TAG "}:ready"
#define PROCESSING "q:{" TAG "}:processing"

static void rd_add(run_t *r, redisContext *rc, int i) {
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
  if (rate == 0) {
    double a0 = now_us();
    for (int i = 0; i < n; i++)
      rd_add(&r, sub, i);
    res->add_jps = n / ((now_us() - a0) / 1e6);
    r.t0 = wall_us();
    run_threads(&r, rd_worker);
  } else {
    pool_t p = {.r = &r, .fn = rd_worker};
    r.t0 = wall_us();
    if (pthread_create(&p.th, NULL, pool_main, &p) == 0) {
      double a0 = now_us(), s0 = wall_us();
      for (int i = 0; i < n; i++) {
        sleep_until_us(s0 + i * 1e6 / rate);
        rd_add(&r, sub, i);
      }
      res->add_jps = n / ((now_us() - a0) / 1e6);
      native_wait_done(&r);
      pthread_join(p.th, NULL);
    } else {
      atomic_fetch_add(&r.errors, 1);
    }
  }
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
  res->drain_jps = r.last > r.t0 ? n / ((r.last - r.t0) / 1e6) : 0;
  if (rate > 0) {
    res->p50 = pct(lat, n, 0.50);
    res->p99 = pct(lat, n, 0.99);
  }
  res->ops = res->rts = res->cmds = 2; /* LMOVE, LREM */
  res->errors = atomic_load(&r.errors);
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

/* Runs W's rounds, doctx and native alternating (drift touches both), and
 * prints its row: drain medians, then latency at half doctx's drain rate. */
static int bench(const cfg_t *c, int w, native_fn native) {
  int n = c->jobs, rounds = c->rounds, rc = -1, derr = 0, nerr = 0;
  double *add_us = calloc((size_t)n, sizeof *add_us),
         *lat = calloc((size_t)n, sizeof *lat);
  res_t d[16], nv[16], dl[16] = {0}, nl[16] = {0};
  if (!add_us || !lat)
    goto out;
  for (int k = 0; k < rounds; k++) {
    if (run_doctx(c, w, 0, k, add_us, lat, &d[k]) < 0 ||
        native(c, w, 0, k, add_us, lat, &nv[k]) < 0)
      goto out;
    derr += d[k].errors;
    nerr += nv[k].errors;
  }
  qsort(d, (size_t)rounds, sizeof *d, cmp_drain);
  qsort(nv, (size_t)rounds, sizeof *nv, cmp_drain);
  res_t dm = d[rounds / 2], nm = nv[rounds / 2];
  double rate = dm.drain_jps / 2;
  if (rate < 10)
    rate = 10;
  for (int k = 0; k < rounds && !c->drain_only; k++) {
    if (run_doctx(c, w, rate, k, add_us, lat, &dl[k]) < 0 ||
        native(c, w, rate, k, add_us, lat, &nl[k]) < 0)
      goto out;
    derr += dl[k].errors;
    nerr += nl[k].errors;
  }
  qsort(dl, (size_t)rounds, sizeof *dl, cmp_p50);
  qsort(nl, (size_t)rounds, sizeof *nl, cmp_p50);
  res_t dlm = dl[rounds / 2], nlm = nl[rounds / 2];
  if (c->drain_only)
    memset(&dlm, 0, sizeof dlm), memset(&nlm, 0, sizeof nlm);
  double ratio = nm.drain_jps > 0 ? dm.drain_jps / nm.drain_jps : 0;
  printf("%-16s %2d | %7.0f %7.0f %5.1f %5.1f | %6.0f %7.0f %7.0f | "
         "%7.0f %7.0f | %7.0f %7.0f %5.2f | %5.2f%s\n",
         c->label, w, dm.add_jps, dm.drain_jps, dm.ops, dm.rts, rate, dlm.p50,
         dlm.p99, nm.add_jps, nm.drain_jps, nlm.p50, nlm.p99,
         nlm.p50 > 0 ? dlm.p50 / nlm.p50 : 0, ratio,
         derr || nerr ? "  (errors!)" : "");
  printf("RESULT bench=job label=%s workers=%d jobs=%d add_jps=%.0f "
         "drain_jps=%.0f ops_per_job=%.2f rt_per_job=%.2f "
         "cmds_per_job=%.2f rate=%.0f p50_us=%.0f p99_us=%.0f "
         "native_add_jps=%.0f native_drain_jps=%.0f native_p50_us=%.0f "
         "native_p99_us=%.0f ratio=%.4f doctx_failed=%d native_failed=%d\n",
         c->label, w, n, dm.add_jps, dm.drain_jps, dm.ops, dm.rts, dm.cmds,
         rate, dlm.p50, dlm.p99, nm.add_jps, nm.drain_jps, nlm.p50, nlm.p99,
         ratio, derr, nerr);
  fflush(stdout);
  rc = derr || nerr ? 1 : 0;
out:
  free(add_us);
  free(lat);
  return rc;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_job [--store URI] [--label L] [--jobs N(1000)] "
                  "[--rounds R(3)]\n"
                  "                 [--workers 1,4,8] "
                  "[--sync full|normal|both]\n"
                  "                 [--phase drain] [--side doctx]\n");
}

int main(int argc, char **argv) {
  cfg_t c = {.jobs = 1000, .rounds = 3, .nw = 3, .workers = {1, 4, 8}};
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
  int bad = c.jobs < 1 || c.jobs > 10000000 || c.rounds < 1 ||
            c.rounds > 16 || c.nw < 1;
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
  printf("jobs: %d no-op jobs per round, median of %d rounds; native: %s\n",
         c.jobs, c.rounds,
         c.redis ? "LPUSH / LMOVE ready->processing / LREM, one hash tag"
                 : "table queue, UPDATE ... RETURNING claim, UPDATE done");
  printf("label            W  | doctx                         | latency at "
         "rate          | native          |                        |\n");
  printf("                    |   add/s drain/s ops/j  rt/j |  rate/s "
         "p50(us) p99(us) |   add/s drain/s | p50(us) p99(us) p50x  | "
         "ratio\n");
  int rc = 0;
  const char *syncs[2] = {"normal", "full"};
  char label[128];
  for (int s = 0; s < 2; s++) {
    if (c.redis ? s > 0 : strcmp(sync, "both") && strcmp(sync, syncs[s]))
      continue;
    c.sync = syncs[s];
    if (c.redis)
      c.label = c.label ? c.label : "redis";
    else {
      snprintf(label, sizeof label, "sqlite-%s", c.sync);
      c.label = label;
    }
    for (int i = 0; i < c.nw; i++)
      if (bench(&c, c.workers[i], native))
        rc = 1;
  }
#ifdef DTX_HAVE_REDIS
  if (c.redis)
    dtx__rd_uri_free(&c.uri);
#endif
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    rc = 1;
  return rc;
}
