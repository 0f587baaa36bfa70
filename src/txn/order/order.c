/* order.c -- order confirmation, after LeanCloud's "改进订单处理" (docs/orders.md): a
 * payment order is created pending under its unique trade id; the payment
 * provider's callback confirms it, crediting the user's account exactly
 * once however often the callback arrives and wherever a crash stops it;
 * a scheduled recovery finishes every interrupted confirmation.  The money
 * is a transfer of the transfer pattern, from a settlement account with no
 * lower limit to the order's account, so the transfer audit's
 * conservation covers orders.  docs/orders.md has the long form, and how
 * each step of 003 maps onto doctx.
 *
 *              create (unique _id = trade id)
 *                 |
 *                 v
 *   canceled <-- pending --confirm.begin (claim: owner, lease, epoch+1)--+
 *      (cancel, only from pending)                                        |
 *                                                                         v
 *                       +---- retry (attempt n failed) ---------- confirming
 *                       |     transfer := order:ID:n+1                |  |
 *                       +------------------------------------------->-+  |
 *                                                  credit: transfer      |
 *                                                  order:ID[:n] driven   |
 *                                                  to succeeded          |
 *                                                                        v
 *                                success <--finish-- confirmed <--commit-+
 *
 *   transition                     function            fault point
 *   (record pending)               create()            order.create
 *   (O6 re-check: reads only)      precheck()          --
 *   pending -> canceled            cancel()            order.cancel
 *   pending -> confirming          drive()             order.confirm.begin
 *   (lapsed lease: take it over)   drive(), recover()  order.takeover
 *   (credit: submit + drive the    credit()            order.credit, then the
 *    transfer of this attempt)                         transfer.* points
 *   confirming: next attempt       credit()            order.retry
 *   confirming -> confirmed        credit()            order.confirm.commit
 *   confirmed -> success           drive()             order.finish
 *
 *   the same transitions for many orders at once (many.c,
 *   dtx_order_confirm_many), each round one bulk write:
 *   pending -> confirming          round_claim()       order.confirm.begin
 *   (credits: one                  round_credit()      order.credit per
 *    dtx_transfer_execute_many)                        order, then the
 *                                                      transfer.* points
 *   confirming -> confirmed        round_commit()      order.confirm.commit
 *   confirmed -> success           round_finish()      order.finish
 *   anything else (held by another executor, a credit that did not
 *   succeed, a move that matched nothing, an error) -> drive() alone,
 *   from where the order stands
 *
 * An order document: {_id: trade id, account, amount, settlement, state,
 * transfer (the current attempt's transfer id), attempt, created, owner,
 * lease_until, epoch, updated}.
 *
 * Invariants (DTX_ASSERT checks O2 and the preconditions of O1 and O4 in
 * every build: a credit runs only on a confirming order this executor
 * holds, attempts number from 1; dtx_audit checks O1-O3 on the store,
 * audit.c):
 *  O1 At most one transfer of an order ever succeeds.  Attempt n's id is
 *     "order:ID" (n = 1) or "order:ID:n", so a callback delivered twice
 *     finds the transfer of its attempt and the transfer's own idempotency
 *     (its unique id, its markers) applies it once; attempt n+1 is recorded
 *     (a fenced move conditioned on attempt n's id) only after attempt n
 *     was read failed, a terminal state.
 *  O2 A transfer for an order is submitted only by an executor that moved
 *     it pending -> confirming or took a confirming order over; nothing
 *     moves an order back to pending, and cancel moves only pending
 *     orders: a canceled order is never credited.
 *  O3 confirmed and success imply that the current attempt succeeded: the
 *     move to confirmed is made only after its transfer was read
 *     succeeded, conditioned on that attempt still being the current one.
 *  O4 While confirming or confirmed, every move is fenced by the epoch of
 *     the claim or takeover it runs under (kit: DTX__FENCED); a takeover
 *     bumps the epoch, so a paused executor that wakes up matches nothing,
 *     re-reads and carries on from where the order stands.
 *  O5 create is idempotent through the unique _id: the same account,
 *     amount and settlement return the stored order, anything else is
 *     DTX_ECONFLICT.
 *  O6 What create checked holds whenever money moves: an update can
 *     change neither account, amount, settlement nor created, nor take a
 *     state backwards or out of a terminal one (the transition rule, in
 *     the store's atomic step); and before the claim and before each
 *     first credit, confirm checks again what create checked -- the
 *     settlement account exists with no lower limit and is not the
 *     account, the transfer is the attempt's (dtx__order_recheck) -- and
 *     O1's chain (attempt n-1 failed), and finishes a confirmed order
 *     only on its attempt's succeeded credit (O3), for an order written
 *     past the rules or inserted by hand.  The audit reports what fails
 *     them (bad_settlement, bad_order, attempt_skipped, not_credited). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/order/order.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

const dtx__kind_t dtx__order_kind = {DTX__ORDERS, "state", NULL};
#define OK_KIND (&dtx__order_kind)

#define DEFAULT_SETTLEMENT "settlement"
#define TRADE_MAX 100

/* ---- ids --------------------------------------------------------------------- */

int dtx__order_check_id(const char *id) {
  return dtx__check_word("trade id", id, TRADE_MAX, "_.-");
}

void dtx__order_tx_id(const char *trade, int64_t attempt, char *buf,
                      size_t n) {
  DTX_ASSERT(attempt >= 1, "O1"); /* every caller checked it */
  if (attempt == 1)
    snprintf(buf, n, DTX__ORDER_TX_PREFIX "%s", trade);
  else
    snprintf(buf, n, DTX__ORDER_TX_PREFIX "%s:%lld", trade,
             (long long)attempt);
}

int dtx__order_tx_parse(const char *txid, char *trade, int64_t *attempt) {
  size_t p = strlen(DTX__ORDER_TX_PREFIX);
  if (!txid || strncmp(txid, DTX__ORDER_TX_PREFIX, p) != 0)
    return 0;
  const char *rest = txid + p, *colon = strchr(rest, ':');
  size_t n = colon ? (size_t)(colon - rest) : strlen(rest);
  if (n == 0 || n > 128)
    return 0;
  memcpy(trade, rest, n);
  trade[n] = '\0';
  *attempt = 1;
  if (colon) {
    char *end = NULL;
    long long a = strtoll(colon + 1, &end, 10);
    if (end == colon + 1 || *end || a < 2) /* "order:X:1" is not ours */
      return 0;
    *attempt = a;
  }
  return 1;
}

/* A state change of the order (kit: fenced move). */
static int move(dtx__exec_t *ex, const char *point, const json_t *o,
                const char *from, const char *to, unsigned flags, json_t *cond,
                json_t *set, json_t **out) {
  dtx__move_t m = {.point = point, .from = from, .to = to, .flags = flags,
                   .cond = cond, .set = set};
  return dtx__kit_move(ex, OK_KIND, o, &m, out);
}

int dtx__order_ensure(dtx_store_t *st) {
  int rc = dtx__kit_ensure(st, &dtx__transfer_pattern);
  return rc ? rc : dtx__kit_ensure(st, &dtx__order_pattern);
}

/* ---- create ------------------------------------------------------------------- */

static const char *settlement_of(const dtx_order_req_t *r) {
  return r->settlement ? r->settlement : DEFAULT_SETTLEMENT;
}

static int check_req(const dtx_order_req_t *r) {
  int rc;
  if (!r)
    return dtx__err(DTX_EINVAL, "no order request");
  if ((rc = dtx__order_check_id(r->trade_id)))
    return rc;
  if (!r->account)
    return dtx__err(DTX_EINVAL, "order %s needs an account", r->trade_id);
  if ((rc = dtx__check_ident("account id", r->account)) ||
      (rc = dtx__check_ident("settlement account id", settlement_of(r))))
    return rc;
  if (r->amount <= 0)
    return dtx__err(DTX_EINVAL, "order %s: amount must be a positive "
                    "integer, got %lld", r->trade_id, (long long)r->amount);
  if (strcmp(r->account, settlement_of(r)) == 0)
    return dtx__err(DTX_EINVAL, "order %s: account '%s' is the settlement "
                    "account", r->trade_id, r->account);
  return 0;
}

static int same_params(const json_t *o, const dtx_order_req_t *r) {
  return dtx__str_is(o, "account", r->account) &&
         dtx__str_is(o, "settlement", settlement_of(r)) &&
         json_is_integer(json_object_get(o, "amount")) &&
         dtx__int(o, "amount") == r->amount;
}

static int create(dtx__exec_t *ex, const dtx_order_req_t *r, json_t **out) {
  json_t *acct = NULL, *o = NULL;
  char txid[160];
  int rc;
  if ((rc = check_req(r)))
    return rc;
  /* Read before the set-up, so an unknown account (bad input) installs
   * no orders collection either: nothing recorded, nothing created. */
  rc = dtx__kit_get(ex, DTX_ACCOUNTS, r->account, &acct);
  json_decref(acct);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_EINVAL, "order %s: no account '%s'", r->trade_id,
                    r->account);
  if (rc || (rc = dtx__order_ensure(ex->st)) ||
      (rc = dtx__tx_settlement(ex, settlement_of(r), NULL, "orders")))
    return rc;
  dtx__order_tx_id(r->trade_id, 1, txid, sizeof txid);
  /* O6: what create checked goes in as it was checked. */
  DTX_ASSERT(r->amount >= 1 && strcmp(r->account, settlement_of(r)) != 0,
             "O6");
  int64_t now = dtx__now_ms();
  o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:I,s:I,s:n,s:I,s:I,s:I}", "_id",
                r->trade_id, "account", r->account, "amount",
                (json_int_t)r->amount, "settlement", settlement_of(r), "state",
                DTX_OS_PENDING, "transfer", txid, "attempt", (json_int_t)1,
                "created", (json_int_t)now, "owner", "lease_until",
                (json_int_t)0, "epoch", (json_int_t)0, "updated",
                (json_int_t)now);
  if (!o)
    return DTX_ENOMEM;
  rc = dtx__kit_insert(ex, "order.create", DTX__ORDERS, o);
  if (rc == DTX_EDUPKEY) { /* O5: the trade id is taken -- by this order? */
    json_decref(o);
    o = NULL;
    if ((rc = dtx__kit_get(ex, DTX__ORDERS, r->trade_id, &o)) == 0 &&
        !same_params(o, r))
      rc = dtx__err(DTX_ECONFLICT, "order %s exists with another account, "
                    "amount or settlement", r->trade_id);
  }
  if (rc) {
    json_decref(o);
    return rc;
  }
  *out = o;
  return 0;
}

/* ---- confirm ------------------------------------------------------------------- */

int dtx__order_recheck(const json_t *o, const json_t *acct) {
  const char *id = dtx__str(o, "_id") ? dtx__str(o, "_id") : "?";
  const char *account = dtx__str(o, "account");
  const char *settle = dtx__str(o, "settlement");
  const char *txid = dtx__str(o, "transfer");
  const json_t *amount = json_object_get(o, "amount");
  int64_t attempt = dtx__int(o, "attempt");
  char want[160];
  if (!account || !settle || dtx__check_ident("account id", account) ||
      dtx__check_ident("settlement account id", settle) ||
      strcmp(account, settle) == 0)
    return dtx__err(DTX_ESTATE, "order %s: its account '%s' and settlement "
                    "'%s' are not two account ids, as create demands; left "
                    "for an operator (the audit reports it)", id,
                    account ? account : "?", settle ? settle : "?");
  if (!json_is_integer(amount) || json_integer_value(amount) <= 0)
    return dtx__err(DTX_ESTATE, "order %s: its amount is not a positive "
                    "integer; left for an operator (the audit reports it)",
                    id);
  dtx__order_tx_id(id, attempt >= 1 ? attempt : 1, want, sizeof want);
  if (!txid || attempt < 1 || strcmp(txid, want) != 0)
    return dtx__err(DTX_ESTATE, "order %s: its transfer '%s' is not attempt "
                    "%lld's (%s); left for an operator (the audit reports "
                    "it)", id, txid ? txid : "?", (long long)attempt, want);
  if (!acct)
    return dtx__err(DTX_ESTATE, "order %s: its settlement account '%s' does "
                    "not exist; left for an operator (the audit reports it)",
                    id, settle);
  if (!json_is_null(json_object_get(acct, "min_balance")))
    return dtx__err(DTX_ESTATE, "order %s: its settlement account '%s' has a "
                    "lower limit, so it is not a settlement account (create "
                    "refuses one); nothing is taken from it; left for an "
                    "operator (the audit reports it)", id, settle);
  return 0;
}

/* O1 for an attempt n > 1, whoever recorded it: its credit is first
 * submitted only once attempt n-1's transfer is failed, as order.retry
 * demands of the move that records n -- an attempt raised by hand while
 * n-1 is still moving money would credit twice.  Once n's transfer
 * exists, the call that submitted it made this check. */
static int check_chain(dtx__exec_t *ex, const char *id, int64_t attempt,
                       const char *txid) {
  json_t *tx = NULL;
  char prev[160];
  DTX_ASSERT(attempt >= 2 && txid, "O1"); /* precheck's: n-1 exists */
  int rc = dtx__kit_get(ex, DTX_TRANSFERS, txid, &tx);
  json_decref(tx);
  tx = NULL;
  if (rc != DTX_ENOTFOUND)
    return rc;
  dtx__order_tx_id(id, attempt - 1, prev, sizeof prev);
  rc = dtx__kit_get(ex, DTX_TRANSFERS, prev, &tx);
  if (rc == 0 && !dtx__state_is(tx, DTX_ST_FAILED))
    rc = dtx__err(DTX_ESTATE, "order %s is at attempt %lld, but attempt "
                  "%lld's transfer %s is %s, not failed: no second credit is "
                  "submitted; left for an operator (the audit reports a "
                  "double credit)", id, (long long)attempt,
                  (long long)attempt - 1, prev,
                  dtx__str(tx, "state") ? dtx__str(tx, "state") : "?");
  else if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ESTATE, "order %s is at attempt %lld, but attempt "
                  "%lld's transfer %s does not exist, so nothing shows that "
                  "it failed: no credit is submitted; left for an operator",
                  id, (long long)attempt, (long long)attempt - 1, prev);
  json_decref(tx);
  return rc;
}

/* What create checked, before the credit moves money (dtx__order_recheck,
 * with the settlement account read now), and O1's chain of attempts. */
static int precheck(dtx__exec_t *ex, const json_t *o) {
  json_t *acct = NULL;
  const char *settle = dtx__str(o, "settlement");
  int rc = settle && dtx__check_ident("settlement account id", settle) == 0
               ? dtx__kit_get(ex, DTX_ACCOUNTS, settle, &acct)
               : DTX_ENOTFOUND;
  if (rc == 0 || rc == DTX_ENOTFOUND)
    rc = dtx__order_recheck(o, acct);
  json_decref(acct);
  if (rc == 0 && dtx__int(o, "attempt") > 1)
    rc = check_chain(ex, dtx__str(o, "_id"), dtx__int(o, "attempt"),
                     dtx__str(o, "transfer"));
  return rc;
}

/* O3 for a confirmed order this call did not credit (taken over, or
 * written so by hand): it is finished only when its current attempt's
 * transfer is read succeeded, moving its amount from its settlement to
 * its account. */
static int check_credited(dtx__exec_t *ex, const json_t *o) {
  const char *id = dtx__str(o, "_id"), *txid = dtx__str(o, "transfer");
  json_t *tx = NULL;
  char want[160];
  int64_t attempt = dtx__int(o, "attempt");
  dtx__order_tx_id(id, attempt >= 1 ? attempt : 1, want, sizeof want);
  int rc = txid && attempt >= 1 && strcmp(txid, want) == 0
               ? dtx__kit_get(ex, DTX_TRANSFERS, txid, &tx)
               : DTX_ENOTFOUND;
  if (rc == 0 && dtx__state_is(tx, DTX_ST_SUCCEEDED) &&
      dtx__str_is(tx, "from", dtx__str(o, "settlement")) &&
      dtx__str_is(tx, "to", dtx__str(o, "account")) &&
      json_equal(json_object_get(tx, "amount"), json_object_get(o, "amount")))
    rc = 0;
  else if (rc == 0 || rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ESTATE, "order %s is confirmed, but %s: it is not "
                  "finished; left for an operator (the audit reports it)",
                  id, rc ? "its attempt's credit does not exist"
                         : "its credit did not succeed as the order says");
  json_decref(tx);
  return rc;
}

/* The failure reasons after which a credit is simply tried again under a
 * new attempt: its executor was fenced off, or an operator canceled the
 * transfer.  Any other reason is a decline (the account is gone, its
 * balance would pass int64): retried only by an explicit confirm. */
static int retryable(const json_t *tx) {
  return dtx__str_is(tx, "reason", DTX_REASON_ABANDONED) ||
         dtx__str_is(tx, "reason", DTX_REASON_CANCELED);
}

/* The credit of a confirming order o this executor holds: the transfer of
 * its current attempt, submitted (idempotent) and driven to its end; then
 * confirming -> confirmed, or the next attempt.  checked: this call made
 * precheck() of o already.  *declines: how many declined attempts this
 * call may still retry. */
static int credit(dtx__exec_t *ex, const json_t *o, int checked,
                  int *declines, json_t **out) {
  const char *id = dtx__str(o, "_id"), *txid = dtx__str(o, "transfer");
  int64_t attempt = dtx__int(o, "attempt");
  char next[160];
  json_t *tx = NULL, *done = NULL;
  *out = NULL;
  DTX_ASSERT(dtx__state_is(o, DTX_OS_CONFIRMING), "O2");
  DTX_ASSERT(dtx__str_is(o, "owner", ex->owner), "O4"); /* under its claim */
  int rc = checked ? 0 : precheck(ex, o); /* O6, O1 */
  if (rc)
    return rc;
  DTX_ASSERT(attempt >= 1 && txid, "O1"); /* dtx__order_recheck's */
  rc = dtx__kit_point("order.credit", NULL);
  if (rc)
    return rc;
  dtx_transfer_req_t req = {.id = txid, .from = dtx__str(o, "settlement"),
                            .to = dtx__str(o, "account"),
                            .amount = dtx__int(o, "amount")};
  rc = dtx_transfer_submit(ex->st, &req, &tx);
  if (rc == DTX_ENOACCOUNT)
    return dtx__err(DTX_ESTATE, "order %s cannot be credited: %s", id,
                    dtx_errdetail());
  if (rc)
    return dtx__err_wrap(rc, "order %s: submitting its credit %s", id, txid);
  rc = dtx__tx_drive(ex, tx, 1, &done);
  json_decref(tx);
  if (rc) {
    json_decref(done);
    return rc;
  }
  if (dtx__state_is(done, DTX_ST_SUCCEEDED)) { /* O3 */
    DTX_ASSERT(dtx__str_is(done, "_id", txid), "O3"); /* this attempt's */
    json_decref(done);
    return move(ex, "order.confirm.commit", o, DTX_OS_CONFIRMING,
                DTX_OS_CONFIRMED, DTX__FENCED,
                json_pack("{s:s}", "transfer", txid), NULL, out);
  }
  if (!dtx__state_is(done, DTX_ST_FAILED)) {
    rc = dtx__err(DTX_EUNAVAILABLE, "order %s: its credit %s is still %s",
                  id, txid, dtx__str(done, "state") ? dtx__str(done, "state")
                                                    : "?");
    json_decref(done);
    return rc;
  }
  if (!retryable(done) && *declines <= 0) {
    rc = dtx__err(DTX_ESTATE, "order %s: its credit %s was declined (%s); "
                  "confirm it again once that is fixed", id, txid,
                  dtx__str(done, "reason") ? dtx__str(done, "reason") : "?");
    json_decref(done);
    return rc;
  }
  if (!retryable(done))
    (*declines)--;
  /* O1: attempt n is failed, terminal: n+1 may be recorded. */
  DTX_ASSERT(dtx__state_is(done, DTX_ST_FAILED) && *declines >= 0, "O1");
  json_decref(done);
  /* O1: attempt n is failed, a terminal state: n+1 may be recorded. */
  dtx__order_tx_id(id, attempt + 1, next, sizeof next);
  return move(ex, "order.retry", o, DTX_OS_CONFIRMING, NULL, DTX__FENCED,
              json_pack("{s:s}", "transfer", txid),
              json_pack("{s:s,s:I}", "transfer", next, "attempt",
                        (json_int_t)(attempt + 1)),
              out);
}

/* The one-order drive (order.h), which every order off the batch's fast
 * path also takes. */
int dtx__order_drive(dtx__exec_t *ex, const json_t *start, int declines,
                     json_t **out) {
  json_t *o = json_incref((json_t *)start), *next = NULL;
  char id[TRADE_MAX + 1];
  int rc = 0, credited = 0; /* credited: this call read its credit
                                succeeded and committed it (O3) */
  int64_t checked = 0; /* the attempt this call made precheck() for (O6,
                          O1), or knows the chain of: a retry read the
                          attempt before it failed */
  snprintf(id, sizeof id, "%s", dtx__str(o, "_id"));
  for (int guard = 0; guard < 1000; guard++) {
    next = NULL;
    if (dtx__state_is(o, DTX_OS_SUCCESS))
      break;
    if (dtx__state_is(o, DTX_OS_CANCELED)) {
      rc = dtx__err(DTX_ESTATE, "order %s is canceled: it is never credited",
                    id);
      break;
    }
    if (dtx__state_is(o, DTX_OS_PENDING)) {
      /* O6 before the claim: an order create would have refused stays
       * pending, untouched. */
      if (checked != dtx__int(o, "attempt") && (rc = precheck(ex, o)))
        break;
      checked = dtx__int(o, "attempt");
      rc = move(ex, "order.confirm.begin", o, DTX_OS_PENDING,
                DTX_OS_CONFIRMING, DTX__TAKE, NULL, NULL, &next);
    } else if (!dtx__state_is(o, DTX_OS_CONFIRMING) &&
               !dtx__state_is(o, DTX_OS_CONFIRMED)) {
      rc = dtx__err(DTX_ESTATE, "order %s has unknown state '%s'", id,
                    dtx__str(o, "state") ? dtx__str(o, "state") : "?");
      break;
    } else if (!dtx__str_is(o, "owner", ex->owner)) {
      /* Another executor's (a concurrent callback, a paused one): wait for
       * it to finish or its lease to lapse, then take it over (O4). */
      if (dtx__int(o, "lease_until") > dtx__now_ms())
        rc = dtx__kit_await(ex, OK_KIND, o, &next);
      else
        rc = dtx__kit_takeover(ex, OK_KIND, o, "order.takeover", NULL, NULL,
                               NULL, &next);
    } else if (dtx__state_is(o, DTX_OS_CONFIRMING)) {
      rc = credit(ex, o, checked == dtx__int(o, "attempt"), &declines,
                  &next);
      checked = rc == 0 && next ? dtx__int(next, "attempt") : 0;
      credited = rc == 0 && dtx__state_is(next, DTX_OS_CONFIRMED);
    } else if (credited || (rc = check_credited(ex, o)) == 0) {
      DTX_ASSERT(dtx__state_is(o, DTX_OS_CONFIRMED), "O3");
      rc = move(ex, "order.finish", o, DTX_OS_CONFIRMED, DTX_OS_SUCCESS,
                DTX__FENCED,
                NULL, json_pack("{s:n,s:I}", "owner", "lease_until",
                                (json_int_t)0), &next);
    }
    if (rc && rc != DTX_ENOMATCH)
      break;
    rc = 0; /* ENOMATCH: it moved on (or this executor was fenced): re-read */
    if (!next && (rc = dtx__kit_get(ex, DTX__ORDERS, id, &next)))
      break;
    json_decref(o);
    o = next;
  }
  return dtx__order_end(ex, id, rc, o, out);
}

int dtx__order_end(dtx__exec_t *ex, const char *id, int rc, json_t *o,
                   json_t **out) {
  if (rc && rc != DTX_ESTATE) { /* show where it stands, if it can be read */
    char detail[400];
    snprintf(detail, sizeof detail, "%s", dtx_errdetail());
    json_t *cur = NULL;
    if (rc != DTX_EUNAVAILABLE &&
        dtx__kit_get(ex, DTX__ORDERS, id, &cur) == 0) {
      json_decref(o);
      o = cur;
    }
    rc = dtx__err(rc, "%s", detail);
  }
  *out = o;
  return rc;
}

/* ---- cancel -------------------------------------------------------------------- */

int dtx__order_get(dtx__exec_t *ex, const char *id, json_t **out) {
  int rc = dtx__order_check_id(id);
  if (rc == 0)
    rc = dtx__kit_get(ex, DTX__ORDERS, id, out);
  return rc == DTX_ENOTFOUND ? dtx__err(rc, "no order '%s'", id) : rc;
}

static int cancel(dtx__exec_t *ex, const char *id, json_t **out) {
  json_t *o = NULL, *next = NULL;
  int rc = dtx__order_get(ex, id, &o);
  for (int guard = 0; rc == 0 && guard < 100; guard++) {
    if (dtx__state_is(o, DTX_OS_CANCELED)) {
      *out = o;
      return 0;
    }
    if (!dtx__state_is(o, DTX_OS_PENDING)) {
      rc = dtx__err(DTX_ESTATE, "order %s is %s: only a pending order can "
                    "be canceled", id, dtx__str(o, "state") ?
                    dtx__str(o, "state") : "?");
      *out = o;
      return rc;
    }
    /* The same condition the confirm's claim needs: one of them wins. */
    rc = move(ex, "order.cancel", o, DTX_OS_PENDING, DTX_OS_CANCELED, 0, NULL,
              NULL, &next);
    if (rc == 0) {
      json_decref(o);
      *out = next;
      return 0;
    }
    if (rc == DTX_ENOMATCH) {
      json_decref(o);
      o = NULL;
      rc = dtx__kit_get(ex, DTX__ORDERS, id, &o);
    }
  }
  json_decref(o);
  return rc ? rc : dtx__err(DTX_ECONFLICT, "order %s kept changing during "
                            "cancel", id);
}

/* ---- the public API ------------------------------------------------------------- */

int dtx_order_create(dtx_store_t *st, const dtx_order_req_t *req,
                     json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, create(&ex, req, out));
}

int dtx_order_req_check(const dtx_order_req_t *req) {
  dtx__err_clear();
  return check_req(req);
}

int dtx_order_id_check(const char *trade_id) {
  dtx__err_clear();
  return dtx__order_check_id(trade_id);
}

int dtx_order_confirm(dtx_store_t *st, const char *trade_id,
                      const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *o = NULL;
  *out = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = dtx__order_get(&ex, trade_id, &o);
  if (rc == 0 && (rc = dtx__order_ensure(st)) == 0)
    rc = dtx__order_drive(&ex, o, 1, out); /* an explicit confirm retries
                                              one decline */
  else if (rc == 0)
    *out = json_incref(o);
  json_decref(o);
  return dtx__call_end(&c, rc);
}

int dtx_order_cancel(dtx_store_t *st, const char *trade_id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  int rc = dtx__order_ensure(st);
  return dtx__call_end(&c, rc ? rc : cancel(&ex, trade_id, out));
}

int dtx_order_get(dtx_store_t *st, const char *trade_id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, dtx__order_get(&ex, trade_id, out));
}

static const char *const states[] = {DTX_OS_PENDING, DTX_OS_CONFIRMING,
                                     DTX_OS_CONFIRMED, DTX_OS_SUCCESS,
                                     DTX_OS_CANCELED, NULL};

int dtx_order_list(dtx_store_t *st, const char *state, const dtx_page_t *page,
                   json_t **out) {
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, dtx__kit_list_state(st, DTX__ORDERS, states,
                                               "order state", state, page,
                                               out));
}

/* ---- recovery (003's scheduled job) ------------------------------------------- */

/* 003's decision table, with doctx's leases for its "updatedAt older than
 * ten minutes" (docs/orders.md, "Recovery"):
 *   confirming, its transfer absent or not terminal -> credit (submit is
 *                                                      idempotent; drive it)
 *   confirming, its transfer succeeded             -> confirmed, then success
 *   confirming, its transfer failed (fenced off or -> next attempt, credit
 *               canceled)
 *   confirming, its transfer declined              -> left, tallied (an
 *                                                      explicit confirm
 *                                                      retries it)
 *   confirmed                                      -> success
 * each after a takeover (epoch+1, order.takeover) of an order whose lease
 * lapsed, or, with older_than_ms >= 0, untouched that long. */
static int recover(dtx__exec_t *ex, const dtx_recover_opts_t *ro,
                   dtx__tally_t *t) {
  json_t *filter = json_pack("{s:{s:[s,s]}}", "state", "$in",
                             DTX_OS_CONFIRMING, DTX_OS_CONFIRMED);
  json_t *list = NULL, *o;
  size_t i;
  int rc = dtx__kit_find(ex, DTX__ORDERS, filter, NULL, &list);
  json_decref(filter);
  if (rc)
    return rc;
  int64_t now = dtx__now_ms();
  json_array_foreach(list, i, o) {
    json_t *id = json_object_get(o, "_id"), *taken = NULL, *out = NULL,
           *cond = NULL;
    /* O4: only a confirming or confirmed order is taken over. */
    DTX_ASSERT(dtx__state_is(o, DTX_OS_CONFIRMING) ||
                   dtx__state_is(o, DTX_OS_CONFIRMED),
               "O4");
    if (!dtx__kit_abandoned(ro, dtx__int(o, "updated"),
                            dtx__int(o, "lease_until"), now)) {
      dtx__tally_skip(t, ro->older_than_ms >= 0
                             ? "updated within --older-than-ms"
                             : "lease not expired", id);
      continue;
    }
    if (ro->older_than_ms >= 0) /* taken over only if still untouched */
      cond = json_pack("{s:O}", "updated", json_object_get(o, "updated"));
    rc = dtx__kit_takeover(ex, OK_KIND, o, "order.takeover", NULL, cond, NULL,
                           &taken);
    if (rc == 0)
      rc = dtx__order_drive(ex, taken, 0, &out);
    if (rc == 0)
      dtx__tally_ran(t, "finished", 1);
    else if (rc == DTX_ENOMATCH)
      dtx__tally_skip(t, "moved on while recovering", id);
    else
      dtx__tally_error(t, id, rc);
    json_decref(taken);
    json_decref(out);
  }
  json_decref(list);
  return 0;
}

/* ---- the method table ------------------------------------------------------------ */

static const char *const collections[] = {DTX__ORDERS, NULL};

static const dtx__index_def_t indexes[] = {
    /* recovery's state queries use its prefix; `order list --state`
     * pages along it, and `order list` along the next, from an --after's
     * place (dtx__kit_list's keyset) */
    {DTX__ORDERS, "{\"state\":1,\"created\":1,\"_id\":1}", 0, 0},
    {DTX__ORDERS, "{\"created\":1,\"_id\":1}", 0, 0},
    {NULL, NULL, 0, 0},
};

#define ID "{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128}"
#define LONG "{\"bsonType\":\"long\"}"
static const char order_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"account\",\"amount\",\"settlement\",\"state\","
    "\"transfer\",\"attempt\",\"created\"," DTX__KIT_ITEM_REQUIRED "],"
    "\"properties\":{\"_id\":{\"bsonType\":\"string\",\"minLength\":1,"
    "\"maxLength\":100},\"account\":" ID ",\"settlement\":" ID ","
    "\"amount\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"state\":{\"enum\":[\"" DTX_OS_PENDING "\",\"" DTX_OS_CONFIRMING
    "\",\"" DTX_OS_CONFIRMED "\",\"" DTX_OS_SUCCESS "\",\"" DTX_OS_CANCELED
    "\"]},\"transfer\":" ID ",\"attempt\":{\"bsonType\":\"long\","
    "\"minimum\":1},\"created\":" LONG "," DTX__KIT_ITEM_PROPS "}}}";
#undef ID
#undef LONG

/* What an update of an order may change (docs/validation.md, "Transition
 * rules"; O6): what create checked never changes, the attempt and the
 * epoch only grow, and the state moves only along the diagram -- nothing
 * returns to pending (O2), and a terminal order takes no update at all
 * (nor does a pending one, but its claim or cancel).  A move's other
 * preconditions are in other documents (O1: attempt n failed, O3: the
 * credit succeeded), which no rule of one document sees: the steps
 * re-check them (credit(), drive()) and the audit reports them. */
#define MOVE(a, b)                                                          \
  "{\"name\":\"" a "->" b "\",\"from\":{\"state\":\"" a "\"},"            \
  "\"to\":{\"state\":\"" b "\"}}"
static const char order_transition[] =
    "{\"immutable\":[\"account\",\"amount\",\"settlement\",\"created\"],"
    "\"increasing\":[\"attempt\",\"epoch\"],\"moves\":["
    MOVE(DTX_OS_PENDING, DTX_OS_CONFIRMING) ","
    MOVE(DTX_OS_PENDING, DTX_OS_CANCELED) ","
    MOVE(DTX_OS_CONFIRMING, DTX_OS_CONFIRMING) ","
    MOVE(DTX_OS_CONFIRMING, DTX_OS_CONFIRMED) ","
    MOVE(DTX_OS_CONFIRMED, DTX_OS_CONFIRMED) ","
    MOVE(DTX_OS_CONFIRMED, DTX_OS_SUCCESS) "]}";
#undef MOVE

/* The shape of an order (kit.h, dtx__shape_def_t): who holds it in each
 * state.  A pending or canceled order was never claimed (epoch 0, no
 * owner, its first attempt: O2); a confirming or confirmed one is held
 * under a claim (O4: an owner, epoch >= 1); a finished one was claimed
 * and let go (no owner). */
static int order_fits(const json_t *o, char *why, size_t n) {
  const json_t *ep = json_object_get(o, "epoch");
  int64_t epoch = json_is_integer(ep) ? (int64_t)json_integer_value(ep) : -1;
  const char *owner = dtx__str(o, "owner");
  const char *st = dtx__str(o, "state") ? dtx__str(o, "state") : "?";
  if (dtx__state_is(o, DTX_OS_PENDING) || dtx__state_is(o, DTX_OS_CANCELED)) {
    if (epoch != 0 || owner || dtx__int(o, "attempt") != 1)
      return dtx__shape_bad(why, n, "state %s, yet claimed (epoch %lld, "
                            "owner %s, attempt %lld) (O2)", st,
                            (long long)epoch, owner ? owner : "none",
                            (long long)dtx__int(o, "attempt"));
  } else if (epoch < 1 ||
             (owner == NULL) != dtx__state_is(o, DTX_OS_SUCCESS)) {
    return dtx__shape_bad(why, n, "state %s, but epoch %lld and owner %s "
                          "(O4)", st, (long long)epoch, owner ? owner : "none");
  }
  return 0;
}

static const dtx__shape_def_t shapes[] = {{DTX__ORDERS, order_fits},
                                          {NULL, NULL}};

static const dtx__rules_def_t rules[] = {
    /* Only a canceled order goes: it never had a transfer (O2).  Any other
     * explains a credit, or may still get one. */
    {DTX__ORDERS, order_shape, "{\"state\":\"" DTX_OS_CANCELED "\"}",
     order_transition},
    {NULL, NULL, NULL, NULL},
};

static const char *const fault_points[] = {
    "order.create",         "order.confirm.begin", "order.takeover",
    "order.credit",         "order.retry",         "order.confirm.commit",
    "order.finish",         "order.cancel",        NULL,
};

const dtx__pattern_t dtx__order_pattern = {
    .name = "order",
    .kind = &dtx__order_kind,
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .claim_next = NULL, /* pending orders wait for their callback */
    .drive = NULL,
    .recover = recover,
    .audit = dtx__order_audit,
    .rules = rules,
    .shapes = shapes,
};
