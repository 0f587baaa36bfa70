/* agg_int.h -- internals of the aggregation engine, shared by
 *   agg_expr.c   aggregation expressions: compile and evaluate
 *   agg.c        the pipeline: stages, their order, the run loop
 *   agg_group.c  $group and its accumulators
 * Nothing outside src/doc includes it. */
#ifndef DTX_DOC_AGG_INT_H
#define DTX_DOC_AGG_INT_H

#include "doc/doc.h"

#include <stddef.h>

/* ---- expressions (agg_expr.c) ------------------------------------------ */

typedef struct dtx__expr dtx__expr_t;

/* Compiles an aggregation expression: a literal, "$field.path",
 * "$$ROOT[.path]", "$$CURRENT[.path]", an array or object of expressions,
 * or {$op: args} for the operators listed in doc.h.  where names the
 * stage and field for error details.  DTX_EBADQUERY. */
int dtx__expr_compile(const json_t *spec, const char *where,
                      dtx__expr_t **out);
void dtx__expr_free(dtx__expr_t *e);

/* Evaluates e against doc: *out is a new reference, or NULL for
 * "missing" (which $ifNull, comparisons and objects tell from null).
 * DTX_ETYPE / DTX_EOVERFLOW with the operator in the detail. */
int dtx__expr_eval(const dtx__expr_t *e, const json_t *doc, json_t **out);

/* MongoDB's truthiness: false, null, missing and zero are false. */
int dtx__agg_truthy(const json_t *v);

/* Returns a copy of doc with v (stolen; NULL removes) at the dotted path,
 * sharing every untouched part with doc (copy on write, so documents that
 * flow between stages are never changed in place).  Objects are created
 * on the way; through an array, each object element gets the field. */
json_t *dtx__agg_set_path(const json_t *doc, const char *path, json_t *v);

/* The value at a dotted path through objects only (borrowed), or NULL. */
const json_t *dtx__agg_get_path(const json_t *doc, const char *path);

/* ---- the running pipeline --------------------------------------------- */

typedef struct agg_run agg_run_t;

/* Adds bytes to the memory the run's $group and $sort stages hold: 0, or
 * DTX_ELIMIT naming stage when that passes the run's limit. */
int dtx__agg_charge(agg_run_t *r, size_t bytes, const char *stage);

/* ---- $group (agg_group.c) ------------------------------------------------ */

typedef struct group_spec group_spec_t;
typedef struct group_state group_state_t;

int dtx__group_compile(const json_t *spec, group_spec_t **out);
void dtx__group_spec_free(group_spec_t *g);

/* Per run: a fresh state, one document in (borrowed), the groups out in
 * first-seen order (each a new reference passed to emit, which returns 0,
 * 1 to stop early, or an error). */
int dtx__group_state_new(const group_spec_t *g, group_state_t **out);
void dtx__group_state_free(const group_spec_t *g, group_state_t *s);
int dtx__group_add(const group_spec_t *g, group_state_t *s, agg_run_t *r,
                   const json_t *doc);
int dtx__group_finish(const group_spec_t *g, group_state_t *s,
                      int (*emit)(void *ctx, json_t *doc), void *ctx);

#endif
