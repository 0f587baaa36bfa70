/* audit.c -- the lock pattern's audit (docs/locks.md, "Audit"): lock.c's
 * K2, K4, K5 and K6, and a semaphore's S4 (sem.c), judged against every
 * fenced document and fence tombstone of the store. */
#include <stdio.h>
#include <string.h>

#include "txn/lock/lock.h"
#include "util/assert.h"
#include "util/err.h"

#define FENCE DTX__LOCK_FENCE
#define MAX_TTL_MS DTX__LOCK_MAX_TTL_MS
#define own_record dtx__lock_own_record

/* ---- audit (K2, K4, K5, K6) ----------------------------------------------------------- */

/* Notes in seen {NAME: {"token": n, "where": "..."}} each token of rec
 * (a _fence record) above the one seen for its name. */
static void note_record(json_t *seen, const json_t *rec, const char *where) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)rec, k, v) {
    if (!json_is_integer(v))
      continue;
    json_t *cur = json_object_get(seen, k);
    if (cur && dtx__int(cur, "token") >= json_integer_value(v))
      continue;
    json_object_set_new(seen, k,
                        json_pack("{s:I,s:s}", "token",
                                  (json_int_t)json_integer_value(v), "where",
                                  where));
  }
}

/* Largest token of each lock name recorded by fenced writes in coll --
 * by its documents and by the records its deleted ones left (fence
 * tombstones) -- into seen. */
static int scan_fences(dtx_store_t *st, const char *coll, json_t *seen) {
  json_t *filter = json_pack("{s:{s:b}}", FENCE, "$exists", 1);
  json_t *docs = NULL, *recs = NULL;
  int rc = filter ? dtx__kit_read(st,
                                  &(dtx__kit_read_t){.coll = coll,
                                                     .filter = filter},
                                  &docs)
                  : DTX_ENOMEM;
  json_decref(filter);
  if (rc == 0)
    rc = dtx__kit_read(
        st, &(dtx__kit_read_t){.kind = DTX__KIT_FENCE_RECORDS, .coll = coll},
        &recs);
  size_t i;
  json_t *d;
  char where[300];
  if (rc == 0) {
    json_array_foreach(docs, i, d) {
      const json_t *id = json_object_get(d, "_id");
      snprintf(where, sizeof where, "%s '%s'", coll,
               json_is_string(id) ? json_string_value(id) : "?");
      note_record(seen, json_object_get(d, FENCE), where);
    }
    snprintf(where, sizeof where, "a deleted document of %s", coll);
    json_array_foreach(recs, i, d) note_record(seen, d, where);
  }
  json_decref(docs);
  json_decref(recs);
  return rc;
}

/* How many documents coll holds (0 when it does not exist). */
static int count_of(dtx__audit_t *a, const json_t *colls, const char *coll,
                    int64_t *n) {
  size_t i;
  json_t *c;
  *n = 0;
  json_array_foreach(colls, i, c) {
    if (json_is_string(c) && strcmp(json_string_value(c), coll) == 0)
      return dtx__kit_count(a->st, coll, NULL, coll, n);
  }
  return 0;
}

/* What only a write past the rules leaves (the plain-scope rule below
 * refuses it): a ttl or a lease beyond what acquire and renew give
 * (MAX_TTL_MS: the lock is held for as long as the write said, forever at
 * INT64_MAX), and a token at INT64_MAX, after which no acquire can take
 * the lock (OVERFLOW).  Every acquire and renew sets updated with the
 * lease it gives, so expires - updated is the lease it gave. */
static void check_lease(dtx__audit_t *a, const char *k, const json_t *l) {
  int64_t ttl = dtx__int(l, "ttl"), exp = dtx__int(l, "expires");
  int64_t at = dtx__int(l, "updated"), acq = dtx__int(l, "acquired");
  int64_t lease = dtx__sub_sat(exp, at > acq ? at : acq);
  if (ttl > MAX_TTL_MS)
    dtx__audit_finding(a, "lock_lease", "lock '%s': ttl %lld ms, beyond "
                       "the %lld ms an acquire gives (written with "
                       "--bypass-validation?)",
                       k, (long long)ttl, (long long)MAX_TTL_MS);
  if (json_is_string(json_object_get(l, "owner")) && lease > MAX_TTL_MS)
    dtx__audit_finding(a, "lock_lease", "lock '%s': its lease runs %lld ms "
                       "(expires %lld), beyond the %lld ms an acquire or a "
                       "renew gives: held past any holder (written with "
                       "--bypass-validation?)",
                       k, (long long)lease, (long long)exp,
                       (long long)MAX_TTL_MS);
  if (dtx__int(l, "token") == INT64_MAX || own_record(l, k) == INT64_MAX)
    dtx__audit_finding(a, "lock_token_exhausted", "lock '%s': token %lld, "
                       "the last one: no acquire can take it again "
                       "(written with --bypass-validation?)",
                       k, (long long)INT64_MAX);
}

/* A semaphore's own checks (sem.c's S1, S4), and of its slots' fence
 * names in seen, the one with the largest token (NULL: none fenced). */
static json_t *check_sem(dtx__audit_t *a, const char *k, const json_t *l,
                         json_t *seen, int64_t *held) {
  int64_t max = dtx__lock_max_of(l), tok = dtx__int(l, "token"),
          now = dtx__now_ms();
  const json_t *slots = json_object_get(l, "slots");
  json_t *top = json_object_get(seen, k), *sl;
  size_t i;
  char fence[200];
  if (!json_is_array(slots) || (int64_t)json_array_size(slots) != max)
    dtx__audit_finding(a, "lock_slots", "semaphore '%s': %zu slots, not "
                       "its max %lld (written with --bypass-validation?)",
                       k, json_array_size(slots), (long long)max);
  int live = 0;
  json_array_foreach(slots, i, sl) {
    int64_t t = dtx__int(sl, "token");
    live |= json_is_string(json_object_get(sl, "owner")) &&
            dtx__int(sl, "expires") > now;
    if (t > tok) /* S4 */
      dtx__audit_finding(a, "lock_token_regressed",
                         "semaphore '%s' holds token %lld, below token "
                         "%lld of its slot %zu", k, (long long)tok,
                         (long long)t, i);
    dtx__lock_slot_fence(fence, sizeof fence, k, (int64_t)i);
    json_t *s = json_object_get(seen, fence);
    if (s && (!top || dtx__int(s, "token") > dtx__int(top, "token")))
      top = s;
  }
  /* the top-level owner is null: count the semaphore held by its slots */
  *held += live;
  return top;
}

int dtx__lock_audit(dtx__audit_t *a) {
  json_t *colls = NULL, *seen = json_object(), *locks = NULL, *names = NULL;
  int64_t n = 0, held = 0, fenced_names = 0, nlocks = 0, nnames = 0;
  int rc = seen ? dtx__kit_colls(a->st, &colls) : DTX_ENOMEM;
  size_t i;
  json_t *c;
  /* The worker and recovery set every pattern up, so "locks" exists in
   * stores that never took a lock: scan the other collections only when
   * there is a lock, or a registered name, to judge (a store of transfers
   * pays two counts). */
  if (rc == 0 && (rc = count_of(a, colls, DTX_LOCKS, &nlocks)) == 0)
    rc = count_of(a, colls, DTX_LOCK_NAMES, &nnames);
  int judge = nlocks > 0 || nnames > 0;
  /* The fenced documents first, the locks after: tokens only grow, so a
   * lock read later holds at least the token it had when a document was
   * read -- an acquire in between cannot look like a regression. */
  if (rc == 0 && judge)
    json_array_foreach(colls, i, c) {
      const char *name = json_string_value(c);
      if (!name || strcmp(name, DTX_LOCKS) == 0 ||
          strcmp(name, DTX_LOCK_NAMES) == 0)
        continue;
      if ((rc = scan_fences(a->st, name, seen)))
        break;
    }
  if (rc == 0 && judge && nlocks > 0)
    rc = dtx__audit_load(a, DTX_LOCKS, &locks);
  if (rc == 0 && judge && nnames > 0)
    rc = dtx__audit_load(a, DTX_LOCK_NAMES, &names);
  if (rc == 0 && judge) {
    int64_t now = dtx__now_ms();
    const char *k;
    json_t *l;
    json_object_foreach(locks, k, l) {
      n++;
      held += dtx__lock_held_now(l, now);
      int64_t tok = dtx__int(l, "token"), rec = own_record(l, k);
      if (rec > tok) /* K4 */
        dtx__audit_finding(a, "lock_token_regressed",
                           "lock '%s' holds token %lld, below token %lld "
                           "its own fence record says it handed out",
                           k, (long long)tok, (long long)rec);
      check_lease(a, k, l);
      json_t *s = json_object_get(seen, k);
      if (dtx__lock_max_of(l) > 1)
        s = check_sem(a, k, l, seen, &held);
      if (!s)
        continue;
      fenced_names++;
      if (dtx__int(s, "token") > tok) /* K2 */
        dtx__audit_finding(a, "lock_token_regressed",
                           "lock '%s' holds token %lld, below token %lld "
                           "already used in a fenced write of %s",
                           k, (long long)tok, (long long)dtx__int(s, "token"),
                           dtx__str(s, "where"));
    }
    /* K5: a registered name that fenced a write has its lock (the lock is
     * never deleted: only --bypass-validation, or a drop, removes it). */
    json_object_foreach(names, k, l) {
      json_t *s = json_object_get(seen, k);
      /* A slot's fence name (sem.c): its semaphore's lock. */
      const char *of = dtx__str(l, "slot_of");
      if (!s || json_object_get(locks, of ? of : k))
        continue;
      dtx__audit_finding(a, "lock_missing",
                         "lock '%s' is gone (deleted with "
                         "--bypass-validation?), yet its token %lld fenced "
                         "a write of %s",
                         k, (long long)dtx__int(s, "token"),
                         dtx__str(s, "where"));
    }
  }
  DTX_ASSERT(held <= n && fenced_names <= n, "K3");
  if (rc == 0) {
    dtx__audit_set(a, "locks", json_integer(n));
    dtx__audit_set(a, "held", json_integer(held));
    dtx__audit_summary(a, "%lld locks, %lld held, %lld fenced by writes",
                       (long long)n, (long long)held,
                       (long long)fenced_names);
  }
  json_decref(colls);
  json_decref(seen);
  json_decref(locks);
  json_decref(names);
  return rc;
}
