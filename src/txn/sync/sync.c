/* sync.c -- the sync flag (solution 1 of the reference, issue 10): a
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
 * Invariants (asserts check 1 and 4; the audit checks 2 and 3):
 *   1. a dependent's _sync.NAME only grows: every write demands it be
 *      lower than the version written (missing counts as lower), so a
 *      late or slow propagation never overwrites a newer value;
 *   2. a flag is cleared only by the change that set it, or by a repair
 *      that read it, and only after every dependent reflects at least the
 *      master's version read with it: the clear is conditioned on the
 *      flag's stamp, and each change writes a new stamp;
 *   3. a master without a flag has every dependent linked to it carrying
 *      its copied fields (when no one wrote around doctx);
 *   4. the master's version is >= 1 after a change, and a propagation
 *      writes at most the dependents it found.
 * A retried master step whose first attempt landed (its reply lost)
 * matches nothing (the filter demands another stamp): the stamp read back
 * says it was ours. */
#include "txn/sync/sync.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "util/err.h"

/* ---- rules ------------------------------------------------------------------ */

static int check_name(const char *name) {
  return dtx__check_word("sync rule name", name, 64, "_-");
}

/* The first segment of path is one of doctx's fields. */
static int reserved(const char *path) {
  static const char *const f[] = {DTX__SYNC_MASTER, DTX__SYNC_FLAG,
                                  DTX__SYNC_DEP, NULL};
  size_t n = strcspn(path, ".");
  for (int i = 0; f[i]; i++)
    if (strlen(f[i]) == n && strncmp(path, f[i], n) == 0)
      return 1;
  return 0;
}

static int check_path(const char *rule, const char *what, const char *path) {
  if (!path || !*path || strlen(path) > 200)
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path '%s': must be "
                    "1..200 bytes", rule, what, path ? path : "");
  if (dtx__path_check(path, DTX_EINVAL))
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path '%s': empty "
                    "segment or a segment starting with $", rule, what, path);
  if (reserved(path))
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path '%s' is one of "
                    "doctx's (%s, %s, %s)", rule, what, path, DTX__SYNC_MASTER,
                    DTX__SYNC_FLAG, DTX__SYNC_DEP);
  return 0;
}

/* a equals b, or one is a prefix of the other at a segment boundary. */
static int overlaps(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
  return strncmp(a, b, n) == 0 && (la == lb || (la < lb ? b : a)[n] == '.');
}

/* A protocol's own collections are guarded by its rules and read by its
 * recovery: copying into them, or versioning them, is not for users. */
static int check_coll(const char *rule, const char *what, const char *coll) {
  char w[200];
  snprintf(w, sizeof w, "sync rule %s: %s", rule, what);
  return dtx__check_user_coll(w, coll);
}

static int fmt_path(char *buf, size_t n, const char *a, const char *name,
                    const char *b) {
  int k = snprintf(buf, n, "%s.%s%s", a, name, b);
  return k > 0 && (size_t)k < n ? 0 : DTX_EINVAL;
}

int dtx__sync_rule_parse(const json_t *doc, dtx__sync_rule_t *r) {
  memset(r, 0, sizeof *r);
  r->doc = json_incref((json_t *)doc);
  r->name = dtx__str(doc, "_id");
  r->master = dtx__str(doc, "master");
  r->dependents = dtx__str(doc, "dependents");
  r->link = dtx__str(doc, "link");
  int rc = check_name(r->name);
  const char *n = r->name;
  if (rc == 0)
    rc = check_coll(n, "master", r->master);
  if (rc == 0)
    rc = check_coll(n, "dependents", r->dependents);
  if (rc == 0)
    rc = check_path(n, "link", r->link);
  if (rc == 0 && (strcmp(r->link, "_id") == 0 ||
                  strncmp(r->link, "_id.", 4) == 0))
    rc = dtx__err(DTX_EINVAL, "sync rule %s: the link field cannot be _id",
                  n);
  const json_t *copy = json_object_get(doc, "copy");
  if (rc == 0 && (!json_is_array(copy) || json_array_size(copy) == 0 ||
                  json_array_size(copy) > DTX__SYNC_MAX_COPY))
    rc = dtx__err(DTX_EINVAL, "sync rule %s: expected 1..%d SRC:DST pairs",
                  n, DTX__SYNC_MAX_COPY);
  for (size_t i = 0; rc == 0 && i < json_array_size(copy); i++) {
    const json_t *p = json_array_get(copy, i);
    const char *src = dtx__str(p, "src"), *dst = dtx__str(p, "dst");
    rc = check_path(n, "copied SRC", src);
    if (rc == 0)
      rc = check_path(n, "copied DST", dst);
    if (rc == 0 && (strcmp(dst, "_id") == 0 || strncmp(dst, "_id.", 4) == 0))
      rc = dtx__err(DTX_EINVAL, "sync rule %s: DST cannot be _id", n);
    if (rc == 0 && overlaps(dst, r->link))
      rc = dtx__err(DTX_EINVAL, "sync rule %s: DST '%s' overlaps the link "
                    "field '%s'", n, dst, r->link);
    for (size_t j = 0; rc == 0 && j < r->ncopy; j++)
      if (overlaps(dst, r->dst[j]))
        rc = dtx__err(DTX_EINVAL, "sync rule %s: DST '%s' %s '%s' (each "
                      "dependent field is written from one SRC)", n, dst,
                      strcmp(dst, r->dst[j]) == 0 ? "given twice, as"
                                                  : "overlaps",
                      r->dst[j]);
    if (rc == 0) {
      r->src[r->ncopy] = src;
      r->dst[r->ncopy++] = dst;
    }
  }
  if (rc == 0 && (fmt_path(r->vpath, sizeof r->vpath, DTX__SYNC_MASTER, n,
                           ".v") ||
                  fmt_path(r->spath, sizeof r->spath, DTX__SYNC_MASTER, n,
                           ".stamp") ||
                  fmt_path(r->fpath, sizeof r->fpath, DTX__SYNC_FLAG, n, "") ||
                  fmt_path(r->fstamp, sizeof r->fstamp, DTX__SYNC_FLAG, n,
                           ".stamp") ||
                  fmt_path(r->dpath, sizeof r->dpath, DTX__SYNC_DEP, n, "")))
    rc = dtx__err(DTX_EINVAL, "sync rule %s: name too long", n);
  return rc;
}

void dtx__sync_rule_free(dtx__sync_rule_t *r) {
  json_decref(r->doc);
  memset(r, 0, sizeof *r);
}

int dtx__sync_rule_load(dtx__exec_t *ex, const char *name,
                        dtx__sync_rule_t *r) {
  json_t *doc = NULL;
  memset(r, 0, sizeof *r);
  int rc = check_name(name);
  if (rc == 0)
    rc = dtx__kit_get(ex, DTX__SYNC_RULES, name, &doc);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no sync rule '%s'", name);
  if (rc == 0) {
    rc = dtx__sync_rule_parse(doc, r);
    if (rc) /* changed by hand around the validator: say which */
      rc = dtx__err_wrap(rc, "stored sync rule '%s' is not valid", name);
  }
  json_decref(doc);
  return rc;
}

/* "a:b,c:d" -> [{src:a, dst:b}, {src:c, dst:d}] (checked by
 * dtx__sync_rule_parse afterwards). */
static int parse_copy(const char *name, const char *spec, json_t **out) {
  *out = NULL;
  if (!spec || !*spec)
    return dtx__err(DTX_EINVAL, "sync rule %s: --copy SRC:DST[,SRC:DST...] "
                    "is required", name);
  json_t *arr = json_array();
  const char *p = spec;
  while (arr) {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    if (!colon || memchr(colon + 1, ':', len - (size_t)(colon - p) - 1) ||
        colon == p || colon + 1 == p + len) {
      json_decref(arr);
      return dtx__err(DTX_EINVAL, "sync rule %s: copy pair '%.*s': expected "
                      "SRC:DST", name, (int)len, p);
    }
    json_t *pair = json_pack("{s:s%,s:s%}", "src", p, (size_t)(colon - p),
                             "dst", colon + 1,
                             (size_t)(p + len - colon - 1));
    if (!pair || json_array_append_new(arr, pair)) {
      json_decref(arr);
      return DTX_ENOMEM;
    }
    if (!p[len])
      break;
    p += len + 1;
  }
  *out = arr;
  return arr ? 0 : DTX_ENOMEM;
}

static int same_rule(const json_t *a, const json_t *b) {
  static const char *const k[] = {"master", "dependents", "link", "copy",
                                  NULL};
  for (int i = 0; k[i]; i++)
    if (!json_equal(json_object_get(a, k[i]), json_object_get(b, k[i])))
      return 0;
  return 1;
}

/* The link index of the dependents, the flag's sparse index of the
 * masters: both idempotent, so every define may make them. */
static int rule_indexes(dtx_store_t *st, const dtx__sync_rule_t *r) {
  char at[200];
  snprintf(at, sizeof at, "%s.at", r->fpath);
  json_t *k1 = json_pack("{s:i}", r->link, 1), *k2 = json_pack("{s:i}", at, 1);
  dtx_index_opts_t sparse = {.sparse = 1};
  int rc = k1 && k2 ? dtx_store_create_index(st, r->dependents, k1, NULL, NULL)
                    : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx_store_create_index(st, r->master, k2, &sparse, NULL);
  json_decref(k1);
  json_decref(k2);
  return rc ? dtx__err_wrap(rc, "sync rule %s: creating its indexes", r->name)
            : 0;
}

int dtx_sync_rule_define(dtx_store_t *st, const dtx_sync_rule_t *rule,
                         json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__sync_rule_t r = {0};
  json_t *copy = NULL, *doc = NULL, *cur = NULL;
  if (out)
    *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = rule ? check_name(rule->name)
                : dtx__err(DTX_EINVAL, "sync rule: NULL");
  if (rc == 0)
    rc = parse_copy(rule->name, rule->copy, &copy);
  if (rc == 0 && !(doc = json_pack("{s:s,s:s?,s:s?,s:s?,s:O,s:I}", "_id",
                                   rule->name, "master", rule->master,
                                   "dependents", rule->dependents, "link",
                                   rule->link, "copy", copy, "created",
                                   (json_int_t)dtx__now_ms())))
    rc = DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__sync_rule_parse(doc, &r);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__sync_pattern);
  if (rc == 0) {
    rc = dtx__kit_get(&ex, DTX__SYNC_RULES, rule->name, &cur);
    if (rc == DTX_ENOTFOUND) {
      /* Indexes first: a rule on record is one any process may repair
       * through them. */
      rc = rule_indexes(st, &r);
      if (rc == 0)
        rc = dtx__kit_insert(&ex, "sync.rule", DTX__SYNC_RULES, doc);
      if (rc == 0)
        cur = json_incref(doc);
      else if (rc == DTX_EDUPKEY) /* a racing define, or a lost reply */
        rc = dtx__kit_get(&ex, DTX__SYNC_RULES, rule->name, &cur);
    } else if (rc == 0) {
      rc = rule_indexes(st, &r); /* a define that crashed in between */
    }
  }
  if (rc == 0 && !same_rule(cur, doc))
    rc = dtx__err(DTX_ECONFLICT, "sync rule '%s' exists with another "
                  "definition (rules are never replaced; choose a new name)",
                  rule->name);
  if (rc == 0 && out)
    *out = json_incref(cur);
  dtx__sync_rule_free(&r);
  json_decref(copy);
  json_decref(doc);
  json_decref(cur);
  return dtx__call_end(&c, rc);
}

int dtx_sync_rule_get(dtx_store_t *st, const char *name, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = check_name(name);
  if (rc == 0)
    rc = dtx__kit_get(&ex, DTX__SYNC_RULES, name, out);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no sync rule '%s'", name);
  return dtx__call_end(&c, rc);
}

/* ---- propagation ------------------------------------------------------------ */

const json_t *dtx__sync_get(const json_t *doc, const char *path) {
  char seg[256];
  while (doc && *path) {
    size_t n = strcspn(path, ".");
    if (!json_is_object(doc) || n >= sizeof seg)
      return NULL;
    memcpy(seg, path, n);
    seg[n] = '\0';
    doc = json_object_get(doc, seg);
    path += n + (path[n] == '.');
  }
  return doc;
}

int64_t dtx__sync_version(const dtx__sync_rule_t *r, const json_t *master) {
  const json_t *v = dtx__sync_get(master, r->vpath);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* {$set: {DST: master's SRC..., _sync.NAME: v}, $unset: {DST whose SRC the
 * master lacks}} */
static json_t *copy_update(const dtx__sync_rule_t *r, const json_t *master,
                           int64_t v) {
  json_t *set = json_object(), *unset = json_object();
  for (size_t i = 0; set && unset && i < r->ncopy; i++) {
    const json_t *val = dtx__sync_get(master, r->src[i]);
    if (val)
      json_object_set(set, r->dst[i], (json_t *)val);
    else
      json_object_set_new(unset, r->dst[i], json_string(""));
  }
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
  json_t *filter = json_pack("{s:O}", r->link, id), *deps = NULL, *dep;
  int rc = filter ? dtx__kit_find(ex, r->dependents, filter, NULL, &deps)
                  : DTX_ENOMEM;
  json_decref(filter);
  size_t i, found = json_array_size(deps);
  json_array_foreach(deps, i, dep) {
    if (rc)
      break;
    int matched = 0;
    /* I1: only a dependent reflecting an older version (or none). */
    rc = dtx__kit_update(
        ex, point, r->dependents,
        json_pack("{s:O,s:O,s:{s:{s:I}}}", "_id", json_object_get(dep, "_id"),
                  r->link, id, r->dpath, "$not", "$gte", (json_int_t)v),
        copy_update(r, master, v), &matched);
    if (rc == 0 && matched)
      ++*written;
  }
  assert(*written <= (int64_t)found); /* I4 */
  (void)found;
  json_decref(deps);
  return rc;
}

int dtx__sync_clear(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                    const json_t *master_id, const char *stamp,
                    const char *point, int *cleared) {
  /* I2: only the flag this change (or this repair) read. */
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
  return dtx__check_op_update(what, u, reserved, "the master",
                              DTX__SYNC_MASTER ", " DTX__SYNC_FLAG " and "
                              DTX__SYNC_DEP);
}

/* UPDATE + $inc v + $set {stamp, flag}: the master step's update. */
static json_t *master_update(const dtx__exec_t *ex, const dtx__sync_rule_t *r,
                             const json_t *update, const char *stamp) {
  int64_t now = dtx__now_ms();
  json_t *u = json_deep_copy(update);
  json_t *inc = json_object_get(u, "$inc"), *set = json_object_get(u, "$set");
  if (!u)
    return NULL;
  if (!inc)
    json_object_set_new(u, "$inc", inc = json_object());
  if (!set)
    json_object_set_new(u, "$set", set = json_object());
  if (!json_is_object(inc) || !json_is_object(set))
    return u; /* the store refuses the bad argument, naming it */
  json_object_set_new(inc, r->vpath, json_integer(1));
  json_object_set_new(set, r->spath, json_string(stamp));
  json_object_set_new(set, r->fpath,
                      json_pack("{s:s,s:s,s:I,s:I}", "stamp", stamp, "owner",
                                ex->owner, "at", (json_int_t)now, "until",
                                (json_int_t)(now + ex->lease_ms)));
  return u;
}

static int master_step(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                       const char *id, const json_t *update, json_t **out) {
  char stamp[25];
  dtx__id_new(stamp);
  int rc = dtx__kit_modify(
      ex, "sync.master", r->master,
      json_pack("{s:s,s:{s:s}}", "_id", id, r->spath, "$ne", stamp),
      master_update(ex, r, update, stamp), NULL, out);
  if (rc != DTX_ENOMATCH)
    return rc;
  /* Nothing matched: no such master -- or our own first attempt landed
   * and its reply was lost (the stamp then says so). */
  dtx__err_clear();
  rc = dtx__kit_get(ex, r->master, id, out);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_ENOTFOUND, "sync rule %s: no master '%s' in %s",
                    r->name, id, r->master);
  const json_t *mine = dtx__sync_get(*out, r->spath);
  if (rc == 0 && !(json_is_string(mine) &&
                   strcmp(json_string_value(mine), stamp) == 0)) {
    json_decref(*out);
    *out = NULL;
    rc = dtx__err(DTX_EUNAVAILABLE, "sync rule %s: master '%s': the outcome "
                  "of the update is unknown (a reply was lost and another "
                  "change followed); the master's flag leads repair to "
                  "propagate whatever it holds", r->name, id);
  }
  return rc;
}

int dtx_sync_update(dtx_store_t *st, const char *rule, const char *master_id,
                    const json_t *update, const dtx_exec_opts_t *opts,
                    json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__sync_rule_t r = {0};
  json_t *m = NULL;
  int64_t written = 0;
  int cleared = 0;
  if (out)
    *out = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = check_name(rule);
  if (rc == 0 && (!master_id || !*master_id || strlen(master_id) > 1024))
    rc = dtx__err(DTX_EINVAL, "sync update %s: MASTER_ID must be 1..1024 "
                  "bytes", rule);
  if (rc == 0)
    rc = check_update(rule, update);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__sync_pattern);
  if (rc == 0)
    rc = dtx__sync_rule_load(&ex, rule, &r);
  if (rc == 0)
    rc = master_step(&ex, &r, master_id, update, &m);
  const json_t *flag = dtx__sync_get(m, r.fpath);
  const char *stamp = dtx__str(flag, "stamp");
  assert(rc || dtx__sync_version(&r, m) >= 1); /* I4 */
  if (rc == 0)
    rc = dtx__sync_propagate(&ex, &r, m, "sync.propagate", &written);
  if (rc == 0 && stamp)
    rc = dtx__sync_clear(&ex, &r, json_object_get(m, "_id"), stamp,
                         "sync.clear", &cleared);
  if (rc == 0 && out &&
      !(*out = json_pack("{s:s,s:s,s:I,s:I,s:b}", "rule", rule, "master",
                         master_id, "version",
                         (json_int_t)dtx__sync_version(&r, m),
                         "dependents", (json_int_t)written, "flag_cleared",
                         cleared)))
    rc = DTX_ENOMEM;
  json_decref(m);
  dtx__sync_rule_free(&r);
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
    const json_t *flag = dtx__sync_get(m, r->fpath), *id;
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
    rc = dtx__sync_rule_parse(doc, &r);
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
 * validator already refuses. */
static const dtx__rules_def_t rules[] = {
    {DTX__SYNC_RULES,
     "{\"$jsonSchema\":{\"bsonType\":\"object\","
     "\"required\":[\"_id\",\"master\",\"dependents\",\"link\",\"copy\"],"
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
     "{\"_id\":{\"$type\":\"number\"}}", NULL},
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
