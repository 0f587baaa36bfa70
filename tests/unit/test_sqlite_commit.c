/* test_sqlite_commit.c -- concurrency in the SQLite backend: the group
 * commit under many threads of one process (no lost update, an op's error
 * reaches only its caller and does not undo the batch), and several
 * processes writing one file at once (the write lock is waited for, never
 * reported as an error). */
#include "testlib.h"

#include "store/sqlite/sqlite_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 8
#define NINCS 500

static char dir[] = "/tmp/dtx_test_commit.XXXXXX";

typedef struct worker {
  dtx_store_t *st;
  int id;
  int failures;
  int dupkeys;
  int inserted;
} worker_t;

static void *inc_worker(void *arg) {
  worker_t *w = arg;
  json_t *f = J("{\"_id\":\"ctr\"}");
  json_t *u = J("{\"$inc\":{\"n\":1}}");
  for (int i = 0; i < NINCS; i++) {
    json_t *out = NULL;
    int rc = dtx_store_find_one_and_update(w->st, "c", f, u, NULL, &out);
    if (rc < 0 || !out)
      w->failures++;
    json_decref(out);
  }
  json_decref(f);
  json_decref(u);
  return NULL;
}

static void run_incs(const char *uri) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  json_t *d = J("{\"_id\":\"ctr\",\"n\":0}");
  CHECK_RC(dtx_store_insert(st, "c", d, NULL), 0);
  json_decref(d);
  pthread_t t[NTHREADS];
  worker_t w[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (worker_t){st, i, 0, 0, 0};
    pthread_create(&t[i], NULL, inc_worker, &w[i]);
  }
  int failures = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(t[i], NULL);
    failures += w[i].failures;
  }
  CHECKF(failures == 0, "%s: %d failed increments", uri, failures);
  json_t *f = J("{\"_id\":\"ctr\"}"), *docs = NULL;
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &docs), 0);
  json_int_t n = json_integer_value(
      json_object_get(json_array_get(docs, 0), "n"));
  CHECKF(n == NTHREADS * NINCS, "%s: n = %lld, want %d", uri, (long long)n,
         NTHREADS * NINCS);
  json_decref(docs);
  json_decref(f);
  dtx_store_close(st);
}

static void test_group_commit_incs_file(void) {
  char uri[300];
  snprintf(uri, sizeof uri, "sqlite:%s/incs.db?sync=normal", dir);
  run_incs(uri);
}

static void test_group_commit_incs_full(void) {
  char uri[300];
  snprintf(uri, sizeof uri, "sqlite:%s/incs-full.db", dir);
  run_incs(uri);
}

static void test_group_commit_incs_memory(void) { run_incs("sqlite::memory:"); }

/* Every thread inserts the same 100 _ids: exactly 100 inserts succeed in
 * all, every other one fails with DUPKEY, and the failures inside a batch
 * do not undo its successful neighbours. */
static void *dup_worker(void *arg) {
  worker_t *w = arg;
  for (int i = 0; i < 100; i++) {
    json_t *d = json_pack("{s:i,s:i}", "_id", i, "by", w->id);
    int rc = dtx_store_insert(w->st, "d", d, NULL);
    json_decref(d);
    if (rc == 0)
      w->inserted++;
    else if (rc == DTX_EDUPKEY && strstr(dtx_errdetail(), "_id_"))
      w->dupkeys++;
    else
      w->failures++;
  }
  return NULL;
}

static void test_group_commit_errors_isolated(void) {
  char uri[300];
  snprintf(uri, sizeof uri, "sqlite:%s/dups.db?sync=normal", dir);
  dtx_store_t *st;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  pthread_t t[NTHREADS];
  worker_t w[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (worker_t){st, i, 0, 0, 0};
    pthread_create(&t[i], NULL, dup_worker, &w[i]);
  }
  int ins = 0, dups = 0, fails = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(t[i], NULL);
    ins += w[i].inserted;
    dups += w[i].dupkeys;
    fails += w[i].failures;
  }
  CHECKF(ins == 100, "inserted %d", ins);
  CHECKF(dups == NTHREADS * 100 - 100, "dupkeys %d", dups);
  CHECK(fails == 0);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(st, "d", NULL, &n), 0);
  CHECK(n == 100);
  /* Each stored document was written by the thread told it succeeded:
   * the per-thread successes add up per writer. */
  for (int i = 0; i < NTHREADS; i++) {
    json_t *f = json_pack("{s:i}", "by", i);
    CHECK_RC(dtx_store_count(st, "d", f, &n), 0);
    CHECKF(n == w[i].inserted, "thread %d: %lld stored, %d reported", i,
           (long long)n, w[i].inserted);
    json_decref(f);
  }
  dtx_store_close(st);
}

/* Four processes (this one and three children) increment one counter in
 * one file, each through its own store and its own threads. */
static void test_multi_process(void) {
  char uri[300];
  snprintf(uri, sizeof uri, "sqlite:%s/procs.db?sync=normal", dir);
  dtx_store_t *st;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  json_t *d = J("{\"_id\":\"ctr\",\"n\":0}");
  CHECK_RC(dtx_store_insert(st, "c", d, NULL), 0);
  json_decref(d);
  dtx_store_close(st);

  enum { NPROC = 4, PTHREADS = 2 };
  pid_t kids[NPROC - 1];
  for (int p = 0; p < NPROC - 1; p++) {
    fflush(NULL);
    kids[p] = fork();
    REQUIRE(kids[p] >= 0);
    if (kids[p] == 0) {
      dtx_store_t *s;
      if (dtx_store_open(uri, &s) < 0)
        _exit(2);
      pthread_t t[PTHREADS];
      worker_t w[PTHREADS];
      for (int i = 0; i < PTHREADS; i++) {
        w[i] = (worker_t){s, i, 0, 0, 0};
        pthread_create(&t[i], NULL, inc_worker, &w[i]);
      }
      int fails = 0;
      for (int i = 0; i < PTHREADS; i++) {
        pthread_join(t[i], NULL);
        fails += w[i].failures;
      }
      dtx_store_close(s);
      _exit(fails ? 1 : 0);
    }
  }
  REQUIRE(dtx_store_open(uri, &st) == 0);
  pthread_t t[PTHREADS];
  worker_t w[PTHREADS];
  for (int i = 0; i < PTHREADS; i++) {
    w[i] = (worker_t){st, i, 0, 0, 0};
    pthread_create(&t[i], NULL, inc_worker, &w[i]);
  }
  for (int i = 0; i < PTHREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(w[i].failures == 0);
  }
  for (int p = 0; p < NPROC - 1; p++) {
    int status = -1;
    waitpid(kids[p], &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "child %d status %d", p, status);
  }
  json_t *f = J("{\"_id\":\"ctr\"}"), *docs = NULL;
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &docs), 0);
  json_int_t n = json_integer_value(
      json_object_get(json_array_get(docs, 0), "n"));
  CHECKF(n == NPROC * PTHREADS * NINCS, "n = %lld, want %d", (long long)n,
         NPROC * PTHREADS * NINCS);
  json_decref(docs);
  json_decref(f);
  dtx_store_close(st);
}

/* Reads run beside a writer and see whole documents: a reader checking
 * the invariant a + b == 0 while writers move units between them never
 * sees it broken. */
typedef struct mover {
  dtx_store_t *st;
  int *stop;
  int bad;
  int reads;
} mover_t;

static void *read_worker(void *arg) {
  mover_t *m = arg;
  json_t *f = J("{\"_id\":\"pair\"}");
  while (!__atomic_load_n(m->stop, __ATOMIC_RELAXED)) {
    json_t *docs = NULL;
    if (dtx_store_find(m->st, "p", f, NULL, &docs) < 0) {
      m->bad++;
      continue;
    }
    json_t *doc = json_array_get(docs, 0);
    if (json_integer_value(json_object_get(doc, "a")) +
            json_integer_value(json_object_get(doc, "b")) !=
        0)
      m->bad++;
    m->reads++;
    json_decref(docs);
  }
  json_decref(f);
  return NULL;
}

static void test_readers_beside_writers(void) {
  char uri[300];
  snprintf(uri, sizeof uri, "sqlite:%s/rw.db?sync=off", dir);
  dtx_store_t *st;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  json_t *d = J("{\"_id\":\"pair\",\"a\":0,\"b\":0}");
  CHECK_RC(dtx_store_insert(st, "p", d, NULL), 0);
  json_decref(d);
  int stop = 0;
  mover_t m[3];
  pthread_t t[3];
  for (int i = 0; i < 3; i++) {
    m[i] = (mover_t){st, &stop, 0, 0};
    pthread_create(&t[i], NULL, read_worker, &m[i]);
  }
  json_t *f = J("{\"_id\":\"pair\"}"),
         *u = J("{\"$inc\":{\"a\":1,\"b\":-1}}");
  for (int i = 0; i < 2000; i++) {
    json_t *out = NULL;
    CHECK_RC(dtx_store_find_one_and_update(st, "p", f, u, NULL, &out), 0);
    json_decref(out);
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
  int reads = 0;
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], NULL);
    CHECK(m[i].bad == 0);
    reads += m[i].reads;
  }
  CHECK(reads > 0);
  json_decref(f);
  json_decref(u);
  dtx_store_close(st);
}

/* The same increments through the method table, to see the batches: with
 * 8 threads and sync=full, a leader's fsync is long enough for others to
 * queue, so some batch holds several ops, and every op ran exactly once. */
typedef struct raw_worker {
  dtx__backend_t *b;
  const dtx__modify_t *m;
  int failures;
} raw_worker_t;

static void *raw_inc_worker(void *arg) {
  raw_worker_t *w = arg;
  for (int i = 0; i < 200; i++) {
    dtx__modify_result_t r;
    if (dtx__sqlite_methods.modify_one(w->b, w->m, &r) < 0 || !r.matched)
      w->failures++;
    dtx__modify_result_clear(&r);
  }
  return NULL;
}

static void test_batches_form(void) {
  char uri[300];
  snprintf(uri, sizeof uri, "sqlite:%s/batches.db?sync=full", dir);
  dtx__backend_t *b;
  REQUIRE(dtx__sqlite_methods.open(uri, 0, &b) == 0);
  json_t *d = J("{\"_id\":\"ctr\",\"n\":0}");
  size_t n = 0;
  CHECK_RC(dtx__sqlite_methods.insert(b, "c", &d, 1, 0, &n), 0);
  json_decref(d);
  json_t *fs = J("{\"_id\":\"ctr\"}"), *us = J("{\"$inc\":{\"n\":1}}");
  dtx__filter_t *f;
  dtx__update_t *u;
  REQUIRE(dtx__filter_compile(fs, &f) == 0);
  REQUIRE(dtx__update_compile(us, &u) == 0);
  dtx__modify_t m = {.coll = "c", .filter_spec = fs, .filter = f,
                     .update_spec = us, .update = u};
  uint64_t batches0 = b->nbatches, ops0 = b->nbatched;
  pthread_t t[NTHREADS];
  raw_worker_t w[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    w[i] = (raw_worker_t){b, &m, 0};
    pthread_create(&t[i], NULL, raw_inc_worker, &w[i]);
  }
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(t[i], NULL);
    CHECK(w[i].failures == 0);
  }
  CHECKF(b->nbatched - ops0 == NTHREADS * 200, "ops %llu",
         (unsigned long long)(b->nbatched - ops0));
  CHECKF(b->nbatches - batches0 < NTHREADS * 200, "batches %llu",
         (unsigned long long)(b->nbatches - batches0));
  CHECKF(b->maxbatch > 1, "largest batch %zu", b->maxbatch);
  json_t *docs = NULL;
  CHECK_RC(dtx__sqlite_methods.find(b, "c", fs, f, NULL, 0, 0, &docs), 0);
  CHECK(json_integer_value(json_object_get(json_array_get(docs, 0), "n")) ==
        NTHREADS * 200);
  json_decref(docs);
  dtx__filter_free(f);
  dtx__update_free(u);
  json_decref(fs);
  json_decref(us);
  dtx__sqlite_methods.close(b);
}

/* Another connection holding the write lock makes a write wait, not
 * fail: the insert completes once the lock is released. */
typedef struct waiter {
  dtx_store_t *st;
  int rc;
  int done;
} waiter_t;

static void *insert_waiter(void *arg) {
  waiter_t *w = arg;
  json_t *d = J("{\"_id\":\"late\"}");
  w->rc = dtx_store_insert(w->st, "c", d, NULL);
  json_decref(d);
  __atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void test_waits_for_write_lock(void) {
  char uri[400], file[300];
  snprintf(file, sizeof file, "%s/locked.db", dir);
  snprintf(uri, sizeof uri, "sqlite:%s", file);
  dtx_store_t *st;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  sqlite3 *db;
  REQUIRE(sqlite3_open(file, &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK);
  waiter_t w = {st, -999, 0};
  pthread_t t;
  pthread_create(&t, NULL, insert_waiter, &w);
  struct timespec ts = {0, 300 * 1000 * 1000};
  nanosleep(&ts, NULL);
  CHECK(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE) == 0);
  CHECK(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK);
  pthread_join(t, NULL);
  CHECK_RC(w.rc, 0);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(st, "c", NULL, &n), 0);
  CHECK(n == 1);
  sqlite3_close(db);
  dtx_store_close(st);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_group_commit_incs_file);
  TEST_RUN(test_group_commit_incs_full);
  TEST_RUN(test_group_commit_incs_memory);
  TEST_RUN(test_group_commit_errors_isolated);
  TEST_RUN(test_batches_form);
  TEST_RUN(test_waits_for_write_lock);
  TEST_RUN(test_multi_process);
  TEST_RUN(test_readers_beside_writers);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return TEST_DONE();
}
