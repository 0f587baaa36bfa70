/* bupdate_shim.c -- TEMPORARY weak stand-in for dtx__bson_check
 * (bdoc.h, "the stored-body check", bcheck.c: not on any branch yet when
 * bupdate merged bfilter, whose compile calls it).  libbson's validation
 * stands in: lengths, UTF-8, no NUL in names; not duplicates or the
 * depth.  The real one overrides this weak definition at link time:
 * DELETE THIS FILE when bcheck.c lands. */
#include "doc/bdoc.h"
#include "util/err.h"

__attribute__((weak)) int dtx__bson_check(const uint8_t *data, size_t len,
                                          int code, const char *what) {
  bson_t b;
  bson_error_t e;
  if (len > DTX__DOC_MAX || !bson_init_static(&b, data, len))
    return dtx__err(code, "%s is not a valid document: bad length at byte 0",
                    what);
  if (!bson_validate_with_error(&b, BSON_VALIDATE_UTF8 |
                                        BSON_VALIDATE_UTF8_ALLOW_NULL,
                                &e))
    return dtx__err(code, "%s is not a valid document: %s", what, e.message);
  return 0;
}
