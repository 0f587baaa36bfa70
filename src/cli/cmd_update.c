/* cmd_update.c -- doctx update COLL FILTER UPDATE: one dtx_store_update,
 * printing {"matched","modified"[,"upserted"]}. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *filter = NULL, *update = NULL, *afs = NULL;
  dtx_update_opts_t uo = {.many = dtx__cli_has(a, "--many"),
                          .upsert = dtx__cli_has(a, "--upsert"),
                          .bypass_validation =
                              dtx__cli_has(a, "--bypass-validation")};
  dtx_update_result_t res;
  int ec = dtx__cli_coll(a->pos[0]), rc;
  if (!ec && !(ec = dtx__cli_fence(a->cmd, dtx__cli_str(a, "--fence"),
                                   &uo.fence_name, &uo.fence_token)) &&
      !(ec = dtx__cli_filter(a->pos[1], &filter)) &&
      !(ec = dtx__cli_update(a->pos[2], dtx__cli_str(a, "--array-filters"),
                             uo.many, &update, &afs))) {
    uo.array_filters = afs;
    dtx_store_t *st = dtx__cli_store(cli, &ec);
    if (st && (rc = dtx_store_update(st, a->pos[0], filter, update, &uo,
                                     &res)) < 0)
      ec = dtx__cli_fail(rc);
    else if (st) {
      json_t *r = json_pack("{sIsI}", "matched", (json_int_t)res.matched,
                            "modified", (json_int_t)res.modified);
      if (r && res.upserted_id)
        json_object_set(r, "upserted", res.upserted_id);
      dtx__cli_print_json(r);
      json_decref(r);
      json_decref(res.upserted_id);
    }
  }
  json_decref(filter);
  json_decref(update);
  json_decref(afs);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_update = {
    "update", run, "COLL FILTER UPDATE",
    (const dtx__cli_opt_t[]){
        {"--many", DTX__CLI_FLAG, NULL,
         "update every matching document (each atomically)"},
        {"--upsert", DTX__CLI_FLAG, NULL,
         "insert a document built from FILTER and UPDATE if none matches"},
        {"--array-filters", DTX__CLI_STR, "JSON",
         "MongoDB's arrayFilters: a JSON array of filters, one per $[id] in "
         "UPDATE's paths, e.g. '[{\"x.grade\":{\"$gte\":85}}]'"},
        {"--bypass-validation", DTX__CLI_FLAG, NULL,
         "skip COLL's validator (see doctx rules)"},
        DTX__CLI_OPT_FENCE, {NULL}},
    DTX__CLI_DOC, NULL, "prints {\"matched\":N,\"modified\":M}",
    "Applies UPDATE (operators such as {\"$inc\":{\"n\":1}}, or a replacement\n"
    "document) to the first document matching FILTER and prints\n"
    "{\"matched\":N,\"modified\":M}, plus \"upserted\":ID when one was\n"
    "inserted.\n"};
