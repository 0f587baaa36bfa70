/* test_bvalue.c -- the BSON engine's values: MongoDB's order over every
 * BSON type, brackets, $type's names and numbers, the raw reader, and
 * the json_t bridge (each type to relaxed Extended JSON, JSON round
 * trips).
 *
 * The ladder lists values in ascending order; a row marked TIE equals the
 * row before it.  Every pair is compared both ways, so the order is
 * checked total, antisymmetric and transitive on the ladder, ties exact
 * (2^53 + 1 as int64 against the doubles around it, Decimal128 against
 * all three other numeric types).
 */
#include "testlib.h"

#include "bdiff.h"
#include "doc/bdoc.h"

#include <math.h>
#include <string.h>

/* ---- the ladder ----------------------------------------------------------- */

enum { LT = 0, TIE = 1 };

typedef struct lrow {
  int tie;   /* TIE: equal to the row before */
  char kind; /* see put_row */
  int64_t i; /* int32/int64/date/bool; timestamp t; E/A: row index */
  double d;
  const char *s; /* string bytes, decimal text, JSON text, pattern, ns... */
  uint32_t slen; /* for strings with NULs; 0: strlen(s) */
  const char *s2; /* regex options, dbPointer/ObjectId hex, scope JSON */
  uint32_t u;     /* timestamp increment, binData subtype */
  const char *ej; /* expected relaxed Extended JSON (NULL: not checked) */
} lrow_t;

/* The values that E ({a: X}) and A ([X]) rows wrap. */
static const lrow_t inner[] = {
    {LT, 'M', .i = 0},        {LT, 'u', .i = 0},
    {LT, 'l', .i = 1},        {LT, 'D', .s = "1.00"},
    {LT, 'D', .s = "1"},      {LT, 'X', .i = 0},
};
enum { IN_MINKEY, IN_UNDEF, IN_LONG1, IN_DEC100, IN_DEC1, IN_MAXKEY };

static const lrow_t ladder[] = {
    /* 0 */ {LT, 'M', .ej = "{'$minKey':1}"},
    {LT, 'n', .ej = "null"},
    {TIE, 'u', .ej = "{'$undefined':true}"},
    /* numbers: NaN lowest, then -Inf ... +Inf */
    {LT, 'd', .d = NAN, .ej = "{'$numberDouble':'NaN'}"},
    {TIE, 'D', .s = "NaN", .ej = "{'$numberDecimal':'NaN'}"},
    {TIE, 'D', .s = "-NaN"},
    {LT, 'd', .d = -INFINITY, .ej = "{'$numberDouble':'-Infinity'}"},
    {TIE, 'D', .s = "-Infinity", .ej = "{'$numberDecimal':'-Infinity'}"},
    {LT, 'D', .s = "-9.999999999999999999999999999999999E+6144"},
    {LT, 'D', .s = "-1E+400"},
    {LT, 'd', .d = -1.7976931348623157e308, .ej = "-1.7976931348623157e308"},
    {LT, 'd', .d = -9223372036854777856.0}, /* the double below -2^63 */
    {LT, 'l', .i = INT64_MIN, .ej = "-9223372036854775808"},
    {TIE, 'd', .d = -9223372036854775808.0},
    {TIE, 'D', .s = "-9223372036854775808"},
    {LT, 'D', .s = "-9223372036854775807.5"},
    {LT, 'l', .i = INT64_MIN + 1},
    {LT, 'i', .i = INT32_MIN, .ej = "-2147483648"},
    {TIE, 'l', .i = INT32_MIN},
    {TIE, 'd', .d = -2147483648.0},
    {LT, 'd', .d = -1.5},
    {TIE, 'D', .s = "-1.50"},
    {LT, 'i', .i = -1},
    {TIE, 'l', .i = -1},
    {TIE, 'd', .d = -1.0, .ej = "-1.0"},
    {TIE, 'D', .s = "-1.00", .ej = "{'$numberDecimal':'-1.00'}"},
    {LT, 'd', .d = -5e-324},
    {LT, 'i', .i = 0, .ej = "0"},
    {TIE, 'l', .i = 0, .ej = "0"},
    {TIE, 'd', .d = 0.0, .ej = "0.0"},
    {TIE, 'd', .d = -0.0, .ej = "-0.0"},
    {TIE, 'D', .s = "0"},
    {TIE, 'D', .s = "-0", .ej = "{'$numberDecimal':'-0'}"},
    {TIE, 'D', .s = "0E+300"},
    {LT, 'D', .s = "1E-6176"},
    {LT, 'd', .d = 5e-324},
    {LT, 'D', .s = "0.1"},
    {LT, 'D', .s = "0.1000000000000000055511151231257827"},
    {LT, 'd', .d = 0.1, .ej = "0.10000000000000001"},
    {LT, 'D', .s = "0.1000000000000000055511151231257828"},
    {LT, 'i', .i = 1, .ej = "1"},
    {TIE, 'l', .i = 1, .ej = "1"},
    {TIE, 'd', .d = 1.0, .ej = "1.0"},
    {TIE, 'D', .s = "1"},
    {TIE, 'D', .s = "1.00", .ej = "{'$numberDecimal':'1.00'}"},
    {TIE, 'D', .s = "10E-1"},
    {LT, 'D', .s = "1.000000000000000000000000000000001"},
    {LT, 'd', .d = 1.5},
    {TIE, 'D', .s = "1.5"},
    {TIE, 'D', .s = "15E-1"},
    {LT, 'i', .i = INT32_MAX},
    {TIE, 'l', .i = INT32_MAX},
    {LT, 'l', .i = 2147483648LL, .ej = "2147483648"},
    {TIE, 'd', .d = 2147483648.0},
    {LT, 'l', .i = 9007199254740991LL},
    {TIE, 'd', .d = 9007199254740991.0},
    {LT, 'l', .i = 9007199254740992LL},
    {TIE, 'd', .d = 9007199254740992.0},
    {TIE, 'D', .s = "9007199254740992"},
    {LT, 'l', .i = 9007199254740993LL},
    {TIE, 'D', .s = "9007199254740993"},
    {LT, 'd', .d = 9007199254740994.0},
    {TIE, 'l', .i = 9007199254740994LL},
    {LT, 'd', .d = 9223372036854774784.0}, /* the double below 2^63 */
    {TIE, 'l', .i = 9223372036854774784LL},
    {LT, 'l', .i = INT64_MAX - 1},
    {LT, 'l', .i = INT64_MAX, .ej = "9223372036854775807"},
    {TIE, 'D', .s = "9223372036854775807"},
    {LT, 'D', .s = "9223372036854775807.5"},
    {LT, 'd', .d = 9223372036854775808.0},
    {TIE, 'D', .s = "9223372036854775808"},
    /* the double 1e300 is 1.0000000000000000525...e300, above 10^300 */
    {LT, 'D', .s = "1E+300"},
    {LT, 'd', .d = 1e300},
    {LT, 'd', .d = 1.7976931348623157e308},
    {LT, 'D', .s = "1E+400"},
    {LT, 'D', .s = "1E+6144"},
    {LT, 'D', .s = "9.999999999999999999999999999999999E+6144"},
    {LT, 'd', .d = INFINITY, .ej = "{'$numberDouble':'Infinity'}"},
    {TIE, 'D', .s = "Infinity"},
    /* strings and symbols: bytes, a prefix first, NULs inside count */
    {LT, 's', .s = "", .ej = "''"},
    {TIE, 'y', .s = "", .ej = "{'$symbol':''}"},
    {LT, 's', .s = "\0", .slen = 1},
    {LT, 's', .s = "a", .ej = "'a'"},
    {TIE, 'y', .s = "a"},
    {LT, 's', .s = "a\0", .slen = 2},
    {LT, 's', .s = "a\0b", .slen = 3},
    {LT, 's', .s = "ab"},
    {LT, 's', .s = "b"},
    {LT, 's', .s = "\xc3\xa9", .ej = "'\xc3\xa9'"},
    {TIE, 'y', .s = "\xc3\xa9"},
    /* objects: pair by pair, the value's bracket before the name */
    {LT, 'o', .s = "{}", .ej = "{}"},
    {LT, 'E', .i = IN_MINKEY, .ej = "{'a':{'$minKey':1}}"}, /* {a: MinKey} */
    {LT, 'o', .s = "{'a':null}"},
    {TIE, 'E', .i = IN_UNDEF},                             /* {a: undefined} */
    {LT, 'o', .s = "{'b':null}"},                   /* null < number */
    {LT, 'o', .s = "{'a':1}", .ej = "{'a':1}"},
    {TIE, 'o', .s = "{'a':1.0}", .ej = "{'a':1.0}"},
    {TIE, 'E', .i = IN_LONG1},                            /* {a: NumberLong(1)} */
    {TIE, 'E', .i = IN_DEC100},                            /* {a: 1.00 decimal} */
    {LT, 'o', .s = "{'a':1,'b':1}"},
    {LT, 'o', .s = "{'b':1}"},
    {LT, 'o', .s = "{'a':'x'}"},
    {LT, 'o', .s = "{'a':{}}"},
    {LT, 'o', .s = "{'a':[]}"},
    {LT, 'o', .s = "{'a':true}"},
    {LT, 'E', .i = IN_MAXKEY},                             /* {a: MaxKey} */
    /* arrays: element by element, shorter first */
    {LT, 'a', .s = "[]", .ej = "[]"},
    {LT, 'A', .i = IN_MINKEY},                              /* [MinKey] */
    {LT, 'a', .s = "[null]"},
    {LT, 'a', .s = "[1]", .ej = "[1]"},
    {TIE, 'a', .s = "[1.0]"},
    {TIE, 'A', .i = IN_DEC1},                            /* [decimal 1] */
    {LT, 'a', .s = "[1,2]"},
    {LT, 'a', .s = "[2]"},
    {LT, 'a', .s = "['a']"},
    {LT, 'a', .s = "[{}]"},
    {LT, 'a', .s = "[[]]"},
    {LT, 'a', .s = "[true]"},
    {LT, 'A', .i = IN_MAXKEY},                             /* [MaxKey] */
    /* binData: length, then subtype, then bytes */
    {LT, 'b', .s = "", .u = 0,
     .ej = "{'$binary':{'base64':'','subType':'00'}}"},
    {LT, 'b', .s = "", .u = 5},
    {LT, 'b', .s = "\0", .slen = 1, .u = 0,
     .ej = "{'$binary':{'base64':'AA==','subType':'00'}}"},
    {LT, 'b', .s = "\xff", .u = 0},
    {LT, 'b', .s = "\0", .slen = 1, .u = 4},
    {LT, 'b', .s = "\0", .slen = 1, .u = 0x80,
     .ej = "{'$binary':{'base64':'AA==','subType':'80'}}"},
    {LT, 'b', .s = "ab", .u = 0, .ej = "{'$binary':{'base64':'YWI=','subType':'00'}}"},
    {LT, 'b', .s = "abc", .u = 3, .ej = "{'$binary':{'base64':'YWJj','subType':'03'}}"},
    /* ObjectId: bytes */
    {LT, 'O', .s2 = "000000000000000000000000",
     .ej = "{'$oid':'000000000000000000000000'}"},
    {LT, 'O', .s2 = "000000000000000000000001"},
    {LT, 'O', .s2 = "5f0a1b2c3d4e5f6a7b8c9d0e",
     .ej = "{'$oid':'5f0a1b2c3d4e5f6a7b8c9d0e'}"},
    {LT, 'O', .s2 = "ffffffffffffffffffffffff"},
    /* bool */
    {LT, 'B', .i = 0, .ej = "false"},
    {LT, 'B', .i = 1, .ej = "true"},
    /* Date: signed milliseconds */
    {LT, 't', .i = INT64_MIN,
     .ej = "{'$date':{'$numberLong':'-9223372036854775808'}}"},
    {LT, 't', .i = -1, .ej = "{'$date':{'$numberLong':'-1'}}"},
    {LT, 't', .i = 0, .ej = "{'$date':'1970-01-01T00:00:00Z'}"},
    {LT, 't', .i = 1356351330501LL, .ej = "{'$date':'2012-12-24T12:15:30.501Z'}"},
    {LT, 't', .i = 253402300799999LL,
     .ej = "{'$date':'9999-12-31T23:59:59.999Z'}"},
    {LT, 't', .i = 253402300800000LL,
     .ej = "{'$date':{'$numberLong':'253402300800000'}}"},
    {LT, 't', .i = INT64_MAX},
    /* Timestamp: unsigned, seconds then increment */
    {LT, 'T', .i = 0, .u = 0, .ej = "{'$timestamp':{'t':0,'i':0}}"},
    {LT, 'T', .i = 0, .u = 1},
    {LT, 'T', .i = 1, .u = 0},
    {LT, 'T', .i = 4294967295LL, .u = 4294967295u,
     .ej = "{'$timestamp':{'t':4294967295,'i':4294967295}}"},
    /* regex: pattern, then options */
    {LT, 'r', .s = "", .s2 = "",
     .ej = "{'$regularExpression':{'pattern':'','options':''}}"},
    {LT, 'r', .s = "a", .s2 = ""},
    {LT, 'r', .s = "a", .s2 = "i"},
    {LT, 'r', .s = "a", .s2 = "im",
     .ej = "{'$regularExpression':{'pattern':'a','options':'im'}}"},
    {LT, 'r', .s = "b", .s2 = ""},
    /* dbPointer: size, then bytes */
    {LT, 'p', .s = "a", .s2 = "000000000000000000000000"},
    {LT, 'p', .s = "a", .s2 = "000000000000000000000001",
     .ej = "{'$dbPointer':{'$ref':'a','$id':{'$oid':'000000000000000000000001'}}}"},
    {LT, 'p', .s = "bb", .s2 = "000000000000000000000000"},
    /* JavaScript */
    {LT, 'c', .s = "", .ej = "{'$code':''}"},
    {LT, 'c', .s = "a"},
    {LT, 'c', .s = "b"},
    /* JavaScript with scope: the code, then the scope */
    {LT, 'w', .s = "a", .s2 = "{}", .ej = "{'$code':'a','$scope':{}}"},
    {LT, 'w', .s = "a", .s2 = "{'x':1}", .ej = "{'$code':'a','$scope':{'x':1}}"},
    {LT, 'w', .s = "b", .s2 = "{}"},
    {LT, 'X', .ej = "{'$maxKey':1}"},
};

#define NLADDER (sizeof ladder / sizeof ladder[0])

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

static void oid_from_hex(const char *hex, bson_oid_t *o) {
  bson_oid_init_from_string(o, hex);
}

/* Appends ladder row r under key k.  Kinds: M/X MinKey/MaxKey, n null,
 * u undefined, i int32, l int64, d double, D Decimal128 text, s string,
 * y symbol, o object JSON, a array JSON, E {a: inner row i}, A
 * [inner row i], b binData, O ObjectId, B bool, t Date, T Timestamp, r regex,
 * p dbPointer, c code, w code with scope. */
static int put_row(bson_t *b, const char *k, const lrow_t *r) {
  uint32_t slen = r->s ? (r->slen ? r->slen : (uint32_t)strlen(r->s)) : 0;
  switch (r->kind) {
  case 'M':
    return bson_append_minkey(b, k, -1);
  case 'X':
    return bson_append_maxkey(b, k, -1);
  case 'n':
    return bson_append_null(b, k, -1);
  case 'u':
    return bson_append_undefined(b, k, -1);
  case 'i':
    return bson_append_int32(b, k, -1, (int32_t)r->i);
  case 'l':
    return bson_append_int64(b, k, -1, r->i);
  case 'd':
    return bson_append_double(b, k, -1, r->d);
  case 'D': {
    bson_decimal128_t d;
    if (!bson_decimal128_from_string(r->s, &d))
      return 0;
    return bson_append_decimal128(b, k, -1, &d);
  }
  case 's':
    return bson_append_utf8(b, k, -1, r->s, (int)slen);
  case 'y':
    return bson_append_symbol(b, k, -1, r->s, (int)slen);
  case 'o':
  case 'a': {
    json_t *j = Q(r->s);
    bson_t child;
    int ok = r->kind == 'o' ? bson_append_document_begin(b, k, -1, &child)
                            : bson_append_array_begin(b, k, -1, &child);
    ok = ok && dtx__bson_from_json(j, &child) == 0;
    ok = (r->kind == 'o' ? bson_append_document_end(b, &child)
                         : bson_append_array_end(b, &child)) &&
         ok;
    json_decref(j);
    return ok;
  }
  case 'E':
  case 'A': {
    const lrow_t *in = &inner[r->i];
    bson_t child;
    int ok = r->kind == 'E' ? bson_append_document_begin(b, k, -1, &child)
                            : bson_append_array_begin(b, k, -1, &child);
    ok = ok && put_row(&child, r->kind == 'E' ? "a" : "0", in);
    ok = (r->kind == 'E' ? bson_append_document_end(b, &child)
                         : bson_append_array_end(b, &child)) &&
         ok;
    return ok;
  }
  case 'b':
    return bson_append_binary(b, k, -1, (bson_subtype_t)r->u,
                              (const uint8_t *)r->s, slen);
  case 'O': {
    bson_oid_t o;
    oid_from_hex(r->s2, &o);
    return bson_append_oid(b, k, -1, &o);
  }
  case 'B':
    return bson_append_bool(b, k, -1, r->i != 0);
  case 't':
    return bson_append_date_time(b, k, -1, r->i);
  case 'T':
    return bson_append_timestamp(b, k, -1, (uint32_t)r->i, r->u);
  case 'r':
    return bson_append_regex(b, k, -1, r->s, r->s2);
  case 'p': {
    bson_oid_t o;
    oid_from_hex(r->s2, &o);
    return bson_append_dbpointer(b, k, -1, r->s, &o);
  }
  case 'c':
    return bson_append_code(b, k, -1, r->s);
  case 'w': {
    bson_t scope = BSON_INITIALIZER;
    json_t *j = Q(r->s2);
    int ok = dtx__bson_from_json(j, &scope) == 0 &&
             bson_append_code_with_scope(b, k, -1, r->s, &scope);
    json_decref(j);
    bson_destroy(&scope);
    return ok;
  }
  }
  return 0;
}

static bson_t lad_doc;
static dtx__bval_t lad[NLADDER];
static int group[NLADDER]; /* tie group of each row */

static int build_ladder(void) {
  static int built;
  if (built)
    return built > 0;
  built = -1;
  bson_init(&lad_doc);
  for (size_t i = 0; i < NLADDER; i++) {
    char k[16];
    snprintf(k, sizeof k, "%zu", i);
    if (!put_row(&lad_doc, k, &ladder[i])) {
      fprintf(stderr, "ladder row %zu does not build\n", i);
      return 0;
    }
    group[i] = i == 0 ? 0 : group[i - 1] + (ladder[i].tie ? 0 : 1);
  }
  uint32_t off = 0;
  dtx__belem_t e;
  size_t n = 0;
  while (dtx__belem_next(bson_get_data(&lad_doc), lad_doc.len, &off, &e)) {
    if (n < NLADDER)
      lad[n] = e.v;
    n++;
  }
  built = n == NLADDER ? 1 : -1;
  return built > 0;
}

static int sgn(int x) { return (x > 0) - (x < 0); }

static void test_order(void) {
  REQUIRE(build_ladder());
  size_t pairs = 0;
  for (size_t i = 0; i < NLADDER; i++)
    for (size_t j = 0; j < NLADDER; j++) {
      int want = group[i] < group[j] ? -1 : group[i] > group[j];
      int got = dtx__bval_cmp(&lad[i], &lad[j]);
      pairs++;
      if (sgn(got) != want) {
        char *a = bdiff_show(&lad[i]), *b = bdiff_show(&lad[j]);
        CHECKF(0, "cmp(row %zu %s, row %zu %s) = %d, want %d", i, a, j, b,
               got, want);
        free(a);
        free(b);
      }
      /* The same bracket exactly when the order does not separate them
       * by type. */
      if (group[i] == group[j])
        CHECKF(dtx__bval_bracket(lad[i].type) ==
                   dtx__bval_bracket(lad[j].type),
               "rows %zu, %zu tie across brackets", i, j);
      if (dtx__bval_bracket(lad[i].type) < dtx__bval_bracket(lad[j].type))
        CHECKF(want < 0, "rows %zu, %zu: bracket order against the ladder",
               i, j);
    }
  printf("  ladder: %zu values, %d tie groups, %zu ordered pairs\n", NLADDER,
         group[NLADDER - 1] + 1, pairs);
}

/* A missing value (type 0) compares as null, and is in null's bracket. */
static void test_missing(void) {
  REQUIRE(build_ladder());
  dtx__bval_t missing = {BSON_TYPE_EOD, 0, NULL};
  for (size_t i = 0; i < NLADDER; i++) {
    int want = group[i] < group[1] ? 1 : group[i] > group[1] ? -1 : 0;
    CHECKF(sgn(dtx__bval_cmp(&missing, &lad[i])) == want, "missing vs %zu", i);
    CHECKF(sgn(dtx__bval_cmp(&lad[i], &missing)) == -want, "%zu vs missing", i);
  }
  CHECK(dtx__bval_bracket(BSON_TYPE_EOD) == dtx__bval_bracket(BSON_TYPE_NULL));
}

/* The brackets the json_t engine also has keep its numbers, so either
 * engine's bracket means the same. */
static void test_brackets_agree(void) {
  static const struct {
    const char *json;
    bson_type_t t;
  } rows[] = {{"null", BSON_TYPE_NULL},   {"1", BSON_TYPE_INT32},
              {"1.5", BSON_TYPE_DOUBLE},  {"\"s\"", BSON_TYPE_UTF8},
              {"{}", BSON_TYPE_DOCUMENT}, {"[]", BSON_TYPE_ARRAY},
              {"true", BSON_TYPE_BOOL},   {"12345678901", BSON_TYPE_INT64}};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    json_t *j = J(rows[i].json);
    CHECKF(dtx__value_bracket(j) == dtx__bval_bracket(rows[i].t), "%s",
           rows[i].json);
    json_decref(j);
  }
  CHECK(dtx__value_bracket(NULL) == dtx__bval_bracket(BSON_TYPE_EOD));
}

/* ---- the json_t order against the BSON order ------------------------------ */

/* Every pair of a JSON ladder gives the same sign in both engines. */
static void test_order_differential(void) {
  static const char *vals[] = {
      "null", "-1e300", "-9223372036854775808", "-9.223372036854775808e18",
      "-2147483649", "-2147483648", "-1.5", "-1", "-0.0", "0", "0.0", "1e-300",
      "0.5", "1", "1.0", "2147483647", "2147483648", "9007199254740991",
      "9007199254740992", "9007199254740992.0", "9007199254740993",
      "9007199254740994.0", "9223372036854775807", "9.223372036854775807e18",
      "1e300", "\"\"", "\"a\"", "\"ab\"", "\"b\"", "{}", "{\"a\":null}",
      "{\"b\":null}", "{\"a\":1}", "{\"a\":1.0}", "{\"a\":1,\"b\":2}",
      "{\"b\":1}", "{\"a\":\"x\"}", "{\"a\":[]}", "{\"a\":{}}", "[]",
      "[null]", "[1]", "[1,2]", "[2]", "[[]]", "[{}]", "[\"a\"]", "[true]",
      "false", "true"};
  size_t n = sizeof vals / sizeof vals[0], pairs = 0;
  bson_t h = BSON_INITIALIZER;
  json_t *js[64];
  REQUIRE(n <= 64);
  for (size_t i = 0; i < n; i++) {
    js[i] = J(vals[i]);
    dtx__bval_t tmp;
    CHECK(dtx__bval_from_json(js[i], &h, &tmp) == 0);
  }
  dtx__bval_t bs[64];
  uint32_t off = 0;
  dtx__belem_t e;
  for (size_t i = 0; i < n && dtx__belem_next(bson_get_data(&h), h.len, &off, &e); i++)
    bs[i] = e.v;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      int a = sgn(dtx__value_cmp(js[i], js[j]));
      int b = sgn(dtx__bval_cmp(&bs[i], &bs[j]));
      pairs++;
      CHECKF(a == b, "%s vs %s: json %d bson %d", vals[i], vals[j], a, b);
    }
  printf("  order differential: %zu pairs through both engines\n", pairs);
  for (size_t i = 0; i < n; i++)
    json_decref(js[i]);
  bson_destroy(&h);
}

/* ---- $type's names and numbers --------------------------------------------- */

static void test_types(void) {
  static const struct {
    const char *alias;
    int number; /* $type's number */
    int type;   /* bson_type_t */
  } rows[] = {
      {"double", 1, BSON_TYPE_DOUBLE},
      {"string", 2, BSON_TYPE_UTF8},
      {"object", 3, BSON_TYPE_DOCUMENT},
      {"array", 4, BSON_TYPE_ARRAY},
      {"binData", 5, BSON_TYPE_BINARY},
      {"undefined", 6, BSON_TYPE_UNDEFINED},
      {"objectId", 7, BSON_TYPE_OID},
      {"bool", 8, BSON_TYPE_BOOL},
      {"date", 9, BSON_TYPE_DATE_TIME},
      {"null", 10, BSON_TYPE_NULL},
      {"regex", 11, BSON_TYPE_REGEX},
      {"dbPointer", 12, BSON_TYPE_DBPOINTER},
      {"javascript", 13, BSON_TYPE_CODE},
      {"symbol", 14, BSON_TYPE_SYMBOL},
      {"javascriptWithScope", 15, BSON_TYPE_CODEWSCOPE},
      {"int", 16, BSON_TYPE_INT32},
      {"timestamp", 17, BSON_TYPE_TIMESTAMP},
      {"long", 18, BSON_TYPE_INT64},
      {"decimal", 19, BSON_TYPE_DECIMAL128},
      {"minKey", -1, BSON_TYPE_MINKEY},
      {"maxKey", 127, BSON_TYPE_MAXKEY},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    CHECKF(dtx__btype_from_alias(rows[i].alias) == rows[i].type, "%s",
           rows[i].alias);
    CHECKF(dtx__btype_from_number(rows[i].number) == rows[i].type, "%d",
           rows[i].number);
    CHECKF(strcmp(dtx__btype_name((bson_type_t)rows[i].type),
                  rows[i].alias) == 0,
           "name of %d", rows[i].type);
  }
  static const char *bad_alias[] = {"", "Double", "integer", "missing",
                                    "objectid", "decimal128", "number "};
  for (size_t i = 0; i < sizeof bad_alias / sizeof bad_alias[0]; i++)
    CHECKF(dtx__btype_from_alias(bad_alias[i]) == -1, "'%s'", bad_alias[i]);
  CHECK(dtx__btype_from_alias("number") == 0);
  static const int64_t bad_num[] = {0, 20, 126, 128, 255, -2, -255,
                                    INT64_MIN, INT64_MAX, 4294967297LL};
  for (size_t i = 0; i < sizeof bad_num / sizeof bad_num[0]; i++)
    CHECKF(dtx__btype_from_number(bad_num[i]) == -2, "%lld",
           (long long)bad_num[i]);
  CHECK(strcmp(dtx__btype_name(BSON_TYPE_EOD), "missing") == 0);
}

/* ---- payload readers and the raw reader ----------------------------------- */

static void test_readers(void) {
  REQUIRE(build_ladder());
  size_t checked = 0;
  for (size_t i = 0; i < NLADDER; i++) {
    const lrow_t *r = &ladder[i];
    const dtx__bval_t *v = &lad[i];
    CHECKF(dtx__bval_is_number(v) ==
               (r->kind == 'i' || r->kind == 'l' || r->kind == 'd' ||
                r->kind == 'D'),
           "is_number row %zu", i);
    switch (r->kind) {
    case 'i':
      CHECKF(dtx__bval_int32(v) == r->i, "row %zu", i);
      checked++;
      break;
    case 'l':
    case 't':
      CHECKF(dtx__bval_int64(v) == r->i, "row %zu", i);
      checked++;
      break;
    case 'd': {
      double d = dtx__bval_double(v);
      CHECKF((isnan(d) && isnan(r->d)) ||
                 (d == r->d && signbit(d) == signbit(r->d)),
             "row %zu", i);
      checked++;
      break;
    }
    case 'B':
      CHECKF(dtx__bval_bool(v) == r->i, "row %zu", i);
      checked++;
      break;
    case 's':
    case 'y':
    case 'c': {
      uint32_t n;
      const char *s = dtx__bval_str(v, &n);
      uint32_t want = r->slen ? r->slen : (uint32_t)strlen(r->s);
      CHECKF(n == want && memcmp(s, r->s, n) == 0, "row %zu", i);
      checked++;
      break;
    }
    case 'D': {
      bson_decimal128_t want, got = dtx__bval_dec(v);
      bson_decimal128_from_string(r->s, &want);
      CHECKF(got.low == want.low && got.high == want.high, "row %zu", i);
      checked++;
      break;
    }
    default:
      break;
    }
  }
  /* belem_find: present, absent, a prefix of a key, empty key. */
  bson_t b = BSON_INITIALIZER;
  REQUIRE(bdiff_bson("{\"ab\":1,\"a\":2,\"\":3,\"abc\":{\"x\":[4]}}", &b) == 0);
  const uint8_t *d = bson_get_data(&b);
  dtx__belem_t e;
  CHECK(dtx__belem_find(d, b.len, "a", 1, &e) && dtx__bval_int32(&e.v) == 2);
  CHECK(dtx__belem_find(d, b.len, "ab", 2, &e) && dtx__bval_int32(&e.v) == 1);
  CHECK(dtx__belem_find(d, b.len, "", 0, &e) && dtx__bval_int32(&e.v) == 3);
  CHECK(dtx__belem_find(d, b.len, "abc", 3, &e) &&
        e.v.type == BSON_TYPE_DOCUMENT);
  CHECK(!dtx__belem_find(d, b.len, "abcd", 4, &e) && e.v.type == 0);
  CHECK(!dtx__belem_find(d, b.len, "x", 1, &e) && e.v.type == 0);
  /* an empty document yields nothing */
  bson_t empty = BSON_INITIALIZER;
  uint32_t off = 0;
  CHECK(!dtx__belem_next(bson_get_data(&empty), empty.len, &off, &e));
  dtx__bval_t root = dtx__bval_of_doc(d, b.len);
  uint32_t dl;
  CHECK(root.type == BSON_TYPE_DOCUMENT && dtx__bval_doc(&root, &dl) == d &&
        dl == b.len);
  bson_destroy(&b);
  printf("  readers: %zu payloads read back\n", checked);
}

/* ---- the bridge ------------------------------------------------------------- */

/* Each BSON type as relaxed Extended JSON. */
static void test_to_ejson(void) {
  REQUIRE(build_ladder());
  size_t n = 0;
  for (size_t i = 0; i < NLADDER; i++) {
    if (!ladder[i].ej)
      continue;
    json_t *want = Q(ladder[i].ej), *got = NULL;
    int rc = dtx__bval_to_json(&lad[i], &got);
    CHECKF(rc == 0, "row %zu: %s", i, dtx_errdetail());
    if (!bdiff_json_same(want, got)) {
      char *g = got ? dtx__json_dump(got) : NULL;
      CHECKF(0, "row %zu: got %s want %s", i, g ? g : "NULL", ladder[i].ej);
      free(g);
    }
    json_decref(want);
    json_decref(got);
    n++;
  }
  /* Every type the ladder holds reaches JSON without error. */
  json_t *all = NULL;
  CHECK(dtx__bson_to_json(bson_get_data(&lad_doc), lad_doc.len, 0, &all) == 0);
  CHECK(all && json_object_size(all) == NLADDER);
  json_decref(all);
  printf("  to Extended JSON: %zu rows\n", n);
}

/* JSON -> BSON -> JSON is the identity (types, key order, NULs). */
static void test_round_trip(void) {
  static const char *rows[] = {
      "{}", "[]", "{'a':1}", "{'a':1.0}", "{'a':-0.0}", "{'b':1,'a':2}",
      "{'a':2147483647,'b':2147483648,'c':-2147483648,'d':-2147483649}",
      "{'a':9223372036854775807,'b':-9223372036854775808}",
      "{'a':1e300,'b':5e-324,'c':0.1}", "{'a':'','b':'x','c':'\xc3\xa9\xe2\x82\xac'}",
      "{'a':true,'b':false,'c':null}", "{'a':{'b':{'c':{'d':[1,[2,[3]]]}}}}",
      "[1,'a',null,{'x':[]},[[]]]", "{'$numberLong':'5'}", "{'$oid':1}",
      "{'a.b':1,'':2,'$x':3}", "{'a':[{'b':1},{'b':[1,2]}]}",
      "{'changes':[{'account':1,'amount':5},{'account':1234,'amount':-5}]}",
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    json_t *j = Q(rows[i]);
    bson_t b = BSON_INITIALIZER;
    CHECKF(dtx__bson_from_json(j, &b) == 0, "%s", rows[i]);
    CHECKF(bdiff_same(j, bson_get_data(&b), b.len), "%s", rows[i]);
    /* and as one value */
    bson_t h = BSON_INITIALIZER;
    dtx__bval_t v;
    json_t *back = NULL;
    CHECK(dtx__bval_from_json(j, &h, &v) == 0);
    CHECK(dtx__bval_to_json(&v, &back) == 0);
    CHECKF(bdiff_json_same(j, back), "value %s", rows[i]);
    json_decref(back);
    bson_destroy(&h);
    bson_destroy(&b);
    json_decref(j);
  }
  /* Scalars as values; a string holding a NUL keeps it. */
  static const char *scalars[] = {"1", "-1", "4294967296", "1.5", "\"s\"",
                                  "true", "false", "null"};
  bson_t h = BSON_INITIALIZER;
  for (size_t i = 0; i < sizeof scalars / sizeof scalars[0]; i++) {
    json_t *j = J(scalars[i]), *back = NULL;
    dtx__bval_t v;
    CHECK(dtx__bval_from_json(j, &h, &v) == 0);
    CHECK(dtx__bval_to_json(&v, &back) == 0 && bdiff_json_same(j, back));
    json_decref(j);
    json_decref(back);
  }
  json_t *nul = json_stringn("a\0b", 3), *back = NULL;
  dtx__bval_t v;
  CHECK(dtx__bval_from_json(nul, &h, &v) == 0 && v.type == BSON_TYPE_UTF8);
  CHECK(dtx__bval_to_json(&v, &back) == 0 && bdiff_json_same(nul, back));
  json_decref(nul);
  json_decref(back);
  /* int32 vs int64 by range */
  json_t *i32 = J("2147483647"), *i64 = J("2147483648");
  CHECK(dtx__bval_from_json(i32, &h, &v) == 0 && v.type == BSON_TYPE_INT32);
  CHECK(dtx__bval_from_json(i64, &h, &v) == 0 && v.type == BSON_TYPE_INT64);
  json_decref(i32);
  json_decref(i64);
  bson_destroy(&h);
  /* What the bridge refuses. */
  bson_t b = BSON_INITIALIZER;
  json_t *s = J("\"x\"");
  CHECK_RC(dtx__bson_from_json(s, &b), DTX_EINVAL);
  json_decref(s);
  json_t *k = json_object();
  json_object_setn_new_nocheck(k, "a\0b", 3, json_integer(1));
  bson_reinit(&b);
  CHECK_RC(dtx__bson_from_json(k, &b), DTX_EINVAL);
  json_decref(k);
  /* Text that is not UTF-8 (an unchecked body) is refused, by kind. */
  static const char bad[] = "f\xa9)";
  for (int kind = 0; kind < 5; kind++) {
    bson_t u = BSON_INITIALIZER;
    bson_oid_t o;
    memset(&o, 0, sizeof o);
    if (kind == 0)
      bson_append_utf8(&u, "s", -1, bad, -1);
    else if (kind == 1)
      bson_append_code(&u, "c", -1, bad);
    else if (kind == 2)
      bson_append_regex(&u, "r", -1, bad, "");
    else if (kind == 3)
      bson_append_dbpointer(&u, "p", -1, bad, &o);
    else
      bson_append_int32(&u, bad, -1, 1);
    json_t *out = NULL;
    CHECK_RC(dtx__bson_to_json(bson_get_data(&u), u.len, 0, &out), DTX_EINVAL);
    CHECK(out == NULL);
    bson_destroy(&u);
  }
  dtx__bval_t missing = {BSON_TYPE_EOD, 0, NULL};
  json_t *m = NULL;
  CHECK_RC(dtx__bval_to_json(&missing, &m), DTX_EINVAL);
  CHECK(m == NULL);
  bson_destroy(&b);
}

/* Deep nesting through the bridge both ways (jansson parses 2048 levels). */
static void test_deep(void) {
  json_t *j = JNEST(2000, "k");
  bson_t b = BSON_INITIALIZER;
  CHECK(dtx__bson_from_json(j, &b) == 0);
  CHECK(bdiff_same(j, bson_get_data(&b), b.len));
  json_decref(j);
  bson_destroy(&b);
  j = JNEST(5000, "k");
  bson_init(&b);
  CHECK_RC(dtx__bson_from_json(j, &b), DTX_EINVAL);
  json_decref(j);
  bson_destroy(&b);
}

int main(void) {
  TEST_RUN(test_order);
  TEST_RUN(test_missing);
  TEST_RUN(test_brackets_agree);
  TEST_RUN(test_order_differential);
  TEST_RUN(test_types);
  TEST_RUN(test_readers);
  TEST_RUN(test_to_ejson);
  TEST_RUN(test_round_trip);
  TEST_RUN(test_deep);
  bson_destroy(&lad_doc);
  return TEST_DONE();
}
