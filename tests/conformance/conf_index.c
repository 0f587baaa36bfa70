/* conf_index.c -- conformance: secondary indexes.
 *
 * Unique indexes are what makes doctx's ledgers and idempotency keys safe,
 * so every way a document can arrive (insert, insert_many, update, upsert,
 * replacement, find_one_and_update) must be refused with DTX_EDUPKEY and
 * change nothing.  Multikey rules follow MongoDB: one key per array
 * element, compound paths through one array pair up element by element.
 * The last test proves that indexed queries do not scan the collection,
 * using the backend's dtx__docs_examined counter (the only internal name
 * this suite uses; it is thread-local, so it is read on this thread
 * immediately around each call). */
#include "conf.h"
#include "store/store.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>

static int insert(const char *c, const char *doc) {
  return dtx_store_insert(conf_st, c, JQ(doc), NULL);
}

static json_t *list_indexes(const char *c) {
  json_t *out = conf_poison;
  int rc = dtx_store_list_indexes(conf_st, c, &out);
  CHECKF(rc == 0, "list_indexes %s: %s (%s)", c, dtx_errname(rc),
         dtx_errdetail());
  if (rc != 0)
    return NULL;
  return conf_keep(out);
}

static json_t *index_named(json_t *list, const char *name) {
  size_t i;
  json_t *ix;
  json_array_foreach(list, i, ix) {
    const char *n = json_string_value(json_object_get(ix, "name"));
    if (n && strcmp(n, name) == 0)
      return ix;
  }
  return NULL;
}

/* ---- create and list ------------------------------------------------------ */

static void test_index_create_and_list(void) {
  const char *c = conf_coll("ix_list");
  REQUIRE(insert(c, "{'_id':1,'a':1,'b':2}") == 0);
  char *name = NULL;
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1,'b':-1}"), NULL,
                                  &name),
           0);
  CHECKF(name && strcmp(name, "a_1_b_-1") == 0, "name %s",
         name ? name : "(null)");
  free(name);
  name = NULL;
  dtx_index_opts_t o = {.unique = 1, .sparse = 1, .name = "byxy"};
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'x.y':1}"), &o, &name), 0);
  CHECKF(name && strcmp(name, "byxy") == 0, "name %s", name ? name : "(null)");
  free(name);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'z':-1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);

  json_t *l = list_indexes(c);
  REQUIRE(json_is_array(l));
  CHECKF(json_array_size(l) == 4, "indexes %s", JS(l));
  json_t *first = json_array_get(l, 0);
  CHECKF(json_equal(json_object_get(first, "name"), JQ("'_id_'")) &&
             json_equal(json_object_get(first, "key"), JQ("{'_id':1}")),
         "first index %s", JS(first));

  json_t *ab = index_named(l, "a_1_b_-1");
  REQUIRE(ab != NULL);
  char *key = json_dumps(json_object_get(ab, "key"), JSON_COMPACT);
  CHECKF(key && strcmp(key, "{\"a\":1,\"b\":-1}") == 0, "key %s (order)",
         key ? key : "(null)");
  free(key);
  CHECK(json_is_false(json_object_get(ab, "unique")));
  CHECK(json_is_false(json_object_get(ab, "sparse")));

  json_t *xy = index_named(l, "byxy");
  REQUIRE(xy != NULL);
  CHECK(json_equal(json_object_get(xy, "key"), JQ("{'x.y':1}")));
  CHECK(json_is_true(json_object_get(xy, "unique")));
  CHECK(json_is_true(json_object_get(xy, "sparse")));

  json_t *z = index_named(l, "z_-1");
  REQUIRE(z != NULL);
  CHECK(json_equal(json_object_get(z, "key"), JQ("{'z':-1}")));
  CHECK(json_is_true(json_object_get(z, "unique")));
  CHECK(json_is_false(json_object_get(z, "sparse")));

  /* A fresh collection lists _id_ once it exists. */
  const char *c2 = conf_coll("ix_list_fresh");
  REQUIRE(insert(c2, "{'_id':1}") == 0);
  json_t *l2 = list_indexes(c2);
  CHECKF(l2 && json_array_size(l2) == 1 &&
             json_equal(json_object_get(json_array_get(l2, 0), "name"),
                        JQ("'_id_'")),
         "fresh %s", JS(l2));
}

/* The longest collection name (120 bytes), all capitals (SQLite's table
 * name doubles each), with a 16-field unique index: the backend's index
 * SQL is built for the longest table name, not a typical one (it once
 * overflowed its buffer, found by fuzz_txn_script). */
static void test_index_longest_name(void) {
  char c[121];
  const char *tag = conf_coll("L");
  size_t n = strlen(tag);
  REQUIRE(n < 40);
  memcpy(c, tag, n);
  for (size_t i = n; i < 120; i++)
    c[i] = (char)('A' + i % 26);
  c[120] = '\0';
  json_t *keys = json_object(), *doc = json_object();
  REQUIRE(keys && doc);
  for (int i = 0; i < 16; i++) {
    char f[8];
    snprintf(f, sizeof f, "F%d", i);
    json_object_set_new(keys, f, json_integer(i % 2 ? -1 : 1));
    json_object_set_new(doc, f, json_integer(i));
  }
  conf_keep(keys);
  conf_keep(doc);
  CHECK_RC(dtx_store_create_index(conf_st, c, keys,
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, c, doc, NULL), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, doc, NULL), DTX_EDUPKEY);
  json_t *found = conf_poison;
  CHECK_RC(dtx_store_find(conf_st, c, doc, NULL, &found), 0);
  CHECKF(json_array_size(conf_keep(found)) == 1, "found %s", JS(found));
  json_t *l = list_indexes(c);
  CHECKF(l && json_array_size(l) == 2, "indexes %s", JS(l));
  CHECK_RC(dtx_store_drop_collection(conf_st, c), 0);
}

static void test_index_recreate_and_conflicts(void) {
  const char *c = conf_coll("ix_conflict");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1}"), NULL, NULL), 0);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'q':1}"),
                                  &(dtx_index_opts_t){.name = "named"}, NULL),
           0);
  json_t *before = list_indexes(c);
  REQUIRE(before != NULL);

  /* Identical again: a no-op that still reports the name. */
  char *name = NULL;
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1}"), NULL, &name), 0);
  CHECKF(name && strcmp(name, "a_1") == 0, "name %s", name ? name : "(null)");
  free(name);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'q':1}"),
                                  &(dtx_index_opts_t){.name = "named"}, NULL),
           0);

  static const struct {
    const char *keys;
    dtx_index_opts_t o;
  } bad[] = {
      {"{'a':1}", {.unique = 1}},        /* same name, now unique */
      {"{'a':1}", {.sparse = 1}},        /* same name, now sparse */
      {"{'b':1}", {.name = "a_1"}},      /* same name, other key */
      {"{'a':-1}", {.name = "a_1"}},     /* same name, other direction */
      {"{'q':1,'r':1}", {.name = "named"}},
      {"{'b':1}", {.name = "_id_"}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = dtx_store_create_index(conf_st, c, JQ(bad[i].keys), &bad[i].o,
                                    NULL);
    CHECKF(rc == DTX_EBADINDEX, "case %zu %s: %s", i, bad[i].keys,
           dtx_errname(rc));
  }
  json_t *after = list_indexes(c);
  CHECKF(after && json_equal(before, after), "indexes changed: %s -> %s",
         JS(before), JS(after));
}

static void test_index_bad_specs(void) {
  const char *c = conf_coll("ix_bad");
  static const char *bad[] = {
      "{}",           "{'a':2}",      "{'a':0}",     "{'a':'x'}",
      "{'a':1.5}",    "{'a.0':1}",    "{'a.1.b':1}", "[1]",
      "{'a':true}",   "{'':1}",       "{'a..b':1}",
      ("{'k1':1,'k2':1,'k3':1,'k4':1,'k5':1,'k6':1,'k7':1,'k8':1,'k9':1,"
       "'k10':1,'k11':1,'k12':1,'k13':1,'k14':1,'k15':1,'k16':1,'k17':1}"),
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int rc = dtx_store_create_index(conf_st, c, JQ(bad[i]), NULL, NULL);
    CHECKF(rc == DTX_EBADINDEX, "%s: %s", bad[i], dtx_errname(rc));
  }
  json_t *l = NULL;
  int rc = dtx_store_list_indexes(conf_st, c, &l);
  conf_keep(l);
  CHECKF(rc != 0 || json_array_size(l) <= 1, "bad specs left %s", JS(l));
}

/* ---- unique ---------------------------------------------------------------- */

static void test_unique_refused_over_existing_duplicates(void) {
  const char *c = conf_coll("ix_existing");
  REQUIRE(conf_seed(c, "[{'_id':1,'k':1},{'_id':2,'k':2},{'_id':3,'k':1},"
                       "{'_id':4},{'_id':5}]") == 0);
  dtx_index_opts_t u = {.unique = 1};
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), &u, NULL),
           DTX_EDUPKEY);
  json_t *l = list_indexes(c);
  CHECKF(l && index_named(l, "k_1") == NULL, "refused index listed: %s",
         JS(l));
  /* Not being there, it enforces nothing. */
  CHECK_RC(insert(c, "{'_id':6,'k':2}"), 0);

  /* Two documents lacking the field collide as null ... */
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'m':1}"), &u, NULL),
           DTX_EDUPKEY);
  /* ... but not in a sparse index. */
  dtx_index_opts_t us = {.unique = 1, .sparse = 1};
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'m':1}"), &us, NULL), 0);
  /* A non-unique index over duplicates is fine. */
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), NULL, NULL), 0);
  CHECK(conf_count(c, NULL) == 6);
}

static void test_unique_every_write_path(void) {
  const char *c = conf_coll("ix_unique");
  dtx_index_opts_t u = {.unique = 1};
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), &u, NULL), 0);
  REQUIRE(conf_seed(c, "[{'_id':1,'k':'a'},{'_id':2,'k':'b'}]") == 0);
  json_t *snapshot = conf_keep(conf_find(c, NULL, NULL));
  REQUIRE(snapshot != NULL);
#define UNCHANGED(what)                                                      \
  do {                                                                       \
    json_t *now_ = conf_keep(conf_find(c, NULL, NULL));                      \
    CHECKF(now_ && json_equal(now_, snapshot), "after %s: %s", what,         \
           JS(now_));                                                        \
  } while (0)

  json_t *id = conf_poison;
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':3,'k':'a'}"), &id),
           DTX_EDUPKEY);
  CHECK(id == NULL);
  CHECKF(dtx_errdetail()[0] != '\0', "no detail for DUPKEY");
  UNCHANGED("insert");

  size_t n = 9;
  CHECK_RC(dtx_store_insert_many(conf_st, c,
                                 JQ("[{'_id':3,'k':'b'},{'_id':4,'k':'c'}]"),
                                 &n, NULL),
           DTX_EDUPKEY);
  CHECK(n == 0);
  UNCHANGED("insert_many");

  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"),
                            JQ("{'$set':{'k':'a','other':1}}"), NULL, &r),
           DTX_EDUPKEY);
  CHECK(r.matched == 0 && r.modified == 0);
  UNCHANGED("update $set");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"), JQ("{'k':'a'}"),
                            NULL, &r),
           DTX_EDUPKEY);
  UNCHANGED("replacement");

  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(
               conf_st, c, JQ("{'_id':2}"), JQ("{'$set':{'k':'a'}}"),
               &(dtx_fam_opts_t){.return_new = 1}, &out),
           DTX_EDUPKEY);
  CHECK(out == NULL);
  UNCHANGED("find_one_and_update");

  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':9}"),
                            JQ("{'$set':{'k':'b'}}"),
                            &(dtx_update_opts_t){.upsert = 1}, &r),
           DTX_EDUPKEY);
  CHECK(r.upserted_id == NULL);
  UNCHANGED("upsert");
  out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(
               conf_st, c, JQ("{'k':'a','x':1}"), JQ("{'$set':{'y':1}}"),
               &(dtx_fam_opts_t){.upsert = 1, .return_new = 1}, &out),
           DTX_EDUPKEY);
  CHECK(out == NULL);
  UNCHANGED("fam upsert");

  /* Keeping one's own key, or moving to a free one, is fine, and frees
   * the old key. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':1}"),
                            JQ("{'$set':{'k':'a','t':1}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"),
                            JQ("{'$set':{'k':'c'}}"), NULL, &r),
           0);
  CHECK_RC(insert(c, "{'_id':3,'k':'b'}"), 0);
  int64_t del = 0;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'k':'c'}"), 0, &del), 0);
  CHECK(del == 1);
  CHECK_RC(insert(c, "{'_id':4,'k':'c'}"), 0);
  json_t *fd = NULL;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'k':'b'}"), NULL,
                                         &fd),
           0);
  conf_keep(fd);
  CHECK_RC(insert(c, "{'_id':5,'k':'b'}"), 0);

  /* update many: each document on its own; the colliding one is refused
   * and unchanged. */
  CHECK_RC(dtx_store_update(conf_st, c, NULL, JQ("{'$set':{'k':'same'}}"),
                            &(dtx_update_opts_t){.many = 1}, &r),
           DTX_EDUPKEY);
  CHECK(conf_count(c, JQ("{'k':'same'}")) == 1);
  CHECK(conf_count(c, NULL) == 3);
  /* Descending unique indexes are just as unique. */
  const char *c2 = conf_coll("ix_unique_desc");
  CHECK_RC(dtx_store_create_index(conf_st, c2, JQ("{'k':-1}"), &u, NULL), 0);
  CHECK_RC(insert(c2, "{'k':5}"), 0);
  CHECK_RC(insert(c2, "{'k':5}"), DTX_EDUPKEY);
#undef UNCHANGED
}

static void test_unique_multikey(void) {
  const char *c = conf_coll("ix_multikey");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'tags':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  static const struct {
    const char *doc;
    int want;
  } steps[] = {
      {"{'_id':1,'tags':['a','b']}", 0},
      {"{'_id':2,'tags':['c','a']}", DTX_EDUPKEY},
      {"{'_id':3,'tags':['c','d']}", 0},
      {"{'_id':4,'tags':'b'}", DTX_EDUPKEY},
      {"{'_id':5,'tags':['e','e']}", 0}, /* repeats within one doc */
      {"{'_id':6,'tags':'e'}", DTX_EDUPKEY},
      {"{'_id':7,'tags':['f',['a']]}", 0}, /* ['a'] is its own key */
      {"{'_id':8,'tags':[['a']]}", DTX_EDUPKEY},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int rc = insert(c, steps[i].doc);
    CHECKF(rc == steps[i].want, "%s: %s", steps[i].doc, dtx_errname(rc));
  }
  CHECK(conf_count(c, NULL) == 4);
  CHECK(conf_count(c, JQ("{'tags':'c'}")) == 1);
  CHECK(conf_count(c, JQ("{'tags':'a'}")) == 1);

  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':3}"),
                            JQ("{'$push':{'tags':'a'}}"), NULL, &r),
           DTX_EDUPKEY);
  json_t *d3 = conf_keep(conf_get(c, JQ("{'_id':3}")));
  CHECKF(d3 && json_equal(d3, JQ("{'_id':3,'tags':['c','d']}")), "doc3 %s",
         JS(d3));
  /* Pulling an element frees its key. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':3}"),
                            JQ("{'$pull':{'tags':'d'}}"), NULL, &r),
           0);
  CHECK_RC(insert(c, "{'_id':9,'tags':['d']}"), 0);
  CHECK_RC(insert(c, "{'_id':10,'tags':['c']}"), DTX_EDUPKEY);
}

/* An update shares the fields it does not change with the stored document
 * (dtx__update_apply), and SQLite skips the keys of an index whose fields
 * are all shared; a change below a top-level object (a.b) must still move
 * the key, and a change beside it (z, a.c) must keep it. */
static void test_unique_nested_update_moves_key(void) {
  const char *c = conf_coll("ix_nested_upd");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a.b':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  CHECK_RC(insert(c, "{'_id':1,'a':{'b':1,'c':1},'z':1}"), 0);
  CHECK_RC(insert(c, "{'_id':2,'a':{'b':2}}"), 0);
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':1}"),
                            JQ("{'$set':{'z':2,'a.c':2}}"), NULL, &r),
           0);
  CHECK(conf_count(c, JQ("{'a.b':1}")) == 1);
  CHECK_RC(insert(c, "{'_id':3,'a':{'b':1}}"), DTX_EDUPKEY);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':1}"),
                            JQ("{'$set':{'a.b':3}}"), NULL, &r),
           0);
  CHECK(conf_count(c, JQ("{'a.b':1}")) == 0);
  CHECK(conf_count(c, JQ("{'a.b':3}")) == 1);
  CHECK_RC(insert(c, "{'_id':3,'a':{'b':1}}"), 0);
  CHECK_RC(insert(c, "{'_id':4,'a':{'b':3}}"), DTX_EDUPKEY);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"),
                            JQ("{'$set':{'a.b':3}}"), NULL, &r),
           DTX_EDUPKEY);
}

/* The ledger case from the issue: a unique compound index over two paths
 * through one array must pair values element by element. */
static void test_unique_compound_ledger(void) {
  const char *c = conf_coll("ix_ledger");
  dtx_index_opts_t u = {.unique = 1};
  CHECK_RC(dtx_store_create_index(conf_st, c,
                                  JQ("{'changes.account':1,'changes.seqId':1}"),
                                  &u, NULL),
           0);
  static const struct {
    const char *doc;
    int want;
  } steps[] = {
      {"{'_id':1,'changes':[{'account':'A','seqId':1},"
       "{'account':'B','seqId':1}]}",
       0},
      {"{'_id':2,'changes':[{'account':'A','seqId':2},"
       "{'account':'B','seqId':2}]}",
       0},
      {"{'_id':3,'changes':[{'account':'A','seqId':1}]}", DTX_EDUPKEY},
      /* (A,3) and (C,1) are new although A and seqId 1 both exist. */
      {"{'_id':4,'changes':[{'account':'A','seqId':3},"
       "{'account':'C','seqId':1}]}",
       0},
      /* One new pair does not excuse a duplicate one. */
      {"{'_id':5,'changes':[{'account':'D','seqId':9},"
       "{'account':'B','seqId':2}]}",
       DTX_EDUPKEY},
      {"{'_id':6,'changes':[{'account':'B','seqId':3}]}", 0},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int rc = insert(c, steps[i].doc);
    CHECKF(rc == steps[i].want, "%s: %s (%s)", steps[i].doc, dtx_errname(rc),
           dtx_errdetail());
  }
  CHECK(conf_count(c, NULL) == 4);
  CHECK(conf_count(c, JQ("{'changes':{'$elemMatch':{'account':'D'}}}")) == 0);
  json_t *hit = conf_keep(
      conf_find(c, JQ("{'changes':{'$elemMatch':{'account':'A','seqId':3}}}"),
                NULL));
  CHECKF(hit && strcmp(conf_ids(hit), "[4]") == 0, "A/3 -> %s",
         hit ? conf_ids(hit) : "(error)");

  /* Appending a duplicate pair through an update is refused whole. */
  json_t *out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(
               conf_st, c, JQ("{'_id':4}"),
               JQ("{'$push':{'changes':{'account':'B','seqId':1}},"
                  "'$set':{'posted':true}}"),
               NULL, &out),
           DTX_EDUPKEY);
  CHECK(out == NULL);
  json_t *d4 = conf_keep(conf_get(c, JQ("{'_id':4}")));
  CHECKF(d4 && json_equal(d4, JQ(steps[3].doc)), "doc4 %s", JS(d4));
  CHECK_RC(dtx_store_find_one_and_update(
               conf_st, c, JQ("{'_id':4}"),
               JQ("{'$push':{'changes':{'account':'B','seqId':4}}}"), NULL,
               &out),
           0);
  conf_keep(out);

  /* Built over existing documents: element-wise too. */
  const char *c2 = conf_coll("ix_ledger_late");
  REQUIRE(conf_seed(c2, "[{'changes':[{'account':'A','seqId':1},"
                        "{'account':'B','seqId':2}]},"
                        "{'changes':[{'account':'A','seqId':2},"
                        "{'account':'B','seqId':1}]}]") == 0);
  CHECK_RC(dtx_store_create_index(conf_st, c2,
                                  JQ("{'changes.account':1,'changes.seqId':1}"),
                                  &u, NULL),
           0);
  const char *c3 = conf_coll("ix_ledger_late_dup");
  REQUIRE(conf_seed(c3, "[{'changes':[{'account':'A','seqId':1},"
                        "{'account':'B','seqId':2}]},"
                        "{'changes':[{'account':'B','seqId':2}]}]") == 0);
  CHECK_RC(dtx_store_create_index(conf_st, c3,
                                  JQ("{'changes.account':1,'changes.seqId':1}"),
                                  &u, NULL),
           DTX_EDUPKEY);
}

static void test_unique_sparse_and_null(void) {
  const char *c = conf_coll("ix_sparse");
  CHECK_RC(dtx_store_create_index(
               conf_st, c, JQ("{'x':1}"),
               &(dtx_index_opts_t){.unique = 1, .sparse = 1}, NULL),
           0);
  static const struct {
    const char *doc;
    int want;
  } sparse[] = {
      {"{'_id':1}", 0},
      {"{'_id':2}", 0}, /* lacking the field: not indexed, no conflict */
      {"{'_id':3,'x':1}", 0},
      {"{'_id':4,'x':1}", DTX_EDUPKEY},
      {"{'_id':5,'x':null}", 0}, /* present as null: indexed */
      {"{'_id':6,'x':null}", DTX_EDUPKEY},
      {"{'_id':7,'y':1}", 0},
  };
  for (size_t i = 0; i < sizeof sparse / sizeof sparse[0]; i++) {
    int rc = insert(c, sparse[i].doc);
    CHECKF(rc == sparse[i].want, "sparse %s: %s", sparse[i].doc,
           dtx_errname(rc));
  }
  /* Sparse index must not hide the unindexed documents from queries. */
  CHECK(conf_count(c, JQ("{'x':null}")) == 4);
  CHECK(conf_count(c, JQ("{'x':{'$exists':false}}")) == 3);

  const char *d = conf_coll("ix_nonsparse");
  CHECK_RC(dtx_store_create_index(conf_st, d, JQ("{'y':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  static const struct {
    const char *doc;
    int want;
  } dense[] = {
      {"{'_id':1}", 0},
      {"{'_id':2}", DTX_EDUPKEY}, /* both lack y: both null */
      {"{'_id':3,'y':null}", DTX_EDUPKEY},
      {"{'_id':4,'y':1}", 0},
      {"{'_id':5,'y':[]}", 0},
      {"{'_id':6,'y':[]}", DTX_EDUPKEY},
  };
  for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
    int rc = insert(d, dense[i].doc);
    CHECKF(rc == dense[i].want, "non-sparse %s: %s", dense[i].doc,
           dtx_errname(rc));
  }
  /* Removing the field takes the null key. */
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, d, JQ("{'_id':4}"),
                            JQ("{'$unset':{'y':''}}"), NULL, &r),
           DTX_EDUPKEY);
  CHECK(conf_int_field(d, 4, "y") == 1);
}

/* Numbers are keys by value, exactly: 1 and 1.0 collide, 2^53 and 2^53+1
 * do not, int64 max and the double 2^63 do not. */
static void test_unique_number_equivalence(void) {
  const char *c = conf_coll("ix_numbers");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'v':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  static const struct {
    const char *doc;
    int want;
  } steps[] = {
      {"{'_id':1,'v':1}", 0},
      {"{'_id':2,'v':1.0}", DTX_EDUPKEY},
      {"{'_id':3,'v':'1'}", 0},
      {"{'_id':4,'v':9007199254740993}", 0},
      {"{'_id':5,'v':9007199254740992.0}", 0},
      {"{'_id':6,'v':9007199254740992}", DTX_EDUPKEY},
      {"{'_id':7,'v':9223372036854775807}", 0},
      {"{'_id':8,'v':9223372036854775808.0}", 0},
      {"{'_id':9,'v':-9223372036854775808}", 0},
      {"{'_id':10,'v':-9223372036854775808.0}", DTX_EDUPKEY},
      {"{'_id':11,'v':0}", 0},
      {"{'_id':12,'v':-0.0}", DTX_EDUPKEY},
      {"{'_id':13,'v':2.5}", 0},
      {"{'_id':14,'v':true}", 0},
      {"{'_id':15,'v':'A'}", 0},
      {"{'_id':16,'v':'a'}", 0},
      {"{'_id':19,'v':[9007199254740993]}", DTX_EDUPKEY},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int rc = insert(c, steps[i].doc);
    CHECKF(rc == steps[i].want, "%s: %s", steps[i].doc, dtx_errname(rc));
  }
  static const struct {
    const char *filter, *want;
  } q[] = {
      {"{'v':1.0}", "[1]"},
      {"{'v':9007199254740992}", "[5]"},
      {"{'v':9007199254740993}", "[4]"},
      {"{'v':9223372036854775807}", "[7]"},
      {"{'v':{'$gt':9223372036854775807}}", "[8]"},
      {"{'v':{'$gte':9007199254740992,'$lt':9007199254740993}}", "[5]"},
      {"{'v':-0.0}", "[11]"},
  };
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
    json_t *all = conf_keep(conf_find(c, JQ(q[i].filter), NULL));
    const char *ids = all ? conf_ids(all) : "(error)";
    CHECKF(strcmp(ids, q[i].want) == 0, "%s: got %s want %s", q[i].filter,
           ids, q[i].want);
  }
}

/* Embedded documents and arrays are keys by value too, as equality
 * matching sees them: {a:1} equals {a:1.0}, so a unique index must refuse
 * the second. */
static void test_unique_nested_values_compare_by_value(void) {
  const char *c = conf_coll("ix_nested_numbers");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'v':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  static const struct {
    const char *doc;
    int want;
  } steps[] = {
      {"{'_id':1,'v':{'a':1}}", 0},
      {"{'_id':2,'v':{'a':1.0}}", DTX_EDUPKEY},
      {"{'_id':3,'v':{'a':1,'b':2}}", 0},
      {"{'_id':4,'v':{'b':2,'a':1}}", 0}, /* field order matters */
      {"{'_id':5,'v':[[1]]}", 0},
      {"{'_id':6,'v':[[1.0]]}", DTX_EDUPKEY},
  };
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    int rc = insert(c, steps[i].doc);
    CHECKF(rc == steps[i].want, "%s: %s", steps[i].doc, dtx_errname(rc));
  }
  /* The matcher agrees: both spellings find the one stored document. */
  CHECK(conf_count(c, JQ("{'v':{'a':1.0}}")) == 1);
  CHECK(conf_count(c, JQ("{'v':[1.0]}")) == 1);
}

/* A compound index cannot hold a document with arrays at two of its
 * paths (the keys would be a cross product); it is refused whole. */
static void test_parallel_arrays_refused(void) {
  const char *c = conf_coll("ix_parallel");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'a':1,'b':1}"), NULL,
                                  NULL),
           0);
  CHECK_RC(insert(c, "{'_id':1,'a':[1,2],'b':[3,4]}"), DTX_EBADINDEX);
  CHECK(conf_count(c, NULL) == 0);
  CHECK_RC(insert(c, "{'_id':2,'a':[1,2],'b':3}"), 0);
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':2}"),
                            JQ("{'$set':{'b':[3,4]}}"), NULL, &r),
           DTX_EBADINDEX);
  CHECK(conf_int_field(c, 2, "b") == 3);

  const char *d = conf_coll("ix_parallel_late");
  REQUIRE(conf_seed(d, "[{'_id':1,'a':[1],'b':[2]}]") == 0);
  CHECK_RC(dtx_store_create_index(conf_st, d, JQ("{'a':1,'b':1}"), NULL,
                                  NULL),
           DTX_EBADINDEX);
  json_t *l = list_indexes(d);
  CHECKF(l && json_array_size(l) == 1, "indexes %s", JS(l));
}

/* ---- no collection scans ----------------------------------------------------- */

static const char *NOSCAN_COLL;

typedef enum { OP_FIND, OP_COUNT, OP_UPDATE_MANY, OP_FAM, OP_DELETE } op_t;

/* Runs one operation and returns how many documents the backend examined
 * for it, or -1 when it failed.  *n receives the number of results. */
static int64_t examined(op_t op, const char *filter, const char *extra,
                        int64_t *n) {
  json_t *f = JQ(filter);
  int rc = 0;
  int64_t before = dtx__docs_examined;
  switch (op) {
  case OP_FIND: {
    json_t *out = NULL;
    dtx_find_opts_t o = {.sort = extra ? JQ(extra) : NULL};
    rc = dtx_store_find(conf_st, NOSCAN_COLL, f, &o, &out);
    *n = rc == 0 ? (int64_t)json_array_size(out) : -1;
    json_decref(out);
    break;
  }
  case OP_COUNT:
    rc = dtx_store_count(conf_st, NOSCAN_COLL, f, n);
    break;
  case OP_UPDATE_MANY: {
    dtx_update_result_t r;
    rc = dtx_store_update(conf_st, NOSCAN_COLL, f, JQ(extra),
                          &(dtx_update_opts_t){.many = 1}, &r);
    *n = r.matched;
    break;
  }
  case OP_FAM: {
    json_t *out = NULL;
    rc = dtx_store_find_one_and_update(conf_st, NOSCAN_COLL, f, JQ(extra),
                                       NULL, &out);
    *n = out ? 1 : 0;
    json_decref(out);
    break;
  }
  case OP_DELETE:
    rc = dtx_store_delete(conf_st, NOSCAN_COLL, f, 0, n);
    break;
  }
  int64_t ex = dtx__docs_examined - before;
  CHECKF(rc == 0, "%s: %s (%s)", filter, dtx_errname(rc), dtx_errdetail());
  return rc == 0 ? ex : -1;
}

static void test_indexed_queries_do_not_scan(void) {
  NOSCAN_COLL = conf_coll("ix_noscan");
  enum { N = 2000 };
  CHECK_RC(dtx_store_create_index(conf_st, NOSCAN_COLL, JQ("{'k':1}"), NULL,
                                  NULL),
           0);
  json_t *docs = json_array();
  for (int i = 0; i < N; i++)
    json_array_append_new(docs, json_pack("{sisisssisisi}", "_id", i, "k",
                                          i % 100, "g", "x", "a", i % 10, "b",
                                          (i / 10) % 10, "r", i));
  size_t n = 0;
  CHECK_RC(dtx_store_insert_many(conf_st, NOSCAN_COLL, docs, &n, NULL), 0);
  json_decref(docs);
  REQUIRE(n == N);
  /* These two are built over existing documents. */
  CHECK_RC(dtx_store_create_index(conf_st, NOSCAN_COLL, JQ("{'a':1,'b':1}"),
                                  NULL, NULL),
           0);
  CHECK_RC(dtx_store_create_index(conf_st, NOSCAN_COLL, JQ("{'r':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);

  static const struct {
    op_t op;
    const char *filter, *extra;
    int64_t n, max_examined;
  } cases[] = {
      {OP_FIND, "{'k':7}", NULL, 20, 40},
      {OP_COUNT, "{'k':7}", NULL, 20, 40},
      {OP_FIND, "{'k':7,'g':'x'}", NULL, 20, 40},
      {OP_FIND, "{'k':7}", "{'r':-1}", 20, 40},
      {OP_FIND, "{'a':3,'b':4}", NULL, 20, 40},
      {OP_COUNT, "{'a':3,'b':4}", NULL, 20, 40},
      {OP_FIND, "{'k':{'$in':[3,5]}}", NULL, 40, 80},
      {OP_COUNT, "{'k':{'$in':[3,5]}}", NULL, 40, 80},
      {OP_FIND, "{'r':{'$gte':100,'$lt':130}}", NULL, 30, 60},
      {OP_FIND, "{'r':{'$gt':1990}}", NULL, 9, 18},
      {OP_COUNT, "{'r':{'$lte':4}}", NULL, 5, 10},
      {OP_FIND, "{'_id':1234}", NULL, 1, 2},
      {OP_FIND, "{'_id':{'$in':[1,2,3]}}", NULL, 3, 6},
      /* Writes may re-check each candidate inside its atomic step. */
      {OP_UPDATE_MANY, "{'k':9}", "{'$set':{'t':1}}", 20, 60},
      {OP_FAM, "{'_id':1500}", "{'$inc':{'n':1}}", 1, 3},
      {OP_FAM, "{'k':11,'t':{'$exists':false}}", "{'$set':{'t':2}}", 1, 60},
      {OP_DELETE, "{'_id':1999}", NULL, 1, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t got = -1;
    int64_t ex = examined(cases[i].op, cases[i].filter, cases[i].extra, &got);
    CHECKF(got == cases[i].n, "case %zu %s: %lld results, want %lld", i,
           cases[i].filter, (long long)got, (long long)cases[i].n);
    CHECKF(ex >= 0 && ex <= cases[i].max_examined,
           "case %zu %s: examined %lld documents, at most %lld allowed", i,
           cases[i].filter, (long long)ex, (long long)cases[i].max_examined);
  }
  /* The counter works: an unindexed query examines every document. */
  int64_t got = -1;
  int64_t ex =
      examined(OP_FIND, "{'g':'x','n':{'$exists':false}}", NULL, &got);
  CHECKF(got == N - 2, "unindexed: %lld results", (long long)got);
  CHECKF(ex >= N - 1, "unindexed query examined only %lld", (long long)ex);
  ex = examined(OP_COUNT, "{'g':'x'}", NULL, &got);
  CHECKF(got == N - 1 && ex >= N - 1, "unindexed count: %lld, examined %lld",
         (long long)got, (long long)ex);
}

/* find_one_and_update with a sort walks an index in sort order when one
 * fits (equalities, then exactly the sort's fields): the claims must come
 * in exactly the order the same operations give without the index --
 * mixed types, ties in insertion order, missing fields, extra filter
 * conditions -- and examine a few documents each, not all.  A subdocument
 * or an empty array in the index makes it multikey (their index order is
 * not the sort order), and then the plain path decides. */
static void claim_all(const char *c, const char *tag, json_t *order) {
  for (int i = 0; i < 200; i++) {
    json_t *out = NULL;
    int rc = dtx_store_find_one_and_update(
        conf_st, c, JQ("{'g':'a','skip':{'$ne':true}}"),
        JQ("{'$set':{'g':'done'}}"),
        &(dtx_fam_opts_t){.sort = JQ("{'p':1,'t':1}")}, &out);
    if (rc == DTX_ENOMATCH)
      return;
    CHECKF(rc == 0, "%s claim %d: %s (%s)", tag, i, dtx_errname(rc),
           dtx_errdetail());
    if (rc)
      return;
    json_array_append(order, json_object_get(out, "_id"));
    json_decref(out);
  }
}

static void test_sorted_fam_walks_index(void) {
  const char *with = conf_coll("ix_sorted"), *plain = conf_coll("ix_sorted0");
  CHECK_RC(dtx_store_create_index(conf_st, with, JQ("{'g':1,'p':1,'t':1}"),
                                  NULL, NULL),
           0);
  static const char *const docs[] = {
      "{'_id':1,'g':'a','p':0,'t':5}",      "{'_id':2,'g':'a','p':-1,'t':9}",
      "{'_id':3,'g':'a','p':0,'t':5.0}",    "{'_id':4,'g':'b','p':-5,'t':0}",
      "{'_id':5,'g':'a','p':0,'t':4.5}",    "{'_id':6,'g':'a','t':1}",
      "{'_id':7,'g':'a','p':null,'t':0}",   "{'_id':8,'g':'a','p':'x','t':0}",
      "{'_id':9,'g':'a','p':'X','t':0}",    "{'_id':10,'g':'a','p':true}",
      "{'_id':11,'g':'a','p':-1,'t':9,'skip':true}",
      "{'_id':12,'g':'a','p':-1,'t':9}",    "{'_id':13,'g':'a','p':2.5,'t':'s'}",
      "{'_id':14,'g':'a','p':-9007199254740993,'t':0}",
      "{'_id':15,'g':'a','p':-9007199254740992.0,'t':0}",
  };
  for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
    CHECK_RC(insert(with, docs[i]), 0);
    CHECK_RC(insert(plain, docs[i]), 0);
  }
  json_t *a = conf_keep(json_array()), *b = conf_keep(json_array());
  claim_all(with, "indexed", a);
  claim_all(plain, "plain", b);
  CHECKF(json_equal(a, b), "indexed order %s, plain order %s", JS(a), JS(b));
  CHECKF(json_array_size(a) == 13, "claimed %s", JS(a));

  /* A large backlog: each claim examines a few documents, not all. */
  enum { N = 1500 };
  json_t *many = json_array();
  for (int i = 0; i < N; i++)
    json_array_append_new(many, json_pack("{sisssisi}", "_id", 100 + i, "g",
                                          "a", "p", (i * 7) % 5, "t", i));
  CHECK_RC(dtx_store_insert_many(conf_st, with, many, NULL, NULL), 0);
  json_decref(many);
  int64_t before = dtx__docs_examined;
  json_t *out = NULL;
  for (int i = 0; i < 10; i++) {
    CHECK_RC(dtx_store_find_one_and_update(
                 conf_st, with, JQ("{'g':'a','skip':{'$ne':true}}"),
                 JQ("{'$set':{'g':'done'}}"),
                 &(dtx_fam_opts_t){.sort = JQ("{'p':1,'t':1}")}, &out),
             0);
    /* p == 0 first (i * 7 % 5 == 0: every fifth), by t */
    CHECKF(json_integer_value(json_object_get(out, "_id")) == 100 + 5 * i,
           "claim %d got %s", i, JS(out));
    json_decref(out);
  }
  int64_t ex = dtx__docs_examined - before;
  CHECKF(ex <= 10 * 80, "10 sorted claims examined %lld documents",
         (long long)ex);
  /* find with a sort and a limit is served the same way. */
  json_t *page = NULL;
  before = dtx__docs_examined;
  CHECK_RC(dtx_store_find(conf_st, with, JQ("{'g':'a','p':0}"),
                          &(dtx_find_opts_t){.sort = JQ("{'p':1,'t':1}"),
                                             .skip = 1, .limit = 2},
                          &page),
           0);
  CHECKF(json_array_size(page) == 2 &&
             json_integer_value(json_object_get(json_array_get(page, 0),
                                                "_id")) == 100 + 55,
         "page %s", JS(page));
  json_decref(page);
  (void)(dtx__docs_examined - before); /* Redis gathers a find in full */

  /* A subdocument makes the index multikey; the order stays exact. */
  const char *w2 = conf_coll("ix_sorted2"), *p2 = conf_coll("ix_sorted3");
  CHECK_RC(dtx_store_create_index(conf_st, w2, JQ("{'g':1,'p':1,'t':1}"),
                                  NULL, NULL),
           0);
  static const char *const docs2[] = {
      "{'_id':1,'g':'a','p':{'z':1},'t':0}", "{'_id':2,'g':'a','p':{'a':2}}",
      "{'_id':3,'g':'a','p':[],'t':0}",      "{'_id':4,'g':'a','p':null}",
      "{'_id':5,'g':'a','p':1}",
  };
  for (size_t i = 0; i < sizeof docs2 / sizeof *docs2; i++) {
    CHECK_RC(insert(w2, docs2[i]), 0);
    CHECK_RC(insert(p2, docs2[i]), 0);
  }
  a = conf_keep(json_array());
  b = conf_keep(json_array());
  claim_all(w2, "indexed", a);
  claim_all(p2, "plain", b);
  CHECKF(json_equal(a, b) && json_array_size(a) == 5,
         "indexed order %s, plain order %s", JS(a), JS(b));
}

/* ---- a cached catalog that moved ------------------------------------------ */

/* The number of documents of c that `st` finds with filter f (and opts),
 * all with field g == gen; -1 and a failed check when it cannot. */
static int found_gen(dtx_store_t *st, const char *c, const char *f,
                     const dtx_find_opts_t *o, int gen, int *rc_out) {
  json_t *out = NULL;
  int rc = dtx_store_find(st, c, JQ(f), o, &out);
  if (rc_out)
    *rc_out = rc;
  if (rc != 0)
    return -1;
  size_t i;
  json_t *d;
  json_array_foreach(out, i, d) {
    CHECKF(json_integer_value(json_object_get(d, "g")) == gen,
           "%s %s: read %s, want generation %d", c, f, JS(d), gen);
  }
  int n = (int)json_array_size(out);
  json_decref(out);
  return n;
}

typedef struct set_first {
  const char *pattern, *val;
  char *old;
  size_t nold;
} set_first_t;

/* On one node: sets the first key matching the pattern whose value is
 * not "dropped" (a dropped generation's stamps linger a while) to val,
 * its old value in old.  1 when one was set. */
static int set_first_on(void *ctx, void *arg) {
  set_first_t *a = arg;
  redisContext *k = ctx;
  int set = 0;
  redisReply *r = redisCommand(k, "KEYS %s", a->pattern);
  for (size_t e = 0;
       !set && r && r->type == REDIS_REPLY_ARRAY && e < r->elements; e++) {
    const char *key = r->element[e]->str;
    redisReply *g = redisCommand(k, "GET %s", key);
    int dropped = g && g->type == REDIS_REPLY_STRING &&
                  strcmp(g->str, "dropped") == 0;
    snprintf(a->old, a->nold, "%s",
             g && g->type == REDIS_REPLY_STRING ? g->str : "");
    freeReplyObject(g);
    if (dropped)
      continue;
    g = redisCommand(k, "SET %s %s", key, a->val);
    set = g && g->type == REDIS_REPLY_STATUS;
    freeReplyObject(g);
  }
  freeReplyObject(r);
  return set;
}

/* On the Redis server (standalone, or the first master of a cluster that
 * has one): sets the first key matching pattern whose value is not
 * "dropped" to val, with its old value in old.  1 when one was set. */
static int redis_set_first(const char *pattern, const char *val, char *old,
                           size_t nold) {
  set_first_t a = {pattern, val, old, nold};
  return conf_redis_each_node(1, set_first_on, &a, 1) > 0;
}

/* A second handle -- as another process would -- has the catalog cached
 * when the collection is dropped and made again: each bucket's stamp
 * tells it its descriptor moved, so its scans, index reads and sorted
 * walks reload and read the new generation (with the old descriptor they
 * would read the old one's keys: nothing).  On Redis a stamp moved in ONE
 * bucket must do the same: a standalone server reads every bucket's range
 * in one script call (RD_S_MRANGE), and each sub-reply's stamp counts. */
static void test_second_handle_reads_after_recreate(void) {
  if (conf_store_is_private()) {
    conf_skip("a private store has no second handle");
    return;
  }
  const char *c = conf_coll("ix_recreate");
  enum { N = 48 };
  dtx_find_opts_t sorted = {.sort = JQ("{'k':1}"), .limit = 3};
  dtx_store_t *two = NULL;
  REQUIRE(dtx_store_open(conf_uri, &two) == 0);
  for (int gen = 1; gen <= 3; gen++) {
    if (gen > 1)
      CHECK_RC(dtx_store_drop_collection(conf_st, c), 0);
    CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), NULL, NULL),
             0);
    json_t *many = json_array();
    for (int i = 0; i < N; i++) /* new ids each time: none is left over */
      json_array_append_new(many, json_pack("{sisisi}", "_id", gen * 1000 + i,
                                            "k", i % 4, "g", gen));
    CHECK_RC(dtx_store_insert_many(conf_st, c, many, NULL, NULL), 0);
    json_decref(many);
    CHECKF(found_gen(two, c, "{}", NULL, gen, NULL) == N, "scan, gen %d",
           gen);
    CHECKF(found_gen(two, c, "{'k':2}", NULL, gen, NULL) == N / 4,
           "index read, gen %d", gen);
    CHECKF(found_gen(two, c, "{'k':{'$in':[1,3]}}", NULL, gen, NULL) == N / 2,
           "index $in read, gen %d", gen);
    CHECKF(found_gen(two, c, "{'k':{'$gte':0}}", &sorted, gen, NULL) == 3,
           "sorted walk, gen %d", gen);
  }
  if (strncmp(conf_uri, "redis://", 8) == 0 && !conf_via_bulk()) {
    /* One bucket's stamp ahead of every catalog a reader can load: each
     * read reloads and finds it still ahead, until it gives up. */
    char pattern[512], old[64] = "";
    snprintf(pattern, sizeof pattern, "*m:{%s:*:5}", c);
    REQUIRE(redis_set_first(pattern, "999999999", old, sizeof old));
    static const char *const fs[] = {"{}", "{'k':2}", "{'k':{'$in':[1,3]}}"};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++) {
      int rc = 0;
      found_gen(two, c, fs[i], NULL, 3, &rc);
      CHECKF(rc == DTX_EBUSY, "%s with one bucket's stamp ahead: %s (%s)",
             fs[i], dtx_errname(rc), dtx_errdetail());
    }
    int rc = 0;
    found_gen(two, c, "{'k':{'$gte':0}}", &sorted, 3, &rc);
    CHECKF(rc == DTX_EBUSY, "sorted walk with one bucket's stamp ahead: %s",
           dtx_errname(rc));
    char back[64];
    REQUIRE(redis_set_first(pattern, old[0] ? old : "1", back, sizeof back));
    CHECK(found_gen(two, c, "{}", NULL, 3, NULL) == N);
    CHECK(found_gen(two, c, "{'k':{'$gte':0}}", &sorted, 3, NULL) == 3);
  }
  dtx_store_close(two);
}

void conf_run_index(void) {
  CONF_RUN(test_index_create_and_list);
  CONF_RUN(test_index_recreate_and_conflicts);
  CONF_RUN(test_index_longest_name);
  CONF_RUN(test_second_handle_reads_after_recreate);
  CONF_RUN(test_index_bad_specs);
  CONF_RUN(test_unique_refused_over_existing_duplicates);
  CONF_RUN(test_unique_every_write_path);
  CONF_RUN(test_unique_multikey);
  CONF_RUN(test_unique_nested_update_moves_key);
  CONF_RUN(test_unique_compound_ledger);
  CONF_RUN(test_unique_sparse_and_null);
  CONF_RUN(test_unique_number_equivalence);
  CONF_RUN(test_unique_nested_values_compare_by_value);
  CONF_RUN(test_parallel_arrays_refused);
  CONF_RUN(test_indexed_queries_do_not_scan);
  CONF_RUN(test_sorted_fam_walks_index);
}
