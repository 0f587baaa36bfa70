/* update_int.h -- internals shared by the update engine's files:
 *   update.c        compiling an update spec, checking its paths, and the
 *                   apply driver (order, positional expansion, _id check)
 *   update_ops.c    what each operator does to one concrete path
 *   update_array.c  positional paths ($, $[], $[id] with arrayFilters) and
 *                   the $push modifiers ($each $position $sort $slice)
 * Nothing outside src/doc includes it. */
#ifndef DTX_DOC_UPDATE_INT_H
#define DTX_DOC_UPDATE_INT_H

#include "doc/doc.h"

#include <stddef.h>

enum op_kind {
  OP_SET,
  OP_SETONINSERT,
  OP_UNSET,
  OP_INC,
  OP_MUL,
  OP_MIN,
  OP_MAX,
  OP_PUSH,
  OP_ADDTOSET,
  OP_PULL,
  OP_PULLALL,
  OP_POP,
  OP_RENAME,
  OP_BIT,
  OP_CURDATE
};

enum pull_mode {
  PULL_EQ,      /* remove elements equal to the value */
  PULL_WRAPPED, /* {$gte:6}: the condition applies to the element itself */
  PULL_QUERY    /* {score:{$lt:5}}: a query run on object elements */
};

/* A dotted path split into segments: one block holding segs, then the
 * path, then buf (the path with its dots turned into NULs), which segs
 * point into.  A compiled update's paths live in its arena; others own
 * their block (dtx__upd_path_split, dtx__upd_path_free). */
typedef struct upath {
  char *path;
  char *buf;
  char **segs; /* the start of the block */
  size_t nsegs;
} upath_t;

/* One operator applied to one path.  Every member is fixed at compile
 * time; apply never writes to it (compiled updates are shared by threads).
 * For a positional path, apply makes a shallow copy whose p is concrete. */
typedef struct upd_op {
  enum op_kind kind;
  const char *opname; /* static string */
  upath_t p;          /* the path; for $rename the source */
  upath_t to;         /* $rename: the destination */
  int positional;     /* p has a $, $[] or $[id] segment */
  /* The argument, a deep copy or a counted reference (dtx__upd_operand).
   * $push/$addToSet hold the array of values to add (a single value is
   * wrapped), $pull the value or the condition, others the operand. */
  json_t *arg;
  dtx__filter_t *cond; /* $pull with PULL_WRAPPED or PULL_QUERY */
  enum pull_mode pull_mode;
  /* $push modifiers */
  int has_position, has_slice;
  json_int_t position, slice;
  json_t *sort;  /* NULL, an integer 1/-1, or a checked sort spec */
  int timestamp; /* $currentDate {$type: "timestamp"} */
} upd_op_t;

/* One arrayFilters entry: the identifier (in the arena) and its filter,
 * which is run on {identifier: element}. */
typedef struct afilter {
  char *id;
  dtx__filter_t *f;
} afilter_t;

/* An update and the first chunk of its arena (ops, their paths, the
 * arrayFilters) are one allocation of this many bytes, under 1 KiB for
 * the reason filter_int.h gives at FILTER_BYTES. */
#define UPDATE_BYTES 992

struct dtx__update {
  int replacement;
  json_t *repl; /* replacement document, owned */
  size_t nops;
  upd_op_t *ops;      /* sorted by path order; in the arena */
  int positional;     /* some op has a positional path */
  int uses_dollar;    /* some op has a "$" segment */
  size_t naf;
  afilter_t *af;      /* arrayFilters (the array in the arena) */
  const dtx__filter_t *filter; /* bound query filter (borrowed) or NULL */
  unsigned flags;     /* DTX__COMPILE_* it was compiled with */
  dtx__arena_t arena;
  char first[]; /* the arena's first chunk; 8-aligned as the members are */
};

/* u's hold on a value of its spec: a deep copy, or with
 * DTX__COMPILE_BORROW a counted reference.  NULL when out of memory. */
json_t *dtx__upd_operand(const dtx__update_t *u, const json_t *v);


/* 1 when seg is all digits; *idx gets its value (SIZE_MAX if huge). */
int dtx__upd_seg_index(const char *seg, size_t *idx);

/* Order of segments as MongoDB 5.0 applies them: numbers numerically. */
int dtx__upd_seg_cmp(const char *a, const char *b);

/* Splits path into p, one block from malloc, or from arena when it is not
 * NULL (then never dtx__upd_path_free it). */
int dtx__upd_path_split_in(dtx__arena_t *arena, upath_t *p, const char *path);
/* dtx__upd_path_split_in without an arena. */
int dtx__upd_path_split(upath_t *p, const char *path);
void dtx__upd_path_free(upath_t *p);

/* Shared with the BSON applier (bupdate.c), so the path rules live once:
 * dtx__upd_check_path checks an update path for opname (positional
 * segments allowed when positional); segs_cmp orders paths as operations
 * apply, segs_prefix says a is a prefix of b (segment-wise). */
int dtx__upd_check_path(const char *opname, const char *path, int positional);
int dtx__upd_segs_cmp(char *const *a, size_t na, char *const *b, size_t nb);
int dtx__upd_segs_prefix(char *const *a, size_t na, char *const *b,
                         size_t nb);

/* One entry of the conflict check: a path some operation writes. */
typedef struct wpath {
  char *const *segs;
  size_t nsegs;
  const char *path, *opname;
} wpath_t;

/* Sorts w and fails (DTX_EBADUPDATE) when one path is a prefix of
 * another; concrete picks the wording for expanded positional paths. */
int dtx__upd_check_conflicts(wpath_t *w, size_t n, int concrete);

/* ---- operators (update_ops.c) ------------------------------------------- */

/* Applies op (with a concrete path) to doc in place.  now_ms feeds
 * $currentDate.  Errors leave doc partly changed; the caller drops it. */
int dtx__upd_apply_op(const upd_op_t *op, json_t *doc, int is_insert,
                      int64_t now_ms);

/* ---- arrays (update_array.c) --------------------------------------------- */

/* Kind of a path segment in an update. */
enum { SEG_PLAIN, SEG_DOLLAR, SEG_ALL, SEG_FILTERED };

/* The kind of seg; for SEG_FILTERED *id and *idlen give the identifier. */
int dtx__upd_seg_kind(const char *seg, const char **id, size_t *idlen);

/* Checks an arrayFilters identifier: a lowercase letter, then letters and
 * digits. */
int dtx__upd_ident_ok(const char *id, size_t n);

/* Compiles the arrayFilters (an array of filter documents, or NULL) into
 * u->af, and checks that every $[id] of u has a filter and every filter is
 * used.  DTX_EBADUPDATE naming the identifier otherwise. */
int dtx__upd_array_filters(dtx__update_t *u, const json_t *afs);

/* $push/$addToSet: parses {$each: [...], $position, $sort, $slice} or a
 * plain value into op. */
int dtx__upd_compile_push(const dtx__update_t *u, upd_op_t *op,
                          const json_t *v);

/* $push: inserts, sorts and slices per op's modifiers; arr is the array at
 * the target (already created when missing). */
int dtx__upd_push(const upd_op_t *op, json_t *arr);

/* A concrete application: op with path p resolved.  p is owned. */
typedef struct target {
  const upd_op_t *op;
  upath_t p;
} target_t;

/* Expands op's positional path against doc (the document before the
 * update) into concrete targets appended to *ts (grown with realloc).  pos
 * is the query's matched array position for "$" (SIZE_MAX: none). */
int dtx__upd_expand(const dtx__update_t *u, const upd_op_t *op,
                    const json_t *doc, size_t pos, target_t **ts, size_t *n,
                    size_t *cap);

#endif
