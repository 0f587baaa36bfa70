/* assert.c -- the failure of a DTX_ASSERT (util/assert.h): one line on
 * stderr naming the invariant, then abort(). */
#include "util/assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int dtx__assert_debug = DTX_DEBUG;

void dtx__assert_fail(const char *id, const char *cond, const char *file,
                      int line) {
  /* The path from src/ on: the build's absolute prefix says nothing. */
  const char *s = strstr(file, "/src/");
  fprintf(stderr, "doctx: assertion failed: %s: %s (%s:%d)\n", id, cond,
          s ? s + 1 : file, line);
  fflush(stderr);
  abort();
}
