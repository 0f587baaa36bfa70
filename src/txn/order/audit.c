/* audit.c -- the order pattern's audit: each order credited exactly as its
 * state says (order.c, O1-O3).  The money itself -- conservation, markers,
 * balances -- is the transfer audit's: an order's credit is a transfer.
 *
 * The store gives no snapshot across documents, so the audit reads the
 * orders (O1), then the transfers (T), then the orders again (O3).  An
 * order whose document did not change between O1 and O3 is "stable": its
 * transfers were all submitted before O3 by executors that read it in a
 * state allowing them, and a succeeded transfer stays succeeded, so T
 * judges it exactly.  Orders that moved are counted as unsettled.
 *
 *   order state           its transfers (ids order:ID, order:ID:n) must be
 *   pending, canceled     none at all                   (O2)
 *   confirming            at most one succeeded/committed (O1)
 *   confirmed, success    exactly one succeeded, the current attempt's,
 *                         none committed besides         (O1, O3)
 *   any                   every attempt before the order's failed (O1)
 * and every one of them from the order's settlement to its account with
 * its amount, of an attempt no later than the order's.  A transfer named
 * for an order that does not exist is reported unless it failed.
 *
 * What create checked and confirm checks again (O6) is judged too, as the
 * store holds it now: an order's account is not its settlement and its
 * transfer is its attempt's (bad_order); every settlement account that an
 * order not canceled names exists without a lower limit (bad_settlement,
 * one finding per account).  A write through the generic commands cannot
 * change what create checked (the transition rule); these find what was
 * written past the rules, or an order inserted by hand. */
#include <string.h>

#include "doc/doc.h"
#include "txn/order/order.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

#define finding(f, ...) dtx__audit_finding((f), __VA_ARGS__)

/* Groups the transfers of t (id -> transfer) by order: trade id -> array. */
static json_t *by_order(const json_t *t) {
  json_t *g = json_object(), *tx;
  const char *id;
  char trade[160];
  int64_t attempt;
  json_object_foreach((json_t *)t, id, tx) {
    if (!dtx__order_tx_parse(id, trade, &attempt))
      continue;
    json_t *arr = json_object_get(g, trade);
    if (!arr)
      json_object_set_new(g, trade, arr = json_array());
    json_array_append(arr, tx);
  }
  return g;
}

static void check_order(dtx__audit_t *f, const char *id, const json_t *o,
                        const json_t *txs) {
  const char *st = dtx__str(o, "state") ? dtx__str(o, "state") : "?";
  int64_t attempt = dtx__int(o, "attempt");
  int credited = 0, current_ok = 0, any = 0;
  size_t i;
  json_t *tx;
  char trade[160], want[160];
  const char *acct = dtx__str(o, "account"), *settle = dtx__str(o, "settlement");
  if (acct && settle && strcmp(acct, settle) == 0)
    finding(f, "bad_order", "order %s: its account '%s' is its settlement "
            "account (create refuses that)", id, acct);
  dtx__order_tx_id(id, attempt >= 1 ? attempt : 1, want, sizeof want);
  if (attempt < 1 || !dtx__str_is(o, "transfer", want))
    finding(f, "bad_order", "order %s: its transfer '%s' is not its attempt "
            "%lld's (%s)", id,
            dtx__str(o, "transfer") ? dtx__str(o, "transfer") : "?",
            (long long)attempt, want);
  json_array_foreach(txs, i, tx) {
    const char *tid = dtx__str(tx, "_id");
    int64_t n = 0;
    any++;
    dtx__order_tx_parse(tid, trade, &n);
    if (!dtx__str_is(tx, "from", dtx__str(o, "settlement")) ||
        !dtx__str_is(tx, "to", dtx__str(o, "account")) ||
        dtx__int(tx, "amount") != dtx__int(o, "amount") ||
        !json_is_integer(json_object_get(o, "amount")))
      finding(f, "credit_mismatch", "order %s: transfer %s does not move "
              "its amount %lld from %s to %s", id, tid,
              (long long)dtx__int(o, "amount"),
              dtx__str(o, "settlement") ? dtx__str(o, "settlement") : "?",
              dtx__str(o, "account") ? dtx__str(o, "account") : "?");
    if (n > attempt)
      finding(f, "stray_attempt", "order %s is at attempt %lld but transfer "
              "%s exists", id, (long long)attempt, tid);
    else if (n < attempt && !dtx__state_is(tx, DTX_ST_FAILED))
      /* O1: attempt n+1 is recorded only once n is failed, for good */
      finding(f, "attempt_skipped", "order %s is at attempt %lld but "
              "attempt %lld's transfer %s is %s, not failed", id,
              (long long)attempt, (long long)n, tid,
              dtx__str(tx, "state") ? dtx__str(tx, "state") : "?");
    if (dtx__state_is(tx, DTX_ST_SUCCEEDED) ||
        dtx__state_is(tx, DTX_ST_COMMITTED)) {
      credited++;
      if (dtx__state_is(tx, DTX_ST_SUCCEEDED) &&
          dtx__str_is(o, "transfer", tid))
        current_ok = 1;
    }
  }
  DTX_ASSERT(credited <= any && current_ok <= credited, "O1");
  if (credited > 1)
    finding(f, "credited_twice", "order %s (%s) has %d transfers that "
            "credited or are crediting its account", id, st, credited);
  if ((dtx__state_is(o, DTX_OS_PENDING) || dtx__state_is(o, DTX_OS_CANCELED)) &&
      any)
    finding(f, credited ? "credited_uncredited" : "stray_transfer",
            "order %s is %s but has %d transfer(s)%s", id, st, any,
            credited ? ", crediting its account" : "");
  if ((dtx__state_is(o, DTX_OS_CONFIRMED) || dtx__state_is(o, DTX_OS_SUCCESS)) &&
      !current_ok)
    finding(f, "not_credited", "order %s is %s but its transfer %s did not "
            "succeed", id, st,
            dtx__str(o, "transfer") ? dtx__str(o, "transfer") : "?");
}

/* bad_settlement: each settlement account that orders not canceled (of
 * orders, id -> order) name must exist with no lower limit -- what create
 * checked, and what confirm checks again before any money moves (O6).
 * One finding per account, naming how many orders and the first. */
static int check_settlements(dtx__audit_t *f, const json_t *orders) {
  json_t *users = json_object(), *ids = json_array(), *list = NULL, *o, *a;
  const char *id;
  size_t i;
  dtx__exec_t ex;
  int rc = users && ids ? 0 : DTX_ENOMEM;
  json_object_foreach((json_t *)orders, id, o) {
    const char *s = dtx__str(o, "settlement");
    if (rc || !s || dtx__state_is(o, DTX_OS_CANCELED))
      continue;
    json_t *u = json_object_get(users, s);
    if (!u) {
      json_object_set_new(users, s, u = json_pack("{s:s,s:i}", "first", id,
                                                  "n", 0));
      if (!u || json_array_append_new(ids, json_string(s)))
        rc = DTX_ENOMEM;
    }
    if (u)
      json_object_set_new(u, "n", json_integer(dtx__int(u, "n") + 1));
  }
  dtx__exec_init(&ex, f->st, NULL, 0, 0);
  if (rc == 0 && json_array_size(ids)) {
    json_t *flt = json_pack("{s:{s:O}}", "_id", "$in", ids);
    rc = flt ? dtx__kit_find(&ex, DTX_ACCOUNTS, flt, NULL, &list)
             : DTX_ENOMEM;
    json_decref(flt);
  }
  json_t *byid = json_object();
  json_array_foreach(list, i, a) {
    if (byid && dtx__str(a, "_id"))
      json_object_set(byid, dtx__str(a, "_id"), a);
  }
  json_object_foreach(rc == 0 && byid ? users : NULL, id, o) {
    a = json_object_get(byid, id);
    json_t *mb = json_object_get(a, "min_balance");
    if (a && json_is_null(mb))
      continue;
    char limit[40] = "";
    if (json_is_integer(mb))
      snprintf(limit, sizeof limit, " (min_balance %lld)",
               (long long)json_integer_value(mb));
    finding(f, "bad_settlement", "settlement account '%s' %s%s, yet %lld "
            "order(s) not canceled name it as their payer (first: %s): an "
            "order's settlement must be an account with no lower limit",
            id, a ? "has a lower limit" : "does not exist", limit,
            (long long)dtx__int(o, "n"), dtx__str(o, "first"));
  }
  json_decref(byid);
  json_decref(users);
  json_decref(ids);
  json_decref(list);
  return rc;
}

int dtx__order_audit(dtx__audit_t *f) {
  json_t *o1 = NULL, *t = NULL, *o3 = NULL, *groups = NULL, *states, *o;
  int settled = (f->flags & DTX_AUDIT_SETTLED) != 0, rc;
  int64_t unsettled = 0;
  const char *id;
  if ((rc = dtx__audit_load(f, DTX__ORDERS, &o1)) ||
      (rc = dtx__audit_load(f, DTX_TRANSFERS, &t)) ||
      (rc = dtx__audit_load(f, DTX__ORDERS, &o3))) {
    json_decref(o1);
    json_decref(t);
    return rc;
  }
  groups = by_order(t);
  states = json_object();
  json_object_foreach(o3, id, o) {
    const char *s = dtx__str(o, "state") ? dtx__str(o, "state") : "?";
    json_t *n = json_object_get(states, s);
    json_object_set_new(states, s,
                        json_integer(n ? json_integer_value(n) + 1 : 1));
    if (settled && (dtx__state_is(o, DTX_OS_CONFIRMING) ||
                    dtx__state_is(o, DTX_OS_CONFIRMED)))
      finding(f, "not_terminal", "order %s is still %s", id, s);
    if (!json_equal(json_object_get(o1, id), o)) {
      unsettled++;
      continue;
    }
    json_t *txs = json_object_get(groups, id);
    json_t *none = json_array();
    check_order(f, id, o, txs ? txs : none);
    json_decref(none);
  }
  json_t *txs;
  json_object_foreach(groups, id, txs) {
    size_t i;
    json_t *tx;
    if (json_object_get(o1, id) || json_object_get(o3, id))
      continue;
    json_array_foreach(txs, i, tx) {
      if (!dtx__state_is(tx, DTX_ST_FAILED))
        finding(f, "orphan_transfer", "transfer %s (%s) is named for order "
                "%s, which does not exist", dtx__str(tx, "_id"),
                dtx__str(tx, "state") ? dtx__str(tx, "state") : "?", id);
    }
  }
  if (rc == 0)
    rc = check_settlements(f, o3);
  size_t n = json_object_size(o3);
  dtx__audit_set(f, "orders", json_integer((json_int_t)n));
  dtx__audit_set(f, "states", states);
  dtx__audit_unsettled(f, unsettled);
  dtx__audit_summary(f, "%zu orders, unsettled %lld", n, (long long)unsettled);
  json_decref(groups);
  json_decref(o1);
  json_decref(t);
  json_decref(o3);
  return rc;
}
