/* audit.c -- the audit frame: dtx_audit runs every registered pattern's
 * audit (kit.h, dtx__pattern_t.audit) and assembles one report:
 *   {"ok": bool,
 *    "findings": [{"pattern", "kind", "detail"}...],   every pattern's
 *    "unsettled": n,                                   summed
 *    "patterns": {NAME: {"summary": "one line", counts...}},
 *    ...}                                              (see transfer/audit.c
 *                                                       for its top-level
 *                                                       counts)
 * A pattern's audit only reads; it adds findings and counts through the
 * helpers below.  One bad document never stops the audit: a pattern
 * whose audit stops at an error of its own (a document it cannot judge,
 * a name no collection can have) gets an "audit_error" finding naming
 * it, and every other pattern is still audited -- so the report is never
 * "clean" then, and never hides what the other patterns found.  Only a
 * store that keeps failing (transient errors past the retry policy, out
 * of memory) ends the audit with that error and no report: an audit that
 * could read nothing must not report as if it had.  A stored document
 * the store cannot read (DTX_ECORRUPT: bytes that are no document) is
 * read past (store.h, "corrupt stored documents"), absent to every
 * pattern's checks, and is a "corrupt_document" finding of its own, under
 * the pattern "store": so the audit is never clean then either, and the
 * other documents are all still judged. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h" /* dtx__corrupt_collect */
#include "txn/kit/kit.h"
#include "util/assert.h"
#include "util/err.h"

void dtx__audit_finding(dtx__audit_t *a, const char *kind, const char *fmt,
                        ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_array_append_new(a->findings,
                        json_pack("{s:s,s:s,s:s}", "pattern", a->pattern,
                                  "kind", kind, "detail", msg));
}

/* The exact decimal of v into buf (at least 41 bytes). */
const char *dtx__wide_str(__int128 v, char *buf) {
  char tmp[48];
  size_t n = 0;
  unsigned __int128 u = v < 0 ? -(unsigned __int128)v : (unsigned __int128)v;
  do {
    tmp[n++] = (char)('0' + (int)(u % 10));
    u /= 10;
  } while (u);
  size_t k = 0;
  if (v < 0)
    buf[k++] = '-';
  while (n)
    buf[k++] = tmp[--n];
  buf[k] = '\0';
  DTX_ASSERT(k < 41, "audit.wide"); /* 39 digits and a sign */
  return buf;
}

/* v as JSON: an integer while it fits int64, else its exact decimal as a
 * string (a sum of tampered balances can pass int64; never wrap it). */
json_t *dtx__wide_json(__int128 v) {
  char buf[48];
  if (v >= INT64_MIN && v <= INT64_MAX)
    return json_integer((json_int_t)v);
  return json_string(dtx__wide_str(v, buf));
}

void dtx__audit_set(dtx__audit_t *a, const char *key, json_t *value) {
  json_object_set_new(a->part, key, value);
}

const json_t *dtx__audit_part(const dtx__audit_t *a) { return a->part; }

void dtx__audit_summary(dtx__audit_t *a, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  json_object_set_new(a->part, "summary", json_string(line));
}

static void add_int(json_t *obj, const char *key, int64_t n) {
  json_t *v = json_object_get(obj, key);
  json_object_set_new(obj, key,
                      json_integer(json_integer_value(v) + (json_int_t)n));
}

void dtx__audit_unsettled(dtx__audit_t *a, int64_t n) {
  add_int(a->part, "unsettled", n);
  add_int(a->report, "unsettled", n);
}

/* The pattern's validator for coll, compiled (NULL: it declares none). */
static int validator_of(const dtx__audit_t *a, const char *coll,
                        dtx__rules_t **out) {
  *out = NULL;
  for (const dtx__rules_def_t *d = a->pat ? a->pat->rules : NULL; d && d->coll;
       d++) {
    if (strcmp(d->coll, coll) != 0 || !d->validator)
      continue;
    json_t *v = json_loads(d->validator, 0, NULL);
    json_t *spec = v ? json_pack("{s:o}", "validator", v) : NULL;
    int rc = spec ? dtx__rules_compile(spec, out)
                  : dtx__err(DTX_EINVAL, "pattern %s: the validator of %s is "
                             "not JSON", a->pattern, coll);
    json_decref(spec);
    return rc;
  }
  return 0;
}

/* Reports doc as a finding when the pattern's validator refuses it, or
 * (when it passes) the pattern's shape check for coll (kit.h,
 * dtx__shape_def_t: fields that must go together).  The store checks
 * writes only (and not those made with bypass_validation, or before the
 * rules were installed), so the audit checks what is there. */
static void check_shape(dtx__audit_t *a, const dtx__rules_t *r,
                        const dtx__shape_def_t *s, const char *coll,
                        const json_t *doc) {
  char why[256], msg[512];
  size_t i;
  const json_t *f;
  int refused = r && dtx__doc_check_write(r, coll, NULL, doc, 0) != 0;
  if (refused)
    dtx__audit_finding(a, "bad_shape", "%s", dtx_errdetail());
  dtx__err_clear();
  if (refused || !s || s->check(doc, why, sizeof why) == 0)
    return;
  /* Once, though a pattern may load a collection twice (before and
   * after its other reads, to tell moving items from broken ones). */
  snprintf(msg, sizeof msg, "%s %s: %s", coll,
           dtx__str(doc, "_id") ? dtx__str(doc, "_id") : "?", why);
  json_array_foreach(a->findings, i, f) {
    if (dtx__str_is(f, "detail", msg))
      return;
  }
  dtx__audit_finding(a, "shape", "%s", msg);
}

int dtx__audit_load(dtx__audit_t *a, const char *coll, json_t **map) {
  json_t *docs = NULL, *d;
  dtx__rules_t *shape = NULL;
  const dtx__shape_def_t *fits = dtx__kit_shape_of(a->pat, coll);
  size_t i;
  int rc;
  *map = NULL;
  if ((rc = validator_of(a, coll, &shape)))
    return rc;
  rc = dtx__kit_read(a->st, &(dtx__kit_read_t){.coll = coll}, &docs);
  if (rc) {
    dtx__rules_free(shape);
    return rc;
  }
  *map = json_object();
  json_array_foreach(docs, i, d) {
    const char *id = json_string_value(json_object_get(d, "_id"));
    if (shape || fits)
      check_shape(a, shape, fits, coll, d);
    if (id) {
      json_object_set(*map, id, d);
    } else {
      char *text = json_dumps(json_object_get(d, "_id"), JSON_ENCODE_ANY);
      dtx__audit_finding(a, "bad_id", "%s has a document whose _id %s is "
                         "not a string: the audit cannot check it", coll,
                         text ? text : "?");
      free(text);
    }
  }
  json_decref(docs);
  dtx__rules_free(shape);
  return 0;
}

int dtx_audit(dtx_store_t *st, int flags, json_t **report) {
  return dtx_audit_acked(st, flags, NULL, report);
}

int dtx_audit_acked(dtx_store_t *st, int flags, const json_t *acked,
                    json_t **report) {
  dtx__call_t c;
  int rc = 0;
  *report = NULL;
  dtx__call_begin(&c, 0);
  if (acked && !json_is_array(acked))
    return dtx__call_end(
        &c, dtx__err(DTX_EINVAL, "acknowledged transfers must be a JSON array"));
  dtx__audit_t a = {.st = st, .flags = flags, .acked = acked};
  a.report = json_pack("{s:b,s:[],s:i,s:{}}", "ok", 0, "findings", "unsettled",
                       0, "patterns");
  if (!a.report)
    return dtx__call_end(&c, DTX_ENOMEM);
  a.findings = json_object_get(a.report, "findings");
  json_t *corrupt = json_array();
  if (!corrupt) {
    json_decref(a.report);
    return dtx__call_end(&c, DTX_ENOMEM);
  }
  dtx__corrupt_collect(corrupt);
  for (size_t i = 0; dtx__patterns[i] && rc == 0; i++) {
    const dtx__pattern_t *p = dtx__patterns[i];
    if (!p->audit)
      continue;
    a.pattern = p->name;
    a.pat = p;
    a.part = json_object();
    json_object_set_new(json_object_get(a.report, "patterns"), p->name,
                        a.part);
    int prc = p->audit(&a);
    if (prc && (dtx__transient(prc) || prc == DTX_ENOMEM)) {
      rc = dtx__err_wrap(prc, "audit of %s", p->name);
    } else if (prc) {
      dtx__audit_finding(&a, "audit_error", "the audit of %s stopped: %s: "
                         "%s; its other checks were not made", p->name,
                         dtx_errname(prc), dtx_errdetail());
      if (!json_object_get(a.part, "summary"))
        dtx__audit_summary(&a, "stopped at an error (see findings)");
      dtx__err_clear();
    }
  }
  dtx__corrupt_collect(NULL);
  size_t k;
  json_t *e;
  a.pattern = "store";
  json_array_foreach(corrupt, k, e) {
    dtx__audit_finding(&a, "corrupt_document", "%s: the audit read past it",
                       json_string_value(e));
  }
  json_decref(corrupt);
  if (rc) {
    json_decref(a.report);
    return dtx__call_end(&c, rc);
  }
  size_t nfind = json_array_size(a.findings);
  json_object_set_new(a.report, "ok", json_boolean(nfind == 0));
  *report = a.report;
  return dtx__call_end(
      &c, nfind ? dtx__err(DTX_EAUDIT, "%zu finding(s)", nfind) : 0);
}
