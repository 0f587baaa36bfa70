/* fuzz_update.c -- libFuzzer target for the update compiler and applier.
 *
 * The input is "<update JSON>\n<document JSON>" (split at the first
 * newline; without one the same text serves as both).  The first byte's low
 * bit chooses is_insert.  Beyond not crashing or leaking, the target checks
 * the applier's contract: the input document is never modified; on error
 * the output is NULL; on success the output is an object that keeps the
 * input's _id, and "changed" is 0 exactly when the output is identical
 * text.  The document text is also fed to dtx__upsert_seed() as a filter.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include "fuzz_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *dump(const json_t *v) { return dtx__json_dump(v); }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const char *nl = memchr(text, '\n', size);
  size_t ulen = nl ? (size_t)(nl - text) : size;
  const char *dtext = nl ? nl + 1 : text;
  size_t dlen = nl ? size - ulen - 1 : size;
  json_t *spec = fuzz_parse(text, ulen), *doc = fuzz_parse(dtext, dlen);
  json_t *seed = NULL, *out = NULL;
  dtx__update_t *u = NULL;
  int is_insert = size ? data[0] & 1 : 0;

  if (doc && dtx__upsert_seed(doc, &seed) == 0 && !json_is_object(seed))
    abort();
  json_decref(seed);

  if (spec && dtx__update_compile(spec, &u) == 0) {
    json_decref(spec); /* the compiled update must not need it */
    spec = NULL;
    if (json_is_object(doc)) {
      char *before = dump(doc), *after;
      int changed = -1;
      int rc =
          dtx__update_apply(u, doc, is_insert, 1700000000000LL, &out, &changed);
      after = dump(doc);
      if (!before || !after || strcmp(before, after))
        abort(); /* the input must stay untouched */
      if (rc) {
        if (out || changed != 0)
          abort();
      } else {
        char *o = dump(out);
        json_t *id = json_object_get(doc, "_id");
        if (!json_is_object(out) || !o)
          abort();
        if (changed != (strcmp(o, before) != 0))
          abort();
        if (id && !json_equal(id, json_object_get(out, "_id")))
          abort();
        free(o);
      }
      free(before);
      free(after);
    }
  }
  json_decref(out);
  dtx__update_free(u);
  json_decref(spec);
  json_decref(doc);
  return 0;
}
