/* commit.c -- the commit protocol of multi-document transactions
 * (Percolator / Cherry Garcia over one conditional single-document
 * update), intent resolution by readers, and the outcome of an id.  The
 * design, with the reasons, is docs/transactions.md.
 *
 *   begin: S = the clock, read (not ticked: txn.c clock_read says why);
 *   reads; writes buffered in the handle
 *   commit:
 *     one document put, no caller id, nothing else locked or validated
 *     (1PC):  C = tick; ONE conditional update (the body read) -> committed
 *     otherwise:
 *       record (pending, its keys) --prewrite every key (serializable:
 *       lock every read, absent too)--> C = tick --validate finds-->
 *          |                  |fails                  |
 *          |                  v                       v
 *          |            aborted --clear--> (gone)   committed(C)   <- COMMIT POINT
 *          |               ^                          |
 *          +--lease lapsed-+ (a reader, recover)      +--apply every key--> applied
 *
 *   transition                           function                fault point
 *   snapshot S: the clock read (begin)   clock_read() (txn.c)     txn.clock
 *   commit timestamp: one tick           dtx__txn_tick()          txn.clock
 *   read a document                      dtx__txn_read_clean()    txn.read
 *   record inserted, pending             commit_2pc()             txn.record
 *   intent or lock on a key              prewrite()               txn.prewrite
 *   read-only serializable validation    validate_reads()         txn.validate
 *   pending -> committed                 commit_2pc()             txn.commit
 *   one-document commit (1PC)            commit_1pc()             txn.commit1
 *   key rolled forward                   dtx__txn_roll_forward()  txn.apply
 *   record marked applied                commit_2pc(), recover    txn.applied
 *   pending -> aborted, or a fence       dtx__txn_abort_record()  txn.abort
 *   aborted intent removed               dtx__txn_clear()         txn.clear
 *   finished record deleted              recover()                txn.gc
 *   previous version removed (horizon)   gc_one()                 txn.gc.version
 *   tombstone deleted (horizon)          gc_one()                 txn.gc.tombstone
 *
 * Invariants (docs/transactions.md, "Invariants"):
 *  T1 A document's body is always a committed version; an intent's body
 *     is visible to others only once its record is committed.
 *  T2 At most one intent per document, written only on "no intent" and
 *     the version read (first committer wins).
 *  T3 pending -> committed and pending -> aborted are both conditioned
 *     on pending: exactly one happens; another party aborts only after
 *     the lease lapsed.
 *  T4 Every intent is written before the commit timestamp is taken, so a
 *     reader at S >= C meets the intent or the rolled-forward body.
 *  T5 A key rolls forward only from an intent of a committed record, to
 *     v = C, keeping the replaced body as p; idempotent (conditioned
 *     on the intent and the version under it; the committer's own from
 *     the document its prewrite returned, not read again).
 *  T6 Versions on a document only increase.
 *  T7 A record is deleted only once none of its keys holds its intent.
 *  T8 No plain write changes a document holding an intent or a
 *     tombstone, or _txn.
 *  T9 A record names its keys before any prewrite; an intent whose
 *     record is aborted or missing (fenced) is cleared by whoever meets
 *     it (readers, prewrites, recovery's sweep of the intents index).
 *  T10 Serializable: every document read, absent ones too (a stub
 *     lock), is locked or validated at its version; a find that saw all
 *     its matches is validated again after the locks and C.
 *  T11 No transaction reads or commits past its maximum age (at most
 *     DTX__TXN_MAX_AGE_MS after begin); a previous version or a tombstone
 *     is collected only once its replacement was written more than that
 *     plus a clock margin ago, by one step conditioned on the version, t
 *     and no intent: a reader that would have needed it is too old. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/multi/multi.h"
#include "util/err.h"

const char *dtx__txn_op_name(int op) {
  return op == KEY_PUT ? "put" : op == KEY_DEL ? "del" : "lock";
}

/* {"_txn.v": v} or, for a document without a version, its absence. */
static int add_vcond(json_t *filter, int has_v, int64_t v) {
  json_t *c = has_v ? json_integer(v) : json_pack("{s:b}", "$exists", 0);
  return c && !json_object_set_new(filter, DTX__TXN_FIELD ".v", c)
             ? 0
             : DTX_ENOMEM;
}

/* The document that replaces (coll, id) when a version C by tid lands:
 * body (NULL: a deletion, a tombstone), with the previous version kept
 * (prev NULL: absent). */
json_t *dtx__txn_version_doc(const json_t *id, const json_t *body,
                             int64_t c, const char *tid, int64_t prev_v,
                             const json_t *prev) {
  json_t *d = body ? json_copy((json_t *)body) : json_object();
  json_t *m = json_pack("{s:I,s:I,s:s,s:{s:I,s:O}}", "v", (json_int_t)c, "t",
                        (json_int_t)dtx__now_ms(), "by", tid, "p", "v",
                        (json_int_t)prev_v, "doc",
                        prev ? prev : json_null());
  if (!d || !m || json_object_set(d, "_id", (json_t *)id) ||
      (!body && json_object_set_new(m, "del", json_true())) ||
      json_object_set_new(d, DTX__TXN_FIELD, m)) {
    json_decref(d);
    return NULL;
  }
  return d;
}

/* The stored document of (coll, id) as it is, any intent on it; NULL
 * when none. */
static int read_raw(dtx__exec_t *ex, const char *coll, const json_t *id,
                    json_t **out) {
  json_t *q = json_pack("{s:O}", "_id", id), *arr = NULL;
  int rc = q ? dtx__kit_find_n(ex, coll, q, NULL, 1, &arr) : DTX_ENOMEM;
  json_decref(q);
  *out = rc ? NULL : json_incref(json_array_get(arr, 0));
  json_decref(arr);
  return rc;
}

static const char *intent_of(const json_t *d) {
  return dtx__str(json_object_get(dtx__txn_meta(d), "w"), "id");
}

/* 1 when d holds tid's intent. */
static int w_of(const json_t *d, const char *tid) {
  const char *w = intent_of(d);
  return w && strcmp(w, tid) == 0;
}

/* ---- resolving an intent (T3, T5) ------------------------------------------ */

/* Rolls (coll, id) forward from d, the document holding tid's intent:
 * read just now, or as tid's own prewrite left it.  The update is
 * conditioned on the intent AND the version d carries, so a d that is not
 * the stored state any more (rolled forward meanwhile) changes nothing;
 * while the intent is there nothing else changes the document (T2: no
 * other intent; T8: no plain write; its record is committed, so no
 * clear). */
static int roll_forward_doc(dtx__exec_t *ex, const char *coll,
                            const json_t *id, const char *tid,
                            int64_t commit_ts, const json_t *d) {
  json_t *upd = NULL;
  int rc = 0;
  const json_t *m = dtx__txn_meta(d), *wi = json_object_get(m, "w");
  const char *op = dtx__str(wi, "op");
  const json_t *jv = json_object_get(m, "v");
  if (op && strcmp(op, "lock") == 0) {
    /* A lock changes no version: released like an aborted intent (the
     * stub of an absent document read is deleted). */
    return dtx__txn_clear(ex, coll, id, tid);
  } else {
    int64_t pv = json_is_integer(jv) ? json_integer_value(jv) : 0;
    json_t *prev = json_is_true(json_object_get(m, "del"))
                       ? NULL
                       : dtx__txn_body(d);
    const json_t *nb = json_object_get(wi, "doc");
    if (op && strcmp(op, "put") == 0 && !json_is_object(nb))
      rc = dtx__err(DTX_ESTATE, "txn %s: the intent on a %s document holds "
                                "no body",
                    tid, coll);
    else
      upd = dtx__txn_version_doc(id, op && strcmp(op, "put") == 0 ? nb : NULL,
                        commit_ts, tid, pv, prev);
    json_decref(prev);
  }
  if (rc)
    return rc;
  json_t *f = json_pack("{s:O,s:s}", "_id", id, DTX__TXN_FIELD ".w.id", tid);
  if (!f || !upd || add_vcond(f, jv != NULL, json_integer_value(jv))) {
    json_decref(f);
    json_decref(upd);
    return DTX_ENOMEM;
  }
  int matched = 0;
  return dtx__kit_update(ex, "txn.apply", coll, f, upd,
                         &matched); /* nothing matched: rolled forward
                                       meanwhile */
}

int dtx__txn_roll_forward(dtx__exec_t *ex, const char *coll, const json_t *id,
                          const char *tid, int64_t commit_ts) {
  json_t *d = NULL;
  int rc = read_raw(ex, coll, id, &d);
  const char *w = rc ? NULL : intent_of(d);
  if (rc == 0 && w && strcmp(w, tid) == 0)
    rc = roll_forward_doc(ex, coll, id, tid, commit_ts, d);
  json_decref(d);
  return rc;
}

int dtx__txn_clear(dtx__exec_t *ex, const char *coll, const json_t *id,
                   const char *tid) {
  json_t *d = NULL;
  int rc = read_raw(ex, coll, id, &d);
  const char *w = rc ? NULL : intent_of(d);
  if (rc || !w || strcmp(w, tid) != 0) {
    json_decref(d);
    return rc;
  }
  const json_t *m = dtx__txn_meta(d);
  int stub = !json_object_get(m, "v") && json_is_true(json_object_get(m, "del"));
  json_decref(d);
  if (stub) { /* an insert's stub: no version ever lived there */
    int64_t n = 0;
    rc = dtx__kit_delete(ex, "txn.clear", coll,
                         json_pack("{s:O,s:s}", "_id", id,
                                   DTX__TXN_FIELD ".w.id", tid),
                         &n);
    if (rc != DTX_EVALIDATION) /* the user's delete guard: keep a tombstone */
      return rc;
  }
  int matched = 0;
  return dtx__kit_update(
      ex, "txn.clear", coll,
      json_pack("{s:O,s:s}", "_id", id, DTX__TXN_FIELD ".w.id", tid),
      json_pack("{s:{s:s}}", "$unset", DTX__TXN_FIELD ".w", ""), &matched);
}

int dtx__txn_abort_record(dtx__exec_t *ex, const char *tid, int lapsed) {
  for (int round = 0; round < 3; round++) {
    int64_t now = dtx__now_ms();
    json_t *f = json_pack("{s:s,s:s}", "_id", tid, "state", "pending");
    if (f && lapsed)
      json_object_set_new(f, "lease_until", json_pack("{s:I}", "$lt",
                                                      (json_int_t)now));
    int matched = 0;
    int rc = dtx__kit_update(
        ex, "txn.abort", DTX__TXN_RECORDS, f,
        json_pack("{s:{s:s,s:I}}", "$set", "state", "aborted", "updated",
                  (json_int_t)now),
        &matched);
    if (rc || matched)
      return rc;
    json_t *r = NULL;
    rc = dtx__kit_get(ex, DTX__TXN_RECORDS, tid, &r);
    if (rc == 0) {
      rc = dtx__state_is(r, "aborted") ? 0 : DTX_ENOMATCH;
      json_decref(r);
      return rc;
    }
    if (rc != DTX_ENOTFOUND)
      return rc;
    /* No record: fence the id, so a commit that has not yet inserted its
     * record never does (docs/transactions.md, "Outcome"); applied and
     * cleared: nothing to finish, never collected.  Once a record was
     * ever collected (the marker), the id may be a collected one: the
     * fence says the outcome is unknown. */
    json_t *mark = NULL;
    rc = dtx__kit_get(ex, DTX__TXN_CLOCK, DTX__TXN_GC_MARK, &mark);
    json_decref(mark);
    if (rc && rc != DTX_ENOTFOUND)
      return rc;
    json_t *fence = json_pack(
        "{s:s,s:s,s:b,s:b,s:b,s:b,s:I,s:[],s:n,s:I,s:I,s:I,s:I}", "_id", tid,
        "state", "aborted", "fence", 1, "unknown", rc == 0, "applied", 1,
        "cleared", 1, "start_ts", (json_int_t)0, "keys", "owner",
        "lease_until", (json_int_t)0, "epoch", (json_int_t)0, "updated",
        (json_int_t)now, "created", (json_int_t)now);
    rc = fence ? dtx__kit_insert(ex, "txn.abort", DTX__TXN_RECORDS, fence)
               : DTX_ENOMEM;
    json_decref(fence);
    if (rc != DTX_EDUPKEY)
      return rc; /* a record appeared meanwhile: judge it again */
  }
  return dtx__err(DTX_EUNAVAILABLE, "txn %s: its record kept changing while "
                                    "it was aborted",
                  tid);
}

/* 1 when record r names (coll, id) among its keys (T9). */
int dtx__txn_names_key(const json_t *r, const char *coll, const json_t *id) {
  size_t i;
  json_t *k;
  json_array_foreach(json_object_get(r, "keys"), i, k) if (
      dtx__str(k, "c") && strcmp(dtx__str(k, "c"), coll) == 0 &&
      dtx__value_cmp(json_object_get(k, "id"), id) == 0) return 1;
  return 0;
}

int dtx__txn_resolve(dtx__exec_t *ex, const char *coll, const json_t *doc) {
  const char *tid = intent_of(doc);
  const json_t *id = json_object_get(doc, "_id");
  json_t *r = NULL;
  if (!tid)
    return dtx__err(DTX_ESTATE, "txn: a %s document's intent names no "
                                "transaction",
                    coll);
  int rc = dtx__kit_get(ex, DTX__TXN_RECORDS, tid, &r);
  if (rc == 0 && !dtx__txn_names_key(r, coll, id)) {
    /* Not T's: its record names every key it may write before its first
     * prewrite (T9).  A plain insert into a collection no transaction
     * had written yet (no rule there) can carry such an intent; rolled
     * forward, it added a write to a committed transaction. */
    json_decref(r);
    return dtx__txn_clear(ex, coll, id, tid);
  }
  if (rc == DTX_ENOTFOUND) { /* never had a record, or one long collected */
    rc = dtx__txn_abort_record(ex, tid, 0);
    if (rc == DTX_ENOMATCH)
      return 0; /* it has one now: read again */
    return rc ? rc : dtx__txn_clear(ex, coll, id, tid);
  }
  if (rc)
    return rc;
  if (dtx__state_is(r, "committed")) {
    int64_t c = dtx__int(r, "commit_ts");
    json_decref(r);
    return dtx__txn_roll_forward(ex, coll, id, tid, c);
  }
  if (dtx__state_is(r, "aborted")) {
    json_decref(r);
    return dtx__txn_clear(ex, coll, id, tid);
  }
  int live = dtx__int(r, "lease_until") >= dtx__now_ms();
  json_decref(r);
  if (live)
    return 1;
  rc = dtx__txn_abort_record(ex, tid, 1);
  if (rc == DTX_ENOMATCH)
    return 0; /* committed meanwhile: read again */
  return rc ? rc : dtx__txn_clear(ex, coll, id, tid);
}

/* ---- commit -------------------------------------------------------------------- */

static int conflict(dtx_txn_t *t, const dtx__txn_key_t *k, const char *why) {
  char *s = json_dumps(k->id, JSON_COMPACT | JSON_ENCODE_ANY);
  int rc = dtx__err(DTX_ECONFLICT, "txn %s: %s %s: %s", t->id, k->coll,
                    s ? s : "?", why);
  free(s);
  return rc;
}

/* The filter of a write based on k: its _id, no intent, the version read
 * (T2). */
static json_t *base_filter(const dtx__txn_key_t *k) {
  json_t *f = json_pack("{s:O,s:{s:b}}", "_id", k->id, DTX__TXN_FIELD ".w",
                        "$exists", 0);
  if (f && add_vcond(f, k->has_v, k->v)) {
    json_decref(f);
    return NULL;
  }
  return f;
}

/* 1 when no top-level name of o has a '.' or starts with '$': the 1PC
 * update names the fields as paths. */
static int plain_names(const json_t *o) {
  const char *n;
  json_t *v;
  json_object_foreach((json_t *)o, n, v) if (strchr(n, '.') || n[0] == '$')
      return 0;
  return 1;
}

/* The 1PC path: ONE conditional update of the one document written.  Its
 * filter holds the body read, field by field ($eq), and the absence of
 * every field the new body adds; the update sets the fields that change,
 * unsets those removed, and sets _txn.  So a plain write since the read
 * that changed or removed a field read, or added one this transaction
 * sets, is a conflict, and one that only added another field keeps it
 * (serialized after this transaction): never overwritten unseen
 * (docs/transactions.md, "The 1PC path"). */
static int commit_1pc(dtx_txn_t *t, dtx__txn_key_t *k) {
  int64_t c = 0;
  int rc = dtx__txn_tick(&t->ex, &c);
  if (rc)
    return rc;
  json_t *doc = dtx__txn_version_doc(k->id, k->next, c, t->id, k->v, k->view);
  if (!doc)
    return DTX_ENOMEM;
  if (k->stored) {
    json_t *f = base_filter(k), *set = json_object(), *unset = json_object();
    const char *name;
    json_t *v;
    int bad = !f || !set || !unset;
    json_object_foreach(k->stored_body, name, v) {
      if (bad || strcmp(name, "_id") == 0)
        continue;
      bad = json_object_set_new(f, name, dtx__txn_exact(v)) ||
            (!json_object_get(k->next, name) &&
             json_object_set_new(unset, name, json_string("")));
    }
    json_object_foreach(k->next, name, v) {
      if (bad || strcmp(name, "_id") == 0)
        continue;
      const json_t *was = json_object_get(k->stored_body, name);
      if (!was)
        bad = json_object_set_new(f, name, json_pack("{s:b}", "$exists", 0));
      if (!bad && (!was || !json_equal(was, v)))
        bad = json_object_set(set, name, v);
    }
    if (!bad)
      bad = json_object_set(set, DTX__TXN_FIELD,
                            json_object_get(doc, DTX__TXN_FIELD));
    json_t *upd = bad ? NULL : json_pack("{s:O}", "$set", set);
    if (upd && json_object_size(unset) &&
        json_object_set(upd, "$unset", unset)) {
      json_decref(upd);
      upd = NULL;
    }
    json_decref(set);
    json_decref(unset);
    int matched = 0;
    if (f && upd) {
      rc = dtx__kit_update(&t->ex, "txn.commit1", k->coll, f, upd, &matched);
    } else {
      json_decref(f);
      json_decref(upd);
      rc = DTX_ENOMEM;
    }
    if (rc == 0 && !matched)
      rc = DTX_ENOMATCH;
  } else {
    rc = dtx__kit_insert(&t->ex, "txn.commit1", k->coll, doc);
    if (rc == DTX_EDUPKEY)
      rc = DTX_ENOMATCH;
  }
  json_decref(doc);
  if (rc && rc != DTX_ENOMATCH) { /* no record to ask: the document tells */
    char *s = json_dumps(k->id, JSON_COMPACT | JSON_ENCODE_ANY);
    rc = dtx__err_wrap(rc, "txn %s: the outcome of its one write is unknown: "
                           "it committed iff %s %s holds _txn.by %s and "
                           "_txn.v %lld (give an id to ask doctx txn show)",
                       t->id, k->coll, s ? s : "?", t->id, (long long)c);
    free(s);
    return rc;
  }
  if (rc == DTX_ENOMATCH) { /* lost, or our own write after a lost reply */
    json_t *d = NULL;
    rc = read_raw(&t->ex, k->coll, k->id, &d);
    const json_t *m = dtx__txn_meta(d);
    if (rc == 0 && !(dtx__str_is(m, "by", t->id) && dtx__int(m, "v") == c))
      rc = conflict(t, k, "written by another since it was read");
    json_decref(d);
  }
  return rc;
}

/* Writes k's intent (or, op KEY_NONE, its read lock), conditioned on the
 * version read; the body stored must still be the body read. */
static int prewrite(dtx_txn_t *t, dtx__txn_key_t *k) {
  if (!k->latest)
    return conflict(t, k, "a newer version was committed after the "
                          "snapshot");
  json_t *intent = json_pack("{s:s,s:I,s:s}", "id", t->id, "ts",
                             (json_int_t)t->start_ts, "op",
                             dtx__txn_op_name(k->op));
  if (!intent || (k->op == KEY_PUT &&
                  json_object_set(intent, "doc", k->next))) {
    json_decref(intent);
    return DTX_ENOMEM;
  }
  k->prewritten = 1; /* from here on an abort clears it */
  json_t *out = NULL;
  int rc;
  for (int round = 0;; round++) {
    if (k->stored) {
      json_t *f = base_filter(k);
      rc = f ? dtx__kit_modify(
                   &t->ex, "txn.prewrite", k->coll, f,
                   json_pack("{s:{s:O}}", "$set", DTX__TXN_FIELD ".w", intent),
                   NULL, &out)
             : DTX_ENOMEM;
    } else {
      json_t *stub = json_pack("{s:O,s:{s:b,s:I,s:O}}", "_id", k->id,
                               DTX__TXN_FIELD, "del", 1, "t",
                               (json_int_t)dtx__now_ms(), "w", intent);
      rc = stub ? dtx__kit_insert(&t->ex, "txn.prewrite", k->coll, stub)
                : DTX_ENOMEM;
      if (rc == 0)
        out = json_incref(stub);
      json_decref(stub);
      if (rc == DTX_EDUPKEY)
        rc = DTX_ENOMATCH;
    }
    if (rc != DTX_ENOMATCH)
      break;
    /* Ours after a lost reply, or someone else's intent or version. */
    rc = read_raw(&t->ex, k->coll, k->id, &out);
    const char *w = rc ? NULL : intent_of(out);
    if (rc || (w && strcmp(w, t->id) == 0))
      break;
    if (!w || round > 0) {
      rc = conflict(t, k, w ? "another transaction holds it"
                            : "written by another since it was read");
      break;
    }
    /* A finished transaction's intent: resolve it once and try again
     * (an aborted one leaves the version we read). */
    rc = dtx__txn_resolve(&t->ex, k->coll, out);
    json_decref(out);
    out = NULL;
    if (rc) {
      rc = rc == 1 ? conflict(t, k, "another transaction holds it") : rc;
      break;
    }
  }
  json_decref(intent);
  if (rc == 0 && k->stored) {
    json_t *b = dtx__txn_body(out);
    if (!b)
      rc = DTX_ENOMEM;
    else if (!json_equal(b, k->stored_body))
      rc = conflict(t, k, "changed by a plain write since it was read");
    json_decref(b);
  }
  json_decref(k->written);
  k->written = rc == 0 && out && (w_of(out, t->id)) ? json_incref(out) : NULL;
  json_decref(out);
  return rc;
}

/* Aborts t's record and clears the intents it wrote (best effort:
 * readers and recovery clear what is left). */
static void abort_all(dtx_txn_t *t) {
  if (dtx__txn_abort_record(&t->ex, t->id, 0))
    return;
  for (size_t i = 0; i < t->nkeys; i++)
    if (t->keys[i].prewritten)
      (void)dtx__txn_clear(&t->ex, t->keys[i].coll, t->keys[i].id, t->id);
}

/* A key the commit writes or locks. */
static int in_commit(const dtx_txn_t *t, const dtx__txn_key_t *k) {
  if (k->op)
    return 1;
  /* serializable: every document read, an absent one too (its lock is
   * a stub that holds the _id, so no insert slips in) */
  return t->isolation == DTX_TXN_SERIALIZABLE && k->used &&
         dtx__txn_break() != DTX__TXN_BREAK_READLOCK /* test-only */;
}

/* The plain-write rule on a collection transactions write (T8).  A
 * tombstone is not updated plainly either: that gave a deleted document
 * a body plain readers saw and the next transaction's insert replaced
 * unseen. */
static const char guard_rule[] =
    "{\"pattern\":\"txn\",\"scope\":\"plain\",\"steps\":[\"txn\"],"
    "\"immutable\":[\"" DTX__TXN_FIELD "\"],"
    "\"moves\":[{\"name\":\"no transaction intent, not deleted\","
    "\"from\":{\"" DTX__TXN_FIELD ".w\":{\"$exists\":false},"
    "\"" DTX__TXN_FIELD ".del\":{\"$ne\":true}},\"to\":{}}],"
    "\"insert\":{\"" DTX__TXN_FIELD "\":{\"$exists\":false}},"
    "\"delete\":{\"" DTX__TXN_FIELD ".w\":{\"$exists\":false},"
    "\"" DTX__TXN_FIELD ".del\":{\"$ne\":true}},"
    "\"why\":\"the document holds a transaction's intent or is deleted "
    "(a tombstone), or _txn is doctx's: change it in a transaction "
    "(docs/transactions.md)\"}";

static const char intent_index[] = "{\"" DTX__TXN_FIELD ".w.id\":1}";
/* _txn.t is on a document while it holds garbage (a previous version, or
 * it is a tombstone): recovery's collection reads this sparse index by
 * age, and removes t with what it collects (T11). */
static const char age_index[] = "{\"" DTX__TXN_FIELD ".t\":1}";

/* coll's guard: the rule, the intent index and the age index. */
static int guard_setup(dtx_store_t *st, const void *coll) {
  json_t *keys = json_loads(intent_index, 0, NULL);
  json_t *age = json_loads(age_index, 0, NULL);
  dtx_index_opts_t o = {.sparse = 1, .bypass_validation = 1};
  int rc = dtx__kit_guard_coll(st, coll, guard_rule);
  if (rc == 0)
    rc = keys ? dtx_store_create_index(st, coll, keys, &o, NULL) : DTX_ENOMEM;
  if (rc == 0)
    rc = age ? dtx_store_create_index(st, coll, age, &o, NULL) : DTX_ENOMEM;
  json_decref(keys);
  json_decref(age);
  return rc;
}

int dtx__txn_guard(dtx_store_t *st, const char *coll) {
  /* Once per process, store and catalog generation, as a pattern's
   * set-up (dtx__kit_once): no commit of this process writes an intent
   * before the rule and the indexes exist.  "txn-guard:" is no
   * pattern's name. */
  char name[160];
  snprintf(name, sizeof name, "txn-guard:%s", coll);
  return dtx__kit_once(st, name, guard_setup, coll);
}

int dtx__txn_intents(dtx__exec_t *ex, const char *coll, json_t **out) {
  /* A range over the strings: the planner reads the sparse index, whose
   * entries are exactly the documents holding an intent. */
  json_t *f = json_pack("{s:{s:s}}", DTX__TXN_FIELD ".w.id", "$gte", "");
  int rc = f ? dtx__kit_find(ex, coll, f, NULL, out) : DTX_ENOMEM;
  json_decref(f);
  return rc;
}

/* ---- collecting old versions and tombstones (T11) ---------------------------- */

/* The documents recovery may collect from, per pass: the rest waits for
 * the next pass (bounded work). */
#define GC_BATCH 1000

/* One document d (read through the age index) past the horizon: a
 * tombstone is deleted, a previous version is removed (with t, so it
 * leaves the index).  Each is ONE conditional step on what was read: the
 * same version v and t, no intent -- never a newer version, an intent, or
 * a tombstone an intent (a lock) is on.  *what: 1 version, 2 tombstone,
 * 0 nothing (changed meanwhile). */
static int gc_one(dtx__exec_t *ex, const char *coll, const json_t *d,
                  int *what) {
  const json_t *m = dtx__txn_meta(d), *jv = json_object_get(m, "v");
  const json_t *jt = json_object_get(m, "t");
  *what = 0;
  if (!m || json_object_get(m, "w") || !json_is_integer(jt))
    return 0; /* an intent or a stub being written: its transaction's */
  json_t *f = json_pack("{s:O,s:O,s:{s:b}}", "_id", json_object_get(d, "_id"),
                        DTX__TXN_FIELD ".t", jt, DTX__TXN_FIELD ".w",
                        "$exists", 0);
  if (!f || add_vcond(f, json_is_integer(jv),
                      json_is_integer(jv) ? json_integer_value(jv) : 0)) {
    json_decref(f);
    return DTX_ENOMEM;
  }
  int rc;
  if (json_is_true(json_object_get(m, "del"))) {
    int64_t n = 0;
    json_object_set_new(f, DTX__TXN_FIELD ".del", json_true());
    rc = dtx__kit_delete(ex, "txn.gc.tombstone", coll, json_incref(f), &n);
    if (rc == 0) {
      *what = n ? 2 : 0;
      json_decref(f);
      return 0;
    }
    if (rc != DTX_EVALIDATION) { /* a user's delete guard: keep it */
      json_decref(f);
      return rc;
    }
  }
  int matched = 0;
  rc = dtx__kit_update(ex, "txn.gc.version", coll, f,
                       json_pack("{s:{s:s,s:s}}", "$unset", DTX__TXN_FIELD ".p",
                                 "", DTX__TXN_FIELD ".t", ""),
                       &matched);
  if (rc == 0 && matched)
    *what = 1;
  return rc;
}

int dtx__txn_gc_versions(dtx__exec_t *ex, const char *coll, int64_t now,
                         int64_t *versions, int64_t *tombstones) {
  json_t *docs = NULL, *d;
  size_t i;
  int first = 0;
  *versions = *tombstones = 0;
  /* A range on the sparse age index: only what the horizon passed. */
  json_t *f = json_pack("{s:{s:I}}", DTX__TXN_FIELD ".t", "$lte",
                        (json_int_t)(now - DTX__TXN_GC_AGE_MS));
  int rc = f ? dtx__kit_find_n(ex, coll, f, NULL, GC_BATCH, &docs)
             : DTX_ENOMEM;
  json_decref(f);
  if (rc)
    return rc;
  json_array_foreach(docs, i, d) {
    int what = 0;
    rc = gc_one(ex, coll, d, &what);
    if (rc && !first)
      first = rc;
    *versions += what == 1;
    *tombstones += what == 2;
  }
  json_decref(docs);
  return first;
}

static int guard_colls(dtx_txn_t *t) {
  for (size_t i = 0; i < t->nkeys; i++) {
    if (!t->keys[i].op)
      continue;
    size_t j;
    for (j = 0; j < i; j++)
      if (t->keys[j].op && strcmp(t->keys[j].coll, t->keys[i].coll) == 0)
        break;
    if (j < i)
      continue;
    int rc = dtx__txn_guard(t->st, t->keys[i].coll);
    if (rc)
      return dtx__err_wrap(rc, "txn %s: guarding %s", t->id,
                           t->keys[i].coll);
  }
  return 0;
}

/* Serializable: each find by predicate that saw every match (txn.c
 * records it) matches the same documents now.  A document it may match
 * and did not see -- its committed body matches, or another
 * transaction's intent would make it match -- is a conflict; what it
 * read is locked (our intent) or, read-only, validated by version.
 * Called after every lock is held and C taken: a transaction whose
 * intent is not here yet writes it after this check, so takes its
 * commit timestamp after C
 * and serializes after this one (docs/transactions.md, "Isolation").  A
 * read-only transaction calls it after its reads' validation. */
static int validate_finds(dtx_txn_t *t) {
  size_t i;
  json_t *q;
  json_array_foreach(t->finds, i, q) {
    const char *coll = dtx__str(q, "c");
    const json_t *flt = json_object_get(q, "f");
    dtx__filter_t *f = NULL;
    json_t *cand = NULL, *d;
    int rc = dtx__filter_compile(flt, &f);
    json_t *qq = rc ? NULL
                    : json_pack("{s:[O,{s:{s:b}}]}", "$or", flt,
                                DTX__TXN_FIELD ".w", "$exists", 1);
    if (rc == 0)
      rc = dtx__txn_candidates(t, coll, qq, "validating a find", &cand);
    else
      json_decref(qq);
    size_t j;
    json_array_foreach(cand, j, d) {
      if (rc)
        break;
      const json_t *m = dtx__txn_meta(d), *w = json_object_get(m, "w");
      const char *wid = dtx__str(w, "id");
      if (wid && strcmp(wid, t->id) == 0)
        continue; /* ours: written or locked at the version read */
      const dtx__txn_key_t *k =
          dtx__txn_key_find(t, coll, json_object_get(d, "_id"));
      if (k && k->used)
        continue; /* read: locked, or (read-only) validated by version */
      json_t *b = dtx__txn_body(d);
      int match = b && !json_is_true(json_object_get(m, "del")) &&
                  dtx__filter_match(f, b) == 1;
      json_decref(b);
      const json_t *wd = json_object_get(w, "doc");
      int held = !match && json_is_object(wd) && dtx__filter_match(f, wd) == 1;
      dtx__txn_key_t other = {.coll = (char *)coll,
                              .id = json_object_get(d, "_id")};
      if (match || held)
        rc = conflict(t, &other,
                      held ? "a find's predicate matches a document "
                             "another transaction is writing"
                        : "a document started to match a find's predicate "
                          "(a phantom)");
    }
    json_decref(cand);
    dtx__filter_free(f);
    if (rc)
      return rc;
  }
  return 0;
}

static int commit_2pc(dtx_txn_t *t) {
  int rc0 = dtx__txn_rules_fit(t); /* before the record: see there */
  if (rc0)
    return rc0;
  int64_t now = dtx__now_ms(), c = 0;
  json_t *keys = json_array();
  for (size_t i = 0; keys && i < t->nkeys; i++)
    if (in_commit(t, &t->keys[i]) &&
        json_array_append_new(
            keys, json_pack("{s:s,s:O,s:s}", "c", t->keys[i].coll, "id",
                            t->keys[i].id, "op",
                            dtx__txn_op_name(t->keys[i].op)))) {
      json_decref(keys);
      keys = NULL;
    }
  /* applied and cleared are written false, so recovery finds the
   * records with work through the index {state, applied, cleared}. */
  json_t *rec = keys ? json_pack(
                           "{s:s,s:s,s:b,s:b,s:I,s:o,s:s,s:I,s:I,s:I,s:I}",
                           "_id", t->id, "state", "pending", "applied", 0,
                           "cleared", 0, "start_ts",
                           (json_int_t)t->start_ts, "keys", keys, "owner",
                           t->ex.owner, "lease_until",
                           (json_int_t)(now + t->ex.lease_ms), "epoch",
                           (json_int_t)0, "updated", (json_int_t)now,
                           "created", (json_int_t)now)
                     : NULL;
  int rc = rec ? dtx__kit_insert(&t->ex, "txn.record", DTX__TXN_RECORDS, rec)
               : DTX_ENOMEM;
  json_decref(rec);
  if (rc == DTX_EDUPKEY) { /* ours after a lost reply, or the id is spent */
    json_t *r = NULL;
    rc = dtx__kit_get(&t->ex, DTX__TXN_RECORDS, t->id, &r);
    if (rc == 0 && !(dtx__state_is(r, "pending") &&
                     dtx__int(r, "start_ts") == t->start_ts &&
                     dtx__str_is(r, "owner", t->ex.owner)))
      rc = dtx__err(DTX_ECONFLICT, "txn %s: the id is taken (a record of "
                                   "it exists: another run, or a fence)",
                    t->id);
    json_decref(r);
  }
  if (rc)
    return rc;
  for (size_t i = 0; rc == 0 && i < t->nkeys; i++)
    if (in_commit(t, &t->keys[i]))
      rc = prewrite(t, &t->keys[i]);
  if (rc == 0)
    rc = dtx__txn_tick(&t->ex, &c); /* after every intent: T4 */
  if (rc == 0)
    rc = validate_finds(t); /* under the locks, after C: see there */
  if (rc) {
    abort_all(t);
    return rc;
  }
  int matched = 0;
  rc = dtx__kit_update(
      &t->ex, "txn.commit", DTX__TXN_RECORDS,
      json_pack("{s:s,s:s}", "_id", t->id, "state", "pending"),
      json_pack("{s:{s:s,s:I,s:I}}", "$set", "state", "committed",
                "commit_ts", (json_int_t)c, "updated",
                (json_int_t)dtx__now_ms()),
      &matched);
  if (rc) /* the outcome is unknown: dtx_txn_outcome tells */
    return dtx__err_wrap(rc, "txn %s: the commit's outcome is unknown (ask "
                             "with doctx txn show %s)",
                         t->id, t->id);
  if (!matched) {
    json_t *r = NULL;
    rc = dtx__kit_get(&t->ex, DTX__TXN_RECORDS, t->id, &r);
    int ours = rc == 0 && dtx__state_is(r, "committed") &&
               dtx__int(r, "commit_ts") == c;
    json_decref(r);
    if (rc)
      return rc;
    if (!ours) {
      abort_all(t);
      return dtx__err(DTX_ECONFLICT, "txn %s: aborted by another party "
                                     "before its commit (its lease of %lld "
                                     "ms lapsed)",
                      t->id, (long long)t->ex.lease_ms);
    }
  }
  /* Committed.  Rolling forward is off the commit path: what fails here
   * is finished by readers and recovery (T5). */
  int all = 1;
  for (size_t i = 0; i < t->nkeys; i++) {
    dtx__txn_key_t *k = &t->keys[i];
    /* From the document the prewrite returned: no read (roll_forward_doc
     * says why that is the stored state while our intent is on it). */
    if (k->prewritten &&
        (k->written ? roll_forward_doc(&t->ex, k->coll, k->id, t->id, c,
                                       k->written)
                    : dtx__txn_roll_forward(&t->ex, k->coll, k->id, t->id,
                                            c)))
      all = 0;
  }
  if (all)
    (void)dtx__txn_mark_done(&t->ex, t->id, "committed");
  dtx__err_clear();
  return 0;
}

/* A read-only serializable transaction: every document read is still at
 * the version read, with no intent (docs/transactions.md, "Isolation"). */
static int validate_reads(dtx_txn_t *t) {
  int rc = dtx__kit_point("txn.validate", "validating the reads");
  for (size_t i = 0; rc == 0 && i < t->nkeys; i++) {
    dtx__txn_key_t *k = &t->keys[i];
    json_t *d = NULL;
    if (!k->used)
      continue;
    if (!k->latest)
      return conflict(t, k, "a newer version was committed after the "
                            "snapshot");
    rc = dtx__txn_read_clean(&t->ex, t->id, k->coll, k->id, &d);
    if (rc == 0) {
      const json_t *jv = json_object_get(dtx__txn_meta(d), "v");
      if ((d != NULL) != (k->stored != 0) || (jv != NULL) != (k->has_v != 0) ||
          (jv && json_integer_value(jv) != k->v))
        rc = conflict(t, k, "changed since it was read");
    }
    json_decref(d);
  }
  return rc;
}

int dtx__txn_commit(dtx_txn_t *t) {
  size_t writes = 0, extra = 0;
  dtx__txn_key_t *w = NULL;
  for (size_t i = 0; i < t->nkeys; i++) {
    if (t->keys[i].op) {
      int rc = dtx__txn_fits(t, &t->keys[i], NULL); /* before any write */
      if (rc)
        return rc;
      writes++;
      w = &t->keys[i];
    } else if (in_commit(t, &t->keys[i])) {
      extra++;
    }
  }
  /* With a caller's id, a transaction that writes nothing still writes
   * its record (the record path, no keys but its serializable locks):
   * else dtx_txn_outcome found no record, fenced the id and answered
   * "aborted" for a transaction that had answered committed
   * (docs/transactions.md, "Outcome"). */
  if (writes == 0 && !t->caller_id) {
    int rc = t->isolation == DTX_TXN_SERIALIZABLE ? validate_reads(t) : 0;
    return rc ? rc : validate_finds(t);
  }
  int rc = guard_colls(t);
  if (rc)
    return rc;
  /* 1PC: one document put (a deletion would drop a field a plain write
   * added: it takes the record path), nothing else locked or to validate,
   * no array in the body read (no exact filter for it) (docs/
   * transactions.md, "The 1PC path"). */
  if (writes == 1 && extra == 0 && !t->caller_id && !t->finds &&
      w->op == KEY_PUT && plain_names(w->next) &&
      (!w->stored_body ||
       (plain_names(w->stored_body) && dtx__txn_no_arrays(w->stored_body)))) {
    if (!w->latest)
      return conflict(t, w, "a newer version was committed after the "
                            "snapshot");
    return commit_1pc(t, w);
  }
  return commit_2pc(t);
}

/* ---- the outcome of an id -------------------------------------------------------- */

int dtx_txn_outcome(dtx_store_t *st, const char *id, int *outcome) {
  dtx__call_t c;
  dtx__exec_t ex;
  *outcome = DTX_TXN_UNKNOWN;
  int rc = dtx__check_ident("txn id", id);
  if (rc)
    return rc;
  dtx__call_begin(&c, DTX__TXN_DEADLINE_MS);
  rc = dtx__exec_init(&ex, st, NULL, DTX__TXN_LEASE_MS, DTX__TXN_DEADLINE_MS);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__txn_pattern);
  for (int round = 0; rc == 0 && round < 3; round++) {
    json_t *r = NULL;
    rc = dtx__kit_get(&ex, DTX__TXN_RECORDS, id, &r);
    if (rc == DTX_ENOTFOUND || (rc == 0 && dtx__state_is(r, "pending") &&
                                dtx__int(r, "lease_until") < dtx__now_ms())) {
      json_decref(r);
      rc = dtx__txn_abort_record(&ex, id, rc == 0);
      if (rc == DTX_ENOMATCH || rc == 0) {
        rc = 0;
        continue; /* read it again: it moved meanwhile, or our fence */
      }
      break;
    }
    /* A fence written once records were collected: the id may have
     * committed and been collected; it can no longer commit, but which
     * it was is unknown (docs/transactions.md, "Outcome"). */
    if (rc == 0)
      *outcome = dtx__state_is(r, "committed") ? DTX_TXN_COMMITTED
                 : json_is_true(json_object_get(r, "unknown"))
                     ? DTX_TXN_UNKNOWN
                 : dtx__state_is(r, "aborted") ? DTX_TXN_ABORTED
                                               : DTX_TXN_UNKNOWN;
    json_decref(r);
    break;
  }
  return dtx__call_end(&c, rc);
}
