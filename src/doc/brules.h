/* brules.h -- the stored-document rules on BSON: $jsonSchema (bschema.c),
 * the twin of doc.h's dtx__schema_*, with the same keywords, the same
 * refusals and the same "why" texts wherever JSON can say the same thing
 * (tests/unit/test_schema.c runs every row through both engines).
 *
 * What BSON adds (tests/unit/test_bschema.c):
 *  - bsonType takes every alias of bdoc.h's one table
 *    (dtx__btype_from_alias), and judges an integer by its value, not by
 *    the width it is stored with (doctx's front doors speak JSON, where
 *    an integer has no width; docs/engine.md, stage 2b): an int32 or
 *    int64 is "long" always and "int" too when it fits in 32 bits, as the
 *    json_t engine says of a JSON integer, and a failing one is named
 *    "long" as there (dtx__bval_judged_type; MongoDB instead calls int32
 *    "int" only and int64 "long" only).  A double is never "int" nor
 *    "long", a Decimal128 is "decimal" only; "number" is any of int32,
 *    int64, double, Decimal128; "date", "objectId", "decimal",
 *    "timestamp", "binData", "regex", "minKey" ... are accepted;
 *  - minimum/maximum take any numeric operand and compare exactly across
 *    the four numeric types (dtx__bval_cmp); NaN meets a bound only when
 *    the bound is NaN too and the bound is inclusive (MongoDB's $gte/$lte
 *    semantics, which its $jsonSchema compiles to);
 *  - minLength, maxLength, minItems, maxItems take any integral numeric
 *    operand (Decimal128 included);
 *  - enum and uniqueItems compare by dtx__bval_cmp (1, NumberLong(1),
 *    1.0 and NumberDecimal("1") are the same value);
 *  - the transition rule "immutable" (brules.c) compares exactly, but an
 *    integer by its value too: int32 5 and NumberLong(5) are the same;
 *    5 and 5.0, or 5 and NumberDecimal("5"), are not (as rules.c: 5 and
 *    5.0 differ in JSON).
 *
 * Ownership: the caller owns spec; the compiled schema keeps its own copy
 * of spec's bytes (its operands are views into that copy), so spec may
 * change or be freed after compile. */
#ifndef DTX_DOC_BRULES_H
#define DTX_DOC_BRULES_H

#include "doc/bdoc.h"

#include <stddef.h>
#include <stdint.h>

typedef struct dtx__bschema dtx__bschema_t;

/* Compiles the schema spec (a view of any value, normally the document of
 * a validator's $jsonSchema; its bytes must be checked, dtx__bson_check,
 * or written by libbson).  DTX_EBADQUERY with the json_t engine's detail
 * ("$jsonSchema at <where>: <why>") for an invalid schema, DTX_ENOMEM;
 * *out is NULL on error.  Free with dtx__bschema_free. */
int dtx__bschema_compile(const dtx__bval_t *spec, dtx__bschema_t **out);

/* 1 when the document doc[0..len) (checked bytes) satisfies s, else 0 and
 * (when whylen > 0) the reason in why: "<path> <what> ($jsonSchema
 * <keyword path>)".  Thread-safe on a shared compiled schema; allocates
 * only for uniqueItems and to print a failing reason. */
int dtx__bschema_match(const dtx__bschema_t *s, const uint8_t *doc,
                       uint32_t len, char *why, size_t whylen);

/* The same for any value (the json_t engine's schema judges any value). */
int dtx__bschema_match_val(const dtx__bschema_t *s, const dtx__bval_t *v,
                           char *why, size_t whylen);

/* Frees s and its regexes; NULL is fine. */
void dtx__bschema_free(dtx__bschema_t *s);

/* ---- the depth limit, collection rules and the write check (brules.c) ---- */

/* dtx__depth_check on BSON: 0 when doc[0..len) (checked bytes) nests no
 * deeper than DTX_MAX_DEPTH levels (the document is level 1; every
 * document or array inside adds one), else `code` with the json_t
 * engine's detail "<what> nests deeper than 100 levels (the limit):
 * level 101 is reached at <path>". */
int dtx__bdepth_check(const uint8_t *doc, uint32_t len, int code,
                      const char *what);

/* A collection's rules, compiled from their stored form as a document
 * {"validator": V|null, "delete_guard": G|null, "transition": T|null,
 * "pattern": P} (doc.h's dtx__rules_compile; the same checks and
 * details).  *out is NULL when spec (NULL allowed) holds no rule.
 * DTX_EBADQUERY for an invalid rule, DTX_ENOMEM.  The compiled rules keep
 * no reference to spec.  Immutable once built: threads may share them.
 * (The normalised stored form and dtx__rules_keep_owned stay with the
 * json_t catalog: they judge the catalog's change of rules, not a
 * document.) */
typedef struct dtx__brules dtx__brules_t;
int dtx__brules_compile(const bson_t *spec, dtx__brules_t **out);
void dtx__brules_free(dtx__brules_t *r);

/* dtx__doc_check_write on BSON: before/after are checked bytes (NULL:
 * none), with the same rules, codes and details.  The step running on
 * this thread is doc.h's (dtx__rules_step_enter), shared by both
 * engines. */
int dtx__bdoc_check_write(const dtx__brules_t *r, const char *coll,
                          const uint8_t *before, uint32_t blen,
                          const uint8_t *after, uint32_t alen, int bypass);

#endif
