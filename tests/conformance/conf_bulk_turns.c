/* conf_bulk_turns.c -- conformance (Redis only): a wait for a document's
 * turn keeps the call's deadline.
 *
 * Threads of one process writing one hot document take turns (a mutex by
 * key hash: redis/bulk.c, redis/modify.c).  When the server stops
 * answering, the thread holding the turn spends its whole retry window;
 * a waiter must not queue behind it past its own window.  8 threads of
 * one store handle write one document, 4 by single calls, 4 by batches,
 * with retry_ms=800 and timeout_ms=200; then every node is paused
 * (CLIENT PAUSE ALL, 4 s).  Every call must end within its budget plus
 * slack after the pause began -- not when the pause ends.  (Before, a
 * single call waited for the turn unbounded: up to the whole pause.)
 * Meanwhile one batch on 8 collections not read yet must end within one
 * budget too (before, each operation's catalog read waited a window of
 * its own, and the batch waited out the pause).
 * About 6 s; other backends skip. */
#define CONF_NO_WRAP
#include "conf.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { TD_THREADS = 8, TD_RETRY = 800, TD_TIMEOUT = 200, TD_PAUSE = 4000 };

typedef struct td_shared {
  dtx_store_t *st;
  const char *coll;
  int64_t pause_at, end_at; /* conf_now_ms; pause_at set by the main thread */
  int64_t worst[2]; /* ms a call ran after max(start, pause_at): single,
                       bulk */
  int64_t calls;
  int started;
} td_shared_t;

static void *td_thread(void *arg) {
  td_shared_t *s = arg;
  json_t *f = json_pack("{s:i}", "_id", 1);
  json_t *u = json_pack("{s:{s:i}}", "$inc", "n", 1);
  /* half the threads make single calls, half batches */
  int me = __atomic_fetch_add(&s->started, 1, __ATOMIC_SEQ_CST);
  while (conf_now_ms() < __atomic_load_n(&s->end_at, __ATOMIC_SEQ_CST)) {
    int64_t t0 = conf_now_ms();
    int bulk = me % 2;
    if (!bulk) {
      json_t *out = NULL;
      (void)dtx_store_find_one_and_update(s->st, s->coll, f, u, NULL, &out);
      json_decref(out);
    } else {
      dtx_bulk_op_t ops[4];
      dtx_bulk_result_t r[4];
      for (int i = 0; i < 4; i++)
        ops[i] = (dtx_bulk_op_t){.kind = DTX_BULK_UPDATE_ONE,
                                 .coll = s->coll, .filter = f, .update = u};
      (void)dtx_store_bulk_write(s->st, ops, 4, r);
      dtx_bulk_results_clear(r, 4);
    }
    int64_t t1 = conf_now_ms();
    int64_t p = __atomic_load_n(&s->pause_at, __ATOMIC_SEQ_CST);
    if (p > 0 && t1 > p) {
      int64_t ran = t1 - (t0 > p ? t0 : p);
      int64_t w = __atomic_load_n(&s->worst[bulk], __ATOMIC_SEQ_CST);
      while (ran > w && !__atomic_compare_exchange_n(&s->worst[bulk], &w, ran, 0,
                                                     __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST))
        ;
    }
    __atomic_fetch_add(&s->calls, 1, __ATOMIC_SEQ_CST);
  }
  json_decref(f);
  json_decref(u);
  return NULL;
}

/* CLIENT PAUSE ms ALL on one node: 1 when it took it. */
static int td_pause_one(void *ctx, void *arg) {
  redisReply *r = redisCommand(ctx, "CLIENT PAUSE %d ALL", *(int *)arg);
  int ok = r && r->type == REDIS_REPLY_STATUS;
  freeReplyObject(r);
  return ok;
}

/* Pauses the server and, on a cluster, every node CLUSTER NODES lists.
 * The number of nodes paused. */
static int td_pause_all(int ms) {
  return conf_redis_each_node(0, td_pause_one, &ms, 0);
}

void conf_test_turn_deadline(void) {
  if (strncmp(conf_uri, "redis://", 8) != 0) {
    conf_skip("Redis only (pauses the server)");
    return;
  }
  if (conf_via_bulk()) { /* it makes its own calls: once is enough */
    conf_skip("runs in the plain conformance run");
    return;
  }
  char host[256];
  int port = 0;
  if (sscanf(conf_uri + 8, "%255[^:]:%d", host, &port) != 2) {
    conf_skip("cannot read host:port from the URI");
    return;
  }
  char uri[1024];
  snprintf(uri, sizeof uri, "%s%sretry_ms=%d&timeout_ms=%d", conf_uri,
           strchr(conf_uri, '?') ? "&" : "?", TD_RETRY, TD_TIMEOUT);
  td_shared_t s = {.coll = conf_coll("bulk_turn_deadline")};
  REQUIRE(dtx_store_open(uri, &s.st) == 0);
  json_t *d = json_pack("{s:i,s:i}", "_id", 1, "n", 0);
  CHECK_RC(dtx_store_insert(s.st, s.coll, d, NULL), 0);
  json_decref(d);
  s.end_at = conf_now_ms() + 1000 + TD_PAUSE + 500;
  pthread_t th[TD_THREADS];
  int nt = 0;
  for (; nt < TD_THREADS; nt++)
    if (pthread_create(&th[nt], NULL, td_thread, &s) != 0)
      break;
  usleep(1000 * 1000); /* contention first: turns are being taken */
  int64_t at = conf_now_ms();
  int paused = td_pause_all(TD_PAUSE);
  __atomic_store_n(&s.pause_at, at, __ATOMIC_SEQ_CST);
  /* Meanwhile one batch on 8 collections this handle has not read yet:
   * each operation needs its catalog, and they share one budget. */
  dtx_bulk_op_t ops[8];
  dtx_bulk_result_t r[8];
  for (int i = 0; i < 8; i++) {
    char name[32];
    snprintf(name, sizeof name, "bulk_turn_cat%d", i);
    ops[i] = (dtx_bulk_op_t){.kind = DTX_BULK_UPDATE_ONE,
                             .coll = conf_coll(name),
                             .filter = JQ("{'_id':1}"),
                             .update = JQ("{'$inc':{'n':1}}")};
  }
  int64_t b0 = conf_now_ms();
  (void)dtx_store_bulk_write(s.st, ops, 8, r);
  int64_t batch = conf_now_ms() - b0;
  dtx_bulk_results_clear(r, 8);
  for (int i = 0; i < nt; i++)
    pthread_join(th[i], NULL);
  dtx_store_close(s.st);
  CHECKF(nt == TD_THREADS && paused > 0, "%d threads, %d nodes paused", nt,
         paused);
  /* Budget: the window, one request in flight when it ends and one more
   * for the reply that reports it (deadline.sh's slack), and a loaded
   * machine's scheduling. */
  int64_t limit = TD_RETRY + 3 * TD_TIMEOUT + 800;
  printf("     %lld calls; after the %d ms pause began the longest single "
         "call ran %lld ms, batch %lld ms; the batch on 8 collections %lld "
         "ms (limit %lld)\n",
         (long long)s.calls, TD_PAUSE, (long long)s.worst[0],
         (long long)s.worst[1], (long long)batch, (long long)limit);
  /* Batches on the hot document: a read round, the catalog and, on a
   * cluster, a topology refresh each have a request in flight when the
   * budget ends, hence the extra second. */
  CHECKF(s.worst[1] <= limit + 1000, "a batch ran %lld ms into the pause",
         (long long)s.worst[1]);
  CHECKF(batch <= limit, "a batch on 8 collections ran %lld ms into the "
                         "pause (retry_ms %d): a window per operation",
         (long long)batch, TD_RETRY);
  CHECKF(s.worst[0] <= limit, "a call ran %lld ms into a %d ms pause (retry_ms "
                           "%d): it waited for its turn past its window",
         (long long)s.worst[0], TD_PAUSE, TD_RETRY);
}
