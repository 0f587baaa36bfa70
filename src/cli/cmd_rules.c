/* cmd_rules.c -- doctx rules COLL [--validator JSON] [--delete-guard
 * JSON] [--transition JSON] [--clear]: without options prints the rules;
 * --validator / --delete-guard / --transition replace that rule (JSON
 * null removes it) and keep the others; --clear removes them all.  The
 * library compiles the rules (a bad one exits 2 and changes nothing); the
 * result is printed as the store holds it. */
#include "cli/cli.h"

#include <string.h>

static const char *const opt[3] = {"--validator", "--delete-guard",
                                   "--transition"};
static const char *const key[3] = {"validator", "delete_guard",
                                   "transition"};

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *v[3] = {NULL, NULL, NULL}, *cur = NULL;
  int set = 0, clear = dtx__cli_has(a, "--clear"), rc = 0;
  int ec = dtx__cli_coll(a->pos[0]);
  for (int i = 0; i < 3; i++)
    set |= dtx__cli_has(a, opt[i]) << i;
  if (!ec && clear && set)
    ec = dtx__cli_usage("rules: --clear cannot be combined with --validator, "
                        "--delete-guard or --transition");
  for (int i = 0; i < 3 && !ec; i++)
    if ((set >> i & 1) && !(v[i] = dtx__cli_json(dtx__cli_str(a, opt[i]),
                                                  opt[i])))
      ec = DTX_EXIT_USAGE;
  /* Each new rule checked by the library before the store opens (bad
   * input creates no store); showing only reads: a missing store is
   * "no store" (exit 4), never a new one. */
  for (int i = 0; i < 3 && !ec; i++) {
    dtx_collection_rules_t one = {i == 0 ? v[0] : NULL, i == 1 ? v[1] : NULL,
                                  i == 2 ? v[2] : NULL};
    if (v[i] && !json_is_null(v[i]) && (rc = dtx_check_rules(&one)))
      ec = dtx__cli_fail(rc);
  }
  rc = 0;
  if (!set && !clear)
    cli->open_flags |= DTX_OPEN_NOCREATE;
  dtx_store_t *st = ec ? NULL : dtx__cli_store(cli, &ec);
  if (st && (set || clear)) {
    json_t *r[3] = {NULL, NULL, NULL};
    if (!clear && (rc = dtx_store_get_rules(st, a->pos[0], &cur)) == 0)
      for (int i = 0; i < 3; i++)
        r[i] = set >> i & 1 ? v[i] : json_object_get(cur, key[i]);
    /* The pattern a collection's rules belong to stays theirs. */
    dtx_rules_opts_t ro = {.bypass_validation =
                               dtx__cli_has(a, "--bypass-validation"),
                           .pattern = json_string_value(
                               json_object_get(cur, "pattern"))};
    dtx_collection_rules_t cr = {r[0], r[1], r[2]};
    if (rc == 0)
      rc = dtx_store_set_rules_ex(st, a->pos[0], &cr, &ro);
    json_decref(cur);
    cur = NULL;
  }
  if (st && rc == 0)
    rc = dtx_store_get_rules(st, a->pos[0], &cur);
  if (rc < 0)
    ec = dtx__cli_fail(rc);
  else if (st)
    dtx__cli_print_json(cur);
  for (int i = 0; i < 3; i++)
    json_decref(v[i]);
  json_decref(cur);
  return ec;
}

const dtx__cli_spec_t dtx__cmd_rules = {
    "rules", run, "COLL",
    (const dtx__cli_opt_t[]){
        {"--validator", DTX__CLI_STR, "JSON",
         "replace the validator (null removes it)"},
        {"--delete-guard", DTX__CLI_STR, "JSON",
         "replace the delete guard (null removes it)"},
        {"--transition", DTX__CLI_STR, "JSON",
         "replace the transition rule (null removes it)"},
        {"--clear", DTX__CLI_FLAG, NULL, "remove them all"},
        {"--bypass-validation", DTX__CLI_FLAG, NULL,
         "change rules a pattern owns (a pattern's own collection, or its "
         "transition rule in yours): without it such a change exits 3"},
        {NULL}},
    DTX__CLI_DOC, NULL, "shows or sets COLL's rules",
    "Prints COLL's rules as {\"validator\":...,\"delete_guard\":...,\n"
    "\"transition\":...}, after changing them when asked.  Every write to\n"
    "COLL must leave a document that matches the validator (query operators\n"
    "and/or $jsonSchema, as MongoDB's), every update must keep the\n"
    "transition rule (immutable and increasing fields, allowed moves), and\n"
    "a document must match the delete guard to be deleted (see\n"
    "docs/validation.md); a refused write exits 3 (VALIDATION) and changes\n"
    "nothing, unless the write bypasses validation explicitly.\n"};
