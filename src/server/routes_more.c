/* routes_more.c -- doctxd's sync, order and version routes: one route per
 * subcommand of `doctx sync`, `doctx order` and `doctx version`
 * (src/cli/cmd_sync.c, cmd_order.c, cmd_version.c; docs/sync.md,
 * orders.md, versions.md), in the shape of the other areas:
 *   POST /v1/AREA/{ID}/SUBCOMMAND   a subcommand on one named thing
 *   POST /v1/AREA/SUBCOMMAND        one on none (repair, gc) or many
 *   GET  /v1/AREA/{ID}              show (get)
 *   GET  /v1/AREA                   list
 * The body's fields are the subcommand's options ('-' written '_'); the
 * answer is the JSON the command prints.  The library checks every
 * argument before it writes (dtx_order_req_check, dtx_order_id_check,
 * dtx_version_put_req_check, and the sync calls' own checks), so a
 * refused request records nothing.  Repair and gc are recovery and
 * retention passes: they take the admin scope, as /v1/admin/recover. */
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The executor options (--owner, --lease-ms, --deadline-ms), with the
 * CLI's ranges: lease >= 1, deadline >= 0.  0, or answered. */
static int exec_opts(dtx__srv_ctx_t *c, dtx_exec_opts_t *eo) {
  *eo = (dtx_exec_opts_t){.owner = dtx__srv_arg_str(c, "owner"),
                          .lease_ms = dtx__srv_arg_int(c, "lease_ms", 0),
                          .deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  if ((dtx__srv_arg(c, "lease_ms") && eo->lease_ms < 1) ||
      eo->deadline_ms < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "lease_ms must be >= 1 and deadline_ms >= 0");
    return -1;
  }
  eo->deadline_ms = dtx__srv_budget(c, eo->deadline_ms);
  return 0;
}

/* A required string field, or an answered 400. */
static const char *need_str(dtx__srv_ctx_t *c, const char *name) {
  const char *v = dtx__srv_arg_str(c, name);
  if (!v)
    dtx__srv_bad(c, DTX_EINVAL, "field '%s' is required", name);
  return v;
}

/* ---- sync (docs/sync.md) ------------------------------------------------- */

void dtx__srv_h_sync_rule(dtx__srv_ctx_t *c) {
  dtx_sync_rule_t r = {.name = c->param[0]};
  json_t *doc = NULL;
  if (!(r.master = need_str(c, "master")) ||
      !(r.dependents = need_str(c, "dependents")) ||
      !(r.link = need_str(c, "link")) || !(r.copy = need_str(c, "copy")))
    return;
  dtx__srv_one(c, dtx_sync_rule_define(c->d->st, &r, &doc), &doc, NULL);
}

void dtx__srv_h_sync_update(dtx__srv_ctx_t *c) {
  dtx_exec_opts_t eo;
  const char *master_id;
  json_t *res = NULL, *u = dtx__srv_arg(c, "update");
  if (exec_opts(c, &eo) || !(master_id = need_str(c, "master_id")))
    return;
  if (!u) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'update' is required");
    return;
  }
  dtx__srv_one(c,
               dtx_sync_update(c->d->st, c->param[0], master_id, u, &eo, &res),
               &res, "result");
}

void dtx__srv_h_sync_show(dtx__srv_ctx_t *c) {
  json_t *doc = NULL;
  dtx__srv_one(c, dtx_sync_rule_get(c->d->st, c->param[0], &doc), &doc, NULL);
}

void dtx__srv_h_sync_repair(dtx__srv_ctx_t *c) {
  dtx_recover_opts_t ro = {
      .older_than_ms = dtx__srv_arg_int(c, "older_than_ms", -1),
      .deadline_ms = dtx__srv_arg_int(c, "deadline_ms", 0)};
  json_t *sum = NULL;
  if ((dtx__srv_arg(c, "older_than_ms") && ro.older_than_ms < 0) ||
      ro.deadline_ms < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "older_than_ms and deadline_ms must be >= 0");
    return;
  }
  ro.deadline_ms = dtx__srv_budget(c, ro.deadline_ms);
  dtx__srv_one(c, dtx_sync_repair(c->d->st, &ro, &sum), &sum, "summary");
}

/* ---- orders (docs/orders.md) --------------------------------------------- */

void dtx__srv_h_order_create(dtx__srv_ctx_t *c) {
  dtx_order_req_t req = {.trade_id = c->param[0],
                         .account = dtx__srv_arg_str(c, "account"),
                         .amount = dtx__srv_arg_int(c, "amount", 0),
                         .settlement = dtx__srv_arg_str(c, "settlement")};
  json_t *out = NULL;
  if (!req.account || !dtx__srv_arg(c, "amount")) {
    dtx__srv_bad(c, DTX_EINVAL, "fields 'account' and 'amount' are required");
    return;
  }
  int rc = dtx_order_req_check(&req);
  if (!rc)
    rc = dtx_order_create(c->d->st, &req, &out);
  dtx__srv_one(c, rc, &out, "order");
}

void dtx__srv_h_order_confirm(dtx__srv_ctx_t *c) {
  dtx_exec_opts_t eo;
  json_t *out = NULL;
  if (exec_opts(c, &eo))
    return;
  int rc = dtx_order_id_check(c->param[0]);
  if (!rc)
    rc = dtx_order_confirm(c->d->st, c->param[0], &eo, &out);
  dtx__srv_one(c, rc, &out, "order");
}

/* confirm of several trade ids (`doctx order confirm ID...`): every id is
 * checked before any is confirmed (a malformed one: 400 naming it, none
 * confirmed), then one dtx_order_confirm_many call and one result per id,
 * in order: {"status":200,"order"} or a problem object (with "order"
 * when there is one). */
void dtx__srv_h_order_confirm_many(dtx__srv_ctx_t *c) {
  json_t *ids = dtx__srv_arg(c, "trade_ids"), *v, *out = NULL;
  size_t n = json_array_size(ids), i;
  dtx_exec_opts_t eo;
  if (!ids || n == 0 || n > DTX__SRV_MAX_BATCH) {
    dtx__srv_bad(c, DTX_EINVAL, "trade_ids holds 1..%d trade ids",
                 DTX__SRV_MAX_BATCH);
    return;
  }
  if (exec_opts(c, &eo))
    return;
  const char **tids = calloc(n, sizeof *tids);
  dtx_order_result_t *res = calloc(n, sizeof *res);
  if (!tids || !res || !(out = json_array())) {
    dtx__srv_bad(c, DTX_ENOMEM, "a batch of %zu orders", n);
    goto done;
  }
  json_array_foreach(ids, i, v) {
    int rc = json_is_string(v) ? dtx_order_id_check(json_string_value(v))
                               : DTX_EINVAL;
    if (rc) {
      dtx__srv_bad(c, DTX_EINVAL, "trade_ids[%zu]: %s; nothing confirmed", i,
                   json_is_string(v) ? dtx_errdetail() : "not a string");
      goto done;
    }
    tids[i] = json_string_value(v);
  }
  (void)dtx_order_confirm_many(c->d->st, tids, n, &eo, res);
  for (i = 0; i < n; i++) {
    json_t *r;
    if (res[i].rc) {
      r = dtx__srv_problem_json(res[i].rc, res[i].detail);
      if (res[i].order)
        json_object_set(r, "order", res[i].order);
    } else {
      r = json_pack("{s:i,s:O}", "status", 200, "order", res[i].order);
    }
    json_array_append_new(out, r);
  }
  dtx_order_results_clear(res, n);
  dtx__srv_json(c, 200, json_pack("{s:O}", "results", out));
done:
  json_decref(out);
  free(tids);
  free(res);
}

void dtx__srv_h_order_cancel(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  int rc = dtx_order_id_check(c->param[0]);
  if (!rc)
    rc = dtx_order_cancel(c->d->st, c->param[0], &out);
  dtx__srv_one(c, rc, &out, "order");
}

void dtx__srv_h_order_get(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  dtx__srv_one(c, dtx_order_get(c->d->st, c->param[0], &out), &out, NULL);
}

void dtx__srv_h_order_list(dtx__srv_ctx_t *c) {
  dtx__srv_list_t l;
  json_t *items = NULL;
  if (dtx__srv_list_page(c, &l, "orders?", "state", 64))
    return;
  int rc = dtx_order_list(c->d->st, l.filter, &l.page, &items);
  dtx__srv_list_answer(c, &l, "orders", rc, items);
}

/* ---- versions (docs/versions.md) ----------------------------------------- */

/* put: "root", "child" {KEY: DOC} (--child KEY=DOC), "remove_child"
 * [KEY] (--remove-child KEY), "expect_version" (>= 0). */
void dtx__srv_h_version_put(dtx__srv_ctx_t *c) {
  json_t *set = dtx__srv_arg(c, "child"), *rm = dtx__srv_arg(c, "remove_child");
  json_t *res = NULL, *v;
  const char *key;
  size_t n = json_object_size(set) + json_array_size(rm), i;
  dtx_version_put_req_t req = {
      .item = c->param[0],
      .root = dtx__srv_arg(c, "root"),
      .expect_version = dtx__srv_arg_int(c, "expect_version", DTX_VERSION_ANY)};
  if (!req.root) {
    dtx__srv_bad(c, DTX_EINVAL, "field 'root' is required");
    return;
  }
  if (dtx__srv_arg(c, "expect_version") && req.expect_version < 0) {
    dtx__srv_bad(c, DTX_EINVAL, "expect_version must be >= 0");
    return;
  }
  if (n > DTX_VERSION_MAX_CHILDREN) {
    dtx__srv_bad(c, DTX_EINVAL, "at most %d child changes",
                 DTX_VERSION_MAX_CHILDREN);
    return;
  }
  dtx_version_child_t *ch = calloc(n + 1, sizeof *ch);
  if (!ch) {
    dtx__srv_bad(c, DTX_ENOMEM, "version put");
    return;
  }
  json_object_foreach(set, key, v) {
    ch[req.nchildren++] = (dtx_version_child_t){.key = key, .doc = v};
  }
  json_array_foreach(rm, i, v) {
    if (!json_is_string(v)) {
      dtx__srv_bad(c, DTX_EINVAL,
                   "remove_child[%zu] must be a key (a "
                   "string)",
                   i);
      free(ch);
      return;
    }
    ch[req.nchildren++] = (dtx_version_child_t){.key = json_string_value(v)};
  }
  req.children = ch;
  int rc = dtx_version_put_req_check(&req);
  if (!rc)
    rc = dtx_version_put(c->d->st, &req, NULL, &res);
  free(ch);
  dtx__srv_one(c, rc, &res, NULL);
}

void dtx__srv_h_version_get(dtx__srv_ctx_t *c) {
  int64_t ver;
  json_t *out = NULL;
  char buf[32];
  int bad = 0;
  int given = dtx__srv_query(c, "version", buf, sizeof buf, &bad) != NULL;
  if (bad || dtx__srv_qint(c, "version", DTX_VERSION_LATEST, &ver))
    return;
  if (given && ver < 1) {
    dtx__srv_bad(c, DTX_EINVAL, "version must be >= 1");
    return;
  }
  dtx__srv_one(c, dtx_version_get(c->d->st, c->param[0], ver, &out), &out,
               NULL);
}

void dtx__srv_h_version_history(dtx__srv_ctx_t *c) {
  json_t *out = NULL;
  int rc = dtx_version_history(c->d->st, c->param[0], &out);
  if (rc)
    dtx__srv_one(c, rc, &out, NULL);
  else
    dtx__srv_json(c, 200, json_pack("{s:o}", "versions", out));
}

void dtx__srv_h_version_gc(dtx__srv_ctx_t *c) {
  dtx_version_gc_opts_t o = {.keep =
                                 dtx__srv_arg_int(c, "keep", DTX_VERSION_KEEP),
                             .grace_ms = dtx__srv_arg_int(c, "grace_ms", -1),
                             .deadline_ms = dtx__srv_budget(c, 0)};
  json_t *sum = NULL;
  if (o.keep < 1 || (dtx__srv_arg(c, "grace_ms") && o.grace_ms < 0)) {
    dtx__srv_bad(c, DTX_EINVAL, "keep must be >= 1 and grace_ms >= 0");
    return;
  }
  dtx__srv_one(c, dtx_version_gc(c->d->st, &o, &sum), &sum, "summary");
}
