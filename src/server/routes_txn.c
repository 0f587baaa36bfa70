/* routes_txn.c -- doctxd's account, transfer, admin and operations routes.
 * Each calls the library as `doctx account`, `doctx transfer`, `doctx
 * audit` and `doctx recover` do (src/cli/cmd_account.c, cmd_transfer.c,
 * docs/cli.md); the library's own checks (dtx_account_check,
 * dtx_transfer_req_check) run before anything is written.  A transfer
 * with a client id is idempotent in the library: the same id with the
 * same parameters answers the same transfer, so a client may retry any
 * of these writes over a flaky network. */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- accounts ------------------------------------------------------------ */

void dtx__srv_h_account_create(dtx__srv_ctx_t *c) {
  dtx_account_opts_t ao = {.balance = dtx__srv_arg_int(c, "balance", 0)};
  json_t *min = dtx__srv_arg(c, "min_balance"), *acct = NULL;
  const char *id = dtx__srv_arg_str(c, "id");
  int rc;
  if (!id) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'id' is required");
    return;
  }
  if (json_is_string(min)) {
    if (strcmp(json_string_value(min), "none") != 0) {
      dtx__srv_bad(c, DTX_EINVAL, "min_balance is an integer or \"none\"");
      return;
    }
    ao.no_min_balance = 1;
  } else if (min) {
    ao.min_balance = (int64_t)json_integer_value(min);
  }
  if ((rc = dtx_account_check(id, &ao)) ||
      (rc = dtx_account_create(c->d->st, id, &ao, &acct)))
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 201, acct);
}

void dtx__srv_h_account_get(dtx__srv_ctx_t *c) {
  json_t *acct = NULL;
  int rc = dtx_account_get(c->d->st, c->param[0], &acct);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, acct);
}

void dtx__srv_h_account_list(dtx__srv_ctx_t *c) {
  dtx__srv_list_t l;
  json_t *items = NULL;
  if (dtx__srv_list_page(c, &l, "accounts", NULL, 0))
    return;
  int rc = dtx_account_list(c->d->st, &l.page, &items);
  dtx__srv_list_answer(c, &l, "accounts", rc, items);
}

/* ---- transfers ----------------------------------------------------------- */

/* A transfer request from an object's fields (shape only; the library
 * checks the values).  0, or answered naming where. */
static int transfer_req(dtx__srv_ctx_t *c, json_t *o, const char *where,
                        dtx_transfer_req_t *req) {
  json_t *id = json_object_get(o, "id"), *from = json_object_get(o, "from");
  json_t *to = json_object_get(o, "to"), *amount = json_object_get(o, "amount");
  if (!json_is_string(from) || !json_is_string(to)) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "%s\"from\" and \"to\" must be account ids "
                 "(strings)",
                 where);
    return -1;
  }
  if (!json_is_integer(amount)) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "%s\"amount\" must be a positive integer in "
                 "minor units",
                 where);
    return -1;
  }
  if (id && !json_is_string(id)) {
    dtx__srv_bad(c, DTX_EINVAL, "%s\"id\" must be a string", where);
    return -1;
  }
  *req = (dtx_transfer_req_t){.id = json_string_value(id),
                              .from = json_string_value(from),
                              .to = json_string_value(to),
                              .amount = (int64_t)json_integer_value(amount)};
  int rc = dtx_transfer_req_check(req);
  if (rc) {
    dtx__srv_bad(c, rc, "%s%s", where, dtx_errdetail());
    return -1;
  }
  return 0;
}

/* A declined transfer (state failed, its reason in the document) is an
 * answer, not an error: 200, as `doctx transfer` prints it.  An id reused
 * with other parameters is 409, a missing account 404. */
void dtx__srv_h_transfer(dtx__srv_ctx_t *c) {
  dtx_transfer_req_t req;
  dtx_exec_opts_t eo = {.deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  json_t *tx = NULL;
  if (eo.deadline_ms < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "deadline_ms must be >= 0");
    return;
  }
  eo.deadline_ms = dtx__srv_budget(c, eo.deadline_ms);
  if (transfer_req(c, c->body, "", &req))
    return;
  int rc = dtx__srv_arg_bool(c, "async")
               ? dtx_transfer_submit(c->d->st, &req, &tx)
               : dtx_transfer_execute(c->d->st, &req, &eo, &tx);
  if (rc) {
    json_t *extra =
        tx && rc != DTX_ENOACCOUNT ? json_pack("{s:O}", "transfer", tx) : NULL;
    dtx__srv_fail(c, rc, extra);
    json_decref(tx);
  } else {
    dtx__srv_json(c, 200, tx);
  }
}

#define BATCH_CHUNK 64

/* Every item is checked before any runs (a bad one: 400 naming it,
 * nothing run); then one result per item, in order: the transfer, or a
 * problem object. */
void dtx__srv_h_transfer_batch(dtx__srv_ctx_t *c) {
  json_t *items = dtx__srv_arg(c, "transfers"), *v, *out = NULL;
  dtx_exec_opts_t eo = {.deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  size_t n = json_array_size(items), i;
  char where[48];
  if (!items || n == 0 || n > DTX__SRV_MAX_BATCH) {
    dtx__srv_bad(c, DTX_EINVAL, "transfers holds 1..%d transfers",
                 DTX__SRV_MAX_BATCH);
    return;
  }
  if (eo.deadline_ms < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "deadline_ms must be >= 0");
    return;
  }
  eo.deadline_ms = dtx__srv_budget(c, eo.deadline_ms);
  dtx_transfer_req_t *reqs = calloc(n, sizeof *reqs);
  dtx_transfer_result_t *res = calloc(n, sizeof *res);
  if (!reqs || !res || !(out = json_array())) {
    dtx__srv_bad(c, DTX_ENOMEM, "a batch of %zu transfers", n);
    goto done;
  }
  json_array_foreach(items, i, v) {
    snprintf(where, sizeof where, "transfers[%zu]: ", i);
    if (dtx__srv_item_check(
            c, v, where,
            "a transfer is an object {\"from\", \"to\", \"amount\"[, \"id\"]}",
            (const char *const[]){"from", "to", "amount", "id", NULL}) ||
        transfer_req(c, v, where, &reqs[i]))
      goto done;
  }
  for (size_t from = 0; from < n; from += BATCH_CHUNK) {
    size_t k = n - from < BATCH_CHUNK ? n - from : BATCH_CHUNK;
    eo.deadline_ms = dtx__srv_budget(c, eo.deadline_ms); /* what is left */
    (void)dtx_transfer_execute_many(c->d->st, reqs + from, k, &eo, res + from);
    for (i = from; i < from + k; i++) {
      json_t *r;
      if (res[i].rc) {
        r = dtx__srv_problem_json(res[i].rc, res[i].detail);
        if (res[i].tx && res[i].rc != DTX_ENOACCOUNT)
          json_object_set(r, "transfer", res[i].tx);
      } else {
        r = json_pack("{s:i,s:O}", "status", 200, "transfer", res[i].tx);
      }
      json_array_append_new(out, r);
    }
    dtx_transfer_results_clear(res + from, k);
  }
  dtx__srv_json(c, 200, json_pack("{s:O}", "results", out));
done:
  json_decref(out);
  free(reqs);
  free(res);
}

void dtx__srv_h_transfer_get(dtx__srv_ctx_t *c) {
  json_t *tx = NULL;
  int rc = dtx_transfer_get(c->d->st, c->param[0], &tx);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, tx);
}

void dtx__srv_h_transfer_list(dtx__srv_ctx_t *c) {
  dtx__srv_list_t l;
  json_t *items = NULL;
  if (dtx__srv_list_page(c, &l, "transfers?", "state", 64))
    return;
  int rc = dtx_transfer_list(c->d->st, l.filter, &l.page, &items);
  dtx__srv_list_answer(c, &l, "transfers", rc, items);
}

void dtx__srv_h_transfer_cancel(dtx__srv_ctx_t *c) {
  json_t *tx = NULL;
  int rc = dtx_transfer_cancel(c->d->st, c->param[0], &tx);
  if (rc) {
    json_t *extra =
        tx && rc != DTX_ENOTFOUND ? json_pack("{s:O}", "transfer", tx) : NULL;
    dtx__srv_fail(c, rc, extra); /* after commit: STATE, 409 */
    json_decref(tx);
  } else {
    dtx__srv_json(c, 200, tx);
  }
}

/* ---- admin ----------------------------------------------------------------
 */

/* The audit's report plus "clean": 200 whether clean or not (the audit
 * ran; what it found is the answer).  Only a store that keeps failing is
 * an error. */
void dtx__srv_h_audit(dtx__srv_ctx_t *c) {
  json_t *report = NULL;
  int rc = dtx_audit(c->d->st,
                     dtx__srv_arg_bool(c, "settled") ? DTX_AUDIT_SETTLED : 0,
                     &report);
  if (rc && rc != DTX_EAUDIT) {
    json_decref(report);
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  if (!report)
    report = json_object();
  json_object_set_new(report, "clean", json_boolean(rc == 0));
  dtx__srv_json(c, 200, report);
}

void dtx__srv_h_recover(dtx__srv_ctx_t *c) {
  dtx_recover_opts_t ro = {
      .older_than_ms = dtx__srv_arg_int(c, "older_than_ms", -1),
      .tombstone_ttl_ms = dtx__srv_arg_int(c, "tombstone_ttl_ms", 0),
      .deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0),
      .retention_ms = dtx__srv_arg_int(c, "retention_ms", 0),
      .events_keep_ms = dtx__srv_arg_int(c, "events_keep_ms", 0),
      .events_keep = dtx__srv_arg_int(c, "events_keep", 0),
      .keep_dead_ms = dtx__srv_arg_int(c, "keep_dead_ms", 0)};
  json_t *summary = NULL;
  if (ro.tombstone_ttl_ms < 0 || ro.deadline_ms < 0 || ro.retention_ms < 0 ||
      ro.events_keep_ms < 0 || ro.events_keep < 0 || ro.keep_dead_ms < 0) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "tombstone_ttl_ms, deadline_ms, retention_ms, "
                 "events_keep_ms, events_keep and keep_dead_ms must be >= 0");
    return;
  }
  ro.deadline_ms = dtx__srv_budget(c, ro.deadline_ms);
  int rc = dtx_recover(c->d->st, &ro, &summary);
  dtx__srv_metrics_recovered(c->d, summary);
  if (rc)
    dtx__srv_fail(c, rc,
                  summary ? json_pack("{s:o}", "summary", summary) : NULL);
  else
    dtx__srv_json(c, 200, summary ? summary : json_object());
}

/* ---- operations -------------------------------------------------------------
 */

void dtx__srv_h_healthz(dtx__srv_ctx_t *c) {
  dtx__srv_json(c, 200, json_pack("{s:s}", "status", "ok"));
}

/* Ready while not draining and the store answers a count (one round trip
 * on Redis, a read on SQLite; it creates nothing). */
void dtx__srv_h_readyz(dtx__srv_ctx_t *c) {
  int64_t n;
  if (atomic_load(&c->d->draining)) {
    dtx__srv_problem(c->resp, 503, "DRAINING", "not ready",
                     "the server is draining");
    c->resp->retry_after = 1;
    return;
  }
  int rc = dtx_store_count(c->d->st, "doctxd.readyz", NULL, &n);
  if (rc)
    dtx__srv_fail(c, rc, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:s}", "status", "ready"));
}

void dtx__srv_h_metrics(dtx__srv_ctx_t *c) {
  size_t len = 0;
  char *text = dtx__srv_metrics_text(c->d, &len);
  if (!text) {
    dtx__srv_bad(c, DTX_ENOMEM, "metrics");
    return;
  }
  free(c->resp->body);
  c->resp->status = 200;
  c->resp->ctype = "text/plain; version=0.0.4; charset=utf-8";
  c->resp->body = text;
  c->resp->body_len = len;
}
