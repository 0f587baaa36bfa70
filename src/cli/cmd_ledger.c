/* cmd_ledger.c -- doctx ledger: the CLI face of src/txn/ledger/
 * (accounts, posting, pending entries, reversal, balances, statements).
 * The rules (legs sum to zero, 2..128 distinct accounts, limits, int64,
 * timeouts) are the library's; this file reads the arguments and maps
 * its errors to the command's exit codes: funds refused 1, bad legs or an
 * unknown account 2, a conflicting id or a resolved entry 3. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

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

/* ledger_code of rc after printing it, or the entry or account *doc
 * (stolen; a pointer: the call sets it). */
static int done(int rc, int missing_code, json_t **doc) {
  if (!rc)
    dtx__cli_print_item(*doc, 0);
  json_decref(*doc);
  return rc ? ledger_fail(rc, missing_code) : DTX_EXIT_OK;
}

static int account(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int create = strcmp(a->spec->name, "create") == 0, code, which = 0;
  const char *lim = create ? dtx__cli_str(a, "--min-balance") : a->pos[1];
  const char *max = dtx__cli_str(a, "--max-balance");
  dtx_ledger_limit_t l = {0};
  json_t *acct = NULL;
  if (lim && (code = dtx__cli_limit(a->cmd, lim, &l.no_min_balance,
                                    &l.min_balance)))
    return code;
  if (max && (code = dtx__cli_limit(a->cmd, max, &l.has_max_balance,
                                    &l.max_balance)))
    return code;
  l.has_max_balance = max && !l.has_max_balance; /* "none": no max */
  which = (lim ? DTX_LEDGER_LIMIT_MIN : 0) | (max ? DTX_LEDGER_LIMIT_MAX : 0);
  if (!create && !which)
    return dtx__cli_usage("ledger account limit: give N|none (the floor), "
                          "--max-balance M|none, or both");
  const char *asset = create ? dtx__cli_str(a, "--asset") : NULL;
  /* The library's checks before the store opens: bad input creates no
   * store. */
  int rc = dtx_ledger_account_id_check(a->pos[0]);
  if (rc == 0 && asset)
    rc = dtx_ledger_asset_check(asset);
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  dtx_ledger_account_opts_t o = {.limit = &l, .asset = asset};
  return done(create ? dtx_ledger_account_create_ex(st, a->pos[0], &o, &acct)
                     : dtx_ledger_account_limits(st, a->pos[0], which, &l,
                                                 &acct),
              DTX_EXIT_NOMATCH, &acct);
}

/* account close: the library judges the balance and the holds (close.c);
 * a balance, a hold or a closed account's leg is exit 3. */
static int close_account(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int code, rc = dtx_ledger_account_id_check(a->pos[0]);
  json_t *e = NULL;
  if (rc)
    return dtx__cli_fail(rc);
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  return done(dtx_ledger_account_close(st, a->pos[0], &eo, &e),
              DTX_EXIT_NOMATCH, &e);
}

static int post(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  dtx_ledger_leg_t *legs = calloc((size_t)a->npos, sizeof *legs);
  int pending = dtx__cli_has(a, "--pending"), code = 0;
  /* The timeout's rule (1 ms .. 100 years, only with --pending) is the
   * library's: any integer goes to it; unset is its usual one hour. */
  dtx_ledger_post_req_t req = {
      .id = dtx__cli_str(a, "--id"), .legs = legs, .pending = pending,
      .nlegs = (size_t)a->npos,
      .timeout_ms = dtx__cli_num(a, "--timeout-ms",
                                 pending ? DTX_LEDGER_TIMEOUT_MS : 0)};
  dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
  json_t *e = NULL, *meta = NULL;
  if (!legs)
    return dtx__cli_error(DTX_ENOMEM, "ledger post: %d legs", a->npos);
  /* --meta is JSON text; whether it is an entry's meta (an object, its
   * size) is the library's to say. */
  if (dtx__cli_str(a, "--meta") &&
      !(meta = dtx__cli_json(dtx__cli_str(a, "--meta"), "--meta")))
    code = DTX_EXIT_USAGE;
  req.meta = meta;
  req.ref = dtx__cli_str(a, "--ref");
  /* --imported --at TIME (docs/ledger.md, "Entry time"): whether the
   * time may be imported (past, monotone) is the library's to say. */
  req.imported = dtx__cli_has(a, "--imported");
  if (!code && dtx__cli_str(a, "--at") && !req.imported)
    code = dtx__cli_usage("ledger post: --at TIME goes with --imported "
                          "(doctx times a live entry)");
  else if (!code && req.imported && !dtx__cli_str(a, "--at"))
    code = dtx__cli_usage("ledger post: --imported needs --at TIME");
  else if (!code && req.imported &&
           dtx_ledger_time_parse(dtx__cli_str(a, "--at"), &req.at_ms))
    code = dtx__cli_usage("ledger post: --at: %s", dtx_errdetail());
  /* ACCT:VALUE: the account is everything before the last ':' (ids may
   * contain ':'). */
  for (int i = 0; !code && i < a->npos; i++) {
    char *text = a->pos[i], *c = strrchr(text, ':');
    if (!c || c == text)
      code = dtx__cli_usage("ledger post: a leg is ACCT:VALUE, got '%s'",
                            text);
    else if (strstr(c + 1, "max")) { /* -max, -max=CAP, max: the library's */
      int kind = 0;
      if (dtx_ledger_leg_value_parse(c + 1, &legs[i], &kind))
        code = dtx__cli_usage("ledger post: leg '%s': %s", text,
                              dtx_errdetail());
      else if (kind == DTX_LEDGER_LEG_MAX_DEBIT) /* two: the library's */
        req.max_debit = req.max_debit ? SIZE_MAX : (size_t)i + 1;
      else
        req.max_credit = req.max_credit ? SIZE_MAX : (size_t)i + 1;
      *c = '\0', legs[i].account = text;
    } else if (dtx__cli_int64(c + 1, 1, &legs[i].value) != 0)
      code = dtx__cli_usage("ledger post: the value of leg '%s' is not an "
                            "int64 (minor units)", text);
    else
      *c = '\0', legs[i].account = text;
  }
  int rc = code ? 0 : dtx_ledger_post_req_check(&req); /* before the open */
  if (rc)
    code = dtx__cli_fail(rc);
  dtx_store_t *st = code ? NULL : dtx__cli_store(cli, &code);
  if (st) /* an unknown account is bad input */
    code = done(dtx_ledger_post(st, &req, &eo, &e), DTX_EXIT_USAGE, &e);
  free(legs);
  json_decref(meta);
  return code;
}

/* ---- post-many --------------------------------------------------------- */

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
  size_t ln = l->j.lineno, i, md = 0, mc = 0;
  int kind = 0;
  json_t *v = l->j.line, *f, *leg;
  const char *key;
  if (!json_is_object(v))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "an entry is an object "
                             "{\"legs\"[, \"id\", \"pending\", \"timeout_ms\", "
                             "\"meta\", \"ref\"]}");
  json_object_foreach(v, key, f) {
    if (strcmp(key, "legs") && strcmp(key, "id") && strcmp(key, "pending") &&
        strcmp(key, "timeout_ms") && strcmp(key, "meta") && strcmp(key, "ref"))
      return dtx__cli_bad_line(ln, DTX_EINVAL, "unknown field '%.200s' "
                               "(legs, id, pending, timeout_ms, meta, ref)",
                               key);
  }
  json_t *ref = json_object_get(v, "ref");
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
        !json_is_string(a) || !(json_is_integer(val) || json_is_string(val)))
      return dtx__cli_bad_line(ln, DTX_EINVAL, "leg %zu must be "
                               "{\"account\": ID, \"value\": int64 | "
                               "\"-max\" | \"-max=CAP\" | \"max\"}", i + 1);
    l->legs[i] = (dtx_ledger_leg_t){json_string_value(a),
                                    (int64_t)json_integer_value(val)};
    kind = DTX_LEDGER_LEG_FIXED;
    if (json_is_string(val) &&
        dtx_ledger_leg_value_parse(json_string_value(val), &l->legs[i], &kind))
      return dtx__cli_bad_line(ln, DTX_EINVAL, "leg %zu: %s", i + 1,
                               dtx_errdetail());
    if (kind == DTX_LEDGER_LEG_MAX_DEBIT) /* two: the library refuses */
      md = md ? SIZE_MAX : i + 1;
    else if (kind == DTX_LEDGER_LEG_MAX_CREDIT)
      mc = mc ? SIZE_MAX : i + 1;
  }
  if (id && !json_is_string(id))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"id\" must be a string");
  if (pend && !json_is_boolean(pend))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"pending\" must be true or "
                             "false");
  if (tmo && !json_is_integer(tmo))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"timeout_ms\" must be an "
                             "integer");
  if (ref && !json_is_string(ref))
    return dtx__cli_bad_line(ln, DTX_EINVAL, "\"ref\" must be a string");
  l->req = (dtx_ledger_post_req_t){
      .id = id ? json_string_value(id) : NULL, .legs = l->legs,
      .nlegs = json_array_size(legs), .pending = json_is_true(pend),
      /* borrowed from the line, which outlives the call; the meta's
       * rules are the library's */
      .meta = json_object_get(v, "meta"), .ref = json_string_value(ref),
      /* As `ledger post`: unset is the usual hour, a value is the
       * library's to judge (0 refused on its line, as --timeout-ms 0). */
      .timeout_ms = tmo                 ? (int64_t)json_integer_value(tmo)
                    : json_is_true(pend) ? DTX_LEDGER_TIMEOUT_MS
                                         : 0,
      .max_debit = md, .max_credit = mc};
  return 0;
}

/* One call per POST_CHUNK lines; each line prints what `ledger post`
 * prints for it alone (the entry, or the error naming the line). */
static int post_many(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  pline_t *ls = NULL;
  size_t nl = 0;
  int ec = dtx__cli_read_jlines(dtx__cli_str(a, "--file"),
                                "ledger post-many: reading the entries",
                                sizeof *ls, (void **)&ls, &nl);
  size_t nok = 0;
  for (size_t i = 0; !ec && i < nl; i++)
    if ((ec = parse_entry(&ls[i])) == 0 &&
        dtx_ledger_post_req_check(&ls[i].req) == 0)
      nok++;
  dtx__cli_batch_t out = {.key = "line", .item = 1, .exit_of = post_code};
  /* Every entry refused by the library's own check: each line says why,
   * and the store is not opened (a missing SQLite file is not created). */
  for (size_t i = 0; !ec && nok == 0 && i < nl; i++)
    (void)dtx__cli_batch_line(&out, json_integer(ls[i].j.lineno),
                              dtx_ledger_post_req_check(&ls[i].req),
                              dtx_errdetail(), NULL);
  dtx_store_t *st = ec || nok == 0 ? NULL : dtx__cli_store(cli, &ec);
  size_t cap = nl < POST_CHUNK ? nl : POST_CHUNK;
  dtx_ledger_post_req_t *reqs = st ? calloc(cap, sizeof *reqs) : NULL;
  dtx_ledger_result_t *res = st ? calloc(cap, sizeof *res) : NULL;
  if (st && (!reqs || !res))
    ec = dtx__cli_error(DTX_ENOMEM, "ledger post-many of %zu", nl);
  dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
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

/* post-pending, void and reverse: one entry. */
static int resolve(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *sub = a->spec->name, *id = a->pos[0];
  json_t *e = NULL;
  /* post-pending --amounts ACCT:VALUE,... [--post-id PID]: a partial post
   * (ids never hold ','; the account is everything before the last ':'). */
  const char *amt = strcmp(sub, "post-pending") == 0
                        ? dtx__cli_str(a, "--amounts")
                        : NULL;
  /* The legs borrow their accounts from this copy, freed with them. */
  char *am = amt ? strdup(amt) : NULL;
  const char *pid = amt ? dtx__cli_str(a, "--post-id") : NULL;
  int code, rc;
  dtx_ledger_leg_t *legs = NULL;
  size_t n = 0;
  if (!am && strcmp(sub, "post-pending") == 0 && dtx__cli_str(a, "--post-id"))
    return dtx__cli_usage("ledger post-pending: --post-id goes with "
                          "--amounts");
  if (amt && (!am || !(legs = calloc(strlen(am) / 2 + 2, sizeof *legs)))) {
    free(am);
    return dtx__cli_error(DTX_ENOMEM, "ledger post-pending --amounts");
  }
  for (char *save = NULL, *t = am ? strtok_r(am, ",", &save) : NULL; t;
       t = strtok_r(NULL, ",", &save)) {
    char *c = strrchr(t, ':');
    if (!c || c == t || dtx__cli_int64(c + 1, 1, &legs[n].value) != 0) {
      code = dtx__cli_usage("ledger post-pending: an amount is ACCT:VALUE "
                            "(an int64), got '%s'", t);
      free(legs);
      free(am);
      return code;
    }
    *c = '\0', legs[n++].account = t;
  }
  rc = am ? dtx_ledger_partial_check(id, legs, n, pid)
                    : dtx_ledger_entry_id_check(id); /* before the open */
  if (rc == 0 && strcmp(sub, "reverse") == 0 && dtx__cli_str(a, "--id"))
    rc = dtx_ledger_entry_id_check(dtx__cli_str(a, "--id"));
  if (rc) {
    free(legs);
    free(am);
    return dtx__cli_fail(rc);
  }
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st) {
    free(legs);
    free(am);
    return code;
  }
  if (strcmp(sub, "reverse") == 0) {
    dtx_exec_opts_t eo = {.deadline_ms = dtx__cli_num(a, "--deadline-ms", 0)};
    return done(dtx_ledger_reverse(st, id, dtx__cli_str(a, "--id"), &eo, &e),
                DTX_EXIT_NOMATCH, &e);
  }
  if (strcmp(sub, "void") == 0 || !am)
    return done(strcmp(sub, "void") == 0 ? dtx_ledger_void(st, id, &e)
                                         : dtx_ledger_post_pending(st, id, &e),
                DTX_EXIT_NOMATCH, &e);
  code = done(dtx_ledger_post_partial(st, id, legs, n, pid, &e),
              DTX_EXIT_NOMATCH, &e);
  free(legs);
  free(am);
  return code;
}

/* The read subcommands: balance, statement, show, list. */
static int reads(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  const char *sub = a->spec->name;
  int code, rc;
  json_t *mf = NULL;
  int entries = strcmp(sub, "entries") == 0;
  /* entries: a FILTER that is no JSON is bad input before the store
   * opens; what it may say is the library's. */
  if (entries && dtx__cli_str(a, "--meta-filter") &&
      !(mf = dtx__cli_json(dtx__cli_str(a, "--meta-filter"), "FILTER")))
    return DTX_EXIT_USAGE;
  /* TIMEs (docs/ledger.md, "Entry time") are read before the store
   * opens: a bad one is bad input. */
  int64_t t[3] = {0, 0, DTX_LEDGER_NO_TIME};
  const char *tn[3] = {"--at", "--from", "--to"};
  int bal = strcmp(sub, "balance") == 0, stm = strcmp(sub, "statement") == 0;
  int by_time = 0;
  for (int i = bal ? 0 : 1; (bal && i < 1) || (stm && i < 3); i++) {
    if (!dtx__cli_str(a, tn[i]))
      continue;
    by_time = 1;
    if (dtx_ledger_time_parse(dtx__cli_str(a, tn[i]), &t[i]))
      return dtx__cli_usage("ledger %s: %s: %s", sub, tn[i], dtx_errdetail());
  }
  if (bal && by_time && dtx__cli_str(a, "--at-seq"))
    return dtx__cli_usage("ledger balance: give --at or --at-seq, not both");
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st) {
    json_decref(mf);
    return code;
  }
  json_t *out = NULL;
  dtx_page_t page = entries || strcmp(sub, "list") == 0 ? dtx__cli_page(a)
                                                        : (dtx_page_t){0};
  if (strcmp(sub, "balance") == 0 && by_time)
    rc = dtx_ledger_balance_time(st, a->pos[0], t[0], &out);
  else if (strcmp(sub, "balance") == 0)
    rc = dtx_ledger_balance(
        st, a->pos[0], dtx__cli_num(a, "--at-seq", DTX_LEDGER_LATEST), &out);
  else if (strcmp(sub, "statement") == 0 && by_time)
    rc = dtx_ledger_statement_time(st, a->pos[0],
                                   dtx__cli_num(a, "--from-seq", 1), t[1],
                                   t[2], dtx__cli_num(a, "--limit", 0), &out);
  else if (strcmp(sub, "statement") == 0)
    rc = dtx_ledger_statement(st, a->pos[0], dtx__cli_num(a, "--from-seq", 1),
                              dtx__cli_num(a, "--limit", 0), &out);
  else if (strcmp(sub, "show") == 0)
    return done(dtx_ledger_get(st, a->pos[0], &out), DTX_EXIT_NOMATCH, &out);
  else if (entries)
    rc = dtx_ledger_entries(st, dtx__cli_str(a, "--ref"), mf,
                            &page,
                            &out);
  else
    rc = dtx_ledger_list(st, dtx__cli_str(a, "--account"),
                         &page, &out);
  json_decref(mf);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  if (!json_is_array(out))
    return dtx__cli_summary(0, &out);
  return dtx__cli_items(0, &out, strcmp(sub, "list") == 0 || entries, 0);
}

/* unique-refs: the one-way switch (meta.c). */
static int unique_refs(dtx_cli_t *cli, const dtx__cli_args_t *a) {
  int code;
  (void)a;
  dtx_store_t *st = dtx__cli_store(cli, &code);
  if (!st)
    return code;
  int rc = dtx_ledger_unique_refs(st);
  if (rc)
    return ledger_fail(rc, DTX_EXIT_NOMATCH);
  json_t *o = json_pack("{s:b}", "unique_refs", 1);
  return dtx__cli_summary(0, &o);
}

#define ID {"--id", DTX__CLI_STR, "ID"}
const dtx__cli_spec_t dtx__cmd_ledger = {
    "ledger", NULL, NULL, NULL, 0,
    (const dtx__cli_spec_t[]){
        {"account", NULL, NULL, NULL, 0,
         (const dtx__cli_spec_t[]){
             {"create", account, "ID",
              (const dtx__cli_opt_t[]){
                  {"--min-balance", DTX__CLI_STR, "N|none"},
                  {"--max-balance", DTX__CLI_STR, "M|none"},
                  {"--asset", DTX__CLI_STR, "CODE/SCALE"}, {NULL}},
              DTX__CLI_ARMED},
             {"limit", account, "ID [N|none]",
              (const dtx__cli_opt_t[]){
                  {"--max-balance", DTX__CLI_STR, "M|none"}, {NULL}},
              DTX__CLI_ARMED},
             {"close", close_account, "ID",
              (const dtx__cli_opt_t[]){DTX__CLI_OPT_DEADLINE, {NULL}},
              DTX__CLI_ARMED},
             {NULL}}},
        {"post", post, "ACCT:VALUE ACCT:VALUE...",
         (const dtx__cli_opt_t[]){ID, {"--pending", DTX__CLI_FLAG},
                                  {"--timeout-ms", DTX__CLI_INT, "N"},
                                  {"--meta", DTX__CLI_STR, "JSON"},
                                  {"--ref", DTX__CLI_STR, "REF"},
                                  {"--imported", DTX__CLI_FLAG},
                                  {"--at", DTX__CLI_STR, "TIME"},
                                  DTX__CLI_OPT_DEADLINE, {NULL}},
         DTX__CLI_ARMED},
        {"post-many", post_many, NULL,
         (const dtx__cli_opt_t[]){DTX__CLI_OPT_FILE, DTX__CLI_OPT_DEADLINE,
                                  {NULL}},
         DTX__CLI_ARMED},
        {"post-pending", resolve, "ID",
         (const dtx__cli_opt_t[]){{"--amounts", DTX__CLI_STR, "A:V,A:V..."},
                                  {"--post-id", DTX__CLI_STR, "PID"}, {NULL}},
         DTX__CLI_ARMED},
        {"void", resolve, "ID", NULL, DTX__CLI_ARMED},
        {"reverse", resolve, "ID",
         (const dtx__cli_opt_t[]){{"--id", DTX__CLI_STR, "NEWID"},
                                  DTX__CLI_OPT_DEADLINE, {NULL}},
         DTX__CLI_ARMED},
        {"balance", reads, "ACCT",
         (const dtx__cli_opt_t[]){{"--at-seq", DTX__CLI_COUNT, "N"},
                                  {"--at", DTX__CLI_STR, "TIME"}, {NULL}},
         DTX__CLI_READS},
        {"statement", reads, "ACCT",
         (const dtx__cli_opt_t[]){{"--from-seq", DTX__CLI_POS, "N"},
                                  {"--from", DTX__CLI_STR, "TIME"},
                                  {"--to", DTX__CLI_STR, "TIME"},
                                  DTX__CLI_OPT_LIMIT, {NULL}},
         DTX__CLI_READS},
        {"show", reads, "ID", NULL, DTX__CLI_READS},
        {"entries", reads, NULL,
         (const dtx__cli_opt_t[]){{"--ref", DTX__CLI_STR, "REF"},
                                  {"--meta-filter", DTX__CLI_STR, "FILTER"},
                                  DTX__CLI_OPT_LIMIT, DTX__CLI_OPT_SKIP,
                                  DTX__CLI_OPT_AFTER, {NULL}},
         DTX__CLI_READS},
        {"unique-refs", unique_refs, NULL, NULL, DTX__CLI_ARMED},
        {"list", reads, NULL,
         (const dtx__cli_opt_t[]){{"--account", DTX__CLI_STR, "A"},
                                  DTX__CLI_OPT_LIMIT, DTX__CLI_OPT_SKIP,
                                  DTX__CLI_OPT_AFTER, {NULL}},
         DTX__CLI_READS},
        {NULL}},
    NULL,
    "A log-reconciliation ledger (docs/ledger.md): an entry is one immutable\n"
    "document with 2..128 legs on distinct accounts whose int64 values sum\n"
    "to zero; a negative value debits (money leaves the account), a positive\n"
    "one credits.  Each account numbers its legs 1, 2, 3, ... (seq).  A debit\n"
    "must leave the account's available balance (balance minus pending\n"
    "debits) at or above its min_balance (0 by default; none: no limit);\n"
    "a credit must leave its balance plus pending credits at or below its\n"
    "--max-balance (none by default).  account limit changes the floor N,\n"
    "the max, or both in one step (the other kept); a max below the floor\n"
    "is refused (exit 2).\n"
    "A balancing pair ACCT:-max[=CAP] ACCT2:max debits as much as ACCT's\n"
    "floor (and ACCT2's max) allows, up to CAP, and credits ACCT2 the same;\n"
    "the entry records the amount (nothing to move: exit 1).\n"
    "--id makes a post idempotent: the same id with the same legs prints the\n"
    "existing entry.  post-many posts one entry per line of stdin (or PATH),\n"
    "{\"legs\":[{\"account\":A,\"value\":N}...][,\"id\"][,\"pending\"][,\"timeout_ms\"]\n"
    "[,\"meta\"][,\"ref\"]},\n"
    "as posting them one at a time in line order would, entries on distinct\n"
    "accounts together (one write per round); it prints one line per entry\n"
    "(the entry, or {\"error\",\"detail\",\"line\"}) and exits with the most\n"
    "severe line's code; a line that is not an entry's JSON shape exits 2\n"
    "before anything is posted (an entry the library refuses, e.g. one leg,\n"
    "fails alone on its line, exit 2 too, while the others post).\n"
    "--pending holds the debits until post-pending (in full; --amounts\n"
    "A:V,...: each named leg posts V, 0..what it holds, the others 0, the\n"
    "rest released; --post-id makes a retry return the entry) or void, or\n"
    "until --timeout-ms (1 ms to 100 years; 0 is refused; default 1 h; a\n"
    "line's \"timeout_ms\" alike) passes and a worker expires it.\n"
    "--asset CODE/SCALE (e.g. USD/2: CODE 1..16 of [A-Z0-9_], SCALE 0..18)\n"
    "fixes an account's asset at creation (none by default); an entry's\n"
    "legs are all in one asset (mixing is exit 2).\n"
    "--meta JSON stores an object (at most 4 KiB) with the entry, --ref REF\n"
    "an indexed reference (1..256 bytes); both never change.  unique-refs\n"
    "makes refs unique in the ledger from then on (a duplicate: exit 3).\n"
    "entries --ref REF and/or --meta-filter FILTER (a MongoDB filter over\n"
    "the meta) lists entries, oldest first.\n"
    "reverse posts the negated legs as a new entry.  balance\n"
    "prints {\"account\",\"balance\",\"available\",\"pending_debits\",\"seq\"}\n"
    "(--at-seq N: as of the account's seq N; --at TIME: as of a time, over\n"
    "the entries timed <= TIME); statement one line per valid\n"
    "leg {\"entry\",\"seq\",\"value\",\"balance\",\"state\",\"at\"[,\"ref\",\"meta\"]}\n"
    "with the running\n"
    "balance (--from-seq inclusive; --from/--to TIME: entries timed in\n"
    "[from, to)).  Every entry has a time \"at\" (ms since 1970, UTC), set\n"
    "by doctx when posted and never decreasing per account; TIME is RFC 3339\n"
    "UTC (2026-01-31T12:00:00Z) or ms since 1970.  --imported --at TIME\n"
    "records an entry of another system's history at TIME (in the past;\n"
    "refused, exit 3, once an account of it has an entry timed after TIME).\n"
    "account close ID closes an account at balance 0 with no pending entry,\n"
    "for good: it then takes no leg (exit 3), and balance and statement\n"
    "show \"closed_at\".\n"
    "`doctx worker` commits entries and\n"
    "advances the cached balances.\n"
    "exit: 0 ok (post-pending of a posted entry too)\n"
    "      1 a post refused for funds or over a max_balance (the account\n"
    "        is named; nothing is\n"
    "        recorded), or no such entry or account (show, balance,\n"
    "        statement, limit, close)\n"
    "      2 invalid input: legs not summing to zero, a zero or non-integer\n"
    "        value, an unknown or repeated account, legs in two assets, a bad\n"
    "        asset, a meta that is no\n"
    "        object or over 4 KiB: nothing is recorded\n"
    "      3 an id reused with other legs, meta or ref, a ref another entry\n"
    "        holds (after unique-refs), an existing account id, an import\n"
    "        timed before an account's latest entry, voiding a\n"
    "        posted entry, posting a voided or expired one, int64 overflow,\n"
    "        a leg on a closed account, closing one with money or a hold\n"
    "      4 store error\n"};
#undef ID
