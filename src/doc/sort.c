/* sort.c -- sort specifications, as MongoDB's find() uses them
 * (projections are in project.c).
 *
 * Sort: {path: 1|-1, ...} compares documents key by key.  A path that
 * reaches several values (an array, or a path through an array of
 * subdocuments) sorts by the least of them ascending and the greatest
 * descending; a missing value sorts as null, and an empty array below
 * null.  Keys are found with the same path walk as the filter matcher
 * (path.c), so "sorts by a.b" and "matches on a.b" see the same values.
 */
#include "doc/doc.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>


/* ---- sort --------------------------------------------------------------- */

int dtx__sort_check(const json_t *sort) {
  const char *path;
  json_t *dir;
  if (!json_is_object(sort) || json_object_size(sort) == 0)
    return dtx__err(DTX_EINVAL, "sort must be a non-empty object");
  json_object_foreach((json_t *)sort, path, dir) {
    int rc = dtx__path_check(path, DTX_EINVAL);
    if (rc)
      return dtx__err_wrap(rc, "sort");
    if (!json_is_integer(dir) ||
        (json_integer_value(dir) != 1 && json_integer_value(dir) != -1))
      return dtx__err(DTX_EINVAL, "sort direction for %s must be 1 or -1",
                      path);
  }
  return 0;
}

/* A document's sort key for one path.  undef marks the empty array, which
 * MongoDB orders below null. */
typedef struct key {
  const json_t *v;
  int undef;
} skey_t;

typedef struct key_acc {
  int dir;
  int seen;
  skey_t best;
} key_acc_t;

static int key_cmp(const skey_t *a, const skey_t *b) {
  if (a->undef || b->undef)
    return b->undef - a->undef;
  return dtx__value_cmp(a->v, b->v);
}

static int visit_key(void *ctx, const json_t *v, int empty_leaf) {
  key_acc_t *acc = ctx;
  skey_t k = {v ? v : json_null(), empty_leaf};
  if (!acc->seen || key_cmp(&k, &acc->best) * acc->dir < 0)
    acc->best = k;
  acc->seen = 1;
  return 0;
}

static skey_t sort_key(const char *path, int dir, const json_t *doc) {
  key_acc_t acc = {dir, 0, {NULL, 0}};
  dtx__path_walk(path, doc, DTX__LEAF_ELEMS, visit_key, &acc);
  if (!acc.seen) /* e.g. a path through an array of scalars */
    acc.best.v = json_null();
  return acc.best;
}

int dtx__sort_cmp(const json_t *sort, const json_t *a, const json_t *b) {
  const char *path;
  json_t *dir;
  json_object_foreach((json_t *)sort, path, dir) {
    int d = json_integer_value(dir) < 0 ? -1 : 1;
    skey_t ka = sort_key(path, d, a), kb = sort_key(path, d, b);
    int r = key_cmp(&ka, &kb);
    if (r)
      return r * d;
  }
  return 0;
}

/* Keys are extracted once per document (n * nkeys walks rather than one per
 * comparison); a merge sort keeps equal documents in their input order. */
typedef struct sorter {
  size_t nkeys;
  const int *dirs;
  const skey_t *keys; /* row-major: keys[doc * nkeys + k] */
} sorter_t;

static int row_cmp(const sorter_t *s, size_t a, size_t b) {
  for (size_t k = 0; k < s->nkeys; k++) {
    int r = key_cmp(&s->keys[a * s->nkeys + k], &s->keys[b * s->nkeys + k]);
    if (r)
      return r * s->dirs[k];
  }
  return 0;
}

static void merge_sort(const sorter_t *s, size_t *idx, size_t *tmp,
                       size_t n) {
  if (n < 2)
    return;
  size_t h = n / 2;
  merge_sort(s, idx, tmp, h);
  merge_sort(s, idx + h, tmp, n - h);
  size_t i = 0, j = h, o = 0;
  while (i < h && j < n)
    tmp[o++] = row_cmp(s, idx[j], idx[i]) < 0 ? idx[j++] : idx[i++];
  while (i < h)
    tmp[o++] = idx[i++];
  while (j < n)
    tmp[o++] = idx[j++];
  memcpy(idx, tmp, n * sizeof *idx);
}

int dtx__sort_array(json_t *array, const json_t *sort) {
  if (!json_is_array(array))
    return dtx__err(DTX_EINVAL, "sort needs an array of documents");
  int rc = dtx__sort_check(sort);
  if (rc)
    return rc;
  size_t n = json_array_size(array), nkeys = json_object_size(sort);
  if (n < 2)
    return 0;
  int *dirs = calloc(nkeys, sizeof *dirs);
  skey_t *keys = calloc(n * nkeys, sizeof *keys);
  size_t *idx = calloc(n, sizeof *idx), *tmp = calloc(n, sizeof *tmp);
  json_t **docs = calloc(n, sizeof *docs);
  if (!dirs || !keys || !idx || !tmp || !docs) {
    rc = dtx__err(DTX_ENOMEM, "out of memory sorting %zu documents", n);
    goto out;
  }
  const char *path;
  json_t *dir;
  size_t k = 0;
  json_object_foreach((json_t *)sort, path, dir) {
    dirs[k] = json_integer_value(dir) < 0 ? -1 : 1;
    for (size_t i = 0; i < n; i++)
      keys[i * nkeys + k] = sort_key(path, dirs[k], json_array_get(array, i));
    k++;
  }
  for (size_t i = 0; i < n; i++)
    idx[i] = i;
  sorter_t s = {nkeys, dirs, keys};
  merge_sort(&s, idx, tmp, n);
  /* Reorder by swapping in owned references: take one reference to each
   * document, then overwrite the slots (json_array_set_new releases the
   * array's old reference). */
  for (size_t i = 0; i < n; i++)
    docs[i] = json_incref(json_array_get(array, i));
  for (size_t i = 0; i < n; i++)
    json_array_set_new(array, i, docs[idx[i]]);
out:
  free(dirs);
  free(keys);
  free(idx);
  free(tmp);
  free(docs);
  return rc;
}

int dtx__page_array(json_t **array, int64_t skip, int64_t limit) {
  size_t n = json_array_size(*array);
  size_t from = skip > 0 && (uint64_t)skip < n ? (size_t)skip
                : skip > 0                     ? n
                                               : 0;
  size_t to = limit > 0 && (uint64_t)limit < n - from ? from + (size_t)limit
                                                      : n;
  if (from == 0 && to == n)
    return 0;
  json_t *page = json_array();
  for (size_t i = from; page && i < to; i++)
    if (json_array_append(page, json_array_get(*array, i)) < 0) {
      json_decref(page);
      page = NULL;
    }
  json_decref(*array);
  *array = page;
  return page ? 0 : dtx__err(DTX_ENOMEM, "paging %zu documents", n);
}
