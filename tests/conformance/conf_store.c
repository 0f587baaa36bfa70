/* conf_store.c -- conformance: rules of the store itself, the same on
 * every backend.
 *
 *  - Collection names are case-sensitive: "Case" and "case" are two
 *    collections with their own documents, indexes and rules.
 *  - No write stores a document nested deeper than DTX_MAX_DEPTH (100)
 *    levels -- insert, update result, upsert, replacement, with or without
 *    bypass_validation -- so every stored document stays readable; the
 *    refusal is DTX_EINVAL naming the path, and changes nothing.
 *  - No write stores a document over 16 MiB (DTX__DOC_MAX, as MongoDB's
 *    BSON limit) -- insert, insert_many, replacement, $set, $push $each,
 *    upsert, update many, with or without bypass_validation: DTX_ELIMIT
 *    naming the document, and nothing changes (docs/semantics.md, "Size
 *    limits").
 *  - An id or name holding a byte that is no UTF-8 (0xff) is refused with
 *    DTX_EINVAL (BADINDEX for an index name) by every call taking one,
 *    before anything is built of it, and the detail names the byte
 *    rather than quoting it (it stays valid UTF-8).
 *  - Redis namespaces (?ns=NAME): two stores on one server with different
 *    namespaces share nothing -- collections, documents, unique keys,
 *    rules, drops.  (Skipped on other backends.)
 *  - A 100k-element indexed array costs no more than CONF_BIG_ARRAY_MS
 *    per step (index build, insert, $push, find by element) on every
 *    backend: a guard against quadratic index upkeep, not a benchmark.
 *    Quick runs (DTX_QUICK: the sanitizer stage, and the release stage's
 *    variants -- sqlite-memory, -normal, the bulk_write runs) take the same
 *    steps on 10k elements: the code and its memory are the same, but
 *    10k is too few for the budget to catch quadratic upkeep, so that
 *    proof is the full runs' (conformance/sqlite-file, and the Redis
 *    single-call runs on both targets, scripts/test.sh).  100k cost ~10 s
 *    per run under ASan. */
#include "conf.h"

#include <stdlib.h>
#include <string.h>

/* One budget for every backend, generous enough for ASan on a loaded
 * 2-core machine; linear work takes well under a second per step. */
#define CONF_BIG_ARRAY_MS 20000
#define BIG_ARRAY_FULL 100000
#define BIG_ARRAY (conf_quick ? BIG_ARRAY_FULL / 10 : BIG_ARRAY_FULL)


/* ---- case-sensitive names ------------------------------------------------------ */

static void test_names_differing_in_case_are_two_collections(void) {
  const char *up = conf_coll("Case"), *low = conf_coll("case");
  const char *mixed = conf_coll("cAsE");
  CHECK_RC(dtx_store_insert(conf_st, up, JQ("{'_id':1,'w':'upper'}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, low, JQ("{'_id':1,'w':'lower'}"), NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, mixed, JQ("{'_id':1,'w':'mixed'}"), NULL),
           0);
  json_t *d = conf_get(up, JQ("{'_id':1}"));
  CHECKF(d && json_equal(d, JQ("{'_id':1,'w':'upper'}")), "%s", JS(d));
  json_decref(d);
  d = conf_get(low, JQ("{'_id':1}"));
  CHECKF(d && json_equal(d, JQ("{'_id':1,'w':'lower'}")), "%s", JS(d));
  json_decref(d);
  /* Indexes and rules belong to one of them only. */
  CHECK_RC(dtx_store_create_index(conf_st, up, JQ("{'w':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, low, JQ("{'_id':2,'w':'lower'}"), NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, up, JQ("{'_id':2,'w':'upper'}"), NULL),
           DTX_EDUPKEY);
  json_t *ix = NULL;
  CHECK_RC(dtx_store_list_indexes(conf_st, low, &ix), 0);
  CHECKF(json_array_size(ix) == 1, "%s", JS(ix));
  json_decref(ix);
  dtx_collection_rules_t r = {JQ("{'w':'lower'}"), NULL, NULL};
  CHECK_RC(dtx_store_set_rules(conf_st, low, &r), 0);
  CHECK_RC(dtx_store_insert(conf_st, mixed, JQ("{'_id':3,'w':'x'}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, low, JQ("{'_id':3,'w':'x'}"), NULL),
           DTX_EVALIDATION);
  json_t *names = NULL;
  CHECK_RC(dtx_store_list_collections(conf_st, &names), 0);
  int seen = 0;
  for (size_t i = 0; i < json_array_size(names); i++) {
    const char *n = json_string_value(json_array_get(names, i));
    seen += strcmp(n, up) == 0 || strcmp(n, low) == 0 || strcmp(n, mixed) == 0;
  }
  CHECKF(seen == 3, "listed %d of the three in %s", seen, JS(names));
  json_decref(names);
  /* Dropping one leaves the others. */
  CHECK_RC(dtx_store_drop_collection(conf_st, up), 0);
  CHECK(conf_count(up, NULL) == 0);
  CHECK(conf_count(low, NULL) == 2);
  CHECK(conf_count(mixed, NULL) == 2);
  CHECK_RC(dtx_store_insert(conf_st, up, JQ("{'_id':1,'w':'again'}"), NULL), 0);
  CHECK(conf_count(low, JQ("{'w':'lower'}")) == 2);
}

/* ---- the depth limit ------------------------------------------------------------- */

static void check_deep_refusal(int rc, const char *what) {
  CHECKF(rc == DTX_EINVAL, "%s: %s (%s), want INVAL", what, dtx_errname(rc),
         dtx_errdetail());
  CHECKF(strstr(dtx_errdetail(), "nests deeper than 100 levels (the limit): "
                                 "level 101 is reached at "),
         "%s: detail %s", what, dtx_errdetail());
}

static void test_depth_limit_on_every_write(void) {
  const char *c = conf_coll("deep");
  REQUIRE(conf_seed(c, "[{'_id':'A','n':1}]") == 0);
  json_t *before = conf_keep(conf_find(c, NULL, NULL));

  /* 100 levels is fine and reads back exactly. */
  json_t *ok = conf_keep(json_pack("{s:s,s:o}", "_id", "OK", "v",
                                   JNEST(99, "x")));
  CHECK_RC(dtx_store_insert(conf_st, c, ok, NULL), 0);
  json_t *back = conf_get(c, JQ("{'_id':'OK'}"));
  CHECKF(back && json_equal(back, ok), "100 levels did not read back");
  json_decref(back);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'OK'}"), 0, NULL), 0);

  /* 101 levels: every kind of write refuses, bypass or not. */
  json_t *deep = conf_keep(json_pack("{s:s,s:o}", "_id", "D", "v",
                                     JNEST(100, "x")));
  check_deep_refusal(dtx_store_insert(conf_st, c, deep, NULL), "insert");
  CHECKF(strstr(dtx_errdetail(), "'D'") && strstr(dtx_errdetail(), "v.x.x"),
         "%s", dtx_errdetail());
  dtx_insert_opts_t io = {.bypass_validation = 1};
  check_deep_refusal(dtx_store_insert_ex(conf_st, c, deep, &io, NULL),
                     "insert with bypass");
  size_t n = 9;
  json_t *two = conf_keep(json_pack("[{s:s},O]", "_id", "E", deep));
  check_deep_refusal(dtx_store_insert_many(conf_st, c, two, &n, NULL),
                     "insert_many");
  CHECKF(n == 0, "insert_many put %zu in before refusing", n);
  json_t *repl = conf_keep(json_pack("{s:s,s:o}", "_id", "A", "v",
                                     JNEST(100, "x")));
  dtx_update_result_t r;
  check_deep_refusal(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"), repl,
                                      NULL, &r),
                     "replacement");
  json_t *set = conf_keep(json_pack("{s:{s:o}}", "$set", "v",
                                    JNEST(100, "x")));
  dtx_update_opts_t bo = {.bypass_validation = 1};
  check_deep_refusal(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"), set, &bo,
                                      &r),
                     "$set with bypass");
  dtx_update_opts_t up = {.upsert = 1};
  check_deep_refusal(dtx_store_update(conf_st, c, JQ("{'_id':'U'}"), set, &up,
                                      &r),
                     "upsert");
  dtx_update_opts_t many = {.many = 1};
  check_deep_refusal(dtx_store_update(conf_st, c, JQ("{}"), set, &many, &r),
                     "update many");
  json_t *out = conf_poison;
  json_t *push = conf_keep(json_pack("{s:{s:o}}", "$push", "arr",
                                     JNEST(99, "x")));
  check_deep_refusal(dtx_store_find_one_and_update(conf_st, c,
                                                   JQ("{'_id':'A'}"), push,
                                                   NULL, &out),
                     "find_one_and_update $push");
  CHECK(out == NULL);

  /* A value nested 2,040 levels under a
   * 500-segment path (deeper than any JSON parser takes back) is refused,
   * and the collection stays readable. */
  char path[1200];
  size_t pl = 0;
  for (int i = 0; i < 500; i++)
    pl += (size_t)snprintf(path + pl, sizeof path - pl, "%sp", i ? "." : "");
  json_t *huge = json_object();
  json_object_set_new(huge, path, JNEST(2040, "x"));
  json_t *u = conf_keep(json_pack("{s:o}", "$set", huge));
  check_deep_refusal(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"), u, NULL,
                                      &r),
                     "$set 2040 levels under 500 segments");
  CHECKF(strstr(dtx_errdetail(), "p.p.p"), "%s", dtx_errdetail());

  json_t *now = conf_keep(conf_find(c, NULL, NULL));
  CHECKF(now && json_equal(now, before), "collection changed: %s", JS(now));
  CHECK(conf_count(c, NULL) == 1);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'A'}"), 0, NULL), 0);
}

/* ---- the size limit ---------------------------------------------------------------- */

/* A string of n bytes of 'a' (a new reference). */
static json_t *big_string(size_t n) {
  char *s = malloc(n + 1);
  if (!s)
    return NULL;
  memset(s, 'a', n);
  s[n] = '\0';
  json_t *v = json_string_nocheck(s);
  free(s);
  return v;
}

static void check_big_refusal(int rc, const char *what) {
  CHECKF(rc == DTX_ELIMIT, "%s: %s (%s), want LIMIT", what, dtx_errname(rc),
         dtx_errdetail());
  CHECKF(strstr(dtx_errdetail(), "would hold more than 16 MiB (16777216 "
                                 "bytes), the limit of a document"),
         "%s: detail %s", what, dtx_errdetail());
}

static void test_size_limit_on_every_write(void) {
  const char *c = conf_coll("big");
  json_t *s10 = conf_keep(big_string(10u << 20));
  json_t *s7 = conf_keep(big_string(7u << 20));
  json_t *s17 = conf_keep(big_string(17u << 20));
  REQUIRE(s10 && s7 && s17);
  /* 10 MiB is fine and reads back. */
  CHECK_RC(dtx_store_insert(conf_st, c,
                            conf_keep(json_pack("{s:s,s:O}", "_id", "A", "s",
                                                s10)),
                            NULL),
           0);
  json_t *before = conf_keep(conf_find(c, NULL, NULL));
  CHECK(json_array_size(before) == 1);
  dtx_insert_opts_t io = {.bypass_validation = 1};
  dtx_update_opts_t bo = {.bypass_validation = 1}, up = {.upsert = 1},
                    many = {.many = 1};
  dtx_update_result_t r;
  size_t n = 9;
  json_t *out = conf_poison;
  check_big_refusal(
      dtx_store_insert(conf_st, c,
                       conf_keep(json_pack("{s:s,s:O}", "_id", "B", "s", s17)),
                       NULL),
      "insert");
  check_big_refusal(
      dtx_store_insert_ex(conf_st, c,
                          conf_keep(json_pack("{s:s,s:O}", "_id", "B", "s",
                                              s17)),
                          &io, NULL),
      "insert with bypass");
  check_big_refusal(
      dtx_store_insert_many(conf_st, c,
                            conf_keep(json_pack("[{s:s},{s:s,s:O}]", "_id",
                                                "C", "_id", "B", "s", s17)),
                            &n, NULL),
      "insert_many");
  check_big_refusal(
      dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                       conf_keep(json_pack("{s:O,s:O}", "s", s10, "t", s7)),
                       NULL, &r),
      "replacement");
  check_big_refusal(
      dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                       conf_keep(json_pack("{s:{s:O}}", "$set", "t", s7)), &bo,
                       &r),
      "$set with bypass");
  check_big_refusal(
      dtx_store_update(conf_st, c, JQ("{'_id':'U'}"),
                       conf_keep(json_pack("{s:{s:O}}", "$set", "t", s17)),
                       &up, &r),
      "upsert");
  check_big_refusal(
      dtx_store_update(conf_st, c, JQ("{}"),
                       conf_keep(json_pack("{s:{s:O}}", "$set", "t", s7)),
                       &many, &r),
      "update many");
  check_big_refusal(
      dtx_store_find_one_and_update(
          conf_st, c, JQ("{'_id':'A'}"),
          conf_keep(json_pack("{s:{s:{s:[O]}}}", "$push", "arr", "$each", s7)),
          NULL, &out),
      "find_one_and_update $push $each");
  CHECKF(n == 0, "insert_many put %zu in before refusing", n);
  CHECK(out == NULL);
  json_t *now = conf_keep(conf_find(c, NULL, NULL));
  CHECKF(now && json_equal(now, before), "collection changed");
  CHECK_RC(dtx_store_drop_collection(conf_st, c), 0);
}

/* ---- bytes that are no UTF-8 ---------------------------------------------------------- */

/* Row i of the table: one call given b as its id or name. */
static int bad_byte_call(int i, const char *b, json_t **o) {
  static int applied;
  dtx_update_result_t ur;
  switch (i) {
  case 0: return dtx_transfer_get(conf_st, b, o);
  case 1: return dtx_transfer_cancel(conf_st, b, o);
  case 2: return dtx_transfer_run(conf_st, b, NULL, o);
  case 3: return dtx_account_get(conf_st, b, o);
  case 4: return dtx_job_get(conf_st, b, o);
  case 5: return dtx_job_add(conf_st, &(dtx_job_req_t){.queue = "q",
                                                       .type = "t",
                                                       .unique_key = b},
                             o, NULL);
  case 6: return dtx_job_effect_at(conf_st, "j", 1, b, "c", JQ("{}"),
                                   JQ("{'$set':{'a':1}}"), &applied);
  case 7: return dtx_lock_get(conf_st, b, o);
  case 8: return dtx_sync_rule_get(conf_st, b, o);
  case 9: return dtx_sync_update(conf_st, "r", b, JQ("{'$set':{'a':1}}"),
                                 NULL, o);
  case 10: return dtx_sync_rule_define(conf_st,
                                       &(dtx_sync_rule_t){.name = "r",
                                                          .master = "m",
                                                          .dependents = "d",
                                                          .link = b,
                                                          .copy = "a:b"},
                                       o);
  case 11: return dtx_sync_rule_define(conf_st,
                                       &(dtx_sync_rule_t){.name = "r",
                                                          .master = "m",
                                                          .dependents = "d",
                                                          .link = "l",
                                                          .copy = b},
                                       o);
  case 12: return dtx_ledger_get(conf_st, b, o);
  case 13: return dtx_order_get(conf_st, b, o);
  case 14: return dtx_version_get(conf_st, b, 1, o);
  case 15: return dtx_store_find(conf_st, b, NULL, NULL, o);
  case 16: return dtx_store_create_index(conf_st, conf_coll("bb"),
                                         JQ("{'a':1}"),
                                         &(dtx_index_opts_t){.name = b},
                                         NULL);
  case 17: return dtx_store_update(conf_st, conf_coll("bb"), JQ("{}"),
                                   JQ("{'$set':{'a':1}}"),
                                   &(dtx_update_opts_t){.fence_name = b,
                                                        .fence_token = 1},
                                   &ur);
  case 18: return dtx_lock_acquire(conf_st, "l",
                                   &(dtx_lock_opts_t){.owner = b}, o);
  default: return 1;
  }
}

static void test_bad_bytes_are_inval(void) {
  static const char *const names[] = {
      "transfer get", "transfer cancel", "transfer run", "account get",
      "job get", "job add unique_key", "job effect key", "lock get",
      "sync rule get", "sync update master id", "sync rule link",
      "sync rule copy", "ledger get", "order get", "version get",
      "collection name", "index name", "fence name", "lock owner"};
  static const char *const bytes[] = {"\xff", "ok\xff", "\xc3"};
  for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
    for (size_t k = 0; k < sizeof bytes / sizeof *bytes; k++) {
      json_t *o = NULL;
      int rc = bad_byte_call(i, bytes[k], &o);
      int want = i == 16 ? DTX_EBADINDEX : DTX_EINVAL;
      CHECKF(rc == want, "%s %zu: %s (%s), want %s", names[i], k,
             dtx_errname(rc), dtx_errdetail(), dtx_errname(want));
      json_t *d = json_string(dtx_errdetail()); /* NULL: not UTF-8 */
      CHECKF(d && *dtx_errdetail(), "%s %zu: detail is no UTF-8 text",
             names[i], k);
      json_decref(d);
      CHECK(o == NULL);
      json_decref(o);
    }
}

/* ---- namespaces (Redis) ------------------------------------------------------------ */

static void test_namespaces_share_nothing(void) {
  if (strncmp(conf_uri, "redis://", 8) != 0) {
    conf_skip("namespaces are a Redis URI option");
    return;
  }
  char ua[600], ub[600], ns[24];
  const char *sep = strchr(conf_uri, '?') ? "&" : "?";
  snprintf(ns, sizeof ns, "t%08x", (unsigned)(conf_random() & 0xffffffffu));
  snprintf(ua, sizeof ua, "%s%sns=%s_a", conf_uri, sep, ns);
  snprintf(ub, sizeof ub, "%s%sns=%s-b", conf_uri, sep, ns);
  dtx_store_t *a = NULL, *b = NULL;
  REQUIRE(dtx_store_open(ua, &a) == 0);
  if (dtx_store_open(ub, &b) != 0) {
    dtx_store_close(a);
    REQUIRE(0);
  }
  const char *c = conf_coll("ns"); /* the same name in both namespaces */
  dtx_index_opts_t uniq = {.unique = 1};
  CHECK_RC(dtx_store_create_index(a, c, JQ("{'u':1}"), &uniq, NULL), 0);
  CHECK_RC(dtx_store_create_index(b, c, JQ("{'u':1}"), &uniq, NULL), 0);
  CHECK_RC(dtx_store_insert(a, c, JQ("{'_id':1,'u':1,'in':'a'}"), NULL), 0);
  /* Same _id and same unique key: no collision across namespaces. */
  CHECK_RC(dtx_store_insert(b, c, JQ("{'_id':1,'u':1,'in':'b'}"), NULL), 0);
  CHECK_RC(dtx_store_insert(b, c, JQ("{'_id':2,'u':2,'in':'b'}"), NULL), 0);
  dtx_collection_rules_t r = {JQ("{'in':'a'}"), NULL, NULL};
  CHECK_RC(dtx_store_set_rules(a, c, &r), 0);
  CHECK_RC(dtx_store_insert(a, c, JQ("{'_id':3,'in':'b'}"), NULL),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_insert(b, c, JQ("{'_id':3,'in':'b'}"), NULL), 0);
  json_t *da = NULL, *db = NULL;
  CHECK_RC(dtx_store_find(a, c, NULL, NULL, &da), 0);
  CHECK_RC(dtx_store_find(b, c, NULL, NULL, &db), 0);
  CHECKF(json_equal(da, JQ("[{'_id':1,'u':1,'in':'a'}]")), "a: %s", JS(da));
  CHECKF(json_array_size(db) == 3, "b: %s", JS(db));
  json_decref(da);
  json_decref(db);
  json_t *rb = NULL;
  CHECK_RC(dtx_store_get_rules(b, c, &rb), 0);
  CHECKF(json_is_null(json_object_get(rb, "validator")), "%s", JS(rb));
  json_decref(rb);
  /* The default namespace (this suite's store) sees neither. */
  CHECK(conf_count(c, NULL) == 0);
  json_t *names = NULL;
  CHECK_RC(dtx_store_list_collections(conf_st, &names), 0);
  for (size_t i = 0; i < json_array_size(names); i++)
    CHECKF(strcmp(json_string_value(json_array_get(names, i)), c) != 0,
           "%s listed in the default namespace", c);
  json_decref(names);
  /* A drop in one leaves the other whole. */
  CHECK_RC(dtx_store_drop_collection(a, c), 0);
  int64_t nb = -1;
  CHECK_RC(dtx_store_count(b, c, NULL, &nb), 0);
  CHECK(nb == 3);
  CHECK_RC(dtx_store_insert(b, c, JQ("{'_id':4,'u':1}"), NULL), DTX_EDUPKEY);
  CHECK_RC(dtx_store_drop_collection(b, c), 0);
  dtx_store_close(a);
  dtx_store_close(b);
  /* Names outside 1..32 of [A-Za-z0-9_-] are refused. */
  static const char *const bad[] = {"", "a.b", "a:b", "{x}",
                                    "abcdefghijklmnopqrstuvwxyz0123456"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char u[600];
    snprintf(u, sizeof u, "%s%sns=%s", conf_uri, sep, bad[i]);
    dtx_store_t *x = (dtx_store_t *)1;
    CHECKF(dtx_store_open(u, &x) == DTX_EBADURI && x == NULL,
           "ns=%s was accepted", bad[i]);
  }
}

/* ---- a large indexed array ----------------------------------------------------------- */

static json_t *big_doc(void) {
  json_t *arr = json_array();
  for (int i = 0; i < BIG_ARRAY; i++)
    json_array_append_new(arr, json_integer(i));
  return json_pack("{s:i,s:o}", "_id", 1, "a", arr);
}

static void check_step(int64_t t0, const char *what) {
  int64_t ms = conf_now_ms() - t0;
  CHECKF(ms <= CONF_BIG_ARRAY_MS, "%s of a %d-element indexed array took %lld "
         "ms (budget %d)",
         what, BIG_ARRAY, (long long)ms, CONF_BIG_ARRAY_MS);
  printf("     %s: %lld ms\n", what, (long long)ms);
}

/* Each step on its own within the budget: index upkeep must be about
 * linear (or n log n) in the array's length. */
static void test_big_indexed_array(void) {
  json_t *doc = conf_keep(big_doc());
  json_t *push = conf_keep(json_pack("{s{si}}", "$push", "a", BIG_ARRAY));
  for (int build_after = 0; build_after < 2; build_after++) {
    const char *c = conf_coll(build_after ? "big_build" : "big_insert");
    int64_t t0;
    if (!build_after) {
      t0 = conf_now_ms();
      CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1}"), NULL, NULL),
               0);
    }
    t0 = conf_now_ms();
    CHECK_RC(dtx_store_insert(conf_st, c, doc, NULL), 0);
    check_step(t0, build_after ? "insert" : "insert, indexed");
    if (build_after) {
      t0 = conf_now_ms();
      CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1}"), NULL, NULL),
               0);
      check_step(t0, "index build");
    }
    dtx_update_result_t r;
    t0 = conf_now_ms();
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':1}"), push, NULL, &r), 0);
    CHECK(r.modified == 1);
    check_step(t0, "one $push");
    t0 = conf_now_ms();
    json_t *last = json_pack("{si}", "a", BIG_ARRAY - 1);
    json_t *pushed = json_pack("{si}", "a", BIG_ARRAY);
    json_t *none = json_pack("{si}", "a", BIG_ARRAY + 1);
    CHECK(conf_count(c, last) == 1);
    CHECK(conf_count(c, pushed) == 1);
    CHECK(conf_count(c, none) == 0);
    json_decref(last);
    json_decref(pushed);
    json_decref(none);
    check_step(t0, "three finds by element");
    CHECK_RC(dtx_store_drop_collection(conf_st, c), 0);
  }
}

void conf_run_store(void) {
  CONF_RUN(test_names_differing_in_case_are_two_collections);
  CONF_RUN(test_depth_limit_on_every_write);
  CONF_RUN(test_size_limit_on_every_write);
  CONF_RUN(test_bad_bytes_are_inval);
  CONF_RUN(test_namespaces_share_nothing);
}

void conf_run_scale(void) { CONF_RUN(test_big_indexed_array); }
