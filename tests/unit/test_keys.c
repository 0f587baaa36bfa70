/* test_keys.c -- tables for index specs and key extraction (keys.c) and for
 * upsert seeds (upsert.c).
 *
 * Key cases give the index keys, a document and the exact expected array of
 * tuples (in first-occurrence order) or an error.  A property test then
 * checks the promise the query planner relies on: when the filter
 * {path: v} matches a document, some key of that document has v for path.
 * JSON in the tables uses ' for "; JQNEW() converts it. */
#include "doc/bproj.h"
#include "doc/doc.h"
#include "keys_rows.h"
#include "testlib.h"
#include "util/err.h"

#include <string.h>

/* ---- the BSON leg ---------------------------------------------------------
 * Every key row (and every random document of the promise test) also runs
 * through dtx__bindex_keys on the document converted by the bridge: the
 * json_t keys, each tuple encoded with dtx__bkey_encode (the field's
 * direction), must be the BSON keys byte for byte and in the same order;
 * the multikey flag must agree, and an error must be the same code with
 * the same detail. */
static int bleg_rows, bleg_tuples;

static void bson_leg(const dtx__index_spec_t *s, const json_t *doc, int rc,
                     const json_t *keys, const char *detail,
                     const char *row) {
  bson_t b = BSON_INITIALIZER, holder = BSON_INITIALIZER;
  dtx__bkeys_t k = {0};
  dtx__buf_t want = {0};
  bleg_rows++;
  REQUIRE(dtx__bson_from_json(doc, &b) == 0);
  int brc = dtx__bindex_keys(s, bson_get_data(&b), b.len, &k);
  CHECKF(brc == rc, "bson leg %s: %s want %s (%s)", row, dtx_errname(brc),
         dtx_errname(rc), dtx_errdetail());
  if (rc || brc) {
    CHECKF(!detail || !strcmp(detail, dtx_errdetail()),
           "bson leg %s: detail '%s' want '%s'", row, dtx_errdetail(),
           detail ? detail : "");
    CHECK(k.n == 0);
    goto out;
  }
  CHECKF(k.n == json_array_size(keys), "bson leg %s: %zu keys want %zu", row,
         k.n, json_array_size(keys));
  CHECKF(k.multikey == dtx__index_keys_multikey(keys),
         "bson leg %s: multikey %d", row, k.multikey);
  for (size_t t = 0; t < k.n && t < json_array_size(keys); t++) {
    json_t *tuple = json_array_get(keys, t);
    want.n = 0;
    for (size_t f = 0; f < s->nfields; f++) {
      dtx__bval_t v;
      bson_reinit(&holder);
      REQUIRE(dtx__bval_from_json(json_array_get(tuple, f), &holder, &v) ==
              0);
      REQUIRE(dtx__bkey_encode(&v, s->dirs[f] < 0, &want) == 0);
    }
    size_t len;
    const uint8_t *got = dtx__bkeys_at(&k, t, &len);
    CHECKF(len == want.n && !memcmp(got, want.p, len),
           "bson leg %s: key %zu (%s) differs", row, t, JS(tuple));
    bleg_tuples++;
  }
out:
  dtx__bkeys_free(&k);
  free(want.p);
  bson_destroy(&b);
  bson_destroy(&holder);
}

/* ---- key extraction ------------------------------------------------------ */

static void test_key_table(void) {
  size_t i;
  for (i = 0; i < sizeof key_cases / sizeof key_cases[0]; i++) {
    const kcase_t *c = &key_cases[i];
    dtx_index_opts_t opts = {.sparse = c->sparse};
    json_t *keys = JQNEW(c->keys), *doc = JQNEW(c->doc), *out = (json_t *)1;
    dtx__index_spec_t *s = NULL;
    char *before = JDUMP(doc), *after;
    int rc;
    REQUIRE(dtx__index_spec_parse(keys, &opts, &s) == 0);
    rc = dtx__index_keys(s, doc, &out);
    {
      char row[32];
      snprintf(row, sizeof row, "case %zu", i);
      char *det = rc ? strdup(dtx_errdetail()) : NULL;
      bson_leg(s, doc, rc, out, det, row);
      if (det)
        dtx__err(rc, "%s", det); /* the json_t leg reads it below */
      free(det);
    }
    if (c->want) {
      json_t *want = JQNEW(c->want);
      char *w = JDUMP(want), *got = out ? JDUMP(out) : NULL;
      CHECKF(rc == 0, "case %zu %s on %s: %s (%s)", i, c->keys, c->doc,
             dtx_errname(rc), dtx_errdetail());
      CHECKF(got && !strcmp(got, w), "case %zu %s on %s: got %s want %s", i,
             c->keys, c->doc, got ? got : "NULL", w);
      free(w);
      free(got);
      json_decref(want);
    } else {
      CHECKF(rc == c->rc, "case %zu %s on %s: %s want %s", i, c->keys,
             c->doc, dtx_errname(rc), dtx_errname(c->rc));
      CHECKF(out == NULL, "case %zu: out not NULL on error", i);
      CHECKF(strstr(dtx_errdetail(), c->detail) != NULL,
             "case %zu: detail '%s' lacks '%s'", i, dtx_errdetail(),
             c->detail);
    }
    json_decref(out);
    dtx__index_spec_free(s);
    after = JDUMP(doc);
    CHECKF(!strcmp(before, after), "case %zu: doc changed", i);
    free(before);
    free(after);
    json_decref(keys);
    json_decref(doc);
  }
}

/* Keys are copies: changing one must not change the document. */
static void test_keys_are_copies(void) {
  json_t *keys = JQNEW("{'a':1}"), *doc = JQNEW("{'a':{'x':[1]}}"), *out = NULL;
  dtx__index_spec_t *s = NULL;
  REQUIRE(dtx__index_spec_parse(keys, NULL, &s) == 0);
  REQUIRE(dtx__index_keys(s, doc, &out) == 0);
  json_object_set_new(json_array_get(json_array_get(out, 0), 0), "y",
                      json_integer(1));
  CHECKF(!strcmp(JS(doc), "{\"a\":{\"x\":[1]}}"), "%s", JS(doc));
  json_decref(out);
  json_decref(keys);
  json_decref(doc);
  dtx__index_spec_free(s);
}

static void test_keys_bad_args(void) {
  json_t *keys = JQNEW("{'a':1}"), *arr = JQNEW("[1]"), *out = (json_t *)1;
  dtx__index_spec_t *s = NULL;
  REQUIRE(dtx__index_spec_parse(keys, NULL, &s) == 0);
  CHECK_RC(dtx__index_keys(s, arr, &out), DTX_EINVAL);
  CHECK(out == NULL);
  CHECK_RC(dtx__index_keys(NULL, keys, &out), DTX_EINVAL);
  json_decref(keys);
  json_decref(arr);
  dtx__index_spec_free(s);
  dtx__index_spec_free(NULL);
}

/* The planner's promise, checked over documents x paths x values: a filter
 * {path: v} that matches implies a key with v at path's position. */
static void test_matcher_promise(void) {
  static const char *docs[] = {
      "{'a':1}",
      "{'a':[1,2,[3]]}",
      "{'a':{'b':1}}",
      "{'a':[{'b':1},{'b':[2,3]},{'c':7}]}",
      "{'a':[]}",
      "{'a':[{'b':[]}]}",
      "{'a':null,'b':'A'}",
      "{'changes':[{'account':'A','seqId':1},{'account':'B','seqId':7}]}",
      "{'changes':[{'account':'A'},{'seqId':7}]}",
      "{'a':[[{'b':1}]]}",
      "{'a':{'b':{'c':[true,'A']}}}",
      "{'a':[{'b':{'c':2}},{'b':[{'c':3}]}]}",
      "{}",
  };
  static const char *indexes[] = {
      "{'a':1}",          "{'a.b':1}",
      "{'a.b.c':1}",      "{'b':1,'a':1}",
      "{'changes.account':1,'changes.seqId':1}",
      "{'a.b':1,'a.c':1}", "{'changes.seqId':-1}",
  };
  static const char *values[] = {"1",    "2",   "3",   "7",    "'A'",
                                 "'B'",  "null", "true", "[3]", "[]",
                                 "{'b':1}"};
  size_t d, x, v, f, t;
  int tested = 0;
  for (d = 0; d < sizeof docs / sizeof docs[0]; d++) {
    json_t *doc = JQNEW(docs[d]);
    for (x = 0; x < sizeof indexes / sizeof indexes[0]; x++) {
      json_t *ks = JQNEW(indexes[x]), *keys = NULL;
      dtx__index_spec_t *s = NULL;
      REQUIRE(dtx__index_spec_parse(ks, NULL, &s) == 0);
      if (dtx__index_keys(s, doc, &keys) != 0) {
        /* parallel arrays: the document could not be stored at all */
        json_decref(ks);
        dtx__index_spec_free(s);
        continue;
      }
      for (f = 0; f < s->nfields; f++)
        for (v = 0; v < sizeof values / sizeof values[0]; v++) {
          json_t *val = JQNEW(values[v]), *flt = json_object();
          dtx__filter_t *fc = NULL;
          int found = 0;
          json_object_set(flt, s->paths[f], val);
          REQUIRE(dtx__filter_compile(flt, &fc) == 0);
          if (dtx__filter_match(fc, doc)) {
            tested++;
            for (t = 0; t < json_array_size(keys); t++)
              if (dtx__value_cmp(json_array_get(json_array_get(keys, t), f),
                                 val) == 0)
                found = 1;
            CHECKF(found, "doc %s matches {%s: %s} but keys %s lack it",
                   docs[d], s->paths[f], values[v], JS(keys));
          }
          dtx__filter_free(fc);
          json_decref(flt);
          json_decref(val);
        }
      json_decref(keys);
      json_decref(ks);
      dtx__index_spec_free(s);
    }
    json_decref(doc);
  }
  CHECKF(tested > 40, "only %d matching (doc, filter) pairs", tested);
}

/* The same promise over random documents: small field names and values so
 * that filters often match, objects and arrays nested a few levels. */
static unsigned rnd_state = 12345;
static unsigned rnd(unsigned n) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (rnd_state >> 16) % n;
}

static json_t *rnd_value(int depth) {
  static const char *names[] = {"a", "b", "c"};
  unsigned k = rnd(depth > 0 ? 9 : 6), i, n;
  json_t *v;
  switch (k) {
  case 0:
    return json_integer(1);
  case 1:
    return json_integer(2);
  case 2:
    return json_string("A");
  case 3:
    return json_null();
  case 4:
    return json_true();
  case 5:
    return json_real(2.0);
  case 6:
  case 7:
    v = json_object();
    n = rnd(3);
    for (i = 0; i < n; i++) {
      const char *name = names[rnd(3)];
      json_object_set_new(v, name, rnd_value(depth - 1));
    }
    return v;
  default:
    v = json_array();
    n = rnd(4);
    for (i = 0; i < n; i++)
      json_array_append_new(v, rnd_value(depth - 1));
    return v;
  }
}

static void test_matcher_promise_random(void) {
  static const char *indexes[] = {
      "{'a':1}",         "{'a.b':1}",        "{'a.b.c':1}",
      "{'a':1,'b':1}",   "{'a.b':1,'a.c':1}", "{'a.b':1,'c':1}",
      "{'b.c':1,'b.a':1}", "{'a.a.a':1}",
  };
  static const char *values[] = {"1", "2", "'A'", "null", "true", "{'b':1}"};
  int iter, tested = 0, refused = 0, misses = 0;
  size_t x, f, v, t;
  for (iter = 0; iter < 1500; iter++) {
    json_t *doc = json_object();
    unsigned i, n = 1 + rnd(3);
    for (i = 0; i < n; i++) {
      /* two statements: argument evaluation order is unspecified */
      const char *name = i == 0 ? "a" : rnd(2) ? "b" : "c";
      json_object_set_new(doc, name, rnd_value(3));
    }
    for (x = 0; x < sizeof indexes / sizeof indexes[0]; x++) {
      json_t *ks = JQNEW(indexes[x]), *keys = NULL;
      dtx__index_spec_t *s = NULL;
      REQUIRE(dtx__index_spec_parse(ks, NULL, &s) == 0);
      int krc = dtx__index_keys(s, doc, &keys);
      char *det = krc ? strdup(dtx_errdetail()) : NULL;
      bson_leg(s, doc, krc, keys, det, "random");
      free(det);
      if (krc != 0) {
        refused++;
        CHECK(strstr(dtx_errdetail(), "parallel arrays") != NULL);
        json_decref(ks);
        dtx__index_spec_free(s);
        continue;
      }
      for (f = 0; f < s->nfields; f++)
        for (v = 0; v < sizeof values / sizeof values[0]; v++) {
          json_t *val = JQNEW(values[v]), *flt = json_object();
          dtx__filter_t *fc = NULL;
          int found = 0;
          json_object_set(flt, s->paths[f], val);
          REQUIRE(dtx__filter_compile(flt, &fc) == 0);
          if (dtx__filter_match(fc, doc)) {
            tested++;
            for (t = 0; t < json_array_size(keys); t++)
              if (dtx__value_cmp(json_array_get(json_array_get(keys, t), f),
                                 val) == 0)
                found = 1;
            if (!found && misses++ < 10)
              CHECKF(found, "doc %s matches {%s: %s} but keys %s lack it",
                     JS(doc), s->paths[f], values[v], JS(keys));
          }
          dtx__filter_free(fc);
          json_decref(flt);
          json_decref(val);
        }
      json_decref(keys);
      json_decref(ks);
      dtx__index_spec_free(s);
    }
    json_decref(doc);
  }
  CHECKF(misses == 0, "%d misses", misses);
  CHECKF(tested > 1000 && refused > 0, "tested %d, refused %d", tested,
         refused);
  printf("bson leg: %d key rows through both engines (%d tuples), 0 "
         "skipped\n", bleg_rows, bleg_tuples);
}

/* ---- index specs --------------------------------------------------------- */

typedef struct scase {
  const char *keys;
  const char *name; /* opts->name or NULL */
  int unique, sparse;
  const char *want; /* expected dtx__index_spec_json, or NULL for error */
  const char *detail;
} scase_t;

static const scase_t spec_cases[] = {
    {"{'a':1}", NULL, 0, 0,
     "{'name':'a_1','key':{'a':1},'unique':false,'sparse':false}", NULL},
    {"{'a':1,'b':-1}", NULL, 1, 0,
     "{'name':'a_1_b_-1','key':{'a':1,'b':-1},'unique':true,'sparse':false}",
     NULL},
    {"{'b':-1,'a':1}", NULL, 0, 1,
     "{'name':'b_-1_a_1','key':{'b':-1,'a':1},'unique':false,'sparse':true}",
     NULL},
    {"{'x.y':1}", NULL, 0, 0,
     "{'name':'x.y_1','key':{'x.y':1},'unique':false,'sparse':false}", NULL},
    {"{'changes.account':1,'changes.seqId':1}", "ledger", 1, 1,
     "{'name':'ledger','key':{'changes.account':1,'changes.seqId':1},"
     "'unique':true,'sparse':true}",
     NULL},
    {"{'a0':1,'b1c':1,'x.0a':1}", NULL, 0, 0,
     "{'name':'a0_1_b1c_1_x.0a_1','key':{'a0':1,'b1c':1,'x.0a':1},"
     "'unique':false,'sparse':false}",
     NULL},
    {"{'_id':1}", NULL, 0, 0,
     "{'name':'_id_1','key':{'_id':1},'unique':false,'sparse':false}", NULL},
    {"{'f1':1,'f2':1,'f3':1,'f4':1,'f5':1,'f6':1,'f7':1,'f8':1,'f9':1,"
     "'f10':1,'f11':1,'f12':1,'f13':1,'f14':1,'f15':1,'f16':1}",
     "n16", 0, 0,
     "{'name':'n16','key':{'f1':1,'f2':1,'f3':1,'f4':1,'f5':1,'f6':1,'f7':1,"
     "'f8':1,'f9':1,'f10':1,'f11':1,'f12':1,'f13':1,'f14':1,'f15':1,"
     "'f16':1},'unique':false,'sparse':false}",
     NULL},
    /* errors */
    {"[]", NULL, 0, 0, NULL, "object"},
    {"'a'", NULL, 0, 0, NULL, "object"},
    {"{}", NULL, 0, 0, NULL, "at least one"},
    {"{'f1':1,'f2':1,'f3':1,'f4':1,'f5':1,'f6':1,'f7':1,'f8':1,'f9':1,"
     "'f10':1,'f11':1,'f12':1,'f13':1,'f14':1,'f15':1,'f16':1,'f17':1}",
     NULL, 0, 0, NULL, "17 fields"},
    {"{'a':0}", NULL, 0, 0, NULL, "'a'"},
    {"{'a':2}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':-2}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':'1'}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':1.0}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':true}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':null}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':'text'}", NULL, 0, 0, NULL, "1 or -1"},
    {"{'a':1,'b':0}", NULL, 0, 0, NULL, "'b'"},
    {"{'a.0':1}", NULL, 0, 0, NULL, "positional"},
    {"{'a.0.b':1}", NULL, 0, 0, NULL, "'a.0.b'"},
    {"{'0':1}", NULL, 0, 0, NULL, "positional"},
    {"{'a.12':1}", NULL, 0, 0, NULL, "positional"},
    {"{'':1}", NULL, 0, 0, NULL, NULL},
    {"{'a..b':1}", NULL, 0, 0, NULL, NULL},
    {"{'a.':1}", NULL, 0, 0, NULL, NULL},
    {"{'$a':1}", NULL, 0, 0, NULL, NULL},
    {"{'a.$':1}", NULL, 0, 0, NULL, NULL},
    {"{'a':1}", "", 0, 0, NULL, "name"},
};

static void test_spec_table(void) {
  size_t i;
  for (i = 0; i < sizeof spec_cases / sizeof spec_cases[0]; i++) {
    const scase_t *c = &spec_cases[i];
    dtx_index_opts_t opts = {.unique = c->unique, .sparse = c->sparse, .name = c->name};
    json_t *keys = JQNEW(c->keys);
    dtx__index_spec_t *s = (dtx__index_spec_t *)1;
    int rc = dtx__index_spec_parse(keys, &opts, &s);
    if (c->want) {
      json_t *want = JQNEW(c->want), *got;
      char *w = JDUMP(want), *g;
      CHECKF(rc == 0, "case %zu %s: %s (%s)", i, c->keys, dtx_errname(rc),
             dtx_errdetail());
      if (rc == 0) {
        got = dtx__index_spec_json(s);
        g = JDUMP(got);
        CHECKF(!strcmp(g, w), "case %zu: got %s want %s", i, g, w);
        CHECK(s->nfields == json_object_size(keys));
        free(g);
        json_decref(got);
        dtx__index_spec_free(s);
      }
      free(w);
      json_decref(want);
    } else {
      CHECKF(rc == DTX_EBADINDEX, "case %zu %s: %s want BADINDEX", i,
             c->keys, dtx_errname(rc));
      CHECKF(s == NULL, "case %zu: out not NULL on error", i);
      if (c->detail)
        CHECKF(strstr(dtx_errdetail(), c->detail) != NULL,
               "case %zu: detail '%s' lacks '%s'", i, dtx_errdetail(),
               c->detail);
    }
    json_decref(keys);
  }
}

static void test_spec_null_opts(void) {
  json_t *keys = JQNEW("{'a':1}");
  dtx__index_spec_t *s = NULL;
  CHECK_RC(dtx__index_spec_parse(keys, NULL, &s), 0);
  REQUIRE(s != NULL);
  CHECK(!strcmp(s->name, "a_1"));
  CHECK(s->unique == 0 && s->sparse == 0 && s->dirs[0] == 1);
  CHECK(!strcmp(s->paths[0], "a"));
  dtx__index_spec_free(s);
  CHECK_RC(dtx__index_spec_parse(NULL, NULL, &s), DTX_EBADINDEX);
  json_decref(keys);
}

/* ---- upsert seeds -------------------------------------------------------- */

typedef struct ucase {
  const char *filter; /* NULL means a NULL filter */
  const char *want;   /* NULL for DTX_EBADQUERY */
  const char *detail;
} ucase_t;

static const ucase_t seed_cases[] = {
    {NULL, "{}", NULL},
    {"{}", "{}", NULL},
    {"{'a':1}", "{'a':1}", NULL},
    {"{'a':1,'b':'x'}", "{'a':1,'b':'x'}", NULL},
    {"{'a':{'$eq':1}}", "{'a':1}", NULL},
    {"{'a':{'$eq':{'b':1}}}", "{'a':{'b':1}}", NULL},
    {"{'a':{'$gt':1}}", "{}", NULL},
    {"{'a':{'$gt':1,'$eq':2}}", "{'a':2}", NULL},
    {"{'a':{'$in':[1]}}", "{'a':1}", NULL},
    {"{'a':{'$exists':true}}", "{}", NULL},
    {"{'a':{'$ne':1},'b':2}", "{'b':2}", NULL},
    {"{'x.y':1}", "{'x':{'y':1}}", NULL},
    {"{'x.y':1,'x.z':2}", "{'x':{'y':1,'z':2}}", NULL},
    {"{'x.y.z':1,'x.w':2}", "{'x':{'y':{'z':1},'w':2}}", NULL},
    {"{'a.0':1}", "{'a':{'0':1}}", NULL},
    {"{'$and':[{'a':1},{'b':2}]}", "{'a':1,'b':2}", NULL},
    {"{'c':3,'$and':[{'a':1},{'b':{'$eq':2}}]}", "{'c':3,'a':1,'b':2}", NULL},
    {"{'$and':[{'$and':[{'a':1}]},{'x.y':{'$eq':2}}]}",
     "{'a':1,'x':{'y':2}}", NULL},
    {"{'$or':[{'a':1}]}", "{'a':1}", NULL},
    {"{'$nor':[{'a':1}],'b':1}", "{'b':1}", NULL},
    {"{'a':{'x':1}}", "{'a':{'x':1}}", NULL},
    {"{'a':[1,2]}", "{'a':[1,2]}", NULL},
    {"{'a':null}", "{'a':null}", NULL},
    {"{'b':1,'_id':5}", "{'_id':5,'b':1}", NULL},
    {"{'b':1,'_id':{'$eq':'k'}}", "{'_id':'k','b':1}", NULL},
    {"{'b':1,'_id':{'$in':['k']}}", "{'_id':'k','b':1}", NULL},
    {"{'a':1,'$and':[{'ab':2}]}", "{'a':1,'ab':2}", NULL},
    {"{'a.b':1,'a-b':2}", "{'a':{'b':1},'a-b':2}", NULL},
    {"{'account':'A','state':{'$in':['x','y']}}", "{'account':'A'}", NULL},
    /* conflicts and malformed filters */
    {"{'a':1,'$and':[{'a':1}]}", NULL, "'a'"},
    {"{'a':1,'$and':[{'a':2}]}", NULL, "'a'"},
    {"{'a':1,'a.b':2}", NULL, "'a.b'"},
    {"{'a.b':1,'$and':[{'a':{'$eq':2}}]}", NULL, "'a'"},
    {"{'$and':[{'x.y':1},{'x.y':{'$eq':1}}]}", NULL, "'x.y'"},
    {"{'a.b':1,'a-':1,'a':{'$eq':3}}", NULL, "'a.b'"},
    {"{'$and':5}", NULL, "$and"},
    {"{'$and':[]}", NULL, "$and"},
    {"{'$and':[5]}", NULL, "object"},
    {"5", NULL, "object"},
    {"[]", NULL, "object"},
    {"{'a..b':1}", NULL, NULL},
};

static void test_seed_table(void) {
  size_t i;
  for (i = 0; i < sizeof seed_cases / sizeof seed_cases[0]; i++) {
    const ucase_t *c = &seed_cases[i];
    json_t *f = c->filter ? JQNEW(c->filter) : NULL, *out = (json_t *)1;
    int rc = dtx__upsert_seed(f, &out);
    if (c->want) {
      json_t *want = JQNEW(c->want);
      char *w = JDUMP(want), *g = out ? JDUMP(out) : NULL;
      CHECKF(rc == 0, "case %zu %s: %s (%s)", i, c->filter, dtx_errname(rc),
             dtx_errdetail());
      CHECKF(g && !strcmp(g, w), "case %zu %s: got %s want %s", i,
             c->filter, g ? g : "NULL", w);
      free(w);
      free(g);
      json_decref(want);
      json_decref(out);
    } else {
      CHECKF(rc == DTX_EBADQUERY, "case %zu %s: %s want BADQUERY", i,
             c->filter, dtx_errname(rc));
      CHECKF(out == NULL, "case %zu: out not NULL on error", i);
      if (c->detail)
        CHECKF(strstr(dtx_errdetail(), c->detail) != NULL,
               "case %zu: detail '%s' lacks '%s'", i, dtx_errdetail(),
               c->detail);
    }
    json_decref(f);
  }
}

/* Seed plus update with is_insert=1 gives MongoDB's upserted document. */
static void test_seed_then_update(void) {
  static const struct {
    const char *filter, *update, *want;
  } cases[] = {
      {"{'_id':1,'a':1}", "{'$set':{'b':1},'$setOnInsert':{'c':1}}",
       "{'_id':1,'a':1,'b':1,'c':1}"},
      {"{'a':1}", "{'$set':{'a':2}}", "{'a':2}"},
      {"{'a':{'$gt':1}}", "{'$inc':{'n':1}}", "{'n':1}"},
      {"{'x.y':1}", "{'$set':{'x.z':2}}", "{'x':{'y':1,'z':2}}"},
      {"{'_id':'k','q':1}", "{'r':2}", "{'_id':'k','r':2}"},
      {"{'name':'A'}", "{'$setOnInsert':{'balance':0},'$push':{'log':1}}",
       "{'name':'A','balance':0,'log':[1]}"},
  };
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *f = JQNEW(cases[i].filter), *spec = JQNEW(cases[i].update);
    json_t *want = JQNEW(cases[i].want), *seed = NULL, *out = NULL;
    dtx__update_t *u = NULL;
    int ch = 0;
    CHECK_RC(dtx__upsert_seed(f, &seed), 0);
    CHECK_RC(dtx__update_compile(spec, &u), 0);
    CHECK_RC(dtx__update_apply(u, seed, 1, 0, &out, &ch), 0);
    CHECKF(out && !strcmp(JS(out), JS(want)) && ch,
           "case %zu: got %s want %s", i, JS(out), cases[i].want);
    json_decref(want);
    json_decref(out);
    json_decref(seed);
    json_decref(f);
    json_decref(spec);
    dtx__update_free(u);
  }
}

int main(void) {
  TEST_RUN(test_key_table);
  TEST_RUN(test_keys_are_copies);
  TEST_RUN(test_keys_bad_args);
  TEST_RUN(test_matcher_promise);
  TEST_RUN(test_matcher_promise_random);
  TEST_RUN(test_spec_table);
  TEST_RUN(test_spec_null_opts);
  TEST_RUN(test_seed_table);
  TEST_RUN(test_seed_then_update);
  return TEST_DONE();
}
