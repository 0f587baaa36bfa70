/* cmd_scen.c -- `doctx batch-update` and `doctx interest run`: the CLI
 * faces of two of LeanCloud's scenarios (src/txn/batch/,
 * src/txn/interest/, docs/scenarios.md).  The library checks every
 * argument before it writes; this file splits arguments and maps errors
 * to exit codes. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *batch_help =
    "usage: doctx batch-update COLL FILTER UPDATE --id BATCH_ID\n"
    "                          [--deadline-ms N]\n"
    "Applies UPDATE (update operators, none touching _batches) once to\n"
    "every document of COLL matching FILTER, for batch BATCH_ID (1..64 of\n"
    "[A-Za-z0-9_-]).  Each document is marked _batches.BATCH_ID in the same\n"
    "atomic step as its update, so a batch that was interrupted is resumed\n"
    "by running it again, and never updates a document twice.  Prints\n"
    "{\"matched\",\"modified\",\"already\"}: documents matching FILTER,\n"
    "updated now, and updated before (by an earlier or concurrent run).\n"
    "exit: 0 done; 2 invalid input (nothing is written); 3 a document the\n"
    "      update cannot apply to (type, validator) stops the batch, named;\n"
    "      or the id was run with another FILTER or UPDATE (nothing written);\n"
    "      4 store error (run it again to resume)\n";

int dtx__cmd_batch_update(dtx_cli_t *cli, int argc, char **argv) {
  enum { O_ID, O_DEADLINE, O_N };
  dtx__cli_opt_t o[O_N] = {[O_ID] = {"--id", 1, NULL},
                           [O_DEADLINE] = {"--deadline-ms", 1, NULL}};
  char *pos[4];
  int64_t deadline = 0;
  int code = 0;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(batch_help);
  int n = dtx__cli_split(argc, argv, o, O_N, pos, 3);
  if (n < 0)
    return DTX_EXIT_USAGE;
  if (n != 3)
    return dtx__cli_usage("batch-update: expected COLL FILTER UPDATE");
  if (!o[O_ID].value)
    return dtx__cli_usage("batch-update: --id BATCH_ID is required");
  if (dtx__cli_int_opt("batch-update", &o[O_DEADLINE], 0, 1, &deadline))
    return DTX_EXIT_USAGE;
  json_t *filter = dtx__cli_json(pos[1], "FILTER");
  json_t *update = filter ? dtx__cli_json(pos[2], "UPDATE") : NULL;
  dtx_store_t *st = NULL;
  dtx_batch_result_t res = {0};
  int rc = 0;
  if (!update)
    code = DTX_EXIT_USAGE;
  else if ((st = dtx__cli_store_armed(cli, &code))) {
    dtx_exec_opts_t eo = {.deadline_ms = deadline};
    rc = dtx_batch_update(st, pos[0], filter, update, o[O_ID].value, &eo,
                          &res);
  }
  json_decref(filter);
  json_decref(update);
  if (!st)
    return code;
  /* The counts so far also after an error: how far a batch got. */
  json_t *sum = rc == 0 || res.matched
                    ? json_pack("{s:I,s:I,s:I}", "matched",
                                (json_int_t)res.matched, "modified",
                                (json_int_t)res.modified, "already",
                                (json_int_t)res.already)
                    : NULL;
  return dtx__cli_summary(rc, sum);
}

static const char *interest_help =
    "usage: doctx interest run --rate-ppm N --day YYYY-MM-DD\n"
    "                          [--settlement ID] [--lease-ms N]\n"
    "                          [--deadline-ms N]\n"
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
    "      (nothing is recorded); 4 store error (run it again)\n";

int dtx__cmd_interest(dtx_cli_t *cli, int argc, char **argv) {
  enum { O_RATE, O_DAY, O_SETTLE, O_LEASE, O_DEADLINE, O_N };
  dtx__cli_opt_t o[O_N] = {[O_RATE] = {"--rate-ppm", 1, NULL},
                           [O_DAY] = {"--day", 1, NULL},
                           [O_SETTLE] = {"--settlement", 1, NULL},
                           [O_LEASE] = {"--lease-ms", 1, NULL},
                           [O_DEADLINE] = {"--deadline-ms", 1, NULL}};
  char *pos[2];
  int64_t rate = 0;
  dtx_exec_opts_t eo = {0};
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(interest_help);
  int n = dtx__cli_split(argc, argv, o, O_N, pos, 1);
  if (n < 0)
    return DTX_EXIT_USAGE;
  if (n != 1 || strcmp(pos[0], "run") != 0)
    return dtx__cli_usage("interest: expected run");
  if (!o[O_RATE].value || !o[O_DAY].value)
    return dtx__cli_usage("interest run: --rate-ppm N and --day YYYY-MM-DD "
                          "are required");
  if (dtx__cli_int_opt("interest run", &o[O_RATE], 0, 0, &rate) ||
      dtx__cli_int_opt("interest run", &o[O_LEASE], 0, 1, &eo.lease_ms) ||
      dtx__cli_int_opt("interest run", &o[O_DEADLINE], 0, 1, &eo.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  dtx_interest_req_t req = {.day = o[O_DAY].value, .rate_ppm = rate,
                            .settlement = o[O_SETTLE].value};
  json_t *sum = NULL;
  int rc = dtx_interest_run(st, &req, &eo, &sum);
  return dtx__cli_summary(rc, sum);
}
