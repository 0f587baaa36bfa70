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
 * and every one of them from the order's settlement to its account with
 * its amount, of an attempt no later than the order's.  A transfer named
 * for an order that does not exist is reported unless it failed. */
#include <string.h>

#include "doc/doc.h"
#include "txn/order/order.h"
#include "txn/transfer/transfer.h"
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
  char trade[160];
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
    if (dtx__state_is(tx, DTX_ST_SUCCEEDED) ||
        dtx__state_is(tx, DTX_ST_COMMITTED)) {
      credited++;
      if (dtx__state_is(tx, DTX_ST_SUCCEEDED) &&
          dtx__str_is(o, "transfer", tid))
        current_ok = 1;
    }
  }
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
  size_t n = json_object_size(o3);
  dtx__audit_set(f, "orders", json_integer((json_int_t)n));
  dtx__audit_set(f, "states", states);
  dtx__audit_unsettled(f, unsettled);
  dtx__audit_summary(f, "%zu orders, unsettled %lld", n, (long long)unsettled);
  json_decref(groups);
  json_decref(o1);
  json_decref(t);
  json_decref(o3);
  return 0;
}
