/* kit_tally.c -- the per-pattern summaries that `worker --once` and
 * `recover` print: what ran, what was skipped and why, and what failed.
 *
 * Worker threads fill one tally at once, so every change takes its
 * mutex.  Lists of ids and errors keep only the first few: a summary of a
 * pass over a million items must stay one readable line. */
#include "txn/kit.h"

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
