/* routes.c -- THE route table of doctxd: method, pattern ({name} is a path
 * parameter, decoded and checked by the dispatcher), the scope a token
 * needs, the handler, the body's fields with their types (anything else
 * is refused by name) and the query keys a route takes.  A new route is
 * one line here plus its handler.  Spelled as docs/server.md lists them;
 * a path not here answers 404, a known path with another method 405. */
#include "server/server.h"

#define R DTX__SRV_SCOPE_READ
#define W DTX__SRV_SCOPE_WRITE
#define A DTX__SRV_SCOPE_ADMIN
#define M DTX__SRV_SCOPE_METRICS
#define FIELDS(...) ((const dtx__srv_field_t[]){__VA_ARGS__, {0}})
#define NOFIELDS ((const dtx__srv_field_t[]){{0}})
/* A route that lists no query keys takes none: the omitted last member is
 * NULL on purpose, one line per route. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

const dtx__srv_route_t dtx__srv_routes[] = {
    /* documents (the CLI's document commands, docs/cli.md) */
    {"POST", "/v1/c/{coll}/find", R, dtx__srv_h_find,
     FIELDS({"filter", F_OBJ}, {"sort", F_OBJ}, {"limit", F_INT},
            {"skip", F_INT}, {"projection", F_OBJ}, {"after", F_STR})},
    {"POST", "/v1/c/{coll}/count", R, dtx__srv_h_count,
     FIELDS({"filter", F_OBJ})},
    {"POST", "/v1/c/{coll}/insert", W, dtx__srv_h_insert,
     FIELDS({"docs", F_ARR}, {"bypass_validation", F_BOOL})},
    {"POST", "/v1/c/{coll}/update", W, dtx__srv_h_update,
     FIELDS({"filter", F_OBJ}, {"update", F_OBJ}, {"many", F_BOOL},
            {"upsert", F_BOOL}, {"array_filters", F_ARR},
            {"bypass_validation", F_BOOL}, {"fence", F_STR})},
    {"POST", "/v1/c/{coll}/find-and-modify", W, dtx__srv_h_fam,
     FIELDS({"filter", F_OBJ}, {"update", F_OBJ}, {"sort", F_OBJ},
            {"projection", F_OBJ}, {"new", F_BOOL}, {"upsert", F_BOOL},
            {"array_filters", F_ARR}, {"bypass_validation", F_BOOL},
            {"fence", F_STR})},
    {"POST", "/v1/c/{coll}/delete", W, dtx__srv_h_delete,
     FIELDS({"filter", F_OBJ}, {"many", F_BOOL}, {"bypass_validation", F_BOOL},
            {"fence", F_STR})},
    {"POST", "/v1/c/{coll}/bulk", W, dtx__srv_h_bulk, FIELDS({"ops", F_ARR})},
    {"POST", "/v1/c/{coll}/aggregate", R, dtx__srv_h_aggregate,
     FIELDS({"pipeline", F_ARR})},
    {"GET", "/v1/c/{coll}/indexes", R, dtx__srv_h_indexes, NULL},
    {"POST", "/v1/c/{coll}/indexes", W, dtx__srv_h_index_create,
     FIELDS({"keys", F_OBJ}, {"unique", F_BOOL}, {"sparse", F_BOOL},
            {"name", F_STR}, {"bypass_validation", F_BOOL})},
    /* accounts and transfers (docs/transfers.md) */
    {"POST", "/v1/accounts", W, dtx__srv_h_account_create,
     FIELDS({"id", F_STR}, {"balance", F_INT}, {"min_balance", F_INT_OR_STR})},
    {"GET", "/v1/accounts/{id}", R, dtx__srv_h_account_get, NULL},
    {"GET", "/v1/accounts", R, dtx__srv_h_account_list, NULL, "after,limit"},
    {"POST", "/v1/transfers", W, dtx__srv_h_transfer,
     FIELDS({"id", F_STR}, {"from", F_STR}, {"to", F_STR}, {"amount", F_INT},
            {"async", F_BOOL}, {"deadline_ms", F_INT})},
    {"POST", "/v1/transfers/batch", W, dtx__srv_h_transfer_batch,
     FIELDS({"transfers", F_ARR}, {"deadline_ms", F_INT})},
    {"GET", "/v1/transfers/{id}", R, dtx__srv_h_transfer_get, NULL},
    {"GET", "/v1/transfers", R, dtx__srv_h_transfer_list, NULL,
     "state,after,limit"},
    {"POST", "/v1/transfers/{id}/cancel", W, dtx__srv_h_transfer_cancel,
     NOFIELDS},
    /* locks (docs/locks.md; `doctx lock`) */
    {"POST", "/v1/locks/{name}/acquire", W, dtx__srv_h_lock_acquire,
     FIELDS({"ttl_ms", F_INT}, {"owner", F_STR}, {"wait_ms", F_INT},
            {"deadline_ms", F_INT})},
    {"POST", "/v1/locks/{name}/renew", W, dtx__srv_h_lock_renew,
     FIELDS({"token", F_INT}, {"ttl_ms", F_INT})},
    {"POST", "/v1/locks/{name}/release", W, dtx__srv_h_lock_release,
     FIELDS({"token", F_INT})},
    {"GET", "/v1/locks/{name}", R, dtx__srv_h_lock_get, NULL},
    {"GET", "/v1/locks", R, dtx__srv_h_lock_list, NULL, "after,limit"},
    {"POST", "/v1/admin/locks/{name}/release", A, dtx__srv_h_lock_force_release,
     FIELDS({"token", F_INT})},
    /* ledger (docs/ledger.md; `doctx ledger`) */
    {"POST", "/v1/ledger/accounts", W, dtx__srv_h_ledger_account_create,
     FIELDS({"id", F_STR}, {"min_balance", F_INT_OR_STR})},
    {"POST", "/v1/ledger/accounts/{id}/limit", W,
     dtx__srv_h_ledger_account_limit, FIELDS({"min_balance", F_INT_OR_STR})},
    {"GET", "/v1/ledger/accounts/{id}/balance", R, dtx__srv_h_ledger_balance,
     NULL, "at_seq"},
    {"GET", "/v1/ledger/accounts/{id}/statement", R,
     dtx__srv_h_ledger_statement, NULL, "from_seq,after,limit"},
    {"POST", "/v1/ledger/entries", W, dtx__srv_h_ledger_post,
     FIELDS({"legs", F_ARR}, {"id", F_STR}, {"pending", F_BOOL},
            {"timeout_ms", F_INT}, {"deadline_ms", F_INT})},
    {"POST", "/v1/ledger/entries/batch", W, dtx__srv_h_ledger_batch,
     FIELDS({"entries", F_ARR}, {"deadline_ms", F_INT})},
    {"POST", "/v1/ledger/entries/{id}/post", W, dtx__srv_h_ledger_post_pending,
     NOFIELDS},
    {"POST", "/v1/ledger/entries/{id}/void", W, dtx__srv_h_ledger_void,
     NOFIELDS},
    {"POST", "/v1/ledger/entries/{id}/reverse", W, dtx__srv_h_ledger_reverse,
     FIELDS({"id", F_STR}, {"deadline_ms", F_INT})},
    {"GET", "/v1/ledger/entries/{id}", R, dtx__srv_h_ledger_get, NULL},
    {"GET", "/v1/ledger/entries", R, dtx__srv_h_ledger_list, NULL,
     "account,after,limit"},
    /* sync, orders, versions (docs/sync.md, orders.md, versions.md) */
    {"POST", "/v1/sync/{name}/rule", W, dtx__srv_h_sync_rule,
     FIELDS({"master", F_STR}, {"dependents", F_STR}, {"link", F_STR},
            {"copy", F_STR})},
    {"POST", "/v1/sync/{name}/update", W, dtx__srv_h_sync_update,
     FIELDS({"master_id", F_STR}, {"update", F_OBJ}, {"lease_ms", F_INT},
            {"owner", F_STR}, {"deadline_ms", F_INT})},
    {"GET", "/v1/sync/{name}", R, dtx__srv_h_sync_show, NULL},
    {"POST", "/v1/sync/repair", A, dtx__srv_h_sync_repair,
     FIELDS({"older_than_ms", F_INT}, {"deadline_ms", F_INT})},
    {"POST", "/v1/orders/{trade_id}/create", W, dtx__srv_h_order_create,
     FIELDS({"account", F_STR}, {"amount", F_INT}, {"settlement", F_STR})},
    {"POST", "/v1/orders/{trade_id}/confirm", W, dtx__srv_h_order_confirm,
     FIELDS({"lease_ms", F_INT}, {"owner", F_STR}, {"deadline_ms", F_INT})},
    {"POST", "/v1/orders/confirm", W, dtx__srv_h_order_confirm_many,
     FIELDS({"trade_ids", F_ARR}, {"lease_ms", F_INT}, {"owner", F_STR},
            {"deadline_ms", F_INT})},
    {"POST", "/v1/orders/{trade_id}/cancel", W, dtx__srv_h_order_cancel,
     NOFIELDS},
    {"GET", "/v1/orders/{trade_id}", R, dtx__srv_h_order_get, NULL},
    {"GET", "/v1/orders", R, dtx__srv_h_order_list, NULL, "state,after,limit"},
    {"POST", "/v1/versions/{item}/put", W, dtx__srv_h_version_put,
     FIELDS({"root", F_OBJ}, {"child", F_OBJ}, {"remove_child", F_ARR},
            {"expect_version", F_INT})},
    {"GET", "/v1/versions/{item}", R, dtx__srv_h_version_get, NULL, "version"},
    {"GET", "/v1/versions/{item}/history", R, dtx__srv_h_version_history, NULL},
    {"POST", "/v1/versions/gc", A, dtx__srv_h_version_gc,
     FIELDS({"keep", F_INT}, {"grace_ms", F_INT})},
    /* admin */
    {"POST", "/v1/admin/audit", A, dtx__srv_h_audit,
     FIELDS({"settled", F_BOOL})},
    {"POST", "/v1/admin/recover", A, dtx__srv_h_recover,
     FIELDS({"older_than_ms", F_INT}, {"tombstone_ttl_ms", F_INT},
            {"deadline_ms", F_INT}, {"retention_ms", F_INT})},
    /* operations */
    {"GET", "/healthz", DTX__SRV_SCOPE_NONE, dtx__srv_h_healthz, NULL},
    {"GET", "/readyz", DTX__SRV_SCOPE_NONE, dtx__srv_h_readyz, NULL},
    {"GET", "/metrics", M, dtx__srv_h_metrics, NULL},
};
const size_t dtx__srv_nroutes =
    sizeof dtx__srv_routes / sizeof dtx__srv_routes[0];
