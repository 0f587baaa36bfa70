/* test_sort_project.c -- sort specifications and projections.
 *
 * Sort rows give a spec, documents (each with an _id) and the expected _id
 * order after dtx__sort_array; they cover cross-type order, arrays (least
 * element ascending, greatest descending), missing versus null versus empty
 * array, dotted paths through arrays, exact numbers and stability.
 * Projection rows give a projection, a document and the exact expected
 * output text, so field order is checked too.
 */
#include "testlib.h"

#include "bdiff.h"

#include "doc/bfilter.h"
#include "doc/bproj.h"
#include "doc/doc.h"
#include "util/err.h"

#include <string.h>

static json_t *Q(const char *text) {
  size_t n = strlen(text);
  char *s = malloc(n + 1);
  for (size_t i = 0; i <= n; i++)
    s[i] = text[i] == '\'' ? '"' : text[i];
  json_t *v = J(s);
  free(s);
  return v;
}

/* ---- the BSON leg -----------------------------------------------------------
 * Every row below also runs through the BSON engine (bsort.c, bproject.c),
 * its spec and documents converted by the bridge: the same order, the same
 * output text, the same error code and detail.  Rows that BSON cannot say
 * (a spec that is not a document) or that need the BSON filter are
 * skipped, counted and printed with their reason. */
static int bleg_rows, bleg_skipped;

static void bleg_skip(const char *why, const char *row) {
  bleg_skipped++;
  printf("bson leg: skipped %s: %s\n", row, why);
}

/* The bridge, or NULL (b untouched) when v is not an object: a BSON spec
 * or document is always one. */
static bson_t *bson_of(const json_t *v, bson_t *b) {
  if (!json_is_object(v))
    return NULL;
  bson_init(b);
  if (dtx__bson_from_json(v, b) != 0) {
    bson_destroy(b);
    return NULL;
  }
  return b;
}

/* Sorts the documents of the json array docs with the BSON engine and
 * returns the array of their _id (or NULL on error, rc in *rc). */
static json_t *bson_sort_ids(const json_t *docs, const json_t *sort, int *rc) {
  size_t n = json_array_size(docs);
  /* bson_new, not an array of bson_t: libbson declares bson_t with
   * 128-byte alignment, which calloc does not give (UBSan) */
  bson_t **b = calloc(n ? n : 1, sizeof *b), spec;
  dtx__bval_t *v = calloc(n ? n : 1, sizeof *v);
  json_t *ids = NULL;
  for (size_t i = 0; i < n; i++) {
    b[i] = bson_new();
    if (dtx__bson_from_json(json_array_get(docs, i), b[i]))
      abort();
    v[i] = dtx__bval_of_doc(bson_get_data(b[i]), b[i]->len);
  }
  if (!bson_of(sort, &spec))
    abort();
  *rc = dtx__bsort_docs(v, n, bson_get_data(&spec), spec.len);
  if (*rc == 0) {
    ids = json_array();
    for (size_t i = 0; i < n; i++) {
      dtx__belem_t e;
      json_t *id = NULL;
      uint32_t len;
      const uint8_t *d = dtx__bval_doc(&v[i], &len);
      if (!dtx__belem_find(d, len, "_id", 3, &e) ||
          dtx__bval_to_json(&e.v, &id))
        abort();
      json_array_append_new(ids, id);
    }
  }
  bson_destroy(&spec);
  for (size_t i = 0; i < n; i++)
    bson_destroy(b[i]);
  free(b);
  free(v);
  return ids;
}

/* dtx__bsort_cmp's sign for two json documents. */
static int bson_sort_cmp(const json_t *sort, const json_t *a, const json_t *b) {
  bson_t s, x, y;
  if (!bson_of(sort, &s) || !bson_of(a, &x) || !bson_of(b, &y))
    abort();
  dtx__bval_t va = dtx__bval_of_doc(bson_get_data(&x), x.len);
  dtx__bval_t vb = dtx__bval_of_doc(bson_get_data(&y), y.len);
  int c = dtx__bsort_cmp(bson_get_data(&s), s.len, &va, &vb);
  bson_destroy(&s);
  bson_destroy(&x);
  bson_destroy(&y);
  return (c > 0) - (c < 0);
}

/* The BSON projection of doc as compact JSON text (malloc'd), or NULL
 * with the error in *rc; filter (may be NULL) is the query for "path.$". */
static char *bson_project_text(const json_t *proj, const json_t *doc,
                               const json_t *filter, int *rc) {
  bson_t p, d, out, fs;
  dtx__bfilter_t *f = NULL;
  dtx__bproj_t *bp = NULL;
  char *text = NULL;
  if (!bson_of(proj, &p) || !bson_of(doc, &d))
    abort();
  if (filter) {
    if (!bson_of(filter, &fs) || dtx__bfilter_compile(&fs, &f))
      abort();
    bson_destroy(&fs);
  }
  *rc = dtx__bproj_compile(bson_get_data(&p), p.len, &bp);
  if (*rc == 0)
    *rc = dtx__bproj_apply_at(bp, bson_get_data(&d), d.len, f, NULL, 0, &out);
  dtx__bproj_free(bp);
  dtx__bfilter_free(f);
  if (*rc == 0) {
    json_t *j = NULL;
    if (dtx__bson_to_json(bson_get_data(&out), out.len, 0, &j))
      abort();
    text = dtx__json_dump(j);
    json_decref(j);
    bson_destroy(&out);
  }
  bson_destroy(&p);
  bson_destroy(&d);
  return text;
}

/* Compares a BSON projection with the json_t engine's answer: text want
 * (rc 0) or error rc with detail. */
static void bleg_project_f(const json_t *proj, const json_t *doc,
                           const json_t *filter, int rc, const char *want,
                           const char *detail, const char *row) {
  int brc;
  bleg_rows++;
  char *got = bson_project_text(proj, doc, filter, &brc);
  CHECKF(brc == rc, "bson leg %s: %s want %s (%s)", row, dtx_errname(brc),
         dtx_errname(rc), dtx_errdetail());
  if (rc == 0 && brc == 0)
    CHECKF(!strcmp(got, want), "bson leg %s: got %s want %s", row, got, want);
  else if (rc && brc)
    CHECKF(!strcmp(dtx_errdetail(), detail),
           "bson leg %s: detail '%s' want '%s'", row, dtx_errdetail(),
           detail);
  free(got);
}

static void bleg_project(const json_t *proj, const json_t *doc, int rc,
                         const char *want, const char *detail,
                         const char *row) {
  bleg_project_f(proj, doc, NULL, rc, want, detail, row);
}

/* ---- sort ---------------------------------------------------------------- */

typedef struct scase {
  const char *sort;
  const char *docs; /* array of documents with _id */
  const char *ids;  /* expected _id order */
} scase_t;

#define MIXED                                                                \
  "[{'_id':1,'a':true},{'_id':2,'a':'x'},{'_id':3,'a':1},{'_id':4},"         \
  "{'_id':5,'a':null},{'_id':6,'a':{}},{'_id':7,'a':[]},{'_id':8,'a':2.5},"  \
  "{'_id':9,'a':[0,9]},{'_id':10,'a':[[1]]}]"

static const scase_t sort_cases[] = {
    {"{'a':1}", "[{'_id':1,'a':3},{'_id':2,'a':1},{'_id':3,'a':2}]", "[2,3,1]"},
    {"{'a':-1}", "[{'_id':1,'a':3},{'_id':2,'a':1},{'_id':3,'a':2}]",
     "[1,3,2]"},
    /* cross-type: [] < null = missing < numbers < strings < objects <
     * arrays < booleans; [0,9] sorts as 0 ascending, 9 descending */
    {"{'a':1}", MIXED, "[7,4,5,9,3,8,2,6,10,1]"},
    {"{'a':-1}", MIXED, "[1,10,6,2,9,8,3,4,5,7]"},
    {"{'a':1,'b':-1}",
     "[{'_id':1,'a':1,'b':1},{'_id':2,'a':1,'b':2},{'_id':3,'a':0,'b':5},"
     "{'_id':4,'a':1,'b':2}]",
     "[3,2,4,1]"},
    {"{'b':-1,'a':1}",
     "[{'_id':1,'a':1,'b':1},{'_id':2,'a':1,'b':2},{'_id':3,'a':0,'b':5},"
     "{'_id':4,'a':1,'b':2}]",
     "[3,2,4,1]"},
    /* stability: equal keys keep input order, in both directions */
    {"{'k':1}", "[{'_id':5,'k':1},{'_id':3,'k':1},{'_id':9,'k':1},{'_id':1,'k':1}]",
     "[5,3,9,1]"},
    {"{'k':-1}",
     "[{'_id':5,'k':1},{'_id':3,'k':1.0},{'_id':9},{'_id':1,'k':null}]",
     "[5,3,9,1]"},
    {"{'k':1}", "[{'_id':5},{'_id':3,'k':null},{'_id':9},{'_id':1,'k':[]}]",
     "[1,5,3,9]"},
    /* dotted paths through arrays of subdocuments */
    {"{'a.b':1}",
     "[{'_id':1,'a':[{'b':5},{'b':1}]},{'_id':2,'a':{'b':3}},"
     "{'_id':3,'a':[{'c':1}]},{'_id':4,'a':[{'b':2},{'b':9}]}]",
     "[3,1,4,2]"},
    {"{'a.b':-1}",
     "[{'_id':1,'a':[{'b':5},{'b':1}]},{'_id':2,'a':{'b':3}},"
     "{'_id':3,'a':[{'c':1}]},{'_id':4,'a':[{'b':2},{'b':9}]}]",
     "[4,1,2,3]"},
    {"{'a.b':1}", "[{'_id':1,'a':[{'b':[7,6]}]},{'_id':2,'a':[{'b':6.5}]}]",
     "[1,2]"},
    {"{'a.1':1}", "[{'_id':1,'a':[9,2]},{'_id':2,'a':[0,1]},{'_id':3,'a':[5]}]",
     "[3,2,1]"},
    /* exact numbers */
    {"{'v':1}",
     "[{'_id':1,'v':9007199254740993},{'_id':2,'v':9007199254740992.0},"
     "{'_id':3,'v':9007199254740992}]",
     "[2,3,1]"},
    {"{'v':-1}",
     "[{'_id':1,'v':-9223372036854775808},{'_id':2,'v':9223372036854775807},"
     "{'_id':3,'v':9.3e18},{'_id':4,'v':-1e19}]",
     "[3,2,1,4]"},
    /* strings: bytewise */
    {"{'s':1}",
     "[{'_id':1,'s':'b'},{'_id':2,'s':'B'},{'_id':3,'s':'a'},{'_id':4,'s':''},"
     "{'_id':5,'s':'ab'}]",
     "[4,2,3,5,1]"},
    /* sort by _id itself */
    {"{'_id':-1}", "[{'_id':'a'},{'_id':'c'},{'_id':'b'}]", "['c','b','a']"},
    {"{'_id':1}", "[{'_id':'a'},{'_id':2},{'_id':1}]", "[1,2,'a']"},
    /* objects compare field by field */
    {"{'o':1}",
     "[{'_id':1,'o':{'a':2}},{'_id':2,'o':{'a':1,'b':1}},{'_id':3,'o':{'a':1}}]",
     "[3,2,1]"},
    {"{'x':1}", "[{'_id':1},{'_id':2}]", "[1,2]"},
    {"{'x':1}", "[]", "[]"},
    {"{'x':1}", "[{'_id':1,'x':2}]", "[1]"},
};

static void test_sort_table(void) {
  for (size_t i = 0; i < sizeof sort_cases / sizeof sort_cases[0]; i++) {
    json_t *sort = Q(sort_cases[i].sort), *docs = Q(sort_cases[i].docs);
    json_t *want = Q(sort_cases[i].ids);
    /* the BSON engine's path leg: each sort key over each document */
    for (size_t k = 0; k < json_array_size(docs); k++)
      CHECKF(bdiff_walk_spec("sort", sort, json_array_get(docs, k),
                             &dtx_t_bpath_walks) == 0,
             "sort[%zu] doc %zu: paths differ between the engines", i, k);
    int rc = dtx__sort_array(docs, sort);
    CHECKF(rc == 0, "sort[%zu]: %s (%s)", i, dtx_errname(rc),
           dtx_errdetail());
    json_t *got = json_array();
    for (size_t k = 0; k < json_array_size(docs); k++)
      json_array_append(got, json_object_get(json_array_get(docs, k), "_id"));
    CHECKF(json_equal(got, want), "sort[%zu] %s: got %s want %s", i,
           sort_cases[i].sort, JS(got), JS(want));
    {
      json_t *orig = Q(sort_cases[i].docs);
      int brc;
      json_t *bids = bson_sort_ids(orig, sort, &brc);
      bleg_rows++;
      CHECKF(brc == 0 && json_equal(bids, got), "bson leg sort[%zu] %s: %s",
             i, sort_cases[i].sort, bids ? JS(bids) : dtx_errname(brc));
      json_decref(bids);
      json_decref(orig);
    }
    json_decref(got);
    json_decref(want);
    json_decref(sort);
    json_decref(docs);
  }
}

/* dtx__sort_cmp agrees with the table order pairwise. */
static void test_sort_cmp(void) {
  json_t *asc = Q("{'a':1}"), *desc = Q("{'a':-1}");
  json_t *d1 = Q("{'a':1}"), *d2 = Q("{'a':2}"), *dm = Q("{}");
  json_t *dn = Q("{'a':null}"), *de = Q("{'a':[]}"), *dr = Q("{'a':[5,0]}");
  CHECK(dtx__sort_cmp(asc, d1, d2) < 0);
  CHECK(dtx__sort_cmp(asc, d2, d1) > 0);
  CHECK(dtx__sort_cmp(desc, d1, d2) > 0);
  CHECK(dtx__sort_cmp(asc, d1, d1) == 0);
  CHECK(dtx__sort_cmp(asc, dm, dn) == 0);
  CHECK(dtx__sort_cmp(asc, de, dn) < 0);
  CHECK(dtx__sort_cmp(desc, de, dn) > 0);
  CHECK(dtx__sort_cmp(asc, dr, d1) < 0);  /* least element 0 < 1 */
  CHECK(dtx__sort_cmp(desc, dr, d2) < 0); /* greatest element 5 > 2 */
  json_t *multi = Q("{'a':1,'b':-1}");
  json_t *x = Q("{'a':1,'b':1}"), *y = Q("{'a':1,'b':2}");
  CHECK(dtx__sort_cmp(multi, x, y) > 0);
  CHECK(dtx__sort_cmp(multi, y, x) < 0);
  json_t *v[] = {asc, desc, d1, d2, dm, dn, de, dr, multi, x, y};
  /* the BSON leg: every pair under every spec */
  json_t *specs[] = {asc, desc, multi};
  json_t *docs[] = {d1, d2, dm, dn, de, dr, x, y};
  for (size_t s = 0; s < 3; s++)
    for (size_t a = 0; a < 8; a++)
      for (size_t b = 0; b < 8; b++) {
        int jc = dtx__sort_cmp(specs[s], docs[a], docs[b]);
        CHECKF(((jc > 0) - (jc < 0)) ==
                   bson_sort_cmp(specs[s], docs[a], docs[b]),
               "bson leg sort_cmp %s %s %s", JS(specs[s]), JS(docs[a]),
               JS(docs[b]));
        bleg_rows++;
      }
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    json_decref(v[i]);
}

/* A larger stability check: 200 documents, 3 distinct keys. */
static void test_sort_stable_many(void) {
  json_t *docs = json_array();
  for (int i = 0; i < 200; i++)
    json_array_append_new(docs, json_pack("{s:i,s:i}", "_id", i, "k",
                                          (i * 7) % 3));
  json_t *sort = Q("{'k':-1}");
  CHECK_RC(dtx__sort_array(docs, sort), 0);
  int ok = json_array_size(docs) == 200;
  for (size_t i = 1; ok && i < 200; i++) {
    json_t *a = json_array_get(docs, i - 1), *b = json_array_get(docs, i);
    json_int_t ka = json_integer_value(json_object_get(a, "k"));
    json_int_t kb = json_integer_value(json_object_get(b, "k"));
    json_int_t ia = json_integer_value(json_object_get(a, "_id"));
    json_int_t ib = json_integer_value(json_object_get(b, "_id"));
    if (ka < kb || (ka == kb && ia > ib))
      ok = 0;
  }
  CHECK(ok);
  json_decref(sort);
  json_decref(docs);
}

static const struct {
  const char *sort;
  const char *detail;
} sort_bad[] = {
    {"{}", "non-empty"},
    {"[]", "object"},
    {"1", "object"},
    {"{'a':0}", "1 or -1"},
    {"{'a':2}", "1 or -1"},
    {"{'a':1.0}", "1 or -1"},
    {"{'a':'1'}", "1 or -1"},
    {"{'a':true}", "1 or -1"},
    {"{'a':1,'b':-2}", "for b"},
    {"{'':1}", "empty field path"},
    {"{'a..b':1}", "a..b"},
    {"{'$a':1}", "$a"},
};

static void test_sort_check(void) {
  for (size_t i = 0; i < sizeof sort_bad / sizeof sort_bad[0]; i++) {
    json_t *s = Q(sort_bad[i].sort);
    int rc = dtx__sort_check(s);
    CHECKF(rc == DTX_EINVAL, "sort_check(%s) = %s", sort_bad[i].sort,
           dtx_errname(rc));
    CHECKF(strstr(dtx_errdetail(), sort_bad[i].detail) != NULL,
           "sort_check(%s): detail '%s' lacks '%s'", sort_bad[i].sort,
           dtx_errdetail(), sort_bad[i].detail);
    bson_t bs;
    if (!bson_of(s, &bs)) {
      bleg_skip("a BSON sort spec is a document", sort_bad[i].sort);
    } else {
      char *det = strdup(dtx_errdetail());
      int brc = dtx__bsort_check(bson_get_data(&bs), bs.len);
      bleg_rows++;
      CHECKF(brc == rc && !strcmp(det, dtx_errdetail()),
             "bson leg sort_check(%s): %s '%s' want '%s'", sort_bad[i].sort,
             dtx_errname(brc), dtx_errdetail(), det);
      free(det);
      bson_destroy(&bs);
    }
    json_t *docs = Q("[{'a':2},{'a':1}]");
    CHECK_RC(dtx__sort_array(docs, s), DTX_EINVAL);
    CHECK(json_integer_value(
              json_object_get(json_array_get(docs, 0), "a")) == 2);
    json_decref(docs);
    json_decref(s);
  }
  CHECK_RC(dtx__sort_check(NULL), DTX_EINVAL);
  json_t *ok = Q("{'a':-1,'b.c':1,'d.0':1}");
  CHECK_RC(dtx__sort_check(ok), 0);
  json_t *notarr = Q("{'a':1}");
  CHECK_RC(dtx__sort_array(notarr, ok), DTX_EINVAL);
  json_decref(notarr);
  json_decref(ok);
}

/* ---- projection ------------------------------------------------------------ */

typedef struct pcase {
  const char *proj, *doc, *want; /* want: exact compact text */
} pcase_t;

static const pcase_t proj_cases[] = {
    {"{'a':1}", "{'_id':1,'a':2,'b':3}", "{'_id':1,'a':2}"},
    {"{'a':true}", "{'_id':1,'a':2,'b':3}", "{'_id':1,'a':2}"},
    {"{'a':1,'_id':0}", "{'_id':1,'a':2,'b':3}", "{'a':2}"},
    {"{'_id':0,'a':1}", "{'_id':1,'a':2,'b':3}", "{'a':2}"},
    {"{'_id':false,'a':1}", "{'_id':1,'a':2,'b':3}", "{'a':2}"},
    {"{'a':0}", "{'_id':1,'a':2,'b':3}", "{'_id':1,'b':3}"},
    {"{'a':false}", "{'_id':1,'a':2,'b':3}", "{'_id':1,'b':3}"},
    {"{'a':0,'_id':0}", "{'_id':1,'a':2,'b':3}", "{'b':3}"},
    {"{'_id':1,'a':0}", "{'_id':1,'a':2,'b':3}", "{'_id':1,'b':3}"},
    {"{'_id':0}", "{'_id':1,'a':2,'b':3}", "{'a':2,'b':3}"},
    {"{'_id':1}", "{'_id':1,'a':2,'b':3}", "{'_id':1}"},
    {"{}", "{'_id':1,'a':2,'b':3}", "{'_id':1,'a':2,'b':3}"},
    /* output keeps the document's field order, not the projection's */
    {"{'b':1,'a':1}", "{'_id':1,'a':1,'b':2,'c':3}", "{'_id':1,'a':1,'b':2}"},
    {"{'a':1}", "{'a':1,'_id':5}", "{'a':1,'_id':5}"},
    {"{'x':1}", "{'_id':1,'a':1}", "{'_id':1}"},
    {"{'x':1}", "{'a':1}", "{}"},
    {"{'x':0}", "{'_id':1,'a':1}", "{'_id':1,'a':1}"},
    /* dotted paths into subdocuments */
    {"{'b.c':1}", "{'_id':1,'b':{'c':1,'d':2},'e':3}", "{'_id':1,'b':{'c':1}}"},
    {"{'b.c':0}", "{'_id':1,'b':{'c':1,'d':2},'e':3}",
     "{'_id':1,'b':{'d':2},'e':3}"},
    {"{'a.b.c':1}", "{'a':{'b':{'c':1,'d':1},'e':1}}", "{'a':{'b':{'c':1}}}"},
    {"{'a.b.c':0}", "{'a':{'b':{'c':1,'d':1},'e':1}}",
     "{'a':{'b':{'d':1},'e':1}}"},
    {"{'a.b':1,'a.c':1}", "{'a':{'b':1,'c':2,'d':3}}", "{'a':{'b':1,'c':2}}"},
    {"{'a.b':0,'a.c':0}", "{'a':{'b':1,'c':2,'d':3}}", "{'a':{'d':3}}"},
    {"{'a':1}", "{'a':{'b':[1,{'c':2}]}}", "{'a':{'b':[1,{'c':2}]}}"},
    {"{'a.b':1}", "{'_id':1,'a':{'x':1}}", "{'_id':1,'a':{}}"},
    {"{'a.b':1}", "{'_id':1,'a':5}", "{'_id':1}"},
    {"{'a.b':0}", "{'_id':1,'a':5}", "{'_id':1,'a':5}"},
    {"{'a.b':1,'c':1}", "{'c':0,'a':{'b':1},'_id':2}",
     "{'c':0,'a':{'b':1},'_id':2}"},
    /* through arrays of subdocuments: inclusion drops scalars, keeps {} */
    {"{'b.c':1}", "{'_id':1,'b':[{'c':1,'d':2},{'d':3},5,[{'c':4,'x':1}]]}",
     "{'_id':1,'b':[{'c':1},{},[{'c':4}]]}"},
    {"{'b.c':0}", "{'_id':1,'b':[{'c':1,'d':2},{'d':3},5,[{'c':4,'x':1}]]}",
     "{'_id':1,'b':[{'d':2},{'d':3},5,[{'x':1}]]}"},
    {"{'changes.account':1,'_id':0}",
     "{'_id':'t','changes':[{'account':'A','amount':-5},"
     "{'account':'B','amount':5}]}",
     "{'changes':[{'account':'A'},{'account':'B'}]}"},
    {"{'b.c':1}", "{'b':[]}", "{'b':[]}"},
    {"{'b.c':1}", "{'b':[1,2]}", "{'b':[]}"},
    {"{'a.b.c':1}", "{'a':[{'b':[{'c':1,'d':2}]},{'b':{'c':3}}]}",
     "{'a':[{'b':[{'c':1}]},{'b':{'c':3}}]}"},
    /* exact values survive */
    {"{'n':1}", "{'n':9223372036854775807,'m':1.5}",
     "{'n':9223372036854775807}"},
    {"{'m':1}", "{'n':1,'m':1.0}", "{'m':1.0}"},
};

static void test_project_table(void) {
  for (size_t i = 0; i < sizeof proj_cases / sizeof proj_cases[0]; i++) {
    json_t *proj = Q(proj_cases[i].proj), *doc = Q(proj_cases[i].doc);
    json_t *want = Q(proj_cases[i].want);
    char *before = dtx__json_dump(doc);
    json_t *out = NULL;
    CHECK_RC(dtx__projection_check(proj), 0);
    int rc = dtx__project(doc, proj, &out);
    CHECKF(rc == 0, "project[%zu]: %s (%s)", i, dtx_errname(rc),
           dtx_errdetail());
    char *got = out ? dtx__json_dump(out) : NULL;
    char *exp = dtx__json_dump(want);
    CHECKF(got && !strcmp(got, exp), "project[%zu] %s of %s: got %s want %s",
           i, proj_cases[i].proj, proj_cases[i].doc, got ? got : "(null)",
           exp);
    {
      char row[32];
      snprintf(row, sizeof row, "project[%zu]", i);
      bleg_project(proj, doc, rc, got, NULL, row);
    }
    char *after = dtx__json_dump(doc);
    CHECKF(!strcmp(before, after), "project[%zu] modified its input", i);
    free(before);
    free(after);
    free(got);
    free(exp);
    json_decref(out);
    json_decref(want);
    json_decref(proj);
    json_decref(doc);
  }
}

/* The result shares nothing with the input document. */
static void test_project_independent(void) {
  json_t *doc = Q("{'_id':1,'a':{'b':[1,2]},'c':{'d':1}}");
  json_t *proj = Q("{'a':1,'c.d':1}");
  json_t *out = NULL;
  REQUIRE(dtx__project(doc, proj, &out) == 0);
  json_array_append_new(json_object_get(json_object_get(out, "a"), "b"),
                        json_integer(3));
  json_object_set_new(json_object_get(out, "c"), "d", json_integer(9));
  char *s = dtx__json_dump(doc);
  CHECK(!strcmp(s, "{\"_id\":1,\"a\":{\"b\":[1,2]},\"c\":{\"d\":1}}"));
  free(s);
  json_decref(out);
  json_decref(proj);
  json_decref(doc);
}

static const struct {
  const char *proj;
  const char *detail;
} proj_bad[] = {
    {"{'a':1,'b':0}", "projection cannot mix inclusion and exclusion"},
    {"{'a':0,'b':1}", "projection cannot mix inclusion and exclusion"},
    {"{'a':false,'b.c':true}", "cannot mix"},
    {"{'a':2}", "must be 0, 1, true or false"},
    {"{'a':-1}", "must be 0, 1, true or false"},
    {"{'a':'x'}", "for a"},
    {"{'a':null}", "for a"},
    {"{'a':1.5}", "for a"},
    {"{'a':{}}", "for a"},
    {"{'a':1,'a.b':1}", "collision"},
    {"{'a.b':1,'a':1}", "collision"},
    {"{'a.b':0,'a.b.c':0}", "collision"},
    {"{'':1}", "empty field path"},
    {"{'a..b':1}", "a..b"},
    {"{'$a':1}", "$a"},
    {"[]", "object"},
    {"1", "object"},
};

static void test_project_bad(void) {
  for (size_t i = 0; i < sizeof proj_bad / sizeof proj_bad[0]; i++) {
    json_t *proj = Q(proj_bad[i].proj), *doc = Q("{'_id':1,'a':{'b':1}}");
    json_t *out = (json_t *)&out;
    int check_rc = dtx__projection_check(proj);
    CHECKF(check_rc == DTX_EINVAL, "projection_check(%s) = %s",
           proj_bad[i].proj, dtx_errname(check_rc));
    int rc = dtx__project(doc, proj, &out);
    CHECKF(rc == DTX_EINVAL, "project(%s) = %s", proj_bad[i].proj,
           dtx_errname(rc));
    CHECK(out == NULL);
    CHECKF(strstr(dtx_errdetail(), proj_bad[i].detail) != NULL,
           "project(%s): detail '%s' lacks '%s'", proj_bad[i].proj,
           dtx_errdetail(), proj_bad[i].detail);
    if (!json_is_object(proj)) {
      bleg_skip("a BSON projection is a document", proj_bad[i].proj);
    } else {
      char *det = strdup(dtx_errdetail());
      bleg_project(proj, doc, rc, NULL, det, proj_bad[i].proj);
      free(det);
    }
    json_decref(proj);
    json_decref(doc);
  }
}

/* ---- projection operators ---------------------------------------------------
 * Manual: "$ (projection)" (the first element the query matched; inclusion
 * only), "$slice (projection)" (n, -n or [skip, n]; other fields kept
 * unless the projection includes), "$elemMatch (projection)" (the first
 * matching element, or no field; top-level fields only). */
static const struct {
  const char *filter, *proj, *doc, *want; /* want NULL: error rc */
  int rc;
} proj_op_cases[] = {
    {"{'grades':{'$gte':85}}", "{'grades.$':1}",
     "{'_id':1,'sem':1,'grades':[70,87,90]}", "{'_id':1,'grades':[87]}", 0},
    {"{'g.s':2}", "{'g.$':1,'_id':0}", "{'_id':1,'g':[{'s':1},{'s':2,'t':1}]}",
     "{'g':[{'s':2,'t':1}]}", 0},
    {"{'sem':1,'grades':{'$gte':85}}", "{'sem':1,'grades.$':1}",
     "{'_id':1,'sem':1,'x':0,'grades':[90]}", "{'_id':1,'sem':1,'grades':[90]}",
     0},
    {"{'_id':1}", "{'grades.$':1}", "{'_id':1,'grades':[1]}", NULL,
     DTX_EBADQUERY},
    {"{}", "{'a':{'$slice':2}}", "{'_id':1,'a':[1,2,3],'b':4}",
     "{'_id':1,'a':[1,2],'b':4}", 0},
    {"{}", "{'a':{'$slice':-2}}", "{'a':[1,2,3]}", "{'a':[2,3]}", 0},
    {"{}", "{'a':{'$slice':[1,1]}}", "{'a':[1,2,3]}", "{'a':[2]}", 0},
    {"{}", "{'a':{'$slice':[-2,5]}}", "{'a':[1,2,3]}", "{'a':[2,3]}", 0},
    {"{}", "{'a':{'$slice':[5,1]}}", "{'a':[1,2,3]}", "{'a':[]}", 0},
    {"{}", "{'a':{'$slice':0}}", "{'a':[1,2,3]}", "{'a':[]}", 0},
    {"{}", "{'a':{'$slice':1}}", "{'a':'x','b':1}", "{'a':'x','b':1}", 0},
    {"{}", "{'b':1,'a':{'$slice':1}}", "{'_id':1,'a':[1,2],'b':2,'c':3}",
     "{'_id':1,'a':[1],'b':2}", 0},
    {"{}", "{'c':0,'a':{'$slice':1}}", "{'_id':1,'a':[1,2],'c':3}",
     "{'_id':1,'a':[1]}", 0},
    {"{}", "{'x.a':{'$slice':1}}", "{'x':{'a':[1,2]}}", "{'x':{'a':[1]}}",
     0},
    {"{}", "{'s':{'$elemMatch':{'school':102}}}",
     "{'_id':1,'zip':'63109','s':[{'n':'j','school':102},"
     "{'n':'b','school':102}]}",
     "{'_id':1,'s':[{'n':'j','school':102}]}", 0},
    {"{}", "{'s':{'$elemMatch':{'school':9}}}",
     "{'_id':1,'s':[{'school':102}]}", "{'_id':1}", 0},
    {"{}", "{'zip':1,'s':{'$elemMatch':{'a':{'$gt':1}}}}",
     "{'_id':1,'s':[{'a':1},{'a':2}],'zip':'x'}",
     "{'_id':1,'s':[{'a':2}],'zip':'x'}", 0},
    {"{}", "{'a':{'$elemMatch':{'$gt':1}}}", "{'a':[1,5,7]}", "{'a':[5]}", 0},
    {"{}", "{'zip':0,'s':{'$elemMatch':{'a':1}}}",
     "{'_id':1,'s':[{'a':1}],'zip':'x','k':2}", "{'_id':1,'s':[{'a':1}],'k':2}",
     0},
};

static const struct {
  const char *proj;
  int rc;
  const char *detail;
} proj_op_bad[] = {
    {"{'a.$':1,'b.$':1}", DTX_EINVAL, "only one positional"},
    {"{'a.$':0}", DTX_EINVAL, "only be included"},
    {"{'a.$':1,'b':0}", DTX_EINVAL, "cannot mix"},
    {"{'a':{'$slice':'x'}}", DTX_EINVAL, "$slice"},
    {"{'a':{'$slice':[1,0]}}", DTX_EINVAL, "limit > 0"},
    {"{'a':{'$slice':[1]}}", DTX_EINVAL, "$slice"},
    {"{'a.b':{'$elemMatch':{'x':1}}}", DTX_EBADQUERY, "nested field"},
    {"{'a':{'$elemMatch':5}}", DTX_EBADQUERY, "$elemMatch"},
    {"{'a':{'$elemMatch':{'$bogus':1}}}", DTX_EBADQUERY, "$bogus"},
    {"{'a':{'$meta':'textScore'}}", DTX_EBADQUERY, "unsupported operator $meta"},
    {"{'a':{'$foo':1}}", DTX_EBADQUERY, "unknown operator $foo"},
    {"{'a':{'$slice':1,'$elemMatch':{}}}", DTX_EINVAL, "for a"},
};

static void test_project_ops(void) {
  for (size_t i = 0; i < sizeof proj_op_cases / sizeof proj_op_cases[0];
       i++) {
    json_t *fs = Q(proj_op_cases[i].filter), *proj = Q(proj_op_cases[i].proj);
    json_t *doc = Q(proj_op_cases[i].doc), *out = NULL;
    dtx__filter_t *f = NULL;
    dtx__proj_t *p = NULL;
    REQUIRE(dtx__filter_compile(fs, &f) == 0);
    int rc = dtx__proj_compile(proj, &p);
    if (rc == 0)
      rc = dtx__proj_apply(p, doc, f, &out);
    char *jdet = rc ? strdup(dtx_errdetail()) : NULL;
    char *jtext = out ? dtx__json_dump(out) : NULL;
    {
      char row[32];
      snprintf(row, sizeof row, "proj_op[%zu]", i);
      bleg_project_f(proj, doc, fs, rc, jtext, jdet, row);
    }
    if (jdet)
      dtx__err(rc, "%s", jdet);
    free(jdet);
    free(jtext);
    if (proj_op_cases[i].want) {
      json_t *want = Q(proj_op_cases[i].want);
      char *got = out ? dtx__json_dump(out) : NULL, *exp = dtx__json_dump(want);
      CHECKF(rc == 0 && got && !strcmp(got, exp),
             "proj_op[%zu] %s: %s (%s) got %s want %s", i,
             proj_op_cases[i].proj, dtx_errname(rc), dtx_errdetail(),
             got ? got : "(null)", exp);
      free(got);
      free(exp);
      json_decref(want);
    } else {
      CHECKF(rc == proj_op_cases[i].rc && !out, "proj_op[%zu] %s: %s", i,
             proj_op_cases[i].proj, dtx_errname(rc));
    }
    json_decref(out);
    dtx__proj_free(p);
    dtx__filter_free(f);
    json_decref(fs);
    json_decref(proj);
    json_decref(doc);
  }
  for (size_t i = 0; i < sizeof proj_op_bad / sizeof proj_op_bad[0]; i++) {
    json_t *proj = Q(proj_op_bad[i].proj);
    int rc = dtx__projection_check(proj);
    CHECKF(rc == proj_op_bad[i].rc, "check(%s) = %s", proj_op_bad[i].proj,
           dtx_errname(rc));
    CHECKF(strstr(dtx_errdetail(), proj_op_bad[i].detail) != NULL,
           "check(%s): detail '%s' lacks '%s'", proj_op_bad[i].proj,
           dtx_errdetail(), proj_op_bad[i].detail);
    {
      char *det = strdup(dtx_errdetail());
      json_t *doc = Q("{'_id':1,'a':[1,2]}");
      bleg_project(proj, doc, rc, NULL, det, proj_op_bad[i].proj);
      json_decref(doc);
      free(det);
    }
    json_decref(proj);
  }
}

static void test_bson_leg_summary(void) {
  printf("bson leg: %d sort/projection rows through both engines, %d "
         "skipped (reasons above)\n", bleg_rows, bleg_skipped);
  CHECK(bleg_rows > 100);
}

int main(void) {
  TEST_RUN(test_sort_table);
  TEST_RUN(test_sort_cmp);
  TEST_RUN(test_sort_stable_many);
  TEST_RUN(test_sort_check);
  TEST_RUN(test_project_table);
  TEST_RUN(test_project_independent);
  TEST_RUN(test_project_bad);
  TEST_RUN(test_project_ops);
  TEST_RUN(test_bson_leg_summary);
  return TEST_DONE();
}
