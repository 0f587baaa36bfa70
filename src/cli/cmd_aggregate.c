/* cmd_aggregate.c -- doctx aggregate COLL PIPELINE.  The pipeline is
 * compiled before the store is opened, like every other argument, so a
 * bad stage exits 2 having touched nothing. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *pipeline = NULL, *docs = NULL;
  int ec = dtx__cli_coll(a->pos[0]);
  if (!ec && !(ec = dtx__cli_checked(a->pos[1], "PIPELINE",
                                     dtx_check_pipeline, &pipeline))) {
    dtx_store_t *st = dtx__cli_store(cli, &ec);
    if (st)
      ec = dtx__cli_items(
          dtx_store_aggregate(st, a->pos[0], pipeline, NULL, &docs), &docs, 0,
          0);
  }
  json_decref(pipeline);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_aggregate = {
    "aggregate", run, "COLL PIPELINE", NULL, DTX__CLI_DOC | DTX__CLI_READS,
    NULL, "prints the results, one per line",
    "Runs the aggregation PIPELINE (a JSON array of stages such as\n"
    "[{\"$match\":{...}},{\"$unwind\":\"$a\"},{\"$group\":{...}}]) over COLL\n"
    "and prints the results, one JSON document per line.  A leading\n"
    "$match (and a $sort right after it) uses indexes; $group and $sort\n"
    "hold at most 100 MiB (exit 3 past it).\n"};
