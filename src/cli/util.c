/* util.c -- the helpers every doctx command shares: opening the store on
 * first use, turning DTX_E* codes into exit codes and "doctx: NAME: detail"
 * lines, strict parsing of JSON and integer arguments, and printing.
 *
 * Keeping these in one place is what makes the exit-code contract (cli.h)
 * hold for every command. */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

dtx_store_t *dtx__cli_store(dtx_cli_t *cli, int *exit_code) {
  if (cli->st)
    return cli->st;
  /* DOCTX_FAULT is checked before anything runs, so a typo is not
   * silently a test that injects nothing. */
  int rc = cli->armed ? dtx_fault_check() : 0;
  if (rc < 0) {
    dtx__cli_fail(rc);
    *exit_code = DTX_EXIT_USAGE;
    return NULL;
  }
  rc = dtx_store_open_ex(cli->uri, cli->open_flags, &cli->st);
  if (rc < 0) {
    cli->st = NULL;
    *exit_code = dtx__cli_fail(rc);
    return NULL;
  }
  return cli->st;
}

volatile int dtx__cli_stop;

static void on_signal(int sig) {
  (void)sig;
  dtx__cli_stop = 1;
}

dtx_store_t *dtx__cli_store_stoppable(dtx_cli_t *cli, int *code) {
  dtx_store_t *st = dtx__cli_store(cli, code);
  if (!st)
    return NULL;
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  return st;
}

/* The exit-code contract in words.  `doctx --help` prints this table and
 * the README carries the same rows (tests/cli/docs.sh checks that they
 * agree), so the two cannot drift apart.  Plain text: no markup. */
static const struct {
  int code;
  const char *meaning;
} exit_docs[] = {
    {DTX_EXIT_OK, "success; a transfer that succeeded (or was recorded with "
                  "--async, or canceled)"},
    {DTX_EXIT_NOMATCH,
     "find-and-modify matched nothing (it prints nothing); a transfer that "
     "failed, for instance for insufficient funds (the reason is in the "
     "printed document); show of a missing account, transfer, job, lock or "
     "sync rule; a lock still held (lock acquire) or a token no longer "
     "current (lock renew, release); job effect on no matching document; "
     "job heartbeat, complete or fail of a missing job; "
     "sync update of a missing rule or master; show or confirm of a missing "
     "order"},
    {DTX_EXIT_USAGE,
     "usage error or invalid input: bad JSON, unknown operator, bad URI, bad "
     "option or number, missing or extra argument; a transfer amount that is "
     "not a positive int64, FROM equal to TO, or a missing account (also for "
     "order create, with a malformed trade id). Nothing is changed."},
    {DTX_EXIT_CONSTRAINT,
     "constraint violation: duplicate key, wrong type, int64 overflow, _id "
     "change, an existing account id, a transfer id reused with other "
     "parameters, cancel after commit, an aggregation past its memory limit, "
     "a write refused by a collection's rules (VALIDATION), a write whose "
     "--fence token is older than one that wrote the document (FENCED), a "
     "job id reused with other parameters, a job effect, heartbeat, complete "
     "or fail with a stale epoch (no longer current), "
     "a sync rule redefined with another definition or clashing with "
     "another rule, an order trade id reused with another account or amount, "
     "confirm of a canceled order, cancel of an order past pending, an "
     "interest run that could not credit some accounts (it credited the "
     "others and lists those in \"refusals\")"},
    {DTX_EXIT_BACKEND,
     "store unavailable or backend error (a transfer it interrupts is left "
     "for doctx recover), including no store at PATH for a command that "
     "only reads; a stored document the store cannot read (CORRUPT, naming "
     "its collection and _id; the audit reads past it and reports it, exit "
     "5)"},
    {DTX_EXIT_AUDIT, "audit found a broken invariant"},
    {DTX_EXIT_LOST,
     "lock hold lost its lock (a renewal failed or the lease lapsed): the "
     "command's process group got SIGTERM, then SIGKILL after --grace-ms; "
     "otherwise lock hold exits with the command's own status"},
};

void dtx__cli_wrap(FILE *f, int *col, int indent, const char *p,
                   int nobreak) {
  while (*(p += strspn(p, " "))) {
    int w = (int)(nobreak ? strlen(p) : strcspn(p, " "));
    int fresh = *col <= 0, c = fresh ? -*col : *col;
    if (!fresh && c > indent && c + 1 + w > 76) {
      c = fprintf(f, "\n%*s", indent, "") - 1;
      fresh = 1;
    }
    *col = c + fprintf(f, "%s%.*s", fresh ? "" : " ", w, p);
    p += w;
  }
}

void dtx__cli_print_exit_codes(FILE *f) {
  for (size_t i = 0; i < sizeof exit_docs / sizeof exit_docs[0]; i++) {
    /* "  N  " then the words, wrapped at 76 columns under the first. */
    int col = -fprintf(f, "  %d  ", exit_docs[i].code);
    dtx__cli_wrap(f, &col, -col, exit_docs[i].meaning, 0);
    fputc('\n', f);
  }
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
  case DTX_ELIMIT:
  case DTX_EVALIDATION:
  case DTX_EFENCED:
    return DTX_EXIT_CONSTRAINT;
  case DTX_EAUDIT:
    return DTX_EXIT_AUDIT;
  default: /* NOMEM, BUSY, UNAVAILABLE, BACKEND, FAULT, CORRUPT and unknown
            codes */
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

int dtx__cli_error(int rc, const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "doctx: %s: ", dtx_errname(rc));
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
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

int dtx__cli_bad_line(size_t lineno, int rc, const char *fmt, ...) {
  va_list ap;
  fflush(stdout);
  fprintf(stderr, "doctx: %s: line %zu: ", dtx_errname(rc), lineno);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return DTX_EXIT_USAGE;
}

int dtx__cli_read_jlines(const char *file, const char *what, size_t size,
                         void **out, size_t *nout) {
  FILE *in = stdin;
  char *buf = NULL, *ls = NULL;
  size_t cap = 0, n = 0, capl = 0, lineno = 0;
  ssize_t len;
  int ec = 0;
  *out = NULL;
  *nout = 0;
  if (file && strcmp(file, "-") != 0 && !(in = fopen(file, "r")))
    return dtx__cli_usage("%s: cannot open %s: %s", what, file,
                          strerror(errno));
  errno = 0;
  while ((len = getline(&buf, &cap, in)) >= 0) {
    lineno++;
    if (strspn(buf, " \t\r\n") == (size_t)len)
      continue;
    if (n == capl) {
      capl = capl ? capl * 2 : 64;
      char *nl = realloc(ls, capl * size);
      if (!nl) {
        ec = dtx__cli_error(DTX_ENOMEM, "%s", what);
        break;
      }
      ls = nl;
    }
    dtx__cli_jline_t *l = (dtx__cli_jline_t *)(ls + n * size);
    memset(l, 0, size);
    l->lineno = lineno;
    /* A NUL would end the text the parser sees: the rest of the line
     * would be dropped unseen.  Refuse it. */
    if (memchr(buf, '\0', (size_t)len)) {
      ec = dtx__cli_bad_line(lineno, DTX_EBADJSON, "a NUL byte at column %zu",
                             strlen(buf) + 1);
      break;
    }
    int rc = dtx_json_parse(buf, &l->line);
    if (rc < 0) {
      ec = dtx__cli_bad_line(lineno, rc, "%s", dtx_errdetail());
      break;
    }
    n++;
  }
  if (!ec && ferror(in))
    ec = dtx__cli_usage("%s: %s", what, strerror(errno));
  if (in != stdin)
    fclose(in);
  free(buf);
  *out = ls;
  *nout = n;
  return ec;
}

void dtx__cli_jlines_free(void *lines, size_t n, size_t size) {
  for (size_t i = 0; lines && i < n; i++)
    json_decref(((dtx__cli_jline_t *)((char *)lines + i * size))->line);
  free(lines);
}

/* Reads all of stdin for a "-" argument: the CLI's one reader of it, so
 * every command taking "-" refuses what it refuses.  Only one argument
 * of a command line can be "-": stdin is read once. */
static char *read_stdin(const char *what) {
  static int used;
  if (used++) {
    dtx__cli_usage("%s: only one argument can be - (stdin is read once)",
                   what);
    return NULL;
  }
  size_t n = 0, cap = 4096;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n - 1, stdin);
    if (ferror(stdin)) {
      fflush(stdout);
      fprintf(stderr, "doctx: USAGE: %s: reading stdin: %s\n", what,
              strerror(errno));
      free(buf);
      return NULL;
    }
    if (feof(stdin)) {
      /* A NUL would end the text the parser sees: the rest of the
       * argument would be dropped unseen (as for input lines,
       * dtx__cli_read_jlines).  Refuse it before anything runs. */
      const char *nul = memchr(buf, '\0', n);
      if (nul) {
        dtx__cli_error(DTX_EBADJSON, "%s: a NUL byte at byte %zu of stdin",
                       what, (size_t)(nul - buf) + 1);
        free(buf);
        return NULL;
      }
      buf[n] = '\0';
      return buf;
    }
    if (n + 1 == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb)
        free(buf);
      buf = nb;
    }
  }
  fputs("doctx: NOMEM: reading stdin\n", stderr);
  return NULL;
}

json_t *dtx__cli_json(const char *text, const char *what) {
  json_t *v = NULL;
  char *in = NULL;
  if (strcmp(text, "-") == 0 && !(text = in = read_stdin(what)))
    return NULL;
  int rc = dtx_json_parse(text, &v);
  free(in);
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
  char *s = dtx_json_dump(v);
  if (!s) {
    fputs("doctx: NOMEM: printing a result\n", stderr);
    return;
  }
  puts(s);
  free(s);
}

/* Fields of the patterns' documents that hold wall-clock milliseconds
 * (stored as integers; shown as ISO 8601), and the executor's fields a
 * reader of a transfer does not need unless asked (--verbose). */
static const char *const time_fields[] = {"created", "updated", "lease_until",
                                          "at", NULL};
static const char *const executor_fields[] = {"owner", "lease_until", "epoch",
                                              /* a job's event outbox */
                                              "ev_n", "ev_sent", "ev_out",
                                              "ev_pend", NULL};

static int listed(const char *const *list, const char *key) {
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], key) == 0)
      return 1;
  return 0;
}

/* 2024-05-01T12:34:56.789Z, or NULL when ms is out of range. */
static json_t *iso8601(json_int_t ms) {
  char buf[96]; /* room for any int fields: the compiler cannot see the checks */
  struct tm tm;
  time_t secs = (time_t)(ms / 1000);
  long frac = (long)(ms % 1000);
  if (frac < 0) {
    frac += 1000;
    secs--;
  }
  if (!gmtime_r(&secs, &tm) || tm.tm_year > 9999 - 1900 || tm.tm_year < -1900)
    return NULL;
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
           tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
           tm.tm_sec, frac);
  return json_string(buf);
}

/* Rewrites v in place: time fields as ISO 8601, executor fields dropped
 * at the top level unless verbose. */
static void humanise(json_t *v, int top, int verbose) {
  if (json_is_array(v)) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) humanise(e, 0, verbose);
    return;
  }
  if (!json_is_object(v))
    return;
  const char *k;
  json_t *f;
  void *tmp;
  json_object_foreach_safe(v, tmp, k, f) {
    if (top && !verbose && listed(executor_fields, k)) {
      json_object_del(v, k);
    } else if (json_is_integer(f) && listed(time_fields, k)) {
      json_t *iso = iso8601(json_integer_value(f));
      if (iso)
        json_object_set_new(v, k, iso);
    } else {
      humanise(f, 0, verbose);
    }
  }
}

void dtx__cli_print_item(const json_t *doc, int verbose) {
  json_t *copy = json_deep_copy(doc);
  if (!copy) {
    fputs("doctx: NOMEM: printing a result\n", stderr);
    return;
  }
  humanise(copy, 1, verbose);
  dtx__cli_print_json(copy);
  json_decref(copy);
}

int dtx__cli_items(int rc, json_t **arr, int item, int verbose) {
  size_t i;
  json_t *v;
  json_array_foreach(rc ? NULL : *arr, i, v) {
    if (item)
      dtx__cli_print_item(v, verbose);
    else
      dtx__cli_print_json(v);
  }
  json_decref(*arr);
  *arr = NULL;
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

int dtx__cli_summary(int rc, json_t **sum) {
  if (*sum)
    dtx__cli_print_json(*sum);
  json_decref(*sum);
  *sum = NULL;
  return rc ? dtx__cli_fail(rc) : DTX_EXIT_OK;
}

/* One line per request, whatever the call: a script reading the output of
 * `order confirm ID...` or `transfer batch` matches lines to its input the
 * same way, and the exit code means the same for one request or many. */
int dtx__cli_batch_line(dtx__cli_batch_t *b, json_t *id, int rc,
                        const char *detail, const json_t *doc) {
  if (rc) {
    json_t *e = json_pack("{s:s,s:s,s:O}", "error", dtx_errname(rc), "detail",
                          detail ? detail : "", b->key, id);
    if (e)
      dtx__cli_print_json(e);
    else
      puts("{\"error\":\"NOMEM\"}");
    json_decref(e);
  } else if (b->item) {
    dtx__cli_print_item(doc, b->verbose);
  } else {
    dtx__cli_print_json(doc);
  }
  json_decref(id);
  int code = b->exit_of ? b->exit_of(rc, doc) : dtx__cli_exit_code(rc);
  if (code > b->worst)
    b->worst = code;
  return code;
}

int dtx__cli_fence(const char *cmd, const char *v, const char **name,
                   int64_t *token) {
  static _Thread_local char buf[160];
  *name = NULL;
  *token = 0;
  if (!v)
    return 0;
  const char *colon = strrchr(v, ':');
  if (!colon || colon == v || (size_t)(colon - v) >= sizeof buf ||
      dtx__cli_int64(colon + 1, 0, token) < 0)
    return dtx__cli_usage("%s: --fence wants NAME:TOKEN with an integer "
                          "TOKEN >= 1, not '%s'",
                          cmd, v);
  memcpy(buf, v, (size_t)(colon - v));
  buf[colon - v] = '\0';
  int rc = dtx_check_fence(buf, *token);
  if (rc < 0)
    return dtx__cli_fail(rc);
  *name = buf;
  return 0;
}

int dtx__cli_limit(const char *cmd, const char *text, int *none,
                   int64_t *min) {
  *none = strcmp(text, "none") == 0;
  if (!*none && dtx__cli_int64(text, 1, min) != 0)
    return dtx__cli_usage("%s: the limit must be an int64 or none, got '%s'",
                          cmd, text);
  return 0;
}
