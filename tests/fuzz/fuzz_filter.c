/* fuzz_filter.c -- libFuzzer target for the filter compiler and matcher.
 *
 * The input is "<filter JSON>\n<document JSON>".  Whatever the filter, the
 * compiler must either succeed or fail with DTX_EBADQUERY, and matching
 * must return 0 or 1 without crashing or leaking.  The same texts are also
 * tried as a sort spec and a projection, which share the path walker. */
#include "doc/doc.h"
#include "fuzz_pair.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void try_filter(const json_t *spec, const json_t *doc) {
  dtx__filter_t *f = NULL;
  int rc = dtx__filter_compile(spec, &f);
  if (rc) {
    if (f || (rc != DTX_EBADQUERY && rc != DTX_ENOMEM))
      abort();
    return;
  }
  int m = dtx__filter_match(f, doc);
  if (m != 0 && m != 1)
    abort();
  if (dtx__filter_match(f, doc) != m) /* matching has no side effects */
    abort();
  m = dtx__filter_match(f, spec);
  if (m != 0 && m != 1)
    abort();
  dtx__filter_free(f);
}

static void try_sort_project(const json_t *spec, const json_t *doc) {
  if (dtx__sort_check(spec) == 0) {
    int c = dtx__sort_cmp(spec, doc, doc);
    if (c != 0)
      abort();
    json_t *arr = json_pack("[O,O,O]", doc, spec, doc);
    if (arr && dtx__sort_array(arr, spec) != 0)
      abort();
    json_decref(arr);
  }
  if (dtx__projection_check(spec) == 0) {
    json_t *out = NULL;
    if (dtx__project(doc, spec, &out) == 0 && !out)
      abort();
    json_decref(out);
  }
}

static void try_all(const json_t *spec, const json_t *doc) {
  try_filter(spec, doc);
  try_sort_project(spec, doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pair(data, size, try_all);
  return 0;
}
