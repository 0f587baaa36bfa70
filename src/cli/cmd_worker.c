/* cmd_worker.c -- doctx worker: the executors of every pattern
 * (src/txn/frame/worker.c), until SIGINT/SIGTERM or, with --once, until
 * nothing is due. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_worker_opts_t wo = {.threads = dtx__cli_int(a, "--threads", 0),
                          .once = dtx__cli_has(a, "--once"),
                          .lease_ms = dtx__cli_num(a, "--lease-ms", 0),
                          .owner = dtx__cli_str(a, "--owner"),
                          .stop = &dtx__cli_stop,
                          .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0),
                          .batch = dtx__cli_int(a, "--batch", 0)};
  json_t *sum = NULL;
  int code, rc = dtx_worker_opts_check(&wo);
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store_stoppable(cli, &code);
  if (!st)
    return code;
  rc = dtx_worker_run(st, &wo, &sum);
  return dtx__cli_summary(rc, &sum);
}

const dtx__cli_spec_t dtx__cmd_worker = {
    "worker", run, NULL,
    (const dtx__cli_opt_t[]){{"--threads", DTX__CLI_POS, "N", .c_int = 1},
                             {"--once", DTX__CLI_FLAG},
                             DTX__CLI_OPT_LEASE,
                             {"--owner", DTX__CLI_STR, "NAME"},
                             DTX__CLI_OPT_DEADLINE,
                             {"--batch", DTX__CLI_POS, "N", .c_int = 1},
                             {NULL}},
    DTX__CLI_ARMED, NULL, NULL,
    "Claims the due work of every pattern (initiated transfers, ...) and runs\n"
    "it; also recovers work whose lease lapsed.  --once processes everything\n"
    "due and exits.  SIGINT or SIGTERM stop it after the items in hand.  On\n"
    "exit it prints a JSON summary per pattern: what ran, what the last\n"
    "recovery pass left alone and why, and what failed.\n"
    "--batch N (1-256, default 16): a thread claims up to N initiated\n"
    "transfers in one round and drives them together, each step of all of\n"
    "them one round trip; 1 claims and drives one at a time.\n"
    "Deadline: each item (batch) runs under one budget -- --deadline-ms N, or else\n"
    "the store's retry window counted once (see doctx transfer --help).\n"
    "exit: 0 ok; 4 with --once, the store could not be reached or an item\n"
    "      failed (the reason is printed; the work is left for recovery)\n"};
