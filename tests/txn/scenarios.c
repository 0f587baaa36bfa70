/* scenarios.c -- LeanCloud's scenarios through the public C API on a real
 * store (docs/scenarios.md): dtx_batch_update's result struct over a run
 * and a rerun, its refusals (error codes, nothing written), a paging run
 * past one page; dtx_interest_run's summary, its refusals (nothing
 * recorded, not even the settlement account), leap days, a rerun that
 * credits nothing, and a settlement account with a limit; account ids too
 * long to fit interest:DAY:ID, credited under their SHA-256 (checked
 * against FIPS 180-4's examples).
 *
 * usage: txn_scenarios STORE-URI   (its collections are dropped first) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "util/sha256.h"

static const char *uri;

static int64_t count(dtx_store_t *st, const char *coll, const char *filter) {
  int64_t n = -1;
  json_t *f = J(filter);
  CHECK_RC(dtx_store_count(st, coll, f, &n), 0);
  json_decref(f);
  return n;
}

static int batch(dtx_store_t *st, const char *coll, const char *filter,
                 const char *update, const char *id, dtx_batch_result_t *r) {
  json_t *f = J(filter), *u = J(update);
  int rc = dtx_batch_update(st, coll, f, u, id, NULL, r);
  json_decref(f);
  json_decref(u);
  return rc;
}

static void test_batch(void) {
  dtx_store_t *st = dtx_t_open(uri);
  dtx_batch_result_t r;
  dtx_store_drop_collection_ex(st, "sc_items", &(dtx_drop_opts_t){1});
  /* 250 documents: past one page of 200. */
  json_t *docs = json_array();
  for (int i = 0; i < 250; i++)
    json_array_append_new(docs, json_pack("{s:i,s:i,s:i}", "_id", i, "n", 0,
                                          "odd", i % 2));
  CHECK_RC(dtx_store_insert_many(st, "sc_items", docs, NULL, NULL), 0);
  json_decref(docs);

  static const struct {
    const char *filter, *update, *id;
    int rc;
  } bad[] = {
      {"{}", "{\"$inc\":{\"n\":1}}", "", DTX_EINVAL},
      {"{}", "{\"$inc\":{\"n\":1}}", "a.b", DTX_EINVAL},
      {"{}", "{\"$set\":{\"_batches\":{}}}", "B", DTX_EINVAL},
      {"{}", "{\"$rename\":{\"n\":\"_batches.B\"}}", "B", DTX_EINVAL},
      {"{}", "{\"n\":1}", "B", DTX_EINVAL},
      {"{}", "{}", "B", DTX_EINVAL},
      {"{}", "{\"$inc\":{\"n\":\"x\"}}", "B", DTX_EBADUPDATE},
      {"{\"n\":{\"$bad\":1}}", "{\"$inc\":{\"n\":1}}", "B", DTX_EBADQUERY},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECKF(batch(st, "sc_items", bad[i].filter, bad[i].update, bad[i].id,
                 &r) == bad[i].rc,
           "bad batch %zu: %s", i, dtx_errdetail());
  CHECK_RC(batch(st, "accounts", "{}", "{\"$inc\":{\"n\":1}}", "B", &r),
           DTX_EINVAL);
  CHECK(count(st, "sc_items", "{\"n\":0}") == 250);

  CHECK_RC(batch(st, "sc_items", "{\"odd\":1}", "{\"$inc\":{\"n\":1}}", "B",
                 &r), 0);
  CHECK(r.matched == 125 && r.modified == 125 && r.already == 0);
  CHECK_RC(batch(st, "sc_items", "{\"odd\":1}", "{\"$inc\":{\"n\":1}}", "B",
                 &r), 0);
  CHECK(r.matched == 125 && r.modified == 0 && r.already == 125);
  CHECK(count(st, "sc_items", "{\"odd\":1,\"n\":1}") == 125);
  CHECK(count(st, "sc_items", "{\"odd\":0,\"n\":0}") == 125);
  /* NULL filter: every document; a NULL result is allowed. */
  json_t *u = J("{\"$inc\":{\"n\":1}}");
  CHECK_RC(dtx_batch_update(st, "sc_items", NULL, u, "all", NULL, NULL), 0);
  json_decref(u);
  CHECK(count(st, "sc_items", "{\"_batches.all\":{\"$exists\":true}}") ==
        250);
  dtx_store_close(st);
}

static json_t *interest(dtx_store_t *st, const char *day, int64_t rate,
                        const char *settle, int want) {
  dtx_interest_req_t q = {.day = day, .rate_ppm = rate, .settlement = settle};
  json_t *out = NULL;
  int rc = dtx_interest_run(st, &q, NULL, &out);
  CHECKF(rc == want, "interest %s %lld: %s (%s)", day, (long long)rate,
         dtx_errname(rc), dtx_errdetail());
  return out;
}

static int64_t num(const json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}

static void test_interest(void) {
  dtx_store_t *st = dtx_t_open(uri);
  dtx_t_drop_transfers(st);
  dtx_account_opts_t a = {.balance = 2000000}, b = {.balance = 999},
                     x = {.balance = 50, .no_min_balance = 1};
  CHECK_RC(dtx_account_create(st, "A", &a, NULL), 0);
  CHECK_RC(dtx_account_create(st, "B", &b, NULL), 0);
  CHECK_RC(dtx_account_create(st, "X", &x, NULL), 0);

  static const struct {
    const char *day;
    int64_t rate;
  } bad[] = {{"2026-02-29", 1}, {"2100-02-29", 1}, {"2026-00-10", 1},
             {"2026-12-32", 1}, {"0000-01-01", 1}, {"2026/01/01", 1},
             {"2026-01-1", 1},  {NULL, 1},         {"2026-01-01", -1},
             {"2026-01-01", DTX_INTEREST_MAX_PPM + 1}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *o = interest(st, bad[i].day, bad[i].rate, NULL, DTX_EINVAL);
    CHECK(o == NULL);
  }
  CHECK(interest(st, "2026-01-01", 1, "no such", DTX_EINVAL) == NULL);
  CHECK(count(st, "accounts", "{\"_id\":\"settlement\"}") == 0);
  CHECK(count(st, "transfers", "{}") == 0);

  /* 2000-02-29 is a date (divisible by 400). */
  json_t *o = interest(st, "2000-02-29", 2500, NULL, 0);
  CHECK(num(o, "accounts") == 2 && num(o, "credited") == 2 &&
        num(o, "already") == 0 && num(o, "skipped") == 2 &&
        num(o, "zero") == 0 && num(o, "total") == 5000 + 2);
  json_decref(o);
  o = interest(st, "2000-02-29", 2500, NULL, 0);
  CHECK(num(o, "credited") == 0 && num(o, "already") == 2 &&
        num(o, "total") == 0);
  json_decref(o);
  json_t *acc = NULL;
  CHECK_RC(dtx_account_get(st, "A", &acc), 0);
  CHECK(num(acc, "balance") == 2005000);
  json_decref(acc);
  CHECK_RC(dtx_account_get(st, "settlement", &acc), 0);
  CHECK(num(acc, "balance") == -5002 &&
        json_is_null(json_object_get(acc, "min_balance")));
  json_decref(acc);
  /* A settlement account with a limit: refused, nothing credited. */
  dtx_account_opts_t lim = {.balance = 0, .min_balance = -10};
  CHECK_RC(dtx_account_create(st, "S2", &lim, NULL), 0);
  CHECK(interest(st, "2000-03-01", 2500, "S2", DTX_EINVAL) == NULL);
  CHECK(count(st, "transfers", "{}") == 2);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  json_decref(rep);
  dtx_store_close(st);
}

/* FIPS 180-4's examples and a two-block tail: the hash behind the credit
 * ids of long account ids must be SHA-256 itself, or a rerun by another
 * build would look for another id. */
static void test_sha256(void) {
  static const struct {
    const char *in, *hex;
  } v[] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"}};
  char hex[65];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    dtx__sha256_hex(v[i].in, strlen(v[i].in), hex);
    CHECK(strcmp(hex, v[i].hex) == 0);
  }
  char *m = malloc(1000000);
  CHECK(m != NULL);
  memset(m, 'a', 1000000);
  dtx__sha256_hex(m, 1000000, hex);
  CHECK(strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39cc"
                    "c7112cd0") == 0);
  free(m);
}

/* An account id of 128 bytes (valid) is credited under
 * interest-sha256:DAY:HEX, found again by the rerun; one of 108 bytes
 * still fits interest:DAY:ID (128 bytes). */
static void test_interest_long_ids(void) {
  dtx_store_t *st = dtx_t_open(uri);
  dtx_t_drop_transfers(st);
  char a128[129], a108[109], hex[65], tid[200];
  memset(a128, 'q', 128);
  a128[128] = '\0';
  memset(a108, 'r', 108);
  a108[108] = '\0';
  dtx_account_opts_t o = {.balance = 1000000};
  CHECK_RC(dtx_account_create(st, a128, &o, NULL), 0);
  CHECK_RC(dtx_account_create(st, a108, &o, NULL), 0);
  json_t *r = interest(st, "2026-05-05", 100, NULL, 0);
  CHECK(num(r, "accounts") == 2 && num(r, "credited") == 2 &&
        num(r, "refused") == 0 && num(r, "total") == 200);
  json_decref(r);
  dtx__sha256_hex(a128, 128, hex);
  snprintf(tid, sizeof tid, "interest-sha256:2026-05-05:%s", hex);
  json_t *t = NULL;
  CHECK_RC(dtx_transfer_get(st, tid, &t), 0);
  CHECK(strcmp(json_string_value(json_object_get(t, "to")), a128) == 0);
  json_decref(t);
  snprintf(tid, sizeof tid, "interest:2026-05-05:%s", a108);
  CHECK(strlen(tid) == 128);
  CHECK_RC(dtx_transfer_get(st, tid, &t), 0);
  json_decref(t);
  r = interest(st, "2026-05-05", 100, NULL, 0);
  CHECK(num(r, "credited") == 0 && num(r, "already") == 2);
  json_decref(r);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  json_decref(rep);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:scenarios.db";
  TEST_RUN(test_batch);
  TEST_RUN(test_interest);
  TEST_RUN(test_sha256);
  TEST_RUN(test_interest_long_ids);
  return TEST_DONE();
}
