/* bench_scale.c -- how cost grows with the work (issue 26): the time per
 * document of five operations at N = 10^4 and 10^5 documents (and 10^6
 * with BENCH_SCALE >= 4), and the growth ratio t(10N) / (10 t(N)) of each
 * (1.0: linear; 1.0 or less is what the library promises, more is a
 * defect to explain in docs/benchmarks.md, "How cost grows with the
 * work").  The rows:
 *   recover  dtx_recover over N transfers of which 10 % were abandoned
 *            mid-flight by a real crash (below);
 *   audit    dtx_audit (settled) over N transfers and N/10 accounts;
 *   list     dtx_transfer_list paging to the end by keyset (page.after),
 *            100 a page;
 *   find     dtx_store_find of {from: ACCOUNT} on transfers with an index
 *            {from: 1}, once per account (N/10 finds, N documents found);
 *   balance  dtx_ledger_balance of every one of N/10 ledger accounts over
 *            N 2-leg entries, the cache current (the committer ran);
 *   commit   the committer catching up those N entries, posted while no
 *            committer ran (once per population, as recover).
 * Time per document is the operation's whole time over N (the transfers,
 * or the ledger entries): the accounts are N/10 at every N, so they do not
 * change the ratio.
 *
 * The population of the transfer rows is real work through the public
 * API: N/10 accounts (dtx_account_create), then N transfers in batches of
 * 100 (dtx_transfer_execute_many).  Every tenth batch runs in a forked
 * child armed with DOCTX_FAULT=POINT:crash:1, which _exit(137)s at the
 * first arrival at POINT as the crash tests' SIGKILL would: at
 * transfer.commit (the batch left preparing, payers debited: recover rolls
 * them back), or at transfer.finish (left committed, credited: recover
 * finishes them), alternately.  So recover meets the states a crashed
 * executor really leaves, written by the protocol itself, and nothing in
 * this process is killed.  recover runs once per population (it changes
 * it); the read-only rows then run on the recovered population, median of
 * --rounds.  Each row checks its answer (recover's counts, the audit
 * clean, every transfer listed and found once, each balance equal to the
 * legs posted).
 *
 * usage: bench_scale [--redis URI] [--no-sqlite] [--n N[,N...]]
 *                    [--rounds R] [--sync normal|full] [--rows R[,R...]]
 *                    [--cache-mb MB] [--accounts K]
 * Targets: SQLite (a file per N, sync=normal by default; --cache-mb sets
 * the URI's cache_mb, each connection's page cache) unless
 * --no-sqlite, and the Redis store at URI (a namespace of its own per
 * population, emptied afterwards) with --redis.  --n replaces the N list
 * (the smoke test runs tiny ones); --rows runs only the rows named (for a
 * profile of one).  Prints a table; with BENCH_RESULTS
 * writes bench_scale.json (the common format) and scale.json (the table).
 * Exit 1 when a check failed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "bench_common.h"
#include "doctx.h"

#define MAXN 8
#define BATCH 100 /* transfers per dtx_transfer_execute_many, and per child */
#define PAGE 100  /* transfers per page of the list row */

enum { R_RECOVER, R_AUDIT, R_LIST, R_FIND, R_BALANCE, R_COMMIT, NROWS };
static const char *const row_name[NROWS] = {"recover", "audit", "list", "find",
                                            "balance", "commit"};
static const char *const row_what[NROWS] = {
    "dtx_recover, 10% abandoned mid-flight",
    "dtx_audit settled, N transfers + N/10 accounts",
    "dtx_transfer_list paging to the end by after, 100 a page",
    "dtx_store_find {from} indexed, one per account",
    "dtx_ledger_balance of every account, cache current",
    "the ledger committer catching up N uncommitted entries (once)"};

typedef struct target {
  const char *label; /* "sqlite", "redis-standalone" */
  const char *uri;   /* Redis: the base URI; SQLite: NULL */
  double ns[NROWS][MAXN]; /* ns per document; < 0: not measured */
} target_t;

typedef struct cfg {
  int n[MAXN], nn, rounds;
  int want[NROWS]; /* the rows to run (--rows) */
  const char *sync, *dir;
  const char *cache_mb; /* NULL: the URI names none */
} cfg_t;

static int failures;

static void fail(const char *what, int rc) {
  fprintf(stderr, "bench_scale: %s: %s (%s)\n", what,
          rc < 0 ? dtx_errname(rc) : "wrong answer",
          rc < 0 ? dtx_errdetail() : "");
  failures++;
}

/* The URI of a fresh store: a new SQLite file, or on Redis a namespace of
 * its own -- not the same store with its collections dropped, since the
 * pattern kit creates a pattern's indexes once per URI and process
 * (bench_ledger.c says more). */
static void fresh_uri(const cfg_t *c, const target_t *t, const char *what,
                      int n, char *uri, size_t len) {
  static int opened;
  if (t->uri)
    snprintf(uri, len, "%s%cns=sc%d-%d", t->uri,
             strchr(t->uri, '?') ? '&' : '?', (int)getpid() % 100000,
             opened++);
  else
    snprintf(uri, len, "sqlite:%s/%s-%d-%d.db?sync=%s%s%s", c->dir, what, n,
             opened++, c->sync, c->cache_mb ? "&cache_mb=" : "",
             c->cache_mb ? c->cache_mb : "");
}

/* A fresh store (fresh_uri) opened, its URI in uri; NULL when the open
 * failed (counted). */
static dtx_store_t *open_fresh(const cfg_t *c, const target_t *t,
                               const char *what, int n, char *uri,
                               size_t len) {
  dtx_store_t *st;
  int rc;
  fresh_uri(c, t, what, n, uri, len);
  if ((rc = dtx_store_open(uri, &st)) < 0) {
    fail("open", rc);
    return NULL;
  }
  return st;
}

/* Closes a store; on Redis empties its namespace first. */
static void close_store(const target_t *t, dtx_store_t *st) {
  if (t->uri) {
    json_t *names = NULL, *nm;
    size_t i;
    if (dtx_store_list_collections(st, &names) == 0)
      json_array_foreach(names, i, nm)
          dtx_store_drop_collection_ex(st, json_string_value(nm),
                                       &(dtx_drop_opts_t){1});
    json_decref(names);
  }
  dtx_store_close(st);
}

/* --accounts K fixes the count at every N (so a row's growth can be told
 * apart from the accounts' share of it); 0: N/10. */
static int fixed_accounts;
static int accounts_for(int n) {
  if (fixed_accounts)
    return fixed_accounts;
  return n / 10 < 2 ? 2 : n / 10;
}

/* ---- the transfer population --------------------------------------------------- */

/* Runs batch p[0..k) in a child that crashes at the first arrival at
 * point: 1 when it did (exit 137), 0 otherwise. */
static int crashed_batch(const char *uri, const pair_t *p, int k,
                         const char *point) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return 0;
  if (pid == 0) {
    char spec[128];
    dtx_store_t *st;
    double lat[BATCH];
    int dn = open("/dev/null", O_WRONLY);
    if (dn >= 0)
      dup2(dn, 2); /* the fault's own "doctx: fault: ..." line */
    snprintf(spec, sizeof spec, "%s:crash:1", point);
    setenv("DOCTX_FAULT", spec, 1);
    if (dtx_fault_check() != 0 || dtx_store_open(uri, &st) != 0)
      _exit(3);
    bench_transfer_many(st, p, k, lat);
    _exit(0); /* the point was not reached */
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 137;
}

/* N/10 accounts and n transfers, every tenth batch abandoned mid-flight;
 * *abandoned receives how many transfers were. */
static dtx_store_t *transfer_population(const cfg_t *c, const target_t *t,
                                        int n, int *abandoned) {
  char uri[600];
  int a = accounts_for(n), rc;
  dtx_store_t *st = open_fresh(c, t, "transfers", n, uri, sizeof uri);
  if (!st)
    return NULL;
  bench_phase("%s N=%d: %d accounts", t->label, n, a);
  for (int i = 0; i < a; i++) {
    char id[32];
    snprintf(id, sizeof id, "a%d", i);
    if ((rc = dtx_account_create(
             st, id, &(dtx_account_opts_t){.balance = 1000000000}, NULL)) < 0) {
      fail("account create", rc);
      close_store(t, st);
      return NULL;
    }
  }
  pair_t *pairs = malloc(sizeof *pairs * (size_t)n);
  double lat[BATCH];
  if (!pairs) {
    fail("out of memory", DTX_ENOMEM);
    close_store(t, st);
    return NULL;
  }
  bench_pairs(pairs, n, a, 0);
  *abandoned = 0;
  for (int b = 0, i = 0; i < n; b++, i += BATCH) {
    int k = n - i < BATCH ? n - i : BATCH;
    if (b % 10 == 9) {
      const char *point = (b / 10) % 2 ? "transfer.finish" : "transfer.commit";
      bench_phase("%s N=%d: transfers %d/%d (crash at %s)", t->label, n, i, n,
                  point);
      if (!crashed_batch(uri, pairs + i, k, point))
        fail("a child armed to crash did not", 0);
      *abandoned += k;
    } else {
      if (b % 50 == 0)
        bench_phase("%s N=%d: transfers %d/%d", t->label, n, i, n);
      if (bench_transfer_many(st, pairs + i, k, lat))
        fail("transfer batch", -1);
    }
  }
  free(pairs);
  return st;
}

/* The number of transfers in state s. */
static int64_t count_state(dtx_store_t *st, const char *s) {
  int64_t k = -1;
  json_t *f = json_pack("{s:s}", "state", s);
  if (dtx_store_count(st, DTX_TRANSFERS, f, &k) < 0)
    k = -1;
  json_decref(f);
  return k;
}

/* ---- the rows ----------------------------------------------------------------------- */

static int64_t ran(const json_t *sum, const char *what) {
  return json_integer_value(json_object_get(
      json_object_get(json_object_get(json_object_get(sum, "patterns"),
                                      "transfer"),
                      "ran"),
      what));
}

/* recover, once: microseconds, or -1. */
static double row_recover(dtx_store_t *st, int n, int abandoned) {
  int64_t before = n - count_state(st, "succeeded");
  json_t *sum = NULL;
  double t0 = now_us();
  /* A pass has ONE budget, by default the store's retry window (Redis:
   * retry_ms, 10 s): at 10^5 on Redis a pass over 10^4 abandoned
   * transfers outlasts it and stops half way (UNAVAILABLE, the rest left
   * for the next pass).  The row measures the work, so it gives the pass
   * ten minutes (docs/benchmarks.md, "How cost grows with the work"). */
  int rc = dtx_recover(
      st, &(dtx_recover_opts_t){.older_than_ms = 0, .deadline_ms = 600000},
      &sum);
  double el = now_us() - t0;
  int64_t done = ran(sum, "rolled_back") + ran(sum, "finished");
  json_decref(sum);
  if (rc < 0 || before != abandoned || done != abandoned ||
      count_state(st, "succeeded") + count_state(st, "failed") != n) {
    fprintf(stderr, "bench_scale: recover: %d abandoned, %lld not succeeded "
            "before, %lld recovered\n", abandoned, (long long)before,
            (long long)done);
    fail("recover", rc);
    return -1;
  }
  return el;
}

static double row_audit(dtx_store_t *st, int n, const void *ctx) {
  json_t *rep = NULL;
  (void)n;
  (void)ctx;
  double t0 = now_us();
  int rc = dtx_audit(st, DTX_AUDIT_SETTLED, &rep);
  double el = now_us() - t0;
  json_decref(rep);
  if (rc != 0) {
    fail("audit", rc);
    return -1;
  }
  return el;
}

/* Paging to the end by keyset (dtx_page_t.after: each page starts after
 * the last _id of the one before), every page read and timed: a page
 * costs the same however deep it is, so the whole walk is linear.  (The
 * O(skip) way, --skip from the start each time, was this row until
 * session 32: 31.5x per decade on SQLite.)  The pages must hold every
 * transfer once: n in all, each page full but the last, no _id twice. */
static double row_list(dtx_store_t *st, int n, const void *ctx) {
  (void)ctx;
  double el = 0;
  char after[160] = "";
  int64_t seen = 0;
  for (;;) {
    json_t *page = NULL;
    double t0 = now_us();
    int rc = dtx_transfer_list(
        st, NULL, &(dtx_page_t){.limit = PAGE, .after = *after ? after : NULL},
        &page);
    el += now_us() - t0;
    if (rc < 0) {
      fail("transfer list", rc);
      return -1;
    }
    size_t k = json_array_size(page);
    const char *first = k ? json_string_value(json_object_get(
                                json_array_get(page, 0), "_id"))
                          : NULL;
    const char *last = k ? json_string_value(json_object_get(
                               json_array_get(page, k - 1), "_id"))
                         : NULL;
    int bad = (k && (!first || !last || strcmp(first, after) == 0)) ||
              (k < PAGE && seen + (int64_t)k != n) || seen + (int64_t)k > n;
    if (last)
      snprintf(after, sizeof after, "%s", last);
    seen += (int64_t)k;
    json_decref(page);
    if (bad) {
      fail("transfer list: pages that do not hold every transfer once", 0);
      return -1;
    }
    if (k < PAGE)
      break;
  }
  return el;
}

static double row_find(dtx_store_t *st, int n, const void *ctx) {
  (void)ctx;
  int a = accounts_for(n);
  int64_t total = 0;
  double t0 = now_us();
  for (int i = 0; i < a; i++) {
    char id[32];
    json_t *docs = NULL, *f;
    snprintf(id, sizeof id, "a%d", i);
    f = json_pack("{s:s}", "from", id);
    int rc = dtx_store_find(st, DTX_TRANSFERS, f, NULL, &docs);
    json_decref(f);
    if (rc < 0) {
      fail("find", rc);
      return -1;
    }
    total += (int64_t)json_array_size(docs);
    json_decref(docs);
  }
  double el = now_us() - t0;
  if (total != n) {
    fail("find: not every transfer once", 0);
    return -1;
  }
  return el;
}

/* ---- the ledger population and its row ------------------------------------------ */

/* N/10 ledger accounts without a floor and n 2-leg entries among them in
 * batches of 256 (dtx_ledger_post_many), then the committer once, so the
 * cache is current; bal[a] receives each account's balance, *commit_us
 * the time the committer took to catch up the n entries (the commit row:
 * a committer restarted after an outage; each round once read the whole
 * backlog, docs/benchmarks.md). */
static dtx_store_t *ledger_population(const cfg_t *c, const target_t *t,
                                      int n, int64_t *bal, double *commit_us) {
  char uri[600], (*ids)[32];
  int a = accounts_for(n), rc;
  dtx_store_t *st = open_fresh(c, t, "ledger", n, uri, sizeof uri);
  if (!st)
    return NULL;
  bench_phase("%s N=%d: %d ledger accounts", t->label, n, a);
  ids = malloc(sizeof *ids * (size_t)a);
  pair_t *pairs = malloc(sizeof *pairs * (size_t)n);
  if (!ids || !pairs) {
    fail("out of memory", DTX_ENOMEM);
    free(ids);
    free(pairs);
    close_store(t, st);
    return NULL;
  }
  for (int i = 0; i < a; i++) {
    snprintf(ids[i], sizeof ids[i], "l%d", i);
    bal[i] = 0;
    if ((rc = dtx_ledger_account_create(
             st, ids[i], &(dtx_ledger_limit_t){.no_min_balance = 1}, NULL)) <
        0) {
      fail("ledger account create", rc);
      free(ids);
      free(pairs);
      close_store(t, st);
      return NULL;
    }
  }
  bench_pairs(pairs, n, a, 0);
  dtx_ledger_leg_t legs[256][2];
  dtx_ledger_post_req_t reqs[256];
  dtx_ledger_result_t res[256];
  for (int i = 0; i < n; i += 256) {
    int k = n - i < 256 ? n - i : 256;
    if (i % 5120 == 0)
      bench_phase("%s N=%d: ledger entries %d/%d", t->label, n, i, n);
    for (int j = 0; j < k; j++) {
      const pair_t *p = &pairs[i + j];
      legs[j][0] = (dtx_ledger_leg_t){ids[p->from], -p->amount};
      legs[j][1] = (dtx_ledger_leg_t){ids[p->to], p->amount};
      reqs[j] = (dtx_ledger_post_req_t){.legs = legs[j], .nlegs = 2};
      bal[p->from] -= p->amount;
      bal[p->to] += p->amount;
    }
    if ((rc = dtx_ledger_post_many(st, reqs, (size_t)k, NULL, res)) < 0)
      fail("ledger post_many", rc);
    dtx_ledger_results_clear(res, (size_t)k);
  }
  free(pairs);
  free(ids);
  bench_phase("%s N=%d: the committer", t->label, n);
  double t0 = now_us();
  if ((rc = dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                           NULL)) < 0)
    fail("committer", rc);
  *commit_us = rc < 0 ? -1 : now_us() - t0;
  return st;
}

/* ctx: the balances the population posted, one per account. */
static double row_balance(dtx_store_t *st, int n, const void *ctx) {
  const int64_t *bal = ctx;
  int a = accounts_for(n);
  double t0 = now_us();
  for (int i = 0; i < a; i++) {
    char id[32];
    json_t *b = NULL;
    snprintf(id, sizeof id, "l%d", i);
    int rc = dtx_ledger_balance(st, id, DTX_LEDGER_LATEST, &b);
    int64_t v = json_integer_value(json_object_get(b, "balance"));
    json_decref(b);
    if (rc < 0 || v != bal[i]) {
      fail("ledger balance", rc);
      return -1;
    }
  }
  return now_us() - t0;
}

/* ---- driving ------------------------------------------------------------------------ */

/* A read-only row: its time in microseconds, or -1 when it failed; ctx
 * is what the row checks its answers against (NULL for most). */
typedef double (*read_row_fn)(dtx_store_t *st, int n, const void *ctx);

/* The median of rounds of fn, as ns per document; -1 when one failed. */
static double median_of(const cfg_t *c, read_row_fn fn, dtx_store_t *st,
                        int n, const void *ctx) {
  double v[16];
  for (int r = 0; r < c->rounds; r++)
    if ((v[r] = fn(st, n, ctx)) < 0)
      return -1;
  return bench_median(v, c->rounds) * 1e3 / n;
}

static void run_target(const cfg_t *c, target_t *t) {
  for (int k = 0; k < c->nn; k++) {
    int n = c->n[k], abandoned = 0, rc;
    int tx_rows = c->want[R_RECOVER] || c->want[R_AUDIT] || c->want[R_LIST] ||
                  c->want[R_FIND];
    dtx_store_t *st = tx_rows ? transfer_population(c, t, n, &abandoned) : NULL;
    if (st) {
      bench_phase("%s N=%d: recover (%d abandoned)", t->label, n, abandoned);
      /* recover runs even when not asked for: the other rows read a
       * settled population. */
      double us = row_recover(st, n, abandoned);
      t->ns[R_RECOVER][k] = us < 0 || !c->want[R_RECOVER] ? -1 : us * 1e3 / n;
      if (c->want[R_AUDIT]) {
        bench_phase("%s N=%d: audit", t->label, n);
        t->ns[R_AUDIT][k] = median_of(c, row_audit, st, n, NULL);
      }
      if (c->want[R_LIST]) {
        bench_phase("%s N=%d: transfer list", t->label, n);
        t->ns[R_LIST][k] = median_of(c, row_list, st, n, NULL);
      }
      if (c->want[R_FIND]) {
        bench_phase("%s N=%d: index {from: 1}, find", t->label, n);
        json_t *keys = json_pack("{s:i}", "from", 1);
        if ((rc = dtx_store_create_index(st, DTX_TRANSFERS, keys, NULL,
                                         NULL)) < 0)
          fail("create index", rc);
        json_decref(keys);
        t->ns[R_FIND][k] = median_of(c, row_find, st, n, NULL);
      }
      close_store(t, st);
    }
    if (!c->want[R_BALANCE] && !c->want[R_COMMIT])
      continue;
    int64_t *bal = calloc((size_t)accounts_for(n), sizeof *bal);
    double commit_us = -1;
    if (!bal)
      fail("out of memory", DTX_ENOMEM);
    else if ((st = ledger_population(c, t, n, bal, &commit_us))) {
      t->ns[R_COMMIT][k] =
          commit_us < 0 || !c->want[R_COMMIT] ? -1 : commit_us * 1e3 / n;
      if (c->want[R_BALANCE]) {
        bench_phase("%s N=%d: ledger balances", t->label, n);
        t->ns[R_BALANCE][k] = median_of(c, row_balance, st, n, bal);
      }
      close_store(t, st);
    }
    free(bal);
  }
}

/* t(10N) / (10 t(N)) generalised to any two Ns: the per-document time's
 * ratio (1.0: linear); < 0 when either is missing. */
static double growth(const double *ns, int k) {
  return ns[k] > 0 && ns[k - 1] > 0 ? ns[k] / ns[k - 1] : -1;
}

static void report(const cfg_t *c, target_t *ts, int nt) {
  json_t *rows = json_array();
  printf("\n%-8s %-17s", "row", "backend");
  for (int k = 0; k < c->nn; k++)
    printf(" %11s", "ns/doc at");
  for (int k = 1; k < c->nn; k++)
    printf(" %10s", "growth");
  printf("\n%-8s %-17s", "", "");
  for (int k = 0; k < c->nn; k++)
    printf("  N=%-8d", c->n[k]);
  for (int k = 1; k < c->nn; k++) {
    char g[32];
    snprintf(g, sizeof g, "%d->%d", c->n[k - 1], c->n[k]);
    printf(" %10s", g);
  }
  printf("\n");
  for (int r = 0; r < NROWS; r++)
    for (int i = 0; i < nt && c->want[r]; i++) {
      target_t *t = &ts[i];
      json_t *ns = json_array(), *g = json_array(), *n = json_array();
      printf("%-8s %-17s", row_name[r], t->label);
      for (int k = 0; k < c->nn; k++) {
        printf(" %11.0f", t->ns[r][k]);
        json_array_append_new(n, json_integer(c->n[k]));
        json_array_append_new(ns, bench_num(t->ns[r][k]));
      }
      for (int k = 1; k < c->nn; k++) {
        double gr = growth(t->ns[r], k);
        printf(" %9.2f%s", gr, gr > 1.5 ? "!" : " ");
        json_array_append_new(g, bench_num(gr));
      }
      printf("\n");
      json_array_append_new(
          rows, json_pack("{s:s,s:s,s:s,s:o,s:o,s:o}", "row", row_name[r],
                          "what", row_what[r], "backend", t->label, "n", n,
                          "ns_per_doc", ns, "growth", g));
      bench_row(&(bench_row_t){
          .metric = row_name[r], .backend = t->label,
          .sync = t->uri ? "none" : c->sync, .workload = "scale",
          .unit = "ns/doc", .native = "", .workers = 1, .rounds = c->rounds,
          .doctx = {-1, -1, -1}, .nat = {-1, -1, -1},
          .extra = json_pack("{s:O,s:O}", "ns_per_doc", ns, "growth", g)});
    }
  printf("(growth: ns/doc at the larger N over ns/doc at the smaller; 1.00 "
         "linear, ! above 1.5)\n");
  const char *dir = getenv("BENCH_RESULTS");
  if (dir && *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/scale.json", dir);
    json_t *doc = json_pack("{s:s,s:o,s:o,s:i}", "bench", "bench_scale",
                            "machine", bench_machine(), "rows", rows,
                            "rounds", c->rounds);
    if (json_dump_file(doc, path, JSON_INDENT(1) | JSON_REAL_PRECISION(6))) {
      fprintf(stderr, "bench_scale: cannot write %s\n", path);
      failures++;
    }
    json_decref(doc);
  } else {
    json_decref(rows);
  }
}

int main(int argc, char **argv) {
  cfg_t c = {.rounds = 3, .sync = "normal"};
  target_t ts[2];
  int nt = 0, sqlite = 1;
  const char *redis = NULL;
  char dir[] = "/tmp/dtx-bench-scale-XXXXXX";
  for (int r = 0; r < NROWS; r++)
    c.want[r] = 1;
  c.n[c.nn++] = 10000;
  c.n[c.nn++] = 100000;
  if (bench_scale() >= 4)
    c.n[c.nn++] = 1000000;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-sqlite")) {
      sqlite = 0;
      continue;
    }
    if (!v) {
      fprintf(stderr, "%s needs a value\n", a);
      return 2;
    }
    i++;
    if (!strcmp(a, "--redis"))
      redis = v;
    else if (!strcmp(a, "--rounds"))
      c.rounds = atoi(v);
    else if (!strcmp(a, "--sync"))
      c.sync = v;
    else if (!strcmp(a, "--accounts"))
      fixed_accounts = atoi(v);
    else if (!strcmp(a, "--cache-mb"))
      c.cache_mb = v; /* the store checks it, as any URI option */
    else if (!strcmp(a, "--rows")) {
      memset(c.want, 0, sizeof c.want);
      for (int r = 0; r < NROWS; r++) {
        const char *p = strstr(v, row_name[r]);
        size_t l = strlen(row_name[r]);
        c.want[r] = p && (p == v || p[-1] == ',') && (p[l] == ',' || !p[l]);
      }
    }
    else if (!strcmp(a, "--n")) {
      c.nn = 0;
      for (const char *p = v; *p && c.nn < MAXN; p = strchr(p, ',') ? strchr(p, ',') + 1 : "")
        c.n[c.nn++] = atoi(p);
    } else {
      fprintf(stderr, "unknown option %s\n", a);
      return 2;
    }
  }
  int bad = c.rounds < 1 || c.rounds > 16 || c.nn < 1 ||
            (strcmp(c.sync, "normal") && strcmp(c.sync, "full")) ||
            (!sqlite && !redis);
  int any = 0;
  for (int r = 0; r < NROWS; r++)
    any |= c.want[r];
  bad |= !any;
  for (int k = 0; k < c.nn; k++)
    bad |= c.n[k] < 1 || c.n[k] > 10000000;
  bad |= fixed_accounts < 0 || fixed_accounts == 1 || fixed_accounts > 1000000;
  if (bad) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  c.dir = dir;
  if (sqlite)
    ts[nt++] = (target_t){.label = "sqlite"};
  if (redis)
    ts[nt++] = (target_t){.label = "redis-standalone", .uri = redis};
  bench_begin("bench_scale", NULL, argc, argv);
  printf("scale: time per document, median of %d rounds (recover: 1)\n",
         c.rounds);
  for (int i = 0; i < nt; i++) {
    for (int r = 0; r < NROWS; r++)
      for (int k = 0; k < MAXN; k++)
        ts[i].ns[r][k] = -1;
    run_target(&c, &ts[i]);
  }
  report(&c, ts, nt);
  int rc = bench_rmdir(dir);
  return bench_end(failures ? 1 : rc);
}
