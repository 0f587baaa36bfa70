/* steps.c -- the account side of a transfer: every step is one
 * conditional update of one account document, made idempotent by the
 * transfer's marker in the same atomic step (transfer.c, I4), and every
 * step that matches nothing reads the account back to say why -- done
 * before, refused, fenced by a tombstone, or the account is gone -- so a
 * caller never takes "nothing matched" for "already done" (I9).
 *
 * An account document (its validator is in transfer.c):
 *   {_id, balance, min_balance (int64 or null: no limit), opening_balance,
 *    ceiling, pending: [{tx, op: "debit"|"credit", amount, at}],
 *    voids: [{tx, at}]}
 * ceiling is what the balance reaches if every pending marker lands:
 * balance + the amounts of all markers (I7).  A debit moves money from
 * the balance into its marker, a credit or refund from a marker into the
 * balance -- ceiling unchanged; a credit marker raises it, and clearing a
 * debit marker (commit) or dropping a credit marker (rollback) lowers it.
 * Marking demands ceiling + amount <= INT64_MAX in the same step, so a
 * credit or refund can always land: a committed transfer can always be
 * finished.  Accounts stored before ceilings existed get theirs when a
 * step first needs it (upgrade()). */
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

/* Tombstones an account keeps at most: the newest (see I8). */
#define VOIDS_MAX 64
/* Rounds of "update, read back" before a step gives up: each round only
 * repeats when another executor changed the account in between. */
#define ROUNDS 8

/* ---- reading an account back ------------------------------------------------ */

/* Account id, or *acct NULL when there is none. */
static int read_account(dtx__exec_t *ex, const char *id, json_t **acct) {
  int rc = dtx__kit_get(ex, DTX_ACCOUNTS, id, acct);
  return rc == DTX_ENOTFOUND ? 0 : rc;
}

/* Gives account acct (as read) its ceiling, balance + the amounts of its
 * markers, if it has none.  Conditioned on the balance and markers read,
 * so a concurrent step makes it match nothing (the caller reads again).
 * The step runs behind point, the fault point of the step that needs it.
 * DTX_ESTATE when the markers cannot be summed or the sum passes int64:
 * then some marker could never land, and the account needs an operator. */
static int upgrade(dtx__exec_t *ex, const char *point, const json_t *acct) {
  const char *id = dtx__str(acct, "_id");
  json_t *bal = json_object_get(acct, "balance"), *m;
  json_t *pending = json_object_get(acct, "pending");
  size_t i;
  if (json_object_get(acct, "ceiling"))
    return 0; /* there, of whatever type: the step reports a bad one */
  if (!json_is_integer(bal) || !json_is_array(pending))
    return dtx__err(DTX_ESTATE, "account %s has no integer balance or no "
                    "pending list: it cannot be given a ceiling", id);
  __int128 sum = json_integer_value(bal);
  json_array_foreach(pending, i, m) {
    json_t *amt = json_object_get(m, "amount");
    if (!json_is_integer(amt))
      return dtx__err(DTX_ESTATE, "account %s has a marker without an integer "
                      "amount", id);
    sum += json_integer_value(amt);
  }
  if (sum > INT64_MAX || sum < INT64_MIN)
    return dtx__err(DTX_ESTATE, "account %s: balance and pending markers "
                    "pass int64: not every marker can land", id);
  DTX_ASSERT(!json_object_get(acct, "ceiling"), "I7"); /* set once, here */
  return dtx__kit_update(
      ex, point, DTX_ACCOUNTS,
      dtx__pack("{s:s,s:{s:b},s:O,s:O}", "_id", id, "ceiling", "$exists", 0,
                "balance", bal, "pending", pending),
      dtx__pack("{s:{s:I}}", "$set", "ceiling", (json_int_t)sum), NULL);
}

/* ---- taking a marker off ---------------------------------------------------- */

/* $push of a tombstone for txid, keeping the newest VOIDS_MAX. */
static json_t *tombstone(const char *txid) {
  DTX_ASSERT(txid, "I8");
  return dtx__pack("{s:{s:[{s:s,s:I}],s:i}}", "voids", "$each", "tx", txid,
                   "at", (json_int_t)dtx__now_ms(), "$slice", -VOIDS_MAX);
}

/* The first attempt of taking the op marker of txid off account id: the
 * conditional update, in u (for dtx__kit_update_many, or run alone). */
void dtx__tx_take_op(dtx__kit_upd_t *u, const char *point, const char *id,
                     const char *txid, const char *op, int64_t amount,
                     const json_t *inc, int tomb) {
  /* I4: a marker comes off with what it carried, in the same step. */
  DTX_ASSERT(point && id && txid && json_is_object(inc), "I4");
  u->point = point;
  u->coll = DTX_ACCOUNTS;
  u->filter = dtx__pack("{s:s,s:{s:{s:s,s:s,s:I}}}", "_id", id, "pending",
                        "$elemMatch", "tx", txid, "op", op, "amount",
                        (json_int_t)amount);
  u->update = dtx__pack("{s:O,s:{s:{s:s,s:s}}}", "$inc", inc, "$pull",
                        "pending", "tx", txid, "op", op);
  if (u->filter && json_object_get(inc, "ceiling"))
    json_object_set_new(u->filter, "ceiling", dtx__pack("{s:b}", "$exists", 1));
  if (u->update && tomb)
    json_object_set_new(u->update, "$push", tombstone(txid));
}

/* The op marker of transfer txid on account id is taken off in one step
 * with what it carried: `inc` (stolen, e.g. {"balance": amount}) and,
 * with `tomb`, a tombstone.  The marker must carry `amount`: one with
 * another amount is DTX_ESTATE (reject rather than guess).  With
 * `tomb`, an account without the marker gets the tombstone alone, so a
 * late step of the transfer is refused there.  *out: TAKEN now, ABSENT
 * (no marker: taken before, or never made), GONE (no account).  tried:
 * the first attempt (dtx__tx_take_op) already ran and matched nothing. */
int dtx__tx_take_marker_after(dtx__exec_t *ex, const char *point,
                              const char *id, const char *txid, const char *op,
                              int64_t amount, json_t *inc, int tomb, int tried,
                              enum dtx__taken *out) {
  int needs_ceiling = json_object_get(inc, "ceiling") != NULL, rc = 0;
  *out = DTX__ABSENT;
  if (amount <= 0) { /* the validator's minimum, unless written past it */
    json_decref(inc);
    return dtx__err(DTX_ESTATE, "transfer %s has amount %lld: no marker "
                    "carries it", txid, (long long)amount);
  }
  for (int round = 0; round < ROUNDS; round++) {
    int matched = 0;
    if (round > 0 || !tried) {
      dtx__kit_upd_t u;
      dtx__tx_take_op(&u, point, id, txid, op, amount, inc, tomb);
      if ((rc = dtx__kit_update(ex, point, DTX_ACCOUNTS, u.filter, u.update,
                                &matched)))
        break;
    }
    if (matched) {
      *out = DTX__TAKEN;
      break;
    }
    if (tomb) { /* no marker: the tombstone alone, unless one is there */
      rc = dtx__kit_update(
          ex, point, DTX_ACCOUNTS,
          dtx__pack("{s:s,s:{s:s},s:{s:s}}", "_id", id, "pending.tx", "$ne",
                    txid, "voids.tx", "$ne", txid),
          dtx__pack("{s:o}", "$push", tombstone(txid)), &matched);
      if (rc || matched)
        break; /* ABSENT */
    }
    json_t *a = NULL;
    if ((rc = read_account(ex, id, &a)))
      break;
    if (!a) {
      *out = DTX__GONE;
      break;
    }
    const json_t *m = dtx__marker(a, txid, op);
    int settled = 0;
    if (m && needs_ceiling && !json_object_get(a, "ceiling"))
      rc = upgrade(ex, point, a); /* then take it again */
    else if (m && (!json_is_integer(json_object_get(m, "amount")) ||
                   dtx__int(m, "amount") != amount))
      rc = dtx__err(DTX_ESTATE, "account %s holds a %s marker for transfer %s "
                    "that does not carry its amount %lld", id, op, txid,
                    (long long)amount);
    else if (!m && (!tomb || dtx__has_tombstone(a, txid)))
      settled = 1; /* ABSENT */
    /* else: another step changed the account in between: again */
    json_decref(a);
    if (rc || settled)
      break;
    if (round == ROUNDS - 1)
      rc = dtx__err(DTX_EBUSY, "the %s marker of transfer %s on account %s "
                    "kept changing", op, txid, id);
  }
  json_decref(inc);
  /* I9: never "nothing matched": taken, absent, or the account gone. */
  DTX_ASSERT(rc || *out == DTX__TAKEN || *out == DTX__ABSENT ||
                 *out == DTX__GONE,
             "I9");
  return rc;
}

int dtx__tx_take_marker(dtx__exec_t *ex, const char *point, const char *id,
                        const char *txid, const char *op, int64_t amount,
                        json_t *inc, int tomb, enum dtx__taken *out) {
  return dtx__tx_take_marker_after(ex, point, id, txid, op, amount, inc, tomb,
                                   0, out);
}

/* ---- the payee's credit marker ------------------------------------------------ */

void dtx__tx_mark_op(dtx__kit_upd_t *u, const json_t *tx) {
  const char *id = dtx__str(tx, "_id"), *to = dtx__str(tx, "to");
  int64_t amount = dtx__int(tx, "amount"); /* >= 1 but past the validator */
  int64_t room = INT64_MAX - (amount > 0 ? amount : 0); /* never wraps (I7) */
  u->point = "transfer.mark_payee";
  u->coll = DTX_ACCOUNTS;
  u->filter = dtx__pack("{s:s,s:{s:I},s:{s:s},s:{s:s}}", "_id", to, "ceiling",
                        "$lte", (json_int_t)room, "pending.tx",
                        "$ne", id, "voids.tx", "$ne", id);
  u->update = dtx__pack(
      "{s:{s:I},s:{s:{s:s,s:s,s:I,s:I}}}", "$inc", "ceiling",
      (json_int_t)amount, "$push", "pending", "tx", id, "op", "credit",
      "amount", (json_int_t)amount, "at", (json_int_t)dtx__now_ms());
}

int dtx__tx_mark_payee(dtx__exec_t *ex, const json_t *tx, int tried,
                       enum dtx__marked *why) {
  const char *id = dtx__str(tx, "_id"), *to = dtx__str(tx, "to");
  int rc = 0;
  for (int round = 0; round < ROUNDS; round++) {
    int matched = 0;
    if (round > 0 || !tried) {
      dtx__kit_upd_t u;
      dtx__tx_mark_op(&u, tx);
      if ((rc = dtx__kit_update(ex, u.point, DTX_ACCOUNTS, u.filter, u.update,
                                &matched)))
        return rc;
    }
    if (matched) {
      *why = DTX__MK_DONE;
      return 0;
    }
    json_t *a = NULL;
    if ((rc = read_account(ex, to, &a)))
      return rc;
    if (!a) {
      *why = DTX__MK_MISSING;
      return 0;
    }
    int again = 0;
    if (dtx__has_tombstone(a, id))
      *why = DTX__MK_FENCED;
    else if (dtx__marker(a, id, "credit"))
      *why = DTX__MK_DONE; /* our own earlier attempt landed */
    else if (!json_object_get(a, "ceiling")) {
      rc = upgrade(ex, "transfer.mark_payee", a); /* older account: mark again */
      again = rc == 0;
      if (rc == DTX_ESTATE) { /* its markers already pass int64 */
        rc = 0;
        *why = DTX__MK_REFUSED;
      }
    } else
      *why = DTX__MK_REFUSED; /* no headroom left under INT64_MAX (or a ceiling
                              that is not an integer: the audit says so) */
    json_decref(a);
    if (rc || !again)
      return rc;
  }
  return dtx__err(DTX_EBUSY, "the payee %s of transfer %s kept changing", to,
                  id);
}
