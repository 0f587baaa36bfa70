/* test_sqlite_catalog.c -- collections and indexes in the SQLite backend:
 * catalog changes made through one handle are seen by another handle on
 * the same file before its next write; index creation over existing
 * documents refuses duplicates and leaves nothing behind; index naming
 * rules; _id typing (1 and "1" differ) and numeric key equality (1 and
 * 1.0 collide in a unique index); the duplicate-key detail format; the
 * store format: format 2 and 3 files upgraded in place to 4 (bodies as
 * BSON BLOBs), a body that cannot convert leaving the file as it was, a
 * newer format refused, and a bad stored body reported naming it. */
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

/* A fresh file of the next number; its path in file, its URI in uri. */
static void new_file(char *file, size_t fn, char *uri, size_t un) {
  snprintf(file, fn, "%s/f%d.db", dir, nfile++);
  snprintf(uri, un, "sqlite:%s", file);
}

/* Runs sql (several statements) on file with a connection of our own. */
static int sql_run(const char *file, const char *sql) {
  sqlite3 *db;
  char *err = NULL;
  int src = sqlite3_open(file, &db);
  if (src == SQLITE_OK)
    src = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (src != SQLITE_OK)
    fprintf(stderr, "sql: %s: %s\n", err ? err : sqlite3_errmsg(db), sql);
  sqlite3_free(err);
  sqlite3_close(db);
  return src;
}

/* The first column of the first row of query on file, or -1. */
static long long sql_int(const char *file, const char *query) {
  sqlite3 *db;
  sqlite3_stmt *st;
  long long v = -1;
  if (sqlite3_open(file, &db) == SQLITE_OK &&
      sqlite3_prepare_v2(db, query, -1, &st, NULL) == SQLITE_OK) {
    if (sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
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
  CHECK(sql_int(file, "SELECT v FROM _dtx_meta WHERE k='format'") == 4);
  CHECK(sql_int(file, "SELECT count(*) FROM \"c:bar\" WHERE "
                      "typeof(body)<>'blob'") == 0);
  /* Opening again finds format 4 and changes nothing more. */
  REQUIRE(dtx_store_open(uri, &st) == 0);
  CHECK(nindexes(st, "Foo") == 2);
  dtx_store_close(st);
}

/* ---- format 4: bodies as BSON ---------------------------------------------------- */

/* The catalog tables of a format-3 file, one collection "c" with a
 * unique index on n and a fence table; rows are added by the caller. */
static const char FMT3[] =
    "CREATE TABLE _dtx_meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
    "INSERT INTO _dtx_meta VALUES('format', 3), ('catalog', 0);"
    "CREATE TABLE _dtx_coll(name TEXT PRIMARY KEY) WITHOUT ROWID;"
    "CREATE TABLE _dtx_index(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " coll TEXT NOT NULL, name TEXT NOT NULL, spec TEXT NOT NULL,"
    " multikey INTEGER NOT NULL DEFAULT 0, UNIQUE(coll, name));"
    "CREATE TABLE _dtx_rules(coll TEXT PRIMARY KEY, spec TEXT NOT NULL)"
    " WITHOUT ROWID;"
    "CREATE TABLE _dtx_fence(coll TEXT NOT NULL, id NOT NULL,"
    " rec TEXT NOT NULL, PRIMARY KEY(coll, id)) WITHOUT ROWID;"
    "INSERT INTO _dtx_coll VALUES('c');"
    "CREATE TABLE \"c:c\"(seq INTEGER PRIMARY KEY, id UNIQUE NOT NULL,"
    " body TEXT NOT NULL);"
    "INSERT INTO _dtx_index(id, coll, name, spec) VALUES(1, 'c', 'n_1',"
    " '{\"name\":\"n_1\",\"key\":{\"n\":1},\"unique\":false,"
    "\"sparse\":true}');"
    "CREATE TABLE \"i:c:1\"(b0 INTEGER NOT NULL, v0 NOT NULL,"
    " seq INTEGER NOT NULL, PRIMARY KEY(b0, v0, seq)) WITHOUT ROWID;";

/* Adds a document of "c" to a format-3 file as that format stored it:
 * id (an SQL literal: the _id as docs.c binds it) and the JSON text,
 * index rows for n when it is an integer. */
static int fmt3_row(const char *file, int seq, const char *id,
                    const char *body, long long n) {
  sqlite3 *db;
  sqlite3_stmt *st;
  char sql[300];
  snprintf(sql, sizeof sql, "INSERT INTO \"c:c\" VALUES(%d, %s, ?1)", seq, id);
  int src = sqlite3_open(file, &db);
  if (src == SQLITE_OK &&
      (src = sqlite3_prepare_v2(db, sql, -1, &st, NULL)) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, body, -1, SQLITE_STATIC);
    src = sqlite3_step(st) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_finalize(st);
  }
  if (src == SQLITE_OK && n >= 0) {
    snprintf(sql, sizeof sql, "INSERT INTO \"i:c:1\" VALUES(2, %lld, %d)", n,
             seq);
    src = sqlite3_exec(db, sql, NULL, NULL, NULL);
  }
  if (src != SQLITE_OK)
    fprintf(stderr, "fmt3_row %s: %s\n", body, sqlite3_errmsg(db));
  sqlite3_close(db);
  return src;
}

/* Every kind of value format 3 could hold, with the _id as the id column
 * had it: what the store gave back before it must give back after the
 * upgrade, byte for byte as JSON (1 stays an integer, 1.0 a real, keys
 * keep their order). */
static const struct {
  const char *id;   /* SQL literal */
  const char *body; /* format 3's text */
  long long n;      /* index key n, or -1 */
} up_rows[] = {
    {"'x'", "{\"_id\":\"x\",\"n\":0,\"neg\":-17,\"r\":1.0,\"h\":0.5,"
            "\"z\":-0.0}", 0},
    {"1", "{\"_id\":1,\"max\":9223372036854775807,"
          "\"min\":-9223372036854775808,\"i32\":2147483647,"
          "\"o32\":2147483648,\"m32\":-2147483649}", -1},
    {"2.5", "{\"_id\":2.5,\"big\":1e300,\"tiny\":5e-324,\"p\":0.1,"
            "\"q\":123456789.125,\"whole\":1e20}", -1},
    {"'e'", "{\"_id\":\"e\",\"t\":true,\"f\":false,\"n\":null,\"s\":\"\","
            "\"a\":[],\"o\":{}}", -1},
    {"'s'", "{\"_id\":\"s\",\"s\":\"quote\\\" back\\\\ slash/ nl\\n "
            "tab\\t cr\\r bs\\b ff\\f\",\"ctl\":\"\\u0001\\u001f\","
            "\"uni\":\"\\u00e9\\u4e2d\\ud83d\\ude00\","
            "\"utf8\":\"caf\xc3\xa9 \xe4\xb8\xad\"}", -1},
    {"'k'", "{\"_id\":\"k\",\"k\\\"ey\":1,\"\":2,\"a.b\":3,\"$d\":4,"
            "\"deep\":[1,[2,[3,{\"x\":[]}]]],\"order\":{\"b\":1,\"a\":2,"
            "\"c\":3}}", -1},
    {"CAST('{\"k\":1}' AS BLOB)", "{\"_id\":{\"k\":1},\"n\":7,"
            "\"arr\":[1,1.5,\"s\",null,true,{\"a\":[{}]}]}", 7},
    {"'nul'", "{\"_id\":\"nul\",\"s\":\"a\\u0000b\",\"t\":[\"\\u0000\"]}", -1},
    {"CAST('null' AS BLOB)", "{\"_id\":null,\"n\":7}", 7},
    {"CAST('true' AS BLOB)", "{\"n\":8,\"_id\":true}", 8},
};

/* A format-3 file, written as that format did, opens as format 4: every
 * body and fence record becomes a BLOB, every document reads back as it
 * was, by _id and through the index, and the fence record is still taken
 * over by the next document of its _id. */
static void test_format3_store_upgrades(void) {
  char file[300], uri[320];
  size_t nrows = sizeof up_rows / sizeof up_rows[0];
  new_file(file, sizeof file, uri, sizeof uri);
  REQUIRE(sql_run(file, FMT3) == SQLITE_OK);
  for (size_t i = 0; i < nrows; i++)
    REQUIRE(fmt3_row(file, (int)i + 1, up_rows[i].id, up_rows[i].body,
                     up_rows[i].n) == SQLITE_OK);
  REQUIRE(sql_run(file, "INSERT INTO _dtx_fence VALUES('c', 'gone',"
                        " '{\"L\":7,\"M\":9}')") == SQLITE_OK);

  for (int round = 0; round < 2; round++) { /* the second open: no change */
    dtx_store_t *st = NULL;
    REQUIRE(dtx_store_open(uri, &st) == 0);
    CHECK(sql_int(file, "SELECT v FROM _dtx_meta WHERE k='format'") == 4);
    CHECK(sql_int(file, "SELECT count(*) FROM \"c:c\" WHERE "
                        "typeof(body)='blob'") == (long long)nrows);
    CHECK(sql_int(file, "SELECT count(*) FROM _dtx_fence WHERE "
                        "typeof(rec)='blob'") == 1);
    for (size_t i = 0; i < nrows; i++) {
      /* JSON_ALLOW_NUL: format 3 held strings with NULs, and so must 4 */
      json_t *want = json_loads(up_rows[i].body, JSON_ALLOW_NUL, NULL);
      json_t *f = json_object(), *out = NULL;
      REQUIRE(want);
      json_object_set(f, "_id", json_object_get(want, "_id"));
      CHECK_RC(dtx_store_find(st, "c", f, NULL, &out), 0);
      char *w = JDUMP(want), *g = JDUMP(json_array_get(out, 0));
      CHECKF(json_array_size(out) == 1 && g && strcmp(w, g) == 0,
             "row %zu: got %s, want %s", i, g ? g : "(none)", w);
      free(w);
      free(g);
      json_decref(out);
      json_decref(f);
      json_decref(want);
    }
    json_t *f = J("{\"n\":7}"), *out = NULL;
    CHECK_RC(dtx_store_find(st, "c", f, NULL, &out), 0);
    CHECKF(json_array_size(out) == 2, "%s", JS(out));
    json_decref(out);
    json_decref(f);
    dtx_store_close(st);
  }

  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  CHECK_RC(insert(st, "c", "{\"_id\":\"gone\"}"), 0);
  json_t *f = J("{\"_id\":\"gone\"}"), *out = NULL;
  CHECK_RC(dtx_store_find(st, "c", f, NULL, &out), 0);
  CHECKF(strcmp(JS(out), "[{\"_id\":\"gone\",\"_fence\":{\"L\":7,\"M\":9}}]") ==
             0,
         "%s", JS(out));
  json_decref(out);
  json_decref(f);
  dtx_store_close(st);
}

/* A format-3 body (or fence record) that does not convert fails the
 * upgrade naming it, and the file stays format 3 with every text body as
 * it was: the upgrade is one transaction. */
static const struct {
  const char *label, *id, *body; /* body NULL: the bad row is the fence's */
  const char *want;               /* in the detail */
} bad3[] = {
    {"corrupt text", "'b'", "{\"_id\":\"b\",", "document of 'c' (_id \"b\")"},
    {"not an object", "7", "[1,2]", "document of 'c' (_id 7)"},
    {"NUL in a key", "'z'", "{\"_id\":\"z\",\"a\\u0000b\":1}",
     "document of 'c' (_id \"z\")"},
    {"fence record", NULL, NULL, "fence record of 'c' (_id \"f\")"},
};

static void test_format3_bad_body_keeps_format3(void) {
  for (size_t i = 0; i < sizeof bad3 / sizeof bad3[0]; i++) {
    char file[300], uri[320];
    new_file(file, sizeof file, uri, sizeof uri);
    REQUIRE(sql_run(file, FMT3) == SQLITE_OK);
    REQUIRE(fmt3_row(file, 1, "'a'", "{\"_id\":\"a\",\"n\":1}", 1) ==
            SQLITE_OK);
    if (bad3[i].body)
      REQUIRE(fmt3_row(file, 2, bad3[i].id, bad3[i].body, -1) == SQLITE_OK);
    else
      REQUIRE(sql_run(file, "INSERT INTO _dtx_fence VALUES('c', 'f', '{')") ==
              SQLITE_OK);
    dtx_store_t *st = NULL;
    int rc = dtx_store_open(uri, &st);
    CHECKF(rc == DTX_EUNAVAILABLE && strstr(dtx_errdetail(), bad3[i].want) &&
               strstr(dtx_errdetail(), "upgrading the store to format 4"),
           "%s: %s (%s)", bad3[i].label, dtx_errname(rc), dtx_errdetail());
    if (rc == 0)
      dtx_store_close(st);
    CHECKF(sql_int(file, "SELECT v FROM _dtx_meta WHERE k='format'") == 3,
           "%s", bad3[i].label);
    CHECKF(sql_int(file, "SELECT count(*) FROM \"c:c\" WHERE typeof(body)"
                         "<>'text'") == 0 &&
               sql_int(file, "SELECT count(*) FROM _dtx_fence WHERE "
                             "typeof(rec)<>'text'") == 0,
           "%s", bad3[i].label);
    CHECKF(sql_int(file, "SELECT body='{\"_id\":\"a\",\"n\":1}' FROM \"c:c\" "
                         "WHERE seq=1") == 1,
           "%s", bad3[i].label);
  }
}

/* A format this build does not know is refused, naming both formats. */
static void test_newer_format_refused(void) {
  char file[300], uri[320];
  new_file(file, sizeof file, uri, sizeof uri);
  REQUIRE(sql_run(file, FMT3) == SQLITE_OK);
  REQUIRE(sql_run(file, "UPDATE _dtx_meta SET v=5 WHERE k='format'") ==
          SQLITE_OK);
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(uri, &st);
  CHECKF(rc == DTX_EUNAVAILABLE &&
             strstr(dtx_errdetail(),
                    "store format 5, this doctx reads format 4"),
         "%s (%s)", dtx_errname(rc), dtx_errdetail());
  if (rc == 0)
    dtx_store_close(st);
  CHECK(sql_int(file, "SELECT v FROM _dtx_meta WHERE k='format'") == 5);
}

/* A bad body in a format-4 store -- bytes that fail the stored-body
 * check, or TEXT (format 3's form, which is not read as JSON here) -- is
 * DTX_ECORRUPT naming the collection, _id and seq, on every path that
 * reads it; the other documents still read.  The audit reads past it
 * (store.h, dtx__corrupt_skip): a corrupt_document finding naming it,
 * and the report of everything else. */
static const struct {
  const char *label, *value; /* an SQL expression for the body */
  const char *why;
} bad4[] = {
    {"short length", "x'0600000000'", "document length out of range"},
    {"bad UTF-8", "x'0e00000002730002000000ff0000'", "invalid UTF-8 in string"},
    {"duplicate name", "x'0b0000000a61000a610000'", "duplicate name"},
    {"TEXT body", "'{\"_id\":\"b\",\"k\":2}'", "TEXT instead of a BSON BLOB"},
};

static void test_format4_bad_body(void) {
  for (size_t i = 0; i < sizeof bad4 / sizeof bad4[0]; i++) {
    char file[300], uri[320], sql[300], want[200];
    new_file(file, sizeof file, uri, sizeof uri);
    dtx_store_t *st = NULL;
    REQUIRE(dtx_store_open(uri, &st) == 0);
    CHECK_RC(create_index(st, "c", "{\"k\":1}", 0, NULL), 0);
    CHECK_RC(insert(st, "c", "{\"_id\":\"a\",\"k\":1}"), 0);
    CHECK_RC(insert(st, "c", "{\"_id\":\"b\",\"k\":2}"), 0);
    snprintf(sql, sizeof sql, "UPDATE \"c:c\" SET body=%s WHERE id='b'",
             bad4[i].value);
    REQUIRE(sql_run(file, sql) == SQLITE_OK);
    snprintf(want, sizeof want,
             "sqlite: stored document of 'c' (_id \"b\", seq 2) is not a "
             "valid document: %s at byte ",
             bad4[i].why);
    static const char *const filters[] = {"{\"_id\":\"b\"}", "{}",
                                          "{\"k\":2}"};
    for (size_t k = 0; k < 3; k++) { /* by _id, a scan, through the index */
      json_t *f = J(filters[k]), *out = NULL;
      int rc = dtx_store_find(st, "c", f, NULL, &out);
      CHECKF(rc == DTX_ECORRUPT && strstr(dtx_errdetail(), want),
             "%s, %s: %s (%s)", bad4[i].label, filters[k], dtx_errname(rc),
             dtx_errdetail());
      json_decref(out);
      json_decref(f);
    }
    int rc = create_index(st, "c", "{\"j\":1}", 0, NULL);
    CHECKF(rc == DTX_ECORRUPT && strstr(dtx_errdetail(), want),
           "%s, create_index: %s (%s)", bad4[i].label, dtx_errname(rc),
           dtx_errdetail());
    json_t *f = J("{\"_id\":\"a\"}"), *out = NULL;
    CHECK_RC(dtx_store_find(st, "c", f, NULL, &out), 0);
    CHECKF(strcmp(JS(out), "[{\"_id\":\"a\",\"k\":1}]") == 0, "%s",
           JS(out));
    json_decref(out);
    json_decref(f);
    dtx_store_close(st);
  }

  /* The audit meets a bad account body. */
  char file[300], uri[320];
  new_file(file, sizeof file, uri, sizeof uri);
  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  dtx_account_opts_t o = {.balance = 100};
  CHECK_RC(dtx_account_create(st, "alice", &o, NULL), 0);
  CHECK_RC(dtx_account_create(st, "bob", &o, NULL), 0);
  REQUIRE(sql_run(file, "UPDATE \"c:accounts\" SET body=x'0600000000' "
                        "WHERE id='bob'") == SQLITE_OK);
  json_t *report = NULL;
  int rc = dtx_audit(st, 0, &report);
  size_t k, ncorrupt = 0;
  json_t *fd;
  json_array_foreach(json_object_get(report, "findings"), k, fd) {
    const char *d = json_string_value(json_object_get(fd, "detail"));
    if (!strcmp(json_string_value(json_object_get(fd, "kind")),
                "corrupt_document") &&
        d && strstr(d, "stored document of 'accounts' (_id \"bob\", seq "))
      ncorrupt++;
  }
  CHECKF(rc == DTX_EAUDIT && ncorrupt == 1 &&
             json_object_get(json_object_get(report, "patterns"), "transfer"),
         "audit: %s (%s) %s", dtx_errname(rc), dtx_errdetail(), JS(report));
  json_decref(report);
  dtx_store_close(st);
}

/* A document whose BSON passes 16 MiB though its JSON would not (an
 * array element carries its index as a name) is refused before anything
 * is stored, never kept unreadable. */
static void test_bson_past_limit_refused(void) {
  dtx_store_t *st;
  REQUIRE(dtx_store_open("sqlite::memory:", &st) == 0);
  json_t *a = json_array(), *d = json_object();
  for (int i = 0; i < 1400000; i++)
    json_array_append_new(a, json_integer(1));
  json_object_set_new(d, "_id", json_string("big"));
  json_object_set_new(d, "a", a);
  CHECK_RC(dtx_store_insert(st, "c", d, NULL), DTX_ELIMIT);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(st, "c", NULL, &n), 0);
  CHECK(n == 0);
  json_decref(d);
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
  TEST_RUN(test_format3_store_upgrades);
  TEST_RUN(test_format3_bad_body_keeps_format3);
  TEST_RUN(test_newer_format_refused);
  TEST_RUN(test_format4_bad_body);
  TEST_RUN(test_bson_past_limit_refused);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return TEST_DONE();
}
