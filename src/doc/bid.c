/* bid.c -- _id validation on BSON values and ObjectId generation (id.c's
 * counterpart; bproj.h).
 *
 * Which types an _id may have: the manual's "Field Names" ("The _id
 * field may contain values of any BSON data type, other than an array,
 * regex, or undefined").  For the values JSON has, the rules and details
 * are id.c's: strings of 1 to 256 bytes, objects whose field names at any
 * depth neither start with '$' nor contain '.', at most about 1 KiB (the
 * same estimate as id.c, so both engines accept the same objects).  The
 * size limits keep every backend's key for an _id short; BSON's own
 * variable-length types get the same bound (deviation from MongoDB, which
 * bounds an _id only by the index key limit): symbols and code as
 * strings, binData up to 256 bytes, code with scope as an object.
 */
#include "doc/bproj.h"

#include "util/err.h"

#include <string.h>

#define ID_STR_MAX 256
#define ID_OBJ_MAX 1024

/* id.c's obj_names_ok over BSON: the same walk and the same size
 * estimate (2 per container, a name's bytes + 4, a string's bytes, 24 for
 * anything else). */
static int obj_names_ok(const dtx__bval_t *v, int depth, size_t *size,
                        const char **bad) {
  if (depth > 32) {
    *bad = "(nested too deeply)";
    return 0;
  }
  *size += 2;
  if (v->type == BSON_TYPE_DOCUMENT || v->type == BSON_TYPE_ARRAY) {
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(v, &len);
    dtx__belem_t e;
    int obj = v->type == BSON_TYPE_DOCUMENT;
    while (dtx__belem_next(d, len, &off, &e)) {
      if (obj && (e.key[0] == '$' || memchr(e.key, '.', e.keylen))) {
        *bad = e.key;
        return 0;
      }
      if (obj)
        *size += e.keylen + 4;
      if (!obj_names_ok(&e.v, depth + 1, size, bad))
        return 0;
    }
  } else if (v->type == BSON_TYPE_UTF8) {
    uint32_t n;
    dtx__bval_str(v, &n);
    *size += n;
  } else {
    *size += 24;
  }
  return 1;
}

/* The check itself; raise says whether to record a detail. */
static int id_check(const dtx__bval_t *id, int raise) {
#define FAIL(...) (raise ? dtx__err(DTX_EINVAL, __VA_ARGS__) : DTX_EINVAL)
  uint32_t n;
  switch ((int)id->type) {
  case BSON_TYPE_EOD:
    return FAIL("_id is missing");
  case BSON_TYPE_ARRAY:
    return FAIL("_id cannot be an array");
  case BSON_TYPE_REGEX:
    return FAIL("_id cannot be a regular expression");
  case BSON_TYPE_UNDEFINED:
    return FAIL("_id cannot be undefined");
  case BSON_TYPE_UTF8:
  case BSON_TYPE_SYMBOL:
  case BSON_TYPE_CODE:
    dtx__bval_str(id, &n);
    if (n == 0 || n > ID_STR_MAX)
      return FAIL("_id string must be 1 to %d bytes long", ID_STR_MAX);
    return 0;
  case BSON_TYPE_BINARY:
    if (id->len - 5 > ID_STR_MAX)
      return FAIL("_id binData must be at most %d bytes long", ID_STR_MAX);
    return 0;
  case BSON_TYPE_CODEWSCOPE:
    if (id->len > ID_OBJ_MAX)
      return FAIL("_id code with scope is longer than %d bytes", ID_OBJ_MAX);
    return 0;
  case BSON_TYPE_DOCUMENT: {
    size_t size = 0;
    const char *bad = NULL;
    if (!obj_names_ok(id, 0, &size, &bad))
      return FAIL("_id object field name '%s' may not start with '$' or "
                  "contain '.'",
                  bad);
    if (size > ID_OBJ_MAX)
      return FAIL("_id object is longer than %d bytes", ID_OBJ_MAX);
    return 0;
  }
  default: /* numbers, null, bool, ObjectId, Date, Timestamp, MinKey, ... */
    return 0;
  }
#undef FAIL
}

int dtx__bid_check(const dtx__bval_t *id) {
  static const dtx__bval_t missing = {0};
  return id_check(id ? id : &missing, 1);
}

int dtx__bid_valid(const dtx__bval_t *id) { return id && !id_check(id, 0); }

void dtx__bid_new(bson_oid_t *out) { bson_oid_init(out, NULL); }
