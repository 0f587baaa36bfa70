/* audit.c -- the job queue's part of `doctx audit`: every job document's
 * shape and its invariants (job.c J1-J6), and every effect marker.
 *
 * Findings:
 *   job_shape      a field missing or of the wrong type, an unknown state,
 *                  priority out of range, attempts past max_attempts
 *   stuck_running  a running job whose lease lapsed (recovery takes it
 *                  over; after `doctx recover` there must be none)
 *   unique_live    unique_live present on a terminal job, or missing on a
 *                  live one with a unique key (J4)
 *   dead_attempts  a dead job whose attempts are below max_attempts (J3)
 *   cancel_ignored a job with a cancel requested that is not running or
 *                  canceled (J17: written past the rules)
 *   job_state      a live job with no attempts left (J7; the rest of J7
 *                  is in the validator, so bad_shape reports it)
 *   orphan_marker  an effect marker whose job is missing, does not list
 *                  the collection in fx_colls, or has had its markers
 *                  cleared (a late duplicate could then apply again)
 *   unpinned_marker a marker on a document its effect is not pinned to
 *                  (a void one on a document it never moved away from):
 *                  effect.c F1
 *   effect_twice   two real markers of one (job, key), anywhere
 *   audit_error    a collection whose markers could not be read
 *   event_gap, event_lost, event_count, event_state: the event log and
 *                  the jobs' outboxes (events.c, J19-J21)
 *   flow_orphan    a live child whose parent is missing, or a child its
 *                  parent does not list (flow.c J14)
 *   flow_link      a parent listing a child whose parent is another
 *   flow_early     a parent that ran while a child of it had not
 *                  succeeded (J13)
 *   flow_stuck     a held child, or a waiting parent its children have
 *                  decided, past a grace of 2 s (none with --settled):
 *                  recovery moves them (J15)
 * Markers are looked for wherever they can be: every collection carrying
 * the marker index and every one a job lists or pins.  A name there that
 * no effect may use is a job_shape finding, and the audit goes on.
 * With DTX_AUDIT_SETTLED every running job is a finding too.
 *
 * The jobs are read before and after the targets: a job that appeared or
 * changed meanwhile is judged by its later version (it pinned before it
 * applied), so a live queue gives no false orphan. */
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

static const char *const states[] = {DTX_JOB_READY,     DTX_JOB_DELAYED,
                                     DTX_JOB_RUNNING,   DTX_JOB_SUCCEEDED,
                                     DTX_JOB_DEAD,      DTX_JOB_CANCELED,
                                     DTX_JOB_WAITING,   DTX_JOB_HELD,
                                     NULL};

static int known_state(const char *s) {
  for (size_t i = 0; s && states[i]; i++)
    if (strcmp(states[i], s) == 0)
      return 1;
  return 0;
}

static void check_job(dtx__audit_t *a, const char *id, const json_t *j,
                      int64_t now, int64_t *running) {
  static const char *const ints[] = {"priority", "rank", "run_at",
                                     "attempts", "max_attempts", "epoch",
                                     "created", "updated", NULL};
  const char *st = dtx__str(j, "state");
  if (!known_state(st) || !dtx__str(j, "queue") || !dtx__str(j, "type")) {
    dtx__audit_finding(a, "job_shape", "job %s: state, queue or type "
                       "missing or not one of the known values", id);
    return;
  }
  for (size_t i = 0; ints[i]; i++)
    if (!json_is_integer(json_object_get(j, ints[i]))) {
      dtx__audit_finding(a, "job_shape", "job %s: %s is not an integer", id,
                         ints[i]);
      return;
    }
  int64_t pri = dtx__int(j, "priority"), att = dtx__int(j, "attempts"),
          max = dtx__int(j, "max_attempts");
  if (pri < DTX_JOB_PRIORITY_MIN || pri > DTX_JOB_PRIORITY_MAX ||
      dtx__int(j, "rank") != -pri || max < 1 || att < 0 || att > max)
    dtx__audit_finding(a, "job_shape", "job %s: priority %lld, rank %lld, "
                       "attempts %lld of %lld", id, (long long)pri,
                       (long long)dtx__int(j, "rank"), (long long)att,
                       (long long)max);
  const json_t *fx = json_object_get(j, "fx_colls");
  if (fx && !json_is_array(fx))
    dtx__audit_finding(a, "job_shape", "job %s: fx_colls is not an array", id);
  int terminal = dtx__job_terminal(j);
  int has_live = json_object_get(j, "unique_live") != NULL;
  int has_key = dtx__str(j, "unique_key") != NULL;
  /* J18: a terminal job keeps its key while it has a window's end */
  int has_until = json_object_get(j, "unique_until") != NULL;
  if (has_live != (has_key && (!terminal || has_until)) ||
      (has_until && (!terminal || !has_live)))
    dtx__audit_finding(a, "unique_live", "job %s is %s %s unique_live%s "
                       "(J4, J18)", id, st, has_live ? "but holds" : "without",
                       has_until ? " and has a unique window" : "");
  if (!terminal && att >= max)
    dtx__audit_finding(a, "job_state", "job %s is %s after %lld of %lld "
                       "attempts: a live job has attempts left (J7)", id, st,
                       (long long)att, (long long)max);
  /* J17: a recorded cancel ends the attempt canceled; only a write past
   * the rules leaves one on a job that succeeded, failed or runs again. */
  if (dtx__job_cancel_requested(j) && strcmp(st, DTX_JOB_RUNNING) != 0 &&
      strcmp(st, DTX_JOB_CANCELED) != 0)
    dtx__audit_finding(a, "cancel_ignored", "job %s is %s although a "
                       "cancel of it was requested (J17)", id, st);
  if (strcmp(st, DTX_JOB_DEAD) == 0 && att < max &&
      !json_object_get(j, "failed_child")) /* its child failed it: flow.c */
    dtx__audit_finding(a, "dead_attempts", "job %s is dead after %lld of "
                       "%lld attempts (J3)", id, (long long)att,
                       (long long)max);
  if (strcmp(st, DTX_JOB_RUNNING) == 0) {
    (*running)++;
    if (dtx__int(j, "lease_until") <= now)
      dtx__audit_finding(a, "stuck_running", "job %s is running but the "
                         "lease of %s lapsed %lld ms ago: run doctx recover",
                         id, dtx__str(j, "owner") ? dtx__str(j, "owner") : "?",
                         (long long)dtx__sub_sat(
                             now, dtx__int(j, "lease_until")));
    else if (a->flags & DTX_AUDIT_SETTLED)
      dtx__audit_finding(a, "unsettled", "job %s is still running (held by "
                         "%s)", id, dtx__str(j, "owner") ? dtx__str(j, "owner")
                                                         : "?");
  }
}

static int lists_value(const json_t *arr, const json_t *x) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) if (json_equal(v, x)) return 1;
  return 0;
}

/* A store error the audit cannot judge past (the store is failing, not a
 * document): it ends the audit with that error. */
static int store_error(int rc) {
  return dtx__transient(rc) || rc == DTX_ENOMEM;
}

/* Adds coll to colls when it is a collection an effect may use; reports
 * the job naming it otherwise (a name the validator would refuse, or a
 * pattern's own collection), and skips it: one bad job never stops the
 * audit (docs/jobs.md, "Audit"). */
static void want_coll(dtx__audit_t *a, json_t *colls, const char *jid,
                      const char *where, const json_t *c) {
  const char *name = json_string_value(c);
  if (name && dtx__check_user_coll("effect", name) == 0) {
    json_object_set(colls, name, json_true());
  } else {
    char *t = json_dumps(c, JSON_ENCODE_ANY | JSON_COMPACT);
    dtx__audit_finding(a, "job_shape", "job %s: %s names %.120s, which is "
                       "not a collection an effect may write (%s)", jid,
                       where, t ? t : "?",
                       name ? dtx_errdetail() : "not a string");
    free(t);
  }
  dtx__err_clear();
}

/* The collections and pins a job names, checked, into colls. */
static void job_colls(dtx__audit_t *a, const char *jid, const json_t *j,
                      json_t *colls) {
  size_t i;
  json_t *c, *pin;
  const char *k;
  json_array_foreach(json_object_get(j, "fx_colls"), i, c)
      want_coll(a, colls, jid, "fx_colls", c);
  const json_t *pins = json_object_get(j, DTX_JOB_PINS);
  if (pins && !json_is_object(pins)) {
    dtx__audit_finding(a, "job_shape", "job %s: %s is not an object", jid,
                       DTX_JOB_PINS);
    return;
  }
  json_object_foreach((json_t *)pins, k, pin) {
    const json_t *v = json_object_get(pin, "voided");
    if (!json_is_object(pin) || !dtx__str(pin, "coll") ||
        !json_object_get(pin, "id") || (v && !json_is_array(v))) {
      dtx__audit_finding(a, "job_shape", "job %s: the pin of effect %s is "
                         "not {coll, id, voided: [...]}", jid, k);
      continue;
    }
    want_coll(a, colls, jid, "a pin", json_object_get(pin, "coll"));
  }
}

/* Every collection carrying the marker index, which the first effect on
 * a collection creates (effect.c): markers are found there even once no
 * job lists the collection any more (its fx_colls was emptied). */
static int indexed_colls(dtx__audit_t *a, json_t *colls) {
  json_t *names = NULL, *n;
  size_t i;
  int rc = dtx__kit_read(a->st, &(dtx__kit_read_t){.kind = DTX__KIT_COLLS,
                         .what = "listing collections"}, &names);
  json_array_foreach(names, i, n) {
    const char *coll = json_string_value(n);
    json_t *ix = NULL, *x;
    size_t k;
    rc = coll ? dtx__kit_read(a->st, &(dtx__kit_read_t){
                                  .kind = DTX__KIT_INDEXES, .coll = coll},
                              &ix)
              : 0;
    if (rc)
      break;
    json_array_foreach(ix, k, x) {
      const json_t *key = json_object_get(x, "key");
      if (json_object_size(key) == 1 &&
          json_object_get(key, DTX_JOB_FX ".job"))
        json_object_set(colls, coll, json_true());
    }
    json_decref(ix);
  }
  json_decref(names);
  return rc;
}

/* One marker m of document d of coll, against job, the job it names
 * (NULL: none).  seen records the effects' real markers across every
 * collection. */
static void check_marker(dtx__audit_t *a, const json_t *job,
                         const char *coll, const json_t *d, const json_t *m,
                         json_t *seen) {
  const char *jid = dtx__str(m, "job"), *key = dtx__str(m, "key");
  const json_t *did = json_object_get(d, "_id");
  int is_void = json_is_true(json_object_get(m, "void"));
  char *ds = json_dumps(did, JSON_ENCODE_ANY | JSON_COMPACT);
  const char *dn = ds ? ds : "?";
  if (!job) {
    dtx__audit_finding(a, "orphan_marker", "%s %s holds a marker of job %s, "
                       "which does not exist", coll, dn, jid ? jid : "?");
  } else if (!dtx__lists(job, "fx_colls", coll)) {
    dtx__audit_finding(a, "orphan_marker", "%s %s holds a marker of job %s, "
                       "which does not list %s in fx_colls%s", coll, dn, jid,
                       coll,
                       json_is_true(json_object_get(job, "fx_cleared"))
                           ? " (its markers were cleared)"
                           : "");
  } else if (key && json_object_get(job, DTX_JOB_PINS)) {
    /* F1 (effect.c): an effect's update lands only on its pinned
     * document; a void marker only on one it moved away from. */
    const json_t *pin = dtx__job_pin(job, key);
    const json_t *pid = json_object_get(pin, "id");
    int pinned = pin && dtx__str_is(pin, "coll", coll) && json_equal(pid, did);
    int voided = pin && dtx__str_is(pin, "coll", coll) &&
                 lists_value(json_object_get(pin, "voided"), did);
    if (!pin || (!pinned && !(is_void && voided))) {
      char *ps = pid ? json_dumps(pid, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
      dtx__audit_finding(a, "unpinned_marker", "%s %s holds a%s marker of "
                         "effect %s of job %s, which is pinned to %s %s: an "
                         "effect lands on its pinned document only (J5)",
                         coll, dn, is_void ? " void" : "", key, jid,
                         pin ? dtx__str(pin, "coll") : "no", ps ? ps : "document");
      free(ps);
    }
  }
  if (!is_void && jid && key) {
    char ek[300];
    snprintf(ek, sizeof ek, "%s\n%s", jid, key);
    json_t *n = json_object_get(seen, ek);
    if (n)
      dtx__audit_finding(a, "effect_twice", "effect %s of job %s applied to "
                         "%s and to %s %s: at most once per (job, key) (J5)",
                         key, jid, json_string_value(n), coll, dn);
    else {
      char where[300];
      snprintf(where, sizeof where, "%s %s", coll, dn);
      json_object_set_new(seen, ek, json_string(where));
    }
  }
  free(ds);
}

/* A read of every job without the shape checks (dtx__audit_load made
 * them on the first read): *map _id -> job. */
static int load_again(dtx__audit_t *a, json_t **map) {
  json_t *docs = NULL, *d;
  size_t i;
  *map = NULL;
  int rc = dtx__kit_read(a->st, &(dtx__kit_read_t){.coll = DTX_JOBS}, &docs);
  if (rc)
    return rc;
  *map = json_object();
  json_array_foreach(docs, i, d) {
    const char *id = json_string_value(json_object_get(d, "_id"));
    if (id && *map)
      json_object_set(*map, id, d);
  }
  json_decref(docs);
  return *map ? 0 : DTX_ENOMEM;
}

/* Every marker wherever one can be -- the collections carrying the marker
 * index and those any job lists or pins -- judged against the jobs as
 * read AFTER the scan, so a marker that appeared meanwhile meets a job
 * that has its pin (the fence step precedes every apply).  A collection
 * that cannot be read for a reason of its own is a finding, and the
 * audit goes on. */
static int check_markers(dtx__audit_t *a, const json_t *jobs,
                         int64_t *nmarkers) {
  json_t *colls = json_object(), *seen = json_object(), *found = json_array();
  json_t *later = NULL, *j;
  const char *id;
  size_t i;
  json_object_foreach((json_t *)jobs, id, j) job_colls(a, id, j, colls);
  int rc = colls && seen && found ? indexed_colls(a, colls) : DTX_ENOMEM;
  const char *coll;
  json_t *unused;
  json_object_foreach(colls, coll, unused) {
    if (rc)
      break;
    json_t *f = json_pack("{s:{s:b}}", DTX_JOB_FX ".0", "$exists", 1);
    json_t *docs = NULL;
    rc = f ? dtx__kit_read(a->st, &(dtx__kit_read_t){.coll = coll,
                                                     .filter = f},
                           &docs)
           : DTX_ENOMEM;
    json_decref(f);
    if (rc && !store_error(rc)) {
      dtx__audit_finding(a, "audit_error", "the markers of %s could not be "
                         "read: %s", coll, dtx_errdetail());
      rc = 0;
      continue;
    }
    if (rc == 0)
      json_array_append_new(found, json_pack("{s:s,s:o}", "coll", coll,
                                             "docs", docs));
  }
  if (rc == 0)
    rc = load_again(a, &later);
  json_t *g, *d;
  json_array_foreach(found, i, g) {
    if (rc)
      break;
    coll = dtx__str(g, "coll");
    size_t k;
    json_array_foreach(json_object_get(g, "docs"), k, d) {
      size_t q;
      json_t *m;
      const json_t *fx = json_object_get(d, DTX_JOB_FX);
      if (!json_is_array(fx)) {
        char *ds = json_dumps(json_object_get(d, "_id"),
                              JSON_ENCODE_ANY | JSON_COMPACT);
        dtx__audit_finding(a, "orphan_marker", "%s %s: %s is not an array "
                           "of markers", coll, ds ? ds : "?", DTX_JOB_FX);
        free(ds);
        continue;
      }
      json_array_foreach(fx, q, m) {
        (*nmarkers)++;
        /* The later read decides; a job gone since the first read (a
         * purge) is judged as the first read saw it. */
        const char *jid = dtx__str(m, "job");
        const json_t *job = jid ? json_object_get(later, jid) : NULL;
        if (jid && !job)
          job = json_object_get(jobs, jid);
        check_marker(a, job, coll, d, m, seen);
      }
    }
  }
  json_decref(colls);
  json_decref(seen);
  json_decref(found);
  json_decref(later);
  return rc;
}

/* J12: every running job of a limited queue runs under a slot recording
 * it at its epoch.  The jobs were read before the settings, and a slot is
 * freed only after its job left running at that epoch, so a job running
 * in the first read, missing from the slots in the second and still
 * running at the same epoch when read again had its slot taken away by
 * hand (--bypass-validation) -- or was claimed before the limit was set:
 * either way more than max_running may run. */
static int check_slots(dtx__audit_t *a, const json_t *jobs, const json_t *qs) {
  const char *q, *id;
  json_t *doc, *j;
  json_object_foreach((json_t *)qs, q, doc) {
    int64_t n = dtx__int(doc, "max_running");
    if (n <= 0)
      continue;
    json_object_foreach((json_t *)jobs, id, j) {
      if (!dtx__state_is(j, DTX_JOB_RUNNING) || !dtx__str_is(j, "queue", q))
        continue;
      int64_t e = dtx__int(j, "epoch");
      size_t i;
      const json_t *sl;
      int held = 0;
      json_array_foreach(json_object_get(doc, "slots"), i, sl) {
        if (dtx__str_is(sl, "job", id) && dtx__int(sl, "epoch") == e)
          held = 1;
      }
      if (held)
        continue;
      json_t *f = json_pack("{s:s}", "_id", id), *now = NULL;
      int rc = f ? dtx__kit_read(a->st, &(dtx__kit_read_t){.coll = DTX_JOBS,
                                                          .filter = f},
                                 &now)
                 : DTX_ENOMEM;
      json_decref(f);
      if (rc)
        return rc;
      const json_t *again = json_array_get(now, 0);
      if (dtx__state_is(again, DTX_JOB_RUNNING) &&
          dtx__int(again, "epoch") == e)
        dtx__audit_finding(a, "job_slot", "job %s of queue %s runs at epoch "
                           "%lld under no running slot (max_running %lld): "
                           "a slot freed by hand, or a job claimed before "
                           "the limit was set", id, q, (long long)e,
                           (long long)n);
      json_decref(now);
    }
  }
  return 0;
}

int dtx__job_audit(dtx__audit_t *a) {
  json_t *jobs = NULL, *j;
  const char *id;
  int64_t now = dtx__now_ms(), running = 0, nmarkers = 0;
  /* The schedules before the jobs (sched_audit.c: a tick's job is in
   * before its schedule moves past it). */
  json_t *scheds = NULL;
  int rc = dtx__audit_load(a, DTX_JOB_SCHEDULES, &scheds);
  if (rc == 0)
    rc = dtx__audit_load(a, DTX_JOBS, &jobs);
  json_t *counts = json_object();
  if (rc == 0) {
    json_object_foreach(jobs, id, j) {
      check_job(a, id, j, now, &running);
      const char *s = dtx__str(j, "state");
      json_t *n = json_object_get(counts, s ? s : "?");
      json_object_set_new(counts, s ? s : "?",
                          json_integer(n ? json_integer_value(n) + 1 : 1));
    }
    dtx__job_flow_audit(a, jobs, now);
    rc = check_markers(a, jobs, &nmarkers);
    if (rc == 0)
      rc = dtx__job_sched_audit(a, scheds, jobs); /* sched_audit.c */
    DTX_ASSERT(running <= (int64_t)json_object_size(jobs), "job.audit");
  }
  int64_t nevents = 0; /* the event log against the jobs (events.c) */
  if (rc == 0 && (rc = dtx__job_events_audit(a, jobs, &nevents)) == 0)
    dtx__audit_set(a, "events", json_integer((json_int_t)nevents));
  if (rc == 0) {
    dtx__audit_set(a, "jobs", json_integer((json_int_t)json_object_size(jobs)));
    dtx__audit_set(a, "states", json_incref(counts));
    dtx__audit_set(a, "markers", json_integer((json_int_t)nmarkers));
    dtx__audit_unsettled(a, running);
    dtx__audit_summary(a, "%zu jobs, %lld running, %lld effect markers",
                       json_object_size(jobs), (long long)running,
                       (long long)nmarkers);
  }
  json_decref(counts);
  if (rc == 0) {
    /* A queue's settings (queues.c): a document forced past its rules
     * (--bypass-validation) is reported by its validator's check; read
     * after the jobs, for check_slots. */
    json_t *qs = NULL;
    rc = dtx__audit_load(a, DTX_JOB_QUEUES, &qs);
    if (rc == 0)
      rc = check_slots(a, jobs, qs);
    json_decref(qs);
  }
  json_decref(jobs);
  json_decref(scheds);
  return rc;
}
