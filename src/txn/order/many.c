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
 * The rounds are a table (rounds[] below) that the kit's batch driver
 * runs (kit/many.c): it owns the items, their lanes, the split queue and
 * the results; this file says what each round's steps are and what an
 * outcome means.
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/order/order.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"

/* The result type is laid out as the kit's batched results (kit.h). */
DTX__MANY_RES_CHECK(dtx_order_result_t, order);

#define OK_KIND (&dtx__order_kind)

enum resume { R_DRIVE, R_REREAD }; /* read it again before its drive */

typedef struct item {
  dtx__bitem_t b; /* the kit's: lane, resume */
  const char *id; /* borrowed trade id */
  json_t *o;      /* the order as the last round left it (or NULL) */
  char tx[160];   /* round 3: its credit's transfer id */
} item_t;

/* Ends it with rc (this thread's detail) and the order o (stolen). */
static void end(dtx__batch_t *b, item_t *it, int rc, json_t *o) {
  it->o = NULL;
  dtx__batch_end(b, it, rc, o);
}

/* Ends it with an error of one of its steps, as drive() ends: the order as
 * it stands now (def.fail). */
static int fail(dtx__batch_t *b, void *p, int rc, json_t **o) {
  item_t *it = p;
  rc = dtx__order_end(b->ex, it->id, rc, it->o, o);
  it->o = NULL;
  return rc;
}

/* ---- the rounds ------------------------------------------------------------ */

/* Round 1: the ids checked, every order of the call in one find.  A bad or
 * unknown id ends as alone; an id seen before, or an order that is not
 * pending, leaves the lockstep.  Then the pattern set up (as alone: a
 * failure ends every order not ended, with the order read). */
static void round_read(dtx__batch_t *b) {
  json_t *ids = json_array(), *byid = json_object(), *list = NULL, *d;
  size_t i, j;
  int rc = ids && byid ? 0 : DTX_ENOMEM;
  for (i = 0; rc == 0 && i < b->n; i++) {
    item_t *it = dtx__batch_item(b, i);
    int bad = dtx__order_check_id(it->id);
    if (bad) {
      end(b, it, bad, NULL);
      continue;
    }
    for (j = 0; j < i; j++) { /* an earlier one not ended (a bad id) */
      item_t *was = dtx__batch_item(b, j);
      if (was->b.lane != DTX__LANE_DONE && strcmp(was->id, it->id) == 0)
        break;
    }
    if (j < i) /* the same callback again: after its first occurrence */
      dtx__batch_split(b, it, R_REREAD);
    else if (json_array_append_new(ids, json_string(it->id)))
      rc = DTX_ENOMEM;
  }
  if (rc == 0 && json_array_size(ids)) {
    json_t *f = json_pack("{s:{s:O}}", "_id", "$in", ids);
    rc = f ? dtx__kit_find(b->ex, DTX__ORDERS, f, NULL, &list) : DTX_ENOMEM;
    json_decref(f);
  }
  json_array_foreach(list, i, d) {
    const char *id = dtx__str(d, "_id");
    if (id)
      json_object_set(byid, id, d);
  }
  for (i = 0; i < b->n; i++) {
    item_t *it = dtx__batch_item(b, i);
    if (!dtx__batch_live(it))
      continue;
    if (rc) { /* as alone: the read failed, nothing known */
      end(b, it, rc, NULL);
      continue;
    }
    d = json_object_get(byid, it->id);
    if (!d) {
      end(b, it, dtx__err(DTX_ENOTFOUND, "no order '%s'", it->id), NULL);
      continue;
    }
    it->o = json_incref(d);
    if (!dtx__state_is(d, DTX_OS_PENDING))
      dtx__batch_split(b, it, R_DRIVE);
  }
  json_decref(list);
  json_decref(byid);
  json_decref(ids);
  if ((rc = dtx__order_ensure(b->ex->st)))
    for (i = 0; i < b->n; i++) {
      item_t *it = dtx__batch_item(b, i);
      if (it->b.lane != DTX__LANE_DONE)
        end(b, it, rc, it->o); /* as alone: the order read */
    }
}

/* The settlement accounts the orders in the lockstep name, in ONE find:
 * an object id -> account (NULL when the find failed: every order then
 * leaves the lockstep, and drive() reads its own). */
static json_t *settlements(dtx__batch_t *b) {
  json_t *ids = json_array(), *map = json_object(), *list = NULL, *d;
  size_t i;
  int rc = ids && map ? 0 : DTX_ENOMEM;
  for (i = 0; rc == 0 && i < b->k; i++) {
    const char *s = dtx__str(((item_t *)dtx__batch_item(b, b->at[i]))->o,
                             "settlement");
    if (s && json_array_append_new(ids, json_string(s)))
      rc = DTX_ENOMEM;
  }
  json_t *f = rc || !json_array_size(ids)
                  ? NULL
                  : json_pack("{s:{s:O}}", "_id", "$in", ids);
  if (rc == 0 && json_array_size(ids))
    rc = f ? dtx__kit_find(b->ex, DTX_ACCOUNTS, f, NULL, &list) : DTX_ENOMEM;
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
static void round_check(dtx__batch_t *b) {
  json_t *accts = settlements(b);
  for (size_t j = 0; j < b->k; j++) {
    item_t *it = dtx__batch_item(b, b->at[j]);
    const char *settle = dtx__str(it->o, "settlement");
    if (!accts || dtx__int(it->o, "attempt") != 1 ||
        dtx__order_recheck(it->o, settle ? json_object_get(accts, settle)
                                         : NULL)) {
      dtx__err_clear();
      dtx__batch_split(b, it, R_DRIVE);
    }
  }
  json_decref(accts);
}

/* Rounds 2, 4 and 5: one fenced move of each order in the lockstep.  A
 * move that matched nothing leaves the lockstep (re-read); another error
 * ends the order (DTX__ROUND_FAIL). */
static const json_t *claim_move(dtx__batch_t *b, void *p, dtx__move_t *m) {
  (void)b;
  *m = (dtx__move_t){.point = "order.confirm.begin", .from = DTX_OS_PENDING,
                     .to = DTX_OS_CONFIRMING, .flags = DTX__TAKE};
  return ((item_t *)p)->o;
}

/* O3: confirmed only on the attempt whose transfer was read succeeded. */
static const json_t *commit_move(dtx__batch_t *b, void *p, dtx__move_t *m) {
  item_t *it = p;
  (void)b;
  *m = (dtx__move_t){.point = "order.confirm.commit",
                     .from = DTX_OS_CONFIRMING, .to = DTX_OS_CONFIRMED,
                     .flags = DTX__FENCED,
                     .cond = json_pack("{s:s}", "transfer", it->tx)};
  return it->o;
}

static const json_t *finish_move(dtx__batch_t *b, void *p, dtx__move_t *m) {
  (void)b;
  *m = (dtx__move_t){.point = "order.finish", .from = DTX_OS_CONFIRMED,
                     .to = DTX_OS_SUCCESS, .flags = DTX__FENCED,
                     .set = json_pack("{s:n,s:I}", "owner", "lease_until",
                                      (json_int_t)0)};
  return ((item_t *)p)->o;
}

static void moved(dtx__batch_t *b, void *p, dtx__kit_op_t *op) {
  item_t *it = p;
  if (op->rc == DTX_ENOMATCH) { /* it moved on, or was fenced */
    dtx__batch_split(b, it, R_REREAD);
    return;
  }
  json_decref(it->o);
  it->o = op->out;
  op->out = NULL;
}

static void finished(dtx__batch_t *b, void *p, dtx__kit_op_t *op) {
  item_t *it = p;
  moved(b, it, op);
  if (dtx__batch_live(it)) {
    dtx__err_clear();
    end(b, it, 0, it->o);
  }
}

/* Round 3: the credit of every claimed order, its fault point first, then
 * all their transfers in ONE dtx_transfer_execute_many under this
 * executor.  A credit that did not end succeeded leaves the lockstep:
 * drive() reads that transfer again (its submit is idempotent) and
 * retries, declines or waits as credit() does alone. */
static void round_credit(dtx__batch_t *b) {
  dtx__exec_t *ex = b->ex;
  dtx_transfer_req_t *reqs = calloc(b->k + 1, sizeof *reqs);
  dtx_transfer_result_t *res = calloc(b->k + 1, sizeof *res);
  size_t *at = calloc(b->k + 1, sizeof *at), k = 0, j;
  if (!reqs || !res || !at) {
    for (j = 0; j < b->k; j++)
      dtx__batch_fail(b, dtx__batch_item(b, b->at[j]), DTX_ENOMEM,
                      "confirming many orders");
    goto out;
  }
  for (j = 0; j < b->k; j++) {
    item_t *it = dtx__batch_item(b, b->at[j]);
    const json_t *o = it->o;
    DTX_ASSERT(dtx__state_is(o, DTX_OS_CONFIRMING), "O2"); /* M2 */
    DTX_ASSERT(dtx__str_is(o, "owner", ex->owner), "O4"); /* its claim */
    dtx__order_tx_id(it->id, 1, it->tx, sizeof it->tx); /* round_check */
    int rc = dtx__kit_point("order.credit", NULL);
    if (rc) {
      dtx__batch_fail(b, it, rc, NULL);
      continue;
    }
    reqs[k] = (dtx_transfer_req_t){.id = it->tx,
                                   .from = dtx__str(o, "settlement"),
                                   .to = dtx__str(o, "account"),
                                   .amount = dtx__int(o, "amount")};
    at[k++] = b->at[j];
  }
  if (k) {
    /* The same executor, and no budget of its own: nested in this call, it
     * keeps this call's one deadline. */
    dtx_exec_opts_t eo = {.owner = ex->owner, .lease_ms = ex->lease_ms};
    (void)dtx_transfer_execute_many(ex->st, reqs, k, &eo, res);
  }
  for (j = 0; j < k; j++)
    if (res[j].rc != 0 || !dtx__state_is(res[j].tx, DTX_ST_SUCCEEDED))
      dtx__batch_split(b, dtx__batch_item(b, at[j]), R_DRIVE);
  dtx_transfer_results_clear(res, k);
out:
  free(reqs);
  free(res);
  free(at);
}

/* ---- the orders that left the lockstep ---------------------------------------- */

/* Driven alone by dtx__order_drive from where it stands (re-read first
 * when a move matched nothing or it came twice), as an explicit confirm. */
static void resume(dtx__batch_t *b, void *p) {
  item_t *it = p;
  json_t *o = it->o, *out = NULL;
  int rc = 0;
  it->o = NULL;
  if (it->b.resume == R_REREAD) {
    json_decref(o);
    o = NULL;
    rc = dtx__order_get(b->ex, it->id, &o);
  }
  if (rc == 0)
    rc = dtx__order_drive(b->ex, o, 1, &out);
  json_decref(o);
  end(b, it, rc, out);
}

static void item_clear(void *p) { json_decref(((item_t *)p)->o); }

/* ---- the call ---------------------------------------------------------------- */

static const dtx__round_t rounds[] = {
    {.all = round_read},
    {.all = round_check},
    {.move = claim_move, .kind = OK_KIND, .back = moved,
     .flags = DTX__ROUND_FAIL},
    {.all = round_credit},
    {.move = commit_move, .kind = OK_KIND, .back = moved,
     .flags = DTX__ROUND_FAIL},
    {.move = finish_move, .kind = OK_KIND, .back = finished,
     .flags = DTX__ROUND_FAIL},
    {0}};

static int init(dtx__batch_t *b, void *p, size_t i) {
  ((item_t *)p)->id = ((const char *const *)b->reqs)[i];
  return 0;
}

static const dtx__batch_def_t def = {
    .noun = "orders", .reqs_name = "trade_ids", .isize = sizeof(item_t),
    .rounds = rounds, .init = init, .fail = fail, .resume = resume,
    .clear = item_clear};

int dtx_order_confirm_many(dtx_store_t *st, const char *const *trade_ids,
                           size_t n, const dtx_exec_opts_t *opts,
                           dtx_order_result_t *results) {
  return dtx__many_run(&(dtx__many_t){
      .def = &def, .fn = __func__, .st = st, .reqs = trade_ids, .n = n,
      .opts = opts, .results = results, .rsize = sizeof *results});
}

void dtx_order_results_clear(dtx_order_result_t *results, size_t n) {
  dtx__many_clear(results, n, sizeof *results);
}
