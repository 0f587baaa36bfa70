/* elect.c -- leader election on a lease lock (docs/locks.md, "Leader
 * election").
 *
 * A campaign is an acquire of a lock of one holder (lock.c) that waits
 * until the lock is free or its lease lapsed: the token the acquire hands
 * out is the term.  The leader keeps its lease by renewing it, fences
 * every write it makes as leader by NAME:term, and leads until its lease
 * lapses or it releases; a candidate waiting meanwhile takes the next
 * term.  So it adds no step of its own: its transitions are lock.c's.
 *
 *               campaign (= acquire, waiting: lock.c's loop, the kit's
 *   follower -- bounded waits, until the lease ends or wait_ms) -> leader
 *   leader   -- renew (lock.c)                                  -> leader
 *   leader   -- release, or the lease lapses                    -> (none)
 *
 *   transition          function                    fault point
 *   (none)->leader      dtx_lock_campaign (acquire) lock.register,
 *                                                   lock.create,
 *                                                   lock.acquire,
 *                                                   lock.acquired
 *   leader->leader      dtx_lock_renew              lock.renew
 *   leader->(none)      dtx_lock_release            lock.release
 *
 * Invariants:
 *  E1 one leader per term: a term is a token, and an acquire hands out
 *     each token once (lock.c's K1, K3);
 *  E2 terms only grow (K1), across a leader killed, paused, or released;
 *  E3 a deposed leader that wakes up cannot act as leader on a fenced
 *     resource: once the next term wrote it, its term is FENCED, and its
 *     renew is refused (its token is no longer current).  Between its
 *     lease's end and its waking it still believes it leads: what it does
 *     then is safe only through the fence, as for every lease.
 */
#include "txn/lock/lock.h"
#include "util/err.h"

int dtx_lock_campaign(dtx_store_t *st, const char *name,
                      const dtx_lock_opts_t *opts, json_t **out) {
  dtx_lock_opts_t o = opts ? *opts : (dtx_lock_opts_t){0};
  if (out)
    *out = NULL;
  dtx__err_clear();
  if (o.max > 1)
    return dtx__err(DTX_EINVAL, "lock '%s': a campaign elects one leader, "
                    "not max %lld", name ? name : "?", (long long)o.max);
  /* No wait given: as long as it takes (saturated by acquire), within
   * the call's deadline. */
  if (o.wait_ms == 0)
    o.wait_ms = INT64_MAX;
  return dtx_lock_acquire(st, name, &o, out);
}

int dtx_lock_leader(dtx_store_t *st, const char *name, json_t **out) {
  json_t *v = NULL;
  *out = NULL;
  int rc = dtx_lock_get(st, name, &v);
  if (rc)
    return rc;
  if (json_object_get(v, "max")) {
    json_decref(v);
    return dtx__err(DTX_EINVAL, "lock '%s' is a semaphore: it has holders "
                    "(lock show), no leader", name);
  }
  int held = json_is_true(json_object_get(v, "held"));
  *out = json_pack("{s:O,s:O,s:O,s:O}", "name", json_object_get(v, "name"),
                   "leader",
                   held ? json_object_get(v, "owner") : json_null(), "term",
                   json_object_get(v, "token"), "expires",
                   json_object_get(v, "expires"));
  json_decref(v);
  return *out ? 0 : DTX_ENOMEM;
}
