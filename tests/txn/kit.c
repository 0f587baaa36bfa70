/* kit.c -- the pattern kit (src/txn/kit/kit.h) on a real store: claim-next,
 * fenced moves, takeover of a lapsed lease, renew, the retry policy under
 * injected faults and a deadline, claim-many (order, sizes, a race of 4
 * processes, takeover, faults, what a round reads), paging, tallies,
 * index set-up per store (not per handle address), the zero-value account
 * options, and the shapes of the worker, recover and audit reports.
 *
 * usage: txn_kit STORE-URI   (collections kit_items, accounts and
 * transfers are emptied first) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "doc/doc.h"
#include "store/store.h" /* dtx__docs_examined */
#include "testlib.h"
#include "txn/kit/kit.h"
#include "txn/transfer/transfer.h" /* the transfer pattern's shape */
#include "util/err.h"

static const char *uri;
static const dtx__kind_t K = {"kit_items", "phase", NULL};

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

/* ---- claim-many -------------------------------------------------------------- */

#define MANY_ITEMS 300

/* n ready items m000.. with priorities 0..6, and the index the claims'
 * sorted find walks. */
static dtx_store_t *many_fresh(int n) {
  dtx_store_t *st = open_fresh();
  json_t *keys = J("{\"phase\":1,\"prio\":1}");
  CHECK_RC(dtx_store_create_index(st, K.coll, keys, NULL, NULL), 0);
  json_decref(keys);
  for (int i = 0; i < n; i++) {
    char id[16];
    snprintf(id, sizeof id, "m%03d", i);
    add_item(st, id, "ready", i % 7);
  }
  return st;
}

/* The items a claim returned are in prio order (ascending: the store
 * walks the index {phase, prio} in sort order only upwards), running,
 * under this executor's lease at epoch 1; returns how many. */
static size_t check_won(const json_t *got, const char *owner, int64_t *prev) {
  size_t i;
  json_t *d;
  json_array_foreach(got, i, d) {
    CHECKF(dtx__str_is(d, "phase", "running") &&
               dtx__str_is(d, "owner", owner) && dtx__int(d, "epoch") == 1 &&
               dtx__int(d, "lease_until") > dtx__now_ms(),
           "%s", JS(d));
    CHECKF(dtx__int(d, "prio") >= *prev, "out of order: %s", JS(got));
    *prev = dtx__int(d, "prio");
  }
  return json_array_size(got);
}

static void test_claim_many(void) {
  dtx_store_t *st = many_fresh(20);
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "w1", 60000, 0);
  json_t *due = J("{\"phase\":\"ready\"}"), *sort = J("{\"prio\":1}");
  dtx__claim_t c = {.point = "kit.claim", .due = due, .sort = sort,
                    .to = "running"};
  json_t *got = NULL;
  int64_t prev = -1;
  /* max 1: the first in sort order. */
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, 1, &got), 0);
  CHECK(check_won(got, "w1", &prev) == 1 && prev == 0);
  json_decref(got);
  /* max 16: the next 16 in order, in one round. */
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, 16, &got), 0);
  CHECKF(check_won(got, "w1", &prev) == 16, "%s", JS(got));
  json_decref(got);
  /* fewer due than max: the 3 left. */
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, 16, &got), 0);
  CHECKF(check_won(got, "w1", &prev) == 3, "%s", JS(got));
  json_decref(got);
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, 16, &got), DTX_ENOMATCH);
  CHECK(got == NULL);
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, 0, &got), DTX_EINVAL);
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, DTX__CLAIM_MANY_MAX + 1, &got),
           DTX_EINVAL);
  /* Every item was claimed once: epoch 1 everywhere. */
  json_t *all = NULL, *bumped = J("{\"phase\":\"running\",\"epoch\":1}");
  CHECK_RC(dtx__kit_find(&ex, K.coll, bumped, NULL, &all), 0);
  CHECK(json_array_size(all) == 20);
  json_decref(all);
  json_decref(bumped);
  json_decref(due);
  json_decref(sort);
  dtx_store_close(st);
}

/* A claim round reads its batch, not the backlog: the sorted find walks
 * the index a few entries per bucket (on Redis it read every ready item
 * before, ~MANY_ITEMS documents per round). */
static void test_claim_many_reads_little(void) {
  dtx_store_t *st = many_fresh(MANY_ITEMS);
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "w1", 60000, 0);
  json_t *due = J("{\"phase\":\"ready\"}"), *sort = J("{\"prio\":1}");
  dtx__claim_t c = {.point = "kit.claim", .due = due, .sort = sort,
                    .to = "running"};
  json_t *got = NULL;
  dtx__docs_examined = 0;
  CHECK_RC(dtx__kit_claim_many(&ex, &K, &c, 16, &got), 0);
  CHECK(json_array_size(got) == 16);
  CHECKF(dtx__docs_examined < MANY_ITEMS * 2 / 3,
         "%lld documents examined for a claim of 16 of %d",
         (long long)dtx__docs_examined, MANY_ITEMS);
  json_decref(got);
  json_decref(due);
  json_decref(sort);
  dtx_store_close(st);
}

/* The transfer worker's claim reads its batch, not the backlog: its find
 * is sorted on the index {state, created, _id}, which the store walks,
 * stopping early.  Unsorted, a find on Redis read every initiated
 * transfer (~TX_BACKLOG documents per round); sorted, a round of 16
 * reads ~80 on SQLite, ~210 on Redis (the walk reads a few entries of
 * each of 16 buckets, then more, up to 4 x 16 matches: claims spread
 * over those). */
#define TX_BACKLOG 800
static void test_transfer_claim_reads_little(void) {
  dtx_store_t *st = open_fresh();
  dtx_t_drop_transfers(st);
  dtx_account_opts_t ao = {.balance = 1000000};
  CHECK_RC(dtx_account_create(st, "ta", &ao, NULL), 0);
  CHECK_RC(dtx_account_create(st, "tb", &ao, NULL), 0);
  for (int i = 0; i < TX_BACKLOG; i++) {
    dtx_transfer_req_t req = {.from = "ta", .to = "tb", .amount = 1};
    json_t *tx = NULL;
    CHECK_RC(dtx_transfer_submit(st, &req, &tx), 0);
    json_decref(tx);
  }
  const dtx__pattern_t *p = dtx__patterns[0];
  REQUIRE(strcmp(p->name, "transfer") == 0);
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "tw", 60000, 0);
  size_t won = 0;
  for (int round = 0; round < 3; round++) {
    json_t *got = NULL;
    dtx__docs_examined = 0;
    CHECK_RC(p->claim_many(&ex, 16, &got), 0);
    CHECKF(json_array_size(got) == 16, "%s", JS(got));
    CHECKF(dtx__docs_examined < TX_BACKLOG / 3,
           "%lld documents examined for a transfer claim of 16 of %d",
           (long long)dtx__docs_examined, TX_BACKLOG);
    won += json_array_size(got);
    json_decref(got);
  }
  json_t *one = NULL;
  dtx__docs_examined = 0;
  CHECK_RC(p->claim_next(&ex, &one), 0);
  CHECKF(dtx__str_is(one, "state", "preparing") &&
             dtx__str_is(one, "owner", "tw"),
         "%s", JS(one));
  CHECKF(dtx__docs_examined < TX_BACKLOG / 8,
         "%lld documents examined for a transfer claim of 1 of %d",
         (long long)dtx__docs_examined, TX_BACKLOG);
  json_decref(one);
  /* Every claim took a transfer nobody else had: 49 preparing. */
  int64_t n = 0;
  json_t *prep = J("{\"state\":\"preparing\",\"epoch\":1}");
  CHECK_RC(dtx_store_count(st, DTX_TRANSFERS, prep, &n), 0);
  CHECKF(n == (int64_t)won + 1, "%lld preparing after %zu claims",
         (long long)n, won + 1);
  json_decref(prep);
  dtx_t_drop_transfers(st);
  dtx_store_close(st);
}

/* 4 processes claim from one pile, 1..8 at a time, until nothing is due:
 * every item is claimed exactly once (epoch 1, its one owner). */
static void test_claim_many_race(void) {
  dtx_store_t *st = many_fresh(MANY_ITEMS);
  pid_t kids[4];
  int fds[4][2];
  for (int k = 0; k < 4; k++) {
    REQUIRE(pipe(fds[k]) == 0);
    if ((kids[k] = fork()) == 0) {
      close(fds[k][0]);
      dtx_store_t *s = dtx_t_open(uri);
      dtx__exec_t ex;
      char owner[16];
      snprintf(owner, sizeof owner, "racer%d", k);
      dtx__exec_init(&ex, s, owner, 60000, 0);
      json_t *due = J("{\"phase\":\"ready\"}"), *sort = J("{\"prio\":1}");
      dtx__claim_t c = {.point = "kit.claim", .due = due, .sort = sort,
                        .to = "running"};
      int rc, won = 0, bad = 0;
      for (size_t max = 1;; max = max % 8 + 1) {
        json_t *got = NULL;
        dtx__call_t call;
        dtx__call_begin(&call, 20000);
        rc = dtx__call_end(&call, dtx__kit_claim_many(&ex, &K, &c, max, &got));
        if (rc) {
          if (rc != DTX_ENOMATCH) {
            fprintf(stderr, "racer %d: %s\n", k, dtx_errdetail());
            bad = 1;
          }
          break;
        }
        size_t i;
        json_t *d;
        json_array_foreach(got, i, d) {
          if (!dtx__str_is(d, "owner", owner) || dtx__int(d, "epoch") != 1)
            bad = 1;
        }
        won += (int)json_array_size(got);
        json_decref(got);
      }
      if (write(fds[k][1], &won, sizeof won) != sizeof won)
        bad = 1;
      json_decref(due);
      json_decref(sort);
      dtx_store_close(s);
      _exit(bad);
    }
    close(fds[k][1]);
  }
  int total = 0;
  for (int k = 0; k < 4; k++) {
    int status = 0, won = 0;
    CHECK(read(fds[k][0], &won, sizeof won) == sizeof won);
    close(fds[k][0]);
    waitpid(kids[k], &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    total += won;
  }
  CHECKF(total == MANY_ITEMS, "%d claims of %d items", total, MANY_ITEMS);
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "judge", 0, 0);
  json_t *all = NULL,
         *once = J("{\"phase\":\"running\",\"epoch\":1,\"owner\":{\"$in\":"
                   "[\"racer0\",\"racer1\",\"racer2\",\"racer3\"]}}");
  CHECK_RC(dtx__kit_find(&ex, K.coll, once, NULL, &all), 0);
  CHECKF(json_array_size(all) == MANY_ITEMS, "%zu of %d claimed once",
         json_array_size(all), MANY_ITEMS);
  json_decref(all);
  json_decref(once);
  dtx_store_close(st);
}

/* A due filter on a lapsed lease makes claim-many a takeover: it takes
 * the lapsed item (epoch + 1, the old owner fenced), not the live one;
 * an injected error at the claim point is retried away, and a lost reply
 * is recognised as this executor's own claim (one epoch bump, returned). */
static void test_claim_many_takeover_and_faults(void) {
  dtx_store_t *st = many_fresh(0);
  add_item(st, "lapsed", "ready", 1);
  add_item(st, "live", "ready", 2);
  dtx__exec_t quick, slow, w2;
  dtx__exec_init(&quick, st, "quick", 1, 0);
  dtx__exec_init(&slow, st, "slow", 60000, 0);
  dtx__exec_init(&w2, st, "w2", 60000, 0);
  json_t *one = J("{\"_id\":\"lapsed\",\"phase\":\"ready\"}"),
         *two = J("{\"_id\":\"live\",\"phase\":\"ready\"}");
  dtx__claim_t c1 = {.point = "kit.claim", .due = one, .to = "running"},
               c2 = {.point = "kit.claim", .due = two, .to = "running"};
  json_t *a = NULL, *b = NULL, *got = NULL, *out = NULL;
  CHECK_RC(dtx__kit_claim_many(&quick, &K, &c1, 4, &a), 0);
  CHECK_RC(dtx__kit_claim_many(&slow, &K, &c2, 4, &b), 0);
  usleep(5000); /* quick's 1 ms lease lapses; slow's does not */
  char lapsed[96];
  snprintf(lapsed, sizeof lapsed,
           "{\"phase\":\"running\",\"lease_until\":{\"$lte\":%lld}}",
           (long long)dtx__now_ms());
  json_t *due = J(lapsed), *sort = J("{\"prio\":1}");
  dtx__claim_t take = {.point = "kit.claim_err", .due = due, .sort = sort,
                       .to = "running"};
  CHECK_RC(dtx__kit_claim_many(&w2, &K, &take, 8, &got), 0);
  CHECKF(json_array_size(got) == 1 &&
             dtx__str_is(json_array_get(got, 0), "_id", "lapsed") &&
             dtx__str_is(json_array_get(got, 0), "owner", "w2") &&
             dtx__int(json_array_get(got, 0), "epoch") == 2,
         "%s", JS(got));
  /* quick is fenced off: its move at epoch 1 matches nothing. */
  dtx__move_t m = {.point = "kit.finish", .from = "running", .to = "done",
                   .flags = DTX__FENCED};
  CHECK_RC(dtx__kit_move(&quick, &K, json_array_get(a, 0), &m, &out),
           DTX_ENOMATCH);
  json_decref(got);
  /* A lost reply: the claim landed, its answer did not. */
  add_item(st, "lost", "ready", 3);
  json_t *three = J("{\"_id\":\"lost\",\"phase\":\"ready\"}");
  dtx__claim_t c3 = {.point = "kit.claim_lost", .due = three,
                     .to = "running"};
  CHECK_RC(dtx__kit_claim_many(&w2, &K, &c3, 2, &got), 0);
  CHECKF(json_array_size(got) == 1 &&
             dtx__str_is(json_array_get(got, 0), "owner", "w2") &&
             dtx__int(json_array_get(got, 0), "epoch") == 1,
         "%s", JS(got));
  json_decref(got);
  json_decref(a);
  json_decref(b);
  json_decref(one);
  json_decref(two);
  json_decref(three);
  json_decref(due);
  json_decref(sort);
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
  /* Two batched steps failing after the deadline: each detail names its
   * own step, once (the second used to carry the first's words too). */
  dtx__kit_op_t ops[2];
  for (int i = 0; i < 2; i++)
    ops[i] = (dtx__kit_op_t){.kind = DTX_BULK_UPDATE_ONE,
                             .point = i ? "kit.late_b" : "kit.late_a",
                             .coll = K.coll,
                             .filter = json_pack("{s:s}", "_id", "r"),
                             .update = json_pack("{s:{s:i}}", "$inc", "n", 1)};
  dtx__call_begin(&c, 1);
  usleep(5000);
  rc = dtx__kit_run(&ex, ops, 2);
  CHECK_RC(dtx__call_end(&c, rc), DTX_EUNAVAILABLE);
  for (int i = 0; i < 2; i++) {
    const char *d = ops[i].detail ? ops[i].detail : "";
    const char *other = i ? "kit.late_a" : "kit.late_b";
    const char *dl = strstr(d, "deadline");
    CHECKF(ops[i].rc == DTX_EUNAVAILABLE && strstr(d, ops[i].point) &&
               !strstr(d, other) && dl && !strstr(dl + 1, "deadline"),
           "step %d: %s: %s", i, dtx_errname(ops[i].rc), d);
  }
  dtx__kit_ops_clear(ops, 2);
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

/* ---- keyset paging (dtx_page_t.after) ---------------------------------- */

typedef int (*list_fn)(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                       json_t **out);
static int l_accounts(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                      json_t **out) {
  (void)arg;
  return dtx_account_list(st, pg, out);
}
static int l_transfers(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                       json_t **out) {
  return dtx_transfer_list(st, arg, pg, out);
}
static int l_locks(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                   json_t **out) {
  (void)arg;
  return dtx_lock_list(st, pg, out);
}

static int l_jobs(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                  json_t **out) {
  return dtx_job_list(st, arg, NULL, pg, out);
}
static int l_orders(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                    json_t **out) {
  return dtx_order_list(st, arg, pg, out);
}
static int l_ledger(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                    json_t **out) {
  return dtx_ledger_list(st, arg, pg, out);
}
static int l_entries(dtx_store_t *st, const void *arg, const dtx_page_t *pg,
                     json_t **out) {
  return dtx_ledger_entries(st, arg, NULL, pg, out);
}

static const char *key_of(const json_t *e) {
  const char *id = dtx__str(e, "_id");
  return id ? id : dtx__str(e, "name"); /* a lock's view */
}

/* Pages the list to the end by after, limit at a time (each page also
 * skipping `skip` after the key), and checks it against the whole list
 * read at once: the same ids in the same order, each once.  between (may
 * be NULL) runs between pages: concurrent inserts. */
static void page_through(dtx_store_t *st, list_fn fn, const void *arg,
                         int64_t limit, void (*between)(dtx_store_t *, int),
                         const char *what) {
  json_t *all = NULL, *got = json_array();
  CHECK_RC(fn(st, arg, NULL, &all), 0);
  char after[160] = "";
  for (int pg = 0;; pg++) {
    json_t *page = NULL;
    CHECK_RC(fn(st, arg,
                &(dtx_page_t){.limit = limit, .after = *after ? after : NULL},
                &page),
             0);
    size_t i, k = json_array_size(page);
    json_t *e;
    json_array_foreach(page, i, e) json_array_append_new(got,
                                                         json_string(key_of(e)));
    if (k)
      snprintf(after, sizeof after, "%s", key_of(json_array_get(page, k - 1)));
    json_decref(page);
    if ((int64_t)k < limit)
      break;
    if (between)
      between(st, pg);
  }
  /* Every entry listed at the start is there once, in the list's order;
   * entries inserted meanwhile may follow (they sort after every key
   * already passed, or are not seen), never twice. */
  size_t i, j = 0;
  json_t *e;
  json_array_foreach(all, i, e) {
    while (j < json_array_size(got) &&
           strcmp(json_string_value(json_array_get(got, j)), key_of(e)) != 0)
      j++;
    CHECKF(j < json_array_size(got), "%s: %s missing or out of order",
           what, key_of(e));
    j++;
  }
  for (i = 0; i < json_array_size(got); i++)
    for (size_t m = i + 1; m < json_array_size(got); m++)
      CHECKF(strcmp(json_string_value(json_array_get(got, i)),
                    json_string_value(json_array_get(got, m))) != 0,
             "%s: %s listed twice", what,
             json_string_value(json_array_get(got, i)));
  CHECKF(json_array_size(got) >= json_array_size(all), "%s: %zu of %zu", what,
         json_array_size(got), json_array_size(all));
  json_decref(all);
  json_decref(got);
}

static void insert_more(dtx_store_t *st, int pg) {
  char id[32];
  static int calls;
  calls++;
  /* ids that sort before and after the pages' keys, by _id and by time */
  for (int i = 0; i < 2; i++) {
    snprintf(id, sizeof id, "%s%d-%03d-%d", i ? "zz" : "a", calls, pg, i);
    dtx_account_opts_t ao = {.balance = 10};
    CHECK_RC(dtx_account_create(st, id, &ao, NULL), 0);
    dtx_transfer_req_t req = {.id = id, .from = "ka", .to = "kb", .amount = 1};
    json_t *tx = NULL;
    CHECK_RC(dtx_transfer_submit(st, &req, &tx), 0);
    json_decref(tx);
  }
}

#define KEYSET_N 240
static void test_keyset_paging(void) {
  dtx_store_t *st = open_fresh();
  dtx_t_drop_transfers(st);
  dtx_store_drop_collection_ex(st, "locks", &(dtx_drop_opts_t){1});
  dtx_account_opts_t ao = {.balance = 1000000};
  CHECK_RC(dtx_account_create(st, "ka", &ao, NULL), 0);
  CHECK_RC(dtx_account_create(st, "kb", &ao, NULL), 0);
  /* ids whose order is not their creation order */
  for (int i = 0; i < KEYSET_N; i++) {
    char id[32];
    snprintf(id, sizeof id, "k%03d", (i * 7) % KEYSET_N);
    dtx_transfer_req_t req = {.id = id, .from = "ka", .to = "kb", .amount = 1};
    json_t *tx = NULL;
    CHECK_RC(dtx_transfer_submit(st, &req, &tx), 0);
    json_decref(tx);
    if (i % 3 == 0)
      CHECK_RC(dtx_account_create(st, id, &ao, NULL), 0);
    if (i % 8 == 0) {
      dtx_lock_opts_t lo = {.ttl_ms = 60000};
      CHECK_RC(dtx_lock_acquire(st, id, &lo, NULL), 0);
    }
  }
  page_through(st, l_accounts, NULL, 7, NULL, "accounts");
  page_through(st, l_transfers, NULL, 7, NULL, "transfers");
  page_through(st, l_transfers, DTX_ST_INITIATED, 9, NULL,
               "initiated transfers");
  page_through(st, l_locks, NULL, 4, NULL, "locks");
  page_through(st, l_accounts, NULL, 11, insert_more, "accounts, inserts");
  page_through(st, l_transfers, NULL, 11, insert_more, "transfers, inserts");

  /* A page deep in the list reads about what the first does: the walk
   * starts at the key (before: every transfer, for every page). */
  json_t *all = NULL, *page = NULL;
  CHECK_RC(dtx_transfer_list(st, NULL, NULL, &all), 0);
  size_t n = json_array_size(all);
  const char *deep = key_of(json_array_get(all, n - 20));
  dtx__docs_examined = 0;
  CHECK_RC(dtx_transfer_list(st, NULL, &(dtx_page_t){.limit = 10, .after = deep},
                             &page),
           0);
  CHECKF(json_array_size(page) == 10 &&
             strcmp(key_of(json_array_get(page, 0)),
                    key_of(json_array_get(all, n - 19))) == 0,
         "%s", JS(page));
  CHECKF(dtx__docs_examined < (int64_t)n / 3,
         "%lld documents examined for a page of 10 after the %zu-th of %zu",
         (long long)dtx__docs_examined, n - 20, n);
  json_decref(page);
  /* ... and so does one near the start (an index range from the key
   * would read all the rest, and sort them). */
  dtx__docs_examined = 0;
  CHECK_RC(dtx_transfer_list(st, NULL,
                             &(dtx_page_t){.limit = 10,
                                           .after = key_of(
                                               json_array_get(all, 19))},
                             &page),
           0);
  CHECKF(json_array_size(page) == 10 && dtx__docs_examined < (int64_t)n / 3,
         "%lld documents examined for a page of 10 after the 20th of %zu",
         (long long)dtx__docs_examined, n);
  json_decref(page);
  const char *deepa = "k200";
  dtx__docs_examined = 0;
  CHECK_RC(dtx_account_list(st, &(dtx_page_t){.limit = 5, .after = deepa},
                            &page),
           0);
  CHECKF(json_array_size(page) == 5 &&
             strcmp(key_of(json_array_get(page, 0)), "k201") == 0,
         "%s", JS(page));
  CHECKF(dtx__docs_examined < 40, "%lld documents examined for 5 accounts",
         (long long)dtx__docs_examined);
  json_decref(page);
  /* skip combines: after the key, then skip. */
  CHECK_RC(dtx_transfer_list(st, NULL,
                             &(dtx_page_t){.skip = 3, .limit = 2,
                                           .after = deep},
                             &page),
           0);
  CHECKF(json_array_size(page) == 2 &&
             strcmp(key_of(json_array_get(page, 0)),
                    key_of(json_array_get(all, n - 16))) == 0,
         "%s", JS(page));
  json_decref(page);
  json_decref(all);
  /* By _id, any id is a place; in creation order the entry must exist. */
  CHECK_RC(dtx_account_list(st, &(dtx_page_t){.after = "k2000"}, &page), 0);
  CHECKF(json_array_size(page) > 0 &&
             strcmp(key_of(json_array_get(page, 0)), "k201") == 0,
         "%s", JS(page));
  json_decref(page);
  CHECK_RC(dtx_transfer_list(st, NULL, &(dtx_page_t){.after = "nope"}, &page),
           DTX_ENOTFOUND);
  CHECK(page == NULL);
  /* Bad input: DTX_EINVAL before anything is read. */
  char longid[200];
  memset(longid, 'x', 129);
  longid[129] = '\0';
  const char *bad[] = {longid, "", "a b", "a\x01", "caf\xc3\xa9", NULL};
  for (int i = 0; bad[i]; i++) {
    dtx_page_t pg = {.limit = 5, .after = bad[i]};
    dtx__docs_examined = 0;
    CHECK_RC(dtx_page_check(&pg), DTX_EINVAL);
    CHECK_RC(dtx_account_list(st, &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_transfer_list(st, NULL, &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_lock_list(st, &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_job_list(st, NULL, NULL, &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_order_list(st, NULL, &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_ledger_list(st, NULL, &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_ledger_list(st, "ka", &pg, &page), DTX_EINVAL);
    CHECK_RC(dtx_ledger_entries(st, "r1", NULL, &pg, &page), DTX_EINVAL);
    CHECKF(dtx__docs_examined == 0, "%lld read for a bad after",
           (long long)dtx__docs_examined);
    CHECKF(strstr(dtx_errdetail(), "page after") != NULL, "%s",
           dtx_errdetail());
  }
  CHECK_RC(dtx_page_check(NULL), 0);
  CHECK_RC(dtx_page_check(&(dtx_page_t){.after = "k1"}), 0);

  /* The other lists: jobs and orders in creation order, the ledger's
   * entries (all, by ref) in creation order and an account's in its
   * seqId order. */
  static const char *const pat_colls[] = {
      DTX_JOBS, "orders", "ledger_accounts", "ledger_entries", NULL};
  for (int i = 0; pat_colls[i]; i++)
    dtx_store_drop_collection_ex(st, pat_colls[i], &(dtx_drop_opts_t){1});
  CHECK_RC(dtx_ledger_account_create(st, "lx",
                                     &(dtx_ledger_limit_t){.no_min_balance = 1},
                                     NULL),
           0);
  CHECK_RC(dtx_ledger_account_create(st, "ly", NULL, NULL), 0);
  for (int i = 0; i < 40; i++) {
    char id[32];
    snprintf(id, sizeof id, "j%03d", (i * 7) % 40);
    dtx_job_req_t jr = {.queue = i % 2 ? "qa" : "qb", .type = "t", .id = id};
    json_t *o = NULL;
    CHECK_RC(dtx_job_add(st, &jr, &o, NULL), 0);
    json_decref(o);
    o = NULL;
    dtx_order_req_t orq = {.trade_id = id, .account = "ka", .amount = 1};
    CHECK_RC(dtx_order_create(st, &orq, &o), 0);
    json_decref(o);
    o = NULL;
    dtx_ledger_leg_t legs[] = {{"lx", -1}, {"ly", 1}};
    dtx_ledger_post_req_t lr = {.id = id, .legs = legs, .nlegs = 2,
                                .ref = i % 3 ? "r1" : "r2"};
    CHECK_RC(dtx_ledger_post(st, &lr, NULL, &o), 0);
    json_decref(o);
  }
  page_through(st, l_jobs, NULL, 6, NULL, "jobs");
  page_through(st, l_jobs, "qa", 4, NULL, "jobs of qa");
  page_through(st, l_orders, NULL, 6, NULL, "orders");
  page_through(st, l_ledger, NULL, 6, NULL, "ledger entries");
  page_through(st, l_ledger, "ly", 6, NULL, "ly's ledger entries");
  page_through(st, l_entries, "r1", 5, NULL, "entries of ref r1");
  CHECK_RC(dtx_ledger_list(st, "ka", &(dtx_page_t){.after = "j001"}, &page),
           DTX_ENOACCOUNT); /* ka is no ledger account */
  CHECK_RC(dtx_ledger_list(st, "ly", &(dtx_page_t){.after = "nope"}, &page),
           DTX_ENOTFOUND);
  CHECK_RC(dtx_job_list(st, NULL, NULL, &(dtx_page_t){.after = "nope"}, &page),
           DTX_ENOTFOUND);
  for (int i = 0; pat_colls[i]; i++)
    dtx_store_drop_collection_ex(st, pat_colls[i], &(dtx_drop_opts_t){1});
  dtx_t_drop_transfers(st);
  dtx_store_drop_collection_ex(st, "locks", &(dtx_drop_opts_t){1});
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
    CHECK(has_index(b, "transfers", "created"));
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

/* The set-up memo sees a drop made through this library in this process:
 * a pattern run, its collection dropped, the pattern run again -- its
 * unique index is there again, and refuses a second live job of the key.
 * (The memo used to hold for the life of the process, and the second run
 * wrote without the index.) */
static void test_ensure_after_drop(void) {
  dtx_store_t *st = dtx_t_open(uri), *other = dtx_t_open(uri);
  dtx_drop_opts_t by = {1};
  dtx_job_req_t r = {.queue = "kq", .type = "t", .unique_key = "k1"};
  json_t *job = NULL;
  int added = 0;
  dtx_store_drop_collection_ex(st, DTX_JOBS, &by);
  CHECK_RC(dtx_job_add(st, &r, &job, &added), 0);
  CHECK(added == 1);
  json_decref(job);
  CHECK(has_index(st, DTX_JOBS, "unique_live"));
  for (int round = 0; round < 2; round++) {
    /* dropped on this handle, then on another one of the same store */
    CHECK_RC(dtx_store_drop_collection_ex(round ? other : st, DTX_JOBS, &by),
             0);
    CHECK(!has_index(st, DTX_JOBS, "unique_live"));
    CHECK_RC(dtx_job_add(st, &r, &job, &added), 0);
    CHECK(added == 1);
    json_decref(job);
    CHECKF(has_index(st, DTX_JOBS, "unique_live"),
           "round %d: the job pattern wrote without its unique index", round);
    r.id = NULL;
    CHECK_RC(dtx_job_add(st, &r, &job, &added), 0);
    CHECK(added == 0); /* the live job of k1, returned */
    json_decref(job);
  }
  dtx_store_drop_collection_ex(st, DTX_JOBS, &by);
  dtx_store_close(other);
  dtx_store_close(st);
}

static int done_let_go(const json_t *doc, char *why, size_t n) {
  if (dtx__str_is(doc, "phase", "done") && dtx__str(doc, "owner"))
    return dtx__shape_bad(why, n, "a done item has an owner");
  return 0;
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
       "{\"phase\":\"done\"}", NULL},
      {NULL, NULL, NULL, NULL},
  };
  /* A done item was let go (docs/kit.md, "Shape checks"). */
  static const dtx__shape_def_t shapes[] = {{"kit_items", done_let_go},
                                            {NULL, NULL}};
  const dtx__pattern_t p = {.name = "kit", .rules = rules, .shapes = shapes};
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
  /* The pattern's rules name it: a plain change is refused; changed
   * past the rules, the next set-up puts them back. */
  CHECK_RC(dtx_store_set_rules(st, "kit_items", NULL), DTX_EVALIDATION);
  dtx_rules_opts_t past = {.bypass_validation = 1};
  CHECK_RC(dtx_store_set_rules_ex(st, "kit_items", NULL, &past), 0);
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
  /* A document the validator lets through but the shape check does not:
   * its own finding, "shape", naming the document and why. */
  add_item(st, "r2", "done", 0);
  json_t *owned = J("{\"$set\":{\"owner\":\"w9\"}}"),
         *f2 = J("{\"_id\":\"r2\"}");
  CHECK_RC(dtx_store_update(st, "kit_items", f2, owned, &by, NULL), 0);
  json_array_clear(a.findings);
  CHECK_RC(dtx__audit_load(&a, "kit_items", &map), 0);
  CHECKF(json_array_size(a.findings) == 2 &&
             dtx__str_is(json_array_get(a.findings, 1), "kind", "shape") &&
             dtx__str_is(json_array_get(a.findings, 1), "detail",
                         "kit_items r2: a done item has an owner"),
         "%s", JS(a.findings));
  json_decref(map);
  json_decref(owned);
  json_decref(f2);
  json_decref(a.report);
  json_decref(a.part);
  json_decref(a.findings);
  json_decref(bad);
  json_decref(f);
  dtx_store_close(st);
}

/* The audit runs each pattern's shape checks on every store: a transfer
 * forced in (bypass) committed with a reason is a "shape" finding, and
 * the audit goes on (exit 5, never an abort). */
static void test_shape_audit(void) {
  dtx_store_t *st = open_fresh();
  dtx_t_drop_transfers(st);
  json_t *tx = J("{\"_id\":\"ts1\",\"from\":\"a\",\"to\":\"b\","
                 "\"amount\":5,\"state\":\"succeeded\",\"reason\":"
                 "\"canceled\",\"owner\":\"w\",\"lease_until\":0,"
                 "\"epoch\":1,\"created\":1,\"updated\":1}"),
         *rep = NULL;
  dtx_insert_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx__kit_ensure(st, &dtx__transfer_pattern), 0);
  CHECK_RC(dtx_store_insert_ex(st, DTX_TRANSFERS, tx, &by, NULL), 0);
  CHECK_RC(dtx_audit(st, 0, &rep), DTX_EAUDIT);
  const json_t *fd;
  size_t i, shape = 0;
  json_array_foreach(json_object_get(rep, "findings"), i, fd)
    shape += dtx__str_is(fd, "kind", "shape") &&
             dtx__str_is(fd, "detail", "transfers ts1: state succeeded has "
                         "a reason");
  CHECKF(shape == 1, "%s", JS(rep));
  json_decref(rep);
  json_decref(tx);
  dtx_t_drop_transfers(st);
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

/* dtx__pack builds what json_pack builds, for every format the step
 * builders use; refuses a NULL s/o/O (null with '?') and invalid UTF-8;
 * and releases every o argument on error, also those after the failure. */
static void test_pack(void) {
  json_t *x = json_pack("{s:i}", "x", 1);
  struct {
    json_t *got, *want;
    const char *what;
  } t[] = {
      {dtx__pack("{s:s,s:{s:{s:s,s:s,s:I}}}", "_id", "a1", "pending",
                 "$elemMatch", "tx", "t1", "op", "debit", "amount", (json_int_t)-417),
       json_pack("{s:s,s:{s:{s:s,s:s,s:I}}}", "_id", "a1", "pending",
                 "$elemMatch", "tx", "t1", "op", "debit", "amount", (json_int_t)-417),
       "nested objects"},
      {dtx__pack("{s:O, s:[{s:s,s:I}, n, b, i], s:o}", "o", x, "arr", "tx",
                 "t", "n", (json_int_t)INT64_MAX, 1, -7, "s", json_true()),
       json_pack("{s:O, s:[{s:s,s:I}, n, b, i], s:o}", "o", x, "arr", "tx",
                 "t", "n", (json_int_t)INT64_MAX, 1, -7, "s", json_true()),
       "arrays, O, o, n, b, i"},
      {dtx__pack("{s:s?,s:o?,s:O?}", "a", NULL, "b", NULL, "c", NULL),
       json_pack("{s:s?,s:o?,s:O?}", "a", NULL, "b", NULL, "c", NULL),
       "nullable"},
      {dtx__pack("[]"), json_pack("[]"), "empty array"},
      {dtx__pack("{}"), json_pack("{}"), "empty object"},
      {dtx__pack("{s:s}", "k\xc3\xa9", "\xe2\x82\xac"),
       json_pack("{s:s}", "k\xc3\xa9", "\xe2\x82\xac"), "UTF-8"},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    CHECKF(t[i].got && t[i].want && json_equal(t[i].got, t[i].want),
           "%s: %s against %s", t[i].what, JS(t[i].got), JS(t[i].want));
    json_decref(t[i].got);
    json_decref(t[i].want);
  }
  /* Key order is kept, as json_pack keeps it (documents are compared
   * order-sensitively). */
  json_t *o = dtx__pack("{s:i,s:i,s:i}", "z", 1, "a", 2, "m", 3);
  char *txt = json_dumps(o, JSON_COMPACT);
  CHECKF(txt && strcmp(txt, "{\"z\":1,\"a\":2,\"m\":3}") == 0, "%s", txt);
  free(txt);
  json_decref(o);
  /* Refused: NULL without '?', invalid UTF-8 in a value or a key. */
  CHECK(dtx__pack("{s:s}", "a", NULL) == NULL);
  CHECK(dtx__pack("{s:O}", "a", NULL) == NULL);
  CHECK(dtx__pack("[s]", "\xc3\x28") == NULL);
  CHECK(dtx__pack("{s:i}", "\xff", 1) == NULL);
  /* o is stolen on error too: before and after the failing value. */
  json_t *a = json_object(), *b = json_object();
  json_incref(a);
  json_incref(b);
  CHECK(dtx__pack("{s:o,s:s,s:o}", "a", a, "bad", NULL, "b", b) == NULL);
  CHECKF(a->refcount == 1 && b->refcount == 1, "refcounts %zu %zu",
         a->refcount, b->refcount);
  json_decref(a);
  json_decref(b);
  json_decref(x);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:kit.db";
  /* kit.once fails its first arrival; kit.always every one; kit.late (and
   * the batched kit.late_a, _b) its first, after the deadline passed. */
  setenv("DOCTX_FAULT",
         "kit.once:error,kit.always:error:1,kit.always:error:2,"
         "kit.always:error:3,kit.always:error:4,kit.late:error,"
         "kit.late_a:error,kit.late_b:error,"
         "kit.claim_err:error,kit.claim_lost:lost",
         1);
  TEST_RUN(test_claim_next);
  TEST_RUN(test_fencing_and_takeover);
  TEST_RUN(test_claim_many);
  TEST_RUN(test_claim_many_reads_little);
  TEST_RUN(test_transfer_claim_reads_little);
  TEST_RUN(test_claim_many_race);
  TEST_RUN(test_claim_many_takeover_and_faults);
  TEST_RUN(test_retry_and_deadline);
  TEST_RUN(test_list_paging);
  TEST_RUN(test_keyset_paging);
  TEST_RUN(test_indexes_per_store);
  TEST_RUN(test_ensure_after_drop);
  TEST_RUN(test_rules);
  TEST_RUN(test_shape_audit);
  TEST_RUN(test_account_zero_value);
  TEST_RUN(test_tally);
  TEST_RUN(test_pack);
  TEST_RUN(test_registry);
  return TEST_DONE();
}
