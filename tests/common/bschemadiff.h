/* bschemadiff.h -- the differential of the two $jsonSchema engines: one
 * JSON schema and one JSON value through the json_t engine (schema.c)
 * and, by the bridge, through the BSON engine (bschema.c, brules.h).
 * They must agree on the compile's code and detail, on the answer and on
 * the "why" text.
 *
 * Header-only (static) so that the fuzz target (tests/fuzz/
 * fuzz_bschema.c), which links no test library, shares it with the table
 * runner (tests/unit/test_schema.c).
 *
 * Every value runs twice through the BSON engine: as the bridge writes
 * it (a JSON integer int32 when it fits, else int64) and with every
 * integer written as int64 (how a stored NumberLong arrives); both must
 * give the json_t engine's answer and why, since both engines judge an
 * integer by its value, not its width (brules.h).  A write runs four
 * times: each side as bridged or int64.  Rows that differ only
 * because BSON has more (bsonType 'decimal', 'date', 'objectId' compile;
 * the refusal lists BSON's aliases) are skipped with the reason. */
#ifndef DTX_TESTS_BSCHEMADIFF_H
#define DTX_TESTS_BSCHEMADIFF_H

#include "doc/bdoc.h"
#include "doc/brules.h"
#include "doc/doc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { BSD_SAME = 0, BSD_SKIP = 1, BSD_DIFF = 2 };

typedef struct bsd_out {
  int rc;         /* the json_t engine's compile code */
  int match;      /* and its answer (when rc is 0 and a value was given) */
  char why[1200]; /* the skip reason or the difference */
} bsd_out_t;

static inline int bsd_say(bsd_out_t *o, int verdict, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->why, sizeof o->why, fmt, ap);
  va_end(ap);
  return verdict;
}

/* v appended to b under key with every JSON integer as int64 (the
 * bridge's rule otherwise: reals double, key order kept).  0, or -1. */
static inline int bsd_append_i64(bson_t *b, const char *key,
                                 const json_t *v) {
  bson_t child;
  const char *k;
  json_t *x;
  size_t i;
  int len = (int)strlen(key);
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    if (!bson_append_document_begin(b, key, len, &child))
      return -1;
    json_object_foreach((json_t *)v, k, x) if (bsd_append_i64(&child, k, x))
        return -1;
    return bson_append_document_end(b, &child) ? 0 : -1;
  case JSON_ARRAY:
    if (!bson_append_array_begin(b, key, len, &child))
      return -1;
    json_array_foreach(v, i, x) {
      char n[24];
      snprintf(n, sizeof n, "%zu", i);
      if (bsd_append_i64(&child, n, x))
        return -1;
    }
    return bson_append_array_end(b, &child) ? 0 : -1;
  case JSON_STRING:
    return bson_append_utf8(b, key, len, json_string_value(v),
                            (int)json_string_length(v))
               ? 0
               : -1;
  case JSON_INTEGER:
    return bson_append_int64(b, key, len, json_integer_value(v)) ? 0 : -1;
  case JSON_REAL:
    return bson_append_double(b, key, len, json_real_value(v)) ? 0 : -1;
  case JSON_TRUE:
  case JSON_FALSE:
    return bson_append_bool(b, key, len, json_is_true(v)) ? 0 : -1;
  default:
    return bson_append_null(b, key, len) ? 0 : -1;
  }
}

/* The only element of holder, as a view. */
static inline dtx__bval_t bsd_first(const bson_t *holder) {
  dtx__belem_t e;
  uint32_t off = 0;
  e.v.type = BSON_TYPE_EOD;
  e.v.len = 0;
  e.v.data = NULL;
  dtx__belem_next(bson_get_data(holder), holder->len, &off, &e);
  return e.v;
}

/* The BSON engine's answer and why for v. */
static inline int bsd_match(const dtx__bschema_t *s, const dtx__bval_t *v,
                            char *why, size_t n, int *quiet) {
  int m = dtx__bschema_match_val(s, v, why, n);
  *quiet = dtx__bschema_match_val(s, v, NULL, 0);
  return m;
}

/* BSD_SKIP (with the reason) when two compiles differ only because BSON
 * has more: a bsonType alias JSON lacks compiles, or the refusal of an
 * unknown one lists BSON's aliases; else BSD_DIFF. */
static inline int bsd_more(bsd_out_t *o, int jrc, const char *jd, int brc,
                           const char *bd) {
  const char *jl = strstr(jd, " (supported: ");
  const char *bl = strstr(bd, " (supported: ");
  if (jrc && !brc && strstr(jd, "bsonType '") &&
      strstr(jd, "is not supported"))
    return bsd_say(o, BSD_SKIP, "a BSON type alias JSON lacks");
  if (jl && bl && jl - jd == bl - bd &&
      strncmp(jd, bd, (size_t)(jl - jd)) == 0 && strstr(jd, "bsonType '"))
    return bsd_say(o, BSD_SKIP, "the refusal lists BSON's aliases");
  return BSD_DIFF;
}

/* Both engines on (spec, value); value may be NULL (compile only). */
static inline int bsd_run(const json_t *spec, const json_t *value,
                          bsd_out_t *o) {
  char jdetail[512], bdetail[512], jwhy[400], bwhy[400];
  dtx__schema_t *js = NULL;
  dtx__bschema_t *bs = NULL;
  bson_t hs = BSON_INITIALIZER, hv = BSON_INITIALIZER,
         h64 = BSON_INITIALIZER;
  int verdict = BSD_SAME, quiet;
  o->why[0] = '\0';
  o->match = 0;
  o->rc = dtx__schema_compile(spec, &js);
  snprintf(jdetail, sizeof jdetail, "%s", o->rc ? dtx_errdetail() : "");
  dtx__bval_t sv;
  if (dtx__bval_from_json(spec, &hs, &sv)) {
    verdict = bsd_say(o, BSD_SKIP, "the bridge refused the schema: %s",
                      dtx_errdetail());
    goto out;
  }
  sv = bsd_first(&hs);
  int brc = dtx__bschema_compile(&sv, &bs);
  snprintf(bdetail, sizeof bdetail, "%s", brc ? dtx_errdetail() : "");
  if (brc != o->rc || strcmp(jdetail, bdetail)) {
    if ((verdict = bsd_more(o, o->rc, jdetail, brc, bdetail)) == BSD_DIFF)
      verdict = bsd_say(o, BSD_DIFF, "compile: json %s (%s), bson %s (%s)",
                        dtx_errname(o->rc), jdetail, dtx_errname(brc),
                        bdetail);
    goto out;
  }
  if (brc || !value)
    goto out;
  o->match = dtx__schema_match(js, value, jwhy, sizeof jwhy);
  if (dtx__schema_match(js, value, NULL, 0) != o->match) {
    verdict = bsd_say(o, BSD_DIFF, "json: answers differ without why");
    goto out;
  }
  dtx__bval_t v;
  if (dtx__bval_from_json(value, &hv, &v)) {
    verdict = bsd_say(o, BSD_SKIP, "the bridge refused the value: %s",
                      dtx_errdetail());
    goto out;
  }
  v = bsd_first(&hv);
  int bm = bsd_match(bs, &v, bwhy, sizeof bwhy, &quiet);
  if (quiet != bm) {
    verdict = bsd_say(o, BSD_DIFF, "bson: answers differ without why");
    goto out;
  }
  /* The same value with int64 integers must answer the same too. */
  if (bsd_append_i64(&h64, "v", value)) {
    verdict = bsd_say(o, BSD_SKIP, "out of memory");
    goto out;
  }
  dtx__bval_t v64 = bsd_first(&h64);
  char why64[400];
  int m64 = bsd_match(bs, &v64, why64, sizeof why64, &quiet);
  if (bm == o->match && (bm || strcmp(jwhy, bwhy) == 0) && quiet == m64 &&
      m64 == o->match && (m64 || strcmp(jwhy, why64) == 0))
    goto out;
  verdict = bsd_say(o, BSD_DIFF,
                    "match: json %d '%s', bson %d '%s', bson int64 %d '%s'",
                    o->match, o->match ? "" : jwhy, bm, bm ? "" : bwhy, m64,
                    m64 ? "" : why64);
out:
  dtx__schema_free(js);
  dtx__bschema_free(bs);
  bson_destroy(&hs);
  bson_destroy(&hv);
  bson_destroy(&h64);
  return verdict;
}

/* ---- the rules and the write check (brules.c against rules.c) --------- */

/* The object doc as a document with every integer int64 (into *out, which
 * this initialises).  0, or -1. */
static inline int bsd_doc_i64(const json_t *doc, bson_t *out) {
  const char *k;
  json_t *x;
  bson_init(out);
  json_object_foreach((json_t *)doc, k, x) if (bsd_append_i64(out, k, x))
      return -1;
  return 0;
}

/* One write check through both engines: code and detail.  i64: bit 0
 * writes before's integers as int64, bit 1 after's (else as the bridge
 * writes them). */
static inline int bsd_write(const dtx__rules_t *jr, const dtx__brules_t *br,
                            const char *coll, const json_t *before,
                            const json_t *after, int bypass, int i64,
                            int *jrc, char *jd, int *brc, char *bd,
                            size_t n) {
  bson_t b = BSON_INITIALIZER, a = BSON_INITIALIZER;
  int rc = 0;
  *jrc = dtx__doc_check_write(jr, coll, before, after, bypass);
  snprintf(jd, n, "%s", *jrc ? dtx_errdetail() : "");
  if ((before && ((i64 & 1) ? bsd_doc_i64(before, &b)
                            : dtx__bson_from_json(before, &b))) ||
      (after && ((i64 & 2) ? bsd_doc_i64(after, &a)
                           : dtx__bson_from_json(after, &a))))
    rc = -1;
  if (rc == 0) {
    *brc = dtx__bdoc_check_write(br, coll,
                                 before ? bson_get_data(&b) : NULL, b.len,
                                 after ? bson_get_data(&a) : NULL, a.len,
                                 bypass);
    snprintf(bd, n, "%s", *brc ? dtx_errdetail() : "");
  }
  bson_destroy(&b);
  bson_destroy(&a);
  return rc;
}

/* Both engines compile rules (a JSON object, or anything the json_t
 * engine is given) and, when before or after is given, check that
 * write; BSD_* as bsd_run. */
static inline int bsd_rules_run(const json_t *rules, const json_t *before,
                                const json_t *after, int bypass,
                                bsd_out_t *o) {
  char jd[512], bd[512];
  dtx__rules_t *jr = NULL;
  dtx__brules_t *br = NULL;
  bson_t bs = BSON_INITIALIZER;
  int verdict = BSD_SAME, brc, jrc;
  o->why[0] = '\0';
  o->match = 0;
  o->rc = dtx__rules_compile(rules, &jr);
  snprintf(jd, sizeof jd, "%s", o->rc ? dtx_errdetail() : "");
  if (!json_is_object(rules)) {
    verdict = bsd_say(o, BSD_SKIP, "the rules are no object: a BSON spec "
                      "is a document");
    goto out;
  }
  if (dtx__bson_from_json(rules, &bs)) {
    verdict = bsd_say(o, BSD_SKIP, "the bridge refused the rules: %s",
                      dtx_errdetail());
    goto out;
  }
  brc = dtx__brules_compile(&bs, &br);
  snprintf(bd, sizeof bd, "%s", brc ? dtx_errdetail() : "");
  if (brc != o->rc || strcmp(jd, bd) || !jr != !br) {
    /* A BSON document nests at most DTX_MAX_DEPTH levels, so the rules'
     * own check (dtx__bson_check) meets a part nested past 100 before
     * the depth check of rules.c's detail does: the same code, the
     * document's detail (as bfilterdiff.h). */
    if (brc == o->rc && strstr(jd, "nests deeper than") &&
        strstr(bd, "nesting deeper than"))
      verdict = bsd_say(o, BSD_SKIP,
                        "nested past 100 levels: the document check's detail");
    else if ((verdict = bsd_more(o, o->rc, jd, brc, bd)) == BSD_DIFF)
      verdict =
          bsd_say(o, BSD_DIFF, "compile: json %s (%s)%s, bson %s (%s)%s",
                  dtx_errname(o->rc), jd, jr ? "" : " none", dtx_errname(brc),
                  bd, br ? "" : " none");
    goto out;
  }
  if (o->rc || (!before && !after))
    goto out;
  if ((before && !json_is_object(before)) ||
      (after && !json_is_object(after))) {
    verdict = bsd_say(o, BSD_SKIP, "a document is no object");
    goto out;
  }
  /* As the bridge writes the documents, then with int64 integers on
   * either side or both: a width JSON cannot see changes nothing. */
  for (int i64 = 0; i64 < 4; i64++) {
    if (bsd_write(jr, br, "acc", before, after, bypass, i64, &jrc, jd, &brc,
                  bd, sizeof bd)) {
      verdict = bsd_say(o, BSD_SKIP, "the bridge refused a document");
      goto out;
    }
    o->rc = jrc;
    if (jrc != brc || strcmp(jd, bd)) {
      static const char *const leg[4] = {"", " before int64",
                                         " after int64", " int64"};
      verdict = bsd_say(o, BSD_DIFF, "write: json %s (%s), bson%s %s (%s)",
                        dtx_errname(jrc), jd, leg[i64], dtx_errname(brc), bd);
      goto out;
    }
  }
out:
  dtx__rules_free(jr);
  dtx__brules_free(br);
  bson_destroy(&bs);
  return verdict;
}

#endif
