/* cmd_drop.c -- doctx drop COLL: one dtx_store_drop_collection_ex. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_drop_opts_t o = {dtx__cli_has(a, "--bypass-validation")};
  int ec = dtx__cli_coll(a->pos[0]), rc;
  dtx_store_t *st = ec ? NULL : dtx__cli_store(cli, &ec);
  if (st && (rc = dtx_store_drop_collection_ex(st, a->pos[0], &o)) < 0)
    ec = dtx__cli_fail(rc);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_drop = {
    "drop", run, "COLL",
    (const dtx__cli_opt_t[]){{"--bypass-validation", DTX__CLI_FLAG}, {NULL}},
    DTX__CLI_DOC, NULL, "drops a collection",
    "Drops COLL with its documents and indexes (a missing COLL is fine).\n"
    "A collection with a delete guard is dropped only while it is empty\n"
    "(exit 3 otherwise, nothing changed) unless --bypass-validation.\n"};
