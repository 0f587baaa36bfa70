/* clean.c -- how versions stop being reachable and are removed
 * (version.c has the diagram and the invariants V1-V6): abandoning a
 * reservation (a writer that lost its race, or recovery after the lease),
 * dropping what a never-committed version wrote, the sweep that removes
 * whatever nothing kept refers to, recovery, and retention (gc).
 *
 * Every removal is two steps: the document is marked dead, then deleted
 * under the delete guard {dead: true}, so the generic document commands
 * cannot delete a live record or child (docs/validation.md).  A crash
 * between the two leaves a dead document that is still garbage by the
 * same rule (unreachability only grows: a new version copies its base's
 * map, and the base is in log), so the next sweep finishes it.  The
 * decisions are taken from ONE read of the root: a version reserved after
 * it is newer than its next, and one reserved before is in its res, so
 * neither is touched (V5). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/version/version.h"
#include "util/assert.h"
#include "util/err.h"

int dtx__vr_abandon(dtx__exec_t *ex, const char *item, int64_t v,
                    json_t *cond) {
  char path[40];
  int matched = 0;
  snprintf(path, sizeof path, "res.%lld", (long long)v);
  json_t *filter = json_pack("{s:s,s:{s:b}}", "_id", item, path, "$exists", 1);
  if (filter && cond)
    json_object_update(filter, cond);
  json_decref(cond);
  int rc = dtx__kit_update(
      ex, "version.abandon", DTX_VERSION_ROOTS, filter,
      json_pack("{s:{s:s},s:{s:I},s:{s:I}}", "$unset", path, "", "$addToSet",
                "trash", (json_int_t)v, "$set", "updated",
                (json_int_t)dtx__now_ms()),
      &matched);
  return rc ? rc : matched ? 0 : DTX_ENOMATCH;
}

/* Marks id dead, then deletes it (the delete guard demands the mark).
 *
 * The mark is the one write of this pattern made with bypass_validation:
 * the collection's transition rule keeps "dead" as it is (version.c,
 * V8), so no generic command can mark a document -- only this step,
 * which decided from a read of the root that nothing reachable is
 * marked (V5).  Whether a document is reachable is written in its root,
 * which no rule of the document itself can see. */
static int kill_doc(dtx__exec_t *ex, const char *coll, const char *id,
                    int64_t *deleted) {
  int64_t n = 0;
  dtx_update_opts_t trusted = {.bypass_validation = 1};
  int rc = dtx__kit_update_ex(ex, "version.mark", coll,
                              json_pack("{s:s}", "_id", id),
                              json_pack("{s:{s:b}}", "$set", "dead", 1),
                              &trusted, NULL);
  if (rc == 0)
    rc = dtx__kit_delete(ex, "version.delete", coll,
                         json_pack("{s:s,s:b}", "_id", id, "dead", 1), &n);
  if (rc == 0 && deleted)
    *deleted += n;
  return rc;
}

/* Takes versions (stolen: an integer or an array of them) out of item's
 * trash. */
static int untrash(dtx__exec_t *ex, const char *item, json_t *versions) {
  json_t *cond = json_is_array(versions)
                     ? json_pack("{s:o}", "$in", versions)
                     : versions;
  return dtx__kit_update(ex, "version.trash", DTX_VERSION_ROOTS,
                         json_pack("{s:s}", "_id", item),
                         json_pack("{s:{s:o}}", "$pull", "trash", cond), NULL);
}

int dtx__vr_drop(dtx__exec_t *ex, const char *item, int64_t v,
                 int64_t *deleted) {
  json_t *kids = NULL, *ch;
  char id[VR_ID_MAX];
  size_t i;
  int64_t n = 0;
  json_t *f = json_pack("{s:s,s:I}", "item", item, "version", (json_int_t)v);
  int rc = f ? dtx__kit_find(ex, DTX_VERSION_CHILDREN, f, NULL, &kids)
             : DTX_ENOMEM;
  json_decref(f);
  json_array_foreach(kids, i, ch) {
    if (rc == 0 && dtx__str(ch, "_id"))
      rc = kill_doc(ex, DTX_VERSION_CHILDREN, dtx__str(ch, "_id"), &n);
  }
  json_decref(kids);
  dtx__vr_rec_id(id, item, v);
  if (rc == 0)
    rc = kill_doc(ex, DTX_VERSION_RECORDS, id, &n);
  if (rc == 0)
    rc = untrash(ex, item, json_integer((json_int_t)v));
  if (deleted)
    *deleted = n;
  return rc;
}

/* The child ids ("ITEM/W/KEY" -> true) that the versions in root's log
 * refer to.  DTX_ENOMATCH when a record is gone because the root moved
 * on (gc); DTX_EBACKEND when it is gone although the root did not. */
static int kept_children(dtx__exec_t *ex, const char *item,
                         const json_t *root, json_t **ref) {
  json_t *e, *w;
  const char *key;
  size_t i;
  int rc = 0;
  *ref = json_object();
  json_array_foreach(json_object_get(root, "log"), i, e) {
    char id[VR_ID_MAX];
    json_t *rec = NULL;
    dtx__vr_rec_id(id, item, dtx__int(e, "v"));
    if ((rc = dtx__kit_get(ex, DTX_VERSION_RECORDS, id, &rec))) {
      json_t *now = NULL;
      if (rc == DTX_ENOTFOUND &&
          (rc = dtx__kit_get(ex, DTX_VERSION_ROOTS, item, &now)) == 0)
        rc = json_equal(now, root)
                 ? dtx__err(DTX_EBACKEND, "committed version %s has no "
                            "record: nothing swept (doctx audit)", id)
                 : DTX_ENOMATCH;
      json_decref(now);
      break;
    }
    json_object_foreach(json_object_get(rec, "children"), key, w) {
      dtx__vr_child_id(id, item, json_integer_value(w), key);
      json_object_set_new(*ref, id, json_true());
    }
    json_decref(rec);
  }
  return rc;
}

int dtx__vr_sweep(dtx__exec_t *ex, const char *item, int64_t *deleted) {
  json_t *root = NULL, *ref = NULL, *recs = NULL, *kids = NULL, *d;
  size_t i;
  *deleted = 0;
  int rc = dtx__kit_get(ex, DTX_VERSION_ROOTS, item, &root);
  if (rc)
    return rc == DTX_ENOTFOUND ? 0 : rc;
  int64_t next = dtx__int(root, "next");
  /* A damaged root does not say what it keeps: remove nothing. */
  if ((rc = dtx__vr_root_check(root)) == 0)
    rc = kept_children(ex, item, root, &ref);
  json_t *f = json_pack("{s:s}", "item", item); /* borrowed by the finds */
  if (rc == 0 && !f)
    rc = DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__kit_find(ex, DTX_VERSION_CHILDREN, f, NULL, &kids);
  if (rc == 0)
    rc = dtx__kit_find(ex, DTX_VERSION_RECORDS, f, NULL, &recs);
  json_decref(f);
  /* Children: unless a kept version names it, or its version may still
   * commit (reserved, or newer than this read). */
  json_array_foreach(kids, i, d) {
    int64_t w = dtx__int(d, "version");
    const char *id = dtx__str(d, "_id");
    if (rc || !id || w < 1 || w > next || dtx__vr_res(root, w) ||
        json_object_get(ref, id))
      continue; /* a malformed one is the audit's to report */
    /* V5: unreachable -- no kept version names it, none may commit it. */
    DTX_ASSERT(w <= next && !dtx__vr_res(root, w), "V5");
    rc = kill_doc(ex, DTX_VERSION_CHILDREN, id, deleted);
  }
  /* Records: unless committed and kept, or possibly committing. */
  json_array_foreach(recs, i, d) {
    int64_t v = dtx__int(d, "version");
    const char *id = dtx__str(d, "_id");
    if (rc || !id || v < 1 || v > next || dtx__vr_in_log(root, v) ||
        dtx__vr_res(root, v))
      continue;
    DTX_ASSERT(!dtx__vr_in_log(root, v), "V5"); /* not kept */
    rc = kill_doc(ex, DTX_VERSION_RECORDS, id, deleted);
  }
  if (rc == 0 && json_array_size(json_object_get(root, "trash")))
    rc = untrash(ex, item, json_deep_copy(json_object_get(root, "trash")));
  json_decref(root);
  json_decref(ref);
  json_decref(recs);
  json_decref(kids);
  return rc;
}

int dtx__vr_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                    dtx__tally_t *t) {
  json_t *roots = NULL, *r;
  size_t i;
  int rc = dtx__kit_find(ex, DTX_VERSION_ROOTS, NULL, NULL, &roots);
  if (rc)
    return rc;
  int64_t now = dtx__now_ms();
  json_array_foreach(roots, i, r) {
    const char *item = dtx__str(r, "_id"), *k;
    json_t *res, *id = json_object_get(r, "_id");
    int64_t abandoned = 0, n = 0;
    if (!item)
      continue; /* the audit reports it */
    json_object_foreach(json_object_get(r, "res"), k, res) {
      int lapsed = dtx__kit_abandoned(o, dtx__int(res, "at"),
                                      dtx__int(res, "until"), now);
      char path[48];
      if (!lapsed) {
        dtx__tally_skip(t, "lease not expired", id);
        continue;
      }
      snprintf(path, sizeof path, "res.%s.token", k);
      rc = dtx__vr_abandon(ex, item, strtoll(k, NULL, 10),
                           json_pack("{s:s?}", path, dtx__str(res, "token")));
      if (rc == 0)
        abandoned++;
      else if (rc == DTX_ENOMATCH)
        dtx__tally_skip(t, "committed meanwhile", id);
      else
        dtx__tally_error(t, id, rc);
    }
    if (abandoned)
      dtx__tally_ran(t, "abandoned", abandoned);
    if (!abandoned && !json_array_size(json_object_get(r, "trash")) &&
        o->older_than_ms < 0)
      continue;
    /* Asked to look at everything (older_than_ms >= 0), the sweep also
     * finds what a late writer inserted after its version was swept. */
    rc = dtx__vr_sweep(ex, item, &n);
    if (rc == 0 && n)
      dtx__tally_ran(t, "deleted", n);
    else if (rc == DTX_ENOMATCH)
      dtx__tally_skip(t, "moved", id);
    else if (rc)
      dtx__tally_error(t, id, rc);
  }
  json_decref(roots);
  return 0;
}

/* ---- retention ------------------------------------------------------------------- */

/* Trims item's log (as read in r) to its last keep versions, only those
 * superseded at least grace_ms ago.  *removed: how many. */
static int gc_item(dtx__exec_t *ex, const json_t *r, int64_t keep,
                   int64_t grace_ms, int64_t *removed) {
  const json_t *log = json_object_get(r, "log");
  size_t n = json_array_size(log);
  int64_t cut = dtx__now_ms() - grace_ms;
  json_t *rm = json_array();
  int matched = 0;
  *removed = 0;
  for (size_t i = 0; i + (size_t)keep < n; i++) {
    /* superseded when the next version was committed */
    if (dtx__int(json_array_get(log, i + 1), "at") > cut)
      break;
    json_array_append_new(rm, json_integer(dtx__int(json_array_get(log, i),
                                                     "v")));
  }
  if (json_array_size(rm) == 0) {
    json_decref(rm);
    return 0;
  }
  /* V5: the last keep versions stay, the one committed among them. */
  DTX_ASSERT(keep >= 1 && json_array_size(rm) + (size_t)keep <= n, "V5");
  *removed = (int64_t)json_array_size(rm);
  /* ONE step: out of log (readers no longer find them) and into trash;
   * conditioned on the log's head, so two gcs do not both trim. */
  int rc = dtx__kit_update(
      ex, "version.gc", DTX_VERSION_ROOTS,
      json_pack("{s:O,s:I}", "_id", json_object_get(r, "_id"), "log.0.v",
                (json_int_t)dtx__int(json_array_get(log, 0), "v")),
      json_pack("{s:{s:{s:{s:O}}},s:{s:{s:O}},s:{s:I}}", "$pull", "log", "v",
                "$in", rm, "$addToSet", "trash", "$each", rm, "$set",
                "updated", (json_int_t)dtx__now_ms()),
      &matched);
  json_decref(rm);
  if (rc == 0 && !matched)
    *removed = 0; /* another gc did it */
  return rc;
}

int dtx_version_gc(dtx_store_t *st, const dtx_version_gc_opts_t *opts,
                   json_t **summary) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *roots = NULL, *r;
  size_t i;
  int64_t keep = opts && opts->keep ? opts->keep : DTX_VERSION_KEEP;
  int64_t grace = opts && opts->grace_ms >= 0 ? opts->grace_ms
                                              : DTX_VERSION_GRACE_MS;
  int64_t items = 0, removed = 0, deleted = 0;
  if (summary)
    *summary = NULL;
  dtx__exec_init(&ex, st, NULL, 0, opts ? opts->deadline_ms : 0);
  dtx__call_begin(&c, ex.deadline_ms);
  DTX_ASSERT(grace >= 0, "V5");
  int rc = keep < 1 ? dtx__err(DTX_EINVAL, "gc: keep %lld: at least 1 "
                               "version is kept", (long long)keep)
                    : dtx__kit_ensure(st, &dtx__version_pattern);
  if (rc == 0)
    rc = dtx__kit_find(&ex, DTX_VERSION_ROOTS, NULL, NULL, &roots);
  /* One item's error (a damaged root, say) does not stop the others; the
   * call returns the first, with its detail. */
  int first = 0;
  char why[400] = "";
  json_array_foreach(roots, i, r) {
    int64_t rm = 0, del = 0;
    const char *item = dtx__str(r, "_id");
    if (rc || !item)
      continue;
    items++;
    int irc = gc_item(&ex, r, keep, grace, &rm);
    removed += rm;
    if (irc == 0)
      irc = dtx__vr_sweep(&ex, item, &del);
    deleted += del;
    if (irc && irc != DTX_ENOMATCH && !first) { /* ENOMATCH: moved
                                                   meanwhile, the next gc */
      first = irc;
      snprintf(why, sizeof why, "%s", dtx_errdetail());
    }
  }
  if (rc == 0 && first)
    rc = dtx__err(first, "%s", why);
  json_decref(roots);
  if (summary)
    *summary = json_pack("{s:b,s:I,s:I,s:I}", "ok", rc == 0, "items",
                         (json_int_t)items, "removed", (json_int_t)removed,
                         "deleted", (json_int_t)deleted);
  return dtx__call_end(&c, rc);
}
