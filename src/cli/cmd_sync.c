/* cmd_sync.c -- `doctx sync ...`: the CLI face of the sync flag
 * (src/txn/sync/, docs/sync.md).  The library checks the rule, the
 * UPDATE and the names before it writes; this file splits arguments and
 * maps errors to exit codes. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *sync_help =
    "usage: doctx sync rule NAME --master COLL --dependents COLL --link FIELD\n"
    "                  --copy SRC:DST[,SRC:DST...]\n"
    "       doctx sync update NAME MASTER_ID UPDATE [--lease-ms N]\n"
    "                  [--owner NAME] [--deadline-ms N]\n"
    "       doctx sync show NAME\n"
    "       doctx sync repair [--older-than-ms N] [--deadline-ms N]\n"
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
    "      4 store error (the flags are left for repair)\n";

enum { O_MASTER, O_DEPS, O_LINK, O_COPY, O_LEASE, O_OWNER, O_DEADLINE,
       O_OLDER, O_N };

/* The options given that sub does not take; 0 when none. */
static int stray(const char *sub, const dtx__cli_opt_t *o, const int *ok) {
  return dtx__cli_stray("sync", sub, o, O_N, ok);
}

static int sync_rule(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  static const int ok[] = {O_MASTER, O_DEPS, O_LINK, O_COPY, -1};
  int code;
  if (n != 2)
    return dtx__cli_usage("sync rule: expected NAME");
  if ((code = stray("rule", o, ok)))
    return code;
  for (int i = O_MASTER; i <= O_COPY; i++)
    if (!o[i].value)
      return dtx__cli_usage("sync rule: %s is required", o[i].name);
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  dtx_sync_rule_t r = {.name = pos[1], .master = o[O_MASTER].value,
                       .dependents = o[O_DEPS].value,
                       .link = o[O_LINK].value, .copy = o[O_COPY].value};
  json_t *doc = NULL;
  int rc = dtx_sync_rule_define(st, &r, &doc);
  return dtx__cli_summary(rc, doc);
}

static int sync_update(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  static const int ok[] = {O_LEASE, O_OWNER, O_DEADLINE, -1};
  int64_t lease = 0, deadline = 0;
  int code;
  if (n != 4)
    return dtx__cli_usage("sync update: expected NAME MASTER_ID UPDATE");
  if ((code = stray("update", o, ok)) ||
      dtx__cli_int_opt("sync update", &o[O_LEASE], 0, 1, &lease) ||
      dtx__cli_int_opt("sync update", &o[O_DEADLINE], 0, 1, &deadline))
    return code ? code : DTX_EXIT_USAGE;
  json_t *update = dtx__cli_json(pos[3], "UPDATE");
  if (!update)
    return DTX_EXIT_USAGE;
  dtx_store_t *st = NULL;
  json_t *res = NULL;
  int rc = 0;
  if (!(code = dtx__cli_faults_ok()) && (st = dtx__cli_store(cli, &code))) {
    dtx_exec_opts_t eo = {.owner = o[O_OWNER].value, .lease_ms = lease,
                          .deadline_ms = deadline};
    rc = dtx_sync_update(st, pos[1], pos[2], update, &eo, &res);
  }
  json_decref(update);
  return st ? dtx__cli_summary(rc, res) : code;
}

static int sync_repair(dtx_cli_t *cli, int n, dtx__cli_opt_t *o) {
  static const int ok[] = {O_OLDER, O_DEADLINE, -1};
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  int code;
  if (n != 1)
    return dtx__cli_usage("sync repair: takes no arguments");
  if ((code = stray("repair", o, ok)) ||
      dtx__cli_int_opt("sync repair", &o[O_OLDER], 0, 0, &ro.older_than_ms) ||
      dtx__cli_int_opt("sync repair", &o[O_DEADLINE], 0, 1, &ro.deadline_ms))
    return code ? code : DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *sum = NULL;
  int rc = dtx_sync_repair(st, &ro, &sum);
  return dtx__cli_summary(rc, sum);
}

int dtx__cmd_sync(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[O_N] = {
      [O_MASTER] = {"--master", 1, NULL},
      [O_DEPS] = {"--dependents", 1, NULL},
      [O_LINK] = {"--link", 1, NULL},
      [O_COPY] = {"--copy", 1, NULL},
      [O_LEASE] = {"--lease-ms", 1, NULL},
      [O_OWNER] = {"--owner", 1, NULL},
      [O_DEADLINE] = {"--deadline-ms", 1, NULL},
      [O_OLDER] = {"--older-than-ms", 1, NULL}};
  char *pos[5];
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(sync_help);
  int n = dtx__cli_split(argc, argv, o, O_N, pos, 4);
  if (n < 0)
    return DTX_EXIT_USAGE;
  if (n == 0)
    return dtx__cli_usage("sync: expected rule, update, show or repair");
  const char *sub = pos[0];
  if (strcmp(sub, "rule") == 0)
    return sync_rule(cli, pos, n, o);
  if (strcmp(sub, "update") == 0)
    return sync_update(cli, pos, n, o);
  if (strcmp(sub, "repair") == 0)
    return sync_repair(cli, n, o);
  if (strcmp(sub, "show") != 0)
    return dtx__cli_usage("sync: expected rule, update, show or repair; got "
                          "'%s'", sub);
  static const int ok[] = {-1};
  if (n != 2)
    return dtx__cli_usage("sync show: expected NAME");
  if ((code = stray("show", o, ok)))
    return code;
  dtx_store_t *st = dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *doc = NULL;
  int rc = dtx_sync_rule_get(st, pos[1], &doc);
  return dtx__cli_summary(rc, doc);
}
