/* cli.h -- the doctx command's shared pieces: exit codes, the command
 * spec and its one parser, error printing and argument helpers.
 *
 * Every command is one declarative dtx__cli_spec_t in its own
 * cmd_<command>.c: name, function, positionals, options with their types,
 * and whether it only reads.  main.c lists the specs; spec.c parses every
 * command line against its spec (options anywhere, `--` ends them) and
 * prints every --help from the specs.  The command's function gets the
 * parsed arguments and makes its library calls; the library checks the
 * values, and the function maps its errors to the exit codes below. */
#ifndef DTX_CLI_H
#define DTX_CLI_H

#include "doctx.h"

#include <stdio.h>

/* Exit codes: the contract documented in --help and the README. */
enum {
  DTX_EXIT_OK = 0,
  DTX_EXIT_NOMATCH = 1,    /* find-and-modify matched nothing; transfer failed */
  DTX_EXIT_USAGE = 2,      /* usage error or invalid input */
  DTX_EXIT_CONSTRAINT = 3, /* duplicate key, type, overflow, _id change,
                              state, validation */
  DTX_EXIT_BACKEND = 4,    /* store unavailable or backend error */
  DTX_EXIT_AUDIT = 5,      /* audit found a broken invariant */
  DTX_EXIT_LOST = 6        /* lock hold: the lock was lost, the command
                              killed */
};

typedef struct dtx_cli {
  const char *uri;      /* --store, or NULL for the default */
  dtx_store_t *st;      /* opened on first use by dtx__cli_store() */
  unsigned open_flags;  /* DTX_OPEN_NOCREATE for commands that only read */
  int armed;            /* check DOCTX_FAULT before opening the store */
} dtx_cli_t;

/* ---- the spec ---------------------------------------------------------- */

/* An option's type: the shape the parser accepts as its value.  Types are
 * shapes, not bounds: every bound past the type's (at most 256 threads, a
 * priority from -100 to 100, a rate up to 1000000 ppm) is the library's,
 * and the command maps its error to exit 2.  POS is for the C fields that
 * read 0 as "the default" (deadline_ms, lease_ms, ...): the CLI's default
 * is leaving the option out, so 0 is not a value there; COUNT for counts,
 * offsets and durations that 0 is a value of. */
enum {
  DTX__CLI_FLAG,  /* no value */
  DTX__CLI_STR,   /* any text (JSON, a name: checked by whoever reads it) */
  DTX__CLI_LIST,  /* STR that may repeat (version put --child) */
  DTX__CLI_INT,   /* a decimal int64, a sign allowed */
  DTX__CLI_COUNT, /* a decimal int64 >= 0 */
  DTX__CLI_POS    /* a decimal int64 >= 1 */
};

typedef struct dtx__cli_opt {
  const char *name;   /* "--limit" */
  int type;           /* DTX__CLI_* above */
  const char *meta;   /* its value in usage lines ("N"); NULL for a flag */
  const char *help;   /* its line in --help; NULL: the text describes it */
  int required;
  int c_int;          /* read into a C int (dtx__cli_int): a value past
                         int's range is refused here, by the value typed,
                         not cut to INT_MAX for the library to name */
} dtx__cli_opt_t;

typedef struct dtx__cli_args dtx__cli_args_t;
typedef struct dtx__cli_spec dtx__cli_spec_t;

/* A command's function: the parsed arguments in, an exit code out. */
typedef int (*dtx__cli_fn)(dtx_cli_t *cli, const dtx__cli_args_t *a);

/* Spec flags. */
enum {
  DTX__CLI_READS = 1, /* only reads: opens the store with DTX_OPEN_NOCREATE,
                         so a missing SQLite store is "no store at PATH"
                         (exit 4), never a new empty one */
  DTX__CLI_ARMED = 2, /* runs protocol steps: a DOCTX_FAULT typo is a
                         usage error, checked before the store opens */
  DTX__CLI_DOC = 4    /* listed under "Document commands" in doctx --help */
};

/* The spec tables leave trailing fields out (zero), as tables do. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

struct dtx__cli_spec {
  const char *name;  /* "find"; a subcommand's ("add"); "" for the form
                        without a subcommand name (transfer FROM TO AMOUNT),
                        taken when the positionals fit it */
  dtx__cli_fn fn;    /* NULL when it has subcommands */
  const char *args;  /* positionals: "COLL [FILTER]", "TRADE_ID...":
                        [optional], ... repeats (the last one) */
  const dtx__cli_opt_t *opts; /* ended by {NULL}; NULL: none */
  unsigned flags;    /* DTX__CLI_* above */
  const dtx__cli_spec_t *subs; /* subcommands, ended by {NULL} */
  const char *summary; /* its line in doctx --help (document commands) */
  const char *text;    /* --help: the words after the usage lines */
};

/* What the parser found on a command line for a (sub)command. */
struct dtx__cli_args {
  const dtx__cli_spec_t *spec; /* the (sub)command run */
  const dtx__cli_spec_t *top;  /* its top-level command */
  char cmd[64];                /* its name in messages: "job add" */
  char **pos;                  /* its positionals */
  int npos;
  const char *val[16];         /* by option index: the value (a flag: "");
                                  NULL when not given */
  int64_t num[16];             /* the value of an integer option */
  int nocc, *occ;              /* the options in command-line order, by
                                  index (for LIST options, whose val is the
                                  last): occval[i] is occ[i]'s value */
  const char **occval;
};

/* The value of option name (NULL when not given); whether it was given;
 * an integer option's value, or dflt when not given; the same saturated
 * to int (the library then refuses a value past its bound).  name must be
 * one of the spec's options (else abort: a bug in the command). */
const char *dtx__cli_str(const dtx__cli_args_t *a, const char *name);
int dtx__cli_has(const dtx__cli_args_t *a, const char *name);
int64_t dtx__cli_num(const dtx__cli_args_t *a, const char *name,
                     int64_t dflt);
int dtx__cli_int(const dtx__cli_args_t *a, const char *name, int dflt);
/* The page of a listing's --skip and --limit. */
dtx_page_t dtx__cli_page(const dtx__cli_args_t *a);
int dtx__cli_opt_index(const dtx__cli_spec_t *s, const char *name);

/* Runs the command of spec top on argv (argv[0] its name; the array is
 * the caller's, which may be reordered): --help, the subcommand, the
 * options and positionals as the spec says, then its function.  Returns
 * the exit code. */
int dtx__cli_run(dtx_cli_t *cli, const dtx__cli_spec_t *top, int argc,
                 char **argv);

/* The whole of doctx --help (the command lists and exit codes from the
 * specs and util.c's table). */
void dtx__cli_print_usage(FILE *f, const dtx__cli_spec_t *const *cmds);

/* doctx lock hold, the one subcommand with a file of its own
 * (cmd_lock_hold.c: it runs a command). */
int dtx__cli_lock_hold(dtx_cli_t *cli, const dtx__cli_args_t *a);

/* doctx job schedule, schedules, unschedule and scheduler
 * (cmd_job_sched.c). */
int dtx__cli_job_schedule(dtx_cli_t *cli, const dtx__cli_args_t *a);
int dtx__cli_job_schedules(dtx_cli_t *cli, const dtx__cli_args_t *a);
int dtx__cli_job_unschedule(dtx_cli_t *cli, const dtx__cli_args_t *a);
int dtx__cli_job_scheduler(dtx_cli_t *cli, const dtx__cli_args_t *a);

/* The commands (one cmd_<name>.c each), in doctx --help's order. */
extern const dtx__cli_spec_t dtx__cmd_insert, dtx__cmd_find, dtx__cmd_count,
    dtx__cmd_update, dtx__cmd_find_and_modify, dtx__cmd_aggregate,
    dtx__cmd_delete, dtx__cmd_bulk, dtx__cmd_index, dtx__cmd_indexes,
    dtx__cmd_drop, dtx__cmd_collections, dtx__cmd_dump, dtx__cmd_rules,
    dtx__cmd_demo, dtx__cmd_account, dtx__cmd_transfer, dtx__cmd_worker,
    dtx__cmd_recover, dtx__cmd_audit, dtx__cmd_faults, dtx__cmd_job,
    dtx__cmd_lock, dtx__cmd_sync, dtx__cmd_ledger, dtx__cmd_order,
    dtx__cmd_version, dtx__cmd_batch_update, dtx__cmd_interest, dtx__cmd_txn;

/* Options several commands share, with one meaning. */
#define DTX__CLI_OPT_DEADLINE {"--deadline-ms", DTX__CLI_POS, "N", NULL, 0}
#define DTX__CLI_OPT_LEASE {"--lease-ms", DTX__CLI_POS, "N", NULL, 0}
#define DTX__CLI_OPT_LIMIT {"--limit", DTX__CLI_COUNT, "N", NULL, 0}
#define DTX__CLI_OPT_SKIP {"--skip", DTX__CLI_COUNT, "N", NULL, 0}
/* Keyset paging (dtx_page_t.after): checked by dtx_page_check as it is
 * parsed, so a bad one opens no store. */
#define DTX__CLI_OPT_AFTER {"--after", DTX__CLI_STR, "ID", NULL, 0}
#define DTX__CLI_OPT_STATE {"--state", DTX__CLI_STR, "S", NULL, 0}
#define DTX__CLI_OPT_VERBOSE {"--verbose", DTX__CLI_FLAG, NULL, NULL, 0}
#define DTX__CLI_OPT_FILE {"--file", DTX__CLI_STR, "PATH", NULL, 0}
#define DTX__CLI_OPT_FENCE                                                  \
  {"--fence", DTX__CLI_STR, "NAME:TOKEN",                                   \
   "a fenced write: refused with FENCED (exit 3), changing nothing, when "  \
   "a token of lock NAME larger than TOKEN already wrote the document; "    \
   "else TOKEN is recorded in its _fence field (see doctx lock --help)", 0}

/* The deadline rule, shared by the commands that run protocol steps
 * (docs/deadlines.md). */
#define DTX__CLI_DEADLINE_HELP                                               \
  "Deadline: the whole command runs under one budget -- --deadline-ms N,\n"  \
  "or else the store's retry window counted once (Redis: the URI's\n"        \
  "retry_ms, default 10000; SQLite: 5 minutes of waiting for a lock),\n"     \
  "plus at most one request timeout in flight (Redis timeout_ms).  When it\n" \
  "runs out the command exits 4 saying what it was waiting for, and leaves\n" \
  "any half-done work for `doctx recover`.\n"

/* ---- the store and errors ---------------------------------------------- */

/* Opens (once) and returns the store with cli->open_flags, after checking
 * DOCTX_FAULT when cli->armed (both set by dtx__cli_run from the spec).
 * On failure prints the error and returns NULL, and *exit_code is set. */
dtx_store_t *dtx__cli_store(dtx_cli_t *cli, int *exit_code);

/* The store of a long-running command (worker, job work): opened as
 * dtx__cli_store, and SIGINT/SIGTERM turned into dtx__cli_stop, which the
 * command passes as its options' stop flag so the loop ends after the
 * items it holds. */
extern volatile int dtx__cli_stop;
dtx_store_t *dtx__cli_store_stoppable(dtx_cli_t *cli, int *code);

/* Prints the exit-code table of `doctx --help` (the README has the same
 * rows; tests/cli/docs.sh compares them). */
void dtx__cli_print_exit_codes(FILE *f);

/* Prints text's words from column *col, wrapped at 76 columns with
 * continuation lines indented to indent, each word after a space; *col
 * <= 0 stands for column -*col with nothing printed there yet (the first
 * word goes right there).  With nobreak, text is one word (a usage line's
 * "[--sort S]"). */
void dtx__cli_wrap(FILE *f, int *col, int indent, const char *text,
                   int nobreak);

/* Maps a DTX_E* code to the exit code above. */
int dtx__cli_exit_code(int rc);

/* Prints "doctx: ERRNAME: detail" (or the strerror text when there is no
 * detail) to stderr and returns dtx__cli_exit_code(rc). */
int dtx__cli_fail(int rc);

/* Prints "doctx: NAME: <fmt...>" for a check the CLI itself makes (an
 * argument's shape), and returns rc's exit code. */
int dtx__cli_error(int rc, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "doctx: USAGE: <msg>" and returns DTX_EXIT_USAGE. */
int dtx__cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "doctx: NAME: line N: <fmt...>" for a bad line of a command's
 * JSON-lines input (doctx bulk, transfer batch) and returns
 * DTX_EXIT_USAGE: nothing has run yet. */
int dtx__cli_bad_line(size_t lineno, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- arguments and input --------------------------------------------- */

/* The start of each element of a JSON-lines input: its line number and
 * the parsed line (owned by the element). */
typedef struct dtx__cli_jline {
  size_t lineno;
  json_t *line;
} dtx__cli_jline_t;

/* Reads a JSON-lines input -- file PATH, or stdin when file is NULL or
 * "-" -- into *out, a malloc'd array of *nout elements of `size` bytes,
 * each starting with a dtx__cli_jline_t and zeroed after it; blank lines
 * are skipped.  `what` names the input in messages ("bulk: reading the
 * operations").  Returns 0, or an exit code (printed): a line that is not
 * JSON is dtx__cli_bad_line.  Free with dtx__cli_jlines_free in every
 * case. */
int dtx__cli_read_jlines(const char *file, const char *what, size_t size,
                         void **out, size_t *nout);
void dtx__cli_jlines_free(void *lines, size_t n, size_t size);

/* Parses JSON text from argv for argument `what` ("FILTER", "DOC", ...);
 * "-" reads the text from stdin (once per process: a second "-" is a
 * usage error; a NUL byte in it is BADJSON naming `what`).  On failure
 * prints the error naming `what` and returns NULL; every failure here is
 * bad input (exit 2). */
json_t *dtx__cli_json(const char *text, const char *what);

/* Parses a strict decimal int64 (no sign unless allow_negative, no
 * spaces, no overflow).  0 on success, -1 on bad input. */
int dtx__cli_int64(const char *text, int allow_negative, int64_t *out);

/* A limit argument N|none ("none": *none set) of command cmd; 0, or the
 * exit code after printing a usage error. */
int dtx__cli_limit(const char *cmd, const char *text, int *none,
                   int64_t *min);

/* --fence NAME:TOKEN (v; NULL: no fence, *name NULL) checked by the
 * library; *name points into a per-thread buffer until the next call.  0,
 * or the exit code after printing the error. */
int dtx__cli_fence(const char *cmd, const char *v, const char **name,
                   int64_t *token);

/* The document commands' arguments (docargs.c), each checked by the
 * library before the store opens; 0, or the exit code (printed):
 * a collection name; FILTER (NULL text: {}); UPDATE with --array-filters
 * (aftext; NULL: none; *afs NULL then), refusing a replacement when many;
 * an optional JSON option checked by check (--sort, --project; NULL text:
 * *out NULL).  The JSON values are new references. */
int dtx__cli_coll(const char *coll);
int dtx__cli_filter(const char *text, json_t **out);
int dtx__cli_update(const char *text, const char *aftext, int many,
                    json_t **out, json_t **afs);
int dtx__cli_checked(const char *text, const char *what,
                     int (*check)(const json_t *), json_t **out);

/* ---- output ---------------------------------------------------------- */

/* Prints v as one compact JSON line on stdout. */
void dtx__cli_print_json(const json_t *v);

/* Prints a pattern's document (an account, a transfer) for a reader:
 * timestamps (created, updated, lease_until, at -- stored as integer ms)
 * as ISO 8601 UTC, and the executor's fields (owner, lease_until, epoch)
 * only when verbose. */
void dtx__cli_print_item(const json_t *doc, int verbose);

/* The tail of a command that lists: rc's error (printed; rc < 0), or
 * each element of *arr (stolen, set to NULL) on a line, through
 * dtx__cli_print_item when item.  Returns the exit code.  A pointer, as
 * for dtx__cli_summary. */
int dtx__cli_items(int rc, json_t **arr, int item, int verbose);

/* Prints *sum (stolen, set to NULL; NULL when the call failed before it
 * had one) and returns rc's exit code (its error printed): the tail of
 * every command that prints a result or summary and may fail, as in
 * dtx__cli_summary(dtx_recover(st, &ro, &sum), &sum) -- a pointer, read
 * after the call has set it. */
int dtx__cli_summary(int rc, json_t **sum);

/* The output of a batched call (order confirm of several trade ids,
 * transfer batch): one line per request in input order, and the exit
 * code of the command, the most severe of its requests' codes. */
typedef struct dtx__cli_batch {
  const char *key; /* names a request in its error line ("trade_id") */
  int item;        /* 1: documents through dtx__cli_print_item; 0: as is */
  int verbose;     /* with item: the executor's fields too */
  /* The exit code a request ending (rc, doc) gives alone, as the
   * command's one-request form gives it; NULL: dtx__cli_exit_code(rc). */
  int (*exit_of)(int rc, const json_t *doc);
  int worst; /* start 0; the most severe code of the lines printed */
} dtx__cli_batch_t;
/* Prints one request's line: doc when rc is 0, else {"error": NAME,
 * "detail": detail (NULL: ""), b->key: id} ({"error":"NOMEM"} when that
 * cannot be built).  id is stolen (NULL allowed): the request's name for
 * a reader, e.g. json_string(trade_id), json_integer(input line).  Folds
 * the request's exit code into b->worst and returns it. */
int dtx__cli_batch_line(dtx__cli_batch_t *b, json_t *id, int rc,
                        const char *detail, const json_t *doc);

/* doctx job events (cmd_job_events.c), a subcommand of dtx__cmd_job. */
int dtx__cli_job_events(dtx_cli_t *cli, const dtx__cli_args_t *a);

#endif
