/* bdiff.h -- the differential runner's helpers: the same input through
 * the json_t engine (doc.h) and the BSON engine (bdoc.h), and the same
 * answer from both (common brief of session 32, docs/engine.md).
 *
 * The bridge (dtx__bson_from_json / dtx__bson_to_json) carries inputs
 * over and results back, so a row of any json_t table can be rerun on
 * BSON and compared strictly: same types (an integer is not a real), same
 * key order, same values.  Every helper here is for tests: on a failure
 * of its own (out of memory, a row the bridge refuses) it says so on
 * stderr and returns the failing value, it never aborts. */
#ifndef DTX_BDIFF_H
#define DTX_BDIFF_H

#include "doc/bdoc.h"

#include <stddef.h>
#include <stdint.h>

/* Parses json_text (dtx__json_parse: an object or an array) and converts it
 * through the bridge into *out, which this initialises (bson_init) in
 * every case: the caller bson_destroy()s it, even on error.  0, or the
 * parser's or the bridge's DTX_E* code. */
int bdiff_bson(const char *json_text, bson_t *out);

/* 1 when a and b are the same JSON value, strictly: same type (integer
 * vs real differ; NaN-free reals compare by ==), same key order, same
 * values all the way down.  NULL equals only NULL. */
int bdiff_json_same(const json_t *a, const json_t *b);

/* 1 when the json_t result a equals the BSON document doc[0..len) seen
 * through the bridge (as an array document when a is an array). */
int bdiff_same(const json_t *a, const uint8_t *doc, uint32_t len);

/* The same for one value: a NULL json_t and a NULL or missing (type 0)
 * view are both "missing", and equal. */
int bdiff_same_val(const json_t *a, const dtx__bval_t *v);

/* dtx__bval_cmp of a and b carried over the bridge (NULL: missing), its
 * sign in *out: 0, or the bridge's DTX_E* code. */
int bdiff_cmp(const json_t *a, const json_t *b, int *out);

/* dtx__bval_bracket of v's type once over the bridge (NULL: missing). */
int bdiff_bracket(const json_t *v);

/* Compact JSON text of v through the bridge (for failure messages);
 * malloc'd, the caller frees; "(missing)" copies for NULL/type 0. */
char *bdiff_show(const dtx__bval_t *v);

/* Runs path over doc in leaf_mode through dtx__path_walk_pos and
 * dtx__bpath_walk and compares the two walks: the sequence of values
 * (through the bridge), empty_leaf and *pos at each visit, the return
 * value, and also a walk stopped by the visitor at each visit in turn.
 * 1 when they agree; otherwise 0 with the first difference written to
 * why[0..whylen). */
int bdiff_walk(const json_t *doc, const char *path, int leaf_mode,
               char *why, size_t whylen);

/* dtx__path_get against dtx__bpath_get for doc and path: 1 when they
 * agree, else 0 with why; 2 (skipped) when doc is an array, which
 * dtx__path_get never enters but the bridge turns into a document. */
int bdiff_get(const json_t *doc, const char *path, char *why, size_t whylen);

/* Every field path a filter spec names (its keys that do not start with
 * '$', at the top and inside $and/$or/$nor; an $elemMatch operand's paths
 * are relative to array elements and are not followed), run over doc
 * through bdiff_walk in the three leaf modes and through bdiff_get.
 * The spec and the document also make the bridge's round trip (JSON ->
 * BSON -> JSON, the identity).  Returns the number of differences (each
 * printed on stderr with `name`) and adds the walks run to *walks when
 * walks is not NULL. */
int bdiff_walk_spec(const char *name, const json_t *spec, const json_t *doc,
                    size_t *walks);

#endif
