/* cmd_interest.c -- doctx interest run: the CLI face of LeanCloud's
 * daily-interest scenario (src/txn/interest/, docs/scenarios.md).  The
 * library checks every argument (the rate, the day) before it writes;
 * this file maps its errors to exit codes. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_interest_req_t req = {.day = dtx__cli_str(a, "--day"),
                            .rate_ppm = dtx__cli_num(a, "--rate-ppm", 0),
                            .settlement = dtx__cli_str(a, "--settlement")};
  dtx_exec_opts_t eo = {.lease_ms = dtx__cli_num(a, "--lease-ms", 0),
                        .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *sum = NULL;
  int code, rc = dtx_interest_req_check(&req); /* before the store opens */
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_summary(dtx_interest_run(st, &req, &eo, &sum), &sum)
            : code;
}

const dtx__cli_spec_t dtx__cmd_interest = {
    "interest", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"run", run, NULL,
         (const dtx__cli_opt_t[]){
             {"--rate-ppm", DTX__CLI_INT, "N", NULL, 1},
             {"--day", DTX__CLI_STR, "YYYY-MM-DD", NULL, 1},
             {"--settlement", DTX__CLI_STR, "ID"},
             DTX__CLI_OPT_LEASE, DTX__CLI_OPT_DEADLINE, {NULL}},
         DTX__CLI_ARMED},
        {NULL}},
    NULL,
    "Credits the day's interest, floor(balance * N / 1000000), to every\n"
    "account with a positive balance and a limit (never to the settlement\n"
    "account or other accounts without a limit).  Each credit is a transfer\n"
    "from the settlement account (default 'settlement', created on first\n"
    "use with no limit) with id interest:DAY:ACCOUNT, so running the same\n"
    "day again -- after a crash, or twice -- credits nothing twice: credits\n"
    "already recorded are finished, never recomputed; one a crash rolled\n"
    "back is made again as interest.2:DAY:ACCOUNT.  A credit a crashed run\n"
    "left is waited for until that run's lease lapses (its --lease-ms,\n"
    "default 30000), then rolled back and made again.  N is 0..1000000;\n"
    "DAY must be a real calendar date.  A day is paid at one rate: the\n"
    "first run records N and the settlement, and a rerun with others is\n"
    "refused (exit 3, nothing credited).  A credit id past 128 bytes (an\n"
    "account id of 109 bytes or more) carries the account id's SHA-256:\n"
    "interest-sha256:DAY:HEX.  Prints {\"day\",\"rate_ppm\",\"settlement\",\n"
    "\"accounts\",\"credited\",\"already\",\"pending\",\"failed\",\"skipped\",\n"
    "\"zero\",\"total\",\"refused\",\"refusals\"} (docs/scenarios.md), also\n"
    "when it exits 3 or 4: refusals lists the accounts not credited.\n"
    "exit: 0 done; 2 invalid input or a settlement account with a limit\n"
    "      (nothing is recorded); 3 some accounts not credited (a balance\n"
    "      that would overflow, a transfer under a credit id that is not\n"
    "      the credit, an id the transfers refuse: the others are\n"
    "      credited), or the day was run with another N or settlement\n"
    "      (nothing is recorded); 4 store error (run it again)\n"};
