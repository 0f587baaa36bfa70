/* bank.c -- the bank test of multi-document transactions (part of
 * txn_multi; tests/txn/multi.c runs it): 8 accounts, 3 writer threads
 * moving random amounts among 2-4 accounts, 1 reader summing all
 * balances in read-only snapshot transactions: every sum is the total;
 * the audit is clean (docs/transactions.md, "How it is proven: the
 * anomaly workload and chaos"). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "multi_test.h"
#include "testlib.h"

/* ---- the bank ------------------------------------------------------------- */

#define ACCOUNTS 8
#define OPENING 1000

static atomic_int stop_bank, bank_moves, bank_sums, bank_bad;

static int move_money(dtx_txn_t *t, void *arg) {
  unsigned *seed = arg;
  int n = 2 + (int)(rand_r(seed) % 3), idx[4];
  for (int i = 0; i < n; i++) {
    again:
    idx[i] = (int)(rand_r(seed) % ACCOUNTS);
    for (int j = 0; j < i; j++)
      if (idx[j] == idx[i])
        goto again;
  }
  /* Each of the others pays the first a random amount it has. */
  int rc = 0;
  int64_t got = 0;
  for (int i = 1; rc == 0 && i < n; i++) {
    json_t *f = json_pack("{s:s#}", "_id", (char[]){(char)('a' + idx[i]), 0}, 1),
           *d = NULL;
    rc = dtx_txn_find_one(t, "mt_acct", f, &d);
    int64_t bal = num(d, "bal"), amt = bal > 0 ? rand_r(seed) % (bal + 1) : 0;
    json_t *u = json_pack("{s:{s:I}}", "$inc", "bal", (json_int_t)-amt);
    if (rc == 0 && d)
      rc = dtx_txn_update(t, "mt_acct", f, u, 0, NULL);
    got += amt;
    json_decref(u);
    json_decref(d);
    json_decref(f);
  }
  json_t *f = json_pack("{s:s#}", "_id", (char[]){(char)('a' + idx[0]), 0}, 1),
         *u = json_pack("{s:{s:I}}", "$inc", "bal", (json_int_t)got);
  if (rc == 0)
    rc = dtx_txn_update(t, "mt_acct", f, u, 0, NULL);
  json_decref(f);
  json_decref(u);
  return rc;
}

static void *bank_writer(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
  dtx_store_t *st = dtx_t_open(uri);
  dtx_txn_opts_t o = {.deadline_ms = 20000};
  while (!stop_bank) {
    int rc = dtx_txn_run(st, &o, move_money, &seed);
    if (rc) {
      fprintf(stderr, "bank writer: %s: %s\n", dtx_strerror(rc),
              dtx_errdetail());
      bank_bad++;
      break;
    }
    bank_moves++;
  }
  dtx_store_close(st);
  return NULL;
}

static int sum_all(dtx_txn_t *t, void *arg) {
  int64_t *sum = arg;
  json_t *arr = NULL;
  int rc = dtx_txn_find(t, "mt_acct", NULL, 100, &arr);
  *sum = 0;
  size_t i;
  json_t *d;
  json_array_foreach(arr, i, d) *sum += num(d, "bal");
  if (rc == 0 && json_array_size(arr) != ACCOUNTS)
    *sum = -1;
  json_decref(arr);
  return rc;
}

static void *bank_reader(void *arg) {
  (void)arg;
  dtx_store_t *st = dtx_t_open(uri);
  dtx_txn_opts_t o = {.deadline_ms = 20000};
  while (!stop_bank) {
    int64_t sum = 0;
    int rc = dtx_txn_run(st, &o, sum_all, &sum);
    if (rc || sum != (int64_t)ACCOUNTS * OPENING) {
      fprintf(stderr, "bank reader: rc %d (%s) sum %lld\n", rc,
              rc ? dtx_errdetail() : "", (long long)sum);
      bank_bad++;
      break;
    }
    bank_sums++;
  }
  dtx_store_close(st);
  return NULL;
}

void test_bank(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  for (int i = 0; i < ACCOUNTS; i++) {
    json_t *d = json_pack("{s:s#,s:i}", "_id", (char[]){(char)('a' + i), 0},
                          1, "bal", OPENING);
    CHECK_RC(dtx_store_insert(st, "mt_acct", d, NULL), 0);
    json_decref(d);
  }
  pthread_t th[4];
  for (int i = 0; i < 3; i++)
    REQUIRE(pthread_create(&th[i], NULL, bank_writer,
                           (void *)(uintptr_t)(i + 1)) == 0);
  REQUIRE(pthread_create(&th[3], NULL, bank_reader, NULL) == 0);
  const char *secs = getenv("DTX_TXN_BANK_MS");
  usleep((useconds_t)(secs ? atoi(secs) : 1500) * 1000);
  stop_bank = 1;
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  printf("bank: %d transfers, %d snapshot sums\n", bank_moves, bank_sums);
  CHECK(bank_bad == 0);
  CHECK(bank_moves > 0 && bank_sums > 0);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  if (!json_is_true(json_object_get(rep, "ok")))
    CHECKF(0, "audit: %s", JS(rep));
  json_decref(rep);
  /* The final balances sum to the total, read plainly. */
  json_t *arr = NULL;
  CHECK_RC(dtx_store_find(st, "mt_acct", NULL, NULL, &arr), 0);
  int64_t sum = 0;
  size_t i;
  json_t *d;
  json_array_foreach(arr, i, d) sum += num(d, "bal");
  CHECK(sum == (int64_t)ACCOUNTS * OPENING);
  json_decref(arr);
  dtx_store_close(st);
}

