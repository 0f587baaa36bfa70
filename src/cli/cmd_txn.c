/* cmd_txn.c -- placeholder until the transfer commands land. */
#include "cli/cli.h"

static int todo(const char *name) {
  return dtx__cli_usage("%s: not implemented yet", name);
}
int dtx__cmd_account(dtx_cli_t *c, int n, char **v) { (void)c; (void)n; return todo(v[0]); }
int dtx__cmd_transfer(dtx_cli_t *c, int n, char **v) { (void)c; (void)n; return todo(v[0]); }
int dtx__cmd_worker(dtx_cli_t *c, int n, char **v) { (void)c; (void)n; return todo(v[0]); }
int dtx__cmd_recover(dtx_cli_t *c, int n, char **v) { (void)c; (void)n; return todo(v[0]); }
int dtx__cmd_audit(dtx_cli_t *c, int n, char **v) { (void)c; (void)n; return todo(v[0]); }
int dtx__cmd_faults(dtx_cli_t *c, int n, char **v) { (void)c; (void)n; return todo(v[0]); }
