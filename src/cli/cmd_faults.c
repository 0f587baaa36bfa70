/* cmd_faults.c -- doctx faults: every fault point, one per line. */
#include "cli/cli.h"

static int run(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  (void)cli;
  (void)a;
  for (const char *const *p = dtx_fault_points(); *p; p++)
    puts(*p);
  return DTX_EXIT_OK;
}

const dtx__cli_spec_t dtx__cmd_faults = {
    "faults", run, NULL, NULL, 0, NULL, NULL,
    "Lists every fault point, one per line. Arm them with "
    "DOCTX_FAULT=POINT:ACTION[:N][,...],\n"
    "ACTION crash | pause | error | lost (the write applied, its reply "
    "lost),\nN the N-th arrival (default 1).\n"};
