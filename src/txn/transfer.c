/* transfer.c -- the two-phase transfer between two accounts.
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
 *   initiated -> preparing          claim()             transfer.claim
 *   (payer: debit + debit marker)   prepare()           transfer.debit
 *   (payee: credit marker)          prepare()           transfer.mark_payee
 *   preparing -> committed          prepare()           transfer.commit
 *   (payer: drop debit marker)      finish_commit()     transfer.clear_payer
 *   (payee: credit, drop marker)    finish_commit()     transfer.credit_payee
 *   committed -> succeeded          finish_commit()     transfer.finish
 *   preparing -> rolling_back       begin_rollback()    rollback.begin
 *                                   dtx__tx_takeover()  recover.takeover,
 *                                                       cancel.begin
 *   (payer: refund, tombstone)      finish_rollback()   rollback.refund_payer
 *   (payee: drop marker, tombstone) finish_rollback()   rollback.unmark_payee
 *   rolling_back -> failed          finish_rollback()   rollback.finish
 *   initiated -> failed             dtx_transfer_cancel cancel.begin
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
#include <time.h>
#include <unistd.h>

#include "doc/doc.h"
#include "util/fault.h"
#include "txn/txn.h"
#include "util/err.h"

#define DEFAULT_LEASE_MS 30000
#define STEP_RETRIES 4

/* ---- small helpers --------------------------------------------------------- */

const char *dtx__str(const json_t *doc, const char *key) {
  return json_string_value(json_object_get(doc, key));
}

int64_t dtx__int(const json_t *doc, const char *key) {
  return (int64_t)json_integer_value(json_object_get(doc, key));
}

int dtx__state_is(const json_t *tx, const char *state) {
  const char *s = dtx__str(tx, "state");
  return s && strcmp(s, state) == 0;
}

int dtx__terminal(const json_t *tx) {
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

void dtx__exec_init(dtx__exec_t *ex, dtx_store_t *st, const char *owner,
                    int64_t lease_ms) {
  ex->st = st;
  ex->lease_ms = lease_ms > 0 ? lease_ms : DEFAULT_LEASE_MS;
  if (owner && *owner) {
    snprintf(ex->owner, sizeof ex->owner, "%s", owner);
  } else {
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(ex->owner, sizeof ex->owner, "%s:%ld", host, (long)getpid());
  }
}

int dtx__transient(int rc) {
  return rc == DTX_EBUSY || rc == DTX_EBACKEND || rc == DTX_EUNAVAILABLE ||
         rc == DTX_EFAULT;
}

static void backoff(int attempt) {
  struct timespec ts = {0, (long)(1000000L << (attempt * 2))}; /* 1,4,16,64ms */
  nanosleep(&ts, NULL);
}

int dtx__step(dtx__exec_t *ex, const char *point, const char *coll,
              json_t *filter, json_t *update, int *matched) {
  int rc = DTX_ENOMEM;
  if (matched)
    *matched = 0;
  for (int attempt = 0; filter && update; attempt++) {
    dtx_update_result_t res = {0};
    rc = DTX_FAULTPOINT(point);
    if (rc == 0)
      rc = dtx_store_update(ex->st, coll, filter, update, NULL, &res);
    if (rc == 0) {
      if (matched)
        *matched = res.matched > 0;
      break;
    }
    if (!dtx__transient(rc) || attempt + 1 >= STEP_RETRIES)
      break;
    backoff(attempt);
  }
  json_decref(filter);
  json_decref(update);
  return rc;
}

/* Reads one document by _id with the same retry policy as steps. */
static int get_doc(dtx__exec_t *ex, const char *coll, const char *id,
                   json_t **out) {
  json_t *filter = json_pack("{s:s}", "_id", id);
  json_t *docs = NULL;
  int rc = DTX_ENOMEM;
  *out = NULL;
  for (int attempt = 0; filter; attempt++) {
    rc = dtx_store_find(ex->st, coll, filter, NULL, &docs);
    if (rc == 0 || !dtx__transient(rc) || attempt + 1 >= STEP_RETRIES)
      break;
    backoff(attempt);
  }
  json_decref(filter);
  if (rc)
    return rc;
  if (json_array_size(docs) == 0) {
    json_decref(docs);
    return DTX_ENOTFOUND;
  }
  *out = json_incref(json_array_get(docs, 0));
  json_decref(docs);
  return 0;
}

/* A state change of the transfer document: filter {_id, state: from,
 * extra...} with update; *out receives the document after it, or NULL with
 * DTX_ENOMATCH when the transfer was not in the expected state. */
static int transition(dtx__exec_t *ex, const char *point, const json_t *tx,
                      const char *from, json_t *extra_cond, json_t *update,
                      json_t **out) {
  json_t *filter = json_pack("{s:O,s:s}", "_id", json_object_get(tx, "_id"),
                             "state", from);
  dtx_fam_opts_t o = {.return_new = 1};
  int rc = DTX_ENOMEM;
  *out = NULL;
  if (filter && extra_cond)
    json_object_update(filter, extra_cond);
  for (int attempt = 0; filter && update; attempt++) {
    rc = DTX_FAULTPOINT(point);
    if (rc == 0)
      rc = dtx_store_find_one_and_update(ex->st, DTX_TRANSFERS, filter, update,
                                         &o, out);
    if (rc == 0 || !dtx__transient(rc) || attempt + 1 >= STEP_RETRIES)
      break;
    backoff(attempt);
  }
  json_decref(filter);
  json_decref(extra_cond);
  json_decref(update);
  return rc;
}

/* ---- indexes ------------------------------------------------------------------ */

int dtx__txn_ensure_indexes(dtx_store_t *st) {
  static _Thread_local const dtx_store_t *done_for;
  if (done_for == st)
    return 0;
  json_t *k1 = json_pack("{s:i}", "state", 1);
  json_t *k2 = json_pack("{s:i}", "pending.tx", 1);
  json_t *k3 = json_pack("{s:i}", "voids.tx", 1);
  int rc = (k1 && k2 && k3) ? 0 : DTX_ENOMEM;
  if (!rc)
    rc = dtx_store_create_index(st, DTX_TRANSFERS, k1, NULL, NULL);
  if (!rc)
    rc = dtx_store_create_index(st, DTX_ACCOUNTS, k2, NULL, NULL);
  if (!rc)
    rc = dtx_store_create_index(st, DTX_ACCOUNTS, k3, NULL, NULL);
  json_decref(k1);
  json_decref(k2);
  json_decref(k3);
  if (!rc)
    done_for = st;
  return rc;
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

int dtx_transfer_submit(dtx_store_t *st, const dtx_transfer_req_t *req,
                        json_t **out) {
  dtx__exec_t ex;
  json_t *acct = NULL, *tx = NULL;
  char idbuf[25];
  int rc;
  *out = NULL;
  dtx__err_clear();
  if ((rc = check_req(req)))
    return rc;
  dtx__exec_init(&ex, st, NULL, 0);
  if ((rc = dtx__txn_ensure_indexes(st)))
    return rc;
  const char *accts[2] = {req->from, req->to};
  for (int i = 0; i < 2; i++) {
    rc = get_doc(&ex, DTX_ACCOUNTS, accts[i], &acct);
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
  for (int attempt = 0;; attempt++) {
    rc = DTX_FAULTPOINT("transfer.submit");
    if (rc == 0)
      rc = dtx_store_insert(st, DTX_TRANSFERS, tx, NULL);
    if (rc == 0 || !dtx__transient(rc) || attempt + 1 >= STEP_RETRIES)
      break;
    backoff(attempt);
  }
  if (rc == DTX_EDUPKEY) {
    /* The id exists: a retry of the same request returns it (at most once),
     * a different request under the same id is refused. */
    json_decref(tx);
    tx = NULL;
    if ((rc = get_doc(&ex, DTX_TRANSFERS, id, &tx)))
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

/* ---- prepare phase -------------------------------------------------------------- */

/* initiated -> preparing, with a fresh lease and epoch. */
static int claim(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  int64_t now = dtx__now_ms();
  json_t *upd = json_pack("{s:{s:s,s:s,s:I,s:I},s:{s:i}}", "$set", "state",
                          DTX_ST_PREPARING, "owner", ex->owner, "lease_until",
                          (json_int_t)(now + ex->lease_ms), "updated",
                          (json_int_t)now, "$inc", "epoch", 1);
  return transition(ex, "transfer.claim", tx, DTX_ST_INITIATED, NULL, upd, out);
}

/* preparing -> rolling_back by the owner itself (fenced by its epoch). */
static int begin_rollback(dtx__exec_t *ex, const json_t *tx, const char *reason,
                          json_t **out) {
  json_t *cond = json_pack("{s:O}", "epoch", json_object_get(tx, "epoch"));
  json_t *upd = json_pack("{s:{s:s,s:s,s:I}}", "$set", "state",
                          DTX_ST_ROLLING_BACK, "reason", reason, "updated",
                          (json_int_t)dtx__now_ms());
  return transition(ex, "rollback.begin", tx, DTX_ST_PREPARING, cond, upd, out);
}

/* Outcome of an account step that matched nothing, read back from the
 * account: which of the refusals it was. */
enum refusal { R_DONE, R_FENCED, R_MISSING, R_LIMIT, R_CHANGED };

static int classify(dtx__exec_t *ex, const char *acct, const char *txid,
                    const char *op, const json_t *expect_min,
                    enum refusal *why) {
  json_t *a = NULL;
  int rc = get_doc(ex, DTX_ACCOUNTS, acct, &a);
  if (rc == DTX_ENOTFOUND) {
    *why = R_MISSING;
    return 0;
  }
  if (rc)
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
    int rc = get_doc(ex, DTX_ACCOUNTS, from, &acct);
    if (rc == DTX_ENOTFOUND) {
      *why = R_MISSING;
      return 0;
    }
    if (rc)
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
    rc = dtx__step(ex, "transfer.debit", DTX_ACCOUNTS, filter, upd, &matched);
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
  int rc = dtx__step(ex, "transfer.mark_payee", DTX_ACCOUNTS, filter, upd,
                     &matched);
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
  json_t *cond = json_pack("{s:O}", "epoch", json_object_get(tx, "epoch"));
  json_t *upd = json_pack("{s:{s:s,s:I}}", "$set", "state", DTX_ST_COMMITTED,
                          "updated", (json_int_t)dtx__now_ms());
  rc = transition(ex, "transfer.commit", tx, DTX_ST_PREPARING, cond, upd, out);
  return rc == DTX_ENOMATCH ? 0 : rc; /* fenced: recovery rolled it back */
}

/* ---- commit and rollback phases (idempotent; anyone may run them) ------------- */

static int finish_commit(dtx__exec_t *ex, const json_t *tx, json_t **out) {
  const char *id = dtx__str(tx, "_id");
  int64_t amount = dtx__int(tx, "amount");
  int rc;
  *out = NULL;
  assert(dtx__state_is(tx, DTX_ST_COMMITTED));
  rc = dtx__step(ex, "transfer.clear_payer", DTX_ACCOUNTS,
                 json_pack("{s:s,s:s}", "_id", dtx__str(tx, "from"),
                           "pending.tx", id),
                 json_pack("{s:{s:{s:s,s:s}}}", "$pull", "pending", "tx", id,
                           "op", "debit"),
                 NULL);
  if (rc)
    return rc;
  rc = dtx__step(ex, "transfer.credit_payee", DTX_ACCOUNTS,
                 json_pack("{s:s,s:{s:{s:s,s:s}}}", "_id", dtx__str(tx, "to"),
                           "pending", "$elemMatch", "tx", id, "op", "credit"),
                 json_pack("{s:{s:I},s:{s:{s:s}}}", "$inc", "balance",
                           (json_int_t)amount, "$pull", "pending", "tx", id),
                 NULL);
  if (rc)
    return rc;
  rc = transition(ex, "transfer.finish", tx, DTX_ST_COMMITTED, NULL,
                  json_pack("{s:{s:s,s:I}}", "$set", "state", DTX_ST_SUCCEEDED,
                            "updated", (json_int_t)dtx__now_ms()),
                  out);
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
    rc = dtx__step(
        ex, "rollback.refund_payer", DTX_ACCOUNTS,
        json_pack("{s:s,s:{s:{s:s,s:s}}}", "_id", from, "pending",
                  "$elemMatch", "tx", id, "op", "debit"),
        json_pack("{s:{s:I},s:{s:{s:s}},s:{s:{s:s,s:I}}}", "$inc", "balance",
                  (json_int_t)amount, "$pull", "pending", "tx", id, "$push",
                  "voids", "tx", id, "at", (json_int_t)dtx__now_ms()),
        &matched);
    if (rc || matched)
      return rc;
    rc = dtx__step(ex, "rollback.refund_payer", DTX_ACCOUNTS,
                   json_pack("{s:s,s:{s:s},s:{s:s}}", "_id", from, "pending.tx",
                             "$ne", id, "voids.tx", "$ne", id),
                   json_pack("{s:{s:{s:s,s:I}}}", "$push", "voids", "tx", id,
                             "at", (json_int_t)dtx__now_ms()),
                   &matched);
    if (rc || matched)
      return rc;
    json_t *a = NULL;
    rc = get_doc(ex, DTX_ACCOUNTS, from, &a);
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
  rc = dtx__step(ex, "rollback.unmark_payee", DTX_ACCOUNTS,
                 json_pack("{s:s,s:{s:s}}", "_id", dtx__str(tx, "to"),
                           "voids.tx", "$ne", id),
                 json_pack("{s:{s:{s:s}},s:{s:{s:s,s:I}}}", "$pull", "pending",
                           "tx", id, "$push", "voids", "tx", id, "at",
                           (json_int_t)dtx__now_ms()),
                 NULL);
  if (rc)
    return rc;
  rc = transition(ex, "rollback.finish", tx, DTX_ST_ROLLING_BACK, NULL,
                  json_pack("{s:{s:s,s:I}}", "$set", "state", DTX_ST_FAILED,
                            "updated", (json_int_t)dtx__now_ms()),
                  out);
  return rc == DTX_ENOMATCH ? 0 : rc;
}

int dtx__tx_takeover(dtx__exec_t *ex, const json_t *tx, const char *reason,
                     const json_t *cond, const char *point, json_t **out) {
  int64_t now = dtx__now_ms();
  json_t *c = cond ? json_deep_copy(cond) : NULL;
  json_t *upd = json_pack("{s:{s:s,s:s,s:s,s:I,s:I},s:{s:i}}", "$set", "state",
                          DTX_ST_ROLLING_BACK, "reason", reason, "owner",
                          ex->owner, "lease_until",
                          (json_int_t)(now + ex->lease_ms), "updated",
                          (json_int_t)now, "$inc", "epoch", 1);
  json_t *taken = NULL;
  int rc = transition(ex, point, tx, DTX_ST_PREPARING, c, upd, &taken);
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
  for (int guard = 0; guard < 10000 && !dtx__terminal(tx); guard++) {
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
      if (dtx__int(tx, "lease_until") <= dtx__now_ms()) {
        json_t *cond = json_pack("{s:O}", "epoch", json_object_get(tx, "epoch"));
        rc = dtx__tx_takeover(ex, tx, DTX_REASON_ABANDONED, cond,
                              "recover.takeover", &next);
        json_decref(cond);
      } else {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
        rc = DTX_ENOMATCH;
      }
    } else {
      json_decref(tx);
      return dtx__err(DTX_ESTATE, "transfer %s has unknown state '%s'", id,
                      dtx__str(tx, "state") ? dtx__str(tx, "state") : "?");
    }
    if (rc && rc != DTX_ENOMATCH)
      break;
    rc = 0;
    if (!next && (rc = get_doc(ex, DTX_TRANSFERS, id, &next)))
      break;
    json_decref(tx);
    tx = next;
  }
  if (rc) {
    json_t *cur = NULL;
    if (get_doc(ex, DTX_TRANSFERS, id, &cur) == 0) {
      json_decref(tx);
      tx = cur;
    }
    *out = tx;
    return rc;
  }
  *out = tx;
  return 0;
}

int dtx__tx_claim_next(dtx__exec_t *ex, json_t **out) {
  int64_t now = dtx__now_ms();
  json_t *filter = json_pack("{s:s}", "state", DTX_ST_INITIATED);
  json_t *upd = json_pack("{s:{s:s,s:s,s:I,s:I},s:{s:i}}", "$set", "state",
                          DTX_ST_PREPARING, "owner", ex->owner, "lease_until",
                          (json_int_t)(now + ex->lease_ms), "updated",
                          (json_int_t)now, "$inc", "epoch", 1);
  dtx_fam_opts_t o = {.return_new = 1};
  json_t *claimed = NULL, *next = NULL;
  int rc = DTX_FAULTPOINT("transfer.claim");
  if (rc == 0)
    rc = dtx_store_find_one_and_update(ex->st, DTX_TRANSFERS, filter, upd, &o,
                                       &claimed);
  json_decref(filter);
  json_decref(upd);
  *out = NULL;
  if (rc)
    return rc; /* DTX_ENOMATCH: nothing to claim */
  rc = prepare(ex, claimed, &next);
  if (rc == 0 && !next) /* fenced off: see where it stands now */
    rc = get_doc(ex, DTX_TRANSFERS, dtx__str(claimed, "_id"), &next);
  if (rc == 0) {
    rc = dtx__tx_drive(ex, next, 1, out);
  } else {
    *out = json_incref(claimed);
  }
  json_decref(next);
  json_decref(claimed);
  return rc;
}

int dtx_transfer_run(dtx_store_t *st, const char *id,
                     const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  json_t *tx = NULL;
  int rc;
  *out = NULL;
  dtx__err_clear();
  if (!id)
    return dtx__err(DTX_EINVAL, "no transfer id");
  dtx__exec_init(&ex, st, opts ? opts->owner : NULL, opts ? opts->lease_ms : 0);
  if ((rc = get_doc(&ex, DTX_TRANSFERS, id, &tx)))
    return rc == DTX_ENOTFOUND ? dtx__err(rc, "no transfer '%s'", id) : rc;
  rc = dtx__tx_drive(&ex, tx, 1, out);
  json_decref(tx);
  return rc;
}

int dtx_transfer_execute(dtx_store_t *st, const dtx_transfer_req_t *req,
                         const dtx_exec_opts_t *opts, json_t **out) {
  json_t *tx = NULL;
  int rc = dtx_transfer_submit(st, req, &tx);
  if (rc) {
    *out = NULL;
    return rc;
  }
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, opts ? opts->owner : NULL, opts ? opts->lease_ms : 0);
  rc = dtx__tx_drive(&ex, tx, 1, out);
  json_decref(tx);
  return rc;
}

int dtx_transfer_get(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  *out = NULL;
  dtx__err_clear();
  if (!id)
    return dtx__err(DTX_EINVAL, "no transfer id");
  dtx__exec_init(&ex, st, NULL, 0);
  int rc = get_doc(&ex, DTX_TRANSFERS, id, out);
  return rc == DTX_ENOTFOUND ? dtx__err(rc, "no transfer '%s'", id) : rc;
}

static int valid_state(const char *s) {
  const char *all[] = {DTX_ST_INITIATED, DTX_ST_PREPARING, DTX_ST_COMMITTED,
                       DTX_ST_SUCCEEDED, DTX_ST_ROLLING_BACK, DTX_ST_FAILED};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(s, all[i]) == 0)
      return 1;
  return 0;
}

int dtx_transfer_list(dtx_store_t *st, const char *state, json_t **out) {
  *out = NULL;
  dtx__err_clear();
  if (state && !valid_state(state))
    return dtx__err(DTX_EINVAL,
                    "unknown state '%s' (initiated, preparing, committed, "
                    "succeeded, rolling_back, failed)",
                    state);
  json_t *filter = state ? json_pack("{s:s}", "state", state) : json_object();
  json_t *sort = json_pack("{s:i,s:i}", "created", 1, "_id", 1);
  dtx_find_opts_t o = {.sort = sort};
  int rc = dtx_store_find(st, DTX_TRANSFERS, filter, &o, out);
  json_decref(filter);
  json_decref(sort);
  return rc;
}

int dtx_transfer_cancel(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  json_t *tx = NULL, *next = NULL;
  int rc;
  *out = NULL;
  dtx__err_clear();
  if (!id)
    return dtx__err(DTX_EINVAL, "no transfer id");
  dtx__exec_init(&ex, st, NULL, 0);
  if ((rc = get_doc(&ex, DTX_TRANSFERS, id, &tx)))
    return rc == DTX_ENOTFOUND ? dtx__err(rc, "no transfer '%s'", id) : rc;
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
      rc = dtx__tx_drive(&ex, tx, 1, out); /* already failing: finish it */
      json_decref(tx);
      return rc;
    }
    if (dtx__state_is(tx, DTX_ST_INITIATED)) {
      rc = transition(&ex, "cancel.begin", tx, DTX_ST_INITIATED, NULL,
                      json_pack("{s:{s:s,s:s,s:I}}", "$set", "state",
                                DTX_ST_FAILED, "reason", DTX_REASON_CANCELED,
                                "updated", (json_int_t)dtx__now_ms()),
                      &next);
    } else {
      rc = dtx__tx_takeover(&ex, tx, DTX_REASON_CANCELED, NULL, "cancel.begin",
                            &next);
    }
    if (rc == 0 && next) {
      json_decref(tx);
      *out = next;
      return 0;
    }
    json_decref(next);
    if (rc && rc != DTX_ENOMATCH) {
      json_decref(tx);
      return rc;
    }
    json_decref(tx); /* it moved on: look again */
    if ((rc = get_doc(&ex, DTX_TRANSFERS, id, &tx)))
      return rc;
  }
  json_decref(tx);
  return dtx__err(DTX_ECONFLICT, "transfer %s kept changing during cancel", id);
}
