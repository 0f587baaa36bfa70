/* cmd_transfer.c -- doctx transfer: the two-phase transfers
 * (src/txn/transfer/, docs/transfers.md).  FROM TO AMOUNT runs one; show,
 * list and cancel; batch runs many synchronous transfers from stdin (or
 * --file), one JSON object per line {"from", "to", "amount"[, "id"]},
 * through dtx_transfer_execute_many, one result per line in input order.
 *
 * Every request is checked by the library's dtx_transfer_req_check
 * before the store is opened, so bad input records nothing; a batch's
 * malformed line exits 2 naming it, and nothing runs.  A batch's exit
 * code is the most severe of its lines', each the one `doctx transfer`
 * gives it alone: 1 a transfer failed (declined; reason in the document),
 * 2 a missing account, 3 an id reused with other parameters, 4 a store
 * error (the transfer is left for `doctx recover`). */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

/* The exit code `doctx transfer` gives this outcome alone. */
static int transfer_exit(int rc, const json_t *tx) {
  if (rc == DTX_ENOACCOUNT)
    return DTX_EXIT_USAGE; /* invalid input at submission: nothing recorded */
  if (rc)
    return dtx__cli_exit_code(rc);
  const char *s = json_string_value(json_object_get(tx, "state"));
  return s && strcmp(s, "failed") == 0 ? DTX_EXIT_NOMATCH : DTX_EXIT_OK;
}

static int transfer(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_transfer_req_t req = {.id = dtx__cli_str(a, "--id"), .from = a->pos[0],
                            .to = a->pos[1]};
  dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  int async = dtx__cli_has(a, "--async"), code, rc;
  const char *amount = a->pos[2];
  const char *digits = amount + (amount[0] == '-');
  /* AMOUNT's shape: an int64 without a leading zero ("05", as "+5"); its
   * value is the library's to judge. */
  if (dtx__cli_int64(amount, 1, &req.amount) != 0 ||
      (digits[0] == '0' && digits[1]))
    return dtx__cli_usage("transfer: AMOUNT must be a positive int64 in minor "
                          "units, got '%s'", amount);
  if ((rc = dtx_transfer_req_check(&req)))
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  json_t *tx = NULL;
  rc = async ? dtx_transfer_submit(st, &req, &tx)
             : dtx_transfer_execute(st, &req, &eo, &tx);
  if (tx && rc != DTX_ENOACCOUNT)
    dtx__cli_print_item(tx, dtx__cli_has(a, "--verbose"));
  code = rc ? (dtx__cli_fail(rc), transfer_exit(rc, tx))
            : async ? DTX_EXIT_OK : transfer_exit(0, tx);
  json_decref(tx);
  return code;
}

/* show and cancel: one transfer, printed; a missing one exits 1. */
static int one(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int code, rc, show = strcmp(a->spec->name, "show") == 0;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  json_t *tx = NULL;
  if (!st)
    return code;
  rc = show ? dtx_transfer_get(st, a->pos[0], &tx)
            : dtx_transfer_cancel(st, a->pos[0], &tx);
  if (tx && rc != DTX_ENOTFOUND)
    dtx__cli_print_item(tx, dtx__cli_has(a, "--verbose"));
  json_decref(tx);
  return rc ? (dtx__cli_fail(rc), rc == DTX_ENOTFOUND ? DTX_EXIT_NOMATCH
                                                      : dtx__cli_exit_code(rc))
            : DTX_EXIT_OK;
}

static int list(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  json_t *all = NULL;
  int code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  dtx_page_t page = dtx__cli_page(a);
  return st ? dtx__cli_items(dtx_transfer_list(st, dtx__cli_str(a, "--state"),
                                               &page, &all),
                             &all, 1, dtx__cli_has(a, "--verbose"))
            : code;
}

/* ---- batch ------------------------------------------------------------- */

#define BATCH_CHUNK 64

typedef struct tline {
  dtx__cli_jline_t j; /* first; its line owns the strings req borrows */
  dtx_transfer_req_t req;
} tline_t;

/* Checks one line's shape, then the request (the library's check). */
static int parse_line(tline_t *l) {
  size_t ln = l->j.lineno;
  json_t *v = l->j.line, *f;
  const char *key;
  if (!json_is_object(v))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "a transfer is an object "
                             "{\"from\", \"to\", \"amount\"[, \"id\"]}");
  json_object_foreach(v, key, f) {
    if (strcmp(key, "from") && strcmp(key, "to") && strcmp(key, "amount") &&
        strcmp(key, "id")) {
      return dtx__cli_bad_line(ln, DTX_EINVAL, "unknown field '%.200s' "
                               "(from, to, amount, id)", key);
    }
  }
  json_t *from = json_object_get(v, "from"), *to = json_object_get(v, "to");
  json_t *amount = json_object_get(v, "amount"), *id = json_object_get(v, "id");
  if (!json_is_string(from) || !json_is_string(to))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"from\" and \"to\" must be "
                             "account ids (strings)");
  if (!json_is_integer(amount))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"amount\" must be a "
                             "positive integer in minor units");
  if (id && !json_is_string(id))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"id\" must be a string");
  l->req = (dtx_transfer_req_t){.id = id ? json_string_value(id) : NULL,
                                .from = json_string_value(from),
                                .to = json_string_value(to),
                                .amount = (int64_t)json_integer_value(amount)};
  int rc = dtx_transfer_req_check(&l->req);
  return rc ? dtx__cli_bad_line(ln, rc, "%s", dtx_errdetail()) : 0;
}

static int batch(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  tline_t *ls = NULL;
  size_t n = 0;
  int ec = dtx__cli_read_jlines(dtx__cli_str(a, "--file"),
                                "transfer batch: reading the transfers",
                                sizeof *ls, (void **)&ls, &n);
  for (size_t i = 0; !ec && i < n; i++)
    ec = parse_line(&ls[i]);
  dtx_store_t *st = ec || n == 0 ? NULL : dtx__cli_store(cli, &ec);
  dtx_transfer_req_t *reqs = st ? calloc(n, sizeof *reqs) : NULL;
  dtx_transfer_result_t *res = st ? calloc(n, sizeof *res) : NULL;
  if (st && (!reqs || !res))
    ec = dtx__cli_error(DTX_ENOMEM, "transfer batch of %zu", n);
  for (size_t i = 0; st && !ec && i < n; i++)
    reqs[i] = ls[i].req;
  dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  dtx__cli_batch_t out = {.key = "line", .item = 1,
                          .verbose = dtx__cli_has(a, "--verbose"),
                          .exit_of = transfer_exit};
  for (size_t from = 0; st && !ec && from < n; from += BATCH_CHUNK) {
    size_t k = n - from < BATCH_CHUNK ? n - from : BATCH_CHUNK;
    (void)dtx_transfer_execute_many(st, reqs + from, k, &eo, res + from);
    for (size_t i = from; i < from + k; i++)
      dtx__cli_batch_line(&out, json_integer((json_int_t)ls[i].j.lineno),
                          res[i].rc, res[i].detail, res[i].tx);
    dtx_transfer_results_clear(res + from, k);
  }
  dtx__cli_jlines_free(ls, n, sizeof *ls);
  free(reqs);
  free(res);
  return ec ? ec : out.worst;
}

#define V DTX__CLI_OPT_VERBOSE
#define VO (const dtx__cli_opt_t[]){V, {NULL}}
const dtx__cli_spec_t dtx__cmd_transfer = {
    "transfer", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"", transfer, "FROM TO AMOUNT",
         (const dtx__cli_opt_t[]){{"--id", DTX__CLI_STR, "ID"},
                                  {"--async", DTX__CLI_FLAG},
                                  DTX__CLI_OPT_DEADLINE, V, {NULL}},
         DTX__CLI_ARMED},
        {"show", one, "ID", VO, DTX__CLI_READS},
        {"list", list, NULL,
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_STATE, DTX__CLI_OPT_LIMIT,
                                  DTX__CLI_OPT_SKIP, DTX__CLI_OPT_AFTER, V, {NULL}},
         DTX__CLI_READS},
        {"cancel", one, "ID", VO, DTX__CLI_ARMED},
        {"batch", batch, NULL,
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_FILE, DTX__CLI_OPT_DEADLINE, V,
                                  {NULL}},
         DTX__CLI_ARMED},
        {NULL}},
    NULL,
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
    DTX__CLI_DEADLINE_HELP
    "exit: 0 succeeded (or recorded with --async, or canceled)\n"
    "      1 the transfer failed (reason in the document), or no such transfer\n"
    "      2 invalid input (amount not a positive int64, FROM == TO, missing\n"
    "        account, bad id): nothing is recorded\n"
    "      3 id reused with other parameters; cancel after commit (make a\n"
    "        reverse transfer instead)\n"
    "      4 store error (the transfer is left for `doctx recover`)\n"};
#undef V
#undef VO
