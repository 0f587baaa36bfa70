/* bjson.c -- the bridge between json_t trees and BSON bytes (bdoc.h).
 *
 * Direct both ways, no text in between: JSON -> BSON appends to the
 * caller's bson_t (nested documents are appended in place through
 * libbson's begin/end, so the only allocations are the bson_t's own
 * growth); BSON -> JSON builds the json_t tree from the raw reader.
 *
 * The bridge is what lets every row of the json_t engine's tables run
 * through the BSON engine (tests/common/bdiff.c), so it must be exact:
 * an integer stays an integer (int32 when it fits, else int64), a real
 * stays a double, key order is kept.  Types JSON lacks come out as
 * relaxed Extended JSON v2 objects (the MongoDB manual's "MongoDB
 * Extended JSON (v2)"), and NaN and the infinities, which JSON cannot
 * write as numbers, as {"$numberDouble": "NaN" | "Infinity" |
 * "-Infinity"}.
 */
#include "doc/bdoc.h"
#include "util/err.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* jansson's parser stops at 2048 levels; the bridge accepts a little more
 * (trees built by code), and stops before recursion could exhaust the
 * stack. */
#define BRIDGE_MAX_DEPTH 4096

/* ---- JSON -> BSON ----------------------------------------------------------- */

static int append_value(bson_t *b, const char *key, size_t klen,
                        const json_t *v, int depth);

static int too_big(void) {
  return dtx__err(DTX_ENOMEM, "document too large for BSON");
}

static int append_object(bson_t *b, const json_t *obj, int depth) {
  const char *k;
  size_t klen;
  json_t *v;
  json_object_keylen_foreach((json_t *)obj, k, klen, v) {
    /* BSON names are C strings: a NUL inside cannot be stored. */
    if (memchr(k, '\0', klen))
      return dtx__err(DTX_EINVAL, "key '%s' holds a NUL byte", k);
    int rc = append_value(b, k, klen, v, depth);
    if (rc)
      return rc;
  }
  return 0;
}

static int append_array(bson_t *b, const json_t *arr, int depth) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char buf[16];
    const char *key;
    size_t klen = bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
    int rc = append_value(b, key, klen, v, depth);
    if (rc)
      return rc;
  }
  return 0;
}

static int append_value(bson_t *b, const char *key, size_t klen,
                        const json_t *v, int depth) {
  int k = (int)klen, ok = 0;
  switch (json_typeof(v)) {
  case JSON_OBJECT:
  case JSON_ARRAY: {
    if (depth >= BRIDGE_MAX_DEPTH)
      return dtx__err(DTX_EINVAL, "document nests deeper than %d levels",
                      BRIDGE_MAX_DEPTH);
    bson_t child;
    int arr = json_is_array(v);
    ok = arr ? bson_append_array_begin(b, key, k, &child)
             : bson_append_document_begin(b, key, k, &child);
    if (!ok)
      return too_big();
    int rc = arr ? append_array(&child, v, depth + 1)
                 : append_object(&child, v, depth + 1);
    ok = arr ? bson_append_array_end(b, &child)
             : bson_append_document_end(b, &child);
    if (rc)
      return rc;
    break;
  }
  case JSON_STRING:
    ok = bson_append_utf8(b, key, k, json_string_value(v),
                          (int)json_string_length(v));
    break;
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    ok = i >= INT32_MIN && i <= INT32_MAX
             ? bson_append_int32(b, key, k, (int32_t)i)
             : bson_append_int64(b, key, k, (int64_t)i);
    break;
  }
  case JSON_REAL:
    ok = bson_append_double(b, key, k, json_real_value(v));
    break;
  case JSON_TRUE:
  case JSON_FALSE:
    ok = bson_append_bool(b, key, k, json_is_true(v));
    break;
  case JSON_NULL:
    ok = bson_append_null(b, key, k);
    break;
  }
  return ok ? 0 : too_big();
}

int dtx__bson_from_json(const json_t *v, bson_t *out) {
  if (json_is_object(v))
    return append_object(out, v, 1);
  if (json_is_array(v))
    return append_array(out, v, 1);
  return dtx__err(DTX_EINVAL, "a BSON document is built from an object or "
                              "an array, not a JSON %s",
                  v && json_is_string(v) ? "string" : "scalar");
}

int dtx__bval_from_json(const json_t *v, bson_t *holder, dtx__bval_t *out) {
  /* The new element starts where the holder's trailing NUL is now. */
  uint32_t off = holder->len - 1;
  int rc = append_value(holder, "v", 1, v, 1);
  if (rc)
    return rc;
  dtx__belem_t e;
  if (!dtx__belem_next(bson_get_data(holder), holder->len, &off, &e))
    return dtx__err(DTX_EINVAL, "no value appended"); /* cannot happen */
  *out = e.v;
  return 0;
}

/* ---- BSON -> JSON ----------------------------------------------------------- */

static int doc_to_json(const uint8_t *doc, uint32_t len, int as_array,
                       int depth, json_t **out);

static int oom(void) { return dtx__err(DTX_ENOMEM, "out of memory"); }

/* {key: val}, taking val; NULL when out of memory. */
static json_t *wrap(const char *key, json_t *val) {
  json_t *o = val ? json_object() : NULL;
  if (!o || json_object_set_new(o, key, val)) {
    json_decref(o);
    json_decref(val);
    return NULL;
  }
  return o;
}

/* {k1: v1, k2: v2}, taking both. */
static json_t *pair(const char *k1, json_t *v1, const char *k2, json_t *v2) {
  json_t *o = v1 && v2 ? json_object() : NULL;
  if (!o || json_object_set_new(o, k1, v1) || json_object_set_new(o, k2, v2)) {
    json_decref(o);
    json_decref(v1);
    json_decref(v2);
    return NULL;
  }
  return o;
}

/* JSON strings are UTF-8.  Checked bytes are (dtx__bson_check), but the
 * bridge also reads bodies nobody checked (libbson's validator leaves
 * code and regexes alone), and says so rather than failing as if out of
 * memory.  NULs inside are kept, as BSON strings may hold them. */
/* Pure ASCII (NUL included) is valid UTF-8 to libbson and to jansson
 * alike, so such a key or string goes in unchecked: ids, field names and
 * states are, and the two checks were a third of a stored body's bridge
 * to json_t: the batched transfer's bridge 61.5 M -> 38.5 M instructions
 * (callgrind, docs/benchmarks.md). */
static int ascii(const char *s, size_t n) {
  unsigned char any = 0;
  for (size_t i = 0; i < n; i++)
    any |= (unsigned char)s[i];
  return any < 0x80;
}

static json_t *text(const char *s, size_t n, int *rc) {
  if (ascii(s, n))
    return json_stringn_nocheck(s, n);
  if (!bson_utf8_validate(s, n, true)) {
    *rc = dtx__err(DTX_EINVAL, "string is not valid UTF-8");
    return NULL;
  }
  return json_stringn(s, n);
}

static json_t *str_of(const dtx__bval_t *v, int *rc) {
  uint32_t n;
  const char *s = dtx__bval_str(v, &n);
  return text(s, n, rc);
}

static const char hexd[] = "0123456789abcdef";

static json_t *oid_json(const uint8_t *p) {
  char hex[25];
  for (int i = 0; i < 12; i++) {
    hex[2 * i] = hexd[p[i] >> 4];
    hex[2 * i + 1] = hexd[p[i] & 15];
  }
  hex[24] = '\0';
  return json_string(hex);
}

/* Years 1970..9999 as an ISO-8601 string with milliseconds when there
 * are any (as the Extended JSON corpus writes "1970-01-01T00:00:00Z" and
 * "2012-12-24T12:15:30.501Z"); others as {"$numberLong": "<ms>"}. */
static json_t *date_json(int64_t ms) {
  char t[40];
  if (ms >= 0 && ms <= INT64_C(253402300799999)) {
    time_t secs = (time_t)(ms / 1000);
    int frac = (int)(ms % 1000);
    struct tm tm;
    if (!gmtime_r(&secs, &tm))
      return NULL;
    size_t n = strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    if (frac)
      snprintf(t + n, sizeof t - n, ".%03dZ", frac);
    else
      snprintf(t + n, sizeof t - n, "Z");
    return wrap("$date", json_string(t));
  }
  snprintf(t, sizeof t, "%" PRId64, ms);
  return wrap("$date", wrap("$numberLong", json_string(t)));
}

static json_t *double_json(double d) {
  if (isnan(d))
    return wrap("$numberDouble", json_string("NaN"));
  if (isinf(d))
    return wrap("$numberDouble", json_string(d > 0 ? "Infinity" : "-Infinity"));
  return json_real(d);
}

/* Standard base64 with padding, as $binary's "base64" is. */
static json_t *binary_json(const uint8_t *p, uint32_t n, uint8_t subtype) {
  static const char b64[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t outn = 4 * (((size_t)n + 2) / 3);
  char small[256] = "";
  char *o = outn < sizeof small ? small : malloc(outn + 1);
  if (!o)
    return NULL;
  size_t j = 0;
  for (uint32_t i = 0; i < n; i += 3) {
    uint32_t x = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      x |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      x |= p[i + 2];
    o[j++] = b64[(x >> 18) & 63];
    o[j++] = b64[(x >> 12) & 63];
    o[j++] = i + 1 < n ? b64[(x >> 6) & 63] : '=';
    o[j++] = i + 2 < n ? b64[x & 63] : '=';
  }
  o[j] = '\0';
  json_t *s = json_string(o);
  if (o != small)
    free(o);
  char st[3] = {hexd[subtype >> 4], hexd[subtype & 15], '\0'};
  return wrap("$binary", pair("base64", s, "subType", json_string(st)));
}

static uint32_t ld32(const uint8_t *p) {
  uint32_t x;
  memcpy(&x, p, 4);
  return BSON_UINT32_FROM_LE(x);
}

static json_t *value_json(const dtx__bval_t *v, int depth, int *rc) {
  switch (v->type) {
  case BSON_TYPE_DOCUMENT:
  case BSON_TYPE_ARRAY: {
    json_t *j = NULL;
    *rc = doc_to_json(v->data, v->len, v->type == BSON_TYPE_ARRAY, depth + 1,
                      &j);
    return j;
  }
  case BSON_TYPE_DOUBLE:
    return double_json(dtx__bval_double(v));
  case BSON_TYPE_UTF8:
    return str_of(v, rc);
  case BSON_TYPE_BINARY:
    return binary_json(v->data + 5, ld32(v->data), v->data[4]);
  case BSON_TYPE_UNDEFINED:
    return wrap("$undefined", json_true());
  case BSON_TYPE_OID:
    return wrap("$oid", oid_json(v->data));
  case BSON_TYPE_BOOL:
    return json_boolean(dtx__bval_bool(v));
  case BSON_TYPE_DATE_TIME:
    return date_json(dtx__bval_int64(v));
  case BSON_TYPE_NULL:
    return json_null();
  case BSON_TYPE_REGEX: {
    const char *pat = (const char *)v->data;
    const char *opt = pat + strlen(pat) + 1;
    return wrap("$regularExpression",
                pair("pattern", text(pat, strlen(pat), rc), "options",
                     text(opt, strlen(opt), rc)));
  }
  case BSON_TYPE_DBPOINTER: {
    uint32_t n = ld32(v->data) - 1;
    json_t *ns = text((const char *)v->data + 4, n, rc);
    json_t *id = wrap("$oid", oid_json(v->data + 4 + n + 1));
    return wrap("$dbPointer", pair("$ref", ns, "$id", id));
  }
  case BSON_TYPE_CODE:
    return wrap("$code", str_of(v, rc));
  case BSON_TYPE_SYMBOL:
    return wrap("$symbol", str_of(v, rc));
  case BSON_TYPE_CODEWSCOPE: {
    /* int32 total, string (int32 length, bytes, NUL), scope document */
    uint32_t n = ld32(v->data + 4) - 1;
    const uint8_t *scope = v->data + 8 + n + 1;
    json_t *code = text((const char *)v->data + 8, n, rc);
    if (!code)
      return NULL;
    json_t *sj = NULL;
    *rc = doc_to_json(scope, ld32(scope), 0, depth + 1, &sj);
    if (*rc) {
      json_decref(code);
      return NULL;
    }
    return pair("$code", code, "$scope", sj);
  }
  case BSON_TYPE_INT32:
    return json_integer(dtx__bval_int32(v));
  case BSON_TYPE_TIMESTAMP: {
    uint64_t x;
    memcpy(&x, v->data, 8);
    x = BSON_UINT64_FROM_LE(x);
    return wrap("$timestamp", pair("t", json_integer((json_int_t)(x >> 32)),
                                   "i", json_integer((json_int_t)(uint32_t)x)));
  }
  case BSON_TYPE_INT64:
    return json_integer(dtx__bval_int64(v));
  case BSON_TYPE_DECIMAL128: {
    char s[BSON_DECIMAL128_STRING];
    bson_decimal128_t d = dtx__bval_dec(v);
    bson_decimal128_to_string(&d, s);
    return wrap("$numberDecimal", json_string(s));
  }
  case BSON_TYPE_MINKEY:
    return wrap("$minKey", json_integer(1));
  case BSON_TYPE_MAXKEY:
    return wrap("$maxKey", json_integer(1));
  case BSON_TYPE_EOD:
    break;
  }
  *rc = dtx__err(DTX_EINVAL, "no JSON for a missing value");
  return NULL;
}

static int doc_to_json(const uint8_t *doc, uint32_t len, int as_array,
                       int depth, json_t **out) {
  *out = NULL;
  if (depth > BRIDGE_MAX_DEPTH)
    return dtx__err(DTX_EINVAL, "document nests deeper than %d levels",
                    BRIDGE_MAX_DEPTH);
  json_t *j = as_array ? json_array() : json_object();
  if (!j)
    return oom();
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(doc, len, &off, &e)) {
    int rc = 0, plain = as_array || ascii(e.key, e.keylen);
    if (!plain && !bson_utf8_validate(e.key, e.keylen, false)) {
      json_decref(j);
      return dtx__err(DTX_EINVAL, "a key is not valid UTF-8");
    }
    json_t *x = value_json(&e.v, depth, &rc);
    if (!x || (as_array  ? json_array_append_new(j, x)
               : plain   ? json_object_setn_new_nocheck(j, e.key, e.keylen, x)
                         : json_object_setn_new(j, e.key, e.keylen, x))) {
      json_decref(j);
      return rc ? rc : oom();
    }
  }
  *out = j;
  return 0;
}

int dtx__bson_to_json(const uint8_t *doc, uint32_t len, int as_array,
                      json_t **out) {
  return doc_to_json(doc, len, as_array, 1, out);
}

int dtx__bval_to_json(const dtx__bval_t *v, json_t **out) {
  int rc = 0;
  *out = value_json(v, 0, &rc);
  if (*out)
    return 0;
  return rc ? rc : oom();
}
