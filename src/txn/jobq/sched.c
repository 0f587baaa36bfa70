/* sched.c -- job schedules: one job per tick of a cron or an interval,
 * exactly once, whatever the number of tickers (docs/jobs.md,
 * "Schedules").
 *
 * A schedule is a document of "job_schedules", _id = its name:
 *   {state: "active"|"removed", queue, type, payload, cron|every_ms,
 *    missed: "run-once"|"skip", grace_ms, priority, max_attempts,
 *    backoff_ms, gen, first_at, next_at, last_tick, skipped: [[T, L]...],
 *    audit_from, past: [{gen, first_at, next_at, until}...], created,
 *    updated, removed_at}
 * Every `job work` of a queue and every `job scheduler` is a ticker.
 *
 *   (none) --schedule--> active --tick: enqueue, advance--> active
 *     ^                   |  ^ \--schedule (replace: gen + 1)--/
 *     |                   |  +---schedule (gen + 1)---+
 *     +-- (plain delete)  +--unschedule (gen + 1)--> removed
 *
 *   transition                  function            fault point
 *   (none|any) -> active        dtx_job_schedule    job.schedule.add
 *   (tick T's job)              tick_one            job.schedule.enqueue
 *   active (next_at T -> T')    tick_one            job.schedule.advance
 *   active -> removed           dtx_job_unschedule  job.schedule.remove
 *
 * A tick, by any ticker that read the schedule at (gen G, next_at T <= now):
 *   1. enqueue: insert the job "sched:NAME:G:T" (run-once of missed ticks:
 *      the same, with sched.last = the last tick it stands for); a
 *      duplicate _id is another ticker's insert of the same tick: done;
 *   2. advance: update {_id, state: active, gen: G, next_at: T} -> next_at
 *      = the next tick, last_tick = T.  Nothing matched: another ticker
 *      advanced first, or the schedule changed: the ticker stops there.
 * A crash between 1 and 2 leaves next_at at T: the next ticker inserts
 * the same _id again (a duplicate: done) and advances.
 *
 * Invariants (the audit checks them, sched_audit.c):
 *  J8 Within one gen, next_at only grows, and every tick of the schedule
 *     from first_at (or audit_from) up to next_at has exactly one job --
 *     its own, or a run-once job whose [tick, last] covers it -- or lies
 *     in a run of `skipped`; no job names a time that is not a tick of
 *     its schedule and gen, nor one past next_at but the one in flight.
 *  J9 gen only grows: a replace or a remove bumps it, so a ticker that
 *     read the schedule before is fenced off its advance.  The insert of
 *     step 1 is not fenced by the schedule document (it is another
 *     document): a ticker paused between its read and its insert may
 *     insert after the change, but only the tick T it read, which was due
 *     before the change, and which no later ticker enqueues (the new gen
 *     starts from the first tick after the change, under other _ids).  So
 *     at most one tick per change runs late, none twice, none is lost; a
 *     tombstone's next_at (or past[].next_at) names that tick.
 * The validator checks the shape; the transition rule keeps gen
 * increasing and lets no plain write change what the ticks depend on. */
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/cron.h"
#include "util/deadline.h"
#include "util/err.h"

#define SCHED DTX_JOB_SCHEDULES
#define NAME_MAX_LEN 64
#define SKIPPED_KEEP 32  /* runs of skipped ticks a schedule remembers */
#define PAST_KEEP 8      /* earlier gens a schedule remembers */
#define ROUND_MAX 64     /* ticks one ticker advances a schedule by a round */
#define FIND_BATCH 64    /* schedules a round reads */
#define GRACE_MAX (24LL * 3600 * 1000)
#define CRON_DAYS (10 * 366) /* how far a later tick is looked for */

/* ---- rules (installed with the job pattern's, job.c) ------------------ */

/* A schedule: the shape its ticks rely on.  A tick's job _id
 * is "sched:NAME:GEN:TICK" in 128 bytes, hence the name's 64. */
#define LONG "{\"bsonType\":\"long\"}"
const char dtx__sched_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"state\",\"queue\",\"type\",\"missed\","
    "\"grace_ms\",\"priority\",\"max_attempts\",\"backoff_ms\",\"gen\","
    "\"first_at\",\"next_at\",\"skipped\",\"audit_from\",\"past\"],"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":64},"
    "\"state\":{\"enum\":[\"active\",\"removed\"]},"
    "\"queue\":{\"bsonType\":\"string\"},\"type\":{\"bsonType\":\"string\"},"
    "\"cron\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"every_ms\":{\"bsonType\":[\"long\",\"null\"],\"minimum\":10},"
    "\"missed\":{\"enum\":[\"run-once\",\"skip\"]},"
    "\"grace_ms\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"priority\":{\"bsonType\":\"long\",\"minimum\":-100,\"maximum\":100},"
    "\"max_attempts\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"backoff_ms\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"gen\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"first_at\":" LONG ",\"next_at\":" LONG ",\"audit_from\":" LONG ","
    "\"last_tick\":{\"bsonType\":[\"long\",\"null\"]},"
    "\"skipped\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":"
    "\"array\",\"minItems\":2,\"maxItems\":2,\"items\":" LONG "}},"
    "\"past\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":\"object\","
    "\"required\":[\"gen\",\"first_at\",\"next_at\",\"until\"]}}}},"
    "\"$nor\":[{\"cron\":null,\"every_ms\":null},"
    "{\"cron\":{\"$ne\":null},\"every_ms\":{\"$ne\":null}}]}";
#undef LONG
/* gen only grows (J9) for every writer; a plain write changes nothing a
 * tick depends on (J8: next_at grows within a gen by the ticks' own
 * fenced advance alone), and inserts none: a schedule forged with
 * next_at in the past, or moved back, would enqueue ticks again. */
const char dtx__sched_transition[] =
    "[{\"increasing\":[\"gen\"]},"
    "{\"scope\":\"plain\",\"steps\":[\"job\"],\"insert\":false,"
    "\"immutable\":[\"state\",\"queue\",\"type\",\"payload\",\"cron\","
    "\"every_ms\",\"missed\",\"grace_ms\",\"priority\",\"max_attempts\","
    "\"backoff_ms\",\"gen\",\"first_at\",\"next_at\",\"last_tick\","
    "\"skipped\",\"audit_from\",\"past\"],"
    "\"why\":\"a schedule changes by doctx job schedule and unschedule "
    "only (docs/jobs.md, Schedules)\"}]";

/* ---- the ticks of a schedule ---------------------------------------------- */

int dtx__sched_spec(const json_t *s, dtx__sched_spec_t *sp) {
  memset(sp, 0, sizeof *sp);
  const char *cron = dtx__str(s, "cron");
  if (cron) {
    int rc = dtx__cron_parse(cron, &sp->cron);
    sp->is_cron = 1;
    return rc;
  }
  sp->every = dtx__int(s, "every_ms");
  if (sp->every < DTX_JOB_SCHED_MIN_EVERY_MS ||
      sp->every > DTX_JOB_SCHED_HORIZON_MS)
    return dtx__err(DTX_EINVAL, "schedule %s: every_ms %lld out of range",
                    dtx__str(s, "_id") ? dtx__str(s, "_id") : "?",
                    (long long)sp->every);
  return 0;
}

int64_t dtx__sched_next(const dtx__sched_spec_t *sp, int64_t after) {
  if (sp->is_cron) {
    int64_t n = dtx__cron_next(&sp->cron, after, CRON_DAYS);
    return n < 0 ? INT64_MAX : n;
  }
  if (after < 0)
    return 0;
  if (after > INT64_MAX - 2 * sp->every)
    return INT64_MAX; /* never again */
  return (after / sp->every + 1) * sp->every;
}

int dtx__sched_is_tick(const dtx__sched_spec_t *sp, int64_t t) {
  if (sp->is_cron)
    return dtx__cron_matches(&sp->cron, t);
  return t >= 0 && t % sp->every == 0;
}

/* ---- checks ------------------------------------------------------------------ */

int dtx_job_sched_check(const dtx_job_sched_req_t *r) {
  int rc;
  if (!r)
    return dtx__err(DTX_EINVAL, "no schedule request");
  if ((rc = dtx__check_ident("schedule name", r->name)))
    return rc;
  if (strlen(r->name) > NAME_MAX_LEN)
    return dtx__err(DTX_EINVAL, "schedule name longer than %d bytes",
                    NAME_MAX_LEN);
  dtx_job_req_t jr = {.queue = r->queue, .type = r->type,
                      .payload = r->payload, .priority = r->priority,
                      .max_attempts = r->max_attempts,
                      .backoff_ms = r->backoff_ms};
  if ((rc = dtx_job_req_check(&jr)))
    return rc;
  if (!r->cron == !r->every_ms)
    return dtx__err(DTX_EINVAL, "a schedule needs a cron or every-ms, one "
                    "of them");
  if (r->every_ms && (r->every_ms < DTX_JOB_SCHED_MIN_EVERY_MS ||
                      r->every_ms > DTX_JOB_SCHED_HORIZON_MS))
    return dtx__err(DTX_EINVAL, "every-ms must be from %d ms to 5 years "
                    "(%lld ms), got %lld",
                    DTX_JOB_SCHED_MIN_EVERY_MS,
                    (long long)DTX_JOB_SCHED_HORIZON_MS,
                    (long long)r->every_ms);
  if (r->cron) {
    dtx__cron_t c;
    if ((rc = dtx__cron_parse(r->cron, &c)))
      return rc;
    int64_t now = dtx__now_ms(), n = dtx__cron_next(&c, now, CRON_DAYS);
    if (n < 0 || n - now > DTX_JOB_SCHED_HORIZON_MS)
      return dtx__err(DTX_EINVAL, "cron '%s' does not fire within 5 years "
                      "(a day that does not exist, as Feb 30?)",
                      r->cron);
  }
  if (r->missed && strcmp(r->missed, "run-once") != 0 &&
      strcmp(r->missed, "skip") != 0)
    return dtx__err(DTX_EINVAL, "missed must be run-once or skip, got '%s'",
                    r->missed);
  if (r->grace_ms < 0 || r->grace_ms > GRACE_MAX)
    return dtx__err(DTX_EINVAL, "grace must be from 1 ms to one day, got "
                    "%lld", (long long)r->grace_ms);
  return 0;
}

int dtx_job_scheduler_check(const dtx_job_scheduler_opts_t *o) {
  int rc;
  if (!o)
    return dtx__err(DTX_EINVAL, "no scheduler options");
  if (o->queue && (rc = dtx__check_ident("queue name", o->queue)))
    return rc;
  if (o->poll_ms < 0 || o->poll_ms > 60000)
    return dtx__err(DTX_EINVAL, "poll must be from 1 to 60000 ms, got %lld",
                    (long long)o->poll_ms);
  if (o->deadline_ms < 0)
    return dtx__err(DTX_EINVAL, "deadline must be >= 0 ms");
  return 0;
}

/* ---- add, replace, remove ------------------------------------------------- */

static int begin(dtx__call_t *c, dtx__exec_t *ex, dtx_store_t *st,
                 json_t **out) {
  *out = NULL;
  dtx__call_begin(c, 0);
  dtx__exec_init(ex, st, NULL, 0, 0);
  return dtx__job_setup(st);
}

/* A bounded list: the last `keep` of arr (borrowed) plus item (stolen). */
static json_t *keep_last(const json_t *arr, json_t *item, size_t keep) {
  json_t *out = json_array();
  size_t n = json_array_size(arr), from = n + 1 > keep ? n + 1 - keep : 0;
  for (size_t i = from; out && i < n; i++)
    json_array_append(out, json_array_get(arr, i));
  if (out && item)
    json_array_append_new(out, item);
  else
    json_decref(item);
  return out;
}

/* The new fields of schedule r at gen, first tick first (as $set). */
static json_t *sched_fields(const dtx_job_sched_req_t *r, int64_t gen,
                            int64_t first, int64_t now) {
  return json_pack(
      "{s:s,s:s,s:s,s:O,s:s?,s:o,s:s,s:I,s:i,s:i,s:I,s:I,s:I,s:I,s:n,s:[],"
      "s:I,s:I}",
      "state", "active", "queue", r->queue, "type", r->type, "payload",
      r->payload ? r->payload : json_null(), "cron", r->cron, "every_ms",
      r->every_ms ? json_integer((json_int_t)r->every_ms) : json_null(),
      "missed", r->missed ? r->missed : "run-once", "grace_ms",
      (json_int_t)(r->grace_ms ? r->grace_ms : DTX_JOB_SCHED_GRACE_MS),
      "priority", r->priority, "max_attempts",
      r->max_attempts ? r->max_attempts : DTX_JOB_MAX_ATTEMPTS, "backoff_ms",
      (json_int_t)(r->backoff_ms ? r->backoff_ms : DTX_JOB_BACKOFF_MS), "gen",
      (json_int_t)gen, "first_at", (json_int_t)first, "next_at",
      (json_int_t)first, "last_tick", "skipped", "audit_from",
      (json_int_t)first, "updated", (json_int_t)now);
}

/* The record of gen's ticks a replace or a remove keeps (J9). */
static json_t *past_of(const json_t *s, int64_t now) {
  return json_pack("{s:I,s:I,s:I,s:I}", "gen",
                   (json_int_t)dtx__int(s, "gen"), "first_at",
                   (json_int_t)dtx__int(s, "audit_from"), "next_at",
                   (json_int_t)dtx__int(s, "next_at"), "until",
                   (json_int_t)now);
}

static int schedule(dtx__exec_t *ex, const dtx_job_sched_req_t *r,
                    json_t **out) {
  dtx__sched_spec_t sp = {0};
  int rc;
  if (r->cron)
    rc = dtx__cron_parse(r->cron, &sp.cron), sp.is_cron = 1;
  else
    sp.every = r->every_ms, rc = 0;
  if (rc)
    return rc;
  for (int round = 0; round < 8; round++) {
    json_t *old = NULL;
    int64_t now = dtx__now_ms(), first = dtx__sched_next(&sp, now);
    rc = dtx__kit_get(ex, SCHED, r->name, &old);
    if (rc == DTX_ENOTFOUND) {
      json_t *doc = sched_fields(r, 1, first, now);
      if (!doc)
        return DTX_ENOMEM;
      json_object_set_new(doc, "_id", json_string(r->name));
      json_object_set_new(doc, "past", json_array());
      json_object_set_new(doc, "created", json_integer((json_int_t)now));
      rc = dtx__kit_insert(ex, "job.schedule.add", SCHED, doc);
      if (rc == 0)
        *out = doc;
      else
        json_decref(doc);
      if (rc != DTX_EDUPKEY)
        return rc;
      continue; /* another add came first: replace it */
    }
    if (rc)
      return rc;
    int64_t gen = dtx__int(old, "gen");
    json_t *set = sched_fields(r, gen + 1, first, now);
    if (set)
      json_object_set_new(set, "past",
                          keep_last(json_object_get(old, "past"),
                                    past_of(old, now), PAST_KEEP));
    int matched = 0;
    /* J9: fenced by the gen read, so a concurrent change is not lost. */
    rc = set ? dtx__kit_update(ex, "job.schedule.add", SCHED,
                               json_pack("{s:s,s:I}", "_id", r->name, "gen",
                                         (json_int_t)gen),
                               json_pack("{s:o,s:{s:s}}", "$set", set,
                                         "$unset", "removed_at", ""),
                               &matched)
             : DTX_ENOMEM;
    json_decref(old);
    if (rc)
      return rc;
    if (matched)
      return dtx__kit_get(ex, SCHED, r->name, out);
  }
  return dtx__err(DTX_EBUSY, "schedule %s kept changing", r->name);
}

int dtx_job_schedule(dtx_store_t *st, const dtx_job_sched_req_t *req,
                     json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = dtx_job_sched_check(req);
  *out = NULL;
  if (rc)
    return rc;
  if ((rc = begin(&c, &ex, st, out)) == 0)
    rc = schedule(&ex, req, out);
  return dtx__call_end(&c, rc);
}

int dtx_job_schedules(dtx_store_t *st, const char *queue, json_t **out) {
  dtx__call_t c;
  int rc;
  *out = NULL;
  if (queue && (rc = dtx__check_ident("queue name", queue)))
    return rc;
  dtx__call_begin(&c, 0);
  json_t *f = json_pack("{s:s}", "state", "active");
  if (f && queue)
    json_object_set_new(f, "queue", json_string(queue));
  json_t *sort = json_pack("{s:i}", "_id", 1);
  dtx__kit_read_t q = {.coll = SCHED, .filter = f, .sort = sort,
                       .what = "schedules"};
  rc = f && sort ? dtx__kit_read(st, &q, out) : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  return dtx__call_end(&c, rc);
}

int dtx_job_unschedule(dtx_store_t *st, const char *name, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc = dtx__check_ident("schedule name", name);
  *out = NULL;
  if (rc)
    return rc;
  if ((rc = begin(&c, &ex, st, out)))
    return dtx__call_end(&c, rc);
  for (int round = 0; round < 8; round++) {
    json_t *old = NULL;
    rc = dtx__kit_get(&ex, SCHED, name, &old);
    if (rc == 0 && !dtx__str_is(old, "state", "active")) {
      json_decref(old);
      rc = DTX_ENOTFOUND;
    }
    if (rc == DTX_ENOTFOUND)
      rc = dtx__err(DTX_ENOTFOUND, "no schedule '%s'", name);
    if (rc)
      return dtx__call_end(&c, rc);
    int64_t gen = dtx__int(old, "gen"), now = dtx__now_ms();
    int matched = 0;
    /* The tombstone keeps next_at: the tick a paused ticker may still
     * enqueue (J9), which the audit admits. */
    rc = dtx__kit_update(
        &ex, "job.schedule.remove", SCHED,
        json_pack("{s:s,s:I,s:s}", "_id", name, "gen", (json_int_t)gen,
                  "state", "active"),
        json_pack("{s:{s:s,s:I,s:I,s:I,s:o}}", "$set", "state", "removed",
                  "gen", (json_int_t)(gen + 1), "removed_at",
                  (json_int_t)now, "updated", (json_int_t)now, "past",
                  keep_last(json_object_get(old, "past"), past_of(old, now),
                            PAST_KEEP)),
        &matched);
    json_decref(old);
    if (rc || matched)
      break;
  }
  if (rc == 0)
    rc = dtx__kit_get(&ex, SCHED, name, out);
  return dtx__call_end(&c, rc);
}

/* ---- ticking ------------------------------------------------------------------ */

void dtx__sched_job_id(char *buf, size_t n, const char *name, int64_t gen,
                       int64_t tick) {
  snprintf(buf, n, "sched:%s:%lld:%lld", name, (long long)gen,
           (long long)tick);
}

/* The job of tick (standing for the ticks up to last) of schedule s. */
static int enqueue(dtx__exec_t *ex, const json_t *s, int64_t gen,
                   int64_t tick, int64_t last) {
  char id[200];
  const char *name = dtx__str(s, "_id");
  dtx__sched_job_id(id, sizeof id, name, gen, tick);
  dtx_job_req_t r = {.queue = dtx__str(s, "queue"),
                     .type = dtx__str(s, "type"),
                     .payload = json_object_get(s, "payload"),
                     .id = id,
                     .priority = (int)dtx__int(s, "priority"),
                     .max_attempts = (int)dtx__int(s, "max_attempts"),
                     .backoff_ms = dtx__int(s, "backoff_ms")};
  json_t *extra = json_pack("{s:{s:s,s:I,s:I,s:I}}", "sched", "name", name,
                            "gen", (json_int_t)gen, "tick", (json_int_t)tick,
                            "last", (json_int_t)last);
  json_t *job = NULL;
  int added = 0;
  int rc = extra ? dtx__job_add_doc(ex, &r, extra, "job.schedule.enqueue",
                                   &job, &added)
                 : DTX_ENOMEM;
  /* A duplicate of this _id is the same tick's job (another ticker's, or
   * ours before a crash): done (add returned it, rc 0). */
  json_decref(extra);
  json_decref(job);
  return rc;
}

/* Ticks schedule s (read at now) while it is due, at most ROUND_MAX
 * ticks; tallies what it did. */
static int tick_one(dtx__exec_t *ex, const json_t *s, int64_t now,
                    dtx__tally_t *t) {
  dtx__sched_spec_t sp;
  int rc = dtx__sched_spec(s, &sp);
  if (rc)
    return rc;
  const char *name = dtx__str(s, "_id");
  int64_t gen = dtx__int(s, "gen"), tick = dtx__int(s, "next_at");
  int64_t grace = dtx__int(s, "grace_ms");
  int skip = dtx__str_is(s, "missed", "skip");
  json_t *skipped = json_incref(json_object_get(s, "skipped"));
  int64_t audit_from = dtx__int(s, "audit_from");
  for (int i = 0; rc == 0 && i < ROUND_MAX && tick <= now; i++) {
    int64_t last = tick, next;
    int late = now - tick > grace;
    if (late) { /* the run of ticks more than grace late */
      int guard = 0;
      while ((next = dtx__sched_next(&sp, last)) <= now - grace &&
             guard++ < 1000000)
        last = next;
    }
    next = dtx__sched_next(&sp, last);
    DTX_ASSERT(next > tick, "J8"); /* next_at only grows within a gen */
    json_t *set = json_pack("{s:I,s:I}", "next_at", (json_int_t)next,
                            "updated", (json_int_t)now);
    if (late && skip) {
      json_t *run = json_pack("[I,I]", (json_int_t)tick, (json_int_t)last);
      json_t *nskipped = keep_last(skipped, run, SKIPPED_KEEP);
      /* A run pushed out of the list moves the audit's start past it. */
      if (json_array_size(skipped) + 1 > SKIPPED_KEEP) {
        json_t *gone = json_array_get(skipped,
                                      json_array_size(skipped) -
                                          SKIPPED_KEEP);
        int64_t after = json_integer_value(json_array_get(gone, 1));
        audit_from = dtx__sched_next(&sp, after);
        json_object_set_new(set, "audit_from",
                            json_integer((json_int_t)audit_from));
      }
      json_decref(skipped);
      skipped = nskipped;
      json_object_set(set, "skipped", skipped);
    } else {
      if ((rc = enqueue(ex, s, gen, tick, last)))
        break;
      json_object_set_new(set, "last_tick", json_integer((json_int_t)tick));
    }
    int matched = 0;
    rc = dtx__kit_update(ex, "job.schedule.advance", SCHED,
                         json_pack("{s:s,s:s,s:I,s:I}", "_id", name, "state",
                                   "active", "gen", (json_int_t)gen,
                                   "next_at", (json_int_t)tick),
                         json_pack("{s:o}", "$set", set), &matched);
    if (rc)
      break;
    if (!matched) { /* another ticker advanced, or the schedule changed */
      dtx__tally_ran(t, "fenced", 1);
      break;
    }
    if (late)
      dtx__tally_ran(t, skip ? "skipped" : "missed", 1);
    if (!(late && skip))
      dtx__tally_ran(t, "enqueued", 1);
    tick = next;
  }
  json_decref(skipped);
  return rc;
}

int dtx__job_sched_tick(dtx__exec_t *ex, const char *queue, dtx__tally_t *t) {
  int64_t now = dtx__now_ms();
  json_t *f = json_pack("{s:s,s:{s:I}}", "state", "active", "next_at", "$lte",
                        (json_int_t)now);
  if (f && queue)
    json_object_set_new(f, "queue", json_string(queue));
  json_t *sort = json_pack("{s:i}", "next_at", 1), *due = NULL, *s;
  int rc = f && sort ? dtx__kit_find_n(ex, SCHED, f, sort, FIND_BATCH, &due)
                     : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  if (rc)
    dtx__tally_error(t, NULL, rc);
  size_t i;
  json_array_foreach(due, i, s) {
    int trc = tick_one(ex, s, now, t);
    if (trc) {
      dtx__tally_error(t, json_object_get(s, "_id"), trc);
      if (!rc)
        rc = trc;
    }
  }
  json_decref(due);
  return rc;
}

int dtx_job_scheduler(dtx_store_t *st, const dtx_job_scheduler_opts_t *o,
                      json_t **summary) {
  dtx__call_t c;
  dtx__tally_t t = {0};
  int rc = dtx_job_scheduler_check(o);
  if (summary)
    *summary = NULL;
  dtx__call_begin(&c, 0);
  if (rc || (rc = dtx__job_setup(st)))
    return dtx__call_end(&c, rc);
  if (dtx__tally_init(&t))
    return dtx__call_end(&c, DTX_ENOMEM);
  int64_t poll = o->poll_ms > 0 ? o->poll_ms : 100;
  for (;;) {
    dtx__exec_t ex;
    dtx__call_t r;
    dtx__exec_init(&ex, st, NULL, 0, o->deadline_ms);
    dtx__call_begin(&r, o->deadline_ms);
    int trc = dtx__call_end(&r, dtx__job_sched_tick(&ex, o->queue, &t));
    if (o->once) {
      rc = trc;
      break;
    }
    if (o->stop && *o->stop)
      break;
    (void)dtx__kit_wait(&(dtx__wait_t){.pause = poll}, 0);
    if (o->stop && *o->stop)
      break;
  }
  if (summary) {
    json_t *ran = json_pack("{s:i,s:i,s:i,s:i}", "enqueued", 0, "missed", 0,
                            "skipped", 0, "fenced", 0);
    json_object_update(ran, json_object_get(t.obj, "ran"));
    *summary = json_pack("{s:b,s:s?,s:o,s:O}", "ok", rc == 0, "queue",
                         o->queue, "ran", ran, "errors",
                         json_object_get(t.obj, "errors"));
  }
  dtx__tally_free(&t);
  return dtx__call_end(&c, rc);
}
