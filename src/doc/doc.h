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

#include <stddef.h>
#include <stdint.h>

/* ---- JSON text ---------------------------------------------------------- */

/* Parses text as one JSON value of any type.  Duplicate object keys, NUL
 * bytes, trailing garbage and integers outside int64 are DTX_EBADJSON with
 * the position in the detail. */
int dtx__json_parse(const char *text, json_t **out);

/* Compact, key-order-preserving serialisation; the caller free()s it.
 * Returns NULL only when out of memory. */
char *dtx__json_dump(const json_t *v);

/* A digest of v for telling later whether it changed: 64-bit FNV-1a over
 * its compact serialisation with object keys sorted, as 16 lower-case hex
 * digits and a NUL in out.  Equal values give equal digests whatever
 * their key order; a round trip through any store keeps it (integers and
 * reals keep their kind, dtx__json_dump).  It detects changes, not a
 * forger: anyone can compute it.  DTX_ENOMEM (out "") when out of
 * memory. */
int dtx__json_digest(const json_t *v, char out[17]);

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

/* v's type for messages, in one of three vocabularies that differ only
 * for numbers and booleans: BSON's ($jsonSchema's bsonType: "long",
 * "double", "bool"), the aggregation's ("int", "double", "bool") and
 * JSON's (the update operators': "integer", "real", "boolean").  NULL is
 * "missing". */
enum { DTX__TN_BSON, DTX__TN_AGG, DTX__TN_JSON };
const char *dtx__value_type_name(const json_t *v, int vocab);

/* Appends to b a byte string that is equal for two values exactly when
 * dtx__value_cmp says they are equal (1 and 1.0 alike; object field order
 * counts; NULL, a missing value, is null), for hashing groups.  -1 when b
 * ran out of memory. */
struct dtx__buf;
int dtx__value_key(const json_t *v, struct dtx__buf *b);

/* A rough count of the bytes v occupies in memory, for the limits of
 * aggregation stages that hold documents. */
size_t dtx__value_size(const json_t *v);

/* The most bytes a document may hold, as MongoDB's 16 MiB BSON limit: a
 * write that would store a bigger one and an aggregation that would build
 * one (or a string past it) fail with DTX_ELIMIT (docs/semantics.md,
 * "Size limits"). */
#define DTX__DOC_MAX ((size_t)16 << 20)

/* The size of v in BSON, exactly as the json_t bridge writes it
 * (dtx__bson_from_json: the bytes both stores keep), without the type
 * byte and name an element adds.  Counting stops once it passes cap (the
 * result is then some value > cap), so the cost is bounded by cap even
 * for a value that shares one big part many times. */
size_t dtx__value_bson_size(const json_t *v, size_t cap);
/* dtx__value_bson_size, and in *levels the deepest container's level
 * (the top one is 1) -- exact when the size is within cap: one walk for
 * a write's two bounds (dtx__doc_check_write). */
size_t dtx__value_bson_shape(const json_t *v, size_t cap, int *levels);

/* 0 when doc is at most DTX__DOC_MAX bytes (dtx__value_bson_size), else
 * DTX_ELIMIT: "<what> would hold more than 16 MiB (16777216 bytes), the
 * limit of a document". */
int dtx__doc_size_check(const json_t *doc, const char *what);

/* ---- paths ---------------------------------------------------------------- */

/* Checks a dotted field path: non-empty segments, no '$' at the start of a
 * segment, no NUL.  DTX_EBADQUERY or DTX_EBADUPDATE (as `code`) otherwise. */
int dtx__path_check(const char *path, int code);

/* The value at a dotted path through objects only (borrowed from doc;
 * NULL when absent, when the path crosses a non-object, or when a segment
 * is over 255 bytes).  The patterns' settings name their fields so (the
 * sync flag's paths, the job rate's group). */
const json_t *dtx__path_get(const json_t *doc, const char *path);
/* 1 when path is root or a field inside it (a prefix at a '.'
 * boundary): "_txn" covers "_txn" and "_txn.w", not "_txnx". */
int dtx__path_covers(const char *root, const char *path);

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

/* dtx__path_walk that also keeps *pos, while fn runs, at the index of the
 * element of the first array crossed that led to the value (SIZE_MAX when
 * none was crossed): MongoDB's position for the positional $. */
int dtx__path_walk_pos(const char *path, const json_t *doc, int leaf_mode,
                       dtx__path_visit_fn fn, void *ctx, size_t *pos);

/* ---- regular expressions (PCRE2) ------------------------------------------- */

typedef struct dtx__regex dtx__regex_t;

/* Checks $options (i, m, s, x, u) into PCRE2 flags; DTX_EBADQUERY naming
 * an unknown flag. */
int dtx__regex_options(const char *options, uint32_t *flags);

/* Compiles pattern[0..len) with options; DTX_EBADQUERY with PCRE2's
 * message for an invalid pattern.  Free with dtx__regex_free. */
int dtx__regex_compile(const char *pattern, size_t len, const char *options,
                       dtx__regex_t **out);
void dtx__regex_free(dtx__regex_t *re);

/* 1 when re matches s[0..n), 0 when not, or DTX_EBADQUERY when the match
 * exceeded PCRE2's backtracking limits.  Thread-safe. */
int dtx__regex_match(const dtx__regex_t *re, const char *s, size_t n);

/* The literal prefix every match of an anchored pattern starts with
 * ("^abc" -> "abc"), for index ranges; *prefix is malloc'd, or NULL (and
 * *len 0) when the pattern or options give none. */
int dtx__regex_prefix(const char *pattern, size_t len, const char *options,
                      char **prefix, size_t *plen);

/* ---- compile arena (filter.c) ---------------------------------------------- */

/* The memory of one compiled filter or update: its nodes, arrays and path
 * strings are carved from a few chunks and released together, so a
 * compile costs a malloc or two instead of one per piece and a free walks
 * no lists.  The jansson values and regexes a compiled form holds are not
 * in it; their owner releases them. */
typedef struct dtx__arena {
  char *cur, *end; /* the free part of the newest chunk */
  void *chunks;    /* chunks from malloc, linked through their first word */
} dtx__arena_t;

/* Starts an arena whose first chunk is buf[0..n), the caller's (8-byte
 * aligned; NULL and 0 for none). */
void dtx__arena_init(dtx__arena_t *a, void *buf, size_t n);

/* n zeroed bytes aligned to 8 (enough for the pointers, 64-bit integers
 * and doubles a compiled form holds), valid until dtx__arena_free; NULL
 * when out of memory (the arena stays usable and freeable). */
void *dtx__arena_alloc(dtx__arena_t *a, size_t n);

/* A NUL-terminated copy of s[0..n) in the arena, or NULL. */
char *dtx__arena_strndup(dtx__arena_t *a, const char *s, size_t n);

/* Frees the chunks from malloc (never the caller's first one); the arena
 * must then be initialised again before use. */
void dtx__arena_free(dtx__arena_t *a);

/* Flags of dtx__filter_compile_flags and dtx__update_compile_flags. */
enum {
  /* The compiled form holds counted references (json_incref; jansson
   * 2.14's counts are atomic) to the spec's operand values instead of deep
   * copies.  The spec must then not change while the compiled form lives:
   * only for a compile that lives for one call whose spec is const, such
   * as the store API's (store.c).  A compile kept past its call
   * (validators, rules, anything cached) must copy: without this flag, the
   * compiled form shares nothing mutable with the spec. */
  DTX__COMPILE_BORROW = 1u << 0,
};

/* ---- filter ----------------------------------------------------------------- */

typedef struct dtx__filter dtx__filter_t;

/* Compiles a MongoDB filter document.  Supported: implicit equality
 * (including array membership and whole-array equality), dotted paths
 * through objects and arrays (numeric segments index arrays), $eq $ne $gt
 * $gte $lt $lte $in $nin $exists $and $or $nor $not $elemMatch $size $all
 * $type $mod $regex/$options.
 * $ne/$nin match only when no element equals (missing fields match).
 * Unknown operators and malformed arguments are DTX_EBADQUERY with the
 * operator and path in the detail.  spec NULL means {} (matches all).
 * The compiled filter does not reference spec after return. */
int dtx__filter_compile(const json_t *spec, dtx__filter_t **out);

/* dtx__filter_compile with DTX__COMPILE_* flags: with DTX__COMPILE_BORROW
 * the compiled filter references spec's operand values, and spec must not
 * change until dtx__filter_free. */
int dtx__filter_compile_flags(const json_t *spec, unsigned flags,
                              dtx__filter_t **out);

/* 1 when doc matches, else 0.  Thread-safe on a shared compiled filter.
 * A $regex that exceeds PCRE2's limits makes this and every later match of
 * f return 0; dtx__filter_error(f) then reports the error, and every
 * caller that acts on matches checks it before trusting a "no". */
int dtx__filter_match(const dtx__filter_t *f, const json_t *doc);

/* As dtx__filter_match, and on a match *pos is the array position the
 * positional $ refers to (the element of the first array crossed by the
 * last matching condition, or matched by its $elemMatch), or SIZE_MAX. */
int dtx__filter_match_pos(const dtx__filter_t *f, const json_t *doc,
                          size_t *pos);

/* 0, or the error an earlier match of f met (raised again with its
 * detail, so the caller can return it). */
int dtx__filter_error(const dtx__filter_t *f);

void dtx__filter_free(dtx__filter_t *f);

/* ---- update ------------------------------------------------------------------ */

typedef struct dtx__update dtx__update_t;

/* Compiles an update: either operators ($set $unset $inc $mul $min $max
 * $rename $push with $each/$position/$sort/$slice, $pull by value or
 * condition, $pullAll, $pop, $addToSet with $each, $bit, $currentDate,
 * $setOnInsert), whose paths may hold the positional segments $, $[] and
 * $[id], or a replacement document (no '$' keys).  array_filters (NULL, or
 * an array of filter documents, MongoDB's arrayFilters) defines the $[id]
 * identifiers.  Conflicting paths (one a prefix of another, or the same
 * path under two operators), bad arguments, an empty operator document,
 * changing _id, unknown operators, an identifier without a filter and a
 * filter not used are DTX_EBADUPDATE. */
int dtx__update_compile_ex(const json_t *spec, const json_t *array_filters,
                           dtx__update_t **out);
int dtx__update_compile(const json_t *spec, dtx__update_t **out);

/* dtx__update_compile_ex with DTX__COMPILE_* flags: with
 * DTX__COMPILE_BORROW the compiled update references the operand values of
 * spec and array_filters, which must not change until dtx__update_free. */
int dtx__update_compile_flags(const json_t *spec, const json_t *array_filters,
                              unsigned flags, dtx__update_t **out);

/* Binds the compiled query filter the update runs under (borrowed: it
 * must outlive u's use), for the positional $ and so that an upsert can
 * see a filter error. */
void dtx__update_bind_filter(dtx__update_t *u, const dtx__filter_t *f);
const dtx__filter_t *dtx__update_filter(const dtx__update_t *u);

/* 1 when the update is a replacement document. */
int dtx__update_is_replacement(const dtx__update_t *u);

/* Applies u to a copy of doc and returns it in *out; doc is untouched.
 * *out shares with doc the objects and arrays the update does not change
 * (both hold references): a caller that changes one of them in place in
 * either document copies it first when its refcount is above 1, as
 * update_ops.c does.  is_insert enables $setOnInsert (and is set for upserts).  now_ms is the
 * value $currentDate writes.  *changed is 1 when *out differs from doc.
 * Errors (document left unchanged, *out NULL):
 *   DTX_ETYPE      $inc/$min... of a non-number, $push to a non-array,
 *                  $bit of a double, a path through a scalar, $rename
 *                  across an array
 *   DTX_EOVERFLOW  $inc/$mul past int64
 *   DTX_EIMMUTABLE the result's _id differs from doc's _id
 *   DTX_EBADUPDATE the positional $ without a matched element, $[] on a
 *                  missing array, concrete paths that conflict
 * The detail names the operator and path. */
int dtx__update_apply(const dtx__update_t *u, const json_t *doc, int is_insert,
                      int64_t now_ms, json_t **out, int *changed);

void dtx__update_free(dtx__update_t *u);

/* Structural identity (types, values, field order), stricter than
 * dtx__value_cmp; 0.0 and -0.0 differ: the rule of *changed above, for
 * any document a write may store (field order is visible in it). */
int dtx__upd_same(const json_t *a, const json_t *b);

/* Builds the base document of an upsert from the filter's equality
 * conditions ({path: v}, $eq, one-element $in and $all, inside $and and a
 * single-branch $or), as MongoDB does; two on one path (or a path and its
 * prefix) are DTX_EBADQUERY.  The caller then applies the update with
 * is_insert=1 and adds an _id if still missing. */
int dtx__upsert_seed(const json_t *filter, json_t **out);

/* The whole document an upsert inserts: the seed of filter (only its _id
 * when u is a replacement), the update u applied as an insert at now_ms,
 * then a generated _id (first in key order) if it still has none; the _id
 * is checked.  When the filter bound to u (dtx__update_bind_filter) met an
 * error while matching, that error is returned instead: nothing matched
 * only because matching failed.  *out is new (caller owns it).  Both
 * backends insert exactly this. */
int dtx__upsert_doc(const json_t *filter, const dtx__update_t *u,
                    int64_t now_ms, json_t **out);

/* ---- projection and sort ---------------------------------------------------- */

/* Validates a projection: all inclusions or all exclusions (except _id,
 * which may be excluded in an inclusion), plus the operators "path.$",
 * {$slice: n | [skip, n]} and {$elemMatch: filter}.  DTX_EINVAL for a bad
 * shape, DTX_EBADQUERY for an unknown or unsupported operator. */
int dtx__projection_check(const json_t *projection);

typedef struct dtx__proj dtx__proj_t;

/* Compiles a projection for many documents.  It borrows projection's key
 * strings, so projection must outlive it.  Free with dtx__proj_free. */
int dtx__proj_compile(const json_t *projection, dtx__proj_t **out);
void dtx__proj_free(dtx__proj_t *p);

/* Applies p to doc (new reference in *out).  f is the query's compiled
 * filter, for "path.$" (NULL: a positional projection fails with
 * DTX_EBADQUERY). */
int dtx__proj_apply(const dtx__proj_t *p, const json_t *doc,
                    const dtx__filter_t *f, json_t **out);

/* dtx__proj_apply taking the positional $'s element from matched (the
 * document the query matched, e.g. before an update) instead of doc. */
int dtx__proj_apply_at(const dtx__proj_t *p, const json_t *doc,
                       const dtx__filter_t *f, const json_t *matched,
                       json_t **out);

/* MongoDB's rule for "path.$": the query must name the array field.
 * DTX_EBADQUERY otherwise, so the mistake is caught before any write. */
int dtx__proj_check_query(const dtx__proj_t *p, const json_t *filter);

/* Compiles and applies projection in one go (no positional $). */
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
/* Keeps elements [skip, skip + limit) of *array (limit <= 0: all after
 * skip; skip <= 0: from the first), as a find's page: *array is replaced
 * by a new array when that drops any.  0, or DTX_ENOMEM (*array
 * then freed and NULL).  Both backends page a sorted find with it. */
int dtx__page_array(json_t **array, int64_t skip, int64_t limit);

/* ---- aggregation ------------------------------------------------------------ */

typedef struct dtx__pipeline dtx__pipeline_t;

/* The memory a run's $group and $sort stages may hold together, unless
 * the caller sets another limit (dtx_agg_opts_t.max_bytes): 100 MiB, as
 * MongoDB's per-stage limit without allowDiskUse. */
#define DTX_AGG_MAX_BYTES ((size_t)100 << 20)

/* Compiles a pipeline (an array of stage documents; agg.c lists them, and
 * agg_expr.c the expression operators).  Unknown and unsupported stages,
 * operators and options are DTX_EBADQUERY naming them.  The pipeline does
 * not reference stages after return.  Free with dtx__pipeline_free. */
int dtx__pipeline_compile(const json_t *stages, dtx__pipeline_t **out);
void dtx__pipeline_free(dtx__pipeline_t *p);

/* What the store's find must supply: the leading $match stages as one
 * filter (NULL: all documents), and a $sort, $skip and $limit that follow
 * them directly (NULL / 0 when absent).  Borrowed from p. */
void dtx__pipeline_source(const dtx__pipeline_t *p, const json_t **filter,
                          const json_t **sort, int64_t *skip,
                          int64_t *limit);

typedef struct dtx__agg_env {
  size_t max_bytes; /* 0: DTX_AGG_MAX_BYTES */
  /* $lookup: the documents of coll matching filter, as a new array. */
  int (*find)(void *ctx, const char *coll, const json_t *filter,
              json_t **out);
  void *ctx;
} dtx__agg_env_t;

/* Runs the stages after the source over input (an array of documents,
 * stolen: released as they are consumed).  *out receives the results as a
 * new array.  DTX_ELIMIT when $group/$sort pass the memory limit;
 * DTX_ETYPE, DTX_EOVERFLOW from expressions and accumulators. */
int dtx__pipeline_run(const dtx__pipeline_t *p, json_t *input,
                      const dtx__agg_env_t *env, json_t **out);

/* ---- ids ------------------------------------------------------------------- */

/* Writes a new 24-hex-digit id and a NUL into out: 4 bytes of seconds, 5
 * random bytes per process, 3 bytes of counter, as MongoDB's ObjectId, so
 * ids sort by creation time. */
void dtx__id_new(char out[25]);

/* 0 when id is a valid _id, else DTX_EINVAL with the reason.  Any value
 * but an array is one, as in MongoDB: numbers (1 and 1.0 are the same
 * _id), strings of 1 to 256 bytes, null, booleans, and objects whose field
 * names, at any depth, neither start with '$' nor contain '.' (at most
 * about 1 KiB of JSON).  Equal objects (dtx__value_cmp) are the same _id;
 * field order counts, as in BSON. */
int dtx__id_check(const json_t *id);

/* 1 when dtx__id_check would accept id, without raising an error: a
 * planner uses it to read {_id: v} as a key lookup. */
int dtx__id_valid(const json_t *id);

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
/* How create_index's spec want meets the index have already on coll:
 * 0 when their names differ; 1 when they have the same
 * dtx__index_spec_json (the key compared as a JSON object, field order
 * aside), so creating it again changes nothing; else DTX_EBADINDEX (an
 * index of that name with another spec; out of memory counts as one). */
int dtx__index_spec_same(const dtx__index_spec_t *have,
                         const dtx__index_spec_t *want, const char *coll);

/* The index keys of doc: an array of tuples (arrays of nfields values),
 * without duplicates.  A missing field gives null; an array gives one key
 * per element (an empty array gives the key []); paths that run through
 * the same array pair up element by element, so {changes.a:1, changes.b:1}
 * gives one (a, b) tuple per element of changes.  Two paths through
 * different arrays are DTX_EBADINDEX ("cannot index parallel arrays").  A
 * sparse index gives an empty array when doc has none of the fields. */
int dtx__index_keys(const dtx__index_spec_t *s, const json_t *doc,
                    json_t **out);

/* 1 when s's keys cannot differ between old and doc: the top-level field
 * each of its paths starts with is the very same value (pointer) in both,
 * or absent from both.  The keys, sparse or not, are a function of those
 * fields alone, and an updated document shares the fields its update did
 * not change with the one it was made from (dtx__update_apply's copy on
 * write), so most indexes of an updated document need no keys computed.
 * Both backends skip such an index when writing an update. */
int dtx__index_fields_same(const dtx__index_spec_t *s, const json_t *old,
                           const json_t *doc);

/* Whether keys (from dtx__index_keys) make their index multikey: several
 * tuples, or a tuple holding an array or object value (an empty array, a
 * whole subdocument).  Both backends keep the flag per index, and the
 * planner then combines conditions more carefully; an index that never
 * had such keys also lists each document once under scalars only, whose
 * index order is MongoDB's sort order, so a sort can walk it
 * (DTX__PLAN_SORTED, store/plan.h). */
int dtx__index_keys_multikey(const json_t *keys);

/* Drops from *keys (an array of key tuples) each tuple equal under
 * dtx__value_cmp to an earlier one, keeping the first of each in place:
 * dtx__index_keys' rule, shared with dtx__bindex_key_tuples (bkeyvals.c).
 * *keys may be replaced by a new array (the old one released).  0 or
 * DTX_ENOMEM (*keys unchanged). */
int dtx__index_keys_dedupe(json_t **keys);

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
 * {"validator": V|null, "delete_guard": G|null, "transition": T|null}
 * (doctx.h describes them).
 * *out is NULL when spec (which may be NULL) holds no rule; null and {}
 * mean none.  DTX_EBADQUERY for an invalid rule.  Immutable once built,
 * so a catalog snapshot may share one between threads. */
typedef struct dtx__rules dtx__rules_t;
int dtx__rules_compile(const json_t *spec, dtx__rules_t **out);
void dtx__rules_free(dtx__rules_t *r);
/* The normalised stored form (borrowed; NULL when r is NULL). */
const json_t *dtx__rules_spec(const dtx__rules_t *r);

/* A pattern's rules may not be taken away by a plain change of rules:
 * 0 when next (a normalised spec, NULL: none) keeps what cur (the stored
 * one, NULL: none) owes to a pattern -- all of it when cur names a
 * pattern ("pattern": its own collections), else every transition object
 * naming one (a pattern's rule in a user's collection: sync's master
 * guard, batch's markers) -- else DTX_EVALIDATION naming the pattern. */
int dtx__rules_keep_owned(const char *coll, const json_t *cur,
                          const json_t *next);

/* The one check every backend makes, inside the atomic step of a write,
 * with the rules of the catalog version that step is bound to (NULL: no
 * rules).  after is the document about to be stored (NULL for a delete),
 * before the stored one being deleted or replaced (NULL for an insert):
 *  - after must nest at most DTX_MAX_DEPTH levels (DTX_EINVAL), always;
 *  - unless bypass, after must satisfy the validator, an update (before
 *    and after both given) must keep the transition rules, an insert their
 *    "insert" clauses, and a deleted before must match the delete guard
 *    (DTX_EVALIDATION).  Transition rules of scope "plain" are skipped
 *    while a pattern step runs on this thread (dtx__rules_step_enter; of
 *    one of the rule's "steps" patterns, when it lists any).
 * The detail names the collection, the _id and the failing rule. */

/* A doctx pattern's step calls the store between these two, on the
 * calling thread (the kit's step functions, src/txn/kit*.c, bracket their
 * store calls), naming itself: its fault point, whose first segment is
 * its pattern ("transfer.debit"; NULL: a step of no known pattern).
 * While one runs, transition rules of scope "plain" do not judge its
 * writes -- or, when such a rule lists "steps", only the writes of those
 * patterns' steps: they state what the generic document commands may
 * change, and a step may make a change (a credit marker taken off once
 * its transfer committed) that only the protocol, having read the other
 * documents, can tell is due.  name must stay valid until the leave
 * (the kit passes its callers' fault points, string literals).  enter
 * returns what leave restores (they nest). */
const char *dtx__rules_step_enter(const char *name);
void dtx__rules_step_leave(const char *saved);
/* The step running on this thread (NULL: none), for a backend that runs
 * a write on another thread than the one that made it: that thread
 * judges it under this name (dtx__rules_step_leave(name) sets it, and
 * returns nothing to restore: keep dtx__rules_step_now() before). */
const char *dtx__rules_step_now(void);
int dtx__doc_check_write(const dtx__rules_t *r, const char *coll,
                         const json_t *before, const json_t *after,
                         int bypass);

#endif
