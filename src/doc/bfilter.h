/* bfilter.h -- the filter matcher on BSON (bfilter.c compiles,
 * bfilter_match.c matches): the twin of doc.h's dtx__filter_*, with the
 * same semantics wherever JSON can say the same thing, plus what BSON
 * adds (docs/engine.md):
 *  - numbers of all four types (int32, int64, double, Decimal128) compare
 *    by exact value; NaN equals only NaN and is never $lt/$gt anything;
 *  - Date, ObjectId, Timestamp, binData, regex, MinKey and MaxKey compare
 *    within their own brackets (dtx__bval_cmp); {$gt: MinKey} and
 *    {$lt: MaxKey} match every value, missing included;
 *  - $type takes every alias and number of bdoc.h's one table, and
 *    judges an integer by its value as filter.c does: an int32 or int64
 *    is "int" (16) when it fits in 32 bits, else "long" (18)
 *    (dtx__bval_judged_type; MongoDB judges by width);
 *  - a BSON regex operand: {a: /x/} and {$in: [/x/]} match strings (and
 *    symbols) by pattern, and a stored regex value equal in pattern and
 *    flags; {$eq: /x/} is equality with a regex value; {$not: /x/};
 *    {$regex: /x/i} as {$regex: "x", $options: "i"}; $all takes regexes;
 *  - $mod, $size and $exists take their operands in any numeric type.
 *
 * Ownership as doc.h's filter: the caller owns spec; the compiled filter
 * keeps its own copy of spec's bytes (its operands are views into that
 * copy), so spec may change or be freed after compile. */
#ifndef DTX_DOC_BFILTER_H
#define DTX_DOC_BFILTER_H

#include "doc/doc.h"

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dtx__bfilter dtx__bfilter_t;

/* Compiles a MongoDB filter document (NULL: the empty filter, matching
 * everything).  DTX_EBADQUERY with the json_t engine's detail for an
 * invalid filter (or spec bytes that are not a valid document),
 * DTX_ENOMEM; *out is NULL on error.  Free with dtx__bfilter_free. */
int dtx__bfilter_compile(const bson_t *spec, dtx__bfilter_t **out);

/* 1 when the document doc[0..len) matches, else 0.  doc must be checked
 * bytes (dtx__bson_check, or written by libbson): the matcher reads it
 * with the trusting reader.  Thread-safe on a shared compiled filter; a
 * $regex past PCRE2's limits poisons f as dtx__filter_match says. */
int dtx__bfilter_match(const dtx__bfilter_t *f, const uint8_t *doc,
                       uint32_t len);

/* As dtx__bfilter_match, and on a match *pos is the array position the
 * positional $ uses (SIZE_MAX when none), as dtx__filter_match_pos. */
int dtx__bfilter_match_pos(const dtx__bfilter_t *f, const uint8_t *doc,
                           uint32_t len, size_t *pos);

/* 0, or the error a match met (code, and the detail set again). */
int dtx__bfilter_error(const dtx__bfilter_t *f);

/* Frees f and its regexes; NULL is fine. */
void dtx__bfilter_free(dtx__bfilter_t *f);

#endif
