/* fuzz_bschema.c -- differential libFuzzer target for $jsonSchema and the
 * collection rules on BSON (src/doc/bschema.c, brules.c) against the
 * json_t engine (schema.c, rules.c), through the bridge.
 *
 * The input is "<schema JSON>\n<document JSON>" (fuzz_pair.h).  The text
 * is judged as a schema (compile and match), as a validator and a delete
 * guard, and as a transition rule (the document as before and after, and
 * as an insert and a delete).  Both engines must give the same code and
 * detail, the same answer and the same reason (bschemadiff.h: integers as
 * the bridge writes them and as int64); a difference aborts. */
#include "../common/bschemadiff.h"
#include "fuzz_pair.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void must_agree(int verdict, const bsd_out_t *o) {
  if (verdict == BSD_DIFF) {
    fprintf(stderr, "bschema differential: %s\n", o->why);
    abort();
  }
}

static void try_all(const json_t *spec, const json_t *doc) {
  bsd_out_t o;
  must_agree(bsd_run(spec, doc, &o), &o);
  json_t *r = json_pack("{s:O,s:O}", "validator", spec, "delete_guard", spec);
  json_t *t = json_pack("{s:O}", "transition", spec);
  if (r)
    for (int bypass = 0; bypass < 2; bypass++) {
      must_agree(bsd_rules_run(r, doc, doc, bypass, &o), &o);
      must_agree(bsd_rules_run(r, doc, NULL, bypass, &o), &o);
    }
  if (t) {
    must_agree(bsd_rules_run(t, doc, doc, 0, &o), &o);
    must_agree(bsd_rules_run(t, NULL, doc, 0, &o), &o);
    must_agree(bsd_rules_run(t, doc, NULL, 0, &o), &o);
  }
  json_decref(r);
  json_decref(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pair(data, size, try_all);
  return 0;
}
