/* audit.c -- the sync flag's audit (read-only): for every stored rule,
 *   - a flag whose lease lapsed (a change nobody finished) is a
 *     "stale_sync_flag" finding; a live one counts as unsettled (with
 *     DTX_AUDIT_SETTLED every flag is a finding);
 *   - a dependent linked to a master WITHOUT a flag must carry the
 *     master's copied fields ("sync_mismatch" otherwise), and never a
 *     version above the master's ("sync_version");
 *   - a flag that is not one the protocol writes (no stamp, times that
 *     are not integers, a lease longer than any executor's) is a
 *     "bad_sync_flag": a plain write could otherwise keep a change from
 *     repair for ever by moving its lease far ahead;
 *   - a master version that is not a positive integer is a
 *     "sync_version" (the transition rule keeps it from falling back), and
 *     so is a dependent's _sync that is not an object, and a master's
 *     _syncing that is not one a "bad_sync_flag": no change could write
 *     there (its propagation, or its master step, would fail for ever);
 *   - a rule document that is not a valid rule is a "bad_rule", two
 *     rules that cannot both hold (dtx__sync_clash) a "sync_rule_clash",
 *     and a rule whose collections lack its transition rules a
 *     "sync_guard" (sync repair, recover and worker put it back).
 * Masters and dependents are the user's collections: they are read with
 * plain finds (no shape rules of ours apply to them); a dependent whose
 * master does not exist is counted ("orphans"), not judged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/sync/sync.h"
#include "util/err.h"

typedef struct counts {
  long long rules, flags, dependents, orphans;
} counts_t;

/* The JSON text of v, for keys and details (caller frees). */
static char *text_of(const json_t *v) {
  return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS)
           : NULL;
}

/* Could flag be one the master step wrote: {stamp, at, until} with a
 * lease no executor could take (until - at <= DTX__MAX_LEASE_MS)? */
static int good_flag(const json_t *flag) {
  const json_t *at = json_object_get(flag, "at");
  const json_t *until = json_object_get(flag, "until");
  if (!json_is_object(flag) || !dtx__str(flag, "stamp") ||
      !json_is_integer(at) || !json_is_integer(until))
    return 0;
  /* A lease ending before it began is merely lapsed (repair takes it). */
  int64_t a = json_integer_value(at), u = json_integer_value(until);
  return u <= a || (a < 0 ? u <= a + DTX__MAX_LEASE_MS
                          : u - a <= DTX__MAX_LEASE_MS);
}

/* Masters of r by the text of their _id (a new object in *map). */
static int load_masters(dtx__audit_t *a, const dtx__sync_rule_t *r,
                        json_t **map, counts_t *n) {
  json_t *all = NULL, *m;
  size_t i;
  int64_t now = dtx__now_ms();
  dtx__kit_read_t q = {.coll = r->master};
  int rc = dtx__kit_read(a->st, &q, &all);
  if (rc)
    return dtx__err_wrap(rc, "sync audit: reading masters of %s", r->name);
  *map = json_object();
  json_array_foreach(all, i, m) {
    char *key = text_of(json_object_get(m, "_id"));
    if (key)
      json_object_set(*map, key, m);
    const json_t *flag = dtx__path_get(m, r->fpath);
    /* _syncm.NAME, once a change made it (or _syncm when that is no
     * object): its v must be a version. */
    const json_t *sm = json_object_get(m, DTX__SYNC_MASTER);
    const json_t *mine = json_is_object(sm) ? json_object_get(sm, r->name)
                                            : sm;
    const json_t *v = dtx__path_get(m, r->vpath);
    if (mine && !(json_is_integer(v) && json_integer_value(v) >= 1))
      dtx__audit_finding(a, "sync_version", "rule %s: master %s of %s has "
                         "%s that holds no version (a positive integer v)",
                         r->name, key ? key : "?", r->master, r->vpath);
    /* _syncing itself no object (a plain write): the next change's
     * master step cannot set its flag there and fails, for every rule. */
    const json_t *flags = json_object_get(m, DTX__SYNC_FLAG);
    if (flags && !json_is_object(flags))
      dtx__audit_finding(a, "bad_sync_flag", "rule %s: master %s of %s has "
                         "%s that is not an object: no change can set its "
                         "flag (remove it)", r->name, key ? key : "?",
                         r->master, DTX__SYNC_FLAG);
    if (flag && !good_flag(flag)) {
      n->flags++;
      dtx__audit_finding(a, "bad_sync_flag", "rule %s: master %s of %s has "
                         "a flag doctx did not write (a string stamp, "
                         "integer at and until, a lease of at most %lld "
                         "ms): run doctx sync update to replace it", r->name,
                         key ? key : "?", r->master,
                         (long long)DTX__MAX_LEASE_MS);
    } else if (flag) {
      n->flags++;
      if (a->flags & DTX_AUDIT_SETTLED)
        dtx__audit_finding(a, "stale_sync_flag", "rule %s: master %s of %s "
                           "still has its flag (set by %s)", r->name,
                           key ? key : "?", r->master,
                           dtx__str(flag, "owner") ? dtx__str(flag, "owner")
                                                   : "?");
      else if (dtx__int(flag, "until") <= now)
        dtx__audit_finding(a, "stale_sync_flag", "rule %s: master %s of %s "
                           "has a flag past its lease (set by %s %lld ms "
                           "ago): run doctx sync repair", r->name,
                           key ? key : "?", r->master,
                           dtx__str(flag, "owner") ? dtx__str(flag, "owner")
                                                   : "?",
                           (long long)dtx__sub_sat(now, dtx__int(flag, "at")));
      else
        dtx__audit_unsettled(a, 1);
    }
    free(key);
  }
  json_decref(all);
  return 0;
}

static void check_dependent(dtx__audit_t *a, const dtx__sync_rule_t *r,
                            const json_t *dep, const json_t *master) {
  char *did = text_of(json_object_get(dep, "_id"));
  const json_t *dv = json_object_get(dep, DTX__SYNC_DEP);
  /* _sync itself no object (a plain write): the next change cannot
   * record its version there, so its propagation fails for ever. */
  if (dv && !json_is_object(dv))
    dtx__audit_finding(a, "sync_version", "rule %s: dependent %s of %s has "
                       "%s that is not an object: no change can record its "
                       "version (remove it)", r->name, did ? did : "?",
                       r->dependents, DTX__SYNC_DEP);
  dv = json_object_get(dv, r->name);
  int64_t mv = dtx__sync_version(r, master);
  if (dv && (!json_is_integer(dv) || json_integer_value(dv) > mv))
    dtx__audit_finding(a, "sync_version", "rule %s: dependent %s of %s "
                       "claims master version %s%lld, the master is at %lld",
                       r->name, did ? did : "?", r->dependents,
                       json_is_integer(dv) ? "" : "(not an integer) ",
                       (long long)(json_is_integer(dv) ? json_integer_value(dv)
                                                       : 0),
                       (long long)mv);
  for (size_t i = 0; i < r->ncopy; i++) {
    const json_t *want = dtx__path_get(master, r->src[i]);
    const json_t *have = dtx__path_get(dep, r->dst[i]);
    if (want ? have && json_equal(want, have) : !have)
      continue;
    char *w = text_of(want), *h = text_of(have);
    dtx__audit_finding(a, "sync_mismatch", "rule %s: dependent %s of %s has "
                       "%s = %.80s, its master (no flag) has %s = %.80s",
                       r->name, did ? did : "?", r->dependents, r->dst[i],
                       h ? h : "(missing)", r->src[i], w ? w : "(missing)");
    free(w);
    free(h);
  }
  free(did);
}

static int audit_rule(dtx__audit_t *a, const dtx__sync_rule_t *r,
                      counts_t *n) {
  json_t *masters = NULL, *deps = NULL, *dep;
  size_t i;
  int rc = load_masters(a, r, &masters, n);
  json_t *filter = json_pack("{s:{s:b}}", r->link, "$exists", 1);
  dtx__kit_read_t q = {.coll = r->dependents, .filter = filter};
  if (rc == 0)
    rc = filter ? dtx__kit_read(a->st, &q, &deps) : DTX_ENOMEM;
  json_decref(filter);
  if (rc) {
    json_decref(masters);
    return dtx__err_wrap(rc, "sync audit: reading dependents of %s", r->name);
  }
  json_array_foreach(deps, i, dep) {
    n->dependents++;
    char *key = text_of(json_object_get(dep, r->link));
    const json_t *m = key ? json_object_get(masters, key) : NULL;
    free(key);
    if (!m)
      n->orphans++;
    else if (!dtx__path_get(m, r->fpath)) /* flagged: judged when settled */
      check_dependent(a, r, dep, m);
  }
  json_decref(deps);
  json_decref(masters);
  return 0;
}

/* Checks of the rules themselves: each one's guard on its masters,
 * and every pair against dtx__sync_clash (two defines racing pass the
 * define's own check). */
static int audit_rules(dtx__audit_t *a, const dtx__sync_rule_t *all,
                       size_t n) {
  char why[600];
  for (size_t i = 0; i < n; i++) {
    int missing = 0;
    int rc = dtx__sync_guard(a->st, &all[i], 1, why, sizeof why, &missing);
    if (rc)
      return rc;
    if (missing)
      dtx__audit_finding(a, "sync_guard", "sync rule %s: %s (a plain write "
                         "could lower a version): run doctx sync repair",
                         all[i].name, why);
    for (size_t j = i + 1; j < n; j++)
      if (dtx__sync_clash(&all[i], &all[j], why, sizeof why))
        dtx__audit_finding(a, "sync_rule_clash", "%s", why);
  }
  return 0;
}

int dtx__sync_audit(dtx__audit_t *a) {
  json_t *rules = NULL, *doc;
  const char *id;
  counts_t n = {0};
  dtx__sync_rule_t *all = NULL;
  size_t nall = 0;
  int rc = dtx__audit_load(a, DTX__SYNC_RULES, &rules);
  if (rc)
    return rc;
  if (json_object_size(rules) &&
      !(all = calloc(json_object_size(rules), sizeof *all)))
    rc = DTX_ENOMEM;
  json_object_foreach(rules, id, doc) {
    if (rc)
      break;
    n.rules++;
    if (dtx__sync_rule_parse(doc, &all[nall]) == 0) {
      rc = audit_rule(a, &all[nall++], &n);
      continue;
    }
    dtx__audit_finding(a, "bad_rule", "sync rule %s: %s", id,
                       dtx_errdetail());
    dtx__sync_rule_free(&all[nall]);
  }
  if (rc == 0)
    rc = audit_rules(a, all, nall);
  dtx__sync_rules_free(all, nall);
  json_decref(rules);
  if (rc)
    return rc;
  dtx__audit_set(a, "rules", json_integer(n.rules));
  dtx__audit_set(a, "flags", json_integer(n.flags));
  dtx__audit_set(a, "dependents", json_integer(n.dependents));
  dtx__audit_set(a, "orphans", json_integer(n.orphans));
  dtx__audit_summary(a, "%lld rules, %lld flags set, %lld dependents "
                     "checked (%lld without a master)", n.rules, n.flags,
                     n.dependents, n.orphans);
  return 0;
}
