/* test_bagg.c -- the BSON aggregation pipeline (bagg.h) on what only BSON
 * can say.  Every row of test_agg.c already runs through both engines;
 * this table is for MongoDB's types: arithmetic promotion (int32 -> int64
 * -> double, Decimal128 wins; an int64 overflow becomes a double, as the
 * manual's $add says), Date arithmetic ($add of a Date and ms, $subtract
 * of two Dates), $type's aliases, $group keys equal across number types,
 * $sum/$avg over decimals, and the int64 $count/$unwind index MongoDB
 * gives.  Rows: input {'d': [documents]}, pipeline {'p': [stages]}, in
 * Extended JSON v2 with ' for "; the result is the canonical Extended
 * JSON of the result array as a document ({"0": ..., "1": ...}), or an
 * error code and a fragment of its detail. */
#include "testlib.h"

#include "doc/bagg.h"
#include "doc/bdoc.h"

#include <stdlib.h>
#include <string.h>

typedef struct row {
  const char *in, *pipeline, *want;
  int rc;
  const char *detail;
} row_t;

#define OK(i, p, w) {i, p, w, 0, NULL}
#define ERR(i, p, c, d) {i, p, NULL, c, d}

static void X(const char *text, bson_t *out) {
  char *s = strdup(text);
  if (!s)
    abort();
  for (char *p = s; *p; p++)
    if (*p == '\'')
      *p = '"';
  bson_init(out);
  if (dtx__ejson_read(s, strlen(s), out)) {
    fprintf(stderr, "test EJSON error in %s: %s\n", text, dtx_errdetail());
    abort();
  }
  free(s);
}

/* The array under key k of document b. */
static dtx__bval_t under(const bson_t *b, const char *k) {
  dtx__belem_t e;
  if (!dtx__belem_find(bson_get_data(b), b->len, k, strlen(k), &e) ||
      e.v.type != BSON_TYPE_ARRAY)
    abort();
  return e.v;
}

#define I(n) "{'$numberInt':'" #n "'}"
#define L(n) "{'$numberLong':'" #n "'}"
#define D(n) "{'$numberDouble':'" #n "'}"
#define M(n) "{'$numberDecimal':'" n "'}"
#define DT(n) "{'$date':{'$numberLong':'" #n "'}}"
#define PROJ(e) "{'p':[{'$project':{'_id':0,'r':" e "}}]}"
#define R(v) "{\"0\":{\"r\":" v "}}"

static const row_t rows[] = {
    /* $add: the manual's promotion */
    OK("{'d':[{'a':1,'b':2}]}", PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberInt\":\"3\"}")),
    OK("{'d':[{'a':2147483647,'b':1}]}", PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberLong\":\"2147483648\"}")),
    OK("{'d':[{'a':" L(1) ",'b':1}]}", PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberLong\":\"2\"}")),
    OK("{'d':[{'a':" L(9223372036854775807) ",'b':1}]}",
       PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberDouble\":\"9.223372036854776e+18\"}")),
    OK("{'d':[{'a':1.5,'b':1}]}", PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberDouble\":\"2.5\"}")),
    OK("{'d':[{'a':" M("1.1") ",'b':1}]}", PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberDecimal\":\"2.1\"}")),
    OK("{'d':[{'a':" M("0") ",'b':0.1}]}", PROJ("{'$add':['$a','$b']}"),
       R("{\"$numberDecimal\":\"0.100000000000000\"}")),
    OK("{'d':[{'a':65536}]}", PROJ("{'$multiply':['$a','$a']}"),
       R("{\"$numberLong\":\"4294967296\"}")),
    OK("{'d':[{'a':" M("1.5") "}]}", PROJ("{'$multiply':['$a',2]}"),
       R("{\"$numberDecimal\":\"3.0\"}")),
    OK("{'d':[{'a':" L(-9223372036854775807) "}]}",
       PROJ("{'$subtract':['$a',2]}"),
       R("{\"$numberDouble\":\"-9.223372036854776e+18\"}")),
    OK("{'d':[{'a':" M("1") "}]}", PROJ("{'$subtract':['$a',0.5]}"),
       R("{\"$numberDecimal\":\"0.500000000000000\"}")),
    /* dates */
    OK("{'d':[{'t':" DT(1000) "}]}", PROJ("{'$add':['$t',500]}"),
       R("{\"$date\":{\"$numberLong\":\"1500\"}}")),
    OK("{'d':[{'t':" DT(1000) "}]}", PROJ("{'$add':[1,'$t',2.4]}"),
       R("{\"$date\":{\"$numberLong\":\"1003\"}}")),
    OK("{'d':[{'t':" DT(5000) ",'u':" DT(1000) "}]}",
       PROJ("{'$subtract':['$t','$u']}"), R("{\"$numberLong\":\"4000\"}")),
    OK("{'d':[{'t':" DT(5000) "}]}", PROJ("{'$subtract':['$t',1000]}"),
       R("{\"$date\":{\"$numberLong\":\"4000\"}}")),
    ERR("{'d':[{'t':" DT(5000) "}]}", PROJ("{'$add':['$t','$t']}"),
        DTX_ETYPE, "only one date"),
    ERR("{'d':[{'t':" DT(5000) "}]}", PROJ("{'$subtract':[1,'$t']}"),
        DTX_ETYPE, "subtract a date"),
    ERR("{'d':[{'t':" DT(5000) "}]}", PROJ("{'$multiply':['$t',2]}"),
        DTX_ETYPE, "not date"),
    OK("{'d':[{'t':" DT(5000) "}]}", PROJ("{'$add':['$t',null]}"),
       R("null")),
    /* $type */
    OK("{'d':[{'a':1}]}", PROJ("{'$type':'$a'}"), R("\"int\"")),
    OK("{'d':[{'a':" L(1) "}]}", PROJ("{'$type':'$a'}"), R("\"long\"")),
    OK("{'d':[{'a':1.0}]}", PROJ("{'$type':'$a'}"), R("\"double\"")),
    OK("{'d':[{'a':" M("1") "}]}", PROJ("{'$type':'$a'}"),
       R("\"decimal\"")),
    OK("{'d':[{'a':" DT(1) "}]}", PROJ("{'$type':'$a'}"), R("\"date\"")),
    OK("{'d':[{'a':{'$oid':'0123456789abcdef01234567'}}]}",
       PROJ("{'$type':'$a'}"), R("\"objectId\"")),
    OK("{'d':[{}]}", PROJ("{'$type':'$a'}"), R("\"missing\"")),
    OK("{'d':[{'a':[1]}]}", PROJ("{'$type':['$a']}"), R("\"array\"")),
    OK("{'d':[{'a':null}]}", PROJ("{'$type':'$a'}"), R("\"null\"")),
    OK("{'d':[{'a':{'$minKey':1}}]}", PROJ("{'$type':'$a'}"),
       R("\"minKey\"")),
    /* comparisons across number types, $size's int32 */
    OK("{'d':[{'a':1}]}", PROJ("{'$eq':['$a'," M("1.00") "]}"), R("true")),
    OK("{'d':[{'a':" L(2) "}]}", PROJ("{'$cmp':['$a',1.5]}"),
       R("{\"$numberInt\":\"1\"}")),
    OK("{'d':[{'a':[1,2]}]}", PROJ("{'$size':'$a'}"),
       R("{\"$numberInt\":\"2\"}")),
    /* $group: keys equal across types (the first _id seen stays) */
    OK("{'d':[{'k':1,'v':1},{'k':" L(1) ",'v':2},{'k':1.0,'v':3},"
       "{'k':" M("1.00") ",'v':4},{'k':2,'v':5}]}",
       "{'p':[{'$group':{'_id':'$k','s':{'$sum':'$v'}}}]}",
       "{\"0\":{\"_id\":{\"$numberInt\":\"1\"},\"s\":{\"$numberInt\":\"10\"}},"
       "\"1\":{\"_id\":{\"$numberInt\":\"2\"},\"s\":{\"$numberInt\":\"5\"}}}"),
    OK("{'d':[{'v':" L(1) "},{'v':2}]}",
       "{'p':[{'$group':{'_id':null,'s':{'$sum':'$v'}}}]}",
       "{\"0\":{\"_id\":null,\"s\":{\"$numberLong\":\"3\"}}}"),
    OK("{'d':[{'v':2147483647},{'v':1}]}",
       "{'p':[{'$group':{'_id':null,'s':{'$sum':'$v'}}}]}",
       "{\"0\":{\"_id\":null,\"s\":{\"$numberLong\":\"2147483648\"}}}"),
    OK("{'d':[{'v':" L(9223372036854775807) "},{'v':1}]}",
       "{'p':[{'$group':{'_id':null,'s':{'$sum':'$v'}}}]}",
       "{\"0\":{\"_id\":null,\"s\":{\"$numberDouble\":"
       "\"9.223372036854776e+18\"}}}"),
    OK("{'d':[{'v':" M("1.5") "},{'v':2}]}",
       "{'p':[{'$group':{'_id':null,'s':{'$sum':'$v'},'a':{'$avg':'$v'}}}]}",
       "{\"0\":{\"_id\":null,\"s\":{\"$numberDecimal\":\"3.5\"},"
       "\"a\":{\"$numberDecimal\":\"1.75\"}}}"),
    OK("{'d':[{'v':1},{'v':1.0},{'v':" L(1) "},{'v':2}]}",
       "{'p':[{'$group':{'_id':null,'s':{'$addToSet':'$v'}}}]}",
       "{\"0\":{\"_id\":null,\"s\":[{\"$numberInt\":\"1\"},"
       "{\"$numberInt\":\"2\"}]}}"),
    OK("{'d':[{'v':" DT(5) "},{'v':" DT(3) "},{'v':7}]}",
       "{'p':[{'$group':{'_id':null,'lo':{'$min':'$v'},'hi':{'$max':'$v'}}}]}",
       "{\"0\":{\"_id\":null,\"lo\":{\"$numberInt\":\"7\"},"
       "\"hi\":{\"$date\":{\"$numberLong\":\"5\"}}}}"),
    /* $count is an int32, $unwind's index an int64 (MongoDB's types) */
    OK("{'d':[{'a':1},{'a':2}]}", "{'p':[{'$count':'n'}]}",
       "{\"0\":{\"n\":{\"$numberInt\":\"2\"}}}"),
    OK("{'d':[{'_id':1,'a':['x']}]}",
       "{'p':[{'$unwind':{'path':'$a','includeArrayIndex':'i'}}]}",
       "{\"0\":{\"_id\":{\"$numberInt\":\"1\"},\"a\":\"x\","
       "\"i\":{\"$numberLong\":\"0\"}}}"),
    /* $match is the BSON filter: Dates compare as Dates */
    OK("{'d':[{'t':" DT(5) "},{'t':" DT(9) "}]}",
       "{'p':[{'$project':{'_id':0,'t':1}},{'$match':{'t':{'$gt':" DT(6) "}}}]}",
       "{\"0\":{\"t\":{\"$date\":{\"$numberLong\":\"9\"}}}}"),
};

static void test_rows(void) {
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const row_t *r = &rows[i];
    bson_t in, pl, out = BSON_INITIALIZER;
    X(r->in, &in);
    X(r->pipeline, &pl);
    dtx__bval_t d = under(&in, "d"), p = under(&pl, "p");
    uint32_t dl, pll, off = 0;
    const uint8_t *dd = dtx__bval_doc(&d, &dl), *pd = dtx__bval_doc(&p, &pll);
    dtx__bval_t docs[8];
    size_t n = 0;
    dtx__belem_t e;
    while (n < 8 && dtx__belem_next(dd, dl, &off, &e))
      docs[n++] = e.v;
    dtx__bpipeline_t *pp = NULL;
    int rc = dtx__bpipeline_compile(pd, pll, &pp);
    if (!rc)
      rc = dtx__bpipeline_run(pp, docs, n, NULL, &out);
    if (r->want) {
      size_t len = 0;
      char *got = rc ? NULL
                     : dtx__ejson_write(bson_get_data(&out), out.len, 1,
                                        &len);
      CHECKF(rc == 0 && got && !strcmp(got, r->want),
             "row %zu %s: %s (%s)\n   got  %s\n   want %s", i, r->pipeline,
             dtx_errname(rc), rc ? dtx_errdetail() : "",
             got ? got : "(null)", r->want);
      free(got);
    } else {
      CHECKF(rc == r->rc && strstr(dtx_errdetail(), r->detail),
             "row %zu %s: %s (%s), want %s with '%s'", i, r->pipeline,
             dtx_errname(rc), dtx_errdetail(), dtx_errname(r->rc),
             r->detail);
    }
    dtx__bpipeline_free(pp);
    bson_destroy(&in);
    bson_destroy(&pl);
    bson_destroy(&out);
  }
}

/* The run's memory limit (dtx__bagg_env_t.max_bytes, DTX_AGG_MAX_BYTES
 * by default) as the json_t engine's: $sort and $group count what they
 * hold, and past the limit the run fails with DTX_ELIMIT naming the
 * stage; under it the same pipeline runs. */
static void test_limits(void) {
  static const struct {
    const char *stage, *name;
  } t[] = {
      {"{'p':[{'$set':{'z':1}},{'$sort':{'a':-1}}]}", "$sort"},
      {"{'p':[{'$group':{'_id':'$a'}}]}", "$group"},
      {"{'p':[{'$group':{'_id':null,'p':{'$push':'$$ROOT'}}}]}", "$group"},
  };
  bson_t in;
  X("{'d':[{'a':1,'s':'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'},"
    "{'a':2,'s':'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'},"
    "{'a':3,'s':'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'},"
    "{'a':4,'s':'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'}]}", &in);
  dtx__bval_t d = under(&in, "d");
  uint32_t dl, off = 0;
  const uint8_t *dd = dtx__bval_doc(&d, &dl);
  dtx__bval_t docs[4];
  size_t n = 0;
  dtx__belem_t e;
  while (n < 4 && dtx__belem_next(dd, dl, &off, &e))
    docs[n++] = e.v;
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    for (int big = 0; big < 2; big++) {
      bson_t pl, out = BSON_INITIALIZER;
      X(t[i].stage, &pl);
      dtx__bval_t p = under(&pl, "p");
      uint32_t pll;
      const uint8_t *pd = dtx__bval_doc(&p, &pll);
      dtx__bpipeline_t *pp = NULL;
      REQUIRE(dtx__bpipeline_compile(pd, pll, &pp) == 0);
      dtx__bagg_env_t env = {big ? 0 : 200, NULL, NULL};
      int rc = dtx__bpipeline_run(pp, docs, n, &env, &out);
      if (big)
        CHECKF(rc == 0, "limit %zu: %s (%s)", i, dtx_errname(rc),
               dtx_errdetail());
      else
        CHECKF(rc == DTX_ELIMIT && strstr(dtx_errdetail(), t[i].name) &&
                   strstr(dtx_errdetail(), "memory limit of 200 bytes"),
               "limit %zu: %s (%s)", i, dtx_errname(rc), dtx_errdetail());
      dtx__bpipeline_free(pp);
      bson_destroy(&pl);
      bson_destroy(&out);
    }
  }
  bson_destroy(&in);
}

int main(void) {
  TEST_RUN(test_rows);
  TEST_RUN(test_limits);
  return TEST_DONE();
}
