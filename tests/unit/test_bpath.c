/* test_bpath.c -- paths over BSON: dtx__bpath_walk and dtx__bpath_get
 * against the json_t engine's dtx__path_walk_pos and dtx__path_get
 * (bdiff_walk), and what only BSON can say.
 *
 * The differential rows: a table of (document, path) run in the three
 * leaf modes, then every document of the table against every path of the
 * table (most pairs miss, which is what the "missing" rules are about).
 * Each walk is compared visit by visit -- the value through the bridge,
 * empty_leaf and the positional *pos -- and again stopped by the visitor
 * at each visit in turn.  The BSON-only rows spell documents in
 * Extended JSON (libbson's reader) and give the expected visits.
 */
#include "testlib.h"

#include "bdiff.h"
#include "doc/bdoc.h"

#include <stdlib.h>
#include <string.h>

/* Single-quoted JSON to real JSON. */
static json_t *Q(const char *text) {
  size_t n = strlen(text);
  char *s = malloc(n + 1);
  for (size_t i = 0; i <= n; i++)
    s[i] = text[i] == '\'' ? '"' : text[i];
  json_t *v = J(s);
  free(s);
  return v;
}

typedef struct prow {
  const char *doc, *path;
} prow_t;

static const prow_t rows[] = {
    /* objects */
    {"{'a':1}", "a"},
    {"{'a':1}", "b"},
    {"{'a':{'b':1}}", "a.b"},
    {"{'a':{'b':1}}", "a"},
    {"{'a':{'b':{'c':1}}}", "a.b.c"},
    {"{'a':{'b':{'c':1}}}", "a.b.d"},
    {"{'a':{'c':{'b':1}}}", "a.b"},
    {"{'a':1}", "a.b"},
    {"{'a':'str'}", "a.b"},
    {"{'a':null}", "a.b"},
    {"{'a':null}", "a"},
    {"{}", "a"},
    {"{}", "a.b.c"},
    {"{'a.b':1}", "a.b"},
    {"{'':1}", "a"},
    {"{'a':{'':1}}", "a"},
    /* arrays at the leaf */
    {"{'a':[1,2,3]}", "a"},
    {"{'a':[]}", "a"},
    {"{'a':[[]]}", "a"},
    {"{'a':[[1,2],3]}", "a"},
    {"{'a':[{'b':1}]}", "a"},
    {"{'a':[null]}", "a"},
    /* arrays in the middle */
    {"{'a':[{'b':1},{'b':2}]}", "a.b"},
    {"{'a':[{'b':1},{'c':2}]}", "a.b"},
    {"{'a':[{'b':[1,2]}]}", "a.b"},
    {"{'a':[{'b':[1,2]},{'b':[]}]}", "a.b"},
    {"{'a':[{'b':[{'c':1}]}]}", "a.b.c"},
    {"{'a':[{'b':{'c':[0,1]}}]}", "a.b.c"},
    {"{'a':[[{'b':1}]]}", "a.b"},
    {"{'a':[1,{'b':1}]}", "a.b"},
    {"{'a':[1,2]}", "a.b"},
    {"{'a':[]}", "a.b"},
    {"{'a':[[]]}", "a.b"},
    {"{'a':[null,null]}", "a.b"},
    {"{'a':[1,'string',4]}", "a.b"},
    {"{'a':[{'b':3},{}]}", "a.b"},
    {"{'a':{'b':[{'c':[{'d':1}]}]}}", "a.b.c.d"},
    {"{'a':[{'b':[{'c':[{'d':1},{'d':[2,3]}]}]},{'b':5}]}", "a.b.c.d"},
    {"{'changes':[{'account':1,'amount':5},{'account':1234,'amount':-5}]}",
     "changes.account"},
    {"{'changes':[{'account':1,'amount':5},{'account':1234,'amount':-5}]}",
     "changes.amount"},
    {"{'a':[{'b':{'c':1}},{'b':{'c':2}}]}", "a.b"},
    {"{'a':[{'b':{'c':1}},{'b':[{'c':2}]}]}", "a.b.c"},
    /* numeric segments */
    {"{'a':[1,2]}", "a.0"},
    {"{'a':[1,2]}", "a.1"},
    {"{'a':[1,2]}", "a.2"},
    {"{'a':{'0':1}}", "a.0"},
    {"{'a':[{'b':1}]}", "a.0.b"},
    {"{'a':[{'b':2},{'b':1}]}", "a.0.b"},
    {"{'a':[{'b':1},{'b':2}]}", "a.1.b"},
    {"{'a':[[1,2],3]}", "a.0"},
    {"{'a':[[1,2]]}", "a.0"},
    {"{'a':[[1,2]]}", "a.0.1"},
    {"{'a':[[1,2]]}", "a.0.0"},
    {"{'a':[[1,2]]}", "a.0.5"},
    {"{'a':[[[1]]]}", "a.0.0"},
    {"{'a':[[[1]]]}", "a.0.0.0"},
    {"{'a':[1]}", "a.01"},
    {"{'a':{'01':1}}", "a.01"},
    {"{'a':[{'0':1}]}", "a.0"},
    {"{'a':[{'0':1},{'0':2}]}", "a.0"},
    {"{'a':[{'0':1},{'0':2}]}", "a.1"},
    {"{'a':[{'b':[1]},{'b':[2]}]}", "a.b.0"},
    {"{'a':[{'b':[1]},{'b':[2]}]}", "a.b.1"},
    {"{'a':[]}", "a.0"},
    {"{'a':[5]}", "a.0"},
    {"{'a':[1]}", "a.5"},
    {"{'a':'xyz'}", "a.0"},
    {"{'a':[[1,2]]}", "a.0.b"},
    {"{'a':['a','b','c','d','e','f','g','h','i','j','k']}", "a.10"},
    {"{'a':[{'b':[[1,2],[3]]}]}", "a.b.0"},
    {"{'a':[{'b':[[1,2],[3]]}]}", "a.b.0.1"},
    {"{'a':[[{'b':1}],[{'b':2}]]}", "a.0.b"},
    {"{'a':[[{'b':1}],[{'b':2}]]}", "a.1.0.b"},
    {"{'a':[{'b':[]},{'b':[[]]}]}", "a.b"},
    {"{'a':[{'b':[]},{'b':[[]]}]}", "a.b.0"},
    {"{'a':{'b':[{'c':[]}]}}", "a.b.c"},
    {"{'a':[1,[2,{'b':3}],{'b':[4,{'c':5}]}]}", "a.b"},
    {"{'a':[1,[2,{'b':3}],{'b':[4,{'c':5}]}]}", "a.b.c"},
    {"{'a':[1,[2,{'b':3}],{'b':[4,{'c':5}]}]}", "a.1.1.b"},
    {"{'a':[1,[2,{'b':3}],{'b':[4,{'c':5}]}]}", "a.2.b.1.c"},
    {"{'a':[{'1':'x'},[0,'y']]}", "a.1"},
    {"{'a':[{'x':[{'y':[{'z':1}]}]}]}", "a.x.y.z"},
    {"{'a':[{'x':[{'y':[{'z':1}]}]}]}", "a.0.x.0.y.0.z"},
    {"{'a':[{'x':[{'y':[{'z':1}]}]}]}", "a.x.0.y"},
    /* values of every JSON type at the end */
    {"{'a':[true,false,null,'s',1.5,-0.0,{},[]]}", "a"},
    {"{'a':[{'b':true},{'b':false},{'b':null},{'b':'s'},{'b':1.5}]}", "a.b"},
    {"{'a':9223372036854775807,'b':-9223372036854775808}", "b"},
    {"{'a':{'b':2147483648}}", "a.b"},
    {"{'a':[{'b':1e300}]}", "a.b"},
    /* long and odd segments */
    {"{'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa':{'b':1}}",
     "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.b"},
    {"{'a':[1,2,3]}", "a.999999999999999999"},
    {"{'a':[1,2,3]}", "a.9999999999999999999"},
    {"{'a':{'b ':1,'b':2}}", "a.b"},
    {"{'\xc3\xa9':{'\xe2\x82\xac':[1]}}", "\xc3\xa9.\xe2\x82\xac"},
    {"[1,{'a':2}]", "0"},
    {"[1,{'a':2}]", "1.a"},
    {"[[{'a':1}]]", "0.a"},
    {"{'x':{'y':'z','w':1}}", "x.y"},
    {"{'x':{'y':'z','w':1}}", "x.w"},
};

#define NROWS (sizeof rows / sizeof rows[0])

static void test_rows(void) {
  size_t walks = 0, skipped = 0;
  char why[1024];
  for (size_t i = 0; i < NROWS; i++) {
    json_t *doc = Q(rows[i].doc);
    for (int m = DTX__LEAF_WHOLE; m <= DTX__LEAF_ELEMS; m++) {
      walks++;
      CHECKF(bdiff_walk(doc, rows[i].path, m, why, sizeof why),
             "row %zu %s: %s", i, rows[i].doc, why);
    }
    int g = bdiff_get(doc, rows[i].path, why, sizeof why);
    CHECKF(g, "row %zu %s: %s", i, rows[i].doc, why);
    skipped += g == 2;
    json_decref(doc);
  }
  printf("  table: %zu rows, %zu walks through both engines; %zu gets "
         "skipped (array root: dtx__path_get enters objects only)\n",
         NROWS, walks, skipped);
}

/* Every document against every path of the table. */
static void test_cross(void) {
  size_t walks = 0, bad = 0, skipped = 0;
  char why[1024];
  for (size_t i = 0; i < NROWS; i++) {
    json_t *doc = Q(rows[i].doc);
    for (size_t p = 0; p < NROWS; p++) {
      if (p > 0 && strcmp(rows[p].path, rows[p - 1].path) == 0)
        continue;
      for (int m = DTX__LEAF_WHOLE; m <= DTX__LEAF_ELEMS; m++) {
        walks++;
        if (!bdiff_walk(doc, rows[p].path, m, why, sizeof why) && bad++ < 20)
          CHECKF(0, "doc %zu %s: %s", i, rows[i].doc, why);
      }
      int g = bdiff_get(doc, rows[p].path, why, sizeof why);
      walks += g != 2;
      skipped += g == 2;
      if (!g && bad++ < 20)
        CHECKF(0, "doc %zu %s: %s", i, rows[i].doc, why);
    }
    json_decref(doc);
  }
  CHECK(bad == 0);
  printf("  cross: %zu walks and gets through both engines; %zu gets skipped "
         "(array root)\n", walks, skipped);
}

/* dtx__bpath_get's own edges: the root, a trailing dot, a segment of 255
 * and 256 bytes, arrays not entered. */
static void test_get(void) {
  char seg[300], path[700], doc[800];
  char why[512];
  for (size_t n = 254; n <= 257; n++) {
    memset(seg, 'k', n);
    seg[n] = '\0';
    snprintf(path, sizeof path, "%s.x", seg);
    snprintf(doc, sizeof doc, "{\"%s\":{\"x\":1}}", seg);
    json_t *d = J(doc);
    CHECKF(bdiff_get(d, path, why, sizeof why), "%zu: %s", n, why);
    json_decref(d);
  }
  static const char *paths[] = {"", "a.", "a..b", ".", "a.b.", "a.0"};
  json_t *d = Q("{'a':{'':{'b':1},'b':[1]},'':2}");
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    CHECKF(bdiff_get(d, paths[i], why, sizeof why), "'%s': %s", paths[i], why);
  json_decref(d);
  bson_t b;
  REQUIRE(bdiff_bson("{\"a\":{\"b\":[1]}}", &b) == 0);
  dtx__bval_t v = dtx__bpath_get(bson_get_data(&b), b.len, "");
  CHECK(v.type == BSON_TYPE_DOCUMENT && v.data == bson_get_data(&b));
  v = dtx__bpath_get(bson_get_data(&b), b.len, "a.b.0");
  CHECK(v.type == BSON_TYPE_EOD);
  v = dtx__bpath_get(bson_get_data(&b), b.len, "a.b");
  CHECK(v.type == BSON_TYPE_ARRAY);
  bson_destroy(&b);
}

/* ---- what only BSON can say -------------------------------------------------- */

/* The visits as text: each value's relaxed Extended JSON ('-' for
 * missing), "*" after an empty leaf, "@k" for *pos when an array was
 * crossed; joined by spaces. */
typedef struct show {
  char buf[1024];
  size_t *pos;
} show_t;

static int show_visit(void *ctx, const dtx__bval_t *v, int empty) {
  show_t *s = ctx;
  char *t = v ? bdiff_show(v) : strdup("-");
  size_t n = strlen(s->buf);
  snprintf(s->buf + n, sizeof s->buf - n, "%s%s%s", n ? " " : "", t,
           empty ? "*" : "");
  n = strlen(s->buf);
  if (*s->pos != SIZE_MAX)
    snprintf(s->buf + n, sizeof s->buf - n, "@%zu", *s->pos);
  free(t);
  return 0;
}

typedef struct brow {
  const char *ejson; /* canonical or relaxed Extended JSON, libbson's reader */
  const char *path;
  int mode;
  const char *want;
} brow_t;

static const brow_t brows[] = {
    {"{\"a\":{\"$numberLong\":\"5\"}}", "a", 0, "5"},
    {"{\"a\":{\"$numberDecimal\":\"1.50\"}}", "a", 0,
     "{\"$numberDecimal\":\"1.50\"}"},
    {"{\"a\":{\"$minKey\":1}}", "a.b", 0, "-"},
    {"{\"a\":{\"$binary\":{\"base64\":\"AAE=\",\"subType\":\"00\"}}}", "a.0", 0,
     "-"},
    {"{\"a\":{\"$regularExpression\":{\"pattern\":\"x\",\"options\":\"\"}}}",
     "a.x", 0, "-"},
    {"{\"a\":{\"$date\":{\"$numberLong\":\"0\"}}}", "a", 0,
     "{\"$date\":\"1970-01-01T00:00:00Z\"}"},
    {"{\"a\":[{\"$maxKey\":1},{\"b\":{\"$oid\":\"000000000000000000000001\"}}]}",
     "a.b", 0, "-@0 {\"$oid\":\"000000000000000000000001\"}@1"},
    {"{\"a\":[{\"$timestamp\":{\"t\":1,\"i\":2}},{\"$numberDouble\":\"NaN\"}]}",
     "a", 1,
     "{\"$timestamp\":{\"t\":1,\"i\":2}}@0 {\"$numberDouble\":\"NaN\"}@1 "
     "[{\"$timestamp\":{\"t\":1,\"i\":2}},{\"$numberDouble\":\"NaN\"}]"},
    {"{\"a\":[{\"$numberLong\":\"1\"},{\"$numberDecimal\":\"2\"}]}", "a.1", 0,
     "{\"$numberDecimal\":\"2\"}@1"},
    {"{\"a\":[{\"$symbol\":\"s\"},{\"$code\":\"c\"}]}", "a.b", 0, "-@0 -@1"},
    {"{\"a\":{\"$undefined\":true}}", "a", 2, "{\"$undefined\":true}"},
    /* A code-with-scope's scope is not a document the path enters. */
    {"{\"a\":{\"$code\":\"c\",\"$scope\":{\"x\":1}}}", "a.x", 0, "-"},
    /* An array whose keys are not "0", "1"... (legal BSON from other
     * writers) is still addressed by position, as the json_t engine
     * sees it. */
};

static void test_bson_only(void) {
  for (size_t i = 0; i < sizeof brows / sizeof brows[0]; i++) {
    bson_error_t err;
    bson_t b;
    if (!bson_init_from_json(&b, brows[i].ejson, -1, &err)) {
      CHECKF(0, "row %zu: %s", i, err.message);
      continue;
    }
    size_t pos;
    show_t s = {"", &pos};
    int r = dtx__bpath_walk(brows[i].path, bson_get_data(&b), b.len,
                            brows[i].mode, show_visit, &s, &pos);
    CHECK(r == 0);
    CHECKF(strcmp(s.buf, brows[i].want) == 0, "row %zu: got %s want %s", i,
           s.buf, brows[i].want);
    bson_destroy(&b);
  }
  /* Keys "5", "x": position 0 and 1 all the same. */
  bson_t b = BSON_INITIALIZER, arr;
  bson_append_array_begin(&b, "a", -1, &arr);
  bson_append_int32(&arr, "5", -1, 10);
  bson_append_int32(&arr, "x", -1, 11);
  bson_append_array_end(&b, &arr);
  size_t pos;
  show_t s = {"", &pos};
  dtx__bpath_walk("a.1", bson_get_data(&b), b.len, 0, show_visit, &s, &pos);
  CHECKF(strcmp(s.buf, "11@1") == 0, "got %s", s.buf);
  /* pos may be NULL */
  CHECK(dtx__bpath_walk("a.1", bson_get_data(&b), b.len, 0, show_visit,
                        &(show_t){"", &pos}, NULL) == 0);
  bson_destroy(&b);
}

int main(void) {
  TEST_RUN(test_rows);
  TEST_RUN(test_cross);
  TEST_RUN(test_get);
  TEST_RUN(test_bson_only);
  return TEST_DONE();
}
