/* many.c -- dtx_ledger_post_many: many ledger entries posted at once.  The
 * state machine is ledger.c's (its diagram and L1-L7 hold as they are);
 * this file only decides which entries' inserts go to the store together.
 *
 * The call runs in ROUNDS.  Each round is:
 *
 *   step  what                                          fault point
 *   1     (first round) every request checked, as
 *         post() checks it; an invalid one fails alone  --
 *   1b    (later rounds) the call's deadline passed:
 *         every unfinished request ends (P4)            --
 *   2     the round's members picked, in array order    --
 *   3     one find of the ids the members ask for, one
 *         of their accounts ({_id: {$in}} each)         --
 *   4     a member whose id exists, or naming an
 *         unknown account, ends as post() ends it       --
 *   5     each member's accounts' positions derived,
 *         its legs checked (refusals fail alone)        --
 *   6     ONE dtx__kit_run of the members' inserts      ledger.post (each)
 *   7     a DTX_EDUPKEY loser judged as post() judges   --
 *         it: its id (the entry, or DTX_ECONFLICT), or
 *         a lost seqId: dtx__kit_contend, next round
 *
 *   transition           function        fault point
 *   (insert entries)     round_insert()  ledger.post
 *
 * WHY NO CHAINS.  Two entries of one round on one account would each have
 * to derive from the other: the second's seqId n+2 and balance assume the
 * first's n+1 is there.  A bulk write promises no order among its
 * operations and each fails alone, so a failed (or reordered) first
 * insert would leave the second holding seqId n+2 derived from an entry
 * that is not there -- a gap (L2) and a balance check made against money
 * that never moved (L3).  So a request joins a round only when none of its
 * accounts, and not its id, is used by an EARLIER request of the call that
 * is still unfinished -- a member of this round or one waiting: a waiting
 * request keeps its accounts from later ones, so no later request takes a
 * seqId before it (array order).  The rest waits for the next round.
 *
 * Invariants (beyond ledger.c's L1-L7, which every insert keeps, being
 * post()'s own step):
 *  P1 The members of a round use pairwise distinct accounts and ids, so
 *     each account's position is derived once per round, from entries
 *     that were all there before the round's insert.
 *  P2 For every account, the requests that touch it end in array order
 *     (a member ends in its round; one waiting behind it goes later), so
 *     without concurrent posters the seqIds, balances and refusals are
 *     those of posting one at a time in array order.
 *  P3 A request ends exactly once, with what dtx_ledger_post gives it:
 *     refused before any write (invalid, unknown account, funds,
 *     overflow), the entry it inserted, or the entry already under its
 *     id (or DTX_ECONFLICT); a lost seqId only sends it to the next
 *     round.
 *  P4 The call's one deadline bounds the rounds: once it has passed, no
 *     round starts, and every request still waiting ends with
 *     DTX_EUNAVAILABLE, nothing recorded for it (as a post cut short);
 *     the requests of a round already sent keep their outcomes. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/err.h"

/* The result type begins as the kit's batched results (kit.h). */
_Static_assert(offsetof(dtx_ledger_result_t, rc) ==
                       offsetof(dtx__many_res_t, rc) &&
                   offsetof(dtx_ledger_result_t, detail) ==
                       offsetof(dtx__many_res_t, detail),
               "dtx_ledger_result_t begins {int rc; char *detail;}");

typedef struct item {
  const dtx_ledger_post_req_t *req;
  dtx_ledger_result_t *res;
  const char *id; /* req->id, or gen */
  char gen[25];
  int done;
  dtx__lg_learned_t *learned; /* a member: per leg, for the memo */
  json_t *doc;                /* a member: the entry it inserts */
} item_t;

/* Ends it with rc (this thread's detail) and the entry (stolen). */
static void end_item(item_t *it, int rc, json_t *entry) {
  const char *d = dtx_errdetail();
  it->res->rc = rc;
  it->res->detail = rc ? strdup(d && *d ? d : dtx_strerror(rc)) : NULL;
  if (rc) {
    json_decref(entry);
    entry = NULL;
  }
  it->res->entry = entry;
  it->done = 1;
}

/* Ends every unfinished request with rc (this thread's detail). */
static void end_rest(item_t *its, size_t n, int rc) {
  char *d = strdup(dtx_errdetail() ? dtx_errdetail() : "");
  for (size_t i = 0; i < n; i++)
    if (!its[i].done) {
      if (d && *d)
        (void)dtx__err(rc, "%s", d);
      end_item(&its[i], rc, NULL);
    }
  free(d);
}

/* ---- step 2: the round's members ----------------------------------------------- */

/* Is any of its accounts, or its id, in used (P1, P2)? */
static int is_blocked(const item_t *it, const json_t *used_accts,
                      const json_t *used_ids) {
  if (it->req->id && json_object_get(used_ids, it->id))
    return 1;
  for (size_t j = 0; j < it->req->nlegs; j++)
    if (json_object_get(used_accts, it->req->legs[j].account))
      return 1;
  return 0;
}

static int mark_used(const item_t *it, json_t *used_accts, json_t *used_ids) {
  int bad = it->req->id && json_object_set(used_ids, it->id, json_true());
  for (size_t j = 0; !bad && j < it->req->nlegs; j++)
    bad = json_object_set(used_accts, it->req->legs[j].account, json_true());
  return bad ? DTX_ENOMEM : 0;
}

/* Picks the round's members into at[] (their count is returned), in array
 * order: every unfinished request uses its accounts and id for the rest
 * of the round, as a member when no earlier one used any of them, else
 * waiting.  (The first unfinished request is always a member, so every
 * round ends at least one request or loses a race.) */
static size_t pick(item_t *its, size_t n, size_t *at, int *rc) {
  json_t *used_accts = json_object(), *used_ids = json_object();
  size_t k = 0;
  *rc = used_accts && used_ids ? 0 : DTX_ENOMEM;
  for (size_t i = 0; *rc == 0 && i < n; i++) {
    item_t *it = &its[i];
    if (it->done)
      continue;
    int blocked = is_blocked(it, used_accts, used_ids);
    *rc = mark_used(it, used_accts, used_ids);
    if (!blocked)
      at[k++] = i;
  }
  json_decref(used_accts);
  json_decref(used_ids);
  return *rc ? 0 : k;
}

/* ---- step 3: what the round reads ------------------------------------------------ */

/* For the members its[at[0..k)]: the entries under the ids they ask for,
 * as *found (id -> entry; generated ids are new, so not asked), and
 * every account they name, as *accts (id -> account).  Only the members:
 * a request that waits is read in its own round, so a batch that takes a
 * round per entry (a hot account) reads each request once, not once per
 * round. */
static int round_read(dtx__exec_t *ex, const item_t *its, const size_t *at,
                      size_t k, json_t **found, json_t **accts) {
  json_t *ids = json_array(), *acc = json_array(), *docs = NULL, *d;
  size_t i, j;
  int rc = ids && acc ? 0 : DTX_ENOMEM;
  *found = *accts = NULL;
  for (i = 0; rc == 0 && i < k; i++) {
    const item_t *it = &its[at[i]];
    if (it->req->id && json_array_append_new(ids, json_string(it->id)))
      rc = DTX_ENOMEM;
    for (j = 0; rc == 0 && j < it->req->nlegs; j++) /* distinct (P1) */
      if (json_array_append_new(acc, json_string(it->req->legs[j].account)))
        rc = DTX_ENOMEM;
  }
  if (rc == 0 && !(*found = json_object()))
    rc = DTX_ENOMEM;
  if (rc == 0 && json_array_size(ids)) {
    json_t *f = json_pack("{s:{s:O}}", "_id", "$in", ids);
    rc = f ? dtx__kit_find(ex, DTX_LEDGER_ENTRIES, f, NULL, &docs)
           : DTX_ENOMEM;
    json_decref(f);
    json_array_foreach(docs, i, d) {
      if (dtx__str(d, "_id"))
        json_object_set(*found, dtx__str(d, "_id"), d);
    }
    json_decref(docs);
  }
  json_decref(ids);
  if (rc == 0) {
    rc = dtx__lg_accounts_find(ex, acc, accts);
    acc = NULL; /* stolen */
  }
  json_decref(acc);
  if (rc) {
    json_decref(*found);
    *found = NULL;
  }
  return rc;
}

/* ---- steps 5 to 7: derive, insert, judge --------------------------------------- */

/* Drops what a member held for its round. */
static void unhold(item_t *it) {
  free(it->learned);
  it->learned = NULL;
  json_decref(it->doc);
  it->doc = NULL;
}

/* The round's members (its[at[0..k)]): one whose id exists, or naming an
 * account that does not, ends as a post ends it, without a write; the
 * others are derived against accts and inserted in one dtx__kit_run.
 * Returns how many lost a seqId to a concurrent poster (they stay
 * unfinished); *won: how many inserted their entry. */
static size_t round_insert(dtx__exec_t *ex, item_t *its, const size_t *at,
                           size_t k, const json_t *found, const json_t *accts,
                           size_t *won) {
  dtx__kit_op_t *ops = calloc(k ? k : 1, sizeof *ops);
  size_t *of = calloc(k ? k : 1, sizeof *of), nops = 0, lost = 0, j;
  *won = 0;
  for (j = 0; j < k; j++) {
    item_t *it = &its[at[j]];
    const json_t *e = it->req->id ? json_object_get(found, it->id) : NULL;
    if (e) { /* this request again, or another under its id */
      json_t *out = NULL;
      dtx__err_clear();
      int r = dtx__lg_existing(e, it->req, NULL, &out);
      end_item(it, r, out);
      continue;
    }
    dtx__err_clear();
    int missing = dtx__lg_accounts_missing(it->req, accts);
    if (missing) {
      end_item(it, missing, NULL);
      continue;
    }
    int rc = ops && of && (it->learned = calloc(it->req->nlegs,
                                                sizeof *it->learned))
                 ? 0
                 : dtx__err(DTX_ENOMEM, "posting %zu ledger entries", k);
    if (rc == 0) {
      dtx__err_clear();
      rc = dtx__lg_build(ex, it->req, it->id, NULL, accts, it->learned,
                         &it->doc);
    }
    if (rc) { /* refused (funds, int64) or unreadable: alone, no write */
      unhold(it);
      end_item(it, rc, NULL);
      continue;
    }
    ops[nops] = (dtx__kit_op_t){.kind = DTX_BULK_INSERT,
                                .point = "ledger.post",
                                .coll = DTX_LEDGER_ENTRIES,
                                .doc = json_incref(it->doc)};
    of[nops++] = at[j];
  }
  (void)dtx__kit_run(ex, ops, nops);
  for (j = 0; j < nops; j++) {
    item_t *it = &its[of[j]];
    int rc = ops[j].rc;
    json_t *out = NULL;
    if (rc == 0) {
      dtx__lg_posted(ex, it->req, it->doc, it->learned);
      dtx__err_clear();
      end_item(it, 0, json_incref(it->doc));
      ++*won;
    } else if (rc == DTX_EDUPKEY) {
      /* As post(): our id (another request's, or our own insert whose
       * reply was lost), else a seqId -- derive again next round. */
      dtx__err_clear();
      rc = dtx__lg_recorded(ex, it->id, it->req, NULL, &out);
      if (rc != DTX_ENOTFOUND)
        end_item(it, rc, out);
      else
        lost++;
    } else {
      (void)dtx__err(rc, "%s", ops[j].detail ? ops[j].detail
                                             : dtx_strerror(rc));
      end_item(it, rc, NULL);
    }
    unhold(it);
  }
  dtx__kit_ops_clear(ops, nops);
  free(ops);
  free(of);
  return lost;
}

/* ---- the call ------------------------------------------------------------------- */

static void run(dtx__exec_t *ex, item_t *its, size_t n) {
  size_t i, left = 0;
  int rc;
  for (i = 0; i < n; i++) { /* step 1 */
    dtx__err_clear();
    if ((rc = dtx__lg_check_req(its[i].req)))
      end_item(&its[i], rc, NULL);
    else
      left++;
  }
  dtx__err_clear();
  if (left && (rc = dtx__lg_setup(ex->st))) {
    end_rest(its, n, rc);
    return;
  }
  size_t *at = calloc(n, sizeof *at);
  if (!at) {
    end_rest(its, n, dtx__err(DTX_ENOMEM, "posting %zu ledger entries", n));
    return;
  }
  dtx__contend_t ct = {0};
  for (size_t round = 0; left; round++) {
    json_t *found = NULL, *accts = NULL;
    size_t k = 0, won = 0, lost = 0;
    /* ONE budget for the call (P4): nothing waits between rounds, so
     * no retry loop would notice it pass, and a hot batch (a round per
     * entry) ran on for n rounds -- 1,000 entries for 1.5 s under a 10
     * ms budget. */
    if (round && dtx__deadline_passed()) {
      end_rest(its, n, dtx__err(DTX_EUNAVAILABLE,
                                "ledger.post: gave up at the command's "
                                "deadline (%lld ms) after %zu round%s; not "
                                "posted",
                                (long long)dtx__deadline_budget_ms(), round,
                                round == 1 ? "" : "s"));
      break;
    }
    dtx__err_clear();
    k = pick(its, n, at, &rc);
    if (rc == 0)
      rc = round_read(ex, its, at, k, &found, &accts);
    if (rc == 0)
      lost = round_insert(ex, its, at, k, found, accts, &won);
    json_decref(found);
    json_decref(accts);
    if (rc) { /* a read failed for good: nothing known, as alone */
      end_rest(its, n, rc);
      break;
    }
    for (left = 0, i = 0; i < n; i++)
      left += !its[i].done;
    if (!lost)
      continue;
    /* Lost seqIds: the kit's contention backoff, once per round.  A round
     * in which some entry went in made progress: the losers start a fresh
     * count, as each would alone. */
    if (won)
      ct = (dtx__contend_t){0};
    rc = DTX_EDUPKEY;
    if (!dtx__kit_contend(&ct, &rc, "ledger.post")) {
      end_rest(its, n, rc);
      break;
    }
  }
  free(at);
}

int dtx_ledger_post_many(dtx_store_t *st, const dtx_ledger_post_req_t *reqs,
                         size_t n, const dtx_exec_opts_t *opts,
                         dtx_ledger_result_t *results) {
  dtx__exec_t ex;
  dtx__call_t c;
  size_t i;
  if (results)
    memset(results, 0, n * sizeof *results);
  if (!st || !reqs || !results)
    return dtx__many_refuse(results, n, sizeof *results,
                            "dtx_ledger_post_many: %s is NULL",
                            !st ? "st" : !reqs ? "reqs" : "results");
  if (n == 0) {
    dtx__err_clear();
    return 0;
  }
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  item_t *its = calloc(n, sizeof *its);
  if (!its) {
    for (i = 0; i < n; i++)
      results[i].rc = DTX_ENOMEM;
    return dtx__call_end(&c, DTX_ENOMEM);
  }
  for (i = 0; i < n; i++) {
    its[i].req = &reqs[i];
    its[i].res = &results[i];
    its[i].id = reqs[i].id;
    if (!its[i].id) {
      dtx__id_new(its[i].gen);
      its[i].id = its[i].gen;
    }
  }
  run(&ex, its, n);
  free(its);
  return dtx__call_end(&c, dtx__many_summary(results, n, sizeof *results,
                                             "entries"));
}

void dtx_ledger_results_clear(dtx_ledger_result_t *results, size_t n) {
  for (size_t i = 0; results && i < n; i++) {
    free(results[i].detail);
    json_decref(results[i].entry);
    results[i] = (dtx_ledger_result_t){0};
  }
}
