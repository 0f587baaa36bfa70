/* ejson_write.c -- BSON bytes to Extended JSON v2 text, relaxed (as doctx
 * prints documents) or canonical (bdoc.h, dtx__ejson_write).
 *
 * Compact (no spaces, as dtx__json_dump prints), key order kept, strings
 * escaped as JSON (", \, control bytes; UTF-8 passes as it is).  The
 * bytes are trusted (checked by dtx__bson_check, or written by libbson or
 * dtx__ejson_read): the walk does not re-validate.
 *
 * Doubles print in the shortest form that reads back to the same double
 * (the fewest significant digits, 1..17, for which strtod gives the same
 * bits: a binary search, since more digits never stop round-tripping),
 * laid out as Python's repr (1500.0, 0.0001, 1e-05, 1e+16).
 * In relaxed mode a finite double is a JSON number, and one that would
 * print as an integer gets ".0" so that it reads back as a double, not an
 * int32 (the spec's relaxed form); -0.0 stays "-0.0".  Non-finite doubles
 * are {"$numberDouble": "Infinity" | "-Infinity" | "NaN"} in both modes.
 * Relaxed int64 is a plain number (it reads back as int32 when it fits:
 * relaxed is lossy there, as the spec says); relaxed dates from 1970 to
 * 9999 are ISO-8601 strings with milliseconds when not zero, other dates
 * {"$numberLong"} as in canonical. */
#include "doc/bdoc.h"
#include "doc/ejson_int.h"
#include "util/buf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wr {
  dtx__buf_t b;
  int canonical;
} wr_t;

static void puts_(wr_t *w, const char *s) { dtx__buf_put(&w->b, s, strlen(s)); }
static void putc_(wr_t *w, char c) { dtx__buf_put(&w->b, &c, 1); }

static uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}
static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static void put_int(wr_t *w, long long v) {
  char t[24];
  dtx__buf_put(&w->b, t, dtx__itoa(v, t));
}

/* A JSON string of s[0..n) (NULs escaped). */
static void put_str(wr_t *w, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  putc_(w, '"');
  size_t i = 0;
  while (i < n) {
    size_t st = i;
    while (i < n && (unsigned char)s[i] >= 0x20 && s[i] != '"' && s[i] != '\\')
      i++;
    dtx__buf_put(&w->b, s + st, i - st);
    if (i >= n)
      break;
    unsigned char c = (unsigned char)s[i++];
    char e[7] = {'\\', 0, 0, 0, 0, 0, 0};
    switch (c) {
    case '"': e[1] = '"'; break;
    case '\\': e[1] = '\\'; break;
    case '\b': e[1] = 'b'; break;
    case '\f': e[1] = 'f'; break;
    case '\n': e[1] = 'n'; break;
    case '\r': e[1] = 'r'; break;
    case '\t': e[1] = 't'; break;
    default:
      memcpy(e + 1, "u00", 3);
      e[4] = hex[c >> 4];
      e[5] = hex[c & 15];
    }
    puts_(w, e);
  }
  putc_(w, '"');
}

/* The shortest decimal digits of d (finite) that strtod reads back as d,
 * laid out as Python's repr does: fixed notation for exponents -4..15,
 * else d.ddde+XX; an integral fixed form gets ".0". */
static void fmt_double(double d, char out[40]) {
  char e[40];
  int lo = 1, hi = 17;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    snprintf(e, sizeof e, "%.*e", mid - 1, d);
    if (strtod(e, NULL) == d)
      hi = mid;
    else
      lo = mid + 1;
  }
  snprintf(e, sizeof e, "%.*e", lo - 1, d);
  /* e is [-]D[.DDD]e(+|-)XX: split into sign, digits and exponent */
  char dig[20];
  int nd = 0, neg = e[0] == '-';
  const char *p = e + neg;
  for (; *p != 'e'; p++)
    if (*p != '.')
      dig[nd++] = *p;
  int x = atoi(p + 1);
  while (nd > 1 && dig[nd - 1] == '0') /* "%.0e" keeps no extra zeros, */
    nd--;                               /* but be safe */
  char *o = out;
  if (neg)
    *o++ = '-';
  if (x >= -4 && x < 16) {
    if (x < 0) {
      *o++ = '0';
      *o++ = '.';
      for (int k = -1; k > x; k--)
        *o++ = '0';
      memcpy(o, dig, (size_t)nd);
      o += nd;
    } else {
      for (int k = 0; k <= x; k++)
        *o++ = k < nd ? dig[k] : '0';
      *o++ = '.';
      if (nd > x + 1) {
        memcpy(o, dig + x + 1, (size_t)(nd - x - 1));
        o += nd - x - 1;
      } else
        *o++ = '0';
    }
    *o = '\0';
  } else {
    *o++ = dig[0];
    if (nd > 1) {
      *o++ = '.';
      memcpy(o, dig + 1, (size_t)nd - 1);
      o += nd - 1;
    }
    int ax = x < 0 ? -x : x; /* at most 324 */
    *o++ = 'e';
    *o++ = x < 0 ? '-' : '+';
    if (ax >= 100)
      *o++ = (char)('0' + ax / 100);
    *o++ = (char)('0' + ax / 10 % 10);
    *o++ = (char)('0' + ax % 10);
    *o = '\0';
  }
}

static void put_double(wr_t *w, double d) {
  char t[40];
  if (isnan(d) || isinf(d)) {
    puts_(w, "{\"$numberDouble\":\"");
    puts_(w, isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
    puts_(w, "\"}");
    return;
  }
  fmt_double(d, t);
  if (w->canonical) {
    puts_(w, "{\"$numberDouble\":\"");
    puts_(w, t);
    puts_(w, "\"}");
  } else
    puts_(w, t);
}

static void put_numlong(wr_t *w, long long v) {
  puts_(w, "{\"$numberLong\":\"");
  put_int(w, v);
  puts_(w, "\"}");
}

/* Relaxed dates of years 1970..9999 as ISO-8601 (UTC, "Z"). */
static void put_date(wr_t *w, int64_t ms) {
  puts_(w, "{\"$date\":");
  if (w->canonical || ms < 0 || ms > 253402300799999LL) {
    put_numlong(w, ms);
    putc_(w, '}');
    return;
  }
  int64_t z = ms / 86400000 + 719468, rem = ms % 86400000;
  /* civil date from day count (March-based years), z >= 0 here */
  int64_t era = z / 146097, doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  int d = (int)(doy - (153 * mp + 2) / 5 + 1);
  int m = (int)(mp < 10 ? mp + 3 : mp - 9);
  int y = (int)(yoe + era * 400 + (m <= 2));
  int h = (int)(rem / 3600000), mi = (int)(rem / 60000 % 60),
      s = (int)(rem / 1000 % 60), f = (int)(rem % 1000);
  char t[96];
  if (f)
    snprintf(t, sizeof t, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"}", y, m,
             d, h, mi, s, f);
  else
    snprintf(t, sizeof t, "\"%04d-%02d-%02dT%02d:%02d:%02dZ\"}", y, m, d, h,
             mi, s);
  puts_(w, t);
}

static void put_base64(wr_t *w, const uint8_t *p, size_t n) {
  static const char a[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (!dtx__buf_reserve(&w->b, (n + 2) / 3 * 4))
    return;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)p[i + 1] << 8;
    if (i + 2 < n)
      v |= p[i + 2];
    char q[4] = {a[v >> 18 & 63], a[v >> 12 & 63],
                 i + 1 < n ? a[v >> 6 & 63] : '=', i + 2 < n ? a[v & 63] : '='};
    dtx__buf_put(&w->b, q, 4);
  }
}

static void put_oid(wr_t *w, const uint8_t *p) {
  static const char hex[] = "0123456789abcdef";
  char t[24];
  for (int k = 0; k < 12; k++) {
    t[2 * k] = hex[p[k] >> 4];
    t[2 * k + 1] = hex[p[k] & 15];
  }
  puts_(w, "{\"$oid\":\"");
  dtx__buf_put(&w->b, t, 24);
  puts_(w, "\"}");
}

static void put_doc(wr_t *w, const uint8_t *d, int array);

/* A BSON string at p (int32 length with the NUL, bytes, NUL). */
static void put_bstr(wr_t *w, const uint8_t *p) {
  put_str(w, (const char *)p + 4, rd32(p) - 1);
}

/* One value of type t at p. */
static void put_value(wr_t *w, uint8_t t, const uint8_t *p) {
  switch (t) {
  case BSON_TYPE_DOUBLE: {
    double d;
    memcpy(&d, p, 8);
    put_double(w, d);
    break;
  }
  case BSON_TYPE_UTF8:
    put_bstr(w, p);
    break;
  case BSON_TYPE_DOCUMENT:
  case BSON_TYPE_ARRAY:
    put_doc(w, p, t == BSON_TYPE_ARRAY);
    break;
  case BSON_TYPE_BINARY: {
    uint32_t n = rd32(p);
    uint8_t st = p[4];
    const uint8_t *b = p + 5;
    if (st == BSON_SUBTYPE_BINARY_DEPRECATED && n >= 4) { /* inner length */
      b += 4;
      n -= 4;
    }
    char s[8];
    snprintf(s, sizeof s, "%02x", st);
    puts_(w, "{\"$binary\":{\"base64\":\"");
    put_base64(w, b, n);
    puts_(w, "\",\"subType\":\"");
    puts_(w, s);
    puts_(w, "\"}}");
    break;
  }
  case BSON_TYPE_UNDEFINED:
    puts_(w, "{\"$undefined\":true}");
    break;
  case BSON_TYPE_OID:
    put_oid(w, p);
    break;
  case BSON_TYPE_BOOL:
    puts_(w, p[0] ? "true" : "false");
    break;
  case BSON_TYPE_DATE_TIME:
    put_date(w, (int64_t)rd64(p));
    break;
  case BSON_TYPE_NULL:
    puts_(w, "null");
    break;
  case BSON_TYPE_REGEX: {
    const char *pat = (const char *)p, *opt = pat + strlen(pat) + 1;
    puts_(w, "{\"$regularExpression\":{\"pattern\":");
    put_str(w, pat, strlen(pat));
    puts_(w, ",\"options\":");
    put_str(w, opt, strlen(opt));
    puts_(w, "}}");
    break;
  }
  case BSON_TYPE_DBPOINTER:
    puts_(w, "{\"$dbPointer\":{\"$ref\":");
    put_bstr(w, p);
    puts_(w, ",\"$id\":");
    put_oid(w, p + 4 + rd32(p));
    puts_(w, "}}");
    break;
  case BSON_TYPE_CODE:
    puts_(w, "{\"$code\":");
    put_bstr(w, p);
    putc_(w, '}');
    break;
  case BSON_TYPE_SYMBOL:
    puts_(w, "{\"$symbol\":");
    put_bstr(w, p);
    putc_(w, '}');
    break;
  case BSON_TYPE_CODEWSCOPE:
    puts_(w, "{\"$code\":");
    put_bstr(w, p + 4);
    puts_(w, ",\"$scope\":");
    put_doc(w, p + 8 + rd32(p + 4), 0);
    putc_(w, '}');
    break;
  case BSON_TYPE_INT32:
    if (w->canonical) {
      puts_(w, "{\"$numberInt\":\"");
      put_int(w, (int32_t)rd32(p));
      puts_(w, "\"}");
    } else
      put_int(w, (int32_t)rd32(p));
    break;
  case BSON_TYPE_TIMESTAMP: {
    uint64_t v = rd64(p);
    puts_(w, "{\"$timestamp\":{\"t\":");
    put_int(w, (long long)(v >> 32));
    puts_(w, ",\"i\":");
    put_int(w, (long long)(v & 0xFFFFFFFFu));
    puts_(w, "}}");
    break;
  }
  case BSON_TYPE_INT64:
    if (w->canonical)
      put_numlong(w, (int64_t)rd64(p));
    else
      put_int(w, (int64_t)rd64(p));
    break;
  case BSON_TYPE_DECIMAL128: {
    bson_decimal128_t dec;
    char t[BSON_DECIMAL128_STRING];
    dec.low = rd64(p);
    dec.high = rd64(p + 8);
    bson_decimal128_to_string(&dec, t);
    puts_(w, "{\"$numberDecimal\":\"");
    puts_(w, t);
    puts_(w, "\"}");
    break;
  }
  case BSON_TYPE_MINKEY:
    puts_(w, "{\"$minKey\":1}");
    break;
  case BSON_TYPE_MAXKEY:
    puts_(w, "{\"$maxKey\":1}");
    break;
  default:
    puts_(w, "null"); /* unreachable for checked bytes */
  }
}

/* The size of a value of type t at p (trusted bytes). */
static size_t value_size(uint8_t t, const uint8_t *p) {
  switch (t) {
  case BSON_TYPE_DOUBLE:
  case BSON_TYPE_DATE_TIME:
  case BSON_TYPE_TIMESTAMP:
  case BSON_TYPE_INT64:
    return 8;
  case BSON_TYPE_INT32:
    return 4;
  case BSON_TYPE_OID:
    return 12;
  case BSON_TYPE_DECIMAL128:
    return 16;
  case BSON_TYPE_BOOL:
    return 1;
  case BSON_TYPE_UTF8:
  case BSON_TYPE_CODE:
  case BSON_TYPE_SYMBOL:
    return 4 + (size_t)rd32(p);
  case BSON_TYPE_DBPOINTER:
    return 4 + (size_t)rd32(p) + 12;
  case BSON_TYPE_DOCUMENT:
  case BSON_TYPE_ARRAY:
  case BSON_TYPE_CODEWSCOPE:
    return rd32(p);
  case BSON_TYPE_BINARY:
    return 5 + (size_t)rd32(p);
  case BSON_TYPE_REGEX: {
    size_t a = strlen((const char *)p) + 1;
    return a + strlen((const char *)p + a) + 1;
  }
  default:
    return 0;
  }
}

static void put_doc(wr_t *w, const uint8_t *d, int array) {
  size_t len = rd32(d), pos = 4;
  int first = 1;
  putc_(w, array ? '[' : '{');
  while (pos + 1 < len && d[pos]) {
    uint8_t t = d[pos];
    const char *k = (const char *)d + pos + 1;
    size_t kl = strlen(k);
    const uint8_t *v = d + pos + 2 + kl;
    if (!first)
      putc_(w, ',');
    first = 0;
    if (!array) {
      put_str(w, k, kl);
      putc_(w, ':');
    }
    put_value(w, t, v);
    pos = (size_t)(v - d) + value_size(t, v);
  }
  putc_(w, array ? ']' : '}');
}

char *dtx__ejson_write(const uint8_t *doc, uint32_t len, int canonical,
                       size_t *n) {
  wr_t w;
  memset(&w, 0, sizeof w);
  w.canonical = canonical;
  if (n)
    *n = 0;
  if (!doc || len < 5)
    return NULL;
  dtx__buf_reserve(&w.b, (size_t)len + len / 2 + 16);
  put_doc(&w, doc, 0);
  putc_(&w, '\0');
  if (w.b.oom) {
    free(w.b.p);
    return NULL;
  }
  if (n)
    *n = w.b.n - 1;
  return w.b.p;
}
