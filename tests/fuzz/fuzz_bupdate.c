/* fuzz_bupdate.c -- differential libFuzzer target of the two update
 * appliers (update.c on json_t, bupdate*.c on BSON).
 *
 * The input is "<update JSON>\n<document JSON>[\n<arrayFilters JSON>]";
 * the first byte's low bit chooses is_insert.  Both engines compile and
 * apply the same update to the same document (BSON by the bridge) and
 * must agree: the code, the detail, the result (read back through the
 * bridge) and "changed".  The BSON result must also be valid BSON, and
 * the input bytes untouched.  The document is also an upsert filter for
 * both seeds.  The differences the unit tables skip are skipped here for
 * the same reasons (tests/common/bdiff_update.c); anything else prints
 * both answers and aborts.
 *
 * An input starting with 0xFF is raw BSON instead, for the types JSON
 * lacks (Decimal128, Date, int32 overflow ...): the update's length (two
 * bytes, little-endian), then the update and the document (each must pass
 * dtx__bson_check).  The BSON engine alone runs; its output must be valid BSON
 * that keeps the input's _id bytes, and the input must stay untouched. */
#include "doc/bupdate.h"
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOW 1700000000000LL

static char *dump(const json_t *v) { return v ? dtx__json_dump(v) : NULL; }

static void disagree(const char *what, const json_t *spec, const json_t *doc,
                     const char *a, const char *b) {
  char *s = dump(spec), *d = dump(doc);
  fprintf(stderr,
          "engines disagree (%s)\nupdate %s\ndoc %s\njson_t: %s\n"
          "bson:   %s\n",
          what, s ? s : "?", d ? d : "?", a ? a : "?", b ? b : "?");
  abort();
}

/* Dates (only $currentDate writes them here) read as the integer ms. */
static json_t *dates_as_ints(json_t *j) {
  const char *k;
  json_t *v;
  size_t i;
  if (json_is_object(j) && json_object_size(j) == 1 &&
      json_object_get(j, "$date"))
    return json_integer(NOW);
  if (json_is_object(j))
    json_object_foreach(j, k, v) json_object_set_new(j, k, dates_as_ints(v));
  else if (json_is_array(j))
    json_array_foreach(j, i, v) json_array_set_new(j, i, dates_as_ints(v));
  return json_incref(j);
}

static char *bson_text(const bson_t *b) {
  json_t *j = NULL;
  if (dtx__bson_to_json(bson_get_data(b), b->len, 0, &j))
    return NULL;
  json_t *k = dates_as_ints(j);
  char *s = dump(k);
  json_decref(j);
  json_decref(k);
  return s;
}

/* 1 when some path of the spec has a number spelled with a leading zero
 * ("a.01"). */
static int zero_led(const json_t *spec) {
  const char *op, *path;
  json_t *arg, *v;
  json_object_foreach((json_t *)spec, op, arg) {
    if (!json_is_object(arg))
      continue;
    json_object_foreach(arg, path, v) {
      for (const char *p = path; *p; p++)
        if ((p == path || p[-1] == '.') && p[0] == '0' && p[1] >= '0' &&
            p[1] <= '9')
          return 1;
    }
  }
  return 0;
}

static void run(const json_t *spec, const json_t *doc, const json_t *afs,
                int is_insert) {
  dtx__update_t *u = NULL;
  dtx__bupdate_t *bu = NULL;
  json_t *out = NULL;
  bson_t bspec = BSON_INITIALIZER, bdoc = BSON_INITIALIZER,
         bafs = BSON_INITIALIZER, *bout = NULL;
  dtx__bval_t afv, *afp = NULL;
  int changed = 0, bchanged = 0;
  char *detail = NULL;

  if (!json_is_object(spec) || !json_is_object(doc))
    goto done;
  const char *st = NULL;
  char *sp = dump(spec);
  st = sp;
  int ts = st && strstr(st, "$currentDate") && strstr(st, "timestamp");
  int curdate = st && strstr(st, "$currentDate");
  free(sp);
  if (ts)
    goto done;
  if (dtx__bson_from_json(spec, &bspec) || dtx__bson_from_json(doc, &bdoc))
    goto done; /* a name BSON cannot hold (a NUL) */
  if (afs) {
    if (dtx__bval_from_json(afs, &bafs, &afv))
      goto done;
    afp = &afv;
  }
  int rc = dtx__update_compile_ex(spec, afs, &u);
  if (rc == 0)
    rc = dtx__update_apply(u, doc, is_insert, NOW, &out, &changed);
  detail = strdup(rc ? dtx_errdetail() : "");
  if (rc == DTX_EOVERFLOW && strstr(detail, "not finite"))
    goto done; /* BSON stores the infinity */
  if (rc == 0 && curdate && !changed)
    goto done; /* a Date over json_t's integer is a change */

  uint8_t *copy = malloc(bdoc.len);
  if (!copy)
    goto done;
  memcpy(copy, bson_get_data(&bdoc), bdoc.len);
  int brc = dtx__bupdate_compile(bson_get_data(&bspec), bspec.len, afp, 0, &bu);
  if (brc == 0)
    brc = dtx__bupdate_apply(bu, bson_get_data(&bdoc), bdoc.len, is_insert, NOW,
                             &bout, &bchanged);
  if (memcmp(copy, bson_get_data(&bdoc), bdoc.len))
    abort(); /* the input must stay untouched */
  free(copy);
  /* Limits only the BSON engine checks while applying (json_t: the
   * store's write check). */
  if (brc == DTX_ELIMIT ||
      (brc == DTX_EINVAL && strstr(dtx_errdetail(), "levels")))
    goto done;
  /* Numbers spelled with a leading zero ("01") order the json_t engine's
   * operations by a comparison that is not transitive ("6" < "008" <
   * "00a" < "6", dtx__upd_seg_cmp), so its field order is qsort's; and
   * one array slot named by two spellings of its index is a conflict for
   * the BSON engine where json_t applies both.  Not compared. */
  if (zero_led(spec))
    goto done;
  if (brc != rc) {
    char a[600], b[600];
    snprintf(a, sizeof a, "%s %s", dtx_errname(rc), detail);
    snprintf(b, sizeof b, "%s %s", dtx_errname(brc),
             brc ? dtx_errdetail() : "");
    disagree("code", spec, doc, a, b);
  }
  if (rc) {
    if (strcmp(detail, dtx_errdetail()))
      disagree("detail", spec, doc, detail, dtx_errdetail());
    if (bout || bchanged != 0)
      abort();
    goto done;
  }
  if (!bson_validate(bout, BSON_VALIDATE_NONE, NULL))
    abort();
  char *a = dump(out), *b = bson_text(bout);
  if (!a || !b || strcmp(a, b))
    disagree("result", spec, doc, a, b);
  /* $inc/$mul/$bit of an int32 by an int64 makes an int64 (MongoDB's
   * rule): the same number, another type, so a change only in BSON. */
  int widened =
      !changed && bchanged &&
      (json_object_get(spec, "$inc") || json_object_get(spec, "$mul") ||
       json_object_get(spec, "$bit"));
  if (changed != bchanged && !widened)
    disagree("changed", spec, doc, changed ? "1" : "0", bchanged ? "1" : "0");
  free(a);
  free(b);
done:
  free(detail);
  json_decref(out);
  bson_destroy(bout);
  dtx__update_free(u);
  dtx__bupdate_free(bu);
  bson_destroy(&bspec);
  bson_destroy(&bdoc);
  bson_destroy(&bafs);
}

/* Both seeds of the document read as a filter. */
static void seeds(const json_t *filter) {
  json_t *seed = NULL;
  bson_t bf = BSON_INITIALIZER, *bseed = NULL;
  if (!json_is_object(filter) || dtx__bson_from_json(filter, &bf))
    goto done;
  int rc = dtx__upsert_seed(filter, &seed);
  char *detail = strdup(rc ? dtx_errdetail() : "");
  int brc = dtx__bupsert_seed(bson_get_data(&bf), bf.len, &bseed);
  if (rc != brc)
    disagree("seed code", filter, filter, detail, dtx_errdetail());
  if (rc && strcmp(detail, dtx_errdetail()))
    disagree("seed detail", filter, filter, detail, dtx_errdetail());
  if (rc == 0) {
    char *a = dump(seed), *b = bson_text(bseed);
    if (!a || !b || strcmp(a, b))
      disagree("seed", filter, filter, a, b);
    free(a);
    free(b);
  }
  free(detail);
done:
  json_decref(seed);
  bson_destroy(bseed);
  bson_destroy(&bf);
}

static void raw(const uint8_t *data, size_t size) {
  if (size < 3)
    return;
  size_t n = (size_t)data[1] | (size_t)data[2] << 8;
  if (n > size - 3)
    n = size - 3;
  const uint8_t *spec = data + 3, *doc = data + 3 + n;
  size_t dlen = size - 3 - n;
  if (dtx__bson_check(spec, n, DTX_EINVAL, "update") ||
      dtx__bson_check(doc, dlen, DTX_EINVAL, "document"))
    return;
  uint8_t *copy = malloc(dlen);
  dtx__bupdate_t *u = NULL;
  bson_t *out = NULL;
  int changed = -1;
  if (!copy)
    return;
  memcpy(copy, doc, dlen);
  if (dtx__bupdate_compile(spec, (uint32_t)n, NULL, 0, &u) == 0) {
    int rc = dtx__bupdate_apply(u, doc, (uint32_t)dlen, data[0] & 1, NOW, &out,
                                &changed);
    if (rc == 0) {
      dtx__belem_t a, b;
      if (!bson_validate(out, BSON_VALIDATE_NONE, NULL) ||
          dtx__bson_check(bson_get_data(out), out->len, DTX_EINVAL, "out"))
        abort();
      if (dtx__belem_find(doc, (uint32_t)dlen, "_id", 3, &a) &&
          (!dtx__belem_find(bson_get_data(out), out->len, "_id", 3, &b) ||
           a.v.type != b.v.type || a.v.len != b.v.len ||
           memcmp(a.v.data, b.v.data, a.v.len)))
        abort();
      if (changed !=
          (out->len != dlen || memcmp(bson_get_data(out), doc, dlen) != 0))
        abort();
    } else if (out || changed) {
      abort();
    }
    bson_t *ins = NULL;
    if (dtx__bupsert_doc(doc, (uint32_t)dlen, u, NOW, &ins) == 0 &&
        !bson_validate(ins, BSON_VALIDATE_NONE, NULL))
      abort();
    bson_destroy(ins);
  }
  if (memcmp(copy, doc, dlen))
    abort();
  free(copy);
  bson_destroy(out);
  dtx__bupdate_free(u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size && data[0] == 0xFF) {
    raw(data, size);
    return 0;
  }
  const char *text = (const char *)data, *end = text + size;
  const char *nl = memchr(text, '\n', size);
  const char *nl2 = nl ? memchr(nl + 1, '\n', (size_t)(end - nl - 1)) : NULL;
  json_t *spec = fuzz_parse(text, nl ? (size_t)(nl - text) : size);
  json_t *doc = nl ? fuzz_parse(nl + 1, (size_t)((nl2 ? nl2 : end) - nl - 1))
                   : json_object();
  json_t *afs = nl2 ? fuzz_parse(nl2 + 1, (size_t)(end - nl2 - 1)) : NULL;
  if (spec && doc && (!nl2 || afs))
    run(spec, doc, afs, size ? data[0] & 1 : 0);
  if (doc)
    seeds(doc);
  json_decref(spec);
  json_decref(doc);
  json_decref(afs);
  return 0;
}
