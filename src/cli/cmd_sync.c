/* cmd_sync.c -- doctx sync: the CLI face of the sync flag
 * (src/txn/sync/, docs/sync.md).  The library checks the rule, the
 * UPDATE and the names before it writes; this file maps its errors to
 * exit codes. */

#include "cli/cli.h"

static int rule(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_sync_rule_t r = {.name = a->pos[0],
                       .master = dtx__cli_str(a, "--master"),
                       .dependents = dtx__cli_str(a, "--dependents"),
                       .link = dtx__cli_str(a, "--link"),
                       .copy = dtx__cli_str(a, "--copy")};
  json_t *doc = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_summary(dtx_sync_rule_define(st, &r, &doc), &doc) : code;
}

static int update(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_exec_opts_t eo = {.owner = dtx__cli_str(a, "--owner"),
                        .lease_ms = dtx__cli_num(a, "--lease-ms", 0),
                        .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *res = NULL, *u = dtx__cli_json(a->pos[2], "UPDATE");
  int code, rc = 0;
  if (!u)
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (st)
    rc = dtx_sync_update(st, a->pos[0], a->pos[1], u, &eo, &res);
  json_decref(u);
  return st ? dtx__cli_summary(rc, &res) : code;
}

static int repair(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_recover_opts_t ro = {
      .older_than_ms = dtx__cli_num(a, "--older-than-ms", -1),
      .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *sum = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_summary(dtx_sync_repair(st, &ro, &sum), &sum) : code;
}

static int show(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *doc = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_summary(dtx_sync_rule_get(st, a->pos[0], &doc), &doc)
            : code;
}

const dtx__cli_spec_t dtx__cmd_sync = {
    "sync", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"rule", rule, "NAME",
         (const dtx__cli_opt_t[]){
             {"--master", DTX__CLI_STR, "COLL", NULL, 1},
             {"--dependents", DTX__CLI_STR, "COLL", NULL, 1},
             {"--link", DTX__CLI_STR, "FIELD", NULL, 1},
             {"--copy", DTX__CLI_STR, "SRC:DST[,SRC:DST...]", NULL, 1},
             {NULL}},
         DTX__CLI_ARMED},
        {"update", update, "NAME MASTER_ID UPDATE",
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_LEASE,
                                  {"--owner", DTX__CLI_STR, "NAME"},
                                  DTX__CLI_OPT_DEADLINE, {NULL}},
         DTX__CLI_ARMED},
        {"show", show, "NAME", NULL, DTX__CLI_READS},
        {"repair", repair, NULL,
         (const dtx__cli_opt_t[]){{"--older-than-ms", DTX__CLI_COUNT, "N"},
                                  DTX__CLI_OPT_DEADLINE, {NULL}},
         DTX__CLI_ARMED},
        {NULL}},
    NULL,
    "rule records how master documents' fields (SRC) are copied into the\n"
    "dependents whose FIELD holds the master's _id (DST); it prints the rule.\n"
    "The same definition again is a no-op; another one under the same NAME\n"
    "exits 3 (rules are never replaced).\n"
    "update applies UPDATE (update operators; it may not touch _syncm,\n"
    "_syncing or _sync) to master MASTER_ID, raising its version and setting\n"
    "its syncing flag in the same step, then copies the fields into every\n"
    "dependent reflecting an older version and clears the flag if it is\n"
    "still its own.  Every other rule on the same master collection whose\n"
    "SRC fields UPDATE can change is flagged in the same step and propagated\n"
    "too.  It prints {\"rule\",\"master\",\"version\",\"dependents\"\n"
    "(written),\"flag_cleared\",\"also\":[the same for each other rule]}.\n"
    "A change interrupted leaves its flags (live for --lease-ms, default\n"
    "30000).\n"
    "repair re-propagates every stale flag (lease lapsed, or set at least\n"
    "--older-than-ms ago) from the master's current values and prints a\n"
    "JSON summary; doctx recover and doctx worker do the same.\n"
    "A new rule may not write a field another rule writes or links by, nor\n"
    "copy into a field another rule copies from (exit 3).\n"
    "exit: 0 ok; 1 no such rule or master (nothing is created); 2 invalid\n"
    "      input (nothing is recorded); 3 a rule redefined differently or\n"
    "      clashing with another, a write refused by a collection's rules;\n"
    "      4 store error (the flags are left for repair)\n"};
