/* bfilter.c -- compiling MongoDB filter documents given as BSON (matching
 * is in bfilter_match.c; the form is bfilter_int.h).
 *
 * The twin of filter.c, read that file's comment first: the same tree
 * (document nodes AND, OR, NOR, NOT, PATH; value nodes below a PATH),
 * the same order of checks and the same error details, so that every row
 * of the json_t engine's tables gives the same answer here
 * (tests/common/bfilterdiff.c).  What differs is how operands are held:
 * the filter copies the spec's bytes once into its arena, and every
 * operand, path and pattern is a view into that copy.  Compiling
 * allocates nodes from the arena and nothing per operand (but a regex's
 * PCRE2 code), and the spec may be freed as soon as compile returns.
 *
 * BSON says more than JSON, and the compiler takes it (bfilter.h lists
 * it): regex operands, numeric operands of any of the four types.
 */
#include "doc/bdec.h"
#include "doc/bfilter_int.h"
#include "util/assert.h"
#include "util/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading the spec -------------------------------------------------- */

/* A view's elements (v a document or an array). */
typedef struct elems {
  const uint8_t *doc;
  uint32_t len, off;
} elems_t;

static elems_t elems_of(const dtx__bval_t *v) {
  elems_t it = {NULL, 0, 0};
  it.doc = dtx__bval_doc(v, &it.len);
  return it;
}

static int elems_next(elems_t *it, dtx__belem_t *e) {
  return dtx__belem_next(it->doc, it->len, &it->off, e);
}

static uint32_t elems_count(const dtx__bval_t *v) {
  elems_t it = elems_of(v);
  dtx__belem_t e;
  uint32_t n = 0;
  while (elems_next(&it, &e))
    n++;
  return n;
}

/* The element named key of the document v, or NULL (e untouched then). */
static const dtx__bval_t *elem_get(const dtx__bval_t *v, const char *key,
                                   dtx__belem_t *e) {
  uint32_t len;
  const uint8_t *d = dtx__bval_doc(v, &len);
  return dtx__belem_find(d, len, key, strlen(key), e) ? &e->v : NULL;
}

static int is_doc(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_DOCUMENT;
}
static int is_array(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_ARRAY;
}
static int is_op(const char *key) { return key[0] == '$'; }

/* 1 when v is a document with any '$'-prefixed key (filter.c's
 * has_op_key: an array never is). */
static int has_op_key(const dtx__bval_t *v) {
  if (!is_doc(v))
    return 0;
  elems_t it = elems_of(v);
  dtx__belem_t e;
  while (elems_next(&it, &e))
    if (is_op(e.key))
      return 1;
  return 0;
}

/* A number's value as a double, for messages and the $type codes. */
static double num_double(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_INT32:
    return dtx__bval_int32(v);
  case BSON_TYPE_INT64:
    return (double)dtx__bval_int64(v);
  case BSON_TYPE_DOUBLE:
    return dtx__bval_double(v);
  case BSON_TYPE_DECIMAL128:
    return dtx__dec_to_double(dtx__bval_dec(v));
  default:
    return NAN;
  }
}

/* ---- building nodes ---------------------------------------------------- */

static bnode_t *node_new(dtx__bfilter_t *f, bkind_t kind, size_t cap) {
  if (cap > UINT32_MAX)
    return NULL;
  bnode_t *n = dtx__arena_alloc(&f->arena, sizeof *n + cap * sizeof(bnode_t *));
  if (n) {
    n->kind = kind;
    n->cap = (uint32_t)cap;
  }
  return n;
}

static int oom(void) {
  return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
}

static int node_add(bnode_t *n, bnode_t *kid) {
  if (!kid)
    return oom();
  DTX_ASSERT(n->nkids < n->cap, "bfilter.kids_fit"); /* counted first */
  n->kids[n->nkids++] = kid;
  return 0;
}

static bnode_t *simplify(bnode_t *n) {
  if (n && n->kind == BK_AND && n->nkids == 1)
    return n->kids[0];
  return n;
}

static bnode_t *wrap1(dtx__bfilter_t *f, bkind_t kind, bnode_t *kid) {
  if (!kid)
    return NULL;
  bnode_t *n = node_new(f, kind, 1);
  if (n)
    n->kids[n->nkids++] = kid;
  return n;
}

static bnode_t *leaf_arg(dtx__bfilter_t *f, bkind_t kind,
                         const dtx__bval_t *arg) {
  bnode_t *n = node_new(f, kind, 0);
  if (n)
    n->arg = *arg;
  return n;
}

/* ---- compiling --------------------------------------------------------- */

typedef struct ctx {
  dtx__bfilter_t *f;
  const char *path; /* the field path ("" at top level), in the spec copy */
  int value_level;  /* inside $elemMatch's value form: no path to walk */
  int depth;
} ctx_t;

static int compile_query(dtx__bfilter_t *f, const dtx__bval_t *q, int depth,
                         bnode_t **out);
static int compile_ops(const ctx_t *c, const dtx__bval_t *opdoc,
                       bnode_t **out);

static const char *where(const ctx_t *c) {
  return c->path[0] ? c->path : "top level";
}

/* The same list as filter.c's: valid MongoDB, not implemented. */
static int unsupported(const char *op) {
  static const char *const ops[] = {
      "$text",         "$where",         "$expr",        "$jsonSchema",
      "$geoWithin",    "$geoIntersects", "$near",        "$nearSphere",
      "$bitsAllSet",   "$bitsAllClear",  "$bitsAnySet",  "$bitsAnyClear",
      "$sampleRate",   "$within",        "$box",         "$center",
      "$centerSphere", "$polygon",       "$geometry",    "$maxDistance",
      "$minDistance",  "$uniqueDocs",    "$eqStr",       "$search",
  };
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(op, ops[i]))
      return 1;
  return 0;
}

static int bad_op(const ctx_t *c, const char *op) {
  if (unsupported(op))
    return dtx__err(DTX_EBADQUERY, "unsupported operator %s at %s", op,
                    where(c));
  return dtx__err(DTX_EBADQUERY, "unknown operator %s at %s", op, where(c));
}

static int check_opdoc(const ctx_t *c, const dtx__bval_t *v,
                       const char *opname) {
  elems_t it = elems_of(v);
  dtx__belem_t e;
  while (elems_next(&it, &e)) {
    if (is_op(e.key))
      continue;
    if (opname)
      return dtx__err(DTX_EBADQUERY,
                      "%s needs an operator document at %s, found field %s",
                      opname, where(c), e.key);
    return dtx__err(DTX_EBADQUERY,
                    "cannot mix operators and fields (%s) at %s", e.key,
                    where(c));
  }
  return 0;
}

/* Wraps a value predicate for its level, as filter.c's finish. */
static int finish(const ctx_t *c, bnode_t *pred, int negate, int leaf_mode,
                  bnode_t **out) {
  bnode_t *n = pred;
  if (n && !c->value_level) {
    n = wrap1(c->f, BK_PATH, pred);
    if (n) {
      n->leaf_mode = leaf_mode;
      n->path = c->path;
    }
  }
  if (n && negate)
    n = wrap1(c->f, BK_NOT, n);
  if (!n)
    return oom();
  *out = n;
  return 0;
}

/* Compiles pattern pat[0..patlen) with opts into r, and lists the regex
 * on the filter for dtx__bfilter_free. */
static int regex_build(const ctx_t *c, const char *pat, uint32_t patlen,
                       const char *opts, bre_t *r) {
  brelink_t *l = dtx__arena_alloc(&c->f->arena, sizeof *l);
  if (!l)
    return oom();
  int rc = dtx__regex_compile(pat, patlen, opts, &r->re);
  if (rc)
    return dtx__err_wrap(rc, "at %s", where(c));
  l->re = r->re;
  l->next = c->f->rlist;
  c->f->rlist = l;
  r->pat = pat;
  r->patlen = patlen;
  r->opts = opts;
  return 0;
}

/* A BSON regex value's pattern and flags (both NUL-terminated cstrings
 * inside the payload). */
static void regex_parts(const dtx__bval_t *v, const char **pat,
                        uint32_t *patlen, const char **opts) {
  *pat = (const char *)v->data;
  *patlen = (uint32_t)strlen(*pat);
  *opts = *pat + *patlen + 1;
}

/* A regex node from a BSON regex value: {a: /x/i}, {$in: [/x/]}... */
static int regex_value_node(const ctx_t *c, const dtx__bval_t *v,
                            bnode_t **out) {
  const char *pat, *opts;
  uint32_t patlen;
  bnode_t *n = node_new(c->f, BK_REGEX, 0);
  if (!n)
    return oom();
  regex_parts(v, &pat, &patlen, &opts);
  int rc = regex_build(c, pat, patlen, opts, &n->rx);
  if (rc)
    return rc;
  *out = n;
  return 0;
}

static int cmp_bval(const void *a, const void *b) {
  return dtx__bval_cmp(a, b);
}

/* $in keeps its operands sorted so membership is a binary search; its
 * regexes are kept apart and tried one by one (MongoDB's $in). */
static int compile_in(const ctx_t *c, const char *op, const dtx__bval_t *arg,
                      bnode_t **out) {
  if (!is_array(arg))
    return dtx__err(DTX_EBADQUERY, "%s needs an array at %s", op, where(c));
  uint32_t cnt = elems_count(arg), nre = 0;
  elems_t it = elems_of(arg);
  dtx__belem_t e;
  while (elems_next(&it, &e)) {
    if (has_op_key(&e.v))
      return dtx__err(DTX_EBADQUERY, "cannot nest $ under %s at %s", op,
                      where(c));
    nre += e.v.type == BSON_TYPE_REGEX;
  }
  bnode_t *n = node_new(c->f, BK_IN, 0);
  dtx__arena_t *a = &c->f->arena;
  if (!n ||
      (cnt - nre &&
       !(n->vals = dtx__arena_alloc(a, (cnt - nre) * sizeof *n->vals))) ||
      (nre && !(n->res = dtx__arena_alloc(a, nre * sizeof *n->res))))
    return oom();
  it = elems_of(arg);
  while (elems_next(&it, &e)) {
    if (e.v.type == BSON_TYPE_REGEX) {
      const char *pat, *opts;
      uint32_t patlen;
      regex_parts(&e.v, &pat, &patlen, &opts);
      int rc = regex_build(c, pat, patlen, opts, &n->res[n->nres]);
      if (rc)
        return rc;
      n->nres++;
      continue;
    }
    if (e.v.type == BSON_TYPE_NULL)
      n->has_null = 1;
    n->vals[n->nvals++] = e.v;
  }
  if (n->nvals > 1)
    qsort(n->vals, n->nvals, sizeof *n->vals, cmp_bval);
  *out = n;
  return 0;
}

static int compile_elem_match(const ctx_t *c, const dtx__bval_t *arg,
                              bnode_t **out) {
  if (!is_doc(arg))
    return dtx__err(DTX_EBADQUERY, "$elemMatch needs an object at %s",
                    where(c));
  elems_t it = elems_of(arg);
  dtx__belem_t first;
  int any = elems_next(&it, &first);
  int value_form = any && is_op(first.key) && strcmp(first.key, "$and") &&
                   strcmp(first.key, "$or") && strcmp(first.key, "$nor");
  bnode_t *sub = NULL;
  int rc;
  if (value_form) {
    ctx_t vc = {c->f, c->path, 1, c->depth + 1};
    if ((rc = check_opdoc(&vc, arg, NULL)))
      return rc;
    rc = compile_ops(&vc, arg, &sub);
  } else {
    rc = compile_query(c->f, arg, c->depth + 1, &sub);
    if (rc)
      dtx__err_wrap(rc, "in $elemMatch at %s", where(c));
  }
  if (rc)
    return rc;
  *out = wrap1(c->f, value_form ? BK_ELEM_VAL : BK_ELEM_OBJ, sub);
  return *out ? 0 : oom();
}

static int compile_all(const ctx_t *c, const dtx__bval_t *arg,
                       bnode_t **out) {
  if (!is_array(arg))
    return dtx__err(DTX_EBADQUERY, "$all needs an array at %s", where(c));
  uint32_t cnt = elems_count(arg);
  if (cnt == 0) /* MongoDB: $all: [] matches no document */
    return (*out = node_new(c->f, BK_FALSE, 0)) ? 0 : oom();
  uint32_t nelem = 0;
  dtx__belem_t e, em;
  elems_t it = elems_of(arg);
  while (elems_next(&it, &e)) {
    if (!has_op_key(&e.v))
      continue;
    if (elems_count(&e.v) != 1 || !elem_get(&e.v, "$elemMatch", &em))
      return dtx__err(DTX_EBADQUERY, "no $ expressions in $all at %s",
                      where(c));
    nelem++;
  }
  if (nelem && nelem != cnt)
    return dtx__err(DTX_EBADQUERY, "$all mixes $elemMatch and values at %s",
                    where(c));
  bnode_t *and = node_new(c->f, BK_AND, cnt);
  if (!and)
    return oom();
  it = elems_of(arg);
  while (elems_next(&it, &e)) {
    bnode_t *kid = NULL;
    int rc;
    if (nelem) {
      rc = compile_elem_match(c, elem_get(&e.v, "$elemMatch", &em), &kid);
      if (!rc)
        rc = finish(c, kid, 0, DTX__LEAF_WHOLE, &kid);
    } else if (e.v.type == BSON_TYPE_REGEX) {
      /* {$all: [/x/, /y/]}: each pattern must match some element. */
      rc = regex_value_node(c, &e.v, &kid);
      if (!rc)
        rc = finish(c, kid, 0, DTX__LEAF_EXPAND, &kid);
    } else {
      kid = leaf_arg(c->f, BK_EQ, &e.v);
      rc = finish(c, kid, 0, DTX__LEAF_EXPAND, &kid);
    }
    if (rc || (rc = node_add(and, kid)))
      return rc;
  }
  *out = simplify(and);
  return 0;
}

/* A non-negative integral number as an int64, or -1. */
static int64_t count_operand(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_INT32:
    return dtx__bval_int32(v) >= 0 ? dtx__bval_int32(v) : -1;
  case BSON_TYPE_INT64:
    return dtx__bval_int64(v) >= 0 ? dtx__bval_int64(v) : -1;
  case BSON_TYPE_DOUBLE: {
    double d = dtx__bval_double(v);
    if (d >= 0 && d < 9.2e18 && d == (double)(int64_t)d)
      return (int64_t)d;
    return -1;
  }
  case BSON_TYPE_DECIMAL128: {
    bson_decimal128_t d = dtx__bval_dec(v);
    int64_t i;
    if (dtx__dec_to_i64(d, &i) == 0 && i >= 0 && dtx__dec_cmp_i64(d, i) == 0)
      return i;
    return -1;
  }
  default:
    return -1;
  }
}

static int compile_size(const ctx_t *c, const dtx__bval_t *arg,
                        bnode_t **out) {
  int64_t size = count_operand(arg);
  if (size < 0)
    return dtx__err(DTX_EBADQUERY, "$size needs a non-negative integer at %s",
                    where(c));
  bnode_t *n = node_new(c->f, BK_SIZE, 0);
  if (!n)
    return oom();
  n->size = size;
  return finish(c, n, 0, DTX__LEAF_WHOLE, out);
}

/* One $type entry: an alias or a number of bdoc.h's table. */
static int one_type(const ctx_t *c, const dtx__bval_t *t, uint64_t *mask) {
  if (t->type == BSON_TYPE_UTF8) {
    uint32_t n;
    const char *a = dtx__bval_str(t, &n);
    int code = strlen(a) == n ? dtx__btype_from_alias(a) : -1;
    if (code == 0) { /* "number" */
      *mask |= btype_bit(BSON_TYPE_DOUBLE) | btype_bit(BSON_TYPE_INT32) |
               btype_bit(BSON_TYPE_INT64) | btype_bit(BSON_TYPE_DECIMAL128);
      return 0;
    }
    if (code > 0) {
      *mask |= btype_bit(code);
      return 0;
    }
    return dtx__err(DTX_EBADQUERY, "$type: unknown type alias '%s' at %s", a,
                    where(c));
  }
  if (dtx__bval_is_number(t)) {
    double d = num_double(t);
    int code = -2;
    if (d == floor(d) && d >= -1 && d <= 127)
      code = dtx__btype_from_number((int64_t)d);
    /* -1 is MinKey's number; bdoc.h answers -2 for an unknown one. */
    if (code != -2 && btype_bit(code)) {
      *mask |= btype_bit(code);
      return 0;
    }
    return dtx__err(DTX_EBADQUERY, "$type: invalid type code %g at %s", d,
                    where(c));
  }
  return dtx__err(DTX_EBADQUERY,
                  "$type needs a type alias or number, or an array of them, "
                  "at %s",
                  where(c));
}

static int compile_type(const ctx_t *c, const dtx__bval_t *arg,
                        bnode_t **out) {
  uint64_t mask = 0;
  int rc;
  if (is_array(arg)) {
    elems_t it = elems_of(arg);
    dtx__belem_t e;
    while (elems_next(&it, &e))
      if ((rc = one_type(c, &e.v, &mask)))
        return rc;
  } else if ((rc = one_type(c, arg, &mask))) {
    return rc;
  }
  bnode_t *n = node_new(c->f, BK_TYPE, 0);
  if (!n)
    return oom();
  n->types = mask;
  return finish(c, n, 0, DTX__LEAF_EXPAND, out);
}

/* A $mod operand as an int64: integers as they are, doubles and decimals
 * truncated toward zero (MongoDB 5.1+); NaN, infinities and values past
 * int64 refused, as the manual says. */
static int mod_operand(const ctx_t *c, const dtx__bval_t *v, const char *what,
                       int64_t *out) {
  switch (v->type) {
  case BSON_TYPE_INT32:
    *out = dtx__bval_int32(v);
    return 0;
  case BSON_TYPE_INT64:
    *out = dtx__bval_int64(v);
    return 0;
  case BSON_TYPE_DOUBLE: {
    double d = dtx__bval_double(v);
    if (d > -9223372036854775808.0 && d < 9223372036854775808.0) {
      *out = (int64_t)d;
      return 0;
    }
    break;
  }
  case BSON_TYPE_DECIMAL128:
    if (dtx__dec_to_i64(dtx__bval_dec(v), out) == 0)
      return 0;
    break;
  default:
    return dtx__err(DTX_EBADQUERY, "$mod: %s must be a number at %s", what,
                    where(c));
  }
  return dtx__err(DTX_EBADQUERY,
                  "$mod: %s %g is outside the 64-bit integer range at %s",
                  what, num_double(v), where(c));
}

static int compile_mod(const ctx_t *c, const dtx__bval_t *arg,
                       bnode_t **out) {
  int64_t d, r;
  int rc;
  dtx__belem_t e0, e1;
  if (!is_array(arg) || elems_count(arg) != 2)
    return dtx__err(DTX_EBADQUERY,
                    "$mod needs an array [divisor, remainder] at %s",
                    where(c));
  elems_t it = elems_of(arg);
  elems_next(&it, &e0);
  elems_next(&it, &e1);
  if ((rc = mod_operand(c, &e0.v, "divisor", &d)) ||
      (rc = mod_operand(c, &e1.v, "remainder", &r)))
    return rc;
  if (d == 0)
    return dtx__err(DTX_EBADQUERY, "$mod: divisor cannot be 0 at %s",
                    where(c));
  bnode_t *n = node_new(c->f, BK_MOD, 0);
  if (!n)
    return oom();
  n->size = d;
  n->rem = r;
  return finish(c, n, 0, DTX__LEAF_EXPAND, out);
}

/* {$regex: "pattern" | /pattern/flags, $options: "imsx"}; opts NULL when
 * absent. */
static int compile_regex(const ctx_t *c, const dtx__bval_t *pat,
                         const dtx__bval_t *opts, bnode_t **out) {
  const char *p, *o = "";
  uint32_t plen;
  if (pat->type == BSON_TYPE_REGEX) {
    regex_parts(pat, &p, &plen, &o);
  } else if (pat->type == BSON_TYPE_UTF8) {
    p = dtx__bval_str(pat, &plen);
  } else {
    return dtx__err(DTX_EBADQUERY, "$regex needs a string pattern at %s",
                    where(c));
  }
  if (opts && opts->type != BSON_TYPE_UTF8)
    return dtx__err(DTX_EBADQUERY, "$options needs a string at %s",
                    where(c));
  if (opts) {
    uint32_t olen;
    const char *os = dtx__bval_str(opts, &olen);
    /* MongoDB refuses flags given twice ("options set in both $regex and
     * $options"); flags on one side only are taken. */
    if (o[0] && os[0])
      return dtx__err(DTX_EBADQUERY,
                      "$regex: options set in both the regex and $options "
                      "at %s",
                      where(c));
    if (os[0])
      o = os;
  }
  bnode_t *n = node_new(c->f, BK_REGEX, 0);
  if (!n)
    return oom();
  int rc = regex_build(c, p, plen, o, &n->rx);
  if (rc)
    return rc;
  return finish(c, n, 0, DTX__LEAF_EXPAND, out);
}

static int compile_exists(const ctx_t *c, const dtx__bval_t *arg,
                          bnode_t **out) {
  int want;
  switch (arg->type) {
  case BSON_TYPE_BOOL:
    want = dtx__bval_bool(arg);
    break;
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
  case BSON_TYPE_DOUBLE:
    want = num_double(arg) != 0;
    break;
  case BSON_TYPE_DECIMAL128:
    want = !dtx__dec_is_zero(dtx__bval_dec(arg));
    break;
  default:
    return dtx__err(DTX_EBADQUERY, "$exists needs a boolean at %s", where(c));
  }
  bnode_t *n = node_new(c->f, BK_EXISTS, 0);
  if (!n)
    return oom();
  return finish(c, n, !want, DTX__LEAF_EXPAND, out);
}

static int compile_not(const ctx_t *c, const dtx__bval_t *arg,
                       bnode_t **out) {
  bnode_t *n = NULL;
  int rc;
  if (arg->type == BSON_TYPE_REGEX) { /* {$not: /x/} */
    if ((rc = regex_value_node(c, arg, &n)) ||
        (rc = finish(c, n, 0, DTX__LEAF_EXPAND, &n)))
      return rc;
  } else {
    if (!is_doc(arg) || elems_count(arg) == 0)
      return dtx__err(DTX_EBADQUERY,
                      "$not needs a non-empty operator document at %s",
                      where(c));
    if ((rc = check_opdoc(c, arg, "$not")))
      return rc;
    ctx_t nc = {c->f, c->path, c->value_level, c->depth + 1};
    if ((rc = compile_ops(&nc, arg, &n)))
      return rc;
  }
  return (*out = wrap1(c->f, BK_NOT, n)) ? 0 : oom();
}

static int compile_op(const ctx_t *c, const char *op, const dtx__bval_t *arg,
                      bnode_t **out) {
  static const struct {
    const char *name;
    bkind_t kind;
    int negate;
  } cmps[] = {{"$eq", BK_EQ, 0},   {"$ne", BK_EQ, 1}, {"$lt", BK_LT, 0},
              {"$lte", BK_LTE, 0}, {"$gt", BK_GT, 0}, {"$gte", BK_GTE, 0}};
  bnode_t *n = NULL;
  int rc;
  *out = NULL;
  if (c->depth > BF_MAX_DEPTH)
    return dtx__err(DTX_EBADQUERY, "filter nested deeper than %d at %s",
                    BF_MAX_DEPTH, where(c));
  for (size_t i = 0; i < sizeof cmps / sizeof cmps[0]; i++) {
    if (strcmp(op, cmps[i].name))
      continue;
    /* MongoDB: "Can't have regex as arg to $ne" ({$not: /x/} says it). */
    if (cmps[i].negate && arg->type == BSON_TYPE_REGEX)
      return dtx__err(DTX_EBADQUERY, "$ne cannot take a regex at %s",
                      where(c));
    n = leaf_arg(c->f, cmps[i].kind, arg);
    return finish(c, n, cmps[i].negate, DTX__LEAF_EXPAND, out);
  }
  if (!strcmp(op, "$in") || !strcmp(op, "$nin")) {
    if ((rc = compile_in(c, op, arg, &n)))
      return rc;
    return finish(c, n, op[1] == 'n', DTX__LEAF_EXPAND, out);
  }
  if (!strcmp(op, "$exists"))
    return compile_exists(c, arg, out);
  if (!strcmp(op, "$size"))
    return compile_size(c, arg, out);
  if (!strcmp(op, "$elemMatch")) {
    if ((rc = compile_elem_match(c, arg, &n)))
      return rc;
    return finish(c, n, 0, DTX__LEAF_WHOLE, out);
  }
  if (!strcmp(op, "$all"))
    return compile_all(c, arg, out);
  if (!strcmp(op, "$type"))
    return compile_type(c, arg, out);
  if (!strcmp(op, "$mod"))
    return compile_mod(c, arg, out);
  if (!strcmp(op, "$not"))
    return compile_not(c, arg, out);
  return bad_op(c, op);
}

static int compile_ops(const ctx_t *c, const dtx__bval_t *opdoc,
                       bnode_t **out) {
  bnode_t *and = node_new(c->f, BK_AND, elems_count(opdoc));
  dtx__belem_t e, x;
  if (!and)
    return oom();
  elems_t it = elems_of(opdoc);
  while (elems_next(&it, &e)) {
    bnode_t *kid;
    int rc;
    if (!strcmp(e.key, "$options")) {
      if (elem_get(opdoc, "$regex", &x))
        continue; /* read together with its $regex */
      return dtx__err(DTX_EBADQUERY, "$options needs a $regex at %s",
                      where(c));
    }
    if (c->depth > BF_MAX_DEPTH)
      rc = dtx__err(DTX_EBADQUERY, "filter nested deeper than %d at %s",
                    BF_MAX_DEPTH, where(c));
    else if (!strcmp(e.key, "$regex"))
      rc = compile_regex(c, &e.v, elem_get(opdoc, "$options", &x), &kid);
    else
      rc = compile_op(c, e.key, &e.v, &kid);
    if (rc || (rc = node_add(and, kid)))
      return rc;
  }
  *out = simplify(and);
  return 0;
}

static int compile_field(dtx__bfilter_t *f, const char *path,
                         const dtx__bval_t *v, int depth, bnode_t **out) {
  int rc = dtx__path_check(path, DTX_EBADQUERY);
  if (rc)
    return rc;
  ctx_t c = {f, path, 0, depth}; /* the key lives in the spec copy */
  if (has_op_key(v)) {
    if ((rc = check_opdoc(&c, v, NULL)))
      return rc;
    return compile_ops(&c, v, out);
  }
  bnode_t *n;
  if (v->type == BSON_TYPE_REGEX) { /* {a: /x/}: a match, not equality */
    if ((rc = regex_value_node(&c, v, &n)))
      return rc;
  } else {
    n = leaf_arg(f, BK_EQ, v);
  }
  return finish(&c, n, 0, DTX__LEAF_EXPAND, out);
}

static int compile_logical(dtx__bfilter_t *f, const char *op,
                           const dtx__bval_t *arg, int depth, bnode_t **out) {
  bkind_t kind = !strcmp(op, "$and") ? BK_AND
                 : !strcmp(op, "$or") ? BK_OR
                                      : BK_NOR;
  uint32_t cnt = is_array(arg) ? elems_count(arg) : 0;
  if (cnt == 0)
    return dtx__err(DTX_EBADQUERY, "%s needs a non-empty array", op);
  bnode_t *n = node_new(f, kind, cnt);
  if (!n)
    return oom();
  elems_t it = elems_of(arg);
  dtx__belem_t e;
  for (size_t i = 0; elems_next(&it, &e); i++) {
    bnode_t *kid;
    int rc;
    if (!is_doc(&e.v))
      return dtx__err(DTX_EBADQUERY, "%s entries must be objects (entry %zu)",
                      op, i);
    if ((rc = compile_query(f, &e.v, depth + 1, &kid)) ||
        (rc = node_add(n, kid)))
      return rc;
  }
  *out = kind == BK_AND ? simplify(n) : n;
  return 0;
}

static int compile_query(dtx__bfilter_t *f, const dtx__bval_t *q, int depth,
                         bnode_t **out) {
  *out = NULL;
  if (!is_doc(q))
    return dtx__err(DTX_EBADQUERY, "filter must be an object");
  if (depth > BF_MAX_DEPTH)
    return dtx__err(DTX_EBADQUERY, "filter nested deeper than %d",
                    BF_MAX_DEPTH);
  bnode_t *and = node_new(f, BK_AND, elems_count(q));
  if (!and)
    return oom();
  elems_t it = elems_of(q);
  dtx__belem_t e;
  while (elems_next(&it, &e)) {
    bnode_t *kid = NULL;
    int rc;
    if (!is_op(e.key)) {
      rc = compile_field(f, e.key, &e.v, depth, &kid);
    } else if (!strcmp(e.key, "$comment")) {
      continue;
    } else if (!strcmp(e.key, "$and") || !strcmp(e.key, "$or") ||
               !strcmp(e.key, "$nor")) {
      rc = compile_logical(f, e.key, &e.v, depth, &kid);
    } else {
      ctx_t top = {f, "", 0, depth};
      rc = bad_op(&top, e.key);
    }
    if (rc || (rc = node_add(and, kid)))
      return rc;
  }
  if (and->nkids == 0) {
    and->kind = BK_TRUE;
    *out = and;
    return 0;
  }
  *out = simplify(and);
  return 0;
}

int dtx__bfilter_compile(const bson_t *spec, dtx__bfilter_t **out) {
  *out = NULL;
  dtx__bfilter_t *f = malloc(BFILTER_BYTES);
  if (!f)
    return oom();
  f->root = NULL;
  atomic_init(&f->failed, 0);
  f->err = 0;
  f->detail[0] = '\0';
  f->rlist = NULL;
  f->spec = NULL;
  f->speclen = 0;
  dtx__arena_init(&f->arena, f->first,
                  BFILTER_BYTES - offsetof(dtx__bfilter_t, first));
  int rc;
  if (!spec) {
    rc = (f->root = node_new(f, BK_TRUE, 0)) ? 0 : oom();
  } else {
    /* The matcher reads the spec with the trusting reader: check it once
     * (a bson_t may come from outside bytes), then keep a copy that
     * operands point into. */
    const uint8_t *data = bson_get_data(spec);
    rc = dtx__bson_check(data, spec->len, DTX_EBADQUERY, "filter");
    uint8_t *copy = rc ? NULL : dtx__arena_alloc(&f->arena, spec->len);
    if (!rc && !copy)
      rc = oom();
    if (!rc) {
      memcpy(copy, data, spec->len);
      f->spec = copy;
      f->speclen = spec->len;
      dtx__bval_t top = dtx__bval_of_doc(copy, spec->len);
      rc = compile_query(f, &top, 0, &f->root);
    }
  }
  if (rc) {
    dtx__bfilter_free(f);
    return rc;
  }
  *out = f;
  return 0;
}

void dtx__bfilter_free(dtx__bfilter_t *f) {
  if (!f)
    return;
  for (brelink_t *l = f->rlist; l; l = l->next)
    dtx__regex_free(l->re);
  dtx__arena_free(&f->arena);
  free(f);
}
