/* test_sqlite_plan.c -- the SQLite backend's query planner: which queries
 * use the primary key or an index (proved by dtx__docs_examined, the
 * number of documents the matcher ran on), that indexed results equal a
 * scan's and come in insertion order, and the cases where an index must
 * NOT narrow the candidates (sparse null, fields of one array matched in
 * different elements). */
#include "testlib.h"

#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NDOCS 1000

static dtx_store_t *st;

/* Document i: k = i % 100, s = "s" + (i % 50) as text, tags = [i % 7,
 * 100 + i % 5], r = i / 10.0 as a real, and every 10th document has z. */
static void load(void) {
  json_t *docs = json_array();
  for (int i = 0; i < NDOCS; i++) {
    char s[16];
    snprintf(s, sizeof s, "s%02d", i % 50);
    json_t *d = json_pack("{s:i,s:i,s:s,s:[i,i],s:f}", "_id", i, "k",
                          i % 100, "s", s, "tags", i % 7, 100 + i % 5, "r",
                          i / 10.0);
    if (i % 10 == 0)
      json_object_set_new(d, "z", json_integer(i));
    json_array_append_new(docs, d);
  }
  size_t n = 0;
  if (dtx_store_insert_many(st, "c", docs, &n, NULL) < 0 || n != NDOCS) {
    fprintf(stderr, "load: %s\n", dtx_errdetail());
    exit(1);
  }
  json_decref(docs);
}

static void index_on(const char *keys, int sparse) {
  json_t *k = J(keys);
  dtx_index_opts_t o = {.sparse = sparse};
  if (dtx_store_create_index(st, "c", k, &o, NULL) < 0) {
    fprintf(stderr, "index %s: %s\n", keys, dtx_errdetail());
    exit(1);
  }
  json_decref(k);
}

/* The expected result, computed by brute force over the same filter on
 * a collection without indexes ("plain"). */
static json_t *expected(const json_t *filter) {
  json_t *out = NULL;
  if (dtx_store_find(st, "plain", filter, NULL, &out) < 0) {
    fprintf(stderr, "find plain: %s\n", dtx_errdetail());
    exit(1);
  }
  return out;
}

typedef struct plan_case {
  const char *filter;
  int64_t examined; /* -1: the number of results (exact index) */
} plan_case_t;

/* -2 marks a full scan: every document is examined. */
static const plan_case_t cases[] = {
    {"{\"_id\":5}", -1},
    {"{\"_id\":\"5\"}", 0},
    {"{\"_id\":{\"$in\":[3,1,2,3,\"x\",null]}}", -1},
    {"{\"_id\":{\"$eq\":7},\"k\":7}", 1},
    {"{\"_id\":7,\"k\":8}", 1},
    {"{\"k\":5}", -1},
    {"{\"k\":{\"$eq\":5}}", -1},
    {"{\"k\":{\"$in\":[5,6,500]}}", -1},
    {"{\"k\":{\"$in\":[]}}", 0},
    {"{\"k\":{\"$gte\":98}}", -1},
    /* k never held an array, so both bounds narrow the lookup. */
    {"{\"k\":{\"$gt\":3,\"$lte\":5}}", -1},
    {"{\"k\":{\"$lt\":2}}", -1},
    {"{\"k\":{\"$lt\":\"a\"}}", 0},
    {"{\"k\":5.0}", -1},
    {"{\"$and\":[{\"k\":5},{\"s\":\"s05\"}]}", 10},
    {"{\"k\":5,\"tags\":{\"$ne\":3}}", 10},
    {"{\"s\":{\"$gte\":\"s48\"}}", -1},
    {"{\"s\":{\"$gt\":\"s48\",\"$lt\":\"s49\"}}", 0},
    /* tags is multikey: 100+ > 6 and i%7 < 100 hold in different
     * elements, so every document matches; one bound narrows. */
    {"{\"tags\":{\"$gt\":6,\"$lt\":100}}", -1},
    {"{\"tags\":{\"$elemMatch\":{\"$gt\":102,\"$lt\":104}}}", -1},
    {"{\"tags\":3}", -1},
    {"{\"tags\":{\"$in\":[101,3]}}", -1},
    {"{\"tags\":{\"$elemMatch\":{\"$gt\":5,\"$lt\":7}}}", -1},
    {"{\"r\":{\"$gte\":99.5}}", -1},
    {"{\"r\":99}", -1},
    {"{\"z\":{\"$gt\":900}}", -1},
    {"{\"z\":null}", -2},
    {"{\"z\":{\"$exists\":false}}", -2},
    {"{\"$or\":[{\"k\":1},{\"k\":2}]}", -2},
    {"{\"s\":{\"$ne\":\"s01\"}}", -2},
    {"{\"nope\":1}", -2},
    {"{}", -2},
};

/* A compound index {k, s}: equality on both narrows to one key. */
static void test_plan_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *f = J(cases[i].filter), *got = NULL;
    json_t *want = expected(f);
    dtx__docs_examined = 0;
    CHECK_RC(dtx_store_find(st, "c", f, NULL, &got), 0);
    int64_t ex = dtx__docs_examined;
    CHECKF(json_equal(got, want), "%s: got %zu docs, want %zu",
           cases[i].filter, json_array_size(got), json_array_size(want));
    int64_t want_ex = cases[i].examined == -1   ? (int64_t)json_array_size(want)
                      : cases[i].examined == -2 ? NDOCS
                                                : cases[i].examined;
    CHECKF(ex == want_ex, "%s: examined %lld, want %lld", cases[i].filter,
           (long long)ex, (long long)want_ex);
    /* count agrees and examines no more. */
    int64_t n = -1;
    dtx__docs_examined = 0;
    CHECK_RC(dtx_store_count(st, "c", f, &n), 0);
    CHECKF(n == (int64_t)json_array_size(want), "%s: count %lld",
           cases[i].filter, (long long)n);
    CHECK(strcmp(cases[i].filter, "{}") == 0 ? dtx__docs_examined == 0
                                             : dtx__docs_examined == want_ex);
    json_decref(f);
    json_decref(got);
    json_decref(want);
  }
}

static void test_insertion_order(void) {
  json_t *f = J("{\"tags\":{\"$in\":[101,3]}}"), *got = NULL;
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &got), 0);
  size_t i;
  json_t *d;
  json_int_t last = -1;
  int ordered = 1;
  json_array_foreach(got, i, d) {
    json_int_t id = json_integer_value(json_object_get(d, "_id"));
    ordered &= id > last;
    last = id;
  }
  CHECK(ordered);
  CHECK(json_array_size(got) > 100);
  json_decref(got);
  json_decref(f);
}

/* Without sort, a limit stops the work once enough matches are found. */
static void test_limit_stops_early(void) {
  json_t *f = J("{\"k\":{\"$gte\":10}}"), *got = NULL;
  dtx_find_opts_t o = {NULL, NULL, 3, 5};
  dtx__docs_examined = 0;
  CHECK_RC(dtx_store_find(st, "c", f, &o, &got), 0);
  CHECK(dtx__docs_examined == 8);
  CHECK(json_array_size(got) == 5);
  CHECK(json_integer_value(json_object_get(json_array_get(got, 0), "_id")) ==
        13);
  json_decref(got);
  json_decref(f);
  dtx__docs_examined = 0;
  CHECK_RC(dtx_store_find(st, "plain", NULL, &o, &got), 0);
  CHECK(dtx__docs_examined == 8);
  CHECK(json_integer_value(json_object_get(json_array_get(got, 0), "_id")) ==
        3);
  json_decref(got);
}

/* Sort picks the document find_one_and_update changes. */
static void test_sorted_modify(void) {
  json_t *f = J("{\"k\":7}"), *u = J("{\"$set\":{\"hit\":true}}");
  json_t *sort = J("{\"_id\":-1}"), *out = NULL;
  dtx_fam_opts_t o = {.sort = sort, .return_new = 1};
  dtx__docs_examined = 0;
  CHECK_RC(dtx_store_find_one_and_update(st, "c", f, u, &o, &out), 0);
  CHECK(json_integer_value(json_object_get(out, "_id")) == 907);
  CHECK(json_is_true(json_object_get(out, "hit")));
  CHECK(dtx__docs_examined == 10);
  json_decref(out);
  /* Without sort: the first in insertion order, examining one. */
  o.sort = NULL;
  dtx__docs_examined = 0;
  CHECK_RC(dtx_store_find_one_and_update(st, "c", f, u, &o, &out), 0);
  CHECK(json_integer_value(json_object_get(out, "_id")) == 7);
  CHECK(dtx__docs_examined == 1);
  json_decref(out);
  json_decref(f);
  json_decref(u);
  json_decref(sort);
}

/* Two paths through one array are paired per element in the index, but
 * {a.x: 1, a.y: 2} may match them in different elements: the planner
 * must not combine them (it may use one), while $elemMatch may. */
static void test_paired_array_fields(void) {
  dtx_store_t *m;
  REQUIRE(dtx_store_open("sqlite::memory:", &m) == 0);
  json_t *k = J("{\"ch.acc\":1,\"ch.seq\":1}");
  CHECK_RC(dtx_store_create_index(m, "l", k, NULL, NULL), 0);
  json_decref(k);
  for (int i = 0; i < 50; i++) {
    json_t *d = json_pack("{s:i,s:[{s:s,s:i},{s:s,s:i}]}", "_id", i, "ch",
                          "acc", i % 2 ? "A" : "B", "seq", i, "acc", "C",
                          "seq", i + 1000);
    CHECK_RC(dtx_store_insert(m, "l", d, NULL), 0);
    json_decref(d);
  }
  static const struct {
    const char *filter;
    const char *ids;
    int64_t examined;
  } t[] = {
      /* acc A in element 0, seq 1003 in element 1 of doc 3. */
      {"{\"ch.acc\":\"A\",\"ch.seq\":1003}", "[3]", 25},
      {"{\"ch\":{\"$elemMatch\":{\"acc\":\"A\",\"seq\":1003}}}", "[]", 0},
      {"{\"ch\":{\"$elemMatch\":{\"acc\":\"A\",\"seq\":3}}}", "[3]", 1},
      {"{\"ch\":{\"$elemMatch\":{\"acc\":\"C\",\"seq\":{\"$gte\":1048}}}}",
       "[48,49]", 2},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    json_t *f = J(t[i].filter), *got = NULL, *ids = json_array();
    dtx__docs_examined = 0;
    CHECK_RC(dtx_store_find(m, "l", f, NULL, &got), 0);
    size_t j;
    json_t *d;
    json_array_foreach(got, j, d)
        json_array_append(ids, json_object_get(d, "_id"));
    CHECKF(strcmp(JS(ids), t[i].ids) == 0, "%s: got %s want %s",
           t[i].filter, JS(ids), t[i].ids);
    CHECKF(dtx__docs_examined == t[i].examined, "%s: examined %lld",
           t[i].filter, (long long)dtx__docs_examined);
    json_decref(f);
    json_decref(got);
    json_decref(ids);
  }
  dtx_store_close(m);
}

/* {a: {$gte: 2, $lt: 3}} matches a: [1, 5]: 5 >= 2 and 1 < 3. */
static void test_range_on_array(void) {
  dtx_store_t *m;
  REQUIRE(dtx_store_open("sqlite::memory:", &m) == 0);
  json_t *k = J("{\"a\":1}");
  CHECK_RC(dtx_store_create_index(m, "r", k, NULL, NULL), 0);
  json_decref(k);
  json_t *d = J("[{\"_id\":1,\"a\":[1,5]},{\"_id\":2,\"a\":2},"
                "{\"_id\":3,\"a\":3},{\"_id\":4,\"a\":[0,7]}]");
  CHECK_RC(dtx_store_insert_many(m, "r", d, NULL, NULL), 0);
  json_decref(d);
  static const struct {
    const char *filter, *ids;
  } t[] = {
      {"{\"a\":{\"$gte\":2,\"$lt\":3}}", "[1,2,4]"},
      {"{\"a\":{\"$elemMatch\":{\"$gte\":2,\"$lt\":6}}}", "[1]"},
      {"{\"a\":{\"$gt\":6}}", "[4]"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    json_t *f = J(t[i].filter), *got = NULL, *ids = json_array();
    CHECK_RC(dtx_store_find(m, "r", f, NULL, &got), 0);
    size_t j;
    json_t *x;
    json_array_foreach(got, j, x)
        json_array_append(ids, json_object_get(x, "_id"));
    CHECKF(strcmp(JS(ids), t[i].ids) == 0, "%s: got %s want %s",
           t[i].filter, JS(ids), t[i].ids);
    json_decref(f);
    json_decref(got);
    json_decref(ids);
  }
  dtx_store_close(m);
}

int main(void) {
  if (dtx_store_open("sqlite::memory:", &st) < 0)
    return 1;
  load();
  /* "plain" holds the same documents without secondary indexes. */
  json_t *all = NULL;
  size_t n = 0;
  if (dtx_store_find(st, "c", NULL, NULL, &all) < 0 ||
      dtx_store_insert_many(st, "plain", all, &n, NULL) < 0)
    return 1;
  json_decref(all);
  index_on("{\"k\":1,\"s\":1}", 0);
  index_on("{\"s\":1}", 0);
  index_on("{\"tags\":1}", 0);
  index_on("{\"r\":-1}", 0);
  index_on("{\"z\":1}", 1);
  TEST_RUN(test_plan_table);
  TEST_RUN(test_insertion_order);
  TEST_RUN(test_limit_stops_early);
  TEST_RUN(test_sorted_modify);
  TEST_RUN(test_paired_array_fields);
  TEST_RUN(test_range_on_array);
  dtx_store_close(st);
  return TEST_DONE();
}
