/* sort.c -- sort specifications and projections, as MongoDB's find() uses
 * them.
 *
 * Sort: {path: 1|-1, ...} compares documents key by key.  A path that
 * reaches several values (an array, or a path through an array of
 * subdocuments) sorts by the least of them ascending and the greatest
 * descending; a missing value sorts as null, and an empty array below
 * null.  Keys are found with the same path walk as the filter matcher
 * (path.c), so "sorts by a.b" and "matches on a.b" see the same values.
 *
 * Projection: {a: 1, "b.c": 1} keeps only the named paths (plus _id unless
 * "_id": 0), {a: 0} drops them.  Dotted paths descend into subdocuments and
 * through arrays of subdocuments; the result keeps the document's own field
 * order.  A projection is turned into a small tree of path segments for
 * each call.
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

/* ---- projection --------------------------------------------------------- */

/* One segment of the projection's path tree.  A leaf is a named path; an
 * inner node only leads to leaves below it. */
typedef struct pnode {
  const char *name; /* points into the projection's key (not owned) */
  size_t len;
  int leaf;
  size_t nkids;
  struct pnode *kids;
} pnode_t;

static void pnode_clear(pnode_t *p) {
  for (size_t i = 0; i < p->nkids; i++)
    pnode_clear(&p->kids[i]);
  free(p->kids);
  p->kids = NULL;
  p->nkids = 0;
}

static pnode_t *pnode_find(const pnode_t *p, const char *name, size_t len) {
  for (size_t i = 0; i < p->nkids; i++)
    if (p->kids[i].len == len && !memcmp(p->kids[i].name, name, len))
      return &p->kids[i];
  return NULL;
}

/* Adds path below root.  {a: 1, "a.b": 1} is refused, as in MongoDB: the
 * second path would be meaningless (or contradictory) under the first. */
static int pnode_add(pnode_t *root, const char *path) {
  pnode_t *cur = root;
  const char *seg = path;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
    pnode_t *kid = pnode_find(cur, seg, len);
    if (kid && (kid->leaf || !dot))
      return dtx__err(DTX_EINVAL, "projection path collision at %s", path);
    if (!kid) {
      pnode_t *k = realloc(cur->kids, (cur->nkids + 1) * sizeof *k);
      if (!k)
        return dtx__err(DTX_ENOMEM, "out of memory building projection");
      cur->kids = k;
      kid = &k[cur->nkids++];
      memset(kid, 0, sizeof *kid);
      kid->name = seg;
      kid->len = len;
    }
    if (!dot) {
      kid->leaf = 1;
      return 0;
    }
    cur = kid;
    seg = dot + 1;
  }
}

/* Returns 1 for an inclusion, 0 for an exclusion, or a negative error. */
static int proj_flag(const char *path, const json_t *v) {
  if (json_is_boolean(v))
    return json_is_true(v);
  if (json_is_integer(v) &&
      (json_integer_value(v) == 0 || json_integer_value(v) == 1))
    return (int)json_integer_value(v);
  return dtx__err(DTX_EINVAL, "projection value for %s must be 0, 1, true "
                              "or false", path);
}

/* Validates proj and builds its path tree in *root (released with
 * pnode_clear); *incl says whether it is an inclusion projection. */
static int proj_parse(const json_t *proj, pnode_t *root, int *incl) {
  const char *path;
  json_t *v;
  int mode = -1, id_flag = -1;
  if (!json_is_object(proj))
    return dtx__err(DTX_EINVAL, "projection must be an object");
  json_object_foreach((json_t *)proj, path, v) {
    int rc = dtx__path_check(path, DTX_EINVAL);
    if (rc)
      return dtx__err_wrap(rc, "projection");
    int flag = proj_flag(path, v);
    if (flag < 0)
      return flag;
    if (!strcmp(path, "_id")) {
      id_flag = flag;
      continue;
    }
    if (mode >= 0 && mode != flag)
      return dtx__err(DTX_EINVAL,
                      "projection cannot mix inclusion and exclusion (%s)",
                      path);
    mode = flag;
  }
  if (mode < 0) /* only _id named: {_id: 1} keeps just _id */
    mode = id_flag == 1;
  *incl = mode;
  memset(root, 0, sizeof *root);
  json_object_foreach((json_t *)proj, path, v) {
    int is_id = !strcmp(path, "_id");
    /* _id:1 in an exclusion projection is the default anyway */
    if (is_id && proj_flag(path, v) != mode)
      continue;
    int rc = pnode_add(root, path);
    if (rc) {
      pnode_clear(root);
      return rc;
    }
  }
  if (mode && id_flag != 0 && !pnode_find(root, "_id", 3)) {
    int rc = pnode_add(root, "_id");
    if (rc) {
      pnode_clear(root);
      return rc;
    }
  }
  return 0;
}

/* Builds (and drops) the tree too, so path collisions are caught here and
 * not only when the projection is first applied. */
int dtx__projection_check(const json_t *projection) {
  pnode_t root;
  int incl;
  int rc = proj_parse(projection, &root, &incl);
  if (rc == 0)
    pnode_clear(&root);
  return rc;
}

static json_t *include_obj(const json_t *obj, const pnode_t *tree);
static json_t *exclude_obj(const json_t *obj, const pnode_t *tree);

/* Through an array, a projection applies to each subdocument (and nested
 * array).  An inclusion drops the scalars it cannot contain the path; an
 * exclusion keeps them. */
static json_t *project_array(const json_t *arr, const pnode_t *tree,
                             int incl) {
  json_t *out = json_array();
  for (size_t i = 0; out && i < json_array_size(arr); i++) {
    const json_t *e = json_array_get(arr, i);
    json_t *pe;
    if (json_is_object(e))
      pe = incl ? include_obj(e, tree) : exclude_obj(e, tree);
    else if (json_is_array(e))
      pe = project_array(e, tree, incl);
    else if (incl)
      continue;
    else
      pe = json_deep_copy(e);
    if (!pe || json_array_append_new(out, pe)) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

static json_t *include_obj(const json_t *obj, const pnode_t *tree) {
  json_t *out = json_object();
  for (void *it = json_object_iter((json_t *)obj); out && it;
       it = json_object_iter_next((json_t *)obj, it)) {
    const char *key = json_object_iter_key(it);
    size_t klen = json_object_iter_key_len(it);
    const json_t *v = json_object_iter_value(it);
    const pnode_t *p = pnode_find(tree, key, klen);
    json_t *pv;
    if (!p)
      continue;
    if (p->leaf)
      pv = json_deep_copy(v);
    else if (json_is_object(v))
      pv = include_obj(v, p);
    else if (json_is_array(v))
      pv = project_array(v, p, 1);
    else
      continue; /* a scalar has no subfields to include */
    if (!pv || json_object_setn_new_nocheck(out, key, klen, pv)) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

static json_t *exclude_obj(const json_t *obj, const pnode_t *tree) {
  json_t *out = json_object();
  for (void *it = json_object_iter((json_t *)obj); out && it;
       it = json_object_iter_next((json_t *)obj, it)) {
    const char *key = json_object_iter_key(it);
    size_t klen = json_object_iter_key_len(it);
    const json_t *v = json_object_iter_value(it);
    const pnode_t *p = pnode_find(tree, key, klen);
    json_t *pv;
    if (p && p->leaf)
      continue;
    if (p && json_is_object(v))
      pv = exclude_obj(v, p);
    else if (p && json_is_array(v))
      pv = project_array(v, p, 0);
    else
      pv = json_deep_copy(v);
    if (!pv || json_object_setn_new_nocheck(out, key, klen, pv)) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

int dtx__project(const json_t *doc, const json_t *projection, json_t **out) {
  pnode_t root;
  int incl;
  *out = NULL;
  int rc = proj_parse(projection, &root, &incl);
  if (rc)
    return rc;
  json_t *r;
  if (!json_is_object(doc))
    r = json_deep_copy(doc);
  else if (json_object_size(projection) == 0)
    r = json_deep_copy(doc);
  else
    r = incl ? include_obj(doc, &root) : exclude_obj(doc, &root);
  pnode_clear(&root);
  if (!r)
    return dtx__err(DTX_ENOMEM, "out of memory applying projection");
  *out = r;
  return 0;
}
