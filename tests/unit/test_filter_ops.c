/* test_filter_ops.c -- the query operators and semantics of docs/mongodb.md,
 * table by table from MongoDB's manual (each section names its page):
 * null and missing through arrays on dotted paths, $type, $mod, $regex with
 * $options, the positional match position, and the $regex limit that makes
 * a pathological pattern an error instead of a hang.  Rows are (filter,
 * document, expected match); JSON uses ' for ". */
#include "doc/doc.h"
#include "testlib.h"
#include "bfilterdiff.h"

#include <stdint.h>
#include <string.h>
#include <time.h>

typedef dtx_t_fcase_t fcase_t;

#define RUN(t) dtx_t_filter_table(#t, t, sizeof t / sizeof t[0])

/* ---- null and missing through arrays ----------------------------------
 * Manual: "Query for Null or Missing Fields"; MongoDB 9.0's
 * jstests/core/query/null_query_semantics.js: {"a.b": null} matches a
 * non-object a, a subobject without b, and an array with an element that
 * cannot hold b (a scalar, a nested array) or an object without it; the
 * negations ($ne, $nin) match exactly the others.  $in with null, and $or
 * and $nor around the clause, follow. */
static const fcase_t null_array_cases[] = {
    {"{'a.b':null}", "{'a':[1,2]}", 1},
    {"{'a.b':null}", "{'a':[]}", 1},
    {"{'a.b':null}", "{'a':[[]]}", 1},
    {"{'a.b':null}", "{'a':[null,null]}", 1},
    {"{'a.b':null}", "{'a':[1,'string',4]}", 1},
    {"{'a.b':null}", "{'a':[{'b':3},{}]}", 1},
    {"{'a.b':null}", "{'a':[{'b':null},{'b':3}]}", 1},
    {"{'a.b':null}", "{'a':[{'b':1},{'b':3},{'b':'s'}]}", 0},
    {"{'a.b':null}", "{'a':{'b':'hi'}}", 0},
    {"{'a.b':null}", "{'a':4}", 1},
    {"{'a.b':{'$eq':null}}", "{'a':[]}", 1},
    {"{'a.b':{'$ne':null}}", "{'a':[1,2]}", 0},
    {"{'a.b':{'$ne':null}}", "{'a':[]}", 0},
    {"{'a.b':{'$ne':null}}", "{'a':[[]]}", 0},
    {"{'a.b':{'$ne':null}}", "{'a':[{'b':1},{'b':3}]}", 1},
    {"{'a.b':{'$ne':null}}", "{'a':{'b':'hi'}}", 1},
    {"{'a.b':{'$in':[null,75]}}", "{'a':[1,2]}", 1},
    {"{'a.b':{'$in':[null,75]}}", "{'a':[]}", 1},
    {"{'a.b':{'$in':[null,75]}}", "{'a':[[]]}", 1},
    {"{'a.b':{'$in':[null,75]}}", "{'a':[{'b':1}]}", 0},
    {"{'a.b':{'$in':[null,75]}}", "{'a':[{'b':75}]}", 1},
    {"{'a.b':{'$nin':[null,75]}}", "{'a':[1,2]}", 0},
    {"{'a.b':{'$nin':[null,75]}}", "{'a':[]}", 0},
    {"{'a.b':{'$nin':[null,75]}}", "{'a':[[]]}", 0},
    {"{'a.b':{'$nin':[null,75]}}", "{'a':[{'b':1},{'b':3}]}", 1},
    {"{'$or':[{'a.b':null},{'a.b':75}]}", "{'a':[1,2]}", 1},
    {"{'$or':[{'a.b':null},{'a.b':75}]}", "{'a':[]}", 1},
    {"{'$or':[{'a.b':null},{'a.b':75}]}", "{'a':[{'b':1}]}", 0},
    {"{'$nor':[{'a.b':null}]}", "{'a':[1,2]}", 0},
    {"{'$nor':[{'a.b':null}]}", "{'a':[]}", 0},
    {"{'$nor':[{'a.b':null}]}", "{'a':[[]]}", 0},
    {"{'$nor':[{'a.b':null}]}", "{'a':[{'b':1}]}", 1},
    {"{'a.b':{'$exists':false}}", "{'a':[1,2]}", 1},
    {"{'a.b':{'$exists':true}}", "{'a':[1,2]}", 0},
    {"{'a.b.c':null}", "{'a':[{'b':[1]}]}", 1},
    {"{'a.b.c':null}", "{'a':[{'b':[{'c':1}]}]}", 0},
    /* $elemMatch only looks at array elements (objects, or arrays as
     * documents) */
    {"{'a':{'$elemMatch':{'b':null}}}", "{'a':[[]]}", 1},
    {"{'a':{'$elemMatch':{'b':null}}}", "{'a':[1,2]}", 0},
    {"{'a':{'$elemMatch':{'b':{'$ne':null}}}}", "{'a':[{'b':3},{}]}", 1},
    /* a numeric segment keeps its positional meaning */
    {"{'a.0':null}", "{'a':[5,6]}", 0},
    {"{'a.1':5}", "{'a':[4,5]}", 1},
};

/* ---- $type ----------------------------------------------------------------
 * Manual: "$type" (query operator): aliases and numbers, an array of them,
 * "number" for every numeric type, and arrays match "array" and by their
 * elements' types.  A JSON integer is "int" within 32 bits, else "long";
 * types JSON cannot hold match nothing. */
static const fcase_t type_cases[] = {
    {"{'a':{'$type':'string'}}", "{'a':'x'}", 1},
    {"{'a':{'$type':2}}", "{'a':'x'}", 1},
    {"{'a':{'$type':2.0}}", "{'a':'x'}", 1},
    {"{'a':{'$type':'string'}}", "{'a':1}", 0},
    {"{'a':{'$type':'string'}}", "{}", 0},
    {"{'a':{'$type':'double'}}", "{'a':1.5}", 1},
    {"{'a':{'$type':1}}", "{'a':1.0}", 1},
    {"{'a':{'$type':'double'}}", "{'a':1}", 0},
    {"{'a':{'$type':'int'}}", "{'a':1}", 1},
    {"{'a':{'$type':16}}", "{'a':-2147483648}", 1},
    {"{'a':{'$type':'int'}}", "{'a':2147483648}", 0},
    {"{'a':{'$type':'long'}}", "{'a':2147483648}", 1},
    {"{'a':{'$type':18}}", "{'a':5}", 0},
    {"{'a':{'$type':'number'}}", "{'a':5}", 1},
    {"{'a':{'$type':'number'}}", "{'a':5.5}", 1},
    {"{'a':{'$type':'number'}}", "{'a':'5'}", 0},
    {"{'a':{'$type':'bool'}}", "{'a':false}", 1},
    {"{'a':{'$type':8}}", "{'a':true}", 1},
    {"{'a':{'$type':'null'}}", "{'a':null}", 1},
    {"{'a':{'$type':10}}", "{}", 0},
    {"{'a':{'$type':'object'}}", "{'a':{}}", 1},
    {"{'a':{'$type':3}}", "{'a':[]}", 0},
    {"{'a':{'$type':'array'}}", "{'a':[]}", 1},
    {"{'a':{'$type':4}}", "{'a':[1]}", 1},
    {"{'a':{'$type':'array'}}", "{'a':{'b':[1]}}", 0},
    {"{'a':{'$type':'string'}}", "{'a':[1,'x']}", 1},
    {"{'a':{'$type':'string'}}", "{'a':[1,2]}", 0},
    {"{'a.b':{'$type':'int'}}", "{'a':[{'b':'x'},{'b':2}]}", 1},
    {"{'a':{'$type':['string','bool']}}", "{'a':true}", 1},
    {"{'a':{'$type':['string',16]}}", "{'a':7}", 1},
    {"{'a':{'$type':['double']}}", "{'a':7}", 0},
    {"{'a':{'$type':'date'}}", "{'a':1700000000000}", 0},
    {"{'a':{'$type':'objectId'}}", "{'a':'5f1d7a8b9c0d1e2f3a4b5c6d'}", 0},
    {"{'a':{'$type':'minKey'}}", "{'a':null}", 0},
    {"{'a':{'$type':127}}", "{'a':1}", 0},
    {"{'a':{'$not':{'$type':'string'}}}", "{'a':1}", 1},
    {"{'a':{'$not':{'$type':'string'}}}", "{}", 1},
};

/* ---- $mod -----------------------------------------------------------------
 * Manual: "$mod": [divisor, remainder], doubles truncated toward zero
 * (5.1+), the remainder taking the dividend's sign as in C. */
static const fcase_t mod_cases[] = {
    {"{'a':{'$mod':[4,0]}}", "{'a':8}", 1},
    {"{'a':{'$mod':[4,0]}}", "{'a':10}", 0},
    {"{'a':{'$mod':[4,2]}}", "{'a':10}", 1},
    {"{'a':{'$mod':[4,0]}}", "{'a':8.9}", 1},
    {"{'a':{'$mod':[4,0]}}", "{'a':-8.9}", 1},
    {"{'a':{'$mod':[4.5,0]}}", "{'a':8}", 1},
    {"{'a':{'$mod':[4,-2]}}", "{'a':-10}", 1},
    {"{'a':{'$mod':[4,2]}}", "{'a':-10}", 0},
    {"{'a':{'$mod':[-4,2]}}", "{'a':10}", 1},
    {"{'a':{'$mod':[-1,0]}}", "{'a':-9223372036854775808}", 1},
    {"{'a':{'$mod':[2,1]}}", "{'a':9223372036854775807}", 1},
    {"{'a':{'$mod':[2,0]}}", "{'a':1e300}", 0},
    {"{'a':{'$mod':[2,0]}}", "{'a':'4'}", 0},
    {"{'a':{'$mod':[2,0]}}", "{}", 0},
    {"{'a':{'$mod':[2,0]}}", "{'a':null}", 0},
    {"{'a':{'$mod':[3,1]}}", "{'a':[2,4]}", 1},
    {"{'a':{'$mod':[3,1]}}", "{'a':[2,5]}", 0},
    {"{'a':{'$not':{'$mod':[2,0]}}}", "{'a':3}", 1},
};

/* ---- $regex and $options ------------------------------------------------
 * Manual: "$regex": PCRE, options i (case), m (^ and $ per line), s (. also
 * matches newline), x (ignore whitespace and # comments); strings only;
 * arrays match by element. */
static const fcase_t regex_cases[] = {
    {"{'a':{'$regex':'^ab'}}", "{'a':'abc'}", 1},
    {"{'a':{'$regex':'^ab'}}", "{'a':'cab'}", 0},
    {"{'a':{'$regex':'ab'}}", "{'a':'cab'}", 1},
    {"{'a':{'$regex':'^AB'}}", "{'a':'abc'}", 0},
    {"{'a':{'$regex':'^AB','$options':'i'}}", "{'a':'abc'}", 1},
    {"{'a':{'$options':'i','$regex':'^AB'}}", "{'a':'abc'}", 1},
    {"{'a':{'$regex':'^b'}}", "{'a':'a\\nb'}", 0},
    {"{'a':{'$regex':'^b','$options':'m'}}", "{'a':'a\\nb'}", 1},
    {"{'a':{'$regex':'a.b'}}", "{'a':'a\\nb'}", 0},
    {"{'a':{'$regex':'a.b','$options':'s'}}", "{'a':'a\\nb'}", 1},
    {"{'a':{'$regex':'a b # comment','$options':'x'}}", "{'a':'ab'}", 1},
    {"{'a':{'$regex':'a b'}}", "{'a':'ab'}", 0},
    {"{'a':{'$regex':'^\\u00e9t\\u00e9$'}}", "{'a':'\\u00e9t\\u00e9'}", 1},
    {"{'a':{'$regex':'^.$'}}", "{'a':'\\u00e9'}", 1}, /* UTF-8 mode */
    {"{'a':{'$regex':'x'}}", "{'a':1}", 0},
    {"{'a':{'$regex':'1'}}", "{'a':1}", 0},
    {"{'a':{'$regex':'x'}}", "{}", 0},
    {"{'a':{'$regex':'x'}}", "{'a':null}", 0},
    {"{'a':{'$regex':'^x'}}", "{'a':['y','xz']}", 1},
    {"{'a.b':{'$regex':'^x'}}", "{'a':[{'b':'y'},{'b':'xa'}]}", 1},
    {"{'a':{'$regex':''}}", "{'a':''}", 1},
    {"{'a':{'$regex':'^x','$options':'u'}}", "{'a':'x'}", 1},
    {"{'a':{'$not':{'$regex':'^x'}}}", "{'a':'y'}", 1},
    {"{'a':{'$not':{'$regex':'^x'}}}", "{'a':'xy'}", 0},
    {"{'a':{'$not':{'$regex':'^x'}}}", "{}", 1},
    {"{'a':{'$regex':'^x','$ne':'xx'}}", "{'a':'xy'}", 1},
    {"{'a':{'$regex':'^x','$ne':'xx'}}", "{'a':'xx'}", 0},
    {"{'a':{'$elemMatch':{'$regex':'^x'}}}", "{'a':['y','x']}", 1},
};

/* ---- the position the positional $ uses ---------------------------------
 * Manual: "$ (update)" and "$ (projection)": the first element of the
 * array the query matched; with $elemMatch, the element it matched. */
static void test_match_pos(void) {
  static const struct {
    const char *filter, *doc;
    long pos; /* -1: none */
  } cases[] = {
      {"{'grades':80}", "{'grades':[70,80,90]}", 1},
      {"{'grades':{'$gte':85}}", "{'grades':[70,80,90,95]}", 2},
      {"{'g.s':2}", "{'g':[{'s':1},{'s':2}]}", 1},
      {"{'g':{'$elemMatch':{'s':{'$gt':1},'t':1}}}",
       "{'g':[{'s':2,'t':0},{'s':3,'t':1}]}", 1},
      {"{'_id':1,'g.s':2}", "{'_id':1,'g':[{'s':2}]}", 0},
      {"{'a':1}", "{'a':1}", -1},
      {"{'a':[1,2]}", "{'a':[1,2]}", -1},
      {"{'a':{'$ne':5}}", "{'a':[1,2]}", -1},
      {"{'$or':[{'x':1},{'a':2}]}", "{'a':[1,2]}", 1},
      {"{'a.b':{'$in':[7]}}", "{'a':[{'b':[1,7]},{'b':7}]}", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *spec = JQNEW(cases[i].filter), *doc = JQNEW(cases[i].doc);
    dtx__filter_t *f = NULL;
    size_t pos = 0;
    REQUIRE(dtx__filter_compile(spec, &f) == 0);
    CHECKF(dtx__filter_match_pos(f, doc, &pos) == 1, "%s", cases[i].filter);
    long got = pos == SIZE_MAX ? -1 : (long)pos;
    CHECKF(got == cases[i].pos, "%s on %s: pos %ld want %ld",
           cases[i].filter, cases[i].doc, got, cases[i].pos);
    dtx__filter_free(f);
    dtx_t_bfilter_row("match_pos", i, spec, doc); /* same position */
    json_decref(spec);
    json_decref(doc);
  }
}

/* A pattern that backtracks exponentially ends with an error quickly,
 * and the filter then answers "no" to everything until checked. */
static void test_regex_limit(void) {
  json_t *spec = JQNEW("{'a':{'$regex':'^(a|aa)+$'}}");
  json_t *doc = JQNEW("{'a':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab'}");
  json_t *ok = JQNEW("{'a':'aaaa'}");
  dtx__filter_t *f = NULL;
  REQUIRE(dtx__filter_compile(spec, &f) == 0);
  CHECK(dtx__filter_match(f, ok) == 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CHECK(dtx__filter_match(f, doc) == 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) +
             (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  CHECKF(s < 5, "a pathological pattern took %.1f s", s);
  CHECK_RC(dtx__filter_error(f), DTX_EBADQUERY);
  CHECK(strstr(dtx_errdetail(), "limit") != NULL);
  CHECK(dtx__filter_match(f, ok) == 0); /* poisoned: never a false "yes" */
  dtx__filter_free(f);
  /* The BSON engine meets the same limit: the same error, no match. */
  dtx_t_bfilter_row("regex_limit", 0, spec, ok);
  dtx_t_bfilter_row("regex_limit", 1, spec, doc);
  json_decref(spec);
  json_decref(doc);
  json_decref(ok);
}

/* ---- anchored prefixes for index ranges ------------------------------------
 * Manual: "$regex: Index Use": only a case-sensitive prefix expression
 * (^ or \A, no i/m/x) can use an index as a range. */
static void test_regex_prefix(void) {
  static const struct {
    const char *pat, *opts, *prefix;
  } cases[] = {
      {"^abc", "", "abc"},     {"\\Aabc", "", "abc"},
      {"^abc.*", "", "abc"},   {"^ab?c", "", "a"},
      {"^ab*", "", "a"},       {"^ab+", "", "ab"},
      {"^ab{2}", "", "a"},     {"^a\\.b", "", "a"},
      {"abc", "", NULL},       {"^abc", "i", NULL},
      {"^abc", "m", NULL},     {"^abc", "x", NULL},
      {"^abc", "s", "abc"},    {"^a|^b", "", NULL},
      {"^(ab)", "", NULL},     {"^", "", NULL},
      {"^[ab]", "", NULL},
      /* a quantifier takes the whole UTF-8 character (fuzz_regex found
       * "\\Aé?" giving the lone lead byte of the é as a prefix) */
      {"\\A\xc3\xa9?", "", NULL},  {"^a\xc3\xa9?", "", "a"},
      {"^a\xc3\xa9*", "", "a"},    {"^\xe2\x82\xac\xc3\xa9{2}", "", "\xe2\x82\xac"},
      {"^a\xc3\xa9+", "", "a\xc3\xa9"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *p = NULL;
    size_t n = 9;
    CHECK_RC(dtx__regex_prefix(cases[i].pat, strlen(cases[i].pat),
                               cases[i].opts, &p, &n),
             0);
    if (!cases[i].prefix)
      CHECKF(p == NULL && n == 0, "%s/%s gave '%s'", cases[i].pat,
             cases[i].opts, p ? p : "");
    else
      CHECKF(p && !strcmp(p, cases[i].prefix), "%s/%s gave '%s' want '%s'",
             cases[i].pat, cases[i].opts, p ? p : "(none)",
             cases[i].prefix);
    free(p);
  }
}

static void test_tables(void) {
  RUN(null_array_cases);
  RUN(type_cases);
  RUN(mod_cases);
  RUN(regex_cases);
}

int main(void) {
  TEST_RUN(test_tables);
  TEST_RUN(test_match_pos);
  TEST_RUN(test_regex_limit);
  TEST_RUN(test_regex_prefix);
  return TEST_DONE();
}
