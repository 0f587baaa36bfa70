/* bupdate_int.h -- internals shared by the BSON update applier's files:
 *   bupdate.c        compiling an update spec (BSON) into operations
 *   bupdate_apply.c  the one-pass writer and the apply driver
 *   bupdate_ops.c    what each operator writes at one slot
 *   bupsert.c        the upsert seed and document
 * The json_t engine's path helpers (update_int.h) are shared: the path
 * rules, the operation order and the conflict check live once. */
#ifndef DTX_DOC_BUPDATE_INT_H
#define DTX_DOC_BUPDATE_INT_H

#include "doc/bupdate.h"
#include "doc/update_int.h"
#include "util/buf.h"

#include <stddef.h>
#include <stdint.h>

/* One operator applied to one path.  Operands are views into the
 * update's copy of the spec bytes (u->spec); nothing here is a json_t. */
typedef struct bop {
  enum op_kind kind;
  const char *opname; /* static string */
  upath_t p;          /* the path; for $rename the source */
  upath_t to;         /* $rename: the destination */
  int positional;
  dtx__bval_t arg; /* the operand; $push/$addToSet: see single */
  int single;      /* $push/$addToSet: arg is the one value, not $each */
  enum pull_mode pull_mode;
  dtx__bfilter_t *cond; /* $pull by condition (PULL_WRAPPED: on {v: e}) */
  int has_position, has_slice;
  int64_t position, slice;
  int sort;     /* 0 none, 1 by value, 2 by the fields of sortspec */
  int sort_dir; /* by value: 1 or -1 */
  dtx__bval_t sortspec;
  int timestamp; /* $currentDate {$type: "timestamp"} */
  int vdepth;    /* how deep the values it writes nest (0: scalars) */
} bop_t;

struct dtx__bupdate {
  int replacement;
  uint8_t *spec; /* the copy of the spec's bytes, in the arena */
  uint32_t speclen;
  dtx__bval_t repl; /* replacement: the document */
  size_t nops;
  bop_t *ops; /* sorted by path order; in the arena */
  int positional, uses_dollar;
  size_t naf;
  struct bafilter *af;          /* arrayFilters, in the arena */
  const dtx__bfilter_t *filter; /* bound query filter (borrowed) or NULL */
  dtx__arena_t arena;
  char first[]; /* the arena's first chunk */
};

/* One arrayFilters entry: its identifier (in the arena) and its filter,
 * run on {identifier: element}. */
typedef struct bafilter {
  char *id;
  dtx__bfilter_t *f;
} bafilter_t;

#define BUPDATE_BYTES 992

/* What a writer target does at its slot. */
enum { T_OP, T_RSRC, T_RDST };

/* One slot the writer changes: an operation at a concrete path.  ord is
 * its place in the order operations apply (the json_t engine's), so that
 * of several failing operations the first in that order is reported. */
typedef struct btgt {
  const bop_t *op;
  char *const *segs;
  size_t nsegs;
  const char *path;
  int role;
  size_t ord;
  dtx__bval_t val; /* T_RDST: the value moved */
} btgt_t;

/* The output buffer: the bytes of a bson_t of our own (bson_new, grown
 * with bson_reserve_buffer), so that the document written is handed out
 * as that bson_t without a copy.  Running out of memory, or passing
 * twice DTX__DOC_MAX (a result that can only be refused; this bounds what
 * a hostile update can make us allocate), is sticky: later writes are
 * dropped and oom (1) or big (1) says so. */
typedef struct dtx__bwb {
  bson_t *doc;
  uint8_t *p;
  size_t n, cap;
  int oom, big;
} dtx__bwb_t;

/* Starts b with room for hint bytes; 0, or -1 when out of memory. */
int dtx__bwb_init(dtx__bwb_t *b, size_t hint);
void dtx__bwb_put(dtx__bwb_t *b, const void *s, size_t n);
/* The bson_t holding the n bytes written (one document), b emptied; NULL
 * when out of memory. */
bson_t *dtx__bwb_finish(dtx__bwb_t *b);
void dtx__bwb_drop(dtx__bwb_t *b);

/* The writer's state for one apply. */
typedef struct bwctx {
  const dtx__bupdate_t *u;
  int is_insert;
  int64_t now_ms;
  dtx__bwb_t b;
  dtx__buf_t scratch; /* {name: element} documents for the matchers */
  int err;            /* the first error in operation order, or 0 */
  size_t err_ord;
  char err_detail[512];
} bwctx_t;

/* ---- raw writing (bupdate_apply.c) --------------------------------------- */

/* Reserves a document's length word; returns where it is. */
size_t dtx__bw_open(dtx__bwb_t *b);
/* Writes the trailing NUL and patches the length of the document at at. */
void dtx__bw_close(dtx__bwb_t *b, size_t at);
/* An element's type byte and name. */
void dtx__bw_key(dtx__bwb_t *b, bson_type_t t, const char *key, size_t klen);
/* A whole element: name and v's payload. */
void dtx__bw_elem(dtx__bwb_t *b, const char *key, size_t klen,
                  const dtx__bval_t *v);
void dtx__bw_i32(dtx__bwb_t *b, const char *key, size_t klen, int32_t v);
void dtx__bw_i64(dtx__bwb_t *b, const char *key, size_t klen, int64_t v);
void dtx__bw_double(dtx__bwb_t *b, const char *key, size_t klen, double v);
void dtx__bw_null(dtx__bwb_t *b, const char *key, size_t klen);

/* Records rc (from dtx__err) for target t: kept when it is the first in
 * operation order so far. */
void dtx__bw_fail(bwctx_t *w, size_t ord, int rc);

/* The JSON vocabulary's name of a BSON type ("integer", "real",
 * "boolean", "object", ...), as the json_t engine names them, so that the
 * details agree; BSON's own alias for the types JSON lacks. */
const char *dtx__bupd_tname(bson_type_t t);

/* How deep v nests: 0 for a scalar, 1 + its deepest child for a document
 * or array. */
int dtx__bupd_vdepth(const dtx__bval_t *v);

/* 1 when {key: v} matches f, 0 when not; a matcher's error (a $regex past
 * its limits) comes back through *err.  The document is built in
 * scratch, reused from element to element. */
int dtx__bupd_match_wrapped(dtx__buf_t *scratch, const dtx__bfilter_t *f,
                            const char *key, const dtx__bval_t *v, int *err);

/* ---- operators (bupdate_ops.c) ------------------------------------------- */

/* Writes the element key[0..klen) that target t leaves at its slot, given
 * the current value cur (NULL: missing) -- or nothing, for $unset in an
 * object or the source of a $rename.  in_array: the slot is an array
 * element.  level is the nesting level of the container written (the top
 * document is 1), for the depth limit.  Returns 0 or an error. */
int dtx__bupd_put(bwctx_t *w, const btgt_t *t, const char *key, size_t klen,
                  const dtx__bval_t *cur, int in_array, int level);

/* 1 when t may create its slot (and the containers on its way). */
int dtx__bupd_creates(const btgt_t *t);

/* Compile-time parts of $push/$addToSet/$bit/$currentDate (bupdate_ops.c). */
int dtx__bupd_compile_push(bop_t *op, const dtx__bval_t *v);

#endif
