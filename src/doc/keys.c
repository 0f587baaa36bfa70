/* keys.c -- index specifications and the index keys of a document.
 *
 * A backend that maintains secondary indexes asks this file what to store:
 * dtx__index_spec_parse() validates {"path": 1|-1, ...} plus options, and
 * dtx__index_keys() lists the key tuples of one document with MongoDB's
 * multikey rules.  The query planner relies on one promise: whenever the
 * filter {path: v} (v a scalar) matches a document, that document has a key
 * whose value for path equals v; so an index lookup never misses a match.
 *
 * How keys are found (walk_keys): every path of the index is followed from
 * the document down.  A path stops at a missing field or a scalar (null),
 * at its end (the value), or where it meets an array.  All paths that meet
 * an array must meet the same one (the same prefix); they then step through
 * its elements together, each element giving keys for those paths only
 * (recursively, as elements may hold further arrays), while the other paths
 * keep their values.  That pairs {changes.account, changes.seqId} element by
 * element instead of crossing them.  Paths meeting two different arrays are
 * refused ("cannot index parallel arrays"), as MongoDB does, because their
 * cross product would be both huge and meaningless.
 */
#include "doc/doc.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 16

/* ---- specs --------------------------------------------------------------- */

void dtx__index_spec_free(dtx__index_spec_t *s) {
  size_t i;
  if (!s)
    return;
  for (i = 0; i < s->nfields; i++)
    free(s->paths[i]);
  free(s->paths);
  free(s->dirs);
  free(s->name);
  free(s);
}

static int has_numeric_segment(const char *path) {
  const char *s = path;
  for (;;) {
    size_t n = strcspn(s, ".");
    if (n > 0 && strspn(s, "0123456789") >= n)
      return 1;
    if (!s[n])
      return 0;
    s += n + 1;
  }
}

/* "a_1_b_-1", MongoDB's default index name. */
static char *derive_name(const dtx__index_spec_t *s) {
  size_t i, len = 1;
  char *name, *p;
  for (i = 0; i < s->nfields; i++)
    len += strlen(s->paths[i]) + 4;
  name = malloc(len);
  if (!name)
    return NULL;
  p = name;
  for (i = 0; i < s->nfields; i++)
    p += sprintf(p, "%s%s_%d", i ? "_" : "", s->paths[i], s->dirs[i]);
  return name;
}

int dtx__index_spec_parse(const json_t *keys, const dtx_index_opts_t *opts,
                          dtx__index_spec_t **out) {
  dtx__index_spec_t *s;
  const char *path;
  json_t *dir;
  size_t n;
  int rc;

  if (!out)
    return dtx__err(DTX_EINVAL, "index: NULL out-parameter");
  *out = NULL;
  if (!json_is_object(keys))
    return dtx__err(DTX_EBADINDEX, "index keys must be an object");
  n = json_object_size(keys);
  if (n == 0)
    return dtx__err(DTX_EBADINDEX, "index keys must name at least one field");
  if (n > MAX_FIELDS)
    return dtx__err(DTX_EBADINDEX, "index has %zu fields, at most %d allowed",
                    n, MAX_FIELDS);
  if (opts && opts->name && !opts->name[0])
    return dtx__err(DTX_EBADINDEX, "index name must not be empty");
  if (opts && opts->name && !dtx__utf8_ok(opts->name, strlen(opts->name)))
    return dtx__err(DTX_EBADINDEX, "index name is not valid UTF-8");

  s = calloc(1, sizeof *s);
  if (!s || !(s->paths = calloc(n, sizeof *s->paths)) ||
      !(s->dirs = calloc(n, sizeof *s->dirs))) {
    dtx__index_spec_free(s);
    return dtx__err(DTX_ENOMEM, "out of memory parsing index");
  }
  json_object_foreach((json_t *)keys, path, dir) {
    json_int_t d = json_integer_value(dir);
    if (!json_is_integer(dir) || (d != 1 && d != -1)) {
      rc = dtx__err(DTX_EBADINDEX, "index direction of '%s' must be 1 or -1",
                    path);
      goto fail;
    }
    if ((rc = dtx__path_check(path, DTX_EBADINDEX))) {
      rc = dtx__err_wrap(rc, "index key");
      goto fail;
    }
    if (has_numeric_segment(path)) {
      rc = dtx__err(DTX_EBADINDEX,
                    "index paths cannot contain positional segments ('%s')",
                    path);
      goto fail;
    }
    s->dirs[s->nfields] = (int)d;
    s->paths[s->nfields] = strdup(path);
    if (!s->paths[s->nfields++]) {
      rc = dtx__err(DTX_ENOMEM, "out of memory parsing index");
      goto fail;
    }
  }
  s->unique = opts && opts->unique;
  s->sparse = opts && opts->sparse;
  s->name = opts && opts->name ? strdup(opts->name) : derive_name(s);
  if (!s->name) {
    rc = dtx__err(DTX_ENOMEM, "out of memory parsing index");
    goto fail;
  }
  *out = s;
  return 0;
fail:
  dtx__index_spec_free(s);
  return rc;
}

json_t *dtx__index_spec_json(const dtx__index_spec_t *s) {
  json_t *key = json_object(), *r;
  size_t i;
  if (!key)
    return NULL;
  for (i = 0; i < s->nfields; i++)
    if (json_object_set_new(key, s->paths[i], json_integer(s->dirs[i]))) {
      json_decref(key);
      return NULL;
    }
  r = json_pack("{s:s, s:O, s:b, s:b}", "name", s->name, "key", key, "unique",
                s->unique, "sparse", s->sparse);
  json_decref(key);
  return r;
}

int dtx__index_spec_same(const dtx__index_spec_t *have,
                         const dtx__index_spec_t *want, const char *coll) {
  if (strcmp(have->name, want->name) != 0)
    return 0;
  json_t *ja = dtx__index_spec_json(have), *jb = dtx__index_spec_json(want);
  int same = ja && jb && json_equal(ja, jb);
  json_decref(ja);
  json_decref(jb);
  return same ? 1
              : dtx__err(DTX_EBADINDEX,
                         "index '%s' on '%s' already exists with a different "
                         "specification",
                         want->name, coll);
}

/* ---- key extraction ------------------------------------------------------ */

/* One index path as seen from the current base value: its remaining
 * segments, and how many segments of the full path were consumed to reach
 * the base (for error messages). */
typedef struct kpath {
  size_t field;
  char **segs;
  size_t nsegs;
  size_t consumed;
} kpath_t;

typedef struct kctx {
  const dtx__index_spec_t *spec;
  json_t *keys; /* array of tuples */
  int found;    /* some path reached a value that exists in the document */
} kctx_t;

static int emit(kctx_t *c, const json_t *const *vals) {
  json_t *t = json_array();
  size_t i;
  if (!t)
    return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
  for (i = 0; i < c->spec->nfields; i++)
    if (json_array_append_new(t, vals[i] ? json_deep_copy(vals[i])
                                         : json_null())) {
      json_decref(t);
      return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
    }
  if (json_array_append_new(c->keys, t))
    return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
  return 0;
}

/* 1 when a and b reached the same array (the same prefix from the base). */
static int same_prefix(const kpath_t *a, size_t da, const kpath_t *b,
                       size_t db) {
  size_t i;
  if (da != db)
    return 0;
  for (i = 0; i < da; i++)
    if (strcmp(a->segs[i], b->segs[i]))
      return 0;
  return 1;
}

/* Length of the first n segments of path. */
static int prefix_len(const char *path, size_t n) {
  size_t i = 0, seen = 0;
  while (path[i] && !(path[i] == '.' && ++seen == n))
    i++;
  return (int)i;
}

static int walk_keys(kctx_t *c, const json_t *base, const kpath_t *ps, size_t n,
                     const json_t *const *vals_in) {
  const json_t *vals[MAX_FIELDS];
  const json_t *arr = NULL;
  size_t depth[MAX_FIELDS];
  int meets[MAX_FIELDS];
  size_t i, e, arr_i = 0;
  int rc;

  memcpy(vals, vals_in, c->spec->nfields * sizeof *vals);
  for (i = 0; i < n; i++) {
    const json_t *cur = base;
    size_t d = 0;
    meets[i] = 0;
    for (;;) {
      if (json_is_array(cur)) {
        meets[i] = 1;
        break;
      }
      if (d == ps[i].nsegs) {
        vals[ps[i].field] = cur;
        c->found = 1;
        break;
      }
      cur = json_is_object(cur) ? json_object_get(cur, ps[i].segs[d]) : NULL;
      if (!cur) {
        vals[ps[i].field] = NULL;
        break;
      }
      d++;
    }
    depth[i] = d;
    if (!meets[i])
      continue;
    if (!arr) {
      arr = cur;
      arr_i = i;
    } else if (!same_prefix(&ps[arr_i], depth[arr_i], &ps[i], d)) {
      const char *pa = c->spec->paths[ps[arr_i].field];
      const char *pb = c->spec->paths[ps[i].field];
      return dtx__err(
          DTX_EBADINDEX, "index %s: cannot index parallel arrays [%.*s] [%.*s]",
          c->spec->name, prefix_len(pa, ps[arr_i].consumed + depth[arr_i]), pa,
          prefix_len(pb, ps[i].consumed + d), pb);
    }
  }
  if (!arr)
    return emit(c, vals);

  /* An empty array is itself the key of a path ending there; paths that
   * continue through it find nothing. */
  if (json_array_size(arr) == 0) {
    for (i = 0; i < n; i++)
      if (meets[i]) {
        int ends = depth[i] == ps[i].nsegs;
        vals[ps[i].field] = ends ? arr : NULL;
        c->found |= ends;
      }
    return emit(c, vals);
  }
  for (e = 0; e < json_array_size(arr); e++) {
    const json_t *el = json_array_get(arr, e);
    kpath_t sub[MAX_FIELDS];
    size_t ns = 0;
    for (i = 0; i < n; i++) {
      if (!meets[i])
        continue;
      if (depth[i] == ps[i].nsegs) {
        vals[ps[i].field] = el; /* nested arrays are keys, not expanded */
        c->found = 1;
      } else if (json_is_object(el)) {
        sub[ns].field = ps[i].field;
        sub[ns].segs = ps[i].segs + depth[i];
        sub[ns].nsegs = ps[i].nsegs - depth[i];
        sub[ns].consumed = ps[i].consumed + depth[i];
        ns++;
      } else {
        vals[ps[i].field] = NULL;
      }
    }
    rc = ns ? walk_keys(c, el, sub, ns, vals) : emit(c, vals);
    if (rc)
      return rc;
  }
  return 0;
}

/* dtx__index_keys_dedupe (doc.h): a tuple goes when an earlier kept one
 * compares equal under dtx__value_cmp (a total order, so "equal to an
 * earlier one" is the same set whichever way it is found).  Few tuples
 * (most documents): pairwise, nothing allocated; many: sorted. */
#define DEDUPE_SMALL 16

static int dedupe_nomem(void) {
  return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
}

typedef struct keyref {
  json_t *t;
  size_t i;
} keyref_t;

static int keyref_cmp(const void *pa, const void *pb) {
  const keyref_t *a = pa, *b = pb;
  int c = dtx__value_cmp(a->t, b->t);
  if (c)
    return c;
  return a->i < b->i ? -1 : a->i > b->i;
}

int dtx__index_keys_dedupe(json_t **keys) {
  size_t n = json_array_size(*keys);
  char keep_small[DEDUPE_SMALL], *keep = keep_small;
  keyref_t *r = NULL;
  size_t drop = 0;
  if (n < 2)
    return 0;
  if (n <= DEDUPE_SMALL) {
    for (size_t i = 0; i < n; i++) {
      json_t *ti = json_array_get(*keys, i);
      keep[i] = 1;
      for (size_t j = 0; j < i && keep[i]; j++)
        keep[i] = !keep[j] || dtx__value_cmp(json_array_get(*keys, j), ti);
      drop += !keep[i];
    }
  } else {
    r = malloc(n * sizeof *r);
    keep = malloc(n);
    if (!r || !keep) {
      free(r);
      free(keep);
      return dedupe_nomem();
    }
    for (size_t i = 0; i < n; i++)
      r[i] = (keyref_t){json_array_get(*keys, i), i};
    qsort(r, n, sizeof *r, keyref_cmp);
    for (size_t i = 0; i < n; i++) {
      keep[r[i].i] = i == 0 || dtx__value_cmp(r[i - 1].t, r[i].t) != 0;
      drop += !keep[r[i].i];
    }
  }
  int rc = 0;
  json_t *res = drop ? json_array() : NULL;
  if (drop && !res)
    rc = dedupe_nomem();
  for (size_t i = 0; res && i < n; i++)
    if (keep[i] && json_array_append(res, json_array_get(*keys, i))) {
      json_decref(res);
      res = NULL;
      rc = dedupe_nomem();
    }
  if (res) {
    json_decref(*keys);
    *keys = res;
  }
  if (keep != keep_small)
    free(keep);
  free(r);
  return rc;
}

int dtx__index_keys(const dtx__index_spec_t *s, const json_t *doc,
                    json_t **out) {
  kpath_t ps[MAX_FIELDS];
  char *bufs[MAX_FIELDS] = {0};
  char **segs[MAX_FIELDS] = {0};
  const json_t *vals[MAX_FIELDS] = {0};
  kctx_t c = {s, NULL, 0};
  size_t i;
  int rc = 0;

  if (!out)
    return dtx__err(DTX_EINVAL, "index keys: NULL out-parameter");
  *out = NULL;
  if (!s || s->nfields == 0 || s->nfields > MAX_FIELDS || !json_is_object(doc))
    return dtx__err(DTX_EINVAL, "index keys: %s",
                    json_is_object(doc) ? "bad index spec"
                                        : "document must be an object");
  for (i = 0; i < s->nfields; i++) {
    size_t j, len = strlen(s->paths[i]), nseg = 1;
    for (j = 0; j < len; j++)
      nseg += s->paths[i][j] == '.';
    bufs[i] = strdup(s->paths[i]);
    segs[i] = malloc(nseg * sizeof *segs[i]);
    if (!bufs[i] || !segs[i]) {
      rc = dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
      goto done;
    }
    ps[i].field = i;
    ps[i].segs = segs[i];
    ps[i].nsegs = 0;
    ps[i].consumed = 0;
    segs[i][ps[i].nsegs++] = bufs[i];
    for (j = 0; j < len; j++)
      if (bufs[i][j] == '.') {
        bufs[i][j] = '\0';
        segs[i][ps[i].nsegs++] = bufs[i] + j + 1;
      }
  }
  c.keys = json_array();
  if (!c.keys) {
    rc = dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
    goto done;
  }
  if ((rc = walk_keys(&c, doc, ps, s->nfields, vals)))
    goto done;
  if (s->sparse && !c.found)
    json_array_clear(c.keys);
  if ((rc = dtx__index_keys_dedupe(&c.keys)))
    goto done;
  *out = c.keys;
  c.keys = NULL;
done:
  json_decref(c.keys);
  for (i = 0; i < s->nfields; i++) {
    free(bufs[i]);
    free(segs[i]);
  }
  return rc;
}

int dtx__index_keys_multikey(const json_t *keys) {
  size_t i, f;
  json_t *t, *v;
  if (json_array_size(keys) > 1)
    return 1;
  json_array_foreach(keys, i, t) {
    json_array_foreach(t, f, v) {
      if (json_is_array(v) || json_is_object(v))
        return 1;
    }
  }
  return 0;
}

int dtx__index_fields_same(const dtx__index_spec_t *s, const json_t *old,
                           const json_t *doc) {
  for (size_t f = 0; f < s->nfields; f++) {
    const char *p = s->paths[f], *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    if (json_object_getn(old, p, n) != json_object_getn(doc, p, n))
      return 0;
  }
  return 1;
}
