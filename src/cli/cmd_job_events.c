/* cmd_job_events.c -- doctx job events: the job event log of a queue
 * (src/txn/jobq/events.c, docs/jobs.md "Events"), one JSON line per
 * event; --follow keeps reading until SIGINT/SIGTERM or --deadline-ms. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/cli.h"

/* The CLI uses doctx.h only (tests/layers.sh): its own monotonic ms. */
static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The longest one read waits for an event while following, so a stop
 * signal or the deadline is seen within it. */
#define FOLLOW_POLL_MS 500

int dtx__cli_job_events(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *queue = a->pos[0];
  int64_t after = dtx__cli_num(a, "--after", 0);
  int64_t limit = dtx__cli_num(a, "--limit", 0);
  int64_t deadline = dtx__cli_num(a, "--deadline-ms", 0);
  int follow = dtx__cli_has(a, "--follow"), code, rc;
  if ((rc = dtx_job_events_check(queue, after, limit, 0)))
    return dtx__cli_fail(rc);
  if (deadline && !follow)
    return dtx__cli_usage("job events: --deadline-ms goes with --follow");
  dtx_store_t *st = follow ? dtx__cli_store_stoppable(cli, &code)
                           : dtx__cli_store(cli, &code);
  if (!st)
    return code;
  int64_t until = deadline ? mono_ms() + deadline : 0;
  do {
    int64_t wait = 0;
    if (follow) {
      wait = FOLLOW_POLL_MS;
      if (until && until - mono_ms() < wait)
        wait = until - mono_ms() > 0 ? until - mono_ms() : 0;
    }
    json_t *evs = NULL, *ev;
    size_t i;
    if ((rc = dtx_job_events(st, queue, after, limit, wait, &evs)))
      return dtx__cli_fail(rc);
    json_array_foreach(evs, i, ev) {
      char *s = json_dumps(ev, JSON_COMPACT);
      if (s)
        puts(s);
      free(s);
      after = json_integer_value(json_object_get(ev, "cursor"));
    }
    json_decref(evs);
    fflush(stdout);
  } while (follow && !dtx__cli_stop && (!until || mono_ms() < until));
  return DTX_EXIT_OK;
}
