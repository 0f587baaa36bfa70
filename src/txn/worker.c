/* worker.c -- executor threads: claim initiated transfers with one
 * conditional update each (so any number of threads and processes can run
 * against one store), and now and then recover what others abandoned. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "doc/doc.h"
#include "txn/txn.h"
#include "util/err.h"

#define RECOVER_EVERY_MS 1000

typedef struct shared {
  dtx_store_t *st;
  const dtx_worker_opts_t *o;
  pthread_mutex_t recover_lock;
  int64_t last_recover;
  int first_err;
  pthread_mutex_t err_lock;
} shared_t;

typedef struct worker {
  shared_t *sh;
  int n;
} worker_t;

static int stopping(const shared_t *sh) {
  return sh->o->stop && *sh->o->stop;
}

/* One recovery pass at a time across threads; returns how much it did. */
static int64_t maybe_recover(shared_t *sh, int force) {
  int64_t did = 0, now = dtx__now_ms();
  if (pthread_mutex_trylock(&sh->recover_lock) != 0)
    return 0;
  if (force || now - sh->last_recover >= RECOVER_EVERY_MS) {
    dtx_recover_opts_t ro = {.older_than_ms = -1};
    json_t *sum = NULL;
    if (dtx_recover(sh->st, &ro, &sum) == 0 && sum) {
      const char *k;
      json_t *v;
      json_object_foreach(sum, k, v) if (strcmp(k, "errors") != 0) did +=
          json_integer_value(v);
    }
    json_decref(sum);
    sh->last_recover = dtx__now_ms();
  }
  pthread_mutex_unlock(&sh->recover_lock);
  return did;
}

static void *work(void *arg) {
  worker_t *w = arg;
  shared_t *sh = w->sh;
  dtx__exec_t ex;
  char owner[160];
  const char *base = sh->o->owner;
  dtx__exec_init(&ex, sh->st, base, sh->o->lease_ms);
  snprintf(owner, sizeof owner, "%.120s#%d", ex.owner, w->n);
  dtx__exec_init(&ex, sh->st, owner, sh->o->lease_ms);
  int idle = 0, errors = 0;
  while (!stopping(sh)) {
    json_t *done = NULL;
    int rc = dtx__tx_claim_next(&ex, &done);
    json_decref(done);
    if (rc == 0) {
      idle = errors = 0;
      continue;
    }
    if (rc != DTX_ENOMATCH) {
      /* The transfer in hand stays where it stopped, for recovery; this
       * executor keeps serving the others. */
      pthread_mutex_lock(&sh->err_lock);
      if (!sh->first_err)
        sh->first_err = rc;
      pthread_mutex_unlock(&sh->err_lock);
      if (rc == DTX_ENOMEM || (sh->o->once && ++errors > 100))
        break; /* a store that keeps failing must not pin a --once run */
      struct timespec pause = {0, 50 * 1000000L};
      nanosleep(&pause, NULL);
      continue;
    }
    if (sh->o->once) {
      /* Nothing to claim: one last recovery pass; stop when it found
       * nothing either. */
      if (maybe_recover(sh, 1) == 0 && ++idle >= 2)
        break;
      continue;
    }
    maybe_recover(sh, 0);
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

int dtx_worker_run(dtx_store_t *st, const dtx_worker_opts_t *opts) {
  dtx_worker_opts_t def = {0};
  const dtx_worker_opts_t *o = opts ? opts : &def;
  int n = o->threads > 0 ? o->threads : 1, rc;
  dtx__err_clear();
  if (n > 256)
    return dtx__err(DTX_EINVAL, "at most 256 threads");
  if ((rc = dtx__txn_ensure_indexes(st)))
    return rc;
  shared_t sh = {.st = st, .o = o};
  pthread_mutex_init(&sh.recover_lock, NULL);
  pthread_mutex_init(&sh.err_lock, NULL);
  pthread_t tids[256];
  worker_t ws[256];
  for (int i = 0; i < n; i++) {
    ws[i] = (worker_t){&sh, i};
    if (pthread_create(&tids[i], NULL, work, &ws[i]) != 0) {
      n = i;
      rc = dtx__err(DTX_ENOMEM, "cannot start worker thread %d", i);
      break;
    }
  }
  for (int i = 0; i < n; i++)
    pthread_join(tids[i], NULL);
  pthread_mutex_destroy(&sh.recover_lock);
  pthread_mutex_destroy(&sh.err_lock);
  if (rc)
    return rc;
  return sh.first_err && !dtx__transient(sh.first_err) ? sh.first_err : 0;
}
