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
 * The kit's batch driver runs the rounds (kit/many.c): each pass takes
 * the requests its key scheduler lets go -- those heading the queue of
 * each account they name and of their id (keys()) -- through rounds 1
 * and 2 below (read, insert); again() decides whether another pass runs.
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
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/err.h"

/* The result type is laid out as the kit's batched results (kit.h). */
DTX__MANY_RES_CHECK(dtx_ledger_result_t, entry);

typedef struct item {
  dtx__bitem_t b; /* the kit's: lane */
  const dtx_ledger_post_req_t *req;
  const char *id; /* req->id, or gen */
  char gen[25];
  dtx__lg_learned_t *learned; /* a member: per leg, for the memo */
  json_t *doc;                /* a member: the entry it inserts */
} item_t;

/* What a pass shares between its rounds. */
typedef struct ctx {
  json_t *found, *accts; /* step 3's reads */
  size_t won, lost;      /* step 7: entries in, seqIds lost */
  dtx__contend_t ct;
  int set_up;            /* the ledger's collections installed */
} ctx_t;

/* Ends it with rc (this thread's detail) and the entry (stolen). */
static void end(dtx__batch_t *b, item_t *it, int rc, json_t *entry) {
  if (rc) { /* as dtx_ledger_post: no entry with an error */
    json_decref(entry);
    entry = NULL;
  }
  dtx__batch_end(b, it, rc, entry);
}

/* Step 1: the request checked as post() checks it. */
static int init(dtx__batch_t *b, void *p, size_t i) {
  item_t *it = p;
  int rc;
  it->req = &((const dtx_ledger_post_req_t *)b->reqs)[i];
  it->id = it->req->id;
  if (!it->id) {
    dtx__id_new(it->gen);
    it->id = it->gen;
  }
  dtx__err_clear();
  if ((rc = dtx__lg_check_req(it->req)))
    end(b, it, rc, NULL);
  return 0;
}

/* P1, P2: a request's keys, its accounts and the id it asks for. */
static int keys(void *p, dtx__batch_keys_t *k) {
  const item_t *it = p;
  int rc = 0;
  for (size_t j = 0; rc == 0 && j < it->req->nlegs; j++)
    rc = dtx__batch_key(k, 'a', it->req->legs[j].account);
  if (rc == 0 && it->req->id)
    rc = dtx__batch_key(k, 'i', it->id);
  /* Two requests with one ref go in array order: the later one is the
   * duplicate when refs are unique (meta.c). */
  if (rc == 0 && it->req->ref)
    rc = dtx__batch_key(k, 'r', it->req->ref);
  return rc;
}

/* ---- step 3: what the round reads ------------------------------------------------ */

/* For the members: the entries under the ids they ask for, as found (id
 * -> entry; generated ids are new, so not asked), and every account they
 * name, as accts (id -> account).  Only the members: a request that
 * waits is read in its own round, so a batch that takes a round per entry
 * (a hot account) reads each request once, not once per round.  After
 * the reads, the first time a member will write: the ledger set up (as
 * dtx_ledger_post reads first, so a batch naming only unknown accounts
 * installs nothing); a failure of either ends every request not ended,
 * as alone. */
static void round_read(dtx__batch_t *b) {
  ctx_t *cx = b->ctx;
  json_t *ids = json_array(), *acc = json_array(), *docs = NULL, *d;
  size_t i, j;
  int rc = ids && acc ? 0 : DTX_ENOMEM;
  dtx__err_clear();
  for (i = 0; rc == 0 && i < b->k; i++) {
    const item_t *it = dtx__batch_item(b, b->at[i]);
    if (it->req->id && json_array_append_new(ids, json_string(it->id)))
      rc = DTX_ENOMEM;
    for (j = 0; rc == 0 && j < it->req->nlegs; j++) /* distinct (P1) */
      if (json_array_append_new(acc, json_string(it->req->legs[j].account)))
        rc = DTX_ENOMEM;
  }
  if (rc == 0 && !(cx->found = json_object()))
    rc = DTX_ENOMEM;
  if (rc == 0 && json_array_size(ids)) {
    json_t *f = json_pack("{s:{s:O}}", "_id", "$in", ids);
    rc = f ? dtx__kit_find(b->ex, DTX_LEDGER_ENTRIES, f, NULL, &docs)
           : DTX_ENOMEM;
    json_decref(f);
    json_array_foreach(docs, i, d) {
      if (dtx__str(d, "_id"))
        json_object_set(cx->found, dtx__str(d, "_id"), d);
    }
    json_decref(docs);
  }
  json_decref(ids);
  if (rc == 0) {
    rc = dtx__lg_accounts_find(b->ex, acc, &cx->accts);
    acc = NULL; /* stolen */
  }
  json_decref(acc);
  int writes = 0;
  for (i = 0; rc == 0 && !cx->set_up && !writes && i < b->k; i++) {
    const item_t *it = dtx__batch_item(b, b->at[i]);
    writes = !(it->req->id && json_object_get(cx->found, it->id)) &&
             dtx__lg_accounts_missing(it->req, cx->accts) == 0;
  }
  dtx__err_clear(); /* dtx__lg_accounts_missing's: insert_op says it */
  if (writes && (rc = dtx__lg_setup(b->ex->st)) == 0)
    cx->set_up = 1;
  if (rc) /* a read or the set-up failed for good: as alone */
    dtx__batch_end_rest(b, rc);
}

/* ---- steps 4 to 7: derive, insert, judge ----------------------------------------- */

/* Drops what a member held for its round. */
static void unhold(void *p) {
  item_t *it = p;
  free(it->learned);
  it->learned = NULL;
  json_decref(it->doc);
  it->doc = NULL;
}

/* A member whose id exists, or naming an account that does not, ends as a
 * post ends it, without a write; the others are derived against accts and
 * inserted, all in one round. */
static int insert_op(dtx__batch_t *b, void *p, dtx__kit_op_t *ops) {
  ctx_t *cx = b->ctx;
  item_t *it = p;
  const json_t *e = it->req->id ? json_object_get(cx->found, it->id) : NULL;
  json_t *out = NULL;
  dtx__err_clear();
  if (e) { /* this request again, or another under its id */
    int r = dtx__lg_existing(e, it->req, NULL, &out);
    end(b, it, r, out);
    return 0;
  }
  int rc = dtx__lg_accounts_missing(it->req, cx->accts);
  if (rc == 0 && !(it->learned = calloc(it->req->nlegs, sizeof *it->learned)))
    rc = dtx__err(DTX_ENOMEM, "posting %zu ledger entries", b->k);
  if (rc == 0) {
    dtx__err_clear();
    rc = dtx__lg_build(b->ex, it->req, it->id, NULL, cx->accts, it->learned,
                       &it->doc);
  }
  if (rc) { /* refused (funds, int64) or unreadable: alone, no write */
    unhold(it);
    end(b, it, rc, NULL);
    return 0;
  }
  ops[0] = (dtx__kit_op_t){.kind = DTX_BULK_INSERT,
                           .point = "ledger.post",
                           .coll = DTX_LEDGER_ENTRIES,
                           .doc = json_incref(it->doc)};
  return 1;
}

static void insert_back(dtx__batch_t *b, void *p, dtx__kit_op_t *o) {
  ctx_t *cx = b->ctx;
  item_t *it = p;
  json_t *out = NULL;
  int rc = o->rc;
  if (rc == 0) {
    dtx__lg_posted(b->ex, it->req, it->doc, it->learned);
    dtx__err_clear();
    end(b, it, 0, json_incref(it->doc));
    cx->won++;
  } else if (rc == DTX_EDUPKEY) {
    /* As post(): our id (another request's, or our own insert whose
     * reply was lost), else a seqId -- derive again next round. */
    dtx__err_clear();
    rc = dtx__lg_recorded(b->ex, it->id, it->req, NULL, &out);
    if (rc == DTX_ENOTFOUND)
      rc = dtx__lg_ref_taken(b->ex, it->req, it->id);
    if (rc != DTX_ENOTFOUND)
      end(b, it, rc, out);
    else
      cx->lost++;
  } else {
    (void)dtx__err(rc, "%s", o->detail ? o->detail : dtx_strerror(rc));
    end(b, it, rc, NULL);
  }
  unhold(it);
}

/* After a pass: lost seqIds take the kit's contention backoff, once per
 * pass (a pass in which some entry went in made progress: the losers
 * start a fresh count, as each would alone); then the call's one budget
 * (P4): nothing waits between passes, so no retry loop would notice it
 * pass, and a hot batch (a pass per entry) ran on for n passes -- 1,000
 * entries for 1.5 s under a 10 ms budget. */
static int again(dtx__batch_t *b) {
  ctx_t *cx = b->ctx;
  int rc;
  json_decref(cx->found);
  json_decref(cx->accts);
  cx->found = cx->accts = NULL;
  if (cx->lost) {
    if (cx->won)
      cx->ct = (dtx__contend_t){0};
    rc = DTX_EDUPKEY;
    if (!dtx__kit_contend(&cx->ct, &rc, "ledger.post")) {
      dtx__batch_end_rest(b, rc);
      return 0;
    }
  }
  cx->won = cx->lost = 0;
  if (dtx__deadline_passed()) {
    dtx__batch_end_rest(b, dtx__err(DTX_EUNAVAILABLE,
                                    "ledger.post: gave up at the command's "
                                    "deadline (%lld ms) after %zu round%s; "
                                    "not posted",
                                    (long long)dtx__deadline_budget_ms(),
                                    b->pass + 1, b->pass ? "s" : ""));
    return 0;
  }
  dtx__err_clear();
  return 1;
}

/* ---- the call ------------------------------------------------------------------- */

static const dtx__round_t rounds[] = {
    {.all = round_read},
    {.build = insert_op, .width = 1, .back = insert_back},
    {0}};

static const dtx__batch_def_t def = {
    .noun = "entries", .reqs_name = "reqs", .isize = sizeof(item_t),
    .rounds = rounds, .init = init, .keys = keys, .again = again,
    .clear = unhold};

int dtx_ledger_post_many(dtx_store_t *st, const dtx_ledger_post_req_t *reqs,
                         size_t n, const dtx_exec_opts_t *opts,
                         dtx_ledger_result_t *results) {
  ctx_t cx = {0};
  int rc = dtx__many_run(&(dtx__many_t){
      .def = &def, .fn = __func__, .st = st, .reqs = reqs, .n = n,
      .opts = opts, .results = results, .rsize = sizeof *results,
      .ctx = &cx});
  json_decref(cx.found);
  json_decref(cx.accts);
  return rc;
}

void dtx_ledger_results_clear(dtx_ledger_result_t *results, size_t n) {
  dtx__many_clear(results, n, sizeof *results);
}
