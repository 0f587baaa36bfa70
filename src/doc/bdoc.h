/* bdoc.h -- the BSON document engine's core: values, MongoDB's order,
 * paths, the raw element reader, the json_t bridge and the stored-body
 * check (docs/engine.md).
 *
 * Documents are libbson's bytes: a bson_t, or any (data, len) pair that
 * holds one document.  libbson gives the representation; the semantics
 * (order, paths, operators) are ours and match the json_t engine of doc.h
 * wherever JSON can say the same thing, so that every row of that engine's
 * unit tables runs through both (tests/common/bdiff.c).
 *
 * The rules this engine keeps (docs/engine.md, "Rules"):
 *  - no allocation per field: a value is a view into the document's bytes
 *    (dtx__bval_t), never a copy;
 *  - the stored body is checked once (dtx__bson_check) and then read by
 *    the trusting reader below, which never re-validates;
 *  - bson_iter_t is never stored inside our structures: libbson declares
 *    it with 128-byte alignment, and an arena or a malloc'd array of
 *    them breaks that (UBSan); keep offsets and dtx__bval_t instead.
 *
 * Conventions as doc.h: negative DTX_E* with a detail from dtx__err();
 * borrowed inputs; out-parameters owned by the caller. */
#ifndef DTX_BDOC_H
#define DTX_BDOC_H

#include "doc/doc.h"

#include <bson/bson.h>
#include <stddef.h>
#include <stdint.h>

struct dtx__buf;

/* ---- values ---------------------------------------------------------------
 */

/* One BSON value, viewed in place: type and the bytes of its payload
 * (data[0..len), as BSON lays it out after the element's name: for a
 * string the int32 length, the bytes and the NUL; for a document or array
 * the whole embedded document).  Valid while the bytes it points into
 * live.  type 0 (BSON_TYPE_EOD) is "missing". */
typedef struct dtx__bval {
  bson_type_t type;
  uint32_t len;
  const uint8_t *data;
} dtx__bval_t;

/* Payload readers; each assumes v is of that type (DTX_ASSERT'ed). */
int32_t dtx__bval_int32(const dtx__bval_t *v);
int64_t dtx__bval_int64(const dtx__bval_t *v); /* also Date's ms */
/* 1 with *out when v is an integer (int32 or int64: JSON's integers
 * through the bridge), else 0. */
int dtx__bval_integer(const dtx__bval_t *v, int64_t *out);
double dtx__bval_double(const dtx__bval_t *v);
int dtx__bval_bool(const dtx__bval_t *v);
bson_decimal128_t dtx__bval_dec(const dtx__bval_t *v);
/* A string's (or symbol's, or JavaScript code's) bytes and length, without
 * the NUL (strings may hold NULs inside: use the length). */
const char *dtx__bval_str(const dtx__bval_t *v, uint32_t *len);
/* A document's or array's bytes (the whole embedded document). */
const uint8_t *dtx__bval_doc(const dtx__bval_t *v, uint32_t *len);

/* Builds a view of the top-level document data[0..len) as a value of
 * type BSON_TYPE_DOCUMENT. */
dtx__bval_t dtx__bval_of_doc(const uint8_t *data, uint32_t len);

/* 1 when v is a number: int32, int64, double or Decimal128. */
int dtx__bval_is_number(const dtx__bval_t *v);

/* MongoDB's comparison order across types (the manual's "Comparison/Sort
 * Order"): MinKey < null (and undefined, and missing) < numbers < symbol,
 * string < object < array < binData < ObjectId < bool < Date < Timestamp
 * < regex < MaxKey.  Numbers compare by exact value across int32, int64,
 * double and Decimal128 (no rounding: 2^63-1 vs 9.223372036854775807e18
 * is decided exactly); NaN is less than every other number and equal to
 * NaN.  Strings compare bytewise; objects field by field (the value's
 * bracket, then the name, then the value), arrays element by element,
 * shorter first on a tie; binData by length, subtype, bytes; regexes by
 * pattern then flags.  Returns <0, 0, >0.  A missing value (type 0)
 * compares as null. */
int dtx__bval_cmp(const dtx__bval_t *a, const dtx__bval_t *b);

/* The bracket dtx__bval_cmp orders types by (its canonical type number:
 * numbers share one, strings and symbols share one, null/undefined/missing
 * share one).  Comparison operators ($gt ...) only match values in the
 * same bracket, as in MongoDB. */
int dtx__bval_bracket(bson_type_t t);

/* ---- types by name ($type, $jsonSchema's bsonType, $type in aggregation) - */

/* BSON's alias of type t ("double", "string", "object", "array",
 * "binData", "undefined", "objectId", "bool", "date", "null", "regex",
 * "dbPointer", "javascript", "symbol", "javascriptWithScope", "int",
 * "timestamp", "long", "decimal", "minKey", "maxKey"); "missing" for 0. */
const char *dtx__btype_name(bson_type_t t);

/* The one table of $type's aliases and numbers: the BSON type for an alias
 * name (and 0 for "number", which means any numeric type), or -1 when the
 * name is unknown.  dtx__btype_from_number does the same for a number
 * (1..19, 127 MaxKey, -1 MinKey); -2 when unknown. */
int dtx__btype_from_alias(const char *name);
int dtx__btype_from_number(int64_t n);

/* The type a rule judges v by (docs/engine.md, stage 2b): doctx's front
 * doors speak JSON, where an integer has no width, so an int32 or an
 * int64 is judged by its value -- BSON_TYPE_INT32 when it fits in 32
 * bits, BSON_TYPE_INT64 otherwise -- which is the width the bridge
 * (dtx__bson_from_json) gives that integer.  Any other value keeps its
 * own type (a double is never an integer, a Decimal128 only "decimal").
 * $type (bfilter.c) calls an integer what this says, as filter.c does;
 * $jsonSchema's bsonType (bschema.c) calls every integer "long" and the
 * INT32 ones "int" too, as schema.c does. */
bson_type_t dtx__bval_judged_type(const dtx__bval_t *v);

/* ---- the raw element reader (for checked bytes only) ----------------------
 */

/* One element of a document: its name (NUL-terminated inside the
 * document) and its value. */
typedef struct dtx__belem {
  const char *key;
  uint32_t keylen;
  dtx__bval_t v;
} dtx__belem_t;

/* Iterates the elements of a document whose bytes passed
 * dtx__bson_check (or were written by libbson): *off starts at 0; each
 * call fills *e and returns 1, then 0 at the end.  No validation, no
 * allocation: O(1) per element. */
int dtx__belem_next(const uint8_t *doc, uint32_t len, uint32_t *off,
                    dtx__belem_t *e);

/* The element named key (keylen bytes) of doc, or 0 (and e->v.type 0). */
int dtx__belem_find(const uint8_t *doc, uint32_t len, const char *key,
                    size_t keylen, dtx__belem_t *e);

/* ---- paths ----------------------------------------------------------------
 */

/* The value at a dotted path through objects only, as dtx__path_get
 * (type 0 when absent, when the path crosses a non-object, or when a
 * segment is over 255 bytes). */
dtx__bval_t dtx__bpath_get(const uint8_t *doc, uint32_t len, const char *path);

/* dtx__path_walk_pos over BSON, with the same traversal rules and leaf
 * modes (DTX__LEAF_*): fn(ctx, v, empty_leaf) for each value reached, v
 * NULL when the path reaches nothing (as the json_t walk passes NULL).
 * pos may be NULL.  A non-zero return from fn stops the walk and is
 * returned. */
typedef int (*dtx__bpath_visit_fn)(void *ctx, const dtx__bval_t *v,
                                   int empty_leaf);
int dtx__bpath_walk(const char *path, const uint8_t *doc, uint32_t len,
                    int leaf_mode, dtx__bpath_visit_fn fn, void *ctx,
                    size_t *pos);

/* ---- index and group keys (bkeys.c)
 * ------------------------------------------ */

/* Appends to b a byte string whose memcmp order is dtx__bval_cmp's order
 * (desc: the reverse), and which is equal for two values exactly when
 * dtx__bval_cmp says they are equal (1, 1.0, NumberLong(1) and
 * NumberDecimal("1.00") alike).  The stores keep these as index keys; the
 * aggregation groups by them.  -1 when b ran out of memory. */
int dtx__bkey_encode(const dtx__bval_t *v, int desc, struct dtx__buf *b);

/* The path walk of dtx__bindex_keys (keys.c's rules: missing fields as
 * type 0, multikey arrays stepped through, paths through one array paired
 * element by element, "cannot index parallel arrays"), handing each tuple
 * it finds, in order and before any deduplication or sparse rule, to
 * fn(arg, vals): vals[0..s->nfields) are views into doc, valid during the
 * call only.  A non-zero return from fn stops the walk and is returned.
 * *found is 1 when some path reached a value the document holds (the
 * sparse rule's test).  DTX_EINVAL for a NULL doc or a bad spec, with
 * dtx__bindex_keys' details. */
typedef int (*dtx__bkey_tuple_fn)(void *arg, const dtx__bval_t *vals);
int dtx__bindex_walk(const dtx__index_spec_t *s, const uint8_t *doc,
                     uint32_t len, dtx__bkey_tuple_fn fn, void *arg,
                     int *found);

/* ---- index keys as json_t, from the bytes (bkeyvals.c) ---------------------- */

/* dtx__index_keys(s, D, out) for D = the bridge's json_t of doc
 * (dtx__bson_to_json), without building D: the same tuples in the same
 * order, each value what the bridge makes of it (int32 and int64 as
 * integers, doubles as reals, other types as relaxed Extended JSON
 * objects), duplicates dropped by dtx__value_cmp keeping the first, the
 * same sparse rule, and the same errors with the same details.  Only the
 * key values are bridged.  doc must be checked bytes (dtx__bson_check);
 * a string the bridge refuses (invalid UTF-8) is its DTX_EINVAL, but
 * only when a key holds it.  When multikey is not NULL it receives
 * dtx__index_keys_multikey(*out).  *out (a new array) is the caller's;
 * on error *out is NULL and *multikey 0. */
int dtx__bindex_key_tuples(const dtx__index_spec_t *s, const uint8_t *doc,
                           uint32_t len, json_t **out, int *multikey);

/* ---- the json_t bridge (bjson.c)
 * ---------------------------------------------- */

/* Converts v (a JSON object, or an array, which becomes a document with
 * keys "0", "1", ...) into *out (bson_init'ed by the caller, or
 * BSON_INITIALIZER).  JSON integers become int32 when they fit, else
 * int64; reals become doubles; objects keep their key order.  Objects
 * that spell Extended JSON ({"$numberLong": ...}) are NOT read as such
 * here: the bridge is for plain JSON; Extended JSON text goes through
 * dtx__ejson_read.  DTX_EINVAL for a top value that is neither object nor
 * array, DTX_ENOMEM. */
int dtx__bson_from_json(const json_t *v, bson_t *out);

/* Converts a document (or, with as_array, an array document) into a new
 * json_t.  int32 and int64 become integers, doubles reals; other types
 * become their relaxed Extended JSON objects ({"$oid": ...}, {"$date":
 * ...}, {"$numberDecimal": ...}, ...).  DTX_ENOMEM. */
int dtx__bson_to_json(const uint8_t *doc, uint32_t len, int as_array,
                      json_t **out);

/* One value each way: a view of v needs a home, so from_json appends it
 * under key "v" to *holder and returns its view in *out; to_json returns
 * a new json_t.  (bcore: *out points into holder's buffer, which the
 * next append may move: take every view after the last append, e.g. by
 * walking holder with dtx__belem_next.  to_json of a missing value, type
 * 0, is DTX_EINVAL.) */
int dtx__bval_from_json(const json_t *v, bson_t *holder, dtx__bval_t *out);
int dtx__bval_to_json(const dtx__bval_t *v, json_t **out);

/* ---- Extended JSON v2 (ejson.c, ejson_write.c)
 * --------------------------------- */

/* Reads text[0..len) (not NUL-terminated; a NUL byte inside is an error)
 * as one Extended JSON v2 document, canonical or relaxed, into *out
 * (initialised by the caller).  Strict: duplicate keys, trailing bytes,
 * invalid UTF-8, a malformed wrapper ({"$numberLong": 5}, {"$oid":
 * "xyz"}), integers outside int64 and depth past DTX_MAX_DEPTH are
 * DTX_EBADJSON with the byte position and the reason.  A plain JSON
 * integer becomes int32 when it fits, else int64; a plain real a double.
 * (bejson:) The elements are appended to *out, which should be empty; on
 * error *out is unchanged.  A document past DTX__DOC_MAX is DTX_ELIMIT,
 * as every other 16 MiB refusal.  The choices Extended JSON leaves open
 * ($regex/$options and $type stay plain keys, \u0000 allowed in string
 * values only, legacy $binary, $date forms) are listed in ejson.c and
 * ejson_wrap.c. */
int dtx__ejson_read(const char *text, size_t len, bson_t *out);

/* Writes a document as Extended JSON v2: relaxed (canonical 0) as doctx
 * prints documents, or canonical.  Returns a malloc'd NUL-terminated
 * string (*n its length), NULL when out of memory. */
char *dtx__ejson_write(const uint8_t *doc, uint32_t len, int canonical,
                       size_t *n);

/* ---- the stored-body check (bcheck.c)
 * ------------------------------------------ */

/* 0 when data[0..len) is one well-formed BSON document that doctx may
 * hold: lengths consistent, every type known, UTF-8 valid in names and
 * strings, no NUL inside a name, no duplicate name within a document,
 * nesting at most DTX_MAX_DEPTH levels, at most DTX__DOC_MAX bytes.
 * (bejson:) also what the raw reader and the writer rely on: booleans are
 * 0 or 1, array elements are named "0", "1", ... in order, binary subtype
 * 2 carries its inner length, regex options are BSON's letters in order;
 * NUL bytes inside string values are allowed (BSON strings carry their
 * length).  Every document it accepts, bson_validate (UTF-8 flags, NUL
 * allowed) accepts too (tests/fuzz/fuzz_bson_check.c).
 * Otherwise `code` with "<what> is not a valid document: <reason> at
 * byte <offset>".  One walk over the bytes: this is what every read of a
 * stored body pays, so it is measured (bench/bench_doc.c). */
int dtx__bson_check(const uint8_t *data, size_t len, int code,
                    const char *what);

#endif
