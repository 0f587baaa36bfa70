/* test_bproj.c -- what only BSON can say to projection, sort and _id
 * (bproject.c, bsort.c, bid.c).
 *
 * Rows are Extended JSON (the project's reader, dtx__ejson_read) with '
 * for ".  Projection rows compare the result as canonical Extended JSON,
 * so every type must survive as it was (int32 stays int32, a decimal
 * keeps its exponent); sort rows give the expected order of _id; _id rows
 * say which types an _id may have (the manual: any but array, regex and
 * undefined). */
#include "testlib.h"

#include "doc/bfilter.h"
#include "doc/bproj.h"
#include "util/err.h"

#include <string.h>

/* Reads ' -quoted Extended JSON into *out (initialised here) or aborts. */
static void X(const char *text, bson_t *out) {
  size_t n = strlen(text);
  char *s = malloc(n + 1);
  for (size_t i = 0; i <= n; i++)
    s[i] = text[i] == '\'' ? '"' : text[i];
  bson_init(out);
  if (dtx__ejson_read(s, n, out)) {
    fprintf(stderr, "bad row text %s: %s\n", text, dtx_errdetail());
    abort();
  }
  free(s);
}

static char *canon(const uint8_t *d, uint32_t len) {
  size_t n;
  return dtx__ejson_write(d, len, 1, &n);
}

/* ---- projection ------------------------------------------------------------ */

static const struct {
  const char *filter; /* NULL: no query */
  const char *proj, *doc;
  const char *want; /* NULL: error rc whose detail holds detail */
  int rc;
  const char *detail;
} prows[] = {
    /* types are copied as they are */
    {NULL, "{'a':1}",
     "{'_id':{'$oid':'000000000000000000000001'},'a':{'$numberDecimal':"
     "'1.50'},'b':{'$date':'2020-01-01T00:00:00Z'}}",
     "{'_id':{'$oid':'000000000000000000000001'},'a':{'$numberDecimal':"
     "'1.50'}}",
     0, NULL},
    {NULL, "{'a':0}",
     "{'a':1,'b':{'$numberLong':'5'},'c':{'$binary':{'base64':'AAE=',"
     "'subType':'04'}},'d':{'$timestamp':{'t':1,'i':2}}}",
     "{'b':{'$numberLong':'5'},'c':{'$binary':{'base64':'AAE=','subType':"
     "'04'}},'d':{'$timestamp':{'t':1,'i':2}}}",
     0, NULL},
    {NULL, "{'a.b':1,'_id':0}",
     "{'a':[{'b':{'$numberLong':'1'},'c':1},{'$minKey':1},{'b':"
     "{'$regularExpression':{'pattern':'x','options':'i'}}},[{'$maxKey':1}]]}",
     "{'a':[{'b':{'$numberLong':'1'}},{'b':{'$regularExpression':{'pattern':"
     "'x','options':'i'}}},[]]}",
     0, NULL},
    {NULL, "{'a.b':0}", "{'a':[{'b':1,'c':{'$numberDouble':'-0.0'}},"
                        "{'$symbol':'s'}]}",
     "{'a':[{'c':{'$numberDouble':'-0.0'}},{'$symbol':'s'}]}", 0, NULL},
    /* directions and flags: int32 and int64 0/1 and booleans only, as the
     * json_t engine (MongoDB also takes other numbers) */
    {NULL, "{'a':{'$numberLong':'1'}}", "{'_id':1,'a':2,'b':3}",
     "{'_id':1,'a':2}", 0, NULL},
    {NULL, "{'a':{'$numberLong':'0'}}", "{'_id':1,'a':2,'b':3}",
     "{'_id':1,'b':3}", 0, NULL},
    {NULL, "{'a':{'$numberDouble':'1.0'}}", "{'a':1}", NULL, DTX_EINVAL,
     "must be 0, 1, true or false"},
    {NULL, "{'a':{'$numberDecimal':'1'}}", "{'a':1}", NULL, DTX_EINVAL,
     "must be 0, 1, true or false"},
    /* $slice takes int64 too */
    {NULL, "{'a':{'$slice':{'$numberLong':'-1'}}}", "{'a':[1,2,3]}",
     "{'a':[3]}", 0, NULL},
    {NULL, "{'a':{'$slice':[{'$numberLong':'1'},{'$numberLong':'5'}]}}",
     "{'a':[1,{'$numberLong':'2'},3]}", "{'a':[{'$numberLong':'2'},3]}", 0,
     NULL},
    {NULL, "{'a':{'$slice':{'$numberLong':'-9223372036854775808'}}}",
     "{'a':[1,2]}", "{'a':[1,2]}", 0, NULL},
    {NULL, "{'a':{'$slice':{'$numberDouble':'1.0'}}}", "{'a':[1,2]}", NULL,
     DTX_EINVAL, "$slice"},
    /* $elemMatch and the positional $ over BSON types */
    {NULL, "{'a':{'$elemMatch':{'$gt':{'$numberDecimal':'1.5'}}}}",
     "{'a':[1,{'$numberLong':'2'},3]}", "{'a':[{'$numberLong':'2'}]}", 0,
     NULL},
    {NULL, "{'a':{'$elemMatch':{'$gte':{'$date':'1970-01-01T00:00:01Z'}}}}",
     "{'a':[{'$date':'1970-01-01T00:00:00Z'},5000,"
     "{'$date':'1970-01-01T00:00:02Z'}]}",
     "{'a':[{'$date':'1970-01-01T00:00:02Z'}]}", 0, NULL},
    {"{'a':{'$gt':{'$numberDecimal':'2'}}}", "{'a.$':1,'_id':0}",
     "{'a':[{'$numberInt':'1'},{'$numberDouble':'2.5'},3]}",
     "{'a':[{'$numberDouble':'2.5'}]}", 0, NULL},
    {"{'a':{'$type':'objectId'}}", "{'a.$':1}",
     "{'_id':1,'a':['x',{'$oid':'000000000000000000000002'}]}",
     "{'_id':1,'a':[{'$oid':'000000000000000000000002'}]}", 0, NULL},
    {"{'a':{'$type':'objectId'}}", "{'a.$':1}", "{'_id':1,'a':'x'}", NULL,
     DTX_EBADQUERY, "did not match"},
    /* empty: the document as it is */
    {NULL, "{}", "{'a':{'$numberDecimal':'1.000'},'b':{'$maxKey':1}}",
     "{'a':{'$numberDecimal':'1.000'},'b':{'$maxKey':1}}", 0, NULL},
};

static void test_project_types(void) {
  for (size_t i = 0; i < sizeof prows / sizeof prows[0]; i++) {
    bson_t p, d, out, fs;
    dtx__bproj_t *bp = NULL;
    dtx__bfilter_t *f = NULL;
    X(prows[i].proj, &p);
    X(prows[i].doc, &d);
    if (prows[i].filter) {
      X(prows[i].filter, &fs);
      REQUIRE(dtx__bfilter_compile(&fs, &f) == 0);
      bson_destroy(&fs);
    }
    int rc = dtx__bproj_compile(bson_get_data(&p), p.len, &bp);
    if (rc == 0)
      rc = dtx__bproj_apply_at(bp, bson_get_data(&d), d.len, f, NULL, 0,
                               &out);
    if (prows[i].want) {
      CHECKF(rc == 0, "proj row %zu: %s (%s)", i, dtx_errname(rc),
             dtx_errdetail());
      if (rc == 0) {
        bson_t w;
        X(prows[i].want, &w);
        char *got = canon(bson_get_data(&out), out.len);
        char *exp = canon(bson_get_data(&w), w.len);
        CHECKF(!strcmp(got, exp), "proj row %zu: got %s want %s", i, got,
               exp);
        CHECKF(dtx__bson_check(bson_get_data(&out), out.len, DTX_EINVAL,
                               "projection") == 0,
               "proj row %zu: output fails the check: %s", i,
               dtx_errdetail());
        free(got);
        free(exp);
        bson_destroy(&w);
        bson_destroy(&out);
      }
    } else {
      CHECKF(rc == prows[i].rc && strstr(dtx_errdetail(), prows[i].detail),
             "proj row %zu: %s (%s) want %s '%s'", i, dtx_errname(rc),
             dtx_errdetail(), dtx_errname(prows[i].rc), prows[i].detail);
    }
    dtx__bproj_free(bp);
    dtx__bfilter_free(f);
    bson_destroy(&p);
    bson_destroy(&d);
  }
}

/* dtx__bproj_check_query: the query must name the positional field. */
static void test_check_query(void) {
  static const struct {
    const char *filter;
    int rc;
  } rows[] = {
      {"{'a':1}", 0},
      {"{'a.b':{'$numberLong':'1'}}", 0},
      {"{'$and':[{'x':1},{'a':{'$gt':{'$date':'2020-01-01T00:00:00Z'}}}]}",
       0},
      {"{'$or':[{'$nor':[{'a':1}]}]}", 0},
      {"{'b':1}", DTX_EBADQUERY},
      {"{'ab':1}", DTX_EBADQUERY},
      {"{'$and':[{'b':1}]}", DTX_EBADQUERY},
      {"{}", DTX_EBADQUERY},
  };
  bson_t p;
  dtx__bproj_t *bp = NULL;
  X("{'a.$':1}", &p);
  REQUIRE(dtx__bproj_compile(bson_get_data(&p), p.len, &bp) == 0);
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    bson_t f;
    X(rows[i].filter, &f);
    int rc = dtx__bproj_check_query(bp, bson_get_data(&f), f.len);
    CHECKF(rc == rows[i].rc, "check_query %s: %s", rows[i].filter,
           dtx_errname(rc));
    bson_destroy(&f);
  }
  CHECK_RC(dtx__bproj_check_query(bp, NULL, 0), DTX_EBADQUERY);
  dtx__bproj_free(bp);
  bson_destroy(&p);
}

/* A spec naming a field twice (BSON can, JSON cannot): two operators on
 * one field are a collision, not an assertion. */
static void test_duplicate_names(void) {
  bson_t p = BSON_INITIALIZER, op;
  dtx__bproj_t *bp = (dtx__bproj_t *)&p;
  for (int i = 1; i <= 2; i++) {
    BSON_APPEND_DOCUMENT_BEGIN(&p, "a", &op);
    BSON_APPEND_INT32(&op, "$slice", i);
    bson_append_document_end(&p, &op);
  }
  CHECK_RC(dtx__bproj_compile(bson_get_data(&p), p.len, &bp), DTX_EINVAL);
  CHECK(bp == NULL && strstr(dtx_errdetail(), "collision at a"));
  bson_reinit(&p);
  BSON_APPEND_INT32(&p, "a", 1);
  BSON_APPEND_INT32(&p, "a", 1);
  CHECK_RC(dtx__bproj_compile(bson_get_data(&p), p.len, &bp), DTX_EINVAL);
  bson_destroy(&p);
}

/* ---- sort ---------------------------------------------------------------- */

static const struct {
  const char *sort, *docs, *ids; /* docs: {'0': doc, '1': doc, ...} */
  int rc;
} srows[] = {
    /* numbers of four types on one scale; NaN below every number, a
     * missing value below that; equal values keep their order */
    {"{'v':1}",
     "{'0':{'_id':0,'v':{'$numberInt':'1'}},'1':{'_id':1,'v':{'$numberLong':"
     "'1'}},'2':{'_id':2,'v':{'$numberDouble':'0.5'}},'3':{'_id':3,'v':"
     "{'$numberDecimal':'0.75'}},'4':{'_id':4,'v':{'$numberDecimal':'NaN'}},"
     "'5':{'_id':5,'v':{'$numberDouble':'-Infinity'}},'6':{'_id':6},'7':"
     "{'_id':7,'v':{'$numberDecimal':'1.0'}}}",
     "[6,4,5,2,3,0,1,7]", 0},
    {"{'v':{'$numberLong':'-1'}}",
     "{'0':{'_id':0,'v':{'$numberLong':'9007199254740993'}},'1':{'_id':1,'v':"
     "{'$numberDouble':'9007199254740992'}},'2':{'_id':2,'v':"
     "{'$numberDecimal':'9007199254740992.5'}}}",
     "[0,2,1]", 0},
    /* brackets: MinKey < null < numbers < strings < objects < arrays <
     * binData < ObjectId < bool < Date < Timestamp < regex < MaxKey */
    {"{'v':1}",
     "{'0':{'_id':0,'v':{'$maxKey':1}},'1':{'_id':1,'v':{'$regularExpression':"
     "{'pattern':'a','options':''}}},'2':{'_id':2,'v':{'$timestamp':{'t':1,"
     "'i':1}}},'3':{'_id':3,'v':{'$date':'2020-01-01T00:00:00Z'}},'4':{'_id':"
     "4,'v':true},'5':{'_id':5,'v':{'$oid':'000000000000000000000001'}},'6':"
     "{'_id':6,'v':{'$binary':{'base64':'','subType':'00'}}},'7':{'_id':7,'v':"
     "{'x':1}},'8':{'_id':8,'v':'s'},'9':{'_id':9,'v':1},'10':{'_id':10,'v':"
     "null},'11':{'_id':11,'v':{'$minKey':1}}}",
     "[11,10,9,8,7,6,5,4,3,2,1,0]", 0},
    /* an array sorts by its least element ascending, greatest descending,
     * across types */
    {"{'v':1}",
     "{'0':{'_id':0,'v':[{'$date':'2020-01-01T00:00:00Z'},5]},'1':{'_id':1,"
     "'v':[{'$numberDecimal':'4.5'}]},'2':{'_id':2,'v':[{'$minKey':1},9]}}",
     "[2,1,0]", 0},
    {"{'v':-1}",
     "{'0':{'_id':0,'v':[{'$date':'2020-01-01T00:00:00Z'},5]},'1':{'_id':1,"
     "'v':[{'$numberDecimal':'4.5'}]},'2':{'_id':2,'v':[{'$maxKey':1}]}}",
     "[2,0,1]", 0},
    /* dates before 1970 and ObjectIds by bytes */
    {"{'v':1}",
     "{'0':{'_id':0,'v':{'$date':{'$numberLong':'1'}}},'1':{'_id':1,'v':"
     "{'$date':{'$numberLong':'-1'}}},'2':{'_id':2,'v':{'$date':"
     "{'$numberLong':'0'}}}}",
     "[1,2,0]", 0},
    /* directions: int32 or int64 1/-1 only */
    {"{'v':{'$numberDouble':'1.0'}}", "{'0':{'_id':0}}", NULL, DTX_EINVAL},
    {"{'v':{'$numberDecimal':'1'}}", "{'0':{'_id':0}}", NULL, DTX_EINVAL},
    {"{'v':{'$numberLong':'2'}}", "{'0':{'_id':0}}", NULL, DTX_EINVAL},
};

static void test_sort_types(void) {
  for (size_t i = 0; i < sizeof srows / sizeof srows[0]; i++) {
    bson_t s, d;
    dtx__bval_t v[16];
    size_t n = 0;
    uint32_t off = 0;
    dtx__belem_t e;
    X(srows[i].sort, &s);
    X(srows[i].docs, &d);
    while (n < 16 && dtx__belem_next(bson_get_data(&d), d.len, &off, &e))
      v[n++] = e.v;
    int rc = dtx__bsort_docs(v, n, bson_get_data(&s), s.len);
    CHECKF(rc == srows[i].rc, "sort row %zu: %s (%s)", i, dtx_errname(rc),
           dtx_errdetail());
    if (rc == 0) {
      char got[128] = "[";
      for (size_t k = 0; k < n; k++) {
        uint32_t len;
        const uint8_t *doc = dtx__bval_doc(&v[k], &len);
        REQUIRE(dtx__belem_find(doc, len, "_id", 3, &e));
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d",
                 k ? "," : "", dtx__bval_int32(&e.v));
      }
      strcat(got, "]");
      CHECKF(!strcmp(got, srows[i].ids), "sort row %zu: got %s want %s", i,
             got, srows[i].ids);
      /* dtx__bsort_cmp agrees with the order */
      for (size_t k = 1; k < n; k++)
        CHECKF(dtx__bsort_cmp(bson_get_data(&s), s.len, &v[k - 1], &v[k]) <=
                   0,
               "sort row %zu: cmp of %zu and %zu", i, k - 1, k);
    }
    bson_destroy(&s);
    bson_destroy(&d);
  }
}

/* ---- _id ------------------------------------------------------------------- */

static const struct {
  const char *id; /* the value of {'v': ...} */
  int ok;
  const char *detail;
} idrows[] = {
    {"{'$numberInt':'1'}", 1, NULL},
    {"{'$numberLong':'1'}", 1, NULL},
    {"{'$numberDouble':'NaN'}", 1, NULL},
    {"{'$numberDecimal':'1.5'}", 1, NULL},
    {"null", 1, NULL},
    {"true", 1, NULL},
    {"'k'", 1, NULL},
    {"''", 0, "1 to 256 bytes"},
    {"{'$oid':'000000000000000000000001'}", 1, NULL},
    {"{'$date':'2020-01-01T00:00:00Z'}", 1, NULL},
    {"{'$timestamp':{'t':1,'i':1}}", 1, NULL},
    {"{'$binary':{'base64':'AAE=','subType':'04'}}", 1, NULL},
    {"{'$minKey':1}", 1, NULL},
    {"{'$maxKey':1}", 1, NULL},
    {"{'$symbol':'s'}", 1, NULL},
    {"{'$code':'f()'}", 1, NULL},
    {"{'a':1,'b':[1,2]}", 1, NULL},
    {"{'a':{'$date':'2020-01-01T00:00:00Z'}}", 1, NULL},
    {"{'a':{'b.c':1}}", 0, "'b.c' may not start with '$' or contain '.'"},
    {"[1]", 0, "cannot be an array"},
    {"[]", 0, "cannot be an array"},
    {"{'$regularExpression':{'pattern':'a','options':''}}", 0,
     "regular expression"},
    {"{'$undefined':true}", 0, "undefined"},
};

static void test_id_types(void) {
  for (size_t i = 0; i < sizeof idrows / sizeof idrows[0]; i++) {
    char text[256];
    bson_t d;
    dtx__belem_t e;
    snprintf(text, sizeof text, "{'v':%s}", idrows[i].id);
    X(text, &d);
    REQUIRE(dtx__belem_find(bson_get_data(&d), d.len, "v", 1, &e));
    int rc = dtx__bid_check(&e.v);
    CHECKF(idrows[i].ok ? rc == 0
                        : rc == DTX_EINVAL &&
                              strstr(dtx_errdetail(), idrows[i].detail),
           "_id %s: %s (%s)", idrows[i].id, dtx_errname(rc),
           dtx_errdetail());
    CHECK(dtx__bid_valid(&e.v) == idrows[i].ok);
    bson_destroy(&d);
  }
  dtx__bval_t missing = {0};
  CHECK_RC(dtx__bid_check(&missing), DTX_EINVAL);
  CHECK_RC(dtx__bid_check(NULL), DTX_EINVAL);
  /* a 257-byte binData is refused, 256 accepted */
  uint8_t bytes[257] = {0};
  bson_t b = BSON_INITIALIZER;
  bson_append_binary(&b, "x", 1, BSON_SUBTYPE_BINARY, bytes, 256);
  bson_append_binary(&b, "y", 1, BSON_SUBTYPE_BINARY, bytes, 257);
  dtx__belem_t e;
  REQUIRE(dtx__belem_find(bson_get_data(&b), b.len, "x", 1, &e));
  CHECK_RC(dtx__bid_check(&e.v), 0);
  REQUIRE(dtx__belem_find(bson_get_data(&b), b.len, "y", 1, &e));
  CHECK_RC(dtx__bid_check(&e.v), DTX_EINVAL);
  bson_destroy(&b);
}

/* Generated ObjectIds differ and increase within a process. */
static void test_id_new(void) {
  bson_oid_t prev, cur;
  dtx__bid_new(&prev);
  int ok = 1;
  for (int i = 0; i < 1000; i++) {
    dtx__bid_new(&cur);
    ok &= bson_oid_compare(&prev, &cur) < 0;
    prev = cur;
  }
  CHECK(ok);
}

int main(void) {
  TEST_RUN(test_project_types);
  TEST_RUN(test_check_query);
  TEST_RUN(test_duplicate_names);
  TEST_RUN(test_sort_types);
  TEST_RUN(test_id_types);
  TEST_RUN(test_id_new);
  return TEST_DONE();
}
