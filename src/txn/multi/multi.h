/* multi.h -- what the files of the multi-document transactions share
 * (src/txn/multi/: txn.c the handle, reads and buffered writes; commit.c
 * the commit protocol, intent resolution and outcome; recover.c recovery,
 * audit and the pattern table).  The protocol, its diagram, fault points
 * and invariants T1..T8 are at the top of commit.c and in
 * docs/transactions.md. */
#ifndef DTX_TXN_MULTI_H
#define DTX_TXN_MULTI_H

#include <stdint.h>

#include "doctx.h"
#include "txn/kit/kit.h"

#define DTX__TXN_RECORDS "txn_records"
#define DTX__TXN_CLOCK "txn_clock"
#define DTX__TXN_FIELD "_txn"
#define DTX__TXN_LEASE_MS 10000
#define DTX__TXN_DEADLINE_MS 30000
#define DTX__TXN_MAX_KEYS 1000  /* documents one transaction may touch */
#define DTX__TXN_MAX_SCAN 10000 /* candidates one find may read */
/* The horizon (docs/transactions.md, "Collecting old versions", T11): no
 * transaction reads or commits more than DTX__TXN_MAX_AGE_MS after its
 * begin, and recovery collects a previous version or a tombstone only
 * once the version that replaced it was written more than
 * DTX__TXN_GC_AGE_MS ago (the age plus a margin for the clocks of
 * different machines). */
#define DTX__TXN_MAX_AGE_MS 60000
#define DTX__TXN_SKEW_MS 10000
#define DTX__TXN_GC_AGE_MS (DTX__TXN_MAX_AGE_MS + DTX__TXN_SKEW_MS)

enum { KEY_NONE = 0, KEY_PUT = 1, KEY_DEL = 2 };

/* One document the transaction read or writes. */
typedef struct dtx__txn_key {
  char *coll;
  json_t *id;          /* its _id */
  int stored;          /* a stored document (maybe a tombstone) was there */
  int has_v;           /* it carried _txn.v (else version 0) */
  int64_t v;           /* its _txn.v when read */
  json_t *stored_body; /* what was stored, without _txn (NULL: nothing) */
  json_t *view;        /* the body at the snapshot (NULL: absent) */
  int latest;          /* view is the latest committed version */
  int used;            /* returned to the caller or written */
  int op;              /* KEY_NONE | KEY_PUT | KEY_DEL (buffered) */
  json_t *next;        /* the new body (KEY_PUT) */
  int prewritten;      /* commit: its intent (or lock) was written */
  json_t *written;     /* the document as its prewrite left it (our intent
                        * on it): the roll forward's input, not read again */
} dtx__txn_key_t;

struct dtx_txn {
  dtx_store_t *st;
  dtx__exec_t ex;
  char id[129];
  int caller_id; /* the id was the caller's (always a record) */
  int isolation;
  int64_t start_ts;
  int64_t begin_ms;   /* wall clock before the begin tick (T11) */
  int64_t max_age_ms; /* its reads and commit fail past begin_ms + this */
  int done; /* committed, aborted or failed: no more calls */
  dtx__txn_key_t *keys;
  size_t nkeys, cap;
  /* serializable: the finds by predicate that returned fewer documents
   * than their limit, [{c: COLL, f: FILTER}], validated again at commit
   * (docs/transactions.md, "Isolation"); NULL: none */
  json_t *finds;
};

extern const dtx__pattern_t dtx__txn_pattern;

/* The next timestamp of the store's clock (one $inc, fault point
 * txn.clock). */
int dtx__txn_tick(dtx__exec_t *ex, int64_t *ts);

/* Resolves the intent doc (borrowed) holds, of coll, by its record:
 * 0 resolved (read the document again), 1 its transaction is pending
 * under a live lease (back off), < 0 an error. */
int dtx__txn_resolve(dtx__exec_t *ex, const char *coll, const json_t *doc);

/* Rolls key (coll, id) forward to transaction tid's intent, committed at
 * commit_ts (fault point txn.apply); 0 also when the intent is gone. */
int dtx__txn_roll_forward(dtx__exec_t *ex, const char *coll, const json_t *id,
                          const char *tid, int64_t commit_ts);

/* Removes aborted transaction tid's intent from (coll, id) (txn.clear);
 * 0 also when it is gone. */
int dtx__txn_clear(dtx__exec_t *ex, const char *coll, const json_t *id,
                   const char *tid);

/* Aborts record tid if it is pending (and, with lapsed, only if its
 * lease lapsed): 0 aborted or already aborted, DTX_ENOMATCH committed
 * (or pending and live). */
int dtx__txn_abort_record(dtx__exec_t *ex, const char *tid, int lapsed);

/* commit.c: "put", "del" or "lock" for a key's op; the document that
 * replaces (coll, id) when version c by tid lands -- body NULL: a
 * tombstone -- keeping the previous version (prev NULL: absent). */
const char *dtx__txn_op_name(int op);
json_t *dtx__txn_version_doc(const json_t *id, const json_t *body,
                             int64_t c, const char *tid, int64_t prev_v,
                             const json_t *prev);

/* fit.c: before a commit writes.  k's write (r NULL: depth and size;
 * else also rules r, as its roll forward is judged) fits while in
 * flight; every write passes its collection's rules (one rules read per
 * collection); no top-level value of body is an array; the exact 1PC
 * condition for a field read as v. */
struct dtx__rules; /* doc/doc.h's dtx__rules_t */
int dtx__txn_fits(dtx_txn_t *t, const dtx__txn_key_t *k,
                  const struct dtx__rules *r);
int dtx__txn_rules_fit(dtx_txn_t *t);
int dtx__txn_no_arrays(const json_t *body);
json_t *dtx__txn_exact(const json_t *v);

/* 1 when record r names (coll, id) among its keys (T9). */
int dtx__txn_names_key(const json_t *r, const char *coll, const json_t *id);

/* The stored document of (coll, id) with no intent of another
 * transaction than self (may be NULL) left on it: resolved, or waited for
 * within the deadline.  *out: a new reference, NULL when none. */
int dtx__txn_read_clean(dtx__exec_t *ex, const char *self, const char *coll,
                        const json_t *id, json_t **out);

/* txn_clock's document that says a finished record was ever collected
 * (recover.c writes it before the first delete): from then on a missing
 * record may be a collected one, and dtx_txn_outcome answers unknown. */
#define DTX__TXN_GC_MARK "gc"

/* Guards coll (T8: the plain-write rule) and gives it the sparse index
 * on _txn.w.id that recovery's sweep reads, once per process and store
 * (catalog generation) -- not a rules read per commit. */
int dtx__txn_guard(dtx_store_t *st, const char *coll);

/* The documents of coll holding an intent (a new array in *out), read
 * through that index: what recovery sweeps, not the collection. */
int dtx__txn_intents(dtx__exec_t *ex, const char *coll, json_t **out);

/* The key of (coll, id) in t's table, or NULL (txn.c). */
dtx__txn_key_t *dtx__txn_key_find(dtx_txn_t *t, const char *coll,
                                  const json_t *id);

/* DTX_ECONFLICT ("snapshot too old") once t is older than its maximum
 * age (T11), else 0: called after each read returns and at commit. */
int dtx__txn_age_check(dtx_txn_t *t);

/* Collects, in coll, the previous versions and tombstones the horizon
 * left behind (recover.c's pass; fault points txn.gc.version and
 * txn.gc.tombstone): *versions and *tombstones count what went. */
int dtx__txn_gc_versions(dtx__exec_t *ex, const char *coll, int64_t now,
                         int64_t *versions, int64_t *tombstones);

/* The commit of t (commit.c). */
int dtx__txn_commit(dtx_txn_t *t);

/* Marks record tid, in state "committed" or "aborted", done: applied
 * (fault point txn.applied) or cleared (txn.clear), and updated now. */
int dtx__txn_mark_done(dtx__exec_t *ex, const char *tid, const char *state);

/* A find's candidates in coll by q (stolen), at most DTX__TXN_MAX_SCAN:
 * more is DTX_ELIMIT, its detail naming what (e.g. "a find") and coll.
 * *out new, the caller's (NULL on error). */
int dtx__txn_candidates(dtx_txn_t *t, const char *coll, json_t *q,
                        const char *what, json_t **out);

/* doc's _txn (borrowed), or NULL. */
const json_t *dtx__txn_meta(const json_t *doc);

/* doc without _txn (a new reference). */
json_t *dtx__txn_body(const json_t *doc);

/* ---- the test-only break switch (test_break.c; docs/transactions.md,
 * "The test-only break switch") ---------------------------------------- */
#define DTX__TXN_BREAK_ENV "DTX_TXN_TEST_BREAK"
enum {
  DTX__TXN_BREAK_NONE = 0,
  DTX__TXN_BREAK_SNAPSHOT = 1, /* reads ignore the snapshot timestamp */
  DTX__TXN_BREAK_READLOCK = 2  /* serializable locks nothing it read */
};
/* The check switched off in this process (read once), NONE unless a test
 * armed the switch. */
int dtx__txn_break(void);
/* Arms the switch (tests only: no front door calls it) and returns what
 * it reads, as dtx__txn_break(). */
int dtx__txn_break_arm(void);

#endif
