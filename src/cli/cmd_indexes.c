/* cmd_indexes.c -- doctx indexes COLL: one index per line. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *out = NULL;
  int ec = dtx__cli_coll(a->pos[0]);
  dtx_store_t *st = ec ? NULL : dtx__cli_store(cli, &ec);
  if (st)
    ec = dtx__cli_items(dtx_store_list_indexes(st, a->pos[0], &out), &out, 0,
                        0);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_indexes = {
    "indexes", run, "COLL", NULL, DTX__CLI_DOC | DTX__CLI_READS, NULL,
    "lists indexes",
    "Prints the indexes of COLL, one JSON object per line.\n"};
