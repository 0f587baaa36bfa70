/* transfer_declines.c -- the cost of a transfer stays flat however many
 * were declined before it (docs/transfers.md): a decline (insufficient
 * funds) leaves no tombstone, so after 2,000 of them the payer's and the
 * payee's documents are byte for byte the size they were after the first,
 * and the next successful transfer leaves them as a transfer did before.
 * Sizes are counted (bytes of the stored documents), never timed.
 *
 * And the state the paired prepare step creates (transfer.c, I2): the
 * payer debit and the payee mark go to the store together, so the payee
 * may be marked while the payer's debit is refused.  The decline then
 * leaves both accounts exactly as they were; a crash with the pair's
 * results back (transfer.debit_mark.done, in a forked child) leaves the
 * payee marked and the payer untouched, which the audit counts as no
 * money in flight, and recovery's rollback restores both.  Likewise the
 * payee credited before the payer's clear (the finish pair).
 *
 * usage: transfer_declines STORE-URI [N]   (N declines, default 2,000 --
 * one tombstone a decline would show after two; more only costs CI time --
 * 1,000 under DTX_QUICK;
 * the collections are emptied first; a SQLite file runs with sync=off) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txnlib.h"

static const char *uri;
static long n;

static size_t doc_bytes(dtx_store_t *st, const char *id) {
  json_t *a = NULL;
  if (dtx_account_get(st, id, &a) != 0) {
    fprintf(stderr, "account %s: %s\n", id, dtx_errdetail());
    exit(1);
  }
  json_object_del(a, "balance"); /* digits may vary; the rest may not */
  json_object_del(a, "ceiling");
  char *s = json_dumps(a, JSON_COMPACT);
  size_t n = s ? strlen(s) : 0;
  free(s);
  json_decref(a);
  return n;
}

static void transfer(dtx_store_t *st, const char *from, const char *to,
                     int64_t amount, const char *want_state) {
  dtx_transfer_req_t req = {.from = from, .to = to, .amount = amount};
  json_t *tx = NULL;
  int rc = dtx_transfer_execute(st, &req, NULL, &tx);
  const char *s = json_string_value(json_object_get(tx, "state"));
  if (rc || !s || strcmp(s, want_state) != 0) {
    fprintf(stderr, "transfer %s -> %s %lld: rc %s (%s), state %s\n", from, to,
            (long long)amount, dtx_errname(rc), dtx_errdetail(),
            s ? s : "?");
    exit(1);
  }
  json_decref(tx);
}

/* A store emptied of transfers and accounts, with accounts a and b
 * holding abal and bbal. */
static dtx_store_t *two_accounts(const char *a, int64_t abal, const char *b,
                                 int64_t bbal) {
  dtx_store_t *st = dtx_t_fresh(uri);
  dtx_t_account(st, a, abal);
  dtx_t_account(st, b, bbal);
  return st;
}

static void test_declines_flat(void) {
  dtx_store_t *st = two_accounts("A", 100, "B", 100);

  transfer(st, "A", "B", 1000, "failed");
  size_t a1 = doc_bytes(st, "A"), b1 = doc_bytes(st, "B");
  for (long i = 1; i < n; i++)
    transfer(st, "A", "B", 1000 + i % 7, "failed");
  size_t an = doc_bytes(st, "A"), bn = doc_bytes(st, "B");
  CHECK(an == a1);
  CHECK(bn == b1);
  if (an != a1 || bn != b1)
    fprintf(stderr, "after %ld declines: A %zu bytes (was %zu), B %zu (was "
            "%zu)\n", n, an, a1, bn, b1);
  /* A transfer that goes through still works, and leaves nothing behind. */
  transfer(st, "A", "B", 10, "succeeded");
  CHECK(doc_bytes(st, "A") == a1);
  json_t *a = NULL;
  REQUIRE(dtx_account_get(st, "A", &a) == 0);
  CHECK(json_array_size(json_object_get(a, "voids")) == 0);
  CHECK(json_array_size(json_object_get(a, "pending")) == 0);
  CHECK(json_integer_value(json_object_get(a, "balance")) == 90);
  json_decref(a);
  json_t *rep = NULL;
  REQUIRE(dtx_audit(st, DTX_AUDIT_SETTLED, &rep) == 0);
  CHECK(json_is_true(json_object_get(rep, "ok")));
  json_decref(rep);
  printf("%ld declines: payer document %zu bytes before and after\n", n, a1);
  dtx_store_close(st);
}

/* 1 when doc's key is the string want. */
static int str_is(const json_t *doc, const char *key, const char *want) {
  const char *v = json_string_value(json_object_get(doc, key));
  return v && strcmp(v, want) == 0;
}

static json_t *account(dtx_store_t *st, const char *id) {
  json_t *a = NULL;
  if (dtx_account_get(st, id, &a) != 0) {
    fprintf(stderr, "account %s: %s\n", id, dtx_errdetail());
    exit(1);
  }
  return a;
}

/* What a rollback must restore: the balance, the ceiling, the markers. */
static int same_money(const json_t *x, const json_t *y) {
  const char *keys[] = {"balance", "ceiling", "pending", "min_balance"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (!json_equal(json_object_get(x, keys[i]), json_object_get(y, keys[i])))
      return 0;
  return 1;
}

/* The child of dtx_t_crash_child: transfer req, which must crash. */
static void run_transfer(dtx_store_t *cs, const void *req, size_t n) {
  json_t *tx = NULL;
  (void)n; /* one */
  dtx_transfer_execute(cs, req, NULL, &tx);
}

/* The audit while transfer id is left mid-way: clean, and no money in
 * flight (the pair's states hold none); then recovery takes it to want. */
static void audit_recover(dtx_store_t *st, const char *id, const char *want) {
  json_t *rep = NULL, *tx = NULL;
  CHECK_RC(dtx_audit(st, 0, &rep), 0);
  CHECK(json_integer_value(json_object_get(rep, "in_flight")) == 0);
  if (!json_is_true(json_object_get(rep, "ok"))) {
    char *d = json_dumps(rep, JSON_COMPACT);
    fprintf(stderr, "audit: %s\n", d ? d : "?");
    free(d);
  }
  json_decref(rep);
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  CHECK_RC(dtx_recover(st, &ro, NULL), 0);
  REQUIRE(dtx_transfer_get(st, id, &tx) == 0);
  CHECK(str_is(tx, "state", want));
  json_decref(tx);
}

static void test_payee_marked_payer_refused(void) {
  dtx_store_t *st = two_accounts("P", 100, "Q", 50);
  /* A first transfer gives both their ceilings (older accounts get it at
   * their first step): from here on a document compares exactly. */
  transfer(st, "P", "Q", 1, "succeeded");
  json_t *p0 = account(st, "P"), *q0 = account(st, "Q");

  /* The executor's own decline: both documents exactly as before. */
  dtx_transfer_req_t req = {.from = "P", .to = "Q", .amount = 1000,
                            .id = "pm1"};
  json_t *tx = NULL, *rep = NULL;
  CHECK_RC(dtx_transfer_execute(st, &req, NULL, &tx), 0);
  CHECK(str_is(tx, "state", "failed"));
  json_decref(tx);
  json_t *p1 = account(st, "P"), *q1 = account(st, "Q");
  CHECK(json_equal(p1, p0));
  CHECK(json_equal(q1, q0));
  json_decref(p1);
  json_decref(q1);

  /* The pair's results back, then a crash: Q marked, P untouched. */
  req.id = "pm2";
  dtx_t_crash_child(uri, "transfer.debit_mark.done:crash", run_transfer, &req,
                    1);
  p1 = account(st, "P");
  q1 = account(st, "Q");
  CHECK(json_equal(p1, p0)); /* the debit was refused */
  const json_t *m = NULL;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(q1, "pending"), i, e) {
    if (str_is(e, "tx", "pm2"))
      m = e;
  }
  CHECK(m != NULL); /* the payee was marked */
  CHECK(json_integer_value(json_object_get(q1, "ceiling")) ==
        json_integer_value(json_object_get(q0, "ceiling")) + 1000);
  CHECK(json_equal(json_object_get(q1, "balance"),
                   json_object_get(q0, "balance")));
  json_decref(p1);
  json_decref(q1);
  /* The audit counts no money for the mark: clean, nothing in flight.
   * Recovery rolls it back: balances, ceilings and markers as before (a
   * takeover leaves tombstones, I8: not compared). */
  audit_recover(st, "pm2", "failed");
  p1 = account(st, "P");
  q1 = account(st, "Q");
  CHECK(same_money(p1, p0));
  CHECK(same_money(q1, q0));
  json_decref(p1);
  json_decref(q1);
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  json_decref(rep);
  json_decref(p0);
  json_decref(q0);
  dtx_store_close(st);
}

/* The other pair: the payee credited while the payer's clear failed (an
 * error, then a crash at its retry).  The money is in flight nowhere: the
 * audit is clean with nothing in flight, and recovery finishes it. */
static void test_payee_credited_payer_not_cleared(void) {
  dtx_store_t *st = two_accounts("P", 100, "Q", 100);
  dtx_transfer_req_t req = {.from = "P", .to = "Q", .amount = 30, .id = "cc1"};
  dtx_t_crash_child(uri,
                    "transfer.clear_payer:error:1,transfer.clear_payer:crash:2",
                    run_transfer, &req, 1);
  json_t *p = account(st, "P"), *q = account(st, "Q"), *rep = NULL;
  CHECK(json_integer_value(json_object_get(p, "balance")) == 70);
  CHECK(json_array_size(json_object_get(p, "pending")) == 1); /* not cleared */
  CHECK(json_integer_value(json_object_get(q, "balance")) == 130);
  CHECK(json_array_size(json_object_get(q, "pending")) == 0); /* credited */
  json_decref(p);
  json_decref(q);
  audit_recover(st, "cc1", "succeeded");
  p = account(st, "P");
  q = account(st, "Q");
  CHECK(json_integer_value(json_object_get(p, "balance")) == 70);
  CHECK(json_integer_value(json_object_get(p, "ceiling")) == 70);
  CHECK(json_integer_value(json_object_get(q, "balance")) == 130);
  CHECK(json_integer_value(json_object_get(q, "ceiling")) == 130);
  json_decref(p);
  json_decref(q);
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  json_decref(rep);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  /* Durability is not what this counts: a SQLite file without fsyncs
   * keeps the 2,000 transfers within a second. */
  uri = dtx_t_suite_uri(argc, argv);
  /* The sanitizer stage (DTX_QUICK) checks memory, not the count: 1,000. */
  n = argc > 2 ? strtol(argv[2], NULL, 10) : getenv("DTX_QUICK") ? 1000 : 2000;
  TEST_RUN(test_declines_flat);
  TEST_RUN(test_payee_marked_payer_refused);
  TEST_RUN(test_payee_credited_payer_not_cleared);
  return TEST_DONE();
}
