/* fuzz_arrayfilters.c -- libFuzzer target for positional updates and
 * arrayFilters.
 *
 * The input is "<filter>\n<update>\n<arrayFilters>\n<document>" (JSON each).
 * The update is compiled with the arrayFilters and bound to the compiled
 * filter (for the positional $), then applied.  Compilation succeeds or
 * fails with DTX_EBADUPDATE; applying never modifies its input, gives
 * NULL on error, and on success an object with the input's _id.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include "fuzz_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *p = (const char *)data, *end = p + size;
  json_t *part[4] = {0};
  for (int i = 0; i < 4; i++) {
    const char *nl = i < 3 ? memchr(p, '\n', (size_t)(end - p)) : NULL;
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    part[i] = fuzz_parse(p, n);
    if (!nl) {
      if (i < 3)
        goto out;
      break;
    }
    p = nl + 1;
  }
  dtx__filter_t *f = NULL;
  dtx__update_t *u = NULL;
  if (!json_is_object(part[0]) || dtx__filter_compile(part[0], &f))
    goto out;
  int rc = dtx__update_compile_ex(part[1], part[2], &u);
  if (rc && rc != DTX_EBADUPDATE && rc != DTX_ENOMEM && rc != DTX_EINVAL)
    abort();
  if (rc == 0 && json_is_object(part[3])) {
    dtx__update_bind_filter(u, f);
    char *before = dtx__json_dump(part[3]);
    json_t *res = NULL;
    int changed = -1;
    rc = dtx__update_apply(u, part[3], data[0] & 1, 1700000000000LL, &res,
                           &changed);
    char *after = dtx__json_dump(part[3]);
    if (!before || !after || strcmp(before, after))
      abort();
    if (rc && (res || changed))
      abort();
    if (!rc) {
      json_t *id = json_object_get(part[3], "_id");
      if (!json_is_object(res) ||
          (id && !json_equal(id, json_object_get(res, "_id"))))
        abort();
    }
    json_decref(res);
    free(before);
    free(after);
  }
  dtx__update_free(u);
  dtx__filter_free(f);
out:
  for (int i = 0; i < 4; i++)
    json_decref(part[i]);
  return 0;
}
