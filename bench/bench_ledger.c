/* bench_ledger.c -- the log-reconciliation ledger (dtx_ledger_post of
 * 2-leg entries, dtx_ledger_balance) against the native way of recording
 * the same entry on the same kind of store, in the same run:
 *   SQLite  one transaction per entry on plain tables, WAL, the same
 *           synchronous setting, one connection per thread:
 *           BEGIN IMMEDIATE; INSERT INTO entry(debit, credit, amount,
 *           created); UPDATE acct SET balance=balance-A WHERE id=D AND
 *           balance-A >= min_balance; UPDATE acct SET balance=balance+A
 *           WHERE id=C; COMMIT
 *   Redis   MULTI; INCRBY {ledger}:D -A; INCRBY {ledger}:C A;
 *           XADD {ledger}:entries * d D c C a A; EXEC, pipelined, every
 *           key under one hash tag (one slot, one node), checking nothing
 *           (MULTI cannot branch).
 * Posts: W writer threads post M entries debiting D and crediting C among
 * N accounts, uniform or 90% with D = the hot account a0, while one
 * committer (dtx_worker_run, one thread, as a deployment runs `doctx
 * worker`) commits entries and advances the accounts' cached balances.
 * Accounts have a limit far below zero, so every debit is checked and
 * none is refused.  Reported: entries/s (median of the rounds), p50/p99
 * of one post, the native figures, the ratio; the hot/uniform ratio.
 * Balance reads: one thread reads dtx_ledger_balance of an account with L
 * legs past its cache (bench_reads says how it gets there), against a
 * native read of the balance row (SELECT balance ... / GET); and with the
 * cache current (10x as many reads), recorded as extra figures.
 *
 * With --batch K (> 1) each round also runs the batched side: the same
 * entries, each writer posting the next K as ONE dtx_ledger_post_many
 * (ledger/many.c); its row gives entries/s (latency per call) with its
 * ratio to the native side and to the single posts of the same rounds.
 *
 * Metadata (docs/ledger.md, "Metadata and references"): each round of the
 * uniform workload also runs the meta side, the same posts each with a
 * ref ("r<round>-<i>") and a meta object ({"order": "o<i>", "n": i}); its
 * row (post_meta) gives its ratio to the plain posts of the same rounds
 * (the target is >= 0.9).  Then, once per backend, ref lookups: R
 * entries with unique refs (25,000 x BENCH_SCALE, 10,000 by default;
 * posted in batches of 100 after dtx_ledger_unique_refs), then 200
 * dtx_ledger_entries by ref, each of which must examine exactly one
 * document (the {ref: 1} index; a scan examines all R).
 *
 * usage: bench_ledger [--store redis://...] [--label L] [--backend B]
 *                     [--accounts N(1000)] [--posts M] [--workers W(8)]
 *                     [--rounds R(3)] [--hot PCT] [--sync full|normal|both]
 *                     [--legs L(1000)] [--reads K] [--batch K(1)]
 * M defaults to 2000 (SQLite normal) and 600 (full, Redis), K to 100,
 * both times BENCH_SCALE.  Each doctx round runs on a store of its own
 * (SQLite: a new file; Redis: a new ?ns= namespace, emptied afterwards).  Exits 1
 * when a post failed or the audit after a round is not clean. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"
#include "store/store.h"
#ifdef DTX_HAVE_REDIS
#include "bench_native.h"
#endif

#define TAG "ledger" /* native Redis keys: nat:{ledger}:aN, :entries */
#define LOW_LIMIT (-1000000000000000LL) /* checked, never refused */

typedef struct cfg {
  int accounts, posts, workers, rounds, legs, reads;
  int batch; /* > 1: also the dtx_ledger_post_many side */
  const char *store, *label, *backend, *sync, *dir;
  int redis;
#ifdef DTX_HAVE_REDIS
  rd_uri_t uri;
  char host[256]; /* native: the node owning TAG's slot */
  int port;
#endif
} cfg_t;

/* One round of one side. */
typedef struct side {
  const cfg_t *c;
  const pair_t *pairs;
  dtx_store_t *st;
  int meta; /* the meta side: each post with a ref and a meta */
  int round;
  sqlite3 *db[256]; /* native SQLite: one connection per worker */
  sqlite3_stmt *ins[256], *deb[256], *cre[256], *beg[256], *com[256];
#ifdef DTX_HAVE_REDIS
  redisContext *rc[256]; /* native Redis: one connection per worker */
#endif
} side_t;

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_ledger: %s: %s (%s)\n", what, dtx_errname(rc),
          dtx_errdetail());
  exit(1);
}

/* ---- doctx ---------------------------------------------------------------------- */

static int doctx_post(void *ctx, int w, int i) {
  side_t *s = ctx;
  (void)w;
  char from[32], to[32];
  const pair_t *p = &s->pairs[i];
  snprintf(from, sizeof from, "a%d", p->from);
  snprintf(to, sizeof to, "a%d", p->to);
  dtx_ledger_leg_t legs[2] = {{from, -p->amount}, {to, p->amount}};
  dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 2};
  json_t *e = NULL, *meta = NULL; /* out is not optional */
  char ref[48];
  if (s->meta) {
    snprintf(ref, sizeof ref, "r%d-%d", s->round, i);
    meta = json_pack("{s:s+,s:i}", "order", "o", ref + 1, "n", i);
    req.ref = ref;
    req.meta = meta;
  }
  int rc = dtx_ledger_post(s->st, &req, NULL, &e);
  json_decref(e);
  json_decref(meta);
  if (rc < 0)
    fprintf(stderr, "bench_ledger: post %s -> %s: %s (%s)\n", from, to,
            dtx_errname(rc), dtx_errdetail());
  return rc == 0;
}

/* The batched side: op j posts entries j*K .. j*K+K-1 in one call. */
static int doctx_post_many(void *ctx, int w, int j) {
  side_t *s = ctx;
  int K = s->c->batch, from = j * K;
  int k = s->c->posts - from < K ? s->c->posts - from : K, ok = 1;
  char (*ids)[32] = malloc(sizeof *ids * 2 * (size_t)k);
  dtx_ledger_leg_t(*legs)[2] = malloc(sizeof *legs * (size_t)k);
  dtx_ledger_post_req_t *reqs = calloc((size_t)k, sizeof *reqs);
  dtx_ledger_result_t *res = calloc((size_t)k, sizeof *res);
  (void)w;
  if (!ids || !legs || !reqs || !res)
    die("batch", DTX_ENOMEM);
  for (int i = 0; i < k; i++) {
    const pair_t *p = &s->pairs[from + i];
    snprintf(ids[2 * i], sizeof ids[0], "a%d", p->from);
    snprintf(ids[2 * i + 1], sizeof ids[0], "a%d", p->to);
    legs[i][0] = (dtx_ledger_leg_t){ids[2 * i], -p->amount};
    legs[i][1] = (dtx_ledger_leg_t){ids[2 * i + 1], p->amount};
    reqs[i] = (dtx_ledger_post_req_t){.legs = legs[i], .nlegs = 2};
  }
  int rc = dtx_ledger_post_many(s->st, reqs, (size_t)k, NULL, res);
  if (rc < 0) {
    fprintf(stderr, "bench_ledger: post_many of %d: %s (%s)\n", k,
            dtx_errname(rc), dtx_errdetail());
    ok = 0;
  }
  dtx_ledger_results_clear(res, (size_t)k);
  free(ids);
  free(legs);
  free(reqs);
  free(res);
  return ok;
}

/* A fresh store for a round: a new SQLite file, or on Redis a namespace
 * of its own (?ns=; doctx_close empties it).  Not the same store with its
 * collections dropped: dropping a collection drops its indexes, and the
 * pattern kit creates a pattern's indexes once per URI and process, so
 * the ledger's unique {changes.account, changes.seqId} would be gone. */
static dtx_store_t *doctx_open(const cfg_t *c, const char *what, int round) {
  static int opened; /* every round gets a store of its own */
  char uri[600];
  dtx_store_t *st;
  if (c->redis)
    snprintf(uri, sizeof uri, "%s%cns=bl%d-%d", c->store,
             strchr(c->store, '?') ? '&' : '?', (int)getpid() % 100000,
             opened++);
  else
    snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s-%s-%d-%d.db?sync=%s",
             c->dir, what, c->sync, round, opened++, c->sync);
  int rc = dtx_store_open(uri, &st);
  if (rc < 0)
    die("open", rc);
  return st;
}

/* Closes a round's store; on Redis empties its namespace first. */
static void doctx_close(const cfg_t *c, dtx_store_t *st) {
  if (c->redis) {
    json_t *names = NULL;
    if (dtx_store_list_collections(st, &names) == 0) {
      size_t i;
      json_t *n;
      json_array_foreach(names, i, n)
          dtx_store_drop_collection_ex(st, json_string_value(n), &(dtx_drop_opts_t){1});
    }
    json_decref(names);
  }
  dtx_store_close(st);
}

static void doctx_accounts(dtx_store_t *st, int n, const char *prefix) {
  dtx_ledger_limit_t lim = {.min_balance = LOW_LIMIT};
  for (int i = 0; i < n; i++) {
    char id[32];
    snprintf(id, sizeof id, "%s%d", prefix, i);
    int rc = dtx_ledger_account_create(st, id, &lim, NULL);
    if (rc < 0)
      die("account create", rc);
  }
}

/* The committer: one worker thread until *stop. */
typedef struct committer {
  dtx_store_t *st;
  volatile int stop;
  pthread_t th;
} committer_t;

static void *committer_main(void *arg) {
  committer_t *cm = arg;
  dtx_worker_opts_t o = {.threads = 1, .stop = &cm->stop};
  dtx_worker_run(cm->st, &o, NULL);
  return NULL;
}

/* Commits everything due, then checks the audit. */
static int settle(dtx_store_t *st) {
  json_t *rep = NULL;
  int rc = dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                          NULL);
  if (rc < 0)
    fprintf(stderr, "bench_ledger: committer: %s (%s)\n", dtx_errname(rc),
            dtx_errdetail());
  else if ((rc = dtx_audit(st, 0, &rep)) != 0) {
    char *t = json_dumps(rep, JSON_COMPACT);
    fprintf(stderr, "bench_ledger: audit after the round: %s\n",
            t ? t : dtx_errdetail());
    free(t);
  }
  json_decref(rep);
  return rc;
}

/* One doctx round; *ops receives the store operations per post, the
 * committer's included.  batched: each op is one dtx_ledger_post_many of
 * c->batch entries; the rate is still entries/s, the latencies per call. */
static bench_side_t doctx_posts(const cfg_t *c, const pair_t *pairs, int round,
                                int *errors, double *ops, int batched,
                                int meta) {
  side_t s = {.c = c, .pairs = pairs, .meta = meta, .round = round,
              .st = doctx_open(c, batched ? "many" : meta ? "meta" : "post",
                               round)};
  int nops = batched ? (c->posts + c->batch - 1) / c->batch : c->posts;
  doctx_accounts(s.st, c->accounts, "a");
  committer_t cm = {.st = s.st};
  int64_t ops0 = dtx__store_calls();
  pthread_create(&cm.th, NULL, committer_main, &cm);
  bench_side_t r = bench_pool_run(c->workers, nops,
                                  batched ? doctx_post_many : doctx_post, &s,
                                  errors);
  if (r.ops_s > 0)
    r.ops_s *= (double)c->posts / nops;
  cm.stop = 1;
  pthread_join(cm.th, NULL);
  *ops = (double)(dtx__store_calls() - ops0) / c->posts;
  if (settle(s.st) != 0)
    (*errors)++;
  doctx_close(c, s.st);
  return r;
}

/* ---- native SQLite ----------------------------------------------------------------- */

static sqlite3 *sq_open(const cfg_t *c, const char *path) {
  return bench_sq_open(path, c->sync, "bench_ledger");
}

static void sq_prep(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
  bench_sq_prep(db, sql, st, "bench_ledger");
}

static int sq_post(void *ctx, int w, int i) {
  side_t *s = ctx;
  const pair_t *p = &s->pairs[i];
  while (!bench_sq_done(s->beg[w]))
    ; /* busy past the timeout: try again */
  sqlite3_bind_int(s->ins[w], 1, p->from);
  sqlite3_bind_int(s->ins[w], 2, p->to);
  sqlite3_bind_int64(s->ins[w], 3, p->amount);
  sqlite3_bind_int64(s->ins[w], 4, (sqlite3_int64)wall_us());
  sqlite3_bind_int64(s->deb[w], 1, p->amount);
  sqlite3_bind_int(s->deb[w], 2, p->from);
  sqlite3_bind_int64(s->cre[w], 1, p->amount);
  sqlite3_bind_int(s->cre[w], 2, p->to);
  int ok = bench_sq_done(s->ins[w]) && bench_sq_done(s->deb[w]) &&
           sqlite3_changes(s->db[w]) == 1 && bench_sq_done(s->cre[w]);
  return bench_sq_done(s->com[w]) && ok;
}

/* Creates the native tables in path (every account at 0). */
static void sq_schema(const cfg_t *c, const char *path) {
  char sql[200];
  unlink(path);
  sqlite3 *db = sq_open(c, path);
  snprintf(sql, sizeof sql,
           "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n "
           "WHERE i < %d) INSERT INTO acct SELECT i, 0, %lld FROM n",
           c->accounts - 1, LOW_LIMIT);
  if (sqlite3_exec(db,
                   "PRAGMA journal_mode=WAL;"
                   "CREATE TABLE acct(id INTEGER PRIMARY KEY, balance "
                   "INTEGER NOT NULL, min_balance INTEGER NOT NULL);"
                   "CREATE TABLE entry(id INTEGER PRIMARY KEY, debit "
                   "INTEGER NOT NULL, credit INTEGER NOT NULL, amount "
                   "INTEGER NOT NULL, created INTEGER NOT NULL)",
                   NULL, NULL, NULL) != SQLITE_OK ||
      sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
    fprintf(stderr, "bench_ledger: native schema: %s\n", sqlite3_errmsg(db));
    exit(1);
  }
  sqlite3_close(db);
}

/* The native balances still add up to 0 and every entry is there. */
static int sq_check(const cfg_t *c, const char *path) {
  sqlite3 *db = sq_open(c, path);
  sqlite3_stmt *q;
  sq_prep(db,
          "SELECT (SELECT sum(balance) FROM acct), (SELECT count(*) FROM "
          "entry)",
          &q);
  int ok = sqlite3_step(q) == SQLITE_ROW && sqlite3_column_int64(q, 0) == 0 &&
           sqlite3_column_int(q, 1) == c->posts;
  sqlite3_finalize(q);
  sqlite3_close(db);
  if (!ok)
    fprintf(stderr, "bench_ledger: native: balances or entries wrong\n");
  return ok;
}

static bench_side_t sq_posts(const cfg_t *c, const pair_t *pairs, int round,
                             int *errors) {
  char path[600];
  snprintf(path, sizeof path, "%s/native-%s-%d.db", c->dir, c->sync, round);
  sq_schema(c, path);
  side_t s = {.c = c, .pairs = pairs};
  for (int w = 0; w < c->workers; w++) {
    s.db[w] = sq_open(c, path);
    sq_prep(s.db[w], "BEGIN IMMEDIATE", &s.beg[w]);
    sq_prep(s.db[w], "COMMIT", &s.com[w]);
    sq_prep(s.db[w],
            "INSERT INTO entry(debit, credit, amount, created) "
            "VALUES(?1, ?2, ?3, ?4)",
            &s.ins[w]);
    sq_prep(s.db[w],
            "UPDATE acct SET balance=balance-?1 WHERE id=?2 AND "
            "balance-?1 >= min_balance",
            &s.deb[w]);
    sq_prep(s.db[w], "UPDATE acct SET balance=balance+?1 WHERE id=?2",
            &s.cre[w]);
  }
  bench_side_t r = bench_pool_run(c->workers, c->posts, sq_post, &s, errors);
  for (int w = 0; w < c->workers; w++) {
    sqlite3_finalize(s.beg[w]);
    sqlite3_finalize(s.com[w]);
    sqlite3_finalize(s.ins[w]);
    sqlite3_finalize(s.deb[w]);
    sqlite3_finalize(s.cre[w]);
    sqlite3_close(s.db[w]);
  }
  if (!sq_check(c, path))
    (*errors)++;
  return r;
}

/* ---- native Redis ------------------------------------------------------------------ */

#ifdef DTX_HAVE_REDIS
static redisContext *rd_conn(const cfg_t *c) {
  return native_connect_or_die(&c->uri, c->host, c->port, "bench_ledger");
}

static int rd_post(void *ctx, int w, int i) {
  side_t *s = ctx;
  redisContext *rc = s->rc[w];
  const pair_t *p = &s->pairs[i];
  char d[48], cr[48];
  snprintf(d, sizeof d, "nat:{" TAG "}:a%d", p->from);
  snprintf(cr, sizeof cr, "nat:{" TAG "}:a%d", p->to);
  redisAppendCommand(rc, "MULTI");
  redisAppendCommand(rc, "INCRBY %s %lld", d, -(long long)p->amount);
  redisAppendCommand(rc, "INCRBY %s %lld", cr, (long long)p->amount);
  redisAppendCommand(rc, "XADD nat:{" TAG "}:entries * d %d c %d a %lld",
                     p->from, p->to, (long long)p->amount);
  redisAppendCommand(rc, "EXEC");
  int ok = 1;
  for (int k = 0; k < 5; k++) {
    redisReply *r = NULL;
    if (redisGetReply(rc, (void **)&r) != REDIS_OK)
      return 0;
    if (k == 4 && (r->type != REDIS_REPLY_ARRAY || r->elements != 3))
      ok = 0;
    freeReplyObject(r);
  }
  return ok;
}

/* Sets every native account to 0 and empties the stream; with check,
 * confirms instead that the balances add up to 0 and every entry is in
 * the stream. */
static int rd_accounts(const cfg_t *c, int check) {
  redisContext *rc = rd_conn(c);
  long long sum = 0;
  int ok = 1;
  for (int i = 0; i < c->accounts; i++)
    redisAppendCommand(rc, check ? "GET nat:{" TAG "}:a%d"
                                 : "SET nat:{" TAG "}:a%d 0",
                       i);
  redisAppendCommand(rc, check ? "XLEN nat:{" TAG "}:entries"
                               : "DEL nat:{" TAG "}:entries");
  for (int i = 0; i <= c->accounts; i++) {
    redisReply *r = NULL;
    if (redisGetReply(rc, (void **)&r) != REDIS_OK || r->type ==
                                                          REDIS_REPLY_ERROR) {
      ok = 0;
    } else if (check && i < c->accounts) {
      sum += r->type == REDIS_REPLY_STRING ? atoll(r->str) : 0;
    } else if (check && r->integer != c->posts) {
      ok = 0;
    }
    freeReplyObject(r);
  }
  redisFree(rc);
  if (!ok || sum)
    fprintf(stderr, "bench_ledger: native: balances or entries wrong\n");
  return ok && !sum;
}

static bench_side_t rd_posts(const cfg_t *c, const pair_t *pairs, int round,
                             int *errors) {
  (void)round;
  side_t s = {.c = c, .pairs = pairs};
  rd_accounts(c, 0);
  for (int w = 0; w < c->workers; w++)
    s.rc[w] = rd_conn(c);
  bench_side_t r = bench_pool_run(c->workers, c->posts, rd_post, &s, errors);
  for (int w = 0; w < c->workers; w++)
    redisFree(s.rc[w]);
  if (!rd_accounts(c, 1))
    (*errors)++;
  return r;
}
#endif

/* ---- balance reads ------------------------------------------------------------------- */

typedef struct reads {
  dtx_store_t *st;
  sqlite3_stmt *sel;
#ifdef DTX_HAVE_REDIS
  redisContext *rc;
#endif
  int64_t want;
} reads_t;

static int doctx_read(void *ctx, int w, int i) {
  reads_t *r = ctx;
  json_t *b = NULL;
  (void)w, (void)i;
  int rc = dtx_ledger_balance(r->st, "r0", DTX_LEDGER_LATEST, &b);
  int ok = rc == 0 && json_integer_value(json_object_get(b, "balance")) ==
                          r->want;
  json_decref(b);
  return ok;
}

static int sq_read(void *ctx, int w, int i) {
  reads_t *r = ctx;
  (void)w, (void)i;
  int ok = sqlite3_step(r->sel) == SQLITE_ROW &&
           sqlite3_column_int64(r->sel, 0) == r->want;
  sqlite3_reset(r->sel);
  return ok;
}

#ifdef DTX_HAVE_REDIS
static int rd_read(void *ctx, int w, int i) {
  reads_t *r = ctx;
  (void)w, (void)i;
  redisReply *rep = redisCommand(r->rc, "GET nat:{" TAG "}:r0");
  int ok = rep && rep->type == REDIS_REPLY_STRING &&
           atoll(rep->str) == r->want;
  freeReplyObject(rep);
  return ok;
}
#endif

/* Balance reads/s of an account L legs past its cache, and with the cache
 * current, against the native balance read; one row.  The L legs are
 * posted with the committer running (a post derives its balance over the
 * legs past the cache too, so posting L legs past it would cost O(L^2)
 * reads), read with the cache current, and then the cache is set back to
 * {balance 0, seqId 0}: the state a committer that fell L entries behind
 * leaves (ledger.c, L7 holds: everything up to seqId 0 is committed and
 * sums to 0), which every reader must derive past. */
static int bench_reads(const cfg_t *c) {
  int errs = 0, e;
  bench_phase("%s reads: posting %d legs", c->label, c->legs);
  dtx_store_t *st = doctx_open(c, "reads", 0);
  doctx_accounts(st, 2, "r");
  committer_t cm = {.st = st};
  pthread_create(&cm.th, NULL, committer_main, &cm);
  double t0 = now_us();
  for (int i = 0; i < c->legs; i++) {
    dtx_ledger_leg_t legs[2] = {{"r0", -1}, {"r1", 1}};
    json_t *entry = NULL;
    int rc = dtx_ledger_post(st, &(dtx_ledger_post_req_t){.legs = legs,
                                                          .nlegs = 2},
                             NULL, &entry);
    json_decref(entry);
    if (rc < 0)
      die("post", rc);
  }
  double fill = c->legs / ((now_us() - t0) / 1e6);
  cm.stop = 1;
  pthread_join(cm.th, NULL);
  if (settle(st) != 0)
    errs++;
  reads_t r = {.st = st, .want = -c->legs};
  bench_phase("%s reads: %d reads, cache current", c->label, c->reads * 10);
  bench_side_t cur = bench_pool_run(1, c->reads * 10, doctx_read, &r, &e);
  errs += e;
  json_t *f = json_pack("{s:s}", "_id", "r0");
  json_t *u = json_pack("{s:{s:{s:i,s:i}}}", "$set", "cache", "balance", 0,
                        "seqId", 0);
  dtx_update_result_t ur;
  /* Past the rules on purpose: a cache only moves forward (ledger.c,
   * account_moves), and this puts it back to 0 to read past it. */
  int rc = dtx_store_update(st, DTX_LEDGER_ACCOUNTS, f, u,
                            &(dtx_update_opts_t){.bypass_validation = 1}, &ur);
  json_decref(f);
  json_decref(u);
  if (rc < 0 || ur.modified != 1)
    die("setting the cache back", rc < 0 ? rc : DTX_ENOMATCH);
  bench_phase("%s reads: %d reads, %d legs past the cache", c->label,
              c->reads, c->legs);
  bench_side_t past = bench_pool_run(1, c->reads, doctx_read, &r, &e);
  errs += e;
  json_t *rep = NULL;
  if (dtx_audit(st, 0, &rep) != 0) { /* the cache set back is a valid one */
    fprintf(stderr, "bench_ledger: audit after the reads: %s\n",
            dtx_errdetail());
    errs++;
  }
  json_decref(rep);
  doctx_close(c, st);
  bench_side_t nat;
  bench_phase("%s reads: native", c->label);
  if (!c->redis) {
    char path[600];
    snprintf(path, sizeof path, "%s/native-reads.db", c->dir);
    cfg_t one = *c;
    one.accounts = 1;
    sq_schema(&one, path);
    sqlite3 *db = sq_open(c, path);
    char sql[64];
    snprintf(sql, sizeof sql, "UPDATE acct SET balance = %d", -c->legs);
    sqlite3_exec(db, sql, NULL, NULL, NULL);
    sq_prep(db, "SELECT balance FROM acct WHERE id = 0", &r.sel);
    nat = bench_pool_run(1, c->reads * 10, sq_read, &r, &e);
    sqlite3_finalize(r.sel);
    sqlite3_close(db);
  } else {
#ifdef DTX_HAVE_REDIS
    r.rc = rd_conn(c);
    freeReplyObject(redisCommand(r.rc, "SET nat:{" TAG "}:r0 %d", -c->legs));
    nat = bench_pool_run(1, c->reads * 10, rd_read, &r, &e);
    redisFree(r.rc);
#else
    nat = (bench_side_t){-1, -1, -1};
    e = 1;
#endif
  }
  errs += e;
  char wl[48];
  snprintf(wl, sizeof wl, "%d legs past cache", c->legs);
  bench_row(&(bench_row_t){
      .metric = "balance", .backend = c->backend, .sync = c->sync,
      .workload = wl, .unit = "reads/s",
      .native = c->redis ? "GET balance" : "SELECT balance (one row)",
      .workers = 1, .rounds = 1, .doctx = past, .nat = nat,
      .extra = json_pack("{s:i,s:f,s:f,s:f,s:f,s:f,s:i}", "legs", c->legs,
                         "cache_current_reads_s", cur.ops_s,
                         "cache_current_p50_us", cur.p50_us,
                         "cache_current_p99_us", cur.p99_us,
                         "cache_current_ratio",
                         nat.ops_s > 0 ? cur.ops_s / nat.ops_s : 0,
                         "fill_posts_s", fill, "errors", errs)});
  printf("%-16s %-6s %-8s | %9.0f %8.0f %8.0f | %9.0f %8.0f %8.0f | %6.4f "
         "| cache current: %.0f reads/s (%.3f)%s\n",
         c->label, c->sync, "reads", past.ops_s, past.p50_us, past.p99_us,
         nat.ops_s, nat.p50_us, nat.p99_us,
         nat.ops_s > 0 ? past.ops_s / nat.ops_s : 0, cur.ops_s,
         nat.ops_s > 0 ? cur.ops_s / nat.ops_s : 0,
         errs ? "  (errors!)" : "");
  printf("%-16s %-6s %-8s   (%d legs posted by one thread, committer "
         "running: %.0f posts/s)\n",
         c->label, c->sync, "", c->legs, fill);
  fflush(stdout);
  return errs ? 1 : 0;
}

/* ---- posts ----------------------------------------------------------------------------- */

/* One workload (hot: percent of posts debiting a0): rounds alternating
 * the sides; prints its row.  *uniform: the uniform doctx rate, for the
 * hot/uniform ratio (set when hot is 0). */
static int bench_posts(const cfg_t *c, int hot, double *uniform) {
  pair_t *pairs = malloc(sizeof *pairs * (size_t)c->posts);
  bench_side_t d[16], n[16], b[16], m[16];
  double ops[16], bops[16], mops[16];
  int derr = 0, nerr = 0, berr = 0, merr = 0, e;
  if (!pairs)
    die("pairs", DTX_ENOMEM);
  bench_pairs(pairs, c->posts, c->accounts, hot);
  for (int k = 0; k < c->rounds; k++) {
    bench_phase("%s sync=%s hot=%d%% round %d/%d doctx", c->label, c->sync,
                hot, k + 1, c->rounds);
    /* The meta side alternates with the plain one (which goes first),
     * so neither always runs on a warmer machine. */
    for (int side = 0; side < 2; side++) {
      if ((side ^ (k & 1)) == 0) {
        d[k] = doctx_posts(c, pairs, k, &e, &ops[k], 0, 0);
        derr += e;
      } else if (hot == 0) {
        bench_phase("%s sync=%s hot=%d%% round %d/%d doctx meta", c->label,
                    c->sync, hot, k + 1, c->rounds);
        m[k] = doctx_posts(c, pairs, k, &e, &mops[k], 0, 1);
        merr += e;
      }
    }
    if (c->batch > 1) {
      bench_phase("%s sync=%s hot=%d%% round %d/%d doctx batch %d", c->label,
                  c->sync, hot, k + 1, c->rounds, c->batch);
      b[k] = doctx_posts(c, pairs, k, &e, &bops[k], 1, 0);
      berr += e;
    }
    bench_phase("%s sync=%s hot=%d%% round %d/%d native", c->label, c->sync,
                hot, k + 1, c->rounds);
#ifdef DTX_HAVE_REDIS
    n[k] = c->redis ? rd_posts(c, pairs, k, &e) : sq_posts(c, pairs, k, &e);
#else
    n[k] = sq_posts(c, pairs, k, &e);
#endif
    nerr += e;
  }
  free(pairs);
  bench_side_t dm = bench_median_side(d, c->rounds),
               nm = bench_median_side(n, c->rounds);
  if (hot == 0)
    *uniform = dm.ops_s;
  double hu = *uniform > 0 ? dm.ops_s / *uniform : 0;
  bench_row(&(bench_row_t){
      .metric = "post", .backend = c->backend, .sync = c->sync,
      .workload = hot ? "hot90" : "uniform", .unit = "entries/s",
      .native = c->redis ? "MULTI; INCRBY x2; XADD; EXEC (one slot)"
                         : "BEGIN; INSERT entry; UPDATE x2; COMMIT",
      .workers = c->workers, .rounds = c->rounds, .doctx = dm, .nat = nm,
      .extra = json_pack("{s:i,s:i,s:i,s:f,s:f,s:i,s:i}", "hot_pct", hot,
                         "posts", c->posts, "accounts", c->accounts,
                         "hot_over_uniform", hot ? hu : 1.0, "ops_per_post",
                         bench_median(ops, c->rounds), "doctx_failed", derr,
                         "native_failed", nerr)});
  printf("%-16s %-6s %-8s | %9.0f %8.0f %8.0f | %9.0f %8.0f %8.0f | %6.3f "
         "| hot/uniform %.2f, %.1f store ops/post%s\n",
         c->label, c->sync, hot ? "hot90" : "uniform", dm.ops_s, dm.p50_us,
         dm.p99_us, nm.ops_s, nm.p50_us, nm.p99_us,
         nm.ops_s > 0 ? dm.ops_s / nm.ops_s : 0, hot ? hu : 1.0,
         bench_median(ops, c->rounds),
         derr || nerr ? "  (errors!)" : "");
  if (c->batch > 1) {
    bench_side_t bm = bench_median_side(b, c->rounds);
    char wl[32];
    snprintf(wl, sizeof wl, "%s_batch%d", hot ? "hot90" : "uniform",
             c->batch);
    bench_row(&(bench_row_t){
        .metric = "post_many", .backend = c->backend, .sync = c->sync,
        .workload = wl, .unit = "entries/s",
        .native = c->redis ? "MULTI; INCRBY x2; XADD; EXEC (one slot)"
                           : "BEGIN; INSERT entry; UPDATE x2; COMMIT",
        .workers = c->workers, .rounds = c->rounds, .doctx = bm, .nat = nm,
        .extra = json_pack("{s:i,s:i,s:i,s:f,s:f,s:i}", "batch", c->batch,
                           "hot_pct", hot, "posts", c->posts,
                           "over_single_posts",
                           dm.ops_s > 0 ? bm.ops_s / dm.ops_s : 0,
                           "ops_per_post", bench_median(bops, c->rounds),
                           "doctx_failed", berr)});
    printf("%-16s %-6s %-8s | %9.0f %8.0f %8.0f | %9.0f %8.0f %8.0f | %6.3f "
           "| B=%d (latency per call): %.2fx the single posts, %.1f store "
           "ops/post%s\n",
           c->label, c->sync, hot ? "hot90" : "uniform", bm.ops_s, bm.p50_us,
           bm.p99_us, nm.ops_s, nm.p50_us, nm.p99_us,
           nm.ops_s > 0 ? bm.ops_s / nm.ops_s : 0, c->batch,
           dm.ops_s > 0 ? bm.ops_s / dm.ops_s : 0,
           bench_median(bops, c->rounds), berr ? "  (errors!)" : "");
  }
  if (hot == 0) {
    bench_side_t mm = bench_median_side(m, c->rounds);
    double ratio = dm.ops_s > 0 ? mm.ops_s / dm.ops_s : 0;
    bench_row(&(bench_row_t){
        .metric = "post_meta", .backend = c->backend, .sync = c->sync,
        .workload = "uniform_meta", .unit = "entries/s",
        .native = c->redis ? "MULTI; INCRBY x2; XADD; EXEC (one slot)"
                           : "BEGIN; INSERT entry; UPDATE x2; COMMIT",
        .workers = c->workers, .rounds = c->rounds, .doctx = mm, .nat = nm,
        .extra = json_pack("{s:i,s:f,s:f,s:f,s:f,s:i}", "posts", c->posts,
                           "over_plain_posts", ratio, "plain_posts_s",
                           dm.ops_s, "ops_per_post",
                           bench_median(mops, c->rounds), "target", 0.9,
                           "doctx_failed", merr)});
    printf("%-16s %-6s %-8s | %9.0f %8.0f %8.0f | %9.0f %8.0f %8.0f | %6.3f "
           "| meta+ref: %.3fx the plain posts (%.0f/s; target >= 0.9), %.1f "
           "store ops/post%s\n",
           c->label, c->sync, "meta", mm.ops_s, mm.p50_us, mm.p99_us,
           nm.ops_s, nm.p50_us, nm.p99_us,
           nm.ops_s > 0 ? mm.ops_s / nm.ops_s : 0, ratio, dm.ops_s,
           bench_median(mops, c->rounds), merr ? "  (errors!)" : "");
  }
  fflush(stdout);
  return derr || nerr || berr || merr ? 1 : 0;
}

/* ---- ref lookups ------------------------------------------------------------------------ */

#define REF_BATCH 100
#define REF_LOOKUPS 200

/* R entries with unique refs, then REF_LOOKUPS lookups by ref: each must
 * examine exactly one document (the planner reads the {ref: 1} index). */
static int bench_refs(const cfg_t *c) {
  int R = bench_scaled(25000), errs = 0;
  dtx_store_t *st = doctx_open(c, "refs", 0);
  doctx_accounts(st, 2 * REF_BATCH, "r");
  int rc = dtx_ledger_unique_refs(st);
  if (rc < 0)
    die("unique refs", rc);
  dtx_ledger_leg_t legs[REF_BATCH][2];
  char names[2 * REF_BATCH][16];
  for (int i = 0; i < 2 * REF_BATCH; i++)
    snprintf(names[i], sizeof names[i], "r%d", i);
  for (int i = 0; i < REF_BATCH; i++) {
    legs[i][0] = (dtx_ledger_leg_t){names[2 * i], -1};
    legs[i][1] = (dtx_ledger_leg_t){names[2 * i + 1], 1};
  }
  dtx_ledger_post_req_t reqs[REF_BATCH];
  dtx_ledger_result_t res[REF_BATCH];
  char refs[REF_BATCH][32];
  bench_phase("%s ref lookups: posting %d entries with refs", c->label, R);
  double t0 = now_us();
  for (int from = 0; from < R; from += REF_BATCH) {
    int k = R - from < REF_BATCH ? R - from : REF_BATCH;
    for (int i = 0; i < k; i++) {
      snprintf(refs[i], sizeof refs[i], "ref-%d", from + i);
      /* disjoint account pairs: one round per batch */
      reqs[i] = (dtx_ledger_post_req_t){.legs = legs[i], .nlegs = 2,
                                        .ref = refs[i]};
    }
    if (dtx_ledger_post_many(st, reqs, (size_t)k, NULL, res) < 0)
      errs++;
    dtx_ledger_results_clear(res, (size_t)k);
  }
  double post_s = (now_us() - t0) / 1e6;
  bench_phase("%s ref lookups: %d lookups", c->label, REF_LOOKUPS);
  double lat[REF_LOOKUPS];
  int64_t examined = 0, bad = 0;
  unsigned seed = 7;
  for (int i = 0; i < REF_LOOKUPS; i++) {
    char ref[32];
    json_t *out = NULL;
    snprintf(ref, sizeof ref, "ref-%d", (int)(rand_r(&seed) % (unsigned)R));
    int64_t ex0 = dtx__docs_examined;
    double t = now_us();
    rc = dtx_ledger_entries(st, ref, NULL, NULL, &out);
    lat[i] = now_us() - t;
    examined += dtx__docs_examined - ex0;
    if (rc || json_array_size(out) != 1 || dtx__docs_examined - ex0 != 1)
      bad++;
    json_decref(out);
  }
  double p50 = bench_median(lat, REF_LOOKUPS);
  bench_row(&(bench_row_t){
      .metric = "ref_lookup", .backend = c->backend, .sync = c->sync,
      .workload = "unique_refs", .unit = "lookups/s", .native = "-",
      .workers = 1, .rounds = 1,
      .doctx = {.ops_s = p50 > 0 ? 1e6 / p50 : 0, .p50_us = p50},
      .extra = json_pack("{s:i,s:i,s:f,s:f,s:I,s:i}", "entries", R,
                         "lookups", REF_LOOKUPS, "docs_examined_per_lookup",
                         (double)examined / REF_LOOKUPS, "post_s", post_s,
                         "bad_lookups", (json_int_t)bad, "errors", errs)});
  printf("%-16s %-6s %-8s | %d entries with unique refs posted in %.1f s; "
         "%d lookups by ref: p50 %.0f us, %.2f documents examined per "
         "lookup (the {ref: 1} index)%s\n",
         c->label, c->sync, "refs", R, post_s, REF_LOOKUPS, p50,
         (double)examined / REF_LOOKUPS,
         bad || errs ? "  (errors!)" : "");
  fflush(stdout);
  doctx_close(c, st);
  return bad || errs ? 1 : 0;
}

static void usage(void) {
  fprintf(stderr,
          "usage: bench_ledger [--store redis://...] [--label L] "
          "[--backend B] [--accounts N]\n"
          "                    [--posts M] [--workers W] [--rounds R] "
          "[--hot PCT]\n"
          "                    [--sync full|normal|both] [--legs L] "
          "[--reads K] [--batch K]\n");
}

int main(int argc, char **argv) {
  cfg_t c = {.accounts = 1000, .workers = 8, .rounds = 3, .legs = 1000,
             .batch = 1};
  const char *sync = "both";
  int hot = -1, posts = 0;
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
    else if (!strcmp(a, "--accounts"))
      c.accounts = atoi(v);
    else if (!strcmp(a, "--posts"))
      posts = atoi(v);
    else if (!strcmp(a, "--workers"))
      c.workers = atoi(v);
    else if (!strcmp(a, "--rounds"))
      c.rounds = atoi(v);
    else if (!strcmp(a, "--hot"))
      hot = atoi(v);
    else if (!strcmp(a, "--sync"))
      sync = v;
    else if (!strcmp(a, "--legs"))
      c.legs = atoi(v);
    else if (!strcmp(a, "--reads"))
      c.reads = atoi(v);
    else if (!strcmp(a, "--batch"))
      c.batch = atoi(v);
    else {
      usage();
      return 2;
    }
  }
  if (!c.reads)
    c.reads = bench_scaled(100);
  if (c.accounts < 2 || c.workers < 1 || c.workers > 256 || c.rounds < 1 ||
      c.rounds > 16 || posts < 0 || hot > 100 || c.legs < 1 || c.reads < 1 ||
      c.batch < 1 || c.batch > 1000 ||
      (strcmp(sync, "both") && strcmp(sync, "full") &&
       strcmp(sync, "normal"))) {
    usage();
    return 2;
  }
  c.redis = c.store != NULL;
  if (c.redis) {
#ifdef DTX_HAVE_REDIS
    int rc = native_target(c.store, TAG, &c.uri, c.host, &c.port, "bench_ledger");
    if (rc)
      return rc;
#else
    fprintf(stderr, "bench_ledger: doctx was built without Redis\n");
    return 2;
#endif
  }
  c.label = c.label ? c.label : c.redis ? "redis" : "sqlite";
  c.backend = c.backend ? c.backend : c.redis ? c.label : "sqlite";
  char dir[] = "/tmp/dtx-bench-ledger-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  c.dir = dir;
  bench_begin("bench_ledger", c.redis ? c.label : NULL, argc, argv);
  printf("ledger: 2-leg entries among %d accounts, %d writers + 1 committer, "
         "median of %d rounds; balance reads at %d legs past the cache\n",
         c.accounts, c.workers, c.rounds, c.legs);
  printf("%-16s %-6s %-8s | %9s %8s %8s | %9s %8s %8s | %6s |\n", "label",
         "sync", "workload", "doctx/s", "p50(us)", "p99(us)", "native/s",
         "p50(us)", "p99(us)", "ratio");
  int rc = 0;
  const char *syncs[2] = {"normal", "full"};
  for (int s = 0; s < 2; s++) {
    if (c.redis ? s > 0 : strcmp(sync, "both") && strcmp(sync, syncs[s]))
      continue;
    c.sync = c.redis ? "none" : syncs[s];
    c.posts = posts ? posts : bench_scaled(c.redis || s == 1 ? 600 : 2000);
    double uniform = 0;
    if (hot >= 0) {
      rc |= bench_posts(&c, hot, &uniform);
    } else {
      rc |= bench_posts(&c, 0, &uniform);
      rc |= bench_posts(&c, 90, &uniform);
    }
    if (s == 0)
      rc |= bench_reads(&c);
    if (s == 0 || c.redis)
      rc |= bench_refs(&c);
  }
#ifdef DTX_HAVE_REDIS
  if (c.redis)
    dtx__rd_uri_free(&c.uri);
#endif
  if (bench_rmdir(dir))
    rc = 1;
  return bench_end(rc);
}
