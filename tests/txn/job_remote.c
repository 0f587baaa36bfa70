/* job_remote.c -- the job runner's protocol as a remote worker calls it
 * (dtx_job_claim, dtx_job_heartbeat, dtx_job_complete, dtx_job_fail_at;
 * docs/jobs.md, "Remote workers"), on the store URI in argv[1] (SQLite
 * from ctest; both Redis targets from run-redis.sh):
 *   - the argument checks refuse bad input with DTX_EINVAL, need no
 *     store, and the calls make them before writing anything;
 *   - claim -> heartbeat -> complete, priority order, the epoch returned;
 *     fail -> delayed with backoff, the last attempt -> dead;
 *   - a repeated outcome answers the job again and writes nothing; the
 *     other outcome at that epoch is DTX_ESTALE;
 *   - after recovery's takeover of a lapsed lease, the old epoch's
 *     heartbeat, complete and fail are DTX_ESTALE and change nothing;
 *   - four claimers on their own connections never get one job twice;
 *   - one job completed by two threads at once completes once;
 *   - a result the store cannot keep is kept in its marked text form.
 * Short by design (about a second): CI runs it on three backends. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doc/doc.h"
#include "testlib.h"
#include "txn/jobq/jobq.h"

static const char *uri;
static dtx_store_t *st;

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void add(const char *queue, const char *id, int priority, int max) {
  json_t *out = NULL;
  dtx_job_req_t r = {.queue = queue, .type = "t", .id = id,
                     .priority = priority, .max_attempts = max};
  CHECK_RC(dtx_job_add(st, &r, &out, NULL), 0);
  json_decref(out);
}

/* The store's jobs as text: what a refused call must leave as it was. */
static char *jobs_text(void) {
  json_t *all = NULL;
  CHECK_RC(dtx_job_list(st, NULL, NULL, NULL, &all), 0);
  char *s = all ? json_dumps(all, JSON_SORT_KEYS) : NULL;
  json_decref(all);
  return s ? s : strdup("");
}

static void test_checks(void) {
  char *before = jobs_text();
  char big[16386];
  json_t *out = (json_t *)1;
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  CHECK_RC(dtx_job_claim_check("q", 1, 0, NULL), 0);
  CHECK_RC(dtx_job_claim_check("a/b", 1, 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_claim_check("q", 257, 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_claim_check("q", -1, 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_claim_check("q", 1, -1, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_claim_check("q", 1, 0, ""), DTX_EINVAL);
  CHECK_RC(dtx_job_heartbeat_check("j", 0, 0), DTX_EINVAL);
  CHECK_RC(dtx_job_heartbeat_check("j", 1, -5), DTX_EINVAL);
  CHECK_RC(dtx_job_heartbeat_check("", 1, 0), DTX_EINVAL);
  CHECK_RC(dtx_job_end_check("j", 0, NULL, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_end_check("j", 1, NULL, "\xff\xfe"), DTX_EINVAL);
  CHECK_RC(dtx_job_end_check("j", 1, NULL, big), DTX_EINVAL);
  CHECK_RC(dtx_job_end_check("j", 1, NULL, "fine"), 0);
  CHECK_RC(dtx_job_claim(st, "q", 300, 0, NULL, &out), DTX_EINVAL);
  CHECK(out == NULL);
  CHECK_RC(dtx_job_heartbeat(st, "j", INT64_MIN, 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_complete(st, "j", 0, NULL, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_fail_at(st, "j", 1, big, NULL), DTX_EINVAL);
  CHECK_RC(dtx_job_complete(st, "nope", 1, NULL, NULL), DTX_ENOTFOUND);
  CHECK_RC(dtx_job_heartbeat(st, "nope", 1, 0, NULL), DTX_ENOTFOUND);
  char *after = jobs_text();
  CHECK(strcmp(before, after) == 0);
  free(before);
  free(after);
}

static void test_claim_heartbeat_complete(void) {
  json_t *jobs = NULL, *job = NULL, *again = NULL;
  add("rq", "low", 0, 0);
  add("rq", "high", 9, 0);
  add("rq", "mid", 5, 0);
  CHECK_RC(dtx_job_claim(st, "rq", 2, 60000, "py-1", &jobs), 0);
  CHECK(json_array_size(jobs) == 2);
  json_t *h = json_array_get(jobs, 0);
  CHECK(dtx__str_is(h, "_id", "high") && dtx__str_is(h, "owner", "py-1") &&
        dtx__state_is(h, DTX_JOB_RUNNING));
  CHECK(dtx__str_is(json_array_get(jobs, 1), "_id", "mid"));
  int64_t e = dtx__int(h, "epoch"), until = dtx__int(h, "lease_until");
  CHECK(e >= 1 && until > 0);
  sleep_ms(5);
  CHECK_RC(dtx_job_heartbeat(st, "high", e, 120000, &job), 0);
  CHECK(dtx__int(job, "lease_until") > until && dtx__int(job, "epoch") == e);
  json_decref(job);
  CHECK_RC(dtx_job_heartbeat(st, "high", e + 1, 0, NULL), DTX_ESTALE);
  json_t *res = json_pack("{s:i}", "sent", 3);
  CHECK_RC(dtx_job_complete(st, "high", e, res, &job), 0);
  CHECK(dtx__state_is(job, DTX_JOB_SUCCEEDED) &&
        dtx__int(job, "attempts") == 1 &&
        json_equal(json_object_get(job, "result"), res));
  /* The same completion again (a lost reply): the same job, no write. */
  CHECK_RC(dtx_job_complete(st, "high", e, res, &again), 0);
  CHECK(json_equal(job, again));
  json_decref(again);
  CHECK_RC(dtx_job_fail_at(st, "high", e, "late", NULL), DTX_ESTALE);
  CHECK_RC(dtx_job_heartbeat(st, "high", e, 0, NULL), DTX_ESTALE);
  CHECK_RC(dtx_job_get(st, "high", &again), 0);
  CHECK(json_equal(job, again));
  json_decref(again);
  json_decref(job);
  json_decref(res);
  json_decref(jobs);
  /* The rest: claimed one by one, then nothing due is an empty claim. */
  CHECK_RC(dtx_job_claim(st, "rq", 0, 0, NULL, &jobs), 0);
  CHECK(json_array_size(jobs) == 1 &&
        dtx__str_is(json_array_get(jobs, 0), "_id", "low"));
  json_decref(jobs);
  CHECK_RC(dtx_job_claim(st, "rq", 5, 0, NULL, &jobs), 0);
  CHECK(json_is_array(jobs) && json_array_size(jobs) == 0);
  json_decref(jobs);
}

static void test_fail(void) {
  json_t *jobs = NULL, *job = NULL;
  dtx_job_req_t r = {.queue = "fq", .type = "t", .id = "f1",
                     .max_attempts = 2, .backoff_ms = 1};
  CHECK_RC(dtx_job_add(st, &r, &job, NULL), 0);
  json_decref(job);
  CHECK_RC(dtx_job_claim(st, "fq", 1, 0, NULL, &jobs), 0);
  int64_t e = dtx__int(json_array_get(jobs, 0), "epoch");
  json_decref(jobs);
  CHECK_RC(dtx_job_fail_at(st, "f1", e, "smtp down", &job), 0);
  CHECK(dtx__state_is(job, DTX_JOB_DELAYED) && dtx__int(job, "attempts") == 1 &&
        dtx__str_is(job, "last_error", "smtp down"));
  json_decref(job);
  CHECK_RC(dtx_job_fail_at(st, "f1", e, "smtp down", &job), 0);
  CHECK(dtx__int(job, "attempts") == 1);
  json_decref(job);
  CHECK_RC(dtx_job_fail_at(st, "f1", e, "other", NULL), DTX_ESTALE);
  CHECK_RC(dtx_job_complete(st, "f1", e, NULL, NULL), DTX_ESTALE);
  /* Due again (its 1 ms backoff passed): the last attempt -> dead. */
  sleep_ms(10);
  CHECK_RC(dtx_job_claim(st, "fq", 1, 0, NULL, &jobs), 0);
  CHECK(json_array_size(jobs) == 1);
  int64_t e2 = dtx__int(json_array_get(jobs, 0), "epoch");
  CHECK(e2 == e + 1);
  json_decref(jobs);
  CHECK_RC(dtx_job_fail_at(st, "f1", e2, NULL, &job), 0);
  CHECK(dtx__state_is(job, DTX_JOB_DEAD) && dtx__int(job, "attempts") == 2);
  json_decref(job);
}

static void test_takeover(void) {
  json_t *jobs = NULL, *summary = NULL;
  add("tq", "t1", 0, 3);
  CHECK_RC(dtx_job_claim(st, "tq", 1, 50, "slow", &jobs), 0);
  int64_t e = dtx__int(json_array_get(jobs, 0), "epoch");
  json_decref(jobs);
  sleep_ms(120);
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1},
                       &summary),
           0);
  json_decref(summary);
  char *before = jobs_text();
  CHECK_RC(dtx_job_complete(st, "t1", e, NULL, NULL), DTX_ESTALE);
  CHECK_RC(dtx_job_fail_at(st, "t1", e, "x", NULL), DTX_ESTALE);
  CHECK_RC(dtx_job_heartbeat(st, "t1", e, 0, NULL), DTX_ESTALE);
  char *after = jobs_text();
  CHECK(strcmp(before, after) == 0);
  CHECK(strstr(after, "\"epoch\": 2") || strstr(after, "\"epoch\":2"));
  free(before);
  free(after);
}

/* ---- claimers on their own connections --------------------------------- */

#define RACE_JOBS 40
#define RACERS 4

typedef struct racer {
  int won[RACE_JOBS];
  int n, rc;
} racer_t;

static void *race(void *arg) {
  racer_t *r = arg;
  dtx_store_t *s = dtx_t_open(uri);
  for (int round = 0; round < 100; round++) {
    json_t *jobs = NULL, *j;
    size_t i;
    int rc = dtx_job_claim(s, "race", 3, 0, NULL, &jobs);
    if (rc) {
      r->rc = rc;
      break;
    }
    if (json_array_size(jobs) == 0) {
      json_decref(jobs);
      break;
    }
    json_array_foreach(jobs, i, j) {
      int k = atoi(dtx__str(j, "_id") + 1);
      if (k >= 0 && k < RACE_JOBS)
        r->won[k]++;
      r->n++;
    }
    json_decref(jobs);
  }
  dtx_store_close(s);
  return NULL;
}

static void test_claimers(void) {
  char id[16];
  racer_t r[RACERS];
  pthread_t t[RACERS];
  for (int i = 0; i < RACE_JOBS; i++) {
    snprintf(id, sizeof id, "r%d", i);
    add("race", id, 0, 0);
  }
  memset(r, 0, sizeof r);
  for (int i = 0; i < RACERS; i++)
    pthread_create(&t[i], NULL, race, &r[i]);
  for (int i = 0; i < RACERS; i++)
    pthread_join(t[i], NULL);
  int total = 0;
  for (int k = 0; k < RACE_JOBS; k++) {
    int n = 0;
    for (int i = 0; i < RACERS; i++)
      n += r[i].won[k];
    CHECKF(n == 1, "job r%d claimed %d times", k, n);
  }
  for (int i = 0; i < RACERS; i++) {
    CHECK_RC(r[i].rc, 0);
    total += r[i].n;
  }
  CHECK(total == RACE_JOBS);
}

/* ---- one outcome sent twice at once --------------------------------------- */

typedef struct twice {
  int64_t epoch;
  int rc;
} twice_t;

static void *complete_it(void *arg) {
  twice_t *t = arg;
  dtx_store_t *s = dtx_t_open(uri);
  json_t *res = json_integer(7);
  t->rc = dtx_job_complete(s, "c1", t->epoch, res, NULL);
  json_decref(res);
  dtx_store_close(s);
  return NULL;
}

static void test_complete_twice(void) {
  json_t *jobs = NULL, *job = NULL;
  add("cq", "c1", 0, 0);
  CHECK_RC(dtx_job_claim(st, "cq", 1, 0, NULL, &jobs), 0);
  int64_t e = dtx__int(json_array_get(jobs, 0), "epoch");
  json_decref(jobs);
  twice_t a = {e, -1}, b = {e, -1};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, complete_it, &a);
  pthread_create(&tb, NULL, complete_it, &b);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK_RC(a.rc, 0);
  CHECK_RC(b.rc, 0);
  CHECK_RC(dtx_job_get(st, "c1", &job), 0);
  CHECK(dtx__state_is(job, DTX_JOB_SUCCEEDED) &&
        dtx__int(job, "attempts") == 1 &&
        json_integer_value(json_object_get(job, "result")) == 7);
  json_decref(job);
}

static void test_unstorable_result(void) {
  json_t *jobs = NULL, *job = NULL, *deep = json_integer(1);
  for (int i = 0; i < DTX_MAX_DEPTH + 5; i++)
    deep = json_pack("[o]", deep);
  add("uq", "u1", 0, 0);
  CHECK_RC(dtx_job_claim(st, "uq", 1, 0, NULL, &jobs), 0);
  int64_t e = dtx__int(json_array_get(jobs, 0), "epoch");
  json_decref(jobs);
  CHECK_RC(dtx_job_complete(st, "u1", e, deep, &job), 0);
  CHECK(dtx__state_is(job, DTX_JOB_SUCCEEDED) &&
        json_object_get(json_object_get(job, "result"), "dtx_unstorable"));
  json_decref(job);
  json_decref(deep);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:job_remote.db";
  st = dtx_t_open(uri);
  dtx_store_drop_collection_ex(st, DTX_JOBS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_JOB_EVENTS, &(dtx_drop_opts_t){1});
  TEST_RUN(test_checks);
  TEST_RUN(test_claim_heartbeat_complete);
  TEST_RUN(test_fail);
  TEST_RUN(test_takeover);
  TEST_RUN(test_claimers);
  TEST_RUN(test_complete_twice);
  TEST_RUN(test_unstorable_result);
  dtx_store_close(st);
  return TEST_DONE();
}
