/* cmd_batch_update.c -- doctx batch-update: the CLI face of LeanCloud's
 * batch-update scenario (src/txn/batchupdate/, docs/scenarios.md).  The library
 * checks every argument before it writes; this file maps its errors to
 * exit codes. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *filter = dtx__cli_json(a->pos[1], "FILTER");
  json_t *update = filter ? dtx__cli_json(a->pos[2], "UPDATE") : NULL;
  dtx_store_t *st = NULL;
  dtx_batch_result_t res = {0};
  int rc = 0, code = DTX_EXIT_USAGE;
  /* The library's checks before the store opens: bad input creates no
   * store. */
  if (update && (rc = dtx_batch_update_check(a->pos[0], filter, update,
                                             dtx__cli_str(a, "--id"))))
    code = dtx__cli_fail(rc);
  else if (update && (st = dtx__cli_store(cli, &code))) {
    dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
    rc = dtx_batch_update(st, a->pos[0], filter, update,
                          dtx__cli_str(a, "--id"), &eo, &res);
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
  return dtx__cli_summary(rc, &sum);
}

const dtx__cli_spec_t dtx__cmd_batch_update = {
    "batch-update", run, "COLL FILTER UPDATE",
    (const dtx__cli_opt_t[]){{"--id", DTX__CLI_STR, "BATCH_ID", NULL, 1},
                             DTX__CLI_OPT_DEADLINE, {NULL}},
    DTX__CLI_ARMED, NULL, NULL,
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
    "      4 store error (run it again to resume)\n"};
