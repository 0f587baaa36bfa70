/* bsort.c -- sort specifications over BSON documents (sort.c's
 * counterpart; bproj.h).
 *
 * {path: 1|-1, ...} compares documents key by key.  A path that reaches
 * several values sorts by the least of them ascending and the greatest
 * descending; a missing value sorts as null, an empty array below null.
 * Keys are found with dtx__bpath_walk in DTX__LEAF_ELEMS mode, the walk
 * the filter uses, so "sorts by a.b" and "matches on a.b" see the same
 * values.  A key is a view (dtx__bval_t) into the document: nothing is
 * copied.
 */
#include "doc/bproj.h"

#include "util/err.h"

#include <stdlib.h>
#include <string.h>

/* The sort direction of one spec element: 1, -1, or 0 when it is not an
 * integer 1 or -1.  Only int32 and int64, as the json_t engine takes only
 * JSON integers (MongoDB also takes 1.0). */
static int dir_of(const dtx__bval_t *v) {
  int64_t d;
  if (v->type == BSON_TYPE_INT32)
    d = dtx__bval_int32(v);
  else if (v->type == BSON_TYPE_INT64)
    d = dtx__bval_int64(v);
  else
    return 0;
  return d == 1 || d == -1 ? (int)d : 0;
}

int dtx__bsort_check(const uint8_t *spec, uint32_t slen) {
  uint32_t off = 0;
  dtx__belem_t e;
  int any = 0;
  while (spec && dtx__belem_next(spec, slen, &off, &e)) {
    int rc = dtx__path_check(e.key, DTX_EINVAL);
    if (rc)
      return dtx__err_wrap(rc, "sort");
    if (!dir_of(&e.v))
      return dtx__err(DTX_EINVAL, "sort direction for %s must be 1 or -1",
                      e.key);
    any = 1;
  }
  if (!any)
    return dtx__err(DTX_EINVAL, "sort must be a non-empty object");
  return 0;
}

/* A document's sort key for one path; undef marks the empty array, which
 * MongoDB orders below null. */
typedef struct skey {
  dtx__bval_t v;
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
  return dtx__bval_cmp(&a->v, &b->v);
}

static int visit_key(void *ctx, const dtx__bval_t *v, int empty_leaf) {
  key_acc_t *acc = ctx;
  skey_t k = {{0}, empty_leaf};
  if (v)
    k.v = *v;
  if (!acc->seen || key_cmp(&k, &acc->best) * acc->dir < 0)
    acc->best = k;
  acc->seen = 1;
  return 0;
}

/* A missing key (type 0) compares as null. */
static skey_t sort_key(const char *path, int dir, const dtx__bval_t *doc) {
  key_acc_t acc = {dir, 0, {{0}, 0}};
  uint32_t len;
  const uint8_t *d = dtx__bval_doc(doc, &len);
  dtx__bpath_walk(path, d, len, DTX__LEAF_ELEMS, visit_key, &acc, NULL);
  return acc.best;
}

int dtx__bsort_cmp(const uint8_t *spec, uint32_t slen, const dtx__bval_t *a,
                   const dtx__bval_t *b) {
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(spec, slen, &off, &e)) {
    int d = dir_of(&e.v) < 0 ? -1 : 1;
    skey_t ka = sort_key(e.key, d, a), kb = sort_key(e.key, d, b);
    int r = key_cmp(&ka, &kb);
    if (r)
      return r * d;
  }
  return 0;
}

/* Keys are found once per document; a merge sort keeps equal documents in
 * their input order. */
typedef struct sorter {
  size_t nkeys;
  const int *dirs;
  const skey_t *keys; /* keys[doc * nkeys + k] */
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

int dtx__bsort_docs(dtx__bval_t *docs, size_t n, const uint8_t *spec,
                    uint32_t slen) {
  int rc = dtx__bsort_check(spec, slen);
  if (rc)
    return rc;
  if (n < 2)
    return 0;
  size_t nkeys = 0;
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(spec, slen, &off, &e))
    nkeys++;
  int *dirs = calloc(nkeys, sizeof *dirs);
  skey_t *keys = calloc(n * nkeys, sizeof *keys);
  size_t *idx = calloc(n, sizeof *idx), *tmp = calloc(n, sizeof *tmp);
  dtx__bval_t *copy = calloc(n, sizeof *copy);
  if (!dirs || !keys || !idx || !tmp || !copy) {
    rc = dtx__err(DTX_ENOMEM, "out of memory sorting %zu documents", n);
    goto out;
  }
  off = 0;
  for (size_t k = 0; dtx__belem_next(spec, slen, &off, &e); k++) {
    dirs[k] = dir_of(&e.v) < 0 ? -1 : 1;
    for (size_t i = 0; i < n; i++)
      keys[i * nkeys + k] = sort_key(e.key, dirs[k], &docs[i]);
  }
  for (size_t i = 0; i < n; i++)
    idx[i] = i;
  sorter_t s = {nkeys, dirs, keys};
  merge_sort(&s, idx, tmp, n);
  memcpy(copy, docs, n * sizeof *copy);
  for (size_t i = 0; i < n; i++)
    docs[i] = copy[idx[i]];
out:
  free(dirs);
  free(keys);
  free(idx);
  free(tmp);
  free(copy);
  return rc;
}
