/* bproj.h -- index keys, sort, projection and _id on BSON documents
 * (bkeys.c, bsort.c, bproject.c, bid.c; docs/engine.md).
 *
 * The BSON engine's counterparts of keys.c, sort.c, project.c and id.c,
 * with the same semantics wherever JSON can say the same thing (the unit
 * tables of the json_t versions run through both: test_keys.c,
 * test_sort_project.c).  Documents are checked bytes (dtx__bson_check, or
 * written by libbson) viewed as (data, len); specs (sort, projection) are
 * BSON documents too, and checked bytes as well: the trusting reader reads
 * them.  Conventions as bdoc.h: negative DTX_E* with a
 * detail from dtx__err(); borrowed inputs; out-parameters the caller's. */
#ifndef DTX_BPROJ_H
#define DTX_BPROJ_H

#include "doc/bdoc.h"
#include "util/buf.h"

#include <stddef.h>
#include <stdint.h>

/* ---- index keys (bkeys.c) ----------------------------------------------- */

/* The index keys of one document: n byte strings, one per tuple, each the
 * concatenation of dtx__bkey_encode of the tuple's values (with the
 * field's direction), so memcmp orders them as the index does.  Key i is
 * b.p[start(i) .. end[i]), start(i) being end[i-1] (0 for the first).
 * A zeroed dtx__bkeys_t is empty; free it with dtx__bkeys_free, which
 * leaves it zeroed (reusable). */
typedef struct dtx__bkeys {
  dtx__buf_t b;
  size_t n, cap;
  size_t *end;
  int multikey; /* dtx__index_keys_multikey's answer for these keys */
} dtx__bkeys_t;

void dtx__bkeys_free(dtx__bkeys_t *k);

/* Key i of k (its bytes, and their count in *len). */
const uint8_t *dtx__bkeys_at(const dtx__bkeys_t *k, size_t i, size_t *len);

/* dtx__index_keys over BSON: the same tuples, in the same order, the same
 * multikey rules, parallel-array error (DTX_EBADINDEX, same detail) and
 * sparse rule.  Duplicates (equal encodings, i.e. tuples equal under
 * dtx__bval_cmp) are dropped, the first one kept.  *out is emptied first;
 * on error it is left empty. */
int dtx__bindex_keys(const dtx__index_spec_t *s, const uint8_t *doc,
                     uint32_t len, dtx__bkeys_t *out);

/* ---- sort (bsort.c) ------------------------------------------------------ */

/* Validates a sort spec (a document {path: 1|-1, ...}), as
 * dtx__sort_check: DTX_EINVAL with the same details.  The direction must
 * be an int32 or int64 1 or -1 (as the json_t engine's integer). */
int dtx__bsort_check(const uint8_t *spec, uint32_t slen);

/* Compares two documents (views of type DOCUMENT) by a checked spec, as
 * dtx__sort_cmp. */
int dtx__bsort_cmp(const uint8_t *spec, uint32_t slen, const dtx__bval_t *a,
                   const dtx__bval_t *b);

/* Stable-sorts docs[0..n) (views of documents) in place by spec, as
 * dtx__sort_array: the spec is checked first (DTX_EINVAL); DTX_ENOMEM. */
int dtx__bsort_docs(dtx__bval_t *docs, size_t n, const uint8_t *spec,
                    uint32_t slen);

/* ---- projection (bproject.c) --------------------------------------------- */

typedef struct dtx__bproj dtx__bproj_t;

/* Compiles a projection document (as dtx__proj_compile, same errors and
 * details).  The compiled form copies the spec's bytes into its own arena,
 * so spec may go right after.  Free with dtx__bproj_free. */
int dtx__bproj_compile(const uint8_t *spec, uint32_t slen,
                       dtx__bproj_t **out);
void dtx__bproj_free(dtx__bproj_t *p);

/* Applies p to doc (as dtx__proj_apply without a query: "path.$" fails as
 * there), writing the result into *out, which the call initialises (the
 * caller bson_destroy()s it, on success only; on error it is not
 * initialised). */
int dtx__bproj_apply(const dtx__bproj_t *p, const uint8_t *doc, uint32_t len,
                     bson_t *out);

/* As dtx__proj_apply_at: f (the query, compiled by bfilter.h; may be
 * NULL) gives "path.$" its position by matching matched[0..mlen) (NULL:
 * doc itself); same errors and details. */
struct dtx__bfilter;
int dtx__bproj_apply_at(const dtx__bproj_t *p, const uint8_t *doc,
                        uint32_t len, const struct dtx__bfilter *f,
                        const uint8_t *matched, uint32_t mlen, bson_t *out);

/* As dtx__proj_check_query: every "path.$" must have its array field
 * named by the filter document filter[0..flen) (NULL: none named). */
int dtx__bproj_check_query(const dtx__bproj_t *p, const uint8_t *filter,
                           uint32_t flen);

/* Compiles and applies in one go (dtx__project). */
int dtx__bproject(const uint8_t *doc, uint32_t len, const uint8_t *spec,
                  uint32_t slen, bson_t *out);

/* ---- _id (bid.c) ---------------------------------------------------------- */

/* 0 when id is a valid _id, else DTX_EINVAL with the reason: as
 * dtx__id_check for the values JSON has (same details), and, as the
 * manual says ("The _id Field"), any other BSON type but array, regex and
 * undefined.  v->type 0 (missing) is "_id is missing". */
int dtx__bid_check(const dtx__bval_t *id);

/* 1 when dtx__bid_check would accept id, without raising an error. */
int dtx__bid_valid(const dtx__bval_t *id);

/* A new ObjectId (libbson's bson_oid_init: time, per-process random,
 * counter; fork-safe as libbson makes it). */
void dtx__bid_new(bson_oid_t *out);

#endif
