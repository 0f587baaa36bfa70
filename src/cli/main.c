/* main.c -- the doctx command: global options, --help, and dispatch.
 *
 * main() takes `--store URI` (or --store=URI) out of the argument list
 * wherever it appears before a `--`, so every command, including the
 * transfer commands in cmd_txn.c, sees only its own arguments.  `--help`
 * is answered here for the document commands, whose usage text lives in
 * the table below; the transfer commands answer their own --help.  The
 * store is opened lazily by the command (dtx__cli_store) and closed here. */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct command {
  const char *name;
  dtx__cli_fn fn;
  const char *usage; /* NULL: the command prints its own --help */
} command_t;

static const command_t commands[] = {
    {"insert", dtx__cmd_insert,
     "usage: doctx [--store URI] insert COLL DOC... [--bypass-validation]\n"
     "Inserts each DOC (one JSON object per argument) into COLL, in order,\n"
     "and prints each _id as JSON, one per line.  A missing _id is\n"
     "generated.  Every DOC is checked before any is inserted; if one fails\n"
     "in the store, the ids of those already inserted are still printed.\n"
     "  --bypass-validation  skip COLL's validator (see doctx rules)\n"},
    {"find", dtx__cmd_find,
     "usage: doctx [--store URI] find COLL [FILTER] [--sort S] [--limit N]\n"
     "                                 [--skip N] [--project P]\n"
     "Prints the documents of COLL matching FILTER (default {}), one JSON\n"
     "document per line.\n"
     "  --sort S     JSON object of path: 1 or -1, e.g. '{\"balance\":-1}'\n"
     "  --limit N    at most N documents (0 = no limit)\n"
     "  --skip N     skip the first N matches\n"
     "  --project P  JSON projection, e.g. '{\"balance\":1}'\n"},
    {"count", dtx__cmd_count,
     "usage: doctx [--store URI] count COLL [FILTER]\n"
     "Prints how many documents of COLL match FILTER (default {}).\n"},
    {"update", dtx__cmd_update,
     "usage: doctx [--store URI] update COLL FILTER UPDATE [--many] [--upsert]\n"
     "                                   [--array-filters JSON]\n"
     "Applies UPDATE (operators such as {\"$inc\":{\"n\":1}}, or a replacement\n"
     "document) to the first document matching FILTER and prints\n"
     "{\"matched\":N,\"modified\":M}, plus \"upserted\":ID when one was\n"
     "inserted.\n"
     "  --many    update every matching document (each atomically)\n"
     "  --upsert  insert a document built from FILTER and UPDATE if none\n"
     "            matches\n"
     "  --array-filters JSON  MongoDB's arrayFilters: a JSON array of\n"
     "            filters, one per $[id] in UPDATE's paths, e.g.\n"
     "            '[{\"x.grade\":{\"$gte\":85}}]'\n"
     "  --bypass-validation  skip COLL's validator (see doctx rules)\n"
     "  --fence NAME:TOKEN  a fenced write: refused with FENCED (exit 3),\n"
     "            changing nothing, when a token of lock NAME larger than\n"
     "            TOKEN already wrote the document; else TOKEN is recorded\n"
     "            in its _fence field (see doctx lock --help)\n"},
    {"find-and-modify", dtx__cmd_find_and_modify,
     "usage: doctx [--store URI] find-and-modify COLL FILTER UPDATE [--sort S]\n"
     "                            [--new] [--upsert] [--array-filters JSON]\n"
     "The primitive: atomically finds one document matching FILTER, applies\n"
     "UPDATE and prints the document as it was before (or after, with\n"
     "--new).  Exits 1, printing nothing, when no document matched.\n"
     "  --sort S   which match to modify when several do\n"
     "  --new      print the document after the update\n"
     "  --upsert   insert a document when none matches (without --new this\n"
     "             prints null)\n"
     "  --array-filters JSON  filters for the $[id] paths of UPDATE\n"
     "  --bypass-validation  skip COLL's validator (see doctx rules)\n"
     "  --fence NAME:TOKEN  a fenced write: refused with FENCED (exit 3),\n"
     "            changing nothing, when a token of lock NAME larger than\n"
     "            TOKEN already wrote the document; else TOKEN is recorded\n"
     "            in its _fence field (see doctx lock --help)\n"},
    {"aggregate", dtx__cmd_aggregate,
     "usage: doctx [--store URI] aggregate COLL PIPELINE\n"
     "Runs the aggregation PIPELINE (a JSON array of stages such as\n"
     "[{\"$match\":{...}},{\"$unwind\":\"$a\"},{\"$group\":{...}}]) over COLL\n"
     "and prints the results, one JSON document per line.  A leading\n"
     "$match (and a $sort right after it) uses indexes; $group and $sort\n"
     "hold at most 100 MiB (exit 3 past it).\n"},
    {"delete", dtx__cmd_delete,
     "usage: doctx [--store URI] delete COLL FILTER [--many]\n"
     "Deletes the first (or with --many, every) document matching FILTER and\n"
     "prints {\"deleted\":N}.\n"
     "  --bypass-validation  skip COLL's delete guard (see doctx rules)\n"
     "  --fence NAME:TOKEN  a fenced write: refused with FENCED (exit 3),\n"
     "            changing nothing, when a token of lock NAME larger than\n"
     "            TOKEN already wrote the document; else TOKEN is recorded\n"
     "            in its _fence field (see doctx lock --help)\n"},
    {"bulk", dtx__cmd_bulk,
     "usage: doctx [--store URI] bulk COLL [--file PATH]\n"
     "Runs many single-document writes on COLL, one JSON operation per line\n"
     "of stdin (or PATH), in MongoDB's bulkWrite shape:\n"
     "  {\"insertOne\":{\"document\":DOC}}\n"
     "  {\"updateOne\":{\"filter\":F,\"update\":U,\"upsert\":B,\"arrayFilters\":A}}\n"
     "  {\"deleteOne\":{\"filter\":F}}\n"
     "  {\"findOneAndUpdate\":{\"filter\":F,\"update\":U,\"sort\":S,\"projection\":P,\n"
     "      \"upsert\":B,\"returnDocument\":\"before\"|\"after\",\"arrayFilters\":A}}\n"
     "  {\"findOneAndDelete\":{\"filter\":F,\"sort\":S,\"projection\":P}}\n"
     "(each may also carry \"bypassDocumentValidation\":true; blank lines\n"
     "are skipped).  Each operation is atomic on its own, as the single\n"
     "command; the batch is not a transaction (unordered: every operation\n"
     "runs, whatever the others do).  Prints one result per operation, in\n"
     "order: {\"ok\":true,\"insertedId\":ID}, {\"ok\":true,\"matched\":N,\n"
     "\"modified\":M[,\"upsertedId\":ID]}, {\"ok\":true,\"deleted\":N},\n"
     "{\"ok\":true,\"doc\":DOC|null[,\"upsertedId\":ID]}, or for a failed one\n"
     "{\"ok\":false,\"error\":NAME,\"detail\":TEXT} (a findOneAndUpdate that\n"
     "matched nothing fails with NOMATCH).  Lines go to the store in batches\n"
     "of 1000 (on SQLite, one transaction each).\n"
     "Exit: 0 every operation succeeded; 3 some failed; 4 some failed because\n"
     "of the store (wins over 3); 2 a line is malformed (it is named on\n"
     "stderr and nothing runs).\n"},
    {"index", dtx__cmd_index,
     "usage: doctx [--store URI] index COLL KEYS [--unique] [--sparse]\n"
     "                                  [--bypass-validation]\n"
     "Creates an index on KEYS (JSON object of path: 1 or -1, in order) and\n"
     "prints its name.  Creating the same index again does nothing.\n"
     "  --unique  refuse two documents with the same key (exit 3)\n"
     "  --sparse  leave out documents that have none of the fields\n"
     "  --bypass-validation  a unique index on a pattern's collection\n"
     "            (which could refuse its steps: exit 3 without this)\n"},
    {"indexes", dtx__cmd_indexes,
     "usage: doctx [--store URI] indexes COLL\n"
     "Prints the indexes of COLL, one JSON object per line.\n"},
    {"drop", dtx__cmd_drop,
     "usage: doctx [--store URI] drop COLL [--bypass-validation]\n"
     "Drops COLL with its documents and indexes (a missing COLL is fine).\n"
     "A collection with a delete guard is dropped only while it is empty\n"
     "(exit 3 otherwise, nothing changed) unless --bypass-validation.\n"},
    {"collections", dtx__cmd_collections,
     "usage: doctx [--store URI] collections\n"
     "Prints the collection names, sorted, one per line.\n"},
    {"dump", dtx__cmd_dump,
     "usage: doctx [--store URI] dump\n"
     "Prints the whole store for inspection or comparison: per collection\n"
     "(sorted by name) one line {\"collection\",\"indexes\",\"rules\",\"count\"},\n"
     "then its documents sorted by _id, one per line.  Each collection is\n"
     "one read; the dump is not one snapshot across collections.\n"},
    {"rules", dtx__cmd_rules,
     "usage: doctx [--store URI] rules COLL [--validator JSON]\n"
     "                  [--delete-guard JSON] [--transition JSON] [--clear]\n"
     "                  [--bypass-validation]\n"
     "Prints COLL's rules as {\"validator\":...,\"delete_guard\":...,\n"
     "\"transition\":...}, after changing them when asked.  Every write to\n"
     "COLL must leave a document that matches the validator (query operators\n"
     "and/or $jsonSchema, as MongoDB's), every update must keep the\n"
     "transition rule (immutable and increasing fields, allowed moves), and\n"
     "a document must match the delete guard to be deleted (see\n"
     "docs/validation.md); a refused write exits 3 (VALIDATION) and changes\n"
     "nothing, unless the write bypasses validation explicitly.\n"
     "  --validator JSON     replace the validator (null removes it)\n"
     "  --delete-guard JSON  replace the delete guard (null removes it)\n"
     "  --transition JSON    replace the transition rule (null removes it)\n"
     "  --clear              remove them all\n"
     "  --bypass-validation  change rules a pattern owns (a pattern's own\n"
     "                       collection, or its transition rule in yours):\n"
     "                       without it such a change exits 3\n"},
    {"demo", dtx__cmd_demo,
     "usage: doctx [--store URI] demo\n"
     "Walks through the primitive, narrating each step: a debit guarded by\n"
     "a balance check, an idempotent step, and a conditional state change.\n"
     "Without --store it uses a fresh temporary database; with --store it\n"
     "drops and reuses the collections demo.accounts and demo.transfers.\n"},
    {"account", dtx__cmd_account, NULL},
    {"transfer", dtx__cmd_transfer, NULL},
    {"worker", dtx__cmd_worker, NULL},
    {"recover", dtx__cmd_recover, NULL},
    {"audit", dtx__cmd_audit, NULL},
    {"faults", dtx__cmd_faults, NULL},
    {"job", dtx__cmd_job, NULL},
    {"lock", dtx__cmd_lock, NULL},
    {"sync", dtx__cmd_sync, NULL},
    {"ledger", dtx__cmd_ledger, NULL},
    {"order", dtx__cmd_order, NULL},
    {"batch-update", dtx__cmd_batch_update, NULL},
    {"interest", dtx__cmd_interest, NULL},
    {"version", dtx__cmd_version, NULL},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char global_usage[] =
    "usage: doctx [--store URI] COMMAND [ARGS...]\n"
    "\n"
    "doctx runs atomic single-document updates, and the multi-document\n"
    "transactions built from them, on an embedded or remote store.\n"
    "Documents, filters and updates are JSON in MongoDB's languages; each\n"
    "JSON value is one shell argument, or - to read it from stdin.\n"
    "\n"
    "Document commands:\n"
    "  insert COLL DOC...                    insert; prints each _id\n"
    "  find COLL [FILTER] [--sort S] [--limit N] [--skip N] [--project P]\n"
    "                                        prints matches, one per line\n"
    "  count COLL [FILTER]                   prints the number of matches\n"
    "  update COLL FILTER UPDATE [--many] [--upsert]\n"
    "                                        prints {\"matched\":N,\"modified\":M}\n"
    "  find-and-modify COLL FILTER UPDATE [--sort S] [--new] [--upsert]\n"
    "                                        the primitive; prints the document\n"
    "      (update and find-and-modify also take --array-filters JSON;\n"
    "       update, find-and-modify and delete take --fence NAME:TOKEN)\n"
    "  aggregate COLL PIPELINE               prints the results, one per line\n"
    "  delete COLL FILTER [--many]           prints {\"deleted\":N}\n"
    "  bulk COLL [--file PATH]               one write per input line (bulkWrite\n"
    "                                        shape); one result per line\n"
    "  index COLL KEYS [--unique] [--sparse] creates an index; prints its name\n"
    "  indexes COLL                          lists indexes\n"
    "  drop COLL [--bypass-validation]       drops a collection\n"
    "  collections                           lists collections\n"
    "  dump                                  prints every collection: its\n"
    "                                        indexes, rules and documents\n"
    "  rules COLL [--validator V] [--delete-guard G] [--transition T]\n"
    "             [--clear]                  shows or sets COLL's rules\n"
    "  demo                                  a narrated tour of the primitive\n"
    "\n"
    "Transaction commands (see doctx COMMAND --help):\n"
    "  account, transfer, worker, recover, audit, faults, job, lock, sync, ledger, order,"
    " version, batch-update, interest\n"
    "\n"
    "Options:\n"
    "  --store URI, --store=URI  the store to use, anywhere on the line:\n"
    "      sqlite:PATH[?sync=full|normal|off]   embedded file (WAL)\n"
    "      sqlite::memory:                      private in-memory store\n"
    "      redis://HOST:PORT[,HOST:PORT...][?wait=N&password=P&timeout_ms=N\n"
    "              &retry_ms=N&buckets=N]       Redis server or Cluster\n"
    "  --help, -h                this text; COMMAND --help for one command\n"
    "  --version                 prints the version\n"
    "Commands that only read (find, count, aggregate, indexes, collections,\n"
    "audit, and the show and list subcommands) never create a store: on a\n"
    "SQLite path that does not exist they exit 4 with \"no store at PATH\".\n"
    "\n"
    "Environment:\n"
    "  DOCTX_STORE   the store URI when --store is not given\n"
    "                (default sqlite:./doctx.db)\n"
    "\n"
    "Exit codes:\n";

static const char global_usage_end[] =
    "Errors are printed to stderr as \"doctx: ERRNAME: detail\".\n";

static void print_usage(FILE *f) {
  fputs(global_usage, f);
  dtx__cli_print_exit_codes(f);
  fputs(global_usage_end, f);
}

/* Commands that only read: they open the store with DTX_OPEN_NOCREATE, so
 * a mistyped SQLite path is an error, never a new empty store.  (account
 * and transfer also write; their show and list subcommands ask for it
 * themselves with dtx__cli_store_read.) */
static const char *const read_only[] = {"find",        "count", "aggregate",
                                        "indexes",     "collections",
                                        "dump",        "audit"};

static int reads_only(const char *name) {
  for (size_t i = 0; i < sizeof read_only / sizeof read_only[0]; i++)
    if (strcmp(read_only[i], name) == 0)
      return 1;
  return 0;
}

static const command_t *find_command(const char *name) {
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  return NULL;
}

static int is_help(const char *a) {
  return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

int main(int argc, char **argv) {
  dtx_cli_t cli = {NULL, NULL, 0};
  /* args: argv without --store, so commands never see it. */
  char **args = calloc((size_t)argc + 1, sizeof *args);
  int nargs = 0, dashdash = 0;
  if (!args) {
    fputs("doctx: NOMEM: parsing arguments\n", stderr);
    return DTX_EXIT_BACKEND;
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!dashdash && strcmp(a, "--") == 0)
      dashdash = 1;
    if (!dashdash && strcmp(a, "--store") == 0) {
      if (i + 1 >= argc) {
        free(args);
        return dtx__cli_usage("--store needs a URI");
      }
      cli.uri = argv[++i];
    } else if (!dashdash && strncmp(a, "--store=", 8) == 0) {
      cli.uri = a + 8;
    } else {
      args[nargs++] = argv[i];
    }
  }
  if (cli.uri && !*cli.uri) {
    free(args);
    return dtx__cli_usage("--store needs a URI");
  }

  /* Global options before the command. */
  int first = 0;
  for (; first < nargs && args[first][0] == '-'; first++) {
    if (is_help(args[first])) {
      print_usage(stdout);
      free(args);
      return DTX_EXIT_OK;
    }
    if (strcmp(args[first], "--version") == 0) {
      printf("doctx %s\n", DOCTX_VERSION);
      free(args);
      return DTX_EXIT_OK;
    }
    int rc = dtx__cli_usage("unknown option '%s' (see doctx --help)",
                            args[first]);
    free(args);
    return rc;
  }
  if (first >= nargs) {
    print_usage(stderr);
    free(args);
    return DTX_EXIT_USAGE;
  }
  const command_t *cmd = find_command(args[first]);
  if (!cmd) {
    int rc = dtx__cli_usage("unknown command '%s' (see doctx --help)",
                            args[first]);
    free(args);
    return rc;
  }
  int cargc = nargs - first;
  char **cargv = args + first;
  if (cmd->usage) {
    for (int i = 1; i < cargc && strcmp(cargv[i], "--") != 0; i++) {
      if (is_help(cargv[i])) {
        fputs(cmd->usage, stdout);
        free(args);
        return DTX_EXIT_OK;
      }
    }
  }
  if (reads_only(cmd->name))
    cli.open_flags = DTX_OPEN_NOCREATE;
  int ec = cmd->fn(&cli, cargc, cargv);
  dtx_store_close(cli.st);
  free(args);
  if (fflush(stdout) != 0 && ec == DTX_EXIT_OK) {
    perror("doctx: writing output");
    ec = DTX_EXIT_BACKEND;
  }
  return ec;
}
