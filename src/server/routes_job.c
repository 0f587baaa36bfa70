/* routes_job.c -- doctxd's job-queue routes (docs/server.md, "Jobs";
 * docs/jobs.md).  Each calls the library as `doctx job ...` does
 * (src/cli/cmd_job.c): add, list, stats, show, cancel and retry, the
 * remote worker's steps -- claim with a lease, heartbeat, complete, fail
 * (dtx_job_claim, dtx_job_heartbeat, dtx_job_complete, dtx_job_fail_at:
 * the runner's own steps, fenced by the claim's epoch) -- and effects
 * (dtx_job_effect_at_ex).  The library's checks run before anything is
 * written; a stale epoch is the library's DTX_ESTALE, 409.  A worker
 * that loses a reply may send the same complete or fail again: the
 * library recognises it and answers the job again (docs/jobs.md).
 * Every served event is counted in doctxd_jobs_total{queue,event}
 * (metrics.c). */
#include "server/server.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

/* An int field of the body saturated into a C int: a value past int's
 * range reaches the library's check as INT_MIN or INT_MAX, which it
 * refuses by name, never as a wrapped value it would accept. */
static int arg_cint(dtx__srv_ctx_t *c, const char *name, int dflt) {
  int64_t v = dtx__srv_arg_int(c, name, dflt);
  return v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : (int)v;
}

/* An int field past int is refused naming the value sent, as the CLI
 * refuses the option (tests/cli/bad_input.rows: --priority 99999999999),
 * not judged as the clamped one the library would see.  0, or answered. */
static int check_cint(dtx__srv_ctx_t *c, const char *name) {
  json_t *v = dtx__srv_arg(c, name);
  int64_t x = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
  if (x >= INT_MIN && x <= INT_MAX)
    return 0;
  dtx__srv_bad(c, DTX_EINVAL, "%s %lld is out of range (%d..%d)", name,
               (long long)x, INT_MIN, INT_MAX);
  return -1;
}

/* The required "epoch" of a worker's step: 0, or answered. */
static int arg_epoch(dtx__srv_ctx_t *c, int64_t *epoch) {
  if (!dtx__srv_arg(c, "epoch")) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'epoch' is required (the claim's)");
    return -1;
  }
  *epoch = dtx__srv_arg_int(c, "epoch", 0);
  return 0;
}

/* The job's queue, for the metrics of an event on a job named by id. */
static void count(const json_t *job, const char *event, uint64_t n) {
  const char *q = json_string_value(json_object_get(job, "queue"));
  if (q)
    dtx__srv_metrics_job(q, event, n);
}

void dtx__srv_h_job_add(dtx__srv_ctx_t *c) {
  json_t *job = NULL;
  int added = 0, rc;
  dtx_job_req_t req = {.queue = c->param[0],
                       .type = dtx__srv_arg_str(c, "type"),
                       .payload = dtx__srv_arg(c, "payload"),
                       .id = dtx__srv_arg_str(c, "id"),
                       .priority = arg_cint(c, "priority", 0),
                       .delay_ms = dtx__srv_arg_int(c, "delay_ms", 0),
                       .max_attempts = arg_cint(c, "max_attempts", 0),
                       .backoff_ms = dtx__srv_arg_int(c, "backoff_ms", 0),
                       .unique_key = dtx__srv_arg_str(c, "unique_key"),
                       .unique_for_ms = dtx__srv_arg_int(c, "unique_for_ms", 0)};
  if (!req.type) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'type' is required");
    return;
  }
  if (check_cint(c, "priority") || check_cint(c, "max_attempts"))
    return;
  /* 0 is the library's "the default" for these; a body that sends one
   * asks for that many, and the CLI takes only >= 1 too. */
  if ((dtx__srv_arg(c, "max_attempts") && req.max_attempts < 1) ||
      (dtx__srv_arg(c, "backoff_ms") && req.backoff_ms < 1)) {
    dtx__srv_bad(c, DTX_EINVAL, "max_attempts and backoff_ms must be >= 1");
    return;
  }
  /* Flows (docs/jobs.md, "Flows"): parent and the parent's policy. */
  dtx_job_flow_t flow = {.parent = dtx__srv_arg_str(c, "parent"),
                         .on_child_fail = dtx__srv_arg_str(c, "on_child_fail")};
  if ((rc = dtx_job_flow_check(&req, &flow)) ||
      (rc = dtx_job_add_flow(c->d->st, &req, &flow, &job, &added))) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  if (added)
    count(job, "added", 1);
  dtx__srv_json(c, added ? 201 : 200, job);
}

void dtx__srv_h_job_claim(dtx__srv_ctx_t *c) {
  json_t *jobs = NULL;
  int n = arg_cint(c, "n", 1);
  int64_t lease = dtx__srv_arg_int(c, "lease_ms", 0);
  const char *owner = dtx__srv_arg_str(c, "owner");
  if (n < 1) { /* 0 is the library's "one": the body says how many */
    dtx__srv_bad(c, DTX_EINVAL, "n must be from 1 to 256 jobs, got %d", n);
    return;
  }
  int rc = dtx_job_claim_check(c->param[0], n, lease, owner);
  if (!rc)
    rc = dtx_job_claim(c->d->st, c->param[0], n, lease, owner, &jobs);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  if (json_array_size(jobs))
    dtx__srv_metrics_job(c->param[0], "claimed", json_array_size(jobs));
  dtx__srv_json(c, 200, json_pack("{s:o}", "jobs", jobs));
}

void dtx__srv_h_job_stats(dtx__srv_ctx_t *c) {
  json_t *s = NULL;
  int rc = dtx_job_stats(c->d->st, c->param[0], &s);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, s);
}

void dtx__srv_h_job_list(dtx__srv_ctx_t *c) {
  char prefix[320];
  dtx__srv_list_t l;
  json_t *items = NULL;
  /* The cursor binds the queue and the state it pages. */
  snprintf(prefix, sizeof prefix, "jobs?queue=%s&", c->param[0]);
  if (dtx__srv_list_page(c, &l, prefix, "state", 64))
    return;
  int rc = dtx_job_list(c->d->st, c->param[0], l.filter, &l.page, &items);
  dtx__srv_list_answer(c, &l, "jobs", rc, items);
}

void dtx__srv_h_job_get(dtx__srv_ctx_t *c) {
  json_t *job = NULL;
  int rc = dtx_job_get(c->d->st, c->param[0], &job);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, job);
}

void dtx__srv_h_job_heartbeat(dtx__srv_ctx_t *c) {
  int64_t epoch, lease = dtx__srv_arg_int(c, "lease_ms", 0);
  json_t *job = NULL;
  if (arg_epoch(c, &epoch))
    return;
  int rc = dtx_job_heartbeat_check(c->param[0], epoch, lease);
  if (!rc)
    rc = dtx_job_heartbeat(c->d->st, c->param[0], epoch, lease, &job);
  if (rc) {
    /* STALE: stop working on it, 409; STATE with the job: canceled (a
     * cancel was requested), stop and end the attempt. */
    json_t *extra =
        rc == DTX_ESTATE && job ? json_pack("{s:O}", "job", job) : NULL;
    dtx__srv_fail(c, rc, extra);
    json_decref(job);
  } else
    dtx__srv_json(c, 200, job);
}

/* complete and fail: the attempt's one outcome, fenced by epoch. */
static void end(dtx__srv_ctx_t *c, int ok) {
  int64_t epoch;
  json_t *job = NULL, *result = ok ? dtx__srv_arg(c, "result") : NULL;
  const char *error = ok ? NULL : dtx__srv_arg_str(c, "error");
  if (arg_epoch(c, &epoch))
    return;
  int rc = dtx_job_end_check(c->param[0], epoch, result, error);
  if (!rc)
    rc = ok ? dtx_job_complete(c->d->st, c->param[0], epoch, result, &job)
            : dtx_job_fail_at(c->d->st, c->param[0], epoch, error, &job);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  count(job, ok ? "completed" : "failed", 1);
  dtx__srv_json(c, 200, job);
}

void dtx__srv_h_job_complete(dtx__srv_ctx_t *c) { end(c, 1); }
void dtx__srv_h_job_fail(dtx__srv_ctx_t *c) { end(c, 0); }

/* retry and cancel: a state change by hand; the job as it stands comes
 * with a refusal (409 STATE), as `doctx job cancel` prints it. */
static void by_hand(dtx__srv_ctx_t *c, int retry) {
  json_t *job = NULL;
  int rc = retry ? dtx_job_retry(c->d->st, c->param[0], &job)
                 : dtx_job_cancel(c->d->st, c->param[0], &job);
  if (rc) {
    json_t *extra =
        job && rc != DTX_ENOTFOUND ? json_pack("{s:O}", "job", job) : NULL;
    dtx__srv_fail(c, rc, extra);
    json_decref(job);
    return;
  }
  count(job, retry ? "retried" : "canceled", 1);
  dtx__srv_json(c, 200, job);
}

void dtx__srv_h_job_retry(dtx__srv_ctx_t *c) { by_hand(c, 1); }
void dtx__srv_h_job_cancel(dtx__srv_ctx_t *c) { by_hand(c, 0); }

void dtx__srv_h_job_effect(dtx__srv_ctx_t *c) {
  int64_t epoch;
  int applied = 0;
  dtx_job_effect_opts_t eo = {0};
  const char *key = dtx__srv_arg_str(c, "key");
  const char *coll = dtx__srv_arg_str(c, "coll");
  json_t *filter = dtx__srv_arg(c, "filter"),
         *update = dtx__srv_arg(c, "update");
  if (arg_epoch(c, &epoch) ||
      dtx__srv_arg_fence(c, &eo.fence_name, &eo.fence_token))
    return;
  if (!key || !coll || !filter || !update) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "fields 'key', 'coll', 'filter' and 'update' are required");
    return;
  }
  int rc =
      dtx_job_effect_check(c->param[0], epoch, key, coll, filter, update, &eo);
  if (!rc)
    rc = dtx_job_effect_at_ex(c->d->st, c->param[0], epoch, key, coll, filter,
                              update, &eo, &applied);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:b}", "applied", applied));
}

/* ---- a queue's pause (docs/jobs.md, "Pause and resume") ---------------- */

/* GET /v1/job-queues: every queue with settings (admin). */
void dtx__srv_h_job_queues(dtx__srv_ctx_t *c) {
  json_t *all = NULL;
  int rc = dtx_job_queue_list(c->d->st, &all);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:o}", "queues", all));
}

/* POST /v1/job-queues/{q}/pause and /resume: the settings afterwards. */
static void pause_resume(dtx__srv_ctx_t *c, int paused) {
  json_t *out = NULL;
  int rc = dtx_job_queue_check(c->param[0]);
  if (!rc)
    rc = dtx_job_queue_pause(c->d->st, c->param[0], paused, &out);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, out);
}

void dtx__srv_h_job_pause(dtx__srv_ctx_t *c) { pause_resume(c, 1); }
void dtx__srv_h_job_resume(dtx__srv_ctx_t *c) { pause_resume(c, 0); }

/* POST /v1/job-queues/{q}: {max_running: N|"none", rate: "N/MS"|"none",
 * rate_group: PATH} (admin). */
void dtx__srv_h_job_queue_set(dtx__srv_ctx_t *c) {
  json_t *out = NULL, *mr = dtx__srv_arg(c, "max_running");
  json_t *rt = dtx__srv_arg(c, "rate"), *rg = dtx__srv_arg(c, "rate_group");
  dtx_job_queue_opts_t o = {.set_max_running = mr != NULL,
                            .set_rate = rt != NULL,
                            .rate_group = json_string_value(rg)};
  int rrc = 0;
  if (rg && !rt) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'rate_group' needs field 'rate'");
    return;
  }
  if (rt && strcmp(json_string_value(rt), "none") == 0)
    o.no_rate = 1;
  else if (rt && (rrc = dtx_job_rate_parse(json_string_value(rt), &o.rate_n,
                                           &o.rate_ms))) {
    dtx__srv_fail(c, rrc, NULL);
    return;
  }
  if (json_is_string(mr)) {
    if (strcmp(json_string_value(mr), "none") != 0) {
      dtx__srv_bad(c, DTX_EINVAL, "field 'max_running' must be an integer "
                   "or \"none\"");
      return;
    }
    o.no_max_running = 1;
  } else if (mr) {
    o.max_running = (int64_t)json_integer_value(mr);
  }
  int rc = dtx_job_queue_opts_check(c->param[0], &o);
  if (!rc)
    rc = dtx_job_queue_set(c->d->st, c->param[0], &o, &out);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, out);
}

/* ---- progress (docs/jobs.md, "Progress") ---------------------------------- */

/* A claimed attempt's progress, fenced by epoch: STALE, 409, once the
 * attempt is no longer current; nothing written. */
void dtx__srv_h_job_progress(dtx__srv_ctx_t *c) {
  int64_t epoch;
  json_t *job = NULL, *value = dtx__srv_arg(c, "value");
  if (arg_epoch(c, &epoch))
    return;
  if (!value) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'value' is required (any JSON)");
    return;
  }
  int rc = dtx_job_progress_check(c->param[0], epoch, value);
  if (!rc)
    rc = dtx_job_progress(c->d->st, c->param[0], epoch, value, &job);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, job);
}
