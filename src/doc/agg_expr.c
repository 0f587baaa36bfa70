/* agg_expr.c -- aggregation expressions (the manual's "Aggregation
 * Operators"), compiled once per pipeline and evaluated per document.
 *
 * Supported: literals, field paths ("$a.b", through arrays as MongoDB:
 * "$a.b" over a: [{b: 1}, {b: 2}] is [1, 2]), $$ROOT and $$CURRENT, arrays
 * and objects of expressions, and the operators $literal, $add,
 * $subtract, $multiply, $cond, $eq, $ne, $gt, $gte, $lt, $lte, $cmp,
 * $and, $or, $not, $ifNull, $size, $concat.  Anything else is refused at
 * compile time with DTX_EBADQUERY naming it.
 *
 * Size: only $concat builds a value bigger than its arguments' text
 * (objects and arrays of expressions share the values they hold, and grow
 * with the spec, not the data); it refuses a string past 16 MiB before
 * allocating it.  The stages (agg.c) bound each document they build the
 * same way, so a pipeline that doubles a string per stage stops at 16 MiB
 * (docs/semantics.md, "Size limits").
 *
 * Values: evaluation returns a new reference, or NULL for "missing",
 * which is not null: {$eq: ["$nofield", null]} is false, as in MongoDB,
 * and missing sorts below null.  Arithmetic on int64 is exact and an
 * overflow is DTX_EOVERFLOW (MongoDB would switch to a double; doctx keeps
 * money exact or refuses); a double anywhere gives a double; null or
 * missing gives null.  A type MongoDB refuses is DTX_ETYPE.
 */
#include "doc/agg_int.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 100

enum {
  E_LIT,   /* lit */
  E_FIELD, /* segs from the document root */
  E_ARR,   /* kids */
  E_OBJ,   /* keys[i]: kids[i] */
  E_ADD,
  E_SUB,
  E_MUL,
  E_COND,
  E_EQ,
  E_NE,
  E_GT,
  E_GTE,
  E_LT,
  E_LTE,
  E_CMP,
  E_AND,
  E_OR,
  E_NOT,
  E_IFNULL,
  E_SIZE,
  E_CONCAT,
};

struct dtx__expr {
  int op;
  json_t *lit;
  char *buf;   /* E_FIELD: the path, '.' replaced by NUL */
  char **segs; /* into buf */
  size_t nsegs;
  size_t nkids;
  dtx__expr_t **kids;
  char **keys; /* E_OBJ */
};

static const struct {
  const char *name;
  int op;
  int min, max; /* argument count; max -1: any */
} ops[] = {
    {"$add", E_ADD, 0, -1},    {"$subtract", E_SUB, 2, 2},
    {"$multiply", E_MUL, 0, -1}, {"$cond", E_COND, 3, 3},
    {"$eq", E_EQ, 2, 2},       {"$ne", E_NE, 2, 2},
    {"$gt", E_GT, 2, 2},       {"$gte", E_GTE, 2, 2},
    {"$lt", E_LT, 2, 2},       {"$lte", E_LTE, 2, 2},
    {"$cmp", E_CMP, 2, 2},     {"$and", E_AND, 0, -1},
    {"$or", E_OR, 0, -1},      {"$not", E_NOT, 1, 1},
    {"$ifNull", E_IFNULL, 2, -1}, {"$size", E_SIZE, 1, 1},
    {"$concat", E_CONCAT, 0, -1},
};

void dtx__expr_free(dtx__expr_t *e) {
  if (!e)
    return;
  json_decref(e->lit);
  free(e->buf);
  free(e->segs);
  for (size_t i = 0; i < e->nkids; i++) {
    dtx__expr_free(e->kids[i]);
    if (e->keys)
      free(e->keys[i]);
  }
  free(e->kids);
  free(e->keys);
  free(e);
}

static dtx__expr_t *node(int op) {
  dtx__expr_t *e = calloc(1, sizeof *e);
  if (e)
    e->op = op;
  return e;
}

static int nomem(void) {
  return dtx__err(DTX_ENOMEM, "out of memory compiling an expression");
}

static int compile(const json_t *spec, const char *where, int depth,
                   dtx__expr_t **out);

static int add_kid(dtx__expr_t *e, dtx__expr_t *k) {
  dtx__expr_t **n = realloc(e->kids, (e->nkids + 1) * sizeof *n);
  if (!n) {
    dtx__expr_free(k);
    return nomem();
  }
  e->kids = n;
  e->kids[e->nkids++] = k;
  return 0;
}

/* "$a.b" (root path "a.b") or "$$ROOT.a.b" (path after the variable). */
static int compile_path(const char *s, const char *where, dtx__expr_t **out) {
  const char *path = s + 1;
  if (s[1] == '$') {
    size_t vl = strcspn(s + 2, ".");
    if (!((vl == 4 && !strncmp(s + 2, "ROOT", 4)) ||
          (vl == 7 && !strncmp(s + 2, "CURRENT", 7))))
      return dtx__err(DTX_EBADQUERY,
                      "%s: unsupported variable '$$%.*s' (only $$ROOT and "
                      "$$CURRENT)", where, (int)vl, s + 2);
    path = s[2 + vl] ? s + 3 + vl : "";
  }
  dtx__expr_t *e = node(E_FIELD);
  if (!e)
    return nomem();
  if (*path) {
    int rc = dtx__path_check(path, DTX_EBADQUERY);
    if (rc) {
      dtx__expr_free(e);
      return dtx__err_wrap(rc, "%s: field path '%s'", where, s);
    }
    size_t n = 1, len = strlen(path);
    for (size_t i = 0; i < len; i++)
      n += path[i] == '.';
    if (!(e->buf = strdup(path)) || !(e->segs = malloc(n * sizeof *e->segs))) {
      dtx__expr_free(e);
      return nomem();
    }
    e->segs[e->nsegs++] = e->buf;
    for (size_t i = 0; i < len; i++)
      if (e->buf[i] == '.') {
        e->buf[i] = '\0';
        e->segs[e->nsegs++] = e->buf + i + 1;
      }
  }
  *out = e;
  return 0;
}

static int compile_op(const char *name, const json_t *arg, const char *where,
                      int depth, dtx__expr_t **out) {
  if (!strcmp(name, "$literal")) {
    dtx__expr_t *e = node(E_LIT);
    if (!e || !(e->lit = json_deep_copy(arg))) {
      dtx__expr_free(e);
      return nomem();
    }
    *out = e;
    return 0;
  }
  size_t t;
  for (t = 0; t < sizeof ops / sizeof ops[0]; t++)
    if (!strcmp(name, ops[t].name))
      break;
  if (t == sizeof ops / sizeof ops[0])
    return dtx__err(DTX_EBADQUERY,
                    "%s: unknown or unsupported expression operator %s",
                    where, name);
  dtx__expr_t *e = node(ops[t].op);
  if (!e)
    return nomem();
  int rc = 0;
  if (ops[t].op == E_COND && json_is_object(arg)) {
    /* {if, then, else}: all three, nothing else */
    static const char *const parts[] = {"if", "then", "else"};
    if (json_object_size(arg) != 3)
      rc = dtx__err(DTX_EBADQUERY, "%s: $cond needs exactly if, then and "
                                   "else", where);
    for (int i = 0; i < 3 && !rc; i++) {
      const json_t *x = json_object_get(arg, parts[i]);
      dtx__expr_t *k;
      if (!x)
        rc = dtx__err(DTX_EBADQUERY, "%s: $cond is missing '%s'", where,
                      parts[i]);
      else if (!(rc = compile(x, where, depth + 1, &k)))
        rc = add_kid(e, k);
    }
  } else if (json_is_array(arg)) {
    size_t i;
    json_t *x;
    json_array_foreach(arg, i, x) {
      dtx__expr_t *k;
      if ((rc = compile(x, where, depth + 1, &k)) || (rc = add_kid(e, k)))
        break;
    }
  } else {
    /* One argument given bare: {$size: "$a"} is {$size: ["$a"]}. */
    dtx__expr_t *k;
    if (!(rc = compile(arg, where, depth + 1, &k)))
      rc = add_kid(e, k);
  }
  if (!rc && ((int)e->nkids < ops[t].min ||
              (ops[t].max >= 0 && (int)e->nkids > ops[t].max)))
    rc = dtx__err(DTX_EBADQUERY, "%s: %s takes %s%d argument%s, not %zu",
                  where, name, ops[t].max < 0 ? "at least " : "",
                  ops[t].min, ops[t].min == 1 ? "" : "s", e->nkids);
  if (rc) {
    dtx__expr_free(e);
    return rc;
  }
  *out = e;
  return 0;
}

static int compile(const json_t *spec, const char *where, int depth,
                   dtx__expr_t **out) {
  *out = NULL;
  if (depth > MAX_DEPTH)
    return dtx__err(DTX_EBADQUERY, "%s: expression nested deeper than %d",
                    where, MAX_DEPTH);
  if (json_is_string(spec) && json_string_value(spec)[0] == '$')
    return compile_path(json_string_value(spec), where, out);
  if (json_is_array(spec)) {
    dtx__expr_t *e = node(E_ARR);
    size_t i;
    json_t *x;
    if (!e)
      return nomem();
    json_array_foreach(spec, i, x) {
      dtx__expr_t *k;
      int rc;
      if ((rc = compile(x, where, depth + 1, &k)) || (rc = add_kid(e, k))) {
        dtx__expr_free(e);
        return rc;
      }
    }
    *out = e;
    return 0;
  }
  if (json_is_object(spec) && json_object_size(spec) > 0) {
    void *it = json_object_iter((json_t *)spec);
    const char *first = json_object_iter_key(it);
    if (first[0] == '$') {
      if (json_object_size(spec) != 1)
        return dtx__err(DTX_EBADQUERY,
                        "%s: an expression object must have exactly one "
                        "$operator field (found %s and more)", where, first);
      return compile_op(first, json_object_iter_value(it), where, depth, out);
    }
    dtx__expr_t *e = node(E_OBJ);
    const char *k;
    json_t *x;
    if (!e || !(e->keys = calloc(json_object_size(spec), sizeof *e->keys))) {
      dtx__expr_free(e);
      return nomem();
    }
    json_object_foreach((json_t *)spec, k, x) {
      dtx__expr_t *kid;
      int rc = 0;
      if (k[0] == '$' || strchr(k, '.'))
        rc = dtx__err(DTX_EBADQUERY,
                      "%s: field name '%s' in an expression object may not "
                      "start with '$' or contain '.'", where, k);
      if (rc || (rc = compile(x, where, depth + 1, &kid))) {
        dtx__expr_free(e);
        return rc;
      }
      if (!(e->keys[e->nkids] = strdup(k))) {
        dtx__expr_free(kid);
        dtx__expr_free(e);
        return nomem();
      }
      if ((rc = add_kid(e, kid))) {
        dtx__expr_free(e);
        return rc;
      }
    }
    *out = e;
    return 0;
  }
  dtx__expr_t *e = node(E_LIT);
  if (!e || !(e->lit = json_deep_copy(spec))) {
    dtx__expr_free(e);
    return nomem();
  }
  *out = e;
  return 0;
}

int dtx__expr_compile(const json_t *spec, const char *where,
                      dtx__expr_t **out) {
  return compile(spec, where, 0, out);
}

/* ---- evaluation ------------------------------------------------------------ */

int dtx__agg_truthy(const json_t *v) {
  if (!v || json_is_null(v) || json_is_false(v))
    return 0;
  if (json_is_number(v))
    return json_number_value(v) != 0;
  return 1;
}

/* A field path through objects, and through arrays element by element:
 * each element that is an object (or array) gives its value, missing ones
 * are left out, and the results form an array. */
static json_t *resolve(const json_t *cur, char *const *segs, size_t n) {
  if (n == 0)
    return json_incref((json_t *)cur);
  if (json_is_object(cur)) {
    const json_t *next = json_object_get(cur, segs[0]);
    return next ? resolve(next, segs + 1, n - 1) : NULL;
  }
  if (!json_is_array(cur))
    return NULL;
  json_t *r = json_array();
  for (size_t i = 0; r && i < json_array_size(cur); i++) {
    const json_t *e = json_array_get(cur, i);
    if (!json_is_object(e) && !json_is_array(e))
      continue;
    json_t *v = resolve(e, segs, n);
    if (v && json_array_append_new(r, v)) {
      json_decref(r);
      return NULL;
    }
  }
  return r;
}

/* Missing sorts below null; otherwise MongoDB's order. */
static int agg_cmp(const json_t *a, const json_t *b) {
  if (!a || !b)
    return (a != NULL) - (b != NULL);
  return dtx__value_cmp(a, b);
}

static int eval(const dtx__expr_t *e, const json_t *doc, json_t **out);

/* Evaluates every argument into v[0..n); on error releases them. */
static int eval_args(const dtx__expr_t *e, const json_t *doc, json_t **v) {
  for (size_t i = 0; i < e->nkids; i++) {
    int rc = eval(e->kids[i], doc, &v[i]);
    if (rc) {
      while (i-- > 0)
        json_decref(v[i]);
      return rc;
    }
  }
  return 0;
}

/* $add, $subtract and $multiply. */
static int arith(const dtx__expr_t *e, json_t **v, json_t **out) {
  const char *name = e->op == E_ADD ? "$add" : e->op == E_SUB ? "$subtract"
                                                              : "$multiply";
  for (size_t i = 0; i < e->nkids; i++) {
    if (!v[i] || json_is_null(v[i])) {
      *out = json_null();
      return 0;
    }
    if (!json_is_number(v[i]))
      return dtx__err(DTX_ETYPE, "%s only supports numeric types, not %s",
                      name, dtx__value_type_name(v[i], DTX__TN_AGG));
  }
  json_int_t iacc = e->op == E_MUL ? 1 : 0, r;
  double dacc = e->op == E_MUL ? 1 : 0;
  int real = 0;
  if (e->op == E_SUB) {
    if (json_is_integer(v[0]) && json_is_integer(v[1])) {
      if (__builtin_sub_overflow(json_integer_value(v[0]),
                                 json_integer_value(v[1]), &r))
        return dtx__err(DTX_EOVERFLOW, "$subtract: the result overflows "
                                       "int64");
      *out = json_integer(r);
    } else {
      *out = json_real(json_number_value(v[0]) - json_number_value(v[1]));
    }
  } else {
    for (size_t i = 0; i < e->nkids; i++) {
      if (!real && json_is_integer(v[i])) {
        json_int_t x = json_integer_value(v[i]);
        if (e->op == E_MUL ? __builtin_mul_overflow(iacc, x, &r)
                           : __builtin_add_overflow(iacc, x, &r))
          return dtx__err(DTX_EOVERFLOW, "%s: the result overflows int64",
                          name);
        iacc = r;
        continue;
      }
      if (!real) {
        real = 1;
        dacc = (double)iacc;
      }
      double x = json_number_value(v[i]);
      dacc = e->op == E_MUL ? dacc * x : dacc + x;
    }
    *out = real ? json_real(dacc) : json_integer(iacc);
  }
  if (!*out)
    return dtx__err(DTX_EOVERFLOW, "%s: the result is not finite", name);
  return 0;
}

static int eval_op(const dtx__expr_t *e, const json_t *doc, json_t **out) {
  json_t *small[4], **v = e->nkids <= 4 ? small : calloc(e->nkids, sizeof *v);
  int rc = 0, c;
  if (!v)
    return dtx__err(DTX_ENOMEM, "out of memory evaluating an expression");
  /* The short-circuiting operators evaluate lazily. */
  switch (e->op) {
  case E_COND: {
    json_t *t;
    if ((rc = eval(e->kids[0], doc, &t)))
      break;
    int yes = dtx__agg_truthy(t);
    json_decref(t);
    rc = eval(e->kids[yes ? 1 : 2], doc, out);
    break;
  }
  case E_AND:
  case E_OR: {
    int want = e->op == E_OR, res = !want;
    for (size_t i = 0; i < e->nkids && !rc; i++) {
      json_t *t;
      if ((rc = eval(e->kids[i], doc, &t)))
        break;
      int tv = dtx__agg_truthy(t);
      json_decref(t);
      if (tv == want) {
        res = want;
        break;
      }
    }
    if (!rc)
      *out = json_boolean(res);
    break;
  }
  case E_IFNULL:
    for (size_t i = 0; i < e->nkids && !rc; i++) {
      json_t *t;
      if ((rc = eval(e->kids[i], doc, &t)))
        break;
      if ((t && !json_is_null(t)) || i + 1 == e->nkids) {
        *out = t;
        break;
      }
      json_decref(t);
    }
    break;
  default:
    if ((rc = eval_args(e, doc, v)))
      break;
    switch (e->op) {
    case E_ADD:
    case E_SUB:
    case E_MUL:
      rc = arith(e, v, out);
      break;
    case E_EQ:
    case E_NE:
    case E_GT:
    case E_GTE:
    case E_LT:
    case E_LTE:
    case E_CMP:
      c = agg_cmp(v[0], v[1]);
      *out = e->op == E_CMP ? json_integer(c < 0 ? -1 : c > 0)
             : json_boolean(e->op == E_EQ    ? c == 0
                            : e->op == E_NE  ? c != 0
                            : e->op == E_GT  ? c > 0
                            : e->op == E_GTE ? c >= 0
                            : e->op == E_LT  ? c < 0
                                             : c <= 0);
      break;
    case E_NOT:
      *out = json_boolean(!dtx__agg_truthy(v[0]));
      break;
    case E_SIZE:
      if (!json_is_array(v[0]))
        rc = dtx__err(DTX_ETYPE,
                      "$size: the argument must be an array, not %s",
                      dtx__value_type_name(v[0], DTX__TN_AGG));
      else
        *out = json_integer((json_int_t)json_array_size(v[0]));
      break;
    case E_CONCAT: {
      size_t len = 0, i;
      for (i = 0; i < e->nkids; i++) {
        if (!v[i] || json_is_null(v[i]))
          break;
        if (!json_is_string(v[i])) {
          rc = dtx__err(DTX_ETYPE, "$concat only supports strings, not %s",
                        dtx__value_type_name(v[i], DTX__TN_AGG));
          break;
        }
        len += json_string_length(v[i]);
        if (len > DTX__DOC_MAX) { /* 1000 "$s" of 1 MiB: no 1 GB malloc */
          rc = dtx__err(DTX_ELIMIT,
                        "$concat: the result would pass 16 MiB (%zu bytes), "
                        "the limit of a string",
                        DTX__DOC_MAX);
          break;
        }
      }
      if (rc)
        break;
      if (i < e->nkids) {
        *out = json_null();
        break;
      }
      char *s = malloc(len + 1);
      if (!s) {
        rc = dtx__err(DTX_ENOMEM, "out of memory in $concat");
        break;
      }
      len = 0;
      for (i = 0; i < e->nkids; i++) {
        memcpy(s + len, json_string_value(v[i]), json_string_length(v[i]));
        len += json_string_length(v[i]);
      }
      *out = json_stringn_nocheck(s, len);
      free(s);
      break;
    }
    }
    for (size_t i = 0; i < e->nkids; i++)
      json_decref(v[i]);
  }
  if (v != small)
    free(v);
  if (!rc && e->op != E_IFNULL && e->op != E_COND && !*out)
    rc = dtx__err(DTX_ENOMEM, "out of memory evaluating an expression");
  return rc;
}

static int eval(const dtx__expr_t *e, const json_t *doc, json_t **out) {
  *out = NULL;
  switch (e->op) {
  case E_LIT:
    *out = json_incref(e->lit);
    return 0;
  case E_FIELD:
    *out = resolve(doc, e->segs, e->nsegs);
    return 0;
  case E_ARR: {
    json_t *a = json_array();
    for (size_t i = 0; a && i < e->nkids; i++) {
      json_t *x;
      int rc = eval(e->kids[i], doc, &x);
      if (rc) {
        json_decref(a);
        return rc;
      }
      if (json_array_append_new(a, x ? x : json_null())) {
        json_decref(a);
        a = NULL;
      }
    }
    *out = a;
    return a ? 0 : dtx__err(DTX_ENOMEM, "out of memory evaluating");
  }
  case E_OBJ: {
    json_t *o = json_object();
    for (size_t i = 0; o && i < e->nkids; i++) {
      json_t *x;
      int rc = eval(e->kids[i], doc, &x);
      if (rc) {
        json_decref(o);
        return rc;
      }
      if (x && json_object_set_new(o, e->keys[i], x)) {
        json_decref(o);
        o = NULL;
      }
    }
    *out = o;
    return o ? 0 : dtx__err(DTX_ENOMEM, "out of memory evaluating");
  }
  default:
    return eval_op(e, doc, out);
  }
}

int dtx__expr_eval(const dtx__expr_t *e, const json_t *doc, json_t **out) {
  return eval(e, doc, out);
}

/* ---- paths in documents ------------------------------------------------------ */

const json_t *dtx__agg_get_path(const json_t *doc, const char *path) {
  const char *seg = path;
  const json_t *cur = doc;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
    if (!json_is_object(cur))
      return NULL;
    cur = json_object_getn(cur, seg, n);
    if (!cur || !dot)
      return cur;
    seg = dot + 1;
  }
}

/* A shallow copy: a new object holding the same values (shared). */
static json_t *shallow(const json_t *o) {
  json_t *c = json_object();
  if (c && json_object_update((json_t *)c, (json_t *)o)) {
    json_decref(c);
    return NULL;
  }
  return c;
}

static json_t *set_in(const json_t *cur, const char *path, json_t *v,
                      int depth) {
  const char *dot = strchr(path, '.');
  size_t n = dot ? (size_t)(dot - path) : strlen(path);
  if (depth > MAX_DEPTH) {
    json_decref(v);
    return NULL;
  }
  if (json_is_array(cur)) {
    /* Through an array, every object element gets the field. */
    json_t *a = json_array();
    for (size_t i = 0; a && i < json_array_size(cur); i++) {
      const json_t *e = json_array_get(cur, i);
      json_t *ne = json_is_object(e) ? set_in(e, path, json_incref(v),
                                              depth + 1)
                                     : json_incref((json_t *)e);
      if (!ne || json_array_append_new(a, ne)) {
        json_decref(a);
        a = NULL;
      }
    }
    json_decref(v);
    return a;
  }
  json_t *c = json_is_object(cur) ? shallow(cur) : json_object();
  if (!c) {
    json_decref(v);
    return NULL;
  }
  char small[128], *key = n < sizeof small ? small : malloc(n + 1);
  if (!key) {
    json_decref(c);
    json_decref(v);
    return NULL;
  }
  memcpy(key, path, n);
  key[n] = '\0';
  json_t *nv = v;
  if (dot) {
    const json_t *below = json_object_get(c, key);
    nv = set_in(below, dot + 1, v, depth + 1);
    if (!nv)
      goto fail;
  }
  if (!nv) {
    json_object_del(c, key);
  } else if (json_object_set_new(c, key, nv)) {
    goto fail;
  }
  if (key != small)
    free(key);
  return c;
fail:
  if (key != small)
    free(key);
  json_decref(c);
  return NULL;
}

json_t *dtx__agg_set_path(const json_t *doc, const char *path, json_t *v) {
  if (!v) {
    /* Removal: copy on write down to the holder, as set_in does. */
    const char *dot = strrchr(path, '.');
    if (!dot) {
      json_t *c = shallow(doc);
      if (c)
        json_object_del(c, path);
      return c;
    }
    char *parent = strndup(path, (size_t)(dot - path));
    const json_t *h = parent ? dtx__agg_get_path(doc, parent) : NULL;
    json_t *r = NULL;
    if (!parent)
      return NULL;
    if (!json_is_object(h) || !json_object_get(h, dot + 1)) {
      free(parent);
      return json_incref((json_t *)doc);
    }
    json_t *nh = shallow(h);
    if (nh) {
      json_object_del(nh, dot + 1);
      r = set_in(doc, parent, nh, 0);
    }
    free(parent);
    return r;
  }
  return set_in(doc, path, v, 0);
}
