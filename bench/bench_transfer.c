/* bench_transfer.c -- two-phase transfers through doctx against the native
 * baseline: the same transfers, each as one SQLite transaction
 * (BEGIN IMMEDIATE; UPDATE; UPDATE; COMMIT) on a plain table with the same
 * synchronous setting, run by the same number of worker threads.
 *
 * usage: bench_transfer [--accounts N] [--transfers M] [--workers W]
 *                       [--hot PCT] [--rounds R] [--sync full|normal|both]
 *                       [--store URI] [--batch B] [--worker-batch K]
 * Without --hot it runs uniform and 90%-hot workloads.  Each round also
 * runs the batched row: the same transfers, each worker taking B at a time
 * into one dtx_transfer_execute_many (default 16; 0: no batched row).
 * With --worker-batch K (default 16; 0: none) also the async+worker rows:
 * the same transfers submitted --async, then timed while `worker --once`
 * (W threads) drains them claiming 1, then K, at a time.  With --store the
 * doctx side runs on that store (its collections are emptied) and the
 * native side still on SQLite.  Prints transfers/s (median of the rounds),
 * p50/p99 latency, store operations per transfer and the ratio. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"
#include "store/store.h"

typedef struct cfg {
  int accounts, transfers, workers, rounds, batch;
  int worker_rows, wbatch; /* the async+worker rows: --worker-batch K */
  const char *sync, *store, *dir;
} cfg_t;

typedef struct run {
  const cfg_t *c;
  const pair_t *pairs;
  double *lat; /* per transfer, microseconds */
  int next;    /* atomic index into pairs */
  int errors;
  dtx_store_t *st;
  const char *dbpath; /* native */
} run_t;

static void *doctx_worker(void *arg) {
  run_t *r = arg;
  for (;;) {
    int i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED);
    if (i >= r->c->transfers)
      break;
    if (!bench_transfer_one(r->st, &r->pairs[i], &r->lat[i]))
      __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

/* The batched row: each worker takes the next B transfers as one batch. */
static void *doctx_batch_worker(void *arg) {
  run_t *r = arg;
  int b = r->c->batch;
  for (;;) {
    int i = __atomic_fetch_add(&r->next, b, __ATOMIC_RELAXED);
    if (i >= r->c->transfers)
      break;
    int k = r->c->transfers - i < b ? r->c->transfers - i : b;
    int bad = bench_transfer_many(r->st, &r->pairs[i], k, &r->lat[i]);
    if (bad)
      __atomic_add_fetch(&r->errors, bad, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void *native_worker(void *arg) {
  run_t *r = arg;
  sqlite3 *db;
  sqlite3_stmt *begin, *debit, *credit, *commit;
  char sql[64];
  if (sqlite3_open(r->dbpath, &db) != SQLITE_OK)
    return NULL;
  sqlite3_busy_timeout(db, 60000);
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", r->c->sync);
  sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL);
  sqlite3_prepare_v2(db,
                     "UPDATE acct SET balance=balance-?1 WHERE id=?2 AND "
                     "balance>=?1",
                     -1, &debit, NULL);
  sqlite3_prepare_v2(db, "UPDATE acct SET balance=balance+?1 WHERE id=?2", -1,
                     &credit, NULL);
  sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL);
  for (;;) {
    int i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED);
    if (i >= r->c->transfers)
      break;
    double t0 = now_us();
    int ok;
    do {
      ok = sqlite3_step(begin) == SQLITE_DONE;
      sqlite3_reset(begin);
    } while (!ok);
    sqlite3_bind_int64(debit, 1, r->pairs[i].amount);
    sqlite3_bind_int(debit, 2, r->pairs[i].from);
    ok = sqlite3_step(debit) == SQLITE_DONE && sqlite3_changes(db) == 1;
    sqlite3_reset(debit);
    if (ok) {
      sqlite3_bind_int64(credit, 1, r->pairs[i].amount);
      sqlite3_bind_int(credit, 2, r->pairs[i].to);
      ok = sqlite3_step(credit) == SQLITE_DONE;
      sqlite3_reset(credit);
    }
    if (sqlite3_step(commit) != SQLITE_DONE)
      ok = 0;
    sqlite3_reset(commit);
    r->lat[i] = now_us() - t0;
    if (!ok)
      __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
  }
  sqlite3_finalize(begin);
  sqlite3_finalize(debit);
  sqlite3_finalize(credit);
  sqlite3_finalize(commit);
  sqlite3_close(db);
  return NULL;
}

typedef struct result {
  double tps, p50, p99, ops;
  int errors;
} result_t;

static result_t run_threads(run_t *r, void *(*fn)(void *)) {
  pthread_t th[256];
  result_t res = {0};
  int64_t ops0 = dtx__store_calls();
  double t0 = now_us();
  for (int i = 0; i < r->c->workers; i++)
    pthread_create(&th[i], NULL, fn, r);
  for (int i = 0; i < r->c->workers; i++)
    pthread_join(th[i], NULL);
  double el = now_us() - t0;
  res.tps = r->c->transfers / (el / 1e6);
  res.ops = (double)(dtx__store_calls() - ops0) / r->c->transfers;
  res.p50 = pct(r->lat, r->c->transfers, 0.50);
  res.p99 = pct(r->lat, r->c->transfers, 0.99);
  res.errors = r->errors;
  return res;
}

static result_t run_doctx(const cfg_t *c, const pair_t *pairs, double *lat,
                          int round, int batched) {
  char uri[512];
  result_t bad = {0};
  if (c->store)
    snprintf(uri, sizeof uri, "%s", c->store);
  else
    snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s-%d%s.db?sync=%s", c->dir,
             c->sync, round, batched ? "b" : "", c->sync);
  run_t r = {.c = c, .pairs = pairs, .lat = lat};
  if (dtx_store_open(uri, &r.st)) {
    fprintf(stderr, "open %s: %s\n", uri, dtx_errdetail());
    return bad;
  }
  dtx_store_drop_collection_ex(r.st, DTX_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(r.st, DTX_OPENINGS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(r.st, DTX_TRANSFERS, &(dtx_drop_opts_t){1});
  for (int i = 0; i < c->accounts; i++) {
    char id[32];
    snprintf(id, sizeof id, "a%d", i);
    dtx_account_create(r.st, id, &(dtx_account_opts_t){.balance = 1000000000},
                       NULL);
  }
  result_t res = run_threads(&r, batched ? doctx_batch_worker : doctx_worker);
  json_t *rep = NULL;
  if (dtx_audit(r.st, DTX_AUDIT_SETTLED, &rep) != 0) {
    fprintf(stderr, "audit after benchmark: %s\n", dtx_errdetail());
    res.errors++;
  }
  json_decref(rep);
  dtx_store_close(r.st);
  return res;
}

/* The async+worker row: all transfers submitted (--async, not timed),
 * then `doctx worker --once` with W threads and a claim batch of k times
 * draining them (timed: transfers/s of the drain; no per-transfer
 * latency). */
static result_t run_worker(const cfg_t *c, const pair_t *pairs, int round,
                           int k) {
  char uri[512];
  result_t res = {.p50 = -1, .p99 = -1};
  dtx_store_t *st = NULL;
  if (c->store)
    snprintf(uri, sizeof uri, "%s", c->store);
  else
    snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s-%d-w%d.db?sync=%s", c->dir,
             c->sync, round, k, c->sync);
  if (dtx_store_open(uri, &st)) {
    fprintf(stderr, "open %s: %s\n", uri, dtx_errdetail());
    res.errors = c->transfers;
    return res;
  }
  dtx_store_drop_collection_ex(st, DTX_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_OPENINGS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_TRANSFERS, &(dtx_drop_opts_t){1});
  for (int i = 0; i < c->accounts; i++) {
    char id[32];
    snprintf(id, sizeof id, "a%d", i);
    dtx_account_create(st, id, &(dtx_account_opts_t){.balance = 1000000000},
                       NULL);
  }
  for (int i = 0; i < c->transfers; i++) {
    char from[32], to[32];
    json_t *tx = NULL;
    snprintf(from, sizeof from, "a%d", pairs[i].from);
    snprintf(to, sizeof to, "a%d", pairs[i].to);
    dtx_transfer_req_t req = {.from = from, .to = to,
                              .amount = pairs[i].amount};
    if (dtx_transfer_submit(st, &req, &tx))
      res.errors++;
    json_decref(tx);
  }
  dtx_worker_opts_t wo = {.threads = c->workers, .once = 1, .batch = k};
  json_t *sum = NULL;
  int64_t ops0 = dtx__store_calls();
  double t0 = now_us();
  if (dtx_worker_run(st, &wo, &sum))
    fprintf(stderr, "worker: %s\n", dtx_errdetail());
  double el = now_us() - t0;
  res.tps = c->transfers / (el / 1e6);
  res.ops = (double)(dtx__store_calls() - ops0) / c->transfers;
  json_t *ran = json_object_get(
      json_object_get(json_object_get(sum, "patterns"), "transfer"), "ran");
  res.errors +=
      c->transfers - (int)json_integer_value(json_object_get(ran, "succeeded"));
  json_decref(sum);
  json_t *rep = NULL;
  if (dtx_audit(st, DTX_AUDIT_SETTLED, &rep) != 0) {
    fprintf(stderr, "audit after benchmark: %s\n", dtx_errdetail());
    res.errors++;
  }
  json_decref(rep);
  dtx_store_close(st);
  return res;
}

static result_t run_native(const cfg_t *c, const pair_t *pairs, double *lat,
                           int round) {
  char path[512], sql[128];
  sqlite3 *db;
  snprintf(path, sizeof path, "%s/native-%s-%d.db", c->dir, c->sync, round);
  unlink(path);
  sqlite3_open(path, &db);
  sqlite3_exec(db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL);
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", c->sync);
  sqlite3_exec(db, sql, NULL, NULL, NULL);
  sqlite3_exec(db,
               "CREATE TABLE acct(id INTEGER PRIMARY KEY, balance INTEGER "
               "NOT NULL); BEGIN",
               NULL, NULL, NULL);
  for (int i = 0; i < c->accounts; i++) {
    snprintf(sql, sizeof sql, "INSERT INTO acct VALUES(%d, 1000000000)", i);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
  }
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  run_t r = {.c = c, .pairs = pairs, .lat = lat, .dbpath = path};
  result_t res = run_threads(&r, native_worker);
  sqlite3_close(db);
  res.ops = 4; /* BEGIN, UPDATE, UPDATE, COMMIT */
  return res;
}

static int cmp_res(const void *a, const void *b) {
  return cmp_double(&((const result_t *)a)->tps, &((const result_t *)b)->tps);
}

static void bench(cfg_t *c, int hot) {
  pair_t *pairs = malloc(sizeof *pairs * (size_t)c->transfers);
  double *lat = malloc(sizeof *lat * (size_t)c->transfers);
  result_t d[16], n[16], b[16], w1[16], wk[16];
  bench_pairs(pairs, c->transfers, c->accounts, hot);
  for (int round = 0; round < c->rounds; round++) {
    bench_phase("sync=%s hot=%d%% round %d/%d doctx", c->sync, hot, round + 1,
                c->rounds);
    d[round] = run_doctx(c, pairs, lat, round, 0);
    if (c->batch > 0) {
      bench_phase("sync=%s hot=%d%% round %d/%d doctx batch %d", c->sync, hot,
                  round + 1, c->rounds, c->batch);
      b[round] = run_doctx(c, pairs, lat, round, 1);
    }
    if (c->worker_rows) {
      bench_phase("sync=%s hot=%d%% round %d/%d worker batch 1", c->sync,
                  hot, round + 1, c->rounds);
      w1[round] = run_worker(c, pairs, round, 1);
      bench_phase("sync=%s hot=%d%% round %d/%d worker batch %d", c->sync,
                  hot, round + 1, c->rounds, c->wbatch);
      wk[round] = run_worker(c, pairs, round, c->wbatch);
    }
    bench_phase("sync=%s hot=%d%% round %d/%d native", c->sync, hot,
                round + 1, c->rounds);
    n[round] = run_native(c, pairs, lat, round);
  }
  qsort(d, (size_t)c->rounds, sizeof *d, cmp_res);
  qsort(n, (size_t)c->rounds, sizeof *n, cmp_res);
  if (c->batch > 0)
    qsort(b, (size_t)c->rounds, sizeof *b, cmp_res);
  result_t dm = d[c->rounds / 2], nm = n[c->rounds / 2];
  result_t bm = c->batch > 0 ? b[c->rounds / 2] : (result_t){0};
  bench_row(&(bench_row_t){
      .metric = "transfer", .backend = c->store ? "store" : "sqlite",
      .sync = c->sync, .workload = hot ? "hot90" : "uniform",
      .unit = "transfers/s",
      .native = "BEGIN IMMEDIATE; UPDATE x2; COMMIT", .workers = c->workers,
      .rounds = c->rounds, .doctx = {dm.tps, dm.p50, dm.p99},
      .nat = {nm.tps, nm.p50, nm.p99},
      .extra = json_pack("{s:i,s:i,s:f,s:i,s:i}", "hot_pct", hot,
                         "transfers", c->transfers, "ops_per_transfer",
                         dm.ops, "doctx_failed", dm.errors, "native_failed",
                         nm.errors)});
  printf("%-6s %4d%%  | %9.0f %8.0f %8.0f %6.1f | %9.0f %8.0f %8.0f | %6.2f%s\n",
         c->sync, hot, dm.tps, dm.p50, dm.p99, dm.ops, nm.tps,
         nm.p50, nm.p99, nm.tps > 0 ? dm.tps / nm.tps : 0,
         dm.errors || nm.errors ? "  (errors!)" : "");
  if (c->batch > 0) {
    bench_row(&(bench_row_t){
        .metric = "transfer_batched", .backend = c->store ? "store" : "sqlite",
        .sync = c->sync, .workload = hot ? "hot90" : "uniform",
        .unit = "transfers/s",
        .native = "BEGIN IMMEDIATE; UPDATE x2; COMMIT", .workers = c->workers,
        .rounds = c->rounds, .doctx = {bm.tps, bm.p50, bm.p99},
        .nat = {nm.tps, nm.p50, nm.p99},
        .extra = json_pack("{s:i,s:i,s:i,s:f,s:i,s:i}", "batch", c->batch,
                           "hot_pct", hot, "transfers", c->transfers,
                           "ops_per_transfer", bm.ops, "doctx_failed",
                           bm.errors, "native_failed", nm.errors)});
    printf("%-6s %4d%% B=%-3d | %9.0f %8.0f %8.0f %6.1f | (batched; latency "
           "per batch) | %6.2f%s\n",
           c->sync, hot, c->batch, bm.tps, bm.p50, bm.p99, bm.ops,
           nm.tps > 0 ? bm.tps / nm.tps : 0, bm.errors ? "  (errors!)" : "");
  }
  if (c->worker_rows) {
    qsort(w1, (size_t)c->rounds, sizeof *w1, cmp_res);
    qsort(wk, (size_t)c->rounds, sizeof *wk, cmp_res);
    for (int j = 0; j < 2; j++) {
      result_t wm = (j ? wk : w1)[c->rounds / 2];
      int k = j ? c->wbatch : 1;
      bench_row(&(bench_row_t){
          .metric = "transfer_async_worker",
          .backend = c->store ? "store" : "sqlite", .sync = c->sync,
          .workload = hot ? "hot90" : "uniform", .unit = "transfers/s",
          .native = "BEGIN IMMEDIATE; UPDATE x2; COMMIT",
          .workers = c->workers, .rounds = c->rounds,
          .doctx = {wm.tps, -1, -1}, .nat = {nm.tps, nm.p50, nm.p99},
          .extra = json_pack("{s:i,s:i,s:i,s:f,s:i}", "worker_batch", k,
                             "hot_pct", hot, "transfers", c->transfers,
                             "ops_per_transfer", wm.ops, "doctx_failed",
                             wm.errors)});
      printf("%-6s %4d%% W=%-3d | %9.0f %8s %8s %6.1f | (submit --async, then "
             "worker --batch %d drains) | %6.2f%s\n",
             c->sync, hot, k, wm.tps, "-", "-", wm.ops, k,
             nm.tps > 0 ? wm.tps / nm.tps : 0,
             wm.errors ? "  (errors!)" : "");
    }
  }
  fflush(stdout);
  free(pairs);
  free(lat);
}

int main(int argc, char **argv) {
  cfg_t c = {.accounts = 1000, .transfers = 0, .workers = 16, .rounds = 3,
             .batch = 16, .wbatch = 16};
  const char *sync = "both";
  int hot = -1;
  char dir[] = "/tmp/dtx-bench-XXXXXX";
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "%s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "--accounts"))
      c.accounts = atoi(v);
    else if (!strcmp(a, "--transfers"))
      c.transfers = atoi(v);
    else if (!strcmp(a, "--workers"))
      c.workers = atoi(v);
    else if (!strcmp(a, "--hot"))
      hot = atoi(v);
    else if (!strcmp(a, "--rounds"))
      c.rounds = atoi(v);
    else if (!strcmp(a, "--sync"))
      sync = v;
    else if (!strcmp(a, "--store"))
      c.store = v;
    else if (!strcmp(a, "--batch"))
      c.batch = atoi(v);
    else if (!strcmp(a, "--worker-batch"))
      c.wbatch = atoi(v);
    else {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    }
  }
  if (c.accounts < 2 || c.workers < 1 || c.workers > 256 || c.rounds < 1 ||
      c.rounds > 16 || c.transfers < 0 || hot > 100 || c.batch < 0 ||
      c.batch > 256 || c.wbatch < 0 || c.wbatch > 256) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  c.dir = dir;
  c.worker_rows = c.wbatch > 0;
  bench_begin("bench_transfer", NULL, argc, argv);
  printf("transfers: %d accounts, %d workers, median of %d rounds\n",
         c.accounts, c.workers, c.rounds);
  printf("sync   hot    | doctx t/s  p50(us)  p99(us) ops/t | native t/s  "
         "p50(us)  p99(us) | ratio\n");
  const char *syncs[2] = {"full", "normal"};
  for (int s = 0; s < 2; s++) {
    if (strcmp(sync, "both") && strcmp(sync, syncs[s]))
      continue;
    c.sync = syncs[s];
    int m = c.transfers;
    if (m == 0)
      c.transfers = bench_scaled(s == 0 ? 2000 : 5000);
    if (hot >= 0) {
      bench(&c, hot);
    } else {
      bench(&c, 0);
      bench(&c, 90);
    }
    c.transfers = m;
  }
  return bench_end(bench_rmdir(dir));
}
