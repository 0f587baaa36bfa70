/* bdec.h -- Decimal128 arithmetic of our own (bdec.c; docs/engine.md).
 *
 * libbson stores and prints Decimal128 (bson_decimal128_t, and its
 * bson_decimal128_from_string / _to_string) but computes nothing, and
 * GCC's _Decimal128 is missing under clang, which builds the fuzz targets.
 * So the arithmetic MongoDB's operators need is here: IEEE 754-2008
 * decimal128 in its BID encoding (the one BSON stores), 34 significant
 * digits, round half to even, with the exponent rules of the standard
 * (an exact result keeps the preferred exponent).
 *
 * Every function is pure and thread-safe; none allocates. */
#ifndef DTX_BDEC_H
#define DTX_BDEC_H

#include <bson/bson.h>
#include <stdint.h>

/* Classification. */
int dtx__dec_is_nan(bson_decimal128_t a);
int dtx__dec_is_inf(bson_decimal128_t a); /* +1, -1, or 0 */
int dtx__dec_is_zero(bson_decimal128_t a);
int dtx__dec_sign(bson_decimal128_t a); /* 1 when negative (also -0) */

/* Exact comparisons, <0, 0, >0.  NaN is below every other value and
 * equal to NaN (MongoDB's sort order); -0 equals 0; 1.0 equals 1.00. */
int dtx__dec_cmp(bson_decimal128_t a, bson_decimal128_t b);
int dtx__dec_cmp_i64(bson_decimal128_t a, int64_t b);
int dtx__dec_cmp_double(bson_decimal128_t a, double b); /* exact */

/* Conversions.  from_i64 is exact.  from_double rounds to 15 significant
 * digits, as MongoDB converts a double to Decimal128 in arithmetic and
 * $toDecimal (NumberDecimal(0.1) is 0.100000000000000).  to_double rounds
 * to nearest.  to_i64 truncates toward zero; 0, or -1 when the value is
 * NaN, infinite or outside int64 (*out untouched). */
bson_decimal128_t dtx__dec_from_i64(int64_t v);
bson_decimal128_t dtx__dec_from_double(double v);
double dtx__dec_to_double(bson_decimal128_t a);
int dtx__dec_to_i64(bson_decimal128_t a, int64_t *out);

/* Arithmetic, rounded to 34 digits half to even.  Overflow gives an
 * infinity, as the standard says.  Each returns 0, except dtx__dec_div by
 * a zero divisor: it returns 1 (and *out the standard's infinity, or NaN
 * for 0/0), so that the caller, who knows MongoDB's rule for its operator,
 * decides what it means. */
int dtx__dec_add(bson_decimal128_t a, bson_decimal128_t b,
                 bson_decimal128_t *out);
int dtx__dec_sub(bson_decimal128_t a, bson_decimal128_t b,
                 bson_decimal128_t *out);
int dtx__dec_mul(bson_decimal128_t a, bson_decimal128_t b,
                 bson_decimal128_t *out);
int dtx__dec_div(bson_decimal128_t a, bson_decimal128_t b,
                 bson_decimal128_t *out);

/* The value truncated toward zero to an integer (for $trunc, $mod). */
bson_decimal128_t dtx__dec_trunc(bson_decimal128_t a);

#endif
