/* filter_match.c -- matching documents against a compiled filter
 * (filter.c compiles it; filter_int.h is the shared form).
 *
 * Matching never allocates (but for a $regex's match data) and writes
 * nothing but the failure flag of a $regex that passed PCRE2's limits, so
 * one compiled filter serves many threads.  Document nodes walk their
 * path (path.c) and apply value nodes to every value reached; with
 * dtx__filter_match_pos the walk also reports the array position the
 * positional $ needs.
 */
#include "doc/filter_int.h"
#include "util/err.h"

#include <stdio.h>
#include <string.h>

/* The $type bit of a JSON value (an integer is "int" within 32 bits). */
static uint64_t value_type_bit(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_REAL:
    return type_bit(1);
  case JSON_STRING:
    return type_bit(2);
  case JSON_OBJECT:
    return type_bit(3);
  case JSON_ARRAY:
    return type_bit(4);
  case JSON_TRUE:
  case JSON_FALSE:
    return type_bit(8);
  case JSON_NULL:
    return type_bit(10);
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    return i >= INT32_MIN && i <= INT32_MAX ? type_bit(16) : type_bit(18);
  }
  }
  return 0;
}

/* ---- matching ----------------------------------------------------------- */

/* What one match call carries down the tree: the filter (to record an
 * error in) and, when positions are wanted, where the last match was. */
typedef struct mctx {
  dtx__filter_t *f;
  int want_pos;
  size_t pos;     /* the last matching path's array position */
  size_t elem;    /* the element an $elemMatch matched, for pos */
  size_t walkpos; /* maintained by the path walk */
} mctx_t;

static int match_doc(const node_t *n, const json_t *doc, mctx_t *m);
static int match_val(const node_t *n, const json_t *v, mctx_t *m);

/* Records the first error a match meets; later matches then all fail. */
static void fail(mctx_t *m, int rc) {
  int expect = 0;
  if (atomic_compare_exchange_strong(&m->f->failed, &expect, 1)) {
    m->f->err = rc;
    snprintf(m->f->detail, sizeof m->f->detail, "%s", dtx_errdetail());
  }
}

static int in_set(const node_t *n, const json_t *v) {
  size_t lo = 0, hi = n->nvals;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int r = dtx__value_cmp(n->vals[mid], v);
    if (r == 0)
      return 1;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

/* Range operators compare only within a type bracket ({$gt: 1} never
 * matches a string).  The one cross-bracket case is null: $lte/$gte null
 * match a missing value just as $eq null does, per MongoDB. */
static int match_cmp(const node_t *n, const json_t *v) {
  if (!v)
    return json_is_null(n->arg) && (n->kind == K_LTE || n->kind == K_GTE);
  if (dtx__value_bracket(v) != dtx__value_bracket(n->arg))
    return 0;
  int r = dtx__value_cmp(v, n->arg);
  switch (n->kind) {
  case K_LT:
    return r < 0;
  case K_LTE:
    return r <= 0;
  case K_GT:
    return r > 0;
  default:
    return r >= 0;
  }
}

/* Equality is by far the most common test (ids, states, account names);
 * same-typed strings and integers skip the general ordering. */
static int equal(const json_t *v, const json_t *arg) {
  if (json_typeof(v) == json_typeof(arg)) {
    if (json_is_string(v))
      return json_string_length(v) == json_string_length(arg) &&
             !memcmp(json_string_value(v), json_string_value(arg),
                     json_string_length(v));
    if (json_is_integer(v))
      return json_integer_value(v) == json_integer_value(arg);
  }
  return dtx__value_cmp(v, arg) == 0;
}

/* $mod truncates doubles toward zero; a double that no int64 can hold
 * has no remainder and does not match. */
static int match_mod(const node_t *n, const json_t *v) {
  json_int_t x;
  if (json_is_integer(v)) {
    x = json_integer_value(v);
  } else if (json_is_real(v)) {
    double d = json_real_value(v);
    if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
      return 0;
    x = (json_int_t)d;
  } else {
    return 0;
  }
  if (n->size == -1) /* INT64_MIN % -1 overflows in C */
    return n->rem == 0;
  return x % n->size == n->rem;
}

static int match_elems(const node_t *n, const json_t *v, mctx_t *m,
                       int objects) {
  for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
    const json_t *e = json_array_get(v, i);
    int ok = objects ? (json_is_object(e) || json_is_array(e)) &&
                           match_doc(n->kids[0], e, m)
                     : match_val(n->kids[0], e, m);
    if (ok) {
      m->elem = i;
      return 1;
    }
  }
  return 0;
}

static int match_val(const node_t *n, const json_t *v, mctx_t *m) {
  switch (n->kind) {
  case K_TRUE:
    return 1;
  case K_FALSE:
    return 0;
  case K_AND:
    for (size_t i = 0; i < n->nkids; i++)
      if (!match_val(n->kids[i], v, m))
        return 0;
    return 1;
  case K_OR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_val(n->kids[i], v, m))
        return 1;
    return 0;
  case K_NOR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_val(n->kids[i], v, m))
        return 0;
    return 1;
  case K_NOT:
    return !match_val(n->kids[0], v, m);
  case K_EQ:
    if (!v)
      return json_is_null(n->arg);
    return equal(v, n->arg);
  case K_LT:
  case K_LTE:
  case K_GT:
  case K_GTE:
    return match_cmp(n, v);
  case K_IN:
    return v ? in_set(n, v) : n->has_null;
  case K_EXISTS:
    return v != NULL;
  case K_SIZE:
    return json_is_array(v) && json_array_size(v) == (size_t)n->size;
  case K_TYPE:
    return v && (value_type_bit(v) & n->types) != 0;
  case K_MOD:
    return v && match_mod(n, v);
  case K_REGEX: {
    if (!json_is_string(v) || atomic_load(&m->f->failed))
      return 0;
    int r = dtx__regex_match(n->re, json_string_value(v),
                             json_string_length(v));
    if (r < 0) {
      fail(m, r);
      return 0;
    }
    return r;
  }
  case K_ELEM_OBJ:
    return match_elems(n, v, m, 1);
  case K_ELEM_VAL:
    return match_elems(n, v, m, 0);
  case K_PATH:
    return 0; /* not a value predicate; compile never puts one here */
  }
  return 0;
}

typedef struct visit {
  const node_t *pred;
  mctx_t *m;
} visit_t;

static int visit_pred(void *ctx, const json_t *v, int empty_leaf) {
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

static int match_doc(const node_t *n, const json_t *doc, mctx_t *m) {
  switch (n->kind) {
  case K_TRUE:
    return 1;
  case K_AND:
    for (size_t i = 0; i < n->nkids; i++)
      if (!match_doc(n->kids[i], doc, m))
        return 0;
    return 1;
  case K_OR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_doc(n->kids[i], doc, m))
        return 1;
    return 0;
  case K_NOR:
    for (size_t i = 0; i < n->nkids; i++)
      if (match_doc(n->kids[i], doc, m))
        return 0;
    return 1;
  case K_NOT: {
    /* A negation matches because nothing matched: it has no position. */
    int want = m->want_pos;
    m->want_pos = 0;
    int r = !match_doc(n->kids[0], doc, m);
    m->want_pos = want;
    return r;
  }
  case K_PATH: {
    visit_t vi = {n->kids[0], m};
    if (!m->want_pos)
      return dtx__path_walk(n->path, doc, n->leaf_mode, visit_pred, &vi) != 0;
    /* A walk inside an $elemMatch must not disturb the walk around it. */
    size_t saved = m->walkpos;
    int r = dtx__path_walk_pos(n->path, doc, n->leaf_mode, visit_pred, &vi,
                               &m->walkpos) != 0;
    m->walkpos = saved;
    return r;
  }
  default:
    return 0; /* K_FALSE, and value predicates never reach this level */
  }
}

int dtx__filter_match(const dtx__filter_t *f, const json_t *doc) {
  if (!f)
    return 1;
  dtx__filter_t *mf = (dtx__filter_t *)f;
  if (atomic_load_explicit(&mf->failed, memory_order_relaxed))
    return 0;
  mctx_t m = {mf, 0, SIZE_MAX, SIZE_MAX, SIZE_MAX};
  return match_doc(f->root, doc, &m) && !atomic_load(&mf->failed);
}

int dtx__filter_match_pos(const dtx__filter_t *f, const json_t *doc,
                          size_t *pos) {
  *pos = SIZE_MAX;
  if (!f)
    return 1;
  dtx__filter_t *mf = (dtx__filter_t *)f;
  if (atomic_load(&mf->failed))
    return 0;
  mctx_t m = {mf, 1, SIZE_MAX, SIZE_MAX, SIZE_MAX};
  int r = match_doc(f->root, doc, &m) && !atomic_load(&mf->failed);
  if (r)
    *pos = m.pos;
  return r;
}

int dtx__filter_error(const dtx__filter_t *f) {
  if (!f || !atomic_load(&((dtx__filter_t *)f)->failed))
    return 0;
  return dtx__err(f->err, "%s", f->detail);
}
