/* bagg.c -- the aggregation pipeline on BSON (bagg.h): the stages of agg.c
 * ($match, $unwind, $group, $sort, $skip, $limit, $project, $addFields,
 * $set, $unset, $count, $replaceRoot, $replaceWith, $lookup's equality
 * form), the same source split and the same push-based run.
 *
 * $match is the BSON filter (bfilter.h); $sort and the plain part of
 * $project/$unset are bsort/bproject (bproj.h).  Each stage evaluates one
 * document's expressions in its own arena, reset once the document it
 * built (one new buffer) has gone down the rest of the pipeline.  $sort
 * holds copies of its documents (one malloc each) and $group its groups,
 * charged to the run's memory limit as agg.c does, by their BSON size. */
#include "doc/bagg_int.h"
#include "doc/bfilter.h"
#include "doc/bproj.h"
#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { S_MATCH, S_UNWIND, S_GROUP, S_SORT, S_SKIP, S_LIMIT, S_PROJECT,
       S_ADDFIELDS, S_COUNT, S_REPLACEROOT, S_LOOKUP };

typedef struct stage {
  int kind;
  const char *name;
  dtx__bfilter_t *filter;   /* MATCH */
  dtx__bval_t spec;         /* MATCH filter, SORT spec: views */
  const char *path;         /* UNWIND path; COUNT field; LOOKUP as */
  const char *index;        /* UNWIND includeArrayIndex */
  int preserve;
  bgroup_spec_t *group;
  int64_t n;
  dtx__bproj_t *proj;       /* PROJECT plain part */
  int bare, keep_id;
  size_t ncomp;
  const char **cpath;
  dtx__bexpr_t **cexpr;
  dtx__bexpr_t *root;
  const char *from, *local, *foreign;
} stage_t;

struct dtx__bpipeline {
  dtx__arena_t a;
  uint8_t *bytes; /* the copy of the stages */
  size_t n;
  stage_t *st;
  size_t first;
  dtx__buf_t src;  /* the source filter when it is built ({$and: ...}) */
  const uint8_t *src_filter;
  uint32_t src_flen;
  dtx__bval_t src_sort;
  int64_t src_skip, src_limit;
};

struct bagg_run {
  const dtx__bpipeline_t *p;
  const dtx__bagg_env_t *env;
  size_t used, max;
  int64_t *count;
  bgroup_state_t **gs;
  dtx__bval_t **sbuf;  /* per $sort: held documents (data malloc'd) */
  size_t *sn, *scap;
  dtx__arena_t *ar;    /* per stage: one document's values */
  bson_t *out;
  size_t nout;
};

#define STOP 1

/* As agg.c's list: stages MongoDB has that doctx refuses by name. */
static const char *const unsupported_stages[] = {
    "$facet",     "$bucket",    "$bucketAuto",   "$sortByCount",
    "$out",       "$merge",     "$graphLookup",  "$sample",
    "$geoNear",   "$redact",    "$unionWith",    "$setWindowFields",
    "$densify",   "$fill",      "$collStats",    "$indexStats",
    "$search",    "$documents", "$changeStream", "$planCacheStats",
    "$listSessions", "$currentOp", "$searchMeta", "$vectorSearch",
};

static int nomem(void) {
  return dtx__err(DTX_ENOMEM, "out of memory compiling a pipeline");
}

static const char *cstr(const dtx__bval_t *v) {
  uint32_t n;
  if (v->type != BSON_TYPE_UTF8)
    return NULL;
  const char *s = dtx__bval_str(v, &n);
  return strlen(s) == n ? s : NULL;
}

static size_t nelems(const dtx__bval_t *v) {
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t el;
  size_t n = 0;
  while (dtx__belem_next(d, len, &off, &el))
    n++;
  return n;
}

static int count_arg(const char *name, const dtx__bval_t *v, int positive,
                     int64_t *out) {
  double d;
  switch (v->type) {
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
    *out = v->type == BSON_TYPE_INT32 ? dtx__bval_int32(v)
                                      : dtx__bval_int64(v);
    break;
  case BSON_TYPE_DOUBLE:
    d = dtx__bval_double(v);
    if (d > -9e18 && d < 9e18 && d == (double)(int64_t)d) {
      *out = (int64_t)d;
      break;
    }
    /* fall through */
  default:
    return dtx__err(DTX_EBADQUERY, "%s needs an integer", name);
  }
  if (*out < 0 || (positive && *out == 0))
    return dtx__err(DTX_EBADQUERY, "%s needs a %s integer", name,
                    positive ? "positive" : "non-negative");
  return 0;
}

static int field_path(const char *stage, const char *what,
                      const dtx__bval_t *v, const char **out) {
  const char *s = cstr(v);
  if (!s || s[0] != '$' || s[1] == '$')
    return dtx__err(DTX_EBADQUERY, "%s: %s must be a field path such as "
                                   "\"$field\"", stage, what);
  int rc = dtx__path_check(s + 1, DTX_EBADQUERY);
  if (rc)
    return dtx__err_wrap(rc, "%s: %s", stage, what);
  *out = s + 1;
  return 0;
}

static int out_field(const char *stage, const char *what,
                     const dtx__bval_t *v, int dotted, const char **out) {
  const char *s = cstr(v);
  if (!s || !*s || s[0] == '$' || (!dotted && strchr(s, '.')))
    return dtx__err(DTX_EBADQUERY,
                    "%s: %s must be a non-empty field name not starting "
                    "with '$'%s", stage, what, dotted ? "" : " or holding '.'");
  int rc = dtx__path_check(s, DTX_EBADQUERY);
  if (rc)
    return dtx__err_wrap(rc, "%s: %s", stage, what);
  *out = s;
  return 0;
}

static int compile_unwind(stage_t *s, const dtx__bval_t *arg) {
  if (arg->type == BSON_TYPE_UTF8)
    return field_path("$unwind", "the path", arg, &s->path);
  if (arg->type != BSON_TYPE_DOCUMENT)
    return dtx__err(DTX_EBADQUERY, "$unwind needs a field path or an "
                                   "object with a path");
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(arg, &len);
  dtx__belem_t el;
  int rc;
  while (dtx__belem_next(d, len, &off, &el)) {
    if (!strcmp(el.key, "path"))
      rc = field_path("$unwind", "path", &el.v, &s->path);
    else if (!strcmp(el.key, "includeArrayIndex"))
      rc = out_field("$unwind", "includeArrayIndex", &el.v, 1, &s->index);
    else if (!strcmp(el.key, "preserveNullAndEmptyArrays")) {
      rc = el.v.type == BSON_TYPE_BOOL
               ? 0 : dtx__err(DTX_EBADQUERY, "$unwind: preserveNullAndEmpty"
                                             "Arrays must be a boolean");
      s->preserve = el.v.type == BSON_TYPE_BOOL && dtx__bval_bool(&el.v);
    } else
      rc = dtx__err(DTX_EBADQUERY, "$unwind: unknown option '%s'", el.key);
    if (rc)
      return rc;
  }
  if (!s->path)
    return dtx__err(DTX_EBADQUERY, "$unwind needs a path");
  return 0;
}

static int add_computed(stage_t *s, dtx__arena_t *a, const char *path,
                        const dtx__bval_t *v, size_t cap) {
  DTX_ASSERT(s->ncomp < cap, "bagg: computed fields counted");
  char where[200];
  if (snprintf(where, sizeof where, "%s.%s", s->name, path) >=
      (int)sizeof where)
    memcpy(where + sizeof where - 4, "...", 4);
  int rc = dtx__bexpr_compile(v, where, a, &s->cexpr[s->ncomp]);
  if (rc)
    return rc;
  if (!(s->cpath[s->ncomp++] = dtx__arena_strndup(a, path, strlen(path))))
    return nomem();
  return 0;
}

/* The flags' document is still open (no terminator yet): a path named
 * twice ({"a.b": 1, "a": {"b": 0}}) keeps one flag, the last, in the
 * first one's place, as agg.c's json_object_set does.  1 when found. */
static int flag_set(dtx__buf_t *flags, const char *path, int on) {
  size_t off = 4;
  while (!flags->oom && off < flags->n) {
    const char *k = flags->p + off + 1;
    size_t kl = strlen(k);
    if (!strcmp(k, path)) {
      flags->p[off + 1 + kl + 1] = (char)on;
      return 1;
    }
    off += 1 + kl + 1 + 4;
  }
  return 0;
}

/* As agg.c's flatten; flags (NULL for $addFields) collects {path: 0|1}. */
static int flatten(stage_t *s, dtx__arena_t *a, const dtx__bval_t *obj,
                   const char *prefix, dtx__buf_t *flags, size_t cap,
                   int depth) {
  if (depth > 50)
    return dtx__err(DTX_EBADQUERY, "%s nested too deeply", s->name);
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(obj, &len);
  dtx__belem_t el;
  int rc;
  while (dtx__belem_next(d, len, &off, &el)) {
    char path[1100];
    int n = snprintf(path, sizeof path, "%s%s", prefix, el.key);
    if (n < 0 || (size_t)n >= sizeof path)
      return dtx__err(DTX_EBADQUERY, "%s: path too long", s->name);
    if ((rc = dtx__path_check(path, DTX_EBADQUERY)))
      return dtx__err_wrap(rc, "%s", s->name);
    if (flags && (el.v.type == BSON_TYPE_BOOL || dtx__bval_is_number(&el.v))) {
      int on = el.v.type == BSON_TYPE_BOOL ? dtx__bval_bool(&el.v)
                                           : dtx__bagg_truthy(&el.v);
      if (!flag_set(flags, path, on)) {
        uint8_t b[4] = {(uint8_t)on, 0, 0, 0};
        dtx__bval_t iv = {BSON_TYPE_INT32, 4, b};
        dtx__bw_val(flags, path, (size_t)n, &iv);
      }
      continue;
    }
    if (el.v.type == BSON_TYPE_DOCUMENT) {
      dtx__belem_t f;
      uint32_t fl, fo = 0;
      const uint8_t *fd = dtx__bval_doc(&el.v, &fl);
      if (dtx__belem_next(fd, fl, &fo, &f) && f.key[0] != '$') {
        strcat(path, ".");
        if ((rc = flatten(s, a, &el.v, path, flags, cap, depth + 1)))
          return rc;
        continue;
      }
    }
    if ((rc = add_computed(s, a, path, &el.v, cap)))
      return rc;
  }
  return 0;
}

/* Upper bound of the computed fields flatten may find: the leaves. */
static size_t leaves(const dtx__bval_t *obj, int depth) {
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(obj, &len);
  dtx__belem_t el;
  size_t n = 0;
  while (dtx__belem_next(d, len, &off, &el))
    n += el.v.type == BSON_TYPE_DOCUMENT && depth < 60
             ? 1 + leaves(&el.v, depth + 1) : 1;
  return n;
}

static int prepare_comp(stage_t *s, dtx__arena_t *a, const dtx__bval_t *o,
                        size_t *cap) {
  *cap = leaves(o, 0) + 1;
  s->cpath = dtx__arena_alloc(a, *cap * sizeof *s->cpath);
  s->cexpr = dtx__arena_alloc(a, *cap * sizeof *s->cexpr);
  return s->cpath && s->cexpr ? 0 : nomem();
}

static int compile_flags(stage_t *s, dtx__buf_t *flags, const char *what) {
  dtx__bw_end(flags, 0);
  if (flags->oom)
    return nomem();
  int rc = dtx__bproj_compile((const uint8_t *)flags->p, (uint32_t)flags->n,
                              &s->proj);
  return rc ? dtx__err_wrap(rc == DTX_EINVAL ? DTX_EBADQUERY : rc, "%s",
                            what)
            : 0;
}

static int compile_project(stage_t *s, dtx__arena_t *a,
                           const dtx__bval_t *arg) {
  if (arg->type != BSON_TYPE_DOCUMENT || nelems(arg) == 0)
    return dtx__err(DTX_EBADQUERY, "$project needs a non-empty object");
  size_t cap;
  dtx__buf_t flags = {0};
  int rc = prepare_comp(s, a, arg, &cap);
  dtx__bw_begin(&flags);
  if (!rc)
    rc = flatten(s, a, arg, "", &flags, cap, 0);
  if (rc || flags.oom) {
    free(flags.p);
    return rc ? rc : nomem();
  }
  /* the flags' document, still open: read its elements so far */
  int incl = 0, excl = 0, id = -1;
  uint32_t off = 4;
  while (off < flags.n) {
    const char *k = flags.p + off + 1;
    size_t kl = strlen(k);
    int32_t on = (uint8_t)flags.p[off + 1 + kl + 1];
    off += (uint32_t)(1 + kl + 1 + 4);
    if (!strcmp(k, "_id"))
      id = on;
    else if (on)
      incl = 1;
    else
      excl = 1;
  }
  if (excl && (incl || s->ncomp)) {
    free(flags.p);
    return dtx__err(DTX_EBADQUERY,
                    "$project cannot mix exclusions with inclusions or "
                    "computed fields (except _id: 0)");
  }
  if (!excl && !incl) {
    s->bare = 1;
    s->keep_id = id != 0;
    free(flags.p);
    return 0;
  }
  if (incl && id < 0) {
    uint8_t b[4] = {1, 0, 0, 0};
    dtx__bval_t iv = {BSON_TYPE_INT32, 4, b};
    dtx__bw_val(&flags, "_id", 3, &iv);
  }
  rc = compile_flags(s, &flags, "$project");
  free(flags.p);
  return rc;
}

static int compile_unset(stage_t *s, const dtx__bval_t *arg) {
  dtx__buf_t flags = {0};
  uint8_t b[4] = {0, 0, 0, 0};
  dtx__bval_t zero = {BSON_TYPE_INT32, 4, b};
  const char *k;
  dtx__bw_begin(&flags);
  if ((k = cstr(arg))) {
    dtx__bw_val(&flags, k, strlen(k), &zero);
  } else if (arg->type == BSON_TYPE_ARRAY && nelems(arg) > 0) {
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(arg, &len);
    dtx__belem_t el;
    while (dtx__belem_next(d, len, &off, &el)) {
      if (!(k = cstr(&el.v))) {
        free(flags.p);
        return dtx__err(DTX_EBADQUERY, "$unset needs field names");
      }
      if (!flag_set(&flags, k, 0))
        dtx__bw_val(&flags, k, strlen(k), &zero);
    }
  } else {
    free(flags.p);
    return dtx__err(DTX_EBADQUERY, "$unset needs a field name or an array "
                                   "of them");
  }
  int rc = compile_flags(s, &flags, "$unset");
  free(flags.p);
  return rc;
}

static int compile_lookup(stage_t *s, const dtx__bval_t *arg) {
  if (arg->type != BSON_TYPE_DOCUMENT)
    return dtx__err(DTX_EBADQUERY, "$lookup needs an object");
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(arg, &len);
  dtx__belem_t el;
  int rc;
  while (dtx__belem_next(d, len, &off, &el)) {
    const char *k = el.key, *v = cstr(&el.v);
    if (!strcmp(k, "from")) {
      if (el.v.type != BSON_TYPE_UTF8)
        return dtx__err(DTX_EBADQUERY, "$lookup: from must be a collection "
                                       "name");
      s->from = v ? v : "";
      continue;
    }
    if (!strcmp(k, "localField") || !strcmp(k, "foreignField")) {
      if (!v || dtx__path_check(v, DTX_EBADQUERY))
        return dtx__err(DTX_EBADQUERY, "$lookup: %s must be a field path "
                                       "(without '$')", k);
      *(k[0] == 'l' ? &s->local : &s->foreign) = v;
      continue;
    }
    if (!strcmp(k, "as")) {
      if ((rc = out_field("$lookup", "as", &el.v, 1, &s->path)))
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

static int compile_stage(dtx__bpipeline_t *p, stage_t *s,
                         const dtx__bval_t *doc, size_t i) {
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
  if (doc->type != BSON_TYPE_DOCUMENT || nelems(doc) != 1)
    return dtx__err(DTX_EBADQUERY,
                    "pipeline stage %zu must be an object with exactly one "
                    "field", i);
  uint32_t len, off = 0;
  dtx__belem_t el;
  const uint8_t *sd0 = dtx__bval_doc(doc, &len);
  dtx__belem_next(sd0, len, &off, &el);
  const char *name = el.key;
  const dtx__bval_t *arg = &el.v;
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
  dtx__arena_t *a = &p->a;
  int rc = 0;
  size_t cap;
  switch (s->kind) {
  case S_MATCH: {
    if (arg->type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADQUERY, "$match needs a filter object");
    bson_t spec;
    uint32_t sl;
    const uint8_t *sd = dtx__bval_doc(arg, &sl);
    if (!bson_init_static(&spec, sd, sl))
      return dtx__err(DTX_EBADQUERY, "$match needs a filter object");
    if ((rc = dtx__bfilter_compile(&spec, &s->filter)))
      return dtx__err_wrap(rc, "$match");
    s->spec = *arg;
    return 0;
  }
  case S_UNWIND:
    return compile_unwind(s, arg);
  case S_GROUP:
    return dtx__bgroup_compile(arg, a, &s->group);
  case S_SORT: {
    uint32_t sl;
    if (arg->type != BSON_TYPE_DOCUMENT) {
      dtx__err(DTX_EINVAL, "sort must be a non-empty object"); /* sort.c's */
      return dtx__err_wrap(DTX_EBADQUERY, "$sort");
    }
    if (dtx__bsort_check(dtx__bval_doc(arg, &sl), sl))
      return dtx__err_wrap(DTX_EBADQUERY, "$sort");
    s->spec = *arg;
    return 0;
  }
  case S_SKIP:
  case S_LIMIT:
    return count_arg(name, arg, s->kind == S_LIMIT, &s->n);
  case S_PROJECT:
    if (!strcmp(name, "$unset"))
      return compile_unset(s, arg);
    return compile_project(s, a, arg);
  case S_ADDFIELDS:
    if (arg->type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADQUERY, "%s needs an object", name);
    if ((rc = prepare_comp(s, a, arg, &cap)))
      return rc;
    return flatten(s, a, arg, "", NULL, cap, 0);
  case S_COUNT:
    return out_field("$count", "the field name", arg, 0, &s->path);
  case S_REPLACEROOT:
    if (!strcmp(name, "$replaceRoot")) {
      uint32_t rl = 0;
      const uint8_t *rd = arg->type == BSON_TYPE_DOCUMENT
                              ? dtx__bval_doc(arg, &rl) : NULL;
      if (!rd || nelems(arg) != 1 ||
          !dtx__belem_find(rd, rl, "newRoot", 7, &el))
        return dtx__err(DTX_EBADQUERY, "$replaceRoot needs {newRoot: "
                                       "expression}");
      arg = &el.v;
    }
    return dtx__bexpr_compile(arg, name, a, &s->root);
  case S_LOOKUP:
    return compile_lookup(s, arg);
  }
  return 0;
}

void dtx__bpipeline_free(dtx__bpipeline_t *p) {
  if (!p)
    return;
  for (size_t i = 0; i < p->n; i++) {
    dtx__bfilter_free(p->st[i].filter);
    dtx__bproj_free(p->st[i].proj);
  }
  free(p->st);
  free(p->bytes);
  free(p->src.p);
  dtx__arena_free(&p->a);
  free(p);
}

/* The source filter: one $match's bytes, or {$and: [each]}. */
static int build_source(dtx__bpipeline_t *p, size_t nm) {
  if (nm == 0)
    return 0;
  if (nm == 1) {
    p->src_filter = dtx__bval_doc(&p->st[0].spec, &p->src_flen);
    return 0;
  }
  dtx__buf_t *b = &p->src;
  size_t st = dtx__bw_begin(b);
  uint8_t t = BSON_TYPE_ARRAY;
  dtx__buf_put(b, &t, 1);
  dtx__buf_put(b, "$and", 5);
  size_t ast = dtx__bw_begin(b);
  for (size_t i = 0; i < nm; i++)
    dtx__bw_idx(b, i, &p->st[i].spec);
  dtx__bw_end(b, ast);
  dtx__bw_end(b, st);
  if (b->oom)
    return nomem();
  p->src_filter = (const uint8_t *)b->p;
  p->src_flen = (uint32_t)b->n;
  return 0;
}

int dtx__bpipeline_compile(const uint8_t *stages, uint32_t len,
                           dtx__bpipeline_t **out) {
  *out = NULL;
  dtx__bpipeline_t *p = calloc(1, sizeof *p);
  if (!p)
    return nomem();
  dtx__arena_init(&p->a, NULL, 0);
  dtx__bval_t arr = dtx__bval_of_doc(stages, len);
  size_t n = nelems(&arr);
  p->bytes = malloc(len);
  p->st = calloc(n ? n : 1, sizeof *p->st);
  if (!p->bytes || !p->st) {
    dtx__bpipeline_free(p);
    return nomem();
  }
  memcpy(p->bytes, stages, len);
  uint32_t off = 0;
  dtx__belem_t el;
  int rc = 0;
  /* An array's keys are "0", "1", ...: a document that is not one is not
   * a pipeline (the bytes cannot say "array" otherwise). */
  for (size_t k = 0; dtx__belem_next(p->bytes, len, &off, &el); k++) {
    char want[24];
    size_t wl = dtx__itoa((long long)k, want);
    if (el.keylen != wl || memcmp(el.key, want, wl)) {
      dtx__bpipeline_free(p);
      return dtx__err(DTX_EBADQUERY, "a pipeline must be an array of "
                                     "stages");
    }
  }
  off = 0;
  while (!rc && dtx__belem_next(p->bytes, len, &off, &el)) {
    rc = compile_stage(p, &p->st[p->n], &el.v, p->n);
    p->n++;
  }
  size_t i = 0;
  while (!rc && i < p->n && p->st[i].kind == S_MATCH)
    i++;
  if (!rc)
    rc = build_source(p, i);
  if (!rc && i < p->n && p->st[i].kind == S_SORT)
    p->src_sort = p->st[i++].spec;
  if (!rc && i < p->n && p->st[i].kind == S_SKIP)
    p->src_skip = p->st[i++].n;
  if (!rc && i < p->n && p->st[i].kind == S_LIMIT)
    p->src_limit = p->st[i++].n;
  p->first = i;
  if (rc) {
    dtx__bpipeline_free(p);
    return rc;
  }
  *out = p;
  return 0;
}

void dtx__bpipeline_source(const dtx__bpipeline_t *p, const uint8_t **filter,
                           uint32_t *flen, const uint8_t **sort,
                           uint32_t *slen, int64_t *skip, int64_t *limit) {
  *filter = p->src_filter;
  *flen = p->src_flen;
  *sort = p->src_sort.type ? dtx__bval_doc(&p->src_sort, slen) : NULL;
  if (!*sort)
    *slen = 0;
  *skip = p->src_skip;
  *limit = p->src_limit;
}

/* ---- run ------------------------------------------------------------------ */

int dtx__bagg_charge(bagg_run_t *r, size_t bytes, const char *stage) {
  r->used += bytes;
  if (r->used <= r->max)
    return 0;
  return dtx__err(DTX_ELIMIT,
                  "%s: the documents and groups held by $group and $sort "
                  "passed the pipeline's memory limit of %zu bytes; narrow "
                  "the input with a leading $match or raise the limit",
                  stage, r->max);
}

static int push(bagg_run_t *r, size_t i, const uint8_t *doc, uint32_t len);

/* A document stage i built in b (b's buffer freed here), passed on when
 * at most 16 MiB, as agg.c's push_built. */
static int push_built(bagg_run_t *r, size_t i, dtx__buf_t *b,
                      const char *stage) {
  int rc;
  if (b->oom)
    rc = dtx__err(DTX_ENOMEM, "out of memory in %s", stage);
  else if (b->n > DTX__DOC_MAX)
    rc = dtx__err(DTX_ELIMIT, "%s: a result document would hold more "
                              "than 16 MiB (%zu bytes), the limit of a "
                              "document", stage, DTX__DOC_MAX);
  else
    rc = push(r, i, (const uint8_t *)b->p, (uint32_t)b->n);
  free(b->p);
  memset(b, 0, sizeof *b);
  return rc;
}

typedef struct emit_ctx {
  bagg_run_t *r;
  size_t next;
} emit_ctx_t;

static int emit_next(void *ctx, const uint8_t *doc, uint32_t len) {
  emit_ctx_t *e = ctx;
  if (len > DTX__DOC_MAX)
    return dtx__err(DTX_ELIMIT, "$group: a result document would hold "
                                "more than 16 MiB (%zu bytes), the limit of "
                                "a document", DTX__DOC_MAX);
  return push(e->r, e->next, doc, len);
}

static const dtx__bval_t NULLV = {BSON_TYPE_NULL, 0, NULL};

static int unwind(bagg_run_t *r, size_t i, const stage_t *s,
                  const uint8_t *doc, uint32_t len) {
  dtx__bval_t v = dtx__bagg_get_path(doc, len, s->path);
  int rc = 0;
  uint32_t al, off = 0;
  dtx__belem_t el;
  int empty = 0;
  if (v.type == BSON_TYPE_ARRAY) {
    const uint8_t *ad = dtx__bval_doc(&v, &al);
    int64_t k = 0;
    while (rc == 0 && dtx__belem_next(ad, al, &off, &el)) {
      dtx__buf_t b = {0}, b2 = {0};
      dtx__bw_set_path(&b, doc, len, s->path, &el.v);
      if (s->index && !b.oom) {
        uint8_t x[8];
        for (int j = 0; j < 8; j++)
          x[j] = (uint8_t)((uint64_t)k >> (8 * j));
        dtx__bval_t iv = {BSON_TYPE_INT64, 8, x};
        dtx__bw_set_path(&b2, (const uint8_t *)b.p, (uint32_t)b.n, s->index,
                         &iv);
        free(b.p);
        b = b2;
      }
      rc = push_built(r, i + 1, &b, "$unwind");
      k++;
    }
    if (k > 0)
      return rc;
    empty = 1;
  }
  int nothing = v.type == BSON_TYPE_EOD || v.type == BSON_TYPE_NULL || empty;
  if (nothing && !s->preserve)
    return 0;
  if (!empty && !s->index)
    return push(r, i + 1, doc, len);
  dtx__buf_t b = {0}, b2 = {0};
  if (empty)
    dtx__bw_set_path(&b, doc, len, s->path, NULL);
  else
    dtx__buf_put(&b, doc, len);
  if (s->index && !b.oom) {
    dtx__bw_set_path(&b2, (const uint8_t *)b.p, (uint32_t)b.n, s->index,
                     &NULLV);
    free(b.p);
    b = b2;
  }
  return push_built(r, i + 1, &b, "$unwind");
}

static int project(bagg_run_t *r, size_t i, const stage_t *s,
                   const uint8_t *doc, uint32_t len) {
  dtx__buf_t b = {0};
  int rc = 0;
  if (s->proj) {
    bson_t o;
    if ((rc = dtx__bproj_apply(s->proj, doc, len, &o)))
      return rc;
    dtx__buf_put(&b, bson_get_data(&o), o.len);
    bson_destroy(&o);
  } else if (s->bare) {
    dtx__belem_t el;
    size_t st = dtx__bw_begin(&b);
    if (s->keep_id && dtx__belem_find(doc, len, "_id", 3, &el))
      dtx__bw_val(&b, "_id", 3, &el.v);
    dtx__bw_end(&b, st);
  } else {
    dtx__buf_put(&b, doc, len);
  }
  dtx__bx_t x = {&r->ar[i], doc, len};
  for (size_t c = 0; c < s->ncomp && rc == 0 && !b.oom; c++) {
    dtx__bval_t v;
    if ((rc = dtx__bexpr_eval(s->cexpr[c], &x, &v)))
      break;
    if (v.type == BSON_TYPE_EOD && !strchr(s->cpath[c], '.')) {
      dtx__belem_t el;
      if (!dtx__belem_find((const uint8_t *)b.p, (uint32_t)b.n, s->cpath[c],
                           strlen(s->cpath[c]), &el))
        continue;
    }
    dtx__buf_t nb = {0};
    dtx__bw_set_path(&nb, (const uint8_t *)b.p, (uint32_t)b.n, s->cpath[c],
                     v.type ? &v : NULL);
    free(b.p);
    b = nb;
  }
  dtx__arena_free(&r->ar[i]);
  dtx__arena_init(&r->ar[i], NULL, 0);
  if (rc) {
    free(b.p);
    return rc;
  }
  return push_built(r, i + 1, &b, s->name);
}

static int lookup(bagg_run_t *r, size_t i, const stage_t *s,
                  const uint8_t *doc, uint32_t len) {
  if (!r->env || !r->env->find)
    return dtx__err(DTX_EINVAL, "$lookup needs a store to read '%s' from",
                    s->from);
  dtx__bval_t lv = dtx__bagg_get_path(doc, len, s->local);
  dtx__buf_t f = {0};
  size_t st = dtx__bw_begin(&f);
  uint8_t t = BSON_TYPE_DOCUMENT;
  dtx__buf_put(&f, &t, 1);
  dtx__buf_put(&f, s->foreign, strlen(s->foreign) + 1);
  size_t ost = dtx__bw_begin(&f);
  if (lv.type == BSON_TYPE_ARRAY)
    dtx__bw_val(&f, "$in", 3, &lv);
  else
    dtx__bw_val(&f, "$eq", 3, lv.type ? &lv : &NULLV);
  dtx__bw_end(&f, ost);
  dtx__bw_end(&f, st);
  bson_t filter, found = BSON_INITIALIZER;
  int rc = f.oom ? dtx__err(DTX_ENOMEM, "out of memory in $lookup") : 0;
  if (!rc && !bson_init_static(&filter, (const uint8_t *)f.p, f.n))
    rc = dtx__err(DTX_ENOMEM, "out of memory in $lookup");
  if (!rc && (rc = r->env->find(r->env->ctx, s->from, &filter, &found)))
    rc = dtx__err_wrap(rc, "$lookup from '%s'", s->from);
  free(f.p);
  if (rc) {
    bson_destroy(&found);
    return rc;
  }
  dtx__bval_t fv = {BSON_TYPE_ARRAY, found.len, bson_get_data(&found)};
  dtx__buf_t b = {0};
  dtx__bw_set_path(&b, doc, len, s->path, &fv);
  bson_destroy(&found);
  return push_built(r, i + 1, &b, "$lookup");
}

static int push(bagg_run_t *r, size_t i, const uint8_t *doc, uint32_t len) {
  const dtx__bpipeline_t *p = r->p;
  if (i == p->n) {
    char k[24];
    size_t kl = dtx__itoa((long long)r->nout++, k);
    k[kl] = '\0';
    bson_t sub;
    if (!bson_init_static(&sub, doc, len) ||
        !bson_append_document(r->out, k, (int)kl, &sub))
      return dtx__err(DTX_ENOMEM, "out of memory collecting results");
    return 0;
  }
  const stage_t *s = &p->st[i];
  int rc = 0;
  switch (s->kind) {
  case S_MATCH: {
    int m = dtx__bfilter_match(s->filter, doc, len);
    if ((rc = dtx__bfilter_error(s->filter)))
      return rc;
    return m ? push(r, i + 1, doc, len) : 0;
  }
  case S_UNWIND:
    return unwind(r, i, s, doc, len);
  case S_GROUP: {
    dtx__bx_t x = {&r->ar[i], doc, len};
    rc = dtx__bgroup_add(s->group, r->gs[i], r, &x);
    dtx__arena_free(&r->ar[i]);
    dtx__arena_init(&r->ar[i], NULL, 0);
    return rc;
  }
  case S_SORT: {
    if ((rc = dtx__bagg_charge(r, 16 + len, "$sort")))
      return rc;
    if (r->sn[i] == r->scap[i] && DTX__GROW(r->sbuf[i], r->scap[i], 64))
      return dtx__err(DTX_ENOMEM, "out of memory in $sort");
    uint8_t *c = malloc(len);
    if (!c)
      return dtx__err(DTX_ENOMEM, "out of memory in $sort");
    memcpy(c, doc, len);
    r->sbuf[i][r->sn[i]++] = dtx__bval_of_doc(c, len);
    return 0;
  }
  case S_SKIP:
    if (r->count[i] < s->n) {
      r->count[i]++;
      return 0;
    }
    return push(r, i + 1, doc, len);
  case S_LIMIT:
    if (r->count[i] >= s->n)
      return STOP;
    rc = push(r, i + 1, doc, len);
    if (rc == 0 && ++r->count[i] >= s->n)
      rc = STOP;
    return rc;
  case S_PROJECT:
  case S_ADDFIELDS:
    return project(r, i, s, doc, len);
  case S_COUNT:
    r->count[i]++;
    return 0;
  case S_REPLACEROOT: {
    dtx__bx_t x = {&r->ar[i], doc, len};
    dtx__bval_t nr;
    dtx__buf_t b = {0};
    if (!(rc = dtx__bexpr_eval(s->root, &x, &nr))) {
      if (nr.type != BSON_TYPE_DOCUMENT)
        rc = dtx__err(DTX_ETYPE, "%s: the new root must be an object",
                      s->name);
      else
        dtx__buf_put(&b, nr.data, nr.len);
    }
    dtx__arena_free(&r->ar[i]);
    dtx__arena_init(&r->ar[i], NULL, 0);
    return rc ? rc : push_built(r, i + 1, &b, s->name);
  }
  case S_LOOKUP:
    return lookup(r, i, s, doc, len);
  }
  return 0;
}

static int flush(bagg_run_t *r) {
  const dtx__bpipeline_t *p = r->p;
  for (size_t i = p->first; i < p->n; i++) {
    const stage_t *s = &p->st[i];
    int rc = 0;
    if (s->kind == S_GROUP) {
      emit_ctx_t e = {r, i + 1};
      rc = dtx__bgroup_finish(s->group, r->gs[i], emit_next, &e);
    } else if (s->kind == S_SORT) {
      uint32_t sl;
      const uint8_t *sd = dtx__bval_doc(&s->spec, &sl);
      dtx__bval_t *d = r->sbuf[i];
      size_t n = r->sn[i];
      if ((rc = dtx__bsort_docs(d, n, sd, sl)) == 0)
        for (size_t k = 0; k < n && rc == 0; k++) {
          rc = push(r, i + 1, d[k].data, d[k].len);
          free((void *)d[k].data); /* release as we go */
          d[k].data = NULL;
        }
    } else if (s->kind == S_COUNT && r->count[i] > 0) {
      dtx__buf_t b = {0};
      size_t st = dtx__bw_begin(&b);
      int64_t c = r->count[i];
      uint8_t x[8];
      for (int j = 0; j < 8; j++)
        x[j] = (uint8_t)((uint64_t)c >> (8 * j));
      dtx__bval_t v = {c <= INT32_MAX ? BSON_TYPE_INT32 : BSON_TYPE_INT64,
                       c <= INT32_MAX ? 4u : 8u, x};
      dtx__bw_val(&b, s->path, strlen(s->path), &v);
      dtx__bw_end(&b, st);
      rc = push_built(r, i + 1, &b, "$count");
    }
    if (rc < 0)
      return rc;
  }
  return 0;
}

int dtx__bpipeline_run(const dtx__bpipeline_t *p, const dtx__bval_t *docs,
                       size_t n, const dtx__bagg_env_t *env, bson_t *out) {
  bagg_run_t r;
  memset(&r, 0, sizeof r);
  r.p = p;
  r.env = env;
  r.max = env && env->max_bytes ? env->max_bytes : DTX_AGG_MAX_BYTES;
  r.out = out;
  size_t m = p->n + 1;
  int rc = 0;
  r.count = calloc(m, sizeof *r.count);
  r.gs = calloc(m, sizeof *r.gs);
  r.sbuf = calloc(m, sizeof *r.sbuf);
  r.sn = calloc(m, sizeof *r.sn);
  r.scap = calloc(m, sizeof *r.scap);
  r.ar = calloc(m, sizeof *r.ar);
  if (!r.count || !r.gs || !r.sbuf || !r.sn || !r.scap || !r.ar)
    rc = dtx__err(DTX_ENOMEM, "out of memory running a pipeline");
  for (size_t i = 0; !rc && i < m; i++)
    dtx__arena_init(&r.ar[i], NULL, 0);
  for (size_t i = p->first; i < p->n && !rc; i++)
    if (p->st[i].kind == S_GROUP)
      rc = dtx__bgroup_state_new(&r.gs[i]);
  for (size_t k = 0; !rc && k < n; k++)
    rc = push(&r, p->first, docs[k].data, docs[k].len);
  if (rc == STOP)
    rc = 0;
  if (!rc)
    rc = flush(&r);
  if (rc == STOP)
    rc = 0;
  for (size_t i = 0; i < p->n; i++) {
    if (r.gs && r.gs[i])
      dtx__bgroup_state_free(p->st[i].group, r.gs[i]);
    for (size_t k = 0; r.sbuf && r.sbuf[i] && k < r.sn[i]; k++)
      free((void *)r.sbuf[i][k].data);
    if (r.sbuf)
      free(r.sbuf[i]);
  }
  for (size_t i = 0; r.ar && i < m; i++)
    dtx__arena_free(&r.ar[i]);
  free(r.count);
  free(r.gs);
  free(r.sbuf);
  free(r.sn);
  free(r.scap);
  free(r.ar);
  return rc;
}
