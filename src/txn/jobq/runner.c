/* runner.c -- the job runner (dtx_job_work, `doctx job work`): threads
 * that claim the due jobs of one queue, run the handler registered for
 * each job's type under a renewed lease, and record the outcome with a
 * move fenced by the claim's epoch.  (The worker, src/txn/frame/worker.c,
 * is another thing: it drives the registered patterns' items.)
 *
 * A thread claims up to a batch of jobs in one round, through the kit's
 * claim-many (fault point job.claim, reached by each claim): one find of
 * {state: ready, queue} sorted by {rank, run_at} (highest priority, then
 * oldest run_at) with a limit, then one bulk write of by-_id claims, each
 * fenced by the epoch the find saw and setting the owner, the lease and
 * epoch + 1; the jobs another worker claimed first are dropped.  The
 * batch grows from 1 while the thread's jobs are short (pace_after), so a
 * thread never holds jobs it would not start soon.  It runs them one
 * after another in claim order, and writes their outcomes together, one
 * round of the kit's fenced moves (job.complete / job.fail, each its own
 * step) after the last handler -- or sooner, once an outcome has waited
 * HOLD_MS.  A worker that dies between a handler and that round leaves
 * the job running; recovery takes it over as a failed attempt, as it
 * does one whose worker died inside the handler (at least once; effects
 * apply at most once, effect.c).  A heartbeat thread, one per worker
 * thread for its whole life, renews the lease of every job of the batch
 * in hand -- the running one and the ones waiting their turn -- every
 * third of it; when a renewal finds a job gone (taken over after a
 * pause) the attempt is lost: a waiting job is skipped, a running one's
 * handler sees dtx_job_alive() == 0, and no outcome is written (it would
 * fail its fence anyway, J1).  When a renewal finds a cancel requested
 * (cancel.c, J17), a waiting job is not run and a running one's handler
 * sees dtx_job_alive() == 0 (--exec: its group gets SIGTERM, then
 * SIGKILL), and the attempt ends canceled (job.cancel.end) in the
 * batch's round; an outcome refused because a cancel came after the last
 * renewal ends canceled too (dtx__job_end_canceled).  Every
 * DTX__RECOVER_EVERY_MS one thread runs the job recovery pass
 * (recover.c): due delayed jobs become ready, stalled jobs are taken
 * over. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

#define DEFAULT_TIMEOUT_MS 300000
#define PROMOTE_BATCH 100

typedef struct shared {
  dtx_store_t *st;
  const dtx_job_work_opts_t *o;
  json_t *due, *sort;
  dtx__tally_t ran;
  dtx__tally_t ticks;        /* the queue's schedules ticked (sched.c) */
  atomic_llong sched_last;   /* mono ms of the last round of ticks */
  atomic_int relaying;       /* a thread is the idle relay (relay_idle) */
  atomic_int live;           /* --once: threads not yet stopped */
  dtx__pacer_t pacer; /* the job recovery pass: recover_pass below */
  int64_t timeout_ms;
  int batch; /* the most jobs a thread claims at once */
  atomic_int fatal;
} shared_t;

static int stopping(shared_t *sh) {
  return (sh->o->stop && *sh->o->stop) || atomic_load(&sh->fatal);
}

/* ---- the run's API -------------------------------------------------------- */

void dtx_job_result(dtx_job_run_t *run, const json_t *result) {
  json_decref(run->result);
  run->result = result ? json_deep_copy(result) : NULL;
}

void dtx_job_fail(dtx_job_run_t *run, const char *message) {
  free(run->error);
  run->error = message ? strdup(message) : NULL;
}

int dtx_job_alive(const dtx_job_run_t *run) {
  return !atomic_load(&((dtx_job_run_t *)run)->lost) &&
         !atomic_load(&((dtx_job_run_t *)run)->canceled) &&
         dtx__mono_ms() < run->deadline;
}

dtx_store_t *dtx_job_store(const dtx_job_run_t *run) { return run->ex->st; }

/* ---- heartbeat ------------------------------------------------------------ */

/* A job of the batch in hand: claimed, then run in its turn. */
typedef struct held {
  const json_t *job;   /* as claimed (its _id, state, epoch) */
  dtx_job_run_t *run;  /* while its handler runs, else NULL */
  int over;            /* ended or skipped: no more renewals */
  int lost;            /* a renewal found it taken over */
  int gone;            /* no longer running at its claim's epoch (ended,
                          fenced, lost): its running slot may go back */
  int canceled;        /* a renewal found a cancel requested (J17) */
  /* Not under the heartbeat's mu (the worker thread's own): */
  int ended;           /* its handler ran; its outcome is in m, unwritten */
  dtx__move_t m;       /* that outcome (dtx__job_outcome) */
  json_t *result;      /* a success's result (a reference), in case the
                          store refuses it (write_outcomes), or NULL */
} held_t;

/* One worker thread's heartbeat: a thread of its own for the worker
 * thread's whole life (not one per job: creating and joining a thread per
 * job was a fifth of the worker's CPU), renewing the lease of every job
 * of the batch in hand -- the one running and the ones waiting their turn
 * -- every third of the lease.  Fields below `mu` are under it. */
typedef struct beat {
  dtx__exec_t ex; /* the worker thread's executor: renew checks the owner */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;       /* the worker thread ends */
  int busy;       /* renewing outside mu: held must stay */
  held_t *held;   /* the batch in hand, or NULL */
  size_t nheld;
  int started;
  pthread_t tid;
} beat_t;

/* Renews the batch's jobs once.  Called with b->mu held, returns with it
 * held; held stays put meanwhile (busy). */
static void renew_batch(beat_t *b) {
  held_t *h = b->held;
  size_t n = b->nheld;
  int64_t every = b->ex.lease_ms / 3 > 0 ? b->ex.lease_ms / 3 : 1;
  b->busy = 1;
  for (size_t i = 0; i < n; i++) {
    if (h[i].over || h[i].lost)
      continue;
    pthread_mutex_unlock(&b->mu);
    json_t *out = NULL;
    int rc = dtx__job_renew(&b->ex, h[i].job, every, &out);
    int canceled = rc == 0 && dtx__job_cancel_requested(out);
    json_decref(out);
    pthread_mutex_lock(&b->mu);
    /* A cancel requested (J17): a waiting job is not run, a running
     * one's handler sees dtx_job_alive() == 0; either ends canceled. */
    if (canceled && !h[i].over) {
      h[i].canceled = 1;
      if (h[i].run)
        atomic_store(&h[i].run->canceled, 1);
    }
    /* Taken over (J1): a waiting job is skipped in its turn, a running
     * one sees dtx_job_alive() == 0.  Other errors: the store is slow;
     * the next beat tries again, and a lapse is what recovery is for. */
    if (rc == DTX_ENOMATCH && !h[i].over) {
      h[i].lost = 1;
      if (h[i].run)
        atomic_store(&h[i].run->lost, 1);
    }
  }
  b->busy = 0;
  pthread_cond_broadcast(&b->cv);
}

static void *heartbeat(void *arg) {
  beat_t *b = arg;
  int64_t every = b->ex.lease_ms / 3 > 0 ? b->ex.lease_ms / 3 : 1;
  pthread_mutex_lock(&b->mu);
  while (!b->done) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (every % 1000) * 1000000;
    ts.tv_sec += every / 1000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    while (!b->done &&
           pthread_cond_timedwait(&b->cv, &b->mu, &ts) != ETIMEDOUT)
      ;
    if (!b->done && b->nheld)
      renew_batch(b);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* The batch h[0..n) is in hand: the heartbeat (started on first use)
 * renews it from now on.  Returns 0 when no heartbeat could start (the
 * jobs then run on their claim's lease alone, as a stalled worker's). */
static int batch_begin(beat_t *b, held_t *h, size_t n) {
  pthread_mutex_lock(&b->mu);
  if (!b->started)
    b->started = pthread_create(&b->tid, NULL, heartbeat, b) == 0 ? 1 : -1;
  b->held = h;
  b->nheld = n;
  pthread_mutex_unlock(&b->mu);
  return b->started > 0;
}

/* The batch is done: once a renewal in progress has finished, the
 * heartbeat forgets it. */
static void batch_end(beat_t *b) {
  pthread_mutex_lock(&b->mu);
  while (b->busy)
    pthread_cond_wait(&b->cv, &b->mu);
  b->held = NULL;
  b->nheld = 0;
  pthread_mutex_unlock(&b->mu);
}

static void beat_init(beat_t *b, const dtx__exec_t *ex) {
  memset(b, 0, sizeof *b);
  b->ex = *ex;
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->cv, NULL);
}

static void beat_destroy(beat_t *b) {
  pthread_mutex_lock(&b->mu);
  b->done = 1;
  pthread_cond_broadcast(&b->cv);
  pthread_mutex_unlock(&b->mu);
  if (b->started > 0)
    pthread_join(b->tid, NULL);
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
}

/* h needs no more renewals: it ended, was skipped or was fenced. */
static void held_over(beat_t *b, held_t *h) {
  pthread_mutex_lock(&b->mu);
  h->over = 1;
  pthread_mutex_unlock(&b->mu);
}

/* ---- one job ---------------------------------------------------------------- */

static const dtx_job_handler_t *handler_for(const dtx_job_work_opts_t *o,
                                            const json_t *job) {
  for (size_t i = 0; i < o->nhandlers; i++)
    if (!o->handlers[i].type || dtx__str_is(job, "type", o->handlers[i].type))
      return &o->handlers[i];
  return NULL;
}

/* The canceled end of h's attempt into h->m (J17): 0, or the error
 * tallied and h over (left running, its lease lapses, recovery ends it
 * canceled). */
static int cancel_outcome(shared_t *sh, beat_t *b, held_t *h) {
  int rc = dtx__job_cancel_move(h->job, "job.cancel.end", 0, &h->m);
  if (rc) {
    dtx__tally_error(&sh->ran, json_object_get(h->job, "_id"), rc);
    held_over(b, h);
  }
  return rc;
}

/* Runs the handler of the claimed job h->job, in its turn in the batch,
 * and leaves its outcome in h->m for write_outcomes: the outcomes of a
 * batch go out together, one bulk round instead of a write per job.
 * The job stays under the heartbeat's renewals until it is written. */
static void run_job(shared_t *sh, dtx__exec_t *ex, beat_t *b, held_t *h) {
  const json_t *job = h->job;
  /* J1: claimed by this executor (the kit's claim), still unwritten. */
  DTX_ASSERT(dtx__state_is(job, DTX_JOB_RUNNING) &&
                 dtx__str_is(job, "owner", ex->owner) && !h->ended,
             "J1");
  dtx_job_run_t run = {.ex = ex, .epoch = dtx__int(job, "epoch")};
  snprintf(run.id, sizeof run.id, "%s", dtx__str(job, "_id"));
  atomic_init(&run.lost, 0);
  atomic_init(&run.canceled, 0);
  pthread_mutex_lock(&b->mu);
  int lost = h->lost, canceled = h->canceled;
  h->run = lost || canceled ? NULL : &run;
  pthread_mutex_unlock(&b->mu);
  if (lost) { /* taken over while it waited its turn: not ours to run */
    dtx__tally_ran(&sh->ran, "fenced", 1);
    h->gone = 1;
    held_over(b, h);
    return;
  }
  if (canceled) { /* canceled while it waited its turn: never run (J17) */
    if (cancel_outcome(sh, b, h) == 0)
      h->ended = 1;
    return;
  }
  /* Saturated: a timeout too large for int64 is "no timeout in practice"
   * (docs/deadlines.md, "Huge durations"), never one that wrapped into
   * the past and killed the handler at its start. */
  run.deadline = dtx__add_sat(dtx__mono_ms(), sh->timeout_ms);
  const dtx_job_handler_t *h_fn = handler_for(sh->o, job);
  int hrc;
  if (!h_fn) {
    hrc = -1;
    dtx_job_fail(&run, "no handler for this job type");
  } else {
    /* A parent's handler sees its children's results (flow.c). */
    json_t *view = NULL;
    if (dtx__job_flow_view(ex, job, &view)) {
      hrc = -1;
      dtx_job_fail(&run, "could not read the job's children");
      dtx__err_clear();
    } else
      hrc = h_fn->fn(&run, view ? view : job, h_fn->arg);
    json_decref(view);
  }
  int timed_out = dtx__mono_ms() >= run.deadline;
  pthread_mutex_lock(&b->mu);
  h->run = NULL;
  pthread_mutex_unlock(&b->mu);
  if (atomic_load(&run.lost)) {
    dtx__tally_ran(&sh->ran, "fenced", 1);
    h->gone = 1;
    held_over(b, h);
  } else if (atomic_load(&run.canceled)) {
    /* J17: the attempt ends canceled, whatever the handler returned. */
    if (cancel_outcome(sh, b, h) == 0)
      h->ended = 1;
  } else {
    char msg[96];
    const char *err = run.error ? run.error : "handler failed";
    if (hrc == 0 && timed_out) {
      hrc = -1;
      snprintf(msg, sizeof msg, "timed out after %lld ms",
               (long long)sh->timeout_ms);
      err = msg;
    }
    if (hrc == 0)
      h->result = json_incref(run.result);
    int rc = dtx__job_outcome(job, hrc == 0, hrc == 0 ? run.result : NULL,
                              err, hrc == 0 ? "job.complete" : "job.fail",
                              0, &h->m);
    if (hrc == 0)
      run.result = NULL; /* stolen by the outcome */
    if (rc == 0) {
      h->ended = 1;
    } else { /* left running: its lease lapses and recovery takes it over */
      dtx__tally_error(&sh->ran, json_object_get(job, "_id"), rc);
      json_decref(h->result);
      h->result = NULL;
      held_over(b, h);
    }
  }
  json_decref(run.result);
  free(run.error);
}

/* Writes the outcomes the batch's handlers left (h[i].ended), all in one
 * round of the kit's fenced moves (each behind its own fault point,
 * job.complete or job.fail, each with its own result: a fenced one is
 * "fenced", an error leaves that job running for recovery alone). */
static void write_outcomes(shared_t *sh, dtx__exec_t *ex, beat_t *b,
                           held_t *h, size_t n) {
  const json_t *docs[DTX__CLAIM_MANY_MAX];
  dtx__move_t m[DTX__CLAIM_MANY_MAX];
  json_t *outs[DTX__CLAIM_MANY_MAX];
  int rcs[DTX__CLAIM_MANY_MAX];
  size_t at[DTX__CLAIM_MANY_MAX], k = 0;
  for (size_t i = 0; i < n && k < DTX__CLAIM_MANY_MAX; i++)
    if (h[i].ended) {
      at[k] = i;
      docs[k] = h[i].job;
      m[k++] = h[i].m;
      h[i].ended = 0;
      h[i].m = (dtx__move_t){0}; /* its cond, set and unset go to the kit */
    }
  if (k == 0)
    return;
  DTX_ASSERT(k <= n, "J1"); /* each claimed job's one outcome */
  char *details[DTX__CLAIM_MANY_MAX] = {0};
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  (void)dtx__kit_move_many(ex, &dtx__job_kind, docs, m, k, outs, rcs,
                           details);
  /* A handler that succeeded never runs again for its result's sake: a
   * completion the store refused for a reason of its own (not a fence,
   * not a store outage) is written once more with the result in its
   * marked text form (dtx__job_storable_result), which it can store. */
  for (size_t j = 0; j < k; j++) {
    held_t *hj = &h[at[j]];
    if (rcs[j] == DTX_ENOMATCH) {
      /* J17: refused because a cancel was recorded since the heartbeat
       * looked: the attempt ends canceled (else it was taken over). */
      json_t *o = NULL;
      int crc = dtx__job_end_canceled(ex, docs[j], &o);
      if (crc != DTX_ENOMATCH) {
        rcs[j] = crc;
        json_decref(outs[j]);
        outs[j] = o;
      }
      continue;
    }
    if (rcs[j] == 0 || dtx__transient(rcs[j]) || !hj->result)
      continue;
    json_decref(outs[j]);
    outs[j] = NULL;
    rcs[j] = dtx__job_complete_refused(ex, docs[j], json_incref(hj->result),
                                       details[j], &outs[j]);
  }
  /* The batch's events (claimed, then its outcome) are in the jobs'
   * outboxes, written by the moves themselves; relaying them to the log
   * is not this path's (events.c: readers, and the recovery pass, which
   * dtx__pacer_recover runs here at most once a second). */
  dtx__call_end(&c, 0);
  for (size_t j = 0; j < k; j++) {
    free(details[j]);
    json_decref(h[at[j]].result);
    h[at[j]].result = NULL;
    if (rcs[j] == 0)
      dtx__job_settle_after(ex, outs[j]); /* a flow's parent (J15) */
    if (rcs[j] == 0)
      dtx__tally_ran(&sh->ran,
                     dtx__state_is(outs[j], DTX_JOB_SUCCEEDED) ? "succeeded"
                     : dtx__state_is(outs[j], DTX_JOB_DEAD)    ? "dead"
                     : dtx__state_is(outs[j], DTX_JOB_CANCELED) ? "canceled"
                                                                : "retried",
                     1);
    else if (rcs[j] == DTX_ENOMATCH)
      dtx__tally_ran(&sh->ran, "fenced", 1);
    else /* left running: its lease lapses and recovery takes it over */
      dtx__tally_error(&sh->ran, json_object_get(docs[j], "_id"), rcs[j]);
    json_decref(outs[j]);
    h[at[j]].gone = rcs[j] == 0 || rcs[j] == DTX_ENOMATCH;
    held_over(b, &h[at[j]]);
  }
}

/* One job recovery pass (dtx__pacer_recover runs it, one thread at a
 * time); returns how much it did. */
static int64_t recover_pass(void *arg, dtx__exec_t *ex) {
  shared_t *sh = arg;
  int64_t did = 0;
  dtx__tally_t t = {0};
  if (dtx__tally_init(&t) == 0) {
    dtx_recover_opts_t ro = {.older_than_ms = -1};
    dtx__call_t c;
    dtx__call_begin(&c, ex->deadline_ms);
    /* Its relay bounded (this pass also runs while the worker is busy),
     * and none while this process's idle relay runs: two relays of the
     * same oldest outboxes would only meet each other's inserts. */
    int zero = 0, mine = atomic_compare_exchange_strong(&sh->relaying, &zero, 1);
    int rc = dtx__call_end(&c, dtx__job_recover_ex(ex, &ro, mine ? 1 : 2, &t));
    if (mine)
      atomic_store(&sh->relaying, 0);
    if (rc)
      dtx__tally_error(&sh->ran, NULL, rc);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(t.obj, "ran"), k, v)
        did += json_integer_value(v);
    dtx__tally_free(&t);
  }
  return did;
}

/* ---- the steps the remote worker protocol shares (jobq.h, remote.c) ---- */

int dtx__job_claim_query(const char *queue, const json_t *types, json_t **due,
                         json_t **sort) {
  *due = json_pack("{s:s,s:s}", "state", DTX_JOB_READY, "queue", queue);
  *sort = json_pack("{s:i,s:i}", "rank", 1, "run_at", 1);
  if (*due && types &&
      json_object_set_new(*due, "type", json_pack("{s:O}", "$in", types)) < 0) {
    json_decref(*due);
    *due = NULL;
  }
  if (!*due || !*sort) {
    json_decref(*due);
    json_decref(*sort);
    *due = *sort = NULL;
    return DTX_ENOMEM;
  }
  return 0;
}

int dtx__job_claim_ex(dtx__exec_t *ex, const char *queue, const json_t *due,
                      const json_t *sort, size_t max, json_t **jobs,
                      dtx__jq_held_t *held) {
  int64_t moved = 0;
  int paused = 0, limited = 0;
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  if (held)
    held->n = 0;
  /* The round's gate (queues.c): a paused queue claims nothing (J10); a
   * limited one claims under running slots (limits.c, J12). */
  int rc = dtx__jq_gate(ex, queue, &paused, &limited);
  if (rc == 0 && paused)
    rc = dtx__err(DTX_ENOMATCH, "queue '%s' is paused", queue);
  if (rc == 0 && limited) {
    rc = dtx__jq_claim_limited(ex, queue, due, sort, max, jobs, held,
                               &limited);
    if (limited)
      return dtx__call_end(&c, rc);
  }
  if (rc)
    return dtx__call_end(&c, rc);
  dtx__claim_t cl = {.point = "job.claim", .due = due, .sort = sort,
                     .to = DTX_JOB_RUNNING};
  rc = dtx__kit_claim_many(ex, &dtx__job_kind, &cl, max, jobs);
  if (rc == DTX_ENOMATCH) {
    /* Nothing ready: make due delayed jobs ready, then look once more. */
    int prc = dtx__job_promote(ex, queue, PROMOTE_BATCH, &moved);
    if (prc)
      rc = prc;
    else if (moved)
      rc = dtx__kit_claim_many(ex, &dtx__job_kind, &cl, max, jobs);
  }
  return dtx__call_end(&c, rc);
}

int dtx__job_claim(dtx__exec_t *ex, const char *queue, const json_t *due,
                   const json_t *sort, size_t max, json_t **jobs) {
  return dtx__job_claim_ex(ex, queue, due, sort, max, jobs, NULL);
}

int dtx__job_renew(dtx__exec_t *ex, const json_t *job, int64_t budget_ms,
                   json_t **out) {
  dtx__call_t c;
  dtx__call_begin(&c, budget_ms);
  return dtx__call_end(&c, dtx__kit_renew(ex, &dtx__job_kind, job, out));
}

/* Every worker is a ticker of its queue's schedules (docs/jobs.md,
 * "Schedules"): one round per process at most every SCHED_POLL_MS, by
 * whichever thread comes first, through the index {state, queue,
 * next_at}. */
#define SCHED_POLL_MS 100
static void maybe_tick(shared_t *sh, dtx__exec_t *ex) {
  long long now = dtx__mono_ms(), last = atomic_load(&sh->sched_last);
  if ((last && now - last < SCHED_POLL_MS) ||
      !atomic_compare_exchange_strong(&sh->sched_last, &last, now))
    return;
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  /* Its errors are in the tally; the claim goes on regardless. */
  (void)dtx__call_end(&c, dtx__job_sched_tick(ex, sh->o->queue, &sh->ticks));
}

/* An idle worker is the events' background relay of its queue: up to
 * DTX__JOB_RELAY_IDLE jobs' outboxes per idle round (docs/jobs.md
 * "Events", the log's lag). */
#define IDLE_RELAY_PAUSE_MS 4 /* from the third idle round on: a thread
                                 idle between its neighbours' batches
                                 leaves their writes the store */
static int64_t relay_idle(shared_t *sh, dtx__exec_t *ex) {
  /* One thread of the process at a time: relays of the same outboxes
   * racing only meet each other's inserts (events.c). */
  int zero = 0;
  if (!atomic_compare_exchange_strong(&sh->relaying, &zero, 1))
    return 0;
  dtx__call_t c;
  int64_t n = 0;
  dtx__call_begin(&c, ex->deadline_ms);
  int rc = dtx__job_events_relay(ex, sh->o->queue, DTX__JOB_RELAY_IDLE, 0, &n);
  if (rc)
    dtx__err_clear();
  (void)dtx__call_end(&c, 0);
  atomic_store(&sh->relaying, 0);
  return rc ? 0 : n;
}

/* Claims up to max due jobs of the queue (dtx__job_claim_ex); slots:
 * the running slots they took on a limited queue. */
static int claim(shared_t *sh, dtx__exec_t *ex, size_t max, json_t **jobs,
                 dtx__jq_held_t *slots) {
  return dtx__job_claim_ex(ex, sh->o->queue, sh->due, sh->sort, max, jobs,
                           slots);
}

/* Frees the running slots of the batch's jobs that are no longer running
 * at their claim's epoch (limits.c); a job left running keeps its slot
 * until recovery takes it over (J12). */
static void release_slots(shared_t *sh, dtx__exec_t *ex, const held_t *h,
                          size_t n, const dtx__jq_held_t *slots) {
  int idx[DTX__CLAIM_MANY_MAX];
  int64_t g[DTX__CLAIM_MANY_MAX];
  size_t k = 0;
  for (size_t s = 0; s < slots->n; s++)
    for (size_t i = 0; i < n; i++)
      if (h[i].gone && dtx__str_is(h[i].job, "_id", slots->id[s])) {
        idx[k] = slots->idx[s];
        g[k++] = slots->g[s];
        break;
      }
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  int rc = dtx__call_end(&c, dtx__jq_release(ex, sh->o->queue, idx, g, k));
  if (rc) /* the slot comes back when a claim finds its job ended */
    dtx__tally_error(&sh->ran, NULL, rc);
}

/* How many jobs a thread claims in its next round.  A batch saves the
 * store a round trip per job for the claim, but its jobs wait their turn
 * behind one another, while another thread (or process) might have run
 * them: so a thread claims only what it will start within HOLD_MS (a
 * quarter of the lease when that is shorter), by its recent time per job,
 * and grows its batch from 1 by doubling (no hoard before the first
 * measurement).  Short jobs end up at the option's batch; jobs of
 * HOLD_MS and more are claimed one at a time. */
#define HOLD_MS 100.0

typedef struct pace {
  size_t k, max;
  double hold_ms;
  double per_job_ms; /* moving average; 0 before the first batch */
} pace_t;

static void pace_init(pace_t *p, size_t max, int64_t lease_ms) {
  p->k = 1;
  p->max = max;
  p->hold_ms = (double)lease_ms / 4 < HOLD_MS ? (double)lease_ms / 4
                                               : HOLD_MS;
  p->per_job_ms = 0;
}

static void pace_after(pace_t *p, size_t n, double ms) {
  if (n == 0)
    return;
  double per = ms / (double)n;
  p->per_job_ms = p->per_job_ms > 0 ? 0.7 * p->per_job_ms + 0.3 * per : per;
  double fit = p->hold_ms / (p->per_job_ms > 0.01 ? p->per_job_ms : 0.01);
  size_t k = p->k * 2;
  if ((double)k > fit)
    k = fit < 1 ? 1 : (size_t)fit;
  p->k = k < 1 ? 1 : k > p->max ? p->max : k;
  DTX_ASSERT(p->k >= 1 && p->k <= DTX__CLAIM_MANY_MAX, "job.batch");
}

static void *work(void *arg) {
  dtx__thread_t *w = arg;
  shared_t *sh = w->shared;
  dtx__exec_t ex;
  dtx__exec_init_thread(&ex, w, sh->st, sh->o->owner, sh->o->lease_ms,
                        sh->o->deadline_ms);
  beat_t beat;
  beat_init(&beat, &ex);
  dtx__idle_t idle = {0};
  pace_t pace;
  pace_init(&pace, (size_t)sh->batch, ex.lease_ms);
  dtx__jq_held_t *slots = calloc(1, sizeof *slots);
  if (!slots) {
    int zero = 0;
    atomic_compare_exchange_strong(&sh->fatal, &zero, DTX_ENOMEM);
  }
  while (slots && !stopping(sh)) {
    json_t *jobs = NULL;
    maybe_tick(sh, &ex);
    int rc = claim(sh, &ex, pace.k, &jobs, slots);
    /* From the claim on: how long its jobs wait behind one another (the
     * claim's own time, long under contention, must not shrink the batch:
     * that only makes more claims contend). */
    int64_t t0 = dtx__mono_ms();
    if (rc == 0) {
      size_t n = json_array_size(jobs);
      DTX_ASSERT(n >= 1 && n <= pace.k, "job.batch"); /* the kit's claim */
      held_t *h = calloc(n, sizeof *h);
      if (!h) {
        /* Their leases lapse; recovery takes them over. */
        dtx__tally_error(&sh->ran, NULL, DTX_ENOMEM);
        json_decref(jobs);
        dtx__idle_failed();
        continue;
      }
      for (size_t i = 0; i < n; i++)
        h[i].job = json_array_get(jobs, i);
      batch_begin(&beat, h, n);
      /* Every job claimed is run, also after a stop: each is under this
       * executor's lease until it ends. */
      int64_t first = 0; /* when the oldest unwritten outcome ended */
      for (size_t i = 0; i < n; i++) {
        /* An outcome waits for the batch's round at most HOLD_MS, so a
         * slow job does not hold back the ones that ended before it. */
        if (first && dtx__mono_ms() - first >= (int64_t)pace.hold_ms) {
          write_outcomes(sh, &ex, &beat, h, i);
          first = 0;
        }
        run_job(sh, &ex, &beat, &h[i]);
        if (h[i].ended && !first)
          first = dtx__mono_ms();
      }
      write_outcomes(sh, &ex, &beat, h, n);
      batch_end(&beat);
      if (slots->n)
        release_slots(sh, &ex, h, n, slots);
      free(h);
      json_decref(jobs);
      pace_after(&pace, n, (double)(dtx__mono_ms() - t0));
      dtx__idle_busy(&idle);
      dtx__pacer_recover(&sh->pacer, &ex, 0);
      continue;
    }
    if (rc != DTX_ENOMATCH) {
      dtx__tally_error(&sh->ran, NULL, rc);
      if (sh->o->once) {
        int zero = 0;
        atomic_compare_exchange_strong(&sh->fatal, &zero, rc);
        break;
      }
      dtx__idle_failed();
      continue;
    }
    /* Nothing due: the queue's events still in outboxes go to the log
     * (events.c; errors stay there for the next relay), then the kit's
     * pace (a recovery pass for stalled jobs). */
    if (!sh->o->once && idle.pause_ms >= IDLE_RELAY_PAUSE_MS)
      relay_idle(sh, &ex);
    if (dtx__idle_round(&idle, &sh->pacer, &ex, sh->o->once))
      break;
  }
  /* --once: the last thread to stop leaves its queue's log complete --
   * the others' batches are written by then, so no relay runs beside
   * them (the drain's own writes). */
  if (sh->o->once && atomic_fetch_sub(&sh->live, 1) == 1)
    for (int guard = 0; guard < 1000 && relay_idle(sh, &ex) > 0; guard++)
      ;
  beat_destroy(&beat);
  free(slots);
  return NULL;
}

int dtx_job_work_opts_check(const dtx_job_work_opts_t *opts) {
  int rc;
  if (!opts || !opts->handlers || opts->nhandlers == 0)
    return dtx__err(DTX_EINVAL, "no job handlers given");
  if ((rc = dtx__check_ident("queue name", opts->queue)) ||
      (rc = dtx__check_owner(opts->owner)))
    return rc;
  for (size_t i = 0; i < opts->nhandlers; i++)
    if (!opts->handlers[i].fn ||
        (opts->handlers[i].type &&
         (rc = dtx__check_ident("job type", opts->handlers[i].type))))
      return rc ? rc : dtx__err(DTX_EINVAL, "handler %zu has no function", i);
  if (opts->threads > 256)
    return dtx__err(DTX_EINVAL, "at most 256 threads");
  if (opts->lease_ms < 0 || opts->timeout_ms < 0)
    return dtx__err(DTX_EINVAL, "lease and timeout must be >= 0 ms");
  if (opts->batch < 0 || opts->batch > DTX__CLAIM_MANY_MAX)
    return dtx__err(DTX_EINVAL, "batch must be from 1 to %d jobs, got %d",
                    DTX__CLAIM_MANY_MAX, opts->batch);
  return 0;
}

int dtx_job_work(dtx_store_t *st, const dtx_job_work_opts_t *opts,
                 json_t **summary) {
  dtx__call_t c;
  int rc = 0;
  if (summary)
    *summary = NULL;
  dtx__call_begin(&c, 0);
  if ((rc = dtx_job_work_opts_check(opts)))
    return dtx__call_end(&c, rc);
  int n = opts->threads > 0 ? opts->threads : 1;
  if ((rc = dtx__job_setup(st)))
    return dtx__call_end(&c, rc);
  shared_t sh = {.st = st, .o = opts};
  sh.timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
  sh.batch = opts->batch > 0 ? opts->batch : DTX_JOB_BATCH;
  DTX_ASSERT(sh.batch >= 1 && sh.batch <= DTX__CLAIM_MANY_MAX, "job.batch");
  /* Only the types this worker can run, unless one handler takes all. */
  json_t *types = json_array();
  int all = 0;
  for (size_t i = 0; i < opts->nhandlers; i++) {
    if (!opts->handlers[i].type)
      all = 1;
    else
      json_array_append_new(types, json_string(opts->handlers[i].type));
  }
  rc = types ? dtx__job_claim_query(opts->queue, all ? NULL : types, &sh.due,
                                    &sh.sort)
             : DTX_ENOMEM;
  json_decref(types);
  if (rc == 0 && (dtx__tally_init(&sh.ran) || dtx__tally_init(&sh.ticks)))
    rc = DTX_ENOMEM;
  if (rc == 0) {
    dtx__pacer_init(&sh.pacer, recover_pass, &sh);
    atomic_store(&sh.live, n);
    rc = dtx__run_threads(n, work, &sh, &sh.fatal);
    dtx__pacer_destroy(&sh.pacer);
    if (rc == 0 && opts->once)
      rc = atomic_load(&sh.fatal);
    /* The ticks' errors are the worker's (a --once run returns the first);
     * their counts are reported apart, as "ticks". */
    json_t *ticked = json_deep_copy(json_object_get(sh.ticks.obj, "ran"));
    json_object_clear(json_object_get(sh.ticks.obj, "ran"));
    dtx__tally_merge(&sh.ran, &sh.ticks);
    if (summary) {
      json_t *ran = json_pack("{s:i,s:i,s:i,s:i}", "succeeded", 0, "retried",
                              0, "dead", 0, "fenced", 0);
      json_object_update(ran, json_object_get(sh.ran.obj, "ran"));
      *summary = json_pack("{s:b,s:s,s:o,s:O}", "ok", rc == 0, "queue",
                           opts->queue, "ran", ran, "errors",
                           json_object_get(sh.ran.obj, "errors"));
      if (*summary && json_object_size(ticked))
        json_object_set(*summary, "ticks", ticked);
    }
    json_decref(ticked);
    if (rc == 0 && opts->once)
      rc = sh.ran.first_err;
  }
  dtx__tally_free(&sh.ran);
  dtx__tally_free(&sh.ticks);
  json_decref(sh.due);
  json_decref(sh.sort);
  if (!opts->once && rc != DTX_ENOMEM)
    rc = 0;
  return dtx__call_end(&c, rc);
}
