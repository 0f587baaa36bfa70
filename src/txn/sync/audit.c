/* audit.c -- the sync flag's audit (read-only): for every stored rule,
 *   - a flag whose lease lapsed (a change nobody finished) is a
 *     "stale_sync_flag" finding; a live one counts as unsettled (with
 *     DTX_AUDIT_SETTLED every flag is a finding);
 *   - a dependent linked to a master WITHOUT a flag must carry the
 *     master's copied fields ("sync_mismatch" otherwise), and never a
 *     version above the master's ("sync_version");
 *   - a rule document that is not a valid rule is a "bad_rule".
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

/* Masters of r by the text of their _id (a new object in *map). */
static int load_masters(dtx__audit_t *a, const dtx__sync_rule_t *r,
                        json_t **map, counts_t *n) {
  json_t *all = NULL, *m;
  size_t i;
  int64_t now = dtx__now_ms();
  int rc = dtx_store_find(a->st, r->master, NULL, NULL, &all);
  if (rc)
    return dtx__err_wrap(rc, "sync audit: reading masters of %s", r->name);
  *map = json_object();
  json_array_foreach(all, i, m) {
    char *key = text_of(json_object_get(m, "_id"));
    if (key)
      json_object_set(*map, key, m);
    const json_t *flag = dtx__sync_get(m, r->fpath);
    if (flag) {
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
                           (long long)(now - dtx__int(flag, "at")));
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
    const json_t *want = dtx__sync_get(master, r->src[i]);
    const json_t *have = dtx__sync_get(dep, r->dst[i]);
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
  if (rc == 0)
    rc = filter ? dtx_store_find(a->st, r->dependents, filter, NULL, &deps)
                : DTX_ENOMEM;
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
    else if (!dtx__sync_get(m, r->fpath)) /* flagged: judged when settled */
      check_dependent(a, r, dep, m);
  }
  json_decref(deps);
  json_decref(masters);
  return 0;
}

int dtx__sync_audit(dtx__audit_t *a) {
  json_t *rules = NULL, *doc;
  const char *id;
  counts_t n = {0};
  int rc = dtx__audit_load(a, DTX__SYNC_RULES, &rules);
  if (rc)
    return rc;
  json_object_foreach(rules, id, doc) {
    dtx__sync_rule_t r;
    n.rules++;
    rc = dtx__sync_rule_parse(doc, &r);
    if (rc) {
      dtx__audit_finding(a, "bad_rule", "sync rule %s: %s", id,
                         dtx_errdetail());
      rc = 0;
    } else {
      rc = audit_rule(a, &r, &n);
    }
    dtx__sync_rule_free(&r);
    if (rc)
      break;
  }
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
