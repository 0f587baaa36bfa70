/* hold.c -- holding a lease lock: acquire, renew in the background, tell
 * the holder when the lock is lost (docs/locks.md, "Holding a lock").
 *
 * Built on the lock's public calls only (lock.c: dtx_lock_acquire, _renew,
 * _release), so it adds no protocol step and no fault point of its own:
 * its renewals are lock.c's `lock.renew` step, and any failure of one --
 * an injected fault included -- is a loss.
 *
 *            start: acquire (lapse = the attempt's start + ttl)
 *   (none) -------------------------------------------------> held
 *                  every ttl/3: renew (lapse = ITS start + ttl)  | |
 *   held <-------------------------------------------------------+ |
 *     |                                                            |
 *     | a renewal fails, or the monotonic clock reaches lapse      |
 *     v   (on_lost(arg, rc), once, on the hold's thread)           |
 *   lost ---------- stop: release (the token may still be current:  |
 *     |              nothing else took it) ----> (freed)           |
 *     +-----------------------------------------------------------+
 *                   stop: release
 *
 *   transition    function       the lock's fault point
 *   none->held    start          lock.register, lock.create,
 *                                lock.acquire, lock.acquired
 *   held->held    keeper (timer  lock.renew
 *                 starts it)
 *   held->lost    keeper         (a renew's error, or the clock)
 *   ->freed       stop           lock.release
 *
 * Invariants:
 *  H1 lapse is measured on the monotonic clock from the START of the last
 *     call that succeeded (the acquire, then each renew): a lease the store
 *     gave is never shorter than that, whatever its clock, so while the
 *     keeper runs, it reports a loss no later than any other holder could
 *     take the lock.  A paused process counts the pause: a renew that
 *     succeeded after one still lapses, from its start.
 *  H2 on_lost is called at most once, and never after stop began.
 *  H3 after a loss the keeper renews no more: a token reported lost is
 *     never reported held again.
 * What no keeper can give: a process stopped (SIGSTOP, swapped out) as a
 * whole cannot act while another takes the lock.  That is the fence's
 * job: the next holder's token refuses the old one's writes.
 *
 * A hold's keeper thread starts only when its first renewal is due: until
 * then one process-wide timer thread (started once, never doing I/O, so
 * never stuck behind a store) keeps the hold on its list.  A hold shorter
 * than ttl/3 -- most of them -- so costs no thread, and its stop waits
 * for no other thread; a thread per hold cost more than the acquire and
 * release themselves on a busy machine (bench/bench_lock.c).  No lapse can
 * come before the first renewal is due (ttl/3 < ttl), and a keeper checks
 * the lapse before anything else, so a timer delayed by a pause still
 * leads to the loss. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "txn/kit/kit.h"
#include "util/assert.h"
#include "util/deadline.h"
#include "util/err.h"

struct dtx_lock_hold {
  dtx_store_t *st;
  char name[129];
  int64_t token, ttl_ms;
  json_t *view; /* the acquire's view */
  dtx_lock_lost_fn on_lost;
  void *arg;
  pthread_t thread;
  int pending;       /* on the timer's list, no keeper yet (under list_mu) */
  int started;       /* the keeper thread exists (under list_mu) */
  dtx_lock_hold_t *next_pending;
  pthread_mutex_t mu;
  pthread_cond_t cv; /* CLOCK_MONOTONIC: stop wakes the keeper */
  int stopping;      /* stop began (under mu) */
  int lost;          /* 0, or the loss's code (under mu) */
  char why[512];     /* the loss's detail (under mu) */
  int64_t lapse;     /* monotonic ms: the lease's end by H1 (keeper only) */
};

/* Waits on cv (CLOCK_MONOTONIC) until the monotonic ms `until`; mx held. */
static void cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mx,
                            int64_t until) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t left = until - dtx__mono_ms();
  if (left <= 0)
    return;
  if (left > 3600000)
    left = 3600000; /* then look again: no timespec overflow */
  ts.tv_sec += (time_t)(left / 1000);
  ts.tv_nsec += (long)(left % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(cv, mx, &ts);
}

/* held -> lost: records why (mu held), once (H2, H3). */
static void mark_lost(dtx_lock_hold_t *h, int rc, const char *detail) {
  DTX_ASSERT(!h->lost, "H3");
  h->lost = rc;
  snprintf(h->why, sizeof h->why, "%s", detail);
}

/* The keeper: renews every ttl/3 until a stop or a loss. */
static void *keeper(void *p) {
  dtx_lock_hold_t *h = p;
  int64_t every = h->ttl_ms / 3 > 0 ? h->ttl_ms / 3 : 1;
  int64_t next = dtx__add_sat(dtx__sub_sat(h->lapse, h->ttl_ms), every);
  int call = 0;
  char detail[512];
  pthread_mutex_lock(&h->mu);
  while (!h->stopping) {
    int64_t now = dtx__mono_ms();
    if (now >= h->lapse) { /* H1: no renewal in time */
      snprintf(detail, sizeof detail,
               "lock '%s' token %lld: lease lapsed: no renewal succeeded "
               "within its %lld ms ttl",
               h->name, (long long)h->token, (long long)h->ttl_ms);
      mark_lost(h, DTX_ESTALE, detail);
      call = 1;
      break;
    }
    if (now < next) {
      cond_wait_until(&h->cv, &h->mu, next < h->lapse ? next : h->lapse);
      continue;
    }
    pthread_mutex_unlock(&h->mu);
    /* Bounded by the lease's end: a renew still waiting then is too late
     * to matter (the loop reports the lapse). */
    int64_t start = dtx__mono_ms();
    dtx_lock_opts_t o = {.ttl_ms = h->ttl_ms,
                         .deadline_ms = h->lapse - start > 0
                                            ? h->lapse - start : 1};
    int rc = dtx_lock_renew(h->st, h->name, h->token, &o, NULL);
    if (rc)
      snprintf(detail, sizeof detail, "lock '%s' token %lld: renew: %s: %s",
               h->name, (long long)h->token, dtx_errname(rc),
               dtx_errdetail());
    pthread_mutex_lock(&h->mu);
    if (h->stopping)
      break;
    if (rc) {
      mark_lost(h, rc, detail);
      call = 1;
      break;
    }
    h->lapse = dtx__add_sat(start, h->ttl_ms); /* H1: from its start */
    next = dtx__add_sat(start, every);
  }
  pthread_mutex_unlock(&h->mu);
  if (call && h->on_lost) { /* H2: stopping was not set when it was lost */
    dtx__err(h->lost, "%s", h->why);
    h->on_lost(h->arg, h->lost);
  }
  return NULL;
}

/* ---- the timer: starts a hold's keeper when its first renewal is due -- */

static pthread_mutex_t list_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t list_cv;         /* CLOCK_MONOTONIC (timer_init) */
static dtx_lock_hold_t *list_head;     /* the pending holds */
static int timer_ok;                   /* the timer thread runs */
static int64_t timer_wake = INT64_MAX; /* when the timer wakes by itself */
static pthread_once_t timer_once = PTHREAD_ONCE_INIT;

/* When h's first renewal is due (monotonic ms). */
static int64_t first_due(const dtx_lock_hold_t *h) {
  int64_t every = h->ttl_ms / 3 > 0 ? h->ttl_ms / 3 : 1;
  return dtx__add_sat(dtx__sub_sat(h->lapse, h->ttl_ms), every);
}

/* Starts h's keeper, h taken off the list (list_mu held).  A keeper that
 * cannot start is a loss: nothing would renew the lease. */
static void start_keeper(dtx_lock_hold_t *h) {
  h->pending = 0;
  h->started = pthread_create(&h->thread, NULL, keeper, h) == 0;
  if (!h->started) {
    pthread_mutex_lock(&h->mu);
    h->lost = DTX_ENOMEM;
    snprintf(h->why, sizeof h->why,
             "lock '%s' token %lld: its keeper thread could not start",
             h->name, (long long)h->token);
    pthread_mutex_unlock(&h->mu);
    if (h->on_lost) {
      dtx__err(DTX_ENOMEM, "%s", h->why);
      h->on_lost(h->arg, DTX_ENOMEM);
    }
  }
}

static void *timer(void *unused) {
  (void)unused;
  pthread_mutex_lock(&list_mu);
  for (;;) {
    int64_t now = dtx__mono_ms(), soonest = INT64_MAX;
    dtx_lock_hold_t **pp = &list_head;
    while (*pp) {
      dtx_lock_hold_t *h = *pp;
      int64_t due = first_due(h);
      if (due <= now) {
        *pp = h->next_pending;
        start_keeper(h);
        continue;
      }
      if (due < soonest)
        soonest = due;
      pp = &h->next_pending;
    }
    /* A hold that leaves the list does not wake the timer: it wakes as
     * planned and finds nothing due. */
    timer_wake = soonest;
    if (soonest == INT64_MAX)
      pthread_cond_wait(&list_cv, &list_mu);
    else
      cond_wait_until(&list_cv, &list_mu, soonest);
  }
  return NULL;
}

static void timer_init(void) {
  pthread_condattr_t ca;
  pthread_t t;
  if (pthread_condattr_init(&ca) != 0)
    return;
  int cv = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
           pthread_cond_init(&list_cv, &ca) == 0;
  pthread_condattr_destroy(&ca);
  /* The timer and the keepers it starts take no signal: the
   * application's handlers run on its own threads, and no handler
   * interrupts a renewal's I/O. */
  sigset_t all, was;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &was);
  if (cv && pthread_create(&t, NULL, timer, NULL) == 0) {
    pthread_detach(t);
    timer_ok = 1;
  }
  pthread_sigmask(SIG_SETMASK, &was, NULL);
}

int dtx_lock_hold_start(dtx_store_t *st, const char *name,
                        const dtx_lock_opts_t *opts, dtx_lock_lost_fn on_lost,
                        void *arg, dtx_lock_hold_t **out) {
  dtx_lock_opts_t o = opts ? *opts : (dtx_lock_opts_t){0};
  json_t *view = NULL;
  *out = NULL;
  if (!st)
    return dtx__err(DTX_EINVAL, "lock hold: no store");
  int rc = dtx_lock_check(name, &o);
  if (rc)
    return rc;
  /* A semaphore's holder fences by its slot's name, not the lock's, which
   * a hold's callers are told to use: one holder only. */
  if (o.max > 1)
    return dtx__err(DTX_EINVAL,
                    "lock '%s': a hold takes a lock of one holder (max %lld)",
                    name, (long long)o.max);
  int64_t ttl = o.ttl_ms > 0 ? o.ttl_ms : DTX__DEFAULT_LEASE_MS;
  int64_t start = dtx__mono_ms();
  if ((rc = dtx_lock_acquire(st, name, &o, &view)))
    return rc;
  int64_t token = json_integer_value(json_object_get(view, "token"));
  /* A wait makes the call's start an early bound of the lease (H1 would
   * cut it short, a whole lapse when the wait outlasted a ttl): renew at
   * once, and count from that renew's start instead. */
  if (dtx__mono_ms() - start > ttl / 3) {
    int64_t again = dtx__mono_ms();
    rc = dtx_lock_renew(st, name, token, &(dtx_lock_opts_t){.ttl_ms = ttl},
                        NULL);
    if (rc) {
      char why[400];
      snprintf(why, sizeof why, "%s", dtx_errdetail());
      dtx_lock_release(st, name, token, NULL); /* nothing held on error */
      json_decref(view);
      return dtx__err(rc, "lock '%s' token %lld: the first renew: %s", name,
                      (long long)token, why);
    }
    start = again;
  }
  pthread_once(&timer_once, timer_init);
  dtx_lock_hold_t *h = timer_ok ? calloc(1, sizeof *h) : NULL;
  pthread_condattr_t ca;
  int cv = 0, mu = 0;
  if (h) {
    *h = (dtx_lock_hold_t){.st = st, .token = token, .ttl_ms = ttl,
                           .view = view, .on_lost = on_lost, .arg = arg,
                           .lapse = dtx__add_sat(start, ttl)};
    snprintf(h->name, sizeof h->name, "%s", name);
    mu = pthread_mutex_init(&h->mu, NULL) == 0;
    if (pthread_condattr_init(&ca) == 0) {
      cv = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
           pthread_cond_init(&h->cv, &ca) == 0;
      pthread_condattr_destroy(&ca);
    }
  }
  if (!mu || !cv) {
    /* The lock is ours: give it back rather than leave it to lapse. */
    dtx_lock_release(st, name, token, NULL);
    if (cv)
      pthread_cond_destroy(&h->cv);
    if (mu)
      pthread_mutex_destroy(&h->mu);
    free(h);
    json_decref(view);
    return dtx__err(DTX_ENOMEM, "lock '%s' token %lld: setting up its keeper",
                    name, (long long)token);
  }
  /* Pending: the timer starts its keeper when the first renewal is due. */
  pthread_mutex_lock(&list_mu);
  h->pending = 1;
  h->next_pending = list_head;
  list_head = h;
  /* Woken only when it would wake too late for this one: holds of one
   * ttl started one after another wake it about once per ttl/3, not once
   * each. */
  if (first_due(h) < timer_wake) {
    timer_wake = first_due(h);
    pthread_cond_signal(&list_cv);
  }
  pthread_mutex_unlock(&list_mu);
  *out = h;
  return 0;
}

int64_t dtx_lock_hold_token(const dtx_lock_hold_t *h) { return h->token; }

json_t *dtx_lock_hold_view(const dtx_lock_hold_t *h) { return h->view; }

int dtx_lock_hold_lost(dtx_lock_hold_t *h) {
  pthread_mutex_lock(&h->mu);
  int rc = h->lost;
  pthread_mutex_unlock(&h->mu);
  return rc;
}

int dtx_lock_hold_stop(dtx_lock_hold_t *h, json_t **out) {
  if (out)
    *out = NULL;
  if (!h)
    return 0;
  pthread_mutex_lock(&list_mu);
  if (h->pending) { /* no keeper yet: off the list, and that is all */
    dtx_lock_hold_t **pp = &list_head;
    while (*pp != h)
      pp = &(*pp)->next_pending;
    *pp = h->next_pending;
    h->pending = 0;
  }
  int started = h->started;
  pthread_mutex_unlock(&list_mu);
  pthread_mutex_lock(&h->mu);
  h->stopping = 1;
  pthread_cond_signal(&h->cv);
  pthread_mutex_unlock(&h->mu);
  if (started)
    pthread_join(h->thread, NULL);
  /* Released even after a loss: a lapse alone leaves the token current
   * (no one took it), and then the release frees the lock at once. */
  int rc = dtx_lock_release(h->st, h->name, h->token, out);
  if (h->lost)
    rc = dtx__err(DTX_ESTALE, "%s", h->why);
  else if (rc == DTX_ENOMATCH) /* taken by another between two renewals */
    rc = dtx__err_wrap(DTX_ESTALE, "lock '%s' token %lld was lost",
                       h->name, (long long)h->token);
  pthread_cond_destroy(&h->cv);
  pthread_mutex_destroy(&h->mu);
  json_decref(h->view);
  free(h);
  return rc;
}
