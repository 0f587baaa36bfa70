/* test_bkeyvals.c -- dtx__bindex_key_tuples (bkeyvals.c) against
 * dtx__index_keys on the bridged document: the same answer, exactly.
 *
 * The backends keep keys.c's json_t tuples until store format 5, and the
 * write path on bytes computes them with dtx__bindex_key_tuples instead
 * of bridging the whole document (docs/engine.md, "Stages", 2b step 1),
 * so every difference would be a wrong index entry.  "The same" here is
 * strict: json_equal, and the same key order in every object, and the
 * same JSON kind for every number (an integer stays an integer, a real a
 * real, bit for bit), and the same multikey flag; an error must be the
 * same code with the same detail, and leave *out NULL.
 *
 * The documents: every row of test_keys.c (keys_rows.h), each written as
 * the bridge writes it and with every integer int64 (a stored
 * NumberLong); the committed JSON-text store (tests/fixtures/json-text,
 * as test_rules_corpus.c loads it): its collections' own indexes and,
 * for every path its documents hold, an index on that path and on pairs
 * of them, plain and sparse; then random BSON documents with every type
 * the bridge makes, nested arrays, arrays of subdocuments, missing
 * paths, null, and int32 / int64 / double of one value side by side.
 *
 * Run with "callgrind-json N" or "callgrind-bytes N" it only computes
 * the transfer pattern's account keys N times, one way, for
 * valgrind --tool=callgrind --toggle-collect='keys_by_*'. */
#include "bschemadiff.h"
#include "keys_rows.h"
#include "testlib.h"

#include "doc/bdoc.h"
#include "doc/doc.h"
#include "util/err.h"

#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef DTX_FIXTURE_DIR
#error "DTX_FIXTURE_DIR names tests/fixtures (CMakeLists.txt)"
#endif

static struct {
  size_t runs, ok, refused, tuples, multikey, differ;
} n;

/* ---- strict equality ---------------------------------------------------- */

/* a and b the same JSON: kinds, key order, bytes, numbers bit for bit. */
static int same_json(const json_t *a, const json_t *b) {
  if (json_typeof(a) != json_typeof(b))
    return 0;
  switch (json_typeof(a)) {
  case JSON_OBJECT: {
    void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);
    for (; ia && ib; ia = json_object_iter_next((json_t *)a, ia),
                     ib = json_object_iter_next((json_t *)b, ib)) {
      size_t la = json_object_iter_key_len(ia);
      if (la != json_object_iter_key_len(ib) ||
          memcmp(json_object_iter_key(ia), json_object_iter_key(ib), la) ||
          !same_json(json_object_iter_value(ia), json_object_iter_value(ib)))
        return 0;
    }
    return !ia && !ib;
  }
  case JSON_ARRAY:
    if (json_array_size(a) != json_array_size(b))
      return 0;
    for (size_t i = 0; i < json_array_size(a); i++)
      if (!same_json(json_array_get(a, i), json_array_get(b, i)))
        return 0;
    return 1;
  case JSON_STRING:
    return json_string_length(a) == json_string_length(b) &&
           !memcmp(json_string_value(a), json_string_value(b),
                   json_string_length(a));
  case JSON_INTEGER:
    return json_integer_value(a) == json_integer_value(b);
  case JSON_REAL: {
    double x = json_real_value(a), y = json_real_value(b);
    return !memcmp(&x, &y, sizeof x);
  }
  default:
    return 1;
  }
}

/* ---- the differential ----------------------------------------------------- */

/* Both ways on doc's bytes (checked); a difference is reported, the
 * first few in full. */
static void both(const dtx__index_spec_t *s, const uint8_t *doc, uint32_t len,
                 const char *what) {
  json_t *j = NULL, *want = NULL, *got = (json_t *)1;
  int mk = -1;
  n.runs++;
  if (dtx__bson_to_json(doc, len, 0, &j)) {
    CHECKF(0, "%s: the bridge refused the document: %s", what,
           dtx_errdetail());
    return;
  }
  int rc = dtx__index_keys(s, j, &want);
  char *det = strdup(rc ? dtx_errdetail() : "");
  dtx__err(DTX_EFAULT, "stale detail"); /* the new call must set its own */
  int brc = dtx__bindex_key_tuples(s, doc, len, &got, &mk);
  int same;
  if (rc || brc) {
    same = rc == brc && det && !strcmp(det, dtx_errdetail()) && !got &&
           mk == 0;
    n.refused += same;
  } else {
    same = json_equal(want, got) && same_json(want, got) &&
           mk == dtx__index_keys_multikey(want);
    n.ok += same;
    n.tuples += json_array_size(got);
    n.multikey += mk == 1;
  }
  if (!same) {
    char *dj = dtx__json_dump(j);
    char *dw = want ? dtx__json_dump(want) : NULL;
    char *dg = got && brc == 0 ? dtx__json_dump(got) : NULL;
    if (n.differ++ < 10)
      CHECKF(0,
             "%s: index %s on %s:\n  json  %s %s (%s)\n  bytes %s %s (%s) "
             "multikey %d",
             what, s->name, dj ? dj : "?", dtx_errname(rc), dw ? dw : "-",
             det ? det : "", dtx_errname(brc), dg ? dg : "-",
             brc ? dtx_errdetail() : "", mk);
    free(dj);
    free(dw);
    free(dg);
  }
  free(det);
  if (brc == 0)
    json_decref(got);
  json_decref(want);
  json_decref(j);
}

/* Both ways on the object d written as the bridge writes it and with
 * every integer int64. */
static void both_json(const dtx__index_spec_t *s, const json_t *d,
                      const char *what) {
  bson_t b = BSON_INITIALIZER, b64;
  if (dtx__bson_from_json(d, &b) == 0)
    both(s, bson_get_data(&b), b.len, what);
  else
    CHECKF(0, "%s: bridge refused %s", what, JS(d));
  if (bsd_doc_i64(d, &b64) == 0) {
    char w[200];
    snprintf(w, sizeof w, "%s (int64)", what);
    both(s, bson_get_data(&b64), b64.len, w);
  }
  bson_destroy(&b);
  bson_destroy(&b64);
}

static dtx__index_spec_t *spec_of(const char *keys, int sparse) {
  json_t *k = JQNEW(keys);
  dtx_index_opts_t o = {.sparse = sparse};
  dtx__index_spec_t *s = NULL;
  if (!k || dtx__index_spec_parse(k, &o, &s))
    s = NULL;
  json_decref(k);
  return s;
}

static void report(const char *label) {
  printf("%s: %zu runs, %zu same answers (%zu tuples, %zu multikey), %zu "
         "same refusals, %zu different\n",
         label, n.runs, n.ok, n.tuples, n.multikey, n.refused, n.differ);
}

/* ---- test_keys.c's rows ------------------------------------------------------ */

static void test_rows(void) {
  memset(&n, 0, sizeof n);
  for (size_t i = 0; i < KEY_CASES_N; i++) {
    const kcase_t *c = &key_cases[i];
    dtx__index_spec_t *s = spec_of(c->keys, c->sparse);
    json_t *d = JQNEW(c->doc);
    char what[40];
    snprintf(what, sizeof what, "row %zu", i);
    REQUIRE(s && d);
    both_json(s, d, what);
    /* the other sparseness too */
    dtx__index_spec_t *o = spec_of(c->keys, !c->sparse);
    REQUIRE(o);
    both_json(o, d, what);
    dtx__index_spec_free(o);
    dtx__index_spec_free(s);
    json_decref(d);
  }
  report("key rows");
  CHECK(n.runs == 4 * KEY_CASES_N && n.refused > 0 && n.ok > 0);
  CHECKF(n.differ == 0, "%zu differ", n.differ);
}

/* Arguments: the same refusals as dtx__index_keys. */
static void test_bad_args(void) {
  dtx__index_spec_t *s = spec_of("{'a':1}", 0);
  bson_t b = BSON_INITIALIZER;
  json_t *out = (json_t *)1;
  int mk = -1;
  REQUIRE(s);
  CHECK_RC(dtx__bindex_key_tuples(s, bson_get_data(&b), b.len, NULL, &mk),
           DTX_EINVAL);
  CHECK(strcmp(dtx_errdetail(), "index keys: NULL out-parameter") == 0);
  CHECK(mk == 0);
  CHECK_RC(dtx__bindex_key_tuples(s, NULL, 0, &out, &mk), DTX_EINVAL);
  CHECK(out == NULL && mk == 0);
  CHECK(strcmp(dtx_errdetail(), "index keys: document must be an object") ==
        0);
  out = (json_t *)1;
  CHECK_RC(dtx__bindex_key_tuples(NULL, bson_get_data(&b), b.len, &out, NULL),
           DTX_EINVAL);
  CHECK(out == NULL);
  CHECK(strcmp(dtx_errdetail(), "index keys: bad index spec") == 0);
  /* multikey may be NULL */
  CHECK_RC(dtx__bindex_key_tuples(s, bson_get_data(&b), b.len, &out, NULL), 0);
  CHECK(out && !strcmp(JS(out), "[[null]]"));
  json_decref(out);
  dtx__index_spec_free(s);
}

/* One value in four widths: int32, int64 and double 1 are one key (the
 * first kept, an integer), NumberDecimal("1") another, as keys.c sees
 * the bridged {"$numberDecimal": "1"} (an object), though dtx__bval_cmp
 * calls it equal to 1: deduplication must not use the bytes' order. */
static void test_widths(void) {
  bson_t b = BSON_INITIALIZER, arr;
  bson_decimal128_t d;
  bson_decimal128_from_string("1", &d);
  bson_append_array_begin(&b, "a", -1, &arr);
  bson_append_int64(&arr, "0", -1, 1);
  bson_append_decimal128(&arr, "1", -1, &d);
  bson_append_int32(&arr, "2", -1, 1);
  bson_append_double(&arr, "3", -1, 1.0);
  bson_append_array_end(&b, &arr);
  dtx__index_spec_t *s = spec_of("{'a':1}", 0);
  json_t *out = NULL;
  int mk = 0;
  REQUIRE(s);
  CHECK_RC(dtx__bindex_key_tuples(s, bson_get_data(&b), b.len, &out, &mk), 0);
  CHECKF(out && !strcmp(JS(out), "[[1],[{\"$numberDecimal\":\"1\"}]]") &&
             json_is_integer(json_array_get(json_array_get(out, 0), 0)) &&
             mk == 1,
         "%s multikey %d", JS(out), mk);
  memset(&n, 0, sizeof n);
  both(s, bson_get_data(&b), b.len, "widths");
  CHECK(n.ok == 1);
  json_decref(out);
  dtx__index_spec_free(s);
  bson_destroy(&b);
}

/* ---- the fixture corpus -------------------------------------------------------- */


/* Dotted paths of v under prefix (through objects, and through arrays of
 * objects, as index paths go), into paths (a JSON array of strings, no
 * duplicates, at most 40). */
static void collect_paths(const json_t *v, const char *prefix, int depth,
                          json_t *paths) {
  if (depth > 3)
    return;
  if (json_is_array(v)) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) collect_paths(e, prefix, depth, paths);
    return;
  }
  if (!json_is_object(v))
    return;
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    char p[200];
    snprintf(p, sizeof p, "%s%s%s", prefix, *prefix ? "." : "", k);
    int have = 0;
    size_t i;
    json_t *e;
    json_array_foreach(paths, i, e) have |= !strcmp(json_string_value(e), p);
    if (!have && json_array_size(paths) < 40)
      json_array_append_new(paths, json_string(p));
    collect_paths(x, p, depth + 1, paths);
  }
}

static void one_collection(sqlite3 *db, const char *coll) {
  sqlite3_stmt *q = NULL;
  char sql[300];
  json_t *docs = json_array(), *paths = json_array();
  dtx__index_spec_t *specs[400];
  size_t ns = 0;

  snprintf(sql, sizeof sql, "SELECT body FROM \"c:%s\" ORDER BY seq", coll);
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &q, NULL) == SQLITE_OK);
  while (sqlite3_step(q) == SQLITE_ROW) {
    json_error_t e;
    json_t *d = json_loads((const char *)sqlite3_column_text(q, 0), 0, &e);
    CHECKF(d != NULL, "%s: %s", coll, e.text);
    if (d)
      json_array_append_new(docs, d);
  }
  sqlite3_finalize(q);
  /* the collection's own indexes */
  REQUIRE(sqlite3_prepare_v2(db, "SELECT spec FROM _dtx_index WHERE coll = ?",
                             -1, &q, NULL) == SQLITE_OK);
  sqlite3_bind_text(q, 1, coll, -1, SQLITE_STATIC);
  while (ns < 200 && sqlite3_step(q) == SQLITE_ROW) {
    specs[ns] = NULL;
    json_t *sp = json_loads((const char *)sqlite3_column_text(q, 0), 0, NULL);
    dtx_index_opts_t o = {
        .name = json_string_value(json_object_get(sp, "name")),
        .unique = json_is_true(json_object_get(sp, "unique")),
        .sparse = json_is_true(json_object_get(sp, "sparse"))};
    CHECKF(sp && dtx__index_spec_parse(json_object_get(sp, "key"), &o,
                                       &specs[ns]) == 0,
           "%s: index %s", coll, sqlite3_column_text(q, 0));
    ns += sp && specs[ns];
    json_decref(sp);
  }
  sqlite3_finalize(q);
  /* every path the documents hold, alone and in pairs */
  size_t i, j;
  json_t *d;
  json_array_foreach(docs, i, d) collect_paths(d, "", 0, paths);
  for (i = 0; i < json_array_size(paths); i++)
    for (j = i; j < json_array_size(paths) && ns + 2 <= 400; j++) {
      json_t *k = json_object();
      json_object_set_new(k, json_string_value(json_array_get(paths, i)),
                          json_integer(1));
      if (j != i)
        json_object_set_new(k, json_string_value(json_array_get(paths, j)),
                            json_integer(-1));
      for (int sparse = 0; sparse < 2; sparse++) {
        dtx_index_opts_t o = {.sparse = sparse};
        if (dtx__index_spec_parse(k, &o, &specs[ns]) == 0)
          ns++;
      }
      json_decref(k);
    }
  json_array_foreach(docs, i, d) {
    char what[200];
    snprintf(what, sizeof what, "%s %s", coll,
             JS(json_object_get(d, "_id")));
    for (j = 0; j < ns; j++)
      both_json(specs[j], d, what);
  }
  for (j = 0; j < ns; j++)
    dtx__index_spec_free(specs[j]);
  json_decref(docs);
  json_decref(paths);
}

static void test_corpus(void) {
  memset(&n, 0, sizeof n);
  char *sql = dtx_t_slurp(DTX_FIXTURE_DIR "/json-text/sqlite.sql");
  REQUIRE(sql);
  sqlite3 *db = NULL;
  char *err = NULL;
  int rc = sqlite3_open(":memory:", &db);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  CHECKF(rc == SQLITE_OK, "loading the fixture: %s",
         err ? err : sqlite3_errmsg(db));
  sqlite3_free(err);
  free(sql);
  sqlite3_stmt *q = NULL;
  size_t colls = 0;
  if (rc == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT name FROM _dtx_coll ORDER BY name", -1,
                         &q, NULL) == SQLITE_OK)
    while (sqlite3_step(q) == SQLITE_ROW) {
      char coll[200];
      snprintf(coll, sizeof coll, "%s", sqlite3_column_text(q, 0));
      one_collection(db, coll);
      colls++;
    }
  sqlite3_finalize(q);
  sqlite3_close(db);
  printf("corpus: %zu collections\n", colls);
  report("corpus");
  /* A corpus that shrank to nothing would pass vacuously. */
  CHECK(colls >= 10 && n.ok > 5000 && n.refused > 0 && n.multikey > 0);
  CHECKF(n.differ == 0, "%zu differ", n.differ);
}

/* ---- random BSON documents ------------------------------------------------------ */

static uint64_t rs = 0x2545f4914f6cdd1dull;
static unsigned rnd(unsigned k) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (unsigned)(rs % k);
}

static void rnd_doc(bson_t *b, int depth);

/* One value of any type under key.  Numbers are drawn from a few values
 * so that int32, int64, double and decimal of one value meet in one
 * document (and dedupe, or not, as keys.c says). */
static void rnd_value(bson_t *b, const char *key, int depth) {
  static const int64_t ints[] = {0, 1, 2, -1, 2147483648ll};
  static const double dbls[] = {1.0, 2.0, 0.5, -0.0, 1e300, NAN, INFINITY};
  static const char *decs[] = {"1", "1.0", "2", "NaN", "-0"};
  static const char *strs[] = {"A", "B", "", "a\xc3\xa9"};
  static const uint8_t oid[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  unsigned k = rnd(depth > 0 ? 26 : 20);
  int64_t i = ints[rnd(5)];
  bson_t child;
  switch (k) {
  case 0:
  case 1: /* int32 when the value fits */
  case 2:
    if (k < 2 && i == (int32_t)i)
      bson_append_int32(b, key, -1, (int32_t)i);
    else
      bson_append_int64(b, key, -1, i);
    break;
  case 3:
    bson_append_double(b, key, -1, dbls[rnd(7)]);
    break;
  case 4: {
    bson_decimal128_t d;
    bson_decimal128_from_string(decs[rnd(5)], &d);
    bson_append_decimal128(b, key, -1, &d);
    break;
  }
  case 5:
  case 6:
    bson_append_utf8(b, key, -1, strs[rnd(4)], -1);
    break;
  case 7:
    bson_append_null(b, key, -1);
    break;
  case 8:
    bson_append_bool(b, key, -1, rnd(2));
    break;
  case 9:
    bson_append_undefined(b, key, -1);
    break;
  case 10: {
    bson_oid_t o;
    bson_oid_init_from_data(&o, oid);
    bson_append_oid(b, key, -1, &o);
    break;
  }
  case 11:
    bson_append_date_time(b, key, -1, rnd(2) ? 1500 : -5);
    break;
  case 12:
    bson_append_timestamp(b, key, -1, 7, rnd(2));
    break;
  case 13:
    bson_append_regex(b, key, -1, "^a", rnd(2) ? "i" : "");
    break;
  case 14:
    bson_append_binary(b, key, -1, BSON_SUBTYPE_BINARY, oid, rnd(5));
    break;
  case 15:
    bson_append_code(b, key, -1, "f()");
    break;
  case 16:
    bson_append_symbol(b, key, -1, "sym", -1);
    break;
  case 17: {
    bson_t scope = BSON_INITIALIZER;
    BSON_APPEND_INT32(&scope, "x", 1);
    bson_append_code_with_scope(b, key, -1, "g()", &scope);
    bson_destroy(&scope);
    break;
  }
  case 18: {
    bson_oid_t o;
    bson_oid_init_from_data(&o, oid);
    bson_append_dbpointer(b, key, -1, "db.c", &o);
    break;
  }
  case 19:
    if (rnd(2))
      bson_append_minkey(b, key, -1);
    else
      bson_append_maxkey(b, key, -1);
    break;
  case 20:
  case 21:
  case 22:
    bson_append_document_begin(b, key, -1, &child);
    rnd_doc(&child, depth - 1);
    bson_append_document_end(b, &child);
    break;
  default: {
    unsigned m = rnd(4);
    bson_append_array_begin(b, key, -1, &child);
    for (unsigned e = 0; e < m; e++) {
      char ek[12]; /* an index as text: any unsigned fits */
      snprintf(ek, sizeof ek, "%u", e);
      rnd_value(&child, ek, depth - 1);
    }
    bson_append_array_end(b, &child);
  }
  }
}

/* Up to three of the names a, b, c, each at most once. */
static void rnd_doc(bson_t *b, int depth) {
  static const char *names[] = {"a", "b", "c"};
  unsigned used = 0, m = rnd(4);
  for (unsigned f = 0; f < m; f++) {
    unsigned x = rnd(3);
    if (used & (1u << x))
      continue;
    used |= 1u << x;
    rnd_value(b, names[x], depth);
  }
}

static void test_random(void) {
  static const char *indexes[] = {
      "{'a':1}",        "{'a.b':1}",          "{'a.b.c':1}",
      "{'a':1,'b':-1}", "{'a.b':1,'a.c':1}",  "{'a.b':1,'c':1}",
      "{'b.c':1,'b.a':1}", "{'a.a.a':1}",     "{'c':1,'a.b':1,'a.c.a':1}",
      "{'a':1,'a.b':1}",
  };
  dtx__index_spec_t *specs[2 * (sizeof indexes / sizeof indexes[0])];
  size_t ns = 0;
  for (size_t x = 0; x < sizeof indexes / sizeof indexes[0]; x++)
    for (int sparse = 0; sparse < 2; sparse++) {
      specs[ns] = spec_of(indexes[x], sparse);
      REQUIRE(specs[ns]);
      ns++;
    }
  memset(&n, 0, sizeof n);
  for (int iter = 0; iter < 20000; iter++) {
    bson_t b = BSON_INITIALIZER;
    rnd_doc(&b, 3);
    if (dtx__bson_check(bson_get_data(&b), b.len, DTX_EINVAL, "random")) {
      CHECKF(0, "random document refused: %s", dtx_errdetail());
      bson_destroy(&b);
      break;
    }
    for (size_t x = 0; x < ns; x++)
      both(specs[x], bson_get_data(&b), b.len, "random");
    bson_destroy(&b);
  }
  for (size_t x = 0; x < ns; x++)
    dtx__index_spec_free(specs[x]);
  report("random");
  CHECK(n.ok > 300000 && n.refused > 200 && n.multikey > 50000);
  CHECKF(n.differ == 0, "%zu differ", n.differ);
}

/* ---- the transfer pattern's account, for callgrind ------------------------------ */

/* An account as transfer.c keeps it, with 5 pending and 3 void markers,
 * and the pattern's indexes on accounts (transfer.c, kit.c's table). */
static const char account[] =
    "{'_id':'acct-000042','balance':760,'min_balance':0,"
    "'opening_balance':1000,'ceiling':770,'pending':["
    "{'tx':'tx-1001','op':'debit','amount':10,'at':1795910922983},"
    "{'tx':'tx-1002','op':'credit','amount':25,'at':1795910922990},"
    "{'tx':'tx-1003','op':'debit','amount':5,'at':1795910923001},"
    "{'tx':'tx-1004','op':'debit','amount':7,'at':1795910923010},"
    "{'tx':'tx-1005','op':'credit','amount':12,'at':1795910923020}],"
    "'voids':[{'tx':'tx-0990','at':1795910920000},"
    "{'tx':'tx-0991','at':1795910920100},"
    "{'tx':'tx-0992','at':1795910920200}]}";
static const char *account_ix[] = {"{'pending.tx':1}", "{'voids.tx':1}",
                                   "{'unregistered':1}"};

/* What a write on bytes paid before: the whole document bridged, then
 * keys.c per index. */
__attribute__((noinline)) static size_t keys_by_bridge(
    dtx__index_spec_t *const *s, const uint8_t *doc, uint32_t len) {
  size_t t = 0;
  json_t *j = NULL;
  if (dtx__bson_to_json(doc, len, 0, &j))
    abort();
  for (int i = 0; i < 3; i++) {
    json_t *k = NULL;
    if (dtx__index_keys(s[i], j, &k))
      abort();
    t += json_array_size(k) + (size_t)dtx__index_keys_multikey(k);
    json_decref(k);
  }
  json_decref(j);
  return t;
}

__attribute__((noinline)) static size_t keys_by_bytes(
    dtx__index_spec_t *const *s, const uint8_t *doc, uint32_t len) {
  size_t t = 0;
  for (int i = 0; i < 3; i++) {
    json_t *k = NULL;
    int mk = 0;
    if (dtx__bindex_key_tuples(s[i], doc, len, &k, &mk))
      abort();
    t += json_array_size(k) + (size_t)mk;
    json_decref(k);
  }
  return t;
}

static int measure(const char *how, long reps) {
  dtx__index_spec_t *s[3] = {spec_of(account_ix[0], 0),
                             spec_of(account_ix[1], 0),
                             spec_of(account_ix[2], 1)};
  json_t *a = JQNEW(account);
  bson_t b = BSON_INITIALIZER;
  if (!s[0] || !s[1] || !s[2] || dtx__bson_from_json(a, &b))
    return 1;
  int bytes = !strcmp(how, "callgrind-bytes");
  size_t t = 0;
  for (long r = 0; r < reps; r++)
    t += bytes ? keys_by_bytes(s, bson_get_data(&b), b.len)
               : keys_by_bridge(s, bson_get_data(&b), b.len);
  printf("%s: %ld reps, %zu tuples+flags\n", how, reps, t);
  bson_destroy(&b);
  json_decref(a);
  for (int i = 0; i < 3; i++)
    dtx__index_spec_free(s[i]);
  return 0;
}

/* The account's keys both ways agree too (the measured pair). */
static void test_account(void) {
  memset(&n, 0, sizeof n);
  json_t *a = JQNEW(account);
  for (int i = 0; i < 3; i++) {
    dtx__index_spec_t *s = spec_of(account_ix[i], i == 2);
    REQUIRE(s);
    both_json(s, a, "account");
    dtx__index_spec_free(s);
  }
  json_decref(a);
  CHECK(n.ok == 6 && n.differ == 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strncmp(argv[1], "callgrind-", 10))
    return measure(argv[1], atol(argv[2]));
  TEST_RUN(test_bad_args);
  TEST_RUN(test_widths);
  TEST_RUN(test_rows);
  TEST_RUN(test_corpus);
  TEST_RUN(test_random);
  TEST_RUN(test_account);
  return TEST_DONE();
}
