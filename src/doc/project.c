/* project.c -- projections, as MongoDB's find() and findAndModify use them.
 *
 * {a: 1, "b.c": 1} keeps only the named paths (plus _id unless "_id": 0),
 * {a: 0} drops them.  Dotted paths descend into subdocuments and through
 * arrays of subdocuments; the result keeps the document's own field
 * order.  Three operators refine one array field (the manual's
 * "Projection Operators"):
 *   {"a.$": 1}                       the element the query matched (the
 *                                    position dtx__filter_match_pos gives)
 *   {a: {$slice: n}} or [skip, n]    the first n (last -n) elements, or n
 *                                    after skipping skip (from the end when
 *                                    negative)
 *   {a: {$elemMatch: {...}}}         the first element matching, or no
 *                                    field when none does
 * $elemMatch and the positional $ make an inclusion projection (the
 * positional $ cannot be excluded around); $slice alone keeps every other
 * field.  A projection is compiled once (dtx__proj_compile) and applied to
 * every document of a result.
 */
#include "doc/doc.h"
#include "util/err.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

enum { SP_POSITIONAL, SP_SLICE, SP_ELEMMATCH };

typedef struct special {
  int kind;
  char *path;          /* the array field (without ".$") */
  json_int_t skip;     /* SLICE: elements to skip (negative: from the end) */
  json_int_t limit;    /* SLICE: elements to keep; -1: no skip form */
  dtx__filter_t *em;   /* ELEMMATCH: {path: {$elemMatch: ...}} */
} special_t;

struct dtx__proj {
  pnode_t root;
  int incl;
  int empty; /* {}: the document as it is */
  size_t nsp;
  special_t *sp;
};

void dtx__proj_free(dtx__proj_t *p) {
  if (!p)
    return;
  pnode_clear(&p->root);
  for (size_t i = 0; i < p->nsp; i++) {
    free(p->sp[i].path);
    dtx__filter_free(p->sp[i].em);
  }
  free(p->sp);
  free(p);
}

static int slice_arg(const char *path, const json_t *a, special_t *s) {
  if (json_is_integer(a)) {
    s->skip = 0;
    s->limit = json_integer_value(a);
    if (s->limit < 0) { /* the last -n */
      s->skip = s->limit;
      s->limit = -s->limit;
    }
    return 0;
  }
  if (json_is_array(a) && json_array_size(a) == 2 &&
      json_is_integer(json_array_get(a, 0)) &&
      json_is_integer(json_array_get(a, 1)) &&
      json_integer_value(json_array_get(a, 1)) > 0) {
    s->skip = json_integer_value(json_array_get(a, 0));
    s->limit = json_integer_value(json_array_get(a, 1));
    return 0;
  }
  return dtx__err(DTX_EINVAL,
                  "projection: $slice for %s needs an integer or [skip, "
                  "limit] with limit > 0", path);
}

/* Parses one {path: {$op: arg}} entry into a special. */
static int parse_op(const char *path, const json_t *v, special_t *s) {
  const char *op = json_object_iter_key(json_object_iter((json_t *)v));
  const json_t *arg = json_object_iter_value(json_object_iter((json_t *)v));
  if (json_object_size(v) != 1 || op[0] != '$')
    return dtx__err(DTX_EINVAL,
                    "projection value for %s must be 0, 1, true, false or "
                    "one of $slice, $elemMatch", path);
  if (!strcmp(op, "$slice")) {
    s->kind = SP_SLICE;
    return slice_arg(path, arg, s);
  }
  if (!strcmp(op, "$elemMatch")) {
    if (strchr(path, '.'))
      return dtx__err(DTX_EBADQUERY,
                      "projection: $elemMatch cannot be used on the nested "
                      "field %s", path);
    if (!json_is_object(arg))
      return dtx__err(DTX_EBADQUERY,
                      "projection: $elemMatch for %s needs an object", path);
    s->kind = SP_ELEMMATCH;
    json_t *f = json_pack("{s{sO}}", path, "$elemMatch", arg);
    if (!f)
      return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
    int rc = dtx__filter_compile(f, &s->em);
    json_decref(f);
    return rc ? dtx__err_wrap(rc, "projection $elemMatch") : 0;
  }
  if (!strcmp(op, "$meta"))
    return dtx__err(DTX_EBADQUERY, "projection: unsupported operator $meta "
                                   "at %s", path);
  return dtx__err(DTX_EBADQUERY, "projection: unknown operator %s at %s", op,
                  path);
}

static int add_special(dtx__proj_t *p, const special_t *s, const char *path,
                       size_t len) {
  special_t *n = realloc(p->sp, (p->nsp + 1) * sizeof *n);
  if (!n)
    return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
  p->sp = n;
  n[p->nsp] = *s;
  if (!(n[p->nsp].path = strndup(path, len)))
    return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
  p->nsp++;
  return 0;
}

/* First pass: classify every entry, collect the specials, settle the
 * mode.  Second pass: build the tree. */
static int proj_parse(const json_t *proj, dtx__proj_t *p) {
  const char *path;
  json_t *v;
  int mode = -1, id_flag = -1, npositional = 0, has_em = 0, rc;
  if (!json_is_object(proj))
    return dtx__err(DTX_EINVAL, "projection must be an object");
  p->empty = json_object_size(proj) == 0;
  json_object_foreach((json_t *)proj, path, v) {
    size_t len = strlen(path);
    int positional = len > 2 && !strcmp(path + len - 2, ".$");
    char *base = strndup(path, positional ? len - 2 : len);
    if (!base)
      return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
    rc = dtx__path_check(base, DTX_EINVAL);
    free(base);
    if (rc)
      return dtx__err_wrap(rc, "projection");
    special_t s = {0};
    if (positional) {
      if (proj_flag(path, v) != 1)
        return dtx__err(DTX_EINVAL, "projection: positional %s can only be "
                                    "included", path);
      if (++npositional > 1)
        return dtx__err(DTX_EINVAL, "projection: only one positional $ is "
                                    "allowed (%s)", path);
      s.kind = SP_POSITIONAL;
      if ((rc = add_special(p, &s, path, len - 2)))
        return rc;
      if (mode == 0)
        return dtx__err(DTX_EINVAL, "projection cannot mix inclusion and "
                                    "exclusion (%s)", path);
      mode = 1;
      continue;
    }
    if (json_is_object(v)) {
      if ((rc = parse_op(path, v, &s))) {
        dtx__filter_free(s.em);
        return rc;
      }
      has_em |= s.kind == SP_ELEMMATCH;
      if ((rc = add_special(p, &s, path, len))) {
        dtx__filter_free(s.em);
        return rc;
      }
      continue;
    }
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
  if (mode < 0) /* only _id or operators named */
    mode = has_em || id_flag == 1;
  p->incl = mode;
  json_object_foreach((json_t *)proj, path, v) {
    int is_id = !strcmp(path, "_id");
    if (json_is_object(v) || strstr(path, ".$"))
      continue;
    /* _id:1 in an exclusion projection is the default anyway */
    if (is_id && proj_flag(path, v) != mode)
      continue;
    if ((rc = pnode_add(&p->root, path)))
      return rc;
  }
  if (mode)
    for (size_t i = 0; i < p->nsp; i++)
      if ((rc = pnode_add(&p->root, p->sp[i].path)))
        return rc;
  if (mode && id_flag != 0 && !pnode_find(&p->root, "_id", 3) &&
      (rc = pnode_add(&p->root, "_id")))
    return rc;
  return 0;
}

int dtx__proj_compile(const json_t *projection, dtx__proj_t **out) {
  *out = NULL;
  dtx__proj_t *p = calloc(1, sizeof *p);
  if (!p)
    return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
  int rc = proj_parse(projection, p);
  if (rc) {
    dtx__proj_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

/* Builds (and drops) the compiled form, so every error is caught here and
 * not only when the projection is first applied. */
int dtx__projection_check(const json_t *projection) {
  dtx__proj_t *p;
  int rc = dtx__proj_compile(projection, &p);
  dtx__proj_free(p);
  return rc;
}

static json_t *project_obj(const json_t *obj, const pnode_t *tree, int incl);

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
      pe = project_obj(e, tree, incl);
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

/* An inclusion keeps only the tree's paths (a leaf whole, a scalar where
 * the tree goes deeper not at all); an exclusion keeps all but its
 * leaves. */
static json_t *project_obj(const json_t *obj, const pnode_t *tree, int incl) {
  json_t *out = json_object();
  for (void *it = json_object_iter((json_t *)obj); out && it;
       it = json_object_iter_next((json_t *)obj, it)) {
    const char *key = json_object_iter_key(it);
    size_t klen = json_object_iter_key_len(it);
    const json_t *v = json_object_iter_value(it);
    const pnode_t *p = pnode_find(tree, key, klen);
    json_t *pv;
    if (incl ? !p : (p && p->leaf))
      continue;
    if (incl && p->leaf)
      pv = json_deep_copy(v);
    else if (p && json_is_object(v))
      pv = project_obj(v, p, incl);
    else if (p && json_is_array(v))
      pv = project_array(v, p, incl);
    else if (incl)
      continue; /* a scalar has no subfields to include */
    else
      pv = json_deep_copy(v);
    if (!pv || json_object_setn_new_nocheck(out, key, klen, pv)) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

/* The object that holds path's last segment in doc (objects only), and
 * that segment; NULL when a segment is missing or not an object. */
static json_t *holder(json_t *doc, const char *path, const char **last) {
  json_t *cur = doc;
  const char *seg = path, *dot;
  char name[1100];
  while ((dot = strchr(seg, '.'))) {
    size_t n = (size_t)(dot - seg);
    if (n >= sizeof name)
      return NULL;
    memcpy(name, seg, n);
    name[n] = '\0';
    cur = json_object_get(cur, name);
    if (!json_is_object(cur))
      return NULL;
    seg = dot + 1;
  }
  *last = seg;
  return json_is_object(cur) ? cur : NULL;
}

static json_t *slice(const json_t *a, json_int_t skip, json_int_t limit) {
  size_t n = json_array_size(a), from;
  if (skip < 0)
    from = (size_t)(-skip) >= n ? 0 : n - (size_t)(-skip);
  else
    from = (size_t)skip >= n ? n : (size_t)skip;
  json_t *r = json_array();
  for (size_t i = from; r && i < n && (json_int_t)(i - from) < limit; i++)
    if (json_array_append_new(r, json_deep_copy(json_array_get(a, i)))) {
      json_decref(r);
      return NULL;
    }
  return r;
}

/* Applies one special to r, the projected copy of doc; matched is the
 * document the query matched (for the positional $). */
static int apply_special(const special_t *s, const json_t *doc,
                         const json_t *matched, json_t *r,
                         const dtx__filter_t *f) {
  const char *last;
  json_t *h = holder(r, s->path, &last);
  json_t *arr = h ? json_object_get(h, last) : NULL;
  size_t pos = SIZE_MAX;
  switch (s->kind) {
  case SP_SLICE: {
    if (!json_is_array(arr))
      return 0; /* $slice leaves other values alone */
    json_t *sl = slice(arr, s->skip, s->limit);
    if (!sl || json_object_set_new(h, last, sl))
      return dtx__err(DTX_ENOMEM, "out of memory applying projection");
    return 0;
  }
  case SP_ELEMMATCH:
    if (!h)
      return 0;
    if (!dtx__filter_match_pos(s->em, doc, &pos) || pos == SIZE_MAX ||
        !json_is_array(arr)) {
      int rc = dtx__filter_error(s->em);
      json_object_del(h, last);
      return rc;
    }
    break;
  case SP_POSITIONAL:
    if (!f || !dtx__filter_match_pos(f, matched, &pos) || pos == SIZE_MAX) {
      int rc = dtx__filter_error(f);
      return rc ? rc : dtx__err(DTX_EBADQUERY,
                                "projection %s.$: the query did not match "
                                "an element of an array", s->path);
    }
    if (!json_is_array(arr) || pos >= json_array_size(arr))
      return dtx__err(DTX_EBADQUERY,
                      "projection %s.$: the matched position %zu is not an "
                      "element of an array at %s", s->path, pos, s->path);
    break;
  }
  json_t *one = json_pack("[O]", json_array_get(arr, pos));
  if (!one || json_object_set_new(h, last, one))
    return dtx__err(DTX_ENOMEM, "out of memory applying projection");
  return 0;
}

int dtx__proj_apply_at(const dtx__proj_t *p, const json_t *doc,
                       const dtx__filter_t *f, const json_t *matched,
                       json_t **out) {
  *out = NULL;
  json_t *r;
  if (!json_is_object(doc) || p->empty)
    r = json_deep_copy(doc);
  else
    r = project_obj(doc, &p->root, p->incl);
  if (!r)
    return dtx__err(DTX_ENOMEM, "out of memory applying projection");
  for (size_t i = 0; json_is_object(doc) && i < p->nsp; i++) {
    int rc = apply_special(&p->sp[i], doc, matched ? matched : doc, r, f);
    if (rc) {
      json_decref(r);
      return rc;
    }
  }
  *out = r;
  return 0;
}

int dtx__proj_apply(const dtx__proj_t *p, const json_t *doc,
                    const dtx__filter_t *f, json_t **out) {
  return dtx__proj_apply_at(p, doc, f, NULL, out);
}

/* Whether filter names path (or a path below it) at its top level or in
 * its logical operators. */
static int names_path(const json_t *filter, const char *path, int depth) {
  const char *k;
  json_t *v;
  size_t n = strlen(path);
  if (!json_is_object(filter) || depth > 100)
    return 0;
  json_object_foreach((json_t *)filter, k, v) {
    if (!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) {
      size_t i;
      json_t *e;
      json_array_foreach(v, i, e) if (names_path(e, path, depth + 1)) return 1;
    } else if (!strncmp(k, path, n) && (k[n] == '\0' || k[n] == '.')) {
      return 1;
    }
  }
  return 0;
}

int dtx__proj_check_query(const dtx__proj_t *p, const json_t *filter) {
  for (size_t i = 0; i < p->nsp; i++)
    if (p->sp[i].kind == SP_POSITIONAL && !names_path(filter, p->sp[i].path, 0))
      return dtx__err(DTX_EBADQUERY,
                      "projection %s.$: the query must name the array field "
                      "%s", p->sp[i].path, p->sp[i].path);
  return 0;
}

int dtx__project(const json_t *doc, const json_t *projection, json_t **out) {
  dtx__proj_t *p;
  *out = NULL;
  int rc = dtx__proj_compile(projection, &p);
  if (rc == 0)
    rc = dtx__proj_apply(p, doc, NULL, out);
  dtx__proj_free(p);
  return rc;
}
