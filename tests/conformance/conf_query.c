/* conf_query.c -- conformance: filter and sort semantics through the store.
 *
 * The matcher itself is unit-tested in tests/unit; this table is smaller
 * and exists to prove that a backend evaluates filters with the same
 * semantics wherever it evaluates them: the same table runs against a
 * collection without secondary indexes and against one with indexes on
 * every queried path, so a backend that answers from an index (multikey,
 * sparse, null/missing, int vs double) must give the same documents. */
#include "conf.h"
#include "store/store.h" /* dtx__docs_examined */

#include <string.h>

static const char *QUERY_DOCS =
    "[{'_id':1,'a':1,'tags':['x','y'],'b':{'c':1},"
    "  'arr':[{'k':1,'v':'a'},{'k':2,'v':'b'}],'s':'foo'},"
    " {'_id':2,'a':2,'tags':['y','z'],'b':{'c':2},'arr':[{'k':1,'v':'b'}],"
    "  'n':null},"
    " {'_id':3,'a':3,'tags':[],'b':[{'c':1},{'c':3}],'s':'bar'},"
    " {'_id':4,'a':'3','tags':'x'},"
    " {'_id':5,'a':2.5,'arr':[{'k':3,'v':'a'}]},"
    " {'_id':6},"
    " {'_id':7,'a':[1,5],'b':{'c':[4,5]}}]";

static const struct {
  const char *filter, *want;
} QUERY_CASES[] = {
    {"{}", "[1,2,3,4,5,6,7]"},
    {"{'a':2}", "[2]"},
    {"{'a':3}", "[3]"},
    {"{'a':1}", "[1,7]"},
    {"{'a':2.0}", "[2]"},
    {"{'a':{'$eq':2.0}}", "[2]"},
    {"{'a':{'$gt':1}}", "[2,3,5,7]"},
    {"{'a':{'$gte':1}}", "[1,2,3,5,7]"},
    {"{'a':{'$lte':1}}", "[1,7]"},
    {"{'a':{'$gte':2,'$lt':3}}", "[2,5,7]"},
    {"{'a':{'$gt':2,'$lt':4}}", "[3,5,7]"},
    {"{'a':{'$elemMatch':{'$gt':2,'$lt':4}}}", "[]"},
    {"{'a':{'$elemMatch':{'$gt':4}}}", "[7]"},
    {"{'a':{'$lt':'4'}}", "[4]"},
    {"{'a':{'$ne':2}}", "[1,3,4,5,6,7]"},
    {"{'a':{'$ne':1}}", "[2,3,4,5,6]"},
    {"{'a':{'$in':[1,'3']}}", "[1,4,7]"},
    {"{'a':{'$in':[]}}", "[]"},
    {"{'a':{'$not':{'$gt':2}}}", "[1,2,4,6]"},
    {"{'tags':'y'}", "[1,2]"},
    {"{'tags':'x'}", "[1,4]"},
    {"{'tags':{'$ne':'y'}}", "[3,4,5,6,7]"},
    {"{'tags':['x','y']}", "[1]"},
    {"{'tags':['y','x']}", "[]"},
    {"{'tags':[]}", "[3]"},
    {"{'tags':{'$size':2}}", "[1,2]"},
    {"{'tags':{'$all':['x','y']}}", "[1]"},
    {"{'tags':{'$in':['z','x']}}", "[1,2,4]"},
    {"{'tags':{'$nin':['x']}}", "[2,3,5,6,7]"},
    {"{'tags':{'$elemMatch':{'$eq':'z'}}}", "[2]"},
    {"{'tags.0':'y'}", "[2]"},
    {"{'b.c':1}", "[1,3]"},
    {"{'b.c':5}", "[7]"},
    {"{'b.c':{'$gt':2}}", "[3,7]"},
    {"{'b.c':{'$ne':1}}", "[2,4,5,6,7]"},
    {"{'b.c':{'$exists':true}}", "[1,2,3,7]"},
    {"{'b':{'c':2}}", "[2]"},
    {"{'b':{'c':1}}", "[1,3]"},
    {"{'arr.k':1}", "[1,2]"},
    {"{'arr.v':'a'}", "[1,5]"},
    {"{'arr':{'$elemMatch':{'k':1,'v':'b'}}}", "[2]"},
    {"{'arr.k':1,'arr.v':'b'}", "[1,2]"},
    {"{'arr.0.k':1}", "[1,2]"},
    {"{'arr.1.v':'b'}", "[1]"},
    {"{'a':{'$exists':true},'arr.k':{'$gte':2}}", "[1,5]"},
    {"{'n':null}", "[1,2,3,4,5,6,7]"},
    {"{'n':{'$in':[null]}}", "[1,2,3,4,5,6,7]"},
    {"{'n':{'$ne':null}}", "[]"},
    {"{'n':{'$exists':true}}", "[2]"},
    {"{'s':{'$exists':false}}", "[2,4,5,6,7]"},
    {"{'s':null}", "[2,4,5,6,7]"},
    {"{'s':{'$gt':'baz'}}", "[1]"},
    {"{'s':{'$lt':'foo'}}", "[3]"},
    {"{'_id':{'$in':[2,4]}}", "[2,4]"},
    {"{'_id':{'$gt':5}}", "[6,7]"},
    {"{'$or':[{'a':1},{'s':'bar'}]}", "[1,3,7]"},
    {"{'$or':[{'arr.k':3},{'_id':6}]}", "[5,6]"},
    {"{'$and':[{'a':{'$gt':1}},{'a':{'$lt':3}}]}", "[2,5,7]"},
    {"{'$nor':[{'a':1},{'a':2}]}", "[3,4,5,6]"},
};

static void run_query_table(const char *c) {
  for (size_t i = 0; i < sizeof QUERY_CASES / sizeof QUERY_CASES[0]; i++) {
    json_t *f = JQ(QUERY_CASES[i].filter);
    json_t *all = conf_keep(conf_find(c, f, NULL));
    const char *ids = all ? conf_ids(all) : "(error)";
    CHECKF(strcmp(ids, QUERY_CASES[i].want) == 0, "%s: got %s want %s",
           QUERY_CASES[i].filter, ids, QUERY_CASES[i].want);
    json_t *want = JQ(QUERY_CASES[i].want);
    int64_t n = conf_count(c, f);
    CHECKF(n == (int64_t)json_array_size(want), "count %s: %lld",
           QUERY_CASES[i].filter, (long long)n);
    /* A sorted read and a fetch-one-by-filter use the same matcher. */
    dtx_find_opts_t o = {.sort = JQ("{'_id':-1}"), .limit = 1};
    json_t *last = conf_keep(conf_find(c, f, &o));
    json_t *wl = json_array_size(want)
                     ? json_array_get(want, json_array_size(want) - 1)
                     : NULL;
    CHECKF(last && json_array_size(last) == (wl ? 1u : 0u) &&
               (!wl || json_equal(json_object_get(json_array_get(last, 0),
                                                  "_id"),
                                  wl)),
           "%s sorted desc limit 1: %s", QUERY_CASES[i].filter,
           last ? conf_ids(last) : "(error)");
  }
}

static void test_query_semantics_unindexed(void) {
  const char *c = conf_coll("query_plain");
  REQUIRE(conf_seed(c, QUERY_DOCS) == 0);
  run_query_table(c);
}

static void test_query_semantics_indexed(void) {
  const char *c = conf_coll("query_indexed");
  static const struct {
    const char *keys;
    int sparse;
  } idx[] = {
      {"{'a':1}", 0},      {"{'tags':1}", 0},
      {"{'b.c':1}", 0},    {"{'arr.k':1,'arr.v':1}", 0},
      {"{'arr.v':-1}", 0}, {"{'n':1}", 0},
      {"{'s':1}", 1},      {"{'a':1,'s':1}", 0},
  };
  for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
    dtx_index_opts_t o = {.sparse = idx[i].sparse};
    int rc = dtx_store_create_index(conf_st, c, JQ(idx[i].keys), &o, NULL);
    CHECKF(rc == 0, "index %s: %s (%s)", idx[i].keys, dtx_errname(rc),
           dtx_errdetail());
  }
  /* Documents inserted after the indexes exist... */
  REQUIRE(conf_seed(c, QUERY_DOCS) == 0);
  run_query_table(c);

  /* ...and indexes built over existing documents answer the same way. */
  const char *c2 = conf_coll("query_indexed_late");
  REQUIRE(conf_seed(c2, QUERY_DOCS) == 0);
  for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
    dtx_index_opts_t o = {.sparse = idx[i].sparse};
    CHECK_RC(dtx_store_create_index(conf_st, c2, JQ(idx[i].keys), &o, NULL),
             0);
  }
  run_query_table(c2);
}

/* Index entries follow updates: after changing every queried field the
 * indexed answers still match the documents. */
static void test_query_after_updates_indexed(void) {
  const char *c = conf_coll("query_upd");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1}"), NULL, NULL), 0);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'t':1}"), NULL, NULL), 0);
  REQUIRE(conf_seed(c, "[{'_id':1,'a':1,'t':['p','q']},{'_id':2,'a':2,"
                       "'t':['q']},{'_id':3,'a':3}]") == 0);
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':1}"),
                            JQ("{'$set':{'a':20},'$pull':{'t':'p'}}"), NULL,
                            &r),
           0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"),
                            JQ("{'$unset':{'a':''},'$push':{'t':'p'}}"), NULL,
                            &r),
           0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':3}"), JQ("{'a':1}"), NULL,
                            &r),
           0);
  int64_t n = 0;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':99}"), 0, &n), 0);
  static const struct {
    const char *filter, *want;
  } cases[] = {
      {"{'a':1}", "[3]"},        {"{'a':20}", "[1]"},
      {"{'a':2}", "[]"},         {"{'a':null}", "[2]"},
      {"{'t':'p'}", "[2]"},      {"{'t':'q'}", "[1,2]"},
      {"{'t':null}", "[3]"},     {"{'a':{'$gte':1}}", "[1,3]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *all = conf_keep(conf_find(c, JQ(cases[i].filter), NULL));
    const char *ids = all ? conf_ids(all) : "(error)";
    CHECKF(strcmp(ids, cases[i].want) == 0, "%s: got %s want %s",
           cases[i].filter, ids, cases[i].want);
  }
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'t':'q'}"), 1, &n), 0);
  CHECK(n == 2);
  CHECK(conf_count(c, JQ("{'t':'q'}")) == 0);
  CHECK(conf_count(c, JQ("{'a':20}")) == 0);
  CHECK(conf_count(c, NULL) == 1);
}

/* MongoDB's cross-type sort order; an array sorts by its least element
 * ascending and its greatest descending; missing sorts as null. */
static const char *SORT_DOCS =
    "[{'_id':1},{'_id':2,'v':'a'},{'_id':3,'v':2},{'_id':4,'v':1.5},"
    " {'_id':5,'v':{'x':1}},{'_id':6,'v':true},{'_id':7,'v':null},"
    " {'_id':8,'v':[3,0.5]},{'_id':9,'v':'B'},{'_id':10,'v':-7}]";

static void run_sort_table(const char *c) {
  static const struct {
    const char *sort, *filter, *want;
  } cases[] = {
      {"{'v':1,'_id':1}", NULL, "[1,7,10,8,4,3,9,2,5,6]"},
      {"{'v':-1,'_id':1}", NULL, "[6,5,2,9,8,3,4,10,1,7]"},
      {"{'v':1}", "{'v':{'$gte':0}}", "[8,4,3]"},
      {"{'v':-1}", "{'v':{'$lt':'b'}}", "[2,9]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dtx_find_opts_t o = {.sort = JQ(cases[i].sort)};
    json_t *all = conf_keep(
        conf_find(c, cases[i].filter ? JQ(cases[i].filter) : NULL, &o));
    const char *ids = all ? conf_ids(all) : "(error)";
    CHECKF(strcmp(ids, cases[i].want) == 0, "sort %s: got %s want %s",
           cases[i].sort, ids, cases[i].want);
  }
}

static void test_sort_type_order(void) {
  const char *c = conf_coll("sort_types");
  REQUIRE(conf_seed(c, SORT_DOCS) == 0);
  run_sort_table(c);
  const char *ci = conf_coll("sort_types_idx");
  CHECK_RC(dtx_store_create_index(conf_st, ci, JQ("{'v':1}"), NULL, NULL), 0);
  REQUIRE(conf_seed(ci, SORT_DOCS) == 0);
  run_sort_table(ci);
}

/* A sorted walk bounded by a range the planner made itself: an anchored
 * $regex's prefix (plan.c's regex_range) is a range that lives in the
 * plan, not in the filter, and the walk reads rows after the plan is
 * gone -- keyset paging's {_id: 1} indexes made it the accounts' plan. */
static void test_sorted_walk_regex_range(void) {
  const char *c = conf_coll("walk_regex");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'s':1}"), NULL, NULL), 0);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'_id':1}"), NULL, NULL), 0);
  REQUIRE(conf_seed(c, "[{'_id':'kb','s':'kb'},{'_id':'la','s':'la'},"
                       "{'_id':'k','s':'k'},{'_id':'ka','s':'ka'},"
                       "{'_id':'j','s':'j'}]") == 0);
  static const struct {
    const char *filter, *sort, *want;
  } rows[] = {
      {"{'s':{'$regex':'^k'}}", "{'s':1}", "[\"k\",\"ka\",\"kb\"]"},
      {"{'_id':{'$regex':'^k'}}", "{'_id':1}", "[\"k\",\"ka\",\"kb\"]"},
      {"{'_id':{'$regex':'^ka'}}", "{'_id':1}", "[\"ka\"]"},
      {"{'s':{'$regex':'^k'},'_id':{'$gt':'k'}}", "{'s':1}",
       "[\"ka\",\"kb\"]"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    dtx_find_opts_t o = {.sort = JQ(rows[i].sort)};
    json_t *got = conf_keep(conf_find(c, JQ(rows[i].filter), &o));
    const char *ids = got ? conf_ids(got) : "(error)";
    CHECKF(strcmp(ids, rows[i].want) == 0, "%s sorted %s: got %s want %s",
           rows[i].filter, rows[i].sort, ids, rows[i].want);
  }
}

/* A find with a sort and a limit reads a page, not the collection: on
 * Redis a walk of the index in sort order, a few entries per bucket, for
 * pages up to 1,000 (src/store/redis/find.c; the ledger committer's
 * round is one such page).  Every page, at every size and offset around
 * that edge, must be exactly the slice of the whole sorted answer (ties
 * in insertion order); a page of 1,000 must examine fewer documents than
 * match; and a skip or limit near INT64_MAX is an empty page,
 * not an overflow (skip + limit once wrapped and asked for a huge
 * allocation). */
static void test_sorted_pages_every_size(void) {
  const char *c = conf_coll("q_pages");
  int n = conf_quick ? 3000 : 6000;
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'g':1,'k':1}"), NULL,
                                  NULL),
           0);
  json_t *docs = json_array();
  for (int i = 0; i < n; i++) /* k repeats: ties, kept in insertion order */
    json_array_append_new(docs, json_pack("{sisssi}", "_id", i, "g",
                                          i % 10 == 9 ? "y" : "x", "k",
                                          (i * 7919) % 997));
  size_t nin = 0;
  CHECK_RC(dtx_store_insert_many(conf_st, c, docs, &nin, NULL), 0);
  json_decref(docs);
  REQUIRE(nin == (size_t)n);
  json_t *whole = conf_keep(
      conf_find(c, JQ("{'g':'x'}"), &(dtx_find_opts_t){.sort = JQ("{'k':1}")}));
  REQUIRE(whole && json_array_size(whole) == (size_t)(n - n / 10));
  static const int64_t limits[] = {1, 7, 999, 1000, 1001, 1500, 4097,
                                   INT64_MAX};
  static const int64_t skips[] = {0, 1, 3, 1000, INT64_MAX - 1, INT64_MAX};
  for (size_t li = 0; li < sizeof limits / sizeof *limits; li++)
    for (size_t si = 0; si < sizeof skips / sizeof *skips; si++) {
      int64_t lim = limits[li], sk = skips[si];
      json_t *page = NULL;
      int64_t before = dtx__docs_examined;
      int rc = dtx_store_find(
          conf_st, c, JQ("{'g':'x'}"),
          &(dtx_find_opts_t){.sort = JQ("{'k':1}"), .skip = sk, .limit = lim},
          &page);
      int64_t ex = dtx__docs_examined - before;
      CHECKF(rc == 0, "limit %lld skip %lld: %s", (long long)lim,
             (long long)sk, dtx_errname(rc));
      size_t want = json_array_size(whole) > (size_t)sk
                        ? json_array_size(whole) - (size_t)sk
                        : 0;
      if (want > (size_t)lim)
        want = (size_t)lim;
      int same = rc == 0 && json_array_size(page) == want;
      for (size_t i = 0; same && i < want; i++)
        same = json_equal(json_array_get(page, i),
                          json_array_get(whole, (size_t)sk + i));
      CHECKF(same, "limit %lld skip %lld: %zu documents, not the %zu of the "
                   "whole sorted answer from %lld",
             (long long)lim, (long long)sk, json_array_size(page), want,
             (long long)sk);
      /* Redis's walk reads each bucket 4, 8, 16 ... entries a round until
       * its last is past the page's last match: for 1,000 over 16
       * buckets some 2,000 entries, short of the 2,700 (quick) or 5,400
       * that match; SQLite reads the page. */
      if (lim == 1000 && sk == 0)
        CHECKF(ex <= 2500, "a sorted page of 1000 examined %lld of %d",
               (long long)ex, n);
      json_decref(page);
    }
}

void conf_run_query(void) {
  CONF_RUN(test_sorted_walk_regex_range);
  CONF_RUN(test_query_semantics_unindexed);
  CONF_RUN(test_query_semantics_indexed);
  CONF_RUN(test_query_after_updates_indexed);
  CONF_RUN(test_sort_type_order);
  CONF_RUN(test_sorted_pages_every_size);
}
