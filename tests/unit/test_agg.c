/* test_agg.c -- the aggregation engine (src/doc/agg*.c) against MongoDB's
 * manual, table by table (each section names its page).  A row gives the
 * input documents, a pipeline and the exact output (compact JSON of the
 * result array: order, types and field order count) or the error code and
 * a fragment of its detail.  The leading $match/$sort/$skip/$limit, which
 * the store runs in its find, is emulated here by the same filter, sort
 * and slicing, so every stage is exercised. */
#include "bdiff.h"
#include "doc/bagg.h"
#include "doc/bfilter.h"
#include "doc/bproj.h"
#include "doc/doc.h"
#include "testlib.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct acase {
  const char *input;    /* JSON array of documents */
  const char *pipeline; /* JSON array of stages */
  const char *want;     /* JSON array, or NULL for an error */
  int rc;
  const char *detail;
} acase_t;

#define OK(in, p, w) {in, p, w, 0, NULL}
#define ERR(in, p, code, det) {in, p, NULL, code, det}

/* The documents a store would give the pipeline: its source filter, sort,
 * skip and limit applied to input (consumed). */
static int source(const dtx__pipeline_t *p, json_t *input, json_t **out) {
  const json_t *fs, *sort;
  int64_t skip, limit;
  dtx__filter_t *f = NULL;
  dtx__pipeline_source(p, &fs, &sort, &skip, &limit);
  int rc = dtx__filter_compile(fs, &f);
  if (rc)
    return rc;
  json_t *r = json_array();
  for (size_t i = 0; i < json_array_size(input); i++)
    if (dtx__filter_match(f, json_array_get(input, i)))
      json_array_append(r, json_array_get(input, i));
  dtx__filter_free(f);
  json_decref(input);
  if (sort && (rc = dtx__sort_array(r, sort))) {
    json_decref(r);
    return rc;
  }
  json_t *s = json_array();
  for (size_t i = (size_t)skip; i < json_array_size(r); i++) {
    if (limit && (int64_t)json_array_size(s) >= limit)
      break;
    json_array_append(s, json_array_get(r, i));
  }
  json_decref(r);
  *out = s;
  return 0;
}

/* $lookup's reads, from a fixed "other" collection. */
static json_t *other_coll;

static int fake_find(void *ctx, const char *coll, const json_t *filter,
                     json_t **out) {
  (void)ctx;
  dtx__filter_t *f = NULL;
  *out = NULL;
  if (strcmp(coll, "other"))
    return dtx__err(DTX_EINVAL, "no collection %s", coll);
  int rc = dtx__filter_compile(filter, &f);
  if (rc)
    return rc;
  json_t *r = json_array();
  for (size_t i = 0; i < json_array_size(other_coll); i++)
    if (dtx__filter_match(f, json_array_get(other_coll, i)))
      json_array_append(r, json_array_get(other_coll, i));
  dtx__filter_free(f);
  *out = r;
  return 0;
}

/* Runs pipeline over the documents in (stolen). */
static int run_in(json_t *in, const char *pipeline, size_t max,
                  json_t **out) {
  json_t *pl = JQNEW(pipeline), *src = NULL;
  dtx__pipeline_t *p = NULL;
  *out = NULL;
  int rc = dtx__pipeline_compile(pl, &p);
  json_decref(pl);
  if (rc) {
    json_decref(in);
    return rc;
  }
  if ((rc = source(p, in, &src)) == 0) {
    dtx__agg_env_t env = {max, fake_find, NULL};
    rc = dtx__pipeline_run(p, src, &env, out);
  }
  dtx__pipeline_free(p);
  return rc;
}

static int run(const char *input, const char *pipeline, size_t max,
               json_t **out) {
  return run_in(JQNEW(input), pipeline, max, out);
}

/* ---- the BSON leg (bagg.h): every row again, through the bridge --------- */

static size_t b_rows, b_skipped;

/* $lookup's reads for the BSON engine: the same "other" collection. */
static int fake_bfind(void *ctx, const char *coll, const bson_t *filter,
                      bson_t *out) {
  (void)ctx;
  if (strcmp(coll, "other"))
    return dtx__err(DTX_EINVAL, "no collection %s", coll);
  dtx__bfilter_t *f = NULL;
  bson_t all = BSON_INITIALIZER;
  int rc = dtx__bfilter_compile(filter, &f);
  if (!rc)
    rc = dtx__bson_from_json(other_coll, &all);
  uint32_t off = 0, k = 0;
  dtx__belem_t e;
  while (!rc && dtx__belem_next(bson_get_data(&all), all.len, &off, &e)) {
    uint32_t dl;
    const uint8_t *d = dtx__bval_doc(&e.v, &dl);
    if (dtx__bfilter_match(f, d, dl)) {
      char key[16];
      bson_t sub;
      int kl = snprintf(key, sizeof key, "%u", k++);
      bson_init_static(&sub, d, dl);
      bson_append_document(out, key, kl, &sub);
    }
  }
  dtx__bfilter_free(f);
  bson_destroy(&all);
  return rc;
}

/* The row's single-quoted JSON text over the bridge. */
static int jq_bson(const char *text, bson_t *out) {
  json_t *j = JQNEW(text);
  bson_init(out);
  int rc = dtx__bson_from_json(j, out);
  json_decref(j);
  return rc;
}

/* Runs the row through the BSON engine: the source (filter, sort, skip,
 * limit) on BSON too, the rest by dtx__bpipeline_run.  *out: the results
 * (as an array document) when 0. */
static int brun(const char *input, const char *pipeline, bson_t *out) {
  bson_t in, pl;
  dtx__bpipeline_t *p = NULL;
  dtx__bfilter_t *f = NULL;
  dtx__bval_t *docs = NULL;
  size_t n = 0;
  bson_init(out);
  int rc = jq_bson(input, &in);
  if (rc || (rc = jq_bson(pipeline, &pl))) {
    fprintf(stderr, "brun: the bridge refused the row: %s\n",
            dtx_errdetail());
    abort();
  }
  rc = dtx__bpipeline_compile(bson_get_data(&pl), pl.len, &p);
  if (!rc) {
    const uint8_t *fs, *ss;
    uint32_t fl, sl;
    int64_t skip, limit;
    bson_t fb;
    dtx__bpipeline_source(p, &fs, &fl, &ss, &sl, &skip, &limit);
    if (fs)
      bson_init_static(&fb, fs, fl);
    rc = dtx__bfilter_compile(fs ? &fb : NULL, &f);
    if (!(docs = calloc(in.len, sizeof *docs)))
      abort();
    uint32_t off = 0;
    dtx__belem_t e;
    while (!rc && dtx__belem_next(bson_get_data(&in), in.len, &off, &e)) {
      uint32_t dl;
      const uint8_t *d = dtx__bval_doc(&e.v, &dl);
      if (dtx__bfilter_match(f, d, dl))
        docs[n++] = e.v;
    }
    if (!rc && ss)
      rc = dtx__bsort_docs(docs, n, ss, sl);
    size_t from = (size_t)skip < n ? (size_t)skip : n;
    size_t cnt = n - from;
    if (limit && (size_t)limit < cnt)
      cnt = (size_t)limit;
    dtx__bagg_env_t env = {0, fake_bfind, NULL};
    if (!rc)
      rc = dtx__bpipeline_run(p, docs + from, cnt, &env, out);
  }
  dtx__bfilter_free(f);
  dtx__bpipeline_free(p);
  free(docs);
  bson_destroy(&in);
  bson_destroy(&pl);
  return rc;
}

/* The BSON leg of row i: the same result, or the same code and detail.
 * jdet is the json_t engine's detail (its error), jout its result. */
static void bleg(const char *name, size_t i, const acase_t *t, int jrc,
                 const char *jdet, const json_t *jout) {
  /* MongoDB's aggregation turns an int64 overflow into a double, which
   * the json_t engine (one integer type) refuses instead. */
  if (jrc == DTX_EOVERFLOW && strstr(jdet, "overflows int64")) {
    b_skipped++;
    return;
  }
  bson_t out;
  int rc = brun(t->input, t->pipeline, &out);
  b_rows++;
  if (jrc == 0) {
    int same = rc == 0 && bdiff_same(jout, bson_get_data(&out), out.len);
    json_t *got = NULL;
    if (!same && rc == 0)
      dtx__bson_to_json(bson_get_data(&out), out.len, 1, &got);
    char *gs = got ? JDUMP(got) : NULL, *ws = JDUMP(jout);
    CHECKF(same, "bson %s[%zu] %s: %s (%s)\n   got  %s\n   want %s", name,
           i, t->pipeline, dtx_errname(rc), rc ? dtx_errdetail() : "",
           gs ? gs : "(error)", ws);
    free(gs);
    free(ws);
    json_decref(got);
  } else {
    CHECKF(rc == jrc && !strcmp(dtx_errdetail(), jdet),
           "bson %s[%zu] %s: %s (%s), want %s (%s)", name, i, t->pipeline,
           dtx_errname(rc), dtx_errdetail(), dtx_errname(jrc), jdet);
  }
  bson_destroy(&out);
}

static void run_table(const char *name, const acase_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    json_t *out = NULL;
    int rc = run(t[i].input, t[i].pipeline, 0, &out);
    char *jdet = strdup(rc ? dtx_errdetail() : "");
    REQUIRE(jdet != NULL);
    if (t[i].want) {
      json_t *w = JQNEW(t[i].want);
      char *ws = JDUMP(w), *got = out ? JDUMP(out) : NULL;
      CHECKF(rc == 0 && got && !strcmp(got, ws),
             "%s[%zu] %s: %s (%s)\n   got  %s\n   want %s", name, i,
             t[i].pipeline, dtx_errname(rc), dtx_errdetail(),
             got ? got : "(null)", ws);
      free(ws);
      free(got);
      json_decref(w);
    } else {
      CHECKF(rc == t[i].rc && !out, "%s[%zu] %s: %s (%s), want %s", name, i,
             t[i].pipeline, dtx_errname(rc), dtx_errdetail(),
             dtx_errname(t[i].rc));
      if (t[i].detail)
        CHECKF(strstr(dtx_errdetail(), t[i].detail) != NULL,
               "%s[%zu]: detail '%s' lacks '%s'", name, i, dtx_errdetail(),
               t[i].detail);
    }
    bleg(name, i, &t[i], rc, jdet, out);
    free(jdet);
    json_decref(out);
  }
}

#define RUN(t) run_table(#t, t, sizeof t / sizeof t[0])

static const char *const INV =
    "[{'_id':1,'item':'ABC','sizes':['S','M','L']},"
    "{'_id':2,'item':'EFG','sizes':[]},"
    "{'_id':3,'item':'IJK','sizes':'M'},"
    "{'_id':4,'item':'LMN'},"
    "{'_id':5,'item':'XYZ','sizes':null}]";

/* ---- $unwind --------------------------------------------------------------
 * Manual: "$unwind (aggregation)": one document per element; null, missing
 * and [] give none unless preserveNullAndEmptyArrays; a non-array value is
 * a one-element array; includeArrayIndex is null for non-arrays. */
static const acase_t unwind_cases[] = {
    OK("[{'_id':1,'a':[1,2]}]", "[{'$unwind':'$a'}]",
       "[{'_id':1,'a':1},{'_id':1,'a':2}]"),
    OK("[{'_id':1,'x':{'a':[{'v':1},{'v':2}]}}]", "[{'$unwind':'$x.a'}]",
       "[{'_id':1,'x':{'a':{'v':1}}},{'_id':1,'x':{'a':{'v':2}}}]"),
    OK(INV, "[{'$unwind':'$sizes'},{'$project':{'sizes':1}}]",
       "[{'_id':1,'sizes':'S'},{'_id':1,'sizes':'M'},{'_id':1,'sizes':'L'},"
       "{'_id':3,'sizes':'M'}]"),
    OK(INV,
       "[{'$unwind':{'path':'$sizes','preserveNullAndEmptyArrays':true}},"
       "{'$project':{'item':0}}]",
       "[{'_id':1,'sizes':'S'},{'_id':1,'sizes':'M'},{'_id':1,'sizes':'L'},"
       "{'_id':2},{'_id':3,'sizes':'M'},{'_id':4},{'_id':5,'sizes':null}]"),
    OK(INV,
       "[{'$unwind':{'path':'$sizes','includeArrayIndex':'i'}},"
       "{'$project':{'sizes':1,'i':1}}]",
       "[{'_id':1,'sizes':'S','i':0},{'_id':1,'sizes':'M','i':1},"
       "{'_id':1,'sizes':'L','i':2},{'_id':3,'sizes':'M','i':null}]"),
    OK("[{'_id':1}]",
       "[{'$unwind':{'path':'$a','preserveNullAndEmptyArrays':true,"
       "'includeArrayIndex':'i'}}]",
       "[{'_id':1,'i':null}]"),
    OK("[{'_id':1,'a':[[1,2]]}]", "[{'$unwind':'$a'}]",
       "[{'_id':1,'a':[1,2]}]"),
    ERR("[]", "[{'$unwind':'a'}]", DTX_EBADQUERY, "field path"),
    ERR("[]", "[{'$unwind':{'path':'$a','bogus':1}}]", DTX_EBADQUERY,
        "bogus"),
    ERR("[]", "[{'$unwind':{'includeArrayIndex':'i'}}]", DTX_EBADQUERY,
        "path"),
    ERR("[]", "[{'$unwind':{'path':'$a','includeArrayIndex':'$i'}}]",
        DTX_EBADQUERY, "includeArrayIndex"),
};

/* ---- $group and accumulators ---------------------------------------------
 * Manual: "$group (aggregation)" and the accumulator pages: null and
 * missing keys are one group with _id null; 1 and 1.0 one group; $sum
 * ignores non-numbers and gives a double when a double takes part (doctx:
 * exact int64, overflow an error); $avg of none is null; $min/$max skip
 * null and missing; $first/$last take null for missing; $push and
 * $addToSet leave missing values out. */
static const acase_t group_cases[] = {
    OK("[{'k':'a','v':1},{'k':'b','v':2},{'k':'a','v':3}]",
       "[{'$group':{'_id':'$k','s':{'$sum':'$v'}}}]",
       "[{'_id':'a','s':4},{'_id':'b','s':2}]"),
    OK("[{'k':null,'v':1},{'v':2},{'k':1,'v':4},{'k':1.0,'v':8}]",
       "[{'$group':{'_id':'$k','s':{'$sum':'$v'}}}]",
       "[{'_id':null,'s':3},{'_id':1,'s':12}]"),
    OK("[{'v':1},{'v':2.5},{'v':'x'},{'v':null},{}]",
       "[{'$group':{'_id':null,'s':{'$sum':'$v'},'n':{'$sum':1},"
       "'c':{'$count':{}}}}]",
       "[{'_id':null,'s':3.5,'n':5,'c':5}]"),
    OK("[{'v':1},{'v':2}]", "[{'$group':{'_id':null,'s':{'$sum':'$v'}}}]",
       "[{'_id':null,'s':3}]"),
    /* a missing key first: the group's _id is null */
    OK("[{'v':1},{'k':null,'v':2}]",
       "[{'$group':{'_id':'$k','s':{'$sum':'$v'}}}]", "[{'_id':null,'s':3}]"),
    OK("[{'v':9223372036854775807},{'v':1},{'v':-2}]",
       "[{'$group':{'_id':null,'s':{'$sum':'$v'}}}]",
       "[{'_id':null,'s':9223372036854775806}]"),
    ERR("[{'v':9223372036854775807},{'v':1}]",
        "[{'$group':{'_id':null,'s':{'$sum':'$v'}}}]", DTX_EOVERFLOW,
        "overflows int64"),
    OK("[{'v':1},{'v':2},{'v':'x'}]",
       "[{'$group':{'_id':null,'a':{'$avg':'$v'},'b':{'$avg':'$w'}}}]",
       "[{'_id':null,'a':1.5,'b':null}]"),
    OK("[{'v':3},{'v':null},{},{'v':1},{'v':'s'}]",
       "[{'$group':{'_id':null,'lo':{'$min':'$v'},'hi':{'$max':'$v'},"
       "'no':{'$min':'$w'}}}]",
       "[{'_id':null,'lo':1,'hi':'s','no':null}]"),
    OK("[{'v':3},{},{'v':1}]",
       "[{'$group':{'_id':null,'f':{'$first':'$v'},'l':{'$last':'$v'},"
       "'m':{'$last':'$w'}}}]",
       "[{'_id':null,'f':3,'l':1,'m':null}]"),
    OK("[{'v':3},{},{'v':1},{'v':3},{'v':3.0}]",
       "[{'$group':{'_id':null,'p':{'$push':'$v'},'s':{'$addToSet':'$v'}}}]",
       "[{'_id':null,'p':[3,1,3,3.0],'s':[3,1]}]"),
    OK("[{'a':1,'b':2,'v':1},{'b':2,'a':1,'v':1},{'a':1,'b':2,'v':1}]",
       "[{'$group':{'_id':{'a':'$a','b':'$b'},'n':{'$sum':1}}}]",
       "[{'_id':{'a':1,'b':2},'n':3}]"),
    OK("[{'a':[1,2]},{'a':[1,2]},{'a':[2,1]}]",
       "[{'$group':{'_id':'$a','n':{'$sum':1}}}]",
       "[{'_id':[1,2],'n':2},{'_id':[2,1],'n':1}]"),
    OK("[]", "[{'$group':{'_id':null,'n':{'$sum':1}}}]", "[]"),
    OK("[{'v':2,'w':3}]",
       "[{'$group':{'_id':null,'s':{'$sum':{'$multiply':['$v','$w']}}}}]",
       "[{'_id':null,'s':6}]"),
    ERR("[]", "[{'$group':{'n':{'$sum':1}}}]", DTX_EBADQUERY, "_id"),
    ERR("[]", "[{'$group':{'_id':null,'n':{'$median':1}}}]", DTX_EBADQUERY,
        "$median"),
    ERR("[]", "[{'$group':{'_id':null,'n':5}}]", DTX_EBADQUERY,
        "accumulator"),
    ERR("[]", "[{'$group':{'_id':null,'a.b':{'$sum':1}}}]", DTX_EBADQUERY,
        "a.b"),
    ERR("[]", "[{'$group':{'_id':null,'c':{'$count':1}}}]", DTX_EBADQUERY,
        "$count"),
};

/* ---- $sort, $skip, $limit, $count ----------------------------------------------
 * Manual: "$sort (aggregation)" (documents with equal keys: doctx keeps
 * the input order, a stable sort), "$skip", "$limit" (a positive integer),
 * "$count" (nothing when there are no documents). */
static const acase_t order_cases[] = {
    OK("[{'_id':1,'k':2},{'_id':2,'k':1},{'_id':3,'k':2},{'_id':4,'k':1},"
       "{'_id':5,'k':2}]",
       "[{'$project':{'k':1}},{'$sort':{'k':1}}]",
       "[{'_id':2,'k':1},{'_id':4,'k':1},{'_id':1,'k':2},{'_id':3,'k':2},"
       "{'_id':5,'k':2}]"),
    OK("[{'_id':1,'k':2},{'_id':2,'k':1},{'_id':3,'k':2}]",
       "[{'$sort':{'k':-1}}]",
       "[{'_id':1,'k':2},{'_id':3,'k':2},{'_id':2,'k':1}]"),
    OK("[{'_id':1},{'_id':2},{'_id':3},{'_id':4}]",
       "[{'$project':{'_id':1}},{'$skip':1},{'$limit':2}]",
       "[{'_id':2},{'_id':3}]"),
    OK("[{'_id':1},{'_id':2},{'_id':3}]",
       "[{'$project':{'_id':1}},{'$limit':5},{'$skip':2}]", "[{'_id':3}]"),
    OK("[{'_id':1},{'_id':2},{'_id':3}]",
       "[{'$project':{'_id':1}},{'$sort':{'_id':-1}},{'$limit':1}]",
       "[{'_id':3}]"),
    OK("[{'a':1},{'a':2}]", "[{'$count':'n'}]", "[{'n':2}]"),
    OK("[{'a':1},{'a':2}]", "[{'$match':{'a':5}},{'$count':'n'}]", "[]"),
    OK("[{'a':1},{'a':2},{'a':3}]",
       "[{'$project':{'a':1}},{'$match':{'a':{'$gte':2}}},{'$count':'n'}]",
       "[{'n':2}]"),
    ERR("[]", "[{'$limit':0}]", DTX_EBADQUERY, "positive"),
    ERR("[]", "[{'$skip':-1}]", DTX_EBADQUERY, "non-negative"),
    ERR("[]", "[{'$limit':'5'}]", DTX_EBADQUERY, "integer"),
    ERR("[]", "[{'$count':'$n'}]", DTX_EBADQUERY, "$count"),
    ERR("[]", "[{'$count':'a.b'}]", DTX_EBADQUERY, "$count"),
    ERR("[]", "[{'$sort':{'a':0}}]", DTX_EBADQUERY, "$sort"),
};

/* ---- $project, $addFields/$set, $unset, $replaceRoot ---------------------------
 * Manual: "$project (aggregation)" (inclusions in document order, then
 * computed fields; _id unless excluded; exclusions cannot mix with
 * inclusions), "$addFields" (dotted or nested names add into
 * subdocuments), "$unset", "$replaceRoot" (the new root must be a
 * document). */
static const acase_t shape_cases[] = {
    OK("[{'_id':1,'a':1,'b':2,'c':3}]", "[{'$project':{'c':1,'a':1}}]",
       "[{'_id':1,'a':1,'c':3}]"),
    OK("[{'_id':1,'a':1,'b':2}]",
       "[{'$project':{'_id':0,'s':{'$add':['$a','$b']},'a':1}}]",
       "[{'a':1,'s':3}]"),
    OK("[{'_id':1,'a':1,'b':2}]", "[{'$project':{'b':0}}]",
       "[{'_id':1,'a':1}]"),
    OK("[{'_id':1,'a':{'x':1,'y':2}}]", "[{'$project':{'a':{'x':1}}}]",
       "[{'_id':1,'a':{'x':1}}]"),
    OK("[{'_id':1,'a':1}]", "[{'$project':{'_id':0,'k':'$a','l':'lit'}}]",
       "[{'k':1,'l':'lit'}]"),
    OK("[{'_id':1,'a':1}]", "[{'$project':{'_id':0,'k':'$nope'}}]", "[{}]"),
    OK("[{'_id':1,'s':{'f':'x'}}]",
       "[{'$addFields':{'s.t':'y','n':{'$literal':'$a'}}}]",
       "[{'_id':1,'s':{'f':'x','t':'y'},'n':'$a'}]"),
    OK("[{'_id':1,'s':{'f':'x'}}]", "[{'$set':{'s':{'t':1}}}]",
       "[{'_id':1,'s':{'f':'x','t':1}}]"),
    OK("[{'_id':1,'c':[{'v':1},{'v':2}]}]", "[{'$set':{'c.w':0}}]",
       "[{'_id':1,'c':[{'v':1,'w':0},{'v':2,'w':0}]}]"),
    OK("[{'_id':1,'a':1,'b':{'c':1,'d':2}}]", "[{'$unset':['a','b.c']}]",
       "[{'_id':1,'b':{'d':2}}]"),
    OK("[{'_id':1,'a':1}]", "[{'$unset':'a'}]", "[{'_id':1}]"),
    OK("[{'_id':1,'n':{'x':1}}]", "[{'$replaceRoot':{'newRoot':'$n'}}]",
       "[{'x':1}]"),
    OK("[{'_id':1,'a':2}]",
       "[{'$replaceWith':{'k':'$_id','v':{'$multiply':['$a',3]}}}]",
       "[{'k':1,'v':6}]"),
    ERR("[{'_id':1}]", "[{'$replaceRoot':{'newRoot':'$n'}}]", DTX_ETYPE,
        "object"),
    ERR("[]", "[{'$project':{'a':1,'b':0}}]", DTX_EBADQUERY, "mix"),
    ERR("[]", "[{'$project':{'a':0,'b':'$x'}}]", DTX_EBADQUERY, "mix"),
    ERR("[]", "[{'$project':{}}]", DTX_EBADQUERY, "non-empty"),
    ERR("[]", "[{'$unset':5}]", DTX_EBADQUERY, "$unset"),
    ERR("[]", "[{'$replaceRoot':{'root':1}}]", DTX_EBADQUERY, "newRoot"),
};

/* ---- expressions -------------------------------------------------------------
 * Manual: "$add", "$subtract", "$multiply" (null if an argument is null or
 * missing; doctx: int64 overflow is an error), "$cond" (array and object
 * forms), comparison operators (BSON order; missing is not null), "$and",
 * "$or", "$not", "$ifNull", "$size" (an array only), "$concat" (strings;
 * null if any is null or missing). */
static const acase_t expr_cases[] = {
    OK("[{'a':2,'b':3,'c':1.5}]",
       "[{'$project':{'_id':0,'s':{'$add':['$a','$b',1]},"
       "'d':{'$subtract':['$a','$b']},'m':{'$multiply':['$a','$c']},"
       "'n':{'$add':['$a','$nope']},'z':{'$add':[]}}}]",
       "[{'s':6,'d':-1,'m':3.0,'n':null,'z':0}]"),
    ERR("[{'a':9223372036854775807}]",
        "[{'$project':{'s':{'$add':['$a',1]}}}]", DTX_EOVERFLOW, "$add"),
    ERR("[{'a':-9223372036854775807}]",
        "[{'$project':{'s':{'$subtract':['$a',2]}}}]", DTX_EOVERFLOW,
        "$subtract"),
    ERR("[{'a':'x'}]", "[{'$project':{'s':{'$add':['$a',1]}}}]", DTX_ETYPE,
        "numeric"),
    OK("[{'q':250},{'q':50}]",
       "[{'$project':{'_id':0,'d':{'$cond':{'if':{'$gte':['$q',100]},"
       "'then':30,'else':20}},'e':{'$cond':[{'$lt':['$q',100]},'lo','hi']}}}]",
       "[{'d':30,'e':'hi'},{'d':20,'e':'lo'}]"),
    OK("[{'a':null}]",
       "[{'$project':{'_id':0,'e1':{'$eq':['$a',null]},"
       "'e2':{'$eq':['$nope',null]},'lt':{'$lt':['$nope',null]},"
       "'ne':{'$ne':[1,1.0]},'gt':{'$gt':['a',5]},'c':{'$cmp':[2,1]}}}]",
       "[{'e1':true,'e2':false,'lt':true,'ne':false,'gt':true,'c':1}]"),
    OK("[{'a':0,'b':'x'}]",
       "[{'$project':{'_id':0,'and':{'$and':['$b',1,'$a']},"
       "'or':{'$or':['$a','$nope','$b']},'not':{'$not':['$a']},"
       "'e':{'$and':[]}}}]",
       "[{'and':false,'or':true,'not':true,'e':true}]"),
    OK("[{'a':null,'b':5}]",
       "[{'$project':{'_id':0,'x':{'$ifNull':['$a','$nope','$b']},"
       "'y':{'$ifNull':['$nope','dflt']}}}]",
       "[{'x':5,'y':'dflt'}]"),
    OK("[{'a':[1,2,3]}]", "[{'$project':{'_id':0,'n':{'$size':'$a'}}}]",
       "[{'n':3}]"),
    ERR("[{'a':5}]", "[{'$project':{'n':{'$size':'$a'}}}]", DTX_ETYPE,
        "must be an array"),
    ERR("[{}]", "[{'$project':{'n':{'$size':'$a'}}}]", DTX_ETYPE, "missing"),
    OK("[{'f':'a','l':'b'}]",
       "[{'$project':{'_id':0,'n':{'$concat':['$f','-','$l']},"
       "'m':{'$concat':['$f','$nope']}}}]",
       "[{'n':'a-b','m':null}]"),
    ERR("[{'f':1}]", "[{'$project':{'n':{'$concat':['$f']}}}]", DTX_ETYPE,
        "strings"),
    OK("[{'a':[{'b':1},{'b':2},{'c':3}]}]",
       "[{'$project':{'_id':0,'v':'$a.b','r':'$$ROOT.a.b','k':'$$CURRENT'}}]",
       "[{'v':[1,2],'r':[1,2],'k':{'a':[{'b':1},{'b':2},{'c':3}]}}]"),
    ERR("[]", "[{'$project':{'a':{'$divide':[1,2]}}}]", DTX_EBADQUERY,
        "$divide"),
    ERR("[]", "[{'$project':{'a':'$$NOW'}}]", DTX_EBADQUERY, "$$NOW"),
    ERR("[]", "[{'$project':{'a':{'$add':1,'$sub':2}}}]", DTX_EBADQUERY,
        "exactly one"),
    ERR("[]", "[{'$project':{'a':{'$subtract':[1]}}}]", DTX_EBADQUERY,
        "$subtract takes"),
    ERR("[]", "[{'$project':{'a':{'$cond':{'if':1,'then':2}}}}]",
        DTX_EBADQUERY, "$cond"),
};

/* ---- $lookup, $match and refusals -------------------------------------------
 * Manual: "$lookup (aggregation)", equality form: a missing local field
 * matches foreign documents whose field is null or missing; an array
 * matches any element.  Unknown and unsupported stages are refused by
 * name. */
static const acase_t misc_cases[] = {
    OK("[{'_id':1,'item':'x'},{'_id':2,'item':['y','z']},{'_id':3}]",
       "[{'$lookup':{'from':'other','localField':'item',"
       "'foreignField':'sku','as':'inv'}},{'$project':{'n':{'$size':'$inv'}}}]",
       "[{'_id':1,'n':1},{'_id':2,'n':2},{'_id':3,'n':1}]"),
    OK("[{'a':1},{'a':2},{'a':3}]",
       "[{'$match':{'a':{'$gte':2}}},{'$match':{'a':{'$lte':2}}},"
       "{'$project':{'a':1}}]",
       "[{'a':2}]"),
    OK("[{'a':'apple'},{'a':'banana'}]",
       "[{'$project':{'_id':0,'a':1}},{'$match':{'a':{'$regex':'^b'}}}]",
       "[{'a':'banana'}]"),
    OK("[]", "[]", "[]"),
    ERR("[]", "[{'$facet':{}}]", DTX_EBADQUERY, "unsupported stage $facet"),
    ERR("[]", "[{'$out':'x'}]", DTX_EBADQUERY, "unsupported stage $out"),
    ERR("[]", "[{'$bogus':{}}]", DTX_EBADQUERY, "unknown stage $bogus"),
    ERR("[]", "[{'$match':{},'$limit':1}]", DTX_EBADQUERY, "exactly one"),
    ERR("[]", "[5]", DTX_EBADQUERY, "stage 0"),
    ERR("[]", "{'$match':{}}", DTX_EBADQUERY, "array"),
    ERR("[]", "[{'$match':{'$expr':{'$gt':['$a',1]}}}]", DTX_EBADQUERY,
        "$expr"),
    ERR("[]", "[{'$lookup':{'from':'other','pipeline':[],'as':'x'}}]",
        DTX_EBADQUERY, "pipeline"),
    ERR("[]", "[{'$lookup':{'from':'other','localField':'a','as':'x'}}]",
        DTX_EBADQUERY, "foreignField"),
};

/* $group and $sort refuse to hold more than the limit. */
static void test_memory_limit(void) {
  json_t *in = json_array();
  for (int i = 0; i < 2000; i++)
    json_array_append_new(in, json_pack("{sisssi}", "_id", i, "pad",
                                        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                                        "k", i));
  char *text = JDUMP(in);
  json_t *out = NULL;
  CHECK_RC(run(text, "[{'$group':{'_id':'$k','p':{'$push':'$pad'}}}]", 20000,
               &out),
           DTX_ELIMIT);
  CHECK(strstr(dtx_errdetail(), "$group") != NULL);
  CHECK(out == NULL);
  CHECK_RC(run(text, "[{'$unwind':'$pad'},{'$sort':{'k':-1}}]", 20000, &out),
           DTX_ELIMIT);
  CHECK(strstr(dtx_errdetail(), "$sort") != NULL);
  /* and without a limit that tight, the same pipelines run */
  CHECK_RC(run(text, "[{'$sort':{'k':-1}},{'$limit':1},{'$project':{'k':1}}]",
               0, &out),
           0);
  CHECK(json_array_size(out) == 1);
  json_decref(out);
  CHECK_RC(run(text, "[{'$group':{'_id':null,'n':{'$sum':'$k'}}}]", 0, &out),
           0);
  CHECK(json_integer_value(json_object_get(json_array_get(out, 0), "n")) ==
        1999 * 2000 / 2);
  json_decref(out);
  /* $addToSet of 2,000 distinct values, then of the same again: a set */
  CHECK_RC(run(text, "[{'$group':{'_id':null,'s':{'$addToSet':'$k'},"
                     "'t':{'$addToSet':{'$multiply':['$k',0]}}}}]",
               0, &out),
           0);
  json_t *g = json_array_get(out, 0);
  CHECK(json_array_size(json_object_get(g, "s")) == 2000);
  CHECK(json_array_size(json_object_get(g, "t")) == 1);
  json_decref(out);
  free(text);
  json_decref(in);
}

/* Size limits (docs/semantics.md, "Size limits"): what one evaluation
 * or stage builds is at most 16 MiB, refused with DTX_ELIMIT naming the
 * operator or stage -- a pipeline that doubles a value per stage stopped
 * only at the memory of the machine (357 MB for 22 $concat stages).  A row:
 * a document with a string s of `slen` bytes (`n` copies of it when n > 1),
 * `reps` copies of one stage, then the outcome. */
typedef struct size_case {
  size_t slen, n;
  const char *stage;
  int reps;
  int rc;
  const char *detail; /* rc != 0: a fragment of the detail */
} size_case_t;

static void test_size_limit(void) {
  static const size_case_t t[] = {
      /* the hostile pass's pipeline, and 30 stages (32 GB before) */
      {31, 1, "{'$project':{'s':{'$concat':['$s','$s']}}}", 22, DTX_ELIMIT,
       "$concat: the result would pass 16 MiB"},
      {31, 1, "{'$project':{'s':{'$concat':['$s','$s']}}}", 30, DTX_ELIMIT,
       "$concat"},
      /* 2^23 bytes = 8 MiB: under the limit, the same pipeline runs */
      {1, 1, "{'$project':{'s':{'$concat':['$s','$s']}}}", 23, 0, NULL},
      /* one $concat of 20 copies of 1 MiB */
      {1 << 20, 1,
       "{'$set':{'t':{'$concat':['$s','$s','$s','$s','$s','$s','$s','$s',"
       "'$s','$s','$s','$s','$s','$s','$s','$s','$s','$s','$s','$s']}}}",
       1, DTX_ELIMIT, "$concat"},
      /* arrays and objects of expressions share their values: cheap in
       * memory, but the document they make is 2^40 strings of text */
      {31, 1, "{'$project':{'s':['$s','$s']}}", 40, DTX_ELIMIT,
       "$project: a result document would hold more than 16 MiB"},
      {31, 1, "{'$addFields':{'s':{'a':'$s','b':'$s'}}}", 40, DTX_ELIMIT,
       "$addFields: a result document"},
      {31, 1, "{'$replaceRoot':{'newRoot':{'a':'$$ROOT','b':'$$ROOT'}}}", 40,
       DTX_ELIMIT, "$replaceRoot: a result document"},
      {31, 1, "{'$replaceWith':{'a':'$$ROOT','b':'$$ROOT'}}", 40, DTX_ELIMIT,
       "$replaceWith: a result document"},
      {31, 1, "{'$project':{'s':['$s','$s']}}", 10, 0, NULL},
      /* $group's arrays: 20 values of 1 MiB are no one document */
      {1 << 20, 20, "{'$group':{'_id':null,'p':{'$push':'$s'}}}", 1,
       DTX_ELIMIT, "$group: $push into 'p' would collect more than 16 MiB"},
      {1 << 20, 20, "{'$group':{'_id':'$_id','p':{'$push':'$s'}}}", 1, 0,
       NULL},
      {1 << 20, 20,
       "{'$group':{'_id':null,'p':{'$addToSet':['$s','$_id']}}}",
       1, DTX_ELIMIT, "$addToSet into 'p'"},
      /* $lookup's array: every document of "other" is 1 MiB */
      {1 << 20, 1,
       "{'$lookup':{'from':'other','localField':'k','foreignField':'k',"
       "'as':'o'}}",
       1, DTX_ELIMIT, "$lookup: a result document"},
  };
  char *big = malloc((1 << 20) + 1);
  REQUIRE(big != NULL);
  memset(big, 'x', 1 << 20);
  big[1 << 20] = '\0';
  json_t *saved = other_coll;
  other_coll = json_array();
  for (int i = 0; i < 20; i++)
    json_array_append_new(other_coll, json_pack("{sisiss}", "_id", i, "k", 1,
                                                 "s", big));
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    char *s = malloc(t[i].slen + 1);
    REQUIRE(s != NULL);
    memset(s, 'a', t[i].slen);
    s[t[i].slen] = '\0';
    json_t *in = json_array();
    for (size_t k = 0; k < t[i].n; k++)
      json_array_append_new(in, json_pack("{sisssi}", "_id", (int)k, "s", s,
                                          "k", 1));
    free(s);
    size_t len = 0, cap = 2 + (strlen(t[i].stage) + 1) * (size_t)t[i].reps;
    char *pl = malloc(cap + 1);
    REQUIRE(pl != NULL);
    pl[len++] = '[';
    for (int k = 0; k < t[i].reps; k++) {
      if (k)
        pl[len++] = ',';
      memcpy(pl + len, t[i].stage, strlen(t[i].stage));
      len += strlen(t[i].stage);
    }
    pl[len++] = ']';
    pl[len] = '\0';
    json_t *out = NULL;
    int rc = run_in(in, pl, 0, &out); /* in: 20 MiB, not parsed again */
    CHECKF(rc == t[i].rc, "size[%zu] %s x%d: %s (%s)", i, t[i].stage,
           t[i].reps, dtx_errname(rc), dtx_errdetail());
    if (t[i].rc)
      CHECKF(strstr(dtx_errdetail(), t[i].detail) != NULL,
             "size[%zu]: detail '%s' lacks '%s'", i, dtx_errdetail(),
             t[i].detail);
    CHECK(t[i].rc == 0 || out == NULL);
    json_decref(out);
    free(pl);
  }
  json_decref(other_coll);
  other_coll = saved;
  free(big);
}

/* The pushdown: leading $match stages, then $sort, $skip, $limit. */
static void test_source(void) {
  json_t *pl = JQNEW("[{'$match':{'a':1}},{'$match':{'b':2}},{'$sort':{'c':1}},"
                     "{'$skip':3},{'$limit':4},{'$match':{'d':1}}]");
  dtx__pipeline_t *p = NULL;
  REQUIRE(dtx__pipeline_compile(pl, &p) == 0);
  const json_t *f, *s;
  int64_t skip, limit;
  dtx__pipeline_source(p, &f, &s, &skip, &limit);
  char *fs = JDUMP(f), *ss = JDUMP(s);
  CHECKF(!strcmp(fs, "{\"$and\":[{\"a\":1},{\"b\":2}]}"), "%s", fs);
  CHECKF(!strcmp(ss, "{\"c\":1}"), "%s", ss);
  CHECK(skip == 3 && limit == 4);
  free(fs);
  free(ss);
  dtx__pipeline_free(p);
  json_decref(pl);
  pl = JQNEW("[{'$group':{'_id':null}},{'$match':{'a':1}}]");
  REQUIRE(dtx__pipeline_compile(pl, &p) == 0);
  dtx__pipeline_source(p, &f, &s, &skip, &limit);
  CHECK(f == NULL && s == NULL && skip == 0 && limit == 0);
  dtx__pipeline_free(p);
  json_decref(pl);
}

static void test_tables(void) {
  RUN(unwind_cases);
  RUN(group_cases);
  RUN(order_cases);
  RUN(shape_cases);
  RUN(expr_cases);
  RUN(misc_cases);
  printf("test_agg: %zu rows through both engines, %zu skipped (int64 "
         "overflow: a double in MongoDB's aggregation, an error in the "
         "json_t engine)\n", b_rows, b_skipped);
}

int main(void) {
  other_coll = JQNEW("[{'sku':'x'},{'sku':'y'},{'sku':'z'},{'_id':9}]");
  TEST_RUN(test_tables);
  TEST_RUN(test_memory_limit);
  TEST_RUN(test_size_limit);
  TEST_RUN(test_source);
  json_decref(other_coll);
  return TEST_DONE();
}
