/* remote.c -- the job runner's protocol as four calls, for a handler in
 * another process (docs/jobs.md, "Remote workers"): dtx_job_claim,
 * dtx_job_heartbeat, dtx_job_complete and dtx_job_fail_at, which doctxd's
 * job routes (src/server/routes_job.c) and `doctx job claim | heartbeat |
 * complete | fail` call.  Nothing here is a step of its own: the claim is
 * the runner's (dtx__job_claim: the kit's claim-many, fault point
 * job.claim), the renewal the runner's heartbeat (dtx__job_renew), and
 * an outcome the move the runner and recovery make (dtx__job_finish:
 * job.complete / job.fail, fenced by the epoch, J1 in job.c).
 *
 * What a remote caller adds is a name instead of a held document: it
 * names the attempt by (job id, epoch).  So each call reads the job and
 * acts only while it runs at that epoch -- the read is no guard, the
 * fenced write is: between the read and the write a takeover bumps the
 * epoch and the write matches nothing (DTX_ENOMATCH -> DTX_ESTALE).  The
 * executor acts under the job's own owner, so the kit's check of "was
 * it my own move" after a lost reply still recognises the move.
 *
 * A repeated outcome (a worker retrying after a lost HTTP reply) is
 * recognised, not redone: a job succeeded at epoch E was completed by
 * E's holder (a takeover moves it to E + 1 first), so complete(E) finding
 * it answers the job again; fail(E) likewise for delayed or dead at E
 * with the same error.  Anything else at another state or epoch is
 * DTX_ESTALE, nothing written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

#define ERROR_MAX 16384

int dtx_job_claim_check(const char *queue, int n, int64_t lease_ms,
                        const char *owner) {
  int rc;
  dtx__err_clear();
  if ((rc = dtx__check_ident("queue name", queue)) ||
      (rc = dtx__check_owner(owner)))
    return rc;
  if (n < 0 || n > DTX__CLAIM_MANY_MAX)
    return dtx__err(DTX_EINVAL, "n must be from 1 to %d jobs, got %d",
                    DTX__CLAIM_MANY_MAX, n);
  if (lease_ms < 0)
    return dtx__err(DTX_EINVAL, "lease must be >= 0 ms, got %lld",
                    (long long)lease_ms);
  return 0;
}

static int check_attempt(const char *id, int64_t epoch) {
  int rc = dtx__check_ident("job id", id);
  if (rc)
    return rc;
  if (epoch < 1)
    return dtx__err(DTX_EINVAL, "epoch must be >= 1 (a claim's), got %lld",
                    (long long)epoch);
  return 0;
}

int dtx_job_heartbeat_check(const char *id, int64_t epoch, int64_t lease_ms) {
  int rc;
  dtx__err_clear();
  if ((rc = check_attempt(id, epoch)))
    return rc;
  if (lease_ms < 0)
    return dtx__err(DTX_EINVAL, "lease must be >= 0 ms, got %lld",
                    (long long)lease_ms);
  return 0;
}

int dtx_job_end_check(const char *id, int64_t epoch, const json_t *result,
                      const char *error) {
  int rc;
  (void)result; /* any value: one the store cannot keep is kept as text */
  dtx__err_clear();
  if ((rc = check_attempt(id, epoch)))
    return rc;
  if (error) {
    size_t n = strlen(error);
    json_t *s = n <= ERROR_MAX ? json_stringn(error, n) : NULL;
    json_decref(s);
    if (n > ERROR_MAX)
      return dtx__err(DTX_EINVAL, "error is %zu bytes; at most %d", n,
                      ERROR_MAX);
    if (!s)
      return dtx__err(DTX_EINVAL, "error is not valid UTF-8");
  }
  return 0;
}

int dtx_job_claim(dtx_store_t *st, const char *queue, int n, int64_t lease_ms,
                  const char *owner, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *due = NULL, *sort = NULL;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx_job_claim_check(queue, n, lease_ms, owner);
  if (rc)
    return dtx__call_end(&c, rc);
  dtx__exec_init(&ex, st, owner, lease_ms, 0);
  if ((rc = dtx__job_setup(st)) ||
      (rc = dtx__job_claim_query(queue, NULL, &due, &sort)))
    return dtx__call_end(&c, rc);
  rc = dtx__job_claim(&ex, queue, due, sort, n > 0 ? (size_t)n : 1, out);
  json_decref(due);
  json_decref(sort);
  if (rc == DTX_ENOMATCH) { /* nothing due: an empty claim, no error */
    dtx__err_clear();
    rc = (*out = json_array()) ? 0 : DTX_ENOMEM;
  }
  /* A parent's children with their results, as the runner's handler
   * sees them (flow.c); a read that fails leaves the ids. */
  for (size_t i = 0; rc == 0 && i < json_array_size(*out); i++) {
    json_t *view = NULL;
    if (dtx__job_flow_view(&ex, json_array_get(*out, i), &view))
      dtx__err_clear();
    else if (view)
      json_array_set_new(*out, i, view);
  }
  /* J1: every job returned runs under this claim's owner. */
  DTX_ASSERT(rc || json_array_size(*out) <= (size_t)(n > 0 ? n : 1),
             "job.claim");
  return dtx__call_end(&c, rc);
}

/* The job id as it stands, and whether its attempt at epoch is current
 * (running at that epoch): 0 with *job, DTX_ESTALE (naming the state
 * and epoch it is at, *job still set) or a read's error. */
static int attempt(dtx__exec_t *ex, const char *id, int64_t epoch,
                   json_t **job) {
  int rc = dtx__kit_get(ex, DTX_JOBS, id, job);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(rc, "no job '%s'", id);
  if (rc)
    return rc;
  if (dtx__state_is(*job, DTX_JOB_RUNNING) && dtx__int(*job, "epoch") == epoch)
    return 0;
  return dtx__err(DTX_ESTALE,
                  "job %s is %s at epoch %lld, not running at epoch %lld "
                  "(taken over, or ended): nothing was written",
                  id, dtx__str(*job, "state") ? dtx__str(*job, "state") : "?",
                  (long long)dtx__int(*job, "epoch"), (long long)epoch);
}

/* An executor acting as the job's holder (its owner), so the kit's
 * check of its own move after a lost reply recognises it. */
static void as_holder(dtx__exec_t *ex, dtx_store_t *st, const json_t *job,
                      int64_t lease_ms) {
  dtx__exec_init(ex, st, dtx__str(job, "owner"), lease_ms, 0);
}

int dtx_job_heartbeat(dtx_store_t *st, const char *id, int64_t epoch,
                      int64_t lease_ms, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *job = NULL, *dummy = NULL;
  if (!out)
    out = &dummy;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx_job_heartbeat_check(id, epoch, lease_ms);
  if (rc == 0) {
    dtx__exec_init(&ex, st, NULL, 0, 0);
    rc = attempt(&ex, id, epoch, &job);
  }
  if (rc == 0 && !dtx__job_cancel_requested(job)) {
    as_holder(&ex, st, job, lease_ms);
    rc = dtx__job_renew(&ex, job, 0, out);
    if (rc == DTX_ENOMATCH) /* fenced between the read and the renewal */
      rc = dtx__err(DTX_ESTALE,
                    "job %s: the attempt at epoch %lld was taken over or "
                    "ended: its lease was not renewed",
                    id, (long long)epoch);
  } else if (rc == 0) { /* the job as it is, for the canceled answer */
    *out = job;
    job = NULL;
  }
  if (rc == 0 && dtx__job_cancel_requested(*out))
    /* J17: a cancel was requested: the worker stops and ends the attempt
     * (complete or fail end it canceled); *out is the job. */
    rc = dtx__err(DTX_ESTATE,
                  "job %s: canceled (a cancel was requested): stop, and end "
                  "the attempt at epoch %lld with complete or fail, which "
                  "end it canceled",
                  id, (long long)epoch);
  json_decref(job);
  json_decref(dummy);
  return dtx__call_end(&c, rc);
}

/* 1 when job stands where this epoch's own outcome left it (ok: the
 * completion; else the failure with error): a repeat, answered again. */
static int ended_by(const json_t *job, int64_t epoch, int ok,
                    const char *error) {
  if (dtx__int(job, "epoch") != epoch)
    return 0;
  if (dtx__state_is(job, DTX_JOB_CANCELED) && dtx__job_cancel_requested(job))
    return 1; /* J17: its holder's end, turned into the cancel */
  if (ok)
    return dtx__state_is(job, DTX_JOB_SUCCEEDED);
  const char *last = dtx__str(job, "last_error");
  return (dtx__state_is(job, DTX_JOB_DELAYED) ||
          dtx__state_is(job, DTX_JOB_DEAD)) &&
         (error ? last && strcmp(last, error) == 0
                : json_is_null(json_object_get(job, "last_error")));
}

static int end(dtx_store_t *st, const char *id, int64_t epoch, int ok,
               const json_t *result, const char *error, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *job = NULL, *dummy = NULL;
  if (!out)
    out = &dummy;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx_job_end_check(id, epoch, result, error);
  if (rc == 0) {
    dtx__exec_init(&ex, st, NULL, 0, 0);
    rc = attempt(&ex, id, epoch, &job);
  }
  if (rc == DTX_ESTALE && ended_by(job, epoch, ok, error)) {
    dtx__err_clear();
    *out = job; /* the same answer again; nothing written */
    job = NULL;
    rc = 0;
  } else if (rc == 0) {
    const char *point = ok ? "job.complete" : "job.fail";
    as_holder(&ex, st, job, 0);
    /* J17: with a cancel requested, the move is job.cancel.end. */
    rc = dtx__job_finish(&ex, job, ok,
                         ok && result ? json_deep_copy(result) : NULL, error,
                         point, 0, out);
    if (rc == DTX_ENOMATCH) { /* a cancel recorded since the read? */
      json_t *o = NULL;
      int crc = dtx__job_end_canceled(&ex, job, &o);
      if (crc != DTX_ENOMATCH) {
        rc = crc;
        *out = o;
      }
    }
    if (rc && rc != DTX_ENOMATCH && !dtx__transient(rc) && ok && result) {
      /* Refused for a reason of the store's own: the result as text. */
      char why[400];
      snprintf(why, sizeof why, "%s", dtx_errdetail());
      rc = dtx__job_complete_refused(&ex, job, json_deep_copy(result), why,
                                     out);
    }
    if (rc == DTX_ENOMATCH) {
      /* Fenced: by a takeover (STALE), or by the same outcome sent twice
       * at once (the other call's write ended it: the same answer). */
      json_t *now = NULL;
      int grc = dtx__kit_get(&ex, DTX_JOBS, id, &now);
      if (grc == 0 && ended_by(now, epoch, ok, error)) {
        *out = now;
        rc = 0;
      } else {
        json_decref(now);
        rc = grc && grc != DTX_ENOTFOUND
                 ? grc
                 : dtx__err(DTX_ESTALE,
                            "job %s: the attempt at epoch %lld was taken "
                            "over or ended meanwhile: nothing was written",
                            id, (long long)epoch);
      }
    }
    /* J1/J3: only this epoch's move ended it, once. */
    DTX_ASSERT(rc || dtx__int(*out, "epoch") == epoch, "J1");
  }
  /* A flow's parent (flow.c, J15), also on a repeat: the first call may
   * have stopped before it. */
  if (rc == 0)
    dtx__job_settle_after(&ex, *out);
  json_decref(job);
  json_decref(dummy);
  return dtx__call_end(&c, rc);
}

int dtx_job_complete(dtx_store_t *st, const char *id, int64_t epoch,
                     const json_t *result, json_t **out) {
  return end(st, id, epoch, 1, result, NULL, out);
}

int dtx_job_fail_at(dtx_store_t *st, const char *id, int64_t epoch,
                    const char *error, json_t **out) {
  return end(st, id, epoch, 0, NULL, error, out);
}

/* ---- progress (docs/jobs.md, "Progress") ------------------------------------
 *
 * A running attempt reports how far it got: ONE fenced move of the job
 * running -> running at the attempt's epoch (fault point job.progress)
 * that sets "progress" and nothing else of the protocol -- not the state,
 * not the epoch, not the lease -- so a stale attempt's report matches
 * nothing and is refused (DTX_ESTALE), and a report never outlives its
 * attempt's fence.  A plain write may not change "progress" at all (the
 * jobs' transition rule, scope "plain": J16 in job.c). */

/* The most JSON text a progress value may take: a progress is a
 * position, not a result (a result has 16 KiB and its own path). */
#define PROGRESS_MAX 4096

int dtx_job_progress_check(const char *id, int64_t epoch,
                           const json_t *value) {
  int rc;
  dtx__err_clear();
  if ((rc = check_attempt(id, epoch)))
    return rc;
  if (!value)
    return dtx__err(DTX_EINVAL, "a progress value is required (any JSON)");
  json_t *in_job = json_pack("{s:O}", "progress", value);
  rc = in_job ? dtx__depth_check(in_job, DTX_EINVAL, "the job's progress")
              : DTX_ENOMEM;
  json_decref(in_job);
  if (rc)
    return rc;
  char *text = dtx__json_dump(value);
  size_t n = text ? strlen(text) : 0;
  free(text);
  if (!text)
    return DTX_ENOMEM;
  if (n > PROGRESS_MAX)
    return dtx__err(DTX_EINVAL,
                    "progress is %zu bytes of JSON; at most %d", n,
                    PROGRESS_MAX);
  return 0;
}

/* The move: job (its _id, state, epoch) running at its epoch. */
static int progress_move(dtx__exec_t *ex, const json_t *job,
                         const json_t *value, json_t **out) {
  /* J16: never the state, nor the epoch; a step that is no move, so its
   * event goes by dtx__job_event (events.c): the outbox's bound applies */
  json_t *fenced = dtx__pack("{s:O,s:s,s:O}", "_id", json_object_get(job, "_id"),
                             "state", DTX_JOB_RUNNING, "epoch",
                             json_object_get(job, "epoch"));
  if (!fenced)
    return DTX_ENOMEM;
  int rc = dtx__job_event(
      ex, "job.progress", fenced, "progress",
      dtx__pack("{s:O}", "progress", value),
      dtx__pack("{s:O,s:I}", "progress", value, "updated",
                (json_int_t)dtx__now_ms()),
      out);
  json_decref(fenced);
  /* J16: the attempt's epoch and state are what they were. */
  DTX_ASSERT(rc || (dtx__state_is(*out, DTX_JOB_RUNNING) &&
                    dtx__int(*out, "epoch") == dtx__int(job, "epoch")),
             "J16");
  return rc;
}

int dtx_job_progress(dtx_store_t *st, const char *id, int64_t epoch,
                     const json_t *value, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *job = NULL, *dummy = NULL;
  if (!out)
    out = &dummy;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx_job_progress_check(id, epoch, value);
  if (rc == 0) {
    dtx__exec_init(&ex, st, NULL, 0, 0);
    rc = attempt(&ex, id, epoch, &job);
  }
  if (rc == 0) {
    as_holder(&ex, st, job, 0);
    rc = progress_move(&ex, job, value, out);
    if (rc == DTX_ENOMATCH) /* fenced between the read and the write */
      rc = dtx__err(DTX_ESTALE,
                    "job %s: the attempt at epoch %lld was taken over or "
                    "ended: its progress was not written",
                    id, (long long)epoch);
  }
  json_decref(job);
  json_decref(dummy);
  return dtx__call_end(&c, rc);
}

int dtx_job_run_progress(dtx_job_run_t *run, const json_t *value) {
  dtx__call_t c;
  json_t *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx_job_progress_check(run->id, run->epoch, value);
  json_t *job = rc ? NULL
                   : json_pack("{s:s,s:s,s:I}", "_id", run->id, "state",
                               DTX_JOB_RUNNING, "epoch",
                               (json_int_t)run->epoch);
  if (rc == 0)
    rc = job ? progress_move(run->ex, job, value, &out) : DTX_ENOMEM;
  if (rc == DTX_ENOMATCH)
    rc = dtx__err(DTX_ESTALE,
                  "job %s: the attempt at epoch %lld was taken over or "
                  "ended: its progress was not written",
                  run->id, (long long)run->epoch);
  json_decref(job);
  json_decref(out);
  return dtx__call_end(&c, rc);
}
