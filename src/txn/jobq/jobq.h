/* jobq.h -- internals shared by the files of the job-queue pattern.
 *
 * job.c holds the state machine (diagram, transitions, invariants), the
 * public calls on one job (add, get, list, stats, cancel, retry) and the
 * method table; runner.c the job runner (claim, heartbeat, handlers,
 * outcome); exec.c the built-in --exec handler; effect.c the effects
 * that apply at most once per (job, key); recover.c and audit.c the
 * pattern's recovery pass and audit, which the kit's frames call through
 * the table.  Retry, fenced moves, claims and leases come from
 * txn/kit/kit.h. */
#ifndef DTX_TXN_JOBQ_H
#define DTX_TXN_JOBQ_H

#include <pthread.h>
#include <stdatomic.h>

#include "txn/kit/kit.h"

/* Job states, as stored in the "state" field. */
#define DTX_JOB_READY "ready"
#define DTX_JOB_DELAYED "delayed"
#define DTX_JOB_RUNNING "running"
#define DTX_JOB_SUCCEEDED "succeeded"
#define DTX_JOB_DEAD "dead"
#define DTX_JOB_CANCELED "canceled"
/* Flows (flow.c): a parent while it has unfinished children; a child
 * recorded but not yet recorded by its parent (not claimable). */
#define DTX_JOB_WAITING "waiting"
#define DTX_JOB_HELD "held"

/* The marker array an effect leaves in its target document. */
#define DTX_JOB_FX "dtx_fx"
/* The job's object of effect pins: key (with '.' written '~') ->
 * {coll, id, voided: [ids]} (effect.c). */
#define DTX_JOB_PINS "fx_pins"
/* How far past a job's fx_until (the last lease end any write of its
 * effects was bounded by) the store's clock must be before recovery
 * removes the markers (recover.c): the clock steps back, or differs
 * between the nodes a document lives on across a failover, by less
 * (docs/jobs.md, "Clocks"). */
#define DTX_JOB_FX_MARGIN_MS 1000

/* The running slots a claim of a limited queue took (limits.c): slot
 * idx[i] at g[i] for job id[i]. */
typedef struct dtx__jq_held {
  size_t n;
  int idx[DTX__CLAIM_MANY_MAX];
  int64_t g[DTX__CLAIM_MANY_MAX];
  char id[DTX__CLAIM_MANY_MAX][160];
} dtx__jq_held_t;

/* The job documents, for the kit's moves and claims. */
extern const dtx__kind_t dtx__job_kind;

/* The method table (registered in src/txn/frame/registry.c). */
extern const dtx__pattern_t dtx__job_pattern;

/* 1 for succeeded, dead and canceled. */
int dtx__job_terminal(const json_t *job);

/* The job's indexes (and collection rules), once per store. */
int dtx__job_setup(dtx_store_t *st);

/* The move that ends a running attempt this executor holds at job's
 * epoch: success (result, stolen, may be NULL) -> succeeded; failure
 * (error: the message) -> delayed with backoff, or dead when attempts
 * are exhausted.  point: the fault point.  *out: the job afterwards.
 * take: 0 for the holder itself; 1 for recovery's takeover of a lapsed
 * lease; 2 for a takeover regardless of the lease (recover
 * --older-than-ms), both bumping the epoch.
 * DTX_ENOMATCH when the attempt was fenced off (taken over). */
int dtx__job_finish(dtx__exec_t *ex, const json_t *job, int ok,
                    json_t *result, const char *error, const char *point,
                    int take, json_t **out);

/* A result the jobs collection can store (stolen; NULL: null): result
 * itself when it nests no deeper than a job allows, else -- or when why
 * is given, the store's reason for refusing it -- the marked text form
 * {"dtx_unstorable": why, "text": its JSON text (at most 16 KiB, cut at a
 * character boundary), "truncated": bool, "bytes": its full length}. */
json_t *dtx__job_storable_result(json_t *result, const char *why);

/* The same move, built and not made: *m (its set and unset new
 * references, which the kit's move steals) for dtx__kit_move_many, so a
 * worker ends the attempts of its batch in one round.  result is stolen
 * in every case.  DTX_ENOMEM leaves nothing in *m to free. */
int dtx__job_outcome(const json_t *job, int ok, json_t *result,
                     const char *error, const char *point, int take,
                     dtx__move_t *m);

/* The delay before attempt n + 1 after n failed ones (n >= 1): backoff_ms
 * doubled n - 1 times, +-20% jitter, capped at DTX_JOB_BACKOFF_CAP_MS. */
int64_t dtx__job_backoff(int64_t backoff_ms, int64_t failed);

/* A per-thread xorshift: backoff jitter and the claim rounds' picks
 * (limits.c, rate.c) need no quality, only no shared state. */
uint64_t dtx__job_random(void);

/* Keeps k of the array cands, picked at random (all of them, shuffled,
 * when k >= its size), so claimers of one queue do not all race for its
 * head (limits.c; rate.c after a lost round). */
void dtx__job_pick(json_t *cands, size_t k);

/* The moves claiming cands[0..k) (k <= DTX__CLAIM_MANY_MAX) ready ->
 * running, each fenced by the epoch its find saw and, when not_after is
 * not 0, refused by the store past it (limits.c's slots): docs[j] and
 * m[j] for dtx__kit_move_many, docs borrowed from cands.  The limited
 * claims (limits.c, rate.c) make them; the plain claim is the kit's. */
void dtx__job_claim_moves(const json_t *cands, size_t k, int64_t not_after,
                          const json_t **docs, dtx__move_t *m);

/* Moves due delayed jobs (of queue, or of every queue when NULL) to
 * ready, at most limit of them; *moved (may be NULL) counts them. */
int dtx__job_promote(dtx__exec_t *ex, const char *queue, int limit,
                     int64_t *moved);

/* The runner's steps, shared with the remote worker protocol (remote.c:
 * dtx_job_claim, dtx_job_heartbeat, dtx_job_complete, dtx_job_fail_at),
 * so a worker over HTTP claims, renews and ends an attempt exactly as an
 * in-process one does (runner.c has the protocol; job.c the table). */

/* The claim's due filter and sort for queue (types: NULL for every type,
 * else an array of type names, borrowed): *due and *sort new references.
 * DTX_ENOMEM leaves both NULL. */
int dtx__job_claim_query(const char *queue, const json_t *types, json_t **due,
                         json_t **sort);

/* Claims up to max (1..DTX__CLAIM_MANY_MAX) due jobs of queue under ex's
 * lease through the kit's claim-many (fault point job.claim, each claim):
 * *jobs the array won, in claim order, each running at its new epoch;
 * when none is ready, makes due delayed jobs of queue ready and looks
 * once more.  DTX_ENOMATCH when nothing is due. */
int dtx__job_claim(dtx__exec_t *ex, const char *queue, const json_t *due,
                   const json_t *sort, size_t max, json_t **jobs);
/* dtx__job_claim that also tells which running slots of a limited queue
 * the jobs took (held may be NULL; held->n 0 for an unlimited queue). */
int dtx__job_claim_ex(dtx__exec_t *ex, const char *queue, const json_t *due,
                      const json_t *sort, size_t max, json_t **jobs,
                      dtx__jq_held_t *held);

/* Extends the lease of job (running at its epoch, held by ex->owner) to
 * now + ex->lease_ms within budget_ms: the heartbeat (no step, no fault
 * point).  DTX_ENOMATCH when the attempt is no longer current. */
int dtx__job_renew(dtx__exec_t *ex, const json_t *job, int64_t budget_ms,
                   json_t **out);

/* A completion the store refused for a reason of its own (not a fence,
 * not an outage: why, its detail) written once more with result (stolen)
 * in its marked text form (dtx__job_storable_result), which the store
 * can keep: a handler that succeeded must never run again for its
 * result's sake.  The fenced move job.complete, as the first. */
int dtx__job_complete_refused(dtx__exec_t *ex, const json_t *job,
                              json_t *result, const char *why, json_t **out);

/* The attempt a handler runs in (doctx.h: dtx_job_run_t). */
struct dtx_job_run {
  dtx__exec_t *ex;     /* the worker thread's executor */
  char id[160];        /* the job's _id */
  int64_t epoch;       /* the claim's */
  json_t *result;      /* dtx_job_result's copy, or NULL */
  char *error;         /* dtx_job_fail's copy, or NULL */
  atomic_int lost;     /* the heartbeat found the lease taken over */
  atomic_int canceled; /* the heartbeat found a cancel requested (J17) */
  int64_t deadline;    /* mono ms: the handler's timeout */
};


/* ---- cancel of a running job (cancel.c; J17 in job.c) ---- */

/* 1 when a cancel of job's attempt was requested (cancel_requested). */
int dtx__job_cancel_requested(const json_t *job);

/* The condition {cancel_requested: {$exists: false}} (new reference, NULL
 * on ENOMEM) every other end of a running attempt carries. */
json_t *dtx__job_no_cancel(void);

/* The move that ends job's running attempt canceled, fenced by its epoch
 * and conditioned on the request: point, and take as dtx__job_finish's
 * (a takeover also takes the lease). */
int dtx__job_cancel_move(const json_t *job, const char *point, int take,
                         dtx__move_t *m);

/* The holder's end of its attempt (job: as it held it, at its epoch)
 * after an outcome matched nothing: when the job still runs at that
 * epoch with a cancel requested, ends it canceled (job.cancel.end), *out
 * the job afterwards; DTX_ENOMATCH otherwise (taken over, or ended). */
int dtx__job_end_canceled(dtx__exec_t *ex, const json_t *job, json_t **out);

/* Records the request on running job (stolen; job.cancel.request): *out
 * the job afterwards, or as it is when one was recorded already.
 * DTX_ENOMATCH when it moved on meanwhile. */
int dtx__job_cancel_request(dtx__exec_t *ex, json_t *job, json_t **out);

/* ---- a unique key's window after the job ends (unique.c; J18) ---- */

/* What the step that makes job terminal does with its unique key: with
 * a window (unique_for_ms > 0) it stays, and set gets unique_until = now
 * + the window (saturated), *unset NULL; else *unset = {unique_live: ""}.
 * 0 or DTX_ENOMEM. */
int dtx__job_unique_end(const json_t *job, json_t *set, int64_t now,
                        json_t **unset);
/* 1 when job is terminal and its window has passed by now. */
int dtx__job_unique_expired(const json_t *job, int64_t now);
/* The holder job gives its key up (job.unique.expire: {_id, unique_live,
 * unique_until <= now} -> $unset both).  DTX_ENOMATCH when it had not
 * passed, or moved on. */
int dtx__job_unique_expire(dtx__exec_t *ex, const json_t *job);
/* Recovery: up to 200 passed windows cleared (tallied unique_expired). */
int dtx__job_unique_recover(dtx__exec_t *ex, dtx__tally_t *t);

/* The job's pin of effect key (effect.c; borrowed, NULL when none):
 * {coll, id, voided: [ids]} as the fence and repin steps wrote it. */
const json_t *dtx__job_pin(const json_t *job, const char *key);

/* ---- events (events.c; docs/jobs.md "Events") ---- */

/* The most events a job's outbox holds before dtx__job_event (a step
 * that is no move) is refused; moves are never refused for it. */
#define DTX_JOB_OUTBOX_MAX 64

/* The jobs kind's on_move hook (kit.h): adds the move's event to its
 * update ($inc ev_n, $push ev_out, $set ev_pend), J19. */
int dtx__job_on_move(const json_t *doc, const char *point, const char *from,
                     const char *to, int take, json_t *update);

/* An outbox entry {u, event, at, epoch, from, to [, data]}: data stolen,
 * epoch borrowed (may be NULL).  NULL when out of memory. */
json_t *dtx__job_event_entry(const char *event, const char *from,
                             const char *to, const json_t *epoch,
                             json_t *data);

/* The one call for a step that is no state move (progress) to record
 * its event: ONE update of job {_id, state, epoch as in job (borrowed),
 * outbox not full} -> $set set (stolen, may be NULL) + the event (name
 * event, data stolen, may be NULL) added as a move adds it, behind
 * fault point `point`.  *out: the job afterwards.  DTX_ENOMATCH (no
 * detail) when the job moved on (another state or epoch); DTX_ELIMIT
 * when its outbox holds DTX_JOB_OUTBOX_MAX events even after relaying
 * it.  Relaying it is the readers', workers' and recovery's (below). */
int dtx__job_event(dtx__exec_t *ex, const char *point, const json_t *job,
                   const char *event, json_t *data, json_t *set,
                   json_t **out);

/* Relays the outboxes of the n jobs (as read; NULL entries and empty
 * outboxes are skipped) into the log (job.events.log, then
 * job.events.pull per job), J20-J21.  Each jobs[i] the relay read again
 * or pulled from is replaced by the job as it now stands (the old
 * reference released), so a caller answers what is stored.  *count (may
 * be NULL) += events relayed.  Returns the first error; the other jobs
 * are relayed still. */
int dtx__job_relay(dtx__exec_t *ex, json_t **jobs, size_t n,
                   int64_t *count);

/* The audit's part (audit.c): the log and the outboxes against the jobs
 * loaded (map _id -> job); *nevents: the log's size. */
int dtx__job_events_audit(dtx__audit_t *a, const json_t *jobs,
                          int64_t *nevents);

/* Who relays, and how much (docs/jobs.md "Events", the log's lag): no
 * step that moves a job relays (the hot path writes only the job);
 * `doctx recover` relays up to DTX__JOB_RELAY_RECOVER jobs per pass, a
 * worker's periodic recovery pass (at most once a second per process,
 * also while busy) DTX__JOB_RELAY_BUSY, a worker that finds nothing due
 * DTX__JOB_RELAY_IDLE of its queue per idle round, and a `job events`
 * read DTX__JOB_RELAY_READ of its queue before it reads. */
#define DTX__JOB_RELAY_RECOVER 500
#define DTX__JOB_RELAY_BUSY 100
#define DTX__JOB_RELAY_IDLE 200
#define DTX__JOB_RELAY_READ 200
#define DTX__JOB_RELAY_AGE_MS 1000 /* a busy worker's pass: older outboxes */

/* Relays up to max jobs whose outbox holds events (ev_pend: the time of
 * its oldest waiting event), of queue (NULL: every queue), the oldest
 * first; age_ms > 0: only those waiting at least that long.  *count (may
 * be NULL) += events relayed. */
int dtx__job_events_relay(dtx__exec_t *ex, const char *queue, int64_t max,
                          int64_t age_ms, int64_t *count);

/* Recovery's part: relays outboxes (busy 1: a busy worker's pass,
 * DTX__JOB_RELAY_BUSY jobs of those DTX__JOB_RELAY_AGE_MS old; 2: none,
 * another relay of the process runs; 0: DTX__JOB_RELAY_RECOVER jobs),
 * trims the log. */
int dtx__job_events_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                            int busy, dtx__tally_t *t);
/* ---- flows (flow.c) ---- */

/* The add step of job.c: req as a new job with extra's fields (borrowed:
 * "state" replaces ready/delayed; "parent" must also match an existing
 * job of the id for it to be this request's), inserted at point. */
int dtx__job_add_doc(dtx__exec_t *ex, const dtx_job_req_t *r,
                     const json_t *extra, const char *point, json_t **out,
                     int *added);

/* The add of a child (flow->parent set): held, attached, released. */
int dtx__job_add_child(dtx__exec_t *ex, const dtx_job_req_t *r,
                       const dtx_job_flow_t *flow, json_t **out, int *added);

/* Moves the waiting parent pid on when its children say so (all
 * succeeded: ready; one dead/canceled/missing under policy fail: dead);
 * *moved (may be NULL): 1, -1 or 0.  A parent not waiting, or missing,
 * is left alone. */
int dtx__job_settle(dtx__exec_t *ex, const char *pid, int *moved);

/* dtx__job_settle of child's parent once child is terminal (errors are
 * left to recovery). */
void dtx__job_settle_after(dtx__exec_t *ex, const json_t *child);

/* 1 / -1 / 0 as dtx__job_settle would move parent, given kids (an object
 * of child documents by id); *bad the failed child's id. */
int dtx__job_flow_verdict(const json_t *parent, const json_t *kids,
                          const char **bad);

/* *view: a copy of job whose children are [{id, state, result}] read
 * now, for its handler; NULL when job has no children. */
int dtx__job_flow_view(dtx__exec_t *ex, const json_t *job, json_t **view);

/* Recovery's part: held children finished, waiting parents settled. */
int dtx__job_flow_recover(dtx__exec_t *ex, dtx__tally_t *t);

/* The audit's part, over jobs (an object of jobs by id). */
void dtx__job_flow_audit(dtx__audit_t *a, const json_t *jobs, int64_t now);

/* ---- schedules (sched.c, sched_audit.c) ---- */

#include "util/cron.h"

/* The ticks of a schedule document: its cron, or every `every` ms. */
typedef struct dtx__sched_spec {
  int is_cron;
  dtx__cron_t cron;
  int64_t every;
} dtx__sched_spec_t;

/* The schedules' validator and transition rule (job.c's rules table). */
extern const char dtx__sched_shape[], dtx__sched_transition[];

/* The _id prefix of a schedule's jobs (sched.c): another job under such an
 * id would hold a tick's _id with other content and stop the schedule, so
 * job add and the validator refuse it. */
#define DTX__SCHED_ID_PREFIX "sched:"

/* The jobs collection's validator and transition rule (rules.c; job.c's
 * rules table). */
extern const char dtx__job_shape[], dtx__job_transition[],
    dtx__job_event_shape[];

/* Reads schedule s's ticks into *sp: 0 or DTX_EINVAL (a tampered one). */
int dtx__sched_spec(const json_t *s, dtx__sched_spec_t *sp);
/* The first tick after `after`; INT64_MAX when there is none (in 10
 * years for a cron). */
int64_t dtx__sched_next(const dtx__sched_spec_t *sp, int64_t after);
/* 1 when t is a tick. */
int dtx__sched_is_tick(const dtx__sched_spec_t *sp, int64_t t);
/* The _id of the job of schedule name's tick at gen: "sched:N:G:T". */
void dtx__sched_job_id(char *buf, size_t n, const char *name, int64_t gen,
                       int64_t tick);

/* One round of ticks: every due schedule of queue (NULL: all), each up to
 * the present (at most 64 ticks); tallies enqueued, missed, skipped,
 * fenced and errors in t.  The first error, after trying them all. */
int dtx__job_sched_tick(dtx__exec_t *ex, const char *queue, dtx__tally_t *t);

/* The schedules' part of the job audit (J8, J9): scheds and jobs are
 * the maps (_id -> document) the job audit loaded, the schedules first. */
int dtx__job_sched_audit(dtx__audit_t *a, const json_t *scheds,
                         const json_t *jobs);
/* ---- queue settings (queues.c) ---- */

/* The rules of DTX_JOB_QUEUES (job.c's table): validator, transition
 * rule, delete guard. */
extern const char dtx__jq_shape[], dtx__jq_transition[],
    dtx__jq_delete_guard[];

/* Whether queue is paused, and whether it has a concurrency limit, from
 * this process's cache of its settings (at most DTX_JOB_QUEUE_TTL_MS old;
 * one read when older): a claim round's gate (dtx__job_claim). */
int dtx__jq_gate(dtx__exec_t *ex, const char *queue, int *paused,
                 int *limited);

/* Drops this process's cached settings of queue (after a change). */
void dtx__jq_forget(const dtx_store_t *st, const char *queue);


/* The claim round of a queue with max_running (limits.c): takes running
 * slots for up to max due jobs, then claims them (J12).  *limited 0 when
 * the queue has no limit after all (the caller claims as ever; nothing
 * was done).  held (may be NULL): the slots of the jobs won. */
int dtx__jq_claim_limited(dtx__exec_t *ex, const char *queue,
                          const json_t *due, const json_t *sort, size_t max,
                          json_t **jobs, dtx__jq_held_t *held, int *limited);

/* Frees n running slots of queue (idx[i] still at g[i]) whose jobs are no
 * longer running at the epoch their claim gave them: fault point
 * job.slot.release. */
int dtx__jq_release(dtx__exec_t *ex, const char *queue, const int *idx,
                    const int64_t *g, size_t n);

/* *out: {queue, paused, gen} of queue, read now (the defaults when it
 * has no settings). */
int dtx__jq_settings(dtx_store_t *st, const char *queue, json_t **out);

/* ---- a queue's rate limit (rate.c) ---- */

extern const char dtx__jr_shape[], dtx__jr_transition[],
    dtx__jr_delete_guard[];

/* A queue's rate, from its settings document. */
typedef struct dtx__jr {
  int64_t n, ms;
  char group[130]; /* "" : the whole queue */
} dtx__jr_t;

/* 1 when settings (may be NULL) set a rate (*r filled), 0 when not,
 * DTX_ESTATE for a rate written past the rules. */
int dtx__jr_of(const json_t *settings, dtx__jr_t *r);

/* 1 when this process saw the (queue-wide) window full and it has not
 * ended: *until its end. */
int dtx__jr_full(const dtx_store_t *st, const char *queue,
                 const dtx__jr_t *r, int64_t *until);

/* due, with the groups this process saw full left out (unless
 * keep_full: units in hand of such a group are still to be used), and
 * the ids of tried (may be NULL) too: a new filter. */
json_t *dtx__jr_due(const dtx_store_t *st, const char *queue,
                    const dtx__jr_t *r, const json_t *due,
                    const json_t *tried, int keep_full);

/* Keeps of cands (in order) at most cap that got a unit of their group's
 * window (job.rate.take); units of jobs not claimed then are lost. */
int dtx__jr_admit_once(dtx__exec_t *ex, const char *queue,
                       const dtx__jr_t *r, json_t *cands, size_t cap);

/* The claim of a rated queue without max_running: up to max due jobs,
 * each under a unit of its group's window (J22). */
int dtx__jr_claim(dtx__exec_t *ex, const char *queue, const dtx__jr_t *r,
                  const json_t *due, const json_t *sort, size_t max,
                  json_t **jobs);

/* Recovery: windows ended over a minute ago are retired and purged, 200
 * per pass (job.rate.retire, job.rate.purge). */
int dtx__jr_recover(dtx__exec_t *ex, dtx__tally_t *t);

/* The pattern's methods (recover.c, audit.c). */
int dtx__job_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                     dtx__tally_t *t);
/* dtx__job_recover; busy: a worker's periodic pass, whose relay is
 * bounded (dtx__job_events_recover). */
int dtx__job_recover_ex(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                        int busy, dtx__tally_t *t);
int dtx__job_audit(dtx__audit_t *a);

#endif
