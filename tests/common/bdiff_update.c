/* bdiff_update.c -- the BSON leg of the update tables (bdiff_update.h). */
#include "bdiff_update.h"

#include "doc/bupdate.h"
#include "testlib.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why a row is not compared; counted per reason and printed. */
static const char *const reasons[] = {
    "the update is not a JSON object: BSON has no such update",
    "$currentDate {$type:'timestamp'}: each engine's own ordinal counter "
    "(test_bupdate.c covers it)",
    "a double past DBL_MAX: BSON stores Infinity as MongoDB does, json_t "
    "refuses it",
    "$currentDate over the same integer: no change in json_t, a Date "
    "replacing an integer in BSON",
};
#define NREASONS (sizeof reasons / sizeof reasons[0])
static size_t skipped[NREASONS];
static size_t rows, agreed;

/* 1 when some key of the spec's operator documents, or the operator,
 * says the row needs what the BSON engine cannot do yet. */
static int spec_has(const json_t *spec, const char *op) {
  return json_object_get(spec, op) != NULL;
}

static int skip_reason(const dtx_t_bupd_row_t *r) {
  if (!json_is_object(r->spec))
    return 0;
  if (spec_has(r->spec, "$currentDate") && strstr(JS(r->spec), "timestamp"))
    return 1;
  if (r->rc == DTX_EOVERFLOW && r->detail && strstr(r->detail, "not finite"))
    return 2;
  if (spec_has(r->spec, "$currentDate") && r->rc == 0 && !r->changed)
    return 3;
  return -1;
}

/* $currentDate writes a Date where json_t writes the integer ms: each
 * Date of the BSON result must be now, and reads as that integer. */
static int dates_are(const uint8_t *d, uint32_t len, int64_t now) {
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e)) {
    if (e.v.type == BSON_TYPE_DATE_TIME && dtx__bval_int64(&e.v) != now)
      return 0;
    if ((e.v.type == BSON_TYPE_DOCUMENT || e.v.type == BSON_TYPE_ARRAY) &&
        !dates_are(e.v.data, e.v.len, now))
      return 0;
  }
  return 1;
}

static json_t *dates_as_ints(json_t *j, int64_t now) {
  const char *k;
  json_t *v;
  size_t i;
  if (json_is_object(j) && json_object_size(j) == 1 &&
      json_object_get(j, "$date"))
    return json_integer(now);
  if (json_is_object(j))
    json_object_foreach(j, k, v)
        json_object_set_new(j, k, dates_as_ints(v, now));
  else if (json_is_array(j))
    json_array_foreach(j, i, v) json_array_set_new(j, i, dates_as_ints(v, now));
  return json_incref(j);
}

static char *bson_dump(const bson_t *b, int64_t now) {
  json_t *j = NULL;
  if (!dates_are(bson_get_data(b), b->len, now))
    return strdup("(a Date that is not now)");
  if (dtx__bson_to_json(bson_get_data(b), b->len, 0, &j))
    return NULL;
  json_t *k = dates_as_ints(j, now);
  json_decref(j);
  j = k;
  char *s = JDUMP(j);
  json_decref(j);
  return s;
}

void dtx_t_bupdate_leg(const dtx_t_bupd_row_t *r) {
  bson_t spec = BSON_INITIALIZER, doc = BSON_INITIALIZER,
         afs = BSON_INITIALIZER;
  dtx__bupdate_t *u = NULL;
  bson_t *out = NULL;
  int changed = 0, rc, why = skip_reason(r);
  rows++;
  if (why >= 0) {
    skipped[why]++;
    return;
  }
  dtx__bfilter_t *f = NULL;
  dtx__bval_t afv, *afp = NULL;
  REQUIRE(dtx__bson_from_json(r->spec, &spec) == 0);
  REQUIRE(dtx__bson_from_json(r->doc, &doc) == 0);
  if (r->afs) {
    /* a value, so that a non-array is told apart (the bridge holds it) */
    REQUIRE(dtx__bval_from_json(r->afs, &afs, &afv) == 0);
    afp = &afv;
  }
  if (r->filter) {
    bson_t fb = BSON_INITIALIZER;
    REQUIRE(dtx__bson_from_json(r->filter, &fb) == 0);
    REQUIRE(dtx__bfilter_compile(&fb, &f) == 0);
    bson_destroy(&fb);
  }
  rc = dtx__bupdate_compile(bson_get_data(&spec), spec.len, afp, 0, &u);
  bson_destroy(&spec); /* the compiled update keeps its own copy */
  if (rc == 0) {
    dtx__bupdate_bind_filter(u, f);
    rc = dtx__bupdate_apply(u, bson_get_data(&doc), doc.len, r->is_insert,
                            r->now, &out, &changed);
  }
  CHECKF(rc == r->rc, "bson %s[%zu] %s on %s: %s (%s), json_t %s (%s)",
         r->table, r->index, JS(r->spec), JS(r->doc), dtx_errname(rc),
         rc ? dtx_errdetail() : "", dtx_errname(r->rc),
         r->detail ? r->detail : "");
  int ok = rc == r->rc;
  if (rc == r->rc && rc) {
    CHECKF(!strcmp(dtx_errdetail(), r->detail),
           "bson %s[%zu] %s on %s: detail '%s', json_t '%s'", r->table,
           r->index, JS(r->spec), JS(r->doc), dtx_errdetail(), r->detail);
    CHECKF(out == NULL && changed == 0, "bson %s[%zu]: out/changed on error",
           r->table, r->index);
    ok = ok && !strcmp(dtx_errdetail(), r->detail);
  } else if (rc == r->rc) {
    char *got = bson_dump(out, r->now), *want = JDUMP(r->out);
    CHECKF(got && !strcmp(got, want),
           "bson %s[%zu] %s on %s: got %s, json_t "
           "%s",
           r->table, r->index, JS(r->spec), JS(r->doc), got ? got : "NULL",
           want);
    CHECKF(changed == r->changed,
           "bson %s[%zu] %s on %s: changed %d, json_t "
           "%d",
           r->table, r->index, JS(r->spec), JS(r->doc), changed, r->changed);
    ok = got && !strcmp(got, want) && changed == r->changed;
    free(got);
    free(want);
  }
  agreed += ok;
  bson_destroy(out);
  bson_destroy(&doc);
  bson_destroy(&afs);
  dtx__bupdate_free(u);
  dtx__bfilter_free(f);
}

void dtx_t_bupsert_leg(const char *table, size_t i, const json_t *filter,
                       const json_t *spec, int64_t now, int rc_json,
                       const json_t *out_json, const char *detail) {
  bson_t f = BSON_INITIALIZER, s = BSON_INITIALIZER;
  dtx__bupdate_t *u = NULL;
  bson_t *out = NULL;
  rows++;
  REQUIRE(dtx__bson_from_json(filter, &f) == 0);
  REQUIRE(dtx__bson_from_json(spec, &s) == 0);
  int rc = dtx__bupdate_compile(bson_get_data(&s), s.len, NULL, 0, &u);
  if (rc == 0)
    rc = dtx__bupsert_doc(bson_get_data(&f), f.len, u, now, &out);
  int ok = rc == rc_json;
  CHECKF(ok, "bson %s[%zu] upsert %s with %s: %s (%s), json_t %s", table, i,
         JS(filter), JS(spec), dtx_errname(rc), rc ? dtx_errdetail() : "",
         dtx_errname(rc_json));
  if (ok && rc) {
    ok = !strcmp(dtx_errdetail(), detail);
    CHECKF(ok, "bson %s[%zu]: detail '%s', json_t '%s'", table, i,
           dtx_errdetail(), detail);
  } else if (ok) {
    json_t *j = NULL;
    REQUIRE(dtx__bson_to_json(bson_get_data(out), out->len, 0, &j) == 0);
    /* A generated _id: an ObjectId here, hex there; compare the rest. */
    json_t *jid = json_object_get(j, "_id");
    if (json_is_object(jid) && json_object_get(jid, "$oid") &&
        json_is_string(json_object_get(out_json, "_id")))
      json_object_set(j, "_id", json_object_get(out_json, "_id"));
    char *got = JDUMP(j), *want = JDUMP(out_json);
    ok = !strcmp(got, want);
    CHECKF(ok, "bson %s[%zu] upsert %s with %s: got %s, json_t %s", table, i,
           JS(filter), JS(spec), got, want);
    free(got);
    free(want);
    json_decref(j);
  }
  agreed += ok;
  bson_destroy(out);
  bson_destroy(&f);
  bson_destroy(&s);
  dtx__bupdate_free(u);
}

void dtx_t_bupdate_report(void) {
  size_t n = 0;
  for (size_t i = 0; i < NREASONS; i++)
    n += skipped[i];
  printf("bson leg: %zu rows, %zu agreed, %zu skipped\n", rows, agreed, n);
  for (size_t i = 0; i < NREASONS; i++)
    if (skipped[i])
      printf("  skipped %zu: %s\n", skipped[i], reasons[i]);
  CHECKF(rows > 0, "bson leg: no rows ran");
}
