/* lock.c -- lease locks with fencing tokens (docs/locks.md).
 *
 * A lock is one document of DTX_LOCKS, _id = its name, never deleted (its
 * delete guard refuses), so its token only grows.  A lease alone does not
 * exclude a paused holder, so the token an acquire hands out is meant as
 * the fence of every protected write (the store refuses an older token:
 * src/store/fence.c).  The lock document is itself written fenced by its
 * own name: every acquire records its token in the lock's _fence, so even
 * a lock deleted with --bypass-validation leaves its newest token behind
 * (a fence tombstone, src/store/fence.c), and the document created again
 * for the name takes it over.  Each name is also registered, once, in
 * DTX_LOCK_NAMES, which outlives the lock: the audit knows which fenced
 * names are locks, and an acquire that must create the lock again knows
 * to look for the tokens the name already fenced.
 *
 *                 register (insert the name; a duplicate: seen before)
 *   (no lock) ---------------------------------------------------> named
 *                 create (insert {token: SEED, owner: null}; SEED: 0, or
 *   named  -----  when seen before, the largest token of NAME any  ---> free
 *                 document's _fence holds; a lock's tombstone adds its
 *                 record to the new document)
 *             acquire (read, then {token: T, expires <= now} ->
 *   free  ------  token = max(T, _fence.NAME) + 1, fenced by it) ------> held
 *    ^  ^                                                              | |
 *    |  +------------------ release (token = T, owner set) ------------+ |
 *    |                                                                   |
 *    +--- the lease lapses (expires <= now): acquirable again -----------+
 *         renew (token = T, owner set): expires = now + ttl, stays held
 *
 *   transition         function          fault point
 *   (none)->named      create            lock.register
 *   named->reserved    create (max > 1)  lock.reserve (sem.c: a semaphore's
 *                                        slots' fence names)
 *   named->free        create            lock.create
 *   free/lapsed->held  try_acquire       lock.acquire (the update),
 *                                        lock.acquired (after it, before
 *                                        the token is returned)
 *   held->held         change (renew)    lock.renew
 *   held->free         change (release)  lock.release
 *
 * Invariants (DTX_ASSERT checks K1 and K4 on every acquire, in every
 * build; the audit, audit.c, checks K2 and K4 against the fenced
 * documents, K5 by the registry, K6 on each lock; the transition rules
 * of DTX_LOCKS enforce K1 and K6 on plain writes):
 *  K1 an acquire hands out a token greater than the lock's stored token
 *     and than its own fence record: greater than every token issued
 *     before for that name, across expiry, release, restarts and a
 *     deletion of the lock document (whose record its tombstone keeps);
 *  K2 no fenced write recorded a token of NAME above the lock's token (a
 *     lock whose token went back -- restored, or edited by hand -- would
 *     hand out a token the resources already refuse, or worse, accept);
 *  K3 at most one live lease: acquire's filter requires expires <= now,
 *     and a live lease has expires > now.  (The lease is judged by the
 *     acquiring client's clock: a skewed clock may end a lease early,
 *     which is exactly what the fence is for.)
 *  K4 a lock's token is not below its own fence record (both move
 *     together in every acquire);
 *  K5 a registered name whose token fenced a write has a lock document;
 *  K6 a lock changes only through these calls (the plain-scope transition
 *     rule of DTX_LOCKS: no plain write moves its fields nor inserts one),
 *     so its lease is at most MAX_TTL_MS and its token below INT64_MAX
 *     (which 2^63 acquires would take); the audit reports a lock past
 *     either.
 *
 * A retried acquire whose first attempt landed but whose reply was lost
 * finds the lock moved on: the nonce it wrote tells it the holder is
 * itself.
 *
 * A lock with "max" N >= 2 is a semaphore: sem.c has its slots, states and
 * invariants (S1..S5); this file creates it, checks that every acquire
 * asks the name's one max (S5), and sends its acquires, renews and
 * releases there.  Leader election (elect.c) is an acquire that waits. */
#include <stdio.h>
#include <string.h>

#include "txn/lock/lock.h"
#include "util/assert.h"
#include "util/err.h"

#define FENCE DTX__LOCK_FENCE
#define MAX_TTL_MS DTX__LOCK_MAX_TTL_MS
#define own_record dtx__lock_own_record

/* The view every call returns. */
static json_t *view(const json_t *doc, int64_t now) {
  const json_t *owner = json_object_get(doc, "owner");
  int64_t expires = dtx__int(doc, "expires");
  if (dtx__lock_max_of(doc) > 1) {
    /* A semaphore (sem.c): its counter, and its live holders. */
    json_t *h = dtx__lock_sem_holders(doc, now);
    return h ? json_pack("{s:O,s:n,s:I,s:I,s:b,s:I,s:o}", "name",
                         json_object_get(doc, "_id"), "owner", "token",
                         (json_int_t)dtx__int(doc, "token"), "expires",
                         (json_int_t)dtx__lock_next_lapse(doc, now), "held",
                         json_array_size(h) > 0, "max",
                         (json_int_t)dtx__lock_max_of(doc), "holders", h)
             : NULL;
  }
  return json_pack("{s:O,s:O,s:I,s:I,s:b}", "name",
                   json_object_get(doc, "_id"), "owner",
                   owner ? owner : json_null(), "token",
                   (json_int_t)dtx__int(doc, "token"), "expires",
                   (json_int_t)expires, "held",
                   json_is_string(owner) && expires > now);
}

static int set_out(const json_t *doc, json_t **out) {
  if (!out)
    return 0;
  *out = view(doc, dtx__now_ms());
  return *out ? 0 : DTX_ENOMEM;
}

static int check_ttl(int64_t ttl) {
  if (ttl < 0 || ttl > MAX_TTL_MS)
    return dtx__err(DTX_EINVAL, "lock ttl %lld ms: must be 1..%lld",
                    (long long)ttl, (long long)MAX_TTL_MS);
  return 0;
}

static int check_args(const char *name, const dtx_lock_opts_t *o) {
  int rc = dtx__check_ident("lock name", name);
  if (rc == 0 && o) {
    rc = check_ttl(o->ttl_ms);
    if (rc == 0 && o->wait_ms < 0)
      rc = dtx__err(DTX_EINVAL, "lock wait %lld ms: must be >= 0",
                    (long long)o->wait_ms);
    if (rc == 0)
      rc = dtx__check_owner(o->owner);
    if (rc == 0)
      rc = dtx__lock_sem_check(name, o->max);
  }
  return rc;
}

static int check_token(const char *name, int64_t token) {
  if (token < 1)
    return dtx__err(DTX_EINVAL, "lock '%s': token %lld: must be >= 1", name,
                    (long long)token);
  return 0;
}

/* "held by O (token N) for another M ms" */
static int held_error(const char *name, const json_t *doc) {
  const char *owner = dtx__str(doc, "owner");
  int64_t left = dtx__sub_sat(dtx__int(doc, "expires"), dtx__now_ms());
  return dtx__err(DTX_ENOMATCH,
                  "lock '%s' is held by %s (token %lld) for another %lld ms",
                  name, owner ? owner : "?", (long long)dtx__int(doc, "token"),
                  (long long)(left > 0 ? left : 0));
}

int64_t dtx__lock_own_record(const json_t *doc, const char *name) {
  const json_t *t = json_object_get(json_object_get(doc, FENCE), name);
  return json_is_integer(t) ? (int64_t)json_integer_value(t) : 0;
}

/* The largest token of name recorded by fenced writes in every collection
 * but the pattern's own, into *max (0: none) -- the tokens the name has
 * fenced, which survive a lock document deleted with its tombstone
 * (a dropped "locks"); the records deleted documents left (fence
 * tombstones) count as well: a resource written with token 3 and then
 * deleted still refuses tokens below 3, so a lock restarting below it
 * would hand out tokens twice.  A scan of the store: only an acquire that
 * must create a lock whose name was registered before pays it. */
/* Whether fence name k is name's: name itself, or when slots (a
 * semaphore, sem.c) one of its slots' "NAME:i". */
static int name_of(const char *k, const char *name, int slots) {
  size_t n = strlen(name);
  if (strcmp(k, name) == 0)
    return 1;
  if (!slots || strncmp(k, name, n) != 0 || k[n] != ':' || !k[n + 1])
    return 0;
  return strspn(k + n + 1, "0123456789") == strlen(k + n + 1);
}

/* The largest token of name's fence names (name_of) in rec. */
static int64_t record_max(const json_t *rec, const char *name, int slots) {
  const char *k;
  json_t *v;
  int64_t top = 0;
  json_object_foreach((json_t *)rec, k, v) {
    if (json_is_integer(v) && json_integer_value(v) > top &&
        name_of(k, name, slots))
      top = (int64_t)json_integer_value(v);
  }
  return top;
}

static int fenced_max(dtx__exec_t *ex, const char *name, int slots,
                      int64_t *max) {
  json_t *colls = NULL;
  *max = 0;
  int rc = dtx__kit_colls(ex->st, &colls);
  /* Not {"_fence.NAME": ...}: a name may hold a '.', which a path reads
   * as a step into an object. */
  json_t *filter = json_pack("{s:{s:b}}", FENCE, "$exists", 1);
  size_t i, j;
  json_t *c, *d;
  if (rc == 0 && !filter)
    rc = DTX_ENOMEM;
  if (rc == 0)
    json_array_foreach(colls, i, c) {
      const char *coll = json_string_value(c);
      if (!coll || strcmp(coll, DTX_LOCKS) == 0 ||
          strcmp(coll, DTX_LOCK_NAMES) == 0)
        continue;
      json_t *docs = NULL, *recs = NULL;
      if ((rc = dtx__kit_find(ex, coll, filter, NULL, &docs)) ||
          (rc = dtx__kit_read(ex->st,
                              &(dtx__kit_read_t){
                                  .kind = DTX__KIT_FENCE_RECORDS, .coll = coll},
                              &recs))) {
        json_decref(docs);
        break;
      }
      json_array_foreach(docs, j, d) {
        int64_t t = record_max(json_object_get(d, FENCE), name, slots);
        if (t > *max)
          *max = t;
      }
      json_array_foreach(recs, j, d) {
        int64_t t = record_max(d, name, slots);
        if (t > *max)
          *max = t;
      }
      json_decref(docs);
      json_decref(recs);
    }
  json_decref(filter);
  json_decref(colls);
  return rc;
}

/* named -> free: registers the name (lock.register) and inserts the lock
 * free (lock.create), both idempotent, so a crash between them, or a
 * racing creator, leaves nothing to repair: the next acquire reads the
 * lock, or creates it.  A name registered before whose lock is gone was
 * deleted (or its creator crashed): its token starts at the largest it
 * fenced, and the tombstone of the deleted lock, when there is one, adds
 * its record to the new document (the store does that in the insert). */
static int create(dtx__exec_t *ex, const char *name, int64_t ttl,
                  int64_t max) {
  int64_t now = dtx__now_ms(), seed = 0;
  json_t *reg = json_pack("{s:s,s:I}", "_id", name, "created",
                          (json_int_t)now);
  int rc = reg ? dtx__kit_insert(ex, "lock.register", DTX_LOCK_NAMES, reg)
               : DTX_ENOMEM;
  json_decref(reg);
  int again = rc == DTX_EDUPKEY;
  if (again) {
    /* A name a semaphore reserved as the fence of one of its slots
     * (sem.c) is not a lock's own. */
    dtx__err_clear();
    rc = dtx__kit_get(ex, DTX_LOCK_NAMES, name, &reg);
    if (rc == 0 && dtx__str(reg, "slot_of"))
      rc = dtx__err(DTX_EINVAL, "lock name '%s' is the fence name of a "
                    "slot of semaphore '%s'", name, dtx__str(reg, "slot_of"));
    json_decref(reg);
  }
  if (rc == 0 && max > 1)
    rc = dtx__lock_sem_reserve(ex, name, max);
  if (rc == 0 && again)
    rc = fenced_max(ex, name, max > 1, &seed);
  if (rc)
    return rc;
  DTX_ASSERT(seed >= 0, "K1"); /* the largest token NAME fenced, or 0 */
  json_t *doc = json_pack("{s:s,s:n,s:I,s:I,s:I,s:I,s:I,s:s}", "_id", name,
                          "owner", "token", (json_int_t)seed, "expires",
                          (json_int_t)0, "ttl", (json_int_t)ttl, "acquired",
                          (json_int_t)0, "updated", (json_int_t)now, "nonce",
                          "");
  if (doc && max > 1 &&
      (json_object_set_new(doc, "max", json_integer(max)) ||
       json_object_set_new(doc, "slots", dtx__lock_sem_slots(max)))) {
    json_decref(doc);
    doc = NULL;
  }
  rc = doc ? dtx__kit_insert(ex, "lock.create", DTX_LOCKS, doc) : DTX_ENOMEM;
  json_decref(doc);
  if (rc == DTX_EDUPKEY) { /* created meanwhile (or by our lost reply) */
    dtx__err_clear();
    rc = 0;
  }
  return rc;
}

int dtx__lock_held_now(const json_t *doc, int64_t now) {
  return json_is_string(json_object_get(doc, "owner")) &&
         dtx__int(doc, "expires") > now;
}

enum {
  TAKEN = DTX__LOCK_TAKEN,
  HELD = DTX__LOCK_HELD,
  MOVED = DTX__LOCK_MOVED,
  QUEUED = DTX__LOCK_QUEUED
};

/* One acquire attempt: TAKEN and *doc (the lock after it); HELD and *doc
 * (as read) when another holds it; MOVED (*doc NULL) when the lock changed
 * between the read and the update, or had to be created; or an error. */
static int try_acquire(dtx__exec_t *ex, const char *name, int64_t ttl,
                       int64_t max, const char *ticket, json_t **doc) {
  *doc = NULL;
  int rc = dtx__kit_get(ex, DTX_LOCKS, name, doc);
  if (rc == DTX_ENOTFOUND) {
    dtx__err_clear();
    rc = create(ex, name, ttl, max);
    return rc ? rc : MOVED;
  }
  if (rc)
    return rc;
  /* S5 (sem.c): one max per name, whoever asks. */
  int64_t have = dtx__lock_max_of(*doc);
  if (have != max)
    return have > 1 ? dtx__err(DTX_EINVAL, "lock '%s' is a semaphore of "
                               "max %lld, not max %lld", name,
                               (long long)have, (long long)max)
                    : dtx__err(DTX_EINVAL, "lock '%s' is a lock of one "
                               "holder, not a semaphore of max %lld", name,
                               (long long)max);
  if (max > 1)
    return dtx__lock_sem_try(ex, name, ttl, ticket, doc);
  int64_t now = dtx__now_ms(), ahead;
  if (dtx__lock_held_now(*doc, now))
    return HELD;
  /* Q2 (queue.c): free, but waiters with tickets ahead come first. */
  if (!dtx__lock_queue_turn(*doc, ticket, now, 1, &ahead))
    return QUEUED;
  /* K1: past the stored token and the lock's own record. */
  int64_t t = dtx__int(*doc, "token"), r = own_record(*doc, name);
  int64_t top = t > r ? t : r;
  json_t *seen_token = json_incref(json_object_get(*doc, "token"));
  json_t *read = *doc;
  *doc = NULL;
  DTX_ASSERT(top >= r && top >= t, "K1");
  if (!json_is_integer(seen_token) || top == INT64_MAX) {
    json_decref(read);
    rc = seen_token && !json_is_integer(seen_token)
             ? dtx__err(DTX_ESTATE, "lock '%s': its token is not an "
                        "integer (written with --bypass-validation?)", name)
             : !seen_token
                   ? dtx__err(DTX_ESTATE, "lock '%s' has no token (written "
                              "with --bypass-validation?)", name)
                   : dtx__err(DTX_EOVERFLOW, "lock '%s': no token after %lld",
                              name, (long long)top);
    json_decref(seen_token);
    return rc;
  }
  char nonce[25];
  dtx__id_new(nonce);
  json_t *filter = json_pack("{s:s,s:o,s:{s:I}}", "_id", name, "token",
                             seen_token, "expires", "$lte", (json_int_t)now);
  json_t *update = json_pack(
      "{s:{s:I,s:s,s:I,s:I,s:I,s:I,s:s}}", "$set", "token",
      (json_int_t)(top + 1), "owner", ex->owner, "expires",
      (json_int_t)dtx__add_sat(now, ttl), "ttl", (json_int_t)ttl, "acquired",
      (json_int_t)now, "updated", (json_int_t)now, "nonce", nonce);
  rc = filter && update
           ? dtx__lock_queue_claim(read, ticket, now, filter, update)
           : DTX_ENOMEM;
  json_decref(read);
  if (rc) {
    json_decref(filter);
    json_decref(update);
    return rc;
  }
  /* Fenced by the token it hands out: the lock keeps its own record,
   * which outlives the document (fence.c's tombstones). */
  dtx_fam_opts_t o = {.return_new = 1, .fence_name = name,
                      .fence_token = top + 1};
  rc = dtx__kit_modify_ex(ex, "lock.acquire", DTX_LOCKS, filter, update, &o,
                          doc);
  /* The store's own step set both: the token handed out is above every
   * one before it, and the lock's record moved with it. */
  DTX_ASSERT(rc || dtx__int(*doc, "token") == top + 1, "K1");
  DTX_ASSERT(rc || own_record(*doc, name) == top + 1, "K4");
  if (rc != DTX_ENOMATCH && rc != DTX_EFENCED)
    return rc;
  /* It moved since the read -- maybe by this very call, when an earlier
   * attempt's reply was lost: the nonce tells. */
  dtx__err_clear();
  rc = dtx__kit_get(ex, DTX_LOCKS, name, doc);
  if (rc == DTX_ENOTFOUND) {
    dtx__err_clear();
    return MOVED;
  }
  if (rc)
    return rc;
  if (dtx__str_is(*doc, "nonce", nonce))
    return TAKEN;
  json_decref(*doc);
  *doc = NULL;
  return MOVED;
}

static int acquire(dtx_store_t *st, const char *name,
                   const dtx_lock_opts_t *o, json_t **out) {
  dtx__exec_t ex;
  int rc = check_args(name, o);
  if (rc)
    return rc;
  dtx__exec_init(&ex, st, o->owner, o->ttl_ms, o->deadline_ms);
  if ((rc = dtx__kit_ensure(st, &dtx__lock_pattern)))
    return rc;
  /* Saturated: a wait too large for int64 is "wait as long as it takes"
   * (docs/deadlines.md), not a wait that wrapped and gave up at once. */
  int64_t until = dtx__add_sat(dtx__mono_ms(), o->wait_ms);
  dtx__contend_t races = {0};
  dtx__wait_t held = {.pause = 5, .cap = 200};
  /* A waiter with a ticket polls faster: the lock may be free and only
   * waiting for it (docs/locks.md, "Fair waiting"). */
  dtx__wait_t queued = {.pause = 5, .cap = 50};
  int64_t max = o->max > 1 ? o->max : 1;
  char ticket[25] = "";
  for (;;) {
    json_t *doc = NULL;
    rc = try_acquire(&ex, name, ex.lease_ms, max, ticket[0] ? ticket : NULL,
                     &doc);
    if (rc == TAKEN && max > 1) { /* doc: the slot's view (sem.c) */
      rc = dtx__kit_point("lock.acquired", NULL);
      if (rc == 0 && out)
        *out = json_incref(doc);
      json_decref(doc);
      return rc;
    }
    if (rc < 0)
      json_decref(doc);
    if (rc == TAKEN) {
      /* Taken, the token not yet handed out: where Kleppmann's holder is
       * paused (GC, SIGSTOP) past its lease.  An error here leaves the
       * lock to lapse. */
      rc = dtx__kit_point("lock.acquired", NULL);
      if (rc == 0)
        rc = set_out(doc, out);
      json_decref(doc);
      return rc;
    }
    if (rc < 0)
      return rc;
    if (rc == MOVED) {
      /* Another acquire won the race for this state (or the lock was
       * just created): read it again, within the kit's bound. */
      if (dtx__kit_contend(&races, &rc, "acquiring a lock"))
        continue;
      return dtx__err_wrap(rc, "lock '%s'", name);
    }
    /* Held (or free for the waiters ahead): wait for its lease to run
     * out, a release, or the budget -- in the queue, by ticket. */
    int64_t left = until - dtx__mono_ms();
    int64_t dl = dtx__deadline_left_ms(), ahead = 0, now = dtx__now_ms();
    if (left <= 0 || dl <= 0) {
      if (rc == QUEUED)
        dtx__lock_queue_turn(doc, ticket[0] ? ticket : NULL, now, 1, &ahead);
      if (ticket[0]) {
        /* Giving up: out of the queue.  Should that fail, the ticket
         * lapses all the same (Q3): the answer is still "held". */
        dtx__lock_queue_leave(&ex, name, ticket);
        dtx__err_clear();
      }
      rc = rc == QUEUED ? dtx__lock_queue_ahead_error(name, ahead)
           : max > 1    ? dtx__lock_sem_held_error(name, doc)
                        : held_error(name, doc);
      json_decref(doc);
      return rc;
    }
    rc = ticket[0] ? dtx__lock_queue_keep(&ex, name, doc, ticket, now)
                   : dtx__lock_queue_join(&ex, name, doc, ticket);
    if (rc == MOVED && !ticket[0]) {
      json_decref(doc); /* another ticket meanwhile; or ours lapsed (Q3) */
      if (dtx__kit_contend(&races, &rc, "taking a ticket"))
        continue;
      return dtx__err_wrap(rc, "lock '%s'", name);
    }
    if (rc == MOVED)
      ticket[0] = 0; /* lapsed while this waiter was paused: a new one */
    if (rc < 0) {
      json_decref(doc);
      return rc;
    }
    int64_t lapse = dtx__add_sat(
        dtx__sub_sat(dtx__lock_next_lapse(doc, dtx__now_ms()), dtx__now_ms()),
        1);
    json_decref(doc);
    dtx__kit_wait(ticket[0] ? &queued : &held,
                  lapse > 0 && lapse < left ? lapse : left);
  }
}

int dtx_lock_check(const char *name, const dtx_lock_opts_t *opts) {
  dtx__err_clear();
  return check_args(name, opts);
}

int dtx_lock_acquire(dtx_store_t *st, const char *name,
                     const dtx_lock_opts_t *opts, json_t **out) {
  dtx_lock_opts_t o = opts ? *opts : (dtx_lock_opts_t){0};
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, o.deadline_ms);
  return dtx__call_end(&c, acquire(st, name, &o, out));
}

/* Why token is not current: doc, the lock read after a conditional update
 * missed (NULL: there is none). */
static int not_current(const json_t *doc, const char *name, int64_t token) {
  if (!doc)
    return dtx__err(DTX_ENOTFOUND, "no lock '%s'", name);
  int64_t cur = dtx__int(doc, "token");
  const char *owner = dtx__str(doc, "owner");
  if (cur == token && !owner)
    return dtx__err(DTX_ENOMATCH, "lock '%s': token %lld was released", name,
                    (long long)token);
  return dtx__err(DTX_ENOMATCH,
                  "lock '%s': token %lld is no longer current (token %lld%s)",
                  name, (long long)token, (long long)cur,
                  owner ? " is held" : " was released");
}

/* renew (release = 0) or release (1) of token: one update filtered on
 * {_id, token, owner != null}. */
static int change(dtx_store_t *st, const char *name, int64_t token,
                  const dtx_lock_opts_t *o, int release, json_t **out) {
  dtx__exec_t ex;
  int rc = check_args(name, o);
  if (rc == 0)
    rc = check_token(name, token);
  if (rc)
    return rc;
  dtx__exec_init(&ex, st, NULL, 0, o->deadline_ms);
  if ((rc = dtx__kit_ensure(st, &dtx__lock_pattern)))
    return rc;
  int64_t now = dtx__now_ms();
  json_t *filter = json_pack("{s:s,s:I,s:{s:n}}", "_id", name, "token",
                             (json_int_t)token, "owner", "$ne");
  json_t *update;
  if (release) {
    update = json_pack("{s:{s:n,s:I,s:I}}", "$set", "owner", "expires",
                       (json_int_t)0, "updated", (json_int_t)now);
  } else if (o->ttl_ms > 0) {
    update = json_pack("{s:{s:I,s:I,s:I}}", "$set", "expires",
                       (json_int_t)(now + o->ttl_ms), "ttl",
                       (json_int_t)o->ttl_ms, "updated", (json_int_t)now);
  } else {
    /* The lock's own ttl: expires = now + ttl in one step needs the
     * stored value, so read it (a renew racing a re-acquire is still
     * decided by the filter on the token). */
    json_t *doc = NULL;
    rc = dtx__kit_get(&ex, DTX_LOCKS, name, &doc);
    int64_t ttl = rc == 0 ? dtx__int(doc, "ttl") : 0;
    json_decref(doc);
    if (rc == DTX_ENOTFOUND) {
      json_decref(filter);
      return dtx__err(DTX_ENOTFOUND, "no lock '%s'", name);
    }
    if (rc) {
      json_decref(filter);
      return rc;
    }
    if (ttl <= 0)
      ttl = DTX__DEFAULT_LEASE_MS;
    /* The stored ttl is what any write left (the validator bounds it
     * below only): saturate, never wrap into a lease that lapsed. */
    update = json_pack("{s:{s:I,s:I}}", "$set", "expires",
                       (json_int_t)dtx__add_sat(now, ttl), "updated",
                       (json_int_t)now);
  }
  json_t *doc = NULL;
  rc = dtx__kit_modify(&ex, release ? "lock.release" : "lock.renew",
                       DTX_LOCKS, filter, update, NULL, &doc);
  /* K1, K3: a renew or release never moves the token, and a release
   * lets the lease go (its one step). */
  const json_t *t = rc ? NULL : json_object_get(doc, "token");
  DTX_ASSERT(!json_is_integer(t) || json_integer_value(t) == token, "K1");
  DTX_ASSERT(rc || !release || !dtx__str(doc, "owner"), "K3");
  if (rc != DTX_ENOMATCH) {
    if (rc == 0)
      rc = set_out(doc, out);
    json_decref(doc);
    return rc;
  }
  json_decref(doc);
  doc = NULL;
  /* No plain lock matched: a semaphore's top-level owner is always null
   * (sem.c), so its holders renew and release their slot there. */
  dtx__err_clear();
  rc = dtx__kit_get(&ex, DTX_LOCKS, name, &doc);
  if (rc == 0 && dtx__lock_max_of(doc) > 1)
    rc = dtx__lock_sem_change(&ex, name, token, release ? 0 : o->ttl_ms,
                              release, doc, out);
  else if (rc == 0 || rc == DTX_ENOTFOUND)
    rc = not_current(rc ? NULL : doc, name, token);
  json_decref(doc);
  return rc;
}

int dtx_lock_renew(dtx_store_t *st, const char *name, int64_t token,
                   const dtx_lock_opts_t *opts, json_t **out) {
  dtx_lock_opts_t o = opts ? *opts : (dtx_lock_opts_t){0};
  o.wait_ms = 0;
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, o.deadline_ms);
  return dtx__call_end(&c, change(st, name, token, &o, 0, out));
}

int dtx_lock_release(dtx_store_t *st, const char *name, int64_t token,
                     json_t **out) {
  dtx_lock_opts_t o = {0};
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, change(st, name, token, &o, 1, out));
}

int dtx_lock_get(dtx_store_t *st, const char *name, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *doc = NULL;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx__check_ident("lock name", name);
  if (rc == 0) {
    dtx__exec_init(&ex, st, NULL, 0, 0);
    rc = dtx__kit_get(&ex, DTX_LOCKS, name, &doc);
    if (rc == DTX_ENOTFOUND)
      rc = dtx__err(DTX_ENOTFOUND, "no lock '%s'", name);
  }
  if (rc == 0)
    rc = set_out(doc, out);
  json_decref(doc);
  return dtx__call_end(&c, rc);
}

int dtx_lock_list(dtx_store_t *st, const dtx_page_t *page, json_t **out) {
  dtx__call_t c;
  json_t *all = NULL;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx__kit_list(st, DTX_LOCKS, NULL, NULL, page, &all);
  if (rc == 0 && !(*out = json_array()))
    rc = DTX_ENOMEM;
  int64_t now = dtx__now_ms();
  size_t i;
  json_t *d;
  if (rc == 0)
    json_array_foreach(all, i, d) {
      if (json_array_append_new(*out, view(d, now))) {
        rc = DTX_ENOMEM;
        break;
      }
    }
  json_decref(all);
  if (rc) {
    json_decref(*out);
    *out = NULL;
  }
  return dtx__call_end(&c, rc);
}

/* ---- the pattern ----------------------------------------------------------------- */

static const char *const collections[] = {DTX_LOCKS, DTX_LOCK_NAMES, NULL};
/* `lock list` pages along it from an --after (dtx__kit_list's keyset):
 * the planner walks no primary key, so the _id order is an index. */
static const dtx__index_def_t indexes[] = {
    {DTX_LOCKS, "{\"_id\":1}", 0, 0}, {NULL, NULL, 0, 0}};

#define LONG "{\"bsonType\":\"long\"}"
/* token 0: created, never acquired (create's state "free"). */
static const char lock_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"owner\",\"token\",\"expires\",\"ttl\","
    "\"acquired\",\"updated\",\"nonce\"],"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128},"
    "\"owner\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"token\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"expires\":" LONG ",\"ttl\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"acquired\":" LONG ",\"updated\":" LONG ","
    "\"nonce\":{\"bsonType\":\"string\"},"
    /* A semaphore's (sem.c): max holders and their slots. */
    "\"max\":{\"bsonType\":\"long\",\"minimum\":2,\"maximum\":100},"
    "\"slots\":{\"bsonType\":\"array\",\"maxItems\":100,"
    "\"items\":{\"bsonType\":\"object\",\"required\":[\"owner\",\"token\","
    "\"expires\",\"ttl\",\"acquired\",\"nonce\"],\"properties\":{"
    "\"owner\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"token\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"expires\":" LONG ",\"ttl\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"acquired\":" LONG ",\"nonce\":{\"bsonType\":\"string\"}}}},"
    /* Fair waiting's (queue.c): tickets, the queue and its version. */
    "\"tickets\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"qv\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"queue\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"ticket\",\"owner\",\"nonce\",\"expires\"],"
    "\"properties\":{\"ticket\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"owner\":{\"bsonType\":\"string\"},\"nonce\":{\"bsonType\":\"string\"},"
    "\"expires\":" LONG "}}}}}}";
/* The registry: a name and when it was first created, nothing else --
 * but for a semaphore's slot fence name, the semaphore (sem.c). */
static const char name_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"created\"],\"additionalProperties\":false,"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128},"
    "\"created\":" LONG ","
    "\"slot_of\":{\"bsonType\":\"string\",\"minLength\":1,"
    "\"maxLength\":128}}}}";
#undef LONG

/* What an update may change (docs/validation.md, "Transition rules";
 * docs/locks.md, "What a plain write may change").  The first object
 * holds for every writer: a token never goes back (K1).  The second
 * ("scope": "plain") is for the generic document commands: a lock moves
 * only through `doctx lock`, whose steps alone are exempt ("steps").  A
 * plain write that handed a lapsed lease to another owner under the old
 * token made two holders the fence cannot tell apart; one that set
 * expires or ttl to INT64_MAX held the lock forever (acquire bounds a
 * lease to MAX_TTL_MS); a token raised to INT64_MAX left no token for
 * any acquire; and a lock inserted by hand could do all of it under a
 * new name.  So none of the protocol's fields change, and no lock is
 * inserted, by a plain write; other fields are the user's. */
static const char lock_moves[] =
    "[{\"immutable\":[\"_id\"],\"increasing\":[\"token\"]},"
    "{\"scope\":\"plain\",\"steps\":[\"lock\"],\"insert\":false,"
    "\"immutable\":[\"owner\",\"token\",\"expires\",\"ttl\",\"acquired\","
    "\"updated\",\"nonce\",\"_fence\",\"max\",\"slots\",\"tickets\",\"qv\","
    "\"queue\"],"
    "\"why\":\"a lock changes only through doctx lock (docs/locks.md)\"}]";

static const dtx__rules_def_t rules[] = {
    /* Never deleted (token >= 0 is required, so the guard matches
     * nothing): a deleted lock would start its tokens again (its
     * tombstone keeps them; a plain delete is refused all the same). */
    {DTX_LOCKS, lock_shape, "{\"token\":{\"$lt\":0}}", lock_moves},
    /* A registration is forever and never changes. */
    {DTX_LOCK_NAMES, name_shape, "{\"created\":{\"$exists\":false}}",
     "{\"immutable\":[\"_id\",\"created\",\"slot_of\"]}"},
    {NULL, NULL, NULL, NULL},
};

static const char *const fault_points[] = {
    "lock.register",
    "lock.reserve",
    "lock.create",
    "lock.acquire",
    "lock.acquired",
    "lock.enqueue",
    "lock.ticket",
    "lock.dequeue",
    "lock.renew",
    "lock.release",
    NULL,
};

const dtx__pattern_t dtx__lock_pattern = {
    .name = "lock",
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .audit = dtx__lock_audit,
    .rules = rules,
};
