/* fuzz_bagg.c -- differential libFuzzer target: aggregation pipelines
 * through the json_t engine (agg.c) and the BSON engine (bagg.c).
 *
 * The input is "<pipeline JSON>\n<documents JSON>", as fuzz_pipeline.c.
 * Both engines compile the pipeline (over the bridge for BSON); each
 * takes its source (filter, sort, skip, limit) with its own filter and
 * sort and runs the rest.  They must agree: the same error code and
 * detail, or the same result array through the bridge.  Aborts on a
 * disagreement.  Known, legitimate differences are not compared:
 *  - an int64 overflow (or a non-finite double), which the json_t engine
 *    refuses and MongoDB's aggregation (so bagg) turns into a double;
 *  - DTX_ELIMIT: the engines count the memory and the 16 MiB of a
 *    document differently (JSON text vs BSON bytes).
 * $lookup reads a small fixed collection in both. */
#include "../common/bdiff.c"
#include "doc/bagg.h"
#include "doc/bfilter.h"
#include "doc/bproj.h"
#include "fuzz_common.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char OTHER[] =
    "[{\"sku\":\"x\",\"n\":1},{\"sku\":2},{\"_id\":9},{\"sku\":null}]";

static int jfind(void *ctx, const char *coll, const json_t *filter,
                 json_t **out) {
  (void)ctx;
  (void)coll;
  json_t *all = NULL;
  dtx__filter_t *f = NULL;
  *out = NULL;
  int rc = dtx__filter_compile(filter, &f);
  if (rc)
    return rc;
  if (dtx__json_parse(OTHER, &all))
    abort();
  json_t *r = json_array();
  for (size_t i = 0; i < json_array_size(all); i++)
    if (dtx__filter_match(f, json_array_get(all, i)))
      json_array_append(r, json_array_get(all, i));
  dtx__filter_free(f);
  json_decref(all);
  *out = r;
  return 0;
}

static int bfind(void *ctx, const char *coll, const bson_t *filter,
                 bson_t *out) {
  (void)ctx;
  (void)coll;
  dtx__bfilter_t *f = NULL;
  bson_t all;
  int rc = dtx__bfilter_compile(filter, &f);
  if (rc)
    return rc;
  if (bdiff_bson(OTHER, &all))
    abort();
  uint32_t off = 0, k = 0;
  dtx__belem_t e;
  while (dtx__belem_next(bson_get_data(&all), all.len, &off, &e)) {
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
  return 0;
}

/* The json_t engine: 0 and *out, or the error (detail copied). */
static int jrun(const json_t *pl, const json_t *docs, json_t **out) {
  dtx__pipeline_t *p = NULL;
  *out = NULL;
  int rc = dtx__pipeline_compile(pl, &p);
  if (rc)
    return rc;
  const json_t *fs, *sort;
  int64_t skip, limit;
  dtx__pipeline_source(p, &fs, &sort, &skip, &limit);
  dtx__filter_t *f = NULL;
  if ((rc = dtx__filter_compile(fs, &f))) {
    dtx__pipeline_free(p);
    return rc;
  }
  json_t *in = json_array();
  for (size_t i = 0; i < json_array_size(docs); i++)
    if (dtx__filter_match(f, json_array_get(docs, i)))
      json_array_append(in, json_array_get(docs, i));
  dtx__filter_free(f);
  if (sort && dtx__sort_array(in, sort))
    abort();
  json_t *page = json_array();
  for (size_t i = (size_t)skip; i < json_array_size(in); i++) {
    if (limit && (int64_t)json_array_size(page) >= limit)
      break;
    json_array_append(page, json_array_get(in, i));
  }
  json_decref(in);
  dtx__agg_env_t env = {0, jfind, NULL};
  rc = dtx__pipeline_run(p, page, &env, out);
  dtx__pipeline_free(p);
  return rc;
}

static int brun(const bson_t *pl, const bson_t *docs, bson_t *out) {
  dtx__bpipeline_t *p = NULL;
  int rc = dtx__bpipeline_compile(bson_get_data(pl), pl->len, &p);
  if (rc)
    return rc;
  const uint8_t *fs, *ss;
  uint32_t fl, sl;
  int64_t skip, limit;
  bson_t fb;
  dtx__bpipeline_source(p, &fs, &fl, &ss, &sl, &skip, &limit);
  if (fs)
    bson_init_static(&fb, fs, fl);
  dtx__bfilter_t *f = NULL;
  if ((rc = dtx__bfilter_compile(fs ? &fb : NULL, &f))) {
    dtx__bpipeline_free(p);
    return rc;
  }
  dtx__bval_t *in = calloc(docs->len, sizeof *in);
  size_t n = 0;
  uint32_t off = 0;
  dtx__belem_t e;
  if (!in)
    abort();
  while (dtx__belem_next(bson_get_data(docs), docs->len, &off, &e)) {
    uint32_t dl;
    const uint8_t *d = dtx__bval_doc(&e.v, &dl);
    if (dtx__bfilter_match(f, d, dl))
      in[n++] = e.v;
  }
  dtx__bfilter_free(f);
  if (ss && dtx__bsort_docs(in, n, ss, sl))
    abort();
  size_t from = (size_t)skip < n ? (size_t)skip : n, cnt = n - from;
  if (limit && (size_t)limit < cnt)
    cnt = (size_t)limit;
  dtx__bagg_env_t env = {0, bfind, NULL};
  rc = dtx__bpipeline_run(p, in + from, cnt, &env, out);
  free(in);
  dtx__bpipeline_free(p);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *t = (const char *)data;
  const char *nl = memchr(t, '\n', size);
  size_t plen = nl ? (size_t)(nl - t) : size;
  json_t *pl = fuzz_parse(t, plen);
  json_t *docs = nl ? fuzz_parse(nl + 1, size - plen - 1) : json_array();
  json_t *jout = NULL;
  bson_t bpl = BSON_INITIALIZER, bdocs = BSON_INITIALIZER;
  bson_t bout = BSON_INITIALIZER;
  if (!pl || !json_is_array(pl) || !json_is_array(docs))
    goto out;
  for (size_t i = 0; i < json_array_size(docs); i++)
    if (!json_is_object(json_array_get(docs, i)))
      goto out;
  /* Rows the bridge refuses (depth, size) are not pipelines to compare. */
  if (dtx__bson_from_json(pl, &bpl) || dtx__bson_from_json(docs, &bdocs))
    goto out;
  int jrc = jrun(pl, docs, &jout);
  char *jdet = strdup(jrc ? dtx_errdetail() : "");
  int brc = brun(&bpl, &bdocs, &bout);
  if (!jdet)
    abort();
  int skip = jrc == DTX_ELIMIT || brc == DTX_ELIMIT || jrc == DTX_ENOMEM ||
             (jrc == DTX_EOVERFLOW && (strstr(jdet, "overflows int64") ||
                                       strstr(jdet, "not finite")));
  if (!skip) {
    if (jrc != brc) {
      fprintf(stderr, "json %s (%s) vs bson %s (%s)\n", dtx_errname(jrc),
              jdet, dtx_errname(brc), dtx_errdetail());
      abort();
    }
    if (jrc && strcmp(jdet, dtx_errdetail())) {
      fprintf(stderr, "details: json '%s' vs bson '%s'\n", jdet,
              dtx_errdetail());
      abort();
    }
    if (!jrc && !bdiff_same(jout, bson_get_data(&bout), bout.len)) {
      json_t *b = NULL;
      dtx__bson_to_json(bson_get_data(&bout), bout.len, 1, &b);
      char *js = dtx__json_dump(jout), *bs = b ? dtx__json_dump(b) : NULL;
      fprintf(stderr, "results: json %s\n         bson %s\n", js,
              bs ? bs : "?");
      abort();
    }
  }
  free(jdet);
out:
  json_decref(jout);
  json_decref(pl);
  json_decref(docs);
  bson_destroy(&bpl);
  bson_destroy(&bdocs);
  bson_destroy(&bout);
  return 0;
}
