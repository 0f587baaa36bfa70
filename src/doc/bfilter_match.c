/* bfilter_match.c -- matching BSON documents against a compiled filter
 * (bfilter.c compiles it; bfilter_int.h is the shared form).
 *
 * The twin of filter_match.c: document nodes walk their path
 * (dtx__bpath_walk, over the document's bytes in place) and apply value
 * nodes to every value reached; NULL stands for a missing value.  Nothing
 * is allocated (but a regex's match data inside PCRE2) and nothing is
 * written but the failure flag, so one compiled filter serves many
 * threads.
 *
 * Where BSON says more than JSON, MongoDB's matcher decides:
 *  - comparisons ($lt ...) match only within a bracket, except that a
 *    MinKey operand is below and a MaxKey operand above every value,
 *    missing included (ComparisonMatchExpression's special case);
 *  - NaN equals NaN and is never $lt, $gt anything, nor anything NaN;
 *  - a regex matches strings and symbols by pattern, and a regex value
 *    with the same pattern and flags.
 * Where MongoDB judges by width and doctx by value: $type calls an int32
 * or int64 "int" when it fits in 32 bits and "long" otherwise, as
 * filter.c does (doctx's front doors speak JSON, where an integer has no
 * width), so NumberLong(5) is an "int" here.
 */
#include "doc/bdec.h"
#include "doc/bfilter_int.h"
#include "util/err.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The $type bit of a value (0 for missing): an integer's by its value,
 * as filter.c judges a JSON one -- "int" when it fits in 32 bits, else
 * "long", whether it is stored as int32 or int64 (bdoc.h's
 * dtx__bval_judged_type). */
static uint64_t value_type_bit(const dtx__bval_t *v) {
  return v ? btype_bit((int)dtx__bval_judged_type(v)) : 0;
}

typedef struct mctx {
  dtx__bfilter_t *f;
  int want_pos;
  size_t pos;     /* the last matching path's array position */
  size_t elem;    /* the element an $elemMatch matched, for pos */
  size_t walkpos; /* maintained by the path walk */
} mctx_t;

static int match_doc(const bnode_t *n, const uint8_t *doc, uint32_t len,
                     mctx_t *m);
static int match_val(const bnode_t *n, const dtx__bval_t *v, mctx_t *m);

static void fail(mctx_t *m, int rc) {
  int expect = 0;
  if (atomic_compare_exchange_strong(&m->f->failed, &expect, 1)) {
    m->f->err = rc;
    snprintf(m->f->detail, sizeof m->f->detail, "%s", dtx_errdetail());
  }
}

static int is_nan(const dtx__bval_t *v) {
  if (v->type == BSON_TYPE_DOUBLE)
    return isnan(dtx__bval_double(v));
  if (v->type == BSON_TYPE_DECIMAL128)
    return dtx__dec_is_nan(dtx__bval_dec(v));
  return 0;
}

/* Equality is the most common test; same-typed strings and integers skip
 * the general order. */
static int equal(const dtx__bval_t *v, const dtx__bval_t *arg) {
  if (v->type == arg->type) {
    switch (v->type) {
    case BSON_TYPE_UTF8:
      return v->len == arg->len && !memcmp(v->data, arg->data, v->len);
    case BSON_TYPE_INT32:
      return dtx__bval_int32(v) == dtx__bval_int32(arg);
    case BSON_TYPE_INT64:
      return dtx__bval_int64(v) == dtx__bval_int64(arg);
    default:
      break;
    }
  }
  return dtx__bval_cmp(v, arg) == 0;
}

static int in_set(const bnode_t *n, const dtx__bval_t *v) {
  size_t lo = 0, hi = n->nvals;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int r = dtx__bval_cmp(&n->vals[mid], v);
    if (r == 0)
      return 1;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

/* MongoDB 8.0: equality with null ($eq, $in) no longer matches the
 * deprecated undefined, though the two share a bracket in the order
 * (dtx__bval_cmp says they are equal); an undefined operand matches only
 * undefined.  Range operators ($lte: null) keep the bracket's answer. */
static int in_undefined(const bnode_t *n) {
  for (uint32_t i = 0; i < n->nvals; i++)
    if (n->vals[i].type == BSON_TYPE_UNDEFINED)
      return 1;
  return 0;
}

/* A MinKey or MaxKey operand compares with every bracket: MinKey is
 * below, MaxKey above every other value (and a missing one). */
static int cmp_extreme(const bnode_t *n) {
  int lt = n->kind == BK_LT || n->kind == BK_LTE;
  if (n->arg.type == BSON_TYPE_MAXKEY)
    return lt;
  return n->arg.type == BSON_TYPE_MINKEY && !lt;
}

static int match_cmp(const bnode_t *n, const dtx__bval_t *v) {
  bson_type_t at = n->arg.type;
  if (!v) {
    if (at == BSON_TYPE_NULL)
      return n->kind == BK_LTE || n->kind == BK_GTE;
    return cmp_extreme(n);
  }
  if (dtx__bval_bracket(v->type) != dtx__bval_bracket(at))
    return cmp_extreme(n);
  if (is_nan(v) || is_nan(&n->arg)) /* NaN is only equal to NaN */
    return n->kind != BK_LT && n->kind != BK_GT && is_nan(v) &&
           is_nan(&n->arg);
  int r = dtx__bval_cmp(v, &n->arg);
  switch (n->kind) {
  case BK_LT:
    return r < 0;
  case BK_LTE:
    return r <= 0;
  case BK_GT:
    return r > 0;
  default:
    return r >= 0;
  }
}

/* $mod truncates doubles and decimals toward zero; one that no int64
 * holds (or NaN, an infinity) has no remainder and does not match. */
static int match_mod(const bnode_t *n, const dtx__bval_t *v) {
  int64_t x;
  switch (v->type) {
  case BSON_TYPE_INT32:
    x = dtx__bval_int32(v);
    break;
  case BSON_TYPE_INT64:
    x = dtx__bval_int64(v);
    break;
  case BSON_TYPE_DOUBLE: {
    double d = dtx__bval_double(v);
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
      return 0;
    x = (int64_t)d;
    break;
  }
  case BSON_TYPE_DECIMAL128:
    if (dtx__dec_to_i64(dtx__bval_dec(v), &x))
      return 0;
    break;
  default:
    return 0;
  }
  if (n->size == -1) /* INT64_MIN % -1 overflows in C */
    return n->rem == 0;
  return x % n->size == n->rem;
}

/* A regex operand against one value; -1 after poisoning the filter. */
static int match_regex(const bre_t *r, const dtx__bval_t *v, mctx_t *m) {
  if (v->type == BSON_TYPE_REGEX) {
    const char *pat = (const char *)v->data;
    size_t plen = strlen(pat);
    return plen == r->patlen && !memcmp(pat, r->pat, plen) &&
           !strcmp(pat + plen + 1, r->opts);
  }
  if (v->type != BSON_TYPE_UTF8 && v->type != BSON_TYPE_SYMBOL)
    return 0;
  if (atomic_load(&m->f->failed))
    return 0;
  uint32_t n;
  const char *s = dtx__bval_str(v, &n);
  int rc = dtx__regex_match(r->re, s, n);
  if (rc < 0) {
    fail(m, rc);
    return 0;
  }
  return rc;
}

static uint32_t array_size(const dtx__bval_t *v) {
  uint32_t len, off = 0, n = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e))
    n++;
  return n;
}

static int match_elems(const bnode_t *n, const dtx__bval_t *v, mctx_t *m,
                       int objects) {
  if (!v || v->type != BSON_TYPE_ARRAY)
    return 0;
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  for (size_t i = 0; dtx__belem_next(d, len, &off, &e); i++) {
    int ok = 0;
    if (objects) {
      uint32_t elen;
      if (e.v.type == BSON_TYPE_DOCUMENT || e.v.type == BSON_TYPE_ARRAY) {
        const uint8_t *ed = dtx__bval_doc(&e.v, &elen);
        ok = match_doc(n->kids[0], ed, elen, m);
      }
    } else {
      ok = match_val(n->kids[0], &e.v, m);
    }
    if (ok) {
      m->elem = i;
      return 1;
    }
  }
  return 0;
}

static int match_val(const bnode_t *n, const dtx__bval_t *v, mctx_t *m) {
  switch (n->kind) {
  case BK_TRUE:
    return 1;
  case BK_FALSE:
    return 0;
  case BK_AND:
    for (size_t i = 0; i < n->nkids; i++)
      if (!match_val(n->kids[i], v, m))
        return 0;
    return 1;
  case BK_OR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_val(n->kids[i], v, m))
        return 1;
    return 0;
  case BK_NOR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_val(n->kids[i], v, m))
        return 0;
    return 1;
  case BK_NOT:
    return !match_val(n->kids[0], v, m);
  case BK_EQ:
    if (!v)
      return n->arg.type == BSON_TYPE_NULL;
    if (v->type == BSON_TYPE_UNDEFINED || n->arg.type == BSON_TYPE_UNDEFINED)
      return v->type == n->arg.type; /* see in_undefined */
    return equal(v, &n->arg);
  case BK_LT:
  case BK_LTE:
  case BK_GT:
  case BK_GTE:
    return match_cmp(n, v);
  case BK_IN:
    if (!v)
      return n->has_null;
    if (v->type == BSON_TYPE_UNDEFINED ? in_undefined(n) : in_set(n, v))
      return 1;
    for (uint32_t i = 0; i < n->nres; i++)
      if (match_regex(&n->res[i], v, m) > 0)
        return 1;
    return 0;
  case BK_EXISTS:
    return v != NULL;
  case BK_SIZE:
    return v && v->type == BSON_TYPE_ARRAY &&
           array_size(v) == (uint64_t)n->size;
  case BK_TYPE:
    return (value_type_bit(v) & n->types) != 0;
  case BK_MOD:
    return v && match_mod(n, v);
  case BK_REGEX:
    return v && match_regex(&n->rx, v, m) > 0;
  case BK_ELEM_OBJ:
    return match_elems(n, v, m, 1);
  case BK_ELEM_VAL:
    return match_elems(n, v, m, 0);
  case BK_PATH:
    return 0; /* not a value predicate; compile never puts one here */
  }
  return 0;
}

typedef struct visit {
  const bnode_t *pred;
  mctx_t *m;
} visit_t;

static int visit_pred(void *ctx, const dtx__bval_t *v, int empty_leaf) {
  visit_t *vi = ctx;
  (void)empty_leaf;
  vi->m->elem = SIZE_MAX;
  if (!match_val(vi->pred, v, vi->m))
    return 0;
  if (vi->m->want_pos) {
    size_t p = vi->m->walkpos != SIZE_MAX ? vi->m->walkpos : vi->m->elem;
    if (p != SIZE_MAX)
      vi->m->pos = p;
  }
  return 1;
}

static int match_doc(const bnode_t *n, const uint8_t *doc, uint32_t len,
                     mctx_t *m) {
  switch (n->kind) {
  case BK_TRUE:
    return 1;
  case BK_AND:
    for (size_t i = 0; i < n->nkids; i++)
      if (!match_doc(n->kids[i], doc, len, m))
        return 0;
    return 1;
  case BK_OR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_doc(n->kids[i], doc, len, m))
        return 1;
    return 0;
  case BK_NOR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_doc(n->kids[i], doc, len, m))
        return 0;
    return 1;
  case BK_NOT: {
    /* A negation matches because nothing matched: it has no position. */
    int want = m->want_pos;
    m->want_pos = 0;
    int r = !match_doc(n->kids[0], doc, len, m);
    m->want_pos = want;
    return r;
  }
  case BK_PATH: {
    visit_t vi = {n->kids[0], m};
    if (!m->want_pos)
      return dtx__bpath_walk(n->path, doc, len, n->leaf_mode, visit_pred,
                             &vi, NULL) != 0;
    /* A walk inside an $elemMatch must not disturb the walk around it. */
    size_t saved = m->walkpos;
    int r = dtx__bpath_walk(n->path, doc, len, n->leaf_mode, visit_pred, &vi,
                            &m->walkpos) != 0;
    m->walkpos = saved;
    return r;
  }
  default:
    return 0; /* BK_FALSE, and value predicates never reach this level */
  }
}

int dtx__bfilter_match(const dtx__bfilter_t *f, const uint8_t *doc,
                       uint32_t len) {
  if (!f)
    return 1;
  dtx__bfilter_t *mf = (dtx__bfilter_t *)f;
  if (atomic_load_explicit(&mf->failed, memory_order_relaxed))
    return 0;
  mctx_t m = {mf, 0, SIZE_MAX, SIZE_MAX, SIZE_MAX};
  return match_doc(f->root, doc, len, &m) && !atomic_load(&mf->failed);
}

int dtx__bfilter_match_pos(const dtx__bfilter_t *f, const uint8_t *doc,
                           uint32_t len, size_t *pos) {
  *pos = SIZE_MAX;
  if (!f)
    return 1;
  dtx__bfilter_t *mf = (dtx__bfilter_t *)f;
  if (atomic_load(&mf->failed))
    return 0;
  mctx_t m = {mf, 1, SIZE_MAX, SIZE_MAX, SIZE_MAX};
  int r = match_doc(f->root, doc, len, &m) && !atomic_load(&mf->failed);
  if (r)
    *pos = m.pos;
  return r;
}

int dtx__bfilter_error(const dtx__bfilter_t *f) {
  if (!f || !atomic_load(&((dtx__bfilter_t *)f)->failed))
    return 0;
  return dtx__err(f->err, "%s", f->detail);
}
