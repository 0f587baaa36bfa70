/* cmd_recover.c -- doctx recover: one recovery pass of every pattern
 * (src/txn/frame/recover.c). */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_recover_opts_t ro = {
      .older_than_ms = dtx__cli_num(a, "--older-than-ms", -1),
      .tombstone_ttl_ms = dtx__cli_num(a, "--tombstone-ttl-ms", 0),
      .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0),
      .retention_ms = dtx__cli_num(a, "--retention-ms", 0),
      .events_keep_ms = dtx__cli_num(a, "--events-keep-ms", 0),
      .events_keep = dtx__cli_num(a, "--events-keep", 0),
      .keep_dead_ms = dtx__cli_num(a, "--keep-dead-ms", 0)};
  json_t *sum = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  return dtx__cli_summary(dtx_recover(st, &ro, &sum), &sum);
}

const dtx__cli_spec_t dtx__cmd_recover = {
    "recover", run, NULL,
    (const dtx__cli_opt_t[]){{"--older-than-ms", DTX__CLI_COUNT, "N"},
                             {"--tombstone-ttl-ms", DTX__CLI_POS, "N"},
                             {"--retention-ms", DTX__CLI_POS, "N"},
                             {"--events-keep-ms", DTX__CLI_POS, "N"},
                             {"--events-keep", DTX__CLI_POS, "N"},
                             {"--keep-dead-ms", DTX__CLI_POS, "N"},
                             DTX__CLI_OPT_DEADLINE,
                             {NULL}},
    DTX__CLI_ARMED, NULL, NULL,
    "One recovery pass of every pattern.  Transfers not updated for N ms\n"
    "(default: whose lease lapsed) are finished -- preparing ones roll back,\n"
    "committed and rolling_back ones complete, initiated ones run -- and\n"
    "account markers of finished transfers are repaired.  Jobs: due delayed\n"
    "ones become ready, running ones whose lease lapsed (or not updated for\n"
    "N ms) are taken over (an attempt), effect markers of jobs ended longer\n"
    "than --tombstone-ttl-ms ago are cleared, and succeeded jobs ended\n"
    "longer than --retention-ms (default 24 h) ago purged; dead and\n"
    "canceled ones, with --keep-dead-ms N, once ended longer than N ms ago\n"
    "and their markers cleared (default: kept).  Job events waiting in\n"
    "jobs are logged, and the log trimmed: entries older than\n"
    "--events-keep-ms (default 24 h) or more than --events-keep N behind\n"
    "their queue's newest (default: no count bound).  Prints a JSON\n"
    "summary per pattern: what ran, what was left alone and why (e.g. a\n"
    "lease not expired), and what failed.\n"
    DTX__CLI_DEADLINE_HELP
    "exit: 0 ok, 2 invalid input, 4 a store step kept failing\n"};
