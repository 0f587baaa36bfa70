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
 *   job_state      a live job with no attempts left (J7; the rest of J7
 *                  is in the validator, so bad_shape reports it)
 *   orphan_marker  an effect marker whose job is missing, does not list
 *                  the collection in fx_colls, or has had its markers
 *                  cleared (a late duplicate could then apply again)
 * With DTX_AUDIT_SETTLED every running job is a finding too.
 *
 * The jobs are read before and after the targets: a job that appeared or
 * changed meanwhile is judged by its later version, so a live queue gives
 * no false orphan. */
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/err.h"

static const char *const states[] = {DTX_JOB_READY,     DTX_JOB_DELAYED,
                                     DTX_JOB_RUNNING,   DTX_JOB_SUCCEEDED,
                                     DTX_JOB_DEAD,      DTX_JOB_CANCELED,
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
  if (has_live != (!terminal && has_key))
    dtx__audit_finding(a, "unique_live", "job %s is %s %s unique_live (J4)",
                       id, st, has_live ? "but holds" : "without");
  if (!terminal && att >= max)
    dtx__audit_finding(a, "job_state", "job %s is %s after %lld of %lld "
                       "attempts: a live job has attempts left (J7)", id, st,
                       (long long)att, (long long)max);
  if (strcmp(st, DTX_JOB_DEAD) == 0 && att < max)
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

static int lists(const json_t *arr, const char *s) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) if (json_is_string(v) &&
                                    strcmp(json_string_value(v), s) == 0)
      return 1;
  return 0;
}

/* Every marker in the collections any job names. */
static int check_markers(dtx__audit_t *a, const json_t *jobs,
                         const json_t *later, int64_t *nmarkers) {
  json_t *colls = json_object();
  const char *id;
  json_t *j, *c;
  size_t i;
  json_object_foreach((json_t *)later, id, j)
      json_array_foreach(json_object_get(j, "fx_colls"), i, c) if (
          json_is_string(c)) json_object_set(colls, json_string_value(c),
                                             json_true());
  json_object_foreach((json_t *)jobs, id, j)
      json_array_foreach(json_object_get(j, "fx_colls"), i, c) if (
          json_is_string(c)) json_object_set(colls, json_string_value(c),
                                             json_true());
  const char *coll;
  json_t *unused;
  int rc = 0;
  json_object_foreach(colls, coll, unused) {
    json_t *f = json_pack("{s:{s:b}}", DTX_JOB_FX ".0", "$exists", 1);
    json_t *docs = NULL, *d;
    dtx__retry_t r = {0};
    do
      rc = f ? dtx_store_find(a->st, coll, f, NULL, &docs) : DTX_ENOMEM;
    while (dtx__retry_again(&r, &rc, coll));
    json_decref(f);
    if (rc)
      break;
    json_array_foreach(docs, i, d) {
      size_t k;
      json_t *m;
      json_array_foreach(json_object_get(d, DTX_JOB_FX), k, m) {
        const char *jid = dtx__str(m, "job");
        (*nmarkers)++;
        /* the later read decides: it saw every job the markers name */
        const json_t *job = jid ? json_object_get(later, jid) : NULL;
        char *did = json_dumps(json_object_get(d, "_id"), JSON_ENCODE_ANY);
        if (!job)
          dtx__audit_finding(a, "orphan_marker", "%s %s holds a marker of "
                             "job %s, which does not exist", coll,
                             did ? did : "?", jid ? jid : "?");
        else if (!lists(json_object_get(job, "fx_colls"), coll))
          dtx__audit_finding(a, "orphan_marker", "%s %s holds a marker of "
                             "job %s, which does not list %s in fx_colls%s",
                             coll, did ? did : "?", jid, coll,
                             json_is_true(json_object_get(job, "fx_cleared"))
                                 ? " (its markers were cleared)"
                                 : "");
        free(did);
      }
    }
    json_decref(docs);
  }
  json_decref(colls);
  return rc;
}

int dtx__job_audit(dtx__audit_t *a) {
  json_t *jobs = NULL, *later = NULL, *j;
  const char *id;
  int64_t now = dtx__now_ms(), running = 0, nmarkers = 0;
  int rc = dtx__audit_load(a, DTX_JOBS, &jobs);
  if (rc == 0)
    rc = dtx__audit_load(a, DTX_JOBS, &later);
  json_t *counts = json_object();
  if (rc == 0) {
    json_object_foreach(jobs, id, j) {
      check_job(a, id, j, now, &running);
      const char *s = dtx__str(j, "state");
      json_t *n = json_object_get(counts, s ? s : "?");
      json_object_set_new(counts, s ? s : "?",
                          json_integer(n ? json_integer_value(n) + 1 : 1));
    }
    rc = check_markers(a, jobs, later, &nmarkers);
  }
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
  json_decref(jobs);
  json_decref(later);
  return rc;
}
