/* test_update.c -- table-driven tests of the update applier (update.c).
 *
 * Each apply case gives an update, an input document and either the exact
 * expected output (compared as compact JSON text, so types and field order
 * count) with the expected "changed" flag, or the expected error code and a
 * fragment of its detail.  Every case also checks that the input document
 * is unchanged afterwards.  JSON in the tables uses ' for " to stay
 * readable; JQNEW() converts it. */
#include "bdiff_update.h"
#include "doc/doc.h"
#include "testlib.h"

#include <pthread.h>
#include <string.h>

#define NOW 1700000000000LL

typedef struct acase {
  const char *update;
  const char *doc;
  const char *want; /* expected output; NULL when an error is expected */
  int changed;      /* expected flag, or the expected error code */
  int is_insert;
  const char *detail; /* substring of dtx_errdetail() on error, or NULL */
} acase_t;

#define OK(u, d, w, ch) {u, d, w, ch, 0, NULL}
#define OKI(u, d, w, ch) {u, d, w, ch, 1, NULL}
#define ERR(u, d, code, det) {u, d, NULL, code, 0, det}
#define ERRI(u, d, code, det) {u, d, NULL, code, 1, det}

static const acase_t apply_cases[] = {
    /* ---- $set ---- */
    OK("{'$set':{'a':1}}", "{}", "{'a':1}", 1),
    OK("{'$set':{'a':1}}", "{'a':1}", "{'a':1}", 0),
    OK("{'$set':{'a':1.0}}", "{'a':1}", "{'a':1.0}", 1),
    OK("{'$set':{'a':1}}", "{'a':1.0}", "{'a':1}", 1),
    OK("{'$set':{'a':2}}", "{'a':1,'b':2}", "{'a':2,'b':2}", 1),
    OK("{'$set':{'b':3}}", "{'a':1,'b':2,'c':3}", "{'a':1,'b':3,'c':3}", 1),
    OK("{'$set':{'z':1}}", "{'a':1}", "{'a':1,'z':1}", 1),
    OK("{'$set':{'a.b':1}}", "{}", "{'a':{'b':1}}", 1),
    OK("{'$set':{'a.b.c':1}}", "{'a':{}}", "{'a':{'b':{'c':1}}}", 1),
    OK("{'$set':{'a.b.c':1}}", "{'a':{'x':0}}", "{'a':{'x':0,'b':{'c':1}}}",
       1),
    OK("{'$set':{'a.b':2}}", "{'a':{'b':1,'c':1}}", "{'a':{'b':2,'c':1}}", 1),
    OK("{'$set':{'a.b':1}}", "{'a':{'b':1}}", "{'a':{'b':1}}", 0),
    ERR("{'$set':{'a.b':1}}", "{'a':5}", DTX_ETYPE, "'a.b'"),
    ERR("{'$set':{'a.b':1}}", "{'a':null}", DTX_ETYPE, "$set"),
    ERR("{'$set':{'a.b':1}}", "{'a':'x'}", DTX_ETYPE, "cannot create field"),
    ERR("{'$set':{'a.b.c':1}}", "{'a':{'b':true}}", DTX_ETYPE, "'a.b'"),
    ERR("{'$set':{'a.b':1}}", "{'a':[1,2]}", DTX_ETYPE, "array"),
    OK("{'$set':{'arr.1':9}}", "{'arr':[1,2,3]}", "{'arr':[1,9,3]}", 1),
    OK("{'$set':{'arr.0':1}}", "{'arr':[1,2,3]}", "{'arr':[1,2,3]}", 0),
    OK("{'$set':{'arr.3':4}}", "{'arr':[1,2,3]}", "{'arr':[1,2,3,4]}", 1),
    OK("{'$set':{'arr.5':9}}", "{'arr':[1]}",
       "{'arr':[1,null,null,null,null,9]}", 1),
    OK("{'$set':{'arr.1.x':9}}", "{'arr':[1,{}]}", "{'arr':[1,{'x':9}]}", 1),
    OK("{'$set':{'arr.1.x':9}}", "{'arr':[1,{'x':8,'y':0}]}",
       "{'arr':[1,{'x':9,'y':0}]}", 1),
    OK("{'$set':{'arr.2.x':9}}", "{'arr':[]}", "{'arr':[null,null,{'x':9}]}",
       1),
    OK("{'$set':{'arr.0.0':7}}", "{'arr':[[1,2]]}", "{'arr':[[7,2]]}", 1),
    ERR("{'$set':{'arr.x':9}}", "{'arr':[1]}", DTX_ETYPE, "'x'"),
    ERR("{'$set':{'arr.0.x':1}}", "{'arr':[5]}", DTX_ETYPE, "arr.0"),
    ERR("{'$set':{'arr.0.x':1}}", "{'arr':[null]}", DTX_ETYPE, "null"),
    ERR("{'$set':{'arr.9999999':1}}", "{'arr':[]}", DTX_EINVAL, "pad"),
    OK("{'$set':{'a.0':1}}", "{'a':{}}", "{'a':{'0':1}}", 1),
    OK("{'$set':{'a.0':1}}", "{}", "{'a':{'0':1}}", 1),
    OK("{'$set':{'a.0.b':1}}", "{}", "{'a':{'0':{'b':1}}}", 1),
    OK("{'$set':{'a':{'b':[1,2]}}}", "{'a':1}", "{'a':{'b':[1,2]}}", 1),
    OK("{'$set':{'b':1,'a':2}}", "{}", "{'a':2,'b':1}", 1),
    OK("{'$set':{'c':1},'$inc':{'b':1},'$push':{'a':1}}", "{}",
       "{'a':[1],'b':1,'c':1}", 1),
    OK("{'$set':{'a.10':1,'a.2':2}}", "{'a':{}}", "{'a':{'2':2,'10':1}}", 1),
    OK("{'$set':{'a.10':1,'a.9':2}}", "{'a':[]}",
       "{'a':[null,null,null,null,null,null,null,null,null,2,1]}", 1),
    OK("{'$set':{'a.b':1,'a.c':2}}", "{}", "{'a':{'b':1,'c':2}}", 1),
    OK("{'$set':{'a':null}}", "{}", "{'a':null}", 1),
    OK("{'$set':{'a':null}}", "{'a':null}", "{'a':null}", 0),
    OK("{'$set':{'a.b':{}}}", "{'a':{'b':{}}}", "{'a':{'b':{}}}", 0),
    OK("{'$set':{'a':{'x':1,'y':2}}}", "{'a':{'y':2,'x':1}}",
       "{'a':{'x':1,'y':2}}", 1),
    OK("{'$set':{'a':true}}", "{'a':false}", "{'a':true}", 1),
    OK("{'$set':{'a':'x'}}", "{'a':'x'}", "{'a':'x'}", 0),
    OK("{'$set':{'a':'x'}}", "{'a':'xy'}", "{'a':'x'}", 1),
    OK("{'$set':{'a':[1,2]}}", "{'a':[1,2]}", "{'a':[1,2]}", 0),
    OK("{'$set':{'a':[1,2]}}", "{'a':[2,1]}", "{'a':[1,2]}", 1),
    OK("{'$set':{'a':-0.0}}", "{'a':0.0}", "{'a':-0.0}", 1),
    OK("{'$set':{'x.y':1,'a':1}}", "{'_id':1}",
       "{'_id':1,'a':1,'x':{'y':1}}", 1),
    /* _id through $set: allowed when it stays identical */
    OK("{'$set':{'_id':1}}", "{'_id':1,'a':1}", "{'_id':1,'a':1}", 0),
    OK("{'$set':{'_id':1,'a':2}}", "{'_id':1,'a':1}", "{'_id':1,'a':2}", 1),
    ERR("{'$set':{'_id':2}}", "{'_id':1}", DTX_EIMMUTABLE, "_id"),
    ERR("{'$set':{'_id':1.0}}", "{'_id':1}", DTX_EIMMUTABLE, "$set"),
    ERR("{'$set':{'_id':'1'}}", "{'_id':1}", DTX_EIMMUTABLE, "immutable"),
    OK("{'$set':{'_id':'x'}}", "{'a':1}", "{'a':1,'_id':'x'}", 1),
    ERR("{'$set':{'_id.x':1}}", "{'_id':1}", DTX_ETYPE, "_id.x"),
    ERR("{'$set':{'_id.x':1}}", "{'_id':{'x':2}}", DTX_EIMMUTABLE, "_id.x"),
    OK("{'$set':{'_id.x':2}}", "{'_id':{'x':2}}", "{'_id':{'x':2}}", 0),
    OK("{'$set':{'_idx':2}}", "{'_id':1}", "{'_id':1,'_idx':2}", 1),

    /* ---- $unset ---- */
    OK("{'$unset':{'a':''}}", "{'a':1,'b':2}", "{'b':2}", 1),
    OK("{'$unset':{'a':1}}", "{'b':2}", "{'b':2}", 0),
    OK("{'$unset':{'a':true,'b':1}}", "{'a':1,'b':2,'c':3}", "{'c':3}", 1),
    OK("{'$unset':{'a.b':1}}", "{'a':{'b':1,'c':2}}", "{'a':{'c':2}}", 1),
    OK("{'$unset':{'a.b':1}}", "{'a':{'b':1}}", "{'a':{}}", 1),
    OK("{'$unset':{'a.b':1}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$unset':{'a.b':1}}", "{'a':null}", "{'a':null}", 0),
    OK("{'$unset':{'a.b':1}}", "{'a':[{'b':1}]}", "{'a':[{'b':1}]}", 0),
    OK("{'$unset':{'a.0':1}}", "{'a':[1,2]}", "{'a':[null,2]}", 1),
    OK("{'$unset':{'a.1':1}}", "{'a':[1,2]}", "{'a':[1,null]}", 1),
    OK("{'$unset':{'a.5':1}}", "{'a':[1,2]}", "{'a':[1,2]}", 0),
    OK("{'$unset':{'a.0.b':1}}", "{'a':[{'b':1,'c':1}]}", "{'a':[{'c':1}]}",
       1),
    OK("{'$unset':{'a.3.b':1}}", "{'a':[{'b':1}]}", "{'a':[{'b':1}]}", 0),
    OK("{'$unset':{'a.b.c':1}}", "{}", "{}", 0),
    OK("{'$unset':{'a.0':1}}", "{'a':{'0':1,'1':2}}", "{'a':{'1':2}}", 1),
    OK("{'$unset':{'a':1}}", "{'_id':3,'a':1}", "{'_id':3}", 1),

    /* ---- $inc ---- */
    OK("{'$inc':{'a':1}}", "{'a':1}", "{'a':2}", 1),
    OK("{'$inc':{'a':-5}}", "{'a':1}", "{'a':-4}", 1),
    OK("{'$inc':{'a':1}}", "{}", "{'a':1}", 1),
    OK("{'$inc':{'a':1.5}}", "{}", "{'a':1.5}", 1),
    OK("{'$inc':{'a':1.5}}", "{'a':1}", "{'a':2.5}", 1),
    OK("{'$inc':{'a':1}}", "{'a':1.5}", "{'a':2.5}", 1),
    OK("{'$inc':{'a':0.5}}", "{'a':1.5}", "{'a':2.0}", 1),
    OK("{'$inc':{'a':0}}", "{'a':1}", "{'a':1}", 0),
    OK("{'$inc':{'a':0}}", "{'a':1.5}", "{'a':1.5}", 0),
    OK("{'$inc':{'a':0.0}}", "{'a':1}", "{'a':1.0}", 1),
    OK("{'$inc':{'a':1}}", "{'a':9223372036854775806}",
       "{'a':9223372036854775807}", 1),
    ERR("{'$inc':{'a':1}}", "{'a':9223372036854775807}", DTX_EOVERFLOW,
        "'a'"),
    ERR("{'$inc':{'a':9223372036854775807}}", "{'a':1}", DTX_EOVERFLOW,
        "$inc"),
    ERR("{'$inc':{'a':-1}}", "{'a':-9223372036854775808}", DTX_EOVERFLOW,
        "int64"),
    ERR("{'$inc':{'a':-9223372036854775808}}", "{'a':-1}", DTX_EOVERFLOW,
        "$inc"),
    OK("{'$inc':{'a':-9223372036854775808}}", "{'a':0}",
       "{'a':-9223372036854775808}", 1),
    OK("{'$inc':{'a':9223372036854775807}}", "{'a':-1}",
       "{'a':9223372036854775806}", 1),
    ERR("{'$inc':{'a':1e308}}", "{'a':1e308}", DTX_EOVERFLOW, "finite"),
    ERR("{'$inc':{'a':1}}", "{'a':'x'}", DTX_ETYPE, "'a'"),
    ERR("{'$inc':{'a':1}}", "{'a':'x'}", DTX_ETYPE, "string"),
    ERR("{'$inc':{'a':1}}", "{'a':null}", DTX_ETYPE, "null"),
    ERR("{'$inc':{'a':1}}", "{'a':[1]}", DTX_ETYPE, "$inc"),
    ERR("{'$inc':{'a':1}}", "{'a':{}}", DTX_ETYPE, "object"),
    ERR("{'$inc':{'a':1}}", "{'a':true}", DTX_ETYPE, "boolean"),
    ERR("{'$inc':{'a.b.c':1}}", "{'a':{'b':'s'}}", DTX_ETYPE, "a.b.c"),
    OK("{'$inc':{'a.b':1}}", "{'a':{'b':1}}", "{'a':{'b':2}}", 1),
    OK("{'$inc':{'a.b':1}}", "{}", "{'a':{'b':1}}", 1),
    OK("{'$inc':{'a.1':1}}", "{'a':[1,2]}", "{'a':[1,3]}", 1),
    OK("{'$inc':{'a.3':1}}", "{'a':[1]}", "{'a':[1,null,null,1]}", 1),
    OK("{'$inc':{'a.0.n':5}}", "{'a':[{'n':1}]}", "{'a':[{'n':6}]}", 1),
    ERR("{'$inc':{'a.b':1}}", "{'a':1}", DTX_ETYPE, "$inc"),
    ERR("{'$inc':{'a.x':1}}", "{'a':[1]}", DTX_ETYPE, "array"),
    /* all or nothing: the first op succeeds on the copy, the second fails */
    ERR("{'$inc':{'a':1,'b':1}}", "{'a':1,'b':'x'}", DTX_ETYPE, "'b'"),
    ERR("{'$set':{'a':5},'$inc':{'b':1}}", "{'a':1,'b':[]}", DTX_ETYPE,
        "'b'"),
    OK("{'$inc':{'a':1,'b':-1}}", "{'a':1,'b':1}", "{'a':2,'b':0}", 1),
    OK("{'$inc':{'balance':-300}}", "{'_id':'acct1','balance':1000}",
       "{'_id':'acct1','balance':700}", 1),

    /* ---- $min / $max ---- */
    OK("{'$min':{'a':1}}", "{'a':5}", "{'a':1}", 1),
    OK("{'$min':{'a':9}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$min':{'a':5}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$min':{'a':5.0}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$min':{'a':1}}", "{}", "{'a':1}", 1),
    OK("{'$min':{'a':1.5}}", "{'a':2}", "{'a':1.5}", 1),
    OK("{'$min':{'a':null}}", "{'a':5}", "{'a':null}", 1),
    OK("{'$min':{'a':'x'}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$min':{'a':5}}", "{'a':'x'}", "{'a':5}", 1),
    OK("{'$min':{'a':'abc'}}", "{'a':'abd'}", "{'a':'abc'}", 1),
    OK("{'$min':{'a.b':1}}", "{'a':{'b':3}}", "{'a':{'b':1}}", 1),
    OK("{'$min':{'a.1':0}}", "{'a':[5,6]}", "{'a':[5,0]}", 1),
    OK("{'$max':{'a':9}}", "{'a':5}", "{'a':9}", 1),
    OK("{'$max':{'a':1}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$max':{'a':1}}", "{}", "{'a':1}", 1),
    OK("{'$max':{'a':'x'}}", "{'a':5}", "{'a':'x'}", 1),
    OK("{'$max':{'a':true}}", "{'a':'x'}", "{'a':true}", 1),
    OK("{'$max':{'a':[1]}}", "{'a':{}}", "{'a':[1]}", 1),
    OK("{'$max':{'a':{}}}", "{'a':[1]}", "{'a':[1]}", 0),
    OK("{'$max':{'a':9223372036854775807}}", "{'a':9.2e18}",
       "{'a':9223372036854775807}", 1),
    OK("{'$max':{'a.b':3}}", "{'a':{'b':1}}", "{'a':{'b':3}}", 1),
    OK("{'$max':{'a':5},'$min':{'b':5}}", "{'a':1,'b':9}", "{'a':5,'b':5}", 1),
    ERR("{'$min':{'a.b':1}}", "{'a':5}", DTX_ETYPE, "$min"),
    ERR("{'$max':{'a.b':1}}", "{'a':'s'}", DTX_ETYPE, "$max"),

    /* ---- $push ---- */
    OK("{'$push':{'a':1}}", "{'a':[0]}", "{'a':[0,1]}", 1),
    OK("{'$push':{'a':1}}", "{}", "{'a':[1]}", 1),
    OK("{'$push':{'a':1}}", "{'a':[1]}", "{'a':[1,1]}", 1),
    OK("{'$push':{'a':[1,2]}}", "{'a':[]}", "{'a':[[1,2]]}", 1),
    OK("{'$push':{'a':{'x':1}}}", "{'a':[]}", "{'a':[{'x':1}]}", 1),
    OK("{'$push':{'a':null}}", "{'a':[]}", "{'a':[null]}", 1),
    OK("{'$push':{'a':{'$each':[1,2]}}}", "{'a':[0]}", "{'a':[0,1,2]}", 1),
    OK("{'$push':{'a':{'$each':[[1],{'b':2}]}}}", "{}",
       "{'a':[[1],{'b':2}]}", 1),
    OK("{'$push':{'a':{'$each':[]}}}", "{'a':[0]}", "{'a':[0]}", 0),
    OK("{'$push':{'a':{'$each':[]}}}", "{}", "{'a':[]}", 1),
    OK("{'$push':{'a.b':1}}", "{'a':{'b':[]}}", "{'a':{'b':[1]}}", 1),
    OK("{'$push':{'a.b':1}}", "{'a':{}}", "{'a':{'b':[1]}}", 1),
    OK("{'$push':{'a.1':3}}", "{'a':[[1],[2]]}", "{'a':[[1],[2,3]]}", 1),
    OK("{'$push':{'a.2':3}}", "{'a':[[1]]}", "{'a':[[1],null,[3]]}", 1),
    OK("{'$push':{'a.0.l':3}}", "{'a':[{'l':[]}]}", "{'a':[{'l':[3]}]}", 1),
    OK("{'$push':{'pending':'t1'}}", "{'_id':'A','pending':[]}",
       "{'_id':'A','pending':['t1']}", 1),
    ERR("{'$push':{'a':1}}", "{'a':5}", DTX_ETYPE, "'a'"),
    ERR("{'$push':{'a':1}}", "{'a':{}}", DTX_ETYPE, "$push"),
    ERR("{'$push':{'a':1}}", "{'a':null}", DTX_ETYPE, "non-array"),
    ERR("{'$push':{'a':1}}", "{'a':'s'}", DTX_ETYPE, "string"),
    ERR("{'$push':{'a.b':1}}", "{'a':3}", DTX_ETYPE, "$push"),

    /* ---- $addToSet ---- */
    OK("{'$addToSet':{'a':1}}", "{'a':[1,2]}", "{'a':[1,2]}", 0),
    OK("{'$addToSet':{'a':3}}", "{'a':[1,2]}", "{'a':[1,2,3]}", 1),
    OK("{'$addToSet':{'a':1.0}}", "{'a':[1]}", "{'a':[1]}", 0),
    OK("{'$addToSet':{'a':1}}", "{}", "{'a':[1]}", 1),
    OK("{'$addToSet':{'a':{'$each':[1,3,3,4]}}}", "{'a':[1,2]}",
       "{'a':[1,2,3,4]}", 1),
    OK("{'$addToSet':{'a':{'$each':[3,3]}}}", "{}", "{'a':[3]}", 1),
    OK("{'$addToSet':{'a':{'$each':[2,1]}}}", "{'a':[1,2]}", "{'a':[1,2]}",
       0),
    OK("{'$addToSet':{'a':{'$each':[]}}}", "{'a':[1]}", "{'a':[1]}", 0),
    OK("{'$addToSet':{'a':{'$each':[]}}}", "{}", "{'a':[]}", 1),
    OK("{'$addToSet':{'a':{'x':1}}}", "{'a':[{'x':1}]}", "{'a':[{'x':1}]}",
       0),
    OK("{'$addToSet':{'a':{'x':1,'y':2}}}", "{'a':[{'y':2,'x':1}]}",
       "{'a':[{'y':2,'x':1},{'x':1,'y':2}]}", 1),
    OK("{'$addToSet':{'a':[1]}}", "{'a':[[1]]}", "{'a':[[1]]}", 0),
    OK("{'$addToSet':{'a':[1]}}", "{'a':[1]}", "{'a':[1,[1]]}", 1),
    OK("{'$addToSet':{'a':null}}", "{'a':[null]}", "{'a':[null]}", 0),
    OK("{'$addToSet':{'a':'x'}}", "{'a':['y']}", "{'a':['y','x']}", 1),
    OK("{'$addToSet':{'a.b':'x'}}", "{'a':{'b':['x']}}", "{'a':{'b':['x']}}",
       0),
    OK("{'$addToSet':{'a.0':5}}", "{'a':[[5]]}", "{'a':[[5]]}", 0),
    ERR("{'$addToSet':{'a':1}}", "{'a':1}", DTX_ETYPE, "$addToSet"),
    ERR("{'$addToSet':{'a':1}}", "{'a':{'0':1}}", DTX_ETYPE, "'a'"),

    /* ---- $pull ---- */
    OK("{'$pull':{'a':1}}", "{'a':[1,2,1]}", "{'a':[2]}", 1),
    OK("{'$pull':{'a':1}}", "{'a':[2]}", "{'a':[2]}", 0),
    OK("{'$pull':{'a':1}}", "{'a':[]}", "{'a':[]}", 0),
    OK("{'$pull':{'a':1}}", "{}", "{}", 0),
    OK("{'$pull':{'a':1.0}}", "{'a':[1,2]}", "{'a':[2]}", 1),
    OK("{'$pull':{'a':'x'}}", "{'a':['x','y','x']}", "{'a':['y']}", 1),
    OK("{'$pull':{'a':null}}", "{'a':[null,1]}", "{'a':[1]}", 1),
    OK("{'$pull':{'a':[1,2]}}", "{'a':[[1,2],[2,1],1]}", "{'a':[[2,1],1]}",
       1),
    OK("{'$pull':{'a':1}}", "{'a':[1,1,1]}", "{'a':[]}", 1),
    ERR("{'$pull':{'a':1}}", "{'a':5}", DTX_ETYPE, "$pull"),
    ERR("{'$pull':{'a':1}}", "{'a':{'b':1}}", DTX_ETYPE, "non-array"),
    OK("{'$pull':{'a.b':1}}", "{'a':5}", "{'a':5}", 0),
    OK("{'$pull':{'a.b':1}}", "{'a':{'b':[1,2]}}", "{'a':{'b':[2]}}", 1),
    OK("{'$pull':{'a.x':1}}", "{'a':[1]}", "{'a':[1]}", 0),
    OK("{'$pull':{'a.0':1}}", "{'a':[[1,2]]}", "{'a':[[2]]}", 1),
    OK("{'$pull':{'a':{'$gte':6}}}", "{'a':[1,6,7,3]}", "{'a':[1,3]}", 1),
    OK("{'$pull':{'a':{'$gte':6}}}", "{'a':[1,3]}", "{'a':[1,3]}", 0),
    OK("{'$pull':{'a':{'$gt':'m'}}}", "{'a':['a','z',5]}", "{'a':['a',5]}",
       1),
    OK("{'$pull':{'a':{'$in':[1,3]}}}", "{'a':[1,2,3]}", "{'a':[2]}", 1),
    OK("{'$pull':{'a':{'$lt':5}}}", "{'a':[{'x':1},4,9]}",
       "{'a':[{'x':1},9]}", 1),
    OK("{'$pull':{'a':{'score':{'$lt':5}}}}",
       "{'a':[{'score':3},{'score':7},5]}", "{'a':[{'score':7},5]}", 1),
    OK("{'$pull':{'a':{'x':1}}}", "{'a':[{'x':1,'y':2},{'x':2}]}",
       "{'a':[{'x':2}]}", 1),
    OK("{'$pull':{'a':{'x':1,'y':2}}}",
       "{'a':[{'y':2,'x':1},{'x':1},{'x':1,'y':2,'z':3}]}", "{'a':[{'x':1}]}",
       1),
    OK("{'$pull':{'a':{'x':1}}}", "{'a':[1,'x',[1]]}", "{'a':[1,'x',[1]]}",
       0),
    OK("{'$pull':{'a':{}}}", "{'a':[{'x':1},1,{}]}", "{'a':[1]}", 1),
    OK("{'$pull':{'a':{'$or':[{'x':1},{'y':1}]}}}",
       "{'a':[{'x':1},{'y':1},{'z':1}]}", "{'a':[{'z':1}]}", 1),
    OK("{'$pull':{'results':{'item':'B','score':8}}}",
       "{'results':[{'item':'A','score':5},{'item':'B','score':8,'c':1}]}",
       "{'results':[{'item':'A','score':5}]}", 1),
    OK("{'$pull':{'pending':'t1'}}", "{'_id':'A','pending':['t1','t2']}",
       "{'_id':'A','pending':['t2']}", 1),

    /* ---- $currentDate (now = NOW) ---- */
    OK("{'$currentDate':{'a':true}}", "{}", "{'a':1700000000000}", 1),
    OK("{'$currentDate':{'a':false}}", "{}", "{'a':1700000000000}", 1),
    OK("{'$currentDate':{'a':{'$type':'date'}}}", "{'a':1}",
       "{'a':1700000000000}", 1),
    OK("{'$currentDate':{'a':true}}", "{'a':1700000000000}",
       "{'a':1700000000000}", 0),
    OK("{'$currentDate':{'a.b':true}}", "{}", "{'a':{'b':1700000000000}}",
       1),
    OK("{'$currentDate':{'t':true},'$set':{'s':1}}", "{'_id':1}",
       "{'_id':1,'s':1,'t':1700000000000}", 1),
    ERR("{'$currentDate':{'a.b':true}}", "{'a':[]}", DTX_ETYPE,
        "$currentDate"),

    /* ---- $setOnInsert ---- */
    OK("{'$setOnInsert':{'a':1}}", "{}", "{}", 0),
    OKI("{'$setOnInsert':{'a':1}}", "{}", "{'a':1}", 1),
    OK("{'$set':{'b':1},'$setOnInsert':{'a':1}}", "{}", "{'b':1}", 1),
    OKI("{'$set':{'b':1},'$setOnInsert':{'a':1}}", "{}", "{'a':1,'b':1}", 1),
    OKI("{'$setOnInsert':{'a.b':1}}", "{'x':1}", "{'x':1,'a':{'b':1}}", 1),
    OKI("{'$setOnInsert':{'_id':5}}", "{}", "{'_id':5}", 1),
    OKI("{'$setOnInsert':{'_id':5}}", "{'_id':5}", "{'_id':5}", 0),
    ERRI("{'$setOnInsert':{'_id':5}}", "{'_id':4}", DTX_EIMMUTABLE,
         "$setOnInsert"),
    OK("{'$setOnInsert':{'_id':5}}", "{'_id':4}", "{'_id':4}", 0),
    ERRI("{'$setOnInsert':{'a.b':1}}", "{'a':1}", DTX_ETYPE, "$setOnInsert"),
    OK("{'$setOnInsert':{'a.b':1}}", "{'a':1}", "{'a':1}", 0),
    /* is_insert does not change other operators */
    OKI("{'$inc':{'n':1}}", "{'_id':1}", "{'_id':1,'n':1}", 1),
    OKI("{'$set':{'_id':9}}", "{'a':1}", "{'a':1,'_id':9}", 1),

    /* ---- replacement ---- */
    OK("{'a':1}", "{'_id':1,'b':2}", "{'_id':1,'a':1}", 1),
    OK("{}", "{'_id':1,'b':2}", "{'_id':1}", 1),
    OK("{}", "{}", "{}", 0),
    OK("{}", "{'_id':1}", "{'_id':1}", 0),
    OK("{'_id':1,'a':1}", "{'_id':1}", "{'_id':1,'a':1}", 1),
    OK("{'a':1,'_id':1}", "{'_id':1,'a':1}", "{'_id':1,'a':1}", 0),
    OK("{'a':1}", "{'a':1}", "{'a':1}", 0),
    OK("{'a':1}", "{'_id':1,'a':1}", "{'_id':1,'a':1}", 0),
    OK("{'a':1,'b':2}", "{'_id':1,'b':2,'a':1}", "{'_id':1,'a':1,'b':2}", 1),
    OK("{'a':{'$x':1}}", "{'_id':1}", "{'_id':1,'a':{'$x':1}}", 1),
    OK("{'_id':7,'a':1}", "{}", "{'_id':7,'a':1}", 1),
    OK("{'a':[1,{'b':2}]}", "{'_id':'k','z':0}", "{'_id':'k','a':[1,{'b':2}]}",
       1),
    OKI("{'a':1}", "{'_id':3,'q':1}", "{'_id':3,'a':1}", 1),
    ERR("{'_id':2,'a':1}", "{'_id':1}", DTX_EIMMUTABLE, "_id"),
    ERR("{'_id':1.0}", "{'_id':1}", DTX_EIMMUTABLE, "replacement"),
    ERR("{'_id':'1'}", "{'_id':1}", DTX_EIMMUTABLE, "immutable"),
};

/* flags: 0, or DTX__COMPILE_BORROW as the store API compiles; either way
 * the spec is released before the apply. */
static void run_apply_case(size_t i, const acase_t *c, unsigned flags) {
  json_t *spec = JQNEW(c->update), *doc = JQNEW(c->doc), *out = (json_t *)1;
  char *before = JDUMP(doc), *after;
  dtx__update_t *u = NULL;
  int changed = -1, rc;

  rc = dtx__update_compile_flags(spec, NULL, flags, &u);
  CHECKF(rc == 0, "case %zu %s (flags %u): compile %s (%s)", i, c->update,
         flags, dtx_errname(rc), dtx_errdetail());
  if (rc) {
    json_decref(spec);
    json_decref(doc);
    free(before);
    return;
  }
  rc = dtx__update_apply(u, doc, c->is_insert, NOW, &out, &changed);
  if (flags == 0) { /* the BSON engine's leg, once per row */
    char *detail = strdup(rc ? dtx_errdetail() : "");
    dtx_t_bupd_row_t r = {"apply_cases", i, spec, NULL, doc, c->is_insert,
                          NOW, NULL, rc, out, changed, detail};
    dtx_t_bupdate_leg(&r);
    free(detail);
    if (rc)
      dtx__update_apply(u, doc, c->is_insert, NOW, &out, &changed);
  }
  json_decref(spec); /* the compiled update must not need it */
  if (c->want) {
    json_t *want = JQNEW(c->want);
    char *w = JDUMP(want), *got = out ? JDUMP(out) : NULL;
    CHECKF(rc == 0, "case %zu %s on %s: %s (%s)", i, c->update, c->doc,
           dtx_errname(rc), dtx_errdetail());
    CHECKF(got && !strcmp(got, w), "case %zu %s on %s: got %s want %s", i,
           c->update, c->doc, got ? got : "NULL", w);
    CHECKF(changed == c->changed, "case %zu %s on %s: changed %d want %d", i,
           c->update, c->doc, changed, c->changed);
    free(w);
    free(got);
    json_decref(want);
  } else {
    CHECKF(rc == c->changed, "case %zu %s on %s: rc %s want %s (%s)", i,
           c->update, c->doc, dtx_errname(rc), dtx_errname(c->changed),
           dtx_errdetail());
    CHECKF(out == NULL, "case %zu: out not NULL on error", i);
    CHECKF(changed == 0, "case %zu: changed %d on error", i, changed);
    if (c->detail)
      CHECKF(strstr(dtx_errdetail(), c->detail) != NULL,
             "case %zu %s: detail '%s' lacks '%s'", i, c->update,
             dtx_errdetail(), c->detail);
  }
  after = JDUMP(doc);
  CHECKF(!strcmp(before, after), "case %zu %s: input changed %s -> %s", i,
         c->update, before, after);
  free(before);
  free(after);
  json_decref(out);
  json_decref(doc);
  dtx__update_free(u);
}

static void test_apply_table(void) {
  size_t i;
  for (i = 0; i < sizeof apply_cases / sizeof apply_cases[0]; i++) {
    run_apply_case(i, &apply_cases[i], 0);
    run_apply_case(i, &apply_cases[i], DTX__COMPILE_BORROW);
  }
}

/* ---- compile-time errors ------------------------------------------------ */

typedef struct ccase {
  const char *update;
  int rc;
  const char *detail; /* substring, or NULL */
} ccase_t;

static const ccase_t compile_cases[] = {
    {"5", DTX_EBADUPDATE, "object"},
    {"[]", DTX_EBADUPDATE, "object"},
    {"'$set'", DTX_EBADUPDATE, "object"},
    {"null", DTX_EBADUPDATE, "object"},
    {"{'$set':{}}", DTX_EBADUPDATE, "$set: empty"},
    {"{'$inc':{}}", DTX_EBADUPDATE, "$inc: empty"},
    {"{'$set':{'a':1},'$unset':{}}", DTX_EBADUPDATE, "$unset"},
    {"{'$set':5}", DTX_EBADUPDATE, "$set"},
    {"{'$set':[{'a':1}]}", DTX_EBADUPDATE, "$set"},
    {"{'$set':null}", DTX_EBADUPDATE, "$set"},
    {"{'$foo':{'a':1}}", DTX_EBADUPDATE, "unknown operator $foo"},
    {"{'$set':{'a':1},'$bar':{'a':1}}", DTX_EBADUPDATE, "$bar"},
    {"{'$rename':{'a':'b'}}", 0, NULL},
    {"{'$mul':{'a':2}}", 0, NULL},
    {"{'$pop':{'a':1}}", 0, NULL},
    {"{'$pullAll':{'a':[1]}}", 0, NULL},
    {"{'$bit':{'a':{'and':1}}}", 0, NULL},
    {"{'$each':{'a':[1]}}", DTX_EBADUPDATE, "unknown operator $each"},
    {"{'$SET':{'a':1}}", DTX_EBADUPDATE, "unknown operator $SET"},
    {"{'a':1,'$set':{'b':1}}", DTX_EBADUPDATE, "mixes"},
    {"{'$set':{'b':1},'a':1}", DTX_EBADUPDATE, "mixes"},
    {"{'a.b':1}", 0, NULL}, /* MongoDB 5.0: a dotted top-level name */
    {"{'':1}", DTX_EBADUPDATE, "empty"},
    /* paths */
    {"{'$set':{'':1}}", DTX_EBADUPDATE, "$set"},
    {"{'$set':{'a..b':1}}", DTX_EBADUPDATE, "$set"},
    {"{'$set':{'a.':1}}", DTX_EBADUPDATE, "$set"},
    {"{'$set':{'.a':1}}", DTX_EBADUPDATE, "$set"},
    {"{'$set':{'a.$':1}}", 0, NULL},
    {"{'$set':{'a.$[]':1}}", 0, NULL},
    {"{'$set':{'$':1}}", DTX_EBADUPDATE, "cannot start with a positional"},
    {"{'$set':{'a.$x':1}}", DTX_EBADUPDATE, "not a positional operator"},
    {"{'$set':{'$a':1}}", DTX_EBADUPDATE, "$set"},
    {"{'$inc':{'a..b':1}}", DTX_EBADUPDATE, "$inc"},
    /* arguments */
    {"{'$inc':{'a':'1'}}", DTX_EBADUPDATE, "$inc"},
    {"{'$inc':{'a':null}}", DTX_EBADUPDATE, "'a'"},
    {"{'$inc':{'a':true}}", DTX_EBADUPDATE, "number"},
    {"{'$inc':{'a':[1]}}", DTX_EBADUPDATE, "number"},
    {"{'$inc':{'a':{'$numberLong':'1'}}}", DTX_EBADUPDATE, "number"},
    {"{'$inc':{'a':1,'b':'x'}}", DTX_EBADUPDATE, "'b'"},
    {"{'$push':{'a':{'$each':1}}}", DTX_EBADUPDATE, "$each"},
    {"{'$push':{'a':{'$each':{'x':1}}}}", DTX_EBADUPDATE, "array"},
    {"{'$push':{'a':{'$each':[1],'$slice':2}}}", 0, NULL},
    {"{'$push':{'a':{'$each':[1],'$sort':1}}}", 0, NULL},
    {"{'$push':{'a':{'$each':[1],'$position':0}}}", 0, NULL},
    /* MongoDB 5.0: without $each it is a value, '$' names and all */
    {"{'$push':{'a':{'$slice':1}}}", 0, NULL},
    {"{'$push':{'a':{'$foo':1}}}", 0, NULL},
    {"{'$push':{'a':{'$each':[1],'$foo':1}}}", DTX_EBADUPDATE, "$foo"},
    {"{'$push':{'a':{'$each':[1],'x':1}}}", DTX_EBADUPDATE, "'x'"},
    {"{'$addToSet':{'a':{'$each':5}}}", DTX_EBADUPDATE, "$addToSet"},
    {"{'$addToSet':{'a':{'$each':[1],'$slice':1}}}", DTX_EBADUPDATE,
     "unrecognized clause '$slice'"},
    {"{'$addToSet':{'a':{'$bogus':1}}}", 0, NULL},
    {"{'$addToSet':{'a':{'$each':[1],'$bogus':1}}}", DTX_EBADUPDATE,
     "$bogus"},
    {"{'$pull':{'a':{'$bogus':1}}}", DTX_EBADUPDATE, "$pull"},
    {"{'$pull':{'a':{'$gte':1,'x':1}}}", DTX_EBADUPDATE, "$pull"},
    {"{'$currentDate':{'a':1}}", DTX_EBADUPDATE, "$currentDate"},
    {"{'$currentDate':{'a':'date'}}", DTX_EBADUPDATE, "'a'"},
    {"{'$currentDate':{'a':{'$type':'x'}}}", DTX_EBADUPDATE, "$type"},
    {"{'$currentDate':{'a':{'$type':'date','x':1}}}", DTX_EBADUPDATE,
     "$currentDate"},
    {"{'$currentDate':{'a':{}}}", DTX_EBADUPDATE, "$currentDate"},
    {"{'$currentDate':{'a':null}}", DTX_EBADUPDATE, "$currentDate"},
    /* _id: only $set/$setOnInsert may name it */
    {"{'$unset':{'_id':1}}", DTX_EBADUPDATE, "_id is immutable"},
    {"{'$inc':{'_id':1}}", DTX_EBADUPDATE, "$inc: _id is immutable"},
    {"{'$push':{'_id':1}}", DTX_EBADUPDATE, "immutable"},
    {"{'$addToSet':{'_id':1}}", DTX_EBADUPDATE, "immutable"},
    {"{'$pull':{'_id':1}}", DTX_EBADUPDATE, "immutable"},
    {"{'$min':{'_id':1}}", DTX_EBADUPDATE, "immutable"},
    {"{'$max':{'_id':1}}", DTX_EBADUPDATE, "immutable"},
    {"{'$currentDate':{'_id':true}}", DTX_EBADUPDATE, "immutable"},
    {"{'$inc':{'_id.x':1}}", DTX_EBADUPDATE, "'_id.x'"},
    {"{'$unset':{'_id.x':1}}", DTX_EBADUPDATE, "immutable"},
    {"{'$set':{'_id':1}}", 0, NULL},
    {"{'$set':{'_id.x':1}}", 0, NULL},
    {"{'$setOnInsert':{'_id':1}}", 0, NULL},
    {"{'$inc':{'_idx':1}}", 0, NULL},
    {"{'$unset':{'x._id':1}}", 0, NULL},
    /* accepted shapes */
    {"{}", 0, NULL},
    {"{'a':1}", 0, NULL},
    {"{'$push':{'a':{'$each':[]}}}", 0, NULL},
    {"{'$push':{'a':{'x':{'$y':1}}}}", 0, NULL},
    {"{'$currentDate':{'a':{'$type':'timestamp'}}}", 0, NULL},
    {"{'$pull':{'a':{'$in':[1,2]}}}", 0, NULL},
    {"{'$pull':{'a':{'b':{'$gt':1}}}}", 0, NULL},
    {"{'$unset':{'a':null}}", 0, NULL},
    {"{'$inc':{'a':-1.5}}", 0, NULL},
};

/* Conflicting-path table: two or more operators; rc is 0 or BADUPDATE. */
static const ccase_t conflict_cases[] = {
    {"{'$set':{'a':1},'$inc':{'a.b':1}}", DTX_EBADUPDATE, "'a.b'"},
    {"{'$set':{'a':1},'$inc':{'a':1}}", DTX_EBADUPDATE, "conflicting"},
    {"{'$set':{'a.b':1},'$unset':{'a.b':1}}", DTX_EBADUPDATE, "$unset"},
    {"{'$set':{'a.b.c':1},'$push':{'a.b':1}}", DTX_EBADUPDATE, "$push"},
    {"{'$setOnInsert':{'a':1},'$set':{'a':2}}", DTX_EBADUPDATE,
     "$setOnInsert"},
    {"{'$set':{'a':1,'a.b':1}}", DTX_EBADUPDATE, "'a'"},
    {"{'$set':{'a.b':1,'a':1}}", DTX_EBADUPDATE, "conflicting"},
    {"{'$pull':{'a':1},'$push':{'a':1}}", DTX_EBADUPDATE, "$pull"},
    {"{'$addToSet':{'a':1},'$pull':{'a':1}}", DTX_EBADUPDATE, "$addToSet"},
    {"{'$min':{'x.y':1},'$max':{'x.y':5}}", DTX_EBADUPDATE, "'x.y'"},
    {"{'$set':{'a':1},'$inc':{'a-':1,'a.b':1}}", DTX_EBADUPDATE, "'a.b'"},
    {"{'$set':{'a.0':1},'$unset':{'a':1}}", DTX_EBADUPDATE, "'a.0'"},
    {"{'$currentDate':{'t':true},'$set':{'t.x':1}}", DTX_EBADUPDATE, "'t'"},
    {"{'$set':{'x':1},'$inc':{'y':1},'$unset':{'x.z.w':1}}", DTX_EBADUPDATE,
     "'x.z.w'"},
    {"{'$set':{'_id':1},'$setOnInsert':{'_id':2}}", DTX_EBADUPDATE, "_id"},
    /* not conflicts */
    {"{'$set':{'a':1},'$inc':{'ab':1}}", 0, NULL},
    {"{'$set':{'a.b':1},'$inc':{'a.c':1}}", 0, NULL},
    {"{'$set':{'a-b':1,'a.b':1}}", 0, NULL},
    {"{'$set':{'a.b':1},'$inc':{'a.bc':1}}", 0, NULL},
    {"{'$set':{'ab':1},'$unset':{'a':1}}", 0, NULL},
    {"{'$set':{'a.1':1},'$inc':{'a.10':1}}", 0, NULL},
    {"{'$push':{'a':1},'$pull':{'b':1},'$addToSet':{'c':1}}", 0, NULL},
    {"{'$set':{'a':1},'$setOnInsert':{'b':1}}", 0, NULL},
};

/* Each case compiled both ways (DTX__COMPILE_BORROW or not): the same
 * answer and detail. */
static void run_compile_table(const ccase_t *cs, size_t n) {
  size_t k, i;
  for (k = 0; k < 2 * n; k++) {
    i = k / 2;
    json_t *spec = JQNEW(cs[i].update);
    dtx__update_t *u = (dtx__update_t *)1;
    int rc = dtx__update_compile_flags(
        spec, NULL, k % 2 ? DTX__COMPILE_BORROW : 0, &u);
    CHECKF(rc == cs[i].rc, "case %zu %s: %s want %s (%s)", i, cs[i].update,
           dtx_errname(rc), dtx_errname(cs[i].rc), dtx_errdetail());
    if (rc)
      CHECKF(u == NULL, "case %zu: out not NULL on error", i);
    else
      CHECKF(u != NULL, "case %zu: out NULL on success", i);
    if (rc && cs[i].detail)
      CHECKF(strstr(dtx_errdetail(), cs[i].detail) != NULL,
             "case %zu %s: detail '%s' lacks '%s'", i, cs[i].update,
             dtx_errdetail(), cs[i].detail);
    if (k % 2 == 0) {
      /* The BSON leg: compile errors only (an empty document stands in,
       * which every compile that succeeds also accepts or refuses). */
      char *detail = strdup(rc ? dtx_errdetail() : "");
      json_t *doc = json_object(), *out = NULL;
      int changed = 0;
      if (rc == 0) {
        rc = dtx__update_apply(u, doc, 0, 0, &out, &changed);
        free(detail);
        detail = strdup(rc ? dtx_errdetail() : "");
      }
      dtx_t_bupd_row_t r = {"compile table", i, spec, NULL, doc, 0, 0,
                            NULL, rc, out, changed, detail};
      dtx_t_bupdate_leg(&r);
      json_decref(out);
      json_decref(doc);
      free(detail);
    }
    dtx__update_free(u != (dtx__update_t *)1 ? u : NULL);
    json_decref(spec);
  }
}

static void test_compile_errors(void) {
  run_compile_table(compile_cases,
                    sizeof compile_cases / sizeof compile_cases[0]);
}

static void test_conflicts(void) {
  run_compile_table(conflict_cases,
                    sizeof conflict_cases / sizeof conflict_cases[0]);
}

static void test_null_spec(void) {
  dtx__update_t *u = (dtx__update_t *)1;
  CHECK_RC(dtx__update_compile(NULL, &u), DTX_EBADUPDATE);
  CHECK(u == NULL);
}

static void test_is_replacement(void) {
  static const struct {
    const char *spec;
    int repl;
  } cases[] = {{"{}", 1},
               {"{'a':1}", 1},
               {"{'_id':1,'a':{'$b':1}}", 1},
               {"{'$set':{'a':1}}", 0},
               {"{'$setOnInsert':{'a':1}}", 0}};
  size_t i;
  for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *spec = JQNEW(cases[i].spec);
    dtx__update_t *u = NULL;
    CHECK_RC(dtx__update_compile(spec, &u), 0);
    CHECKF(dtx__update_is_replacement(u) == cases[i].repl, "%s",
           cases[i].spec);
    dtx__update_free(u);
    json_decref(spec);
  }
  CHECK(dtx__update_is_replacement(NULL) == 0);
}

static void test_bad_apply_args(void) {
  json_t *spec = JQNEW("{'$set':{'a':1}}"), *arr = JQNEW("[1]"), *out = (json_t *)1;
  dtx__update_t *u = NULL;
  int changed = 7;
  REQUIRE(dtx__update_compile(spec, &u) == 0);
  CHECK_RC(dtx__update_apply(u, arr, 0, NOW, &out, &changed), DTX_EINVAL);
  CHECK(out == NULL);
  CHECK(changed == 0);
  CHECK_RC(dtx__update_apply(u, NULL, 0, NOW, &out, &changed), DTX_EINVAL);
  /* changed may be NULL */
  CHECK_RC(dtx__update_apply(u, spec, 0, NOW, &out, NULL), 0);
  CHECK(out && json_integer_value(json_object_get(out, "a")) == 1);
  json_decref(out);
  dtx__update_free(u);
  dtx__update_free(NULL);
  json_decref(spec);
  json_decref(arr);
}

/* The result must not share values with the compiled update: changing the
 * output of one apply must not leak into the next. */
static void test_results_are_independent(void) {
  json_t *spec =
      JQNEW("{'$set':{'a':{'b':[1]}},'$push':{'l':{'$each':[{'x':1}]}}}");
  json_t *doc = JQNEW("{}"), *o1 = NULL, *o2 = NULL;
  dtx__update_t *u = NULL;
  int ch = 0;
  REQUIRE(dtx__update_compile(spec, &u) == 0);
  json_decref(spec);
  REQUIRE(dtx__update_apply(u, doc, 0, NOW, &o1, &ch) == 0);
  json_array_append_new(json_object_get(json_object_get(o1, "a"), "b"),
                        json_integer(2));
  json_object_set_new(json_array_get(json_object_get(o1, "l"), 0), "y",
                      json_integer(2));
  REQUIRE(dtx__update_apply(u, doc, 0, NOW, &o2, &ch) == 0);
  CHECKF(!strcmp(JS(o2), "{\"a\":{\"b\":[1]},\"l\":[{\"x\":1}]}"), "%s",
         JS(o2));
  json_decref(o1);
  json_decref(o2);
  json_decref(doc);
  dtx__update_free(u);
}

/* A replacement's output is a fresh document as well. */
static void test_replacement_independent(void) {
  json_t *spec = JQNEW("{'a':{'b':1}}"), *doc = JQNEW("{'_id':1}"), *o1, *o2;
  dtx__update_t *u = NULL;
  int ch;
  REQUIRE(dtx__update_compile(spec, &u) == 0);
  REQUIRE(dtx__update_apply(u, doc, 0, NOW, &o1, &ch) == 0);
  json_object_set_new(json_object_get(o1, "a"), "c", json_integer(1));
  REQUIRE(dtx__update_apply(u, doc, 0, NOW, &o2, &ch) == 0);
  CHECKF(!strcmp(JS(o2), "{\"_id\":1,\"a\":{\"b\":1}}"), "%s", JS(o2));
  CHECK(!strcmp(JS(spec), "{\"a\":{\"b\":1}}"));
  json_decref(o1);
  json_decref(o2);
  json_decref(doc);
  json_decref(spec);
  dtx__update_free(u);
}

/* An update compiled to be kept (no DTX__COMPILE_BORROW) holds copies:
 * changing the spec's and the arrayFilters' values in place after the
 * compile changes nothing it does.  With the flag it holds references,
 * given back when it is freed. */
static void test_operands_copied_or_held(void) {
  json_t *spec = JQNEW("{'$set':{'a':{'b':1},'e.$[i]':0},'$inc':{'n':2},"
                       "'$push':{'l':{'x':1},'m':{'$each':[1,2]}},"
                       "'$pull':{'p':{'$gte':5}}}");
  json_t *afs = JQNEW("[{'i':{'$gt':1}}]");
  json_t *doc = JQNEW("{'_id':1,'n':1,'p':[4,6],'e':[1,2]}");
  const char *want = "{\"_id\":1,\"n\":3,\"p\":[4],\"e\":[1,0],"
                     "\"a\":{\"b\":1},\"l\":[{\"x\":1}],\"m\":[1,2]}";
  json_t *set = json_object_get(spec, "$set"), *a = json_object_get(set, "a");
  json_t *n = json_object_get(json_object_get(spec, "$inc"), "n");
  json_t *push = json_object_get(spec, "$push");
  json_t *x = json_object_get(push, "l");
  json_t *each = json_object_get(json_object_get(push, "m"), "$each");
  json_t *pull = json_object_get(json_object_get(spec, "$pull"), "p");
  json_t *gt = json_object_get(json_object_get(json_array_get(afs, 0), "i"),
                               "$gt");
#define HELD                                                                  \
  (a->refcount + n->refcount + x->refcount + each->refcount +               \
   pull->refcount + gt->refcount)
  size_t before = HELD;
  dtx__update_t *u = NULL, *b = NULL;
  json_t *out = NULL;
  int ch = 0;
  REQUIRE(dtx__update_compile_ex(spec, afs, &u) == 0);
  CHECK(HELD == before);
  REQUIRE(dtx__update_compile_flags(spec, afs, DTX__COMPILE_BORROW, &b) == 0);
  /* one reference to each: the $pull condition's filter takes its own to
   * 5, which HELD does not count */
  CHECK(HELD == before + 6);
  REQUIRE(dtx__update_apply(b, doc, 0, NOW, &out, &ch) == 0);
  CHECKF(!strcmp(JS(out), want), "borrowed: %s", JS(out));
  json_decref(out);
  dtx__update_free(b);
  CHECK(HELD == before);
#undef HELD

  json_object_set_new(a, "b", json_integer(9));
  json_integer_set(n, 50);
  json_object_set_new(x, "x", json_string("changed"));
  json_array_clear(each);
  json_integer_set(json_object_get(pull, "$gte"), 0);
  json_integer_set(gt, 0);
  json_object_clear(set);
  REQUIRE(dtx__update_apply(u, doc, 0, NOW, &out, &ch) == 0);
  CHECKF(!strcmp(JS(out), want), "after changing the spec: %s", JS(out));
  json_decref(out);
  dtx__update_free(u);
  json_decref(spec);
  json_decref(afs);
  json_decref(doc);
}

/* Many threads apply one compiled update at once (run under TSan to see
 * races; under ASan it checks the results). */
typedef struct tharg {
  const dtx__update_t *u;
  int bad;
} tharg_t;

static void *apply_loop(void *p) {
  tharg_t *a = p;
  int i;
  for (i = 0; i < 2000; i++) {
    json_t *doc = json_pack("{s:i,s:[i,i],s:[{s:i}]}", "n", i, "l", 1, 7,
                            "o", "s", 2);
    json_t *out = NULL;
    int ch = 0;
    if (dtx__update_apply(a->u, doc, i & 1, NOW, &out, &ch) != 0 || !ch ||
        json_integer_value(json_object_get(out, "n")) != i + 5 ||
        json_array_size(json_object_get(out, "l")) != 2 ||
        json_array_size(json_object_get(out, "o")) != 0)
      a->bad++;
    json_decref(out);
    json_decref(doc);
  }
  return NULL;
}

static void test_concurrent_apply(void) {
  json_t *spec = JQNEW("{'$inc':{'n':5},'$addToSet':{'l':{'$each':[1,9]}},"
                   "'$pull':{'o':{'s':{'$gte':2}},'l':{'$gt':8}},"
                   "'$setOnInsert':{'new':true},'$push':{'h':{'x':[1]}}}");
  dtx__update_t *u = NULL;
  pthread_t th[6];
  tharg_t args[6];
  int i, rc = dtx__update_compile(spec, &u);
  /* $addToSet and $pull both on 'l' conflict: the spec must be refused */
  CHECK(rc == DTX_EBADUPDATE);
  json_decref(spec);
  spec = JQNEW("{'$inc':{'n':5},'$addToSet':{'l':{'$each':[1,7]}},"
           "'$pull':{'o':{'s':{'$gte':2}}},"
           "'$setOnInsert':{'new':true},'$push':{'h':{'x':[1]}}}");
  REQUIRE(dtx__update_compile(spec, &u) == 0);
  json_decref(spec);
  for (i = 0; i < 6; i++) {
    args[i].u = u;
    args[i].bad = 0;
    pthread_create(&th[i], NULL, apply_loop, &args[i]);
  }
  for (i = 0; i < 6; i++) {
    pthread_join(th[i], NULL);
    CHECKF(args[i].bad == 0, "thread %d: %d bad results", i, args[i].bad);
  }
  dtx__update_free(u);
}

int main(void) {
  TEST_RUN(test_apply_table);
  TEST_RUN(test_compile_errors);
  TEST_RUN(test_conflicts);
  TEST_RUN(test_null_spec);
  TEST_RUN(test_is_replacement);
  TEST_RUN(test_bad_apply_args);
  TEST_RUN(test_results_are_independent);
  TEST_RUN(test_replacement_independent);
  TEST_RUN(test_operands_copied_or_held);
  TEST_RUN(test_concurrent_apply);
  dtx_t_bupdate_report();
  return TEST_DONE();
}
