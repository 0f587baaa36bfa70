/* fuzz_cron.c -- libFuzzer target for the cron parser (util/cron.h): any
 * text parses or fails with DTX_EINVAL; a parsed expression's next fire
 * is -1 or a matching whole minute after the start, and the next one
 * from just before it is itself.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doctx.h"
#include "util/cron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > DTX__CRON_MAX + 16)
    return 0;
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = 0;
  dtx__cron_t c;
  int rc = dtx__cron_parse(text, &c);
  if (rc && rc != DTX_EINVAL)
    abort();
  if (rc == 0) {
    int64_t after = 1767225600000LL + (int64_t)(size * 7919) * 60000;
    int64_t n = dtx__cron_next(&c, after, 400);
    if (n != -1 && (n <= after || !dtx__cron_matches(&c, n) ||
                    dtx__cron_next(&c, n - 1, 400) != n))
      abort();
  }
  free(text);
  return 0;
}
