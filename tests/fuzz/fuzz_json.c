/* fuzz_json.c -- libFuzzer target for the JSON text layer.
 *
 * Any input that dtx__json_parse accepts must dump, parse back, compare
 * equal (json_equal and dtx__value_cmp) and dump to the identical text:
 * the store depends on documents surviving that round trip unchanged.
 * Inputs it refuses must be refused cleanly (DTX_EBADJSON, no leak). */
#include "doc/doc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  json_t *v = NULL;
  int rc = dtx__json_parse(text, &v);
  free(text);
  if (rc) {
    if (v || (rc != DTX_EBADJSON && rc != DTX_ENOMEM))
      abort();
    return 0;
  }
  char *s1 = dtx__json_dump(v);
  if (!s1)
    abort();
  json_t *w = NULL;
  if (dtx__json_parse(s1, &w) != 0)
    abort();
  if (!json_equal(v, w) || dtx__value_cmp(v, w) != 0 ||
      dtx__value_cmp(w, v) != 0 || dtx__value_cmp(v, v) != 0)
    abort();
  char *s2 = dtx__json_dump(w);
  if (!s2 || strcmp(s1, s2) != 0)
    abort();
  free(s1);
  free(s2);
  json_decref(v);
  json_decref(w);
  return 0;
}
