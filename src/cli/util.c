/* util.c -- the helpers every doctx command shares: opening the store on
 * first use, turning DTX_E* codes into exit codes and "doctx: NAME: detail"
 * lines, and strict parsing of JSON and integer arguments.
 *
 * Keeping these in one place is what makes the exit-code contract (cli.h)
 * hold for every command, including the transfer commands in cmd_txn.c. */
#include "cli/cli.h"

#include "doc/doc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dtx_store_t *dtx__cli_store(dtx_cli_t *cli, int *exit_code) {
  if (cli->st)
    return cli->st;
  int rc = dtx_store_open(cli->uri, &cli->st);
  if (rc < 0) {
    cli->st = NULL;
    *exit_code = dtx__cli_fail(rc);
    return NULL;
  }
  return cli->st;
}

int dtx__cli_exit_code(int rc) {
  switch (rc) {
  case DTX_OK:
    return DTX_EXIT_OK;
  case DTX_ENOMATCH:
  case DTX_ENOTFOUND:
    return DTX_EXIT_NOMATCH;
  case DTX_EINVAL:
  case DTX_EBADJSON:
  case DTX_EBADQUERY:
  case DTX_EBADUPDATE:
  case DTX_EBADURI:
  case DTX_EBADINDEX:
    return DTX_EXIT_USAGE;
  case DTX_EDUPKEY:
  case DTX_ETYPE:
  case DTX_EOVERFLOW:
  case DTX_EIMMUTABLE:
  case DTX_ECONFLICT:
  case DTX_EINSUFFICIENT:
  case DTX_ENOACCOUNT:
  case DTX_ESTATE:
  case DTX_ESTALE:
  case DTX_EVALIDATION:
    return DTX_EXIT_CONSTRAINT;
  case DTX_EAUDIT:
    return DTX_EXIT_AUDIT;
  default: /* NOMEM, BUSY, UNAVAILABLE, BACKEND, FAULT and unknown codes */
    return DTX_EXIT_BACKEND;
  }
}

int dtx__cli_fail(int rc) {
  const char *detail = dtx_errdetail();
  fflush(stdout);
  fprintf(stderr, "doctx: %s: %s\n", dtx_errname(rc),
          detail && *detail ? detail : dtx_strerror(rc));
  return dtx__cli_exit_code(rc);
}

int dtx__cli_usage(const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fputs("doctx: USAGE: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return DTX_EXIT_USAGE;
}

json_t *dtx__cli_json(const char *text, const char *what) {
  json_t *v = NULL;
  int rc = dtx__json_parse(text, &v);
  if (rc < 0) {
    fflush(stdout);
    fprintf(stderr, "doctx: %s: %s: %s\n", dtx_errname(rc), what,
            *dtx_errdetail() ? dtx_errdetail() : dtx_strerror(rc));
    return NULL;
  }
  return v;
}

int dtx__cli_int64(const char *text, int allow_negative, int64_t *out) {
  const char *p = text;
  if (!p || !*p)
    return -1;
  if (*p == '-') {
    if (!allow_negative)
      return -1;
    p++;
  }
  if (!*p)
    return -1;
  for (const char *q = p; *q; q++)
    if (*q < '0' || *q > '9')
      return -1;
  errno = 0;
  char *end;
  long long v = strtoll(text, &end, 10);
  if (errno == ERANGE || *end)
    return -1;
  *out = (int64_t)v;
  return 0;
}

void dtx__cli_print_json(const json_t *v) {
  char *s = dtx__json_dump(v);
  if (!s) {
    fputs("doctx: NOMEM: printing a result\n", stderr);
    return;
  }
  puts(s);
  free(s);
}
