/* recover.c -- the transfer pattern's recovery pass: it finishes what dead
 * or stalled executors left behind, on both sides -- transfer documents
 * and the markers on accounts (weak spot 5 of the reference patterns).
 * The kit's frame (src/txn/frame/recover.c) calls it through the method table.
 *
 *   transfer state        abandoned?                      action
 *   initiated             not updated for older_than      execute it
 *   preparing             lease lapsed / older_than       take over (epoch+1),
 *                                                         roll back
 *   committed             lease lapsed / older_than       finish (idempotent)
 *   rolling_back          lease lapsed / older_than       finish (idempotent)
 *   account marker        its transfer terminal/missing   refund or remove
 *   tombstone             older than tombstone_ttl and    clear
 *                         its transfer failed
 *   unregistered account  always (both writes idempotent) record its opening
 *
 *   step                          fault point
 *   takeover of preparing         transfer.recover.takeover
 *   scan of account markers       transfer.recover.scan_markers
 *   refund/removal of a marker    transfer.recover.repair_marker
 *   removal of a tombstone        transfer.recover.clear_tombstone
 *   an account's opening record   transfer.register, transfer.registered
 *
 * Takeover is conditioned on the epoch the pass read, so two recoverers
 * (or a recoverer and a cancel) never both roll back one transfer, and the
 * old owner's remaining transitions fail (transfer.c, I3).  Marker repair
 * runs only for terminal or missing transfers, whose markers no protocol
 * step will touch again.  What is not abandoned is tallied as skipped,
 * with the reason. */
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

#define DEFAULT_TOMBSTONE_TTL_MS (24LL * 3600 * 1000)

/* NULL when tx is abandoned, else why it is left alone. */
static const char *left_alone(const json_t *tx, const dtx_recover_opts_t *o,
                              int64_t now) {
  if (o->older_than_ms < 0 && dtx__state_is(tx, DTX_ST_INITIATED))
    return "initiated: left to workers"; /* only an explicit age makes them ours */
  if (dtx__kit_abandoned(o, dtx__int(tx, "updated"),
                         dtx__int(tx, "lease_until"), now))
    return NULL;
  return o->older_than_ms >= 0 ? "updated within --older-than-ms"
                               : "lease not expired";
}

/* Drives every abandoned non-terminal transfer to its end. */
static int recover_transfers(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                             dtx__tally_t *t) {
  json_t *filter = json_pack("{s:{s:[s,s,s,s]}}", "state", "$in",
                             DTX_ST_INITIATED, DTX_ST_PREPARING,
                             DTX_ST_COMMITTED, DTX_ST_ROLLING_BACK);
  json_t *list = NULL, *tx;
  size_t i;
  int rc = dtx__kit_find(ex, DTX_TRANSFERS, filter, NULL, &list);
  json_decref(filter);
  if (rc)
    return rc;
  int64_t now = dtx__now_ms();
  json_array_foreach(list, i, tx) {
    json_t *out = NULL;
    const char *why = left_alone(tx, o, now);
    DTX_ASSERT(!dtx__tx_terminal(tx), "I6"); /* the find's filter */
    if (why) {
      dtx__tally_skip(t, why, json_object_get(tx, "_id"));
      continue;
    }
    if (dtx__state_is(tx, DTX_ST_PREPARING)) {
      /* Untouched since this pass read it (and at its epoch): ours. */
      rc = dtx__tx_takeover(ex, tx, DTX_REASON_ABANDONED,
                            json_pack("{s:O}", "updated",
                                      json_object_get(tx, "updated")),
                            "transfer.recover.takeover", &out);
      if (rc == 0)
        dtx__tally_ran(t, "rolled_back", 1);
    } else {
      int initiated = dtx__state_is(tx, DTX_ST_INITIATED);
      rc = dtx__tx_drive(ex, tx, 0, &out);
      if (rc == 0)
        dtx__tally_ran(t, initiated ? "executed" : "finished", 1);
    }
    json_decref(out);
    if (rc == DTX_ENOMATCH)
      dtx__tally_skip(t, "moved on while recovering", json_object_get(tx, "_id"));
    else if (rc)
      dtx__tally_error(t, json_object_get(tx, "_id"), rc);
  }
  json_decref(list);
  return 0;
}

/* Account-side repair of one marker whose transfer is terminal or
 * missing: either way the marker must go.  A debit whose transfer is over
 * still holds money out of circulation: for a failed or missing transfer
 * it was never spent, and for a succeeded one the real debit was cleared
 * before the finish, so this is a second reservation.  Either way it goes
 * back to the payer (ceiling unchanged).  A credit marker goes with its
 * reservation under the ceiling (transfer.c, I7). */
static int repair_marker(dtx__exec_t *ex, const char *acct,
                         const json_t *marker) {
  const char *id = dtx__str(marker, "tx"), *op = dtx__str(marker, "op");
  json_t *amt = json_object_get(marker, "amount");
  enum dtx__taken got;
  if (!id || !op || !json_is_integer(amt) || json_integer_value(amt) <= 0)
    return dtx__err(DTX_ESTATE, "account %s has a malformed marker: left for "
                    "an operator (the audit reports it)", acct);
  int debit = strcmp(op, "debit") == 0;
  DTX_ASSERT(json_integer_value(amt) > 0, "I4"); /* checked above */
  return dtx__tx_take_marker(
      ex, "transfer.recover.repair_marker", acct, id, op,
      json_integer_value(amt),
      json_pack("{s:o}", debit ? "balance" : "ceiling",
                debit ? json_incref(amt)
                      : json_integer(-json_integer_value(amt))),
      0, &got);
}

/* Looks a transfer up in cache (an object id -> doc, or null if missing). */
static int lookup(dtx__exec_t *ex, json_t *cache, const char *id,
                  json_t **tx) {
  json_t *hit = json_object_get(cache, id);
  if (!hit) {
    int rc = dtx__kit_get(ex, DTX_TRANSFERS, id, &hit);
    if (rc == DTX_ENOTFOUND)
      hit = json_null();
    else if (rc)
      return rc;
    json_object_set_new(cache, id, hit);
  }
  *tx = json_is_null(hit) ? NULL : hit;
  return 0;
}

static int recover_markers(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                           dtx__tally_t *t) {
  int64_t ttl = o->tombstone_ttl_ms > 0 ? o->tombstone_ttl_ms
                                        : DEFAULT_TOMBSTONE_TTL_MS;
  int rc = dtx__kit_point("transfer.recover.scan_markers", NULL);
  if (rc)
    return rc;
  json_t *filter = json_pack("{s:[{s:{s:b}},{s:{s:b}}]}", "$or", "pending.0",
                             "$exists", 1, "voids.0", "$exists", 1);
  json_t *accts = NULL, *cache = json_object(), *a;
  size_t i;
  rc = dtx__kit_find(ex, DTX_ACCOUNTS, filter, NULL, &accts);
  json_decref(filter);
  if (rc)
    goto out;
  int64_t now = dtx__now_ms();
  json_array_foreach(accts, i, a) {
    const char *acct = dtx__str(a, "_id");
    size_t j;
    json_t *m, *tx;
    json_array_foreach(json_object_get(a, "pending"), j, m) {
      if ((rc = lookup(ex, cache, dtx__str(m, "tx"), &tx)))
        goto out;
      if (tx && !dtx__tx_terminal(tx))
        continue;
      /* I6: only a marker no protocol step will touch again goes. */
      DTX_ASSERT(!tx || dtx__tx_terminal(tx), "I6");
      rc = repair_marker(ex, acct, m);
      if (rc)
        dtx__tally_error(t, json_object_get(m, "tx"), rc);
      else
        dtx__tally_ran(t, "markers_repaired", 1);
    }
    json_array_foreach(json_object_get(a, "voids"), j, m) {
      if ((rc = lookup(ex, cache, dtx__str(m, "tx"), &tx)))
        goto out;
      if (tx && !dtx__state_is(tx, DTX_ST_FAILED))
        continue; /* not ours to judge: the audit reports it */
      /* I8: a tombstone outlives its use: its transfer failed (or is gone). */
      DTX_ASSERT(!tx || dtx__state_is(tx, DTX_ST_FAILED), "I8");
      if (dtx__int(m, "at") > now - ttl) {
        json_t *what = json_sprintf("%s on %s", dtx__str(m, "tx"), acct);
        dtx__tally_skip(t, "tombstone younger than --tombstone-ttl-ms", what);
        json_decref(what);
        continue;
      }
      rc = dtx__kit_update(ex, "transfer.recover.clear_tombstone", DTX_ACCOUNTS,
                           json_pack("{s:s}", "_id", acct),
                           json_pack("{s:{s:{s:O}}}", "$pull", "voids", "tx",
                                     json_object_get(m, "tx")),
                           NULL);
      if (rc)
        dtx__tally_error(t, json_object_get(m, "tx"), rc);
      else
        dtx__tally_ran(t, "tombstones_cleared", 1);
    }
  }
  rc = 0;
out:
  json_decref(accts);
  json_decref(cache);
  return rc;
}

/* Accounts whose creator stopped between the account and its opening
 * record (account.c, "The registry"): record it now.  No lease to wait
 * for: both writes are idempotent, so a creator still running and this
 * pass can both make them. */
static int recover_registrations(dtx__exec_t *ex, dtx__tally_t *t) {
  json_t *accts = NULL, *a, *filter = json_pack("{s:b}", "unregistered", 1);
  size_t i;
  int rc = dtx__kit_find(ex, DTX_ACCOUNTS, filter, NULL, &accts);
  json_decref(filter);
  if (rc)
    return rc;
  json_array_foreach(accts, i, a) {
    if ((rc = dtx__tx_register(ex, a)))
      dtx__tally_error(t, json_object_get(a, "_id"), rc);
    else
      dtx__tally_ran(t, "accounts_registered", 1);
  }
  json_decref(accts);
  return 0;
}

int dtx__tx_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                    dtx__tally_t *t) {
  int rc = recover_transfers(ex, o, t);
  if (rc == 0)
    rc = recover_markers(ex, o, t);
  if (rc == 0)
    rc = recover_registrations(ex, t);
  return rc;
}
