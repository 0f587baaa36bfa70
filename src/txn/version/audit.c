/* audit.c -- the versioned documents' audit: the invariants of version.c
 * (V1-V6) on the stored roots, records and children, at any time.
 *
 * The store gives no snapshot across documents, so the audit reads the
 * roots (R1), the records, the children, then the roots again (R3).
 * Records and children are immutable while reachable, and every step that
 * makes one reachable or unreachable changes the item's root; so an item
 * whose root is the same in R1 and R3 is judged exactly, and an item whose
 * root moved is counted as unsettled and left to a later audit.  Findings:
 *   root_version   the committed version is not the last of log (V3)
 *   log_order      log not ascending, or beyond the counter (V1, V3)
 *   root_next      the counter at INT64_MAX, or at INT64_MAX - 1, where
 *                  no put can reserve a number after it (V1)
 *   root_damaged   any other root dtx__vr_root_check refuses -- every
 *                  root a put, gc or recovery refuses is a finding
 *   reservation    a reservation of a committed or never-reserved number
 *   missing_record a committed version kept without its record (V4)
 *   missing_child  a committed version's map names a child that is gone
 *   uncommitted_child  a map names a child of a version never committed,
 *                  or of a later one: it would be visible (V2, V4)
 *   mismatch       a record or child whose fields disagree with its _id
 *   dead_reachable a reachable document marked dead (V5)
 *   no_root        a record or child of an item without a root
 *   history_changed  a kept version's record or reachable child whose
 *                  content no longer matches the digest written with it,
 *                  or that lost the digest its version was written with
 *                  (dtx__vr_sum_check): committed history rewritten by
 *                  hand.  Documents written before digests (the root's
 *                  sum_from missing or later) are counted as undigested,
 *                  not judged.
 * and with DTX_AUDIT_SETTLED (after recovery): in_flight (a reservation
 * left), garbage (unreachable documents, or trash, left). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/version/version.h"
#include "util/err.h"

typedef struct vaudit {
  dtx__audit_t *a;
  json_t *recs, *kids, *reach; /* reach: child ids reachable */
  int64_t versions, children, in_flight, garbage, undigested;
} vaudit_t;

/* Judges the digest of a record (key NULL) or child of version w. */
static void check_sum(vaudit_t *va, const json_t *root, const char *id,
                      const json_t *d, const char *key, int64_t w) {
  switch (dtx__vr_sum_check(root, d, key != NULL, w)) {
  case VR_SUM_NONE:
    va->undigested++;
    break;
  case VR_SUM_CHANGED:
    dtx__audit_finding(va->a, "history_changed", "%s %s of committed "
                       "version %lld does not match the digest written with "
                       "it: its content was changed after the commit",
                       key ? "child" : "record", id, (long long)w);
    break;
  case VR_SUM_MISSING:
    dtx__audit_finding(va->a, "history_changed", "%s %s of committed "
                       "version %lld has no digest, yet its item writes one "
                       "for every version from %lld: it was removed",
                       key ? "child" : "record", id, (long long)w,
                       (long long)dtx__int(root, "sum_from"));
    break;
  default:
    break;
  }
}

/* Checks a record or child's fields against what its _id says. */
static void same(vaudit_t *va, const char *what, const char *id,
                 const json_t *d, const char *item, int64_t v,
                 const char *key) {
  if (!dtx__str_is(d, "item", item) || dtx__int(d, "version") != v ||
      (key && !dtx__str_is(d, "key", key)))
    dtx__audit_finding(va->a, "mismatch", "%s %s does not say item '%s' "
                       "version %lld%s%s", what, id, item, (long long)v,
                       key ? " key " : "", key ? key : "");
  if (json_is_true(json_object_get(d, "dead")))
    dtx__audit_finding(va->a, "dead_reachable", "%s %s is reachable but "
                       "marked dead", what, id);
}

static void check_version(vaudit_t *va, const char *item, const json_t *root,
                          int64_t v, int64_t first) {
  char id[VR_ID_MAX];
  const char *key;
  json_t *w;
  dtx__vr_rec_id(id, item, v);
  const json_t *rec = json_object_get(va->recs, id);
  va->versions++;
  if (!rec) {
    dtx__audit_finding(va->a, "missing_record", "committed version %s has "
                       "no record", id);
    return;
  }
  same(va, "record", id, rec, item, v, NULL);
  check_sum(va, root, id, rec, NULL, v);
  json_object_foreach(json_object_get(rec, "children"), key, w) {
    int64_t wv = json_is_integer(w) ? json_integer_value(w) : 0;
    if (wv < 1 || wv > v || (wv >= first && !dtx__vr_in_log(root, wv))) {
      dtx__audit_finding(va->a, "uncommitted_child", "version %s shows "
                         "child '%s' of version %lld, which is not a "
                         "committed version at or before it", id, key,
                         (long long)wv);
      continue;
    }
    char cid[VR_ID_MAX];
    dtx__vr_child_id(cid, item, wv, key);
    const json_t *ch = json_object_get(va->kids, cid);
    if (!ch) {
      dtx__audit_finding(va->a, "missing_child", "version %s: child '%s' "
                         "(%s) is gone", id, key, cid);
      continue;
    }
    same(va, "child", cid, ch, item, wv, key);
    if (!json_object_get(va->reach, cid)) { /* judged once, when first met */
      json_object_set_new(va->reach, cid, json_true());
      va->children++;
      check_sum(va, root, cid, ch, key, wv);
    }
  }
}

static void check_root(vaudit_t *va, const char *item, const json_t *root) {
  int64_t v = dtx__int(root, "version"), next = dtx__int(root, "next");
  const json_t *log = json_object_get(root, "log"), *e;
  size_t n = json_array_size(log), i;
  int64_t prev = 0, last = n ? dtx__int(json_array_get(log, n - 1), "v") : 0;
  const char *k;
  json_t *res;
  int named = v != last || v > next || next == INT64_MAX;
  if (v != last || v > next)
    dtx__audit_finding(va->a, "root_version", "item '%s' is at version %lld "
                       "but its last committed version kept is %lld (next "
                       "%lld)", item, (long long)v, (long long)last,
                       (long long)next);
  json_array_foreach(log, i, e) {
    int64_t lv = dtx__int(e, "v");
    if (lv <= prev || lv > next) {
      named = 1;
      dtx__audit_finding(va->a, "log_order", "item '%s': committed version "
                         "%lld after %lld (next %lld)", item, (long long)lv,
                         (long long)prev, (long long)next);
    }
    prev = lv;
  }
  if (next == INT64_MAX)
    dtx__audit_finding(va->a, "root_next", "item '%s': next is %lld, the "
                       "last number: no version can be reserved, and no "
                       "put, gc or recovery touches the item (written with "
                       "--bypass-validation?)", item, (long long)next);
  else if (next == INT64_MAX - 1)
    /* The validator allows it (a plain write may skip numbers), but the
     * number after it is one the validator refuses: every put on the item
     * fails with OVERFLOW from now on, which the audit must not call
     * clean. */
    dtx__audit_finding(va->a, "root_next", "item '%s': next is %lld: no "
                       "number is left for a put (the counter was raised "
                       "by a plain write?)", item, (long long)next);
  /* What dtx__vr_root_check refuses stops every write and sweep of the
   * item: a root it refuses that no finding above named is one still. */
  if (!named && dtx__vr_root_check(root)) {
    dtx__audit_finding(va->a, "root_damaged", "%s", dtx_errdetail());
    dtx__err_clear();
  }
  json_object_foreach(json_object_get(root, "res"), k, res) {
    char *end;
    long long rv = strtoll(k, &end, 10);
    va->in_flight++;
    if (*end || rv < 1 || rv > next || dtx__vr_in_log(root, rv))
      dtx__audit_finding(va->a, "reservation", "item '%s': reservation '%s' "
                         "is of a committed or never-reserved version", item,
                         k);
    else if (va->a->flags & DTX_AUDIT_SETTLED)
      dtx__audit_finding(va->a, "in_flight", "item '%s': version %s is "
                         "still reserved by %s", item, k,
                         dtx__str(res, "owner") ? dtx__str(res, "owner")
                                                : "?");
  }
  if ((va->a->flags & DTX_AUDIT_SETTLED) &&
      json_array_size(json_object_get(root, "trash")))
    dtx__audit_finding(va->a, "garbage", "item '%s': versions in trash "
                       "after recovery", item);
  int64_t first = n ? dtx__int(json_array_get(log, 0), "v") : 0;
  json_array_foreach(log, i, e) {
    check_version(va, item, root, dtx__int(e, "v"), first);
  }
}

/* Counts (and under SETTLED reports) the unreachable records and
 * children of items judged; reports those without a root. */
static void check_rest(vaudit_t *va, json_t *r1, json_t *r3, int child) {
  const char *id;
  json_t *d;
  json_object_foreach(child ? va->kids : va->recs, id, d) {
    const char *item = dtx__str(d, "item");
    const json_t *root = item ? json_object_get(r1, item) : NULL;
    int64_t v = dtx__int(d, "version");
    if (!root) {
      if (!item || !json_object_get(r3, item))
        dtx__audit_finding(va->a, "no_root", "%s %s belongs to no item",
                           child ? "child" : "record", id);
      continue;
    }
    if (!json_equal(root, json_object_get(r3, item)))
      continue; /* unsettled */
    if (child ? json_object_get(va->reach, id) != NULL
              : dtx__vr_in_log(root, v))
      continue;
    if (dtx__vr_res(root, v) || v > dtx__int(root, "next"))
      continue; /* being written */
    va->garbage++;
    if (va->a->flags & DTX_AUDIT_SETTLED)
      dtx__audit_finding(va->a, "garbage", "%s %s is unreachable after "
                         "recovery", child ? "child" : "record", id);
  }
}

int dtx__vr_audit(dtx__audit_t *a) {
  vaudit_t va = {.a = a};
  json_t *r1 = NULL, *r3 = NULL, *list = NULL, *r;
  const char *item;
  dtx__exec_t ex;
  size_t i;
  int64_t unsettled = 0;
  dtx__exec_init(&ex, a->st, NULL, 0, 0);
  int rc = dtx__audit_load(a, DTX_VERSION_ROOTS, &r1);
  if (rc == 0)
    rc = dtx__audit_load(a, DTX_VERSION_RECORDS, &va.recs);
  if (rc == 0)
    rc = dtx__audit_load(a, DTX_VERSION_CHILDREN, &va.kids);
  if (rc == 0) /* again, without the shape findings */
    rc = dtx__kit_find(&ex, DTX_VERSION_ROOTS, NULL, NULL, &list);
  if (rc == 0 && !((r3 = json_object()) && (va.reach = json_object())))
    rc = DTX_ENOMEM;
  json_array_foreach(list, i, r) {
    if (rc == 0 && dtx__str(r, "_id"))
      json_object_set(r3, dtx__str(r, "_id"), r);
  }
  if (rc == 0) {
    json_object_foreach(r1, item, r) {
      if (json_equal(r, json_object_get(r3, item)))
        check_root(&va, item, r);
      else
        unsettled++;
    }
    check_rest(&va, r1, r3, 0);
    check_rest(&va, r1, r3, 1);
    dtx__audit_unsettled(a, unsettled);
    dtx__audit_set(a, "items", json_integer((json_int_t)json_object_size(r1)));
    dtx__audit_set(a, "versions", json_integer((json_int_t)va.versions));
    dtx__audit_set(a, "in_flight", json_integer((json_int_t)va.in_flight));
    dtx__audit_set(a, "garbage", json_integer((json_int_t)va.garbage));
    dtx__audit_set(a, "undigested",
                   json_integer((json_int_t)va.undigested));
    dtx__audit_summary(a, "%zu items, %lld committed versions kept, %lld "
                       "children reachable, %lld reserved, %lld unreachable "
                       "documents, %lld written before digests (not "
                       "checked)",
                       json_object_size(r1), (long long)va.versions,
                       (long long)va.children, (long long)va.in_flight,
                       (long long)va.garbage, (long long)va.undigested);
  }
  json_decref(r1);
  json_decref(r3);
  json_decref(list);
  json_decref(va.recs);
  json_decref(va.kids);
  json_decref(va.reach);
  return rc;
}
