/* cmd_find.c -- doctx find COLL [FILTER]: one dtx_store_find, one
 * document per line. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *filter = NULL, *sort = NULL, *proj = NULL, *docs = NULL;
  dtx_find_opts_t fo = {.limit = dtx__cli_num(a, "--limit", 0),
                        .skip = dtx__cli_num(a, "--skip", 0)};
  int ec = dtx__cli_coll(a->pos[0]);
  if (!ec && !(ec = dtx__cli_filter(a->npos > 1 ? a->pos[1] : NULL, &filter)) &&
      !(ec = dtx__cli_checked(dtx__cli_str(a, "--sort"), "--sort",
                              dtx_check_sort, &sort)) &&
      !(ec = dtx__cli_checked(dtx__cli_str(a, "--project"), "--project",
                              dtx_check_projection, &proj))) {
    fo.sort = sort;
    fo.projection = proj;
    dtx_store_t *st = dtx__cli_store(cli, &ec);
    if (st)
      ec = dtx__cli_items(dtx_store_find(st, a->pos[0], filter, &fo, &docs),
                          &docs, 0, 0);
  }
  json_decref(filter);
  json_decref(sort);
  json_decref(proj);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_find = {
    "find", run, "COLL [FILTER]",
    (const dtx__cli_opt_t[]){
        {"--sort", DTX__CLI_STR, "S",
         "JSON object of path: 1 or -1, e.g. '{\"balance\":-1}'"},
        {"--limit", DTX__CLI_COUNT, "N", "at most N documents (0 = no limit)"},
        {"--skip", DTX__CLI_COUNT, "N", "skip the first N matches"},
        {"--project", DTX__CLI_STR, "P",
         "JSON projection, e.g. '{\"balance\":1}'"},
        {NULL}},
    DTX__CLI_DOC | DTX__CLI_READS, NULL, "prints matches, one per line",
    "Prints the documents of COLL matching FILTER (default {}), one JSON\n"
    "document per line.\n"};
