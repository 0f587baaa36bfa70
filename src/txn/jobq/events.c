/* events.c -- the job queue's events: every transition of every job,
 * recorded once by the atomic step that makes it, and read back in order
 * per queue (docs/jobs.md, "Events").
 *
 * A step writes ONE document (the job), and a queue's jobs are spread
 * over the store's buckets (Redis Cluster slots), so the log is a
 * transactional outbox:
 *
 *   job step (a move, a claim, add, dtx__job_event)     ONE update of the job:
 *     ... the move's own fields ...                      $inc ev_n 1
 *                                                        $push ev_out {u, event,
 *                                                              at, epoch, from, to}
 *                                                        $min ev_pend at
 *            |                   (no step that moves a job relays: the hot
 *            |                    path writes the job only)
 *            v  relay, oldest ev_pend first (jobq.h DTX__JOB_RELAY_*):
 *               `job events` reads, a worker's periodic recovery pass
 *               (bounded, outboxes >= 1 s old), an idle worker's round,
 *               doctx recover: for each job with ev_pend
 *   read the job: S = ev_sent, ev_out[0..k-1] is event n = S + 1 + i
 *   for each in order: insert job_events {_id "QUEUE/SEQ", queue, seq, rseq
 *        (-seq), job, born, n, event, at, epoch, from, to [, data]}, SEQ = the queue's
 *        highest + 1, born = the job's created time  (job.events.log)
 *        duplicate _id: another relay took SEQ: read the highest again;
 *        duplicate {job, born, n}: the event is logged already: go on
 *   then ONE update {_id, ev_sent: S [, ev_out.k absent]} ->
 *        $inc ev_sent k, $pull ev_out {u in the k read} [, $unset ev_pend]
 *                                                         (job.events.pull)
 *   trim (recovery): delete the oldest log entries of a queue by age or
 *        count, never its newest                          (job.events.trim)
 *
 *   transition                  function                   fault point
 *   (event into the outbox)     the move's own step:       that step's
 *                               dtx__job_on_move (every     (job.claim, ...)
 *                               kit move and claim of a
 *                               job), new_job (add),
 *                               dtx__job_event (progress...)
 *   outbox -> log               dtx__job_relay             job.events.log
 *   outbox emptied              dtx__job_relay             job.events.pull
 *   log trimmed                 dtx__job_events_trim       job.events.trim
 *
 * Races it is built for: two relays reading the same outbox log each
 * event once (the unique index {job, born, n} refuses the second insert, which
 * then goes on to the next event), and only the one whose ev_sent still
 * holds pulls; a relay paused between its insert and its pull wakes to a
 * pull that matches nothing (another relay found the events logged and
 * pulled them) or that it makes itself; a relay that read the outbox,
 * paused, and wakes after another logged and pulled the same events is
 * refused by {job, born, n} and its pull matches nothing.  A crash anywhere
 * leaves events in the outbox (ev_pend set), which the next relay logs.
 *
 * Invariants:
 *  J19 Every move of a job records exactly one event, in the move's own
 *      atomic step (the kind's on_move hook adds it to the move's
 *      update; a retry after a lost reply that matches nothing adds
 *      none), so ev_n counts the job's events and ev_n = ev_sent +
 *      |ev_out| at every step: event n = ev_sent + 1 + i is ev_out[i].
 *  J20 The log of a queue is dense: seq 1..H without a hole but a
 *      trimmed prefix (an insert takes the highest + 1 or fails; the
 *      trim never deletes a queue's newest), each (job, born, n) is logged
 *      at most once (unique index; born, the job's created time, tells a
 *      job purged and added again under its id from the first), and a job's events in n order (a relay
 *      logs event n only after n - 1 is logged).
 *  J21 An event leaves the outbox only once it is in the log, and
 *      ev_sent only grows (the pull is conditioned on the ev_sent read
 *      and removes exactly the entries read, by their nonce u).  Plain
 *      writes may change none of ev_n, ev_sent, ev_out (transition rule)
 *      and may not insert, change or delete a log entry.
 *
 * The outbox's bound: events wait in an outbox until a relay takes them
 * (docs/jobs.md "Events" states the log's lag).  State
 * moves are never refused for an outbox that is full -- a job's moves are
 * bounded by its attempts, and refusing one would stop the job -- but a
 * step that is no move (dtx__job_event: progress) relays the job's outbox
 * first when it holds DTX_JOB_OUTBOX_MAX events and is refused
 * (DTX_ELIMIT) when it still does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

#define MAX_ROUNDS 64      /* a relay's inserts that lost their SEQ */
#define TRIM_BATCH 500     /* log entries a recovery pass deletes */
#define DEFAULT_KEEP_MS (24LL * 3600 * 1000)

/* ---- recording: the outbox -------------------------------------------- */

static int64_t nonce(void) {
  static _Thread_local uint64_t x;
  if (!x) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    x = (uint64_t)ts.tv_nsec * 6364136223846793005ull ^
        (uint64_t)(uintptr_t)&x ^ (uint64_t)ts.tv_sec;
    if (!x)
      x = 88172645463325252ull;
  }
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return (int64_t)(x >> 2); /* a positive int64 */
}

/* The event a step names: its fault point mapped to the word a user
 * reads; a point this table does not know (another feature's move) is
 * named by the state it moves to, or its last segment. */
static const char *event_name(const char *point, const char *to) {
  static const char *const map[][2] = {
      {"job.add", "added"},         {"job.claim", "claimed"},
      {"job.complete", "succeeded"}, {"job.promote", "promoted"},
      {"job.cancel", "canceled"},   {"job.retry", "retried"},
      {"job.recover.takeover", "stalled"},
      /* flows (flow.c) */
      {"job.flow.add", "added"},     {"job.flow.attach", "attached"},
      {"job.flow.release", "released"}, {"job.flow.ready", "settled"},
      {"job.flow.fail", "dead"},     {"job.flow.orphan", "orphaned"},
      /* cancel of a running job (cancel.c), progress (remote.c) */
      {"job.cancel.request", "cancel_requested"},
      {"job.cancel.end", "canceled"}, {"job.progress", "progress"}};
  if (point && strcmp(point, "job.fail") == 0)
    return to && strcmp(to, DTX_JOB_DEAD) == 0 ? "dead" : "failed";
  for (size_t i = 0; point && i < sizeof map / sizeof map[0]; i++)
    if (strcmp(point, map[i][0]) == 0)
      return map[i][1];
  if (to)
    return to;
  const char *dot = point ? strrchr(point, '.') : NULL;
  return dot ? dot + 1 : point ? point : "changed";
}

json_t *dtx__job_event_entry(const char *event, const char *from,
                             const char *to, const json_t *epoch,
                             json_t *data) {
  json_t *e = dtx__pack("{s:I,s:s,s:I,s:O?,s:s?,s:s?}", "u",
                        (json_int_t)nonce(), "event", event, "at",
                        (json_int_t)dtx__now_ms(), "epoch", epoch, "from",
                        from, "to", to);
  if (e && data && json_object_set_new(e, "data", data) < 0) {
    json_decref(e);
    return NULL;
  }
  if (!e)
    json_decref(data);
  return e;
}

/* Adds the event entry e (stolen) to update: $inc ev_n, $push ev_out,
 * $min ev_pend (the time of the oldest event waiting: relays take the
 * oldest outboxes first, and a busy worker's only once they are
 * DTX__JOB_RELAY_AGE_MS old).  0 or DTX_ENOMEM (update then unusable). */
static int add_event(json_t *update, json_t *e) {
  json_t *set = json_object_get(update, "$min");
  json_t *inc = json_object_get(update, "$inc");
  json_t *push = json_object_get(update, "$push");
  if (!e)
    return DTX_ENOMEM;
  if (!set && json_object_set_new(update, "$min", set = json_object()) < 0)
    set = NULL;
  if (!inc && json_object_set_new(update, "$inc", inc = json_object()) < 0)
    inc = NULL;
  if (!push && json_object_set_new(update, "$push", push = json_object()) < 0)
    push = NULL;
  if (!set || !inc || !push ||
      json_object_set_new(inc, "ev_n", json_integer(1)) < 0 ||
      json_object_set_new(set, "ev_pend",
                          json_object_get(e, "at")
                              ? json_incref(json_object_get(e, "at"))
                              : json_integer(dtx__now_ms())) < 0) {
    json_decref(e);
    return DTX_ENOMEM;
  }
  return json_object_set_new(push, "ev_out", e) < 0 ? DTX_ENOMEM : 0;
}

/* The kind's hook (kit.h, dtx__kind_t.on_move): every kit move and
 * claim of a job records its event in the same update (J19). */
int dtx__job_on_move(const json_t *doc, const char *point, const char *from,
                     const char *to, int take, json_t *update) {
  json_t *epoch = NULL;
  if (doc && json_is_integer(json_object_get(doc, "epoch")))
    epoch = json_integer(json_integer_value(json_object_get(doc, "epoch")) +
                         (take ? 1 : 0));
  json_t *set = json_object_get(update, "$set"), *data = NULL;
  if (set && json_object_get(set, "attempts"))
    data = dtx__pack("{s:O}", "attempts", json_object_get(set, "attempts"));
  /* to NULL: the state stays (a cancel request): the event ends where it
   * began, so a job's last event always names its state (the audit). */
  json_t *e = dtx__job_event_entry(event_name(point, to), from,
                                   to ? to : from, epoch, data);
  json_decref(epoch);
  return add_event(update, e);
}

int dtx__job_event(dtx__exec_t *ex, const char *point, const json_t *job,
                   const char *event, json_t *data, json_t *set,
                   json_t **out) {
  *out = NULL;
  int rc = 0;
  for (int round = 0; round < 2; round++) {
    char full[32];
    snprintf(full, sizeof full, "ev_out.%d", DTX_JOB_OUTBOX_MAX - 1);
    json_t *f = dtx__pack("{s:O,s:O,s:O,s:{s:b}}", "_id",
                          json_object_get(job, "_id"), "state",
                          json_object_get(job, "state"), "epoch",
                          json_object_get(job, "epoch"), full, "$exists", 0);
    const char *st = dtx__str(job, "state");
    json_t *u = json_object();
    if (u && json_object_set_new(u, "$set", set ? json_deep_copy(set)
                                                : json_object()) < 0) {
      json_decref(u);
      u = NULL;
    }
    json_t *e = dtx__job_event_entry(
        event, st, st, json_object_get(job, "epoch"),
        data ? json_incref(data) : NULL);
    int arc = u ? add_event(u, e) : (json_decref(e), DTX_ENOMEM);
    if (arc || !f) {
      json_decref(f);
      json_decref(u);
      rc = DTX_ENOMEM;
      break;
    }
    rc = dtx__kit_modify(ex, point, DTX_JOBS, f, u, NULL, out);
    if (rc != DTX_ENOMATCH)
      break;
    /* Moved on (fenced), or the outbox is full: relay it, then once more. */
    json_t *now = NULL;
    if (dtx__kit_get(ex, DTX_JOBS, dtx__str(job, "_id"), &now) != 0 ||
        !json_equal(json_object_get(now, "epoch"),
                    json_object_get(job, "epoch")) ||
        !json_equal(json_object_get(now, "state"),
                    json_object_get(job, "state"))) {
      json_decref(now);
      dtx__err_clear();
      rc = DTX_ENOMATCH;
      break;
    }
    if (round == 1) { /* still there, and still full */
      json_decref(now);
      rc = DTX_ELIMIT;
      break;
    }
    rc = dtx__job_relay(ex, &now, 1, NULL);
    json_decref(now);
    if (rc)
      break;
  }
  json_decref(data);
  json_decref(set);
  if (rc == DTX_ELIMIT)
    rc = dtx__err(DTX_ELIMIT,
                  "job %s: %d events wait in its outbox and could not be "
                  "relayed to the log",
                  dtx__str(job, "_id"), DTX_JOB_OUTBOX_MAX);
  return rc;
}

/* ---- relay: outbox -> log --------------------------------------------- */

/* The highest seq of queue's log, 0 when it has none. */
static int highest(dtx__exec_t *ex, const char *queue, int64_t *h) {
  json_t *f = dtx__pack("{s:s}", "queue", queue), *found = NULL;
  /* rseq = -seq: the store walks an index in ascending order only, so
   * the newest is the first of {queue, rseq}, not the last of seq */
  json_t *sort = dtx__pack("{s:i}", "rseq", 1);
  int rc = f && sort ? dtx__kit_find_n(ex, DTX_JOB_EVENTS, f, sort, 1, &found)
                     : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  *h = rc ? 0 : dtx__int(json_array_get(found, 0), "seq");
  json_decref(found);
  return rc;
}

/* Is (job, born, n) in the log? */
static int logged(dtx__exec_t *ex, const char *job, int64_t born, int64_t n,
                  int *yes) {
  json_t *f = dtx__pack("{s:s,s:I,s:I}", "job", job, "born", (json_int_t)born,
                        "n", (json_int_t)n);
  json_t *found = NULL;
  int rc = f ? dtx__kit_find_n(ex, DTX_JOB_EVENTS, f, NULL, 1, &found)
             : DTX_ENOMEM;
  json_decref(f);
  *yes = rc == 0 && json_array_size(found) > 0;
  json_decref(found);
  return rc;
}

/* Logs event n of job (its outbox entry e) in queue at the next seq; *h
 * is the queue's highest seq as last known (-1: unknown), kept up. */
static int log_one(dtx__exec_t *ex, const char *queue, const char *job,
                   int64_t born, int64_t n, const json_t *e, int64_t *h) {
  dtx__contend_t ct = {0};
  for (int round = 0; round < MAX_ROUNDS; round++) {
    int rc, yes = 0;
    if (*h < 0 && (rc = highest(ex, queue, h)))
      return rc;
    char id[200];
    snprintf(id, sizeof id, "%s/%lld", queue, (long long)(*h + 1));
    json_t *d = dtx__pack(
        "{s:s,s:s,s:I,s:I,s:s,s:I,s:I,s:O?,s:O?,s:O?,s:O?,s:O?}", "_id", id,
        "queue", queue, "seq", (json_int_t)(*h + 1), "rseq",
        (json_int_t)-(*h + 1), "job", job, "born",
        (json_int_t)born, "n", (json_int_t)n, "event", json_object_get(e, "event"), "at",
        json_object_get(e, "at"), "epoch", json_object_get(e, "epoch"),
        "from", json_object_get(e, "from"), "to", json_object_get(e, "to"));
    if (d && json_object_get(e, "data"))
      json_object_set(d, "data", json_object_get(e, "data"));
    rc = d ? dtx__kit_insert(ex, "job.events.log", DTX_JOB_EVENTS, d)
           : DTX_ENOMEM;
    json_decref(d);
    if (rc == 0) {
      (*h)++;
      return 0;
    }
    if (rc != DTX_EDUPKEY)
      return rc;
    /* Our own insert after a lost reply, another relay's of the same
     * event, or another event took the seq. */
    dtx__err_clear();
    if ((rc = logged(ex, job, born, n, &yes)))
      return rc;
    if (yes)
      return 0;
    *h = -1;
    if (round > 0) {
      rc = DTX_EBUSY;
      if (!dtx__kit_contend(&ct, &rc, "logging job events"))
        return rc;
    }
  }
  return dtx__err(DTX_EBUSY, "logging event %lld of job %s: the log of "
                  "queue %s kept growing", (long long)n, job, queue);
}

/* One job's relay from doc as read; *again: its outbox changed under it
 * (read it again). */
static int relay_job(dtx__exec_t *ex, const json_t *doc, int64_t *h,
                     char *hq, int64_t *count, int *again,
                     json_t **after) {
  const json_t *out = json_object_get(doc, "ev_out");
  const char *id = dtx__str(doc, "_id"), *q = dtx__str(doc, "queue");
  size_t k = json_array_size(out), i;
  int rc;
  *again = 0;
  if (!id || !q)
    return 0;
  const json_t *sent = json_object_get(doc, "ev_sent");
  int64_t s = json_integer_value(sent);
  DTX_ASSERT(s >= 0, "J21");
  DTX_ASSERT(!json_is_integer(json_object_get(doc, "ev_n")) ||
                 dtx__int(doc, "ev_n") == s + (int64_t)k,
             "J19");
  if (strcmp(hq, q) != 0) { /* another queue: its highest is unknown */
    snprintf(hq, 160, "%s", q);
    *h = -1;
  }
  for (i = 0; i < k; i++)
    if ((rc = log_one(ex, q, id, dtx__int(doc, "created"),
                      s + 1 + (int64_t)i, json_array_get(out, i), h)))
      return rc;
  /* J21: logged; now out of the outbox, the entries read and no others. */
  json_t *us = json_array();
  for (i = 0; us && i < k; i++)
    json_array_append(us, json_object_get(json_array_get(out, i), "u"));
  char beyond[32];
  snprintf(beyond, sizeof beyond, "ev_out.%zu", k);
  json_t *f = dtx__pack("{s:O,s:{s:b}}", "_id", json_object_get(doc, "_id"),
                        beyond, "$exists", 0);
  if (f)
    json_object_set_new(f, "ev_sent",
                        sent ? json_incref((json_t *)sent)
                             : dtx__pack("{s:b}", "$exists", 0));
  json_t *u = us ? dtx__pack("{s:{s:I},s:{s:{s:{s:o}}},s:{s:s}}", "$inc",
                             "ev_sent", (json_int_t)k, "$pull", "ev_out",
                             "u", "$in", us, "$unset", "ev_pend", "")
                 : NULL;
  rc = f && u ? dtx__kit_modify(ex, "job.events.pull", DTX_JOBS, f, u, NULL,
                                after)
              : (json_decref(f), json_decref(u), DTX_ENOMEM);
  if (rc == DTX_ENOMATCH) {
    *again = 1; /* another relay pulled, or a step pushed: look again */
    rc = 0;
  } else if (rc == 0) {
    *count += (int64_t)k;
  }
  return rc;
}

int dtx__job_relay(dtx__exec_t *ex, json_t **jobs, size_t n,
                   int64_t *count) {
  int64_t h = -1, dummy = 0;
  char hq[160] = ""; /* the queue whose highest seq h is */
  int first = 0;
  if (!count)
    count = &dummy;
  for (size_t i = 0; i < n; i++) {
    if (!jobs[i] || json_array_size(json_object_get(jobs[i], "ev_out")) == 0)
      continue;
    int again = 0, rc = 0;
    for (int round = 0; round < 8; round++) {
      json_t *after = NULL;
      rc = relay_job(ex, jobs[i], &h, hq, count, &again, &after);
      if (after) {
        json_decref(jobs[i]);
        jobs[i] = after;
      }
      if (rc || !again)
        break;
      if ((rc = dtx__kit_get(ex, DTX_JOBS, dtx__str(jobs[i], "_id"),
                             &after))) {
        if (rc == DTX_ENOTFOUND)
          rc = 0;
        break;
      }
      json_decref(jobs[i]);
      jobs[i] = after;
      if (json_array_size(json_object_get(jobs[i], "ev_out")) == 0)
        break; /* another relay emptied it */
    }
    if (rc && !first)
      first = rc;
    else if (rc)
      dtx__err_clear();
  }
  return first;
}

int dtx__job_events_relay(dtx__exec_t *ex, const char *queue, int64_t limit,
                          int64_t age_ms, int64_t *count) {
  /* the oldest outboxes first, through the sparse index {ev_pend} */
  json_t *f = dtx__pack("{s:{s:I}}", "ev_pend", "$lte",
                        (json_int_t)(age_ms > 0 ? dtx__now_ms() - age_ms
                                                : INT64_MAX)),
         *found = NULL;
  if (f && queue)
    json_object_set_new(f, "queue", json_string(queue));
  json_t *sort = dtx__pack("{s:i}", "ev_pend", 1);
  dtx__kit_read_t q = {.coll = DTX_JOBS, .filter = f, .sort = sort,
                       .limit = limit, .what = "finding jobs with events"};
  int rc = f && sort ? dtx__kit_read(ex->st, &q, &found) : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  size_t n = json_array_size(found);
  json_t **docs = n ? calloc(n, sizeof *docs) : NULL;
  for (size_t i = 0; docs && i < n; i++)
    docs[i] = json_incref(json_array_get(found, i));
  if (rc == 0 && n)
    rc = docs ? dtx__job_relay(ex, docs, n, count) : DTX_ENOMEM;
  for (size_t i = 0; docs && i < n; i++)
    json_decref(docs[i]);
  free(docs);
  json_decref(found);
  return rc;
}

/* ---- reading ------------------------------------------------------------ */

int dtx_job_events_check(const char *queue, int64_t after, int64_t limit,
                         int64_t wait_ms) {
  int rc = dtx__check_ident("queue name", queue);
  if (rc)
    return rc;
  if (after < 0)
    return dtx__err(DTX_EINVAL, "cursor must be >= 0, got %lld",
                    (long long)after);
  if (limit < 0 || limit > DTX_JOB_EVENTS_LIMIT_MAX)
    return dtx__err(DTX_EINVAL, "limit must be from 1 to %d, got %lld",
                    DTX_JOB_EVENTS_LIMIT_MAX, (long long)limit);
  if (wait_ms < 0 || wait_ms > DTX_JOB_EVENTS_WAIT_MAX_MS)
    return dtx__err(DTX_EINVAL, "wait must be from 0 to %d ms, got %lld",
                    DTX_JOB_EVENTS_WAIT_MAX_MS, (long long)wait_ms);
  return 0;
}

/* The log of queue after cursor, relayed first; DTX_ESTATE when the
 * entry after the cursor was trimmed (J20: the log is dense, so a first
 * seq past after + 1 means it is gone). */
static int read_once(dtx__exec_t *ex, const char *queue, int64_t after,
                     int64_t limit, json_t **out) {
  json_t *found = NULL;
  int rc = dtx__job_events_relay(ex, queue, DTX__JOB_RELAY_READ, 0, NULL);
  if (rc)
    return rc;
  json_t *f = dtx__pack("{s:s,s:{s:I}}", "queue", queue, "seq", "$gt",
                        (json_int_t)after);
  json_t *sort = dtx__pack("{s:i}", "seq", 1);
  rc = f && sort ? dtx__kit_find_n(ex, DTX_JOB_EVENTS, f, sort, limit, &found)
                 : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  if (rc)
    return rc;
  int64_t first = dtx__int(json_array_get(found, 0), "seq");
  if (json_array_size(found) > 0 && first != after + 1) {
    json_decref(found);
    return dtx__err(DTX_ESTATE,
                    "queue %s: events after cursor %lld were trimmed; the "
                    "oldest kept is %lld (read from --after %lld to go on "
                    "past the gap)",
                    queue, (long long)after, (long long)first,
                    (long long)(first - 1));
  }
  json_t *res = json_array(), *d;
  size_t i;
  json_array_foreach(found, i, d) {
    json_t *ev = dtx__pack("{s:O}", "cursor", json_object_get(d, "seq"));
    if (!ev || !res || json_object_update(ev, d) < 0) {
      json_decref(ev);
      continue;
    }
    json_object_del(ev, "_id");
    json_object_del(ev, "seq");
    json_object_del(ev, "rseq");
    json_array_append_new(res, ev);
  }
  json_decref(found);
  if (!res || json_array_size(res) != i) {
    json_decref(res);
    return DTX_ENOMEM;
  }
  *out = res;
  return 0;
}

int dtx_job_events(dtx_store_t *st, const char *queue, int64_t after,
                   int64_t limit, int64_t wait_ms, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  int rc = dtx_job_events_check(queue, after, limit, wait_ms);
  if (rc == 0)
    rc = dtx__job_setup(st);
  int64_t until = dtx__mono_ms() + wait_ms;
  dtx__wait_t w = {.pause = 20, .cap = 250};
  while (rc == 0) {
    rc = read_once(&ex, queue, after, limit ? limit : 100, out);
    if (rc || json_array_size(*out) > 0 || dtx__mono_ms() >= until)
      break;
    json_decref(*out);
    *out = NULL;
    dtx__kit_wait(&w, until - dtx__mono_ms());
  }
  return dtx__call_end(&c, rc);
}

/* ---- recovery: relay what is left, trim --------------------------------- */

/* Trims queue q's log: its oldest entries, in seq order, while they are
 * older than cutoff or more than keep (> 0) behind the newest, never the
 * newest (J20: the next seq is the highest + 1).  One at a time, from the
 * oldest, stopping at the first that fails: what a pass leaves is always
 * a suffix, so the log never gets a hole. */
static int trim_queue(dtx__exec_t *ex, const char *q, int64_t cutoff,
                      int64_t keep, int64_t *budget, dtx__tally_t *t) {
  int64_t h = 0, gone = 0;
  int rc = highest(ex, q, &h);
  json_t *f = dtx__pack("{s:s}", "queue", q), *list = NULL, *d;
  json_t *sort = dtx__pack("{s:i}", "seq", 1);
  if (rc == 0)
    rc = f && sort ? dtx__kit_find_n(ex, DTX_JOB_EVENTS, f, sort, *budget,
                                     &list)
                   : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  size_t i;
  json_array_foreach(list, i, d) {
    int64_t seq = dtx__int(d, "seq"), n = 0;
    if (rc || seq >= h ||
        !(dtx__int(d, "at") < cutoff || (keep > 0 && seq <= h - keep)))
      break;
    rc = dtx__kit_delete(ex, "job.events.trim", DTX_JOB_EVENTS,
                         dtx__pack("{s:O}", "_id", json_object_get(d, "_id")),
                         &n);
    gone += n;
    (*budget)--;
  }
  json_decref(list);
  if (gone)
    dtx__tally_ran(t, "events_trimmed", gone);
  return rc;
}

/* Every queue's log trimmed (trim_queue), walking the queues in the
 * index {queue, seq}, at most TRIM_BATCH entries per pass. */
static int trim(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                dtx__tally_t *t) {
  int64_t keep_ms = o->events_keep_ms > 0 ? o->events_keep_ms
                                          : DEFAULT_KEEP_MS;
  int64_t cutoff = dtx__now_ms() - keep_ms, budget = TRIM_BATCH;
  char q[160] = "";
  int rc = 0;
  for (int guard = 0; rc == 0 && budget > 0 && guard < 1000; guard++) {
    json_t *qf = *q ? dtx__pack("{s:{s:s}}", "queue", "$gt", q)
                    : json_object();
    json_t *qsort = dtx__pack("{s:i,s:i}", "queue", 1, "seq", 1), *first = NULL;
    rc = qf && qsort ? dtx__kit_find_n(ex, DTX_JOB_EVENTS, qf, qsort, 1, &first)
                     : DTX_ENOMEM;
    json_decref(qf);
    json_decref(qsort);
    const char *next = dtx__str(json_array_get(first, 0), "queue");
    if (rc == 0 && next) {
      snprintf(q, sizeof q, "%s", next);
      rc = trim_queue(ex, q, cutoff, o->events_keep, &budget, t);
    }
    json_decref(first);
    if (!next)
      break;
  }
  return rc;
}

int dtx__job_events_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                            int busy, dtx__tally_t *t) {
  int64_t n = 0;
  int rc = busy == 2 ? 0 /* another relay of this process runs */
                     : dtx__job_events_relay(
                           ex, NULL,
                           busy ? DTX__JOB_RELAY_BUSY : DTX__JOB_RELAY_RECOVER,
                           busy ? DTX__JOB_RELAY_AGE_MS : 0, &n);
  if (n)
    dtx__tally_ran(t, "events_relayed", n);
  if (rc)
    return rc;
  return trim(ex, o, t);
}

/* ---- audit (audit.c calls it with the jobs it loaded) ------------------- */

/* Findings:
 *   event_gap    a queue's log with a hole in seq (J20), or a job's logged
 *                events with a hole in n
 *   event_lost   events a job counts as relayed (ev_sent) that are not in
 *                the log, nor trimmed (J21)
 *   event_count  ev_n != ev_sent + |ev_out|, or a log entry past ev_n (J19)
 *   event_state  a job's last event does not end in its state (J19) */
static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return a < b ? -1 : a > b;
}

int dtx__job_events_audit(dtx__audit_t *a, const json_t *jobs,
                          int64_t *nevents) {
  json_t *log = NULL, *e, *byjob = json_object(), *qs = json_object();
  const char *id;
  int rc = dtx__audit_load(a, DTX_JOB_EVENTS, &log);
  *nevents = (int64_t)json_object_size(log);
  /* per queue: {min, max, count}; per job: its log entries */
  json_object_foreach(log, id, e) {
    const char *q = dtx__str(e, "queue"), *job = dtx__str(e, "job");
    int64_t seq = dtx__int(e, "seq");
    if (!q || !job || !byjob || !qs)
      continue;
    json_t *s = json_object_get(qs, q);
    if (!s)
      json_object_set_new(qs, q, s = dtx__pack("{s:I,s:I,s:I}", "min",
                                                 (json_int_t)seq, "max",
                                                 (json_int_t)seq, "count",
                                                 (json_int_t)0));
    if (s) {
      if (seq < dtx__int(s, "min"))
        json_object_set_new(s, "min", json_integer(seq));
      if (seq > dtx__int(s, "max"))
        json_object_set_new(s, "max", json_integer(seq));
      json_object_set_new(s, "count", json_integer(dtx__int(s, "count") + 1));
    }
    json_t *l = json_object_get(byjob, job);
    if (!l)
      json_object_set_new(byjob, job, l = json_array());
    json_array_append(l, e);
  }
  json_t *s;
  json_object_foreach(qs, id, s) {
    if (dtx__int(s, "max") - dtx__int(s, "min") + 1 != dtx__int(s, "count"))
      dtx__audit_finding(a, "event_gap",
                         "queue %s: the event log holds %lld entries from "
                         "seq %lld to %lld: a hole (J20)",
                         id, (long long)dtx__int(s, "count"),
                         (long long)dtx__int(s, "min"),
                         (long long)dtx__int(s, "max"));
  }
  json_t *j;
  json_object_foreach((json_t *)jobs, id, j) {
    if (!json_is_integer(json_object_get(j, "ev_n")))
      continue; /* recorded before events existed */
    const json_t *out = json_object_get(j, "ev_out");
    int64_t n = dtx__int(j, "ev_n"), sent = dtx__int(j, "ev_sent");
    size_t k = json_array_size(out);
    if (n != sent + (int64_t)k) {
      dtx__audit_finding(a, "event_count",
                         "job %s: ev_n %lld, yet ev_sent %lld and %zu in its "
                         "outbox (J19)",
                         id, (long long)n, (long long)sent, k);
      continue;
    }
    json_t *all = json_object_get(byjob, id), *l = json_array(), *x;
    size_t m, i;
    /* this incarnation's (a job purged and added again under its id
     * starts again at n = 1: born, its created time, tells them apart) */
    json_array_foreach(all, i, x) if (dtx__int(x, "born") ==
                                      dtx__int(j, "created"))
        json_array_append(l, x);
    m = json_array_size(l);
    int64_t *ns = m ? calloc(m, sizeof *ns) : NULL;
    const json_t *last = k ? json_array_get(out, k - 1) : NULL;
    for (i = 0; ns && i < m; i++) {
      ns[i] = dtx__int(json_array_get(l, i), "n");
      if (!k && ns[i] == n)
        last = json_array_get(l, i);
    }
    if (ns)
      qsort(ns, m, sizeof *ns, cmp_i64);
    for (i = 1; ns && i < m; i++)
      if (ns[i] != ns[i - 1] + 1) {
        dtx__audit_finding(a, "event_gap",
                           "job %s: events %lld and %lld logged, none "
                           "between (J20)",
                           id, (long long)ns[i - 1], (long long)ns[i]);
        break;
      }
    const json_t *qstat = json_object_get(qs, dtx__str(j, "queue")
                                                  ? dtx__str(j, "queue")
                                                  : "");
    int trimmed = qstat && dtx__int(qstat, "min") > 1;
    if (ns && m && ns[m - 1] > n)
      dtx__audit_finding(a, "event_count",
                         "job %s: event %lld is logged, yet the job counts "
                         "%lld (J19)",
                         id, (long long)ns[m - 1], (long long)n);
    else if ((m && ns && ns[m - 1] < sent) || (!m && sent > 0 && !trimmed))
      dtx__audit_finding(a, "event_lost",
                         "job %s: %lld events relayed, the log holds %s%lld "
                         "(J21)",
                         id, (long long)sent, m ? "up to " : "",
                         (long long)(m && ns ? ns[m - 1] : 0));
    if (last && !dtx__str_is(last, "to", dtx__str(j, "state") ? dtx__str(j, "state") : ""))
      dtx__audit_finding(a, "event_state",
                         "job %s is %s, yet its last event (%lld, %s) ends "
                         "in %s (J19)",
                         id, dtx__str(j, "state") ? dtx__str(j, "state") : "?",
                         (long long)n, dtx__str(last, "event") ? dtx__str(last, "event") : "?",
                         dtx__str(last, "to") ? dtx__str(last, "to") : "?");
    free(ns);
    json_decref(l);
  }
  json_decref(byjob);
  json_decref(qs);
  json_decref(log);
  return rc;
}
