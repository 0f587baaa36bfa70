/* recover.c -- the recovery pass that finishes what dead or stalled
 * executors left behind, on both sides: transfer documents and the markers
 * on accounts (weak spot 5 of the reference patterns).
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
 *
 * Takeover is conditioned on the epoch the pass read, so two recoverers
 * (or a recoverer and a cancel) never both roll back one transfer, and the
 * old owner's remaining transitions fail (transfer.c, I3).  Marker repair
 * runs only for terminal or missing transfers, whose markers no protocol
 * step will touch again. */
#include <string.h>

#include "doc/doc.h"
#include "util/fault.h"
#include "txn/txn.h"
#include "util/err.h"

#define DEFAULT_TOMBSTONE_TTL_MS (24LL * 3600 * 1000)

typedef struct counts {
  int64_t executed, rolled_back, finished, markers, tombstones, errors;
} counts_t;

static int abandoned(const json_t *tx, const dtx_recover_opts_t *o,
                     int64_t now) {
  if (o->older_than_ms >= 0)
    return dtx__int(tx, "updated") <= now - o->older_than_ms;
  if (dtx__state_is(tx, DTX_ST_INITIATED))
    return 0; /* workers claim these; only an explicit age makes them ours */
  return dtx__int(tx, "lease_until") <= now;
}

static void note_error(counts_t *c, int rc, int *first) {
  c->errors++;
  if (!*first)
    *first = rc;
}

/* Drives every abandoned non-terminal transfer to its end. */
static int recover_transfers(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                             counts_t *c, int *first_err) {
  json_t *filter = json_pack("{s:{s:[s,s,s,s]}}", "state", "$in",
                             DTX_ST_INITIATED, DTX_ST_PREPARING,
                             DTX_ST_COMMITTED, DTX_ST_ROLLING_BACK);
  json_t *list = NULL, *tx;
  size_t i;
  int rc = dtx_store_find(ex->st, DTX_TRANSFERS, filter, NULL, &list);
  json_decref(filter);
  if (rc)
    return rc;
  int64_t now = dtx__now_ms();
  json_array_foreach(list, i, tx) {
    json_t *out = NULL;
    if (!abandoned(tx, o, now))
      continue;
    if (dtx__state_is(tx, DTX_ST_PREPARING)) {
      json_t *cond = json_pack("{s:O,s:O}", "epoch", json_object_get(tx, "epoch"),
                               "updated", json_object_get(tx, "updated"));
      rc = dtx__tx_takeover(ex, tx, DTX_REASON_ABANDONED, cond,
                            "recover.takeover", &out);
      json_decref(cond);
      if (rc == 0)
        c->rolled_back++;
    } else {
      int initiated = dtx__state_is(tx, DTX_ST_INITIATED);
      rc = dtx__tx_drive(ex, tx, 0, &out);
      if (rc == 0)
        *(initiated ? &c->executed : &c->finished) += 1;
    }
    json_decref(out);
    if (rc && rc != DTX_ENOMATCH)
      note_error(c, rc, first_err);
  }
  json_decref(list);
  return 0;
}

int dtx__tx_repair_marker(dtx__exec_t *ex, const char *acct,
                          const json_t *marker, const json_t *tx) {
  const char *id = dtx__str(marker, "tx"), *op = dtx__str(marker, "op");
  (void)tx; /* terminal or missing: either way the marker must go */
  if (op && strcmp(op, "debit") == 0) {
    /* A debit whose transfer is over still holds money out of circulation:
     * for a failed or missing transfer it was never spent, and for a
     * succeeded one the real debit was cleared before the finish, so this
     * is a second reservation.  Either way it goes back to the payer. */
    return dtx__step(
        ex, "recover.repair_marker", DTX_ACCOUNTS,
        json_pack("{s:s,s:{s:{s:s,s:s}}}", "_id", acct, "pending", "$elemMatch",
                  "tx", id, "op", "debit"),
        json_pack("{s:{s:O},s:{s:{s:s,s:s}}}", "$inc", "balance",
                  json_object_get(marker, "amount"), "$pull", "pending", "tx",
                  id, "op", "debit"),
        NULL);
  }
  return dtx__step(ex, "recover.repair_marker", DTX_ACCOUNTS,
                   json_pack("{s:s,s:s}", "_id", acct, "pending.tx", id),
                   json_pack("{s:{s:{s:s,s:s?}}}", "$pull", "pending", "tx", id,
                             "op", op),
                   NULL);
}

/* Looks a transfer up in cache (an object id -> doc, or null if missing). */
static int lookup(dtx__exec_t *ex, json_t *cache, const char *id,
                  json_t **tx) {
  json_t *hit = json_object_get(cache, id);
  if (!hit) {
    int rc = dtx_transfer_get(ex->st, id, &hit);
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
                           counts_t *c, int *first_err) {
  int64_t ttl = o->tombstone_ttl_ms > 0 ? o->tombstone_ttl_ms
                                        : DEFAULT_TOMBSTONE_TTL_MS;
  int rc = DTX_FAULTPOINT("recover.scan_markers");
  if (rc)
    return rc;
  json_t *filter = json_pack("{s:[{s:{s:b}},{s:{s:b}}]}", "$or", "pending.0",
                             "$exists", 1, "voids.0", "$exists", 1);
  json_t *accts = NULL, *cache = json_object(), *a;
  size_t i;
  rc = dtx_store_find(ex->st, DTX_ACCOUNTS, filter, NULL, &accts);
  json_decref(filter);
  int64_t now = dtx__now_ms();
  json_array_foreach(accts, i, a) {
    const char *acct = dtx__str(a, "_id");
    size_t j;
    json_t *m, *tx;
    json_array_foreach(json_object_get(a, "pending"), j, m) {
      if ((rc = lookup(ex, cache, dtx__str(m, "tx"), &tx)))
        goto out;
      if (tx && !dtx__terminal(tx))
        continue;
      rc = dtx__tx_repair_marker(ex, acct, m, tx);
      if (rc)
        note_error(c, rc, first_err);
      else
        c->markers++;
    }
    json_array_foreach(json_object_get(a, "voids"), j, m) {
      if ((rc = lookup(ex, cache, dtx__str(m, "tx"), &tx)))
        goto out;
      if (tx && !dtx__state_is(tx, DTX_ST_FAILED))
        continue; /* not ours to judge: the audit reports it */
      if (dtx__int(m, "at") > now - ttl)
        continue;
      rc = dtx__step(ex, "recover.clear_tombstone", DTX_ACCOUNTS,
                     json_pack("{s:s}", "_id", acct),
                     json_pack("{s:{s:{s:O}}}", "$pull", "voids", "tx",
                               json_object_get(m, "tx")),
                     NULL);
      if (rc)
        note_error(c, rc, first_err);
      else
        c->tombstones++;
    }
  }
  rc = 0;
out:
  json_decref(accts);
  json_decref(cache);
  return rc;
}

int dtx_recover(dtx_store_t *st, const dtx_recover_opts_t *opts,
                json_t **summary) {
  dtx_recover_opts_t o = {.older_than_ms = -1};
  dtx__exec_t ex;
  counts_t c = {0};
  int first_err = 0, rc;
  char owner[160];
  if (summary)
    *summary = NULL;
  dtx__err_clear();
  if (opts)
    o = *opts;
  dtx__exec_init(&ex, st, NULL, 0);
  snprintf(owner, sizeof owner, "recover@%.120s", ex.owner);
  dtx__exec_init(&ex, st, owner, 0);
  if ((rc = dtx__txn_ensure_indexes(st)))
    return rc;
  if ((rc = recover_transfers(&ex, &o, &c, &first_err)))
    return rc;
  if ((rc = recover_markers(&ex, &o, &c, &first_err)))
    return rc;
  if (summary)
    *summary = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "executed",
                         (json_int_t)c.executed, "rolled_back",
                         (json_int_t)c.rolled_back, "finished",
                         (json_int_t)c.finished, "markers_repaired",
                         (json_int_t)c.markers, "tombstones_cleared",
                         (json_int_t)c.tombstones, "errors",
                         (json_int_t)c.errors);
  return first_err;
}
