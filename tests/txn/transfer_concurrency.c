/* transfer_concurrency.c -- 8 threads plus 2 processes run 2,000 transfers
 * over 20 accounts, some larger than the payer's balance, while a sampler
 * thread watches balances and audits.  Afterwards recovery plus a settled
 * audit must be clean, every transfer terminal, every failure explained by
 * insufficient funds, and no balance ever seen below its limit.
 *
 * usage: transfer_concurrency STORE-URI   (the store is emptied first)
 *
 * DTX_TEST_FEW_REPLICAS=1 is for run-redis.sh's failover phase, which
 * SIGKILLs a master under ?wait=1: until the killed node rejoins as a
 * replica, the promoted one has none, and doctx then refuses writes to it
 * with UNAVAILABLE rather than make them wait (doctx.h, ?wait=N).  Those
 * transfers are counted as "unavailable" instead of as errors, and so are
 * those that came back failed "abandoned by its executor" (a step was
 * refused, and the transfer was rolled back); recovery finishes the rest,
 * so the store's final tallies may exceed the client's by at most that
 * many, and the settled audit must still be clean. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"

#define NACCT 20
#define NTHREADS 8
#define NPROCS 2
#define PER_WORKER 200 /* (8 + 2) * 200 = 2,000 transfers */

static const char *uri;
static int few_replicas_ok; /* DTX_TEST_FEW_REPLICAS */
static volatile int done;
static int samples, below_limit, audit_broken, audits;

typedef struct tally {
  int succeeded, failed, unexplained, errors, unavailable;
  unsigned seed;
} tally_t;

static void run_transfers(dtx_store_t *st, tally_t *t) {
  for (int i = 0; i < PER_WORKER; i++) {
    char from[16], to[16];
    int a = rand_r(&t->seed) % NACCT, b = rand_r(&t->seed) % (NACCT - 1);
    if (b >= a)
      b++;
    snprintf(from, sizeof from, "acc%02d", a);
    snprintf(to, sizeof to, "acc%02d", b);
    dtx_transfer_req_t req = {.from = from, .to = to,
                              .amount = 1 + rand_r(&t->seed) % 1200};
    json_t *tx = NULL;
    int rc = dtx_transfer_execute(st, &req, NULL, &tx);
    const char *state = json_string_value(json_object_get(tx, "state"));
    const char *reason = json_string_value(json_object_get(tx, "reason"));
    if (rc == DTX_EUNAVAILABLE && few_replicas_ok) {
      t->unavailable++;
    } else if (rc) {
      fprintf(stderr, "transfer error %s: %s\n", dtx_errname(rc),
              dtx_errdetail());
      t->errors++;
    } else if (state && strcmp(state, "succeeded") == 0) {
      t->succeeded++;
    } else if (state && strcmp(state, "failed") == 0 && few_replicas_ok &&
               reason && strcmp(reason, "abandoned by its executor") == 0) {
      t->unavailable++; /* a step was refused, and the transfer rolled back */
    } else if (state && strcmp(state, "failed") == 0) {
      t->failed++;
      if (!reason || strcmp(reason, "insufficient funds") != 0)
        t->unexplained++;
    } else {
      t->errors++;
    }
    json_decref(tx);
  }
}

static dtx_store_t *shared_st;

static void *thread_main(void *arg) {
  run_transfers(shared_st, arg);
  return NULL;
}

static void *sampler(void *arg) {
  (void)arg;
  while (!done) {
    json_t *all = NULL, *a, *rep = NULL;
    size_t i;
    if (dtx_account_list(shared_st, NULL, &all) == 0) {
      json_array_foreach(all, i, a) {
        json_t *min = json_object_get(a, "min_balance");
        if (json_is_integer(min) &&
            json_integer_value(json_object_get(a, "balance")) <
                json_integer_value(min))
          __atomic_add_fetch(&below_limit, 1, __ATOMIC_SEQ_CST);
      }
      samples++;
    }
    json_decref(all);
    if (samples % 10 == 0) {
      int rc = dtx_audit(shared_st, 0, &rep);
      audits++;
      if (rc) {
        audit_broken++;
        fprintf(stderr, "mid-run audit: %s %s\n", dtx_errname(rc), JS(rep));
      }
      json_decref(rep);
    }
    usleep(2000);
  }
  return NULL;
}

static void test_concurrent_transfers(void) {
  REQUIRE(dtx_store_open(uri, &shared_st) == 0);
  dtx_t_drop_transfers(shared_st);
  for (int i = 0; i < NACCT; i++) {
    char id[16];
    snprintf(id, sizeof id, "acc%02d", i);
    /* acc19 may go down to -500: limits other than 0 hold too. */
    dtx_account_opts_t ao = {.balance = 1000, .min_balance = i == 19 ? -500 : 0};
    CHECK_RC(dtx_account_create(shared_st, id, &ao, NULL), 0);
  }
  int pipes[NPROCS][2];
  pid_t pids[NPROCS];
  fflush(NULL);
  for (int p = 0; p < NPROCS; p++) {
    REQUIRE(pipe(pipes[p]) == 0);
    pids[p] = fork();
    REQUIRE(pids[p] >= 0);
    if (pids[p] == 0) {
      dtx_store_t *st;
      tally_t t = {.seed = 1000u + (unsigned)p};
      if (dtx_store_open(uri, &st) != 0)
        _exit(3);
      run_transfers(st, &t);
      dtx_store_close(st);
      if (write(pipes[p][1], &t, sizeof t) != (ssize_t)sizeof t)
        _exit(4);
      _exit(0);
    }
    close(pipes[p][1]);
  }
  pthread_t th[NTHREADS], samp;
  tally_t tl[NTHREADS];
  pthread_create(&samp, NULL, sampler, NULL);
  for (int i = 0; i < NTHREADS; i++) {
    tl[i] = (tally_t){.seed = (unsigned)i + 1};
    pthread_create(&th[i], NULL, thread_main, &tl[i]);
  }
  tally_t total = {0};
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(th[i], NULL);
    total.succeeded += tl[i].succeeded;
    total.failed += tl[i].failed;
    total.unexplained += tl[i].unexplained;
    total.errors += tl[i].errors;
    total.unavailable += tl[i].unavailable;
  }
  for (int p = 0; p < NPROCS; p++) {
    tally_t t = {0};
    int status;
    CHECK(read(pipes[p][0], &t, sizeof t) == (ssize_t)sizeof t);
    close(pipes[p][0]);
    waitpid(pids[p], &status, 0);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d",
           status);
    total.succeeded += t.succeeded;
    total.failed += t.failed;
    total.unexplained += t.unexplained;
    total.errors += t.errors;
    total.unavailable += t.unavailable;
  }
  done = 1;
  pthread_join(samp, NULL);
  printf("succeeded %d, failed %d (insufficient funds), unavailable %d, "
         "samples %d, mid-run audits %d\n",
         total.succeeded, total.failed, total.unavailable, samples, audits);
  CHECK(total.errors == 0);
  CHECK(total.unexplained == 0);
  CHECK(total.succeeded + total.failed + total.unavailable ==
        (NTHREADS + NPROCS) * PER_WORKER);
  CHECK(total.failed > 0);   /* some transfers were larger than the balance */
  CHECK(total.succeeded > 0);
  CHECK(samples > 0);
  CHECK(below_limit == 0);
  CHECK(audit_broken == 0);

  json_t *sum = NULL, *rep = NULL;
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  CHECK_RC(dtx_recover(shared_st, &ro, &sum), 0);
  json_decref(sum);
  int rc = dtx_audit(shared_st, DTX_AUDIT_SETTLED, &rep);
  CHECKF(rc == 0, "final audit: %s", JS(rep));
  CHECK(json_integer_value(json_object_get(rep, "opening_total")) ==
        NACCT * 1000);
  CHECK(json_integer_value(json_object_get(rep, "balance_total")) ==
        NACCT * 1000);
  json_t *states = json_object_get(rep, "states");
  /* Transfers that ended unavailable were finished by recovery, either
   * way (or never recorded, when their submission was refused). */
  json_int_t ssucc = json_integer_value(json_object_get(states, "succeeded"));
  json_int_t sfail = json_integer_value(json_object_get(states, "failed"));
  CHECKF(ssucc >= total.succeeded && sfail >= total.failed &&
             ssucc + sfail <= total.succeeded + total.failed +
                                  total.unavailable,
         "store: %lld succeeded, %lld failed", (long long)ssucc,
         (long long)sfail);
  json_decref(rep);
  dtx_store_close(shared_st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:transfer_concurrency.db";
  const char *few = getenv("DTX_TEST_FEW_REPLICAS");
  few_replicas_ok = few && strcmp(few, "1") == 0;
  TEST_RUN(test_concurrent_transfers);
  return TEST_DONE();
}
