/* conf_mongo.c -- docs/mongodb.md's semantics through the public API, on
 * every backend: each new update operator applied in the store (and its
 * errors changing nothing), arrayFilters, object and numeric _ids with
 * their canonical keys, upsert seeding, $regex (and the proof, with the
 * docs-examined counter as conf_index.c does, that an anchored prefix on
 * an indexed field reads a range, not the collection), a pathological
 * $regex that fails instead of hanging, and aggregation, whose leading
 * $match uses an index the same way.  The concurrent positional $inc is
 * in conf_concurrency.c with the other multi-process tests. */
#include "conf.h"
#include "store/store.h"

#include <string.h>

/* The stored document matching filter, compared as exact JSON text (types
 * and field order count). */
#define EXPECT_EXACT(coll, filter, want)                                     \
  do {                                                                       \
    json_t *got_ = conf_keep(conf_get((coll), JQ(filter)));                  \
    char *g_ = got_ ? JDUMP(got_) : NULL, *w_ = JDUMP(JQ(want));             \
    CHECKF(g_ && !strcmp(g_, w_), "%s: got %s want %s", (filter),            \
           g_ ? g_ : "(none)", w_);                                          \
    free(g_);                                                                \
    free(w_);                                                                \
  } while (0)

static int update(const char *c, const char *f, const char *u,
                  const char *afs) {
  dtx_update_opts_t o = {.array_filters = afs ? JQ(afs) : NULL};
  dtx_update_result_t r;
  int rc = dtx_store_update(conf_st, c, JQ(f), JQ(u), &o, &r);
  json_decref(r.upserted_id);
  return rc;
}

/* ---- update operators ------------------------------------------------------ */

static void test_update_operators(void) {
  const char *c = conf_coll("mg_ops");
  CHECK_RC(dtx_store_insert(conf_st, c,
                            JQ("{'_id':1,'n':3,'f':2.5,'bits':13,"
                               "'old':{'x':1},'arr':[1,2,3,2],"
                               "'q':[{'s':5},{'s':9}],'g':[80,85,90]}"),
                            NULL),
           0);
  CHECK_RC(update(c, "{'_id':1}", "{'$mul':{'n':4,'f':2,'m':7}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$rename':{'old.x':'newx'}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$pop':{'arr':-1}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$pullAll':{'arr':[2]}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$bit':{'bits':{'and':10}}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}",
                  "{'$push':{'q':{'$each':[{'s':7},{'s':1}],'$sort':{'s':-1},"
                  "'$slice':3,'$position':0}}}",
                  NULL),
           0);
  CHECK_RC(update(c, "{'_id':1,'g':85}", "{'$inc':{'g.$':1}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$inc':{'q.$[].s':100}}", NULL), 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$set':{'g.$[x]':0}}",
                  "[{'x':{'$gte':90}}]"),
           0);
  EXPECT_EXACT(c, "{'_id':1}",
               "{'_id':1,'n':12,'f':5.0,'bits':8,'old':{},'arr':[3],"
               "'q':[{'s':109},{'s':107},{'s':105}],'g':[80,86,0],'m':0,"
               "'newx':1}");
  /* find-and-modify takes arrayFilters too */
  json_t *out = NULL;
  dtx_fam_opts_t fo = {.return_new = 1,
                       .array_filters = JQ("[{'e.s':{'$lt':106}}]")};
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':1}"),
                                         JQ("{'$set':{'q.$[e].low':true}}"),
                                         &fo, &out),
           0);
  conf_keep(out);
  CHECK(json_is_true(json_object_get(
      json_array_get(json_object_get(out, "q"), 2), "low")));
  /* $currentDate timestamp: seconds << 32 | increment */
  CHECK_RC(update(c, "{'_id':1}",
                  "{'$currentDate':{'ts':{'$type':'timestamp'}}}", NULL),
           0);
  json_t *d = conf_keep(conf_get(c, JQ("{'_id':1}")));
  json_int_t ts = json_integer_value(json_object_get(d, "ts"));
  CHECKF((ts >> 32) > 1600000000 && (ts & 0xffffffff) >= 1, "ts %lld",
         (long long)ts);
}

/* Each failing update changes nothing, on every backend. */
static void test_update_errors_change_nothing(void) {
  const char *c = conf_coll("mg_errs");
  const char *doc = "{'_id':1,'n':9223372036854775807,'d':1.5,"
                    "'a':[{'x':1}],'s':'t'}";
  CHECK_RC(dtx_store_insert(conf_st, c, JQ(doc), NULL), 0);
  static const struct {
    const char *filter, *update, *afs;
    int rc;
  } cases[] = {
      {"{'_id':1}", "{'$mul':{'n':2}}", NULL, DTX_EOVERFLOW},
      {"{'_id':1}", "{'$bit':{'d':{'or':1}}}", NULL, DTX_ETYPE},
      {"{'_id':1}", "{'$rename':{'a.x':'y'}}", NULL, DTX_ETYPE},
      {"{'_id':1}", "{'$rename':{'s':'a.z'}}", NULL, DTX_ETYPE},
      {"{'_id':1}", "{'$set':{'a.$.x':2}}", NULL, DTX_EBADUPDATE},
      {"{'_id':1}", "{'$set':{'b.$[]':2}}", NULL, DTX_EBADUPDATE},
      {"{'_id':1}", "{'$set':{'a.$[e].x':2}}", "[{'f':1}]", DTX_EBADUPDATE},
      {"{'_id':1}", "{'$set':{'a.$[e].x':2}}", NULL, DTX_EBADUPDATE},
      {"{'_id':1}", "{'$pop':{'s':1}}", NULL, DTX_ETYPE},
      {"{'_id':1}", "{'$set':{'x':1},'$mul':{'s':2}}", NULL, DTX_ETYPE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = update(c, cases[i].filter, cases[i].update, cases[i].afs);
    CHECKF(rc == cases[i].rc, "%s: %s (%s), want %s", cases[i].update,
           dtx_errname(rc), dtx_errdetail(), dtx_errname(cases[i].rc));
    EXPECT_EXACT(c, "{'_id':1}", doc);
  }
}

/* ---- _ids ------------------------------------------------------------------ */

static void test_object_and_numeric_ids(void) {
  const char *c = conf_coll("mg_ids");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':{'a':1,'b':2},'v':1}"),
                            NULL),
           0);
  /* equal objects collide, numbers by value */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':{'a':1,'b':2.0},'v':2}"),
                            NULL),
           DTX_EDUPKEY);
  /* field order counts, as in BSON */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':{'b':2,'a':1},'v':3}"),
                            NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7,'v':4}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7.0,'v':5}"), NULL),
           DTX_EDUPKEY);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7.5,'v':6}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'7','v':7}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':null,'v':8}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':true,'v':9}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':{'a':'1','b':2}}"), NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':{'$a':1}}"), NULL),
           DTX_EINVAL);
  CHECK(conf_count(c, NULL) == 8);
  /* by value, exactly: 2^53 + 1 and the double 2^53 are two _ids */
  const char *big = conf_coll("mg_ids_big");
  CHECK_RC(dtx_store_insert(conf_st, big, JQ("{'_id':9007199254740993}"),
                            NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, big, JQ("{'_id':9007199254740992.0}"),
                            NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, big, JQ("{'_id':9007199254740992}"),
                            NULL),
           DTX_EDUPKEY);
  CHECK(conf_count(big, JQ("{'_id':9007199254740993}")) == 1);
  EXPECT_EXACT(c, "{'_id':{'a':1.0,'b':2}}", "{'_id':{'a':1,'b':2},'v':1}");
  EXPECT_EXACT(c, "{'_id':{'b':2,'a':1}}", "{'_id':{'b':2,'a':1},'v':3}");
  EXPECT_EXACT(c, "{'_id':7.0}", "{'_id':7,'v':4}");
  EXPECT_EXACT(c, "{'_id':7.5}", "{'_id':7.5,'v':6}");
  EXPECT_EXACT(c, "{'_id':null}", "{'_id':null,'v':8}");
  EXPECT_EXACT(c, "{'_id':true}", "{'_id':true,'v':9}");
  CHECK(conf_count(c, JQ("{'_id':{'$in':[{'a':1,'b':2},7.0,'x']}}")) == 2);
  CHECK(conf_count(c, JQ("{'_id':{'a':1,'b':2},'v':1}")) == 1);
  CHECK(conf_count(c, JQ("{'_id.a':1}")) == 2);
  CHECK_RC(update(c, "{'_id':{'a':1,'b':2}}", "{'$inc':{'v':10}}", NULL), 0);
  EXPECT_EXACT(c, "{'_id':{'a':1,'b':2}}", "{'_id':{'a':1,'b':2},'v':11}");
  int64_t n = 0;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':7.0}"), 0, &n), 0);
  CHECK(n == 1);
  CHECK(conf_count(c, NULL) == 7);
  /* An upsert builds an object _id from dotted equalities. */
  dtx_update_opts_t o = {.upsert = 1};
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id.x':1,'_id.y':2}"),
                            JQ("{'$set':{'v':0}}"), &o, &r),
           0);
  CHECKF(r.upserted_id && !strcmp(JS(r.upserted_id), "{\"x\":1,\"y\":2}"),
         "upserted %s", JS(r.upserted_id));
  json_decref(r.upserted_id);
  EXPECT_EXACT(c, "{'_id':{'x':1,'y':2}}", "{'_id':{'x':1,'y':2},'v':0}");
  /* the second upsert finds it */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id.x':1,'_id.y':2}"),
                            JQ("{'$inc':{'v':1}}"), &o, &r),
           0);
  CHECK(r.matched == 1 && r.upserted_id == NULL);
}

/* Upserts seed from one-element $in/$all, a one-branch $or; a
 * replacement takes only the filter's _id. */
static void test_upsert_seeding(void) {
  const char *c = conf_coll("mg_upsert");
  dtx_update_opts_t o = {.upsert = 1};
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c,
                            JQ("{'_id':1,'a':{'$in':[5]},"
                               "'$or':[{'b':{'$all':['x']}}]}"),
                            JQ("{'$set':{'c':1}}"), &o, &r),
           0);
  json_decref(r.upserted_id);
  EXPECT_EXACT(c, "{'_id':1}", "{'_id':1,'a':5,'b':'x','c':1}");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2,'a':1}"),
                            JQ("{'b':2}"), &o, &r),
           0);
  json_decref(r.upserted_id);
  EXPECT_EXACT(c, "{'_id':2}", "{'_id':2,'b':2}");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':3,'a':{'$all':[1,2]}}"),
                            JQ("{'$set':{'c':1}}"), &o, &r),
           DTX_EBADQUERY);
  CHECK(conf_count(c, NULL) == 2);
}

/* ---- $regex ---------------------------------------------------------------- */

static int64_t examined(const char *c, const char *filter, int64_t *n) {
  int64_t before = dtx__docs_examined;
  *n = conf_count(c, JQ(filter));
  return dtx__docs_examined - before;
}

static void test_regex_uses_index_range(void) {
  const char *c = conf_coll("mg_regex");
  enum { N = 1000 };
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'name':1}"), NULL, NULL),
           0);
  json_t *docs = json_array();
  for (int i = 0; i < N; i++) {
    char name[32];
    snprintf(name, sizeof name, "%s%04d", i % 2 ? "odd" : "even", i);
    json_array_append_new(docs, json_pack("{sisssi}", "_id", i, "name", name,
                                          "k", i));
  }
  size_t ins = 0;
  CHECK_RC(dtx_store_insert_many(conf_st, c, conf_keep(docs), &ins, NULL), 0);
  int64_t n;
  /* "^odd000" is [odd000, odd001): odd0001 .. odd0009 */
  int64_t ex = examined(c, "{'name':{'$regex':'^odd000'}}", &n);
  CHECKF(n == 5, "matched %lld", (long long)n);
  CHECKF(ex <= 10, "anchored prefix examined %lld of %d documents",
         (long long)ex, N);
  ex = examined(c, "{'name':{'$regex':'^even00','$options':'s'}}", &n);
  CHECKF(n == 50 && ex <= 60, "matched %lld, examined %lld", (long long)n,
         (long long)ex);
  /* not anchored, or case-insensitive: the same answers, by a scan */
  CHECK(examined(c, "{'name':{'$regex':'d000[13]'}}", &n) >= 0 && n == 2);
  CHECK(examined(c, "{'name':{'$regex':'^ODD000','$options':'i'}}", &n) >=
            0 &&
        n == 5);
  CHECK(examined(c, "{'name':{'$not':{'$regex':'^e'}}}", &n) >= 0 &&
        n == N / 2);
  /* find and delete take the same route */
  dtx_find_opts_t fo = {.sort = JQ("{'k':-1}"), .limit = 2};
  json_t *found = conf_keep(conf_find(c, JQ("{'name':{'$regex':'^even09'}}"),
                                      &fo));
  CHECKF(found && !strcmp(conf_ids(found), "[998,996]"), "%s",
         found ? conf_ids(found) : "(error)");
  int64_t del = 0;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'name':{'$regex':'^odd09'}}"),
                            1, &del),
           0);
  CHECK(del == 50);
}

/* A pattern that backtracks without end fails the call with BADQUERY and
 * changes nothing; it does not hang. */
static void test_regex_limit_fails_cleanly(void) {
  const char *c = conf_coll("mg_regex_limit");
  CHECK_RC(dtx_store_insert(conf_st, c,
                            JQ("{'_id':1,'s':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                               "aaaaaaaaaaaaab'}"),
                            NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':2,'s':'aa'}"), NULL), 0);
  const char *bad = "{'s':{'$regex':'^(a|aa)+$'}}";
  int64_t del = -1;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ(bad), 1, &del), DTX_EBADQUERY);
  CHECK(strstr(dtx_errdetail(), "limit") != NULL);
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find(conf_st, c, JQ(bad), NULL, &out), DTX_EBADQUERY);
  CHECK(out == NULL);
  dtx_update_opts_t o = {.upsert = 1};
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':1,'s':{'$regex':'^(a|aa)+$'}}"),
                            JQ("{'$set':{'x':1}}"), &o, &r),
           DTX_EBADQUERY);
  CHECK(conf_count(c, NULL) == 2);
  CHECK(conf_count(c, JQ("{'x':1}")) == 0);
}

/* ---- aggregation ----------------------------------------------------------- */

static void test_aggregate(void) {
  const char *c = conf_coll("mg_ledger");
  const char *acc = conf_coll("mg_accounts");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'state':1}"), NULL, NULL),
           0);
  json_t *docs = json_array();
  enum { N = 400 };
  for (int i = 0; i < N; i++)
    json_array_append_new(
        docs, json_pack("{sisiss s[{sssisi}{sssisi}]}", "_id", i, "ts", i,
                        "state", i % 10 ? "VALID" : "VOID", "changes",
                        "account", i % 2 ? "A" : "B", "value", -i, "seqId", i,
                        "account", "C", "value", i, "seqId", i));
  CHECK_RC(dtx_store_insert_many(conf_st, c, conf_keep(docs), NULL, NULL), 0);
  CHECK_RC(dtx_store_insert_many(conf_st, acc,
                                 JQ("[{'_id':'A','owner':'ann'},"
                                    "{'_id':'B','owner':'bob'}]"),
                                 NULL, NULL),
           0);
  const char *pl =
      "[{'$match':{'state':'VALID'}},{'$unwind':'$changes'},"
      "{'$group':{'_id':'$changes.account','sum':{'$sum':'$changes.value'},"
      "'n':{'$sum':1}}},{'$sort':{'_id':1}}]";
  json_t *out = NULL;
  int64_t before = dtx__docs_examined;
  CHECK_RC(dtx_store_aggregate(conf_st, c, JQ(pl), NULL, &out), 0);
  int64_t ex = dtx__docs_examined - before;
  conf_keep(out);
  /* sums by hand: VALID are i % 10 != 0 */
  int64_t a = 0, b = 0, cc = 0, na = 0, nb = 0;
  for (int i = 0; i < N; i++) {
    if (i % 10 == 0)
      continue;
    if (i % 2)
      a -= i, na++;
    else
      b -= i, nb++;
    cc += i;
  }
  char want[256];
  snprintf(want, sizeof want,
           "[{\"_id\":\"A\",\"sum\":%lld,\"n\":%lld},"
           "{\"_id\":\"B\",\"sum\":%lld,\"n\":%lld},"
           "{\"_id\":\"C\",\"sum\":%lld,\"n\":%lld}]",
           (long long)a, (long long)na, (long long)b, (long long)nb,
           (long long)cc, (long long)(na + nb));
  char *got = out ? JDUMP(out) : NULL;
  CHECKF(got && !strcmp(got, want), "got %s\nwant %s", got ? got : "(null)",
         want);
  free(got);
  CHECKF(ex <= N * 9 / 10 + 5, "the indexed $match examined %lld of %d",
         (long long)ex, N);
  /* a selective leading $match reads only what the index gives */
  before = dtx__docs_examined;
  CHECK_RC(dtx_store_aggregate(conf_st, c,
                               JQ("[{'$match':{'state':'VOID'}},"
                                  "{'$sort':{'ts':-1}},{'$limit':2},"
                                  "{'$project':{'ts':1}}]"),
                               NULL, &out),
           0);
  ex = dtx__docs_examined - before;
  conf_keep(out);
  got = out ? JDUMP(out) : NULL;
  CHECKF(got && !strcmp(got, "[{\"_id\":390,\"ts\":390},"
                             "{\"_id\":380,\"ts\":380}]"),
         "%s", got ? got : "(null)");
  free(got);
  CHECKF(ex <= N / 10 + 5, "examined %lld", (long long)ex);
  /* an unsupported expression operator is refused by name */
  CHECK_RC(dtx_store_aggregate(conf_st, c,
                               JQ("[{'$match':{'_id':{'$in':[1,2]}}},"
                                  "{'$project':{'acct':{'$arrayElemAt':1}}}]"),
                               NULL, &out),
           DTX_EBADQUERY);
  CHECK(out == NULL && strstr(dtx_errdetail(), "$arrayElemAt"));
  /* $lookup reads the other collection through the store */
  char lk[400];
  snprintf(lk, sizeof lk,
           "[{'$match':{'_id':{'$in':[1,2]}}},{'$unwind':'$changes'},"
           "{'$lookup':{'from':'%s','localField':'changes.account',"
           "'foreignField':'_id','as':'who'}},"
           "{'$project':{'_id':0,'a':'$changes.account','o':'$who.owner'}}]",
           acc);
  CHECK_RC(dtx_store_aggregate(conf_st, c, JQ(lk), NULL, &out), 0);
  conf_keep(out);
  got = out ? JDUMP(out) : NULL;
  CHECKF(got && !strcmp(got, "[{\"a\":\"A\",\"o\":[\"ann\"]},"
                             "{\"a\":\"C\",\"o\":[]},"
                             "{\"a\":\"B\",\"o\":[\"bob\"]},"
                             "{\"a\":\"C\",\"o\":[]}]"),
         "%s", got ? got : "(null)");
  free(got);
  /* the memory limit and exact sums hold in the store too */
  dtx_agg_opts_t small = {.max_bytes = 1000};
  CHECK_RC(dtx_store_aggregate(conf_st, c,
                               JQ("[{'$project':{'ts':1,'changes':1}},"
                                  "{'$sort':{'ts':1}}]"),
                               &small, &out),
           DTX_ELIMIT);
  CHECK(out == NULL);
  CHECK_RC(dtx_store_aggregate(conf_st, c, JQ("[{'$bogus':1}]"), NULL, &out),
           DTX_EBADQUERY);
  CHECK_RC(dtx_store_aggregate(conf_st, "bad name", JQ("[]"), NULL, &out),
           DTX_EINVAL);
}

/* Projection operators through find and find-and-modify: the positional
 * $ of a returned new document takes the element the query matched. */
static void test_projection_operators(void) {
  const char *c = conf_coll("mg_proj");
  CHECK_RC(dtx_store_insert(conf_st, c,
                            JQ("{'_id':1,'g':[80,85,90],'s':[{'k':1},"
                               "{'k':2}],'n':'x'}"),
                            NULL),
           0);
  dtx_find_opts_t fo = {.projection = JQ("{'g.$':1}")};
  json_t *docs = conf_keep(conf_find(c, JQ("{'g':{'$gte':85}}"), &fo));
  char *got = docs ? JDUMP(docs) : NULL;
  CHECKF(got && !strcmp(got, "[{\"_id\":1,\"g\":[85]}]"), "%s",
         got ? got : "(null)");
  free(got);
  fo.projection = JQ("{'g':{'$slice':-1},'s':{'$elemMatch':{'k':2}},'n':1}");
  docs = conf_keep(conf_find(c, JQ("{}"), &fo));
  got = docs ? JDUMP(docs) : NULL;
  CHECKF(got && !strcmp(got, "[{\"_id\":1,\"g\":[90],\"s\":[{\"k\":2}],"
                             "\"n\":\"x\"}]"),
         "%s", got ? got : "(null)");
  free(got);
  /* the query must name the array, checked before anything is read */
  json_t *out = conf_poison;
  fo.projection = JQ("{'g.$':1}");
  CHECK_RC(dtx_store_find(conf_st, c, JQ("{'_id':1}"), &fo, &out),
           DTX_EBADQUERY);
  CHECK(out == NULL);
  dtx_fam_opts_t fam = {.projection = JQ("{'g.$':1}"), .return_new = 1};
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':1}"),
                                         JQ("{'$set':{'n':'y'}}"), &fam,
                                         &out),
           DTX_EBADQUERY);
  EXPECT_EXACT(c, "{'_id':1}",
               "{'_id':1,'g':[80,85,90],'s':[{'k':1},{'k':2}],'n':'x'}");
  /* the new document no longer matches; the element is still the one the
   * query matched */
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':1,'g':85}"),
                                         JQ("{'$set':{'g.$':99}}"), &fam,
                                         &out),
           0);
  conf_keep(out);
  got = out ? JDUMP(out) : NULL;
  CHECKF(got && !strcmp(got, "{\"_id\":1,\"g\":[99]}"), "%s",
         got ? got : "(null)");
  free(got);
}

void conf_run_mongo(void) {
  CONF_RUN(test_update_operators);
  CONF_RUN(test_update_errors_change_nothing);
  CONF_RUN(test_object_and_numeric_ids);
  CONF_RUN(test_upsert_seeding);
  CONF_RUN(test_projection_operators);
  CONF_RUN(test_regex_uses_index_range);
  CONF_RUN(test_regex_limit_fails_cleanly);
  CONF_RUN(test_aggregate);
}
