/* bproject.c -- projections over BSON documents (project.c's
 * counterpart; bproj.h).
 *
 * The same projections as project.c: {a: 1, "b.c": 1} keeps the named
 * paths (and _id unless "_id": 0), {a: 0} drops them, dotted paths go
 * into subdocuments and through arrays of subdocuments, the document's
 * own field order is kept; "a.$", {a: {$slice: ...}} and
 * {a: {$elemMatch: ...}} refine one array field.
 *
 * Compiled once: a copy of the spec's bytes and the path tree live in one
 * arena; the tree's names point into that copy.  Applied in one pass that
 * writes the result's bytes (elements it keeps whole are copied as they
 * are), with the operators applied as the pass meets their field -- where
 * project.c projects first and then rewrites the projected copy, which
 * comes to the same (see write_special).
 */
#include "doc/bproj.h"

#include "doc/bfilter.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

enum { SP_POSITIONAL, SP_SLICE, SP_ELEMMATCH };

typedef struct special {
  int kind;
  const char *path;   /* the array field (without ".$"), in the arena */
  int64_t skip;       /* SLICE: elements to skip (negative: from the end) */
  int64_t limit;      /* SLICE: elements to keep */
  dtx__bfilter_t *em; /* ELEMMATCH: {path: {$elemMatch: ...}} */
} special_t;

/* A segment of the path tree.  kids is a list through next. */
typedef struct pnode {
  const char *name;
  size_t len;
  int leaf;
  struct pnode *kids, *next;
  const special_t *sp; /* an operator whose field this is */
} pnode_t;

struct dtx__bproj {
  dtx__arena_t arena;
  pnode_t root;
  int incl;
  int empty;
  size_t nsp;
  special_t *sp;
};

void dtx__bproj_free(dtx__bproj_t *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->nsp; i++)
    dtx__bfilter_free(p->sp[i].em);
  dtx__arena_free(&p->arena);
  free(p);
}

static pnode_t *pnode_find(const pnode_t *p, const char *name, size_t len) {
  for (pnode_t *k = p->kids; k; k = k->next)
    if (k->len == len && !memcmp(k->name, name, len))
      return k;
  return NULL;
}

static pnode_t *pnode_new(dtx__bproj_t *p, pnode_t *parent, const char *seg,
                          size_t len) {
  pnode_t *k = dtx__arena_alloc(&p->arena, sizeof *k), **tail;
  if (!k)
    return NULL;
  k->name = seg;
  k->len = len;
  for (tail = &parent->kids; *tail; tail = &(*tail)->next)
    ; /* appended: the order of the spec, as project.c's realloc'd array */
  *tail = k;
  return k;
}

/* Adds path (in the arena) below the root, as project.c's pnode_add. */
static int pnode_add(dtx__bproj_t *p, const char *path) {
  pnode_t *cur = &p->root;
  const char *seg = path;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
    pnode_t *kid = pnode_find(cur, seg, len);
    if (kid && (kid->leaf || !dot))
      return dtx__err(DTX_EINVAL, "projection path collision at %s", path);
    if (!kid && !(kid = pnode_new(p, cur, seg, len)))
      return dtx__err(DTX_ENOMEM, "out of memory building projection");
    if (!dot) {
      kid->leaf = 1;
      return 0;
    }
    cur = kid;
    seg = dot + 1;
  }
}

/* Marks the node of an operator's field, adding inner nodes as needed
 * after the tree is built.  In an exclusion, an inner node with no leaf
 * below it keeps everything, so the nodes added change nothing but let
 * the pass find the field; a leaf on the way is an excluded field, where
 * the operator has nothing to act on (project.c finds no holder). */
static int mark_special(dtx__bproj_t *p, const special_t *s) {
  pnode_t *cur = &p->root;
  const char *seg = s->path;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
    pnode_t *kid = pnode_find(cur, seg, len);
    if (kid && kid->leaf && dot)
      return 0;
    if (!kid && !(kid = pnode_new(p, cur, seg, len)))
      return dtx__err(DTX_ENOMEM, "out of memory building projection");
    if (!dot) {
      /* Only a spec with a name twice gets here (JSON and checked bytes
       * have none): refused as the json_t engine refuses its collisions. */
      if (kid->sp)
        return dtx__err(DTX_EINVAL, "projection path collision at %s", s->path);
      kid->sp = s;
      return 0;
    }
    cur = kid;
    seg = dot + 1;
  }
}

/* 1 for an inclusion, 0 for an exclusion, or a negative error: booleans
 * and the integers 0 and 1, as project.c (MongoDB takes any number). */
static int proj_flag(const char *path, const dtx__bval_t *v) {
  int64_t i;
  if (v->type == BSON_TYPE_BOOL)
    return dtx__bval_bool(v) != 0;
  if (dtx__bval_integer(v, &i) && (i == 0 || i == 1))
    return (int)i;
  return dtx__err(DTX_EINVAL,
                  "projection value for %s must be 0, 1, true "
                  "or false",
                  path);
}

static int slice_arg(const char *path, const dtx__bval_t *a, special_t *s) {
  int64_t x, y;
  if (dtx__bval_integer(a, &x)) {
    s->skip = 0;
    s->limit = x;
    if (x < 0) { /* the last -x */
      s->skip = x;
      s->limit = x == INT64_MIN ? INT64_MAX : -x;
    }
    return 0;
  }
  if (a->type == BSON_TYPE_ARRAY) {
    uint32_t len, off = 0, n = 0;
    const uint8_t *d = dtx__bval_doc(a, &len);
    dtx__belem_t e[2], el;
    /* el, not e[n]: the reader's last call marks its element as the end */
    while (dtx__belem_next(d, len, &off, &el))
      if (n++ < 2)
        e[n - 1] = el;
    int ok = n == 2;
    if (ok && dtx__bval_integer(&e[0].v, &x) &&
        dtx__bval_integer(&e[1].v, &y) && y > 0) {
      s->skip = x;
      s->limit = y;
      return 0;
    }
  }
  return dtx__err(DTX_EINVAL,
                  "projection: $slice for %s needs an integer or [skip, "
                  "limit] with limit > 0",
                  path);
}

/* Parses one {path: {$op: arg}} entry, as project.c's parse_op. */
static int parse_op(const char *path, const dtx__bval_t *v, special_t *s) {
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t op, more;
  if (!dtx__belem_next(d, len, &off, &op) ||
      dtx__belem_next(d, len, &off, &more) || op.key[0] != '$')
    return dtx__err(DTX_EINVAL,
                    "projection value for %s must be 0, 1, true, false or "
                    "one of $slice, $elemMatch",
                    path);
  if (!strcmp(op.key, "$slice")) {
    s->kind = SP_SLICE;
    return slice_arg(path, &op.v, s);
  }
  if (!strcmp(op.key, "$elemMatch")) {
    if (strchr(path, '.'))
      return dtx__err(DTX_EBADQUERY,
                      "projection: $elemMatch cannot be used on the nested "
                      "field %s",
                      path);
    if (op.v.type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADQUERY,
                      "projection: $elemMatch for %s needs an object", path);
    s->kind = SP_ELEMMATCH;
    /* {path: {$elemMatch: arg}}, compiled by the BSON filter, as
     * project.c compiles it with the json_t one */
    bson_t f = BSON_INITIALIZER, in, arg;
    uint32_t alen;
    const uint8_t *a = dtx__bval_doc(&op.v, &alen);
    int ok = bson_init_static(&arg, a, alen) &&
             bson_append_document_begin(&f, path, -1, &in) &&
             bson_append_document(&in, "$elemMatch", -1, &arg) &&
             bson_append_document_end(&f, &in);
    int rc = ok ? dtx__bfilter_compile(&f, &s->em)
                : dtx__err(DTX_ENOMEM, "out of memory compiling projection");
    bson_destroy(&f);
    return rc ? dtx__err_wrap(rc, "projection $elemMatch") : 0;
  }
  if (!strcmp(op.key, "$meta"))
    return dtx__err(DTX_EBADQUERY,
                    "projection: unsupported operator $meta "
                    "at %s",
                    path);
  return dtx__err(DTX_EBADQUERY, "projection: unknown operator %s at %s",
                  op.key, path);
}

/* First pass: classify every entry, collect the operators, settle the
 * mode.  Second pass: build the tree.  As project.c's proj_parse, check
 * for check, in the same order, so both give the same first error. */
static int proj_parse(dtx__bproj_t *p, const uint8_t *spec, uint32_t slen) {
  uint32_t off = 0;
  dtx__belem_t e;
  int mode = -1, id_flag = -1, npositional = 0, has_em = 0, rc;
  size_t n = 0;
  while (dtx__belem_next(spec, slen, &off, &e))
    n++;
  p->empty = n == 0;
  if (n && !(p->sp = dtx__arena_alloc(&p->arena, n * sizeof *p->sp)))
    return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
  off = 0;
  while (dtx__belem_next(spec, slen, &off, &e)) {
    const char *path = e.key;
    size_t len = e.keylen;
    int positional = len > 2 && !strcmp(path + len - 2, ".$");
    char *base =
        dtx__arena_strndup(&p->arena, path, positional ? len - 2 : len);
    if (!base)
      return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
    if ((rc = dtx__path_check(base, DTX_EINVAL)))
      return dtx__err_wrap(rc, "projection");
    special_t *s = &p->sp[p->nsp];
    memset(s, 0, sizeof *s);
    s->path = base;
    if (positional) {
      if (proj_flag(path, &e.v) != 1)
        return dtx__err(DTX_EINVAL,
                        "projection: positional %s can only be "
                        "included",
                        path);
      if (++npositional > 1)
        return dtx__err(DTX_EINVAL,
                        "projection: only one positional $ is "
                        "allowed (%s)",
                        path);
      s->kind = SP_POSITIONAL;
      p->nsp++;
      if (mode == 0)
        return dtx__err(DTX_EINVAL,
                        "projection cannot mix inclusion and "
                        "exclusion (%s)",
                        path);
      mode = 1;
      continue;
    }
    if (e.v.type == BSON_TYPE_DOCUMENT) {
      if ((rc = parse_op(path, &e.v, s))) {
        dtx__bfilter_free(s->em);
        s->em = NULL;
        return rc;
      }
      has_em |= s->kind == SP_ELEMMATCH;
      p->nsp++;
      continue;
    }
    int flag = proj_flag(path, &e.v);
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
  off = 0;
  while (dtx__belem_next(spec, slen, &off, &e)) {
    int is_id = !strcmp(e.key, "_id");
    if (e.v.type == BSON_TYPE_DOCUMENT || strstr(e.key, ".$"))
      continue;
    /* _id:1 in an exclusion projection is the default anyway */
    if (is_id && proj_flag(e.key, &e.v) != mode)
      continue;
    if ((rc = pnode_add(p, e.key)))
      return rc;
  }
  if (mode)
    for (size_t i = 0; i < p->nsp; i++)
      if ((rc = pnode_add(p, p->sp[i].path)))
        return rc;
  if (mode && id_flag != 0 && !pnode_find(&p->root, "_id", 3) &&
      (rc = pnode_add(p, "_id")))
    return rc;
  for (size_t i = 0; i < p->nsp; i++)
    if ((rc = mark_special(p, &p->sp[i])))
      return rc;
  return 0;
}

int dtx__bproj_compile(const uint8_t *spec, uint32_t slen, dtx__bproj_t **out) {
  *out = NULL;
  dtx__bproj_t *p = calloc(1, sizeof *p);
  if (!p)
    return dtx__err(DTX_ENOMEM, "out of memory compiling projection");
  dtx__arena_init(&p->arena, NULL, 0);
  uint8_t *copy = spec ? dtx__arena_alloc(&p->arena, slen) : NULL;
  int rc;
  if (!spec)
    rc = dtx__err(DTX_EINVAL, "projection must be an object");
  else if (!copy)
    rc = dtx__err(DTX_ENOMEM, "out of memory compiling projection");
  else {
    memcpy(copy, spec, slen);
    rc = proj_parse(p, copy, slen);
  }
  if (rc) {
    dtx__bproj_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

/* ---- applying -------------------------------------------------------------
 */

/* The output is written as raw BSON into one buffer: a document's length
 * is patched when it ends. */
typedef struct writer {
  dtx__buf_t b;
  const size_t *pos; /* per operator: the matched position, or SIZE_MAX */
  const dtx__bproj_t *p;
  const special_t *bad; /* a positional $ whose field held no element */
  char *hit;            /* per operator: its field was met */
} writer_t;

static size_t doc_begin(writer_t *w, bson_type_t t, const char *key,
                        size_t klen) {
  static const uint8_t zero4[4] = {0};
  if (key) {
    uint8_t tb = (uint8_t)t;
    dtx__buf_put(&w->b, &tb, 1);
    dtx__buf_put(&w->b, key, klen);
    dtx__buf_put(&w->b, "", 1);
  }
  size_t at = w->b.n;
  dtx__buf_put(&w->b, zero4, 4);
  return at;
}

static void doc_end(writer_t *w, size_t at) {
  dtx__buf_put(&w->b, "", 1);
  if (w->b.oom)
    return;
  uint32_t n = (uint32_t)(w->b.n - at);
  uint8_t le[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                   (uint8_t)(n >> 24)};
  memcpy(w->b.p + at, le, 4);
}

/* An element as it is, under key (its own, or an array index). */
static void put_elem(writer_t *w, const char *key, size_t klen,
                     const dtx__bval_t *v) {
  uint8_t tb = (uint8_t)v->type;
  dtx__buf_put(&w->b, &tb, 1);
  dtx__buf_put(&w->b, key, klen);
  dtx__buf_put(&w->b, "", 1);
  dtx__buf_put(&w->b, v->data, v->len);
}

static void project_obj(writer_t *w, const dtx__bval_t *obj,
                        const pnode_t *tree, int chain);

/* One array element at output index *k, as project.c's project_array
 * treats it: subdocuments and arrays projected, scalars dropped by an
 * inclusion and kept by an exclusion. */
static void array_elem(writer_t *w, const dtx__bval_t *v, const pnode_t *tree,
                       size_t *k) {
  char key[24];
  size_t kl = dtx__itoa((long long)*k, key);
  if (v->type == BSON_TYPE_DOCUMENT) {
    size_t at = doc_begin(w, v->type, key, kl);
    project_obj(w, v, tree, 0);
    doc_end(w, at);
  } else if (v->type == BSON_TYPE_ARRAY) {
    size_t at = doc_begin(w, v->type, key, kl), j = 0;
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(v, &len);
    dtx__belem_t e;
    while (dtx__belem_next(d, len, &off, &e))
      array_elem(w, &e.v, tree, &j);
    doc_end(w, at);
  } else if (!w->p->incl) {
    put_elem(w, key, kl, v);
  } else {
    return;
  }
  (*k)++;
}

/* Writes elements [from, to) of arr (projected by tree) as a new array
 * named key: every projection of an array field ends here. */
static void put_range(writer_t *w, const dtx__belem_t *f, const pnode_t *tree,
                      size_t from, size_t to) {
  size_t at = doc_begin(w, BSON_TYPE_ARRAY, f->key, f->keylen), i = 0, k = 0;
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(&f->v, &len);
  dtx__belem_t e;
  while (i < to && dtx__belem_next(d, len, &off, &e))
    if (i++ >= from) {
      if (w->p->incl && tree->leaf) { /* kept whole: renumbered only */
        char key[24];
        put_elem(w, key, dtx__itoa((long long)k++, key), &e.v);
      } else {
        array_elem(w, &e.v, tree, &k);
      }
    }
  doc_end(w, at);
}

static size_t count_elems(const dtx__bval_t *arr) {
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(arr, &len);
  dtx__belem_t e;
  size_t n = 0;
  while (dtx__belem_next(d, len, &off, &e))
    n++;
  return n;
}

/* The field of an operator, reached through objects only (project.c's
 * holder), after projection by its node: project.c rewrites the
 * projected array; the projection of an array keeps its elements in
 * place (an inclusion names the field itself, so keeps it whole; an
 * exclusion drops no element), so picking from the original array and
 * projecting what is picked gives the same.  Returns 0 when written or
 * dropped, 1 when the field is to be written as usual. */
static int write_special(writer_t *w, const dtx__belem_t *f,
                         const pnode_t *node) {
  const special_t *s = node->sp;
  size_t i = (size_t)(s - w->p->sp), pos = w->pos[i], n;
  w->hit[i] = 1;
  if (f->v.type != BSON_TYPE_ARRAY) {
    if (s->kind == SP_POSITIONAL && !w->bad)
      w->bad = s;
    return s->kind == SP_SLICE; /* $slice leaves other values alone */
  }
  n = count_elems(&f->v);
  switch (s->kind) {
  case SP_SLICE: {
    size_t from;
    if (s->skip < 0) {
      uint64_t back = 0 - (uint64_t)s->skip;
      from = back >= n ? 0 : n - (size_t)back;
    } else {
      from = (uint64_t)s->skip >= n ? n : (size_t)s->skip;
    }
    size_t to = (uint64_t)s->limit >= n - from ? n : from + (size_t)s->limit;
    put_range(w, f, node, from, to);
    return 0;
  }
  default: /* ELEMMATCH, POSITIONAL: one element, or none */
    if (pos >= n) {
      if (s->kind == SP_POSITIONAL && !w->bad)
        w->bad = s;
      return 0;
    }
    put_range(w, f, node, pos, pos + 1);
    return 0;
  }
}

/* As project.c's project_obj: an inclusion keeps only the tree's paths,
 * an exclusion all but its leaves.  chain is 1 while the path from the
 * root crossed objects only (where an operator's field can be). */
static void project_obj(writer_t *w, const dtx__bval_t *obj,
                        const pnode_t *tree, int chain) {
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(obj, &len);
  dtx__belem_t e;
  int incl = w->p->incl;
  while (dtx__belem_next(d, len, &off, &e)) {
    const pnode_t *p = pnode_find(tree, e.key, e.keylen);
    if (incl ? !p : (p && p->leaf))
      continue;
    if (chain && p && p->sp && !write_special(w, &e, p))
      continue;
    if (incl && p->leaf) {
      put_elem(w, e.key, e.keylen, &e.v);
    } else if (p && e.v.type == BSON_TYPE_DOCUMENT) {
      size_t at = doc_begin(w, e.v.type, e.key, e.keylen);
      project_obj(w, &e.v, p, chain);
      doc_end(w, at);
    } else if (p && e.v.type == BSON_TYPE_ARRAY) {
      put_range(w, &e, p, 0, SIZE_MAX);
    } else if (!incl) {
      put_elem(w, e.key, e.keylen, &e.v);
    }
  }
}

/* Positions of the operators that pick one element, in the spec's order
 * (so the first error is project.c's): $elemMatch's first matching
 * element of doc, and the element of the query's match on matched (the
 * positional $; without a query it fails, as project.c without f). */
static int positions(const dtx__bproj_t *p, const uint8_t *doc, uint32_t len,
                     const dtx__bfilter_t *f, const uint8_t *matched,
                     uint32_t mlen, size_t *pos) {
  for (size_t i = 0; i < p->nsp; i++) {
    const special_t *s = &p->sp[i];
    pos[i] = SIZE_MAX;
    if (s->kind == SP_ELEMMATCH &&
        !dtx__bfilter_match_pos(s->em, doc, len, &pos[i])) {
      int rc = dtx__bfilter_error(s->em);
      if (rc)
        return rc;
      pos[i] = SIZE_MAX;
    } else if (s->kind == SP_POSITIONAL &&
               (!f || !dtx__bfilter_match_pos(f, matched, mlen, &pos[i]) ||
                pos[i] == SIZE_MAX)) {
      int rc = f ? dtx__bfilter_error(f) : 0;
      return rc ? rc
                : dtx__err(DTX_EBADQUERY,
                           "projection %s.$: the query did not match an "
                           "element of an array",
                           s->path);
    }
  }
  return 0;
}

int dtx__bproj_apply_at(const dtx__bproj_t *p, const uint8_t *doc, uint32_t len,
                        const dtx__bfilter_t *f, const uint8_t *matched,
                        uint32_t mlen, bson_t *out) {
  size_t small[8], *pos = p->nsp <= 8 ? small : malloc(p->nsp * sizeof *pos);
  char hits[8] = {0}, *hit = p->nsp <= 8 ? hits : calloc(p->nsp, 1);
  writer_t w = {{0}, pos, p, NULL, hit};
  int rc;
  if (!pos || !hit) {
    rc = dtx__err(DTX_ENOMEM, "out of memory applying projection");
    goto done;
  }
  if (!matched) {
    matched = doc;
    mlen = len;
  }
  if ((rc = positions(p, doc, len, f, matched, mlen, pos)))
    goto done;
  /* A projection only drops fields and elements (a renumbered index is
   * never longer than the one it replaces), so the input's size is room
   * enough: one allocation. */
  dtx__buf_reserve(&w.b, len);
  if (p->empty) {
    dtx__buf_put(&w.b, doc, len);
  } else {
    dtx__bval_t root = dtx__bval_of_doc(doc, len);
    size_t at = doc_begin(&w, BSON_TYPE_DOCUMENT, NULL, 0);
    project_obj(&w, &root, &p->root, 1);
    doc_end(&w, at);
  }
  /* A positional $ whose field was not an array holding the matched
   * position, or was not reached through objects, fails as in project.c
   * (no holder, no array, or the position past its end). */
  for (size_t i = 0; !w.bad && i < p->nsp; i++)
    if (p->sp[i].kind == SP_POSITIONAL && !hit[i])
      w.bad = &p->sp[i];
  if (w.bad) {
    size_t i = (size_t)(w.bad - p->sp);
    rc = dtx__err(DTX_EBADQUERY,
                  "projection %s.$: the matched position %zu is not an "
                  "element of an array at %s",
                  w.bad->path, pos[i], w.bad->path);
    goto done;
  }
  uint8_t *dst;
  if (w.b.oom || w.b.n > UINT32_MAX) {
    rc = dtx__err(DTX_ENOMEM, "out of memory applying projection");
    goto done;
  }
  bson_init(out);
  if (!(dst = bson_reserve_buffer(out, (uint32_t)w.b.n))) {
    bson_destroy(out);
    rc = dtx__err(DTX_ENOMEM, "out of memory applying projection");
    goto done;
  }
  memcpy(dst, w.b.p, w.b.n);
done:
  free(w.b.p);
  if (pos != small)
    free(pos);
  if (hit != hits)
    free(hit);
  return rc;
}

int dtx__bproj_apply(const dtx__bproj_t *p, const uint8_t *doc, uint32_t len,
                     bson_t *out) {
  return dtx__bproj_apply_at(p, doc, len, NULL, NULL, 0, out);
}

/* Whether the filter document names path (or a path below it) at its top
 * level or inside $and/$or/$nor, as project.c's names_path. */
static int names_path(const uint8_t *d, uint32_t len, const char *path,
                      int depth) {
  size_t n = strlen(path);
  uint32_t off = 0;
  dtx__belem_t e;
  if (depth > 100)
    return 0;
  while (dtx__belem_next(d, len, &off, &e)) {
    if (!strcmp(e.key, "$and") || !strcmp(e.key, "$or") ||
        !strcmp(e.key, "$nor")) {
      if (e.v.type != BSON_TYPE_ARRAY)
        continue;
      uint32_t alen, aoff = 0;
      const uint8_t *a = dtx__bval_doc(&e.v, &alen);
      dtx__belem_t x;
      while (dtx__belem_next(a, alen, &aoff, &x)) {
        uint32_t xl;
        const uint8_t *xd;
        if (x.v.type == BSON_TYPE_DOCUMENT &&
            (xd = dtx__bval_doc(&x.v, &xl),
             names_path(xd, xl, path, depth + 1)))
          return 1;
      }
    } else if (!strncmp(e.key, path, n) &&
               (e.key[n] == '\0' || e.key[n] == '.')) {
      return 1;
    }
  }
  return 0;
}

int dtx__bproj_check_query(const dtx__bproj_t *p, const uint8_t *filter,
                           uint32_t flen) {
  for (size_t i = 0; i < p->nsp; i++)
    if (p->sp[i].kind == SP_POSITIONAL &&
        !(filter && names_path(filter, flen, p->sp[i].path, 0)))
      return dtx__err(DTX_EBADQUERY,
                      "projection %s.$: the query must name the array field "
                      "%s",
                      p->sp[i].path, p->sp[i].path);
  return 0;
}

int dtx__bproject(const uint8_t *doc, uint32_t len, const uint8_t *spec,
                  uint32_t slen, bson_t *out) {
  dtx__bproj_t *p;
  int rc = dtx__bproj_compile(spec, slen, &p);
  if (rc == 0)
    rc = dtx__bproj_apply(p, doc, len, out);
  dtx__bproj_free(p);
  return rc;
}
