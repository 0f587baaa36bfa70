/* cmd_insert.c -- doctx insert COLL DOC...: every DOC checked, then one
 * dtx_store_insert_many_ex. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *docs = json_array(), *ids = NULL;
  int ec = dtx__cli_coll(a->pos[0]);
  if (!ec && !docs)
    ec = dtx__cli_fail(DTX_ENOMEM);
  for (int i = 1; !ec && i < a->npos; i++) {
    char what[32];
    snprintf(what, sizeof what, a->npos > 2 ? "DOC %d" : "DOC", i);
    json_t *d = dtx__cli_json(a->pos[i], what), *id;
    int rc;
    if (!d) {
      ec = DTX_EXIT_USAGE;
      break;
    }
    json_array_append_new(docs, d);
    if (!json_is_object(d))
      ec = dtx__cli_error(DTX_EINVAL, "%s must be a JSON object", what);
    else if ((id = json_object_get(d, "_id")) && (rc = dtx_check_id(id)) < 0)
      ec = dtx__cli_error(rc, "%s: %s", what, dtx_errdetail());
  }
  dtx_store_t *st = ec ? NULL : dtx__cli_store(cli, &ec);
  if (st) {
    size_t n = 0;
    dtx_insert_opts_t io = {.bypass_validation =
                                dtx__cli_has(a, "--bypass-validation")};
    int rc = dtx_store_insert_many_ex(st, a->pos[0], docs, &io, &n, &ids);
    dtx__cli_items(0, &ids, 0, 0);
    if (rc < 0)
      ec = dtx__cli_fail(rc);
  }
  json_decref(docs);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_insert = {
    "insert", run, "COLL DOC...",
    (const dtx__cli_opt_t[]){{"--bypass-validation", DTX__CLI_FLAG, NULL,
                              "skip COLL's validator (see doctx rules)"},
                             {NULL}},
    DTX__CLI_DOC, NULL, "insert; prints each _id",
    "Inserts each DOC (one JSON object per argument) into COLL, in order,\n"
    "and prints each _id as JSON, one per line.  A missing _id is\n"
    "generated.  Every DOC is checked before any is inserted; if one fails\n"
    "in the store, the ids of those already inserted are still printed.\n"};
