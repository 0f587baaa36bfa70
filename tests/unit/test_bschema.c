/* test_bschema.c -- what only BSON can say to $jsonSchema and the
 * collection rules (bschema.c, brules.c): the types JSON lacks, integers
 * judged by value whatever their width (int_rows), exact bounds across
 * numeric types, NaN, Decimal128 operands, and the transition rules on
 * BSON.  (Every row of test_schema.c also runs
 * through both engines there.)
 *
 * Tables, Extended JSON in single quotes:
 *  - match_rows: (schema, document, valid?, the exact reason when not);
 *  - bad_rows: schemas refused with DTX_EBADQUERY, a detail substring;
 *  - write_rows: (rules, before, after, bypass, code, detail prefix)
 *    through dtx__bdoc_check_write only (BSON values);
 *  - trans_rows: transition rules in plain JSON through BOTH engines
 *    (no json_t unit table has them: conformance tests do, on stores). */
#include "bschemadiff.h"
#include "testlib.h"

#include "doc/bdoc.h"
#include "doc/brules.h"

#include <stdlib.h>
#include <string.h>

/* Extended JSON with ' for " into *out (initialised here). */
static int ej(const char *text, bson_t *out) {
  char buf[2048];
  size_t n = strlen(text);
  bson_init(out);
  if (n >= sizeof buf)
    return -1;
  for (size_t i = 0; i <= n; i++)
    buf[i] = text[i] == '\'' ? '"' : text[i];
  return dtx__ejson_read(buf, n, out);
}

typedef struct mrow {
  const char *schema, *doc;
  int valid;
  const char *why; /* the exact reason when invalid */
} mrow_t;

#define P(x) "{'properties':{'a':" x "}}"
#define OID "{'$oid':'0123456789abcdef01234567'}"

static const mrow_t match_rows[] = {
    /* integers by value: int_rows below */
    {P("{'bsonType':'number'}"), "{'a':{'$numberDecimal':'1.5'}}", 1, NULL},
    {P("{'type':'number'}"), "{'a':{'$numberLong':'7'}}", 1, NULL},
    {P("{'bsonType':'number'}"), "{'a':{'$date':'2026-01-01T00:00:00Z'}}", 0,
     "a is date, must be number ($jsonSchema properties.a.bsonType)"},
    /* the types JSON lacks */
    {P("{'bsonType':'date'}"), "{'a':{'$date':'2026-01-01T00:00:00Z'}}", 1,
     NULL},
    {P("{'bsonType':'date'}"), "{'a':'2026-01-01'}", 0,
     "a is string, must be date ($jsonSchema properties.a.bsonType)"},
    {P("{'bsonType':'objectId'}"),
     "{'a':{'$oid':'0123456789abcdef01234567'}}", 1, NULL},
    {P("{'bsonType':'decimal'}"), "{'a':{'$numberDecimal':'0.1'}}", 1, NULL},
    {P("{'bsonType':'decimal'}"), "{'a':0.1}", 0,
     "a is double, must be decimal ($jsonSchema properties.a.bsonType)"},
    {P("{'bsonType':'timestamp'}"), "{'a':{'$timestamp':{'t':1,'i':2}}}", 1,
     NULL},
    {P("{'bsonType':'binData'}"),
     "{'a':{'$binary':{'base64':'AAE=','subType':'00'}}}", 1, NULL},
    {P("{'bsonType':'regex'}"),
     "{'a':{'$regularExpression':{'pattern':'x','options':''}}}", 1, NULL},
    {P("{'bsonType':['minKey','maxKey']}"), "{'a':{'$maxKey':1}}", 1, NULL},
    {P("{'bsonType':'maxKey'}"), "{'a':{'$minKey':1}}", 0,
     "a is minKey, must be maxKey ($jsonSchema properties.a.bsonType)"},
    {P("{'type':'object'}"), "{'a':[]}", 0,
     "a is array, must be object ($jsonSchema properties.a.type)"},
    /* bounds compare exactly across the numeric types */
    {P("{'minimum':{'$numberDecimal':'0.1'}}"), "{'a':0.1}", 1, NULL},
    {P("{'maximum':{'$numberDecimal':'0.1'}}"), "{'a':0.1}", 0,
     "a must be <= 0.1 ($jsonSchema properties.a.maximum)"},
    {P("{'minimum':{'$numberDecimal':'0.1'}}"), "{'a':0}", 0,
     "a must be >= 0.1 ($jsonSchema properties.a.minimum)"},
    {P("{'maximum':{'$numberLong':'9223372036854775807'}}"),
     "{'a':9.223372036854775807e18}", 0,
     "a must be <= 9223372036854775807 ($jsonSchema properties.a.maximum)"},
    {P("{'maximum':{'$numberLong':'9223372036854775807'}}"),
     "{'a':{'$numberDecimal':'9223372036854775807'}}", 1, NULL},
    {P("{'minimum':5,'exclusiveMinimum':true}"),
     "{'a':{'$numberDecimal':'5.000'}}", 0,
     "a must be > 5 ($jsonSchema properties.a.exclusiveMinimum)"},
    {P("{'minimum':5}"), "{'a':{'$date':'2026-01-01T00:00:00Z'}}", 1, NULL},
    /* NaN meets a bound only when the bound is NaN and inclusive */
    {P("{'minimum':0}"), "{'a':{'$numberDouble':'NaN'}}", 0,
     "a must be >= 0 ($jsonSchema properties.a.minimum)"},
    {P("{'maximum':0}"), "{'a':{'$numberDecimal':'NaN'}}", 0,
     "a must be <= 0 ($jsonSchema properties.a.maximum)"},
    {P("{'minimum':{'$numberDouble':'NaN'}}"),
     "{'a':{'$numberDecimal':'NaN'}}", 1, NULL},
    {P("{'minimum':{'$numberDouble':'NaN'}}"), "{'a':-1e308}", 0,
     "a must be >= NaN ($jsonSchema properties.a.minimum)"},
    {P("{'maximum':{'$numberDouble':'NaN'},'exclusiveMaximum':true}"),
     "{'a':{'$numberDouble':'NaN'}}", 0,
     "a must be < NaN ($jsonSchema properties.a.exclusiveMaximum)"},
    {P("{'minimum':{'$numberDouble':'-Infinity'}}"), "{'a':-1e308}", 1, NULL},
    /* enum and uniqueItems: the same value whatever its numeric type */
    {P("{'enum':[{'$numberLong':'1'},'x']}"), "{'a':{'$numberDecimal':'1.00'}}",
     1, NULL},
    {P("{'enum':[{'$date':'2026-01-01T00:00:00Z'}]}"),
     "{'a':{'$date':'2026-01-02T00:00:00Z'}}", 0,
     "a must be one of [{\"$date\":\"2026-01-01T00:00:00Z\"}] ($jsonSchema "
     "properties.a.enum)"},
    {P("{'uniqueItems':true}"), "{'a':[1,{'$numberLong':'1'}]}", 0,
     "a has duplicate items ($jsonSchema properties.a.uniqueItems)"},
    {P("{'uniqueItems':true}"), "{'a':[1,'1'," OID "]}", 1, NULL},
    /* Decimal128 operands where an integer is wanted */
    {P("{'minLength':{'$numberDecimal':'2'}}"), "{'a':'x'}", 0,
     "a is 1 characters, shorter than 2 ($jsonSchema properties.a.minLength)"},
    {P("{'maxItems':{'$numberLong':'1'}}"), "{'a':[1,2]}", 0,
     "a has 2 items, more than 1 ($jsonSchema properties.a.maxItems)"},
    /* pattern: strings only (a symbol is not a string to bsonType) */
    {P("{'pattern':'^x'}"), "{'a':{'$symbol':'y'}}", 1, NULL},
    {P("{'pattern':'^x'}"), "{'a':'y'}", 0,
     "a does not match /^x/ ($jsonSchema properties.a.pattern)"},
    /* a string holding a NUL is measured and matched whole */
    {P("{'maxLength':2}"), "{'a':'a\\u0000b'}", 0,
     "a is 3 characters, longer than 2 ($jsonSchema properties.a.maxLength)"},
};

static void test_match_rows(void) {
  for (size_t i = 0; i < sizeof match_rows / sizeof *match_rows; i++) {
    const mrow_t *t = &match_rows[i];
    bson_t spec, doc;
    int rs = ej(t->schema, &spec), rd = ej(t->doc, &doc);
    CHECKF(rs == 0 && rd == 0, "[%zu] ejson: %s", i, dtx_errdetail());
    dtx__bschema_t *s = NULL;
    dtx__bval_t sv = dtx__bval_of_doc(bson_get_data(&spec), spec.len);
    int rc = rs ? -1 : dtx__bschema_compile(&sv, &s);
    CHECKF(rc == 0, "[%zu] compile %s: %s", i, t->schema, dtx_errdetail());
    if (rc == 0 && rd == 0) {
      char why[400] = "untouched";
      int got = dtx__bschema_match(s, bson_get_data(&doc), doc.len, why,
                                   sizeof why);
      CHECKF(got == t->valid, "[%zu] %s on %s: got %d (%s)", i, t->schema,
             t->doc, got, why);
      if (!t->valid && !got)
        CHECKF(strcmp(why, t->why) == 0, "[%zu] reason '%s', want '%s'", i,
               why, t->why);
      CHECK(dtx__bschema_match(s, bson_get_data(&doc), doc.len, NULL, 0) ==
            got);
    }
    dtx__bschema_free(s);
    bson_destroy(&spec);
    bson_destroy(&doc);
  }
}

/* ---- integers are judged by value (brules.h) ------------------------------
 * Every value against every bsonType: an int32 or int64 is "long" always
 * and "int" too when it fits in 32 bits, whatever its width; a double is
 * neither, a Decimal128 only "decimal".  A refused integer is named
 * "long", as the json_t engine names every integer. */
static const char *const int_vals[] = {
    "5",                                      /* int32 */
    "{'$numberLong':'5'}",                    /* int64 within 32 bits */
    "{'$numberLong':'2147483648'}",           /* 2^31 */
    "{'$numberLong':'-2147483649'}",          /* -2^31 - 1 */
    "{'$numberDouble':'5.0'}",                /* double */
    "{'$numberDecimal':'5'}",                 /* Decimal128 */
};
static const char *const int_names[] = {"long", "long",   "long",
                                        "long", "double", "decimal"};

static const struct {
  const char *types, *tnames;
  int want[6]; /* per int_vals */
} int_rows[] = {
    {"'int'", "int", {1, 1, 0, 0, 0, 0}},
    {"'long'", "long", {1, 1, 1, 1, 0, 0}},
    {"['int','long']", "int or long", {1, 1, 1, 1, 0, 0}},
    {"['long','int']", "long or int", {1, 1, 1, 1, 0, 0}},
    {"'number'", "number", {1, 1, 1, 1, 1, 1}},
    {"'double'", "double", {0, 0, 0, 0, 1, 0}},
    {"'decimal'", "decimal", {0, 0, 0, 0, 0, 1}},
    {"['double','int']", "double or int", {1, 1, 0, 0, 1, 0}},
};

static void test_int_rows(void) {
  size_t ran = 0;
  for (size_t i = 0; i < sizeof int_rows / sizeof *int_rows; i++)
    for (size_t j = 0; j < sizeof int_vals / sizeof *int_vals; j++) {
      char st[200], dt[200], want[300];
      snprintf(st, sizeof st, "{'properties':{'a':{'bsonType':%s}}}",
               int_rows[i].types);
      snprintf(dt, sizeof dt, "{'a':%s}", int_vals[j]);
      snprintf(want, sizeof want,
               "a is %s, must be %s ($jsonSchema properties.a.bsonType)",
               int_names[j], int_rows[i].tnames);
      bson_t spec, doc;
      int ok = ej(st, &spec) == 0 && ej(dt, &doc) == 0;
      CHECKF(ok, "int_rows[%zu] %s: ejson: %s", i, dt, dtx_errdetail());
      dtx__bschema_t *s = NULL;
      dtx__bval_t sv = dtx__bval_of_doc(bson_get_data(&spec), spec.len);
      CHECKF(ok && dtx__bschema_compile(&sv, &s) == 0, "compile %s: %s", st,
             dtx_errdetail());
      if (s) {
        char why[400] = "";
        int got = dtx__bschema_match(s, bson_get_data(&doc), doc.len, why,
                                     sizeof why);
        CHECKF(got == int_rows[i].want[j], "%s on %s: got %d (%s)", st, dt,
               got, why);
        if (!got)
          CHECKF(strcmp(why, want) == 0, "%s on %s: reason '%s', want '%s'",
                 st, dt, why, want);
        ran++;
      }
      dtx__bschema_free(s);
      bson_destroy(&spec);
      bson_destroy(&doc);
    }
  CHECK(ran == 48);
}

static const struct {
  const char *schema, *mention;
} bad_rows[] = {
    {"{'bsonType':'nope'}", "bsonType 'nope' is not supported (supported: "
                            "double, string, object, array, binData"},
    {"{'bsonType':'missing'}", "bsonType 'missing' is not supported"},
    {"{'type':'date'}", "type 'date' is not supported (supported: object, "
                        "array, string, boolean, null, number)"},
    {"{'bsonType':['date','date']}", "bsonType lists 'date' twice"},
    {"{'bsonType':2}", "bsonType must be a string"},
    {"{'minLength':{'$numberDecimal':'2.5'}}",
     "minLength must be a non-negative integer"},
    {"{'minItems':{'$numberDecimal':'-1'}}",
     "minItems must be a non-negative integer"},
    {"{'maxItems':{'$numberDouble':'NaN'}}",
     "maxItems must be a non-negative integer"},
    {"{'minimum':{'$date':'2026-01-01T00:00:00Z'}}",
     "minimum must be a number"},
    {"{'title':{'$symbol':'t'}}", "title must be a string"},
    {"{'pattern':{'$regularExpression':{'pattern':'x','options':''}}}",
     "pattern must be a string"},
    {"{'additionalProperties':1}", "additionalProperties must be true or "
                                   "false"},
};

static void test_bad_rows(void) {
  for (size_t i = 0; i < sizeof bad_rows / sizeof *bad_rows; i++) {
    bson_t spec;
    CHECKF(ej(bad_rows[i].schema, &spec) == 0, "[%zu] ejson", i);
    dtx__bval_t sv = dtx__bval_of_doc(bson_get_data(&spec), spec.len);
    dtx__bschema_t *s = (dtx__bschema_t *)1;
    CHECK_RC(dtx__bschema_compile(&sv, &s), DTX_EBADQUERY);
    CHECKF(s == NULL, "[%zu] out set on error", i);
    CHECKF(strstr(dtx_errdetail(), bad_rows[i].mention),
           "[%zu] '%s' lacks '%s'", i, dtx_errdetail(), bad_rows[i].mention);
    bson_destroy(&spec);
  }
}

typedef struct wrow {
  const char *rules, *before, *after;
  int bypass, want;
  const char *detail; /* prefix */
} wrow_t;

static const wrow_t write_rows[] = {
    /* the money field of the patterns' validators: "long" is any integer,
       int32 (as the bridge writes 100) or int64 */
    {"{'validator':{'$jsonSchema':{'properties':{'balance':{'bsonType':"
     "'long'}}}}}",
     NULL, "{'_id':'A','balance':{'$numberLong':'100'}}", 0, 0, NULL},
    {"{'validator':{'$jsonSchema':{'properties':{'balance':{'bsonType':"
     "'long'}}}}}",
     NULL, "{'_id':'A','balance':100}", 0, 0, NULL},
    {"{'validator':{'$jsonSchema':{'properties':{'balance':{'bsonType':"
     "'long'}}}}}",
     NULL, "{'_id':'A','balance':100.5}", 0, DTX_EVALIDATION,
     "acc 'A': balance is double, must be long ($jsonSchema "
     "properties.balance.bsonType)"},
    {"{'validator':{'$jsonSchema':{'properties':{'n':{'bsonType':'int'}}}}}",
     NULL, "{'_id':'A','n':{'$numberLong':'4294967296'}}", 0,
     DTX_EVALIDATION,
     "acc 'A': n is long, must be int ($jsonSchema properties.n.bsonType)"},
    /* $type in a validator: an integer by value too */
    {"{'validator':{'n':{'$type':'int'}}}", NULL,
     "{'_id':'A','n':{'$numberLong':'7'}}", 0, 0, NULL},
    /* an _id JSON lacks is named by its Extended JSON */
    {"{'validator':{'n':{'$lt':5}}}", NULL, "{'_id':" OID ",'n':9}", 0,
     DTX_EVALIDATION,
     "acc {\"$oid\":\"0123456789abcdef01234567\"}: the validator condition "
     "{\"n\":{\"$lt\":5}} is not met"},
    {"{'validator':{'n':{'$lt':5}}}", NULL,
     "{'_id':{'$numberLong':'7'},'n':9}", 0, DTX_EVALIDATION,
     "acc 7: the validator"},
    /* a validator over BSON types */
    {"{'validator':{'at':{'$type':'date'}}}", NULL,
     "{'_id':1,'at':{'$date':'2026-01-01T00:00:00Z'}}", 0, 0, NULL},
    {"{'validator':{'at':{'$type':'date'}}}", NULL, "{'_id':1,'at':5}", 0,
     DTX_EVALIDATION,
     "acc 1: the validator condition {\"at\":{\"$type\":\"date\"}} is not "
     "met"},
    /* immutable: exact, type included, but an integer by its value
       whatever its width; objects in any key order */
    {"{'transition':{'immutable':['v']}}", "{'_id':1,'v':{'$numberLong':'5'}}",
     "{'_id':1,'v':5}", 0, 0, NULL},
    {"{'transition':{'immutable':['v']}}", "{'_id':1,'v':[5]}",
     "{'_id':1,'v':[{'$numberLong':'5'}]}", 0, 0, NULL},
    {"{'transition':{'immutable':['v']}}", "{'_id':1,'v':{'$numberLong':'5'}}",
     "{'_id':1,'v':{'$numberLong':'6'}}", 0, DTX_EVALIDATION,
     "acc 1: v may not change (transition immutable)"},
    {"{'transition':{'immutable':['v']}}", "{'_id':1,'v':5}",
     "{'_id':1,'v':{'$numberDouble':'5.0'}}", 0, DTX_EVALIDATION,
     "acc 1: v may not change (transition immutable)"},
    {"{'transition':{'immutable':['v']}}", "{'_id':1,'v':{'$numberLong':'5'}}",
     "{'_id':1,'v':{'$numberDecimal':'5'}}", 0, DTX_EVALIDATION,
     "acc 1: v may not change (transition immutable)"},
    {"{'transition':{'immutable':['v']}}", "{'_id':1,'v':{'x':1,'y':[2]}}",
     "{'_id':1,'v':{'y':[2],'x':1}}", 0, 0, NULL},
    {"{'transition':{'immutable':['v']}}",
     "{'_id':1,'v':{'$numberDouble':'NaN'}}",
     "{'_id':1,'v':{'$numberDouble':'NaN'}}", 0, 0, NULL},
    {"{'transition':{'immutable':['v.1']}}", "{'_id':1,'v':[0," OID "]}",
     "{'_id':1,'v':[1," OID "]}", 0, 0, NULL},
    /* increasing: across numeric types, exactly */
    {"{'transition':{'increasing':['n']}}", "{'_id':1,'n':5}",
     "{'_id':1,'n':{'$numberDecimal':'5.5'}}", 0, 0, NULL},
    {"{'transition':{'increasing':['n']}}",
     "{'_id':1,'n':{'$numberDecimal':'6.5'}}",
     "{'_id':1,'n':{'$numberLong':'6'}}", 0, DTX_EVALIDATION,
     "acc 1: n may not decrease: {\"$numberDecimal\":\"6.5\"} -> 6 "
     "(transition increasing)"},
    {"{'transition':{'increasing':['n']}}",
     "{'_id':1,'n':{'$numberLong':'9223372036854775807'}}",
     "{'_id':1,'n':9.223372036854775807e18}", 0, 0, NULL},
    /* the depth check, whatever the bypass */
    {NULL, NULL, "{'_id':1,'a':[[[[[[[[[[1]]]]]]]]]]}", 1, 0, NULL},
};

static void test_write_rows(void) {
  for (size_t i = 0; i < sizeof write_rows / sizeof *write_rows; i++) {
    const wrow_t *t = &write_rows[i];
    bson_t rs, b, a;
    int ok = (t->rules ? ej(t->rules, &rs) : (bson_init(&rs), 0)) == 0;
    ok &= (t->before ? ej(t->before, &b) : (bson_init(&b), 0)) == 0;
    ok &= (t->after ? ej(t->after, &a) : (bson_init(&a), 0)) == 0;
    CHECKF(ok, "[%zu] ejson: %s", i, dtx_errdetail());
    dtx__brules_t *r = NULL;
    int rc = dtx__brules_compile(t->rules ? &rs : NULL, &r);
    CHECKF(rc == 0, "[%zu] compile: %s", i, dtx_errdetail());
    rc = dtx__bdoc_check_write(r, "acc", t->before ? bson_get_data(&b) : NULL,
                               b.len, t->after ? bson_get_data(&a) : NULL,
                               a.len, t->bypass);
    CHECKF(rc == t->want, "[%zu] got %s (%s), want %s", i, dtx_errname(rc),
           dtx_errdetail(), dtx_errname(t->want));
    if (t->want && rc == t->want)
      CHECKF(strncmp(dtx_errdetail(), t->detail, strlen(t->detail)) == 0,
             "[%zu] detail '%s' does not start with '%s'", i, dtx_errdetail(),
             t->detail);
    dtx__brules_free(r);
    bson_destroy(&rs);
    bson_destroy(&b);
    bson_destroy(&a);
  }
}

/* The depth limit on BSON, with the json_t engine's detail. */
static void test_depth(void) {
  static const int levels[] = {1, 2, 99, 100, 101, 102};
  for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
    json_t *j = JNEST(levels[i], "a");
    bson_t b = BSON_INITIALIZER;
    int jrc = dtx__depth_check(j, DTX_EINVAL, "doc");
    char jd[512];
    snprintf(jd, sizeof jd, "%s", jrc ? dtx_errdetail() : "");
    int brc = dtx__bson_from_json(j, &b);
    if (brc == 0) {
      brc = dtx__bdepth_check(bson_get_data(&b), b.len, DTX_EINVAL, "doc");
      CHECKF(brc == jrc, "[%d] json %d bson %d", levels[i], jrc, brc);
      if (jrc)
        CHECKF(strcmp(jd, dtx_errdetail()) == 0, "[%d] '%s' vs '%s'",
               levels[i], jd, dtx_errdetail());
    } else {
      printf("  depth %d: the bridge refuses (%s)\n", levels[i],
             dtx_errdetail());
    }
    bson_destroy(&b);
    json_decref(j);
  }
  /* The smallest document of each depth (empty names): its size is
   * 5 + 7 per level past the first, the bound dtx__bdepth_check skips
   * the walk under, and the one of DTX_MAX_DEPTH + 1 levels is refused. */
  for (int lv = DTX_MAX_DEPTH - 1; lv <= DTX_MAX_DEPTH + 2; lv++) {
    bson_t *in = bson_new();
    for (int k = 1; k < lv; k++) {
      bson_t *out = bson_new();
      bson_append_document(out, "", 0, in);
      bson_destroy(in);
      in = out;
    }
    CHECKF(in->len == (uint32_t)(5 + 7 * (lv - 1)), "[%d] %u bytes", lv,
           in->len);
    int rc = dtx__bdepth_check(bson_get_data(in), in->len, DTX_EINVAL, "doc");
    CHECKF(rc == (lv > DTX_MAX_DEPTH ? DTX_EINVAL : 0),
           "[%d levels, %u bytes] got %d", lv, in->len, rc);
    bson_destroy(in);
  }
}

/* A rule may nest 100 levels (rules.c checks each part on its own), which
 * its rules document wraps in one more: both engines compile it, and
 * refuse one level more (the BSON detail is the document check's). */
static void test_rules_depth(void) {
  static const char *const parts[] = {"validator", "delete_guard"};
  for (size_t p = 0; p < 2; p++)
    for (int lv = 99; lv <= 101; lv++) {
      json_t *r = json_object(), *arr = json_array();
      json_object_set_new(r, parts[p], JNEST(lv, "k"));
      bsd_out_t o;
      int v = bsd_rules_run(r, NULL, NULL, 0, &o);
      CHECKF(v == (lv <= 100 ? BSD_SAME : BSD_SKIP), "%s of %d levels: %s",
             parts[p], lv, o.why);
      CHECKF(o.rc == (lv <= 100 ? 0 : DTX_EBADQUERY), "%s of %d levels: %s",
             parts[p], lv, dtx_errname(o.rc));
      /* the fuzz target's find: an array where an object is due */
      json_t *a = JNEST(lv, "k");
      json_array_append_new(arr, json_deep_copy(json_object_get(a, "k")));
      json_decref(a);
      json_object_set_new(r, parts[p], arr);
      v = bsd_rules_run(r, NULL, NULL, 0, &o);
      CHECKF(v == BSD_SAME && o.rc == DTX_EBADQUERY,
             "%s array of %d levels: %s (%s)", parts[p], lv, o.why,
             dtx_errname(o.rc));
      json_decref(r);
    }
  /* a transition array's objects may nest 100 levels each, too */
  for (int lv = 99; lv <= 101; lv++) {
    json_t *t = json_object(), *r = json_object();
    json_object_set_new(t, "insert", JNEST(lv - 1, "k"));
    json_object_set_new(r, "transition", json_pack("[o]", t));
    bsd_out_t o;
    int v = bsd_rules_run(r, NULL, NULL, 0, &o);
    CHECKF(v == (lv <= 100 ? BSD_SAME : BSD_SKIP) &&
               o.rc == (lv <= 100 ? 0 : DTX_EBADQUERY),
           "transition[0] of %d levels: %s (%s)", lv, o.why,
           dtx_errname(o.rc));
    json_decref(r);
  }
}

/* Rules whose bytes are broken at any level are refused, nothing read
 * past the fault (dtx__brules_compile checks each level before reading
 * it; ASan watches). */
static void test_rules_bad_bytes(void) {
  static const char *const rules[] = {
      "{'validator':{'a':'xyz'}}",
      "{'delete_guard':{'a':'xyz'}}",
      "{'transition':{'immutable':['xyz']}}",
      "{'transition':[{'immutable':['xyz']}]}",
      "{'pattern':'xyz','validator':{'a':1}}",
  };
  for (size_t i = 0; i < sizeof rules / sizeof *rules; i++) {
    bson_t b;
    CHECK(ej(rules[i], &b) == 0);
    uint8_t *d = malloc(b.len);
    REQUIRE(d);
    memcpy(d, bson_get_data(&b), b.len);
    /* the string "xyz": its length said to run past everything, then its
     * terminator taken away, then a byte that is no UTF-8 */
    uint8_t *x = memmem(d, b.len, "xyz", 4);
    REQUIRE(x && x - d >= 4);
    for (int how = 0; how < 3; how++) {
      uint8_t save[8];
      memcpy(save, x - 4, 8);
      if (how == 0)
        memcpy(x - 4, "\xff\xff\x00\x00", 4);
      else if (how == 1)
        x[3] = 'w';
      else
        x[0] = 0xff;
      bson_t bad;
      REQUIRE(bson_init_static(&bad, d, b.len));
      dtx__brules_t *r = NULL;
      int rc = dtx__brules_compile(&bad, &r);
      CHECKF(rc == DTX_EBADQUERY && !r &&
                 strstr(dtx_errdetail(), "is not a valid document"),
             "%s broken %d: %s (%s)", rules[i], how, dtx_errname(rc),
             dtx_errdetail());
      dtx__brules_free(r);
      memcpy(x - 4, save, 8);
    }
    dtx__brules_t *r = NULL;
    bson_t good;
    REQUIRE(bson_init_static(&good, d, b.len));
    CHECK_RC(dtx__brules_compile(&good, &r), 0);
    dtx__brules_free(r);
    free(d);
    bson_destroy(&b);
  }
  /* a terminator before the end, where a reader would stop early and
   * leave bytes unread */
  bson_t b;
  REQUIRE(ej("{'validator':{'a':1},'zz':'xyz'}", &b) == 0);
  uint8_t *d = malloc(b.len);
  REQUIRE(d);
  memcpy(d, bson_get_data(&b), b.len);
  uint8_t *z = memmem(d, b.len, "zz", 3);
  REQUIRE(z && z > d);
  z[-1] = 0;
  bson_t bad;
  REQUIRE(bson_init_static(&bad, d, b.len));
  dtx__brules_t *r = NULL;
  int rc = dtx__brules_compile(&bad, &r);
  CHECKF(rc == DTX_EBADQUERY && !r, "early end: %s (%s)", dtx_errname(rc),
         dtx_errdetail());
  dtx__brules_free(r);
  free(d);
  bson_destroy(&b);
}

/* The write check's bounds on BSON, bypass or not: the depth (with the
 * json_t engine's detail) and the 16 MiB of a document. */
static void test_write_bounds(void) {
  json_t *deep = JNEST(DTX_MAX_DEPTH + 1, "a");
  json_object_set_new(deep, "_id", json_string("D"));
  bson_t b = BSON_INITIALIZER;
  CHECK_RC(dtx__bson_from_json(deep, &b), 0);
  CHECK_RC(dtx__doc_check_write(NULL, "acc", NULL, deep, 1), DTX_EINVAL);
  char jd[512];
  snprintf(jd, sizeof jd, "%s", dtx_errdetail());
  CHECK_RC(dtx__bdoc_check_write(NULL, "acc", NULL, 0, bson_get_data(&b),
                                 b.len, 1),
           DTX_EINVAL);
  CHECKF(strcmp(jd, dtx_errdetail()) == 0, "'%s' vs '%s'", jd,
         dtx_errdetail());
  CHECKF(strncmp(dtx_errdetail(), "acc 'D' nests deeper than 100", 29) == 0,
         "%s", dtx_errdetail());
  bson_destroy(&b);
  json_decref(deep);
  /* Past 16 MiB: DTX_ELIMIT naming the document. */
  size_t n = DTX__DOC_MAX;
  char *big = malloc(n + 1);
  REQUIRE(big);
  memset(big, 'x', n);
  big[n] = '\0';
  bson_init(&b);
  BSON_APPEND_INT32(&b, "_id", 3);
  CHECK(bson_append_utf8(&b, "s", 1, big, (int)n));
  CHECK_RC(dtx__bdoc_check_write(NULL, "acc", NULL, 0, bson_get_data(&b),
                                 b.len, 1),
           DTX_ELIMIT);
  CHECKF(strncmp(dtx_errdetail(), "acc 3 would hold more than 16 MiB", 33) ==
             0,
         "%s", dtx_errdetail());
  bson_destroy(&b);
  free(big);
}

/* ---- transition rules through both engines ------------------------------- */

typedef struct trow {
  const char *rules, *before, *after; /* plain JSON, ' for " */
  int bypass;
  const char *step; /* dtx__rules_step_enter around the check, or NULL */
} trow_t;

#define IMM "{'transition':{'immutable':['owner','a.b']}}"
#define MOVES                                                              \
  "{'transition':{'moves':[{'from':{'s':'new'},'to':{'s':'paid'},"     \
  "'name':'pay'},"                                                         \
  "{'from':{'s':'new'},'to':{'s':'void'}}],'why':'orders move forward'}}"
#define PLAIN                                                              \
  "{'transition':[{'immutable':['k'],'scope':'plain','steps':['transfer']}," \
  "{'insert':{'s':'new'},'delete':{'s':'void'}}]}"

static const trow_t trans_rows[] = {
    {IMM, "{'_id':1,'owner':'x','a':{'b':[1]}}",
     "{'_id':1,'owner':'x','a':{'b':[1]},'n':2}", 0, NULL},
    {IMM, "{'_id':1,'owner':'x'}", "{'_id':1,'owner':'y'}", 0, NULL},
    {IMM, "{'_id':1,'owner':'x'}", "{'_id':1}", 0, NULL},
    {IMM, "{'_id':1,'a':{'b':5}}", "{'_id':1,'a':{'b':5.0}}", 0, NULL},
    {IMM, "{'_id':1,'a':{'b':{'c':1,'d':2}}}",
     "{'_id':1,'a':{'b':{'d':2,'c':1}}}", 0, NULL},
    {IMM, "{'_id':1,'owner':'x'}", "{'_id':1,'owner':'y'}", 1, NULL},
    {"{'transition':{'immutable':['a.1.b']}}", "{'_id':1,'a':[0,{'b':1}]}",
     "{'_id':1,'a':[0,{'b':2}]}", 0, NULL},
    {"{'transition':{'immutable':['a.01']}}", "{'_id':1,'a':[0,1]}",
     "{'_id':1,'a':[0,2]}", 0, NULL},
    {"{'transition':{'immutable':['a.x']}}", "{'_id':1,'a':[{'x':1}]}",
     "{'_id':1,'a':[{'x':2}]}", 0, NULL},
    {"{'transition':{'increasing':['n']}}", "{'_id':'c','n':5}",
     "{'_id':'c','n':4.5}", 0, NULL},
    {"{'transition':{'increasing':['n']}}", "{'_id':'c','n':5}",
     "{'_id':'c'}", 0, NULL},
    {"{'transition':{'increasing':['n']}}", "{'_id':'c','n':'x'}",
     "{'_id':'c','n':1}", 0, NULL},
    {"{'transition':{'increasing':['n']}}", "{'_id':'c','n':5}",
     "{'_id':'c','n':5.0}", 0, NULL},
    {MOVES, "{'_id':1,'s':'new'}", "{'_id':1,'s':'paid'}", 0, NULL},
    {MOVES, "{'_id':1,'s':'new'}", "{'_id':1,'s':'shipped'}", 0, NULL},
    {MOVES, "{'_id':1,'s':'paid'}", "{'_id':1,'s':'new'}", 0, NULL},
    {PLAIN, "{'_id':1,'k':1,'s':'new'}", "{'_id':1,'k':2,'s':'new'}", 0,
     NULL},
    {PLAIN, "{'_id':1,'k':1,'s':'new'}", "{'_id':1,'k':2,'s':'new'}", 0,
     "transfer.debit"},
    {PLAIN, "{'_id':1,'k':1,'s':'new'}", "{'_id':1,'k':2,'s':'new'}", 0,
     "jobq.claim"},
    {PLAIN, NULL, "{'_id':1,'s':'new'}", 0, NULL},
    {PLAIN, NULL, "{'_id':1,'s':'paid'}", 0, NULL},
    {PLAIN, "{'_id':1,'s':'paid'}", NULL, 0, NULL},
    {PLAIN, "{'_id':1,'s':'void'}", NULL, 0, NULL},
    {"{'transition':{'insert':false}}", NULL, "{'_id':1}", 0, NULL},
    /* refused specs */
    {"{'transition':[]}", NULL, NULL, 0, NULL},
    {"{'transition':{}}", NULL, NULL, 0, NULL},
    {"{'transition':{'immutable':[]}}", NULL, NULL, 0, NULL},
    {"{'transition':{'immutable':['a','a']}}", NULL, NULL, 0, NULL},
    {"{'transition':{'immutable':['a..b']}}", NULL, NULL, 0, NULL},
    {"{'transition':{'immutable':[5]}}", NULL, NULL, 0, NULL},
    {"{'transition':{'moves':[{'from':{}}]}}", NULL, NULL, 0, NULL},
    {"{'transition':{'moves':[{'from':{},'to':{},'x':1}]}}", NULL, NULL, 0,
     NULL},
    {"{'transition':{'moves':[{'from':{'$bad':1},'to':{}}]}}", NULL, NULL, 0,
     NULL},
    {"{'transition':{'moves':[{'from':{},'to':{},'name':''}]}}", NULL, NULL,
     0, NULL},
    {"{'transition':{'moves':[5]}}", NULL, NULL, 0, NULL},
    {"{'transition':{'insert':true}}", NULL, NULL, 0, NULL},
    {"{'transition':{'delete':5,'immutable':['a']}}", NULL, NULL, 0, NULL},
    {"{'transition':{'scope':'some','immutable':['a']}}", NULL, NULL, 0,
     NULL},
    {"{'transition':{'steps':['x'],'immutable':['a']}}", NULL, NULL, 0, NULL},
    {"{'transition':{'steps':['X'],'scope':'plain','immutable':['a']}}", NULL,
     NULL, 0, NULL},
    {"{'transition':{'why':'','immutable':['a']}}", NULL, NULL, 0, NULL},
    {"{'transition':{'bogus':1}}", NULL, NULL, 0, NULL},
    {"{'transition':{'scope':'plain'}}", NULL, NULL, 0, NULL},
    {"{'pattern':'Bad','validator':{'a':1}}", NULL, NULL, 0, NULL},
    {"{'pattern':'ledger','transition':{'immutable':['a'],'pattern':'x y'}}",
     NULL, NULL, 0, NULL},
    {"{'validator':{'$jsonSchema':{'bsonType':'object'},'a':{'$gt':1}}}",
     NULL, "{'_id':1,'a':1}", 0, NULL},
    {"{'validator':{'$jsonSchema':{'bsonType':'object'},'a':{'$gt':1}}}",
     NULL, "{'_id':1,'a':2}", 0, NULL},
    {"{'validator':{'$jsonSchema':{'properties':{'balance':{'bsonType':"
     "'long'}}}}}",
     NULL, "{'_id':'A','balance':100}", 0, NULL},
};

static size_t tcounts[4];

static void test_trans_rows(void) {
  for (size_t i = 0; i < sizeof trans_rows / sizeof *trans_rows; i++) {
    const trow_t *t = &trans_rows[i];
    json_t *r = JQNEW(t->rules);
    json_t *b = t->before ? JQNEW(t->before) : NULL;
    json_t *a = t->after ? JQNEW(t->after) : NULL;
    const char *saved = t->step ? dtx__rules_step_enter(t->step) : NULL;
    bsd_out_t o;
    int v = bsd_rules_run(r, b, a, t->bypass, &o);
    if (t->step)
      dtx__rules_step_leave(saved);
    tcounts[v]++;
    if (v == BSD_SKIP)
      printf("  trans_rows[%zu] skipped: %s\n", i, o.why);
    CHECKF(v != BSD_DIFF, "trans_rows[%zu]: %s", i, o.why);
    json_decref(r);
    json_decref(b);
    json_decref(a);
  }
  printf("trans_rows through both engines: %zu the same (integers as the "
         "bridge writes them and as int64), %zu skipped\n",
         tcounts[BSD_SAME], tcounts[BSD_SKIP]);
}

int main(void) {
  TEST_RUN(test_match_rows);
  TEST_RUN(test_int_rows);
  TEST_RUN(test_bad_rows);
  TEST_RUN(test_write_rows);
  TEST_RUN(test_depth);
  TEST_RUN(test_rules_depth);
  TEST_RUN(test_rules_bad_bytes);
  TEST_RUN(test_write_bounds);
  TEST_RUN(test_trans_rows);
  return TEST_DONE();
}
