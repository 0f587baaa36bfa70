/* fuzz_bfilter.c -- differential libFuzzer target of the two filter
 * engines.  The input is "<filter JSON>\n<document JSON>" (fuzz_pair.h);
 * both go through the json_t matcher and, by the bridge, through the BSON
 * matcher (bfilterdiff.h), which must agree on the compile's code and
 * detail, the match, the position and a match error.  A disagreement
 * prints both answers and aborts.  The filter is also matched against
 * itself as a document, as fuzz_filter.c does.
 *
 * The same two texts are also read as Extended JSON (dtx__ejson_read),
 * which reaches what JSON cannot say (Decimal128, dates, regexes,
 * MinKey...): there the BSON engine runs alone and must compile or refuse
 * with DTX_EBADQUERY, answer 0 or 1, and answer match and match_pos
 * alike. */
#include "../common/bfilterdiff.h"
#include "fuzz_pair.h"

#include <stdio.h>
#include <stdlib.h>

static void check(const json_t *spec, const json_t *doc) {
  bfd_out_t o;
  if (bfd_run(spec, doc, &o) == BFD_DIFF) {
    char *s = dtx__json_dump(spec), *d = dtx__json_dump(doc);
    fprintf(stderr, "engines disagree: %s\nfilter %s\ndoc %s\n", o.why,
            s ? s : "?", d ? d : "?");
    free(s);
    free(d);
    abort();
  }
}

static void try_pair(const json_t *spec, const json_t *doc) {
  check(spec, doc);
  check(spec, spec);
}

static void bson_alone(const bson_t *spec, const bson_t *doc) {
  dtx__bfilter_t *f = NULL;
  int rc = dtx__bfilter_compile(spec, &f);
  if (rc) {
    if (f || (rc != DTX_EBADQUERY && rc != DTX_ENOMEM))
      abort();
    return;
  }
  const bson_t *docs[] = {doc, spec};
  for (int i = 0; i < 2; i++) {
    size_t pos;
    const uint8_t *d = bson_get_data(docs[i]);
    int m = dtx__bfilter_match(f, d, docs[i]->len);
    int mp = dtx__bfilter_match_pos(f, d, docs[i]->len, &pos);
    if ((m != 0 && m != 1) || (m != mp && !dtx__bfilter_error(f)))
      abort();
  }
  dtx__bfilter_free(f);
}

static void try_ejson(const uint8_t *data, size_t size) {
  const char *nl = memchr(data, '\n', size);
  size_t n1 = nl ? (size_t)(nl - (const char *)data) : size;
  bson_t spec = BSON_INITIALIZER, doc = BSON_INITIALIZER;
  if (dtx__ejson_read((const char *)data, n1, &spec) == 0 &&
      (!nl || dtx__ejson_read(nl + 1, size - n1 - 1, &doc) == 0))
    bson_alone(&spec, &doc);
  bson_destroy(&spec);
  bson_destroy(&doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pair(data, size, try_pair);
  try_ejson(data, size);
  return 0;
}
