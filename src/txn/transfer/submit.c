/* submit.c -- recording a transfer: the checks of a request, the new
 * transfer document, and what an id that exists already means (the same
 * request again: returned and driven; other parameters: a conflict).
 * dtx_transfer_submit records it initiated for a worker; the synchronous
 * path (transfer/many.c, dtx_transfer_execute and _execute_many) inserts
 * the documents built here already claimed.  The state machine these
 * records enter is in transfer.c. */
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
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
  /* The transfer's shape from its first write (dtx__tx_check_req). */
  DTX_ASSERT(id && req->amount >= 1 && strcmp(req->from, req->to) != 0, "I4");
  json_t *tx = dtx__pack(
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
  DTX_ASSERT(!*mine || dtx__state_is(have, DTX_ST_PREPARING), "I3");
  *out = have;
  return 0;
}

/* The accounts ids[0..n) (NULLs skipped, a repeated id read once) in
 * one find ({_id: {$in: [...]}}): *byid, an object _id -> account (a new
 * reference, NULL on error).  Submission and both first rounds of a
 * batch read through it. */
int dtx__tx_read_accounts(dtx__exec_t *ex, const char *const *ids, size_t n,
                          json_t **byid) {
  json_t *in = json_array(), *seen = json_object(), *accts = NULL, *a;
  size_t i;
  int rc = in && seen ? 0 : DTX_ENOMEM;
  *byid = NULL;
  for (i = 0; i < n && rc == 0; i++)
    if (ids[i] && !json_object_get(seen, ids[i]) &&
        (json_object_set_new(seen, ids[i], json_true()) ||
         json_array_append_new(in, json_string(ids[i]))))
      rc = DTX_ENOMEM;
  if (rc == 0 && json_array_size(in) > 0) {
    json_t *filter = dtx__pack("{s:{s:O}}", "_id", "$in", in);
    rc = filter ? dtx__kit_find(ex, DTX_ACCOUNTS, filter, NULL, &accts)
                : DTX_ENOMEM;
    json_decref(filter);
  }
  if (rc == 0 && !(*byid = json_object()))
    rc = DTX_ENOMEM;
  json_array_foreach(accts, i, a) {
    if (rc == 0 && dtx__str(a, "_id"))
      json_object_set(*byid, dtx__str(a, "_id"), a);
  }
  json_decref(accts);
  json_decref(in);
  json_decref(seen);
  return rc;
}

/* Records the transfer req initiated, for a worker to claim (a
 * synchronous transfer is recorded already claimed by the batch driver,
 * many.c).  The accounts are read in one query first: a missing one is
 * DTX_ENOACCOUNT, nothing recorded.  An id that exists already is the same
 * request again (returned as it stands) or a conflict (dtx__tx_existing). */
static int submit(dtx__exec_t *ex, const dtx_transfer_req_t *req,
                  json_t **out) {
  json_t *byid = NULL, *tx = NULL;
  char idbuf[25];
  int rc, mine;
  if ((rc = dtx__tx_check_req(req)) ||
      (rc = dtx__kit_ensure(ex->st, &dtx__transfer_pattern)))
    return rc;
  const char *ids[2] = {req->from, req->to};
  if ((rc = dtx__tx_read_accounts(ex, ids, 2, &byid)))
    return rc;
  for (int k = 0; k < 2 && !rc; k++)
    if (!json_object_get(byid, ids[k]))
      rc = dtx__err(DTX_ENOACCOUNT, "no account '%s'", ids[k]);
  json_decref(byid);
  if (rc)
    return rc;
  const char *id = req->id;
  if (!id) {
    dtx__id_new(idbuf);
    id = idbuf;
  }
  DTX_ASSERT(dtx__check_ident("transfer id", id) == 0, "I4");
  if (!(tx = dtx__tx_new(ex, req, id, 0)))
    return DTX_ENOMEM;
  rc = dtx__kit_insert(ex, "transfer.submit", DTX_TRANSFERS, tx);
  if (rc == DTX_EDUPKEY) {
    json_t *have = NULL;
    rc = dtx__tx_existing(ex, req, id, tx, 0, &mine, &have);
    json_decref(tx);
    tx = have;
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

