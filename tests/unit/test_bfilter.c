/* test_bfilter.c -- the BSON filter matcher on what only BSON can say.
 *
 * Every row of test_filter.c and test_filter_ops.c already runs through
 * both engines (tests/common/bfilterdiff.c); this table is for the types
 * JSON lacks: the four number types compared exactly (and NaN), $type's
 * every alias and number (an integer by value, whatever its width),
 * Date/ObjectId/Timestamp/binData in their own brackets, MinKey/MaxKey,
 * regex operands and stored regex values, $mod with every numeric type.  Rows are (filter, document, expected match)
 * in Extended JSON v2 (bejson's reader, dtx__ejson_read), with ' for
 * ".  Semantics from MongoDB's manual ("Comparison/Sort Order", "$type",
 * "$mod", "$regex", "$in") and its matcher's documented behaviour. */
#include "testlib.h"

#include "doc/bdoc.h"
#include "doc/bfilter.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

typedef struct row {
  const char *filter, *doc;
  int want;
} row_t;

/* Extended JSON with ' for " into a new bson_t (dtx__ejson_read);
 * aborts on bad input (tables are trusted). */
static bson_t *X(const char *text) {
  char *s = strdup(text);
  if (!s)
    abort();
  for (char *p = s; *p; p++)
    if (*p == '\'')
      *p = '"';
  bson_t *b = bson_new();
  if (dtx__ejson_read(s, strlen(s), b)) {
    fprintf(stderr, "test EJSON error in %s: %s\n", text, dtx_errdetail());
    abort();
  }
  free(s);
  return b;
}

#define RE(p, o) "{'$regularExpression':{'pattern':'" p "','options':'" o "'}}"
#define DEC(x) "{'$numberDecimal':'" x "'}"
#define LONG(x) "{'$numberLong':'" x "'}"
#define INT(x) "{'$numberInt':'" x "'}"
#define DBL(x) "{'$numberDouble':'" x "'}"
#define DATE(x) "{'$date':'" x "'}"
#define OID(x) "{'$oid':'" x "'}"
#define TS(t, i) "{'$timestamp':{'t':" #t ",'i':" #i "}}"
#define MINK "{'$minKey':1}"
#define MAXK "{'$maxKey':1}"

/* ---- numbers: four types, one value line ------------------------------ */
static const row_t number_rows[] = {
    {"{'a':" INT("1") "}", "{'a':" LONG("1") "}", 1},
    {"{'a':1}", "{'a':" DEC("1.00") "}", 1},
    {"{'a':" DEC("1.0") "}", "{'a':" DBL("1.0") "}", 1},
    {"{'a':" DEC("0.1") "}", "{'a':0.1}", 0}, /* the double is not 0.1 */
    {"{'a':" DEC("0.5") "}", "{'a':0.5}", 1},
    {"{'a':{'$gt':" LONG("9223372036854775806") "}}",
     "{'a':" DEC("9223372036854775807") "}", 1},
    {"{'a':{'$gt':" LONG("9223372036854775807") "}}",
     "{'a':" DEC("9223372036854775807.5") "}", 1},
    {"{'a':{'$lt':" DBL("9223372036854775807") "}}",
     "{'a':" LONG("9223372036854775807") "}", 1}, /* 2^63 as a double */
    {"{'a':" LONG("9007199254740993") "}", "{'a':" DBL("9007199254740992") "}",
     0},
    {"{'a':" DEC("9007199254740993") "}", "{'a':" LONG("9007199254740993") "}",
     1},
    {"{'a':{'$in':[" DEC("2.0") "]}}", "{'a':" LONG("2") "}", 1},
    {"{'a':{'$in':[" DEC("2.5") ",7]}}", "{'a':2}", 0},
    {"{'a':{'$gte':" DEC("-0") "}}", "{'a':0}", 1},
    {"{'a':" DBL("-0.0") "}", "{'a':" DEC("0E+10") "}", 1},
    /* NaN equals NaN and nothing else, and is never $lt/$gt */
    {"{'a':" DBL("NaN") "}", "{'a':" DBL("NaN") "}", 1},
    {"{'a':" DBL("NaN") "}", "{'a':" DEC("NaN") "}", 1},
    {"{'a':" DBL("NaN") "}", "{'a':1}", 0},
    {"{'a':{'$gt':" DBL("NaN") "}}", "{'a':1}", 0},
    {"{'a':{'$lt':" DBL("NaN") "}}", "{'a':1}", 0},
    {"{'a':{'$lt':1}}", "{'a':" DBL("NaN") "}", 0},
    {"{'a':{'$lt':" DBL("NaN") "}}", "{'a':" DBL("NaN") "}", 0},
    {"{'a':{'$gte':" DBL("NaN") "}}", "{'a':" DBL("NaN") "}", 1},
    {"{'a':{'$lte':" DBL("NaN") "}}", "{'a':" DEC("NaN") "}", 1},
    {"{'a':{'$lte':" DBL("Infinity") "}}", "{'a':" DBL("NaN") "}", 0},
    {"{'a':{'$in':[" DBL("NaN") "]}}", "{'a':" DEC("NaN") "}", 1},
    {"{'a':{'$ne':" DBL("NaN") "}}", "{'a':1}", 1},
    /* infinities */
    {"{'a':{'$gt':1e308}}", "{'a':" DBL("Infinity") "}", 1},
    {"{'a':" DEC("Infinity") "}", "{'a':" DBL("Infinity") "}", 1},
    {"{'a':{'$lt':" DEC("-Infinity") "}}", "{'a':-1e308}", 0},
    {"{'a':{'$gt':" DEC("1E+6000") "}}", "{'a':" DBL("Infinity") "}", 1},
    /* numbers are not strings, dates or booleans */
    {"{'a':{'$gte':0}}", "{'a':'1'}", 0},
    {"{'a':{'$gte':0}}", "{'a':" DATE("2020-01-01T00:00:00Z") "}", 0},
    {"{'a':" LONG("1") "}", "{'a':true}", 0},
};

/* ---- $type: bdoc.h's table of aliases and numbers ----------------------- */
/* (integers: int_types below) */
static const row_t type_rows[] = {
    {"{'a':{'$type':'double'}}", "{'a':" DBL("1") "}", 1},
    {"{'a':{'$type':'decimal'}}", "{'a':" DEC("1") "}", 1},
    {"{'a':{'$type':19}}", "{'a':" DEC("1") "}", 1},
    {"{'a':{'$type':'number'}}", "{'a':" DEC("1") "}", 1},
    {"{'a':{'$type':'number'}}", "{'a':" LONG("1") "}", 1},
    {"{'a':{'$type':'number'}}", "{'a':" DATE("2020-01-01T00:00:00Z") "}", 0},
    {"{'a':{'$type':'date'}}", "{'a':" DATE("2020-01-01T00:00:00Z") "}", 1},
    {"{'a':{'$type':9}}", "{'a':" DATE("2020-01-01T00:00:00Z") "}", 1},
    {"{'a':{'$type':'objectId'}}", "{'a':" OID("5f1d7a8b9c0d1e2f3a4b5c6d") "}",
     1},
    {"{'a':{'$type':7}}", "{'a':'5f1d7a8b9c0d1e2f3a4b5c6d'}", 0},
    {"{'a':{'$type':'timestamp'}}", "{'a':" TS(1, 2) "}", 1},
    {"{'a':{'$type':17}}", "{'a':" TS(1, 2) "}", 1},
    {"{'a':{'$type':'binData'}}",
     "{'a':{'$binary':{'base64':'AQI=','subType':'00'}}}", 1},
    {"{'a':{'$type':'regex'}}", "{'a':" RE("x", "") "}", 1},
    {"{'a':{'$type':11}}", "{'a':'x'}", 0},
    {"{'a':{'$type':'minKey'}}", "{'a':" MINK "}", 1},
    {"{'a':{'$type':-1}}", "{'a':" MINK "}", 1},
    {"{'a':{'$type':'maxKey'}}", "{'a':" MAXK "}", 1},
    {"{'a':{'$type':127}}", "{'a':" MAXK "}", 1},
    {"{'a':{'$type':127}}", "{'a':" MINK "}", 0},
    {"{'a':{'$type':'undefined'}}", "{'a':{'$undefined':true}}", 1},
    {"{'a':{'$type':'null'}}", "{'a':{'$undefined':true}}", 0},
    {"{'a':{'$type':'javascript'}}", "{'a':{'$code':'1'}}", 1},
    {"{'a':{'$type':'symbol'}}", "{'a':{'$symbol':'s'}}", 1},
    {"{'a':{'$type':'string'}}", "{'a':{'$symbol':'s'}}", 0},
    {"{'a':{'$type':" DEC("2") "}}", "{'a':'s'}", 1},
    {"{'a':{'$type':" LONG("16") "}}", "{'a':1}", 1},
    {"{'a':{'$type':2.0}}", "{'a':'s'}", 1},
    {"{'a':{'$type':['date','long']}}",
     "{'a':[" TS(1, 1) "," LONG("3000000000") "]}", 1},
    {"{'a':{'$type':['date','long']}}", "{'a':[" TS(1, 1) "," LONG("3") "]}",
     0},
    {"{'a':{'$type':'array'}}", "{'a':[" MINK "]}", 1},
};

/* ---- Date, ObjectId, Timestamp, binData: their own brackets ---------- */
static const row_t bracket_rows[] = {
    {"{'d':{'$gt':" DATE("2020-01-01T00:00:00Z") "}}",
     "{'d':" DATE("2021-01-01T00:00:00Z") "}", 1},
    {"{'d':{'$gt':" DATE("2020-01-01T00:00:00Z") "}}",
     "{'d':" DATE("2019-01-01T00:00:00Z") "}", 0},
    {"{'d':" DATE("2020-01-01T00:00:00Z") "}",
     "{'d':" DATE("2020-01-01T00:00:00Z") "}", 1},
    {"{'d':{'$lt':" DATE("1970-01-01T00:00:00Z") "}}",
     "{'d':{'$date':{'$numberLong':'-1'}}}", 1},
    {"{'d':1577836800000}", "{'d':" DATE("2020-01-01T00:00:00Z") "}", 0},
    {"{'d':{'$gt':0}}", "{'d':" DATE("2020-01-01T00:00:00Z") "}", 0},
    {"{'d':{'$lt':" DATE("2020-01-01T00:00:00Z") "}}", "{'d':5}", 0},
    {"{'d':{'$lt':" TS(0, 0) "}}", "{'d':" DATE("1960-01-01T00:00:00Z") "}",
     0},
    {"{'_id':" OID("5f1d7a8b9c0d1e2f3a4b5c6d") "}",
     "{'_id':" OID("5f1d7a8b9c0d1e2f3a4b5c6d") "}", 1},
    {"{'_id':" OID("5f1d7a8b9c0d1e2f3a4b5c6d") "}",
     "{'_id':'5f1d7a8b9c0d1e2f3a4b5c6d'}", 0},
    {"{'_id':{'$lt':" OID("5f1d7a8b9c0d1e2f3a4b5c6e") "}}",
     "{'_id':" OID("5f1d7a8b9c0d1e2f3a4b5c6d") "}", 1},
    {"{'_id':{'$in':[" OID("000000000000000000000001") ","
     OID("5f1d7a8b9c0d1e2f3a4b5c6d") "]}}",
     "{'_id':" OID("5f1d7a8b9c0d1e2f3a4b5c6d") "}", 1},
    {"{'t':{'$gt':" TS(1, 2) "}}", "{'t':" TS(1, 3) "}", 1},
    {"{'t':{'$gt':" TS(1, 2) "}}", "{'t':" TS(0, 9) "}", 0},
    {"{'t':{'$gt':" TS(1, 2) "}}", "{'t':" TS(2, 0) "}", 1},
    {"{'b':{'$binary':{'base64':'AQI=','subType':'00'}}}",
     "{'b':{'$binary':{'base64':'AQI=','subType':'00'}}}", 1},
    {"{'b':{'$binary':{'base64':'AQI=','subType':'00'}}}",
     "{'b':{'$binary':{'base64':'AQI=','subType':'80'}}}", 0},
    {"{'b':{'$gt':{'$binary':{'base64':'AQI=','subType':'00'}}}}",
     "{'b':{'$binary':{'base64':'AQ==','subType':'00'}}}", 0},
    {"{'b':{'$gt':{'$binary':{'base64':'AQI=','subType':'00'}}}}",
     "{'b':{'$binary':{'base64':'AQID','subType':'00'}}}", 1},
    {"{'d':{'$exists':" DEC("0") "}}", "{}", 1},
    {"{'d':{'$exists':" LONG("1") "}}", "{'d':null}", 1},
    {"{'a':{'$size':" DEC("2") "}}", "{'a':[1,2]}", 1},
    {"{'a':{'$size':" LONG("2") "}}", "{'a':[1]}", 0},
};

/* ---- MinKey and MaxKey ----------------------------------------------------- */
static const row_t extreme_rows[] = {
    {"{'a':{'$gt':" MINK "}}", "{'a':'x'}", 1},
    {"{'a':{'$gt':" MINK "}}", "{'a':null}", 1},
    {"{'a':{'$gt':" MINK "}}", "{}", 1},
    {"{'a':{'$gte':" MINK "}}", "{'a':" MINK "}", 1},
    {"{'a':{'$gt':" MINK "}}", "{'a':" MINK "}", 0},
    {"{'a':{'$lt':" MINK "}}", "{'a':1}", 0},
    {"{'a':{'$lt':" MAXK "}}", "{'a':" MAXK "}", 0},
    {"{'a':{'$lt':" MAXK "}}", "{'a':" TS(1, 1) "}", 1},
    {"{'a':{'$lte':" MAXK "}}", "{}", 1},
    {"{'a':{'$gt':" MAXK "}}", "{'a':1}", 0},
    {"{'a':" MINK "}", "{'a':" MINK "}", 1},
    {"{'a':" MINK "}", "{'a':null}", 0},
    {"{'a':" MINK "}", "{}", 0},
    {"{'a':{'$in':[" MAXK "]}}", "{'a':[1," MAXK "]}", 1},
    {"{'a':{'$ne':" MAXK "}}", "{'a':1}", 1},
    /* MongoDB 8.0: null equality no longer matches undefined */
    {"{'a':null}", "{'a':{'$undefined':true}}", 0},
    {"{'a':null}", "{'a':[1,{'$undefined':true}]}", 0},
    {"{'a':{'$in':[null,2]}}", "{'a':{'$undefined':true}}", 0},
    {"{'a':{'$in':[null,2]}}", "{}", 1},
    {"{'a':{'$ne':null}}", "{'a':{'$undefined':true}}", 1},
    {"{'a':{'$undefined':true}}", "{'a':{'$undefined':true}}", 1},
    {"{'a':{'$undefined':true}}", "{'a':null}", 0},
    {"{'a':{'$undefined':true}}", "{}", 0},
    {"{'a':{'$in':[{'$undefined':true}]}}", "{'a':{'$undefined':true}}", 1},
    {"{'a':{'$lte':null}}", "{'a':{'$undefined':true}}", 1},
};

/* ---- regexes: operands and stored values ----------------------------------- */
static const row_t regex_rows[] = {
    {"{'a':" RE("^x", "") "}", "{'a':'xy'}", 1},
    {"{'a':" RE("^x", "") "}", "{'a':'yx'}", 0},
    {"{'a':" RE("^x", "i") "}", "{'a':'XY'}", 1},
    {"{'a':" RE("^x", "") "}", "{'a':['b','xz']}", 1},
    {"{'a':" RE("^x", "") "}", "{'a':" RE("^x", "") "}", 1},
    {"{'a':" RE("^x", "") "}", "{'a':" RE("^x", "i") "}", 0},
    {"{'a':" RE("^x", "") "}", "{'a':" RE("^xy", "") "}", 0},
    {"{'a':" RE("^s", "") "}", "{'a':{'$symbol':'sx'}}", 1},
    {"{'a':" RE("1", "") "}", "{'a':1}", 0},
    {"{'a':{'$eq':" RE("^x", "") "}}", "{'a':'xy'}", 0},
    {"{'a':{'$eq':" RE("^x", "") "}}", "{'a':" RE("^x", "") "}", 1},
    {"{'a':{'$in':[" RE("^x", "") ",5]}}", "{'a':'xa'}", 1},
    {"{'a':{'$in':[" RE("^x", "") ",5]}}", "{'a':5}", 1},
    {"{'a':{'$in':[" RE("^x", "") ",5]}}", "{'a':'b'}", 0},
    {"{'a':{'$in':[" RE("^x", "") "]}}", "{'a':['b','xz']}", 1},
    {"{'a':{'$in':[" RE("^x", "") "]}}", "{'a':" RE("^x", "") "}", 1},
    {"{'a':{'$in':[" RE("^x", "") ",null]}}", "{}", 1},
    {"{'a':{'$nin':[" RE("^x", "") "]}}", "{'a':'xa'}", 0},
    {"{'a':{'$nin':[" RE("^x", "") "]}}", "{'a':'ya'}", 1},
    {"{'a':{'$not':" RE("^x", "") "}}", "{'a':'ya'}", 1},
    {"{'a':{'$not':" RE("^x", "") "}}", "{'a':'xa'}", 0},
    {"{'a':{'$not':" RE("^x", "") "}}", "{}", 1},
    {"{'a':{'$regex':" RE("^x", "i") "}}", "{'a':'XA'}", 1},
    {"{'a':{'$regex':" RE("^x", "") ",'$options':'i'}}", "{'a':'XA'}", 1},
    {"{'a':{'$regex':'^x'}}", "{'a':" RE("^x", "") "}", 1},
    {"{'a':{'$regex':'^x','$options':'i'}}", "{'a':" RE("^x", "i") "}", 1},
    {"{'a':{'$all':[" RE("^x", "") "," RE("y$", "") "]}}",
     "{'a':['xa','by']}", 1},
    {"{'a':{'$all':[" RE("^x", "") "," RE("y$", "") "]}}", "{'a':['xa']}",
     0},
    {"{'a':{'$gt':" RE("a", "") "}}", "{'a':" RE("b", "") "}", 1},
    {"{'a':{'$gt':" RE("a", "") "}}", "{'a':'b'}", 0},
    {"{'a':{'$elemMatch':{'$in':[" RE("^q", "") "]}}}", "{'a':[1,'qq']}", 1},
};

/* ---- $mod with every numeric type (truncation toward zero) --------------- */
static const row_t mod_rows[] = {
    {"{'a':{'$mod':[" DEC("4.7") ",0]}}", "{'a':8}", 1},
    {"{'a':{'$mod':[" LONG("4") "," INT("1") "]}}", "{'a':" INT("5") "}", 1},
    {"{'a':{'$mod':[4,0]}}", "{'a':" DEC("8.9") "}", 1},
    {"{'a':{'$mod':[4,0]}}", "{'a':" DEC("-8.9") "}", 1},
    {"{'a':{'$mod':[4,1]}}", "{'a':" DEC("8.9") "}", 0},
    {"{'a':{'$mod':[4,0]}}", "{'a':" DEC("NaN") "}", 0},
    {"{'a':{'$mod':[4,0]}}", "{'a':" DEC("1E+40") "}", 0},
    {"{'a':{'$mod':[4,0]}}", "{'a':" DBL("Infinity") "}", 0},
    {"{'a':{'$mod':[4,0]}}", "{'a':" DBL("NaN") "}", 0},
    {"{'a':{'$mod':[4,0]}}", "{'a':" LONG("8") "}", 1},
    {"{'a':{'$mod':[" DEC("-3") "," DEC("2.9") "]}}", "{'a':5}", 1},
    {"{'a':{'$mod':[2,0]}}", "{'a':" DATE("2020-01-01T00:00:00Z") "}", 0},
};

static void run_rows(const char *name, const row_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    bson_t *spec = X(t[i].filter), *doc = X(t[i].doc);
    dtx__bfilter_t *f = NULL;
    int rc = dtx__bfilter_compile(spec, &f);
    bson_destroy(spec); /* the compiled filter holds its own copy */
    CHECKF(rc == 0, "%s[%zu] compile %s: %s (%s)", name, i, t[i].filter,
           dtx_errname(rc), dtx_errdetail());
    if (rc == 0) {
      int got = dtx__bfilter_match(f, bson_get_data(doc), doc->len);
      CHECKF(got == t[i].want, "%s[%zu] filter %s doc %s: got %d want %d",
             name, i, t[i].filter, t[i].doc, got, t[i].want);
      CHECK(dtx__bfilter_error(f) == 0);
    }
    dtx__bfilter_free(f);
    bson_destroy(doc);
  }
}

#define RUN(t) run_rows(#t, t, sizeof t / sizeof t[0])

/* ---- $type on integers: by value, as filter.c -------------------------------
 * doctx's front doors speak JSON, where an integer has no width, so an
 * int32 or int64 is "int" (16) when it fits in 32 bits and "long" (18)
 * otherwise, whatever width it is stored with (MongoDB judges by width);
 * a double is "double" only, a Decimal128 "decimal" only. */
static const char *const int_vals[] = {
    INT("5"), LONG("5"), LONG("2147483648"), LONG("-2147483649"), DBL("5.0"),
    DEC("5"),
};

static const struct {
  const char *type;
  int want[6]; /* per int_vals */
} int_types[] = {
    {"'int'", {1, 1, 0, 0, 0, 0}},      {"16", {1, 1, 0, 0, 0, 0}},
    {"'long'", {0, 0, 1, 1, 0, 0}},     {"18", {0, 0, 1, 1, 0, 0}},
    {"['int','long']", {1, 1, 1, 1, 0, 0}},
    {"[16,18]", {1, 1, 1, 1, 0, 0}},    {"'number'", {1, 1, 1, 1, 1, 1}},
    {"'double'", {0, 0, 0, 0, 1, 0}},   {"1", {0, 0, 0, 0, 1, 0}},
    {"'decimal'", {0, 0, 0, 0, 0, 1}},  {"19", {0, 0, 0, 0, 0, 1}},
    {"['double',16]", {1, 1, 0, 0, 1, 0}},
};

static void test_int_types(void) {
  size_t n = 0;
  for (size_t i = 0; i < sizeof int_types / sizeof *int_types; i++)
    for (size_t j = 0; j < sizeof int_vals / sizeof *int_vals; j++) {
      char ft[120], dt[120];
      snprintf(ft, sizeof ft, "{'a':{'$type':%s}}", int_types[i].type);
      snprintf(dt, sizeof dt, "{'a':%s}", int_vals[j]);
      row_t r = {ft, dt, int_types[i].want[j]};
      run_rows("int_types", &r, 1);
      n++;
    }
  CHECK(n == 72);
}

static void test_tables(void) {
  RUN(number_rows);
  RUN(type_rows);
  test_int_types();
  RUN(bracket_rows);
  RUN(extreme_rows);
  RUN(regex_rows);
  RUN(mod_rows);
}

/* ---- invalid filters only BSON can write ------------------------------------ */
static const struct {
  const char *filter, *detail;
} bad_rows[] = {
    {"{'a':{'$type':2.5}}", "invalid type code 2.5"},
    {"{'a':{'$type':" DEC("300") "}}", "invalid type code 300"},
    {"{'a':{'$type':" DBL("NaN") "}}", "invalid type code"},
    {"{'a':{'$type':0}}", "invalid type code 0"},
    {"{'a':{'$type':" MINK "}}", "$type needs"},
    {"{'a':{'$mod':[" DEC("NaN") ",1]}}", "divisor nan is outside"},
    {"{'a':{'$mod':[" DBL("Infinity") ",1]}}", "outside the 64-bit"},
    {"{'a':{'$mod':[2," DEC("1E+30") "]}}", "remainder 1e+30 is outside"},
    {"{'a':{'$mod':[" DEC("0.5") ",1]}}", "divisor cannot be 0"},
    {"{'a':{'$mod':[" DATE("2020-01-01T00:00:00Z") ",1]}}",
     "divisor must be a number"},
    {"{'a':{'$ne':" RE("x", "") "}}", "$ne cannot take a regex at a"},
    {"{'a':{'$regex':" RE("x", "i") ",'$options':'m'}}", "options set in both"},
    {"{'a':{'$regex':" RE("(x", "") "}}", "invalid pattern"},
    {"{'a':" RE("(x", "") "}", "invalid pattern"},
    {"{'a':{'$in':[1," RE("(", "") "]}}", "invalid pattern"},
    {"{'a':{'$not':" RE("[", "") "}}", "invalid pattern"},
    {"{'a':{'$all':[" RE("(", "") "]}}", "invalid pattern"},
    {"{'a':{'$size':" DEC("1.5") "}}", "$size needs"},
    {"{'a':{'$size':" DEC("-1") "}}", "$size needs"},
    {"{'a':{'$exists':" DATE("2020-01-01T00:00:00Z") "}}", "$exists needs"},
    {"{'a':{'$exists':" MINK "}}", "$exists needs"},
    {"{'$and':[" RE("x", "") "]}", "$and entries must be objects"},
    {"{'a':{'$elemMatch':" RE("x", "") "}}", "$elemMatch needs an object"},
};

static void test_bad(void) {
  for (size_t i = 0; i < sizeof bad_rows / sizeof bad_rows[0]; i++) {
    bson_t *spec = X(bad_rows[i].filter);
    dtx__bfilter_t *f = (dtx__bfilter_t *)&f; /* must be reset to NULL */
    int rc = dtx__bfilter_compile(spec, &f);
    CHECKF(rc == DTX_EBADQUERY, "bad[%zu] %s: got %s", i, bad_rows[i].filter,
           dtx_errname(rc));
    CHECKF(f == NULL, "bad[%zu]: out not cleared", i);
    CHECKF(strstr(dtx_errdetail(), bad_rows[i].detail) != NULL,
           "bad[%zu] %s: detail '%s' lacks '%s'", i, bad_rows[i].filter,
           dtx_errdetail(), bad_rows[i].detail);
    if (rc == 0)
      dtx__bfilter_free(f);
    bson_destroy(spec);
  }
}

/* Spec bytes that are not a document are refused, not read past. */
static void test_bad_bytes(void) {
  /* {a: "<string claiming 2 GiB>"}: lengths that lie */
  static const uint8_t lie[] = {12, 0, 0, 0, 2, 'a', 0, 0xff, 0xff, 0xff, 0x7f, 0};
  /* an unknown element type 0x42 */
  static const uint8_t type[] = {8, 0, 0, 0, 0x42, 'a', 0, 0};
  const uint8_t *cases[] = {lie, type};
  size_t lens[] = {sizeof lie, sizeof type};
  for (size_t i = 0; i < 2; i++) {
    bson_t b;
    dtx__bfilter_t *f = NULL;
    REQUIRE(bson_init_static(&b, cases[i], lens[i]));
    CHECK_RC(dtx__bfilter_compile(&b, &f), DTX_EBADQUERY);
    CHECK(f == NULL);
  }
  /* NULL is the empty filter */
  dtx__bfilter_t *f = NULL;
  bson_t *doc = X("{'a':1}");
  CHECK_RC(dtx__bfilter_compile(NULL, &f), 0);
  CHECK(dtx__bfilter_match(f, bson_get_data(doc), doc->len) == 1);
  dtx__bfilter_free(f);
  dtx__bfilter_free(NULL);
  bson_destroy(doc);
}

/* The position the positional $ uses, through BSON-only operands. */
static void test_pos(void) {
  static const struct {
    const char *filter, *doc;
    long pos;
  } cases[] = {
      {"{'a':" RE("^x", "") "}", "{'a':['b','xz']}", 1},
      {"{'a':{'$in':[" DEC("2") "]}}", "{'a':[1," LONG("2") "]}", 1},
      {"{'a.d':{'$gt':" DATE("2020-01-01T00:00:00Z") "}}",
       "{'a':[{'d':" DATE("2019-01-01T00:00:00Z") "},{'d':"
       DATE("2021-01-01T00:00:00Z") "}]}", 1},
      {"{'a':{'$gt':" MINK "}}", "{'a':5}", -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    bson_t *spec = X(cases[i].filter), *doc = X(cases[i].doc);
    dtx__bfilter_t *f = NULL;
    size_t pos = 0;
    REQUIRE(dtx__bfilter_compile(spec, &f) == 0);
    CHECKF(dtx__bfilter_match_pos(f, bson_get_data(doc), doc->len, &pos) == 1,
           "%s", cases[i].filter);
    long got = pos == SIZE_MAX ? -1 : (long)pos;
    CHECKF(got == cases[i].pos, "%s on %s: pos %ld want %ld", cases[i].filter,
           cases[i].doc, got, cases[i].pos);
    dtx__bfilter_free(f);
    bson_destroy(spec);
    bson_destroy(doc);
  }
}

/* Many threads share one compiled filter (matching writes nothing). */
typedef struct tharg {
  const dtx__bfilter_t *f;
  const bson_t *yes, *no;
  int errors;
} tharg_t;

static void *match_thread(void *p) {
  tharg_t *a = p;
  for (int i = 0; i < 20000; i++) {
    if (dtx__bfilter_match(a->f, bson_get_data(a->yes), a->yes->len) != 1)
      a->errors++;
    if (dtx__bfilter_match(a->f, bson_get_data(a->no), a->no->len) != 0)
      a->errors++;
  }
  return NULL;
}

static void test_threads(void) {
  bson_t *spec = X("{'changes':{'$elemMatch':{'account':'B','amount':{'$lt':"
                   DEC("0") "}}},'state':{'$in':['a'," RE("^b", "") ",'c']},"
                   "'x':{'$ne':1}}");
  bson_t *yes = X("{'changes':[{'account':'B','amount':" LONG("-1") "}],"
                  "'state':'bb'}");
  bson_t *no = X("{'changes':[{'account':'B','amount':1}],'state':'b'}");
  dtx__bfilter_t *f = NULL;
  REQUIRE(dtx__bfilter_compile(spec, &f) == 0);
  bson_destroy(spec);
  tharg_t args[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    args[i] = (tharg_t){f, yes, no, 0};
    pthread_create(&th[i], NULL, match_thread, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].errors == 0);
  }
  dtx__bfilter_free(f);
  bson_destroy(yes);
  bson_destroy(no);
}

static void test_count(void) {
  size_t n = 0;
#define ADD(t) n += sizeof t / sizeof t[0]
  ADD(number_rows), ADD(type_rows), ADD(bracket_rows), ADD(extreme_rows);
  ADD(regex_rows), ADD(mod_rows), ADD(bad_rows);
#undef ADD
  n += sizeof int_types / sizeof *int_types *
       (sizeof int_vals / sizeof *int_vals);
  printf("     %zu BSON-only filter rows\n", n);
  CHECK(n >= 150);
}

int main(void) {
  TEST_RUN(test_tables);
  TEST_RUN(test_bad);
  TEST_RUN(test_bad_bytes);
  TEST_RUN(test_pos);
  TEST_RUN(test_threads);
  TEST_RUN(test_count);
  return TEST_DONE();
}
