/* lock.c -- lease locks (src/txn/lock/) through the public C API on a real
 * store: tokens strictly increasing across release and expiry, held and
 * no-longer-current outcomes, bad arguments refused, the view's shape,
 * listing; tokens that never go back for a name that fenced a write, also
 * after its lock was deleted or its collection dropped with
 * --bypass-validation, and the audit's findings about it; the one rule
 * for owner names; then mutual exclusion under load: 8 threads, each with its own
 * store handle, take one lock for about a second with 30 ms leases and
 * random pauses (so leases lapse), each fenced-writing a counter under
 * it; in the counter's order every accepted write's token is greater than
 * the one before, and no token is accepted twice; and holding a lock
 * (dtx_lock_hold_*: renewed by its keeper, a loss reported once).
 * the one before, and no token is accepted twice.
 * Semaphores (src/txn/lock/sem.c): the outcomes (slots, their fence
 * names, max refused when it differs, a stale holder of one slot FENCED
 * while the other slots' newer holders write, tampering refused or
 * audited), then 8 threads on a semaphore of max 3 while a sampler reads
 * it: never 4 holders, by the store or by the threads' own count, no
 * holder fenced by another slot's, and a lapsed lease frees its slot.
 * Leader election (src/txn/lock/elect.c): 3 threads campaign, each
 * leader renews a few times and then stops (dies): one leader per term,
 * terms growing in the order they were won.
 * Fair waiting (src/txn/lock/queue.c): 8 waiters, each started once the
 * one before holds its ticket, and one more that gives up mid-wait, get
 * the lock in ticket order once its holder releases it; an acquire that
 * does not wait is refused while they are ahead.
 *
 * usage: txn_lock STORE-URI   (collections locks and lock_res are dropped
 * first) */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doc/doc.h"
#include "testlib.h"
#include "util/err.h"

static const char *uri;

static dtx_store_t *open_store(void) { return dtx_t_open(uri); }

static int64_t token_of(const json_t *v) {
  return json_integer_value(json_object_get(v, "token"));
}

/* A fresh lock pattern: its locks (with their tombstones) and the
 * registry of names. */
static void drop_locks(dtx_store_t *st) {
  dtx_store_drop_collection_ex(st, "locks", &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, "lock_names", &(dtx_drop_opts_t){1});
}

static void test_semantics(void) {
  dtx_store_t *st = open_store();
  drop_locks(st);
  json_t *v = NULL;
  dtx_lock_opts_t o = {.owner = "c1", .ttl_ms = 60000};
  CHECK_RC(dtx_lock_acquire(st, "L", &o, &v), 0);
  CHECK(token_of(v) == 1);
  CHECK(json_is_true(json_object_get(v, "held")));
  CHECK(strcmp(json_string_value(json_object_get(v, "owner")), "c1") == 0);
  json_decref(v);
  /* Held: NOMATCH naming the holder, nothing returned. */
  o.owner = "c2";
  CHECK_RC(dtx_lock_acquire(st, "L", &o, &v), DTX_ENOMATCH);
  CHECK(v == NULL && strstr(dtx_errdetail(), "held by c1 (token 1)"));
  CHECK_RC(dtx_lock_renew(st, "L", 2, NULL, &v), DTX_ENOMATCH);
  CHECK_RC(dtx_lock_renew(st, "nolock", 1, NULL, &v), DTX_ENOTFOUND);
  /* A 1 ms renew makes it lapse; the next acquire gets 2, waiting. */
  dtx_lock_opts_t shrt = {.ttl_ms = 1};
  CHECK_RC(dtx_lock_renew(st, "L", 1, &shrt, NULL), 0);
  o.wait_ms = 2000;
  CHECK_RC(dtx_lock_acquire(st, "L", &o, &v), 0);
  CHECK(token_of(v) == 2);
  json_decref(v);
  CHECK_RC(dtx_lock_release(st, "L", 1, NULL), DTX_ENOMATCH);
  CHECK_RC(dtx_lock_release(st, "L", 2, &v), 0);
  CHECK(json_is_null(json_object_get(v, "owner")) && token_of(v) == 2);
  CHECK(json_is_false(json_object_get(v, "held")));
  json_decref(v);
  CHECK_RC(dtx_lock_release(st, "L", 2, NULL), DTX_ENOMATCH);
  CHECK_RC(dtx_lock_acquire(st, "L", NULL, &v), 0);
  CHECK(token_of(v) == 3);
  json_decref(v);
  CHECK_RC(dtx_lock_get(st, "L", &v), 0);
  CHECK(token_of(v) == 3 && json_object_size(v) == 5);
  json_decref(v);
  CHECK_RC(dtx_lock_get(st, "none", &v), DTX_ENOTFOUND);
  CHECK_RC(dtx_lock_acquire(st, "M", NULL, NULL), 0);
  dtx_page_t page = {.skip = 1, .limit = 5};
  CHECK_RC(dtx_lock_list(st, &page, &v), 0);
  CHECK(json_array_size(v) == 1 &&
        token_of(json_array_get(v, 0)) == 1);
  json_decref(v);
  /* Bad arguments: INVAL, nothing taken. */
  dtx_lock_opts_t bad1 = {.ttl_ms = -1}, bad2 = {.wait_ms = -5},
                  bad3 = {.owner = "a b"};
  CHECK_RC(dtx_lock_acquire(st, "N", &bad1, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_acquire(st, "N", &bad2, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_acquire(st, "N", &bad3, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_acquire(st, "a/b", NULL, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_release(st, "L", 0, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_get(st, "N", &v), DTX_ENOTFOUND);
  /* Never deleted: the delete guard refuses. */
  json_t *f = json_pack("{s:s}", "_id", "L");
  int64_t n = -1;
  CHECK_RC(dtx_store_delete(st, "locks", f, 0, &n), DTX_EVALIDATION);
  json_decref(f);
  dtx_store_close(st);
}

/* ---- tokens never go back (docs/locks.md, "A deleted lock") --------------- */

static int64_t acquire_release(dtx_store_t *st, const char *name) {
  json_t *v = NULL;
  int rc = dtx_lock_acquire(st, name, NULL, &v);
  CHECKF(rc == 0, "acquire %s: %s", name, dtx_errdetail());
  int64_t t = token_of(v);
  json_decref(v);
  CHECK_RC(dtx_lock_release(st, name, t, NULL), 0);
  return t;
}

static void sem_write(dtx_store_t *st, const char *name, int64_t t,
                         int want) {
  json_t *f = json_pack("{s:s}", "_id", "r");
  json_t *u = json_pack("{s:{s:I}}", "$set", "v", (json_int_t)t);
  dtx_update_opts_t o = {.upsert = 1, .fence_name = name, .fence_token = t};
  dtx_update_result_t res;
  int rc = dtx_store_update(st, "lock_res6", f, u, &o, &res);
  CHECKF(rc == want, "fenced write %s:%lld: %s (%s)", name, (long long)t,
         dtx_errname(rc), dtx_errdetail());
  json_decref(res.upserted_id);
  json_decref(f);
  json_decref(u);
}

/* The audit's outcome, and whether kind is among its lock findings. */
static int audit_has(dtx_store_t *st, const char *kind, int *rc) {
  json_t *rep = NULL;
  *rc = dtx_audit(st, 0, &rep);
  size_t i;
  json_t *f;
  int found = 0;
  json_array_foreach(json_object_get(rep, "findings"), i, f) {
    const char *k = json_string_value(json_object_get(f, "kind"));
    found |= k && strcmp(k, kind) == 0;
  }
  json_decref(rep);
  return found;
}

static void bypass(dtx_store_t *st, const char *update, const char *name) {
  json_t *f = json_pack("{s:s}", "_id", name);
  int rc;
  if (update) {
    json_t *u = json_loads(update, 0, NULL);
    dtx_update_opts_t o = {.bypass_validation = 1};
    rc = dtx_store_update(st, "locks", f, u, &o, NULL);
    json_decref(u);
  } else {
    dtx_delete_opts_t o = {.bypass_validation = 1};
    rc = dtx_store_delete_ex(st, "locks", f, &o, NULL);
  }
  CHECKF(rc == 0, "bypass %s: %s", update ? update : "delete",
         dtx_errdetail());
  json_decref(f);
}

/* After 3 acquires and a write fenced with token 3, the lock document is
 * deleted with --bypass-validation: the audit reports the fenced name
 * whose lock is gone, and the next acquire hands out 4 (the deleted
 * lock's record, kept by its fence tombstone), never 1.  With "locks"
 * dropped (tombstones gone), the registry of names sends the acquire to
 * the tokens its name fenced.  A plain write cannot lower a token; one
 * with --bypass-validation does not make the next acquire go back, and
 * the audit reports it. */
static void test_tokens_never_go_back(void) {
  dtx_store_t *st = open_store();
  drop_locks(st);
  dtx_store_drop_collection_ex(st, "lock_res6", &(dtx_drop_opts_t){1});
  for (int i = 1; i <= 3; i++)
    CHECK(acquire_release(st, "T") == i);
  sem_write(st, "T", 3, 0);
  int rc;
  CHECK(!audit_has(st, "lock_missing", &rc) && rc == 0);
  bypass(st, NULL, "T");
  CHECK(audit_has(st, "lock_missing", &rc) && rc == DTX_EAUDIT);
  CHECK(acquire_release(st, "T") == 4);
  CHECK(!audit_has(st, "lock_missing", &rc) && rc == 0);
  sem_write(st, "T", 4, 0);
  sem_write(st, "T", 3, DTX_EFENCED);
  /* The collection dropped: its tombstones go with it. */
  CHECK_RC(dtx_store_drop_collection_ex(st, "locks", &(dtx_drop_opts_t){1}),
           0);
  CHECK(audit_has(st, "lock_missing", &rc) && rc == DTX_EAUDIT);
  CHECK(acquire_release(st, "T") == 5);
  CHECK(!audit_has(st, "lock_missing", &rc) && rc == 0);
  /* A plain update may not lower the token (the transition rule)... */
  json_t *f = json_pack("{s:s}", "_id", "T");
  json_t *u = json_pack("{s:{s:i}}", "$set", "token", 1);
  CHECK_RC(dtx_store_update(st, "locks", f, u, NULL, NULL), DTX_EVALIDATION);
  CHECK(strstr(dtx_errdetail(), "token may not decrease"));
  json_decref(u);
  json_decref(f);
  /* ... one with --bypass-validation does, but the lock's own record
   * keeps the next acquire ahead, and the audit says so meanwhile. */
  bypass(st, "{\"$set\":{\"token\":1}}", "T");
  CHECK(audit_has(st, "lock_token_regressed", &rc) && rc == DTX_EAUDIT);
  CHECK(acquire_release(st, "T") == 6);
  CHECK(!audit_has(st, "lock_token_regressed", &rc) && rc == 0);
  /* A lock deleted and inserted again by hand (a plain insert of a lock
   * is refused: docs/locks.md, "What a plain write may change") takes
   * the record over. */
  bypass(st, NULL, "T");
  json_t *doc = json_pack("{s:s,s:n,s:i,s:i,s:i,s:i,s:i,s:s}", "_id", "T",
                          "owner", "token", 1, "expires", 0, "ttl", 1000,
                          "acquired", 0, "updated", 0, "nonce", "");
  CHECK_RC(dtx_store_insert(st, "locks", doc, NULL), DTX_EVALIDATION);
  CHECK(strstr(dtx_errdetail(), "an insert is refused"));
  CHECK_RC(dtx_store_insert_ex(st, "locks", doc, &(dtx_insert_opts_t){1},
                               NULL),
           0);
  json_decref(doc);
  CHECK(acquire_release(st, "T") == 7);
  /* A token that is no integer (bypassing the validator): the acquire
   * says so and changes nothing; the audit reports the shape. */
  bypass(st, "{\"$set\":{\"token\":\"x\"}}", "T");
  CHECK_RC(dtx_lock_acquire(st, "T", NULL, NULL), DTX_ESTATE);
  CHECK(strstr(dtx_errdetail(), "not an integer"));
  CHECK(audit_has(st, "bad_shape", &rc) && rc == DTX_EAUDIT);
  bypass(st, "{\"$set\":{\"token\":7}}", "T");
  /* A name never registered nor fenced starts at 1. */
  CHECK(acquire_release(st, "U") == 1);
  dtx_store_close(st);
}

/* One rule for owner names on every path that takes one: NULL is
 * host:pid, anything else 1..128 of [A-Za-z0-9_.:-] -- "" and "a/b"
 * are refused before anything is written. */
static void test_owner_rule(void) {
  dtx_store_t *st = open_store();
  drop_locks(st);
  char o128[129], o129[130];
  memset(o128, 'o', 128);
  o128[128] = '\0';
  memset(o129, 'o', 129);
  o129[129] = '\0';
  static const char *const bad[] = {"", "a/b", "a b", "x%1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0] + 1; i++) {
    const char *o = i < sizeof bad / sizeof bad[0] ? bad[i] : o129;
    dtx_lock_opts_t lo = {.owner = o};
    CHECK_RC(dtx_lock_acquire(st, "O", &lo, NULL), DTX_EINVAL);
    CHECKF(strstr(dtx_errdetail(), "owner"), "%s", dtx_errdetail());
    dtx_worker_opts_t wo = {.once = 1, .owner = o};
    CHECK_RC(dtx_worker_run(st, &wo, NULL), DTX_EINVAL);
    CHECKF(strstr(dtx_errdetail(), "owner"), "%s", dtx_errdetail());
    dtx_exec_opts_t eo = {.owner = o};
    json_t *out = NULL;
    CHECK_RC(dtx_transfer_run(st, "nosuch", &eo, &out), DTX_EINVAL);
    CHECK(out == NULL);
  }
  json_t *v = NULL;
  CHECK_RC(dtx_lock_get(st, "O", &v), DTX_ENOTFOUND);
  dtx_lock_opts_t lo = {.owner = o128};
  CHECK_RC(dtx_lock_acquire(st, "O", &lo, &v), 0);
  const char *got = json_string_value(json_object_get(v, "owner"));
  CHECKF(got && strcmp(got, o128) == 0, "owner %s", got ? got : "(none)");
  json_decref(v);
  dtx_store_close(st);
}

/* ---- mutual exclusion under load ------------------------------------------- */

#define THREADS 8
#define MAX_ROWS 20000

static struct {
  pthread_mutex_t mu;
  int64_t n[MAX_ROWS], tok[MAX_ROWS];
  int rows, fenced, errors;
} acc = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0, 0, 0};

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u;
  char owner[16];
  snprintf(owner, sizeof owner, "w%d", (int)(uintptr_t)arg);
  dtx_store_t *st = open_store();
  int64_t end = dtx__now_ms() + 1000;
  json_t *filter = json_pack("{s:s}", "_id", "c");
  while (dtx__now_ms() < end) {
    dtx_lock_opts_t o = {.owner = owner, .ttl_ms = 30, .wait_ms = 200};
    json_t *v = NULL;
    int rc = dtx_lock_acquire(st, "mx", &o, &v);
    if (rc == DTX_ENOMATCH)
      continue;
    if (rc) {
      pthread_mutex_lock(&acc.mu);
      acc.errors++;
      pthread_mutex_unlock(&acc.mu);
      break;
    }
    int64_t t = token_of(v);
    json_decref(v);
    usleep((useconds_t)(rand_r(&seed) % 50) * 1000); /* sometimes past it */
    json_t *upd = json_pack("{s:{s:i},s:{s:I}}", "$inc", "n", 1, "$set", "t",
                            (json_int_t)t);
    dtx_fam_opts_t fo = {.return_new = 1, .fence_name = "mx", .fence_token = t};
    json_t *doc = NULL;
    rc = dtx_store_find_one_and_update(st, "lock_res", filter, upd, &fo, &doc);
    json_decref(upd);
    pthread_mutex_lock(&acc.mu);
    if (rc == 0 && acc.rows < MAX_ROWS) {
      acc.n[acc.rows] = json_integer_value(json_object_get(doc, "n"));
      acc.tok[acc.rows++] = t;
    } else if (rc == DTX_EFENCED) {
      acc.fenced++;
    } else if (rc) {
      acc.errors++;
    }
    pthread_mutex_unlock(&acc.mu);
    json_decref(doc);
    dtx_lock_release(st, "mx", t, NULL); /* NOMATCH once it lapsed: fine */
  }
  json_decref(filter);
  dtx_store_close(st);
  return NULL;
}

static void test_mutual_exclusion(void) {
  dtx_store_t *st = open_store();
  dtx_store_drop_collection_ex(st, "lock_res", &(dtx_drop_opts_t){1});
  json_t *c = json_pack("{s:s,s:i}", "_id", "c", "n", 0);
  CHECK_RC(dtx_store_insert(st, "lock_res", c, NULL), 0);
  json_decref(c);
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    REQUIRE(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)(i + 1)) ==
            0);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  CHECK(acc.errors == 0);
  CHECK(acc.rows > 0);
  /* In the counter's order (n = 1, 2, ...), tokens strictly increase. */
  int64_t *by_n = calloc((size_t)acc.rows + 1, sizeof *by_n);
  REQUIRE(by_n);
  for (int i = 0; i < acc.rows; i++) {
    REQUIRE(acc.n[i] >= 1 && acc.n[i] <= acc.rows);
    CHECK(by_n[acc.n[i]] == 0); /* each counter value once */
    by_n[acc.n[i]] = acc.tok[i];
  }
  for (int i = 2; i <= acc.rows; i++)
    CHECKF(by_n[i] > by_n[i - 1], "write %d: token %lld after %lld", i,
           (long long)by_n[i], (long long)by_n[i - 1]);
  free(by_n);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, 0, &rep), 0);
  json_decref(rep);
  printf("mutual exclusion: %d accepted writes, %d stale writes FENCED\n",
         acc.rows, acc.fenced);
  dtx_store_close(st);
}

/* ---- holding a lock (src/txn/lock/hold.c) ---------------------------------- */

typedef struct lost_note {
  pthread_mutex_t mu;
  int calls, rc;
} lost_note_t;

static void note_lost(void *arg, int rc) {
  lost_note_t *n = arg;
  pthread_mutex_lock(&n->mu);
  n->calls++;
  n->rc = rc;
  pthread_mutex_unlock(&n->mu);
}

static int lost_calls(lost_note_t *n) {
  pthread_mutex_lock(&n->mu);
  int c = n->calls;
  pthread_mutex_unlock(&n->mu);
  return c;
}

/* dtx_lock_hold_*: bad input refused before anything is held; a hold with
 * a 600 ms lease kept for 800 ms by its keeper (a renewal every 200 ms,
 * so only a stall of its thread past 400 ms lapses it; a 240 ms lease
 * lapsed at load 15 on 2 cores, where 80 ms sleeps overslept by up to
 * 156 ms, and the keeper rightly reported it): still held, same token, no
 * loss; a hold whose token was taken from it (released behind its back)
 * reports the loss once, with the renew's error, renews no more, and its
 * stop is STALE without touching the next holder's lease; a held lock
 * refuses a hold, and a waiting hold gets it once the other lease lapses,
 * held although the wait outlasted its ttl.  The lapse (a paused holder)
 * is tests/cli/lock.sh's SIGSTOP case. */
static void test_hold(void) {
  dtx_store_t *st = open_store();
  drop_locks(st);
  lost_note_t n = {.mu = PTHREAD_MUTEX_INITIALIZER};
  dtx_lock_hold_t *h = (dtx_lock_hold_t *)&n;
  json_t *v = NULL;
  CHECK_RC(dtx_lock_hold_start(st, "H",
                               &(dtx_lock_opts_t){.ttl_ms = INT64_MAX},
                               note_lost, &n, &h),
           DTX_EINVAL);
  CHECK(h == NULL);
  CHECK_RC(dtx_lock_hold_start(st, "a/b", NULL, note_lost, &n, &h),
           DTX_EINVAL);
  CHECK_RC(dtx_lock_hold_start(st, "H", &(dtx_lock_opts_t){.wait_ms = -1},
                               note_lost, &n, &h),
           DTX_EINVAL);
  /* a semaphore's holder fences by its slot, which a hold does not say */
  CHECK_RC(dtx_lock_hold_start(st, "H", &(dtx_lock_opts_t){.max = 3},
                               note_lost, &n, &h),
           DTX_EINVAL);
  CHECK_RC(dtx_lock_get(st, "H", &v), DTX_ENOTFOUND);
  CHECK_RC(dtx_lock_hold_stop(NULL, NULL), 0);

  /* Held throughout; huge wait and deadline saturate. */
  dtx_lock_opts_t o = {.owner = "k1", .ttl_ms = 600, .wait_ms = INT64_MAX,
                       .deadline_ms = INT64_MAX};
  CHECK_RC(dtx_lock_hold_start(st, "H", &o, note_lost, &n, &h), 0);
  REQUIRE(h);
  CHECK(dtx_lock_hold_token(h) == 1);
  CHECK(token_of(dtx_lock_hold_view(h)) == 1);
  usleep(800000);
  CHECKF(dtx_lock_hold_lost(h) == 0 && lost_calls(&n) == 0,
         "a 600 ms lease lost in 800 ms (rc %d): its keeper stalled?",
         dtx_lock_hold_lost(h));
  CHECK_RC(dtx_lock_get(st, "H", &v), 0);
  CHECK(token_of(v) == 1 && json_is_true(json_object_get(v, "held")));
  json_decref(v);
  /* Should the probe take it (the lease lapsed), its 1 ms lease frees
   * the lock at once: the blocks below do not wait out a default 30 s
   * lease, and they count tokens from what they get, so they still test
   * what they say and the first failure is this block's. */
  CHECK_RC(dtx_lock_acquire(st, "H",
                            &(dtx_lock_opts_t){.owner = "k2", .ttl_ms = 1},
                            NULL),
           DTX_ENOMATCH);
  CHECK_RC(dtx_lock_hold_stop(h, &v), 0);
  CHECK(json_is_null(json_object_get(v, "owner")) && token_of(v) == 1);
  json_decref(v);
  if (lost_calls(&n)) { /* counted from 0 again below */
    pthread_mutex_lock(&n.mu);
    n.calls = 0;
    pthread_mutex_unlock(&n.mu);
  }

  /* Lost: the token is taken away; one call, the renew's NOMATCH. */
  CHECK_RC(dtx_lock_hold_start(st, "H", &o, note_lost, &n, &h), 0);
  REQUIRE(h);
  int64_t t2 = dtx_lock_hold_token(h), t3 = 0;
  CHECK(t2 == 2);
  CHECK_RC(dtx_lock_release(st, "H", t2, NULL), 0);
  CHECK_RC(dtx_lock_acquire(st, "H",
                            &(dtx_lock_opts_t){.owner = "k2",
                                               .ttl_ms = 60000},
                            &v),
           0);
  t3 = token_of(v);
  CHECK(t3 == t2 + 1);
  json_decref(v);
  for (int i = 0; i < 200 && lost_calls(&n) == 0; i++)
    usleep(5000);
  usleep(100000); /* H2, H3: no second call, no renewal after it */
  CHECK(lost_calls(&n) == 1 && n.rc == DTX_ENOMATCH);
  CHECK(dtx_lock_hold_lost(h) == DTX_ENOMATCH);
  CHECK_RC(dtx_lock_hold_stop(h, NULL), DTX_ESTALE);
  char renew_lost[64];
  snprintf(renew_lost, sizeof renew_lost, "lock 'H' token %lld: renew: NOMATCH",
           (long long)t2);
  CHECK(strstr(dtx_errdetail(), renew_lost));
  CHECK_RC(dtx_lock_get(st, "H", &v), 0);
  CHECK(token_of(v) == t3 && json_is_true(json_object_get(v, "held")));
  CHECK(strcmp(json_string_value(json_object_get(v, "owner")), "k2") == 0);
  json_decref(v);

  /* Held by another: refused (nothing out); waiting past its lease: 4. */
  CHECK_RC(dtx_lock_hold_start(st, "H", &(dtx_lock_opts_t){.ttl_ms = 90},
                               note_lost, &n, &h),
           DTX_ENOMATCH);
  CHECK(h == NULL);
  /* The wait (1,500 ms) outlasts the hold's own ttl (1,000): the lease is
   * counted from a renew made at once, not from the call's start (which
   * would be a lapse at once).  A ttl of 240 ms once lapsed before its
   * first renewal on a loaded CI machine. */
  CHECK_RC(dtx_lock_renew(st, "H", t3, &(dtx_lock_opts_t){.ttl_ms = 1500},
                          NULL),
           0);
  CHECK_RC(dtx_lock_hold_start(st, "H",
                               &(dtx_lock_opts_t){.ttl_ms = 1000,
                                                  .wait_ms = 5000},
                               note_lost, &n, &h),
           0);
  REQUIRE(h);
  CHECK(dtx_lock_hold_token(h) == t3 + 1);
  usleep(100000);
  CHECK(dtx_lock_hold_lost(h) == 0);
  CHECK_RC(dtx_lock_hold_stop(h, NULL), 0);
  CHECK(lost_calls(&n) == 1);
  dtx_store_close(st);
}

/* ---- semaphores (sem.c) ------------------------------------------------ */

static json_t *sem_acquire(dtx_store_t *st, const char *owner, int64_t ttl,
                           int want) {
  dtx_lock_opts_t o = {.owner = owner, .ttl_ms = ttl, .max = 3};
  json_t *v = NULL;
  CHECK_RC(dtx_lock_acquire(st, "S", &o, &v), want);
  return v;
}

static int slot_write(dtx_store_t *st, const char *fence, int64_t token) {
  json_t *f = json_pack("{s:s}", "_id", "r");
  json_t *u = json_pack("{s:{s:i}}", "$inc", "n", 1);
  dtx_update_opts_t uo = {.upsert = 1, .fence_name = fence,
                          .fence_token = token};
  int rc = dtx_store_update(st, "sem_res", f, u, &uo, NULL);
  json_decref(f);
  json_decref(u);
  return rc;
}

static void test_semaphore(void) {
  dtx_store_t *st = open_store();
  drop_locks(st);
  dtx_store_drop_collection_ex(st, "sem_res", &(dtx_drop_opts_t){1});
  json_t *a = sem_acquire(st, "a", 60000, 0), *b = sem_acquire(st, "b", 60000, 0);
  json_t *c = sem_acquire(st, "c", 60000, 0);
  CHECK(token_of(a) == 1 && token_of(b) == 2 && token_of(c) == 3);
  const char *fa = json_string_value(json_object_get(a, "fence"));
  CHECK(fa && strcmp(fa, "S:0") == 0);
  CHECK(json_integer_value(json_object_get(c, "slot")) == 2);
  CHECK(sem_acquire(st, "d", 60000, DTX_ENOMATCH) == NULL);
  CHECK(strstr(dtx_errdetail(), "all 3 holders are taken"));
  /* One max per name, whoever asks; a slot's fence name is no lock. */
  dtx_lock_opts_t two = {.max = 2};
  CHECK_RC(dtx_lock_acquire(st, "S", &two, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_acquire(st, "S", NULL, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_acquire(st, "S:1", NULL, NULL), DTX_EINVAL);
  CHECK_RC(dtx_lock_campaign(st, "S", NULL, NULL), DTX_EINVAL);
  dtx_lock_opts_t big = {.max = 101};
  CHECK_RC(dtx_lock_check("T", &big), DTX_EINVAL);
  char longname[128];
  memset(longname, 'n', 127);
  longname[127] = 0;
  two.max = 2;
  CHECK_RC(dtx_lock_check(longname, &two), DTX_EINVAL);
  CHECK_RC(dtx_lock_acquire(st, "P", NULL, NULL), 0);
  dtx_lock_opts_t three = {.max = 3};
  CHECK_RC(dtx_lock_acquire(st, "P", &three, NULL), DTX_EINVAL);
  /* b's slot lapses (renew to 1 ms) and goes to d with token 4, which
   * writes: b is FENCED on its own slot, while a (token 1, older than
   * d's) still writes, its slot untouched. */
  dtx_lock_opts_t shrt = {.ttl_ms = 1};
  CHECK_RC(dtx_lock_renew(st, "S", 2, &shrt, NULL), 0);
  usleep(5000);
  json_t *d = sem_acquire(st, "d", 60000, 0);
  CHECK(token_of(d) == 4 && json_integer_value(json_object_get(d, "slot")) == 1);
  CHECK_RC(slot_write(st, "S:1", 4), 0);
  CHECK_RC(slot_write(st, "S:1", 2), DTX_EFENCED);
  CHECK_RC(slot_write(st, "S:0", 1), 0);
  CHECK_RC(slot_write(st, "S:2", 3), 0);
  CHECK_RC(dtx_lock_renew(st, "S", 2, NULL, NULL), DTX_ENOMATCH);
  CHECK_RC(dtx_lock_release(st, "S", 2, NULL), DTX_ENOMATCH);
  json_t *v = NULL;
  CHECK_RC(dtx_lock_renew(st, "S", 1, NULL, &v), 0);
  CHECK(token_of(v) == 1 && json_is_true(json_object_get(v, "held")));
  json_decref(v);
  CHECK_RC(dtx_lock_release(st, "S", 3, NULL), 0);
  CHECK_RC(dtx_lock_get(st, "S", &v), 0);
  CHECK(token_of(v) == 4 &&
        json_array_size(json_object_get(v, "holders")) == 2);
  json_decref(v);
  json_t *e = sem_acquire(st, "e", 60000, 0); /* the released slot 2 */
  CHECK(token_of(e) == 5 && json_integer_value(json_object_get(e, "slot")) == 2);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, 0, &rep), 0);
  json_decref(rep);
  /* A plain write moves no slot; past the rules, the audit tells. */
  json_t *f = json_pack("{s:s}", "_id", "S");
  json_t *u = json_pack("{s:{s:I}}", "$set", "slots.0.token", (json_int_t)9);
  CHECK_RC(dtx_store_update(st, "locks", f, u, NULL, NULL), DTX_EVALIDATION);
  dtx_update_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_update(st, "locks", f, u, &by, NULL), 0);
  int arc = 0;
  CHECK(audit_has(st, "lock_token_regressed", &arc) && arc == DTX_EAUDIT);
  json_decref(f);
  json_decref(u);
  json_decref(a);
  json_decref(b);
  json_decref(c);
  json_decref(d);
  json_decref(e);
  drop_locks(st);
  dtx_store_close(st);
}

#define SEM_THREADS 8
static struct {
  pthread_mutex_t mu;
  int inside, most, taken, fenced, errors, stop;
} sem = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0};

static void *sem_worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u;
  char owner[16];
  snprintf(owner, sizeof owner, "s%d", (int)(uintptr_t)arg);
  dtx_store_t *st = open_store();
  int64_t end = dtx__now_ms() + 1000;
  while (dtx__now_ms() < end) {
    /* Leases far longer than a hold: a holder counted inside holds. */
    dtx_lock_opts_t o = {.owner = owner, .ttl_ms = 5000, .wait_ms = 300,
                         .max = 3};
    json_t *v = NULL;
    int rc = dtx_lock_acquire(st, "S8", &o, &v);
    if (rc == DTX_ENOMATCH)
      continue;
    pthread_mutex_lock(&sem.mu);
    if (rc)
      sem.errors++;
    else if (++sem.inside > sem.most)
      sem.most = sem.inside;
    sem.taken += rc == 0;
    pthread_mutex_unlock(&sem.mu);
    if (rc)
      break;
    int64_t t = token_of(v);
    char fence[140];
    snprintf(fence, sizeof fence, "%s",
             json_string_value(json_object_get(v, "fence")));
    json_decref(v);
    /* Holders of other slots, older or newer, never fence it. */
    rc = slot_write(st, fence, t);
    usleep((useconds_t)(10 + rand_r(&seed) % 30) * 1000);
    pthread_mutex_lock(&sem.mu);
    sem.inside--;
    sem.fenced += rc == DTX_EFENCED;
    sem.errors += rc && rc != DTX_EFENCED;
    pthread_mutex_unlock(&sem.mu);
    CHECK_RC(dtx_lock_release(st, "S8", t, NULL), 0);
  }
  dtx_store_close(st);
  return NULL;
}

/* Reads the semaphore until the workers stop: never 4 live holders. */
static void *sem_sampler(void *arg) {
  int *samples = arg;
  dtx_store_t *st = open_store();
  for (;;) {
    pthread_mutex_lock(&sem.mu);
    int stop = sem.stop;
    pthread_mutex_unlock(&sem.mu);
    if (stop)
      break;
    json_t *v = NULL;
    if (dtx_lock_get(st, "S8", &v) == 0) {
      size_t n = json_array_size(json_object_get(v, "holders"));
      CHECKF(n <= 3, "sampled %zu holders", n);
      (*samples)++;
    }
    json_decref(v);
    usleep(2000);
  }
  dtx_store_close(st);
  return NULL;
}

static void test_semaphore_load(void) {
  dtx_store_t *st = open_store();
  dtx_store_drop_collection_ex(st, "sem_res", &(dtx_drop_opts_t){1});
  /* A holder that dies: its slot frees when its lease lapses. */
  dtx_lock_opts_t ghost = {.owner = "ghost", .ttl_ms = 100, .max = 3};
  json_t *g = NULL;
  CHECK_RC(dtx_lock_acquire(st, "S8", &ghost, &g), 0);
  int64_t gt = token_of(g);
  json_decref(g);
  pthread_t th[SEM_THREADS], sampler;
  int samples = 0;
  REQUIRE(pthread_create(&sampler, NULL, sem_sampler, &samples) == 0);
  for (int i = 0; i < SEM_THREADS; i++)
    REQUIRE(pthread_create(&th[i], NULL, sem_worker,
                           (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < SEM_THREADS; i++)
    pthread_join(th[i], NULL);
  pthread_mutex_lock(&sem.mu);
  sem.stop = 1;
  pthread_mutex_unlock(&sem.mu);
  pthread_join(sampler, NULL);
  CHECK(sem.errors == 0 && sem.fenced == 0);
  CHECKF(sem.most <= 3, "%d holders at once", sem.most);
  CHECK(sem.most >= 2 && sem.taken > 3 && samples > 0);
  /* The ghost's slot went to another: its token is no longer current. */
  CHECK_RC(dtx_lock_renew(st, "S8", gt, NULL, NULL), DTX_ENOMATCH);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, 0, &rep), 0);
  json_decref(rep);
  printf("semaphore: %d acquires by %d threads, at most %d holders, %d "
         "samples\n", sem.taken, SEM_THREADS, sem.most, samples);
  dtx_store_close(st);
}

/* ---- leader election (elect.c) ------------------------------------------ */

static struct {
  pthread_mutex_t mu;
  int64_t terms[64];
  char who[64][8];
  int n, errors;
} el = {PTHREAD_MUTEX_INITIALIZER, {0}, {{0}}, 0, 0};

static void *candidate(void *arg) {
  char owner[8];
  snprintf(owner, sizeof owner, "c%d", (int)(uintptr_t)arg);
  dtx_store_t *st = open_store();
  for (int won = 0; won < 2;) {
    dtx_lock_opts_t o = {.owner = owner, .ttl_ms = 60, .wait_ms = 3000};
    json_t *v = NULL;
    int rc = dtx_lock_campaign(st, "el", &o, &v);
    if (rc) {
      pthread_mutex_lock(&el.mu);
      el.errors++;
      pthread_mutex_unlock(&el.mu);
      break;
    }
    int64_t term = token_of(v);
    json_decref(v);
    pthread_mutex_lock(&el.mu);
    if (el.n < 64) {
      el.terms[el.n] = term;
      snprintf(el.who[el.n++], 8, "%s", owner);
    }
    pthread_mutex_unlock(&el.mu);
    /* Lead a while (renewing), then die: stop renewing, no release. */
    for (int i = 0; i < 3; i++) {
      usleep(20000);
      if (dtx_lock_renew(st, "el", term, NULL, NULL))
        break;
    }
    won++;
    usleep(100000); /* dead past the lease: another leads meanwhile */
  }
  dtx_store_close(st);
  return NULL;
}

static void test_election(void) {
  dtx_store_t *st = open_store();
  pthread_t th[3];
  for (int i = 0; i < 3; i++)
    REQUIRE(pthread_create(&th[i], NULL, candidate,
                           (void *)(uintptr_t)(i + 1)) == 0);
  for (int i = 0; i < 3; i++)
    pthread_join(th[i], NULL);
  CHECK(el.errors == 0 && el.n == 6);
  /* Terms 1..6, each won once, by one candidate.  (Sorted: a thread may
   * note its win after the next one's, when it is descheduled between
   * its campaign and its note.) */
  int won[7] = {0};
  for (int i = 0; i < el.n; i++) {
    CHECKF(el.terms[i] >= 1 && el.terms[i] <= 6, "term %lld by %s",
           (long long)el.terms[i], el.who[i]);
    if (el.terms[i] >= 1 && el.terms[i] <= 6)
      won[el.terms[i]]++;
  }
  for (int t = 1; t <= 6; t++)
    CHECKF(won[t] == 1, "term %d won %d times", t, won[t]);
  json_t *v = NULL;
  CHECK_RC(dtx_lock_leader(st, "el", &v), 0);
  CHECK(token_of(v) == 0 && json_integer_value(json_object_get(v, "term")) == 6);
  json_decref(v);
  CHECK_RC(dtx_lock_leader(st, "S8", &v), DTX_EINVAL);
  CHECK_RC(dtx_lock_leader(st, "nobody", &v), DTX_ENOTFOUND);
  dtx_store_close(st);
}

/* ---- fair waiting (queue.c) --------------------------------------------- */

#define FAIR 8
static struct {
  pthread_mutex_t mu;
  int order[FAIR + 1], n, errors;
} fair = {PTHREAD_MUTEX_INITIALIZER, {0}, 0, 0};

static void *fair_waiter(void *arg) {
  int me = (int)(uintptr_t)arg;
  char owner[8];
  snprintf(owner, sizeof owner, "w%d", me);
  dtx_store_t *st = open_store();
  /* me 99: gives up mid-wait, leaving no gap. */
  dtx_lock_opts_t o = {.owner = owner, .ttl_ms = 60000,
                       .wait_ms = me == 99 ? 150 : 10000};
  json_t *v = NULL;
  int rc = dtx_lock_acquire(st, "F", &o, &v);
  pthread_mutex_lock(&fair.mu);
  if (me == 99)
    fair.errors += rc != DTX_ENOMATCH;
  else if (rc)
    fair.errors++;
  else if (fair.n < FAIR + 1)
    fair.order[fair.n++] = me;
  pthread_mutex_unlock(&fair.mu);
  if (rc == 0) {
    usleep(2000);
    CHECK_RC(dtx_lock_release(st, "F", token_of(v), NULL), 0);
  }
  json_decref(v);
  dtx_store_close(st);
  return NULL;
}

/* The tickets in lock F's queue (taken: the tickets ever taken). */
static size_t tickets_of_ex(dtx_store_t *st, int taken) {
  json_t *f = json_pack("{s:s}", "_id", "F"), *docs = NULL;
  size_t n = 0;
  json_t *l = NULL;
  if (dtx_store_find(st, "locks", f, NULL, &docs) == 0)
    l = json_array_get(docs, 0);
  n = taken ? (size_t)json_integer_value(json_object_get(l, "tickets"))
            : json_array_size(json_object_get(l, "queue"));
  json_decref(f);
  json_decref(docs);
  return n;
}

static size_t tickets_of(dtx_store_t *st) { return tickets_of_ex(st, 0); }

static void test_fair_waiting(void) {
  dtx_store_t *st = open_store();
  json_t *v = NULL;
  dtx_lock_opts_t h = {.owner = "h", .ttl_ms = 60000};
  CHECK_RC(dtx_lock_acquire(st, "F", &h, &v), 0);
  int64_t ht = token_of(v);
  json_decref(v);
  pthread_t th[FAIR + 1];
  for (int i = 0; i <= FAIR; i++) {
    /* the 4th to arrive gives up after 150 ms */
    int me = i == 3 ? 99 : i < 3 ? i + 1 : i;
    REQUIRE(pthread_create(&th[i], NULL, fair_waiter,
                           (void *)(uintptr_t)me) == 0);
    int64_t end = dtx__now_ms() + 5000;
    /* (tickets taken, not queued: the one that gives up may be gone) */
    while (tickets_of_ex(st, 1) < (size_t)i + 1 && dtx__now_ms() < end)
      usleep(2000);
    CHECKF(tickets_of_ex(st, 1) >= (size_t)i + 1, "waiter %d has no ticket",
           me);
  }
  usleep(200000); /* the one that gives up leaves the queue */
  /* Free now, but not for a caller that does not wait: the queue first.
   * The head waiter polls every few ms, so when this thread is slower
   * (a loaded machine) it finds the lock already the waiter's: refused
   * all the same, as held. */
  CHECK_RC(dtx_lock_release(st, "F", ht, NULL), 0);
  CHECK_RC(dtx_lock_acquire(st, "F", NULL, NULL), DTX_ENOMATCH);
  CHECKF(strstr(dtx_errdetail(), "ahead (served in ticket order)") ||
             strstr(dtx_errdetail(), "lock 'F' is held by w"),
         "%s", dtx_errdetail());
  for (int i = 0; i <= FAIR; i++)
    pthread_join(th[i], NULL);
  CHECK(fair.errors == 0 && fair.n == FAIR);
  for (int i = 0; i < fair.n; i++)
    CHECKF(fair.order[i] == i + 1, "turn %d went to waiter %d", i,
           fair.order[i]);
  CHECK(tickets_of(st) == 0);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, 0, &rep), 0);
  json_decref(rep);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:lock.db";
  TEST_RUN(test_semantics);
  TEST_RUN(test_tokens_never_go_back);
  TEST_RUN(test_owner_rule);
  TEST_RUN(test_mutual_exclusion);
  TEST_RUN(test_hold);
  TEST_RUN(test_semaphore);
  TEST_RUN(test_semaphore_load);
  TEST_RUN(test_election);
  TEST_RUN(test_fair_waiting);
  return TEST_DONE();
}
