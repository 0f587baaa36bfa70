/* bupdate_apply.c -- the one-pass writer of the BSON update applier.
 *
 * An apply turns the compiled operations into targets (an operation at a
 * concrete path; a $rename is two: the source, which writes nothing, and
 * the destination, which writes the moved value), sorts them by path and
 * writes the new document in one pass over the old one (write_doc):
 *  - an element no target names is copied as its bytes, one memcpy;
 *  - an element on a target's way is rebuilt, recursively, only there;
 *  - a target whose slot is missing appends it after the existing
 *    elements, in the order the json_t engine would (its operation
 *    order), padding arrays with nulls as MongoDB does.
 * Operations on disjoint paths (the conflict check guarantees it) do not
 * see each other, so one pass gives what update.c's one-op-at-a-time
 * does.  Errors do not stop the pass: the first error in operation order
 * is kept and returned at the end, so that of two failing operations the
 * same one is reported as by the json_t engine; the buffer is then
 * dropped (all or nothing). */
#include "doc/bupdate_int.h"
#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAD_MAX 1500000

/* ---- raw writing --------------------------------------------------------- */

#define BWB_MAX (2 * DTX__DOC_MAX)

int dtx__bwb_init(dtx__bwb_t *b, size_t hint) {
  memset(b, 0, sizeof *b);
  if (hint < 64)
    hint = 64;
  if (hint > BWB_MAX)
    hint = BWB_MAX;
  if (!(b->doc = bson_new()) ||
      !(b->p = bson_reserve_buffer(b->doc, (uint32_t)hint))) {
    b->oom = 1;
    return -1;
  }
  b->cap = hint;
  return 0;
}

void dtx__bwb_put(dtx__bwb_t *b, const void *s, size_t n) {
  if (b->oom || b->big)
    return;
  if (n > b->cap - b->n) {
    size_t want = b->cap * 2 > b->n + n ? b->cap * 2 : b->n + n;
    if (b->n + n > BWB_MAX) {
      b->big = 1;
      return;
    }
    if (want > BWB_MAX)
      want = BWB_MAX;
    /* bson_reserve_buffer keeps the bytes already there (it reallocs). */
    uint8_t *p = bson_reserve_buffer(b->doc, (uint32_t)want);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = want;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
}

bson_t *dtx__bwb_finish(dtx__bwb_t *b) {
  bson_t *d = b->doc;
  DTX_ASSERT(!b->oom && !b->big && b->n >= 5, "bupdate: one document out");
  /* The length becomes what was written: no copy, the bytes stay. */
  if (!bson_reserve_buffer(d, (uint32_t)b->n)) {
    dtx__bwb_drop(b);
    return NULL;
  }
  b->doc = NULL;
  b->p = NULL;
  return d;
}

void dtx__bwb_drop(dtx__bwb_t *b) {
  if (b->doc)
    bson_destroy(b->doc);
  memset(b, 0, sizeof *b);
}

size_t dtx__bw_open(dtx__bwb_t *b) {
  static const uint8_t z[4];
  size_t at = b->n;
  dtx__bwb_put(b, z, 4);
  return at;
}

void dtx__bw_close(dtx__bwb_t *b, size_t at) {
  static const uint8_t z;
  dtx__bwb_put(b, &z, 1);
  if (!b->oom && !b->big) {
    uint32_t n = BSON_UINT32_TO_LE((uint32_t)(b->n - at));
    memcpy(b->p + at, &n, 4);
  }
}

void dtx__bw_key(dtx__bwb_t *b, bson_type_t t, const char *key, size_t klen) {
  uint8_t tb = (uint8_t)t, z = 0;
  dtx__bwb_put(b, &tb, 1);
  dtx__bwb_put(b, key, klen);
  dtx__bwb_put(b, &z, 1);
}

void dtx__bw_elem(dtx__bwb_t *b, const char *key, size_t klen,
                  const dtx__bval_t *v) {
  dtx__bw_key(b, v->type, key, klen);
  dtx__bwb_put(b, v->data, v->len);
}

void dtx__bw_i32(dtx__bwb_t *b, const char *key, size_t klen, int32_t v) {
  uint32_t x = BSON_UINT32_TO_LE((uint32_t)v);
  dtx__bw_key(b, BSON_TYPE_INT32, key, klen);
  dtx__bwb_put(b, &x, 4);
}

void dtx__bw_i64(dtx__bwb_t *b, const char *key, size_t klen, int64_t v) {
  uint64_t x = BSON_UINT64_TO_LE((uint64_t)v);
  dtx__bw_key(b, BSON_TYPE_INT64, key, klen);
  dtx__bwb_put(b, &x, 8);
}

void dtx__bw_double(dtx__bwb_t *b, const char *key, size_t klen, double v) {
  double x = BSON_DOUBLE_TO_LE(v);
  dtx__bw_key(b, BSON_TYPE_DOUBLE, key, klen);
  dtx__bwb_put(b, &x, 8);
}

void dtx__bw_null(dtx__bwb_t *b, const char *key, size_t klen) {
  dtx__bw_key(b, BSON_TYPE_NULL, key, klen);
}

void dtx__bw_fail(bwctx_t *w, size_t ord, int rc) {
  if (rc == DTX_ENOMEM)
    ord = 0; /* out of memory wins: nothing after it can be trusted */
  if (w->err && ord >= w->err_ord)
    return;
  w->err = rc;
  w->err_ord = ord;
  snprintf(w->err_detail, sizeof w->err_detail, "%s", dtx_errdetail());
}

/* The raw bytes of element e: its type byte, name and payload. */
static void copy_elem(dtx__bwb_t *b, const dtx__belem_t *e) {
  const uint8_t *start = (const uint8_t *)e->key - 1;
  dtx__bwb_put(b, start, (size_t)(e->v.data + e->v.len - start));
}

/* ---- targets ---------------------------------------------------------------
 */

int dtx__bupd_creates(const btgt_t *t) {
  if (t->role == T_RSRC)
    return 0;
  if (t->role == T_RDST)
    return 1;
  switch (t->op->kind) {
  case OP_UNSET:
  case OP_PULL:
  case OP_PULLALL:
  case OP_POP:
    return 0;
  default:
    return 1;
  }
}

static const char *t_opname(const btgt_t *t) {
  return t->role == T_OP ? t->op->opname : "$rename";
}

/* update_ops.c's not_traversable: segment i of t's path cannot be created
 * in a value of type at. */
static int not_traversable(const btgt_t *t, size_t i, bson_type_t at) {
  int plen = i ? (int)(t->segs[i] - t->segs[0] - 1) : 0;
  return dtx__err(DTX_ETYPE,
                  "%s: cannot create field '%s' in %s value at '%.*s' (path "
                  "'%s')",
                  t_opname(t), t->segs[i], dtx__bupd_tname(at), plen, t->path,
                  t->path);
}

/* ---- the writer
 * --------------------------------------------------------------- */

/* Targets sharing segment d: t[lo..hi). */
typedef struct grp {
  size_t lo, hi;
  size_t idx;  /* the segment as an array index, or SIZE_MAX */
  size_t slen; /* the segment's length */
  int numeric, seen;
} grp_t;

static void write_doc(bwctx_t *w, btgt_t *t, size_t n, size_t d,
                      const dtx__bval_t *src, int is_array, int level);

static int terminal(const grp_t *g, const btgt_t *t, size_t d) {
  return g->hi - g->lo == 1 && t[g->lo].nsegs == d + 1;
}

/* A group whose segment names an existing element e. */
static void on_existing(bwctx_t *w, btgt_t *t, const grp_t *g, size_t d,
                        const dtx__belem_t *e, int is_array, int level) {
  if (terminal(g, t, d)) {
    const btgt_t *x = &t[g->lo];
    if (x->role != T_OP)
      return; /* a $rename's source goes; its destination is appended */
    size_t before = w->b.n;
    int rc = dtx__bupd_put(w, x, e->key, e->keylen, &e->v, is_array, level);
    if (rc) {
      dtx__bw_fail(w, x->ord, rc);
      w->b.n = before;
      copy_elem(&w->b, e);
    }
    return;
  }
  for (size_t i = g->lo; i < g->hi; i++)
    if (t[i].role == T_RDST && e->v.type == BSON_TYPE_ARRAY)
      dtx__bw_fail(w, t[i].ord,
                   dtx__err(DTX_ETYPE,
                            "$rename: the %s field '%s' cannot be an array "
                            "element (an array at '%.*s')",
                            "destination", t[i].path,
                            (int)(t[i].segs[d + 1] - t[i].segs[0] - 1),
                            t[i].path));
  if (e->v.type == BSON_TYPE_DOCUMENT || e->v.type == BSON_TYPE_ARRAY) {
    dtx__bw_key(&w->b, e->v.type, e->key, e->keylen);
    write_doc(w, t + g->lo, g->hi - g->lo, d + 1, &e->v,
              e->v.type == BSON_TYPE_ARRAY, level + 1);
    return;
  }
  /* A scalar in the way: creating targets fail, the others do nothing. */
  for (size_t i = g->lo; i < g->hi; i++)
    if (dtx__bupd_creates(&t[i])) {
      dtx__bw_fail(w, t[i].ord, not_traversable(&t[i], d + 1, e->v.type));
      break;
    }
  copy_elem(&w->b, e);
}

/* A group whose segment names nothing in the container (yet). */
static void on_missing(bwctx_t *w, btgt_t *t, const grp_t *g, size_t d,
                       int is_array, size_t *count, int level) {
  const btgt_t *first = NULL;
  char num[24];
  const char *key = t[g->lo].segs[d];
  size_t klen = strlen(key);
  for (size_t i = g->lo; i < g->hi && !first; i++)
    if (dtx__bupd_creates(&t[i]))
      first = &t[i];
  if (!first)
    return;
  if (is_array) {
    if (!g->numeric) {
      dtx__bw_fail(w, first->ord, not_traversable(first, d, BSON_TYPE_ARRAY));
      return;
    }
    if (g->idx >= PAD_MAX) {
      dtx__bw_fail(w, first->ord,
                   dtx__err(DTX_EINVAL,
                            "%s: cannot pad array beyond %d elements at '%s'",
                            t_opname(first), PAD_MAX, first->path));
      return;
    }
    while (*count < g->idx) {
      size_t nl = dtx__itoa((long long)*count, num);
      dtx__bw_null(&w->b, num, nl);
      (*count)++;
    }
    klen = dtx__itoa((long long)g->idx, num);
    key = num;
    *count = g->idx + 1;
  }
  if (terminal(g, t, d)) {
    size_t before = w->b.n;
    int rc = 0;
    if (first->role == T_RDST) {
      if (level + dtx__bupd_vdepth(&first->val) > DTX_MAX_DEPTH)
        rc = dtx__err(DTX_EINVAL,
                      "$rename: the result would nest deeper than %d "
                      "levels at '%s'",
                      DTX_MAX_DEPTH, first->path);
      else
        dtx__bw_elem(&w->b, key, klen, &first->val);
    } else {
      rc = dtx__bupd_put(w, first, key, klen, NULL, is_array, level);
    }
    if (rc) {
      dtx__bw_fail(w, first->ord, rc);
      w->b.n = before;
    }
    return;
  }
  if (level + 1 > DTX_MAX_DEPTH) {
    dtx__bw_fail(w, first->ord,
                 dtx__err(DTX_EINVAL,
                          "%s: the result would nest deeper than %d levels "
                          "at '%s'",
                          t_opname(first), DTX_MAX_DEPTH, first->path));
    return;
  }
  dtx__bw_key(&w->b, BSON_TYPE_DOCUMENT, key, klen);
  write_doc(w, t + g->lo, g->hi - g->lo, d + 1, NULL, 0, level + 1);
}

/* Writes the container src (NULL: a new one) with the targets t[0..n),
 * all of whose paths run through it and continue at segment d. */
static void write_doc(bwctx_t *w, btgt_t *t, size_t n, size_t d,
                      const dtx__bval_t *src, int is_array, int level) {
  grp_t gbuf[16], *g = gbuf;
  size_t ng = 0, i, count = 0;
  if (n > sizeof gbuf / sizeof gbuf[0] && !(g = malloc(n * sizeof *g))) {
    dtx__bw_fail(w, 0, dtx__err(DTX_ENOMEM, "out of memory applying update"));
    return;
  }
  for (i = 0; i < n; i++) {
    DTX_ASSERT(t[i].nsegs > d, "bupdate: a target's path runs past here");
    if (i && !strcmp(t[i].segs[d], t[i - 1].segs[d])) {
      g[ng - 1].hi = i + 1;
      continue;
    }
    g[ng] = (grp_t){i, i + 1, SIZE_MAX, strlen(t[i].segs[d]), 0, 0};
    g[ng].numeric = dtx__upd_seg_index(t[i].segs[d], &g[ng].idx);
    /* Two spellings of one index ("01" and "1", which sort together) name
     * one array slot twice: a conflict here, where the json_t engine
     * applies both in turn (see the report of branch bupdate). */
    if (is_array && g[ng].numeric && ng && g[ng - 1].numeric &&
        g[ng - 1].idx == g[ng].idx) {
      dtx__bw_fail(w, t[i].ord,
                   dtx__err(DTX_EBADUPDATE,
                            "updating the path '%s' (%s) would create a "
                            "conflict at '%s' (%s)",
                            t[i].path, t_opname(&t[i]), t[g[ng - 1].lo].path,
                            t_opname(&t[g[ng - 1].lo])));
      g[ng].seen = 1;
      g[ng].numeric = 0; /* matches nothing, appends nothing */
      g[ng].idx = SIZE_MAX;
    }
    ng++;
  }
  size_t at = dtx__bw_open(&w->b);
  if (src) {
    /* Untouched elements are copied in runs, one memcpy each; once every
     * group has met its element, the rest goes in one piece unread.
     * [run, pos) is the pending run; pos is where the next element
     * starts (the trailing NUL at the end). */
    uint32_t off = 0, pos = 4, run = 4, left = 0;
    dtx__belem_t e;
    for (i = 0; i < ng; i++)
      left += !g[i].seen;
    while (left && dtx__belem_next(src->data, src->len, &off, &e)) {
      grp_t *hit = NULL;
      for (i = 0; i < ng && !hit; i++) {
        if (g[i].seen)
          continue;
        if (is_array ? g[i].numeric && g[i].idx == count
                     : g[i].slen == e.keylen &&
                           !memcmp(t[g[i].lo].segs[d], e.key, e.keylen))
          hit = &g[i];
      }
      count++;
      if (hit) {
        dtx__bwb_put(&w->b, src->data + run, pos - run);
        run = off;
        hit->seen = 1;
        left--;
        on_existing(w, t, hit, d, &e, is_array, level);
      }
      pos = off;
    }
    /* The rest, read or not, is untouched; count only matters when a
     * group is still missing, and then every element was read. */
    dtx__bwb_put(&w->b, src->data + run, src->len - 1 - run);
  }
  /* Appended, in operation order: slots still missing, and the
   * destinations of $rename (which MongoDB unsets, then sets). */
  for (i = 0; i < ng; i++) {
    if (g[i].seen && !(terminal(&g[i], t, d) && t[g[i].lo].role == T_RDST))
      continue;
    on_missing(w, t, &g[i], d, is_array, &count, level);
  }
  dtx__bw_close(&w->b, at);
  if (g != gbuf)
    free(g);
}

/* ---- matching elements ------------------------------------------------------
 */

int dtx__bupd_match_wrapped(dtx__buf_t *scratch, const dtx__bfilter_t *f,
                            const char *key, const dtx__bval_t *v, int *err) {
  size_t klen = strlen(key), n = 4 + 1 + klen + 1 + v->len + 1;
  uint8_t t = (uint8_t)v->type, z = 0;
  uint32_t le = BSON_UINT32_TO_LE((uint32_t)n);
  scratch->n = 0;
  dtx__buf_put(scratch, &le, 4);
  dtx__buf_put(scratch, &t, 1);
  dtx__buf_put(scratch, key, klen + 1);
  dtx__buf_put(scratch, v->data, v->len);
  dtx__buf_put(scratch, &z, 1);
  if (scratch->oom) {
    *err = dtx__err(DTX_ENOMEM, "out of memory matching an element");
    return 0;
  }
  int m = dtx__bfilter_match(f, (const uint8_t *)scratch->p, (uint32_t)n);
  if ((*err = dtx__bfilter_error(f)))
    return 0;
  return m;
}

/* ---- positional paths -------------------------------------------------------
 */

/* One operation at one concrete path; p is owned when own is set. */
typedef struct app {
  const bop_t *op;
  upath_t p;
  int own;
} app_t;

typedef struct apps {
  app_t *v;
  size_t n, cap;
} apps_t;

static int apps_add(apps_t *a, const bop_t *op, const upath_t *p,
                    const char *concrete) {
  if (a->n == a->cap && DTX__GROW(a->v, a->cap, 8))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  app_t *x = &a->v[a->n];
  memset(x, 0, sizeof *x);
  x->op = op;
  if (!concrete) {
    x->p = *p;
    a->n++;
    return 0;
  }
  x->own = 1;
  int rc = dtx__upd_path_split(&x->p, concrete);
  if (rc == 0)
    a->n++;
  return rc;
}

typedef struct expander {
  const dtx__bupdate_t *u;
  dtx__buf_t *scratch;
  const bop_t *op;
  size_t pos;
  apps_t *apps;
  char path[2048];
} expander_t;

static int put_seg(expander_t *x, size_t len, const char *seg) {
  int wr = snprintf(x->path + len, sizeof x->path - len, "%s%s", len ? "." : "",
                    seg);
  if (wr < 0 || (size_t)wr >= sizeof x->path - len)
    return -1;
  return (int)(len + (size_t)wr);
}

/* update_array.c's expand_at over BSON: cur is the value at the path so
 * far (type 0: missing). */
static int expand_at(expander_t *x, size_t i, dtx__bval_t cur, size_t len) {
  const upath_t *p = &x->op->p;
  if (i == p->nsegs)
    return apps_add(x->apps, x->op, NULL, x->path);
  const char *seg = p->segs[i], *id = NULL;
  size_t idlen = 0;
  int kind = dtx__upd_seg_kind(seg, &id, &idlen), nl;
  char num[24];
  if (kind == SEG_PLAIN || kind == SEG_DOLLAR) {
    dtx__bval_t next = {0, 0, NULL};
    dtx__belem_t e;
    if (kind == SEG_DOLLAR) {
      if (x->pos == SIZE_MAX)
        return dtx__err(DTX_EBADUPDATE,
                        "%s: the positional operator did not find the match "
                        "needed from the query (path '%s')",
                        x->op->opname, p->path);
      num[dtx__itoa((long long)x->pos, num)] = '\0';
      seg = num;
    }
    if ((cur.type == BSON_TYPE_DOCUMENT || cur.type == BSON_TYPE_ARRAY) &&
        dtx__belem_find(cur.data, cur.len, seg, strlen(seg), &e))
      next = e.v;
    if ((nl = put_seg(x, len, seg)) < 0)
      return dtx__err(DTX_EBADUPDATE, "%s: path too long", x->op->opname);
    return expand_at(x, i + 1, next, (size_t)nl);
  }
  if (!cur.type)
    return dtx__err(DTX_EBADUPDATE,
                    "%s: the path '%.*s' must exist in the document in order "
                    "to apply array updates (path '%s')",
                    x->op->opname, (int)len, x->path, p->path);
  if (cur.type != BSON_TYPE_ARRAY)
    return dtx__err(DTX_ETYPE,
                    "%s: cannot apply array updates to non-array element "
                    "'%.*s' (%s)",
                    x->op->opname, (int)len, x->path,
                    dtx__bupd_tname(cur.type));
  const bafilter_t *af = NULL;
  if (kind == SEG_FILTERED) {
    for (size_t j = 0; j < x->u->naf && !af; j++)
      if (strlen(x->u->af[j].id) == idlen && !memcmp(x->u->af[j].id, id, idlen))
        af = &x->u->af[j];
    if (!af)
      return dtx__err(DTX_EBADUPDATE, "no array filter for '%.*s'", (int)idlen,
                      id);
  }
  uint32_t off = 0;
  dtx__belem_t e;
  for (size_t k = 0; dtx__belem_next(cur.data, cur.len, &off, &e); k++) {
    int rc = 0;
    if (af && !dtx__bupd_match_wrapped(x->scratch, af->f, af->id, &e.v, &rc)) {
      if (rc)
        return rc;
      continue;
    }
    num[dtx__itoa((long long)k, num)] = '\0';
    if ((nl = put_seg(x, len, num)) < 0)
      return dtx__err(DTX_EBADUPDATE, "%s: path too long", x->op->opname);
    if ((rc = expand_at(x, i + 1, e.v, (size_t)nl)))
      return rc;
    x->path[len] = '\0';
  }
  return 0;
}

static int app_cmp(const void *pa, const void *pb) {
  const app_t *a = pa, *b = pb;
  const upath_t *x = a->op->kind == OP_RENAME ? &a->op->to : &a->p;
  const upath_t *y = b->op->kind == OP_RENAME ? &b->op->to : &b->p;
  return dtx__upd_segs_cmp(x->segs, x->nsegs, y->segs, y->nsegs);
}

/* The writer's order: the operations' order, with two spellings of one
 * number ("01", "1") told apart by their bytes, so that the targets under
 * one name are neighbours (dtx__upd_seg_cmp calls them equal). */
static int tgt_cmp(const void *pa, const void *pb) {
  const btgt_t *a = pa, *b = pb;
  for (size_t i = 0; i < a->nsegs && i < b->nsegs; i++) {
    int c = dtx__upd_seg_cmp(a->segs[i], b->segs[i]);
    if (!c)
      c = strcmp(a->segs[i], b->segs[i]);
    if (c)
      return c;
  }
  return a->nsegs < b->nsegs ? -1 : a->nsegs > b->nsegs;
}

/* The operations of u as concrete applications, in operation order. */
static int build_apps(const dtx__bupdate_t *u, const dtx__bval_t *doc,
                      int is_insert, size_t pos, dtx__buf_t *scratch,
                      apps_t *a) {
  int rc = 0;
  for (size_t i = 0; i < u->nops && rc == 0; i++) {
    const bop_t *op = &u->ops[i];
    if (op->kind == OP_SETONINSERT && !is_insert)
      continue;
    if (!op->positional) {
      rc = apps_add(a, op, &op->p, NULL);
      continue;
    }
    expander_t *x = malloc(sizeof *x);
    if (!x)
      return dtx__err(DTX_ENOMEM, "out of memory applying update");
    x->u = u;
    x->scratch = scratch;
    x->op = op;
    x->pos = pos;
    x->apps = a;
    x->path[0] = '\0';
    rc = expand_at(x, 0, *doc, 0);
    free(x);
  }
  if (rc || !u->positional || a->n < 2)
    return rc;
  qsort(a->v, a->n, sizeof *a->v, app_cmp);
  wpath_t *wp = malloc(2 * a->n * sizeof *wp);
  size_t nw = 0;
  if (!wp)
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  for (size_t i = 0; i < a->n; i++) {
    wp[nw++] = (wpath_t){a->v[i].p.segs, a->v[i].p.nsegs, a->v[i].p.path,
                         a->v[i].op->opname};
    if (a->v[i].op->kind == OP_RENAME)
      wp[nw++] = (wpath_t){a->v[i].op->to.segs, a->v[i].op->to.nsegs,
                           a->v[i].op->to.path, a->v[i].op->opname};
  }
  rc = dtx__upd_check_conflicts(wp, nw, 1);
  free(wp);
  return rc;
}

/* A $rename's source through objects only (update_ops.c's walk_objects
 * with create off): 1 with *v, 0 when missing, or DTX_ETYPE. */
static int rename_source(const upath_t *p, const dtx__bval_t *doc,
                         dtx__bval_t *v) {
  dtx__bval_t cur = *doc;
  dtx__belem_t e;
  for (size_t i = 0; i < p->nsegs; i++) {
    if (!dtx__belem_find(cur.data, cur.len, p->segs[i], strlen(p->segs[i]), &e))
      return 0;
    if (i + 1 == p->nsegs)
      break;
    if (e.v.type == BSON_TYPE_ARRAY)
      return dtx__err(DTX_ETYPE,
                      "$rename: the %s field '%s' cannot be an array element "
                      "(an array at '%.*s')",
                      "source", p->path, (int)(p->segs[i + 1] - p->buf - 1),
                      p->path);
    if (e.v.type != BSON_TYPE_DOCUMENT)
      return 0;
    cur = e.v;
  }
  *v = e.v;
  return 1;
}

/* ---- the driver
 * ----------------------------------------------------------------- */

/* A replacement keeps the stored _id, first; one naming another is
 * refused (update.c's apply_replacement). */
static int write_replacement(const dtx__bupdate_t *u, const dtx__bval_t *doc,
                             dtx__bwb_t *b) {
  dtx__belem_t did, rid, e;
  int hd = dtx__belem_find(doc->data, doc->len, "_id", 3, &did);
  int hr = dtx__belem_find(u->repl.data, u->repl.len, "_id", 3, &rid);
  uint32_t off = 0;
  if (hd && hr &&
      (did.v.type != rid.v.type || did.v.len != rid.v.len ||
       memcmp(did.v.data, rid.v.data, did.v.len)))
    return dtx__err(DTX_EIMMUTABLE,
                    "replacement: _id is immutable (path '_id')");
  size_t at = dtx__bw_open(b);
  if (hd || hr)
    copy_elem(b, hd ? &did : &rid);
  while (dtx__belem_next(u->repl.data, u->repl.len, &off, &e))
    if (strcmp(e.key, "_id"))
      copy_elem(b, &e);
  dtx__bw_close(b, at);
  return 0;
}

static int apply_ops(const dtx__bupdate_t *u, const dtx__bval_t *doc,
                     int is_insert, int64_t now_ms, bwctx_t *w) {
  size_t pos = SIZE_MAX;
  apps_t a = {0};
  btgt_t tbuf[16], *t = tbuf;
  size_t nt = 0, i;
  int rc = 0;
  (void)now_ms;
  if (u->uses_dollar && u->filter) {
    dtx__bfilter_match_pos(u->filter, doc->data, doc->len, &pos);
    if ((rc = dtx__bfilter_error(u->filter)))
      return rc;
  }
  rc = build_apps(u, doc, is_insert, pos, &w->scratch, &a);
  if (rc)
    goto done;
  if (2 * a.n > sizeof tbuf / sizeof tbuf[0] &&
      !(t = malloc(2 * a.n * sizeof *t))) {
    rc = dtx__err(DTX_ENOMEM, "out of memory applying update");
    goto done;
  }
  for (i = 0; i < a.n; i++) {
    const app_t *x = &a.v[i];
    if (x->op->kind == OP_RENAME) {
      dtx__bval_t v;
      int r = rename_source(&x->op->p, doc, &v);
      if (r < 0) {
        dtx__bw_fail(w, i, r);
        continue;
      }
      if (r == 0)
        continue; /* a missing source: nothing happens, at either end */
      t[nt++] = (btgt_t){
          x->op, x->op->p.segs, x->op->p.nsegs, x->op->p.path, T_RSRC, i, v};
      t[nt++] = (btgt_t){
          x->op, x->op->to.segs, x->op->to.nsegs, x->op->to.path, T_RDST, i, v};
      continue;
    }
    t[nt++] = (btgt_t){x->op, x->p.segs, x->p.nsegs,  x->p.path,
                       T_OP,  i,         {0, 0, NULL}};
  }
  qsort(t, nt, sizeof *t, tgt_cmp);
  if (nt)
    write_doc(w, t, nt, 0, doc, 0, 1);
  else
    dtx__bwb_put(&w->b, doc->data, doc->len);
done:
  for (i = 0; i < a.n; i++)
    if (a.v[i].own)
      dtx__upd_path_free(&a.v[i].p);
  free(a.v);
  if (t != tbuf)
    free(t);
  return rc;
}

/* The operation that named _id, for the detail of DTX_EIMMUTABLE. */
static const bop_t *id_op(const dtx__bupdate_t *u) {
  for (size_t i = 0; i < u->nops; i++)
    if (!strcmp(u->ops[i].p.segs[0], "_id"))
      return &u->ops[i];
  return NULL;
}

int dtx__bupdate_apply(const dtx__bupdate_t *u, const uint8_t *doc,
                       uint32_t len, int is_insert, int64_t now_ms,
                       bson_t **out, int *changed) {
  bwctx_t w;
  int rc;
  if (out)
    *out = NULL;
  if (changed)
    *changed = 0;
  if (!u || !out || !doc || len < 5)
    return dtx__err(DTX_EINVAL, "update apply: %s",
                    !doc || len < 5 ? "document must be an object"
                                    : "NULL argument");
  memset(&w, 0, offsetof(bwctx_t, err_detail));
  w.u = u;
  w.is_insert = is_insert;
  w.now_ms = now_ms;
  w.err_detail[0] = '\0';
  dtx__bval_t d = dtx__bval_of_doc(doc, len);
  /* Most updates grow a document a little: one allocation, usually. */
  if (dtx__bwb_init(&w.b, (size_t)len + u->speclen + 64))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  rc = u->replacement ? write_replacement(u, &d, &w.b)
                      : apply_ops(u, &d, is_insert, now_ms, &w);
  free(w.scratch.p);
  if (rc == 0 && w.err)
    rc = dtx__err(w.err, "%s", w.err_detail);
  if (rc == 0 && w.b.oom)
    rc = dtx__err(DTX_ENOMEM, "out of memory applying update");
  if (rc == 0 && (w.b.big || w.b.n > DTX__DOC_MAX))
    rc = dtx__err(DTX_ELIMIT,
                  "the updated document would hold more than 16 MiB "
                  "(%zu bytes), the limit of a document",
                  (size_t)DTX__DOC_MAX);
  if (rc == 0 && !u->replacement) {
    dtx__belem_t did, nid;
    if (dtx__belem_find(doc, len, "_id", 3, &did) &&
        (!dtx__belem_find((const uint8_t *)w.b.p, (uint32_t)w.b.n, "_id", 3,
                          &nid) ||
         did.v.type != nid.v.type || did.v.len != nid.v.len ||
         memcmp(did.v.data, nid.v.data, did.v.len))) {
      const bop_t *op = id_op(u);
      rc = dtx__err(DTX_EIMMUTABLE, "%s: _id is immutable (path '%s')",
                    op ? op->opname : "update", op ? op->p.path : "_id");
    }
  }
  if (rc) {
    dtx__bwb_drop(&w.b);
    return rc;
  }
  int same = w.b.n == len && !memcmp(w.b.p, doc, len);
  if (!(*out = dtx__bwb_finish(&w.b)))
    return dtx__err(DTX_ENOMEM, "out of memory applying update");
  if (changed)
    *changed = !same;
  return 0;
}
