/* conf_crud.c -- conformance: inserting, reading, updating and deleting.
 *
 * Covers the single-process contract of every dtx_store_* data call in
 * doctx.h: _id rules, insert_many's stop-at-first-error, find's sort, skip,
 * limit and projection, update/upsert result counts, find_one_and_update
 * and find_one_and_delete, and the rule that an error leaves a document
 * exactly as it was.  Values are checked exactly, so a backend that loses
 * an int64 bit, a field order or an update half-way fails here. */
#include "conf.h"

#include <ctype.h>
#include <string.h>
#include <time.h>

/* Checks that the document selected by filter equals want (JSON texts in
 * JQ quoting). */
#define EXPECT_DOC(coll, filter, want)                                       \
  do {                                                                       \
    json_t *got_ = conf_keep(conf_get((coll), JQ(filter)));                  \
    CHECKF(got_ && json_equal(got_, JQ(want)), "%s: got %s want %s",         \
           (filter), JS(got_), (want));                                      \
  } while (0)

/* Checks the _ids that find(filter, opts) returns, in order. */
#define EXPECT_IDS(coll, filter, opts, want)                                 \
  do {                                                                       \
    json_t *all_ = conf_keep(conf_find((coll), (filter), (opts)));           \
    const char *ids_ = all_ ? conf_ids(all_) : "(error)";                    \
    CHECKF(strcmp(ids_, (want)) == 0, "find %s: got %s want %s",             \
           JS(filter), ids_, (want));                                        \
  } while (0)

static int is_hex24(const char *s) {
  if (!s || strlen(s) != 24)
    return 0;
  for (int i = 0; i < 24; i++)
    if (!isxdigit((unsigned char)s[i]))
      return 0;
  return 1;
}

/* ---- store handle and errors ------------------------------------------- */

static void test_store_uri_and_error_names(void) {
  const char *u = dtx_store_uri(conf_st);
  REQUIRE(u != NULL);
  /* The canonical URI may add defaults but keeps the scheme. */
  size_t scheme = strcspn(conf_uri, ":");
  CHECKF(strncmp(u, conf_uri, scheme + 1) == 0, "uri %s for %s", u,
         conf_uri);

  dtx_store_t *bad = (dtx_store_t *)conf_poison;
  CHECK_RC(dtx_store_open("nosuchscheme:whatever", &bad), DTX_EBADURI);
  CHECK(bad == NULL);
  dtx_store_close(NULL);

  CHECK(strcmp(dtx_errname(DTX_EDUPKEY), "DUPKEY") == 0);
  CHECK(strcmp(dtx_errname(0), "OK") == 0);
  CHECK(strcmp(dtx_errname(12345), "UNKNOWN") == 0);
  CHECK(strcmp(dtx_strerror(DTX_ENOMATCH), "no document matched") == 0);

  /* An error leaves a detail naming what went wrong. */
  const char *c = conf_coll("errdetail");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'k'}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'k'}"), NULL),
           DTX_EDUPKEY);
  CHECKF(dtx_errdetail()[0] != '\0', "empty detail after DUPKEY");
}

/* ---- insert ------------------------------------------------------------- */

static void test_insert_generated_id(void) {
  const char *c = conf_coll("genid");
  json_t *doc = JQ("{'a':1}");
  json_t *id1 = NULL, *id2 = NULL;
  CHECK_RC(dtx_store_insert(conf_st, c, doc, &id1), 0);
  conf_keep(id1);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'a':2}"), &id2), 0);
  conf_keep(id2);
  REQUIRE(json_is_string(id1) && json_is_string(id2));
  CHECKF(is_hex24(json_string_value(id1)), "id %s", JS(id1));
  CHECKF(is_hex24(json_string_value(id2)), "id %s", JS(id2));
  /* Generated ids are time ordered: the later insert sorts after. */
  CHECKF(strcmp(json_string_value(id1), json_string_value(id2)) < 0,
         "%s then %s", JS(id1), JS(id2));
  /* The caller's document is not modified. */
  CHECK(json_object_get(doc, "_id") == NULL && json_object_size(doc) == 1);

  json_t *f = conf_keep(json_pack("{sO}", "_id", id1));
  json_t *got = conf_keep(conf_get(c, f));
  json_t *want = conf_keep(json_pack("{sOsi}", "_id", id1, "a", 1));
  CHECKF(got && json_equal(got, want), "got %s", JS(got));
  /* Natural order is insertion order. */
  json_t *all = conf_keep(conf_find(c, NULL, NULL));
  REQUIRE(all && json_array_size(all) == 2);
  CHECK(json_equal(json_object_get(json_array_get(all, 0), "_id"), id1));
  CHECK(json_equal(json_object_get(json_array_get(all, 1), "_id"), id2));
}

static void test_insert_given_ids(void) {
  const char *c = conf_coll("givenid");
  static const char *docs[] = {
      "{'_id':'abc','v':'s'}", "{'_id':1,'v':'int'}", "{'_id':'1','v':'str'}",
      "{'_id':-9223372036854775808,'v':'min'}",
      "{'_id':9223372036854775807,'v':'max'}"};
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    json_t *id = conf_poison;
    CHECK_RC(dtx_store_insert(conf_st, c, JQ(docs[i]), &id), 0);
    CHECKF(id != conf_poison &&
               json_equal(id, json_object_get(JQ(docs[i]), "_id")),
           "id_out %s for %s", JS(id), docs[i]);
    if (id != conf_poison)
      json_decref(id);
  }
  CHECK(conf_count(c, NULL) == 5);
  /* 1 and "1" are different ids. */
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'v':'int'}");
  EXPECT_DOC(c, "{'_id':'1'}", "{'_id':'1','v':'str'}");
  EXPECT_DOC(c, "{'_id':-9223372036854775808}",
             "{'_id':-9223372036854775808,'v':'min'}");
  /* Insertion order, not _id order. */
  EXPECT_IDS(c, NULL, NULL,
             "[\"abc\",1,\"1\",-9223372036854775808,9223372036854775807]");
}

static void test_insert_duplicate_id_changes_nothing(void) {
  const char *c = conf_coll("dupid");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7,'v':'first'}"), NULL),
           0);
  json_t *id = conf_poison;
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7,'v':'second'}"), &id),
           DTX_EDUPKEY);
  CHECK(id == NULL);
  CHECK(conf_count(c, NULL) == 1);
  EXPECT_DOC(c, "{'_id':7}", "{'_id':7,'v':'first'}");
  /* A double equal to the integer is the same _id (MongoDB compares
   * numbers by value), so it cannot sneak in as a second copy either. */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7.0}"), NULL),
           DTX_EDUPKEY);
  CHECK(conf_count(c, NULL) == 1);
}

static void test_insert_invalid(void) {
  const char *c = conf_coll("invalid");
  static const char *bad_docs[] = {
      "[1,2]",          "'text'",          "5",
      "null",           "true",            "{'_id':[1]}",
      "{'_id':[]}",     "{'_id':''}",      "{'_id':{'$a':1}}",
      "{'_id':{'a.b':1}}",
  };
  for (size_t i = 0; i < sizeof bad_docs / sizeof bad_docs[0]; i++) {
    json_t *id = conf_poison;
    int rc = dtx_store_insert(conf_st, c, JQ(bad_docs[i]), &id);
    CHECKF(rc == DTX_EINVAL, "%s: %s", bad_docs[i], dtx_errname(rc));
    CHECKF(id == NULL, "%s: id_out not NULL", bad_docs[i]);
  }
  CHECK(conf_count(c, NULL) == 0);

  char longname[130];
  memset(longname, 'x', 121);
  longname[121] = '\0';
  const char *bad_names[] = {"", "has space", "_dtx_internal", "system.x",
                             "slash/no", longname};
  for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
    int rc = dtx_store_insert(conf_st, bad_names[i], JQ("{'a':1}"), NULL);
    CHECKF(rc == DTX_EINVAL, "insert into '%s': %s", bad_names[i],
           dtx_errname(rc));
    json_t *out = conf_poison;
    rc = dtx_store_find(conf_st, bad_names[i], NULL, NULL, &out);
    CHECKF(rc == DTX_EINVAL && out == NULL, "find in '%s': %s",
           bad_names[i], dtx_errname(rc));
  }
}

/* Values come back exactly: int64 extremes, doubles stay doubles,
 * integers stay integers, strings keep their bytes and objects their field
 * order. */
static void test_values_round_trip_exactly(void) {
  const char *c = conf_coll("values");
  const char *text =
      "{\"_id\":1,\"z\":1,\"a\":2,\"max\":9223372036854775807,"
      "\"min\":-9223372036854775808,\"big\":9007199254740993,"
      "\"d\":1.0,\"pi\":3.25,\"neg\":-0.5,\"e\":1e+300,"
      "\"u\":\"h\\u00e9llo \\u2603 \\ud83d\\ude00\",\"q\":\"a\\\"b\\\\c\\n\","
      "\"n\":null,\"t\":true,\"f\":false,\"eo\":{},\"ea\":[],"
      "\"nest\":{\"b\":[1,{\"c\":[[]]}],\"a\":{\"y\":1,\"x\":2}}}";
  json_t *doc = conf_keep(J(text));
  CHECK_RC(dtx_store_insert(conf_st, c, doc, NULL), 0);
  json_t *got = conf_keep(conf_get(c, JQ("{'_id':1}")));
  REQUIRE(got != NULL);
  CHECKF(json_equal(got, doc), "got %s", JS(got));
  CHECK(json_is_real(json_object_get(got, "d")));
  CHECK(json_is_integer(json_object_get(got, "big")) &&
        json_integer_value(json_object_get(got, "big")) ==
            9007199254740993LL);
  char *dumped = json_dumps(got, JSON_COMPACT);
  char *want = json_dumps(doc, JSON_COMPACT);
  CHECKF(dumped && want && strcmp(dumped, want) == 0,
         "field order changed:\n got %s\nwant %s", dumped, want);
  free(dumped);
  free(want);

  /* A large document. */
  size_t n = 200000;
  char *big = malloc(n + 1);
  REQUIRE(big != NULL);
  for (size_t i = 0; i < n; i++)
    big[i] = (char)('a' + i % 26);
  big[n] = '\0';
  json_t *bd = conf_keep(json_pack("{siss}", "_id", 2, "s", big));
  free(big);
  CHECK_RC(dtx_store_insert(conf_st, c, bd, NULL), 0);
  json_t *bg = conf_keep(conf_get(c, JQ("{'_id':2}")));
  CHECK(bg && json_equal(bg, bd));
}

static void test_insert_many(void) {
  const char *c = conf_coll("many");
  size_t n = 99;
  json_t *ids = NULL;
  CHECK_RC(dtx_store_insert_many(conf_st, c,
                                 JQ("[{'_id':1},{'x':1},{'_id':'s'}]"), &n,
                                 &ids),
           0);
  conf_keep(ids);
  CHECK(n == 3);
  REQUIRE(json_is_array(ids) && json_array_size(ids) == 3);
  CHECK(json_equal(json_array_get(ids, 0), JQ("1")));
  CHECK(is_hex24(json_string_value(json_array_get(ids, 1))));
  CHECK(json_equal(json_array_get(ids, 2), JQ("'s'")));
  CHECK(conf_count(c, NULL) == 3);

  /* Ordered: stops at the duplicate, keeps what went in before it. */
  n = 99;
  int rc = dtx_store_insert_many(
      conf_st, c, JQ("[{'_id':10},{'_id':11},{'_id':1},{'_id':12}]"), &n,
      NULL);
  CHECK_RC(rc, DTX_EDUPKEY);
  CHECK(n == 2);
  CHECK(conf_count(c, NULL) == 5);
  CHECK(conf_count(c, JQ("{'_id':12}")) == 0);
  CHECK(conf_count(c, JQ("{'_id':{'$in':[10,11]}}")) == 2);

  /* A duplicate inside the batch itself. */
  n = 99;
  rc = dtx_store_insert_many(conf_st, c, JQ("[{'_id':20},{'_id':20}]"), &n,
                             NULL);
  CHECK_RC(rc, DTX_EDUPKEY);
  CHECK(n == 1);
  CHECK(conf_count(c, JQ("{'_id':20}")) == 1);

  /* A non-document element stops it too.  Whether the documents before
   * it went in (ordered) or the batch was refused up front, *ninserted
   * and the ids must say what the store holds. */
  n = 99;
  ids = conf_poison;
  rc = dtx_store_insert_many(conf_st, c, JQ("[{'_id':30},7,{'_id':31}]"), &n,
                             &ids);
  CHECK_RC(rc, DTX_EINVAL);
  CHECKF(n <= 1, "n=%zu", n);
  CHECKF(conf_count(c, JQ("{'_id':{'$in':[30,31]}}")) == (int64_t)n,
         "n=%zu but the store holds %lld", n,
         (long long)conf_count(c, JQ("{'_id':{'$in':[30,31]}}")));
  CHECKF(ids == NULL || (json_is_array(ids) && json_array_size(ids) == n &&
                         (n == 0 || json_equal(json_array_get(ids, 0),
                                               JQ("30")))),
         "ids_out %s", JS(ids));
  if (ids != conf_poison)
    conf_keep(ids);

  CHECK_RC(dtx_store_insert_many(conf_st, c, JQ("{'_id':40}"), NULL, NULL),
           DTX_EINVAL);
  CHECK(conf_count(c, JQ("{'_id':40}")) == 0);
}

/* ---- find and count ------------------------------------------------------- */

static const char *SORT_DOCS =
    "[{'_id':1,'g':'b','v':1},{'_id':2,'g':'a','v':2},"
    "{'_id':3,'g':'b','v':3},{'_id':4,'g':'a','v':1},{'_id':5,'g':'c','v':0}]";

static void test_find_sort_skip_limit(void) {
  const char *c = conf_coll("sort");
  REQUIRE(conf_seed(c, SORT_DOCS) == 0);
  static const struct {
    const char *sort;
    int64_t skip, limit;
    const char *want;
  } cases[] = {
      {NULL, 0, 0, "[1,2,3,4,5]"},
      {"{'g':1,'v':-1}", 0, 0, "[2,4,3,1,5]"},
      {"{'g':-1,'v':1}", 0, 0, "[5,1,3,4,2]"},
      {"{'v':1,'_id':-1}", 0, 0, "[5,4,1,2,3]"},
      {"{'v':-1}", 0, 1, "[3]"},
      {"{'_id':-1}", 0, 0, "[5,4,3,2,1]"},
      {"{'g':1,'v':-1}", 1, 2, "[4,3]"},
      {"{'g':1,'v':-1}", 4, 0, "[5]"},
      {"{'g':1,'v':-1}", 5, 0, "[]"},
      {"{'g':1,'v':-1}", 100, 3, "[]"},
      {NULL, 2, 0, "[3,4,5]"},
      {NULL, 1, 1, "[2]"},
      {NULL, 0, 100, "[1,2,3,4,5]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dtx_find_opts_t o = {0};
    o.sort = cases[i].sort ? JQ(cases[i].sort) : NULL;
    o.skip = cases[i].skip;
    o.limit = cases[i].limit;
    json_t *all = conf_keep(conf_find(c, NULL, &o));
    const char *ids = all ? conf_ids(all) : "(error)";
    CHECKF(strcmp(ids, cases[i].want) == 0,
           "sort %s skip %lld limit %lld: got %s want %s",
           cases[i].sort ? cases[i].sort : "none", (long long)cases[i].skip,
           (long long)cases[i].limit, ids, cases[i].want);
  }
  /* Filter, sort and limit together. */
  dtx_find_opts_t o = {.sort = JQ("{'v':-1}"), .limit = 1};
  EXPECT_IDS(c, JQ("{'g':'a'}"), &o, "[2]");
}

static void test_find_projection(void) {
  const char *c = conf_coll("proj");
  REQUIRE(conf_seed(c, "[{'_id':1,'a':1,'b':{'c':2,'d':3},'e':[1,2]}]") ==
          0);
  static const struct {
    const char *proj, *want;
  } cases[] = {
      {"{'a':1}", "{'_id':1,'a':1}"},
      {"{'a':1,'_id':0}", "{'a':1}"},
      {"{'a':0}", "{'_id':1,'b':{'c':2,'d':3},'e':[1,2]}"},
      {"{'_id':0}", "{'a':1,'b':{'c':2,'d':3},'e':[1,2]}"},
      {"{'b.c':1}", "{'_id':1,'b':{'c':2}}"},
      {"{'b.c':0,'e':0}", "{'_id':1,'a':1,'b':{'d':3}}"},
      {"{'nosuch':1}", "{'_id':1}"},
      {"{'a':1,'e':1}", "{'_id':1,'a':1,'e':[1,2]}"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dtx_find_opts_t o = {.projection = JQ(cases[i].proj)};
    json_t *all = conf_keep(conf_find(c, NULL, &o));
    json_t *got = all ? json_array_get(all, 0) : NULL;
    CHECKF(got && json_array_size(all) == 1 &&
               json_equal(got, JQ(cases[i].want)),
           "projection %s: got %s want %s", cases[i].proj, JS(got),
           cases[i].want);
  }
  /* The stored document is untouched by projecting it. */
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'a':1,'b':{'c':2,'d':3},'e':[1,2]}");
}

static void test_find_errors(void) {
  const char *c = conf_coll("finderr");
  REQUIRE(conf_seed(c, "[{'_id':1,'a':1}]") == 0);
  static const struct {
    const char *filter, *sort, *proj;
    int64_t skip, limit;
    int want;
  } cases[] = {
      {"{'$foo':1}", NULL, NULL, 0, 0, DTX_EBADQUERY},
      {"{'a':{'$bogus':1}}", NULL, NULL, 0, 0, DTX_EBADQUERY},
      {"{'$or':{}}", NULL, NULL, 0, 0, DTX_EBADQUERY},
      {"{'a':{'$in':5}}", NULL, NULL, 0, 0, DTX_EBADQUERY},
      {NULL, "{'a':2}", NULL, 0, 0, DTX_EINVAL},
      {NULL, "{'a':'up'}", NULL, 0, 0, DTX_EINVAL},
      {NULL, NULL, "{'a':1,'b':0}", 0, 0, DTX_EINVAL},
      {NULL, NULL, NULL, -1, 0, DTX_EINVAL},
      {NULL, NULL, NULL, 0, -1, DTX_EINVAL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    dtx_find_opts_t o = {0};
    o.sort = cases[i].sort ? JQ(cases[i].sort) : NULL;
    o.projection = cases[i].proj ? JQ(cases[i].proj) : NULL;
    o.skip = cases[i].skip;
    o.limit = cases[i].limit;
    json_t *out = conf_poison;
    json_t *f = cases[i].filter ? JQ(cases[i].filter) : NULL;
    int rc = dtx_store_find(conf_st, c, f, &o, &out);
    CHECKF(rc == cases[i].want && out == NULL, "case %zu: %s, out %s", i,
           dtx_errname(rc), out == NULL ? "NULL" : "set");
    if (f) {
      int64_t n = 5;
      rc = dtx_store_count(conf_st, c, f, &n);
      CHECKF(rc == cases[i].want, "count case %zu: %s", i, dtx_errname(rc));
    }
  }
  /* A collection that does not exist reads as empty. */
  const char *none = conf_coll("neverwritten");
  EXPECT_IDS(none, JQ("{'a':1}"), NULL, "[]");
  CHECK(conf_count(none, NULL) == 0);
}

static void test_count(void) {
  const char *c = conf_coll("count");
  REQUIRE(conf_seed(c, SORT_DOCS) == 0);
  CHECK(conf_count(c, NULL) == 5);
  CHECK(conf_count(c, JQ("{}")) == 5);
  CHECK(conf_count(c, JQ("{'g':'b'}")) == 2);
  CHECK(conf_count(c, JQ("{'v':{'$gte':1}}")) == 4);
  CHECK(conf_count(c, JQ("{'g':'zz'}")) == 0);
}

/* ---- update --------------------------------------------------------------- */

static int update(const char *c, const char *filter, const char *upd,
                  int many, int upsert, dtx_update_result_t *res) {
  dtx_update_opts_t o = {.many = many, .upsert = upsert};
  memset(res, 0x5a, sizeof *res);
  int rc = dtx_store_update(conf_st, c, filter ? JQ(filter) : NULL, JQ(upd),
                            &o, res);
  conf_keep(res->upserted_id);
  return rc;
}

static void test_update_counts(void) {
  const char *c = conf_coll("updcount");
  REQUIRE(conf_seed(c, SORT_DOCS) == 0);
  dtx_update_result_t r;

  CHECK_RC(update(c, "{'g':'b'}", "{'$set':{'w':1}}", 0, 0, &r), 0);
  CHECK(r.matched == 1 && r.modified == 1 && r.upserted_id == NULL);
  CHECK(conf_count(c, JQ("{'w':1}")) == 1);
  /* update one takes the first match in natural order. */
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'g':'b','v':1,'w':1}");

  CHECK_RC(update(c, "{'g':'b'}", "{'$set':{'w':2}}", 1, 0, &r), 0);
  CHECK(r.matched == 2 && r.modified == 2 && r.upserted_id == NULL);
  CHECK(conf_count(c, JQ("{'w':2}")) == 2);

  /* Setting the same value matches but does not modify. */
  CHECK_RC(update(c, "{'g':'b'}", "{'$set':{'w':2}}", 1, 0, &r), 0);
  CHECK(r.matched == 2 && r.modified == 0);
  CHECK_RC(update(c, "{'_id':1}", "{'$set':{'w':2,'g':'b'}}", 0, 0, &r), 0);
  CHECK(r.matched == 1 && r.modified == 0);

  /* One changes, one already has the value. */
  CHECK_RC(update(c, "{'_id':{'$in':[1,2]}}", "{'$set':{'w':2}}", 1, 0, &r),
           0);
  CHECK(r.matched == 2 && r.modified == 1);

  CHECK_RC(update(c, "{'g':'none'}", "{'$set':{'w':3}}", 1, 0, &r), 0);
  CHECK(r.matched == 0 && r.modified == 0 && r.upserted_id == NULL);
  CHECK_RC(update(c, "{'g':'none'}", "{'$set':{'w':3}}", 0, 0, &r), 0);
  CHECK(r.matched == 0 && r.modified == 0 && r.upserted_id == NULL);

  CHECK_RC(update(c, NULL, "{'$inc':{'v':10}}", 1, 0, &r), 0);
  CHECK(r.matched == 5 && r.modified == 5);
  CHECK(conf_count(c, JQ("{'v':{'$gte':10}}")) == 5);
  CHECK(conf_count(c, NULL) == 5);
}

static void test_update_replacement(void) {
  const char *c = conf_coll("replace");
  REQUIRE(conf_seed(c, "[{'_id':1,'a':1,'b':2},{'_id':2,'a':1}]") == 0);
  dtx_update_result_t r;
  CHECK_RC(update(c, "{'_id':1}", "{'c':3}", 0, 0, &r), 0);
  CHECK(r.matched == 1 && r.modified == 1);
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'c':3}");
  /* A replacement carrying the same _id is fine. */
  CHECK_RC(update(c, "{'_id':1}", "{'_id':1,'d':4}", 0, 0, &r), 0);
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'d':4}");
  CHECK_RC(update(c, "{'_id':1}", "{'_id':1,'d':4}", 0, 0, &r), 0);
  CHECK(r.matched == 1 && r.modified == 0);
  EXPECT_DOC(c, "{'_id':2}", "{'_id':2,'a':1}");
}

/* Update operators applied through the store, with the modified count the
 * store reports (0 when the operator leaves the document as it was). */
static void test_update_operators_through_store(void) {
  const char *c = conf_coll("operators");
  static const struct {
    const char *start, *update, *want;
    int modified;
  } cases[] = {
      {"{'a':1}", "{'$unset':{'a':''}}", "{}", 1},
      {"{'a':1}", "{'$unset':{'zz':''}}", "{'a':1}", 0},
      {"{'a':5}", "{'$min':{'a':3}}", "{'a':3}", 1},
      {"{'a':5}", "{'$min':{'a':7}}", "{'a':5}", 0},
      {"{'a':5}", "{'$max':{'a':7}}", "{'a':7}", 1},
      {"{'l':[1]}", "{'$push':{'l':2}}", "{'l':[1,2]}", 1},
      {"{}", "{'$push':{'l':{'$each':[1,2]}}}", "{'l':[1,2]}", 1},
      {"{'l':[1,2]}", "{'$addToSet':{'l':2}}", "{'l':[1,2]}", 0},
      {"{'l':[1,2]}", "{'$addToSet':{'l':{'$each':[2,3]}}}", "{'l':[1,2,3]}",
       1},
      {"{'l':[1,2,1,3]}", "{'$pull':{'l':1}}", "{'l':[2,3]}", 1},
      {"{'l':[1,5,9]}", "{'$pull':{'l':{'$gte':5}}}", "{'l':[1]}", 1},
      {"{'a':{'b':1}}", "{'$set':{'a.c':2}}", "{'a':{'b':1,'c':2}}", 1},
      {"{}", "{'$set':{'x.y.z':1}}", "{'x':{'y':{'z':1}}}", 1},
      {"{'a':1.5}", "{'$inc':{'a':1}}", "{'a':2.5}", 1},
      {"{'a':1}", "{'$inc':{'a':0}}", "{'a':1}", 0},
      {"{'a':[1,2]}", "{'$set':{'a.1':9}}", "{'a':[1,9]}", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *doc = json_copy(JQ(cases[i].start));
    json_object_set_new(doc, "_id", json_integer((json_int_t)i));
    CHECK_RC(dtx_store_insert(conf_st, c, doc, NULL), 0);
    json_decref(doc);
    json_t *f = conf_keep(json_pack("{sI}", "_id", (json_int_t)i));
    dtx_update_result_t r;
    int rc = dtx_store_update(conf_st, c, f, JQ(cases[i].update), NULL, &r);
    CHECKF(rc == 0 && r.matched == 1 && r.modified == cases[i].modified,
           "%s on %s: %s matched %lld modified %lld (%s)", cases[i].update,
           cases[i].start, dtx_errname(rc), (long long)r.matched,
           (long long)r.modified, dtx_errdetail());
    json_t *want = json_copy(JQ(cases[i].want));
    json_object_set_new(want, "_id", json_integer((json_int_t)i));
    json_t *got = conf_keep(conf_get(c, f));
    CHECKF(got && json_equal(got, want), "%s on %s: got %s", cases[i].update,
           cases[i].start, JS(got));
    json_decref(want);
  }
}

static void test_current_date_is_epoch_ms(void) {
  const char *c = conf_coll("curdate");
  REQUIRE(conf_seed(c, "[{'_id':1}]") == 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t before = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  dtx_update_result_t r;
  CHECK_RC(update(c, "{'_id':1}", "{'$currentDate':{'t':true}}", 0, 0, &r),
           0);
  clock_gettime(CLOCK_REALTIME, &ts);
  int64_t after = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
  int64_t t = conf_int_field(c, 1, "t");
  CHECKF(t >= before - 1000 && t <= after + 1000, "t=%lld in [%lld,%lld]",
         (long long)t, (long long)before, (long long)after);
}

static void test_update_upsert(void) {
  const char *c = conf_coll("upsert");
  dtx_update_result_t r;
  /* Seeded from the filter's equalities only; $setOnInsert applies. */
  CHECK_RC(update(c, "{'name':'x','kind':{'$gt':1},'a.b':5}",
                  "{'$set':{'v':1},'$setOnInsert':{'created':true}}", 0, 1,
                  &r),
           0);
  CHECK(r.matched == 0 && r.modified == 0);
  REQUIRE(r.upserted_id != NULL);
  CHECKF(is_hex24(json_string_value(r.upserted_id)), "upserted_id %s",
         JS(r.upserted_id));
  json_t *got = conf_keep(conf_get(c, JQ("{'name':'x'}")));
  REQUIRE(got != NULL);
  json_t *want = conf_keep(json_pack(
      "{sOsss{si}sisb}", "_id", r.upserted_id, "name", "x", "a", "b", 5, "v",
      1, "created", 1));
  CHECKF(json_equal(got, want), "got %s want %s", JS(got), JS(want));

  /* A matching upsert updates: no insert, no $setOnInsert. */
  CHECK_RC(update(c, "{'name':'x'}",
                  "{'$set':{'v':2},'$setOnInsert':{'other':1}}", 0, 1, &r),
           0);
  CHECK(r.matched == 1 && r.modified == 1 && r.upserted_id == NULL);
  CHECK(conf_count(c, NULL) == 1);
  CHECK(conf_count(c, JQ("{'other':{'$exists':true}}")) == 0);

  /* _id from the filter. */
  CHECK_RC(update(c, "{'_id':'u1'}", "{'$inc':{'n':5}}", 0, 1, &r), 0);
  CHECK(r.matched == 0 && json_equal(r.upserted_id, JQ("'u1'")));
  EXPECT_DOC(c, "{'_id':'u1'}", "{'_id':'u1','n':5}");
  CHECK_RC(update(c, "{'_id':'u1'}", "{'$inc':{'n':5}}", 0, 1, &r), 0);
  CHECK(r.matched == 1 && r.modified == 1 && r.upserted_id == NULL);
  EXPECT_DOC(c, "{'_id':'u1'}", "{'_id':'u1','n':10}");

  /* Seeds through $and; a replacement upsert keeps the filter's _id. */
  CHECK_RC(update(c, "{'$and':[{'_id':77},{'k':'v'}]}", "{'$set':{'z':1}}",
                  0, 1, &r),
           0);
  CHECK(json_equal(r.upserted_id, JQ("77")));
  EXPECT_DOC(c, "{'_id':77}", "{'_id':77,'k':'v','z':1}");
  CHECK_RC(update(c, "{'_id':78}", "{'only':1}", 0, 1, &r), 0);
  CHECK(json_equal(r.upserted_id, JQ("78")));
  EXPECT_DOC(c, "{'_id':78}", "{'_id':78,'only':1}");

  /* upsert with many: updates all matches when there are some. */
  CHECK_RC(update(c, "{'_id':{'$in':[77,78]}}", "{'$set':{'m':1}}", 1, 1, &r),
           0);
  CHECK(r.matched == 2 && r.modified == 2 && r.upserted_id == NULL);
  CHECK(conf_count(c, NULL) == 4);
}

/* ---- find_one_and_update ---------------------------------------------------- */

static int fam(const char *c, const char *filter, const char *upd,
               const char *sort, int upsert, int return_new, json_t **out) {
  dtx_fam_opts_t o = {.sort = sort ? JQ(sort) : NULL,
                      .upsert = upsert,
                      .return_new = return_new};
  *out = conf_poison;
  int rc = dtx_store_find_one_and_update(conf_st, c, filter ? JQ(filter) : NULL,
                                         JQ(upd), &o, out);
  if (*out != conf_poison)
    conf_keep(*out);
  return rc;
}

static void test_fam_before_and_after(void) {
  const char *c = conf_coll("fam");
  REQUIRE(conf_seed(c, "[{'_id':1,'n':1,'s':'a'}]") == 0);
  json_t *out;
  CHECK_RC(fam(c, "{'_id':1}", "{'$inc':{'n':1}}", NULL, 0, 0, &out), 0);
  CHECKF(json_equal(out, JQ("{'_id':1,'n':1,'s':'a'}")), "before %s",
         JS(out));
  CHECK_RC(fam(c, "{'_id':1}", "{'$inc':{'n':1}}", NULL, 0, 1, &out), 0);
  CHECKF(json_equal(out, JQ("{'_id':1,'n':3,'s':'a'}")), "after %s", JS(out));
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'n':3,'s':'a'}");
  /* The filter is evaluated atomically with the change. */
  CHECK_RC(fam(c, "{'_id':1,'n':3}", "{'$set':{'n':10}}", NULL, 0, 1, &out),
           0);
  CHECK_RC(fam(c, "{'_id':1,'n':3}", "{'$set':{'n':11}}", NULL, 0, 1, &out),
           DTX_ENOMATCH);
  CHECK(out == NULL);
  CHECK(conf_int_field(c, 1, "n") == 10);
  /* A no-op update still returns the document. */
  CHECK_RC(fam(c, "{'_id':1}", "{'$set':{'s':'a'}}", NULL, 0, 1, &out), 0);
  CHECKF(json_equal(out, JQ("{'_id':1,'n':10,'s':'a'}")), "noop %s", JS(out));
  /* Projection applies to the returned document only. */
  dtx_fam_opts_t o = {.projection = JQ("{'n':1,'_id':0}"), .return_new = 1};
  json_t *p = NULL;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':1}"),
                                         JQ("{'$inc':{'n':1}}"), &o, &p),
           0);
  conf_keep(p);
  CHECKF(json_equal(p, JQ("{'n':11}")), "projected %s", JS(p));
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'n':11,'s':'a'}");
}

static void test_fam_sort_picks_the_document(void) {
  const char *c = conf_coll("famsort");
  REQUIRE(conf_seed(c, "[{'_id':1,'p':3,'q':'x'},{'_id':2,'p':1,'q':'x'},"
                       "{'_id':3,'p':2,'q':'x'},{'_id':4,'p':0,'q':'y'}]") ==
          0);
  json_t *out;
  CHECK_RC(fam(c, "{'q':'x'}", "{'$set':{'hit':'asc'}}", "{'p':1}", 0, 1,
               &out),
           0);
  CHECK(json_equal(json_object_get(out, "_id"), JQ("2")));
  CHECK_RC(fam(c, "{'q':'x'}", "{'$set':{'hit':'desc'}}", "{'p':-1}", 0, 1,
               &out),
           0);
  CHECK(json_equal(json_object_get(out, "_id"), JQ("1")));
  EXPECT_DOC(c, "{'_id':2}", "{'_id':2,'p':1,'q':'x','hit':'asc'}");
  EXPECT_DOC(c, "{'_id':1}", "{'_id':1,'p':3,'q':'x','hit':'desc'}");
  EXPECT_DOC(c, "{'_id':3}", "{'_id':3,'p':2,'q':'x'}");
  /* A queue: repeatedly claim the lowest p that is unclaimed. */
  CHECK_RC(fam(c, "{'claimed':{'$exists':false}}", "{'$set':{'claimed':1}}",
               "{'p':1}", 0, 0, &out),
           0);
  CHECK(json_equal(json_object_get(out, "_id"), JQ("4")));
  CHECK_RC(fam(c, "{'claimed':{'$exists':false}}", "{'$set':{'claimed':1}}",
               "{'p':1}", 0, 0, &out),
           0);
  CHECK(json_equal(json_object_get(out, "_id"), JQ("2")));
  /* Without a sort, any one document is modified. */
  CHECK_RC(fam(c, "{'q':'x','claimed':{'$exists':false}}",
               "{'$set':{'claimed':2}}", NULL, 0, 1, &out),
           0);
  CHECK(conf_count(c, JQ("{'claimed':2}")) == 1);
}

static void test_fam_nomatch_and_upsert(void) {
  const char *c = conf_coll("famups");
  json_t *out;
  CHECK_RC(fam(c, "{'_id':'a'}", "{'$set':{'v':1}}", NULL, 0, 1, &out),
           DTX_ENOMATCH);
  CHECK(out == NULL);
  CHECK(conf_count(c, NULL) == 0);
  /* Upsert without return_new: 0 and NULL. */
  CHECK_RC(fam(c, "{'_id':'a'}",
               "{'$set':{'v':1},'$setOnInsert':{'new':true}}", NULL, 1, 0,
               &out),
           0);
  CHECK(out == NULL);
  EXPECT_DOC(c, "{'_id':'a'}", "{'_id':'a','v':1,'new':true}");
  /* Upsert with return_new returns the inserted document. */
  CHECK_RC(fam(c, "{'_id':'b','k':3}", "{'$inc':{'v':1}}", NULL, 1, 1, &out),
           0);
  CHECKF(json_equal(out, JQ("{'_id':'b','k':3,'v':1}")), "got %s", JS(out));
  /* A matching upsert updates and does not run $setOnInsert. */
  CHECK_RC(fam(c, "{'_id':'a'}",
               "{'$set':{'v':2},'$setOnInsert':{'again':true}}", NULL, 1, 1,
               &out),
           0);
  CHECKF(json_equal(out, JQ("{'_id':'a','v':2,'new':true}")), "got %s",
         JS(out));
  CHECK(conf_count(c, NULL) == 2);
  /* Generated _id on an upsert without an _id equality. */
  CHECK_RC(fam(c, "{'k':9}", "{'$set':{'v':9}}", NULL, 1, 1, &out), 0);
  CHECK(out && is_hex24(json_string_value(json_object_get(out, "_id"))));
  CHECK(conf_count(c, JQ("{'k':9,'v':9}")) == 1);
}

/* Every document a call hands out is the caller's own (doctx.h: "a new
 * reference"): changing it changes nothing stored, nor what the next call
 * starts from.  A backend that kept the object it handed out (a read or
 * write cache) and wrote the next update over it would store the
 * caller's changes -- the ledger committer marks its round's entries. */
static void spoil(json_t *doc) {
  json_object_set_new(doc, "spoiled", json_true());
  json_object_set_new(doc, "n", json_integer(1000));
  json_object_del(doc, "s");
}

static void test_results_are_the_callers_own(void) {
  const char *c = conf_coll("own");
  REQUIRE(conf_seed(c, "[{'_id':1,'n':1,'s':'a'},{'_id':2,'n':50,'s':'b'}]") ==
          0);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'n':1}"), NULL, NULL), 0);
  static const char *const ways[] = {"find by _id", "sorted page",
                                     "fam before", "fam after",
                                     "bulk fam after", "update"};
  for (int w = 0; w < 6; w++) {
    json_t *got = NULL;
    int rc = 0;
    if (w == 0 || w == 1) {
      dtx_find_opts_t fo = {.sort = JQ("{'n':1}"), .limit = 1};
      rc = dtx_store_find(conf_st, c, JQ(w == 0 ? "{'_id':1}" : "{}"),
                          w == 0 ? NULL : &fo, &got);
      conf_keep(got);
      json_t *d = json_array_get(got, 0);
      if (d)
        spoil(d);
    } else if (w == 2 || w == 3) {
      rc = fam(c, "{'_id':1}", "{'$inc':{'m':1}}", NULL, 0, w == 3, &got);
      if (got)
        spoil(got);
    } else if (w == 4) {
      dtx_fam_opts_t fo = {.return_new = 1};
      dtx_bulk_op_t op = {.kind = DTX_BULK_FIND_ONE_AND_UPDATE,
                          .coll = c,
                          .filter = JQ("{'_id':1}"),
                          .update = JQ("{'$inc':{'m':1}}"),
                          .fam_opts = &fo};
      dtx_bulk_result_t r = {0};
      rc = dtx_store_bulk_write(conf_st, &op, 1, &r);
      if (r.doc)
        spoil(r.doc);
      dtx_bulk_results_clear(&r, 1);
    } else {
      rc = dtx_store_update(conf_st, c, JQ("{'_id':1}"),
                            JQ("{'$inc':{'m':1}}"), NULL, NULL);
    }
    CHECKF(rc == 0, "%s: %s", ways[w], dtx_errname(rc));
    /* The next write starts from the stored document, not the spoiled
     * one, and so does the next read. */
    json_t *after = NULL;
    CHECK_RC(fam(c, "{'_id':1}", "{'$inc':{'n':1}}", NULL, 0, 1, &after), 0);
    json_t *want = json_pack("{s:i,s:i,s:s}", "_id", 1, "n", 2 + w, "s", "a");
    if (w >= 2)
      json_object_set_new(want, "m", json_integer(w - 1));
    CHECKF(json_equal(after, want), "after %s: got %s want %s", ways[w],
           JS(after), JS(want));
    spoil(after);
    json_t *again = conf_keep(conf_get(c, JQ("{'_id':1}")));
    CHECKF(json_equal(again, want), "read after %s: got %s want %s", ways[w],
           JS(again), JS(want));
    json_decref(want);
  }
}

static void test_find_one_and_delete(void) {
  const char *c = conf_coll("fad");
  REQUIRE(conf_seed(c, "[{'_id':1,'p':2},{'_id':2,'p':1},{'_id':3,'p':3}]") ==
          0);
  dtx_fam_opts_t o = {.sort = JQ("{'p':-1}")};
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, NULL, &o, &out), 0);
  conf_keep(out);
  CHECKF(json_equal(out, JQ("{'_id':3,'p':3}")), "got %s", JS(out));
  o.sort = JQ("{'p':1}");
  o.projection = JQ("{'p':0}");
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'p':{'$gte':1}}"),
                                         &o, &out),
           0);
  conf_keep(out);
  CHECKF(json_equal(out, JQ("{'_id':2}")), "got %s", JS(out));
  EXPECT_IDS(c, NULL, NULL, "[1]");
  out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'p':99}"), NULL,
                                         &out),
           DTX_ENOMATCH);
  CHECK(out == NULL);
  CHECK(conf_count(c, NULL) == 1);
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':1}"), NULL,
                                         &out),
           0);
  conf_keep(out);
  CHECK(conf_count(c, NULL) == 0);
}

static void test_delete_one_and_many(void) {
  const char *c = conf_coll("delete");
  REQUIRE(conf_seed(c, SORT_DOCS) == 0);
  int64_t n = -1;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'g':'a'}"), 0, &n), 0);
  CHECK(n == 1);
  EXPECT_IDS(c, NULL, NULL, "[1,3,4,5]");
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'g':'b'}"), 1, &n), 0);
  CHECK(n == 2);
  EXPECT_IDS(c, NULL, NULL, "[4,5]");
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'g':'zz'}"), 1, &n), 0);
  CHECK(n == 0);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'g':'zz'}"), 0, &n), 0);
  CHECK(n == 0);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'$bad':1}"), 1, &n),
           DTX_EBADQUERY);
  CHECK(conf_count(c, NULL) == 2);
  CHECK_RC(dtx_store_delete(conf_st, c, NULL, 1, NULL), 0);
  CHECK(conf_count(c, NULL) == 0);
  /* A deleted _id can be reused. */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':4,'again':1}"), NULL), 0);
  EXPECT_DOC(c, "{'_id':4}", "{'_id':4,'again':1}");
}

/* ---- errors leave documents unchanged --------------------------------------- */

#define ERR_BASE                                                             \
  "{'_id':1,'s':'str','n':9223372036854775807,'m':-9223372036854775808,"    \
  "'a':[1,2],'o':{'x':1},'v':1}"

static void check_unchanged(const char *c, const char *what) {
  json_t *got = conf_keep(conf_get(c, JQ("{'_id':1}")));
  CHECKF(got && json_equal(got, JQ(ERR_BASE)), "after %s: %s", what, JS(got));
  CHECK(conf_count(c, NULL) == 1);
}

static void test_errors_leave_document_unchanged(void) {
  const char *c = conf_coll("errs");
  REQUIRE(conf_seed(c, "[" ERR_BASE "]") == 0);
  /* want2 is an alternative accepted code (0 = none). */
  static const struct {
    const char *update;
    int want, want2;
  } cases[] = {
      {"{'$inc':{'s':1}}", DTX_ETYPE, 0},
      {"{'$set':{'v':2},'$inc':{'s':1}}", DTX_ETYPE, 0},
      {"{'$inc':{'v':1,'s':1}}", DTX_ETYPE, 0},
      {"{'$inc':{'n':1}}", DTX_EOVERFLOW, 0},
      {"{'$inc':{'m':-1}}", DTX_EOVERFLOW, 0},
      {"{'$set':{'v':2},'$inc':{'n':1}}", DTX_EOVERFLOW, 0},
      {"{'$push':{'s':1}}", DTX_ETYPE, 0},
      {"{'$set':{'v':9},'$push':{'o':1}}", DTX_ETYPE, 0},
      {"{'$set':{'s.x':1}}", DTX_ETYPE, 0},
      {"{'_id':2,'v':5}", DTX_EIMMUTABLE, 0},
      {"{'$set':{'_id':2}}", DTX_EIMMUTABLE, DTX_EBADUPDATE},
      {"{'$set':{}}", DTX_EBADUPDATE, 0},
      {"{'$foo':{'v':1}}", DTX_EBADUPDATE, 0},
      {"{'$set':{'v':1},'w':2}", DTX_EBADUPDATE, 0},
      {"{'$set':{'v':1},'$inc':{'v':1}}", DTX_EBADUPDATE, 0},
      {"{'$set':{'o':1,'o.x':2}}", DTX_EBADUPDATE, 0},
      {"{'$inc':{'v':'1'}}", DTX_EBADUPDATE, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *u = cases[i].update;
    int w = cases[i].want, w2 = cases[i].want2 ? cases[i].want2 : w;
    dtx_update_result_t r;
    memset(&r, 0x5a, sizeof r);
    int rc = dtx_store_update(conf_st, c, JQ("{'_id':1}"), JQ(u), NULL, &r);
    CHECKF(rc == w || rc == w2, "update %s: %s (%s)", u, dtx_errname(rc),
           dtx_errdetail());
    CHECKF(r.matched == 0 && r.modified == 0 && r.upserted_id == NULL,
           "update %s: result not zeroed", u);
    check_unchanged(c, u);

    json_t *out;
    rc = fam(c, "{'_id':1}", u, NULL, 0, 1, &out);
    CHECKF((rc == w || rc == w2) && out == NULL, "fam %s: %s", u,
           dtx_errname(rc));
    check_unchanged(c, u);

    if (strncmp(u, "{'$", 3) == 0) { /* replacements have no "many" */
      dtx_update_opts_t mo = {.many = 1, .upsert = 1};
      rc = dtx_store_update(conf_st, c, NULL, JQ(u), &mo, &r);
      CHECKF(rc == w || rc == w2, "update many %s: %s", u, dtx_errname(rc));
      check_unchanged(c, u);
    }
  }
  /* Compile errors are found before any document is touched, including
   * by an upsert that matches nothing. */
  dtx_update_opts_t uo = {.upsert = 1};
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"),
                            JQ("{'$bogus':{'a':1}}"), &uo, &r),
           DTX_EBADUPDATE);
  /* An upsert whose insert would fail inserts nothing. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2,'s':'t'}"),
                            JQ("{'$inc':{'s':1}}"), &uo, &r),
           DTX_ETYPE);
  check_unchanged(c, "failed upserts");
}

/* update many stops at an error; the documents it reached before stay
 * changed and the failing one is unchanged. */
static void test_update_many_error_is_per_document(void) {
  const char *c = conf_coll("manyerr");
  REQUIRE(conf_seed(c, "[{'_id':1,'n':1},{'_id':2,'n':'x'},{'_id':3,'n':3}]") ==
          0);
  dtx_update_opts_t o = {.many = 1};
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, NULL, JQ("{'$inc':{'n':1}}"), &o, &r),
           DTX_ETYPE);
  EXPECT_DOC(c, "{'_id':2}", "{'_id':2,'n':'x'}");
  int64_t n1 = conf_int_field(c, 1, "n"), n3 = conf_int_field(c, 3, "n");
  CHECKF((n1 == 1 || n1 == 2) && (n3 == 3 || n3 == 4), "n1=%lld n3=%lld",
         (long long)n1, (long long)n3);
}

/* ---- collections -------------------------------------------------------- */

static int listed(const char *name) {
  json_t *names = NULL;
  int rc = dtx_store_list_collections(conf_st, &names);
  CHECK_RC(rc, 0);
  int found = 0;
  size_t i;
  json_t *n;
  json_array_foreach(names, i, n) {
    if (json_is_string(n) && strcmp(json_string_value(n), name) == 0)
      found++;
  }
  json_decref(names);
  return found;
}

static void test_drop_and_list_collections(void) {
  const char *a = conf_coll("list_b"), *b = conf_coll("list_a");
  const char *d = conf_coll("list_c");
  CHECK_RC(dtx_store_insert(conf_st, a, JQ("{'_id':1}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, b, JQ("{'_id':1}"), NULL), 0);
  CHECK_RC(dtx_store_create_index(conf_st, d, JQ("{'u':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, d, JQ("{'_id':1,'u':1}"), NULL), 0);
  CHECK(listed(a) == 1 && listed(b) == 1 && listed(d) == 1);

  json_t *names = NULL;
  CHECK_RC(dtx_store_list_collections(conf_st, &names), 0);
  conf_keep(names);
  REQUIRE(json_is_array(names));
  for (size_t i = 1; i < json_array_size(names); i++) {
    const char *p = json_string_value(json_array_get(names, i - 1));
    const char *q = json_string_value(json_array_get(names, i));
    CHECKF(p && q && strcmp(p, q) < 0, "not sorted: %s, %s", p, q);
  }

  CHECK_RC(dtx_store_drop_collection(conf_st, a), 0);
  CHECK(listed(a) == 0 && listed(b) == 1);
  EXPECT_IDS(a, NULL, NULL, "[]");
  CHECK_RC(dtx_store_drop_collection(conf_st, a), 0);
  CHECK_RC(dtx_store_drop_collection(conf_st, conf_coll("never_existed")), 0);
  CHECK_RC(dtx_store_drop_collection(conf_st, "bad name"), DTX_EINVAL);

  /* Dropping removes indexes too: the unique key is free afterwards and
   * only _id_ is listed. */
  CHECK_RC(dtx_store_drop_collection(conf_st, d), 0);
  CHECK(listed(d) == 0);
  CHECK_RC(dtx_store_insert(conf_st, d, JQ("{'_id':1,'u':1}"), NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, d, JQ("{'_id':2,'u':1}"), NULL), 0);
  json_t *idx = NULL;
  CHECK_RC(dtx_store_list_indexes(conf_st, d, &idx), 0);
  conf_keep(idx);
  CHECKF(json_array_size(idx) == 1, "indexes after drop: %s", JS(idx));
}

void conf_run_crud(void) {
  CONF_RUN(test_store_uri_and_error_names);
  CONF_RUN(test_insert_generated_id);
  CONF_RUN(test_insert_given_ids);
  CONF_RUN(test_insert_duplicate_id_changes_nothing);
  CONF_RUN(test_insert_invalid);
  CONF_RUN(test_values_round_trip_exactly);
  CONF_RUN(test_insert_many);
  CONF_RUN(test_find_sort_skip_limit);
  CONF_RUN(test_find_projection);
  CONF_RUN(test_find_errors);
  CONF_RUN(test_count);
  CONF_RUN(test_update_counts);
  CONF_RUN(test_update_replacement);
  CONF_RUN(test_update_operators_through_store);
  CONF_RUN(test_current_date_is_epoch_ms);
  CONF_RUN(test_update_upsert);
  CONF_RUN(test_fam_before_and_after);
  CONF_RUN(test_fam_sort_picks_the_document);
  CONF_RUN(test_fam_nomatch_and_upsert);
  CONF_RUN(test_results_are_the_callers_own);
  CONF_RUN(test_find_one_and_delete);
  CONF_RUN(test_delete_one_and_many);
  CONF_RUN(test_errors_leave_document_unchanged);
  CONF_RUN(test_update_many_error_is_per_document);
  CONF_RUN(test_drop_and_list_collections);
}
