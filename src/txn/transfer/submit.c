/* submit.c -- recording a transfer: the checks of a request, the new
 * transfer document, and what an id that exists already means (the same
 * request again: returned and driven; other parameters: a conflict).
 * dtx_transfer_submit records it initiated for a worker; the synchronous
 * path (transfer/batch.c, dtx_transfer_execute and _execute_many) inserts
 * the documents built here already claimed.  The state machine these
 * records enter is in transfer.c. */
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/err.h"

/* ---- submission ------------------------------------------------------------ */

int dtx__tx_check_req(const dtx_transfer_req_t *req) {
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

int dtx_transfer_req_check(const dtx_transfer_req_t *req) {
  dtx__err_clear();
  return dtx__tx_check_req(req);
}

static int same_params(const json_t *tx, const dtx_transfer_req_t *req) {
  const char *f = dtx__str(tx, "from"), *t = dtx__str(tx, "to");
  return f && t && strcmp(f, req->from) == 0 && strcmp(t, req->to) == 0 &&
         dtx__int(tx, "amount") == req->amount;
}

json_t *dtx__tx_new(const dtx__exec_t *ex, const dtx_transfer_req_t *req,
                    const char *id, int claimed) {
  int64_t now = dtx__now_ms();
  json_t *tx = json_pack(
      "{s:s,s:s,s:s,s:I,s:s,s:n,s:n,s:I,s:I,s:I,s:I}", "_id", id, "from",
      req->from, "to", req->to, "amount", (json_int_t)req->amount, "state",
      DTX_ST_INITIATED, "reason", "owner", "lease_until", (json_int_t)0,
      "epoch", (json_int_t)0, "created", (json_int_t)now, "updated",
      (json_int_t)now);
  if (tx && claimed) {
    json_object_set_new(tx, "state", json_string(DTX_ST_PREPARING));
    json_object_set_new(tx, "owner", json_string(ex->owner));
    json_object_set_new(tx, "lease_until", json_integer(now + ex->lease_ms));
    json_object_set_new(tx, "epoch", json_integer(1));
  }
  return tx;
}

/* The id exists: a retry of the same request returns it (at most once), a
 * different request under the same id is refused.  The very record ex
 * tried to insert is its own (an insert whose reply was lost). */
int dtx__tx_existing(dtx__exec_t *ex, const dtx_transfer_req_t *req,
                     const char *id, const json_t *tried, int claimed,
                     int *mine, json_t **out) {
  json_t *have = NULL;
  int rc;
  *out = NULL;
  *mine = 0;
  if ((rc = dtx__kit_get(ex, DTX_TRANSFERS, id, &have)))
    return rc;
  if (!same_params(have, req)) {
    json_decref(have);
    return dtx__err(DTX_ECONFLICT,
                    "transfer '%s' exists with different parameters", id);
  }
  *mine = claimed && tried && json_equal(have, tried);
  *out = have;
  return 0;
}

/* Records the transfer req.  The accounts are read in one query, and
 * *payer (may be NULL) receives the payer as read, which the first debit
 * uses instead of reading it again.  claimed = 0 records it initiated, for
 * a worker to claim; claimed = 1 records it already claimed by ex
 * (preparing, owner, lease, epoch 1), which saves the claim step: an
 * executor that dies right after is one that died after a claim, and
 * recovery takes it over when its lease lapses.  *mine: 1 when ex made
 * the claimed record (now, or before a lost reply), so ex runs its
 * prepare phase; 0 when the id existed already (the same request again:
 * it is returned, and driven from where it stands). */
static int submit(dtx__exec_t *ex, const dtx_transfer_req_t *req, int claimed,
                  json_t **payer, int *mine, json_t **out) {
  json_t *accts = NULL, *tx = NULL;
  char idbuf[25];
  int rc;
  *mine = 0;
  if (payer)
    *payer = NULL;
  if ((rc = dtx__tx_check_req(req)))
    return rc;
  if ((rc = dtx__kit_ensure(ex->st, &dtx__transfer_pattern)))
    return rc;
  json_t *filter = json_pack("{s:{s:[s,s]}}", "_id", "$in", req->from, req->to);
  rc = filter ? dtx__kit_find(ex, DTX_ACCOUNTS, filter, NULL, &accts)
              : DTX_ENOMEM;
  json_decref(filter);
  if (rc)
    return rc;
  const char *ids[2] = {req->from, req->to};
  const json_t *found[2] = {NULL, NULL};
  size_t i;
  json_t *a;
  json_array_foreach(accts, i, a) {
    for (int k = 0; k < 2; k++)
      if (dtx__str_is(a, "_id", ids[k]))
        found[k] = a;
  }
  for (int k = 0; k < 2; k++)
    if (!found[k]) {
      json_decref(accts);
      return dtx__err(DTX_ENOACCOUNT, "no account '%s'", ids[k]);
    }
  if (payer)
    *payer = json_incref((json_t *)found[0]);
  json_decref(accts);
  const char *id = req->id;
  if (!id) {
    dtx__id_new(idbuf);
    id = idbuf;
  }
  tx = dtx__tx_new(ex, req, id, claimed);
  if (!tx) {
    rc = DTX_ENOMEM;
    goto fail;
  }
  rc = dtx__kit_insert(ex, "transfer.submit", DTX_TRANSFERS, tx);
  *mine = rc == 0 && claimed;
  if (rc == DTX_EDUPKEY) {
    json_t *have = NULL;
    if ((rc = dtx__tx_existing(ex, req, id, tx, claimed, mine, &have)))
      goto fail;
    json_decref(tx);
    tx = have;
  }
  if (rc)
    goto fail;
  *out = tx;
  return 0;
fail:
  json_decref(tx);
  if (payer) {
    json_decref(*payer);
    *payer = NULL;
  }
  *mine = 0;
  return rc;
}

int dtx_transfer_submit(dtx_store_t *st, const dtx_transfer_req_t *req,
                        json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int mine;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, submit(&ex, req, 0, NULL, &mine, out));
}

