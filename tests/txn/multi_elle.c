/* multi_elle.c -- the anomaly workload of multi-document transactions
 * (docs/transactions.md; the checker is tests/txn/elle.c, docs/testing.md
 * "The anomaly checker"), on a real store:
 *  - THREADS threads run random list-append transactions over KEYS
 *    documents {_id: k, list: [...]} through dtx_txn_run: 1-4 operations
 *    each, an append ($push of a value unique in the whole run, upserting
 *    the document) or a read (find_one of the document); every attempt is
 *    one line of the history (a retried attempt: aborted; UNAVAILABLE:
 *    unknown), and the checker judges the history in this process.  One
 *    of the threads scans instead: it reads every key in order, in one
 *    read-only transaction.
 *    Under snapshot: none of G0, G1a, G1b, G1c, G-single (nor a lost
 *    append, incompatible-order); under serializable: none of those, nor
 *    G2.
 *  - The suite must be able to fail: a child process armed with the
 *    test-only switch DTX_TXN_TEST_BREAK (src/txn/multi/test_break.c)
 *    runs the same workload with one check switched off -- "snapshot"
 *    (reads ignore the snapshot timestamp) must give G-single under
 *    snapshot, "readlock" (serializable locks nothing it read) must give
 *    G2 under serializable -- after a deterministic probe that the check
 *    is off (a read after a concurrent commit; write skew by hand).
 *  - Not armed, the switch is ignored: this process runs its clean
 *    workloads with DTX_TXN_TEST_BREAK=snapshot set, and the probe shows
 *    the snapshot kept.
 *
 * usage: txn_multi_elle STORE-URI   (the collections it uses are dropped
 * first).  DTX_ELLE_MS: the milliseconds of each clean run (default 1000);
 * the clean runs start with no documents, so reads of absent documents
 * (locked under serializable by a stub, docs/transactions.md) are in the
 * history; DTX_ELLE_SEED=1 creates them first (seed_keys). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "elle.h"
#include "testlib.h"
#include "txn/multi/multi.h" /* dtx__txn_break_arm: the test-only switch */

#define THREADS 6
#define KEYS 6
#define COLL "me_lists"
#define PROBE "me_probe"
#define BREAK_ROUND_MS 700
#define BREAK_ROUNDS 12 /* until the anomaly shows: at most ~9 s */

static const char *uri;
static const char *self_path;

static void drop_all(dtx_store_t *st) {
  static const char *const colls[] = {"txn_records", "txn_clock", COLL, PROBE,
                                      NULL};
  for (int i = 0; colls[i]; i++)
    dtx_store_drop_collection_ex(st, colls[i], &(dtx_drop_opts_t){1});
}

static const char *key_name(int k) {
  static const char *const names[KEYS] = {"k0", "k1", "k2",
                                          "k3", "k4", "k5"};
  return names[k];
}

/* The KEYS documents, each with an empty list.  They exist before the
 * run: serializable does not lock a document read as absent
 * (docs/transactions.md, "Isolation": phase 1's limits), so a run over
 * absent documents shows G2 under serializable (write skew through
 * creations), which is that known gap, not what this suite measures. */
static int seed_keys(dtx_store_t *st) {
  json_t *docs = json_array();
  for (int k = 0; docs && k < KEYS; k++)
    json_array_append_new(docs, json_pack("{s:s,s:[]}", "_id", key_name(k),
                                          "list"));
  int rc = docs ? dtx_store_insert_many(st, COLL, docs, NULL, NULL)
                : DTX_ENOMEM;
  json_decref(docs);
  return rc;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the history ---------------------------------------------------------- */

static struct {
  pthread_mutex_t mu;
  char *buf;
  size_t len, cap;
  long committed, aborted, unknown, errors;
} hist = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void hist_reset(void) {
  free(hist.buf);
  hist.buf = NULL;
  hist.len = hist.cap = 0;
  hist.committed = hist.aborted = hist.unknown = hist.errors = 0;
}

/* One attempt, in the order the attempts ended (the checker's format). */
static void hist_add(const char *id, const char *outcome, json_t *ops) {
  json_t *line = json_pack("{s:s,s:s,s:O}", "id", id, "outcome", outcome,
                           "ops", ops);
  char *s = line ? json_dumps(line, JSON_COMPACT) : NULL;
  json_decref(line);
  if (!s) {
    fprintf(stderr, "multi_elle: out of memory\n");
    abort();
  }
  size_t n = strlen(s);
  pthread_mutex_lock(&hist.mu);
  if (hist.len + n + 2 > hist.cap) {
    size_t cap = hist.cap ? hist.cap * 2 : 1 << 16;
    while (cap < hist.len + n + 2)
      cap *= 2;
    char *b = realloc(hist.buf, cap);
    if (!b)
      abort();
    hist.buf = b;
    hist.cap = cap;
  }
  memcpy(hist.buf + hist.len, s, n);
  hist.len += n;
  hist.buf[hist.len++] = '\n';
  hist.buf[hist.len] = '\0';
  if (strcmp(outcome, "committed") == 0)
    hist.committed++;
  else if (strcmp(outcome, "aborted") == 0)
    hist.aborted++;
  else
    hist.unknown++;
  pthread_mutex_unlock(&hist.mu);
  free(s);
}

/* ---- the workload ----------------------------------------------------------- */

static atomic_llong next_value = 1; /* appended values: unique in the run */
static atomic_int stop_run;

typedef struct {
  unsigned seed;
  int isolation;
  json_t *ops; /* the attempt under way (NULL: none) */
  char id[130];
  int body_done; /* the attempt's operations all returned 0 */
  int scan;      /* reads every key, in order, and writes nothing */
} worker_t;

/* One attempt of dtx_txn_run.  Being called again means the previous
 * attempt ended in a conflict: it committed nothing. */
static int one_txn(dtx_txn_t *t, void *arg) {
  worker_t *w = arg;
  if (w->ops) {
    hist_add(w->id, "aborted", w->ops);
    json_decref(w->ops);
  }
  w->ops = json_array();
  w->body_done = 0;
  snprintf(w->id, sizeof w->id, "%s", dtx_txn_id(t));
  int n = w->scan ? KEYS : 1 + (int)(rand_r(&w->seed) % 4), rc = 0;
  for (int i = 0; rc == 0 && i < n; i++) {
    const char *k = key_name(w->scan ? i : (int)(rand_r(&w->seed) % KEYS));
    json_t *f = json_pack("{s:s}", "_id", k);
    if (!w->scan && rand_r(&w->seed) % 2) {
      long long v = atomic_fetch_add(&next_value, 1);
      json_t *u = json_pack("{s:{s:I}}", "$push", "list", (json_int_t)v);
      rc = dtx_txn_update(t, COLL, f, u, 1, NULL);
      if (rc == 0)
        json_array_append_new(w->ops,
                              json_pack("[s,s,I]", "append", k, (json_int_t)v));
      json_decref(u);
    } else {
      json_t *d = NULL;
      rc = dtx_txn_find_one(t, COLL, f, &d);
      if (rc == 0) {
        json_t *l = json_object_get(d, "list");
        json_array_append_new(w->ops,
                              json_pack("[s,s,O]", "r", k, l ? l : json_null()));
      }
      json_decref(d);
    }
    json_decref(f);
    /* Every other operation, a pause inside the transaction of up to
     * 20 ms -- longer than a 2PC commit on SQLite, whose steps each wait
     * for the disk (3-4 ms a step here) -- so that another transaction's
     * commit, from its first intent to its commit point, can land between
     * two of its reads.  With pauses of up to 3 or 8 ms, read skew under
     * the snapshot break showed in fewer than half of the 0.7 s rounds
     * on SQLite. */
    if (rand_r(&w->seed) % 2 == 0)
      usleep(rand_r(&w->seed) % 20000);
  }
  w->body_done = rc == 0;
  return rc;
}

static void *worker(void *arg) {
  worker_t *w = arg;
  dtx_store_t *st = dtx_t_open(uri);
  dtx_txn_opts_t o = {.isolation = w->isolation, .deadline_ms = 20000};
  while (!stop_run) {
    int rc = dtx_txn_run(st, &o, one_txn, w);
    const char *outcome = "committed";
    if (rc && !w->body_done)
      outcome = "aborted"; /* failed before the commit: nothing stored */
    else if (rc == DTX_ECONFLICT)
      outcome = "aborted";
    else if (rc)
      outcome = "unknown"; /* UNAVAILABLE: it may have committed */
    if (rc && rc != DTX_ECONFLICT && rc != DTX_EUNAVAILABLE) {
      fprintf(stderr, "multi_elle: %s: %s\n", dtx_strerror(rc),
              dtx_errdetail());
      pthread_mutex_lock(&hist.mu);
      hist.errors++;
      pthread_mutex_unlock(&hist.mu);
    }
    if (w->ops)
      hist_add(w->id, outcome, w->ops);
    json_decref(w->ops);
    w->ops = NULL;
  }
  dtx_store_close(st);
  return NULL;
}

/* Runs the workload for ms milliseconds, and on until at least
 * min_committed transactions committed (at most 30 s in all: how many
 * commit in a time is the machine's speed, and a loaded CI run made 12 in
 * the clean run's second), appending to the history. */
static int run_workload(int isolation, int ms, long min_committed,
                        unsigned salt) {
  static worker_t w[THREADS];
  pthread_t th[THREADS];
  stop_run = 0;
  for (int i = 0; i < THREADS; i++) {
    /* Worker 0 scans: a long read-only transaction over every key, the
     * reader that sees read skew when a snapshot is not kept. */
    w[i] = (worker_t){.seed = salt * 7919u + (unsigned)i * 104729u + 1,
                      .isolation = isolation,
                      .scan = i == 0};
    if (pthread_create(&th[i], NULL, worker, &w[i]))
      return -1;
  }
  usleep((useconds_t)ms * 1000);
  for (int waited = ms; waited < 30000; waited += 50) {
    pthread_mutex_lock(&hist.mu);
    long c = hist.committed;
    pthread_mutex_unlock(&hist.mu);
    if (c >= min_committed)
      break;
    usleep(50 * 1000);
  }
  stop_run = 1;
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  return 0;
}

static long kind_count(const json_t *rep, const char *kind) {
  return (long)json_integer_value(json_object_get(
      json_object_get(json_object_get(rep, "anomalies"), kind), "count"));
}

/* Checks the history under iso; *rep the report (caller frees). */
static int check_history(int iso, json_t **rep) {
  char err[256] = "";
  *rep = NULL;
  int rc = elle_check_text(hist.buf ? hist.buf : "", hist.len,
                           iso == DTX_TXN_SERIALIZABLE ? ELLE_SERIALIZABLE
                                                       : ELLE_SNAPSHOT,
                           rep, err, sizeof err);
  if (rc == ELLE_BAD_INPUT)
    fprintf(stderr, "multi_elle: the checker refused the history: %s\n", err);
  return rc;
}

/* Keeps the history where a failure can be read (the build directory). */
static void save_history(const char *name) {
  FILE *f = fopen(name, "w");
  if (f) {
    fwrite(hist.buf ? hist.buf : "", 1, hist.len, f);
    fclose(f);
    fprintf(stderr, "multi_elle: history kept in %s\n", name);
  }
}

static void print_run(const char *label, const json_t *rep, double secs) {
  printf("%s: %.2f s, %ld committed, %ld aborted, %ld unknown; anomalies %s\n",
         label, secs, hist.committed, hist.aborted, hist.unknown,
         JS(json_object_get(rep, "anomaly_types")));
}

static void clean_run(int iso) {
  const char *name = iso == DTX_TXN_SERIALIZABLE ? "serializable" : "snapshot";
  const char *ms = getenv("DTX_ELLE_MS");
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  if (getenv("DTX_ELLE_SEED"))
    CHECK_RC(seed_keys(st), 0);
  dtx_store_close(st);
  hist_reset();
  double t0 = now_s();
  REQUIRE(run_workload(iso, ms ? atoi(ms) : 1000, 21, (unsigned)iso + 1) == 0);
  json_t *rep = NULL;
  int rc = check_history(iso, &rep);
  print_run(name, rep, now_s() - t0);
  CHECKF(rc == ELLE_CLEAN, "%s: %s", name, JS(rep));
  CHECK(hist.errors == 0);
  CHECK(hist.committed > 20);
  if (rc != ELLE_CLEAN) {
    char f[64];
    snprintf(f, sizeof f, "multi_elle-%s.jsonl", name);
    save_history(f);
  }
  /* What the transactions left is clean. */
  st = dtx_t_open(uri);
  json_t *audit = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1},
                       &audit),
           0);
  json_decref(audit);
  audit = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &audit), 0);
  CHECKF(json_is_true(json_object_get(audit, "ok")), "audit: %s", JS(audit));
  json_decref(audit);
  dtx_store_close(st);
  json_decref(rep);
}

static void test_snapshot_clean(void) { clean_run(DTX_TXN_SNAPSHOT); }

static void test_serializable_clean(void) {
  clean_run(DTX_TXN_SERIALIZABLE);
}

/* ---- the deterministic probes of the two checks ------------------------------- */

static int probe_append(dtx_txn_t *t, void *arg) {
  (void)arg;
  json_t *f = json_pack("{s:s}", "_id", "p"),
         *u = json_pack("{s:{s:i}}", "$push", "list", 2);
  int rc = dtx_txn_update(t, PROBE, f, u, 1, NULL);
  json_decref(f);
  json_decref(u);
  return rc;
}

/* 1 when a snapshot reader that began before a commit still reads the
 * version before it (the snapshot check is on), 0 when it reads the new
 * one, -1 on an error. */
static int probe_snapshot(dtx_store_t *st) {
  drop_all(st);
  json_t *d = json_pack("{s:s,s:[i]}", "_id", "p", "list", 1), *got = NULL;
  dtx_txn_t *r = NULL;
  int kept = -1;
  if (dtx_store_insert(st, PROBE, d, NULL) == 0 &&
      dtx_txn_begin(st, NULL, &r) == 0 &&
      dtx_txn_run(st, NULL, probe_append, NULL) == 0) {
    json_t *f = json_pack("{s:s}", "_id", "p");
    if (dtx_txn_find_one(r, PROBE, f, &got) == 0)
      kept = json_array_size(json_object_get(got, "list")) == 1;
    json_decref(f);
  }
  json_decref(got);
  json_decref(d);
  dtx_txn_free(r);
  return kept;
}

/* Reads a and b, sets `off` on `me` (two doctors on call). */
static int go_off(dtx_txn_t *t, const char *me, const char *other) {
  json_t *fa = json_pack("{s:s}", "_id", me),
         *fb = json_pack("{s:s}", "_id", other),
         *u = json_pack("{s:{s:b}}", "$set", "on", 0), *a = NULL, *b = NULL;
  int rc = dtx_txn_find_one(t, PROBE, fa, &a);
  if (rc == 0)
    rc = dtx_txn_find_one(t, PROBE, fb, &b);
  if (rc == 0)
    rc = dtx_txn_update(t, PROBE, fa, u, 0, NULL);
  json_decref(a);
  json_decref(b);
  json_decref(fa);
  json_decref(fb);
  json_decref(u);
  return rc;
}

/* 1 when serializable refuses write skew by hand (its read locks are on),
 * 0 when both commit, -1 on an error. */
static int probe_readlock(dtx_store_t *st) {
  drop_all(st);
  json_t *docs = json_pack("[{s:s,s:b},{s:s,s:b}]", "_id", "alice", "on", 1,
                           "_id", "bob", "on", 1);
  dtx_txn_opts_t o = {.isolation = DTX_TXN_SERIALIZABLE};
  dtx_txn_t *a = NULL, *b = NULL;
  int res = -1;
  if (dtx_store_insert_many(st, PROBE, docs, NULL, NULL) == 0 &&
      dtx_txn_begin(st, &o, &a) == 0 && dtx_txn_begin(st, &o, &b) == 0 &&
      go_off(a, "alice", "bob") == 0 && go_off(b, "bob", "alice") == 0 &&
      dtx_txn_commit(a) == 0) {
    int rc = dtx_txn_commit(b);
    res = rc == DTX_ECONFLICT ? 1 : rc == 0 ? 0 : -1;
  }
  json_decref(docs);
  dtx_txn_free(a);
  dtx_txn_free(b);
  return res;
}

/* Not armed (this process), the switch set in the environment changes
 * nothing. */
static void test_switch_ignored_unarmed(void) {
  REQUIRE(strcmp(getenv(DTX__TXN_BREAK_ENV), "snapshot") == 0);
  CHECK(dtx__txn_break() == DTX__TXN_BREAK_NONE);
  dtx_store_t *st = dtx_t_open(uri);
  CHECK(probe_snapshot(st) == 1);
  CHECK(probe_readlock(st) == 1);
  dtx_store_close(st);
}

/* ---- the break runs: a child armed with the switch ------------------------------ */

/* The child: arms the switch, probes that the check is off, then runs the
 * workload in rounds until the checker reports the anomaly the switch
 * allows (or BREAK_ROUNDS ran), and writes the last report to `out`.
 * Exits 0 when it ran, 2 when it could not. */
static int break_child(const char *mode, const char *out) {
  alarm(60);
  int want = strcmp(mode, "snapshot") == 0   ? DTX__TXN_BREAK_SNAPSHOT
             : strcmp(mode, "readlock") == 0 ? DTX__TXN_BREAK_READLOCK
                                             : -1;
  if (want < 0 || dtx__txn_break_arm() != want) {
    fprintf(stderr, "multi_elle: the switch %s is not armed\n", mode);
    return 2;
  }
  int iso = want == DTX__TXN_BREAK_SNAPSHOT ? DTX_TXN_SNAPSHOT
                                            : DTX_TXN_SERIALIZABLE;
  const char *kind = want == DTX__TXN_BREAK_SNAPSHOT ? "G-single" : "G2";
  dtx_store_t *st = dtx_t_open(uri);
  int probe = want == DTX__TXN_BREAK_SNAPSHOT ? probe_snapshot(st)
                                              : probe_readlock(st);
  drop_all(st);
  if (seed_keys(st))
    return 2;
  dtx_store_close(st);
  hist_reset();
  json_t *rep = NULL;
  int rounds = 0, rc = ELLE_CLEAN;
  double t0 = now_s();
  while (rounds < BREAK_ROUNDS && kind_count(rep, kind) == 0) {
    if (run_workload(iso, BREAK_ROUND_MS, 0, 100u + (unsigned)rounds))
      return 2;
    rounds++;
    json_decref(rep);
    rc = check_history(iso, &rep);
    if (rc == ELLE_BAD_INPUT)
      return 2;
  }
  double secs = now_s() - t0;
  if (kind_count(rep, kind) == 0) {
    char f[64];
    snprintf(f, sizeof f, "multi_elle-break-%s.jsonl", mode);
    save_history(f);
  }
  char label[64];
  snprintf(label, sizeof label, "break %s (%d rounds)", mode, rounds);
  print_run(label, rep, secs);
  fflush(stdout);
  json_t *res = json_pack("{s:i,s:i,s:I,s:I,s:I,s:f,s:O}", "probe", probe,
                          "rounds", rounds, "committed",
                          (json_int_t)hist.committed, "errors",
                          (json_int_t)hist.errors, "unknown",
                          (json_int_t)hist.unknown, "secs", secs, "report",
                          rep);
  int w = res ? json_dump_file(res, out, JSON_COMPACT) : -1;
  json_decref(res);
  json_decref(rep);
  return w ? 2 : 0;
}

static json_t *run_break_child(const char *mode) {
  char out[] = "/tmp/dtx-multi-elle-XXXXXX";
  int fd = mkstemp(out);
  if (fd < 0)
    return NULL;
  close(fd);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv(DTX__TXN_BREAK_ENV, mode, 1);
    execl(self_path, self_path, uri, "break-child", mode, out, (char *)NULL);
    _exit(2);
  }
  int status = -1;
  json_t *res = NULL;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
      WEXITSTATUS(status) == 0)
    res = json_load_file(out, 0, NULL);
  else
    fprintf(stderr, "multi_elle: break child %s: status %d\n", mode, status);
  unlink(out);
  return res;
}

static void break_run(const char *mode, const char *kind) {
  json_t *res = run_break_child(mode);
  REQUIRE(res != NULL);
  const json_t *rep = json_object_get(res, "report");
  /* The probe shows the check off; the checker sees what it prevents. */
  CHECKF(json_integer_value(json_object_get(res, "probe")) == 0,
         "probe %s: %s", mode, JS(res));
  CHECKF(kind_count(rep, kind) > 0, "break %s: no %s in %s", mode, kind,
         JS(rep));
  CHECK(json_is_false(json_object_get(rep, "valid")));
  /* ... and nothing a switch of a read check cannot cause. */
  static const char *const never[] = {"G0", "G1a", "G1b", "duplicate-element",
                                      "garbage-read", NULL};
  for (int i = 0; never[i]; i++)
    CHECKF(kind_count(rep, never[i]) == 0, "break %s: %s in %s", mode,
           never[i], JS(rep));
  CHECK(json_integer_value(json_object_get(res, "errors")) == 0);
  json_decref(res);
}

static void test_break_snapshot(void) { break_run("snapshot", "G-single"); }

static void test_break_readlock(void) { break_run("readlock", "G2"); }

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:multi_elle.db";
  self_path = argv[0];
  if (argc > 4 && strcmp(argv[2], "break-child") == 0)
    return break_child(argv[3], argv[4]);
  /* Set and not armed: ignored (test_switch_ignored_unarmed), so the
   * clean runs below also run with it set. */
  setenv(DTX__TXN_BREAK_ENV, "snapshot", 1);
  alarm(150); /* a hang is a failure, not a stuck CI step */
  TEST_RUN(test_switch_ignored_unarmed);
  TEST_RUN(test_snapshot_clean);
  TEST_RUN(test_serializable_clean);
  TEST_RUN(test_break_snapshot);
  TEST_RUN(test_break_readlock);
  return TEST_DONE();
}
