/* bfilterdiff.h -- the differential of the two filter engines: one JSON
 * filter and one JSON document through the json_t matcher (doc.h) and,
 * by the bridge (dtx__bson_from_json), through the BSON matcher
 * (bfilter.h); they must agree on the compile's code and detail, on the
 * match, on the positional index and on a match error -- the document
 * as the bridge writes it and with every integer int64.
 *
 * bfd_run is header-only (static) so that the fuzz target
 * (tests/fuzz/fuzz_bfilter.c), which links no test library, shares it
 * with the table runner (bfilterdiff.c).  Rows BSON cannot state the
 * same way are skipped with a reason, which the callers count and print. */
#ifndef DTX_TESTS_BFILTERDIFF_H
#define DTX_TESTS_BFILTERDIFF_H

#include "bschemadiff.h" /* bsd_doc_i64 */
#include "doc/bdoc.h"
#include "doc/bfilter.h"
#include "doc/doc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { BFD_SAME = 0, BFD_SKIP = 1, BFD_DIFF = 2 };

/* What one run saw, for the callers' messages and checks. */
typedef struct bfd_out {
  int rc;          /* the json_t engine's compile code */
  int match;       /* and its answer (when rc is 0) */
  size_t pos;      /* and its position (SIZE_MAX: none) */
  char why[1200]; /* the skip reason or the difference */
} bfd_out_t;

static inline int bfd_say(bfd_out_t *o, int verdict, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->why, sizeof o->why, fmt, ap);
  va_end(ap);
  return verdict;
}

/* Both engines on (spec, doc); doc may be NULL (compile only).
 * BFD_SAME, BFD_SKIP or BFD_DIFF, with o->why saying why. */
static inline int bfd_run(const json_t *spec, const json_t *doc,
                          bfd_out_t *o) {
  char jdetail[512]; /* err.c's DETAIL_MAX: the whole detail */
  dtx__filter_t *jf = NULL;
  dtx__bfilter_t *bf = NULL;
  bson_t bs = BSON_INITIALIZER, bd = BSON_INITIALIZER, b64 = BSON_INITIALIZER;
  int verdict = BFD_SAME;
  o->why[0] = '\0';
  o->match = 0;
  o->pos = SIZE_MAX;
  o->rc = dtx__filter_compile(spec, &jf);
  snprintf(jdetail, sizeof jdetail, "%s", o->rc ? dtx_errdetail() : "");
  if (!json_is_object(spec)) {
    verdict = bfd_say(o, BFD_SKIP, "the spec is not an object");
    goto out;
  }
  if (dtx__bson_from_json(spec, &bs)) {
    verdict = bfd_say(o, BFD_SKIP, "the bridge refused the spec: %s",
                      dtx_errdetail());
    goto out;
  }
  if (doc && !json_is_object(doc)) {
    verdict = bfd_say(o, BFD_SKIP, "the document is not an object");
    goto out;
  }
  if (doc && dtx__bson_from_json(doc, &bd)) {
    verdict = bfd_say(o, BFD_SKIP, "the bridge refused the document: %s",
                      dtx_errdetail());
    goto out;
  }
  int brc = dtx__bfilter_compile(&bs, &bf);
  if (brc != o->rc) {
    verdict = bfd_say(o, BFD_DIFF, "compile: json %s (%s), bson %s (%s)",
                      dtx_errname(o->rc), jdetail, dtx_errname(brc),
                      brc ? dtx_errdetail() : "");
    goto out;
  }
  if (brc) {
    /* A BSON document nests at most DTX_MAX_DEPTH levels, so the spec's
     * own check (dtx__bson_check) meets a filter nested past 100 before
     * the compiler does: the same code, the document's detail. */
    if (strstr(jdetail, "filter nested deeper than") &&
        strstr(dtx_errdetail(), "nesting deeper than"))
      verdict = bfd_say(o, BFD_SKIP,
                        "nested past 100 levels: the document check's detail");
    else if (strcmp(jdetail, dtx_errdetail()))
      verdict = bfd_say(o, BFD_DIFF, "detail: json '%s', bson '%s'",
                        jdetail, dtx_errdetail());
    goto out;
  }
  if (!doc)
    goto out;
  const uint8_t *d = bson_get_data(&bd);
  size_t bpos = 0;
  o->match = dtx__filter_match_pos(jf, doc, &o->pos);
  int bm = dtx__bfilter_match_pos(bf, d, bd.len, &bpos);
  int je = dtx__filter_error(jf), be = dtx__bfilter_error(bf);
  if (o->match != bm || (bm && o->pos != bpos) || je != be) {
    verdict = bfd_say(o, BFD_DIFF,
                      "match: json %d pos %zd err %s, bson %d pos %zd err %s",
                      o->match, (ssize_t)o->pos, dtx_errname(je), bm,
                      (ssize_t)bpos, dtx_errname(be));
    goto out;
  }
  /* The plain match answers as the positional one. */
  if (!je && dtx__bfilter_match(bf, d, bd.len) != bm) {
    verdict = bfd_say(o, BFD_DIFF, "bson match and match_pos disagree");
    goto out;
  }
  /* The same document with every integer int64 (a stored NumberLong):
   * doctx judges an integer by its value, whatever its width. */
  if (bsd_doc_i64(doc, &b64) == 0) {
    size_t p64 = 0;
    int m64 = dtx__bfilter_match_pos(bf, bson_get_data(&b64), b64.len, &p64);
    int e64 = dtx__bfilter_error(bf);
    if (m64 != o->match || (m64 && p64 != o->pos) || e64 != je)
      verdict = bfd_say(o, BFD_DIFF,
                        "int64 integers: json %d pos %zd err %s, bson %d "
                        "pos %zd err %s",
                        o->match, (ssize_t)o->pos, dtx_errname(je), m64,
                        (ssize_t)p64, dtx_errname(e64));
  }
out:
  dtx__filter_free(jf);
  dtx__bfilter_free(bf);
  bson_destroy(&bs);
  bson_destroy(&bd);
  bson_destroy(&b64);
  return verdict;
}

/* ---- the table runner's side (bfilterdiff.c) --------------------------- */

/* Runs one table row through both engines (CHECKF on a difference) and
 * counts it; the counts print when the test program exits. */
void dtx_t_bfilter_row(const char *table, size_t i, const json_t *spec,
                       const json_t *doc);

#endif
