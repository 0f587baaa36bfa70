/* bupdate_shim.c -- TEMPORARY weak stand-ins for the parts of the BSON
 * core (bdoc.h: helper bcore) and of bdec.h (helper bdec) the update
 * applier needs, so that it builds and its tests run before those
 * branches land.  Every definition is weak: the real ones override them
 * at link time.  DELETE THIS FILE when bcore and bdec are merged (the
 * merge commit of bupdate does).  Deliberately simple: the cross-type
 * order is MongoDB's, but numbers compare through long double and the
 * Decimal128 "arithmetic" goes through double. */
#include "doc/bdec.h"
#include "doc/bdoc.h"
#include "util/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WEAK __attribute__((weak))

static uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return BSON_UINT32_FROM_LE(v);
}

WEAK int32_t dtx__bval_int32(const dtx__bval_t *v) {
  return (int32_t)rd32(v->data);
}
WEAK int64_t dtx__bval_int64(const dtx__bval_t *v) {
  uint64_t x;
  memcpy(&x, v->data, 8);
  return (int64_t)BSON_UINT64_FROM_LE(x);
}
WEAK double dtx__bval_double(const dtx__bval_t *v) {
  double d;
  memcpy(&d, v->data, 8);
  return d;
}
WEAK int dtx__bval_bool(const dtx__bval_t *v) { return v->data[0] != 0; }
WEAK bson_decimal128_t dtx__bval_dec(const dtx__bval_t *v) {
  bson_decimal128_t d;
  memcpy(&d.low, v->data, 8);
  memcpy(&d.high, v->data + 8, 8);
  d.low = BSON_UINT64_FROM_LE(d.low);
  d.high = BSON_UINT64_FROM_LE(d.high);
  return d;
}
WEAK const char *dtx__bval_str(const dtx__bval_t *v, uint32_t *len) {
  *len = rd32(v->data) - 1;
  return (const char *)v->data + 4;
}
WEAK const uint8_t *dtx__bval_doc(const dtx__bval_t *v, uint32_t *len) {
  *len = v->len;
  return v->data;
}
WEAK dtx__bval_t dtx__bval_of_doc(const uint8_t *data, uint32_t len) {
  dtx__bval_t v = {BSON_TYPE_DOCUMENT, len, data};
  return v;
}
WEAK int dtx__bval_is_number(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_INT32 || v->type == BSON_TYPE_INT64 ||
         v->type == BSON_TYPE_DOUBLE || v->type == BSON_TYPE_DECIMAL128;
}

static uint32_t payload_len(bson_type_t t, const uint8_t *p) {
  switch ((int)t) {
  case BSON_TYPE_DOUBLE: case BSON_TYPE_DATE_TIME: case BSON_TYPE_TIMESTAMP:
  case BSON_TYPE_INT64:
    return 8;
  case BSON_TYPE_UTF8: case BSON_TYPE_CODE: case BSON_TYPE_SYMBOL:
    return 4 + rd32(p);
  case BSON_TYPE_DOCUMENT: case BSON_TYPE_ARRAY: case BSON_TYPE_CODEWSCOPE:
    return rd32(p);
  case BSON_TYPE_BINARY:
    return 5 + rd32(p);
  case BSON_TYPE_OID:
    return 12;
  case BSON_TYPE_BOOL:
    return 1;
  case BSON_TYPE_REGEX: {
    size_t a = strlen((const char *)p) + 1;
    return (uint32_t)(a + strlen((const char *)p + a) + 1);
  }
  case BSON_TYPE_DBPOINTER:
    return 4 + rd32(p) + 12;
  case BSON_TYPE_INT32:
    return 4;
  case BSON_TYPE_DECIMAL128:
    return 16;
  default:
    return 0;
  }
}

WEAK int dtx__belem_next(const uint8_t *doc, uint32_t len, uint32_t *off,
                         dtx__belem_t *e) {
  if (*off == 0)
    *off = 4;
  if (*off + 1 >= len || doc[*off] == 0)
    return 0;
  e->v.type = (bson_type_t)doc[*off];
  e->key = (const char *)doc + *off + 1;
  e->keylen = (uint32_t)strlen(e->key);
  e->v.data = doc + *off + 1 + e->keylen + 1;
  e->v.len = payload_len(e->v.type, e->v.data);
  *off = (uint32_t)(e->v.data + e->v.len - doc);
  return 1;
}

WEAK int dtx__belem_find(const uint8_t *doc, uint32_t len, const char *key,
                         size_t keylen, dtx__belem_t *e) {
  uint32_t off = 0;
  while (dtx__belem_next(doc, len, &off, e))
    if (e->keylen == keylen && !memcmp(e->key, key, keylen))
      return 1;
  e->v.type = 0;
  return 0;
}

WEAK int dtx__bval_bracket(bson_type_t t) {
  switch ((int)t) {
  case BSON_TYPE_MINKEY: return 1;
  case BSON_TYPE_EOD: case BSON_TYPE_NULL: case BSON_TYPE_UNDEFINED: return 2;
  case BSON_TYPE_INT32: case BSON_TYPE_INT64: case BSON_TYPE_DOUBLE:
  case BSON_TYPE_DECIMAL128: return 3;
  case BSON_TYPE_UTF8: case BSON_TYPE_SYMBOL: return 4;
  case BSON_TYPE_DOCUMENT: return 5;
  case BSON_TYPE_ARRAY: return 6;
  case BSON_TYPE_BINARY: return 7;
  case BSON_TYPE_OID: return 8;
  case BSON_TYPE_BOOL: return 9;
  case BSON_TYPE_DATE_TIME: return 10;
  case BSON_TYPE_TIMESTAMP: return 11;
  case BSON_TYPE_REGEX: return 12;
  case BSON_TYPE_MAXKEY: return 100;
  default: return 50;
  }
}

static long double num(const dtx__bval_t *v) {
  switch ((int)v->type) {
  case BSON_TYPE_INT32: return dtx__bval_int32(v);
  case BSON_TYPE_INT64: return (long double)dtx__bval_int64(v);
  case BSON_TYPE_DOUBLE: return dtx__bval_double(v);
  default: return dtx__dec_to_double(dtx__bval_dec(v));
  }
}

WEAK int dtx__bval_cmp(const dtx__bval_t *a, const dtx__bval_t *b) {
  int ba = dtx__bval_bracket(a->type), bb = dtx__bval_bracket(b->type);
  if (ba != bb)
    return ba < bb ? -1 : 1;
  switch (ba) {
  case 3: {
    if (a->type == BSON_TYPE_INT64 && b->type == BSON_TYPE_INT64) {
      int64_t x = dtx__bval_int64(a), y = dtx__bval_int64(b);
      return x < y ? -1 : x > y;
    }
    long double x = num(a), y = num(b);
    if (isnan(x) || isnan(y))
      return isnan(y) - isnan(x);
    return x < y ? -1 : x > y;
  }
  case 4: {
    uint32_t la, lb;
    const char *x = dtx__bval_str(a, &la), *y = dtx__bval_str(b, &lb);
    int c = memcmp(x, y, la < lb ? la : lb);
    return c ? (c < 0 ? -1 : 1) : la < lb ? -1 : la > lb;
  }
  case 5: case 6: {
    uint32_t oa = 0, ob = 0;
    dtx__belem_t ea, eb;
    for (;;) {
      int ha = dtx__belem_next(a->data, a->len, &oa, &ea);
      int hb = dtx__belem_next(b->data, b->len, &ob, &eb);
      if (!ha || !hb)
        return ha - hb;
      int x = dtx__bval_bracket(ea.v.type), y = dtx__bval_bracket(eb.v.type);
      if (x != y)
        return x < y ? -1 : 1;
      if (ba == 5) {
        int c = strcmp(ea.key, eb.key);
        if (c)
          return c < 0 ? -1 : 1;
      }
      int c = dtx__bval_cmp(&ea.v, &eb.v);
      if (c)
        return c;
    }
  }
  case 9:
    return dtx__bval_bool(a) - dtx__bval_bool(b);
  case 10: case 11: {
    int64_t x = dtx__bval_int64(a), y = dtx__bval_int64(b);
    if (ba == 11) {
      uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
      return ux < uy ? -1 : ux > uy;
    }
    return x < y ? -1 : x > y;
  }
  case 1: case 2: case 100:
    return 0;
  default: {
    int c = memcmp(a->data, b->data, a->len < b->len ? a->len : b->len);
    return c ? (c < 0 ? -1 : 1) : a->len < b->len ? -1 : a->len > b->len;
  }
  }
}

WEAK const char *dtx__btype_name(bson_type_t t) {
  switch ((int)t) {
  case BSON_TYPE_DOUBLE: return "double";
  case BSON_TYPE_UTF8: return "string";
  case BSON_TYPE_DOCUMENT: return "object";
  case BSON_TYPE_ARRAY: return "array";
  case BSON_TYPE_BINARY: return "binData";
  case BSON_TYPE_UNDEFINED: return "undefined";
  case BSON_TYPE_OID: return "objectId";
  case BSON_TYPE_BOOL: return "bool";
  case BSON_TYPE_DATE_TIME: return "date";
  case BSON_TYPE_NULL: return "null";
  case BSON_TYPE_REGEX: return "regex";
  case BSON_TYPE_INT32: return "int";
  case BSON_TYPE_TIMESTAMP: return "timestamp";
  case BSON_TYPE_INT64: return "long";
  case BSON_TYPE_DECIMAL128: return "decimal";
  case BSON_TYPE_MINKEY: return "minKey";
  case BSON_TYPE_MAXKEY: return "maxKey";
  case BSON_TYPE_EOD: return "missing";
  default: return "other";
  }
}

/* A simplified walk: objects by name, arrays by index, and at an array
 * with a name, each document element; leaf arrays per leaf_mode. */
static int walk(const char *path, const dtx__bval_t *cur, int leaf_mode,
                dtx__bpath_visit_fn fn, void *ctx) {
  if (!*path) {
    if (cur->type == BSON_TYPE_ARRAY && leaf_mode != DTX__LEAF_WHOLE) {
      uint32_t off = 0;
      dtx__belem_t e;
      int any = 0, rc;
      if (leaf_mode == DTX__LEAF_EXPAND && (rc = fn(ctx, cur, 0)))
        return rc;
      while (dtx__belem_next(cur->data, cur->len, &off, &e)) {
        any = 1;
        if ((rc = fn(ctx, &e.v, 0)))
          return rc;
      }
      if (!any && leaf_mode == DTX__LEAF_ELEMS)
        return fn(ctx, NULL, 1);
      return 0;
    }
    return fn(ctx, cur, 0);
  }
  const char *dot = strchr(path, '.');
  size_t n = dot ? (size_t)(dot - path) : strlen(path);
  const char *rest = dot ? dot + 1 : path + n;
  dtx__belem_t e;
  if (cur->type == BSON_TYPE_DOCUMENT) {
    if (dtx__belem_find(cur->data, cur->len, path, n, &e))
      return walk(rest, &e.v, leaf_mode, fn, ctx);
    return fn(ctx, NULL, 0);
  }
  if (cur->type == BSON_TYPE_ARRAY) {
    uint32_t off = 0;
    int rc;
    if (dtx__belem_find(cur->data, cur->len, path, n, &e))
      return walk(rest, &e.v, leaf_mode, fn, ctx);
    while (dtx__belem_next(cur->data, cur->len, &off, &e))
      if (e.v.type == BSON_TYPE_DOCUMENT &&
          (rc = walk(path, &e.v, leaf_mode, fn, ctx)))
        return rc;
    return 0;
  }
  return fn(ctx, NULL, 0);
}

WEAK int dtx__bpath_walk(const char *path, const uint8_t *doc, uint32_t len,
                         int leaf_mode, dtx__bpath_visit_fn fn, void *ctx,
                         size_t *pos) {
  dtx__bval_t root = dtx__bval_of_doc(doc, len);
  (void)pos;
  return walk(path, &root, leaf_mode, fn, ctx);
}

WEAK dtx__bval_t dtx__bpath_get(const uint8_t *doc, uint32_t len,
                                const char *path) {
  dtx__bval_t cur = dtx__bval_of_doc(doc, len), none = {0, 0, NULL};
  for (;;) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    dtx__belem_t e;
    if (cur.type != BSON_TYPE_DOCUMENT ||
        !dtx__belem_find(cur.data, cur.len, path, n, &e))
      return none;
    cur = e.v;
    if (!dot)
      return cur;
    path = dot + 1;
  }
}

/* ---- the bridge ---- */

static int put_json(bson_t *out, const char *k, size_t kl, const json_t *v);

static int put_obj(bson_t *out, const json_t *v) {
  if (json_is_object(v)) {
    const char *k;
    json_t *x;
    size_t kl;
    json_object_keylen_foreach((json_t *)v, k, kl, x) {
      if (put_json(out, k, kl, x))
        return -1;
    }
    return 0;
  }
  size_t i;
  json_t *x;
  json_array_foreach(v, i, x) {
    char key[24];
    const char *kp;
    size_t kl = bson_uint32_to_string((uint32_t)i, &kp, key, sizeof key);
    if (put_json(out, kp, kl, x))
      return -1;
  }
  return 0;
}

static int put_json(bson_t *out, const char *k, size_t kl, const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
  case JSON_ARRAY: {
    bson_t child;
    int ok = json_is_object(v)
                 ? bson_append_document_begin(out, k, (int)kl, &child)
                 : bson_append_array_begin(out, k, (int)kl, &child);
    if (!ok || put_obj(&child, v))
      return -1;
    return (json_is_object(v) ? bson_append_document_end(out, &child)
                              : bson_append_array_end(out, &child))
               ? 0
               : -1;
  }
  case JSON_STRING:
    return bson_append_utf8(out, k, (int)kl, json_string_value(v),
                            (int)json_string_length(v))
               ? 0
               : -1;
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    if (i >= INT32_MIN && i <= INT32_MAX)
      return bson_append_int32(out, k, (int)kl, (int32_t)i) ? 0 : -1;
    return bson_append_int64(out, k, (int)kl, i) ? 0 : -1;
  }
  case JSON_REAL:
    return bson_append_double(out, k, (int)kl, json_real_value(v)) ? 0 : -1;
  case JSON_TRUE:
  case JSON_FALSE:
    return bson_append_bool(out, k, (int)kl, json_is_true(v)) ? 0 : -1;
  default:
    return bson_append_null(out, k, (int)kl) ? 0 : -1;
  }
}

WEAK int dtx__bson_from_json(const json_t *v, bson_t *out) {
  if (!json_is_object(v) && !json_is_array(v))
    return dtx__err(DTX_EINVAL, "bridge: not an object or array");
  if (put_obj(out, v))
    return dtx__err(DTX_ENOMEM, "bridge: out of memory");
  return 0;
}

WEAK int dtx__bval_to_json(const dtx__bval_t *v, json_t **out) {
  char buf[64];
  switch ((int)v->type) {
  case BSON_TYPE_INT32: *out = json_integer(dtx__bval_int32(v)); break;
  case BSON_TYPE_INT64: *out = json_integer(dtx__bval_int64(v)); break;
  case BSON_TYPE_DOUBLE: *out = json_real(dtx__bval_double(v)); break;
  case BSON_TYPE_BOOL: *out = json_boolean(dtx__bval_bool(v)); break;
  case BSON_TYPE_NULL: *out = json_null(); break;
  case BSON_TYPE_UTF8: {
    uint32_t n;
    const char *s = dtx__bval_str(v, &n);
    *out = json_stringn(s, n);
    break;
  }
  case BSON_TYPE_DOCUMENT:
  case BSON_TYPE_ARRAY:
    return dtx__bson_to_json(v->data, v->len, v->type == BSON_TYPE_ARRAY, out);
  case BSON_TYPE_DATE_TIME:
    *out = json_pack("{s:I}", "$date", (json_int_t)dtx__bval_int64(v));
    break;
  case BSON_TYPE_TIMESTAMP: {
    uint64_t t = (uint64_t)dtx__bval_int64(v);
    *out = json_pack("{s:{s:I,s:I}}", "$timestamp", "t",
                     (json_int_t)(t >> 32), "i", (json_int_t)(t & 0xffffffffu));
    break;
  }
  case BSON_TYPE_DECIMAL128: {
    bson_decimal128_t d = dtx__bval_dec(v);
    bson_decimal128_to_string(&d, buf);
    *out = json_pack("{s:s}", "$numberDecimal", buf);
    break;
  }
  case BSON_TYPE_OID: {
    bson_oid_t o;
    memcpy(o.bytes, v->data, 12);
    bson_oid_to_string(&o, buf);
    *out = json_pack("{s:s}", "$oid", buf);
    break;
  }
  default:
    *out = json_pack("{s:s}", "$type", dtx__btype_name(v->type));
  }
  return *out ? 0 : dtx__err(DTX_ENOMEM, "bridge: out of memory");
}

WEAK int dtx__bson_to_json(const uint8_t *doc, uint32_t len, int as_array,
                           json_t **out) {
  json_t *r = as_array ? json_array() : json_object();
  uint32_t off = 0;
  dtx__belem_t e;
  if (!r)
    return dtx__err(DTX_ENOMEM, "bridge: out of memory");
  while (dtx__belem_next(doc, len, &off, &e)) {
    json_t *x;
    int rc = dtx__bval_to_json(&e.v, &x);
    if (rc) {
      json_decref(r);
      return rc;
    }
    if (as_array ? json_array_append_new(r, x)
                 : json_object_setn_new_nocheck(r, e.key, e.keylen, x)) {
      json_decref(r);
      return dtx__err(DTX_ENOMEM, "bridge: out of memory");
    }
  }
  *out = r;
  return 0;
}

WEAK int dtx__bval_from_json(const json_t *v, bson_t *holder,
                             dtx__bval_t *out) {
  if (put_json(holder, "v", 1, v))
    return dtx__err(DTX_ENOMEM, "bridge: out of memory");
  dtx__belem_t e;
  dtx__belem_find(bson_get_data(holder), holder->len, "v", 1, &e);
  *out = e.v;
  return 0;
}

/* ---- Decimal128 through double (wrong past 15 digits; bdec replaces) -- */

static bson_decimal128_t dec_of(double d) {
  char s[64];
  bson_decimal128_t r;
  snprintf(s, sizeof s, "%.15g", d);
  if (isinf(d))
    snprintf(s, sizeof s, "%s", d < 0 ? "-Infinity" : "Infinity");
  else if (isnan(d))
    snprintf(s, sizeof s, "NaN");
  bson_decimal128_from_string(s, &r);
  return r;
}
WEAK double dtx__dec_to_double(bson_decimal128_t a) {
  char s[BSON_DECIMAL128_STRING];
  bson_decimal128_to_string(&a, s);
  return strtod(s, NULL);
}
WEAK bson_decimal128_t dtx__dec_from_i64(int64_t v) {
  char s[32];
  bson_decimal128_t r;
  snprintf(s, sizeof s, "%lld", (long long)v);
  bson_decimal128_from_string(s, &r);
  return r;
}
WEAK bson_decimal128_t dtx__dec_from_double(double v) { return dec_of(v); }
WEAK int dtx__dec_add(bson_decimal128_t a, bson_decimal128_t b,
                      bson_decimal128_t *out) {
  *out = dec_of(dtx__dec_to_double(a) + dtx__dec_to_double(b));
  return 0;
}
WEAK int dtx__dec_mul(bson_decimal128_t a, bson_decimal128_t b,
                      bson_decimal128_t *out) {
  *out = dec_of(dtx__dec_to_double(a) * dtx__dec_to_double(b));
  return 0;
}
