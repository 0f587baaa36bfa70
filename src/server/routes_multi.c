/* routes_multi.c -- doctxd's multi-document transaction routes: POST
 * /v1/txn runs one script as `doctx txn` does, and POST
 * /v1/txn/{id}/outcome answers `doctx txn show ID` (src/cli/cmd_txn.c,
 * docs/transactions.md "Scripts", docs/server.md "Transactions").  The
 * library checks the script and the options (dtx_txn_script_check,
 * dtx_txn_opts_check) before anything is written; this file reads the
 * body and maps the answers as the CLI maps them to exit codes:
 *   committed, or aborted by a require   200 {"outcome","reads"}  (exit 0, 1)
 *   bad script or option                 400, nothing written      (exit 2)
 *   conflict still there at the deadline 409 CONFLICT              (exit 3)
 *   store unavailable                    503, "outcome":"unknown"  (exit 4)
 * The outcome is a POST, not a GET: asking for an id with no record
 * writes a fence (an aborted record, so a late commit under that id
 * fails), and a pending record whose lease lapsed is aborted -- a write
 * a read token, a crawler or a proxy's prefetch must not make. */
#include "server/server.h"

#include <string.h>

void dtx__srv_h_txn(dtx__srv_ctx_t *c) {
  json_t *script = dtx__srv_arg(c, "script"), *out = NULL;
  const char *iso = dtx__srv_arg_str(c, "isolation");
  dtx_txn_opts_t o = {.isolation = DTX_TXN_SNAPSHOT,
                      .id = dtx__srv_arg_str(c, "id"),
                      .lease_ms = dtx__srv_arg_int(c, "lease_ms", 0),
                      .deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  if (!script) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "field 'script' is required: a JSON array of steps "
                 "(docs/transactions.md, \"Scripts\")");
    return;
  }
  if (iso && strcmp(iso, "serializable") == 0) {
    o.isolation = DTX_TXN_SERIALIZABLE;
  } else if (iso && strcmp(iso, "snapshot") != 0) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "isolation is \"snapshot\" (the default) or \"serializable\"");
    return;
  }
  /* The options as the body gives them, so a deadline or lease near
   * INT64_MAX is refused (400), not capped; then the deadline is capped
   * by the request's time (dtx__srv_budget), so the run ends -- with its
   * own answer -- before doctxd's timeout answers for it. */
  int rc = dtx_txn_opts_check(&o);
  if (rc == 0)
    rc = dtx_txn_script_check(script);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  o.deadline_ms = dtx__srv_budget(c, o.deadline_ms);
  rc = dtx_txn_script_run(c->d->st, &o, script, &out);
  if (out) { /* committed (rc 0), or aborted by a require (DTX_ENOMATCH) */
    dtx__srv_json(c, 200, out);
    return;
  }
  /* A 5xx may come from the commit point itself (the detail says so):
   * the outcome is unknown, and with a client id POST
   * /v1/txn/{id}/outcome tells it.  Without one there may be no record
   * to ask (a one-document commit has none): the detail names the
   * document that tells. */
  dtx__srv_fail(c, rc,
                dtx__srv_status_of(rc) >= 500
                    ? json_pack("{s:s,s:s?}", "outcome", "unknown", "id", o.id)
                    : NULL);
}

void dtx__srv_h_txn_outcome(dtx__srv_ctx_t *c) {
  int outcome = DTX_TXN_UNKNOWN;
  int rc = dtx_txn_outcome(c->d->st, c->param[0], &outcome);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  dtx__srv_json(c, 200,
                json_pack("{s:s,s:s}", "id", c->param[0], "outcome",
                          outcome == DTX_TXN_COMMITTED ? "committed"
                          : outcome == DTX_TXN_ABORTED ? "aborted"
                                                       : "unknown"));
}
