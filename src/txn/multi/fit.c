/* fit.c -- what a commit checks before it writes anything
 * (docs/transactions.md): that each write fits the store while in flight
 * and passes its collection's rules as its roll forward will be judged
 * (found after the commit point, the document kept a committed intent
 * for good), and the exact conditions of the 1PC path ("The 1PC path").
 * commit.c calls them; no store write here. */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/multi/multi.h"
#include "util/err.h"

/* 1 when no top-level value of body is an array: the 1PC filter names
 * each value read exactly (dtx__txn_exact below), which an array's $eq
 * does not ($eq [1,2] also matches [[1,2],3]). */
int dtx__txn_no_arrays(const json_t *body) {
  const char *n;
  json_t *v;
  json_object_foreach((json_t *)body, n, v) if (json_is_array(v)) return 0;
  return 1;
}

/* The 1PC filter's condition for a field read as v (not an array): v
 * exactly.  $eq alone also matches an array holding v, and, for null, a
 * missing field: a plain write that changed a field read so slipped
 * under the commit. */
json_t *dtx__txn_exact(const json_t *v) {
  json_t *c = json_pack("{s:O,s:{s:s}}", "$eq", v, "$not", "$type", "array");
  if (c && json_is_null(v) && json_object_set_new(c, "$exists", json_true())) {
    json_decref(c);
    c = NULL;
  }
  return c;
}

/* r NULL: the documents the commit stores for k's write fit the store's
 * limits (dtx__doc_check_write: depth, size); r set: its next version
 * passes rules r (dtx__txn_rules_fit, after the limits were checked,
 * which it does not repeat).  Its intent holds the new body
 * under _txn.w.doc, and the version it rolls forward to the replaced
 * body under _txn.p.doc -- three levels below the top, beside the other
 * body.  Checked before anything is written: a body of 98 to 100 levels
 * (a plain insert takes it) failed the prewrite after the record was
 * written, or -- the new body shallower -- the roll forward after the
 * commit point, for good: the document held a committed intent no one
 * could roll forward, so every reader failed and recovery too. */
int dtx__txn_fits(dtx_txn_t *t, const dtx__txn_key_t *k,
                  const dtx__rules_t *r) {
  const json_t *next = k->op == KEY_PUT ? k->next : NULL;
  json_t *w = json_pack("{s:s,s:I,s:s}", "id", t->id, "ts",
                        (json_int_t)t->start_ts, "op",
                        dtx__txn_op_name(k->op));
  json_t *in = k->stored_body ? json_copy(k->stored_body) : json_object();
  json_t *ver =
      dtx__txn_version_doc(k->id, next, 1, t->id, k->v, k->stored_body);
  int rc = !w || !in || !ver ||
                   (next && json_object_set(w, "doc", (json_t *)next)) ||
                   json_object_set(in, "_id", k->id) ||
                   json_object_set_new(in, DTX__TXN_FIELD,
                                       json_pack("{s:O}", "w", w))
               ? DTX_ENOMEM
               : 0;
  if (rc == 0 && !r)
    rc = dtx__doc_check_write(NULL, k->coll, NULL, in, 1);
  if (rc == 0 && !r)
    rc = dtx__doc_check_write(NULL, k->coll, NULL, ver, 1);
  if (rc == 0 && r) /* as the store judges the roll forward */
    rc = dtx__kit_judge(r, "txn.apply", k->coll, in, ver);
  json_decref(w);
  json_decref(in);
  json_decref(ver);
  if (rc) {
    char *s = json_dumps(k->id, JSON_COMPACT | JSON_ENCODE_ANY);
    rc = r ? dtx__err_wrap(rc, "txn %s: %s %s: its next version is refused "
                               "by the collection's rules",
                           t->id, k->coll, s ? s : "?")
           : dtx__err_wrap(rc, "txn %s: %s %s: the write does not fit "
                               "while in flight (its intent and its "
                               "previous version hold a body each, three "
                               "levels down)",
                           t->id, k->coll, s ? s : "?");
    free(s);
  }
  return rc;
}

/* Each write's next version passes its collection's rules (a user's
 * validator, transition rules) as the store will judge its roll forward:
 * checked before the record is written.  The store judges the roll
 * forward after the commit point; refused there, the document kept a
 * committed intent for good -- its readers, recovery and plain writes
 * all failed on it -- while the transaction's other writes landed.  (A
 * 1PC commit is one update the store judges: refused, nothing is
 * written.)  One rules read per collection written. */
int dtx__txn_rules_fit(dtx_txn_t *t) {
  for (size_t i = 0; i < t->nkeys; i++) {
    const char *coll = t->keys[i].coll;
    size_t j;
    if (!t->keys[i].op)
      continue;
    for (j = 0; j < i; j++)
      if (t->keys[j].op && strcmp(t->keys[j].coll, coll) == 0)
        break;
    if (j < i)
      continue; /* judged with the first key of its collection */
    json_t *spec = NULL;
    dtx__rules_t *r = NULL;
    int rc = dtx_store_get_rules(t->st, coll, &spec);
    if (rc == 0) {
      json_object_del(spec, "pattern");
      rc = dtx__rules_compile(spec, &r);
    }
    json_decref(spec);
    for (j = i; rc == 0 && r && j < t->nkeys; j++)
      if (t->keys[j].op && strcmp(t->keys[j].coll, coll) == 0)
        rc = dtx__txn_fits(t, &t->keys[j], r);
    dtx__rules_free(r);
    if (rc)
      return rc;
  }
  return 0;
}
