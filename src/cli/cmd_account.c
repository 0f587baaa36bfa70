/* cmd_account.c -- doctx account create/limit/show/list: the accounts of
 * the two-phase transfers (src/txn/transfer/, docs/transfers.md). */
#include "cli/cli.h"

#include <string.h>

/* Prints the account *acct (stolen) of a call that gave rc, or the error
 * (a missing account exits 1).  A pointer: the call sets it. */
static int done(int rc, json_t **acct) {
  if (!rc)
    dtx__cli_print_item(*acct, 0);
  json_decref(*acct);
  if (rc)
    dtx__cli_fail(rc);
  return rc == DTX_ENOACCOUNT ? DTX_EXIT_NOMATCH : dtx__cli_exit_code(rc);
}

static int create(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_account_opts_t ao = {.balance = dtx__cli_num(a, "--balance", 0)};
  const char *min = dtx__cli_str(a, "--min-balance");
  int code;
  if (min && (code = dtx__cli_limit(a->cmd, min, &ao.no_min_balance,
                                    &ao.min_balance)))
    return code;
  /* The library's check before the store opens: bad input creates no
   * store (opening a SQLite path creates it). */
  int rc = dtx_account_check(a->pos[0], &ao);
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  json_t *acct = NULL;
  return st ? done(dtx_account_create(st, a->pos[0], &ao, &acct), &acct) : code;
}

static int limit(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_account_opts_t ao = {0};
  int code = dtx__cli_limit(a->cmd, a->pos[1], &ao.no_min_balance,
                            &ao.min_balance);
  /* The id's check before the open (the limit is judged on the stored
   * balance, so only the id here). */
  dtx_account_opts_t idonly = {.no_min_balance = 1};
  int rc = code ? 0 : dtx_account_check(a->pos[0], &idonly);
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = code ? NULL : dtx__cli_store(cli, &code);
  json_t *acct = NULL;
  return st ? done(dtx_account_limit(st, a->pos[0], &ao, &acct), &acct) : code;
}

static int show(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  json_t *acct = NULL;
  return st ? done(dtx_account_get(st, a->pos[0], &acct), &acct) : code;
}

static int list(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *all = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  dtx_page_t page = dtx__cli_page(a);
  return st ? dtx__cli_items(dtx_account_list(st, &page, &all), &all, 1, 0)
            : code;
}

const dtx__cli_spec_t dtx__cmd_account = {
    "account", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"create", create, "ID",
         (const dtx__cli_opt_t[]){{"--balance", DTX__CLI_INT, "N"},
                                  {"--min-balance", DTX__CLI_STR, "N|none"},
                                  {NULL}}},
        {"limit", limit, "ID N|none"},
        {"show", show, "ID", NULL, DTX__CLI_READS},
        {"list", list, NULL,
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_LIMIT, DTX__CLI_OPT_SKIP, DTX__CLI_OPT_AFTER,
                                  {NULL}},
         DTX__CLI_READS},
        {NULL}},
    NULL,
    "Balances are int64 minor units. --balance defaults to 0 and becomes the\n"
    "account's opening_balance. --min-balance defaults to 0; 'none' means no\n"
    "limit (external or settlement accounts).  limit sets the lowest balance\n"
    "a debit may leave, only if the balance meets it ('none': no limit);\n"
    "it is how a limit changes -- `doctx update` may not touch an account's\n"
    "balance, limit or markers.  list prints the accounts by\n"
    "id, skipping the first --skip, at most --limit (0: all).  Timestamps\n"
    "print as ISO 8601 UTC (stored as integer ms).\n"
    "exit: 0 ok, 1 no such account (show, limit), 2 invalid input, 3 account\n"
    "      exists, or a limit above the balance, 4 store error\n"};
