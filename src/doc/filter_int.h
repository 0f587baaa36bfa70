/* filter_int.h -- the compiled form of a filter, shared by filter.c
 * (compiling) and filter_match.c (matching).  Nothing outside src/doc
 * includes it. */
#ifndef DTX_DOC_FILTER_INT_H
#define DTX_DOC_FILTER_INT_H

#include "doc/doc.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* MongoDB refuses filters nested deeper than 100 levels; so do we, which
 * also bounds the recursion of compile and match. */
#define MAX_DEPTH 100

typedef enum kind {
  K_TRUE,
  K_FALSE,
  K_AND,
  K_OR,
  K_NOR,
  K_NOT,
  K_PATH,
  K_EQ,
  K_LT,
  K_LTE,
  K_GT,
  K_GTE,
  K_IN,
  K_EXISTS,
  K_SIZE,
  K_ELEM_OBJ, /* some element, an object or array, matches a sub-filter */
  K_ELEM_VAL, /* some element satisfies all value predicates */
  K_TYPE,     /* the value's BSON type is in a set */
  K_MOD,      /* a number whose truncation % divisor == remainder */
  K_REGEX,    /* a string the PCRE2 pattern matches */
} kind_t;

/* A node lives in its filter's arena (doc.h) with its kids right after
 * it; only the jansson values and the regex it holds are released one by
 * one (node_release in filter.c).  Each kind reads only its own member of
 * the union, which keeps a node at 40 bytes: a dozen nodes, a transfer
 * step's filter, fit the filter's first chunk. */
typedef struct node {
  kind_t kind;
  int leaf_mode;         /* PATH: DTX__LEAF_EXPAND or DTX__LEAF_WHOLE */
  uint32_t nkids, cap;   /* kids in use, and room for (fixed at creation) */
  union {
    const char *path; /* PATH: validated dotted path, in the arena */
    json_t *arg;      /* EQ, LT..GTE: the operand (operand() in filter.c) */
    struct {          /* IN */
      json_t **vals;  /* sorted by dtx__value_cmp */
      size_t nvals;
      int has_null; /* null is listed, so a missing value matches */
    };
    struct {
      json_int_t size; /* SIZE; MOD: the divisor */
      json_int_t rem;  /* MOD: the remainder */
    };
    uint64_t types;   /* TYPE: bit per type code (type_bit) */
    dtx__regex_t *re; /* REGEX */
  };
  struct node *kids[]; /* logical operands; PATH/ELEM_*: kids[0] */
} node_t;

/* A filter and the first chunk of its arena are one allocation of this
 * many bytes: under 1 KiB, which glibc serves from its per-thread cache
 * and small bins (a larger request may consolidate the whole heap first,
 * which showed in profiles of batched transfers), and room for a
 * transfer step's filter, so compiling one costs a single malloc besides
 * its operand copies and regexes. */
#define FILTER_BYTES 992

struct dtx__filter {
  node_t *root;
  _Atomic int failed;   /* a match hit an error; see the file comment */
  int err;              /* that error's code, once failed is set */
  char detail[256];     /* and its detail */
  unsigned flags;       /* DTX__COMPILE_* it was compiled with */
  dtx__arena_t arena;   /* nodes, kids, paths; first chunk: first[] */
  char first[]; /* 8-aligned: the members above are */
};

/* The bit of BSON type code in a $type set (minKey -1 and maxKey 127 get
 * bits 20 and 21). */
static inline uint64_t type_bit(int code) {
  return code == -1 ? 1ULL << 20 : code == 127 ? 1ULL << 21
                                                : 1ULL << code;
}

#endif
