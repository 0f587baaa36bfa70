/* cmd_collections.c -- doctx collections: the names, sorted, one per
 * line. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *names = NULL;
  int ec = 0, rc;
  (void)a;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (st && (rc = dtx_store_list_collections(st, &names)) < 0)
    ec = dtx__cli_fail(rc);
  /* Plain names: they are [A-Za-z0-9_.-] only, and shell loops want them
   * unquoted. */
  for (size_t i = 0; i < json_array_size(names); i++)
    puts(json_string_value(json_array_get(names, i)));
  json_decref(names);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_collections = {
    "collections", run, NULL, NULL, DTX__CLI_DOC | DTX__CLI_READS, NULL,
    "lists collections",
    "Prints the collection names, sorted, one per line.\n"};
