/* bkeyvals.c -- index keys in today's stored form (json_t tuples, as
 * keys.c gives them) read straight from a document's BSON bytes (bdoc.h).
 *
 * Until store format 5 the backends keep dtx__index_keys' tuples, and the
 * write path on bytes (docs/engine.md, "Stages", 2b step 1) would still
 * have to bridge the whole document just to compute them.  This file gives
 * the very same answer while bridging only the values that end up in a
 * key: bkeys.c's walk (dtx__bindex_walk, keys.c's rules on bytes) finds
 * each tuple as views into the document; each view is bridged
 * (dtx__bval_to_json, exactly what dtx__bson_to_json makes of it there),
 * a missing field becomes null, and duplicates are dropped as keys.c
 * drops them: by dtx__value_cmp on the bridged tuples, first one kept.
 *
 * Why the walks agree on bridged values: the json_t walk descends only
 * into JSON objects, and the bridge makes objects of BSON documents and
 * of the types JSON lacks ({"$oid": ...}, {"$date": ...}).  An index path
 * never has a segment starting with '$' (dtx__path_check), so the json_t
 * walk finds nothing inside those wrappers, as the BSON walk finds
 * nothing inside a non-document.  Arrays are arrays on both sides.
 *
 * Deduplication is not done on bytes (dtx__bkey_encode) because equality
 * differs after the bridge: NumberDecimal("1") equals 1 for
 * dtx__bval_cmp but its bridged {"$numberDecimal": "1"} is an object,
 * not the number 1, for dtx__value_cmp, and keys.c keeps both. */
#include "doc/bdoc.h"
#include "util/err.h"

#include <stdlib.h>

typedef struct tctx {
  const dtx__index_spec_t *spec;
  json_t *keys; /* array of tuples */
} tctx_t;

static int oom(void) {
  return dtx__err(DTX_ENOMEM, "out of memory extracting index keys");
}

static int emit(void *arg, const dtx__bval_t *vals) {
  tctx_t *c = arg;
  json_t *t = json_array();
  if (!t)
    return oom();
  for (size_t i = 0; i < c->spec->nfields; i++) {
    json_t *v = NULL;
    int rc = 0;
    if (vals[i].type == BSON_TYPE_EOD) /* missing: null, as keys.c */
      v = json_null();
    else if ((rc = dtx__bval_to_json(&vals[i], &v)) != 0) {
      json_decref(t);
      return rc == DTX_ENOMEM ? oom() : rc;
    }
    if (json_array_append_new(t, v)) {
      json_decref(t);
      return oom();
    }
  }
  if (json_array_append_new(c->keys, t))
    return oom();
  return 0;
}

int dtx__bindex_key_tuples(const dtx__index_spec_t *s, const uint8_t *doc,
                           uint32_t len, json_t **out, int *multikey) {
  if (multikey)
    *multikey = 0;
  if (!out)
    return dtx__err(DTX_EINVAL, "index keys: NULL out-parameter");
  *out = NULL;
  tctx_t c = {s, json_array()};
  if (!c.keys)
    return oom();
  int found = 0;
  int rc = dtx__bindex_walk(s, doc, len, emit, &c, &found);
  if (!rc && s->sparse && !found)
    json_array_clear(c.keys);
  if (!rc)
    rc = dtx__index_keys_dedupe(&c.keys);
  if (rc) {
    json_decref(c.keys);
    return rc;
  }
  if (multikey)
    *multikey = dtx__index_keys_multikey(c.keys);
  *out = c.keys;
  return 0;
}
