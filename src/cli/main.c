/* main.c -- the doctx command: global options and dispatch.
 *
 * main() takes `--store URI` (or --store=URI) out of the argument list
 * wherever it appears before a `--`, so every command sees only its own
 * arguments, then hands the line to the command's spec (spec.c).  The
 * store is opened lazily by the command (dtx__cli_store) and closed
 * here. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every command, in doctx --help's order. */
static const dtx__cli_spec_t *const commands[] = {
    &dtx__cmd_insert,   &dtx__cmd_find,      &dtx__cmd_count,
    &dtx__cmd_update,   &dtx__cmd_find_and_modify, &dtx__cmd_aggregate,
    &dtx__cmd_delete,   &dtx__cmd_bulk,      &dtx__cmd_index,
    &dtx__cmd_indexes,  &dtx__cmd_drop,      &dtx__cmd_collections,
    &dtx__cmd_dump,     &dtx__cmd_rules,     &dtx__cmd_demo,
    &dtx__cmd_account,  &dtx__cmd_transfer,  &dtx__cmd_worker,
    &dtx__cmd_recover,  &dtx__cmd_audit,     &dtx__cmd_faults,
    &dtx__cmd_job,      &dtx__cmd_lock,      &dtx__cmd_sync,
    &dtx__cmd_ledger,   &dtx__cmd_order,     &dtx__cmd_version,
    &dtx__cmd_batch_update, &dtx__cmd_interest, &dtx__cmd_txn, NULL};

static const dtx__cli_spec_t *find_command(const char *name) {
  for (const dtx__cli_spec_t *const *c = commands; *c; c++)
    if (strcmp((*c)->name, name) == 0)
      return *c;
  return NULL;
}

int main(int argc, char **argv) {
  dtx_cli_t cli = {NULL, NULL, 0, 0};
  /* args: argv without --store, so commands never see it. */
  char **args = calloc((size_t)argc + 1, sizeof *args);
  int nargs = 0, dashdash = 0, stores = 0, ec = DTX_EXIT_OK;
  if (!args) {
    fputs("doctx: NOMEM: parsing arguments\n", stderr);
    return DTX_EXIT_BACKEND;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    dashdash |= strcmp(a, "--") == 0;
    int store = !dashdash && (strcmp(a, "--store") == 0 ||
                              strncmp(a, "--store=", 8) == 0);
    if (store && cli.uri) /* the last one silently won */
      stores++;
    if (store && a[7] == '=')
      cli.uri = a + 8;
    else if (store)
      cli.uri = i + 1 < argc ? argv[++i] : "";
    else
      args[nargs++] = argv[i];
  }
  const char *first = nargs ? args[0] : NULL;
  const dtx__cli_spec_t *cmd = first ? find_command(first) : NULL;
  if (cli.uri && !*cli.uri)
    ec = dtx__cli_usage("--store needs a URI");
  else if (stores)
    ec = dtx__cli_usage("--store given twice");
  else if (first && strcmp(first, "--") == 0)
    ec = dtx__cli_usage("-- before the command: give the command first "
                        "(doctx COMMAND [OPTIONS] -- ARGUMENTS)");
  else if (first && nargs > 1 && (strcmp(first, "--version") == 0 ||
                                  strcmp(first, "--help") == 0 ||
                                  strcmp(first, "-h") == 0))
    ec = dtx__cli_usage("%s takes no arguments, got '%s' (doctx COMMAND "
                        "--help for a command's)", first, args[1]);
  else if (!first) { /* global options come before the command */
    dtx__cli_print_usage(stderr, commands);
    ec = DTX_EXIT_USAGE;
  } else if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0)
    dtx__cli_print_usage(stdout, commands);
  else if (strcmp(first, "--version") == 0)
    printf("doctx %s\n", DOCTX_VERSION);
  else if (first[0] == '-')
    ec = dtx__cli_usage("unknown option '%s' (see doctx --help)", first);
  else if (!cmd)
    ec = dtx__cli_usage("unknown command '%s' (see doctx --help)", first);
  else
    ec = dtx__cli_run(&cli, cmd, nargs, args);
  dtx_store_close(cli.st);
  free(args);
  if (fflush(stdout) != 0 && ec == DTX_EXIT_OK) {
    perror("doctx: writing output");
    ec = DTX_EXIT_BACKEND;
  }
  return ec;
}
