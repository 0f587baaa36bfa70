/* bagg_int.h -- internals of the BSON aggregation engine (bagg.h), shared by
 *   bagg_expr.c   expressions, and the document writer both files use
 *   bagg.c        the stages and the run loop
 *   bagg_group.c  $group and its accumulators
 * Nothing outside src/doc includes it. */
#ifndef DTX_DOC_BAGG_INT_H
#define DTX_DOC_BAGG_INT_H

#include "doc/bagg.h"
#include "util/buf.h"

/* ---- writing documents into a dtx__buf_t ------------------------------- */

/* Starts a document (or array) at b->n: returns its offset for bw_end. */
size_t dtx__bw_begin(dtx__buf_t *b);
/* Ends it: the terminating NUL and the length patched in. */
void dtx__bw_end(dtx__buf_t *b, size_t start);
/* One element: v's type, the name, v's payload (v must not be missing). */
void dtx__bw_val(dtx__buf_t *b, const char *key, size_t keylen,
                 const dtx__bval_t *v);
/* The element of array index i. */
void dtx__bw_idx(dtx__buf_t *b, size_t i, const dtx__bval_t *v);

/* Writes doc with v at the dotted path (v NULL: the field removed), as
 * dtx__agg_set_path: objects are created on the way, through an array each
 * object element gets the field, a removal only walks objects. */
void dtx__bw_set_path(dtx__buf_t *b, const uint8_t *doc, uint32_t len,
                      const char *path, const dtx__bval_t *v);

/* ---- expressions (bagg_expr.c) ---------------------------------------- */

typedef struct dtx__bexpr dtx__bexpr_t;

/* Compiles spec (a view into bytes that outlive the expression) with its
 * nodes in arena a.  where names the stage and field, as the json_t
 * engine's.  DTX_EBADQUERY, DTX_ENOMEM. */
int dtx__bexpr_compile(const dtx__bval_t *spec, const char *where,
                       dtx__arena_t *a, dtx__bexpr_t **out);

/* One evaluation: the document, and the arena the values it builds live
 * in (the caller resets it once the values are written out). */
typedef struct dtx__bx {
  dtx__arena_t *a;
  const uint8_t *doc;
  uint32_t len;
} dtx__bx_t;

/* *out: the value (type 0 for missing), a view into the document, the
 * spec or x->a.  DTX_ETYPE / DTX_EOVERFLOW / DTX_ELIMIT as the json_t
 * engine, DTX_ENOMEM. */
int dtx__bexpr_eval(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *out);

/* MongoDB's truthiness: false, null, undefined, missing and zero. */
int dtx__bagg_truthy(const dtx__bval_t *v);

/* The aggregation's name of a type in messages, as the json_t engine's
 * DTX__TN_AGG vocabulary ("int" for int32, "long" for int64 ...). */
const char *dtx__bagg_type_name(const dtx__bval_t *v);

/* The value at a dotted path through objects only (type 0 when none). */
dtx__bval_t dtx__bagg_get_path(const uint8_t *doc, uint32_t len,
                               const char *path);

/* ---- the run ------------------------------------------------------------ */

typedef struct bagg_run bagg_run_t;

/* Adds bytes to what $group and $sort hold: 0, or DTX_ELIMIT naming stage
 * past the run's limit (the json_t engine's detail). */
int dtx__bagg_charge(bagg_run_t *r, size_t bytes, const char *stage);

/* ---- $group (bagg_group.c) ---------------------------------------------- */

typedef struct bgroup_spec bgroup_spec_t;
typedef struct bgroup_state bgroup_state_t;

int dtx__bgroup_compile(const dtx__bval_t *spec, dtx__arena_t *a,
                        bgroup_spec_t **out);
int dtx__bgroup_state_new(bgroup_state_t **out);
void dtx__bgroup_state_free(const bgroup_spec_t *g, bgroup_state_t *s);
/* One document in; x->a holds the evaluation's values (reset by caller). */
int dtx__bgroup_add(const bgroup_spec_t *g, bgroup_state_t *s, bagg_run_t *r,
                    dtx__bx_t *x);
/* The groups out in first-seen order: emit gets each built document
 * (borrowed for the call): 0, 1 to stop, or an error. */
int dtx__bgroup_finish(const bgroup_spec_t *g, bgroup_state_t *s,
                       int (*emit)(void *ctx, const uint8_t *doc,
                                   uint32_t len),
                       void *ctx);

#endif
