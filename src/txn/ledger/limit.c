/* limit.c -- a ledger account's limits: the floor (min_balance, checked on
 * debits in post.c) and the upper limit (max_balance, checked on credits
 * here), and the one step that changes them (ledger.c has the state
 * diagram and the invariants; docs/ledger.md, "The upper limit").
 *
 *   transition              function                    fault point
 *   (account limits)        dtx_ledger_account_limits,  ledger.account.limit
 *                           dtx_ledger_account_limit
 *
 * The upper limit is TigerBeetle's credits_must_not_exceed_debits in
 * doctx's terms, read the safe way: a credit must leave
 *   posted balance + pending credits + credit <= max_balance,
 * pending credits included (as the floor counts pending debits), so no
 * outcome of the pending entries can take the balance over the max.  It
 * is checked in the same derivation as the floor (post.c, derive_leg),
 * from the same position, and the entry's insert at seqId head + 1 is
 * what makes it serialisable per account (L2): a credit that derived from
 * seqIds 1..n saw every credit before it.  Resolving never raises the sum
 * (L3), so no later check is invalidated.
 *
 * Invariants (the audit checks them, audit.c):
 *  M1 For every credit leg k posted or pending, the posted legs up to k
 *     plus the pending credits up to k are <= the max it recorded.
 *  M2 An account's max_balance, when set, is >= its min_balance (when
 *     set): both are changed by one conditional step that demands it. */
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

int dtx__lg_limits_check(const dtx_ledger_limit_t *l, int which) {
  if (!(which & (DTX_LEDGER_LIMIT_MIN | DTX_LEDGER_LIMIT_MAX)) ||
      (which & ~(DTX_LEDGER_LIMIT_MIN | DTX_LEDGER_LIMIT_MAX)))
    return dtx__err(DTX_EINVAL, "which limits to change: %d (min 1, max 2, "
                    "both 3)", which);
  int64_t min = l ? l->min_balance : 0;
  if ((which & DTX_LEDGER_LIMIT_MIN) && (which & DTX_LEDGER_LIMIT_MAX) && l &&
      l->has_max_balance && !l->no_min_balance && l->max_balance < min)
    return dtx__err(DTX_EINVAL, "max_balance %lld is below min_balance %lld",
                    (long long)l->max_balance, (long long)min);
  return 0;
}

/* M1 for credit leg l (value > 0) against the account's position: the
 * balance plus pending credits plus l must stay <= max_balance.  leg (the
 * leg as stored) gets "max", the limit it was checked against. */
int dtx__lg_check_max(const dtx_ledger_leg_t *l, const dtx__lg_pos_t *pos,
                      json_t *leg) {
  json_t *max = json_object_get(pos->acct, "max_balance");
  if (l->value <= 0 || !json_is_integer(max))
    return 0;
  __int128 hi = pos->posted + pos->pend_credit + l->value;
  if (hi > json_integer_value(max))
    /* derive_leg checked the sums fit int64 (L4) before calling. */
    return dtx__err(DTX_EINSUFFICIENT,
                    "account '%s': a credit of %lld would take the balance "
                    "%lld plus pending credits %lld to %lld, above its "
                    "max_balance %lld",
                    l->account, (long long)l->value, (long long)pos->posted,
                    (long long)pos->pend_credit, (long long)hi,
                    (long long)json_integer_value(max));
  DTX_ASSERT(hi <= json_integer_value(max), "M1");
  return json_object_set(leg, "max", max) ? DTX_ENOMEM : 0;
}

int dtx__lg_account_limits(dtx__exec_t *ex, const char *id, int which,
                           const dtx_ledger_limit_t *l, json_t **out) {
  int rc;
  if ((rc = dtx__check_ident("account id", id)) ||
      (rc = dtx__lg_limits_check(l, which)) || (rc = dtx__lg_setup(ex->st)))
    return rc;
  int64_t min = l ? l->min_balance : 0, max = l ? l->max_balance : 0;
  int set_min = (which & DTX_LEDGER_LIMIT_MIN) != 0;
  int set_max = (which & DTX_LEDGER_LIMIT_MAX) != 0;
  int no_min = l && l->no_min_balance, has_max = l && l->has_max_balance;
  json_t *set = json_pack("{s:I}", "updated", (json_int_t)dtx__now_ms());
  json_t *filter = json_pack("{s:s}", "_id", id);
  if (!set || !filter) {
    json_decref(set);
    json_decref(filter);
    return DTX_ENOMEM;
  }
  if (set_min)
    json_object_set_new(set, "min_balance",
                        no_min ? json_null() : json_integer((json_int_t)min));
  if (set_max)
    json_object_set_new(set, "max_balance",
                        has_max ? json_integer((json_int_t)max) : json_null());
  /* M2 against the limit this call keeps, in the same step: a floor
   * raised past the max (or a max lowered under the floor) would leave an
   * account no leg fits. */
  if (set_min && !set_max && !no_min)
    json_object_set_new(filter, "$or",
                        json_pack("[{s:n},{s:{s:I}}]", "max_balance",
                                  "max_balance", "$gte", (json_int_t)min));
  else if (set_max && !set_min && has_max)
    json_object_set_new(filter, "$or",
                        json_pack("[{s:n},{s:{s:I}}]", "min_balance",
                                  "min_balance", "$lte", (json_int_t)max));
  rc = dtx__kit_modify(ex, "ledger.account.limit", DTX_LEDGER_ACCOUNTS, filter,
                       json_pack("{s:o}", "$set", set), NULL, out);
  if (rc != DTX_ENOMATCH)
    return rc;
  /* No such account, or one whose other limit M2 would break. */
  json_t *acct = NULL;
  if ((rc = dtx__lg_account(ex, id, &acct)))
    return rc;
  json_t *other = json_object_get(acct, set_min ? "max_balance" : "min_balance");
  rc = dtx__err(DTX_EINVAL, "account '%s': %s %lld would be %s its %s %lld",
                id, set_min ? "min_balance" : "max_balance",
                (long long)(set_min ? min : max), set_min ? "above" : "below",
                set_min ? "max_balance" : "min_balance",
                (long long)json_integer_value(other));
  json_decref(acct);
  return rc;
}

int dtx_ledger_account_limits(dtx_store_t *st, const char *id, int which,
                              const dtx_ledger_limit_t *limit, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *acct = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx__lg_account_limits(&ex, id, which, limit, &acct);
  if (out)
    *out = acct;
  else
    json_decref(acct);
  return dtx__call_end(&c, rc);
}
