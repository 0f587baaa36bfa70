/* fuzz_schema.c -- libFuzzer target for the $jsonSchema compiler and
 * matcher, collection rules and the write check (src/doc/schema.c,
 * rules.c).
 *
 * The input is "<schema or rule JSON>\n<document JSON>".  Whatever the
 * text, compiling must succeed or fail with DTX_EBADQUERY (or NOMEM) and
 * leave nothing behind; matching must return 0 or 1, write a
 * NUL-terminated reason that fits its buffer, and agree with itself; the
 * write check must return 0, DTX_EINVAL or DTX_EVALIDATION. */
#include "doc/doc.h"
#include "fuzz_pair.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void try_schema(const json_t *spec, const json_t *doc) {
  dtx__schema_t *s = NULL;
  int rc = dtx__schema_compile(spec, &s);
  if (rc) {
    if (s || (rc != DTX_EBADQUERY && rc != DTX_ENOMEM))
      abort();
    return;
  }
  char why[64];
  memset(why, 'x', sizeof why);
  int m = dtx__schema_match(s, doc, why, sizeof why);
  if ((m != 0 && m != 1) || !memchr(why, '\0', sizeof why))
    abort();
  if (dtx__schema_match(s, doc, NULL, 0) != m)
    abort();
  dtx__schema_free(s);
}

static void try_rules(const json_t *spec, const json_t *doc) {
  json_t *r = json_pack("{s:O,s:O}", "validator", spec, "delete_guard", spec);
  dtx__rules_t *rules = NULL;
  int rc = r ? dtx__rules_compile(r, &rules) : DTX_ENOMEM;
  json_decref(r);
  if (rc) {
    if (rules || (rc != DTX_EBADQUERY && rc != DTX_ENOMEM))
      abort();
    return;
  }
  for (int bypass = 0; bypass < 2; bypass++) {
    rc = dtx__doc_check_write(rules, "c", doc, doc, bypass);
    if (rc != 0 && rc != DTX_EINVAL && rc != DTX_EVALIDATION)
      abort();
    rc = dtx__doc_check_write(rules, "c", doc, NULL, bypass);
    if (rc != 0 && rc != DTX_EVALIDATION)
      abort();
  }
  dtx__rules_free(rules);
}

static void try_all(const json_t *spec, const json_t *doc) {
  try_schema(spec, doc);
  try_rules(spec, doc);
  (void)dtx__depth_check(doc, DTX_EINVAL, "doc");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pair(data, size, try_all);
  return 0;
}
