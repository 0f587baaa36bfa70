/* sync.c -- the sync flag (solution 1 of the reference): a
 * change of a master document (a user's name) copied into its dependents
 * (the user's comments), with a flag that lets any process finish a
 * change that was interrupted.  docs/sync.md has the long form.
 *
 * One master, one rule NAME (fields: _syncm.NAME {v, stamp}, the flag
 * _syncing.NAME {stamp, owner, at, until}; a dependent's _sync.NAME):
 *
 *            change S: UPDATE, v+1, stamp S, flag S    (ONE atomic step)
 *   clean ------------------------------------------------> flagged(S, v)
 *     ^                                                         |
 *     |                 each dependent with _sync.NAME < v:     |
 *     |                 copied fields, _sync.NAME = v           |
 *     |                                                         v
 *     +------ clear iff the flag is still S ------------ propagated(S, v)
 *     |
 *     |      another change S2 meanwhile: flagged(S2, v+1); S's clear
 *     |      then matches nothing and S2's (or a repair) clears it
 *     |
 *     +-- repair (flag S' stale): copy the master as it is now (v'),
 *         clear iff the flag is still S'
 *
 *   transition                 function                fault point
 *   (rule recorded)            dtx_sync_rule_define    sync.rule
 *   clean -> flagged           dtx_sync_update         sync.master
 *   flagged: dependents        dtx__sync_propagate     sync.propagate
 *   propagated -> clean        dtx__sync_clear         sync.clear
 *   stale flagged: dependents  recover()               sync.repair.propagate
 *   stale flagged -> clean     recover()               sync.repair.clear
 *
 * Invariants (the steps' filters make S1 and S2 hold; DTX_ASSERT checks
 * S4's bound in every build; the audit checks S2 and S3):
 *  S1 a dependent's _sync.NAME only grows: every write demands it be
 *     lower than the version written (missing counts as lower), so a
 *     late or slow propagation never overwrites a newer value;
 *  S2 a flag is cleared only by the change that set it, or by a repair
 *     that read it, and only after every dependent reflects at least the
 *     master's version read with it: the clear is conditioned on the
 *     flag's stamp, and each change writes a new stamp;
 *  S3 a master without a flag has every dependent linked to it carrying
 *     its copied fields (when no one wrote around doctx);
 *  S4 the master's version is >= 1 after a change (its $inc; a master
 *     written past its rules may hold anything, so this is not asserted),
 *     and a propagation writes at most the dependents it found.
 * A retried master step whose first attempt landed (its reply lost)
 * matches nothing (the filter demands another stamp): the stamp read back
 * says it was ours.
 *
 * Rules sharing a master (docs/sync.md): the diagram runs once per rule.
 * A change through NAME takes every rule on the same master collection
 * whose SRC fields its UPDATE can change (affected()), and its ONE master
 * step moves each of them clean/flagged -> flagged(S, v_rule) with one
 * stamp S; each is then propagated and cleared on its own, and each
 * rule's repair finds its own flag.  So S3 holds for every rule
 * after any crash, not only for the rule named. */
#include "txn/sync/sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "util/assert.h"
#include "util/err.h"

/* ---- propagation ------------------------------------------------------------ */

int64_t dtx__sync_version(const dtx__sync_rule_t *r, const json_t *master) {
  const json_t *v = dtx__path_get(master, r->vpath);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* {$set: {DST: master's SRC..., _sync.NAME: v}, $unset: {DST whose SRC the
 * master lacks}} */
static json_t *copy_update(const dtx__sync_rule_t *r, const json_t *master,
                           int64_t v) {
  json_t *set = json_object(), *unset = json_object();
  for (size_t i = 0; set && unset && i < r->ncopy; i++) {
    const json_t *val = dtx__path_get(master, r->src[i]);
    if (val)
      json_object_set(set, r->dst[i], (json_t *)val);
    else
      json_object_set_new(unset, r->dst[i], json_string(""));
  }
  DTX_ASSERT(v >= 1, "S1"); /* the version the write stamps, checked */
  if (set)
    json_object_set_new(set, r->dpath, json_integer((json_int_t)v));
  json_t *u = set && unset ? json_pack("{s:O}", "$set", set) : NULL;
  if (u && json_object_size(unset))
    json_object_set(u, "$unset", unset);
  json_decref(set);
  json_decref(unset);
  return u;
}

int dtx__sync_propagate(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                        const json_t *master, const char *point,
                        int64_t *written) {
  const json_t *id = json_object_get(master, "_id");
  int64_t v = dtx__sync_version(r, master);
  *written = 0;
  if (v < 1)
    return dtx__err(DTX_ECONFLICT, "sync rule %s: master has no version "
                    "(%s)", r->name, r->vpath);
  DTX_ASSERT(r->ncopy >= 1 && r->ncopy <= DTX__SYNC_MAX_COPY, "S3");
  json_t *filter = json_pack("{s:O}", r->link, id), *deps = NULL, *dep;
  int rc = filter ? dtx__kit_find(ex, r->dependents, filter, NULL, &deps)
                  : DTX_ENOMEM;
  json_decref(filter);
  size_t i, found = json_array_size(deps);
  json_array_foreach(deps, i, dep) {
    if (rc)
      break;
    int matched = 0;
    /* S1: only a dependent reflecting an older version (or none). */
    rc = dtx__kit_update(
        ex, point, r->dependents,
        json_pack("{s:O,s:O,s:{s:{s:I}}}", "_id", json_object_get(dep, "_id"),
                  r->link, id, r->dpath, "$not", "$gte", (json_int_t)v),
        copy_update(r, master, v), &matched);
    if (rc == 0 && matched)
      ++*written;
  }
  DTX_ASSERT(*written <= (int64_t)found, "S4");
  json_decref(deps);
  return rc;
}

int dtx__sync_clear(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                    const json_t *master_id, const char *stamp,
                    const char *point, int *cleared) {
  /* S2: only the flag this change (or this repair) read. */
  DTX_ASSERT(stamp && master_id, "S2");
  return dtx__kit_update(
      ex, point, r->master,
      json_pack("{s:O,s:s}", "_id", master_id, r->fstamp, stamp),
      json_pack("{s:{s:s}}", "$unset", r->fpath, ""), cleared);
}

/* ---- a change ------------------------------------------------------------- */

/* An operator update that leaves doctx's fields alone. */
static int check_update(const char *rule, const json_t *u) {
  char what[96];
  snprintf(what, sizeof what, "sync update %s", rule);
  return dtx__check_op_update(what, u, dtx__sync_reserved, "the master",
                              DTX__SYNC_MASTER ", " DTX__SYNC_FLAG " and "
                              DTX__SYNC_DEP);
}

/* One segment of an UPDATE's path against one of a SRC's: a positional
 * ($, $[], $[id]) or numeric segment may stand for any field, so it
 * matches whatever the SRC holds there. */
static int seg_hits(const char *u, size_t un, const char *s, size_t sn) {
  int wild = un > 0 && u[0] == '$';
  for (size_t i = 0; !wild && i < un && u[i] >= '0' && u[i] <= '9'; i++)
    wild = i + 1 == un;
  return wild || (un == sn && memcmp(u, s, un) == 0);
}

/* Does writing upath change what src reads (one path inside, or equal
 * to, the other)? */
static int path_hits(const char *upath, const char *src) {
  while (*upath && *src) {
    size_t un = strcspn(upath, "."), sn = strcspn(src, ".");
    if (!seg_hits(upath, un, src, sn))
      return 0;
    upath += un + (upath[un] == '.');
    src += sn + (src[sn] == '.');
  }
  return 1;
}

/* Can UPDATE change a field rule r copies?  Every operator doctx knows
 * names the paths it writes as its keys ($rename its values too); an
 * operator it does not know counts as writing everything, so a rule is
 * never left out by a guess. */
static int update_hits(const json_t *u, const dtx__sync_rule_t *r) {
  static const char *const known[] = {
      "$set", "$unset", "$inc", "$mul", "$min", "$max", "$rename",
      "$currentDate", "$push", "$pull", "$pullAll", "$addToSet", "$pop",
      "$bit", "$setOnInsert", NULL};
  const char *op, *path;
  json_t *args, *v;
  json_object_foreach((json_t *)u, op, args) {
    int k = 0;
    while (known[k] && strcmp(known[k], op) != 0)
      k++;
    if (!known[k] || !json_is_object(args))
      return 1;
    json_object_foreach(args, path, v) {
      const char *to = strcmp(op, "$rename") == 0 && json_is_string(v)
                           ? json_string_value(v) : NULL;
      for (size_t i = 0; i < r->ncopy; i++)
        if (path_hits(path, r->src[i]) || (to && path_hits(to, r->src[i])))
          return 1;
    }
  }
  return 0;
}

/* The rules a change of a master through rule `named` must propagate
 * (docs/sync.md "Rules sharing a master"): named itself (first, taken
 * over: *named is emptied), and every other rule on the same master
 * collection whose copied fields UPDATE can change.  A stored rule that
 * is not valid is left out: rules are immutable, so one can only be
 * written so by hand (the audit reports it, bad_rule), and refusing every
 * change for it would let one plain insert stop all of them. */
static int affected(dtx__exec_t *ex, dtx__sync_rule_t *named,
                    const json_t *update, dtx__sync_rule_t **set,
                    size_t *n) {
  dtx__sync_rule_t *all = NULL;
  size_t nall = 0;
  json_t *q = json_pack("{s:s}", "master", named->master);
  int rc = q ? dtx__sync_rules_all(ex, q, &all, &nall) : DTX_ENOMEM;
  json_decref(q);
  *set = NULL;
  *n = 0;
  if (rc == 0 && !(*set = calloc(nall + 1, sizeof **set)))
    rc = DTX_ENOMEM;
  if (rc == 0) {
    (*set)[(*n)++] = *named;
    memset(named, 0, sizeof *named);
    for (size_t i = 0; i < nall; i++) {
      if (strcmp(all[i].name, (*set)[0].name) == 0 ||
          !update_hits(update, &all[i]))
        continue;
      (*set)[(*n)++] = all[i];
      memset(&all[i], 0, sizeof all[i]);
    }
    DTX_ASSERT(*n >= 1 && *n <= nall + 1, "S3"); /* the named rule first */
  }
  dtx__sync_rules_free(all, nall);
  return rc;
}

/* UPDATE + for every rule of set: $inc v, $set {stamp, flag} -- the
 * master step's update (one stamp for the whole change). */
static json_t *master_update(const dtx__exec_t *ex,
                             const dtx__sync_rule_t *set, size_t n,
                             const json_t *update, const char *stamp) {
  int64_t now = dtx__now_ms();
  json_t *u = json_deep_copy(update);
  json_t *inc = json_object_get(u, "$inc"), *set_ = json_object_get(u, "$set");
  if (!u)
    return NULL;
  if (!inc)
    json_object_set_new(u, "$inc", inc = json_object());
  if (!set_)
    json_object_set_new(u, "$set", set_ = json_object());
  if (!json_is_object(inc) || !json_is_object(set_))
    return u; /* the store refuses the bad argument, naming it */
  DTX_ASSERT(n >= 1 && stamp, "S2"); /* one stamp for the whole change */
  for (size_t i = 0; i < n; i++) {
    const dtx__sync_rule_t *r = &set[i];
    json_object_set_new(inc, r->vpath, json_integer(1));
    json_object_set_new(set_, r->spath, json_string(stamp));
    json_object_set_new(set_, r->fpath,
                        json_pack("{s:s,s:s,s:I,s:I}", "stamp", stamp, "owner",
                                  ex->owner, "at", (json_int_t)now, "until",
                                  (json_int_t)(now + ex->lease_ms)));
  }
  return u;
}

static int master_step(dtx__exec_t *ex, const dtx__sync_rule_t *set,
                       size_t n, const char *id, const json_t *update,
                       json_t **out) {
  const dtx__sync_rule_t *r = &set[0];
  char stamp[25];
  dtx__id_new(stamp);
  DTX_ASSERT(n >= 1 && id, "S2");
  int rc = dtx__kit_modify(
      ex, "sync.master", r->master,
      json_pack("{s:s,s:{s:s}}", "_id", id, r->spath, "$ne", stamp),
      master_update(ex, set, n, update, stamp), NULL, out);
  if (rc != DTX_ENOMATCH)
    return rc;
  /* Nothing matched: no such master -- or our own first attempt landed
   * and its reply was lost (the stamp then says so). */
  dtx__err_clear();
  rc = dtx__kit_get(ex, r->master, id, out);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_ENOTFOUND, "sync rule %s: no master '%s' in %s",
                    r->name, id, r->master);
  const json_t *mine = dtx__path_get(*out, r->spath);
  if (rc == 0 && !(json_is_string(mine) &&
                   strcmp(json_string_value(mine), stamp) == 0)) {
    json_decref(*out);
    *out = NULL;
    rc = dtx__err(DTX_EUNAVAILABLE, "sync rule %s: master '%s': the outcome "
                  "of the update is unknown (a reply was lost and another "
                  "change followed); the master's flag leads repair to "
                  "propagate whatever it holds", r->name, id);
  }
  /* S2: the step that returns is this change's: its own stamp. */
  DTX_ASSERT(rc || (json_is_string(dtx__path_get(*out, r->spath)) &&
                    strcmp(json_string_value(dtx__path_get(*out, r->spath)),
                           stamp) == 0),
             "S2");
  return rc;
}

/* Propagates rule r of a change whose master step returned m and clears
 * its flag if it is still this change's; *res gets {rule, version,
 * dependents, flag_cleared}. */
static int finish_rule(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                       const json_t *m, json_t **res) {
  int64_t written = 0;
  int cleared = 0;
  const char *stamp = dtx__str(dtx__path_get(m, r->fpath), "stamp");
  int rc = dtx__sync_propagate(ex, r, m, "sync.propagate", &written);
  if (rc == 0 && stamp)
    rc = dtx__sync_clear(ex, r, json_object_get(m, "_id"), stamp,
                         "sync.clear", &cleared);
  *res = json_pack("{s:s,s:I,s:I,s:b}", "rule", r->name, "version",
                   (json_int_t)dtx__sync_version(r, m), "dependents",
                   (json_int_t)written, "flag_cleared", cleared);
  return rc ? rc : *res ? 0 : DTX_ENOMEM;
}

int dtx_sync_update(dtx_store_t *st, const char *rule, const char *master_id,
                    const json_t *update, const dtx_exec_opts_t *opts,
                    json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__sync_rule_t r = {0}, *set = NULL;
  size_t n = 0;
  json_t *m = NULL, *res = NULL, *also = json_array();
  if (out)
    *out = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = also ? dtx__sync_check_name(rule) : DTX_ENOMEM;
  if (rc == 0 && (!master_id || !*master_id || strlen(master_id) > 1024))
    rc = dtx__err(DTX_EINVAL, "sync update %s: MASTER_ID must be 1..1024 "
                  "bytes", rule);
  else if (rc == 0 && !dtx__utf8_ok(master_id, strlen(master_id)))
    rc = dtx__err(DTX_EINVAL, "sync update %s: MASTER_ID is not valid UTF-8",
                  rule);
  if (rc == 0)
    rc = check_update(rule, update);
  /* Reads only, up to here: a missing rule, or one the change cannot
   * honour, creates nothing (no collection, index or rule). */
  if (rc == 0)
    rc = dtx__sync_rule_load(&ex, rule, &r);
  if (rc == 0)
    rc = affected(&ex, &r, update, &set, &n);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__sync_pattern);
  if (rc == 0)
    rc = master_step(&ex, set, n, master_id, update, &m);
  /* Every rule the change touched carries its flag now (one step): each
   * is propagated and cleared, the first error kept; what is left
   * flagged, repair finishes. */
  for (size_t i = 0; m && i < n; i++) {
    json_t *one = NULL;
    int rc1 = finish_rule(&ex, &set[i], m, &one);
    if (rc == 0)
      rc = rc1;
    if (i == 0)
      res = one;
    else if (one)
      json_array_append_new(also, one);
  }
  if (rc == 0 && out) {
    *out = json_pack("{s:s,s:s,s:O,s:O,s:O,s:O}", "rule", rule, "master",
                     master_id, "version", json_object_get(res, "version"),
                     "dependents", json_object_get(res, "dependents"),
                     "flag_cleared", json_object_get(res, "flag_cleared"),
                     "also", also);
    if (!*out)
      rc = DTX_ENOMEM;
  }
  json_decref(m);
  json_decref(res);
  json_decref(also);
  dtx__sync_rule_free(&r);
  dtx__sync_rules_free(set, n);
  return dtx__call_end(&c, rc);
}

/* ---- repair ------------------------------------------------------------------ */

/* Repairs the stale flags of one rule. */
static void repair_rule(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                        const dtx_recover_opts_t *o, dtx__tally_t *t) {
  int64_t now = dtx__now_ms();
  char at[200];
  snprintf(at, sizeof at, "%s.at", r->fpath);
  json_t *filter = json_pack("{s:{s:b}}", at, "$exists", 1), *list = NULL, *m;
  int rc = filter ? dtx__kit_find(ex, r->master, filter, NULL, &list)
                  : DTX_ENOMEM;
  json_decref(filter);
  if (rc) {
    dtx__tally_error(t, NULL, rc);
    return;
  }
  size_t i;
  json_array_foreach(list, i, m) {
    const json_t *flag = dtx__path_get(m, r->fpath), *id;
    const char *stamp = dtx__str(flag, "stamp");
    int stale = dtx__kit_abandoned(o, dtx__int(flag, "at"),
                                   dtx__int(flag, "until"), now);
    id = json_object_get(m, "_id");
    if (!stale) {
      dtx__tally_skip(t, "flag not stale", id);
      continue;
    }
    if (!stamp) {
      rc = dtx__err(DTX_ECONFLICT, "sync rule %s: a flag without a stamp "
                    "(changed by hand)", r->name);
      dtx__tally_error(t, id, rc);
      continue;
    }
    DTX_ASSERT(stale, "S2"); /* a repair takes only an abandoned flag */
    /* m is the master as it is now: its values and version travel
     * together, and the clear below happens only if no change came since
     * (a new change writes a new stamp). */
    int64_t written = 0;
    int cleared = 0;
    rc = dtx__sync_propagate(ex, r, m, "sync.repair.propagate", &written);
    if (rc == 0)
      rc = dtx__sync_clear(ex, r, id, stamp, "sync.repair.clear", &cleared);
    if (rc) {
      dtx__tally_error(t, id, rc);
      continue;
    }
    dtx__tally_ran(t, "dependents_updated", written);
    if (cleared)
      dtx__tally_ran(t, "repaired", 1);
    else
      dtx__tally_skip(t, "newer change owns the flag", id);
  }
  json_decref(list);
}

static int recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                   dtx__tally_t *t) {
  json_t *rules = NULL, *doc;
  size_t i;
  int rc = dtx__kit_find(ex, DTX__SYNC_RULES, NULL, NULL, &rules);
  if (rc)
    return rc;
  json_array_foreach(rules, i, doc) {
    dtx__sync_rule_t r;
    int missing = 0;
    rc = dtx__sync_rule_parse(doc, &r);
    /* A rule's guard (docs/sync.md "What a plain write can do") comes
     * back if someone replaced its masters' transition rules. */
    if (rc == 0)
      rc = dtx__sync_guard(ex->st, &r, 0, NULL, 0, &missing);
    if (rc == 0 && missing)
      dtx__tally_ran(t, "guards_installed", 1);
    if (rc == 0)
      repair_rule(ex, &r, o, t);
    else
      dtx__tally_error(t, json_object_get(doc, "_id"), rc);
    dtx__sync_rule_free(&r);
  }
  json_decref(rules);
  return 0;
}

int dtx_sync_repair(dtx_store_t *st, const dtx_recover_opts_t *opts,
                    json_t **summary) {
  dtx_recover_opts_t o = {.older_than_ms = -1};
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__tally_t t = {0};
  if (summary)
    *summary = NULL;
  if (opts) {
    o.older_than_ms = opts->older_than_ms;
    o.deadline_ms = opts->deadline_ms;
  }
  dtx__exec_init(&ex, st, NULL, 0, o.deadline_ms);
  dtx__exec_rename(&ex, "repair@%.120s", ex.owner);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = dtx__tally_init(&t);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__sync_pattern);
  if (rc == 0)
    rc = recover(&ex, &o, &t);
  if (rc)
    dtx__tally_error(&t, NULL, rc);
  if (rc == 0 && t.first_err) {
    /* the first item error, with its detail, as the call's error */
    json_t *e = json_array_get(
        json_object_get(json_object_get(t.obj, "errors"), "first"), 0);
    const char *detail = dtx__str(e, "detail"), *id = dtx__str(e, "id");
    rc = dtx__err(t.first_err, "sync repair%s%s: %s", id ? " of " : "",
                  id ? id : "", detail ? detail : "");
  }
  if (summary && t.obj) {
    *summary = json_deep_copy(t.obj);
    if (*summary)
      json_object_set_new(*summary, "ok", json_boolean(rc == 0));
  }
  dtx__tally_free(&t);
  return dtx__call_end(&c, rc);
}

/* ---- the table ---------------------------------------------------------------- */

/* Rules are never deleted (a flag in flight needs its rule to be
 * repaired): the guard demands an _id that is not a string, which the
 * validator already refuses.  Nor changed: a flag in flight must be
 * repaired under the rule its change was made with, so every field of a
 * rule is immutable (its transition rule), as `sync rule` never replaces
 * one. */
static const dtx__rules_def_t rules[] = {
    {DTX__SYNC_RULES,
     "{\"$jsonSchema\":{\"bsonType\":\"object\","
     "\"required\":[\"_id\",\"master\",\"dependents\",\"link\",\"copy\"],"
     "\"additionalProperties\":false,"
     "\"properties\":{\"_id\":{\"bsonType\":\"string\"},"
     "\"master\":{\"bsonType\":\"string\"},"
     "\"dependents\":{\"bsonType\":\"string\"},"
     "\"link\":{\"bsonType\":\"string\"},"
     "\"copy\":{\"bsonType\":\"array\",\"minItems\":1,\"maxItems\":64,"
     "\"items\":{\"bsonType\":\"object\",\"required\":[\"src\",\"dst\"],"
     "\"additionalProperties\":false,"
     "\"properties\":{\"src\":{\"bsonType\":\"string\"},"
     "\"dst\":{\"bsonType\":\"string\"}}}},"
     "\"created\":{\"bsonType\":\"long\"}}}}",
     "{\"_id\":{\"$type\":\"number\"}}",
     "{\"immutable\":[\"master\",\"dependents\",\"link\",\"copy\","
     "\"created\"]}"},
    {NULL, NULL, NULL, NULL},
};

static const char *const collections[] = {DTX__SYNC_RULES, NULL};
static const dtx__index_def_t indexes[] = {{NULL, NULL, 0, 0}};
static const char *const points[] = {
    "sync.rule",           "sync.master",       "sync.propagate",
    "sync.clear",          "sync.repair.propagate", "sync.repair.clear",
    NULL};

const dtx__pattern_t dtx__sync_pattern = {
    .name = "sync",
    .kind = NULL,
    .collections = collections,
    .indexes = indexes,
    .fault_points = points,
    .claim_next = NULL,
    .drive = NULL,
    .recover = recover,
    .audit = dtx__sync_audit,
    .rules = rules,
};
