/* cmd_find_and_modify.c -- doctx find-and-modify COLL FILTER UPDATE: the
 * primitive, one dtx_store_find_one_and_update. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *filter = NULL, *update = NULL, *sort = NULL, *doc = NULL,
         *afs = NULL;
  dtx_fam_opts_t fo = {.upsert = dtx__cli_has(a, "--upsert"),
                       .return_new = dtx__cli_has(a, "--new"),
                       .bypass_validation =
                           dtx__cli_has(a, "--bypass-validation")};
  int ec = dtx__cli_coll(a->pos[0]), rc;
  if (!ec && !(ec = dtx__cli_fence(a->cmd, dtx__cli_str(a, "--fence"),
                                   &fo.fence_name, &fo.fence_token)) &&
      !(ec = dtx__cli_filter(a->pos[1], &filter)) &&
      !(ec = dtx__cli_update(a->pos[2], dtx__cli_str(a, "--array-filters"),
                             0, &update, &afs)) &&
      !(ec = dtx__cli_checked(dtx__cli_str(a, "--sort"), "--sort",
                              dtx_check_sort, &sort))) {
    fo.sort = sort;
    fo.array_filters = afs;
    dtx_store_t *st = dtx__cli_store(cli, &ec);
    rc = st ? dtx_store_find_one_and_update(st, a->pos[0], filter, update,
                                            &fo, &doc)
            : 0;
    if (rc == DTX_ENOMATCH)
      ec = DTX_EXIT_NOMATCH; /* silent, like grep: the exit code says it */
    else if (rc < 0)
      ec = dtx__cli_fail(rc);
    else if (st && doc)
      dtx__cli_print_json(doc);
    else if (st)
      puts("null"); /* upserted, and there was no document before */
  }
  json_decref(filter);
  json_decref(update);
  json_decref(afs);
  json_decref(sort);
  json_decref(doc);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_find_and_modify = {
    "find-and-modify", run, "COLL FILTER UPDATE",
    (const dtx__cli_opt_t[]){
        {"--sort", DTX__CLI_STR, "S", "which match to modify when several do"},
        {"--new", DTX__CLI_FLAG, NULL, "print the document after the update"},
        {"--upsert", DTX__CLI_FLAG, NULL,
         "insert a document when none matches (without --new this prints "
         "null)"},
        {"--array-filters", DTX__CLI_STR, "JSON",
         "filters for the $[id] paths of UPDATE"},
        {"--bypass-validation", DTX__CLI_FLAG, NULL,
         "skip COLL's validator (see doctx rules)"},
        DTX__CLI_OPT_FENCE, {NULL}},
    DTX__CLI_DOC, NULL, "the primitive; prints the document",
    "The primitive: atomically finds one document matching FILTER, applies\n"
    "UPDATE and prints the document as it was before (or after, with\n"
    "--new).  Exits 1, printing nothing, when no document matched.\n"};
