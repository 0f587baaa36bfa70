/* conf_fence.c -- conformance: fenced writes (doctx.h, "Fenced writes").
 *
 * A modify call fenced by (lock name, token) applies only when no larger
 * token of that lock has written the document, and records its token in
 * _fence.NAME in the same atomic step; a stale one is DTX_EFENCED and
 * changes nothing.  FENCED (the filter matched, the token was refused) is
 * told apart from NOMATCH (the filter did not match).  Every modify call
 * takes the option: update (one, many, upsert), find_one_and_update,
 * find_one_and_delete, delete (one, many).  _fence is reserved: user
 * updates cannot write it, a replacement keeps it, an upsert's filter does
 * not seed it.  Several processes racing fenced writes with mixed tokens
 * leave a log in which the accepted tokens never go down.
 *
 * Fence tombstones: a delete keeps the deleted document's record under
 * its _id, unseen by every read, count, index and scan; the next document
 * of that _id takes it over, and a fenced upsert older than it is FENCED
 * -- also when the stale writer was paused before (at fence.write, every
 * backend) or inside (at redis.unique_claimed, between its decision and
 * its compare-and-set) its write.  A drop forgets them. */
#include "conf.h"

#include "store/store.h" /* dtx__store_fence_records */
#include "util/fault.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static json_t *doc_of(const char *c, const char *id) {
  char f[160];
  snprintf(f, sizeof f, "{'_id':'%s'}", id);
  return conf_keep(conf_get(c, JQ(f)));
}

static dtx_update_opts_t upd_fence(const char *name, int64_t token) {
  dtx_update_opts_t o = {.fence_name = name, .fence_token = token};
  return o;
}

static void check_doc(const char *c, const char *id, const char *want) {
  json_t *d = doc_of(c, id);
  CHECKF(d && json_equal(d, JQ(want)), "%s: %s, want %s", id, JS(d), want);
}

/* The core rule on update: first write records, equal and larger are
 * accepted, smaller is FENCED with both tokens named, nothing changed. */
static void test_fence_update_rule(void) {
  const char *c = conf_coll("fence_rule");
  REQUIRE(conf_seed(c, "[{'_id':'r','v':0}]") == 0);
  dtx_update_result_t res;
  dtx_update_opts_t o = upd_fence("L", 5);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), 0);
  CHECK(res.matched == 1 && res.modified == 1);
  check_doc(c, "r", "{'_id':'r','v':1,'_fence':{'L':5}}");
  /* Equal token: written again; a no-op with the same token writes
   * nothing. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':2}}"), &o, &res), 0);
  CHECK(res.modified == 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':2}}"), &o, &res), 0);
  CHECK(res.matched == 1 && res.modified == 0);
  /* A no-op under a newer token still records it. */
  o.fence_token = 7;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':2}}"), &o, &res), 0);
  CHECK(res.matched == 1 && res.modified == 1);
  check_doc(c, "r", "{'_id':'r','v':2,'_fence':{'L':7}}");
  /* Stale. */
  o.fence_token = 6;
  res.matched = 99;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':3}}"), &o, &res),
           DTX_EFENCED);
  CHECK(res.matched == 0 && res.modified == 0);
  const char *d = dtx_errdetail();
  CHECKF(strstr(d, "token 6") && strstr(d, "token 7") && strstr(d, "'L'"),
         "detail: %s", d);
  check_doc(c, "r", "{'_id':'r','v':2,'_fence':{'L':7}}");
  /* Another lock's tokens are its own. */
  dtx_update_opts_t m = upd_fence("M", 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$inc':{'v':1}}"), &m, &res), 0);
  check_doc(c, "r", "{'_id':'r','v':3,'_fence':{'L':7,'M':1}}");
  /* An unfenced write is not judged (and leaves the record alone). */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$inc':{'v':1}}"), NULL, &res), 0);
  check_doc(c, "r", "{'_id':'r','v':4,'_fence':{'L':7,'M':1}}");
  /* Filters read it. */
  CHECK(conf_count(c, JQ("{'_fence.L':{'$gte':7}}")) == 1);
}

/* FENCED only when the filter matched; NOMATCH when it did not, whatever
 * the token. */
static void test_fence_vs_nomatch(void) {
  const char *c = conf_coll("fence_nomatch");
  REQUIRE(conf_seed(c, "[{'_id':'r','v':0}]") == 0);
  dtx_update_opts_t o = upd_fence("L", 9);
  dtx_update_result_t res;
  REQUIRE(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                           JQ("{'$set':{'v':1}}"), &o, &res) == 0);
  dtx_fam_opts_t fo = {.fence_name = "L", .fence_token = 3, .return_new = 1};
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c,
                                         JQ("{'_id':'r','v':5}"),
                                         JQ("{'$set':{'v':2}}"), &fo, &out),
           DTX_ENOMATCH);
  CHECK(out == NULL);
  out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c,
                                         JQ("{'_id':'r','v':1}"),
                                         JQ("{'$set':{'v':2}}"), &fo, &out),
           DTX_EFENCED);
  CHECK(out == NULL);
  o.fence_token = 3;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'v':5}"), JQ("{'$set':{'v':2}}"),
                            &o, &res), 0);
  CHECK(res.matched == 0);
  /* Through a secondary filter (not by _id) too. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'v':1}"), JQ("{'$set':{'v':2}}"),
                            &o, &res), DTX_EFENCED);
  fo.fence_token = 10;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'v':1}"),
                                         JQ("{'$set':{'v':2}}"), &fo, &out),
           0);
  CHECKF(json_equal(out, JQ("{'_id':'r','v':2,'_fence':{'L':10}}")), "%s",
         JS(out));
  json_decref(out);
}

/* Every modify call takes the option. */
static void test_fence_every_call(void) {
  const char *c = conf_coll("fence_calls");
  REQUIRE(conf_seed(c, "[{'_id':'a','g':1,'_fence':{'L':4}},"
                       "{'_id':'b','g':1},{'_id':'c','g':1,'_fence':{'L':2}},"
                       "{'_id':'d','g':2,'_fence':{'L':8}}]") == 0);
  int64_t n = -1;
  /* delete one: stale, then current. */
  dtx_delete_opts_t del = {.fence_name = "L", .fence_token = 3};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'a'}"), &del, &n),
           DTX_EFENCED);
  CHECK(n == 0 && conf_count(c, JQ("{'_id':'a'}")) == 1);
  del.fence_token = 4;
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'a'}"), &del, &n), 0);
  CHECK(n == 1 && conf_count(c, JQ("{'_id':'a'}")) == 0);
  /* find_one_and_delete. */
  dtx_fam_opts_t fo = {.fence_name = "L", .fence_token = 7};
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'d'}"), &fo,
                                         &out),
           DTX_EFENCED);
  CHECK(out == NULL && conf_count(c, JQ("{'_id':'d'}")) == 1);
  fo.fence_token = 8;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'d'}"), &fo,
                                         &out),
           0);
  CHECKF(json_equal(out, JQ("{'_id':'d','g':2,'_fence':{'L':8}}")), "%s",
         JS(out));
  json_decref(out);
  /* update many: each document judged on its own. */
  dtx_update_opts_t um = {.many = 1, .fence_name = "L", .fence_token = 3};
  dtx_update_result_t res;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'g':1}"), JQ("{'$set':{'x':1}}"),
                            &um, &res), 0);
  CHECK(res.matched == 2 && res.modified == 2);
  check_doc(c, "b", "{'_id':'b','g':1,'x':1,'_fence':{'L':3}}");
  check_doc(c, "c", "{'_id':'c','g':1,'_fence':{'L':3},'x':1}");
  REQUIRE(conf_seed(c, "[{'_id':'e','g':1,'_fence':{'L':9}}]") == 0);
  um.fence_token = 5;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'g':1}"), JQ("{'$set':{'x':2}}"),
                            &um, &res), DTX_EFENCED);
  CHECK(conf_count(c, JQ("{'_id':'e','x':{'$exists':false}}")) == 1);
  /* delete many stops at the stale one. */
  dtx_delete_opts_t dm = {.many = 1, .fence_name = "L", .fence_token = 5};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'e'}"), &dm, &n),
           DTX_EFENCED);
  CHECK(n == 0 && conf_count(c, NULL) == 3);
  /* Upsert: the new document records the token; a filter on _fence seeds
   * nothing. */
  dtx_update_opts_t up = {.upsert = 1, .fence_name = "L", .fence_token = 2};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'u','_fence.L':{'$gt':5}}"),
                            JQ("{'$set':{'y':1}}"), &up, &res), 0);
  CHECK(res.upserted_id != NULL);
  json_decref(res.upserted_id);
  check_doc(c, "u", "{'_id':'u','y':1,'_fence':{'L':2}}");
  dtx_fam_opts_t fu = {.upsert = 1, .return_new = 1, .fence_name = "K",
                       .fence_token = 1};
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c,
                                         JQ("{'_id':'w','_fence.K':1}"),
                                         JQ("{'$set':{'y':2}}"), &fu, &out),
           0);
  CHECKF(json_equal(out, JQ("{'_id':'w','y':2,'_fence':{'K':1}}")), "%s",
         JS(out));
  json_decref(out);
  /* Unfenced upsert with a _fence filter: no record at all. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'z','_fence.K':1}"),
                            JQ("{'$set':{'y':3}}"),
                            &(dtx_update_opts_t){.upsert = 1}, &res),
           0);
  json_decref(res.upserted_id);
  check_doc(c, "z", "{'_id':'z','y':3}");
}

/* _fence is written only by fenced writes. */
static void test_fence_reserved(void) {
  const char *c = conf_coll("fence_reserved");
  REQUIRE(conf_seed(c, "[{'_id':'r','v':0,'_fence':{'L':3}}]") == 0);
  json_t *before = conf_keep(conf_find(c, NULL, NULL));
  static const char *const bad[] = {
      "{'$set':{'_fence.L':9}}",     "{'$set':{'_fence':{}}}",
      "{'$unset':{'_fence':1}}",     "{'$inc':{'_fence.L':1}}",
      "{'$max':{'_fence.L':100}}",   "{'$rename':{'_fence':'f'}}",
      "{'$rename':{'v':'_fence'}}",  "{'$rename':{'v':'_fence.L'}}",
      "{'_fence':{'L':1},'v':1}",    "{'$setOnInsert':{'_fence.L':1}}",
  };
  dtx_update_result_t res;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = dtx_store_update(conf_st, c, JQ("{'_id':'r'}"), JQ(bad[i]), NULL,
                              &res);
    CHECKF(rc == DTX_EBADUPDATE && strstr(dtx_errdetail(), "_fence"),
           "%s: %s (%s)", bad[i], dtx_errname(rc), dtx_errdetail());
    dtx_update_opts_t o = upd_fence("L", 50);
    rc = dtx_store_update(conf_st, c, JQ("{'_id':'r'}"), JQ(bad[i]), &o, &res);
    CHECKF(rc == DTX_EBADUPDATE, "%s fenced: %s", bad[i], dtx_errname(rc));
  }
  /* Fields merely named like it are anyone's. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'_fences':1}}"), NULL, &res), 0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$unset':{'_fences':1}}"), NULL, &res), 0);
  json_t *now = conf_keep(conf_find(c, NULL, NULL));
  CHECKF(json_equal(now, before), "%s -> %s", JS(before), JS(now));
  /* A replacement keeps it, fenced or not. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"), JQ("{'w':1}"), NULL,
                            &res), 0);
  check_doc(c, "r", "{'_id':'r','w':1,'_fence':{'L':3}}");
  dtx_update_opts_t o = upd_fence("L", 2);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"), JQ("{'w':2}"), &o,
                            &res), DTX_EFENCED);
  o.fence_token = 4;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"), JQ("{'w':2}"), &o,
                            &res), 0);
  check_doc(c, "r", "{'_id':'r','w':2,'_fence':{'L':4}}");
  /* Inserts: a well-formed record (a restored copy) or none. */
  static const char *const bad_docs[] = {
      "{'_id':'x','_fence':1}",        "{'_id':'x','_fence':{'L':0}}",
      "{'_id':'x','_fence':{'L':'1'}}", "{'_id':'x','_fence':{'L':1.5}}",
      "{'_id':'x','_fence':{'a b':1}}", "{'_id':'x','_fence':[1]}",
  };
  for (size_t i = 0; i < sizeof bad_docs / sizeof bad_docs[0]; i++) {
    json_t *id = conf_poison;
    CHECK_RC(dtx_store_insert(conf_st, c, JQ(bad_docs[i]), &id), DTX_EINVAL);
    CHECK(id == NULL);
  }
  CHECK(conf_count(c, JQ("{'_id':'x'}")) == 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'x','_fence':{'L':2}}"),
                            NULL), 0);
}

/* Bad fence arguments: INVAL, nothing changed, on every call. */
static void test_fence_bad_args(void) {
  const char *c = conf_coll("fence_args");
  REQUIRE(conf_seed(c, "[{'_id':'r','v':0}]") == 0);
  json_t *before = conf_keep(conf_find(c, NULL, NULL));
  static const struct {
    const char *name;
    int64_t token;
  } bad[] = {{"", 1}, {"a b", 1}, {"L", 0}, {"L", -3}, {"x/y", 2}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dtx_update_opts_t o = upd_fence(bad[i].name, bad[i].token);
    dtx_update_result_t res;
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{}"), JQ("{'$set':{'v':1}}"), &o,
                              &res), DTX_EINVAL);
    dtx_fam_opts_t fo = {.fence_name = bad[i].name,
                         .fence_token = bad[i].token};
    json_t *out = conf_poison;
    CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{}"),
                                           JQ("{'$set':{'v':1}}"), &fo, &out),
             DTX_EINVAL);
    CHECK(out == NULL);
    dtx_delete_opts_t d = {.fence_name = bad[i].name,
                           .fence_token = bad[i].token};
    CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{}"), &d, NULL), DTX_EINVAL);
  }
  char longname[200];
  memset(longname, 'a', 129);
  longname[129] = '\0';
  dtx_update_opts_t o = upd_fence(longname, 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{}"), JQ("{'$set':{'v':1}}"), &o,
                            NULL), DTX_EINVAL);
  json_t *now = conf_keep(conf_find(c, NULL, NULL));
  CHECKF(json_equal(now, before), "%s -> %s", JS(before), JS(now));
}

/* ---- racing writers ------------------------------------------------------- */

enum { RACE_PROCS = 4, RACE_WRITES = 60 };

typedef struct race {
  const char *coll;
  conf_barrier_t *bar;
  int who;
} race_t;

/* Each writer pushes its token into the document's log under the fence.
 * Tokens climb slowly with random jitter, so writers overtake each other
 * and many writes are stale.  Anything but OK or FENCED is a failure. */
static int race_child(void *arg) {
  race_t *r = arg;
  dtx_store_t *st = NULL;
  if (dtx_store_open(conf_uri, &st) != 0 || conf_barrier_child(r->bar) != 0) {
    CONF_CHILD_FAIL("open/barrier: %s", dtx_errdetail());
    dtx_store_close(st);
    return 1;
  }
  int bad = 0;
  json_t *f = json_pack("{s:s}", "_id", "r");
  for (int k = 0; k < RACE_WRITES && !bad; k++) {
    int64_t token = 1 + k * 2 + (int64_t)(conf_random() % 7);
    json_t *u = json_pack("{s:{s:I}}", "$push", "log", (json_int_t)token);
    dtx_update_opts_t o = {.fence_name = "R", .fence_token = token};
    dtx_update_result_t res;
    int rc = dtx_store_update(st, r->coll, f, u, &o, &res);
    json_decref(u);
    if (rc != 0 && rc != DTX_EFENCED) {
      CONF_CHILD_FAIL("token %lld: %s (%s)", (long long)token,
                      dtx_errname(rc), dtx_errdetail());
      bad = 1;
    } else if (rc == 0 && res.matched != 1) {
      CONF_CHILD_FAIL("token %lld: matched %lld", (long long)token,
                      (long long)res.matched);
      bad = 1;
    }
  }
  json_decref(f);
  dtx_store_close(st);
  return bad;
}

static void test_fence_racing_writers(void) {
  if (conf_store_is_private()) {
    conf_skip("private store");
    return;
  }
  const char *c = conf_coll("fence_race");
  REQUIRE(conf_seed(c, "[{'_id':'r','log':[]}]") == 0);
  conf_barrier_t bar;
  REQUIRE(conf_barrier_init(&bar) == 0);
  race_t rs[RACE_PROCS];
  pid_t pids[RACE_PROCS];
  conf_store_release();
  for (int i = 0; i < RACE_PROCS; i++) {
    rs[i] = (race_t){c, &bar, i};
    pids[i] = conf_fork(race_child, &rs[i]);
    CHECKF(pids[i] > 0, "fork: %s", strerror(errno));
  }
  CHECKF(conf_barrier_release(&bar, RACE_PROCS) == 0, "a child died");
  for (int i = 0; i < RACE_PROCS; i++)
    CHECKF(pids[i] > 0 && conf_wait(pids[i]) == 0, "child %d failed", i);
  conf_barrier_close(&bar);
  conf_store_reacquire();
  json_t *d = doc_of(c, "r");
  json_t *log = json_object_get(d, "log");
  REQUIRE(json_array_size(log) > 0);
  json_int_t prev = 0;
  size_t i;
  json_t *v;
  int ordered = 1;
  json_array_foreach(log, i, v) {
    ordered &= json_integer_value(v) >= prev;
    prev = json_integer_value(v);
  }
  CHECKF(ordered, "accepted tokens went down: %s", JS(log));
  json_t *rec = json_object_get(json_object_get(d, "_fence"), "R");
  CHECKF(json_integer_value(rec) == prev, "recorded %s, last accepted %lld",
         JS(rec), (long long)prev);
  printf("   fenced race: %zu of %d writes accepted\n", json_array_size(log),
         RACE_PROCS * RACE_WRITES);
}

/* ---- fence tombstones -------------------------------------------------------- */

/* The issue's order: holder 2 deletes with a fenced delete; holder 1's
 * later fenced upsert of the same _id is stale, on update and
 * find_one_and_update alike, and the tombstone is seen by nothing. */
static void test_fence_tombstone_upsert(void) {
  const char *c = conf_coll("fence_tomb_up");
  REQUIRE(conf_seed(c, "[{'_id':'r','v':0},{'_id':'s','v':0}]") == 0);
  dtx_update_result_t res;
  dtx_update_opts_t o = upd_fence("L", 2);
  REQUIRE(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                           JQ("{'$set':{'v':2}}"), &o, &res) == 0);
  int64_t n = -1;
  dtx_delete_opts_t del = {.fence_name = "L", .fence_token = 2};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'r'}"), &del, &n), 0);
  CHECK(n == 1);
  /* Unseen: finds (by _id and by scan), counts, filters on _fence. */
  CHECK(conf_count(c, NULL) == 1 && conf_count(c, JQ("{'_id':'r'}")) == 0);
  CHECK(conf_count(c, JQ("{'_fence.L':2}")) == 0);
  json_t *all = conf_keep(conf_find(c, NULL, NULL));
  CHECKF(all && strcmp(conf_ids(all), "[\"s\"]") == 0, "%s", JS(all));
  json_t *byid = conf_keep(conf_find(c, JQ("{'_id':{'$in':['r','s']}}"),
                                     NULL));
  CHECKF(byid && strcmp(conf_ids(byid), "[\"s\"]") == 0, "%s", JS(byid));
  /* The stale upsert, both calls: FENCED, naming both tokens. */
  dtx_update_opts_t up = {.upsert = 1, .fence_name = "L", .fence_token = 1};
  res.matched = 99;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':1}}"), &up, &res),
           DTX_EFENCED);
  CHECK(res.matched == 0 && res.upserted_id == NULL);
  const char *d = dtx_errdetail();
  CHECKF(strstr(d, "token 1") && strstr(d, "token 2") && strstr(d, "'r'"),
         "detail: %s", d);
  dtx_fam_opts_t fo = {.upsert = 1, .return_new = 1, .fence_name = "L",
                       .fence_token = 1};
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'r'}"),
                                         JQ("{'$set':{'v':1}}"), &fo, &out),
           DTX_EFENCED);
  CHECK(out == NULL && conf_count(c, NULL) == 1);
  /* Another lock's writer is not judged by L's token, and the new
   * document takes over L's record beside its own. */
  fo.fence_name = "M";
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'r'}"),
                                         JQ("{'$set':{'v':5}}"), &fo, &out),
           0);
  CHECKF(json_equal(out, JQ("{'_id':'r','v':5,'_fence':{'M':1,'L':2}}")),
         "%s", JS(out));
  json_decref(out);
  /* So holder 1 stays refused on the new document too. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'v':1}}"), &up, &res),
           DTX_EFENCED);
  /* The current holder's upsert (and a later one) is accepted. */
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'r'}"), &del, &n), 0);
  up.fence_token = 2;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r','v':7}"),
                            JQ("{'$set':{'w':1}}"), &up, &res), 0);
  CHECK(res.upserted_id != NULL);
  json_decref(res.upserted_id);
  check_doc(c, "r", "{'_id':'r','v':7,'w':1,'_fence':{'L':2,'M':1}}");
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The records c's tombstones keep, as their sorted JSON texts joined by
 * ' ' (the lock pattern reads them: docs/locks.md). */
static const char *tomb_records(const char *c) {
  static char out[512];
  json_t *recs = NULL;
  char *txt[8];
  size_t n = 0, i;
  json_t *r;
  out[0] = 0;
  if (dtx__store_fence_records(conf_st, c, &recs) != 0)
    return "error";
  json_array_foreach(recs, i, r) if (n < 8) txt[n++] =
      json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
  qsort(txt, n, sizeof *txt, str_cmp);
  for (i = 0; i < n; i++) {
    snprintf(out + strlen(out), sizeof out - strlen(out), "%s%s",
             i ? " " : "", txt[i] ? txt[i] : "?");
    free(txt[i]);
  }
  json_decref(recs);
  return out;
}

/* A delete of a document with a record leaves it, fenced or not (many:
 * each document its own); an insert of the _id carries it on, merged with
 * its own; a document without one leaves nothing; a drop forgets. */
static void test_fence_tombstone_insert(void) {
  const char *c = conf_coll("fence_tomb_ins");
  REQUIRE(conf_seed(c, "[{'_id':'r','g':1,'_fence':{'L':4,'M':1}},"
                       "{'_id':'p','g':1},"
                       "{'_id':'q','g':2,'_fence':{'L':6}},"
                       "{'_id':'t','g':2,'_fence':{'L':3}}]") == 0);
  int64_t n = -1;
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'g':1}"),
                               &(dtx_delete_opts_t){.many = 1}, &n), 0);
  CHECK(n == 2);
  /* The records are read for the lock pattern, nowhere else. */
  CHECKF(strcmp(tomb_records(c), "{\"L\":4,\"M\":1}") == 0, "%s",
         tomb_records(c));
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'r','x':1}"), NULL), 0);
  check_doc(c, "r", "{'_id':'r','x':1,'_fence':{'L':4,'M':1}}");
  CHECKF(strcmp(tomb_records(c), "") == 0, "%s", tomb_records(c));
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'p','x':1}"), NULL), 0);
  check_doc(c, "p", "{'_id':'p','x':1}");
  dtx_update_result_t res;
  dtx_update_opts_t o = upd_fence("L", 3);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'x':2}}"), &o, &res), DTX_EFENCED);
  /* A fenced delete of many: every document keeps its record, with the
   * token that deleted it. */
  dtx_delete_opts_t dm = {.many = 1, .fence_name = "N", .fence_token = 9};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'g':2}"), &dm, &n), 0);
  CHECK(n == 2 && conf_count(c, NULL) == 2);
  CHECKF(strcmp(tomb_records(c), "{\"L\":3,\"N\":9} {\"L\":6,\"N\":9}") ==
             0,
         "%s", tomb_records(c));
  /* An inserted record of its own (a restored copy) keeps its larger
   * tokens and gains the rest. */
  CHECK_RC(dtx_store_insert(conf_st, c,
                            JQ("{'_id':'q','_fence':{'L':2,'K':5}}"), NULL),
           0);
  check_doc(c, "q", "{'_id':'q','_fence':{'L':6,'K':5,'N':9}}");
  json_t *ids = NULL;
  size_t k = 0;
  CHECK_RC(dtx_store_insert_many(conf_st, c, JQ("[{'_id':'t'},{'_id':'u'}]"),
                                 &k, &ids), 0);
  json_decref(ids);
  check_doc(c, "t", "{'_id':'t','_fence':{'L':3,'N':9}}");
  check_doc(c, "u", "{'_id':'u'}");
  /* An update's $set of everything else keeps the record as always. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'t'}"), JQ("{'z':1}"),
                            NULL, &res), 0);
  check_doc(c, "t", "{'_id':'t','z':1,'_fence':{'L':3,'N':9}}");
  /* A drop forgets every record with the documents. */
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'t'}"), NULL, &n), 0);
  CHECK_RC(dtx_store_drop_collection(conf_st, c), 0);
  CHECKF(strcmp(tomb_records(c), "") == 0, "%s", tomb_records(c));
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'t'}"), NULL), 0);
  check_doc(c, "t", "{'_id':'t'}");
}

/* A new document of a deleted _id is judged with the record it takes
 * over, fence first, then the rules (fence.c; SQLite reads the tombstone
 * in the insert's own transaction): a stale fenced upsert whose document
 * the validator would refuse too is FENCED, not VALIDATION -- alone and
 * in a batch behind the delete (conf_bulk_serial.c found it: Redis judged
 * the validator before it had read the tombstone) -- and an insert that
 * only the record makes valid is accepted. */
static void test_fence_tombstone_before_rules(void) {
  const char *c = conf_coll("fence_tomb_rules");
  REQUIRE(conf_seed(c, "[{'_id':'r','n':1},{'_id':'s','n':1}]") == 0);
  dtx_collection_rules_t r = {JQ("{'n':{'$gte':0}}"), NULL, NULL};
  CHECK_RC(dtx_store_set_rules(conf_st, c, &r), 0);
  int64_t n = -1;
  dtx_delete_opts_t del = {.fence_name = "L", .fence_token = 3};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'r'}"), &del, &n), 0);
  CHECK(n == 1);
  /* {_id:'r', w:1}: no n, so the validator refuses it as well. */
  dtx_update_opts_t up = {.upsert = 1, .fence_name = "L", .fence_token = 2};
  dtx_update_result_t res = {0};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r','n':{'$gte':1}}"),
                            JQ("{'$set':{'w':1}}"), &up, &res),
           DTX_EFENCED);
  CHECK(res.upserted_id == NULL);
  dtx_fam_opts_t fo = {
      .upsert = 1, .return_new = 1, .fence_name = "L", .fence_token = 2};
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c,
                                         JQ("{'_id':'r','n':{'$gte':1}}"),
                                         JQ("{'$set':{'w':1}}"), &fo, &out),
           DTX_EFENCED);
  CHECK(out == NULL);
  /* Not fenced, or fresh: the validator's refusal. */
  up.fence_token = 3;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r','n':{'$gte':1}}"),
                            JQ("{'$set':{'w':1}}"), &up, &res),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r','n':{'$gte':1}}"),
                            JQ("{'$set':{'w':1}}"),
                            &(dtx_update_opts_t){.upsert = 1}, &res),
           DTX_EVALIDATION);
  /* The same in one batch: the delete, then the stale upsert of the
   * deleted document (the second runs on what the first leaves). */
  dtx_delete_opts_t del_s = {.fence_name = "L", .fence_token = 3};
  dtx_bulk_op_t ops[2] = {
      {.kind = DTX_BULK_DELETE_ONE,
       .coll = c,
       .filter = JQ("{'_id':'s','n':{'$gte':0}}"),
       .delete_opts = &del_s},
      {.kind = DTX_BULK_FIND_ONE_AND_UPDATE,
       .coll = c,
       .filter = JQ("{'_id':'s','n':{'$gte':1}}"),
       .update = JQ("{'$set':{'w':1}}"),
       .fam_opts = &fo},
  };
  dtx_bulk_result_t br[2];
  (void)dtx_store_bulk_write(conf_st, ops, 2, br);
  CHECKF(br[0].rc == 0 && br[0].modified == 1, "delete: %s",
         dtx_errname(br[0].rc));
  CHECKF(br[1].rc == DTX_EFENCED && br[1].doc == NULL, "upsert: %s %s",
         dtx_errname(br[1].rc), br[1].detail ? br[1].detail : "");
  dtx_bulk_results_clear(br, 2);
  CHECK(conf_count(c, NULL) == 0);
  /* A fresh holder's upsert that the validator accepts takes the record
   * over. */
  up.fence_token = 3;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r','n':2}"),
                            JQ("{'$set':{'w':1}}"), &up, &res),
           0);
  json_decref(res.upserted_id);
  check_doc(c, "r", "{'_id':'r','n':2,'w':1,'_fence':{'L':3}}");
  /* A rule that only the record satisfies: an insert of the deleted _id
   * takes it over before it is judged, so it is accepted. */
  const char *c2 = conf_coll("fence_tomb_rules2");
  REQUIRE(conf_seed(c2, "[{'_id':'t','_fence':{'L':1}},"
                        "{'_id':'v','_fence':{'L':1}}]") == 0);
  dtx_collection_rules_t r2 = {JQ("{'_fence.L':{'$gte':1}}"), NULL, NULL};
  CHECK_RC(dtx_store_set_rules(conf_st, c2, &r2), 0);
  CHECK_RC(dtx_store_delete_ex(conf_st, c2, JQ("{'_id':'t'}"), NULL, &n), 0);
  CHECK_RC(dtx_store_insert(conf_st, c2, JQ("{'_id':'t','x':1}"), NULL), 0);
  check_doc(c2, "t", "{'_id':'t','x':1,'_fence':{'L':1}}");
  /* The same insert in a batch (its first attempt reads nothing). */
  CHECK_RC(dtx_store_delete_ex(conf_st, c2, JQ("{'_id':'v'}"), NULL, &n), 0);
  dtx_bulk_op_t ins = {
      .kind = DTX_BULK_INSERT, .coll = c2, .doc = JQ("{'_id':'v','x':1}")};
  (void)dtx_store_bulk_write(conf_st, &ins, 1, br);
  CHECKF(br[0].rc == 0, "insert: %s %s", dtx_errname(br[0].rc),
         br[0].detail ? br[0].detail : "");
  dtx_bulk_results_clear(br, 1);
  check_doc(c2, "v", "{'_id':'v','x':1,'_fence':{'L':1}}");
  CHECK_RC(dtx_store_insert(conf_st, c2, JQ("{'_id':'u','x':1}"), NULL),
           DTX_EVALIDATION);
}

/* Indexes never list a tombstone, and a unique key a deleted document
 * held is free for another document at once. */
static void test_fence_tombstone_indexes(void) {
  const char *c = conf_coll("fence_tomb_idx");
  REQUIRE(dtx_store_create_index(conf_st, c, JQ("{'g':1}"), NULL, NULL) == 0);
  dtx_index_opts_t uo = {.unique = 1};
  REQUIRE(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), &uo, NULL) == 0);
  REQUIRE(conf_seed(c, "[{'_id':'a','g':1,'k':1},{'_id':'b','g':1,'k':2}]") ==
          0);
  dtx_update_result_t res;
  dtx_update_opts_t o = upd_fence("L", 4);
  REQUIRE(dtx_store_update(conf_st, c, JQ("{'_id':'a'}"),
                           JQ("{'$set':{'h':1}}"), &o, &res) == 0);
  dtx_delete_opts_t del = {.fence_name = "L", .fence_token = 4};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'a'}"), &del, NULL), 0);
  CHECK(conf_count(c, JQ("{'g':1}")) == 1 && conf_count(c, JQ("{'k':1}")) == 0);
  json_t *g = conf_keep(conf_find(c, JQ("{'g':{'$gte':0}}"), NULL));
  CHECKF(g && strcmp(conf_ids(g), "[\"b\"]") == 0, "%s", JS(g));
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'c','g':1,'k':1}"), NULL),
           0);
  /* The _id comes back with its record and its own keys. */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'a','g':3,'k':3}"), NULL),
           0);
  check_doc(c, "a", "{'_id':'a','g':3,'k':3,'_fence':{'L':4}}");
  CHECK(conf_count(c, JQ("{'g':3}")) == 1);
}

/* Arms DOCTX_FAULT for this process (a forked child). */
static void arm_fault(const char *spec) {
  setenv("DOCTX_FAULT", spec, 1);
  dtx__fault_init(NULL);
}

typedef struct stale_upsert {
  const char *coll;
  const char *fault;
} stale_upsert_t;

/* Holder 1's fenced upsert with token 1, stopped at the fault point;
 * exits 0 when the store refuses it as stale. */
static int stale_upsert_child(void *arg) {
  stale_upsert_t *a = arg;
  dtx_store_t *st = NULL;
  if (dtx_store_open(conf_uri, &st) != 0) {
    CONF_CHILD_FAIL("open: %s", dtx_errdetail());
    return 1;
  }
  arm_fault(a->fault);
  dtx_update_opts_t up = {.upsert = 1, .fence_name = "L", .fence_token = 1};
  dtx_update_result_t res;
  int rc = dtx_store_update(st, a->coll, JQ("{'_id':'r'}"),
                            JQ("{'$set':{'late':1,'k':1}}"), &up, &res);
  json_decref(res.upserted_id);
  dtx_store_close(st);
  if (rc != DTX_EFENCED)
    CONF_CHILD_FAIL("stale upsert: %s (%s), want FENCED", dtx_errname(rc),
                    dtx_errdetail());
  return rc == DTX_EFENCED ? 0 : 1;
}

/* Waits (bounded) until pid has stopped at its pause; 0 when it did. */
static int wait_stopped(pid_t pid) {
  for (int i = 0; i < 2000; i++) {
    int status;
    pid_t w = waitpid(pid, &status, WUNTRACED | WNOHANG);
    if (w == pid && WIFSTOPPED(status))
      return 0;
    if (w == pid || (w < 0 && errno != EINTR))
      return -1; /* it ended without stopping */
    usleep(5000);
  }
  return -1;
}

/* A stale holder paused at fault (fence.write: before its step;
 * redis.unique_claimed: after it decided on the state it read, before its
 * compare-and-set) while holder 2 writes (seed_first: the document exists
 * already, written by holder 2) and then fenced-deletes the document: the
 * paused upsert resumes into FENCED and recreates nothing. */
static void paused_upsert(const char *name, const char *fault,
                          int seed_first) {
  const char *c = conf_coll(name);
  dtx_index_opts_t uo = {.unique = 1};
  REQUIRE(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), &uo, NULL) == 0);
  dtx_update_result_t res;
  dtx_update_opts_t o2 = {.upsert = 1, .fence_name = "L", .fence_token = 2};
  if (seed_first) {
    REQUIRE(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                             JQ("{'$set':{'v':2,'k':2}}"), &o2, &res) == 0);
    json_decref(res.upserted_id);
  }
  stale_upsert_t a = {c, fault};
  conf_store_release();
  pid_t pid = conf_fork(stale_upsert_child, &a);
  REQUIRE(pid > 0);
  int stopped = wait_stopped(pid) == 0;
  conf_store_reacquire();
  CHECKF(stopped, "the stale writer did not stop at %s", fault);
  if (!seed_first) {
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'r'}"),
                              JQ("{'$set':{'v':2,'k':2}}"), &o2, &res), 0);
    json_decref(res.upserted_id);
  }
  dtx_delete_opts_t del = {.fence_name = "L", .fence_token = 2};
  int64_t n = -1;
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'r'}"), &del, &n), 0);
  CHECK(n == 1);
  if (stopped)
    kill(pid, SIGCONT);
  else
    kill(pid, SIGKILL);
  CHECKF(conf_wait(pid) == 0, "the stale upsert was not refused");
  CHECK(conf_count(c, NULL) == 0);
}

static void test_fence_tombstone_paused(void) {
  if (conf_store_is_private()) {
    conf_skip("needs a store shared between processes");
    return;
  }
  paused_upsert("fence_tomb_pause", "fence.write:pause", 1);
  /* Only the Redis backend has a step inside the write to stop at. */
  if (strncmp(conf_uri, "redis", 5) == 0)
    paused_upsert("fence_tomb_cas", "redis.unique_claimed:pause", 0);
}

/* A replacement that writes a document back as it is stored, _fence not
 * last, is no write (modified 0), and what it returns is the stored
 * document, field order included: it once returned _fence moved last, a
 * document that was never stored (a hostile user's finding). */
static void test_fence_noop_replacement_returns_stored(void) {
  const char *c = conf_coll("fence_noop");
  REQUIRE(conf_seed(c, "[{'_id':1,'a':1,'_fence':{'L':3},'b':2}]") == 0);
  static const char *const stored = "{\"_id\":1,\"a\":1,\"_fence\":{\"L\":3},\"b\":2}";
  for (int fenced = 0; fenced < 2; fenced++) {
    dtx_fam_opts_t o = {.return_new = 1,
                        .fence_name = fenced ? "L" : NULL,
                        .fence_token = fenced ? 3 : 0};
    json_t *out = NULL;
    CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':1}"),
                                           JQ("{'a':1,'b':2}"), &o, &out),
             0);
    conf_keep(out);
    CHECKF(out && strcmp(JS(out), stored) == 0, "fenced %d: returned %s",
           fenced, JS(out));
    json_t *got = conf_keep(conf_get(c, JQ("{'_id':1}")));
    CHECKF(got && strcmp(JS(got), stored) == 0, "fenced %d: stored %s",
           fenced, JS(got));
  }
}

void conf_run_fence(void) {
  CONF_RUN(test_fence_update_rule);
  CONF_RUN(test_fence_vs_nomatch);
  CONF_RUN(test_fence_every_call);
  CONF_RUN(test_fence_reserved);
  CONF_RUN(test_fence_bad_args);
  CONF_RUN(test_fence_racing_writers);
  CONF_RUN(test_fence_tombstone_upsert);
  CONF_RUN(test_fence_tombstone_insert);
  CONF_RUN(test_fence_tombstone_before_rules);
  CONF_RUN(test_fence_tombstone_indexes);
  CONF_RUN(test_fence_tombstone_paused);
  CONF_RUN(test_fence_noop_replacement_returns_stored);
}
