/* bench_lock.c -- lease locks with fencing tokens: cycles of
 * dtx_lock_acquire + one fenced write (dtx_store_update with fence_name /
 * fence_token) + dtx_lock_release, against the native way on the same
 * kind of store, in the same run:
 *   Redis   the single-instance lock a Redis user writes: SET lock nonce
 *           NX PX ttl; SET resource value; EVALSHA of the Lua
 *           compare-and-delete (GET == nonce -> DEL), each waiting for its
 *           reply as a lock user must, every key under one hash tag (one
 *           node).  No fencing token: a holder paused past its lease
 *           writes anyway.
 *   SQLite  one plain transaction doing the same updates (BEGIN
 *           IMMEDIATE; take the lock row if free or lapsed, token + 1;
 *           write the resource row recording the token; free the lock
 *           row; COMMIT), one connection per thread, WAL, the same
 *           synchronous setting.
 * W worker threads, each cycling on a lock of its own and its own
 * resource document (uncontended: what one cycle costs).  Then, in the
 * same run, lock hold cycles (dtx_lock_hold_start, the fenced write,
 * dtx_lock_hold_stop) against the same calls by hand (acquire, write,
 * release), rounds interleaved: what the keeper costs.  Reported:
 * cycles/s (median of the rounds), p50/p99 of one cycle, the native
 * figures and the ratio.  Every round checks that every cycle's write
 * landed (doctx, SQLite: the resources' counters add up; Redis: every
 * SET answered OK).
 *
 * usage: bench_lock [--store redis://...] [--label L] [--backend B]
 *                   [--cycles M] [--workers W(8)] [--rounds R(3)]
 *                   [--sync full|normal|both]
 * M defaults to 2000 (normal, Redis) and 600 (full), times BENCH_SCALE.
 * Exits 1 when a cycle failed. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"
#ifdef DTX_HAVE_REDIS
#include "bench_native.h"
#endif

#define TAG "lock" /* native Redis keys: nat:{lock}:lN, nat:{lock}:rN */
#define COLL "lockbench"
#define TTL_MS 10000

typedef struct cfg {
  int cycles, workers, rounds;
  const char *store, *label, *backend, *sync, *dir;
  int redis;
#ifdef DTX_HAVE_REDIS
  rd_uri_t uri;
  char host[256];
  int port;
  char sha[64]; /* the compare-and-delete script */
#endif
} cfg_t;

typedef struct side {
  const cfg_t *c;
  dtx_store_t *st;
  sqlite3 *db[256];
  sqlite3_stmt *beg[256], *acq[256], *tok[256], *wr[256], *rel[256],
      *com[256];
#ifdef DTX_HAVE_REDIS
  redisContext *rc[256];
#endif
} side_t;

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_lock: %s: %s (%s)\n", what, dtx_errname(rc),
          dtx_errdetail());
  exit(1);
}

/* ---- doctx ---------------------------------------------------------------------- */

static int doctx_cycle(void *ctx, int w, int i) {
  side_t *s = ctx;
  char name[32];
  json_t *lk = NULL;
  (void)i;
  snprintf(name, sizeof name, "bench.l%d", w);
  int rc = dtx_lock_acquire(s->st, name,
                            &(dtx_lock_opts_t){.ttl_ms = TTL_MS}, &lk);
  if (rc < 0) {
    fprintf(stderr, "bench_lock: acquire %s: %s (%s)\n", name,
            dtx_errname(rc), dtx_errdetail());
    return 0;
  }
  int64_t token = json_integer_value(json_object_get(lk, "token"));
  json_decref(lk);
  json_t *f = json_pack("{s:i}", "_id", w);
  json_t *u = json_pack("{s:{s:i}}", "$inc", "n", 1);
  dtx_update_result_t res;
  rc = dtx_store_update(s->st, COLL, f, u,
                        &(dtx_update_opts_t){.fence_name = name,
                                             .fence_token = token},
                        &res);
  json_decref(f);
  json_decref(u);
  int ok = rc == 0 && res.modified == 1;
  if (!ok)
    fprintf(stderr, "bench_lock: fenced write of %s token %lld: %s (%s)\n",
            name, (long long)token, dtx_errname(rc), dtx_errdetail());
  if ((rc = dtx_lock_release(s->st, name, token, NULL)) < 0) {
    fprintf(stderr, "bench_lock: release %s: %s (%s)\n", name,
            dtx_errname(rc), dtx_errdetail());
    ok = 0;
  }
  return ok;
}

/* A cycle of dtx_lock_hold_*: start (the acquire, and the keeper's
 * thread), the same fenced write, stop (the keeper joined, the release).
 * Against doctx_cycle, the same three store calls by hand: what the hold
 * itself costs.  (A hold that lasts past ttl/3 also renews: the same
 * dtx_lock_renew a user makes by hand, on the keeper's thread.) */
static int hold_cycle(void *ctx, int w, int i) {
  side_t *s = ctx;
  char name[32];
  dtx_lock_hold_t *h = NULL;
  (void)i;
  snprintf(name, sizeof name, "bench.l%d", w);
  int rc = dtx_lock_hold_start(s->st, name,
                               &(dtx_lock_opts_t){.ttl_ms = TTL_MS}, NULL,
                               NULL, &h);
  if (rc < 0) {
    fprintf(stderr, "bench_lock: hold %s: %s (%s)\n", name, dtx_errname(rc),
            dtx_errdetail());
    return 0;
  }
  json_t *f = json_pack("{s:i}", "_id", w);
  json_t *u = json_pack("{s:{s:i}}", "$inc", "n", 1);
  dtx_update_result_t res;
  rc = dtx_store_update(s->st, COLL, f, u,
                        &(dtx_update_opts_t){.fence_name = name,
                                             .fence_token =
                                                 dtx_lock_hold_token(h)},
                        &res);
  json_decref(f);
  json_decref(u);
  int ok = rc == 0 && res.modified == 1;
  if (!ok)
    fprintf(stderr, "bench_lock: fenced write of held %s: %s (%s)\n", name,
            dtx_errname(rc), dtx_errdetail());
  if ((rc = dtx_lock_hold_stop(h, NULL)) < 0) {
    fprintf(stderr, "bench_lock: stop %s: %s (%s)\n", name, dtx_errname(rc),
            dtx_errdetail());
    ok = 0;
  }
  return ok;
}

/* Cycles of op on a fresh store (SQLite: a file per round and kind). */
static bench_side_t doctx_cycles(const cfg_t *c, int round, int *errors,
                                 bench_op_fn op, const char *kind) {
  char uri[600];
  side_t s = {.c = c};
  if (c->redis)
    snprintf(uri, sizeof uri, "%s", c->store);
  else
    snprintf(uri, sizeof uri, "sqlite:%s/%s-%s-%d.db?sync=%s", c->dir, kind,
             c->sync, round, c->sync);
  int rc = dtx_store_open(uri, &s.st);
  if (rc < 0)
    die("open", rc);
  if ((rc = dtx_store_drop_collection_ex(s.st, COLL, &(dtx_drop_opts_t){1})) < 0)
    die("emptying " COLL, rc);
  json_t *docs = json_array();
  for (int w = 0; w < c->workers; w++)
    json_array_append_new(docs, json_pack("{s:i,s:i}", "_id", w, "n", 0));
  if ((rc = dtx_store_insert_many(s.st, COLL, docs, NULL, NULL)) < 0)
    die("insert", rc);
  json_decref(docs);
  /* Locks are never deleted, so their tokens carry over between rounds
   * on Redis: nothing to reset. */
  bench_side_t r = bench_pool_run(c->workers, c->cycles, op, &s, errors);
  int64_t sum = 0;
  if ((rc = bench_sum(s.st, COLL, "n", &sum)) < 0 || sum != c->cycles) {
    fprintf(stderr, "bench_lock: %lld fenced writes landed, not %d\n",
            (long long)sum, c->cycles);
    (*errors)++;
  }
  dtx_store_drop_collection_ex(s.st, COLL, &(dtx_drop_opts_t){1});
  dtx_store_close(s.st);
  return r;
}

/* ---- native SQLite ------------------------------------------------------------------- */

static sqlite3 *sq_open(const cfg_t *c, const char *path) {
  return bench_sq_open(path, c->sync, "bench_lock");
}

static void sq_prep(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
  bench_sq_prep(db, sql, st, "bench_lock");
}

static int sq_cycle(void *ctx, int w, int i) {
  side_t *s = ctx;
  sqlite3 *db = s->db[w];
  int64_t now = (int64_t)(wall_us() / 1000);
  (void)i;
  while (!bench_sq_done(s->beg[w]))
    ; /* busy past the timeout: try again */
  sqlite3_bind_int(s->acq[w], 1, w);
  sqlite3_bind_int64(s->acq[w], 2, now + TTL_MS);
  sqlite3_bind_int64(s->acq[w], 3, now);
  int ok = bench_sq_done(s->acq[w]) && sqlite3_changes(db) == 1;
  int64_t token = 0;
  sqlite3_bind_int(s->tok[w], 1, w);
  if (ok && sqlite3_step(s->tok[w]) == SQLITE_ROW)
    token = sqlite3_column_int64(s->tok[w], 0);
  sqlite3_reset(s->tok[w]);
  sqlite3_bind_int64(s->wr[w], 1, token);
  sqlite3_bind_int(s->wr[w], 2, w);
  ok = ok && token > 0 && bench_sq_done(s->wr[w]) && sqlite3_changes(db) == 1;
  sqlite3_bind_int(s->rel[w], 1, w);
  sqlite3_bind_int64(s->rel[w], 2, token);
  ok = ok && bench_sq_done(s->rel[w]) && sqlite3_changes(db) == 1;
  return bench_sq_done(s->com[w]) && ok;
}

static bench_side_t sq_cycles(const cfg_t *c, int round, int *errors) {
  char path[600], sql[400];
  snprintf(path, sizeof path, "%s/native-%s-%d.db", c->dir, c->sync, round);
  unlink(path);
  sqlite3 *db = sq_open(c, path);
  snprintf(sql, sizeof sql,
           "PRAGMA journal_mode=WAL;"
           "CREATE TABLE lk(id INTEGER PRIMARY KEY, held INTEGER NOT NULL, "
           "token INTEGER NOT NULL, expires INTEGER NOT NULL);"
           "CREATE TABLE res(id INTEGER PRIMARY KEY, n INTEGER NOT NULL, "
           "fence INTEGER NOT NULL);"
           "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM k "
           "WHERE i < %d) INSERT INTO lk SELECT i, 0, 0, 0 FROM k;"
           "INSERT INTO res SELECT id, 0, 0 FROM lk",
           c->workers - 1);
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
    fprintf(stderr, "bench_lock: native schema: %s\n", sqlite3_errmsg(db));
    exit(1);
  }
  side_t s = {.c = c};
  for (int w = 0; w < c->workers; w++) {
    s.db[w] = sq_open(c, path);
    sq_prep(s.db[w], "BEGIN IMMEDIATE", &s.beg[w]);
    sq_prep(s.db[w],
            "UPDATE lk SET held=1, token=token+1, expires=?2 WHERE id=?1 AND "
            "(held=0 OR expires<=?3)",
            &s.acq[w]);
    sq_prep(s.db[w], "SELECT token FROM lk WHERE id=?1", &s.tok[w]);
    sq_prep(s.db[w],
            "UPDATE res SET n=n+1, fence=?1 WHERE id=?2 AND fence<=?1",
            &s.wr[w]);
    sq_prep(s.db[w], "UPDATE lk SET held=0 WHERE id=?1 AND token=?2",
            &s.rel[w]);
    sq_prep(s.db[w], "COMMIT", &s.com[w]);
  }
  bench_side_t r = bench_pool_run(c->workers, c->cycles, sq_cycle, &s, errors);
  for (int w = 0; w < c->workers; w++) {
    sqlite3_stmt *all[6] = {s.beg[w], s.acq[w], s.tok[w],
                            s.wr[w],  s.rel[w], s.com[w]};
    for (int k = 0; k < 6; k++)
      sqlite3_finalize(all[k]);
    sqlite3_close(s.db[w]);
  }
  sqlite3_stmt *q;
  sq_prep(db, "SELECT sum(n) FROM res", &q);
  if (sqlite3_step(q) != SQLITE_ROW || sqlite3_column_int(q, 0) != c->cycles) {
    fprintf(stderr, "bench_lock: native: writes lost\n");
    (*errors)++;
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  return r;
}

/* ---- native Redis ------------------------------------------------------------------ */

#ifdef DTX_HAVE_REDIS
static const char CAD_LUA[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

static redisContext *rd_conn(const cfg_t *c) {
  return native_connect_or_die(&c->uri, c->host, c->port, "bench_lock");
}

static int rd_cycle(void *ctx, int w, int i) {
  side_t *s = ctx;
  redisContext *rc = s->rc[w];
  char nonce[48];
  snprintf(nonce, sizeof nonce, "%d.%d.%lld", w, i, (long long)wall_us());
  redisReply *r = redisCommand(rc, "SET nat:{" TAG "}:l%d %s NX PX %d", w,
                               nonce, TTL_MS);
  int ok = r && r->type == REDIS_REPLY_STATUS;
  freeReplyObject(r);
  if (!ok)
    return 0;
  r = redisCommand(rc, "SET nat:{" TAG "}:r%d %d", w, i);
  ok = r && r->type == REDIS_REPLY_STATUS;
  freeReplyObject(r);
  r = redisCommand(rc, "EVALSHA %s 1 nat:{" TAG "}:l%d %s", s->c->sha, w,
                   nonce);
  ok = ok && r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  freeReplyObject(r);
  return ok;
}

static bench_side_t rd_cycles(const cfg_t *c, int round, int *errors) {
  side_t s = {.c = c};
  (void)round;
  redisContext *rc = rd_conn(c);
  for (int w = 0; w < c->workers; w++)
    freeReplyObject(redisCommand(rc, "DEL nat:{" TAG "}:l%d nat:{" TAG
                                     "}:r%d",
                                 w, w));
  for (int w = 0; w < c->workers; w++)
    s.rc[w] = rd_conn(c);
  bench_side_t r = bench_pool_run(c->workers, c->cycles, rd_cycle, &s, errors);
  for (int w = 0; w < c->workers; w++)
    redisFree(s.rc[w]);
  redisFree(rc);
  return r;
}
#endif

/* ---- the table --------------------------------------------------------------------- */

static int bench(const cfg_t *c) {
  bench_side_t d[16], n[16];
  int derr = 0, nerr = 0, e;
  for (int k = 0; k < c->rounds; k++) {
    bench_phase("%s sync=%s round %d/%d doctx", c->label, c->sync, k + 1,
                c->rounds);
    d[k] = doctx_cycles(c, k, &e, doctx_cycle, "doctx");
    derr += e;
    bench_phase("%s sync=%s round %d/%d native", c->label, c->sync, k + 1,
                c->rounds);
#ifdef DTX_HAVE_REDIS
    n[k] = c->redis ? rd_cycles(c, k, &e) : sq_cycles(c, k, &e);
#else
    n[k] = sq_cycles(c, k, &e);
#endif
    nerr += e;
  }
  bench_side_t dm = bench_median_side(d, c->rounds),
               nm = bench_median_side(n, c->rounds);
  bench_row(&(bench_row_t){
      .metric = "lock cycle", .backend = c->backend, .sync = c->sync,
      .workload = "acquire/write/release", .unit = "cycles/s",
      .native = c->redis ? "SET NX PX; SET; Lua compare-and-delete"
                         : "one transaction: lock row, write, unlock",
      .workers = c->workers, .rounds = c->rounds, .doctx = dm, .nat = nm,
      .extra = json_pack("{s:i,s:i,s:i}", "cycles", c->cycles, "doctx_failed",
                         derr, "native_failed", nerr)});
  printf("%-16s %-6s | %9.0f %8.0f %8.0f | %9.0f %8.0f %8.0f | %6.3f%s\n",
         c->label, c->sync, dm.ops_s, dm.p50_us, dm.p99_us, nm.ops_s,
         nm.p50_us, nm.p99_us, nm.ops_s > 0 ? dm.ops_s / nm.ops_s : 0,
         derr || nerr ? "  (errors!)" : "");
  fflush(stdout);
  return derr || nerr ? 1 : 0;
}

/* lock hold cycles against the same calls by hand, rounds interleaved. */
static int bench_hold(const cfg_t *c) {
  bench_side_t d[16], n[16];
  int derr = 0, nerr = 0, e;
  /* Which side goes first alternates: the second of a round found the
   * store (Redis: the server) warmer. */
  for (int k = 0; k < c->rounds; k++)
    for (int side = 0; side < 2; side++) {
      int hold = (side + k) % 2 == 0;
      bench_phase("%s sync=%s round %d/%d %s", c->label, c->sync, k + 1,
                  c->rounds, hold ? "lock hold" : "by hand");
      if (hold) {
        d[k] = doctx_cycles(c, k, &e, hold_cycle, "hold");
        derr += e;
      } else {
        n[k] = doctx_cycles(c, k, &e, doctx_cycle, "hand");
        nerr += e;
      }
    }
  bench_side_t dm = bench_median_side(d, c->rounds),
               nm = bench_median_side(n, c->rounds);
  bench_row(&(bench_row_t){
      .metric = "lock hold cycle", .backend = c->backend, .sync = c->sync,
      .workload = "hold start/write/stop", .unit = "cycles/s",
      .native = "dtx_lock_acquire, write, dtx_lock_release by hand",
      .workers = c->workers, .rounds = c->rounds, .doctx = dm, .nat = nm,
      .extra = json_pack("{s:i,s:i,s:i}", "cycles", c->cycles, "hold_failed",
                         derr, "hand_failed", nerr)});
  printf("%-16s %-6s | %9.0f %8.0f %8.0f | %9.0f %8.0f %8.0f | %6.3f%s"
         "  (lock hold vs by hand)\n",
         c->label, c->sync, dm.ops_s, dm.p50_us, dm.p99_us, nm.ops_s,
         nm.p50_us, nm.p99_us, nm.ops_s > 0 ? dm.ops_s / nm.ops_s : 0,
         derr || nerr ? "  (errors!)" : "");
  fflush(stdout);
  return derr || nerr ? 1 : 0;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_lock [--store redis://...] [--label L] "
                  "[--backend B] [--cycles M]\n"
                  "                  [--workers W] [--rounds R] "
                  "[--sync full|normal|both]\n");
}

int main(int argc, char **argv) {
  cfg_t c = {.workers = 8, .rounds = 3};
  const char *sync = "both";
  int cycles = 0;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      usage();
      return 2;
    }
    if (!strcmp(a, "--store"))
      c.store = v;
    else if (!strcmp(a, "--label"))
      c.label = v;
    else if (!strcmp(a, "--backend"))
      c.backend = v;
    else if (!strcmp(a, "--cycles"))
      cycles = atoi(v);
    else if (!strcmp(a, "--workers"))
      c.workers = atoi(v);
    else if (!strcmp(a, "--rounds"))
      c.rounds = atoi(v);
    else if (!strcmp(a, "--sync"))
      sync = v;
    else {
      usage();
      return 2;
    }
  }
  if (c.workers < 1 || c.workers > 256 || c.rounds < 1 || c.rounds > 16 ||
      cycles < 0 ||
      (strcmp(sync, "both") && strcmp(sync, "full") &&
       strcmp(sync, "normal"))) {
    usage();
    return 2;
  }
  c.redis = c.store != NULL;
  if (c.redis) {
#ifdef DTX_HAVE_REDIS
    int rc = native_target(c.store, TAG, &c.uri, c.host, &c.port, "bench_lock");
    if (rc)
      return rc;
    redisContext *rc0 = rd_conn(&c);
    redisReply *r = redisCommand(rc0, "SCRIPT LOAD %s", CAD_LUA);
    if (!r || r->type != REDIS_REPLY_STRING) {
      fprintf(stderr, "bench_lock: SCRIPT LOAD failed\n");
      return 1;
    }
    snprintf(c.sha, sizeof c.sha, "%s", r->str);
    freeReplyObject(r);
    redisFree(rc0);
#else
    fprintf(stderr, "bench_lock: doctx was built without Redis\n");
    return 2;
#endif
  }
  c.label = c.label ? c.label : c.redis ? "redis" : "sqlite";
  c.backend = c.backend ? c.backend : c.redis ? c.label : "sqlite";
  char dir[] = "/tmp/dtx-bench-lock-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  c.dir = dir;
  bench_begin("bench_lock", c.redis ? c.label : NULL, argc, argv);
  printf("locks: acquire + fenced write + release, %d workers each on its "
         "own lock, median of %d rounds\n",
         c.workers, c.rounds);
  printf("%-16s %-6s | %9s %8s %8s | %9s %8s %8s | %6s\n", "label", "sync",
         "doctx/s", "p50(us)", "p99(us)", "native/s", "p50(us)", "p99(us)",
         "ratio");
  int rc = 0;
  const char *syncs[2] = {"normal", "full"};
  for (int s = 0; s < 2; s++) {
    if (c.redis ? s > 0 : strcmp(sync, "both") && strcmp(sync, syncs[s]))
      continue;
    c.sync = c.redis ? "none" : syncs[s];
    c.cycles = cycles ? cycles : bench_scaled(s == 1 ? 600 : 2000);
    rc |= bench(&c);
    rc |= bench_hold(&c);
  }
#ifdef DTX_HAVE_REDIS
  if (c.redis)
    dtx__rd_uri_free(&c.uri);
#endif
  if (bench_rmdir(dir))
    rc = 1;
  return bench_end(rc);
}
