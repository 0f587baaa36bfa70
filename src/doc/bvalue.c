/* bvalue.c -- BSON values viewed in place: payload readers, MongoDB's
 * order across every BSON type, $type's names and numbers, and the raw
 * element reader (bdoc.h).
 *
 * Nothing here allocates or validates: the bytes were checked once
 * (dtx__bson_check) or written by libbson, and every read below trusts
 * the lengths they carry.  The order is the json_t engine's order
 * (value.c) extended to the types JSON lacks, with the same bracket
 * numbers for the brackets both engines have (1 null, 2 number, 3
 * string, 4 object, 5 array, 8 bool), so a bracket computed by either
 * engine means the same thing.
 */
#include "doc/bdec.h"
#include "doc/bdoc.h"
#include "util/assert.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- little-endian loads ----------------------------------------------------
 */

/* BSON is little-endian whatever the host; memcpy keeps the loads legal at
 * any alignment (values sit at arbitrary offsets in a document). */
static uint32_t ld_u32(const uint8_t *p) {
  uint32_t x;
  memcpy(&x, p, 4);
  return BSON_UINT32_FROM_LE(x);
}

static uint64_t ld_u64(const uint8_t *p) {
  uint64_t x;
  memcpy(&x, p, 8);
  return BSON_UINT64_FROM_LE(x);
}

/* ---- payload readers
 * ----------------------------------------------------------- */

int32_t dtx__bval_int32(const dtx__bval_t *v) {
  DTX_ASSERT(v->type == BSON_TYPE_INT32, "bval.int32");
  return (int32_t)ld_u32(v->data);
}

int64_t dtx__bval_int64(const dtx__bval_t *v) {
  DTX_ASSERT(v->type == BSON_TYPE_INT64 || v->type == BSON_TYPE_DATE_TIME,
             "bval.int64");
  return (int64_t)ld_u64(v->data);
}

int dtx__bval_integer(const dtx__bval_t *v, int64_t *out) {
  if (v->type == BSON_TYPE_INT32)
    *out = dtx__bval_int32(v);
  else if (v->type == BSON_TYPE_INT64)
    *out = dtx__bval_int64(v);
  else
    return 0;
  return 1;
}

double dtx__bval_double(const dtx__bval_t *v) {
  DTX_ASSERT(v->type == BSON_TYPE_DOUBLE, "bval.double");
  uint64_t u = ld_u64(v->data);
  double d;
  memcpy(&d, &u, 8);
  return d;
}

int dtx__bval_bool(const dtx__bval_t *v) {
  DTX_ASSERT(v->type == BSON_TYPE_BOOL, "bval.bool");
  return v->data[0] != 0;
}

bson_decimal128_t dtx__bval_dec(const dtx__bval_t *v) {
  DTX_ASSERT(v->type == BSON_TYPE_DECIMAL128, "bval.dec");
  bson_decimal128_t d;
  d.low = ld_u64(v->data); /* BSON stores the low half first */
  d.high = ld_u64(v->data + 8);
  return d;
}

const char *dtx__bval_str(const dtx__bval_t *v, uint32_t *len) {
  DTX_ASSERT(v->type == BSON_TYPE_UTF8 || v->type == BSON_TYPE_SYMBOL ||
                 v->type == BSON_TYPE_CODE,
             "bval.str");
  *len = ld_u32(v->data) - 1; /* the stored length counts the NUL */
  return (const char *)v->data + 4;
}

const uint8_t *dtx__bval_doc(const dtx__bval_t *v, uint32_t *len) {
  DTX_ASSERT(v->type == BSON_TYPE_DOCUMENT || v->type == BSON_TYPE_ARRAY,
             "bval.doc");
  *len = v->len;
  return v->data;
}

dtx__bval_t dtx__bval_of_doc(const uint8_t *data, uint32_t len) {
  dtx__bval_t v = {BSON_TYPE_DOCUMENT, len, data};
  return v;
}

int dtx__bval_is_number(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
  case BSON_TYPE_DOUBLE:
  case BSON_TYPE_DECIMAL128:
    return 1;
  default:
    return 0;
  }
}

/* ---- brackets ---------------------------------------------------------------
 */

/* MongoDB's canonical type order.  The numbers shared with dtx__value_bracket
 * are kept (null 1, number 2, string 3, object 4, array 5, bool 8); the
 * others fill the gaps in the manual's order.  The manual's list stops at
 * regex; dbPointer, JavaScript and JavaScript-with-scope follow it, in
 * that order, as MongoDB's canonical type numbers place them. */
enum {
  BR_MINKEY = 0,
  BR_NULL = 1,
  BR_NUMBER = 2,
  BR_STRING = 3,
  BR_OBJECT = 4,
  BR_ARRAY = 5,
  BR_BINARY = 6,
  BR_OID = 7,
  BR_BOOL = 8,
  BR_DATE = 9,
  BR_TIMESTAMP = 10,
  BR_REGEX = 11,
  BR_DBPOINTER = 12,
  BR_CODE = 13,
  BR_CODEWSCOPE = 14,
  BR_MAXKEY = 15
};

int dtx__bval_bracket(bson_type_t t) {
  switch (t) {
  case BSON_TYPE_MINKEY:
    return BR_MINKEY;
  case BSON_TYPE_EOD:
  case BSON_TYPE_NULL:
  case BSON_TYPE_UNDEFINED:
    return BR_NULL;
  case BSON_TYPE_DOUBLE:
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
  case BSON_TYPE_DECIMAL128:
    return BR_NUMBER;
  case BSON_TYPE_UTF8:
  case BSON_TYPE_SYMBOL:
    return BR_STRING;
  case BSON_TYPE_DOCUMENT:
    return BR_OBJECT;
  case BSON_TYPE_ARRAY:
    return BR_ARRAY;
  case BSON_TYPE_BINARY:
    return BR_BINARY;
  case BSON_TYPE_OID:
    return BR_OID;
  case BSON_TYPE_BOOL:
    return BR_BOOL;
  case BSON_TYPE_DATE_TIME:
    return BR_DATE;
  case BSON_TYPE_TIMESTAMP:
    return BR_TIMESTAMP;
  case BSON_TYPE_REGEX:
    return BR_REGEX;
  case BSON_TYPE_DBPOINTER:
    return BR_DBPOINTER;
  case BSON_TYPE_CODE:
    return BR_CODE;
  case BSON_TYPE_CODEWSCOPE:
    return BR_CODEWSCOPE;
  case BSON_TYPE_MAXKEY:
    return BR_MAXKEY;
  }
  return BR_NULL; /* unreachable for checked bytes */
}

/* ---- numbers ----------------------------------------------------------------
 */

static int sign_i64(int64_t a, int64_t b) { return (a > b) - (a < b); }

/* An int64 against a double, exactly: the double's integral part is
 * compared as an int64 (exact inside int64's range) and its fraction
 * breaks the tie, as value.c does. */
static int cmp_i64_double(int64_t i, double d) {
  if (isnan(d))
    return 1;
  if (d >= 9223372036854775808.0)
    return -1;
  if (d < -9223372036854775808.0)
    return 1;
  int64_t ti = (int64_t)d;
  if (i != ti)
    return i < ti ? -1 : 1;
  double frac = d - (double)ti;
  return frac > 0 ? -1 : frac < 0 ? 1 : 0;
}

static int cmp_double(double a, double b) {
  if (isnan(a))
    return isnan(b) ? 0 : -1;
  if (isnan(b))
    return 1;
  return (a > b) - (a < b);
}

static int norm(int r) { return (r > 0) - (r < 0); }

/* Decimal against a double: NaN is settled here so that the order's rule
 * (NaN below every number, equal to any NaN) holds whichever way bdec
 * treats a NaN operand. */
static int cmp_dec_double(bson_decimal128_t a, double b) {
  int an = dtx__dec_is_nan(a), bn = isnan(b);
  if (an || bn)
    return an && bn ? 0 : an ? -1 : 1;
  return norm(dtx__dec_cmp_double(a, b));
}

static int cmp_number(const dtx__bval_t *a, const dtx__bval_t *b) {
  bson_type_t ta = a->type, tb = b->type;
  if (ta == BSON_TYPE_DECIMAL128 || tb == BSON_TYPE_DECIMAL128) {
    if (tb != BSON_TYPE_DECIMAL128)
      return -cmp_number(b, a);
    bson_decimal128_t db = dtx__bval_dec(b);
    if (ta == BSON_TYPE_DECIMAL128)
      return norm(dtx__dec_cmp(dtx__bval_dec(a), db));
    if (ta == BSON_TYPE_DOUBLE)
      return -cmp_dec_double(db, dtx__bval_double(a));
    int64_t ia =
        ta == BSON_TYPE_INT32 ? dtx__bval_int32(a) : dtx__bval_int64(a);
    if (dtx__dec_is_nan(db))
      return 1;
    return -norm(dtx__dec_cmp_i64(db, ia));
  }
  if (ta == BSON_TYPE_DOUBLE && tb == BSON_TYPE_DOUBLE)
    return cmp_double(dtx__bval_double(a), dtx__bval_double(b));
  if (tb == BSON_TYPE_DOUBLE) {
    int64_t ia =
        ta == BSON_TYPE_INT32 ? dtx__bval_int32(a) : dtx__bval_int64(a);
    return cmp_i64_double(ia, dtx__bval_double(b));
  }
  if (ta == BSON_TYPE_DOUBLE)
    return -cmp_number(b, a);
  int64_t ia = ta == BSON_TYPE_INT32 ? dtx__bval_int32(a) : dtx__bval_int64(a);
  int64_t ib = tb == BSON_TYPE_INT32 ? dtx__bval_int32(b) : dtx__bval_int64(b);
  return sign_i64(ia, ib);
}

/* ---- the rest of the order --------------------------------------------------
 */

/* Bytewise, as MongoDB's simple collation; a prefix sorts first. */
static int cmp_bytes(const void *a, size_t an, const void *b, size_t bn) {
  int r = memcmp(a, b, an < bn ? an : bn);
  if (r)
    return r < 0 ? -1 : 1;
  return (an > bn) - (an < bn);
}

static int cmp_str(const dtx__bval_t *a, const dtx__bval_t *b) {
  uint32_t an, bn;
  const char *as = dtx__bval_str(a, &an), *bs = dtx__bval_str(b, &bn);
  return cmp_bytes(as, an, bs, bn);
}

/* Objects pair by pair in stored order: the values' brackets, then the
 * names, then the values; the object that runs out first is smaller
 * (value.c's cmp_object).  Arrays the same way, without the names: their
 * keys are "0", "1"... in both, so only positions count. */
static int cmp_doc(const dtx__bval_t *a, const dtx__bval_t *b, int names) {
  uint32_t oa = 0, ob = 0;
  dtx__belem_t ea, eb;
  for (;;) {
    int ha = dtx__belem_next(a->data, a->len, &oa, &ea);
    int hb = dtx__belem_next(b->data, b->len, &ob, &eb);
    if (!ha || !hb)
      return ha - hb;
    int r = dtx__bval_bracket(ea.v.type) - dtx__bval_bracket(eb.v.type);
    if (r)
      return r < 0 ? -1 : 1;
    if (names && (r = cmp_bytes(ea.key, ea.keylen, eb.key, eb.keylen)))
      return r;
    if ((r = dtx__bval_cmp(&ea.v, &eb.v)))
      return r;
  }
}

/* binData: length, then subtype, then bytes (the manual's order). */
static int cmp_binary(const dtx__bval_t *a, const dtx__bval_t *b) {
  uint32_t an = ld_u32(a->data), bn = ld_u32(b->data);
  if (an != bn)
    return an < bn ? -1 : 1;
  if (a->data[4] != b->data[4])
    return a->data[4] < b->data[4] ? -1 : 1;
  return cmp_bytes(a->data + 5, an, b->data + 5, bn);
}

/* Regexes: pattern, then flags; each is a C string. */
static int cmp_regex(const dtx__bval_t *a, const dtx__bval_t *b) {
  const char *pa = (const char *)a->data, *pb = (const char *)b->data;
  size_t la = strlen(pa), lb = strlen(pb);
  int r = cmp_bytes(pa, la, pb, lb);
  if (r)
    return r;
  const char *fa = pa + la + 1, *fb = pb + lb + 1;
  return cmp_bytes(fa, strlen(fa), fb, strlen(fb));
}

/* JavaScript with scope: the code, then the scope document. */
static int cmp_codewscope(const dtx__bval_t *a, const dtx__bval_t *b) {
  uint32_t an = ld_u32(a->data + 4) - 1, bn = ld_u32(b->data + 4) - 1;
  int r = cmp_bytes(a->data + 8, an, b->data + 8, bn);
  if (r)
    return r;
  dtx__bval_t sa = {BSON_TYPE_DOCUMENT, 0, a->data + 8 + an + 1};
  dtx__bval_t sb = {BSON_TYPE_DOCUMENT, 0, b->data + 8 + bn + 1};
  sa.len = ld_u32(sa.data);
  sb.len = ld_u32(sb.data);
  return cmp_doc(&sa, &sb, 1);
}

int dtx__bval_cmp(const dtx__bval_t *a, const dtx__bval_t *b) {
  int ba = dtx__bval_bracket(a->type), bb = dtx__bval_bracket(b->type);
  if (ba != bb)
    return ba < bb ? -1 : 1;
  switch (ba) {
  case BR_NUMBER:
    return cmp_number(a, b);
  case BR_STRING:
    return cmp_str(a, b);
  case BR_OBJECT:
    return cmp_doc(a, b, 1);
  case BR_ARRAY:
    return cmp_doc(a, b, 0);
  case BR_BINARY:
    return cmp_binary(a, b);
  case BR_OID:
    return cmp_bytes(a->data, 12, b->data, 12);
  case BR_BOOL:
    return (a->data[0] != 0) - (b->data[0] != 0);
  case BR_DATE:
    return sign_i64(dtx__bval_int64(a), dtx__bval_int64(b));
  case BR_TIMESTAMP: {
    /* Unsigned: the seconds are the high half, the increment the low. */
    uint64_t x = ld_u64(a->data), y = ld_u64(b->data);
    return (x > y) - (x < y);
  }
  case BR_REGEX:
    return cmp_regex(a, b);
  case BR_DBPOINTER:
    /* As MongoDB: the payload's size, then its bytes (the namespace's
     * length and text, then the ObjectId). */
    if (a->len != b->len)
      return a->len < b->len ? -1 : 1;
    return cmp_bytes(a->data, a->len, b->data, b->len);
  case BR_CODE:
    return cmp_bytes(a->data + 4, ld_u32(a->data) - 1, b->data + 4,
                     ld_u32(b->data) - 1);
  case BR_CODEWSCOPE:
    return cmp_codewscope(a, b);
  default:
    return 0; /* MinKey, null, MaxKey: one value each */
  }
}

/* ---- types by name ----------------------------------------------------------
 */

/* The one table of $type's aliases: the filter's $type, $jsonSchema's
 * bsonType and aggregation's $type all read it. */
static const struct {
  const char *name;
  int type;
} type_names[] = {
    {"double", BSON_TYPE_DOUBLE},
    {"string", BSON_TYPE_UTF8},
    {"object", BSON_TYPE_DOCUMENT},
    {"array", BSON_TYPE_ARRAY},
    {"binData", BSON_TYPE_BINARY},
    {"undefined", BSON_TYPE_UNDEFINED},
    {"objectId", BSON_TYPE_OID},
    {"bool", BSON_TYPE_BOOL},
    {"date", BSON_TYPE_DATE_TIME},
    {"null", BSON_TYPE_NULL},
    {"regex", BSON_TYPE_REGEX},
    {"dbPointer", BSON_TYPE_DBPOINTER},
    {"javascript", BSON_TYPE_CODE},
    {"symbol", BSON_TYPE_SYMBOL},
    {"javascriptWithScope", BSON_TYPE_CODEWSCOPE},
    {"int", BSON_TYPE_INT32},
    {"timestamp", BSON_TYPE_TIMESTAMP},
    {"long", BSON_TYPE_INT64},
    {"decimal", BSON_TYPE_DECIMAL128},
    {"minKey", BSON_TYPE_MINKEY},
    {"maxKey", BSON_TYPE_MAXKEY},
};

#define NTYPES (sizeof type_names / sizeof type_names[0])

const char *dtx__btype_name(bson_type_t t) {
  if (t == BSON_TYPE_EOD)
    return "missing";
  for (size_t i = 0; i < NTYPES; i++)
    if (type_names[i].type == (int)t)
      return type_names[i].name;
  return "unknown";
}

int dtx__btype_from_alias(const char *name) {
  if (strcmp(name, "number") == 0)
    return 0; /* any numeric type */
  for (size_t i = 0; i < NTYPES; i++)
    if (strcmp(type_names[i].name, name) == 0)
      return type_names[i].type;
  return -1;
}

bson_type_t dtx__bval_judged_type(const dtx__bval_t *v) {
  if (v->type == BSON_TYPE_INT64) {
    int64_t i = dtx__bval_int64(v);
    return i >= INT32_MIN && i <= INT32_MAX ? BSON_TYPE_INT32 : BSON_TYPE_INT64;
  }
  return v->type;
}

/* $type's numbers are BSON's type bytes, except MinKey, which $type spells
 * -1 (its byte is 0xFF). */
int dtx__btype_from_number(int64_t n) {
  if (n == -1)
    return BSON_TYPE_MINKEY;
  for (size_t i = 0; i < NTYPES; i++)
    if (type_names[i].type == n && n != BSON_TYPE_MINKEY)
      return type_names[i].type;
  return -2;
}

/* ---- the raw element reader -------------------------------------------------
 */

/* The payload size of a value of type t starting at p (trusted bytes). */
static uint32_t payload_len(bson_type_t t, const uint8_t *p) {
  switch (t) {
  case BSON_TYPE_DOUBLE:
  case BSON_TYPE_DATE_TIME:
  case BSON_TYPE_TIMESTAMP:
  case BSON_TYPE_INT64:
    return 8;
  case BSON_TYPE_UTF8:
  case BSON_TYPE_CODE:
  case BSON_TYPE_SYMBOL:
    return 4 + ld_u32(p);
  case BSON_TYPE_DOCUMENT:
  case BSON_TYPE_ARRAY:
  case BSON_TYPE_CODEWSCOPE:
    return ld_u32(p);
  case BSON_TYPE_BINARY:
    return 5 + ld_u32(p);
  case BSON_TYPE_OID:
    return 12;
  case BSON_TYPE_BOOL:
    return 1;
  case BSON_TYPE_REGEX: {
    size_t a = strlen((const char *)p);
    size_t b = strlen((const char *)p + a + 1);
    return (uint32_t)(a + b + 2);
  }
  case BSON_TYPE_DBPOINTER:
    return 4 + ld_u32(p) + 12;
  case BSON_TYPE_INT32:
    return 4;
  case BSON_TYPE_DECIMAL128:
    return 16;
  default: /* EOD, undefined, null, MinKey, MaxKey */
    return 0;
  }
}

int dtx__belem_next(const uint8_t *doc, uint32_t len, uint32_t *off,
                    dtx__belem_t *e) {
  uint32_t o = *off ? *off : 4; /* the elements follow the int32 length */
  if (o + 1 >= len || doc[o] == 0) {
    e->v.type = BSON_TYPE_EOD;
    return 0;
  }
  e->v.type = (bson_type_t)doc[o];
  e->key = (const char *)doc + o + 1;
  e->keylen = (uint32_t)strlen(e->key);
  e->v.data = doc + o + 1 + e->keylen + 1;
  e->v.len = payload_len(e->v.type, e->v.data);
  *off = (uint32_t)(e->v.data - doc) + e->v.len;
  DTX_ASSERT(*off < len, "belem.inside"); /* checked bytes end with a NUL */
  return 1;
}

int dtx__belem_find(const uint8_t *doc, uint32_t len, const char *key,
                    size_t keylen, dtx__belem_t *e) {
  uint32_t off = 0;
  while (dtx__belem_next(doc, len, &off, e))
    if (e->keylen == keylen && memcmp(e->key, key, keylen) == 0)
      return 1;
  e->v.type = BSON_TYPE_EOD;
  e->v.len = 0;
  e->v.data = NULL;
  return 0;
}
