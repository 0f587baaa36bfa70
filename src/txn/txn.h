/* txn.h -- internals shared by the transfer protocol files.
 *
 * transfer.c holds the state machine and its steps; recover.c, worker.c,
 * audit.c and account.c build on the pieces declared here.  Everything
 * goes through the public store API, so the protocol runs unchanged on
 * every backend. */
#ifndef DTX_TXN_H
#define DTX_TXN_H

#include "doctx.h"

/* Transfer states, as stored in the "state" field. */
#define DTX_ST_INITIATED "initiated"
#define DTX_ST_PREPARING "preparing"
#define DTX_ST_COMMITTED "committed"
#define DTX_ST_SUCCEEDED "succeeded"
#define DTX_ST_ROLLING_BACK "rolling_back"
#define DTX_ST_FAILED "failed"

/* Failure reasons, as stored in the "reason" field. */
#define DTX_REASON_FUNDS "insufficient funds"
#define DTX_REASON_NOACCOUNT "no such account"
#define DTX_REASON_CANCELED "canceled"
#define DTX_REASON_ABANDONED "abandoned by its executor"
#define DTX_REASON_PAYEE_LIMIT "payee balance would overflow"

/* One executor's identity: who claims, and for how long. */
typedef struct dtx__exec {
  dtx_store_t *st;
  char owner[128];
  int64_t lease_ms;
} dtx__exec_t;

void dtx__exec_init(dtx__exec_t *ex, dtx_store_t *st, const char *owner,
                    int64_t lease_ms);

/* Makes sure the indexes the protocol relies on exist (once per process
 * and store URI). */
int dtx__txn_ensure_indexes(dtx_store_t *st);

/* Drives the transfer tx (borrowed) toward a terminal state from wherever
 * it stands.  wait_owner: when another live executor holds it in
 * preparing, wait for its lease to lapse and then roll it back (1), or
 * return at once (0).  *out receives the document afterwards. */
int dtx__tx_drive(dtx__exec_t *ex, const json_t *tx, int wait_owner,
                  json_t **out);

/* Takes an abandoned or canceled preparing transfer over (bumping its
 * epoch, fencing the old owner) and rolls it back with reason.  cond adds
 * conditions to the takeover filter (e.g. "not updated since"); it is
 * borrowed and may be NULL.  DTX_ENOMATCH when the transfer moved on. */
int dtx__tx_takeover(dtx__exec_t *ex, const json_t *tx, const char *reason,
                     const json_t *cond, const char *point, json_t **out);

/* Account-side repair of one marker (recover.c): refunds or removes the
 * marker of transfer txid on account acct as its state demands. */
int dtx__tx_repair_marker(dtx__exec_t *ex, const char *acct,
                          const json_t *marker, const json_t *tx);

/* Store update with fault point, bounded retry of transient errors, and
 * ownership: filter and update are stolen (decref'd) in every case.
 * *matched (may be NULL) tells whether a document matched. */
int dtx__step(dtx__exec_t *ex, const char *point, const char *coll,
              json_t *filter, json_t *update, int *matched);

/* Transient store errors that a step retries. */
int dtx__transient(int rc);

/* Claims the oldest-id initiated transfer and drives it to its end;
 * DTX_ENOMATCH when none is waiting.  *out: the final document. */
int dtx__tx_claim_next(dtx__exec_t *ex, json_t **out);

/* Checks an account or transfer id: 1..128 of [A-Za-z0-9_.:-]; DTX_EINVAL
 * naming `what` otherwise. */
int dtx__check_ident(const char *what, const char *id);

/* Accessors for the documents of this protocol (no allocation). */
const char *dtx__str(const json_t *doc, const char *key);
int64_t dtx__int(const json_t *doc, const char *key);
int dtx__state_is(const json_t *tx, const char *state);
int dtx__terminal(const json_t *tx);

/* The marker on account for txid of kind op ("debit", "credit") or, with
 * op NULL, of any kind; NULL when absent.  Borrowed from account. */
const json_t *dtx__marker(const json_t *account, const char *txid,
                          const char *op);
/* 1 when account carries a tombstone for txid. */
int dtx__has_tombstone(const json_t *account, const char *txid);

#endif
