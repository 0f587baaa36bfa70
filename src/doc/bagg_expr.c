/* bagg_expr.c -- aggregation expressions on BSON (bagg.h), the twin of
 * agg_expr.c: the same operators and error details, on views.
 *
 * A value is a dtx__bval_t: a view into the document, into the pipeline's
 * copy of the spec (literals), or into the evaluation's arena (what an
 * operator computes: a number's 8 bytes, an array built by a field path
 * through arrays, an object of expressions).  Nothing is allocated per
 * field of the input document.
 *
 * Numbers keep MongoDB's types (bagg.h): int32 + int32 stays int32 while
 * it fits, then int64; an int64 overflow gives a double; any double makes
 * a double (added in the json_t engine's order: the integers before the
 * first double exactly, the rest as doubles); any Decimal128 makes the
 * whole operation decimal. */
#include "doc/bagg_int.h"
#include "doc/bdec.h"
#include "util/assert.h"
#include "util/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 100

enum {
  E_LIT, E_FIELD, E_ARR, E_OBJ, E_ADD, E_SUB, E_MUL, E_COND, E_EQ, E_NE,
  E_GT, E_GTE, E_LT, E_LTE, E_CMP, E_AND, E_OR, E_NOT, E_IFNULL, E_SIZE,
  E_CONCAT, E_TYPE,
};

struct dtx__bexpr {
  int op;
  dtx__bval_t lit;    /* E_LIT */
  const char **segs;  /* E_FIELD: from the document root */
  size_t nsegs;
  size_t nkids;
  dtx__bexpr_t **kids;
  const char **keys;  /* E_OBJ */
};

static const struct {
  const char *name;
  int op;
  int min, max;
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
    /* BSON only: the json_t engine has no $type expression yet */
    {"$type", E_TYPE, 1, 1},
};

static int nomem(void) {
  return dtx__err(DTX_ENOMEM, "out of memory compiling an expression");
}

static dtx__bexpr_t *node(dtx__arena_t *a, int op) {
  dtx__bexpr_t *e = dtx__arena_alloc(a, sizeof *e);
  if (e)
    e->op = op;
  return e;
}

/* The string of a string value when it holds no NUL (a path or a name). */
static const char *cstr(const dtx__bval_t *v) {
  uint32_t n;
  if (v->type != BSON_TYPE_UTF8)
    return NULL;
  const char *s = dtx__bval_str(v, &n);
  return strlen(s) == n ? s : NULL;
}

static int compile(const dtx__bval_t *spec, const char *where, int depth,
                   dtx__arena_t *a, dtx__bexpr_t **out);

static int compile_path(const char *s, const char *where, dtx__arena_t *a,
                        dtx__bexpr_t **out) {
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
  dtx__bexpr_t *e = node(a, E_FIELD);
  if (!e)
    return nomem();
  if (*path) {
    int rc = dtx__path_check(path, DTX_EBADQUERY);
    if (rc)
      return dtx__err_wrap(rc, "%s: field path '%s'", where, s);
    size_t n = 1, len = strlen(path);
    for (size_t i = 0; i < len; i++)
      n += path[i] == '.';
    char *buf = dtx__arena_strndup(a, path, len);
    if (!buf || !(e->segs = dtx__arena_alloc(a, n * sizeof *e->segs)))
      return nomem();
    e->segs[e->nsegs++] = buf;
    for (size_t i = 0; i < len; i++)
      if (buf[i] == '.') {
        buf[i] = '\0';
        e->segs[e->nsegs++] = buf + i + 1;
      }
  }
  *out = e;
  return 0;
}

/* The kids of e: every element of arr (an array or document view). */
static int compile_kids(dtx__bexpr_t *e, const dtx__bval_t *arr,
                        const char *where, int depth, dtx__arena_t *a,
                        int keys) {
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(arr, &len);
  dtx__belem_t el;
  size_t n = 0;
  while (dtx__belem_next(d, len, &off, &el))
    n++;
  if (n && !(e->kids = dtx__arena_alloc(a, n * sizeof *e->kids)))
    return nomem();
  if (n && keys && !(e->keys = dtx__arena_alloc(a, n * sizeof *e->keys)))
    return nomem();
  off = 0;
  while (dtx__belem_next(d, len, &off, &el)) {
    int rc;
    if (keys) {
      if (el.key[0] == '$' || strchr(el.key, '.'))
        return dtx__err(DTX_EBADQUERY,
                        "%s: field name '%s' in an expression object may "
                        "not start with '$' or contain '.'", where, el.key);
      e->keys[e->nkids] = el.key;
    }
    if ((rc = compile(&el.v, where, depth + 1, a, &e->kids[e->nkids])))
      return rc;
    e->nkids++;
  }
  return 0;
}

static int compile_op(const char *name, const dtx__bval_t *arg,
                      const char *where, int depth, dtx__arena_t *a,
                      dtx__bexpr_t **out) {
  if (!strcmp(name, "$literal")) {
    dtx__bexpr_t *e = node(a, E_LIT);
    if (!e)
      return nomem();
    e->lit = *arg;
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
  dtx__bexpr_t *e = node(a, ops[t].op);
  if (!e)
    return nomem();
  int rc = 0;
  if (ops[t].op == E_COND && arg->type == BSON_TYPE_DOCUMENT) {
    static const char *const parts[] = {"if", "then", "else"};
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(arg, &len);
    dtx__belem_t el;
    size_t n = 0;
    while (dtx__belem_next(d, len, &off, &el))
      n++;
    if (n != 3)
      return dtx__err(DTX_EBADQUERY, "%s: $cond needs exactly if, then and "
                                     "else", where);
    if (!(e->kids = dtx__arena_alloc(a, 3 * sizeof *e->kids)))
      return nomem();
    for (int i = 0; i < 3; i++) {
      if (!dtx__belem_find(d, len, parts[i], strlen(parts[i]), &el))
        return dtx__err(DTX_EBADQUERY, "%s: $cond is missing '%s'", where,
                        parts[i]);
      if ((rc = compile(&el.v, where, depth + 1, a, &e->kids[i])))
        return rc;
      e->nkids++;
    }
  } else if (arg->type == BSON_TYPE_ARRAY) {
    if ((rc = compile_kids(e, arg, where, depth, a, 0)))
      return rc;
  } else {
    /* One argument given bare: {$size: "$a"} is {$size: ["$a"]}. */
    if (!(e->kids = dtx__arena_alloc(a, sizeof *e->kids)))
      return nomem();
    if ((rc = compile(arg, where, depth + 1, a, &e->kids[0])))
      return rc;
    e->nkids = 1;
  }
  if ((int)e->nkids < ops[t].min ||
      (ops[t].max >= 0 && (int)e->nkids > ops[t].max))
    return dtx__err(DTX_EBADQUERY, "%s: %s takes %s%d argument%s, not %zu",
                    where, name, ops[t].max < 0 ? "at least " : "",
                    ops[t].min, ops[t].min == 1 ? "" : "s", e->nkids);
  *out = e;
  return 0;
}

static int compile(const dtx__bval_t *spec, const char *where, int depth,
                   dtx__arena_t *a, dtx__bexpr_t **out) {
  *out = NULL;
  if (depth > MAX_DEPTH)
    return dtx__err(DTX_EBADQUERY, "%s: expression nested deeper than %d",
                    where, MAX_DEPTH);
  const char *s = cstr(spec);
  if (s && s[0] == '$')
    return compile_path(s, where, a, out);
  if (spec->type == BSON_TYPE_ARRAY) {
    dtx__bexpr_t *e = node(a, E_ARR);
    int rc = e ? compile_kids(e, spec, where, depth, a, 0) : nomem();
    *out = rc ? NULL : e;
    return rc;
  }
  if (spec->type == BSON_TYPE_DOCUMENT) {
    uint32_t len, off = 0, n = 0;
    const uint8_t *d = dtx__bval_doc(spec, &len);
    dtx__belem_t el, first;
    while (dtx__belem_next(d, len, &off, &el))
      if (n++ == 0)
        first = el;
    if (n > 0) {
      if (first.key[0] == '$') {
        if (n != 1)
          return dtx__err(DTX_EBADQUERY,
                          "%s: an expression object must have exactly one "
                          "$operator field (found %s and more)", where,
                          first.key);
        return compile_op(first.key, &first.v, where, depth, a, out);
      }
      dtx__bexpr_t *e = node(a, E_OBJ);
      int rc = e ? compile_kids(e, spec, where, depth, a, 1) : nomem();
      *out = rc ? NULL : e;
      return rc;
    }
  }
  dtx__bexpr_t *e = node(a, E_LIT);
  if (!e)
    return nomem();
  e->lit = *spec;
  *out = e;
  return 0;
}

int dtx__bexpr_compile(const dtx__bval_t *spec, const char *where,
                       dtx__arena_t *a, dtx__bexpr_t **out) {
  return compile(spec, where, 0, a, out);
}

/* ---- values ------------------------------------------------------------- */

int dtx__bagg_truthy(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_EOD:
  case BSON_TYPE_NULL:
  case BSON_TYPE_UNDEFINED:
    return 0;
  case BSON_TYPE_BOOL:
    return dtx__bval_bool(v);
  case BSON_TYPE_INT32:
    return dtx__bval_int32(v) != 0;
  case BSON_TYPE_INT64:
    return dtx__bval_int64(v) != 0;
  case BSON_TYPE_DOUBLE:
    return dtx__bval_double(v) != 0;
  case BSON_TYPE_DECIMAL128:
    return !dtx__dec_is_zero(dtx__bval_dec(v));
  default:
    return 1;
  }
}

const char *dtx__bagg_type_name(const dtx__bval_t *v) {
  return dtx__btype_name(v->type);
}

/* A value of type t whose payload is p[0..n), copied into the arena. */
static int mk(dtx__bx_t *x, bson_type_t t, const void *p, uint32_t n,
              dtx__bval_t *out) {
  uint8_t *d = dtx__arena_alloc(x->a, n ? n : 1);
  if (!d)
    return dtx__err(DTX_ENOMEM, "out of memory evaluating an expression");
  memcpy(d, p, n);
  out->type = t;
  out->len = n;
  out->data = d;
  return 0;
}

static int mk_i32(dtx__bx_t *x, int32_t v, dtx__bval_t *out) {
  uint32_t u = (uint32_t)v;
  uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
                  (uint8_t)(u >> 24)};
  return mk(x, BSON_TYPE_INT32, b, 4, out);
}

static int mk_i64(dtx__bx_t *x, bson_type_t t, int64_t v, dtx__bval_t *out) {
  uint64_t u = (uint64_t)v;
  uint8_t b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (uint8_t)(u >> (8 * i));
  return mk(x, t, b, 8, out);
}

static int mk_dbl(dtx__bx_t *x, double d, dtx__bval_t *out) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return mk_i64(x, BSON_TYPE_DOUBLE, (int64_t)u, out);
}

static int mk_dec(dtx__bx_t *x, bson_decimal128_t d, dtx__bval_t *out) {
  uint8_t b[16];
  for (int i = 0; i < 8; i++) {
    b[i] = (uint8_t)(d.low >> (8 * i));
    b[8 + i] = (uint8_t)(d.high >> (8 * i));
  }
  return mk(x, BSON_TYPE_DECIMAL128, b, 16, out);
}

static int mk_bool(dtx__bx_t *x, int v, dtx__bval_t *out) {
  uint8_t b = v ? 1 : 0;
  return mk(x, BSON_TYPE_BOOL, &b, 1, out);
}

static const dtx__bval_t NULLV = {BSON_TYPE_NULL, 0, NULL};

/* An int64 as the narrowest of int32 and int64 (MongoDB's results). */
static int mk_int(dtx__bx_t *x, int64_t v, int wide, dtx__bval_t *out) {
  if (!wide && v >= INT32_MIN && v <= INT32_MAX)
    return mk_i32(x, (int32_t)v, out);
  return mk_i64(x, BSON_TYPE_INT64, v, out);
}

/* A built document or array (b's bytes from start) into the arena. */
static int mk_doc(dtx__bx_t *x, bson_type_t t, dtx__buf_t *b,
                  dtx__bval_t *out) {
  int rc = b->oom ? dtx__err(DTX_ENOMEM, "out of memory evaluating")
                  : mk(x, t, b->p, (uint32_t)b->n, out);
  free(b->p);
  return rc;
}

size_t dtx__bw_begin(dtx__buf_t *b) {
  size_t s = b->n;
  dtx__buf_put(b, "\0\0\0\0", 4);
  return s;
}

void dtx__bw_end(dtx__buf_t *b, size_t start) {
  dtx__buf_put(b, "", 1);
  if (b->oom)
    return;
  uint32_t n = (uint32_t)(b->n - start);
  uint8_t l[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                  (uint8_t)(n >> 24)};
  memcpy(b->p + start, l, 4);
}

void dtx__bw_val(dtx__buf_t *b, const char *key, size_t keylen,
                 const dtx__bval_t *v) {
  DTX_ASSERT(v->type != BSON_TYPE_EOD, "bagg: no missing value is written");
  uint8_t t = (uint8_t)v->type;
  dtx__buf_put(b, &t, 1);
  dtx__buf_put(b, key, keylen);
  dtx__buf_put(b, "", 1);
  dtx__buf_put(b, v->data, v->len);
}

void dtx__bw_idx(dtx__buf_t *b, size_t i, const dtx__bval_t *v) {
  char k[24];
  dtx__bw_val(b, k, dtx__itoa((long long)i, k), v);
}

/* ---- evaluation ---------------------------------------------------------- */

/* A field path through documents, and through arrays element by element,
 * as agg_expr.c's resolve. */
static int resolve(dtx__bx_t *x, const dtx__bval_t *cur,
                   const char *const *segs, size_t n, dtx__bval_t *out) {
  out->type = BSON_TYPE_EOD;
  if (n == 0) {
    *out = *cur;
    return 0;
  }
  uint32_t len;
  if (cur->type == BSON_TYPE_DOCUMENT) {
    dtx__belem_t el;
    const uint8_t *d = dtx__bval_doc(cur, &len);
    if (!dtx__belem_find(d, len, segs[0], strlen(segs[0]), &el))
      return 0;
    return resolve(x, &el.v, segs + 1, n - 1, out);
  }
  if (cur->type != BSON_TYPE_ARRAY)
    return 0;
  dtx__buf_t b = {0};
  size_t st = dtx__bw_begin(&b), k = 0;
  uint32_t off = 0;
  const uint8_t *d = dtx__bval_doc(cur, &len);
  dtx__belem_t el;
  while (dtx__belem_next(d, len, &off, &el)) {
    if (el.v.type != BSON_TYPE_DOCUMENT && el.v.type != BSON_TYPE_ARRAY)
      continue;
    dtx__bval_t v;
    int rc = resolve(x, &el.v, segs, n, &v);
    if (rc) {
      free(b.p);
      return rc;
    }
    if (v.type != BSON_TYPE_EOD)
      dtx__bw_idx(&b, k++, &v);
  }
  dtx__bw_end(&b, st);
  return mk_doc(x, BSON_TYPE_ARRAY, &b, out);
}

/* Missing sorts below null; otherwise MongoDB's order. */
static int agg_cmp(const dtx__bval_t *a, const dtx__bval_t *b) {
  int ma = a->type == BSON_TYPE_EOD, mb = b->type == BSON_TYPE_EOD;
  if (ma || mb)
    return mb - ma;
  return dtx__bval_cmp(a, b);
}

static int eval(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *out);

/* A number in one of the four kinds, ordered by promotion. */
enum { N_I32, N_I64, N_DBL, N_DEC };

static int kind(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_INT32: return N_I32;
  case BSON_TYPE_INT64: return N_I64;
  case BSON_TYPE_DOUBLE: return N_DBL;
  default: return N_DEC;
  }
}

static int64_t as_i64(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_INT32 ? dtx__bval_int32(v)
                                    : dtx__bval_int64(v);
}

static double as_dbl(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_DOUBLE: return dtx__bval_double(v);
  case BSON_TYPE_DECIMAL128: return dtx__dec_to_double(dtx__bval_dec(v));
  default: return (double)as_i64(v);
  }
}

static bson_decimal128_t as_dec(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_DOUBLE: return dtx__dec_from_double(dtx__bval_double(v));
  case BSON_TYPE_DECIMAL128: return dtx__bval_dec(v);
  default: return dtx__dec_from_i64(as_i64(v));
  }
}

/* n numbers v[0..n) summed (mul 0) or multiplied (mul 1) with MongoDB's
 * promotion, into *out. */
static int fold(dtx__bx_t *x, const dtx__bval_t *v, size_t n, int mul,
                dtx__bval_t *out) {
  int top = N_I32;
  for (size_t i = 0; i < n; i++)
    if (kind(&v[i]) > top)
      top = kind(&v[i]);
  if (top == N_DEC) {
    bson_decimal128_t acc = dtx__dec_from_i64(mul), r;
    for (size_t i = 0; i < n; i++) {
      if (mul)
        dtx__dec_mul(acc, as_dec(&v[i]), &r);
      else
        dtx__dec_add(acc, as_dec(&v[i]), &r);
      acc = r;
    }
    return mk_dec(x, acc, out);
  }
  int64_t iacc = mul, r;
  double dacc = 0;
  int real = 0, wide = 0;
  for (size_t i = 0; i < n; i++) {
    if (!real && v[i].type != BSON_TYPE_DOUBLE) {
      wide |= v[i].type == BSON_TYPE_INT64;
      if (!(mul ? __builtin_mul_overflow(iacc, as_i64(&v[i]), &r)
                : __builtin_add_overflow(iacc, as_i64(&v[i]), &r))) {
        iacc = r;
        continue;
      }
      /* MongoDB: an int64 overflow goes on as a double. */
      real = 1;
      dacc = (double)iacc;
    } else if (!real) {
      real = 1;
      dacc = (double)iacc;
    }
    double d = as_dbl(&v[i]);
    dacc = mul ? dacc * d : dacc + d;
  }
  return real ? mk_dbl(x, dacc, out) : mk_int(x, iacc, wide, out);
}

static int is_date(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_DATE_TIME;
}

/* A number as whole milliseconds for date arithmetic (doubles and
 * decimals round to nearest, as MongoDB does). */
static int64_t as_ms(const dtx__bval_t *v) {
  double d = as_dbl(v);
  if (v->type == BSON_TYPE_INT32 || v->type == BSON_TYPE_INT64)
    return as_i64(v);
  if (!(d > -9.2e18 && d < 9.2e18))
    return 0; /* NaN or out of range: no date to give; MongoDB errors */
  return (int64_t)llround(d);
}

/* $add, $subtract and $multiply. */
static int arith(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *v,
                 dtx__bval_t *out) {
  const char *name = e->op == E_ADD ? "$add" : e->op == E_SUB ? "$subtract"
                                                              : "$multiply";
  size_t dates = 0, di = 0;
  for (size_t i = 0; i < e->nkids; i++) {
    if (v[i].type == BSON_TYPE_EOD || v[i].type == BSON_TYPE_NULL ||
        v[i].type == BSON_TYPE_UNDEFINED) {
      *out = NULLV;
      return 0;
    }
    if (is_date(&v[i]) && e->op != E_MUL) {
      dates++;
      di = i;
      continue;
    }
    if (!dtx__bval_is_number(&v[i]))
      return dtx__err(DTX_ETYPE, "%s only supports numeric types, not %s",
                      name, dtx__bagg_type_name(&v[i]));
  }
  if (e->op == E_SUB) {
    if (dates == 2)
      return mk_i64(x, BSON_TYPE_INT64,
                    (int64_t)((uint64_t)dtx__bval_int64(&v[0]) -
                              (uint64_t)dtx__bval_int64(&v[1])), out);
    if (dates == 1 && di == 1)
      return dtx__err(DTX_ETYPE, "$subtract: cannot subtract a date from "
                                 "a number");
    if (dates == 1)
      return mk_i64(x, BSON_TYPE_DATE_TIME,
                    (int64_t)((uint64_t)dtx__bval_int64(&v[0]) -
                              (uint64_t)as_ms(&v[1])), out);
    /* a - b as a + (-b), keeping the kinds: negate b in its own type */
    dtx__bval_t ab[2] = {v[0], v[1]};
    int64_t r;
    if (kind(&v[0]) <= N_I64 && kind(&v[1]) <= N_I64) {
      if (__builtin_sub_overflow(as_i64(&v[0]), as_i64(&v[1]), &r))
        return mk_dbl(x, as_dbl(&v[0]) - as_dbl(&v[1]), out);
      return mk_int(x, r, kind(&v[0]) == N_I64 || kind(&v[1]) == N_I64,
                    out);
    }
    if (kind(&v[0]) == N_DEC || kind(&v[1]) == N_DEC) {
      bson_decimal128_t d;
      dtx__dec_sub(as_dec(&ab[0]), as_dec(&ab[1]), &d);
      return mk_dec(x, d, out);
    }
    return mk_dbl(x, as_dbl(&v[0]) - as_dbl(&v[1]), out);
  }
  if (dates > 1)
    return dtx__err(DTX_ETYPE, "$add: only one date allowed in an $add "
                               "expression");
  if (dates == 1) {
    /* date + numbers: the numbers' sum (in ms) added to the date */
    int64_t ms = dtx__bval_int64(&v[di]);
    for (size_t i = 0; i < e->nkids; i++)
      if (i != di)
        ms = (int64_t)((uint64_t)ms + (uint64_t)as_ms(&v[i]));
    return mk_i64(x, BSON_TYPE_DATE_TIME, ms, out);
  }
  return fold(x, v, e->nkids, e->op == E_MUL, out);
}

static int concat(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *v,
                  dtx__bval_t *out) {
  size_t len = 0, i;
  uint32_t n;
  for (i = 0; i < e->nkids; i++) {
    if (v[i].type == BSON_TYPE_EOD || v[i].type == BSON_TYPE_NULL ||
        v[i].type == BSON_TYPE_UNDEFINED) {
      *out = NULLV;
      return 0;
    }
    if (v[i].type != BSON_TYPE_UTF8)
      return dtx__err(DTX_ETYPE, "$concat only supports strings, not %s",
                      dtx__bagg_type_name(&v[i]));
    dtx__bval_str(&v[i], &n);
    len += n;
    if (len > DTX__DOC_MAX)
      return dtx__err(DTX_ELIMIT,
                      "$concat: the result would pass 16 MiB (%zu bytes), "
                      "the limit of a string", DTX__DOC_MAX);
  }
  uint8_t *d = dtx__arena_alloc(x->a, 4 + len + 1);
  if (!d)
    return dtx__err(DTX_ENOMEM, "out of memory in $concat");
  uint32_t bl = (uint32_t)len + 1, off = 4;
  for (int k = 0; k < 4; k++)
    d[k] = (uint8_t)(bl >> (8 * k));
  for (i = 0; i < e->nkids; i++) {
    const char *s = dtx__bval_str(&v[i], &n);
    memcpy(d + off, s, n);
    off += n;
  }
  d[off] = 0;
  out->type = BSON_TYPE_UTF8;
  out->len = off + 1;
  out->data = d;
  return 0;
}

static int eval_op(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *out) {
  int rc = 0, c;
  dtx__bval_t t;
  switch (e->op) {
  case E_COND:
    if ((rc = eval(e->kids[0], x, &t)))
      return rc;
    return eval(e->kids[dtx__bagg_truthy(&t) ? 1 : 2], x, out);
  case E_AND:
  case E_OR: {
    int want = e->op == E_OR, res = !want;
    for (size_t i = 0; i < e->nkids; i++) {
      if ((rc = eval(e->kids[i], x, &t)))
        return rc;
      if (dtx__bagg_truthy(&t) == want) {
        res = want;
        break;
      }
    }
    return mk_bool(x, res, out);
  }
  case E_IFNULL:
    for (size_t i = 0; i < e->nkids; i++) {
      if ((rc = eval(e->kids[i], x, &t)))
        return rc;
      if ((t.type != BSON_TYPE_EOD && t.type != BSON_TYPE_NULL &&
           t.type != BSON_TYPE_UNDEFINED) || i + 1 == e->nkids) {
        *out = t;
        return 0;
      }
    }
    return 0;
  default:
    break;
  }
  dtx__bval_t small[4], *v = small;
  if (e->nkids > 4 &&
      !(v = dtx__arena_alloc(x->a, e->nkids * sizeof *v)))
    return dtx__err(DTX_ENOMEM, "out of memory evaluating an expression");
  for (size_t i = 0; i < e->nkids; i++)
    if ((rc = eval(e->kids[i], x, &v[i])))
      return rc;
  switch (e->op) {
  case E_ADD:
  case E_SUB:
  case E_MUL:
    return arith(e, x, v, out);
  case E_EQ: case E_NE: case E_GT: case E_GTE: case E_LT: case E_LTE:
    c = agg_cmp(&v[0], &v[1]);
    return mk_bool(x, e->op == E_EQ    ? c == 0
                      : e->op == E_NE  ? c != 0
                      : e->op == E_GT  ? c > 0
                      : e->op == E_GTE ? c >= 0
                      : e->op == E_LT  ? c < 0
                                       : c <= 0, out);
  case E_CMP:
    c = agg_cmp(&v[0], &v[1]);
    return mk_i32(x, c < 0 ? -1 : c > 0, out);
  case E_NOT:
    return mk_bool(x, !dtx__bagg_truthy(&v[0]), out);
  case E_SIZE: {
    if (v[0].type != BSON_TYPE_ARRAY)
      return dtx__err(DTX_ETYPE,
                      "$size: the argument must be an array, not %s",
                      dtx__bagg_type_name(&v[0]));
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(&v[0], &len);
    dtx__belem_t el;
    int32_t n = 0;
    while (dtx__belem_next(d, len, &off, &el))
      n++;
    return mk_i32(x, n, out);
  }
  case E_CONCAT:
    return concat(e, x, v, out);
  case E_TYPE: {
    const char *s = dtx__btype_name(v[0].type);
    size_t n = strlen(s);
    uint8_t *d = dtx__arena_alloc(x->a, 4 + n + 1);
    if (!d)
      return dtx__err(DTX_ENOMEM, "out of memory in $type");
    for (int k = 0; k < 4; k++)
      d[k] = (uint8_t)((n + 1) >> (8 * k));
    memcpy(d + 4, s, n + 1);
    out->type = BSON_TYPE_UTF8;
    out->len = (uint32_t)(4 + n + 1);
    out->data = d;
    return 0;
  }
  }
  DTX_ASSERT(0, "bagg: every operator is evaluated");
  return 0;
}

static int eval(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *out) {
  out->type = BSON_TYPE_EOD;
  switch (e->op) {
  case E_LIT:
    *out = e->lit;
    return 0;
  case E_FIELD: {
    dtx__bval_t root = dtx__bval_of_doc(x->doc, x->len);
    return resolve(x, &root, e->segs, e->nsegs, out);
  }
  case E_ARR:
  case E_OBJ: {
    dtx__buf_t b = {0};
    size_t st = dtx__bw_begin(&b), k = 0;
    for (size_t i = 0; i < e->nkids; i++) {
      dtx__bval_t v;
      int rc = eval(e->kids[i], x, &v);
      if (rc) {
        free(b.p);
        return rc;
      }
      if (e->op == E_ARR)
        dtx__bw_idx(&b, k++, v.type ? &v : &NULLV);
      else if (v.type)
        dtx__bw_val(&b, e->keys[i], strlen(e->keys[i]), &v);
    }
    dtx__bw_end(&b, st);
    return mk_doc(x, e->op == E_ARR ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT,
                  &b, out);
  }
  default:
    return eval_op(e, x, out);
  }
}

int dtx__bexpr_eval(const dtx__bexpr_t *e, dtx__bx_t *x, dtx__bval_t *out) {
  return eval(e, x, out);
}

/* ---- paths in documents -------------------------------------------------- */

dtx__bval_t dtx__bagg_get_path(const uint8_t *doc, uint32_t len,
                               const char *path) {
  return dtx__bpath_get(doc, len, path);
}

static void set_in(dtx__buf_t *b, const dtx__bval_t *cur, const char *path,
                   const dtx__bval_t *v);

/* Writes the document cur (or a new one when cur is not a document) with
 * path set to v (v NULL: removed). */
static void set_doc(dtx__buf_t *b, const dtx__bval_t *cur, const char *path,
                    const dtx__bval_t *v) {
  const char *dot = strchr(path, '.');
  size_t n = dot ? (size_t)(dot - path) : strlen(path);
  size_t st = dtx__bw_begin(b);
  int done = 0;
  if (cur && cur->type == BSON_TYPE_DOCUMENT) {
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(cur, &len);
    dtx__belem_t el;
    while (dtx__belem_next(d, len, &off, &el)) {
      if (done || el.keylen != n || memcmp(el.key, path, n)) {
        dtx__bw_val(b, el.key, el.keylen, &el.v);
        continue;
      }
      done = 1;
      if (!dot) {
        if (v)
          dtx__bw_val(b, el.key, el.keylen, v);
        continue;
      }
      /* the value below, rewritten in place (its position kept) */
      if (!v && el.v.type != BSON_TYPE_DOCUMENT) {
        dtx__bw_val(b, el.key, el.keylen, &el.v);
        continue;
      }
      uint8_t t = (uint8_t)(el.v.type == BSON_TYPE_ARRAY && v
                                ? BSON_TYPE_ARRAY : BSON_TYPE_DOCUMENT);
      dtx__buf_put(b, &t, 1);
      dtx__buf_put(b, el.key, el.keylen + 1);
      set_in(b, &el.v, dot + 1, v);
    }
  }
  if (!done && v) {
    uint8_t t = dot ? BSON_TYPE_DOCUMENT : (uint8_t)v->type;
    dtx__buf_put(b, &t, 1);
    dtx__buf_put(b, path, n);
    dtx__buf_put(b, "", 1);
    if (dot)
      set_doc(b, NULL, dot + 1, v);
    else
      dtx__buf_put(b, v->data, v->len);
  }
  dtx__bw_end(b, st);
}

/* The payload of cur's replacement: through an array each document
 * element gets the field (other elements stay); else a document. */
static void set_in(dtx__buf_t *b, const dtx__bval_t *cur, const char *path,
                   const dtx__bval_t *v) {
  if (v && cur->type == BSON_TYPE_ARRAY) {
    size_t st = dtx__bw_begin(b);
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(cur, &len);
    dtx__belem_t el;
    while (dtx__belem_next(d, len, &off, &el)) {
      if (el.v.type != BSON_TYPE_DOCUMENT) {
        dtx__bw_val(b, el.key, el.keylen, &el.v);
        continue;
      }
      uint8_t t = BSON_TYPE_DOCUMENT;
      dtx__buf_put(b, &t, 1);
      dtx__buf_put(b, el.key, el.keylen + 1);
      set_doc(b, &el.v, path, v);
    }
    dtx__bw_end(b, st);
    return;
  }
  set_doc(b, cur, path, v);
}

void dtx__bw_set_path(dtx__buf_t *b, const uint8_t *doc, uint32_t len,
                      const char *path, const dtx__bval_t *v) {
  dtx__bval_t root = dtx__bval_of_doc(doc, len);
  set_doc(b, &root, path, v);
}
