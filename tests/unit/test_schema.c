/* test_schema.c -- the $jsonSchema subset (schema.c), collection rules and
 * the write check (rules.c), and the document depth limit.
 *
 * Tables, JSON in single quotes:
 *  - match_cases: (schema, document, valid?, a string the reason must
 *    contain when invalid).  Each keyword is met with the values it
 *    constrains and with values it must ignore (JSON Schema semantics:
 *    minimum says nothing about strings), including the type corner cases
 *    of doctx's JSON documents: integers are "long" (and "int" within 32
 *    bits), reals "double", so 0.0 is not a long.
 *  - bad_schemas: schemas refused with DTX_EBADQUERY, and the keyword (and
 *    place) the detail must name.
 *  - rule_cases: whole rules -- query operators beside $jsonSchema, and the
 *    delete guard -- through dtx__doc_check_write, with the detail's exact
 *    prefix "coll 'id': ".
 */
#include "bschemadiff.h"
#include "testlib.h"

#include "doc/doc.h"

#include <string.h>

/* ---- the BSON leg (bschemadiff.h) ------------------------------------------
 * Every row of match_cases and bad_schemas runs through both engines by
 * the bridge; the counts (and each skip's reason) print at the end. */
static size_t bsd_counts[4];

static void bsd_row(const char *table, size_t i, const json_t *spec,
                    const json_t *value) {
  bsd_out_t o;
  int v = bsd_run(spec, value, &o);
  bsd_counts[v]++;
  if (v == BSD_SKIP)
    printf("  bson leg: %s[%zu] skipped: %s\n", table, i, o.why);
  CHECKF(v != BSD_DIFF, "bson leg: %s[%zu]: %s", table, i, o.why);
}

static void bsd_rules_row(const char *table, size_t i, const json_t *rules,
                          const json_t *before, const json_t *after,
                          int bypass) {
  bsd_out_t o;
  int v = bsd_rules_run(rules, before, after, bypass, &o);
  bsd_counts[v]++;
  if (v == BSD_SKIP)
    printf("  bson leg: %s[%zu] skipped: %s\n", table, i, o.why);
  CHECKF(v != BSD_DIFF, "bson leg: %s[%zu]: %s", table, i, o.why);
}

static void test_bson_counts(void) {
  printf("bson leg: %zu rows the same (integers as the bridge writes them "
         "and as int64), %zu skipped, %zu different\n",
         bsd_counts[BSD_SAME], bsd_counts[BSD_SKIP], bsd_counts[BSD_DIFF]);
  CHECK(bsd_counts[BSD_SAME] > 0);
}

typedef struct mcase {
  const char *schema;
  const char *doc;
  int valid;
  const char *why; /* substring of the reason when invalid */
} mcase_t;

static const mcase_t match_cases[] = {
    /* bsonType, one name or several */
    {"{'bsonType':'object'}", "{}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'long'}}}", "{'a':5}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'long'}}}", "{'a':5.0}", 0,
     "a is double, must be long ($jsonSchema properties.a.bsonType)"},
    {"{'properties':{'a':{'bsonType':'long'}}}", "{'a':'5'}", 0,
     "a is string, must be long"},
    {"{'properties':{'a':{'bsonType':'long'}}}", "{}", 1, NULL},
    {"{'properties':{'a':{'bsonType':['long','null']}}}", "{'a':null}", 1,
     NULL},
    {"{'properties':{'a':{'bsonType':['long','null']}}}", "{'a':0.0}", 0,
     "a is double, must be long or null"},
    {"{'properties':{'a':{'bsonType':['long','null','string']}}}",
     "{'a':true}", 0, "must be long, null or string"},
    {"{'properties':{'a':{'bsonType':'int'}}}", "{'a':2147483647}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'int'}}}", "{'a':-2147483648}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'int'}}}", "{'a':2147483648}", 0,
     "a is long, must be int"},
    {"{'properties':{'a':{'bsonType':'long'}}}", "{'a':9223372036854775807}", 1,
     NULL},
    {"{'properties':{'a':{'bsonType':'double'}}}", "{'a':1.5}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'double'}}}", "{'a':1}", 0,
     "a is long, must be double"},
    {"{'properties':{'a':{'bsonType':'number'}}}", "{'a':1}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'number'}}}", "{'a':1e300}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'number'}}}", "{'a':'1'}", 0,
     "must be number"},
    {"{'properties':{'a':{'bsonType':'bool'}}}", "{'a':false}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'bool'}}}", "{'a':0}", 0,
     "a is long, must be bool"},
    {"{'properties':{'a':{'bsonType':'array'}}}", "{'a':[]}", 1, NULL},
    {"{'properties':{'a':{'bsonType':'array'}}}", "{'a':{}}", 0,
     "a is object, must be array"},
    {"{'properties':{'a':{'bsonType':'string'}}}", "{'a':''}", 1, NULL},
    {"{'bsonType':'array'}", "{}", 0, "document is object, must be array"},
    /* type: JSON Schema names */
    {"{'properties':{'a':{'type':'number'}}}", "{'a':-3}", 1, NULL},
    {"{'properties':{'a':{'type':'boolean'}}}", "{'a':true}", 1, NULL},
    {"{'properties':{'a':{'type':['string','null']}}}", "{'a':1}", 0,
     "a is long, must be string or null ($jsonSchema properties.a.type)"},
    {"{'properties':{'a':{'type':'object'}}}", "{'a':{'b':1}}", 1, NULL},
    /* required */
    {"{'required':['a','b']}", "{'a':1,'b':null}", 1, NULL},
    {"{'required':['a','b']}", "{'a':1}", 0,
     "document is missing required field 'b' ($jsonSchema required)"},
    {"{'properties':{'p':{'required':['x']}}}", "{'p':{'y':1}}", 0,
     "p is missing required field 'x' ($jsonSchema properties.p.required)"},
    {"{'properties':{'p':{'required':['x']}}}", "{'p':5}", 1, NULL},
    /* properties, nested */
    {"{'properties':{'a':{'properties':{'b':{'bsonType':'string'}}}}}",
     "{'a':{'b':1}}", 0,
     "a.b is long, must be string ($jsonSchema properties.a.properties.b."
     "bsonType)"},
    /* additionalProperties */
    {"{'properties':{'_id':{},'a':{}},'additionalProperties':false}",
     "{'_id':1,'a':2}", 1, NULL},
    {"{'properties':{'_id':{},'a':{}},'additionalProperties':false}",
     "{'_id':1,'a':2,'b':3}", 0,
     "has field 'b', which is not in properties ($jsonSchema "
     "additionalProperties)"},
    {"{'properties':{'a':{}},'additionalProperties':true}", "{'z':1}", 1,
     NULL},
    /* enum (values compared as $eq does: 1 equals 1.0) */
    {"{'properties':{'s':{'enum':['a','b']}}}", "{'s':'b'}", 1, NULL},
    {"{'properties':{'s':{'enum':['a','b']}}}", "{'s':'c'}", 0,
     "s must be one of [\"a\",\"b\"] ($jsonSchema properties.s.enum)"},
    {"{'properties':{'s':{'enum':[1,[2],{'x':3}]}}}", "{'s':1.0}", 1, NULL},
    {"{'properties':{'s':{'enum':[1,[2],{'x':3}]}}}", "{'s':[2]}", 1, NULL},
    {"{'properties':{'s':{'enum':[1,[2],{'x':3}]}}}", "{'s':{'x':3}}", 1,
     NULL},
    {"{'properties':{'s':{'enum':[null]}}}", "{'s':false}", 0, "one of"},
    /* minimum / maximum, draft-4 exclusive flags, exact int64 */
    {"{'properties':{'n':{'minimum':0}}}", "{'n':0}", 1, NULL},
    {"{'properties':{'n':{'minimum':0}}}", "{'n':-1}", 0,
     "n must be >= 0 ($jsonSchema properties.n.minimum)"},
    {"{'properties':{'n':{'minimum':0,'exclusiveMinimum':true}}}", "{'n':0}",
     0, "n must be > 0 ($jsonSchema properties.n.exclusiveMinimum)"},
    {"{'properties':{'n':{'minimum':0,'exclusiveMinimum':false}}}",
     "{'n':0}", 1, NULL},
    {"{'properties':{'n':{'maximum':10}}}", "{'n':10.0}", 1, NULL},
    {"{'properties':{'n':{'maximum':10}}}", "{'n':10.5}", 0,
     "n must be <= 10"},
    {"{'properties':{'n':{'maximum':10,'exclusiveMaximum':true}}}",
     "{'n':10}", 0, "n must be < 10"},
    {"{'properties':{'n':{'maximum':9223372036854775806}}}",
     "{'n':9223372036854775807}", 0, "must be <= 9223372036854775806"},
    {"{'properties':{'n':{'minimum':0}}}", "{'n':'-5'}", 1, NULL},
    /* pattern: PCRE2, unanchored (JSON Schema), strings only */
    {"{'properties':{'s':{'pattern':'^[A-Z]{3}$'}}}", "{'s':'EUR'}", 1, NULL},
    {"{'properties':{'s':{'pattern':'^[A-Z]{3}$'}}}", "{'s':'eur'}", 0,
     "s does not match /^[A-Z]{3}$/ ($jsonSchema properties.s.pattern)"},
    {"{'properties':{'s':{'pattern':'b'}}}", "{'s':'abc'}", 1, NULL},
    {"{'properties':{'s':{'pattern':'^b'}}}", "{'s':'abc'}", 0,
     "does not match"},
    {"{'properties':{'s':{'pattern':'^a'}}}", "{'s':5}", 1, NULL},
    {"{'properties':{'s':{'pattern':'^\\\\d+$'}}}", "{'s':'123'}", 1, NULL},
    {"{'properties':{'s':{'pattern':'^(a+)+$'}}}",
     "{'s':'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab'}",
     0, "pattern"},
    /* minLength / maxLength count characters, not bytes */
    {"{'properties':{'s':{'minLength':2,'maxLength':3}}}", "{'s':'ab'}", 1,
     NULL},
    {"{'properties':{'s':{'minLength':2}}}", "{'s':'a'}", 0,
     "s is 1 characters, shorter than 2 ($jsonSchema "
     "properties.s.minLength)"},
    {"{'properties':{'s':{'maxLength':3}}}", "{'s':'abcd'}", 0,
     "longer than 3"},
    {"{'properties':{'s':{'maxLength':3}}}", "{'s':'\u00e9\u00e9\u00e9'}", 1,
     NULL},
    {"{'properties':{'s':{'maxLength':0}}}", "{'s':5}", 1, NULL},
    /* items, minItems, maxItems, uniqueItems */
    {"{'properties':{'a':{'items':{'bsonType':'long'}}}}", "{'a':[1,2]}", 1,
     NULL},
    {"{'properties':{'a':{'items':{'bsonType':'long'}}}}", "{'a':[1,'x']}",
     0, "a.1 is string, must be long ($jsonSchema properties.a.items."
        "bsonType)"},
    {"{'properties':{'p':{'items':{'required':['tx']}}}}",
     "{'p':[{'tx':1},{}]}", 0,
     "p.1 is missing required field 'tx' ($jsonSchema "
     "properties.p.items.required)"},
    {"{'properties':{'a':{'minItems':1,'maxItems':2}}}", "{'a':[1]}", 1,
     NULL},
    {"{'properties':{'a':{'minItems':1}}}", "{'a':[]}", 0,
     "a has 0 items, fewer than 1"},
    {"{'properties':{'a':{'maxItems':2}}}", "{'a':[1,2,3]}", 0,
     "a has 3 items, more than 2"},
    {"{'properties':{'a':{'uniqueItems':true}}}", "{'a':[1,2,'1']}", 1, NULL},
    {"{'properties':{'a':{'uniqueItems':true}}}", "{'a':[1,2,1.0]}", 0,
     "a has duplicate items ($jsonSchema properties.a.uniqueItems)"},
    {"{'properties':{'a':{'uniqueItems':false}}}", "{'a':[1,1]}", 1, NULL},
    /* anyOf, allOf, oneOf, not */
    {"{'properties':{'x':{'anyOf':[{'bsonType':'long'},{'bsonType':"
     "'string'}]}}}",
     "{'x':'s'}", 1, NULL},
    {"{'properties':{'x':{'anyOf':[{'bsonType':'long'},{'bsonType':"
     "'string'}]}}}",
     "{'x':1.5}", 0,
     "x matches none of the 2 schemas of anyOf ($jsonSchema "
     "properties.x.anyOf)"},
    {"{'properties':{'x':{'allOf':[{'minimum':0},{'maximum':5}]}}}",
     "{'x':6}", 0, "x must be <= 5 ($jsonSchema properties.x.allOf.1.maximum)"},
    {"{'properties':{'x':{'oneOf':[{'minimum':0},{'maximum':5}]}}}",
     "{'x':9}", 1, NULL},
    {"{'properties':{'x':{'oneOf':[{'minimum':0},{'maximum':5}]}}}",
     "{'x':3}", 0, "x matches 2 of the 2 schemas of oneOf, not exactly one"},
    {"{'properties':{'x':{'not':{'bsonType':'null'}}}}", "{'x':null}", 0,
     "x matches the schema of not ($jsonSchema properties.x.not)"},
    {"{'properties':{'x':{'not':{'bsonType':'null'}}}}", "{'x':0}", 1, NULL},
    /* title and description are documentation */
    {"{'title':'t','description':'d','properties':{'a':{'description':'x'}}}",
     "{'a':1}", 1, NULL},
    /* the shape of an account, as the transfer protocol needs it */
    {"{'bsonType':'object','required':['_id','balance','pending'],"
     "'properties':{'_id':{'bsonType':'string'},'balance':{'bsonType':"
     "'long'},'min_balance':{'bsonType':['long','null']},'pending':{"
     "'bsonType':'array','items':{'bsonType':'object','required':['tx']}}}}",
     "{'_id':'A','balance':100,'min_balance':null,'pending':[{'tx':'t1'}]}", 1,
     NULL},
    {"{'bsonType':'object','required':['_id','balance','pending'],"
     "'properties':{'_id':{'bsonType':'string'},'balance':{'bsonType':"
     "'long'},'min_balance':{'bsonType':['long','null']},'pending':{"
     "'bsonType':'array','items':{'bsonType':'object','required':['tx']}}}}",
     "{'_id':'A','balance':100,'min_balance':'50','pending':[]}", 0,
     "min_balance is string, must be long or null ($jsonSchema "
     "properties.min_balance.bsonType)"},
    {"{'bsonType':'object','required':['_id','balance','pending'],"
     "'properties':{'_id':{'bsonType':'string'},'balance':{'bsonType':"
     "'long'},'min_balance':{'bsonType':['long','null']},'pending':{"
     "'bsonType':'array','items':{'bsonType':'object','required':['tx']}}}}",
     "{'_id':'A','balance':100,'pending':'x'}", 0,
     "pending is string, must be array"},
};

static json_t *Q(const char *text) { return JQNEW(text); }

static void test_match_table(void) {
  for (size_t i = 0; i < sizeof match_cases / sizeof *match_cases; i++) {
    const mcase_t *t = &match_cases[i];
    json_t *spec = Q(t->schema), *doc = Q(t->doc);
    dtx__schema_t *s = NULL;
    int rc = dtx__schema_compile(spec, &s);
    CHECKF(rc == 0, "[%zu] compile %s: %s (%s)", i, t->schema,
           dtx_errname(rc), dtx_errdetail());
    if (rc == 0) {
      char why[400] = "untouched";
      int got = dtx__schema_match(s, doc, why, sizeof why);
      CHECKF(got == t->valid, "[%zu] schema %s doc %s: got %d want %d (%s)",
             i, t->schema, t->doc, got, t->valid, why);
      if (!t->valid && got == 0)
        CHECKF(strstr(why, t->why) != NULL, "[%zu] reason '%s' lacks '%s'",
               i, why, t->why);
      /* No reason buffer: same answer, nothing written. */
      CHECK(dtx__schema_match(s, doc, NULL, 0) == got);
    }
    dtx__schema_free(s);
    bsd_row("match_cases", i, spec, doc);
    json_decref(spec);
    json_decref(doc);
  }
}

typedef struct bcase {
  const char *schema;
  const char *mention; /* the detail must contain it */
} bcase_t;

static const bcase_t bad_schemas[] = {
    {"5", "a schema must be an object"},
    {"{'pattern':5}", "pattern must be a string"},
    {"{'properties':{'s':{'pattern':'(a'}}}", "at properties.s: pattern:"},
    {"{'patternProperties':{}}", "'patternProperties'"},
    {"{'bogus':1}", "keyword 'bogus' is not supported"},
    {"{'$ref':'#/x'}", "'$ref'"},
    {"{'multipleOf':2}", "'multipleOf'"},
    {"{'minProperties':1}", "'minProperties'"},
    {"{'dependencies':{}}", "'dependencies'"},
    {"{'format':'date'}", "'format'"},
    {"{'items':[{}]}", "items must be one schema"},
    {"{'properties':{'a':{'items':{'bsonType':'nope'}}}}",
     "at properties.a.items: bsonType 'nope' is not supported"},
    {"{'additionalProperties':{}}", "additionalProperties must be true or false"},
    {"{'bsonType':'decimal'}", "bsonType 'decimal' is not supported"},
    {"{'bsonType':'date'}", "bsonType 'date' is not supported"},
    {"{'bsonType':'objectId'}", "bsonType 'objectId'"},
    {"{'type':'integer'}", "type 'integer' is not supported"},
    {"{'type':'long'}", "type 'long' is not supported"},
    {"{'bsonType':[]}", "bsonType must be a string or a non-empty array"},
    {"{'bsonType':['long','long']}", "lists 'long' twice"},
    {"{'bsonType':5}", "bsonType must be"},
    {"{'bsonType':'long','type':'number'}", "bsonType and type"},
    {"{'required':[]}", "required must be a non-empty array"},
    {"{'required':['a',1]}", "required must be"},
    {"{'required':['a','a']}", "required lists 'a' twice"},
    {"{'properties':[]}", "properties must be an object"},
    {"{'properties':{'a':5}}", "at properties.a: a schema must be an object"},
    {"{'enum':[]}", "enum must be a non-empty array"},
    {"{'enum':[1,1.0]}", "enum lists a value twice"},
    {"{'minimum':'0'}", "minimum must be a number"},
    {"{'exclusiveMinimum':true}", "exclusiveMinimum needs minimum"},
    {"{'maximum':1,'exclusiveMaximum':1}", "exclusiveMaximum must be true or "
                                           "false"},
    {"{'minLength':-1}", "minLength must be a non-negative integer"},
    {"{'maxItems':1.5}", "maxItems must be a non-negative integer"},
    {"{'uniqueItems':1}", "uniqueItems must be true or false"},
    {"{'anyOf':[]}", "anyOf must be a non-empty array"},
    {"{'oneOf':[{},{'bad':1}]}", "at oneOf.1: keyword 'bad'"},
    {"{'not':[]}", "at not: a schema must be an object"},
    {"{'title':5}", "title must be a string"},
};

static void test_bad_schemas(void) {
  for (size_t i = 0; i < sizeof bad_schemas / sizeof *bad_schemas; i++) {
    json_t *spec = Q(bad_schemas[i].schema);
    dtx__schema_t *s = (dtx__schema_t *)1;
    int rc = dtx__schema_compile(spec, &s);
    CHECKF(rc == DTX_EBADQUERY, "[%zu] %s: got %s", i, bad_schemas[i].schema,
           dtx_errname(rc));
    CHECKF(s == NULL, "[%zu] out not NULL on error", i);
    CHECKF(strstr(dtx_errdetail(), bad_schemas[i].mention) != NULL,
           "[%zu] %s: detail '%s' lacks '%s'", i, bad_schemas[i].schema,
           dtx_errdetail(), bad_schemas[i].mention);
    bsd_row("bad_schemas", i, spec, NULL);
    json_decref(spec);
  }
}

/* ---- rules and the write check ------------------------------------------------- */

typedef struct rcase {
  const char *rules;  /* {"validator":...,"delete_guard":...} */
  const char *before; /* stored document, or NULL (insert) */
  const char *after;  /* new document, or NULL (delete) */
  int bypass;
  int want;           /* 0 or a DTX_E* code */
  const char *detail; /* the detail must start with it (rc != 0) */
} rcase_t;

static const rcase_t rule_cases[] = {
    /* query operators at the top level, each condition named */
    {"{'validator':{'balance':{'$gte':0},'state':{'$in':['a','b']}}}", NULL,
     "{'_id':'A','balance':0,'state':'a'}", 0, 0, NULL},
    {"{'validator':{'balance':{'$gte':0},'state':{'$in':['a','b']}}}", NULL,
     "{'_id':'A','balance':-1,'state':'a'}", 0, DTX_EVALIDATION,
     "acc 'A': the validator condition {\"balance\":{\"$gte\":0}} is not met"},
    {"{'validator':{'balance':{'$gte':0},'state':{'$in':['a','b']}}}", NULL,
     "{'_id':7,'balance':1,'state':'c'}", 0, DTX_EVALIDATION,
     "acc 7: the validator condition {\"state\":{\"$in\":[\"a\",\"b\"]}} is "
     "not met"},
    {"{'validator':{'$or':[{'a':1},{'b':1}]}}", NULL, "{'_id':1,'b':1}", 0, 0,
     NULL},
    /* $jsonSchema beside query operators */
    {"{'validator':{'$jsonSchema':{'required':['n']},'n':{'$lt':5}}}", NULL,
     "{'_id':'x'}", 0, DTX_EVALIDATION,
     "acc 'x': document is missing required field 'n' ($jsonSchema "
     "required)"},
    {"{'validator':{'$jsonSchema':{'required':['n']},'n':{'$lt':5}}}", NULL,
     "{'_id':'x','n':7}", 0, DTX_EVALIDATION,
     "acc 'x': the validator condition {\"n\":{\"$lt\":5}} is not met"},
    {"{'validator':{'$jsonSchema':{'required':['n']},'n':{'$lt':5}}}", NULL,
     "{'_id':'x','n':4}", 0, 0, NULL},
    /* an update result is judged whatever the stored document was */
    {"{'validator':{'n':{'$lt':5}}}", "{'_id':'x','n':9}", "{'_id':'x','n':8}",
     0, DTX_EVALIDATION, "acc 'x': the validator"},
    {"{'validator':{'n':{'$lt':5}}}", "{'_id':'x','n':9}", "{'_id':'x','n':1}",
     0, 0, NULL},
    /* bypass skips the validator */
    {"{'validator':{'n':{'$lt':5}}}", NULL, "{'_id':'x','n':9}", 1, 0, NULL},
    /* the validator does not judge deletes, the guard does */
    {"{'validator':{'n':{'$lt':5}}}", "{'_id':'x','n':9}", NULL, 0, 0, NULL},
    {"{'delete_guard':{'balance':0,'pending':{'$size':0}}}",
     "{'_id':'B','balance':0,'pending':[]}", NULL, 0, 0, NULL},
    {"{'delete_guard':{'balance':0,'pending':{'$size':0}}}",
     "{'_id':'B','balance':30,'pending':[]}", NULL, 0, DTX_EVALIDATION,
     "acc 'B': delete refused: the delete_guard condition {\"balance\":0} is "
     "not met"},
    {"{'delete_guard':{'balance':0,'pending':{'$size':0}}}",
     "{'_id':'B','balance':30,'pending':[]}", NULL, 1, 0, NULL},
    {"{'delete_guard':{'$jsonSchema':{'properties':{'pending':{'maxItems':0}}"
     "}}}",
     "{'_id':'B','pending':[1]}", NULL, 0, DTX_EVALIDATION,
     "acc 'B': delete refused: pending has 1 items, more than 0 ($jsonSchema "
     "properties.pending.maxItems)"},
    /* the guard does not judge writes */
    {"{'delete_guard':{'balance':0}}", NULL, "{'_id':'B','balance':5}", 0, 0,
     NULL},
    /* empty rules are none */
    {"{'validator':{},'delete_guard':null}", NULL, "{'_id':1}", 0, 0, NULL},
};

static void test_rule_table(void) {
  for (size_t i = 0; i < sizeof rule_cases / sizeof *rule_cases; i++) {
    const rcase_t *t = &rule_cases[i];
    json_t *spec = Q(t->rules);
    json_t *before = t->before ? Q(t->before) : NULL;
    json_t *after = t->after ? Q(t->after) : NULL;
    dtx__rules_t *r = NULL;
    int rc = dtx__rules_compile(spec, &r);
    CHECKF(rc == 0, "[%zu] compile %s: %s (%s)", i, t->rules, dtx_errname(rc),
           dtx_errdetail());
    rc = dtx__doc_check_write(r, "acc", before, after, t->bypass);
    CHECKF(rc == t->want, "[%zu] %s: got %s (%s), want %s", i, t->rules,
           dtx_errname(rc), dtx_errdetail(), dtx_errname(t->want));
    if (t->want && rc == t->want)
      CHECKF(strncmp(dtx_errdetail(), t->detail, strlen(t->detail)) == 0,
             "[%zu] detail '%s' does not start with '%s'", i, dtx_errdetail(),
             t->detail);
    dtx__rules_free(r);
    bsd_rules_row("rule_cases", i, spec, before, after, t->bypass);
    json_decref(spec);
    json_decref(before);
    json_decref(after);
  }
}

static void test_rules_normalised(void) {
  json_t *spec = Q("{'validator':{'a':1},'delete_guard':{}}");
  dtx__rules_t *r = NULL;
  CHECK_RC(dtx__rules_compile(spec, &r), 0);
  char *t = JDUMP(dtx__rules_spec(r));
  CHECKF(t && strcmp(t, "{\"validator\":{\"a\":1},\"delete_guard\":null,"
                        "\"transition\":null}") == 0,
         "spec %s", t ? t : "(null)");
  free(t);
  dtx__rules_free(r);
  json_decref(spec);
  /* No rule at all compiles to nothing. */
  spec = Q("{'validator':null,'delete_guard':{}}");
  r = (dtx__rules_t *)1;
  CHECK_RC(dtx__rules_compile(spec, &r), 0);
  CHECK(r == NULL);
  CHECK_RC(dtx__rules_compile(NULL, &r), 0);
  CHECK(r == NULL);
  json_decref(spec);
}

static void test_bad_rules(void) {
  static const struct {
    const char *rules, *mention;
  } t[] = {
      {"{'validator':{'a':{'$foo':1}}}", "validator"},
      {"{'validator':{'a':{'$foo':1}}}", "$foo"},
      {"{'validator':{'$jsonSchema':{'pattern':'('}}}", "pattern"},
      {"{'delete_guard':{'$where':'1'}}", "delete_guard"},
      {"{'validator':5}", "validator must be an object"},
      {"{'delete_guard':[]}", "delete_guard must be an object"},
      {"[1]", "rules must be an object"},
      {"{'transition':5}", "transition must be an object"},
      {"{'transition':{'immutable':'a'}}", "transition[0].immutable"},
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    json_t *spec = Q(t[i].rules);
    dtx__rules_t *r = (dtx__rules_t *)1;
    int rc = dtx__rules_compile(spec, &r);
    CHECKF(rc == DTX_EBADQUERY, "[%zu] %s: %s", i, t[i].rules,
           dtx_errname(rc));
    CHECKF(r == NULL, "[%zu] out set on error", i);
    CHECKF(strstr(dtx_errdetail(), t[i].mention), "[%zu] '%s' lacks '%s'", i,
           dtx_errdetail(), t[i].mention);
    bsd_rules_row("bad_rules", i, spec, NULL, NULL, 0);
    json_decref(spec);
  }
}

/* ---- the depth limit -------------------------------------------------------------- */


static void test_depth_limit(void) {
  json_t *ok = JNEST(DTX_MAX_DEPTH, "a");
  json_t *deep = JNEST(DTX_MAX_DEPTH + 1, "a");
  CHECK_RC(dtx__depth_check(ok, DTX_EINVAL, "doc"), 0);
  CHECK_RC(dtx__depth_check(deep, DTX_EINVAL, "doc"), DTX_EINVAL);
  CHECKF(strstr(dtx_errdetail(), "doc nests deeper than 100 levels (the "
                                 "limit): level 101 is reached at a.a.a."),
         "%s", dtx_errdetail());
  /* Arrays count as levels too, and the path shows their indexes. */
  json_t *arr = json_pack("{s:[i,{s:o}]}", "x", 1, "y", JNEST(99, "b"));
  CHECK_RC(dtx__depth_check(arr, DTX_EINVAL, "doc"), DTX_EINVAL);
  CHECKF(strstr(dtx_errdetail(), "at x.1.y.b.b"), "%s", dtx_errdetail());
  /* The write check applies it to every stored document, bypass or not. */
  json_object_set_new(deep, "_id", json_string("D"));
  CHECK_RC(dtx__doc_check_write(NULL, "acc", NULL, deep, 1), DTX_EINVAL);
  CHECKF(strncmp(dtx_errdetail(), "acc 'D' nests deeper than 100", 29) == 0,
         "%s", dtx_errdetail());
  CHECK_RC(dtx__doc_check_write(NULL, "acc", NULL, ok, 0), 0);
  /* A very deep value (past jansson's own 2048) is measured without
   * recursing through it, and the long path is shortened. */
  json_t *huge = JNEST(3000, "segment");
  CHECK_RC(dtx__depth_check(huge, DTX_EINVAL, "doc"), DTX_EINVAL);
  CHECKF(strlen(dtx_errdetail()) < 400 && strstr(dtx_errdetail(), "..."),
         "%s", dtx_errdetail());
  json_decref(ok);
  json_decref(deep);
  json_decref(arr);
  json_decref(huge);
}

int main(void) {
  TEST_RUN(test_match_table);
  TEST_RUN(test_bad_schemas);
  TEST_RUN(test_rule_table);
  TEST_RUN(test_rules_normalised);
  TEST_RUN(test_bad_rules);
  TEST_RUN(test_depth_limit);
  TEST_RUN(test_bson_counts);
  return TEST_DONE();
}
