/* cmd_demo.c -- `doctx demo`: a narrated tour of the one primitive.
 *
 * It shows, on real documents, the three uses every transaction in doctx
 * is built from: a debit guarded by a balance check, an idempotent step
 * (applying it twice changes nothing the second time), and a conditional
 * state change that exactly one caller wins.  scripts/demo.sh tells the
 * same story with the CLI commands; this version uses the C API, so the
 * two together show both ways in.
 *
 * Without --store the demo works in a fresh temporary database it deletes
 * afterwards; with --store it drops and reuses demo.accounts and
 * demo.transfers there. */
#include "cli/cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ACCOUNTS "demo.accounts"
#define TRANSFERS "demo.transfers"

/* Demo inputs are literals we wrote, so a parse failure is a bug here. */

/* run()'s answer when a step's outcome was not the one the narration
 * promises (positive: not a DTX_E* code, nothing raised it). */
#define DEMO_UNEXPECTED 1

static json_t *js(const char *text) {
  json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
  if (!v) {
    fprintf(stderr, "doctx: demo: bad literal %s\n", text);
    abort();
  }
  return v;
}

static void say(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  putchar('\n');
}

static void show(const json_t *doc) {
  char *s = dtx_json_dump(doc);
  printf("    %s\n", s ? s : "?");
  free(s);
}

/* Prints the whole collection, so every step's effect is visible. */
static int show_coll(dtx_store_t *st, const char *coll) {
  json_t *docs;
  int rc = dtx_store_find(st, coll, NULL, NULL, &docs);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < json_array_size(docs); i++)
    show(json_array_get(docs, i));
  json_decref(docs);
  return 0;
}

/* One find-and-modify with literal filter and update.  Returns 1 when it
 * matched, 0 when not, or a negative error. */
static int fam(dtx_store_t *st, const char *coll, const char *filter,
               const char *update) {
  json_t *f = js(filter), *u = js(update), *after = NULL;
  dtx_fam_opts_t o = {.return_new = 1};
  say("  find-and-modify %s '%s' '%s'", coll, filter, update);
  int rc = dtx_store_find_one_and_update(st, coll, f, u, &o, &after);
  json_decref(f);
  json_decref(u);
  if (rc == DTX_ENOMATCH) {
    say("  -> no document matched, so nothing changed.");
    return 0;
  }
  if (rc < 0)
    return rc;
  say("  -> matched; the document is now:");
  show(after);
  json_decref(after);
  return 1;
}

static int insert(dtx_store_t *st, const char *coll, const char *doc) {
  json_t *d = js(doc);
  int rc = dtx_store_insert(st, coll, d, NULL);
  json_decref(d);
  return rc;
}

/* The story; returns 0 or a negative error.  A step that does not turn
 * out as narrated is reported as DTX_ESTATE, so the demo doubles as a
 * smoke test. */
static int run(dtx_store_t *st) {
  int rc, m;
#define TRY(expr)                                                            \
  do {                                                                       \
    if ((rc = (expr)) < 0)                                                   \
      return rc;                                                             \
  } while (0)
#define EXPECT(expr, want)                                                   \
  do {                                                                       \
    TRY(m = (expr));                                                         \
    if (m != (want))                                                         \
      return DEMO_UNEXPECTED;                                                \
  } while (0)

  TRY(dtx_store_drop_collection_ex(st, ACCOUNTS, &(dtx_drop_opts_t){1}));
  TRY(dtx_store_drop_collection_ex(st, TRANSFERS, &(dtx_drop_opts_t){1}));

  say("1. Two accounts, A and B, each with a balance of 100:");
  TRY(insert(st, ACCOUNTS, "{\"_id\":\"A\",\"balance\":100,\"pending\":[]}"));
  TRY(insert(st, ACCOUNTS, "{\"_id\":\"B\",\"balance\":100,\"pending\":[]}"));
  TRY(show_coll(st, ACCOUNTS));

  say("\n2. Debit 30 from A, but only if A has at least 30.  The check and "
      "the\n   debit are one atomic step, so no one can spend the same "
      "money in between:");
  EXPECT(fam(st, ACCOUNTS, "{\"_id\":\"A\",\"balance\":{\"$gte\":30}}",
             "{\"$inc\":{\"balance\":-30}}"),
         1);
  say("   Now try to take 500 from A, which has only 70:");
  EXPECT(fam(st, ACCOUNTS, "{\"_id\":\"A\",\"balance\":{\"$gte\":500}}",
             "{\"$inc\":{\"balance\":-500}}"),
         0);
  say("   An overdraft is impossible: the balance is untouched.");
  TRY(show_coll(st, ACCOUNTS));

  say("\n3. An idempotent step: note transfer t1 on A only if it is not "
      "there yet.\n   A retry after a crash runs it again; the second run "
      "matches nothing:");
  EXPECT(fam(st, ACCOUNTS, "{\"_id\":\"A\",\"pending\":{\"$ne\":\"t1\"}}",
             "{\"$push\":{\"pending\":\"t1\"}}"),
         1);
  EXPECT(fam(st, ACCOUNTS, "{\"_id\":\"A\",\"pending\":{\"$ne\":\"t1\"}}",
             "{\"$push\":{\"pending\":\"t1\"}}"),
         0);
  say("   t1 is listed once:");
  TRY(show_coll(st, ACCOUNTS));

  say("\n4. A conditional state change: two workers both try to move "
      "transfer t1\n   from initiated to preparing.  Exactly one wins:");
  TRY(insert(st, TRANSFERS,
             "{\"_id\":\"t1\",\"from\":\"A\",\"to\":\"B\",\"amount\":30,"
             "\"state\":\"initiated\"}"));
  TRY(show_coll(st, TRANSFERS));
  say("   worker 1:");
  EXPECT(fam(st, TRANSFERS, "{\"_id\":\"t1\",\"state\":\"initiated\"}",
             "{\"$set\":{\"state\":\"preparing\"}}"),
         1);
  say("   worker 2:");
  EXPECT(fam(st, TRANSFERS, "{\"_id\":\"t1\",\"state\":\"initiated\"}",
             "{\"$set\":{\"state\":\"preparing\"}}"),
         0);
  say("\nThese three moves -- guarded debit, idempotent step, conditional "
      "state\nchange -- are all a two-phase transfer needs (doctx transfer "
      "--help).");
  return 0;
#undef EXPECT
#undef TRY
}

static int demo(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  char dir[] = "/tmp/doctx-demo-XXXXXX";
  char uri[128];
  int ec = 0, temp = 0;
  (void)a;
  if (!cli->uri) {
    if (!mkdtemp(dir)) {
      perror("doctx: demo: creating a temporary directory");
      return DTX_EXIT_BACKEND;
    }
    snprintf(uri, sizeof uri, "sqlite:%s/demo.db", dir);
    cli->uri = uri;
    temp = 1;
  }
  dtx_store_t *st = dtx__cli_store(cli, &ec);
  if (st) {
    say("doctx demo: the primitive on %s\n", dtx_store_uri(st));
    int rc = run(st);
    if (rc == DEMO_UNEXPECTED)
      ec = dtx__cli_error(DTX_ESTATE, "demo step did not go as expected");
    else if (rc < 0)
      ec = dtx__cli_fail(rc);
  }
  if (temp) {
    /* The store must be closed before its files go; main() then sees NULL. */
    dtx_store_close(cli->st);
    cli->st = NULL;
    cli->uri = NULL;
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    char path[160];
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
      snprintf(path, sizeof path, "%s/demo.db%s", dir, suffix[i]);
      unlink(path);
    }
    rmdir(dir);
  }
  return ec;
}

const dtx__cli_spec_t dtx__cmd_demo = {
    "demo", demo, NULL, NULL, DTX__CLI_DOC, NULL,
    "a narrated tour of the primitive",
    "Walks through the primitive, narrating each step: a debit guarded by\n"
    "a balance check, an idempotent step, and a conditional state change.\n"
    "Without --store it uses a fresh temporary database; with --store it\n"
    "drops and reuses the collections demo.accounts and demo.transfers.\n"};
