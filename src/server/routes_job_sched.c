/* routes_job_sched.c -- doctxd's job-schedule routes (docs/server.md,
 * "Jobs"; docs/jobs.md "Schedules"): add or replace, list, remove, as
 * `doctx job schedule / schedules / unschedule` (src/cli/cmd_job_sched.c).
 * The library checks the request (a bad cron, every_ms out of range)
 * before anything is written: 400, nothing recorded. */
#include "server/server.h"

#include <limits.h>
#include <string.h>

static int arg_cint(dtx__srv_ctx_t *c, const char *name) {
  int64_t v = dtx__srv_arg_int(c, name, 0);
  return v < INT_MIN ? INT_MIN : v > INT_MAX ? INT_MAX : (int)v;
}

void dtx__srv_h_job_schedule(dtx__srv_ctx_t *c) {
  json_t *s = NULL;
  dtx_job_sched_req_t req = {
      .name = dtx__srv_arg_str(c, "name"),
      .queue = dtx__srv_arg_str(c, "queue"),
      .type = dtx__srv_arg_str(c, "type"),
      .payload = dtx__srv_arg(c, "payload"),
      .cron = dtx__srv_arg_str(c, "cron"),
      .every_ms = dtx__srv_arg_int(c, "every_ms", 0),
      .missed = dtx__srv_arg_str(c, "missed"),
      .grace_ms = dtx__srv_arg_int(c, "grace_ms", 0),
      .priority = arg_cint(c, "priority"),
      .max_attempts = arg_cint(c, "max_attempts"),
      .backoff_ms = dtx__srv_arg_int(c, "backoff_ms", 0)};
  if (!req.name || !req.queue || !req.type) {
    dtx__srv_bad(c, DTX_EINVAL, "fields 'name', 'queue' and 'type' are "
                 "required");
    return;
  }
  /* 0 is the library's "the default" (or "no interval"): a body that
   * sends one asks for that many, which the CLI refuses too. */
  if ((dtx__srv_arg(c, "every_ms") && req.every_ms < 1) ||
      (dtx__srv_arg(c, "grace_ms") && req.grace_ms < 1) ||
      (dtx__srv_arg(c, "max_attempts") && req.max_attempts < 1) ||
      (dtx__srv_arg(c, "backoff_ms") && req.backoff_ms < 1)) {
    dtx__srv_bad(c, DTX_EINVAL, "every_ms, grace_ms, max_attempts and "
                 "backoff_ms must be >= 1");
    return;
  }
  int rc = dtx_job_sched_check(&req);
  if (!rc)
    rc = dtx_job_schedule(c->d->st, &req, &s);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, s);
}

void dtx__srv_h_job_schedules(dtx__srv_ctx_t *c) {
  char buf[160];
  int bad = 0;
  json_t *all = NULL;
  const char *q = dtx__srv_query(c, "queue", buf, sizeof buf, &bad);
  if (bad)
    return;
  int rc = dtx_job_schedules(c->d->st, q, &all);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:o}", "schedules", all));
}

void dtx__srv_h_job_unschedule(dtx__srv_ctx_t *c) {
  json_t *s = NULL;
  int rc = dtx_job_unschedule(c->d->st, c->param[0], &s);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, s);
}
