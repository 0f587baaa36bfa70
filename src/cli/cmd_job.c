/* cmd_job.c -- doctx job: the CLI face of the job queue
 * (src/txn/jobq/, docs/jobs.md).  Every request is checked by the
 * library (dtx_job_req_check, dtx_job_work_opts_check) before the store is
 * opened, so bad input exits 2 and records nothing. */
#include <signal.h>
#include <string.h>

#include "cli/cli.h"

static int add(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *payload = NULL, *job = NULL;
  int code, rc;
  if (a->npos == 3 && !(payload = dtx__cli_json(a->pos[2], "PAYLOAD")))
    return DTX_EXIT_USAGE;
  dtx_job_req_t req = {.queue = a->pos[0], .type = a->pos[1],
                       .payload = payload, .id = dtx__cli_str(a, "--id"),
                       .priority = dtx__cli_int(a, "--priority", 0),
                       .delay_ms = dtx__cli_num(a, "--delay-ms", 0),
                       .max_attempts = dtx__cli_int(a, "--max-attempts", 0),
                       .backoff_ms = dtx__cli_num(a, "--backoff-ms", 0),
                       .unique_key = dtx__cli_str(a, "--unique-key"),
                       .unique_for_ms = dtx__cli_num(a, "--unique-for-ms", 0)};
  /* Flows (docs/jobs.md, "Flows"): a child of --parent; this job's policy
   * for its own children. */
  dtx_job_flow_t flow = {.parent = dtx__cli_str(a, "--parent"),
                         .on_child_fail = dtx__cli_str(a, "--on-child-fail")};
  dtx_store_t *st = NULL;
  if ((rc = dtx_job_flow_check(&req, &flow)))
    code = dtx__cli_fail(rc);
  else if ((st = dtx__cli_store(cli, &code)))
    code = (rc = dtx_job_add_flow(st, &req, &flow, &job, NULL))
               ? dtx__cli_fail(rc)
               : 0;
  json_decref(payload);
  if (!code)
    dtx__cli_print_item(job, 0);
  json_decref(job);
  return code;
}

static int work(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *exec = dtx__cli_str(a, "--exec");
  dtx_job_handler_t h = {.type = NULL, .fn = dtx_job_exec, .arg = (void *)exec};
  dtx_job_work_opts_t wo = {.queue = a->pos[0], .handlers = &h, .nhandlers = 1,
                            .threads = dtx__cli_int(a, "--threads", 0),
                            .once = dtx__cli_has(a, "--once"),
                            .lease_ms = dtx__cli_num(a, "--lease-ms", 0),
                            .timeout_ms = dtx__cli_num(a, "--timeout-ms", 0),
                            .owner = dtx__cli_str(a, "--owner"),
                            .stop = &dtx__cli_stop,
                            .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0),
                            .batch = dtx__cli_int(a, "--batch", 0)};
  json_t *sum = NULL;
  int code, rc;
  if (!*exec) /* the shell's command, which the library does not see */
    return dtx__cli_usage("job work: --exec CMD is required");
  if ((rc = dtx_job_work_opts_check(&wo)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store_stoppable(cli, &code);
  if (!st)
    return code;
  signal(SIGPIPE, SIG_IGN); /* a CMD that does not read its stdin */
  rc = dtx_job_work(st, &wo, &sum);
  return dtx__cli_summary(rc, &sum);
}

static int effect(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int64_t epoch = 0;
  int code, rc = 0, applied = 0;
  dtx_job_effect_opts_t eo = {0};
  if ((code = dtx__cli_fence(a->cmd, dtx__cli_str(a, "--fence"),
                             &eo.fence_name, &eo.fence_token)))
    return code;
  if (dtx__cli_int64(a->pos[1], 1, &epoch) != 0)
    return dtx__cli_usage("job effect: EPOCH must be an integer >= 1, got "
                          "'%s'", a->pos[1]);
  json_t *filter = dtx__cli_json(a->pos[4], "FILTER"), *update = NULL;
  if (!filter || !(update = dtx__cli_json(a->pos[5], "UPDATE"))) {
    json_decref(filter);
    return DTX_EXIT_USAGE;
  }
  /* The library's check before the store opens (bad input creates none). */
  rc = dtx_job_effect_check(a->pos[0], epoch, a->pos[2], a->pos[3], filter,
                            update, &eo);
  dtx_store_t *st = rc ? NULL : dtx__cli_store(cli, &code);
  if (rc)
    code = dtx__cli_fail(rc);
  if (st)
    rc = dtx_job_effect_at_ex(st, a->pos[0], epoch, a->pos[2], a->pos[3],
                              filter, update, &eo, &applied);
  json_decref(filter);
  json_decref(update);
  if (!st)
    return code;
  if (rc)
    return dtx__cli_fail(rc);
  printf("{\"applied\":%s}\n", applied ? "true" : "false");
  return DTX_EXIT_OK;
}

/* ---- a remote worker's steps (docs/jobs.md, "Remote workers") ---------- */

static int claim(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *queue = a->pos[0], *owner = dtx__cli_str(a, "--owner");
  int n = dtx__cli_int(a, "--n", 0), code, rc;
  int64_t lease = dtx__cli_num(a, "--lease-ms", 0);
  json_t *jobs = NULL;
  if ((rc = dtx_job_claim_check(queue, n, lease, owner)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  /* Each job with its epoch: the fence of what the worker does next. */
  return dtx__cli_items(dtx_job_claim(st, queue, n, lease, owner, &jobs),
                        &jobs, 1, 1);
}

/* The EPOCH argument: 0, or the usage error's exit code. */
static int epoch_arg(const dtx__cli_args_t *a, int64_t *epoch) {
  if (dtx__cli_int64(a->pos[1], 0, epoch) != 0 || *epoch < 1)
    return dtx__cli_usage("job %s: EPOCH must be an integer >= 1, got '%s'",
                          a->spec->name, a->pos[1]);
  return 0;
}

/* Prints the job a step left (with its executor's fields) or fails. */
static int step_done(int rc, json_t *job) {
  if (rc == 0 && job)
    dtx__cli_print_item(job, 1);
  json_decref(job);
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

static int heartbeat(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int64_t epoch = 0, lease = dtx__cli_num(a, "--lease-ms", 0);
  json_t *job = NULL;
  int code, rc;
  if ((code = epoch_arg(a, &epoch)))
    return code;
  if ((rc = dtx_job_heartbeat_check(a->pos[0], epoch, lease)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  rc = dtx_job_heartbeat(st, a->pos[0], epoch, lease, &job);
  return step_done(rc, job);
}

/* complete and fail: the attempt's outcome, fenced by EPOCH. */
static int end(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int ok = strcmp(a->spec->name, "complete") == 0;
  int64_t epoch = 0;
  json_t *result = NULL, *job = NULL;
  const char *error = !ok && a->npos == 3 ? a->pos[2] : NULL;
  int code, rc;
  if ((code = epoch_arg(a, &epoch)))
    return code;
  if (ok && a->npos == 3 && !(result = dtx__cli_json(a->pos[2], "RESULT")))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = NULL;
  if ((rc = dtx_job_end_check(a->pos[0], epoch, result, error)))
    code = dtx__cli_fail(rc);
  else if ((st = dtx__cli_store(cli, &code))) {
    rc = ok ? dtx_job_complete(st, a->pos[0], epoch, result, &job)
            : dtx_job_fail_at(st, a->pos[0], epoch, error, &job);
    code = step_done(rc, job);
  }
  json_decref(result);
  return code;
}

/* ---- progress (docs/jobs.md, "Progress") -------------------------------- */

static int progress(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int64_t epoch = 0;
  json_t *value = NULL, *job = NULL;
  int code, rc;
  if ((code = epoch_arg(a, &epoch)))
    return code;
  if (!(value = dtx__cli_json(a->pos[2], "VALUE")))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = NULL;
  if ((rc = dtx_job_progress_check(a->pos[0], epoch, value)))
    code = dtx__cli_fail(rc);
  else if ((st = dtx__cli_store(cli, &code))) {
    rc = dtx_job_progress(st, a->pos[0], epoch, value, &job);
    code = step_done(rc, job);
  }
  json_decref(value);
  return code;
}

static int list(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *all = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  dtx_page_t page = dtx__cli_page(a);
  return st ? dtx__cli_items(dtx_job_list(st, a->npos ? a->pos[0] : NULL,
                                          dtx__cli_str(a, "--state"), &page,
                                          &all),
                             &all, 1, dtx__cli_has(a, "--verbose"))
            : code;
}

static int stats(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *s = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  return dtx__cli_summary(dtx_job_stats(st, a->npos ? a->pos[0] : NULL, &s),
                          &s);
}

/* ---- a queue's pause (docs/jobs.md, "Pause and resume") ---------------- */

/* pause and resume QUEUE: the settings afterwards, printed. */
static int pause_resume(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *out = NULL;
  int code, rc;
  if ((rc = dtx_job_queue_check(a->pos[0])))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  rc = dtx_job_queue_pause(st, a->pos[0],
                           strcmp(a->spec->name, "pause") == 0, &out);
  return dtx__cli_summary(rc, &out);
}

/* queue QUEUE [--max-running N|none] [--rate N/MS|none [--rate-group
 * PATH]]: the settings afterwards. */
static int queue_set(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *mr = dtx__cli_str(a, "--max-running");
  const char *rt = dtx__cli_str(a, "--rate");
  dtx_job_queue_opts_t o = {.set_max_running = mr != NULL,
                            .set_rate = rt != NULL,
                            .rate_group = dtx__cli_str(a, "--rate-group")};
  json_t *out = NULL;
  int code, rc;
  if (mr && strcmp(mr, "none") == 0)
    o.no_max_running = 1;
  else if (mr && dtx__cli_int64(mr, 1, &o.max_running) != 0)
    return dtx__cli_usage("job queue: --max-running must be an integer or "
                          "none, got '%s'", mr);
  if (o.rate_group && !rt)
    return dtx__cli_usage("job queue: --rate-group needs --rate");
  if (rt && strcmp(rt, "none") == 0)
    o.no_rate = 1;
  else if (rt && (rc = dtx_job_rate_parse(rt, &o.rate_n, &o.rate_ms)))
    return dtx__cli_fail(rc);
  if ((rc = dtx_job_queue_opts_check(a->pos[0], &o)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  return dtx__cli_summary(dtx_job_queue_set(st, a->pos[0], &o, &out), &out);
}

/* queues: every queue with settings, one a line. */
static int queues(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *all = NULL;
  int code;
  (void)a;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_items(dtx_job_queue_list(st, &all), &all, 1, 1) : code;
}

/* show, cancel and retry: one job, printed. */
static int one(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *sub = a->spec->name;
  json_t *job = NULL;
  int code, rc;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  rc = strcmp(sub, "show") == 0     ? dtx_job_get(st, a->pos[0], &job)
       : strcmp(sub, "cancel") == 0 ? dtx_job_cancel(st, a->pos[0], &job)
                                    : dtx_job_retry(st, a->pos[0], &job);
  if (job && rc == 0)
    dtx__cli_print_item(job, dtx__cli_has(a, "--verbose"));
  json_decref(job);
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

#define V (const dtx__cli_opt_t[]){DTX__CLI_OPT_VERBOSE, {NULL}}
const dtx__cli_spec_t dtx__cmd_job = {
    "job", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"add", add, "QUEUE TYPE [PAYLOAD]",
         (const dtx__cli_opt_t[]){{"--id", DTX__CLI_STR, "ID"},
                                  {"--priority", DTX__CLI_INT, "N", .c_int = 1},
                                  {"--delay-ms", DTX__CLI_COUNT, "N"},
                                  {"--max-attempts", DTX__CLI_POS, "N", .c_int = 1},
                                  {"--backoff-ms", DTX__CLI_POS, "N"},
                                  {"--unique-key", DTX__CLI_STR, "K"},
                                  {"--parent", DTX__CLI_STR, "ID"},
                                  {"--on-child-fail", DTX__CLI_STR, "fail|hold"},
                                  {"--unique-for-ms", DTX__CLI_POS, "N"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"show", one, "ID", V, DTX__CLI_READS},
        {"list", list, "[QUEUE]",
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_STATE, DTX__CLI_OPT_LIMIT,
                                  DTX__CLI_OPT_SKIP, DTX__CLI_OPT_AFTER, DTX__CLI_OPT_VERBOSE,
                                  {NULL}},
         DTX__CLI_READS},
        {"stats", stats, "[QUEUE]", NULL, DTX__CLI_READS},
        {"pause", pause_resume, "QUEUE", NULL, DTX__CLI_ARMED},
        {"resume", pause_resume, "QUEUE", NULL, DTX__CLI_ARMED},
        {"queues", queues, NULL, NULL, DTX__CLI_READS},
        {"queue", queue_set, "QUEUE",
         (const dtx__cli_opt_t[]){{"--max-running", DTX__CLI_STR, "N|none"},
                                  {"--rate", DTX__CLI_STR, "N/MS|none"},
                                  {"--rate-group", DTX__CLI_STR, "PATH"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"cancel", one, "ID", V, DTX__CLI_ARMED},
        {"retry", one, "ID", V, DTX__CLI_ARMED},
        {"work", work, "QUEUE",
         (const dtx__cli_opt_t[]){{"--exec", DTX__CLI_STR, "CMD", NULL, 1},
                                  {"--threads", DTX__CLI_POS, "N", .c_int = 1},
                                  {"--once", DTX__CLI_FLAG},
                                  DTX__CLI_OPT_LEASE,
                                  {"--timeout-ms", DTX__CLI_POS, "N"},
                                  {"--owner", DTX__CLI_STR, "NAME"},
                                  DTX__CLI_OPT_DEADLINE,
                                  {"--batch", DTX__CLI_POS, "N", .c_int = 1},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"claim", claim, "QUEUE",
         (const dtx__cli_opt_t[]){{"--n", DTX__CLI_POS, "N", .c_int = 1},
                                  DTX__CLI_OPT_LEASE,
                                  {"--owner", DTX__CLI_STR, "NAME"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"heartbeat", heartbeat, "ID EPOCH",
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_LEASE, {NULL}}, DTX__CLI_ARMED},
        {"complete", end, "ID EPOCH [RESULT]", NULL, DTX__CLI_ARMED},
        {"fail", end, "ID EPOCH [ERROR]", NULL, DTX__CLI_ARMED},
        {"progress", progress, "ID EPOCH VALUE", NULL, DTX__CLI_ARMED},
        {"effect", effect, "JOB_ID EPOCH KEY COLL FILTER UPDATE",
         (const dtx__cli_opt_t[]){{"--fence", DTX__CLI_STR, "NAME:TOKEN"},
                                  {NULL}},
         DTX__CLI_ARMED},
        /* job events (cmd_job_events.c) */
        {"events", dtx__cli_job_events, "QUEUE",
         (const dtx__cli_opt_t[]){{"--after", DTX__CLI_COUNT, "CURSOR"},
                                  DTX__CLI_OPT_LIMIT,
                                  {"--follow", DTX__CLI_FLAG},
                                  DTX__CLI_OPT_DEADLINE,
                                  {NULL}},
         DTX__CLI_ARMED},
        /* schedules (cmd_job_sched.c) */
        {"schedule", dtx__cli_job_schedule, "NAME QUEUE TYPE PAYLOAD",
         (const dtx__cli_opt_t[]){{"--cron", DTX__CLI_STR, "\"M H DOM MON DOW\""},
                                  {"--every-ms", DTX__CLI_POS, "N"},
                                  {"--missed", DTX__CLI_STR, "run-once|skip"},
                                  {"--grace-ms", DTX__CLI_POS, "N"},
                                  {"--priority", DTX__CLI_INT, "N", .c_int = 1},
                                  {"--max-attempts", DTX__CLI_POS, "N", .c_int = 1},
                                  {"--backoff-ms", DTX__CLI_POS, "N"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"schedules", dtx__cli_job_schedules, "[QUEUE]", NULL, DTX__CLI_READS},
        {"unschedule", dtx__cli_job_unschedule, "NAME", NULL, DTX__CLI_ARMED},
        {"scheduler", dtx__cli_job_scheduler, "[QUEUE]",
         (const dtx__cli_opt_t[]){{"--once", DTX__CLI_FLAG},
                                  {"--poll-ms", DTX__CLI_POS, "N"},
                                  DTX__CLI_OPT_DEADLINE,
                                  {NULL}},
         DTX__CLI_ARMED},
        {NULL}},
    NULL,
    "States: ready, delayed (run-at in the future, also a retry's backoff),\n"
    "running, succeeded, dead, canceled; waiting (a parent whose children\n"
    "have not all succeeded) and held (a child its parent has not yet\n"
    "recorded).  --parent ID makes the job a child of job ID, which must\n"
    "exist and never have been claimed (else exit 1 / exit 3, nothing\n"
    "recorded): ID waits, and runs once after all its children succeeded,\n"
    "its handler's job carrying \"children\": [{id, state, result}].  A\n"
    "dead or canceled child makes the parent dead (--on-child-fail fail,\n"
    "the default, given when the parent is added) or leaves it waiting\n"
    "until the child is retried and succeeds (hold).  --priority is -100..100 (default\n"
    "0; higher runs first); among equals the oldest run-at runs first.\n"
    "Backoff starts at --backoff-ms (default 1000), doubles per attempt with\n"
    "+-20% jitter, capped at one hour; after --max-attempts (default 5) the\n"
    "job is dead (retry puts it back).  A job whose worker's lease lapsed is\n"
    "taken over by recovery and that counts as an attempt.  --id reused with\n"
    "the same queue, type and payload returns the job; with others exit 3.\n"
    "--unique-key held by a live job of the queue prints that job, exit 0;\n"
    "with --unique-for-ms N the key stays held N ms after the job ends.\n"
    "work runs CMD with /bin/sh -c for each claimed job: the job's JSON on\n"
    "stdin, DOCTX_JOB_ID, DOCTX_JOB_EPOCH and DOCTX_STORE in the\n"
    "environment.  Exit 0 succeeds (stdout, if JSON, is the result); any\n"
    "other exit fails the attempt (stderr is kept as last_error).  The lease\n"
    "(--lease-ms, default 30000) is renewed while CMD runs; CMD is killed\n"
    "after --timeout-ms (default 300000).  --once processes everything due\n"
    "and exits; it prints a JSON summary.  Each thread claims up to --batch\n"
    "jobs at once (1..256, default 16; fewer while jobs take long) and runs\n"
    "them one after another, renewing the lease of every job it holds.\n"
    "effect applies UPDATE to one document of COLL matching FILTER (the\n"
    "first match, which the job then pins) at most once per (job, KEY) over\n"
    "every document, attempt and process, only while the job runs at EPOCH\n"
    "under its lease; it prints {\"applied\":true} the first time,\n"
    "{\"applied\":false} on any repeat, whatever FILTER says then.  work ends\n"
    "an attempt when CMD exits and kills what CMD left in its process group.\n"
    "--fence NAME:TOKEN makes it a fenced write under lock NAME (the\n"
    "handler's token): refused with FENCED, exit 3, once a larger token of\n"
    "NAME wrote the document.\n"
    "claim, heartbeat, complete and fail are a worker's steps from another\n"
    "process: claim takes up to --n due jobs (1..256, default 1) under a\n"
    "lease of --lease-ms (default 30000) and prints each with its epoch;\n"
    "heartbeat renews that lease; complete (RESULT: JSON) or fail (ERROR:\n"
    "text) ends the attempt, each only while the job runs at EPOCH.  The\n"
    "same complete or fail repeated prints the job again, changing nothing.\n"
    "events prints the queue's event log, one JSON line per event\n"
    "{cursor, job, n, event, at, epoch, from, to}: every transition of\n"
    "every job, once, in order; --after CURSOR (the last cursor seen) goes\n"
    "on from there without loss; --limit N (1..1000, default 100);\n"
    "--follow keeps reading until SIGINT/SIGTERM or --deadline-ms.  A\n"
    "cursor whose next events recover trimmed is refused, exit 3, naming\n"
    "the oldest cursor kept.\n"
    "schedule adds (or replaces: a new generation) a schedule that enqueues\n"
    "one job of QUEUE per tick: --cron (five fields, UTC) or --every-ms N\n"
    "(at the multiples of N since the epoch); its first tick is the first\n"
    "after now.  Every work of QUEUE and every scheduler ticks; each tick is\n"
    "one job, _id sched:NAME:GEN:TICK, however many tick at once.  A tick\n"
    "more than --grace-ms (default 60000) late is missed: --missed run-once\n"
    "(default) makes one job for a run of missed ticks, skip none.\n"
    "unschedule removes one (no tick after it is enqueued); schedules lists\n"
    "them (next_at, last_tick, gen); scheduler only ticks, every --poll-ms\n"
    "(default 100), or once with --once, and prints a JSON summary.\n"
    "pause stops the claims of QUEUE (running jobs finish) and returns once\n"
    "every worker sees it (0.5 s); resume starts them again; stats QUEUE\n"
    "shows \"paused\" and \"max_running\"; queues lists the queues that\n"
    "have settings.  queue QUEUE --max-running N (1..256) lets at most N\n"
    "jobs of QUEUE run at once across every worker and process (none: no\n"
    "limit); a crashed worker's jobs count until recovery takes them over.\n"
    "--rate N/MS lets at most N jobs of QUEUE be claimed per window of MS\n"
    "ms (fixed windows, anchored at the first claim; none: no rate); with\n"
    "--rate-group PATH, per value of the job at PATH (e.g.\n"
    "payload.customer): a group over its rate is skipped, not waited on.\n"
    "cancel of a running job records the request: its worker ends the\n"
    "attempt canceled (never succeeded) at its next heartbeat, --exec's\n"
    "command group getting SIGTERM, then SIGKILL 2 s later; a remote\n"
    "worker's heartbeat then exits 3 (STATE), and its complete or fail\n"
    "end the attempt canceled.\n"
    "progress records VALUE (JSON, at most 4096 bytes) as the job's\n"
    "progress, shown by show and list, only while the job runs at EPOCH.\n"
    "exit: 0 ok; 1 no such job (show, heartbeat, complete, fail,\n"
    "      progress, the --parent of add), no document matches (effect),\n"
    "      no such schedule (unschedule); 2 invalid input (nothing is\n"
    "      recorded); 3 --id reused with other parameters, cancel of a\n"
    "      succeeded or dead job, retry of one that is not dead, --parent\n"
    "      of a job already claimed, a stale EPOCH (no longer current), a\n"
    "      heartbeat after a cancel was requested, or a stale --fence\n"
    "      token (effect); 4 store error\n"};
#undef V
