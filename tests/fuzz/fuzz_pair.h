/* fuzz_pair.h -- the input shape shared by fuzz targets that take a spec
 * and a document: "<spec JSON>\n<document JSON>" (no newline: the
 * document is {}).  fuzz_pair() parses both and, when both are JSON,
 * calls fn with them (borrowed). */
#ifndef DTX_FUZZ_PAIR_H
#define DTX_FUZZ_PAIR_H

#include "doc/doc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline void fuzz_pair(const uint8_t *data, size_t size,
                             void (*fn)(const json_t *spec,
                                        const json_t *doc)) {
  char *text = malloc(size + 1);
  if (!text)
    return;
  memcpy(text, data, size);
  text[size] = '\0';
  char *nl = strchr(text, '\n');
  const char *doc_text = "{}";
  if (nl) {
    *nl = '\0';
    doc_text = nl + 1;
  }
  json_t *spec = NULL, *doc = NULL;
  if (dtx__json_parse(text, &spec) == 0 &&
      dtx__json_parse(doc_text, &doc) == 0)
    fn(spec, doc);
  json_decref(spec);
  json_decref(doc);
  free(text);
}

#endif
