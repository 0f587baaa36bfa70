/* cmd_order.c -- doctx order: the CLI face of order confirmation
 * (src/txn/order/, docs/orders.md).  The library checks trade ids,
 * accounts and amounts before it writes; this file maps its errors to
 * exit codes (an unknown account is bad input here: 2). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static int create(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_order_req_t req = {.trade_id = a->pos[0],
                         .account = dtx__cli_str(a, "--account"),
                         .amount = dtx__cli_num(a, "--amount", 0),
                         .settlement = dtx__cli_str(a, "--settlement")};
  json_t *out = NULL;
  int code, rc = dtx_order_req_check(&req); /* before the store opens */
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  return st ? dtx__cli_summary(dtx_order_create(st, &req, &out), &out) : code;
}

/* Several trade ids: one dtx_order_confirm_many call, one line each. */
static int confirm_many(dtx_store_t *st, char **ids, int n,
                        const dtx_exec_opts_t *eo) {
  dtx_order_result_t *res = calloc((size_t)n, sizeof *res);
  /* each exit code as `order confirm` gives it alone: rc's */
  dtx__cli_batch_t out = {.key = "trade_id"};
  if (!res)
    return dtx__cli_error(DTX_ENOMEM, "order confirm of %d orders", n);
  (void)dtx_order_confirm_many(st, (const char *const *)ids, (size_t)n, eo,
                               res);
  for (int i = 0; i < n; i++)
    dtx__cli_batch_line(&out, json_string(ids[i]), res[i].rc, res[i].detail,
                        res[i].order);
  dtx_order_results_clear(res, (size_t)n);
  free(res);
  return out.worst;
}

static int confirm(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_exec_opts_t eo = {.owner = dtx__cli_str(a, "--owner"),
                        .lease_ms = dtx__cli_num(a, "--lease-ms", 0),
                        .deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *out = NULL;
  int code;
  /* Every trade id is checked before the first is confirmed: a malformed
   * one is a usage error of the whole command, so nothing is written. */
  for (int i = 0; i < a->npos; i++)
    if (dtx_order_id_check(a->pos[i]))
      return dtx__cli_error(DTX_EINVAL, "%s (argument %d); nothing "
                            "confirmed", dtx_errdetail(), i + 1);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  if (a->npos > 1)
    return confirm_many(st, a->pos, a->npos, &eo);
  return dtx__cli_summary(dtx_order_confirm(st, a->pos[0], &eo, &out), &out);
}

/* cancel, show and list. */
static int one(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *sub = a->spec->name;
  json_t *out = NULL;
  int code, rc;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  if (strcmp(sub, "list") == 0) {
    dtx_page_t page = dtx__cli_page(a);
    rc = dtx_order_list(st, dtx__cli_str(a, "--state"), &page, &out);
    return dtx__cli_items(rc, &out, 1, 0);
  }
  rc = strcmp(sub, "cancel") == 0 ? dtx_order_cancel(st, a->pos[0], &out)
                                  : dtx_order_get(st, a->pos[0], &out);
  return dtx__cli_summary(rc, &out);
}

const dtx__cli_spec_t dtx__cmd_order = {
    "order", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"create", create, "TRADE_ID",
         (const dtx__cli_opt_t[]){{"--account", DTX__CLI_STR, "A", NULL, 1},
                                  {"--amount", DTX__CLI_INT, "N", NULL, 1},
                                  {"--settlement", DTX__CLI_STR, "ID"},
                                  {NULL}},
         DTX__CLI_ARMED},
        {"confirm", confirm, "TRADE_ID...",
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_LEASE,
                                  {"--owner", DTX__CLI_STR, "O"},
                                  DTX__CLI_OPT_DEADLINE, {NULL}},
         DTX__CLI_ARMED},
        {"cancel", one, "TRADE_ID", NULL, DTX__CLI_ARMED},
        {"show", one, "TRADE_ID", NULL, DTX__CLI_READS},
        {"list", one, NULL,
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_STATE, DTX__CLI_OPT_LIMIT,
                                  DTX__CLI_OPT_SKIP, DTX__CLI_OPT_AFTER, {NULL}},
         DTX__CLI_READS},
        {NULL}},
    NULL,
    "Payment orders (docs/orders.md): create records the order pending under\n"
    "its unique trade id (1..100 of [A-Za-z0-9_.-]) and prints it; the same\n"
    "trade id again with the same account and amount prints the stored\n"
    "order.  confirm is the payment callback: it credits account A with N\n"
    "exactly once, as a transfer \"order:TRADE_ID\" from the settlement\n"
    "account (default \"settlement\", created on first use with no lower\n"
    "limit), and prints the order, which ends success.  Several trade ids\n"
    "are confirmed together (one bulk write per step, dtx_order_confirm_many),\n"
    "each as alone, one line per id in their order: the order, or\n"
    "{\"error\", \"detail\", \"trade_id\"}; the exit code is then the most\n"
    "severe of theirs.  A malformed trade id anywhere in the list is a\n"
    "usage error (exit 2, naming it) found before any order is confirmed;\n"
    "an unknown one fails on its own line.  States: pending,\n"
    "confirming, confirmed, success, canceled; cancel only while pending.\n"
    "doctx recover and doctx worker finish confirmations a crash\n"
    "interrupted.\n"
    "exit: 0 ok (confirm of a confirmed or success order credits nothing;\n"
    "        cancel of a canceled one)\n"
    "      1 no such order\n"
    "      2 invalid input (a malformed trade id, amount <= 0 or not an\n"
    "        integer, an unknown account): nothing is recorded\n"
    "      3 the trade id exists with another account or amount, confirm of\n"
    "        a canceled order, cancel of an order past pending, a credit\n"
    "        declined (the order stays confirming), an order whose stored\n"
    "        fields fail what create checked (a settlement with a lower\n"
    "        limit...: nothing is credited; doctx audit reports it)\n"
    "      4 store error (the order is left for recovery)\n"};
