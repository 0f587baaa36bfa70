/* transfer.h -- internals shared by the files of the transfer pattern.
 *
 * transfer.c holds the state machine (diagram, transitions, invariants)
 * and the method table; account.c the accounts; recover.c and audit.c the
 * pattern's recovery pass and audit, which the kit's frames (src/txn/
 * recover.c, audit.c) call through the table.  Everything else a step
 * needs -- retry, fenced moves, claims, leases -- comes from txn/kit/kit.h. */
#ifndef DTX_TXN_TRANSFER_H
#define DTX_TXN_TRANSFER_H

#include "txn/kit/kit.h"

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
#define DTX_REASON_BADLIMIT "payer min_balance is not an integer"

/* The transfer documents, for the kit's moves and claims. */
extern const dtx__kind_t dtx__tx_kind;

/* The method table (registered in src/txn/frame/registry.c). */
extern const dtx__pattern_t dtx__transfer_pattern;

/* Drives the transfer tx (borrowed) toward a terminal state from wherever
 * it stands.  wait_owner: when another live executor holds it in
 * preparing, wait for its lease to lapse and then roll it back (1), or
 * return at once (0).  *out receives the document afterwards (also on
 * error, when it could be read). */
int dtx__tx_drive(dtx__exec_t *ex, const json_t *tx, int wait_owner,
                  json_t **out);

/* Takes a preparing transfer over (epoch + 1, fencing the old owner) and
 * rolls it back with reason.  cond (stolen, may be NULL) as for
 * dtx__kit_takeover: NULL means "its lease lapsed".  DTX_ENOMATCH when the
 * transfer moved on. */
int dtx__tx_takeover(dtx__exec_t *ex, const json_t *tx, const char *reason,
                     json_t *cond, const char *point, json_t **out);

/* Records the opening of account (borrowed; account.c, "The registry")
 * and clears its unregistered flag: idempotent, for the creator and for
 * recovery alike. */
int dtx__tx_register(dtx__exec_t *ex, const json_t *account);
/* The settlement account id, created on first use with no lower limit
 * (account.c); orders and interest pay from it. */
int dtx__tx_settlement(dtx__exec_t *ex, const char *id, const char *point,
                       const char *who);

/* The pattern's methods (recover.c, audit.c). */
int dtx__tx_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                    dtx__tally_t *t);
int dtx__tx_audit(dtx__audit_t *a);

/* 1 for succeeded and failed. */
int dtx__tx_terminal(const json_t *tx);

/* The marker on account for txid of kind op ("debit", "credit") or, with
 * op NULL, of any kind; NULL when absent.  Borrowed from account. */
const json_t *dtx__marker(const json_t *account, const char *txid,
                          const char *op);
/* 1 when account carries a tombstone for txid. */
int dtx__has_tombstone(const json_t *account, const char *txid);

/* ---- account steps (steps.c) ---- */

/* What dtx__tx_take_marker found: the marker taken now; no marker (taken
 * before, or never made); no account. */
enum dtx__taken { DTX__TAKEN, DTX__ABSENT, DTX__GONE };

/* Takes the op marker of transfer txid (carrying amount) off account id in
 * one step together with inc (stolen: an $inc object, e.g. {"balance":
 * amount} or {"ceiling": -amount}) and, with tomb, a tombstone.  Never
 * reports "nothing matched": *out says why (I9).  DTX_ESTATE for a marker
 * with another amount or an account whose ceiling cannot be made. */
int dtx__tx_take_marker(dtx__exec_t *ex, const char *point, const char *id,
                        const char *txid, const char *op, int64_t amount,
                        json_t *inc, int tomb, enum dtx__taken *out);
/* The first attempt of that step as an update (filter and update new
 * references in u, for dtx__kit_update_many; inc borrowed), and the rest
 * of the step after it ran: tried 1 when it did and matched nothing (one
 * that matched is TAKEN, nothing more to do). */
void dtx__tx_take_op(dtx__kit_upd_t *u, const char *point, const char *id,
                     const char *txid, const char *op, int64_t amount,
                     const json_t *inc, int tomb);
int dtx__tx_take_marker_after(dtx__exec_t *ex, const char *point,
                              const char *id, const char *txid, const char *op,
                              int64_t amount, json_t *inc, int tomb, int tried,
                              enum dtx__taken *out);

/* Outcome of a prepare step on an account. */
enum dtx__marked {
  DTX__MK_DONE,   /* the marker is there: placed now or before */
  DTX__MK_FENCED, /* a tombstone: the transfer was rolled back meanwhile */
  DTX__MK_MISSING,  /* no such account */
  DTX__MK_REFUSED,  /* the account's limit refuses it */
  DTX__MK_BADLIMIT, /* the payer's min_balance is neither int64 nor null */
};

/* The payee's credit marker, reserving its amount under the payee's
 * ceiling in the same step (I7); tried: its first attempt already ran
 * (dtx__tx_mark_op) and matched nothing. */
int dtx__tx_mark_payee(dtx__exec_t *ex, const json_t *tx, int tried,
                       enum dtx__marked *why);
/* Its first attempt as an update (new references in u), for
 * dtx__kit_update_many; tried = 1 above when it ran and matched nothing. */
void dtx__tx_mark_op(dtx__kit_upd_t *u, const json_t *tx);

/* ---- the pieces the batch driver (many.c) shares with the sequential
 * one; each is the very code dtx_transfer_run and the worker run ---- */

/* The checks of a request (submit.c): DTX_EINVAL naming what is wrong. */
int dtx__tx_check_req(const dtx_transfer_req_t *req);

/* The accounts ids[0..n) (NULLs skipped, a repeated id read once) in one
 * find: *byid, an object _id -> account (new reference, NULL on error). */
int dtx__tx_read_accounts(dtx__exec_t *ex, const char *const *ids, size_t n,
                          json_t **byid);
/* The new transfer document for req under id (new reference, NULL when
 * out of memory): initiated, or with claimed already claimed by ex
 * (preparing, owner, lease_until = now + lease, epoch 1). */
json_t *dtx__tx_new(const dtx__exec_t *ex, const dtx_transfer_req_t *req,
                    const char *id, int claimed);
/* An insert of req under id met an existing id: *out (new reference) the
 * transfer as stored when it has req's parameters (DTX_ECONFLICT when
 * not); *mine 1 when it is the very document tried (borrowed, may be NULL)
 * that ex inserted claimed (the insert's reply was lost). */
int dtx__tx_existing(dtx__exec_t *ex, const dtx_transfer_req_t *req,
                     const char *id, const json_t *tried, int claimed,
                     int *mine, json_t **out);

/* The prepare phase in two halves around its pair (payer debit + payee
 * mark).  pair_ops: 1 with the pair's first attempts in u (new references,
 * for dtx__kit_update_many or a batch round) and *min the min_balance the
 * debit relies on; 0 when the payer as read (payer, borrowed) decides it
 * without a write (*why: done before, fenced, refused, bad limit).
 * prepare_rest: everything after the pair's results -- the debit's and
 * mark's read-backs when they matched nothing (debited, marked), the
 * rollback of a refusal, the commit (fault point transfer.commit); min is
 * stolen.  *out as prepare's: the document after its last transition, or
 * NULL when fenced off (the caller rereads). */
int dtx__tx_pair_ops(const json_t *tx, const json_t *payer,
                     dtx__kit_upd_t u[2], json_t **min,
                     enum dtx__marked *why);
int dtx__tx_prepare_rest(dtx__exec_t *ex, const json_t *tx, int pair,
                         int debited, int marked, json_t *min,
                         enum dtx__marked why, json_t **out);

/* The commit's finish in two halves around its pair (payer clear + payee
 * credit): the first attempts in u with the $inc objects they carry
 * (*cinc, *binc: new references, which finish_rest steals), and the rest
 * after the results (cleared, credited: whether each matched) -- the
 * read-backs, and the move to succeeded (transfer.finish). */
void dtx__tx_clear_credit_ops(const json_t *tx, dtx__kit_upd_t u[2],
                              json_t **cinc, json_t **binc);
int dtx__tx_finish_rest(dtx__exec_t *ex, const json_t *tx, int cleared,
                        int credited, json_t *cinc, json_t *binc,
                        json_t **out);

/* dtx__tx_drive; with mine, start is a transfer ex has just recorded
 * claimed, whose prepare phase it runs first with the payer as read
 * (borrowed, may be NULL). */
int dtx__tx_drive_ex(dtx__exec_t *ex, const json_t *start, int wait_owner,
                     int mine, const json_t *payer, json_t **out);
/* How a drive ends on error rc (with this thread's detail): *out the
 * transfer as it stands now (NULL when it cannot be read, or rc is
 * DTX_EUNAVAILABLE), the detail naming transfer id; returns the rc. */
int dtx__tx_fail(dtx__exec_t *ex, const char *id, int rc, json_t **out);

/* The worker's batched drive (many.c): docs[0..n) (borrowed) are
 * transfers ex claimed together (preparing, its own); they go through the
 * lockstep rounds from the payers' read on (one find of their payers,
 * pair, commit, clear + credit, finish), a deviating one splitting off to
 * the sequential drive as in dtx_transfer_execute_many.  outs[i] (new
 * reference, may be NULL) and rcs[i] are what dtx__tx_drive would give
 * for docs[i], details[i] its error's detail (malloc'd, or NULL). */
void dtx__tx_drive_claimed_many(dtx__exec_t *ex, const json_t *const *docs,
                                size_t n, json_t **outs, int *rcs,
                                char **details);

#endif
