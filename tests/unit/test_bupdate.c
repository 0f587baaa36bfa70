/* test_bupdate.c -- what only the BSON update applier can say: MongoDB's
 * number types ($inc/$mul promotion and overflow, Decimal128), Date and
 * Timestamp ($currentDate), $bit's int32/int64, cross-type $min/$max,
 * ObjectId _ids, the depth and 16 MiB limits, and the one-pass writer's
 * promise: an untouched field's bytes are copied as they were, into one
 * output buffer.  (Every row of test_update*.c also runs through this
 * engine: tests/common/bdiff_update.c.)
 *
 * Rows are canonical Extended JSON read by libbson (bson_new_from_json),
 * with ' for "; a result is compared as bytes with the expected document,
 * so types and field order count. */
#include "doc/bupdate.h"
#include "testlib.h"

#include <stdlib.h>
#include <string.h>

#define NOW 1700000000000LL

typedef struct bcase {
  const char *update, *doc;
  const char *want; /* NULL: an error */
  int changed;      /* or the expected error code */
  int is_insert;
  const char *detail;
} bcase_t;

#define OK(u, d, w, ch)                                                        \
  { u, d, w, ch, 0, NULL }
#define OKI(u, d, w, ch)                                                       \
  { u, d, w, ch, 1, NULL }
#define ERR(u, d, code, det)                                                   \
  { u, d, NULL, code, 0, det }

#define I32(x) "{'$numberInt':'" #x "'}"
#define I64(x) "{'$numberLong':'" #x "'}"
#define DBL(x) "{'$numberDouble':'" #x "'}"
#define DEC(x) "{'$numberDecimal':'" #x "'}"
#define DATE(x) "{'$date':{'$numberLong':'" #x "'}}"
#define OID "{'$oid':'5f0c1a2b3c4d5e6f70819203'}"
#define OID2 "{'$oid':'5f0c1a2b3c4d5e6f70819204'}"

static const bcase_t cases[] = {
    /* $inc: int32 stays int32, and becomes int64 when it overflows */
    OK("{'$inc':{'a':" I32(1) "}}", "{'a':" I32(1) "}", "{'a':" I32(2) "}", 1),
    OK("{'$inc':{'a':" I32(1) "}}", "{'a':" I32(2147483647) "}",
       "{'a':" I64(2147483648) "}", 1),
    OK("{'$inc':{'a':" I32(-1) "}}", "{'a':" I32(-2147483648) "}",
       "{'a':" I64(-2147483649) "}", 1),
    OK("{'$inc':{'a':" I64(1) "}}", "{'a':" I32(1) "}", "{'a':" I64(2) "}", 1),
    OK("{'$inc':{'a':" I32(1) "}}", "{'a':" I64(1) "}", "{'a':" I64(2) "}", 1),
    OK("{'$inc':{'a':" I32(0) "}}", "{'a':" I64(5) "}", "{'a':" I64(5) "}", 0),
    ERR("{'$inc':{'a':" I32(1) "}}", "{'a':" I64(9223372036854775807) "}",
        DTX_EOVERFLOW, "$inc: 9223372036854775807 + 1 overflows int64 at 'a'"),
    ERR("{'$inc':{'a':" I64(-9223372036854775808) "}}", "{'a':" I32(-1) "}",
        DTX_EOVERFLOW, "overflows int64"),
    OK("{'$inc':{'a':" DBL(0.5) "}}", "{'a':" I32(1) "}", "{'a':" DBL(1.5) "}",
       1),
    OK("{'$inc':{'a':" I32(1) "}}", "{'a':" DBL(1.5) "}", "{'a':" DBL(2.5) "}",
       1),
    OK("{'$inc':{'a':" DBL(1e308) "}}", "{'a':" DBL(1e308) "}",
       "{'a':" DBL(Infinity) "}", 1),
    OK("{'$inc':{'a':" I64(7) "}}", "{}", "{'a':" I64(7) "}", 1),
    ERR("{'$inc':{'a':" I32(1) "}}", "{'a':" DATE(5) "}", DTX_ETYPE,
        "cannot increment non-numeric value at 'a' (date)"),
    ERR("{'$inc':{'a':" DATE(5) "}}", "{'a':1}", DTX_EBADUPDATE,
        "$inc: argument at 'a' must be a number, not date"),
    /* $inc with Decimal128: the result is a Decimal128 */
    OK("{'$inc':{'a':" I32(1) "}}", "{'a':" DEC(1.5) "}", "{'a':" DEC(2.5) "}",
       1),
    OK("{'$inc':{'a':" DEC(0.25) "}}", "{'a':" I32(2) "}",
       "{'a':" DEC(2.25) "}", 1),
    OK("{'$inc':{'a':" DEC(1) "}}", "{}", "{'a':" DEC(1) "}", 1),
    /* $mul */
    OK("{'$mul':{'a':" I32(65536) "}}", "{'a':" I32(65536) "}",
       "{'a':" I64(4294967296) "}", 1),
    /* the same number in a wider type is a change (the bytes differ) */
    OK("{'$mul':{'a':" I64(212337203677) "}}", "{'a':" I32(0) "}",
       "{'a':" I64(0) "}", 1),
    OK("{'$mul':{'a':" I32(3) "}}", "{'a':" I32(5) "}", "{'a':" I32(15) "}", 1),
    ERR("{'$mul':{'a':" I64(4294967296) "}}", "{'a':" I64(4294967296) "}",
        DTX_EOVERFLOW, "$mul: 4294967296 * 4294967296 overflows int64"),
    OK("{'$mul':{'a':" I32(2) "}}", "{}", "{'a':" I32(0) "}", 1),
    OK("{'$mul':{'a':" I64(2) "}}", "{}", "{'a':" I64(0) "}", 1),
    OK("{'$mul':{'a':" DBL(2.0) "}}", "{}", "{'a':" DBL(0.0) "}", 1),
    OK("{'$mul':{'a':" DEC(2) "}}", "{'a':" I32(3) "}", "{'a':" DEC(6) "}", 1),
    OK("{'$mul':{'a':" DBL(0.5) "}}", "{'a':" I64(3) "}", "{'a':" DBL(1.5) "}",
       1),
    /* $bit: int32 and int64 only */
    OK("{'$bit':{'a':{'and':" I32(6) "}}}", "{'a':" I32(3) "}",
       "{'a':" I32(2) "}", 1),
    OK("{'$bit':{'a':{'or':" I64(4294967296) "}}}", "{'a':" I32(1) "}",
       "{'a':" I64(4294967297) "}", 1),
    OK("{'$bit':{'a':{'xor':" I32(1) "}}}", "{'a':" I64(3) "}",
       "{'a':" I64(2) "}", 1),
    OK("{'$bit':{'a':{'or':" I32(5) "}}}", "{}", "{'a':" I32(5) "}", 1),
    ERR("{'$bit':{'a':{'and':" I32(1) "}}}", "{'a':" DBL(1.0) "}", DTX_ETYPE,
        "non-integral type at 'a' (real)"),
    ERR("{'$bit':{'a':{'and':" I32(1) "}}}", "{'a':" DEC(1) "}", DTX_ETYPE,
        "(decimal)"),
    ERR("{'$bit':{'a':{'and':" DBL(1) "}}}", "{'a':1}", DTX_EBADUPDATE,
        "must be an integer, not real"),
    /* $min/$max across types, by MongoDB's order */
    OK("{'$max':{'a':" DATE(5) "}}", "{'a':" I32(9) "}", "{'a':" DATE(5) "}",
       1),
    OK("{'$min':{'a':" DATE(5) "}}", "{'a':" I32(9) "}", "{'a':" I32(9) "}", 0),
    OK("{'$min':{'a':" DATE(5) "}}", "{'a':" DATE(7) "}", "{'a':" DATE(5) "}",
       1),
    OK("{'$max':{'a':" I64(9223372036854775807) "}}",
       "{'a':" DBL(9223372036854775808) "}",
       "{'a':" DBL(9223372036854775808) "}", 0),
    OK("{'$min':{'a':" DEC(1.0) "}}", "{'a':" I32(1) "}", "{'a':" I32(1) "}",
       0),
    OK("{'$max':{'a':{'$maxKey':1}}}", "{'a':'x'}", "{'a':{'$maxKey':1}}", 1),
    OK("{'$min':{'a':{'$minKey':1}}}", "{'a':null}", "{'a':{'$minKey':1}}", 1),
    OK("{'$max':{'a':" OID "}}", "{'a':'zzz'}", "{'a':" OID "}", 1),
    /* $set: types count for "changed" */
    OK("{'$set':{'a':" I64(5) "}}", "{'a':" I32(5) "}", "{'a':" I64(5) "}", 1),
    OK("{'$set':{'a':" DATE(5) "}}", "{'a':" DATE(5) "}", "{'a':" DATE(5) "}",
       0),
    OK("{'$set':{'b.c':" DEC(1.10) "}}", "{'a':" OID ",'b':{}}",
       "{'a':" OID ",'b':{'c':" DEC(1.10) "}}", 1),
    /* arrays compare by value across number types */
    OK("{'$addToSet':{'a':" I64(1) "}}", "{'a':[" I32(1) "]}",
       "{'a':[" I32(1) "]}", 0),
    OK("{'$addToSet':{'a':" DEC(2) "}}", "{'a':[" I32(1) "]}",
       "{'a':[" I32(1) "," DEC(2) "]}", 1),
    OK("{'$pull':{'a':" DBL(1.0) "}}", "{'a':[" I64(1) "," I32(2) "]}",
       "{'a':[" I32(2) "]}", 1),
    OK("{'$pullAll':{'a':[" DEC(2) "]}}", "{'a':[" I64(1) "," I32(2) "]}",
       "{'a':[" I64(1) "]}", 1),
    OK("{'$push':{'a':{'$each':['s'," DATE(1) "," I32(3) ",null],'$sort':1}}}",
       "{'a':[]}", "{'a':[null," I32(3) ",'s'," DATE(1) "]}", 1),
    OK("{'$push':{'a':{'$each':[{'k':" DATE(2) "},{'k':" I32(
           9) "}],"
              "'$sort':{'k':-1}}}}",
       "{}", "{'a':[{'k':" DATE(2) "},{'k':" I32(9) "}]}", 1),
    /* $currentDate: a Date */
    OK("{'$currentDate':{'a':true}}", "{}", "{'a':" DATE(1700000000000) "}", 1),
    OK("{'$currentDate':{'a':true}}", "{'a':" DATE(1700000000000) "}",
       "{'a':" DATE(1700000000000) "}", 0),
    /* _id of BSON types */
    OK("{'$set':{'_id':" OID ",'a':1}}", "{'_id':" OID "}",
       "{'_id':" OID ",'a':" I32(1) "}", 1),
    ERR("{'$set':{'_id':" OID2 "}}", "{'_id':" OID "}", DTX_EIMMUTABLE,
        "$set: _id is immutable (path '_id')"),
    OK("{'a':" DATE(3) "}", "{'_id':" OID ",'b':1}",
       "{'_id':" OID ",'a':" DATE(3) "}", 1),
    ERR("{'_id':" OID2 "}", "{'_id':" OID "}", DTX_EIMMUTABLE, "replacement"),
    /* $rename keeps the type and goes last */
    OK("{'$rename':{'a':'z.y'}}", "{'a':" DEC(7) ",'b':1}",
       "{'b':" I32(1) ",'z':{'y':" DEC(7) "}}", 1),
    /* one array slot named twice: the writer writes a name once */
    ERR("{'$set':{'a.01':1,'a.1':2}}", "{'a':[0,5]}", DTX_EBADUPDATE,
        "would create a conflict"),
    OK("{'$set':{'a.01.x':1,'a.1':2,'a.01.y':3}}", "{'a':{}}",
       "{'a':{'01':{'x':" I32(1) ",'y':" I32(3) "},'1':" I32(2) "}}", 1),
    OKI("{'$setOnInsert':{'t':" DATE(9) "}}", "{}", "{'t':" DATE(9) "}", 1),
};

static bson_t *ej(const char *text) {
  char *s = strdup(text);
  for (char *p = s; *p; p++)
    if (*p == '\'')
      *p = '"';
  bson_error_t err;
  bson_t *b = bson_new_from_json((const uint8_t *)s, -1, &err);
  if (!b)
    fprintf(stderr, "bad test JSON %s: %s\n", s, err.message);
  free(s);
  return b;
}

static char *dump(const bson_t *b) {
  return b ? bson_as_canonical_extended_json(b, NULL) : strdup("(null)");
}

static void test_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bcase_t *c = &cases[i];
    bson_t *spec = ej(c->update), *doc = ej(c->doc), *out = NULL;
    REQUIRE(spec && doc);
    dtx__bupdate_t *u = NULL;
    int changed = -1;
    int rc = dtx__bupdate_compile(bson_get_data(spec), spec->len, NULL, 0, &u);
    if (rc == 0)
      rc = dtx__bupdate_apply(u, bson_get_data(doc), doc->len, c->is_insert,
                              NOW, &out, &changed);
    if (c->want) {
      bson_t *want = ej(c->want);
      REQUIRE(want);
      char *g = dump(out), *w = dump(want);
      CHECKF(rc == 0, "case %zu %s: %s (%s)", i, c->update, dtx_errname(rc),
             dtx_errdetail());
      CHECKF(out && out->len == want->len &&
                 !memcmp(bson_get_data(out), bson_get_data(want), want->len),
             "case %zu %s on %s: got %s want %s", i, c->update, c->doc, g, w);
      CHECKF(changed == c->changed, "case %zu %s: changed %d want %d", i,
             c->update, changed, c->changed);
      bson_free(g);
      bson_free(w);
      bson_destroy(want);
    } else {
      CHECKF(rc == c->changed, "case %zu %s on %s: %s (%s) want %s", i,
             c->update, c->doc, dtx_errname(rc), dtx_errdetail(),
             dtx_errname(c->changed));
      CHECKF(!out, "case %zu: out on error", i);
      if (c->detail)
        CHECKF(strstr(dtx_errdetail(), c->detail) != NULL,
               "case %zu %s: detail '%s' lacks '%s'", i, c->update,
               dtx_errdetail(), c->detail);
    }
    if (out)
      CHECKF(bson_validate(out, BSON_VALIDATE_NONE, NULL),
             "case %zu: the output is not valid BSON", i);
    bson_destroy(out);
    bson_destroy(spec);
    bson_destroy(doc);
    dtx__bupdate_free(u);
  }
}

/* $currentDate {$type: 'timestamp'}: seconds of now, an ordinal that
 * grows within the second. */
static void test_timestamp(void) {
  bson_t *spec = ej("{'$currentDate':{'t':{'$type':'timestamp'}}}");
  bson_t *doc = ej("{}"), *a = NULL, *b = NULL;
  dtx__bupdate_t *u = NULL;
  REQUIRE(dtx__bupdate_compile(bson_get_data(spec), spec->len, NULL, 0, &u) ==
          0);
  CHECK_RC(
      dtx__bupdate_apply(u, bson_get_data(doc), doc->len, 0, NOW, &a, NULL), 0);
  CHECK_RC(
      dtx__bupdate_apply(u, bson_get_data(doc), doc->len, 0, NOW, &b, NULL), 0);
  bson_iter_t ia, ib;
  uint32_t ta, tb, ca, cb;
  REQUIRE(bson_iter_init_find(&ia, a, "t") && BSON_ITER_HOLDS_TIMESTAMP(&ia));
  REQUIRE(bson_iter_init_find(&ib, b, "t") && BSON_ITER_HOLDS_TIMESTAMP(&ib));
  bson_iter_timestamp(&ia, &ta, &ca);
  bson_iter_timestamp(&ib, &tb, &cb);
  CHECK(ta == NOW / 1000 && tb == ta);
  CHECKF(cb > ca, "ordinals %u then %u", ca, cb);
  bson_destroy(a);
  bson_destroy(b);
  bson_destroy(spec);
  dtx__bupdate_free(u);

  /* {$type: 'date'} (built here: libbson's JSON reader takes {"$type":
   * ...} for the legacy binary syntax). */
  spec = BCON_NEW("$currentDate", "{", "a", "{", "$type", BCON_UTF8("date"),
                  "}", "}");
  REQUIRE(dtx__bupdate_compile(bson_get_data(spec), spec->len, NULL, 0, &u) ==
          0);
  CHECK_RC(
      dtx__bupdate_apply(u, bson_get_data(doc), doc->len, 0, NOW, &a, NULL), 0);
  REQUIRE(bson_iter_init_find(&ia, a, "a") && BSON_ITER_HOLDS_DATE_TIME(&ia));
  CHECK(bson_iter_date_time(&ia) == NOW);
  bson_destroy(a);
  bson_destroy(spec);
  bson_destroy(doc);
  dtx__bupdate_free(u);
}

/* The element named key of b, as raw bytes (name and payload). */
static const uint8_t *elem_bytes(const bson_t *b, const char *key,
                                 uint32_t *n) {
  bson_iter_t it;
  if (!bson_iter_init_find(&it, b, key))
    return NULL;
  const uint8_t *d = bson_get_data(b);
  uint32_t start = it.key - 1, end = it.next_off;
  *n = end - start;
  return d + start;
}

/* The one-pass writer: fields no operation reaches keep their bytes, the
 * result is one contiguous document, and a no-op gives the same bytes. */
static void test_untouched_bytes(void) {
  bson_t *doc = ej(
      "{'_id':" OID ",'big':{'x':[1,2,{'y':'deep'}],'d':" DATE(4) "},'n':" I32(
          1) ",'s':'text','arr':[" DEC(1.5) ",'q'],'z':" DBL(2.5) "}");
  bson_t *spec = ej("{'$inc':{'n':" I32(1) "},'$push':{'arr':'r'}}");
  dtx__bupdate_t *u = NULL;
  bson_t *out = NULL;
  int changed = 0;
  REQUIRE(doc && spec);
  REQUIRE(dtx__bupdate_compile(bson_get_data(spec), spec->len, NULL, 0, &u) ==
          0);
  REQUIRE(dtx__bupdate_apply(u, bson_get_data(doc), doc->len, 0, NOW, &out,
                             &changed) == 0);
  CHECK(changed == 1);
  const char *same[] = {"_id", "big", "s", "z"};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    uint32_t na = 0, nb = 0;
    const uint8_t *a = elem_bytes(doc, same[i], &na);
    const uint8_t *b = elem_bytes(out, same[i], &nb);
    CHECKF(a && b && na == nb && !memcmp(a, b, na), "field %s: bytes changed",
           same[i]);
    /* ... and they sit inside the one output buffer */
    CHECKF(b >= bson_get_data(out) && b + nb <= bson_get_data(out) + out->len,
           "field %s outside the output", same[i]);
  }
  CHECK(bson_validate(out, BSON_VALIDATE_NONE, NULL));
  char *s = bson_as_canonical_extended_json(out, NULL);
  CHECKF(strstr(s, "\"n\" : { \"$numberInt\" : \"2\" }") != NULL, "%s", s);
  bson_free(s);
  bson_destroy(out);
  dtx__bupdate_free(u);

  /* No change: the same bytes, changed 0. */
  bson_destroy(spec);
  spec = ej("{'$set':{'s':'text'},'$min':{'z':" DBL(9) "}}");
  REQUIRE(dtx__bupdate_compile(bson_get_data(spec), spec->len, NULL, 0, &u) ==
          0);
  REQUIRE(dtx__bupdate_apply(u, bson_get_data(doc), doc->len, 0, NOW, &out,
                             &changed) == 0);
  CHECK(changed == 0 && out->len == doc->len &&
        !memcmp(bson_get_data(out), bson_get_data(doc), doc->len));
  bson_destroy(out);
  dtx__bupdate_free(u);
  bson_destroy(spec);
  bson_destroy(doc);
}

/* DTX_MAX_DEPTH: a value that would nest past it is refused, naming the
 * path; one level less is fine. */
static void test_depth_limit(void) {
  for (int extra = 0; extra < 2; extra++) {
    /* {'$set':{'a': {k:{k:...}}}}: the document is level 1 and each
     * object inside adds one, so 99 + extra nested objects under 'a'
     * reach level 100 + extra. */
    int levels = DTX_MAX_DEPTH - 1 + extra;
    bson_t spec = BSON_INITIALIZER, set,
           *stack = malloc((size_t)(levels + 1) * sizeof *stack);
    REQUIRE(stack);
    bson_append_document_begin(&spec, "$set", -1, &set);
    bson_append_document_begin(&set, "a", -1, &stack[0]);
    for (int i = 1; i < levels; i++)
      bson_append_document_begin(&stack[i - 1], "k", -1, &stack[i]);
    for (int i = levels - 1; i >= 1; i--)
      bson_append_document_end(&stack[i - 1], &stack[i]);
    bson_append_document_end(&set, &stack[0]);
    bson_append_document_end(&spec, &set);
    free(stack);
    bson_t *doc = ej("{}"), *out = NULL;
    dtx__bupdate_t *u = NULL;
    REQUIRE(dtx__bupdate_compile(bson_get_data(&spec), spec.len, NULL, 0, &u) ==
            0);
    int rc =
        dtx__bupdate_apply(u, bson_get_data(doc), doc->len, 0, NOW, &out, NULL);
    CHECKF(rc == (extra ? DTX_EINVAL : 0), "extra %d: %s (%s)", extra,
           dtx_errname(rc), dtx_errdetail());
    if (extra)
      CHECKF(strstr(dtx_errdetail(), "deeper than 100 levels at 'a'"), "%s",
             dtx_errdetail());
    bson_destroy(out);
    bson_destroy(doc);
    bson_destroy(&spec);
    dtx__bupdate_free(u);
  }
}

/* 16 MiB: an update whose result would pass it is DTX_ELIMIT. */
static void test_size_limit(void) {
  size_t n = 9u << 20;
  char *s = malloc(n + 1);
  REQUIRE(s);
  memset(s, 'x', n);
  s[n] = '\0';
  bson_t doc = BSON_INITIALIZER, spec = BSON_INITIALIZER, set;
  bson_append_utf8(&doc, "a", -1, s, (int)n);
  bson_append_document_begin(&spec, "$set", -1, &set);
  bson_append_utf8(&set, "b", -1, s, (int)n);
  bson_append_document_end(&spec, &set);
  dtx__bupdate_t *u = NULL;
  bson_t *out = NULL;
  REQUIRE(dtx__bupdate_compile(bson_get_data(&spec), spec.len, NULL, 0, &u) ==
          0);
  CHECK_RC(
      dtx__bupdate_apply(u, bson_get_data(&doc), doc.len, 0, NOW, &out, NULL),
      DTX_ELIMIT);
  CHECK(out == NULL);
  dtx__bupdate_free(u);
  free(s);
  bson_destroy(&doc);
  bson_destroy(&spec);
}

/* An upsert without an _id gets an ObjectId, first; one with an _id in
 * the filter keeps it, whatever its type. */
static void test_upsert_oid(void) {
  bson_t *f = ej("{'a':" I64(5) "}"), *spec = ej("{'$set':{'b':1}}");
  dtx__bupdate_t *u = NULL;
  bson_t *out = NULL;
  REQUIRE(dtx__bupdate_compile(bson_get_data(spec), spec->len, NULL, 0, &u) ==
          0);
  CHECK_RC(dtx__bupsert_doc(bson_get_data(f), f->len, u, NOW, &out), 0);
  bson_iter_t it;
  REQUIRE(out && bson_iter_init(&it, out) && bson_iter_next(&it));
  CHECK(!strcmp(bson_iter_key(&it), "_id") && BSON_ITER_HOLDS_OID(&it));
  CHECK(bson_iter_next(&it) && BSON_ITER_HOLDS_INT64(&it));
  bson_destroy(out);
  bson_destroy(f);
  f = ej("{'x':1,'_id':" DATE(8) "}");
  CHECK_RC(dtx__bupsert_doc(bson_get_data(f), f->len, u, NOW, &out), 0);
  bson_t *want = ej("{'_id':" DATE(8) ",'x':" I32(1) ",'b':" I32(1) "}");
  CHECK(out && out->len == want->len &&
        !memcmp(bson_get_data(out), bson_get_data(want), want->len));
  bson_destroy(want);
  bson_destroy(out);
  bson_destroy(f);
  bson_destroy(spec);
  dtx__bupdate_free(u);
}

int main(void) {
  TEST_RUN(test_table);
  TEST_RUN(test_timestamp);
  TEST_RUN(test_untouched_bytes);
  TEST_RUN(test_depth_limit);
  TEST_RUN(test_size_limit);
  TEST_RUN(test_upsert_oid);
  return TEST_DONE();
}
