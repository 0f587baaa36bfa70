/* cmd_ledger.c -- the ledger command: the CLI face of src/txn/ledger/
 * (accounts, posting, pending entries, reversal, balances, statements).
 * Every argument is checked before the store is opened, so bad input
 * records nothing; the rules themselves (legs sum to zero, distinct
 * accounts, limits, int64) are the library's, and this file only maps
 * their errors to the exit codes: funds refused 1, bad legs or an
 * unknown account 2, a conflicting id or a resolved entry 3. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static const char *ledger_help =
    "usage: doctx ledger account create ID [--min-balance N|none]\n"
    "       doctx ledger account limit ID N|none\n"
    "       doctx ledger post ACCT:VALUE ACCT:VALUE... [--id ID]\n"
    "                         [--pending [--timeout-ms N]] [--deadline-ms N]\n"
    "       doctx ledger post-many [--file PATH] [--deadline-ms N]\n"
    "       doctx ledger post-pending ID | ledger void ID\n"
    "       doctx ledger reverse ID [--id NEWID] [--deadline-ms N]\n"
    "       doctx ledger balance ACCT [--at-seq N]\n"
    "       doctx ledger statement ACCT [--from-seq N] [--limit N]\n"
    "       doctx ledger show ID | ledger list [--account A] [--limit N]\n"
    "A log-reconciliation ledger (docs/ledger.md): an entry is one immutable\n"
    "document with 2..128 legs on distinct accounts whose int64 values sum\n"
    "to zero; a negative value debits (money leaves the account), a positive\n"
    "one credits.  Each account numbers its legs 1, 2, 3, ... (seq).  A debit\n"
    "must leave the account's available balance (balance minus pending\n"
    "debits) at or above its min_balance (0 by default; none: no limit).\n"
    "--id makes a post idempotent: the same id with the same legs prints the\n"
    "existing entry.  post-many posts one entry per line of stdin (or PATH),\n"
    "{\"legs\":[{\"account\":A,\"value\":N}...][,\"id\"][,\"pending\"][,\"timeout_ms\"]},\n"
    "as posting them one at a time in line order would, entries on distinct\n"
    "accounts together (one write per round); it prints one line per entry\n"
    "(the entry, or {\"error\",\"detail\",\"line\"}) and exits with the most\n"
    "severe line's code; a line that is not an entry's JSON shape exits 2\n"
    "before anything is posted (an entry the library refuses, e.g. one leg,\n"
    "fails alone on its line, exit 2 too, while the others post).\n"
    "--pending holds the debits until post-pending (in full) or void, or\n"
    "until --timeout-ms (1 ms to 100 years; 0 is refused; default 1 h; a\n"
    "line's \"timeout_ms\" alike) passes and a worker expires it.\n"
    "reverse posts the negated legs as a new entry.  balance\n"
    "prints {\"account\",\"balance\",\"available\",\"pending_debits\",\"seq\"}\n"
    "(--at-seq N: as of the account's seq N); statement one line per valid\n"
    "leg {\"entry\",\"seq\",\"value\",\"balance\",\"state\"} with the running\n"
    "balance (--from-seq inclusive).  `doctx worker` commits entries and\n"
    "advances the cached balances.\n"
    "exit: 0 ok (post-pending of a posted entry too)\n"
    "      1 a post refused for funds (the account is named; nothing is\n"
    "        recorded), or no such entry or account (show, balance,\n"
    "        statement, limit)\n"
    "      2 invalid input: legs not summing to zero, a zero or non-integer\n"
    "        value, an unknown or repeated account: nothing is recorded\n"
    "      3 an id reused with other legs, an existing account id, voiding a\n"
    "        posted entry, posting a voided or expired one, int64 overflow\n"
    "      4 store error\n";

enum {
  G_MIN, G_ID, G_PENDING, G_TIMEOUT, G_DEADLINE, G_AT, G_FROM, G_LIMIT,
  G_ACCOUNT, G_FILE, G_N
};

/* The subcommands: positionals after the name (-1: at least 2) and the
 * options each takes. */
static const struct {
  const char *name;
  int npos;
  unsigned opts;
} subs[] = {
    {"post", -1, 1u << G_ID | 1u << G_PENDING | 1u << G_TIMEOUT | 1u << G_DEADLINE},
    {"post-pending", 1, 0},
    {"void", 1, 0},
    {"reverse", 1, 1u << G_ID | 1u << G_DEADLINE},
    {"balance", 1, 1u << G_AT},
    {"statement", 1, 1u << G_FROM | 1u << G_LIMIT},
    {"show", 1, 0},
    {"list", 0, 1u << G_ACCOUNT | 1u << G_LIMIT},
    {"account", 0, 0}, /* checked by ledger_account */
    {"post-many", 0, 1u << G_FILE | 1u << G_DEADLINE},
};
#define NSUBS (sizeof subs / sizeof subs[0])

/* Leg text ACCT:VALUE: the account is everything before the last ':'
 * (ids may contain ':'). */
static int parse_leg(char *text, dtx_ledger_leg_t *leg) {
  char *c = strrchr(text, ':');
  if (!c || c == text)
    return dtx__cli_usage("ledger post: a leg is ACCT:VALUE, got '%s'", text);
  *c = '\0';
  leg->account = text;
  if (dtx__cli_int64(c + 1, 1, &leg->value) != 0) {
    *c = ':';
    return dtx__cli_usage("ledger post: the value of leg '%s' is not an int64 "
                          "(minor units)", text);
  }
  return 0;
}

static int parse_limit(const char *cmd, const char *text,
                       dtx_ledger_limit_t *l) {
  memset(l, 0, sizeof *l);
  if (strcmp(text, "none") == 0) {
    l->no_min_balance = 1;
    return 0;
  }
  if (dtx__cli_int64(text, 1, &l->min_balance) != 0)
    return dtx__cli_usage("%s: the limit must be an int64 or none, got '%s'",
                          cmd, text);
  return 0;
}

/* A library error as this command's exit code (the contract above). */
static int ledger_code(int rc, int missing_code) {
  switch (rc) {
  case 0:
    return DTX_EXIT_OK;
  case DTX_EINSUFFICIENT:
    return DTX_EXIT_NOMATCH;
  case DTX_ENOACCOUNT:
  case DTX_ENOTFOUND:
    return missing_code;
  default:
    return dtx__cli_exit_code(rc);
  }
}

/* The exit code of one entry of post-many: what `ledger post` alone
 * exits with (a missing account is a usage error there too). */
static int post_code(int rc, const json_t *doc) {
  (void)doc;
  return ledger_code(rc, DTX_EXIT_USAGE);
}

/* ledger_code after printing the error. */
static int ledger_fail(int rc, int missing_code) {
  (void)dtx__cli_fail(rc);
  return ledger_code(rc, missing_code);
}

static int ledger_account(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[] = {{"--min-balance", 1, NULL}};
  char *pos[3];
  dtx_ledger_limit_t lim = {0};
  int code, rc;
  int n = dtx__cli_split(argc, argv, o, 1, pos, 3); /* argv[0]: "account" */
  if (n < 0)
    return DTX_EXIT_USAGE;
  int create = n >= 1 && strcmp(pos[0], "create") == 0;
  int limit = n >= 1 && strcmp(pos[0], "limit") == 0;
  if (create && n == 2) {
    if (o[0].value && parse_limit("ledger account create", o[0].value, &lim))
      return DTX_EXIT_USAGE;
  } else if (limit && n == 3 && !o[0].value) {
    if (parse_limit("ledger account limit", pos[2], &lim))
      return DTX_EXIT_USAGE;
  } else {
    return dtx__cli_usage("ledger account: expected create ID "
                          "[--min-balance N|none] or limit ID N|none");
  }
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *acct = NULL;
  rc = create ? dtx_ledger_account_create(st, pos[1], &lim, &acct)
              : dtx_ledger_account_limit(st, pos[1], &lim, &acct);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  dtx__cli_print_item(acct, 0);
  json_decref(acct);
  return DTX_EXIT_OK;
}

static int ledger_post(dtx_cli_t *cli, char **pos, int n, dtx__cli_opt_t *o) {
  dtx_ledger_leg_t legs[DTX_LEDGER_MAX_LEGS];
  dtx_ledger_post_req_t req = {.id = o[G_ID].value, .legs = legs,
                               .pending = o[G_PENDING].value != NULL};
  dtx_exec_opts_t eo = {0};
  int code;
  if (n - 1 < 2 || n - 1 > DTX_LEDGER_MAX_LEGS)
    return dtx__cli_usage("ledger post: an entry has 2 to %d legs "
                          "ACCT:VALUE, got %d", DTX_LEDGER_MAX_LEGS, n - 1);
  for (int i = 1; i < n; i++)
    if (parse_leg(pos[i], &legs[i - 1]))
      return DTX_EXIT_USAGE;
  req.nlegs = (size_t)(n - 1);
  /* The timeout's rule (1 ms .. 100 years, only with --pending) is the
   * library's: any integer goes to it; unset is its usual one hour. */
  req.timeout_ms = req.pending ? DTX_LEDGER_TIMEOUT_MS : 0;
  if (dtx__cli_int_opt("ledger post", &o[G_TIMEOUT], 1, INT64_MIN,
                       &req.timeout_ms) ||
      dtx__cli_int_opt("ledger post", &o[G_DEADLINE], 0, 1, &eo.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store_armed(cli, &code);
  if (!st)
    return code;
  json_t *e = NULL;
  int rc = dtx_ledger_post(st, &req, &eo, &e);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_USAGE); /* unknown account: bad input */
  dtx__cli_print_item(e, 0);
  json_decref(e);
  return DTX_EXIT_OK;
}

/* ---- post-many ------------------------------------------------------------------ */

/* Entries per dtx_ledger_post_many call: a bound on the memory of one
 * call's rounds, not on the input. */
#define POST_CHUNK 1000

typedef struct pline {
  dtx__cli_jline_t j; /* first; its line owns the strings req borrows */
  dtx_ledger_post_req_t req;
  dtx_ledger_leg_t *legs; /* malloc'd, freed by ledger_post_many */
} pline_t;

/* Checks one line's shape into l->req; the entry's rules (sum, distinct
 * accounts, ids) are the library's, judged per entry. */
static int parse_entry(pline_t *l) {
  size_t ln = l->j.lineno, i;
  json_t *v = l->j.line, *f, *leg;
  const char *key;
  if (!json_is_object(v))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "an entry is an object "
                             "{\"legs\"[, \"id\", \"pending\", \"timeout_ms\"]}");
  json_object_foreach(v, key, f) {
    if (strcmp(key, "legs") && strcmp(key, "id") && strcmp(key, "pending") &&
        strcmp(key, "timeout_ms"))
      return dtx__cli_bad_line(ln, DTX_EINVAL, "unknown field '%.200s' "
                               "(legs, id, pending, timeout_ms)", key);
  }
  json_t *legs = json_object_get(v, "legs"), *id = json_object_get(v, "id");
  json_t *pend = json_object_get(v, "pending");
  json_t *tmo = json_object_get(v, "timeout_ms");
  if (!json_is_array(legs) || json_array_size(legs) > DTX_LEDGER_MAX_LEGS)
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"legs\" must be an array of "
                             "at most %d legs", DTX_LEDGER_MAX_LEGS);
  if (!(l->legs = calloc(json_array_size(legs) + 1, sizeof *l->legs)))
    return dtx__cli_error(DTX_ENOMEM, "ledger post-many: line %zu", ln);
  json_array_foreach(legs, i, leg) {
    json_t *a = json_object_get(leg, "account");
    json_t *val = json_object_get(leg, "value");
    if (!json_is_object(leg) || json_object_size(leg) != 2 ||
        !json_is_string(a) || !json_is_integer(val))
      return dtx__cli_bad_line(ln, DTX_EINVAL, "leg %zu must be "
                               "{\"account\": ID, \"value\": int64}", i + 1);
    l->legs[i] = (dtx_ledger_leg_t){json_string_value(a),
                                    (int64_t)json_integer_value(val)};
  }
  if (id && !json_is_string(id))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"id\" must be a string");
  if (pend && !json_is_boolean(pend))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"pending\" must be true or "
                             "false");
  if (tmo && !json_is_integer(tmo))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"timeout_ms\" must be an "
                             "integer");
  l->req = (dtx_ledger_post_req_t){
      .id = id ? json_string_value(id) : NULL, .legs = l->legs,
      .nlegs = json_array_size(legs), .pending = json_is_true(pend),
      /* As `ledger post`: unset is the usual hour, a value is the
       * library's to judge (0 refused on its line, as --timeout-ms 0). */
      .timeout_ms = tmo                 ? (int64_t)json_integer_value(tmo)
                    : json_is_true(pend) ? DTX_LEDGER_TIMEOUT_MS
                                         : 0};
  return 0;
}

/* One call per POST_CHUNK lines; each line prints what `ledger post`
 * prints for it alone (the entry, or the error naming the line). */
static int ledger_post_many(dtx_cli_t *cli, int n, dtx__cli_opt_t *o) {
  pline_t *ls = NULL;
  size_t nl = 0;
  int64_t deadline = 0;
  if (n != 1)
    return dtx__cli_usage("ledger post-many: takes no arguments (the "
                          "entries come from stdin or --file)");
  if (dtx__cli_int_opt("ledger post-many", &o[G_DEADLINE], 0, 1, &deadline))
    return DTX_EXIT_USAGE;
  int ec = dtx__cli_read_jlines(o[G_FILE].value,
                                "ledger post-many: reading the entries",
                                sizeof *ls, (void **)&ls, &nl);
  for (size_t i = 0; !ec && i < nl; i++)
    ec = parse_entry(&ls[i]);
  dtx_store_t *st = ec || nl == 0 ? NULL : dtx__cli_store_armed(cli, &ec);
  size_t cap = nl < POST_CHUNK ? nl : POST_CHUNK;
  dtx_ledger_post_req_t *reqs = st ? calloc(cap, sizeof *reqs) : NULL;
  dtx_ledger_result_t *res = st ? calloc(cap, sizeof *res) : NULL;
  if (st && (!reqs || !res))
    ec = dtx__cli_error(DTX_ENOMEM, "ledger post-many of %zu", nl);
  dtx_exec_opts_t eo = {.deadline_ms = deadline};
  dtx__cli_batch_t out = {.key = "line", .item = 1, .exit_of = post_code};
  for (size_t from = 0; st && !ec && from < nl; from += POST_CHUNK) {
    size_t k = nl - from < POST_CHUNK ? nl - from : POST_CHUNK;
    for (size_t i = 0; i < k; i++)
      reqs[i] = ls[from + i].req;
    (void)dtx_ledger_post_many(st, reqs, k, &eo, res);
    for (size_t i = 0; i < k; i++)
      (void)dtx__cli_batch_line(&out, json_integer(ls[from + i].j.lineno),
                                res[i].rc, res[i].detail, res[i].entry);
    dtx_ledger_results_clear(res, k);
  }
  for (size_t i = 0; ls && i < nl; i++)
    free(ls[i].legs);
  dtx__cli_jlines_free(ls, nl, sizeof *ls);
  free(reqs);
  free(res);
  return ec ? ec : out.worst;
}

/* The read subcommands: balance, statement, show, list. */
static int ledger_read(dtx_cli_t *cli, size_t k, char **pos,
                       dtx__cli_opt_t *o) {
  int64_t at = DTX_LEDGER_LATEST, from = 1, limit = 0;
  dtx_page_t page = {0};
  int code, rc;
  if (dtx__cli_int_opt("ledger", &o[G_AT], 0, 0, &at) ||
      dtx__cli_int_opt("ledger", &o[G_FROM], 0, 1, &from) ||
      dtx__cli_int_opt("ledger", &o[G_LIMIT], 0, 0, &limit))
    return DTX_EXIT_USAGE;
  page.limit = limit;
  dtx_store_t *st = dtx__cli_store_read(cli, &code);
  if (!st)
    return code;
  json_t *out = NULL;
  const char *sub = subs[k].name;
  if (strcmp(sub, "balance") == 0)
    rc = dtx_ledger_balance(st, pos[1], at, &out);
  else if (strcmp(sub, "statement") == 0)
    rc = dtx_ledger_statement(st, pos[1], from, limit, &out);
  else if (strcmp(sub, "show") == 0)
    rc = dtx_ledger_get(st, pos[1], &out);
  else
    rc = dtx_ledger_list(st, o[G_ACCOUNT].value, &page, &out);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  if (strcmp(sub, "statement") == 0) {
    size_t i;
    json_t *v;
    json_array_foreach(out, i, v) dtx__cli_print_json(v);
    json_decref(out);
    return DTX_EXIT_OK;
  }
  if (strcmp(sub, "list") == 0)
    return dtx__cli_print_items(out, 0);
  if (strcmp(sub, "show") == 0)
    dtx__cli_print_item(out, 0);
  else
    dtx__cli_print_json(out);
  json_decref(out);
  return DTX_EXIT_OK;
}

int dtx__cmd_ledger(dtx_cli_t *cli, int argc, char **argv) {
  dtx__cli_opt_t o[G_N] = {
      [G_MIN] = {"--min-balance", 1, NULL}, [G_ID] = {"--id", 1, NULL},
      [G_PENDING] = {"--pending", 0, NULL}, [G_TIMEOUT] = {"--timeout-ms", 1, NULL},
      [G_DEADLINE] = {"--deadline-ms", 1, NULL}, [G_AT] = {"--at-seq", 1, NULL},
      [G_FROM] = {"--from-seq", 1, NULL},   [G_LIMIT] = {"--limit", 1, NULL},
      [G_ACCOUNT] = {"--account", 1, NULL}, [G_FILE] = {"--file", 1, NULL}};
  char *pos[DTX_LEDGER_MAX_LEGS + 2];
  int code;
  if (dtx__cli_is_help(argc, argv))
    return dtx__cli_help(ledger_help);
  if (argc >= 2 && strcmp(argv[1], "account") == 0)
    return ledger_account(cli, argc - 1, argv + 1);
  int n = dtx__cli_split(argc, argv, o, G_N, pos, DTX_LEDGER_MAX_LEGS + 2);
  if (n < 0)
    return DTX_EXIT_USAGE;
  size_t k = NSUBS;
  if (n > 0)
    for (k = 0; k < NSUBS; k++)
      if (strcmp(subs[k].name, pos[0]) == 0)
        break;
  if (k == NSUBS)
    return dtx__cli_usage("ledger: expected account, post, post-many, "
                          "post-pending, void, reverse, balance, statement, "
                          "show or list%s%s",
                          n > 0 ? "; got " : "", n > 0 ? pos[0] : "");
  const char *sub = subs[k].name;
  for (int i = 0; i < G_N; i++)
    if (o[i].value && !(subs[k].opts & (1u << i)))
      return dtx__cli_usage("ledger %s: %s does not apply", sub, o[i].name);
  if (k == 0)
    return ledger_post(cli, pos, n, o);
  if (strcmp(sub, "post-many") == 0)
    return ledger_post_many(cli, n, o);
  if (n - 1 != subs[k].npos)
    return dtx__cli_usage("ledger %s: expected %s", sub,
                          subs[k].npos ? "one argument (ID or ACCT)"
                                       : "no arguments");
  if (k >= 4)
    return ledger_read(cli, k, pos, o);
  if ((code = dtx__cli_faults_ok()))
    return code;
  dtx_exec_opts_t eo = {0};
  if (dtx__cli_int_opt("ledger", &o[G_DEADLINE], 0, 1, &eo.deadline_ms))
    return DTX_EXIT_USAGE;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  json_t *e = NULL;
  int rc = k == 1   ? dtx_ledger_post_pending(st, pos[1], &e)
           : k == 2 ? dtx_ledger_void(st, pos[1], &e)
                    : dtx_ledger_reverse(st, pos[1], o[G_ID].value, &eo, &e);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  dtx__cli_print_item(e, 0);
  json_decref(e);
  return DTX_EXIT_OK;
}
