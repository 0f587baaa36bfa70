/* flow.c -- flows: parent and child jobs (docs/jobs.md, "Flows").
 *
 * `job add ... --parent P` makes a child of job P; P then waits for all
 * its children and runs once after they all succeeded, its handler
 * seeing their results; a child that ends dead (or canceled, or is
 * missing) fails P or holds it, by P's on_child_fail ("fail", the
 * default, or "hold": P waits until the child is retried and succeeds,
 * or P is canceled).  The link is two fields in two documents that may
 * live on different Redis Cluster slots: the child's `parent` (written
 * by its insert, immutable) and the parent's `children` (the ids it
 * recorded, only grown by its own step).  No step writes both, so the
 * steps are ordered so that every crash between two of them leaves a
 * state recovery finishes:
 *
 *   child:  (new) --flow.add--> held --flow.release--> ready|delayed ...
 *                                 |  \--flow.orphan (recovery)--> canceled
 *                                 +--flow.drop (refused add)--> (deleted)
 *   parent: ready|delayed|waiting, epoch 0 --flow.attach--> waiting
 *           waiting --flow.ready--> ready|delayed (all children succeeded)
 *           waiting --flow.fail---> dead (a child dead/canceled/missing,
 *                                   policy fail; failed_child names it)
 *           waiting --cancel--> canceled; dead (failed_child) --retry-->
 *           waiting
 *
 * Each of these moves records its event (events.c, J19) in its own step:
 * "added" (held), "attached" (the parent, data.child), "released",
 * "settled" (flow.ready), "dead" (flow.fail), "orphaned".
 *
 *   transition                   function          fault point
 *   (child recorded, held)       add_child         job.flow.add
 *   parent -> waiting (+ child)  attach            job.flow.attach
 *   held -> ready|delayed        release           job.flow.release
 *   held -> (deleted)            add_child         job.flow.drop
 *   waiting -> ready|delayed     dtx__job_settle   job.flow.ready
 *   waiting -> dead              dtx__job_settle   job.flow.fail
 *   held -> canceled             finish_held       job.flow.orphan
 *                                (recovery)
 *
 * Invariants (job.c has J1-J7):
 *  J13 A parent runs only after every child recorded in it succeeded,
 *      and a child is recorded only while its parent never ran: attach
 *      is conditioned on {state: ready|delayed|waiting, epoch: 0} (epoch
 *      0: never claimed, J1), and the claim of a parent is conditioned on
 *      state ready, which only flow.ready gives a waiting job -- and only
 *      with the children array it read (cond {children: <as read>}), so
 *      a child attached after that read makes the move miss and the
 *      parent is judged again.  Claim and attach are both single
 *      conditional updates of the parent: one of them wins.
 *  J14 A child runs only once its parent recorded it: it is inserted
 *      held (not claimable), released only after the attach (or by
 *      recovery after it finds the parent listing it, or attaches it
 *      itself while the parent is still attachable); when the parent
 *      already ran, the add is refused and the held child deleted, or
 *      (after a crash) canceled by recovery -- never run.
 *  J15 A waiting parent leaves waiting exactly once per wait: flow.ready
 *      and flow.fail are conditioned on {state: waiting, children: <as
 *      read>}; after each child's outcome the writer of that outcome
 *      settles the parent, and recovery settles every waiting parent, so
 *      a crash between the child's outcome and the settle leaves none
 *      waiting forever.  A cycle cannot form: a child is a new document
 *      inserted after its parent exists, and `parent` never changes (an
 *      add that finds its id taken by another job's document, parent
 *      included, is refused).
 */
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

#define JOB (&dtx__job_kind)
#define ROUNDS 16
#define RECOVER_BATCH 500

int dtx_job_flow_check(const dtx_job_req_t *req, const dtx_job_flow_t *flow) {
  int rc = dtx_job_req_check(req);
  if (rc || !flow)
    return rc;
  if (flow->parent && (rc = dtx__check_ident("parent job id", flow->parent)))
    return rc;
  if (flow->parent && req->id && strcmp(flow->parent, req->id) == 0)
    return dtx__err(DTX_EINVAL, "job %s cannot be its own parent", req->id);
  if (flow->on_child_fail && strcmp(flow->on_child_fail, "fail") != 0 &&
      strcmp(flow->on_child_fail, "hold") != 0)
    return dtx__err(DTX_EINVAL, "on_child_fail must be fail or hold, got '%s'",
                    flow->on_child_fail);
  return 0;
}

/* The parent may take a child: it never ran (J13). */
static json_t *attachable(const char *pid) {
  char full[32];
  snprintf(full, sizeof full, "children.%d", DTX_JOB_CHILDREN_MAX - 1);
  return json_pack("{s:s,s:{s:[s,s,s]},s:I,s:{s:b}}", "_id", pid, "state",
                   "$in", DTX_JOB_READY, DTX_JOB_DELAYED, DTX_JOB_WAITING,
                   "epoch", (json_int_t)0, full, "$exists", 0);
}

static int lists(const json_t *parent, const char *cid) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(parent, "children"), i, v) {
    if (json_is_string(v) && strcmp(json_string_value(v), cid) == 0)
      return 1;
  }
  return 0;
}

static int lists(const json_t *parent, const char *cid);

/* flow.attach: the parent records cid and waits (J13).  *matched 0: the
 * parent is no longer attachable (claimed, ended, full, or gone); 1: it
 * lists cid (now, or already).  The step records its event "attached"
 * (events.c, J19) from the state it read: the update is conditioned on
 * that state and on cid not listed yet, so a replay adds no second
 * event and a parent that moved meanwhile is read again. */
static int attach(dtx__exec_t *ex, const char *pid, const char *cid,
                  int *matched) {
  *matched = 0;
  for (int round = 0; round < ROUNDS; round++) {
    json_t *p = NULL;
    int rc = dtx__kit_get(ex, DTX_JOBS, pid, &p);
    if (rc == DTX_ENOTFOUND) {
      dtx__err_clear();
      return 0;
    }
    if (rc)
      return rc;
    const char *st = dtx__str(p, "state");
    if (lists(p, cid) || !st) {
      *matched = st != NULL;
      json_decref(p);
      return 0;
    }
    json_t *f = attachable(pid);
    json_t *u = json_pack("{s:{s:s,s:I},s:{s:s}}", "$set", "state",
                          DTX_JOB_WAITING, "updated",
                          (json_int_t)dtx__now_ms(), "$addToSet", "children",
                          cid);
    rc = f && u ? 0 : DTX_ENOMEM;
    if (rc == 0 &&
        (json_object_set_new(f, "state", json_string(st)) < 0 ||
         json_object_set_new(f, "children", json_pack("{s:s}", "$ne", cid)) <
             0 ||
         dtx__job_on_move(p, "job.flow.attach", st, DTX_JOB_WAITING, 0, u)))
      rc = DTX_ENOMEM;
    json_t *ev = rc ? NULL
                    : json_object_get(json_object_get(u, "$push"), "ev_out");
    if (ev)
      json_object_set_new(ev, "data", json_pack("{s:s}", "child", cid));
    json_decref(p);
    int m = 0;
    if (rc == 0)
      rc = dtx__kit_update(ex, "job.flow.attach", DTX_JOBS, f, u, &m);
    else {
      json_decref(f);
      json_decref(u);
    }
    if (rc || m) {
      *matched = m;
      return rc;
    }
    /* Not attachable, or it moved (or listed cid) since the read: read
     * it again; a parent not attachable stops the next round. */
    json_t *again = NULL;
    if ((rc = dtx__kit_get(ex, DTX_JOBS, pid, &again)) == DTX_ENOTFOUND) {
      dtx__err_clear();
      return 0;
    }
    if (rc)
      return rc;
    /* attachable()'s condition, judged on what was read */
    int still = (dtx__state_is(again, DTX_JOB_READY) ||
                 dtx__state_is(again, DTX_JOB_DELAYED) ||
                 dtx__state_is(again, DTX_JOB_WAITING)) &&
                dtx__int(again, "epoch") == 0 &&
                json_array_size(json_object_get(again, "children")) <
                    DTX_JOB_CHILDREN_MAX;
    int listed = lists(again, cid);
    json_decref(again);
    if (listed || !still) {
      *matched = listed;
      return 0;
    }
  }
  return dtx__err(DTX_EBUSY, "job %s kept changing while recording child %s",
                  pid, cid);
}

/* flow.release: held -> ready, or delayed when its run_at is ahead (J2). */
static int release(dtx__exec_t *ex, const json_t *child, json_t **out) {
  int later = dtx__int(child, "run_at") > dtx__now_ms();
  dtx__move_t m = {.point = "job.flow.release", .from = DTX_JOB_HELD,
                   .to = later ? DTX_JOB_DELAYED : DTX_JOB_READY};
  return dtx__kit_move(ex, JOB, child, &m, out);
}

/* The child as it stands after a release that missed: released already
 * (by recovery) is success; anything else is reported as it is. */
static int released_meanwhile(dtx__exec_t *ex, const char *cid,
                              json_t **out) {
  int rc = dtx__kit_get(ex, DTX_JOBS, cid, out);
  if (rc == 0 && dtx__state_is(*out, DTX_JOB_HELD))
    rc = dtx__err(DTX_EBUSY, "job %s stayed held", cid);
  return rc;
}

int dtx__job_add_child(dtx__exec_t *ex, const dtx_job_req_t *r,
                       const dtx_job_flow_t *flow, json_t **out, int *added) {
  json_t *parent = NULL, *child = NULL, *extra;
  const char *pid = flow->parent;
  int rc = dtx__kit_get(ex, DTX_JOBS, pid, &parent);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(rc, "no parent job '%s'", pid);
  if (rc)
    return rc;
  json_decref(parent);
  parent = NULL;
  extra = json_pack("{s:s,s:s}", "state", DTX_JOB_HELD, "parent", pid);
  if (extra && flow->on_child_fail)
    json_object_set_new(extra, "on_child_fail",
                        json_string(flow->on_child_fail));
  rc = extra ? dtx__job_add_doc(ex, r, extra, "job.flow.add", &child, added)
             : DTX_ENOMEM;
  json_decref(extra);
  if (rc)
    return rc;
  const char *cid = dtx__str(child, "_id");
  if (!dtx__state_is(child, DTX_JOB_HELD)) { /* an earlier add finished */
    *out = child;
    return 0;
  }
  /* J14: held, so nothing runs it before its parent records it. */
  int matched = 0;
  rc = attach(ex, pid, cid, &matched);
  if (rc == 0 && !matched) {
    /* Not attachable: unless an earlier attempt (or recovery) recorded
     * it, the parent already ran -- refuse, leaving nothing. */
    if ((rc = dtx__kit_get(ex, DTX_JOBS, pid, &parent)) == 0 &&
        !lists(parent, cid)) {
      char why[300];
      snprintf(why, sizeof why,
               "job %s is %s at epoch %lld: a child can be added only to a "
               "job that has not started (ready, delayed or waiting, never "
               "claimed, fewer than %d children)",
               pid, dtx__str(parent, "state") ? dtx__str(parent, "state") : "?",
               (long long)dtx__int(parent, "epoch"), DTX_JOB_CHILDREN_MAX);
      rc = dtx__kit_delete(
          ex, "job.flow.drop", DTX_JOBS,
          json_pack("{s:s,s:s}", "_id", cid, "state", DTX_JOB_HELD), NULL);
      json_decref(parent);
      json_decref(child);
      *added = 0;
      return rc ? rc : dtx__err(DTX_ESTATE, "%s", why);
    }
    json_decref(parent);
    if (rc == DTX_ENOTFOUND)
      rc = dtx__err(rc, "parent job '%s' was deleted", pid);
  }
  if (rc) {
    json_decref(child);
    return rc; /* held: recovery finishes it (finish_held) */
  }
  json_t *after = NULL;
  rc = release(ex, child, &after);
  if (rc == DTX_ENOMATCH)
    rc = released_meanwhile(ex, cid, &after);
  json_decref(child);
  if (rc) {
    json_decref(after);
    return rc;
  }
  DTX_ASSERT(!dtx__state_is(after, DTX_JOB_HELD), "J14");
  *out = after;
  return 0;
}

int dtx_job_add_flow(dtx_store_t *st, const dtx_job_req_t *req,
                     const dtx_job_flow_t *flow, json_t **out, int *added) {
  dtx__exec_t ex;
  dtx__call_t c;
  int dummy, rc;
  *out = NULL;
  if (!added)
    added = &dummy;
  *added = 0;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  if ((rc = dtx_job_flow_check(req, flow)) || (rc = dtx__job_setup(st)))
    return dtx__call_end(&c, rc);
  if (flow && flow->parent)
    rc = dtx__job_add_child(&ex, req, flow, out, added);
  else {
    json_t *extra = json_object();
    if (extra && flow && flow->on_child_fail)
      json_object_set_new(extra, "on_child_fail",
                          json_string(flow->on_child_fail));
    rc = extra ? dtx__job_add_doc(&ex, req, extra, "job.add", out, added)
               : DTX_ENOMEM;
    json_decref(extra);
  }
  return dtx__call_end(&c, rc);
}

/* ---- settling a waiting parent ------------------------------------------ */

/* The children parent lists, as documents keyed by id (missing ones
 * absent).  A document under a listed id that does not name this parent
 * is not its child and counts as missing (J13): a child deleted once it
 * ended and another job added under its id without --parent would
 * otherwise let the parent run on that job's success and result. */
static int read_children(dtx__exec_t *ex, const json_t *parent,
                         json_t **map) {
  json_t *ids = json_object_get(parent, "children"), *docs = NULL, *d;
  *map = json_object();
  if (!*map)
    return DTX_ENOMEM;
  if (!json_is_array(ids) || json_array_size(ids) == 0)
    return 0;
  json_t *f = json_pack("{s:{s:O}}", "_id", "$in", ids);
  int rc = f ? dtx__kit_find(ex, DTX_JOBS, f, NULL, &docs) : DTX_ENOMEM;
  json_decref(f);
  size_t i;
  const char *pid = dtx__str(parent, "_id");
  json_array_foreach(docs, i, d) {
    if (dtx__str(d, "_id") && pid && dtx__str_is(d, "parent", pid))
      json_object_set(*map, dtx__str(d, "_id"), d);
  }
  json_decref(docs);
  return rc;
}

/* What a waiting parent is due (J15): 1 ready (every child succeeded),
 * -1 failed (a child dead, canceled or missing, *bad its id, under
 * policy fail), 0 still waiting. */
static int verdict(const json_t *parent, const json_t *kids,
                   const char **bad) {
  int all = 1, hold = dtx__str_is(parent, "on_child_fail", "hold");
  size_t i;
  json_t *v;
  *bad = NULL;
  json_array_foreach(json_object_get(parent, "children"), i, v) {
    const char *cid = json_string_value(v);
    const json_t *k = cid ? json_object_get(kids, cid) : NULL;
    if (k && dtx__state_is(k, DTX_JOB_SUCCEEDED))
      continue;
    all = 0;
    if (!*bad && (!k || dtx__state_is(k, DTX_JOB_DEAD) ||
                  dtx__state_is(k, DTX_JOB_CANCELED)))
      *bad = cid ? cid : "?";
  }
  if (json_array_size(json_object_get(parent, "children")) == 0)
    return 0; /* never waiting without children (the shape check) */
  return all ? 1 : *bad && !hold ? -1 : 0;
}

int dtx__job_flow_verdict(const json_t *parent, const json_t *kids,
                          const char **bad) {
  return verdict(parent, kids, bad);
}

static const char *child_state(const json_t *kids, const char *cid) {
  const json_t *k = json_object_get(kids, cid);
  return k ? dtx__str(k, "state") ? dtx__str(k, "state") : "?" : "missing";
}

int dtx__job_settle(dtx__exec_t *ex, const char *pid, int *moved) {
  int rc = 0;
  if (moved)
    *moved = 0;
  for (int round = 0; round < ROUNDS; round++) {
    json_t *parent = NULL, *kids = NULL, *out = NULL;
    if ((rc = dtx__kit_get(ex, DTX_JOBS, pid, &parent)))
      return rc == DTX_ENOTFOUND ? 0 : rc; /* a parent deleted: no flow */
    if (!dtx__state_is(parent, DTX_JOB_WAITING)) {
      json_decref(parent);
      return 0;
    }
    const char *bad = NULL;
    rc = read_children(ex, parent, &kids);
    int v = rc ? 0 : verdict(parent, kids, &bad);
    if (v == 0) {
      json_decref(kids);
      json_decref(parent);
      return rc;
    }
    int64_t now = dtx__now_ms();
    dtx__move_t m = {.from = DTX_JOB_WAITING,
                     .cond = json_pack("{s:O}", "children",
                                       json_object_get(parent, "children"))};
    if (v > 0) {
      m.point = "job.flow.ready";
      m.to = dtx__int(parent, "run_at") > now ? DTX_JOB_DELAYED : DTX_JOB_READY;
    } else {
      char err[300];
      snprintf(err, sizeof err, "child job %s is %s (on_child_fail: fail)",
               bad, child_state(kids, bad));
      m.point = "job.flow.fail";
      m.to = DTX_JOB_DEAD;
      m.set = json_pack("{s:I,s:s,s:s}", "finished", (json_int_t)now,
                        "last_error", err, "failed_child", bad);
      m.unset = json_pack("{s:s}", "unique_live", "");
    }
    json_decref(kids);
    rc = dtx__kit_move(ex, JOB, parent, &m, &out);
    json_decref(parent);
    json_decref(out);
    if (rc == 0 && moved)
      *moved = v;
    if (rc != DTX_ENOMATCH)
      return rc;
    /* Moved meanwhile (a child attached, another settler): judge again. */
  }
  return dtx__err(DTX_EBUSY, "job %s kept changing while settling", pid);
}

void dtx__job_settle_after(dtx__exec_t *ex, const json_t *child) {
  const char *pid = dtx__str(child, "parent");
  if (!pid || !dtx__job_terminal(child))
    return;
  /* Best effort: a failure here is recovery's to finish (J15).  A frame
   * of its own: the runner calls it after its round's frame closed. */
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  if (dtx__call_end(&c, dtx__job_settle(ex, pid, NULL)))
    dtx__err_clear();
}

/* ---- what a parent's handler sees ---------------------------------------- */

int dtx__job_flow_view(dtx__exec_t *ex, const json_t *job, json_t **view) {
  json_t *ids = json_object_get(job, "children"), *kids = NULL, *v;
  *view = NULL;
  if (!json_is_array(ids) || json_array_size(ids) == 0)
    return 0;
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  int rc = dtx__call_end(&c, read_children(ex, job, &kids));
  json_t *arr = json_array();
  size_t i;
  json_array_foreach(ids, i, v) {
    const char *cid = json_string_value(v);
    const json_t *k = cid ? json_object_get(kids, cid) : NULL;
    json_t *r = k ? json_object_get(k, "result") : NULL;
    json_array_append_new(
        arr, json_pack("{s:O,s:s,s:O}", "id", v, "state",
                       k && dtx__str(k, "state") ? dtx__str(k, "state")
                                                 : "missing",
                       "result", r ? r : json_null()));
  }
  json_decref(kids);
  if (rc || !arr) {
    json_decref(arr);
    return rc ? rc : DTX_ENOMEM;
  }
  *view = json_copy((json_t *)job);
  if (!*view) {
    json_decref(arr);
    return DTX_ENOMEM;
  }
  json_object_set_new(*view, "children", arr);
  return 0;
}

/* ---- recovery -------------------------------------------------------------- */

/* A held child (its add stopped between steps, or is under way): released
 * when its parent lists it, attached and released while the parent is
 * attachable, else canceled (J14: its parent ran without it). */
static int finish_held(dtx__exec_t *ex, const json_t *child, int *what) {
  const char *cid = dtx__str(child, "_id"), *pid = dtx__str(child, "parent");
  json_t *parent = NULL, *out = NULL;
  int rc = pid ? dtx__kit_get(ex, DTX_JOBS, pid, &parent) : DTX_ENOTFOUND;
  int listed = rc == 0 && lists(parent, cid);
  json_decref(parent);
  if (rc && rc != DTX_ENOTFOUND)
    return rc;
  if (!listed && rc == 0) {
    int matched = 0;
    if ((rc = attach(ex, pid, cid, &matched)))
      return rc;
    listed = matched;
  }
  *what = listed;
  if (listed)
    rc = release(ex, child, &out);
  else {
    char err[300];
    snprintf(err, sizeof err,
             "canceled: its parent %s ran (or went) before recording it",
             pid ? pid : "?");
    dtx__move_t m = {.point = "job.flow.orphan", .from = DTX_JOB_HELD,
                     .to = DTX_JOB_CANCELED,
                     .set = json_pack("{s:I,s:s}", "finished",
                                      (json_int_t)dtx__now_ms(), "last_error",
                                      err),
                     .unset = json_pack("{s:s}", "unique_live", "")};
    rc = dtx__kit_move(ex, JOB, child, &m, &out);
  }
  json_decref(out);
  return rc;
}

static int sweep(dtx__exec_t *ex, const char *state, json_t **out) {
  json_t *f = json_pack("{s:s}", "state", state);
  json_t *sort = json_pack("{s:i}", "updated", 1);
  dtx__kit_read_t q = {.coll = DTX_JOBS, .filter = f, .sort = sort,
                       .limit = RECOVER_BATCH, .what = "finding flow jobs"};
  int rc = f && sort ? dtx__kit_read(ex->st, &q, out) : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  return rc;
}

int dtx__job_flow_recover(dtx__exec_t *ex, dtx__tally_t *t) {
  json_t *list = NULL, *j;
  size_t i;
  int rc = sweep(ex, DTX_JOB_HELD, &list);
  json_array_foreach(list, i, j) {
    int listed = 0;
    int r = finish_held(ex, j, &listed);
    if (r == 0)
      dtx__tally_ran(t, listed ? "flow_released" : "flow_orphans_canceled", 1);
    else if (r == DTX_ENOMATCH)
      dtx__tally_skip(t, "moved on while recovering",
                      json_object_get(j, "_id"));
    else
      dtx__tally_error(t, json_object_get(j, "_id"), r);
  }
  json_decref(list);
  list = NULL;
  if (rc || (rc = sweep(ex, DTX_JOB_WAITING, &list)))
    return rc;
  json_array_foreach(list, i, j) {
    int moved = 0;
    int r = dtx__job_settle(ex, dtx__str(j, "_id"), &moved);
    if (r)
      dtx__tally_error(t, json_object_get(j, "_id"), r);
    else if (moved)
      dtx__tally_ran(t, moved > 0 ? "flow_ready" : "flow_failed", 1);
  }
  json_decref(list);
  return 0;
}

/* ---- the audit -------------------------------------------------------------- */

/* How long after its last change a held child, or a waiting parent due
 * a move, is a finding (the add or the settle may be under way); none
 * with DTX_AUDIT_SETTLED. */
#define GRACE_MS 2000

void dtx__job_flow_audit(dtx__audit_t *a, const json_t *jobs, int64_t now) {
  const char *id;
  json_t *j;
  int64_t grace = (a->flags & DTX_AUDIT_SETTLED) ? 0 : GRACE_MS;
  json_object_foreach((json_t *)jobs, id, j) {
    const char *pid = dtx__str(j, "parent");
    int old = dtx__int(j, "updated") <= now - grace;
    if (pid) {
      const json_t *p = json_object_get(jobs, pid);
      if (!p && !dtx__job_terminal(j))
        dtx__audit_finding(a, "flow_orphan", "job %s is %s, yet its parent "
                           "%s is missing", id, dtx__str(j, "state"), pid);
      else if (p && !lists(p, id) && !dtx__state_is(j, DTX_JOB_HELD) &&
               !dtx__state_is(j, DTX_JOB_CANCELED))
        dtx__audit_finding(a, "flow_orphan", "job %s (%s) names parent %s, "
                           "which does not list it: it runs apart from the "
                           "flow (J14)", id, dtx__str(j, "state"), pid);
      if (dtx__state_is(j, DTX_JOB_HELD) && old)
        dtx__audit_finding(a, "flow_stuck", "job %s is held: its add did not "
                           "finish; run doctx recover", id);
    }
    const json_t *ids = json_object_get(j, "children");
    if (!ids)
      continue;
    size_t i;
    json_t *v;
    int64_t last = dtx__int(j, "updated");
    json_array_foreach(ids, i, v) {
      const char *cid = json_string_value(v);
      const json_t *k = cid ? json_object_get(jobs, cid) : NULL;
      if (k && !dtx__str_is(k, "parent", id))
        dtx__audit_finding(a, "flow_link", "job %s lists child %s, whose "
                           "parent is %s", id, cid,
                           dtx__str(k, "parent") ? dtx__str(k, "parent")
                                                 : "none");
      /* J13: a parent claimed (epoch >= 1) ran after its children.  A
       * missing one was purged after it succeeded (retention). */
      if (k && dtx__int(j, "epoch") >= 1 &&
          !dtx__state_is(k, DTX_JOB_SUCCEEDED))
        dtx__audit_finding(a, "flow_early", "job %s ran (epoch %lld) while "
                           "its child %s is %s (J13)", id,
                           (long long)dtx__int(j, "epoch"), cid,
                           dtx__str(k, "state") ? dtx__str(k, "state") : "?");
      if (k && dtx__int(k, "updated") > last)
        last = dtx__int(k, "updated");
    }
    if (dtx__state_is(j, DTX_JOB_WAITING) && last <= now - grace) {
      const char *bad = NULL;
      int v2 = verdict(j, jobs, &bad);
      if (v2 != 0)
        dtx__audit_finding(a, "flow_stuck", "job %s is waiting, yet %s: "
                           "recovery moves it (J15); run doctx recover", id,
                           v2 > 0 ? "all its children succeeded"
                                  : "a child failed under on_child_fail fail");
    }
  }
}
