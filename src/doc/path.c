/* path.c -- dotted field paths: validation and MongoDB's path traversal.
 *
 * A path such as "changes.account" names values inside a document.  Where a
 * path meets an array it fans out over the array's elements, so one path
 * can reach many values (or none).  dtx__path_walk() enumerates them exactly
 * as MongoDB's matcher does, and the filter matcher (filter.c) and the sort
 * key extractor (sort.c) both build on it, so the two cannot disagree about
 * what a path reaches.  The walk works on the validated path text directly
 * (no compiled form, no allocation), which keeps it usable from hot paths
 * such as sort comparisons.
 *
 * Traversal rules (MongoDB's ElementPath semantics):
 *  - Objects are entered by field name; a field that is absent, or a
 *    scalar in the middle of the path, yields one "missing" visit.
 *  - An array met before the end of the path is traversed: each element
 *    that is an object is searched for the rest of the path (an object
 *    without the field yields "missing").  Every other element (a scalar,
 *    a nested array) cannot hold the rest of the path and yields
 *    "missing" too, and so does an empty array, so {"a.b": null} matches
 *    {a: [1, 2]}, {a: []} and {a: [[]]} as MongoDB 9.0 documents
 *    (jstests/core/query/null_query_semantics.js, SERVER-36681); this is
 *    also what index keys hold for such documents (keys.c: null).  A
 *    numeric segment also indexes the array ("a.0"); an element reached by
 *    index that is itself an array is traversed again.  Under a numeric
 *    segment the other scalars are skipped, so {"a.0": null} matches
 *    neither {a: [5, 6]} nor {a: []}, as in MongoDB before 9.0 (the
 *    9.0 change speaks of field names only).
 *  - An array at the end of the path is, depending on leaf_mode, visited
 *    whole, or element by element and then whole (equality matches both an
 *    element and the whole array), or element by element only (sorting).
 */
#include "doc/doc.h"
#include "util/err.h"

#include <stdint.h>
#include <string.h>


#define PATH_MAX_LEN 1024

/* Paths come from users (filters, projections, sort specs, updates), so a
 * bad one is reported with the whole path and the offending segment. */
int dtx__path_check(const char *path, int code) {
  if (!path || !path[0])
    return dtx__err(code, "empty field path");
  size_t len = strlen(path);
  if (len > PATH_MAX_LEN)
    return dtx__err(code, "field path longer than %d bytes: %.40s...",
                    PATH_MAX_LEN, path);
  const char *seg = path;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
    if (n == 0)
      return dtx__err(code, "empty segment in field path '%s'", path);
    if (seg[0] == '$')
      return dtx__err(code, "field path '%s': segment '%.*s' starts with '$'",
                      path, (int)n, seg);
    if (!dot)
      break;
    seg = dot + 1;
  }
  return 0;
}

/* One segment of the path being walked: [name, name+len), and the array
 * index it denotes when it is a canonical decimal number ("0", "17", but
 * not "01"), else SIZE_MAX.  MongoDB matches array offsets by comparing
 * field names as strings, hence the canonical form. */
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

/* Looks up one segment in a container.  Arrays answer only to their
 * canonical indexes, as BSON arrays are objects keyed "0", "1", ... */
static const json_t *getfield(const json_t *cur, const seg_t *s) {
  if (json_is_object(cur))
    return json_object_getn(cur, s->name, s->len);
  if (json_is_array(cur) && s->index != SIZE_MAX)
    return json_array_get(cur, s->index);
  return NULL;
}

typedef struct walk {
  int leaf_mode;
  dtx__path_visit_fn fn;
  void *ctx;
  size_t *pos; /* NULL, or where the outermost array index is kept */
} walk_t;

static int walk_array(const walk_t *w, const json_t *arr, const char *rest);

static int visit_leaf(const walk_t *w, const json_t *v) {
  if (!json_is_array(v) || w->leaf_mode == DTX__LEAF_WHOLE)
    return w->fn(w->ctx, v, 0);
  size_t n = json_array_size(v);
  if (n == 0 && w->leaf_mode == DTX__LEAF_ELEMS)
    return w->fn(w->ctx, v, 1);
  size_t outer = w->pos ? *w->pos : SIZE_MAX;
  for (size_t i = 0; i < n; i++) {
    if (w->pos && outer == SIZE_MAX)
      *w->pos = i;
    int r = w->fn(w->ctx, json_array_get(v, i), 0);
    if (r)
      return r;
  }
  if (w->pos)
    *w->pos = outer;
  return w->leaf_mode == DTX__LEAF_EXPAND ? w->fn(w->ctx, v, 0) : 0;
}

/* Follows the path from cur (an object, or an array used as a document)
 * through nested objects until it ends, runs out, or meets an array. */
static int walk_from(const walk_t *w, const json_t *cur, const char *rest) {
  for (;;) {
    seg_t s;
    seg_at(rest, &s);
    const json_t *v = getfield(cur, &s);
    if (!v)
      return w->fn(w->ctx, NULL, 0);
    if (s.last)
      return visit_leaf(w, v);
    if (json_is_object(v)) {
      cur = v;
      rest = seg_next(&s);
      continue;
    }
    if (json_is_array(v))
      return walk_array(w, v, seg_next(&s));
    return w->fn(w->ctx, NULL, 0); /* a scalar cannot hold the rest */
  }
}

/* rest is non-empty: the path continues below this array.  visited counts
 * the callbacks made, so an array that yields nothing can still yield its
 * one "missing". */
static int walk_array(const walk_t *w, const json_t *arr, const char *rest) {
  seg_t s;
  seg_at(rest, &s);
  size_t n = json_array_size(arr);
  size_t outer = w->pos ? *w->pos : SIZE_MAX;
  int any = 0;
  for (size_t k = 0; k < n; k++) {
    const json_t *e = json_array_get(arr, k);
    int r = 0;
    if (w->pos && outer == SIZE_MAX)
      *w->pos = k; /* the outermost array decides the positional $ */
    if (json_is_object(e)) {
      r = walk_from(w, e, rest);
      any = 1;
      if (!r && s.index == k)
        r = s.last ? w->fn(w->ctx, e, 0) : walk_from(w, e, seg_next(&s));
    } else if (s.index == k) {
      /* An element reached by position is yielded as it is; MongoDB does
       * not expand an array found at an explicit offset. */
      any = 1;
      if (s.last)
        r = w->leaf_mode == DTX__LEAF_ELEMS ? visit_leaf(w, e)
                                             : w->fn(w->ctx, e, 0);
      else if (json_is_array(e))
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

/* Calls fn(ctx, value, empty_leaf) for every value path reaches in doc (value
 * NULL for "missing"; empty_leaf is 1 only in DTX__LEAF_ELEMS mode for an
 * empty array at the end of the path).  A non-zero return from fn stops the
 * walk and is returned.  path must have passed dtx__path_check(). */
int dtx__path_walk(const char *path, const json_t *doc, int leaf_mode,
                   dtx__path_visit_fn fn, void *ctx) {
  walk_t w = {leaf_mode, fn, ctx, NULL};
  return walk_from(&w, doc, path);
}

/* As dtx__path_walk, and while fn runs *pos holds the index, in the first
 * array the walk went through, of the element that led to the value
 * (SIZE_MAX when no array was crossed).  This is MongoDB's "elemMatchKey",
 * which the positional $ of updates and projections uses. */
int dtx__path_walk_pos(const char *path, const json_t *doc, int leaf_mode,
                       dtx__path_visit_fn fn, void *ctx, size_t *pos) {
  walk_t w = {leaf_mode, fn, ctx, pos};
  *pos = SIZE_MAX;
  return walk_from(&w, doc, path);
}

const json_t *dtx__path_get(const json_t *doc, const char *path) {
  char seg[256];
  while (doc && *path) {
    size_t n = strcspn(path, ".");
    if (!json_is_object(doc) || n >= sizeof seg)
      return NULL;
    memcpy(seg, path, n);
    seg[n] = '\0';
    doc = json_object_get(doc, seg);
    path += n + (path[n] == '.');
  }
  return doc;
}

int dtx__path_covers(const char *root, const char *path) {
  size_t n = strlen(root);
  return strncmp(root, path, n) == 0 && (path[n] == '\0' || path[n] == '.');
}
