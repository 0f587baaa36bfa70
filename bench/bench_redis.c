/* bench_redis.c -- two-phase transfers through doctx on Redis (standalone
 * or Cluster) against the native Redis baseline, in the same run: the same
 * transfers, each as MULTI / INCRBY from -amt / INCRBY to +amt / EXEC
 * pipelined on two keys that share a hash tag, which is what a Redis user
 * does when both accounts fit in one slot.  Both sides use the same number
 * of worker threads, the same pairs and amounts (the native side runs the
 * list NATIVE_PASSES times over, as one pass is too short to time), and,
 * with ?wait=N in the URI, a WAIT after each write.
 *
 * usage: bench_redis --store URI [--accounts N] [--transfers M]
 *                    [--workers W] [--rounds R] [--hot PCT] [--label TEXT]
 *                    [--backend B] [--sync S] [--batch B]
 * (--batch: the batched row, each worker taking B transfers at a time into
 * one dtx_transfer_execute_many, measured in the same rounds; default 16,
 * 0: none.)
 * (--backend and --sync only name the target in the results file:
 * "redis-standalone", "aof-always", ...; by default "redis" and "none",
 * or "wait=N" with ?wait=N.)
 * Without --hot it runs a uniform and a 90%-hot workload (as
 * bench_transfer).  The doctx side empties the store's accounts and
 * transfers collections each round.  Prints, per workload, transfers/s
 * (median of the rounds), p50/p99 latency of that round, store operations,
 * Redis round trips and Redis commands per transfer, the native figures
 * and the ratio; and a "RESULT key=value..." line that scripts/bench.sh
 * combines with redis-benchmark's ceiling.  The native side checks no
 * balance (MULTI cannot branch), so it is the cheapest a transfer can be. */
#include <stdio.h>

#ifndef DTX_HAVE_REDIS
int main(void) {
  fprintf(stderr, "bench_redis: doctx was built without Redis (DTX_REDIS)\n");
  return 2;
}
#else

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_common.h"
#include "bench_native.h"
#include "doctx.h"
#include "store/redis/redis_int.h"
#include "store/store.h"

#define OPENING 1000000000LL
#define TAG "acct" /* every native key is nat:{acct}:aN: one slot */
/* One native pass over the pairs takes milliseconds, too short to time
 * well, so the native side runs the same pairs this many times over. */
#define NATIVE_PASSES 10

typedef struct cfg {
  int accounts, transfers, workers, rounds, batch;
  const char *store, *label, *backend, *sync;
  rd_uri_t uri;
  char host[256]; /* native: the node owning TAG's slot */
  int port;
} cfg_t;

typedef struct run {
  const cfg_t *c;
  const pair_t *pairs;
  int total;   /* transfers to run: pairs[i % c->transfers] */
  double *lat; /* per transfer, microseconds */
  int next;    /* atomic index into pairs */
  int errors;  /* transfers that did not succeed */
  dtx_store_t *st;
  redisContext **conns; /* native: one per worker, opened beforehand */
  int nconn;            /* atomic: the next worker's connection */
} run_t;

typedef struct result {
  double tps, p50, p99, ops, rts, cmds;
  int errors;
} result_t;

/* ---- native side ----------------------------------------------------------- */

static redisContext *native_connect(const cfg_t *c, char *why, size_t wl) {
  return native_connect_to(&c->uri, c->host, c->port, why, wl);
}

static int find_native_node(cfg_t *c) {
  return native_find_node(&c->uri, TAG, c->host, &c->port, "bench_redis");
}

static void *native_worker(void *arg) {
  run_t *r = arg;
  const cfg_t *c = r->c;
  char from[48], to[48], amt[24], neg[24], w[16], t[16];
  redisContext *rc = r->conns[__atomic_fetch_add(&r->nconn, 1,
                                                 __ATOMIC_RELAXED)];
  snprintf(w, sizeof w, "%d", c->uri.wait);
  /* WAIT gets the timeout doctx gives it (exec.c: half the command's) */
  snprintf(t, sizeof t, "%d",
           c->uri.timeout_ms / 2 > 0 ? c->uri.timeout_ms / 2 : 1);
  for (;;) {
    int i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED);
    if (i >= r->total)
      break;
    const pair_t *pr = &r->pairs[i % c->transfers];
    snprintf(from, sizeof from, "nat:{" TAG "}:a%d", pr->from);
    snprintf(to, sizeof to, "nat:{" TAG "}:a%d", pr->to);
    snprintf(amt, sizeof amt, "%lld", (long long)pr->amount);
    snprintf(neg, sizeof neg, "%lld", -(long long)pr->amount);
    double t0 = now_us();
    int ok = 1, nrep = c->uri.wait > 0 ? 5 : 4;
    redisAppendCommand(rc, "MULTI");
    redisAppendCommand(rc, "INCRBY %s %s", from, neg);
    redisAppendCommand(rc, "INCRBY %s %s", to, amt);
    redisAppendCommand(rc, "EXEC");
    if (c->uri.wait > 0)
      redisAppendCommand(rc, "WAIT %s %s", w, t);
    for (int k = 0; k < nrep; k++) {
      redisReply *rep = NULL;
      if (redisGetReply(rc, (void **)&rep) != REDIS_OK) {
        ok = 0;
        break;
      }
      if (k == 3 && (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2))
        ok = 0;
      if (k == 4 && (rep->type != REDIS_REPLY_INTEGER ||
                     rep->integer < c->uri.wait))
        ok = 0;
      freeReplyObject(rep);
    }
    r->lat[i] = now_us() - t0;
    if (!ok)
      __atomic_add_fetch(&r->errors, 1, __ATOMIC_RELAXED);
    if (rc->err) {
      fprintf(stderr, "bench_redis: native worker: %s\n", rc->errstr);
      break;
    }
  }
  return NULL;
}

/* Sets every native account to the opening balance (one pipeline), or,
 * with check, confirms that the balances still add up: the native side's
 * audit. */
static int native_accounts(const cfg_t *c, int check) {
  char why[512], key[48];
  redisContext *rc = native_connect(c, why, sizeof why);
  if (!rc) {
    fprintf(stderr, "bench_redis: native setup: %s\n", why);
    return -1;
  }
  for (int i = 0; i < c->accounts; i++) {
    snprintf(key, sizeof key, "nat:{" TAG "}:a%d", i);
    if (check)
      redisAppendCommand(rc, "GET %s", key);
    else
      redisAppendCommand(rc, "SET %s %lld", key, OPENING);
  }
  long long sum = 0;
  int bad = 0;
  for (int i = 0; i < c->accounts; i++) {
    redisReply *r = NULL;
    if (redisGetReply(rc, (void **)&r) != REDIS_OK) {
      fprintf(stderr, "bench_redis: native setup: %s\n", rc->errstr);
      redisFree(rc);
      return -1;
    }
    if (r->type == REDIS_REPLY_ERROR) {
      fprintf(stderr, "bench_redis: native setup: %s\n", r->str);
      bad = 1;
    } else if (check) {
      sum += r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    }
    freeReplyObject(r);
  }
  redisFree(rc);
  if (check && sum != OPENING * c->accounts) {
    fprintf(stderr, "bench_redis: native balances add up to %lld, not %lld\n",
            sum, OPENING * c->accounts);
    bad = 1;
  }
  return bad ? -1 : 0;
}

/* ---- doctx side ----------------------------------------------------------------- */

static void *doctx_worker(void *arg) {
  run_t *r = arg;
  for (;;) {
    int i = __atomic_fetch_add(&r->next, 1, __ATOMIC_RELAXED);
    if (i >= r->total)
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
    if (i >= r->total)
      break;
    int k = r->total - i < b ? r->total - i : b;
    int bad = bench_transfer_many(r->st, &r->pairs[i], k, &r->lat[i]);
    if (bad)
      __atomic_add_fetch(&r->errors, bad, __ATOMIC_RELAXED);
  }
  return NULL;
}

static result_t run_threads(run_t *r, void *(*fn)(void *)) {
  pthread_t th[256];
  result_t res = {0};
  int64_t ops0 = dtx__store_calls(), rt0 = dtx__store_round_trips(),
          cmd0 = dtx__store_commands();
  double t0 = now_us();
  int started = 0;
  for (int i = 0; i < r->c->workers; i++)
    if (pthread_create(&th[started], NULL, fn, r) == 0)
      started++;
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  double el = now_us() - t0;
  int m = r->total;
  if (started < r->c->workers)
    fprintf(stderr, "bench_redis: only %d of %d threads started\n", started,
            r->c->workers);
  res.tps = m / (el / 1e6);
  res.ops = (double)(dtx__store_calls() - ops0) / m;
  res.rts = (double)(dtx__store_round_trips() - rt0) / m;
  res.cmds = (double)(dtx__store_commands() - cmd0) / m;
  res.p50 = pct(r->lat, m, 0.50);
  res.p99 = pct(r->lat, m, 0.99);
  res.errors = r->errors;
  return res;
}

/* One doctx round on an emptied store.  -1 on a setup error (reported). */
static int run_doctx(const cfg_t *c, const pair_t *pairs, double *lat,
                     result_t *res, int batched) {
  run_t r = {.c = c, .pairs = pairs, .total = c->transfers, .lat = lat};
  int rc = dtx_store_open(c->store, &r.st);
  if (rc) {
    fprintf(stderr, "bench_redis: open %s: %s: %s\n", c->store,
            dtx_strerror(rc), dtx_errdetail());
    return -1;
  }
  const char *colls[3] = {DTX_ACCOUNTS, DTX_OPENINGS, DTX_TRANSFERS};
  for (int i = 0; i < 3; i++)
    if ((rc = dtx_store_drop_collection_ex(r.st, colls[i], &(dtx_drop_opts_t){1}))) {
      fprintf(stderr, "bench_redis: emptying %s: %s: %s\n", colls[i],
              dtx_strerror(rc), dtx_errdetail());
      dtx_store_close(r.st);
      return -1;
    }
  for (int i = 0; i < c->accounts; i++) {
    char id[32];
    snprintf(id, sizeof id, "a%d", i);
    if ((rc = dtx_account_create(r.st, id, &(dtx_account_opts_t){.balance = OPENING},
                                 NULL))) {
      fprintf(stderr, "bench_redis: creating account %s: %s: %s\n", id,
              dtx_strerror(rc), dtx_errdetail());
      dtx_store_close(r.st);
      return -1;
    }
  }
  *res = run_threads(&r, batched ? doctx_batch_worker : doctx_worker);
  json_t *rep = NULL;
  if ((rc = dtx_audit(r.st, DTX_AUDIT_SETTLED, &rep)) != 0) {
    fprintf(stderr, "bench_redis: audit after benchmark: %s: %s\n",
            dtx_strerror(rc), dtx_errdetail());
    res->errors++;
  }
  json_decref(rep);
  dtx_store_close(r.st);
  return 0;
}

static int run_native(const cfg_t *c, const pair_t *pairs, double *lat,
                      result_t *res) {
  if (native_accounts(c, 0) < 0)
    return -1;
  /* Connections are opened before the clock starts: a Redis user keeps
   * them, and doctx's pool keeps its own across transfers too. */
  redisContext *conns[256];
  char why[512];
  for (int i = 0; i < c->workers; i++)
    if (!(conns[i] = native_connect(c, why, sizeof why))) {
      fprintf(stderr, "bench_redis: native worker: %s\n", why);
      while (i-- > 0)
        redisFree(conns[i]);
      return -1;
    }
  run_t r = {.c = c, .pairs = pairs, .total = c->transfers * NATIVE_PASSES,
             .lat = lat, .conns = conns};
  *res = run_threads(&r, native_worker);
  for (int i = 0; i < c->workers; i++)
    redisFree(conns[i]);
  res->ops = res->rts = 1;
  res->cmds = c->uri.wait > 0 ? 5 : 4;
  if (native_accounts(c, 1) < 0)
    res->errors++;
  return 0;
}

static int cmp_res(const void *a, const void *b) {
  return cmp_double(&((const result_t *)a)->tps, &((const result_t *)b)->tps);
}

/* Runs one workload for every round, doctx and native alternating so
 * that drift in the machine touches both, and prints its row. */
static int bench(const cfg_t *c, int hot) {
  pair_t *pairs = malloc(sizeof *pairs * (size_t)c->transfers);
  double *lat = malloc(sizeof *lat * (size_t)c->transfers * NATIVE_PASSES);
  result_t d[16], n[16], b[16];
  int rc = -1;
  if (!pairs || !lat) {
    fprintf(stderr, "bench_redis: out of memory\n");
    goto out;
  }
  bench_pairs(pairs, c->transfers, c->accounts, hot);
  for (int round = 0; round < c->rounds; round++) {
    bench_phase("hot=%d%% round %d/%d doctx", hot, round + 1, c->rounds);
    if (run_doctx(c, pairs, lat, &d[round], 0) < 0)
      goto out;
    if (c->batch > 0) {
      bench_phase("hot=%d%% round %d/%d doctx batch %d", hot, round + 1,
                  c->rounds, c->batch);
      if (run_doctx(c, pairs, lat, &b[round], 1) < 0)
        goto out;
    }
    bench_phase("hot=%d%% round %d/%d native", hot, round + 1, c->rounds);
    if (run_native(c, pairs, lat, &n[round]) < 0)
      goto out;
  }
  qsort(d, (size_t)c->rounds, sizeof *d, cmp_res);
  qsort(n, (size_t)c->rounds, sizeof *n, cmp_res);
  if (c->batch > 0)
    qsort(b, (size_t)c->rounds, sizeof *b, cmp_res);
  result_t dm = d[c->rounds / 2], nm = n[c->rounds / 2];
  result_t bm = c->batch > 0 ? b[c->rounds / 2] : (result_t){0};
  double ratio = nm.tps > 0 ? dm.tps / nm.tps : 0;
  double bratio = nm.tps > 0 ? bm.tps / nm.tps : 0;
  bench_row(&(bench_row_t){
      .metric = "transfer", .backend = c->backend, .sync = c->sync,
      .workload = hot ? "hot90" : "uniform", .unit = "transfers/s",
      .native = "MULTI; INCRBY x2; EXEC (one slot)", .workers = c->workers,
      .rounds = c->rounds, .doctx = {dm.tps, dm.p50, dm.p99},
      .nat = {nm.tps, nm.p50, nm.p99},
      .extra = json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:i}", "hot_pct", hot,
                         "transfers", c->transfers, "ops_per_transfer",
                         dm.ops, "rt_per_transfer", dm.rts,
                         "cmds_per_transfer", dm.cmds, "doctx_failed",
                         dm.errors, "native_failed", nm.errors)});
  printf("%-14s %3d%% | %8.0f %7.0f %7.0f %5.1f %5.1f %5.1f | %8.0f %7.0f "
         "%7.0f | %6.3f",
         c->label, hot, dm.tps, dm.p50, dm.p99, dm.ops, dm.rts, dm.cmds,
         nm.tps, nm.p50, nm.p99, ratio);
  if (dm.errors || nm.errors)
    printf("  (not succeeded: doctx %d, native %d)", dm.errors, nm.errors);
  printf("\n");
  /* key=value for scripts: the label with blanks made underscores */
  char lab[128];
  snprintf(lab, sizeof lab, "%s", c->label);
  for (char *p = lab; *p; p++)
    if (*p == ' ' || *p == '\t' || *p == '=')
      *p = '_';
  printf("RESULT label=%s hot=%d tps=%.0f p50_us=%.0f p99_us=%.0f "
         "ops_per_transfer=%.2f rt_per_transfer=%.2f "
         "cmds_per_transfer=%.2f native_tps=%.0f native_p50_us=%.0f "
         "native_p99_us=%.0f ratio=%.4f doctx_failed=%d native_failed=%d\n",
         lab, hot, dm.tps, dm.p50, dm.p99, dm.ops, dm.rts, dm.cmds, nm.tps,
         nm.p50, nm.p99, ratio, dm.errors, nm.errors);
  if (c->batch > 0) {
    bench_row(&(bench_row_t){
        .metric = "transfer_batched", .backend = c->backend, .sync = c->sync,
        .workload = hot ? "hot90" : "uniform", .unit = "transfers/s",
        .native = "MULTI; INCRBY x2; EXEC (one slot)", .workers = c->workers,
        .rounds = c->rounds, .doctx = {bm.tps, bm.p50, bm.p99},
        .nat = {nm.tps, nm.p50, nm.p99},
        .extra = json_pack("{s:i,s:i,s:i,s:f,s:f,s:f,s:i,s:i}", "batch",
                           c->batch, "hot_pct", hot, "transfers",
                           c->transfers, "ops_per_transfer", bm.ops,
                           "rt_per_transfer", bm.rts, "cmds_per_transfer",
                           bm.cmds, "doctx_failed", bm.errors,
                           "native_failed", nm.errors)});
    printf("%-14s %3d%% B=%d | %8.0f %7.0f %7.0f %5.1f %5.1f %5.1f | "
           "(batched; latency per batch) | %6.3f%s\n",
           c->label, hot, c->batch, bm.tps, bm.p50, bm.p99, bm.ops, bm.rts,
           bm.cmds, bratio, bm.errors ? "  (not all succeeded)" : "");
    printf("RESULT label=%s_batch%d hot=%d tps=%.0f p50_us=%.0f p99_us=%.0f "
           "ops_per_transfer=%.2f rt_per_transfer=%.2f "
           "cmds_per_transfer=%.2f native_tps=%.0f ratio=%.4f "
           "doctx_failed=%d\n",
           lab, c->batch, hot, bm.tps, bm.p50, bm.p99, bm.ops, bm.rts,
           bm.cmds, nm.tps, bratio, bm.errors);
  }
  fflush(stdout);
  rc = 0;
out:
  free(pairs);
  free(lat);
  return rc;
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_redis --store URI [--accounts N(1000)] "
          "[--transfers M(3000)]\n"
          "                   [--workers W(16)] [--rounds R(3)] [--hot PCT] "
          "[--label TEXT] [--batch B(16)]\n");
}

int main(int argc, char **argv) {
  cfg_t c = {.accounts = 1000, .transfers = 3000, .workers = 16, .rounds = 3,
             .batch = 16};
  int hot = -1;
  for (int i = 1; i < argc; i += 2) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "bench_redis: %s needs a value\n", a);
      usage();
      return 2;
    }
    if (!strcmp(a, "--store"))
      c.store = v;
    else if (!strcmp(a, "--accounts"))
      c.accounts = atoi(v);
    else if (!strcmp(a, "--transfers"))
      c.transfers = atoi(v);
    else if (!strcmp(a, "--workers"))
      c.workers = atoi(v);
    else if (!strcmp(a, "--rounds"))
      c.rounds = atoi(v);
    else if (!strcmp(a, "--hot"))
      hot = atoi(v);
    else if (!strcmp(a, "--label"))
      c.label = v;
    else if (!strcmp(a, "--backend"))
      c.backend = v;
    else if (!strcmp(a, "--sync"))
      c.sync = v;
    else if (!strcmp(a, "--batch"))
      c.batch = atoi(v);
    else {
      fprintf(stderr, "bench_redis: unknown option %s\n", a);
      usage();
      return 2;
    }
  }
  if (!c.store || c.accounts < 2 || c.transfers < 1 ||
      c.transfers > 10000000 || c.workers < 1 ||
      c.workers > 256 || c.rounds < 1 || c.rounds > 16 || hot > 100 ||
      c.batch < 0 || c.batch > 256) {
    usage();
    return 2;
  }
  int rc = dtx__rd_uri_parse(c.store, &c.uri);
  if (rc) {
    fprintf(stderr, "bench_redis: %s: %s\n", dtx_strerror(rc),
            dtx_errdetail());
    return 2;
  }
  if (!c.label)
    c.label = c.uri.wait ? "redis+wait" : "redis";
  char waitn[32];
  snprintf(waitn, sizeof waitn, "wait=%d", c.uri.wait);
  c.backend = c.backend ? c.backend : "redis";
  c.sync = c.sync ? c.sync : c.uri.wait ? waitn : "none";
  bench_begin("bench_redis", c.label, argc, argv);
  if (find_native_node(&c) < 0) {
    dtx__rd_uri_free(&c.uri);
    return 1;
  }
  printf("redis transfers %s: %d accounts, %d transfers, %d workers, "
         "median of %d rounds; native on %s:%d\n",
         c.store, c.accounts, c.transfers, c.workers, c.rounds, c.host,
         c.port);
  printf("label          hot  |  doctx/s p50(us) p99(us) ops/t  rt/t cmd/t "
         "| native/s p50(us) p99(us) |  ratio\n");
  rc = 0;
  if (hot >= 0)
    rc = bench(&c, hot);
  else if ((rc = bench(&c, 0)) == 0)
    rc = bench(&c, 90);
  dtx__rd_uri_free(&c.uri);
  return bench_end(rc < 0 ? 1 : 0);
}
#endif /* DTX_HAVE_REDIS */
