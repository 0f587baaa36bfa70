/* lock.c -- lease locks (src/txn/lock/) through the public C API on a real
 * store: tokens strictly increasing across release and expiry, held and
 * no-longer-current outcomes, bad arguments refused, the view's shape,
 * listing; then mutual exclusion under load: 8 threads, each with its own
 * store handle, take one lock for about a second with 30 ms leases and
 * random pauses (so leases lapse), each fenced-writing a counter under
 * it; in the counter's order every accepted write's token is greater than
 * the one before, and no token is accepted twice.
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

static void test_semantics(void) {
  dtx_store_t *st = open_store();
  dtx_store_drop_collection_ex(st, "locks", &(dtx_drop_opts_t){1});
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

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:lock.db";
  TEST_RUN(test_semantics);
  TEST_RUN(test_mutual_exclusion);
  return TEST_DONE();
}
