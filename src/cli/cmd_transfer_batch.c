/* cmd_transfer_batch.c -- doctx transfer batch [--file PATH]: many
 * synchronous transfers from stdin (or PATH), one JSON object per line
 * {"from", "to", "amount"[, "id"]}, run through
 * dtx_transfer_execute_many, one result per line in input order.
 *
 * Like `doctx bulk` it runs in two phases: every line is read, parsed and
 * checked first (its shape here; the request itself by the library's
 * dtx_transfer_req_check, the check every transfer passes); a malformed
 * line exits 2 naming it, before the store is opened, so nothing runs.
 * Then the transfers go to the store in batches of BATCH_CHUNK, each one
 * dtx_transfer_execute_many call, and each line prints the transfer
 * document, or {"error": NAME, "detail": ..., "line": N}.
 *
 * Exit code: 0 when every transfer succeeded, else the most severe of
 * the lines' codes, each the one `doctx transfer` gives it alone: 1 a
 * transfer failed (declined; reason in the document), 2 a missing
 * account, 3 an id reused with other parameters, 4 a store error (the
 * transfer is left for `doctx recover`). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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

/* The exit code `doctx transfer` gives this outcome alone. */
static int line_exit(int rc, const json_t *tx) {
  if (rc == DTX_ENOACCOUNT)
    return DTX_EXIT_USAGE; /* invalid input at submission: nothing recorded */
  if (rc)
    return dtx__cli_exit_code(rc);
  const char *s = json_string_value(json_object_get(tx, "state"));
  return s && strcmp(s, "failed") == 0 ? DTX_EXIT_NOMATCH : DTX_EXIT_OK;
}

int dtx__cmd_transfer_batch(dtx_cli_t *cli, const char *file,
                            int64_t deadline_ms, int verbose) {
  tline_t *ls = NULL;
  size_t n = 0;
  int ec = dtx__cli_read_jlines(file, "transfer batch: reading the transfers",
                                sizeof *ls, (void **)&ls, &n);
  for (size_t i = 0; !ec && i < n; i++)
    ec = parse_line(&ls[i]);
  dtx_store_t *st = ec || n == 0 ? NULL : dtx__cli_store_armed(cli, &ec);
  dtx_transfer_req_t *reqs = st ? calloc(n, sizeof *reqs) : NULL;
  dtx_transfer_result_t *res = st ? calloc(n, sizeof *res) : NULL;
  if (st && (!reqs || !res))
    ec = dtx__cli_error(DTX_ENOMEM, "transfer batch of %zu", n);
  for (size_t i = 0; st && !ec && i < n; i++)
    reqs[i] = ls[i].req;
  dtx_exec_opts_t eo = {.deadline_ms = deadline_ms};
  dtx__cli_batch_t out = {.key = "line", .item = 1, .verbose = verbose,
                          .exit_of = line_exit};
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
