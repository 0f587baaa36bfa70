/* bench_aggregate.c -- doctx's aggregation against SQLite's own JSON SQL on
 * the same data.
 *
 * Loads N ledger-shaped documents (default 100,000)
 *   {_id, ts, state: "VALID", changes: [{account, value, seqId},
 *                                       {account, value, seqId}]}
 * (accounts drawn from 1,000, values +-1..10,000) into a fresh SQLite store
 * in a temporary directory, then times, in alternating rounds:
 *   doctx   dtx_store_aggregate with
 *           [{$match: {state: "VALID"}}, {$unwind: "$changes"},
 *            {$group: {_id: "$changes.account",
 *                      total: {$sum: "$changes.value"}}}]
 *   native  the same question asked of the same table in SQL:
 *           SELECT json_extract(c.value, '$.account'),
 *                  sum(json_extract(c.value, '$.value'))
 *             FROM ledger, json_each(body, '$.changes') AS c
 *            WHERE json_extract(body, '$.state') = 'VALID' GROUP BY 1
 *           on a table of the same documents as JSON text, in a file of
 *           its own beside the store (doctx keeps BSON, which SQLite's
 *           JSON functions do not read: docs/engine.md).
 * Both answers are checked to agree (every account's total).  Reported:
 * the median time of each side and the ratio native/doctx (1.0 would be
 * native speed; docs/benchmarks.md states the target).
 *
 * Usage: bench_aggregate [--docs N] [--rounds R] [--dir PATH] */
#include "bench_common.h"
#include "doctx.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NACCOUNTS 1000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_aggregate: %s: %s (%s)\n", what, dtx_errname(rc),
          dtx_errdetail());
  exit(1);
}

/* Loads the documents into doctx and, as JSON text, into the native
 * side's table through ins (one transaction on its connection). */
static void load(dtx_store_t *st, sqlite3 *ndb, sqlite3_stmt *ins, int ndocs,
                 int64_t *expect) {
  const int batch = 1000;
  sqlite3_exec(ndb, "BEGIN", NULL, NULL, NULL);
  for (int base = 0; base < ndocs; base += batch) {
    json_t *docs = json_array();
    for (int i = base; i < base + batch && i < ndocs; i++) {
      int a = (int)(rnd() % NACCOUNTS), b = (int)(rnd() % NACCOUNTS);
      int64_t v = (int64_t)(rnd() % 10000) + 1;
      char an[16], bn[16];
      snprintf(an, sizeof an, "acct%04d", a);
      snprintf(bn, sizeof bn, "acct%04d", b);
      expect[a] -= v;
      expect[b] += v;
      json_array_append_new(
          docs, json_pack("{sisIsss[{sssIsi}{sssIsi}]}", "_id", i, "ts",
                          (json_int_t)1700000000000LL + i, "state", "VALID",
                          "changes", "account", an, "value", (json_int_t)-v,
                          "seqId", 2 * i, "account", bn, "value",
                          (json_int_t)v, "seqId", 2 * i + 1));
    }
    int rc = dtx_store_insert_many(st, "ledger", docs, NULL, NULL);
    size_t k;
    json_t *d;
    json_array_foreach(docs, k, d) {
      char *text = json_dumps(d, JSON_COMPACT | JSON_PRESERVE_ORDER);
      if (!text || sqlite3_bind_text(ins, 1, text, -1, free) != SQLITE_OK ||
          sqlite3_step(ins) != SQLITE_DONE || sqlite3_reset(ins) != SQLITE_OK) {
        fprintf(stderr, "bench_aggregate: native load: %s\n",
                sqlite3_errmsg(ndb));
        exit(1);
      }
    }
    json_decref(docs);
    if (rc)
      die("insert", rc);
  }
  sqlite3_exec(ndb, "COMMIT", NULL, NULL, NULL);
}

static const char PIPELINE[] =
    "[{\"$match\":{\"state\":\"VALID\"}},{\"$unwind\":\"$changes\"},"
    "{\"$group\":{\"_id\":\"$changes.account\","
    "\"total\":{\"$sum\":\"$changes.value\"}}}]";

static const char NATIVE[] =
    "SELECT json_extract(c.value, '$.account'),"
    "       sum(json_extract(c.value, '$.value'))"
    "  FROM ledger, json_each(body, '$.changes') AS c"
    " WHERE json_extract(body, '$.state') = 'VALID' GROUP BY 1";

/* Checks one side's totals against what was loaded. */
static int check(const char *side, const int64_t *got, const int64_t *expect,
                 int ngroups) {
  int bad = ngroups != NACCOUNTS;
  for (int i = 0; i < NACCOUNTS; i++)
    bad |= got[i] != expect[i];
  if (bad)
    fprintf(stderr, "bench_aggregate: %s totals disagree with the data\n",
            side);
  return bad;
}

static double run_doctx(dtx_store_t *st, const json_t *pl,
                        const int64_t *expect) {
  int64_t got[NACCOUNTS] = {0};
  json_t *out = NULL;
  double t0 = now_ms();
  int rc = dtx_store_aggregate(st, "ledger", pl, NULL, &out);
  double t = now_ms() - t0;
  if (rc)
    die("aggregate", rc);
  for (size_t i = 0; i < json_array_size(out); i++) {
    json_t *g = json_array_get(out, i);
    const char *a = json_string_value(json_object_get(g, "_id"));
    if (a && strlen(a) == 8)
      got[atoi(a + 4)] = json_integer_value(json_object_get(g, "total"));
  }
  int n = (int)json_array_size(out);
  json_decref(out);
  if (check("doctx", got, expect, n))
    exit(1);
  return t;
}

static double run_native(sqlite3 *db, sqlite3_stmt *q,
                         const int64_t *expect) {
  int64_t got[NACCOUNTS] = {0};
  int n = 0, src;
  double t0 = now_ms();
  while ((src = sqlite3_step(q)) == SQLITE_ROW) {
    const char *a = (const char *)sqlite3_column_text(q, 0);
    if (a && strlen(a) == 8)
      got[atoi(a + 4)] = sqlite3_column_int64(q, 1);
    n++;
  }
  double t = now_ms() - t0;
  if (src != SQLITE_DONE) {
    fprintf(stderr, "bench_aggregate: native query: %s\n", sqlite3_errmsg(db));
    exit(1);
  }
  sqlite3_reset(q);
  if (check("native", got, expect, n))
    exit(1);
  return t;
}

int main(int argc, char **argv) {
  int ndocs = bench_scaled(100000), rounds = 5;
  const char *dir = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--docs") && i + 1 < argc)
      ndocs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      dir = argv[++i];
    else {
      fprintf(stderr, "usage: bench_aggregate [--docs N] [--rounds R] "
                      "[--dir PATH]\n");
      return 2;
    }
  }
  if (ndocs < 1 || rounds < 1 || rounds > 50)
    return 2;
  char tmpl[] = "/tmp/doctx-bench-agg.XXXXXX";
  if (!dir && !(dir = mkdtemp(tmpl))) {
    perror("mkdtemp");
    return 1;
  }
  char path[4096], npath[4096], uri[4200];
  snprintf(path, sizeof path, "%s/agg.db", dir);
  snprintf(npath, sizeof npath, "%s/native.db", dir);
  snprintf(uri, sizeof uri, "sqlite:%s?sync=normal", path);
  unlink(path);
  unlink(npath);
  dtx_store_t *st;
  bench_begin("bench_aggregate", NULL, argc, argv);
  int rc = dtx_store_open(uri, &st);
  if (rc)
    die("open", rc);
  bench_phase("loading %d documents", ndocs);
  int64_t *expect = calloc(NACCOUNTS, sizeof *expect);
  sqlite3 *db;
  sqlite3_stmt *ins, *q;
  if (sqlite3_open(npath, &db) != SQLITE_OK ||
      sqlite3_exec(db, "PRAGMA synchronous=NORMAL; PRAGMA journal_mode=WAL;"
                       "CREATE TABLE ledger(seq INTEGER PRIMARY KEY, body TEXT)",
                   NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, "INSERT INTO ledger(body) VALUES (?)", -1, &ins,
                         NULL) != SQLITE_OK) {
    fprintf(stderr, "bench_aggregate: native: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  double t0 = now_ms();
  load(st, db, ins, ndocs, expect);
  sqlite3_finalize(ins);
  printf("loaded %d ledger documents (2 changes each, %d accounts) in "
         "%.0f ms\n", ndocs, NACCOUNTS, now_ms() - t0);

  if (sqlite3_prepare_v2(db, NATIVE, -1, &q, NULL) != SQLITE_OK) {
    fprintf(stderr, "bench_aggregate: native: %s\n", sqlite3_errmsg(db));
    return 1;
  }
  json_error_t e;
  json_t *pl = json_loads(PIPELINE, 0, &e);
  double *td = calloc((size_t)rounds, sizeof *td);
  double *tn = calloc((size_t)rounds, sizeof *tn);
  /* One warm-up of each, then alternating rounds. */
  run_doctx(st, pl, expect);
  run_native(db, q, expect);
  for (int r = 0; r < rounds; r++) {
    bench_phase("round %d/%d", r + 1, rounds);
    td[r] = run_doctx(st, pl, expect);
    tn[r] = run_native(db, q, expect);
  }
  double md = bench_median(td, rounds), mn = bench_median(tn, rounds);
  bench_row(&(bench_row_t){
      .metric = "aggregate", .backend = "sqlite", .sync = "normal",
      .workload = "$match/$unwind/$group", .unit = "docs/s",
      .native = "json_each + GROUP BY", .workers = 1, .rounds = rounds,
      .doctx = {ndocs / md * 1e3, -1, -1}, .nat = {ndocs / mn * 1e3, -1, -1},
      .extra = json_pack("{s:i,s:f,s:f}", "docs", ndocs, "doctx_ms", md,
                         "native_ms", mn)});
  printf("%-8s %10s %14s\n", "side", "median ms", "docs/s");
  printf("%-8s %10.1f %14.0f\n", "doctx", md, ndocs / md * 1e3);
  printf("%-8s %10.1f %14.0f\n", "native", mn, ndocs / mn * 1e3);
  printf("ratio native/doctx = %.2f (target >= 0.3); both agree on all %d "
         "account totals\n", mn / md, NACCOUNTS);
  printf("RESULT bench=aggregate docs=%d doctx_ms=%.1f native_ms=%.1f "
         "ratio=%.3f\n", ndocs, md, mn, mn / md);
  sqlite3_finalize(q);
  sqlite3_close(db);
  json_decref(pl);
  dtx_store_close(st);
  free(td);
  free(tn);
  free(expect);
  const char *files[] = {path, npath};
  for (int f = 0; f < 2; f++) {
    char side[4200];
    unlink(files[f]);
    snprintf(side, sizeof side, "%s-wal", files[f]);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", files[f]);
    unlink(side);
  }
  if (dir == tmpl)
    rmdir(dir);
  return bench_end(0);
}
