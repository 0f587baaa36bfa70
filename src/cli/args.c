/* args.c -- argument handling shared by the transaction commands
 * (cmd_txn.c, cmd_job.c): --help, option splitting, integer options,
 * paging, the DOCTX_FAULT check, and the stoppable store of the
 * long-running commands (worker, job work). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int dtx__cli_is_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return 1;
  return 0;
}

int dtx__cli_help(const char *text) {
  fputs(text, stdout);
  return DTX_EXIT_OK;
}

/* Checks DOCTX_FAULT before anything runs, so a typo is not silently a
 * test that injects nothing. */
int dtx__cli_faults_ok(void) {
  int rc = dtx_fault_check();
  if (rc == 0)
    return DTX_EXIT_OK;
  dtx__cli_fail(rc);
  return DTX_EXIT_USAGE;
}

dtx_store_t *dtx__cli_store_armed(dtx_cli_t *cli, int *code) {
  if ((*code = dtx__cli_faults_ok()))
    return NULL;
  return dtx__cli_store(cli, code);
}

volatile int dtx__cli_stop;

static void on_signal(int sig) {
  (void)sig;
  dtx__cli_stop = 1;
}

dtx_store_t *dtx__cli_store_stoppable(dtx_cli_t *cli, int *code) {
  dtx_store_t *st = dtx__cli_store_armed(cli, code);
  if (!st)
    return NULL;
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  return st;
}

/* Splits argv into positionals and --name [value] options.  opts lists the
 * options taking a value; flags the ones without.  Returns the number of
 * positionals, or -1 after printing a usage error. */

int dtx__cli_split(int argc, char **argv, dtx__cli_opt_t *opts, size_t nopts,
                 char **pos, int maxpos) {
  int npos = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) == 0 && a[2]) {
      size_t k;
      const char *eq = strchr(a, '=');
      size_t len = eq ? (size_t)(eq - a) : strlen(a);
      for (k = 0; k < nopts; k++)
        if (strlen(opts[k].name) == len && strncmp(opts[k].name, a, len) == 0)
          break;
      if (k == nopts) {
        dtx__cli_usage("%s: unknown option %s", argv[0], a);
        return -1;
      }
      if (!opts[k].has_value) {
        if (eq) {
          dtx__cli_usage("%s: %.*s takes no value", argv[0], (int)len, a);
          return -1;
        }
        opts[k].value = "1";
      } else if (eq) {
        opts[k].value = eq + 1;
      } else if (i + 1 < argc) {
        opts[k].value = argv[++i];
      } else {
        dtx__cli_usage("%s: %s needs a value", argv[0], a);
        return -1;
      }
      continue;
    }
    if (npos == maxpos) {
      dtx__cli_usage("%s: unexpected argument '%s'", argv[0], a);
      return -1;
    }
    pos[npos++] = argv[i];
  }
  return npos;
}

int dtx__cli_int_opt(const char *cmd, const dtx__cli_opt_t *o, int allow_negative,
                   int64_t min, int64_t *out) {
  if (!o->value)
    return 0;
  if (dtx__cli_int64(o->value, allow_negative, out) != 0 || *out < min) {
    dtx__cli_usage("%s: %s must be an integer >= %lld, got '%s'", cmd, o->name,
                   (long long)min, o->value);
    return -1;
  }
  return 0;
}

int dtx__cli_print_items(json_t *arr, int verbose) {
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) dtx__cli_print_item(v, verbose);
  json_decref(arr);
  return DTX_EXIT_OK;
}

/* --skip/--limit into page; -1 after a usage error. */
int dtx__cli_page_opts(const char *cmd, const dtx__cli_opt_t *skip,
                     const dtx__cli_opt_t *limit, dtx_page_t *page) {
  if (dtx__cli_int_opt(cmd, skip, 0, 0, &page->skip) ||
      dtx__cli_int_opt(cmd, limit, 0, 0, &page->limit))
    return -1;
  return 0;
}


int dtx__cli_stray(const char *cmd, const char *sub, const dtx__cli_opt_t *o,
                   int nopts, const int *ok) {
  for (int i = 0; i < nopts; i++) {
    int allowed = 0;
    for (const int *k = ok; *k >= 0; k++)
      allowed |= *k == i;
    if (o[i].value && !allowed)
      return dtx__cli_usage("%s %s: %s does not go with %s", cmd, sub,
                            o[i].name, sub);
  }
  return 0;
}
