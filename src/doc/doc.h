/* doc.h -- the document layer: JSON parsing, MongoDB value order, the filter
 * matcher, the update applier, projection, sort, upsert seeds, _id
 * generation and index key extraction.
 *
 * Nothing here touches a store.  Every backend that evaluates filters and
 * updates in C uses these functions, so one implementation defines doctx's
 * semantics.  All functions follow doctx.h's conventions: negative DTX_E*
 * on error with a detail from dtx__err(), borrowed json_t inputs, new
 * references in out-parameters (NULL on error). */
#ifndef DTX_DOC_H
#define DTX_DOC_H

#include "doctx.h"

#include <stdint.h>

/* ---- JSON text ---------------------------------------------------------- */

/* Parses text as one JSON value of any type.  Duplicate object keys, NUL
 * bytes, trailing garbage and integers outside int64 are DTX_EBADJSON with
 * the position in the detail. */
int dtx__json_parse(const char *text, json_t **out);

/* Compact, key-order-preserving serialisation; the caller free()s it.
 * Returns NULL only when out of memory. */
char *dtx__json_dump(const json_t *v);

/* ---- values ------------------------------------------------------------- */

/* MongoDB's cross-type order: null < numbers < strings < objects < arrays
 * < booleans.  Numbers compare by value across int64 and double, exactly
 * (no precision loss for large int64).  Strings compare bytewise (UTF-8).
 * Objects compare field by field in order, as BSON does: the value's type
 * bracket, then the field name, then the value; arrays element by element;
 * shorter first on a tie.  Returns <0, 0, >0. */
int dtx__value_cmp(const json_t *a, const json_t *b);

/* The type bracket used by dtx__value_cmp (1 null, 2 number, 3 string,
 * 4 object, 5 array, 8 boolean).  Comparison operators ($gt ...) only match
 * values in the same bracket, as in MongoDB. */
int dtx__value_bracket(const json_t *v);

/* ---- paths ---------------------------------------------------------------- */

/* Checks a dotted field path: non-empty segments, no '$' at the start of a
 * segment, no NUL.  DTX_EBADQUERY or DTX_EBADUPDATE (as `code`) otherwise. */
int dtx__path_check(const char *path, int code);

/* Walks every value that a dotted path reaches in doc, following MongoDB's
 * traversal (through arrays of subdocuments, numeric segments as indexes),
 * calling fn(ctx, value, empty_leaf) for each; a non-zero return from fn
 * stops the walk and is returned.  leaf_mode says what happens when the
 * path ends on an array: DTX__LEAF_WHOLE visits the array itself,
 * DTX__LEAF_EXPAND the array and then each element (equality semantics),
 * DTX__LEAF_ELEMS only the elements (sort keys).  empty_leaf is 1 when the
 * path ended on an empty array.  The filter matcher and sort share it, so
 * both see the same values. */
enum { DTX__LEAF_WHOLE = 0, DTX__LEAF_EXPAND = 1, DTX__LEAF_ELEMS = 2 };
typedef int (*dtx__path_visit_fn)(void *ctx, const json_t *v, int empty_leaf);
int dtx__path_walk(const char *path, const json_t *doc, int leaf_mode,
                   dtx__path_visit_fn fn, void *ctx);

/* ---- filter ----------------------------------------------------------------- */

typedef struct dtx__filter dtx__filter_t;

/* Compiles a MongoDB filter document.  Supported: implicit equality
 * (including array membership and whole-array equality), dotted paths
 * through objects and arrays (numeric segments index arrays), $eq $ne $gt
 * $gte $lt $lte $in $nin $exists $and $or $nor $not $elemMatch $size $all.
 * $ne/$nin match only when no element equals (missing fields match).
 * Unknown operators and malformed arguments are DTX_EBADQUERY with the
 * operator and path in the detail.  spec NULL means {} (matches all).
 * The compiled filter does not reference spec after return. */
int dtx__filter_compile(const json_t *spec, dtx__filter_t **out);

/* 1 when doc matches, else 0.  Thread-safe on a shared compiled filter. */
int dtx__filter_match(const dtx__filter_t *f, const json_t *doc);

void dtx__filter_free(dtx__filter_t *f);

/* ---- update ------------------------------------------------------------------ */

typedef struct dtx__update dtx__update_t;

/* Compiles an update: either operators ($set $unset $inc $min $max $push
 * with $each, $pull by value or condition, $addToSet with $each,
 * $currentDate, $setOnInsert) or a replacement document (no '$' keys).
 * Conflicting paths (one a prefix of another, or the same path under two
 * operators), a non-numeric $inc argument, an empty operator document,
 * changing _id, and unknown operators are DTX_EBADUPDATE. */
int dtx__update_compile(const json_t *spec, dtx__update_t **out);

/* 1 when the update is a replacement document. */
int dtx__update_is_replacement(const dtx__update_t *u);

/* Applies u to a copy of doc and returns it in *out; doc is untouched.
 * is_insert enables $setOnInsert (and is set for upserts).  now_ms is the
 * value $currentDate writes.  *changed is 1 when *out differs from doc.
 * Errors (document left unchanged, *out NULL):
 *   DTX_ETYPE      $inc/$min... of a non-number, $push to a non-array,
 *                  a path through a scalar
 *   DTX_EOVERFLOW  $inc past int64
 *   DTX_EIMMUTABLE the result's _id differs from doc's _id
 * The detail names the operator and path. */
int dtx__update_apply(const dtx__update_t *u, const json_t *doc, int is_insert,
                      int64_t now_ms, json_t **out, int *changed);

void dtx__update_free(dtx__update_t *u);

/* Builds the base document of an upsert from the filter's equality
 * conditions (top level and inside $and), as MongoDB does; the caller then
 * applies the update with is_insert=1 and adds an _id if still missing. */
int dtx__upsert_seed(const json_t *filter, json_t **out);

/* The whole document an upsert inserts: the seed of filter, the update u
 * applied as an insert at now_ms, then a generated _id (first in key
 * order) if it still has none; the _id is checked.  *out is new (caller
 * owns it).  Both backends insert exactly this. */
int dtx__upsert_doc(const json_t *filter, const dtx__update_t *u,
                    int64_t now_ms, json_t **out);

/* ---- projection and sort ---------------------------------------------------- */

/* Validates a projection: all inclusions or all exclusions (except _id,
 * which may be excluded in an inclusion). DTX_EINVAL otherwise. */
int dtx__projection_check(const json_t *projection);

/* Applies a checked projection to doc (new reference in *out). */
int dtx__project(const json_t *doc, const json_t *projection, json_t **out);

/* Validates a sort spec: object of path -> 1 or -1.  DTX_EINVAL. */
int dtx__sort_check(const json_t *sort);

/* Compares two documents by a checked sort spec, MongoDB style (an array
 * field sorts by its least element ascending, greatest descending; missing
 * sorts as null).  Ties keep the caller's order when used with a stable
 * sort. */
int dtx__sort_cmp(const json_t *sort, const json_t *a, const json_t *b);

/* Stable-sorts array (of documents) in place by sort. */
int dtx__sort_array(json_t *array, const json_t *sort);

/* ---- ids ------------------------------------------------------------------- */

/* Writes a new 24-hex-digit id and a NUL into out: 4 bytes of seconds, 5
 * random bytes per process, 3 bytes of counter, as MongoDB's ObjectId, so
 * ids sort by creation time. */
void dtx__id_new(char out[25]);

/* 0 when id is a valid _id (string or integer), else DTX_EINVAL. */
int dtx__id_check(const json_t *id);

/* Milliseconds since the Unix epoch (CLOCK_REALTIME). */
int64_t dtx__now_ms(void);

/* ---- index keys ------------------------------------------------------------------ */

typedef struct dtx__index_spec {
  char *name;
  size_t nfields;
  char **paths; /* dotted paths, nfields of them */
  int *dirs;    /* 1 or -1 */
  int unique;
  int sparse;
} dtx__index_spec_t;

/* Parses {"path": 1|-1, ...} plus options into a spec (free with
 * dtx__index_spec_free).  DTX_EBADINDEX on an empty key, a bad direction,
 * a numeric path segment, or more than 16 fields. */
int dtx__index_spec_parse(const json_t *keys, const dtx_index_opts_t *opts,
                          dtx__index_spec_t **out);
void dtx__index_spec_free(dtx__index_spec_t *s);

/* The spec as {"name","key","unique","sparse"} (new reference). */
json_t *dtx__index_spec_json(const dtx__index_spec_t *s);

/* The index keys of doc: an array of tuples (arrays of nfields values),
 * without duplicates.  A missing field gives null; an array gives one key
 * per element (an empty array gives the key []); paths that run through
 * the same array pair up element by element, so {changes.a:1, changes.b:1}
 * gives one (a, b) tuple per element of changes.  Two paths through
 * different arrays are DTX_EBADINDEX ("cannot index parallel arrays").  A
 * sparse index gives an empty array when doc has none of the fields. */
int dtx__index_keys(const dtx__index_spec_t *s, const json_t *doc,
                    json_t **out);

/* ---- stored-document rules (rules.c, schema.c) ------------------------------ */

/* 0 when v (a document, or any value) nests no deeper than DTX_MAX_DEPTH
 * levels: v is level 1 when it is an object or array, and every object or
 * array inside adds one, as MongoDB counts.  Otherwise `code` with the
 * detail "<what> nests deeper than 100 levels (the limit): level 101 is
 * reached at <path>".  Bounded recursion whatever v's depth. */
int dtx__depth_check(const json_t *v, int code, const char *what);

/* A compiled $jsonSchema (the subset in docs/validation.md).  compile
 * refuses everything else with DTX_EBADQUERY naming the keyword and where;
 * the compiled schema does not reference spec after return. */
typedef struct dtx__schema dtx__schema_t;
int dtx__schema_compile(const json_t *spec, dtx__schema_t **out);
/* 1 when doc satisfies s, else 0 and (when whylen > 0) the reason in why:
 * "<path> <what> ($jsonSchema <keyword path>)".  Thread-safe on a shared
 * compiled schema; never allocates. */
int dtx__schema_match(const dtx__schema_t *s, const json_t *doc, char *why,
                      size_t whylen);
void dtx__schema_free(dtx__schema_t *s);

/* A collection's rules, compiled from their stored form
 * {"validator": V|null, "delete_guard": G|null} (doctx.h describes them).
 * *out is NULL when spec (which may be NULL) holds no rule; null and {}
 * mean none.  DTX_EBADQUERY for an invalid rule.  Immutable once built,
 * so a catalog snapshot may share one between threads. */
typedef struct dtx__rules dtx__rules_t;
int dtx__rules_compile(const json_t *spec, dtx__rules_t **out);
void dtx__rules_free(dtx__rules_t *r);
/* The normalised stored form (borrowed; NULL when r is NULL). */
const json_t *dtx__rules_spec(const dtx__rules_t *r);

/* The one check every backend makes, inside the atomic step of a write,
 * with the rules of the catalog version that step is bound to (NULL: no
 * rules).  after is the document about to be stored (NULL for a delete),
 * before the stored one being deleted or replaced (NULL for an insert):
 *  - after must nest at most DTX_MAX_DEPTH levels (DTX_EINVAL), always;
 *  - unless bypass, after must satisfy the validator, and a deleted
 *    before must match the delete guard (DTX_EVALIDATION).
 * The detail names the collection, the _id and the failing rule. */
int dtx__doc_check_write(const dtx__rules_t *r, const char *coll,
                         const json_t *before, const json_t *after,
                         int bypass);

#endif
