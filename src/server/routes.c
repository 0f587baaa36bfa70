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
    /* the job queue (docs/jobs.md; routes_job.c) */
    {"POST", "/v1/queues/{q}/jobs", W, dtx__srv_h_job_add,
     FIELDS({"type", F_STR}, {"payload", F_ANY}, {"id", F_STR},
            {"priority", F_INT}, {"delay_ms", F_INT}, {"max_attempts", F_INT},
            {"backoff_ms", F_INT}, {"unique_key", F_STR})},
    {"GET", "/v1/queues/{q}/jobs", R, dtx__srv_h_job_list, NULL,
     "state,after,limit"},
    {"POST", "/v1/queues/{q}/claim", W, dtx__srv_h_job_claim,
     FIELDS({"n", F_INT}, {"lease_ms", F_INT}, {"owner", F_STR})},
    {"GET", "/v1/queues/{q}/stats", R, dtx__srv_h_job_stats, NULL},
    {"GET", "/v1/jobs/{id}", R, dtx__srv_h_job_get, NULL},
    {"POST", "/v1/jobs/{id}/heartbeat", W, dtx__srv_h_job_heartbeat,
     FIELDS({"epoch", F_INT}, {"lease_ms", F_INT})},
    {"POST", "/v1/jobs/{id}/complete", W, dtx__srv_h_job_complete,
     FIELDS({"epoch", F_INT}, {"result", F_ANY})},
    {"POST", "/v1/jobs/{id}/fail", W, dtx__srv_h_job_fail,
     FIELDS({"epoch", F_INT}, {"error", F_STR})},
    {"POST", "/v1/jobs/{id}/retry", W, dtx__srv_h_job_retry, NOFIELDS},
    {"POST", "/v1/jobs/{id}/cancel", W, dtx__srv_h_job_cancel, NOFIELDS},
    {"POST", "/v1/jobs/{id}/effect", W, dtx__srv_h_job_effect,
     FIELDS({"epoch", F_INT}, {"key", F_STR}, {"coll", F_STR},
            {"filter", F_OBJ}, {"update", F_OBJ}, {"fence", F_STR})},
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
