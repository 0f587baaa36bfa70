/* cmd_index.c -- doctx index COLL KEYS: one dtx_store_create_index,
 * printing the index's name. */
#include "cli/cli.h"

#include <stdlib.h>

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_index_opts_t io = {.unique = dtx__cli_has(a, "--unique"),
                         .sparse = dtx__cli_has(a, "--sparse"),
                         .bypass_validation =
                             dtx__cli_has(a, "--bypass-validation")};
  json_t *keys = NULL;
  char *name = NULL;
  int ec = dtx__cli_coll(a->pos[0]), rc;
  if (!ec && !(keys = dtx__cli_json(a->pos[1], "KEYS")))
    ec = DTX_EXIT_USAGE;
  else if (!ec && (rc = dtx_check_index(keys, &io)) < 0)
    ec = dtx__cli_fail(rc);
  dtx_store_t *st = ec ? NULL : dtx__cli_store(cli, &ec);
  if (st && (rc = dtx_store_create_index(st, a->pos[0], keys, &io, &name)) < 0)
    ec = dtx__cli_fail(rc);
  else if (st)
    puts(name);
  json_decref(keys);
  free(name);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_index = {
    "index", run, "COLL KEYS",
    (const dtx__cli_opt_t[]){
        {"--unique", DTX__CLI_FLAG, NULL,
         "refuse two documents with the same key (exit 3)"},
        {"--sparse", DTX__CLI_FLAG, NULL,
         "leave out documents that have none of the fields"},
        {"--bypass-validation", DTX__CLI_FLAG, NULL,
         "a unique index on a pattern's collection (which could refuse its "
         "steps: exit 3 without this)"},
        {NULL}},
    DTX__CLI_DOC, NULL, "creates an index; prints its name",
    "Creates an index on KEYS (JSON object of path: 1 or -1, in order) and\n"
    "prints its name.  Creating the same index again does nothing.\n"};
