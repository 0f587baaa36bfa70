/* fuzz_bfilter.c -- differential libFuzzer target of the two filter
 * engines.  The input is "<filter JSON>\n<document JSON>" (fuzz_pair.h);
 * both go through the json_t matcher and, by the bridge, through the BSON
 * matcher (bfilterdiff.h), which must agree on the compile's code and
 * detail, the match, the position and a match error.  A disagreement
 * prints both answers and aborts.  The filter is also matched against
 * itself as a document, as fuzz_filter.c does. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pair(data, size, try_pair);
  return 0;
}
