/* recover.c -- recovery, audit and the pattern table of multi-document
 * transactions (the pattern "txn"; protocol: commit.c's header and
 * docs/transactions.md).
 *
 * Recovery finishes what crashed or stalled transactions left, reading
 * only the records with work (load_work: the index {state, applied,
 * cleared, updated}): a pending record whose lease lapsed is aborted and
 * its intents cleared; a committed record not yet applied has its keys
 * rolled forward; an aborted one has its intents cleared; a finished
 * record (applied, or aborted and cleared) older than the retention is
 * deleted (T7), after the marker txn_clock/gc; then every intent in the
 * collections transactions write is resolved (sweep: through their
 * sparse index on _txn.w.id, one written late by a writer paused before
 * its prewrite), and the previous versions and tombstones past the
 * horizon are collected (T11: the sparse index on _txn.t).  Readers do the same for the one document they meet,
 * so recovery is for the documents nobody reads.
 *
 * The audit reads the records, the clock and, in every collection a
 * record names, the documents holding _txn (one read each):
 *   bad_shape        a record or the clock refused by its validator
 *   shape            a record's fields that do not go with its state
 *                    (record_fits), or a key that is not {c, id, op}
 *   bad_version      a document's _txn not as the steps write it
 *                    (meta_fits), a tombstone holding a body, or its
 *                    version not its writer's commit_ts, or not what its
 *                    writer's key op wrote (a body for a put, ...)
 *   uncommitted_version  a version by a record pending or aborted (T1)
 *   clock_behind     the clock gone or below a timestamp in use (T6)
 *   bad_intent       an intent naming no transaction
 *   leftover_intent  an intent of a committed record marked applied, or
 *                    (with --settled) of an aborted one
 *   orphan_intent    an intent whose transaction has no record (T7)
 *   lost_write       a committed record marked applied whose put or del
 *                    a document does not hold (its version is below)
 *   not_terminal     with --settled: a pending record, or a committed
 *                    one not rolled forward */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/multi/multi.h"
#include "util/err.h"

/* The horizon after which a finished record is collected: its outcome is
 * known to dtx_txn_outcome until then (docs/transactions.md). */
#define GC_HORIZON_MS (24LL * 3600 * 1000)

static int finish_keys(dtx__exec_t *ex, const json_t *r, int commit,
                       int64_t c) {
  const char *tid = dtx__str(r, "_id");
  size_t i;
  json_t *k;
  int first = 0;
  json_array_foreach(json_object_get(r, "keys"), i, k) {
    const char *coll = dtx__str(k, "c");
    const json_t *id = json_object_get(k, "id");
    if (!coll || !id)
      continue;
    int rc = commit ? dtx__txn_roll_forward(ex, coll, id, tid, c)
                    : dtx__txn_clear(ex, coll, id, tid);
    if (rc && !first)
      first = rc;
  }
  return first;
}

/* 1 when coll's rules hold the transactions' plain-write rule: a
 * collection some transaction wrote (dtx__txn_guard). */
static int guarded(dtx_store_t *st, const char *coll) {
  json_t *r = NULL, *e;
  size_t i;
  if (dtx_store_get_rules(st, coll, &r)) {
    dtx__err_clear();
    return 0;
  }
  const json_t *tr = json_object_get(r, "transition");
  int yes = dtx__str_is(tr, "pattern", "txn");
  json_array_foreach(tr, i, e) yes = yes || dtx__str_is(e, "pattern", "txn");
  json_decref(r);
  return yes;
}

/* Every intent left in a collection transactions write is resolved by
 * its record: an intent written late -- by a writer paused before its
 * prewrite while recovery aborted its record and cleared its keys (and
 * marked it cleared, so no later pass reads that record) -- is found
 * this way, as a reader would find it (docs/transactions.md,
 * "Recovery").  It reads the collections' rules and, in each guarded
 * one, the documents its sparse index on _txn.w.id holds: the intents
 * there now, not the collection. */
static void sweep(dtx__exec_t *ex, dtx__tally_t *t) {
  json_t *names = NULL, *n;
  size_t k;
  int rc = dtx__kit_colls(ex->st, &names);
  if (rc) {
    dtx__tally_error(t, NULL, rc);
    return;
  }
  json_array_foreach(names, k, n) {
    const char *coll = json_string_value(n);
    if (!coll || !guarded(ex->st, coll))
      continue;
    json_t *docs = NULL, *d;
    size_t i;
    /* the index exists from this process's first look (a collection
     * guarded before the index did not have it) */
    rc = dtx__txn_guard(ex->st, coll);
    if (rc == 0)
      rc = dtx__txn_intents(ex, coll, &docs);
    if (rc) {
      dtx__tally_error(t, NULL, rc);
      continue;
    }
    json_array_foreach(docs, i, d) {
      rc = dtx__txn_resolve(ex, coll, d);
      if (rc == 0)
        dtx__tally_ran(t, "intents_resolved", 1);
      else if (rc == 1)
        dtx__tally_skip(t, "intent of a pending transaction",
                        json_object_get(d, "_id"));
      else
        dtx__tally_error(t, json_object_get(d, "_id"), rc);
    }
    json_decref(docs);
    /* then the previous versions and tombstones past the horizon (T11),
     * through the sparse index on _txn.t: what it passed, not the rest */
    int64_t nv = 0, nt = 0;
    rc = dtx__txn_gc_versions(ex, coll, dtx__now_ms(), &nv, &nt);
    if (nv)
      dtx__tally_ran(t, "versions_collected", nv);
    if (nt)
      dtx__tally_ran(t, "tombstones_collected", nt);
    if (rc)
      dtx__tally_error(t, NULL, rc);
  }
  json_decref(names);
}

/* The records recovery has work with, through the index {state, applied,
 * cleared, updated}: pending ones, committed ones not applied, aborted
 * ones not cleared, and finished ones not updated since horizon (fences
 * are written applied and cleared: never collected).  Not every record
 * kept for the retention. */
static int load_work(dtx__exec_t *ex, int64_t horizon, json_t **out) {
  json_t *qs[5] = {
      json_pack("{s:s}", "state", "pending"),
      json_pack("{s:s,s:b}", "state", "committed", "applied", 0),
      json_pack("{s:s,s:b,s:b}", "state", "aborted", "applied", 0, "cleared",
                0),
      json_pack("{s:s,s:b,s:b,s:{s:I}}", "state", "committed", "applied", 1,
                "cleared", 0, "updated", "$lte", (json_int_t)horizon),
      json_pack("{s:s,s:b,s:b,s:{s:I}}", "state", "aborted", "applied", 0,
                "cleared", 1, "updated", "$lte", (json_int_t)horizon),
  };
  json_t *all = json_array();
  int rc = all ? 0 : DTX_ENOMEM;
  for (int i = 0; i < 5; i++) {
    json_t *arr = NULL;
    if (rc == 0)
      rc = qs[i] ? dtx__kit_find(ex, DTX__TXN_RECORDS, qs[i], NULL, &arr)
                 : DTX_ENOMEM;
    if (rc == 0 && json_array_extend(all, arr))
      rc = DTX_ENOMEM;
    json_decref(arr);
    json_decref(qs[i]);
  }
  if (rc)
    json_decref(all);
  else
    *out = all;
  return rc;
}

int dtx__txn_mark_done(dtx__exec_t *ex, const char *tid, const char *state) {
  int committed = strcmp(state, "committed") == 0;
  return dtx__kit_update(
      ex, committed ? "txn.applied" : "txn.clear", DTX__TXN_RECORDS,
      json_pack("{s:s,s:s}", "_id", tid, "state", state),
      json_pack("{s:{s:b,s:I}}", "$set", committed ? "applied" : "cleared", 1,
                "updated", (json_int_t)dtx__now_ms()),
      NULL);
}

static int recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                   dtx__tally_t *t) {
  json_t *list = NULL, *r;
  size_t i;
  int64_t now = dtx__now_ms();
  int marked = 0;
  /* The retention of finished records is the jobs' (--retention-ms), not
   * the age that abandons a lease: until then dtx_txn_outcome answers for
   * the id (after it: unknown, see the marker below). */
  int64_t horizon = o->retention_ms > 0 ? o->retention_ms : GC_HORIZON_MS;
  int rc = load_work(ex, now - horizon, &list);
  if (rc)
    return rc;
  json_array_foreach(list, i, r) {
    const char *tid = dtx__str(r, "_id");
    const json_t *jid = json_object_get(r, "_id");
    if (!tid)
      continue;
    if (dtx__state_is(r, "pending")) {
      if (!dtx__kit_abandoned(o, dtx__int(r, "updated"),
                              dtx__int(r, "lease_until"), now)) {
        dtx__tally_skip(t, "lease not expired", jid);
        continue;
      }
      /* older_than_ms may abandon a record under a live lease: abort it
       * unconditionally then (the operator's explicit age). */
      rc = dtx__txn_abort_record(ex, tid, o->older_than_ms < 0);
      if (rc == DTX_ENOMATCH) {
        dtx__tally_skip(t, "committed meanwhile", jid);
        continue;
      }
      if (rc == 0)
        rc = finish_keys(ex, r, 0, 0);
      if (rc == 0)
        dtx__tally_ran(t, "aborted", 1);
    } else if (dtx__state_is(r, "committed") &&
               !json_is_true(json_object_get(r, "applied"))) {
      rc = finish_keys(ex, r, 1, dtx__int(r, "commit_ts"));
      if (rc == 0)
        rc = dtx__txn_mark_done(ex, tid, "committed");
      if (rc == 0)
        dtx__tally_ran(t, "applied", 1);
    } else if (dtx__state_is(r, "aborted") &&
               !json_is_true(json_object_get(r, "cleared"))) {
      rc = finish_keys(ex, r, 0, 0);
      if (rc == 0)
        rc = dtx__txn_mark_done(ex, tid, "aborted");
      if (rc == 0)
        dtx__tally_ran(t, "cleared", 1);
    } else if (now - dtx__int(r, "updated") >= horizon &&
               !json_is_true(json_object_get(r, "fence"))) {
      int64_t n = 0;
      /* Before the first delete: the marker that a record was ever
       * collected, so a missing record is no longer proof that the id
       * never committed (dtx_txn_outcome answers unknown). */
      json_t *mark = marked ? NULL
                            : json_pack("{s:s,s:I}", "_id", DTX__TXN_GC_MARK,
                                        "ts", (json_int_t)1);
      rc = marked ? 0
           : mark ? dtx__kit_insert(ex, "txn.gc", DTX__TXN_CLOCK, mark)
                  : DTX_ENOMEM;
      json_decref(mark);
      if (rc == DTX_EDUPKEY)
        rc = 0;
      marked = rc == 0;
      if (rc == 0)
        rc = dtx__kit_delete(ex, "txn.gc", DTX__TXN_RECORDS,
                           json_pack("{s:s,s:O}", "_id", tid, "state",
                                     json_object_get(r, "state")),
                           &n);
      if (rc == 0 && n)
        dtx__tally_ran(t, "collected", 1);
    } else {
      continue;
    }
    if (rc)
      dtx__tally_error(t, jid, rc);
    rc = 0;
  }
  sweep(ex, t);
  json_decref(list);
  return 0;
}

/* ---- audit ------------------------------------------------------------------ */

/* Every row of tests/crash/tamper.sh's transactions table, written past
 * the rules, is a finding here: the records' validator says one field's
 * type, record_fits what goes with a state (the kit reports it as
 * "shape"), meta_fits a document's _txn, audit() the rest. */

static int key_op(const json_t *v) {
  const char *s = json_string_value(v);
  return s && (!strcmp(s, "put") || !strcmp(s, "del") || !strcmp(s, "lock"));
}

static int is_ts(const json_t *v, int64_t min) {
  return json_is_integer(v) && json_integer_value(v) >= min;
}

/* The shape check of txn_records (dtx__audit_load runs it on every record
 * its validator admits): the fields that go with a state as the steps
 * write them (commit.c): every record has applied and cleared, written
 * false by its insert; only a commit writes commit_ts (after start_ts),
 * then applied; only an abort lets cleared become true; a fence is an
 * aborted record written applied and cleared; and each key. */
static int record_fits(const json_t *r, char *why, size_t n) {
  const char *st = dtx__str(r, "state");
  const json_t *cts = json_object_get(r, "commit_ts"), *k;
  const json_t *ap = json_object_get(r, "applied");
  const json_t *cl = json_object_get(r, "cleared");
  int fence = json_is_true(json_object_get(r, "fence"));
  size_t i;
  if (!st)
    return 0; /* the validator's */
  if (!json_is_integer(json_object_get(r, "created")))
    return dtx__shape_bad(why, n, "created is not an integer");
  if (!json_is_boolean(ap) || !json_is_boolean(cl))
    return dtx__shape_bad(why, n, "applied or cleared is missing (every "
                                  "record is written with both)");
  if (!strcmp(st, "committed") != (cts != NULL))
    return dtx__shape_bad(why, n, "a %s record %s a commit_ts (only the "
                                  "commit writes it)",
                          st, cts ? "has" : "lacks");
  if (json_is_true(ap) && strcmp(st, "committed") && !fence)
    return dtx__shape_bad(why, n, "a %s record is applied (only a "
                                  "committed one, or a fence)",
                          st);
  if (json_is_true(cl) && strcmp(st, "aborted"))
    return dtx__shape_bad(why, n, "a %s record is cleared (only an "
                                  "aborted one)",
                          st);
  if (json_object_get(r, "fence") &&
      (!fence || strcmp(st, "aborted") || !json_is_true(ap) ||
       !json_is_true(cl)))
    return dtx__shape_bad(why, n, "fence is not on an aborted record "
                                  "written applied and cleared");
  if (json_is_integer(cts) &&
      json_integer_value(cts) <= dtx__int(r, "start_ts"))
    return dtx__shape_bad(why, n, "commit_ts %lld is not after start_ts "
                                  "%lld (T6)",
                          (long long)json_integer_value(cts),
                          (long long)dtx__int(r, "start_ts"));
  json_array_foreach(json_object_get(r, "keys"), i, k) {
    const char *c = dtx__str(k, "c");
    const json_t *id = json_object_get(k, "id");
    int bad_c = !c || dtx__coll_check(c) != 0;
    dtx__err_clear();
    if (bad_c)
      return dtx__shape_bad(why, n, "keys.%zu.c is not a collection name",
                            i);
    if (!id || !dtx__id_valid(id))
      return dtx__shape_bad(why, n, "keys.%zu.id is not a document's _id",
                            i);
    if (!key_op(json_object_get(k, "op")))
      return dtx__shape_bad(why, n, "keys.%zu.op is not put, del or lock",
                            i);
  }
  return 0;
}

/* A document's _txn as the steps write it (docs/transactions.md,
 * "Documents under transactions"): a version {v, by, t, p} -- t and p
 * go together, collected together (T11) -- a tombstone's del, an
 * insert's stub {del, t}, an intent w; *top: raised to the highest
 * timestamp it holds.  An intent's id is the intent loop's. */
static int meta_fits(const json_t *m, int64_t *top, char *why, size_t n) {
  if (!json_is_object(m))
    return dtx__shape_bad(why, n, "_txn is not an object");
  const json_t *v = json_object_get(m, "v"), *p = json_object_get(m, "p");
  const json_t *w = json_object_get(m, "w"), *del = json_object_get(m, "del");
  const json_t *t = json_object_get(m, "t");
  if (t && !is_ts(t, 0))
    return dtx__shape_bad(why, n, "_txn.t is not a time in ms");
  if (del && !json_is_true(del))
    return dtx__shape_bad(why, n, "_txn.del is not true");
  if (v) {
    const json_t *pv = json_object_get(p, "v"), *pd = json_object_get(p, "doc");
    if (!is_ts(v, 1))
      return dtx__shape_bad(why, n, "_txn.v is not a timestamp");
    if (!json_is_string(json_object_get(m, "by")))
      return dtx__shape_bad(why, n, "_txn.by is not a transaction id");
    if (!p != !t)
      return dtx__shape_bad(why, n, "_txn has %s without %s (written and "
                                    "collected together)",
                            p ? "p" : "t", p ? "t" : "p");
    if (p && (!is_ts(pv, 0) || json_integer_value(pv) >= json_integer_value(v)))
      return dtx__shape_bad(why, n, "_txn.p.v is not a timestamp below "
                                    "_txn.v (T6)");
    if (p && !json_is_object(pd) && !json_is_null(pd))
      return dtx__shape_bad(why, n, "_txn.p.doc is not a document or null");
    if (json_integer_value(v) > *top)
      *top = json_integer_value(v);
  } else if (p || json_object_get(m, "by")) {
    return dtx__shape_bad(why, n, "_txn has p or by without v");
  } else if (t && !del) {
    return dtx__shape_bad(why, n, "_txn has t without v or del");
  }
  if (w) {
    const json_t *ts = json_object_get(w, "ts"), *op = json_object_get(w, "op");
    const json_t *doc = json_object_get(w, "doc");
    if (!json_is_object(w))
      return dtx__shape_bad(why, n, "_txn.w is not an intent");
    if (!is_ts(ts, 0))
      return dtx__shape_bad(why, n, "_txn.w.ts is not a timestamp");
    if (!key_op(op))
      return dtx__shape_bad(why, n, "_txn.w.op is not put, del or lock");
    if (strcmp(json_string_value(op), "put") ? doc != NULL
                                              : !json_is_object(doc))
      return dtx__shape_bad(why, n, "_txn.w.doc is not the new document of "
                                    "a put (and only of a put)");
    if (json_integer_value(ts) > *top)
      *top = json_integer_value(ts);
  }
  return 0;
}

static int64_t ts_max(int64_t m, const json_t *v) {
  return json_is_integer(v) && json_integer_value(v) > m
             ? json_integer_value(v)
             : m;
}

/* The op record r's keys give (coll, id), NULL when none. */
static const char *key_op_of(const json_t *r, const char *coll,
                             const json_t *id) {
  size_t i;
  json_t *k;
  json_array_foreach(json_object_get(r, "keys"), i, k) {
    if (dtx__str_is(k, "c", coll) &&
        dtx__value_cmp(json_object_get(k, "id"), id) == 0)
      return dtx__str(k, "op");
  }
  return NULL;
}

/* The version a document holds (its _txn): its shape, and the record of
 * the transaction that wrote it -- a version by an aborted or pending
 * record, or at another timestamp than its commit, is a body no commit
 * made.  Fences are skipped: a 1PC id (no record) may be fenced later. */
static void audit_version(dtx__audit_t *a, const char *coll, const char *ids,
                          const json_t *d, const json_t *recs, int64_t *top,
                          char *where, size_t wn) {
  const json_t *m = json_object_get(d, DTX__TXN_FIELD);
  char why[256];
  int64_t was = *top;
  if (meta_fits(m, top, why, sizeof why)) {
    dtx__audit_finding(a, "bad_version", "%s %s: %s", coll, ids, why);
    return;
  }
  if (*top != was)
    snprintf(where, wn, "%s %s", coll, ids);
  /* A tombstone or a stub is {_id, _txn} (version_doc, prewrite's
   * stub): a body beside del is a document transactions read as deleted
   * and plain reads see. */
  int del = json_is_true(json_object_get(m, "del"));
  if (del && json_object_size(d) != 2)
    dtx__audit_finding(a, "bad_version", "%s %s: a tombstone (_txn.del) "
                                         "holds a body",
                       coll, ids);
  const json_t *v = json_object_get(m, "v");
  const char *by = dtx__str(m, "by");
  const json_t *rec = by && v ? json_object_get(recs, by) : NULL;
  if (!rec || json_is_true(json_object_get(rec, "fence")))
    return;
  if (!dtx__state_is(rec, "committed"))
    dtx__audit_finding(a, "uncommitted_version", "%s %s: version %lld "
                                                 "written by txn %s, whose "
                                                 "record is %s",
                       coll, ids, (long long)json_integer_value(v), by,
                       dtx__str(rec, "state") ? dtx__str(rec, "state")
                                              : "?");
  else if (dtx__int(rec, "commit_ts") != json_integer_value(v))
    dtx__audit_finding(a, "bad_version", "%s %s: version %lld written by txn "
                                         "%s, committed at %lld",
                       coll, ids, (long long)json_integer_value(v), by,
                       (long long)dtx__int(rec, "commit_ts"));
  else if (!dtx__txn_names_key(rec, coll, json_object_get(d, "_id")))
    dtx__audit_finding(a, "bad_version", "%s %s: version %lld says txn %s "
                                         "wrote it, whose record does not "
                                         "name it (T9)",
                       coll, ids, (long long)json_integer_value(v), by);
  else {
    /* The version is that record's write: a put lands a body, a del a
     * tombstone, a lock no version at all. */
    const char *op = key_op_of(rec, coll, json_object_get(d, "_id"));
    if (!op || strcmp(op, del ? "del" : "put"))
      dtx__audit_finding(a, "bad_version", "%s %s: version %lld is %s, but "
                                           "txn %s's record names a %s",
                         coll, ids, (long long)json_integer_value(v),
                         del ? "a tombstone" : "a body", by,
                         op ? op : "?");
  }
}

/* A committed record marked applied rolled every key forward: a put's
 * or a del's document holds its version or a later one (versions only
 * rise; one deleted since is not read).  Below: its write was lost --
 * an intent removed past the rules before the roll forward, which then
 * found nothing to do (seen: the versions audit_version read, kept in
 * vers as {coll: {id: v}}). */
static void audit_applied(dtx__audit_t *a, const json_t *recs,
                          const json_t *vers) {
  const char *tid;
  json_t *r;
  json_object_foreach((json_t *)recs, tid, r) {
    size_t i;
    json_t *k;
    if (!dtx__state_is(r, "committed") ||
        !json_is_true(json_object_get(r, "applied")))
      continue;
    json_array_foreach(json_object_get(r, "keys"), i, k) {
      const char *c = dtx__str(k, "c");
      if (!c || dtx__str_is(k, "op", "lock"))
        continue;
      char *ids = json_dumps(json_object_get(k, "id"),
                             JSON_COMPACT | JSON_ENCODE_ANY);
      const json_t *v = ids ? json_object_get(json_object_get(vers, c), ids)
                            : NULL;
      if (json_is_integer(v) &&
          json_integer_value(v) < dtx__int(r, "commit_ts"))
        dtx__audit_finding(a, "lost_write", "txn %s: committed at %lld and "
                                            "marked applied, but %s %s "
                                            "holds version %lld",
                           tid, (long long)dtx__int(r, "commit_ts"), c, ids,
                           (long long)json_integer_value(v));
      free(ids);
    }
  }
}

static int audit(dtx__audit_t *a) {
  json_t *recs = NULL, *r, *colls = json_object(), *vers = json_object();
  const char *tid;
  long long pending = 0, intents = 0;
  int64_t top = 0;
  char where[200] = ""; /* what holds top: named by clock_behind */
  int rc = colls && vers ? dtx__audit_load(a, DTX__TXN_RECORDS, &recs)
                         : DTX_ENOMEM;
  if (rc) {
    json_decref(colls);
    json_decref(vers);
    return rc;
  }
  /* Each record's fields: its validator and record_fits (in
   * dtx__audit_load).  Here: the collections its keys name, the highest
   * timestamp. */
  json_object_foreach(recs, tid, r) {
    if (dtx__state_is(r, "pending")) {
      pending++;
      if (a->flags & DTX_AUDIT_SETTLED)
        dtx__audit_finding(a, "not_terminal", "txn %s is still pending",
                           tid);
    }
    /* Settled: recovery rolled every committed record forward.  One it
     * could not (a roll forward a unique index or the store refuses) is
     * a commit its readers do not see and fail on. */
    if ((a->flags & DTX_AUDIT_SETTLED) && dtx__state_is(r, "committed") &&
        !json_is_true(json_object_get(r, "applied")))
      dtx__audit_finding(a, "not_terminal", "txn %s is committed but not "
                                            "rolled forward (applied false)",
                         tid);
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(r, "keys"), i, k) {
      const char *c = dtx__str(k, "c");
      if (c && dtx__coll_check(c) == 0)
        json_object_set_new(colls, c, json_true());
      dtx__err_clear();
    }
    int64_t was = top;
    top = ts_max(top, json_object_get(r, "start_ts"));
    top = ts_max(top, json_object_get(r, "commit_ts"));
    if (top != was)
      snprintf(where, sizeof where, "%s %s", DTX__TXN_RECORDS, tid);
  }
  /* Every document with _txn in the collections the records name, one
   * read each: its version, and its intent. */
  const char *coll;
  json_t *dummy;
  json_object_foreach(colls, coll, dummy) {
    json_t *docs = NULL, *d;
    size_t i;
    dtx__kit_read_t q = {.coll = coll};
    json_t *f = json_pack("{s:{s:b}}", DTX__TXN_FIELD, "$exists", 1);
    q.filter = f;
    rc = f ? dtx__kit_read(a->st, &q, &docs) : DTX_ENOMEM;
    json_decref(f);
    if (rc) {
      dtx__audit_finding(a, "unreadable", "txn: could not read %s: %s", coll,
                         dtx_strerror(rc));
      rc = 0;
      continue;
    }
    json_array_foreach(docs, i, d) {
      const char *w = dtx__str(json_object_get(dtx__txn_meta(d), "w"), "id");
      char *ids = json_dumps(json_object_get(d, "_id"),
                             JSON_COMPACT | JSON_ENCODE_ANY);
      audit_version(a, coll, ids ? ids : "?", d, recs, &top, where,
                    sizeof where);
      const json_t *v = json_object_get(dtx__txn_meta(d), "v");
      /* for audit_applied: versions only (a document without v may be
       * one deleted and inserted again since, by a plain write) */
      if (ids && json_is_integer(v)) {
        json_t *cv = json_object_get(vers, coll);
        if (!cv && !json_object_set_new(vers, coll, json_object()))
          cv = json_object_get(vers, coll);
        if (cv)
          json_object_set_new(cv, ids, json_integer(json_integer_value(v)));
      }
      if (!json_object_get(dtx__txn_meta(d), "w")) {
        free(ids);
        continue;
      }
      const json_t *rec = w ? json_object_get(recs, w) : NULL;
      intents++;
      json_t *late = NULL;
      if (w && !rec) { /* a record begun after the records were read? */
        json_t *q = json_pack("{s:s}", "_id", w);
        dtx__kit_read_t rq = {.coll = DTX__TXN_RECORDS, .filter = q};
        if (q && dtx__kit_read(a->st, &rq, &late) == 0)
          rec = json_array_get(late, 0);
        json_decref(q);
      }
      if (!w)
        dtx__audit_finding(a, "bad_intent", "%s %s: an intent naming no "
                                            "transaction",
                           coll, ids ? ids : "?");
      else if (!rec)
        dtx__audit_finding(a, "orphan_intent", "%s %s: intent of txn %s, "
                                               "which has no record",
                           coll, ids ? ids : "?", w);
      else if (dtx__state_is(rec, "committed") &&
               json_is_true(json_object_get(rec, "applied")))
        dtx__audit_finding(a, "leftover_intent", "%s %s: intent of txn %s, "
                                                 "whose record says every "
                                                 "key was rolled forward",
                           coll, ids ? ids : "?", w);
      else if (dtx__state_is(rec, "aborted") && (a->flags & DTX_AUDIT_SETTLED))
        dtx__audit_finding(a, "leftover_intent", "%s %s: intent of aborted "
                                                 "txn %s (doctx recover "
                                                 "clears it)",
                           coll, ids ? ids : "?", w);
      else if (!dtx__state_is(rec, "pending"))
        dtx__audit_unsettled(a, 1); /* recovery or a reader finishes it */
      json_decref(late);
      free(ids);
    }
    json_decref(docs);
  }
  audit_applied(a, recs, vers);
  json_decref(vers);
  /* The clock last: every timestamp read above was handed out before
   * this read, so it is at most the clock's; one above it would be
   * handed out again (T6): moved back, deleted or not a number, the next
   * commit could write a version below one already there.  Its type:
   * the validator (bad_shape). */
  json_t *clk = NULL;
  if (dtx__audit_load(a, DTX__TXN_CLOCK, &clk) == 0) {
    const json_t *ts = json_object_get(json_object_get(clk, "clock"), "ts");
    if (top > 0 && (!json_is_integer(ts) || json_integer_value(ts) < top))
      dtx__audit_finding(a, "clock_behind", "txn: the clock %s/clock is not "
                                            "an integer at or above %lld, a "
                                            "timestamp already handed out "
                                            "(%s)",
                         DTX__TXN_CLOCK, (long long)top, where);
  } else {
    dtx__audit_finding(a, "unreadable", "txn: could not read %s: %s",
                       DTX__TXN_CLOCK, dtx_errdetail());
  }
  json_decref(clk);
  dtx__audit_set(a, "records", json_integer((json_int_t)json_object_size(recs)));
  dtx__audit_set(a, "intents", json_integer(intents));
  dtx__audit_summary(a, "%zu transaction records, %lld pending, %lld intents",
                     json_object_size(recs), pending, intents);
  json_decref(recs);
  json_decref(colls);
  return 0;
}

/* ---- the pattern table ---------------------------------------------------------- */

static const char *const collections[] = {DTX__TXN_RECORDS, DTX__TXN_CLOCK,
                                          NULL};

static const dtx__index_def_t indexes[] = {
    /* what recovery reads (load_work): records with work, and those
     * past the retention, never every record kept */
    {DTX__TXN_RECORDS,
     "{\"state\":1,\"applied\":1,\"cleared\":1,\"updated\":1}", 0, 0},
    {NULL, NULL, 0, 0},
};

static const char record_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"state\",\"start_ts\",\"keys\"," DTX__KIT_ITEM_REQUIRED
    "],\"properties\":{\"_id\":{\"bsonType\":\"string\"},"
    "\"state\":{\"enum\":[\"pending\",\"committed\",\"aborted\"]},"
    "\"start_ts\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"commit_ts\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"keys\":{\"bsonType\":\"array\"},"
    "\"applied\":{\"bsonType\":\"bool\"},\"cleared\":{\"bsonType\":\"bool\"},"
    "\"fence\":{\"bsonType\":\"bool\"},\"unknown\":{\"bsonType\":\"bool\"},"
    DTX__KIT_ITEM_PROPS "}}}";

/* The record's diagram; no plain write changes a record at all. */
static const char record_moves[] =
    "[{\"immutable\":[\"_id\",\"start_ts\",\"keys\"],"
    "\"moves\":[{\"name\":\"pending->pending|committed|aborted\","
    "\"from\":{\"state\":\"pending\"},\"to\":{\"state\":{\"$in\":"
    "[\"pending\",\"committed\",\"aborted\"]}}},"
    "{\"name\":\"committed->committed\",\"from\":{\"state\":\"committed\"},"
    "\"to\":{\"state\":\"committed\"}},"
    "{\"name\":\"aborted->aborted\",\"from\":{\"state\":\"aborted\"},"
    "\"to\":{\"state\":\"aborted\"}}]},"
    "{\"scope\":\"plain\",\"steps\":[\"txn\"],\"insert\":false,"
    "\"immutable\":[\"state\",\"commit_ts\",\"applied\",\"cleared\","
    "\"lease_until\",\"fence\",\"unknown\",\"owner\",\"epoch\",\"updated\","
    "\"created\"],"
    "\"delete\":{\"state\":{\"$exists\":false}},"
    "\"why\":\"a transaction record changes only through doctx's "
    "transactions (docs/transactions.md)\"}]";

static const char clock_moves[] =
    "[{\"increasing\":[\"ts\"]},"
    "{\"scope\":\"plain\",\"steps\":[\"txn\"],\"insert\":false,"
    "\"immutable\":[\"ts\"],\"delete\":{\"ts\":{\"$exists\":false}},"
    "\"why\":\"the transactions' clock only moves forward, by doctx "
    "(docs/transactions.md)\"}]";

static const dtx__rules_def_t rules[] = {
    {DTX__TXN_RECORDS, record_shape, NULL, record_moves},
    {DTX__TXN_CLOCK,
     "{\"$jsonSchema\":{\"bsonType\":\"object\",\"required\":[\"ts\"],"
     "\"properties\":{\"ts\":{\"bsonType\":\"long\",\"minimum\":1}}}}",
     NULL, clock_moves},
    {NULL, NULL, NULL, NULL},
};

static const dtx__shape_def_t shapes[] = {
    {DTX__TXN_RECORDS, record_fits},
    {NULL, NULL},
};

static const char *const fault_points[] = {
    "txn.clock",   "txn.read",   "txn.record", "txn.prewrite",
    "txn.validate", "txn.commit", "txn.commit1", "txn.apply",
    "txn.applied", "txn.abort",  "txn.clear",  "txn.gc",
    "txn.gc.version", "txn.gc.tombstone",
    NULL,
};

const dtx__pattern_t dtx__txn_pattern = {
    .name = "txn",
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .recover = recover,
    .audit = audit,
    .rules = rules,
    .shapes = shapes,
};
