/* test_sqlite_catalog.c -- collections and indexes in the SQLite backend:
 * catalog changes made through one handle are seen by another handle on
 * the same file before its next write; index creation over existing
 * documents refuses duplicates and leaves nothing behind; index naming
 * rules; _id typing (1 and "1" differ) and numeric key equality (1 and
 * 1.0 collide in a unique index); the duplicate-key detail format. */
#include "testlib.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/dtx_test_cat.XXXXXX";
static int nfile;

/* A fresh file store for one test. */
static dtx_store_t *open_file(char *uri, size_t n) {
  snprintf(uri, n, "sqlite:%s/t%d.db?sync=normal", dir, nfile++);
  dtx_store_t *st = NULL;
  if (dtx_store_open(uri, &st) < 0)
    fprintf(stderr, "open %s: %s\n", uri, dtx_errdetail());
  return st;
}

static int insert(dtx_store_t *st, const char *coll, const char *doc) {
  json_t *d = J(doc);
  int rc = dtx_store_insert(st, coll, d, NULL);
  json_decref(d);
  return rc;
}

static int create_index(dtx_store_t *st, const char *coll, const char *keys,
                        int unique, const char *name) {
  json_t *k = J(keys);
  dtx_index_opts_t o = {.unique = unique, .name = name};
  int rc = dtx_store_create_index(st, coll, k, &o, NULL);
  json_decref(k);
  return rc;
}

static size_t nindexes(dtx_store_t *st, const char *coll) {
  json_t *ix = NULL;
  if (dtx_store_list_indexes(st, coll, &ix) < 0)
    return (size_t)-1;
  size_t n = json_array_size(ix);
  json_decref(ix);
  return n;
}

/* Counts tables in the file whose name starts with prefix, through a
 * connection of our own. */
static int count_tables(const char *uri, const char *prefix) {
  const char *path = uri + strlen("sqlite:");
  char file[300];
  snprintf(file, sizeof file, "%.*s", (int)strcspn(path, "?"), path);
  sqlite3 *db;
  sqlite3_stmt *st;
  int n = -1;
  if (sqlite3_open(file, &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db,
                         "SELECT count(*) FROM sqlite_master WHERE "
                         "type='table' AND substr(name,1,length(?1))=?1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW)
      n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return n;
}

/* Handle B has cached the catalog of "c" (no indexes); A adds a unique
 * index; B's next insert must respect it. */
static void test_catalog_reload_two_handles(void) {
  char uri[300];
  dtx_store_t *a = open_file(uri, sizeof uri), *b = NULL;
  REQUIRE(a);
  REQUIRE(dtx_store_open(uri, &b) == 0);
  CHECK_RC(insert(b, "c", "{\"_id\":1,\"k\":\"x\"}"), 0);
  CHECK(nindexes(b, "c") == 1);

  CHECK_RC(create_index(a, "c", "{\"k\":1}", 1, "k_uniq"), 0);
  CHECK_RC(insert(b, "c", "{\"_id\":2,\"k\":\"x\"}"), DTX_EDUPKEY);
  CHECK(strstr(dtx_errdetail(), "k_uniq") != NULL);
  CHECK(nindexes(b, "c") == 2);
  CHECK_RC(insert(b, "c", "{\"_id\":3,\"k\":\"y\"}"), 0);

  /* B's update that would collide is refused too. */
  json_t *f = J("{\"_id\":3}"), *u = J("{\"$set\":{\"k\":\"x\"}}"), *out;
  CHECK_RC(dtx_store_find_one_and_update(b, "c", f, u, NULL, &out),
           DTX_EDUPKEY);
  json_decref(f);
  json_decref(u);

  /* A drops the collection: B sees it gone, and recreates it without the
   * index on its next insert. */
  CHECK_RC(dtx_store_drop_collection(a, "c"), 0);
  json_t *docs = NULL;
  CHECK_RC(dtx_store_find(b, "c", NULL, NULL, &docs), 0);
  CHECK(json_array_size(docs) == 0);
  json_decref(docs);
  CHECK_RC(insert(b, "c", "{\"_id\":1,\"k\":\"x\"}"), 0);
  CHECK_RC(insert(b, "c", "{\"_id\":2,\"k\":\"x\"}"), 0);
  CHECK(nindexes(a, "c") == 1);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(a, "c", NULL, &n), 0);
  CHECK(n == 2);
  dtx_store_close(a);
  dtx_store_close(b);
}

static void test_index_build_duplicate(void) {
  char uri[300];
  dtx_store_t *st = open_file(uri, sizeof uri);
  REQUIRE(st);
  CHECK_RC(insert(st, "c", "{\"_id\":1,\"a\":1,\"b\":\"p\"}"), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":2,\"a\":2,\"b\":\"q\"}"), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":3,\"a\":2.0,\"b\":\"r\"}"), 0);

  CHECK_RC(create_index(st, "c", "{\"a\":1}", 1, NULL), DTX_EDUPKEY);
  CHECKF(strcmp(dtx_errdetail(),
                "duplicate key {\"a\":2.0} in unique index 'a_1'") == 0 ||
             strcmp(dtx_errdetail(),
                    "duplicate key {\"a\":2} in unique index 'a_1'") == 0,
         "detail %s", dtx_errdetail());
  CHECK(nindexes(st, "c") == 1);
  CHECK(count_tables(uri, "i:") == 0);
  /* Nothing half-built enforces uniqueness afterwards. */
  CHECK_RC(insert(st, "c", "{\"_id\":4,\"a\":1}"), 0);

  /* A unique index that holds is built and enforced; the duplicate-free
   * field b works. */
  CHECK_RC(create_index(st, "c", "{\"b\":1}", 1, NULL), 0);
  CHECK(count_tables(uri, "i:") == 1);
  CHECK_RC(insert(st, "c", "{\"_id\":5,\"b\":\"q\"}"), DTX_EDUPKEY);
  CHECK(strcmp(dtx_errdetail(),
               "duplicate key {\"b\":\"q\"} in unique index 'b_1'") == 0);
  /* Two documents without b share the null key: only one may exist. */
  CHECK_RC(insert(st, "c", "{\"_id\":6}"), DTX_EDUPKEY);
  CHECK(strcmp(dtx_errdetail(),
               "duplicate key {\"b\":null} in unique index 'b_1'") == 0);
  dtx_store_close(st);
}

static void test_index_names(void) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  /* create_index creates the collection. */
  CHECK_RC(create_index(st, "c", "{\"a\":1}", 0, "ia"), 0);
  json_t *names = NULL;
  CHECK_RC(dtx_store_list_collections(st, &names), 0);
  CHECK(strcmp(JS(names), "[\"c\"]") == 0);
  json_decref(names);
  CHECK_RC(create_index(st, "c", "{\"a\":1}", 0, "ia"), 0);
  CHECK_RC(create_index(st, "c", "{\"a\":-1}", 0, "ia"), DTX_EBADINDEX);
  CHECK(strstr(dtx_errdetail(), "ia") != NULL);
  CHECK_RC(create_index(st, "c", "{\"a\":1}", 1, "ia"), DTX_EBADINDEX);
  CHECK_RC(create_index(st, "c", "{\"_id\":1}", 0, "_id_"), 0);
  CHECK_RC(create_index(st, "c", "{\"b\":1}", 0, "_id_"), DTX_EBADINDEX);
  CHECK_RC(create_index(st, "c", "{\"x.y\":1,\"z\":-1}", 1, NULL), 0);

  json_t *ix = NULL;
  CHECK_RC(dtx_store_list_indexes(st, "c", &ix), 0);
  CHECKF(strcmp(JS(ix),
                "[{\"name\":\"_id_\",\"key\":{\"_id\":1},\"unique\":true,"
                "\"sparse\":false},"
                "{\"name\":\"ia\",\"key\":{\"a\":1},\"unique\":false,"
                "\"sparse\":false},"
                "{\"name\":\"x.y_1_z_-1\",\"key\":{\"x.y\":1,\"z\":-1},"
                "\"unique\":true,\"sparse\":false}]") == 0,
         "%s", JS(ix));
  json_decref(ix);

  /* A missing collection has no indexes. */
  CHECK_RC(dtx_store_list_indexes(st, "nope", &ix), 0);
  CHECK(json_is_array(ix) && json_array_size(ix) == 0);
  json_decref(ix);
  dtx_store_close(st);
}

static void test_collections(void) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  static const char *const names[] = {"zeta", "Alpha", "beta.x", "a-b",
                                      "_under"};
  for (size_t i = 0; i < 5; i++)
    CHECK_RC(insert(st, names[i], "{}"), 0);
  json_t *l = NULL;
  CHECK_RC(dtx_store_list_collections(st, &l), 0);
  CHECKF(strcmp(JS(l),
                "[\"Alpha\",\"_under\",\"a-b\",\"beta.x\",\"zeta\"]") == 0,
         "%s", JS(l));
  json_decref(l);
  CHECK_RC(dtx_store_drop_collection(st, "beta.x"), 0);
  CHECK_RC(dtx_store_drop_collection(st, "beta.x"), 0);
  CHECK_RC(dtx_store_drop_collection(st, "never"), 0);
  CHECK_RC(dtx_store_list_collections(st, &l), 0);
  CHECK(strcmp(JS(l), "[\"Alpha\",\"_under\",\"a-b\",\"zeta\"]") == 0);
  json_decref(l);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(st, "beta.x", NULL, &n), 0);
  CHECK(n == 0);
  dtx_store_close(st);
}

/* _id has no type affinity: 1 and "1" are two documents.  Index values
 * compare numerically: 1 and 1.0 are one key. */
static void test_id_types_and_numeric_keys(void) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  CHECK_RC(insert(st, "c", "{\"_id\":1,\"v\":\"int\"}"), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":\"1\",\"v\":\"str\"}"), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":1}"), DTX_EDUPKEY);
  CHECK(strcmp(dtx_errdetail(),
               "duplicate key {\"_id\":1} in unique index '_id_'") == 0);
  CHECK_RC(insert(st, "c", "{\"_id\":\"1\"}"), DTX_EDUPKEY);
  CHECK(strcmp(dtx_errdetail(),
               "duplicate key {\"_id\":\"1\"} in unique index '_id_'") == 0);
  json_t *f = J("{\"_id\":\"1\"}"), *docs = NULL;
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &docs), 0);
  CHECK(strcmp(JS(docs), "[{\"_id\":\"1\",\"v\":\"str\"}]") == 0);
  json_decref(docs);
  json_decref(f);
  f = J("{\"_id\":1}");
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &docs), 0);
  CHECK(strcmp(JS(docs), "[{\"_id\":1,\"v\":\"int\"}]") == 0);
  json_decref(docs);
  json_decref(f);

  CHECK_RC(create_index(st, "n", "{\"x\":1}", 1, "xu"), 0);
  CHECK_RC(insert(st, "n", "{\"_id\":1,\"x\":1}"), 0);
  CHECK_RC(insert(st, "n", "{\"_id\":2,\"x\":1.0}"), DTX_EDUPKEY);
  CHECK_RC(insert(st, "n", "{\"_id\":3,\"x\":\"1\"}"), 0);
  CHECK_RC(insert(st, "n", "{\"_id\":4,\"x\":true}"), 0);
  CHECK_RC(insert(st, "n", "{\"_id\":5,\"x\":[1]}"), DTX_EDUPKEY);
  CHECK_RC(insert(st, "n", "{\"_id\":6,\"x\":{\"a\":1}}"), 0);
  CHECK_RC(insert(st, "n", "{\"_id\":7,\"x\":{\"a\":1}}"), DTX_EDUPKEY);
  dtx_store_close(st);
}

/* The ledger's compound unique index over an array of changes. */
static void test_compound_dupkey_detail(void) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  CHECK_RC(create_index(st, "ledger",
                        "{\"changes.account\":1,\"changes.seqId\":1}", 1,
                        "ledger_uniq"),
           0);
  CHECK_RC(insert(st, "ledger",
                  "{\"_id\":\"t1\",\"changes\":[{\"account\":\"A\","
                  "\"seqId\":3},{\"account\":\"B\",\"seqId\":7}]}"),
           0);
  CHECK_RC(insert(st, "ledger",
                  "{\"_id\":\"t2\",\"changes\":[{\"account\":\"C\","
                  "\"seqId\":1},{\"account\":\"A\",\"seqId\":3}]}"),
           DTX_EDUPKEY);
  CHECKF(strcmp(dtx_errdetail(),
                "duplicate key {\"changes.account\":\"A\","
                "\"changes.seqId\":3} in unique index 'ledger_uniq'") == 0,
         "%s", dtx_errdetail());
  /* Same account, other seqId; same seqId, other account: both fine. */
  CHECK_RC(insert(st, "ledger",
                  "{\"_id\":\"t3\",\"changes\":[{\"account\":\"A\","
                  "\"seqId\":4},{\"account\":\"B\",\"seqId\":3}]}"),
           0);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(st, "ledger", NULL, &n), 0);
  CHECK(n == 2);
  dtx_store_close(st);
}

/* Index rows follow updates and deletes: a freed key can be reused. */
static void test_index_maintenance(void) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  CHECK_RC(create_index(st, "c", "{\"k\":1}", 1, NULL), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":1,\"k\":\"a\"}"), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":2,\"k\":\"b\"}"), 0);
  json_t *f = J("{\"_id\":1}"), *u = J("{\"$set\":{\"k\":\"c\"}}"),
         *out = NULL;
  CHECK_RC(dtx_store_find_one_and_update(st, "c", f, u, NULL, &out), 0);
  json_decref(out);
  CHECK_RC(insert(st, "c", "{\"_id\":3,\"k\":\"a\"}"), 0);
  CHECK_RC(insert(st, "c", "{\"_id\":4,\"k\":\"c\"}"), DTX_EDUPKEY);
  int64_t del = -1;
  json_t *fb = J("{\"k\":\"b\"}");
  CHECK_RC(dtx_store_delete(st, "c", fb, 0, &del), 0);
  CHECK(del == 1);
  CHECK_RC(insert(st, "c", "{\"_id\":5,\"k\":\"b\"}"), 0);
  /* A failed update leaves document and index as they were. */
  json_t *u2 = J("{\"$set\":{\"k\":\"a\"}}");
  CHECK_RC(dtx_store_find_one_and_update(st, "c", f, u2, NULL, &out),
           DTX_EDUPKEY);
  json_t *docs = NULL;
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &docs), 0);
  CHECK(strcmp(JS(docs), "[{\"_id\":1,\"k\":\"c\"}]") == 0);
  json_decref(docs);
  CHECK_RC(insert(st, "c", "{\"_id\":6,\"k\":\"c\"}"), DTX_EDUPKEY);
  json_decref(f);
  json_decref(u);
  json_decref(u2);
  json_decref(fb);
  dtx_store_close(st);
}

/* An index becomes multikey when a document gives it several keys; a
 * handle that planned with the old catalog must learn it before its next
 * query, or two range bounds would wrongly narrow to one key. */
static void test_multikey_seen_by_other_handle(void) {
  char uri[300];
  dtx_store_t *a = open_file(uri, sizeof uri), *b = NULL;
  REQUIRE(a);
  REQUIRE(dtx_store_open(uri, &b) == 0);
  CHECK_RC(create_index(a, "m", "{\"v\":1}", 0, NULL), 0);
  CHECK_RC(insert(a, "m", "{\"_id\":1,\"v\":2}"), 0);
  json_t *f = J("{\"v\":{\"$gte\":2,\"$lt\":3}}"), *docs = NULL;
  CHECK_RC(dtx_store_find(b, "m", f, NULL, &docs), 0);
  CHECK(strcmp(JS(docs), "[{\"_id\":1,\"v\":2}]") == 0);
  json_decref(docs);
  CHECK_RC(insert(a, "m", "{\"_id\":2,\"v\":[1,5]}"), 0);
  CHECK_RC(dtx_store_find(b, "m", f, NULL, &docs), 0);
  CHECKF(strcmp(JS(docs), "[{\"_id\":1,\"v\":2},{\"_id\":2,\"v\":[1,5]}]") ==
             0,
         "%s", JS(docs));
  json_decref(docs);
  json_decref(f);
  dtx_store_close(a);
  dtx_store_close(b);
}

/* A store written by a doctx of format 2 -- tables named after the
 * collection as it is ("c:Foo"), no rules table -- opens as format 3: the
 * tables of names with capitals are renamed, their documents and indexes
 * still answer, and "foo" becomes a collection of its own. */
static void test_format2_store_upgrades(void) {
  char file[300], uri[320];
  snprintf(file, sizeof file, "%s/fmt2.db", dir);
  snprintf(uri, sizeof uri, "sqlite:%s", file);
  sqlite3 *db;
  REQUIRE(sqlite3_open(file, &db) == SQLITE_OK);
  static const char fmt2[] =
      "CREATE TABLE _dtx_meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
      "INSERT INTO _dtx_meta VALUES('format', 2), ('catalog', 0);"
      "CREATE TABLE _dtx_coll(name TEXT PRIMARY KEY) WITHOUT ROWID;"
      "CREATE TABLE _dtx_index(id INTEGER PRIMARY KEY AUTOINCREMENT,"
      " coll TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,"
      " multikey INTEGER NOT NULL DEFAULT 0, UNIQUE(coll, name));"
      "INSERT INTO _dtx_coll VALUES('Foo'), ('bar');"
      "CREATE TABLE \"c:Foo\"(seq INTEGER PRIMARY KEY, id UNIQUE NOT NULL,"
      " body TEXT NOT NULL);"
      "CREATE TABLE \"c:bar\"(seq INTEGER PRIMARY KEY, id UNIQUE NOT NULL,"
      " body TEXT NOT NULL);"
      "INSERT INTO \"c:Foo\" VALUES(1, 'A', '{\"_id\":\"A\",\"k\":7}');"
      "INSERT INTO \"c:bar\" VALUES(1, 'B', '{\"_id\":\"B\"}');"
      "INSERT INTO _dtx_index(id, coll, name, spec) VALUES(1, 'Foo', 'k_1',"
      " '{\"name\":\"k_1\",\"key\":{\"k\":1},\"unique\":true,"
      "\"sparse\":false}');"
      "CREATE TABLE \"i:Foo:1\"(b0 INTEGER NOT NULL, v0 NOT NULL,"
      " seq INTEGER NOT NULL, PRIMARY KEY(b0, v0)) WITHOUT ROWID;"
      "INSERT INTO \"i:Foo:1\" VALUES(2, 7, 1);";
  char *err = NULL;
  int src = sqlite3_exec(db, fmt2, NULL, NULL, &err);
  CHECKF(src == SQLITE_OK, "%s", err ? err : "?");
  sqlite3_free(err);
  sqlite3_close(db);

  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  json_t *f = J("{\"k\":7}"), *out = NULL;
  CHECK_RC(dtx_store_find(st, "Foo", f, NULL, &out), 0);
  CHECKF(json_array_size(out) == 1, "%s", JS(out));
  json_decref(out);
  CHECK(insert(st, "Foo", "{\"_id\":\"C\",\"k\":7}") == DTX_EDUPKEY);
  CHECK(insert(st, "foo", "{\"_id\":\"A\",\"k\":7}") == 0);
  CHECK(insert(st, "bar", "{\"_id\":\"C\"}") == 0);
  CHECK(nindexes(st, "Foo") == 2 && nindexes(st, "foo") == 1);
  CHECK_RC(dtx_store_find(st, "Foo", NULL, NULL, &out), 0);
  CHECKF(json_array_size(out) == 1, "%s", JS(out));
  json_decref(out);
  json_decref(f);
  dtx_store_close(st);
  CHECK(count_tables(uri, "c:^foo") == 1);
  CHECK(count_tables(uri, "i:^foo:1") == 1);
  CHECK(count_tables(uri, "_dtx_rules") == 1);
  /* Opening again finds format 3 and changes nothing more. */
  REQUIRE(dtx_store_open(uri, &st) == 0);
  CHECK(nindexes(st, "Foo") == 2);
  dtx_store_close(st);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_catalog_reload_two_handles);
  TEST_RUN(test_index_build_duplicate);
  TEST_RUN(test_index_names);
  TEST_RUN(test_collections);
  TEST_RUN(test_id_types_and_numeric_keys);
  TEST_RUN(test_compound_dupkey_detail);
  TEST_RUN(test_index_maintenance);
  TEST_RUN(test_multikey_seen_by_other_handle);
  TEST_RUN(test_format2_store_upgrades);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return TEST_DONE();
}
