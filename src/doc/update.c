/* update.c -- compiling MongoDB update documents, and the apply driver.
 *
 * dtx__update_compile_ex() turns an update spec (and its arrayFilters) into
 * an immutable list of operations, or a replacement document, checking
 * everything that can be checked without a document: operator names,
 * argument shapes, path syntax, arrayFilters identifiers and conflicts
 * between paths.  dtx__update_apply() then runs the list on a private copy
 * of a document -- its top level, sharing the subtrees no operation
 * changes (update_ops.c copies a container before changing it) -- so an
 * error part-way leaves the caller's document untouched and the copy is
 * simply dropped (all or nothing).  What each
 * operator does is in update_ops.c; positional paths and the $push
 * modifiers in update_array.c.
 *
 * Semantics follow MongoDB 5.0+, with these deliberate choices:
 *  - Operations run in path order (segment by segment; numeric segments in
 *    numeric order), not spec order, as MongoDB 5.0 does, so the field order
 *    of created fields does not depend on how the spec was written.  A
 *    $rename sits at its destination.
 *  - Positional paths ("a.$.b", "a.$[].b", "a.$[x].b") are expanded against
 *    the document before any operator runs; the concrete paths are then
 *    checked for conflicts again ("a.$[]" and "a.0" collide only there).
 *  - _id: only $set and $setOnInsert may name "_id" (or "_id.x").  Every
 *    other operator on _id is DTX_EBADUPDATE "_id is immutable" at compile
 *    time.  $set/$setOnInsert of _id is checked at apply time: when the input
 *    document had an _id, the result's _id must be identical (same type and
 *    value) or the apply fails with DTX_EIMMUTABLE.  A document without _id
 *    (an upsert seed) may receive one.
 *  - "changed" is structural identity: same types, same values, same field
 *    order.  $set a:5 over a:5 is no change, $set a:5.0 over a:5 is one (the
 *    stored type changes), as MongoDB compares BSON bytes.
 *  - Field names: a path segment may not start with '$' unless it is a
 *    positional one; values (of $set, $push ...) may hold any field names,
 *    '$'-prefixed and dotted ones included, as MongoDB 5.0 stores them; so
 *    may a replacement below its top level, and its top-level names may
 *    contain '.' (a top-level '$' name reads as an operator and is refused).
 */
#include "doc/update_int.h"
#include "util/buf.h"
#include "util/err.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  enum op_kind kind;
} op_table[] = {
    {"$set", OP_SET},           {"$setOnInsert", OP_SETONINSERT},
    {"$unset", OP_UNSET},       {"$inc", OP_INC},
    {"$mul", OP_MUL},           {"$min", OP_MIN},
    {"$max", OP_MAX},           {"$push", OP_PUSH},
    {"$addToSet", OP_ADDTOSET}, {"$pull", OP_PULL},
    {"$pullAll", OP_PULLALL},   {"$pop", OP_POP},
    {"$rename", OP_RENAME},     {"$bit", OP_BIT},
    {"$currentDate", OP_CURDATE},
};
#define NOPS (sizeof op_table / sizeof op_table[0])

_Static_assert(offsetof(struct dtx__update, first) % 8 == 0,
               "an update's first arena chunk is 8-aligned");

/* ---- helpers shared by compile and apply --------------------------------- */

/* Apply never lets an operand into a document by reference (it copies
 * what it stores), so a reference is as good as a copy as long as the
 * spec does not change, which DTX__COMPILE_BORROW promises; copying an
 * object operand is a dozen allocations. */
json_t *dtx__upd_operand(const dtx__update_t *u, const json_t *v) {
  return u->flags & DTX__COMPILE_BORROW ? json_incref((json_t *)v)
                                        : json_deep_copy(v);
}

/* Structural identity used for "changed" and for the _id check: stricter
 * than dtx__value_cmp, which calls 1 and 1.0 equal and ignores nothing
 * else.  Field order counts because it is visible in the stored document. */
int dtx__upd_same(const json_t *a, const json_t *b) {
  if (a == b)
    return 1;
  if (json_typeof(a) != json_typeof(b))
    return 0;
  switch (json_typeof(a)) {
  case JSON_OBJECT: {
    void *ia, *ib;
    if (json_object_size(a) != json_object_size(b))
      return 0;
    ia = json_object_iter((json_t *)a);
    ib = json_object_iter((json_t *)b);
    while (ia && ib) {
      if (strcmp(json_object_iter_key(ia), json_object_iter_key(ib)) ||
          !dtx__upd_same(json_object_iter_value(ia),
                         json_object_iter_value(ib)))
        return 0;
      ia = json_object_iter_next((json_t *)a, ia);
      ib = json_object_iter_next((json_t *)b, ib);
    }
    return !ia && !ib;
  }
  case JSON_ARRAY: {
    size_t i, n = json_array_size(a);
    if (n != json_array_size(b))
      return 0;
    for (i = 0; i < n; i++)
      if (!dtx__upd_same(json_array_get(a, i), json_array_get(b, i)))
        return 0;
    return 1;
  }
  case JSON_STRING:
    return json_string_length(a) == json_string_length(b) &&
           memcmp(json_string_value(a), json_string_value(b),
                  json_string_length(a)) == 0;
  case JSON_INTEGER:
    return json_integer_value(a) == json_integer_value(b);
  case JSON_REAL: {
    /* Bitwise, so that 0.0 and -0.0 differ as they do when stored. */
    double x = json_real_value(a), y = json_real_value(b);
    return memcmp(&x, &y, sizeof x) == 0;
  }
  default:
    return 1; /* true, false, null: the type is the value */
  }
}

/* A segment indexes an array when it is all digits; *idx is SIZE_MAX when
 * it is too long to be a real index (so it is simply out of range). */
int dtx__upd_seg_index(const char *seg, size_t *idx) {
  size_t v = 0, n = 0;
  if (!*seg)
    return 0;
  for (; seg[n]; n++) {
    if (seg[n] < '0' || seg[n] > '9')
      return 0;
    if (v <= (SIZE_MAX - 9) / 10)
      v = v * 10 + (size_t)(seg[n] - '0');
    else
      v = SIZE_MAX;
  }
  *idx = v;
  return 1;
}

/* Total order on segments matching MongoDB 5.0's processing order: numeric
 * names numerically, others bytewise.  Ties between spellings of the same
 * number ("01" vs "1") fall back to bytes, so equal means identical. */
int dtx__upd_seg_cmp(const char *a, const char *b) {
  size_t ia, ib;
  if (dtx__upd_seg_index(a, &ia) && dtx__upd_seg_index(b, &ib)) {
    const char *x = a, *y = b;
    size_t la, lb;
    while (x[0] == '0' && x[1])
      x++;
    while (y[0] == '0' && y[1])
      y++;
    la = strlen(x);
    lb = strlen(y);
    if (la != lb)
      return la < lb ? -1 : 1;
    /* The same number: its digits decide, then (as said above) the
     * bytes, so that the order of "01" and "1" is not qsort's whim. */
    int c = strcmp(x, y);
    if (c)
      return c;
  }
  return strcmp(a, b);
}

/* One block per path (see upath_t) rather than three: paths are split for
 * every operation of every compile, and again per apply of a positional
 * update. */
int dtx__upd_path_split_in(dtx__arena_t *arena, upath_t *p, const char *path) {
  size_t i, n = 1, len = strlen(path);
  for (i = 0; i < len; i++)
    n += path[i] == '.';
  size_t bytes = n * sizeof *p->segs + 2 * (len + 1);
  p->segs = arena ? dtx__arena_alloc(arena, bytes) : malloc(bytes);
  if (!p->segs) {
    memset(p, 0, sizeof *p);
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  }
  p->path = (char *)(p->segs + n);
  p->buf = p->path + len + 1;
  memcpy(p->path, path, len + 1);
  memcpy(p->buf, path, len + 1);
  p->nsegs = 0;
  p->segs[p->nsegs++] = p->buf;
  for (i = 0; i < len; i++)
    if (p->buf[i] == '.') {
      p->buf[i] = '\0';
      p->segs[p->nsegs++] = p->buf + i + 1;
    }
  return 0;
}

int dtx__upd_path_split(upath_t *p, const char *path) {
  return dtx__upd_path_split_in(NULL, p, path);
}

void dtx__upd_path_free(upath_t *p) {
  free(p->segs);
  memset(p, 0, sizeof *p);
}

/* Paths in the order operations apply, and the prefix test for conflicts,
 * over (segs, nsegs) pairs. */
int dtx__upd_segs_cmp(char *const *a, size_t na, char *const *b, size_t nb) {
  size_t i;
  for (i = 0; i < na && i < nb; i++) {
    int c = dtx__upd_seg_cmp(a[i], b[i]);
    if (c)
      return c;
  }
  return na < nb ? -1 : na > nb;
}

int dtx__upd_segs_prefix(char *const *a, size_t na, char *const *b,
                         size_t nb) {
  size_t i;
  if (na > nb)
    return 0;
  for (i = 0; i < na; i++)
    if (strcmp(a[i], b[i]))
      return 0;
  return 1;
}

/* The path an operation is ordered by: a $rename's destination. */
static const upath_t *order_path(const upd_op_t *op) {
  return op->kind == OP_RENAME ? &op->to : &op->p;
}

static int op_order_cmp(const void *pa, const void *pb) {
  const upath_t *a = order_path(pa), *b = order_path(pb);
  return dtx__upd_segs_cmp(a->segs, a->nsegs, b->segs, b->nsegs);
}

/* ---- compile ------------------------------------------------------------- */

/* What an op holds outside the update's arena. */
static void op_clear(upd_op_t *op) {
  json_decref(op->arg);
  json_decref(op->sort);
  dtx__filter_free(op->cond);
}

void dtx__update_free(dtx__update_t *u) {
  size_t i;
  if (!u)
    return;
  for (i = 0; i < u->nops; i++)
    op_clear(&u->ops[i]);
  for (i = 0; i < u->naf; i++)
    dtx__filter_free(u->af[i].f);
  json_decref(u->repl);
  dtx__arena_free(&u->arena);
  free(u);
}

/* Checks an update path: non-empty segments, none starting with '$' but
 * the positional ones ("$", "$[]", "$[id]"), never first, and at most one
 * "$".  positional is 0 for $rename, whose paths may not be dynamic. */
int dtx__upd_check_path(const char *opname, const char *path,
                        int positional) {
  int rc = dtx__path_check(path, DTX_EBADUPDATE);
  if (rc == 0)
    return 0;
  if (!positional)
    return dtx__err_wrap(rc, "%s", opname);
  /* Re-check with positional segments allowed. */
  size_t len = strlen(path);
  if (len > 1024)
    return dtx__err_wrap(rc, "%s", opname);
  int ndollar = 0;
  const char *seg = path;
  for (int first = 1;; first = 0) {
    const char *dot = strchr(seg, '.');
    size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
    if (n == 0)
      return dtx__err(DTX_EBADUPDATE, "%s: empty segment in field path '%s'",
                      opname, path);
    if (seg[0] == '$') {
      char tmp[160];
      const char *id;
      size_t idlen;
      if (n >= sizeof tmp)
        return dtx__err(DTX_EBADUPDATE, "%s: bad segment in path '%s'",
                        opname, path);
      memcpy(tmp, seg, n);
      tmp[n] = '\0';
      int k = dtx__upd_seg_kind(tmp, &id, &idlen);
      if (k == SEG_PLAIN)
        return dtx__err(DTX_EBADUPDATE,
                        "%s: field path '%s': segment '%s' starts with '$' "
                        "and is not a positional operator",
                        opname, path, tmp);
      if (first)
        return dtx__err(DTX_EBADUPDATE,
                        "%s: path '%s' cannot start with a positional "
                        "operator",
                        opname, path);
      if (k == SEG_FILTERED && !dtx__upd_ident_ok(id, idlen))
        return dtx__err(DTX_EBADUPDATE,
                        "%s: identifier '%.*s' in path '%s' must be a "
                        "lowercase letter followed by letters and digits",
                        opname, (int)idlen, id, path);
      if (k == SEG_DOLLAR && ++ndollar > 1)
        return dtx__err(DTX_EBADUPDATE,
                        "%s: too many positional '$' elements in path '%s'",
                        opname, path);
    }
    if (!dot)
      break;
    seg = dot + 1;
  }
  dtx__err_clear();
  return 0;
}

/* MongoDB reads a $pull argument as a condition on the element itself when
 * its first key is a path operator ($gte, $in, ...), as a query on object
 * elements when it is a field name or a logical operator ($or ...), and as
 * a value to compare with otherwise. */
static int compile_pull(const dtx__update_t *u, upd_op_t *op,
                        const json_t *v) {
  int rc;
  op->arg = dtx__upd_operand(u, v);
  if (!op->arg)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  if (!json_is_object(v)) {
    op->pull_mode = PULL_EQ;
    return 0;
  }
  void *it = json_object_iter((json_t *)v);
  const char *first = it ? json_object_iter_key(it) : "";
  if (first[0] == '$' && strcmp(first, "$and") && strcmp(first, "$or") &&
      strcmp(first, "$nor")) {
    json_t *wrap = json_object();
    if (!wrap || json_object_set(wrap, "v", op->arg)) {
      json_decref(wrap);
      return dtx__err(DTX_ENOMEM, "out of memory compiling update");
    }
    op->pull_mode = PULL_WRAPPED;
    rc = dtx__filter_compile_flags(wrap, u->flags, &op->cond);
    json_decref(wrap);
  } else {
    op->pull_mode = PULL_QUERY;
    rc = dtx__filter_compile_flags(v, u->flags, &op->cond);
  }
  if (rc == DTX_EBADQUERY)
    return dtx__err_wrap(DTX_EBADUPDATE, "$pull: bad condition at '%s'",
                         op->p.path);
  return rc;
}

static int compile_curdate(upd_op_t *op, const json_t *v) {
  if (json_is_boolean(v))
    return 0;
  json_t *t = json_object_get(v, "$type");
  const char *ts = json_string_value(t);
  if (!json_is_object(v) || json_object_size(v) != 1 || !ts ||
      (strcmp(ts, "date") && strcmp(ts, "timestamp")))
    return dtx__err(DTX_EBADUPDATE,
                    "$currentDate: expected true or {$type:\"date\"|"
                    "\"timestamp\"} at '%s'",
                    op->p.path);
  op->timestamp = !strcmp(ts, "timestamp");
  return 0;
}

static int compile_bit(upd_op_t *op, const json_t *v) {
  const char *k;
  json_t *x;
  if (!json_is_object(v) || json_object_size(v) == 0)
    return dtx__err(DTX_EBADUPDATE,
                    "$bit: argument at '%s' must be an object such as "
                    "{and: 5}",
                    op->p.path);
  json_object_foreach((json_t *)v, k, x) {
    if (strcmp(k, "and") && strcmp(k, "or") && strcmp(k, "xor"))
      return dtx__err(DTX_EBADUPDATE,
                      "$bit: unknown bitwise operation '%s' at '%s' "
                      "(expected and, or, xor)",
                      k, op->p.path);
    if (!json_is_integer(x))
      return dtx__err(DTX_EBADUPDATE,
                      "$bit: the %s operand at '%s' must be an integer, not "
                      "%s",
                      k, op->p.path, dtx__value_type_name(x, DTX__TN_JSON));
  }
  return 0;
}

static int compile_rename(dtx__update_t *u, upd_op_t *op, const json_t *v) {
  int rc;
  if (!json_is_string(v))
    return dtx__err(DTX_EBADUPDATE,
                    "$rename: the new name for '%s' must be a string",
                    op->p.path);
  const char *to = json_string_value(v);
  if ((rc = dtx__upd_check_path(op->opname, to, 0)))
    return rc;
  if ((rc = dtx__upd_path_split_in(&u->arena, &op->to, to)))
    return rc;
  if (!strcmp(op->to.segs[0], "_id"))
    return dtx__err(DTX_EBADUPDATE, "$rename: _id is immutable (path '%s')",
                    to);
  if (dtx__upd_segs_prefix(op->p.segs, op->p.nsegs, op->to.segs,
                           op->to.nsegs) ||
      dtx__upd_segs_prefix(op->to.segs, op->to.nsegs, op->p.segs,
                           op->p.nsegs))
    return dtx__err(DTX_EBADUPDATE,
                    "$rename: the source '%s' and target '%s' must differ "
                    "and not be on the same path",
                    op->p.path, to);
  return 0;
}

static int compile_field(dtx__update_t *u, upd_op_t *op, const char *path,
                         const json_t *v) {
  int rc = dtx__upd_check_path(op->opname, path, op->kind != OP_RENAME);
  if (rc)
    return rc;
  if ((rc = dtx__upd_path_split_in(&u->arena, &op->p, path)))
    return rc;
  for (size_t i = 0; i < op->p.nsegs; i++)
    if (op->p.segs[i][0] == '$')
      op->positional = 1;
  if (op->kind != OP_SET && op->kind != OP_SETONINSERT &&
      !strcmp(op->p.segs[0], "_id"))
    return dtx__err(DTX_EBADUPDATE, "%s: _id is immutable (path '%s')",
                    op->opname, path);
  switch (op->kind) {
  case OP_INC:
  case OP_MUL:
    if (!json_is_number(v))
      return dtx__err(DTX_EBADUPDATE,
                      "%s: argument at '%s' must be a number, not %s",
                      op->opname, path, dtx__value_type_name(v, DTX__TN_JSON));
    break;
  case OP_PUSH:
  case OP_ADDTOSET:
    return dtx__upd_compile_push(u, op, v);
  case OP_PULL:
    return compile_pull(u, op, v);
  case OP_PULLALL:
    if (!json_is_array(v))
      return dtx__err(DTX_EBADUPDATE,
                      "$pullAll: argument at '%s' must be an array, not %s",
                      path, dtx__value_type_name(v, DTX__TN_JSON));
    break;
  case OP_POP:
    if (!json_is_number(v) ||
        (json_number_value(v) != 1 && json_number_value(v) != -1))
      return dtx__err(DTX_EBADUPDATE, "$pop: expects 1 or -1 at '%s'", path);
    break;
  case OP_BIT:
    if ((rc = compile_bit(op, v)))
      return rc;
    break;
  case OP_RENAME:
    if ((rc = compile_rename(u, op, v)))
      return rc;
    break;
  case OP_CURDATE:
    return compile_curdate(op, v);
  default:
    break;
  }
  op->arg = dtx__upd_operand(u, v);
  return op->arg ? 0 : dtx__err(DTX_ENOMEM, "out of memory compiling update");
}

static int compile_replacement(dtx__update_t *u, const json_t *spec) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)spec, k, v) {
    if (!*k)
      return dtx__err(DTX_EBADUPDATE, "replacement has an empty field name");
  }
  u->replacement = 1;
  u->repl = dtx__upd_operand(u, spec);
  return u->repl ? 0 : dtx__err(DTX_ENOMEM, "out of memory compiling update");
}

static int wpath_cmp(const void *pa, const void *pb) {
  const wpath_t *a = pa, *b = pb;
  return dtx__upd_segs_cmp(a->segs, a->nsegs, b->segs, b->nsegs);
}

/* After sorting, a path that is a prefix of another sits right before a
 * path it prefixes (see dtx__upd_seg_cmp), so neighbours are all we
 * compare. */
int dtx__upd_check_conflicts(wpath_t *w, size_t n, int concrete) {
  qsort(w, n, sizeof *w, wpath_cmp);
  for (size_t i = 1; i < n; i++)
    if (dtx__upd_segs_prefix(w[i - 1].segs, w[i - 1].nsegs, w[i].segs,
                             w[i].nsegs))
      return dtx__err(DTX_EBADUPDATE,
                      concrete ? "updating the path '%s' (%s) would create a "
                                 "conflict at '%s' (%s)"
                               : "conflicting paths: '%s' (%s) and '%s' (%s)",
                      w[i].path, w[i].opname, w[i - 1].path,
                      w[i - 1].opname);
  return 0;
}

static int compile_operators(dtx__update_t *u, const json_t *spec) {
  const char *opk, *path;
  json_t *arg, *v;
  size_t total = 0, i, nkeys = 0;
  /* Each key's op_table entry, found once: a key is a known operator
   * and appears once, so there are at most NOPS of them. */
  unsigned char kind_of[NOPS];
  int rc;

  json_object_foreach((json_t *)spec, opk, arg) {
    size_t t;
    for (t = 0; t < NOPS; t++)
      if (!strcmp(opk, op_table[t].name))
        break;
    if (t == NOPS)
      return dtx__err(DTX_EBADUPDATE, "unknown operator %s", opk);
    kind_of[nkeys++] = (unsigned char)t;
    if (!json_is_object(arg))
      return dtx__err(DTX_EBADUPDATE, "%s: argument must be an object", opk);
    if (json_object_size(arg) == 0)
      return dtx__err(DTX_EBADUPDATE, "%s: empty argument", opk);
    total += json_object_size(arg);
  }

  u->ops = dtx__arena_alloc(&u->arena, total * sizeof *u->ops);
  if (!u->ops)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  nkeys = 0;
  json_object_foreach((json_t *)spec, opk, arg) {
    size_t t = kind_of[nkeys++];
    json_object_foreach(arg, path, v) {
      upd_op_t *op = &u->ops[u->nops++];
      op->kind = op_table[t].kind;
      op->opname = op_table[t].name;
      if ((rc = compile_field(u, op, path, v)))
        return rc;
      u->positional |= op->positional;
      for (size_t s = 0; s < op->p.nsegs; s++)
        if (!strcmp(op->p.segs[s], "$"))
          u->uses_dollar = 1;
    }
  }

  qsort(u->ops, u->nops, sizeof *u->ops, op_order_cmp);
  /* A few operations, the usual case, need no malloc for the check. */
  wpath_t wbuf[16];
  wpath_t *w = 2 * u->nops <= sizeof wbuf / sizeof wbuf[0]
                   ? wbuf
                   : malloc(2 * u->nops * sizeof *w);
  size_t nw = 0;
  if (!w)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  for (i = 0; i < u->nops; i++) {
    const upd_op_t *op = &u->ops[i];
    w[nw++] = (wpath_t){op->p.segs, op->p.nsegs, op->p.path, op->opname};
    if (op->kind == OP_RENAME)
      w[nw++] = (wpath_t){op->to.segs, op->to.nsegs, op->to.path,
                          op->opname};
  }
  rc = dtx__upd_check_conflicts(w, nw, 0);
  if (w != wbuf)
    free(w);
  return rc;
}

int dtx__update_compile_ex(const json_t *spec, const json_t *array_filters,
                           dtx__update_t **out) {
  return dtx__update_compile_flags(spec, array_filters, 0, out);
}

int dtx__update_compile_flags(const json_t *spec, const json_t *array_filters,
                              unsigned flags, dtx__update_t **out) {
  dtx__update_t *u;
  const char *k, *first_op = NULL, *first_field = NULL;
  json_t *v;
  int rc;

  if (!out)
    return dtx__err(DTX_EINVAL, "update: NULL out-parameter");
  *out = NULL;
  if (!json_is_object(spec))
    return dtx__err(DTX_EBADUPDATE, "update must be a JSON object, not %s",
                    spec ? dtx__value_type_name(spec, DTX__TN_JSON) : "NULL");
  json_object_foreach((json_t *)spec, k, v) {
    if (k[0] == '$') {
      if (!first_op)
        first_op = k;
    } else if (!first_field) {
      first_field = k;
    }
  }
  if (first_op && first_field)
    return dtx__err(DTX_EBADUPDATE,
                    "update mixes operators (%s) and fields ('%s')", first_op,
                    first_field);

  /* malloc, not calloc: the first chunk needs no zeroing (the arena
   * zeroes what it hands out). */
  u = malloc(UPDATE_BYTES);
  if (!u)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  memset(u, 0, sizeof *u);
  u->flags = flags;
  dtx__arena_init(&u->arena, u->first,
                  UPDATE_BYTES - offsetof(dtx__update_t, first));
  rc = first_op ? compile_operators(u, spec) : compile_replacement(u, spec);
  if (rc == 0)
    rc = dtx__upd_array_filters(u, array_filters);
  if (rc) {
    dtx__update_free(u);
    return rc;
  }
  *out = u;
  return 0;
}

int dtx__update_compile(const json_t *spec, dtx__update_t **out) {
  return dtx__update_compile_ex(spec, NULL, out);
}

int dtx__update_is_replacement(const dtx__update_t *u) {
  return u && u->replacement;
}

void dtx__update_bind_filter(dtx__update_t *u, const dtx__filter_t *f) {
  if (u)
    u->filter = f;
}

const dtx__filter_t *dtx__update_filter(const dtx__update_t *u) {
  return u ? u->filter : NULL;
}

/* ---- apply --------------------------------------------------------------- */

/* A replacement keeps the stored _id (first, as MongoDB stores it); one
 * that names a different _id is refused. */
static int apply_replacement(const dtx__update_t *u, const json_t *doc,
                             json_t **res) {
  const json_t *did = json_object_get(doc, "_id");
  const json_t *rid = json_object_get(u->repl, "_id");
  const char *k;
  json_t *v, *r;

  *res = NULL;
  if (did && rid && !dtx__upd_same(did, rid))
    return dtx__err(DTX_EIMMUTABLE,
                    "replacement: _id is immutable (path '_id')");
  r = json_object();
  if (!r)
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  if ((did || rid) &&
      json_object_set_new(r, "_id", json_deep_copy(did ? did : rid)))
    goto nomem;
  json_object_foreach(u->repl, k, v) {
    if (!strcmp(k, "_id"))
      continue;
    if (json_object_set_new(r, k, json_deep_copy(v)))
      goto nomem;
  }
  *res = r;
  return 0;
nomem:
  json_decref(r);
  return dtx__err(DTX_ENOMEM, "out of memory applying update");
}

/* The operator that touched _id, for the detail of DTX_EIMMUTABLE. */
static const upd_op_t *id_op(const dtx__update_t *u) {
  size_t i;
  for (i = 0; i < u->nops; i++)
    if (!strcmp(u->ops[i].p.segs[0], "_id"))
      return &u->ops[i];
  return NULL;
}

static int target_cmp(const void *pa, const void *pb) {
  const target_t *a = pa, *b = pb;
  return dtx__upd_segs_cmp(a->p.segs, a->p.nsegs, b->p.segs, b->p.nsegs);
}

/* Updates with positional paths: every path is made concrete against the
 * document as it was, the concrete paths are ordered and checked for
 * conflicts, and then applied. */
static int apply_positional(const dtx__update_t *u, const json_t *doc,
                            json_t *res, int is_insert, int64_t now_ms) {
  size_t pos = SIZE_MAX, n = 0, cap = 0, i;
  target_t *ts = NULL;
  wpath_t *w = NULL;
  int rc = 0;
  if (u->uses_dollar && u->filter) {
    dtx__filter_match_pos(u->filter, doc, &pos);
    if ((rc = dtx__filter_error(u->filter)))
      return rc;
  }
  for (i = 0; i < u->nops && rc == 0; i++) {
    const upd_op_t *op = &u->ops[i];
    if (op->kind == OP_SETONINSERT && !is_insert)
      continue;
    if (op->positional) {
      rc = dtx__upd_expand(u, op, doc, pos, &ts, &n, &cap);
      continue;
    }
    if (n == cap && DTX__GROW(ts, cap, 8)) {
      rc = dtx__err(DTX_ENOMEM, "out of memory applying update");
      break;
    }
    memset(&ts[n], 0, sizeof ts[n]);
    ts[n].op = op;
    rc = dtx__upd_path_split(&ts[n++].p, op->p.path);
  }
  if (rc == 0 && n > 1) {
    qsort(ts, n, sizeof *ts, target_cmp);
    if (!(w = malloc(2 * n * sizeof *w))) {
      rc = dtx__err(DTX_ENOMEM, "out of memory applying update");
    } else {
      size_t nw = 0;
      for (i = 0; i < n; i++) {
        w[nw++] = (wpath_t){ts[i].p.segs, ts[i].p.nsegs, ts[i].p.path,
                            ts[i].op->opname};
        if (ts[i].op->kind == OP_RENAME)
          w[nw++] = (wpath_t){ts[i].op->to.segs, ts[i].op->to.nsegs,
                              ts[i].op->to.path, ts[i].op->opname};
      }
      rc = dtx__upd_check_conflicts(w, nw, 1);
    }
  }
  for (i = 0; i < n && rc == 0; i++) {
    upd_op_t t = *ts[i].op;
    t.p = ts[i].p;
    rc = dtx__upd_apply_op(&t, res, is_insert, now_ms);
  }
  for (i = 0; i < n; i++)
    dtx__upd_path_free(&ts[i].p);
  free(ts);
  free(w);
  return rc;
}

int dtx__update_apply(const dtx__update_t *u, const json_t *doc, int is_insert,
                      int64_t now_ms, json_t **out, int *changed) {
  json_t *res = NULL;
  const json_t *did;
  size_t i;
  int rc = 0;

  if (out)
    *out = NULL;
  if (changed)
    *changed = 0;
  if (!u || !out || !json_is_object(doc))
    return dtx__err(DTX_EINVAL, "update apply: %s",
                    !json_is_object(doc) ? "document must be an object"
                                         : "NULL argument");
  if (u->replacement) {
    if ((rc = apply_replacement(u, doc, &res)))
      return rc;
  } else {
    /* The top level only: update_ops.c copies what it changes below. */
    res = json_copy((json_t *)doc);
    if (!res)
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    if (u->positional)
      rc = apply_positional(u, doc, res, is_insert, now_ms);
    else
      for (i = 0; i < u->nops && rc == 0; i++)
        rc = dtx__upd_apply_op(&u->ops[i], res, is_insert, now_ms);
    if (rc) {
      json_decref(res);
      return rc;
    }
    did = json_object_get(doc, "_id");
    if (did) {
      const json_t *nid = json_object_get(res, "_id");
      if (!nid || !dtx__upd_same(did, nid)) {
        const upd_op_t *op = id_op(u);
        json_decref(res);
        return dtx__err(DTX_EIMMUTABLE, "%s: _id is immutable (path '%s')",
                        op ? op->opname : "update", op ? op->p.path : "_id");
      }
    }
  }
  if (changed)
    *changed = !dtx__upd_same(res, doc);
  *out = res;
  return 0;
}
