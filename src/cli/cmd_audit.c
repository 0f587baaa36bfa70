/* cmd_audit.c -- doctx audit: every pattern's audit
 * (src/txn/frame/audit.c), one line per pattern, then every finding. */
#include "cli/cli.h"

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

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *acked_file = dtx__cli_str(a, "--acked");
  json_t *acked = NULL, *r = NULL, *f, *part;
  int code;
  if (acked_file && (code = read_acked(acked_file, &acked)))
    return code;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st) {
    json_decref(acked);
    return code;
  }
  unsigned flags = dtx__cli_has(a, "--settled") ? DTX_AUDIT_SETTLED : 0;
  int rc = dtx_audit_acked(st, flags, acked, &r);
  json_decref(acked);
  if (!r)
    return dtx__cli_fail(rc);
  if (dtx__cli_has(a, "--json")) {
    dtx__cli_print_json(r);
  } else {
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

const dtx__cli_spec_t dtx__cmd_audit = {
    "audit", run, NULL,
    (const dtx__cli_opt_t[]){{"--json", DTX__CLI_FLAG},
                             {"--settled", DTX__CLI_FLAG},
                             {"--acked", DTX__CLI_STR, "FILE"},
                             {NULL}},
    DTX__CLI_READS, NULL, NULL,
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
    "error\n"};
