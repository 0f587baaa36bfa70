/* cmd_txn.c -- doctx txn: one multi-document transaction given as a
 * script, and doctx txn show ID, its outcome (src/txn/multi/,
 * docs/transactions.md).  The library checks the script and the options
 * before the store opens; this file reads the arguments and maps the
 * errors to exit codes. */
#include <string.h>

#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *iso = dtx__cli_str(a, "--isolation");
  dtx_txn_opts_t o = {
      .isolation = !iso || strcmp(iso, "snapshot") == 0 ? DTX_TXN_SNAPSHOT
                   : strcmp(iso, "serializable") == 0 ? DTX_TXN_SERIALIZABLE
                                                      : -1,
      .id = dtx__cli_str(a, "--id"),
      .lease_ms = dtx__cli_num(a, "--lease-ms", 0),
      .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *script = dtx__cli_json(a->pos[0], "SCRIPT"), *out = NULL;
  if (!script)
    return DTX_EXIT_USAGE;
  int rc = dtx_txn_opts_check(&o), code;
  if (rc == 0)
    rc = dtx_txn_script_check(script); /* before the open: exit 2 */
  if (rc) {
    json_decref(script);
    return dtx__cli_fail(rc);
  }
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (st) {
    rc = dtx_txn_script_run(st, &o, script, &out);
    if (out) /* committed, or aborted by a require (exit 1) */
      dtx__cli_print_json(out);
    code = rc == 0 ? DTX_EXIT_OK
           : out   ? DTX_EXIT_NOMATCH
                   : dtx__cli_fail(rc);
  }
  json_decref(out);
  json_decref(script);
  return code;
}

static int show(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int code, outcome = DTX_TXN_UNKNOWN;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  int rc = dtx_txn_outcome(st, a->pos[0], &outcome);
  if (rc)
    return dtx__cli_fail(rc);
  json_t *o = json_pack("{s:s,s:s}", "id", a->pos[0], "outcome",
                        outcome == DTX_TXN_COMMITTED ? "committed"
                        : outcome == DTX_TXN_ABORTED ? "aborted"
                                                     : "unknown");
  dtx__cli_print_json(o);
  json_decref(o);
  return DTX_EXIT_OK;
}

const dtx__cli_spec_t dtx__cmd_txn = {
    "txn", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"show", show, "ID", NULL, DTX__CLI_ARMED},
        {"", run, "SCRIPT",
         (const dtx__cli_opt_t[]){{"--isolation", DTX__CLI_STR,
                                   "snapshot|serializable"},
                                  {"--id", DTX__CLI_STR, "ID"},
                                  DTX__CLI_OPT_LEASE,
                                  DTX__CLI_OPT_DEADLINE,
                                  {NULL}},
         DTX__CLI_ARMED},
        {NULL}},
    NULL,
    "txn runs SCRIPT (a JSON array, or - for stdin) as one transaction and\n"
    "prints {\"outcome\":\"committed\"|\"aborted\",\"reads\":{NAME: doc|null}}.\n"
    "Steps, in order: {\"find_one\":COLL,\"filter\":F,\"as\":NAME},\n"
    "{\"find\":COLL,\"filter\":F,\"limit\":N,\"as\":NAME},\n"
    "{\"require\":NAME,\"filter\":F} (aborts unless NAME matches F),\n"
    "{\"insert\":COLL,\"doc\":D}, {\"update\":COLL,\"filter\":F,\"with\":U,\n"
    "\"upsert\":BOOL}, {\"delete\":COLL,\"filter\":F}.  Reads are at one\n"
    "snapshot (--isolation snapshot, the default) or also validated at\n"
    "commit (serializable); conflicts are retried until the deadline.\n"
    "--id ID names the transaction, so txn show ID can tell its outcome\n"
    "after exit 4; show of an id with no record fences it (aborted).\n"
    "exit: 0 committed; 1 aborted by a require, nothing written; 2 invalid\n"
    "      script or option (nothing is written); 3 a conflict still\n"
    "      unresolved at the deadline, a write refused by a collection's\n"
    "      rules; 4 store unavailable, the outcome unknown (txn show ID)\n"};
