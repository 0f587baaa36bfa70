/* cmd_order.c -- `doctx order ...`: the CLI face of order confirmation
 * (src/txn/order/, docs/orders.md).  The library checks trade ids,
 * accounts and amounts before it writes; this file splits arguments and
 * maps errors to exit codes (an unknown account is bad input here: 2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char *order_help =
    "usage: doctx order create TRADE_ID --account A --amount N\n"
    "                          [--settlement ID]\n"
    "       doctx order confirm TRADE_ID... [--lease-ms N] [--owner O]\n"
    "                          [--deadline-ms N]\n"
    "       doctx order cancel TRADE_ID | order show TRADE_ID\n"
    "       doctx order list [--state S] [--limit N] [--skip N]\n"
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
    "      4 store error (the order is left for recovery)\n";

enum { O_ACCOUNT, O_AMOUNT, O_SETTLEMENT, O_LEASE, O_OWNER, O_DEADLINE,
       O_STATE, O_LIMIT, O_SKIP, O_N };

static int stray(const char *sub, const dtx__cli_opt_t *o, const int *ok) {
  return dtx__cli_stray("order", sub, o, O_N, ok);
}

/* An unknown account is bad input for orders (the library's DTX_EINVAL);
 * everything else as every command maps it. */
static int order_create(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  static const int ok[] = {O_ACCOUNT, O_AMOUNT, O_SETTLEMENT, -1};
  int64_t amount = 0;
  int code;
  if (n != 2)
    return dtx__cli_usage("order create: expected TRADE_ID");
  if ((code = stray("create", o, ok)))
    return code;
  if (!o[O_ACCOUNT].value || !o[O_AMOUNT].value)
    return dtx__cli_usage("order create: --account and --amount are required");
  if (dtx__cli_int_opt("order create", &o[O_AMOUNT], 1, 1, &amount))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  dtx_order_req_t req = {.trade_id = pos[1], .account = o[O_ACCOUNT].value,
                         .amount = amount,
                         .settlement = o[O_SETTLEMENT].value};
  json_t *out = NULL;
  int rc = dtx_order_create(st, &req, &out);
  return dtx__cli_summary(rc, out);
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

static int order_confirm(dtx_cli_t *cli, char **pos, int n,
                         dtx__cli_opt_t *o) {
  static const int ok[] = {O_LEASE, O_OWNER, O_DEADLINE, -1};
  int64_t lease = 0, deadline = 0;
  int code;
  if (n < 2)
    return dtx__cli_usage("order confirm: expected TRADE_ID...");
  if ((code = stray("confirm", o, ok)) ||
      dtx__cli_int_opt("order confirm", &o[O_LEASE], 0, 1, &lease) ||
      dtx__cli_int_opt("order confirm", &o[O_DEADLINE], 0, 1, &deadline))
    return code ? code : DTX_EXIT_USAGE;
  /* Every trade id is checked before the first is confirmed: a malformed
   * one is a usage error of the whole command, so nothing is written. */
  for (int i = 1; i < n; i++)
    if (dtx_order_id_check(pos[i]))
      return dtx__cli_error(DTX_EINVAL, "%s (argument %d); nothing "
                            "confirmed", dtx_errdetail(), i);
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  dtx_exec_opts_t eo = {.owner = o[O_OWNER].value, .lease_ms = lease,
                        .deadline_ms = deadline};
  if (n > 2)
    return confirm_many(st, pos + 1, n - 1, &eo);
  json_t *out = NULL;
  int rc = dtx_order_confirm(st, pos[1], &eo, &out);
  return dtx__cli_summary(rc, out);
}

/* cancel and show: one TRADE_ID, no options; show only reads. */
static int order_one(dtx_cli_t *cli, const char *sub, char **pos, int n,
                     dtx__cli_opt_t *o) {
  static const int none[] = {-1};
  int cancel = strcmp(sub, "cancel") == 0, code;
  if (n != 2)
    return dtx__cli_usage("order %s: expected TRADE_ID", sub);
  if ((code = stray(sub, o, none)))
    return code;
  dtx_store_t *st = cancel ? dtx__cli_store_armed(cli, &code)
                           : dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  int rc = cancel ? dtx_order_cancel(st, pos[1], &out)
                  : dtx_order_get(st, pos[1], &out);
  return dtx__cli_summary(rc, out);
}

static int order_sub(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o);

int dtx__cmd_order(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[O_N] = {
      [O_ACCOUNT] = {"--account", 1, NULL},
      [O_AMOUNT] = {"--amount", 1, NULL},
      [O_SETTLEMENT] = {"--settlement", 1, NULL},
      [O_LEASE] = {"--lease-ms", 1, NULL},
      [O_OWNER] = {"--owner", 1, NULL},
      [O_DEADLINE] = {"--deadline-ms", 1, NULL},
      [O_STATE] = {"--state", 1, NULL},
      [O_LIMIT] = {"--limit", 1, NULL},
      [O_SKIP] = {"--skip", 1, NULL}};
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(order_help);
  /* confirm takes any number of trade ids; the others at most one, as
   * before (the split's own "too many" message). */
  int many = argc > 1 && strcmp(argv[1], "confirm") == 0;
  char **pos = calloc((size_t)argc + 1, sizeof *pos);
  if (!pos)
    return dtx__cli_error(DTX_ENOMEM, "order: %d arguments", argc);
  int n = dtx__cli_split(argc, argv, o, O_N, pos, many ? argc : 2);
  code = n < 0 ? DTX_EXIT_USAGE : order_sub(cli, pos, n, o);
  free(pos);
  return code;
}

static int order_sub(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  int code;
  if (n == 0)
    return dtx__cli_usage("order: expected create, confirm, cancel, show or "
                          "list");
  const char *sub = pos[0];
  if (strcmp(sub, "create") == 0)
    return order_create(cli, pos, n, o);
  if (strcmp(sub, "confirm") == 0)
    return order_confirm(cli, pos, n, o);
  if (strcmp(sub, "cancel") == 0 || strcmp(sub, "show") == 0)
    return order_one(cli, sub, pos, n, o);
  if (strcmp(sub, "list") != 0)
    return dtx__cli_usage("order: expected create, confirm, cancel, show or "
                          "list; got '%s'", sub);
  static const int ok[] = {O_STATE, O_LIMIT, O_SKIP, -1};
  dtx_page_t page = {0};
  if (n != 1)
    return dtx__cli_usage("order list: takes no arguments");
  if ((code = stray("list", o, ok)))
    return code;
  if (dtx__cli_page_opts("order list", &o[O_SKIP], &o[O_LIMIT], &page))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  int rc = dtx_order_list(st, o[O_STATE].value, &page, &out);
  if (rc)
    return dtx__cli_summary(rc, NULL);
  return dtx__cli_print_items(out, 0);
}
