/* cmd_job.c -- `doctx job ...`: the CLI face of the job queue
 * (src/txn/jobq/).  Every argument is checked before the store is opened
 * (the library checks the rest before it writes), so bad input exits 2
 * and records nothing. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *job_help =
    "usage: doctx job add QUEUE TYPE [PAYLOAD] [--id ID] [--priority N]\n"
    "                 [--delay-ms N] [--max-attempts N] [--backoff-ms N]\n"
    "                 [--unique-key K]                       prints the job\n"
    "       doctx job show ID [--verbose]\n"
    "       doctx job list [QUEUE] [--state S] [--limit N] [--skip N]\n"
    "       doctx job stats [QUEUE]           counts per state, as JSON\n"
    "       doctx job cancel ID | doctx job retry ID\n"
    "       doctx job work QUEUE --exec CMD [--threads N] [--once]\n"
    "                 [--lease-ms N] [--timeout-ms N] [--owner NAME]\n"
    "                 [--deadline-ms N] [--batch N]\n"
    "       doctx job effect JOB_ID EPOCH KEY COLL FILTER UPDATE\n"
    "                 [--fence NAME:TOKEN]\n"
    "States: ready, delayed (run-at in the future, also a retry's backoff),\n"
    "running, succeeded, dead, canceled.  --priority is -100..100 (default\n"
    "0; higher runs first); among equals the oldest run-at runs first.\n"
    "Backoff starts at --backoff-ms (default 1000), doubles per attempt with\n"
    "+-20% jitter, capped at one hour; after --max-attempts (default 5) the\n"
    "job is dead (retry puts it back).  A job whose worker's lease lapsed is\n"
    "taken over by recovery and that counts as an attempt.  --id reused with\n"
    "the same queue, type and payload returns the job; with others exit 3.\n"
    "--unique-key held by a live job of the queue prints that job, exit 0.\n"
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
    "exit: 0 ok; 1 no such job (show), no document matches (effect);\n"
    "      2 invalid input (nothing is recorded); 3 --id reused with other\n"
    "      parameters, cancel of a job that is not ready or delayed, retry\n"
    "      of one that is not dead, a stale EPOCH or a stale --fence token\n"
    "      (effect); 4 store error\n";


enum { O_ID, O_PRI, O_DELAY, O_MAX, O_BACKOFF, O_UKEY, O_STATE, O_LIMIT,
       O_SKIP, O_VERBOSE, O_EXEC, O_THREADS, O_ONCE, O_LEASE, O_TIMEOUT,
       O_OWNER, O_DEADLINE, O_FENCE, O_BATCH, O_N };



/* The options given that sub does not take; 0 when none. */
static int stray(const char *sub, const dtx__cli_opt_t *o, const int *ok) {
  return dtx__cli_stray("job", sub, o, O_N, ok);
}

static int job_add(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  int64_t pri = 0, delay = 0, max = 0, backoff = 0;
  int code;
  static const int ok[] = {O_ID, O_PRI, O_DELAY, O_MAX, O_BACKOFF, O_UKEY, -1};
  if (n < 3 || n > 4)
    return dtx__cli_usage("job add: expected QUEUE TYPE [PAYLOAD]");
  if ((code = stray("add", o, ok)) ||
      dtx__cli_int_opt("job add", &o[O_PRI], 1, DTX_JOB_PRIORITY_MIN, &pri) ||
      dtx__cli_int_opt("job add", &o[O_DELAY], 1, 0, &delay) ||
      dtx__cli_int_opt("job add", &o[O_MAX], 0, 1, &max) ||
      dtx__cli_int_opt("job add", &o[O_BACKOFF], 0, 1, &backoff))
    return DTX_EXIT_USAGE;
  if (pri > DTX_JOB_PRIORITY_MAX)
    return dtx__cli_usage("job add: --priority must be from %d to %d",
                          DTX_JOB_PRIORITY_MIN, DTX_JOB_PRIORITY_MAX);
  if (max > 1000000)
    return dtx__cli_usage("job add: --max-attempts must be at most 1000000");
  json_t *payload = NULL;
  if (n == 4 && !(payload = dtx__cli_json(pos[3], "PAYLOAD")))
    return DTX_EXIT_USAGE;
  dtx_job_req_t req = {.queue = pos[1], .type = pos[2], .payload = payload,
                       .id = o[O_ID].value, .priority = (int)pri,
                       .delay_ms = delay, .max_attempts = (int)max,
                       .backoff_ms = backoff, .unique_key = o[O_UKEY].value};
  if ((code = dtx__cli_faults_ok())) {
    json_decref(payload);
    return code;
  }
  dtx_store_t *st = dtx__cli_store(cli, &code);
  json_t *job = NULL;
  int rc = st ? dtx_job_add(st, &req, &job, NULL) : 0;
  json_decref(payload);
  if (!st)
    return code;
  if (rc)
    return dtx__cli_fail(rc);
  dtx__cli_print_item(job, o[O_VERBOSE].value != NULL);
  json_decref(job);
  return DTX_EXIT_OK;
}

static int job_work(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  int64_t threads = 1, lease = 0, timeout = 0, deadline = 0, batch = 0;
  int code;
  static const int ok[] = {O_EXEC,    O_THREADS, O_ONCE,     O_LEASE,
                           O_TIMEOUT, O_OWNER,   O_DEADLINE, O_BATCH, -1};
  if (n != 2)
    return dtx__cli_usage("job work: expected QUEUE");
  if ((code = stray("work", o, ok)) ||
      dtx__cli_int_opt("job work", &o[O_THREADS], 0, 1, &threads) ||
      dtx__cli_int_opt("job work", &o[O_LEASE], 0, 1, &lease) ||
      dtx__cli_int_opt("job work", &o[O_TIMEOUT], 0, 1, &timeout) ||
      dtx__cli_int_opt("job work", &o[O_DEADLINE], 0, 1, &deadline) ||
      dtx__cli_int_opt("job work", &o[O_BATCH], 0, 1, &batch))
    return DTX_EXIT_USAGE;
  if (!o[O_EXEC].value || !*o[O_EXEC].value)
    return dtx__cli_usage("job work: --exec CMD is required");
  if (threads > 256)
    return dtx__cli_usage("job work: --threads must be at most 256");
  if (o[O_BATCH].value && (batch < 1 || batch > 256))
    return dtx__cli_usage("job work: --batch must be from 1 to 256");
  dtx_store_t *st = dtx__cli_store_stoppable(cli, &code);
  if (!st)
    return code;
  signal(SIGPIPE, SIG_IGN); /* a CMD that does not read its stdin */
  dtx_job_handler_t h = {.type = NULL, .fn = dtx_job_exec,
                         .arg = (void *)o[O_EXEC].value};
  dtx_job_work_opts_t wo = {.queue = pos[1], .handlers = &h, .nhandlers = 1,
                            .threads = (int)threads,
                            .once = o[O_ONCE].value != NULL,
                            .lease_ms = lease, .timeout_ms = timeout,
                            .owner = o[O_OWNER].value, .stop = &dtx__cli_stop,
                            .deadline_ms = deadline, .batch = (int)batch};
  json_t *sum = NULL;
  int rc = dtx_job_work(st, &wo, &sum);
  return dtx__cli_summary(rc, sum);
}

static int job_effect(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  int64_t epoch = 0;
  int code;
  static const int ok[] = {O_FENCE, -1};
  dtx_job_effect_opts_t eo = {0};
  if (n != 7)
    return dtx__cli_usage("job effect: expected JOB_ID EPOCH KEY COLL FILTER "
                          "UPDATE");
  if ((code = stray("effect", o, ok)) ||
      (code = dtx__cli_fence("job effect", o[O_FENCE].value, &eo.fence_name,
                             &eo.fence_token)))
    return code;
  if (dtx__cli_int64(pos[2], 0, &epoch) != 0 || epoch < 1)
    return dtx__cli_usage("job effect: EPOCH must be an integer >= 1, got "
                          "'%s'", pos[2]);
  json_t *filter = dtx__cli_json(pos[5], "FILTER"), *update = NULL;
  if (!filter || !(update = dtx__cli_json(pos[6], "UPDATE"))) {
    json_decref(filter);
    return DTX_EXIT_USAGE;
  }
  dtx_store_t *st = NULL;
  int rc = 0, applied = 0;
  if (!(code = dtx__cli_faults_ok()) && (st = dtx__cli_store(cli, &code)))
    rc = dtx_job_effect_at_ex(st, pos[1], epoch, pos[3], pos[4], filter,
                              update, &eo, &applied);
  json_decref(filter);
  json_decref(update);
  if (!st)
    return code;
  if (rc)
    return dtx__cli_fail(rc);
  printf("{\"applied\":%s}\n", applied ? "true" : "false");
  return DTX_EXIT_OK;
}

int dtx__cmd_job(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[O_N] = {
      [O_ID] = {"--id", 1, NULL},           [O_PRI] = {"--priority", 1, NULL},
      [O_DELAY] = {"--delay-ms", 1, NULL},  [O_MAX] = {"--max-attempts", 1, NULL},
      [O_BACKOFF] = {"--backoff-ms", 1, NULL},
      [O_UKEY] = {"--unique-key", 1, NULL}, [O_STATE] = {"--state", 1, NULL},
      [O_LIMIT] = {"--limit", 1, NULL},     [O_SKIP] = {"--skip", 1, NULL},
      [O_VERBOSE] = {"--verbose", 0, NULL}, [O_EXEC] = {"--exec", 1, NULL},
      [O_THREADS] = {"--threads", 1, NULL}, [O_ONCE] = {"--once", 0, NULL},
      [O_LEASE] = {"--lease-ms", 1, NULL},  [O_TIMEOUT] = {"--timeout-ms", 1, NULL},
      [O_OWNER] = {"--owner", 1, NULL},     [O_DEADLINE] = {"--deadline-ms", 1, NULL},
      [O_FENCE] = {"--fence", 1, NULL},     [O_BATCH] = {"--batch", 1, NULL}};
  char *pos[8];
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(job_help);
  int n = dtx__cli_split(argc, argv, o, O_N, pos, 7);
  if (n < 0)
    return DTX_EXIT_USAGE;
  if (n == 0)
    return dtx__cli_usage("job: expected add, show, list, stats, cancel, "
                          "retry, work or effect");
  const char *sub = pos[0];
  int verbose = o[O_VERBOSE].value != NULL;
  if (strcmp(sub, "add") == 0)
    return job_add(cli, pos, n, o);
  if (strcmp(sub, "work") == 0)
    return job_work(cli, pos, n, o);
  if (strcmp(sub, "effect") == 0)
    return job_effect(cli, pos, n, o);
  if (strcmp(sub, "list") == 0) {
    static const int ok[] = {O_STATE, O_LIMIT, O_SKIP, O_VERBOSE, -1};
    dtx_page_t page = {0};
    if (n > 2)
      return dtx__cli_usage("job list: expected at most QUEUE");
    if ((code = stray("list", o, ok)) ||
        dtx__cli_page_opts("job list", &o[O_SKIP], &o[O_LIMIT], &page))
      return DTX_EXIT_USAGE;
    dtx_store_t *st = dtx__cli_store_read(cli, &code);
    if (!st)
      return code;
    json_t *all = NULL;
    int rc = dtx_job_list(st, n == 2 ? pos[1] : NULL, o[O_STATE].value, &page,
                          &all);
    return rc ? dtx__cli_fail(rc) : dtx__cli_print_items(all, verbose);
  }
  if (strcmp(sub, "stats") == 0) {
    static const int ok[] = {-1};
    if (n > 2)
      return dtx__cli_usage("job stats: expected at most QUEUE");
    if ((code = stray("stats", o, ok)))
      return code;
    dtx_store_t *st = dtx__cli_store_read(cli, &code);
    if (!st)
      return code;
    json_t *s = NULL;
    int rc = dtx_job_stats(st, n == 2 ? pos[1] : NULL, &s);
    if (rc)
      return dtx__cli_fail(rc);
    dtx__cli_print_json(s);
    json_decref(s);
    return DTX_EXIT_OK;
  }
  int is_show = strcmp(sub, "show") == 0, is_cancel = strcmp(sub, "cancel") == 0;
  if (!is_show && !is_cancel && strcmp(sub, "retry") != 0)
    return dtx__cli_usage("job: expected add, show, list, stats, cancel, "
                          "retry, work or effect; got '%s'", sub);
  static const int ok[] = {O_VERBOSE, -1};
  if (n != 2)
    return dtx__cli_usage("job %s: expected ID", sub);
  if ((code = stray(sub, o, ok)))
    return code;
  if (!is_show && (code = dtx__cli_faults_ok()))
    return code;
  dtx_store_t *st = is_show ? dtx__cli_store_read(cli, &code)
                            : dtx__cli_store(cli, &code);
  if (!st)
    return code;
  json_t *job = NULL;
  int rc = is_show     ? dtx_job_get(st, pos[1], &job)
           : is_cancel ? dtx_job_cancel(st, pos[1], &job)
                       : dtx_job_retry(st, pos[1], &job);
  if (rc == DTX_ENOTFOUND) {
    json_decref(job);
    return dtx__cli_fail(rc);
  }
  if (job && rc == 0)
    dtx__cli_print_item(job, verbose);
  json_decref(job);
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}
