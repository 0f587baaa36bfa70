/* transfer_batch.c -- dtx_transfer_execute_many (transfer/many.c): each
 * transfer of a batch ends exactly as dtx_transfer_execute would end it
 * alone, on every backend.
 *
 *  - batches of 1, 2 and 64 with mixed outcomes: declines, a missing
 *    account, an invalid request, an id twice in one batch, an id that
 *    exists with other parameters (CONFLICT) and with the same ones
 *    (returned, applied once); balances exact, audit clean after each;
 *  - a hot payer: 32 transfers of 100 from a payer holding 2,000 in one
 *    batch: exactly 20 succeed, the 12 others fail for funds;
 *  - a forked child crashed mid-batch at a pair point and at
 *    transfer.batch.split, then dtx_recover: every transfer terminal,
 *    balances exact by the transfers' states, audit clean;
 *  - 4 processes running batches concurrently on shared accounts:
 *    conservation, every transfer terminal, audit clean.
 *
 * usage: transfer_batch STORE-URI   (collections emptied first; a SQLite
 * file runs with sync=off; DTX_QUICK=1 keeps the loops short) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txnlib.h"

static const char *uri;
static int quick;

/* One expectation per request: rc, and for rc 0 the final state. */
typedef struct want {
  int rc;
  const char *state;
} want_t;

static void run_and_check(dtx_store_t *st, const dtx_transfer_req_t *reqs,
                          const want_t *w, size_t n, const char *what) {
  dtx_transfer_result_t *res = calloc(n, sizeof *res);
  REQUIRE(res);
  int rc = dtx_transfer_execute_many(st, reqs, n, NULL, res);
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    any |= res[i].rc != 0;
    CHECKF(res[i].rc == w[i].rc, "%s #%zu: rc %s (%s), want %s", what, i,
           dtx_errname(res[i].rc), res[i].detail ? res[i].detail : "",
           dtx_errname(w[i].rc));
    if (w[i].rc == 0)
      CHECKF(strcmp(dtx_t_str(res[i].tx, "state"), w[i].state) == 0,
             "%s #%zu: state %s, want %s", what, i,
             dtx_t_str(res[i].tx, "state"), w[i].state);
    CHECKF((res[i].rc == 0) == (res[i].detail == NULL),
           "%s #%zu: detail iff error", what, i);
  }
  CHECK((rc != 0) == any);
  dtx_transfer_results_clear(res, n);
  free(res);
  dtx_t_audit_ok(st, what, DTX_AUDIT_SETTLED);
}

static void test_batches_mixed(void) {
  dtx_store_t *st = dtx_t_fresh(uri);
  dtx_t_account(st, "A", 100000);
  dtx_t_account(st, "B", 100000);
  dtx_t_account(st, "C", 50);
  json_t *tx = NULL;
  dtx_transfer_req_t pre = {.id = "pre1", .from = "A", .to = "B", .amount = 10};
  REQUIRE(dtx_transfer_execute(st, &pre, NULL, &tx) == 0);
  json_decref(tx);

  /* A batch of one. */
  dtx_transfer_req_t one[1] = {{.id = "b1", .from = "A", .to = "B",
                                .amount = 100}};
  want_t w1[1] = {{0, "succeeded"}};
  run_and_check(st, one, w1, 1, "batch of 1");
  /* Two: one goes, one is declined. */
  dtx_transfer_req_t two[2] = {{.from = "A", .to = "B", .amount = 100},
                               {.from = "C", .to = "A", .amount = 100}};
  want_t w2[2] = {{0, "succeeded"}, {0, "failed"}};
  run_and_check(st, two, w2, 2, "batch of 2");
  CHECK(dtx_t_balance(st, "A") == 100000 - 10 - 100 - 100);
  CHECK(dtx_t_balance(st, "C") == 50);

  /* 64, mixed. */
  dtx_transfer_req_t r[64];
  want_t w[64];
  char ids[64][32];
  int64_t a = dtx_t_balance(st, "A"), b = dtx_t_balance(st, "B"),
          c = dtx_t_balance(st, "C");
  for (int i = 0; i < 64; i++) {
    snprintf(ids[i], sizeof ids[i], "m%d", i);
    r[i] = (dtx_transfer_req_t){.id = ids[i], .from = i % 2 ? "A" : "B",
                                .to = i % 2 ? "B" : "A", .amount = 1 + i};
    w[i] = (want_t){0, "succeeded"};
    if (i % 2) {
      a -= 1 + i;
      b += 1 + i;
    } else {
      b -= 1 + i;
      a += 1 + i;
    }
  }
  /* undo the plain effect of the special ones, then set them */
  int special[] = {3, 10, 17, 24, 31, 40, 41, 50};
  for (size_t k = 0; k < sizeof special / sizeof *special; k++) {
    int i = special[k];
    if (i % 2) {
      a += 1 + i;
      b -= 1 + i;
    } else {
      b += 1 + i;
      a -= 1 + i;
    }
  }
  r[3] = (dtx_transfer_req_t){.id = "m3", .from = "C", .to = "B", .amount = 51};
  w[3] = (want_t){0, "failed"}; /* declined: C holds 50 */
  r[10] = (dtx_transfer_req_t){.id = "m10", .from = "A", .to = "Z", .amount = 5};
  w[10] = (want_t){DTX_ENOACCOUNT, NULL};
  r[17] = (dtx_transfer_req_t){.id = "m17", .from = "A", .to = "A", .amount = 5};
  w[17] = (want_t){DTX_EINVAL, NULL};
  r[24] = (dtx_transfer_req_t){.id = "pre1", .from = "A", .to = "B", .amount = 11};
  w[24] = (want_t){DTX_ECONFLICT, NULL};
  r[31] = (dtx_transfer_req_t){.id = "pre1", .from = "A", .to = "B", .amount = 10};
  w[31] = (want_t){0, "succeeded"}; /* the same again: returned, not re-run */
  r[40] = (dtx_transfer_req_t){.id = "dd", .from = "C", .to = "A", .amount = 7};
  r[41] = (dtx_transfer_req_t){.id = "dd", .from = "C", .to = "A", .amount = 7};
  w[40] = w[41] = (want_t){0, "succeeded"}; /* twice in one batch: once */
  c -= 7;
  a += 7;
  r[50] = (dtx_transfer_req_t){.id = "dd", .from = "C", .to = "B", .amount = 7};
  w[50] = (want_t){DTX_ECONFLICT, NULL}; /* the twin with other parameters */
  run_and_check(st, r, w, 64, "batch of 64");
  CHECKF(dtx_t_balance(st, "A") == a, "A %lld, want %lld",
         (long long)dtx_t_balance(st, "A"), (long long)a);
  CHECKF(dtx_t_balance(st, "B") == b, "B %lld, want %lld",
         (long long)dtx_t_balance(st, "B"), (long long)b);
  CHECK(dtx_t_balance(st, "C") == c);
  /* Call-level errors: nothing runs, every result says so. */
  dtx_transfer_result_t res[2];
  CHECK(dtx_transfer_execute_many(NULL, two, 2, NULL, res) == DTX_EINVAL);
  CHECK(res[0].rc == DTX_EINVAL && res[1].rc == DTX_EINVAL);
  dtx_transfer_results_clear(res, 2);
  CHECK(dtx_transfer_execute_many(st, two, 0, NULL, res) == 0);
  dtx_store_close(st);
}

static void test_hot_payer(void) {
  dtx_store_t *st = dtx_t_fresh(uri);
  dtx_t_account(st, "H", 2000);
  dtx_transfer_req_t r[32];
  char to[32][16];
  for (int i = 0; i < 32; i++) {
    snprintf(to[i], sizeof to[i], "R%d", i % 4);
    r[i] = (dtx_transfer_req_t){.from = "H", .to = to[i], .amount = 100};
  }
  for (int i = 0; i < 4; i++)
    dtx_t_account(st, to[i], 0);
  dtx_transfer_result_t res[32];
  dtx_transfer_execute_many(st, r, 32, NULL, res);
  int ok = 0, funds = 0;
  for (int i = 0; i < 32; i++) {
    const char *s = dtx_t_str(res[i].tx, "state");
    const char *why = json_string_value(json_object_get(res[i].tx, "reason"));
    CHECKF(res[i].rc == 0, "#%d: %s", i, dtx_errname(res[i].rc));
    ok += strcmp(s, "succeeded") == 0;
    funds += strcmp(s, "failed") == 0 && why &&
             strcmp(why, "insufficient funds") == 0;
  }
  CHECKF(ok == 20 && funds == 12, "%d succeeded, %d declined", ok, funds);
  dtx_transfer_results_clear(res, 32);
  CHECK(dtx_t_balance(st, "H") == 0);
  CHECK(dtx_t_balance(st, "R0") + dtx_t_balance(st, "R1") +
            dtx_t_balance(st, "R2") + dtx_t_balance(st, "R3") ==
        2000);
  dtx_t_audit_ok(st, "hot payer", DTX_AUDIT_SETTLED);
  dtx_store_close(st);
}

/* The child of dtx_t_crash_child: one batch, which must crash. */
static void run_batch(dtx_store_t *cs, const void *reqs, size_t n) {
  dtx_transfer_result_t res[16];
  dtx_transfer_execute_many(cs, reqs, n, NULL, res);
}

/* After recovery every transfer of the batch is terminal and the balances
 * are exactly the opening ones moved by the succeeded transfers. */
static void check_recovered(dtx_store_t *st, const dtx_transfer_req_t *reqs,
                            size_t n, const char *const *accts,
                            const int64_t *open, size_t na, const char *what) {
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECKF(dtx_recover(st, &ro, &sum) == 0, "%s: recover: %s", what,
         dtx_errdetail());
  json_decref(sum);
  int64_t want[8];
  for (size_t k = 0; k < na; k++)
    want[k] = open[k];
  for (size_t i = 0; i < n; i++) {
    json_t *tx = NULL;
    int rc = dtx_transfer_get(st, reqs[i].id, &tx);
    const char *s = rc == 0 ? dtx_t_str(tx, "state") : "missing";
    CHECKF(rc == DTX_ENOTFOUND || strcmp(s, "succeeded") == 0 ||
               strcmp(s, "failed") == 0,
           "%s: %s is %s", what, reqs[i].id, s);
    if (strcmp(s, "succeeded") == 0)
      for (size_t k = 0; k < na; k++) {
        if (strcmp(accts[k], reqs[i].from) == 0)
          want[k] -= reqs[i].amount;
        if (strcmp(accts[k], reqs[i].to) == 0)
          want[k] += reqs[i].amount;
      }
    json_decref(tx);
  }
  for (size_t k = 0; k < na; k++)
    CHECKF(dtx_t_balance(st, accts[k]) == want[k],
           "%s: %s holds %lld, want %lld", what, accts[k],
           (long long)dtx_t_balance(st, accts[k]), (long long)want[k]);
  dtx_t_audit_ok(st, what, DTX_AUDIT_SETTLED);
}

static void test_crash_mid_batch(void) {
  static const char *const specs[] = {
      "transfer.debit_mark.done:crash:3", "transfer.batch.split:crash",
      "transfer.commit:crash:2", "transfer.clear_credit.done:crash:2",
      "transfer.credit_payee:error:1,transfer.finish:crash:3"};
  const char *accts[4] = {"A", "B", "C", "D"};
  int64_t open[4] = {1000, 1000, 1000, 30};
  for (size_t s = 0; s < sizeof specs / sizeof *specs; s++) {
    dtx_store_t *st = dtx_t_fresh(uri);
    for (int k = 0; k < 4; k++)
      dtx_t_account(st, accts[k], open[k]);
    char ids[6][16];
    dtx_transfer_req_t r[6] = {
        {.from = "A", .to = "B", .amount = 100},
        {.from = "B", .to = "C", .amount = 200},
        {.from = "D", .to = "A", .amount = 500}, /* declined */
        {.from = "C", .to = "A", .amount = 300},
        {.from = "A", .to = "D", .amount = 50},
        {.from = "A", .to = "C", .amount = 10}};
    for (int i = 0; i < 6; i++) {
      snprintf(ids[i], sizeof ids[i], "c%zu_%d", s, i);
      r[i].id = ids[i];
    }
    dtx_t_crash_child(uri, specs[s], run_batch, r, 6);
    check_recovered(st, r, 6, accts, open, 4, specs[s]);
    dtx_store_close(st);
  }
}

/* 4 processes, each running batches of 16 random transfers among 8 shared
 * accounts (some declined for funds). */
static void test_concurrent_batches(void) {
  dtx_store_t *st = dtx_t_fresh(uri);
  const int nacct = 8, procs = 4, batches = quick ? 5 : 25;
  char names[8][8];
  for (int k = 0; k < nacct; k++) {
    snprintf(names[k], sizeof names[k], "S%d", k);
    dtx_t_account(st, names[k], 500);
  }
  pid_t pids[4];
  for (int p = 0; p < procs; p++) {
    pids[p] = fork();
    if (pids[p] == 0) {
      dtx_store_t *cs = NULL;
      unsigned seed = 1234u + (unsigned)p;
      if (dtx_store_open(uri, &cs) != 0)
        _exit(3);
      int bad = 0;
      for (int b = 0; b < batches; b++) {
        dtx_transfer_req_t r[16];
        dtx_transfer_result_t res[16];
        for (int i = 0; i < 16; i++) {
          int f = rand_r(&seed) % nacct, t = (f + 1 + rand_r(&seed) % 7) % nacct;
          r[i] = (dtx_transfer_req_t){.from = names[f], .to = names[t],
                                      .amount = 1 + rand_r(&seed) % 120};
        }
        dtx_transfer_execute_many(cs, r, 16, NULL, res);
        for (int i = 0; i < 16; i++) {
          const char *s = dtx_t_str(res[i].tx, "state");
          if (res[i].rc || (strcmp(s, "succeeded") && strcmp(s, "failed"))) {
            fprintf(stderr, "proc %d batch %d #%d: %s %s (%s)\n", p, b, i,
                    dtx_errname(res[i].rc), s,
                    res[i].detail ? res[i].detail : "");
            bad = 1;
          }
        }
        dtx_transfer_results_clear(res, 16);
      }
      dtx_store_close(cs);
      _exit(bad ? 1 : 0);
    }
  }
  dtx_t_reap(pids, procs);
  int64_t total = 0;
  for (int k = 0; k < nacct; k++) {
    total += dtx_t_balance(st, names[k]);
    CHECK(dtx_t_balance(st, names[k]) >= 0);
  }
  CHECKF(total == 500 * nacct, "total %lld", (long long)total);
  json_t *open = NULL;
  REQUIRE(dtx_transfer_list(st, "succeeded", NULL, &open) == 0);
  json_t *failed = NULL;
  REQUIRE(dtx_transfer_list(st, "failed", NULL, &failed) == 0);
  CHECKF((int)(json_array_size(open) + json_array_size(failed)) ==
             procs * batches * 16,
         "%zu succeeded + %zu failed", json_array_size(open),
         json_array_size(failed));
  printf("%d batches of 16 in %d processes: %zu succeeded, %zu declined\n",
         procs * batches, procs, json_array_size(open),
         json_array_size(failed));
  json_decref(open);
  json_decref(failed);
  dtx_t_audit_ok(st, "concurrent batches", DTX_AUDIT_SETTLED);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = dtx_t_suite_uri(argc, argv);
  quick = getenv("DTX_QUICK") != NULL;
  TEST_RUN(test_batches_mixed);
  TEST_RUN(test_hot_payer);
  TEST_RUN(test_crash_mid_batch);
  TEST_RUN(test_concurrent_batches);
  return TEST_DONE();
}
