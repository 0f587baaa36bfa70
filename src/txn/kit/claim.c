/* claim.c -- the kit's claims: claim-next (one item, one
 * find_one_and_update) and claim-many (up to N items in one round: one
 * find, then one bulk write of by-_id claims).  kit.h says what each is
 * for; step.c holds the step engine both use, move.c the own-move check.
 *
 * A claim-many round, and why it is safe:
 *
 *   find {due} sorted, limit N  -->  ids d1..dk with their epochs e1..ek
 *   bulk: for each di, ONE find_one_and_update
 *         {due, _id: di, epoch: ei} -> {state: to, owner, lease_until,
 *                                       updated, epoch: ei + 1}
 *         (each reaching the claim's fault point as it joins)
 *   won:  the ones that matched; lost: dropped (another executor got
 *         there first, or the item stopped being due)
 *
 * C1 An item is claimed by at most one executor per epoch: each claim is
 *    one compare-and-set on the due filter (the state among it) and the
 *    epoch the find saw, and it bumps the epoch, so a second claim of the
 *    same find's view matches nothing.
 * C2 A claim still requires the whole due filter at the moment it
 *    applies, not only the state: an item whose lease was renewed after
 *    the find (a takeover-next's due filter tests lease_until) is not
 *    taken.
 * C3 A claim whose reply was lost (an injected lost reply, a transient
 *    error after the write) is recognised on the retry: the item is in
 *    state `to`, owned by this executor, at the epoch after the one the
 *    find saw -- only this claim makes that -- and it is returned as won.
 *    Otherwise the item would stay claimed until its lease lapses.
 * C4 Nothing is claimed that is not returned, except a claim whose
 *    outcome stayed unknown past the retry policy: its lease lapses and
 *    the pattern's recovery takes it over, as after a crash.
 *
 * Order: an executor alone claims strictly in sort order.  Executors that
 * find the same head race for it; one that lost every item it found looks
 * again at SPREAD times as many and picks at random among them, so
 * contenders spread out instead of meeting on the same items again.  A
 * claim whose items are alike (c->spread: transfers, where the sort only
 * makes a round read its batch and not the backlog) picks so from its
 * first round on: the race it would lose is not run at all. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/kit/kit.h"
#include "txn/kit/kit_int.h"
#include "util/err.h"

/* ---- claim-next ------------------------------------------------------------- */

int dtx__kit_claim_next(dtx__exec_t *ex, const dtx__kind_t *k,
                        const dtx__claim_t *c, json_t **out) {
  /* Many executors race for the same head of the queue: one that lost it
   * for the store's whole retry window (DTX_EBUSY) contends again, with
   * the kit's randomised backoff, inside the command's deadline. */
  dtx__contend_t ct = {0};
  int unsure = 0, rc; /* sticky: any attempt may have landed unseen */
  do {
    dtx__kit_op_t o = {.kind = DTX_BULK_FIND_ONE_AND_UPDATE,
                       .point = c->point,
                       .coll = k->coll,
                       .filter = json_deep_copy(c->due),
                       .update = dtx__kit_move_update(ex, k, c->to, 1, NULL),
                       .fam = {.return_new = 1, .sort = c->sort}};
    if (o.update && k->on_move &&
        k->on_move(NULL, c->point, NULL, c->to, 1, o.update)) {
      json_decref(o.update);
      o.update = NULL; /* the step is then DTX_ENOMEM */
    }
    rc = dtx__kit_step(ex, &o, out);
    unsure |= o.unsure;
  } while (rc == DTX_EBUSY && dtx__kit_contend(&ct, &rc, "claiming"));
  if (rc == 0)
    dtx__kit_claim_check(ex, k, c, *out, 1);
  if (rc != DTX_ENOMATCH || !unsure)
    return rc;
  /* The claim may have landed before its reply was lost, on an item the
   * retry no longer sees as due: this executor's own claim, in state `to`
   * under its name with a live lease, is the one it made (an executor
   * claims one item at a time). */
  json_t *mine = dtx__pack("{s:s,s:s,s:{s:I}}", k->state, c->to, "owner",
                           ex->owner, "lease_until", "$gt",
                           (json_int_t)dtx__now_ms());
  json_t *newest = dtx__pack("{s:i}", "updated", -1), *found = NULL;
  if (mine && newest &&
      dtx__kit_find(ex, k->coll, mine, newest, &found) == 0 &&
      json_array_size(found) > 0) {
    *out = json_incref(json_array_get(found, 0));
    rc = 0;
  } else {
    dtx__err_clear();
  }
  json_decref(mine);
  json_decref(newest);
  json_decref(found);
  if (rc == 0)
    dtx__kit_claim_check(ex, k, c, *out, 1);
  return rc;
}

/* ---- claim-many ------------------------------------------------------------- */

/* The filter of the claim of found item d: the due filter (C2) and d's
 * _id and epoch (C1).  The due filter's own conditions stay at the top
 * level, so the store sees a by-_id step (its fast path); only a due
 * filter that names _id or epoch itself is nested in an $and. */
static json_t *fence_filter(const json_t *due, const json_t *d) {
  const json_t *ep = json_object_get(d, "epoch");
  json_t *fence = dtx__pack("{s:O}", "_id", json_object_get(d, "_id"));
  if (fence)
    json_object_set_new(fence, "epoch",
                        ep ? json_incref((json_t *)ep)
                           : dtx__pack("{s:b}", "$exists", 0));
  if (!fence || json_object_get(due, "_id") || json_object_get(due, "epoch"))
    return fence ? dtx__pack("{s:[O,o]}", "$and", due, fence) : NULL;
  json_t *f = json_deep_copy(due);
  if (f && json_object_update(f, fence) < 0) {
    json_decref(f);
    f = NULL;
  }
  json_decref(fence);
  return f;
}

/* One bulk write of by-_id claims of the items of found (each as the find
 * saw it); what it won is appended to won, in found's order.  Returns the
 * first step's error that was not a lost race (with its detail), else 0. */
static int claim_found(dtx__exec_t *ex, const dtx__kind_t *k,
                       const dtx__claim_t *c, const json_t *found,
                       json_t *won) {
  size_t n = json_array_size(found), i;
  dtx__kit_op_t *op = calloc(n, sizeof *op);
  if (!op)
    return dtx__err(DTX_ENOMEM, "claiming %zu items of %s", n, k->coll);
  for (i = 0; i < n; i++) {
    const json_t *d = json_array_get(found, i);
    op[i] = (dtx__kit_op_t){
        .kind = DTX_BULK_FIND_ONE_AND_UPDATE,
        .point = c->point,
        .coll = k->coll,
        .filter = fence_filter(c->due, d),
        .update = dtx__kit_move_update(ex, k, c->to, 1, NULL),
        .fam = {.return_new = 1}};
    if (op[i].update && k->on_move &&
        k->on_move(d, c->point, dtx__str(d, k->state), c->to, 1,
                   op[i].update)) {
      json_decref(op[i].update);
      op[i].update = NULL; /* the step is then DTX_ENOMEM */
    }
  }
  (void)dtx__kit_run(ex, op, n);
  /* C3: a claim whose outcome was unsure and then matched nothing may be
   * this executor's own: the item in state `to`, owned by it, at the
   * epoch after the one the find saw (the kit's own-move test). */
  const dtx__move_t own = {.to = c->to, .flags = DTX__TAKE};
  int first = 0;
  char *detail = NULL;
  for (i = 0; i < n; i++) {
    json_t *mine = NULL;
    if (op[i].rc == 0)
      json_array_append(won, op[i].out);
    else if (op[i].rc == DTX_ENOMATCH && op[i].unsure &&
             dtx__kit_own_move(ex, k, json_array_get(found, i), &own,
                               &mine) == 0)
      json_array_append_new(won, mine);
    else if (op[i].rc && op[i].rc != DTX_ENOMATCH && !first) {
      first = op[i].rc;
      detail = op[i].detail ? strdup(op[i].detail) : NULL;
    }
  }
  dtx__kit_ops_clear(op, n);
  free(op);
  if (first) {
    first = dtx__err(first, "%s", detail ? detail : dtx_strerror(first));
    free(detail);
    return first;
  }
  dtx__err_clear();
  return 0;
}

/* Selection sampling (Knuth's algorithm S): want of the items of found,
 * at random, in found's order.  A new array; NULL when out of memory. */
static json_t *pick_some(const json_t *found, size_t want) {
  static _Thread_local unsigned seed;
  size_t n = json_array_size(found);
  json_t *some = json_array();
  if (!seed)
    seed = (unsigned)dtx__mono_ms() ^ (unsigned)(uintptr_t)&seed;
  for (size_t i = 0; some && i < n && want > 0; i++)
    if ((size_t)rand_r(&seed) % (n - i) < want) {
      json_array_append(some, json_array_get(found, i));
      want--;
    }
  return some;
}

/* How many due items a round looks at after it lost every one it found
 * (SPREAD x max, at least SPREAD_MIN): it then picks max of them at
 * random, so contenders spread out instead of racing for the same head of
 * the queue again. */
#define SPREAD 4
#define SPREAD_MIN 16
#define SPREAD_MAX 1000

int dtx__kit_claim_many(dtx__exec_t *ex, const dtx__kind_t *k,
                        const dtx__claim_t *c, size_t max, json_t **out) {
  dtx__contend_t ct = {0};
  int spread = c->spread;
  *out = NULL;
  if (max < 1 || max > DTX__CLAIM_MANY_MAX)
    return dtx__err(DTX_EINVAL, "claiming %zu items of %s at once: 1 to %d",
                    max, k->coll, DTX__CLAIM_MANY_MAX);
  for (;;) {
    size_t window = max;
    if (spread) {
      window = max * SPREAD < SPREAD_MIN ? SPREAD_MIN : max * SPREAD;
      window = window < SPREAD_MAX ? window : SPREAD_MAX;
    }
    json_t *found = NULL, *won = json_array();
    int rc = won ? dtx__kit_find_n(ex, k->coll, c->due, c->sort,
                                   (int64_t)window, &found)
                 : DTX_ENOMEM;
    if (rc == 0 && json_array_size(found) > max) {
      json_t *some = pick_some(found, max);
      json_decref(found);
      found = some;
      rc = found ? 0 : DTX_ENOMEM;
    }
    if (rc == 0 && json_array_size(found) == 0)
      rc = DTX_ENOMATCH; /* nothing due */
    else if (rc == 0)
      rc = claim_found(ex, k, c, found, won);
    json_decref(found);
    if (json_array_size(won) > 0) {
      /* Won some: an error on another item is that item's, left to its
       * lease and recovery (C4); what was won must be run. */
      dtx__err_clear();
      dtx__kit_claim_check(ex, k, c, won, max);
      *out = won;
      return 0;
    }
    json_decref(won);
    if (rc == DTX_ENOMATCH)
      dtx__err_clear();
    if (rc)
      return rc;
    /* Every item found was claimed by another executor first; more may
     * be due behind them.  At once the first time, then with the kit's
     * randomised backoff, within the deadline; from now on spread. */
    spread = 1;
    rc = DTX_EBUSY;
    if (!dtx__kit_contend(&ct, &rc, "claiming"))
      return rc;
  }
}
