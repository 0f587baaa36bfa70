/* bupdate.c -- compiling MongoDB update documents given as BSON.
 *
 * The twin of update.c's compile half: the same checks, in the same
 * order, with the same details, so that both engines refuse the same
 * specs alike (tests/unit/test_update.c runs its rows through both).  The
 * differences come from BSON's types:
 *  - $inc/$mul take any of int32, int64, double and Decimal128;
 *  - $bit takes int32 and int64 operands;
 *  - operands are views into the update's own copy of the spec's bytes
 *    (one copy in the arena), never json_t: compiling a spec allocates the
 *    arena's chunks and nothing per field.
 * The path rules, the order operations apply in and the conflict check
 * are update.c's own functions (update_int.h). */
#include "doc/bupdate_int.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  enum op_kind kind;
} op_table[] = {
    {"$set", OP_SET},
    {"$setOnInsert", OP_SETONINSERT},
    {"$unset", OP_UNSET},
    {"$inc", OP_INC},
    {"$mul", OP_MUL},
    {"$min", OP_MIN},
    {"$max", OP_MAX},
    {"$push", OP_PUSH},
    {"$addToSet", OP_ADDTOSET},
    {"$pull", OP_PULL},
    {"$pullAll", OP_PULLALL},
    {"$pop", OP_POP},
    {"$rename", OP_RENAME},
    {"$bit", OP_BIT},
    {"$currentDate", OP_CURDATE},
};
#define NOPS (sizeof op_table / sizeof op_table[0])

_Static_assert(offsetof(struct dtx__bupdate, first) % 8 == 0,
               "a BSON update's first arena chunk is 8-aligned");

const char *dtx__bupd_tname(bson_type_t t) {
  switch ((int)t) {
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
    return "integer";
  case BSON_TYPE_DOUBLE:
    return "real";
  case BSON_TYPE_BOOL:
    return "boolean";
  default:
    return dtx__btype_name(t); /* object, array, string, null, date ... */
  }
}

int dtx__bupd_vdepth(const dtx__bval_t *v) {
  int best = 0;
  uint32_t off = 0;
  dtx__belem_t e;
  if (v->type != BSON_TYPE_DOCUMENT && v->type != BSON_TYPE_ARRAY)
    return 0;
  while (dtx__belem_next(v->data, v->len, &off, &e)) {
    int d = dtx__bupd_vdepth(&e.v);
    if (d > best)
      best = d;
  }
  return best + 1;
}

void dtx__bupdate_free(dtx__bupdate_t *u) {
  if (!u)
    return;
  for (size_t i = 0; i < u->nops; i++)
    dtx__bfilter_free(u->ops[i].cond);
  for (size_t i = 0; i < u->naf; i++)
    dtx__bfilter_free(u->af[i].f);
  dtx__arena_free(&u->arena);
  free(u);
}

int dtx__bupdate_is_replacement(const dtx__bupdate_t *u) {
  return u && u->replacement;
}

void dtx__bupdate_bind_filter(dtx__bupdate_t *u, const dtx__bfilter_t *f) {
  if (u)
    u->filter = f;
}

const dtx__bfilter_t *dtx__bupdate_filter(const dtx__bupdate_t *u) {
  return u ? u->filter : NULL;
}

/* Compiles the filter document data[0..len) (bytes checked by the
 * caller's document, or built here). */
static int filter_of(const uint8_t *data, uint32_t len, dtx__bfilter_t **f) {
  bson_t b;
  if (!bson_init_static(&b, data, len))
    return dtx__err(DTX_EBADQUERY, "filter: bad document length");
  return dtx__bfilter_compile(&b, f);
}

/* A NUL-terminated copy of an element's name in the arena: names in BSON
 * are NUL-terminated already, but the path helpers want their own. */
static int num_is(const dtx__bval_t *v, double want) {
  switch ((int)v->type) {
  case BSON_TYPE_INT32:
    return dtx__bval_int32(v) == want;
  case BSON_TYPE_INT64:
    return (double)dtx__bval_int64(v) == want;
  case BSON_TYPE_DOUBLE:
    return dtx__bval_double(v) == want;
  default:
    return 0;
  }
}

static int compile_curdate(bop_t *op, const dtx__bval_t *v) {
  dtx__belem_t e;
  uint32_t off = 0, n = 0, slen = 0;
  const char *ts = NULL;
  if (v->type == BSON_TYPE_BOOL)
    return 0;
  if (v->type == BSON_TYPE_DOCUMENT) {
    while (dtx__belem_next(v->data, v->len, &off, &e)) {
      n++;
      if (!strcmp(e.key, "$type") && e.v.type == BSON_TYPE_UTF8)
        ts = dtx__bval_str(&e.v, &slen);
    }
  }
  if (v->type != BSON_TYPE_DOCUMENT || n != 1 || !ts ||
      !((slen == 4 && !memcmp(ts, "date", 4)) ||
        (slen == 9 && !memcmp(ts, "timestamp", 9))))
    return dtx__err(DTX_EBADUPDATE,
                    "$currentDate: expected true or {$type:\"date\"|"
                    "\"timestamp\"} at '%s'",
                    op->p.path);
  op->timestamp = slen == 9;
  return 0;
}

static int compile_bit(bop_t *op, const dtx__bval_t *v) {
  dtx__belem_t e;
  uint32_t off = 0;
  if (v->type != BSON_TYPE_DOCUMENT || v->len <= 5)
    return dtx__err(DTX_EBADUPDATE,
                    "$bit: argument at '%s' must be an object such as "
                    "{and: 5}",
                    op->p.path);
  while (dtx__belem_next(v->data, v->len, &off, &e)) {
    if (strcmp(e.key, "and") && strcmp(e.key, "or") && strcmp(e.key, "xor"))
      return dtx__err(DTX_EBADUPDATE,
                      "$bit: unknown bitwise operation '%s' at '%s' "
                      "(expected and, or, xor)",
                      e.key, op->p.path);
    if (e.v.type != BSON_TYPE_INT32 && e.v.type != BSON_TYPE_INT64)
      return dtx__err(DTX_EBADUPDATE,
                      "$bit: the %s operand at '%s' must be an integer, not "
                      "%s",
                      e.key, op->p.path, dtx__bupd_tname(e.v.type));
  }
  return 0;
}

static int compile_rename(dtx__bupdate_t *u, bop_t *op, const dtx__bval_t *v) {
  int rc;
  uint32_t n;
  if (v->type != BSON_TYPE_UTF8)
    return dtx__err(DTX_EBADUPDATE,
                    "$rename: the new name for '%s' must be a string",
                    op->p.path);
  const char *to = dtx__bval_str(v, &n);
  if (memchr(to, '\0', n))
    return dtx__err(DTX_EBADUPDATE,
                    "$rename: the new name for '%s' holds "
                    "a NUL byte",
                    op->p.path);
  if ((rc = dtx__upd_check_path(op->opname, to, 0)))
    return rc;
  if ((rc = dtx__upd_path_split_in(&u->arena, &op->to, to)))
    return rc;
  if (!strcmp(op->to.segs[0], "_id"))
    return dtx__err(DTX_EBADUPDATE, "$rename: _id is immutable (path '%s')",
                    to);
  if (dtx__upd_segs_prefix(op->p.segs, op->p.nsegs, op->to.segs,
                           op->to.nsegs) ||
      dtx__upd_segs_prefix(op->to.segs, op->to.nsegs, op->p.segs, op->p.nsegs))
    return dtx__err(DTX_EBADUPDATE,
                    "$rename: the source '%s' and target '%s' must differ "
                    "and not be on the same path",
                    op->p.path, to);
  return 0;
}

/* $pull: a value (PULL_EQ), or a condition that the BSON filter (helper
 * bfilter) compiles; see update.c's compile_pull for MongoDB's reading. */
static int compile_pull(bop_t *op, const dtx__bval_t *v) {
  dtx__belem_t e;
  if (v->type != BSON_TYPE_DOCUMENT) {
    op->pull_mode = PULL_EQ;
    return 0;
  }
  uint32_t off = 0;
  const char *first = dtx__belem_next(v->data, v->len, &off, &e) ? e.key : "";
  if (first[0] == '$' && strcmp(first, "$and") && strcmp(first, "$or") &&
      strcmp(first, "$nor"))
    op->pull_mode = PULL_WRAPPED;
  else
    op->pull_mode = PULL_QUERY;
  int rc;
  if (op->pull_mode == PULL_QUERY) {
    rc = filter_of(v->data, v->len, &op->cond);
  } else {
    /* {v: <the condition>}, run on {v: element}: one small document,
     * built once, that the filter copies. */
    uint32_t n = 4 + 1 + 2 + v->len + 1;
    uint8_t *w = malloc(n);
    if (!w)
      return dtx__err(DTX_ENOMEM, "out of memory compiling update");
    uint32_t le = BSON_UINT32_TO_LE(n);
    memcpy(w, &le, 4);
    w[4] = (uint8_t)v->type;
    w[5] = 'v';
    w[6] = 0;
    memcpy(w + 7, v->data, v->len);
    w[n - 1] = 0;
    rc = filter_of(w, n, &op->cond);
    free(w);
  }
  if (rc == DTX_EBADQUERY)
    return dtx__err_wrap(DTX_EBADUPDATE, "$pull: bad condition at '%s'",
                         op->p.path);
  return rc;
}

static int compile_field(dtx__bupdate_t *u, bop_t *op, const char *path,
                         const dtx__bval_t *v) {
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
  op->arg = *v;
  switch (op->kind) {
  case OP_SET:
  case OP_SETONINSERT:
  case OP_MIN:
  case OP_MAX:
    op->vdepth = dtx__bupd_vdepth(v);
    return 0;
  case OP_INC:
  case OP_MUL:
    if (!dtx__bval_is_number(v))
      return dtx__err(DTX_EBADUPDATE,
                      "%s: argument at '%s' must be a number, not %s",
                      op->opname, path, dtx__bupd_tname(v->type));
    return 0;
  case OP_PUSH:
  case OP_ADDTOSET:
    return dtx__bupd_compile_push(op, v);
  case OP_PULL:
    return compile_pull(op, v);
  case OP_PULLALL:
    if (v->type != BSON_TYPE_ARRAY)
      return dtx__err(DTX_EBADUPDATE,
                      "$pullAll: argument at '%s' must be an array, not %s",
                      path, dtx__bupd_tname(v->type));
    return 0;
  case OP_POP:
    if (!num_is(v, 1) && !num_is(v, -1))
      return dtx__err(DTX_EBADUPDATE, "$pop: expects 1 or -1 at '%s'", path);
    return 0;
  case OP_BIT:
    return compile_bit(op, v);
  case OP_RENAME:
    return compile_rename(u, op, v);
  case OP_CURDATE:
    return compile_curdate(op, v);
  default:
    return 0;
  }
}

static int compile_replacement(dtx__bupdate_t *u) {
  dtx__belem_t e;
  uint32_t off = 0;
  while (dtx__belem_next(u->spec, u->speclen, &off, &e))
    if (!e.keylen)
      return dtx__err(DTX_EBADUPDATE, "replacement has an empty field name");
  u->replacement = 1;
  u->repl = dtx__bval_of_doc(u->spec, u->speclen);
  return 0;
}

static const char *bop_order_key(const bop_t *op, size_t *n,
                                 char *const **segs) {
  const upath_t *p = op->kind == OP_RENAME ? &op->to : &op->p;
  *n = p->nsegs;
  *segs = p->segs;
  return p->path;
}

static int bop_order_cmp(const void *pa, const void *pb) {
  size_t na, nb;
  char *const *sa, *const *sb;
  bop_order_key(pa, &na, &sa);
  bop_order_key(pb, &nb, &sb);
  return dtx__upd_segs_cmp(sa, na, sb, nb);
}

static int compile_operators(dtx__bupdate_t *u) {
  dtx__belem_t oe, fe;
  uint32_t off = 0, foff;
  size_t total = 0, i;
  int rc;

  while (dtx__belem_next(u->spec, u->speclen, &off, &oe)) {
    size_t t;
    for (t = 0; t < NOPS; t++)
      if (!strcmp(oe.key, op_table[t].name))
        break;
    if (t == NOPS)
      return dtx__err(DTX_EBADUPDATE, "unknown operator %s", oe.key);
    if (oe.v.type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADUPDATE, "%s: argument must be an object", oe.key);
    if (oe.v.len <= 5)
      return dtx__err(DTX_EBADUPDATE, "%s: empty argument", oe.key);
    for (foff = 0; dtx__belem_next(oe.v.data, oe.v.len, &foff, &fe);)
      total++;
  }
  u->ops = dtx__arena_alloc(&u->arena, total * sizeof *u->ops);
  if (!u->ops)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  for (off = 0; dtx__belem_next(u->spec, u->speclen, &off, &oe);) {
    size_t t;
    for (t = 0; strcmp(oe.key, op_table[t].name); t++)
      ;
    for (foff = 0; dtx__belem_next(oe.v.data, oe.v.len, &foff, &fe);) {
      bop_t *op = &u->ops[u->nops++];
      op->kind = op_table[t].kind;
      op->opname = op_table[t].name;
      if ((rc = compile_field(u, op, fe.key, &fe.v)))
        return rc;
      u->positional |= op->positional;
      for (size_t s = 0; s < op->p.nsegs; s++)
        if (!strcmp(op->p.segs[s], "$"))
          u->uses_dollar = 1;
    }
  }
  qsort(u->ops, u->nops, sizeof *u->ops, bop_order_cmp);
  wpath_t wbuf[16];
  wpath_t *w = 2 * u->nops <= sizeof wbuf / sizeof wbuf[0]
                   ? wbuf
                   : malloc(2 * u->nops * sizeof *w);
  size_t nw = 0;
  if (!w)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  for (i = 0; i < u->nops; i++) {
    const bop_t *op = &u->ops[i];
    w[nw++] = (wpath_t){op->p.segs, op->p.nsegs, op->p.path, op->opname};
    if (op->kind == OP_RENAME)
      w[nw++] = (wpath_t){op->to.segs, op->to.nsegs, op->to.path, op->opname};
  }
  rc = dtx__upd_check_conflicts(w, nw, 0);
  if (w != wbuf)
    free(w);
  return rc;
}

/* ---- arrayFilters (update_array.c's dtx__upd_array_filters on BSON) ---- */

/* The identifier a filter document speaks of: the first segment of every
 * field name, also inside $and/$or/$nor.  All must agree. */
static int filter_ident(const dtx__bval_t *f, const char **id, size_t *n,
                        size_t idx, int depth) {
  dtx__belem_t e, x;
  uint32_t off = 0, xo;
  if (f->type != BSON_TYPE_DOCUMENT)
    return dtx__err(DTX_EBADUPDATE,
                    "arrayFilters[%zu]: a filter must be an "
                    "object",
                    idx);
  if (depth > 100)
    return dtx__err(DTX_EBADUPDATE, "arrayFilters[%zu]: nested too deeply",
                    idx);
  while (dtx__belem_next(f->data, f->len, &off, &e)) {
    if (!strcmp(e.key, "$and") || !strcmp(e.key, "$or") ||
        !strcmp(e.key, "$nor")) {
      if (e.v.type != BSON_TYPE_ARRAY)
        return dtx__err(DTX_EBADUPDATE,
                        "arrayFilters[%zu]: %s needs an "
                        "array",
                        idx, e.key);
      for (xo = 0; dtx__belem_next(e.v.data, e.v.len, &xo, &x);) {
        int rc = filter_ident(&x.v, id, n, idx, depth + 1);
        if (rc)
          return rc;
      }
      continue;
    }
    if (e.key[0] == '$')
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters[%zu]: unsupported top-level operator %s",
                      idx, e.key);
    size_t len = strcspn(e.key, ".");
    if (*id && (len != *n || memcmp(e.key, *id, len)))
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters[%zu]: expected a single top-level field "
                      "name, found '%.*s' and '%.*s'",
                      idx, (int)*n, *id, (int)len, e.key);
    *id = e.key;
    *n = len;
  }
  return 0;
}

static int ident_used(const dtx__bupdate_t *u, const char *id) {
  for (size_t i = 0; i < u->nops; i++)
    for (size_t s = 0; s < u->ops[i].p.nsegs; s++) {
      const char *fid;
      size_t n;
      if (dtx__upd_seg_kind(u->ops[i].p.segs[s], &fid, &n) == SEG_FILTERED &&
          strlen(id) == n && !memcmp(fid, id, n))
        return 1;
    }
  return 0;
}

static int compile_array_filters(dtx__bupdate_t *u, const dtx__bval_t *afs) {
  dtx__belem_t e;
  uint32_t off = 0;
  size_t i = 0, n = 0;
  int rc;
  if (afs && afs->type != BSON_TYPE_ARRAY)
    return dtx__err(DTX_EBADUPDATE, "arrayFilters must be an array");
  if (afs)
    while (dtx__belem_next(afs->data, afs->len, &off, &e))
      n++;
  if (n && !(u->af = dtx__arena_alloc(&u->arena, n * sizeof *u->af)))
    return dtx__err(DTX_ENOMEM, "out of memory compiling arrayFilters");
  for (off = 0; afs && dtx__belem_next(afs->data, afs->len, &off, &e); i++) {
    const char *id = NULL;
    size_t len = 0;
    if ((rc = filter_ident(&e.v, &id, &len, i, 0)))
      return rc;
    if (!id)
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters[%zu]: a filter cannot be "
                      "empty",
                      i);
    if (!dtx__upd_ident_ok(id, len))
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters[%zu]: identifier '%.*s' must be a "
                      "lowercase letter followed by letters and digits",
                      i, (int)len, id);
    for (size_t j = 0; j < u->naf; j++)
      if (strlen(u->af[j].id) == len && !memcmp(u->af[j].id, id, len))
        return dtx__err(DTX_EBADUPDATE,
                        "arrayFilters: several filters for identifier '%.*s'",
                        (int)len, id);
    bafilter_t *a = &u->af[u->naf++];
    if (!(a->id = dtx__arena_strndup(&u->arena, id, len)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling arrayFilters");
    if ((rc = filter_of(e.v.data, e.v.len, &a->f)))
      return dtx__err_wrap(rc == DTX_EBADQUERY ? DTX_EBADUPDATE : rc,
                           "arrayFilters[%zu]", i);
    if (!ident_used(u, a->id))
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters: the filter for identifier '%s' is not "
                      "used in the update",
                      a->id);
  }
  /* And the other way round: every $[id] needs its filter. */
  for (i = 0; i < u->nops; i++)
    for (size_t s = 0; s < u->ops[i].p.nsegs; s++) {
      const char *fid;
      size_t len;
      if (dtx__upd_seg_kind(u->ops[i].p.segs[s], &fid, &len) != SEG_FILTERED)
        continue;
      size_t j;
      for (j = 0; j < u->naf; j++)
        if (strlen(u->af[j].id) == len && !memcmp(u->af[j].id, fid, len))
          break;
      if (j == u->naf)
        return dtx__err(DTX_EBADUPDATE,
                        "no array filter found for identifier '%.*s' in path "
                        "'%s'",
                        (int)len, fid, u->ops[i].p.path);
    }
  return 0;
}

int dtx__bupdate_compile(const uint8_t *spec, uint32_t len,
                         const dtx__bval_t *afs, unsigned flags,
                         dtx__bupdate_t **out) {
  dtx__bupdate_t *u;
  dtx__belem_t e;
  uint32_t off = 0;
  const char *first_op = NULL, *first_field = NULL;
  int rc;

  (void)flags;
  if (!out)
    return dtx__err(DTX_EINVAL, "update: NULL out-parameter");
  *out = NULL;
  if (!spec || len < 5)
    return dtx__err(DTX_EBADUPDATE, "update must be a JSON object, not %s",
                    "NULL");
  while (dtx__belem_next(spec, len, &off, &e)) {
    if (e.key[0] == '$') {
      if (!first_op)
        first_op = e.key;
    } else if (!first_field) {
      first_field = e.key;
    }
  }
  if (first_op && first_field)
    return dtx__err(DTX_EBADUPDATE,
                    "update mixes operators (%s) and fields ('%s')", first_op,
                    first_field);
  u = malloc(BUPDATE_BYTES);
  if (!u)
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  memset(u, 0, sizeof *u);
  dtx__arena_init(&u->arena, u->first,
                  BUPDATE_BYTES - offsetof(dtx__bupdate_t, first));
  /* One copy of the spec: every operand is a view into it. */
  u->spec = dtx__arena_alloc(&u->arena, len);
  if (!u->spec) {
    dtx__bupdate_free(u);
    return dtx__err(DTX_ENOMEM, "out of memory compiling update");
  }
  memcpy(u->spec, spec, len);
  u->speclen = len;
  rc = first_op ? compile_operators(u) : compile_replacement(u);
  if (rc == 0)
    rc = compile_array_filters(u, afs);
  if (rc) {
    dtx__bupdate_free(u);
    return rc;
  }
  *out = u;
  return 0;
}
