/* multi.c -- multi-document transactions (src/txn/multi/,
 * docs/transactions.md) through the public C API on a real store:
 *  - options checked before anything is written (INT64_MAX durations);
 *  - reads see the transaction's own writes; plain reads see committed
 *    bodies only; a snapshot reader keeps its snapshot while a writer
 *    commits (the previous version kept on the document);
 *  - the 1PC path writes no record; the 2PC path writes one;
 *  - write skew (two doctors on call) happens under snapshot, by hand,
 *    and is refused under serializable;
 *  - a transaction that crashed after its intents (a child process at
 *    txn.commit) leaves intents that refuse plain updates and deletes,
 *    whose outcome is unknown under the lease and aborted after it, which
 *    readers clear; recover and audit then leave a clean store;
 *  - a second attempt of one id in one process, while the first's record
 *    is pending, meets "the id is taken" (never the first's record);
 *  - plain writes may not change a record, the clock or _txn;
 *  - recovery examines no document when nothing is left to finish (20
 *    finished records, 320 documents); a plain $set racing a 1PC commit
 *    is kept or is a conflict; serializable refuses write skew over
 *    absent documents and a phantom; a collected record's outcome is
 *    unknown, never "aborted";
 *  - the bank (multi/bank.c, a file of its own to keep this one short).
 *
 * usage: txn_multi STORE-URI   (the collections it uses are dropped first) */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "doc/doc.h"
#include "store/store.h" /* dtx__docs_examined */
#include "txn/multi/multi.h" /* the horizon, dtx__txn_meta */
#include "testlib.h"
#include "multi/multi_test.h" /* the bank: multi/bank.c */

const char *uri; /* multi_test.h */
static const char *self_path;

void drop_all(dtx_store_t *st) {
  static const char *const colls[] = {"txn_records", "txn_clock", "mt_docs",
                                      "mt_acct", "mt_oncall", NULL};
  for (int i = 0; colls[i]; i++)
    dtx_store_drop_collection_ex(st, colls[i], &(dtx_drop_opts_t){1});
}

static int64_t count(dtx_store_t *st, const char *coll) {
  int64_t n = -1;
  CHECK_RC(dtx_store_count(st, coll, NULL, &n), 0);
  return n;
}

static json_t *plain_get(dtx_store_t *st, const char *coll, const char *id) {
  json_t *arr = NULL, *f = json_pack("{s:s}", "_id", id);
  CHECK_RC(dtx_store_find(st, coll, f, NULL, &arr), 0);
  json_decref(f);
  json_t *d = json_incref(json_array_get(arr, 0));
  json_decref(arr);
  return d;
}

int64_t num(const json_t *d, const char *k) {
  return json_integer_value(json_object_get(d, k));
}

static void test_options(void) {
  dtx_txn_t *t = NULL;
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  static const dtx_txn_opts_t bad[] = {
      {.isolation = 2},
      {.lease_ms = -1},
      {.lease_ms = INT64_MAX},
      {.deadline_ms = INT64_MAX},
      {.deadline_ms = -5},
      {.id = ""},
      {.id = "a b"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_RC(dtx_txn_opts_check(&bad[i]), DTX_EINVAL);
    CHECK_RC(dtx_txn_begin(st, &bad[i], &t), DTX_EINVAL);
    CHECK(t == NULL);
  }
  CHECK(count(st, "txn_clock") == 0); /* nothing written */
  CHECK_RC(dtx_txn_opts_check(NULL), 0);
  /* A pattern's collections (the records and the clock too) are not a
   * transaction's to read or write: its steps there would pass their
   * plain-write rules (a script could commit another transaction's
   * record).  A body with a top-level '$' name could never roll forward. */
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  json_t *u = json_pack("{s:{s:s}}", "$set", "state", "committed"),
         *f = json_pack("{s:s}", "_id", "x"), *o = NULL;
  json_t *dollar = json_pack("{s:s,s:i}", "_id", "d", "$x", 1);
  CHECK_RC(dtx_txn_update(t, "txn_records", f, u, 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_txn_insert(t, "txn_clock", f), DTX_EINVAL);
  CHECK_RC(dtx_txn_delete(t, "jobs", f, NULL), DTX_EINVAL);
  CHECK_RC(dtx_txn_find_one(t, "txn_records", f, &o), DTX_EINVAL);
  CHECK_RC(dtx_txn_insert(t, "mt_docs", dollar), DTX_EINVAL);
  CHECK_RC(dtx_store_insert(st, "mt_docs", dollar, NULL), 0); /* plainly */
  json_t *inc = json_pack("{s:{s:i}}", "$inc", "n", 1);
  json_object_set_new(f, "_id", json_string("d"));
  CHECK_RC(dtx_txn_update(t, "mt_docs", f, inc, 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  CHECK(count(st, "txn_records") == 0);
  json_decref(u);
  json_decref(f);
  json_decref(dollar);
  json_decref(inc);
  dtx_store_close(st);
}

static void test_reads_and_plain(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  dtx_txn_t *t = NULL, *r = NULL;
  json_t *d = NULL, *a = J("{\"_id\":\"a\",\"n\":1}");
  CHECK_RC(dtx_store_insert(st, "mt_docs", a, NULL), 0);
  json_decref(a);
  /* A reader that began before the writer. */
  CHECK_RC(dtx_txn_begin(st, NULL, &r), 0);
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  json_t *f = J("{\"_id\":\"a\"}"), *u = J("{\"$inc\":{\"n\":10}}");
  int matched = 0;
  CHECK_RC(dtx_txn_update(t, "mt_docs", f, u, 0, &matched), 0);
  CHECK(matched == 1);
  json_t *b = J("{\"_id\":\"b\",\"n\":2}");
  CHECK_RC(dtx_txn_insert(t, "mt_docs", b), 0);
  CHECK_RC(dtx_txn_insert(t, "mt_docs", b), DTX_EDUPKEY);
  json_decref(b);
  CHECK_RC(dtx_txn_find_one(t, "mt_docs", f, &d), 0); /* its own write */
  CHECK(num(d, "n") == 11 && !json_object_get(d, "_txn"));
  json_decref(d);
  json_t *all = NULL, *gt = J("{\"n\":{\"$gte\":2}}");
  CHECK_RC(dtx_txn_find(t, "mt_docs", gt, 10, &all), 0);
  CHECK(json_array_size(all) == 2);
  json_decref(all);
  d = plain_get(st, "mt_docs", "a"); /* nothing stored yet */
  CHECK(num(d, "n") == 1);
  json_decref(d);
  CHECK_RC(dtx_txn_commit(t), 0);
  CHECK_RC(dtx_txn_commit(t), DTX_ESTATE);
  dtx_txn_free(t);
  CHECK(count(st, "txn_records") == 1); /* two documents: 2PC */
  d = plain_get(st, "mt_docs", "a");
  CHECK(num(d, "n") == 11);
  json_decref(d);
  d = plain_get(st, "mt_docs", "b");
  CHECK(d && num(d, "n") == 2);
  json_decref(d);
  /* The older reader keeps its snapshot: a as it was, b absent. */
  CHECK_RC(dtx_txn_find_one(r, "mt_docs", f, &d), 0);
  CHECK(d && num(d, "n") == 1);
  json_decref(d);
  json_t *fb = J("{\"_id\":\"b\"}");
  CHECK_RC(dtx_txn_find_one(r, "mt_docs", fb, &d), 0);
  CHECK(d == NULL);
  CHECK_RC(dtx_txn_find(r, "mt_docs", gt, 10, &all), 0);
  CHECK(json_array_size(all) == 0);
  json_decref(all);
  /* Its write based on the old version loses (first committer wins). */
  CHECK_RC(dtx_txn_update(r, "mt_docs", f, u, 0, NULL), 0);
  CHECK_RC(dtx_txn_commit(r), DTX_ECONFLICT);
  dtx_txn_free(r);
  /* Deleted in a transaction: gone for transactions, a tombstone for
   * plain readers. */
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  CHECK_RC(dtx_txn_delete(t, "mt_docs", fb, &matched), 0);
  CHECK(matched == 1);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  CHECK_RC(dtx_txn_find_one(t, "mt_docs", fb, &d), 0);
  CHECK(d == NULL);
  dtx_txn_free(t);
  json_decref(f);
  json_decref(fb);
  json_decref(u);
  json_decref(gt);
  dtx_store_close(st);
}

static void test_one_pc(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  dtx_txn_t *t = NULL;
  json_t *f = J("{\"_id\":\"x\"}"), *u = J("{\"$set\":{\"v\":1}}");
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  CHECK_RC(dtx_txn_update(t, "mt_docs", f, u, 1, NULL), 0); /* upsert */
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  CHECK(count(st, "txn_records") == 0); /* one document: no record */
  json_t *d = plain_get(st, "mt_docs", "x");
  CHECK(d && num(d, "v") == 1);
  json_decref(d);
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  json_t *u2 = J("{\"$inc\":{\"v\":1}}");
  CHECK_RC(dtx_txn_update(t, "mt_docs", f, u2, 0, NULL), 0);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  CHECK(count(st, "txn_records") == 0);
  d = plain_get(st, "mt_docs", "x");
  CHECK(d && num(d, "v") == 2);
  json_decref(d);
  /* A caller-chosen id always gets a record, so its outcome is known. */
  dtx_txn_opts_t o = {.id = "one-pc-with-id"};
  int out = -1;
  CHECK_RC(dtx_txn_begin(st, &o, &t), 0);
  CHECK_RC(dtx_txn_update(t, "mt_docs", f, u2, 0, NULL), 0);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  CHECK_RC(dtx_txn_outcome(st, "one-pc-with-id", &out), 0);
  CHECK(out == DTX_TXN_COMMITTED);
  CHECK_RC(dtx_txn_outcome(st, "never-ran", &out), 0); /* fenced */
  CHECK(out == DTX_TXN_ABORTED);
  o.id = "never-ran";
  CHECK_RC(dtx_txn_begin(st, &o, &t), 0);
  CHECK_RC(dtx_txn_update(t, "mt_docs", f, u2, 0, NULL), 0);
  CHECK_RC(dtx_txn_commit(t), DTX_ECONFLICT); /* the fence holds */
  dtx_txn_free(t);
  json_decref(f);
  json_decref(u);
  json_decref(u2);
  dtx_store_close(st);
}

/* Two doctors on call; each goes off call if the other is still on. */
static int go_off(dtx_txn_t *t, const char *me, const char *other) {
  json_t *fo = json_pack("{s:s}", "_id", other), *fm =
      json_pack("{s:s}", "_id", me), *d = NULL, *u = J("{\"$set\":{\"on\":false}}");
  int rc = dtx_txn_find_one(t, "mt_oncall", fo, &d);
  if (rc == 0 && d && json_is_true(json_object_get(d, "on")))
    rc = dtx_txn_update(t, "mt_oncall", fm, u, 0, NULL);
  json_decref(d);
  json_decref(fo);
  json_decref(fm);
  json_decref(u);
  return rc;
}

static int on_call(dtx_store_t *st) {
  json_t *arr = NULL, *f = J("{\"on\":true}");
  CHECK_RC(dtx_store_find(st, "mt_oncall", f, NULL, &arr), 0);
  int n = (int)json_array_size(arr);
  json_decref(arr);
  json_decref(f);
  return n;
}

static void test_write_skew(void) {
  dtx_store_t *st = dtx_t_open(uri);
  for (int iso = DTX_TXN_SNAPSHOT; iso <= DTX_TXN_SERIALIZABLE; iso++) {
    drop_all(st);
    json_t *docs = J("[{\"_id\":\"alice\",\"on\":true},"
                     "{\"_id\":\"bob\",\"on\":true}]");
    CHECK_RC(dtx_store_insert_many(st, "mt_oncall", docs, NULL, NULL), 0);
    json_decref(docs);
    dtx_txn_opts_t o = {.isolation = iso};
    dtx_txn_t *a = NULL, *b = NULL;
    CHECK_RC(dtx_txn_begin(st, &o, &a), 0);
    CHECK_RC(dtx_txn_begin(st, &o, &b), 0);
    /* Interleaved by hand: both read, then both write, then commit. */
    CHECK_RC(go_off(a, "alice", "bob"), 0);
    CHECK_RC(go_off(b, "bob", "alice"), 0);
    CHECK_RC(dtx_txn_commit(a), 0);
    int rc = dtx_txn_commit(b);
    if (iso == DTX_TXN_SNAPSHOT) {
      CHECK_RC(rc, 0); /* write skew: documented under snapshot */
      CHECK(on_call(st) == 0);
    } else {
      CHECK_RC(rc, DTX_ECONFLICT);
      CHECK(on_call(st) == 1);
    }
    dtx_txn_free(a);
    dtx_txn_free(b);
  }
  dtx_store_close(st);
}

/* The snapshot is the clock READ at begin, not ticked ("Timestamps"):
 * a transaction begun after a commit returned must see it (S >= C, T4),
 * one begun before must not.  A wrong snapshot (the value read minus
 * one, or a value cached before the commit) reads the previous version
 * `_txn.p` here and fails; so does a commit whose timestamp is not above
 * every snapshot already read. */
static int64_t snap_n(dtx_store_t *st, dtx_txn_t *t, const char *id) {
  json_t *f = json_pack("{s:s}", "_id", id), *d = NULL;
  int64_t n = -1;
  int rc = dtx_txn_find_one(t, "mt_docs", f, &d);
  if (rc == 0 && d)
    n = num(d, "n");
  (void)st;
  json_decref(d);
  json_decref(f);
  return n;
}

static void test_snapshot_clock(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  json_t *fx = J("{\"_id\":\"x\"}"), *fy = J("{\"_id\":\"y\"}"),
         *inc = J("{\"$inc\":{\"n\":1}}");
  for (int i = 1; i <= 4; i++) {
    dtx_txn_t *old = NULL, *t = NULL, *r = NULL;
    CHECK_RC(dtx_txn_begin(st, NULL, &old), 0); /* before the commit */
    CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
    CHECK_RC(dtx_txn_update(t, "mt_docs", fx, inc, 1, NULL), 0);
    if (i % 2) /* odd: two documents (the record path); even: 1PC */
      CHECK_RC(dtx_txn_update(t, "mt_docs", fy, inc, 1, NULL), 0);
    CHECK_RC(dtx_txn_commit(t), 0);
    dtx_txn_free(t);
    CHECK_RC(dtx_txn_begin(st, NULL, &r), 0); /* after it returned */
    CHECKF(snap_n(st, r, "x") == i, "round %d: a snapshot taken after the "
           "commit reads x.n %lld", i, (long long)snap_n(st, r, "x"));
    CHECK(snap_n(st, r, "y") == (i + 1) / 2);
    CHECKF(snap_n(st, old, "x") == i - 1 || (i == 1 && snap_n(st, old, "x") == -1),
           "round %d: a snapshot taken before the commit sees it", i);
    CHECK_RC(dtx_txn_commit(r), 0);
    CHECK_RC(dtx_txn_commit(old), 0);
    dtx_txn_free(r);
    dtx_txn_free(old);
  }
  json_decref(fx);
  json_decref(fy);
  json_decref(inc);
  dtx_store_close(st);
}

/* ---- the engine's fixes (docs/transactions.md) ------------------------------ */

/* Recovery reads the records with work and the intents there are, never
 * every record kept nor the collections ("Recovery"): 20 finished
 * transactions beside 300 plain documents, then a pass examines none. */
static void test_recover_cost(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  json_t *many = json_array();
  for (int i = 0; i < 300; i++)
    json_array_append_new(many, json_pack("{s:i}", "n", i));
  CHECK_RC(dtx_store_insert_many(st, "mt_docs", many, NULL, NULL), 0);
  json_decref(many);
  for (int i = 0; i < 20; i++) {
    char id[32];
    snprintf(id, sizeof id, "rc%d", i);
    dtx_txn_opts_t o = {.id = id}; /* an id: a record even for one doc */
    dtx_txn_t *t = NULL;
    json_t *d = json_pack("{s:s,s:i}", "_id", id, "n", i);
    CHECK_RC(dtx_txn_begin(st, &o, &t), 0);
    CHECK_RC(dtx_txn_insert(t, "mt_docs", d), 0);
    CHECK_RC(dtx_txn_commit(t), 0);
    dtx_txn_free(t);
    json_decref(d);
  }
  CHECK(count(st, "txn_records") == 20);
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  json_t *rep = NULL;
  CHECK_RC(dtx_recover(st, &ro, &rep), 0); /* the first may set up */
  json_decref(rep);
  rep = NULL;
  dtx__docs_examined = 0;
  CHECK_RC(dtx_recover(st, &ro, &rep), 0);
  CHECKF(dtx__docs_examined < 10, "a recover pass examined %lld documents "
                                  "(20 finished records, 320 documents)",
         (long long)dtx__docs_examined);
  json_decref(rep);
  dtx_store_close(st);
}

/* A plain write between a 1PC transaction's read and its commit is never
 * overwritten unseen ("The 1PC path"): a $set of a field the transaction
 * does not touch survives it; one of a field it sets, or any change of a
 * field it read, is a conflict. */
static void test_one_pc_plain(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  json_t *docs = J("[{\"_id\":\"P\",\"n\":1,\"z\":null}]"),
         *f = J("{\"_id\":\"P\"}");
  CHECK_RC(dtx_store_insert_many(st, "mt_docs", docs, NULL, NULL), 0);
  json_decref(docs);
  /* The last two change a field read where $eq alone still matches: a
   * null removed ($eq null matches a missing field), a value made an
   * array holding it ($eq 1 matches [1]). */
  static const char *const cases[][2] = {
      {"{\"$inc\":{\"n\":1}}", "{\"$set\":{\"added\":1}}"},
      {"{\"$set\":{\"x\":5}}", "{\"$set\":{\"x\":7}}"},
      {"{\"$set\":{\"y\":1}}", "{\"$unset\":{\"z\":\"\"}}"},
      {"{\"$set\":{\"y\":1}}", "{\"$set\":{\"added\":[1]}}"},
  };
  for (int i = 0; i < 4; i++) {
    dtx_txn_t *t = NULL;
    json_t *d = NULL, *tu = J(cases[i][0]), *pu = J(cases[i][1]);
    CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
    CHECK_RC(dtx_txn_find_one(t, "mt_docs", f, &d), 0);
    json_decref(d);
    CHECK_RC(dtx_txn_update(t, "mt_docs", f, tu, 0, NULL), 0);
    CHECK_RC(dtx_store_update(st, "mt_docs", f, pu, NULL, NULL), 0);
    int rc = dtx_txn_commit(t);
    dtx_txn_free(t);
    d = plain_get(st, "mt_docs", "P");
    if (i == 0) {
      CHECK_RC(rc, 0);
      CHECKF(num(d, "added") == 1 && num(d, "n") == 2,
             "the plain $set was overwritten: %s", JS(d));
    } else {
      CHECKF(rc == DTX_ECONFLICT, "case %d: rc %d, %s", i, rc, JS(d));
      CHECKF(num(d, "x") == 7 && !json_object_get(d, "y"),
             "case %d: the plain write was overwritten or ignored: %s", i,
             JS(d));
    }
    json_decref(d);
    json_decref(tu);
    json_decref(pu);
  }
  CHECK(count(st, "txn_records") == 0); /* still one conditional update */
  json_decref(f);
  dtx_store_close(st);
}

/* Serializable closes the two gaps ("Isolation"): an absent document read
 * by _id is locked (each of two transactions reads one slot absent and
 * fills the other: write skew over absent documents), and a find by
 * predicate is validated again at commit (each finds no member of a
 * group and inserts one: a phantom).  Both commit under snapshot. */
static void test_serializable_gaps(void) {
  dtx_store_t *st = dtx_t_open(uri);
  for (int iso = DTX_TXN_SNAPSHOT; iso <= DTX_TXN_SERIALIZABLE; iso++) {
    for (int by_find = 0; by_find <= 1; by_find++) {
      drop_all(st);
      dtx_txn_opts_t o = {.isolation = iso};
      dtx_txn_t *a = NULL, *b = NULL;
      json_t *fx = J(by_find ? "{\"g\":\"w\"}" : "{\"_id\":\"X\"}");
      json_t *fy = J(by_find ? "{\"g\":\"w\"}" : "{\"_id\":\"Y\"}");
      json_t *da = J("{\"_id\":\"Y\",\"g\":\"w\"}");
      json_t *db = J("{\"_id\":\"X\",\"g\":\"w\"}"), *r = NULL;
      CHECK_RC(dtx_txn_begin(st, &o, &a), 0);
      CHECK_RC(dtx_txn_begin(st, &o, &b), 0);
      CHECK_RC(dtx_txn_find(a, "mt_docs", fx, 10, &r), 0);
      CHECK(json_array_size(r) == 0);
      json_decref(r);
      CHECK_RC(dtx_txn_find(b, "mt_docs", fy, 10, &r), 0);
      CHECK(json_array_size(r) == 0);
      json_decref(r);
      CHECK_RC(dtx_txn_insert(a, "mt_docs", da), 0);
      CHECK_RC(dtx_txn_insert(b, "mt_docs", db), 0);
      CHECK_RC(dtx_txn_commit(a), 0);
      int rc = dtx_txn_commit(b);
      if (iso == DTX_TXN_SNAPSHOT) {
        CHECK_RC(rc, 0);
        CHECK(count(st, "mt_docs") == 2);
      } else {
        CHECKF(rc == DTX_ECONFLICT, "serializable %s: rc %d",
               by_find ? "phantom" : "absent _id", rc);
        CHECK(count(st, "mt_docs") == 1);
      }
      dtx_txn_free(a);
      dtx_txn_free(b);
      json_decref(fx);
      json_decref(fy);
      json_decref(da);
      json_decref(db);
    }
  }
  /* The locks leave nothing behind: no stub, a clean audit. */
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  if (!json_is_true(json_object_get(rep, "ok")))
    CHECKF(0, "audit: %s", JS(rep));
  json_decref(rep);
  dtx_store_close(st);
}

/* A record collected after the retention is never answered "aborted"
 * ("Outcome after UNAVAILABLE"): its outcome is unknown, and stays so. */
static void test_outcome_after_gc(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  dtx_txn_opts_t o = {.id = "gc1"};
  dtx_txn_t *t = NULL;
  json_t *d = J("{\"_id\":\"G\",\"n\":1}");
  int out = -1;
  CHECK_RC(dtx_txn_outcome(st, "never1", &out), 0); /* nothing collected */
  CHECK(out == DTX_TXN_ABORTED);
  CHECK_RC(dtx_txn_begin(st, &o, &t), 0);
  CHECK_RC(dtx_txn_insert(t, "mt_docs", d), 0);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  usleep(20 * 1000);
  json_t *rep = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1,
                                                 .retention_ms = 1},
                       &rep),
           0);
  json_decref(rep);
  json_t *g = plain_get(st, "txn_records", "gc1");
  CHECKF(g == NULL, "gc1 was not collected: %s", JS(g));
  json_decref(g);
  for (int i = 0; i < 2; i++) {
    CHECK_RC(dtx_txn_outcome(st, "gc1", &out), 0);
    CHECKF(out == DTX_TXN_UNKNOWN, "a collected commit answered %d", out);
  }
  CHECK_RC(dtx_txn_outcome(st, "never1", &out), 0); /* its fence stays */
  CHECK(out == DTX_TXN_ABORTED);
  json_decref(d);
  dtx_store_close(st);
}

/* One transaction on mt_docs: a write of id (doc NULL: a delete). */
static void gc_write(dtx_store_t *st, const char *id, json_t *doc) {
  dtx_txn_t *t = NULL;
  json_t *f = json_pack("{s:s}", "_id", id);
  json_t *u = doc ? json_pack("{s:O}", "$set", doc) : NULL;
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  if (doc)
    CHECK_RC(dtx_txn_update(t, "mt_docs", f, u, 1, NULL), 0);
  else
    CHECK_RC(dtx_txn_delete(t, "mt_docs", f, NULL), 0);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  json_decref(f);
  json_decref(u);
  json_decref(doc);
}

/* The version of id was written past the horizon (a bypass write of
 * _txn.t, as if DTX__TXN_GC_AGE_MS had passed). */
static void gc_age(dtx_store_t *st, const char *id) {
  json_t *f = json_pack("{s:s}", "_id", id);
  json_t *u = json_pack("{s:{s:I}}", "$set", "_txn.t",
                        (json_int_t)(dtx__now_ms() - DTX__TXN_GC_AGE_MS - 1000));
  dtx_update_opts_t o = {.bypass_validation = 1};
  CHECK_RC(dtx_store_update(st, "mt_docs", f, u, &o, NULL), 0);
  json_decref(f);
  json_decref(u);
}

/* The horizon (T11): previous versions and tombstones whose replacement
 * is older than it are collected by recover, younger ones kept; a
 * transaction past its maximum age is refused (a conflict); a collected
 * tombstone's document does not come back to a plain reader nor to a
 * transaction; an aged intent's tombstone stays; the audit is clean and
 * a second pass examines nothing. */
static void test_gc_versions(void) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  dtx_txn_opts_t bad = {.max_age_ms = INT64_MAX};
  CHECK_RC(dtx_txn_opts_check(&bad), DTX_EINVAL);
  bad.max_age_ms = -1;
  CHECK_RC(dtx_txn_opts_check(&bad), DTX_EINVAL);
  bad.max_age_ms = DTX__TXN_MAX_AGE_MS + 1;
  CHECK_RC(dtx_txn_opts_check(&bad), DTX_EINVAL);
  const char *ids[] = {"V", "D", "Y", "L"};
  for (int i = 0; i < 4; i++)
    gc_write(st, ids[i], json_pack("{s:i}", "n", 1));
  dtx_txn_t *old = NULL;
  CHECK_RC(dtx_txn_begin(st, &(dtx_txn_opts_t){.max_age_ms = 30}, &old), 0);
  gc_write(st, "V", json_pack("{s:i}", "n", 2)); /* p: n 1 */
  gc_write(st, "D", NULL);                       /* a tombstone */
  gc_write(st, "Y", json_pack("{s:i}", "n", 2)); /* young: kept */
  gc_write(st, "L", NULL);                       /* a tombstone, locked */
  gc_age(st, "V");
  gc_age(st, "D");
  gc_age(st, "L");
  /* L's tombstone holds a lock of a pending transaction under a live
   * lease (as a serializable reader of the absent L leaves it while it
   * commits): written by hand, its record too */
  json_t *got = NULL;
  int64_t now_ms = dtx__now_ms();
  json_t *rec = json_pack(
      "{s:s,s:s,s:I,s:[{s:s,s:s,s:s}],s:b,s:b,s:s,s:I,s:I,s:I,s:I}", "_id",
      "gclock", "state", "pending", "start_ts", (json_int_t)1, "keys", "c",
      "mt_docs", "id", "L", "op", "lock", "applied", 0, "cleared", 0, "owner",
      "t", "lease_until", (json_int_t)(now_ms + 60000), "epoch",
      (json_int_t)0, "updated", (json_int_t)now_ms, "created",
      (json_int_t)now_ms);
  CHECK_RC(dtx_store_insert_ex(st, "txn_records", rec,
                                &(dtx_insert_opts_t){.bypass_validation = 1},
                                NULL),
           0);
  json_decref(rec);
  json_t *fl = J("{\"_id\":\"L\"}");
  json_t *lock = J("{\"$set\":{\"_txn.w\":{\"id\":\"gclock\",\"ts\":1,"
                   "\"op\":\"lock\"}}}");
  CHECK_RC(dtx_store_update(st, "mt_docs", fl, lock,
                            &(dtx_update_opts_t){.bypass_validation = 1}, NULL),
           0);
  json_decref(lock);
  json_t *rep = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1}, &rep),
           0);
  json_t *ran = json_object_get(
      json_object_get(json_object_get(rep, "patterns"), "txn"), "ran");
  CHECKF(dtx__int(ran, "versions_collected") == 1 &&
             dtx__int(ran, "tombstones_collected") == 1,
         "%s", JS(rep));
  json_decref(rep);
  json_t *v = plain_get(st, "mt_docs", "V"), *d = plain_get(st, "mt_docs", "D");
  json_t *y = plain_get(st, "mt_docs", "Y"), *l = plain_get(st, "mt_docs", "L");
  CHECKF(num(v, "n") == 2 && !json_object_get(dtx__txn_meta(v), "p") &&
             !json_object_get(dtx__txn_meta(v), "t") &&
             json_object_get(dtx__txn_meta(v), "v"),
         "V: %s", JS(v));
  CHECKF(d == NULL, "the tombstone D stayed: %s", JS(d));
  CHECKF(json_object_get(dtx__txn_meta(y), "p") != NULL, "Y: %s", JS(y));
  CHECKF(json_is_true(json_object_get(dtx__txn_meta(l), "del")), "L: %s",
         JS(l));
  json_decref(v);
  json_decref(d);
  json_decref(y);
  json_decref(l);
  /* the old snapshot: past its age, refused (it would have needed V's
   * previous version, D's tombstone) */
  usleep(40 * 1000);
  json_t *fv = J("{\"_id\":\"V\"}"), *fd = J("{\"_id\":\"D\"}");
  CHECK_RC(dtx_txn_find_one(old, "mt_docs", fd, &got), DTX_ECONFLICT);
  dtx_txn_free(old);
  /* D does not come back: not to a plain reader, nor to a transaction */
  json_t *arr = NULL, *live = J("{\"_txn.del\":{\"$ne\":true}}");
  CHECK_RC(dtx_store_find(st, "mt_docs", live, NULL, &arr), 0);
  CHECKF(json_array_size(arr) == 2, "live: %s", JS(arr)); /* V, Y */
  json_decref(arr);
  dtx_txn_t *now = NULL;
  CHECK_RC(dtx_txn_begin(st, NULL, &now), 0);
  CHECK_RC(dtx_txn_find_one(now, "mt_docs", fd, &got), 0);
  CHECK(got == NULL);
  CHECK_RC(dtx_txn_find_one(now, "mt_docs", fv, &got), 0);
  CHECK(num(got, "n") == 2);
  json_decref(got);
  CHECK_RC(dtx_txn_commit(now), 0);
  dtx_txn_free(now);
  /* its lease lapses: recovery aborts it, clears the lock, and L's
   * tombstone goes in the same pass; then clean */
  json_t *fr = J("{\"_id\":\"gclock\"}"), *lapse = J("{\"$set\":{\"lease_until\":0}}");
  CHECK_RC(dtx_store_update(st, "txn_records", fr, lapse,
                            &(dtx_update_opts_t){.bypass_validation = 1}, NULL),
           0);
  json_decref(fr);
  json_decref(lapse);
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1}, &rep),
           0);
  json_decref(rep);
  l = plain_get(st, "mt_docs", "L");
  CHECKF(l == NULL, "L: %s", JS(l));
  json_decref(l);
  dtx__docs_examined = 0;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1}, &rep),
           0);
  CHECKF(dtx__docs_examined < 10, "a pass examined %lld documents",
         (long long)dtx__docs_examined);
  json_decref(rep);
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  CHECKF(json_is_true(json_object_get(rep, "ok")), "audit: %s", JS(rep));
  json_decref(rep);
  json_decref(fv);
  json_decref(fd);
  json_decref(fl);
  json_decref(live);
  dtx_store_close(st);
}

/* The child of test_crashed: a 2PC transaction that dies at txn.commit,
 * after its intents, before its commit point. */
static int crash_child(void) {
  dtx_store_t *st = dtx_t_open(uri);
  dtx_txn_opts_t o = {.id = "crashed", .lease_ms = 400};
  dtx_txn_t *t = NULL;
  json_t *fa = J("{\"_id\":\"A\"}"), *fb = J("{\"_id\":\"B\"}"),
         *u = J("{\"$inc\":{\"bal\":5}}");
  if (dtx_txn_begin(st, &o, &t) || dtx_txn_update(t, "mt_acct", fa, u, 0, NULL) ||
      dtx_txn_update(t, "mt_acct", fb, u, 0, NULL))
    return 3;
  dtx_txn_commit(t); /* DOCTX_FAULT=txn.commit:crash */
  return 4;
}

/* The child of test_same_id: two attempts of one id in one process (as
 * doctxd's workers serve a client's resend), begun at one snapshot.  The
 * first's commit point fails (DOCTX_FAULT=txn.commit:error, each try):
 * its record stays pending under its lease, its intents on A and B.  The
 * second moves 50 from A and inserts L: it must meet "the id is taken",
 * not take the first's record and intents for its own (it committed a
 * mix of both, with L unnamed by the record).  Exit 0: refused; 5: it
 * committed. */
static int same_id_child(void) {
  dtx_store_t *st = dtx_t_open(uri);
  dtx_txn_opts_t o = {.id = "same-id", .lease_ms = 400};
  dtx_txn_t *a = NULL, *b = NULL;
  json_t *fa = J("{\"_id\":\"A\"}"), *fb = J("{\"_id\":\"B\"}"),
         *m10 = J("{\"$inc\":{\"bal\":-10}}"),
         *p10 = J("{\"$inc\":{\"bal\":10}}"),
         *m50 = J("{\"$inc\":{\"bal\":-50}}"),
         *l = J("{\"_id\":\"L\",\"amount\":50}");
  int code = 3;
  if (dtx_txn_begin(st, &o, &a) == 0 && dtx_txn_begin(st, &o, &b) == 0 &&
      dtx_txn_update(a, "mt_acct", fa, m10, 0, NULL) == 0 &&
      dtx_txn_update(a, "mt_acct", fb, p10, 0, NULL) == 0 &&
      dtx_txn_insert(b, "mt_acct", l) == 0 &&
      dtx_txn_update(b, "mt_acct", fa, m50, 0, NULL) == 0) {
    if (dtx_txn_commit(a) == 0) {
      code = 4; /* the fault did not stop it */
    } else {
      int rc = dtx_txn_commit(b);
      code = rc == DTX_ECONFLICT ? 0 : rc == 0 ? 5 : 6;
    }
  }
  dtx_txn_free(a);
  dtx_txn_free(b);
  json_decref(fa);
  json_decref(fb);
  json_decref(m10);
  json_decref(p10);
  json_decref(m50);
  json_decref(l);
  dtx_store_close(st);
  return code;
}

/* A fresh store whose mt_acct holds A and B with balances a and b. */
static dtx_store_t *two_accounts(int a, int b) {
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  json_t *docs = json_pack("[{s:s,s:i},{s:s,s:i}]", "_id", "A", "bal", a,
                           "_id", "B", "bal", b);
  CHECK_RC(dtx_store_insert_many(st, "mt_acct", docs, NULL, NULL), 0);
  json_decref(docs);
  return st;
}

/* Runs this binary as the child mode under DOCTX_FAULT=fault; its wait
 * status (bounded by main's alarm). */
static int run_child(const char *mode, const char *fault) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid < 0)
    return -1;
  if (pid == 0) {
    setenv("DOCTX_FAULT", fault, 1);
    execl(self_path, self_path, uri, mode, (char *)NULL);
    _exit(2);
  }
  int status = -1;
  CHECK(waitpid(pid, &status, 0) == pid);
  return status;
}

static void test_same_id(void) {
  dtx_store_t *st = two_accounts(100, 0);
  /* every try of the kit's step (it retries an error) */
  int status = run_child("same-id-child",
                         "txn.commit:error:1,txn.commit:error:2,"
                         "txn.commit:error:3,txn.commit:error:4");
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
         "the second attempt of one id: child status %d (5: it committed "
         "under the first's record)",
         status);
  usleep(500 * 1000); /* the first's lease lapses: recovery aborts it */
  json_t *rep = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1}, &rep),
           0);
  json_decref(rep);
  int out = -1;
  CHECK_RC(dtx_txn_outcome(st, "same-id", &out), 0);
  CHECK(out == DTX_TXN_ABORTED);
  json_t *a = plain_get(st, "mt_acct", "A"), *b = plain_get(st, "mt_acct", "B"),
         *l = plain_get(st, "mt_acct", "L");
  CHECKF(num(a, "bal") == 100 && num(b, "bal") == 0 && !l,
         "A %s, B %s, L %s", JS(a), JS(b), JS(l));
  json_decref(a);
  json_decref(b);
  json_decref(l);
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  CHECKF(json_is_true(json_object_get(rep, "ok")), "audit: %s", JS(rep));
  json_decref(rep);
  dtx_store_close(st);
}

static void test_crashed(void) {
  dtx_store_t *st = two_accounts(10, 10);
  int status = run_child("crash-child", "txn.commit:crash");
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 137, "child status %d",
         status);
  /* Intents are there: plain writes are refused; plain reads see the
   * committed body. */
  json_t *fa = J("{\"_id\":\"A\"}"), *u = J("{\"$set\":{\"bal\":99}}");
  CHECK_RC(dtx_store_update(st, "mt_acct", fa, u, NULL, NULL),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_delete(st, "mt_acct", fa, 0, NULL), DTX_EVALIDATION);
  json_t *d = plain_get(st, "mt_acct", "A");
  CHECK(num(d, "bal") == 10);
  json_decref(d);
  int out = -1;
  CHECK_RC(dtx_txn_outcome(st, "crashed", &out), 0);
  CHECK(out == DTX_TXN_UNKNOWN); /* its lease lives */
  usleep(500 * 1000);
  /* A reader meets the intent and resolves it: the lease lapsed. */
  dtx_txn_t *t = NULL;
  CHECK_RC(dtx_txn_begin(st, NULL, &t), 0);
  CHECK_RC(dtx_txn_find_one(t, "mt_acct", fa, &d), 0);
  CHECK(d && num(d, "bal") == 10);
  json_decref(d);
  dtx_txn_free(t);
  CHECK_RC(dtx_txn_outcome(st, "crashed", &out), 0);
  CHECK(out == DTX_TXN_ABORTED);
  CHECK_RC(dtx_store_update(st, "mt_acct", fa, u, NULL, NULL), 0);
  /* B's intent is left to recovery; then the audit is clean. */
  json_t *rep = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = -1}, &rep),
           0);
  json_decref(rep);
  rep = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  if (!json_is_true(json_object_get(rep, "ok")))
    CHECKF(0, "audit: %s", JS(rep));
  json_decref(rep);
  json_t *fb = J("{\"_id\":\"B\"}"), *u2 = J("{\"$inc\":{\"bal\":1}}");
  CHECK_RC(dtx_store_update(st, "mt_acct", fb, u2, NULL, NULL), 0);
  json_decref(fb);
  json_decref(u2);
  json_decref(fa);
  json_decref(u);
  dtx_store_close(st);
}

/* No plain write changes a record or the clock, nor forges _txn (T8);
 * the rules say so on every backend.  A table: collection, filter,
 * update (NULL: a delete; "!" prefix: an insert of the filter).  The
 * updates are $inc, never a $set of a value that may already be there (a
 * no-op is no change, and the clock's value depends on how many ticks
 * the commit took). */
static void test_plain_tamper(void) {
  static const struct {
    const char *coll, *filter, *update;
  } rows[] = {
      {"txn_records", "{\"_id\":\"tt\"}", "{\"$set\":{\"state\":\"aborted\"}}"},
      {"txn_records", "{\"_id\":\"tt\"}", "{\"$inc\":{\"commit_ts\":1}}"},
      {"txn_records", "{\"_id\":\"tt\"}", "{\"$set\":{\"keys\":[]}}"},
      {"txn_records", "{\"_id\":\"tt\"}", NULL},
      {"txn_clock", "{\"_id\":\"clock\"}", "{\"$inc\":{\"ts\":1}}"},
      {"txn_clock", "{\"_id\":\"clock\"}", NULL},
      {"mt_docs", "{\"_id\":\"p\"}", "{\"$inc\":{\"_txn.v\":1}}"},
      {"mt_docs", "{\"_id\":\"p\"}", "{\"$unset\":{\"_txn\":\"\"}}"},
      {"mt_docs", "{\"_id\":\"q\",\"_txn\":{\"v\":1}}", "!"},
      /* a tombstone (a deleted by txn d2): no body comes back plainly */
      {"mt_docs", "{\"_id\":\"a\"}", "{\"$set\":{\"n\":100}}"},
      {"mt_docs", "{\"_id\":\"a\"}", NULL},
  };
  dtx_store_t *st = dtx_t_open(uri);
  drop_all(st);
  dtx_txn_t *t = NULL;
  json_t *a = J("{\"_id\":\"a\",\"n\":1}"), *b = J("{\"_id\":\"p\",\"n\":1}");
  dtx_txn_opts_t o = {.id = "tt"};
  CHECK_RC(dtx_txn_begin(st, &o, &t), 0);
  CHECK_RC(dtx_txn_insert(t, "mt_docs", a), 0);
  CHECK_RC(dtx_txn_insert(t, "mt_docs", b), 0);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  json_decref(a);
  json_decref(b);
  dtx_txn_opts_t o2 = {.id = "d2"};
  a = J("{\"_id\":\"a\"}");
  CHECK_RC(dtx_txn_begin(st, &o2, &t), 0);
  CHECK_RC(dtx_txn_delete(t, "mt_docs", a, NULL), 0);
  CHECK_RC(dtx_txn_commit(t), 0);
  dtx_txn_free(t);
  json_decref(a);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    json_t *f = J(rows[i].filter), *u = NULL;
    int rc;
    if (!rows[i].update) {
      rc = dtx_store_delete(st, rows[i].coll, f, 0, NULL);
    } else if (rows[i].update[0] == '!') {
      rc = dtx_store_insert(st, rows[i].coll, f, NULL);
    } else {
      u = J(rows[i].update);
      rc = dtx_store_update(st, rows[i].coll, f, u, NULL, NULL);
    }
    CHECKF(rc == DTX_EVALIDATION, "row %zu (%s %s): rc %d", i, rows[i].coll,
           rows[i].filter, rc);
    json_decref(f);
    json_decref(u);
  }
  int out = -1;
  CHECK_RC(dtx_txn_outcome(st, "tt", &out), 0);
  CHECK(out == DTX_TXN_COMMITTED);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:multi.db";
  self_path = argv[0];
  if (argc > 2 && strcmp(argv[2], "crash-child") == 0)
    return crash_child();
  if (argc > 2 && strcmp(argv[2], "same-id-child") == 0)
    return same_id_child();
  alarm(120); /* a hang is a failure, not a stuck CI step */
  TEST_RUN(test_options);
  TEST_RUN(test_reads_and_plain);
  TEST_RUN(test_one_pc);
  TEST_RUN(test_write_skew);
  TEST_RUN(test_snapshot_clock);
  TEST_RUN(test_recover_cost);
  TEST_RUN(test_one_pc_plain);
  TEST_RUN(test_serializable_gaps);
  TEST_RUN(test_outcome_after_gc);
  TEST_RUN(test_gc_versions);
  TEST_RUN(test_crashed);
  TEST_RUN(test_same_id);
  TEST_RUN(test_plain_tamper);
  TEST_RUN(test_bank);
  return TEST_DONE();
}
