/* sem.c -- semaphores: a lock of up to N holders, each with its own
 * fencing token (docs/locks.md, "Semaphores").
 *
 * A semaphore is the lock document of its name (lock.c) with "max": N
 * (2..100) and "slots": N entries {owner, token, expires, ttl, acquired,
 * nonce}; its top-level "token" is the last token handed out to any slot
 * (the name's one counter, which the acquire also records in the lock's
 * own _fence, as a plain lock does), its top-level owner stays null, so no
 * plain renew or release (filtered on owner != null) ever matches it.
 * Slot i's holder fences its writes by the name "NAME:i": a resource
 * records per slot the largest token that wrote it, so a holder whose
 * slot passed to a newer token is FENCED once that token wrote, while the
 * holders of the other slots -- newer tokens included -- never fence it.
 * The slots' fence names are registered in lock_names as {slot_of: NAME},
 * so no plain lock takes one of them as its own name, and the other way
 * round.
 *
 *               register NAME; reserve "NAME:0".."NAME:N-1" (each an
 *   (no lock) - insert, a duplicate of the same semaphore: fine); create --> free
 *               (lock.c: {token: SEED, max: N, slots: all free})
 *                      acquire (read; a slot i free or lapsed; ONE update
 *   slot i free ------ {token: C, slots.i.token: t, slots.i.expires <= now}
 *    ^  ^              -> token = max(C, _fence.NAME) + 1 = slots.i.token,
 *    |  |              fenced by NAME) --------------------------> slot i held
 *    |  +-- release (slots.i.token = T, owner set) ------------------+ |
 *    +----- the slot's lease lapses: acquirable again -----------------+
 *           renew (slots.i.token = T, owner set): slots.i.expires = now + ttl
 *
 *   transition            function                fault point
 *   (none)->named         create (lock.c)         lock.register
 *   named->reserved       dtx__lock_sem_reserve   lock.reserve
 *   reserved->free        create (lock.c)         lock.create
 *   slot free->held       dtx__lock_sem_try       lock.acquire, lock.acquired
 *   slot held->held       dtx__lock_sem_change    lock.renew
 *   slot held->free       dtx__lock_sem_change    lock.release
 *
 * Invariants (lock.c's K1..K6 hold for the name's counter; and):
 *  S1 at most max live holders: the slots are max entries of one document,
 *     and an acquire takes one only when its lease lapsed (expires <= now
 *     in the same update that takes it);
 *  S2 every token handed out is one past the counter and the lock's own
 *     record, in the same step that takes the slot: tokens only grow per
 *     name, across slots, and no two holders ever share one;
 *  S3 a slot's token only grows (each acquire of it sets the counter's
 *     next value), so the fence name NAME:i sees increasing tokens: an
 *     older holder of slot i is FENCED once a newer one wrote;
 *  S4 no slot holds a token above the counter (the audit checks it);
 *  S5 a semaphore's max never changes: an acquire with another max is
 *     refused (DTX_EINVAL) before any write, and a plain write may not
 *     change max or slots (the plain-scope transition rule, lock.c).
 */
#include <stdio.h>
#include <string.h>

#include "txn/lock/lock.h"
#include "util/assert.h"
#include "util/err.h"

void dtx__lock_slot_fence(char *buf, size_t n, const char *name, int64_t i) {
  snprintf(buf, n, "%s:%lld", name, (long long)i);
}

int dtx__lock_sem_check(const char *name, int64_t max) {
  if (max < 0 || max > DTX__LOCK_MAX_HOLDERS)
    return dtx__err(DTX_EINVAL, "lock '%s': max %lld: must be 1..%d", name,
                    (long long)max, DTX__LOCK_MAX_HOLDERS);
  char buf[200];
  dtx__lock_slot_fence(buf, sizeof buf, name, max - 1);
  if (max > 1 && strlen(buf) > 128)
    return dtx__err(DTX_EINVAL, "semaphore '%s': its slots' fence names "
                    "('%s') pass 128 bytes: a shorter name", name, buf);
  return 0;
}

int64_t dtx__lock_max_of(const json_t *doc) {
  const json_t *m = json_object_get(doc, "max");
  return json_is_integer(m) ? (int64_t)json_integer_value(m) : 1;
}

json_t *dtx__lock_sem_slots(int64_t max) {
  json_t *slots = json_array();
  for (int64_t i = 0; slots && i < max; i++)
    if (json_array_append_new(
            slots, json_pack("{s:n,s:I,s:I,s:I,s:I,s:s}", "owner", "token",
                             (json_int_t)0, "expires", (json_int_t)0, "ttl",
                             (json_int_t)1, "acquired", (json_int_t)0,
                             "nonce", ""))) {
      json_decref(slots);
      return NULL;
    }
  return slots;
}

int dtx__lock_sem_reserve(dtx__exec_t *ex, const char *name, int64_t max) {
  char fence[200];
  int rc = 0;
  for (int64_t i = 0; rc == 0 && i < max; i++) {
    dtx__lock_slot_fence(fence, sizeof fence, name, i);
    json_t *reg = json_pack("{s:s,s:I,s:s}", "_id", fence, "created",
                            (json_int_t)dtx__now_ms(), "slot_of", name);
    rc = reg ? dtx__kit_insert(ex, "lock.reserve", DTX_LOCK_NAMES, reg)
             : DTX_ENOMEM;
    json_decref(reg);
    if (rc != DTX_EDUPKEY)
      continue;
    /* Reserved before: by this semaphore (a create again, or our own lost
     * reply) is fine; a plain lock's name, or another's slot, is not. */
    dtx__err_clear();
    json_t *had = NULL;
    rc = dtx__kit_get(ex, DTX_LOCK_NAMES, fence, &had);
    if (rc == 0 && !dtx__str_is(had, "slot_of", name))
      rc = dtx__err(DTX_EINVAL, "semaphore '%s': the fence name '%s' of "
                    "its slot %lld is already a lock's name", name, fence,
                    (long long)i);
    json_decref(had);
  }
  return rc;
}

static const json_t *slot_at(const json_t *doc, size_t i) {
  return json_array_get(json_object_get(doc, "slots"), i);
}

static int slot_live(const json_t *s, int64_t now) {
  return json_is_string(json_object_get(s, "owner")) &&
         dtx__int(s, "expires") > now;
}

/* The view of slot i: what acquire, renew and release answer. */
static json_t *slot_view(const char *name, const json_t *doc, size_t i,
                         int64_t now) {
  const json_t *s = slot_at(doc, i), *owner = json_object_get(s, "owner");
  char fence[200];
  dtx__lock_slot_fence(fence, sizeof fence, name, (int64_t)i);
  return json_pack("{s:s,s:O,s:I,s:I,s:I,s:s,s:I,s:b}", "name", name,
                   "owner", owner ? owner : json_null(), "token",
                   (json_int_t)dtx__int(s, "token"), "expires",
                   (json_int_t)dtx__int(s, "expires"), "slot", (json_int_t)i,
                   "fence", fence, "max", (json_int_t)dtx__lock_max_of(doc),
                   "held", slot_live(s, now));
}

json_t *dtx__lock_sem_holders(const json_t *doc, int64_t now) {
  json_t *out = json_array();
  const char *name = dtx__str(doc, "_id");
  size_t n = json_array_size(json_object_get(doc, "slots"));
  for (size_t i = 0; out && name && i < n; i++) {
    if (!slot_live(slot_at(doc, i), now))
      continue;
    json_t *v = slot_view(name, doc, i, now);
    if (v) {
      json_object_del(v, "name");
      json_object_del(v, "max");
      json_object_del(v, "held");
    }
    if (!v || json_array_append_new(out, v)) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

int64_t dtx__lock_next_lapse(const json_t *doc, int64_t now) {
  const json_t *slots = json_object_get(doc, "slots");
  if (!json_is_array(slots))
    return slot_live(doc, now) ? dtx__int(doc, "expires") : 0; /* plain */
  int64_t first = 0;
  size_t i;
  const json_t *s;
  json_array_foreach(slots, i, s) {
    int64_t e = dtx__int(s, "expires");
    if (slot_live(s, now) && (first == 0 || e < first))
      first = e;
  }
  return first;
}

int dtx__lock_sem_held_error(const char *name, const json_t *doc) {
  char toks[400] = "";
  size_t i, used = 0;
  const json_t *s;
  json_array_foreach(json_object_get(doc, "slots"), i, s) {
    if (used < sizeof toks - 40)
      used += (size_t)snprintf(toks + used, sizeof toks - used, "%s%lld",
                               i ? ", " : "", (long long)dtx__int(s, "token"));
  }
  int64_t left = dtx__sub_sat(dtx__lock_next_lapse(doc, dtx__now_ms()),
                              dtx__now_ms());
  return dtx__err(DTX_ENOMATCH,
                  "semaphore '%s': all %lld holders are taken (tokens %s); "
                  "the first lease ends in %lld ms",
                  name, (long long)dtx__lock_max_of(doc), toks,
                  (long long)(left > 0 ? left : 0));
}

int dtx__lock_sem_try(dtx__exec_t *ex, const char *name, int64_t ttl,
                      const char *ticket, json_t **doc) {
  int64_t now = dtx__now_ms(), max = dtx__lock_max_of(*doc);
  const json_t *slots = json_object_get(*doc, "slots");
  if (!json_is_array(slots) || (int64_t)json_array_size(slots) != max)
    return dtx__err(DTX_ESTATE, "semaphore '%s': its slots are not %lld "
                    "(written with --bypass-validation?)", name,
                    (long long)max);
  size_t i, n = json_array_size(slots);
  for (i = 0; i < n && slot_live(slot_at(*doc, i), now); i++)
    ;
  if (i == n)
    return DTX__LOCK_HELD; /* S1: every slot is live */
  /* Q2 (queue.c): waiters with tickets first, as many as slots are free. */
  int64_t free = 0, ahead;
  for (size_t j = i; j < n; j++)
    free += !slot_live(slot_at(*doc, j), now);
  if (!dtx__lock_queue_turn(*doc, ticket, now, free, &ahead))
    return DTX__LOCK_QUEUED;
  const json_t *seen_slot = json_object_get(slot_at(*doc, i), "token");
  json_t *seen_token = json_object_get(*doc, "token");
  int64_t t = dtx__int(*doc, "token"),
          r = dtx__lock_own_record(*doc, name), top = t > r ? t : r;
  if (!json_is_integer(seen_token) || !json_is_integer(seen_slot))
    return dtx__err(DTX_ESTATE, "semaphore '%s': a token is not an integer "
                    "(written with --bypass-validation?)", name);
  if (top == INT64_MAX)
    return dtx__err(DTX_EOVERFLOW, "lock '%s': no token after %lld", name,
                    (long long)top);
  char nonce[25], path[64], path_t[64], path_e[64];
  dtx__id_new(nonce);
  snprintf(path, sizeof path, "slots.%zu", i);
  snprintf(path_t, sizeof path_t, "slots.%zu.token", i);
  snprintf(path_e, sizeof path_e, "slots.%zu.expires", i);
  /* S2: the counter as read and the slot as read; any acquire between
   * moved the counter, any release or renew of this slot its expires. */
  json_t *filter = json_pack("{s:s,s:O,s:O,s:{s:I}}", "_id", name, "token",
                             seen_token, path_t, seen_slot, path_e, "$lte",
                             (json_int_t)now);
  json_t *update = json_pack(
      "{s:{s:I,s:I,s:{s:s,s:I,s:I,s:I,s:I,s:s}}}", "$set", "token",
      (json_int_t)(top + 1), "updated", (json_int_t)now, path, "owner",
      ex->owner, "token", (json_int_t)(top + 1), "expires",
      (json_int_t)dtx__add_sat(now, ttl), "ttl", (json_int_t)ttl,
      "acquired", (json_int_t)now, "nonce", nonce);
  int rc = filter && update
               ? dtx__lock_queue_claim(*doc, ticket, now, filter, update)
               : DTX_ENOMEM;
  json_decref(*doc);
  *doc = NULL;
  if (rc) {
    json_decref(filter);
    json_decref(update);
    return rc;
  }
  dtx_fam_opts_t o = {.return_new = 1, .fence_name = name,
                      .fence_token = top + 1};
  rc = dtx__kit_modify_ex(ex, "lock.acquire", DTX_LOCKS, filter, update, &o,
                          doc);
  DTX_ASSERT(rc || dtx__int(*doc, "token") == top + 1, "S2");
  DTX_ASSERT(rc || dtx__int(slot_at(*doc, i), "token") == top + 1, "S3");
  if (rc && rc != DTX_ENOMATCH && rc != DTX_EFENCED)
    return rc;
  if (rc) { /* moved since the read -- maybe by our own lost reply */
    dtx__err_clear();
    rc = dtx__kit_get(ex, DTX_LOCKS, name, doc);
    if (rc == DTX_ENOTFOUND) {
      dtx__err_clear();
      return DTX__LOCK_MOVED;
    }
    if (rc)
      return rc;
    if (!dtx__str_is(slot_at(*doc, i), "nonce", nonce)) {
      json_decref(*doc);
      *doc = NULL;
      return DTX__LOCK_MOVED;
    }
  }
  json_t *v = slot_view(name, *doc, i, now);
  json_decref(*doc);
  *doc = v;
  return v ? DTX__LOCK_TAKEN : DTX_ENOMEM;
}

int dtx__lock_sem_change(dtx__exec_t *ex, const char *name, int64_t token,
                         int64_t ttl, int release, const json_t *doc,
                         json_t **out) {
  size_t i, n = json_array_size(json_object_get(doc, "slots"));
  for (i = 0; i < n && dtx__int(slot_at(doc, i), "token") != token; i++)
    ;
  if (i == n)
    return dtx__err(DTX_ENOMATCH, "semaphore '%s': token %lld is no longer "
                    "current (no holder has it)", name, (long long)token);
  const json_t *s = slot_at(doc, i);
  if (!json_is_string(json_object_get(s, "owner")))
    return dtx__err(DTX_ENOMATCH, "semaphore '%s': token %lld was released",
                    name, (long long)token);
  if (ttl <= 0)
    ttl = dtx__int(s, "ttl") > 0 ? dtx__int(s, "ttl") : DTX__DEFAULT_LEASE_MS;
  int64_t now = dtx__now_ms();
  char path_t[64], path_o[64], path_e[64], path_l[64];
  snprintf(path_t, sizeof path_t, "slots.%zu.token", i);
  snprintf(path_o, sizeof path_o, "slots.%zu.owner", i);
  snprintf(path_e, sizeof path_e, "slots.%zu.expires", i);
  snprintf(path_l, sizeof path_l, "slots.%zu.ttl", i);
  /* Not {$ne: null}: on an array path that reads "owner" of each slot
   * named "1" as well -- missing, so null (MongoDB's semantics). */
  json_t *filter = json_pack("{s:s,s:I,s:{s:s}}", "_id", name, path_t,
                             (json_int_t)token, path_o, "$type", "string");
  json_t *update =
      release ? json_pack("{s:{s:n,s:I,s:I}}", "$set", path_o, path_e,
                          (json_int_t)0, "updated", (json_int_t)now)
              : json_pack("{s:{s:I,s:I,s:I}}", "$set", path_e,
                          (json_int_t)dtx__add_sat(now, ttl), path_l,
                          (json_int_t)ttl, "updated", (json_int_t)now);
  json_t *after = NULL;
  int rc = dtx__kit_modify(ex, release ? "lock.release" : "lock.renew",
                           DTX_LOCKS, filter, update, NULL, &after);
  /* S3: a renew or release never moves the slot's token. */
  DTX_ASSERT(rc || dtx__int(slot_at(after, i), "token") == token, "S3");
  if (rc == DTX_ENOMATCH)
    rc = dtx__err(DTX_ENOMATCH, "semaphore '%s': token %lld is no longer "
                  "current", name, (long long)token);
  if (rc == 0 && out && !(*out = slot_view(name, after, i, dtx__now_ms())))
    rc = DTX_ENOMEM;
  json_decref(after);
  return rc;
}
