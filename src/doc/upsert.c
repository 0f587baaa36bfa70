/* upsert.c -- the base document of an upsert, built from its filter.
 *
 * When an update with upsert matches nothing, MongoDB inserts a document
 * made of the filter's equality conditions with the update applied on top
 * (the manual's "Upsert Behavior" under update()).  dtx__upsert_seed()
 * builds that base from:
 *   {path: value} and {path: {$eq: value}},
 *   {path: {$in: [value]}} and {path: {$all: [value]}} (one element only),
 *   the clauses inside $and (at any depth) and inside a $or with a single
 *   branch,
 * with dotted paths expanded into nested objects ({"x.y":1} -> {x:{y:1}};
 * {"_id.x":1,"_id.y":2} gives _id {x:1,y:2}).  Every other condition ($gt,
 * a longer $in, a $or of several branches, $elemMatch ...) says nothing
 * definite about the value and is ignored.  Two equalities on the same
 * path, or on a path and its prefix ({a:1, "a.b":2}), cannot both be
 * honoured and are DTX_EBADQUERY, as in MongoDB; that is also how it
 * refuses $all with several values (each is an equality on the path).
 * When the update is a replacement document, only the filter's _id is
 * seeded and the replacement supplies the rest: MongoDB ignores the other
 * filter fields then, and does not report a conflict between them.
 *
 * The caller applies the update to the seed with dtx__update_apply(...,
 * is_insert=1, ...) so $setOnInsert takes effect, then adds an _id if the
 * result still lacks one.  _id, when present, is the seed's first field.
 */
#include "doc/doc.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

typedef struct seed_eq {
  const char *path;    /* borrowed from the filter */
  const json_t *value; /* borrowed from the filter */
} seed_eq_t;

typedef struct seed_list {
  seed_eq_t *v;
  size_t n, cap;
} seed_list_t;

static int list_add(seed_list_t *l, const char *path, const json_t *value) {
  if (l->n == l->cap && DTX__GROW(l->v, l->cap, 8))
    return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  l->v[l->n].path = path;
  l->v[l->n].value = value;
  l->n++;
  return 0;
}

/* An object value is an operator document when its first key starts with
 * '$' (the filter compiler refuses mixed ones); otherwise it is a literal
 * to compare whole. */
static int is_operator_doc(const json_t *v) {
  void *it;
  if (!json_is_object(v))
    return 0;
  it = json_object_iter((json_t *)v);
  return it && json_object_iter_key(it)[0] == '$';
}

static int collect(const json_t *filter, seed_list_t *l, int depth);

/* The clauses of a $and (all) or a $or (when it has one branch). */
static int collect_logical(const char *k, const json_t *v, seed_list_t *l,
                           int depth) {
  size_t i;
  json_t *e;
  int rc;
  if (strcmp(k, "$and") && strcmp(k, "$or"))
    return 0; /* $nor, $comment, ...: nothing definite */
  if (!json_is_array(v) || json_array_size(v) == 0)
    return dtx__err(DTX_EBADQUERY, "%s: argument must be a non-empty array",
                    k);
  if (!strcmp(k, "$or") && json_array_size(v) != 1)
    return 0;
  json_array_foreach(v, i, e) {
    if ((rc = collect(e, l, depth + 1)))
      return rc;
  }
  return 0;
}

/* The equalities of one {path: {$op: ...}} operator document. */
static int collect_ops(const char *k, const json_t *ops, seed_list_t *l) {
  const char *op;
  json_t *arg;
  int rc;
  json_object_foreach((json_t *)ops, op, arg) {
    const json_t *eq = NULL;
    if (!strcmp(op, "$eq")) {
      eq = arg;
    } else if ((!strcmp(op, "$in") || !strcmp(op, "$all")) &&
               json_is_array(arg)) {
      if (json_array_size(arg) == 1 &&
          !is_operator_doc(json_array_get(arg, 0)))
        eq = json_array_get(arg, 0);
      else if (!strcmp(op, "$all") && json_array_size(arg) > 1) {
        /* Each value is an equality on k: they collide below. */
        size_t i;
        json_t *e;
        json_array_foreach(arg, i, e) {
          if (!is_operator_doc(e) && (rc = list_add(l, k, e)))
            return rc;
        }
      }
    }
    if (eq && (rc = list_add(l, k, eq)))
      return rc;
  }
  return 0;
}

static int collect(const json_t *filter, seed_list_t *l, int depth) {
  const char *k;
  json_t *v;
  int rc;
  if (!json_is_object(filter))
    return dtx__err(DTX_EBADQUERY, "upsert: filter must be an object");
  /* The filter compiler bounds nesting too; this keeps a hostile filter
   * from exhausting the stack even when called on its own. */
  if (depth > 100)
    return dtx__err(DTX_EBADQUERY, "upsert: $and nested too deeply");
  json_object_foreach((json_t *)filter, k, v) {
    if (k[0] == '$') {
      if ((rc = collect_logical(k, v, l, depth)))
        return rc;
      continue;
    }
    if ((rc = dtx__path_check(k, DTX_EBADQUERY)))
      return rc;
    if (is_operator_doc(v))
      rc = collect_ops(k, v, l);
    else
      rc = list_add(l, k, v);
    if (rc)
      return rc;
  }
  return 0;
}


/* Compares paths segment by segment ('.' sorts below every other byte). */
static int eq_path_cmp(const void *pa, const void *pb) {
  const unsigned char *a = (const unsigned char *)((const seed_eq_t *)pa)->path;
  const unsigned char *b = (const unsigned char *)((const seed_eq_t *)pb)->path;
  for (;; a++, b++) {
    unsigned ca = *a == '.' ? 1u : *a ? *a + 1u : 0u;
    unsigned cb = *b == '.' ? 1u : *b ? *b + 1u : 0u;
    if (ca != cb)
      return ca < cb ? -1 : 1;
    if (!ca)
      return 0;
  }
}

/* Sets value (deep copied) at the dotted path, creating objects on the way.
 * The conflict check has ruled out running into an existing non-object. */
static int put_path(json_t *doc, const char *path, const json_t *value) {
  char *buf = strdup(path), *seg = buf, *dot;
  json_t *cur = doc;
  if (!buf)
    return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
  while ((dot = strchr(seg, '.'))) {
    json_t *next;
    *dot = '\0';
    next = json_object_get(cur, seg);
    if (!next) {
      next = json_object();
      if (!next || json_object_set_new(cur, seg, next))
        goto nomem;
    }
    cur = next;
    seg = dot + 1;
  }
  if (json_object_set_new(cur, seg, json_deep_copy(value)))
    goto nomem;
  free(buf);
  return 0;
nomem:
  free(buf);
  return dtx__err(DTX_ENOMEM, "out of memory building upsert document");
}

static int seed(const json_t *filter, int id_only, json_t **out) {
  seed_list_t l = {0};
  seed_eq_t *sorted = NULL;
  json_t *doc = NULL;
  size_t i;
  int rc;

  if (!out)
    return dtx__err(DTX_EINVAL, "upsert: NULL out-parameter");
  *out = NULL;
  if (filter && (rc = collect(filter, &l, 0)))
    goto done;
  if (id_only) { /* a replacement: only the _id comes from the filter */
    size_t w = 0;
    for (i = 0; i < l.n; i++)
      if (dtx__path_covers("_id", l.v[i].path))
        l.v[w++] = l.v[i];
    l.n = w;
  }
  /* In segment order a path sits right before the paths it prefixes, so
   * comparing neighbours finds every conflict.  Sort a copy: the seed keeps
   * the filter's field order. */
  if (l.n > 1) {
    sorted = malloc(l.n * sizeof *sorted);
    if (!sorted) {
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
  doc = json_object();
  if (!doc) {
    rc = dtx__err(DTX_ENOMEM, "out of memory building upsert document");
    goto done;
  }
  /* _id first, as MongoDB stores it. */
  for (i = 0; i < l.n; i++)
    if (dtx__path_covers("_id", l.v[i].path) &&
        (rc = put_path(doc, l.v[i].path, l.v[i].value)))
      goto done;
  for (i = 0; i < l.n; i++)
    if (!dtx__path_covers("_id", l.v[i].path) &&
        (rc = put_path(doc, l.v[i].path, l.v[i].value)))
      goto done;
  *out = doc;
  doc = NULL;
  rc = 0;
done:
  json_decref(doc);
  free(sorted);
  free(l.v);
  return rc;
}

int dtx__upsert_seed(const json_t *filter, json_t **out) {
  return seed(filter, 0, out);
}

int dtx__upsert_doc(const json_t *filter, const dtx__update_t *u,
                    int64_t now_ms, json_t **out) {
  json_t *base, *doc;
  int changed;
  *out = NULL;
  /* Nothing matched; but if that is because a $regex failed, the "no" is
   * not true and nothing may be inserted. */
  int rc = dtx__filter_error(dtx__update_filter(u));
  if (rc < 0)
    return rc;
  rc = seed(filter, dtx__update_is_replacement(u), &base);
  if (rc < 0)
    return rc;
  rc = dtx__update_apply(u, base, 1, now_ms, &doc, &changed);
  json_decref(base);
  if (rc < 0)
    return rc;
  if (!json_object_get(doc, "_id")) {
    char hex[25];
    dtx__id_new(hex);
    json_t *withid = json_object();
    if (!withid || json_object_set_new(withid, "_id", json_string(hex)) < 0 ||
        json_object_update(withid, doc) < 0) {
      json_decref(withid);
      json_decref(doc);
      return dtx__err(DTX_ENOMEM, "building an upserted document");
    }
    json_decref(doc);
    doc = withid;
  }
  if ((rc = dtx__id_check(json_object_get(doc, "_id"))) < 0) {
    json_decref(doc);
    return rc;
  }
  *out = doc;
  return 0;
}
