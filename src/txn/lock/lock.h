/* lock.h -- what lock.c (plain locks, the pattern, its audit), sem.c
 * (semaphores: a lock of up to N holders) and elect.c (leader election)
 * share.  docs/locks.md describes all three. */
#ifndef DTX_TXN_LOCK_H
#define DTX_TXN_LOCK_H

#include "doc/doc.h"
#include "txn/kit/kit.h"

#define DTX_LOCKS "locks"
#define DTX_LOCK_NAMES "lock_names"
#define DTX__LOCK_FENCE "_fence"
#define DTX__LOCK_MAX_TTL_MS (366LL * 24 * 3600 * 1000)
/* The most holders a semaphore allows: its slots live in one document. */
#define DTX__LOCK_MAX_HOLDERS 100

extern const dtx__pattern_t dtx__lock_pattern;

/* An acquire attempt's outcome (or a negative DTX_E*). */
enum {
  DTX__LOCK_TAKEN = 0,
  DTX__LOCK_HELD = 1,
  DTX__LOCK_MOVED = 2,
  DTX__LOCK_QUEUED = 3 /* free, but waiters with tickets come first */
};

/* The token of NAME that doc's own fence record holds (0: none). */
int64_t dtx__lock_own_record(const json_t *doc, const char *name);

/* Whether a plain lock doc has a live lease at now. */
int dtx__lock_held_now(const json_t *doc, int64_t now);

/* The pattern's audit (audit.c). */
int dtx__lock_audit(dtx__audit_t *a);

/* How many holders the lock doc allows: its "max", 1 when it has none (a
 * plain lock). */
int64_t dtx__lock_max_of(const json_t *doc);

/* "NAME:i", the fence name of slot i of semaphore name, into buf (at
 * least 129 bytes). */
void dtx__lock_slot_fence(char *buf, size_t n, const char *name, int64_t i);

/* The checks of a semaphore's name and max (2..DTX__LOCK_MAX_HOLDERS, its
 * slots' fence names within 128 bytes): 0 or DTX_EINVAL. */
int dtx__lock_sem_check(const char *name, int64_t max);

/* Registers the fence names of max slots of semaphore name in
 * DTX_LOCK_NAMES (lock.reserve), each marked {slot_of: name}; refuses
 * (DTX_EINVAL) a name already registered for another lock. */
int dtx__lock_sem_reserve(dtx__exec_t *ex, const char *name, int64_t max);

/* The slots of a new semaphore of max holders (all free). */
json_t *dtx__lock_sem_slots(int64_t max);

/* One acquire attempt of a slot of semaphore doc (as read, owned by the
 * call; *doc is replaced): DTX__LOCK_TAKEN and *doc the acquire's view;
 * DTX__LOCK_HELD and *doc as read when every slot is held;
 * DTX__LOCK_MOVED (*doc NULL) when it changed meanwhile; or an error. */
int dtx__lock_sem_try(dtx__exec_t *ex, const char *name, int64_t ttl,
                      const char *ticket, json_t **doc);

/* The error of a semaphore whose slots are all held, naming them. */
int dtx__lock_sem_held_error(const char *name, const json_t *doc);

/* The earliest end of a live lease among doc's holders (wall ms), 0 when
 * none is live. */
int64_t dtx__lock_next_lapse(const json_t *doc, int64_t now);

/* Renew (release 0) or release (1) of the slot of semaphore doc (as read)
 * that token holds: one update of that slot.  ttl 0: the slot's own. */
int dtx__lock_sem_change(dtx__exec_t *ex, const char *name, int64_t token,
                         int64_t ttl, int release, const json_t *doc,
                         json_t **out);

/* Live holders of semaphore doc at now, as [{slot, owner, token, expires,
 * fence}] (new reference). */
json_t *dtx__lock_sem_holders(const json_t *doc, int64_t now);

/* ---- fair waiting (queue.c) ---- */

/* Whether the caller with ticket nonce (NULL: none, behind every waiter)
 * may take one of free slots of doc now; *ahead: live waiters ahead. */
int dtx__lock_queue_turn(const json_t *doc, const char *nonce, int64_t now,
                         int64_t free, int64_t *ahead);

/* Conditions an acquire's filter on doc's queue version, and makes its
 * update take nonce's entry and the lapsed ones out (0 or DTX_ENOMEM). */
int dtx__lock_queue_claim(const json_t *doc, const char *nonce, int64_t now,
                          json_t *filter, json_t *update);

/* Takes a ticket (lock.enqueue) into nonce: 0, DTX__LOCK_MOVED (another
 * took one meanwhile: read again) or an error. */
int dtx__lock_queue_join(dtx__exec_t *ex, const char *name,
                         const json_t *doc, char nonce[25]);

/* Renews nonce's ticket when half its lease passed (lock.ticket): 0, or
 * DTX__LOCK_MOVED when it lapsed or is gone (take a new one). */
int dtx__lock_queue_keep(dtx__exec_t *ex, const char *name,
                         const json_t *doc, const char *nonce, int64_t now);

/* Gives nonce's ticket up (lock.dequeue). */
int dtx__lock_queue_leave(dtx__exec_t *ex, const char *name,
                          const char *nonce);

/* NOMATCH: free, but ahead waiters come first. */
int dtx__lock_queue_ahead_error(const char *name, int64_t ahead);

#endif
