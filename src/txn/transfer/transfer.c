/* transfer.c -- the two-phase transfer between two accounts: the state
 * machine, the public transfer API and the pattern's method table.  The
 * machinery every pattern shares (retry, fenced moves, claims, leases,
 * deadlines) is the kit's (txn/kit/kit.h).
 *
 * A transfer touches two account documents, and the store makes only one
 * document at a time atomic.  The transfer document's state is the commit
 * point; every account step is a conditional single-document update made
 * idempotent by a marker carrying the transfer id (docs/transfers.md).
 *
 *   (submit, synchronous) -----------+
 *                                    v
 *   initiated --claim--> preparing --commit--> committed --finish--> succeeded
 *       |                   |
 *       | cancel            +--funds/account/cancel/timeout--> rolling_back
 *       v                                                          |
 *     failed <-------------------------finish----------------------+
 *
 *   transition                      function            fault point
 *   (record initiated: --async)     dtx_transfer_submit transfer.submit
 *   (record preparing, claimed by   many.c round 2     transfer.submit
 *    the executor: synchronous)     (_execute, _many)
 *   initiated -> preparing          claim(), tx_claim   transfer.claim
 *    (the worker: up to --batch     (claim_next, _many) transfer.claim
 *    at once, driven by many.c)    tx_drive_many
 *   (payer: debit + debit marker)   prepare()  } one    transfer.debit
 *   (payee: credit marker)          prepare()  } batch  transfer.mark_payee
 *   (both results back)             prepare()           transfer.debit_mark.done
 *   preparing -> committed          prepare()           transfer.commit
 *   (payer: drop debit marker)      finish_commit() }   transfer.clear_payer
 *   (payee: credit, drop marker)    finish_commit() }   transfer.credit_payee
 *   (both results back)             finish_commit()     transfer.clear_credit.done
 *   committed -> succeeded          finish_commit()     transfer.finish
 *   (a batch item leaves the        many.c split()     transfer.batch.split
 *    lockstep for this drive)
 *   preparing -> rolling_back       begin_rollback()    transfer.rollback.begin
 *                                   dtx__tx_takeover()  transfer.recover.takeover,
 *                                                       transfer.cancel.begin
 *   (payer: refund, [tombstone])    finish_rollback()   transfer.rollback.refund_payer
 *   (payee: drop marker,[tombstone])finish_rollback()   transfer.rollback.unmark_payee
 *   rolling_back -> failed          finish_rollback()   transfer.rollback.finish
 *   initiated -> failed             dtx_transfer_cancel transfer.cancel.begin
 *   (account: its limit, if the     dtx_account_limit   transfer.account.limit
 *    balance meets it; account.c)
 * The steps marked "}" go to the store together, in one
 * dtx__kit_update_many (one bulk_write: one round trip, one commit), each
 * still one atomic single-document update behind its own fault point,
 * reached just before it joins the batch (a crash there sends neither).
 * Either of a pair may land without the other (a refusal; an error that
 * sends it alone into a later round, where a crash may find it), which
 * adds two account states the one-at-a-time
 * sequence never reached: the payee marked while the payer's debit was
 * refused (or not made yet), and the payee credited before the payer was
 * cleared.  Both are covered by I2, I6 and the rollback below.
 * A synchronous transfer (dtx_transfer_execute, _execute_many) runs in
 * many.c: the same step of every transfer of a batch (of one, for
 * _execute) goes to the store as one round, through prepare()'s and
 * finish_commit()'s own halves (dtx__tx_pair_ops / prepare_rest,
 * dtx__tx_clear_credit_ops / finish_rest); a transfer that deviates is
 * driven on by drive() below from where it stands.
 * A synchronous transfer is recorded already claimed (owner, lease_until =
 * now + lease, epoch 1): an executor that dies right after is one that
 * died after a claim, and recovery's lapsed-lease takeover covers it.
 * The submission reads both accounts in one query; the payer as read
 * gives the first debit its min_balance (a changed one makes the debit
 * match nothing, and the read-back of I9 tries again).
 * Recovery's own points (transfer.recover.*) are in recover.c.
 *
 * Account documents: {_id, balance, min_balance, opening_balance, ceiling,
 * pending: [{tx, op:"debit"|"credit", amount, at}], voids: [{tx, at}]}
 * (the account steps are in steps.c).  A "void" is a tombstone: a rollback
 * by someone other than the executor leaves one, and every prepare step
 * requires its absence, so an executor that wakes up late (paused past its
 * lease) cannot debit or mark after the rollback.
 *
 * Invariants (DTX_ASSERT checks what a step relies on and leaves, in
 * every build; dtx_audit() checks the store):
 *  I1 A payer's balance never drops below its min_balance: the debit's
 *     filter demands balance >= min_balance + amount in the same atomic
 *     step, and a limit is set only where the balance meets it
 *     (dtx_account_limit: balance >= N in its one step).  min_balance null
 *     is no limit; any other non-int64 value refuses every debit (never
 *     read as "no limit").
 *  I2 Money in flight: a transfer holds `amount` out of circulation from
 *     the payer's debit until the payee's credit -- on the payer's debit
 *     marker, or, once the payer is cleared, on the payee's credit marker
 *     of a committed transfer.  A payee's mark carries no money (it may
 *     land before or without the debit: the pair), and a debit marker of
 *     a committed transfer whose payee was already credited (the clear
 *     may land after the credit) holds none either.  So sum(balance) + in
 *     flight == sum(opening_balance) at every moment (audit.c counts each
 *     transfer once).
 *  I3 Every state change is conditioned on the expected current state, and
 *     preparing-phase changes also on the claim's epoch; recovery and
 *     cancel bump the epoch, so a stale owner's transitions fail.
 *  I4 Each account step matches at most once per transfer: debit and mark
 *     require no marker and no tombstone for the id; credit and refund
 *     require the marker (with its amount) and remove it in the same step.
 *  I5 The payee is credited only after commit; a committed transfer is
 *     never rolled back, a rolling_back one never commits.
 *  I6 An account lists a transfer in `pending` only while that transfer is
 *     non-terminal; tombstones only for failed or rolling_back transfers.
 *     Within preparing, committed and rolling_back, any combination of the
 *     payer's debit marker and the payee's credit marker is possible (the
 *     pairs); the rollback takes each account's marker off on its own,
 *     idempotently (a payee mark without a debit: dropped, its ceiling
 *     reservation with it, I7), and the commit never starts before both
 *     of the prepare pair landed.
 *  I7 ceiling == balance + the amounts of all pending markers <= INT64_MAX
 *     on every account that has one (older accounts get it at their first
 *     step that needs it).  The payee's mark demands ceiling + amount <=
 *     INT64_MAX and raises the ceiling in the same step, so every credit
 *     and refund fits when it lands: a committed transfer can always be
 *     finished (docs/transfers.md, "ceiling").  Each account's own steps keep it
 *     (the mark raises it, dropping the mark in a rollback lowers it),
 *     whatever the other account of the pair did.
 *  I8 Tombstones only where a late step is possible: a rollback after a
 *     takeover or cancel (reason abandoned/canceled); the executor's own
 *     decline leaves none.  An account keeps the newest VOIDS_MAX (64).
 *  I9 An account step that matched nothing reads the account back: done
 *     before, fenced, refused, or the account is gone.  A transfer never
 *     reports success for a credit that did not land: a committed transfer
 *     whose payee is gone stays committed (DTX_ESTATE), and the audit
 *     reports it as unfinishable.
 *  I10 Only these steps change a transfer or an account's protocol
 *     fields: every promise above spans documents, and a plain write (the
 *     generic document commands) cannot show that it is a step that was
 *     due, so the store refuses it any such change and any insert (the
 *     transition rules below, "scope": "plain"); the rules every writer
 *     obeys state the diagram (moves), I3's epoch (increasing) and what a
 *     transfer keeps for good (from, to, amount, created).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

const dtx__kind_t dtx__tx_kind = {DTX_TRANSFERS, "state", NULL};
#define TX (&dtx__tx_kind)

/* ---- small helpers --------------------------------------------------------- */

int dtx__tx_terminal(const json_t *tx) {
  return dtx__state_is(tx, DTX_ST_SUCCEEDED) || dtx__state_is(tx, DTX_ST_FAILED);
}

const json_t *dtx__marker(const json_t *account, const char *txid,
                          const char *op) {
  size_t i;
  json_t *m;
  json_array_foreach(json_object_get(account, "pending"), i, m) {
    const char *t = dtx__str(m, "tx"), *o = dtx__str(m, "op");
    if (t && strcmp(t, txid) == 0 && (!op || (o && strcmp(o, op) == 0)))
      return m;
  }
  return NULL;
}

int dtx__has_tombstone(const json_t *account, const char *txid) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(account, "voids"), i, v) {
    const char *t = dtx__str(v, "tx");
    if (t && strcmp(t, txid) == 0)
      return 1;
  }
  return 0;
}

/* A state change of the transfer document (kit: fenced move).  DTX_ENOMATCH
 * when the transfer was no longer in state `from` (or at its epoch, with
 * DTX__FENCED). */
static int move(dtx__exec_t *ex, const char *point, const json_t *tx,
                const char *from, const char *to, unsigned flags, json_t *set,
                json_t **out) {
  dtx__move_t m = {
      .point = point, .from = from, .to = to, .flags = flags, .set = set};
  return dtx__kit_move(ex, TX, tx, &m, out);
}

/* ---- prepare phase -------------------------------------------------------------- */

/* initiated -> preparing, with a fresh lease and epoch. */
static int claim(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  return move(ex, "transfer.claim", tx, DTX_ST_INITIATED, DTX_ST_PREPARING,
              DTX__TAKE, NULL, out);
}

/* preparing -> rolling_back by the owner itself (fenced by its epoch). */
static int begin_rollback(dtx__exec_t *ex, const json_t *tx, const char *reason,
                          json_t **out) {
  return move(ex, "transfer.rollback.begin", tx, DTX_ST_PREPARING,
              DTX_ST_ROLLING_BACK, DTX__FENCED,
              dtx__pack("{s:s}", "reason", reason), out);
}

/* Reads account id into *acct; a missing account is DTX__MK_MISSING (0,
 * *acct NULL). */
static int read_account(dtx__exec_t *ex, const char *id, json_t **acct,
                        enum dtx__marked *why) {
  int rc = dtx__kit_get(ex, DTX_ACCOUNTS, id, acct);
  if (rc == DTX_ENOTFOUND) {
    *why = DTX__MK_MISSING;
    return 0;
  }
  return rc;
}

/* The payer's debit for payer account acct (as read) in u, or decided
 * without a write (returns 1, *why set): done before, fenced, or a limit
 * that refuses it.  balance - amount >= min_balance is checked in the
 * same atomic step that takes the money and leaves the debit marker (I1,
 * I4), on the min_balance read (*min, a new reference): if it changed
 * since, the step matches nothing and the caller reads again.  A
 * min_balance that is neither an int64 nor null (no limit) refuses the
 * debit (DTX__MK_BADLIMIT): reject rather than guess the limit. */
static int debit_op(const json_t *tx, const json_t *acct, dtx__kit_upd_t *u,
                    json_t **min, enum dtx__marked *why) {
  const char *id = dtx__str(tx, "_id"), *from = dtx__str(tx, "from");
  int64_t amount = dtx__int(tx, "amount"), floor;
  *min = NULL;
  if (dtx__has_tombstone(acct, id) || dtx__marker(acct, id, "debit")) {
    *why = dtx__has_tombstone(acct, id) ? DTX__MK_FENCED : DTX__MK_DONE;
    return 1;
  }
  json_t *m = json_object_get(acct, "min_balance");
  if (json_is_integer(m)) {
    if (__builtin_add_overflow((int64_t)json_integer_value(m), amount,
                               &floor)) {
      *why = DTX__MK_REFUSED;
      return 1;
    }
  } else if (json_is_null(m)) {
    floor = INT64_MIN + amount; /* no limit, but never wrap around */
  } else {
    *why = DTX__MK_BADLIMIT; /* 0.0, "50", absent, ...: not a limit we can apply */
    return 1;
  }
  *min = json_incref(m);
  /* I1: the filter below keeps balance - amount >= min_balance. */
  DTX_ASSERT(json_is_null(m) || floor - amount == json_integer_value(m), "I1");
  u->point = "transfer.debit";
  u->coll = DTX_ACCOUNTS;
  u->filter = dtx__pack("{s:s,s:O,s:{s:I},s:{s:s},s:{s:s}}", "_id", from,
                        "min_balance", m, "balance", "$gte", (json_int_t)floor,
                        "pending.tx", "$ne", id, "voids.tx", "$ne", id);
  u->update = dtx__pack(
      "{s:{s:I},s:{s:{s:s,s:s,s:I,s:I}}}", "$inc", "balance",
      (json_int_t)-amount, "$push", "pending", "tx", id, "op", "debit",
      "amount", (json_int_t)amount, "at", (json_int_t)dtx__now_ms());
  return 0;
}

/* The payer's debit (debit_op), with the read-back of I9 when it matched
 * nothing.  payer: the account as read (borrowed; NULL: read it first).
 * tried_min (stolen, may be NULL): the first attempt already ran, on this
 * min_balance, and matched nothing (the pair in prepare()): start with
 * its read-back. */
static int debit(dtx__exec_t *ex, const json_t *tx, const json_t *payer,
                 json_t *tried_min, enum dtx__marked *why) {
  const char *id = dtx__str(tx, "_id"), *from = dtx__str(tx, "from");
  for (int round = 0; round < 8; round++) {
    json_t *acct = NULL, *min = NULL;
    int rc, matched = 0;
    if (round == 0 && tried_min) {
      min = tried_min;
    } else {
      dtx__kit_upd_t u;
      if (round == 0 && payer)
        acct = json_incref((json_t *)payer);
      else if ((rc = read_account(ex, from, &acct, why)) || !acct)
        return rc;
      int decided = debit_op(tx, acct, &u, &min, why);
      json_decref(acct);
      if (decided)
        return 0;
      if ((rc = dtx__kit_update(ex, u.point, u.coll, u.filter, u.update,
                                &matched)) ||
          matched) {
        json_decref(min);
        *why = DTX__MK_DONE;
        return rc;
      }
    }
    /* Read back: done before, fenced, gone, min_balance changed (again),
     * or the limit refuses it. */
    if ((rc = read_account(ex, from, &acct, why)) || !acct) {
      json_decref(min);
      return rc;
    }
    int changed = !json_equal(json_object_get(acct, "min_balance"), min);
    if (dtx__has_tombstone(acct, id))
      *why = DTX__MK_FENCED;
    else if (dtx__marker(acct, id, "debit"))
      *why = DTX__MK_DONE;
    else
      *why = DTX__MK_REFUSED;
    json_decref(acct);
    json_decref(min);
    if (!changed || *why != DTX__MK_REFUSED)
      return 0;
  }
  return dtx__err(DTX_EBUSY, "the min_balance of account %s kept changing "
                  "during transfer %s", from, id);
}

static const char *refusal_reason(enum dtx__marked why, int payer) {
  DTX_ASSERT(why != DTX__MK_DONE && why != DTX__MK_FENCED, "I5");
  if (why == DTX__MK_MISSING)
    return DTX_REASON_NOACCOUNT;
  if (why == DTX__MK_BADLIMIT)
    return DTX_REASON_BADLIMIT;
  return payer ? DTX_REASON_FUNDS : DTX_REASON_PAYEE_LIMIT;
}

/* Runs the prepare phase of a transfer this executor has just claimed,
 * then commits, or rolls back when an account step is refused.  The payer
 * debit and the payee mark do not depend on each other, so they go to
 * the store together (dtx__kit_update_many: one round trip, one commit),
 * each behind its own fault point; transfer.debit_mark.done is reached
 * with both results back.  Either may land while the other is refused:
 * a payee marked while the payer was not debited is rolled back like any
 * refusal (the mark carries no money, I2).  payer: the payer as read at
 * submission (borrowed, may be NULL).  Returns with *out the document
 * after the last transition it made (or NULL when it was fenced off, and
 * the caller rereads). */
static int prepare(dtx__exec_t *ex, const json_t *tx, const json_t *payer,
                   json_t **out) {
  enum dtx__marked why = DTX__MK_DONE;
  json_t *acct = NULL, *min = NULL;
  dtx__kit_upd_t u[2];
  int rc, pair = 0;
  *out = NULL;
  DTX_ASSERT(dtx__state_is(tx, DTX_ST_PREPARING), "I3"); /* the caller's */
  if (payer)
    acct = json_incref((json_t *)payer);
  else if ((rc = read_account(ex, dtx__str(tx, "from"), &acct, &why)))
    return rc;
  if (acct)
    pair = dtx__tx_pair_ops(tx, acct, u, &min, &why);
  json_decref(acct);
  if (pair &&
      (rc = dtx__kit_update_many(ex, u, 2, "transfer.debit_mark.done"))) {
    json_decref(min);
    return rc;
  }
  return dtx__tx_prepare_rest(ex, tx, pair, pair && u[0].matched,
                              pair && u[1].matched, min, why, out);
}

int dtx__tx_pair_ops(const json_t *tx, const json_t *payer,
                     dtx__kit_upd_t u[2], json_t **min,
                     enum dtx__marked *why) {
  if (debit_op(tx, payer, &u[0], min, why))
    return 0;
  dtx__tx_mark_op(&u[1], tx);
  return 1;
}

int dtx__tx_prepare_rest(dtx__exec_t *ex, const json_t *tx, int pair,
                         int debited, int marked, json_t *min,
                         enum dtx__marked why, json_t **out) {
  enum dtx__marked mwhy;
  int rc;
  *out = NULL;
  if (pair) {
    if (debited) {
      json_decref(min);
      why = DTX__MK_DONE;
    } else if ((rc = debit(ex, tx, NULL, min, &why))) {
      return rc;
    }
  } else {
    json_decref(min);
  }
  if (why == DTX__MK_FENCED)
    return 0; /* rolled back behind our back: the caller rereads */
  if (why != DTX__MK_DONE) {
    rc = begin_rollback(ex, tx, refusal_reason(why, 1), out);
    return rc == DTX_ENOMATCH ? 0 : rc;
  }
  if (pair && marked)
    mwhy = DTX__MK_DONE;
  else if ((rc = dtx__tx_mark_payee(ex, tx, pair, &mwhy)))
    return rc;
  if (mwhy == DTX__MK_FENCED)
    return 0;
  if (mwhy != DTX__MK_DONE) {
    rc = begin_rollback(ex, tx, refusal_reason(mwhy, 0), out);
    return rc == DTX_ENOMATCH ? 0 : rc;
  }
  /* I6: the commit starts only once both of the prepare pair landed. */
  DTX_ASSERT(why == DTX__MK_DONE && mwhy == DTX__MK_DONE, "I6");
  rc = move(ex, "transfer.commit", tx, DTX_ST_PREPARING, DTX_ST_COMMITTED,
            DTX__FENCED, NULL, out);
  return rc == DTX_ENOMATCH ? 0 : rc; /* fenced: recovery rolled it back */
}

/* ---- commit and rollback phases (idempotent; anyone may run them) ------------- */

/* The rest of a take step whose first attempt (at point) ran in a pair
 * and matched or not. */
static int take_rest(dtx__exec_t *ex, const char *point, int matched,
                     const char *acct, const json_t *tx, const char *op,
                     json_t *inc, enum dtx__taken *got) {
  if (matched) {
    json_decref(inc);
    *got = DTX__TAKEN;
    return 0;
  }
  return dtx__tx_take_marker_after(ex, point, acct, dtx__str(tx, "_id"), op,
                                   dtx__int(tx, "amount"), inc, 0, 1, got);
}

/* committed -> succeeded: the payer's debit marker goes (the money left
 * it at the debit) and the payee's credit marker goes with the money.
 * The two do not depend on each other and go to the store together
 * (transfer.clear_credit.done is reached with both results back), so the
 * payee may be credited before the payer is cleared (I2 counts the money
 * in flight once either way).  The credit always fits: mark_payee
 * reserved it under the ceiling (I7).  A payee that is gone (deleted
 * with bypass_validation) is DTX_ESTATE and the transfer stays committed:
 * its money is in flight until an operator restores the account
 * (docs/transfers.md), never reported as delivered. */
static int finish_commit(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  json_t *cinc, *binc;
  dtx__kit_upd_t u[2];
  int rc;
  *out = NULL;
  DTX_ASSERT(dtx__state_is(tx, DTX_ST_COMMITTED), "I5"); /* the caller's */
  dtx__tx_clear_credit_ops(tx, u, &cinc, &binc);
  if ((rc = dtx__kit_update_many(ex, u, 2, "transfer.clear_credit.done"))) {
    json_decref(cinc);
    json_decref(binc);
    return rc;
  }
  return dtx__tx_finish_rest(ex, tx, u[0].matched, u[1].matched, cinc, binc,
                             out);
}

void dtx__tx_clear_credit_ops(const json_t *tx, dtx__kit_upd_t u[2],
                              json_t **cinc, json_t **binc) {
  const char *id = dtx__str(tx, "_id"), *to = dtx__str(tx, "to");
  const char *from = dtx__str(tx, "from");
  int64_t amount = dtx__int(tx, "amount");
  *cinc = dtx__pack("{s:I}", "ceiling", (json_int_t)-amount);
  *binc = dtx__pack("{s:I}", "balance", (json_int_t)amount);
  dtx__tx_take_op(&u[0], "transfer.clear_payer", from, id, "debit", amount,
                  *cinc, 0);
  dtx__tx_take_op(&u[1], "transfer.credit_payee", to, id, "credit", amount,
                  *binc, 0);
}

int dtx__tx_finish_rest(dtx__exec_t *ex, const json_t *tx, int cleared,
                        int credited, json_t *cinc, json_t *binc,
                        json_t **out) {
  const char *id = dtx__str(tx, "_id"), *to = dtx__str(tx, "to");
  const char *from = dtx__str(tx, "from");
  int64_t amount = dtx__int(tx, "amount");
  enum dtx__taken got;
  int rc;
  *out = NULL;
  /* A payer that is gone lost its balance with it; the transfer committed,
   * so the payee is still owed the amount. */
  if ((rc = take_rest(ex, "transfer.clear_payer", cleared, from, tx, "debit",
                      cinc, &got))) {
    json_decref(binc);
    return rc;
  }
  if ((rc = take_rest(ex, "transfer.credit_payee", credited, to, tx, "credit",
                      binc, &got)))
    return rc;
  if (got == DTX__GONE)
    return dtx__err(DTX_ESTATE, "transfer %s is committed but its payee "
                    "account %s is gone: the credit of %lld did not land "
                    "(the transfer stays committed; see docs/transfers.md, "
                    "\"An account deleted mid-transfer\")", id, to,
                    (long long)amount);
  /* I9: succeeded only once the payee's credit landed (now or before). */
  DTX_ASSERT(got == DTX__TAKEN || got == DTX__ABSENT, "I9");
  rc = move(ex, "transfer.finish", tx, DTX_ST_COMMITTED, DTX_ST_SUCCEEDED, 0,
            NULL, out);
  return rc == DTX_ENOMATCH ? 0 : rc; /* someone else finished it */
}

/* Whether the rollback of tx leaves tombstones: only when someone other
 * than the executor rolled it back (takeover, cancel), so the executor may
 * still wake up and try a prepare step; an executor's own decline leaves
 * nobody who could (I8). */
static int leaves_tombstones(const json_t *tx) {
  const char *r = dtx__str(tx, "reason");
  return !r || strcmp(r, DTX_REASON_CANCELED) == 0 ||
         strcmp(r, DTX_REASON_ABANDONED) == 0;
}

/* rolling_back -> failed: the payer gets its debit back, the payee's
 * credit marker goes (and its reservation under the ceiling). */
static int finish_rollback(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  const char *id = dtx__str(tx, "_id"), *from = dtx__str(tx, "from");
  const char *reason = dtx__str(tx, "reason");
  int64_t amount = dtx__int(tx, "amount");
  int tomb = leaves_tombstones(tx);
  enum dtx__taken got;
  int rc;
  *out = NULL;
  DTX_ASSERT(dtx__state_is(tx, DTX_ST_ROLLING_BACK), "I5"); /* the caller's */
  rc = dtx__tx_take_marker(ex, "transfer.rollback.refund_payer", from, id,
                           "debit", amount,
                           dtx__pack("{s:I}", "balance", (json_int_t)amount),
                           tomb, &got);
  if (rc)
    return rc;
  /* A payer gone before its debit is the reason of the rollback; one gone
   * after it took its refund with it: not a "failed, nothing moved". */
  if (got == DTX__GONE &&
      !(reason && strcmp(reason, DTX_REASON_NOACCOUNT) == 0))
    return dtx__err(DTX_ESTATE, "transfer %s is rolling back but its payer "
                    "account %s is gone: a refund of %lld may be owed (see "
                    "docs/transfers.md, \"An account deleted mid-transfer\")",
                    id, from, (long long)amount);
  rc = dtx__tx_take_marker(ex, "transfer.rollback.unmark_payee",
                           dtx__str(tx, "to"), id, "credit", amount,
                           dtx__pack("{s:I}", "ceiling", (json_int_t)-amount),
                           tomb, &got);
  if (rc)
    return rc;
  rc = move(ex, "transfer.rollback.finish", tx, DTX_ST_ROLLING_BACK,
            DTX_ST_FAILED, 0, NULL, out);
  return rc == DTX_ENOMATCH ? 0 : rc;
}

int dtx__tx_takeover(dtx__exec_t *ex, const json_t *tx, const char *reason,
                     json_t *cond, const char *point, json_t **out) {
  json_t *taken = NULL;
  *out = NULL;
  if (!dtx__state_is(tx, DTX_ST_PREPARING)) {
    json_decref(cond);
    return DTX_ENOMATCH;
  }
  int rc = dtx__kit_takeover(ex, TX, tx, point, DTX_ST_ROLLING_BACK, cond,
                             dtx__pack("{s:s}", "reason", reason), &taken);
  if (rc)
    return rc;
  rc = finish_rollback(ex, taken, out);
  json_decref(taken);
  return rc;
}

/* ---- driving a transfer to its end -------------------------------------------- */

/* dtx__tx_drive; with mine, start is a transfer ex has just recorded
 * claimed (submit), whose prepare phase it runs first, with the payer as
 * read at submission (borrowed, may be NULL). */
static int drive(dtx__exec_t *ex, const json_t *start, int wait_owner,
                 int mine, const json_t *payer, json_t **out) {
  json_t *tx = json_incref((json_t *)start), *next = NULL;
  char id[160];
  int rc = 0;
  snprintf(id, sizeof id, "%s", dtx__str(tx, "_id"));
  for (int guard = 0; guard < 10000 && !dtx__tx_terminal(tx); guard++) {
    next = NULL;
    if (mine && dtx__state_is(tx, DTX_ST_PREPARING)) {
      mine = 0;
      rc = prepare(ex, tx, payer, &next);
    } else if (dtx__state_is(tx, DTX_ST_INITIATED)) {
      rc = claim(ex, tx, &next);
      if (rc == 0) {
        json_t *claimed = next;
        rc = prepare(ex, claimed, NULL, &next);
        json_decref(claimed);
      }
    } else if (dtx__state_is(tx, DTX_ST_COMMITTED)) {
      rc = finish_commit(ex, tx, &next);
    } else if (dtx__state_is(tx, DTX_ST_ROLLING_BACK)) {
      rc = finish_rollback(ex, tx, &next);
    } else if (dtx__state_is(tx, DTX_ST_PREPARING)) {
      /* Someone else's claim.  Wait for it to finish or its lease to lapse,
       * then take it over (fencing the owner by the epoch bump). */
      if (!wait_owner)
        break;
      if (dtx__int(tx, "lease_until") > dtx__now_ms())
        rc = dtx__kit_await(ex, TX, tx, &next);
      else
        rc = dtx__tx_takeover(ex, tx, DTX_REASON_ABANDONED, NULL,
                              "transfer.recover.takeover", &next);
    } else {
      rc = dtx__err(DTX_ESTATE, "transfer %s has unknown state '%s'", id,
                    dtx__str(tx, "state") ? dtx__str(tx, "state") : "?");
      break;
    }
    if (rc && rc != DTX_ENOMATCH)
      break;
    rc = 0;
    if (!next && (rc = dtx__kit_get(ex, DTX_TRANSFERS, id, &next)))
      break;
    json_decref(tx);
    tx = next;
  }
  if (rc) {
    json_decref(tx);
    return dtx__tx_fail(ex, id, rc, out);
  }
  *out = tx;
  return rc;
}

int dtx__tx_fail(dtx__exec_t *ex, const char *id, int rc, json_t **out) {
  DTX_ASSERT(rc < 0 && DTX__IS_CODE(rc), "transfer.fail");
  /* The error's detail, kept across the read below (every store call
   * starts with a clean detail), and naming the transfer: an OVERFLOW or
   * TYPE from an account step says which transfer it stopped. */
  char detail[400];
  const char *d = dtx_errdetail();
  snprintf(detail, sizeof detail, "%s", d && *d ? d : dtx_strerror(rc));
  /* Show where it stands now -- unless reading it is what failed: then
   * nothing, rather than a document that may be stale. */
  json_t *cur = NULL;
  int got = rc != DTX_EUNAVAILABLE &&
            dtx__kit_get(ex, DTX_TRANSFERS, id, &cur) == 0;
  *out = got ? cur : NULL;
  if (rc == DTX_ENOTFOUND) /* the store lost it (FLUSHALL, a failover) */
    return dtx__err(DTX_EBACKEND, "transfer '%s' vanished from the store "
                    "while running", id);
  if (strstr(detail, id))
    return dtx__err(rc, "%s", detail);
  return dtx__err(rc, "transfer %s: %s", id, detail);
}

int dtx__tx_drive_ex(dtx__exec_t *ex, const json_t *start, int wait_owner,
                     int mine, const json_t *payer, json_t **out) {
  return drive(ex, start, wait_owner, mine, payer, out);
}

int dtx__tx_drive(dtx__exec_t *ex, const json_t *start, int wait_owner,
                  json_t **out) {
  return drive(ex, start, wait_owner, 0, NULL, out);
}

/* The worker's claims: up to max initiated transfers in one round (the
 * kit's claim-many: one find, one bulk write of by-_id claims).  Any
 * initiated transfer will do, but the find is sorted -- oldest first, on
 * the index {state, created, _id} -- so the store walks the index and
 * stops after the few it needs: unsorted, a find on Redis reads every
 * match, and each round read the whole backlog (docs/batching.md).  The
 * claim spreads (c.spread): it picks max at random among the oldest few
 * times max, so threads racing for work do not all meet on the oldest
 * one.  Every transfer has `created` (the validator requires it). */
static int tx_claim(dtx__exec_t *ex, size_t max, json_t **out) {
  json_t *due = dtx__pack("{s:s}", "state", DTX_ST_INITIATED);
  json_t *sort = dtx__pack("{s:i,s:i}", "created", 1, "_id", 1);
  dtx__claim_t c = {.point = "transfer.claim", .due = due, .sort = sort,
                    .to = DTX_ST_PREPARING, .spread = 1};
  int rc = due && sort ? dtx__kit_claim_many(ex, TX, &c, max, out)
                       : DTX_ENOMEM;
  json_decref(due);
  json_decref(sort);
  return rc;
}

/* One transfer (--batch 1): a claim round of one, for the same reasons. */
static int tx_claim_next(dtx__exec_t *ex, json_t **out) {
  json_t *won = NULL;
  int rc = tx_claim(ex, 1, &won);
  *out = rc == 0 ? json_incref(json_array_get(won, 0)) : NULL;
  json_decref(won);
  return rc;
}

/* The batched worker path: the claimed batch is driven together by
 * many.c's lockstep from the payers' read on. */
static int tx_claim_many(dtx__exec_t *ex, size_t max, json_t **out) {
  return tx_claim(ex, max, out);
}

static void tx_drive_many(dtx__exec_t *ex, const json_t *items, json_t **outs,
                          int *rcs, char **details) {
  size_t n = json_array_size(items);
  const json_t **docs = calloc(n ? n : 1, sizeof *docs);
  if (!docs) {
    for (size_t i = 0; i < n; i++) {
      outs[i] = json_incref(json_array_get(items, i));
      rcs[i] = DTX_ENOMEM;
      details[i] = NULL;
    }
    return;
  }
  for (size_t i = 0; i < n; i++)
    docs[i] = json_array_get(items, i);
  dtx__tx_drive_claimed_many(ex, docs, n, outs, rcs, details);
  free(docs);
}

/* Drives a transfer: one this executor just claimed (preparing, its owner)
 * goes through the prepare phase first. */
static int tx_drive_claimed(dtx__exec_t *ex, const json_t *item, json_t **out) {
  json_t *next = NULL;
  int rc = 0;
  *out = NULL;
  if (dtx__state_is(item, DTX_ST_PREPARING) &&
      dtx__str_is(item, "owner", ex->owner)) {
    rc = prepare(ex, item, NULL, &next);
    if (rc == 0 && !next) /* fenced off: see where it stands now */
      rc = dtx__kit_get(ex, DTX_TRANSFERS, dtx__str(item, "_id"), &next);
    if (rc) {
      json_decref(next);
      *out = json_incref((json_t *)item);
      return rc;
    }
    item = next;
  }
  rc = dtx__tx_drive(ex, item, 1, out);
  json_decref(next);
  return rc;
}

/* ---- the public API --------------------------------------------------------------- */

/* The start of the calls on one transfer: *out NULL, the executor made
 * from opts (may be NULL), the call frame opened -- the caller closes it
 * in every case.  DTX_EINVAL for a NULL id. */
static int begin_on(dtx__call_t *c, dtx__exec_t *ex, dtx_store_t *st,
                    const dtx_exec_opts_t *opts, const char *id,
                    json_t **out) {
  *out = NULL;
  dtx__exec_from(ex, st, opts);
  dtx__call_begin(c, ex->deadline_ms);
  /* Checked as submit checks it, so a byte no id holds (0xff) is INVAL
   * here, not an out-of-memory from building the {_id: id} filter. */
  return id ? dtx__check_ident("transfer id", id)
            : dtx__err(DTX_EINVAL, "no transfer id");
}

/* The transfer id; DTX_ENOTFOUND naming it when there is none. */
static int get_tx(dtx__exec_t *ex, const char *id, json_t **out) {
  int rc = dtx__kit_get(ex, DTX_TRANSFERS, id, out);
  return rc == DTX_ENOTFOUND ? dtx__err(rc, "no transfer '%s'", id) : rc;
}

int dtx_transfer_run(dtx_store_t *st, const char *id,
                     const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *tx = NULL;
  int rc = begin_on(&c, &ex, st, opts, id, out);
  if (rc == 0 && (rc = get_tx(&ex, id, &tx)) == 0)
    rc = dtx__tx_drive(&ex, tx, 1, out);
  json_decref(tx);
  return dtx__call_end(&c, rc);
}

/* One transfer is the batch of one (transfer/many.c): the same six
 * rounds, the same fault points, the same fallback to the sequential
 * drive, so every transfer row of the crash, pause and error suites runs
 * the batch driver. */
int dtx_transfer_execute(dtx_store_t *st, const dtx_transfer_req_t *req,
                         const dtx_exec_opts_t *opts, json_t **out) {
  dtx_transfer_result_t res;
  *out = NULL;
  if (!req) {
    dtx__err_clear();
    return dtx__err(DTX_EINVAL, "transfer needs from and to accounts");
  }
  (void)dtx_transfer_execute_many(st, req, 1, opts, &res);
  int rc = res.rc;
  *out = res.tx;
  res.tx = NULL;
  if (rc) /* its own words, not the batch's summary */
    rc = res.detail ? dtx__err(rc, "%s", res.detail) : rc;
  dtx_transfer_results_clear(&res, 1);
  return rc;
}

int dtx_transfer_get(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = begin_on(&c, &ex, st, NULL, id, out);
  if (rc == 0)
    rc = get_tx(&ex, id, out);
  return dtx__call_end(&c, rc);
}

static const char *const states[] = {
    DTX_ST_INITIATED, DTX_ST_PREPARING,    DTX_ST_COMMITTED,
    DTX_ST_SUCCEEDED, DTX_ST_ROLLING_BACK, DTX_ST_FAILED, NULL};

int dtx_transfer_list(dtx_store_t *st, const char *state,
                      const dtx_page_t *page, json_t **out) {
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, dtx__kit_list_state(st, DTX_TRANSFERS, states,
                                               "state", state, page, out));
}

static int cancel(dtx__exec_t *ex, const char *id, json_t **out) {
  json_t *tx = NULL, *next = NULL;
  int rc;
  if ((rc = get_tx(ex, id, &tx)))
    return rc;
  for (int guard = 0; guard < 100; guard++) {
    if (dtx__state_is(tx, DTX_ST_COMMITTED) ||
        dtx__state_is(tx, DTX_ST_SUCCEEDED)) {
      *out = tx;
      return dtx__err(DTX_ESTATE,
                      "transfer %s is %s; make a reverse transfer instead", id,
                      dtx__str(tx, "state"));
    }
    if (dtx__state_is(tx, DTX_ST_FAILED) ||
        dtx__state_is(tx, DTX_ST_ROLLING_BACK)) {
      rc = dtx__tx_drive(ex, tx, 1, out); /* already failing: finish it */
      json_decref(tx);
      return rc;
    }
    if (dtx__state_is(tx, DTX_ST_INITIATED))
      rc = move(ex, "transfer.cancel.begin", tx, DTX_ST_INITIATED,
                DTX_ST_FAILED, 0,
                dtx__pack("{s:s}", "reason", DTX_REASON_CANCELED), &next);
    else /* preparing: fence the running executor off, lease or not */
      rc = dtx__tx_takeover(ex, tx, DTX_REASON_CANCELED, json_object(),
                            "transfer.cancel.begin", &next);
    if (rc == 0 && next) {
      DTX_ASSERT(dtx__state_is(next, DTX_ST_FAILED), "I5"); /* never committed */
      json_decref(tx);
      *out = next;
      return 0;
    }
    json_decref(next);
    next = NULL;
    if (rc && rc != DTX_ENOMATCH) {
      json_decref(tx);
      return rc;
    }
    json_decref(tx); /* it moved on: look again */
    if ((rc = dtx__kit_get(ex, DTX_TRANSFERS, id, &tx)))
      return rc;
  }
  json_decref(tx);
  return dtx__err(DTX_ECONFLICT, "transfer %s kept changing during cancel", id);
}

int dtx_transfer_cancel(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = begin_on(&c, &ex, st, NULL, id, out);
  if (rc == 0)
    rc = cancel(&ex, id, out);
  return dtx__call_end(&c, rc);
}

/* ---- the method table ---------------------------------------------------------------- */

static const char *const collections[] = {DTX_ACCOUNTS, DTX_TRANSFERS,
                                          DTX_OPENINGS, NULL};

static const dtx__index_def_t indexes[] = {
    /* the worker's claim walks it (tx_claim), `transfer list --state`
     * pages along it, recovery's and the audit's state queries use its
     * prefix */
    {DTX_TRANSFERS, "{\"state\":1,\"created\":1,\"_id\":1}", 0, 0},
    /* `transfer list` (all states) pages along it, from an --after's
     * place (dtx__kit_list's keyset): a page deep in the list costs what
     * the first does */
    {DTX_TRANSFERS, "{\"created\":1,\"_id\":1}", 0, 0},
    /* `account list` pages along it: the planner walks no primary key,
     * so the _id order a keyset walks is an index of its own */
    {DTX_ACCOUNTS, "{\"_id\":1}", 0, 0},
    {DTX_ACCOUNTS, "{\"pending.tx\":1}", 0, 0},
    {DTX_ACCOUNTS, "{\"voids.tx\":1}", 0, 0},
    {DTX_ACCOUNTS, "{\"unregistered\":1}", 0, 1}, /* recovery's scan */
    {NULL, NULL, 0, 0},
};

/* The shapes the protocol relies on (docs/transfers.md, "Protected
 * collections"): a write through the generic document commands that
 * breaks one is refused (DTX_EVALIDATION), and the audit reports any
 * document that does not match (bypass_validation, or older stores). */
#define ID "{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128}"
#define LONG "{\"bsonType\":\"long\"}"
#define AMOUNT "{\"bsonType\":\"long\",\"minimum\":1}"
static const char transfer_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"from\",\"to\",\"amount\",\"state\",\"reason\","
    "\"created\"," DTX__KIT_ITEM_REQUIRED "],"
    "\"properties\":{\"_id\":" ID ",\"from\":" ID ",\"to\":" ID
    ",\"amount\":" AMOUNT ","
    "\"state\":{\"enum\":[\"" DTX_ST_INITIATED "\",\"" DTX_ST_PREPARING
    "\",\"" DTX_ST_COMMITTED "\",\"" DTX_ST_SUCCEEDED "\",\"" DTX_ST_ROLLING_BACK
    "\",\"" DTX_ST_FAILED "\"]},"
    "\"reason\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"created\":" LONG "," DTX__KIT_ITEM_PROPS "}}}";
static const char account_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"balance\",\"min_balance\",\"opening_balance\","
    "\"pending\",\"voids\"],"
    "\"properties\":{\"_id\":" ID ",\"balance\":" LONG ","
    "\"min_balance\":{\"bsonType\":[\"long\",\"null\"]},"
    "\"opening_balance\":" LONG ",\"ceiling\":" LONG ","
    "\"unregistered\":{\"enum\":[true]},"
    "\"pending\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"tx\",\"op\",\"amount\",\"at\"],"
    "\"additionalProperties\":false,\"properties\":{\"tx\":" ID ","
    "\"op\":{\"enum\":[\"debit\",\"credit\"]},\"amount\":" AMOUNT ","
    "\"at\":" LONG "}}},"
    "\"voids\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"tx\",\"at\"],\"additionalProperties\":false,"
    "\"properties\":{\"tx\":" ID ",\"at\":" LONG "}}}}}}";
static const char opening_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"opening_balance\",\"at\"],"
    "\"additionalProperties\":false,"
    "\"properties\":{\"_id\":" ID ",\"opening_balance\":" LONG ","
    "\"at\":" LONG "}}}";
#undef ID
#undef LONG
#undef AMOUNT

/* What an update may change (docs/validation.md, "Transition rules";
 * docs/transfers.md, "What a plain write may change").  The first object
 * of each holds for every writer, the protocol's steps included: it is
 * the diagram and the invariants above, as the store can check them on
 * one document.  The second ("scope": "plain") holds for the generic
 * document commands only.  Every account field the protocol keeps is a
 * promise that spans documents -- a marker comes off only once its
 * transfer committed or rolled back (I4, I6), a balance moves only with
 * a marker (I2), the ceiling is the balance plus the markers (I7), a
 * limit is met when it is set (I1) -- and a plain write cannot show that
 * it is a step that was due, so it may change none of them: money moves
 * through `doctx transfer`, limits through `doctx account limit`.  A
 * transfer's state moves only by the protocol's commands too (a commit
 * typed by hand would claim money that never moved), and nothing may be
 * inserted by hand (`account create`, `transfer`: their checks are the
 * promise).  Only the transfer pattern's own steps are exempt ("steps"):
 * a step of another pattern that wrote here would be a plain write (the
 * orders and interest pay through this pattern's steps).  Other fields of
 * a document are the user's. */
#define WHY_PLAIN(what)                                                     \
  "\"why\":\"" what " change only through doctx's account and transfer "     \
  "commands (docs/transfers.md)\""
static const char account_moves[] =
    "[{\"immutable\":[\"opening_balance\"],"
    /* account create inserts it unregistered and without markers; the
     * registry's last write takes the mark off, for good (R1) */
    "\"insert\":{\"unregistered\":true,\"pending\":{\"$size\":0},"
    "\"voids\":{\"$size\":0}},"
    "\"moves\":[{\"name\":\"unregistered\",\"from\":{\"unregistered\":true},"
    "\"to\":{}},"
    "{\"name\":\"registered\",\"from\":{\"unregistered\":{\"$exists\":false}},"
    "\"to\":{\"unregistered\":{\"$exists\":false}}}]},"
    "{\"scope\":\"plain\",\"steps\":[\"transfer\"],\"insert\":false,"
    "\"immutable\":[\"balance\",\"min_balance\",\"opening_balance\","
    "\"ceiling\",\"pending\",\"voids\",\"unregistered\"]," WHY_PLAIN("accounts")
    "}]";
#define REASONS                                                             \
  "[\"" DTX_REASON_FUNDS "\",\"" DTX_REASON_NOACCOUNT "\",\""                \
  DTX_REASON_CANCELED "\",\"" DTX_REASON_ABANDONED "\",\""                     \
  DTX_REASON_PAYEE_LIMIT "\",\"" DTX_REASON_BADLIMIT "\"]"
#define MOVE(name, from, to)                                                \
  "{\"name\":\"" name "\",\"from\":{\"state\":\"" from "\"},"              \
  "\"to\":{\"state\":\"" to "\""
static const char transfer_moves[] =
    "[{\"immutable\":[\"from\",\"to\",\"amount\",\"created\"],"
    "\"increasing\":[\"epoch\"],"
    /* recorded initiated (--async), or claimed by its executor */
    "\"insert\":{\"reason\":null,\"$or\":[{\"state\":\"" DTX_ST_INITIATED
    "\",\"epoch\":0},{\"state\":\"" DTX_ST_PREPARING "\",\"epoch\":1}]},"
    "\"moves\":["
    MOVE("claim", DTX_ST_INITIATED, DTX_ST_PREPARING) ",\"reason\":null}},"
    MOVE("cancel", DTX_ST_INITIATED, DTX_ST_FAILED)
    ",\"reason\":\"" DTX_REASON_CANCELED "\"}},"
    /* the lease renewed (many.c keep_lease) */
    MOVE("renew", DTX_ST_PREPARING, DTX_ST_PREPARING) ",\"reason\":null}},"
    MOVE("commit", DTX_ST_PREPARING, DTX_ST_COMMITTED) ",\"reason\":null}},"
    MOVE("roll back", DTX_ST_PREPARING, DTX_ST_ROLLING_BACK)
    ",\"reason\":{\"$in\":" REASONS "}}},"
    MOVE("finish", DTX_ST_COMMITTED, DTX_ST_SUCCEEDED) ",\"reason\":null}},"
    MOVE("rolled back", DTX_ST_ROLLING_BACK, DTX_ST_FAILED)
    ",\"reason\":{\"$in\":" REASONS "}}}]},"
    "{\"scope\":\"plain\",\"steps\":[\"transfer\"],\"insert\":false,"
    "\"immutable\":[\"from\",\"to\",\"amount\",\"state\",\"reason\","
    "\"created\",\"owner\",\"lease_until\",\"epoch\",\"updated\"],"
    WHY_PLAIN("transfers") "}]";
#undef MOVE
#undef REASONS
/* An opening record is written once (account.c, "The registry"). */
static const char opening_moves[] =
    "[{\"immutable\":[\"opening_balance\",\"at\"]},"
    "{\"scope\":\"plain\",\"steps\":[\"transfer\"],\"insert\":false," WHY_PLAIN("opening records")
    "}]";
#undef WHY_PLAIN

/* The shape of a transfer (kit.h, dtx__shape_def_t): what the diagram's
 * moves leave together.  A rolling back or failed transfer, and only
 * such, has a reason (I5); an initiated one was never claimed (epoch 0,
 * no owner); every other was (I3: epoch >= 1 and an owner), but a failed
 * one canceled before its claim; from and to differ (dtx__tx_check_req). */
static int transfer_fits(const json_t *tx, char *why, size_t n) {
  const char *st = dtx__str(tx, "state"), *f = dtx__str(tx, "from");
  const json_t *reason = json_object_get(tx, "reason");
  const json_t *epoch = json_object_get(tx, "epoch");
  int failing = dtx__state_is(tx, DTX_ST_ROLLING_BACK) ||
                dtx__state_is(tx, DTX_ST_FAILED);
  int unclaimed = json_is_integer(epoch) && json_integer_value(epoch) == 0 &&
                  json_is_null(json_object_get(tx, "owner"));
  int claimed = json_is_integer(epoch) && json_integer_value(epoch) >= 1 &&
                dtx__str(tx, "owner");
  if (!st)
    return dtx__shape_bad(why, n, "no state");
  if (failing != json_is_string(reason))
    return dtx__shape_bad(why, n, "state %s %s a reason", st,
                          failing ? "needs" : "has");
  if (f && dtx__str_is(tx, "to", f))
    return dtx__shape_bad(why, n, "from and to are one account, %s", f);
  if (dtx__state_is(tx, DTX_ST_INITIATED) ? !unclaimed
      : !claimed && !(unclaimed && dtx__str_is(tx, "reason",
                                               DTX_REASON_CANCELED)))
    return dtx__shape_bad(why, n, "state %s, yet %s claimed (epoch, owner)",
                          st, unclaimed ? "never" : "once");
  return 0;
}

static const dtx__shape_def_t shapes[] = {{DTX_TRANSFERS, transfer_fits},
                                          {NULL, NULL}};

static const dtx__rules_def_t rules[] = {
    /* An account goes only when nothing is pending on it and it holds no
     * money; a transfer only once it failed (a succeeded one is what
     * explains the balances, one in flight is still moving money). */
    {DTX_ACCOUNTS, account_shape,
     "{\"balance\":0,\"pending\":{\"$size\":0}}", account_moves},
    {DTX_TRANSFERS, transfer_shape, "{\"state\":\"" DTX_ST_FAILED "\"}",
     transfer_moves},
    /* An opening record outlives its account (account.c, "The
     * registry"): no document matches this guard, so none goes. */
    {DTX_OPENINGS, opening_shape, "{\"_id\":{\"$exists\":false}}",
     opening_moves},
    {NULL, NULL, NULL, NULL},
};

static const char *const fault_points[] = {
    /* forward path */
    "transfer.submit",
    "transfer.claim",
    "transfer.debit",
    "transfer.mark_payee",
    "transfer.debit_mark.done",
    "transfer.commit",
    "transfer.clear_payer",
    "transfer.credit_payee",
    "transfer.clear_credit.done",
    "transfer.finish",
    /* a batch item leaving the lockstep for the sequential drive (many.c) */
    "transfer.batch.split",
    /* rollback path */
    "transfer.rollback.begin",
    "transfer.rollback.refund_payer",
    "transfer.rollback.unmark_payee",
    "transfer.rollback.finish",
    /* cancel */
    "transfer.cancel.begin",
    /* account creation and limits (account.c) */
    "transfer.register",
    "transfer.registered",
    "transfer.account.limit",
    /* recovery (recover.c) */
    "transfer.recover.takeover",
    "transfer.recover.scan_markers",
    "transfer.recover.repair_marker",
    "transfer.recover.clear_tombstone",
    NULL,
};

const dtx__pattern_t dtx__transfer_pattern = {
    .name = "transfer",
    .kind = &dtx__tx_kind,
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .claim_next = tx_claim_next,
    .drive = tx_drive_claimed,
    .recover = dtx__tx_recover,
    .audit = dtx__tx_audit,
    .rules = rules,
    .claim_many = tx_claim_many,
    .drive_many = tx_drive_many,
    .shapes = shapes,
};
