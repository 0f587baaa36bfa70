/* version.c -- versioned documents (reference solution 5): an item is a
 * root plus children, stored per version; readers see the tree of one
 * committed version, never a mix.  This file holds the state machine of a
 * version, writing (put), reading (get, history), the collection rules and
 * the method table; clean.c removes what is unreachable, audit.c checks.
 *
 * One root document per item (version_roots) is the single commit point:
 * it holds the committed version, the counter of reserved numbers (next),
 * the reservations in flight (res), the committed versions kept (log) and
 * the versions to clean (trash).  A version V has a record (versions,
 * "ITEM/V": its root document and its children map KEY -> W, the version
 * that wrote that child) and the children it wrote (version_children,
 * "ITEM/V/KEY").  A child not named in a put is carried over by reference:
 * the map keeps the older W, so a put writes only what changed.
 *
 *            reserve (root: next+1, res.V = {owner, token, until})
 *   (none) ------------------------------------------------> reserved
 *                                                             |  record,
 *                                                             |  children
 *                                                             v
 *   committed <--- commit (root: version B -> V, res.V out, -- written
 *     |             log += V; ONE step, only if the root is     |
 *     |             still at B and res.V still holds the token) |
 *     |                                                         | lost the race
 *     | gc: superseded > grace, not among the last N            | (owner), or the
 *     v     (root: log -= V, trash += V; ONE step)              | lease lapsed
 *   trashed <-----------------------------------------------   | (recovery):
 *     |            abandon (root: res.V out, trash += V; ONE step)
 *     | sweep/drop: mark dead, delete (what nothing kept refers to),
 *     v             then trash -= V
 *   (gone)
 *
 *   transition                 function              fault point
 *   (root created)             read_root()           version.root
 *   (none) -> reserved         reserve()             version.reserve
 *   reserved: record           put_once()            version.record
 *   reserved: each new child   put_once()            version.child
 *   reserved -> committed      put_once()            version.commit
 *   reserved -> trashed        dtx__vr_abandon()     version.abandon
 *   committed -> trashed       gc_item()             version.gc
 *   trashed: doc marked dead   dtx__vr_sweep/drop()  version.mark
 *   trashed: dead doc deleted  dtx__vr_sweep/drop()  version.delete
 *   trashed -> (gone)          dtx__vr_sweep/drop()  version.trash
 *
 * Invariants (DTX_ASSERT checks V1, V3 and V5 where a step can, in every
 * build; dtx_audit all):
 *  V1 Version numbers are never reused: each is next+1 taken by one
 *     conditional step on the root's counter, which only grows.  So two
 *     writers never write children under one version, and a child's _id
 *     names the only writer that could insert it (inserts, never
 *     upserts: a late writer cannot overwrite).
 *  V2 Only a reserved version is committed (the commit demands res.V with
 *     the writer's token), and abandoning removes res.V in the same step
 *     that trashes V: a version recovery abandoned never becomes visible,
 *     whatever its late writer does, and neither does a crashed writer's
 *     after a later writer commits.
 *  V3 The committed version only grows: a commit demands the version it
 *     built on (B), and B < V because V was reserved after B was read.
 *     log lists the committed versions kept, ascending, ending with it.
 *  V4 Every version in log has its record, and every child its map names
 *     exists; a map names only committed versions' children (W <= V).
 *     Records and children are immutable until they are unreachable.
 *  V5 Nothing is deleted while reachable: a child goes only when no
 *     version in log names it and its version is neither reserved nor
 *     newer than the root read; a record only when its version is in
 *     neither log nor res.  gc trims only versions superseded more than
 *     the grace ago, so a reader that started before can still finish
 *     (a slower reader finds a child gone and reads again from the root:
 *     it never mixes versions).
 *  V6 A reader takes the root's committed version, then that version's
 *     record and exactly the children its map names.
 *  V7 Committed history does not change: every record and child is
 *     inserted with "sum", the digest of its content (dtx__vr_sum), and
 *     the root's sum_from is the first version written so (1 for an item
 *     created since; set by the first commit on an older root).  A read
 *     refuses, and the audit reports (history_changed), a kept document
 *     whose digest does not match, or is missing from version sum_from
 *     on.  The digest is no signature: it catches a document rewritten
 *     with the generic commands, not a forger who recomputes it.
 *  V8 The generic commands cannot break V1-V5 (docs/validation.md,
 *     "Transition rules"): a root's version, next and sum_from only grow;
 *     a record or child never changes while it lives, "dead" included --
 *     the one write that marks it is clean.c's kill_doc, made past the
 *     rules once the root said it is unreachable (V5), and the delete
 *     guard demands the mark.  A writer takes a DUPKEY on its insert for
 *     its own lost reply only when the stored document has its digest and
 *     no mark (own_insert): one inserted by hand first stops the commit.
 *     The root's validator keeps next below INT64_MAX, so a number is
 *     always left to reserve -- but the last, which no put takes.  What
 *     single-document rules cannot judge of a root (its version against
 *     its log), or what was written past them, stops writes and sweeps
 *     there (dtx__vr_root_check) and is the audit's to report: every root
 *     that check refuses is a finding.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/version/version.h"
#include "util/assert.h"
#include "util/err.h"

/* ---- ids and root helpers ----------------------------------------------------- */

void dtx__vr_rec_id(char *buf, const char *item, int64_t v) {
  snprintf(buf, VR_ID_MAX, "%s/%lld", item, (long long)v);
}

void dtx__vr_child_id(char *buf, const char *item, int64_t w,
                      const char *key) {
  snprintf(buf, VR_ID_MAX, "%s/%lld/%s", item, (long long)w, key);
}

int dtx__vr_in_log(const json_t *root, int64_t v) {
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(root, "log"), i, e) {
    if (dtx__int(e, "v") == v)
      return 1;
  }
  return 0;
}

const json_t *dtx__vr_res(const json_t *root, int64_t v) {
  char k[24];
  snprintf(k, sizeof k, "%lld", (long long)v);
  return json_object_get(json_object_get(root, "res"), k);
}

/* The fields a version's content is: whatever else a record or a child
 * holds (owner, created, dead) may change without changing what a reader
 * is shown. */
int dtx__vr_sum(const json_t *doc, int child, char out[17]) {
  static const char *const rec_fields[] = {"item", "version", "base", "root",
                                           "children", NULL};
  static const char *const child_fields[] = {"item", "version", "key", "doc",
                                             NULL};
  json_t *a = json_array();
  int rc = a ? 0 : DTX_ENOMEM;
  for (const char *const *f = child ? child_fields : rec_fields; rc == 0 && *f;
       f++) {
    json_t *v = json_object_get(doc, *f);
    if (json_array_append(a, v ? v : json_null()) < 0)
      rc = DTX_ENOMEM;
  }
  if (rc == 0)
    rc = dtx__json_digest(a, out);
  json_decref(a);
  return rc;
}

int dtx__vr_sum_check(const json_t *root, const json_t *doc, int child,
                      int64_t w) {
  char want[17];
  const char *have = dtx__str(doc, "sum");
  int64_t from = dtx__int(root, "sum_from");
  if (!have)
    return from >= 1 && w >= from ? VR_SUM_MISSING : VR_SUM_NONE;
  if (dtx__vr_sum(doc, child, want))
    return VR_SUM_NONE;
  return strcmp(want, have) == 0 ? VR_SUM_OK : VR_SUM_CHANGED;
}

int dtx__vr_root_check(const json_t *root) {
  const json_t *log = json_object_get(root, "log"), *e;
  int64_t v = dtx__int(root, "version"), next = dtx__int(root, "next");
  int64_t prev = 0;
  size_t i;
  const char *item = dtx__str(root, "_id") ? dtx__str(root, "_id") : "?";
  int ok = next >= v && next < INT64_MAX;
  json_array_foreach(log, i, e) {
    int64_t lv = dtx__int(e, "v");
    ok = ok && lv > prev && lv <= next;
    prev = lv;
  }
  if (ok && prev == v)
    return 0;
  return dtx__err(DTX_EBACKEND, "item '%s': its root is damaged (version "
                  "%lld, next %lld, last committed version kept %lld): no "
                  "version is written or removed; the audit reports it",
                  item, (long long)v, (long long)next, (long long)prev);
}

/* The record or child doc (borrowed; its "sum" set) of version v whose
 * insert met DTX_EDUPKEY.  V1 says no other writer inserts under v, so it
 * is this writer's own insert whose reply was lost -- unless a generic
 * insert put a document there first, for a version not yet reserved.
 * The stored one is ours only if its content matches this digest and it
 * is not marked dead; else v must not be committed (DTX_EBACKEND). */
static int own_insert(dtx__exec_t *ex, const char *coll, const json_t *doc,
                      int child) {
  const char *id = dtx__str(doc, "_id"), *sum = dtx__str(doc, "sum");
  json_t *have = NULL;
  char got[17];
  int rc = dtx__kit_get(ex, coll, id, &have);
  if (rc == 0 && dtx__str_is(have, "sum", sum) &&
      dtx__vr_sum(have, child, got) == 0 && strcmp(got, sum) == 0 &&
      !json_object_get(have, "dead")) {
    json_decref(have);
    return 0;
  }
  json_decref(have);
  if (rc && rc != DTX_ENOTFOUND)
    return rc;
  return dtx__err(DTX_EBACKEND, "%s '%s': the id this version writes is "
                  "taken by a document it did not write (inserted by hand "
                  "before the version was reserved?)", coll, id);
}

/* A child key: 1..64 of [A-Za-z0-9_-] (it is a field name in a map and a
 * segment of a child's _id, so no '.', '/' or '$'). */
static int check_key(const char *key) {
  return dtx__check_word("child key", key, 64, "_-");
}

/* ---- writing ---------------------------------------------------------------------- */

/* The item's root; created (version 0) when missing -- unless req could
 * not be applied to an item without versions (an expected version > 0, a
 * child to remove): then that error, and nothing is written. */
static int read_root(dtx__exec_t *ex, const dtx_version_put_req_t *req,
                     json_t **out) {
  const char *item = req->item;
  int rc = dtx__kit_get(ex, DTX_VERSION_ROOTS, item, out);
  if (rc != DTX_ENOTFOUND)
    return rc;
  if (req->expect_version > 0)
    return dtx__err(DTX_ECONFLICT, "item '%s' has no version, not %lld",
                    item, (long long)req->expect_version);
  for (size_t i = 0; i < req->nchildren; i++)
    if (!req->children[i].doc)
      return dtx__err(DTX_ENOTFOUND, "item '%s' has no version, so no child "
                      "'%s' to remove", item, req->children[i].key);
  /* sum_from 1: every version of a new item carries its digest. */
  json_t *doc = json_pack("{s:s,s:i,s:i,s:{},s:[],s:[],s:I,s:i}", "_id",
                          item, "version", 0, "next", 0, "res", "log",
                          "trash", "updated", (json_int_t)dtx__now_ms(),
                          "sum_from", 1);
  if (!doc)
    return DTX_ENOMEM;
  rc = dtx__kit_insert(ex, "version.root", DTX_VERSION_ROOTS, doc);
  json_decref(doc);
  if (rc && rc != DTX_EDUPKEY) /* DUPKEY: another writer created it */
    return rc;
  return dtx__kit_get(ex, DTX_VERSION_ROOTS, item, out);
}

/* Reserves version next+1 on root (as read) for this writer: *v.  Lost to
 * another reserve: DTX_ENOMATCH. */
static int reserve(dtx__exec_t *ex, const json_t *root, const char *token,
                   int64_t *v) {
  int64_t n = dtx__int(root, "next"), now = dtx__now_ms();
  char path[48];
  /* The validator keeps next below INT64_MAX, and the step after would
   * leave it there: the last number is never handed out. */
  if (n >= INT64_MAX - 1)
    return dtx__err(DTX_EOVERFLOW, "item '%s': no version number after "
                    "%lld is left", dtx__str(root, "_id"), (long long)n);
  *v = n + 1;
  snprintf(path, sizeof path, "res.%lld", (long long)*v);
  json_t *out = NULL;
  int rc = dtx__kit_modify(
      ex, "version.reserve", DTX_VERSION_ROOTS,
      json_pack("{s:s,s:I}", "_id", dtx__str(root, "_id"), "next",
                (json_int_t)n),
      json_pack("{s:{s:I,s:{s:s,s:s,s:I,s:I},s:I}}", "$set", "next",
                (json_int_t)*v, path, "owner", ex->owner, "token", token,
                "until", (json_int_t)(now + ex->lease_ms), "at",
                (json_int_t)now, "updated", (json_int_t)now),
      NULL, &out);
  /* V1: this one step took next + 1 for this writer. */
  DTX_ASSERT(rc || (dtx__int(out, "next") == *v && *v > n), "V1");
  json_decref(out);
  if (rc == DTX_ENOMATCH) { /* a lost reply of our own reserve? */
    json_t *r = NULL;
    if (dtx__kit_get(ex, DTX_VERSION_ROOTS, dtx__str(root, "_id"), &r) == 0 &&
        dtx__str_is(dtx__vr_res(r, *v), "token", token))
      rc = 0;
    json_decref(r);
  }
  return rc;
}

/* The children map of committed version v of item (a new object; {} for
 * version 0).  DTX_ENOTFOUND when its record is gone (removed by gc since
 * the root was read). */
static int base_map(dtx__exec_t *ex, const char *item, int64_t v,
                    json_t **map) {
  char id[VR_ID_MAX];
  json_t *rec = NULL;
  *map = NULL;
  if (v == 0)
    return (*map = json_object()) ? 0 : DTX_ENOMEM;
  dtx__vr_rec_id(id, item, v);
  int rc = dtx__kit_get(ex, DTX_VERSION_RECORDS, id, &rec);
  if (rc == 0 && !(*map = json_deep_copy(json_object_get(rec, "children"))))
    rc = DTX_ENOMEM;
  json_decref(rec);
  return rc;
}

/* One attempt at a put.  DTX_ENOMATCH: lost the race (root moved); the
 * version reserved, if any, has been abandoned and dropped. */
static int put_once(dtx__exec_t *ex, const dtx_version_put_req_t *req,
                    int64_t *out_v) {
  const char *item = req->item;
  json_t *root = NULL, *map = NULL, *rec = NULL;
  char token[25], id[VR_ID_MAX], path[48], rpath[40];
  int64_t v = 0;
  int rc = read_root(ex, req, &root);
  if (rc)
    return rc;
  int64_t base = dtx__int(root, "version");
  /* V1/V3 hold only on a root the protocol alone wrote; one moved by hand
   * (its validator cannot compare two fields, and its transition rule
   * only keeps its counters from going back) would have this writer take
   * a number already used, overflow, or build on a version not kept. */
  if ((rc = dtx__vr_root_check(root)))
    goto out;
  if (req->expect_version >= 0 && base != req->expect_version) {
    rc = dtx__err(DTX_ECONFLICT, "item '%s' is at version %lld, not %lld",
                  item, (long long)base, (long long)req->expect_version);
    goto out;
  }
  if ((rc = base_map(ex, item, base, &map))) {
    if (rc == DTX_ENOTFOUND) /* trimmed after a newer commit: read again */
      rc = DTX_ENOMATCH;
    goto out;
  }
  for (size_t i = 0; i < req->nchildren; i++) {
    const dtx_version_child_t *c = &req->children[i];
    if (!c->doc && !json_object_get(map, c->key)) {
      rc = dtx__err(DTX_ENOTFOUND, "item '%s' version %lld has no child '%s' "
                    "to remove", item, (long long)base, c->key);
      goto out;
    }
  }
  dtx__id_new(token);
  if ((rc = reserve(ex, root, token, &v)))
    goto out;
  DTX_ASSERT(v > base, "V3"); /* reserved past the checked root */
  for (size_t i = 0; i < req->nchildren; i++) {
    const dtx_version_child_t *c = &req->children[i];
    if (c->doc)
      json_object_set_new(map, c->key, json_integer((json_int_t)v));
    else
      json_object_del(map, c->key);
  }
  dtx__vr_rec_id(id, item, v);
  rec = json_pack("{s:s,s:s,s:I,s:I,s:O,s:O,s:s,s:I}", "_id", id, "item",
                  item, "version", (json_int_t)v, "base", (json_int_t)base,
                  "root", req->root, "children", map, "owner", ex->owner,
                  "created", (json_int_t)dtx__now_ms());
  char sum[17];
  if (!rec || dtx__vr_sum(rec, 0, sum) ||
      json_object_set_new(rec, "sum", json_string(sum)) < 0) {
    rc = DTX_ENOMEM;
    goto out;
  }
  /* A DUPKEY after a retry is our own insert (V1: nobody else has v),
   * which own_insert makes sure of. */
  rc = dtx__kit_insert(ex, "version.record", DTX_VERSION_RECORDS, rec);
  if (rc == DTX_EDUPKEY)
    rc = own_insert(ex, DTX_VERSION_RECORDS, rec, 0);
  for (size_t i = 0; rc == 0 && i < req->nchildren; i++) {
    const dtx_version_child_t *c = &req->children[i];
    if (!c->doc)
      continue;
    dtx__vr_child_id(id, item, v, c->key);
    json_t *doc = json_pack("{s:s,s:s,s:I,s:s,s:O}", "_id", id, "item", item,
                            "version", (json_int_t)v, "key", c->key, "doc",
                            c->doc);
    if (!doc || dtx__vr_sum(doc, 1, sum) ||
        json_object_set_new(doc, "sum", json_string(sum)) < 0)
      rc = DTX_ENOMEM;
    else
      rc = dtx__kit_insert(ex, "version.child", DTX_VERSION_CHILDREN, doc);
    if (rc == DTX_EDUPKEY)
      rc = own_insert(ex, DTX_VERSION_CHILDREN, doc, 1);
    json_decref(doc);
  }
  snprintf(rpath, sizeof rpath, "res.%lld", (long long)v);
  snprintf(path, sizeof path, "%s.token", rpath);
  if (rc) {
    /* Not committed (the commit step was not reached): give the number
     * back now -- bad input the store refused (too deep) then changes
     * nothing visible; if the store is down too, recovery does it after
     * the lease. */
    char why[512];
    snprintf(why, sizeof why, "%s", dtx_errdetail());
    if (dtx__vr_abandon(ex, item, v, json_pack("{s:s}", path, token)) == 0)
      dtx__vr_drop(ex, item, v, NULL);
    rc = dtx__err(rc, "item '%s' version %lld (given back): %s", item,
                  (long long)v, why);
    goto out;
  }
  int64_t now = dtx__now_ms();
  json_t *after = NULL,
         *upd = json_pack("{s:{s:I,s:I},s:{s:s},s:{s:{s:I,s:I}}}", "$set",
                          "version", (json_int_t)v, "updated",
                          (json_int_t)now, "$unset", rpath, "", "$push",
                          "log", "v", (json_int_t)v, "at", (json_int_t)now);
  /* A root from before digests: from v on, its versions carry them (the
   * versions before stay unjudged; the audit counts them). */
  if (upd && !json_object_get(root, "sum_from"))
    json_object_set_new(json_object_get(upd, "$set"), "sum_from",
                        json_integer((json_int_t)v));
  rc = dtx__kit_modify(
      ex, "version.commit", DTX_VERSION_ROOTS,
      json_pack("{s:s,s:I,s:s}", "_id", item, "version", (json_int_t)base,
                path, token),
      upd, NULL, &after);
  /* V2, V3: the reserved version, committed over the one it built on. */
  DTX_ASSERT(rc || (dtx__int(after, "version") == v && v > base &&
                    !dtx__vr_res(after, v)),
             "V3");
  json_decref(after);
  if (rc == DTX_ENOMATCH) {
    json_t *r = NULL;
    int grc = dtx__kit_get(ex, DTX_VERSION_ROOTS, item, &r);
    int mine = grc == 0 && dtx__vr_in_log(r, v); /* a lost reply */
    json_decref(r);
    if (grc)
      rc = grc;
    else if (mine)
      rc = 0;
    else {
      /* Lost: abandon v (if recovery has not) and drop what it wrote; what
       * fails here is recovery's to finish (v is in trash). */
      int arc = dtx__vr_abandon(
          ex, item, v, json_pack("{s:s}", path, token));
      if (arc == 0 || arc == DTX_ENOMATCH)
        dtx__vr_drop(ex, item, v, NULL);
      if (req->expect_version >= 0)
        rc = dtx__err(DTX_ECONFLICT, "item '%s' moved on from version %lld "
                      "while version %lld was written", item,
                      (long long)base, (long long)v);
    }
  }
out:
  if (rc == 0)
    *out_v = v;
  json_decref(root);
  json_decref(map);
  json_decref(rec);
  return rc;
}

/* doc, stored one level down in a record or a child, nests within the
 * store's limit (checked before anything is written). */
static int check_depth(const char *item, const char *what, const json_t *doc) {
  json_t *wrap = json_pack("{s:O}", "doc", doc);
  int rc = wrap ? dtx__depth_check(wrap, DTX_EINVAL, what) : DTX_ENOMEM;
  json_decref(wrap);
  return rc ? dtx__err_wrap(rc, "item '%s'", item) : 0;
}

static int check_req(const dtx_version_put_req_t *req);

int dtx_version_put_req_check(const dtx_version_put_req_t *req) {
  dtx__err_clear();
  return check_req(req);
}

static int check_req(const dtx_version_put_req_t *req) {
  int rc;
  if (!req)
    return dtx__err(DTX_EINVAL, "no put request");
  if ((rc = dtx__check_ident("item", req->item)))
    return rc;
  if (!json_is_object(req->root))
    return dtx__err(DTX_EINVAL, "item '%s': the root must be a JSON object",
                    req->item);
  if ((rc = check_depth(req->item, "the root", req->root)))
    return rc;
  if (req->nchildren > DTX_VERSION_MAX_CHILDREN ||
      (req->nchildren && !req->children))
    return dtx__err(DTX_EINVAL, "item '%s': at most %d child changes",
                    req->item, DTX_VERSION_MAX_CHILDREN);
  if (req->expect_version < DTX_VERSION_ANY)
    return dtx__err(DTX_EINVAL, "item '%s': expected version %lld is "
                    "negative", req->item, (long long)req->expect_version);
  for (size_t i = 0; i < req->nchildren; i++) {
    const dtx_version_child_t *c = &req->children[i];
    if ((rc = check_key(c->key)))
      return rc;
    if (c->doc && !json_is_object(c->doc))
      return dtx__err(DTX_EINVAL, "item '%s' child '%s': must be a JSON "
                      "object", req->item, c->key);
    if (c->doc && (rc = check_depth(req->item, c->key, c->doc)))
      return rc;
    for (size_t j = 0; j < i; j++)
      if (strcmp(req->children[j].key, c->key) == 0)
        return dtx__err(DTX_EINVAL, "item '%s': child '%s' given twice",
                        req->item, c->key);
  }
  return 0;
}

int dtx_version_put(dtx_store_t *st, const dtx_version_put_req_t *req,
                    const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__contend_t ct = {0};
  int64_t v = 0;
  if (out)
    *out = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = check_req(req);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__version_pattern);
  while (rc == 0) {
    rc = put_once(&ex, req, &v);
    if (rc != DTX_ENOMATCH ||
        !dtx__kit_contend(&ct, &rc, "writing a version"))
      break;
    rc = 0;
  }
  if (rc == 0 && out &&
      !(*out = json_pack("{s:s,s:I}", "item", req->item, "version",
                         (json_int_t)v)))
    rc = DTX_ENOMEM;
  return dtx__call_end(&c, rc);
}

/* ---- reading --------------------------------------------------------------------------- */

/* A document of a committed version whose digest says it was rewritten
 * (or had its digest removed) after the commit: history changed by hand.
 * Where data is at stake a read refuses it rather than show it. */
static int changed(const char *item, const char *key, const json_t *root,
                   const json_t *doc, int64_t w) {
  int s = dtx__vr_sum_check(root, doc, key != NULL, w);
  if (s == VR_SUM_OK || s == VR_SUM_NONE)
    return 0;
  return dtx__err(DTX_EBACKEND, "item '%s': %s%s%s of version %lld %s after "
                  "it was committed: history changed (doctx audit)", item,
                  key ? "child '" : "the record", key ? key : "",
                  key ? "'" : "", (long long)w,
                  s == VR_SUM_CHANGED ? "was rewritten" : "lost its digest");
}

/* One attempt at reading version want (0: the committed one) of item.
 * DTX_ENOMATCH: a document of it was gone (removed since the root was
 * read): read again.  *root_out: the root as read. */
static int get_once(dtx__exec_t *ex, const char *item, int64_t want,
                    json_t **root_out, json_t **out) {
  json_t *root = NULL, *rec = NULL, *kids = NULL, *w;
  char id[VR_ID_MAX];
  const char *key;
  int rc = dtx__kit_get(ex, DTX_VERSION_ROOTS, item, &root);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_ENOTFOUND, "no versioned item '%s'", item);
  if (rc)
    return rc;
  *root_out = root;
  int64_t v = want ? want : dtx__int(root, "version");
  if (v == 0)
    return dtx__err(DTX_ENOTFOUND, "item '%s' has no committed version",
                    item);
  if (!dtx__vr_in_log(root, v)) /* V6: committed and kept, or not at all */
    return dtx__err(DTX_ENOTFOUND, "item '%s' has no version %lld (not "
                    "committed, or removed by gc)", item, (long long)v);
  dtx__vr_rec_id(id, item, v);
  if ((rc = dtx__kit_get(ex, DTX_VERSION_RECORDS, id, &rec)))
    return rc == DTX_ENOTFOUND ? DTX_ENOMATCH : rc;
  rc = changed(item, NULL, root, rec, v);
  if (rc == 0 && !(kids = json_object()))
    rc = DTX_ENOMEM;
  json_object_foreach(json_object_get(rec, "children"), key, w) {
    json_t *ch = NULL;
    if (rc)
      break;
    dtx__vr_child_id(id, item, json_integer_value(w), key);
    rc = dtx__kit_get(ex, DTX_VERSION_CHILDREN, id, &ch);
    if (rc == 0)
      rc = changed(item, key, root, ch, json_integer_value(w));
    if (rc == 0)
      json_object_set(kids, key, json_object_get(ch, "doc"));
    else if (rc == DTX_ENOTFOUND)
      rc = DTX_ENOMATCH;
    json_decref(ch);
  }
  if (rc == 0 &&
      !(*out = json_pack("{s:s,s:I,s:O,s:O}", "item", item, "version",
                         (json_int_t)v, "root", json_object_get(rec, "root"),
                         "children", kids)))
    rc = DTX_ENOMEM;
  json_decref(rec);
  json_decref(kids);
  return rc;
}

int dtx_version_get(dtx_store_t *st, const char *item, int64_t version,
                    json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__contend_t ct = {0};
  json_t *prev = NULL;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx__check_ident("item", item);
  if (rc == 0 && version < 0)
    rc = dtx__err(DTX_EINVAL, "version %lld is negative", (long long)version);
  while (rc == 0) {
    json_t *root = NULL;
    rc = get_once(&ex, item, version, &root, out);
    if (rc == DTX_ENOMATCH && prev && json_equal(prev, root)) {
      /* Gone twice with the root unchanged: not a race but a loss. */
      rc = dtx__err(DTX_EBACKEND, "item '%s': a document of its committed "
                    "version is missing (doctx audit)", item);
    }
    json_decref(prev);
    prev = root;
    if (rc != DTX_ENOMATCH || !dtx__kit_contend(&ct, &rc, "reading a version"))
      break;
    rc = 0;
  }
  json_decref(prev);
  return dtx__call_end(&c, rc);
}

int dtx_version_history(dtx_store_t *st, const char *item, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *root = NULL, *e;
  size_t i;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx__check_ident("item", item);
  if (rc == 0)
    rc = dtx__kit_get(&ex, DTX_VERSION_ROOTS, item, &root);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no versioned item '%s'", item);
  if (rc == 0 && !(*out = json_array()))
    rc = DTX_ENOMEM;
  json_array_foreach(json_object_get(root, "log"), i, e) {
    char id[VR_ID_MAX];
    json_t *rec = NULL, *keys = json_array(), *w;
    const char *key;
    if (rc)
      break;
    dtx__vr_rec_id(id, item, dtx__int(e, "v"));
    rc = dtx__kit_get(&ex, DTX_VERSION_RECORDS, id, &rec);
    if (rc == DTX_ENOTFOUND) { /* removed by gc since the root was read */
      rc = 0;
      json_decref(keys);
      continue;
    }
    json_object_foreach(json_object_get(rec, "children"), key, w)
        json_array_append_new(keys, json_string(key));
    json_array_append_new(*out, json_pack("{s:I,s:I,s:o}", "version",
                                          (json_int_t)dtx__int(e, "v"),
                                          "committed",
                                          (json_int_t)dtx__int(e, "at"),
                                          "children", keys));
    json_decref(rec);
  }
  json_decref(root);
  if (rc) {
    json_decref(*out);
    *out = NULL;
  }
  return dtx__call_end(&c, rc);
}

/* ---- set-up: indexes and rules ------------------------------------------------------------ */

static const dtx__index_def_t indexes[] = {
    /* the reference's unique index: one record per (item, version) */
    {DTX_VERSION_RECORDS, "{\"item\":1,\"version\":1}", 1, 0},
    /* a sweep lists an item's children (and drop one version's) */
    {DTX_VERSION_CHILDREN, "{\"item\":1,\"version\":1}", 0, 0},
    {NULL, NULL, 0, 0},
};

static const char root_validator[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"version\",\"next\",\"res\",\"log\",\"trash\","
    "\"updated\"],\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\"},"
    "\"version\":{\"bsonType\":\"long\",\"minimum\":0},"
    /* next + 1 must be a number a put can reserve and every later step
     * accept (dtx__vr_root_check refuses a root at INT64_MAX) */
    "\"next\":{\"bsonType\":\"long\",\"minimum\":0,"
    "\"maximum\":9223372036854775806},"
    "\"res\":{\"bsonType\":\"object\"},"
    "\"log\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"v\",\"at\"],\"additionalProperties\":false,"
    "\"properties\":{\"v\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"at\":{\"bsonType\":\"long\"}}}},"
    "\"trash\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"long\","
    "\"minimum\":1}},"
    "\"updated\":{\"bsonType\":\"long\"},"
    "\"sum_from\":{\"bsonType\":\"long\",\"minimum\":1}}}}";

/* The digest a record or child carries (dtx__vr_sum), optional: documents
 * written before digests have none. */
#define SUM "\"sum\":{\"bsonType\":\"string\",\"pattern\":\"^[0-9a-f]{16}$\"},"

static const char record_validator[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"item\",\"version\",\"base\",\"root\","
    "\"children\",\"created\"],\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\"},"
    "\"item\":{\"bsonType\":\"string\"},"
    "\"version\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"base\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"root\":{\"bsonType\":\"object\"},"
    "\"children\":{\"bsonType\":\"object\"},"
    "\"owner\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"created\":{\"bsonType\":\"long\"}," SUM
    "\"dead\":{\"enum\":[true]}}}}";

static const char child_validator[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"item\",\"version\",\"key\",\"doc\"],"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\"},"
    "\"item\":{\"bsonType\":\"string\"},"
    "\"version\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"key\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":64},"
    "\"doc\":{\"bsonType\":\"object\"}," SUM
    "\"dead\":{\"enum\":[true]}}}}";
#undef SUM

/* What an update may change (docs/validation.md, "Transition rules"; V8).
 * A root's counters only grow (V1, V3; sum_from is set once, on a root
 * from before digests).  A record or child never changes at all while it
 * lives (V4) -- "dead" included: the one write that sets it is the
 * protocol's mark (clean.c, kill_doc), made past the rules after the
 * root said the document is unreachable. */
static const char root_transition[] =
    "{\"increasing\":[\"version\",\"next\",\"sum_from\"]}";
static const char record_transition[] =
    "{\"immutable\":[\"item\",\"version\",\"base\",\"root\",\"children\","
    "\"owner\",\"created\",\"sum\",\"dead\"]}";
static const char child_transition[] =
    "{\"immutable\":[\"item\",\"version\",\"key\",\"doc\",\"sum\","
    "\"dead\"]}";

/* A root is never deleted (its counter is what keeps version numbers from
 * being reused, V1); records and children only once the protocol marked
 * them dead, which it does only when they are unreachable (V5). */
static const dtx__rules_def_t rules[] = {
    {DTX_VERSION_ROOTS, root_validator, "{\"_id\":{\"$exists\":false}}",
     root_transition},
    {DTX_VERSION_RECORDS, record_validator, "{\"dead\":true}",
     record_transition},
    {DTX_VERSION_CHILDREN, child_validator, "{\"dead\":true}",
     child_transition},
    {NULL, NULL, NULL, NULL},
};

/* ---- the method table -------------------------------------------------------------------- */

static const char *const collections[] = {
    DTX_VERSION_ROOTS, DTX_VERSION_RECORDS, DTX_VERSION_CHILDREN, NULL};

static const char *const fault_points[] = {
    "version.root",    "version.reserve", "version.record", "version.child",
    "version.commit",  "version.abandon", "version.gc",     "version.mark",
    "version.delete",  "version.trash",   NULL,
};

const dtx__pattern_t dtx__version_pattern = {
    /* no worker work: the worker's recovery pass covers it */
    .name = "version",
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .recover = dtx__vr_recover,
    .audit = dtx__vr_audit,
    .rules = rules,
};
