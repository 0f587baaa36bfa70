/* bupsert.c -- the base document of an upsert, built from its filter, and
 * the document an upsert inserts, on BSON (the twin of upsert.c, whose
 * comment gives MongoDB's rules; the same conditions seed the same
 * fields in the same order, _id first).
 *
 * A new _id is an ObjectId (libbson's bson_oid_init), where the json_t
 * engine writes 24 hex digits: BSON can hold MongoDB's own type.  Note
 * libbson's OID counter: the default context keeps a process-wide
 * counter and a per-process random part that libbson re-draws when it
 * sees the pid change (BSON_CONTEXT_DISABLE_PID_CACHE is off by default
 * in 1.23, which then caches the pid: a child of fork() that calls
 * bson_oid_init keeps its parent's random part and counter sequence, so a
 * parent and child could mint the same ObjectId in the same second). */
#include "doc/bupdate_int.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

typedef struct seq {
  const char *path; /* a name inside the filter's bytes (NUL-terminated) */
  dtx__bval_t v;
} seq_t;

typedef struct slist {
  seq_t *v;
  size_t n, cap;
} slist_t;

static int list_add(slist_t *l, const char *path, const dtx__bval_t *v) {
  if (l->n == l->cap && DTX__GROW(l->v, l->cap, 8))
    return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  l->v[l->n].path = path;
  l->v[l->n].v = *v;
  l->n++;
  return 0;
}

static int is_operator_doc(const dtx__bval_t *v) {
  uint32_t off = 0;
  dtx__belem_t e;
  return v->type == BSON_TYPE_DOCUMENT &&
         dtx__belem_next(v->data, v->len, &off, &e) && e.key[0] == '$';
}

static uint32_t count(const dtx__bval_t *v) {
  uint32_t off = 0, n = 0;
  dtx__belem_t e;
  while (dtx__belem_next(v->data, v->len, &off, &e))
    n++;
  return n;
}

static int collect(const dtx__bval_t *f, slist_t *l, int depth);

static int collect_logical(const char *k, const dtx__bval_t *v, slist_t *l,
                           int depth) {
  uint32_t off = 0;
  dtx__belem_t e;
  int rc;
  if (strcmp(k, "$and") && strcmp(k, "$or"))
    return 0;
  if (v->type != BSON_TYPE_ARRAY || count(v) == 0)
    return dtx__err(DTX_EBADQUERY, "%s: argument must be a non-empty array", k);
  if (!strcmp(k, "$or") && count(v) != 1)
    return 0;
  while (dtx__belem_next(v->data, v->len, &off, &e))
    if ((rc = collect(&e.v, l, depth + 1)))
      return rc;
  return 0;
}

static int collect_ops(const char *k, const dtx__bval_t *ops, slist_t *l) {
  uint32_t off = 0, aoff;
  dtx__belem_t e, x;
  int rc;
  while (dtx__belem_next(ops->data, ops->len, &off, &e)) {
    const dtx__bval_t *eq = NULL;
    if (!strcmp(e.key, "$eq")) {
      eq = &e.v;
    } else if ((!strcmp(e.key, "$in") || !strcmp(e.key, "$all")) &&
               e.v.type == BSON_TYPE_ARRAY) {
      uint32_t n = count(&e.v);
      aoff = 0;
      if (n == 1 && dtx__belem_next(e.v.data, e.v.len, &aoff, &x) &&
          !is_operator_doc(&x.v)) {
        eq = &x.v;
      } else if (!strcmp(e.key, "$all") && n > 1) {
        for (aoff = 0; dtx__belem_next(e.v.data, e.v.len, &aoff, &x);)
          if (!is_operator_doc(&x.v) && (rc = list_add(l, k, &x.v)))
            return rc;
      }
    }
    if (eq && (rc = list_add(l, k, eq)))
      return rc;
  }
  return 0;
}

static int collect(const dtx__bval_t *f, slist_t *l, int depth) {
  uint32_t off = 0;
  dtx__belem_t e;
  int rc;
  if (f->type != BSON_TYPE_DOCUMENT)
    return dtx__err(DTX_EBADQUERY, "upsert: filter must be an object");
  if (depth > 100)
    return dtx__err(DTX_EBADQUERY, "upsert: $and nested too deeply");
  while (dtx__belem_next(f->data, f->len, &off, &e)) {
    if (e.key[0] == '$') {
      if ((rc = collect_logical(e.key, &e.v, l, depth)))
        return rc;
      continue;
    }
    if ((rc = dtx__path_check(e.key, DTX_EBADQUERY)))
      return rc;
    rc = is_operator_doc(&e.v) ? collect_ops(e.key, &e.v, l)
                               : list_add(l, e.key, &e.v);
    if (rc)
      return rc;
  }
  return 0;
}

static int eq_path_cmp(const void *pa, const void *pb) {
  const unsigned char *a = (const unsigned char *)((const seq_t *)pa)->path;
  const unsigned char *b = (const unsigned char *)((const seq_t *)pb)->path;
  for (;; a++, b++) {
    unsigned ca = *a == '.' ? 1u : *a ? *a + 1u : 0u;
    unsigned cb = *b == '.' ? 1u : *b ? *b + 1u : 0u;
    if (ca != cb)
      return ca < cb ? -1 : 1;
    if (!ca)
      return 0;
  }
}

/* The length of the first segment of p. */
static size_t seg_len(const char *p) {
  const char *dot = strchr(p, '.');
  return dot ? (size_t)(dot - p) : strlen(p);
}

/* Writes the fields of the entries e[0..n) whose remaining paths are
 * rest[i] (NULL once written), in order of first appearance: a whole
 * path's value, or a subdocument gathering every entry under one name.
 * The conflict check ruled out a name being both. */
static void write_fields(dtx__bwb_t *b, const seq_t *e, const char **rest,
                         size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!rest[i])
      continue;
    const char *r = rest[i];
    size_t sl = seg_len(r);
    if (!r[sl]) {
      dtx__bw_elem(b, r, sl, &e[i].v);
      rest[i] = NULL;
      continue;
    }
    /* Every entry under r's first segment, one level down. */
    const char **sub = malloc(n * sizeof *sub);
    if (!sub) {
      b->oom = 1;
      return;
    }
    for (size_t j = 0; j < n; j++) {
      sub[j] = NULL;
      if (j >= i && rest[j] && seg_len(rest[j]) == sl &&
          !memcmp(rest[j], r, sl) && rest[j][sl] == '.') {
        sub[j] = rest[j] + sl + 1;
        rest[j] = NULL;
      }
    }
    dtx__bw_key(b, BSON_TYPE_DOCUMENT, r, sl);
    size_t at = dtx__bw_open(b);
    write_fields(b, e, sub, n);
    dtx__bw_close(b, at);
    free(sub);
  }
}

static int seed(const uint8_t *filter, uint32_t len, int id_only,
                dtx__bwb_t *b) {
  slist_t l = {0};
  seq_t *sorted = NULL;
  const char **rest = NULL;
  size_t i;
  int rc = 0;
  if (filter) {
    dtx__bval_t f = dtx__bval_of_doc(filter, len);
    if ((rc = collect(&f, &l, 0)))
      goto done;
  }
  if (id_only) {
    size_t w = 0;
    for (i = 0; i < l.n; i++)
      if (dtx__path_covers("_id", l.v[i].path))
        l.v[w++] = l.v[i];
    l.n = w;
  }
  if (l.n > 1) {
    if (!(sorted = malloc(l.n * sizeof *sorted))) {
      rc = dtx__err(DTX_ENOMEM, "out of memory building upsert document");
      goto done;
    }
    memcpy(sorted, l.v, l.n * sizeof *sorted);
    qsort(sorted, l.n, sizeof *sorted, eq_path_cmp);
    for (i = 1; i < l.n; i++)
      if (dtx__path_covers(sorted[i - 1].path, sorted[i].path)) {
        rc = dtx__err(DTX_EBADQUERY,
                      "upsert: cannot infer the document, paths '%s' and "
                      "'%s' are both matched by equality",
                      sorted[i - 1].path, sorted[i].path);
        goto done;
      }
  }
  /* _id first, as MongoDB stores it: the _id entries, then the others. */
  if (l.n && !(rest = malloc(l.n * sizeof *rest))) {
    rc = dtx__err(DTX_ENOMEM, "out of memory building upsert document");
    goto done;
  }
  size_t at = dtx__bw_open(b);
  for (int pass = 0; pass < 2; pass++) {
    for (i = 0; i < l.n; i++)
      rest[i] =
          dtx__path_covers("_id", l.v[i].path) == !pass ? l.v[i].path : NULL;
    write_fields(b, l.v, rest, l.n);
  }
  dtx__bw_close(b, at);
  if (b->oom || b->big)
    rc = dtx__err(DTX_ENOMEM, "out of memory building upsert document");
done:
  free(rest);
  free(sorted);
  free(l.v);
  return rc;
}

static int adopt(dtx__bwb_t *b, bson_t **out) {
  if (b->oom || b->big || !(*out = dtx__bwb_finish(b))) {
    dtx__bwb_drop(b);
    return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  }
  return 0;
}

int dtx__bupsert_seed(const uint8_t *filter, uint32_t len, bson_t **out) {
  dtx__bwb_t b;
  *out = NULL;
  if (dtx__bwb_init(&b, len))
    return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  int rc = seed(filter, len, 0, &b);
  if (rc) {
    dtx__bwb_drop(&b);
    return rc;
  }
  return adopt(&b, out);
}

/* dtx__id_check's rules for the _id of an upsert, on BSON: the types JSON
 * has go through the bridge to the one check; an array or a regex is no
 * _id (MongoDB's rule); BSON's other types are fine. */
static int id_check(const dtx__bval_t *id) {
  json_t *j = NULL;
  int rc;
  if (id->type == BSON_TYPE_REGEX)
    return dtx__err(DTX_EINVAL, "_id cannot be a regular expression");
  if (id->type != BSON_TYPE_UTF8 && id->type != BSON_TYPE_DOCUMENT &&
      id->type != BSON_TYPE_ARRAY)
    return 0;
  if ((rc = dtx__bval_to_json(id, &j)))
    return rc;
  rc = dtx__id_check(j);
  json_decref(j);
  return rc;
}

int dtx__bupsert_doc(const uint8_t *filter, uint32_t len,
                     const dtx__bupdate_t *u, int64_t now_ms, bson_t **out) {
  dtx__bwb_t b;
  bson_t *doc = NULL;
  dtx__belem_t id;
  int changed, rc;
  *out = NULL;
  /* Nothing matched; but if that is because a $regex failed, the "no" is
   * not true and nothing may be inserted. */
  if ((rc = dtx__bfilter_error(dtx__bupdate_filter(u))) < 0)
    return rc;
  if (dtx__bwb_init(&b, len))
    return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  rc = seed(filter, len, dtx__bupdate_is_replacement(u), &b);
  if (rc == 0 && (b.oom || b.big))
    rc = dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  if (rc == 0)
    rc = dtx__bupdate_apply(u, b.p, (uint32_t)b.n, 1, now_ms, &doc, &changed);
  dtx__bwb_drop(&b);
  if (rc)
    return rc;
  const uint8_t *d = bson_get_data(doc);
  if (!dtx__belem_find(d, doc->len, "_id", 3, &id)) {
    /* A second buffer, for upserts without an _id only: the ObjectId
     * goes first, then the document's fields as they are. */
    dtx__bwb_t nb;
    bson_oid_t oid;
    if (dtx__bwb_init(&nb, doc->len + 17)) {
      bson_destroy(doc);
      return dtx__err(DTX_ENOMEM, "building an upserted document");
    }
    bson_oid_init(&oid, NULL);
    size_t at = dtx__bw_open(&nb);
    dtx__bw_key(&nb, BSON_TYPE_OID, "_id", 3);
    dtx__bwb_put(&nb, oid.bytes, 12);
    dtx__bwb_put(&nb, d + 4, doc->len - 5);
    dtx__bw_close(&nb, at);
    bson_destroy(doc);
    if ((rc = adopt(&nb, &doc)))
      return rc;
    d = bson_get_data(doc);
    dtx__belem_find(d, doc->len, "_id", 3, &id);
  }
  if ((rc = id_check(&id.v))) {
    bson_destroy(doc);
    return rc;
  }
  *out = doc;
  return 0;
}
