/* queues.c -- a queue's settings: pause and resume (docs/jobs.md, "Pause
 * and resume").
 *
 * A queue's settings are one document of "job_queues", _id = the queue:
 *   {_id: QUEUE, paused: bool, gen: N, updated: ms
 *    [, max_running: N, slots: [...]]  (the limit: limits.c)
 *    [, rate: {n, ms[, group]}]}       (the rate: rate.c)
 * A queue without one is not paused.  The document is written only by
 * the job.* steps -- the one below (a find-and-modify upsert: paused set,
 * gen + 1) and limits.c's (job.queue.set, job.slot.take,
 * job.slot.release) -- and never deleted: its rules refuse a plain
 * write, insert or delete of it.
 *
 *   (no document) --pause--> paused --resume--> running --pause--> paused
 *
 *   transition                 function              fault point
 *   (none|any) -> paused|not   dtx_job_queue_pause   job.queue.set
 *   (a claim round's gate)     dtx__jq_gate          -- (a read)
 *
 * How a pause reaches the workers.  A claim round (runner.c and the
 * remote claim, both through dtx__job_claim) first asks dtx__jq_gate,
 * which answers from a per-process cache of the queue's settings that is
 * at most DTX_JOB_QUEUE_TTL_MS old (measured from the start of the read
 * that filled it), so a queue without settings costs a claim no round
 * trip beyond one read per TTL per process.  A pause returns only once
 * TTL has passed since its write: by then every claim round that starts
 * reads settings whose read began after the write, and sees the pause.
 *
 * Invariants:
 *  J10 After dtx_job_queue_pause(paused = 1) returns, a claim of the queue
 *      lands only from a claim round that started before it returned (at
 *      most one round -- one batch -- per worker thread or remote claim
 *      in flight; a SIGSTOPped worker's round lands when it resumes);
 *      no round that starts later claims.  Running jobs are not touched:
 *      they finish (or are taken over) as ever.
 *  J11 gen only grows (the transition rule), and a plain write (doctx
 *      update, insert, delete, bulk) can neither pause nor resume a queue
 *      nor remove its settings: only the job.* steps write them.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/deadline.h"
#include "util/err.h"

/* ---- the rules of job_queues ------------------------------------------- */

const char dtx__jq_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"paused\",\"gen\",\"updated\"],"
    "\"additionalProperties\":false,"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128},"
    "\"paused\":{\"bsonType\":\"bool\"},"
    "\"gen\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"updated\":{\"bsonType\":\"long\"},"
    /* limits.c: the concurrency limit and its running slots */
    "\"max_running\":{\"bsonType\":\"long\",\"minimum\":1,"
    "\"maximum\":256},"
    "\"slots\":{\"bsonType\":\"array\",\"items\":{\"bsonType\":"
    "\"object\",\"required\":[\"job\",\"epoch\",\"until\",\"g\"],"
    "\"additionalProperties\":false,\"properties\":{"
    "\"job\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"epoch\":{\"bsonType\":\"long\"},\"until\":{\"bsonType\":\"long\"},"
    "\"g\":{\"bsonType\":\"long\"}}}},"
    /* rate.c: the rate limit */
    "\"rate\":{\"bsonType\":\"object\",\"required\":[\"n\",\"ms\"],"
    "\"additionalProperties\":false,\"properties\":{"
    "\"n\":{\"bsonType\":\"long\",\"minimum\":1,\"maximum\":1000000},"
    "\"ms\":{\"bsonType\":\"long\",\"minimum\":1,"
    "\"maximum\":86400000},"
    "\"group\":{\"bsonType\":\"string\",\"minLength\":1,"
    "\"maxLength\":128}}}}}}";

/* J11: gen only grows; only the job.* steps write a queue's settings (a
 * plain resume would start claims an operator stopped; a slot freed by
 * hand would let more than max_running run). */
const char dtx__jq_transition[] =
    "[{\"immutable\":[\"_id\"],\"increasing\":[\"gen\"]},"
    "{\"scope\":\"plain\",\"steps\":[\"job\"],\"insert\":false,"
    "\"immutable\":[\"paused\",\"gen\",\"updated\",\"max_running\","
    "\"slots\",\"rate\"],"
    "\"why\":\"a queue's settings and running slots change only through "
    "doctx job pause, resume, queue and its workers' claims (docs/jobs.md)\"}]";

/* Matches no settings document (gen >= 1 is required): never deleted. */
const char dtx__jq_delete_guard[] = "{\"gen\":{\"$lt\":0}}";

/* ---- the per-process cache -------------------------------------------- */

#define CACHE_N 64

typedef struct ent {
  const dtx_store_t *st;
  char queue[130];
  int64_t at; /* mono ms when the read that filled it began; 0: empty */
  int paused;
  int limited; /* max_running set (limits.c) */
} ent_t;

static ent_t cache[CACHE_N];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static ent_t *slot_of(const dtx_store_t *st, const char *queue) {
  ent_t *old = &cache[0];
  for (size_t i = 0; i < CACHE_N; i++) {
    if (cache[i].at && cache[i].st == st &&
        strcmp(cache[i].queue, queue) == 0)
      return &cache[i];
    if (cache[i].at < old->at)
      old = &cache[i];
  }
  return old;
}

static void cache_put(const dtx_store_t *st, const char *queue, int64_t at,
                      int paused, int limited) {
  pthread_mutex_lock(&cache_mu);
  ent_t *e = slot_of(st, queue);
  /* An older read never replaces a newer one. */
  if (!(e->st == st && strcmp(e->queue, queue) == 0 && e->at > at)) {
    e->st = st;
    snprintf(e->queue, sizeof e->queue, "%s", queue);
    e->at = at > 0 ? at : 1;
    e->paused = paused;
    e->limited = limited;
  }
  pthread_mutex_unlock(&cache_mu);
}

/* The settings document of queue in *doc (NULL when there is none). */
static int read_settings(dtx__exec_t *ex, const char *queue, json_t **doc) {
  int rc = dtx__kit_get(ex, DTX_JOB_QUEUES, queue, doc);
  if (rc == DTX_ENOTFOUND) {
    dtx__err_clear();
    *doc = NULL;
    rc = 0;
  }
  return rc;
}

int dtx__jq_gate(dtx__exec_t *ex, const char *queue, int *paused,
                 int *limited) {
  int64_t now = dtx__mono_ms();
  pthread_mutex_lock(&cache_mu);
  ent_t *e = slot_of(ex->st, queue);
  int hit = e->at && e->st == ex->st && strcmp(e->queue, queue) == 0 &&
            now - e->at < DTX_JOB_QUEUE_TTL_MS;
  if (hit) {
    *paused = e->paused;
    *limited = e->limited;
  }
  pthread_mutex_unlock(&cache_mu);
  if (hit)
    return 0;
  json_t *doc = NULL;
  int rc = read_settings(ex, queue, &doc);
  if (rc)
    return rc;
  *paused = json_is_true(json_object_get(doc, "paused"));
  /* a rate limit claims through limits.c's round too (rate.c) */
  *limited = dtx__int(doc, "max_running") > 0 ||
             json_object_get(doc, "rate") != NULL;
  json_decref(doc);
  cache_put(ex->st, queue, now, *paused, *limited);
  return 0;
}

void dtx__jq_forget(const dtx_store_t *st, const char *queue) {
  pthread_mutex_lock(&cache_mu);
  ent_t *e = slot_of(st, queue);
  if (e->st == st && strcmp(e->queue, queue) == 0)
    e->at = 0;
  pthread_mutex_unlock(&cache_mu);
}

/* ---- the calls ----------------------------------------------------------- */

int dtx_job_queue_check(const char *queue) {
  return dtx__check_ident("queue name", queue);
}

/* What the API answers for a queue's settings (doc NULL: the defaults). */
static json_t *view(const char *queue, const json_t *doc) {
  int64_t n = dtx__int(doc, "max_running");
  json_t *v = json_pack("{s:s,s:b,s:I}", "queue", queue, "paused",
                        json_is_true(json_object_get(doc, "paused")), "gen",
                        (json_int_t)dtx__int(doc, "gen"));
  if (v)
    json_object_set_new(v, "max_running",
                        n > 0 ? json_integer((json_int_t)n) : json_null());
  const json_t *rate = json_object_get(doc, "rate");
  if (v) /* rate.c: {n, ms[, group]} or null */
    json_object_set_new(v, "rate", rate ? json_deep_copy(rate) : json_null());
  return v;
}

int dtx_job_queue_pause(dtx_store_t *st, const char *queue, int paused,
                        json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc;
  *out = NULL;
  dtx__call_begin(&c, 0);
  if ((rc = dtx_job_queue_check(queue)))
    return dtx__call_end(&c, rc);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  if ((rc = dtx__job_setup(st)))
    return dtx__call_end(&c, rc);
  json_t *filter = json_pack("{s:s}", "_id", queue);
  json_t *update = json_pack("{s:{s:b,s:I},s:{s:i}}", "$set", "paused",
                             paused, "updated", (json_int_t)dtx__now_ms(),
                             "$inc", "gen", 1);
  dtx_fam_opts_t o = {.upsert = 1, .return_new = 1};
  json_t *doc = NULL;
  rc = filter && update ? dtx__kit_modify_ex(&ex, "job.queue.set",
                                             DTX_JOB_QUEUES, filter, update,
                                             &o, &doc)
                        : DTX_ENOMEM;
  if (rc == DTX_EDUPKEY) { /* two first writes at once: the other's exists */
    dtx__err_clear();
    filter = json_pack("{s:s}", "_id", queue);
    update = json_pack("{s:{s:b,s:I},s:{s:i}}", "$set", "paused", paused,
                       "updated", (json_int_t)dtx__now_ms(), "$inc", "gen", 1);
    rc = filter && update ? dtx__kit_modify_ex(&ex, "job.queue.set",
                                               DTX_JOB_QUEUES, filter, update,
                                               &o, &doc)
                          : DTX_ENOMEM;
  }
  if (rc == 0) {
    DTX_ASSERT(json_is_true(json_object_get(doc, "paused")) == !!paused &&
                   dtx__int(doc, "gen") >= 1,
               "J11");
    /* This process's claims see it at once; others' within the TTL. */
    dtx__jq_forget(st, queue);
    if (paused) /* J10: every claim round from now on reads it */
      (void)dtx__kit_wait(&(dtx__wait_t){.pause = DTX_JOB_QUEUE_TTL_MS}, 0);
    *out = view(queue, doc);
    if (!*out)
      rc = DTX_ENOMEM;
  }
  json_decref(doc);
  return dtx__call_end(&c, rc);
}

int dtx__jq_settings(dtx_store_t *st, const char *queue, json_t **out) {
  dtx__exec_t ex;
  json_t *doc = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  *out = NULL;
  int rc = read_settings(&ex, queue, &doc);
  if (rc == 0 && !(*out = view(queue, doc)))
    rc = DTX_ENOMEM;
  json_decref(doc);
  return rc;
}

int dtx_job_queue_list(dtx_store_t *st, json_t **out) {
  dtx__call_t c;
  json_t *docs = NULL, *d;
  size_t i;
  *out = NULL;
  dtx__call_begin(&c, 0);
  json_t *sort = json_pack("{s:i}", "_id", 1);
  dtx__kit_read_t q = {.coll = DTX_JOB_QUEUES, .sort = sort,
                       .what = "listing the job queues' settings"};
  int rc = sort ? dtx__kit_read(st, &q, &docs) : DTX_ENOMEM;
  json_decref(sort);
  json_t *res = rc ? NULL : json_array();
  json_array_foreach(docs, i, d) {
    const char *id = dtx__str(d, "_id");
    if (res && id && json_array_append_new(res, view(id, d)))
      rc = DTX_ENOMEM;
  }
  json_decref(docs);
  if (!rc && !res)
    rc = DTX_ENOMEM;
  if (rc)
    json_decref(res);
  else
    *out = res;
  return dtx__call_end(&c, rc);
}
