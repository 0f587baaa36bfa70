/* cmd_ledger.c -- the ledger command: the CLI face of src/txn/ledger/
 * (accounts, posting, pending entries, reversal, balances, statements).
 * Every argument is checked before the store is opened, so bad input
 * records nothing; the rules themselves (legs sum to zero, distinct
 * accounts, limits, int64) are the library's, and this file only maps
 * their errors to the exit codes: funds refused 1, bad legs or an
 * unknown account 2, a conflicting id or a resolved entry 3. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static const char *ledger_help =
    "usage: doctx ledger account create ID [--min-balance N|none]\n"
    "       doctx ledger account limit ID N|none\n"
    "       doctx ledger post ACCT:VALUE ACCT:VALUE... [--id ID]\n"
    "                         [--pending [--timeout-ms N]] [--deadline-ms N]\n"
    "       doctx ledger post-pending ID | ledger void ID\n"
    "       doctx ledger reverse ID [--id NEWID] [--deadline-ms N]\n"
    "       doctx ledger balance ACCT [--at-seq N]\n"
    "       doctx ledger statement ACCT [--from-seq N] [--limit N]\n"
    "       doctx ledger show ID | ledger list [--account A] [--limit N]\n"
    "A log-reconciliation ledger (docs/ledger.md): an entry is one immutable\n"
    "document with 2..128 legs on distinct accounts whose int64 values sum\n"
    "to zero; a negative value debits (money leaves the account), a positive\n"
    "one credits.  Each account numbers its legs 1, 2, 3, ... (seq).  A debit\n"
    "must leave the account's available balance (balance minus pending\n"
    "debits) at or above its min_balance (0 by default; none: no limit).\n"
    "--id makes a post idempotent: the same id with the same legs prints the\n"
    "existing entry.  --pending holds the debits until post-pending (in\n"
    "full) or void, or until --timeout-ms (default 1 h) passes and a worker\n"
    "expires it.  reverse posts the negated legs as a new entry.  balance\n"
    "prints {\"account\",\"balance\",\"available\",\"pending_debits\",\"seq\"}\n"
    "(--at-seq N: as of the account's seq N); statement one line per valid\n"
    "leg {\"entry\",\"seq\",\"value\",\"balance\",\"state\"} with the running\n"
    "balance (--from-seq inclusive).  `doctx worker` commits entries and\n"
    "advances the cached balances.\n"
    "exit: 0 ok (post-pending of a posted entry too)\n"
    "      1 a post refused for funds (the account is named; nothing is\n"
    "        recorded), or no such entry or account (show, balance,\n"
    "        statement, limit)\n"
    "      2 invalid input: legs not summing to zero, a zero or non-integer\n"
    "        value, an unknown or repeated account: nothing is recorded\n"
    "      3 an id reused with other legs, an existing account id, voiding a\n"
    "        posted entry, posting a voided or expired one, int64 overflow\n"
    "      4 store error\n";

enum {
  G_MIN, G_ID, G_PENDING, G_TIMEOUT, G_DEADLINE, G_AT, G_FROM, G_LIMIT,
  G_ACCOUNT, G_N
};

/* The subcommands: positionals after the name (-1: at least 2) and the
 * options each takes. */
static const struct {
  const char *name;
  int npos;
  unsigned opts;
} subs[] = {
    {"post", -1, 1u << G_ID | 1u << G_PENDING | 1u << G_TIMEOUT | 1u << G_DEADLINE},
    {"post-pending", 1, 0},
    {"void", 1, 0},
    {"reverse", 1, 1u << G_ID | 1u << G_DEADLINE},
    {"balance", 1, 1u << G_AT},
    {"statement", 1, 1u << G_FROM | 1u << G_LIMIT},
    {"show", 1, 0},
    {"list", 0, 1u << G_ACCOUNT | 1u << G_LIMIT},
    {"account", 0, 0}, /* checked by ledger_account */
};
#define NSUBS (sizeof subs / sizeof subs[0])

/* Leg text ACCT:VALUE: the account is everything before the last ':'
 * (ids may contain ':'). */
static int parse_leg(char *text, dtx_ledger_leg_t *leg) {
  char *c = strrchr(text, ':');
  if (!c || c == text)
    return dtx__cli_usage("ledger post: a leg is ACCT:VALUE, got '%s'", text);
  *c = '\0';
  leg->account = text;
  if (dtx__cli_int64(c + 1, 1, &leg->value) != 0) {
    *c = ':';
    return dtx__cli_usage("ledger post: the value of leg '%s' is not an int64 "
                          "(minor units)", text);
  }
  return 0;
}

static int parse_limit(const char *cmd, const char *text,
                       dtx_ledger_limit_t *l) {
  memset(l, 0, sizeof *l);
  if (strcmp(text, "none") == 0) {
    l->no_min_balance = 1;
    return 0;
  }
  if (dtx__cli_int64(text, 1, &l->min_balance) != 0)
    return dtx__cli_usage("%s: the limit must be an int64 or none, got '%s'",
                          cmd, text);
  return 0;
}

/* A library error as this command's exit code (the contract above). */
static int ledger_fail(int rc, int missing_code) {
  int code = dtx__cli_fail(rc);
  switch (rc) {
  case DTX_EINSUFFICIENT:
    return DTX_EXIT_NOMATCH;
  case DTX_ENOACCOUNT:
  case DTX_ENOTFOUND:
    return missing_code;
  default:
    return code;
  }
}

static int ledger_account(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[] = {{"--min-balance", 1, NULL}};
  char *pos[3];
  dtx_ledger_limit_t lim = {0};
  int code, rc;
  int n = dtx__cli_split(argc, argv, o, 1, pos, 3); /* argv[0]: "account" */
  if (n < 0)
    return DTX_EXIT_USAGE;
  int create = n >= 1 && strcmp(pos[0], "create") == 0;
  int limit = n >= 1 && strcmp(pos[0], "limit") == 0;
  if (create && n == 2) {
    if (o[0].value && parse_limit("ledger account create", o[0].value, &lim))
      return DTX_EXIT_USAGE;
  } else if (limit && n == 3 && !o[0].value) {
    if (parse_limit("ledger account limit", pos[2], &lim))
      return DTX_EXIT_USAGE;
  } else {
    return dtx__cli_usage("ledger account: expected create ID "
                          "[--min-balance N|none] or limit ID N|none");
  }
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *acct = NULL;
  rc = create ? dtx_ledger_account_create(st, pos[1], &lim, &acct)
              : dtx_ledger_account_limit(st, pos[1], &lim, &acct);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  dtx__cli_print_item(acct, 0);
  json_decref(acct);
  return DTX_EXIT_OK;
}

static int ledger_post(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  dtx_ledger_leg_t legs[DTX_LEDGER_MAX_LEGS];
  dtx_ledger_post_req_t req = {.id = o[G_ID].value, .legs = legs,
                               .pending = o[G_PENDING].value != NULL};
  dtx_exec_opts_t eo = {0};
  int code;
  if (n - 1 < 2 || n - 1 > DTX_LEDGER_MAX_LEGS)
    return dtx__cli_usage("ledger post: an entry has 2 to %d legs "
                          "ACCT:VALUE, got %d", DTX_LEDGER_MAX_LEGS, n - 1);
  for (int i = 1; i < n; i++)
    if (parse_leg(pos[i], &legs[i - 1]))
      return DTX_EXIT_USAGE;
  req.nlegs = (size_t)(n - 1);
  if (o[G_TIMEOUT].value && !req.pending)
    return dtx__cli_usage("ledger post: --timeout-ms goes with --pending");
  if (dtx__cli_int_opt("ledger post", &o[G_TIMEOUT], 0, 1, &req.timeout_ms) ||
      dtx__cli_int_opt("ledger post", &o[G_DEADLINE], 0, 1, &eo.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *e = NULL;
  int rc = dtx_ledger_post(st, &req, &eo, &e);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_USAGE); /* unknown account: bad input */
  dtx__cli_print_item(e, 0);
  json_decref(e);
  return DTX_EXIT_OK;
}

/* The read subcommands: balance, statement, show, list. */
static int ledger_read(dtx_cli_t *cli, size_t k, char **pos,
                       dtx__cli_opt_t *o) {
  int64_t at = DTX_LEDGER_LATEST, from = 1, limit = 0;
  dtx_page_t page = {0};
  int code, rc;
  if (dtx__cli_int_opt("ledger", &o[G_AT], 0, 0, &at) ||
      dtx__cli_int_opt("ledger", &o[G_FROM], 0, 1, &from) ||
      dtx__cli_int_opt("ledger", &o[G_LIMIT], 0, 0, &limit))
    return DTX_EXIT_USAGE;
  page.limit = limit;
  dtx_store_t *st = dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  const char *sub = subs[k].name;
  if (strcmp(sub, "balance") == 0)
    rc = dtx_ledger_balance(st, pos[1], at, &out);
  else if (strcmp(sub, "statement") == 0)
    rc = dtx_ledger_statement(st, pos[1], from, limit, &out);
  else if (strcmp(sub, "show") == 0)
    rc = dtx_ledger_get(st, pos[1], &out);
  else
    rc = dtx_ledger_list(st, o[G_ACCOUNT].value, &page, &out);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  if (strcmp(sub, "statement") == 0) {
    size_t i;
    json_t *v;
    json_array_foreach(out, i, v) dtx__cli_print_json(v);
    json_decref(out);
    return DTX_EXIT_OK;
  }
  if (strcmp(sub, "list") == 0)
    return dtx__cli_print_items(out, 0);
  if (strcmp(sub, "show") == 0)
    dtx__cli_print_item(out, 0);
  else
    dtx__cli_print_json(out);
  json_decref(out);
  return DTX_EXIT_OK;
}

int dtx__cmd_ledger(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[G_N] = {
      [G_MIN] = {"--min-balance", 1, NULL}, [G_ID] = {"--id", 1, NULL},
      [G_PENDING] = {"--pending", 0, NULL}, [G_TIMEOUT] = {"--timeout-ms", 1, NULL},
      [G_DEADLINE] = {"--deadline-ms", 1, NULL}, [G_AT] = {"--at-seq", 1, NULL},
      [G_FROM] = {"--from-seq", 1, NULL},   [G_LIMIT] = {"--limit", 1, NULL},
      [G_ACCOUNT] = {"--account", 1, NULL}};
  char *pos[DTX_LEDGER_MAX_LEGS + 2];
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(ledger_help);
  if (argc >= 2 && strcmp(argv[1], "account") == 0)
    return ledger_account(cli, argc - 1, argv + 1);
  int n = dtx__cli_split(argc, argv, o, G_N, pos, DTX_LEDGER_MAX_LEGS + 2);
  if (n < 0)
    return DTX_EXIT_USAGE;
  size_t k = NSUBS;
  if (n > 0)
    for (k = 0; k < NSUBS; k++)
      if (strcmp(subs[k].name, pos[0]) == 0)
        break;
  if (k == NSUBS)
    return dtx__cli_usage("ledger: expected account, post, post-pending, void, "
                          "reverse, balance, statement, show or list%s%s",
                          n > 0 ? "; got " : "", n > 0 ? pos[0] : "");
  const char *sub = subs[k].name;
  for (int i = 0; i < G_N; i++)
    if (o[i].value && !(subs[k].opts & (1u << i)))
      return dtx__cli_usage("ledger %s: %s does not apply", sub, o[i].name);
  if (k == 0)
    return ledger_post(cli, pos, n, o);
  if (n - 1 != subs[k].npos)
    return dtx__cli_usage("ledger %s: expected %s", sub,
                          subs[k].npos ? "one argument (ID or ACCT)"
                                       : "no arguments");
  if (k >= 4)
    return ledger_read(cli, k, pos, o);
  if ((code = dtx__cli_faults_ok()))
    return code;
  dtx_exec_opts_t eo = {0};
  if (dtx__cli_int_opt("ledger", &o[G_DEADLINE], 0, 1, &eo.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  json_t *e = NULL;
  int rc = k == 1   ? dtx_ledger_post_pending(st, pos[1], &e)
           : k == 2 ? dtx_ledger_void(st, pos[1], &e)
                    : dtx_ledger_reverse(st, pos[1], o[G_ID].value, &eo, &e);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  dtx__cli_print_item(e, 0);
  json_decref(e);
  return DTX_EXIT_OK;
}
