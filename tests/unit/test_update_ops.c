/* test_update_ops.c -- the update operators of docs/mongodb.md, and upsert
 * seeding, table by table from MongoDB's manual (each section names its
 * page).  A row gives the query filter (for the positional $), the update,
 * its arrayFilters, the input document, and either the exact output
 * (compact JSON: types and field order count) or the error code and a
 * fragment of its detail.  Every row also checks that the input document
 * is unchanged and that "changed" says whether the output differs. */
#include "bdiff_update.h"
#include "doc/doc.h"
#include "testlib.h"
#include "util/err.h"

#include <stdlib.h>

#include <stdint.h>
#include <string.h>

#define NOW 1700000000000LL

typedef struct ucase {
  const char *filter; /* NULL: {} */
  const char *update;
  const char *afs;    /* arrayFilters, or NULL */
  const char *doc;
  const char *want;   /* NULL when an error is expected */
  int rc;             /* the expected error (compile or apply) */
  const char *detail; /* substring of the error's detail */
  int insert;
} ucase_t;

#define OK(u, d, w) {NULL, u, NULL, d, w, 0, NULL, 0}
#define ERR(u, d, code, det) {NULL, u, NULL, d, NULL, code, det, 0}
#define FOK(f, u, d, w) {f, u, NULL, d, w, 0, NULL, 0}
#define FERR(f, u, d, code, det) {f, u, NULL, d, NULL, code, det, 0}
#define AOK(u, af, d, w) {NULL, u, af, d, w, 0, NULL, 0}
#define AERR(u, af, d, code, det) {NULL, u, af, d, NULL, code, det, 0}

/* How run_case compiles: test_tables runs every table once plainly and
 * once as the store API compiles (DTX__COMPILE_BORROW). */
static unsigned compile_flags;

static void run_case(const char *table, size_t i, const ucase_t *c) {
  json_t *filter = JQNEW(c->filter ? c->filter : "{}");
  json_t *spec = JQNEW(c->update);
  json_t *afs = c->afs ? JQNEW(c->afs) : NULL;
  json_t *doc = JQNEW(c->doc);
  char *before = JDUMP(doc);
  dtx__filter_t *f = NULL;
  dtx__update_t *u = NULL;
  json_t *out = NULL;
  int changed = -1;
  REQUIRE(dtx__filter_compile_flags(filter, compile_flags, &f) == 0);
  int rc = dtx__update_compile_flags(spec, afs, compile_flags, &u);
  if (rc == 0) {
    dtx__update_bind_filter(u, f);
    rc = dtx__update_apply(u, doc, c->insert, NOW, &out, &changed);
  }
  if (compile_flags == 0) {
    /* The BSON leg, with the row's filter as a BSON filter. */
    char *detail = strdup(rc ? dtx_errdetail() : "");
    dtx_t_bupd_row_t r = {table, i, spec, afs, doc, c->insert, NOW, filter,
                          rc, out, changed, detail};
    dtx_t_bupdate_leg(&r);
    dtx__err(rc, "%s", detail); /* the json_t answer, for the checks */
    free(detail);
  }
  if (c->want) {
    CHECKF(rc == 0, "%s[%zu] %s on %s: %s (%s)", table, i, c->update, c->doc,
           dtx_errname(rc), dtx_errdetail());
    json_t *w = JQNEW(c->want);
    char *ws = JDUMP(w), *got = out ? JDUMP(out) : NULL;
    CHECKF(got && !strcmp(got, ws), "%s[%zu] %s on %s: got %s want %s",
           table, i, c->update, c->doc, got ? got : "(null)", ws);
    if (rc == 0)
      CHECKF(changed == (strcmp(ws, before) != 0), "%s[%zu] changed=%d",
             table, i, changed);
    free(ws);
    free(got);
    json_decref(w);
  } else {
    CHECKF(rc == c->rc, "%s[%zu] %s on %s: %s (%s), want %s", table, i,
           c->update, c->doc, dtx_errname(rc), dtx_errdetail(),
           dtx_errname(c->rc));
    CHECKF(out == NULL, "%s[%zu]: out set on error", table, i);
    if (c->detail)
      CHECKF(strstr(dtx_errdetail(), c->detail) != NULL,
             "%s[%zu] %s: detail '%s' lacks '%s'", table, i, c->update,
             dtx_errdetail(), c->detail);
  }
  char *after = JDUMP(doc);
  CHECKF(!strcmp(before, after), "%s[%zu]: input changed", table, i);
  free(before);
  free(after);
  json_decref(out);
  dtx__update_free(u);
  dtx__filter_free(f);
  json_decref(filter);
  json_decref(spec);
  json_decref(afs);
  json_decref(doc);
}

#define RUN(t)                                                               \
  for (size_t i_ = 0; i_ < sizeof t / sizeof t[0]; i_++)                    \
  run_case(#t, i_, &t[i_])

/* ---- $mul -----------------------------------------------------------------
 * Manual: "$mul": a missing field is created as a zero of the operand's
 * type; int64 stays exact (doctx: overflow is an error); a double anywhere
 * gives a double; a non-number is refused. */
static const ucase_t mul_cases[] = {
    OK("{'$mul':{'a':4}}", "{'a':3}", "{'a':12}"),
    OK("{'$mul':{'a':2.5}}", "{'a':2}", "{'a':5.0}"),
    OK("{'$mul':{'a':2}}", "{'a':2.5}", "{'a':5.0}"),
    OK("{'$mul':{'a':2}}", "{}", "{'a':0}"),
    OK("{'$mul':{'a':2.5}}", "{}", "{'a':0.0}"),
    OK("{'$mul':{'a.b':3}}", "{'a':{}}", "{'a':{'b':0}}"),
    OK("{'$mul':{'a':1}}", "{'a':7}", "{'a':7}"),
    OK("{'$mul':{'a':-1}}", "{'a':-9223372036854775807}",
       "{'a':9223372036854775807}"),
    OK("{'$mul':{'a.1':10}}", "{'a':[1,2]}", "{'a':[1,20]}"),
    ERR("{'$mul':{'a':2}}", "{'a':9223372036854775807}", DTX_EOVERFLOW,
        "overflows"),
    ERR("{'$mul':{'a':-1}}", "{'a':-9223372036854775808}", DTX_EOVERFLOW,
        "$mul"),
    ERR("{'$mul':{'a':1e300}}", "{'a':1e300}", DTX_EOVERFLOW, "finite"),
    ERR("{'$mul':{'a':2}}", "{'a':'x'}", DTX_ETYPE, "non-numeric"),
    ERR("{'$mul':{'a':2}}", "{'a':null}", DTX_ETYPE, "$mul"),
    ERR("{'$mul':{'a':'2'}}", "{}", DTX_EBADUPDATE, "number"),
    ERR("{'$mul':{'_id':2}}", "{}", DTX_EBADUPDATE, "immutable"),
};

/* ---- $rename --------------------------------------------------------------
 * Manual: "$rename": an $unset of both names, then a $set of the new one
 * (so it lands last); a missing source does nothing; neither name may lead
 * through an array; the two may not be on one path. */
static const ucase_t rename_cases[] = {
    OK("{'$rename':{'a':'b'}}", "{'a':1,'c':2}", "{'c':2,'b':1}"),
    OK("{'$rename':{'a':'b'}}", "{'a':1,'b':2,'c':3}", "{'c':3,'b':1}"),
    OK("{'$rename':{'a':'b'}}", "{'c':1}", "{'c':1}"),
    OK("{'$rename':{'a.x':'y'}}", "{'a':{'x':1,'z':2}}",
       "{'a':{'z':2},'y':1}"),
    OK("{'$rename':{'a':'b.c'}}", "{'a':[1,2]}", "{'b':{'c':[1,2]}}"),
    OK("{'$rename':{'a':'b.c'}}", "{'a':1,'b':{'d':2}}",
       "{'b':{'d':2,'c':1}}"),
    OK("{'$rename':{'a.x':'y'}}", "{'a':5}", "{'a':5}"),
    OK("{'$rename':{'a':'b','c':'d'}}", "{'a':1,'c':2}", "{'b':1,'d':2}"),
    ERR("{'$rename':{'a.x':'y'}}", "{'a':[{'x':1}]}", DTX_ETYPE,
        "source field"),
    ERR("{'$rename':{'a':'b.x'}}", "{'a':1,'b':[{'x':1}]}", DTX_ETYPE,
        "destination field"),
    ERR("{'$rename':{'a':'b.x'}}", "{'a':1,'b':5}", DTX_ETYPE,
        "cannot create field"),
    ERR("{'$rename':{'a':'a'}}", "{}", DTX_EBADUPDATE, "must differ"),
    ERR("{'$rename':{'a':'a.b'}}", "{}", DTX_EBADUPDATE, "same path"),
    ERR("{'$rename':{'a.b':'a'}}", "{}", DTX_EBADUPDATE, "same path"),
    ERR("{'$rename':{'a':1}}", "{}", DTX_EBADUPDATE, "must be a string"),
    ERR("{'$rename':{'a':'_id'}}", "{}", DTX_EBADUPDATE, "immutable"),
    ERR("{'$rename':{'_id':'a'}}", "{}", DTX_EBADUPDATE, "immutable"),
    ERR("{'$rename':{'a.$':'b'}}", "{}", DTX_EBADUPDATE, "'$'"),
    ERR("{'$rename':{'a':'b.$[]'}}", "{}", DTX_EBADUPDATE, "'$'"),
    ERR("{'$rename':{'a':'b'},'$set':{'b':1}}", "{}", DTX_EBADUPDATE,
        "conflicting"),
    ERR("{'$rename':{'a':'b'},'$set':{'a.c':1}}", "{}", DTX_EBADUPDATE,
        "conflicting"),
};

/* ---- $pop and $pullAll ----------------------------------------------------
 * Manual: "$pop" (-1 the first element, 1 the last; nothing on a missing
 * field or an empty array) and "$pullAll" (every element equal to one of
 * the values). */
static const ucase_t pop_pullall_cases[] = {
    OK("{'$pop':{'a':-1}}", "{'a':[1,2,3]}", "{'a':[2,3]}"),
    OK("{'$pop':{'a':1}}", "{'a':[1,2,3]}", "{'a':[1,2]}"),
    OK("{'$pop':{'a':1.0}}", "{'a':[1]}", "{'a':[]}"),
    OK("{'$pop':{'a':1}}", "{'a':[]}", "{'a':[]}"),
    OK("{'$pop':{'a':1}}", "{}", "{}"),
    OK("{'$pop':{'a.b':-1}}", "{'a':{'b':[[1],2]}}", "{'a':{'b':[2]}}"),
    ERR("{'$pop':{'a':1}}", "{'a':5}", DTX_ETYPE, "non-array"),
    ERR("{'$pop':{'a':2}}", "{}", DTX_EBADUPDATE, "1 or -1"),
    ERR("{'$pop':{'a':0}}", "{}", DTX_EBADUPDATE, "1 or -1"),
    ERR("{'$pop':{'a':'1'}}", "{}", DTX_EBADUPDATE, "1 or -1"),
    OK("{'$pullAll':{'a':[0,5]}}", "{'a':[0,2,5,5,1,0]}", "{'a':[2,1]}"),
    OK("{'$pullAll':{'a':[1.0]}}", "{'a':[1,2]}", "{'a':[2]}"),
    OK("{'$pullAll':{'a':[{'b':1}]}}", "{'a':[{'b':1},{'b':1,'c':2}]}",
       "{'a':[{'b':1,'c':2}]}"),
    OK("{'$pullAll':{'a':[[1]]}}", "{'a':[[1],1]}", "{'a':[1]}"),
    OK("{'$pullAll':{'a':[]}}", "{'a':[1]}", "{'a':[1]}"),
    OK("{'$pullAll':{'a':[1]}}", "{}", "{}"),
    ERR("{'$pullAll':{'a':[1]}}", "{'a':1}", DTX_ETYPE, "$pullAll"),
    ERR("{'$pullAll':{'a':1}}", "{}", DTX_EBADUPDATE, "array"),
};

/* ---- $bit -------------------------------------------------------------------
 * Manual: "$bit": and/or/xor on integers only; a missing field starts
 * from 0. */
static const ucase_t bit_cases[] = {
    OK("{'$bit':{'a':{'and':10}}}", "{'a':13}", "{'a':8}"),
    OK("{'$bit':{'a':{'or':5}}}", "{'a':3}", "{'a':7}"),
    OK("{'$bit':{'a':{'xor':5}}}", "{'a':1}", "{'a':4}"),
    OK("{'$bit':{'a':{'and':12,'or':1}}}", "{'a':13}", "{'a':13}"),
    OK("{'$bit':{'a':{'or':-1}}}", "{'a':0}", "{'a':-1}"),
    OK("{'$bit':{'a':{'or':3}}}", "{}", "{'a':3}"),
    OK("{'$bit':{'a':{'and':0}}}", "{'a':-9223372036854775808}", "{'a':0}"),
    ERR("{'$bit':{'a':{'and':1}}}", "{'a':1.5}", DTX_ETYPE, "non-integral"),
    ERR("{'$bit':{'a':{'and':1}}}", "{'a':2.0}", DTX_ETYPE, "real"),
    ERR("{'$bit':{'a':{'and':1}}}", "{'a':'x'}", DTX_ETYPE, "$bit"),
    ERR("{'$bit':{'a':{'and':1.5}}}", "{}", DTX_EBADUPDATE, "integer"),
    ERR("{'$bit':{'a':{'nand':1}}}", "{}", DTX_EBADUPDATE, "nand"),
    ERR("{'$bit':{'a':{}}}", "{}", DTX_EBADUPDATE, "$bit"),
    ERR("{'$bit':{'a':5}}", "{}", DTX_EBADUPDATE, "$bit"),
};

/* ---- $push modifiers ---------------------------------------------------------
 * Manual: "$push" with "$each", "$position" (from the end when negative),
 * "$sort" (1/-1 on values, {field: dir} on documents; stable) and
 * "$slice" (first n, last -n, 0 empties), applied position, sort, slice
 * whatever their order.  Without $each the object is the value to push. */
static const ucase_t push_cases[] = {
    OK("{'$push':{'a':{'$each':[1,2],'$position':0}}}", "{'a':[3]}",
       "{'a':[1,2,3]}"),
    OK("{'$push':{'a':{'$each':[9],'$position':1}}}", "{'a':[1,2,3]}",
       "{'a':[1,9,2,3]}"),
    OK("{'$push':{'a':{'$each':[9],'$position':-1}}}", "{'a':[1,2,3]}",
       "{'a':[1,2,9,3]}"),
    OK("{'$push':{'a':{'$each':[9],'$position':-10}}}", "{'a':[1,2]}",
       "{'a':[9,1,2]}"),
    OK("{'$push':{'a':{'$each':[9],'$position':10}}}", "{'a':[1,2]}",
       "{'a':[1,2,9]}"),
    OK("{'$push':{'a':{'$each':[4,5],'$slice':-3}}}", "{'a':[1,2,3]}",
       "{'a':[3,4,5]}"),
    OK("{'$push':{'a':{'$each':[4],'$slice':2}}}", "{'a':[1,2,3]}",
       "{'a':[1,2]}"),
    OK("{'$push':{'a':{'$each':[],'$slice':0}}}", "{'a':[1,2]}", "{'a':[]}"),
    OK("{'$push':{'a':{'$each':[3,1],'$sort':1}}}", "{'a':[2]}",
       "{'a':[1,2,3]}"),
    OK("{'$push':{'a':{'$each':[3,1],'$sort':-1}}}", "{'a':[2]}",
       "{'a':[3,2,1]}"),
    OK("{'$push':{'a':{'$each':['b',1,null],'$sort':1}}}", "{'a':[]}",
       "{'a':[null,1,'b']}"),
    OK("{'$push':{'q':{'$each':[{'id':3,'s':8},{'id':4,'s':7}],"
       "'$sort':{'s':-1},'$slice':3}}}",
       "{'q':[{'id':1,'s':9},{'id':2,'s':6}]}",
       "{'q':[{'id':1,'s':9},{'id':3,'s':8},{'id':4,'s':7}]}"),
    /* stable: equal keys keep their order */
    OK("{'$push':{'q':{'$each':[{'k':1,'n':'c'}],'$sort':{'k':1}}}}",
       "{'q':[{'k':1,'n':'a'},{'k':0,'n':'z'},{'k':1,'n':'b'}]}",
       "{'q':[{'k':0,'n':'z'},{'k':1,'n':'a'},{'k':1,'n':'b'},"
       "{'k':1,'n':'c'}]}"),
    /* the order in the spec does not matter: position, sort, slice */
    OK("{'$push':{'a':{'$slice':2,'$sort':-1,'$each':[5],'$position':0}}}",
       "{'a':[1,9]}", "{'a':[9,5]}"),
    OK("{'$push':{'a':{'$each':[1],'$sort':1}}}", "{}", "{'a':[1]}"),
    OK("{'$push':{'a':{'$slice':1}}}", "{'a':[]}", "{'a':[{'$slice':1}]}"),
    ERR("{'$push':{'a':{'$each':[1],'$slice':'x'}}}", "{}", DTX_EBADUPDATE,
        "$slice"),
    ERR("{'$push':{'a':{'$each':[1],'$slice':1.5}}}", "{}", DTX_EBADUPDATE,
        "integer"),
    ERR("{'$push':{'a':{'$each':[1],'$position':'0'}}}", "{}",
        DTX_EBADUPDATE, "$position"),
    ERR("{'$push':{'a':{'$each':[1],'$sort':2}}}", "{}", DTX_EBADUPDATE,
        "$sort"),
    ERR("{'$push':{'a':{'$each':[1],'$sort':{}}}}", "{}", DTX_EBADUPDATE,
        "$sort"),
    ERR("{'$push':{'a':{'$each':[1],'$sort':{'x':0}}}}", "{}",
        DTX_EBADUPDATE, "1 or -1"),
    ERR("{'$push':{'a':{'$each':[1],'$sort':{'':1}}}}", "{}",
        DTX_EBADUPDATE, "$sort"),
    ERR("{'$push':{'a':{'$each':[1],'$bogus':1}}}", "{}", DTX_EBADUPDATE,
        "$bogus"),
    ERR("{'$push':{'a':{'$each':[1]}}}", "{'a':5}", DTX_ETYPE, "non-array"),
};

/* ---- the positional $ --------------------------------------------------------
 * Manual: "$ (update)": the first element the query matched; an error when
 * the query matched no array element. */
static const ucase_t dollar_cases[] = {
    FOK("{'grades':80}", "{'$set':{'grades.$':82}}", "{'grades':[85,80,80]}",
        "{'grades':[85,82,80]}"),
    FOK("{'grades.grade':85}", "{'$set':{'grades.$.std':6}}",
        "{'grades':[{'grade':80,'std':8},{'grade':85,'std':5}]}",
        "{'grades':[{'grade':80,'std':8},{'grade':85,'std':6}]}"),
    FOK("{'grades':{'$elemMatch':{'grade':{'$lte':90},'mean':{'$gt':80}}}}",
        "{'$inc':{'grades.$.std':1}}",
        "{'grades':[{'grade':95,'mean':85,'std':1},"
        "{'grade':90,'mean':85,'std':2}]}",
        "{'grades':[{'grade':95,'mean':85,'std':1},"
        "{'grade':90,'mean':85,'std':3}]}"),
    FOK("{'_id':1,'changes.account':'B'}", "{'$set':{'changes.$.seq':7}}",
        "{'_id':1,'changes':[{'account':'A'},{'account':'B'}]}",
        "{'_id':1,'changes':[{'account':'A'},{'account':'B','seq':7}]}"),
    FOK("{'a':{'$gt':1}}", "{'$unset':{'a.$':1}}", "{'a':[1,2]}",
        "{'a':[1,null]}"),
    FOK("{'a.b':1}", "{'$push':{'a.$.c':2}}", "{'a':[{'b':1}]}",
        "{'a':[{'b':1,'c':[2]}]}"),
    FERR("{'_id':1}", "{'$set':{'a.$':1}}", "{'_id':1,'a':[1]}",
         DTX_EBADUPDATE, "did not find the match"),
    FERR("{'a':{'$ne':3}}", "{'$set':{'a.$':1}}", "{'a':[1,2]}",
         DTX_EBADUPDATE, "positional"),
    ERR("{'$set':{'a.$.b.$':1}}", "{}", DTX_EBADUPDATE, "too many"),
    FERR("{'a':2}", "{'$set':{'a.$':9,'a.1':8}}", "{'a':[1,2]}",
         DTX_EBADUPDATE, "conflict"),
};

/* ---- $[] and $[<identifier>] -------------------------------------------------
 * Manual: "$[]" (every element) and "$[<identifier>]" with arrayFilters
 * (the elements whose filter matches; identifiers are a lowercase letter
 * then letters and digits; every filter must be used and every identifier
 * defined; the array must exist). */
static const ucase_t all_cases[] = {
    OK("{'$inc':{'grades.$[]':10}}", "{'grades':[88,90,92]}",
       "{'grades':[98,100,102]}"),
    OK("{'$set':{'g.$[].ok':true}}", "{'g':[{'s':1},{'s':2}]}",
       "{'g':[{'s':1,'ok':true},{'s':2,'ok':true}]}"),
    OK("{'$inc':{'a.$[].b.$[]':1}}", "{'a':[{'b':[1,2]},{'b':[3]}]}",
       "{'a':[{'b':[2,3]},{'b':[4]}]}"),
    OK("{'$inc':{'a.$[]':1}}", "{'a':[]}", "{'a':[]}"),
    OK("{'$pull':{'a.$[]':1}}", "{'a':[[1,2],[1]]}", "{'a':[[2],[]]}"),
    ERR("{'$inc':{'a.$[]':1}}", "{}", DTX_EBADUPDATE, "must exist"),
    ERR("{'$inc':{'a.$[]':1}}", "{'a':5}", DTX_ETYPE, "non-array"),
    ERR("{'$set':{'a.$[]':1,'a.0':2}}", "{'a':[1]}", DTX_EBADUPDATE,
        "conflict"),
    AOK("{'$set':{'grades.$[el]':100}}", "[{'el':{'$gte':100}}]",
        "{'grades':[95,102,90,150]}", "{'grades':[95,100,90,100]}"),
    AOK("{'$set':{'grades.$[e].mean':100}}", "[{'e.grade':{'$gte':85}}]",
        "{'grades':[{'grade':80,'mean':75},{'grade':85,'mean':90}]}",
        "{'grades':[{'grade':80,'mean':75},{'grade':85,'mean':100}]}"),
    AOK("{'$inc':{'grades.$[e].std':-1}}",
        "[{'e.grade':{'$gte':80},'e.std':{'$gt':5}}]",
        "{'grades':[{'grade':80,'std':6},{'grade':85,'std':5}]}",
        "{'grades':[{'grade':80,'std':5},{'grade':85,'std':5}]}"),
    AOK("{'$set':{'d.$[x].v':0}}",
        "[{'$or':[{'x.k':'a'},{'x.k':'c'}]}]",
        "{'d':[{'k':'a','v':1},{'k':'b','v':1},{'k':'c','v':1}]}",
        "{'d':[{'k':'a','v':0},{'k':'b','v':1},{'k':'c','v':0}]}"),
    AOK("{'$inc':{'a.$[i].b.$[j]':100}}", "[{'i.n':1},{'j':{'$gt':1}}]",
        "{'a':[{'n':1,'b':[1,2]},{'n':2,'b':[3]}]}",
        "{'a':[{'n':1,'b':[1,102]},{'n':2,'b':[3]}]}"),
    AOK("{'$set':{'a.$[x]':0}}", "[{'x':{'$regex':'^k'}}]",
        "{'a':['k1','z','k2']}", "{'a':[0,'z',0]}"),
    AOK("{'$set':{'a.$[x]':0}}", "[{'x':9}]", "{'a':[1,2]}", "{'a':[1,2]}"),
    AERR("{'$set':{'a.$[x]':0}}", NULL, "{'a':[1]}", DTX_EBADUPDATE,
         "no array filter found for identifier 'x'"),
    AERR("{'$set':{'a.$[x]':0}}", "[{'x':1},{'y':2}]", "{'a':[1]}",
         DTX_EBADUPDATE, "'y' is not used"),
    AERR("{'$set':{'a.$[]':0}}", "[{'y':2}]", "{'a':[1]}", DTX_EBADUPDATE,
         "not used"),
    AERR("{'$set':{'a.$[x]':0}}", "[{'x':1},{'x':2}]", "{'a':[1]}",
         DTX_EBADUPDATE, "several filters"),
    AERR("{'$set':{'a.$[x]':0}}", "[{'x':1,'y':2}]", "{'a':[1]}",
         DTX_EBADUPDATE, "single top-level field"),
    AERR("{'$set':{'a.$[X]':0}}", "[{'X':1}]", "{}", DTX_EBADUPDATE,
         "lowercase"),
    AERR("{'$set':{'a.$[x]':0}}", "[{}]", "{}", DTX_EBADUPDATE, "empty"),
    AERR("{'$set':{'a.$[x]':0}}", "[5]", "{}", DTX_EBADUPDATE, "object"),
    AERR("{'$set':{'a.$[x]':0}}", "{'x':1}", "{}", DTX_EBADUPDATE,
         "must be an array"),
    AERR("{'$set':{'a.$[x]':0}}", "[{'x':{'$bogus':1}}]", "{}",
         DTX_EBADUPDATE, "$bogus"),
    AERR("{'$set':{'a.$[x]':0}}", "[{'x':1}]", "{'a':'s'}", DTX_ETYPE,
         "non-array"),
    AERR("{'b':1}", "[{'x':1}]", "{}", DTX_EBADUPDATE, "not used"),
};

/* ---- field names, MongoDB 5.0+ ----------------------------------------------
 * Manual: "Field Names with Periods and Dollar Signs": inserts and values
 * may hold '$'-prefixed and dotted names; a replacement may not have a
 * '$'-prefixed top-level name but may have a dotted one; update paths may
 * not name a '$'-prefixed field. */
static const ucase_t name_cases[] = {
    OK("{'price.usd':45}", "{'_id':1,'x':1}", "{'_id':1,'price.usd':45}"),
    OK("{'a':{'$b':1,'c.d':2}}", "{'_id':1}", "{'_id':1,'a':{'$b':1,'c.d':2}}"),
    OK("{'$push':{'a':{'$x':1}}}", "{}", "{'a':[{'$x':1}]}"),
    OK("{'$addToSet':{'a':{'$db':'n','$ref':'r'}}}", "{'a':[]}",
       "{'a':[{'$db':'n','$ref':'r'}]}"),
    OK("{'$set':{'a':{'$inc':true,'b.c':1}}}", "{}",
       "{'a':{'$inc':true,'b.c':1}}"),
    ERR("{'$set':{'$a':1}}", "{}", DTX_EBADUPDATE, "'$a'"),
    ERR("{'$set':{'a.$b':1}}", "{}", DTX_EBADUPDATE, "'$b'"),
    ERR("{'$a':1}", "{}", DTX_EBADUPDATE, "unknown operator $a"),
    ERR("{'$price':1,'q':2}", "{}", DTX_EBADUPDATE, "mixes"),
};

/* ---- $currentDate timestamp -------------------------------------------------
 * Manual: "$currentDate" with {$type: "timestamp"}; doctx stores MongoDB's
 * Timestamp as seconds << 32 | an increment that orders writes within a
 * second. */
static void test_timestamp(void) {
  json_t *spec = JQNEW("{'$currentDate':{'t':{'$type':'timestamp'},"
                       "'d':{'$type':'date'}}}");
  json_t *doc = JQNEW("{}");
  dtx__update_t *u = NULL;
  REQUIRE(dtx__update_compile(spec, &u) == 0);
  json_t *a = NULL, *b = NULL;
  CHECK_RC(dtx__update_apply(u, doc, 0, NOW, &a, NULL), 0);
  CHECK_RC(dtx__update_apply(u, doc, 0, NOW, &b, NULL), 0);
  json_int_t ta = json_integer_value(json_object_get(a, "t"));
  json_int_t tb = json_integer_value(json_object_get(b, "t"));
  CHECK((ta >> 32) == NOW / 1000);
  CHECK((ta & 0xffffffff) >= 1);
  CHECK(tb > ta); /* the increment orders the two writes */
  CHECK(json_integer_value(json_object_get(a, "d")) == NOW);
  json_decref(a);
  json_decref(b);
  dtx__update_free(u);
  json_decref(spec);
  json_decref(doc);
}

/* ---- upsert seeding ----------------------------------------------------------
 * Manual: "db.collection.update(): Upsert Behavior" and "Insert a New
 * Document if No Match Exists (Upsert)": equality conditions (also
 * one-element $in/$all, inside $and and a one-branch $or) seed the new
 * document, dotted paths (also under _id) become subdocuments, two
 * equalities on one path are refused (so is $all with several values),
 * and a replacement takes only the filter's _id. */
static void test_upsert_seed(void) {
  static const struct {
    const char *filter, *update, *want; /* want NULL: error rc */
    int rc;
    const char *detail;
  } cases[] = {
      {"{'_id':1,'a':1}", "{'$set':{'b':2}}", "{'_id':1,'a':1,'b':2}", 0, 0},
      {"{'_id':1,'a':{'$eq':1}}", "{'$set':{'b':2}}", "{'_id':1,'a':1,'b':2}",
       0, 0},
      {"{'_id':1,'a':{'$in':[5]}}", "{'$inc':{'n':1}}",
       "{'_id':1,'a':5,'n':1}", 0, 0},
      {"{'_id':1,'a':{'$in':[5,6]}}", "{'$inc':{'n':1}}", "{'_id':1,'n':1}", 0,
       0},
      {"{'_id':1,'a':{'$all':[5]}}", "{'$inc':{'n':1}}",
       "{'_id':1,'a':5,'n':1}", 0, 0},
      {"{'_id':1,'a':{'$all':[5,6]}}", "{'$inc':{'n':1}}", NULL,
       DTX_EBADQUERY, "'a'"},
      {"{'_id':1,'$or':[{'a':1}]}", "{'$inc':{'n':1}}",
       "{'_id':1,'a':1,'n':1}", 0, 0},
      {"{'_id':1,'$or':[{'a':1},{'b':2}]}", "{'$inc':{'n':1}}",
       "{'_id':1,'n':1}", 0, 0},
      {"{'$and':[{'_id':1},{'$and':[{'a':1}]}]}", "{'$inc':{'n':1}}",
       "{'_id':1,'a':1,'n':1}", 0, 0},
      {"{'_id':1,'$nor':[{'a':1}]}", "{'$inc':{'n':1}}", "{'_id':1,'n':1}", 0,
       0},
      {"{'_id.x':1,'_id.y':2}", "{'$set':{'v':0}}",
       "{'_id':{'x':1,'y':2},'v':0}", 0, 0},
      {"{'_id':1,'a.b':1,'a.c':2}", "{'$set':{'v':0}}",
       "{'_id':1,'a':{'b':1,'c':2},'v':0}", 0, 0},
      {"{'_id':1,'a':{'$gt':1},'b':{'$elemMatch':{'c':1}}}",
       "{'$set':{'v':0}}", "{'_id':1,'v':0}", 0, 0},
      {"{'_id':1,'a':1,'a.b':2}", "{'$set':{'v':0}}", NULL, DTX_EBADQUERY,
       "'a'"},
      {"{'_id':1,'a':1,'$and':[{'a':2}]}", "{'$set':{'v':0}}", NULL,
       DTX_EBADQUERY, "both matched"},
      {"{'_id':5,'a':1}", "{'b':2}", "{'_id':5,'b':2}", 0, 0},
      {"{'_id':5,'a':1}", "{'a':2}", "{'_id':5,'a':2}", 0, 0},
      {"{'_id':5}", "{'_id':6,'a':2}", NULL, DTX_EIMMUTABLE, "_id"},
      {"{'_id':1,'a':1}", "{'$setOnInsert':{'s':1},'$set':{'a':3}}",
       "{'_id':1,'a':3,'s':1}", 0, 0},
      {"{'_id':1,'$or':[{'a':1}],'a':2}", "{'$set':{'v':0}}", NULL,
       DTX_EBADQUERY, "both matched"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *f = JQNEW(cases[i].filter), *spec = JQNEW(cases[i].update);
    dtx__update_t *u = NULL;
    json_t *out = NULL;
    REQUIRE(dtx__update_compile(spec, &u) == 0);
    int rc = dtx__upsert_doc(f, u, NOW, &out);
    char *detail = strdup(rc ? dtx_errdetail() : "");
    dtx_t_bupsert_leg("seed", i, f, spec, NOW, rc, out, detail);
    dtx__err(rc, "%s", detail);
    free(detail);
    if (cases[i].want) {
      json_t *w = JQNEW(cases[i].want);
      char *ws = JDUMP(w), *got = out ? JDUMP(out) : NULL;
      CHECKF(rc == 0 && got && !strcmp(got, ws), "seed[%zu] %s: %s (%s) "
             "got %s want %s", i, cases[i].filter, dtx_errname(rc),
             dtx_errdetail(), got ? got : "(null)", ws);
      free(ws);
      free(got);
      json_decref(w);
    } else {
      CHECKF(rc == cases[i].rc && !out, "seed[%zu] %s: %s want %s", i,
             cases[i].filter, dtx_errname(rc), dtx_errname(cases[i].rc));
      CHECKF(strstr(dtx_errdetail(), cases[i].detail) != NULL,
             "seed[%zu]: detail '%s' lacks '%s'", i, dtx_errdetail(),
             cases[i].detail);
    }
    json_decref(out);
    dtx__update_free(u);
    json_decref(f);
    json_decref(spec);
  }
}

/* An upsert with "$": the seeded document did not match an array. */
static void test_upsert_positional(void) {
  json_t *f = JQNEW("{'_id':1,'a':5}"), *spec = JQNEW("{'$set':{'a.$':6}}");
  dtx__filter_t *cf = NULL;
  dtx__update_t *u = NULL;
  json_t *out = NULL;
  REQUIRE(dtx__filter_compile(f, &cf) == 0);
  REQUIRE(dtx__update_compile(spec, &u) == 0);
  dtx__update_bind_filter(u, cf);
  CHECK_RC(dtx__upsert_doc(f, u, NOW, &out), DTX_EBADUPDATE);
  CHECK(out == NULL);
  dtx__update_free(u);
  dtx__filter_free(cf);
  json_decref(f);
  json_decref(spec);
}

static void test_tables(void) {
  for (int borrow = 0; borrow < 2; borrow++) {
    compile_flags = borrow ? DTX__COMPILE_BORROW : 0;
    RUN(mul_cases);
    RUN(rename_cases);
    RUN(pop_pullall_cases);
    RUN(bit_cases);
    RUN(push_cases);
    RUN(dollar_cases);
    RUN(all_cases);
    RUN(name_cases);
  }
  compile_flags = 0;
}

int main(void) {
  TEST_RUN(test_tables);
  TEST_RUN(test_timestamp);
  TEST_RUN(test_upsert_seed);
  TEST_RUN(test_upsert_positional);
  dtx_t_bupdate_report();
  return TEST_DONE();
}
