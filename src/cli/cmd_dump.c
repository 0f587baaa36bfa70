/* cmd_dump.c -- doctx dump: every collection's header line (indexes,
 * rules, count) and its documents by _id.  The crash and bad-input suites
 * compare whole stores after each row; one process doing it replaces some
 * ten per row. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *names = NULL, *sort = json_pack("{s:i}", "_id", 1);
  int ec = 0, rc = 0;
  (void)a;
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (st)
    rc = dtx_store_list_collections(st, &names);
  for (size_t i = 0; rc >= 0 && i < json_array_size(names); i++) {
    const char *c = json_string_value(json_array_get(names, i));
    json_t *idx = NULL, *rules = NULL, *docs = NULL;
    dtx_find_opts_t fo = {.sort = sort};
    if ((rc = dtx_store_list_indexes(st, c, &idx)) >= 0 &&
        (rc = dtx_store_get_rules(st, c, &rules)) >= 0 &&
        (rc = dtx_store_find(st, c, NULL, &fo, &docs)) >= 0) {
      json_t *head = json_pack("{s:s,s:O,s:O,s:I}", "collection", c, "indexes",
                               idx, "rules", rules, "count",
                               (json_int_t)json_array_size(docs));
      dtx__cli_print_json(head);
      json_decref(head);
      dtx__cli_items(0, &docs, 0, 0);
    }
    json_decref(docs);
    json_decref(idx);
    json_decref(rules);
  }
  if (rc < 0)
    ec = dtx__cli_fail(rc);
  json_decref(names);
  json_decref(sort);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_dump = {
    "dump", run, NULL, NULL, DTX__CLI_DOC | DTX__CLI_READS, NULL,
    "prints every collection: its indexes, rules and documents",
    "Prints the whole store for inspection or comparison: per collection\n"
    "(sorted by name) one line {\"collection\",\"indexes\",\"rules\",\"count\"},\n"
    "then its documents sorted by _id, one per line.  Each collection is\n"
    "one read; the dump is not one snapshot across collections.\n"};
