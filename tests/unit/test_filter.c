/* test_filter.c -- the filter matcher against MongoDB's documented semantics.
 *
 * Each table row is (filter, document, expected match), grouped by operator.
 * JSON is written with single quotes for readability and converted before
 * parsing (no test string needs a literal apostrophe).  The awkward cases
 * are deliberate: $ne/$nin on arrays, dotted paths through arrays of
 * subdocuments, missing versus null, cross-type comparisons, $elemMatch
 * versus implicit array matching, numeric path segments and exact int64
 * versus double comparison.  A second table lists filters that must be
 * refused with DTX_EBADQUERY and a detail naming the culprit.
 */
#include "testlib.h"
#include "bfilterdiff.h"

#include "doc/doc.h"

#include <pthread.h>
#include <string.h>

typedef dtx_t_fcase_t fcase_t;

/* Single-quoted JSON to real JSON. */
static json_t *Q(const char *text) {
  size_t n = strlen(text);
  char *s = malloc(n + 1);
  for (size_t i = 0; i <= n; i++)
    s[i] = text[i] == '\'' ? '"' : text[i];
  json_t *v = J(s);
  free(s);
  return v;
}

#define RUN(t) dtx_t_filter_table(#t, t, sizeof t / sizeof t[0])

/* ---- implicit equality and $eq ------------------------------------------ */

static const fcase_t eq_cases[] = {
    {"{}", "{}", 1},
    {"{}", "{'a':1}", 1},
    {"{'a':1}", "{'a':1}", 1},
    {"{'a':1}", "{'a':1.0}", 1},
    {"{'a':1.0}", "{'a':1}", 1},
    {"{'a':1}", "{'a':2}", 0},
    {"{'a':1}", "{'a':'1'}", 0},
    {"{'a':'1'}", "{'a':1}", 0},
    {"{'a':1}", "{'b':1}", 0},
    {"{'a':1}", "{}", 0},
    {"{'a':'x'}", "{'a':'x'}", 1},
    {"{'a':'x'}", "{'a':'X'}", 0},
    {"{'a':'x'}", "{'a':'x '}", 0},
    {"{'a':''}", "{'a':''}", 1},
    {"{'a':''}", "{}", 0},
    {"{'a':'\\u00e9'}", "{'a':'\\u00e9'}", 1},
    {"{'a':true}", "{'a':true}", 1},
    {"{'a':true}", "{'a':1}", 0},
    {"{'a':false}", "{'a':0}", 0},
    {"{'a':false}", "{'a':null}", 0},
    {"{'a':false}", "{}", 0},
    {"{'a':0}", "{'a':-0.0}", 1},
    {"{'a':0.1}", "{'a':0.1}", 1},
    {"{'a':0.5}", "{'a':0}", 0},
    {"{'a':1,'b':2}", "{'a':1,'b':2}", 1},
    {"{'a':1,'b':2}", "{'b':2,'a':1}", 1},
    {"{'a':1,'b':2}", "{'a':1,'b':3}", 0},
    {"{'a':1,'b':2}", "{'a':1}", 0},
    {"{'a':{'$eq':1}}", "{'a':1}", 1},
    {"{'a':{'$eq':1}}", "{'a':[2,1]}", 1},
    {"{'a':{'$eq':1}}", "{'a':2}", 0},
    {"{'a':{'$eq':[1,2]}}", "{'a':[1,2]}", 1},
    {"{'a':{'$eq':{'b':1}}}", "{'a':{'b':1}}", 1},
    {"{'a':{'$eq':{'$x':1}}}", "{'a':{'$x':1}}", 1},
    {"{'a':{'$eq':'x','$ne':'y'}}", "{'a':'x'}", 1},
    /* int64 versus double, exactly */
    {"{'a':9223372036854775807}", "{'a':9223372036854775807}", 1},
    {"{'a':9223372036854775807}", "{'a':9223372036854775806}", 0},
    {"{'a':9223372036854775807}", "{'a':9.223372036854775807e18}", 0},
    {"{'a':-9223372036854775808}", "{'a':-9223372036854775808}", 1},
    {"{'a':-9223372036854775808}", "{'a':-9.223372036854775808e18}", 1},
    {"{'a':9007199254740993}", "{'a':9007199254740992.0}", 0},
    {"{'a':9007199254740992}", "{'a':9007199254740992.0}", 1},
    {"{'a':9007199254740992.0}", "{'a':9007199254740993}", 0},
    {"{'a':4611686018427387904}", "{'a':4.611686018427387904e18}", 1},
    {"{'a':1e20}", "{'a':9223372036854775807}", 0},
    {"{'a':-1}", "{'a':-1.0}", 1},
    {"{'a':100000000000}", "{'a':1e11}", 1},
    {"{'_id':'acct-1'}", "{'_id':'acct-1','balance':5}", 1},
    {"{'_id':7}", "{'_id':7.0}", 1},
};

/* ---- arrays: membership and whole-array equality ------------------------ */

static const fcase_t array_eq_cases[] = {
    {"{'tags':'a'}", "{'tags':['a','b']}", 1},
    {"{'tags':'b'}", "{'tags':['a','b']}", 1},
    {"{'tags':'c'}", "{'tags':['a','b']}", 0},
    {"{'tags':['a','b']}", "{'tags':['a','b']}", 1},
    {"{'tags':['b','a']}", "{'tags':['a','b']}", 0},
    {"{'tags':['a']}", "{'tags':['a','b']}", 0},
    {"{'tags':['a','b','c']}", "{'tags':['a','b']}", 0},
    {"{'tags':['a']}", "{'tags':[['a'],'b']}", 1},
    {"{'tags':'a'}", "{'tags':[['a']]}", 0},
    {"{'tags':[]}", "{'tags':[]}", 1},
    {"{'tags':[]}", "{'tags':[[]]}", 1},
    {"{'tags':[]}", "{'tags':['a']}", 0},
    {"{'tags':[]}", "{}", 0},
    {"{'tags':[]}", "{'tags':null}", 0},
    {"{'a':1}", "{'a':[1.0,2]}", 1},
    {"{'a':1}", "{'a':[]}", 0},
    {"{'a':[1,2]}", "{'a':[[1,2],3]}", 1},
    {"{'a':[1,2]}", "{'a':[1.0,2.0]}", 1},
    {"{'a':[1,2]}", "{'a':[[[1,2]]]}", 0},
    {"{'a':{'b':1}}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a':{'b':1}}", "{'a':[{'b':1,'c':2}]}", 0},
    {"{'a':[{'b':1}]}", "{'a':[{'b':1}]}", 1},
    {"{'a':[{'b':1}]}", "{'a':[{'b':1},{'b':2}]}", 0},
    {"{'a':null}", "{'a':[1,null]}", 1},
    {"{'a':true}", "{'a':[false,true]}", 1},
    {"{'a':'1'}", "{'a':[1,2]}", 0},
};

/* ---- objects: exact, order-sensitive equality --------------------------- */

static const fcase_t object_eq_cases[] = {
    {"{'a':{'b':1,'c':2}}", "{'a':{'b':1,'c':2}}", 1},
    {"{'a':{'b':1,'c':2}}", "{'a':{'c':2,'b':1}}", 0},
    {"{'a':{'b':1}}", "{'a':{'b':1,'c':2}}", 0},
    {"{'a':{'b':1,'c':2}}", "{'a':{'b':1}}", 0},
    {"{'a':{}}", "{'a':{}}", 1},
    {"{'a':{}}", "{'a':{'b':1}}", 0},
    {"{'a':{}}", "{}", 0},
    {"{'a':{'b':1}}", "{'a':{'b':1.0}}", 1},
    {"{'a':{'b':[1,2]}}", "{'a':{'b':[1,2]}}", 1},
    {"{'a':{'b':[1,2]}}", "{'a':{'b':[2,1]}}", 0},
    {"{'a':{'b':{'c':null}}}", "{'a':{'b':{'c':null}}}", 1},
    {"{'a':{'b':{'c':null}}}", "{'a':{'b':{}}}", 0},
    {"{'a':{'b':1}}", "{'a':{'B':1}}", 0},
    {"{'a':{'b':1}}", "{'a':'{b:1}'}", 0},
    {"{'a':{'b':{'$gt':1}}}", "{'a':{'b':5}}", 0},
    {"{'a':{'b':{'$gt':1}}}", "{'a':{'b':{'$gt':1}}}", 1},
};

/* ---- dotted paths through objects and arrays ---------------------------- */

static const fcase_t path_cases[] = {
    {"{'a.b':1}", "{'a':{'b':1}}", 1},
    {"{'a.b':1}", "{'a':{'b':2}}", 0},
    {"{'a.b':1}", "{'a':1}", 0},
    {"{'a.b':1}", "{'a':{'c':{'b':1}}}", 0},
    {"{'a.b.c':1}", "{'a':{'b':{'c':1}}}", 1},
    {"{'a.b.c':1}", "{'a':{'b':{'c':2}}}", 0},
    {"{'a.b':1}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a.b':2}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a.b':3}", "{'a':[{'b':1},{'b':2}]}", 0},
    {"{'changes.account':1234}",
     "{'changes':[{'account':1,'amount':5},{'account':1234,'amount':-5}]}", 1},
    {"{'changes.account':99}",
     "{'changes':[{'account':1,'amount':5},{'account':1234,'amount':-5}]}", 0},
    {"{'changes.account':1234,'changes.amount':5}",
     "{'changes':[{'account':1,'amount':5},{'account':1234,'amount':-5}]}", 1},
    {"{'a.b':1}", "{'a':[{'b':[1,2]}]}", 1},
    {"{'a.b':2}", "{'a':[{'b':[1,2]}]}", 1},
    {"{'a.b':[1,2]}", "{'a':[{'b':[1,2]}]}", 1},
    {"{'a.b':[1,2]}", "{'a':[{'b':1},{'b':2}]}", 0},
    {"{'a.b.c':1}", "{'a':[{'b':[{'c':1}]}]}", 1},
    {"{'a.b.c':1}", "{'a':[{'b':{'c':[0,1]}}]}", 1},
    {"{'a.b':1}", "{'a':[[{'b':1}]]}", 0},
    {"{'a.b':1}", "{'a':[1,{'b':1}]}", 1},
    {"{'a.b':1}", "{'a':[{'c':1}]}", 0},
    {"{'a.b':1}", "{'a':{'b':[1]}}", 1},
    {"{'a.b':1}", "{'a':[]}", 0},
    {"{'a.b':{'c':1}}", "{'a':[{'b':{'c':1}}]}", 1},
    {"{'a.b':{'c':1}}", "{'a':[{'b':[{'c':1}]}]}", 1},
    {"{'a.b.c.d':1}", "{'a':{'b':[{'c':[{'d':1}]}]}}", 1},
    {"{'a.b.c.d':2}", "{'a':{'b':[{'c':[{'d':1}]}]}}", 0},
    {"{'x.y':'z'}", "{'x':{'y':'z','w':1}}", 1},
    {"{'a.b':1}", "{'a.b':1}", 0},
};

/* ---- numeric path segments --------------------------------------------- */

static const fcase_t index_cases[] = {
    {"{'a.0':1}", "{'a':[1,2]}", 1},
    {"{'a.1':2}", "{'a':[1,2]}", 1},
    {"{'a.1':1}", "{'a':[1,2]}", 0},
    {"{'a.2':1}", "{'a':[1,2]}", 0},
    {"{'a.0':1}", "{'a':{'0':1}}", 1},
    {"{'a.0':1}", "{'a':{'0':2}}", 0},
    {"{'a.0.b':1}", "{'a':[{'b':1}]}", 1},
    {"{'a.0.b':1}", "{'a':[{'b':2},{'b':1}]}", 0},
    {"{'a.1.b':1}", "{'a':[{'b':1},{'b':2}]}", 0},
    {"{'a.1.b':2}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a.0':[1,2]}", "{'a':[[1,2],3]}", 1},
    {"{'a.0':1}", "{'a':[[1,2]]}", 0},
    {"{'a.0.1':2}", "{'a':[[1,2]]}", 1},
    {"{'a.0.0':1}", "{'a':[[1,2]]}", 1},
    {"{'a.01':1}", "{'a':[1]}", 0},
    {"{'a.01':1}", "{'a':{'01':1}}", 1},
    {"{'a.0':1}", "{'a':[{'0':1}]}", 1},
    {"{'a.0':{'0':1}}", "{'a':[{'0':1}]}", 1},
    {"{'a.b.0':1}", "{'a':[{'b':[1]},{'b':[2]}]}", 1},
    {"{'a.b.0':2}", "{'a':[{'b':[1]},{'b':[2]}]}", 1},
    {"{'a.b.1':2}", "{'a':[{'b':[1]},{'b':[2]}]}", 0},
    {"{'a.0':{'$gt':5}}", "{'a':[10,1]}", 1},
    {"{'a.0':{'$gt':5}}", "{'a':[1,10]}", 0},
    /* an index past the end reaches nothing, not "missing" */
    {"{'a.0':null}", "{'a':[]}", 0},
    {"{'a.0':null}", "{'a':[5]}", 0},
    {"{'a.5':null}", "{'a':[1]}", 0},
    {"{'a.5':{'$ne':null}}", "{'a':[1]}", 1},
    {"{'a.0':{'$exists':true}}", "{'a':[5]}", 1},
    {"{'a.0':{'$exists':true}}", "{'a':[]}", 0},
    {"{'a.0':{'$exists':false}}", "{'a':[]}", 1},
    {"{'a.1':{'$exists':true}}", "{'a':[null,null]}", 1},
    {"{'a.0':'x'}", "{'a':'xyz'}", 0},
    {"{'a.0':{'$size':2}}", "{'a':[[1,2]]}", 1},
    {"{'a.10':'k'}",
     "{'a':['a','b','c','d','e','f','g','h','i','j','k']}", 1},
};

/* ---- missing versus null ------------------------------------------------ */

static const fcase_t null_cases[] = {
    {"{'a':null}", "{}", 1},
    {"{'a':null}", "{'a':null}", 1},
    {"{'a':null}", "{'a':1}", 0},
    {"{'a':null}", "{'a':false}", 0},
    {"{'a':null}", "{'a':0}", 0},
    {"{'a':null}", "{'a':''}", 0},
    {"{'a':null}", "{'a':[1,null]}", 1},
    {"{'a':null}", "{'a':[1,2]}", 0},
    {"{'a':null}", "{'a':[]}", 0},
    {"{'a':null}", "{'a':{}}", 0},
    {"{'a.b':null}", "{'a':{}}", 1},
    {"{'a.b':null}", "{'a':{'b':null}}", 1},
    {"{'a.b':null}", "{'a':1}", 1},
    {"{'a.b':null}", "{}", 1},
    {"{'a.b':null}", "{'a':[{'b':1},{'c':2}]}", 1},
    {"{'a.b':null}", "{'a':[{'b':1}]}", 0},
    {"{'a.b':null}", "{'a':[{'b':1},{'b':null}]}", 1},
    {"{'a.b':null}", "{'a':[1,2]}", 1},
    {"{'a':{'$eq':null}}", "{}", 1},
    {"{'a':{'$eq':null}}", "{'a':5}", 0},
    {"{'a':{'$ne':null}}", "{}", 0},
    {"{'a':{'$ne':null}}", "{'a':null}", 0},
    {"{'a':{'$ne':null}}", "{'a':0}", 1},
    {"{'a':{'$ne':null}}", "{'a':[1,null]}", 0},
    {"{'a':{'$ne':null}}", "{'a':[]}", 1},
    {"{'a.b':{'$ne':null}}", "{'a':[{'b':1},{'c':2}]}", 0},
    {"{'a.b':{'$ne':null}}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a':{'$gte':null}}", "{}", 1},
    {"{'a':{'$gte':null}}", "{'a':null}", 1},
    {"{'a':{'$lte':null}}", "{}", 1},
    {"{'a':{'$lte':null}}", "{'a':null}", 1},
    {"{'a':{'$gt':null}}", "{'a':null}", 0},
    {"{'a':{'$gt':null}}", "{}", 0},
    {"{'a':{'$lt':null}}", "{}", 0},
    {"{'a':{'$lt':null}}", "{'a':null}", 0},
    {"{'a':{'$gte':null}}", "{'a':1}", 0},
    {"{'a':{'$lte':null}}", "{'a':'x'}", 0},
    {"{'a':{'$gt':null}}", "{'a':1}", 0},
    {"{'a':{'$in':[null]}}", "{}", 1},
    {"{'a':{'$in':[null]}}", "{'a':null}", 1},
    {"{'a':{'$in':[null,1]}}", "{'a':1}", 1},
    {"{'a':{'$in':[null,1]}}", "{'a':2}", 0},
    {"{'a':{'$nin':[null]}}", "{}", 0},
    {"{'a':{'$nin':[null]}}", "{'a':1}", 1},
    {"{'a':{'$nin':[null]}}", "{'a':[1,null]}", 0},
    {"{'a':{'$exists':true}}", "{'a':null}", 1},
    {"{'a':{'$exists':false}}", "{'a':null}", 0},
};

/* ---- $ne -------------------------------------------------------------- */

static const fcase_t ne_cases[] = {
    {"{'a':{'$ne':1}}", "{'a':2}", 1},
    {"{'a':{'$ne':1}}", "{'a':1}", 0},
    {"{'a':{'$ne':1}}", "{'a':1.0}", 0},
    {"{'a':{'$ne':1}}", "{}", 1},
    {"{'a':{'$ne':1}}", "{'a':null}", 1},
    {"{'a':{'$ne':1}}", "{'a':'1'}", 1},
    {"{'a':{'$ne':1}}", "{'a':[1,2]}", 0},
    {"{'a':{'$ne':1}}", "{'a':[2,1]}", 0},
    {"{'a':{'$ne':1}}", "{'a':[2,3]}", 1},
    {"{'a':{'$ne':1}}", "{'a':[]}", 1},
    {"{'a':{'$ne':1}}", "{'a':[[1]]}", 1},
    {"{'a':{'$ne':[1,2]}}", "{'a':[1,2]}", 0},
    {"{'a':{'$ne':[1,2]}}", "{'a':[[1,2]]}", 0},
    {"{'a':{'$ne':[1,2]}}", "{'a':[1,3]}", 1},
    {"{'a':{'$ne':[1,2]}}", "{'a':1}", 1},
    {"{'a':{'$ne':{'b':1}}}", "{'a':{'b':1}}", 0},
    {"{'a':{'$ne':{'b':1}}}", "{'a':[{'b':1}]}", 0},
    {"{'a':{'$ne':{'b':1}}}", "{'a':{'b':2}}", 1},
    {"{'a.b':{'$ne':1}}", "{'a':[{'b':1},{'b':2}]}", 0},
    {"{'a.b':{'$ne':1}}", "{'a':[{'b':2},{'b':3}]}", 1},
    {"{'a.b':{'$ne':1}}", "{'a':[{'c':1}]}", 1},
    {"{'a.b':{'$ne':1}}", "{}", 1},
    {"{'a.b':{'$ne':1}}", "{'a':[{'b':[0,1]}]}", 0},
    {"{'pending':{'$ne':'t1'}}", "{'pending':['t0','t2']}", 1},
    {"{'pending':{'$ne':'t1'}}", "{'pending':['t0','t1']}", 0},
    {"{'pending':{'$ne':'t1'}}", "{'pending':[]}", 1},
    {"{'a':{'$ne':'x'}}", "{'a':'y'}", 1},
    {"{'a':{'$ne':true}}", "{'a':1}", 1},
    {"{'a':{'$ne':1},'b':2}", "{'a':2,'b':2}", 1},
    {"{'a':{'$ne':1},'b':2}", "{'a':2,'b':3}", 0},
};

/* ---- $gt $gte $lt $lte: type brackets, exact numbers -------------------- */

static const fcase_t cmp_cases[] = {
    {"{'a':{'$gt':1}}", "{'a':2}", 1},
    {"{'a':{'$gt':1}}", "{'a':1}", 0},
    {"{'a':{'$gt':1}}", "{'a':1.5}", 1},
    {"{'a':{'$gt':1}}", "{'a':1.0}", 0},
    {"{'a':{'$gt':1}}", "{'a':'x'}", 0},
    {"{'a':{'$gt':1}}", "{'a':null}", 0},
    {"{'a':{'$gt':1}}", "{}", 0},
    {"{'a':{'$gt':1}}", "{'a':true}", 0},
    {"{'a':{'$gt':1}}", "{'a':{'b':2}}", 0},
    {"{'a':{'$gt':1}}", "{'a':[0,5]}", 1},
    {"{'a':{'$gt':1}}", "{'a':[0,1]}", 0},
    {"{'a':{'$gt':1}}", "{'a':[[5]]}", 0},
    {"{'a':{'$gte':1}}", "{'a':1}", 1},
    {"{'a':{'$gte':1}}", "{'a':1.0}", 1},
    {"{'a':{'$gte':1}}", "{'a':0.999}", 0},
    {"{'a':{'$gte':1}}", "{'a':'1'}", 0},
    {"{'a':{'$lt':1}}", "{'a':0}", 1},
    {"{'a':{'$lt':1}}", "{'a':-1.5}", 1},
    {"{'a':{'$lt':1}}", "{'a':1}", 0},
    {"{'a':{'$lt':1}}", "{'a':'0'}", 0},
    {"{'a':{'$lt':1}}", "{'a':null}", 0},
    {"{'a':{'$lt':1}}", "{'a':false}", 0},
    {"{'a':{'$lt':1}}", "{'a':[5,0]}", 1},
    {"{'a':{'$lte':1}}", "{'a':1}", 1},
    {"{'a':{'$lte':1}}", "{'a':1.0000001}", 0},
    {"{'a':{'$gt':'a'}}", "{'a':'b'}", 1},
    {"{'a':{'$gt':'a'}}", "{'a':'a'}", 0},
    {"{'a':{'$gt':'a'}}", "{'a':'B'}", 0},
    {"{'a':{'$gt':'a'}}", "{'a':5}", 0},
    {"{'a':{'$gt':'ab'}}", "{'a':'abc'}", 1},
    {"{'a':{'$lt':'ab'}}", "{'a':'a'}", 1},
    {"{'a':{'$lt':'b'}}", "{'a':'\\u00e9'}", 0},
    {"{'a':{'$gte':''}}", "{'a':''}", 1},
    {"{'a':{'$gt':1,'$lt':5}}", "{'a':3}", 1},
    {"{'a':{'$gt':1,'$lt':5}}", "{'a':[0,10]}", 1},
    {"{'a':{'$gt':1,'$lt':5}}", "{'a':[0,1]}", 0},
    {"{'a':{'$gt':1,'$lt':5}}", "{'a':6}", 0},
    {"{'a':{'$gte':1,'$lte':1}}", "{'a':1.0}", 1},
    /* exact int64/double comparison */
    {"{'a':{'$gt':9007199254740992}}", "{'a':9007199254740993}", 1},
    {"{'a':{'$gt':9007199254740992.0}}", "{'a':9007199254740993}", 1},
    {"{'a':{'$lt':9007199254740993}}", "{'a':9007199254740992.0}", 1},
    {"{'a':{'$gte':9007199254740993}}", "{'a':9007199254740992.0}", 0},
    {"{'a':{'$gte':9223372036854775807}}", "{'a':9.3e18}", 1},
    {"{'a':{'$lt':9223372036854775807}}", "{'a':9.223372036854775807e18}", 0},
    {"{'a':{'$gt':9223372036854775807}}", "{'a':9.223372036854775807e18}", 1},
    {"{'a':{'$lt':-9223372036854775808}}", "{'a':-1e19}", 1},
    {"{'a':{'$gt':-9223372036854775808}}", "{'a':-1e19}", 0},
    {"{'a':{'$gt':1e300}}", "{'a':9223372036854775807}", 0},
    {"{'a':{'$lt':1e300}}", "{'a':9223372036854775807}", 1},
    {"{'a':{'$gt':0.5}}", "{'a':1}", 1},
    {"{'a':{'$lt':0.5}}", "{'a':0}", 1},
    {"{'a':{'$gt':-0.5}}", "{'a':0}", 1},
    {"{'a':{'$lt':-0.5}}", "{'a':-1}", 1},
    {"{'a':{'$gt':-1.5}}", "{'a':-1}", 1},
    {"{'a':{'$lt':-1.5}}", "{'a':-2}", 1},
    {"{'a':{'$gt':-1.5}}", "{'a':-2}", 0},
    {"{'a':{'$gte':-0.0}}", "{'a':0}", 1},
    {"{'a':{'$gt':2.5}}", "{'a':2}", 0},
    {"{'a':{'$lt':2.5}}", "{'a':3}", 0},
    {"{'balance':{'$gte':100}}", "{'balance':100}", 1},
    {"{'balance':{'$gte':100}}", "{'balance':99}", 0},
    /* booleans, objects, arrays compare within their own bracket */
    {"{'a':{'$gt':false}}", "{'a':true}", 1},
    {"{'a':{'$gt':true}}", "{'a':true}", 0},
    {"{'a':{'$lt':true}}", "{'a':false}", 1},
    {"{'a':{'$gt':false}}", "{'a':1}", 0},
    {"{'a':{'$gte':false}}", "{'a':false}", 1},
    {"{'a':{'$gt':{}}}", "{'a':{'b':1}}", 1},
    {"{'a':{'$gt':{'b':1}}}", "{'a':{'b':2}}", 1},
    {"{'a':{'$gt':{'b':1}}}", "{'a':{'c':0}}", 1},
    {"{'a':{'$gt':{'b':1}}}", "{'a':{'a':'x'}}", 1},
    {"{'a':{'$lt':{'b':1}}}", "{'a':{'b':1,'c':1}}", 0},
    {"{'a':{'$gt':{'b':1}}}", "{'a':{'b':1,'c':1}}", 1},
    {"{'a':{'$gt':{'b':1}}}", "{'a':[1]}", 0},
    {"{'a':{'$gt':[1]}}", "{'a':[2]}", 1},
    {"{'a':{'$gt':[1]}}", "{'a':[1]}", 0},
    {"{'a':{'$gt':[1]}}", "{'a':[1,0]}", 1},
    {"{'a':{'$lt':[1]}}", "{'a':[]}", 1},
    {"{'a':{'$gt':[]}}", "{'a':[1]}", 1},
    {"{'a':{'$gt':[]}}", "{'a':5}", 0},
    {"{'a':{'$gt':[1,2]}}", "{'a':[[1,3]]}", 1},
    {"{'a.b':{'$gt':5}}", "{'a':[{'b':1},{'b':10}]}", 1},
    {"{'a.b':{'$gt':5}}", "{'a':[{'b':1},{'b':5}]}", 0},
    {"{'a.b':{'$lt':5}}", "{'a':[{'b':[9,4]}]}", 1},
};

/* ---- $in and $nin -------------------------------------------------------- */

static const fcase_t in_cases[] = {
    {"{'a':{'$in':[1,2]}}", "{'a':2}", 1},
    {"{'a':{'$in':[1,2]}}", "{'a':3}", 0},
    {"{'a':{'$in':[1,2]}}", "{'a':[3,2]}", 1},
    {"{'a':{'$in':[1,2]}}", "{'a':[3,4]}", 0},
    {"{'a':{'$in':[1,2]}}", "{}", 0},
    {"{'a':{'$in':[1,2]}}", "{'a':2.0}", 1},
    {"{'a':{'$in':[1,2]}}", "{'a':'2'}", 0},
    {"{'a':{'$in':[1,2]}}", "{'a':[]}", 0},
    {"{'a':{'$in':[]}}", "{'a':1}", 0},
    {"{'a':{'$in':[]}}", "{}", 0},
    {"{'a':{'$in':[[1,2]]}}", "{'a':[1,2]}", 1},
    {"{'a':{'$in':[[1,2]]}}", "{'a':[[1,2]]}", 1},
    {"{'a':{'$in':[[1,2]]}}", "{'a':1}", 0},
    {"{'a':{'$in':[{'b':1}]}}", "{'a':{'b':1}}", 1},
    {"{'a':{'$in':[{'b':1}]}}", "{'a':[{'b':1}]}", 1},
    {"{'a':{'$in':[{'b':1}]}}", "{'a':{'b':1,'c':1}}", 0},
    {"{'a':{'$in':[1,'1']}}", "{'a':'1'}", 1},
    {"{'a':{'$in':['x',1,null,true,{},[]]}}", "{'a':true}", 1},
    {"{'a':{'$in':['x',1,null,true,{},[]]}}", "{'a':{}}", 1},
    {"{'a':{'$in':['x',1,null,true,{},[]]}}", "{'a':[]}", 1},
    {"{'a':{'$in':['x',1,null,true,{},[]]}}", "{'a':false}", 0},
    {"{'a':{'$in':['x',1,null,true,{},[]]}}", "{'a':'y'}", 0},
    {"{'a':{'$in':[3,1,2,1,3]}}", "{'a':3}", 1},
    {"{'a':{'$in':[1.5,2.5]}}", "{'a':2.5}", 1},
    {"{'a':{'$in':[9007199254740993]}}", "{'a':9007199254740992.0}", 0},
    {"{'_id':{'$in':['id01','id02','id03','id04','id05','id06','id07',"
     "'id08','id09','id10','id11','id12']}}",
     "{'_id':'id09'}", 1},
    {"{'_id':{'$in':['id01','id02','id03','id04','id05','id06','id07',"
     "'id08','id09','id10','id11','id12']}}",
     "{'_id':'id13'}", 0},
    {"{'_id':{'$in':[10,9,8,7,6,5,4,3,2,1,0]}}", "{'_id':0}", 1},
    {"{'_id':{'$in':[10,9,8,7,6,5,4,3,2,1,0]}}", "{'_id':11}", 0},
    {"{'a.b':{'$in':[1]}}", "{'a':[{'b':2},{'b':1}]}", 1},
    {"{'a.b':{'$in':[3]}}", "{'a':[{'b':2},{'b':1}]}", 0},
    {"{'a':{'$nin':[1,2]}}", "{'a':3}", 1},
    {"{'a':{'$nin':[1,2]}}", "{'a':1}", 0},
    {"{'a':{'$nin':[1,2]}}", "{'a':1.0}", 0},
    {"{'a':{'$nin':[1,2]}}", "{'a':[3,1]}", 0},
    {"{'a':{'$nin':[1,2]}}", "{'a':[3,4]}", 1},
    {"{'a':{'$nin':[1,2]}}", "{'a':[]}", 1},
    {"{'a':{'$nin':[1,2]}}", "{}", 1},
    {"{'a':{'$nin':[[1,2]]}}", "{'a':[1,2]}", 0},
    {"{'a':{'$nin':[]}}", "{'a':1}", 1},
    {"{'a':{'$nin':[]}}", "{}", 1},
    {"{'a.b':{'$nin':[1]}}", "{'a':[{'b':2},{'b':1}]}", 0},
    {"{'a.b':{'$nin':[1]}}", "{'a':[{'b':2},{'b':3}]}", 1},
    {"{'a':{'$in':[1],'$nin':[2]}}", "{'a':[1,3]}", 1},
    {"{'a':{'$in':[1],'$nin':[2]}}", "{'a':[1,2]}", 0},
};

/* ---- $exists ------------------------------------------------------------ */

static const fcase_t exists_cases[] = {
    {"{'a':{'$exists':true}}", "{'a':1}", 1},
    {"{'a':{'$exists':true}}", "{}", 0},
    {"{'a':{'$exists':true}}", "{'a':[]}", 1},
    {"{'a':{'$exists':true}}", "{'a':false}", 1},
    {"{'a':{'$exists':true}}", "{'b':1}", 0},
    {"{'a':{'$exists':false}}", "{'a':1}", 0},
    {"{'a':{'$exists':false}}", "{}", 1},
    {"{'a':{'$exists':false}}", "{'a':[]}", 0},
    {"{'a':{'$exists':1}}", "{'a':1}", 1},
    {"{'a':{'$exists':1}}", "{}", 0},
    {"{'a':{'$exists':0}}", "{}", 1},
    {"{'a':{'$exists':0}}", "{'a':0}", 0},
    {"{'a':{'$exists':0.5}}", "{'a':0}", 1},
    {"{'a.b':{'$exists':true}}", "{'a':[{'b':1}]}", 1},
    {"{'a.b':{'$exists':true}}", "{'a':[{'c':1}]}", 0},
    {"{'a.b':{'$exists':true}}", "{'a':[1]}", 0},
    {"{'a.b':{'$exists':true}}", "{'a':{'b':null}}", 1},
    {"{'a.b':{'$exists':true}}", "{'a':5}", 0},
    {"{'a.b':{'$exists':true}}", "{'a':[{'c':1},{'b':2}]}", 1},
    {"{'a.b':{'$exists':false}}", "{'a':[{'c':1},{'b':1}]}", 0},
    {"{'a.b':{'$exists':false}}", "{'a':[{'c':1}]}", 1},
    {"{'a.b':{'$exists':false}}", "{'a':[1,2]}", 1},
    {"{'a.b':{'$exists':false}}", "{'a':[]}", 1},
    {"{'a.b':{'$exists':false}}", "{'a':'str'}", 1},
    {"{'a':{'$exists':true,'$ne':null}}", "{'a':null}", 0},
    {"{'a':{'$exists':true,'$ne':null}}", "{'a':0}", 1},
};

/* ---- $size ------------------------------------------------------------ */

static const fcase_t size_cases[] = {
    {"{'a':{'$size':2}}", "{'a':[1,2]}", 1},
    {"{'a':{'$size':2}}", "{'a':[1]}", 0},
    {"{'a':{'$size':2}}", "{'a':[]}", 0},
    {"{'a':{'$size':2}}", "{'a':'ab'}", 0},
    {"{'a':{'$size':2}}", "{}", 0},
    {"{'a':{'$size':2}}", "{'a':{'x':1,'y':2}}", 0},
    {"{'a':{'$size':0}}", "{'a':[]}", 1},
    {"{'a':{'$size':0}}", "{}", 0},
    {"{'a':{'$size':0}}", "{'a':null}", 0},
    {"{'a':{'$size':1}}", "{'a':[[1,2]]}", 1},
    {"{'a':{'$size':2}}", "{'a':[[1,2]]}", 0},
    {"{'a':{'$size':2.0}}", "{'a':[1,2]}", 1},
    {"{'a.b':{'$size':2}}", "{'a':[{'b':[1,2]}]}", 1},
    {"{'a.b':{'$size':1}}", "{'a':[{'b':[1,2]},{'b':[3]}]}", 1},
    {"{'a.b':{'$size':3}}", "{'a':[{'b':[1,2]},{'b':[3]}]}", 0},
    {"{'a.b':{'$size':2}}", "{'a':{'b':[1,2]}}", 1},
    {"{'a':{'$not':{'$size':2}}}", "{'a':[1]}", 1},
    {"{'a':{'$not':{'$size':2}}}", "{}", 1},
    {"{'a':{'$not':{'$size':2}}}", "{'a':[1,2]}", 0},
    {"{'a':{'$size':1,'$all':[5]}}", "{'a':[5]}", 1},
    {"{'a':{'$size':1,'$all':[5]}}", "{'a':[5,5]}", 0},
};

/* ---- $all ------------------------------------------------------------- */

static const fcase_t all_cases[] = {
    {"{'a':{'$all':[1,2]}}", "{'a':[1,2,3]}", 1},
    {"{'a':{'$all':[1,2]}}", "{'a':[2,1]}", 1},
    {"{'a':{'$all':[1,2]}}", "{'a':[1]}", 0},
    {"{'a':{'$all':[1,2]}}", "{'a':1}", 0},
    {"{'a':{'$all':[1,2]}}", "{}", 0},
    {"{'a':{'$all':[1]}}", "{'a':1}", 1},
    {"{'a':{'$all':[1]}}", "{'a':[1.0]}", 1},
    {"{'a':{'$all':[]}}", "{'a':[]}", 0},
    {"{'a':{'$all':[]}}", "{'a':[1]}", 0},
    {"{'a':{'$all':[]}}", "{}", 0},
    {"{'a':{'$all':[[1,2]]}}", "{'a':[1,2]}", 1},
    {"{'a':{'$all':[[1,2]]}}", "{'a':[[1,2],3]}", 1},
    {"{'a':{'$all':[[1,2]]}}", "{'a':[2,1]}", 0},
    {"{'a':{'$all':['x','x']}}", "{'a':['x']}", 1},
    {"{'a':{'$all':[null]}}", "{}", 1},
    {"{'a':{'$all':[{'b':1}]}}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a.b':{'$all':[1,2]}}", "{'a':[{'b':1},{'b':2}]}", 1},
    {"{'a.b':{'$all':[1,3]}}", "{'a':[{'b':1},{'b':2}]}", 0},
    {"{'a':{'$all':[{'$elemMatch':{'x':1}},{'$elemMatch':{'y':2}}]}}",
     "{'a':[{'x':1},{'y':2}]}", 1},
    {"{'a':{'$all':[{'$elemMatch':{'x':1}},{'$elemMatch':{'y':2}}]}}",
     "{'a':[{'x':1}]}", 0},
    {"{'a':{'$all':[{'$elemMatch':{'$gt':5}}]}}", "{'a':[1,6]}", 1},
    {"{'a':{'$all':[{'$elemMatch':{'$gt':5}}]}}", "{'a':[1,5]}", 0},
    {"{'tags':{'$all':['ssl','security']}}",
     "{'tags':['appliance','ssl','security']}", 1},
};

/* ---- $elemMatch: value form, query form, versus implicit ---------------- */

static const fcase_t elem_cases[] = {
    {"{'a':{'$elemMatch':{'$gte':80,'$lt':85}}}", "{'a':[82]}", 1},
    {"{'a':{'$elemMatch':{'$gte':80,'$lt':85}}}", "{'a':[80,90]}", 1},
    {"{'a':{'$elemMatch':{'$gte':80,'$lt':85}}}", "{'a':[79,85]}", 0},
    {"{'a':{'$gte':80,'$lt':85}}", "{'a':[79,85]}", 1},
    {"{'a':{'$elemMatch':{'$gte':80,'$lt':85}}}", "{'a':82}", 0},
    {"{'a':{'$elemMatch':{'$gte':80,'$lt':85}}}", "{}", 0},
    {"{'a':{'$elemMatch':{'$gt':1,'$lt':5}}}", "{'a':[0,10]}", 0},
    {"{'a':{'$elemMatch':{'$gt':1,'$lt':5}}}", "{'a':[0,3]}", 1},
    {"{'a':{'$elemMatch':{'$eq':1}}}", "{'a':[1]}", 1},
    {"{'a':{'$elemMatch':{'$eq':1}}}", "{'a':[[1]]}", 0},
    {"{'a':{'$elemMatch':{'$ne':1}}}", "{'a':[1,2]}", 1},
    {"{'a':{'$elemMatch':{'$ne':1}}}", "{'a':[1]}", 0},
    {"{'a':{'$elemMatch':{'$ne':1}}}", "{'a':[]}", 0},
    {"{'a':{'$elemMatch':{'$in':[1,2]}}}", "{'a':[3,2]}", 1},
    {"{'a':{'$elemMatch':{'$nin':[1,2]}}}", "{'a':[1,2]}", 0},
    {"{'a':{'$elemMatch':{'$nin':[1,2]}}}", "{'a':[1,3]}", 1},
    {"{'a':{'$elemMatch':{'$exists':true}}}", "{'a':[null]}", 1},
    {"{'a':{'$elemMatch':{'$exists':true}}}", "{'a':[]}", 0},
    {"{'a':{'$elemMatch':{'$size':1}}}", "{'a':[[1]]}", 1},
    {"{'a':{'$elemMatch':{'$size':1}}}", "{'a':[1]}", 0},
    {"{'a':{'$elemMatch':{'$elemMatch':{'$gt':1}}}}", "{'a':[[0,2]]}", 1},
    {"{'a':{'$elemMatch':{'$elemMatch':{'$gt':1}}}}", "{'a':[[0,1]]}", 0},
    {"{'a':{'$elemMatch':{'$elemMatch':{'$gt':1}}}}", "{'a':[2]}", 0},
    {"{'a':{'$elemMatch':{'$not':{'$gt':1}}}}", "{'a':[2,0]}", 1},
    {"{'a':{'$elemMatch':{'$not':{'$gt':1}}}}", "{'a':[2,3]}", 0},
    {"{'a':{'$elemMatch':{'$gt':1}}}", "{'a':[[5]]}", 0},
    {"{'a':{'$elemMatch':{'$all':[1]}}}", "{'a':[1]}", 1},
    {"{'results':{'$elemMatch':{'product':'xyz','score':{'$gte':8}}}}",
     "{'results':[{'product':'abc','score':10},{'product':'xyz','score':5}]}",
     0},
    {"{'results':{'$elemMatch':{'product':'xyz','score':{'$gte':8}}}}",
     "{'results':[{'product':'abc','score':10},{'product':'xyz','score':8}]}",
     1},
    {"{'results.product':'xyz','results.score':{'$gte':8}}",
     "{'results':[{'product':'abc','score':10},{'product':'xyz','score':5}]}",
     1},
    {"{'a':{'$elemMatch':{'b':1}}}", "{'a':[{'b':1}]}", 1},
    {"{'a':{'$elemMatch':{'b':1}}}", "{'a':{'b':1}}", 0},
    {"{'a':{'$elemMatch':{'b':1}}}", "{'a':[{'b':[1,2]}]}", 1},
    {"{'a':{'$elemMatch':{'b':1}}}", "{'a':[[{'b':1}]]}", 0},
    {"{'a':{'$elemMatch':{'b':1}}}", "{'a':[1,{'b':2}]}", 0},
    {"{'a':{'$elemMatch':{}}}", "{'a':[{}]}", 1},
    {"{'a':{'$elemMatch':{}}}", "{'a':[1]}", 0},
    {"{'a':{'$elemMatch':{}}}", "{'a':[]}", 0},
    {"{'a':{'$elemMatch':{'$or':[{'b':1},{'c':1}]}}}", "{'a':[{'c':1}]}", 1},
    {"{'a':{'$elemMatch':{'$or':[{'b':1},{'c':1}]}}}", "{'a':[{'d':1}]}", 0},
    {"{'a':{'$elemMatch':{'$and':[{'b':1},{'c':1}]}}}",
     "{'a':[{'b':1},{'c':1}]}", 0},
    {"{'a':{'$elemMatch':{'$and':[{'b':1},{'c':1}]}}}", "{'a':[{'b':1,'c':1}]}",
     1},
    {"{'a':{'$elemMatch':{'b':1,'c':1}}}", "{'a':[{'b':1},{'c':1}]}", 0},
    {"{'a.b':1,'a.c':1}", "{'a':[{'b':1},{'c':1}]}", 1},
    {"{'a.b':{'$elemMatch':{'c':1}}}", "{'a':[{'b':[{'c':1}]}]}", 1},
    {"{'a':{'$elemMatch':{'0':1}}}", "{'a':[[1,2]]}", 1},
    {"{'a':{'$elemMatch':{'b':{'$elemMatch':{'c':{'$gt':1}}}}}}",
     "{'a':[{'b':[{'c':2}]}]}", 1},
    {"{'a':{'$elemMatch':{'b':{'$elemMatch':{'c':{'$gt':1}}}}}}",
     "{'a':[{'b':[{'c':1}]}]}", 0},
    {"{'a':{'$elemMatch':{'b':{'$exists':false}}}}", "{'a':[{'b':1},{'c':1}]}",
     1},
    {"{'a':{'$elemMatch':{'b':{'$exists':false}}}}", "{'a':[{'b':1}]}", 0},
    {"{'a':{'$elemMatch':{'b':null}}}", "{'a':[{'c':1}]}", 1},
    {"{'changes':{'$elemMatch':{'account':'A','amount':{'$lt':0}}}}",
     "{'changes':[{'account':'A','amount':5},{'account':'B','amount':-5}]}", 0},
    {"{'changes':{'$elemMatch':{'account':'B','amount':{'$lt':0}}}}",
     "{'changes':[{'account':'A','amount':5},{'account':'B','amount':-5}]}", 1},
};

/* ---- $not ------------------------------------------------------------- */

static const fcase_t not_cases[] = {
    {"{'a':{'$not':{'$gt':1}}}", "{'a':2}", 0},
    {"{'a':{'$not':{'$gt':1}}}", "{'a':1}", 1},
    {"{'a':{'$not':{'$gt':1}}}", "{}", 1},
    {"{'a':{'$not':{'$gt':1}}}", "{'a':'x'}", 1},
    {"{'a':{'$not':{'$gt':1}}}", "{'a':[0,5]}", 0},
    {"{'a':{'$not':{'$gt':1}}}", "{'a':[0,1]}", 1},
    {"{'a':{'$not':{'$eq':1}}}", "{'a':[1,2]}", 0},
    {"{'a':{'$not':{'$eq':1}}}", "{'a':[2,3]}", 1},
    {"{'a':{'$not':{'$in':[1]}}}", "{}", 1},
    {"{'a':{'$not':{'$in':[1]}}}", "{'a':1}", 0},
    {"{'a':{'$not':{'$gt':1,'$lt':5}}}", "{'a':3}", 0},
    {"{'a':{'$not':{'$gt':1,'$lt':5}}}", "{'a':7}", 1},
    {"{'a':{'$not':{'$gt':1,'$lt':5}}}", "{'a':[0,10]}", 0},
    {"{'a':{'$not':{'$exists':true}}}", "{}", 1},
    {"{'a':{'$not':{'$exists':true}}}", "{'a':null}", 0},
    {"{'a':{'$not':{'$not':{'$eq':1}}}}", "{'a':1}", 1},
    {"{'a':{'$not':{'$not':{'$eq':1}}}}", "{'a':2}", 0},
    {"{'a':{'$not':{'$elemMatch':{'$gt':1}}}}", "{'a':[0]}", 1},
    {"{'a':{'$not':{'$elemMatch':{'$gt':1}}}}", "{'a':[2]}", 0},
    {"{'a':{'$not':{'$elemMatch':{'$gt':1}}}}", "{'a':5}", 1},
    {"{'a':{'$not':{'$ne':1}}}", "{'a':[1,2]}", 1},
    {"{'a':{'$not':{'$ne':1}}}", "{}", 0},
    {"{'a.b':{'$not':{'$eq':1}}}", "{'a':[{'b':2},{'b':1}]}", 0},
    {"{'a.b':{'$not':{'$eq':1}}}", "{'a':[{'b':2},{'b':3}]}", 1},
    {"{'a':{'$not':{'$all':[1,2]}}}", "{'a':[1]}", 1},
    {"{'a':{'$not':{'$all':[1,2]}}}", "{'a':[2,1]}", 0},
    {"{'a':{'$not':{'$size':0}}}", "{'a':[]}", 0},
};

/* ---- $and $or $nor, nested --------------------------------------------- */

static const fcase_t logic_cases[] = {
    {"{'$and':[{'a':1},{'b':2}]}", "{'a':1,'b':2}", 1},
    {"{'$and':[{'a':1},{'b':2}]}", "{'a':1}", 0},
    {"{'$and':[{'a':1}]}", "{'a':1}", 1},
    {"{'$and':[{}]}", "{}", 1},
    {"{'$or':[{'a':1},{'b':2}]}", "{'b':2}", 1},
    {"{'$or':[{'a':1},{'b':2}]}", "{'a':1}", 1},
    {"{'$or':[{'a':1},{'b':2}]}", "{'a':2,'b':1}", 0},
    {"{'$or':[{'a':1},{'b':2}]}", "{}", 0},
    {"{'$or':[{}]}", "{}", 1},
    {"{'$nor':[{'a':1},{'b':2}]}", "{}", 1},
    {"{'$nor':[{'a':1},{'b':2}]}", "{'a':1}", 0},
    {"{'$nor':[{'a':1},{'b':2}]}", "{'b':2}", 0},
    {"{'$nor':[{'a':1},{'b':2}]}", "{'a':2,'b':3}", 1},
    {"{'$nor':[{'a':{'$exists':true}}]}", "{}", 1},
    {"{'$nor':[{'a':{'$exists':true}}]}", "{'a':null}", 0},
    {"{'$or':[{'$and':[{'a':1},{'b':1}]},{'$nor':[{'c':1}]}]}",
     "{'a':1,'b':1,'c':1}", 1},
    {"{'$or':[{'$and':[{'a':1},{'b':1}]},{'$nor':[{'c':1}]}]}",
     "{'a':1,'b':2,'c':1}", 0},
    {"{'$or':[{'$and':[{'a':1},{'b':1}]},{'$nor':[{'c':1}]}]}",
     "{'a':1,'b':2,'c':2}", 1},
    {"{'$and':[{'a':{'$gt':1}},{'a':{'$lt':5}}]}", "{'a':[0,10]}", 1},
    {"{'$and':[{'a':{'$gt':1}},{'a':{'$lt':5}}]}", "{'a':[0,1]}", 0},
    {"{'$or':[{'a':null},{'a':{'$size':0}}]}", "{'a':[]}", 1},
    {"{'$or':[{'a':null},{'a':{'$size':0}}]}", "{}", 1},
    {"{'$or':[{'a':null},{'a':{'$size':0}}]}", "{'a':[1]}", 0},
    {"{'a':1,'$or':[{'b':1},{'c':1}]}", "{'a':1,'c':1}", 1},
    {"{'a':1,'$or':[{'b':1},{'c':1}]}", "{'a':2,'c':1}", 0},
    {"{'$and':[{'$or':[{'a':1},{'a':2}]},{'$or':[{'b':1},{'b':2}]}]}",
     "{'a':2,'b':1}", 1},
    {"{'$and':[{'$or':[{'a':1},{'a':2}]},{'$or':[{'b':1},{'b':2}]}]}",
     "{'a':3,'b':1}", 0},
    {"{'$or':[{'$or':[{'$or':[{'a':1}]}]}]}", "{'a':1}", 1},
    {"{'$nor':[{'$nor':[{'a':1}]}]}", "{'a':1}", 1},
    {"{'$nor':[{'$nor':[{'a':1}]}]}", "{'a':2}", 0},
    {"{'$and':[{'a':1}],'$or':[{'b':1}],'$nor':[{'c':1}]}", "{'a':1,'b':1}",
     1},
    {"{'$and':[{'a':1}],'$or':[{'b':1}],'$nor':[{'c':1}]}",
     "{'a':1,'b':1,'c':1}", 0},
    {"{'$comment':'why','a':1}", "{'a':1}", 1},
    {"{'$comment':'why','a':1}", "{'a':2}", 0},
    {"{'$or':[{'a.b':1},{'a.c':{'$exists':true}}]}", "{'a':[{'c':null}]}", 1},
};

/* ---- documents shaped like doctx's own (accounts, transfers) ------------ */

static const fcase_t app_cases[] = {
    {"{'_id':'A','balance':{'$gte':100},'pending':{'$ne':'t1'}}",
     "{'_id':'A','balance':150,'pending':['t0']}", 1},
    {"{'_id':'A','balance':{'$gte':100},'pending':{'$ne':'t1'}}",
     "{'_id':'A','balance':150,'pending':['t1','t0']}", 0},
    {"{'_id':'A','balance':{'$gte':100},'pending':{'$ne':'t1'}}",
     "{'_id':'A','balance':99,'pending':[]}", 0},
    {"{'_id':'A','balance':{'$gte':100},'pending':{'$ne':'t1'}}",
     "{'_id':'B','balance':150,'pending':[]}", 0},
    {"{'_id':'t1','state':{'$in':['initial','pending']}}",
     "{'_id':'t1','state':'pending'}", 1},
    {"{'_id':'t1','state':{'$in':['initial','pending']}}",
     "{'_id':'t1','state':'done'}", 0},
    {"{'state':'pending','lastModified':{'$lt':1700000000000}}",
     "{'state':'pending','lastModified':1699999999999}", 1},
    {"{'state':'pending','lastModified':{'$lt':1700000000000}}",
     "{'state':'pending','lastModified':1700000000000}", 0},
    {"{'lease.owner':{'$exists':false}}", "{'lease':{}}", 1},
    {"{'lease.until':{'$lt':5}}", "{'lease':{'owner':'w','until':4}}", 1},
    {"{'$or':[{'lease':null},{'lease.until':{'$lt':5}}]}", "{}", 1},
    {"{'$or':[{'lease':null},{'lease.until':{'$lt':5}}]}",
     "{'lease':{'until':9}}", 0},
};

/* Each table again, compiled as the store API compiles (holding references
 * to the spec's operands, DTX__COMPILE_BORROW): the answers must be the
 * same, and the spec's own reference is dropped before matching, so the
 * compiled filter must hold what it uses. */
static void borrowed_table(const char *name, const fcase_t *t, size_t n) {
  for (size_t i = 0; i < n; i++) {
    json_t *spec = JQNEW(t[i].filter), *doc = JQNEW(t[i].doc);
    dtx__filter_t *f = NULL;
    int rc = dtx__filter_compile_flags(spec, DTX__COMPILE_BORROW, &f);
    json_decref(spec);
    CHECKF(rc == 0, "borrowed %s[%zu] compile %s: %s (%s)", name, i,
           t[i].filter, dtx_errname(rc), dtx_errdetail());
    if (rc == 0) {
      int got = dtx__filter_match(f, doc);
      CHECKF(got == t[i].want,
             "borrowed %s[%zu] filter %s doc %s: got %d want %d", name, i,
             t[i].filter, t[i].doc, got, t[i].want);
    }
    dtx__filter_free(f);
    json_decref(doc);
  }
}

#define RUN_BORROWED(t) borrowed_table(#t, t, sizeof t / sizeof t[0])

static void test_tables(void) {
  RUN_BORROWED(eq_cases);
  RUN_BORROWED(array_eq_cases);
  RUN_BORROWED(object_eq_cases);
  RUN_BORROWED(path_cases);
  RUN_BORROWED(index_cases);
  RUN_BORROWED(null_cases);
  RUN_BORROWED(ne_cases);
  RUN_BORROWED(cmp_cases);
  RUN_BORROWED(in_cases);
  RUN_BORROWED(exists_cases);
  RUN_BORROWED(size_cases);
  RUN_BORROWED(all_cases);
  RUN_BORROWED(elem_cases);
  RUN_BORROWED(not_cases);
  RUN_BORROWED(logic_cases);
  RUN_BORROWED(app_cases);
  RUN(eq_cases);
  RUN(array_eq_cases);
  RUN(object_eq_cases);
  RUN(path_cases);
  RUN(index_cases);
  RUN(null_cases);
  RUN(ne_cases);
  RUN(cmp_cases);
  RUN(in_cases);
  RUN(exists_cases);
  RUN(size_cases);
  RUN(all_cases);
  RUN(elem_cases);
  RUN(not_cases);
  RUN(logic_cases);
  RUN(app_cases);
}

/* ---- invalid filters ---------------------------------------------------- */

typedef struct bcase {
  const char *filter;
  const char *detail; /* must appear in dtx_errdetail() */
} bcase_t;

static const bcase_t bad_cases[] = {
    {"{'a':{'$foo':1}}", "unknown operator $foo at a"},
    {"{'a.b':{'$gt':1,'$foo':1}}", "unknown operator $foo at a.b"},
    {"{'$foo':1}", "$foo"},
    {"{'$where':'this.a > 1'}", "$where"},
    {"{'$text':{'$search':'x'}}", "$text"},
    {"{'$expr':{'$gt':['$a',1]}}", "$expr"},
    {"{'$jsonSchema':{}}", "$jsonSchema"},
    {"{'a':{'$regex':'(x'}}", "$regex: invalid pattern"},
    {"{'a':{'$regex':5}}", "$regex needs a string"},
    {"{'a':{'$regex':'x','$options':'q'}}", "invalid flag 'q'"},
    {"{'a':{'$regex':'x','$options':1}}", "$options needs a string"},
    {"{'a':{'$options':'i'}}", "$options needs a $regex"},
    {"{'a':{'$mod':[0,1]}}", "divisor cannot be 0"},
    {"{'a':{'$mod':[2]}}", "$mod needs an array"},
    {"{'a':{'$mod':[2,1,0]}}", "$mod needs an array"},
    {"{'a':{'$mod':'x'}}", "$mod needs an array"},
    {"{'a':{'$mod':['2',1]}}", "divisor must be a number"},
    {"{'a':{'$mod':[2,null]}}", "remainder must be a number"},
    {"{'a':{'$mod':[1e300,1]}}", "outside the 64-bit"},
    {"{'a':{'$type':'money'}}", "unknown type alias 'money'"},
    {"{'a':{'$type':42}}", "invalid type code"},
    {"{'a':{'$type':['string',true]}}", "$type needs"},
    {"{'a':{'$type':{}}}", "$type needs"},
    {"{'a':{'$gt':1,'b':2}}", "cannot mix"},
    {"{'a':{'b':2,'$gt':1}}", "cannot mix"},
    {"{'a':{'$in':1}}", "$in"},
    {"{'a':{'$in':{'x':1}}}", "$in"},
    {"{'a':{'$nin':'x'}}", "$nin"},
    {"{'a':{'$in':[{'$gt':1}]}}", "$in"},
    {"{'a':{'$nin':[1,{'$exists':true}]}}", "$nin"},
    {"{'a':{'$all':1}}", "$all"},
    {"{'a':{'$all':[{'$gt':1}]}}", "$all"},
    {"{'a':{'$all':[{'$elemMatch':{'b':1}},1]}}", "$all"},
    {"{'a':{'$exists':'yes'}}", "$exists"},
    {"{'a':{'$exists':null}}", "$exists"},
    {"{'a':{'$exists':[]}}", "$exists"},
    {"{'a':{'$size':-1}}", "$size"},
    {"{'a':{'$size':1.5}}", "$size"},
    {"{'a':{'$size':'1'}}", "$size"},
    {"{'a':{'$size':null}}", "$size"},
    {"{'a':{'$not':1}}", "$not"},
    {"{'a':{'$not':{}}}", "$not"},
    {"{'a':{'$not':{'b':1}}}", "$not"},
    {"{'a':{'$not':'x'}}", "$not"},
    {"{'a':{'$not':{'$regex':'(x'}}}", "$regex"},
    {"{'$expr':{'$eq':['$a',1]}}", "unsupported operator $expr"},
    {"{'a':{'$not':{'$not':{'$foo':1}}}}", "$foo"},
    {"{'a':{'$elemMatch':1}}", "$elemMatch"},
    {"{'a':{'$elemMatch':[]}}", "$elemMatch"},
    {"{'a':{'$elemMatch':{'$gt':1,'b':1}}}", "cannot mix"},
    {"{'a':{'$elemMatch':{'$foo':1}}}", "$foo"},
    {"{'a':{'$elemMatch':{'b':{'$foo':1}}}}", "$foo"},
    {"{'a':{'$elemMatch':{'$where':'x'}}}", "$where"},
    {"{'$and':[]}", "$and"},
    {"{'$or':{}}", "$or"},
    {"{'$or':[]}", "$or"},
    {"{'$nor':[1]}", "$nor"},
    {"{'$and':'x'}", "$and"},
    {"{'$and':[{'a':{'$bad':1}}]}", "$bad"},
    {"{'$or':[{'a':1},{'$where':'x'}]}", "$where"},
    {"{'a..b':1}", "a..b"},
    {"{'.a':1}", ".a"},
    {"{'a.':1}", "a."},
    {"{'':1}", "empty field path"},
    {"{'a.$b':1}", "$b"},
    {"{'a':{'$eq':1,'$ne':2,'$foo':3}}", "$foo"},
    {"{'a':{'$geoWithin':{}}}", "$geoWithin"},
    {"{'a':{'$elemMatch':{'b':{'$gt':1,'c':1}}}}", "cannot mix"},
    {"[1]", "object"},
    {"'x'", "object"},
    {"null", "object"},
    {"{'a':{'$':1}}", "$"},
};

/* Both ways of compiling refuse the same filters with the same detail. */
static void test_bad(void) {
  for (size_t k = 0; k < 2 * (sizeof bad_cases / sizeof bad_cases[0]); k++) {
    size_t i = k / 2;
    json_t *spec = Q(bad_cases[i].filter);
    dtx__filter_t *f = (dtx__filter_t *)&f; /* must be reset to NULL */
    int rc = dtx__filter_compile_flags(spec, k % 2 ? DTX__COMPILE_BORROW : 0,
                                       &f);
    CHECKF(rc == DTX_EBADQUERY, "bad[%zu] %s: got %s", i,
           bad_cases[i].filter, dtx_errname(rc));
    CHECKF(f == NULL, "bad[%zu] %s: out not cleared", i, bad_cases[i].filter);
    CHECKF(strstr(dtx_errdetail(), bad_cases[i].detail) != NULL,
           "bad[%zu] %s: detail '%s' lacks '%s'", i, bad_cases[i].filter,
           dtx_errdetail(), bad_cases[i].detail);
    if (rc == 0)
      dtx__filter_free(f);
    if (k % 2 == 0) /* the BSON engine: same code, same detail */
      dtx_t_bfilter_row("bad_cases", i, spec, NULL);
    json_decref(spec);
  }
}

/* MongoDB caps nesting at 100 levels; deeper filters must be refused rather
 * than overflow the stack. */
static void test_depth(void) {
  json_t *q = json_pack("{s:i}", "$eq", 1);
  for (int i = 0; i < 150; i++)
    q = json_pack("{s:o}", "$not", q);
  json_t *spec = json_pack("{s:o}", "a", q);
  dtx__filter_t *f = NULL;
  CHECK_RC(dtx__filter_compile(spec, &f), DTX_EBADQUERY);
  CHECK(f == NULL);
  CHECK(strstr(dtx_errdetail(), "nested") != NULL);
  dtx_t_bfilter_row("depth", 0, spec, NULL);
  json_decref(spec);

  q = json_pack("{s:i}", "a", 1);
  for (int i = 0; i < 150; i++)
    q = json_pack("{s:[o]}", "$and", q);
  CHECK_RC(dtx__filter_compile(q, &f), DTX_EBADQUERY);
  dtx_t_bfilter_row("depth", 1, q, NULL);
  json_decref(q);

  /* 40 levels is fine and evaluates correctly (even count of $not). */
  q = json_pack("{s:i}", "$eq", 1);
  for (int i = 0; i < 40; i++)
    q = json_pack("{s:o}", "$not", q);
  spec = json_pack("{s:o}", "a", q);
  CHECK_RC(dtx__filter_compile(spec, &f), 0);
  json_t *d1 = Q("{'a':1}"), *d2 = Q("{'a':2}");
  CHECK(dtx__filter_match(f, d1) == 1);
  CHECK(dtx__filter_match(f, d2) == 0);
  dtx_t_bfilter_row("depth", 2, spec, d1);
  dtx_t_bfilter_row("depth", 3, spec, d2);
  dtx__filter_free(f);
  json_decref(spec);
  json_decref(d1);
  json_decref(d2);
}

/* NULL means {}; the compiled filter must not borrow from its spec. */
static void test_null_and_ownership(void) {
  dtx__filter_t *f = NULL;
  json_t *doc = Q("{'a':[{'b':'xyz'}],'c':{'d':[1,2]}}");
  CHECK_RC(dtx__filter_compile(NULL, &f), 0);
  CHECK(dtx__filter_match(f, doc) == 1);
  dtx__filter_free(f);

  json_t *spec = Q("{'a.b':{'$in':['xyz','w']},'c':{'d':[1,2]},"
                   "'$or':[{'c.d':{'$gt':1}},{'z':1}]}");
  CHECK_RC(dtx__filter_compile(spec, &f), 0);
  json_object_clear(spec); /* scribble over the spec... */
  json_decref(spec);       /* ...and release it */
  CHECK(dtx__filter_match(f, doc) == 1);
  json_t *other = Q("{'a':[{'b':'w'}],'c':{'d':[1,3]}}");
  CHECK(dtx__filter_match(f, other) == 0);
  dtx__filter_free(f);
  dtx__filter_free(NULL);
  json_decref(doc);
  json_decref(other);
}

/* A filter compiled to be kept (no DTX__COMPILE_BORROW: rules,
 * validators) holds copies: changing the spec's operand values in place
 * after the compile changes nothing it answers.  With the flag it holds a
 * reference to each operand instead, and gives it back when freed. */
static void test_operands_copied_or_held(void) {
  json_t *spec = Q("{'n':{'$gte':5},'s':'abc','o':{'k':[1,2]},"
                   "'t':{'$in':['x',{'y':1}]},'all':{'$all':[7]}}");
  json_t *yes = Q("{'n':5,'s':'abc','o':{'k':[1,2]},'t':{'y':1},'all':[7]}");
  json_t *n = json_object_get(json_object_get(spec, "n"), "$gte");
  json_t *str = json_object_get(spec, "s"), *o = json_object_get(spec, "o");
  json_t *in = json_object_get(json_object_get(spec, "t"), "$in");
  json_t *all = json_array_get(json_object_get(json_object_get(spec, "all"),
                                               "$all"), 0);
  size_t before = n->refcount + str->refcount + o->refcount +
                  json_array_get(in, 1)->refcount + all->refcount;
  dtx__filter_t *f = NULL, *b = NULL;
  REQUIRE(dtx__filter_compile(spec, &f) == 0);
  CHECK(n->refcount + str->refcount + o->refcount +
            json_array_get(in, 1)->refcount + all->refcount ==
        before);
  REQUIRE(dtx__filter_compile_flags(spec, DTX__COMPILE_BORROW, &b) == 0);
  CHECK(n->refcount + str->refcount + o->refcount +
            json_array_get(in, 1)->refcount + all->refcount ==
        before + 5);
  CHECK(dtx__filter_match(b, yes) == 1);
  dtx__filter_free(b);
  CHECK(n->refcount + str->refcount + o->refcount +
            json_array_get(in, 1)->refcount + all->refcount ==
        before);

  json_integer_set(n, 100);
  json_string_set(str, "zzz");
  json_array_clear(json_object_get(o, "k"));
  json_object_clear(json_array_get(in, 1));
  json_string_set(json_array_get(in, 0), "w");
  json_integer_set(all, 8);
  CHECK(dtx__filter_match(f, yes) == 1);
  json_t *no = Q("{'n':100,'s':'zzz','o':{'k':[]},'t':{},'all':[8]}");
  CHECK(dtx__filter_match(f, no) == 0);
  dtx__filter_free(f);
  json_decref(spec);
  json_decref(yes);
  json_decref(no);
}

/* Many threads share one compiled filter. */
typedef struct tharg {
  const dtx__filter_t *f;
  json_t *yes, *no;
  int errors;
} tharg_t;

static void *match_thread(void *p) {
  tharg_t *a = p;
  for (int i = 0; i < 20000; i++) {
    if (dtx__filter_match(a->f, a->yes) != 1)
      a->errors++;
    if (dtx__filter_match(a->f, a->no) != 0)
      a->errors++;
  }
  return NULL;
}

static void test_threads(void) {
  json_t *spec = Q("{'changes':{'$elemMatch':{'account':'B','amount':{'$lt':"
                   "0}}},'state':{'$in':['a','b','c']},'x':{'$ne':1}}");
  dtx__filter_t *f = NULL;
  REQUIRE(dtx__filter_compile(spec, &f) == 0);
  json_decref(spec);
  tharg_t args[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    args[i].f = f;
    args[i].yes = Q("{'changes':[{'account':'B','amount':-1}],'state':'b'}");
    args[i].no = Q("{'changes':[{'account':'B','amount':1}],'state':'b'}");
    args[i].errors = 0;
    pthread_create(&th[i], NULL, match_thread, &args[i]);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].errors == 0);
    json_decref(args[i].yes);
    json_decref(args[i].no);
  }
  dtx__filter_free(f);
}

static void test_count(void) {
  size_t n = 0;
#define ADD(t) n += sizeof t / sizeof t[0]
  ADD(eq_cases), ADD(array_eq_cases), ADD(object_eq_cases), ADD(path_cases);
  ADD(index_cases), ADD(null_cases), ADD(ne_cases), ADD(cmp_cases);
  ADD(in_cases), ADD(exists_cases), ADD(size_cases), ADD(all_cases);
  ADD(elem_cases), ADD(not_cases), ADD(logic_cases), ADD(app_cases);
  ADD(bad_cases);
#undef ADD
  printf("     %zu filter table rows\n", n);
  CHECK(n >= 400);
}

int main(void) {
  TEST_RUN(test_tables);
  TEST_RUN(test_bad);
  TEST_RUN(test_depth);
  TEST_RUN(test_null_and_ownership);
  TEST_RUN(test_operands_copied_or_held);
  TEST_RUN(test_threads);
  TEST_RUN(test_count);
  return TEST_DONE();
}
