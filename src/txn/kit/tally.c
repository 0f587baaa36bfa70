/* tally.c -- the per-pattern summaries that `worker --once` and
 * `recover` print: what ran, what was skipped and why, and what failed.
 *
 * Worker threads fill one tally at once, so every change takes its
 * mutex.  Lists of ids and errors keep only the first few: a summary of a
 * pass over a million items must stay one readable line.
 *
 * It also keeps the workers' pace (dtx__pacer_*, dtx__idle_*): when the
 * recovery pass runs and how an idle thread waits, shared by the generic
 * worker and the job runner so the two loops cannot drift apart. */
#include "doc/doc.h"
#include "txn/kit/kit.h"
#include "util/err.h"

#include <pthread.h>
#include <stdlib.h>

#define KEEP 5 /* ids per skip reason, errors in "first" */

int dtx__tally_init(dtx__tally_t *t) {
  pthread_mutex_t *m = malloc(sizeof *m);
  t->obj = json_pack("{s:{},s:{},s:{s:i,s:[]}}", "ran", "skipped", "errors",
                     "count", 0, "first");
  t->first_err = 0;
  t->lock = m;
  if (!m || !t->obj) {
    free(m);
    json_decref(t->obj);
    t->obj = NULL;
    t->lock = NULL;
    return DTX_ENOMEM;
  }
  pthread_mutex_init(m, NULL);
  return 0;
}

void dtx__tally_free(dtx__tally_t *t) {
  if (t->lock) {
    pthread_mutex_destroy(t->lock);
    free(t->lock);
  }
  json_decref(t->obj);
  t->obj = NULL;
  t->lock = NULL;
}

static void add(json_t *obj, const char *key, int64_t n) {
  json_t *v = json_object_get(obj, key);
  if (v)
    json_integer_set(v, json_integer_value(v) + n);
  else
    json_object_set_new(obj, key, json_integer((json_int_t)n));
}

void dtx__tally_ran(dtx__tally_t *t, const char *what, int64_t n) {
  pthread_mutex_lock(t->lock);
  add(json_object_get(t->obj, "ran"), what, n);
  pthread_mutex_unlock(t->lock);
}

void dtx__tally_skip(dtx__tally_t *t, const char *why, const json_t *id) {
  pthread_mutex_lock(t->lock);
  json_t *sk = json_object_get(t->obj, "skipped");
  json_t *r = json_object_get(sk, why);
  if (!r) {
    json_object_set_new(sk, why, json_pack("{s:i,s:[]}", "count", 0, "ids"));
    r = json_object_get(sk, why);
  }
  add(r, "count", 1);
  json_t *ids = json_object_get(r, "ids");
  if (id && json_array_size(ids) < KEEP)
    json_array_append(ids, (json_t *)id);
  pthread_mutex_unlock(t->lock);
}

void dtx__tally_error(dtx__tally_t *t, const json_t *id, int rc) {
  json_t *e = json_pack("{s:O?,s:s,s:s}", "id", (json_t *)id, "error",
                        dtx_errname(rc), "detail",
                        *dtx_errdetail() ? dtx_errdetail() : dtx_strerror(rc));
  pthread_mutex_lock(t->lock);
  json_t *errs = json_object_get(t->obj, "errors");
  add(errs, "count", 1);
  if (!t->first_err)
    t->first_err = rc;
  json_t *first = json_object_get(errs, "first");
  if (e && json_array_size(first) < KEEP)
    json_array_append(first, e);
  pthread_mutex_unlock(t->lock);
  json_decref(e);
}

void dtx__tally_merge(dtx__tally_t *dst, const dtx__tally_t *src) {
  const char *k;
  json_t *v;
  size_t i;
  pthread_mutex_lock(dst->lock);
  json_object_foreach(json_object_get(src->obj, "ran"), k, v)
      add(json_object_get(dst->obj, "ran"), k, json_integer_value(v));
  json_t *se = json_object_get(src->obj, "errors");
  json_t *de = json_object_get(dst->obj, "errors");
  add(de, "count", json_integer_value(json_object_get(se, "count")));
  json_array_foreach(json_object_get(se, "first"), i, v) {
    if (json_array_size(json_object_get(de, "first")) < KEEP)
      json_array_append(json_object_get(de, "first"), v);
  }
  if (!dst->first_err)
    dst->first_err = src->first_err;
  pthread_mutex_unlock(dst->lock);
}

/* ---- the workers' pace (kit.h) ------------------------------------------------ */

void dtx__pacer_init(dtx__pacer_t *p, int64_t (*pass)(void *, dtx__exec_t *),
                     void *arg) {
  pthread_mutex_init(&p->lock, NULL);
  p->last = 0;
  p->pass = pass;
  p->arg = arg;
}

void dtx__pacer_destroy(dtx__pacer_t *p) { pthread_mutex_destroy(&p->lock); }

int64_t dtx__pacer_recover(dtx__pacer_t *p, dtx__exec_t *ex, int force) {
  int64_t did = 0;
  /* A thread that finds another in the pass goes back to claiming. */
  if (pthread_mutex_trylock(&p->lock) != 0)
    return 0;
  if (force || dtx__now_ms() - p->last >= DTX__RECOVER_EVERY_MS) {
    did = p->pass(p->arg, ex);
    p->last = dtx__now_ms();
  }
  pthread_mutex_unlock(&p->lock);
  return did;
}

void dtx__idle_busy(dtx__idle_t *s) {
  s->rounds = 0;
  s->pause_ms = 1;
}

int dtx__idle_round(dtx__idle_t *s, dtx__pacer_t *p, dtx__exec_t *ex,
                    int once) {
  if (once)
    /* Nothing due: one last recovery pass; stop when it found nothing
     * either (twice, so work the pass freed is claimed first). */
    return dtx__pacer_recover(p, ex, 1) == 0 && ++s->rounds >= 2;
  dtx__pacer_recover(p, ex, 0);
  dtx__wait_t w = {.pause = s->pause_ms, .cap = DTX__IDLE_MAX_MS};
  dtx__kit_wait(&w, 0);
  s->pause_ms = w.pause;
  return 0;
}

void dtx__exec_init_thread(dtx__exec_t *ex, const dtx__thread_t *w,
                           dtx_store_t *st, const char *owner,
                           int64_t lease_ms, int64_t deadline_ms) {
  dtx__exec_init(ex, st, owner, lease_ms, deadline_ms);
  dtx__exec_rename(ex, "%.120s#%d", ex->owner, w->n);
}

void dtx__idle_failed(void) {
  dtx__wait_t w = {.pause = DTX__IDLE_MAX_MS};
  dtx__kit_wait(&w, 0);
}

int dtx__run_threads(int n, void *(*fn)(void *), void *shared,
                     atomic_int *fatal) {
  pthread_t tids[256];
  dtx__thread_t args[256];
  int started = 0, rc = 0;
  if (n < 1 || n > 256)
    return dtx__err(DTX_EINVAL, "%d worker threads: 1 to 256", n);
  for (int i = 0; i < n; i++) {
    args[i] = (dtx__thread_t){shared, i};
    if (pthread_create(&tids[i], NULL, fn, &args[i]) != 0) {
      rc = dtx__err(DTX_ENOMEM, "cannot start worker thread %d", i);
      atomic_store(fatal, rc);
      break;
    }
    started++;
  }
  for (int i = 0; i < started; i++)
    pthread_join(tids[i], NULL);
  return rc;
}
