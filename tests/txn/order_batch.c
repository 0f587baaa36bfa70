/* order_batch.c -- dtx_order_confirm_many (order/many.c): each order of a
 * batch ends exactly as dtx_order_confirm would end it alone, on every
 * backend.
 *
 *  - batches of 1, 2 and 64 with a canceled order, an unknown id, an
 *    invalid id, an id twice, an order already success and one whose
 *    credit is declined (its account's balance would pass int64): each
 *    result (rc, state, attempt, transfer) equals what dtx_order_confirm
 *    gives a twin order alone; balances exact, audit clean;
 *  - two processes confirming the same 32 orders at once: every order
 *    success, each credited exactly once (one transfer per order);
 *  - a forked child crashed mid-batch at each order point it reaches and
 *    at a transfer point inside the credits, then dtx_recover and a
 *    second confirm_many: every order success, credited exactly once,
 *    audit clean;
 *  - a batch paused before its commits while another executor takes its
 *    orders over and holds them: the paused batch's fenced commits match
 *    nothing (it gives up at its deadline), and the orders are still
 *    credited once.
 *
 * usage: order_batch STORE-URI   (collections emptied first; a SQLite
 * file runs with sync=off; DTX_QUICK=1 keeps the loops short) */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "txnlib.h"
#include "txn/kit/kit.h"         /* the thief's takeover */
#include "txn/order/order.h" /* dtx__order_kind */
#include "util/fault.h"

static const char *uri;
static int quick;

/* A store emptied of transfers and orders. */
static dtx_store_t *fresh(void) {
  dtx_store_t *st = dtx_t_fresh(uri);
  dtx_store_drop_collection_ex(st, "orders", &(dtx_drop_opts_t){1});
  return st;
}

static void order(dtx_store_t *st, const char *id, const char *acct,
                  int64_t amount) {
  json_t *o = NULL;
  dtx_order_req_t r = {.trade_id = id, .account = acct, .amount = amount};
  if (dtx_order_create(st, &r, &o) != 0) {
    fprintf(stderr, "order %s: %s\n", id, dtx_errdetail());
    exit(1);
  }
  json_decref(o);
}

/* Order "p" + name of kind k; the twin of the batch order "b" + name. */
enum kind { K_PENDING, K_CANCELED, K_UNKNOWN, K_INVALID, K_SUCCESS,
            K_DECLINE, K_TWICE };

typedef struct spec {
  enum kind k;
  int of; /* K_TWICE: the index it repeats */
} spec_t;

/* Sets up order i of specs for prefix p ("b": the batch's, "s": the twin
 * confirmed alone); name gets its trade id. */
static void setup(dtx_store_t *st, const spec_t *s, size_t i, const char *p,
                  const char *tag, char *name, size_t len) {
  json_t *o = NULL;
  if (s[i].k == K_TWICE) {
    snprintf(name, len, "%s%s%d", p, tag, s[i].of);
    return;
  }
  if (s[i].k == K_INVALID) {
    snprintf(name, len, "%s:%s%zu", p, tag, i); /* ':' is not allowed */
    return;
  }
  snprintf(name, len, "%s%s%zu", p, tag, i);
  if (s[i].k == K_UNKNOWN)
    return;
  order(st, name, s[i].k == K_DECLINE ? "BIG" : i % 2 ? "U1" : "U2",
        10 + (int64_t)i);
  if (s[i].k == K_CANCELED)
    REQUIRE(dtx_order_cancel(st, name, &o) == 0);
  if (s[i].k == K_SUCCESS)
    REQUIRE(dtx_order_confirm(st, name, NULL, &o) == 0);
  json_decref(o);
}

/* The twin's result (alone) and the batch's agree on everything but the
 * ids: rc, state, attempt, the transfer's suffix, detail iff error. */
static void same(const char *what, size_t i, int rc, const json_t *o,
                 int arc, const json_t *ao, const char *detail) {
  CHECKF(rc == arc, "%s #%zu: rc %s (%s), alone %s", what, i,
         dtx_errname(rc), detail ? detail : "", dtx_errname(arc));
  CHECKF((rc == 0) == (detail == NULL), "%s #%zu: detail iff error", what,
         i);
  CHECKF(!o == !ao, "%s #%zu: order %s, alone %s", what, i, o ? "set" : "NULL",
         ao ? "set" : "NULL");
  if (!o || !ao)
    return;
  CHECKF(strcmp(dtx_t_str(o, "state"), dtx_t_str(ao, "state")) == 0,
         "%s #%zu: state %s, alone %s", what, i, dtx_t_str(o, "state"),
         dtx_t_str(ao, "state"));
  CHECKF(json_integer_value(json_object_get(o, "attempt")) ==
             json_integer_value(json_object_get(ao, "attempt")),
         "%s #%zu: attempt differs from alone", what, i);
  CHECKF(json_is_null(json_object_get(o, "owner")) ==
             json_is_null(json_object_get(ao, "owner")),
         "%s #%zu: owner set differs from alone", what, i);
}

static void run_and_compare(dtx_store_t *st, const spec_t *s, size_t n,
                            const char *tag, const char *what) {
  char (*b)[64] = calloc(n, sizeof *b), (*a)[64] = calloc(n, sizeof *a);
  const char **ids = calloc(n, sizeof *ids);
  dtx_order_result_t *res = calloc(n, sizeof *res);
  REQUIRE(b && a && ids && res);
  int64_t u1 = dtx_t_balance(st, "U1"), u2 = dtx_t_balance(st, "U2"),
          big = dtx_t_balance(st, "BIG");
  for (size_t i = 0; i < n; i++) {
    setup(st, s, i, "b", tag, b[i], sizeof b[i]);
    setup(st, s, i, "s", tag, a[i], sizeof a[i]);
    ids[i] = b[i];
    if (s[i].k == K_PENDING || s[i].k == K_SUCCESS) /* once per world */
      *(i % 2 ? &u1 : &u2) += 2 * (10 + (int64_t)i);
  }
  int rc = dtx_order_confirm_many(st, ids, n, NULL, res);
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *ao = NULL;
    int arc = dtx_order_confirm(st, a[i], NULL, &ao);
    any |= res[i].rc != 0;
    same(what, i, res[i].rc, res[i].order, arc, ao, res[i].detail);
    json_decref(ao);
  }
  CHECK((rc != 0) == any);
  CHECKF(dtx_t_balance(st, "U1") == u1 && dtx_t_balance(st, "U2") == u2,
         "%s: U1 %lld (want %lld), U2 %lld (want %lld)", what,
         (long long)dtx_t_balance(st, "U1"), (long long)u1,
         (long long)dtx_t_balance(st, "U2"), (long long)u2);
  CHECK(dtx_t_balance(st, "BIG") == big);
  dtx_order_results_clear(res, n);
  for (size_t i = 0; i < n; i++)
    CHECK(res[i].order == NULL && res[i].detail == NULL);
  free(res);
  free(ids);
  free(a);
  free(b);
  /* not settled (every item terminal too): a declined order stays
   * confirming, as alone */
  dtx_t_audit_ok(st, what, 0);
}

static void test_batches_mixed(void) {
  dtx_store_t *st = fresh();
  dtx_t_account(st, "U1", 0);
  dtx_t_account(st, "U2", 0);
  dtx_t_account(st, "BIG", INT64_MAX - 5); /* any credit would pass int64 */
  spec_t one[1] = {{K_PENDING, 0}};
  run_and_compare(st, one, 1, "x", "batch of 1");
  spec_t two[2] = {{K_PENDING, 0}, {K_PENDING, 0}};
  run_and_compare(st, two, 2, "y", "batch of 2");
  spec_t odd[2] = {{K_DECLINE, 0}, {K_TWICE, 0}};
  run_and_compare(st, odd, 2, "z", "a declined order twice");
  spec_t m[64];
  for (int i = 0; i < 64; i++)
    m[i] = (spec_t){K_PENDING, 0};
  m[3] = (spec_t){K_CANCELED, 0};
  m[7] = (spec_t){K_UNKNOWN, 0};
  m[8] = (spec_t){K_INVALID, 0};
  m[11] = (spec_t){K_SUCCESS, 0};
  m[12] = (spec_t){K_DECLINE, 0};
  m[20] = (spec_t){K_TWICE, 5};
  m[21] = (spec_t){K_TWICE, 3};
  m[63] = (spec_t){K_TWICE, 12};
  run_and_compare(st, m, 64, "m", "batch of 64");
  /* NULL arguments and n == 0 */
  dtx_order_result_t r[1];
  const char *ids[1] = {"x"};
  CHECK(dtx_order_confirm_many(st, NULL, 1, NULL, r) == DTX_EINVAL &&
        r[0].rc == DTX_EINVAL && r[0].detail);
  dtx_order_results_clear(r, 1);
  CHECK(dtx_order_confirm_many(NULL, ids, 1, NULL, NULL) == DTX_EINVAL);
  CHECK(dtx_order_confirm_many(st, ids, 0, NULL, r) == 0);
  dtx_store_close(st);
}

/* Every order of ids is success and its account credited exactly once:
 * its current attempt's transfer succeeded, every earlier one failed (a
 * crash can cost an attempt: recovery fails a transfer its executor
 * abandoned), and the users hold what the orders credit. */
static void check_credited_once(dtx_store_t *st, char (*ids)[32], size_t n,
                                const int64_t *amount, const char *what) {
  int64_t want = 0, got = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *o = NULL, *tx = NULL;
    int rc = dtx_order_get(st, ids[i], &o);
    CHECKF(rc == 0 && strcmp(dtx_t_str(o, "state"), "success") == 0,
           "%s: order %s is %s", what, ids[i],
           rc ? "missing" : dtx_t_str(o, "state"));
    int64_t att = json_integer_value(json_object_get(o, "attempt"));
    for (int64_t a = 1; a <= att; a++) {
      char tid[40];
      if (a == 1)
        snprintf(tid, sizeof tid, "order:%s", ids[i]);
      else
        snprintf(tid, sizeof tid, "order:%s:%lld", ids[i], (long long)a);
      const char *want_st = a == att ? "succeeded" : "failed";
      rc = dtx_transfer_get(st, tid, &tx);
      CHECKF(rc == 0 && strcmp(dtx_t_str(tx, "state"), want_st) == 0,
             "%s: %s is %s, want %s", what, tid,
             rc ? "missing" : dtx_t_str(tx, "state"), want_st);
      if (a == att)
        CHECK(strcmp(dtx_t_str(o, "transfer"), tid) == 0);
      json_decref(tx);
      tx = NULL;
    }
    json_decref(o);
    want += amount[i];
  }
  for (int k = 0; k < 4; k++) {
    char a[8];
    snprintf(a, sizeof a, "W%d", k);
    got += dtx_t_balance(st, a);
  }
  CHECKF(got == want, "%s: users hold %lld, credited %lld", what,
         (long long)got, (long long)want);
  CHECKF(dtx_t_balance(st, "settlement") == -want, "%s: settlement %lld", what,
         (long long)dtx_t_balance(st, "settlement"));
}

static size_t make_orders(dtx_store_t *st, const char *p, size_t n,
                          char (*ids)[32], int64_t *amount) {
  for (int k = 0; k < 4; k++) {
    char a[8];
    snprintf(a, sizeof a, "W%d", k);
    dtx_t_account(st, a, 0);
  }
  for (size_t i = 0; i < n; i++) {
    char a[8];
    snprintf(ids[i], sizeof ids[i], "%.8s%d", p, (int)i);
    snprintf(a, sizeof a, "W%zu", i % 4);
    amount[i] = 5 + (int64_t)i;
    order(st, ids[i], a, amount[i]);
  }
  return n;
}

static void test_two_processes(void) {
  dtx_store_t *st = fresh();
  char ids[32][32];
  int64_t amount[32];
  const char *p[32];
  make_orders(st, "c", 32, ids, amount);
  pid_t pids[2];
  for (int k = 0; k < 2; k++) {
    pids[k] = fork();
    if (pids[k] == 0) {
      dtx_store_t *cs = NULL;
      dtx_order_result_t res[32];
      if (dtx_store_open(uri, &cs) != 0)
        _exit(3);
      for (int i = 0; i < 32; i++) /* the second in reverse order */
        p[i] = ids[k ? 31 - i : i];
      dtx_exec_opts_t eo = {.deadline_ms = 20000};
      int rc = dtx_order_confirm_many(cs, p, 32, &eo, res);
      int bad = rc != 0;
      for (int i = 0; i < 32; i++)
        bad |= res[i].rc != 0 ||
               strcmp(dtx_t_str(res[i].order, "state"), "success") != 0;
      if (bad)
        fprintf(stderr, "proc %d: %s\n", k, dtx_errdetail());
      dtx_order_results_clear(res, 32);
      dtx_store_close(cs);
      _exit(bad ? 1 : 0);
    }
  }
  dtx_t_reap(pids, 2);
  check_credited_once(st, ids, 32, amount, "two processes");
  dtx_t_audit_ok(st, "two processes", DTX_AUDIT_SETTLED);
  dtx_store_close(st);
}

/* The child of dtx_t_crash_child: one confirm_many, which must crash. */
static void run_batch(dtx_store_t *cs, const void *ids, size_t n) {
  dtx_order_result_t res[16];
  dtx_order_confirm_many(cs, ids, n, NULL, res);
}

static void test_crash_mid_batch(void) {
  static const char *const specs[] = {
      "order.confirm.begin:crash:3", "order.credit:crash:4",
      "transfer.commit:crash:3",     "transfer.credit_payee:crash:2",
      "order.confirm.commit:crash:2", "order.finish:crash:5",
      "order.credit:error:2,order.finish:crash:2"};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    dtx_store_t *st = fresh();
    char ids[6][32], p[4];
    int64_t amount[6];
    const char *v[6];
    snprintf(p, sizeof p, "k%zu", s);
    make_orders(st, p, 6, ids, amount);
    for (int i = 0; i < 6; i++)
      v[i] = ids[i];
    dtx_t_crash_child(uri, specs[s], run_batch, v, 6);
    dtx_recover_opts_t ro = {.older_than_ms = 0};
    json_t *sum = NULL;
    CHECKF(dtx_recover(st, &ro, &sum) == 0, "%s: recover: %s", specs[s],
           dtx_errdetail());
    json_decref(sum);
    dtx_order_result_t res[6];
    int rc = dtx_order_confirm_many(st, v, 6, NULL, res);
    CHECKF(rc == 0, "%s: second confirm: %s", specs[s], dtx_errdetail());
    dtx_order_results_clear(res, 6);
    check_credited_once(st, ids, 6, amount, specs[s]);
    dtx_t_audit_ok(st, specs[s], DTX_AUDIT_SETTLED);
    dtx_store_close(st);
  }
}

/* A batch paused at its first commit (its credits done) while another
 * executor ("thief") takes its orders over and holds them: resumed, the
 * batch's commits are fenced off by the epoch (O4) -- they match nothing,
 * it re-reads, finds the orders held and gives up at its deadline -- and
 * the thief then finishes them, each credited once.  Without the fence the
 * paused batch would move orders the thief holds. */
static void test_paused_batch_fenced(void) {
  dtx_store_t *st = fresh();
  char ids[4][32];
  int64_t amount[4];
  const char *v[4];
  make_orders(st, "f", 4, ids, amount);
  for (int i = 0; i < 4; i++)
    v[i] = ids[i];
  pid_t pid = fork();
  if (pid == 0) {
    dtx_store_t *cs = NULL;
    dtx_order_result_t res[4];
    setenv("DOCTX_FAULT", "order.confirm.commit:pause", 1);
    dtx__fault_init(NULL);
    if (dtx_store_open(uri, &cs) != 0)
      _exit(3);
    dtx_exec_opts_t eo = {.owner = "paused", .deadline_ms = 1500};
    (void)dtx_order_confirm_many(cs, v, 4, &eo, res);
    int bad = 0;
    for (int i = 0; i < 4; i++) {
      int held = strcmp(dtx_t_str(res[i].order, "state"), "confirming") == 0 &&
                 strcmp(dtx_t_str(res[i].order, "owner"), "thief") == 0;
      if (res[i].rc != DTX_EUNAVAILABLE || !held) {
        fprintf(stderr, "paused batch #%d: %s, %s by %s\n", i,
                dtx_errname(res[i].rc), dtx_t_str(res[i].order, "state"),
                dtx_t_str(res[i].order, "owner"));
        bad = 1;
      }
    }
    _exit(bad ? 1 : 0);
  }
  REQUIRE(pid > 0);
  int status = 0, stopped = 0;
  for (int t = 0; t < 1000 && !stopped; t++) { /* bounded: 10 s */
    pid_t w = waitpid(pid, &status, WUNTRACED | WNOHANG);
    if (w == pid && WIFSTOPPED(status))
      stopped = 1;
    else if (w == pid)
      break;
    else
      usleep(10000);
  }
  CHECKF(stopped, "the batch did not pause at order.confirm.commit (%d)",
         status);
  if (!stopped) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    dtx_store_close(st);
    return;
  }
  dtx__exec_t thief;
  dtx__exec_init(&thief, st, "thief", 60000, 0);
  for (int i = 0; i < 4; i++) {
    json_t *o = NULL, *t = NULL;
    REQUIRE(dtx__kit_get(&thief, "orders", ids[i], &o) == 0);
    CHECKF(strcmp(dtx_t_str(o, "state"), "confirming") == 0 &&
               strcmp(dtx_t_str(o, "owner"), "paused") == 0,
           "%s is %s by %s before the takeover", ids[i], dtx_t_str(o, "state"),
           dtx_t_str(o, "owner"));
    CHECKF(dtx__kit_takeover(&thief, &dtx__order_kind, o, "order.takeover",
                             NULL, json_object(), NULL, &t) == 0,
           "takeover of %s: %s", ids[i], dtx_errdetail());
    json_decref(o);
    json_decref(t);
  }
  kill(pid, SIGCONT);
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
         "the resumed batch: status %d", status);
  dtx_order_result_t res[4];
  dtx_exec_opts_t eo = {.owner = "thief", .lease_ms = 60000};
  CHECKF(dtx_order_confirm_many(st, v, 4, &eo, res) == 0, "the thief: %s",
         dtx_errdetail());
  dtx_order_results_clear(res, 4);
  check_credited_once(st, ids, 4, amount, "paused batch");
  dtx_t_audit_ok(st, "paused batch", DTX_AUDIT_SETTLED);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = dtx_t_suite_uri(argc, argv);
  quick = getenv("DTX_QUICK") != NULL;
  (void)quick;
  TEST_RUN(test_batches_mixed);
  TEST_RUN(test_two_processes);
  TEST_RUN(test_crash_mid_batch);
  TEST_RUN(test_paused_batch_fenced);
  return TEST_DONE();
}
