/* plan.h -- the one query planner.  From a filter, an optional sort and a
 * collection's indexes it chooses what to read; the backends only execute
 * the plan (sqlite/plan.c as SQL over its index tables, redis/plan.c as
 * zset ranges scattered over the buckets).
 *
 * The planner reads the filter's top-level conjuncts (including those
 * inside $and, and the fields of an $elemMatch) of the forms
 *   {path: scalar}  {path: {$eq: scalar}}  {path: {$in: [scalars]}}
 *   {path: {$gt|$gte|$lt|$lte: number or string}}  {path: {$regex: "^abc"}}
 * and picks, in this order: the documents an _id equality or $in names;
 * else the index whose leading fields have the most equalities (a unique
 * index fully covered by equalities wins), perhaps with a range on the
 * next field -- or, for a sort, an index walked in the sort's order when
 * no index has more equalities; else a scan.  A plan only narrows the
 * candidates: the backend checks every one with dtx__filter_match, so a
 * plan may over-approximate but must never miss a document.  The rules
 * that keep it from missing one:
 *   - sparse indexes omit documents without the fields, so they are not
 *     used for null equality;
 *   - index keys pair fields that run through the same array element by
 *     element, while {a.x: 1, a.y: 2} may match x and y in different
 *     elements; so conditions on fields that share a first path segment
 *     are combined only when they come from one $elemMatch (which does
 *     require the same element) and differ right after its path;
 *   - likewise {a: {$gte: 2, $lt: 3}} matches a: [1, 5], so two bounds
 *     narrow one key only inside $elemMatch (and bounds in two type
 *     brackets never narrow together).
 * The last two rules apply to multikey indexes only: like MongoDB, an
 * index remembers whether any document ever gave it several keys
 * (dtx__index_keys_multikey), and while none has, each document has one
 * key tuple and conditions combine freely. */
#ifndef DTX_STORE_PLAN_H
#define DTX_STORE_PLAN_H

#include <jansson.h>
#include <stddef.h>

#include "doc/doc.h"

enum {
  DTX__PLAN_NONE,   /* no document can match ({$in: []}) */
  DTX__PLAN_IDS,    /* the documents whose _id is one of ids */
  DTX__PLAN_INDEX,  /* index ix's entries under each combination of the
                       equality values, within the range if there is one */
  DTX__PLAN_SORTED, /* index ix walked in key order under one-value
                       equalities, within the range on the first sort
                       field if there is one: its entries come in the
                       sort's order, ties in insertion order
                       (dtx__index_keys_multikey) */
  DTX__PLAN_SCAN    /* every document */
};

typedef struct dtx__plan {
  int kind;
  json_t *ids;     /* IDS: an array of one or more _id values (owned) */
  const void *ix;  /* INDEX, SORTED: the backend's index (borrowed) */
  size_t neq;      /* equalities on the index's first neq fields, */
  json_t *eq[16];  /* each an array of values (owned; SORTED: one value) */
  json_t *lo, *hi; /* INDEX, SORTED: the range on field neq, either NULL
                      (owned);
                      hi is left out where it may not narrow with lo */
  int lo_incl, hi_incl;
} dtx__plan_t;

/* An index as the planner sees it.  ix is the backend's own, handed back
 * in the plan. */
typedef struct dtx__plan_index {
  const void *ix;
  const dtx__index_spec_t *spec;
  int multikey; /* some document made it so (dtx__index_keys_multikey) */
} dtx__plan_index_t;

/* Describes index i of the backend's collection coll in *out; 0 when
 * queries may not use it (yet). */
typedef int (*dtx__plan_index_fn)(const void *coll, size_t i,
                                  dtx__plan_index_t *out);

/* Plans a query of filter_spec (borrowed) over the nidx indexes that
 * index describes.  With sort (NULL: none) the plan may be SORTED;
 * without, or when a plain plan reads fewer documents, it is the plan
 * the filter alone gets.  A top-level _id equality on a valid _id is the
 * IDS plan at once, without gathering the conditions (the primitives'
 * {_id: value, more} filters; the gathering's ~5 KB malloc showed in
 * profiles of batched transfers).  0 with *p set (free it with
 * dtx__plan_free), or DTX_ENOMEM with *p empty. */
int dtx__plan_choose(const json_t *filter_spec, const json_t *sort,
                     const void *coll, size_t nidx, dtx__plan_index_fn index,
                     dtx__plan_t *p);
void dtx__plan_free(dtx__plan_t *p);

/* The value of filter_spec's top-level _id when it is a valid _id (never
 * an operator document), else NULL: the filter's plan is then IDS of that
 * one value, and a backend may read that document without planning (the
 * primitives' usual filter; SQLite does, saving the plan's allocations). */
const json_t *dtx__plan_one_id(const json_t *filter_spec);

#endif
