/* update.c -- compiling and applying MongoDB update documents.
 *
 * dtx__update_compile() turns an update spec into an immutable list of
 * operations (or a replacement document), checking everything that can be
 * checked without a document: operator names, argument shapes, path syntax
 * and conflicts between paths.  dtx__update_apply() then runs the list on a
 * private deep copy of a document, so an error part-way leaves the caller's
 * document untouched and the copy is simply dropped (all or nothing).
 *
 * Semantics follow MongoDB 5.0+, with these deliberate choices:
 *  - Operations run in path order (segment by segment; numeric segments in
 *    numeric order), not spec order, as MongoDB 5.0 does, so the field order
 *    of created fields does not depend on how the spec was written.
 *  - _id: only $set and $setOnInsert may name "_id" (or "_id.x").  Every
 *    other operator on _id is DTX_EBADUPDATE "_id is immutable" at compile
 *    time.  $set/$setOnInsert of _id is checked at apply time: when the input
 *    document had an _id, the result's _id must be identical (same type and
 *    value) or the apply fails with DTX_EIMMUTABLE.  A document without _id
 *    (an upsert seed) may receive one.
 *  - "changed" is structural identity: same types, same values, same field
 *    order.  $set a:5 over a:5 is no change, $set a:5.0 over a:5 is one (the
 *    stored type changes), as MongoDB compares BSON bytes.
 *  - $pull on a missing field, or on a path through a scalar, is a no-op;
 *    $pull on an existing non-array value is DTX_ETYPE (MongoDB: "Cannot
 *    apply $pull to a non-array value").  $unset likewise never fails, and
 *    $unset of an array element sets it to null, as MongoDB does.
 *  - $currentDate accepts a boolean or {$type:"date"|"timestamp"}; all
 *    forms write now_ms as an integer (doctx has no BSON date type).
 *  - Setting an array element past the end pads with nulls, at most to
 *    PAD_MAX elements (MongoDB's backfill limit); beyond is DTX_EINVAL.
 *  - A replacement's top-level field names may not contain '.', since the
 *    filter language could never address such a field.
 */
#include "doc/doc.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

#define PAD_MAX 1500000

enum op_kind {
  OP_SET,
  OP_SETONINSERT,
  OP_UNSET,
  OP_INC,
  OP_MIN,
  OP_MAX,
  OP_PUSH,
  OP_ADDTOSET,
  OP_PULL,
  OP_CURDATE
};

static const struct {
  const char *name;
  enum op_kind kind;
} op_table[] = {
    {"$set", OP_SET},     {"$setOnInsert", OP_SETONINSERT},
    {"$unset", OP_UNSET}, {"$inc", OP_INC},
    {"$min", OP_MIN},     {"$max", OP_MAX},
    {"$push", OP_PUSH},   {"$addToSet", OP_ADDTOSET},
    {"$pull", OP_PULL},   {"$currentDate", OP_CURDATE},
};

/* MongoDB operators doctx knows of but does not implement; naming them as
 * "unsupported" rather than "unknown" tells the user it is not a typo. */
static const char *const unsupported_ops[] = {"$rename",  "$mul",  "$pop",
                                              "$pullAll", "$bit",  "$position",
                                              "$slice",   "$sort", "$each"};

enum pull_mode {
  PULL_EQ,      /* remove elements equal to the value */
  PULL_WRAPPED, /* {$gte:6}: the condition applies to the element itself */
  PULL_QUERY    /* {score:{$lt:5}}: a query run on object elements */
};

typedef struct upd_op {
  enum op_kind kind;
  const char *opname; /* static string from op_table */
  char *path;         /* dotted path, owned */
  char *segbuf;       /* path with '.' replaced by NUL, owned */
  char **segs;        /* nsegs pointers into segbuf, owned array */
  size_t nsegs;
  /* Owned deep copy of the argument.  $push/$addToSet hold the array of
   * values to add (a single value is wrapped), $pull the value or the
   * condition, others the operand. */
  json_t *arg;
  dtx__filter_t *cond; /* $pull with PULL_WRAPPED or PULL_QUERY */
  enum pull_mode pull_mode;
} upd_op_t;

struct dtx__update {
  int replacement;
  json_t *repl; /* replacement document, owned */
  size_t nops;
  upd_op_t *ops; /* sorted by path order */
};

/* ---- helpers shared by compile and apply --------------------------------- */

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "object";
  case JSON_ARRAY:
    return "array";
  case JSON_STRING:
    return "string";
  case JSON_INTEGER:
    return "integer";
  case JSON_REAL:
    return "real";
  case JSON_TRUE:
  case JSON_FALSE:
    return "boolean";
  case JSON_NULL:
    return "null";
  }
  return "unknown";
}

/* Structural identity used for "changed" and for the _id check: stricter
 * than dtx__value_cmp, which calls 1 and 1.0 equal and ignores nothing
 * else.  Field order counts because it is visible in the stored document. */
static int same(const json_t *a, const json_t *b) {
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
          !same(json_object_iter_value(ia), json_object_iter_value(ib)))
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
      if (!same(json_array_get(a, i), json_array_get(b, i)))
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
static int seg_index(const char *seg, size_t *idx) {
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
static int seg_cmp(const char *a, const char *b) {
  size_t ia, ib;
  if (seg_index(a, &ia) && seg_index(b, &ib)) {
    size_t la, lb;
    while (a[0] == '0' && a[1])
      a++;
    while (b[0] == '0' && b[1])
      b++;
    la = strlen(a);
    lb = strlen(b);
    if (la != lb)
      return la < lb ? -1 : 1;
  }
  return strcmp(a, b);
}

static int op_path_cmp(const void *pa, const void *pb) {
  const upd_op_t *a = pa, *b = pb;
  size_t i;
  for (i = 0; i < a->nsegs && i < b->nsegs; i++) {
    int c = seg_cmp(a->segs[i], b->segs[i]);
    if (c)
      return c;
  }
  return a->nsegs < b->nsegs ? -1 : a->nsegs > b->nsegs;
}

/* 1 when a's segments are a prefix of (or equal to) b's. */
static int op_is_prefix(const upd_op_t *a, const upd_op_t *b) {
  size_t i;
  if (a->nsegs > b->nsegs)
    return 0;
  for (i = 0; i < a->nsegs; i++)
    if (strcmp(a->segs[i], b->segs[i]))
      return 0;
  return 1;
}

/* ---- compile ------------------------------------------------------------- */

static void op_clear(upd_op_t *op) {
  free(op->path);
  free(op->segbuf);
  free(op->segs);
  json_decref(op->arg);
  dtx__filter_free(op->cond);
}

void dtx__update_free(dtx__update_t *u) {
  size_t i;
  if (!u)
    return;
  for (i = 0; i < u->nops; i++)
    op_clear(&u->ops[i]);
  free(u->ops);
  json_decref(u->repl);
  free(u);
}

static int op_split(upd_op_t *op, const char *path) {
  size_t i, n = 1, len = strlen(path);
  op->path = strdup(path);
  op->segbuf = strdup(path);
  if (!op->path || !op->segbuf)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  for (i = 0; i < len; i++)
    n += path[i] == '.';
  op->segs = malloc(n * sizeof *op->segs);
  if (!op->segs)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  op->nsegs = 0;
  op->segs[op->nsegs++] = op->segbuf;
  for (i = 0; i < len; i++)
    if (op->segbuf[i] == '.') {
      op->segbuf[i] = '\0';
      op->segs[op->nsegs++] = op->segbuf + i + 1;
    }
  return 0;
}

static int is_unsupported_modifier(const char *k) {
  return !strcmp(k, "$slice") || !strcmp(k, "$sort") || !strcmp(k, "$position");
}

/* $push and $addToSet take a value, or {$each:[...]}.  A value that is an
 * object with '$' keys is read as modifiers, since MongoDB would store such
 * field names nowhere sensible. */
static int compile_values(upd_op_t *op, const json_t *v) {
  const char *k;
  json_t *mv, *each = NULL;
  int has_dollar = 0;
  if (json_is_object(v)) {
    json_object_foreach((json_t *)v, k, mv) {
      if (k[0] == '$')
        has_dollar = 1;
    }
  }
  if (!has_dollar) {
    op->arg = json_array();
    if (!op->arg || json_array_append_new(op->arg, json_deep_copy(v)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling update");
    return 0;
  }
  json_object_foreach((json_t *)v, k, mv) {
    if (!strcmp(k, "$each"))
      each = mv;
    else if (is_unsupported_modifier(k))
      return dtx__err(DTX_EBADUPDATE, "%s: unsupported modifier %s at '%s'",
                      op->opname, k, op->path);
    else
      return dtx__err(DTX_EBADUPDATE, "%s: unrecognized clause '%s' at '%s'",
                      op->opname, k, op->path);
  }
  if (!json_is_array(each))
    return dtx__err(DTX_EBADUPDATE, "%s: $each must be an array at '%s'",
                    op->opname, op->path);
  op->arg = json_deep_copy(each);
  return op->arg ? 0 : dtx__err(DTX_ENOMEM, "out of memory compiling update");
}

/* MongoDB reads a $pull argument as a condition on the element itself when
 * its first key is a path operator ($gte, $in, ...), as a query on object
 * elements when it is a field name or a logical operator ($or ...), and as
 * a value to compare with otherwise. */
static int compile_pull(upd_op_t *op, const json_t *v) {
  int rc;
  op->arg = json_deep_copy(v);
  if (!op->arg)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  if (!json_is_object(v)) {
    op->pull_mode = PULL_EQ;
    return 0;
  }
  {
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
      rc = dtx__filter_compile(wrap, &op->cond);
      json_decref(wrap);
    } else {
      op->pull_mode = PULL_QUERY;
      rc = dtx__filter_compile(v, &op->cond);
    }
  }
  if (rc == DTX_EBADQUERY)
    return dtx__err_wrap(DTX_EBADUPDATE, "$pull: bad condition at '%s'",
                         op->path);
  return rc;
}

static int compile_curdate(upd_op_t *op, const json_t *v) {
  if (!json_is_boolean(v)) {
    json_t *t = json_object_get(v, "$type");
    const char *ts = json_string_value(t);
    if (!json_is_object(v) || json_object_size(v) != 1 || !ts ||
        (strcmp(ts, "date") && strcmp(ts, "timestamp")))
      return dtx__err(DTX_EBADUPDATE,
                      "$currentDate: expected true or {$type:\"date\"|"
                      "\"timestamp\"} at '%s'",
                      op->path);
  }
  return 0;
}

static int compile_field(upd_op_t *op, const char *path, const json_t *v) {
  int rc = dtx__path_check(path, DTX_EBADUPDATE);
  if (rc)
    return dtx__err_wrap(rc, "%s", op->opname);
  if ((rc = op_split(op, path)))
    return rc;
  if (op->kind != OP_SET && op->kind != OP_SETONINSERT &&
      !strcmp(op->segs[0], "_id"))
    return dtx__err(DTX_EBADUPDATE, "%s: _id is immutable (path '%s')",
                    op->opname, path);
  switch (op->kind) {
  case OP_INC:
    if (!json_is_number(v))
      return dtx__err(DTX_EBADUPDATE,
                      "$inc: argument at '%s' must be a number, not %s", path,
                      type_name(v));
    break;
  case OP_PUSH:
  case OP_ADDTOSET:
    return compile_values(op, v);
  case OP_PULL:
    return compile_pull(op, v);
  case OP_CURDATE:
    return compile_curdate(op, v);
  default:
    break;
  }
  op->arg = json_deep_copy(v);
  return op->arg ? 0 : dtx__err(DTX_ENOMEM, "out of memory compiling update");
}

static int compile_replacement(dtx__update_t *u, const json_t *spec) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)spec, k, v) {
    if (strchr(k, '.'))
      return dtx__err(DTX_EBADUPDATE,
                      "replacement field name '%s' cannot contain '.'", k);
    if (!*k)
      return dtx__err(DTX_EBADUPDATE, "replacement has an empty field name");
  }
  u->replacement = 1;
  u->repl = json_deep_copy(spec);
  return u->repl ? 0 : dtx__err(DTX_ENOMEM, "out of memory compiling update");
}

static int compile_operators(dtx__update_t *u, const json_t *spec) {
  const char *opk, *path;
  json_t *arg, *v;
  size_t total = 0, i;
  int rc;

  json_object_foreach((json_t *)spec, opk, arg) {
    size_t t;
    for (t = 0; t < sizeof op_table / sizeof op_table[0]; t++)
      if (!strcmp(opk, op_table[t].name))
        break;
    if (t == sizeof op_table / sizeof op_table[0]) {
      for (i = 0; i < sizeof unsupported_ops / sizeof unsupported_ops[0]; i++)
        if (!strcmp(opk, unsupported_ops[i]))
          return dtx__err(DTX_EBADUPDATE, "unsupported operator %s", opk);
      return dtx__err(DTX_EBADUPDATE, "unknown operator %s", opk);
    }
    if (!json_is_object(arg))
      return dtx__err(DTX_EBADUPDATE, "%s: argument must be an object", opk);
    if (json_object_size(arg) == 0)
      return dtx__err(DTX_EBADUPDATE, "%s: empty argument", opk);
    total += json_object_size(arg);
  }

  u->ops = calloc(total, sizeof *u->ops);
  if (!u->ops)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  json_object_foreach((json_t *)spec, opk, arg) {
    size_t t;
    for (t = 0; strcmp(opk, op_table[t].name); t++)
      ;
    json_object_foreach(arg, path, v) {
      upd_op_t *op = &u->ops[u->nops++];
      op->kind = op_table[t].kind;
      op->opname = op_table[t].name;
      if ((rc = compile_field(op, path, v)))
        return rc;
    }
  }

  /* After sorting, a path that is a prefix of another sits right before a
   * path it prefixes (see seg_cmp), so neighbours are all we compare. */
  qsort(u->ops, u->nops, sizeof *u->ops, op_path_cmp);
  for (i = 1; i < u->nops; i++)
    if (op_is_prefix(&u->ops[i - 1], &u->ops[i]))
      return dtx__err(DTX_EBADUPDATE,
                      "conflicting paths: '%s' (%s) and '%s' (%s)",
                      u->ops[i - 1].path, u->ops[i - 1].opname, u->ops[i].path,
                      u->ops[i].opname);
  return 0;
}

int dtx__update_compile(const json_t *spec, dtx__update_t **out) {
  dtx__update_t *u;
  const char *k, *first_op = NULL, *first_field = NULL;
  json_t *v;
  int rc;

  if (!out)
    return dtx__err(DTX_EINVAL, "update: NULL out-parameter");
  *out = NULL;
  if (!json_is_object(spec))
    return dtx__err(DTX_EBADUPDATE, "update must be a JSON object, not %s",
                    spec ? type_name(spec) : "NULL");
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

  u = calloc(1, sizeof *u);
  if (!u)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  rc = first_op ? compile_operators(u, spec) : compile_replacement(u, spec);
  if (rc) {
    dtx__update_free(u);
    return rc;
  }
  *out = u;
  return 0;
}

int dtx__update_is_replacement(const dtx__update_t *u) {
  return u && u->replacement;
}

/* ---- apply --------------------------------------------------------------- */

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
                    op->opname, PAD_MAX, op->path);
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

/* The detail names the prefix that holds the scalar, as MongoDB's "Cannot
 * create field 'b' in element {a: 5}" does. */
static int not_traversable(const upd_op_t *op, size_t i, const json_t *at) {
  int plen = i ? (int)(op->segs[i] - op->segbuf - 1) : 0;
  return dtx__err(DTX_ETYPE,
                  "%s: cannot create field '%s' in %s value at '%.*s' (path "
                  "'%s')",
                  op->opname, op->segs[i], type_name(at), plen, op->path,
                  op->path);
}

/* Finds the object or array that holds op's last segment.  With create,
 * missing intermediate fields become objects (array slots are padded).
 * Returns 1 with *parent set; 0 when the path is missing or runs through a
 * scalar and create is off (the caller makes that a no-op); or an error. */
static int walk(const upd_op_t *op, json_t *root, int create, json_t **parent) {
  json_t *cur = root;
  size_t i, idx;
  int rc;
  for (i = 0; i < op->nsegs; i++) {
    const char *seg = op->segs[i];
    json_t *next;
    if (json_is_object(cur)) {
      if (i + 1 == op->nsegs)
        break;
      next = json_object_get(cur, seg);
      if (!next) {
        if (!create)
          return 0;
        next = json_object();
        if (!next || json_object_set_new(cur, seg, next))
          return dtx__err(DTX_ENOMEM, "out of memory applying update");
      }
    } else if (json_is_array(cur)) {
      if (!seg_index(seg, &idx)) {
        if (!create)
          return 0;
        return not_traversable(op, i, cur);
      }
      if (i + 1 == op->nsegs)
        break;
      next = json_array_get(cur, idx);
      if (!next) {
        if (!create)
          return 0;
        if ((rc = array_put(op, cur, idx, json_object())))
          return rc;
        next = json_array_get(cur, idx);
      }
    } else {
      if (!create)
        return 0;
      return not_traversable(op, i, cur);
    }
    cur = next;
  }
  *parent = cur;
  return 1;
}

/* The current value at op's last segment in parent, or NULL. */
static json_t *slot_get(const upd_op_t *op, json_t *parent) {
  const char *seg = op->segs[op->nsegs - 1];
  size_t idx;
  if (json_is_object(parent))
    return json_object_get(parent, seg);
  if (seg_index(seg, &idx))
    return json_array_get(parent, idx);
  return NULL;
}

/* Stores v (stolen) at op's last segment in parent.  walk() guarantees an
 * array parent only with a numeric last segment. */
static int slot_put(const upd_op_t *op, json_t *parent, json_t *v) {
  const char *seg = op->segs[op->nsegs - 1];
  size_t idx = 0;
  if (!v)
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  if (json_is_object(parent)) {
    if (json_object_set_new(parent, seg, v))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    return 0;
  }
  seg_index(seg, &idx);
  return array_put(op, parent, idx, v);
}

static int apply_inc(const upd_op_t *op, json_t *parent, json_t *cur) {
  json_t *res;
  if (!cur)
    return slot_put(op, parent, json_deep_copy(op->arg));
  if (!json_is_number(cur))
    return dtx__err(DTX_ETYPE,
                    "$inc: cannot increment non-numeric value at '%s' (%s)",
                    op->path, type_name(cur));
  if (json_is_integer(cur) && json_is_integer(op->arg)) {
    json_int_t sum;
    if (__builtin_add_overflow(json_integer_value(cur),
                               json_integer_value(op->arg), &sum))
      return dtx__err(DTX_EOVERFLOW,
                      "$inc: %" JSON_INTEGER_FORMAT " + %" JSON_INTEGER_FORMAT
                      " overflows int64 at '%s'",
                      json_integer_value(cur), json_integer_value(op->arg),
                      op->path);
    res = json_integer(sum);
  } else {
    /* jansson refuses non-finite reals, so NULL here is overflow too. */
    res = json_real(json_number_value(cur) + json_number_value(op->arg));
    if (!res)
      return dtx__err(DTX_EOVERFLOW, "$inc: result is not finite at '%s'",
                      op->path);
  }
  return slot_put(op, parent, res);
}

/* 1 when the array element e matches op's $pull argument. */
static int pull_matches(const upd_op_t *op, json_t *e, int *err) {
  switch (op->pull_mode) {
  case PULL_EQ:
    return dtx__value_cmp(e, op->arg) == 0;
  case PULL_QUERY:
    return json_is_object(e) && dtx__filter_match(op->cond, e);
  case PULL_WRAPPED: {
    json_t *wrap = json_object();
    int m;
    if (!wrap || json_object_set(wrap, "v", e)) {
      json_decref(wrap);
      *err = dtx__err(DTX_ENOMEM, "out of memory applying update");
      return 0;
    }
    m = dtx__filter_match(op->cond, wrap);
    json_decref(wrap);
    return m;
  }
  }
  return 0;
}

static int apply_pull(const upd_op_t *op, json_t *cur) {
  size_t i;
  int err = 0;
  if (!cur)
    return 0;
  if (!json_is_array(cur))
    return dtx__err(DTX_ETYPE,
                    "$pull: cannot apply to non-array value at '%s' (%s)",
                    op->path, type_name(cur));
  /* Backwards, so removals do not shift the elements still to visit. */
  for (i = json_array_size(cur); i-- > 0;) {
    int m = pull_matches(op, json_array_get(cur, i), &err);
    if (err)
      return err;
    if (m && json_array_remove(cur, i))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
  }
  return 0;
}

static int array_contains(const json_t *arr, const json_t *v) {
  size_t i;
  for (i = 0; i < json_array_size(arr); i++)
    if (dtx__value_cmp(json_array_get(arr, i), v) == 0)
      return 1;
  return 0;
}

/* $push and $addToSet: append op->arg's values to the array at the slot,
 * creating it when missing.  unique skips values already present. */
static int apply_append(const upd_op_t *op, json_t *parent, json_t *cur,
                        int unique) {
  size_t i;
  int rc;
  if (cur && !json_is_array(cur))
    return dtx__err(DTX_ETYPE,
                    "%s: cannot append to non-array value at "
                    "'%s' (%s)",
                    op->opname, op->path, type_name(cur));
  if (!cur) {
    cur = json_array();
    if ((rc = slot_put(op, parent, cur)))
      return rc;
  }
  for (i = 0; i < json_array_size(op->arg); i++) {
    json_t *v = json_array_get(op->arg, i);
    if (unique && array_contains(cur, v))
      continue;
    if (json_array_append_new(cur, json_deep_copy(v)))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
  }
  return 0;
}

static int apply_op(const upd_op_t *op, json_t *doc, int is_insert,
                    int64_t now_ms) {
  json_t *parent = NULL, *cur;
  int create = op->kind != OP_UNSET && op->kind != OP_PULL;
  int rc;

  if (op->kind == OP_SETONINSERT && !is_insert)
    return 0;
  rc = walk(op, doc, create, &parent);
  if (rc <= 0)
    return rc;
  cur = slot_get(op, parent);

  switch (op->kind) {
  case OP_SET:
  case OP_SETONINSERT:
    if (cur && same(cur, op->arg))
      return 0;
    return slot_put(op, parent, json_deep_copy(op->arg));
  case OP_CURDATE:
    return slot_put(op, parent, json_integer(now_ms));
  case OP_UNSET:
    if (!cur)
      return 0;
    if (json_is_object(parent)) {
      json_object_del(parent, op->segs[op->nsegs - 1]);
      return 0;
    }
    /* MongoDB keeps array positions stable: the element becomes null. */
    return slot_put(op, parent, json_null());
  case OP_INC:
    return apply_inc(op, parent, cur);
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
  case OP_PUSH:
    return apply_append(op, parent, cur, 0);
  case OP_ADDTOSET:
    return apply_append(op, parent, cur, 1);
  case OP_PULL:
    return apply_pull(op, cur);
  }
  return 0;
}

/* A replacement keeps the stored _id (first, as MongoDB stores it); one
 * that names a different _id is refused. */
static int apply_replacement(const dtx__update_t *u, const json_t *doc,
                             json_t **res) {
  const json_t *did = json_object_get(doc, "_id");
  const json_t *rid = json_object_get(u->repl, "_id");
  const char *k;
  json_t *v, *r;

  *res = NULL;
  if (did && rid && !same(did, rid))
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
    if (!strcmp(u->ops[i].segs[0], "_id"))
      return &u->ops[i];
  return NULL;
}

int dtx__update_apply(const dtx__update_t *u, const json_t *doc, int is_insert,
                      int64_t now_ms, json_t **out, int *changed) {
  json_t *res = NULL;
  const json_t *did;
  size_t i;
  int rc;

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
    res = json_deep_copy(doc);
    if (!res)
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    for (i = 0; i < u->nops; i++) {
      if ((rc = apply_op(&u->ops[i], res, is_insert, now_ms))) {
        json_decref(res);
        return rc;
      }
    }
    did = json_object_get(doc, "_id");
    if (did) {
      const json_t *nid = json_object_get(res, "_id");
      if (!nid || !same(did, nid)) {
        const upd_op_t *op = id_op(u);
        json_decref(res);
        return dtx__err(DTX_EIMMUTABLE, "%s: _id is immutable (path '%s')",
                        op ? op->opname : "update", op ? op->path : "_id");
      }
    }
  }
  if (changed)
    *changed = !same(res, doc);
  *out = res;
  return 0;
}
