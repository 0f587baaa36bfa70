/* job.c -- the job queue (reference solution 2): the state machine, the
 * public calls on one job and the pattern's method table.  The worker
 * that runs handlers is runner.c; effects on other documents effect.c.
 *
 * A job is one document of "jobs"; each step below is one atomic
 * conditional update of it.  Workers claim the due jobs of their queue
 * with the highest priority, then the oldest run_at, a batch at a time:
 * one find with a limit whose sort the store serves by walking the index
 * {state, queue, rank, run_at} (rank = -priority), a few entries per
 * bucket on Redis, then one bulk write of by-_id claims, each fenced by
 * the epoch it found (the kit's claim-many), so a claim neither reads the
 * backlog nor queues on one key or slot.
 *
 *          add (delay > 0)                        failure, attempts left
 *    +------------------------> delayed <------------------------------+
 *    |                          |   ^  promote (run_at <= now)         |
 *    | add                      v   |                                  |
 *  (new) ---------------------> ready --claim--> running --complete--> succeeded
 *                               |   ^               |  |
 *                   cancel      |   | retry (hand)  |  +--failure, none left-->
 *    canceled <-----------------+   |               |                    dead
 *    (also from delayed)            +---------------+--- (dead) <--------+
 *                                   takeover (lease lapsed) = a failure
 *    running --(cancel requested, then its holder's end or a takeover)-->
 *    canceled (cancel.c, J17)
 *
 *   transition                  function               fault point
 *   (record ready|delayed)      dtx_job_add            job.add
 *   ready -> running            claim (runner.c)       job.claim (each
 *                               (kit claim-many)       claim of a batch)
 *   (lease renewed)             heartbeat (runner.c)   -- (no step)
 *                               dtx_job_heartbeat
 *                               (remote.c)
 *   ready -> running            dtx_job_claim          job.claim
 *                               (remote.c: the runner's
 *                               dtx__job_claim)
 *   (effect on a document)      dtx_job_effect         job.effect.fence,
 *                               (effect.c: pin, apply, job.effect.apply,
 *                               void and repin)        job.effect.void,
 *                                                      job.effect.repin
 *   running -> succeeded        dtx__job_outcome, a    job.complete
 *                               batch's in one round
 *                               (runner.c write_outcomes)
 *   running -> delayed|dead     the same               job.fail
 *   running -> succeeded        dtx_job_complete       job.complete
 *                               (remote.c, one job:
 *                               dtx__job_finish)
 *   running -> delayed|dead     dtx_job_fail_at        job.fail
 *                               (remote.c, the same)
 *   running -> delayed|dead     recover.c (takeover)   job.recover.takeover
 *   delayed -> ready            dtx__job_promote       job.promote
 *   ready|delayed -> canceled   dtx_job_cancel         job.cancel
 *   dead -> ready               dtx_job_retry          job.retry
 *   (child recorded held)       flow.c add_child       job.flow.add
 *   ready|delayed|waiting       flow.c attach          job.flow.attach
 *     (epoch 0) -> waiting
 *   held -> ready|delayed       flow.c release         job.flow.release
 *   held -> (deleted)           flow.c (add refused)   job.flow.drop
 *   waiting -> ready|delayed    dtx__job_settle        job.flow.ready
 *   waiting -> dead             dtx__job_settle        job.flow.fail
 *   held -> canceled            flow.c (recovery)      job.flow.orphan
 *   waiting|held -> canceled    dtx_job_cancel         job.cancel
 *   dead (failed_child)         dtx_job_retry          job.retry
 *     -> waiting
 * Flows (flow.c, docs/jobs.md "Flows") add two live states: waiting (a
 * parent whose recorded children have not all succeeded) and held (a
 * child its parent has not recorded yet; not claimable).
 *   (a schedule's tick: its    sched.c tick_one     job.schedule.enqueue,
 *   job, then next_at moves)                        job.schedule.advance
 *   (schedule added/replaced)  dtx_job_schedule     job.schedule.add
 *   (schedule removed)         dtx_job_unschedule   job.schedule.remove
 *   (sched.c has the schedules' own diagram and J8-J9.)
 *   (queue paused|resumed)      dtx_job_queue_pause    job.queue.set
 *                               (queues.c; a claim round reads it first)
 *   (limit set|cleared)         dtx_job_queue_set      job.queue.set
 *   ready -> running under a    claim round of a       job.slot.take,
 *   running slot (max_running)  limited queue          job.claim
 *                               (limits.c)
 *   (its slot freed)            dtx__jq_release        job.slot.release
 *   ready -> running under a    claim of a rated       job.rate.take,
 *   unit of its group's rate    queue (rate.c)         job.claim
 *   window (rate N/MS)
 *   (window over, purged)       dtx__jr_recover        job.rate.retire,
 *                                                      job.rate.purge
 *   running -> running          dtx_job_progress,      job.progress
 *   (progress: J16)             dtx_job_run_progress
 *                               (remote.c)
 *   running -> running          dtx_job_cancel         job.cancel.request
 *   (cancel requested: J17)     (cancel.c)
 *   running -> canceled         the holder: runner.c,  job.cancel.end
 *   (cancel requested)          remote.c (heartbeat,
 *                               complete, fail), via
 *                               dtx__job_outcome /
 *                               dtx__job_end_canceled
 *   running -> canceled         recover.c (takeover    job.recover.takeover
 *   (cancel requested)          of a lapsed attempt)
 *   (terminal: unique window    add (a refused insert) job.unique.expire
 *   passed, key freed, J18)     and recovery (unique.c)
 * Recovery's other points (markers, retention) are in recover.c.
 *   (every row above)           its event recorded in  (that row's)
 *                               the same update (the
 *                               kind's on_move hook,
 *                               events.c; add: new_job)
 *   outbox -> event log         dtx__job_relay         job.events.log,
 *                               (events.c)             job.events.pull
 *   event log trimmed           recovery (events.c)    job.events.trim
 *
 * Invariants (DTX_ASSERT checks what each step relies on and leaves, in
 * every build; dtx_audit checks the store, audit.c, and the job's shape
 * check -- job_fits below -- runs after every move in debug builds):
 *  J1 Only the holder of a job's current epoch ends its attempt or acts
 *     for it: completing, failing, renewing and effects are conditioned
 *     on {state: running, epoch}; a claim and a takeover bump the epoch,
 *     so the previous holder's writes fail (reference weak spot 7).
 *  J2 A job is claimed only when due: ready means run_at <= now, as a
 *     delayed job becomes ready only by a promote conditioned on
 *     run_at <= now.
 *  J3 attempts counts the attempts that ended (success, failure,
 *     takeover), written by the fenced move that ends each; a job is
 *     dead exactly when a failure brings attempts to max_attempts.
 *  J4 unique_live ("QUEUE/KEY") is present exactly while a job with a
 *     unique key is not terminal: set at add and retry, $unset by the
 *     step that makes it terminal.  The store's unique sparse index on it
 *     admits one live job per (queue, key), across processes and crashes.
 *  J5 An effect applies at most once per (job, key), on one pinned
 *     document of its collection, over every attempt and process: effect.c
 *     (F1-F4).
 *  J6 A terminal job changes state again only by an explicit retry of a
 *     dead one, which is refused once its effect markers were cleared;
 *     the transition rule (job_transition below) refuses every other
 *     plain update that would, and fx_cleared never goes back.
 *  J7 Each state carries what the steps into it write, and nothing the
 *     steps out of it set: ready, delayed and running have no finished
 *     time; succeeded, dead and canceled have one; only a succeeded job
 *     has a result; succeeded and dead have ended an attempt (attempts
 *     >= 1); running, succeeded and dead were claimed (epoch >= 1); a
 *     live job has attempts left (attempts < max_attempts).  The
 *     validator refuses a write that breaks one (all but the last: it
 *     compares two fields) and the audit reports one forced past it, so
 *     a state set by hand -- a succeeded job back to ready (it would run
 *     again), a delayed one to succeeded (it would never run) -- is seen.
 *     A job rewritten whole into another consistent state is not: its
 *     fields are all the history it has.
 * J13-J15 are the flows' (flow.c): a parent runs only after every child
 *     it recorded succeeded, and records a child only while never
 *     claimed (J13); a child runs only once its parent recorded it (J14);
 *     a waiting parent leaves waiting exactly once per wait, and never
 *     stays waiting once its children decided (J15).
 *  J8 Every tick of a schedule, within a gen, has exactly one job (or a
 *     recorded skip) and next_at only grows: sched.c.
 *  J9 A schedule's gen only grows; a replaced or removed one enqueues at
 *     most the one tick in flight at the change: sched.c.
 *  J10-J11 (a queue's pause; queues.c): after a pause returns no claim
 *     round of the queue starts, and only the job.* steps write a
 *     queue's settings.
 *  J12 (max_running N; limits.c): at every instant at most N jobs of the
 *     queue claimed under the limit are running: each was claimed under
 *     a slot recording it at its epoch, and a slot is taken again only
 *     when its job cannot be running at that epoch.
 *  J22-J23 (a rate N/MS; rate.c): no window of a group admits more than
 *     N claims (each claim takes a unit by one conditional update of the
 *     window, n <= N - k); only the job.* steps write a window.
 * J16 A job's "progress" is written only by the move job.progress of its
 *     running attempt, fenced by the epoch (a stale attempt's report
 *     writes nothing), and that move changes neither the state nor the
 *     epoch nor the lease; a plain write may not change it (the
 *     transition rule's "plain" object), so what show and list print is
 *     what an attempt of the job reported.
 * J17 Once a cancel of a running job is recorded (cancel_requested, set
 *     by job.cancel.request on {state: running} and never removed: the
 *     transition rule's "increasing"), its attempt ends canceled, never
 *     succeeded nor retried: complete, fail and the takeover as a failure
 *     are conditioned on no request in the same atomic step
 *     (dtx__job_outcome), and the only move out of running with one is
 *     to canceled -- by the holder at its epoch (job.cancel.end) or by
 *     recovery's takeover.  The cancel request itself ends nothing.
 * J18 (J4 with a window) A job added with unique_for_ms N > 0 keeps its
 *     unique_live when it ends: the terminal step records unique_until =
 *     finished + N (saturated) instead of $unset-ing it, so the store's
 *     unique index refuses the key N ms after the end too.  Only the
 *     expiry (job.unique.expire, unique.c: {_id, unique_live,
 *     unique_until <= now} -> $unset both), made by an add the index
 *     refused and by recovery, gives it up; a retry unsets unique_until.
 *     The transition rule admits unique_until only on a terminal job, and
 *     no plain write of unique_live or unique_until.
 *  J19-J21 (events.c): every move records exactly one event in its own
 *     step; the per-queue log is dense, one entry per (job, born, n), in
 *     each job's order; an event leaves the outbox only once logged.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

/* Every kit move and claim of a job records its event in the same step
 * (events.c, J19). */
const dtx__kind_t dtx__job_kind = {DTX_JOBS, "state", dtx__job_on_move};
#define JOB (&dtx__job_kind)

#define UNIQUE_KEY_MAX 256

static const char *const states[] = {DTX_JOB_READY,     DTX_JOB_DELAYED,
                                     DTX_JOB_RUNNING,   DTX_JOB_SUCCEEDED,
                                     DTX_JOB_DEAD,      DTX_JOB_CANCELED,
                                     DTX_JOB_WAITING,   DTX_JOB_HELD,
                                     NULL};

int dtx__job_terminal(const json_t *job) {
  return dtx__state_is(job, DTX_JOB_SUCCEEDED) ||
         dtx__state_is(job, DTX_JOB_DEAD) ||
         dtx__state_is(job, DTX_JOB_CANCELED);
}

int dtx__job_setup(dtx_store_t *st) {
  return dtx__kit_ensure_indexes(st, &dtx__job_pattern);
}

/* ---- backoff ---------------------------------------------------------------- */

uint64_t dtx__job_random(void) {
  static _Thread_local uint64_t x;
  if (!x) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    x = (uint64_t)ts.tv_nsec * 2654435761u ^ (uint64_t)(uintptr_t)&x ^
        (uint64_t)ts.tv_sec;
    if (!x)
      x = 88172645463325252ull;
  }
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

int64_t dtx__job_backoff(int64_t backoff_ms, int64_t failed) {
  int64_t d = backoff_ms > 0 ? backoff_ms : DTX_JOB_BACKOFF_MS;
  for (int64_t i = 1; i < failed && d < DTX_JOB_BACKOFF_CAP_MS; i++)
    d *= 2;
  if (d > DTX_JOB_BACKOFF_CAP_MS)
    d = DTX_JOB_BACKOFF_CAP_MS;
  /* +-20%: d * (0.8 .. 1.2), in integer arithmetic */
  int64_t span = d * 2 / 5;
  if (span > 0)
    d = d - d / 5 + (int64_t)(dtx__job_random() % (uint64_t)(span + 1));
  if (d > DTX_JOB_BACKOFF_CAP_MS)
    d = DTX_JOB_BACKOFF_CAP_MS;
  DTX_ASSERT(d <= DTX_JOB_BACKOFF_CAP_MS, "J2"); /* due again, bounded */
  return d > 0 ? d : 1;
}

/* ---- add -------------------------------------------------------------------- */

static int req_check(const dtx_job_req_t *r, int tick);

int dtx_job_req_check(const dtx_job_req_t *r) { return req_check(r, 0); }

static int req_check(const dtx_job_req_t *r, int tick) {
  int rc;
  if (!r)
    return dtx__err(DTX_EINVAL, "no job request");
  if (!tick && r->id &&
      strncmp(r->id, DTX__SCHED_ID_PREFIX, strlen(DTX__SCHED_ID_PREFIX)) == 0)
    return dtx__err(DTX_EINVAL, "job id '%s': ids starting with '%s' are "
                    "the ticks of job schedules", r->id, DTX__SCHED_ID_PREFIX);
  if ((rc = dtx__check_ident("queue name", r->queue)) ||
      (rc = dtx__check_ident("job type", r->type)) ||
      (r->id && (rc = dtx__check_ident("job id", r->id))))
    return rc;
  if (r->priority < DTX_JOB_PRIORITY_MIN || r->priority > DTX_JOB_PRIORITY_MAX)
    return dtx__err(DTX_EINVAL, "priority must be from %d to %d, got %d",
                    DTX_JOB_PRIORITY_MIN, DTX_JOB_PRIORITY_MAX, r->priority);
  if (r->delay_ms < 0)
    return dtx__err(DTX_EINVAL, "delay must be >= 0 ms, got %lld",
                    (long long)r->delay_ms);
  if (r->delay_ms > DTX__MAX_DELAY_MS)
    return dtx__err(DTX_EINVAL, "delay of %lld ms is more than 100 years",
                    (long long)r->delay_ms);
  if (r->max_attempts < 0 || r->max_attempts > DTX_JOB_MAX_ATTEMPTS_LIMIT)
    return dtx__err(DTX_EINVAL, "max attempts must be from 1 to %d, got %d",
                    DTX_JOB_MAX_ATTEMPTS_LIMIT, r->max_attempts);
  if (r->backoff_ms < 0 || r->backoff_ms > DTX_JOB_BACKOFF_CAP_MS)
    return dtx__err(DTX_EINVAL, "backoff must be from 1 to %d ms, got %lld",
                    DTX_JOB_BACKOFF_CAP_MS, (long long)r->backoff_ms);
  if (r->unique_key &&
      (!*r->unique_key || strlen(r->unique_key) > UNIQUE_KEY_MAX))
    return dtx__err(DTX_EINVAL, "unique key must be 1 to %d bytes",
                    UNIQUE_KEY_MAX);
  if (r->unique_key && !dtx__utf8_ok(r->unique_key, strlen(r->unique_key)))
    return dtx__err(DTX_EINVAL, "unique key is not valid UTF-8");
  if (r->unique_for_ms < 0 || (r->unique_for_ms > 0 && !r->unique_key))
    return dtx__err(DTX_EINVAL, "unique-for must be >= 0 ms, with a unique "
                    "key, got %lld", (long long)r->unique_for_ms);
  if (r->payload) {
    if ((rc = dtx__depth_check(r->payload, DTX_EINVAL, "payload")))
      return rc;
  }
  return 0;
}

/* "QUEUE/KEY": '/' cannot occur in a queue name, so the pair is unique. */
static json_t *unique_live(const char *queue, const char *key) {
  return json_sprintf("%s/%s", queue, key);
}

static json_t *new_job(const dtx_job_req_t *r, const char *id,
                       const json_t *extra) {
  int64_t now = dtx__now_ms();
  int max = r->max_attempts ? r->max_attempts : DTX_JOB_MAX_ATTEMPTS;
  int64_t backoff = r->backoff_ms ? r->backoff_ms : DTX_JOB_BACKOFF_MS;
  /* J7: a new job has attempts left; check_req bounded the rest. */
  DTX_ASSERT(max >= 1 && backoff >= 1 && r->delay_ms >= 0, "J7");
  json_t *job = json_pack(
      "{s:s,s:s,s:s,s:O,s:s,s:i,s:i,s:I,s:i,s:i,s:I,s:s?,s:n,s:n,s:[],"
      "s:I,s:I,s:n,s:n,s:I,s:I}",
      "_id", id, "queue", r->queue, "type", r->type, "payload",
      r->payload ? r->payload : json_null(), "state",
      r->delay_ms > 0 ? DTX_JOB_DELAYED : DTX_JOB_READY, "priority",
      r->priority, "rank", -r->priority, "run_at",
      (json_int_t)(now + r->delay_ms), "attempts", 0, "max_attempts", max,
      "backoff_ms", (json_int_t)backoff, "unique_key", r->unique_key,
      "last_error", "result", "fx_colls", "created", (json_int_t)now,
      "updated", (json_int_t)now, "finished", "owner", "lease_until",
      (json_int_t)0, "epoch", (json_int_t)0);
  if (job && r->unique_for_ms > 0 && /* J18: the window, kept */
      json_object_set_new(job, "unique_for_ms",
                          json_integer((json_int_t)r->unique_for_ms)) < 0) {
    json_decref(job);
    return NULL;
  }
  if (job && r->unique_key &&
      json_object_set_new(job, "unique_live",
                          unique_live(r->queue, r->unique_key)) < 0) {
    json_decref(job);
    return NULL;
  }
  /* A flow's fields (flow.c): parent, on_child_fail, the held state. */
  if (job && extra && json_object_update(job, (json_t *)extra) < 0) {
    json_decref(job);
    return NULL;
  }
  /* Its first event, "added", in its outbox from the insert on (J19);
   * after the flow's fields, so a child's says it was added held. */
  json_t *e = job ? dtx__job_event_entry("added", NULL,
                                         dtx__str(job, "state"),
                                         json_object_get(job, "epoch"), NULL)
                  : NULL;
  if (job && (!e || json_object_set_new(job, "ev_n", json_integer(1)) < 0 ||
              json_object_set_new(job, "ev_sent", json_integer(0)) < 0 ||
              json_object_set_new(job, "ev_pend",
                                  json_incref(json_object_get(e, "at"))) < 0 ||
              json_object_set_new(job, "ev_out", json_pack("[o]", e)) < 0)) {
    json_decref(job);
    return NULL;
  }
  return job;
}

static int same_job(const json_t *job, const dtx_job_req_t *r,
                    const json_t *extra) {
  const json_t *p = json_object_get(job, "parent");
  const json_t *want = extra ? json_object_get(extra, "parent") : NULL;
  if (!(p && want ? json_equal(p, want) : !p && !want))
    return 0; /* another parent: another job (no reparenting, flow.c) */
  return dtx__str_is(job, "queue", r->queue) &&
         dtx__str_is(job, "type", r->type) &&
         json_equal(json_object_get(job, "payload"),
                    r->payload ? (json_t *)r->payload : json_null());
}

/* The job recorded under id, when it is this request's; DTX_ECONFLICT
 * when it is another's; DTX_ENOTFOUND when there is none. */
static int existing_by_id(dtx__exec_t *ex, const dtx_job_req_t *r,
                          const json_t *extra, const char *id, json_t **out) {
  int rc = dtx__kit_get(ex, DTX_JOBS, id, out);
  if (rc)
    return rc;
  if (same_job(*out, r, extra))
    return 0;
  json_decref(*out);
  *out = NULL;
  return dtx__err(DTX_ECONFLICT,
                  "job '%s' exists with another queue, type, payload or "
                  "parent", id);
}

static int add(dtx__exec_t *ex, const dtx_job_req_t *r, const json_t *extra,
               const char *point, json_t **out, int *added) {
  char idbuf[25];
  int rc;
  if ((rc = req_check(r, json_object_get(extra, "sched") != NULL)) ||
      (rc = dtx__job_setup(ex->st)))
    return rc;
  const char *id = r->id;
  if (!id) {
    dtx__id_new(idbuf);
    id = idbuf;
  }
  json_t *job = new_job(r, id, extra);
  if (!job)
    return DTX_ENOMEM;
  /* A few rounds: the holder of a unique key may end between our refused
   * insert and our read of it, and then the key is free. */
  for (int round = 0; round < 8; round++) {
    rc = dtx__kit_insert(ex, point, DTX_JOBS, job);
    if (rc == 0) {
      *added = 1;
      /* Its "added" waits in its outbox for a relay (a reader's, a
       * worker's, recovery's: events.c) -- an add costs one write. */
      *out = json_incref(job);
      break;
    }
    if (rc != DTX_EDUPKEY)
      break;
    /* The _id, or the unique key.  A retry after a lost reply finds its
     * own insert here, which is the same job. */
    if ((rc = existing_by_id(ex, r, extra, id, out)) != DTX_ENOTFOUND)
      break;
    if (!r->unique_key) {
      rc = dtx__err(DTX_EBUSY, "job '%s': duplicate key, yet no such job", id);
      break;
    }
    json_t *holders = NULL, *f = json_pack(
        "{s:o}", "unique_live", unique_live(r->queue, r->unique_key));
    rc = f ? dtx__kit_find(ex, DTX_JOBS, f, NULL, &holders) : DTX_ENOMEM;
    json_decref(f);
    if (rc == 0 && json_array_size(holders) > 0) {
      const json_t *h = json_array_get(holders, 0);
      /* J18: a holder whose window has passed gives the key up once,
       * then the insert is tried again. */
      if (round == 0 && dtx__job_unique_expired(h, dtx__now_ms())) {
        rc = dtx__job_unique_expire(ex, h);
        json_decref(holders);
        if (rc && rc != DTX_ENOMATCH)
          break;
        continue;
      }
      *out = json_incref((json_t *)h);
      json_decref(holders);
      break;
    }
    json_decref(holders);
    if (rc)
      break;
    rc = dtx__err(DTX_EBUSY, "unique key '%s' of queue %s kept changing",
                  r->unique_key, r->queue);
  }
  json_decref(job);
  DTX_ASSERT(rc ? !*added : *out != NULL, "job.add.out");
  return rc;
}

int dtx_job_add(dtx_store_t *st, const dtx_job_req_t *req, json_t **out,
                int *added) {
  dtx__exec_t ex;
  dtx__call_t c;
  int dummy;
  *out = NULL;
  if (!added)
    added = &dummy;
  *added = 0;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, add(&ex, req, NULL, "job.add", out, added));
}

int dtx__job_add_doc(dtx__exec_t *ex, const dtx_job_req_t *r,
                     const json_t *extra, const char *point, json_t **out,
                     int *added) {
  return add(ex, r, extra, point, out, added);
}

/* ---- ending an attempt ---------------------------------------------------------- */

/* The most of a result's JSON text an unstorable result keeps. */
#define RESULT_TEXT_MAX 16384

json_t *dtx__job_storable_result(json_t *result, const char *why) {
  char reason[400];
  if (!result)
    return json_null();
  if (!why) {
    /* Inside a job the result is one level down: the depth the store
     * allows the job document (DTX_MAX_DEPTH) is what counts. */
    json_t *in_job = json_pack("{s:O}", "result", result);
    int rc = in_job ? dtx__depth_check(in_job, DTX_EINVAL, "the job's result")
                    : DTX_ENOMEM;
    json_decref(in_job);
    if (rc == 0)
      return result;
    snprintf(reason, sizeof reason, "%s", rc == DTX_ENOMEM
                                              ? "out of memory"
                                              : dtx_errdetail());
    dtx__err_clear();
    why = reason;
  }
  /* Kept as text, cut at a character boundary, and marked: the command
   * succeeded, and a job whose handler succeeded must end succeeded
   * (docs/jobs.md, "Results"), not stay running to be taken over and run
   * again. */
  char *text = dtx__json_dump(result);
  json_decref(result);
  size_t n = text ? strlen(text) : 0, keep = n;
  if (keep > RESULT_TEXT_MAX) {
    keep = RESULT_TEXT_MAX;
    while (keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80)
      keep--; /* not inside a UTF-8 sequence */
  }
  json_t *out = json_pack("{s:s,s:s%,s:b,s:I}", "dtx_unstorable", why,
                          "text", text ? text : "", keep, "truncated",
                          keep < n, "bytes", (json_int_t)n);
  free(text);
  return out ? out : json_null();
}

int dtx__job_outcome(const json_t *job, int ok, json_t *result,
                     const char *error, const char *point, int take,
                     dtx__move_t *m) {
  /* J17: once a cancel is recorded the attempt ends canceled, whoever
   * ends it (its holder, or recovery's takeover). */
  if (dtx__job_cancel_requested(job)) {
    json_decref(result);
    return dtx__job_cancel_move(job, take ? point : "job.cancel.end", take, m);
  }
  int64_t attempts = dtx__int(job, "attempts") + 1;
  int64_t max = dtx__int(job, "max_attempts");
  int64_t now = dtx__now_ms();
  const char *to = ok                ? DTX_JOB_SUCCEEDED
                   : attempts >= max ? DTX_JOB_DEAD
                                     : DTX_JOB_DELAYED;
  /* J3: dead exactly when a failure uses the last attempt. */
  DTX_ASSERT((strcmp(to, DTX_JOB_DEAD) == 0) == (!ok && attempts >= max),
             "J3");
  DTX_ASSERT(take >= 0 && take <= 2 && point, "J1");
  json_t *set = json_pack("{s:I}", "attempts", (json_int_t)attempts);
  if (set && ok)
    json_object_set_new(set, "result", dtx__job_storable_result(result, NULL));
  else
    json_decref(result);
  if (set && !ok)
    json_object_set_new(set, "last_error", error ? json_string(error)
                                                 : json_null());
  if (set && strcmp(to, DTX_JOB_DELAYED) == 0)
    json_object_set_new(
        set, "run_at",
        json_integer((json_int_t)(now + dtx__job_backoff(
                                            dtx__int(job, "backoff_ms"),
                                            attempts))));
  else if (set)
    json_object_set_new(set, "finished", json_integer((json_int_t)now));
  /* A terminal job frees its unique key (J4), or keeps it for its
   * window (J18). */
  json_t *unset = NULL;
  int uerr = strcmp(to, DTX_JOB_DELAYED) != 0 && set &&
             dtx__job_unique_end(job, set, now, &unset);
  *m = (dtx__move_t){.point = point,
                      .from = DTX_JOB_RUNNING,
                      .to = to,
                      .flags = DTX__FENCED | (take ? DTX__TAKE : 0) |
                               (take == 1 ? DTX__LAPSED : 0),
                      /* J17: no cancel recorded, in the same step */
                      .cond = dtx__job_no_cancel(),
                      .set = set,
                      .unset = unset};
  if (!set || !m->cond || uerr) {
    /* Without its fields the move would break J3/J7: refuse it. */
    json_decref(set);
    json_decref(unset);
    json_decref(m->cond);
    m->set = m->unset = m->cond = NULL;
    return dtx__err(DTX_ENOMEM, "ending the attempt of job %s",
                    dtx__str(job, "_id"));
  }
  /* J4/J18: every terminal move frees the unique key, or keeps it with
   * its window's end. */
  DTX_ASSERT(strcmp(to, DTX_JOB_DELAYED) == 0
                 ? !unset
                 : (unset != NULL) != (json_object_get(set, "unique_until") !=
                                       NULL),
             "J4");
  return 0;
}

int dtx__job_finish(dtx__exec_t *ex, const json_t *job, int ok,
                    json_t *result, const char *error, const char *point,
                    int take, json_t **out) {
  dtx__move_t m;
  int rc = dtx__job_outcome(job, ok, result, error, point, take, &m);
  *out = NULL;
  return rc ? rc : dtx__kit_move(ex, JOB, job, &m, out);
}

int dtx__job_complete_refused(dtx__exec_t *ex, const json_t *job,
                              json_t *result, const char *why, json_t **out) {
  json_t *res = dtx__job_storable_result(result, why ? why : "refused");
  return dtx__job_finish(ex, job, 1, res, NULL, "job.complete", 0, out);
}

/* ---- promote ------------------------------------------------------------------ */

int dtx__job_promote(dtx__exec_t *ex, const char *queue, int limit,
                     int64_t *moved) {
  int64_t now = dtx__now_ms(), n = 0;
  json_t *f = json_pack("{s:s,s:{s:I}}", "state", DTX_JOB_DELAYED, "run_at",
                        "$lte", (json_int_t)now);
  if (f && queue)
    json_object_set_new(f, "queue", json_string(queue));
  json_t *sort = json_pack("{s:i}", "run_at", 1), *due = NULL, *j;
  dtx__kit_read_t q = {.coll = DTX_JOBS, .filter = f, .sort = sort,
                       .limit = limit, .what = "finding due delayed jobs"};
  int rc = f && sort ? dtx__kit_read(ex->st, &q, &due) : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  size_t i;
  json_array_foreach(due, i, j) {
    json_t *out = NULL;
    dtx__move_t m = {.point = "job.promote",
                     .from = DTX_JOB_DELAYED,
                     .to = DTX_JOB_READY,
                     .cond = json_pack("{s:{s:I}}", "run_at", "$lte",
                                       (json_int_t)now)};
    int mrc = dtx__kit_move(ex, JOB, j, &m, &out);
    json_decref(out);
    if (mrc == 0)
      n++;
    else if (mrc != DTX_ENOMATCH) { /* another promoter got it: fine */
      rc = mrc;
      break;
    }
  }
  DTX_ASSERT(n <= (int64_t)json_array_size(due), "J2");
  json_decref(due);
  if (moved)
    *moved = n;
  return rc;
}

/* ---- the calls on one job ------------------------------------------------------- */

/* The start of a call on job id: *out NULL, the executor, the frame
 * opened (the caller closes it in every case); the id checked. */
static int begin_on(dtx__call_t *c, dtx__exec_t *ex, dtx_store_t *st,
                    const char *id, json_t **out) {
  *out = NULL;
  dtx__call_begin(c, 0);
  dtx__exec_init(ex, st, NULL, 0, 0);
  return dtx__check_ident("job id", id);
}

static int get_job(dtx__exec_t *ex, const char *id, json_t **out) {
  int rc = dtx__kit_get(ex, DTX_JOBS, id, out);
  return rc == DTX_ENOTFOUND ? dtx__err(rc, "no job '%s'", id) : rc;
}

int dtx_job_get(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = begin_on(&c, &ex, st, id, out);
  if (rc == 0)
    rc = get_job(&ex, id, out);
  return dtx__call_end(&c, rc);
}

static int check_state(const char *state) {
  for (size_t i = 0; state && states[i]; i++)
    if (strcmp(states[i], state) == 0)
      return 0;
  return dtx__err(DTX_EINVAL,
                  "unknown job state '%s' (ready, delayed, running, "
                  "succeeded, dead, canceled, waiting, held)",
                  state ? state : "");
}

int dtx_job_list(dtx_store_t *st, const char *queue, const char *state,
                 const dtx_page_t *page, json_t **out) {
  dtx__call_t c;
  int rc = 0;
  *out = NULL;
  dtx__call_begin(&c, 0);
  if ((queue && (rc = dtx__check_ident("queue name", queue))) ||
      (state && (rc = check_state(state))))
    return dtx__call_end(&c, rc);
  json_t *filter = json_object();
  if (filter && queue)
    json_object_set_new(filter, "queue", json_string(queue));
  if (filter && state)
    json_object_set_new(filter, "state", json_string(state));
  json_t *sort = json_pack("{s:i,s:i}", "created", 1, "_id", 1);
  rc = filter && sort ? dtx__kit_list(st, DTX_JOBS, filter, sort, page, out)
                      : DTX_ENOMEM;
  json_decref(filter);
  json_decref(sort);
  return dtx__call_end(&c, rc);
}

int dtx_job_stats(dtx_store_t *st, const char *queue, json_t **out) {
  dtx__call_t c;
  dtx__exec_t ex;
  int rc = 0;
  int64_t total = 0;
  *out = NULL;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  if (queue && (rc = dtx__check_ident("queue name", queue)))
    return dtx__call_end(&c, rc);
  json_t *res = json_object();
  for (size_t i = 0; res && rc == 0 && states[i]; i++) {
    json_t *f = json_pack("{s:s}", "state", states[i]);
    if (f && queue)
      json_object_set_new(f, "queue", json_string(queue));
    int64_t n = 0;
    rc = f ? dtx__kit_count(st, DTX_JOBS, f, "counting jobs", &n)
           : DTX_ENOMEM;
    json_decref(f);
    DTX_ASSERT(rc || n >= 0, "store.count.not_negative");
    json_object_set_new(res, states[i], json_integer((json_int_t)n));
    total += n;
  }
  if (res)
    json_object_set_new(res, "total", json_integer((json_int_t)total));
  if (res && rc == 0 && queue) { /* its settings (queues.c) */
    json_t *set = NULL;
    rc = dtx__jq_settings(st, queue, &set);
    if (rc == 0) {
      json_object_set(res, "paused", json_object_get(set, "paused"));
      json_object_set(res, "max_running", json_object_get(set, "max_running"));
      json_object_set(res, "rate", json_object_get(set, "rate")); /* rate.c */
    }
    json_decref(set);
  }
  if (rc || !res) {
    json_decref(res);
    return dtx__call_end(&c, rc ? rc : DTX_ENOMEM);
  }
  *out = res;
  return dtx__call_end(&c, 0);
}

/* What a state change by hand (cancel, retry) writes besides the state,
 * into *set and *unset; DTX_ESTATE for a retry that must be refused. */
static int by_hand_fields(const json_t *job, int retry, json_t **set,
                          json_t **unset) {
  *unset = NULL;
  if (!retry) { /* canceled: terminal, so the unique key is free (J4) */
    int64_t now = dtx__now_ms();
    *set = json_pack("{s:I}", "finished", (json_int_t)now);
    return *set ? dtx__job_unique_end(job, *set, now, unset) : DTX_ENOMEM;
  }
  if (json_is_true(json_object_get(job, "fx_cleared"))) {
    *set = NULL;
    return dtx__err(DTX_ESTATE,
                    "job %s: its effect markers were cleared after their "
                    "TTL, so a retry could apply its effects twice; add a "
                    "new job instead",
                    dtx__str(job, "_id"));
  }
  *set = json_pack("{s:i,s:I,s:n}", "attempts", 0, "run_at",
                   (json_int_t)dtx__now_ms(), "finished");
  const char *key = dtx__str(job, "unique_key"), *q = dtx__str(job, "queue");
  if (*set && key && q)
    json_object_set_new(*set, "unique_live", unique_live(q, key));
  /* J18: live again, so no window */
  *unset = json_pack("{s:s}", "unique_until", "");
  /* A parent its child failed (flow.c) waits for its children again. */
  if (*unset && json_object_get(job, "failed_child") &&
      json_object_set_new(*unset, "failed_child", json_string("")))
    return DTX_ENOMEM;
  return *set && *unset ? 0 : DTX_ENOMEM;
}

/* A state change by hand from one of `from` to `to`, read again and
 * retried while the job moves under it.  *out: the job afterwards, or as
 * it stands when it is in none of the states (then DTX_ESTATE). */
static int by_hand(dtx__exec_t *ex, const char *id, const char *const *from,
                   const char *to, int retry, json_t **out) {
  const char *point = retry ? "job.retry" : "job.cancel";
  const char *verb = retry ? "retried" : "canceled";
  json_t *job = NULL;
  int rc = get_job(ex, id, &job);
  for (int guard = 0; rc == 0 && guard < 100; guard++) {
    size_t i = 0;
    while (from[i] && !dtx__state_is(job, from[i]))
      i++;
    if (!retry && dtx__state_is(job, DTX_JOB_CANCELED)) {
      *out = job; /* canceled already: the same answer again */
      return 0;
    }
    DTX_ASSERT(!from[i] || !dtx__job_terminal(job) || retry, "J6");
    if (!from[i]) {
      char names[96] = "";
      for (size_t k = 0; from[k]; k++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                 k ? (from[k + 1] ? ", " : " or ") : "", from[k]);
      *out = job;
      return dtx__err(DTX_ESTATE, "job %s is %s; only %s jobs can be %s", id,
                      dtx__str(job, "state") ? dtx__str(job, "state") : "?",
                      names, verb);
    }
    /* flow.c: a parent its child failed goes back to waiting. */
    const char *dest = retry && json_object_get(job, "failed_child")
                           ? DTX_JOB_WAITING
                           : to;
    json_t *set, *unset, *next = NULL;
    if ((rc = by_hand_fields(job, retry, &set, &unset))) {
      json_decref(set);
      json_decref(unset);
      *out = job;
      return rc;
    }
    /* A retry must not pass recovery's forgetting of the markers. */
    dtx__move_t m = {.point = point, .from = from[i], .to = dest, .set = set,
                     .unset = unset,
                     .cond = retry ? json_pack("{s:{s:b}}", "fx_cleared",
                                               "$ne", 1)
                                   : NULL};
    rc = dtx__kit_move(ex, JOB, job, &m, &next);
    if (rc == 0) {
      json_decref(job);
      /* Flows (flow.c, J15): a canceled child may settle its parent; a
       * parent back to waiting may be due already. */
      if (!retry)
        dtx__job_settle_after(ex, next);
      else if (dtx__state_is(next, DTX_JOB_WAITING)) {
        json_t *again = NULL;
        if (dtx__job_settle(ex, id, NULL) == 0 &&
            dtx__kit_get(ex, DTX_JOBS, id, &again) == 0) {
          json_decref(next);
          next = again;
        } else
          dtx__err_clear();
      }
      *out = next;
      return 0;
    }
    if (rc == DTX_EDUPKEY) {
      *out = job;
      return dtx__err(DTX_ECONFLICT,
                      "job %s: another live job of queue %s holds its "
                      "unique key '%s'",
                      id, dtx__str(job, "queue"),
                      dtx__str(job, "unique_key") ? dtx__str(job, "unique_key")
                                                  : "");
    }
    if (rc != DTX_ENOMATCH)
      break;
    json_decref(job); /* it moved on: look again */
    job = NULL;
    rc = get_job(ex, id, &job);
  }
  if (rc == 0)
    rc = dtx__err(DTX_ECONFLICT, "job %s kept changing while %s", id, verb);
  *out = job;
  return rc;
}

/* A running job: the request (cancel.c); ready or delayed: canceled. */
int dtx_job_cancel(dtx_store_t *st, const char *id, json_t **out) {
  static const char *const from[] = {DTX_JOB_READY, DTX_JOB_DELAYED,
                                     DTX_JOB_WAITING, DTX_JOB_HELD, NULL};
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = begin_on(&c, &ex, st, id, out), guard;
  for (guard = 0; rc == 0 && guard < 100; guard++) {
    json_t *job = NULL;
    if ((rc = get_job(&ex, id, &job)))
      break;
    if (dtx__state_is(job, DTX_JOB_RUNNING)) {
      rc = dtx__job_cancel_request(&ex, job, out);
      if (rc != DTX_ENOMATCH)
        break;
      rc = 0; /* it moved on: look again */
      continue;
    }
    json_decref(job);
    rc = by_hand(&ex, id, from, DTX_JOB_CANCELED, 0, out);
    if (rc == DTX_ESTATE && dtx__state_is(*out, DTX_JOB_RUNNING)) {
      json_decref(*out); /* claimed meanwhile: request it */
      *out = NULL;
      rc = 0;
      continue;
    }
    if (rc == DTX_ESTATE)
      rc = dtx__err(DTX_ESTATE,
                    "job %s is %s; only ready, delayed, waiting, held or "
                    "running jobs can be canceled",
                    id, dtx__str(*out, "state") ? dtx__str(*out, "state")
                                                : "?");
    break;
  }
  if (rc == 0 && guard == 100)
    rc = dtx__err(DTX_ECONFLICT, "job %s kept changing while canceled", id);
  return dtx__call_end(&c, rc);
}

int dtx_job_retry(dtx_store_t *st, const char *id, json_t **out) {
  static const char *const from[] = {DTX_JOB_DEAD, NULL};
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = begin_on(&c, &ex, st, id, out);
  if (rc == 0 && (rc = dtx__job_setup(st)) == 0)
    rc = by_hand(&ex, id, from, DTX_JOB_READY, 1, out);
  return dtx__call_end(&c, rc);
}

/* ---- the method table ------------------------------------------------------------- */

static const char *const collections[] = {DTX_JOBS, DTX_JOB_SCHEDULES,
                                          DTX_JOB_QUEUES, DTX_JOB_RATES,
                                          DTX_JOB_EVENTS,
                                          NULL};

static const dtx__index_def_t indexes[] = {
    /* the claim: the walk in (rank, run_at) order under (state, queue) */
    {DTX_JOBS, "{\"state\":1,\"queue\":1,\"rank\":1,\"run_at\":1}", 0, 0},
    /* promotion of due delayed jobs */
    {DTX_JOBS, "{\"state\":1,\"run_at\":1}", 0, 0},
    /* stalled takeover, markers and retention, by age */
    {DTX_JOBS, "{\"state\":1,\"updated\":1}", 0, 0},
    /* one live job per (queue, unique key) (J4) */
    {DTX_JOBS, "{\"unique_live\":1}", 1, 1},
    /* events (events.c): the jobs whose outbox waits for a relay; a
     * queue's log in order; one entry per (job, n) (J20); the trim */
    {DTX_JOBS, "{\"ev_pend\":1}", 0, 1},
    /* `job list` pages along it from an --after's place (dtx__kit_list's
     * keyset); --queue and --state filter the walk */
    {DTX_JOBS, "{\"created\":1,\"_id\":1}", 0, 0},
    {DTX_JOB_EVENTS, "{\"queue\":1,\"seq\":1}", 0, 0},
    {DTX_JOB_EVENTS, "{\"queue\":1,\"rseq\":1}", 0, 0}, /* the newest */
    {DTX_JOB_EVENTS, "{\"job\":1,\"born\":1,\"n\":1}", 1, 0},
    {DTX_JOB_EVENTS, "{\"at\":1}", 0, 0},
    /* schedules (sched.c): a ticker reads the due ones of its queue */
    {DTX_JOB_SCHEDULES, "{\"state\":1,\"queue\":1,\"next_at\":1}", 0, 0},
    /* recovery's clearing of passed windows (J18) */
    {DTX_JOBS, "{\"unique_until\":1}", 0, 1},
    /* recovery's purge of rate windows long over (rate.c) */
    {DTX_JOB_RATES, "{\"end\":1}", 0, 0},
    {NULL, NULL, 0, 0},
};

/* The shape of a job (kit.h, dtx__shape_def_t) beyond the validator and
 * what the audit's check_job reports (J3, J4's presence, J7): a running
 * job is held by an owner (J1: a claim or takeover names it), and
 * unique_live, when there, is the job's own "QUEUE/KEY" (J4). */
static int job_fits(const json_t *job, char *why, size_t n) {
  const char *live = dtx__str(job, "unique_live");
  const char *q = dtx__str(job, "queue"), *key = dtx__str(job, "unique_key");
  size_t ql = q ? strlen(q) : 0;
  if (dtx__state_is(job, DTX_JOB_RUNNING) && !dtx__str(job, "owner"))
    return dtx__shape_bad(why, n, "running, yet no owner holds it (J1)");
  if (json_object_get(job, "unique_live") &&
      !(live && q && key && strncmp(live, q, ql) == 0 && live[ql] == '/' &&
        strcmp(live + ql + 1, key) == 0))
    return dtx__shape_bad(why, n, "unique_live is not its QUEUE/KEY (J4)");
  return 0;
}

static const dtx__shape_def_t shapes[] = {{DTX_JOBS, job_fits},
                                          {NULL, NULL}};

static const dtx__rules_def_t rules[] = {
    /* Deleted: a job over with no markers, no unique key held (J18: a
     * job deleted within its window freed the key before the window
     * ended) and no events waiting in its outbox; or a held child
     * (flow.c: the add refused, its parent already ran -- the add is
     * undone, its "added" with it, events.c). */
    {DTX_JOBS, dtx__job_shape,
     "{\"$or\":[{\"state\":{\"$in\":[\"" DTX_JOB_SUCCEEDED "\",\"" DTX_JOB_DEAD
     "\",\"" DTX_JOB_CANCELED "\"]},\"fx_colls.0\":{\"$exists\":false},"
     "\"unique_live\":{\"$exists\":false},\"ev_pend\":{\"$exists\":false}},"
     "{\"state\":\"" DTX_JOB_HELD "\"}]}",
     dtx__job_transition},
    /* The log (events.c, J20-J21): append-only for plain writes; only
     * the relay inserts and only the trim deletes. */
    {DTX_JOB_EVENTS, dtx__job_event_shape, NULL,
     "{\"scope\":\"plain\",\"steps\":[\"job\"],\"insert\":false,"
     "\"immutable\":[\"queue\",\"seq\",\"rseq\",\"job\",\"born\",\"n\",\"event\","
     "\"at\",\"epoch\",\"from\",\"to\",\"data\"],"
     "\"delete\":{\"seq\":{\"$lt\":0}},"
     "\"why\":\"the job event log is written only by doctx's relay and "
     "trim (docs/jobs.md, Events)\"}"},
    /* only a tombstone goes: an active schedule's history is its audit */
    {DTX_JOB_SCHEDULES, dtx__sched_shape, "{\"state\":\"removed\"}",
     dtx__sched_transition},
    /* a queue's settings: pause and resume (queues.c, J10-J11) */
    {DTX_JOB_QUEUES, dtx__jq_shape, dtx__jq_delete_guard,
     dtx__jq_transition},
    /* a queue's rate windows (rate.c, J22-J23) */
    {DTX_JOB_RATES, dtx__jr_shape, dtx__jr_delete_guard, dtx__jr_transition},
    {NULL, NULL, NULL, NULL},
};

static const char *const fault_points[] = {
    "job.add",
    "job.claim",
    "job.effect.fence",
    "job.effect.apply",
    "job.effect.void",
    "job.effect.repin",
    "job.complete",
    "job.fail",
    "job.promote",
    "job.cancel",
    "job.retry",
    /* flows (flow.c) */
    "job.flow.add",
    "job.flow.attach",
    "job.flow.release",
    "job.flow.drop",
    "job.flow.ready",
    "job.flow.fail",
    "job.flow.orphan",
    /* schedules (sched.c) */
    "job.schedule.add",
    "job.schedule.enqueue",
    "job.schedule.advance",
    "job.schedule.remove",
    "job.progress", /* remote.c */
    "job.cancel.request", /* cancel.c */
    "job.cancel.end",
    "job.unique.expire", /* unique.c */
    /* recovery (recover.c) */
    "job.recover.takeover",
    "job.recover.forget_markers",
    "job.recover.clear_marker",
    "job.recover.markers_cleared",
    "job.recover.purge",
    /* events (events.c) */
    "job.events.log",
    "job.events.pull",
    "job.events.trim",
    /* a queue's settings (queues.c) and running slots (limits.c) */
    "job.queue.set",
    "job.slot.take",
    "job.slot.release",
    /* a queue's rate windows (rate.c) */
    "job.rate.take",
    "job.rate.retire",
    "job.rate.purge",
    NULL,
};

const dtx__pattern_t dtx__job_pattern = {
    .name = "job",
    .kind = &dtx__job_kind,
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .recover = dtx__job_recover,
    .audit = dtx__job_audit,
    .rules = rules,
    .shapes = shapes,
};

