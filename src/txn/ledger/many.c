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

/* The result type is laid out as the kit's batched results (kit.h). */
DTX__MANY_RES_CHECK(dtx_ledger_result_t, entry);

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
  if (rc) { /* as dtx_ledger_post: no entry with an error */
    json_decref(entry);
    entry = NULL;
  }
  dtx__many_set(it->res, rc, entry);
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

/* A request is a member exactly when no earlier unfinished request uses
 * one of its accounts or its id (P1, P2): when it heads every LANE it is
 * in -- the unfinished requests using one account, or asking for one id,
 * in array order.  So a round looks only at the requests that may just
 * have come to the head of their lanes (the members of the round before
 * that lost a race, and the next in each lane a member finished), never
 * at every waiting one: a hot batch (a round per entry) used to scan all
 * n requests per round, n^2 in all -- 16,000 entries on one account took
 * 12.3 s, against 3.0 s posted one at a time. */
typedef struct lane {
  size_t *q;         /* request indexes, ascending (in sched_t's qbuf) */
  size_t n, head;    /* q[head]: the first one not finished */
} lane_t;

typedef struct sched {
  lane_t *lanes;
  size_t nlanes;
  size_t *in, *off; /* request i's lanes: in[off[i] .. off[i + 1]) */
  size_t *qbuf;     /* every lane's q, one after the other */
  size_t *cand;     /* may head all its lanes (each once: mark) */
  size_t ncand;
  char *mark;
} sched_t;

static void sched_free(sched_t *s) {
  free(s->lanes);
  free(s->in);
  free(s->off);
  free(s->qbuf);
  free(s->cand);
  free(s->mark);
}

static void add_cand(sched_t *s, size_t i) {
  if (!s->mark[i]) {
    s->mark[i] = 1;
    s->cand[s->ncand++] = i;
  }
}

/* The lane of key kind + name ("a" + account, "i" + id) into in[*pos],
 * made on first use, and counted. */
static int slot_of(sched_t *s, json_t *keys, char kind, const char *name,
                   size_t *pos) {
  char key[136];
  snprintf(key, sizeof key, "%c%s", kind, name); /* names <= 128 */
  json_t *slot = json_object_get(keys, key);
  size_t at = slot ? (size_t)json_integer_value(slot) : s->nlanes;
  if (!slot) {
    if (json_object_set_new(keys, key, json_integer((json_int_t)at)))
      return DTX_ENOMEM;
    s->nlanes++;
  }
  s->lanes[at].n++;
  s->in[(*pos)++] = at;
  return 0;
}

/* The lanes of the unfinished requests (the invalid ones ended in step
 * 1 use nothing); every request then heading all its lanes is a
 * candidate.  Two passes: the lanes and their sizes, then their
 * requests, in one buffer (a lane per account and id of a big batch
 * would otherwise be as many small allocations). */
static int sched_init(sched_t *s, const item_t *its, size_t n) {
  size_t total = 0, pos = 0, i, j;
  memset(s, 0, sizeof *s);
  for (i = 0; i < n; i++)
    if (!its[i].done)
      total += its[i].req->nlegs + (its[i].req->id != NULL);
  json_t *keys = json_object();
  s->lanes = calloc(total + 1, sizeof *s->lanes);
  s->in = malloc((total + 1) * sizeof *s->in);
  s->off = malloc((n + 1) * sizeof *s->off);
  s->qbuf = malloc((total + 1) * sizeof *s->qbuf);
  s->cand = malloc((n + 1) * sizeof *s->cand);
  s->mark = calloc(n + 1, 1);
  int rc = keys && s->lanes && s->in && s->off && s->qbuf && s->cand &&
                   s->mark
               ? 0
               : DTX_ENOMEM;
  for (i = 0; rc == 0 && i < n; i++) {
    s->off[i] = pos;
    if (its[i].done)
      continue;
    const dtx_ledger_post_req_t *r = its[i].req;
    for (j = 0; rc == 0 && j < r->nlegs; j++)
      rc = slot_of(s, keys, 'a', r->legs[j].account, &pos);
    if (rc == 0 && r->id)
      rc = slot_of(s, keys, 'i', its[i].id, &pos);
  }
  json_decref(keys);
  if (rc)
    return rc;
  s->off[n] = pos;
  for (i = 0, pos = 0; i < s->nlanes; i++) { /* carve, then fill */
    s->lanes[i].q = s->qbuf + pos;
    pos += s->lanes[i].n;
    s->lanes[i].n = 0;
  }
  for (i = 0; i < n; i++)
    for (j = s->off[i]; j < s->off[i + 1]; j++) {
      lane_t *l = &s->lanes[s->in[j]];
      l->q[l->n++] = i;
    }
  for (i = 0; i < n; i++) { /* heads of all its lanes, all heads at 0 */
    int head = !its[i].done;
    for (j = s->off[i]; head && j < s->off[i + 1]; j++)
      head = s->lanes[s->in[j]].q[0] == i;
    if (head)
      add_cand(s, i);
  }
  return 0;
}

/* Does request i head every lane it is in?  (Heads move past finished
 * requests here.) */
static int heads_all(sched_t *s, const item_t *its, size_t i) {
  for (size_t j = s->off[i]; j < s->off[i + 1]; j++) {
    lane_t *l = &s->lanes[s->in[j]];
    while (l->head < l->n && its[l->q[l->head]].done)
      l->head++;
    if (l->head >= l->n || l->q[l->head] != i)
      return 0;
  }
  return 1;
}

static int by_index(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* The round's members into at[], in array order (their count is
 * returned): the candidates heading all their lanes.  The first
 * unfinished request always does, so every round ends one request or
 * loses a race. */
static size_t pick(sched_t *s, const item_t *its, size_t *at) {
  size_t k = 0;
  qsort(s->cand, s->ncand, sizeof *s->cand, by_index);
  for (size_t c = 0; c < s->ncand; c++) {
    size_t i = s->cand[c];
    s->mark[i] = 0;
    if (!its[i].done && heads_all(s, its, i))
      at[k++] = i;
  }
  s->ncand = 0;
  return k;
}

/* After the round of members at[0..k): one that lost a race goes again;
 * for one that ended, the next request of each of its lanes may now head
 * them all.  Returns how many ended. */
static size_t sched_next(sched_t *s, const item_t *its, const size_t *at,
                         size_t k) {
  size_t ended = 0;
  for (size_t m = 0; m < k; m++) {
    size_t i = at[m];
    if (!its[i].done) {
      add_cand(s, i);
      continue;
    }
    ended++;
    for (size_t j = s->off[i]; j < s->off[i + 1]; j++) {
      lane_t *l = &s->lanes[s->in[j]];
      while (l->head < l->n && its[l->q[l->head]].done)
        l->head++;
      if (l->head < l->n)
        add_cand(s, l->q[l->head]);
    }
  }
  return ended;
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
  sched_t sc;
  if (!at || sched_init(&sc, its, n)) {
    end_rest(its, n, dtx__err(DTX_ENOMEM, "posting %zu ledger entries", n));
    if (at)
      sched_free(&sc);
    free(at);
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
    k = pick(&sc, its, at);
    rc = k ? 0 : dtx__err(DTX_EBACKEND, "posting ledger entries: no "
                          "request could go (a bug: the first always can)");
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
    left -= sched_next(&sc, its, at, k);
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
  sched_free(&sc);
  free(at);
}

int dtx_ledger_post_many(dtx_store_t *st, const dtx_ledger_post_req_t *reqs,
                         size_t n, const dtx_exec_opts_t *opts,
                         dtx_ledger_result_t *results) {
  dtx__exec_t ex;
  dtx__call_t c;
  size_t i;
  void *mem;
  int rc;
  if (!dtx__many_begin(st, reqs, "reqs", n, opts, results,
                       sizeof *results, "dtx_ledger_post_many", sizeof(item_t), &ex,
                       &c, &mem, &rc))
    return rc;
  item_t *its = mem;
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
  dtx__many_clear(results, n, sizeof *results);
}
