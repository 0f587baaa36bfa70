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
     "Applies UPDATE (operators such as {\"$inc\":{\"n\":1}}, or a replacement\n"
     "document) to the first document matching FILTER and prints\n"
     "{\"matched\":N,\"modified\":M}, plus \"upserted\":ID when one was\n"
     "inserted.\n"
     "  --many    update every matching document (each atomically)\n"
     "  --upsert  insert a document built from FILTER and UPDATE if none\n"
     "            matches\n"
     "  --bypass-validation  skip COLL's validator (see doctx rules)\n"},
    {"find-and-modify", dtx__cmd_find_and_modify,
     "usage: doctx [--store URI] find-and-modify COLL FILTER UPDATE [--sort S]\n"
     "                                            [--new] [--upsert]\n"
     "The primitive: atomically finds one document matching FILTER, applies\n"
     "UPDATE and prints the document as it was before (or after, with\n"
     "--new).  Exits 1, printing nothing, when no document matched.\n"
     "  --sort S   which match to modify when several do\n"
     "  --new      print the document after the update\n"
     "  --upsert   insert a document when none matches (without --new this\n"
     "             prints null)\n"
     "  --bypass-validation  skip COLL's validator (see doctx rules)\n"},
    {"delete", dtx__cmd_delete,
     "usage: doctx [--store URI] delete COLL FILTER [--many]\n"
     "Deletes the first (or with --many, every) document matching FILTER and\n"
     "prints {\"deleted\":N}.\n"
     "  --bypass-validation  skip COLL's delete guard (see doctx rules)\n"},
    {"index", dtx__cmd_index,
     "usage: doctx [--store URI] index COLL KEYS [--unique] [--sparse]\n"
     "Creates an index on KEYS (JSON object of path: 1 or -1, in order) and\n"
     "prints its name.  Creating the same index again does nothing.\n"
     "  --unique  refuse two documents with the same key (exit 3)\n"
     "  --sparse  leave out documents that have none of the fields\n"},
    {"indexes", dtx__cmd_indexes,
     "usage: doctx [--store URI] indexes COLL\n"
     "Prints the indexes of COLL, one JSON object per line.\n"},
    {"drop", dtx__cmd_drop,
     "usage: doctx [--store URI] drop COLL\n"
     "Drops COLL with its documents and indexes (a missing COLL is fine).\n"},
    {"collections", dtx__cmd_collections,
     "usage: doctx [--store URI] collections\n"
     "Prints the collection names, sorted, one per line.\n"},
    {"rules", dtx__cmd_rules,
     "usage: doctx [--store URI] rules COLL [--validator JSON]\n"
     "                                  [--delete-guard JSON] [--clear]\n"
     "Prints COLL's rules as {\"validator\":...,\"delete_guard\":...}, after\n"
     "changing them when asked.  Every write to COLL must leave a document\n"
     "that matches the validator (query operators and/or $jsonSchema, as\n"
     "MongoDB's; see docs/validation.md), and a document must match the\n"
     "delete guard to be deleted; a refused write exits 3 (VALIDATION) and\n"
     "changes nothing, unless the write is given --bypass-validation.\n"
     "  --validator JSON     replace the validator (null removes it)\n"
     "  --delete-guard JSON  replace the delete guard (null removes it)\n"
     "  --clear              remove both\n"},
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
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static const char global_usage[] =
    "usage: doctx [--store URI] COMMAND [ARGS...]\n"
    "\n"
    "doctx runs atomic single-document updates, and the multi-document\n"
    "transactions built from them, on an embedded or remote store.\n"
    "Documents, filters and updates are JSON in MongoDB's languages; each\n"
    "JSON value is one shell argument.\n"
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
    "  delete COLL FILTER [--many]           prints {\"deleted\":N}\n"
    "  index COLL KEYS [--unique] [--sparse] creates an index; prints its name\n"
    "  indexes COLL                          lists indexes\n"
    "  drop COLL                             drops a collection\n"
    "  collections                           lists collections\n"
    "  rules COLL [--validator V] [--delete-guard G] [--clear]\n"
    "                                        shows or sets COLL's rules\n"
    "  demo                                  a narrated tour of the primitive\n"
    "\n"
    "Transaction commands (see doctx COMMAND --help):\n"
    "  account, transfer, worker, recover, audit, faults\n"
    "\n"
    "Options:\n"
    "  --store URI, --store=URI  the store to use, anywhere on the line:\n"
    "      sqlite:PATH[?sync=full|normal|off]   embedded file (WAL)\n"
    "      sqlite::memory:                      private in-memory store\n"
    "  --help                    this text; COMMAND --help for one command\n"
    "\n"
    "Environment:\n"
    "  DOCTX_STORE   the store URI when --store is not given\n"
    "                (default sqlite:./doctx.db)\n"
    "\n"
    "Exit codes:\n"
    "  0  success\n"
    "  1  find-and-modify matched nothing; a transfer failed\n"
    "  2  usage error or invalid input (bad JSON, unknown operator, bad URI,\n"
    "     bad option or number, missing or extra argument); nothing changed\n"
    "  3  constraint violation: duplicate key, wrong type, overflow, _id\n"
    "     change, conflict, state, insufficient funds, no such account,\n"
    "     a write refused by a collection's rules (VALIDATION)\n"
    "  4  store unavailable or backend error\n"
    "  5  audit found a broken invariant\n"
    "Errors are printed to stderr as \"doctx: ERRNAME: detail\".\n";

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
  dtx_cli_t cli = {NULL, NULL};
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
      fputs(global_usage, stdout);
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
    fputs(global_usage, stderr);
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
  int ec = cmd->fn(&cli, cargc, cargv);
  dtx_store_close(cli.st);
  free(args);
  if (fflush(stdout) != 0 && ec == DTX_EXIT_OK) {
    perror("doctx: writing output");
    ec = DTX_EXIT_BACKEND;
  }
  return ec;
}
