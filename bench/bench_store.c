/* bench_store.c -- the cost of doctx's primitive against plain SQLite.
 *
 * Loads 10,000 documents {_id: i, n: 0} into a fresh store in a temporary
 * directory and times random dtx_store_find_one_and_update({_id: r},
 * {$inc: {n: 1}}) calls through the public API.  The baseline is what an
 * application would write by hand: a table (id INTEGER PRIMARY KEY, n
 * INTEGER) with the same rows, WAL mode and the same synchronous setting,
 * and a prepared UPDATE t SET n=n+1 WHERE id=? in autocommit (one
 * transaction per update).  Both run at sync=normal and sync=full, in
 * alternating rounds so drift in the machine (page cache, other load)
 * hits both sides alike.  Reported: the median of the rounds' ops/s, the
 * p50 and p99 latency over all rounds, and the ratio doctx/raw.
 *
 * Usage: bench_store [--ops N] [--rounds R] [--dir PATH]
 *   --ops N     updates per round (default 20000 at normal, 2000 at full)
 *   --rounds R  rounds per side (default 5)
 *   --dir PATH  where to create the databases (default a new /tmp dir) */
#include "bench_common.h"
#include "doctx.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NDOCS 10000

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static int64_t rnd_id(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (int64_t)(rng_state % NDOCS);
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_store: %s: %s (%s)\n", what, dtx_errname(rc),
          dtx_errdetail());
  exit(1);
}

static void die_sql(sqlite3 *db, const char *what) {
  fprintf(stderr, "bench_store: %s: %s\n", what, sqlite3_errmsg(db));
  exit(1);
}

/* ---- the two sides ----------------------------------------------------------- */

static dtx_store_t *doctx_setup(const char *dir, const char *sync) {
  char uri[4200];
  snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s.db?sync=%s", dir, sync, sync);
  dtx_store_t *st;
  int rc = dtx_store_open(uri, &st);
  if (rc < 0)
    die("open", rc);
  json_t *docs = json_array();
  for (int i = 0; i < NDOCS; i++)
    json_array_append_new(docs, json_pack("{s:i,s:i}", "_id", i, "n", 0));
  size_t n = 0;
  if ((rc = dtx_store_insert_many(st, "bench", docs, &n, NULL)) < 0)
    die("insert_many", rc);
  json_decref(docs);
  return st;
}

static void doctx_round(dtx_store_t *st, int ops, int64_t *lat) {
  for (int i = 0; i < ops; i++) {
    json_t *filter = json_pack("{s:I}", "_id", (json_int_t)rnd_id());
    json_t *update = json_pack("{s:{s:i}}", "$inc", "n", 1);
    json_t *out = NULL;
    int64_t t0 = now_ns();
    int rc = dtx_store_find_one_and_update(st, "bench", filter, update, NULL,
                                           &out);
    lat[i] = now_ns() - t0;
    if (rc < 0)
      die("find_one_and_update", rc);
    json_decref(out);
    json_decref(filter);
    json_decref(update);
  }
}

static int64_t doctx_total(dtx_store_t *st) {
  int64_t sum;
  int rc = bench_sum(st, "bench", "n", &sum);
  if (rc < 0)
    die("find", rc);
  return sum;
}

typedef struct raw {
  sqlite3 *db;
  sqlite3_stmt *upd;
} raw_t;

static void raw_setup(raw_t *r, const char *dir, const char *sync) {
  char path[4200], sql[100];
  snprintf(path, sizeof path, "%s/raw-%s.db", dir, sync);
  if (sqlite3_open(path, &r->db) != SQLITE_OK)
    die_sql(r->db, "raw open");
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", sync);
  if (sqlite3_exec(r->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) ||
      sqlite3_exec(r->db, sql, NULL, NULL, NULL) ||
      sqlite3_exec(r->db,
                   "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER);"
                   "BEGIN",
                   NULL, NULL, NULL))
    die_sql(r->db, "raw setup");
  sqlite3_stmt *ins;
  if (sqlite3_prepare_v2(r->db, "INSERT INTO t VALUES(?, 0)", -1, &ins,
                         NULL))
    die_sql(r->db, "raw prepare");
  for (int i = 0; i < NDOCS; i++) {
    sqlite3_bind_int(ins, 1, i);
    if (sqlite3_step(ins) != SQLITE_DONE)
      die_sql(r->db, "raw insert");
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  if (sqlite3_exec(r->db, "COMMIT", NULL, NULL, NULL) ||
      sqlite3_prepare_v2(r->db, "UPDATE t SET n=n+1 WHERE id=?", -1, &r->upd,
                         NULL))
    die_sql(r->db, "raw prepare");
}

static void raw_round(raw_t *r, int ops, int64_t *lat) {
  for (int i = 0; i < ops; i++) {
    int64_t t0 = now_ns();
    sqlite3_bind_int64(r->upd, 1, rnd_id());
    if (sqlite3_step(r->upd) != SQLITE_DONE)
      die_sql(r->db, "raw update");
    sqlite3_reset(r->upd);
    lat[i] = now_ns() - t0;
  }
}

static int64_t raw_total(raw_t *r) {
  sqlite3_stmt *st;
  int64_t sum = 0;
  if (sqlite3_prepare_v2(r->db, "SELECT sum(n) FROM t", -1, &st, NULL) ||
      sqlite3_step(st) != SQLITE_ROW)
    die_sql(r->db, "raw sum");
  sum = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return sum;
}

/* ---- statistics ------------------------------------------------------------------ */

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct result {
  double ops_s;          /* median over rounds */
  double p50_us, p99_us; /* over every sample of every round */
} result_t;

static result_t summarise(int64_t *lat, int total, double *round_ops,
                          int rounds) {
  result_t r;
  qsort(lat, (size_t)total, sizeof *lat, cmp_i64);
  qsort(round_ops, (size_t)rounds, sizeof *round_ops, cmp_dbl);
  r.ops_s = rounds % 2 ? round_ops[rounds / 2]
                       : (round_ops[rounds / 2 - 1] + round_ops[rounds / 2]) / 2;
  r.p50_us = (double)lat[total / 2] / 1e3;
  r.p99_us = (double)lat[(int)((int64_t)total * 99 / 100)] / 1e3;
  return r;
}

static void bench_sync(const char *dir, const char *sync, int ops,
                       int rounds) {
  dtx_store_t *st = doctx_setup(dir, sync);
  raw_t raw;
  raw_setup(&raw, dir, sync);
  int64_t *dl = malloc(sizeof *dl * (size_t)ops * (size_t)rounds);
  int64_t *rl = malloc(sizeof *rl * (size_t)ops * (size_t)rounds);
  double *dops = malloc(sizeof *dops * (size_t)rounds);
  double *rops = malloc(sizeof *rops * (size_t)rounds);
  if (!dl || !rl || !dops || !rops) {
    fprintf(stderr, "bench_store: out of memory\n");
    exit(1);
  }
  /* A short warm-up on each side fills the page caches. */
  bench_phase("sync=%s warm-up", sync);
  doctx_round(st, ops / 10 + 1, dl);
  raw_round(&raw, ops / 10 + 1, rl);
  int64_t warm = ops / 10 + 1;
  for (int r = 0; r < rounds; r++) {
    for (int side = 0; side < 2; side++) {
      int doctx_side = (side + r) % 2 == 0; /* alternate who goes first */
      bench_phase("sync=%s round %d/%d %s", sync, r + 1, rounds,
                  doctx_side ? "doctx" : "native");
      int64_t t0 = now_ns();
      if (doctx_side)
        doctx_round(st, ops, dl + (size_t)r * (size_t)ops);
      else
        raw_round(&raw, ops, rl + (size_t)r * (size_t)ops);
      double secs = (double)(now_ns() - t0) / 1e9;
      (doctx_side ? dops : rops)[r] = ops / secs;
    }
  }
  int64_t want = warm + (int64_t)ops * rounds;
  int64_t dsum = doctx_total(st), rsum = raw_total(&raw);
  if (dsum != want || rsum != want) {
    fprintf(stderr, "bench_store: lost updates: doctx %lld raw %lld want %lld\n",
            (long long)dsum, (long long)rsum, (long long)want);
    exit(1);
  }
  result_t d = summarise(dl, ops * rounds, dops, rounds);
  result_t w = summarise(rl, ops * rounds, rops, rounds);
  bench_row(&(bench_row_t){
      .metric = "find_one_and_update", .backend = "sqlite", .sync = sync,
      .workload = "$inc", .unit = "ops/s",
      .native = "UPDATE t SET n=n+1 WHERE id=? (autocommit)", .workers = 1,
      .rounds = rounds, .doctx = {d.ops_s, d.p50_us, d.p99_us},
      .nat = {w.ops_s, w.p50_us, w.p99_us},
      .extra = json_pack("{s:i}", "ops", ops)});
  printf("%-7s %-6s %8d %12.0f %10.1f %10.1f\n", sync, "doctx", ops, d.ops_s,
         d.p50_us, d.p99_us);
  printf("%-7s %-6s %8d %12.0f %10.1f %10.1f\n", sync, "raw", ops, w.ops_s,
         w.p50_us, w.p99_us);
  printf("%-7s ratio doctx/raw = %.2f (target >= %.1f)\n\n", sync,
         d.ops_s / w.ops_s, strcmp(sync, "full") == 0 ? 0.9 : 0.6);
  fflush(stdout);
  free(dl);
  free(rl);
  free(dops);
  free(rops);
  sqlite3_finalize(raw.upd);
  sqlite3_close(raw.db);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  int ops = 0, rounds = 5;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
      ops = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
      dir = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--ops N] [--rounds R] [--dir PATH]\n",
              argv[0]);
      return 2;
    }
  }
  if (ops < 0 || rounds < 1) {
    fprintf(stderr, "bench_store: --ops must be >= 1 and --rounds >= 1\n");
    return 2;
  }
  char tmpl[] = "/tmp/dtxbench.XXXXXX";
  int made = 0;
  if (!dir) {
    if (!(dir = mkdtemp(tmpl))) {
      perror("mkdtemp");
      return 1;
    }
    made = 1;
  }
  bench_begin("bench_store", NULL, argc, argv);
  printf("find_one_and_update {_id: r} {$inc: {n: 1}} over %d docs, "
         "%d rounds\n\n",
         NDOCS, rounds);
  printf("%-7s %-6s %8s %12s %10s %10s\n", "sync", "side", "ops", "ops/s",
         "p50 us", "p99 us");
  bench_sync(dir, "normal", ops ? ops : bench_scaled(20000), rounds);
  bench_sync(dir, "full", ops ? ops : bench_scaled(2000), rounds);
  if (made) {
    static const char *const files[] = {
        "doctx-normal.db", "doctx-normal.db-wal", "doctx-normal.db-shm",
        "raw-normal.db",   "raw-normal.db-wal",   "raw-normal.db-shm",
        "doctx-full.db",   "doctx-full.db-wal",   "doctx-full.db-shm",
        "raw-full.db",     "raw-full.db-wal",     "raw-full.db-shm"};
    char path[4200];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, files[i]);
      unlink(path);
    }
    rmdir(dir);
  }
  return bench_end(0);
}
