/* transfer.c -- the two-phase transfer between two accounts: the state
 * machine, the public transfer API and the pattern's method table.  The
 * machinery every pattern shares (retry, fenced moves, claims, leases,
 * deadlines) is the kit's (txn/kit.h).
 *
 * A transfer touches two account documents, and the store makes only one
 * document at a time atomic.  The transfer document's state is the commit
 * point; every account step is a conditional single-document update made
 * idempotent by a marker carrying the transfer id (after reference 004).
 *
 *   initiated --claim--> preparing --commit--> committed --finish--> succeeded
 *       |                   |
 *       | cancel            +--funds/account/cancel/timeout--> rolling_back
 *       v                                                          |
 *     failed <-------------------------finish----------------------+
 *
 *   transition                      function            fault point
 *   (record initiated)              dtx_transfer_submit transfer.submit
 *   initiated -> preparing          claim(), claim_next transfer.claim
 *   (payer: debit + debit marker)   prepare()           transfer.debit
 *   (payee: credit marker)          prepare()           transfer.mark_payee
 *   preparing -> committed          prepare()           transfer.commit
 *   (payer: drop debit marker)      finish_commit()     transfer.clear_payer
 *   (payee: credit, drop marker)    finish_commit()     transfer.credit_payee
 *   committed -> succeeded          finish_commit()     transfer.finish
 *   preparing -> rolling_back       begin_rollback()    transfer.rollback.begin
 *                                   dtx__tx_takeover()  transfer.recover.takeover,
 *                                                       transfer.cancel.begin
 *   (payer: refund, tombstone)      finish_rollback()   transfer.rollback.refund_payer
 *   (payee: drop marker, tombstone) finish_rollback()   transfer.rollback.unmark_payee
 *   rolling_back -> failed          finish_rollback()   transfer.rollback.finish
 *   initiated -> failed             dtx_transfer_cancel transfer.cancel.begin
 * Recovery's own points (transfer.recover.*) are in recover.c.
 *
 * Account documents: {_id, balance, min_balance, opening_balance,
 * pending: [{tx, op:"debit"|"credit", amount, at}], voids: [{tx, at}]}.
 * A "void" is a tombstone: the rollback of an account step leaves one, and
 * every prepare step requires its absence, so an executor that wakes up
 * late (paused past its lease) cannot debit or mark after the rollback.
 *
 * Invariants (checked by asserts here and by dtx_audit() on the store):
 *  I1 A payer's balance never drops below its min_balance: the debit's
 *     filter demands balance >= min_balance + amount in the same atomic
 *     step (no limit when min_balance is null).
 *  I2 Money in flight: a debit marker holds `amount` out of circulation
 *     until the payer is cleared; between clearing the payer and crediting
 *     the payee, the payee's credit marker of a committed transfer does.
 *     So sum(balance) + in flight == sum(opening_balance) at every moment.
 *  I3 Every state change is conditioned on the expected current state, and
 *     preparing-phase changes also on the claim's epoch; recovery and
 *     cancel bump the epoch, so a stale owner's transitions fail.
 *  I4 Each account step matches at most once per transfer: debit and mark
 *     require no marker and no tombstone for the id; credit and refund
 *     require the marker and remove it in the same step.
 *  I5 The payee is credited only after commit; a committed transfer is
 *     never rolled back, a rolling_back one never commits.
 *  I6 An account lists a transfer in `pending` only while that transfer is
 *     non-terminal; tombstones only for failed transfers.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/err.h"

const dtx__kind_t dtx__tx_kind = {DTX_TRANSFERS, "state"};
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

/* ---- submission ------------------------------------------------------------ */

static int check_req(const dtx_transfer_req_t *req) {
  int rc;
  if (!req || !req->from || !req->to)
    return dtx__err(DTX_EINVAL, "transfer needs from and to accounts");
  if ((rc = dtx__check_ident("account id", req->from)) ||
      (rc = dtx__check_ident("account id", req->to)))
    return rc;
  if (req->id && (rc = dtx__check_ident("transfer id", req->id)))
    return rc;
  if (req->amount <= 0)
    return dtx__err(DTX_EINVAL, "amount must be a positive integer, got %lld",
                    (long long)req->amount);
  if (strcmp(req->from, req->to) == 0)
    return dtx__err(DTX_EINVAL, "from and to are the same account '%s'",
                    req->from);
  return 0;
}

static int same_params(const json_t *tx, const dtx_transfer_req_t *req) {
  const char *f = dtx__str(tx, "from"), *t = dtx__str(tx, "to");
  return f && t && strcmp(f, req->from) == 0 && strcmp(t, req->to) == 0 &&
         dtx__int(tx, "amount") == req->amount;
}

static int submit(dtx__exec_t *ex, const dtx_transfer_req_t *req,
                  json_t **out) {
  json_t *acct = NULL, *tx = NULL;
  char idbuf[25];
  int rc;
  if ((rc = check_req(req)))
    return rc;
  if ((rc = dtx__kit_ensure(ex->st, &dtx__transfer_pattern)))
    return rc;
  const char *accts[2] = {req->from, req->to};
  for (int i = 0; i < 2; i++) {
    rc = dtx__kit_get(ex, DTX_ACCOUNTS, accts[i], &acct);
    json_decref(acct);
    if (rc == DTX_ENOTFOUND)
      return dtx__err(DTX_ENOACCOUNT, "no account '%s'", accts[i]);
    if (rc)
      return rc;
  }
  const char *id = req->id;
  if (!id) {
    dtx__id_new(idbuf);
    id = idbuf;
  }
  int64_t now = dtx__now_ms();
  tx = json_pack("{s:s,s:s,s:s,s:I,s:s,s:n,s:n,s:I,s:I,s:I,s:I}", "_id", id,
                 "from", req->from, "to", req->to, "amount",
                 (json_int_t)req->amount, "state", DTX_ST_INITIATED, "reason",
                 "owner", "lease_until", (json_int_t)0, "epoch", (json_int_t)0,
                 "created", (json_int_t)now, "updated", (json_int_t)now);
  if (!tx)
    return DTX_ENOMEM;
  rc = dtx__kit_insert(ex, "transfer.submit", DTX_TRANSFERS, tx);
  if (rc == DTX_EDUPKEY) {
    /* The id exists: a retry of the same request returns it (at most once),
     * a different request under the same id is refused. */
    json_decref(tx);
    tx = NULL;
    if ((rc = dtx__kit_get(ex, DTX_TRANSFERS, id, &tx)))
      return rc;
    if (!same_params(tx, req)) {
      json_decref(tx);
      return dtx__err(DTX_ECONFLICT,
                      "transfer '%s' exists with different parameters", id);
    }
    rc = 0;
  }
  if (rc) {
    json_decref(tx);
    return rc;
  }
  *out = tx;
  return 0;
}

int dtx_transfer_submit(dtx_store_t *st, const dtx_transfer_req_t *req,
                        json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, submit(&ex, req, out));
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
              json_pack("{s:s}", "reason", reason), out);
}

/* Outcome of an account step that matched nothing, read back from the
 * account: which of the refusals it was. */
enum refusal { R_DONE, R_FENCED, R_MISSING, R_LIMIT, R_CHANGED };

/* Reads account id into *acct; a missing account is the refusal
 * R_MISSING (0, *acct NULL). */
static int read_account(dtx__exec_t *ex, const char *id, json_t **acct,
                        enum refusal *why) {
  int rc = dtx__kit_get(ex, DTX_ACCOUNTS, id, acct);
  if (rc == DTX_ENOTFOUND) {
    *why = R_MISSING;
    return 0;
  }
  return rc;
}

static int classify(dtx__exec_t *ex, const char *acct, const char *txid,
                    const char *op, const json_t *expect_min,
                    enum refusal *why) {
  json_t *a = NULL;
  int rc = read_account(ex, acct, &a, why);
  if (rc || !a)
    return rc;
  if (dtx__has_tombstone(a, txid))
    *why = R_FENCED;
  else if (dtx__marker(a, txid, op))
    *why = R_DONE;
  else if (expect_min && !json_equal(json_object_get(a, "min_balance"),
                                     (json_t *)expect_min))
    *why = R_CHANGED;
  else
    *why = R_LIMIT;
  json_decref(a);
  return 0;
}

/* The payer's debit: balance - amount >= min_balance, checked in the same
 * atomic step that takes the money and leaves the debit marker (I1, I4). */
static int debit(dtx__exec_t *ex, const json_t *tx, enum refusal *why) {
  const char *id = dtx__str(tx, "_id"), *from = dtx__str(tx, "from");
  int64_t amount = dtx__int(tx, "amount");
  for (;;) {
    json_t *acct = NULL;
    int rc = read_account(ex, from, &acct, why);
    if (rc || !acct)
      return rc;
    json_t *min = json_incref(json_object_get(acct, "min_balance"));
    json_decref(acct);
    int64_t floor;
    if (json_is_integer(min)) {
      if (__builtin_add_overflow((int64_t)json_integer_value(min), amount,
                                 &floor)) {
        json_decref(min);
        *why = R_LIMIT;
        return 0;
      }
    } else {
      floor = INT64_MIN + amount; /* no limit, but never wrap around */
    }
    json_t *filter = json_pack(
        "{s:s,s:O,s:{s:I},s:{s:s},s:{s:s}}", "_id", from, "min_balance", min,
        "balance", "$gte", (json_int_t)floor, "pending.tx", "$ne", id,
        "voids.tx", "$ne", id);
    json_t *upd = json_pack(
        "{s:{s:I},s:{s:{s:s,s:s,s:I,s:I}}}", "$inc", "balance",
        (json_int_t)-amount, "$push", "pending", "tx", id, "op", "debit",
        "amount", (json_int_t)amount, "at", (json_int_t)dtx__now_ms());
    int matched;
    rc = dtx__kit_update(ex, "transfer.debit", DTX_ACCOUNTS, filter, upd, &matched);
    if (rc == 0 && matched)
      *why = R_DONE;
    else if (rc == 0)
      rc = classify(ex, from, id, "debit", min, why);
    json_decref(min);
    if (rc || *why != R_CHANGED)
      return rc;
    /* min_balance changed under us: read it again and retry. */
  }
}

/* The payee's credit marker; the money arrives only after commit (I5). */
static int mark_payee(dtx__exec_t *ex, const json_t *tx, enum refusal *why) {
  const char *id = dtx__str(tx, "_id"), *to = dtx__str(tx, "to");
  int64_t amount = dtx__int(tx, "amount");
  json_t *filter = json_pack("{s:s,s:{s:I},s:{s:s},s:{s:s}}", "_id", to,
                             "balance", "$lte", (json_int_t)(INT64_MAX - amount),
                             "pending.tx", "$ne", id, "voids.tx", "$ne", id);
  json_t *upd = json_pack("{s:{s:{s:s,s:s,s:I,s:I}}}", "$push", "pending", "tx",
                          id, "op", "credit", "amount", (json_int_t)amount,
                          "at", (json_int_t)dtx__now_ms());
  int matched;
  int rc = dtx__kit_update(ex, "transfer.mark_payee", DTX_ACCOUNTS, filter,
                           upd, &matched);
  if (rc == 0 && matched)
    *why = R_DONE;
  else if (rc == 0)
    rc = classify(ex, to, id, "credit", NULL, why);
  return rc;
}

static const char *refusal_reason(enum refusal why, int payer) {
  if (why == R_MISSING)
    return DTX_REASON_NOACCOUNT;
  return payer ? DTX_REASON_FUNDS : DTX_REASON_PAYEE_LIMIT;
}

/* Runs the prepare phase of a transfer this executor has just claimed,
 * then commits, or rolls back when an account step is refused.  Returns
 * with *out the document after the last transition it made (or NULL when
 * it was fenced off, and the caller rereads). */
static int prepare(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  enum refusal why;
  int rc;
  *out = NULL;
  assert(dtx__state_is(tx, DTX_ST_PREPARING));
  if ((rc = debit(ex, tx, &why)))
    return rc;
  if (why == R_FENCED)
    return 0; /* rolled back behind our back: the caller rereads */
  if (why != R_DONE) {
    rc = begin_rollback(ex, tx, refusal_reason(why, 1), out);
    return rc == DTX_ENOMATCH ? 0 : rc;
  }
  if ((rc = mark_payee(ex, tx, &why)))
    return rc;
  if (why == R_FENCED)
    return 0;
  if (why != R_DONE) {
    rc = begin_rollback(ex, tx, refusal_reason(why, 0), out);
    return rc == DTX_ENOMATCH ? 0 : rc;
  }
  rc = move(ex, "transfer.commit", tx, DTX_ST_PREPARING, DTX_ST_COMMITTED,
            DTX__FENCED, NULL, out);
  return rc == DTX_ENOMATCH ? 0 : rc; /* fenced: recovery rolled it back */
}

/* ---- commit and rollback phases (idempotent; anyone may run them) ------------- */

static int finish_commit(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  const char *id = dtx__str(tx, "_id");
  int64_t amount = dtx__int(tx, "amount");
  int rc;
  *out = NULL;
  assert(dtx__state_is(tx, DTX_ST_COMMITTED));
  rc = dtx__kit_update(ex, "transfer.clear_payer", DTX_ACCOUNTS,
                       json_pack("{s:s,s:s}", "_id", dtx__str(tx, "from"),
                                 "pending.tx", id),
                       json_pack("{s:{s:{s:s,s:s}}}", "$pull", "pending", "tx",
                                 id, "op", "debit"),
                       NULL);
  if (rc)
    return rc;
  rc = dtx__kit_update(
      ex, "transfer.credit_payee", DTX_ACCOUNTS,
      json_pack("{s:s,s:{s:{s:s,s:s}}}", "_id", dtx__str(tx, "to"), "pending",
                "$elemMatch", "tx", id, "op", "credit"),
      json_pack("{s:{s:I},s:{s:{s:s}}}", "$inc", "balance", (json_int_t)amount,
                "$pull", "pending", "tx", id),
      NULL);
  if (rc)
    return rc;
  rc = move(ex, "transfer.finish", tx, DTX_ST_COMMITTED, DTX_ST_SUCCEEDED, 0,
            NULL, out);
  return rc == DTX_ENOMATCH ? 0 : rc; /* someone else finished it */
}

/* Refunds the payer if it was debited, and in any case leaves a tombstone
 * there, so a late debit is refused.  Loops because a late debit may land
 * between "no debit marker" and "push the tombstone". */
static int refund_payer(dtx__exec_t *ex, const json_t *tx) {
  const char *id = dtx__str(tx, "_id"), *from = dtx__str(tx, "from");
  int64_t amount = dtx__int(tx, "amount");
  for (int round = 0; round < 8; round++) {
    int matched, rc;
    rc = dtx__kit_update(
        ex, "transfer.rollback.refund_payer", DTX_ACCOUNTS,
        json_pack("{s:s,s:{s:{s:s,s:s}}}", "_id", from, "pending",
                  "$elemMatch", "tx", id, "op", "debit"),
        json_pack("{s:{s:I},s:{s:{s:s}},s:{s:{s:s,s:I}}}", "$inc", "balance",
                  (json_int_t)amount, "$pull", "pending", "tx", id, "$push",
                  "voids", "tx", id, "at", (json_int_t)dtx__now_ms()),
        &matched);
    if (rc || matched)
      return rc;
    rc = dtx__kit_update(
        ex, "transfer.rollback.refund_payer", DTX_ACCOUNTS,
        json_pack("{s:s,s:{s:s},s:{s:s}}", "_id", from, "pending.tx", "$ne",
                  id, "voids.tx", "$ne", id),
        json_pack("{s:{s:{s:s,s:I}}}", "$push", "voids", "tx", id, "at",
                  (json_int_t)dtx__now_ms()),
        &matched);
    if (rc || matched)
      return rc;
    json_t *a = NULL;
    rc = dtx__kit_get(ex, DTX_ACCOUNTS, from, &a);
    if (rc == DTX_ENOTFOUND)
      return 0;
    if (rc)
      return rc;
    int settled = dtx__has_tombstone(a, id) && !dtx__marker(a, id, "debit");
    json_decref(a);
    if (settled)
      return 0;
  }
  return dtx__err(DTX_EBACKEND, "refund of %s did not settle", id);
}

static int finish_rollback(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  const char *id = dtx__str(tx, "_id");
  int rc;
  *out = NULL;
  assert(dtx__state_is(tx, DTX_ST_ROLLING_BACK));
  if ((rc = refund_payer(ex, tx)))
    return rc;
  rc = dtx__kit_update(
      ex, "transfer.rollback.unmark_payee", DTX_ACCOUNTS,
      json_pack("{s:s,s:{s:s}}", "_id", dtx__str(tx, "to"), "voids.tx", "$ne",
                id),
      json_pack("{s:{s:{s:s}},s:{s:{s:s,s:I}}}", "$pull", "pending", "tx", id,
                "$push", "voids", "tx", id, "at", (json_int_t)dtx__now_ms()),
      NULL);
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
                             json_pack("{s:s}", "reason", reason), &taken);
  if (rc)
    return rc;
  rc = finish_rollback(ex, taken, out);
  json_decref(taken);
  return rc;
}

/* ---- driving a transfer to its end -------------------------------------------- */

int dtx__tx_drive(dtx__exec_t *ex, const json_t *start, int wait_owner,
                  json_t **out) {
  json_t *tx = json_incref((json_t *)start), *next = NULL;
  char id[160];
  int rc = 0;
  snprintf(id, sizeof id, "%s", dtx__str(tx, "_id"));
  for (int guard = 0; guard < 10000 && !dtx__tx_terminal(tx); guard++) {
    next = NULL;
    if (dtx__state_is(tx, DTX_ST_INITIATED)) {
      rc = claim(ex, tx, &next);
      if (rc == 0) {
        json_t *claimed = next;
        rc = prepare(ex, claimed, &next);
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
    /* Show where it stands now -- unless reading it is what failed. */
    json_t *cur = NULL;
    if (rc != DTX_EUNAVAILABLE && dtx__kit_get(ex, DTX_TRANSFERS, id, &cur) == 0) {
      json_decref(tx);
      tx = cur;
    }
    if (rc == DTX_ENOTFOUND)
      rc = dtx__err(DTX_ENOTFOUND, "transfer '%s' vanished while running", id);
  }
  *out = tx;
  return rc;
}

/* The worker's claim: the first initiated transfer (any: claims spread over
 * the store instead of queueing on one document). */
static int tx_claim_next(dtx__exec_t *ex, json_t **out) {
  json_t *due = json_pack("{s:s}", "state", DTX_ST_INITIATED);
  dtx__claim_t c = {.point = "transfer.claim", .due = due,
                    .to = DTX_ST_PREPARING};
  int rc = due ? dtx__kit_claim_next(ex, TX, &c, out) : DTX_ENOMEM;
  json_decref(due);
  return rc;
}

/* Drives a transfer: one this executor just claimed (preparing, its owner)
 * goes through the prepare phase first. */
static int tx_drive_claimed(dtx__exec_t *ex, const json_t *item, json_t **out) {
  json_t *next = NULL;
  int rc = 0;
  *out = NULL;
  if (dtx__state_is(item, DTX_ST_PREPARING) &&
      dtx__str_is(item, "owner", ex->owner)) {
    rc = prepare(ex, item, &next);
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
  return id ? 0 : dtx__err(DTX_EINVAL, "no transfer id");
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

int dtx_transfer_execute(dtx_store_t *st, const dtx_transfer_req_t *req,
                         const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *tx = NULL;
  *out = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = submit(&ex, req, &tx);
  if (rc == 0)
    rc = dtx__tx_drive(&ex, tx, 1, out);
  json_decref(tx);
  return dtx__call_end(&c, rc);
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
  size_t i = 0;
  *out = NULL;
  dtx__call_begin(&c, 0);
  while (state && states[i] && strcmp(state, states[i]) != 0)
    i++;
  if (state && !states[i])
    return dtx__call_end(
        &c, dtx__err(DTX_EINVAL,
                     "unknown state '%s' (initiated, preparing, committed, "
                     "succeeded, rolling_back, failed)",
                     state));
  json_t *filter = state ? json_pack("{s:s}", "state", state) : NULL;
  json_t *sort = json_pack("{s:i,s:i}", "created", 1, "_id", 1);
  int rc = sort ? dtx__kit_list(st, DTX_TRANSFERS, filter, sort, page, out)
                : DTX_ENOMEM;
  json_decref(filter);
  json_decref(sort);
  return dtx__call_end(&c, rc);
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
                json_pack("{s:s}", "reason", DTX_REASON_CANCELED), &next);
    else /* preparing: fence the running executor off, lease or not */
      rc = dtx__tx_takeover(ex, tx, DTX_REASON_CANCELED, json_object(),
                            "transfer.cancel.begin", &next);
    if (rc == 0 && next) {
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

static const char *const collections[] = {DTX_ACCOUNTS, DTX_TRANSFERS, NULL};

static const dtx__index_def_t indexes[] = {
    {DTX_TRANSFERS, "{\"state\":1}", 0, 0},
    {DTX_ACCOUNTS, "{\"pending.tx\":1}", 0, 0},
    {DTX_ACCOUNTS, "{\"voids.tx\":1}", 0, 0},
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
    "\"opening_balance\":" LONG ","
    "\"pending\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"tx\",\"op\",\"amount\",\"at\"],"
    "\"additionalProperties\":false,\"properties\":{\"tx\":" ID ","
    "\"op\":{\"enum\":[\"debit\",\"credit\"]},\"amount\":" AMOUNT ","
    "\"at\":" LONG "}}},"
    "\"voids\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"tx\",\"at\"],\"additionalProperties\":false,"
    "\"properties\":{\"tx\":" ID ",\"at\":" LONG "}}}}}}";
#undef ID
#undef LONG
#undef AMOUNT

static const dtx__rules_def_t rules[] = {
    /* An account goes only when nothing is pending on it and it holds no
     * money; a transfer only once it failed (a succeeded one is what
     * explains the balances, one in flight is still moving money). */
    {DTX_ACCOUNTS, account_shape,
     "{\"balance\":0,\"pending\":{\"$size\":0}}"},
    {DTX_TRANSFERS, transfer_shape, "{\"state\":\"" DTX_ST_FAILED "\"}"},
    {NULL, NULL, NULL},
};

static const char *const fault_points[] = {
    /* forward path */
    "transfer.submit",
    "transfer.claim",
    "transfer.debit",
    "transfer.mark_payee",
    "transfer.commit",
    "transfer.clear_payer",
    "transfer.credit_payee",
    "transfer.finish",
    /* rollback path */
    "transfer.rollback.begin",
    "transfer.rollback.refund_payer",
    "transfer.rollback.unmark_payee",
    "transfer.rollback.finish",
    /* cancel */
    "transfer.cancel.begin",
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
};
