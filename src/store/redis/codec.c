/* codec.c -- byte encodings of the Redis backend: growable buffers, the
 * Cluster hash slot (CRC16/XMODEM with hash tags), _id key text, and the
 * order-preserving encoding of index keys.
 *
 * Index keys live in sorted sets whose members all have score 0, so
 * Redis orders them bytewise and ZRANGEBYLEX answers equality and range
 * lookups.  That needs an encoding that is
 *   - injective up to MongoDB equality (1 and 1.0 encode alike, 2^53 and
 *     2^53+1 do not, {a:1} and {a:1.0} alike),
 *   - order-preserving within a type bracket (numbers by value, strings
 *     bytewise), since ranges only ever span one bracket, and
 *   - prefix-free, so a tuple is the concatenation of its values and an
 *     equality prefix selects exactly the tuples that start with it.
 * Layout: one bracket byte (1 null, 2 number, 3 string, 4 object,
 * 5 array, 8 boolean), then
 *   number   'O' for zero; else 'P' (positive) or 'N' (negative) and ten
 *            bytes: the binary exponent h of the leading 1 bit (+1100, big
 *            endian) and the 64 bits that follow it, left aligned.  Both
 *            int64 and double are exact binary numbers, so this is exact;
 *            for negatives the ten bytes are inverted so larger
 *            magnitudes sort first.
 *   string   the bytes with 0x00 written as 00 FF, then 00 01.
 *   boolean  '0' or '1'.
 *   object   per field 02, the name as a string, the value; then 01.
 *   array    per element 02, the value; then 01.
 * The byte after a complete tuple is never 0xFF (it is a hex digit of the
 * sequence number or a bracket byte), so "key" + 0xFF bounds every entry
 * that starts with key. */
#include "store/redis/redis_int.h"

#include "util/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffers --------------------------------------------------------------- */

void dtx__rd_put(rd_buf_t *b, const void *p, size_t n) {
  if (n && dtx__buf_reserve(b, n + 1)) {
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
  } else if (!n && dtx__buf_reserve(b, 1)) {
    b->p[b->n] = '\0';
  }
}

void dtx__rd_putc(rd_buf_t *b, char c) { dtx__rd_put(b, &c, 1); }

void dtx__rd_puts(rd_buf_t *b, const char *s) { dtx__rd_put(b, s, strlen(s)); }

void dtx__rd_puti(rd_buf_t *b, long long v) {
  char tmp[24];
  dtx__rd_put(b, tmp, dtx__itoa(v, tmp));
}

void dtx__rd_putf(rd_buf_t *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = 1;
    return;
  }
  if ((size_t)n < sizeof tmp) {
    dtx__rd_put(b, tmp, (size_t)n);
    return;
  }
  if (!dtx__buf_reserve(b, (size_t)n + 1))
    return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->n += (size_t)n;
}

void dtx__rd_buf_free(rd_buf_t *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

/* ---- slots ---------------------------------------------------------------------- */

/* CRC16/XMODEM (polynomial 0x1021, initial 0), bit by bit: keys are short
 * and a table would only save time we do not spend. */
static uint16_t crc16(const char *p, size_t n) {
  uint16_t crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (uint16_t)((unsigned char)p[i] << 8);
    for (int k = 0; k < 8; k++)
      crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021)
                         : (uint16_t)(crc << 1);
  }
  return crc;
}

/* As Redis Cluster: when the key has a '{' followed later by a '}' with
 * at least one byte between, only those bytes are hashed. */
uint16_t dtx__rd_slot(const char *key, size_t len) {
  size_t s = 0;
  while (s < len && key[s] != '{')
    s++;
  if (s < len) {
    size_t e = s + 1;
    while (e < len && key[e] != '}')
      e++;
    if (e < len && e > s + 1)
      return crc16(key + s + 1, e - s - 1) & (RD_SLOTS - 1);
  }
  return crc16(key, len) & (RD_SLOTS - 1);
}

uint64_t dtx__rd_hash64(const void *p, size_t n) {
  const unsigned char *s = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ s[i]) * 1099511628211ULL;
  return h;
}

/* ---- _id ------------------------------------------------------------------------ */

/* Integers, and doubles with an integral value in int64 range, are "i"
 * and the decimal, so 1 and 1.0 are one _id; strings are "s" and their
 * bytes; every other _id (objects, other doubles, null, booleans) is "v"
 * and the hex of its index-key encoding below, which is by value and
 * injective up to MongoDB equality, so equal objects ({a: 1}, {a: 1.0})
 * collide and unequal ones never do.  Hex keeps key names printable. */
int dtx__rd_idenc(const json_t *id, rd_buf_t *out) {
  if (json_is_real(id)) {
    double d = json_real_value(id);
    if (d == floor(d) && d >= -9223372036854775808.0 &&
        d < 9223372036854775808.0) {
      dtx__rd_putc(out, 'i');
      dtx__rd_puti(out, (long long)d);
      return out->oom ? dtx__err(DTX_ENOMEM, "encoding an _id") : 0;
    }
  }
  if (json_is_integer(id)) {
    dtx__rd_putc(out, 'i');
    dtx__rd_puti(out, (long long)json_integer_value(id));
  } else if (json_is_string(id)) {
    dtx__rd_putc(out, 's');
    dtx__rd_put(out, json_string_value(id), json_string_length(id));
  } else if (dtx__id_valid(id)) {
    static const char hex[] = "0123456789abcdef";
    rd_buf_t raw = {0};
    dtx__rd_valenc(&raw, id);
    dtx__rd_putc(out, 'v');
    for (size_t i = 0; i < raw.n; i++) {
      char h[2] = {hex[(unsigned char)raw.p[i] >> 4],
                   hex[(unsigned char)raw.p[i] & 15]};
      dtx__rd_put(out, h, 2);
    }
    if (raw.oom)
      out->oom = 1;
    dtx__rd_buf_free(&raw);
  } else {
    return dtx__err(DTX_EINVAL, "_id cannot be an array");
  }
  return out->oom ? dtx__err(DTX_ENOMEM, "encoding an _id") : 0;
}

/* ---- index keys ---------------------------------------------------------------------- */

static void put_be(rd_buf_t *b, uint64_t v, int bytes, int invert) {
  unsigned char tmp[8];
  for (int i = bytes - 1; i >= 0; i--) {
    tmp[i] = (unsigned char)(invert ? ~v : v);
    v >>= 8;
  }
  dtx__rd_put(b, tmp, (size_t)bytes);
}

/* A nonzero magnitude 2^h * 1.m as its exponent and the bits of m. */
static void put_mag(rd_buf_t *b, int h, uint64_t mbits, int neg) {
  dtx__rd_putc(b, neg ? 'N' : 'P');
  put_be(b, (uint64_t)(h + 1100), 2, neg);
  put_be(b, mbits, 8, neg);
}

static void put_number(rd_buf_t *b, const json_t *v) {
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i == 0) {
      dtx__rd_putc(b, 'O');
      return;
    }
    uint64_t u = i < 0 ? 0ULL - (uint64_t)i : (uint64_t)i;
    int h = 63 - __builtin_clzll(u);
    uint64_t m = h == 0 ? 0 : (u << (64 - h));
    put_mag(b, h, m, i < 0);
    return;
  }
  double d = json_real_value(v);
  if (d == 0 || d != d) { /* -0.0 equals 0; NaN cannot come from JSON */
    dtx__rd_putc(b, 'O');
    return;
  }
  int e;
  double f = frexp(fabs(d), &e); /* |d| = f * 2^e, 0.5 <= f < 1 */
  /* 2f - 1 in [0, 1) has at most 52 significant bits: exact times 2^64. */
  uint64_t m = (uint64_t)ldexp(2 * f - 1, 64);
  put_mag(b, e - 1, m, d < 0);
}

static void put_str(rd_buf_t *b, const char *s, size_t n) {
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] != '\0')
      continue;
    dtx__rd_put(b, s + run, i - run);
    dtx__rd_put(b, "\0\xff", 2);
    run = i + 1;
  }
  dtx__rd_put(b, s + run, n - run);
  dtx__rd_put(b, "\0\x01", 2);
}

void dtx__rd_valenc(rd_buf_t *b, const json_t *v) {
  int br = dtx__value_bracket(v);
  dtx__rd_putc(b, (char)br);
  if (!v || json_is_null(v))
    return;
  switch (json_typeof(v)) {
  case JSON_INTEGER:
  case JSON_REAL:
    put_number(b, v);
    break;
  case JSON_STRING:
    put_str(b, json_string_value(v), json_string_length(v));
    break;
  case JSON_TRUE:
    dtx__rd_putc(b, '1');
    break;
  case JSON_FALSE:
    dtx__rd_putc(b, '0');
    break;
  case JSON_OBJECT: {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)v, k, x) {
      dtx__rd_putc(b, 2);
      put_str(b, k, strlen(k));
      dtx__rd_valenc(b, x);
    }
    dtx__rd_putc(b, 1);
    break;
  }
  case JSON_ARRAY: {
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
      dtx__rd_putc(b, 2);
      dtx__rd_valenc(b, x);
    }
    dtx__rd_putc(b, 1);
    break;
  }
  default:
    break;
  }
}

void dtx__rd_tupleenc(rd_buf_t *b, const json_t *tuple) {
  size_t i;
  json_t *x;
  json_array_foreach(tuple, i, x) dtx__rd_valenc(b, x);
}
