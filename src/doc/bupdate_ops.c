/* bupdate_ops.c -- what each operator writes at one slot, on BSON.
 *
 * The writer (bupdate_apply.c) calls dtx__bupd_put with the slot's name
 * and current value; the operator writes the slot's new element (or
 * nothing, for $unset in an object).  Behaviour per operator as
 * update_ops.c, with MongoDB's number types:
 *  - $inc/$mul: Decimal128 with a Decimal128 on either side; else double
 *    with a double; else int64 with an int64, overflow DTX_EOVERFLOW;
 *    int32 with int32 stays int32 and becomes int64 when it overflows.
 *    A missing field: $inc writes the operand, $mul a zero of the
 *    operand's type.  A double that overflows becomes an infinity, as
 *    MongoDB stores it (the json_t engine cannot hold one and refuses).
 *  - $bit: int32 and int64 only; int64 if either side is.
 *  - $currentDate: a Date (ms), or a Timestamp (seconds, ordinal).
 *  - arrays ($push $addToSet $pull $pullAll $pop): the new array is
 *    written whole from views of the old elements and the operands.
 */
#include "doc/bdec.h"
#include "doc/bupdate_int.h"
#include "util/assert.h"
#include "util/err.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- compile: $push / $addToSet ------------------------------------------ */

static int int_mod(const bop_t *op, const char *name, const dtx__bval_t *v,
                   int64_t *out) {
  if (v->type == BSON_TYPE_INT32) {
    *out = dtx__bval_int32(v);
    return 0;
  }
  if (v->type == BSON_TYPE_INT64) {
    *out = dtx__bval_int64(v);
    return 0;
  }
  if (v->type == BSON_TYPE_DOUBLE) {
    double d = dtx__bval_double(v);
    if (d > -9.2e18 && d < 9.2e18 && d == (double)(int64_t)d) {
      *out = (int64_t)d;
      return 0;
    }
  }
  return dtx__err(DTX_EBADUPDATE, "%s: %s at '%s' must be an integer",
                  op->opname, name, op->p.path);
}

static int is_unit(const dtx__bval_t *v, int *dir) {
  double d;
  switch ((int)v->type) {
  case BSON_TYPE_INT32:
    d = dtx__bval_int32(v);
    break;
  case BSON_TYPE_INT64:
    d = (double)dtx__bval_int64(v);
    break;
  case BSON_TYPE_DOUBLE:
    d = dtx__bval_double(v);
    break;
  default:
    return 0;
  }
  if (d != 1 && d != -1)
    return 0;
  *dir = d < 0 ? -1 : 1;
  return 1;
}

static int compile_sort(bop_t *op, const dtx__bval_t *v) {
  dtx__belem_t e;
  uint32_t off = 0;
  int dir;
  if (is_unit(v, &dir)) {
    op->sort = 1;
    op->sort_dir = dir;
    return 0;
  }
  if (v->type != BSON_TYPE_DOCUMENT || v->len <= 5)
    return dtx__err(DTX_EBADUPDATE,
                    "$push: $sort at '%s' must be 1, -1 or a non-empty "
                    "object of field: 1|-1",
                    op->p.path);
  while (dtx__belem_next(v->data, v->len, &off, &e)) {
    if (dtx__path_check(e.key, DTX_EBADUPDATE))
      return dtx__err_wrap(DTX_EBADUPDATE, "$push: $sort at '%s'", op->p.path);
    if (!is_unit(&e.v, &dir))
      return dtx__err(DTX_EBADUPDATE,
                      "$push: $sort direction of '%s' at '%s' must be 1 or "
                      "-1",
                      e.key, op->p.path);
  }
  op->sort = 2;
  op->sortspec = *v;
  return 0;
}

int dtx__bupd_compile_push(bop_t *op, const dtx__bval_t *v) {
  dtx__belem_t e, each;
  uint32_t off = 0;
  int rc;
  if (v->type != BSON_TYPE_DOCUMENT ||
      !dtx__belem_find(v->data, v->len, "$each", 5, &each)) {
    op->single = 1;
    op->vdepth = 1 + dtx__bupd_vdepth(v);
    return 0;
  }
  while (dtx__belem_next(v->data, v->len, &off, &e)) {
    if (!strcmp(e.key, "$each"))
      continue;
    if (op->kind == OP_PUSH && !strcmp(e.key, "$slice")) {
      if ((rc = int_mod(op, e.key, &e.v, &op->slice)))
        return rc;
      op->has_slice = 1;
    } else if (op->kind == OP_PUSH && !strcmp(e.key, "$position")) {
      if ((rc = int_mod(op, e.key, &e.v, &op->position)))
        return rc;
      op->has_position = 1;
    } else if (op->kind == OP_PUSH && !strcmp(e.key, "$sort")) {
      if ((rc = compile_sort(op, &e.v)))
        return rc;
    } else {
      return dtx__err(DTX_EBADUPDATE, "%s: unrecognized clause '%s' at '%s'",
                      op->opname, e.key, op->p.path);
    }
  }
  if (each.v.type != BSON_TYPE_ARRAY)
    return dtx__err(DTX_EBADUPDATE, "%s: $each must be an array at '%s'",
                    op->opname, op->p.path);
  op->arg = each.v;
  op->vdepth = dtx__bupd_vdepth(&each.v);
  return 0;
}

/* ---- arithmetic ---------------------------------------------------------- */

static bson_decimal128_t to_dec(const dtx__bval_t *v) {
  switch ((int)v->type) {
  case BSON_TYPE_INT32:
    return dtx__dec_from_i64(dtx__bval_int32(v));
  case BSON_TYPE_INT64:
    return dtx__dec_from_i64(dtx__bval_int64(v));
  case BSON_TYPE_DOUBLE:
    return dtx__dec_from_double(dtx__bval_double(v));
  default:
    return dtx__bval_dec(v);
  }
}

static double to_double(const dtx__bval_t *v) {
  switch ((int)v->type) {
  case BSON_TYPE_INT32:
    return dtx__bval_int32(v);
  case BSON_TYPE_INT64:
    return (double)dtx__bval_int64(v);
  default:
    return dtx__bval_double(v);
  }
}

static int64_t to_i64(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_INT32 ? dtx__bval_int32(v) : dtx__bval_int64(v);
}

static void put_dec(dtx__bwb_t *b, const char *key, size_t klen,
                    bson_decimal128_t d) {
  uint64_t lo = BSON_UINT64_TO_LE(d.low), hi = BSON_UINT64_TO_LE(d.high);
  dtx__bw_key(b, BSON_TYPE_DECIMAL128, key, klen);
  dtx__bwb_put(b, &lo, 8);
  dtx__bwb_put(b, &hi, 8);
}

static int put_arith(bwctx_t *w, const btgt_t *t, const char *key, size_t klen,
                     const dtx__bval_t *cur) {
  const bop_t *op = t->op;
  const dtx__bval_t *arg = &op->arg;
  int mul = op->kind == OP_MUL;
  if (!cur) {
    if (!mul) {
      dtx__bw_elem(&w->b, key, klen, arg);
      return 0;
    }
    switch ((int)arg->type) {
    case BSON_TYPE_INT32:
      dtx__bw_i32(&w->b, key, klen, 0);
      break;
    case BSON_TYPE_INT64:
      dtx__bw_i64(&w->b, key, klen, 0);
      break;
    case BSON_TYPE_DOUBLE:
      dtx__bw_double(&w->b, key, klen, 0.0);
      break;
    default:
      put_dec(&w->b, key, klen, dtx__dec_from_i64(0));
    }
    return 0;
  }
  if (!dtx__bval_is_number(cur))
    return dtx__err(DTX_ETYPE, "%s: cannot %s non-numeric value at '%s' (%s)",
                    op->opname, mul ? "multiply" : "increment", t->path,
                    dtx__bupd_tname(cur->type));
  if (cur->type == BSON_TYPE_DECIMAL128 || arg->type == BSON_TYPE_DECIMAL128) {
    bson_decimal128_t r;
    if (mul)
      dtx__dec_mul(to_dec(cur), to_dec(arg), &r);
    else
      dtx__dec_add(to_dec(cur), to_dec(arg), &r);
    put_dec(&w->b, key, klen, r);
    return 0;
  }
  if (cur->type == BSON_TYPE_DOUBLE || arg->type == BSON_TYPE_DOUBLE) {
    double a = to_double(cur), b = to_double(arg);
    dtx__bw_double(&w->b, key, klen, mul ? a * b : a + b);
    return 0;
  }
  if (cur->type == BSON_TYPE_INT32 && arg->type == BSON_TYPE_INT32) {
    int32_t r32, a = dtx__bval_int32(cur), b = dtx__bval_int32(arg);
    if (!(mul ? __builtin_mul_overflow(a, b, &r32)
              : __builtin_add_overflow(a, b, &r32))) {
      dtx__bw_i32(&w->b, key, klen, r32);
      return 0;
    }
    /* MongoDB promotes an int32 result that overflows to int64; int32
     * inputs always fit there. */
  }
  int64_t r, a = to_i64(cur), b = to_i64(arg);
  if (mul ? __builtin_mul_overflow(a, b, &r) : __builtin_add_overflow(a, b, &r))
    return dtx__err(DTX_EOVERFLOW, "%s: %lld %c %lld overflows int64 at '%s'",
                    op->opname, (long long)a, mul ? '*' : '+', (long long)b,
                    t->path);
  dtx__bw_i64(&w->b, key, klen, r);
  return 0;
}

static int put_bit(bwctx_t *w, const btgt_t *t, const char *key, size_t klen,
                   const dtx__bval_t *cur) {
  const bop_t *op = t->op;
  dtx__belem_t e;
  uint32_t off = 0;
  if (cur && cur->type != BSON_TYPE_INT32 && cur->type != BSON_TYPE_INT64)
    return dtx__err(DTX_ETYPE,
                    "$bit: cannot apply to a value of non-integral type at "
                    "'%s' (%s)",
                    t->path, dtx__bupd_tname(cur->type));
  int wide = cur && cur->type == BSON_TYPE_INT64;
  uint64_t v = cur ? (uint64_t)to_i64(cur) : 0;
  while (dtx__belem_next(op->arg.data, op->arg.len, &off, &e)) {
    uint64_t b = (uint64_t)to_i64(&e.v);
    wide |= e.v.type == BSON_TYPE_INT64;
    v = e.key[0] == 'a' ? v & b : e.key[0] == 'o' ? v | b : v ^ b;
  }
  if (wide)
    dtx__bw_i64(&w->b, key, klen, (int64_t)v);
  else
    dtx__bw_i32(&w->b, key, klen, (int32_t)(uint32_t)v);
  return 0;
}

/* ---- $currentDate
 * ------------------------------------------------------------- */

static pthread_mutex_t ts_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t ts_secs;
static uint32_t ts_inc;

/* MongoDB's Timestamp: seconds in the high word, an ordinal within the
 * second (this process's) in the low one. */
static uint64_t timestamp_now(int64_t now_ms) {
  int64_t secs = now_ms / 1000;
  pthread_mutex_lock(&ts_lock);
  if (secs > ts_secs) {
    ts_secs = secs;
    ts_inc = 0;
  }
  uint32_t inc = ++ts_inc;
  secs = ts_secs;
  pthread_mutex_unlock(&ts_lock);
  return (uint64_t)secs << 32 | inc;
}

/* ---- arrays
 * ---------------------------------------------------------------------- */

typedef struct vlist {
  dtx__bval_t *v;
  size_t n, cap;
} vlist_t;

static int vl_add(vlist_t *l, const dtx__bval_t *v) {
  if (l->n == l->cap && DTX__GROW(l->v, l->cap, 16))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  l->v[l->n++] = *v;
  return 0;
}

static int vl_add_all(vlist_t *l, const dtx__bval_t *arr) {
  uint32_t off = 0;
  dtx__belem_t e;
  int rc;
  while (dtx__belem_next(arr->data, arr->len, &off, &e))
    if ((rc = vl_add(l, &e.v)))
      return rc;
  return 0;
}

static int contains(const dtx__bval_t *v, size_t n, const dtx__bval_t *x) {
  for (size_t i = 0; i < n; i++)
    if (dtx__bval_cmp(&v[i], x) == 0)
      return 1;
  return 0;
}

static void write_array(dtx__bwb_t *b, const char *key, size_t klen,
                        const dtx__bval_t *v, size_t n) {
  char num[24];
  dtx__bw_key(b, BSON_TYPE_ARRAY, key, klen);
  size_t at = dtx__bw_open(b);
  for (size_t i = 0; i < n; i++)
    dtx__bw_elem(b, num, dtx__itoa((long long)i, num), &v[i]);
  dtx__bw_close(b, at);
}

/* sort.c's key for one path: the least value reached ascending, the
 * greatest descending; missing is null, an empty array below null. */
typedef struct skey {
  dtx__bval_t v;
  int undef;
} skey_t;

typedef struct kacc {
  int dir, seen;
  skey_t best;
} kacc_t;

static int skey_cmp(const skey_t *a, const skey_t *b) {
  if (a->undef || b->undef)
    return b->undef - a->undef;
  return dtx__bval_cmp(&a->v, &b->v);
}

static int visit_key(void *ctx, const dtx__bval_t *v, int empty_leaf) {
  kacc_t *acc = ctx;
  skey_t k = {{BSON_TYPE_NULL, 0, NULL}, empty_leaf};
  if (v)
    k.v = *v;
  if (!acc->seen || skey_cmp(&k, &acc->best) * acc->dir < 0)
    acc->best = k;
  acc->seen = 1;
  return 0;
}

static skey_t sort_key(const char *path, int dir, const dtx__bval_t *e) {
  kacc_t acc = {dir, 0, {{BSON_TYPE_NULL, 0, NULL}, 0}};
  if (e->type == BSON_TYPE_DOCUMENT)
    dtx__bpath_walk(path, e->data, e->len, DTX__LEAF_ELEMS, visit_key, &acc,
                    NULL);
  return acc.best;
}

static int elem_cmp(const bop_t *op, const dtx__bval_t *a,
                    const dtx__bval_t *b) {
  if (op->sort == 1)
    return dtx__bval_cmp(a, b) * op->sort_dir;
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(op->sortspec.data, op->sortspec.len, &off, &e)) {
    int d = 1;
    is_unit(&e.v, &d);
    skey_t ka = sort_key(e.key, d, a), kb = sort_key(e.key, d, b);
    int r = skey_cmp(&ka, &kb);
    if (r)
      return r * d;
  }
  return 0;
}

/* A stable bottom-up merge sort of views (update_array.c's sort_elems). */
static int sort_views(const bop_t *op, dtx__bval_t *v, size_t n) {
  if (n < 2)
    return 0;
  dtx__bval_t *tmp = malloc(n * sizeof *tmp);
  if (!tmp)
    return dtx__err(DTX_ENOMEM, "out of memory sorting an array");
  for (size_t wd = 1; wd < n; wd *= 2)
    for (size_t lo = 0; lo < n; lo += 2 * wd) {
      size_t mid = lo + wd < n ? lo + wd : n;
      size_t hi = lo + 2 * wd < n ? lo + 2 * wd : n;
      size_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi)
        tmp[o++] = elem_cmp(op, &v[j], &v[i]) < 0 ? v[j++] : v[i++];
      while (i < mid)
        tmp[o++] = v[i++];
      while (j < hi)
        tmp[o++] = v[j++];
      memcpy(v + lo, tmp + lo, (hi - lo) * sizeof *v);
    }
  free(tmp);
  return 0;
}

/* The values $push/$addToSet add. */
static int op_values(const bop_t *op, vlist_t *l) {
  return op->single ? vl_add(l, &op->arg) : vl_add_all(l, &op->arg);
}

static int put_append(bwctx_t *w, const btgt_t *t, const char *key, size_t klen,
                      const dtx__bval_t *cur) {
  const bop_t *op = t->op;
  vlist_t l = {0}, add = {0};
  int rc;
  if (cur && cur->type != BSON_TYPE_ARRAY)
    return dtx__err(DTX_ETYPE,
                    "%s: cannot append to non-array value at '%s' (%s)",
                    op->opname, t->path, dtx__bupd_tname(cur->type));
  if ((cur && (rc = vl_add_all(&l, cur))) || (rc = op_values(op, &add)))
    goto done;
  if (op->kind == OP_ADDTOSET) {
    for (size_t i = 0; i < add.n; i++)
      if (!contains(l.v, l.n, &add.v[i]) && (rc = vl_add(&l, &add.v[i])))
        goto done;
  } else {
    size_t n = l.n, at = n;
    if (op->has_position) {
      int64_t p = op->position;
      if (p >= 0)
        at = (uint64_t)p < n ? (size_t)p : n;
      else
        at = p < -(int64_t)n ? 0 : n - (size_t)(-p);
    }
    for (size_t i = 0; i < add.n; i++)
      if ((rc = vl_add(&l, &add.v[i])))
        goto done;
    /* Move the added values to their position. */
    if (at < n && add.n) {
      dtx__bval_t *tmp = malloc(add.n * sizeof *tmp);
      if (!tmp) {
        rc = dtx__err(DTX_ENOMEM, "out of memory applying update");
        goto done;
      }
      memcpy(tmp, l.v + n, add.n * sizeof *tmp);
      memmove(l.v + at + add.n, l.v + at, (n - at) * sizeof *l.v);
      memcpy(l.v + at, tmp, add.n * sizeof *tmp);
      free(tmp);
    }
    if (op->sort && (rc = sort_views(op, l.v, l.n)))
      goto done;
    if (op->has_slice) {
      int64_t s = op->slice;
      if (s >= 0) {
        if ((uint64_t)s < l.n)
          l.n = (size_t)s;
      } else if ((uint64_t)(-(s + 1)) + 1 < l.n) {
        size_t keep = (size_t)(-(s + 1)) + 1;
        memmove(l.v, l.v + (l.n - keep), keep * sizeof *l.v);
        l.n = keep;
      }
    }
  }
  write_array(&w->b, key, klen, l.v, l.n);
  rc = 0;
done:
  free(l.v);
  free(add.v);
  return rc;
}

static int put_remove(bwctx_t *w, const btgt_t *t, const char *key, size_t klen,
                      const dtx__bval_t *cur) {
  const bop_t *op = t->op;
  vlist_t l = {0}, keep = {0};
  int rc;
  if (cur->type != BSON_TYPE_ARRAY)
    return dtx__err(DTX_ETYPE,
                    "%s: cannot apply to non-array value at '%s' (%s)",
                    op->opname, t->path, dtx__bupd_tname(cur->type));
  if ((rc = vl_add_all(&l, cur)))
    goto done;
  if (op->kind == OP_POP) {
    int dir = 1;
    is_unit(&op->arg, &dir);
    if (l.n) {
      if (dir < 0)
        memmove(l.v, l.v + 1, (l.n - 1) * sizeof *l.v);
      l.n--;
    }
    write_array(&w->b, key, klen, l.v, l.n);
    goto done;
  }
  if (op->kind == OP_PULLALL && (rc = vl_add_all(&keep, &op->arg)))
    goto done;
  size_t o = 0;
  for (size_t i = 0; i < l.n; i++) {
    int m;
    if (op->kind == OP_PULLALL)
      m = contains(keep.v, keep.n, &l.v[i]);
    else if (op->pull_mode == PULL_EQ)
      m = dtx__bval_cmp(&l.v[i], &op->arg) == 0;
    else if (op->pull_mode == PULL_WRAPPED)
      m = dtx__bupd_match_wrapped(&w->scratch, op->cond, "v", &l.v[i], &rc);
    else if ((m = l.v[i].type == BSON_TYPE_DOCUMENT))
      m = dtx__bfilter_match(op->cond, l.v[i].data, l.v[i].len);
    if (op->cond && !rc)
      rc = dtx__bfilter_error(op->cond);
    if (rc)
      goto done;
    if (!m)
      l.v[o++] = l.v[i];
  }
  if (o == l.n)
    dtx__bw_elem(&w->b, key, klen, cur); /* nothing removed: same bytes */
  else
    write_array(&w->b, key, klen, l.v, o);
done:
  free(l.v);
  free(keep.v);
  return rc;
}

/* ---- the slot
 * ------------------------------------------------------------------------ */

int dtx__bupd_put(bwctx_t *w, const btgt_t *t, const char *key, size_t klen,
                  const dtx__bval_t *cur, int in_array, int level) {
  const bop_t *op = t->op;
  if (level + op->vdepth > DTX_MAX_DEPTH)
    return dtx__err(DTX_EINVAL,
                    "%s: the result would nest deeper than %d levels at '%s'",
                    op->opname, DTX_MAX_DEPTH, t->path);
  switch (op->kind) {
  case OP_SET:
  case OP_SETONINSERT:
    dtx__bw_elem(&w->b, key, klen, &op->arg);
    return 0;
  case OP_CURDATE:
    if (op->timestamp) {
      uint64_t ts = BSON_UINT64_TO_LE(timestamp_now(w->now_ms));
      dtx__bw_key(&w->b, BSON_TYPE_TIMESTAMP, key, klen);
      dtx__bwb_put(&w->b, &ts, 8);
    } else {
      uint64_t ms = BSON_UINT64_TO_LE((uint64_t)w->now_ms);
      dtx__bw_key(&w->b, BSON_TYPE_DATE_TIME, key, klen);
      dtx__bwb_put(&w->b, &ms, 8);
    }
    return 0;
  case OP_UNSET:
    /* MongoDB keeps array positions stable: the element becomes null. */
    if (in_array)
      dtx__bw_null(&w->b, key, klen);
    return 0;
  case OP_INC:
  case OP_MUL:
    return put_arith(w, t, key, klen, cur);
  case OP_MIN:
  case OP_MAX: {
    int c = cur ? dtx__bval_cmp(&op->arg, cur) : 0;
    if (!cur || (op->kind == OP_MIN && c < 0) || (op->kind == OP_MAX && c > 0))
      dtx__bw_elem(&w->b, key, klen, &op->arg);
    else
      dtx__bw_elem(&w->b, key, klen, cur);
    return 0;
  }
  case OP_BIT:
    return put_bit(w, t, key, klen, cur);
  case OP_PUSH:
  case OP_ADDTOSET:
    return put_append(w, t, key, klen, cur);
  case OP_PULL:
  case OP_PULLALL:
  case OP_POP:
    return put_remove(w, t, key, klen, cur);
  case OP_RENAME:
    break;
  }
  DTX_ASSERT(0, "bupdate: a $rename reaches put only as a target role");
  return 0;
}
