/* effect.c -- effects of a job on other documents, applied at most once
 * per (job, effect key) over all attempts and workers (invariant J5).
 *
 * An effect is two atomic steps:
 *   1. the fence (job.effect.fence): one conditional update of the job
 *      {_id, state: running, epoch: E} -> $addToSet fx_colls COLL.  It
 *      refuses (DTX_ESTALE) an attempt that was taken over, and records
 *      where markers may lie, for recovery and the audit.
 *   2. the apply (job.effect.apply): one conditional update of the target
 *      filter + {dtx_fx: {$not: {$elemMatch: {job, key}}}} ->
 *      the handler's update + $push dtx_fx {job, key, at}.
 *
 * Why at most once per key holds even when step 2 races a takeover: the
 * marker names the job and the key, not the attempt, and step 2 tests and
 * adds it in one atomic step of the target document.  An attempt that
 * passed its fence and was then taken over may still apply -- but then
 * the marker is there, and the next attempt's apply finds it and changes
 * nothing ({"applied": false}); if the next attempt came first, the late
 * one finds its marker.  So over every attempt the update lands at most
 * once, and exactly once for a job that succeeded (its last attempt's
 * handler returned only after its effects were applied or found).  The
 * fence only keeps a worker that already knows it is stale from acting.
 * Markers are removed by recovery only once the job is terminal and the
 * tombstone TTL (default 24 h) has passed: a late step 2 of a stale
 * attempt is bounded by its call's deadline, far below the TTL, so it can
 * never find its marker gone and apply a second time. */
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/err.h"

int dtx__job_fence(dtx__exec_t *ex, const char *id, int64_t epoch,
                   const char *coll) {
  int matched = 0;
  int rc = dtx__kit_update(
      ex, "job.effect.fence", DTX_JOBS,
      json_pack("{s:s,s:s,s:I}", "_id", id, "state", DTX_JOB_RUNNING, "epoch",
                (json_int_t)epoch),
      json_pack("{s:{s:s}}", "$addToSet", "fx_colls", coll), &matched);
  if (rc == 0 && !matched)
    rc = dtx__err(DTX_ESTALE,
                  "job %s is no longer running at epoch %lld (taken over or "
                  "ended): the effect was not applied",
                  id, (long long)epoch);
  return rc;
}

/* The handler's update plus the marker push, or NULL (detail set). */
static json_t *with_marker(const json_t *update, const char *id,
                           const char *key, int *rc) {
  const char *op;
  json_t *v;
  if (!json_is_object(update) || json_object_size(update) == 0) {
    *rc = dtx__err(DTX_EBADUPDATE, "an effect's update must be a non-empty "
                                   "object of update operators");
    return NULL;
  }
  json_object_foreach((json_t *)update, op, v) {
    if (op[0] != '$') {
      *rc = dtx__err(DTX_EBADUPDATE,
                     "an effect's update takes operators, not a replacement "
                     "document (field '%s')", op);
      return NULL;
    }
    const char *f;
    json_t *x;
    if (json_is_object(v))
      json_object_foreach(v, f, x) {
        if (strncmp(f, DTX_JOB_FX, strlen(DTX_JOB_FX)) == 0 &&
            (f[strlen(DTX_JOB_FX)] == 0 || f[strlen(DTX_JOB_FX)] == '.')) {
          *rc = dtx__err(DTX_EINVAL, "an effect may not change %s (%s %s): "
                                     "doctx keeps its markers there",
                         DTX_JOB_FX, op, f);
          return NULL;
        }
      }
  }
  json_t *u = json_deep_copy(update);
  json_t *marker = json_pack("{s:s,s:s,s:I}", "job", id, "key", key, "at",
                             (json_int_t)dtx__now_ms());
  json_t *push = u ? json_object_get(u, "$push") : NULL;
  if (!u || !marker) {
    json_decref(u);
    json_decref(marker);
    *rc = DTX_ENOMEM;
    return NULL;
  }
  if (!push) {
    push = json_object();
    json_object_set_new(u, "$push", push);
  }
  json_object_set_new(push, DTX_JOB_FX, marker);
  return u;
}

static json_t *marker_cond(const char *id, const char *key, int present) {
  json_t *m = json_pack("{s:s,s:s}", "job", id, "key", key);
  return present ? json_pack("{s:{s:o}}", DTX_JOB_FX, "$elemMatch", m)
                 : json_pack("{s:{s:{s:o}}}", DTX_JOB_FX, "$not",
                             "$elemMatch", m);
}

/* filter AND cond (both borrowed / stolen as named). */
static json_t *both(const json_t *filter, json_t *cond) {
  return json_pack("{s:[O,o]}", "$and", filter, cond);
}

static int apply(dtx__exec_t *ex, const char *id, int64_t epoch,
                 const char *key, const char *coll, const json_t *filter,
                 const json_t *update, const dtx_job_effect_opts_t *eo,
                 int *applied) {
  int rc, matched = 0;
  *applied = 0;
  dtx_update_opts_t uo = {.fence_name = eo ? eo->fence_name : NULL,
                          .fence_token = eo ? eo->fence_token : 0};
  if (uo.fence_name && (rc = dtx_check_fence(uo.fence_name, uo.fence_token)))
    return rc;
  if ((rc = dtx__check_ident("job id", id)) ||
      (rc = dtx__check_ident("effect key", key)))
    return rc;
  /* A protocol's documents change only through its steps: an effect's
   * $inc on accounts would make money up, one on jobs rewrite a job. */
  if ((rc = dtx__check_user_coll("effect", coll ? coll : "")))
    return rc;
  if (!json_is_object(filter))
    return dtx__err(DTX_EBADQUERY, "an effect's filter must be an object");
  if (epoch < 1)
    return dtx__err(DTX_EINVAL, "epoch must be >= 1, got %lld",
                    (long long)epoch);
  json_t *u = with_marker(update, id, key, &rc);
  if (!u)
    return rc;
  /* The marker index serves recovery and the audit; made once per store. */
  json_t *ik = json_pack("{s:i}", DTX_JOB_FX ".job", 1);
  rc = ik ? dtx_store_create_index(ex->st, coll, ik, NULL, NULL) : DTX_ENOMEM;
  json_decref(ik);
  if (rc == 0)
    rc = dtx__job_fence(ex, id, epoch, coll);
  if (rc) {
    json_decref(u);
    return rc;
  }
  rc = dtx__kit_update_ex(ex, "job.effect.apply", coll,
                          both(filter, marker_cond(id, key, 0)), u, &uo,
                          &matched);
  if (rc || matched) {
    *applied = rc == 0;
    return rc;
  }
  /* Nothing matched: applied before (the marker is there), or no such
   * document at all. */
  int64_t n = 0;
  json_t *f = both(filter, marker_cond(id, key, 1));
  dtx__retry_t r = {0};
  do
    rc = f ? dtx_store_count(ex->st, coll, f, &n) : DTX_ENOMEM;
  while (dtx__retry_again(&r, &rc, "looking for an effect's marker"));
  json_decref(f);
  if (rc == 0 && n == 0)
    rc = dtx__err(DTX_ENOMATCH, "effect %s of job %s: no document of %s "
                                "matches the filter", key, id, coll);
  return rc;
}

int dtx_job_effect_ex(dtx_job_run_t *run, const char *key, const char *coll,
                      const json_t *filter, const json_t *update,
                      const dtx_job_effect_opts_t *opts, int *applied) {
  int dummy;
  if (!applied)
    applied = &dummy;
  if (atomic_load(&run->lost)) {
    *applied = 0;
    return dtx__err(DTX_ESTALE, "job %s: this attempt lost its lease",
                    run->id);
  }
  dtx__call_t c;
  dtx__call_begin(&c, run->ex->deadline_ms);
  return dtx__call_end(&c, apply(run->ex, run->id, run->epoch, key, coll,
                                 filter, update, opts, applied));
}

int dtx_job_effect(dtx_job_run_t *run, const char *key, const char *coll,
                   const json_t *filter, const json_t *update, int *applied) {
  return dtx_job_effect_ex(run, key, coll, filter, update, NULL, applied);
}

int dtx_job_effect_at_ex(dtx_store_t *st, const char *job_id, int64_t epoch,
                         const char *key, const char *coll,
                         const json_t *filter, const json_t *update,
                         const dtx_job_effect_opts_t *opts, int *applied) {
  dtx__exec_t ex;
  dtx__call_t c;
  int dummy;
  if (!applied)
    applied = &dummy;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, apply(&ex, job_id, epoch, key, coll, filter,
                                 update, opts, applied));
}

int dtx_job_effect_at(dtx_store_t *st, const char *job_id, int64_t epoch,
                      const char *key, const char *coll, const json_t *filter,
                      const json_t *update, int *applied) {
  return dtx_job_effect_at_ex(st, job_id, epoch, key, coll, filter, update,
                              NULL, applied);
}
