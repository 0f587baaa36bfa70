/* worker.c -- the worker frame: executor threads that loop over every
 * registered pattern, claim its next due item (the pattern's claim_next:
 * one conditional update, so any number of threads and processes can run
 * against one store) and drive it, and now and then run the recovery
 * pass for what others abandoned.
 *
 * A pattern with a batched path (claim_many + drive_many: transfers) is
 * served a batch at a time instead when the worker's batch is above 1:
 * up to that many due items claimed in one round and driven together, in
 * one call frame, each counted as run_one counts it (run_batch).
 *
 * Each item runs in its own call frame, so one deadline bounds it.  When
 * no pattern has anything due, a thread backs off (the kit's pace,
 * dtx__idle_round) instead of spinning.  With `once`, a claim that fails
 * (the store cannot
 * be reached) ends the run with that error; a failed item is counted and
 * left for recovery, and the others go on.  The summary says, per
 * pattern, what ran, what the last recovery pass left alone and why, and
 * what failed. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/kit/kit.h"
#include "util/err.h"

/* The default batch (dtx_worker_opts_t.batch): enough to make a round
 * trip carry many transfers, small enough that a batch's six rounds and
 * the few that split off stay far inside one lease. */
#define DTX__WORKER_BATCH 16

typedef struct shared {
  dtx_store_t *st;
  const dtx_worker_opts_t *o;
  size_t npat;
  int batch; /* the most items claimed and driven together */
  dtx__tally_t *ran;      /* per pattern: claims, and recovery's counts */
  dtx__tally_t *skipped;  /* per pattern: the last recovery pass's */
  dtx__pacer_t pacer; /* the recovery pass: recover_pass below */
  atomic_int fatal; /* once: an error that ends the run (its code) */
} shared_t;

static int stopping(shared_t *sh) {
  return (sh->o->stop && *sh->o->stop) || atomic_load(&sh->fatal);
}

/* One recovery pass of every pattern (dtx__pacer_recover runs it, one
 * thread at a time); returns how much it did. */
static int64_t recover_pass(void *arg, dtx__exec_t *ex) {
  shared_t *sh = arg;
  int64_t did = 0;
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  dtx__tally_t *t = calloc(sh->npat + 1, sizeof *t);
  int ok = t != NULL;
  for (size_t i = 0; ok && i < sh->npat; i++)
    ok = dtx__tally_init(&t[i]) == 0;
  if (ok) {
    dtx__call_t c;
    dtx__call_begin(&c, ex->deadline_ms);
    dtx__call_end(&c, dtx__recover_pass(ex, &ro, t));
    for (size_t i = 0; i < sh->npat; i++) {
      const char *k;
      json_t *v;
      json_object_foreach(json_object_get(t[i].obj, "ran"), k, v)
          did += json_integer_value(v);
      dtx__tally_merge(&sh->ran[i], &t[i]);
      /* What is left alone is what the last pass saw. */
      dtx__tally_t old = sh->skipped[i];
      sh->skipped[i] = t[i];
      t[i] = old;
    }
  }
  for (size_t i = 0; t && i < sh->npat; i++)
    dtx__tally_free(&t[i]);
  free(t);
  return did;
}

/* What one driven item counts in the summary (dtx__pattern_t's count). */
static int64_t ran_count(const dtx__pattern_t *p, const json_t *done) {
  if (!p->count)
    return 1;
  const json_t *n = json_object_get(done, p->count);
  return json_is_integer(n) && json_integer_value(n) >= 0
             ? (int64_t)json_integer_value(n)
             : 1;
}

/* Claims and drives one item of pattern i: 0 when one ran, DTX_ENOMATCH
 * when none was due, or the claim's error. */
static int run_one(shared_t *sh, dtx__exec_t *ex, size_t i) {
  const dtx__pattern_t *p = dtx__patterns[i];
  json_t *item = NULL, *done = NULL;
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  int rc = p->claim_next(ex, &item);
  if (rc == 0) {
    int drc = p->drive(ex, item, &done);
    if (drc) {
      /* The item stays where it stopped, for recovery; this executor
       * keeps serving the others. */
      dtx__tally_error(&sh->ran[i], json_object_get(item, "_id"), drc);
    } else {
      const char *s = p->kind ? dtx__str(done, p->kind->state) : NULL;
      dtx__tally_ran(&sh->ran[i], s ? s : "done", ran_count(p, done));
    }
  } else if (rc != DTX_ENOMATCH) {
    dtx__tally_error(&sh->ran[i], NULL, rc);
  }
  json_decref(item);
  json_decref(done);
  return dtx__call_end(&c, rc);
}

/* Claims up to sh's batch of pattern i's due items in one round and
 * drives them together (the pattern's claim_many/drive_many): as run_one,
 * counted per item; the batch shares one call frame, so one deadline
 * bounds it as it bounds one item. */
static int run_batch(shared_t *sh, dtx__exec_t *ex, size_t i) {
  const dtx__pattern_t *p = dtx__patterns[i];
  json_t *items = NULL;
  dtx__call_t c;
  dtx__call_begin(&c, ex->deadline_ms);
  int rc = p->claim_many(ex, (size_t)sh->batch, &items);
  if (rc == 0) {
    size_t n = json_array_size(items);
    json_t **outs = calloc(n, sizeof *outs);
    int *rcs = calloc(n, sizeof *rcs);
    char **details = calloc(n, sizeof *details);
    if (outs && rcs && details) {
      p->drive_many(ex, items, outs, rcs, details);
    } else {
      /* Claimed, not run: their leases lapse and recovery takes them. */
      for (size_t k = 0; rcs && k < n; k++)
        rcs[k] = DTX_ENOMEM;
    }
    for (size_t k = 0; k < n; k++) {
      json_t *id = json_object_get(json_array_get(items, k), "_id");
      int drc = rcs ? rcs[k] : DTX_ENOMEM;
      if (drc) {
        const char *d = details ? details[k] : NULL;
        dtx__err(drc, "%s", d ? d : dtx_strerror(drc));
        dtx__tally_error(&sh->ran[i], id, drc);
      } else {
        const char *s = p->kind ? dtx__str(outs[k], p->kind->state) : NULL;
        dtx__tally_ran(&sh->ran[i], s ? s : "done", ran_count(p, outs[k]));
      }
      if (outs)
        json_decref(outs[k]);
      if (details)
        free(details[k]);
    }
    free(outs);
    free(rcs);
    free(details);
  } else if (rc != DTX_ENOMATCH) {
    dtx__tally_error(&sh->ran[i], NULL, rc);
  }
  json_decref(items);
  return dtx__call_end(&c, rc);
}

static void *work(void *arg) {
  dtx__thread_t *w = arg;
  shared_t *sh = w->shared;
  dtx__exec_t ex;
  dtx__exec_init_thread(&ex, w, sh->st, sh->o->owner, sh->o->lease_ms,
                        sh->o->deadline_ms);
  dtx__idle_t idle = {0};
  while (!stopping(sh)) {
    int did = 0, failed = 0;
    for (size_t i = 0; i < sh->npat && !stopping(sh); i++) {
      if (!dtx__patterns[i]->claim_next)
        continue;
      const dtx__pattern_t *p = dtx__patterns[i];
      int rc = sh->batch > 1 && p->claim_many && p->drive_many
                   ? run_batch(sh, &ex, i)
                   : run_one(sh, &ex, i);
      if (rc == 0) {
        did = 1;
      } else if (rc != DTX_ENOMATCH) {
        failed = 1;
        if (sh->o->once || rc == DTX_ENOMEM) {
          /* The store cannot be reached (its deadline passed): --once
           * must say so, not wait on. */
          int zero = 0;
          atomic_compare_exchange_strong(&sh->fatal, &zero, rc);
        }
      }
    }
    if (did) {
      dtx__idle_busy(&idle);
      continue;
    }
    if (failed) {
      dtx__idle_failed();
      continue;
    }
    if (dtx__idle_round(&idle, &sh->pacer, &ex, sh->o->once))
      break;
  }
  return NULL;
}

int dtx_worker_opts_check(const dtx_worker_opts_t *o) {
  if (!o)
    return 0;
  if (o->threads > 256)
    return dtx__err(DTX_EINVAL, "at most 256 threads");
  if (o->batch < 0 || o->batch > DTX__CLAIM_MANY_MAX)
    return dtx__err(DTX_EINVAL, "worker batch %d: 1 to %d", o->batch,
                    DTX__CLAIM_MANY_MAX);
  return dtx__check_owner(o->owner);
}

int dtx_worker_run(dtx_store_t *st, const dtx_worker_opts_t *opts,
                   json_t **summary) {
  dtx_worker_opts_t def = {0};
  const dtx_worker_opts_t *o = opts ? opts : &def;
  int n = o->threads > 0 ? o->threads : 1, rc = 0;
  dtx__call_t c;
  if (summary)
    *summary = NULL;
  dtx__call_begin(&c, 0);
  if ((rc = dtx_worker_opts_check(o)))
    return dtx__call_end(&c, rc);
  shared_t sh = {.st = st, .o = o, .npat = dtx__pattern_count(),
                 .batch = o->batch ? o->batch : DTX__WORKER_BATCH};
  sh.ran = calloc(sh.npat + 1, sizeof *sh.ran);
  sh.skipped = calloc(sh.npat + 1, sizeof *sh.skipped);
  if (!sh.ran || !sh.skipped)
    rc = DTX_ENOMEM;
  for (size_t i = 0; rc == 0 && i < sh.npat; i++)
    if ((rc = dtx__tally_init(&sh.ran[i])) == 0)
      rc = dtx__tally_init(&sh.skipped[i]);
  /* The patterns the store uses get their indexes and rules before the
   * first claim; the others are left uncreated (their claims find
   * nothing, and recovery passes ensure a pattern once its collections
   * appear).  Not listed: every pattern, which meets the store's error. */
  json_t *names = NULL;
  if (rc == 0 && dtx__kit_colls(st, &names))
    names = NULL;
  for (size_t i = 0; rc == 0 && i < sh.npat; i++)
    if (!dtx__kit_unused(dtx__patterns[i], names))
      rc = dtx__kit_ensure(st, dtx__patterns[i]);
  json_decref(names);
  if (rc == 0) {
    dtx__pacer_init(&sh.pacer, recover_pass, &sh);
    rc = dtx__run_threads(n, work, &sh, &sh.fatal);
    dtx__pacer_destroy(&sh.pacer);
    /* The skips of the last recovery pass go into the summary. */
    for (size_t i = 0; i < sh.npat; i++)
      json_object_set(sh.ran[i].obj, "skipped",
                      json_object_get(sh.skipped[i].obj, "skipped"));
    if (rc == 0)
      rc = dtx__tally_raise(sh.ran);
    if (summary)
      *summary = dtx__tally_report(sh.ran, rc);
  }
  for (size_t i = 0; i < sh.npat; i++) {
    if (sh.ran)
      dtx__tally_free(&sh.ran[i]);
    if (sh.skipped)
      dtx__tally_free(&sh.skipped[i]);
  }
  free(sh.ran);
  free(sh.skipped);
  /* A worker that is told to keep going returns only when stopped; what
   * failed on the way is in the summary.  --once reports the first error
   * (exit 4 from the CLI for an unreachable store). */
  if (!o->once && !atomic_load(&sh.fatal))
    rc = rc == DTX_ENOMEM ? rc : 0;
  return dtx__call_end(&c, rc);
}
