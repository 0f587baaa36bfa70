/* bfilter_int.h -- the compiled form of a BSON filter, shared by
 * bfilter.c (compiling) and bfilter_match.c (matching).  The twin of
 * filter_int.h: the same two-level tree, with operands held as views
 * (dtx__bval_t) into the filter's own copy of the spec's bytes instead of
 * json_t.  Nothing outside src/doc includes it. */
#ifndef DTX_DOC_BFILTER_INT_H
#define DTX_DOC_BFILTER_INT_H

#include "doc/bdoc.h"
#include "doc/bfilter.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* As filter_int.h: MongoDB refuses filters nested deeper than 100
 * levels, which also bounds the recursion of compile and match. */
#define BF_MAX_DEPTH 100

typedef enum bkind {
  BK_TRUE,
  BK_FALSE,
  BK_AND,
  BK_OR,
  BK_NOR,
  BK_NOT,
  BK_PATH,
  BK_EQ,
  BK_LT,
  BK_LTE,
  BK_GT,
  BK_GTE,
  BK_IN,
  BK_EXISTS,
  BK_SIZE,
  BK_ELEM_OBJ, /* some element, an object or array, matches a sub-filter */
  BK_ELEM_VAL, /* some element satisfies all value predicates */
  BK_TYPE,     /* the value's BSON type is in a set */
  BK_MOD,      /* a number whose truncation % divisor == remainder */
  BK_REGEX,    /* a string the pattern matches, or an equal regex value */
} bkind_t;

/* A regex operand: the compiled pattern, and its text, because a stored
 * BSON regex value matches it when pattern and flags are the same
 * (MongoDB's RegexMatchExpression).  pat is a view into the spec copy
 * (patlen bytes, may hold no NUL to equal a stored regex); opts is
 * NUL-terminated (a view, or a literal ""). */
typedef struct bre {
  dtx__regex_t *re;
  const char *pat;
  uint32_t patlen;
  const char *opts;
} bre_t;

/* A node lives in its filter's arena with its kids right after it.
 * Regexes are the only things held outside the arena; they are listed
 * on the filter (rlist) and freed with it, so a failed compile needs no
 * walk of a half-built tree. */
typedef struct bnode {
  bkind_t kind;
  int leaf_mode;       /* PATH: DTX__LEAF_EXPAND or DTX__LEAF_WHOLE */
  uint32_t nkids, cap; /* kids in use, and room for (fixed at creation) */
  union {
    const char *path; /* PATH: the key's bytes in the spec copy */
    dtx__bval_t arg;  /* EQ, LT..GTE: a view into the spec copy */
    struct {          /* IN */
      dtx__bval_t *vals; /* sorted by dtx__bval_cmp */
      bre_t *res;        /* the regexes listed, matched one by one */
      uint32_t nvals, nres;
      int has_null; /* null is listed, so a missing value matches */
    };
    struct {
      int64_t size; /* SIZE; MOD: the divisor */
      int64_t rem;  /* MOD: the remainder */
    };
    uint64_t types; /* TYPE: bit per type code (btype_bit) */
    bre_t rx;       /* REGEX */
  };
  struct bnode *kids[]; /* logical operands; PATH/ELEM_*: kids[0] */
} bnode_t;

/* One compiled regex, linked for dtx__bfilter_free (in the arena). */
typedef struct brelink {
  dtx__regex_t *re;
  struct brelink *next;
} brelink_t;

/* As FILTER_BYTES in filter_int.h: the filter and its first arena chunk
 * are one allocation under 1 KiB.  A spec copy larger than what is left
 * takes a chunk of its own. */
#define BFILTER_BYTES 992

struct dtx__bfilter {
  bnode_t *root;
  _Atomic int failed; /* a match hit an error; see filter.c's comment */
  int err;            /* that error's code, once failed is set */
  char detail[256];   /* and its detail */
  brelink_t *rlist;   /* every regex compiled, for free */
  const uint8_t *spec; /* the copy of the spec's bytes operands point in */
  uint32_t speclen;
  dtx__arena_t arena; /* nodes, kids, sets, spec copy; first chunk first[] */
  char first[];       /* 8-aligned: the members above are */
};

/* The bit of a BSON type in a $type set: codes 1..19 as they are, MinKey
 * bit 20 and MaxKey bit 21 (as filter_int.h's type_bit). */
static inline uint64_t btype_bit(int code) {
  if (code == -1 || code == BSON_TYPE_MINKEY)
    return 1ULL << 20;
  if (code == BSON_TYPE_MAXKEY)
    return 1ULL << 21;
  return code > 0 && code < 20 ? 1ULL << code : 0;
}

#endif
