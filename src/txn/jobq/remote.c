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

/* Relays the events of the jobs of array (events.c), each replaced by
 * the job as it then stands. */
static int relay_all(dtx__exec_t *ex, json_t *array) {
  json_t *docs[DTX__CLAIM_MANY_MAX];
  size_t n = json_array_size(array), i;
  for (i = 0; i < n && i < DTX__CLAIM_MANY_MAX; i++)
    docs[i] = json_incref(json_array_get(array, i));
  int rc = dtx__job_relay(ex, docs, i, NULL);
  for (size_t j = 0; j < i; j++)
    json_array_set_new(array, j, docs[j]);
  return rc;
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
  if (rc == 0 && relay_all(&ex, *out))
    dtx__err_clear(); /* left in the outboxes for the next relay */
  if (rc == DTX_ENOMATCH) { /* nothing due: an empty claim, no error */
    dtx__err_clear();
    rc = (*out = json_array()) ? 0 : DTX_ENOMEM;
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
  if (rc == 0) {
    as_holder(&ex, st, job, lease_ms);
    rc = dtx__job_renew(&ex, job, 0, out);
    if (rc == DTX_ENOMATCH) /* fenced between the read and the renewal */
      rc = dtx__err(DTX_ESTALE,
                    "job %s: the attempt at epoch %lld was taken over or "
                    "ended: its lease was not renewed",
                    id, (long long)epoch);
  }
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
    rc = dtx__job_finish(&ex, job, ok,
                         ok && result ? json_deep_copy(result) : NULL, error,
                         point, 0, out);
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
    if (rc == 0 && dtx__job_relay(&ex, out, 1, NULL))
      dtx__err_clear(); /* left in the outbox for the next relay */
  }
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
