/* kit.c -- the pattern kit (src/txn/kit.h) on a real store: claim-next,
 * fenced moves, takeover of a lapsed lease, renew, the retry policy under
 * injected faults and a deadline, paging, tallies, index set-up per store
 * (not per handle address), the zero-value account options, and the
 * shapes of the worker, recover and audit reports.
 *
 * usage: txn_kit STORE-URI   (collections kit_items, accounts and
 * transfers are emptied first) */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doc/doc.h"
#include "testlib.h"
#include "txn/kit.h"
#include "util/err.h"

static const char *uri;
static const dtx__kind_t K = {"kit_items", "phase"};

static dtx_store_t *open_fresh(void) {
  dtx_store_t *st = NULL;
  if (dtx_store_open(uri, &st) != 0) {
    fprintf(stderr, "open %s: %s\n", uri, dtx_errdetail());
    exit(1);
  }
  dtx_store_drop_collection_ex(st, K.coll, &(dtx_drop_opts_t){1});
  return st;
}

static void add_item(dtx_store_t *st, const char *id, const char *phase,
                     int64_t prio) {
  json_t *doc = json_pack("{s:s,s:s,s:I,s:n,s:I,s:I,s:I}", "_id", id, "phase",
                          phase, "prio", (json_int_t)prio, "owner",
                          "lease_until", (json_int_t)0, "epoch", (json_int_t)0,
                          "updated", (json_int_t)0);
  CHECK_RC(dtx_store_insert(st, K.coll, doc, NULL), 0);
  json_decref(doc);
}

static void test_claim_next(void) {
  dtx_store_t *st = open_fresh();
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "w1", 1000, 0);
  add_item(st, "a", "ready", 1);
  add_item(st, "b", "ready", 5);
  add_item(st, "c", "done", 9);
  json_t *due = J("{\"phase\":\"ready\"}"), *sort = J("{\"prio\":-1}");
  dtx__claim_t c = {.point = "kit.claim", .due = due, .sort = sort,
                    .to = "running"};
  json_t *got = NULL;
  /* The highest priority first, in one step: state, owner, lease, epoch. */
  CHECK_RC(dtx__kit_claim_next(&ex, &K, &c, &got), 0);
  CHECK(dtx__str_is(got, "_id", "b"));
  CHECK(dtx__str_is(got, "phase", "running"));
  CHECK(dtx__str_is(got, "owner", "w1"));
  CHECK(dtx__int(got, "epoch") == 1);
  CHECK(dtx__int(got, "lease_until") > dtx__now_ms());
  json_decref(got);
  CHECK_RC(dtx__kit_claim_next(&ex, &K, &c, &got), 0);
  CHECK(dtx__str_is(got, "_id", "a"));
  json_decref(got);
  CHECK_RC(dtx__kit_claim_next(&ex, &K, &c, &got), DTX_ENOMATCH);
  CHECK(got == NULL);
  json_decref(due);
  json_decref(sort);
  dtx_store_close(st);
}

static void test_fencing_and_takeover(void) {
  dtx_store_t *st = open_fresh();
  dtx__exec_t w1, w2;
  dtx__exec_init(&w1, st, "w1", 60000, 0);
  dtx__exec_init(&w2, st, "w2", 60000, 0);
  add_item(st, "x", "ready", 0);
  json_t *due = J("{\"phase\":\"ready\"}");
  dtx__claim_t c = {.point = "kit.claim", .due = due, .to = "running"};
  json_t *mine = NULL, *taken = NULL, *out = NULL;
  CHECK_RC(dtx__kit_claim_next(&w1, &K, &c, &mine), 0);
  /* w1's lease is live: a takeover that waits for the lapse is refused. */
  CHECK_RC(dtx__kit_takeover(&w2, &K, mine, "kit.takeover", "running", NULL,
                             NULL, &taken),
           DTX_ENOMATCH);
  /* Forced (a cancel): w2 takes it, epoch + 1. */
  CHECK_RC(dtx__kit_takeover(&w2, &K, mine, "kit.takeover", "running",
                             json_object(), NULL, &taken),
           0);
  CHECK(dtx__int(taken, "epoch") == dtx__int(mine, "epoch") + 1);
  CHECK(dtx__str_is(taken, "owner", "w2"));
  /* w1 wakes up: its fenced move and its heartbeat change nothing. */
  dtx__move_t m = {.point = "kit.finish", .from = "running", .to = "done",
                   .flags = DTX__FENCED,
                   .set = json_pack("{s:s}", "by", "w1")};
  CHECK_RC(dtx__kit_move(&w1, &K, mine, &m, &out), DTX_ENOMATCH);
  CHECK(out == NULL);
  CHECK_RC(dtx__kit_renew(&w1, &K, mine, &out), DTX_ENOMATCH);
  /* w2 renews and finishes at its epoch. */
  CHECK_RC(dtx__kit_renew(&w2, &K, taken, &out), 0);
  CHECK(dtx__int(out, "lease_until") >= dtx__int(taken, "lease_until"));
  json_decref(out);
  dtx__move_t m2 = {.point = "kit.finish", .from = "running", .to = "done",
                    .flags = DTX__FENCED,
                    .set = json_pack("{s:s}", "by", "w2")};
  CHECK_RC(dtx__kit_move(&w2, &K, taken, &m2, &out), 0);
  CHECK(dtx__str_is(out, "phase", "done") && dtx__str_is(out, "by", "w2"));
  CHECK(dtx__int(out, "updated") > 0);
  json_decref(out);
  /* A lapsed lease is taken over without force. */
  add_item(st, "y", "ready", 0);
  dtx__exec_t quick;
  dtx__exec_init(&quick, st, "quick", 1, 0);
  json_t *y = NULL;
  CHECK_RC(dtx__kit_claim_next(&quick, &K, &c, &y), 0);
  usleep(5000);
  CHECK_RC(dtx__kit_await(&w2, &K, y, &out), 0); /* returns at the lapse */
  json_decref(out);
  CHECK_RC(dtx__kit_takeover(&w2, &K, y, "kit.takeover", "running", NULL, NULL,
                             &out),
           0);
  CHECK(dtx__str_is(out, "owner", "w2"));
  json_decref(out);
  json_decref(y);
  json_decref(mine);
  json_decref(taken);
  json_decref(due);
  dtx_store_close(st);
}

static void test_retry_and_deadline(void) {
  dtx_store_t *st = open_fresh();
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "w", 0, 0);
  add_item(st, "r", "ready", 0);
  int matched = 0;
  /* One injected error: the policy retries it away. */
  CHECK_RC(dtx__kit_update(&ex, "kit.once", K.coll, J("{\"_id\":\"r\"}"),
                           J("{\"$inc\":{\"n\":1}}"), &matched),
           0);
  CHECK(matched);
  /* Every attempt fails: the last error comes back, after a few. */
  CHECK_RC(dtx__kit_update(&ex, "kit.always", K.coll, J("{\"_id\":\"r\"}"),
                           J("{\"$inc\":{\"n\":1}}"), &matched),
           DTX_EFAULT);
  /* A transient error after the deadline: UNAVAILABLE, naming the step. */
  dtx__call_t c;
  dtx__call_begin(&c, 1);
  usleep(5000);
  int rc = dtx__kit_update(&ex, "kit.late", K.coll, J("{\"_id\":\"r\"}"),
                           J("{\"$inc\":{\"n\":1}}"), &matched);
  CHECK_RC(dtx__call_end(&c, rc), DTX_EUNAVAILABLE);
  CHECKF(strstr(dtx_errdetail(), "kit.late") &&
             strstr(dtx_errdetail(), "deadline"),
         "detail: %s", dtx_errdetail());
  json_t *r = NULL;
  CHECK_RC(dtx__kit_get(&ex, K.coll, "r", &r), 0);
  CHECK(dtx__int(r, "n") == 1); /* only the retried one applied */
  json_decref(r);
  CHECK_RC(dtx__kit_get(&ex, K.coll, "nope", &r), DTX_ENOTFOUND);
  dtx_store_close(st);
}

static void test_list_paging(void) {
  dtx_store_t *st = open_fresh();
  for (int i = 0; i < 5; i++) {
    char id[8];
    snprintf(id, sizeof id, "p%d", i);
    add_item(st, id, "ready", i);
  }
  json_t *out = NULL;
  dtx_page_t pg = {.skip = 1, .limit = 2};
  CHECK_RC(dtx__kit_list(st, K.coll, NULL, NULL, &pg, &out), 0);
  CHECK(json_array_size(out) == 2);
  CHECK(dtx__str_is(json_array_get(out, 0), "_id", "p1"));
  json_decref(out);
  dtx_page_t badpg = {.skip = -1};
  CHECK_RC(dtx__kit_list(st, K.coll, NULL, NULL, &badpg, &out), DTX_EINVAL);
  dtx_store_close(st);
}

static int has_index(dtx_store_t *st, const char *coll, const char *key) {
  json_t *ix = NULL, *e;
  size_t i;
  int found = 0;
  if (dtx_store_list_indexes(st, coll, &ix) != 0)
    return 0;
  json_array_foreach(ix, i, e) {
    if (json_object_get(json_object_get(e, "key"), key))
      found = 1;
  }
  json_decref(ix);
  return found;
}

/* Index set-up is remembered per store, not per handle address: a new
 * handle on another store (often at the freed address) gets its own. */
static void test_indexes_per_store(void) {
  const dtx__pattern_t *p = dtx__patterns[0];
  if (strncmp(uri, "sqlite:", 7) != 0 || strcmp(uri, "sqlite::memory:") == 0) {
    /* Two distinct stores are needed: two files; memory stores below. */
  } else {
    char other[600];
    snprintf(other, sizeof other, "%s.other", uri);
    unlink(other + 7);
    dtx_store_t *a = open_fresh();
    CHECK_RC(dtx__kit_ensure(a, p), 0);
    dtx_store_close(a);
    dtx_store_t *b = NULL;
    REQUIRE(dtx_store_open(other, &b) == 0);
    CHECK_RC(dtx__kit_ensure(b, p), 0);
    CHECK(has_index(b, "transfers", "state"));
    dtx_store_close(b);
    unlink(other + 7);
  }
  for (int i = 0; i < 2; i++) { /* each private store is new */
    dtx_store_t *m = NULL;
    REQUIRE(dtx_store_open("sqlite::memory:", &m) == 0);
    CHECK_RC(dtx__kit_ensure(m, p), 0);
    CHECK(has_index(m, "accounts", "pending.tx"));
    dtx_store_close(m);
  }
}

/* A pattern's rules table: dtx__kit_ensure installs the validator and
 * delete guard (replacing rules that differ), the store then refuses
 * what they refuse, and dtx__audit_load reports a document the validator
 * refuses that got in by bypass -- keeping it in the map. */
static void test_rules(void) {
  static const dtx__rules_def_t rules[] = {
      {"kit_items",
       "{\"$jsonSchema\":{\"bsonType\":\"object\",\"required\":[\"_id\","
       "\"phase\"," DTX__KIT_ITEM_REQUIRED "],\"properties\":{\"phase\":{"
       "\"enum\":[\"ready\",\"done\"]}," DTX__KIT_ITEM_PROPS "}}}",
       "{\"phase\":\"done\"}"},
      {NULL, NULL, NULL},
  };
  const dtx__pattern_t p = {.name = "kit", .rules = rules};
  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  CHECK_RC(dtx__kit_ensure(st, &p), 0);
  json_t *got = NULL;
  CHECK_RC(dtx_store_get_rules(st, "kit_items", &got), 0);
  CHECK(json_is_object(json_object_get(got, "validator")));
  json_t *guard = J("{\"phase\":\"done\"}");
  CHECK(json_equal(json_object_get(got, "delete_guard"), guard));
  json_decref(guard);
  json_decref(got);
  add_item(st, "r1", "ready", 0); /* the kit's fields pass */
  json_t *bad = J("{\"$set\":{\"epoch\":\"1\"}}"), *f = J("{\"_id\":\"r1\"}");
  CHECK_RC(dtx_store_update(st, "kit_items", f, bad, NULL, NULL),
           DTX_EVALIDATION);
  CHECK(strstr(dtx_errdetail(), "epoch") != NULL);
  CHECK_RC(dtx_store_delete(st, "kit_items", f, 0, NULL), DTX_EVALIDATION);
  /* Rules changed by hand are put back by the next set-up. */
  CHECK_RC(dtx_store_set_rules(st, "kit_items", NULL), 0);
  CHECK_RC(dtx__kit_ensure(st, &p), 0);
  CHECK_RC(dtx_store_get_rules(st, "kit_items", &got), 0);
  CHECK(json_is_object(json_object_get(got, "validator")));
  json_decref(got);
  /* A bypass write gets in; the audit's load reports it and keeps it. */
  dtx_update_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_update(st, "kit_items", f, bad, &by, NULL), 0);
  dtx__audit_t a = {.st = st, .pattern = "kit", .pat = &p};
  a.report = json_object();
  a.part = json_object();
  a.findings = json_array();
  json_t *map = NULL;
  CHECK_RC(dtx__audit_load(&a, "kit_items", &map), 0);
  CHECK(json_object_get(map, "r1") != NULL);
  CHECKF(json_array_size(a.findings) == 1 &&
             dtx__str_is(json_array_get(a.findings, 0), "kind", "bad_shape") &&
             strstr(dtx__str(json_array_get(a.findings, 0), "detail"),
                    "kit_items 'r1': epoch is string") != NULL,
         "%s", JS(a.findings));
  json_decref(map);
  json_decref(a.report);
  json_decref(a.part);
  json_decref(a.findings);
  json_decref(bad);
  json_decref(f);
  dtx_store_close(st);
}

static void test_account_zero_value(void) {
  dtx_store_t *st = open_fresh();
  dtx_t_drop_transfers(st);
  json_t *a = NULL, *tx = NULL;
  /* NULL and a zeroed struct: balance 0, min_balance 0 -- never negative. */
  CHECK_RC(dtx_account_create(st, "z0", NULL, &a), 0);
  CHECK(json_integer_value(json_object_get(a, "min_balance")) == 0 &&
        json_is_integer(json_object_get(a, "min_balance")));
  json_decref(a);
  dtx_account_opts_t zero = {0};
  CHECK_RC(dtx_account_create(st, "z1", &zero, NULL), 0);
  dtx_transfer_req_t req = {.from = "z1", .to = "z0", .amount = 1};
  CHECK_RC(dtx_transfer_execute(st, &req, NULL, &tx), 0);
  CHECK(json_is_string(json_object_get(tx, "state")) &&
        strcmp(json_string_value(json_object_get(tx, "state")), "failed") == 0);
  json_decref(tx);
  /* No limit only when asked for. */
  dtx_account_opts_t ext = {.no_min_balance = 1};
  CHECK_RC(dtx_account_create(st, "ext", &ext, &a), 0);
  CHECK(json_is_null(json_object_get(a, "min_balance")));
  json_decref(a);
  dtx_account_opts_t below = {.balance = 5, .min_balance = 10};
  CHECK_RC(dtx_account_create(st, "below", &below, NULL), DTX_EINVAL);
  req = (dtx_transfer_req_t){.from = "ext", .to = "z0", .amount = 7};
  CHECK_RC(dtx_transfer_execute(st, &req, NULL, &tx), 0);
  json_decref(tx);
  json_t *list = NULL;
  dtx_page_t pg = {.limit = 2};
  CHECK_RC(dtx_account_list(st, &pg, &list), 0);
  CHECK(json_array_size(list) == 2);
  json_decref(list);
  CHECK_RC(dtx_transfer_list(st, NULL, &(dtx_page_t){.skip = 1}, &list), 0);
  CHECK(json_array_size(list) == 1);
  json_decref(list);

  /* The reports: per pattern, and the transfer counts at the top too. */
  json_t *rep = NULL, *sum = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  json_t *part = json_object_get(json_object_get(rep, "patterns"), "transfer");
  CHECK(json_is_string(json_object_get(part, "summary")));
  CHECK(json_integer_value(json_object_get(part, "accounts")) == 3);
  CHECK(json_integer_value(json_object_get(rep, "accounts")) == 3);
  json_decref(rep);
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  part = json_object_get(json_object_get(sum, "patterns"), "transfer");
  CHECK(json_is_object(json_object_get(part, "ran")));
  CHECK(json_is_object(json_object_get(part, "skipped")));
  CHECK(json_integer_value(
            json_object_get(json_object_get(part, "errors"), "count")) == 0);
  json_decref(sum);
  dtx_transfer_req_t r2 = {.id = "w1", .from = "ext", .to = "z0", .amount = 1};
  CHECK_RC(dtx_transfer_submit(st, &r2, &tx), 0);
  json_decref(tx);
  dtx_worker_opts_t wo = {.once = 1};
  CHECK_RC(dtx_worker_run(st, &wo, &sum), 0);
  part = json_object_get(json_object_get(sum, "patterns"), "transfer");
  CHECKF(json_integer_value(json_object_get(json_object_get(part, "ran"),
                                            "succeeded")) == 1,
         "%s", JS(sum));
  CHECK(json_is_true(json_object_get(sum, "ok")));
  json_decref(sum);
  dtx_store_close(st);
}

static void test_tally(void) {
  dtx__tally_t t = {0};
  REQUIRE(dtx__tally_init(&t) == 0);
  json_t *id = json_string("i1");
  dtx__tally_ran(&t, "done", 2);
  dtx__tally_ran(&t, "done", 1);
  for (int i = 0; i < 7; i++)
    dtx__tally_skip(&t, "lease not expired", id);
  dtx__err(DTX_EUNAVAILABLE, "store gone");
  dtx__tally_error(&t, id, DTX_EUNAVAILABLE);
  CHECK(json_integer_value(json_object_get(json_object_get(t.obj, "ran"),
                                           "done")) == 3);
  json_t *sk = json_object_get(json_object_get(t.obj, "skipped"),
                               "lease not expired");
  CHECK(json_integer_value(json_object_get(sk, "count")) == 7);
  CHECK(json_array_size(json_object_get(sk, "ids")) == 5); /* the first few */
  CHECK(t.first_err == DTX_EUNAVAILABLE);
  json_t *e0 = json_array_get(
      json_object_get(json_object_get(t.obj, "errors"), "first"), 0);
  CHECK(dtx__str_is(e0, "error", "UNAVAILABLE"));
  CHECK(dtx__str_is(e0, "detail", "store gone"));
  json_decref(id);
  dtx__tally_free(&t);
}

/* Every registered pattern's points start with its name: the crash
 * suites dispatch a point to tests/crash/scenarios/NAME.sh by it. */
static void test_registry(void) {
  size_t n = 0;
  for (const char *const *p = dtx_fault_points(); *p; p++)
    n++;
  CHECK(n >= 17);
  for (size_t i = 0; dtx__patterns[i]; i++) {
    const dtx__pattern_t *p = dtx__patterns[i];
    CHECK(p->name && p->fault_points && p->collections);
    CHECK(!p->claim_next == !p->drive);
  }
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:kit.db";
  /* kit.once fails its first arrival; kit.always every one; kit.late its
   * first, after the deadline passed. */
  setenv("DOCTX_FAULT",
         "kit.once:error,kit.always:error:1,kit.always:error:2,"
         "kit.always:error:3,kit.always:error:4,kit.late:error",
         1);
  TEST_RUN(test_claim_next);
  TEST_RUN(test_fencing_and_takeover);
  TEST_RUN(test_retry_and_deadline);
  TEST_RUN(test_list_paging);
  TEST_RUN(test_indexes_per_store);
  TEST_RUN(test_rules);
  TEST_RUN(test_account_zero_value);
  TEST_RUN(test_tally);
  TEST_RUN(test_registry);
  return TEST_DONE();
}
