/* cmd_txn.c -- the account, transfer, worker, recover, audit and faults
 * commands: the CLI face of src/txn/.  Every argument is validated before
 * the store is opened, so bad input records nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char *account_help =
    "usage: doctx account create ID [--balance N] [--min-balance N|none]\n"
    "       doctx account limit ID N|none\n"
    "       doctx account show ID\n"
    "       doctx account list [--limit N] [--skip N]\n"
    "Balances are int64 minor units. --balance defaults to 0 and becomes the\n"
    "account's opening_balance. --min-balance defaults to 0; 'none' means no\n"
    "limit (external or settlement accounts).  limit sets the lowest balance\n"
    "a debit may leave, only if the balance meets it ('none': no limit);\n"
    "it is how a limit changes -- `doctx update` may not touch an account's\n"
    "balance, limit or markers.  list prints the accounts by\n"
    "id, skipping the first --skip, at most --limit (0: all).  Timestamps\n"
    "print as ISO 8601 UTC (stored as integer ms).\n"
    "exit: 0 ok, 1 no such account (show, limit), 2 invalid input, 3 account\n"
    "      exists, or a limit above the balance, 4 store error\n";

/* The deadline rule, shared by the commands that run protocol steps
 * (docs/deadlines.md). */
#define DEADLINE_HELP                                                        \
  "Deadline: the whole command runs under one budget -- --deadline-ms N,\n"  \
  "or else the store's retry window counted once (Redis: the URI's\n"        \
  "retry_ms, default 10000; SQLite: 5 minutes of waiting for a lock),\n"     \
  "plus at most one request timeout in flight (Redis timeout_ms).  When it\n" \
  "runs out the command exits 4 saying what it was waiting for, and leaves\n" \
  "any half-done work for `doctx recover`.\n"

static const char *transfer_help =
    "usage: doctx transfer FROM TO AMOUNT [--id ID] [--async] [--deadline-ms N]\n"
    "       doctx transfer show ID\n"
    "       doctx transfer list [--state S] [--limit N] [--skip N]\n"
    "       doctx transfer cancel ID\n"
    "       doctx transfer batch [--file PATH] [--deadline-ms N]\n"
    "A synchronous transfer runs to a terminal state and prints the transfer\n"
    "document; --async records it (state initiated) for a worker.  --id makes\n"
    "the request idempotent: the same id with the same parameters returns the\n"
    "existing transfer, with other parameters it is a conflict.  list prints\n"
    "in creation order, skipping the first --skip, at most --limit (0: all).\n"
    "Printed transfers show timestamps as ISO 8601 UTC (stored as integer\n"
    "ms); --verbose also shows the executor's owner, lease_until and epoch.\n"
    "batch runs many synchronous transfers, one JSON object per line of stdin\n"
    "(or PATH): {\"from\":\"A\",\"to\":\"B\",\"amount\":100[,\"id\":\"t1\"]}.  Every\n"
    "line is checked first (a malformed one exits 2 naming it; nothing runs);\n"
    "then the same step of many transfers goes to the store together, and each\n"
    "line prints its transfer, or {\"error\",\"detail\",\"line\"}, in input\n"
    "order; the exit code is the most severe line's (0 when all succeeded).\n"
    DEADLINE_HELP
    "exit: 0 succeeded (or recorded with --async, or canceled)\n"
    "      1 the transfer failed (reason in the document), or no such transfer\n"
    "      2 invalid input (amount not a positive int64, FROM == TO, missing\n"
    "        account, bad id): nothing is recorded\n"
    "      3 id reused with other parameters; cancel after commit (make a\n"
    "        reverse transfer instead)\n"
    "      4 store error (the transfer is left for `doctx recover`)\n";

static const char *worker_help =
    "usage: doctx worker [--threads N] [--once] [--lease-ms N] [--owner NAME]\n"
    "                    [--deadline-ms N] [--batch N]\n"
    "Claims the due work of every pattern (initiated transfers, ...) and runs\n"
    "it; also recovers work whose lease lapsed.  --once processes everything\n"
    "due and exits.  SIGINT or SIGTERM stop it after the items in hand.  On\n"
    "exit it prints a JSON summary per pattern: what ran, what the last\n"
    "recovery pass left alone and why, and what failed.\n"
    "--batch N (1-256, default 16): a thread claims up to N initiated\n"
    "transfers in one round and drives them together, each step of all of\n"
    "them one round trip; 1 claims and drives one at a time.\n"
    "Deadline: each item (batch) runs under one budget -- --deadline-ms N, or else\n"
    "the store's retry window counted once (see doctx transfer --help).\n"
    "exit: 0 ok; 4 with --once, the store could not be reached or an item\n"
    "      failed (the reason is printed; the work is left for recovery)\n";

static const char *recover_help =
    "usage: doctx recover [--older-than-ms N] [--tombstone-ttl-ms N]\n"
    "                     [--retention-ms N] [--deadline-ms N]\n"
    "One recovery pass of every pattern.  Transfers not updated for N ms\n"
    "(default: whose lease lapsed) are finished -- preparing ones roll back,\n"
    "committed and rolling_back ones complete, initiated ones run -- and\n"
    "account markers of finished transfers are repaired.  Jobs: due delayed\n"
    "ones become ready, running ones whose lease lapsed (or not updated for\n"
    "N ms) are taken over (an attempt), effect markers of jobs ended longer\n"
    "than --tombstone-ttl-ms ago are cleared, and succeeded jobs ended\n"
    "longer than --retention-ms (default 24 h) ago purged.  Prints a JSON\n"
    "summary per pattern: what ran, what was left alone and why (e.g. a\n"
    "lease not expired), and what failed.\n"
    DEADLINE_HELP
    "exit: 0 ok, 2 invalid input, 4 a store step kept failing\n";

static const char *audit_help =
    "usage: doctx audit [--json] [--settled] [--acked FILE]\n"
    "Runs every pattern's audit and prints one line per pattern, then every\n"
    "finding.  For transfers it checks conservation (balances + money in\n"
    "flight == opening total), limits, each balance against its transfers,\n"
    "dangling markers and tombstones, and transfer states against markers.\n"
    "--settled also requires every transfer to be terminal (use after\n"
    "recovery).  --acked FILE also checks the transfers a client was told\n"
    "about (one JSON transfer document per line, as `doctx transfer` prints\n"
    "them): each must still be in the store, in that state or further\n"
    "along; a failover that lost them is found so.\n"
    "exit: 0 clean, 5 an invariant is broken, 2 bad --acked file, 4 store "
    "error\n";

/* ---- account -------------------------------------------------------------- */

int dtx__cmd_account(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[] = {{"--balance", 1, NULL},
                  {"--min-balance", 1, NULL},
                  {"--limit", 1, NULL},
                  {"--skip", 1, NULL}};
  char *pos[4];
  dtx_account_opts_t ao = {0};
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(account_help);
  int n = dtx__cli_split(argc, argv, o, 4, pos, 3);
  if (n < 0)
    return DTX_EXIT_USAGE;
  if (n == 0)
    return dtx__cli_usage("account: expected create, limit, show or list");
  const char *sub = pos[0];
  if (strcmp(sub, "create") == 0) {
    if (n != 2)
      return dtx__cli_usage("account create: expected ID");
    if (o[2].value || o[3].value)
      return dtx__cli_usage("account create: --limit/--skip go with list");
    if (dtx__cli_int_opt("account create", &o[0], 1, INT64_MIN, &ao.balance))
      return DTX_EXIT_USAGE;
    if (o[1].value && strcmp(o[1].value, "none") == 0)
      ao.no_min_balance = 1;
    else if (dtx__cli_int_opt("account create", &o[1], 1, INT64_MIN, &ao.min_balance))
      return DTX_EXIT_USAGE;
    if (!ao.no_min_balance && ao.balance < ao.min_balance)
      return dtx__cli_usage("account create: balance %lld is below "
                            "min-balance %lld",
                            (long long)ao.balance, (long long)ao.min_balance);
    dtx_store_t *st = dtx__cli_store(cli, &code);
    if (!st)
      return code;
    json_t *acct = NULL;
    int rc = dtx_account_create(st, pos[1], &ao, &acct);
    if (rc)
      return dtx__cli_fail(rc);
    dtx__cli_print_item(acct, 0);
    json_decref(acct);
    return DTX_EXIT_OK;
  }
  if (o[0].value || o[1].value)
    return dtx__cli_usage("account %s: --balance/--min-balance only go with "
                          "create", sub);
  if (strcmp(sub, "limit") == 0) {
    if (n != 3 || o[2].value || o[3].value)
      return dtx__cli_usage("account limit: expected ID N|none");
    if (strcmp(pos[2], "none") == 0)
      ao.no_min_balance = 1;
    else if (dtx__cli_int64(pos[2], 1, &ao.min_balance) != 0)
      return dtx__cli_usage("account limit: the limit must be an int64 or "
                            "none, got '%s'", pos[2]);
    dtx_store_t *st = dtx__cli_store(cli, &code);
    if (!st)
      return code;
    json_t *acct = NULL;
    int rc = dtx_account_limit(st, pos[1], &ao, &acct);
    if (rc == DTX_ENOACCOUNT) {
      dtx__cli_fail(rc);
      return DTX_EXIT_NOMATCH;
    }
    if (rc)
      return dtx__cli_fail(rc);
    dtx__cli_print_item(acct, 0);
    json_decref(acct);
    return DTX_EXIT_OK;
  }
  if (n > 2)
    return dtx__cli_usage("account %s: expected ID", sub);
  if ((o[2].value || o[3].value) && strcmp(sub, "list") != 0)
    return dtx__cli_usage("account %s: --limit/--skip go with list", sub);
  if (strcmp(sub, "show") == 0) {
    if (n != 2)
      return dtx__cli_usage("account show: expected ID");
    dtx_store_t *st = dtx__cli_store_read(cli, &code);
    if (!st)
      return code;
    json_t *acct = NULL;
    int rc = dtx_account_get(st, pos[1], &acct);
    if (rc == DTX_ENOACCOUNT) {
      dtx__cli_fail(rc);
      return DTX_EXIT_NOMATCH;
    }
    if (rc)
      return dtx__cli_fail(rc);
    dtx__cli_print_item(acct, 0);
    json_decref(acct);
    return DTX_EXIT_OK;
  }
  if (strcmp(sub, "list") == 0) {
    dtx_page_t page = {0};
    if (n != 1)
      return dtx__cli_usage("account list: takes no arguments");
    if (dtx__cli_page_opts("account list", &o[3], &o[2], &page))
      return DTX_EXIT_USAGE;
    dtx_store_t *st = dtx__cli_store_read(cli, &code);
    if (!st)
      return code;
    json_t *all = NULL;
    int rc = dtx_account_list(st, &page, &all);
    return rc ? dtx__cli_fail(rc) : dtx__cli_print_items(all, 0);
  }
  return dtx__cli_usage("account: unknown subcommand '%s' (create, limit, "
                        "show, list)", sub);
}

/* ---- transfer ------------------------------------------------------------ */

static int transfer_exit(const json_t *tx) {
  const char *s = json_string_value(json_object_get(tx, "state"));
  return s && strcmp(s, "failed") == 0 ? DTX_EXIT_NOMATCH : DTX_EXIT_OK;
}

enum { T_ID, T_ASYNC, T_STATE, T_LIMIT, T_SKIP, T_VERBOSE, T_DEADLINE, T_FILE,
       T_N };

static int transfer_new(dtx_cli_t *cli, char **pos, dtx__cli_opt_t *o) {
  dtx_transfer_req_t req = {.id = o[T_ID].value, .from = pos[0], .to = pos[1]};
  dtx_exec_opts_t eo = {0};
  int verbose = o[T_VERBOSE].value != NULL, code;
  if (dtx__cli_int64(pos[2], 0, &req.amount) != 0 || req.amount <= 0 ||
      pos[2][0] == '0') /* "05": no leading zeros, as for "+5" */
    return dtx__cli_usage("transfer: AMOUNT must be a positive int64 in minor "
                          "units, got '%s'", pos[2]);
  if (strcmp(req.from, req.to) == 0)
    return dtx__cli_usage("transfer: FROM and TO are the same account '%s'",
                          req.from);
  if (dtx__cli_int_opt("transfer", &o[T_DEADLINE], 0, 1, &eo.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *tx = NULL;
  int rc = o[T_ASYNC].value ? dtx_transfer_submit(st, &req, &tx)
                            : dtx_transfer_execute(st, &req, &eo, &tx);
  if (rc == DTX_ENOACCOUNT) {
    dtx__cli_fail(rc);
    return DTX_EXIT_USAGE; /* invalid input at submission: nothing recorded */
  }
  if (tx)
    dtx__cli_print_item(tx, verbose);
  code = rc ? dtx__cli_fail(rc)
            : o[T_ASYNC].value ? DTX_EXIT_OK : transfer_exit(tx);
  json_decref(tx);
  return code;
}

int dtx__cmd_transfer(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[T_N] = {
      [T_ID] = {"--id", 1, NULL},         [T_ASYNC] = {"--async", 0, NULL},
      [T_STATE] = {"--state", 1, NULL},   [T_LIMIT] = {"--limit", 1, NULL},
      [T_SKIP] = {"--skip", 1, NULL},     [T_VERBOSE] = {"--verbose", 0, NULL},
      [T_DEADLINE] = {"--deadline-ms", 1, NULL},
      [T_FILE] = {"--file", 1, NULL}};
  char *pos[4];
  int code, verbose;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(transfer_help);
  int n = dtx__cli_split(argc, argv, o, T_N, pos, 3);
  if (n < 0)
    return DTX_EXIT_USAGE;
  verbose = o[T_VERBOSE].value != NULL;
  int list_opts = o[T_STATE].value || o[T_LIMIT].value || o[T_SKIP].value;
  if (n == 3) {
    if (list_opts)
      return dtx__cli_usage("transfer: --state/--limit/--skip go with list");
    if (o[T_FILE].value)
      return dtx__cli_usage("transfer: --file goes with batch");
    return transfer_new(cli, pos, o);
  }
  if (n == 0)
    return dtx__cli_usage("transfer: expected FROM TO AMOUNT, or show, list, "
                          "cancel, batch");
  if (strcmp(pos[0], "batch") == 0) {
    static const int ok[] = {T_VERBOSE, T_DEADLINE, T_FILE, -1};
    int64_t deadline = 0;
    if (n != 1)
      return dtx__cli_usage("transfer batch: takes no arguments (the "
                            "transfers come from stdin or --file)");
    if (dtx__cli_stray("transfer", "batch", o, T_N, ok) ||
        dtx__cli_int_opt("transfer batch", &o[T_DEADLINE], 0, 1, &deadline))
      return DTX_EXIT_USAGE;
    return dtx__cmd_transfer_batch(cli, o[T_FILE].value, deadline, verbose);
  }
  if (o[T_FILE].value)
    return dtx__cli_usage("transfer: --file goes with batch");
  if (o[T_ID].value || o[T_ASYNC].value || o[T_DEADLINE].value)
    return dtx__cli_usage("transfer %s: --id/--async/--deadline-ms go with "
                          "FROM TO AMOUNT", pos[0]);
  const char *sub = pos[0];
  int is_show = strcmp(sub, "show") == 0, is_cancel = strcmp(sub, "cancel") == 0;
  if (strcmp(sub, "list") == 0) {
    dtx_page_t page = {0};
    if (n != 1)
      return dtx__cli_usage("transfer list: takes no arguments");
    if (dtx__cli_page_opts("transfer list", &o[T_SKIP], &o[T_LIMIT], &page))
      return DTX_EXIT_USAGE;
    dtx_store_t *st = dtx__cli_store_read(cli, &code);
    if (!st)
      return code;
    json_t *all = NULL;
    int rc = dtx_transfer_list(st, o[T_STATE].value, &page, &all);
    return rc ? dtx__cli_fail(rc) : dtx__cli_print_items(all, verbose);
  }
  if (list_opts)
    return dtx__cli_usage("transfer: --state/--limit/--skip go with list");
  if (!is_show && !is_cancel)
    return dtx__cli_usage("transfer: expected FROM TO AMOUNT, or show, list, "
                          "cancel, batch; got '%s'", sub);
  if (n != 2)
    return dtx__cli_usage("transfer %s: expected ID", sub);
  if (is_cancel && (code = dtx__cli_faults_ok()))
    return code;
  dtx_store_t *st = is_show ? dtx__cli_store_read(cli, &code)
                            : dtx__cli_store(cli, &code);
  if (!st)
    return code;
  json_t *tx = NULL;
  int rc = is_show ? dtx_transfer_get(st, pos[1], &tx)
                   : dtx_transfer_cancel(st, pos[1], &tx);
  if (rc == DTX_ENOTFOUND) {
    dtx__cli_fail(rc);
    return DTX_EXIT_NOMATCH;
  }
  if (tx)
    dtx__cli_print_item(tx, verbose);
  json_decref(tx);
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

/* ---- worker, recover, audit, faults ---------------------------------------- */


int dtx__cmd_worker(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[] = {{"--threads", 1, NULL},  {"--once", 0, NULL},
                  {"--lease-ms", 1, NULL}, {"--owner", 1, NULL},
                  {"--deadline-ms", 1, NULL}, {"--batch", 1, NULL}};
  char *pos[1];
  int64_t threads = 1, lease = 0, deadline = 0, batch = 0;
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(worker_help);
  if (dtx__cli_split(argc, argv, o, 6, pos, 0) < 0)
    return DTX_EXIT_USAGE;
  if (dtx__cli_int_opt("worker", &o[0], 0, 1, &threads) ||
      dtx__cli_int_opt("worker", &o[5], 0, 1, &batch) ||
      dtx__cli_int_opt("worker", &o[2], 0, 1, &lease) ||
      dtx__cli_int_opt("worker", &o[4], 0, 1, &deadline))
    return DTX_EXIT_USAGE;
  if (threads > 256)
    return dtx__cli_usage("worker: --threads must be at most 256");
  if (batch > 256)
    return dtx__cli_usage("worker: --batch must be at most 256");
  dtx_store_t *st = dtx__cli_store_stoppable(cli, &code);
  if (!st)
    return code;
  dtx_worker_opts_t wo = {.threads = (int)threads, .once = o[1].value != NULL,
                          .lease_ms = lease, .owner = o[3].value,
                          .stop = &dtx__cli_stop, .deadline_ms = deadline,
                          .batch = (int)batch};
  json_t *sum = NULL;
  int rc = dtx_worker_run(st, &wo, &sum);
  return dtx__cli_summary(rc, sum);
}

int dtx__cmd_recover(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[] = {{"--older-than-ms", 1, NULL},
                  {"--tombstone-ttl-ms", 1, NULL},
                  {"--deadline-ms", 1, NULL},
                  {"--retention-ms", 1, NULL}};
  char *pos[1];
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(recover_help);
  if (dtx__cli_split(argc, argv, o, 4, pos, 0) < 0)
    return DTX_EXIT_USAGE;
  if (dtx__cli_int_opt("recover", &o[3], 0, 1, &ro.retention_ms) ||
      dtx__cli_int_opt("recover", &o[0], 0, 0, &ro.older_than_ms) ||
      dtx__cli_int_opt("recover", &o[1], 0, 1, &ro.tombstone_ttl_ms) ||
      dtx__cli_int_opt("recover", &o[2], 0, 1, &ro.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *sum = NULL;
  int rc = dtx_recover(st, &ro, &sum);
  return dtx__cli_summary(rc, sum);
}

/* Reads a file of acknowledged transfers, one JSON object per line (blank
 * lines skipped; the CLI's one JSON-lines reader).  Any unreadable line
 * refuses the whole file: an audit that silently skipped records would
 * hide exactly what it is for. */
static int read_acked(const char *path, json_t **out) {
  dtx__cli_jline_t *ls = NULL;
  size_t n = 0;
  int code = dtx__cli_read_jlines(path, "audit: reading --acked", sizeof *ls,
                                  (void **)&ls, &n);
  json_t *arr = code ? NULL : json_array();
  for (size_t i = 0; arr && i < n; i++) {
    if (!json_is_object(ls[i].line)) {
      code = dtx__cli_bad_line(ls[i].lineno, DTX_EBADJSON,
                               "%s: not a JSON object", path);
      break;
    }
    json_array_append(arr, ls[i].line);
  }
  if (!code && !arr)
    code = dtx__cli_error(DTX_ENOMEM, "audit: reading --acked");
  dtx__cli_jlines_free(ls, n, sizeof *ls);
  if (code) {
    json_decref(arr);
    return code;
  }
  *out = arr;
  return DTX_EXIT_OK;
}

int dtx__cmd_audit(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[] = {{"--json", 0, NULL}, {"--settled", 0, NULL},
                  {"--acked", 1, NULL}};
  char *pos[1];
  int code;
  json_t *acked = NULL;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(audit_help);
  if (dtx__cli_split(argc, argv, o, 3, pos, 0) < 0)
    return DTX_EXIT_USAGE;
  if (o[2].value && (code = read_acked(o[2].value, &acked)))
    return code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st) {
    json_decref(acked);
    return code;
  }
  json_t *r = NULL;
  int rc = dtx_audit_acked(st, o[1].value ? DTX_AUDIT_SETTLED : 0, acked, &r);
  json_decref(acked);
  if (!r)
    return dtx__cli_fail(rc);
  if (o[0].value) {
    dtx__cli_print_json(r);
  } else {
    json_t *f, *part;
    const char *name;
    size_t i;
    json_object_foreach(json_object_get(r, "patterns"), name, part)
        printf("audit %s: %s\n", name,
               json_string_value(json_object_get(part, "summary")));
    json_array_foreach(json_object_get(r, "findings"), i, f)
        printf("FINDING %s %s: %s\n",
               json_string_value(json_object_get(f, "pattern")),
               json_string_value(json_object_get(f, "kind")),
               json_string_value(json_object_get(f, "detail")));
    printf("audit: %s\n", rc == 0 ? "clean" : "BROKEN");
  }
  json_decref(r);
  if (rc == DTX_EAUDIT)
    return DTX_EXIT_AUDIT;
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

int dtx__cmd_faults(dtx_cli_t *cli, int argc, char **argv) {
  (void)cli;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help("usage: doctx faults\nLists every fault point, one per line. "
                "Arm them with DOCTX_FAULT=POINT:ACTION[:N][,...],\n"
                "ACTION crash | pause | error | lost (the write applied, its "
                "reply lost),\nN the N-th arrival (default 1).\n");
  if (argc > 1)
    return dtx__cli_usage("faults: takes no arguments");
  for (const char *const *p = dtx_fault_points(); *p; p++)
    puts(*p);
  return DTX_EXIT_OK;
}

/* ---- lock (src/txn/lock/, docs/locks.md) ------------------------------------ */

static const char *lock_help =
    "usage: doctx lock acquire NAME [--ttl-ms N] [--owner O] [--wait-ms N]\n"
    "                               [--deadline-ms N]\n"
    "       doctx lock renew NAME TOKEN [--ttl-ms N]\n"
    "       doctx lock release NAME TOKEN\n"
    "       doctx lock show NAME\n"
    "       doctx lock list [--limit N] [--skip N]\n"
    "A lease lock with fencing tokens.  acquire takes NAME when it is free\n"
    "or its lease lapsed and prints {\"name\",\"owner\",\"token\",\"expires\"}\n"
    "(expires: wall-clock ms); the token is greater than every token NAME\n"
    "issued before.  --ttl-ms is the lease (default 30000), --wait-ms how\n"
    "long to wait while another holds it (default 0).  renew extends the\n"
    "lease of TOKEN (--ttl-ms default: the lock's own), release frees it;\n"
    "both only while TOKEN is current.  A lease does not stop a paused\n"
    "holder: give every protected write the fence NAME:TOKEN (an option of\n"
    "update, find-and-modify and delete), and the store refuses an older\n"
    "token with FENCED (exit 3).\n"
    "show and list also print \"held\".\n"
    "exit: 0 ok, 1 still held (acquire), token no longer current (renew,\n"
    "      release) or no such lock, 2 invalid input, 4 store error\n";

enum { L_TTL, L_OWNER, L_WAIT, L_DEADLINE, L_LIMIT, L_SKIP, L_N };

int dtx__cmd_lock(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[L_N] = {
      [L_TTL] = {"--ttl-ms", 1, NULL},   [L_OWNER] = {"--owner", 1, NULL},
      [L_WAIT] = {"--wait-ms", 1, NULL}, [L_DEADLINE] = {"--deadline-ms", 1, NULL},
      [L_LIMIT] = {"--limit", 1, NULL},  [L_SKIP] = {"--skip", 1, NULL}};
  char *pos[3];
  int code, rc;
  dtx_lock_opts_t lo = {0};
  dtx_page_t page = {0};
  int64_t token = 0;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(lock_help);
  int n = dtx__cli_split(argc, argv, o, L_N, pos, 3);
  if (n < 0)
    return DTX_EXIT_USAGE;
  if (n == 0)
    return dtx__cli_usage("lock: expected acquire, renew, release, show or "
                          "list");
  const char *sub = pos[0];
  /* Which options and how many arguments each subcommand takes. */
  static const struct {
    const char *name;
    int npos;
    unsigned opts; /* bit i: option i allowed */
  } subs[] = {
      {"acquire", 2, 1u << L_TTL | 1u << L_OWNER | 1u << L_WAIT | 1u << L_DEADLINE},
      {"renew", 3, 1u << L_TTL},
      {"release", 3, 0},
      {"show", 2, 0},
      {"list", 1, 1u << L_LIMIT | 1u << L_SKIP},
  };
  size_t k;
  for (k = 0; k < sizeof subs / sizeof subs[0]; k++)
    if (strcmp(subs[k].name, sub) == 0)
      break;
  if (k == sizeof subs / sizeof subs[0])
    return dtx__cli_usage("lock: expected acquire, renew, release, show or "
                          "list; got '%s'", sub);
  if (n != subs[k].npos)
    return dtx__cli_usage("lock %s: expected %s", sub,
                          subs[k].npos == 1   ? "no arguments"
                          : subs[k].npos == 2 ? "NAME"
                                              : "NAME TOKEN");
  for (int i = 0; i < L_N; i++)
    if (o[i].value && !(subs[k].opts & (1u << i)))
      return dtx__cli_usage("lock %s: %s does not apply", sub, o[i].name);
  if (dtx__cli_int_opt("lock", &o[L_TTL], 0, 1, &lo.ttl_ms) ||
      dtx__cli_int_opt("lock", &o[L_WAIT], 0, 0, &lo.wait_ms) ||
      dtx__cli_int_opt("lock", &o[L_DEADLINE], 0, 0, &lo.deadline_ms) ||
      dtx__cli_page_opts("lock list", &o[L_SKIP], &o[L_LIMIT], &page))
    return DTX_EXIT_USAGE;
  lo.owner = o[L_OWNER].value;
  if (n == 3 && (dtx__cli_int64(pos[2], 0, &token) != 0 || token < 1))
    return dtx__cli_usage("lock %s: TOKEN must be an integer >= 1, got '%s'",
                          sub, pos[2]);
  int reads = strcmp(sub, "show") == 0 || strcmp(sub, "list") == 0;
  if (!reads && (code = dtx__cli_faults_ok()))
    return code;
  dtx_store_t *st = reads ? dtx__cli_store_read(cli, &code)
                          : dtx__cli_store(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  switch (k) {
  case 0: rc = dtx_lock_acquire(st, pos[1], &lo, &out); break;
  case 1: rc = dtx_lock_renew(st, pos[1], token, &lo, &out); break;
  case 2: rc = dtx_lock_release(st, pos[1], token, &out); break;
  case 3: rc = dtx_lock_get(st, pos[1], &out); break;
  default: rc = dtx_lock_list(st, &page, &out); break;
  }
  if (rc)
    return dtx__cli_fail(rc);
  if (k == 4) {
    size_t i;
    json_t *v;
    json_array_foreach(out, i, v) dtx__cli_print_json(v);
  } else {
    if (k == 0) /* acquire prints what the contract names */
      json_object_del(out, "held");
    dtx__cli_print_json(out);
  }
  json_decref(out);
  return DTX_EXIT_OK;
}
