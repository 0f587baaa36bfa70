/* cmd_delete.c -- doctx delete COLL FILTER: one dtx_store_delete_ex,
 * printing {"deleted":N}. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *filter = NULL;
  dtx_delete_opts_t dopt = {.many = dtx__cli_has(a, "--many"),
                            .bypass_validation =
                                dtx__cli_has(a, "--bypass-validation")};
  int64_t n = 0;
  int ec = dtx__cli_coll(a->pos[0]), rc;
  dtx_store_t *st = NULL;
  if (!ec && !(ec = dtx__cli_fence(a->cmd, dtx__cli_str(a, "--fence"),
                                   &dopt.fence_name, &dopt.fence_token)) &&
      !(ec = dtx__cli_filter(a->pos[1], &filter)) &&
      (st = dtx__cli_store(cli, &ec))) {
    if ((rc = dtx_store_delete_ex(st, a->pos[0], filter, &dopt, &n)) < 0)
      ec = dtx__cli_fail(rc);
    else
      printf("{\"deleted\":%lld}\n", (long long)n);
  }
  json_decref(filter);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_delete = {
    "delete", run, "COLL FILTER",
    (const dtx__cli_opt_t[]){{"--many", DTX__CLI_FLAG, NULL, NULL},
                             {"--bypass-validation", DTX__CLI_FLAG, NULL,
                              "skip COLL's delete guard (see doctx rules)"},
                             DTX__CLI_OPT_FENCE, {NULL}},
    DTX__CLI_DOC, NULL, "prints {\"deleted\":N}",
    "Deletes the first (or with --many, every) document matching FILTER and\n"
    "prints {\"deleted\":N}.\n"};
