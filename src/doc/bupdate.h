/* bupdate.h -- the update applier and upsert on BSON (docs/engine.md): the
 * twin of doc.h's "update" section, with BSON bytes in and one new bson_t
 * out.
 *
 * Semantics are update.c's wherever JSON can say the same thing (every
 * row of tests/unit/test_update*.c runs through both engines), plus
 * MongoDB's number types: $inc/$mul promote int32 to int64 on overflow,
 * int64 overflow is DTX_EOVERFLOW, a double operand makes a double and a
 * Decimal128 one a Decimal128; $currentDate writes a Date (or a Timestamp);
 * $bit works on int32/int64 only.
 *
 * The applier writes ONE new buffer in one pass over the stored document:
 * fields and subdocuments no operation reaches are copied as their bytes
 * (one memcpy per untouched element); only the containers on an
 * operation's path are rebuilt.
 *
 * Conventions as doc.h: negative DTX_E* with a detail; inputs borrowed;
 * documents passed as (data, len) must have passed dtx__bson_check or have
 * been written by libbson. */
#ifndef DTX_BUPDATE_H
#define DTX_BUPDATE_H

#include "doc/bdoc.h"
#include "doc/bfilter.h"

typedef struct dtx__bupdate dtx__bupdate_t;

/* Compiles an update document spec[0..len): operators or a replacement,
 * as dtx__update_compile_flags.  afs (NULL, or a value that must be an
 * array of filter documents) is MongoDB's arrayFilters.  The compiled
 * update holds a copy of spec's bytes (its arrayFilters and $pull
 * conditions are compiled BSON filters, which copy theirs), so the caller
 * may free them at once; flags are accepted for symmetry and ignored
 * (nothing is ever borrowed).  *out is the caller's (dtx__bupdate_free);
 * NULL on error. */
int dtx__bupdate_compile(const uint8_t *spec, uint32_t len,
                         const dtx__bval_t *afs, unsigned flags,
                         dtx__bupdate_t **out);

void dtx__bupdate_free(dtx__bupdate_t *u);

/* 1 when u is a replacement document. */
int dtx__bupdate_is_replacement(const dtx__bupdate_t *u);

/* Binds the compiled query filter the update runs under (borrowed: it
 * must outlive u's use), for the positional $ (its dtx__bfilter_match_pos)
 * and so that an upsert can see a filter error. */
void dtx__bupdate_bind_filter(dtx__bupdate_t *u, const dtx__bfilter_t *f);
const dtx__bfilter_t *dtx__bupdate_filter(const dtx__bupdate_t *u);

/* Applies u to doc[0..len) and returns the result in *out, a new bson_t
 * whose one buffer was written in one pass (bson_destroy it).  doc is
 * untouched.  is_insert enables $setOnInsert; now_ms is what $currentDate
 * writes.  *changed is 1 when the bytes of *out differ from doc's.
 * Thread-safe on a shared compiled update.  Errors as
 * dtx__update_apply (*out NULL, *changed 0), and:
 *   DTX_ELIMIT  the result would be over 16 MiB (DTX__DOC_MAX)
 *   DTX_EINVAL  the result would nest deeper than DTX_MAX_DEPTH */
int dtx__bupdate_apply(const dtx__bupdate_t *u, const uint8_t *doc,
                       uint32_t len, int is_insert, int64_t now_ms,
                       bson_t **out, int *changed);

/* The base document of an upsert from a filter document, as
 * dtx__upsert_seed: *out is a new bson_t (bson_destroy it). */
int dtx__bupsert_seed(const uint8_t *filter, uint32_t len, bson_t **out);

/* The whole document an upsert inserts, as dtx__upsert_doc: the seed, u
 * applied as an insert at now_ms, then an ObjectId _id (first) when it
 * still has none; the error of the filter bound to u, if its matching
 * met one, instead.  filter may be NULL ({}). */
int dtx__bupsert_doc(const uint8_t *filter, uint32_t len,
                     const dtx__bupdate_t *u, int64_t now_ms, bson_t **out);

#endif
