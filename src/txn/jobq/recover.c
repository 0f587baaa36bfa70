/* recover.c -- the job queue's recovery pass, run by `doctx recover`,
 * `doctx worker` and the job runners now and then:
 *
 *   1. promote   due delayed jobs -> ready (job.promote), in a batch
 *   2. takeover  running jobs whose lease lapsed (or, with
 *                --older-than-ms N, not updated for N ms) -> delayed, or
 *                dead when attempts are exhausted: it counts as an
 *                attempt, and the epoch bump fences the old holder (J1)
 *                (job.recover.takeover); one whose cancel was requested
 *                -> canceled instead, never retried (cancel.c, J17)
 *   3. markers   for a terminal job finished longer than the tombstone TTL
 *                ago, and whose fx_until (the last lease end any write of
 *                its effects was bounded by, effect.c F3) is more than
 *                DTX_JOB_FX_MARGIN_MS past: fx_cleared is set first
 *                (job.recover.forget_markers; from then on a retry by
 *                hand is refused, J6), then each target's marker is
 *                pulled (job.recover.clear_marker) by a write bounded by
 *                not_before = fx_until + the margin -- the STORE's clock
 *                must be past it, not only ours (effect.c F4) -- then
 *                fx_colls emptied (job.recover.markers_cleared).  A crash
 *                between the steps, or a pull the store finds too early,
 *                leaves fx_colls set, so a later pass repeats them; each
 *                is idempotent.  Whatever --tombstone-ttl-ms says, a
 *                marker so outlives every write that could repeat its
 *                effect.
 *   2b. flows    held children finished (released, or canceled when their
 *                parent ran without them) and waiting parents settled
 *                (flow.c: job.flow.release, job.flow.attach,
 *                job.flow.orphan, job.flow.ready, job.flow.fail)
 *   4. events    what waits in outboxes is relayed to the log, and the
 *                log trimmed by age and count (events.c: job.events.log,
 *                job.events.pull, job.events.trim)
 *   5. retention succeeded jobs finished longer than retention_ms ago and
 *                with no markers left and no events waiting are deleted,
 *                at most PURGE_BATCH per pass (job.recover.purge); with
 *                keep_dead_ms > 0, dead and canceled ones finished longer
 *                ago than that likewise (purge_dead).
 *   6. unique    passed unique-key windows are cleared (unique.c, J18;
 *                job.unique.expire), at most 200 per pass.
 *
 * Every step is bounded per pass, so one pass never reads the whole
 * history; a backlog is worked off over several passes. */
#include <stdint.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

#define DEFAULT_TTL_MS (24LL * 3600 * 1000)
#define DEFAULT_RETENTION_MS (24LL * 3600 * 1000)
#define BATCH 500
#define PURGE_BATCH 200

static int find_some(dtx__exec_t *ex, json_t *filter, const char *sortkey,
                     int64_t limit, json_t **out) {
  json_t *sort = json_pack("{s:i}", sortkey, 1);
  dtx__kit_read_t q = {.coll = DTX_JOBS, .filter = filter, .sort = sort,
                       .limit = limit, .what = "finding jobs to recover"};
  int rc = filter && sort ? dtx__kit_read(ex->st, &q, out) : DTX_ENOMEM;
  json_decref(filter);
  json_decref(sort);
  return rc;
}

/* Up to limit jobs in state (stolen: a state or a {$in: [...]}) with
 * (fx) or without (!fx) effect collections, finished over age_ms ago,
 * oldest first.  They are selected by `updated` as well as `finished`: a
 * terminal job's updated is never earlier than its finished, so the
 * condition on it loses nothing, and it lets the index {state, updated}
 * find them, where `finished` alone made every pass read every finished
 * job (the job benchmark's profile). */
static int finished_before(dtx__exec_t *ex, json_t *state, int fx,
                           int64_t age_ms, int64_t limit, json_t **out) {
  int64_t now = dtx__now_ms();
  json_int_t before = (json_int_t)(now - age_ms);
  json_t *f = json_pack("{s:o,s:{s:b},s:{s:I},s:{s:I}}", "state", state,
                        "fx_colls.0", "$exists", fx, "updated", "$lte",
                        before, "finished", "$lte", before);
  /* With effects: only those whose writes are over by our clock (the
   * pulls' not_before asks the store's), so jobs whose effects may still
   * land do not fill every pass's batch. */
  if (f && fx)
    json_object_set_new(
        f, "$or",
        json_pack("[{s:{s:b}},{s:{s:I}}]", "fx_until", "$exists", 0,
                  "fx_until", "$lt",
                  (json_int_t)(now - DTX_JOB_FX_MARGIN_MS)));
  /* Without effects (fx 0: the purges' candidates): only those holding
   * no unique key -- a job within its window (J18) stays until the
   * expiry gives the key up, and the delete guard refuses it anyway, so
   * such jobs do not fill every pass's batch either. */
  if (f && !fx)
    json_object_set_new(f, "unique_live",
                        json_pack("{s:b}", "$exists", 0));
  DTX_ASSERT(age_ms >= 0 && limit >= 1, "F4");
  return find_some(ex, f, "updated", limit, out);
}

static int takeovers(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                     dtx__tally_t *t) {
  int64_t now = dtx__now_ms();
  json_t *f = o->older_than_ms >= 0
                  ? json_pack("{s:s,s:{s:I}}", "state", DTX_JOB_RUNNING,
                              "updated", "$lte",
                              (json_int_t)(now - o->older_than_ms))
                  : json_pack("{s:s,s:{s:I}}", "state", DTX_JOB_RUNNING,
                              "lease_until", "$lte", (json_int_t)now);
  json_t *list = NULL, *job;
  size_t i;
  int rc = find_some(ex, f, "updated", BATCH, &list);
  if (rc)
    return rc;
  json_array_foreach(list, i, job) {
    json_t *out = NULL;
    int take = o->older_than_ms >= 0 ? 2 : 1;
    /* J1: the find's filter; the takeover bumps its epoch. */
    DTX_ASSERT(dtx__state_is(job, DTX_JOB_RUNNING), "J1");
    rc = dtx__job_finish(ex, job, 0, NULL,
                         "taken over: the worker's lease lapsed",
                         "job.recover.takeover", take, &out);
    if (rc == 0)
      dtx__tally_ran(t,
                     dtx__state_is(out, DTX_JOB_DEAD) ? "taken_over_dead"
                     : dtx__state_is(out, DTX_JOB_CANCELED)
                         ? "taken_over_canceled"
                         : "taken_over",
                     1);
    else if (rc == DTX_ENOMATCH)
      dtx__tally_skip(t, "moved on while recovering",
                      json_object_get(job, "_id"));
    else
      dtx__tally_error(t, json_object_get(job, "_id"), rc);
    json_decref(out);
  }
  json_decref(list);
  return 0;
}

/* Pulls job id's markers out of every document of coll holding one,
 * each pull bounded by not_before (the store refuses it, DTX_ESTATE,
 * while its clock is earlier). */
static int clear_in(dtx__exec_t *ex, const char *id, const char *coll,
                    int64_t not_before, int64_t *n) {
  dtx_update_opts_t uo = {.not_before = not_before};
  json_t *f = json_pack("{s:s}", DTX_JOB_FX ".job", id), *docs = NULL, *d;
  dtx__kit_read_t q = {.coll = coll, .filter = f,
                       .what = "finding effect markers"};
  int rc = f ? dtx__kit_read(ex->st, &q, &docs) : DTX_ENOMEM;
  json_decref(f);
  size_t i;
  json_array_foreach(docs, i, d) {
    int matched = 0;
    rc = dtx__kit_update_ex(
        ex, "job.recover.clear_marker", coll,
        json_pack("{s:{s:O},s:s}", "_id", "$eq", json_object_get(d, "_id"),
                  DTX_JOB_FX ".job", id),
        json_pack("{s:{s:{s:s}}}", "$pull", DTX_JOB_FX, "job", id), &uo,
        &matched);
    if (rc)
      break;
    *n += matched;
  }
  json_decref(docs);
  return rc;
}

/* fx_until + the margin, saturated: the store time after which no write
 * of the job's effects can land (effect.c F3). */
static int64_t markers_free_at(const json_t *job) {
  int64_t u = dtx__int(job, "fx_until");
  return u > INT64_MAX - DTX_JOB_FX_MARGIN_MS ? INT64_MAX
                                              : u + DTX_JOB_FX_MARGIN_MS;
}

static int clear_markers(dtx__exec_t *ex, const json_t *job, int64_t *n) {
  const char *id = dtx__str(job, "_id"), *st = dtx__str(job, "state");
  int64_t free_at = markers_free_at(job);
  int rc = 0;
  /* F4: markers of terminal jobs only (finished_before's filter), each
   * pull bounded past every write of the effect. */
  DTX_ASSERT(dtx__job_terminal(job) && free_at >= dtx__int(job, "fx_until"),
             "F4");
  if (!json_is_true(json_object_get(job, "fx_cleared"))) {
    int matched = 0;
    rc = dtx__kit_update(ex, "job.recover.forget_markers", DTX_JOBS,
                         json_pack("{s:s,s:s}", "_id", id, "state", st),
                         json_pack("{s:{s:b}}", "$set", "fx_cleared", 1),
                         &matched);
    if (rc == 0 && !matched)
      return DTX_ENOMATCH; /* retried meanwhile: its markers stay */
  }
  size_t i;
  json_t *c;
  json_array_foreach(json_object_get(job, "fx_colls"), i, c) {
    if (json_is_string(c) &&
        (rc = clear_in(ex, id, json_string_value(c), free_at, n)))
      return rc;
  }
  int matched = 0;
  rc = dtx__kit_update(ex, "job.recover.markers_cleared", DTX_JOBS,
                       json_pack("{s:s,s:s,s:b}", "_id", id, "state", st,
                                 "fx_cleared", 1),
                       json_pack("{s:{s:[]}}", "$set", "fx_colls"), &matched);
  return rc;
}

static int markers(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                   dtx__tally_t *t) {
  int64_t ttl = o->tombstone_ttl_ms > 0 ? o->tombstone_ttl_ms : DEFAULT_TTL_MS;
  json_t *list = NULL, *job;
  size_t i;
  int rc = finished_before(
      ex,
      json_pack("{s:[s,s,s]}", "$in", DTX_JOB_SUCCEEDED, DTX_JOB_DEAD,
                DTX_JOB_CANCELED),
      1, ttl, BATCH, &list);
  if (rc)
    return rc;
  int64_t now = dtx__now_ms();
  json_array_foreach(list, i, job) {
    int64_t n = 0;
    /* Our clock first (no store write for a job not due yet); the pulls'
     * not_before makes the store's clock the judge. */
    if (markers_free_at(job) >= now) {
      dtx__tally_skip(t, "effects' writes not yet over (fx_until)",
                      json_object_get(job, "_id"));
      continue;
    }
    rc = clear_markers(ex, job, &n);
    if (rc == 0)
      dtx__tally_ran(t, "markers_cleared", n);
    else if (rc == DTX_ENOMATCH)
      dtx__tally_skip(t, "retried while clearing markers",
                      json_object_get(job, "_id"));
    else if (rc == DTX_ESTATE)
      dtx__tally_skip(t, "store clock not yet past fx_until",
                      json_object_get(job, "_id"));
    else
      dtx__tally_error(t, json_object_get(job, "_id"), rc);
  }
  json_decref(list);
  return 0;
}

static int purge(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                 dtx__tally_t *t) {
  int64_t keep = o->retention_ms > 0 ? o->retention_ms : DEFAULT_RETENTION_MS;
  json_t *list = NULL, *job;
  size_t i;
  int rc = finished_before(ex, json_string(DTX_JOB_SUCCEEDED), 0, keep,
                           PURGE_BATCH, &list);
  if (rc)
    return rc;
  json_array_foreach(list, i, job) {
    int64_t n = 0;
    /* A child stays while its parent waits or has yet to run: its result
     * is the parent's input (flow.c). */
    json_t *p = NULL;
    const char *pid = dtx__str(job, "parent");
    if (pid && dtx__kit_get(ex, DTX_JOBS, pid, &p) == 0 &&
        !dtx__job_terminal(p)) {
      json_decref(p);
      continue;
    }
    json_decref(p);
    dtx__err_clear();
    rc = dtx__kit_delete(ex, "job.recover.purge", DTX_JOBS,
                         json_pack("{s:O,s:s,s:{s:b}}", "_id",
                                   json_object_get(job, "_id"), "state",
                                   DTX_JOB_SUCCEEDED, "ev_pend", "$exists",
                                   0),
                         &n);
    DTX_ASSERT(rc || n <= 1, "store.modified<=matched"); /* one by _id */
    if (rc)
      dtx__tally_error(t, json_object_get(job, "_id"), rc);
    else
      dtx__tally_ran(t, "purged", n);
  }
  json_decref(list);
  return 0;
}

/* ---- retention of dead and canceled jobs (docs/jobs.md, "Retention") ----
 * With keep_dead_ms > 0: dead and canceled jobs finished longer ago, whose
 * effect markers are cleared (fx_colls empty: the delete guard admits no
 * other) and no events waiting in the outbox, are deleted, at most PURGE_BATCH per pass, each by one delete
 * conditioned on its terminal state (job.recover.purge).  A dead job so
 * purged can no longer be retried by hand. */
static int purge_dead(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                      dtx__tally_t *t) {
  if (o->keep_dead_ms <= 0)
    return 0; /* kept: dead jobs are what an operator looks at */
  json_t *list = NULL, *job;
  size_t i;
  int rc = finished_before(
      ex, json_pack("{s:[s,s]}", "$in", DTX_JOB_DEAD, DTX_JOB_CANCELED), 0,
      o->keep_dead_ms, PURGE_BATCH, &list);
  if (rc)
    return rc;
  json_array_foreach(list, i, job) {
    int64_t n = 0;
    const char *st = dtx__str(job, "state");
    /* J6: a terminal job without markers only (the delete guard too). */
    DTX_ASSERT(dtx__state_is(job, DTX_JOB_DEAD) ||
                   dtx__state_is(job, DTX_JOB_CANCELED),
               "J6");
    rc = dtx__kit_delete(ex, "job.recover.purge", DTX_JOBS,
                         json_pack("{s:O,s:s,s:{s:b},s:{s:b}}", "_id",
                                   json_object_get(job, "_id"), "state", st,
                                   "fx_colls.0", "$exists", 0, "ev_pend",
                                   "$exists", 0),
                         &n);
    DTX_ASSERT(rc || n <= 1, "store.modified<=matched"); /* one by _id */
    if (rc)
      dtx__tally_error(t, json_object_get(job, "_id"), rc);
    else
      dtx__tally_ran(t, dtx__state_is(job, DTX_JOB_DEAD) ? "purged_dead"
                                                         : "purged_canceled",
                     n);
  }
  json_decref(list);
  return 0;
}

int dtx__job_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                     dtx__tally_t *t) {
  return dtx__job_recover_ex(ex, o, 0, t);
}

int dtx__job_recover_ex(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                        int busy, dtx__tally_t *t) {
  int64_t moved = 0;
  int rc = dtx__job_promote(ex, NULL, BATCH, &moved);
  if (rc)
    dtx__tally_error(t, NULL, rc);
  else if (moved)
    dtx__tally_ran(t, "promoted", moved);
  if ((rc = takeovers(ex, o, t)) || (rc = dtx__job_flow_recover(ex, t)) ||
      (rc = markers(ex, o, t)) || (rc = dtx__job_events_recover(ex, o, busy, t)) ||
      (rc = purge(ex, o, t)) ||
      (rc = purge_dead(ex, o, t)) || (rc = dtx__job_unique_recover(ex, t)) ||
      (rc = dtx__jr_recover(ex, t)))
    dtx__tally_error(t, NULL, rc);
  return 0;
}
