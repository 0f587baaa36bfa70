/* filter.c -- compiling MongoDB filter documents (matching is in
 * filter_match.c).
 *
 * A filter is compiled once into an immutable tree of nodes and then matched
 * against every candidate document of a store operation, possibly from many
 * threads at once.  Matching never allocates and never writes to the tree.
 *
 * The tree has two levels, mirroring MongoDB's MatchExpression:
 *  - document nodes (AND, OR, NOR, NOT, PATH) answer "does this document
 *    match?".  A PATH node walks a dotted path (path.c) and matches when
 *    any value the path reaches satisfies its predicate.
 *  - value nodes (EQ, LT, LTE, GT, GTE, IN, EXISTS, SIZE, ELEM_OBJ,
 *    ELEM_VAL, and AND/NOT over them) answer "does this single value
 *    match?"; NULL stands for a missing value.
 * Negative operators are NOT around a PATH, not a negated predicate:
 * {a: {$ne: 1}} means "no value at a equals 1", so [1, 2] does not match.
 * Inside $elemMatch's value form ({$elemMatch: {$gte: 80, $lt: 85}}) there
 * is no path, and the operators become value nodes applied to each element.
 *
 * Each operator of {a: {$gt: 1, $lt: 5}} is its own PATH node, so different
 * array elements may satisfy different operators, exactly as in MongoDB;
 * $elemMatch is the way to demand a single element.
 *
 * Matching can also report where it matched (dtx__filter_match_pos): the
 * index, in the first array the path went through, of the element that
 * satisfied the last matching condition, which the positional $ of updates
 * and projections needs.  A $regex that exceeds PCRE2's limits cannot say
 * "no" honestly, so it marks the filter failed (an atomic flag, the only
 * write matching ever makes): from then on nothing matches, and the caller
 * asks dtx__filter_error() afterwards and fails the whole operation.
 */
#include "doc/filter_int.h"
#include "util/assert.h"
#include "util/err.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the compile arena -------------------------------------------------- */

/* Chunks after the first have this size unless one request needs more:
 * under 1 KiB, for the reason given at FILTER_BYTES.  A chunk from malloc
 * starts with the link to the one before. */
#define ARENA_ALIGN 8
#define ARENA_LINK sizeof(void *)
#define ARENA_CHUNK 992

_Static_assert(offsetof(struct dtx__filter, first) % ARENA_ALIGN == 0,
               "a filter's first chunk is aligned");

void dtx__arena_init(dtx__arena_t *a, void *buf, size_t n) {
  a->cur = buf;
  a->end = buf ? (char *)buf + n : NULL;
  a->chunks = NULL;
}

void *dtx__arena_alloc(dtx__arena_t *a, size_t n) {
  if (n > SIZE_MAX / 2)
    return NULL;
  n = n ? (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1) : ARENA_ALIGN;
  if (!a->cur || (size_t)(a->end - a->cur) < n) {
    size_t sz = n + ARENA_LINK > ARENA_CHUNK ? n + ARENA_LINK : ARENA_CHUNK;
    char *c = malloc(sz);
    if (!c)
      return NULL;
    *(void **)c = a->chunks;
    a->chunks = c;
    a->cur = c + ARENA_LINK;
    a->end = c + sz;
  }
  void *p = a->cur;
  a->cur += n;
  memset(p, 0, n);
  return p;
}

char *dtx__arena_strndup(dtx__arena_t *a, const char *s, size_t n) {
  char *d = dtx__arena_alloc(a, n + 1);
  if (d)
    memcpy(d, s, n); /* the arena zeroed the NUL */
  return d;
}

void dtx__arena_free(dtx__arena_t *a) {
  void *c = a->chunks;
  while (c) {
    void *next = *(void **)c;
    free(c);
    c = next;
  }
  a->cur = a->end = NULL;
  a->chunks = NULL;
}

/* ---- building nodes ---------------------------------------------------- */

/* Releases what n's subtree holds outside the arena: operand values and
 * regexes.  Its memory goes with the arena (dtx__filter_free). */
static void node_release(node_t *n) {
  if (!n)
    return;
  for (size_t i = 0; i < n->nkids; i++)
    node_release(n->kids[i]);
  switch (n->kind) {
  case K_EQ:
  case K_LT:
  case K_LTE:
  case K_GT:
  case K_GTE:
    json_decref(n->arg);
    break;
  case K_IN:
    for (size_t i = 0; i < n->nvals; i++)
      json_decref(n->vals[i]);
    break;
  case K_REGEX:
    dtx__regex_free(n->re);
    break;
  default:
    break;
  }
}

/* A node of f's arena with room for cap kids, carved right after it: the
 * number of operands is known from the spec before any is compiled. */
static node_t *node_new(dtx__filter_t *f, kind_t kind, size_t cap) {
  if (cap > UINT32_MAX)
    return NULL;
  node_t *n = dtx__arena_alloc(&f->arena, sizeof *n + cap * sizeof(node_t *));
  if (n) {
    n->kind = kind;
    n->cap = (uint32_t)cap;
  }
  return n;
}

/* Appends kid to n; kid is NULL when building it ran out of memory. */
static int node_add(node_t *n, node_t *kid) {
  if (!kid)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  DTX_ASSERT(n->nkids < n->cap, "filter.kids_fit"); /* counted first */
  n->kids[n->nkids++] = kid;
  return 0;
}

/* An AND of one operand is that operand; saves a level on every match. */
static node_t *simplify(node_t *n) {
  if (n && n->kind == K_AND && n->nkids == 1)
    return n->kids[0];
  return n;
}

/* Wraps kid in a new node of kind; kid is released on failure. */
static node_t *wrap1(dtx__filter_t *f, kind_t kind, node_t *kid) {
  if (!kid)
    return NULL;
  node_t *n = node_new(f, kind, 1);
  if (!n) {
    node_release(kid);
    return NULL;
  }
  n->kids[n->nkids++] = kid;
  return n;
}

/* The filter's hold on an operand: a deep copy, so that it shares nothing
 * mutable with the spec, or a counted reference when the compile lives
 * for one call over a spec that does not change (DTX__COMPILE_BORROW):
 * copying an object operand is a dozen allocations. */
static json_t *operand(const dtx__filter_t *f, const json_t *v) {
  return f->flags & DTX__COMPILE_BORROW ? json_incref((json_t *)v)
                                        : json_deep_copy(v);
}

static node_t *leaf_arg(dtx__filter_t *f, kind_t kind, const json_t *arg) {
  node_t *n = node_new(f, kind, 0);
  if (!n)
    return NULL;
  n->arg = operand(f, arg);
  return n->arg ? n : NULL;
}

/* path is already in f's arena (compile_field copies it once for all the
 * PATH nodes of its field). */
static node_t *path_node(dtx__filter_t *f, const char *path, int leaf_mode,
                         node_t *pred) {
  node_t *n = wrap1(f, K_PATH, pred);
  if (!n)
    return NULL;
  n->leaf_mode = leaf_mode;
  n->path = path;
  return n;
}

/* ---- compiling ---------------------------------------------------------- */

/* Where an operator appears, for error details. */
typedef struct ctx {
  dtx__filter_t *f; /* the filter being built, whose arena nodes come from */
  const char *path; /* the field path ("" at top level), in f's arena */
  int value_level;  /* inside $elemMatch's value form: no path to walk */
  int depth;
} ctx_t;

static int compile_query(dtx__filter_t *f, const json_t *q, int depth,
                         node_t **out);

static int is_op(const char *key) { return key[0] == '$'; }

static const char *where(const ctx_t *c) {
  return c->path[0] ? c->path : "top level";
}

/* MongoDB operators doctx knows about but does not implement get their own
 * message, so a user knows the filter is valid MongoDB, just unsupported. */
static int unsupported(const char *op) {
  static const char *const ops[] = {
      "$text",          "$where",        "$expr",        "$jsonSchema",
      "$geoWithin",     "$geoIntersects", "$near",       "$nearSphere",
      "$bitsAllSet",    "$bitsAllClear", "$bitsAnySet",  "$bitsAnyClear",
      "$sampleRate",    "$within",       "$box",         "$center",
      "$centerSphere",  "$polygon",      "$geometry",    "$maxDistance",
      "$minDistance",   "$uniqueDocs",   "$eqStr",       "$search",
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

/* 1 when v is an object with any '$'-prefixed key. */
static int has_op_key(const json_t *v) {
  const char *k;
  json_t *x;
  if (!json_is_object(v))
    return 0;
  json_object_foreach((json_t *)v, k, x) {
    if (is_op(k))
      return 1;
  }
  return 0;
}

/* {a: {$gt: 1, b: 2}} is ambiguous (operators or a literal subdocument?);
 * MongoDB guesses from the first key, we refuse. */
static int check_opdoc(const ctx_t *c, const json_t *v, const char *opname) {
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    if (!is_op(k)) {
      if (opname)
        return dtx__err(DTX_EBADQUERY,
                        "%s needs an operator document at %s, found field %s",
                        opname, where(c), k);
      return dtx__err(DTX_EBADQUERY,
                      "cannot mix operators and fields (%s) at %s", k,
                      where(c));
    }
  }
  return 0;
}

static int cmp_ptr(const void *a, const void *b) {
  return dtx__value_cmp(*(json_t *const *)a, *(json_t *const *)b);
}

/* $in keeps its operands sorted so membership is a binary search, which
 * matters for {_id: {$in: [... thousands of ids ...]}}. */
static int compile_in(const ctx_t *c, const char *op, const json_t *arg,
                      node_t **out) {
  if (!json_is_array(arg))
    return dtx__err(DTX_EBADQUERY, "%s needs an array at %s", op, where(c));
  node_t *n = node_new(c->f, K_IN, 0);
  size_t cnt = json_array_size(arg);
  if (!n || (cnt && !(n->vals = dtx__arena_alloc(&c->f->arena,
                                                 cnt * sizeof *n->vals))))
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  for (size_t i = 0; i < cnt; i++) {
    const json_t *e = json_array_get(arg, i);
    if (has_op_key(e)) {
      node_release(n);
      return dtx__err(DTX_EBADQUERY, "cannot nest $ under %s at %s", op,
                      where(c));
    }
    if (json_is_null(e))
      n->has_null = 1;
    if (!(n->vals[n->nvals] = operand(c->f, e))) {
      node_release(n);
      return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
    }
    n->nvals++;
  }
  if (n->nvals > 1)
    qsort(n->vals, n->nvals, sizeof *n->vals, cmp_ptr);
  *out = n;
  return 0;
}

static int compile_ops(const ctx_t *c, const json_t *opdoc, node_t **out);

/* $elemMatch's argument is a query on each element ({product: "x"}) unless
 * its first key is a field operator ({$gte: 80}); $and/$or/$nor keep it a
 * query, as in MongoDB. */
static int compile_elem_match(const ctx_t *c, const json_t *arg,
                              node_t **out) {
  if (!json_is_object(arg))
    return dtx__err(DTX_EBADQUERY, "$elemMatch needs an object at %s",
                    where(c));
  void *it = json_object_iter((json_t *)arg);
  const char *first = it ? json_object_iter_key(it) : NULL;
  int value_form = first && is_op(first) && strcmp(first, "$and") &&
                   strcmp(first, "$or") && strcmp(first, "$nor");
  node_t *sub = NULL;
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
  *out = wrap1(c->f, value_form ? K_ELEM_VAL : K_ELEM_OBJ, sub);
  if (!*out)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  return 0;
}

/* Wraps a value predicate for its level: at document level it becomes a
 * PATH node (negated outside the walk for $ne/$nin/$exists:false); inside
 * $elemMatch's value form it applies to the element directly. */
static int finish(const ctx_t *c, node_t *pred, int negate, int leaf_mode,
                  node_t **out) {
  node_t *n = pred;
  if (!c->value_level)
    n = path_node(c->f, c->path, leaf_mode, pred);
  if (n && negate)
    n = wrap1(c->f, K_NOT, n);
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  *out = n;
  return 0;
}

static int compile_all(const ctx_t *c, const json_t *arg, node_t **out) {
  if (!json_is_array(arg))
    return dtx__err(DTX_EBADQUERY, "$all needs an array at %s", where(c));
  size_t cnt = json_array_size(arg);
  if (cnt == 0) /* MongoDB: $all: [] matches no document */
    return (*out = node_new(c->f, K_FALSE, 0)) ? 0
                                      : dtx__err(DTX_ENOMEM, "out of memory");
  int nelem = 0;
  for (size_t i = 0; i < cnt; i++) {
    const json_t *e = json_array_get(arg, i);
    if (!has_op_key(e))
      continue;
    if (json_object_size(e) != 1 || !json_object_get(e, "$elemMatch"))
      return dtx__err(DTX_EBADQUERY, "no $ expressions in $all at %s",
                      where(c));
    nelem++;
  }
  if (nelem && (size_t)nelem != cnt)
    return dtx__err(DTX_EBADQUERY,
                    "$all mixes $elemMatch and values at %s", where(c));
  node_t *and = node_new(c->f, K_AND, cnt);
  if (!and)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  for (size_t i = 0; i < cnt; i++) {
    const json_t *e = json_array_get(arg, i);
    node_t *kid = NULL;
    int rc;
    if (nelem) {
      rc = compile_elem_match(c, json_object_get(e, "$elemMatch"), &kid);
      if (!rc)
        rc = finish(c, kid, 0, DTX__LEAF_WHOLE, &kid);
    } else {
      kid = leaf_arg(c->f, K_EQ, e);
      rc = kid ? finish(c, kid, 0, DTX__LEAF_EXPAND, &kid)
               : dtx__err(DTX_ENOMEM, "out of memory compiling filter");
    }
    if (rc || (rc = node_add(and, kid))) {
      node_release(and);
      return rc;
    }
  }
  *out = simplify(and);
  return 0;
}

static int compile_size(const ctx_t *c, const json_t *arg, node_t **out) {
  json_int_t size = -1;
  if (json_is_integer(arg)) {
    size = json_integer_value(arg);
  } else if (json_is_real(arg)) {
    double d = json_real_value(arg);
    if (d >= 0 && d < 9.2e18 && d == (double)(json_int_t)d)
      size = (json_int_t)d;
  }
  if (size < 0)
    return dtx__err(DTX_EBADQUERY,
                    "$size needs a non-negative integer at %s", where(c));
  node_t *n = node_new(c->f, K_SIZE, 0);
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  n->size = size;
  return finish(c, n, 0, DTX__LEAF_WHOLE, out);
}

/* ---- $type, $mod, $regex ---------------------------------------------------- */

/* BSON type codes and their $type aliases.  doctx stores JSON, so only
 * double, string, object, array, bool, null, int and long can ever match;
 * the others are accepted (the filter is valid MongoDB) and match nothing.
 * An integer is "int" when it fits in 32 bits and "long" otherwise, as
 * Extended JSON reads a plain integer. */
static const struct {
  const char *alias;
  int code;
} type_names[] = {
    {"double", 1},     {"string", 2},      {"object", 3},
    {"array", 4},      {"binData", 5},     {"undefined", 6},
    {"objectId", 7},   {"bool", 8},        {"date", 9},
    {"null", 10},      {"regex", 11},      {"dbPointer", 12},
    {"javascript", 13}, {"symbol", 14},    {"javascriptWithScope", 15},
    {"int", 16},       {"timestamp", 17},  {"long", 18},
    {"decimal", 19},   {"minKey", -1},     {"maxKey", 127},
};


#define NUMBER_BITS \
  (type_bit(1) | type_bit(16) | type_bit(18) | type_bit(19))


static int one_type(const ctx_t *c, const json_t *t, uint64_t *mask) {
  if (json_is_string(t)) {
    const char *a = json_string_value(t);
    if (!strcmp(a, "number")) {
      *mask |= NUMBER_BITS;
      return 0;
    }
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
      if (!strcmp(a, type_names[i].alias)) {
        *mask |= type_bit(type_names[i].code);
        return 0;
      }
    return dtx__err(DTX_EBADQUERY, "$type: unknown type alias '%s' at %s",
                    a, where(c));
  }
  if (json_is_number(t)) {
    double d = json_number_value(t);
    for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
      if (d == type_names[i].code) {
        *mask |= type_bit(type_names[i].code);
        return 0;
      }
    return dtx__err(DTX_EBADQUERY, "$type: invalid type code %g at %s", d,
                    where(c));
  }
  return dtx__err(DTX_EBADQUERY,
                  "$type needs a type alias or number, or an array of them, "
                  "at %s", where(c));
}

static int compile_type(const ctx_t *c, const json_t *arg, node_t **out) {
  uint64_t mask = 0;
  int rc;
  if (json_is_array(arg)) {
    size_t i;
    json_t *t;
    json_array_foreach(arg, i, t) if ((rc = one_type(c, t, &mask))) return rc;
  } else if ((rc = one_type(c, arg, &mask))) {
    return rc;
  }
  node_t *n = node_new(c->f, K_TYPE, 0);
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  n->types = mask;
  return finish(c, n, 0, DTX__LEAF_EXPAND, out);
}

/* A $mod operand as an int64: integers as they are, doubles truncated
 * toward zero (MongoDB 5.1+), anything else refused. */
static int mod_operand(const ctx_t *c, const json_t *v, const char *what,
                       json_int_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 0;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d > -9223372036854775808.0 && d < 9223372036854775808.0) {
      *out = (json_int_t)d;
      return 0;
    }
    return dtx__err(DTX_EBADQUERY,
                    "$mod: %s %g is outside the 64-bit integer range at %s",
                    what, d, where(c));
  }
  return dtx__err(DTX_EBADQUERY, "$mod: %s must be a number at %s", what,
                  where(c));
}

static int compile_mod(const ctx_t *c, const json_t *arg, node_t **out) {
  json_int_t d, r;
  int rc;
  if (!json_is_array(arg) || json_array_size(arg) != 2)
    return dtx__err(DTX_EBADQUERY,
                    "$mod needs an array [divisor, remainder] at %s",
                    where(c));
  if ((rc = mod_operand(c, json_array_get(arg, 0), "divisor", &d)) ||
      (rc = mod_operand(c, json_array_get(arg, 1), "remainder", &r)))
    return rc;
  if (d == 0)
    return dtx__err(DTX_EBADQUERY, "$mod: divisor cannot be 0 at %s",
                    where(c));
  node_t *n = node_new(c->f, K_MOD, 0);
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  n->size = d;
  n->rem = r;
  return finish(c, n, 0, DTX__LEAF_EXPAND, out);
}

/* {$regex: "pattern", $options: "imsx"}; the caller passes both. */
static int compile_regex(const ctx_t *c, const json_t *pat,
                         const json_t *opts, node_t **out) {
  if (!json_is_string(pat))
    return dtx__err(DTX_EBADQUERY, "$regex needs a string pattern at %s",
                    where(c));
  if (opts && !json_is_string(opts))
    return dtx__err(DTX_EBADQUERY, "$options needs a string at %s",
                    where(c));
  node_t *n = node_new(c->f, K_REGEX, 0);
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  int rc = dtx__regex_compile(json_string_value(pat), json_string_length(pat),
                              opts ? json_string_value(opts) : "", &n->re);
  if (rc)
    return dtx__err_wrap(rc, "at %s", where(c));
  return finish(c, n, 0, DTX__LEAF_EXPAND, out);
}

static int compile_op(const ctx_t *c, const char *op, const json_t *arg,
                      node_t **out) {
  static const struct {
    const char *name;
    kind_t kind;
    int negate;
  } cmps[] = {{"$eq", K_EQ, 0},  {"$ne", K_EQ, 1},   {"$lt", K_LT, 0},
              {"$lte", K_LTE, 0}, {"$gt", K_GT, 0},  {"$gte", K_GTE, 0}};
  node_t *n = NULL;
  int rc;
  *out = NULL;
  if (c->depth > MAX_DEPTH)
    return dtx__err(DTX_EBADQUERY, "filter nested deeper than %d at %s",
                    MAX_DEPTH, where(c));
  for (size_t i = 0; i < sizeof cmps / sizeof cmps[0]; i++) {
    if (strcmp(op, cmps[i].name))
      continue;
    if (!(n = leaf_arg(c->f, cmps[i].kind, arg)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
    return finish(c, n, cmps[i].negate, DTX__LEAF_EXPAND, out);
  }
  if (!strcmp(op, "$in") || !strcmp(op, "$nin")) {
    if ((rc = compile_in(c, op, arg, &n)))
      return rc;
    return finish(c, n, op[1] == 'n', DTX__LEAF_EXPAND, out);
  }
  if (!strcmp(op, "$exists")) {
    int want;
    if (json_is_boolean(arg))
      want = json_is_true(arg);
    else if (json_is_integer(arg))
      want = json_integer_value(arg) != 0;
    else if (json_is_real(arg))
      want = json_real_value(arg) != 0;
    else
      return dtx__err(DTX_EBADQUERY, "$exists needs a boolean at %s",
                      where(c));
    if (!(n = node_new(c->f, K_EXISTS, 0)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
    return finish(c, n, !want, DTX__LEAF_EXPAND, out);
  }
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
  if (!strcmp(op, "$not")) {
    if (!json_is_object(arg) || json_object_size(arg) == 0)
      return dtx__err(DTX_EBADQUERY,
                      "$not needs a non-empty operator document at %s",
                      where(c));
    if ((rc = check_opdoc(c, arg, "$not")))
      return rc;
    ctx_t nc = {c->f, c->path, c->value_level, c->depth + 1};
    if ((rc = compile_ops(&nc, arg, &n)))
      return rc;
    if (!(*out = wrap1(c->f, K_NOT, n)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
    return 0;
  }
  return bad_op(c, op);
}

/* An operator document: every key is an operator, and all must hold. */
static int compile_ops(const ctx_t *c, const json_t *opdoc, node_t **out) {
  node_t *and = node_new(c->f, K_AND, json_object_size(opdoc));
  const char *op;
  json_t *arg;
  if (!and)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  json_object_foreach((json_t *)opdoc, op, arg) {
    node_t *kid;
    int rc;
    if (!strcmp(op, "$options")) {
      if (json_object_get(opdoc, "$regex"))
        continue; /* read together with its $regex */
      node_release(and);
      return dtx__err(DTX_EBADQUERY, "$options needs a $regex at %s",
                      where(c));
    }
    if (c->depth > MAX_DEPTH)
      rc = dtx__err(DTX_EBADQUERY, "filter nested deeper than %d at %s",
                    MAX_DEPTH, where(c));
    else if (!strcmp(op, "$regex"))
      rc = compile_regex(c, arg, json_object_get(opdoc, "$options"), &kid);
    else
      rc = compile_op(c, op, arg, &kid);
    if (rc || (rc = node_add(and, kid))) {
      node_release(and);
      return rc;
    }
  }
  *out = simplify(and);
  return 0;
}

static int compile_field(dtx__filter_t *f, const char *path, const json_t *v,
                         int depth, node_t **out) {
  int rc = dtx__path_check(path, DTX_EBADQUERY);
  if (rc)
    return rc;
  /* One copy of the path serves every PATH node of the field. */
  ctx_t c = {f, dtx__arena_strndup(&f->arena, path, strlen(path)), 0, depth};
  if (!c.path)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  if (has_op_key(v)) {
    if ((rc = check_opdoc(&c, v, NULL)))
      return rc;
    return compile_ops(&c, v, out);
  }
  node_t *eq = leaf_arg(f, K_EQ, v);
  if (!eq)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  return finish(&c, eq, 0, DTX__LEAF_EXPAND, out);
}

static int compile_logical(dtx__filter_t *f, const char *op,
                           const json_t *arg, int depth, node_t **out) {
  kind_t kind = !strcmp(op, "$and") ? K_AND : !strcmp(op, "$or") ? K_OR
                                                                   : K_NOR;
  if (!json_is_array(arg) || json_array_size(arg) == 0)
    return dtx__err(DTX_EBADQUERY, "%s needs a non-empty array", op);
  node_t *n = node_new(f, kind, json_array_size(arg));
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  for (size_t i = 0; i < json_array_size(arg); i++) {
    const json_t *q = json_array_get(arg, i);
    node_t *kid;
    int rc;
    if (!json_is_object(q)) {
      node_release(n);
      return dtx__err(DTX_EBADQUERY, "%s entries must be objects (entry %zu)",
                      op, i);
    }
    if ((rc = compile_query(f, q, depth + 1, &kid)) ||
        (rc = node_add(n, kid))) {
      node_release(n);
      return rc;
    }
  }
  *out = kind == K_AND ? simplify(n) : n;
  return 0;
}

/* A query document: {field: value-or-operators, $and: [...], ...}, all of
 * which must hold.  The empty query matches everything. */
static int compile_query(dtx__filter_t *f, const json_t *q, int depth,
                         node_t **out) {
  const char *key;
  json_t *v;
  *out = NULL;
  if (!json_is_object(q))
    return dtx__err(DTX_EBADQUERY, "filter must be an object");
  if (depth > MAX_DEPTH)
    return dtx__err(DTX_EBADQUERY, "filter nested deeper than %d",
                    MAX_DEPTH);
  node_t *and = node_new(f, K_AND, json_object_size(q));
  if (!and)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  json_object_foreach((json_t *)q, key, v) {
    node_t *kid = NULL;
    int rc;
    if (!is_op(key)) { /* the usual key, tested first */
      rc = compile_field(f, key, v, depth, &kid);
    } else if (!strcmp(key, "$comment")) {
      continue; /* MongoDB allows a comment anywhere a query is */
    } else if (!strcmp(key, "$and") || !strcmp(key, "$or") ||
               !strcmp(key, "$nor")) {
      rc = compile_logical(f, key, v, depth, &kid);
    } else {
      ctx_t top = {f, "", 0, depth};
      rc = bad_op(&top, key);
    }
    if (rc || (rc = node_add(and, kid))) {
      node_release(and);
      return rc;
    }
  }
  if (and->nkids == 0) {
    and->kind = K_TRUE;
    *out = and;
    return 0;
  }
  *out = simplify(and);
  return 0;
}

int dtx__filter_compile(const json_t *spec, dtx__filter_t **out) {
  return dtx__filter_compile_flags(spec, 0, out);
}

int dtx__filter_compile_flags(const json_t *spec, unsigned flags,
                              dtx__filter_t **out) {
  *out = NULL;
  /* malloc, not calloc: the first chunk needs no zeroing (the arena
   * zeroes what it hands out). */
  dtx__filter_t *f = malloc(FILTER_BYTES);
  if (!f)
    return dtx__err(DTX_ENOMEM, "out of memory compiling filter");
  f->root = NULL;
  atomic_init(&f->failed, 0);
  f->err = 0;
  f->detail[0] = '\0';
  f->flags = flags;
  dtx__arena_init(&f->arena, f->first,
                  FILTER_BYTES - offsetof(dtx__filter_t, first));
  int rc = spec ? compile_query(f, spec, 0, &f->root)
                : ((f->root = node_new(f, K_TRUE, 0))
                       ? 0
                       : dtx__err(DTX_ENOMEM, "out of memory"));
  if (rc) {
    dtx__arena_free(&f->arena);
    free(f);
    return rc;
  }
  *out = f;
  return 0;
}

void dtx__filter_free(dtx__filter_t *f) {
  if (!f)
    return;
  node_release(f->root);
  dtx__arena_free(&f->arena);
  free(f);
}
