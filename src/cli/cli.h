/* cli.h -- shared pieces of the doctx command: exit codes, error printing,
 * argument helpers and the command table.
 *
 * main.c parses the global options (--store URI, --help) and dispatches to
 * one function per command; each command group lives in its own file
 * (cmd_doc.c for documents, cmd_txn.c for accounts and transfers). */
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
  DTX_EXIT_AUDIT = 5       /* audit found a broken invariant */
};

typedef struct dtx_cli {
  const char *uri;      /* --store, or NULL for the default */
  dtx_store_t *st;      /* opened on first use by dtx__cli_store() */
  unsigned open_flags;  /* DTX_OPEN_NOCREATE for commands that only read */
} dtx_cli_t;

/* Opens (once) and returns the store with cli->open_flags.  main() sets
 * DTX_OPEN_NOCREATE for the commands its table marks as only reading, so
 * a missing SQLite store is "UNAVAILABLE: no store at PATH" (exit 4) for
 * them and is created only by commands that write.  On failure prints the
 * error and returns NULL, and *exit_code is set. */
dtx_store_t *dtx__cli_store(dtx_cli_t *cli, int *exit_code);

/* The same with DTX_OPEN_NOCREATE, for the subcommands that only read of
 * a command that also writes (account show/list, transfer show/list). */
dtx_store_t *dtx__cli_store_read(dtx_cli_t *cli, int *exit_code);

/* Prints the exit-code table of `doctx --help` (the README has the same
 * rows; tests/cli/docs.sh compares them). */
void dtx__cli_print_exit_codes(FILE *f);

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

/* Prints v as one compact JSON line on stdout. */
void dtx__cli_print_json(const json_t *v);

/* Prints a pattern's document (an account, a transfer) for a reader:
 * timestamps (created, updated, lease_until, at -- stored as integer ms)
 * as ISO 8601 UTC, and the executor's fields (owner, lease_until, epoch)
 * only when verbose. */
void dtx__cli_print_item(const json_t *doc, int verbose);

typedef int (*dtx__cli_fn)(dtx_cli_t *cli, int argc, char **argv);

/* Command groups: argv[0] is the command name. */
int dtx__cmd_insert(dtx_cli_t *, int, char **);
int dtx__cmd_find(dtx_cli_t *, int, char **);
int dtx__cmd_count(dtx_cli_t *, int, char **);
int dtx__cmd_update(dtx_cli_t *, int, char **);
int dtx__cmd_find_and_modify(dtx_cli_t *, int, char **);
int dtx__cmd_aggregate(dtx_cli_t *, int, char **);
int dtx__cmd_delete(dtx_cli_t *, int, char **);
int dtx__cmd_bulk(dtx_cli_t *, int, char **); /* cmd_bulk.c */
int dtx__cmd_index(dtx_cli_t *, int, char **);
int dtx__cmd_indexes(dtx_cli_t *, int, char **);
int dtx__cmd_drop(dtx_cli_t *, int, char **);
int dtx__cmd_collections(dtx_cli_t *, int, char **);
int dtx__cmd_dump(dtx_cli_t *, int, char **);
int dtx__cmd_rules(dtx_cli_t *, int, char **);
int dtx__cmd_demo(dtx_cli_t *, int, char **);

/* cmd_txn.c: accounts, transfers, worker, recovery, audit, faults. */
int dtx__cmd_account(dtx_cli_t *, int, char **);
int dtx__cmd_transfer(dtx_cli_t *, int, char **);
/* doctx transfer batch (cmd_transfer_batch.c). */
int dtx__cmd_transfer_batch(dtx_cli_t *cli, const char *file,
                            int64_t deadline_ms, int verbose);
int dtx__cmd_worker(dtx_cli_t *, int, char **);
int dtx__cmd_recover(dtx_cli_t *, int, char **);
int dtx__cmd_audit(dtx_cli_t *, int, char **);
int dtx__cmd_faults(dtx_cli_t *, int, char **);

/* args.c: argument handling of the transaction commands. */
typedef struct dtx__cli_opt {
  const char *name;
  int has_value;
  const char *value; /* set when seen (flags: "1") */
} dtx__cli_opt_t;
/* Splits argv into at most maxpos positionals (into pos) and the options
 * of opts; returns the number of positionals, or -1 after a usage error. */
int dtx__cli_split(int argc, char **argv, dtx__cli_opt_t *opts, size_t nopts,
                   char **pos, int maxpos);
/* An integer option (unset: *out untouched) >= min; -1 after a usage
 * error. */
int dtx__cli_int_opt(const char *cmd, const dtx__cli_opt_t *o,
                     int allow_negative, int64_t min, int64_t *out);
/* 1 when argv has --help or -h. */
int dtx__cli_is_help(int argc, char **argv);
/* Prints text; returns DTX_EXIT_OK. */
int dtx__cli_help(const char *text);
/* Checks DOCTX_FAULT (a typo is a usage error, not a silent no-op). */
int dtx__cli_faults_ok(void);
/* dtx__cli_faults_ok, then dtx__cli_store: NULL with *code set when
 * either fails (every command that writes opens its store so). */
dtx_store_t *dtx__cli_store_armed(dtx_cli_t *cli, int *code);
/* The store of a long-running command (worker, job work): DOCTX_FAULT
 * checked, the store opened, and SIGINT/SIGTERM turned into
 * dtx__cli_stop, which the command passes as its options' stop flag so
 * the loop ends after the items it holds.  NULL with *code set (printed). */
extern volatile int dtx__cli_stop;
dtx_store_t *dtx__cli_store_stoppable(dtx_cli_t *cli, int *code);
/* Prints each item of arr (stolen) with dtx__cli_print_item. */
int dtx__cli_print_items(json_t *arr, int verbose);
/* The options of o (nopts of them) given that `cmd sub` does not take
 * (ok: their indexes, ended by -1): a usage error naming the first;
 * 0 when none. */
int dtx__cli_stray(const char *cmd, const char *sub, const dtx__cli_opt_t *o,
                   int nopts, const int *ok);
/* Prints sum (stolen; NULL when the call failed before it had one) and
 * returns rc's exit code (its error printed): the tail of every command
 * that prints a result or summary and may fail. */
int dtx__cli_summary(int rc, json_t *sum);
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
/* --fence NAME:TOKEN (v; NULL: no fence, *name NULL) checked by the
 * library; *name points into a per-thread buffer until the next call.  0,
 * or the exit code after printing the error. */
int dtx__cli_fence(const char *cmd, const char *v, const char **name,
                   int64_t *token);
/* --skip/--limit into page; -1 after a usage error. */
int dtx__cli_page_opts(const char *cmd, const dtx__cli_opt_t *skip,
                       const dtx__cli_opt_t *limit, dtx_page_t *page);

/* cmd_job.c: the job queue. */
int dtx__cmd_job(dtx_cli_t *, int, char **);
/* cmd_txn.c: lease locks. */
int dtx__cmd_lock(dtx_cli_t *, int, char **);
/* cmd_sync.c: the sync flag. */
int dtx__cmd_sync(dtx_cli_t *, int, char **);
/* cmd_ledger.c: the log-reconciliation ledger. */
int dtx__cmd_ledger(dtx_cli_t *, int, char **);
/* cmd_order.c: order confirmation. */
int dtx__cmd_order(dtx_cli_t *, int, char **);
/* cmd_scen.c: LeanCloud's scenarios, batch update and daily interest. */
int dtx__cmd_batch_update(dtx_cli_t *, int, char **);
int dtx__cmd_interest(dtx_cli_t *, int, char **);
/* cmd_version.c: versioned documents. */
int dtx__cmd_version(dtx_cli_t *, int, char **);

#endif
