/* transfer_declines.c -- the cost of a transfer stays flat however many
 * were declined before it (issue 8, defect 7): a decline (insufficient
 * funds) leaves no tombstone, so after 10,000 of them the payer's and the
 * payee's documents are byte for byte the size they were after the first,
 * and the next successful transfer leaves them as a transfer did before.
 * Sizes are counted (bytes of the stored documents), never timed.
 *
 * usage: transfer_declines STORE-URI [N]   (N declines, default 10,000,
 * 1,000 under DTX_QUICK;
 * the collections are emptied first; a SQLite file runs with sync=off) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"

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

static void test_declines_flat(void) {
  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  dtx_t_drop_transfers(st);
  dtx_account_opts_t o = {.balance = 100};
  REQUIRE(dtx_account_create(st, "A", &o, NULL) == 0);
  REQUIRE(dtx_account_create(st, "B", &o, NULL) == 0);

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

int main(int argc, char **argv) {
  static char buf[4096];
  uri = argc > 1 ? argv[1] : "sqlite::memory:";
  /* Durability is not what this counts: a SQLite file without fsyncs
   * keeps the 10,000 transfers within seconds. */
  if (strncmp(uri, "sqlite:", 7) == 0 && !strchr(uri, '?') &&
      strcmp(uri, "sqlite::memory:") != 0) {
    snprintf(buf, sizeof buf, "%s?sync=off", uri);
    uri = buf;
  }
  /* The sanitizer stage (DTX_QUICK) checks memory, not the count: 1,000. */
  n = argc > 2 ? strtol(argv[2], NULL, 10) : getenv("DTX_QUICK") ? 1000 : 10000;
  TEST_RUN(test_declines_flat);
  return TEST_DONE();
}
