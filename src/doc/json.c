/* json.c -- JSON text in and out of the document layer.
 *
 * Every document, filter and update that arrives as text (CLI arguments,
 * the SQLite backend's stored rows) is parsed here, and every stored or
 * printed document is serialised here, so strictness is decided in one
 * place: duplicate keys, \u0000, invalid UTF-8, trailing garbage and
 * integers outside int64 are all refused rather than silently altered.
 * Serialisation is compact and keeps each object's key order (jansson 2.14
 * keeps insertion order), because MongoDB's object equality is order
 * sensitive and a round trip must not change a document's meaning.
 */
#include "doc/doc.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>

/* jansson already rejects integers that do not fit json_int_t ("too big
 * integer"), duplicate keys (with JSON_REJECT_DUPLICATES) and \u0000
 * (without JSON_ALLOW_NUL); its error carries the position. */
int dtx__json_parse(const char *text, json_t **out) {
  *out = NULL;
  if (!text)
    return dtx__err(DTX_EBADJSON, "line 0 col 0: no input");
  json_error_t e;
  json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &e);
  if (!v) {
    if (json_error_code(&e) == json_error_out_of_memory)
      return dtx__err(DTX_ENOMEM, "out of memory parsing JSON");
    return dtx__err(DTX_EBADJSON, "line %d col %d: %s", e.line, e.column,
                    e.text);
  }
  *out = v;
  return 0;
}

/* Reals are written with 17 significant digits and always carry a '.' or
 * exponent, so integers and doubles survive a round trip as themselves. */
char *dtx__json_dump(const json_t *v) {
  if (!v)
    return NULL;
  return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Sorted keys: the stores keep key order, but a digest must not depend on
 * it (two writers building one document in another order are one
 * document to every reader). */
int dtx__json_digest(const json_t *v, char out[17]) {
  char *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
  uint64_t h = 14695981039346656037ULL; /* FNV-1a 64 offset basis */
  out[0] = '\0';
  if (!t)
    return DTX_ENOMEM;
  for (const char *c = t; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ULL; /* FNV prime */
  snprintf(out, 17, "%016llx", (unsigned long long)h);
  free(t);
  return 0;
}
