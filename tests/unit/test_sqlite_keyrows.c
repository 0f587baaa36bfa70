/* test_sqlite_keyrows.c -- the SQLite backend's index rows
 * (src/store/sqlite/keyrows.c) are exactly those dtx__index_keys gives,
 * bound as dtx__sq_bind_key binds them.  Seeded random documents of
 * plain scalars (1 beside 1.0, -0.0, 2^53 + 1, "", null, missing),
 * arrays, objects and wrapped values go in through the store by insert,
 * update (one document and many), index build and delete; then each
 * index table is compared row by row, with each value's storage class,
 * against rows rebuilt from every stored body through the json_t path,
 * and an index some document makes multikey must be marked so. */
#include "testlib.h"

#include "doc/bdoc.h"
#include "store/sqlite/sqlite_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned rng = 20261129u;

static unsigned rnd(unsigned n) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 16) % n;
}

static json_t *rval(int depth) {
  switch (rnd(depth > 1 ? 9 : 12)) {
  case 0:
    return json_integer(rnd(4));
  case 1:
    return json_real(rnd(4)); /* 1.0 beside 1 */
  case 2:
    return json_real(rnd(2) ? -0.0 : 0.5 * rnd(5));
  case 3: {
    char s[2] = {(char)('a' + rnd(3)), 0};
    return json_string(rnd(4) ? s : "");
  }
  case 4:
    return json_boolean(rnd(2));
  case 5:
    return json_null();
  case 6:
    return rnd(2) ? json_integer(9007199254740993LL)
                  : json_real(9007199254740992.0);
  case 7:
    return json_pack("{s:i}", "$date", (int)rnd(3)); /* an object */
  case 8:
    return json_pack("{s:s}", "x", "y");
  case 9: {
    json_t *a = json_array();
    for (unsigned i = rnd(4); i > 0; i--)
      json_array_append_new(a, rval(depth + 1));
    return a;
  }
  case 10:
    return rnd(2) ? json_pack("{s:o}", "b", rval(depth + 1))
                  : json_pack("{s:o, s:o}", "c", rval(depth + 1), "b",
                              rval(depth + 1));
  default: {
    json_t *a = json_array();
    for (unsigned i = rnd(5); i > 0; i--)
      json_array_append_new(a, json_pack("{s:o}", "b", rval(depth + 1)));
    return a;
  }
  }
}

static json_t *rdoc(int id) {
  json_t *d = json_pack("{s:i}", "_id", id);
  static const char *const f[] = {"a", "c", "d", "e"};
  for (int i = 0; i < 4; i++)
    if (rnd(5))
      json_object_set_new(d, f[i],
                          i == 3 ? json_pack("{s:o}", "f", rval(1)) : rval(0));
  return d;
}

static const char *const index_keys[] = {
    "{\"a\":1}", "{\"a.b\":1,\"c\":1}", "{\"d\":1}", "{\"e.f\":-1}",
    "{\"c\":1,\"d\":-1}", "{\"a.b\":1}",
};
#define NINDEX (sizeof index_keys / sizeof index_keys[0])

/* Index i of collection c: built over the documents for the last (the
 * index build), created before them for the others; {d: 1} sparse. */
static void make_index(dtx_store_t *st, size_t i) {
  json_t *k = J(index_keys[i]);
  dtx_index_opts_t o = {.sparse = i == 2};
  CHECK_RC(dtx_store_create_index(st, "c", k, &o, NULL), 0);
  json_decref(k);
}

/* Compares one index table with rows rebuilt from every body. */
static void compare_index(sqlite3 *db, int64_t id, const char *spec_text,
                          int multikey) {
  json_t *sj = J(spec_text), *keys = json_object_get(sj, "key");
  dtx_index_opts_t o = {.sparse = json_is_true(json_object_get(sj, "sparse")),
                        .name = json_string_value(json_object_get(sj, "name"))};
  dtx__index_spec_t *spec = NULL;
  CHECK_RC(dtx__index_spec_parse(keys, &o, &spec), 0);
  if (!spec) {
    json_decref(sj);
    return;
  }
  size_t nf = spec->nfields;
  char ddl[1000], ins[600], cols[600];
  size_t n = (size_t)snprintf(ddl, sizeof ddl,
                              "DROP TABLE IF EXISTS temp.e; CREATE TEMP "
                              "TABLE e(");
  size_t a = (size_t)snprintf(ins, sizeof ins, "INSERT OR IGNORE INTO e "
                                               "VALUES(");
  size_t c = 0;
  for (size_t f = 0; f < nf; f++) {
    n += (size_t)snprintf(ddl + n, sizeof ddl - n, "b%zu, v%zu, ", f, f);
    a += (size_t)snprintf(ins + a, sizeof ins - a, "?%zu, ?%zu, ", 2 * f + 1,
                          2 * f + 2);
    c += (size_t)snprintf(cols + c, sizeof cols - c, "b%zu, typeof(v%zu), "
                                                     "v%zu, ", f, f, f);
  }
  n += (size_t)snprintf(ddl + n, sizeof ddl - n, "seq, PRIMARY KEY(");
  for (size_t f = 0; f < nf; f++)
    n += (size_t)snprintf(ddl + n, sizeof ddl - n, "b%zu, v%zu, ", f, f);
  snprintf(ddl + n, sizeof ddl - n, "seq)) WITHOUT ROWID");
  snprintf(ins + a, sizeof ins - a, "?%zu)", 2 * nf + 1);
  snprintf(cols + c, sizeof cols - c, "seq");
  CHECKF(sqlite3_exec(db, ddl, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", ddl,
         sqlite3_errmsg(db));

  sqlite3_stmt *scan = NULL, *put = NULL;
  CHECK(sqlite3_prepare_v2(db, "SELECT seq, body FROM \"c:c\"", -1, &scan,
                           NULL) == SQLITE_OK);
  CHECK(sqlite3_prepare_v2(db, ins, -1, &put, NULL) == SQLITE_OK);
  int want_mk = 0;
  while (scan && put && sqlite3_step(scan) == SQLITE_ROW) {
    json_t *doc = NULL, *tuples = NULL, *t;
    size_t i;
    CHECK_RC(dtx__bson_to_json(sqlite3_column_blob(scan, 1),
                               (uint32_t)sqlite3_column_bytes(scan, 1), 0,
                               &doc),
             0);
    CHECK_RC(dtx__index_keys(spec, doc, &tuples), 0);
    want_mk |= dtx__index_keys_multikey(tuples);
    json_array_foreach(tuples, i, t) {
      sqlite3_reset(put);
      for (size_t f = 0; f < nf; f++)
        CHECK_RC(dtx__sq_bind_key(put, (int)(2 * f + 1),
                                  json_array_get(t, f)),
                 0);
      sqlite3_bind_int64(put, (int)(2 * nf + 1),
                         sqlite3_column_int64(scan, 0));
      CHECK(sqlite3_step(put) == SQLITE_DONE);
    }
    json_decref(tuples);
    json_decref(doc);
  }
  sqlite3_finalize(scan);
  sqlite3_finalize(put);

  char sql[2000];
  const char *const dirs[2][2] = {{"\"i:c:%lld\"", "e"}, {"e", "\"i:c:%lld\""}};
  for (int d = 0; d < 2; d++) {
    char from[2][40];
    for (int k = 0; k < 2; k++)
      snprintf(from[k], sizeof from[k], dirs[d][k], (long long)id);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM (SELECT %s FROM %s EXCEPT SELECT %s FROM "
             "%s)",
             cols, from[0], cols, from[1]);
    sqlite3_stmt *st = NULL;
    CHECK(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK);
    CHECK(st && sqlite3_step(st) == SQLITE_ROW);
    CHECKF(sqlite3_column_int64(st, 0) == 0,
           "index %s: %lld rows %s", spec->name,
           (long long)sqlite3_column_int64(st, 0),
           d ? "missing from the index" : "the index should not hold");
    sqlite3_finalize(st);
  }
  CHECKF(!want_mk || multikey, "index %s is not marked multikey",
         spec->name);
  dtx__index_spec_free(spec);
  json_decref(sj);
}

static void test_rows_match_json_path(void) {
  char dir[] = "/tmp/dtx_test_keyrows.XXXXXX", uri[400], file[300];
  REQUIRE(mkdtemp(dir));
  snprintf(file, sizeof file, "%s/k.db", dir);
  snprintf(uri, sizeof uri, "sqlite:%s?sync=off", file);
  dtx_store_t *st = dtx_t_open(uri);
  for (size_t i = 0; i + 1 < NINDEX; i++)
    make_index(st, i);
  int ok = 0;
  for (int id = 0; id < 300; id++) {
    json_t *d = rdoc(id);
    ok += dtx_store_insert(st, "c", d, NULL) == 0; /* parallel arrays fail */
    json_decref(d);
  }
  CHECK(ok > 100);
  make_index(st, NINDEX - 1); /* the index build */
  static const char *const f[] = {"a", "c", "d", "e.f", "a.b"};
  for (int k = 0; k < 400; k++) {
    json_t *filter = json_pack("{s:i}", "_id", (int)rnd(300));
    json_t *u = rnd(6) ? json_pack("{s:{s:o}}", "$set", f[rnd(5)], rval(0))
                       : json_pack("{s:{s:s}}", "$unset", f[rnd(5)], "");
    dtx_update_opts_t o = {.many = k % 50 == 0};
    dtx_update_result_t res;
    if (o.many) {
      json_decref(filter);
      filter = json_pack("{s:{s:i}}", "_id", "$lt", (int)rnd(300));
    }
    (void)dtx_store_update(st, "c", filter, u, &o, &res);
    json_decref(filter);
    json_decref(u);
  }
  for (int k = 0; k < 40; k++) {
    json_t *filter = json_pack("{s:i}", "_id", (int)rnd(300));
    (void)dtx_store_delete(st, "c", filter, 0, NULL);
    json_decref(filter);
  }
  dtx_store_close(st);

  sqlite3 *db = NULL;
  REQUIRE(sqlite3_open(file, &db) == SQLITE_OK);
  sqlite3_stmt *ix = NULL;
  CHECK(sqlite3_prepare_v2(db,
                           "SELECT id, spec, multikey FROM _dtx_index WHERE "
                           "coll='c'",
                           -1, &ix, NULL) == SQLITE_OK);
  /* Read first: a table cannot be dropped under a running statement. */
  size_t seen = 0;
  int64_t ids[NINDEX];
  char *specs[NINDEX];
  int mk[NINDEX];
  while (ix && seen < NINDEX && sqlite3_step(ix) == SQLITE_ROW) {
    ids[seen] = sqlite3_column_int64(ix, 0);
    specs[seen] = strdup((const char *)sqlite3_column_text(ix, 1));
    mk[seen++] = sqlite3_column_int(ix, 2);
  }
  sqlite3_finalize(ix);
  CHECK(seen == NINDEX);
  for (size_t i = 0; i < seen; i++) {
    compare_index(db, ids[i], specs[i], mk[i]);
    free(specs[i]);
  }
  sqlite3_close(db);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

int main(void) {
  TEST_RUN(test_rows_match_json_path);
  return TEST_DONE();
}
