/* many.c -- the batched transfer executor: dtx_transfer_execute_many, and
 * dtx_transfer_execute as its batch of one.  The state machine is
 * transfer.c's; this file only decides which steps of which transfers go
 * to the store together.
 *
 * Every transfer of a batch that stays on the happy path moves in
 * LOCKSTEP: the same step of all of them is one round, one
 * dtx_store_bulk_write (one write transaction and fsync on SQLite, one
 * pipeline per node on Redis), each step still the atomic single-document
 * update it is alone, behind its own fault point:
 *
 *   round  what, for every transfer in the lockstep        fault points
 *   1      one find of all their accounts ({_id: {$in}})   --
 *   2      insert each transfer already claimed            transfer.submit
 *   3      payer debit + payee mark                        transfer.debit,
 *                                                          transfer.mark_payee,
 *                                                          transfer.debit_mark.done
 *   4      commit (fenced move)                            transfer.commit
 *   5      payer clear + payee credit                      transfer.clear_payer,
 *                                                          transfer.credit_payee,
 *                                                          transfer.clear_credit.done
 *   6      finish (move)                                   transfer.finish
 *
 * The rounds are a table (submitted[], claimed[] below) that the kit's
 * batch driver runs (kit/many.c): it owns the items, their lanes (in the
 * lockstep, split, done), the split queue and the results; this file
 * says what each round's steps are and what an outcome means.
 *
 * THE WORKER'S BATCH (dtx__tx_drive_claimed_many).  Transfers a worker
 * claimed together (claim-many: initiated -> preparing, transfer.claim)
 * enter the same rounds at round 1' -- one find of their payers, for the
 * debit's min_balance -- and go on from round 3; they were claimed at
 * their own epoch, not 1 (B2 holds with "at the epoch of its claim").  A
 * gone payer splits with prepare's verdict (no such account).  Their
 * leases are the claim's: renewed before the commit round and before
 * each split transfer's drive once a quarter of the lease has passed
 * (keep_leases).
 *
 * FALLBACK RULE.  A transfer whose step deviates from the happy path -- an
 * invalid request or a missing account (it ends at once, as alone:
 * nothing recorded), an id that exists or came earlier in the batch, a
 * debit or mark that matched nothing (funds, limits, fences), a move that
 * matched nothing, a step that failed for good -- LEAVES the lockstep
 * (fault point transfer.batch.split, reached at that moment) and, once
 * the rounds are over, is driven on alone by the sequential code from
 * where it stands: the rest of its prepare or finish (prepare_rest,
 * finish_rest), then dtx__tx_drive -- the code the worker, recovery and
 * `transfer run` use, which the crash, pause, error and chaos suites
 * prove.  Transient errors (BUSY, UNAVAILABLE, an injected FAULT) are the
 * kit's: the step goes again alone under the one retry policy and the
 * call's one deadline (the step engine); a step that keeps failing ends
 * its transfer with that error, as alone (left for recovery).  So each
 * transfer's outcome is exactly dtx_transfer_execute's for it alone, and
 * no transfer waits on another's failure: the lockstep never waits for a
 * split transfer, and split transfers run after it (those whose id
 * existed last, so a duplicate id in one batch finds its twin finished).
 *
 * Invariants (beyond transfer.c's I1-I9, which every step keeps):
 *  B1 A transfer takes part in at most one step per round, and a round
 *     only holds steps whose transfers are in the lockstep.
 *  B2 A transfer in the lockstep is owned by this executor at epoch 1
 *     from round 2 on, and its document is as the last round left it.
 *  B3 Leaving the lockstep never undoes a step: the split transfer is in
 *     the state its last applied step left it, which is what the
 *     sequential code (and recovery, after a crash) starts from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/err.h"

/* The result type is laid out as the kit's batched results (kit.h). */
DTX__MANY_RES_CHECK(dtx_transfer_result_t, tx);

#define TX (&dtx__tx_kind)

/* How a transfer that left the lockstep goes on. */
enum resume {
  R_PREPARE, /* the rest of the prepare phase after its pair */
  R_FINISH,  /* the rest of the finish after its pair */
  R_REREAD,  /* a move that matched nothing: read it, drive it */
  R_EXISTING = DTX__SPLIT_LAST, /* its id exists (or came earlier in this
                                   batch): after the others (B3) */
};

typedef struct item {
  dtx__bitem_t b; /* the kit's: lane, resume */
  const dtx_transfer_req_t *req;
  char id[160];
  json_t *tx;    /* as the last round left it */
  json_t *tried; /* R_EXISTING: the document its insert tried, or NULL */
  json_t *payer; /* the payer as read in round 1 */
  /* the prepare pair's outcome (R_PREPARE) */
  int pair, debited, marked;
  json_t *min;
  enum dtx__marked why;
  /* the finish pair's outcome (R_FINISH) */
  int cleared, credited;
  json_t *cinc, *binc;
} item_t;

typedef struct ctx {
  int64_t since; /* the claim's lease runs from here (keep_leases); < 0:
                    submitted transfers, claimed by their insert */
} ctx_t;

/* Ends it with an error of one of its steps, as a drive ends: the
 * transfer as it stands now, the detail naming it (def.fail). */
static int fail(dtx__batch_t *b, void *p, int rc, json_t **now) {
  return dtx__tx_fail(b->ex, ((item_t *)p)->id, rc, now);
}

/* ---- the rounds ------------------------------------------------------------ */

/* Round 1: the requests checked, every account of the batch in one find;
 * a bad request or a missing account ends its transfer as alone (nothing
 * recorded).  Then each gets its id and its document (preparing, owned
 * by ex at epoch 1); an id seen earlier in the batch is not sent: it is
 * the same request again (or a conflict), judged after its twin ran. */
static void round_accounts(dtx__batch_t *b) {
  dtx__exec_t *ex = b->ex;
  const char **ids = calloc(2 * b->k + 1, sizeof *ids);
  json_t *byid = NULL, *seen = json_object();
  size_t j;
  for (j = 0; j < b->k; j++) {
    item_t *it = dtx__batch_item(b, b->at[j]);
    int bad = dtx__tx_check_req(it->req);
    if (bad) {
      dtx__batch_end(b, it, bad, NULL);
    } else if (ids) {
      ids[2 * j] = it->req->from;
      ids[2 * j + 1] = it->req->to;
    }
  }
  int rc = ids ? dtx__kit_ensure(ex->st, &dtx__transfer_pattern) : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__tx_read_accounts(ex, ids, 2 * b->k, &byid);
  for (j = 0; j < b->k; j++) {
    item_t *it = dtx__batch_item(b, b->at[j]);
    char gen[25];
    if (!dtx__batch_live(it))
      continue;
    if (rc) {
      dtx__batch_end(b, it, rc, NULL);
      continue;
    }
    const char *ab[2] = {it->req->from, it->req->to};
    int k = 0;
    while (k < 2 && json_object_get(byid, ab[k]))
      k++;
    if (k < 2) {
      dtx__batch_end(b, it, dtx__err(DTX_ENOACCOUNT, "no account '%s'",
                                     ab[k]), NULL);
      continue;
    }
    it->payer = json_incref(json_object_get(byid, it->req->from));
    if (!it->req->id)
      dtx__id_new(gen);
    snprintf(it->id, sizeof it->id, "%s", it->req->id ? it->req->id : gen);
    if (!seen || !(it->tx = dtx__tx_new(ex, it->req, it->id, 1))) {
      dtx__batch_end(b, it, dtx__err(DTX_ENOMEM, "transfer %s: out of "
                                     "memory", it->id), NULL);
    } else if (json_object_get(seen, it->id)) {
      json_decref(it->tx);
      it->tx = NULL;
      dtx__batch_split(b, it, R_EXISTING);
    } else {
      json_object_set_new(seen, it->id, json_true());
    }
  }
  json_decref(seen);
  json_decref(byid);
  free(ids);
}

/* Round 1 of a claimed batch (dtx__tx_drive_claimed_many): every payer in
 * one find, for the debit's min_balance.  A payer that is gone splits
 * with the prepare's own verdict on it (no such account: rolled back),
 * exactly as prepare() decides when its read finds nothing. */
static void round_payers(dtx__batch_t *b) {
  const char **ids = calloc(b->k + 1, sizeof *ids);
  json_t *byid = NULL;
  size_t j;
  ((ctx_t *)b->ctx)->since = dtx__mono_ms();
  for (j = 0; ids && j < b->k; j++)
    ids[j] = dtx__str(((item_t *)dtx__batch_item(b, b->at[j]))->tx, "from");
  int rc = ids ? dtx__tx_read_accounts(b->ex, ids, b->k, &byid) : DTX_ENOMEM;
  for (j = 0; j < b->k; j++) {
    item_t *it = dtx__batch_item(b, b->at[j]);
    const char *from = dtx__str(it->tx, "from");
    if (rc) { /* as a failed read of prepare(): left for recovery */
      dtx__batch_fail(b, it, rc, NULL);
      continue;
    }
    it->payer = from ? json_incref(json_object_get(byid, from)) : NULL;
    if (!it->payer) {
      it->pair = 0;
      it->why = DTX__MK_MISSING;
      dtx__batch_split(b, it, R_PREPARE);
    }
  }
  json_decref(byid);
  free(ids);
}

/* Round 2: every transfer inserted already claimed. */
static int insert_op(dtx__batch_t *b, void *p, dtx__kit_op_t *ops) {
  (void)b;
  ops[0] = (dtx__kit_op_t){.kind = DTX_BULK_INSERT,
                           .point = "transfer.submit",
                           .coll = DTX_TRANSFERS,
                           .doc = json_incref(((item_t *)p)->tx)};
  return 1;
}

static void insert_back(dtx__batch_t *b, void *p, dtx__kit_op_t *o) {
  item_t *it = p;
  if (o->rc == DTX_EDUPKEY) { /* the id exists: see what it holds */
    it->tried = it->tx;
    it->tx = NULL;
    dtx__batch_split(b, it, R_EXISTING);
  } else if (o->rc) { /* as submit fails alone: nothing to show */
    if (o->detail)
      dtx__err(o->rc, "%s", o->detail);
    dtx__batch_end(b, it, o->rc, NULL);
  }
}

/* The pair u (its filters and updates, stolen) as two steps. */
static int pair_ops(dtx__kit_op_t *ops, const dtx__kit_upd_t *u) {
  for (int j = 0; j < 2; j++)
    ops[j] = (dtx__kit_op_t){.kind = DTX_BULK_UPDATE_ONE,
                             .point = u[j].point,
                             .coll = u[j].coll,
                             .filter = u[j].filter,
                             .update = u[j].update};
  return 2;
}

/* Round 3: each payer's debit with its payee's mark.  A payer as read in
 * round 1 that decides the debit without a write (a limit the amount
 * passes, a bad limit) splits before the round; a debit or mark that
 * matched nothing (funds; a payee's ceiling) splits after it. */
static int debit_mark_ops(dtx__batch_t *b, void *p, dtx__kit_op_t *ops) {
  item_t *it = p;
  dtx__kit_upd_t u[2];
  if (!dtx__tx_pair_ops(it->tx, it->payer, u, &it->min, &it->why)) {
    it->pair = 0;
    dtx__batch_split(b, it, R_PREPARE);
    return 0;
  }
  it->pair = 1;
  return pair_ops(ops, u);
}

static void debit_mark_back(dtx__batch_t *b, void *p, dtx__kit_op_t *o) {
  item_t *it = p;
  it->debited = o[0].matched;
  it->marked = o[1].matched;
  if (!it->debited || !it->marked) {
    dtx__batch_split(b, it, R_PREPARE);
  } else {
    json_decref(it->min);
    it->min = NULL;
  }
}

/* Rounds 4 and 6: one fenced or plain move of every transfer in the
 * lockstep.  A move that matched nothing (fenced off by recovery or a
 * cancel; finished by someone else) splits: the sequential drive rereads
 * it. */
static const json_t *commit_move(dtx__batch_t *b, void *p, dtx__move_t *m) {
  (void)b;
  *m = (dtx__move_t){.point = "transfer.commit",
                     .from = DTX_ST_PREPARING,
                     .to = DTX_ST_COMMITTED,
                     .flags = DTX__FENCED};
  return ((item_t *)p)->tx;
}

static const json_t *finish_move(dtx__batch_t *b, void *p, dtx__move_t *m) {
  (void)b;
  *m = (dtx__move_t){.point = "transfer.finish",
                     .from = DTX_ST_COMMITTED,
                     .to = DTX_ST_SUCCEEDED};
  return ((item_t *)p)->tx;
}

static void moved(dtx__batch_t *b, void *p, dtx__kit_op_t *o) {
  item_t *it = p;
  if (o->rc == DTX_ENOMATCH) {
    dtx__batch_split(b, it, R_REREAD);
    return;
  }
  json_decref(it->tx);
  it->tx = o->out;
  o->out = NULL;
}

static void finished(dtx__batch_t *b, void *p, dtx__kit_op_t *o) {
  item_t *it = p;
  moved(b, it, o);
  if (dtx__batch_live(it)) { /* with the last move, done */
    dtx__err_clear();
    dtx__batch_end(b, it, 0, json_incref(it->tx));
  }
}

/* Round 5: each payer's debit marker cleared with its payee's credit. */
static int clear_credit_ops(dtx__batch_t *b, void *p, dtx__kit_op_t *ops) {
  item_t *it = p;
  dtx__kit_upd_t u[2];
  (void)b;
  dtx__tx_clear_credit_ops(it->tx, u, &it->cinc, &it->binc);
  return pair_ops(ops, u);
}

static void clear_credit_back(dtx__batch_t *b, void *p, dtx__kit_op_t *o) {
  item_t *it = p;
  it->cleared = o[0].matched;
  it->credited = o[1].matched;
  if (!it->cleared || !it->credited) {
    dtx__batch_split(b, it, R_FINISH); /* keeps cinc, binc for finish_rest */
    return;
  }
  json_decref(it->cinc);
  json_decref(it->binc);
  it->cinc = it->binc = NULL;
}

/* ---- leases of a claimed batch ------------------------------------------------ */

/* A claimed batch (the worker's) holds its transfers under the lease of
 * their claim, taken just before `since` (dtx__mono_ms).  When the rounds
 * (or the split transfers driven one after another) have used a quarter
 * of it, it is renewed on the preparing transfers still to be driven,
 * before their next fenced step: a lapsed lease lets recovery take them
 * over, which is safe (the fenced commit fails, the drive rereads) but
 * must not be what a slow batch normally meets.  A renewal that finds
 * the transfer gone from this executor changes nothing: its next step
 * finds that too. */
static void keep_leases(dtx__batch_t *b) {
  dtx__exec_t *ex = b->ex;
  int64_t *since = &((ctx_t *)b->ctx)->since, at = dtx__mono_ms();
  if (*since < 0 || at - *since < ex->lease_ms / 4)
    return;
  for (size_t i = 0; i < b->n; i++) {
    item_t *it = dtx__batch_item(b, i);
    json_t *out = NULL;
    if (it->b.lane == DTX__LANE_DONE || !it->tx ||
        !dtx__state_is(it->tx, DTX_ST_PREPARING))
      continue;
    if (dtx__kit_renew(ex, TX, it->tx, &out) == 0 && out) {
      json_decref(it->tx);
      it->tx = out;
    } else {
      json_decref(out);
      dtx__err_clear();
    }
  }
  *since = at; /* renewed from here on */
}

/* ---- the transfers that left the lockstep ---------------------------------- */

/* Goes on alone from where the split left it, as the sequential drive
 * would have from there (after the leases of those still to go). */
static void resume(dtx__batch_t *b, void *p) {
  dtx__exec_t *ex = b->ex;
  item_t *it = p;
  json_t *next = NULL, *out = NULL;
  int rc = 0, mine = 0;
  keep_leases(b);
  switch (it->b.resume) {
  case R_EXISTING:
    if ((rc = dtx__tx_existing(ex, it->req, it->id, it->tried, 1, &mine,
                               &next))) {
      dtx__batch_end(b, it, rc, NULL); /* as submit: nothing to show */
      return;
    }
    rc = dtx__tx_drive_ex(ex, next, 1, mine, it->payer, &out);
    json_decref(next);
    dtx__batch_end(b, it, rc, out);
    return;
  case R_PREPARE:
    rc = dtx__tx_prepare_rest(ex, it->tx, it->pair, it->debited, it->marked,
                              it->min, it->why, &next);
    it->min = NULL;
    break;
  case R_FINISH:
    rc = dtx__tx_finish_rest(ex, it->tx, it->cleared, it->credited, it->cinc,
                             it->binc, &next);
    it->cinc = it->binc = NULL;
    break;
  default: /* R_REREAD */
    break;
  }
  if (rc == DTX_ENOMATCH) /* as the drive takes it: moved on, reread */
    rc = 0;
  if (rc == 0 && !next)
    rc = dtx__kit_get(ex, DTX_TRANSFERS, it->id, &next);
  if (rc) {
    json_decref(next);
    dtx__batch_fail(b, it, rc, NULL);
    return;
  }
  rc = dtx__tx_drive_ex(ex, next, 1, 0, NULL, &out);
  json_decref(next);
  dtx__batch_end(b, it, rc, out);
}

/* Drops what the rounds left on it. */
static void item_clear(void *p) {
  item_t *it = p;
  json_decref(it->tx);
  json_decref(it->tried);
  json_decref(it->payer);
  json_decref(it->min);
  json_decref(it->cinc);
  json_decref(it->binc);
}

/* ---- the tables ---------------------------------------------------------------- */

#define AFTER_INSERT                                                         \
  {.build = debit_mark_ops, .width = 2, .back = debit_mark_back,             \
   .done = "transfer.debit_mark.done", .flags = DTX__ROUND_FAIL},            \
      {.all = keep_leases},                                                  \
      {.move = commit_move, .kind = TX, .back = moved,                       \
       .flags = DTX__ROUND_FAIL},                                            \
      {.build = clear_credit_ops, .width = 2, .back = clear_credit_back,     \
       .done = "transfer.clear_credit.done", .flags = DTX__ROUND_FAIL},      \
      {.move = finish_move, .kind = TX, .back = finished,                    \
       .flags = DTX__ROUND_FAIL},                                            \
  {                                                                          \
    0                                                                        \
  }

static const dtx__round_t submitted[] = {
    {.all = round_accounts},
    {.build = insert_op, .width = 1, .back = insert_back},
    AFTER_INSERT};

static const dtx__round_t claimed[] = {{.all = round_payers}, AFTER_INSERT};

static int init_req(dtx__batch_t *b, void *p, size_t i) {
  ((item_t *)p)->req = &((const dtx_transfer_req_t *)b->reqs)[i];
  return 0;
}

/* A claimed transfer that is not (or no longer) this executor's preparing
 * one goes on alone at once, as the one-at-a-time worker's drive would
 * take it. */
static int init_claimed(dtx__batch_t *b, void *p, size_t i) {
  item_t *it = p;
  const json_t *d = ((const json_t *const *)b->reqs)[i];
  const char *id = dtx__str(d, "_id");
  it->tx = json_incref((json_t *)d);
  snprintf(it->id, sizeof it->id, "%s", id ? id : "");
  if (!dtx__state_is(d, DTX_ST_PREPARING) ||
      !dtx__str_is(d, "owner", b->ex->owner)) {
    json_t *out = NULL;
    int rc = dtx__tx_drive(b->ex, d, 1, &out);
    dtx__batch_end(b, it, rc, out);
  }
  return 0;
}

static const dtx__batch_def_t submit_def = {
    .noun = "transfers", .reqs_name = "reqs", .isize = sizeof(item_t),
    .split = "transfer.batch.split", .rounds = submitted, .init = init_req,
    .fail = fail, .resume = resume, .clear = item_clear};

static const dtx__batch_def_t claimed_def = {
    .noun = "transfers", .reqs_name = "docs", .isize = sizeof(item_t),
    .split = "transfer.batch.split", .rounds = claimed, .init = init_claimed,
    .fail = fail, .resume = resume, .clear = item_clear};

/* ---- the public call ---------------------------------------------------------- */

int dtx_transfer_execute_many(dtx_store_t *st, const dtx_transfer_req_t *reqs,
                              size_t n, const dtx_exec_opts_t *opts,
                              dtx_transfer_result_t *results) {
  ctx_t cx = {.since = -1};
  return dtx__many_run(&(dtx__many_t){
      .def = &submit_def, .fn = __func__, .st = st, .reqs = reqs, .n = n,
      .opts = opts, .results = results, .rsize = sizeof *results,
      .ctx = &cx});
}

void dtx_transfer_results_clear(dtx_transfer_result_t *results, size_t n) {
  dtx__many_clear(results, n, sizeof *results);
}

/* The worker's batch (transfer.c, tx_drive_many): transfers it claimed
 * together, driven in lockstep from the payers' read on. */
void dtx__tx_drive_claimed_many(dtx__exec_t *ex, const json_t *const *docs,
                                size_t n, json_t **outs, int *rcs,
                                char **details) {
  dtx_transfer_result_t *res = calloc(n ? n : 1, sizeof *res);
  ctx_t cx = {.since = -1};
  size_t i;
  if (!res) {
    for (i = 0; i < n; i++) {
      outs[i] = json_incref((json_t *)docs[i]);
      rcs[i] = dtx__err(DTX_ENOMEM, "driving %zu transfers", n);
      details[i] = NULL;
    }
    return;
  }
  dtx__batch_drive(ex, &claimed_def, docs, n, &cx, res, sizeof *res);
  for (i = 0; i < n; i++) {
    outs[i] = res[i].tx;
    rcs[i] = res[i].rc;
    details[i] = res[i].detail; /* handed over */
  }
  free(res);
}
