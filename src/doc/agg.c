/* agg.c -- aggregation pipelines: compiling the stages and running them.
 *
 * A pipeline is an array of one-key stage documents (the manual's
 * "Aggregation Stages").  Supported: $match, $unwind, $group, $sort, $skip,
 * $limit, $project, $addFields, $set, $unset, $count, $replaceRoot,
 * $replaceWith and $lookup (equality form).  Other stages are refused with
 * DTX_EBADQUERY naming them.
 *
 * The source: a leading run of $match stages (joined with $and), then a
 * $sort, a $skip and a $limit that follow directly, are not run here but
 * handed to the store's find (dtx__pipeline_source), so the store's
 * planner uses indexes for them; the store then passes the documents found
 * to dtx__pipeline_run.
 *
 * The run is push-based: each input document flows through the stages one
 * at a time, so $match, $unwind, $project and the like hold nothing and
 * an input document is released as soon as it has been consumed.  $group
 * and $sort hold their groups or documents until the input ends; what they
 * hold is counted (dtx__value_size), and past the run's limit
 * (DTX_AGG_MAX_BYTES unless the caller gives another) the run fails with
 * DTX_ELIMIT instead of exhausting memory.  A $limit stops the flow early.
 * Documents passed between stages are shared, never changed in place: a
 * stage that changes one makes a copy of the parts it changes.
 *
 * $sort is stable (equal keys keep their input order).  $unwind follows
 * MongoDB: an array gives one document per element; a missing field, null
 * or an empty array gives none unless preserveNullAndEmptyArrays, which
 * keeps the document (without the field when it held an empty array); any
 * other value is a one-element array; includeArrayIndex adds the index
 * (null when the value was not an array).
 */
#include "doc/agg_int.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  S_MATCH,
  S_UNWIND,
  S_GROUP,
  S_SORT,
  S_SKIP,
  S_LIMIT,
  S_PROJECT,
  S_ADDFIELDS,
  S_COUNT,
  S_REPLACEROOT,
  S_LOOKUP,
};

typedef struct stage {
  int kind;
  const char *name; /* static */
  dtx__filter_t *filter;  /* MATCH */
  json_t *spec;           /* MATCH filter, SORT spec (owned copies) */
  char *path;             /* UNWIND path; COUNT field; LOOKUP "as" */
  char *index;            /* UNWIND includeArrayIndex */
  int preserve;           /* UNWIND */
  group_spec_t *group;    /* GROUP */
  int64_t n;              /* SKIP, LIMIT */
  json_t *pspec;          /* PROJECT: the plain part (owned; proj borrows) */
  dtx__proj_t *proj;      /* PROJECT: inclusions/exclusions */
  int bare;               /* PROJECT: start from {} (plus _id if kept) */
  int keep_id;            /* PROJECT with bare */
  size_t ncomp;           /* PROJECT, ADDFIELDS: computed fields */
  char **cpath;
  dtx__expr_t **cexpr;
  dtx__expr_t *root;      /* REPLACEROOT */
  char *from, *local, *foreign; /* LOOKUP */
} stage_t;

struct dtx__pipeline {
  size_t n;
  stage_t *st;
  size_t first;     /* the first stage run in memory */
  json_t *src_filter; /* owned; NULL when there is no leading $match */
  const json_t *src_sort; /* borrowed from the $sort stage */
  int64_t src_skip, src_limit;
};

struct agg_run {
  const dtx__pipeline_t *p;
  const dtx__agg_env_t *env;
  size_t used, max;
  int64_t *count;      /* per stage: SKIP, LIMIT, COUNT counters */
  group_state_t **gs;  /* per stage: GROUP state */
  json_t **buf;        /* per stage: SORT documents */
  json_t *out;
};

#define STOP 1 /* a $limit has all it needs: stop feeding */

static const char *const unsupported_stages[] = {
    "$facet",     "$bucket",    "$bucketAuto",   "$sortByCount",
    "$out",       "$merge",     "$graphLookup",  "$sample",
    "$geoNear",   "$redact",    "$unionWith",    "$setWindowFields",
    "$densify",   "$fill",      "$collStats",    "$indexStats",
    "$search",    "$documents", "$changeStream", "$planCacheStats",
    "$listSessions", "$currentOp", "$searchMeta", "$vectorSearch",
};

/* ---- compile ------------------------------------------------------------- */

static void stage_clear(stage_t *s) {
  dtx__filter_free(s->filter);
  json_decref(s->spec);
  free(s->path);
  free(s->index);
  dtx__group_spec_free(s->group);
  dtx__proj_free(s->proj);
  json_decref(s->pspec);
  for (size_t i = 0; i < s->ncomp; i++) {
    free(s->cpath[i]);
    dtx__expr_free(s->cexpr[i]);
  }
  free(s->cpath);
  free(s->cexpr);
  dtx__expr_free(s->root);
  free(s->from);
  free(s->local);
  free(s->foreign);
}

void dtx__pipeline_free(dtx__pipeline_t *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->n; i++)
    stage_clear(&p->st[i]);
  free(p->st);
  json_decref(p->src_filter);
  free(p);
}

static int nomem(void) {
  return dtx__err(DTX_ENOMEM, "out of memory compiling a pipeline");
}

/* A non-negative (skip) or positive (limit) integer; integral doubles are
 * accepted as MongoDB does. */
static int count_arg(const char *name, const json_t *v, int positive,
                     int64_t *out) {
  double d = json_number_value(v);
  if (json_is_integer(v))
    *out = json_integer_value(v);
  else if (json_is_real(v) && d == (double)(int64_t)d && d > -9e18 &&
           d < 9e18)
    *out = (int64_t)d;
  else
    return dtx__err(DTX_EBADQUERY, "%s needs an integer", name);
  if (*out < 0 || (positive && *out == 0))
    return dtx__err(DTX_EBADQUERY, "%s needs a %s integer", name,
                    positive ? "positive" : "non-negative");
  return 0;
}

/* "$a.b" as the path "a.b". */
static int field_path(const char *stage, const char *what, const json_t *v,
                      char **out) {
  const char *s = json_string_value(v);
  if (!s || s[0] != '$' || s[1] == '$')
    return dtx__err(DTX_EBADQUERY, "%s: %s must be a field path such as "
                                   "\"$field\"", stage, what);
  int rc = dtx__path_check(s + 1, DTX_EBADQUERY);
  if (rc)
    return dtx__err_wrap(rc, "%s: %s", stage, what);
  return (*out = strdup(s + 1)) ? 0 : nomem();
}

/* A plain field name for an output ("as", "includeArrayIndex", $count). */
static int out_field(const char *stage, const char *what, const json_t *v,
                     int dotted, char **out) {
  const char *s = json_string_value(v);
  if (!s || !*s || s[0] == '$' || (!dotted && strchr(s, '.')))
    return dtx__err(DTX_EBADQUERY,
                    "%s: %s must be a non-empty field name not starting "
                    "with '$'%s", stage, what, dotted ? "" : " or holding '.'");
  int rc = dtx__path_check(s, DTX_EBADQUERY);
  if (rc)
    return dtx__err_wrap(rc, "%s: %s", stage, what);
  return (*out = strdup(s)) ? 0 : nomem();
}

static int compile_unwind(stage_t *s, const json_t *arg) {
  if (json_is_string(arg))
    return field_path("$unwind", "the path", arg, &s->path);
  if (!json_is_object(arg))
    return dtx__err(DTX_EBADQUERY, "$unwind needs a field path or an "
                                   "object with a path");
  const char *k;
  json_t *v;
  int rc;
  json_object_foreach((json_t *)arg, k, v) {
    if (!strcmp(k, "path"))
      rc = field_path("$unwind", "path", v, &s->path);
    else if (!strcmp(k, "includeArrayIndex"))
      rc = out_field("$unwind", "includeArrayIndex", v, 1, &s->index);
    else if (!strcmp(k, "preserveNullAndEmptyArrays")) {
      rc = json_is_boolean(v) ? 0
                              : dtx__err(DTX_EBADQUERY,
                                         "$unwind: preserveNullAndEmptyArrays "
                                         "must be a boolean");
      s->preserve = json_is_true(v);
    } else
      rc = dtx__err(DTX_EBADQUERY, "$unwind: unknown option '%s'", k);
    if (rc)
      return rc;
  }
  if (!s->path)
    return dtx__err(DTX_EBADQUERY, "$unwind needs a path");
  return 0;
}

static int add_computed(stage_t *s, const char *path, const json_t *v,
                        const char *stage) {
  char **np = realloc(s->cpath, (s->ncomp + 1) * sizeof *np);
  if (!np)
    return nomem();
  s->cpath = np;
  dtx__expr_t **ne = realloc(s->cexpr, (s->ncomp + 1) * sizeof *ne);
  if (!ne)
    return nomem();
  s->cexpr = ne;
  char where[200]; /* names the field in errors: a long path is cut */
  if (snprintf(where, sizeof where, "%s.%s", stage, path) >= (int)sizeof where)
    memcpy(where + sizeof where - 4, "...", 4);
  dtx__expr_t *e;
  int rc = dtx__expr_compile(v, where, &e);
  if (rc)
    return rc;
  if (!(s->cpath[s->ncomp] = strdup(path))) {
    dtx__expr_free(e);
    return nomem();
  }
  s->cexpr[s->ncomp++] = e;
  return 0;
}

/* Flattens {a: {b: 1, c: "$x"}} into a.b and a.c.  For $project a number
 * or boolean is an inclusion flag; for $addFields every leaf is an
 * expression.  flags collects the plain part ({path: 0|1}). */
static int flatten(stage_t *s, const json_t *obj, const char *prefix,
                   json_t *flags, int depth) {
  const char *k;
  json_t *v;
  int rc;
  if (depth > 50)
    return dtx__err(DTX_EBADQUERY, "%s nested too deeply", s->name);
  json_object_foreach((json_t *)obj, k, v) {
    char path[1100];
    int n = snprintf(path, sizeof path, "%s%s", prefix, k);
    if (n < 0 || (size_t)n >= sizeof path)
      return dtx__err(DTX_EBADQUERY, "%s: path too long", s->name);
    if ((rc = dtx__path_check(path, DTX_EBADQUERY)))
      return dtx__err_wrap(rc, "%s", s->name);
    if (flags && (json_is_boolean(v) || json_is_number(v))) {
      int on = json_is_boolean(v) ? json_is_true(v)
                                  : json_number_value(v) != 0;
      if (json_object_set_new(flags, path, json_integer(on)))
        return nomem();
      continue;
    }
    if (json_is_object(v) && json_object_size(v) > 0 &&
        json_object_iter_key(json_object_iter(v))[0] != '$') {
      strcat(path, ".");
      if ((rc = flatten(s, v, path, flags, depth + 1)))
        return rc;
      continue;
    }
    if ((rc = add_computed(s, path, v, s->name)))
      return rc;
  }
  return 0;
}

static int compile_project(stage_t *s, const json_t *arg) {
  const char *k;
  json_t *v;
  int rc, incl = 0, excl = 0, id = -1;
  if (!json_is_object(arg) || json_object_size(arg) == 0)
    return dtx__err(DTX_EBADQUERY, "$project needs a non-empty object");
  json_t *flags = json_object();
  if (!flags)
    return nomem();
  if ((rc = flatten(s, arg, "", flags, 0))) {
    json_decref(flags);
    return rc;
  }
  json_object_foreach(flags, k, v) {
    if (!strcmp(k, "_id"))
      id = (int)json_integer_value(v);
    else if (json_integer_value(v))
      incl = 1;
    else
      excl = 1;
  }
  if (excl && (incl || s->ncomp)) {
    json_decref(flags);
    return dtx__err(DTX_EBADQUERY,
                    "$project cannot mix exclusions with inclusions or "
                    "computed fields (except _id: 0)");
  }
  if (!excl && !incl) {
    /* Only _id and computed fields ({_id: 1} alone keeps just _id): start
     * from an empty document. */
    s->bare = 1;
    s->keep_id = id != 0;
    json_decref(flags);
    return 0;
  }
  if (incl && id < 0 && json_object_set_new(flags, "_id", json_integer(1))) {
    json_decref(flags);
    return nomem();
  }
  s->pspec = flags;
  rc = dtx__proj_compile(flags, &s->proj);
  return rc ? dtx__err_wrap(rc == DTX_EINVAL ? DTX_EBADQUERY : rc,
                            "$project")
            : 0;
}

static int compile_unset(stage_t *s, const json_t *arg) {
  json_t *flags = json_object();
  size_t i;
  json_t *v;
  if (!flags)
    return nomem();
  s->pspec = flags;
  if (json_is_string(arg)) {
    if (json_object_set_new(flags, json_string_value(arg), json_integer(0)))
      return nomem();
  } else if (json_is_array(arg) && json_array_size(arg) > 0) {
    json_array_foreach(arg, i, v) {
      if (!json_is_string(v))
        return dtx__err(DTX_EBADQUERY, "$unset needs field names");
      if (json_object_set_new(flags, json_string_value(v), json_integer(0)))
        return nomem();
    }
  } else {
    return dtx__err(DTX_EBADQUERY, "$unset needs a field name or an array "
                                   "of them");
  }
  int rc = dtx__proj_compile(flags, &s->proj);
  return rc ? dtx__err_wrap(rc == DTX_EINVAL ? DTX_EBADQUERY : rc, "$unset")
            : 0;
}

static int compile_lookup(stage_t *s, const json_t *arg) {
  const char *k;
  json_t *v;
  int rc;
  if (!json_is_object(arg))
    return dtx__err(DTX_EBADQUERY, "$lookup needs an object");
  json_object_foreach((json_t *)arg, k, v) {
    if (!strcmp(k, "from")) {
      if (!json_is_string(v))
        return dtx__err(DTX_EBADQUERY, "$lookup: from must be a collection "
                                       "name");
      if (!(s->from = strdup(json_string_value(v))))
        return nomem();
      continue;
    }
    if (!strcmp(k, "localField") || !strcmp(k, "foreignField")) {
      char **dst = k[0] == 'l' ? &s->local : &s->foreign;
      if (!json_is_string(v) ||
          dtx__path_check(json_string_value(v), DTX_EBADQUERY))
        return dtx__err(DTX_EBADQUERY, "$lookup: %s must be a field path "
                                       "(without '$')", k);
      if (!(*dst = strdup(json_string_value(v))))
        return nomem();
      continue;
    }
    if (!strcmp(k, "as")) {
      if ((rc = out_field("$lookup", "as", v, 1, &s->path)))
        return rc;
      continue;
    }
    if (!strcmp(k, "let") || !strcmp(k, "pipeline"))
      return dtx__err(DTX_EBADQUERY, "$lookup: unsupported option '%s' (only "
                                     "the equality form)", k);
    return dtx__err(DTX_EBADQUERY, "$lookup: unknown option '%s'", k);
  }
  if (!s->from || !s->local || !s->foreign || !s->path)
    return dtx__err(DTX_EBADQUERY, "$lookup needs from, localField, "
                                   "foreignField and as");
  return 0;
}

static int compile_stage(stage_t *s, const json_t *doc, size_t i) {
  static const struct {
    const char *name;
    int kind;
  } names[] = {
      {"$match", S_MATCH},         {"$unwind", S_UNWIND},
      {"$group", S_GROUP},         {"$sort", S_SORT},
      {"$skip", S_SKIP},           {"$limit", S_LIMIT},
      {"$project", S_PROJECT},     {"$addFields", S_ADDFIELDS},
      {"$set", S_ADDFIELDS},       {"$unset", S_PROJECT},
      {"$count", S_COUNT},         {"$replaceRoot", S_REPLACEROOT},
      {"$replaceWith", S_REPLACEROOT}, {"$lookup", S_LOOKUP},
  };
  if (!json_is_object(doc) || json_object_size(doc) != 1)
    return dtx__err(DTX_EBADQUERY,
                    "pipeline stage %zu must be an object with exactly one "
                    "field", i);
  const char *name = json_object_iter_key(json_object_iter((json_t *)doc));
  const json_t *arg = json_object_iter_value(json_object_iter((json_t *)doc));
  size_t t;
  for (t = 0; t < sizeof names / sizeof names[0]; t++)
    if (!strcmp(name, names[t].name))
      break;
  if (t == sizeof names / sizeof names[0]) {
    for (size_t u = 0; u < sizeof unsupported_stages /
                               sizeof unsupported_stages[0]; u++)
      if (!strcmp(name, unsupported_stages[u]))
        return dtx__err(DTX_EBADQUERY, "unsupported stage %s (stage %zu)",
                        name, i);
    return dtx__err(DTX_EBADQUERY, "unknown stage %s (stage %zu)", name, i);
  }
  s->kind = names[t].kind;
  s->name = names[t].name;
  int rc = 0;
  switch (s->kind) {
  case S_MATCH:
    if (!json_is_object(arg))
      return dtx__err(DTX_EBADQUERY, "$match needs a filter object");
    if ((rc = dtx__filter_compile(arg, &s->filter)))
      return dtx__err_wrap(rc, "$match");
    s->spec = json_deep_copy(arg);
    return s->spec ? 0 : nomem();
  case S_UNWIND:
    return compile_unwind(s, arg);
  case S_GROUP:
    return dtx__group_compile(arg, &s->group);
  case S_SORT:
    if ((rc = dtx__sort_check(arg)))
      return dtx__err_wrap(DTX_EBADQUERY, "$sort");
    s->spec = json_deep_copy(arg);
    return s->spec ? 0 : nomem();
  case S_SKIP:
  case S_LIMIT:
    return count_arg(name, arg, s->kind == S_LIMIT, &s->n);
  case S_PROJECT:
    if (!strcmp(name, "$unset"))
      return compile_unset(s, arg);
    return compile_project(s, arg);
  case S_ADDFIELDS:
    if (!json_is_object(arg))
      return dtx__err(DTX_EBADQUERY, "%s needs an object", name);
    return flatten(s, arg, "", NULL, 0);
  case S_COUNT:
    return out_field("$count", "the field name", arg, 0, &s->path);
  case S_REPLACEROOT:
    if (!strcmp(name, "$replaceRoot")) {
      if (!json_is_object(arg) || json_object_size(arg) != 1 ||
          !json_object_get(arg, "newRoot"))
        return dtx__err(DTX_EBADQUERY, "$replaceRoot needs {newRoot: "
                                       "expression}");
      arg = json_object_get(arg, "newRoot");
    }
    return dtx__expr_compile(arg, name, &s->root);
  case S_LOOKUP:
    return compile_lookup(s, arg);
  }
  return 0;
}

int dtx__pipeline_compile(const json_t *stages, dtx__pipeline_t **out) {
  *out = NULL;
  if (!json_is_array(stages))
    return dtx__err(DTX_EBADQUERY, "a pipeline must be an array of stages");
  dtx__pipeline_t *p = calloc(1, sizeof *p);
  size_t n = json_array_size(stages);
  if (!p || !(p->st = calloc(n ? n : 1, sizeof *p->st))) {
    free(p);
    return nomem();
  }
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    rc = compile_stage(&p->st[i], json_array_get(stages, i), i);
    p->n = i + 1;
  }
  /* The source: leading $match stages, then $sort, $skip, $limit. */
  size_t i = 0;
  json_t *ands = rc ? NULL : json_array();
  while (!rc && i < p->n && p->st[i].kind == S_MATCH) {
    if (!ands || json_array_append(ands, p->st[i].spec))
      rc = nomem();
    i++;
  }
  if (!rc && json_array_size(ands) == 1)
    p->src_filter = json_incref(json_array_get(ands, 0));
  else if (!rc && json_array_size(ands) > 1 &&
           !(p->src_filter = json_pack("{sO}", "$and", ands)))
    rc = nomem();
  json_decref(ands);
  if (!rc && i < p->n && p->st[i].kind == S_SORT)
    p->src_sort = p->st[i++].spec;
  if (!rc && i < p->n && p->st[i].kind == S_SKIP)
    p->src_skip = p->st[i++].n;
  if (!rc && i < p->n && p->st[i].kind == S_LIMIT)
    p->src_limit = p->st[i++].n;
  p->first = i;
  if (rc) {
    dtx__pipeline_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void dtx__pipeline_source(const dtx__pipeline_t *p, const json_t **filter,
                          const json_t **sort, int64_t *skip,
                          int64_t *limit) {
  *filter = p->src_filter;
  *sort = p->src_sort;
  *skip = p->src_skip;
  *limit = p->src_limit;
}

/* ---- run ------------------------------------------------------------------ */

int dtx__agg_charge(agg_run_t *r, size_t bytes, const char *stage) {
  r->used += bytes;
  if (r->used <= r->max)
    return 0;
  return dtx__err(DTX_ELIMIT,
                  "%s: the documents and groups held by $group and $sort "
                  "passed the pipeline's memory limit of %zu bytes; narrow "
                  "the input with a leading $match or raise the limit",
                  stage, r->max);
}

static int push(agg_run_t *r, size_t i, json_t *doc);

typedef struct emit_ctx {
  agg_run_t *r;
  size_t next;
} emit_ctx_t;

/* A document a stage built (stage names it) passes on only when it is at
 * most 16 MiB, as MongoDB's: each stage's input is then bounded, and so
 * what the next one can build from it. */
static int push_built(agg_run_t *r, size_t i, json_t *doc, const char *stage) {
  char what[64];
  snprintf(what, sizeof what, "%s: a result document", stage);
  int rc = dtx__doc_size_check(doc, what);
  if (rc) {
    json_decref(doc);
    return rc;
  }
  return push(r, i, doc);
}

static int emit_next(void *ctx, json_t *doc) {
  emit_ctx_t *e = ctx;
  return push_built(e->r, e->next, doc, "$group");
}

/* The documents $unwind makes of doc. */
static int unwind(agg_run_t *r, size_t i, const stage_t *s, json_t *doc) {
  const json_t *v = dtx__agg_get_path(doc, s->path);
  int rc = 0;
  if (json_is_array(v) && json_array_size(v) > 0) {
    size_t n = json_array_size(v);
    for (size_t k = 0; k < n && rc == 0; k++) {
      json_t *d = dtx__agg_set_path(doc, s->path,
                                    json_incref(json_array_get(v, k)));
      if (d && s->index) {
        json_t *d2 = dtx__agg_set_path(d, s->index, json_integer((json_int_t)k));
        json_decref(d);
        d = d2;
      }
      rc = d ? push(r, i + 1, d)
             : dtx__err(DTX_ENOMEM, "out of memory in $unwind");
    }
    json_decref(doc);
    return rc;
  }
  int empty = json_is_array(v), nothing = !v || json_is_null(v) || empty;
  if (nothing && !s->preserve) {
    json_decref(doc);
    return 0;
  }
  json_t *d = doc;
  if (empty) {
    d = dtx__agg_set_path(doc, s->path, NULL);
    json_decref(doc);
  }
  if (d && s->index) {
    json_t *d2 = dtx__agg_set_path(d, s->index, json_null());
    json_decref(d);
    d = d2;
  }
  return d ? push(r, i + 1, d)
           : dtx__err(DTX_ENOMEM, "out of memory in $unwind");
}

/* $project and $addFields: the plain part, then computed fields in order. */
static int project(agg_run_t *r, size_t i, const stage_t *s, json_t *doc) {
  json_t *d = NULL;
  int rc = 0;
  if (s->proj) {
    rc = dtx__proj_apply(s->proj, doc, NULL, &d);
  } else if (s->bare) {
    d = json_object();
    const json_t *id = json_object_get(doc, "_id");
    if (d && s->keep_id && id && json_object_set(d, "_id", (json_t *)id))
      rc = dtx__err(DTX_ENOMEM, "out of memory in %s", s->name);
  } else {
    d = json_incref(doc);
  }
  if (!rc && !d)
    rc = dtx__err(DTX_ENOMEM, "out of memory in %s", s->name);
  for (size_t c = 0; c < s->ncomp && rc == 0; c++) {
    json_t *v, *nd;
    if ((rc = dtx__expr_eval(s->cexpr[c], doc, &v)))
      break;
    if (!v && !json_object_get(d, s->cpath[c]) && !strchr(s->cpath[c], '.'))
      continue;
    if (!(nd = dtx__agg_set_path(d, s->cpath[c], v)))
      rc = dtx__err(DTX_ENOMEM, "out of memory in %s", s->name);
    json_decref(d);
    d = nd;
  }
  json_decref(doc);
  if (rc) {
    json_decref(d);
    return rc;
  }
  return push_built(r, i + 1, d, s->name);
}

static int lookup(agg_run_t *r, size_t i, const stage_t *s, json_t *doc) {
  const json_t *lv = dtx__agg_get_path(doc, s->local);
  json_t *f, *found = NULL;
  if (!r->env || !r->env->find) {
    json_decref(doc);
    return dtx__err(DTX_EINVAL, "$lookup needs a store to read '%s' from",
                    s->from);
  }
  /* A missing local field matches null or missing foreign ones; an array
   * matches each of its elements. */
  if (json_is_array(lv))
    f = json_pack("{s{sO}}", s->foreign, "$in", lv);
  else
    f = json_pack("{s{sO}}", s->foreign, "$eq", lv ? lv : json_null());
  int rc = f ? r->env->find(r->env->ctx, s->from, f, &found)
             : dtx__err(DTX_ENOMEM, "out of memory in $lookup");
  json_decref(f);
  if (rc) {
    json_decref(doc);
    return dtx__err_wrap(rc, "$lookup from '%s'", s->from);
  }
  json_t *d = dtx__agg_set_path(doc, s->path, found);
  json_decref(doc);
  return d ? push_built(r, i + 1, d, "$lookup")
           : dtx__err(DTX_ENOMEM, "out of memory in $lookup");
}

/* Takes doc (a new reference) into stage i: 0, STOP or an error. */
static int push(agg_run_t *r, size_t i, json_t *doc) {
  const dtx__pipeline_t *p = r->p;
  if (i == p->n) {
    if (json_array_append_new(r->out, doc))
      return dtx__err(DTX_ENOMEM, "out of memory collecting results");
    return 0;
  }
  const stage_t *s = &p->st[i];
  int rc = 0;
  switch (s->kind) {
  case S_MATCH: {
    int m = dtx__filter_match(s->filter, doc);
    if ((rc = dtx__filter_error(s->filter))) {
      json_decref(doc);
      return rc;
    }
    if (m)
      return push(r, i + 1, doc);
    json_decref(doc);
    return 0;
  }
  case S_UNWIND:
    return unwind(r, i, s, doc);
  case S_GROUP:
    rc = dtx__group_add(s->group, r->gs[i], r, doc);
    json_decref(doc);
    return rc;
  case S_SORT:
    if ((rc = dtx__agg_charge(r, 16 + dtx__value_size(doc), "$sort"))) {
      json_decref(doc);
      return rc;
    }
    if (json_array_append_new(r->buf[i], doc))
      return dtx__err(DTX_ENOMEM, "out of memory in $sort");
    return 0;
  case S_SKIP:
    if (r->count[i] < s->n) {
      r->count[i]++;
      json_decref(doc);
      return 0;
    }
    return push(r, i + 1, doc);
  case S_LIMIT:
    if (r->count[i] >= s->n) {
      json_decref(doc);
      return STOP;
    }
    rc = push(r, i + 1, doc);
    if (rc == 0 && ++r->count[i] >= s->n)
      rc = STOP;
    return rc;
  case S_PROJECT:
  case S_ADDFIELDS:
    return project(r, i, s, doc);
  case S_COUNT:
    r->count[i]++;
    json_decref(doc);
    return 0;
  case S_REPLACEROOT: {
    json_t *nr;
    rc = dtx__expr_eval(s->root, doc, &nr);
    json_decref(doc);
    if (rc)
      return rc;
    if (!json_is_object(nr)) {
      json_decref(nr);
      return dtx__err(DTX_ETYPE, "%s: the new root must be an object",
                      s->name);
    }
    return push_built(r, i + 1, nr, s->name);
  }
  case S_LOOKUP:
    return lookup(r, i, s, doc);
  }
  json_decref(doc);
  return 0;
}

/* The input has ended: blocking stages pass on what they hold, in stage
 * order, each after the stages before it have flushed. */
static int flush(agg_run_t *r) {
  const dtx__pipeline_t *p = r->p;
  for (size_t i = p->first; i < p->n; i++) {
    const stage_t *s = &p->st[i];
    int rc = 0;
    if (s->kind == S_GROUP) {
      emit_ctx_t e = {r, i + 1};
      rc = dtx__group_finish(s->group, r->gs[i], emit_next, &e);
    } else if (s->kind == S_SORT) {
      json_t *b = r->buf[i];
      r->buf[i] = NULL;
      if ((rc = dtx__sort_array(b, s->spec)) == 0)
        for (size_t k = 0; k < json_array_size(b) && rc == 0; k++) {
          rc = push(r, i + 1, json_incref(json_array_get(b, k)));
          json_array_set_new(b, k, json_null()); /* release as we go */
        }
      json_decref(b);
    } else if (s->kind == S_COUNT && r->count[i] > 0) {
      json_t *d = json_pack("{sI}", s->path, (json_int_t)r->count[i]);
      rc = d ? push(r, i + 1, d) : dtx__err(DTX_ENOMEM, "out of memory");
    }
    if (rc < 0)
      return rc;
  }
  return 0;
}

int dtx__pipeline_run(const dtx__pipeline_t *p, json_t *input,
                      const dtx__agg_env_t *env, json_t **out) {
  agg_run_t r = {p, env, 0, env && env->max_bytes ? env->max_bytes
                                                  : DTX_AGG_MAX_BYTES,
                 NULL, NULL, NULL, NULL};
  int rc = 0;
  *out = NULL;
  r.count = calloc(p->n + 1, sizeof *r.count);
  r.gs = calloc(p->n + 1, sizeof *r.gs);
  r.buf = calloc(p->n + 1, sizeof *r.buf);
  r.out = json_array();
  if (!r.count || !r.gs || !r.buf || !r.out)
    rc = dtx__err(DTX_ENOMEM, "out of memory running a pipeline");
  for (size_t i = p->first; i < p->n && !rc; i++) {
    if (p->st[i].kind == S_GROUP)
      rc = dtx__group_state_new(p->st[i].group, &r.gs[i]);
    else if (p->st[i].kind == S_SORT && !(r.buf[i] = json_array()))
      rc = dtx__err(DTX_ENOMEM, "out of memory running a pipeline");
  }
  /* Each input document is released once the stages have taken it. */
  for (size_t k = 0; !rc && k < json_array_size(input); k++) {
    json_t *d = json_incref(json_array_get(input, k));
    json_array_set_new(input, k, json_null());
    rc = push(&r, p->first, d);
  }
  if (rc == STOP)
    rc = 0;
  if (!rc)
    rc = flush(&r);
  if (rc == STOP)
    rc = 0;
  for (size_t i = 0; r.gs && i < p->n; i++)
    dtx__group_state_free(p->st[i].group, r.gs[i]);
  for (size_t i = 0; r.buf && i < p->n; i++)
    json_decref(r.buf[i]);
  free(r.count);
  free(r.gs);
  free(r.buf);
  json_decref(input);
  if (rc) {
    json_decref(r.out);
    return rc;
  }
  *out = r.out;
  return 0;
}
