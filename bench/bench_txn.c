/* bench_txn.c -- multi-document transactions (dtx_txn_*, under
 * dtx_txn_run, snapshot isolation) against the raw single-document
 * operations they are built on (docs/transactions.md), in the same run,
 * on the same kind of store:
 *   write2  a transfer as a transaction: two dtx_txn_update, the payer's
 *           conditioned on its balance ({_id, balance: {$gte: amt}}),
 *           the payee's by _id; against two raw conditional updates
 *           (dtx_store_update with the same filters and $inc), what a
 *           user without transactions writes;
 *   write1  a transaction updating one document ($inc by _id: the 1PC
 *           path) against one raw dtx_store_update;
 *   readN   a read-only snapshot transaction of N dtx_txn_find_one by
 *           _id (N = 2: the pair just transferred; N = 10: the pair and
 *           8 more) against N raw dtx_store_find of the same _ids;
 *   hot90   write2 with 90 % of the payers one hot account, both sides;
 *           the transactions' abort rate is (attempts - commits) /
 *           attempts, an attempt being one call of dtx_txn_run's
 *           function (a conflict at a read, a prewrite or the commit
 *           restarts the whole transaction, with the kit's backoff).
 * W worker threads (8), ACCOUNTS accounts (1,000) of balance 10^9.  Each
 * side of a round gets a fresh store (SQLite: a file, sync=normal;
 * Redis: its collection dropped and loaded again) and runs the phases in
 * that order, so the reads find documents the transfers wrote (on the
 * transaction side they carry _txn, with the previous version).  The
 * transaction side's collection holds the transactions' guard rule from
 * a warm-up commit on; the raw side's collection has no rules.  Rounds
 * alternate which side goes first.  Reported per phase: ops/s (the
 * median round), p50/p99 of one operation, store calls per operation
 * (and on Redis round trips), both sides, and the ratio.  Every round
 * checks that the balances add up on both sides.  On Redis the records
 * of the run's transactions stay in txn_records (doctx recover collects
 * them after its retention); the clock is never reset (T6).
 *
 * usage: bench_txn [--store redis://...] [--label L] [--backend B]
 *                  [--ops M] [--hot-ops H] [--workers W(8)]
 *                  [--rounds R(3)] [--accounts N(1000)]
 * M defaults to 1000 x BENCH_SCALE, H to 400 x BENCH_SCALE.  Exits 1 when
 * an operation failed or the balances do not add up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"
#include "store/store.h"

#define COLL "txnbench"
#define BALANCE 1000000000LL
#define MAXREADS 10

enum { PH_WRITE2, PH_READ2, PH_READ10, PH_WRITE1, PH_HOT, NPH };

static const struct phase {
  const char *metric, *workload, *unit, *raw;
  int reads;
} PHASES[NPH] = {
    {"txn write 2 docs", "uniform", "txns/s",
     "two raw conditional updates ($inc)", 0},
    {"txn read-only 2 docs", "uniform", "txns/s",
     "two raw finds by _id", 2},
    {"txn read-only 10 docs", "uniform", "txns/s",
     "ten raw finds by _id", 10},
    {"txn write 1 doc", "uniform", "txns/s", "one raw update ($inc)", 0},
    {"txn write 2 docs", "hot90", "txns/s",
     "two raw conditional updates ($inc)", 0},
};

typedef struct cfg {
  int ops, hot_ops, workers, rounds, accounts;
  const char *store, *label, *backend, *dir;
  int redis;
  pair_t *pairs, *hot;
} cfg_t;

typedef struct side {
  const cfg_t *c;
  dtx_store_t *st;
  int txn;             /* 1: transactions, 0: raw operations */
  const pair_t *pairs; /* this phase's */
  int reads;           /* readN: N */
  int attempts;        /* atomic: dtx_txn_run's function calls */
} side_t;

typedef struct result {
  bench_side_t r;
  double calls, rts; /* store calls, round trips per operation */
  int errors, attempts, commits;
} result_t;

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_txn: %s: %s (%s)\n", what, dtx_errname(rc),
          dtx_errdetail());
  exit(1);
}

static void acct_id(char *buf, size_t n, int a) { snprintf(buf, n, "a%d", a); }

/* The _ids a readN operation i reads: its pair, then others spread over
 * the accounts. */
static int read_ids(const side_t *s, int i, int ids[MAXREADS]) {
  const pair_t *p = &s->pairs[i];
  ids[0] = p->from;
  ids[1] = p->to;
  for (int j = 2; j < s->reads; j++)
    ids[j] = (p->from + 97 * j) % s->c->accounts;
  return s->reads;
}

/* ---- the transactions ---------------------------------------------------- */

typedef struct targ {
  side_t *s;
  int i;
  int64_t sum; /* readN: the balances read */
} targ_t;

static int txn_write2(dtx_txn_t *t, void *arg) {
  targ_t *a = arg;
  const pair_t *p = &a->s->pairs[a->i];
  char from[32], to[32];
  int matched = 0;
  __atomic_add_fetch(&a->s->attempts, 1, __ATOMIC_RELAXED);
  acct_id(from, sizeof from, p->from);
  acct_id(to, sizeof to, p->to);
  json_t *f = json_pack("{s:s,s:{s:I}}", "_id", from, "balance", "$gte",
                        (json_int_t)p->amount);
  json_t *u = json_pack("{s:{s:I}}", "$inc", "balance",
                        (json_int_t)-p->amount);
  int rc = dtx_txn_update(t, COLL, f, u, 0, &matched);
  json_decref(f);
  json_decref(u);
  if (rc == 0 && !matched)
    rc = DTX_ENOMATCH; /* insufficient: never with these balances */
  if (rc)
    return rc;
  f = json_pack("{s:s}", "_id", to);
  u = json_pack("{s:{s:I}}", "$inc", "balance", (json_int_t)p->amount);
  rc = dtx_txn_update(t, COLL, f, u, 0, &matched);
  json_decref(f);
  json_decref(u);
  return rc == 0 && !matched ? DTX_ENOMATCH : rc;
}

static int txn_write1(dtx_txn_t *t, void *arg) {
  targ_t *a = arg;
  char id[32];
  int matched = 0;
  __atomic_add_fetch(&a->s->attempts, 1, __ATOMIC_RELAXED);
  acct_id(id, sizeof id, a->s->pairs[a->i].from);
  json_t *f = json_pack("{s:s}", "_id", id);
  json_t *u = json_pack("{s:{s:i}}", "$inc", "balance", 1);
  int rc = dtx_txn_update(t, COLL, f, u, 0, &matched);
  json_decref(f);
  json_decref(u);
  return rc == 0 && !matched ? DTX_ENOMATCH : rc;
}

static int txn_read(dtx_txn_t *t, void *arg) {
  targ_t *a = arg;
  int ids[MAXREADS], n = read_ids(a->s, a->i, ids);
  __atomic_add_fetch(&a->s->attempts, 1, __ATOMIC_RELAXED);
  a->sum = 0;
  for (int j = 0; j < n; j++) {
    char id[32];
    json_t *d = NULL;
    acct_id(id, sizeof id, ids[j]);
    json_t *f = json_pack("{s:s}", "_id", id);
    int rc = dtx_txn_find_one(t, COLL, f, &d);
    json_decref(f);
    if (rc == 0 && !d)
      rc = DTX_ENOTFOUND;
    if (rc)
      return rc;
    a->sum += json_integer_value(json_object_get(d, "balance"));
    json_decref(d);
  }
  return 0;
}

/* ---- one operation of either side ---------------------------------------- */

static int raw_update(dtx_store_t *st, json_t *f, json_t *u) {
  dtx_update_result_t res;
  int rc = dtx_store_update(st, COLL, f, u, NULL, &res);
  json_decref(f);
  json_decref(u);
  return rc == 0 && res.modified == 1;
}

static int raw_read(dtx_store_t *st, int a, int64_t *sum) {
  char id[32];
  json_t *out = NULL;
  acct_id(id, sizeof id, a);
  json_t *f = json_pack("{s:s}", "_id", id);
  int rc = dtx_store_find(st, COLL, f, &(dtx_find_opts_t){.limit = 1}, &out);
  json_decref(f);
  int ok = rc == 0 && json_array_size(out) == 1;
  if (ok)
    *sum += json_integer_value(
        json_object_get(json_array_get(out, 0), "balance"));
  json_decref(out);
  return ok;
}

static int report(const char *what, int rc) {
  if (rc)
    fprintf(stderr, "bench_txn: %s: %s (%s)\n", what, dtx_errname(rc),
            dtx_errdetail());
  return rc == 0;
}

static int op_write2(void *ctx, int w, int i) {
  side_t *s = ctx;
  (void)w;
  if (s->txn) {
    targ_t a = {s, i, 0};
    return report("write2 txn", dtx_txn_run(s->st, NULL, txn_write2, &a));
  }
  const pair_t *p = &s->pairs[i];
  char from[32], to[32];
  acct_id(from, sizeof from, p->from);
  acct_id(to, sizeof to, p->to);
  int ok = raw_update(s->st,
                      json_pack("{s:s,s:{s:I}}", "_id", from, "balance",
                                "$gte", (json_int_t)p->amount),
                      json_pack("{s:{s:I}}", "$inc", "balance",
                                (json_int_t)-p->amount));
  return ok && raw_update(s->st, json_pack("{s:s}", "_id", to),
                          json_pack("{s:{s:I}}", "$inc", "balance",
                                    (json_int_t)p->amount));
}

static int op_write1(void *ctx, int w, int i) {
  side_t *s = ctx;
  (void)w;
  if (s->txn) {
    targ_t a = {s, i, 0};
    return report("write1 txn", dtx_txn_run(s->st, NULL, txn_write1, &a));
  }
  char id[32];
  acct_id(id, sizeof id, s->pairs[i].from);
  return raw_update(s->st, json_pack("{s:s}", "_id", id),
                    json_pack("{s:{s:i}}", "$inc", "balance", 1));
}

static int op_read(void *ctx, int w, int i) {
  side_t *s = ctx;
  (void)w;
  if (s->txn) {
    targ_t a = {s, i, 0};
    return report("read txn", dtx_txn_run(s->st, NULL, txn_read, &a));
  }
  int ids[MAXREADS], n = read_ids(s, i, ids), ok = 1;
  int64_t sum = 0;
  for (int j = 0; ok && j < n; j++)
    ok = raw_read(s->st, ids[j], &sum);
  return ok;
}

/* ---- a round of one side ------------------------------------------------- */

static result_t run_phase(side_t *s, int ph, int total) {
  static const bench_op_fn fns[NPH] = {op_write2, op_read, op_read, op_write1,
                                       op_write2};
  result_t res = {0};
  s->pairs = ph == PH_HOT ? s->c->hot : s->c->pairs;
  s->reads = PHASES[ph].reads;
  s->attempts = 0;
  int64_t calls0 = dtx__store_calls(), rt0 = dtx__store_round_trips();
  res.r = bench_pool_run(s->c->workers, total, fns[ph], s, &res.errors);
  res.calls = (double)(dtx__store_calls() - calls0) / total;
  res.rts = (double)(dtx__store_round_trips() - rt0) / total;
  res.attempts = s->attempts;
  res.commits = total - res.errors;
  return res;
}

/* Every phase of one side on a fresh store; out[NPH].  Returns the
 * errors (failed operations, and balances that do not add up). */
static int run_side(const cfg_t *c, int txn, int round, result_t *out) {
  char uri[700];
  side_t s = {.c = c, .txn = txn};
  if (c->redis)
    snprintf(uri, sizeof uri, "%s", c->store);
  else
    snprintf(uri, sizeof uri, "sqlite:%s/%s-%d.db?sync=normal", c->dir,
             txn ? "txn" : "raw", round);
  int rc = dtx_store_open(uri, &s.st);
  if (rc < 0)
    die("open", rc);
  if ((rc = dtx_store_drop_collection_ex(s.st, COLL,
                                         &(dtx_drop_opts_t){1})) < 0)
    die("emptying " COLL, rc);
  json_t *docs = json_array();
  for (int a = 0; a < c->accounts; a++) {
    char id[32];
    acct_id(id, sizeof id, a);
    json_array_append_new(docs, json_pack("{s:s,s:I}", "_id", id, "balance",
                                          (json_int_t)BALANCE));
  }
  if ((rc = dtx_store_insert_many(s.st, COLL, docs, NULL, NULL)) < 0)
    die("loading the accounts", rc);
  json_decref(docs);
  int errors = 0;
  int64_t extra = 0; /* write1 adds 1 a commit */
  if (txn) {
    /* Warm-up: the first commit sets the pattern's collections up and
     * adds the guard rule to COLL (a catalog change), once per store. */
    targ_t a = {&s, 0, 0};
    s.pairs = c->pairs;
    if ((rc = dtx_txn_run(s.st, NULL, txn_write1, &a)) < 0)
      die("warm-up transaction", rc);
    extra = 1;
  }
  for (int ph = 0; ph < NPH; ph++) {
    bench_phase("%s round %d/%d %s %s %s", c->label, round + 1, c->rounds,
                txn ? "txn" : "raw", PHASES[ph].metric, PHASES[ph].workload);
    out[ph] = run_phase(&s, ph, ph == PH_HOT ? c->hot_ops : c->ops);
    errors += out[ph].errors;
    if (ph == PH_WRITE1)
      extra += out[ph].commits;
  }
  int64_t sum = 0;
  if ((rc = bench_sum(s.st, COLL, "balance", &sum)) < 0 ||
      sum != c->accounts * BALANCE + extra) {
    fprintf(stderr, "bench_txn: %s: the balances add up to %lld, not %lld\n",
            txn ? "txn" : "raw", (long long)sum,
            (long long)(c->accounts * BALANCE + extra));
    errors++;
  }
  dtx_store_drop_collection_ex(s.st, COLL, &(dtx_drop_opts_t){1});
  dtx_store_close(s.st);
  return errors;
}

/* ---- the table ----------------------------------------------------------- */

static int cmp_result(const void *a, const void *b) {
  return bench_cmp_side(&((const result_t *)a)->r, &((const result_t *)b)->r);
}

static int bench(const cfg_t *c) {
  result_t d[16][NPH], n[16][NPH];
  int derr = 0, nerr = 0;
  for (int k = 0; k < c->rounds; k++)
    for (int side = 0; side < 2; side++) {
      int txn = (side + k) % 2 == 0;
      if (txn)
        derr += run_side(c, 1, k, d[k]);
      else
        nerr += run_side(c, 0, k, n[k]);
    }
  printf("%-16s %-22s %-7s | %8s %7s %7s %6s | %8s %7s %7s %6s | %6s\n",
         "label", "metric", "load", "txn/s", "p50us", "p99us", "calls",
         "raw/s", "p50us", "p99us", "calls", "ratio");
  for (int ph = 0; ph < NPH; ph++) {
    result_t dv[16], nv[16];
    int att = 0, com = 0;
    for (int k = 0; k < c->rounds; k++) {
      dv[k] = d[k][ph];
      nv[k] = n[k][ph];
      att += d[k][ph].attempts;
      com += d[k][ph].commits;
    }
    qsort(dv, (size_t)c->rounds, sizeof *dv, cmp_result);
    qsort(nv, (size_t)c->rounds, sizeof *nv, cmp_result);
    result_t dm = dv[c->rounds / 2], nm = nv[c->rounds / 2];
    double abort_rate = att > 0 ? (double)(att - com) / att : 0;
    const struct phase *p = &PHASES[ph];
    bench_row(&(bench_row_t){
        .metric = p->metric, .backend = c->backend,
        .sync = c->redis ? "none" : "normal", .workload = p->workload,
        .unit = p->unit, .native = p->raw, .workers = c->workers,
        .rounds = c->rounds, .doctx = dm.r, .nat = nm.r,
        .extra = json_pack("{s:i,s:f,s:f,s:f,s:f,s:i,s:i,s:f}", "ops",
                           ph == PH_HOT ? c->hot_ops : c->ops,
                           "calls_per_txn", dm.calls, "calls_per_raw",
                           nm.calls, "rt_per_txn", dm.rts, "rt_per_raw",
                           nm.rts, "attempts", att, "commits", com,
                           "abort_rate", abort_rate)});
    printf("%-16s %-22s %-7s | %8.0f %7.0f %7.0f %6.2f | %8.0f %7.0f %7.0f "
           "%6.2f | %6.3f",
           c->label, p->metric, p->workload, dm.r.ops_s, dm.r.p50_us,
           dm.r.p99_us, dm.calls, nm.r.ops_s, nm.r.p50_us, nm.r.p99_us,
           nm.calls, nm.r.ops_s > 0 ? dm.r.ops_s / nm.r.ops_s : 0);
    if (c->redis)
      printf("  rt %.2f/%.2f", dm.rts, nm.rts);
    if (!p->reads)
      printf("  aborts %.1f%% (%d of %d attempts)", 100 * abort_rate,
             att - com, att);
    printf("\n");
  }
  if (derr || nerr)
    printf("%-16s (errors: txn %d, raw %d)\n", c->label, derr, nerr);
  fflush(stdout);
  return derr || nerr ? 1 : 0;
}

static void usage(void) {
  fprintf(stderr, "usage: bench_txn [--store redis://...] [--label L] "
                  "[--backend B] [--ops M]\n"
                  "                 [--hot-ops H] [--workers W] [--rounds R] "
                  "[--accounts N]\n");
}

int main(int argc, char **argv) {
  cfg_t c = {.workers = 8, .rounds = 3, .accounts = 1000};
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
    else if (!strcmp(a, "--ops"))
      c.ops = atoi(v);
    else if (!strcmp(a, "--hot-ops"))
      c.hot_ops = atoi(v);
    else if (!strcmp(a, "--workers"))
      c.workers = atoi(v);
    else if (!strcmp(a, "--rounds"))
      c.rounds = atoi(v);
    else if (!strcmp(a, "--accounts"))
      c.accounts = atoi(v);
    else {
      usage();
      return 2;
    }
  }
  if (c.workers < 1 || c.workers > 256 || c.rounds < 1 || c.rounds > 16 ||
      c.ops < 0 || c.hot_ops < 0 || c.accounts < 11 ||
      c.accounts > 1000000) {
    usage();
    return 2;
  }
  c.ops = c.ops ? c.ops : bench_scaled(1000);
  c.hot_ops = c.hot_ops ? c.hot_ops : bench_scaled(400);
  c.redis = c.store != NULL;
  if (c.redis && strncmp(c.store, "redis", 5)) {
    fprintf(stderr, "bench_txn: --store takes a redis:// URI\n");
    return 2;
  }
  c.label = c.label ? c.label : c.redis ? "redis" : "sqlite";
  c.backend = c.backend ? c.backend : c.redis ? c.label : "sqlite";
  c.pairs = malloc(sizeof *c.pairs * (size_t)c.ops);
  c.hot = malloc(sizeof *c.hot * (size_t)c.hot_ops);
  if (!c.pairs || !c.hot)
    return 1;
  bench_pairs(c.pairs, c.ops, c.accounts, 0);
  bench_pairs(c.hot, c.hot_ops, c.accounts, 90);
  char dir[] = "/tmp/dtx-bench-txn-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  c.dir = dir;
  bench_begin("bench_txn", c.redis ? c.label : NULL, argc, argv);
  printf("transactions (snapshot, dtx_txn_run) vs raw single-document "
         "operations, %d workers, %d accounts, %d ops (hot: %d), median of "
         "%d rounds%s\n",
         c.workers, c.accounts, c.ops, c.hot_ops, c.rounds,
         c.redis ? "" : ", SQLite sync=normal");
  int rc = bench(&c);
  free(c.pairs);
  free(c.hot);
  if (bench_rmdir(dir))
    rc = 1;
  return bench_end(rc);
}
