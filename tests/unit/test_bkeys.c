/* test_bkeys.c -- dtx__bkey_encode: memcmp order is dtx__bval_cmp's order.
 *
 * A ladder of values of every BSON type, written in ascending order with
 * ties marked, is checked over all pairs: the sign of memcmp of the
 * encodings, the sign of dtx__bval_cmp and the ladder's own order must
 * agree, and encodings are equal exactly on ties; descending encodings
 * reverse it.  Then a few hundred thousand random pairs of numbers of the
 * four numeric types (drawn to land close to each other and to the
 * edges: 2^53, 2^63, 34-digit decimals, subnormals) with a fixed seed.
 * Then the BSON-only sides of index keys: the same tuple from int32,
 * int64, double and decimal values, and key order across types. */
#include "testlib.h"

#include "doc/bproj.h"
#include "util/buf.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- building values -------------------------------------------------------- */

typedef enum {
  V_MINKEY, V_MAXKEY, V_NULL, V_UNDEF, V_I32, V_I64, V_DBL, V_DEC, V_STR,
  V_SYM, V_CODE, V_JSON, V_JSONARR, V_BIN, V_OID, V_BOOL, V_DATE, V_TS,
  V_REGEX, V_DBPTR, V_CODEWS
} vkind_t;

typedef struct lv {
  int tie; /* equal to the value before it */
  vkind_t k;
  int64_t i;
  double d;
  const char *s; /* decimal text, string, JSON, regex pattern, code ... */
  size_t n;      /* string length (NULs inside), binData length */
  const char *s2; /* regex flags, scope JSON */
} lv_t;

#define I32(x) {0, V_I32, x, 0, NULL, 0, NULL}
#define I64(x) {0, V_I64, x, 0, NULL, 0, NULL}
#define DBL(x) {0, V_DBL, 0, x, NULL, 0, NULL}
#define DEC(x) {0, V_DEC, 0, 0, x, 0, NULL}
#define STR(x) {0, V_STR, 0, 0, x, sizeof x - 1, NULL}
#define OBJ(x) {0, V_JSON, 0, 0, x, 0, NULL}
#define ARR(x) {0, V_JSONARR, 0, 0, x, 0, NULL}
#define BIN(sub, x) {0, V_BIN, sub, 0, x, sizeof x - 1, NULL}
#define OID(x) {0, V_OID, 0, 0, x, 0, NULL}
#define DATE(x) {0, V_DATE, x, 0, NULL, 0, NULL}
#define TS(t, i) {0, V_TS, (int64_t)(t) << 32 | (i), 0, NULL, 0, NULL}
#define RE(p, f) {0, V_REGEX, 0, 0, p, 0, f}
#define T(...) {1, __VA_ARGS__}
/* A tie: the same initialisers with the tie flag set. */
#define TI32(x) {1, V_I32, x, 0, NULL, 0, NULL}
#define TI64(x) {1, V_I64, x, 0, NULL, 0, NULL}
#define TDBL(x) {1, V_DBL, 0, x, NULL, 0, NULL}
#define TDEC(x) {1, V_DEC, 0, 0, x, 0, NULL}

static const lv_t ladder[] = {
    {0, V_MINKEY, 0, 0, NULL, 0, NULL},
    {0, V_NULL, 0, 0, NULL, 0, NULL},
    {1, V_UNDEF, 0, 0, NULL, 0, NULL},
    /* numbers */
    DBL(NAN),
    TDEC("NaN"),
    TDEC("-NaN"),
    DBL(-INFINITY),
    TDEC("-Infinity"),
    DEC("-9.999999999999999999999999999999999E+6144"),
    DEC("-1E+400"),
    DBL(-DBL_MAX),
    DBL(-1e300),
    DBL(-18446744073709551616.0),
    DBL(-9223372036854775808.0),
    TI64(INT64_MIN),
    TDEC("-9223372036854775808"),
    I64(-9223372036854775807),
    DEC("-9007199254740993"),
    TI64(-9007199254740993),
    I64(-9007199254740992),
    TDBL(-9007199254740992.0),
    I32(INT32_MIN),
    TI64(INT32_MIN),
    TDBL(-2147483648.0),
    DBL(-1.5),
    TDEC("-1.50"),
    I32(-1),
    TI64(-1),
    TDBL(-1.0),
    TDEC("-1"),
    TDEC("-1.000000000000000000000000000000000"),
    DEC("-0.9999999999999999999999999999999999"),
    DBL(-0.5),
    TDEC("-5E-1"),
    DBL(-0.1), /* -0.1000000000000000055511151231257827... */
    DEC("-0.1"),
    DEC("-1E-300"),
    DBL(-4.9406564584124654e-324),
    DEC("-1E-6176"),
    I32(0),
    TI64(0),
    TDBL(0.0),
    TDBL(-0.0),
    TDEC("0"),
    TDEC("-0"),
    TDEC("0E+300"),
    TDEC("-0E-6176"),
    DEC("1E-6176"),
    DEC("1E-400"),
    DBL(4.9406564584124654e-324),
    DBL(2.2250738585072014e-308),
    DEC("0.1"),
    DBL(0.1),
    DBL(0.5),
    TDEC("0.50"),
    DEC("0.9999999999999999999999999999999999"),
    I32(1),
    TI64(1),
    TDBL(1.0),
    TDEC("1"),
    TDEC("1.00"),
    TDEC("100E-2"),
    DEC("1.000000000000000000000000000000001"),
    DBL(1.0000000000000002),
    DBL(1.5),
    I32(2),
    DEC("2.000000000000000000000000000000001"),
    I32(10),
    TDEC("1E+1"),
    I32(INT32_MAX),
    I64(2147483648),
    TDBL(2147483648.0),
    I64(9007199254740992),
    TDBL(9007199254740992.0),
    I64(9007199254740993),
    TDEC("9007199254740993"),
    I64(9007199254740994),
    TDBL(9007199254740994.0),
    I64(INT64_MAX),
    TDEC("9223372036854775807"),
    DEC("9223372036854775807.5"),
    DBL(9223372036854775808.0),
    TDEC("9223372036854775808"),
    DBL(18446744073709551616.0),
    DEC("9999999999999999999999999999999999"),
    DBL(1e300),
    DBL(DBL_MAX),
    DEC("1E+400"),
    DEC("9.999999999999999999999999999999999E+6144"),
    DBL(INFINITY),
    TDEC("Infinity"),
    /* strings and symbols: bytewise, a NUL inside counts */
    STR(""),
    {1, V_SYM, 0, 0, "", 0, NULL},
    STR("\0"),
    STR("\0\0"),
    STR("\0\x01"),
    STR("\x01"),
    STR("A"),
    STR("a"),
    STR("a\0"),
    STR("a\0b"),
    STR("a\x01"),
    STR("ab"),
    STR("b"),
    {1, V_SYM, 0, 0, "b", 1, NULL},
    STR("\xc3\xa9"),
    /* objects: field by field (type, name, value), shorter first */
    OBJ("{}"),
    OBJ("{\"a\":null}"), /* the value's type before the name */
    OBJ("{\"\":1}"),
    OBJ("{\"a\":1}"),
    T(V_JSON, 0, 0, "{\"a\":1.0}", 0, NULL),
    OBJ("{\"a\":1,\"b\":1}"),
    OBJ("{\"a\":2}"),
    OBJ("{\"b\":1}"),
    OBJ("{\"a\":\"x\"}"),
    OBJ("{\"a\":{}}"),
    OBJ("{\"a\":{\"b\":[]}}"),
    OBJ("{\"a\":[]}"),
    OBJ("{\"a\":true}"),
    /* arrays: element by element, shorter first */
    ARR("[]"),
    ARR("[null]"),
    ARR("[1]"),
    T(V_JSONARR, 0, 0, "[1.0]", 0, NULL),
    ARR("[1,1]"),
    ARR("[2]"),
    ARR("[\"a\"]"),
    ARR("[{}]"),
    ARR("[[]]"),
    ARR("[[1]]"),
    ARR("[false]"),
    /* binData: length, then subtype, then bytes */
    BIN(0, ""),
    BIN(5, ""),
    BIN(0, "\0"),
    BIN(0, "\xff"),
    BIN(4, "\0"),
    BIN(0, "\0\0"),
    OID("000000000000000000000000"),
    OID("000000000000000000000001"),
    OID("ffffffffffffffffffffffff"),
    {0, V_BOOL, 0, 0, NULL, 0, NULL},
    {0, V_BOOL, 1, 0, NULL, 0, NULL},
    DATE(INT64_MIN),
    DATE(-1),
    DATE(0),
    DATE(1),
    DATE(INT64_MAX),
    TS(0, 0),
    TS(0, 1),
    TS(1, 0),
    TS(0xffffffffu, 0xffffffffu),
    RE("", ""),
    RE("", "i"),
    RE("a", ""),
    RE("a", "i"),
    RE("a", "m"),
    RE("ab", ""),
    /* after regex, as MongoDB's canonical types: dbPointer (by payload
     * size, then bytes), JavaScript, JavaScript with scope */
    {0, V_DBPTR, 0, 0, "", 0, NULL},
    {0, V_DBPTR, 0, 0, "a", 0, NULL},
    {0, V_DBPTR, 0, 0, "b", 0, NULL},
    {0, V_CODE, 0, 0, "", 0, NULL},
    {0, V_CODE, 0, 0, "a", 0, NULL},
    {0, V_CODE, 0, 0, "ab", 0, NULL},
    {0, V_CODEWS, 0, 0, "a", 0, NULL},
    {0, V_CODEWS, 0, 0, "b", 0, NULL},
    {0, V_MAXKEY, 0, 0, NULL, 0, NULL},
};

#define NLADDER (sizeof ladder / sizeof ladder[0])

static void append_lv(bson_t *b, const char *key, const lv_t *v) {
  bson_decimal128_t dec;
  bson_oid_t oid;
  bson_t sub;
  bson_error_t err;
  switch (v->k) {
  case V_MINKEY:
    bson_append_minkey(b, key, -1);
    break;
  case V_MAXKEY:
    bson_append_maxkey(b, key, -1);
    break;
  case V_NULL:
    bson_append_null(b, key, -1);
    break;
  case V_UNDEF:
    bson_append_undefined(b, key, -1);
    break;
  case V_I32:
    bson_append_int32(b, key, -1, (int32_t)v->i);
    break;
  case V_I64:
    bson_append_int64(b, key, -1, v->i);
    break;
  case V_DBL:
    bson_append_double(b, key, -1, v->d);
    break;
  case V_DEC:
    if (!bson_decimal128_from_string(v->s, &dec))
      abort();
    bson_append_decimal128(b, key, -1, &dec);
    break;
  case V_STR:
    bson_append_utf8(b, key, -1, v->s, (int)v->n);
    break;
  case V_SYM:
    bson_append_symbol(b, key, -1, v->s, (int)v->n);
    break;
  case V_CODE:
    bson_append_code(b, key, -1, v->s);
    break;
  case V_JSON:
  case V_JSONARR: {
    /* libbson's JSON reader: a test helper only (the engine's bridge is
     * tested by its own suite); an array is read as {"a": [...]} */
    char buf[256];
    bson_t tmp;
    bson_iter_t it;
    snprintf(buf, sizeof buf, "{\"a\":%s}", v->s);
    if (!bson_init_from_json(&tmp, buf, -1, &err) ||
        !bson_iter_init_find(&it, &tmp, "a") ||
        !bson_append_iter(b, key, -1, &it))
      abort();
    bson_destroy(&tmp);
    break;
  }
  case V_BIN:
    bson_append_binary(b, key, -1, (bson_subtype_t)v->i,
                       (const uint8_t *)v->s, (uint32_t)v->n);
    break;
  case V_OID:
    bson_oid_init_from_string(&oid, v->s);
    bson_append_oid(b, key, -1, &oid);
    break;
  case V_BOOL:
    bson_append_bool(b, key, -1, v->i != 0);
    break;
  case V_DATE:
    bson_append_date_time(b, key, -1, v->i);
    break;
  case V_TS:
    bson_append_timestamp(b, key, -1, (uint32_t)((uint64_t)v->i >> 32),
                          (uint32_t)v->i);
    break;
  case V_REGEX:
    bson_append_regex(b, key, -1, v->s, v->s2);
    break;
  case V_DBPTR:
    bson_oid_init_from_string(&oid, "000000000000000000000001");
    bson_append_dbpointer(b, key, -1, v->s, &oid);
    break;
  case V_CODEWS:
    bson_init(&sub);
    bson_append_int32(&sub, "x", -1, 1);
    bson_append_code_with_scope(b, key, -1, v->s, &sub);
    bson_destroy(&sub);
    break;
  }
}

/* Views of every element of doc, in order (at most max). */
static size_t views(const bson_t *doc, dtx__bval_t *out, size_t max) {
  uint32_t off = 0;
  dtx__belem_t e;
  size_t n = 0;
  while (n < max &&
         dtx__belem_next(bson_get_data(doc), doc->len, &off, &e))
    out[n++] = e.v;
  return n;
}

static int sgn(int x) { return (x > 0) - (x < 0); }

static int bytes_cmp(const dtx__buf_t *a, const dtx__buf_t *b) {
  size_t n = a->n < b->n ? a->n : b->n;
  int c = memcmp(a->p, b->p, n);
  if (c)
    return sgn(c);
  return a->n < b->n ? -1 : a->n > b->n;
}

static void enc(const dtx__bval_t *v, int desc, dtx__buf_t *b) {
  b->n = 0;
  int rc = dtx__bkey_encode(v, desc, b);
  if (rc)
    abort();
}

/* ---- the ladder ------------------------------------------------------------ */

static void test_ladder(void) {
  bson_t doc = BSON_INITIALIZER;
  dtx__bval_t v[NLADDER];
  int rank[NLADDER], r = 0, bad = 0;
  char key[16];
  for (size_t i = 0; i < NLADDER; i++) {
    snprintf(key, sizeof key, "%zu", i);
    append_lv(&doc, key, &ladder[i]);
    r += i > 0 && !ladder[i].tie;
    rank[i] = r;
  }
  REQUIRE(views(&doc, v, NLADDER) == NLADDER);
  dtx__buf_t *e = calloc(NLADDER, sizeof *e), *d = calloc(NLADDER, sizeof *d);
  for (size_t i = 0; i < NLADDER; i++) {
    enc(&v[i], 0, &e[i]);
    enc(&v[i], 1, &d[i]);
  }
  for (size_t i = 0; i < NLADDER; i++)
    for (size_t j = 0; j < NLADDER; j++) {
      int want = sgn(rank[i] - rank[j]);
      int c = sgn(dtx__bval_cmp(&v[i], &v[j]));
      int m = bytes_cmp(&e[i], &e[j]), md = bytes_cmp(&d[i], &d[j]);
      if ((c != want || m != want || md != -want) && bad++ < 20)
        CHECKF(0, "ladder %zu vs %zu: want %d, cmp %d, memcmp %d, desc %d",
               i, j, want, c, m, md);
    }
  CHECKF(bad == 0, "%d ladder pairs disagree (of %zu)", bad,
         NLADDER * NLADDER);
  printf("bkeys ladder: %zu values, %zu pairs\n", NLADDER, NLADDER * NLADDER);
  for (size_t i = 0; i < NLADDER; i++) {
    free(e[i].p);
    free(d[i].p);
  }
  free(e);
  free(d);
  bson_destroy(&doc);
}

/* ---- random numbers --------------------------------------------------------- */

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd64(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return rs;
}
static unsigned rnd(unsigned n) { return (unsigned)(rnd64() % n); }

/* Bases the numbers cluster around, so that ties and near-ties across
 * types are common. */
static const double bases[] = {0, 1, -1, 0.5, 10, 1e15, 9007199254740992.0,
                               -9007199254740992.0, 9223372036854775808.0,
                               -9223372036854775808.0, 2147483648.0, 1e-5,
                               123456789.125};

static void append_dec_text(bson_t *b, const char *key, const char *s) {
  bson_decimal128_t dec;
  if (!bson_decimal128_from_string(s, &dec))
    abort();
  bson_append_decimal128(b, key, -1, &dec);
}

/* One random number of a random type into b under key. */
static void rnd_number(bson_t *b, const char *key) {
  double base = bases[rnd(sizeof bases / sizeof bases[0])];
  char s[80];
  switch (rnd(9)) {
  case 0:
    bson_append_int32(b, key, -1,
                      rnd(2) ? (int32_t)rnd(11) - 5 : (int32_t)rnd64());
    break;
  case 1: { /* an int64 near the base */
    int64_t x = base >= 9223372036854775807.0    ? INT64_MAX
                : base <= -9223372036854775808.0 ? INT64_MIN
                                                 : (int64_t)base;
    int64_t dx = (int64_t)rnd(7) - 3;
    if ((dx > 0 && x > INT64_MAX - dx) || (dx < 0 && x < INT64_MIN - dx))
      dx = 0;
    bson_append_int64(b, key, -1, rnd(4) ? x + dx : (int64_t)rnd64());
    break;
  }
  case 2: /* a double at or next to the base */
    bson_append_double(b, key, -1,
                       rnd(2) ? base
                       : rnd(2) ? nextafter(base, INFINITY)
                                : nextafter(base, -INFINITY));
    break;
  case 3: { /* any bit pattern: subnormals, NaNs, infinities */
    uint64_t bits = rnd64();
    double x;
    memcpy(&x, &bits, sizeof x);
    bson_append_double(b, key, -1, x);
    break;
  }
  case 4: /* a double the base plus a small binary fraction */
    bson_append_double(b, key, -1, base + (double)((int)rnd(17) - 8) / 8.0);
    break;
  case 5: /* the base as a decimal with trailing zeros or an exponent */
    if (fabs(base) < 1e17 && base == floor(base))
      snprintf(s, sizeof s, "%.0f%s", base, rnd(2) ? ".000" : "");
    else
      snprintf(s, sizeof s, "%.17g", base);
    append_dec_text(b, key, s);
    break;
  case 6: { /* random digits, random exponent (small or huge) */
    int nd = 1 + (int)rnd(34), o = 0;
    if (rnd(2))
      s[o++] = '-';
    for (int i = 0; i < nd; i++)
      s[o++] = (char)('0' + rnd(10));
    int e = rnd(4) ? (int)rnd(41) - 20 : (int)rnd(12000) - 6000;
    snprintf(s + o, sizeof s - (size_t)o, "E%d", e);
    append_dec_text(b, key, s);
    break;
  }
  case 7: { /* the base +- one unit in the 34th digit */
    snprintf(s, sizeof s, "%.33e", base);
    size_t n = strlen(s);
    char *e = strchr(s, 'e');
    if (e && e > s && rnd(2)) {
      char *last = e - 1;
      if (*last < '9')
        (*last)++;
    }
    (void)n;
    append_dec_text(b, key, s);
    break;
  }
  default: { /* specials */
    static const char *sp[] = {"NaN", "Infinity", "-Infinity", "-0", "0E-50"};
    append_dec_text(b, key, sp[rnd(5)]);
    break;
  }
  }
}

static void test_random_numbers(void) {
  enum { PAIRS = 300000, BATCH = 1000 };
  dtx__buf_t a = {0}, b = {0}, ad = {0}, bd = {0};
  int bad = 0, ties = 0;
  for (int done = 0; done < PAIRS; done += BATCH) {
    bson_t doc = BSON_INITIALIZER;
    char key[16];
    dtx__bval_t v[2 * BATCH];
    for (int i = 0; i < 2 * BATCH; i++) {
      snprintf(key, sizeof key, "%d", i);
      rnd_number(&doc, key);
    }
    REQUIRE(views(&doc, v, 2 * BATCH) == 2 * BATCH);
    for (int i = 0; i < BATCH; i++) {
      const dtx__bval_t *x = &v[2 * i], *y = &v[2 * i + 1];
      int c = sgn(dtx__bval_cmp(x, y));
      enc(x, 0, &a);
      enc(y, 0, &b);
      enc(x, 1, &ad);
      enc(y, 1, &bd);
      int m = bytes_cmp(&a, &b), md = bytes_cmp(&ad, &bd);
      ties += c == 0;
      if ((m != c || md != -c) && bad++ < 10) {
        json_t *jx = NULL, *jy = NULL;
        dtx__bval_to_json(x, &jx);
        dtx__bval_to_json(y, &jy);
        CHECKF(0, "pair %d: %s vs %s: cmp %d memcmp %d desc %d", done + i,
               jx ? JS(jx) : "?", jy ? JS(jy) : "?", c, m, md);
        json_decref(jx);
        json_decref(jy);
      }
    }
    bson_destroy(&doc);
  }
  CHECKF(bad == 0, "%d of %d random pairs disagree", bad, PAIRS);
  CHECKF(ties > PAIRS / 100, "only %d ties among %d pairs", ties, PAIRS);
  printf("bkeys random numbers: %d pairs, %d ties, %d disagreements\n",
         PAIRS, ties, bad);
  free(a.p);
  free(b.p);
  free(ad.p);
  free(bd.p);
}

/* ---- index keys of BSON-only values --------------------------------------- */

/* The same number in four types gives the same key; a compound key keeps
 * each field's direction. */
static void test_index_keys_types(void) {
  dtx__index_spec_t *s = NULL;
  json_t *ks = J("{\"a\":1,\"b\":-1}");
  REQUIRE(dtx__index_spec_parse(ks, NULL, &s) == 0);
  const char *docs[] = {
      "{\"a\":{\"$numberInt\":\"7\"},\"b\":{\"$numberLong\":\"2\"}}",
      "{\"a\":{\"$numberLong\":\"7\"},\"b\":{\"$numberDouble\":\"2.0\"}}",
      "{\"a\":{\"$numberDouble\":\"7.0\"},\"b\":{\"$numberDecimal\":\"2.00\"}}",
      "{\"a\":{\"$numberDecimal\":\"7E0\"},\"b\":{\"$numberInt\":\"2\"}}",
  };
  dtx__bkeys_t k0 = {0}, k = {0};
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    bson_t d;
    bson_error_t err;
    REQUIRE(bson_init_from_json(&d, docs[i], -1, &err));
    CHECK_RC(dtx__bindex_keys(s, bson_get_data(&d), d.len, i ? &k : &k0), 0);
    if (i) {
      size_t l0, l;
      const uint8_t *p0 = dtx__bkeys_at(&k0, 0, &l0), *p = dtx__bkeys_at(&k, 0, &l);
      CHECKF(k.n == 1 && l == l0 && !memcmp(p, p0, l), "doc %zu: key differs",
             i);
      CHECK(!k.multikey);
    }
    bson_destroy(&d);
  }
  /* {a: [Date(1), ObjectId, 2]}: three keys, multikey, ordered by type */
  bson_t d;
  bson_error_t err;
  REQUIRE(bson_init_from_json(
      &d,
      "{\"a\":[{\"$date\":{\"$numberLong\":\"1\"}},"
      "{\"$oid\":\"000000000000000000000001\"},2],\"b\":{\"$minKey\":1}}",
      -1, &err));
  CHECK_RC(dtx__bindex_keys(s, bson_get_data(&d), d.len, &k), 0);
  CHECK(k.n == 3 && k.multikey);
  if (k.n == 3) {
    size_t l[3];
    const uint8_t *p[3];
    for (int i = 0; i < 3; i++)
      p[i] = dtx__bkeys_at(&k, (size_t)i, &l[i]);
    /* number < ObjectId < Date */
    CHECK(memcmp(p[2], p[1], l[2] < l[1] ? l[2] : l[1]) < 0);
    CHECK(memcmp(p[1], p[0], l[1] < l[0] ? l[1] : l[0]) < 0);
  }
  bson_destroy(&d);
  /* Both deduplications (pairwise up to 16 keys, sorted past that): the
   * first of equal keys kept in place, across number types. */
  for (int n = 4; n <= 40; n += 36) {
    bson_t arr;
    bson_init(&d);
    BSON_APPEND_ARRAY_BEGIN(&d, "a", &arr);
    for (int i = 0; i < n; i++) {
      char key[16];
      snprintf(key, sizeof key, "%d", i);
      if (i % 2)
        bson_append_double(&arr, key, -1, (double)((n - i) % 3));
      else
        bson_append_int64(&arr, key, -1, (n - i) % 3);
    }
    bson_append_array_end(&d, &arr);
    CHECK_RC(dtx__bindex_keys(s, bson_get_data(&d), d.len, &k), 0);
    CHECKF(k.n == 3 && k.multikey, "%d elements: %zu keys", n, k.n);
    /* first occurrences: (n % 3), ((n - 1) % 3), ((n - 2) % 3) */
    for (size_t i = 0; i < k.n && i < 3; i++) {
      dtx__buf_t want = {0};
      bson_t h = BSON_INITIALIZER, nul = BSON_INITIALIZER;
      bson_append_int32(&h, "v", 1, (n - (int)i) % 3);
      bson_append_null(&nul, "v", 1);
      dtx__belem_t e, en;
      REQUIRE(dtx__belem_find(bson_get_data(&h), h.len, "v", 1, &e));
      REQUIRE(dtx__belem_find(bson_get_data(&nul), nul.len, "v", 1, &en));
      dtx__bkey_encode(&e.v, 0, &want);
      dtx__bkey_encode(&en.v, 1, &want); /* b is missing: null, desc */
      size_t len;
      const uint8_t *p = dtx__bkeys_at(&k, i, &len);
      CHECKF(len == want.n && !memcmp(p, want.p, len), "%d elements: key %zu",
             n, i);
      free(want.p);
      bson_destroy(&h);
      bson_destroy(&nul);
    }
    bson_destroy(&d);
  }
  dtx__bkeys_free(&k0);
  dtx__bkeys_free(&k);
  CHECK(k.n == 0 && k.b.p == NULL);
  dtx__index_spec_free(s);
  json_decref(ks);
}

int main(void) {
  TEST_RUN(test_ladder);
  TEST_RUN(test_random_numbers);
  TEST_RUN(test_index_keys_types);
  return TEST_DONE();
}
