/* keys_rows.h -- the index key rows of test_keys.c (keys.c against its
 * expected tuples, and the BSON legs), shared with test_bkeyvals.c,
 * which runs every row through dtx__bindex_key_tuples too.
 *
 * A row gives the index keys, a document and the exact expected array of
 * tuples (in first-occurrence order) or an error.  JSON uses ' for ". */
#ifndef DTX_TESTS_KEYS_ROWS_H
#define DTX_TESTS_KEYS_ROWS_H

#include "doctx.h"

#include <stddef.h>

typedef struct kcase {
  const char *keys;
  int sparse;
  const char *doc;
  const char *want; /* expected tuples, or NULL for an error */
  int rc;
  const char *detail;
} kcase_t;

#define K(k, d, w) {k, 0, d, w, 0, NULL}
#define KS(k, d, w) {k, 1, d, w, 0, NULL}
#define KERR(k, d, det) {k, 0, d, NULL, DTX_EBADINDEX, det}

static const kcase_t key_cases[] = {
    /* scalars, missing, null */
    K("{'a':1}", "{'a':1}", "[[1]]"),
    K("{'a':1}", "{'a':'x'}", "[['x']]"),
    K("{'a':-1}", "{'a':2.5}", "[[2.5]]"),
    K("{'a':1}", "{}", "[[null]]"),
    K("{'a':1}", "{'b':1}", "[[null]]"),
    K("{'a':1}", "{'a':null}", "[[null]]"),
    K("{'a':1}", "{'a':true}", "[[true]]"),
    K("{'_id':1}", "{'_id':'k1','a':1}", "[['k1']]"),
    /* nested objects */
    K("{'a':1}", "{'a':{'x':1}}", "[[{'x':1}]]"),
    K("{'a.b':1}", "{'a':{'b':5}}", "[[5]]"),
    K("{'a.b.c':1}", "{'a':{'b':{'c':'z'}}}", "[['z']]"),
    K("{'a.b':1}", "{'a':5}", "[[null]]"),
    K("{'a.b':1}", "{'a':null}", "[[null]]"),
    K("{'a.b':1}", "{'a':{}}", "[[null]]"),
    K("{'a.b.c':1}", "{'a':{'b':'s'}}", "[[null]]"),
    /* multikey */
    K("{'a':1}", "{'a':[1,2]}", "[[1],[2]]"),
    K("{'a':1}", "{'a':[2,1,2]}", "[[2],[1]]"),
    K("{'a':1}", "{'a':[1,1.0]}", "[[1]]"),
    K("{'a':1}", "{'a':[null,null]}", "[[null]]"),
    K("{'a':1}", "{'a':[]}", "[[[]]]"),
    K("{'a':1}", "{'a':[[1,2],3]}", "[[[1,2]],[3]]"),
    K("{'a':1}", "{'a':[[]]}", "[[[]]]"),
    K("{'a':1}", "{'a':[{'x':1},{'x':1}]}", "[[{'x':1}]]"),
    K("{'a.b':1}", "{'a':[{'b':1},{'b':2},{'c':3}]}", "[[1],[2],[null]]"),
    K("{'a.b':1}", "{'a':[1,2]}", "[[null]]"),
    K("{'a.b':1}", "{'a':[]}", "[[null]]"),
    K("{'a.b':1}", "{'a':[[{'b':1}]]}", "[[null]]"),
    K("{'a.b':1}", "{'a':{'b':[1,2]}}", "[[1],[2]]"),
    K("{'a.b':1}", "{'a':{'b':[]}}", "[[[]]]"),
    K("{'a.b':1}", "{'a':[{'b':[1,2]},{'b':[2,3]}]}", "[[1],[2],[3]]"),
    K("{'a.b':1}", "{'a':[{'b':[]},{'b':1}]}", "[[[]],[1]]"),
    K("{'a.b.c':1}", "{'a':[{'b':[{'c':1},{'c':2}]},{'b':{'c':3}}]}",
      "[[1],[2],[3]]"),
    /* compound */
    K("{'a':1,'b':1}", "{'a':1,'b':2}", "[[1,2]]"),
    K("{'a':1,'b':-1}", "{'b':2}", "[[null,2]]"),
    K("{'a':1,'b':1}", "{}", "[[null,null]]"),
    K("{'a':1,'b':1}", "{'a':[1,2],'b':3}", "[[1,3],[2,3]]"),
    K("{'b':1,'a':1}", "{'a':[1,2],'b':3}", "[[3,1],[3,2]]"),
    K("{'a':1,'b':1}", "{'a':[],'b':1}", "[[[],1]]"),
    /* compound through the same array: element by element (ledger) */
    K("{'changes.account':1,'changes.seqId':1}",
      "{'changes':[{'account':'A','seqId':1},{'account':'B','seqId':7}]}",
      "[['A',1],['B',7]]"),
    K("{'changes.account':1,'changes.seqId':1}",
      "{'changes':[{'account':'A','seqId':1},{'account':'B'}]}",
      "[['A',1],['B',null]]"),
    K("{'changes.account':1,'changes.seqId':1}",
      "{'changes':[{'account':'A','seqId':1},{'account':'A','seqId':1}]}",
      "[['A',1]]"),
    K("{'changes.account':1,'changes.seqId':1}", "{'changes':[]}",
      "[[null,null]]"),
    K("{'changes.account':1,'changes.seqId':1}", "{'changes':[5,{'seqId':2}]}",
      "[[null,null],[null,2]]"),
    K("{'changes.account':1,'changes.seqId':1}",
      "{'changes':{'account':'A','seqId':3}}", "[['A',3]]"),
    K("{'t':1,'changes.account':1,'changes.seqId':-1}",
      "{'t':'x','changes':[{'account':'A','seqId':1},"
      "{'account':'B','seqId':2}]}",
      "[['x','A',1],['x','B',2]]"),
    K("{'a.b':1,'a.c':1}", "{'a':{'b':[1,2],'c':5}}", "[[1,5],[2,5]]"),
    K("{'a':1,'a.b':1}", "{'a':[{'b':1},{'b':2}]}",
      "[[{'b':1},1],[{'b':2},2]]"),
    K("{'a.b':1,'a.c':1}", "{'a':[{'b':[1,2],'c':3}]}", "[[1,3],[2,3]]"),
    K("{'a.x':1,'a.y.z':1}", "{'a':[{'x':1,'y':[{'z':1},{'z':2}]},{'x':2}]}",
      "[[1,1],[1,2],[2,null]]"),
    /* an array met by one path only, not the other */
    K("{'a.b':1,'c':1}", "{'a':[{'b':1},{'b':2}],'c':{'d':[1]}}",
      "[[1,{'d':[1]}],[2,{'d':[1]}]]"),
    /* sparse */
    KS("{'a':1}", "{'b':1}", "[]"),
    KS("{'a':1}", "{}", "[]"),
    KS("{'a':1}", "{'a':null}", "[[null]]"),
    KS("{'a':1}", "{'a':[]}", "[[[]]]"),
    KS("{'a':1}", "{'a':[1,2]}", "[[1],[2]]"),
    KS("{'a':1,'b':1}", "{'b':1}", "[[null,1]]"),
    KS("{'a':1,'b':1}", "{'c':1}", "[]"),
    KS("{'a.b':1}", "{'a':[{'c':1}]}", "[]"),
    KS("{'a.b':1}", "{'a':[]}", "[]"),
    KS("{'a.b':1}", "{'a':5}", "[]"),
    KS("{'a.b':1}", "{'a':[{'b':1},{'c':1}]}", "[[1],[null]]"),
    K("{'a.b':1}", "{'a':[{'c':1}]}", "[[null]]"),
    /* parallel arrays */
    KERR("{'a':1,'b':1}", "{'a':[1,2],'b':[3,4]}", "parallel arrays [a] [b]"),
    KERR("{'a.b':1,'a.c':1}", "{'a':{'b':[1],'c':[2]}}",
         "parallel arrays [a.b] [a.c]"),
    KERR("{'a.b':1,'a.c':1}", "{'a':[{'b':[1],'c':[2]}]}",
         "parallel arrays [a.b] [a.c]"),
    KERR("{'a.b':1,'c':1}", "{'a':[{'b':1},{'b':2}],'c':[1]}",
         "parallel arrays [a] [c]"),
    KERR("{'x':1,'a.b':1,'c':1}", "{'x':[1],'a':{'b':1},'c':[1]}",
         "[x] [c]"),
    KERR("{'a':1,'b':1}", "{'a':[],'b':[]}", "parallel"),
};

#define KEY_CASES_N (sizeof key_cases / sizeof key_cases[0])

#endif
