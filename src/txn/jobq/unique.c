/* unique.c -- a unique key's window after its job ends (docs/jobs.md,
 * "Uniqueness"; J18 in job.c).
 *
 * A job added with unique_key K and unique_for_ms N > 0 keeps K for N ms
 * after it ends, as well as while it is live: the step that makes it
 * terminal keeps unique_live ("QUEUE/K", under the store's unique index)
 * and records unique_until = finished + N (saturated) instead of
 * $unset-ing it (J4).  The key goes by ONE conditional update of the
 * holder, {_id, unique_live, unique_until <= now} -> $unset both
 * (job.unique.expire), made by an add that the index refused and whose
 * holder's window has passed (it then inserts once more), and by
 * recovery for passed windows (bounded per pass). */
#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/deadline.h"
#include "util/err.h"

#define EXPIRE_BATCH 200

int dtx__job_unique_end(const json_t *job, json_t *set, int64_t now,
                        json_t **unset) {
  int64_t n = dtx__int(job, "unique_for_ms");
  *unset = NULL;
  if (n > 0 && json_object_get(job, "unique_live"))
    /* J18: the key stays held until the window passes (saturated) */
    return json_object_set_new(set, "unique_until",
                               json_integer((json_int_t)dtx__add_sat(now, n)))
               ? DTX_ENOMEM
               : 0;
  *unset = json_pack("{s:s}", "unique_live", "");
  return *unset ? 0 : DTX_ENOMEM;
}

int dtx__job_unique_expired(const json_t *job, int64_t now) {
  const json_t *u = json_object_get(job, "unique_until");
  return dtx__job_terminal(job) && json_is_integer(u) &&
         json_integer_value(u) <= now;
}

int dtx__job_unique_expire(dtx__exec_t *ex, const json_t *job) {
  int64_t now = dtx__now_ms();
  json_t *f = json_pack("{s:O,s:O,s:{s:I}}", "_id",
                        json_object_get(job, "_id"), "unique_live",
                        json_object_get(job, "unique_live"), "unique_until",
                        "$lte", (json_int_t)now);
  json_t *u = json_pack("{s:{s:s,s:s}}", "$unset", "unique_live", "",
                        "unique_until", "");
  int matched = 0;
  if (!f || !u) {
    json_decref(f);
    json_decref(u);
    return DTX_ENOMEM;
  }
  int rc = dtx__kit_update(ex, "job.unique.expire", DTX_JOBS, f, u, &matched);
  return rc ? rc : matched ? 0 : DTX_ENOMATCH;
}

int dtx__job_unique_recover(dtx__exec_t *ex, dtx__tally_t *t) {
  json_t *f = json_pack("{s:{s:I}}", "unique_until", "$lte",
                        (json_int_t)dtx__now_ms());
  json_t *sort = json_pack("{s:i}", "unique_until", 1), *list = NULL, *job;
  dtx__kit_read_t q = {.coll = DTX_JOBS, .filter = f, .sort = sort,
                       .limit = EXPIRE_BATCH,
                       .what = "finding passed unique windows"};
  int rc = f && sort ? dtx__kit_read(ex->st, &q, &list) : DTX_ENOMEM;
  json_decref(f);
  json_decref(sort);
  size_t i;
  json_array_foreach(list, i, job) {
    int erc = dtx__job_unique_expire(ex, job);
    if (erc == 0)
      dtx__tally_ran(t, "unique_expired", 1);
    else if (erc != DTX_ENOMATCH) /* ENOMATCH: another got it, or retried */
      dtx__tally_error(t, json_object_get(job, "_id"), erc);
  }
  json_decref(list);
  return rc;
}
