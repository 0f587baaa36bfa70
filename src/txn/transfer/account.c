/* account.c -- creating and reading the accounts that transfers move money
 * between, and setting their limits.  An account's opening_balance is
 * fixed at creation: money only enters or leaves through it and through
 * transfers, which is what lets the audit prove conservation.  Nothing
 * else writes an account: the generic document commands may change none
 * of its protocol fields (the transition rules in transfer.c).
 *
 * The registry.  Conservation over the accounts that exist cannot see an
 * account that is gone: delete one (bypassing its delete guard) and its
 * balance leaves with its opening balance, the sums still agree.  So every
 * account also gets an immutable opening record in "openings", which
 * outlives it, and the audit requires each recorded account that is gone
 * to have been left holding nothing (its opening plus its transfers).
 * Creation is two writes, made safe by their order:
 *
 *   insert account {..., unregistered: true}     (DTX_EDUPKEY: it exists)
 *     -- transfer.register -->   insert opening  (a duplicate with the same
 *                                                 opening balance is ours)
 *     -- transfer.registered --> $unset unregistered
 *
 * A creator that stops after the first write leaves an unregistered
 * account; recovery (recover.c) and the audit find it by that flag, and
 * recovery registers it from the account's own opening_balance: the same
 * two idempotent writes, dtx__tx_register.  The invariants the audit
 * checks (audit.c):
 *   R1. an account without the flag has an opening record with its
 *       opening_balance;
 *   R2. an opening record whose account is gone: opening balance plus
 *       the account's transfers is 0 (it was closed empty, as its delete
 *       guard demands);
 *   R3. after recovery no account is unregistered. */
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

static int check(const char *id, const dtx_account_opts_t *o) {
  int rc;
  if ((rc = dtx__check_ident("account id", id)))
    return rc;
  if (o && !o->no_min_balance && o->balance < o->min_balance)
    return dtx__err(DTX_EINVAL, "balance %lld is below min_balance %lld",
                    (long long)o->balance, (long long)o->min_balance);
  return 0;
}

int dtx_account_check(const char *id, const dtx_account_opts_t *opts) {
  dtx__err_clear();
  return check(id, opts);
}

static int create(dtx_store_t *st, const char *id, const dtx_account_opts_t *o,
                  json_t **out) {
  dtx_account_opts_t none = {0};
  int rc;
  if (!o)
    o = &none; /* the zero value: balance 0, min_balance 0 */
  /* Before the set-up: bad input creates nothing (docs/kit.md). */
  if ((rc = check(id, o)) || (rc = dtx__kit_ensure(st, &dtx__transfer_pattern)))
    return rc;
  dtx__exec_t ex;
  json_t *old = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  /* An id with an opening record but no account was closed: not reused,
   * or the new account would inherit the old one's transfers. */
  rc = dtx__kit_get(&ex, DTX_OPENINGS, id, &old);
  json_decref(old);
  if (rc == 0 && dtx__kit_get(&ex, DTX_ACCOUNTS, id, &old) == DTX_ENOTFOUND)
    return dtx__err(DTX_EDUPKEY, "account '%s' existed and was closed; "
                    "account ids are not reused", id);
  json_decref(old);
  if (rc && rc != DTX_ENOTFOUND)
    return rc;
  /* I1: a new account meets its limit. */
  DTX_ASSERT(o->no_min_balance || o->balance >= o->min_balance, "I1");
  /* ceiling: balance + pending markers (none yet), transfer.c I7. */
  json_t *doc = json_pack("{s:s,s:I,s:o,s:I,s:I,s:[],s:[],s:b}", "_id", id,
                          "balance", (json_int_t)o->balance, "min_balance",
                          o->no_min_balance ? json_null()
                                            : json_integer(o->min_balance),
                          "opening_balance", (json_int_t)o->balance, "ceiling",
                          (json_int_t)o->balance, "pending", "voids",
                          "unregistered", 1);
  if (!doc)
    return DTX_ENOMEM;
  /* the first step of create (no fault point of its own: a retry of a
   * lost reply would find the account and call it taken) */
  dtx__kit_op_t ins = {.kind = DTX_BULK_INSERT, .coll = DTX_ACCOUNTS,
                       .doc = json_incref(doc), .flags = DTX__OP_ONCE,
                       .step = "transfer.account.create"};
  rc = dtx__kit_step(&ex, &ins, NULL);
  if (rc == DTX_EDUPKEY)
    rc = dtx__err(DTX_EDUPKEY, "account '%s' exists", id);
  if (rc == 0)
    rc = dtx__tx_register(&ex, doc);
  json_object_del(doc, "unregistered");
  if (rc == 0 && out)
    *out = json_incref(doc);
  json_decref(doc);
  return rc;
}

/* The settlement account that pays orders and interest: created on first
 * use with no lower limit (through dtx_account_create, so it is registered
 * like any other).  point (may be NULL) is the caller's fault point before
 * the creation.  A concurrent first use is fine (DUPKEY, then read); an id
 * that was closed cannot come back (ids are not reused), and one that has
 * a lower limit cannot pay: both DTX_EINVAL naming it and who asked. */
int dtx__tx_settlement(dtx__exec_t *ex, const char *id, const char *point,
                       const char *who) {
  json_t *a = NULL;
  int rc = dtx__kit_get(ex, DTX_ACCOUNTS, id, &a);
  if (rc == DTX_ENOTFOUND) {
    rc = point ? dtx__kit_point(point, "creating the settlement account")
               : 0;
    dtx_account_opts_t ao = {.no_min_balance = 1};
    if (rc == 0)
      rc = dtx_account_create(ex->st, id, &ao, &a);
    if (rc == DTX_EDUPKEY) { /* a concurrent first use, or a closed id */
      json_decref(a);
      a = NULL;
      rc = dtx__kit_get(ex, DTX_ACCOUNTS, id, &a);
      if (rc == DTX_ENOTFOUND)
        rc = dtx__err(DTX_EINVAL, "settlement account '%s' was closed "
                      "(account ids are not reused)", id);
    }
  }
  if (rc == 0 && !json_is_null(json_object_get(a, "min_balance")))
    rc = dtx__err(DTX_EINVAL, "settlement account '%s' has a lower limit "
                  "(min_balance %lld); %s need one with none", id,
                  (long long)dtx__int(a, "min_balance"), who);
  json_decref(a);
  return rc;
}

int dtx__tx_register(dtx__exec_t *ex, const json_t *account) {
  const char *id = dtx__str(account, "_id");
  json_t *ob = json_object_get(account, "opening_balance"), *have = NULL;
  if (!id || !json_is_integer(ob))
    return dtx__err(DTX_ETYPE, "account '%s' has no integer opening_balance",
                    id ? id : "?");
  json_t *rec = json_pack("{s:s,s:O,s:I}", "_id", id, "opening_balance", ob,
                          "at", (json_int_t)dtx__now_ms());
  if (!rec)
    return DTX_ENOMEM;
  /* R1: the record carries the account's own opening balance. */
  DTX_ASSERT(json_equal(json_object_get(rec, "opening_balance"), ob), "R1");
  int rc = dtx__kit_insert(ex, "transfer.register", DTX_OPENINGS, rec);
  json_decref(rec);
  if (rc == DTX_EDUPKEY) { /* ours (a retry, or recovery got there first)? */
    if ((rc = dtx__kit_get(ex, DTX_OPENINGS, id, &have)) == 0 &&
        !json_equal(json_object_get(have, "opening_balance"), ob))
      rc = dtx__err(DTX_EDUPKEY, "account '%s': an opening record with "
                    "another opening balance exists", id);
    json_decref(have);
    if (rc)
      return rc;
  } else if (rc) {
    return rc;
  }
  return dtx__kit_update(ex, "transfer.registered", DTX_ACCOUNTS,
                         json_pack("{s:s,s:b}", "_id", id, "unregistered", 1),
                         json_pack("{s:{s:s}}", "$unset", "unregistered", ""),
                         NULL);
}

int dtx_account_create(dtx_store_t *st, const char *id,
                       const dtx_account_opts_t *opts, json_t **out) {
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, create(st, id, opts, out));
}

/* Sets account id's limit in one conditional step: a limit (an int64) is
 * set only where the balance meets it (I1 holds from the step on); none
 * (no_min_balance) always.  Money already held by a debit marker is out
 * of the balance, so the balance alone is what the limit must fit.  A
 * plain write of min_balance is refused (the transition rule in
 * transfer.c): this is the operator's way.  The read-back only names the
 * reason for a step that matched nothing; an account whose balance rose
 * meanwhile is tried again. */
static int set_limit(dtx__exec_t *ex, const char *id,
                     const dtx_account_opts_t *o, json_t **out) {
  for (int round = 0; round < 8; round++) {
    json_t *f = json_pack("{s:s}", "_id", id), *a = NULL;
    json_t *lim = o->no_min_balance ? json_null() : json_integer(o->min_balance);
    if (f && !o->no_min_balance)
      json_object_set_new(f, "balance", dtx__pack("{s:I}", "$gte",
                                                  (json_int_t)o->min_balance));
    int rc = dtx__kit_modify(ex, "transfer.account.limit", DTX_ACCOUNTS, f,
                             dtx__pack("{s:{s:o}}", "$set", "min_balance", lim),
                             NULL, out);
    /* I1 from the step on: set only where the balance meets it. */
    const json_t *b = rc ? NULL : json_object_get(*out, "balance");
    DTX_ASSERT(!json_is_integer(b) || o->no_min_balance ||
                   json_integer_value(b) >= o->min_balance,
               "I1");
    if (rc != DTX_ENOMATCH)
      return rc;
    if ((rc = dtx__kit_get(ex, DTX_ACCOUNTS, id, &a)) == DTX_ENOTFOUND)
      return dtx__err(DTX_ENOACCOUNT, "no account '%s'", id);
    if (rc)
      return rc;
    b = json_object_get(a, "balance");
    int below = !o->no_min_balance && (!json_is_integer(b) ||
                                       json_integer_value(b) < o->min_balance);
    if (below)
      rc = json_is_integer(b)
               ? dtx__err(DTX_EINSUFFICIENT, "account '%s': balance %lld is "
                          "below the new min_balance %lld (a limit is set "
                          "only where the balance meets it)", id,
                          (long long)json_integer_value(b),
                          (long long)o->min_balance)
               : dtx__err(DTX_ESTATE, "account '%s' has no integer balance",
                          id);
    json_decref(a);
    if (below)
      return rc;
  }
  return dtx__err(DTX_EBUSY, "the balance of account '%s' kept changing "
                  "while its limit was set", id);
}

int dtx_account_limit(dtx_store_t *st, const char *id,
                      const dtx_account_opts_t *opts, json_t **out) {
  dtx_account_opts_t none = {0};
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *acct = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx__check_ident("account id", id);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__transfer_pattern);
  if (rc == 0) {
    dtx__exec_init(&ex, st, NULL, 0, 0);
    rc = set_limit(&ex, id, opts ? opts : &none, &acct);
  }
  if (out)
    *out = acct;
  else
    json_decref(acct);
  return dtx__call_end(&c, rc);
}

int dtx_account_get(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc;
  *out = NULL;
  dtx__call_begin(&c, 0);
  if ((rc = dtx__check_ident("account id", id)))
    return dtx__call_end(&c, rc);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  rc = dtx__kit_get(&ex, DTX_ACCOUNTS, id, out);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOACCOUNT, "no account '%s'", id);
  return dtx__call_end(&c, rc);
}

int dtx_account_list(dtx_store_t *st, const dtx_page_t *page, json_t **out) {
  dtx__call_t c;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c,
                       dtx__kit_list(st, DTX_ACCOUNTS, NULL, NULL, page, out));
}
