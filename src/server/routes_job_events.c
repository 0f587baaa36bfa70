/* routes_job_events.c -- doctxd's route for the job event log
 * (src/txn/jobq/events.c, docs/jobs.md "Events"):
 *   GET /v1/queues/{q}/events?after=CURSOR&limit=N&wait_ms=N
 * answers {"events": [...], "cursor": the last event's cursor, or after
 * when none}; wait_ms (at most 30000) makes it a long poll. */
#include "server/server.h"

void dtx__srv_h_job_events(dtx__srv_ctx_t *c) {
  int64_t after, limit, wait;
  json_t *evs = NULL;
  if (dtx__srv_qint(c, "after", 0, &after) ||
      dtx__srv_qint(c, "limit", 0, &limit) ||
      dtx__srv_qint(c, "wait_ms", 0, &wait))
    return;
  int rc = dtx_job_events_check(c->param[0], after, limit, wait);
  if (rc == 0)
    rc = dtx_job_events(c->d->st, c->param[0], after, limit, wait, &evs);
  if (rc) {
    dtx__srv_fail(c, rc, NULL); /* behind the trim: STATE, 409 */
    return;
  }
  size_t n = json_array_size(evs);
  json_t *last = n ? json_object_get(json_array_get(evs, n - 1), "cursor")
                   : NULL;
  json_t *res = json_pack("{s:o,s:O?}", "events", evs, "cursor", last);
  if (res && !last)
    json_object_set_new(res, "cursor", json_integer((json_int_t)after));
  if (!res)
    dtx__srv_fail(c, DTX_ENOMEM, NULL);
  else
    dtx__srv_json(c, 200, res);
}
