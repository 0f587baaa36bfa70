/* cmd_count.c -- doctx count COLL [FILTER]: one dtx_store_count. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *filter = NULL;
  int64_t n;
  int ec = dtx__cli_coll(a->pos[0]), rc;
  dtx_store_t *st = NULL;
  if (!ec && !(ec = dtx__cli_filter(a->npos > 1 ? a->pos[1] : NULL, &filter)) &&
      (st = dtx__cli_store(cli, &ec))) {
    if ((rc = dtx_store_count(st, a->pos[0], filter, &n)) < 0)
      ec = dtx__cli_fail(rc);
    else
      printf("%lld\n", (long long)n);
  }
  json_decref(filter);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_count = {
    "count", run, "COLL [FILTER]", NULL, DTX__CLI_DOC | DTX__CLI_READS, NULL,
    "prints the number of matches",
    "Prints how many documents of COLL match FILTER (default {}).\n"};
