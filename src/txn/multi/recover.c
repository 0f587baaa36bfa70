/* recover.c -- recovery, audit and the pattern table of multi-document
 * transactions (the pattern "txn"; protocol: commit.c's header and
 * docs/transactions.md).
 *
 * Recovery finishes what crashed or stalled transactions left: a pending
 * record whose lease lapsed is aborted and its intents cleared; a
 * committed record not yet applied has its keys rolled forward; an
 * aborted one has its intents cleared; a finished record (applied, or
 * aborted and cleared) older than the retention is deleted (T7); then
 * every intent left in the collections the records name is resolved
 * (sweep: one written late, by a writer paused before its prewrite).  Readers
 * do the same for the one document they meet, so recovery is for the
 * documents nobody reads.
 *
 * The audit reads the records and, in every collection a record names,
 * the documents holding an intent:
 *   bad_record       a record's state or fields are not what the steps write
 *   leftover_intent  an intent of a committed record marked applied, or
 *                    (with --settled) of an aborted one
 *   orphan_intent    an intent whose transaction has no record (T7)
 *   not_terminal     with --settled: a pending record
 *   shape            a record's fields that do not go with its state, or
 *                    a key that is not {c, id, op}
 *   bad_version      a document's _txn not as the steps write it (its
 *                    types, v with by and p, p.v below v, w's ts, op, doc)
 *   clock            the clock below a timestamp in use, or gone (T6) */
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

/* The collections the records name (a new object, names -> true). */
static json_t *colls_of(const json_t *records) {
  json_t *colls = json_object(), *r, *k;
  size_t i, j;
  if (!colls)
    return NULL;
  json_array_foreach(records, i, r) {
    json_array_foreach(json_object_get(r, "keys"), j, k) {
      const char *c = dtx__str(k, "c");
      if (c && dtx__coll_check(c) == 0)
        json_object_set_new(colls, c, json_true());
      dtx__err_clear();
    }
  }
  return colls;
}

/* Every intent left in the collections the records name is resolved by
 * its record: an intent written late -- by a writer paused before its
 * prewrite while recovery aborted its record and cleared its keys -- is
 * found this way, as a reader would find it (docs/transactions.md,
 * "Recovery"). */
static void sweep(dtx__exec_t *ex, const json_t *records, dtx__tally_t *t) {
  json_t *colls = colls_of(records), *dummy;
  const char *coll;
  json_object_foreach(colls, coll, dummy) {
    json_t *docs = NULL, *d;
    size_t i;
    json_t *f = json_pack("{s:{s:b}}", DTX__TXN_FIELD ".w", "$exists", 1);
    int rc = f ? dtx__kit_find(ex, coll, f, NULL, &docs) : DTX_ENOMEM;
    json_decref(f);
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
  }
  json_decref(colls);
}

static int recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                   dtx__tally_t *t) {
  json_t *list = NULL, *r;
  size_t i;
  int rc = dtx__kit_find(ex, DTX__TXN_RECORDS, NULL, NULL, &list);
  if (rc)
    return rc;
  int64_t now = dtx__now_ms();
  /* The retention of finished records is the jobs' (--retention-ms), not
   * the age that abandons a lease: a record deleted early would make
   * dtx_txn_outcome fence its id and answer "aborted" for a commit. */
  int64_t horizon = o->retention_ms > 0 ? o->retention_ms : GC_HORIZON_MS;
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
        rc = dtx__kit_update(
            ex, "txn.applied", DTX__TXN_RECORDS,
            json_pack("{s:s,s:s}", "_id", tid, "state", "committed"),
            json_pack("{s:{s:b,s:I}}", "$set", "applied", 1, "updated",
                      (json_int_t)now),
            NULL);
      if (rc == 0)
        dtx__tally_ran(t, "applied", 1);
    } else if (dtx__state_is(r, "aborted") &&
               !json_is_true(json_object_get(r, "cleared"))) {
      rc = finish_keys(ex, r, 0, 0);
      if (rc == 0)
        rc = dtx__kit_update(
            ex, "txn.clear", DTX__TXN_RECORDS,
            json_pack("{s:s,s:s}", "_id", tid, "state", "aborted"),
            json_pack("{s:{s:b,s:I}}", "$set", "cleared", 1, "updated",
                      (json_int_t)now),
            NULL);
      if (rc == 0)
        dtx__tally_ran(t, "cleared", 1);
    } else if (now - dtx__int(r, "updated") >= horizon &&
               !json_is_true(json_object_get(r, "fence"))) {
      int64_t n = 0;
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
  sweep(ex, list, t);
  json_decref(list);
  return 0;
}

/* ---- audit: each field of a record, of a document's _txn, the clock --------
 * What the validator cannot say of one field, and what no validator sees
 * (the user's collections have none, only the plain-write rule): every
 * row of tests/crash/tamper.sh's transactions table, written past the
 * rules, is a finding here or in the intent loop of audit(). */

static int key_op(const json_t *v) {
  const char *s = json_string_value(v);
  return s && (!strcmp(s, "put") || !strcmp(s, "del") || !strcmp(s, "lock"));
}

static int is_ts(const json_t *v, int64_t min) {
  return json_is_integer(v) && json_integer_value(v) >= min;
}

/* The shape check of txn_records (dtx__audit_load runs it on every record
 * its validator admits): the fields that go with a state, and the keys. */
static int record_fits(const json_t *r, char *why, size_t n) {
  const char *st = dtx__str(r, "state");
  const json_t *cts = json_object_get(r, "commit_ts"), *k;
  size_t i;
  if (!json_is_integer(json_object_get(r, "created")))
    return dtx__shape_bad(why, n, "created is not an integer");
  if (st && strcmp(st, "committed") &&
      (cts || json_object_get(r, "applied")))
    return dtx__shape_bad(why, n, "a %s record has a commit_ts or applied "
                                  "(only a commit writes them)",
                          st);
  if (st && strcmp(st, "aborted") &&
      (json_object_get(r, "cleared") || json_object_get(r, "fence")))
    return dtx__shape_bad(why, n, "a %s record has cleared or fence (only "
                                  "an abort writes them)",
                          st);
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
    if (!id || json_is_null(id) || json_is_array(id))
      return dtx__shape_bad(why, n, "keys.%zu.id is not a document's _id",
                            i);
    if (!key_op(json_object_get(k, "op")))
      return dtx__shape_bad(why, n, "keys.%zu.op is not put, del or lock",
                            i);
  }
  return 0;
}

/* A document's _txn as the steps write it (docs/transactions.md,
 * "Documents under transactions"); *top: raised to the highest timestamp
 * it holds.  An intent's id is the intent loop's (bad_intent). */
static int meta_fits(const json_t *m, int64_t *top, char *why, size_t n) {
  if (!json_is_object(m))
    return dtx__shape_bad(why, n, "_txn is not an object");
  const json_t *v = json_object_get(m, "v"), *p = json_object_get(m, "p");
  const json_t *w = json_object_get(m, "w"), *del = json_object_get(m, "del");
  const json_t *t = json_object_get(m, "t");
  /* A document of version 0 (never committed by a transaction) holds
   * only its intent, or nothing once that is cleared: {} or {w}. */
  if ((t || v || del) && !is_ts(t, 0))
    return dtx__shape_bad(why, n, "_txn.t is not a time in ms");
  if (del && !json_is_true(del))
    return dtx__shape_bad(why, n, "_txn.del is not true");
  if (v) {
    const json_t *pv = json_object_get(p, "v"), *pd = json_object_get(p, "doc");
    if (!is_ts(v, 1))
      return dtx__shape_bad(why, n, "_txn.v is not a timestamp");
    if (!json_is_string(json_object_get(m, "by")))
      return dtx__shape_bad(why, n, "_txn.by is not a transaction id");
    if (!is_ts(pv, 0) || json_integer_value(pv) >= json_integer_value(v))
      return dtx__shape_bad(why, n, "_txn.p.v is not a timestamp below "
                                    "_txn.v (T6)");
    if (!json_is_object(pd) && !json_is_null(pd))
      return dtx__shape_bad(why, n, "_txn.p.doc is not a document or null");
    if (json_integer_value(v) > *top)
      *top = json_integer_value(v);
  } else if (p || json_object_get(m, "by")) {
    return dtx__shape_bad(why, n, "_txn has p or by without v");
  }
  if (json_is_object(w)) {
    const json_t *ts = json_object_get(w, "ts"), *op = json_object_get(w, "op");
    const json_t *doc = json_object_get(w, "doc");
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

/* Every document's _txn in colls (the collections the records name), then
 * the clock against every timestamp seen (recs: the records). */
static void audit_fields(dtx__audit_t *a, const json_t *recs,
                         const json_t *colls) {
  int64_t top = 0;
  char where[200] = ""; /* the document holding top */
  const char *name;
  json_t *r, *dummy;
  json_object_foreach((json_t *)recs, name, r) {
    int64_t ts = dtx__int(r, "start_ts") > dtx__int(r, "commit_ts")
                     ? dtx__int(r, "start_ts")
                     : dtx__int(r, "commit_ts");
    if (ts > top) {
      top = ts;
      snprintf(where, sizeof where, "%s %s", DTX__TXN_RECORDS, name);
    }
  }
  json_object_foreach((json_t *)colls, name, dummy) {
    json_t *docs = NULL, *d;
    size_t i;
    json_t *f = json_pack("{s:{s:b}}", DTX__TXN_FIELD, "$exists", 1);
    dtx__kit_read_t q = {.coll = name, .filter = f};
    int rc = f ? dtx__kit_read(a->st, &q, &docs) : DTX_ENOMEM;
    json_decref(f);
    dtx__err_clear();
    if (rc) /* the intent loop reported the collection unreadable */
      continue;
    json_array_foreach(docs, i, d) {
      char why[256];
      int64_t was = top;
      int bad = meta_fits(json_object_get(d, DTX__TXN_FIELD), &top, why,
                          sizeof why);
      if (!bad && top == was)
        continue;
      char *ids = json_dumps(json_object_get(d, "_id"),
                             JSON_COMPACT | JSON_ENCODE_ANY);
      if (top != was)
        snprintf(where, sizeof where, "%s %s", name, ids ? ids : "?");
      if (bad)
        dtx__audit_finding(a, "bad_version", "%s %s: %s", name,
                           ids ? ids : "?", why);
      free(ids);
    }
    json_decref(docs);
  }
  /* The clock last: every timestamp read above was handed out before
   * this read, so it is at most the clock's; one above it would be
   * handed out again (T6).  Its type: the validator (bad_shape). */
  json_t *clocks = NULL;
  if (dtx__audit_load(a, DTX__TXN_CLOCK, &clocks)) {
    dtx__audit_finding(a, "unreadable", "txn: could not read %s: %s",
                       DTX__TXN_CLOCK, dtx_errdetail());
    return;
  }
  const json_t *c = json_object_get(clocks, "clock");
  const json_t *ts = json_object_get(c, "ts");
  if (!c && top > 0)
    dtx__audit_finding(a, "clock", "txn: %s has no clock, and timestamps up "
                                   "to %lld are in use (%s)",
                       DTX__TXN_CLOCK, (long long)top, where);
  else if (json_is_integer(ts) && json_integer_value(ts) < top)
    dtx__audit_finding(a, "clock", "txn: the clock is at %lld, below "
                                   "timestamp %lld of %s",
                       (long long)json_integer_value(ts), (long long)top,
                       where);
  json_decref(clocks);
}

/* ---- audit ------------------------------------------------------------------ */

static int audit(dtx__audit_t *a) {
  json_t *recs = NULL, *r, *colls = json_object();
  const char *tid;
  long long pending = 0, intents = 0;
  int rc = colls ? dtx__audit_load(a, DTX__TXN_RECORDS, &recs) : DTX_ENOMEM;
  if (rc) {
    json_decref(colls);
    return rc;
  }
  json_object_foreach(recs, tid, r) {
    const char *st = dtx__str(r, "state");
    if (!st || (strcmp(st, "pending") && strcmp(st, "committed") &&
                strcmp(st, "aborted"))) {
      dtx__audit_finding(a, "bad_record", "txn record %s: state is not "
                                          "pending, committed or aborted",
                         tid);
      continue;
    }
    if (strcmp(st, "committed") == 0 &&
        !json_is_integer(json_object_get(r, "commit_ts")))
      dtx__audit_finding(a, "bad_record", "txn record %s: committed without "
                                          "an integer commit_ts",
                         tid);
    if (!json_is_array(json_object_get(r, "keys")))
      dtx__audit_finding(a, "bad_record", "txn record %s: keys is not an "
                                          "array",
                         tid);
    if (strcmp(st, "pending") == 0) {
      pending++;
      if (a->flags & DTX_AUDIT_SETTLED)
        dtx__audit_finding(a, "not_terminal", "txn %s is still pending",
                           tid);
    }
    size_t i;
    json_t *k;
    json_array_foreach(json_object_get(r, "keys"), i, k) {
      const char *c = dtx__str(k, "c");
      if (c && dtx__coll_check(c) == 0)
        json_object_set_new(colls, c, json_true());
      dtx__err_clear();
    }
  }
  /* Every intent in the collections the records name. */
  const char *coll;
  json_t *dummy;
  json_object_foreach(colls, coll, dummy) {
    json_t *docs = NULL, *d;
    size_t i;
    dtx__kit_read_t q = {.coll = coll};
    json_t *f = json_pack("{s:{s:b}}", DTX__TXN_FIELD ".w", "$exists", 1);
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
  audit_fields(a, recs, colls);
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
    {DTX__TXN_RECORDS, "{\"state\":1}", 0, 0},
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
    "\"fence\":{\"bsonType\":\"bool\"}," DTX__KIT_ITEM_PROPS "}}}";

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
    "\"lease_until\",\"fence\",\"owner\",\"epoch\",\"updated\","
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
