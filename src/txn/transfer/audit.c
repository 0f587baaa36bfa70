/* audit.c -- the transfer pattern's audit: every invariant of accounts
 * and transfers, at any time.  The kit's frame (src/txn/frame/audit.c) runs it
 * through the method table and assembles the report.
 *
 * The store gives no snapshot across documents, so the audit reads the
 * transfers (T1), then every account in one query (A), then the transfers
 * again (T3).  Transfer states only move forward, and within one state the
 * markers on accounts say exactly how far the transfer got, so:
 *  - conservation and limits are checked on A, classifying a payee's credit
 *    marker by the transfer's later state T3 (transfer.c, I2);
 *  - per-account balances and state/marker agreement are checked only for
 *    transfers whose document did not change between T1 and T3 ("stable");
 *    the others are counted as unsettled and judged by a later audit.
 * At quiescence every transfer is stable and the audit is exact.  With
 * settled=1 (after recovery) a non-terminal transfer is itself a finding.
 *
 * A store can lose a consistent set of recent writes (Redis failing over to
 * a replica that had not received them) and then look clean.  The client's
 * own record of what it was told closes that gap: dtx_audit_acked checks
 * each acknowledged transfer against T3 -- present, same parties and
 * amount, and in its acknowledged state or one that state can reach. */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

typedef struct audit {
  dtx__audit_t *f;   /* the kit's frame: findings and report */
  json_t *t1, *t3;   /* id -> transfer */
  json_t *o1, *o3;   /* id -> opening record, read before and after A */
  json_t *accounts;  /* id -> account (snapshot A) */
  int64_t unsettled;
} audit_t;

#define finding(a, ...) dtx__audit_finding((a)->f, __VA_ARGS__)

static int stable(audit_t *a, const char *id) {
  json_t *x = json_object_get(a->t1, id), *y = json_object_get(a->t3, id);
  return x && y && json_equal(x, y);
}

static const json_t *tx3(audit_t *a, const char *id) {
  return json_object_get(a->t3, id);
}

/* Did transfer tx (stable) take its amount from account doc acct? */
static int debited(const json_t *tx, const json_t *payer) {
  if (dtx__state_is(tx, DTX_ST_COMMITTED) || dtx__state_is(tx, DTX_ST_SUCCEEDED))
    return 1;
  if (dtx__state_is(tx, DTX_ST_PREPARING) ||
      dtx__state_is(tx, DTX_ST_ROLLING_BACK))
    return payer && dtx__marker(payer, dtx__str(tx, "_id"), "debit") != NULL;
  return 0;
}

static int credited(const json_t *tx, const json_t *payee) {
  if (dtx__state_is(tx, DTX_ST_SUCCEEDED))
    return 1;
  if (dtx__state_is(tx, DTX_ST_COMMITTED))
    return payee && !dtx__marker(payee, dtx__str(tx, "_id"), "credit");
  return 0;
}

/* Conservation and limits over the account snapshot.  Every sum is exact
 * (__int128): a tampered balance near INT64_MAX must be reported, not
 * wrapped. */
/* The money a marker of a committed (in T3) transfer holds in flight.  The
 * payer clear and the payee credit run together (transfer.c, I2), so each
 * may land first, and the payee mark and the payer debit too: the money is
 * in flight exactly while the payer was debited and the payee not yet
 * credited.  A debit marker alone was credited already -- or the snapshot
 * caught the transfer before its mark; a credit marker alone was cleared
 * already -- or caught before its debit.  Which one, T1 says: a transfer
 * committed before the snapshot was marked and debited.  Otherwise the
 * marker is ambiguous (*amb, the transfer moved while the audit read, so
 * it is unsettled anyway) and the caller allows either. */
static int64_t committed_flight(audit_t *a, const json_t *tx, const char *txid,
                                int debit, int64_t amt, __int128 *amb) {
  const json_t *other = json_object_get(
      a->accounts, dtx__str(tx, debit ? "to" : "from"));
  int both = other && dtx__marker(other, txid, debit ? "credit" : "debit");
  if (debit && (!other || both))
    return amt; /* not credited (or the payee is gone): counted here */
  if (!debit && both)
    return 0; /* counted at the payer's debit marker */
  const json_t *t1 = json_object_get(a->t1, txid);
  if (t1 && (dtx__state_is(t1, DTX_ST_COMMITTED) ||
             dtx__state_is(t1, DTX_ST_SUCCEEDED)))
    return debit ? 0 : amt;
  *amb += amt;
  return 0;
}

static void check_money(audit_t *a) {
  __int128 opening = 0, balance = 0, flight = 0, amb = 0;
  char b1[48], b2[48], b3[48];
  const char *id;
  json_t *acct;
  json_object_foreach(a->accounts, id, acct) {
    json_t *b = json_object_get(acct, "balance");
    json_t *ob = json_object_get(acct, "opening_balance");
    json_t *min = json_object_get(acct, "min_balance");
    json_t *ceiling = json_object_get(acct, "ceiling");
    if (!json_is_integer(b) || !json_is_integer(ob)) {
      finding(a, "malformed_account", "account %s lacks integer balance or "
              "opening_balance", id);
      continue;
    }
    opening += json_integer_value(ob);
    balance += json_integer_value(b);
    if (json_is_integer(min) && json_integer_value(b) < json_integer_value(min))
      finding(a, "below_limit", "account %s balance %lld < min_balance %lld",
              id, (long long)json_integer_value(b),
              (long long)json_integer_value(min));
    if (!json_is_integer(min) && !json_is_null(min))
      finding(a, "bad_min_balance", "account %s min_balance is neither an "
              "int64 nor null (no limit): its debits are refused", id);
    /* I7: ceiling == balance + every marker's amount <= INT64_MAX. */
    __int128 reach = json_integer_value(b);
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(acct, "pending"), i, m) {
      const char *op = dtx__str(m, "op"), *txid = dtx__str(m, "tx");
      int64_t amt = dtx__int(m, "amount");
      const json_t *tx = txid ? tx3(a, txid) : NULL;
      reach += amt;
      int debit = op && strcmp(op, "debit") == 0;
      if (tx && (debit || (op && strcmp(op, "credit") == 0)) &&
          (dtx__state_is(tx, DTX_ST_COMMITTED) ||
           dtx__state_is(tx, DTX_ST_SUCCEEDED)))
        flight += committed_flight(a, tx, txid, debit, amt, &amb);
      else if (debit)
        flight += amt; /* a payee mark carries no money: only the debit */
    }
    if (reach > INT64_MAX)
      finding(a, "unfinishable", "account %s: balance %lld and its pending "
              "markers reach %s, past int64: not every credit can land", id,
              (long long)json_integer_value(b), dtx__wide_str(reach, b1));
    if (ceiling && (!json_is_integer(ceiling) ||
                    (__int128)json_integer_value(ceiling) != reach))
      finding(a, "ceiling_mismatch", "account %s ceiling is not its balance "
              "plus its pending markers (%s)", id, dtx__wide_str(reach, b1));
  }
  /* A recorded account that is gone took its balance with it, but not its
   * opening: closed empty, its money is in the others' balances. */
  json_object_foreach(a->o1, id, acct) {
    if (!json_object_get(a->accounts, id))
      opening += dtx__int(acct, "opening_balance");
  }
  /* Ambiguous markers (transfers that moved while the audit read; judged
   * exactly by a later audit) may each hold their amount or nothing. */
  /* I2: sum(balance) + in flight == sum(opening_balance), exactly. */
  __int128 gap = opening - balance - flight;
  if (gap != 0 && !(amb > 0 && gap > 0 && gap <= amb))
    finding(a, "conservation", "balances %s + in flight %s != opening total "
            "%s", dtx__wide_str(balance, b1), dtx__wide_str(flight, b2),
            dtx__wide_str(opening, b3));
  dtx__audit_set(a->f, "opening_total", dtx__wide_json(opening));
  dtx__audit_set(a->f, "balance_total", dtx__wide_json(balance));
  dtx__audit_set(a->f, "in_flight", dtx__wide_json(flight));
}

/* A committed transfer must be finishable (I7): its payee is there and
 * the credit fits.  Recovery would fail on it forever otherwise. */
static void check_finishable(audit_t *a) {
  const char *id;
  json_t *tx;
  json_object_foreach(a->t3, id, tx) {
    if (!dtx__state_is(tx, DTX_ST_COMMITTED) || !stable(a, id))
      continue;
    const char *to = dtx__str(tx, "to");
    const json_t *payee = to ? json_object_get(a->accounts, to) : NULL;
    const json_t *m = payee ? dtx__marker(payee, id, "credit") : NULL;
    if (!payee) {
      finding(a, "unfinishable", "committed transfer %s: its payee account "
              "%s is gone, the credit of %lld cannot land", id, to ? to : "?",
              (long long)dtx__int(tx, "amount"));
      continue;
    }
    json_t *b = json_object_get(payee, "balance");
    if (m && json_is_integer(b) &&
        (__int128)json_integer_value(b) + dtx__int(tx, "amount") > INT64_MAX)
      finding(a, "unfinishable", "committed transfer %s: crediting %lld to "
              "payee %s (balance %lld) would pass int64", id,
              (long long)dtx__int(tx, "amount"), to,
              (long long)json_integer_value(b));
  }
}

/* Markers and tombstones must belong to a transfer in a state that allows
 * them (transfer.c, I6). */
static void check_markers(audit_t *a) {
  const char *id;
  json_t *acct;
  json_object_foreach(a->accounts, id, acct) {
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(acct, "pending"), i, m) {
      const char *txid = dtx__str(m, "tx"), *op = dtx__str(m, "op");
      const json_t *t1 = txid ? json_object_get(a->t1, txid) : NULL;
      const json_t *t3 = txid ? tx3(a, txid) : NULL;
      if (!t3) {
        finding(a, "dangling_marker", "account %s has a %s marker for "
                "unknown transfer %s", id, op ? op : "?", txid ? txid : "?");
        continue;
      }
      if (t1 && dtx__tx_terminal(t1)) {
        finding(a, "dangling_marker", "account %s has a %s marker for %s "
                "transfer %s", id, op ? op : "?", dtx__str(t1, "state"), txid);
        continue;
      }
      const char *want = op && strcmp(op, "debit") == 0 ? "from" : "to";
      const char *party = dtx__str(t3, want);
      if (!party || strcmp(party, id) != 0 ||
          dtx__int(m, "amount") != dtx__int(t3, "amount"))
        finding(a, "marker_mismatch", "account %s %s marker for %s does not "
                "match the transfer's %s/amount", id, op ? op : "?", txid, want);
    }
    /* A tombstone exists only once its transfer is rolling back, and
     * states only move forward, so the later read T3 must show
     * rolling_back or failed -- or nothing: a failed transfer may be
     * deleted (its delete guard lets it go), and the tombstones it left
     * only go on fencing its id until recovery clears them after the TTL
     * (recover.c treats a missing transfer as failed too).  So a plain
     * delete of a failed transfer leaves nothing to report. */
    json_array_foreach(json_object_get(acct, "voids"), i, m) {
      const char *txid = dtx__str(m, "tx");
      const json_t *t3 = txid ? tx3(a, txid) : NULL;
      if (!txid)
        finding(a, "dangling_tombstone", "account %s has a tombstone "
                "without a transfer id", id);
      else if (!t3)
        continue;
      else if (!dtx__state_is(t3, DTX_ST_ROLLING_BACK) &&
               !dtx__state_is(t3, DTX_ST_FAILED))
        finding(a, "tombstone_state", "account %s has a tombstone for %s "
                "transfer %s", id, dtx__str(t3, "state"), txid);
    }
  }
}

/* Each account's balance against its opening balance and the transfers
 * that touched it, and each transfer's state against its markers. */
static void check_balances(audit_t *a, int settled) {
  /* expect: account id -> index into want[], the exact expected balance */
  json_t *expect = json_object(), *skip = json_object(), *gone = json_object();
  size_t n = json_object_size(a->accounts) + json_object_size(a->o1), k = 0;
  __int128 *want = calloc(n ? n : 1, sizeof *want);
  const char *id;
  json_t *tx, *acct;
  char b1[48];
  json_object_foreach(a->accounts, id, acct) {
    if (want)
      want[k] = json_integer_value(json_object_get(acct, "opening_balance"));
    json_object_set_new(expect, id, json_integer((json_int_t)k++));
  }
  /* R2: a recorded account that is gone (its record read before A, so it
   * was created before A) is judged by its opening and its transfers. */
  json_object_foreach(a->o1, id, acct) {
    if (json_object_get(a->accounts, id))
      continue;
    if (want)
      want[k] = json_integer_value(json_object_get(acct, "opening_balance"));
    json_object_set_new(gone, id, json_true());
    json_object_set_new(expect, id, json_integer((json_int_t)k++));
  }
  DTX_ASSERT(k <= n, "I2"); /* one expected balance per account */
  json_object_foreach(a->t3, id, tx) {
    const char *from = dtx__str(tx, "from"), *to = dtx__str(tx, "to");
    const json_t *payer = from ? json_object_get(a->accounts, from) : NULL;
    const json_t *payee = to ? json_object_get(a->accounts, to) : NULL;
    int64_t amt = dtx__int(tx, "amount");
    if (settled && !dtx__tx_terminal(tx))
      finding(a, "not_terminal", "transfer %s is still %s", id,
              dtx__str(tx, "state"));
    if (!stable(a, id)) {
      a->unsettled++;
      if (from)
        json_object_set_new(skip, from, json_true());
      if (to)
        json_object_set_new(skip, to, json_true());
      continue;
    }
    /* A gone account's markers went with it: while a transfer that may
     * have touched it is still moving, its flows are unknown. */
    if (!dtx__tx_terminal(tx) && !dtx__state_is(tx, DTX_ST_INITIATED)) {
      if (from && json_object_get(gone, from))
        json_object_set_new(skip, from, json_true());
      if (to && json_object_get(gone, to))
        json_object_set_new(skip, to, json_true());
    }
    int d = debited(tx, payer), c = credited(tx, payee);
    int dgone = from && json_object_get(gone, from);
    int cgone = to && json_object_get(gone, to);
    if (d && !payer && !dgone)
      finding(a, "missing_account", "transfer %s debited missing account %s",
              id, from ? from : "?");
    if (c && !payee && !cgone)
      finding(a, "missing_account", "transfer %s credited missing account %s",
              id, to ? to : "?");
    if (d && (payer || dgone) && want)
      want[json_integer_value(json_object_get(expect, from))] -= amt;
    if (c && (payee || cgone) && want)
      want[json_integer_value(json_object_get(expect, to))] += amt;
    int pd = payer && dtx__marker(payer, id, "debit");
    int pc = payee && dtx__marker(payee, id, "credit");
    int ok = 1;
    if (dtx__state_is(tx, DTX_ST_INITIATED) || dtx__tx_terminal(tx))
      ok = !pd && !pc;
    /* preparing, committed and rolling_back: any of the four, since the
     * debit and the mark, and the clear and the credit, go together and
     * either may land first (transfer.c, I2). */
    if (!ok)
      finding(a, "state_marker_mismatch", "transfer %s is %s but payer %s "
              "debit marker and payee %s credit marker", id,
              dtx__str(tx, "state"), pd ? "has a" : "has no",
              pc ? "has a" : "has no");
  }
  json_object_foreach(a->accounts, id, acct) {
    if (json_object_get(skip, id))
      continue;
    __int128 w = want ? want[json_integer_value(json_object_get(expect, id))]
                      : 0;
    int64_t got = dtx__int(acct, "balance");
    if (!want || w != got)
      finding(a, "balance_mismatch", "account %s balance %lld, but opening "
              "balance and transfers give %s", id, (long long)got,
              want ? dtx__wide_str(w, b1) : "? (out of memory)");
  }
  json_object_foreach(gone, id, acct) {
    if (json_object_get(skip, id))
      continue;
    __int128 w = want ? want[json_integer_value(json_object_get(expect, id))]
                      : 1;
    if (w != 0)
      finding(a, "missing_account", "account %s is gone, but its opening "
              "balance and transfers leave it holding %s", id,
              want ? dtx__wide_str(w, b1) : "? (out of memory)");
  }
  free(want);
  json_decref(expect);
  json_decref(skip);
  json_decref(gone);
}

/* R1 and R3 (account.c, "The registry"): every account has its opening
 * recorded, with its own opening balance, unless its creator (or recovery)
 * is still between the two writes. */
static void check_registry(audit_t *a, int settled) {
  const char *id;
  json_t *acct;
  size_t pending = 0;
  json_object_foreach(a->accounts, id, acct) {
    const json_t *rec = json_object_get(a->o3, id);
    if (json_is_true(json_object_get(acct, "unregistered"))) {
      pending++;
      if (settled)
        finding(a, "unregistered", "account %s: its opening is not recorded "
                "(its creator stopped; recovery records it)", id);
      continue;
    }
    if (!rec)
      finding(a, "unregistered", "account %s has no opening record: it was "
              "not made by account create, or its record was deleted", id);
    else if (!json_equal(json_object_get(rec, "opening_balance"),
                         json_object_get(acct, "opening_balance")))
      finding(a, "opening_mismatch", "account %s opening_balance differs "
              "from its opening record", id);
  }
  a->unsettled += (int64_t)pending;
}

/* Can a transfer acknowledged in state s later be found in state t?
 * States only move forward along the diagram in transfer.c. */
static int reachable(const char *s, const char *t) {
  /* each row: a state, then the states it can move to */
  static const char *const next[][5] = {
      {DTX_ST_PREPARING, DTX_ST_COMMITTED, DTX_ST_SUCCEEDED,
       DTX_ST_ROLLING_BACK, DTX_ST_FAILED},
      {DTX_ST_COMMITTED, DTX_ST_SUCCEEDED, NULL, NULL, NULL},
      {DTX_ST_ROLLING_BACK, DTX_ST_FAILED, NULL, NULL, NULL},
  };
  if (strcmp(s, t) == 0 || strcmp(s, DTX_ST_INITIATED) == 0)
    return 1; /* initiated reaches every state, failed by a cancel */
  for (size_t i = 0; i < sizeof next / sizeof next[0]; i++)
    if (strcmp(next[i][0], s) == 0)
      for (size_t j = 1; j < 5 && next[i][j]; j++)
        if (strcmp(next[i][j], t) == 0)
          return 1;
  return 0;
}

/* Each transfer the client was told about must still be in the store as
 * it was told, or further along. */
static size_t check_acked(audit_t *a, const json_t *acked) {
  size_t i, lost = 0;
  json_t *ack;
  json_array_foreach(acked, i, ack) {
    const char *id = dtx__str(ack, "_id"), *s = dtx__str(ack, "state");
    const json_t *tx = id ? tx3(a, id) : NULL;
    if (!id || !s) {
      finding(a, "acked_malformed", "acknowledged record %zu lacks _id or "
              "state", i);
      continue;
    }
    if (!tx) {
      lost++;
      finding(a, "acked_lost", "acknowledged transfer %s (%s) is not in the "
              "store", id, s);
      continue;
    }
    const char *t = dtx__str(tx, "state");
    if (!json_equal(json_object_get(ack, "from"), json_object_get(tx, "from")) ||
        !json_equal(json_object_get(ack, "to"), json_object_get(tx, "to")) ||
        !json_equal(json_object_get(ack, "amount"),
                    json_object_get(tx, "amount"))) {
      lost++;
      finding(a, "acked_mismatch", "acknowledged transfer %s differs from "
              "the store's in from, to or amount", id);
    } else if (!t || !reachable(s, t)) {
      lost++;
      finding(a, "acked_regressed", "transfer %s was acknowledged %s but the "
              "store has it %s", id, s, t ? t : "without a state");
    }
  }
  DTX_ASSERT(lost <= json_array_size(acked), "transfer.audit.acked");
  dtx__audit_set(a->f, "acked",
                 json_integer((json_int_t)json_array_size(acked)));
  dtx__audit_set(a->f, "acked_lost", json_integer((json_int_t)lost));
  return lost;
}

int dtx__tx_audit(dtx__audit_t *f) {
  audit_t a = {.f = f};
  int settled = (f->flags & DTX_AUDIT_SETTLED) != 0, rc;
  if ((rc = dtx__audit_load(f, DTX_TRANSFERS, &a.t1)) ||
      (rc = dtx__audit_load(f, DTX_OPENINGS, &a.o1)) ||
      (rc = dtx__audit_load(f, DTX_ACCOUNTS, &a.accounts)) ||
      (rc = dtx__audit_load(f, DTX_OPENINGS, &a.o3)) ||
      (rc = dtx__audit_load(f, DTX_TRANSFERS, &a.t3))) {
    json_decref(a.t1);
    json_decref(a.o1);
    json_decref(a.accounts);
    json_decref(a.o3);
    return rc;
  }
  check_money(&a);
  check_markers(&a);
  check_finishable(&a);
  check_registry(&a, settled);
  check_balances(&a, settled);
  size_t lost = f->acked ? check_acked(&a, f->acked) : 0;
  json_t *states = json_object();
  const char *id;
  json_t *tx;
  json_object_foreach(a.t3, id, tx) {
    const char *s = dtx__str(tx, "state");
    json_t *n = json_object_get(states, s ? s : "?");
    json_object_set_new(states, s ? s : "?",
                        json_integer(n ? json_integer_value(n) + 1 : 1));
  }
  size_t naccts = json_object_size(a.accounts), ntx = json_object_size(a.t3);
  dtx__audit_set(f, "accounts", json_integer((json_int_t)naccts));
  dtx__audit_set(f, "transfers", json_integer((json_int_t)ntx));
  dtx__audit_set(f, "states", states);
  dtx__audit_unsettled(f, a.unsettled);
  const json_t *part = dtx__audit_part(f);
  char line[400], tot[3][48];
  const char *keys[3] = {"opening_total", "balance_total", "in_flight"};
  for (int i = 0; i < 3; i++) { /* exact: an int64 or a wider decimal */
    json_t *v = json_object_get(part, keys[i]);
    if (json_is_string(v))
      snprintf(tot[i], sizeof tot[i], "%s", json_string_value(v));
    else
      snprintf(tot[i], sizeof tot[i], "%lld",
               (long long)json_integer_value(v));
  }
  int n = snprintf(line, sizeof line,
                   "%zu accounts, %zu transfers, opening total %s, balances "
                   "%s, in flight %s, unsettled %lld",
                   naccts, ntx, tot[0], tot[1], tot[2], (long long)a.unsettled);
  if (f->acked && n > 0 && (size_t)n < sizeof line)
    snprintf(line + n, sizeof line - (size_t)n,
             "; %zu acknowledged transfers checked, %zu lost",
             json_array_size(f->acked), lost);
  dtx__audit_summary(f, "%s", line);
  /* Before the kit, the report was the transfer audit's alone: its counts
   * stay at the top level too, for callers written against that. */
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)part, k, v) {
    if (strcmp(k, "summary") != 0 && strcmp(k, "unsettled") != 0)
      json_object_set_new(f->report, k, json_deep_copy(v));
  }
  json_decref(a.t1);
  json_decref(a.t3);
  json_decref(a.o1);
  json_decref(a.o3);
  json_decref(a.accounts);
  return 0;
}
