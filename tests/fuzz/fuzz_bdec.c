/* fuzz_bdec.c -- libFuzzer target for Decimal128 arithmetic (bdec.c).
 *
 * The input's first byte picks how the two operands are made from the
 * next 32 bytes: as raw BID bits (any pattern, non-canonical ones too), or
 * as small coefficients (below 2^50) with small exponents, where the exact
 * sum and product fit an __int128 and must come out bit for bit.  Then
 * identities that hold exactly are checked, and any failure aborts:
 *   a + b == b + a and a * b == b * a, bit for bit;
 *   cmp(a, b) == -cmp(b, a), cmp(a, a) == 0, and the sign of a - b is the
 *   sign of cmp(a, b) (a non-zero exact difference is at least 10^-6176,
 *   so it cannot round to zero);
 *   to_i64(from_i64(v)) == v, and to_i64(a) equals trunc(a);
 *   trunc(a) is an integer no farther from zero than a, by less than 1;
 *   to_double(a) is the nearest double: a lies between its neighbours;
 *   libbson's text of a result reads back to the same bits;
 *   (small operands) (a * b) / b == a in value.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include "doc/bdec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;

static uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static int sgn(int v) { return (v > 0) - (v < 0); }

static int same(bson_decimal128_t a, bson_decimal128_t b) {
  return a.high == b.high && a.low == b.low;
}

/* Canonical BID bits of the exact value c * 10^e, |c| < 10^34, e in the
 * normal range: the answer bdec.c must give when nothing rounds. */
static bson_decimal128_t enc(int neg, u128 c, int e) {
  bson_decimal128_t d;
  d.high = ((uint64_t)neg << 63) | ((uint64_t)(e + 6176) << 49) |
           (uint64_t)(c >> 64);
  d.low = (uint64_t)c;
  return d;
}

static u128 p10(int k) {
  u128 p = 1;
  while (k-- > 0)
    p *= 10;
  return p;
}

static void check_text(bson_decimal128_t r) {
  char s[BSON_DECIMAL128_STRING];
  bson_decimal128_t back;
  bson_decimal128_to_string(&r, s);
  if (!bson_decimal128_from_string(s, &back))
    abort();
  if (dtx__dec_is_nan(r) ? !dtx__dec_is_nan(back) : !same(r, back))
    abort();
}

/* Small operands: c * 10^e with |c| < 2^50, e in [-10, 10]. */
static void small_checks(const uint8_t *p) {
  int64_t c1 = (int64_t)(rd64(p) << 14) >> 14; /* 50 bits, signed */
  int64_t c2 = (int64_t)(rd64(p + 8) << 14) >> 14;
  int e1 = (int)(p[16] % 21) - 10, e2 = (int)(p[17] % 21) - 10;
  int n1 = c1 < 0, n2 = c2 < 0, em = e1 < e2 ? e1 : e2;
  u128 m1 = (u128)(n1 ? -(i128)c1 : c1), m2 = (u128)(n2 ? -(i128)c2 : c2);
  bson_decimal128_t a = enc(n1, m1, e1), b = enc(n2, m2, e2), r, q, w;
  i128 s = (i128)c1 * (i128)p10(e1 - em) + (i128)c2 * (i128)p10(e2 - em);
  u128 ms = (u128)(s < 0 ? -s : s);
  dtx__dec_add(a, b, &r);
  if (ms < p10(34)) {
    int neg = s < 0 || (s == 0 && n1 && n2);
    if (!same(r, enc(neg, ms, em)))
      abort();
  }
  dtx__dec_mul(a, b, &r);
  if (!same(r, enc(n1 ^ n2, m1 * m2, e1 + e2))) /* < 2^100 < 10^34 */
    abort();
  if (m2 != 0) {
    if (dtx__dec_div(r, b, &q) != 0)
      abort();
    if (dtx__dec_cmp(q, a) != 0)
      abort();
  } else if (dtx__dec_div(a, b, &w) != 1) {
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bson_decimal128_t a, b, r1, r2, t, one = dtx__dec_from_i64(1);
  int64_t v, out;
  double x;
  if (size < 33)
    return 0;
  if (data[0] & 1) {
    small_checks(data + 1);
    return 0;
  }
  a.high = rd64(data + 1);
  a.low = rd64(data + 9);
  b.high = rd64(data + 17);
  b.low = rd64(data + 25);
  if (data[0] & 2) { /* keep the exponents near each other */
    b.high = (b.high & ~(0x3FFFULL << 49)) | (a.high & (0x3FFFULL << 49));
    b.high &= ~(1ULL << 62);
  }

  dtx__dec_add(a, b, &r1);
  dtx__dec_add(b, a, &r2);
  if (!same(r1, r2))
    abort();
  check_text(r1);
  dtx__dec_mul(a, b, &r1);
  dtx__dec_mul(b, a, &r2);
  if (!same(r1, r2))
    abort();
  check_text(r1);
  if (dtx__dec_div(a, b, &r1) != dtx__dec_is_zero(b))
    abort();
  check_text(r1);

  if (sgn(dtx__dec_cmp(a, b)) != -sgn(dtx__dec_cmp(b, a)) ||
      dtx__dec_cmp(a, a) != 0)
    abort();
  dtx__dec_sub(a, b, &r1);
  if (!dtx__dec_is_nan(r1)) {
    int s = dtx__dec_is_zero(r1) ? 0 : dtx__dec_sign(r1) ? -1 : 1;
    if (s != sgn(dtx__dec_cmp(a, b)))
      abort();
  }

  v = (int64_t)b.low;
  if (dtx__dec_to_i64(dtx__dec_from_i64(v), &out) != 0 || out != v)
    abort();
  if (dtx__dec_cmp_i64(dtx__dec_from_i64(v), v) != 0)
    abort();

  t = dtx__dec_trunc(a);
  if (!dtx__dec_is_nan(a) && !dtx__dec_is_inf(a)) {
    bson_decimal128_t d, at = a;
    at.high &= ~(1ULL << 63); /* |a| */
    if (!same(dtx__dec_trunc(t), t))
      abort(); /* an integer */
    if (dtx__dec_to_i64(a, &out) == 0 && dtx__dec_cmp_i64(t, out) != 0)
      abort();
    t.high &= ~(1ULL << 63);
    dtx__dec_sub(at, t, &d); /* 0 <= |a| - |trunc(a)| < 1 */
    if (dtx__dec_sign(d) && !dtx__dec_is_zero(d))
      abort();
    if (dtx__dec_cmp(d, one) >= 0)
      abort();
  }

  x = dtx__dec_to_double(a);
  if (isnan(x) != !!dtx__dec_is_nan(a))
    abort();
  if (!isnan(x)) {
    int c = dtx__dec_cmp_double(a, x);
    if (c > 0 && !isinf(x) &&
        dtx__dec_cmp_double(a, nextafter(x, INFINITY)) >= 0)
      abort(); /* a nearer double above */
    if (c < 0 && !isinf(x) &&
        dtx__dec_cmp_double(a, nextafter(x, -INFINITY)) <= 0)
      abort();
    if (isinf(x) && !dtx__dec_is_inf(a) &&
        dtx__dec_cmp_double(a, copysign(0x1.fffffffffffffp1023, x)) *
                (x > 0 ? 1 : -1) <=
            0)
      abort(); /* rounded to infinity but not beyond the largest double */
  }
  x = dtx__dec_to_double(b);
  if (!isnan(x) && dtx__dec_cmp_double(dtx__dec_from_double(x), x) != 0 &&
      fabs(x) < 1e15 && x == floor(x))
    abort(); /* integers below 10^15 convert exactly */
  return 0;
}
