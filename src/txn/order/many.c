/* many.c -- dtx_order_confirm_many: many payment callbacks confirmed at
 * once.  The state machine is order.c's (its diagram and O1-O5 hold as
 * they are); this file only decides which steps of which orders go to the
 * store together.
 *
 * Every order that stays on the fast path moves in LOCKSTEP: the same step
 * of all of them is one round, one bulk write (one write transaction on
 * SQLite, one pipeline per node on Redis), each step still the atomic
 * single-document update it is alone, behind its own fault point:
 *
 *   round  what, for every order in the lockstep         fault points
 *   1      one find of all the orders ({_id: {$in}}),     --
 *          one of their settlement accounts: what create
 *          checked, checked again (O6)
 *   2      claim: pending -> confirming (kit move, TAKE)  order.confirm.begin
 *   3      the credits: ONE dtx_transfer_execute_many of  order.credit (each
 *          the transfers order:ID (6 rounds of its own;   order, before the
 *          idempotent on the transfer id, O1)             call), transfer.*
 *   4      commit: confirming -> confirmed, fenced,       order.confirm.commit
 *          cond {transfer: the credit's id} (O3, O4)
 *   5      finish: confirmed -> success, fenced           order.finish
 *
 * FALLBACK RULE.  An order whose step leaves the fast path -- an invalid
 * or unknown trade id (it ends at once, as alone), an id that came
 * earlier in the call, an order not pending when read (success, canceled,
 * confirming or confirmed, maybe under another executor), a move that
 * matched nothing, a credit that did not end succeeded (declined, failed,
 * an error) -- LEAVES the lockstep and, once the rounds are over, is
 * driven on alone by dtx__order_drive from where it stands (re-read when
 * a move matched nothing or it came twice): the code dtx_order_confirm,
 * recovery and the crash, pause and error suites use.  A step that failed
 * for good (an injected error, the deadline) ends its order as drive()
 * ends it: the error with the order as it stands now.  So each order's
 * outcome is dtx_order_confirm's for it alone; the lockstep never waits
 * for an order that left it, and orders that left it run after it in the
 * caller's order (so an id given twice finds its first occurrence done).
 *
 * Invariants (beyond order.c's O1-O5, which every step keeps):
 *  M1 An order takes part in at most one step per round, and a round only
 *     holds steps of orders still in the lockstep.
 *  M2 From round 2 on, an order in the lockstep is confirming or confirmed
 *     under this executor's claim, and its document is as the last round
 *     left it (so the commit's and finish's fences are the claim's epoch).
 *  M3 Leaving the lockstep never undoes a step: the order is in the state
 *     its last applied step left it, which is what dtx__order_drive (and
 *     recovery, after a crash) starts from. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/order/order.h"
#include "txn/transfer/transfer.h"
#include "util/err.h"

/* The result type is laid out as the kit's batched results (kit.h). */
DTX__MANY_RES_CHECK(dtx_order_result_t, order);

#define OK_KIND (&dtx__order_kind)

enum lane { L_LOCK, L_ALONE, L_DONE };

typedef struct item {
  const char *id; /* borrowed trade id */
  dtx_order_result_t *res;
  enum lane lane;
  int reread;   /* L_ALONE: read it again before its drive */
  json_t *o;    /* the order as the last round left it (or NULL) */
  char tx[160]; /* round 3: its credit's transfer id */
} item_t;

/* Ends it with rc (this thread's detail) and the order o (stolen). */
static void finish_item(item_t *it, int rc, json_t *o) {
  dtx__many_set(it->res, rc, o);
  it->o = NULL;
  it->lane = L_DONE;
}

/* Ends it with an error of one of its steps, as drive() ends: the order as
 * it stands now; detail (may be NULL) becomes this thread's first. */
static void fail_item(dtx__exec_t *ex, item_t *it, int rc,
                      const char *detail) {
  json_t *o = NULL;
  if (detail)
    dtx__err(rc, "%s", detail);
  rc = dtx__order_end(ex, it->id, rc, it->o, &o);
  it->o = NULL;
  finish_item(it, rc, o);
}

/* It leaves the lockstep, to be driven alone after the rounds. */
static void leave(item_t *it, int reread) {
  it->lane = L_ALONE;
  it->reread = reread;
}

/* ---- the rounds ------------------------------------------------------------ */

/* Round 1: the ids checked, every order of the call in one find.  A bad or
 * unknown id ends as alone; an id seen before, or an order that is not
 * pending, leaves the lockstep. */
static int round_read(dtx__exec_t *ex, item_t *its, size_t n) {
  json_t *ids = json_array(), *byid = json_object(), *list = NULL, *d;
  size_t i, j;
  int rc = ids && byid ? 0 : DTX_ENOMEM;
  for (i = 0; rc == 0 && i < n; i++) {
    item_t *it = &its[i];
    int bad = dtx__order_check_id(it->id);
    if (bad) {
      finish_item(it, bad, NULL);
      continue;
    }
    for (j = 0; j < i && (its[j].res->rc == DTX_EINVAL ||
                          strcmp(its[j].id, it->id) != 0); j++)
      ;
    if (j < i) /* the same callback again: after its first occurrence */
      leave(it, 1);
    else if (json_array_append_new(ids, json_string(it->id)))
      rc = DTX_ENOMEM;
  }
  if (rc == 0 && json_array_size(ids)) {
    json_t *f = json_pack("{s:{s:O}}", "_id", "$in", ids);
    rc = f ? dtx__kit_find(ex, DTX__ORDERS, f, NULL, &list) : DTX_ENOMEM;
    json_decref(f);
  }
  json_array_foreach(list, i, d) {
    const char *id = dtx__str(d, "_id");
    if (id)
      json_object_set(byid, id, d);
  }
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    if (rc) { /* as alone: the read failed, nothing known */
      finish_item(it, rc, NULL);
      continue;
    }
    d = json_object_get(byid, it->id);
    if (!d) {
      finish_item(it, dtx__err(DTX_ENOTFOUND, "no order '%s'", it->id),
                  NULL);
      continue;
    }
    it->o = json_incref(d);
    if (!dtx__state_is(d, DTX_OS_PENDING))
      leave(it, 0);
  }
  json_decref(list);
  json_decref(byid);
  json_decref(ids);
  return rc;
}

/* Rounds 2, 4 and 5: one fenced move of each order in the lockstep (m_of
 * fills it), in one dtx__kit_move_many.  A move that matched nothing
 * leaves the lockstep (re-read); another error ends the order. */
typedef void (*fill_t)(const item_t *it, dtx__move_t *m);

static void round_move(dtx__exec_t *ex, item_t *its, size_t n, fill_t m_of,
                       int last) {
  const json_t **docs = calloc(n, sizeof *docs);
  dtx__move_t *m = calloc(n, sizeof *m);
  json_t **outs = calloc(n, sizeof *outs);
  int *rcs = calloc(n, sizeof *rcs);
  char **details = calloc(n, sizeof *details);
  size_t *at = calloc(n, sizeof *at), k = 0, i;
  if (!docs || !m || !outs || !rcs || !details || !at) {
    for (i = 0; i < n; i++)
      if (its[i].lane == L_LOCK)
        fail_item(ex, &its[i], DTX_ENOMEM, "confirming many orders");
    goto out;
  }
  for (i = 0; i < n; i++)
    if (its[i].lane == L_LOCK) {
      docs[k] = its[i].o;
      m_of(&its[i], &m[k]);
      at[k++] = i;
    }
  if (k)
    (void)dtx__kit_move_many(ex, OK_KIND, docs, m, k, outs, rcs, details);
  for (i = 0; i < k; i++) {
    item_t *it = &its[at[i]];
    if (rcs[i] == 0 && last) {
      json_decref(it->o);
      it->o = NULL;
      dtx__err_clear();
      finish_item(it, 0, outs[i]);
    } else if (rcs[i] == 0) {
      json_decref(it->o);
      it->o = outs[i];
    } else if (rcs[i] == DTX_ENOMATCH) { /* it moved on, or was fenced */
      leave(it, 1);
    } else {
      fail_item(ex, it, rcs[i], details[i]);
    }
    free(details[i]);
  }
out:
  free(docs);
  free(m);
  free(outs);
  free(rcs);
  free(details);
  free(at);
}

static void claim_of(const item_t *it, dtx__move_t *m) {
  (void)it;
  *m = (dtx__move_t){.point = "order.confirm.begin", .from = DTX_OS_PENDING,
                     .to = DTX_OS_CONFIRMING, .flags = DTX__TAKE};
}

/* O3: confirmed only on the attempt whose transfer was read succeeded. */
static void commit_of(const item_t *it, dtx__move_t *m) {
  *m = (dtx__move_t){.point = "order.confirm.commit",
                     .from = DTX_OS_CONFIRMING, .to = DTX_OS_CONFIRMED,
                     .flags = DTX__FENCED,
                     .cond = json_pack("{s:s}", "transfer", it->tx)};
}

static void finish_of(const item_t *it, dtx__move_t *m) {
  (void)it;
  *m = (dtx__move_t){.point = "order.finish", .from = DTX_OS_CONFIRMED,
                     .to = DTX_OS_SUCCESS, .flags = DTX__FENCED,
                     .set = json_pack("{s:n,s:I}", "owner", "lease_until",
                                      (json_int_t)0)};
}

/* Round 3: the credit of every claimed order, its fault point first, then
 * all their transfers in ONE dtx_transfer_execute_many under this
 * executor.  A credit that did not end succeeded leaves the lockstep:
 * drive() reads that transfer again (its submit is idempotent) and
 * retries, declines or waits as credit() does alone. */
/* The settlement accounts the orders in the lockstep name, in ONE find:
 * an object id -> account (NULL when the find failed: every order then
 * leaves the lockstep, and drive() reads its own). */
static json_t *settlements(dtx__exec_t *ex, const item_t *its, size_t n) {
  json_t *ids = json_array(), *map = json_object(), *list = NULL, *d;
  size_t i;
  int rc = ids && map ? 0 : DTX_ENOMEM;
  for (i = 0; rc == 0 && i < n; i++) {
    const char *s = dtx__str(its[i].o, "settlement");
    if (its[i].lane == L_LOCK && s &&
        json_array_append_new(ids, json_string(s)))
      rc = DTX_ENOMEM;
  }
  json_t *f = rc || !json_array_size(ids)
                  ? NULL
                  : json_pack("{s:{s:O}}", "_id", "$in", ids);
  if (rc == 0 && json_array_size(ids))
    rc = f ? dtx__kit_find(ex, DTX_ACCOUNTS, f, NULL, &list) : DTX_ENOMEM;
  json_array_foreach(list, i, d) {
    if (dtx__str(d, "_id"))
      json_object_set(map, dtx__str(d, "_id"), d);
  }
  json_decref(f);
  json_decref(ids);
  json_decref(list);
  if (rc) {
    json_decref(map);
    dtx__err_clear();
    return NULL;
  }
  return map;
}

/* Round 1b, before any write: what create checked, checked again for
 * every order in the lockstep (O6; their settlement accounts in ONE
 * find).  An order that fails it, or at an attempt past 1 (which needs
 * O1's chain read), leaves the lockstep: drive() checks it alone, and
 * one create would have refused stays pending. */
static void round_check(dtx__exec_t *ex, item_t *its, size_t n) {
  json_t *accts = settlements(ex, its, n);
  for (size_t i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    const char *settle = dtx__str(it->o, "settlement");
    if (!accts || dtx__int(it->o, "attempt") != 1 ||
        dtx__order_recheck(it->o, settle ? json_object_get(accts, settle)
                                         : NULL)) {
      dtx__err_clear();
      leave(it, 0);
    }
  }
  json_decref(accts);
}

static void round_credit(dtx__exec_t *ex, item_t *its, size_t n) {
  dtx_transfer_req_t *reqs = calloc(n, sizeof *reqs);
  dtx_transfer_result_t *res = calloc(n, sizeof *res);
  size_t *at = calloc(n, sizeof *at), k = 0, i;
  if (!reqs || !res || !at) {
    for (i = 0; i < n; i++)
      if (its[i].lane == L_LOCK)
        fail_item(ex, &its[i], DTX_ENOMEM, "confirming many orders");
    goto out;
  }
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    const json_t *o = it->o;
    assert(dtx__state_is(o, DTX_OS_CONFIRMING)); /* O2 */
    assert(dtx__str_is(o, "owner", ex->owner));  /* O4: under its claim */
    dtx__order_tx_id(it->id, 1, it->tx, sizeof it->tx); /* round_check */
    int rc = dtx__kit_point("order.credit", NULL);
    if (rc) {
      fail_item(ex, it, rc, NULL);
      continue;
    }
    reqs[k] = (dtx_transfer_req_t){.id = it->tx,
                                   .from = dtx__str(o, "settlement"),
                                   .to = dtx__str(o, "account"),
                                   .amount = dtx__int(o, "amount")};
    at[k++] = i;
  }
  if (k) {
    /* The same executor, and no budget of its own: nested in this call, it
     * keeps this call's one deadline. */
    dtx_exec_opts_t eo = {.owner = ex->owner, .lease_ms = ex->lease_ms};
    (void)dtx_transfer_execute_many(ex->st, reqs, k, &eo, res);
  }
  for (i = 0; i < k; i++)
    if (res[i].rc != 0 || !dtx__state_is(res[i].tx, DTX_ST_SUCCEEDED))
      leave(&its[at[i]], 0); /* confirming, ours: drive() credits it */
  dtx_transfer_results_clear(res, k);
out:
  free(reqs);
  free(res);
  free(at);
}

/* ---- the call ---------------------------------------------------------------- */

static void run(dtx__exec_t *ex, item_t *its, size_t n) {
  size_t i;
  (void)round_read(ex, its, n); /* a failed read ends the orders it read */
  int rc = dtx__order_ensure(ex->st);
  for (i = 0; rc && i < n; i++)
    if (its[i].lane != L_DONE)
      finish_item(&its[i], rc, its[i].o); /* as alone: the order read */
  round_check(ex, its, n);
  round_move(ex, its, n, claim_of, 0);
  round_credit(ex, its, n);
  round_move(ex, its, n, commit_of, 0);
  round_move(ex, its, n, finish_of, 1);
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    json_t *o = it->o, *out = NULL;
    rc = 0;
    if (it->lane != L_ALONE)
      continue;
    it->o = NULL;
    if (it->reread) {
      json_decref(o);
      o = NULL;
      rc = dtx__order_get(ex, it->id, &o);
    }
    if (rc == 0)
      rc = dtx__order_drive(ex, o, 1, &out); /* as an explicit confirm */
    json_decref(o);
    finish_item(it, rc, out);
  }
}

int dtx_order_confirm_many(dtx_store_t *st, const char *const *trade_ids,
                           size_t n, const dtx_exec_opts_t *opts,
                           dtx_order_result_t *results) {
  dtx__exec_t ex;
  dtx__call_t c;
  size_t i;
  void *mem;
  int rc;
  if (!dtx__many_begin(st, trade_ids, "trade_ids", n, opts, results,
                       sizeof *results, "dtx_order_confirm_many", sizeof(item_t), &ex,
                       &c, &mem, &rc))
    return rc;
  item_t *its = mem;
  for (i = 0; i < n; i++) {
    its[i].id = trade_ids[i];
    its[i].res = &results[i];
  }
  run(&ex, its, n);
  for (i = 0; i < n; i++)
    json_decref(its[i].o); /* NULL once ended */
  free(its);
  return dtx__call_end(&c, dtx__many_summary(results, n, sizeof *results,
                                             "orders"));
}

void dtx_order_results_clear(dtx_order_result_t *results, size_t n) {
  dtx__many_clear(results, n, sizeof *results);
}
