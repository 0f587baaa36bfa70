/* value.c -- MongoDB's total order over JSON values.
 *
 * Every comparison in doctx (filter operators, sort, $min/$max, index keys)
 * goes through dtx__value_cmp(), so they all agree.  The order is MongoDB's
 * BSON order restricted to the JSON types: null < numbers < strings <
 * objects < arrays < booleans.  Numbers compare by mathematical value across
 * int64 and double without rounding, which matters for money stored as
 * large integers: 9007199254740993 is greater than 9007199254740992.0 even
 * though a double cannot tell them apart.
 */
#include "doc/doc.h"
#include "util/buf.h"
#include "util/err.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

int dtx__value_bracket(const json_t *v) {
  if (!v)
    return 1; /* a missing value sorts and compares as null */
  switch (json_typeof(v)) {
  case JSON_NULL:
    return 1;
  case JSON_INTEGER:
  case JSON_REAL:
    return 2;
  case JSON_STRING:
    return 3;
  case JSON_OBJECT:
    return 4;
  case JSON_ARRAY:
    return 5;
  case JSON_TRUE:
  case JSON_FALSE:
    return 8;
  }
  return 1;
}

static int sign_ll(long long a, long long b) { return (a > b) - (a < b); }

/* Compares an int64 with a double exactly.  Converting the integer to double
 * would round above 2^53, so the double's integral part is converted to
 * int64 instead (exact whenever it is in range) and the fraction breaks the
 * tie.  NaN sorts below every number, as in MongoDB. */
static int cmp_int_real(json_int_t i, double d) {
  if (isnan(d))
    return 1;
  if (d >= 9223372036854775808.0) /* 2^63: above every int64 */
    return -1;
  if (d < -9223372036854775808.0)
    return 1;
  /* The conversion truncates toward zero and is exact in this range, and
   * the truncated value is itself a double (no libm needed for trunc). */
  json_int_t ti = (json_int_t)d;
  double t = (double)ti;
  if (i != ti)
    return i < ti ? -1 : 1;
  double frac = d - t;
  return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int cmp_real(double a, double b) {
  if (isnan(a))
    return isnan(b) ? 0 : -1;
  if (isnan(b))
    return 1;
  return (a > b) - (a < b);
}

static int cmp_number(const json_t *a, const json_t *b) {
  int ai = json_is_integer(a), bi = json_is_integer(b);
  if (ai && bi)
    return sign_ll(json_integer_value(a), json_integer_value(b));
  if (ai)
    return cmp_int_real(json_integer_value(a), json_real_value(b));
  if (bi)
    return -cmp_int_real(json_integer_value(b), json_real_value(a));
  return cmp_real(json_real_value(a), json_real_value(b));
}

/* Bytewise, as MongoDB's default (simple) collation; a prefix sorts first. */
static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn) {
  int r = memcmp(a, b, an < bn ? an : bn);
  if (r)
    return r < 0 ? -1 : 1;
  return (an > bn) - (an < bn);
}

/* MongoDB compares objects pair by pair in stored order: first the types of
 * the two values, then the field names, then the values; an object that
 * runs out of pairs first is the smaller. */
static int cmp_object(const json_t *a, const json_t *b) {
  void *ia = json_object_iter((json_t *)a);
  void *ib = json_object_iter((json_t *)b);
  while (ia && ib) {
    const json_t *va = json_object_iter_value(ia);
    const json_t *vb = json_object_iter_value(ib);
    int r = dtx__value_bracket(va) - dtx__value_bracket(vb);
    if (r)
      return r < 0 ? -1 : 1;
    r = cmp_bytes(json_object_iter_key(ia), json_object_iter_key_len(ia),
                  json_object_iter_key(ib), json_object_iter_key_len(ib));
    if (r)
      return r;
    r = dtx__value_cmp(va, vb);
    if (r)
      return r;
    ia = json_object_iter_next((json_t *)a, ia);
    ib = json_object_iter_next((json_t *)b, ib);
  }
  return (ia != NULL) - (ib != NULL);
}

static int cmp_array(const json_t *a, const json_t *b) {
  size_t an = json_array_size(a), bn = json_array_size(b);
  for (size_t i = 0; i < an && i < bn; i++) {
    int r = dtx__value_cmp(json_array_get(a, i), json_array_get(b, i));
    if (r)
      return r;
  }
  return (an > bn) - (an < bn);
}

/* Returns -1, 0 or 1.  NULL (a missing value) compares as null. */
int dtx__value_cmp(const json_t *a, const json_t *b) {
  int ba = dtx__value_bracket(a), bb = dtx__value_bracket(b);
  if (ba != bb)
    return ba < bb ? -1 : 1;
  switch (ba) {
  case 2:
    return cmp_number(a, b);
  case 3:
    return cmp_bytes(json_string_value(a), json_string_length(a),
                     json_string_value(b), json_string_length(b));
  case 4:
    return cmp_object(a, b);
  case 5:
    return cmp_array(a, b);
  case 8:
    return json_is_true(a) - json_is_true(b);
  default:
    return 0; /* null == null */
  }
}

/* ---- canonical keys and sizes --------------------------------------------- */

static void key_put(dtx__buf_t *b, const void *p, size_t n) {
  dtx__buf_put(b, p, n);
}

static void key_len(dtx__buf_t *b, size_t n) {
  uint32_t x = (uint32_t)n;
  key_put(b, &x, sizeof x);
}

/* Numbers by value: an int64, or a double with an integral value in int64
 * range, is 'i' and the int64; any other double is 'd' and its bits (-0.0
 * is 0 and so an int).  So 1 and 1.0 give one key while 2^53 + 1 and the
 * double next to it do not, exactly as dtx__value_cmp decides. */
static void key_value(dtx__buf_t *b, const json_t *v, int depth) {
  char tag;
  if (depth > 2000) {
    b->oom = 1;
    return;
  }
  if (!v || json_is_null(v)) {
    key_put(b, "n", 1);
    return;
  }
  switch (json_typeof(v)) {
  case JSON_REAL: {
    double d = json_real_value(v);
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0 &&
        d == (double)(json_int_t)d) {
      json_int_t i = (json_int_t)d;
      key_put(b, "i", 1);
      key_put(b, &i, sizeof i);
    } else {
      key_put(b, "d", 1);
      key_put(b, &d, sizeof d);
    }
    return;
  }
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    key_put(b, "i", 1);
    key_put(b, &i, sizeof i);
    return;
  }
  case JSON_STRING:
    key_put(b, "s", 1);
    key_len(b, json_string_length(v));
    key_put(b, json_string_value(v), json_string_length(v));
    return;
  case JSON_TRUE:
    key_put(b, "T", 1);
    return;
  case JSON_FALSE:
    key_put(b, "F", 1);
    return;
  case JSON_OBJECT: {
    const char *k;
    json_t *x;
    tag = 'o';
    key_put(b, &tag, 1);
    key_len(b, json_object_size(v));
    json_object_foreach((json_t *)v, k, x) {
      key_len(b, strlen(k));
      key_put(b, k, strlen(k));
      key_value(b, x, depth + 1);
    }
    return;
  }
  case JSON_ARRAY: {
    size_t i;
    json_t *x;
    tag = 'a';
    key_put(b, &tag, 1);
    key_len(b, json_array_size(v));
    json_array_foreach(v, i, x) key_value(b, x, depth + 1);
    return;
  }
  default:
    return;
  }
}

const char *dtx__value_type_name(const json_t *v, int vocab) {
  /* by json_type: object, array, string, integer, real, true, false, null */
  static const char *const names[][8] = {
      {"object", "array", "string", "long", "double", "bool", "bool", "null"},
      {"object", "array", "string", "int", "double", "bool", "bool", "null"},
      {"object", "array", "string", "integer", "real", "boolean", "boolean",
       "null"},
  };
  return v ? names[vocab][json_typeof(v)] : "missing";
}

int dtx__value_key(const json_t *v, dtx__buf_t *b) {
  key_value(b, v, 0);
  return b->oom ? -1 : 0;
}

/* The bytes v takes in BSON as the json_t bridge writes it (bjson.c):
 * a string 4 + its bytes + 1, an integer 4 when it fits int32 else 8, a
 * real 8, a boolean 1, null 0, an object or array 4 + its elements + 1,
 * each element a type byte, its name (an array's index in decimal) and
 * a NUL, then its value -- so a document's count is its stored size
 * exactly, and the 16 MiB limit is MongoDB's, on every backend.
 * levels (may be NULL): the deepest container's level seen (the top one
 * is 1), exact when the count stays within cap. */
static size_t index_digits(size_t i) {
  size_t d = 1;
  while (i >= 10) {
    i /= 10;
    d++;
  }
  return d;
}

static size_t bson_size(const json_t *v, size_t cap, size_t n, int depth,
                        int *levels) {
  const char *k;
  json_t *x;
  size_t i;
  if (n > cap)
    return n;
  /* Past the depth limit the count is refused as too big: a value that
   * deep is no document (bounded recursion). */
  if (depth > 4 * DTX_MAX_DEPTH)
    return cap + 1;
  switch (json_typeof(v)) {
  case JSON_STRING:
    return n + 5 + json_string_length(v);
  case JSON_OBJECT:
    n += 5;
    if (levels && depth + 1 > *levels)
      *levels = depth + 1;
    json_object_foreach((json_t *)v, k, x) {
      n = bson_size(x, cap, n + 2 + strlen(k), depth + 1, levels);
      if (n > cap)
        return n;
    }
    return n;
  case JSON_ARRAY:
    n += 5;
    if (levels && depth + 1 > *levels)
      *levels = depth + 1;
    json_array_foreach(v, i, x) {
      n = bson_size(x, cap, n + 2 + index_digits(i), depth + 1, levels);
      if (n > cap)
        return n;
    }
    return n;
  case JSON_INTEGER: {
    json_int_t iv = json_integer_value(v);
    return n + (iv >= INT32_MIN && iv <= INT32_MAX ? 4 : 8);
  }
  case JSON_REAL:
    return n + 8;
  case JSON_TRUE:
  case JSON_FALSE:
    return n + 1;
  default: /* null */
    return n;
  }
}

size_t dtx__value_bson_size(const json_t *v, size_t cap) {
  return v ? bson_size(v, cap, 0, 0, NULL) : 0;
}

size_t dtx__value_bson_shape(const json_t *v, size_t cap, int *levels) {
  *levels = 0;
  return v ? bson_size(v, cap, 0, 0, levels) : 0;
}

int dtx__doc_size_check(const json_t *doc, const char *what) {
  if (dtx__value_bson_size(doc, DTX__DOC_MAX) <= DTX__DOC_MAX)
    return 0;
  return dtx__err(DTX_ELIMIT,
                  "%s would hold more than 16 MiB (%zu bytes), the limit of "
                  "a document",
                  what, DTX__DOC_MAX);
}

/* What a value costs in memory, roughly: jansson's node plus its text. */
size_t dtx__value_size(const json_t *v) {
  size_t n = 48;
  const char *k;
  json_t *x;
  size_t i;
  if (!v) /* a missing value */
    return n;
  switch (json_typeof(v)) {
  case JSON_STRING:
    return n + json_string_length(v);
  case JSON_OBJECT:
    json_object_foreach((json_t *)v, k, x) n += 32 + strlen(k) +
                                                  dtx__value_size(x);
    return n;
  case JSON_ARRAY:
    json_array_foreach(v, i, x) n += 8 + dtx__value_size(x);
    return n;
  default:
    return n;
  }
}
