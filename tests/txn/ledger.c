/* ledger.c -- the ledger (src/txn/ledger/) through the public C API on a
 * real store, under concurrency:
 *  1. the race the unique index decides: 8 threads, each with its own
 *     store handle, debit 60 from an account holding 100 at the same
 *     moment; exactly one passes the check, every other one is refused
 *     for funds naming the account (rounds on fresh accounts);
 *  2. load: 8 threads in this process and 2 in a forked one post 3-leg
 *     entries among 20 accounts (limits 0, plus one settlement account
 *     with none) for a bounded time, while a sampler reads balances: no
 *     available balance is ever below its limit, every refusal for funds
 *     names an account of the entry; then recovery commits everything
 *     and the settled audit is clean (legs sum to zero, caches equal
 *     recomputation, dense unique seqIds, anchors), and the balances sum
 *     to zero;
 *  3. pending races: post-pending, void, a partial post and expiry race
 *     for each pending entry from 4 processes; exactly one outcome wins
 *     and every caller agrees with it;
 *  4. refs (src/txn/ledger/meta.c): N entries with refs (200, or
 *     DTX_TEST_REF_ENTRIES; 10,000 is bench_ledger's ref lookup row),
 *     made unique; a lookup by ref examines exactly one document (the
 *     planner reads the {ref: 1} index, where a meta filter alone
 *     examines all N); 8 threads post one new ref under 8 ids at the
 *     same moment, round after round: exactly one is recorded, the
 *     others are DTX_EDUPKEY naming the winner; a retry of the winner's
 *     id with its ref is the winner's entry;
 *  6. both limits under holds (test_limits): 4 processes post credits
 *     and debits, held and not, fixed and balancing (-max legs), against
 *     an account with a max_balance and a floor while a sampler reads it;
 *     neither limit is ever seen broken, a balancing pair moves 1..cap
 *     or is refused only for moving nothing, and the settled audit is
 *     clean.
 *  7. entry time (src/txn/ledger/time.c, T1 and T2): posters in two
 *     processes and an importer race on accounts one of which is led by
 *     an entry timed a day ahead (a fast clock); each account's times
 *     never decrease in seqId order, imports land or are DTX_ESTATE,
 *     and the settled audit is clean;
 *  5. the tail memo of posts (src/txn/ledger/position.c) on one handle: a
 *     pending debit in the tail is held, not memoised as final; after the
 *     ledger collections are dropped and the accounts made again, the
 *     memo's anchor is gone and a post derives from the new store (a
 *     memo trusted without its anchor would let the debit through).
 *     Run last: the drop takes the ledger's indexes with it.
 *  6. closing an account (src/txn/ledger/close.c) while posts race it:
 *     each round, 6 threads (own handles) post +1 or -1 on a fresh
 *     account and 2 threads close it until it closes, all from one
 *     barrier (the closes start 0..12 ms late, by round, so posts win
 *     some races on every backend); every post lands before the close or
 *     is refused DTX_ESTATE naming the account, both closers return the
 *     same close, it holds the account's last seqId at balance 0, and the
 *     settled audit (leg_after_close, closed_not_zero) is clean.
 *
 * The committer's tests are in ledger_commit.c.
 *
 * usage: txn_ledger STORE-URI   (the ledger collections are dropped
 * first) */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "doc/doc.h"
#include "ledgerlib.h"
#include "store/store.h" /* dtx__docs_examined */
#include "testlib.h"
#include "txn/ledger/ledger.h" /* dtx__lg_seal */
#include "util/err.h"

static const char *uri;


static dtx_store_t *open_store(void) { return dtx_t_open(uri); }


/* ---- 1. two debits only one fits ------------------------------------------ */

#define RACERS 8
#define ROUNDS 6

typedef struct racer {
  pthread_barrier_t *bar;
  dtx_store_t *st;
  const char *acct;
  int rc;
  char detail[256];
} racer_t;

static void *race_one(void *arg) {
  racer_t *r = arg;
  dtx_ledger_leg_t legs[] = {{r->acct, -60}, {"S", 60}};
  dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 2};
  json_t *e = NULL;
  pthread_barrier_wait(r->bar);
  r->rc = dtx_ledger_post(r->st, &req, NULL, &e);
  snprintf(r->detail, sizeof r->detail, "%s", dtx_errdetail());
  json_decref(e);
  return NULL;
}

static void test_race(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  CHECK_RC(dtx_ledger_account_create(st, "S", &none, NULL), 0);
  racer_t r[RACERS];
  pthread_t th[RACERS];
  pthread_barrier_t bar;
  for (int i = 0; i < RACERS; i++)
    r[i].st = open_store();
  for (int round = 0; round < ROUNDS; round++) {
    char acct[32];
    snprintf(acct, sizeof acct, "R%d", round);
    CHECK_RC(dtx_ledger_account_create(st, acct, NULL, NULL), 0);
    dtx_ledger_leg_t fund[] = {{"S", -100}, {acct, 100}};
    dtx_ledger_post_req_t req = {.legs = fund, .nlegs = 2};
    json_t *e = NULL; /* every other round without out: it is optional */
    CHECK_RC(dtx_ledger_post(st, &req, NULL, round % 2 ? NULL : &e), 0);
    json_decref(e);
    pthread_barrier_init(&bar, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
      r[i].bar = &bar;
      r[i].acct = acct;
      pthread_create(&th[i], NULL, race_one, &r[i]);
    }
    int passed = 0;
    for (int i = 0; i < RACERS; i++) {
      pthread_join(th[i], NULL);
      if (r[i].rc == 0)
        passed++;
      else
        CHECKF(r[i].rc == DTX_EINSUFFICIENT && strstr(r[i].detail, acct),
               "racer %d: %s: %s", i, dtx_errname(r[i].rc), r[i].detail);
    }
    pthread_barrier_destroy(&bar);
    CHECKF(passed == 1, "round %d: %d debits of 60 passed on 100", round,
           passed);
    json_t *b = NULL;
    CHECK_RC(dtx_ledger_balance(st, acct, DTX_LEDGER_LATEST, &b), 0);
    CHECKF(dtx_t_ival(b, "balance") == 40 && dtx_t_ival(b, "seq") == 2,
           "round %d: balance %lld seq %lld", round,
           (long long)dtx_t_ival(b, "balance"), (long long)dtx_t_ival(b, "seq"));
    json_decref(b);
  }
  for (int i = 0; i < RACERS; i++)
    dtx_store_close(r[i].st);
  dtx_store_close(st);
}

/* ---- 6. a close racing posts ---------------------------------------------- */

#define CPOSTERS 6
#define CLOSERS 2
#define CROUNDS 5

typedef struct closer {
  pthread_barrier_t *bar;
  dtx_store_t *st;
  const char *acct;
  int closing, delay_ms; /* closing 0: posts value, +1 or -1 */
  int64_t value;
  int rc, bad;
  int64_t seq; /* the post's seqId on acct, or the close's */
  char id[32], detail[256];
} closer_t;

static void *close_one(void *arg) {
  closer_t *c = arg;
  json_t *e = NULL;
  pthread_barrier_wait(c->bar);
  if (!c->closing) {
    dtx_ledger_leg_t legs[] = {{c->acct, c->value}, {"S", -c->value}};
    dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 2};
    c->rc = dtx_ledger_post(c->st, &req, NULL, &e);
    /* refused: the account closed first, and it is named */
    c->bad = c->rc && (c->rc != DTX_ESTATE ||
                       !strstr(dtx_errdetail(), "is closed") ||
                       !strstr(dtx_errdetail(), c->acct));
  } else {
    /* Round r starts its closes 3r ms late, so some rounds close before
     * every post and some after some land (on every backend). */
    usleep((useconds_t)(c->delay_ms * 1000));
    /* until it closes: a balance other than 0 is refused, named.  Bounded
     * by time, not by tries: on a loaded machine a post in flight may land
     * 200 ms later (400 tries once ran out with one leg of a pair in). */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if (t1.tv_sec - t0.tv_sec > 20)
        break;
      json_decref(e);
      e = NULL;
      if ((c->rc = dtx_ledger_account_close(c->st, c->acct, NULL, &e)) == 0)
        break;
      if (c->rc != DTX_ESTATE || !strstr(dtx_errdetail(), "has balance")) {
        c->bad = 1;
        break;
      }
      usleep(500);
    }
  }
  snprintf(c->detail, sizeof c->detail, "%s", c->rc ? dtx_errdetail() : "");
  if (c->rc == 0) {
    snprintf(c->id, sizeof c->id, "%s", json_string_value(json_object_get(e, "_id")));
    json_t *l = json_array_get(json_object_get(e, "changes"), 0);
    c->seq = json_integer_value(json_object_get(l, "seqId"));
    for (size_t i = 0; i < json_array_size(json_object_get(e, "changes")); i++) {
      l = json_array_get(json_object_get(e, "changes"), i);
      if (strcmp(json_string_value(json_object_get(l, "account")), c->acct) == 0)
        c->seq = json_integer_value(json_object_get(l, "seqId"));
    }
  }
  json_decref(e);
  return NULL;
}

static void test_close_race(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  json_t *e = NULL;
  int rc = dtx_ledger_account_create(st, "S", &none, NULL);
  CHECKF(rc == 0 || rc == DTX_EDUPKEY, "S: %s", dtx_errname(rc));
  closer_t c[CPOSTERS + CLOSERS];
  pthread_t th[CPOSTERS + CLOSERS];
  pthread_barrier_t bar;
  int n = CPOSTERS + CLOSERS, refused = 0;
  for (int i = 0; i < n; i++)
    c[i].st = open_store();
  for (int round = 0; round < CROUNDS; round++) {
    char acct[32];
    snprintf(acct, sizeof acct, "Z%d", round);
    CHECK_RC(dtx_ledger_account_create(st, acct, &none, NULL), 0);
    pthread_barrier_init(&bar, NULL, (unsigned)n);
    for (int i = 0; i < n; i++) {
      c[i] = (closer_t){.bar = &bar, .st = c[i].st, .acct = acct,
                        .closing = i >= CPOSTERS, .delay_ms = 3 * round,
                        .value = i % 2 ? -1 : 1};
      pthread_create(&th[i], NULL, close_one, &c[i]);
    }
    for (int i = 0; i < n; i++)
      pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    const closer_t *a = &c[CPOSTERS], *b = &c[CPOSTERS + 1];
    CHECKF(a->rc == 0 && b->rc == 0 && strcmp(a->id, b->id) == 0 &&
               a->seq == b->seq,
           "round %d: closes %s %s (%s), %s %s (%s)", round,
           dtx_errname(a->rc), a->id, a->detail, dtx_errname(b->rc), b->id,
           b->detail);
    __int128 sum = 0;
    for (int i = 0; i < n; i++) {
      CHECKF(!c[i].bad, "round %d thread %d: %s: %s", round, i,
             dtx_errname(c[i].rc), c[i].detail);
      if (i < CPOSTERS && c[i].rc == 0) {
        sum += c[i].value;
        CHECKF(c[i].seq < a->seq, "round %d: a post holds seqId %lld, the "
               "close %lld", round, (long long)c[i].seq, (long long)a->seq);
      }
      refused += i < CPOSTERS && c[i].rc != 0;
    }
    json_t *bal = NULL;
    CHECK_RC(dtx_ledger_balance(st, acct, DTX_LEDGER_LATEST, &bal), 0);
    CHECKF(sum == 0 && dtx_t_ival(bal, "balance") == 0 &&
               dtx_t_ival(bal, "seq") == a->seq &&
               json_object_get(bal, "closed_at"),
           "round %d: landed sum %lld, balance %lld at seq %lld, close at %lld",
           round, (long long)sum, (long long)dtx_t_ival(bal, "balance"),
           (long long)dtx_t_ival(bal, "seq"), (long long)a->seq);
    json_decref(bal);
  }
  printf("  %d of %d posts refused as closed\n", refused, CROUNDS * CPOSTERS);
  for (int i = 0; i < n; i++)
    dtx_store_close(c[i].st);
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  CHECK_RC(dtx_recover(st, &ro, &e), 0);
  json_decref(e);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

/* ---- 2. load with a sampler ---------------------------------------------- */

#define NACCTS 20
#define THREADS 8
#define CHILD_THREADS 2
#define LOAD_MS 2500

typedef struct load {
  int64_t until;
  unsigned seed;
  int posted, refused, bad_refusal, errors;
  char first_error[256];
} load_t;

static atomic_int sampler_stop, below_limit, samples;

static void acct_name(char *buf, size_t n, int i) {
  if (i == NACCTS)
    snprintf(buf, n, "SETTLE");
  else
    snprintf(buf, n, "L%02d", i);
}

static void *poster(void *arg) {
  load_t *l = arg;
  dtx_store_t *st = open_store();
  while (dtx_t_mono_ms() < l->until) {
    /* Three distinct accounts: two debited, one credited; now and then
     * the settlement account pays in, so money keeps flowing. */
    char a[3][16];
    int idx[3];
    for (int k = 0; k < 3; k++) {
    again:
      idx[k] = (int)(rand_r(&l->seed) % (NACCTS + 1));
      for (int j = 0; j < k; j++)
        if (idx[j] == idx[k])
          goto again;
      acct_name(a[k], sizeof a[k], idx[k]);
    }
    int64_t x = 1 + rand_r(&l->seed) % 40, y = 1 + rand_r(&l->seed) % 40;
    dtx_ledger_leg_t legs[] = {{a[0], -x}, {a[1], -y}, {a[2], x + y}};
    dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 3};
    json_t *e = NULL;
    int rc = dtx_ledger_post(st, &req, NULL, &e);
    json_decref(e);
    if (rc == 0)
      l->posted++;
    else if (rc == DTX_EINSUFFICIENT) {
      l->refused++;
      const char *d = dtx_errdetail();
      char q0[24], q1[24];
      snprintf(q0, sizeof q0, "'%s'", a[0]);
      snprintf(q1, sizeof q1, "'%s'", a[1]);
      if (!strstr(d, q0) && !strstr(d, q1))
        l->bad_refusal++;
    } else {
      if (!l->errors++)
        snprintf(l->first_error, sizeof l->first_error, "%s: %s",
                 dtx_errname(rc), dtx_errdetail());
    }
  }
  dtx_store_close(st);
  return NULL;
}

static void *sampler(void *arg) {
  (void)arg;
  dtx_store_t *st = open_store();
  unsigned seed = 7;
  while (!atomic_load(&sampler_stop)) {
    char a[16];
    acct_name(a, sizeof a, (int)(rand_r(&seed) % NACCTS));
    json_t *b = NULL;
    if (dtx_ledger_balance(st, a, DTX_LEDGER_LATEST, &b) == 0) {
      atomic_fetch_add(&samples, 1);
      if (dtx_t_ival(b, "available") < 0) {
        atomic_fetch_add(&below_limit, 1);
        dtx_t_show("below limit", b);
      }
    }
    json_decref(b);
  }
  dtx_store_close(st);
  return NULL;
}

/* Runs n posters until `until`; sums their counts into *sum. */
static void run_posters(int n, int64_t until, unsigned seed, load_t *sum) {
  load_t l[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < n; i++) {
    memset(&l[i], 0, sizeof l[i]);
    l[i].until = until;
    l[i].seed = seed + (unsigned)i;
    pthread_create(&th[i], NULL, poster, &l[i]);
  }
  memset(sum, 0, sizeof *sum);
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    sum->posted += l[i].posted;
    sum->refused += l[i].refused;
    sum->bad_refusal += l[i].bad_refusal;
    if (l[i].errors && !sum->errors)
      memcpy(sum->first_error, l[i].first_error, sizeof sum->first_error);
    sum->errors += l[i].errors;
  }
}

static void test_load(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  char a[16];
  CHECK_RC(dtx_ledger_account_create(st, "SETTLE", &none, NULL), 0);
  for (int i = 0; i < NACCTS; i++) {
    acct_name(a, sizeof a, i);
    CHECK_RC(dtx_ledger_account_create(st, a, NULL, NULL), 0);
    dtx_ledger_leg_t fund[] = {{"SETTLE", -50}, {a, 50}};
    dtx_ledger_post_req_t req = {.legs = fund, .nlegs = 2};
    json_t *e = NULL;
    CHECK_RC(dtx_ledger_post(st, &req, NULL, &e), 0);
    json_decref(e);
  }
  int64_t until = dtx_t_mono_ms() + LOAD_MS;
  int pipefd[2];
  REQUIRE(pipe(pipefd) == 0);
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) { /* the second process: its own handles, its counts back */
    load_t sum;
    close(pipefd[0]);
    run_posters(CHILD_THREADS, until, 1000, &sum);
    ssize_t w = write(pipefd[1], &sum, sizeof sum);
    _exit(w == (ssize_t)sizeof sum ? 0 : 1);
  }
  close(pipefd[1]);
  pthread_t sth;
  pthread_create(&sth, NULL, sampler, NULL);
  load_t mine, child;
  run_posters(THREADS, until, 1, &mine);
  atomic_store(&sampler_stop, 1);
  pthread_join(sth, NULL);
  ssize_t got = read(pipefd[0], &child, sizeof child);
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(got == (ssize_t)sizeof child && WIFEXITED(status) &&
        WEXITSTATUS(status) == 0);
  if (got != (ssize_t)sizeof child)
    memset(&child, 0, sizeof child);
  int posted = mine.posted + child.posted, refused = mine.refused + child.refused;
  printf("load: %d posted, %d refused for funds, %d balance samples, "
         "%d errors\n", posted, refused, atomic_load(&samples),
         mine.errors + child.errors);
  CHECK(posted > 0 && refused > 0 && atomic_load(&samples) > 0);
  CHECKF(mine.errors + child.errors == 0, "%s%s", mine.first_error,
         child.first_error);
  CHECK(mine.bad_refusal + child.bad_refusal == 0);
  CHECK(atomic_load(&below_limit) == 0);
  /* Everything committed, caches caught up: the settled audit. */
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  dtx_t_show("recover", json_object_get(json_object_get(sum, "patterns"), "ledger"));
  json_decref(sum);
  dtx_t_lg_audit_ok(st);
  int64_t total = 0;
  for (int i = 0; i <= NACCTS; i++) {
    json_t *b = NULL;
    acct_name(a, sizeof a, i);
    CHECK_RC(dtx_ledger_balance(st, a, DTX_LEDGER_LATEST, &b), 0);
    if (i < NACCTS)
      CHECK(dtx_t_ival(b, "balance") >= 0);
    total += dtx_t_ival(b, "balance");
    json_decref(b);
  }
  CHECKF(total == 0, "balances sum to %lld", (long long)total);
  dtx_store_close(st);
}

/* ---- 3. pending races ------------------------------------------------------ */

#define PENDING_ROUNDS 8

/* Shared with the 3 resolver processes of a round. */
typedef struct race_shm {
  pthread_barrier_t bar; /* PTHREAD_PROCESS_SHARED */
  int rc[4];
} race_shm_t;

/* The resolver process `which` (0 post-pending, 1 void, 2 expiry by a
 * recovery pass) of entry id: its own store handle, then the start line. */
static void resolver(race_shm_t *shm, int which, const char *id) {
  dtx_store_t *st = open_store();
  json_t *e = NULL;
  pthread_barrier_wait(&shm->bar);
  if (which == 2) {
    dtx_recover_opts_t ro = {.older_than_ms = -1};
    shm->rc[2] = dtx_recover(st, &ro, &e);
  } else if (which == 3) { /* a partial post of 4 of the 10 (hold.c) */
    dtx_ledger_leg_t am[] = {{"P", -4}, {"S", 4}};
    shm->rc[3] = dtx_ledger_post_partial(st, id, am, 2, "pp", &e);
  } else {
    shm->rc[which] = which == 0 ? dtx_ledger_post_pending(st, id, &e)
                                : dtx_ledger_void(st, id, &e);
  }
  json_decref(e);
  dtx_store_close(st);
  _exit(0);
}

static void test_pending_races(void) {
  dtx_store_t *st = open_store();
  race_shm_t *shm = mmap(NULL, sizeof *shm, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(shm != MAP_FAILED);
  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  int outcomes[4] = {0};
  CHECK_RC(dtx_ledger_account_create(st, "P", NULL, NULL), 0);
  dtx_ledger_leg_t fund[] = {{"S", -1000}, {"P", 1000}};
  dtx_ledger_post_req_t freq = {.legs = fund, .nlegs = 2};
  json_t *e = NULL;
  CHECK_RC(dtx_ledger_post(st, &freq, NULL, &e), 0);
  json_decref(e);
  for (int round = 0; round < PENDING_ROUNDS; round++) {
    char id[32];
    snprintf(id, sizeof id, "pend%d", round);
    dtx_ledger_leg_t legs[] = {{"P", -10}, {"S", 10}};
    /* Timeouts from before the race to well after its start (a loaded
     * or sanitized run starts processes slowly), so each outcome can
     * win some rounds. */
    static const int64_t timeouts[] = {1, 40, 150, 1000};
    dtx_ledger_post_req_t req = {.id = id, .legs = legs, .nlegs = 2,
                                 .pending = 1, .timeout_ms = timeouts[round % 4]};
    CHECK_RC(dtx_ledger_post(st, &req, NULL, &e), 0);
    json_decref(e);
    usleep(5000);
    pthread_barrier_init(&shm->bar, &ba, 4);
    shm->rc[0] = shm->rc[1] = shm->rc[2] = shm->rc[3] = 1;
    pid_t pids[4];
    fflush(NULL);
    for (int i = 0; i < 4; i++)
      if ((pids[i] = fork()) == 0)
        resolver(shm, i, id);
    for (int i = 0; i < 4; i++) {
      int status = 0;
      CHECK(pids[i] > 0 && waitpid(pids[i], &status, 0) == pids[i] &&
            WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    pthread_barrier_destroy(&shm->bar);
    dtx_recover_opts_t ro = {.older_than_ms = -1};
    json_t *sum = NULL;
    CHECK_RC(dtx_recover(st, &ro, &sum), 0);
    json_decref(sum);
    CHECK_RC(dtx_ledger_get(st, id, &e), 0);
    const char *final = e ? json_string_value(json_object_get(e, "state")) : "";
    int k = json_object_get(e, "amounts")  ? 3
            : strcmp(final, "posted") == 0   ? 0
            : strcmp(final, "voided") == 0 ? 1
            : strcmp(final, "expired") == 0 ? 2
                                            : -1;
    CHECKF(k >= 0, "%s ended %s", id, final);
    if (k >= 0)
      outcomes[k]++;
    /* Whoever won, the losers say so: post-pending succeeds only if it
     * posted, void only if it voided; the others get STATE. */
    CHECKF((shm->rc[0] == 0) == (k == 0) &&
               (shm->rc[0] == 0 || shm->rc[0] == DTX_ESTATE ||
                (k == 3 && shm->rc[0] == DTX_ECONFLICT)),
           "%s: post-pending %s with the entry %s", id, dtx_errname(shm->rc[0]),
           final);
    CHECKF((shm->rc[1] == 0) == (k == 1) &&
               (shm->rc[1] == 0 || shm->rc[1] == DTX_ESTATE),
           "%s: void %s with the entry %s", id, dtx_errname(shm->rc[1]), final);
    CHECK_RC(shm->rc[2], 0);
    CHECKF((shm->rc[3] == 0) == (k == 3) &&
               (shm->rc[3] == 0 || shm->rc[3] == DTX_ESTATE ||
                shm->rc[3] == DTX_ECONFLICT),
           "%s: partial post %s with the entry %s", id,
           dtx_errname(shm->rc[3]), final);
    json_decref(e);
  }
  printf("pending races: %d posted, %d voided, %d expired, %d posted "
         "partly\n", outcomes[0], outcomes[1], outcomes[2], outcomes[3]);
  json_t *b = NULL;
  CHECK_RC(dtx_ledger_balance(st, "P", DTX_LEDGER_LATEST, &b), 0);
  CHECK(dtx_t_ival(b, "balance") == 1000 - 10 * outcomes[0] - 4 * outcomes[3] &&
        dtx_t_ival(b, "pending_debits") == 0);
  dtx_t_show("P", b);
  json_decref(b);
  dtx_t_lg_audit_ok(st);
  pthread_barrierattr_destroy(&ba);
  munmap(shm, sizeof *shm);
  dtx_store_close(st);
}

/* ---- 4. refs ----------------------------------------------------------------- */

typedef struct refracer {
  pthread_barrier_t *bar;
  dtx_store_t *st;
  char id[32], ref[32];
  int n, rc;
  char detail[256];
} refracer_t;

static void *ref_one(void *arg) {
  refracer_t *r = arg;
  /* Accounts of its own: no seqId is contended, so only the unique
   * index can refuse a duplicate. */
  char from[32], to[32];
  snprintf(from, sizeof from, "RX%d", r->n);
  snprintf(to, sizeof to, "RY%d", r->n);
  dtx_ledger_leg_t legs[] = {{from, -1}, {to, 1}};
  dtx_ledger_post_req_t req = {.id = r->id, .legs = legs, .nlegs = 2,
                               .ref = r->ref};
  json_t *e = NULL;
  pthread_barrier_wait(r->bar);
  r->rc = dtx_ledger_post(r->st, &req, NULL, &e);
  snprintf(r->detail, sizeof r->detail, "%s", dtx_errdetail());
  json_decref(e);
  return NULL;
}

static void test_refs(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  const char *env = getenv("DTX_TEST_REF_ENTRIES");
  int n = env && atoi(env) > 0 ? atoi(env) : 200;
  CHECK_RC(dtx_ledger_account_create(st, "RFS", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "RFA", NULL, NULL), 0);
  CHECK_RC(dtx_ledger_unique_refs(st), 0);
  /* n entries in batches of 50, each with a ref and a meta */
  for (int from = 0; from < n; from += 50) {
    dtx_ledger_leg_t legs[] = {{"RFS", -1}, {"RFA", 1}};
    dtx_ledger_post_req_t reqs[50];
    dtx_ledger_result_t res[50];
    char refs[50][32];
    json_t *metas[50];
    int k = n - from < 50 ? n - from : 50;
    for (int i = 0; i < k; i++) {
      snprintf(refs[i], sizeof refs[i], "inv-%d", from + i);
      metas[i] = json_pack("{s:i}", "n", from + i);
      reqs[i] = (dtx_ledger_post_req_t){.legs = legs, .nlegs = 2,
                                        .ref = refs[i], .meta = metas[i]};
    }
    CHECK_RC(dtx_ledger_post_many(st, reqs, (size_t)k, NULL, res), 0);
    dtx_ledger_results_clear(res, (size_t)k);
    for (int i = 0; i < k; i++)
      json_decref(metas[i]);
  }
  /* The planner's choice, as the documents it examined: one by ref. */
  json_t *out = NULL, *mf = json_pack("{s:i}", "n", n / 2);
  char ref[32];
  snprintf(ref, sizeof ref, "inv-%d", n / 2);
  dtx__docs_examined = 0;
  CHECK_RC(dtx_ledger_entries(st, ref, NULL, NULL, &out), 0);
  int64_t by_ref = dtx__docs_examined;
  CHECKF(json_array_size(out) == 1 && by_ref == 1,
         "by ref: %zu entries, %lld documents examined", json_array_size(out),
         (long long)by_ref);
  json_decref(out);
  dtx__docs_examined = 0;
  CHECK_RC(dtx_ledger_entries(st, NULL, mf, NULL, &out), 0);
  int64_t by_meta = dtx__docs_examined;
  CHECKF(json_array_size(out) == 1 && by_meta >= n,
         "by meta: %zu entries, %lld documents examined",
         json_array_size(out), (long long)by_meta);
  json_decref(out);
  json_decref(mf);
  printf("  refs: %d entries; a lookup by ref examined %lld document(s) "
         "(the {ref: 1} index), by a meta filter %lld (a scan)\n", n,
         (long long)by_ref, (long long)by_meta);
  /* One new ref, 8 ids, at once: one entry. */
  refracer_t r[RACERS];
  pthread_t th[RACERS];
  pthread_barrier_t bar;
  for (int i = 0; i < RACERS; i++) {
    char a[32];
    r[i].st = open_store();
    r[i].n = i;
    snprintf(a, sizeof a, "RX%d", i);
    CHECK_RC(dtx_ledger_account_create(st, a, &none, NULL), 0);
    snprintf(a, sizeof a, "RY%d", i);
    CHECK_RC(dtx_ledger_account_create(st, a, NULL, NULL), 0);
  }
  for (int round = 0; round < ROUNDS; round++) {
    pthread_barrier_init(&bar, NULL, RACERS);
    for (int i = 0; i < RACERS; i++) {
      r[i].bar = &bar;
      snprintf(r[i].id, sizeof r[i].id, "rr%d-%d", round, i);
      snprintf(r[i].ref, sizeof r[i].ref, "race-%d", round);
      pthread_create(&th[i], NULL, ref_one, &r[i]);
    }
    int passed = 0, winner = -1;
    for (int i = 0; i < RACERS; i++) {
      pthread_join(th[i], NULL);
      if (r[i].rc == 0)
        passed++, winner = i;
    }
    pthread_barrier_destroy(&bar);
    CHECKF(passed == 1, "round %d: %d entries took ref race-%d", round,
           passed, round);
    for (int i = 0; winner >= 0 && i < RACERS; i++)
      CHECKF(i == winner || (r[i].rc == DTX_EDUPKEY &&
                             strstr(r[i].detail, r[winner].id)),
             "racer %d: %s: %s", i, dtx_errname(r[i].rc), r[i].detail);
    if (winner >= 0) { /* the winner's retry is its entry */
      char from[32], to[32];
      snprintf(from, sizeof from, "RX%d", winner);
      snprintf(to, sizeof to, "RY%d", winner);
      dtx_ledger_leg_t legs[] = {{from, -1}, {to, 1}};
      dtx_ledger_post_req_t req = {.id = r[winner].id, .legs = legs,
                                   .nlegs = 2, .ref = r[winner].ref};
      json_t *e = NULL;
      CHECK_RC(dtx_ledger_post(st, &req, NULL, &e), 0);
      CHECK(e && strcmp(json_string_value(json_object_get(e, "_id")),
                        r[winner].id) == 0);
      json_decref(e);
    }
  }
  for (int i = 0; i < RACERS; i++)
    dtx_store_close(r[i].st);
  json_t *b = NULL;
  CHECK_RC(dtx_ledger_balance(st, "RFA", DTX_LEDGER_LATEST, &b), 0);
  CHECKF(dtx_t_ival(b, "balance") == n, "RFA: balance %lld, want %d",
         (long long)dtx_t_ival(b, "balance"), n);
  json_decref(b);
  dtx_store_close(st);
}

/* ---- 5. the tail memo ------------------------------------------------------ */


/* ---- 6. entry time (src/txn/ledger/time.c) -------------------------------- */

#define TIME_ACCTS 4
#define TIME_POSTS 12
#define TIME_THREADS 3
#define TIME_IMPORTS 12

static const char *const time_acct[TIME_ACCTS] = {"TM0", "TM1", "TM2", "TM3"};

/* Posts TIME_POSTS 3-leg entries TMS -> two of TM0..TM3; the count of
 * failures in *errors (each a bug: no limit, no funds check). */
static void *time_poster(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  dtx_store_t *st = open_store();
  int errors = 0;
  for (int i = 0; i < TIME_POSTS; i++) {
    int a = (int)(rand_r(&seed) % TIME_ACCTS), b = (a + 1) % TIME_ACCTS;
    dtx_ledger_leg_t legs[] = {{"TMS", -2}, {time_acct[a], 1},
                               {time_acct[b], 1}};
    dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 3};
    int rc = dtx_ledger_post(st, &req, NULL, NULL);
    if (rc && !errors++)
      fprintf(stderr, "time poster: %s %s\n", dtx_errname(rc),
              dtx_errdetail());
  }
  dtx_store_close(st);
  return (void *)(uintptr_t)errors;
}

typedef struct time_imp {
  int64_t at;
  int landed, refused, other;
} time_imp_t;

/* Imports TM1 -> TM2 at ->at, again and again, while the posters run:
 * each lands (no later entry yet) or is DTX_ESTATE (T2), nothing else. */
static void *time_importer(void *arg) {
  time_imp_t *t = arg;
  dtx_store_t *st = open_store();
  for (int i = 0; i < TIME_IMPORTS; i++) {
    dtx_ledger_leg_t legs[] = {{"TM1", -1}, {"TM2", 1}};
    dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 2, .imported = 1,
                                 .at_ms = t->at + i};
    int rc = dtx_ledger_post(st, &req, NULL, NULL);
    if (rc == 0)
      t->landed++;
    else if (rc == DTX_ESTATE)
      t->refused++;
    else
      t->other++;
  }
  dtx_store_close(st);
  return NULL;
}

static void run_time_posters(int n, unsigned seed, int *errors) {
  pthread_t th[TIME_THREADS];
  void *r;
  for (int i = 0; i < n; i++)
    pthread_create(&th[i], NULL, time_poster, (void *)(uintptr_t)(seed + i));
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], &r);
    *errors += (int)(uintptr_t)r;
  }
}

/* T1 under concurrency: posters in this process and a forked one, an
 * importer racing them, and TM0 led by an entry timed a day ahead (as a
 * poster whose clock runs fast would leave it).  Afterwards each
 * account's times never decrease in seqId order, every import either
 * landed or was refused with DTX_ESTATE, the later entries on TM0 are
 * timed no earlier than the day-ahead one, and the settled audit (its
 * time_order check included) is clean. */
static void test_times(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  CHECK_RC(dtx_ledger_account_create(st, "TMS", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "TMF", &none, NULL), 0);
  for (int i = 0; i < TIME_ACCTS; i++)
    CHECK_RC(dtx_ledger_account_create(st, time_acct[i], &none, NULL), 0);
  int64_t now = dtx__now_ms(), ahead = now + 86400000;
  char buf[512];
  snprintf(buf, sizeof buf,
           "{\"_id\":\"tm-ahead\",\"changes\":[{\"account\":\"TMF\","
           "\"value\":-1,\"seqId\":1},{\"account\":\"TM0\",\"value\":1,"
           "\"seqId\":1}],\"state\":\"posted\",\"proc\":\"uncommitted\","
           "\"created\":%lld,\"updated\":%lld,\"at\":%lld}",
           (long long)ahead, (long long)ahead, (long long)ahead);
  json_t *fast = json_loads(buf, 0, NULL);
  REQUIRE(fast);
  /* it stands for a live entry of another process: sealed as one (L5) */
  CHECK_RC(dtx__lg_seal(fast), 0);
  CHECK_RC(dtx_store_insert_ex(st, DTX_LEDGER_ENTRIES, fast,
                               &(dtx_insert_opts_t){.bypass_validation = 1},
                               NULL),
           0);
  json_decref(fast);
  /* The first import lands: no entry of TM1, TM2 yet. */
  time_imp_t imp = {.at = now - 3600000};
  dtx_ledger_leg_t legs[] = {{"TM1", -1}, {"TM2", 1}};
  dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 2, .imported = 1,
                               .at_ms = imp.at - 1};
  CHECK_RC(dtx_ledger_post(st, &req, NULL, NULL), 0);
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int errors = 0;
    run_time_posters(2, 500, &errors);
    _exit(errors ? 1 : 0);
  }
  pthread_t ith;
  pthread_create(&ith, NULL, time_importer, &imp);
  int errors = 0, status = 0;
  run_time_posters(TIME_THREADS, 1, &errors);
  pthread_join(ith, NULL);
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(errors == 0);
  printf("times: %d imports landed, %d refused (ESTATE)\n", imp.landed,
         imp.refused);
  CHECK(imp.other == 0 && imp.landed + imp.refused == TIME_IMPORTS);
  const char *all[] = {"TMS", "TMF", "TM0", "TM1", "TM2", "TM3"};
  for (size_t k = 0; k < sizeof all / sizeof *all; k++) {
    json_t *es = NULL, *e;
    size_t i;
    int64_t last = -1;
    CHECK_RC(dtx_ledger_list(st, all[k], NULL, &es), 0);
    json_array_foreach(es, i, e) {
      int64_t at = dtx_t_ival(e, "at");
      CHECKF(at >= last, "%s: entry %s (#%zu) timed %lld after %lld", all[k],
             json_string_value(json_object_get(e, "_id")), i, (long long)at,
             (long long)last);
      if (strcmp(all[k], "TM0") == 0)
        CHECK(at >= ahead);
      last = at;
    }
    json_decref(es);
  }
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = 0}, &sum), 0);
  json_decref(sum);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

static void test_memo(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  CHECK_RC(dtx_ledger_account_create(st, "MS", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "M", NULL, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "MS", "M", 100, 0, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "M", "MS", 10, 0, NULL), 0);     /* memo: M at 90 */
  CHECK_RC(dtx_t_lg_post2(st, "M", "MS", 60, 1, "memo-p"), 0); /* held */
  CHECK_RC(dtx_t_lg_post2(st, "M", "MS", 50, 0, NULL), DTX_EINSUFFICIENT);
  json_t *e = NULL;
  CHECK_RC(dtx_ledger_void(st, "memo-p", &e), 0);
  json_decref(e);
  CHECK_RC(dtx_t_lg_post2(st, "M", "MS", 50, 0, NULL), 0); /* 40 left */
  CHECK_RC(dtx_t_lg_post2(st, "M", "MS", 41, 0, NULL), DTX_EINSUFFICIENT);
  json_t *b = NULL;
  CHECK_RC(dtx_ledger_balance(st, "M", DTX_LEDGER_LATEST, &b), 0);
  CHECKF(dtx_t_ival(b, "balance") == 40 && dtx_t_ival(b, "seq") == 4,
         "M: balance %lld seq %lld", (long long)dtx_t_ival(b, "balance"),
         (long long)dtx_t_ival(b, "seq"));
  json_decref(b);
  /* Same handle, a new ledger: the memo says M stood at 40 (seqId 4). */
  CHECK_RC(dtx_store_drop_collection_ex(st, DTX_LEDGER_ENTRIES, &(dtx_drop_opts_t){1}), 0);
  CHECK_RC(dtx_store_drop_collection_ex(st, DTX_LEDGER_ACCOUNTS, &(dtx_drop_opts_t){1}), 0);
  CHECK_RC(dtx_ledger_account_create(st, "MS", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "M", NULL, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "M", "MS", 30, 0, NULL), DTX_EINSUFFICIENT);
  CHECK_RC(dtx_t_lg_post2(st, "MS", "M", 5, 0, NULL), 0);
  CHECK_RC(dtx_ledger_balance(st, "M", DTX_LEDGER_LATEST, &b), 0);
  CHECKF(dtx_t_ival(b, "balance") == 5 && dtx_t_ival(b, "seq") == 1,
         "M anew: balance %lld seq %lld", (long long)dtx_t_ival(b, "balance"),
         (long long)dtx_t_ival(b, "seq"));
  json_decref(b);
  CHECK_RC(dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                          NULL),
           0);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}



/* ---- 6. both limits under holds ------------------------------------------ */

/* 4 processes post against one account H (min_balance 0, max_balance
 * LIM_MAX) at once: credits and debits, half of them held (pending) and
 * then posted or voided, for LIM_MS, while this process samples H's
 * balance: it is never above the max nor its available balance below the
 * floor.  Pending credits count toward the max (limit.c): with them left
 * out, a held credit posted after another credit took the room would
 * take H over the max. */
#define LIM_PROCS 4
#define LIM_MS 1200
#define LIM_MAX 1000
#define LIM_MIN_POSTS 40

typedef struct lim_counts {
  int ok, refused, errors;
  char first_error[200];
} lim_counts_t;

static void lim_poster(int k, int64_t until, lim_counts_t *out) {
  dtx_store_t *st = open_store();
  unsigned seed = 77u + (unsigned)k;
  /* At least LIM_MIN_POSTS each, so a loaded machine still races; bounded
   * by the parent's kill. */
  for (int n = 0; dtx_t_mono_ms() < until || n < LIM_MIN_POSTS; n++) {
    int64_t x = 1 + rand_r(&seed) % 300;
    int credit = rand_r(&seed) % 5 < 3, pending = rand_r(&seed) % 2;
    /* One post in four is a balancing pair (balancing.c): H swept out
     * (as far as its floor allows) or filled (as far as its max allows),
     * capped at x; it is refused only when it would move nothing. */
    int sweep = rand_r(&seed) % 4 == 0;
    dtx_ledger_leg_t legs[] = {{credit ? "LSRC" : "H", sweep ? x : -x},
                               {credit ? "H" : "LSINK", sweep ? 0 : x}};
    dtx_ledger_post_req_t req = {.legs = legs, .nlegs = 2, .pending = pending,
                                 .timeout_ms = pending ? 60000 : 0,
                                 .max_debit = sweep ? 1 : 0,
                                 .max_credit = sweep ? 2 : 0};
    json_t *e = NULL;
    int rc = dtx_ledger_post(st, &req, NULL, &e);
    if (rc == 0 && sweep) {
      int64_t moved = dtx_t_ival(json_array_get(json_object_get(e, "changes"), 1),
                                 "value");
      if (moved < 1 || moved > x) {
        rc = DTX_EBACKEND;
        dtx__err(rc, "a sweep capped at %lld moved %lld", (long long)x,
                 (long long)moved);
      }
    } else if (rc == DTX_EINSUFFICIENT && sweep &&
               !strstr(dtx_errdetail(), "moves nothing")) {
      rc = DTX_EBACKEND; /* a derived amount the check then refused */
    }
    if (rc == 0 && pending) {
      /* Held a moment (other posts see it), then posted or voided. */
      char id[64];
      json_t *r = NULL;
      snprintf(id, sizeof id, "%s", json_string_value(json_object_get(e, "_id")));
      usleep((useconds_t)(rand_r(&seed) % 5000));
      rc = rand_r(&seed) % 3 ? dtx_ledger_post_pending(st, id, &r)
                             : dtx_ledger_void(st, id, &r);
      json_decref(r);
    }
    json_decref(e);
    if (rc == 0)
      out->ok++;
    else if (rc == DTX_EINSUFFICIENT && strstr(dtx_errdetail(), "'H'"))
      out->refused++;
    else if (!out->errors++)
      snprintf(out->first_error, sizeof out->first_error, "%s: %s",
               dtx_errname(rc), dtx_errdetail());
  }
  dtx_store_close(st);
}

static void test_limits(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  dtx_ledger_limit_t hl = {.min_balance = 0, .has_max_balance = 1,
                           .max_balance = LIM_MAX};
  CHECK_RC(dtx_ledger_account_create(st, "LSRC", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "LSINK", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "H", &hl, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "LSRC", "H", 900, 0, NULL), 0);
  lim_counts_t *shm = mmap(NULL, LIM_PROCS * sizeof *shm,
                           PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                           -1, 0);
  REQUIRE(shm != MAP_FAILED);
  memset(shm, 0, LIM_PROCS * sizeof *shm);
  int64_t until = dtx_t_mono_ms() + LIM_MS;
  pid_t pids[LIM_PROCS];
  fflush(NULL);
  for (int k = 0; k < LIM_PROCS; k++)
    if ((pids[k] = fork()) == 0) {
      lim_poster(k, until, &shm[k]);
      _exit(0);
    }
  int samples = 0, broken = 0, running = LIM_PROCS, ok = 0, refused = 0;
  int status[LIM_PROCS] = {0}, done[LIM_PROCS] = {0};
  int64_t hard = dtx_t_mono_ms() + 60000; /* then killed, and failed */
  while (running > 0) {
    json_t *b = NULL;
    if (dtx_ledger_balance(st, "H", DTX_LEDGER_LATEST, &b) == 0) {
      samples++;
      if (dtx_t_ival(b, "balance") > LIM_MAX || dtx_t_ival(b, "available") < 0) {
        if (!broken++)
          dtx_t_show("H past a limit", b);
      }
    }
    json_decref(b);
    for (int k = 0; k < LIM_PROCS; k++)
      if (!done[k] && (pids[k] <= 0 ||
                       waitpid(pids[k], &status[k], WNOHANG) == pids[k]))
        done[k] = 1, running--;
    if (running > 0 && dtx_t_mono_ms() > hard) {
      for (int k = 0; k < LIM_PROCS; k++)
        if (!done[k])
          kill(pids[k], SIGKILL), waitpid(pids[k], &status[k], 0), done[k] = 1;
      running = 0;
    }
  }
  for (int k = 0; k < LIM_PROCS; k++) {
    CHECK(pids[k] > 0 && WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 0);
    ok += shm[k].ok;
    refused += shm[k].refused;
    CHECKF(shm[k].errors == 0, "poster %d: %s", k, shm[k].first_error);
  }
  printf("limits: %d posts, %d refused at a limit, %d samples, %d past a "
         "limit\n", ok, refused, samples, broken);
  CHECK(ok > 0 && refused > 0 && samples > 0);
  CHECK(broken == 0);
  munmap(shm, LIM_PROCS * sizeof *shm);
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  dtx_t_lg_audit_ok(st); /* M1 and L3 for every leg, as recorded */
  json_t *b = NULL;
  CHECK_RC(dtx_ledger_balance(st, "H", DTX_LEDGER_LATEST, &b), 0);
  CHECK(dtx_t_ival(b, "balance") <= LIM_MAX && dtx_t_ival(b, "balance") >= 0);
  json_decref(b);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:/tmp/doctx_txn_ledger.db";
  dtx_store_t *st = open_store();
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ENTRIES, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_close(st);
  TEST_RUN(test_race);
  TEST_RUN(test_load);
  TEST_RUN(test_pending_races);
  TEST_RUN(test_limits);
  TEST_RUN(test_refs);
  TEST_RUN(test_times);
  TEST_RUN(test_close_race);
  TEST_RUN(test_memo);
  return TEST_DONE();
}
