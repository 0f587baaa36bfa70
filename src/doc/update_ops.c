/* update_ops.c -- what each update operator does to one concrete path.
 *
 * The driver (update.c) hands dtx__upd_apply_op() an operation whose path
 * has no positional segments left, and a private copy of the document's top
 * level to change in place.  The copy shares its nested objects and arrays
 * with the document it was made from, so every container on the way to a
 * change is copied first when anything else holds it (writable()): the
 * cost is that of the paths changed, not of the whole document, and the
 * original is never touched.  Per operator, MongoDB's documented behaviour:
 *  - $set/$setOnInsert create missing fields (objects on the way; an array
 *    index past the end pads with nulls, at most PAD_MAX elements).
 *  - $unset and $pull never fail on a missing field or a path through a
 *    scalar; $unset of an array element sets it to null (positions stay).
 *  - $inc/$mul on a missing field create it ($mul with a zero of the
 *    operand's type); int64 results are exact and overflow is
 *    DTX_EOVERFLOW, never a wrap or a silent switch to double.
 *  - $min/$max compare by MongoDB's order across types.
 *  - $pop/$pullAll/$push/$addToSet/$pull on an existing non-array value are
 *    DTX_ETYPE ("Cannot apply $pull to a non-array value").
 *  - $bit works on integers only (a double is DTX_ETYPE); a missing field
 *    starts from 0.
 *  - $rename moves a value: the source and destination may not cross an
 *    array; a missing source is a no-op.
 *  - $currentDate writes now_ms (integer milliseconds, doctx's date) or,
 *    with {$type: "timestamp"}, MongoDB's Timestamp as one int64:
 *    seconds << 32 | an increment that orders the writes of one second in
 *    this process.
 */
#include "doc/update_int.h"
#include "util/err.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PAD_MAX 1500000

/* Stores v (stolen) at index idx of arr, padding with nulls as MongoDB does
 * when the index is past the end. */
static int array_put(const upd_op_t *op, json_t *arr, size_t idx, json_t *v) {
  if (!v)
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  if (idx < json_array_size(arr)) {
    if (json_array_set_new(arr, idx, v))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    return 0;
  }
  if (idx >= PAD_MAX) {
    json_decref(v);
    return dtx__err(DTX_EINVAL,
                    "%s: cannot pad array beyond %d elements at '%s'",
                    op->opname, PAD_MAX, op->p.path);
  }
  while (json_array_size(arr) < idx)
    if (json_array_append_new(arr, json_null())) {
      json_decref(v);
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    }
  if (json_array_append_new(arr, v))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  return 0;
}

/* Makes child, held in parent at seg (an object key, or an array index
 * when parent is an array), safe to change: an object or array that
 * anything else also holds (the document the update started from, a
 * cache) is replaced in parent by a shallow copy of itself, whose own
 * children stay shared until they are changed in turn.  Scalars are never
 * changed in place, only replaced, so they are returned as they are.
 * Returns the container to change, or NULL when out of memory. */
static json_t *writable(json_t *parent, const char *seg, size_t idx,
                       json_t *child) {
  if (!(json_is_object(child) || json_is_array(child)) || child->refcount <= 1)
    return child;
  json_t *c = json_copy(child);
  if (!c)
    return NULL;
  if (json_is_object(parent) ? json_object_set_new(parent, seg, c)
                             : json_array_set_new(parent, idx, c))
    return NULL;
  return c;
}

/* The detail names the prefix that holds the scalar, as MongoDB's "Cannot
 * create field 'b' in element {a: 5}" does. */
static int not_traversable(const upath_t *p, const char *opname, size_t i,
                           const json_t *at) {
  int plen = i ? (int)(p->segs[i] - p->buf - 1) : 0;
  return dtx__err(DTX_ETYPE,
                  "%s: cannot create field '%s' in %s value at '%.*s' (path "
                  "'%s')",
                  opname, p->segs[i], dtx__value_type_name(at, DTX__TN_JSON),
                  plen, p->path, p->path);
}

/* Finds the object or array that holds the last segment of p.  With
 * create, missing intermediate fields become objects (array slots are
 * padded).  Returns 1 with *parent set; 0 when the path is missing or runs
 * through a scalar and create is off (the caller makes that a no-op); or
 * an error. */
static int walk(const upd_op_t *op, const upath_t *p, json_t *root,
                int create, json_t **parent) {
  json_t *cur = root;
  size_t i, idx;
  int rc;
  for (i = 0; i < p->nsegs; i++) {
    const char *seg = p->segs[i];
    json_t *next;
    if (json_is_object(cur)) {
      if (i + 1 == p->nsegs)
        break;
      next = json_object_get(cur, seg);
      if (!next) {
        if (!create)
          return 0;
        next = json_object();
        if (!next || json_object_set_new(cur, seg, next))
          return dtx__err(DTX_ENOMEM, "out of memory applying update");
      } else if (!(next = writable(cur, seg, 0, next))) {
        return dtx__err(DTX_ENOMEM, "out of memory applying update");
      }
    } else if (json_is_array(cur)) {
      if (!dtx__upd_seg_index(seg, &idx)) {
        if (!create)
          return 0;
        return not_traversable(p, op->opname, i, cur);
      }
      if (i + 1 == p->nsegs)
        break;
      next = json_array_get(cur, idx);
      if (!next) {
        if (!create)
          return 0;
        if ((rc = array_put(op, cur, idx, json_object())))
          return rc;
        next = json_array_get(cur, idx);
      } else if (!(next = writable(cur, NULL, idx, next))) {
        return dtx__err(DTX_ENOMEM, "out of memory applying update");
      }
    } else {
      if (!create)
        return 0;
      return not_traversable(p, op->opname, i, cur);
    }
    cur = next;
  }
  *parent = cur;
  return 1;
}

/* The current value at the last segment of p in parent, or NULL. */
static json_t *slot_get(const upath_t *p, json_t *parent) {
  const char *seg = p->segs[p->nsegs - 1];
  size_t idx;
  if (json_is_object(parent))
    return json_object_get(parent, seg);
  if (dtx__upd_seg_index(seg, &idx))
    return json_array_get(parent, idx);
  return NULL;
}

/* Stores v (stolen) at the last segment of op's path in parent.  walk()
 * guarantees an array parent only with a numeric last segment. */
static int slot_put(const upd_op_t *op, json_t *parent, json_t *v) {
  const char *seg = op->p.segs[op->p.nsegs - 1];
  size_t idx = 0;
  if (!v)
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  if (json_is_object(parent)) {
    if (json_object_set_new(parent, seg, v))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    return 0;
  }
  dtx__upd_seg_index(seg, &idx);
  return array_put(op, parent, idx, v);
}

/* $inc and $mul share their arithmetic: int64 exactly, with overflow an
 * error; a double anywhere makes a double. */
static int apply_arith(const upd_op_t *op, json_t *parent, json_t *cur) {
  int mul = op->kind == OP_MUL;
  json_t *res;
  if (!cur) {
    if (!mul)
      return slot_put(op, parent, json_deep_copy(op->arg));
    return slot_put(op, parent,
                    json_is_integer(op->arg) ? json_integer(0)
                                             : json_real(0.0));
  }
  if (!json_is_number(cur))
    return dtx__err(DTX_ETYPE,
                    "%s: cannot %s non-numeric value at '%s' (%s)",
                    op->opname, mul ? "multiply" : "increment", op->p.path,
                    dtx__value_type_name(cur, DTX__TN_JSON));
  if (json_is_integer(cur) && json_is_integer(op->arg)) {
    json_int_t r, a = json_integer_value(cur), b = json_integer_value(op->arg);
    if (mul ? __builtin_mul_overflow(a, b, &r)
            : __builtin_add_overflow(a, b, &r))
      return dtx__err(DTX_EOVERFLOW,
                      "%s: %" JSON_INTEGER_FORMAT " %c %" JSON_INTEGER_FORMAT
                      " overflows int64 at '%s'",
                      op->opname, a, mul ? '*' : '+', b, op->p.path);
    res = json_integer(r);
  } else {
    double a = json_number_value(cur), b = json_number_value(op->arg);
    /* jansson refuses non-finite reals, so NULL here is overflow too. */
    res = json_real(mul ? a * b : a + b);
    if (!res)
      return dtx__err(DTX_EOVERFLOW, "%s: result is not finite at '%s'",
                      op->opname, op->p.path);
  }
  return slot_put(op, parent, res);
}

static int apply_bit(const upd_op_t *op, json_t *parent, json_t *cur) {
  const char *k;
  json_t *x;
  if (cur && !json_is_integer(cur))
    return dtx__err(DTX_ETYPE,
                    "$bit: cannot apply to a value of non-integral type at "
                    "'%s' (%s)",
                    op->p.path, dtx__value_type_name(cur, DTX__TN_JSON));
  uint64_t v = cur ? (uint64_t)json_integer_value(cur) : 0;
  json_object_foreach(op->arg, k, x) {
    uint64_t b = (uint64_t)json_integer_value(x);
    v = k[0] == 'a' ? v & b : k[0] == 'o' ? v | b : v ^ b;
  }
  return slot_put(op, parent, json_integer((json_int_t)v));
}

/* 1 when the array element e matches op's $pull argument; errors of a
 * condition (a $regex past its limits) come back through *err. */
static int pull_matches(const upd_op_t *op, json_t *e, int *err) {
  int m = 0;
  switch (op->pull_mode) {
  case PULL_EQ:
    return dtx__value_cmp(e, op->arg) == 0;
  case PULL_QUERY:
    m = json_is_object(e) && dtx__filter_match(op->cond, e);
    break;
  case PULL_WRAPPED: {
    json_t *wrap = json_object();
    if (!wrap || json_object_set(wrap, "v", e)) {
      json_decref(wrap);
      *err = dtx__err(DTX_ENOMEM, "out of memory applying update");
      return 0;
    }
    m = dtx__filter_match(op->cond, wrap);
    json_decref(wrap);
    break;
  }
  }
  if ((*err = dtx__filter_error(op->cond)))
    return 0;
  return m;
}

static int array_contains(const json_t *arr, const json_t *v) {
  size_t i;
  for (i = 0; i < json_array_size(arr); i++)
    if (dtx__value_cmp(json_array_get(arr, i), v) == 0)
      return 1;
  return 0;
}

/* $pull, $pullAll and $pop remove elements from an existing array. */
static int apply_remove(const upd_op_t *op, json_t *cur) {
  size_t i;
  int err = 0;
  if (!cur)
    return 0;
  if (!json_is_array(cur))
    return dtx__err(DTX_ETYPE,
                    "%s: cannot apply to non-array value at '%s' (%s)",
                    op->opname, op->p.path,
                    dtx__value_type_name(cur, DTX__TN_JSON));
  if (op->kind == OP_POP) {
    size_t n = json_array_size(cur);
    if (n && json_array_remove(cur, json_number_value(op->arg) < 0 ? 0 : n - 1))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    return 0;
  }
  /* Backwards, so removals do not shift the elements still to visit. */
  for (i = json_array_size(cur); i-- > 0;) {
    json_t *e = json_array_get(cur, i);
    int m = op->kind == OP_PULLALL ? array_contains(op->arg, e)
                                   : pull_matches(op, e, &err);
    if (err)
      return err;
    if (m && json_array_remove(cur, i))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
  }
  return 0;
}

/* $push and $addToSet: append op->arg's values to the array at the slot,
 * creating it when missing.  $addToSet skips values already present;
 * $push applies its modifiers (update_array.c). */
static int apply_append(const upd_op_t *op, json_t *parent, json_t *cur) {
  size_t i;
  int rc;
  if (cur && !json_is_array(cur))
    return dtx__err(DTX_ETYPE,
                    "%s: cannot append to non-array value at "
                    "'%s' (%s)",
                    op->opname, op->p.path,
                    dtx__value_type_name(cur, DTX__TN_JSON));
  if (!cur) {
    cur = json_array();
    if ((rc = slot_put(op, parent, cur)))
      return rc;
  }
  if (op->kind == OP_PUSH)
    return dtx__upd_push(op, cur);
  for (i = 0; i < json_array_size(op->arg); i++) {
    json_t *v = json_array_get(op->arg, i);
    if (array_contains(cur, v))
      continue;
    if (json_array_append_new(cur, json_deep_copy(v)))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
  }
  return 0;
}

/* Walks p through objects only, for $rename: 1 with *parent (an object)
 * when the path's parent exists, 0 when it is missing (or, with create,
 * after creating it), or DTX_ETYPE when an array or scalar is in the
 * way. */
static int walk_objects(const upath_t *p, json_t *root, int create,
                        const char *role, json_t **parent) {
  json_t *cur = root;
  for (size_t i = 0; i + 1 < p->nsegs; i++) {
    json_t *next = json_object_get(cur, p->segs[i]);
    if (!next) {
      if (!create)
        return 0;
      next = json_object();
      if (!next || json_object_set_new(cur, p->segs[i], next))
        return dtx__err(DTX_ENOMEM, "out of memory applying update");
    } else if (json_is_object(next) &&
               !(next = writable(cur, p->segs[i], 0, next))) {
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    } else if (json_is_array(next)) {
      return dtx__err(DTX_ETYPE,
                      "$rename: the %s field '%s' cannot be an array element "
                      "(an array at '%.*s')",
                      role, p->path, (int)(p->segs[i + 1] - p->buf - 1),
                      p->path);
    } else if (!json_is_object(next)) {
      if (!create)
        return 0;
      return not_traversable(p, "$rename", i + 1, next);
    }
    cur = next;
  }
  *parent = cur;
  return 1;
}

/* MongoDB: "$rename performs an $unset of both the old name and the new
 * name, and then a $set with the new name", so the value lands last in
 * its parent. */
static int apply_rename(const upd_op_t *op, json_t *doc) {
  json_t *from, *to, *v;
  const char *src = op->p.segs[op->p.nsegs - 1];
  const char *dst = op->to.segs[op->to.nsegs - 1];
  int rc = walk_objects(&op->p, doc, 0, "source", &from);
  if (rc <= 0)
    return rc;
  if (!(v = json_object_get(from, src)))
    return 0;
  json_incref(v);
  json_object_del(from, src);
  if ((rc = walk_objects(&op->to, doc, 1, "destination", &to)) < 0) {
    json_decref(v);
    return rc;
  }
  json_object_del(to, dst);
  if (json_object_set_new(to, dst, v))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  return 0;
}

static pthread_mutex_t ts_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t ts_secs;
static uint32_t ts_inc;

/* MongoDB's Timestamp: seconds and an ordinal within the second. */
static json_int_t timestamp_now(int64_t now_ms) {
  int64_t secs = now_ms / 1000;
  pthread_mutex_lock(&ts_lock);
  if (secs > ts_secs) {
    ts_secs = secs;
    ts_inc = 0;
  }
  uint32_t inc = ++ts_inc;
  secs = ts_secs;
  pthread_mutex_unlock(&ts_lock);
  return (json_int_t)((uint64_t)secs << 32 | inc);
}

int dtx__upd_apply_op(const upd_op_t *op, json_t *doc, int is_insert,
                      int64_t now_ms) {
  json_t *parent = NULL, *cur;
  int create = op->kind != OP_UNSET && op->kind != OP_PULL &&
               op->kind != OP_PULLALL && op->kind != OP_POP;
  int rc;

  if (op->kind == OP_SETONINSERT && !is_insert)
    return 0;
  if (op->kind == OP_RENAME)
    return apply_rename(op, doc);
  rc = walk(op, &op->p, doc, create, &parent);
  if (rc <= 0)
    return rc;
  cur = slot_get(&op->p, parent);
  /* $push, $addToSet, $pull, $pullAll and $pop change the array itself. */
  if (cur && json_is_array(cur) &&
      (op->kind == OP_PUSH || op->kind == OP_ADDTOSET || op->kind == OP_PULL ||
       op->kind == OP_PULLALL || op->kind == OP_POP)) {
    size_t idx = 0;
    const char *seg = op->p.segs[op->p.nsegs - 1];
    if (json_is_array(parent))
      dtx__upd_seg_index(seg, &idx);
    if (!(cur = writable(parent, seg, idx, cur)))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
  }

  switch (op->kind) {
  case OP_SET:
  case OP_SETONINSERT:
    if (cur && dtx__upd_same(cur, op->arg))
      return 0;
    return slot_put(op, parent, json_deep_copy(op->arg));
  case OP_CURDATE:
    return slot_put(op, parent,
                    json_integer(op->timestamp ? timestamp_now(now_ms)
                                               : now_ms));
  case OP_UNSET:
    if (!cur)
      return 0;
    if (json_is_object(parent)) {
      json_object_del(parent, op->p.segs[op->p.nsegs - 1]);
      return 0;
    }
    /* MongoDB keeps array positions stable: the element becomes null. */
    return slot_put(op, parent, json_null());
  case OP_INC:
  case OP_MUL:
    return apply_arith(op, parent, cur);
  case OP_MIN:
  case OP_MAX: {
    int c;
    if (!cur)
      return slot_put(op, parent, json_deep_copy(op->arg));
    c = dtx__value_cmp(op->arg, cur);
    if ((op->kind == OP_MIN && c < 0) || (op->kind == OP_MAX && c > 0))
      return slot_put(op, parent, json_deep_copy(op->arg));
    return 0;
  }
  case OP_BIT:
    return apply_bit(op, parent, cur);
  case OP_PUSH:
  case OP_ADDTOSET:
    return apply_append(op, parent, cur);
  case OP_PULL:
  case OP_PULLALL:
  case OP_POP:
    return apply_remove(op, cur);
  case OP_RENAME:
    break;
  }
  return 0;
}
