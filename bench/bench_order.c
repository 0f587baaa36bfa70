/* bench_order.c -- order confirmations through doctx (dtx_order_confirm:
 * claim, the credit transfer order:ID with its two-phase steps, confirmed,
 * success) against the native baseline: the same confirmations, each as
 * one SQLite transaction doing the same updates (BEGIN IMMEDIATE; the
 * order pending -> success; the user's balance + amount; the settlement's
 * balance - amount; COMMIT) on plain tables with the same synchronous
 * setting, one after another on one thread.
 *
 * A second doctx row confirms the same number of orders K at a time with
 * dtx_order_confirm_many (--batch K, default 16; one thread as well):
 * each call's steps go to the store as one bulk write per round.  Its
 * latencies are per call (K orders).  The native baseline is the same run's.
 *
 * usage: bench_order [--orders N] [--users U] [--rounds R]
 *                    [--sync full|normal] [--store URI] [--batch K]
 * With --store the doctx side runs on that store (its order, account and
 * transfer collections are emptied) and the native side still on SQLite.
 * Prints confirmations/s (median of the rounds), p50/p99 latency and the
 * ratio; checks that every user was credited exactly once per order. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"

typedef struct cfg {
  int orders, users, rounds, batch;
  const char *sync, *store;
  char dir[256];
} cfg_t;

static int die(const char *what, int rc) {
  fprintf(stderr, "bench_order: %s: %s: %s\n", what, dtx_strerror(rc),
          dtx_errdetail());
  exit(1);
}

/* One doctx round: fresh collections, U users, N pending orders; the
 * confirmations timed, one at a time (batch 0) or batch per
 * dtx_order_confirm_many call.  Returns confirmations/s; lat gets each
 * confirmation's (or call's) us, *nlat how many. */
static double doctx_round(const cfg_t *c, int round, int batch, double *lat,
                          int *nlat) {
  char uri[512];
  dtx_store_t *st = NULL;
  int rc;
  if (c->store)
    snprintf(uri, sizeof uri, "%s", c->store);
  else
    snprintf(uri, sizeof uri, "sqlite:%s/doctx%d.db?sync=%s", c->dir, round,
             c->sync);
  if ((rc = dtx_store_open(uri, &st)))
    die("open", rc);
  /* Emptied once, before this process set the store up (the kit sets a
   * store up once per process); later rounds use ids of their own. */
  const char *colls[] = {"orders", "accounts", "transfers", "openings"};
  for (int i = 0; round == 0 && i < 4; i++)
    dtx_store_drop_collection_ex(st, colls[i], &(dtx_drop_opts_t){1});
  char settle[32];
  snprintf(settle, sizeof settle, "r%dsettlement", round);
  for (int u = 0; u < c->users; u++) {
    char id[32];
    snprintf(id, sizeof id, "r%du%d", round, u);
    if ((rc = dtx_account_create(st, id, NULL, NULL)))
      die("account create", rc);
  }
  for (int i = 0; i < c->orders; i++) {
    char trade[32], acct[32];
    json_t *o = NULL;
    snprintf(trade, sizeof trade, "r%dt%d", round, i);
    snprintf(acct, sizeof acct, "r%du%d", round, i % c->users);
    dtx_order_req_t req = {.trade_id = trade, .account = acct,
                           .amount = 1 + i % 97, .settlement = settle};
    if ((rc = dtx_order_create(st, &req, &o)))
      die("order create", rc);
    json_decref(o);
  }
  char (*trades)[32] = malloc(sizeof *trades * (size_t)c->orders);
  const char **ids = malloc(sizeof *ids * (size_t)c->orders);
  dtx_order_result_t *res = malloc(sizeof *res * (size_t)(batch ? batch : 1));
  if (!trades || !ids || !res)
    die("malloc", DTX_ENOMEM);
  for (int i = 0; i < c->orders; i++) {
    snprintf(trades[i], sizeof trades[i], "r%dt%d", round, i);
    ids[i] = trades[i];
  }
  *nlat = 0;
  double t0 = wall_us();
  for (int i = 0; i < c->orders && !batch; i++) {
    json_t *o = NULL;
    double s = now_us();
    if ((rc = dtx_order_confirm(st, ids[i], NULL, &o)))
      die("order confirm", rc);
    lat[(*nlat)++] = now_us() - s;
    json_decref(o);
  }
  for (int i = 0; i < c->orders && batch; i += batch) {
    size_t k = (size_t)(c->orders - i < batch ? c->orders - i : batch);
    double s = now_us();
    if ((rc = dtx_order_confirm_many(st, ids + i, k, NULL, res)))
      die("order confirm_many", rc);
    lat[(*nlat)++] = now_us() - s;
    dtx_order_results_clear(res, k);
  }
  double secs = (wall_us() - t0) / 1e6;
  int64_t want = 0, got = 0;
  for (int i = 0; i < c->orders; i++)
    want += 1 + i % 97;
  if ((rc = bench_sum(st, "accounts", "balance", &got)) || got != 0)
    die("conservation (sum of balances != 0)", rc ? rc : DTX_EAUDIT);
  json_t *set = NULL;
  if ((rc = dtx_account_get(st, settle, &set)) ||
      json_integer_value(json_object_get(set, "balance")) != -want)
    die("settlement balance", rc ? rc : DTX_EAUDIT);
  json_decref(set);
  dtx_store_close(st);
  free(trades);
  free(ids);
  free(res);
  return c->orders / secs;
}

static void exec_sql(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "bench_order: sqlite: %s: %s\n", sql, err);
    exit(1);
  }
}

static double native_round(const cfg_t *c, int round, double *lat) {
  char path[512], sql[128];
  sqlite3 *db;
  sqlite3_stmt *ord, *user, *settle;
  snprintf(path, sizeof path, "%s/native%d.db", c->dir, round);
  unlink(path);
  if (sqlite3_open(path, &db) != SQLITE_OK)
    exit(1);
  exec_sql(db, "PRAGMA journal_mode=WAL");
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", c->sync);
  exec_sql(db, sql);
  exec_sql(db, "CREATE TABLE accounts(id TEXT PRIMARY KEY, balance INTEGER)");
  exec_sql(db, "CREATE TABLE orders(id TEXT PRIMARY KEY, account TEXT, "
               "amount INTEGER, state TEXT)");
  exec_sql(db, "BEGIN");
  exec_sql(db, "INSERT INTO accounts VALUES('settlement', 0)");
  for (int u = 0; u < c->users; u++) {
    snprintf(sql, sizeof sql, "INSERT INTO accounts VALUES('u%d', 0)", u);
    exec_sql(db, sql);
  }
  for (int i = 0; i < c->orders; i++) {
    snprintf(sql, sizeof sql,
             "INSERT INTO orders VALUES('t%d', 'u%d', %d, 'pending')", i,
             i % c->users, 1 + i % 97);
    exec_sql(db, sql);
  }
  exec_sql(db, "COMMIT");
  sqlite3_prepare_v2(db, "UPDATE orders SET state='success' WHERE id=?1 AND "
                     "state='pending' RETURNING account, amount", -1, &ord,
                     NULL);
  sqlite3_prepare_v2(db, "UPDATE accounts SET balance=balance+?2 WHERE id=?1",
                     -1, &user, NULL);
  sqlite3_prepare_v2(db, "UPDATE accounts SET balance=balance-?1 WHERE "
                     "id='settlement'", -1, &settle, NULL);
  double t0 = wall_us();
  for (int i = 0; i < c->orders; i++) {
    char trade[32], acct[32] = "";
    int64_t amount = 0;
    snprintf(trade, sizeof trade, "t%d", i);
    double s = now_us();
    exec_sql(db, "BEGIN IMMEDIATE");
    sqlite3_bind_text(ord, 1, trade, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(ord) == SQLITE_ROW) {
      snprintf(acct, sizeof acct, "%s", sqlite3_column_text(ord, 0));
      amount = sqlite3_column_int64(ord, 1);
    }
    while (sqlite3_step(ord) == SQLITE_ROW)
      ;
    sqlite3_reset(ord);
    if (amount > 0) {
      sqlite3_bind_text(user, 1, acct, -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(user, 2, amount);
      sqlite3_step(user);
      sqlite3_reset(user);
      sqlite3_bind_int64(settle, 1, amount);
      sqlite3_step(settle);
      sqlite3_reset(settle);
    }
    exec_sql(db, "COMMIT");
    lat[i] = now_us() - s;
  }
  double secs = (wall_us() - t0) / 1e6;
  sqlite3_finalize(ord);
  sqlite3_finalize(user);
  sqlite3_finalize(settle);
  sqlite3_close(db);
  unlink(path);
  return c->orders / secs;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  cfg_t c = {.orders = 300, .users = 10, .rounds = 3, .batch = 16,
             .sync = "full"};
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--orders") == 0)
      c.orders = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--users") == 0)
      c.users = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--rounds") == 0)
      c.rounds = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--sync") == 0)
      c.sync = argv[i + 1];
    else if (strcmp(argv[i], "--store") == 0)
      c.store = argv[i + 1];
    else if (strcmp(argv[i], "--batch") == 0)
      c.batch = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "bench_order: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (c.orders < 1 || c.users < 1 || c.rounds < 1 || c.rounds > 64 ||
      c.batch < 1 || c.batch > 10000)
    return 2;
  snprintf(c.dir, sizeof c.dir, "%s/bench_order.XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(c.dir))
    return 1;
  double *lat = malloc(sizeof *lat * (size_t)c.orders);
  double *nlat = malloc(sizeof *nlat * (size_t)c.orders);
  double *blat = malloc(sizeof *blat * (size_t)c.orders);
  double d[64], b[64], n[64], dp50 = 0, dp99 = 0, bp50 = 0, bp99 = 0,
         np50 = 0, np99 = 0;
  int nd = 0, nb = 0;
  bench_begin("bench_order", c.store ? "redis" : NULL, argc, argv);
  for (int r = 0; r < c.rounds; r++) {
    bench_phase("order confirm, sync=%s, round %d of %d", c.sync, r + 1,
                c.rounds);
    d[r] = doctx_round(&c, r, 0, lat, &nd);
    b[r] = doctx_round(&c, 64 + r, c.batch, blat, &nb);
    n[r] = native_round(&c, r, nlat);
    dp50 = pct(lat, nd, 0.50);
    dp99 = pct(lat, nd, 0.99);
    bp50 = pct(blat, nb, 0.50);
    bp99 = pct(blat, nb, 0.99);
    np50 = pct(nlat, c.orders, 0.50);
    np99 = pct(nlat, c.orders, 0.99);
  }
  double dm = median(d, c.rounds), bm = median(b, c.rounds),
         nm = median(n, c.rounds);
  printf("order confirm (%d orders, %d users, sync=%s, %s): doctx %.0f/s "
         "(p50 %.0f us, p99 %.0f us), native one SQLite transaction %.0f/s "
         "(p50 %.0f us, p99 %.0f us), ratio doctx/native %.3f\n",
         c.orders, c.users, c.sync, c.store ? c.store : "sqlite", dm, dp50,
         dp99, nm, np50, np99, dm / nm);
  printf("order confirm_many (%d orders, %d per call, sync=%s, %s): doctx "
         "%.0f/s (per call p50 %.0f us, p99 %.0f us), native one SQLite "
         "transaction per order %.0f/s, ratio doctx/native %.3f\n",
         c.orders, c.batch, c.sync, c.store ? c.store : "sqlite", bm, bp50,
         bp99, nm, bm / nm);
  bench_row(&(bench_row_t){
      .metric = "order confirm", .backend = c.store ? "redis" : "sqlite",
      .sync = c.sync, .workload = "one thread", .unit = "orders/s",
      .native = "one SQLite transaction: order and balance updates",
      .workers = 1, .rounds = c.rounds,
      .doctx = {dm, dp50, dp99}, .nat = {nm, np50, np99},
      .extra = json_pack("{s:i,s:i}", "orders", c.orders, "users", c.users)});
  bench_row(&(bench_row_t){
      .metric = "order confirm_many", .backend = c.store ? "redis" : "sqlite",
      .sync = c.sync, .workload = "one thread, batches", .unit = "orders/s",
      .native = "one SQLite transaction per order: order and balance "
                "updates",
      .workers = 1, .rounds = c.rounds,
      .doctx = {bm, bp50, bp99}, .nat = {nm, np50, np99},
      .extra = json_pack("{s:i,s:i,s:i,s:s}", "orders", c.orders, "users",
                         c.users, "batch", c.batch, "latency", "per call")});
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", c.dir);
  if (system(cmd) != 0)
    fprintf(stderr, "bench_order: could not remove %s\n", c.dir);
  free(lat);
  free(blat);
  free(nlat);
  return bench_end(0);
}
