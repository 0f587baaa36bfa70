/* cancel.c -- the cancel of a running job (docs/jobs.md, "Canceling a
 * running job"; J17 in job.c, whose diagram and table list its moves).
 *
 * dtx_job_cancel (job.c) on a running job records the request
 * (job.cancel.request: {_id, state: running, no cancel_requested} ->
 * $set cancel_requested: now) and ends nothing itself: the attempt's
 * holder -- the runner's heartbeat (runner.c), a remote worker's
 * heartbeat, complete or fail (remote.c) -- sees it and ends the attempt
 * canceled (job.cancel.end: {_id, running, epoch, cancel_requested} ->
 * canceled, finished, unique_live $unset), fenced by its epoch.  Every
 * other end of a running job (complete, fail, recovery's takeover as a
 * failure) is conditioned on NO request in the same atomic step
 * (dtx__job_no_cancel in dtx__job_outcome), so a completion racing the
 * cancel matches nothing and its holder ends the attempt canceled
 * instead: once the request is recorded the attempt ends canceled, never
 * succeeded, never retried.  Recovery's takeover of a lapsed attempt
 * with a request ends it canceled (job.recover.takeover).  The effect
 * fence (effect.c) is conditioned on no request too: no effect is pinned
 * after the request; one whose fence step came first may still apply. */
#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

#define JOB (&dtx__job_kind)

int dtx__job_cancel_requested(const json_t *job) {
  return json_object_get(job, "cancel_requested") != NULL;
}

json_t *dtx__job_no_cancel(void) {
  return json_pack("{s:{s:b}}", "cancel_requested", "$exists", 0);
}

int dtx__job_cancel_move(const json_t *job, const char *point, int take,
                         dtx__move_t *m) {
  *m = (dtx__move_t){
      .point = point,
      .from = DTX_JOB_RUNNING,
      .to = DTX_JOB_CANCELED,
      .flags = DTX__FENCED | (take ? DTX__TAKE : 0) |
               (take == 1 ? DTX__LAPSED : 0),
      .cond = json_pack("{s:{s:b}}", "cancel_requested", "$exists", 1),
      .set = json_pack("{s:I}", "finished", (json_int_t)dtx__now_ms())};
  /* terminal: the unique key is free (J4), or kept for its window (J18) */
  int uerr = !m->set || dtx__job_unique_end(job, m->set, dtx__now_ms(),
                                            &m->unset);
  if (!m->cond || !m->set || uerr) {
    json_decref(m->cond);
    json_decref(m->set);
    json_decref(m->unset);
    m->cond = m->set = m->unset = NULL;
    return dtx__err(DTX_ENOMEM, "ending the attempt of job %s canceled",
                    dtx__str(job, "_id"));
  }
  return 0;
}

int dtx__job_end_canceled(dtx__exec_t *ex, const json_t *job, json_t **out) {
  json_t *now = NULL;
  dtx__move_t m;
  *out = NULL;
  int rc = dtx__kit_get(ex, DTX_JOBS, dtx__str(job, "_id"), &now);
  if (rc == DTX_ENOTFOUND)
    rc = DTX_ENOMATCH;
  if (rc == 0 && !(dtx__state_is(now, DTX_JOB_RUNNING) &&
                   dtx__int(now, "epoch") == dtx__int(job, "epoch") &&
                   dtx__job_cancel_requested(now)))
    rc = DTX_ENOMATCH; /* not a cancel: taken over, or ended */
  if (rc == 0 && (rc = dtx__job_cancel_move(now, "job.cancel.end", 0, &m)) == 0)
    rc = dtx__kit_move(ex, JOB, now, &m, out);
  /* J17: a request ends the attempt canceled, at the holder's epoch. */
  DTX_ASSERT(rc || (dtx__state_is(*out, DTX_JOB_CANCELED) &&
                    dtx__int(*out, "epoch") == dtx__int(job, "epoch")),
             "J17");
  json_decref(now);
  return rc;
}

int dtx__job_cancel_request(dtx__exec_t *ex, json_t *job, json_t **out) {
  if (dtx__job_cancel_requested(job)) {
    *out = job; /* requested already: the same answer again */
    return 0;
  }
  dtx__move_t m = {.point = "job.cancel.request",
                   .from = DTX_JOB_RUNNING,
                   .to = NULL, /* the holder ends the attempt, not this */
                   .cond = dtx__job_no_cancel(),
                   .set = json_pack("{s:I}", "cancel_requested",
                                    (json_int_t)dtx__now_ms())};
  int rc = m.cond && m.set ? dtx__kit_move(ex, JOB, job, &m, out)
                           : DTX_ENOMEM;
  if (!m.cond || !m.set) {
    json_decref(m.cond);
    json_decref(m.set);
  }
  json_decref(job);
  return rc;
}

