/* cmd_job_sched.c -- doctx job schedule / schedules / unschedule /
 * scheduler: the CLI face of job schedules (src/txn/jobq/sched.c,
 * docs/jobs.md "Schedules").  The library checks every request
 * (dtx_job_sched_check, dtx_job_scheduler_check) before the store opens,
 * so a bad cron or interval exits 2 and records nothing. */
#include <string.h>

#include "cli/cli.h"

int dtx__cli_job_schedule(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *payload = NULL, *s = NULL;
  int code, rc;
  if (!(payload = dtx__cli_json(a->pos[3], "PAYLOAD")))
    return DTX_EXIT_USAGE;
  dtx_job_sched_req_t req = {
      .name = a->pos[0], .queue = a->pos[1], .type = a->pos[2],
      .payload = payload, .cron = dtx__cli_str(a, "--cron"),
      .every_ms = dtx__cli_num(a, "--every-ms", 0),
      .missed = dtx__cli_str(a, "--missed"),
      .grace_ms = dtx__cli_num(a, "--grace-ms", 0),
      .priority = dtx__cli_int(a, "--priority", 0),
      .max_attempts = dtx__cli_int(a, "--max-attempts", 0),
      .backoff_ms = dtx__cli_num(a, "--backoff-ms", 0)};
  dtx_store_t *st = NULL;
  if ((rc = dtx_job_sched_check(&req)))
    code = dtx__cli_fail(rc);
  else if ((st = dtx__cli_store(cli, &code)))
    code = (rc = dtx_job_schedule(st, &req, &s)) ? dtx__cli_fail(rc) : 0;
  json_decref(payload);
  if (!code)
    dtx__cli_print_item(s, 1);
  json_decref(s);
  return code;
}

int dtx__cli_job_schedules(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *all = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_items(dtx_job_schedules(st, a->npos ? a->pos[0] : NULL,
                                               &all),
                             &all, 1, 1)
            : code;
}

int dtx__cli_job_unschedule(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *s = NULL;
  int code, rc;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  rc = dtx_job_unschedule(st, a->pos[0], &s);
  if (rc == 0)
    dtx__cli_print_item(s, 1);
  json_decref(s);
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

int dtx__cli_job_scheduler(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_job_scheduler_opts_t o = {
      .queue = a->npos ? a->pos[0] : NULL, .once = dtx__cli_has(a, "--once"),
      .stop = &dtx__cli_stop,
      .poll_ms = dtx__cli_num(a, "--poll-ms", 0),
      .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *sum = NULL;
  int code, rc;
  if ((rc = dtx_job_scheduler_check(&o)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store_stoppable(cli, &code);
  if (!st)
    return code;
  rc = dtx_job_scheduler(st, &o, &sum);
  return dtx__cli_summary(rc, &sum);
}
