/* queue.c -- fair waiting: acquires that wait (wait_ms > 0) are served in
 * the order they arrived, by ticket (docs/locks.md, "Fair waiting").
 *
 * A waiter that finds the lock held takes a ticket: the lock document's
 * "tickets" counter moves on by one, and an entry {ticket, owner, nonce,
 * expires} goes at the end of its "queue", in ONE update.  The entry is
 * itself a lease (TICKET_MS): the waiter renews it while it waits (each
 * poll, once half of it passed), and a waiter that dies or is paused
 * stops renewing, so its entry lapses and the others pass it: no gap
 * blocks the queue for longer than a ticket's lease.  A waiter that gives
 * up takes its entry out.  Whoever acquires -- a plain lock or a
 * semaphore's slot -- may do so only when the live entries ahead of it
 * (none, for a caller without a ticket) are fewer than the slots free, and
 * the same update that takes the lock takes its entry out, prunes the
 * lapsed ones, and moves the queue's version "qv", on which that update
 * is conditioned: a ticket taken between the read and the update makes
 * it read again.
 *
 *                   enqueue (read; ONE update {_id, tickets: K} -> tickets
 *   held, waiting - K + 1, $push queue {ticket: K + 1, ...}, qv + 1) -> queued
 *   queued ------- renew ticket (queue.i.nonce = mine, live) -------> queued
 *   queued ------- acquire (lock.c / sem.c, its update also $pulls the
 *                  entry and the lapsed ones, qv + 1, filter qv) ---> held
 *   queued ------- give up: dequeue ($pull the entry, qv + 1) ------> (none)
 *   queued ------- dies: the entry lapses, skipped and later pruned -> (none)
 *
 *   transition        function               fault point
 *   ->queued          dtx__lock_queue_join   lock.enqueue
 *   queued->queued    dtx__lock_queue_keep   lock.ticket
 *   queued->held      try_acquire, sem_try   lock.acquire
 *   queued->(none)    dtx__lock_queue_leave  lock.dequeue
 *
 * Invariants:
 *  Q1 tickets only grow: each enqueue is conditioned on the counter as
 *     read and sets the next one, so entries are in ticket order;
 *  Q2 an acquire takes the lock only while fewer live entries than free
 *     slots are ahead of the caller, judged on the queue version its
 *     update is conditioned on (dtx__lock_queue_turn, _claim);
 *  Q3 a lapsed entry counts for no one: no dead or paused waiter holds
 *     the others back for longer than TICKET_MS; a waiter whose entry
 *     lapsed (it was paused) takes a new ticket, at the end;
 *  Q4 fairness is liveness only: mutual exclusion and the fence are the
 *     lock's (K1..K6, S1..S5), whatever the queue holds.
 */
#include <stdio.h>
#include <string.h>

#include "txn/lock/lock.h"
#include "util/assert.h"
#include "util/err.h"

#define TICKET_MS 1000

static const json_t *queue_of(const json_t *doc) {
  return json_object_get(doc, "queue");
}

static int entry_live(const json_t *e, int64_t now) {
  return dtx__int(e, "expires") > now;
}

int dtx__lock_queue_turn(const json_t *doc, const char *nonce, int64_t now,
                         int64_t free, int64_t *ahead) {
  size_t i;
  const json_t *e;
  *ahead = 0;
  json_array_foreach(queue_of(doc), i, e) {
    if (nonce && dtx__str_is(e, "nonce", nonce))
      break;
    *ahead += entry_live(e, now);
  }
  return *ahead < free;
}

int dtx__lock_queue_claim(const json_t *doc, const char *nonce, int64_t now,
                          json_t *filter, json_t *update) {
  const json_t *qv = json_object_get(doc, "qv");
  if (!qv)
    return 0; /* never queued: a plain acquire as before */
  if (json_object_set_new(filter, "qv", json_incref((json_t *)qv)))
    return DTX_ENOMEM;
  if (json_array_size(queue_of(doc)) == 0)
    return 0;
  json_t *pull = json_pack(
      "{s:{s:[{s:s},{s:{s:I}}]}}", "queue", "$or", "nonce",
      nonce ? nonce : "", "expires", "$lte", (json_int_t)now);
  json_t *inc = json_pack("{s:i}", "qv", 1);
  if (!pull || !inc || json_object_set_new(update, "$pull", pull) ||
      json_object_set_new(update, "$inc", inc))
    return DTX_ENOMEM;
  return 0;
}

int dtx__lock_queue_join(dtx__exec_t *ex, const char *name,
                         const json_t *doc, char nonce[25]) {
  const json_t *seen = json_object_get(doc, "tickets");
  int64_t k = dtx__int(doc, "tickets");
  if (seen && !json_is_integer(seen))
    return dtx__err(DTX_ESTATE, "lock '%s': its tickets are not an integer "
                    "(written with --bypass-validation?)", name);
  if (k == INT64_MAX)
    return dtx__err(DTX_EOVERFLOW, "lock '%s': no ticket after %lld", name,
                    (long long)k);
  dtx__id_new(nonce);
  int64_t now = dtx__now_ms();
  /* Q1: on the counter as read (null: none yet, matches a missing one). */
  json_t *filter = json_pack("{s:s,s:O}", "_id", name, "tickets",
                             seen ? (json_t *)seen : json_null());
  json_t *update = json_pack(
      "{s:{s:I},s:{s:{s:I,s:s,s:s,s:I}},s:{s:i}}", "$set", "tickets",
      (json_int_t)(k + 1), "$push", "queue", "ticket", (json_int_t)(k + 1),
      "owner", ex->owner, "nonce", nonce, "expires",
      (json_int_t)dtx__add_sat(now, TICKET_MS), "$inc", "qv", 1);
  int rc = dtx__kit_modify(ex, "lock.enqueue", DTX_LOCKS, filter, update,
                           NULL, NULL);
  if (rc == DTX_ENOMATCH) { /* another took a ticket meanwhile */
    dtx__err_clear();
    nonce[0] = 0;
    return DTX__LOCK_MOVED;
  }
  if (rc)
    nonce[0] = 0;
  return rc;
}

int dtx__lock_queue_keep(dtx__exec_t *ex, const char *name,
                         const json_t *doc, const char *nonce, int64_t now) {
  size_t i;
  const json_t *e = NULL, *x;
  json_array_foreach(queue_of(doc), i, x) {
    if (dtx__str_is(x, "nonce", nonce)) {
      e = x;
      break;
    }
  }
  if (!e || !entry_live(e, now))
    return DTX__LOCK_MOVED; /* Q3: lapsed or pruned: a new ticket */
  if (dtx__int(e, "expires") - now > TICKET_MS / 2)
    return 0;
  char path_n[64], path_e[64];
  snprintf(path_n, sizeof path_n, "queue.%zu.nonce", i);
  snprintf(path_e, sizeof path_e, "queue.%zu.expires", i);
  json_t *filter = json_pack("{s:s,s:s,s:{s:I}}", "_id", name, path_n, nonce,
                             path_e, "$gt", (json_int_t)now);
  json_t *update = json_pack("{s:{s:I}}", "$set", path_e,
                             (json_int_t)dtx__add_sat(now, TICKET_MS));
  int rc = dtx__kit_modify(ex, "lock.ticket", DTX_LOCKS, filter, update, NULL,
                           NULL);
  if (rc == DTX_ENOMATCH) { /* the queue moved: the next poll sees where */
    dtx__err_clear();
    rc = 0;
  }
  return rc;
}

int dtx__lock_queue_leave(dtx__exec_t *ex, const char *name,
                          const char *nonce) {
  json_t *filter = json_pack("{s:s,s:s}", "_id", name, "queue.nonce", nonce);
  json_t *update = json_pack("{s:{s:{s:s}},s:{s:i}}", "$pull", "queue",
                             "nonce", nonce, "$inc", "qv", 1);
  int rc = dtx__kit_modify(ex, "lock.dequeue", DTX_LOCKS, filter, update,
                           NULL, NULL);
  if (rc == DTX_ENOMATCH) { /* pruned already */
    dtx__err_clear();
    rc = 0;
  }
  return rc;
}

int dtx__lock_queue_ahead_error(const char *name, int64_t ahead) {
  return dtx__err(DTX_ENOMATCH, "lock '%s': %lld waiter%s ahead (served in "
                  "ticket order)", name, (long long)ahead,
                  ahead == 1 ? " is" : "s are");
}
