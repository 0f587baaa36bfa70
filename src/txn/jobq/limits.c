/* limits.c -- a queue's concurrency limit: `--max-running N`, enforced by
 * the store across every process (docs/jobs.md, "Queue limits").
 *
 * The queue's settings document (queues.c) then also holds
 *   max_running: N (1..DTX_JOB_MAX_RUNNING_LIMIT),
 *   slots: [{job: ID|null, epoch: E, until: ms, g: G}, ...] (>= N of them)
 * A slot records the job (and the epoch its claim gives it) that may run
 * under it.  A claim round of a limited queue:
 *
 *   read settings --> find due jobs --> TAKE k slots (one conditional
 *   update of the settings: {gen, paused: false, slots.i.g as read}; each
 *   slots.i = {job X, epoch e = X's epoch + 1, until = now + WINDOW,
 *   g + 1}) --> CLAIM those jobs (the kit's fenced moves, each refused by
 *   the store past `until`) --> release the slots of claims lost
 *   ... the jobs run ... --> the runner releases the slots of the jobs it
 *   ended (slots.i.job = null, conditioned on slots.i.g)
 *
 *   transition              function                fault point
 *   slot free -> X@e        take (claim_limited)    job.slot.take
 *   ready -> running        claim_limited           job.claim
 *   slot X@e -> free        dtx__jq_release         job.slot.release
 *   (limit set or cleared)  dtx_job_queue_set       job.queue.set
 *
 * A slot may be taken again (it is "reusable") when its job is null, or
 * the job it records (X at epoch e) cannot be running at e, now or later:
 * X is gone; X's epoch is past e; X is at e and not running; or X is
 * still below e (its claim never landed) and the slot's until plus
 * DTX_JOB_FX_MARGIN_MS has passed -- the store refuses that claim past
 * until by its own clock, so it never lands.  A job taken over by
 * recovery (its worker crashed or was SIGSTOPped past its lease) leaves
 * running with a new epoch, so its slot comes back then, and only then.
 *
 * Invariants:
 *  J12 Every job of a limited queue that is running at epoch e was
 *      claimed under a slot recording it at e, and that slot is not taken
 *      again while the job runs at e; a take admits at most N minus the
 *      slots not reusable, and slots only at indices < N.  So at every
 *      instant the running jobs of the queue claimed under the limit are
 *      at most N, whatever the number of workers and processes.  (Jobs
 *      claimed before the limit was set are not counted; see docs.)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/deadline.h"
#include "util/err.h"

/* How long a slot's claim may take to land (by the store's clock). */
#define WINDOW_MS 5000
/* Rounds of a claim that lost its slots to another claimer. */
#define ROUNDS 8

static const json_t *slot_at(const json_t *doc, size_t i) {
  return json_array_get(json_object_get(doc, "slots"), i);
}

/* ---- which slots are reusable ------------------------------------------ */

/* 1 when slot s can be taken again: no job in it could run at its epoch
 * (the header's rule); job: the job it records as read now, or NULL. */
static int reusable(const json_t *s, const json_t *job, int64_t now) {
  const char *id = dtx__str(s, "job");
  if (!id)
    return 1;
  if (!job)
    return 1; /* gone: a claim of it cannot land */
  int64_t e = dtx__int(s, "epoch"), je = dtx__int(job, "epoch");
  if (je > e)
    return 1;
  if (je == e)
    return !dtx__state_is(job, DTX_JOB_RUNNING);
  return dtx__int(s, "until") + DTX_JOB_FX_MARGIN_MS <= now;
}

/* busy[i] = 1 for each slot of doc that is not reusable, reading the jobs
 * the slots name (one find) only when `need` free slots cannot be had
 * from the empty ones.  *nbusy: how many. */
static int judge_slots(dtx__exec_t *ex, const json_t *doc, int64_t n,
                       int64_t need, char *busy, int64_t *nbusy) {
  const json_t *slots = json_object_get(doc, "slots");
  size_t len = json_array_size(slots), i;
  int64_t named = 0, now = dtx__now_ms();
  for (i = 0; i < len; i++)
    named += (busy[i] = dtx__str(slot_at(doc, i), "job") != NULL);
  *nbusy = named;
  if (named == 0 || n - named >= need)
    return 0;
  json_t *ids = json_array(), *jobs = NULL, *j;
  for (i = 0; ids && i < len; i++)
    if (busy[i])
      json_array_append_new(ids, json_string(dtx__str(slot_at(doc, i), "job")));
  json_t *f = ids ? json_pack("{s:{s:o}}", "_id", "$in", ids) : NULL;
  int rc = f ? dtx__kit_find(ex, DTX_JOBS, f, NULL, &jobs) : DTX_ENOMEM;
  json_decref(f);
  if (rc)
    return rc;
  *nbusy = 0;
  for (i = 0; i < len; i++) {
    if (!busy[i])
      continue;
    const char *id = dtx__str(slot_at(doc, i), "job");
    const json_t *job = NULL;
    size_t k;
    json_array_foreach(jobs, k, j) {
      if (dtx__str_is(j, "_id", id))
        job = j;
    }
    busy[i] = !reusable(slot_at(doc, i), job, now);
    *nbusy += busy[i];
  }
  json_decref(jobs);
  return 0;
}

/* ---- release --------------------------------------------------------------- */

int dtx__jq_release(dtx__exec_t *ex, const char *queue, const int *idx,
                    const int64_t *g, size_t n) {
  if (n == 0)
    return 0;
  json_t *f = json_pack("{s:s}", "_id", queue), *set = json_object();
  char path[64];
  for (size_t i = 0; f && set && i < n; i++) {
    snprintf(path, sizeof path, "slots.%d.g", idx[i]);
    json_object_set_new(f, path, json_integer((json_int_t)g[i]));
    snprintf(path, sizeof path, "slots.%d.job", idx[i]);
    json_object_set_new(set, path, json_null());
  }
  json_t *u = set ? json_pack("{s:o}", "$set", set) : NULL;
  if (!f || !u) {
    json_decref(f);
    json_decref(u);
    return DTX_ENOMEM;
  }
  /* Not matched: a slot was judged reusable and taken meanwhile (its job
   * had ended), which is what the release was for. */
  return dtx__kit_update(ex, "job.slot.release", DTX_JOB_QUEUES, f, u, NULL);
}

/* ---- the claim ------------------------------------------------------------ */

void dtx__job_claim_moves(const json_t *cands, size_t k, int64_t not_after,
                          const json_t **docs, dtx__move_t *m) {
  DTX_ASSERT(k <= DTX__CLAIM_MANY_MAX, "claim batch bound");
  for (size_t j = 0; j < k; j++) {
    docs[j] = json_array_get(cands, j);
    m[j] = (dtx__move_t){.point = "job.claim", .from = DTX_JOB_READY,
                         .to = DTX_JOB_RUNNING,
                         .flags = DTX__FENCED | DTX__TAKE,
                         .not_after = not_after};
  }
}

void dtx__job_pick(json_t *cands, size_t k) {
  size_t n = json_array_size(cands);
  for (size_t i = 0; i < k && i < n; i++) {
    size_t j = i + (size_t)dtx__job_random() % (n - i);
    if (j != i) {
      json_t *a = json_incref(json_array_get(cands, i));
      json_array_set(cands, i, json_array_get(cands, j));
      json_array_set_new(cands, j, a);
    }
  }
  while (json_array_size(cands) > k)
    json_array_remove(cands, json_array_size(cands) - 1);
}

/* One round: 1 when the slots were lost to another claimer (go again). */
static int round_once(dtx__exec_t *ex, const char *queue, const json_t *due,
                      const json_t *sort, size_t max, json_t **jobs,
                      dtx__jq_held_t *held, int *limited, int spread) {
  json_t *doc = NULL, *cands = NULL;
  int rc = dtx__kit_get(ex, DTX_JOB_QUEUES, queue, &doc);
  if (rc == DTX_ENOTFOUND) {
    dtx__err_clear();
    *limited = 0;
    return 0;
  }
  if (rc)
    return rc;
  if (json_is_true(json_object_get(doc, "paused"))) {
    json_decref(doc);
    return dtx__err(DTX_ENOMATCH, "queue '%s' is paused", queue);
  }
  int64_t n = dtx__int(doc, "max_running");
  const json_t *slots = json_object_get(doc, "slots");
  size_t len = json_array_size(slots);
  dtx__jr_t rate; /* rate.c: the queue's rate, if any */
  int rated = dtx__jr_of(doc, &rate);
  if (rated < 0) {
    json_decref(doc);
    return rated;
  }
  if (n <= 0) {
    json_decref(doc);
    *limited = rated;
    /* A rate alone: its own claim (J22); 0 or an error, never 1. */
    return rated ? dtx__jr_claim(ex, queue, &rate, due, sort, max, jobs) : 0;
  }
  *limited = 1;
  if ((int64_t)len < n || len > 4 * DTX_JOB_MAX_RUNNING_LIMIT) {
    json_decref(doc);
    return dtx__err(DTX_ESTATE, "queue '%s': %zu slots for max_running %lld "
                    "(written with --bypass-validation?)", queue, len,
                    (long long)n);
  }
  int64_t want = (int64_t)max < n ? (int64_t)max : n, nbusy = 0;
  char busy[4 * DTX_JOB_MAX_RUNNING_LIMIT];
  rc = judge_slots(ex, doc, n, want, busy, &nbusy);
  int64_t cap = n - nbusy;
  if (rc == 0 && cap <= 0)
    rc = dtx__err(DTX_ENOMATCH, "queue '%s': all %lld running slots are "
                  "taken", queue, (long long)n);
  if (rc) {
    json_decref(doc);
    return rc;
  }
  if (cap > want)
    cap = want;
  /* The due jobs in sort order (highest priority, oldest first); after a
   * round lost to other claimers, four times what we take, from which we
   * pick at random, so they spread out (as the kit's claim-many does). */
  int64_t look = spread || (rated && rate.group[0]) ? cap * 4 : cap;
  int64_t until0 = 0;
  if (rated && dtx__jr_full(ex->st, queue, &rate, &until0)) {
    json_decref(doc);
    return dtx__err(DTX_ENOMATCH, "queue '%s': its rate is reached",
                    queue);
  }
  /* rate.c: the groups seen full left out */
  json_t *rdue = rated ? dtx__jr_due(ex->st, queue, &rate, due, NULL, 0)
                       : json_incref((json_t *)due);
  rc = rdue ? dtx__kit_find_n(ex, DTX_JOBS, rdue, sort, look, &cands)
            : DTX_ENOMEM;
  if (rc == 0 && json_array_size(cands) == 0) {
    int64_t moved = 0;
    json_decref(cands);
    cands = NULL;
    rc = dtx__job_promote(ex, queue, 100, &moved);
    if (rc == 0)
      rc = dtx__kit_find_n(ex, DTX_JOBS, rdue, sort, look, &cands);
  }
  json_decref(rdue);
  if (rc == 0 && json_array_size(cands) == 0)
    rc = DTX_ENOMATCH;
  if (rc) {
    json_decref(doc);
    json_decref(cands);
    return rc;
  }
  if (spread)
    dtx__job_pick(cands, (size_t)cap);
  /* A rated queue: only the jobs that got a unit of their group's window
   * (J22); with the slots below, a unit whose claim is lost is lost. */
  if (rated && (rc = dtx__jr_admit_once(ex, queue, &rate, cands,
                                        (size_t)cap)) == 0 &&
      json_array_size(cands) == 0)
    rc = dtx__err(DTX_ENOMATCH, "queue '%s': no job due within its rate",
                  queue);
  if (rc) {
    json_decref(doc);
    json_decref(cands);
    return rc;
  }
  size_t k = json_array_size(cands);
  /* The slots: free ones at indices < n, starting at a random one. */
  int idx[DTX__CLAIM_MANY_MAX];
  int64_t g[DTX__CLAIM_MANY_MAX];
  size_t got = 0, start = (size_t)dtx__job_random() % (size_t)n;
  for (size_t t = 0; t < (size_t)n && got < k; t++) {
    size_t i = (start + t) % (size_t)n;
    if (!busy[i]) {
      idx[got] = (int)i;
      g[got++] = dtx__int(slot_at(doc, i), "g");
    }
  }
  DTX_ASSERT(got == k && (int64_t)got <= n - nbusy, "J12");
  int64_t now = dtx__now_ms(), until = dtx__add_sat(now, WINDOW_MS);
  json_t *f = json_pack("{s:s,s:b,s:O}", "_id", queue, "paused", 0, "gen",
                        json_object_get(doc, "gen"));
  json_t *set = json_pack("{s:I}", "updated", (json_int_t)now);
  char path[64];
  for (size_t j = 0; f && set && j < got; j++) {
    const json_t *c = json_array_get(cands, j);
    snprintf(path, sizeof path, "slots.%d.g", idx[j]);
    json_object_set_new(f, path, json_integer((json_int_t)g[j]));
    snprintf(path, sizeof path, "slots.%d", idx[j]);
    json_object_set_new(
        set, path,
        json_pack("{s:O,s:I,s:I,s:I}", "job", json_object_get(c, "_id"),
                  "epoch", (json_int_t)(dtx__int(c, "epoch") + 1), "until",
                  (json_int_t)until, "g", (json_int_t)(g[j] + 1)));
    g[j]++;
  }
  json_decref(doc);
  json_t *u = set ? json_pack("{s:o}", "$set", set) : NULL;
  int matched = 0;
  rc = f && u ? dtx__kit_update(ex, "job.slot.take", DTX_JOB_QUEUES, f, u,
                                &matched)
              : (json_decref(f), json_decref(u), DTX_ENOMEM);
  if (rc || !matched) {
    json_decref(cands);
    return rc ? rc : 1;
  }
  /* The claims, each fenced by the epoch the find saw and refused by the
   * store past the slots' window. */
  const json_t *docs[DTX__CLAIM_MANY_MAX];
  dtx__move_t m[DTX__CLAIM_MANY_MAX];
  json_t *outs[DTX__CLAIM_MANY_MAX];
  int rcs[DTX__CLAIM_MANY_MAX];
  dtx__job_claim_moves(cands, got, until, docs, m);
  rc = dtx__kit_move_many(ex, &dtx__job_kind, docs, m, got, outs, rcs, NULL);
  int lost_idx[DTX__CLAIM_MANY_MAX];
  int64_t lost_g[DTX__CLAIM_MANY_MAX];
  size_t nlost = 0;
  *jobs = json_array();
  for (size_t j = 0; j < got; j++) {
    if (rcs[j] == 0 && *jobs && json_array_append_new(*jobs, outs[j]) == 0) {
      /* J12: running at the epoch its slot records. */
      DTX_ASSERT(dtx__int(outs[j], "epoch") == dtx__int(docs[j], "epoch") + 1,
                 "J12");
      if (held && held->n < DTX__CLAIM_MANY_MAX) {
        held->idx[held->n] = idx[j];
        held->g[held->n] = g[j];
        snprintf(held->id[held->n], sizeof held->id[0], "%s",
                 dtx__str(outs[j], "_id"));
        held->n++;
      }
      continue;
    }
    if (rcs[j] == 0) /* out of memory: it runs under no one; recovery */
      json_decref(outs[j]);
    else { /* lost (or refused): its slot goes back at once */
      lost_idx[nlost] = idx[j];
      lost_g[nlost++] = g[j];
    }
  }
  json_decref(cands);
  int rrc = dtx__jq_release(ex, queue, lost_idx, lost_g, nlost);
  (void)rrc; /* a slot not released is reusable once its claim's window
                passed: only capacity is lost meanwhile */
  if (json_array_size(*jobs) == 0) {
    json_decref(*jobs);
    *jobs = NULL;
    if (rc && rc != DTX_ESTALE)
      return rc;
    dtx__err_clear();
    return 1; /* every claim lost: look again */
  }
  dtx__err_clear();
  return 0;
}

int dtx__jq_claim_limited(dtx__exec_t *ex, const char *queue,
                          const json_t *due, const json_t *sort, size_t max,
                          json_t **jobs, dtx__jq_held_t *held,
                          int *limited) {
  int rc = 1;
  *jobs = NULL;
  if (held)
    held->n = 0;
  for (int r = 0; r < ROUNDS && rc == 1; r++)
    rc = round_once(ex, queue, due, sort, max, jobs, held, limited, r > 0);
  if (rc == 1)
    rc = dtx__err(DTX_ENOMATCH, "queue '%s': its running slots kept moving",
                  queue);
  return rc;
}

/* ---- the setting --------------------------------------------------------- */

int dtx_job_queue_opts_check(const char *queue, const dtx_job_queue_opts_t *o) {
  int rc = dtx_job_queue_check(queue);
  if (rc)
    return rc;
  if (!o)
    return dtx__err(DTX_EINVAL, "no queue settings given");
  if (!o->set_max_running && !o->set_rate)
    return dtx__err(DTX_EINVAL, "queue '%s': nothing to set (max running, "
                    "rate)", queue);
  if (o->set_rate && o->no_rate && o->rate_group)
    return dtx__err(DTX_EINVAL, "queue '%s': a rate group needs a rate",
                    queue);
  if (o->set_rate && !o->no_rate &&
      (rc = dtx_job_rate_check(o->rate_n, o->rate_ms, o->rate_group)))
    return rc;
  if (o->set_max_running && !o->no_max_running &&
      (o->max_running < 1 || o->max_running > DTX_JOB_MAX_RUNNING_LIMIT))
    return dtx__err(DTX_EINVAL, "max running must be from 1 to %d (or none), "
                    "got %lld", DTX_JOB_MAX_RUNNING_LIMIT,
                    (long long)o->max_running);
  return 0;
}

/* The free slots doc lacks for a limit of n (an empty array when it has
 * them): appended by $push, so the slots there are, which takes change
 * without moving gen, are never rewritten from a stale read. */
static json_t *slots_for(const json_t *doc, int64_t n) {
  json_t *slots = json_array();
  int64_t have = (int64_t)json_array_size(json_object_get(doc, "slots"));
  while (slots && have + (int64_t)json_array_size(slots) < n)
    if (json_array_append_new(slots,
                              json_pack("{s:n,s:I,s:I,s:I}", "job", "epoch",
                                        (json_int_t)0, "until", (json_int_t)0,
                                        "g", (json_int_t)0))) {
      json_decref(slots);
      return NULL;
    }
  return slots;
}

int dtx_job_queue_set(dtx_store_t *st, const char *queue,
                      const dtx_job_queue_opts_t *o, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc;
  *out = NULL;
  dtx__call_begin(&c, 0);
  if ((rc = dtx_job_queue_opts_check(queue, o)))
    return dtx__call_end(&c, rc);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  if ((rc = dtx__job_setup(st)))
    return dtx__call_end(&c, rc);
  json_t *after = NULL;
  /* 0: the limit unchanged; -1: none */
  int64_t max = !o->set_max_running ? 0
                : o->no_max_running ? -1 : o->max_running;
  /* rate.c: the rate to set (NULL: none, or unchanged) */
  json_t *rate = NULL;
  if (o->set_rate && !o->no_rate) {
    rate = json_pack("{s:I,s:I}", "n", (json_int_t)o->rate_n, "ms",
                     (json_int_t)o->rate_ms);
    if (rate && o->rate_group)
      json_object_set_new(rate, "group", json_string(o->rate_group));
    if (!rate)
      return dtx__call_end(&c, DTX_ENOMEM);
  }
  for (int r = 0; r < ROUNDS && rc == 0 && !after; r++) {
    json_t *doc = NULL;
    int64_t now = dtx__now_ms();
    rc = dtx__kit_get(&ex, DTX_JOB_QUEUES, queue, &doc);
    if (rc == DTX_ENOTFOUND) {
      dtx__err_clear();
      rc = 0;
    }
    if (rc)
      break;
    json_t *slots = max > 0 ? slots_for(doc, max) : NULL;
    if (max > 0 && !slots) {
      json_decref(doc);
      rc = DTX_ENOMEM;
      break;
    }
    if (!doc) {
      json_t *ins = json_pack("{s:s,s:b,s:i,s:I}", "_id", queue, "paused", 0,
                              "gen", 1, "updated", (json_int_t)now);
      if (ins && slots) {
        json_object_set_new(ins, "max_running", json_integer((json_int_t)max));
        json_object_set(ins, "slots", slots);
      }
      if (ins && rate)
        json_object_set(ins, "rate", rate);
      rc = ins ? dtx__kit_insert(&ex, "job.queue.set", DTX_JOB_QUEUES, ins)
               : DTX_ENOMEM;
      if (rc == 0)
        after = json_incref(ins);
      json_decref(ins);
      json_decref(slots);
      if (rc == DTX_EDUPKEY) { /* another setter's first write: again */
        dtx__err_clear();
        rc = 0;
      }
      continue;
    }
    /* Conditioned on the settings as read (gen); the slots are only
     * appended to ($push), never rewritten, so no take in between (which
     * leaves gen alone) is undone. */
    json_t *f = json_pack("{s:s,s:O}", "_id", queue, "gen",
                          json_object_get(doc, "gen"));
    json_t *u = json_pack("{s:{s:I},s:{s:i}}", "$set", "updated",
                          (json_int_t)now, "$inc", "gen", 1);
    json_decref(doc);
    if (u && slots) {
      json_t *s = json_object_get(u, "$set");
      json_object_set_new(s, "max_running", json_integer((json_int_t)max));
      if (json_array_size(slots)) /* conditioned on gen: no other setter
                                     extended them since the read */
        json_object_set_new(u, "$push",
                            json_pack("{s:{s:O}}", "slots", "$each", slots));
    } else if (u && max < 0) {
      json_object_set_new(u, "$unset", json_pack("{s:s}", "max_running", ""));
    }
    if (u && rate)
      json_object_set(json_object_get(u, "$set"), "rate", rate);
    else if (u && o->set_rate) { /* none */
      json_t *un = json_object_get(u, "$unset");
      if (!un)
        json_object_set_new(u, "$unset", un = json_object());
      json_object_set_new(un, "rate", json_string(""));
    }
    json_decref(slots);
    if (!f || !u) {
      json_decref(f);
      json_decref(u);
      rc = DTX_ENOMEM;
      break;
    }
    dtx_fam_opts_t fo = {.return_new = 1};
    rc = dtx__kit_modify_ex(&ex, "job.queue.set", DTX_JOB_QUEUES, f, u, &fo,
                            &after);
    if (rc == DTX_ENOMATCH) { /* a take or a pause in between: again */
      dtx__err_clear();
      rc = 0;
    }
  }
  json_decref(rate);
  if (rc == 0 && !after)
    rc = dtx__err(DTX_EBUSY, "queue '%s': its settings kept changing", queue);
  if (rc == 0) {
    dtx__jq_forget(st, queue);
    /* Every claim round that starts from now on reads the limit. */
    (void)dtx__kit_wait(&(dtx__wait_t){.pause = DTX_JOB_QUEUE_TTL_MS}, 0);
    rc = dtx__jq_settings(st, queue, out);
  }
  json_decref(after);
  return dtx__call_end(&c, rc);
}
