/* bagg.h -- the aggregation pipeline on BSON (bagg.c stages, bagg_expr.c
 * expressions, bagg_group.c $group): the twin of doc.h's dtx__pipeline_*,
 * with the same stages, operators, accumulators and error details wherever
 * JSON can say the same thing, plus MongoDB's types (docs/engine.md):
 *  - arithmetic promotes int32 -> int64 -> double, and Decimal128 wins
 *    (bdec.h); an int32 overflow becomes an int64 and an int64 overflow a
 *    double, as the manual says for $add (and MongoDB does for $subtract
 *    and $multiply).  The json_t engine refuses an int64 overflow with
 *    DTX_EOVERFLOW instead (it has no second number type to go to);
 *  - dates: $add of one Date and numbers is a Date (ms); $subtract of two
 *    Dates is their difference in ms (int64), of a Date and a number a
 *    Date.  No date operators ($year ...): the json_t engine has none yet;
 *  - $type (BSON only) returns bdoc.h's alias, "missing" for a missing
 *    value;
 *  - $group keys are dtx__bkey_encode's bytes: values equal by
 *    dtx__bval_cmp (1, 1.0, NumberLong(1), NumberDecimal("1.0")) are one
 *    group; $sum/$avg over decimals give a decimal.
 *
 * Memory: the compiled pipeline keeps one copy of the stages' bytes and
 * its nodes in one arena (operands are views into the copy).  A run keeps
 * one arena per stage for the values of one document's evaluation, reset
 * after each document; a document a stage builds is one new buffer. */
#ifndef DTX_DOC_BAGG_H
#define DTX_DOC_BAGG_H

#include "doc/bdoc.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dtx__bpipeline dtx__bpipeline_t;

/* Compiles a pipeline: stages[0..len) is an array document (checked bytes
 * or written by libbson) of one-key stage documents.  DTX_EBADQUERY with
 * the json_t engine's detail, DTX_ENOMEM; *out NULL on error.  The
 * pipeline keeps its own copy of the bytes. */
int dtx__bpipeline_compile(const uint8_t *stages, uint32_t len,
                           dtx__bpipeline_t **out);
void dtx__bpipeline_free(dtx__bpipeline_t *p);

/* As dtx__pipeline_source: the leading $match stages as one filter
 * document (one $match: its own bytes; more: {$and: [...]}; NULL when
 * none), then a $sort, $skip and $limit that follow directly (NULL / 0).
 * Borrowed from p. */
void dtx__bpipeline_source(const dtx__bpipeline_t *p, const uint8_t **filter,
                           uint32_t *flen, const uint8_t **sort,
                           uint32_t *slen, int64_t *skip, int64_t *limit);

typedef struct dtx__bagg_env {
  size_t max_bytes; /* 0: DTX_AGG_MAX_BYTES */
  /* $lookup: appends the documents of coll matching filter to *out (an
   * empty bson_t, bson_init'ed by the caller) as an array document. */
  int (*find)(void *ctx, const char *coll, const bson_t *filter,
              bson_t *out);
  void *ctx;
} dtx__bagg_env_t;

/* Runs the stages after the source over docs[0..n) (views of documents,
 * borrowed: checked bytes), appending the results to *out (bson_init'ed
 * by the caller, empty) as an array document.  Errors as
 * dtx__pipeline_run; on error *out holds a partial array the caller
 * destroys. */
int dtx__bpipeline_run(const dtx__bpipeline_t *p, const dtx__bval_t *docs,
                       size_t n, const dtx__bagg_env_t *env, bson_t *out);

#endif
