/* update_array.c -- array-aware parts of updates: positional paths and the
 * $push modifiers.
 *
 * Positional segments (the manual's "Update Operators > Array"):
 *   $       the element the query matched, from the position the filter
 *           reports (dtx__filter_match_pos); no such position is
 *           DTX_EBADUPDATE "the positional operator did not find the match
 *           needed from the query";
 *   $[]     every element of the array;
 *   $[id]   every element for which arrayFilters' filter for id matches;
 *           the filter is run on {id: element}, so {"x.grade": {$gte: 85}}
 *           reads the element's grade.
 * An array that $[] or $[id] names must exist (DTX_EBADUPDATE, "the path
 * must exist in the document in order to apply array updates") and be an
 * array (DTX_ETYPE).  Every identifier used needs a filter and every
 * filter must be used, or the update is refused before it runs.
 *
 * $push modifiers ($each with $position, $sort, $slice): the values are
 * inserted at $position (from the end when negative), then the whole array
 * is sorted (stable; by value for 1/-1, by the fields of a sort spec for
 * documents), then cut to $slice elements (the last ones when negative),
 * in that order whatever the order in the spec.  An object value without
 * $each is a value to push, '$' names and all, as MongoDB 5.0 stores it.
 */
#include "doc/update_int.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- segments and identifiers -------------------------------------------- */

int dtx__upd_seg_kind(const char *seg, const char **id, size_t *idlen) {
  size_t n = strlen(seg);
  if (!strcmp(seg, "$"))
    return SEG_DOLLAR;
  if (!strcmp(seg, "$[]"))
    return SEG_ALL;
  if (n > 3 && seg[0] == '$' && seg[1] == '[' && seg[n - 1] == ']') {
    *id = seg + 2;
    *idlen = n - 3;
    return SEG_FILTERED;
  }
  return SEG_PLAIN;
}

int dtx__upd_ident_ok(const char *id, size_t n) {
  if (n == 0 || id[0] < 'a' || id[0] > 'z')
    return 0;
  for (size_t i = 1; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
          (id[i] >= '0' && id[i] <= '9')))
      return 0;
  return 1;
}

/* ---- arrayFilters ------------------------------------------------------- */

/* The identifier a filter document speaks of: the first segment of every
 * field name, also inside $and/$or/$nor.  All must agree. */
static int filter_ident(const json_t *f, const char **id, size_t *n,
                        size_t idx, int depth) {
  const char *k;
  json_t *v;
  if (!json_is_object(f))
    return dtx__err(DTX_EBADUPDATE, "arrayFilters[%zu]: a filter must be an "
                                    "object", idx);
  if (depth > 100)
    return dtx__err(DTX_EBADUPDATE, "arrayFilters[%zu]: nested too deeply",
                    idx);
  json_object_foreach((json_t *)f, k, v) {
    if (!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) {
      size_t i;
      json_t *e;
      if (!json_is_array(v))
        return dtx__err(DTX_EBADUPDATE, "arrayFilters[%zu]: %s needs an "
                                        "array", idx, k);
      json_array_foreach(v, i, e) {
        int rc = filter_ident(e, id, n, idx, depth + 1);
        if (rc)
          return rc;
      }
      continue;
    }
    if (k[0] == '$')
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters[%zu]: unsupported top-level operator %s",
                      idx, k);
    size_t len = strcspn(k, ".");
    if (*id && (len != *n || memcmp(k, *id, len)))
      return dtx__err(DTX_EBADUPDATE,
                      "arrayFilters[%zu]: expected a single top-level field "
                      "name, found '%.*s' and '%.*s'",
                      idx, (int)*n, *id, (int)len, k);
    *id = k;
    *n = len;
  }
  return 0;
}

/* Whether some positional path of u names identifier id. */
static int ident_used(const dtx__update_t *u, const char *id) {
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

int dtx__upd_array_filters(dtx__update_t *u, const json_t *afs) {
  size_t i;
  json_t *f;
  int rc;
  if (afs && !json_is_array(afs))
    return dtx__err(DTX_EBADUPDATE, "arrayFilters must be an array");
  size_t n = afs ? json_array_size(afs) : 0;
  if (n && !(u->af = dtx__arena_alloc(&u->arena, n * sizeof *u->af)))
    return dtx__err(DTX_ENOMEM, "out of memory compiling arrayFilters");
  json_array_foreach(afs, i, f) {
    const char *id = NULL;
    size_t len = 0;
    if ((rc = filter_ident(f, &id, &len, i, 0)))
      return rc;
    if (!id)
      return dtx__err(DTX_EBADUPDATE, "arrayFilters[%zu]: a filter cannot be "
                                      "empty", i);
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
    afilter_t *a = &u->af[u->naf++];
    if (!(a->id = dtx__arena_strndup(&u->arena, id, len)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling arrayFilters");
    if ((rc = dtx__filter_compile_flags(f, u->flags, &a->f)))
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

/* 1 when element e passes the filter for id; errors through *err. */
static int af_match(const dtx__update_t *u, const char *id, size_t len,
                    const json_t *e, int *err) {
  for (size_t j = 0; j < u->naf; j++) {
    if (strlen(u->af[j].id) != len || memcmp(u->af[j].id, id, len))
      continue;
    json_t *w = json_object();
    if (!w || json_object_set(w, u->af[j].id, (json_t *)e)) {
      json_decref(w);
      *err = dtx__err(DTX_ENOMEM, "out of memory matching arrayFilters");
      return 0;
    }
    int m = dtx__filter_match(u->af[j].f, w);
    json_decref(w);
    if ((*err = dtx__filter_error(u->af[j].f)))
      return 0;
    return m;
  }
  *err = dtx__err(DTX_EBADUPDATE, "no array filter for '%.*s'", (int)len, id);
  return 0;
}

/* ---- positional expansion ---------------------------------------------------- */

typedef struct expander {
  const dtx__update_t *u;
  const upd_op_t *op;
  size_t pos;
  target_t **ts;
  size_t *n, *cap;
  char path[2048]; /* the concrete path built so far */
} expander_t;

static int emit(expander_t *x) {
  if (*x->n == *x->cap && DTX__GROW(*x->ts, *x->cap, 8))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  target_t *t = &(*x->ts)[(*x->n)++];
  memset(t, 0, sizeof *t);
  t->op = x->op;
  return dtx__upd_path_split(&t->p, x->path);
}

/* Appends seg to x->path at len; returns the new length or -1. */
static int put_seg(expander_t *x, size_t len, const char *seg) {
  int w = snprintf(x->path + len, sizeof x->path - len, "%s%s",
                   len ? "." : "", seg);
  if (w < 0 || (size_t)w >= sizeof x->path - len)
    return -1;
  return (int)(len + (size_t)w);
}

/* The concrete path of op's segment i onwards, below value cur (NULL when
 * the path is missing here). */
static int expand_at(expander_t *x, size_t i, const json_t *cur, size_t len) {
  const upath_t *p = &x->op->p;
  if (i == p->nsegs)
    return emit(x);
  const char *seg = p->segs[i], *id = NULL;
  size_t idlen = 0;
  int kind = dtx__upd_seg_kind(seg, &id, &idlen);
  char num[24];
  int nl;
  if (kind == SEG_PLAIN || kind == SEG_DOLLAR) {
    const json_t *next = NULL;
    size_t idx;
    if (kind == SEG_DOLLAR) {
      if (x->pos == SIZE_MAX)
        return dtx__err(DTX_EBADUPDATE,
                        "%s: the positional operator did not find the match "
                        "needed from the query (path '%s')",
                        x->op->opname, p->path);
      snprintf(num, sizeof num, "%zu", x->pos);
      seg = num;
    }
    if (json_is_object(cur))
      next = json_object_get(cur, seg);
    else if (json_is_array(cur) && dtx__upd_seg_index(seg, &idx))
      next = json_array_get(cur, idx);
    if ((nl = put_seg(x, len, seg)) < 0)
      return dtx__err(DTX_EBADUPDATE, "%s: path too long", x->op->opname);
    return expand_at(x, i + 1, next, (size_t)nl);
  }
  if (!cur)
    return dtx__err(DTX_EBADUPDATE,
                    "%s: the path '%.*s' must exist in the document in order "
                    "to apply array updates (path '%s')",
                    x->op->opname, (int)len, x->path, p->path);
  if (!json_is_array(cur))
    return dtx__err(DTX_ETYPE,
                    "%s: cannot apply array updates to non-array element "
                    "'%.*s' (%s)",
                    x->op->opname, (int)len, x->path,
                    dtx__value_type_name(cur, DTX__TN_JSON));
  for (size_t k = 0; k < json_array_size(cur); k++) {
    const json_t *e = json_array_get(cur, k);
    int rc = 0;
    if (kind == SEG_FILTERED && !af_match(x->u, id, idlen, e, &rc)) {
      if (rc)
        return rc;
      continue;
    }
    snprintf(num, sizeof num, "%zu", k);
    if ((nl = put_seg(x, len, num)) < 0)
      return dtx__err(DTX_EBADUPDATE, "%s: path too long", x->op->opname);
    if ((rc = expand_at(x, i + 1, e, (size_t)nl)))
      return rc;
    x->path[len] = '\0';
  }
  return 0;
}

int dtx__upd_expand(const dtx__update_t *u, const upd_op_t *op,
                    const json_t *doc, size_t pos, target_t **ts, size_t *n,
                    size_t *cap) {
  expander_t *x = malloc(sizeof *x);
  if (!x)
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  x->u = u;
  x->op = op;
  x->pos = pos;
  x->ts = ts;
  x->n = n;
  x->cap = cap;
  x->path[0] = '\0';
  int rc = expand_at(x, 0, doc, 0);
  free(x);
  return rc;
}

/* ---- $push / $addToSet ------------------------------------------------------- */

/* An integer modifier; integral doubles are accepted, as MongoDB does. */
static int int_mod(const upd_op_t *op, const char *name, const json_t *v,
                   json_int_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return 0;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d == (double)(json_int_t)d && d > -9.2e18 && d < 9.2e18) {
      *out = (json_int_t)d;
      return 0;
    }
  }
  return dtx__err(DTX_EBADUPDATE, "%s: %s at '%s' must be an integer",
                  op->opname, name, op->p.path);
}

static int compile_sort(upd_op_t *op, const json_t *v) {
  if (json_is_number(v) &&
      (json_number_value(v) == 1 || json_number_value(v) == -1)) {
    op->sort = json_integer(json_number_value(v) < 0 ? -1 : 1);
    return op->sort ? 0 : dtx__err(DTX_ENOMEM, "out of memory");
  }
  const char *k;
  json_t *d;
  if (!json_is_object(v) || json_object_size(v) == 0)
    return dtx__err(DTX_EBADUPDATE,
                    "$push: $sort at '%s' must be 1, -1 or a non-empty "
                    "object of field: 1|-1",
                    op->p.path);
  op->sort = json_object();
  if (!op->sort)
    return dtx__err(DTX_ENOMEM, "out of memory");
  json_object_foreach((json_t *)v, k, d) {
    if (dtx__path_check(k, DTX_EBADUPDATE))
      return dtx__err_wrap(DTX_EBADUPDATE, "$push: $sort at '%s'",
                           op->p.path);
    if (!json_is_number(d) ||
        (json_number_value(d) != 1 && json_number_value(d) != -1))
      return dtx__err(DTX_EBADUPDATE,
                      "$push: $sort direction of '%s' at '%s' must be 1 or "
                      "-1",
                      k, op->p.path);
    json_object_set_new(op->sort, k,
                        json_integer(json_number_value(d) < 0 ? -1 : 1));
  }
  return 0;
}

int dtx__upd_compile_push(const dtx__update_t *u, upd_op_t *op,
                          const json_t *v) {
  const char *k;
  json_t *mv, *each = json_is_object(v) ? json_object_get(v, "$each") : NULL;
  int rc;
  if (!each) {
    op->arg = json_array();
    if (!op->arg || json_array_append_new(op->arg, dtx__upd_operand(u, v)))
      return dtx__err(DTX_ENOMEM, "out of memory compiling update");
    return 0;
  }
  json_object_foreach((json_t *)v, k, mv) {
    if (!strcmp(k, "$each"))
      continue;
    if (op->kind == OP_PUSH && !strcmp(k, "$slice")) {
      if ((rc = int_mod(op, k, mv, &op->slice)))
        return rc;
      op->has_slice = 1;
    } else if (op->kind == OP_PUSH && !strcmp(k, "$position")) {
      if ((rc = int_mod(op, k, mv, &op->position)))
        return rc;
      op->has_position = 1;
    } else if (op->kind == OP_PUSH && !strcmp(k, "$sort")) {
      if ((rc = compile_sort(op, mv)))
        return rc;
    } else {
      return dtx__err(DTX_EBADUPDATE, "%s: unrecognized clause '%s' at '%s'",
                      op->opname, k, op->p.path);
    }
  }
  if (!json_is_array(each))
    return dtx__err(DTX_EBADUPDATE, "%s: $each must be an array at '%s'",
                    op->opname, op->p.path);
  op->arg = dtx__upd_operand(u, each);
  return op->arg ? 0 : dtx__err(DTX_ENOMEM, "out of memory compiling update");
}

static int elem_cmp(const json_t *sort, const json_t *a, const json_t *b) {
  if (json_is_integer(sort))
    return dtx__value_cmp(a, b) * (int)json_integer_value(sort);
  return dtx__sort_cmp(sort, a, b);
}

/* A stable insertion-merge sort of the array's elements in place. */
static int sort_elems(json_t *arr, const json_t *sort) {
  size_t n = json_array_size(arr);
  if (n < 2)
    return 0;
  json_t **v = malloc(n * sizeof *v), **tmp = malloc(n * sizeof *tmp);
  if (!v || !tmp) {
    free(v);
    free(tmp);
    return dtx__err(DTX_ENOMEM, "out of memory sorting an array");
  }
  for (size_t i = 0; i < n; i++)
    v[i] = json_incref(json_array_get(arr, i));
  for (size_t w = 1; w < n; w *= 2)
    for (size_t lo = 0; lo < n; lo += 2 * w) {
      size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
      size_t i = lo, j = mid, o = lo;
      while (i < mid && j < hi)
        tmp[o++] = elem_cmp(sort, v[j], v[i]) < 0 ? v[j++] : v[i++];
      while (i < mid)
        tmp[o++] = v[i++];
      while (j < hi)
        tmp[o++] = v[j++];
      memcpy(v + lo, tmp + lo, (hi - lo) * sizeof *v);
    }
  for (size_t i = 0; i < n; i++)
    json_array_set_new(arr, i, v[i]);
  free(v);
  free(tmp);
  return 0;
}

int dtx__upd_push(const upd_op_t *op, json_t *arr) {
  size_t n = json_array_size(arr), at = n;
  if (op->has_position) {
    json_int_t p = op->position;
    if (p >= 0)
      at = (size_t)p < n ? (size_t)p : n;
    else
      at = p < -(json_int_t)n ? 0 : n - (size_t)(-p);
  }
  for (size_t i = 0; i < json_array_size(op->arg); i++)
    if (json_array_insert_new(arr, at + i,
                              json_deep_copy(json_array_get(op->arg, i))))
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
  if (op->sort) {
    int rc = sort_elems(arr, op->sort);
    if (rc)
      return rc;
  }
  if (op->has_slice) {
    n = json_array_size(arr);
    json_int_t s = op->slice;
    if (s >= 0) {
      while (json_array_size(arr) > (size_t)s)
        json_array_remove(arr, json_array_size(arr) - 1);
    } else {
      size_t keep = s < -(json_int_t)json_array_size(arr)
                        ? json_array_size(arr)
                        : (size_t)(-s);
      while (json_array_size(arr) > keep)
        json_array_remove(arr, 0);
    }
  }
  return 0;
}
