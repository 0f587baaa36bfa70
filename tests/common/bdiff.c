/* bdiff.c -- the differential runner's helpers (bdiff.h). */
#include "bdiff.h"

#include "util/err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bdiff_bson(const char *json_text, bson_t *out) {
  json_t *j = NULL;
  bson_init(out);
  int rc = dtx__json_parse(json_text, &j);
  if (rc == 0)
    rc = dtx__bson_from_json(j, out);
  json_decref(j);
  return rc;
}

int bdiff_json_same(const json_t *a, const json_t *b) {
  if (!a || !b)
    return a == b;
  if (json_typeof(a) != json_typeof(b))
    return 0;
  switch (json_typeof(a)) {
  case JSON_INTEGER:
    return json_integer_value(a) == json_integer_value(b);
  case JSON_REAL: {
    double x = json_real_value(a), y = json_real_value(b);
    return (x == y && signbit(x) == signbit(y)) || (isnan(x) && isnan(y));
  }
  case JSON_STRING:
    return json_string_length(a) == json_string_length(b) &&
           memcmp(json_string_value(a), json_string_value(b),
                  json_string_length(a)) == 0;
  case JSON_ARRAY: {
    size_t n = json_array_size(a);
    if (n != json_array_size(b))
      return 0;
    for (size_t i = 0; i < n; i++)
      if (!bdiff_json_same(json_array_get(a, i), json_array_get(b, i)))
        return 0;
    return 1;
  }
  case JSON_OBJECT: {
    /* jansson keeps insertion order; MongoDB's documents are ordered. */
    if (json_object_size(a) != json_object_size(b))
      return 0;
    void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);
    for (; ia && ib; ia = json_object_iter_next((json_t *)a, ia),
                     ib = json_object_iter_next((json_t *)b, ib)) {
      size_t ka = json_object_iter_key_len(ia);
      if (ka != json_object_iter_key_len(ib) ||
          memcmp(json_object_iter_key(ia), json_object_iter_key(ib), ka) ||
          !bdiff_json_same(json_object_iter_value(ia),
                           json_object_iter_value(ib)))
        return 0;
    }
    return !ia && !ib;
  }
  default: /* true, false, null: the type says it all */
    return 1;
  }
}

int bdiff_same(const json_t *a, const uint8_t *doc, uint32_t len) {
  json_t *b = NULL;
  int rc = dtx__bson_to_json(doc, len, json_is_array(a), &b);
  if (rc) {
    fprintf(stderr, "bdiff_same: bridge: %s\n", dtx_errdetail());
    return 0;
  }
  int same = bdiff_json_same(a, b);
  json_decref(b);
  return same;
}

int bdiff_same_val(const json_t *a, const dtx__bval_t *v) {
  if (!v || v->type == BSON_TYPE_EOD)
    return a == NULL;
  if (!a)
    return 0;
  json_t *b = NULL;
  if (dtx__bval_to_json(v, &b)) {
    fprintf(stderr, "bdiff_same_val: bridge: %s\n", dtx_errdetail());
    return 0;
  }
  int same = bdiff_json_same(a, b);
  json_decref(b);
  return same;
}

int bdiff_cmp(const json_t *a, const json_t *b, int *out) {
  bson_t ha = BSON_INITIALIZER, hb = BSON_INITIALIZER;
  dtx__bval_t va = {BSON_TYPE_EOD, 0, NULL}, vb = va;
  int rc = a ? dtx__bval_from_json(a, &ha, &va) : 0;
  if (rc == 0 && b)
    rc = dtx__bval_from_json(b, &hb, &vb);
  if (rc == 0) {
    int r = dtx__bval_cmp(&va, &vb);
    *out = (r > 0) - (r < 0);
  }
  bson_destroy(&ha);
  bson_destroy(&hb);
  return rc;
}

int bdiff_bracket(const json_t *v) {
  bson_t h = BSON_INITIALIZER;
  dtx__bval_t x = {BSON_TYPE_EOD, 0, NULL};
  if (v && dtx__bval_from_json(v, &h, &x))
    x.type = BSON_TYPE_EOD;
  bson_destroy(&h);
  return dtx__bval_bracket(x.type);
}

char *bdiff_show(const dtx__bval_t *v) {
  json_t *b = NULL;
  if (!v || v->type == BSON_TYPE_EOD || dtx__bval_to_json(v, &b))
    return strdup("(missing)");
  char *s = dtx__json_dump(b);
  json_decref(b);
  return s ? s : strdup("(oom)");
}

static char *show_json(const json_t *v) {
  char *s = v ? dtx__json_dump(v) : NULL;
  return s ? s : strdup("(missing)");
}

/* ---- walks ---------------------------------------------------------------- */

/* One visit of either walk: the value (a json_t borrowed from the row's
 * document, or a view into the row's BSON), empty_leaf, and *pos. */
typedef struct visit {
  const json_t *j;
  dtx__bval_t b;
  int empty;
  size_t pos;
} visit_t;

typedef struct rec {
  visit_t v[512];
  size_t n;
  size_t stop_at; /* return 7 from this visit on; SIZE_MAX never */
  size_t *pos;
} rec_t;

static int rec_json(void *ctx, const json_t *v, int empty) {
  rec_t *r = ctx;
  if (r->n < sizeof r->v / sizeof r->v[0]) {
    visit_t *x = &r->v[r->n];
    memset(x, 0, sizeof *x);
    x->j = v;
    x->empty = empty;
    x->pos = *r->pos;
  }
  return r->n++ == r->stop_at ? 7 : 0;
}

static int rec_bson(void *ctx, const dtx__bval_t *v, int empty) {
  rec_t *r = ctx;
  if (r->n < sizeof r->v / sizeof r->v[0]) {
    visit_t *x = &r->v[r->n];
    memset(x, 0, sizeof *x);
    if (v)
      x->b = *v;
    x->empty = empty;
    x->pos = *r->pos;
  }
  return r->n++ == r->stop_at ? 7 : 0;
}

static int fail(char *why, size_t whylen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
  return 0;
}

static const char *mode_name(int m) {
  return m == DTX__LEAF_WHOLE ? "WHOLE" : m == DTX__LEAF_EXPAND ? "EXPAND"
                                                                : "ELEMS";
}

/* One pair of walks stopped at stop_at (SIZE_MAX: run to the end). */
static int walk_pair(const json_t *doc, const bson_t *b, const char *path,
                     int mode, size_t stop_at, size_t *nvisits, char *why,
                     size_t whylen) {
  static __thread rec_t rj, rb;
  size_t pj, pb;
  rj.n = rb.n = 0;
  rj.stop_at = rb.stop_at = stop_at;
  rj.pos = &pj;
  rb.pos = &pb;
  int retj = dtx__path_walk_pos(path, doc, mode, rec_json, &rj, &pj);
  int retb = dtx__bpath_walk(path, bson_get_data(b), b->len, mode, rec_bson,
                             &rb, &pb);
  *nvisits = rj.n;
  if (rj.n != rb.n || retj != retb)
    return fail(why, whylen, "%s %s stop %zd: json %zu visits ret %d, bson "
                             "%zu visits ret %d",
                path, mode_name(mode), (ssize_t)stop_at, rj.n, retj, rb.n,
                retb);
  if (pj != pb)
    return fail(why, whylen, "%s %s: *pos after the walk json %zd bson %zd",
                path, mode_name(mode), (ssize_t)pj, (ssize_t)pb);
  size_t n = rj.n < 512 ? rj.n : 512;
  for (size_t i = 0; i < n; i++) {
    const visit_t *x = &rj.v[i], *y = &rb.v[i];
    const dtx__bval_t *yb = y->b.type ? &y->b : NULL;
    if (!bdiff_same_val(x->j, yb) || x->empty != y->empty ||
        x->pos != y->pos) {
      char *sj = show_json(x->j), *sb = bdiff_show(yb);
      fail(why, whylen, "%s %s visit %zu: json %s empty %d pos %zd, bson %s "
                        "empty %d pos %zd",
           path, mode_name(mode), i, sj, x->empty, (ssize_t)x->pos, sb,
           y->empty, (ssize_t)y->pos);
      free(sj);
      free(sb);
      return 0;
    }
  }
  return 1;
}

int bdiff_walk(const json_t *doc, const char *path, int leaf_mode,
               char *why, size_t whylen) {
  bson_t b = BSON_INITIALIZER;
  int rc = dtx__bson_from_json(doc, &b);
  if (rc) {
    bson_destroy(&b);
    return fail(why, whylen, "bridge refused the document: %s",
                dtx_errdetail());
  }
  size_t n = 0, dummy;
  int ok = walk_pair(doc, &b, path, leaf_mode, SIZE_MAX, &n, why, whylen);
  /* A visitor's non-zero return stops both walks at the same visit. */
  for (size_t k = 0; ok && k < n && k < 64; k++)
    ok = walk_pair(doc, &b, path, leaf_mode, k, &dummy, why, whylen);
  bson_destroy(&b);
  return ok;
}

int bdiff_get(const json_t *doc, const char *path, char *why, size_t whylen) {
  /* dtx__path_get enters objects only, so an array root reaches nothing,
   * while the bridge makes that array a document keyed "0", "1"... */
  if (json_is_array(doc))
    return 2;
  bson_t b = BSON_INITIALIZER;
  if (dtx__bson_from_json(doc, &b)) {
    bson_destroy(&b);
    return fail(why, whylen, "bridge refused the document: %s",
                dtx_errdetail());
  }
  const json_t *j = dtx__path_get(doc, path);
  dtx__bval_t v = dtx__bpath_get(bson_get_data(&b), b.len, path);
  int ok = bdiff_same_val(j, &v);
  if (!ok) {
    char *sj = show_json(j), *sb = bdiff_show(&v);
    fail(why, whylen, "get %s: json %s bson %s", path, sj, sb);
    free(sj);
    free(sb);
  }
  bson_destroy(&b);
  return ok;
}

/* ---- paths named by a filter -------------------------------------------- */

static int spec_paths(const char *name, const json_t *spec, const json_t *doc,
                      size_t *walks) {
  int bad = 0;
  const char *k;
  json_t *v;
  char why[512];
  if (!json_is_object(spec))
    return 0;
  json_object_foreach((json_t *)spec, k, v) {
    if (!strcmp(k, "$and") || !strcmp(k, "$or") || !strcmp(k, "$nor")) {
      size_t i;
      json_t *sub;
      if (json_is_array(v))
        json_array_foreach(v, i, sub) bad += spec_paths(name, sub, doc, walks);
      continue;
    }
    if (k[0] == '$' || dtx__path_check(k, DTX_EBADQUERY)) {
      dtx__err_clear();
      continue;
    }
    for (int m = DTX__LEAF_WHOLE; m <= DTX__LEAF_ELEMS; m++) {
      if (walks)
        ++*walks;
      if (!bdiff_walk(doc, k, m, why, sizeof why)) {
        fprintf(stderr, "bdiff %s: %s\n", name, why);
        bad++;
      }
    }
    if (walks)
      ++*walks;
    if (bdiff_get(doc, k, why, sizeof why) == 0) {
      fprintf(stderr, "bdiff %s: %s\n", name, why);
      bad++;
    }
  }
  return bad;
}

/* JSON -> BSON -> JSON must be the identity on v (an object or array). */
static int round_trip(const char *name, const char *what, const json_t *v) {
  bson_t b = BSON_INITIALIZER;
  int ok = dtx__bson_from_json(v, &b) == 0 && bdiff_same(v, bson_get_data(&b), b.len);
  if (!ok) {
    char *t = show_json(v);
    fprintf(stderr, "bdiff %s: the bridge's round trip changed the %s %s\n",
            name, what, t);
    free(t);
  }
  bson_destroy(&b);
  return !ok;
}

int bdiff_walk_spec(const char *name, const json_t *spec, const json_t *doc,
                    size_t *walks) {
  int bad = 0;
  if (json_is_object(spec) || json_is_array(spec))
    bad += round_trip(name, "spec", spec);
  if (!json_is_object(doc) && !json_is_array(doc))
    return bad;
  bad += round_trip(name, "document", doc);
  return bad + spec_paths(name, spec, doc, walks);
}
