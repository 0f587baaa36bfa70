/* filter_int.h -- the compiled form of a filter, shared by filter.c
 * (compiling) and filter_match.c (matching).  Nothing outside src/doc
 * includes it. */
#ifndef DTX_DOC_FILTER_INT_H
#define DTX_DOC_FILTER_INT_H

#include "doc/doc.h"

#include <stdatomic.h>
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

typedef struct node {
  kind_t kind;
  size_t nkids;
  struct node **kids; /* logical operands; PATH/ELEM_*: kids[0] */
  char *path;         /* PATH: validated dotted path (owned) */
  int leaf_mode;      /* PATH: DTX__LEAF_EXPAND or DTX__LEAF_WHOLE */
  json_t *arg;        /* EQ, LT..GTE: deep copy of the operand */
  json_t **vals;      /* IN: deep copies, sorted by dtx__value_cmp */
  size_t nvals;
  int has_null; /* IN: null is listed, so a missing value matches */
  json_int_t size;   /* SIZE; MOD: the divisor */
  json_int_t rem;    /* MOD: the remainder */
  uint64_t types;    /* TYPE: bit per type code (type_bit) */
  dtx__regex_t *re;  /* REGEX */
} node_t;

struct dtx__filter {
  node_t *root;
  _Atomic int failed;   /* a match hit an error; see the file comment */
  int err;              /* that error's code, once failed is set */
  char detail[256];     /* and its detail */
};

/* The bit of BSON type code in a $type set (minKey -1 and maxKey 127 get
 * bits 20 and 21). */
static inline uint64_t type_bit(int code) {
  return code == -1 ? 1ULL << 20 : code == 127 ? 1ULL << 21
                                                : 1ULL << code;
}

#endif
