/* conds.h -- the conditions a query planner can use, gathered from a
 * filter: equalities and $in lists of scalars, ranges, and the groups
 * $elemMatch forms.  Both backends' planners (sqlite/plan.c, redis/plan.c)
 * choose indexes from these; the matcher still re-checks every candidate,
 * so what is not understood here is simply left out, never an error. */
#ifndef DTX_STORE_CONDS_H
#define DTX_STORE_CONDS_H

#include <jansson.h>
#include <stddef.h>

#include "doc/doc.h"

enum { DTX__COND_EQ, DTX__COND_RANGE };

#define DTX__MAX_CONDS 64
#define DTX__MAX_COMBOS 256 /* equality value combinations one plan probes */

typedef struct cond {
  char *path; /* malloc'd */
  int group;  /* 0: top level; else the $elemMatch it came from */
  size_t gprefix; /* length of "elemMatchPath." when group != 0 */
  int kind;
  json_t *vals; /* DTX__COND_EQ: array of scalars (owned); RANGE from a
                   $regex: the bounds lo and hi point into (owned) */
  const json_t *lo, *hi; /* DTX__COND_RANGE bounds (borrowed), either NULL */
  int lo_incl, hi_incl;
  int one_elem; /* both bounds hold for one value (from $elemMatch) */
} dtx__cond_t;

typedef struct conds {
  dtx__cond_t c[DTX__MAX_CONDS];
  size_t n;
  int ngroups;
} dtx__conds_t;

/* Gathers the conjuncts of filter_spec (borrowed; the conditions borrow
 * range bounds from it, so it must outlive cs) into cs, replacing what cs
 * held.  Conditions beyond DTX__MAX_CONDS, or left out for lack of memory,
 * only make the plan less selective. */
void dtx__conds_collect(dtx__conds_t *cs, const json_t *filter_spec);

/* Frees what cs holds (not cs itself). */
void dtx__conds_free(dtx__conds_t *cs);

/* An index chosen for a query: equalities on its first neq fields, then
 * perhaps a range on the next.  ix is the backend's index (borrowed). */
typedef struct dtx__choice {
  const void *ix;
  size_t neq;
  const dtx__cond_t *eq[16];
  const dtx__cond_t *range;
  int score;
} dtx__choice_t;

/* Scores the index ix (its spec s, and whether it is multikey:
 * dtx__index_keys_multikey) against cs, and makes it *best if it scores higher:
 * equalities count most, a full unique match wins outright. */
void dtx__conds_consider(const dtx__conds_t *cs, const void *ix,
                         const dtx__index_spec_t *s, int multikey,
                         dtx__choice_t *best);

/* Whether index ix (spec s) can serve a sort by walking its entries in
 * key order under an equality prefix, so that the first entry whose
 * document matches is the least document in `sort` order (ties in
 * insertion order, as a stable sort of all matches gives them).  It can
 * when: every sort direction is 1; the index is neither unique nor
 * multikey (one entry per document, scalars only: their key order is the
 * sort order, brackets and all; dtx__index_keys_multikey); its first
 * fields are equalities of cs with one value each (not null for a sparse
 * index, which must have at least one); and its remaining fields are
 * exactly the sort's paths, in order.  Then *ch is that plan (neq
 * equalities, no range) and the result is 1; else 0.  The caller still
 * checks each document with the matcher, and prefers a plan with more
 * equalities (dtx__conds_consider) over this one. */
int dtx__conds_sorted(const dtx__conds_t *cs, const void *ix,
                      const dtx__index_spec_t *s, int multikey,
                      const json_t *sort, dtx__choice_t *ch);

/* Whether paths a and b begin with the same segment ("a.b" and "a.c"). */
int dtx__same_first_seg(const char *a, const char *b);

#endif
