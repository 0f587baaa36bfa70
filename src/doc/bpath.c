/* bpath.c -- dotted paths over BSON bytes: the same traversal as path.c.
 *
 * path.c states MongoDB's rules (arrays met in the middle of a path fan
 * out over their elements, numeric segments index arrays, the three leaf
 * modes, the one "missing" of an array that yields nothing, the
 * positional index of the first array crossed).  This file follows it
 * step for step over dtx__belem_next, so that a difference between the
 * engines is a bug in one of them (tests/common/bdiff.c runs both).
 *
 * Arrays are addressed by position, not by their keys: checked bytes
 * carry "0", "1"... but the walk does not need to trust that, and
 * counting is what the json_t engine's json_array_get does.
 */
#include "doc/bdoc.h"

#include <stdint.h>
#include <string.h>

/* One segment: [name, name+len), and the array index it denotes when it
 * is a canonical decimal number ("0", "17", not "01"), else SIZE_MAX. */
typedef struct seg {
  const char *name;
  size_t len;
  size_t index;
  int last;
} seg_t;

static void seg_at(const char *s, seg_t *out) {
  const char *dot = strchr(s, '.');
  out->name = s;
  out->len = dot ? (size_t)(dot - s) : strlen(s);
  out->last = dot == NULL;
  out->index = SIZE_MAX;
  if (out->len == 0 || out->len > 18 || (s[0] == '0' && out->len > 1))
    return;
  size_t v = 0;
  for (size_t i = 0; i < out->len; i++) {
    if (s[i] < '0' || s[i] > '9')
      return;
    v = v * 10 + (size_t)(s[i] - '0');
  }
  out->index = v;
}

static const char *seg_next(const seg_t *s) { return s->name + s->len + 1; }

/* The element at position k of an array document, or 0. */
static int array_at(const dtx__bval_t *arr, size_t k, dtx__bval_t *out) {
  uint32_t off = 0;
  dtx__belem_t e;
  for (size_t i = 0; dtx__belem_next(arr->data, arr->len, &off, &e); i++)
    if (i == k) {
      *out = e.v;
      return 1;
    }
  return 0;
}

/* path.c's getfield: objects by name, arrays by canonical index. */
static int getfield(const dtx__bval_t *cur, const seg_t *s, dtx__bval_t *out) {
  if (cur->type == BSON_TYPE_DOCUMENT) {
    dtx__belem_t e;
    if (!dtx__belem_find(cur->data, cur->len, s->name, s->len, &e))
      return 0;
    *out = e.v;
    return 1;
  }
  if (cur->type == BSON_TYPE_ARRAY && s->index != SIZE_MAX)
    return array_at(cur, s->index, out);
  return 0;
}

typedef struct walk {
  int leaf_mode;
  dtx__bpath_visit_fn fn;
  void *ctx;
  size_t *pos;
} walk_t;

static int walk_array(const walk_t *w, const dtx__bval_t *arr,
                      const char *rest);

static int visit_leaf(const walk_t *w, const dtx__bval_t *v) {
  if (v->type != BSON_TYPE_ARRAY || w->leaf_mode == DTX__LEAF_WHOLE)
    return w->fn(w->ctx, v, 0);
  uint32_t off = 0;
  dtx__belem_t e;
  size_t outer = w->pos ? *w->pos : SIZE_MAX;
  size_t i = 0;
  for (; dtx__belem_next(v->data, v->len, &off, &e); i++) {
    if (w->pos && outer == SIZE_MAX)
      *w->pos = i;
    int r = w->fn(w->ctx, &e.v, 0);
    if (r)
      return r;
  }
  if (i == 0 && w->leaf_mode == DTX__LEAF_ELEMS)
    return w->fn(w->ctx, v, 1);
  if (w->pos)
    *w->pos = outer;
  return w->leaf_mode == DTX__LEAF_EXPAND ? w->fn(w->ctx, v, 0) : 0;
}

static int walk_from(const walk_t *w, const dtx__bval_t *start,
                     const char *rest) {
  dtx__bval_t cur = *start;
  for (;;) {
    seg_t s;
    dtx__bval_t v;
    seg_at(rest, &s);
    if (!getfield(&cur, &s, &v))
      return w->fn(w->ctx, NULL, 0);
    if (s.last)
      return visit_leaf(w, &v);
    if (v.type == BSON_TYPE_DOCUMENT) {
      cur = v;
      rest = seg_next(&s);
      continue;
    }
    if (v.type == BSON_TYPE_ARRAY)
      return walk_array(w, &v, seg_next(&s));
    return w->fn(w->ctx, NULL, 0); /* a scalar cannot hold the rest */
  }
}

static int walk_array(const walk_t *w, const dtx__bval_t *arr,
                      const char *rest) {
  seg_t s;
  seg_at(rest, &s);
  size_t outer = w->pos ? *w->pos : SIZE_MAX;
  int any = 0;
  uint32_t off = 0;
  dtx__belem_t el;
  for (size_t k = 0; dtx__belem_next(arr->data, arr->len, &off, &el); k++) {
    const dtx__bval_t *e = &el.v;
    int r = 0;
    if (w->pos && outer == SIZE_MAX)
      *w->pos = k; /* the outermost array decides the positional $ */
    if (e->type == BSON_TYPE_DOCUMENT) {
      r = walk_from(w, e, rest);
      any = 1;
      if (!r && s.index == k)
        r = s.last ? w->fn(w->ctx, e, 0) : walk_from(w, e, seg_next(&s));
    } else if (s.index == k) {
      /* Reached by position: yielded as it is (path.c). */
      any = 1;
      if (s.last)
        r = w->leaf_mode == DTX__LEAF_ELEMS ? visit_leaf(w, e)
                                             : w->fn(w->ctx, e, 0);
      else if (e->type == BSON_TYPE_ARRAY)
        r = walk_array(w, e, seg_next(&s));
    } else if (s.index == SIZE_MAX) {
      any = 1;
      r = w->fn(w->ctx, NULL, 0); /* a scalar or array holds no field */
    }
    if (r)
      return r;
  }
  if (w->pos)
    *w->pos = outer;
  return any || s.index != SIZE_MAX ? 0 : w->fn(w->ctx, NULL, 0);
}

int dtx__bpath_walk(const char *path, const uint8_t *doc, uint32_t len,
                    int leaf_mode, dtx__bpath_visit_fn fn, void *ctx,
                    size_t *pos) {
  walk_t w = {leaf_mode, fn, ctx, pos};
  dtx__bval_t root = dtx__bval_of_doc(doc, len);
  if (pos)
    *pos = SIZE_MAX;
  return walk_from(&w, &root, path);
}

/* dtx__path_get over BSON: objects only; "a." reads as "a" and an empty
 * path is the document itself, as path.c's loop does. */
dtx__bval_t dtx__bpath_get(const uint8_t *doc, uint32_t len,
                           const char *path) {
  dtx__bval_t cur = dtx__bval_of_doc(doc, len);
  static const dtx__bval_t missing = {BSON_TYPE_EOD, 0, NULL};
  while (*path) {
    size_t n = strcspn(path, ".");
    dtx__belem_t e;
    if (cur.type != BSON_TYPE_DOCUMENT || n >= 256)
      return missing;
    /* path.c looks the segment up as a C string; a segment cannot hold a
     * NUL here either, so the byte comparison is the same lookup. */
    if (!dtx__belem_find(cur.data, cur.len, path, n, &e))
      return missing;
    cur = e.v;
    path += n + (path[n] == '.');
  }
  return cur;
}
