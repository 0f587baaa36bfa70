/* rules.c -- what every stored document must obey, checked in one place:
 * the nesting depth limit, a collection's validator, and its delete guard.
 *
 * Each backend calls dtx__doc_check_write() on the document it is about to
 * store (or delete), inside the atomic step that stores it, with the rules
 * of the catalog version that step is bound to.  So a write is judged by
 * the rules in force when it commits, whatever backend or process made it,
 * and the rules themselves are defined only here.
 *
 * A rule (validator or delete guard) is MongoDB's validator language: query
 * operators, compiled by the filter compiler (filter.c) unchanged, and/or
 * {"$jsonSchema": {...}} at the top level (schema.c).  Each top-level
 * condition is compiled on its own, which is the same as the whole filter
 * (top-level conditions are ANDed) and lets a refusal name the condition
 * that failed.
 *
 * The depth limit (DTX_MAX_DEPTH, MongoDB's 100 levels) applies to every
 * write, also with bypass_validation: it is what keeps every stored
 * document readable -- jansson, and so both backends' decoders, refuse
 * JSON nested deeper than 2048 levels -- and bounds every recursion over a
 * stored document. */
#include "doc/doc.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the depth limit ------------------------------------------------------- */

typedef struct seg {
  const char *key; /* NULL: an array index */
  size_t idx;
} seg_t;

/* 1 when the container v, at nesting level `level`, holds something
 * deeper than the limit; path[0..level-1) then leads to the first
 * container past it.  Never descends past the limit, so the recursion is
 * bounded whatever the input. */
static int too_deep(const json_t *v, size_t level, seg_t *path,
                    size_t *plen) {
  if (level > DTX_MAX_DEPTH) {
    *plen = level - 1;
    return 1;
  }
  if (json_is_object(v)) {
    const char *k;
    json_t *e;
    json_object_foreach((json_t *)v, k, e) {
      if (!json_is_object(e) && !json_is_array(e))
        continue;
      path[level - 1] = (seg_t){k, 0};
      if (too_deep(e, level + 1, path, plen))
        return 1;
    }
  } else {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (!json_is_object(e) && !json_is_array(e))
        continue;
      path[level - 1] = (seg_t){NULL, i};
      if (too_deep(e, level + 1, path, plen))
        return 1;
    }
  }
  return 0;
}

/* The dotted path, shortened in the middle when long. */
static void path_text(const seg_t *path, size_t n, char *out, size_t outlen) {
  char full[4096];
  size_t len = 0;
  for (size_t i = 0; i < n && len < sizeof full; i++) {
    int k = path[i].key
                ? snprintf(full + len, sizeof full - len, "%s%s", i ? "." : "",
                           path[i].key)
                : snprintf(full + len, sizeof full - len, "%s%zu",
                           i ? "." : "", path[i].idx);
    len += (size_t)k;
  }
  if (len >= sizeof full)
    len = sizeof full - 1;
  full[len] = '\0';
  if (len < outlen || outlen < 64)
    snprintf(out, outlen, "%s", full);
  else
    snprintf(out, outlen, "%.*s...%s", (int)(outlen / 2 - 4), full,
             full + len - (outlen / 2 - 4));
}

int dtx__depth_check(const json_t *v, int code, const char *what) {
  if (!json_is_object(v) && !json_is_array(v))
    return 0;
  seg_t path[DTX_MAX_DEPTH + 1];
  size_t n = 0;
  if (!too_deep(v, 1, path, &n))
    return 0;
  char p[128];
  path_text(path, n, p, sizeof p);
  return dtx__err(code,
                  "%s nests deeper than %d levels (the limit): level %d is "
                  "reached at %s",
                  what, DTX_MAX_DEPTH, DTX_MAX_DEPTH + 1, p);
}

/* ---- rules --------------------------------------------------------------------- */

/* One rule: an optional schema and the other top-level conditions. */
typedef struct part {
  dtx__schema_t *schema;
  size_t nconds;
  dtx__filter_t **conds;
  char **texts; /* each condition as compact JSON, for messages */
} part_t;

struct dtx__rules {
  json_t *spec; /* {"validator": V|null, "delete_guard": G|null} */
  part_t validator, guard;
};

static void part_free(part_t *p) {
  dtx__schema_free(p->schema);
  for (size_t i = 0; i < p->nconds; i++) {
    dtx__filter_free(p->conds[i]);
    free(p->texts[i]);
  }
  free(p->conds);
  free(p->texts);
  memset(p, 0, sizeof *p);
}

void dtx__rules_free(dtx__rules_t *r) {
  if (!r)
    return;
  part_free(&r->validator);
  part_free(&r->guard);
  json_decref(r->spec);
  free(r);
}

static int part_compile(const json_t *spec, const char *name, part_t *p) {
  char what[32];
  snprintf(what, sizeof what, "%s", name);
  int rc = dtx__depth_check(spec, DTX_EBADQUERY, what);
  if (rc < 0)
    return rc;
  size_t n = json_object_size(spec);
  p->conds = calloc(n + 1, sizeof *p->conds);
  p->texts = calloc(n + 1, sizeof *p->texts);
  if (!p->conds || !p->texts)
    return dtx__err(DTX_ENOMEM, "compiling the %s", name);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)spec, k, v) {
    if (strcmp(k, "$jsonSchema") == 0) {
      if ((rc = dtx__schema_compile(v, &p->schema)) < 0)
        return dtx__err_wrap(rc, "%s", name);
      continue;
    }
    json_t *one = json_object();
    if (!one || json_object_set(one, k, v) < 0) {
      json_decref(one);
      return dtx__err(DTX_ENOMEM, "compiling the %s", name);
    }
    rc = dtx__filter_compile(one, &p->conds[p->nconds]);
    p->texts[p->nconds] = rc == 0 ? dtx__json_dump(one) : NULL;
    json_decref(one);
    if (rc < 0)
      return dtx__err_wrap(rc, "%s", name);
    if (!p->texts[p->nconds]) {
      dtx__filter_free(p->conds[p->nconds]);
      return dtx__err(DTX_ENOMEM, "compiling the %s", name);
    }
    p->nconds++;
  }
  return 0;
}

/* A rule as given: NULL, null and {} mean none; anything else must be an
 * object.  *norm is the value to store (a new reference, or NULL). */
static int part_arg(const json_t *v, const char *name, json_t **norm) {
  *norm = NULL;
  if (!v || json_is_null(v) || (json_is_object(v) && !json_object_size(v)))
    return 0;
  if (!json_is_object(v))
    return dtx__err(DTX_EBADQUERY, "%s must be an object", name);
  *norm = json_incref((json_t *)v);
  return 0;
}

int dtx__rules_compile(const json_t *spec, dtx__rules_t **out) {
  *out = NULL;
  if (spec && !json_is_object(spec))
    return dtx__err(DTX_EBADQUERY, "collection rules must be an object");
  json_t *v = NULL, *g = NULL;
  int rc = part_arg(json_object_get(spec, "validator"), "validator", &v);
  if (rc == 0)
    rc = part_arg(json_object_get(spec, "delete_guard"), "delete_guard", &g);
  if (rc < 0 || (!v && !g)) {
    json_decref(v);
    json_decref(g);
    return rc;
  }
  dtx__rules_t *r = calloc(1, sizeof *r);
  if (!r || !(r->spec = json_pack("{s:O?,s:O?}", "validator", v,
                                  "delete_guard", g))) {
    free(r);
    json_decref(v);
    json_decref(g);
    return dtx__err(DTX_ENOMEM, "compiling collection rules");
  }
  if ((v && (rc = part_compile(v, "validator", &r->validator)) < 0) ||
      (g && (rc = part_compile(g, "delete_guard", &r->guard)) < 0)) {
    json_decref(v);
    json_decref(g);
    dtx__rules_free(r);
    return rc;
  }
  json_decref(v);
  json_decref(g);
  *out = r;
  return 0;
}

const json_t *dtx__rules_spec(const dtx__rules_t *r) {
  return r ? r->spec : NULL;
}

/* ---- the write check ----------------------------------------------------------- */

/* "accounts 'A'" or "users 7": the collection and the document's _id. */
static void doc_name(const char *coll, const json_t *doc, char *out,
                     size_t n) {
  const json_t *id = json_object_get(doc, "_id");
  if (json_is_string(id)) {
    snprintf(out, n, "%s '%.100s'", coll, json_string_value(id));
  } else if (json_is_integer(id)) {
    snprintf(out, n, "%s %lld", coll, (long long)json_integer_value(id));
  } else {
    char *t = id ? dtx__json_dump(id) : NULL;
    snprintf(out, n, "%s %.100s", coll, t ? t : "(no _id)");
    free(t);
  }
}

/* 1 when doc satisfies p, else 0 with the reason in why. */
static int part_match(const part_t *p, const json_t *doc, const char *name,
                      char *why, size_t n) {
  /* The schema first: its reasons are the more precise. */
  if (p->schema && !dtx__schema_match(p->schema, doc, why, n))
    return 0;
  for (size_t i = 0; i < p->nconds; i++)
    if (!dtx__filter_match(p->conds[i], doc)) {
      snprintf(why, n, "the %s condition %.200s is not met", name,
               p->texts[i]);
      return 0;
    }
  return 1;
}

int dtx__doc_check_write(const dtx__rules_t *r, const char *coll,
                         const json_t *before, const json_t *after,
                         int bypass) {
  char who[160], why[400];
  if (after) {
    if (!json_is_object(after))
      return dtx__err(DTX_EINVAL, "%s: a document must be an object", coll);
    /* The document's name is formatted only for an error: every write
     * passes here, and formatting it showed in profiles of batched
     * transfers.  The depth check is run again to name it (same result). */
    if (dtx__depth_check(after, DTX_EINVAL, coll) < 0) {
      doc_name(coll, after, who, sizeof who);
      return dtx__depth_check(after, DTX_EINVAL, who);
    }
    if (bypass || !r || !json_object_size(json_object_get(r->spec,
                                                          "validator")))
      return 0;
    if (!part_match(&r->validator, after, "validator", why, sizeof why)) {
      doc_name(coll, after, who, sizeof who);
      return dtx__err(DTX_EVALIDATION, "%s: %s", who, why);
    }
    return 0;
  }
  if (bypass || !r || !before ||
      !json_object_size(json_object_get(r->spec, "delete_guard")))
    return 0;
  doc_name(coll, before, who, sizeof who);
  if (!part_match(&r->guard, before, "delete_guard", why, sizeof why))
    return dtx__err(DTX_EVALIDATION, "%s: delete refused: %s", who, why);
  return 0;
}
