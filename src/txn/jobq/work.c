/* work.c -- the job worker: threads that claim the due jobs of one queue,
 * run the handler registered for each job's type under a renewed lease,
 * and record the outcome with a move fenced by the claim's epoch.
 *
 * A claim is ONE find_one_and_update of {state: ready, queue} sorted by
 * {rank, run_at} (highest priority, then oldest run_at), through the
 * kit's claim-next (fault point job.claim), which sets the owner, the
 * lease and epoch + 1.  While the handler runs, a heartbeat thread renews
 * the lease every third of it; when a renewal finds the job gone (taken
 * over after a pause, canceled by nobody -- a running job cannot be) it
 * marks the attempt lost, the handler sees dtx_job_alive() == 0, and the
 * outcome is not written (it would fail its fence anyway, J1).  Every
 * DTX__RECOVER_EVERY_MS one thread runs the job recovery pass (recover.c):
 * due delayed jobs become ready, stalled jobs are taken over. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/err.h"

#define DEFAULT_TIMEOUT_MS 300000
#define PROMOTE_BATCH 100

typedef struct shared {
  dtx_store_t *st;
  const dtx_job_work_opts_t *o;
  json_t *due, *sort;
  dtx__tally_t ran;
  dtx__pacer_t pacer; /* the job recovery pass: recover_pass below */
  int64_t timeout_ms;
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
         dtx__mono_ms() < run->deadline;
}

dtx_store_t *dtx_job_store(const dtx_job_run_t *run) { return run->ex->st; }

/* ---- heartbeat ------------------------------------------------------------ */

typedef struct beat {
  dtx_job_run_t *run;
  const json_t *job; /* the claimed job (its _id, state, epoch) */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
} beat_t;

static void *heartbeat(void *arg) {
  beat_t *b = arg;
  dtx__exec_t ex = *b->run->ex; /* the same owner: renew checks it */
  int64_t every = ex.lease_ms / 3 > 0 ? ex.lease_ms / 3 : 1;
  pthread_mutex_lock(&b->mu);
  while (!b->done) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (every % 1000) * 1000000;
    ts.tv_sec += every / 1000 + ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    pthread_cond_timedwait(&b->cv, &b->mu, &ts);
    if (b->done)
      break;
    pthread_mutex_unlock(&b->mu);
    json_t *out = NULL;
    dtx__call_t c;
    dtx__call_begin(&c, ex.lease_ms / 3 > 0 ? ex.lease_ms / 3 : 1);
    int rc = dtx__call_end(&c, dtx__kit_renew(&ex, &dtx__job_kind, b->job,
                                              &out));
    json_decref(out);
    if (rc == DTX_ENOMATCH)
      atomic_store(&b->run->lost, 1); /* taken over: stop acting (J1) */
    /* other errors: the store is slow; the next beat tries again, and a
     * lapse is what recovery is for */
    pthread_mutex_lock(&b->mu);
  }
  pthread_mutex_unlock(&b->mu);
  return NULL;
}

/* ---- one job ---------------------------------------------------------------- */

static const dtx_job_handler_t *handler_for(const dtx_job_work_opts_t *o,
                                            const json_t *job) {
  for (size_t i = 0; i < o->nhandlers; i++)
    if (!o->handlers[i].type || dtx__str_is(job, "type", o->handlers[i].type))
      return &o->handlers[i];
  return NULL;
}

/* Runs the handler of the claimed job and records the outcome. */
static void run_job(shared_t *sh, dtx__exec_t *ex, const json_t *job) {
  dtx_job_run_t run = {.ex = ex, .epoch = dtx__int(job, "epoch")};
  snprintf(run.id, sizeof run.id, "%s", dtx__str(job, "_id"));
  atomic_init(&run.lost, 0);
  run.deadline = dtx__mono_ms() + sh->timeout_ms;
  const dtx_job_handler_t *h = handler_for(sh->o, job);
  beat_t b = {.run = &run, .job = job};
  pthread_mutex_init(&b.mu, NULL);
  pthread_cond_init(&b.cv, NULL);
  pthread_t tid;
  int beating = pthread_create(&tid, NULL, heartbeat, &b) == 0;
  int hrc;
  if (!h) {
    hrc = -1;
    dtx_job_fail(&run, "no handler for this job type");
  } else {
    hrc = h->fn(&run, job, h->arg);
  }
  int timed_out = dtx__mono_ms() >= run.deadline;
  if (beating) {
    pthread_mutex_lock(&b.mu);
    b.done = 1;
    pthread_cond_signal(&b.cv);
    pthread_mutex_unlock(&b.mu);
    pthread_join(tid, NULL);
  }
  pthread_cond_destroy(&b.cv);
  pthread_mutex_destroy(&b.mu);
  if (atomic_load(&run.lost)) {
    dtx__tally_ran(&sh->ran, "fenced", 1);
  } else {
    char msg[96];
    const char *err = run.error ? run.error : "handler failed";
    if (hrc == 0 && timed_out) {
      hrc = -1;
      snprintf(msg, sizeof msg, "timed out after %lld ms",
               (long long)sh->timeout_ms);
      err = msg;
    }
    json_t *out = NULL;
    dtx__call_t c;
    dtx__call_begin(&c, ex->deadline_ms);
    int rc = dtx__call_end(
        &c, dtx__job_finish(ex, job, hrc == 0, hrc == 0 ? run.result : NULL,
                            err, hrc == 0 ? "job.complete" : "job.fail", 0,
                            &out));
    if (hrc == 0)
      run.result = NULL; /* stolen by finish */
    if (rc == 0)
      dtx__tally_ran(&sh->ran,
                     dtx__state_is(out, DTX_JOB_SUCCEEDED) ? "succeeded"
                     : dtx__state_is(out, DTX_JOB_DEAD)    ? "dead"
                                                           : "retried",
                     1);
    else if (rc == DTX_ENOMATCH)
      dtx__tally_ran(&sh->ran, "fenced", 1);
    else /* left running: its lease lapses and recovery takes it over */
      dtx__tally_error(&sh->ran, json_object_get(job, "_id"), rc);
    json_decref(out);
  }
  json_decref(run.result);
  free(run.error);
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
    int rc = dtx__call_end(&c, dtx__job_recover(ex, &ro, &t));
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

static int claim(shared_t *sh, dtx__exec_t *ex, json_t **job) {
  int64_t moved = 0;
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  dtx__claim_t cl = {.point = "job.claim", .due = sh->due, .sort = sh->sort,
                     .to = DTX_JOB_RUNNING};
  int rc = dtx__kit_claim_next(ex, &dtx__job_kind, &cl, job);
  if (rc == DTX_ENOMATCH) {
    /* Nothing ready: make due delayed jobs ready, then look once more. */
    int prc = dtx__job_promote(ex, sh->o->queue, PROMOTE_BATCH, &moved);
    if (prc)
      rc = prc;
    else if (moved)
      rc = dtx__kit_claim_next(ex, &dtx__job_kind, &cl, job);
  }
  return dtx__call_end(&c, rc);
}

static void *work(void *arg) {
  dtx__thread_t *w = arg;
  shared_t *sh = w->shared;
  dtx__exec_t ex;
  dtx__exec_init(&ex, sh->st, sh->o->owner, sh->o->lease_ms,
                 sh->o->deadline_ms);
  dtx__exec_rename(&ex, "%.120s#%d", ex.owner, w->n);
  dtx__idle_t idle = {0};
  while (!stopping(sh)) {
    json_t *job = NULL;
    int rc = claim(sh, &ex, &job);
    if (rc == 0) {
      run_job(sh, &ex, job);
      json_decref(job);
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
      dtx__deadline_sleep_ms(DTX__IDLE_MAX_MS);
      continue;
    }
    /* Nothing due: the kit's pace (a recovery pass for stalled jobs). */
    if (dtx__idle_round(&idle, &sh->pacer, &ex, sh->o->once))
      break;
  }
  return NULL;
}

int dtx_job_work(dtx_store_t *st, const dtx_job_work_opts_t *opts,
                 json_t **summary) {
  dtx__call_t c;
  int rc = 0;
  if (summary)
    *summary = NULL;
  dtx__call_begin(&c, 0);
  if (!opts || !opts->handlers || opts->nhandlers == 0)
    return dtx__call_end(&c, dtx__err(DTX_EINVAL, "no job handlers given"));
  if ((rc = dtx__check_ident("queue name", opts->queue)))
    return dtx__call_end(&c, rc);
  for (size_t i = 0; i < opts->nhandlers; i++)
    if (!opts->handlers[i].fn ||
        (opts->handlers[i].type &&
         (rc = dtx__check_ident("job type", opts->handlers[i].type))))
      return dtx__call_end(&c,
                           rc ? rc : dtx__err(DTX_EINVAL, "handler %zu has "
                                                          "no function", i));
  int n = opts->threads > 0 ? opts->threads : 1;
  if (n > 256)
    return dtx__call_end(&c, dtx__err(DTX_EINVAL, "at most 256 threads"));
  if (opts->lease_ms < 0 || opts->timeout_ms < 0)
    return dtx__call_end(&c, dtx__err(DTX_EINVAL, "lease and timeout must "
                                                  "be >= 0 ms"));
  if ((rc = dtx__job_setup(st)))
    return dtx__call_end(&c, rc);
  shared_t sh = {.st = st, .o = opts};
  sh.timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
  sh.due = json_pack("{s:s,s:s}", "state", DTX_JOB_READY, "queue",
                     opts->queue);
  sh.sort = json_pack("{s:i,s:i}", "rank", 1, "run_at", 1);
  /* Only the types this worker can run, unless one handler takes all. */
  json_t *types = json_array();
  int all = 0;
  for (size_t i = 0; i < opts->nhandlers; i++) {
    if (!opts->handlers[i].type)
      all = 1;
    else
      json_array_append_new(types, json_string(opts->handlers[i].type));
  }
  if (sh.due && !all)
    json_object_set_new(sh.due, "type", json_pack("{s:O}", "$in", types));
  json_decref(types);
  if (!sh.due || !sh.sort || dtx__tally_init(&sh.ran))
    rc = DTX_ENOMEM;
  if (rc == 0) {
    dtx__pacer_init(&sh.pacer, recover_pass, &sh);
    rc = dtx__run_threads(n, work, &sh, &sh.fatal);
    dtx__pacer_destroy(&sh.pacer);
    if (rc == 0 && opts->once)
      rc = atomic_load(&sh.fatal);
    if (summary) {
      json_t *ran = json_pack("{s:i,s:i,s:i,s:i}", "succeeded", 0, "retried",
                              0, "dead", 0, "fenced", 0);
      json_object_update(ran, json_object_get(sh.ran.obj, "ran"));
      *summary = json_pack("{s:b,s:s,s:o,s:O}", "ok", rc == 0, "queue",
                           opts->queue, "ran", ran, "errors",
                           json_object_get(sh.ran.obj, "errors"));
    }
    if (rc == 0 && opts->once)
      rc = sh.ran.first_err;
  }
  dtx__tally_free(&sh.ran);
  json_decref(sh.due);
  json_decref(sh.sort);
  if (!opts->once && rc != DTX_ENOMEM)
    rc = 0;
  return dtx__call_end(&c, rc);
}
