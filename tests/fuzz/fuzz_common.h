/* fuzz_common.h -- what the libFuzzer targets share: reading a slice of
 * the input as JSON with the project's own parser.  Header-only (static),
 * as each target is one executable. */
#ifndef DTX_FUZZ_COMMON_H
#define DTX_FUZZ_COMMON_H

#include "doc/doc.h"

#include <stdlib.h>
#include <string.h>

/* Parses n bytes with the project's parser (text must be NUL-terminated,
 * so the slice is copied; an embedded NUL simply ends it).  NULL when the
 * text is not JSON. */
static inline json_t *fuzz_parse(const char *p, size_t n) {
  char *text = malloc(n + 1);
  json_t *v = NULL;
  if (!text)
    return NULL;
  memcpy(text, p, n);
  text[n] = '\0';
  if (dtx__json_parse(text, &v))
    v = NULL;
  free(text);
  return v;
}

#endif
