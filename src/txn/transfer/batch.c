/* batch.c -- the batched transfer executor: dtx_transfer_execute_many, and
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
 * call's one deadline (dtx__kit_run); a step that keeps failing ends its
 * transfer with that error, as alone (left for recovery).  So each
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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/err.h"

/* The result type is laid out as the kit's batched results (kit.h). */
DTX__MANY_RES_CHECK(dtx_transfer_result_t, tx);

#define TX (&dtx__tx_kind)

enum lane { L_LOCK, L_SPLIT, L_DONE };

/* How a transfer that left the lockstep goes on. */
enum resume {
  R_EXISTING, /* its id exists (or came earlier in this batch) */
  R_PREPARE,  /* the rest of the prepare phase after its pair */
  R_FINISH,   /* the rest of the finish after its pair */
  R_REREAD,   /* a move that matched nothing: read it, drive it */
};

typedef struct item {
  const dtx_transfer_req_t *req;
  dtx_transfer_result_t *res;
  char id[160];
  enum lane lane;
  enum resume resume;
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
  size_t op; /* its first step in the round's steps */
} item_t;

/* Ends it with rc (and this thread's detail) and the document tx
 * (stolen, may be NULL). */
static void finish_item(item_t *it, int rc, json_t *tx) {
  dtx__many_set(it->res, rc, tx);
  it->lane = L_DONE;
}

/* Ends it with an error of one of its steps, as a drive ends (the
 * transfer as it stands now, the detail naming it): detail (may be NULL)
 * becomes this thread's first. */
static void fail_item(dtx__exec_t *ex, item_t *it, int rc,
                      const char *detail) {
  json_t *now = NULL;
  if (detail)
    dtx__err(rc, "%s", detail);
  rc = dtx__tx_fail(ex, it->id, rc, &now);
  finish_item(it, rc, now);
}

/* It leaves the lockstep, to go on alone as `r` says after the rounds. */
static void split(dtx__exec_t *ex, item_t *it, enum resume r) {
  int rc = dtx__kit_point("transfer.batch.split", NULL);
  it->resume = r;
  it->lane = L_SPLIT;
  if (rc) /* as a failed step: left where it stands, for recovery */
    fail_item(ex, it, rc, NULL);
}

/* ---- the rounds ------------------------------------------------------------ */

/* Round 1: the requests checked, every account of the batch in one find;
 * a bad request or a missing account ends its transfer as alone (nothing
 * recorded). */
static void round_accounts(dtx__exec_t *ex, item_t *its, size_t n) {
  const char **ids = calloc(2 * n, sizeof *ids);
  json_t *byid = NULL;
  size_t i;
  for (i = 0; i < n; i++) {
    int bad = dtx__tx_check_req(its[i].req);
    if (bad) {
      finish_item(&its[i], bad, NULL);
    } else if (ids) {
      ids[2 * i] = its[i].req->from;
      ids[2 * i + 1] = its[i].req->to;
    }
  }
  int rc = ids ? dtx__kit_ensure(ex->st, &dtx__transfer_pattern) : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__tx_read_accounts(ex, ids, 2 * n, &byid);
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    if (rc) {
      finish_item(it, rc, NULL);
      continue;
    }
    const char *ab[2] = {it->req->from, it->req->to};
    int k = 0;
    while (k < 2 && json_object_get(byid, ab[k]))
      k++;
    if (k < 2) {
      finish_item(it, dtx__err(DTX_ENOACCOUNT, "no account '%s'", ab[k]),
                  NULL);
      continue;
    }
    it->payer = json_incref(json_object_get(byid, it->req->from));
  }
  json_decref(byid);
  free(ids);
}

/* Round 1 of a claimed batch (dtx__tx_drive_claimed_many): every payer in
 * one find, for the debit's min_balance.  A payer that is gone splits
 * with the prepare's own verdict on it (no such account: rolled back),
 * exactly as prepare() decides when its read finds nothing. */
static void round_payers(dtx__exec_t *ex, item_t *its, size_t n) {
  const char **ids = calloc(n ? n : 1, sizeof *ids);
  json_t *byid = NULL;
  size_t i;
  for (i = 0; ids && i < n; i++)
    ids[i] = dtx__str(its[i].tx, "from");
  int rc = ids ? dtx__tx_read_accounts(ex, ids, n, &byid) : DTX_ENOMEM;
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    const char *from = dtx__str(it->tx, "from");
    if (it->lane != L_LOCK)
      continue;
    if (rc) { /* as a failed read of prepare(): left for recovery */
      fail_item(ex, it, rc, NULL);
      continue;
    }
    it->payer = from ? json_incref(json_object_get(byid, from)) : NULL;
    if (!it->payer) {
      it->pair = 0;
      it->why = DTX__MK_MISSING;
      split(ex, it, R_PREPARE);
    }
  }
  json_decref(byid);
  free(ids);
}

/* Round 2: every transfer inserted already claimed (preparing, owned by
 * ex at epoch 1).  An id seen earlier in the batch is not sent: it is the
 * same request again (or a conflict), judged after its twin ran. */
static void round_insert(dtx__exec_t *ex, item_t *its, size_t n,
                         dtx__kit_op_t *ops) {
  json_t *ids = json_object();
  size_t i, k = 0;
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    char gen[25];
    const char *id = it->req->id;
    if (it->lane != L_LOCK)
      continue;
    if (!id) {
      dtx__id_new(gen);
      id = gen;
    }
    snprintf(it->id, sizeof it->id, "%s", id);
    if (!ids || !(it->tx = dtx__tx_new(ex, it->req, it->id, 1))) {
      finish_item(it, dtx__err(DTX_ENOMEM, "transfer %s: out of memory",
                               it->id), NULL);
      continue;
    }
    if (json_object_get(ids, it->id)) {
      json_decref(it->tx);
      it->tx = NULL;
      split(ex, it, R_EXISTING);
      continue;
    }
    json_object_set_new(ids, it->id, json_true());
    it->op = k;
    ops[k++] = (dtx__kit_op_t){.kind = DTX_BULK_INSERT,
                               .point = "transfer.submit",
                               .coll = DTX_TRANSFERS,
                               .doc = json_incref(it->tx)};
  }
  json_decref(ids);
  (void)dtx__kit_run(ex, ops, k);
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    int rc = ops[it->op].rc;
    if (rc == DTX_EDUPKEY) { /* the id exists: see what it holds */
      it->tried = it->tx;
      it->tx = NULL;
      split(ex, it, R_EXISTING);
    } else if (rc) { /* as submit fails alone: nothing to show */
      if (ops[it->op].detail)
        dtx__err(rc, "%s", ops[it->op].detail);
      finish_item(it, rc, NULL);
    }
  }
  dtx__kit_ops_clear(ops, k);
}

/* Appends the pair u (its filters and updates, stolen) to the round's
 * steps ops[k..]; returns the new count. */
static size_t add_pair(dtx__kit_op_t *ops, size_t k, const dtx__kit_upd_t *u) {
  for (int j = 0; j < 2; j++)
    ops[k++] = (dtx__kit_op_t){.kind = DTX_BULK_UPDATE_ONE,
                               .point = u[j].point,
                               .coll = u[j].coll,
                               .filter = u[j].filter,
                               .update = u[j].update};
  return k;
}

/* The pair rounds' common end for transfer it, whose steps are ops[it->op]
 * and the next: a step that failed for good ends it (as alone), then the
 * pair's done point; 1 when it goes on (in the lockstep or split). */
static int pair_back(dtx__exec_t *ex, item_t *it, const dtx__kit_op_t *ops,
                     const char *done) {
  const dtx__kit_op_t *o = &ops[it->op];
  for (int j = 0; j < 2; j++)
    if (o[j].rc) {
      fail_item(ex, it, o[j].rc, o[j].detail);
      return 0;
    }
  int rc = dtx__kit_point(done, NULL);
  if (rc) {
    fail_item(ex, it, rc, NULL);
    return 0;
  }
  return 1;
}

/* Round 3: each payer's debit with its payee's mark.  A payer as read in
 * round 1 that decides the debit without a write (a limit the amount
 * passes, a bad limit) splits before the round; a debit or mark that
 * matched nothing (funds; a payee's ceiling) splits after it. */
static void round_pair(dtx__exec_t *ex, item_t *its, size_t n,
                       dtx__kit_op_t *ops) {
  size_t i, k = 0;
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    dtx__kit_upd_t u[2];
    if (it->lane != L_LOCK)
      continue;
    if (!dtx__tx_pair_ops(it->tx, it->payer, u, &it->min, &it->why)) {
      it->pair = 0;
      split(ex, it, R_PREPARE);
      continue;
    }
    it->pair = 1;
    it->op = k;
    k = add_pair(ops, k, u);
  }
  (void)dtx__kit_run(ex, ops, k);
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    if (!pair_back(ex, it, ops, "transfer.debit_mark.done")) {
      json_decref(it->min);
      it->min = NULL;
      continue;
    }
    it->debited = ops[it->op].matched;
    it->marked = ops[it->op + 1].matched;
    if (!it->debited || !it->marked) {
      split(ex, it, R_PREPARE);
    } else {
      json_decref(it->min);
      it->min = NULL;
    }
  }
  dtx__kit_ops_clear(ops, k);
}

/* Rounds 4 and 6: one fenced or plain move of every transfer in the
 * lockstep.  A move that matched nothing (fenced off by recovery or a
 * cancel; finished by someone else) splits: the sequential drive rereads
 * it.  With last, the moved transfers are done. */
static void round_move(dtx__exec_t *ex, item_t *its, size_t n,
                       const dtx__move_t *proto, int last,
                       const json_t **docs, dtx__move_t *m, json_t **outs,
                       int *rcs, char **details, size_t *at) {
  size_t i, k = 0;
  for (i = 0; i < n; i++) {
    if (its[i].lane != L_LOCK)
      continue;
    docs[k] = its[i].tx;
    m[k] = *proto;
    at[k++] = i;
  }
  (void)dtx__kit_move_many(ex, TX, docs, m, k, outs, rcs, details);
  for (size_t j = 0; j < k; j++) {
    item_t *it = &its[at[j]];
    if (rcs[j] == 0) {
      json_decref(it->tx);
      it->tx = outs[j];
      if (last) {
        dtx__err_clear();
        finish_item(it, 0, json_incref(it->tx));
      }
    } else if (rcs[j] == DTX_ENOMATCH) {
      split(ex, it, R_REREAD);
    } else {
      fail_item(ex, it, rcs[j], details[j]);
    }
    free(details[j]);
    details[j] = NULL;
  }
}

/* Round 5: each payer's debit marker cleared with its payee's credit. */
static void round_clear_credit(dtx__exec_t *ex, item_t *its, size_t n,
                               dtx__kit_op_t *ops) {
  size_t i, k = 0;
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    dtx__kit_upd_t u[2];
    if (it->lane != L_LOCK)
      continue;
    dtx__tx_clear_credit_ops(it->tx, u, &it->cinc, &it->binc);
    it->op = k;
    k = add_pair(ops, k, u);
  }
  (void)dtx__kit_run(ex, ops, k);
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    if (it->lane != L_LOCK)
      continue;
    if (pair_back(ex, it, ops, "transfer.clear_credit.done")) {
      it->cleared = ops[it->op].matched;
      it->credited = ops[it->op + 1].matched;
      if (!it->cleared || !it->credited) {
        split(ex, it, R_FINISH); /* keeps cinc, binc for finish_rest */
        continue;
      }
    }
    json_decref(it->cinc);
    json_decref(it->binc);
    it->cinc = it->binc = NULL;
  }
  dtx__kit_ops_clear(ops, k);
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
static void keep_lease(dtx__exec_t *ex, item_t *it, int64_t *since) {
  json_t *out = NULL;
  if (*since < 0 || dtx__mono_ms() - *since < ex->lease_ms / 4 ||
      it->lane == L_DONE || !it->tx ||
      !dtx__state_is(it->tx, DTX_ST_PREPARING))
    return;
  if (dtx__kit_renew(ex, TX, it->tx, &out) == 0 && out) {
    json_decref(it->tx);
    it->tx = out;
  } else {
    json_decref(out);
    dtx__err_clear();
  }
}

static void keep_leases(dtx__exec_t *ex, item_t *its, size_t n,
                        int64_t *since) {
  int64_t at = dtx__mono_ms();
  if (*since < 0 || at - *since < ex->lease_ms / 4)
    return;
  for (size_t i = 0; i < n; i++)
    keep_lease(ex, &its[i], since);
  *since = at; /* renewed from here on */
}

/* ---- the transfers that left the lockstep ---------------------------------- */

/* Goes on alone from where the split left it, as the sequential drive
 * would have from there. */
static void resume(dtx__exec_t *ex, item_t *it) {
  json_t *next = NULL, *out = NULL;
  int rc = 0, mine = 0;
  switch (it->resume) {
  case R_EXISTING:
    if ((rc = dtx__tx_existing(ex, it->req, it->id, it->tried, 1, &mine,
                               &next))) {
      finish_item(it, rc, NULL); /* as submit: nothing to show */
      return;
    }
    rc = dtx__tx_drive_ex(ex, next, 1, mine, it->payer, &out);
    json_decref(next);
    finish_item(it, rc, out);
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
  case R_REREAD:
    break;
  }
  if (rc == DTX_ENOMATCH) /* as the drive takes it: moved on, reread */
    rc = 0;
  if (rc == 0 && !next)
    rc = dtx__kit_get(ex, DTX_TRANSFERS, it->id, &next);
  if (rc) {
    json_decref(next);
    fail_item(ex, it, rc, NULL);
    return;
  }
  rc = dtx__tx_drive_ex(ex, next, 1, 0, NULL, &out);
  json_decref(next);
  finish_item(it, rc, out);
}

/* Drops what the rounds left on it. */
static void item_clear(item_t *it) {
  json_decref(it->tx);
  json_decref(it->tried);
  json_decref(it->payer);
  json_decref(it->min);
  json_decref(it->cinc);
  json_decref(it->binc);
}

/* ---- the public call ---------------------------------------------------------- */

/* Runs the rounds over its[0..n): submitted (claimed 0: from round 1,
 * requests) or claimed by a worker (claimed 1: from the payers' read,
 * each it->tx a transfer this executor holds in preparing). */
static void run(dtx__exec_t *ex, item_t *its, size_t n, int claimed) {
  /* Submitted transfers are claimed by their insert, moments before the
   * commit: only a worker's batch keeps its leases (keep_leases). */
  int64_t since = claimed ? dtx__mono_ms() : -1;
  dtx__kit_op_t *ops = calloc(2 * n, sizeof *ops);
  const json_t **docs = calloc(n, sizeof *docs);
  dtx__move_t *m = calloc(n, sizeof *m);
  json_t **outs = calloc(n, sizeof *outs);
  int *rcs = calloc(n, sizeof *rcs);
  char **details = calloc(n, sizeof *details);
  size_t *at = calloc(n, sizeof *at), i;
  if (!ops || !docs || !m || !outs || !rcs || !details || !at) {
    for (i = 0; i < n; i++)
      finish_item(&its[i], dtx__err(DTX_ENOMEM, "a batch of %zu transfers: "
                                    "out of memory", n), NULL);
  } else {
    const dtx__move_t commit = {.point = "transfer.commit",
                                .from = DTX_ST_PREPARING,
                                .to = DTX_ST_COMMITTED,
                                .flags = DTX__FENCED};
    const dtx__move_t fin = {.point = "transfer.finish",
                             .from = DTX_ST_COMMITTED,
                             .to = DTX_ST_SUCCEEDED};
    if (claimed) {
      round_payers(ex, its, n);
    } else {
      round_accounts(ex, its, n);
      round_insert(ex, its, n, ops);
    }
    round_pair(ex, its, n, ops);
    keep_leases(ex, its, n, &since);
    round_move(ex, its, n, &commit, 0, docs, m, outs, rcs, details, at);
    round_clear_credit(ex, its, n, ops);
    round_move(ex, its, n, &fin, 1, docs, m, outs, rcs, details, at);
    /* Those that left, in input order; an existing id last (B3). */
    for (int pass = 0; pass < 2; pass++)
      for (i = 0; i < n; i++)
        if (its[i].lane == L_SPLIT &&
            (its[i].resume == R_EXISTING) == (pass == 1)) {
          keep_leases(ex, its, n, &since); /* those still to go */
          resume(ex, &its[i]);
        }
  }
  free(ops);
  free(docs);
  free(m);
  free(outs);
  free(rcs);
  free(details);
  free(at);
}

int dtx_transfer_execute_many(dtx_store_t *st, const dtx_transfer_req_t *reqs,
                              size_t n, const dtx_exec_opts_t *opts,
                              dtx_transfer_result_t *results) {
  dtx__exec_t ex;
  dtx__call_t c;
  size_t i;
  void *mem;
  int rc;
  if (!dtx__many_begin(st, reqs, "reqs", n, opts, results,
                       sizeof *results, "dtx_transfer_execute_many", sizeof(item_t), &ex,
                       &c, &mem, &rc))
    return rc;
  item_t *its = mem;
  for (i = 0; i < n; i++) {
    its[i].req = &reqs[i];
    its[i].res = &results[i];
  }
  run(&ex, its, n, 0);
  for (i = 0; i < n; i++)
    item_clear(&its[i]);
  free(its);
  return dtx__call_end(&c, dtx__many_summary(results, n, sizeof *results,
                                             "transfers"));
}

void dtx_transfer_results_clear(dtx_transfer_result_t *results, size_t n) {
  dtx__many_clear(results, n, sizeof *results);
}

/* The worker's batch (transfer.c, tx_drive_many): transfers it claimed
 * together, driven in lockstep from the payers' read on; one that is not
 * (or no longer) this executor's preparing transfer goes on alone at once,
 * as the one-at-a-time worker's drive would take it. */
void dtx__tx_drive_claimed_many(dtx__exec_t *ex, const json_t *const *docs,
                                size_t n, json_t **outs, int *rcs,
                                char **details) {
  dtx_transfer_result_t *res = calloc(n ? n : 1, sizeof *res);
  item_t *its = calloc(n ? n : 1, sizeof *its);
  size_t i;
  if (!res || !its) {
    for (i = 0; i < n; i++) {
      outs[i] = json_incref((json_t *)docs[i]);
      rcs[i] = dtx__err(DTX_ENOMEM, "driving %zu transfers", n);
      details[i] = NULL;
    }
    free(res);
    free(its);
    return;
  }
  for (i = 0; i < n; i++) {
    item_t *it = &its[i];
    it->res = &res[i];
    it->tx = json_incref((json_t *)docs[i]);
    const char *id = dtx__str(docs[i], "_id");
    snprintf(it->id, sizeof it->id, "%s", id ? id : "");
    if (!dtx__state_is(docs[i], DTX_ST_PREPARING) ||
        !dtx__str_is(docs[i], "owner", ex->owner)) {
      json_t *out = NULL;
      int rc = dtx__tx_drive(ex, docs[i], 1, &out);
      finish_item(it, rc, out);
    }
  }
  run(ex, its, n, 1);
  for (i = 0; i < n; i++) {
    item_clear(&its[i]);
    outs[i] = res[i].tx;
    rcs[i] = res[i].rc;
    details[i] = res[i].detail; /* handed over */
  }
  free(res);
  free(its);
}
