/* bkeys.c -- order-preserving key bytes for BSON values, and the index
 * keys of a BSON document (the BSON engine's keys.c; bproj.h, bdoc.h).
 *
 * dtx__bkey_encode writes a value so that memcmp of two encodings orders
 * them as dtx__bval_cmp does, and two encodings are equal exactly when the
 * values compare equal.  The stores keep these bytes as index keys and the
 * aggregation groups by them, so nothing needs to parse a value back.
 *
 * Layout.  Every encoding starts with one byte for its type bracket
 * (dtx__bval_bracket + BRACKET_BIAS, so MongoDB's type order is byte
 * order), then a payload that is prefix-free: no encoding is a proper
 * prefix of another.  Prefix-freedom is what lets encodings be
 * concatenated (a tuple, an array, an object's fields) and lets a
 * descending field simply complement every byte of its encoding.
 *
 *   number   class byte: NaN < -Inf < negative < zero < positive < +Inf
 *            (NaN is below every number, as dtx__bval_cmp says).  A finite
 *            nonzero value is written exactly, whatever its type, as
 *            0.d1d2...dn x 10^E with d1 != 0 and dn != 0: E (+0x8000,
 *            two bytes big-endian) then the digits two per byte
 *            (1 + 10*d + d', an odd last digit padded with 0) then 0x00.
 *            Negatives complement those bytes.  One scale for int32,
 *            int64 (beyond 2^53 too), doubles (their exact binary value,
 *            up to 767 digits) and Decimal128 (34 digits, E up to 6145),
 *            so 1, 1.0, NumberLong(1) and NumberDecimal("1.00") are the
 *            same bytes and -0 is 0.
 *   string   bytes with 0x00 written as 0x00 0xFF, then 0x00 0x01: "a" <
 *            "a\0" < "ab" hold bytewise.  Symbols alike (same bracket).
 *   object   per field: its value's bracket byte, the name as a string,
 *            the value; then 0x00 (below every bracket byte): MongoDB
 *            compares fields by type, then name, then value, and the
 *            shorter object first.
 *   array    the elements' encodings, then 0x00.
 *   binData  length (4 bytes big-endian), subtype, bytes.
 *   others   ObjectId's 12 bytes; bool one byte; Date as int64 with the
 *            sign bit flipped, big-endian; Timestamp as uint64 big-endian;
 *            regex pattern and flags each then 0x00 (a cstring holds no
 *            NUL); code as a string; code with scope: code, then scope as
 *            an object; dbPointer: its payload's size (4 bytes big-endian)
 *            then the payload, as dtx__bval_cmp compares it.
 */
#include "doc/bproj.h"

#include "util/assert.h"
#include "util/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* dtx__bval_bracket's numbers shifted so that all are in 1..254: 0x00 is
 * the end of an object or array, below every value. */
#define BRACKET_BIAS 0x40

enum {
  NUM_NAN = 0x10,
  NUM_NEG_INF = 0x20,
  NUM_NEG = 0x30,
  NUM_ZERO = 0x40,
  NUM_POS = 0x50,
  NUM_POS_INF = 0x60
};

/* A double's exact decimal digits: 2^-1074 has 751 significant digits
 * and the largest subnormals 767; 800 leaves room. */
#define MAX_DIGITS 800

static void put1(dtx__buf_t *b, uint8_t c) { dtx__buf_put(b, &c, 1); }

static void put_be64(dtx__buf_t *b, uint64_t v) {
  uint8_t o[8];
  for (int i = 0; i < 8; i++)
    o[i] = (uint8_t)(v >> (56 - 8 * i));
  dtx__buf_put(b, o, 8);
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
  return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put_bracket(dtx__buf_t *b, bson_type_t t) {
  int k = dtx__bval_bracket(t) + BRACKET_BIAS;
  DTX_ASSERT(k >= 1 && k <= 0xfe, "bkey.bracket-byte");
  put1(b, (uint8_t)k);
}

static void put_str(dtx__buf_t *b, const char *s, size_t n) {
  static const uint8_t esc[2] = {0x00, 0xff}, end[2] = {0x00, 0x01};
  size_t from = 0;
  for (size_t i = 0; i < n; i++)
    if (s[i] == '\0') {
      dtx__buf_put(b, s + from, i - from);
      dtx__buf_put(b, esc, 2);
      from = i + 1;
    }
  dtx__buf_put(b, s + from, n - from);
  dtx__buf_put(b, end, 2);
}

/* ---- numbers --------------------------------------------------------------- */

/* Writes the magnitude 0.digits x 10^e (digits ASCII, no leading zero;
 * trailing zeros are dropped here), complemented when neg. */
static void put_mag(dtx__buf_t *b, int neg, const char *d, size_t n, long e) {
  uint8_t x = neg ? 0xff : 0x00, buf[2 + MAX_DIGITS / 2 + 2];
  size_t o = 0;
  while (n > 0 && d[n - 1] == '0')
    n--;
  DTX_ASSERT(n > 0 && d[0] != '0', "bkey.digits-normal");
  DTX_ASSERT(e > -0x8000 && e < 0x8000, "bkey.exponent-range");
  uint16_t eb = (uint16_t)(e + 0x8000);
  put1(b, neg ? NUM_NEG : NUM_POS);
  buf[o++] = (uint8_t)(eb >> 8) ^ x;
  buf[o++] = (uint8_t)eb ^ x;
  for (size_t i = 0; i < n; i += 2) {
    int hi = d[i] - '0', lo = i + 1 < n ? d[i + 1] - '0' : 0;
    buf[o++] = (uint8_t)(1 + 10 * hi + lo) ^ x;
  }
  buf[o++] = x;
  dtx__buf_put(b, buf, o);
}

/* Digits of v (not 0) into d, returning their count. */
static size_t u64_digits(uint64_t v, char *d) {
  char t[20];
  size_t n = 0;
  while (v) {
    t[n++] = (char)('0' + v % 10);
    v /= 10;
  }
  for (size_t i = 0; i < n; i++)
    d[i] = t[n - 1 - i];
  return n;
}

static void put_i64(dtx__buf_t *b, int64_t v) {
  char d[20];
  if (v == 0) {
    put1(b, NUM_ZERO);
    return;
  }
  uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  size_t n = u64_digits(m, d);
  put_mag(b, v < 0, d, n, (long)n);
}

/* A big natural number in base 10^9, least significant limb first: just
 * enough to write m x 2^k or m x 5^k exactly. */
#define LIMB_BASE 1000000000u
#define MAX_LIMBS 100

typedef struct big {
  uint32_t l[MAX_LIMBS];
  size_t n;
} big_t;

static void big_mul(big_t *x, uint32_t f) {
  uint64_t carry = 0;
  for (size_t i = 0; i < x->n; i++) {
    uint64_t t = (uint64_t)x->l[i] * f + carry;
    x->l[i] = (uint32_t)(t % LIMB_BASE);
    carry = t / LIMB_BASE;
  }
  while (carry) {
    DTX_ASSERT(x->n < MAX_LIMBS, "bkey.big-limbs");
    x->l[x->n++] = (uint32_t)(carry % LIMB_BASE);
    carry /= LIMB_BASE;
  }
}

static size_t big_digits(const big_t *x, char *d) {
  size_t n = u64_digits(x->l[x->n - 1], d);
  for (size_t i = x->n - 1; i-- > 0;) {
    uint32_t v = x->l[i];
    for (int k = 8; k >= 0; k--) {
      d[n + (size_t)k] = (char)('0' + v % 10);
      v /= 10;
    }
    n += 9;
  }
  return n;
}

static void put_double(dtx__buf_t *b, double v) {
  if (isnan(v)) {
    put1(b, NUM_NAN);
    return;
  }
  if (isinf(v)) {
    put1(b, v < 0 ? NUM_NEG_INF : NUM_POS_INF);
    return;
  }
  if (v == 0) {
    put1(b, NUM_ZERO);
    return;
  }
  /* Integers within int64 take the integer path (most doubles stored as
   * amounts are such). */
  if (v >= -9223372036854775808.0 && v < 9223372036854775808.0 &&
      v == (double)(int64_t)v) {
    put_i64(b, (int64_t)v);
    return;
  }
  int neg = v < 0, e2;
  double f = frexp(fabs(v), &e2); /* |v| = f x 2^e2, f in [0.5, 1) */
  uint64_t m = (uint64_t)ldexp(f, 53);
  int k = e2 - 53; /* |v| = m x 2^k exactly */
  while (!(m & 1)) {
    m >>= 1;
    k++;
  }
  big_t x;
  x.n = 0;
  for (uint64_t t = m; t; t /= LIMB_BASE)
    x.l[x.n++] = (uint32_t)(t % LIMB_BASE);
  long e10 = 0;
  if (k >= 0) { /* m x 2^k */
    for (; k >= 29; k -= 29)
      big_mul(&x, 1u << 29);
    if (k)
      big_mul(&x, 1u << k);
  } else { /* m x 5^-k x 10^k */
    e10 = k;
    for (k = -k; k >= 12; k -= 12)
      big_mul(&x, 244140625u); /* 5^12 */
    uint32_t p = 1;
    while (k--)
      p *= 5;
    if (p > 1)
      big_mul(&x, p);
  }
  char d[MAX_DIGITS];
  size_t n = big_digits(&x, d);
  put_mag(b, neg, d, n, (long)n + e10);
}

/* Decimal128 in BID, the encoding BSON stores (IEEE 754-2008): the sign in
 * the top bit; when the next two bits are not 11, a 14-bit biased
 * exponent and a 113-bit coefficient; else 11110 is infinity, 11111 NaN,
 * and anything else a coefficient above 10^34-1, which the standard reads
 * as 0 (as are coefficients above 10^34-1 in the first form). */
static void put_dec(dtx__buf_t *b, bson_decimal128_t v) {
  uint64_t hi = v.high, lo = v.low;
  int neg = (int)(hi >> 63);
  unsigned __int128 c;
  int exp;
  if (((hi >> 61) & 3) == 3) {
    unsigned top = (unsigned)(hi >> 58) & 0x1f;
    if (top == 0x1f) {
      put1(b, NUM_NAN);
      return;
    }
    if (top == 0x1e) {
      put1(b, neg ? NUM_NEG_INF : NUM_POS_INF);
      return;
    }
    put1(b, NUM_ZERO);
    return;
  }
  exp = (int)((hi >> 49) & 0x3fff) - 6176;
  c = (unsigned __int128)(hi & 0x1ffffffffffffull) << 64 | lo;
  const unsigned __int128 p19 = 10000000000000000000ull;
  if (c == 0 || c > p19 * 1000000000000000ull - 1) { /* 10^34 - 1 */
    put1(b, NUM_ZERO);
    return;
  }
  char d[40];
  uint64_t top = (uint64_t)(c / p19), bot = (uint64_t)(c % p19);
  size_t n;
  if (top) {
    n = u64_digits(top, d);
    for (int k = 18; k >= 0; k--) {
      d[n + (size_t)k] = (char)('0' + bot % 10);
      bot /= 10;
    }
    n += 19;
  } else {
    n = u64_digits(bot, d);
  }
  put_mag(b, neg, d, n, (long)n + exp);
}

/* ---- values ------------------------------------------------------------------ */

static void put_value(dtx__buf_t *b, const dtx__bval_t *v);

static void put_fields(dtx__buf_t *b, const uint8_t *doc, uint32_t len,
                       int named) {
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(doc, len, &off, &e)) {
    if (named) {
      put_bracket(b, e.v.type);
      put_str(b, e.key, e.keylen);
    }
    put_value(b, &e.v);
  }
  put1(b, 0x00);
}

static void put_value(dtx__buf_t *b, const dtx__bval_t *v) {
  const uint8_t *p = v->data;
  uint32_t n;
  const char *s;
  put_bracket(b, v->type);
  switch ((int)v->type) {
  case BSON_TYPE_EOD:
  case BSON_TYPE_NULL:
  case BSON_TYPE_UNDEFINED:
  case BSON_TYPE_MINKEY:
  case BSON_TYPE_MAXKEY:
    return;
  case BSON_TYPE_INT32:
    put_i64(b, dtx__bval_int32(v));
    return;
  case BSON_TYPE_INT64:
    put_i64(b, dtx__bval_int64(v));
    return;
  case BSON_TYPE_DOUBLE:
    put_double(b, dtx__bval_double(v));
    return;
  case BSON_TYPE_DECIMAL128:
    put_dec(b, dtx__bval_dec(v));
    return;
  case BSON_TYPE_UTF8:
  case BSON_TYPE_SYMBOL:
  case BSON_TYPE_CODE:
    s = dtx__bval_str(v, &n);
    put_str(b, s, n);
    return;
  case BSON_TYPE_DOCUMENT:
  case BSON_TYPE_ARRAY:
    p = dtx__bval_doc(v, &n);
    put_fields(b, p, n, v->type == BSON_TYPE_DOCUMENT);
    return;
  case BSON_TYPE_BINARY: {
    uint32_t bl = le32(p);
    uint8_t be[5] = {(uint8_t)(bl >> 24), (uint8_t)(bl >> 16),
                     (uint8_t)(bl >> 8), (uint8_t)bl, p[4]};
    dtx__buf_put(b, be, 5);
    dtx__buf_put(b, p + 5, bl);
    return;
  }
  case BSON_TYPE_OID:
    dtx__buf_put(b, p, 12);
    return;
  case BSON_TYPE_BOOL:
    put1(b, (uint8_t)(dtx__bval_bool(v) != 0));
    return;
  case BSON_TYPE_DATE_TIME:
    put_be64(b, (uint64_t)dtx__bval_int64(v) ^ (1ull << 63));
    return;
  case BSON_TYPE_TIMESTAMP:
    put_be64(b, le64(p)); /* seconds in the high half: unsigned order */
    return;
  case BSON_TYPE_REGEX: {
    size_t pl = strlen((const char *)p);
    dtx__buf_put(b, p, pl + 1);
    dtx__buf_put(b, p + pl + 1, strlen((const char *)p + pl + 1) + 1);
    return;
  }
  case BSON_TYPE_DBPOINTER: { /* as dtx__bval_cmp: size, then bytes */
    uint8_t be[4] = {(uint8_t)(v->len >> 24), (uint8_t)(v->len >> 16),
                     (uint8_t)(v->len >> 8), (uint8_t)v->len};
    dtx__buf_put(b, be, 4);
    dtx__buf_put(b, p, v->len);
    return;
  }
  case BSON_TYPE_CODEWSCOPE: {
    uint32_t sl = le32(p + 4);
    const uint8_t *scope = p + 8 + sl;
    put_str(b, (const char *)p + 8, sl ? sl - 1 : 0);
    put_fields(b, scope, le32(scope), 1);
    return;
  }
  default:
    DTX_ASSERT(0, "bkey.known-type"); /* dtx__bson_check refuses others */
  }
}

int dtx__bkey_encode(const dtx__bval_t *v, int desc, dtx__buf_t *b) {
  size_t from = b->n;
  put_value(b, v);
  if (b->oom)
    return -1;
  if (desc)
    for (size_t i = from; i < b->n; i++)
      b->p[i] = (char)~(uint8_t)b->p[i];
  return 0;
}

/* ---- index keys ------------------------------------------------------------ */

/* As keys.c: every path of the index is followed from the document down;
 * paths meeting an array must meet the same one and then step through its
 * elements together; two different arrays are "parallel arrays". */
#define MAX_FIELDS 16

typedef struct kseg {
  const char *s;
  size_t n;
} kseg_t;

typedef struct kpath {
  size_t field;
  const kseg_t *segs;
  size_t nsegs;
  size_t consumed;
} kpath_t;

/* fn(arg, vals) takes each tuple the walk finds: emit below encodes it
 * (dtx__bindex_keys), bkeyvals.c bridges it (dtx__bindex_walk). */
typedef struct kctx {
  const dtx__index_spec_t *spec;
  dtx__bkeys_t *out;
  int found;
  dtx__bkey_tuple_fn fn;
  void *arg;
} kctx_t;

void dtx__bkeys_free(dtx__bkeys_t *k) {
  free(k->b.p);
  free(k->end);
  memset(k, 0, sizeof *k);
}

const uint8_t *dtx__bkeys_at(const dtx__bkeys_t *k, size_t i, size_t *len) {
  size_t from = i ? k->end[i - 1] : 0;
  *len = k->end[i] - from;
  return (const uint8_t *)k->b.p + from;
}

static int emit(void *arg, const dtx__bval_t *vals) {
  kctx_t *c = arg;
  dtx__bkeys_t *k = c->out;
  for (size_t i = 0; i < c->spec->nfields; i++) {
    if (vals[i].type == BSON_TYPE_ARRAY || vals[i].type == BSON_TYPE_DOCUMENT)
      k->multikey = 1;
    dtx__bkey_encode(&vals[i], c->spec->dirs[i] < 0, &k->b);
  }
  if (k->b.oom || (k->n == k->cap && DTX__GROW(k->end, k->cap, 8)))
    return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
  k->end[k->n++] = k->b.n;
  return 0;
}

static int same_prefix(const kpath_t *a, size_t da, const kpath_t *b,
                       size_t db) {
  if (da != db)
    return 0;
  for (size_t i = 0; i < da; i++)
    if (a->segs[i].n != b->segs[i].n ||
        memcmp(a->segs[i].s, b->segs[i].s, a->segs[i].n))
      return 0;
  return 1;
}

static int prefix_len(const char *path, size_t n) {
  size_t i = 0, seen = 0;
  while (path[i] && !(path[i] == '.' && ++seen == n))
    i++;
  return (int)i;
}

static int walk_keys(kctx_t *c, const dtx__bval_t *base, const kpath_t *ps,
                     size_t n, const dtx__bval_t *vals_in) {
  dtx__bval_t vals[MAX_FIELDS], arr = {0};
  size_t depth[MAX_FIELDS], arr_i = 0;
  int meets[MAX_FIELDS], have_arr = 0, rc;
  static const dtx__bval_t missing = {0};

  memcpy(vals, vals_in, c->spec->nfields * sizeof *vals);
  for (size_t i = 0; i < n; i++) {
    dtx__bval_t cur = *base;
    size_t d = 0;
    meets[i] = 0;
    for (;;) {
      if (cur.type == BSON_TYPE_ARRAY) {
        meets[i] = 1;
        break;
      }
      if (d == ps[i].nsegs) {
        vals[ps[i].field] = cur;
        c->found = 1;
        break;
      }
      dtx__belem_t e;
      uint32_t dl;
      const uint8_t *dd;
      if (cur.type != BSON_TYPE_DOCUMENT ||
          !(dd = dtx__bval_doc(&cur, &dl),
            dtx__belem_find(dd, dl, ps[i].segs[d].s, ps[i].segs[d].n, &e))) {
        vals[ps[i].field] = missing;
        break;
      }
      cur = e.v;
      d++;
    }
    depth[i] = d;
    if (!meets[i])
      continue;
    if (!have_arr) {
      arr = cur;
      arr_i = i;
      have_arr = 1;
    } else if (!same_prefix(&ps[arr_i], depth[arr_i], &ps[i], d)) {
      const char *pa = c->spec->paths[ps[arr_i].field];
      const char *pb = c->spec->paths[ps[i].field];
      return dtx__err(
          DTX_EBADINDEX, "index %s: cannot index parallel arrays [%.*s] [%.*s]",
          c->spec->name, prefix_len(pa, ps[arr_i].consumed + depth[arr_i]), pa,
          prefix_len(pb, ps[i].consumed + d), pb);
    }
  }
  if (!have_arr)
    return c->fn(c->arg, vals);

  uint32_t alen, off = 0;
  const uint8_t *a = dtx__bval_doc(&arr, &alen);
  dtx__belem_t el;
  if (!dtx__belem_next(a, alen, &off, &el)) { /* [] is the key itself */
    for (size_t i = 0; i < n; i++)
      if (meets[i]) {
        int ends = depth[i] == ps[i].nsegs;
        vals[ps[i].field] = ends ? arr : missing;
        c->found |= ends;
      }
    return c->fn(c->arg, vals);
  }
  do {
    kpath_t sub[MAX_FIELDS];
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
      if (!meets[i])
        continue;
      if (depth[i] == ps[i].nsegs) {
        vals[ps[i].field] = el.v;
        c->found = 1;
      } else if (el.v.type == BSON_TYPE_DOCUMENT) {
        sub[ns].field = ps[i].field;
        sub[ns].segs = ps[i].segs + depth[i];
        sub[ns].nsegs = ps[i].nsegs - depth[i];
        sub[ns].consumed = ps[i].consumed + depth[i];
        ns++;
      } else {
        vals[ps[i].field] = missing;
      }
    }
    rc = ns ? walk_keys(c, &el.v, sub, ns, vals) : c->fn(c->arg, vals);
    if (rc)
      return rc;
  } while (dtx__belem_next(a, alen, &off, &el));
  return 0;
}

/* Sorting key numbers by their bytes, ties by position, to drop later
 * duplicates while keeping the first of each in place. */
typedef struct kref {
  const dtx__bkeys_t *k;
  size_t i;
} kref_t;

static int kref_cmp(const void *pa, const void *pb) {
  const kref_t *a = pa, *b = pb;
  size_t la, lb;
  const uint8_t *x = dtx__bkeys_at(a->k, a->i, &la);
  const uint8_t *y = dtx__bkeys_at(b->k, b->i, &lb);
  int c = memcmp(x, y, la < lb ? la : lb);
  if (c)
    return c;
  if (la != lb)
    return la < lb ? -1 : 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static int same_key(const dtx__bkeys_t *k, size_t i, size_t j) {
  size_t li, lj;
  const uint8_t *x = dtx__bkeys_at(k, i, &li), *y = dtx__bkeys_at(k, j, &lj);
  return li == lj && !memcmp(x, y, li);
}

/* Few keys (most documents): compared pairwise, nothing allocated. */
#define DEDUPE_SMALL 16

static int dedupe(dtx__bkeys_t *k) {
  size_t n = k->n, w = 0, o = 0;
  if (n < 2)
    return 0;
  char keep_small[DEDUPE_SMALL];
  size_t ends_small[DEDUPE_SMALL];
  if (n <= DEDUPE_SMALL) {
    for (size_t i = 0; i < n; i++) {
      keep_small[i] = 1;
      for (size_t j = 0; j < i && keep_small[i]; j++)
        keep_small[i] = !keep_small[j] || !same_key(k, j, i);
    }
    for (size_t i = 0; i < n; i++) {
      size_t len;
      const uint8_t *p = dtx__bkeys_at(k, i, &len);
      if (!keep_small[i])
        continue;
      memmove(k->b.p + o, p, len);
      o += len;
      ends_small[w++] = o;
    }
    memcpy(k->end, ends_small, w * sizeof *ends_small);
    k->n = w;
    k->b.n = o;
    return 0;
  }
  kref_t *r = malloc(n * sizeof *r);
  char *keep = calloc(n, 1);
  size_t *ends = malloc(n * sizeof *ends);
  if (!r || !keep || !ends) {
    free(r);
    free(keep);
    free(ends);
    return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
  }
  for (size_t i = 0; i < n; i++)
    r[i] = (kref_t){k, i};
  qsort(r, n, sizeof *r, kref_cmp);
  for (size_t i = 0; i < n; i++)
    keep[r[i].i] = i == 0 || !same_key(k, r[i - 1].i, r[i].i);
  /* Compact in place: kept keys only move toward the front. */
  for (size_t i = 0; i < n; i++) {
    size_t len;
    const uint8_t *p = dtx__bkeys_at(k, i, &len);
    if (!keep[i])
      continue;
    memmove(k->b.p + o, p, len);
    o += len;
    ends[w++] = o;
  }
  memcpy(k->end, ends, w * sizeof *ends);
  k->n = w;
  k->b.n = o;
  free(r);
  free(keep);
  free(ends);
  return 0;
}

/* Splits the spec's paths into segments and walks doc with c. */
static int walk_doc(kctx_t *c, const uint8_t *doc, uint32_t len) {
  const dtx__index_spec_t *s = c->spec;
  kseg_t segs[MAX_FIELDS * 8], *heap = NULL, *seg = segs;
  kpath_t ps[MAX_FIELDS];
  dtx__bval_t vals[MAX_FIELDS] = {{0}};
  size_t total = 0;

  for (size_t i = 0; i < s->nfields; i++) {
    total++;
    for (const char *p = s->paths[i]; *p; p++)
      total += *p == '.';
  }
  if (total > sizeof segs / sizeof segs[0]) {
    if (!(heap = malloc(total * sizeof *heap)))
      return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
    seg = heap;
  }
  for (size_t i = 0, at = 0; i < s->nfields; i++) {
    const char *p = s->paths[i];
    ps[i] = (kpath_t){i, seg + at, 0, 0};
    for (;;) {
      size_t n = strcspn(p, ".");
      seg[at++] = (kseg_t){p, n};
      ps[i].nsegs++;
      if (!p[n])
        break;
      p += n + 1;
    }
  }
  dtx__bval_t root = dtx__bval_of_doc(doc, len);
  int rc = walk_keys(c, &root, ps, s->nfields, vals);
  free(heap);
  return rc;
}

static int bad_args(const dtx__index_spec_t *s, const uint8_t *doc) {
  if (!s || s->nfields == 0 || s->nfields > MAX_FIELDS || !doc)
    return dtx__err(DTX_EINVAL, "index keys: %s",
                    doc ? "bad index spec" : "document must be an object");
  return 0;
}

int dtx__bindex_walk(const dtx__index_spec_t *s, const uint8_t *doc,
                     uint32_t len, dtx__bkey_tuple_fn fn, void *arg,
                     int *found) {
  *found = 0;
  int rc = bad_args(s, doc);
  if (rc)
    return rc;
  kctx_t c = {s, NULL, 0, fn, arg};
  rc = walk_doc(&c, doc, len);
  *found = c.found;
  return rc;
}

int dtx__bindex_keys(const dtx__index_spec_t *s, const uint8_t *doc,
                     uint32_t len, dtx__bkeys_t *out) {
  int rc;

  if (!out)
    return dtx__err(DTX_EINVAL, "index keys: NULL out-parameter");
  out->b.n = 0;
  out->b.oom = 0;
  out->n = 0;
  out->multikey = 0;
  if ((rc = bad_args(s, doc)))
    return rc;
  kctx_t c = {s, out, 0, emit, NULL};
  c.arg = &c;
  rc = walk_doc(&c, doc, len);
  if (!rc && s->sparse && !c.found) {
    out->n = 0;
    out->b.n = 0;
    out->multikey = 0;
  }
  if (!rc)
    rc = dedupe(out);
  /* As dtx__index_keys_multikey, counted after deduplication: {a: [5]}
   * and {a: [1, 1]} give one scalar key and leave the index sortable. */
  if (!rc && out->n > 1)
    out->multikey = 1;
  if (rc) {
    out->n = 0;
    out->b.n = 0;
    out->multikey = 0;
  }
  return rc;
}
