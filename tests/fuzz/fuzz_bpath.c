/* fuzz_bpath.c -- differential: the json_t engine's paths and order
 * against the BSON engine's (bdoc.h), through the bridge.
 *
 * Input: "<path>\n<document JSON>".  The document goes over the bridge
 * and back (it must come back the same); when the path is valid
 * (dtx__path_check) it is walked in the three leaf modes by both engines
 * and read by both gets (tests/common/bdiff.c compares every visit, the
 * positional index, and walks stopped at each visit); and the values of
 * the document's top level are compared pairwise by both orders.  Any
 * disagreement aborts. */
#include "../common/bdiff.c"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void order_pairs(const json_t *doc) {
  const json_t *v[16];
  size_t n = 0;
  if (json_is_object(doc)) {
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)doc, k, x) if (n < 16) v[n++] = x;
  } else {
    size_t i;
    json_t *x;
    json_array_foreach(doc, i, x) if (n < 16) v[n++] = x;
  }
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      int a = dtx__value_cmp(v[i], v[j]), b = 9;
      if (bdiff_cmp(v[i], v[j], &b) == 0 && a != b) {
        fprintf(stderr, "order: json %d bson %d\n", a, b);
        abort();
      }
      if (bdiff_bracket(v[i]) != dtx__value_bracket(v[i]))
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char *nl = strchr(text, '\n');
  json_t *doc = NULL;
  if (!nl || dtx__json_parse(nl + 1, &doc) ||
      !(json_is_object(doc) || json_is_array(doc))) {
    json_decref(doc);
    free(text);
    return 0;
  }
  *nl = '\0';
  bson_t b = BSON_INITIALIZER;
  if (dtx__bson_from_json(doc, &b) == 0) {
    if (!bdiff_same(doc, bson_get_data(&b), b.len)) {
      fprintf(stderr, "the bridge's round trip changed the document\n");
      abort();
    }
    char why[2048];
    if (dtx__path_check(text, DTX_EBADQUERY) == 0) {
      for (int m = DTX__LEAF_WHOLE; m <= DTX__LEAF_ELEMS; m++)
        if (!bdiff_walk(doc, text, m, why, sizeof why)) {
          fprintf(stderr, "%s\n", why);
          abort();
        }
    }
    if (bdiff_get(doc, text, why, sizeof why) == 0) {
      fprintf(stderr, "%s\n", why);
      abort();
    }
    order_pairs(doc);
  }
  bson_destroy(&b);
  json_decref(doc);
  free(text);
  return 0;
}
