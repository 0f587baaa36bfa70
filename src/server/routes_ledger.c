/* routes_ledger.c -- doctxd's ledger routes, /v1/ledger/...: each calls
 * the library as `doctx ledger` does (src/cli/cmd_ledger.c,
 * docs/ledger.md), the body's fields for its arguments and options ('-'
 * written '_'), its JSON for the answer.  The library's checks
 * (dtx_ledger_post_req_check, dtx_ledger_account_id_check,
 * dtx_ledger_entry_id_check) run before the store is touched, so a
 * refused request records nothing.  A post with an id is idempotent in
 * the library: the same id with the same legs answers the same entry (a
 * client may retry it), with other legs 409 CONFLICT.  A debit the funds
 * do not cover records nothing: 409 INSUFFICIENT naming the account. */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- accounts ------------------------------------------------------------ */

/* "min_balance": an integer, "none" (no limit) or absent (0);
 * "max_balance": an integer, "none" or absent (no upper limit).  *which:
 * the fields present (DTX_LEDGER_LIMIT_*). */
static int limit_arg(dtx__srv_ctx_t *c, dtx_ledger_limit_t *l, int *which) {
  static const char *const names[] = {"min_balance", "max_balance"};
  *l = (dtx_ledger_limit_t){0};
  *which = 0;
  for (int k = 0; k < 2; k++) {
    json_t *v = dtx__srv_arg(c, names[k]);
    int none = json_is_string(v);
    if (!v)
      continue;
    if (none && strcmp(json_string_value(v), "none") != 0) {
      dtx__srv_bad(c, DTX_EINVAL, "%s is an integer or \"none\"", names[k]);
      return -1;
    }
    *which |= k ? DTX_LEDGER_LIMIT_MAX : DTX_LEDGER_LIMIT_MIN;
    if (k == 0 && none)
      l->no_min_balance = 1;
    else if (k == 0)
      l->min_balance = (int64_t)json_integer_value(v);
    else if (!none)
      l->has_max_balance = 1, l->max_balance = (int64_t)json_integer_value(v);
  }
  return 0;
}

void dtx__srv_h_ledger_account_create(dtx__srv_ctx_t *c) {
  dtx_ledger_limit_t l;
  const char *id = dtx__srv_arg_str(c, "id");
  json_t *acct = NULL;
  int rc, which;
  if (!id) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'id' is required");
    return;
  }
  if (limit_arg(c, &l, &which))
    return;
  const char *asset = dtx__srv_arg_str(c, "asset");
  dtx_ledger_account_opts_t o = {.limit = &l, .asset = asset};
  if ((rc = dtx_ledger_account_id_check(id)) ||
      (asset && (rc = dtx_ledger_asset_check(asset))) ||
      (rc = dtx_ledger_account_create_ex(c->d->st, id, &o, &acct)))
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 201, acct);
}

/* Changes the limits the body names, the others kept (one step). */
void dtx__srv_h_ledger_account_limit(dtx__srv_ctx_t *c) {
  dtx_ledger_limit_t l;
  json_t *acct = NULL;
  int rc, which;
  if (limit_arg(c, &l, &which))
    return;
  if (!which) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "field 'min_balance' or 'max_balance' is required (an "
                 "integer or \"none\")");
    return;
  }
  if (!(rc = dtx_ledger_account_id_check(c->param[0])))
    rc = dtx_ledger_account_limits(c->d->st, c->param[0], which, &l, &acct);
  dtx__srv_one(c, rc, &acct, NULL);
}

/* A TIME query parameter (docs/ledger.md, "Entry time"): RFC 3339 UTC or
 * ms since 1970, as dtx_ledger_time_parse reads it.  *given: whether it
 * was there; -1 when answered. */
static int qtime(dtx__srv_ctx_t *c, const char *key, int64_t *out,
                 int *given) {
  char buf[64];
  int bad = 0;
  const char *v = dtx__srv_query(c, key, buf, sizeof buf, &bad);
  *given = v != NULL;
  if (bad)
    return -1;
  if (v && dtx_ledger_time_parse(v, out)) {
    dtx__srv_bad(c, DTX_EINVAL, "query parameter '%s': %s", key,
                 dtx_errdetail());
    return -1;
  }
  return 0;
}

void dtx__srv_h_ledger_balance(dtx__srv_ctx_t *c) {
  int64_t at, t = 0;
  int by_time;
  json_t *out = NULL;
  if (dtx__srv_qint(c, "at_seq", DTX_LEDGER_LATEST, &at) ||
      qtime(c, "at", &t, &by_time))
    return;
  if (by_time && at != DTX_LEDGER_LATEST) {
    dtx__srv_bad(c, DTX_EINVAL, "give at or at_seq, not both");
    return;
  }
  dtx__srv_one(c, by_time ? dtx_ledger_balance_time(c->d->st, c->param[0], t,
                                                    &out)
                          : dtx_ledger_balance(c->d->st, c->param[0], at, &out),
               &out, NULL);
}

/* The statement pages by seq: the cursor holds the seq the next page
 * starts at, so legs posted meanwhile never shift a page. */
void dtx__srv_h_ledger_statement(dtx__srv_ctx_t *c) {
  char what[300], after[128], fbuf[32];
  int bad = 0, has_from, has_to;
  int64_t from, skip, lim, from_ms = 0, to_ms = DTX_LEDGER_NO_TIME;
  json_t *legs = NULL;
  /* from and to: entry times, [from, to) (time.c) */
  if (qtime(c, "from", &from_ms, &has_from) || qtime(c, "to", &to_ms, &has_to))
    return;
  const char *a = dtx__srv_query(c, "after", after, sizeof after, &bad);
  if (!bad && a && dtx__srv_query(c, "from_seq", fbuf, sizeof fbuf, &bad)) {
    dtx__srv_bad(c, DTX_EINVAL, "give from_seq or after, not both");
    return;
  }
  if (bad || dtx__srv_qint(c, "from_seq", 1, &from))
    return;
  /* The cursor is bound to the account and the times it pages. */
  snprintf(what, sizeof what, "ledger statement %s %lld %lld", c->param[0],
           (long long)from_ms, (long long)to_ms);
  if (dtx__srv_qpage(c, a, what, &skip, &lim))
    return;
  int rc;
  if (a)
    from = skip;
  if ((rc = has_from || has_to
                ? dtx_ledger_statement_time(c->d->st, c->param[0], from,
                                            from_ms, to_ms, lim + 1, &legs)
                : dtx_ledger_statement(c->d->st, c->param[0], from, lim + 1,
                                       &legs))) {
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  json_t *next = json_null();
  if ((int64_t)json_array_size(legs) > lim) {
    json_t *first = json_array_get(legs, (size_t)lim);
    json_decref(next);
    next = dtx__srv_cursor(
        what, (int64_t)json_integer_value(json_object_get(first, "seq")));
    json_array_remove(legs, (size_t)lim);
  }
  dtx__srv_json(c, 200, json_pack("{s:o,s:o}", "legs", legs, "next", next));
}

/* ---- entries ------------------------------------------------------------- */

/* A post request from an entry object o ({"legs", "id", "pending",
 * "timeout_ms", "meta", "ref", "imported", "at"}; meta borrowed from o), its legs into legs[DTX_LEDGER_MAX_LEGS]; the shape is
 * checked here, the rules by dtx_ledger_post_req_check.  0, or answered
 * naming where. */
static int entry_req(dtx__srv_ctx_t *c, json_t *o, const char *where,
                     dtx_ledger_leg_t *legs, dtx_ledger_post_req_t *req) {
  json_t *lj = json_object_get(o, "legs"), *id = json_object_get(o, "id");
  json_t *pend = json_object_get(o, "pending");
  json_t *tmo = json_object_get(o, "timeout_ms"), *leg;
  json_t *ref = json_object_get(o, "ref");
  json_t *imp = json_object_get(o, "imported"), *at = json_object_get(o, "at");
  int64_t at_ms = 0;
  size_t i, md = 0, mc = 0;
  int kind = 0;
  if (!json_is_array(lj) || json_array_size(lj) > DTX_LEDGER_MAX_LEGS) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "%s\"legs\" must be an array of at most %d "
                 "legs",
                 where, DTX_LEDGER_MAX_LEGS);
    return -1;
  }
  json_array_foreach(lj, i, leg) {
    json_t *a = json_object_get(leg, "account");
    json_t *v = json_object_get(leg, "value");
    if (!json_is_object(leg) || json_object_size(leg) != 2 ||
        !json_is_string(a) || !(json_is_integer(v) || json_is_string(v))) {
      dtx__srv_bad(c, DTX_EINVAL,
                   "%sleg %zu must be {\"account\": ID, "
                   "\"value\": int64 | \"-max\" | \"-max=CAP\" | \"max\"}",
                   where, i + 1);
      return -1;
    }
    legs[i] = (dtx_ledger_leg_t){json_string_value(a),
                                 (int64_t)json_integer_value(v)};
    /* A balancing leg (docs/ledger.md, "Balancing legs"): the library
     * reads the text. */
    kind = DTX_LEDGER_LEG_FIXED;
    if (json_is_string(v) &&
        dtx_ledger_leg_value_parse(json_string_value(v), &legs[i], &kind)) {
      dtx__srv_bad(c, DTX_EINVAL, "%sleg %zu: %s", where, i + 1,
                   dtx_errdetail());
      return -1;
    }
    if (kind == DTX_LEDGER_LEG_MAX_DEBIT)
      md = md ? SIZE_MAX : i + 1; /* two: the library's check refuses */
    else if (kind == DTX_LEDGER_LEG_MAX_CREDIT)
      mc = mc ? SIZE_MAX : i + 1;
  }
  if ((id && !json_is_string(id)) || (pend && !json_is_boolean(pend)) ||
      (tmo && !json_is_integer(tmo)) || (ref && !json_is_string(ref))) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "%s\"id\" and \"ref\" are strings, \"pending\" a "
                 "boolean, \"timeout_ms\" an integer",
                 where);
    return -1;
  }
  /* "imported": true with "at": TIME (a string as the CLI's --at, or ms
   * since 1970); whether it may be imported is the library's to say. */
  if ((imp && !json_is_boolean(imp)) ||
      (at && !json_is_string(at) && !json_is_integer(at))) {
    dtx__srv_bad(c, DTX_EINVAL, "%s\"imported\" is a boolean, \"at\" a TIME "
                 "(RFC 3339 UTC or ms since 1970)", where);
    return -1;
  }
  if (at && !json_is_true(imp)) {
    dtx__srv_bad(c, DTX_EINVAL, "%s\"at\" goes with \"imported\": true "
                 "(doctx times a live entry)", where);
    return -1;
  }
  if (json_is_true(imp) && !at) {
    dtx__srv_bad(c, DTX_EINVAL, "%san imported entry needs \"at\"", where);
    return -1;
  }
  if (json_is_string(at) && dtx_ledger_time_parse(json_string_value(at), &at_ms)) {
    dtx__srv_bad(c, DTX_EINVAL, "%s\"at\": %s", where, dtx_errdetail());
    return -1;
  }
  if (json_is_integer(at))
    at_ms = (int64_t)json_integer_value(at);
  /* As `ledger post`: unset is the usual hour for a pending entry; a
   * value is the library's to judge. */
  *req = (dtx_ledger_post_req_t){
      .id = json_string_value(id),
      .legs = legs,
      .nlegs = json_array_size(lj),
      .pending = json_is_true(pend),
      .meta = json_object_get(o, "meta"), /* its rules: the library's */
      .ref = json_string_value(ref),
      .imported = json_is_true(imp),
      .at_ms = at_ms,
      .timeout_ms = tmo                  ? (int64_t)json_integer_value(tmo)
                    : json_is_true(pend) ? DTX_LEDGER_TIMEOUT_MS
                                         : 0,
      .max_debit = md, .max_credit = mc};
  int rc = dtx_ledger_post_req_check(req);
  if (rc) {
    dtx__srv_bad(c, rc, "%s%s", where, dtx_errdetail());
    return -1;
  }
  return 0;
}

static int deadline_arg(dtx__srv_ctx_t *c, dtx_exec_opts_t *eo) {
  *eo = (dtx_exec_opts_t){.deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  if (eo->deadline_ms < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "deadline_ms must be >= 0");
    return -1;
  }
  eo->deadline_ms = dtx__srv_budget(c, eo->deadline_ms);
  return 0;
}

void dtx__srv_h_ledger_post(dtx__srv_ctx_t *c) {
  dtx_ledger_leg_t legs[DTX_LEDGER_MAX_LEGS];
  dtx_ledger_post_req_t req;
  dtx_exec_opts_t eo;
  json_t *e = NULL;
  if (deadline_arg(c, &eo) || entry_req(c, c->body, "", legs, &req))
    return;
  dtx__srv_one(c, dtx_ledger_post(c->d->st, &req, &eo, &e), &e, NULL);
}

#define POST_CHUNK 100

/* post-many: every entry is checked before any is posted (a bad one: 400
 * naming it, none posted); then one result per entry, in order: the
 * entry, or a problem object -- what posting it alone answers. */
void dtx__srv_h_ledger_batch(dtx__srv_ctx_t *c) {
  json_t *items = dtx__srv_arg(c, "entries"), *v, *out = NULL;
  size_t n = json_array_size(items), i;
  dtx_exec_opts_t eo;
  char where[48];
  if (!items || n == 0 || n > DTX__SRV_MAX_BATCH) {
    dtx__srv_bad(c, DTX_EINVAL, "entries holds 1..%d entries",
                 DTX__SRV_MAX_BATCH);
    return;
  }
  if (deadline_arg(c, &eo))
    return;
  dtx_ledger_post_req_t *reqs = calloc(n, sizeof *reqs);
  dtx_ledger_leg_t *legs = calloc(n * DTX_LEDGER_MAX_LEGS, sizeof *legs);
  dtx_ledger_result_t *res = calloc(n, sizeof *res);
  if (!reqs || !legs || !res || !(out = json_array())) {
    dtx__srv_bad(c, DTX_ENOMEM, "a batch of %zu entries", n);
    goto done;
  }
  json_array_foreach(items, i, v) {
    snprintf(where, sizeof where, "entries[%zu]: ", i);
    if (dtx__srv_item_check(c, v, where,
                            "an entry is an object {\"legs\"[, \"id\", "
                            "\"pending\", \"timeout_ms\", \"meta\", "
                            "\"ref\"]}",
                            (const char *const[]){"legs", "id", "pending",
                                                  "timeout_ms", "meta", "ref",
                                                  NULL}) ||
        entry_req(c, v, where, legs + i * DTX_LEDGER_MAX_LEGS, &reqs[i]))
      goto done;
  }
  for (size_t from = 0; from < n; from += POST_CHUNK) {
    size_t k = n - from < POST_CHUNK ? n - from : POST_CHUNK;
    eo.deadline_ms = dtx__srv_budget(c, eo.deadline_ms); /* what is left */
    (void)dtx_ledger_post_many(c->d->st, reqs + from, k, &eo, res + from);
    for (i = from; i < from + k; i++)
      json_array_append_new(
          out, res[i].rc ? dtx__srv_problem_json(res[i].rc, res[i].detail)
                         : json_pack("{s:i,s:O}", "status", 200, "entry",
                                     res[i].entry));
    dtx_ledger_results_clear(res + from, k);
  }
  dtx__srv_json(c, 200, json_pack("{s:O}", "results", out));
done:
  json_decref(out);
  free(reqs);
  free(legs);
  free(res);
}

/* post (a pending entry), void and reverse: the entry afterwards; a
 * resolved entry is 409 STATE (with the entry as it stands), an unknown
 * one 404. */
/* In full, or with "amounts" [{"account", "value"}...] and/or "post_id"
 * a partial post (docs/ledger.md, "Partial post of a hold"). */
void dtx__srv_h_ledger_post_pending(dtx__srv_ctx_t *c) {
  json_t *e = NULL, *am = dtx__srv_arg(c, "amounts"), *x;
  const char *pid = dtx__srv_arg_str(c, "post_id");
  dtx_ledger_leg_t legs[DTX_LEDGER_MAX_LEGS];
  size_t i, n = json_array_size(am);
  int rc;
  if (n > DTX_LEDGER_MAX_LEGS) {
    dtx__srv_bad(c, DTX_EINVAL, "\"amounts\" has at most %d legs",
                 DTX_LEDGER_MAX_LEGS);
    return;
  }
  json_array_foreach(am, i, x) {
    json_t *a = json_object_get(x, "account"), *v = json_object_get(x, "value");
    if (!json_is_object(x) || json_object_size(x) != 2 || !json_is_string(a) ||
        !json_is_integer(v)) {
      dtx__srv_bad(c, DTX_EINVAL, "amount %zu must be {\"account\": ID, "
                   "\"value\": int64}", i + 1);
      return;
    }
    legs[i] = (dtx_ledger_leg_t){json_string_value(a),
                                 (int64_t)json_integer_value(v)};
  }
  if (!am && !pid) {
    rc = dtx_ledger_entry_id_check(c->param[0]);
    if (!rc)
      rc = dtx_ledger_post_pending(c->d->st, c->param[0], &e);
  } else if (!(rc = dtx_ledger_partial_check(c->param[0], legs, n, pid))) {
    rc = dtx_ledger_post_partial(c->d->st, c->param[0], legs, n, pid, &e);
  }
  dtx__srv_one(c, rc, &e, "entry");
}

void dtx__srv_h_ledger_void(dtx__srv_ctx_t *c) {
  json_t *e = NULL;
  int rc = dtx_ledger_entry_id_check(c->param[0]);
  if (!rc)
    rc = dtx_ledger_void(c->d->st, c->param[0], &e);
  dtx__srv_one(c, rc, &e, "entry");
}

/* The library judges the balance and the holds (close.c): a balance or a
 * hold is 409 STATE naming it, a closed account's close comes back. */
void dtx__srv_h_ledger_account_close(dtx__srv_ctx_t *c) {
  dtx_exec_opts_t eo;
  json_t *e = NULL;
  int rc;
  if (deadline_arg(c, &eo))
    return;
  if (!(rc = dtx_ledger_account_id_check(c->param[0])))
    rc = dtx_ledger_account_close(c->d->st, c->param[0], &eo, &e);
  dtx__srv_one(c, rc, &e, NULL);
}

void dtx__srv_h_ledger_reverse(dtx__srv_ctx_t *c) {
  const char *new_id = dtx__srv_arg_str(c, "id");
  dtx_exec_opts_t eo;
  json_t *e = NULL;
  int rc;
  if (deadline_arg(c, &eo))
    return;
  if (!(rc = dtx_ledger_entry_id_check(c->param[0])) && new_id)
    rc = dtx_ledger_entry_id_check(new_id);
  if (!rc)
    rc = dtx_ledger_reverse(c->d->st, c->param[0], new_id, &eo, &e);
  dtx__srv_one(c, rc, &e, NULL);
}

void dtx__srv_h_ledger_get(dtx__srv_ctx_t *c) {
  json_t *e = NULL;
  dtx__srv_one(c, dtx_ledger_get(c->d->st, c->param[0], &e), &e, NULL);
}

/* ?account= lists an account's entries; ?ref= and/or ?meta_filter= (a
 * JSON filter over the meta) finds entries as `ledger entries` does. */
void dtx__srv_h_ledger_list(dtx__srv_ctx_t *c) {
  dtx__srv_list_t l;
  json_t *items = NULL, *mf = NULL;
  char ref[DTX_LEDGER_MAX_REF + 2], *prefix = NULL;
  char *mtext = malloc(2 * DTX_LEDGER_MAX_META);
  int bad = 0, rc;
  if (!mtext) {
    dtx__srv_bad(c, DTX_ENOMEM, "ledger entries");
    return;
  }
  const char *r = dtx__srv_query(c, "ref", ref, sizeof ref, &bad);
  const char *m = bad ? NULL
                      : dtx__srv_query(c, "meta_filter", mtext,
                                       2 * DTX_LEDGER_MAX_META, &bad);
  if (bad)
    goto done;
  if (m && dtx_json_parse(m, &mf)) {
    dtx__srv_bad(c, DTX_EINVAL, "meta_filter: %s", dtx_errdetail());
    goto done;
  }
  if (!r && !m) {
    if (dtx__srv_list_page(c, &l, "ledger entries?", "account", 160) == 0) {
      rc = dtx_ledger_list(c->d->st, l.filter, &l.page, &items);
      dtx__srv_list_answer(c, &l, "entries", rc, items);
    }
    goto done;
  }
  /* The cursor is bound to what it pages: the ref and the filter whole,
   * each after its length (a ref holding "&meta_filter=" or a filter
   * longer than a fixed buffer cannot make two queries share a cursor). */
  size_t rn = r ? strlen(r) : 0, mn = m ? strlen(m) : 0;
  prefix = malloc(rn + mn + 64);
  if (!prefix) {
    dtx__srv_bad(c, DTX_ENOMEM, "ledger entries");
    goto done;
  }
  snprintf(prefix, rn + mn + 64, "ledger entries?ref=%zu:%s&meta_filter=%zu:%s&",
           rn, r ? r : "", mn, m ? m : "");
  if (dtx__srv_list_page(c, &l, prefix, "account", 160))
    goto done;
  if (l.filter) {
    dtx__srv_bad(c, DTX_EINVAL, "give account, or ref and/or meta_filter");
    goto done;
  }
  rc = dtx_ledger_entries(c->d->st, r, mf, &l.page, &items);
  dtx__srv_list_answer(c, &l, "entries", rc, items);
done:
  json_decref(mf);
  free(prefix);
  free(mtext);
}

/* One-way (docs/ledger.md, "Metadata and references"): an admin's. */
void dtx__srv_h_ledger_unique_refs(dtx__srv_ctx_t *c) {
  int rc = dtx_ledger_unique_refs(c->d->st);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:b}", "unique_refs", 1));
}
