/* conf_concurrency.c -- conformance: atomicity under concurrent writers.
 *
 * doctx's one primitive is an atomic conditional update of one document;
 * everything else (transfers, ledgers, job queues) is built on it.  These
 * tests hammer it from several processes, each with its own store handle
 * on the same URI, and from several threads sharing one handle, and then
 * check totals that only come out exact when no update was lost,
 * duplicated or applied on a stale read: a counter, a balance that must
 * never go negative, and unique keys that must have exactly one winner.
 *
 * Children are forked after the parent released its own handle (see
 * conf.h), start together through a pipe barrier, report through a pipe,
 * and exit 0 when everything they saw was as expected. */
#include "conf.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

enum { NPROC = 4 };

/* One child's report, written with a single write() (< PIPE_BUF, so
 * reports from several children never interleave). */
typedef struct report {
  int32_t who;
  int32_t errors; /* unexpected return codes */
  int64_t ok, fail;
  int64_t sum, sumsq; /* of values returned by find_one_and_update */
  int64_t extra[4];
} report_t;

typedef struct job {
  const char *coll;
  int who;
  conf_barrier_t *bar;
  int report_fd; /* write end */
  int stop_fd;   /* read end, or -1 */
  int unused_fd; /* an inherited read end the child closes, or -1 */
} job_t;

static dtx_store_t *child_open(job_t *j) {
  if (j->unused_fd >= 0)
    close(j->unused_fd);
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(conf_uri, &st);
  if (rc != 0) {
    CONF_CHILD_FAIL("open %s: %s (%s)", conf_uri, dtx_errname(rc),
                    dtx_errdetail());
    return NULL;
  }
  if (conf_barrier_child(j->bar) != 0) {
    CONF_CHILD_FAIL("barrier broken");
    dtx_store_close(st);
    return NULL;
  }
  return st;
}

static int child_report(job_t *j, report_t *r) {
  r->who = j->who;
  ssize_t w = write(j->report_fd, r, sizeof *r);
  close(j->report_fd);
  if (w != (ssize_t)sizeof *r) {
    CONF_CHILD_FAIL("report write: %s", strerror(errno));
    return 1;
  }
  return r->errors ? 1 : 0;
}

/* Forks n children running fn over jobs[0..n), releases them together,
 * waits for all and reads their reports into reps (in arrival order).
 * Returns the number of children that exited non-zero. */
static int run_children(int (*fn)(void *), job_t *jobs, int n,
                        report_t *reps, const char *coll) {
  conf_barrier_t bar;
  int rp[2];
  if (conf_barrier_init(&bar) != 0 || pipe(rp) != 0) {
    CHECKF(0, "pipe: %s", strerror(errno));
    return n;
  }
  pid_t pids[16];
  for (int i = 0; i < n; i++) {
    jobs[i].coll = coll;
    jobs[i].who = i;
    jobs[i].bar = &bar;
    jobs[i].report_fd = rp[1];
    jobs[i].unused_fd = rp[0];
    pids[i] = conf_fork(fn, &jobs[i]);
    CHECKF(pids[i] > 0, "fork: %s", strerror(errno));
  }
  close(rp[1]);
  CHECKF(conf_barrier_release(&bar, n) == 0, "a child died before start");
  int bad = 0;
  for (int i = 0; i < n; i++) {
    int st = pids[i] > 0 ? conf_wait(pids[i]) : -1;
    if (st != 0) {
      bad++;
      CHECKF(st == 0, "child %d exited with %d", i, st);
    }
  }
  memset(reps, 0, sizeof *reps * (size_t)n);
  int got = 0;
  while (got < n) {
    ssize_t r = read(rp[0], &reps[got], sizeof *reps);
    if (r < 0 && errno == EINTR)
      continue;
    if (r != (ssize_t)sizeof *reps)
      break;
    got++;
  }
  CHECKF(got == n, "%d of %d reports", got, n);
  close(rp[0]);
  conf_barrier_close(&bar);
  return bad;
}

/* ---- counter ----------------------------------------------------------- */

enum { COUNTER_OPS = 2000 };

/* DTX_QUICK (set by the sanitizer stage of scripts/test.sh) shortens the
 * loops; the totals checked are computed from the same numbers. */
static int counter_ops(void) {
  return conf_quick ? COUNTER_OPS / 4 : COUNTER_OPS;
}

static int counter_child(void *arg) {
  job_t *j = arg;
  dtx_store_t *st = child_open(j);
  if (!st)
    return 1;
  report_t r = {0};
  json_t *f = json_pack("{ss}", "_id", "ctr");
  json_t *u = json_pack("{s{si}}", "$inc", "n", 1);
  dtx_fam_opts_t o = {.return_new = 1};
  for (int i = 0; i < counter_ops(); i++) {
    json_t *out = NULL;
    int rc = dtx_store_find_one_and_update(st, j->coll, f, u, &o, &out);
    if (rc != 0) {
      if (r.errors++ < 3)
        CONF_CHILD_FAIL("$inc #%d: %s (%s)", i, dtx_errname(rc),
                        dtx_errdetail());
      continue;
    }
    int64_t v = json_integer_value(json_object_get(out, "n"));
    json_decref(out);
    r.ok++;
    r.sum += v;
    r.sumsq += v * v;
  }
  json_decref(f);
  json_decref(u);
  dtx_store_close(st);
  return child_report(j, &r);
}

/* Every increment returns a distinct new value, so the values 1..N each
 * come back exactly once: their sum and sum of squares prove it. */
static void test_processes_increment_one_counter(void) {
  if (conf_store_is_private()) {
    conf_skip("store is private to one process");
    return;
  }
  const char *c = conf_coll("cc_counter");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'ctr','n':0}"), NULL), 0);
  conf_store_release();
  job_t jobs[NPROC];
  memset(jobs, 0, sizeof jobs);
  report_t reps[NPROC];
  run_children(counter_child, jobs, NPROC, reps, c);
  conf_store_reacquire();

  int64_t total = (int64_t)NPROC * counter_ops(), ok = 0, sum = 0, sumsq = 0;
  for (int i = 0; i < NPROC; i++) {
    ok += reps[i].ok;
    sum += reps[i].sum;
    sumsq += reps[i].sumsq;
    CHECKF(reps[i].errors == 0, "child %d: %d errors", reps[i].who,
           reps[i].errors);
  }
  json_t *d = conf_keep(conf_get(c, JQ("{'_id':'ctr'}")));
  int64_t n = json_integer_value(json_object_get(d, "n"));
  CHECKF(n == total, "counter %lld, want %lld", (long long)n,
         (long long)total);
  CHECKF(ok == total, "%lld increments succeeded", (long long)ok);
  CHECKF(sum == total * (total + 1) / 2 &&
             sumsq == total * (total + 1) * (2 * total + 1) / 6,
         "returned values are not 1..%lld each once (sum %lld)",
         (long long)total, (long long)sum);
}

/* ---- balance ------------------------------------------------------------ */

enum { BALANCE = 1000, DEBIT_TRIES = 500 };

static int debit_child(void *arg) {
  job_t *j = arg;
  dtx_store_t *st = child_open(j);
  if (!st)
    return 1;
  report_t r = {0};
  json_t *f = J("{\"_id\":\"acct\",\"balance\":{\"$gte\":1}}");
  json_t *u = J("{\"$inc\":{\"balance\":-1}}");
  for (int i = 0; i < DEBIT_TRIES; i++) {
    int rc;
    /* Half the children use find_one_and_update, half update one, so both
     * conditional paths are raced. */
    if (j->who % 2 == 0) {
      json_t *out = NULL;
      rc = dtx_store_find_one_and_update(st, j->coll, f, u, NULL, &out);
      if (rc == 0) {
        json_int_t before =
            json_integer_value(json_object_get(out, "balance"));
        if (before < 1 && r.errors++ < 3)
          CONF_CHILD_FAIL("debited a balance of %lld", (long long)before);
        r.ok++;
      } else if (rc == DTX_ENOMATCH) {
        r.fail++;
      }
      json_decref(out);
    } else {
      dtx_update_result_t res;
      rc = dtx_store_update(st, j->coll, f, u, NULL, &res);
      if (rc == 0 && res.matched == 1 && res.modified == 1)
        r.ok++;
      else if (rc == 0 && res.matched == 0 && res.modified == 0)
        r.fail++;
      else if (rc == 0 && r.errors++ < 3)
        CONF_CHILD_FAIL("matched %lld modified %lld", (long long)res.matched,
                        (long long)res.modified);
    }
    if (rc != 0 && rc != DTX_ENOMATCH && r.errors++ < 3)
      CONF_CHILD_FAIL("debit #%d: %s (%s)", i, dtx_errname(rc),
                      dtx_errdetail());
  }
  json_decref(f);
  json_decref(u);
  dtx_store_close(st);
  return child_report(j, &r);
}

/* Reads the balance until told to stop; it must never be negative and
 * never go up (only debits run). */
static int sampler_child(void *arg) {
  job_t *j = arg;
  dtx_store_t *st = child_open(j);
  if (!st)
    return 1;
  report_t r = {0};
  json_t *f = J("{\"_id\":\"acct\"}");
  json_int_t last = BALANCE;
  for (int stop = 0; !stop;) {
    struct pollfd p = {.fd = j->stop_fd, .events = POLLIN};
    stop = poll(&p, 1, 0) > 0; /* one more read after the stop */
    json_t *out = NULL;
    int rc = dtx_store_find(st, j->coll, f, NULL, &out);
    if (rc != 0 || json_array_size(out) != 1) {
      if (r.errors++ < 3)
        CONF_CHILD_FAIL("sample: %s (%s)", dtx_errname(rc), dtx_errdetail());
    } else {
      json_t *b = json_object_get(json_array_get(out, 0), "balance");
      json_int_t v = json_integer_value(b);
      if (!json_is_integer(b) || v < 0 || v > last) {
        if (r.errors++ < 3)
          CONF_CHILD_FAIL("sampled balance %s after %lld", JS(b),
                          (long long)last);
      }
      last = v;
      r.ok++;
    }
    json_decref(out);
  }
  r.extra[0] = last;
  json_decref(f);
  dtx_store_close(st);
  return child_report(j, &r);
}

static void test_processes_debit_one_balance(void) {
  if (conf_store_is_private()) {
    conf_skip("store is private to one process");
    return;
  }
  const char *c = conf_coll("cc_balance");
  json_t *acct = conf_keep(json_pack("{sssi}", "_id", "acct", "balance",
                                     BALANCE));
  CHECK_RC(dtx_store_insert(conf_st, c, acct, NULL), 0);
  conf_store_release();

  /* run_children cannot host the sampler (it needs a stop pipe that the
   * debiting children must not hold), so this test forks by hand. */
  conf_barrier_t bar;
  int rp[2], sp[2];
  REQUIRE(conf_barrier_init(&bar) == 0 && pipe(rp) == 0);
  job_t jobs[NPROC + 1];
  memset(jobs, 0, sizeof jobs);
  pid_t pids[NPROC + 1];
  for (int i = 0; i <= NPROC; i++) {
    if (i == NPROC)
      REQUIRE(pipe(sp) == 0);
    jobs[i] = (job_t){.coll = c,
                      .who = i,
                      .bar = &bar,
                      .report_fd = rp[1],
                      .stop_fd = i == NPROC ? sp[0] : -1,
                      .unused_fd = rp[0]};
    pids[i] = conf_fork(i == NPROC ? sampler_child : debit_child, &jobs[i]);
    CHECK(pids[i] > 0);
  }
  close(rp[1]);
  close(sp[0]);
  CHECK(conf_barrier_release(&bar, NPROC + 1) == 0);
  for (int i = 0; i < NPROC; i++) {
    int st = pids[i] > 0 ? conf_wait(pids[i]) : -1;
    CHECKF(st == 0, "debit child %d exited with %d", i, st);
  }
  char one = 's';
  CHECK(write(sp[1], &one, 1) == 1);
  int st = pids[NPROC] > 0 ? conf_wait(pids[NPROC]) : -1;
  CHECKF(st == 0, "sampler exited with %d (saw a negative or rising balance)",
         st);
  close(sp[1]);

  int64_t ok = 0, fail = 0, samples = -1, last = -1;
  report_t r;
  int got = 0;
  while (read(rp[0], &r, sizeof r) == (ssize_t)sizeof r) {
    got++;
    CHECKF(r.errors == 0, "child %d: %d errors", r.who, r.errors);
    if (r.who == NPROC) {
      samples = r.ok;
      last = r.extra[0];
    } else {
      ok += r.ok;
      fail += r.fail;
    }
  }
  close(rp[0]);
  conf_barrier_close(&bar);
  conf_store_reacquire();
  CHECKF(got == NPROC + 1, "%d reports", got);
  CHECKF(ok == BALANCE, "%lld debits succeeded, want %d", (long long)ok,
         BALANCE);
  CHECKF(fail == (int64_t)NPROC * DEBIT_TRIES - BALANCE,
         "%lld debits refused", (long long)fail);
  CHECKF(samples > 0 && last == 0, "sampler: %lld samples, last %lld",
         (long long)samples, (long long)last);
  json_t *d = conf_keep(conf_get(c, JQ("{'_id':'acct'}")));
  int64_t bal = json_integer_value(json_object_get(d, "balance"));
  CHECKF(bal == 0 && json_is_integer(json_object_get(d, "balance")),
         "final balance %s", JS(d));
  printf("     (%lld balance samples during the run)\n", (long long)samples);
}

/* ---- unique keys ----------------------------------------------------------- */

enum { CONTESTED = 10 };

static int contested_child(void *arg) {
  job_t *j = arg;
  dtx_store_t *st = child_open(j);
  if (!st)
    return 1;
  report_t r = {0};
  for (int k = 0; k < CONTESTED; k++) {
    json_t *doc =
        json_pack("{sosi}", "k", json_sprintf("same-%d", k), "who", j->who);
    int rc = dtx_store_insert(st, j->coll, doc, NULL);
    json_decref(doc);
    if (rc == 0)
      r.ok |= (int64_t)1 << k;
    else if (rc == DTX_EDUPKEY)
      r.fail++;
    else if (r.errors++ < 3)
      CONF_CHILD_FAIL("insert same-%d: %s (%s)", k, dtx_errname(rc),
                      dtx_errdetail());
  }
  dtx_store_close(st);
  return child_report(j, &r);
}

static void test_processes_race_for_one_unique_key(void) {
  if (conf_store_is_private()) {
    conf_skip("store is private to one process");
    return;
  }
  const char *c = conf_coll("cc_samekey");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  conf_store_release();
  job_t jobs[NPROC];
  memset(jobs, 0, sizeof jobs);
  report_t reps[NPROC];
  run_children(contested_child, jobs, NPROC, reps, c);
  conf_store_reacquire();
  int64_t dups = 0;
  for (int i = 0; i < NPROC; i++) {
    dups += reps[i].fail;
    CHECKF(reps[i].errors == 0, "child %d: %d errors", reps[i].who,
           reps[i].errors);
  }
  CHECKF(dups == (int64_t)(NPROC - 1) * CONTESTED, "%lld DUPKEYs",
         (long long)dups);
  for (int k = 0; k < CONTESTED; k++) {
    int winners = 0, winner = -1;
    for (int i = 0; i < NPROC; i++)
      if (reps[i].ok & ((int64_t)1 << k)) {
        winners++;
        winner = reps[i].who;
      }
    CHECKF(winners == 1, "same-%d: %d inserts succeeded", k, winners);
    json_t *f = conf_keep(json_pack("{so}", "k", json_sprintf("same-%d", k)));
    json_t *all = conf_keep(conf_find(c, f, NULL));
    CHECKF(all && json_array_size(all) == 1 &&
               json_integer_value(json_object_get(json_array_get(all, 0),
                                                  "who")) == winner,
           "same-%d: stored %s, winner %d", k, JS(all), winner);
  }
  CHECK(conf_count(c, NULL) == CONTESTED);
}

enum { SHARED_KEYS = 100 };

/* Each child interleaves its own keys with keys every child also inserts,
 * all without _id, so generated ids from several processes meet too. */
static int overlap_child(void *arg) {
  job_t *j = arg;
  dtx_store_t *st = child_open(j);
  if (!st)
    return 1;
  report_t r = {0}; /* ok/fail: shared keys; extra[0..1]: own keys */
  for (int i = 0; i < 2 * SHARED_KEYS; i++) {
    int shared = i % 2 == 0;
    json_t *doc = json_object();
    json_object_set_new(doc, "k",
                        shared ? json_sprintf("s%d", i / 2)
                               : json_sprintf("d%d_%d", j->who, i / 2));
    json_object_set_new(doc, "who", json_integer(j->who));
    int rc = dtx_store_insert(st, j->coll, doc, NULL);
    json_decref(doc);
    if (rc == 0)
      shared ? r.ok++ : r.extra[0]++;
    else if (rc == DTX_EDUPKEY)
      shared ? r.fail++ : r.extra[1]++;
    else if (r.errors++ < 3)
      CONF_CHILD_FAIL("insert: %s (%s)", dtx_errname(rc), dtx_errdetail());
    if (rc == DTX_EDUPKEY && !shared && r.errors++ < 3)
      CONF_CHILD_FAIL("own key d%d_%d refused (generated _id collision?): %s",
                      j->who, i / 2, dtx_errdetail());
  }
  dtx_store_close(st);
  return child_report(j, &r);
}

static void test_processes_insert_overlapping_unique_keys(void) {
  if (conf_store_is_private()) {
    conf_skip("store is private to one process");
    return;
  }
  const char *c = conf_coll("cc_overlap");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  conf_store_release();
  job_t jobs[NPROC];
  memset(jobs, 0, sizeof jobs);
  report_t reps[NPROC];
  run_children(overlap_child, jobs, NPROC, reps, c);
  conf_store_reacquire();
  int64_t shared_ok = 0, shared_dup = 0;
  for (int i = 0; i < NPROC; i++) {
    shared_ok += reps[i].ok;
    shared_dup += reps[i].fail;
    CHECKF(reps[i].extra[0] == SHARED_KEYS && reps[i].extra[1] == 0,
           "child %d: %lld own keys in, %lld refused", reps[i].who,
           (long long)reps[i].extra[0], (long long)reps[i].extra[1]);
  }
  CHECKF(shared_ok == SHARED_KEYS &&
             shared_dup == (int64_t)(NPROC - 1) * SHARED_KEYS,
         "shared keys: %lld in, %lld refused", (long long)shared_ok,
         (long long)shared_dup);
  int64_t want = (int64_t)(NPROC + 1) * SHARED_KEYS;
  CHECKF(conf_count(c, NULL) == want, "count %lld want %lld",
         (long long)conf_count(c, NULL), (long long)want);
  /* No key exists twice, by index lookup and by a full read. */
  json_t *all = conf_keep(conf_find(c, NULL, NULL));
  REQUIRE(all != NULL);
  json_t *seen = conf_keep(json_object());
  json_t *ids = conf_keep(json_object());
  size_t i;
  json_t *d;
  json_array_foreach(all, i, d) {
    const char *k = json_string_value(json_object_get(d, "k"));
    const char *id = json_string_value(json_object_get(d, "_id"));
    REQUIRE(k && id);
    CHECKF(json_object_get(seen, k) == NULL, "key %s twice", k);
    CHECKF(json_object_get(ids, id) == NULL, "_id %s twice", id);
    json_object_set(seen, k, json_true());
    json_object_set(ids, id, json_true());
  }
  for (int s = 0; s < SHARED_KEYS; s += 7) {
    json_t *f = conf_keep(json_pack("{so}", "k", json_sprintf("s%d", s)));
    CHECKF(conf_count(c, f) == 1, "s%d counted %lld times", s,
           (long long)conf_count(c, f));
  }
}

/* ---- threads sharing one handle ------------------------------------------- */

enum { NTHREADS = 8, THREAD_OPS = 500 };

static int thread_ops(void) {
  return conf_quick ? THREAD_OPS / 4 : THREAD_OPS;
}

typedef struct thread_job {
  const char *coll;
  int who;
  int errors;
  int unknown; /* UNAVAILABLE: a reply lost, the outcome unknown (a
                  loaded machine can pass the socket timeout) */
  int64_t got[THREAD_OPS]; /* values returned by find_one_and_update */
  int ngot;
} thread_job_t;

static void *inc_thread(void *arg) {
  thread_job_t *t = arg;
  json_t *f = json_pack("{ss}", "_id", "ctr");
  json_t *u = json_pack("{s{si}}", "$inc", "n", 1);
  dtx_fam_opts_t o = {.return_new = 1};
  for (int i = 0; i < thread_ops(); i++) {
    int rc;
    /* Alternate the two write paths on one shared handle. */
    if ((i + t->who) % 2 == 0) {
      json_t *out = NULL;
      rc = dtx_store_find_one_and_update(conf_st, t->coll, f, u, &o, &out);
      if (rc == 0)
        t->got[t->ngot++] = json_integer_value(json_object_get(out, "n"));
      json_decref(out);
    } else {
      dtx_update_result_t r;
      rc = dtx_store_update(conf_st, t->coll, f, u, NULL, &r);
      if (rc == 0 && r.modified != 1)
        rc = DTX_ENOMATCH;
    }
    if (rc == DTX_EUNAVAILABLE)
      t->unknown++;
    else if (rc != 0 && t->errors++ < 3)
      fprintf(stderr, "[thread %d] $inc #%d: %s (%s)\n", t->who, i,
              dtx_errname(rc), dtx_errdetail());
  }
  json_decref(f);
  json_decref(u);
  return NULL;
}

static void test_threads_share_one_handle(void) {
  const char *c = conf_coll("cc_threads");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'ctr','n':0}"), NULL), 0);
  static thread_job_t jobs[NTHREADS];
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    jobs[i] = (thread_job_t){.coll = c, .who = i};
    REQUIRE(pthread_create(&th[i], NULL, inc_thread, &jobs[i]) == 0);
  }
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  int64_t total = (int64_t)NTHREADS * thread_ops();
  static unsigned char seen[NTHREADS * THREAD_OPS + 1];
  memset(seen, 0, sizeof seen);
  int dup = 0, out_of_range = 0, unknown = 0;
  for (int i = 0; i < NTHREADS; i++) {
    CHECKF(jobs[i].errors == 0, "thread %d: %d errors", i, jobs[i].errors);
    unknown += jobs[i].unknown;
    for (int k = 0; k < jobs[i].ngot; k++) {
      int64_t v = jobs[i].got[k];
      if (v < 1 || v > total)
        out_of_range++;
      else if (seen[v]++)
        dup++;
    }
  }
  CHECKF(dup == 0 && out_of_range == 0,
         "%d values returned twice, %d out of range", dup, out_of_range);
  /* Every acknowledged $inc counted once, each unknown one at most once
   * (a lost reply is never applied again on top: lost_reply.sh). */
  json_t *d = conf_keep(conf_get(c, JQ("{'_id':'ctr'}")));
  int64_t n = json_integer_value(json_object_get(d, "n"));
  CHECKF(n >= total - unknown && n <= total,
         "counter %s, want %lld - %d unknown .. %lld", JS(d),
         (long long)total, unknown, (long long)total);
  if (unknown)
    printf("     %d replies lost (outcome unknown)\n", unknown);
}

/* Threads racing to insert one unique key: exactly one wins. */
typedef struct race_job {
  const char *coll;
  int who, rc;
  pthread_barrier_t *bar;
} race_job_t;

static void *race_thread(void *arg) {
  race_job_t *t = arg;
  json_t *doc = json_pack("{sssi}", "k", "one", "who", t->who);
  pthread_barrier_wait(t->bar);
  t->rc = dtx_store_insert(conf_st, t->coll, doc, NULL);
  json_decref(doc);
  return NULL;
}

static void test_threads_race_for_one_unique_key(void) {
  const char *c = conf_coll("cc_thread_race");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, NTHREADS);
  race_job_t jobs[NTHREADS];
  pthread_t th[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    jobs[i] = (race_job_t){.coll = c, .who = i, .bar = &bar};
    REQUIRE(pthread_create(&th[i], NULL, race_thread, &jobs[i]) == 0);
  }
  int ok = 0, dup = 0, winner = -1;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].rc == 0) {
      ok++;
      winner = i;
    } else if (jobs[i].rc == DTX_EDUPKEY) {
      dup++;
    } else {
      CHECKF(0, "thread %d: %s", i, dtx_errname(jobs[i].rc));
    }
  }
  pthread_barrier_destroy(&bar);
  CHECKF(ok == 1 && dup == NTHREADS - 1, "%d won, %d refused", ok, dup);
  json_t *d = conf_keep(conf_get(c, JQ("{'k':'one'}")));
  CHECK(d && json_integer_value(json_object_get(d, "who")) == winner);
}

/* ---- positional $inc -----------------------------------------------------
 * Issue 14: 4 processes each apply 1,000 positional $inc updates to one
 * array element; the element ends at exactly 4,000 (1,000 under
 * DTX_QUICK) and its neighbours are untouched. */

static int positional_ops(void) { return conf_quick ? 250 : 1000; }

static int positional_child(void *arg) {
  job_t *j = arg;
  dtx_store_t *st = child_open(j);
  if (!st)
    return 1;
  report_t r = {0};
  json_t *f = json_pack("{ssss}", "_id", "arr", "items.k", "b");
  json_t *u = json_pack("{s{si}}", "$inc", "items.$.n", 1);
  for (int i = 0; i < positional_ops(); i++) {
    dtx_update_result_t res;
    int rc = dtx_store_update(st, j->coll, f, u, NULL, &res);
    if (rc != 0 || res.modified != 1) {
      if (r.errors++ < 3)
        CONF_CHILD_FAIL("positional $inc #%d: %s (%s)", i, dtx_errname(rc),
                        dtx_errdetail());
      continue;
    }
    r.ok++;
  }
  json_decref(f);
  json_decref(u);
  dtx_store_close(st);
  return child_report(j, &r);
}

static void test_processes_positional_inc(void) {
  if (conf_store_is_private()) {
    conf_skip("store is private to one process");
    return;
  }
  const char *c = conf_coll("cc_positional");
  CHECK_RC(dtx_store_insert(conf_st, c,
                            JQ("{'_id':'arr','items':[{'k':'a','n':0},"
                               "{'k':'b','n':0},{'k':'c','n':0}]}"),
                            NULL),
           0);
  conf_store_release();
  job_t jobs[NPROC];
  memset(jobs, 0, sizeof jobs);
  report_t reps[NPROC];
  run_children(positional_child, jobs, NPROC, reps, c);
  conf_store_reacquire();
  int64_t ok = 0;
  for (int i = 0; i < NPROC; i++)
    ok += reps[i].ok;
  int64_t total = (int64_t)NPROC * positional_ops();
  json_t *d = conf_keep(conf_get(c, JQ("{'_id':'arr'}")));
  json_t *items = json_object_get(d, "items");
  CHECKF(json_integer_value(json_object_get(json_array_get(items, 1), "n")) ==
             total,
         "items[1].n = %s, want %lld", JS(json_array_get(items, 1)),
         (long long)total);
  CHECK(json_integer_value(json_object_get(json_array_get(items, 0), "n")) ==
        0);
  CHECK(json_integer_value(json_object_get(json_array_get(items, 2), "n")) ==
        0);
  CHECKF(ok == total, "%lld updates succeeded", (long long)ok);
}

void conf_run_concurrency(void) {
  CONF_RUN(test_processes_increment_one_counter);
  CONF_RUN(test_processes_positional_inc);
  CONF_RUN(test_processes_debit_one_balance);
  CONF_RUN(test_processes_race_for_one_unique_key);
  CONF_RUN(test_processes_insert_overlapping_unique_keys);
  CONF_RUN(test_threads_share_one_handle);
  CONF_RUN(test_threads_race_for_one_unique_key);
}
