/* fuzz_bson_check.c -- libFuzzer target for the stored-body check
 * (dtx__bson_check) on raw bytes.
 *
 * When the check accepts, libbson's bson_validate (with its UTF-8 flags)
 * must accept too, a walk over every element (libbson's iterator, and our
 * raw reader dtx__belem_next once it is linked in) must stay inside the
 * bytes, and the writer must print it.  The input is copied to a buffer of
 * exactly its size, so any read past the end is an ASan report. */
#include "doc/bdoc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* What the check accepts, the trusting raw reader (bvalue.c) must walk
 * without leaving the bytes. */
static void raw_walk(const uint8_t *d, uint32_t len, int depth) {
  if (depth > DTX_MAX_DEPTH)
    return;
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e)) {
    if (e.v.data < d || e.v.data + e.v.len > d + len)
      abort();
    if (e.v.type == BSON_TYPE_DOCUMENT || e.v.type == BSON_TYPE_ARRAY)
      raw_walk(e.v.data, e.v.len, depth + 1);
  }
}

static size_t iter_walk(bson_iter_t *it, int depth) {
  size_t n = 0;
  while (bson_iter_next(it)) {
    n++;
    bson_iter_t child;
    if ((BSON_ITER_HOLDS_DOCUMENT(it) || BSON_ITER_HOLDS_ARRAY(it)) &&
        bson_iter_recurse(it, &child))
      n += iter_walk(&child, depth + 1);
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *d = malloc(size ? size : 1);
  if (!d)
    return 0;
  memcpy(d, data, size);
  if (dtx__bson_check(d, size, DTX_EINVAL, "fuzz") == 0) {
    bson_t b;
    size_t off;
    if (!bson_init_static(&b, d, size))
      abort();
    if (!bson_validate(&b, BSON_VALIDATE_UTF8 | BSON_VALIDATE_UTF8_ALLOW_NULL,
                       &off))
      abort();
    bson_iter_t it;
    if (!bson_iter_init(&it, &b))
      abort();
    iter_walk(&it, 1);
    raw_walk(d, (uint32_t)size, 1);
    size_t n = 0;
    char *t = dtx__ejson_write(d, (uint32_t)size, 1, &n);
    if (!t)
      abort();
    free(t);
  } else if (strncmp(dtx_errdetail(), "fuzz is not a valid document: ", 30))
    abort();
  free(d);
  return 0;
}
