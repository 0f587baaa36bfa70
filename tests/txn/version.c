/* version.c -- versioned documents (src/txn/version/) through the public C
 * API on a real store, under concurrency: for a bounded time (2 s, 1 s
 * under DTX_QUICK, up to 4 times that until 20 puts landed) on two items,
 *  - 2 writer threads put whole trees (root {"sum"} and 8 children
 *    {"x"}, sum = the children's x) without a condition, so a lost race
 *    is retried by the library;
 *  - 2 writer threads read the tree, change two children, remove or add
 *    one, and put with --expect-version, retrying on CONFLICT;
 *  - 3 reader threads read the committed tree (and now and then an older
 *    version from the history) and verify every read's checksum: a mix of
 *    two versions would break it; and a reader never sees the committed
 *    version go backwards;
 *  - 1 thread runs gc (keep 3, grace 0: readers race the removal and must
 *    read again, never mix).
 * Every thread has its own store handle.  Then: every put returned a
 * distinct version per item, recovery and the settled audit find nothing
 * wrong with the versions.
 *
 * usage: txn_version STORE-URI   (the version collections are dropped
 * first) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testlib.h"

#define NITEMS 2
#define NKEYS 8
#define MAXPUTS 20000

static const char *uri;
static atomic_int stop;
static atomic_long reads, old_reads, mixed, backwards, nputs, conflicts,
    errors;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t seen[NITEMS][MAXPUTS];
static size_t nseen[NITEMS];

static const char *item_name(int i) { return i ? "T1" : "T0"; }

/* The tree's checksum holds: root.sum == the children's x summed. */
static int whole(const json_t *tree) {
  const char *k;
  json_t *c;
  json_int_t sum = 0;
  json_object_foreach(json_object_get(tree, "children"), k, c)
      sum += json_integer_value(json_object_get(c, "x"));
  return json_integer_value(
             json_object_get(json_object_get(tree, "root"), "sum")) == sum;
}

static void record(int item, int64_t v) {
  pthread_mutex_lock(&lock);
  if (nseen[item] < MAXPUTS)
    seen[item][nseen[item]++] = v;
  pthread_mutex_unlock(&lock);
  atomic_fetch_add(&nputs, 1);
}

static void *blind_writer(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  dtx_store_t *st = dtx_t_open(uri);
  while (!atomic_load(&stop)) {
    int item = rand_r(&seed) % NITEMS;
    dtx_version_child_t ch[NKEYS];
    char keys[NKEYS][8];
    json_int_t sum = 0;
    for (int k = 0; k < NKEYS; k++) {
      json_int_t x = rand_r(&seed) % 1000;
      snprintf(keys[k], sizeof keys[k], "k%d", k);
      ch[k].key = keys[k];
      ch[k].doc = json_pack("{s:I}", "x", x);
      sum += x;
    }
    json_t *root = json_pack("{s:I}", "sum", sum), *out = NULL;
    dtx_version_put_req_t req = {.item = item_name(item), .root = root,
                                 .children = ch, .nchildren = NKEYS,
                                 .expect_version = DTX_VERSION_ANY};
    int rc = dtx_version_put(st, &req, NULL, &out);
    if (rc == 0)
      record(item, json_integer_value(json_object_get(out, "version")));
    else {
      atomic_fetch_add(&errors, 1);
      fprintf(stderr, "blind put: %s %s\n", dtx_errname(rc), dtx_errdetail());
    }
    json_decref(out);
    json_decref(root);
    for (int k = 0; k < NKEYS; k++)
      json_decref((json_t *)ch[k].doc);
  }
  dtx_store_close(st);
  return NULL;
}

/* Reads, changes two children and removes or adds one, puts on the
 * version read. */
static void *cond_writer(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  dtx_store_t *st = dtx_t_open(uri);
  while (!atomic_load(&stop)) {
    int item = rand_r(&seed) % NITEMS;
    json_t *cur = NULL, *out = NULL;
    int rc = dtx_version_get(st, item_name(item), DTX_VERSION_LATEST, &cur);
    if (rc == DTX_ENOTFOUND)
      continue; /* no version yet: the blind writers make one */
    if (rc) {
      atomic_fetch_add(&errors, 1);
      fprintf(stderr, "cond get: %s %s\n", dtx_errname(rc), dtx_errdetail());
      continue;
    }
    json_t *kids = json_deep_copy(json_object_get(cur, "children"));
    dtx_version_child_t ch[3];
    char keys[3][8];
    size_t n = 0;
    for (int j = 0; j < 3; j++) {
      snprintf(keys[j], sizeof keys[j], "k%d", rand_r(&seed) % NKEYS);
      int dup = 0;
      for (size_t i = 0; i < n; i++)
        dup |= strcmp(ch[i].key, keys[j]) == 0;
      if (dup)
        continue;
      ch[n].key = keys[j];
      /* the third change removes its key when it is there */
      if (j == 2 && json_object_get(kids, keys[j])) {
        ch[n].doc = NULL;
        json_object_del(kids, keys[j]);
      } else {
        ch[n].doc = json_pack("{s:I}", "x", (json_int_t)(rand_r(&seed) % 1000));
        json_object_set(kids, keys[j], (json_t *)ch[n].doc);
      }
      n++;
    }
    json_t *tree = json_pack("{s:o}", "children", kids);
    json_int_t sum = 0;
    const char *k;
    json_t *c;
    json_object_foreach(kids, k, c) sum += json_integer_value(json_object_get(c, "x"));
    json_t *root = json_pack("{s:I}", "sum", sum);
    dtx_version_put_req_t req = {
        .item = item_name(item), .root = root, .children = ch,
        .nchildren = n,
        .expect_version = json_integer_value(json_object_get(cur, "version"))};
    rc = dtx_version_put(st, &req, NULL, &out);
    if (rc == 0)
      record(item, json_integer_value(json_object_get(out, "version")));
    else if (rc == DTX_ECONFLICT)
      atomic_fetch_add(&conflicts, 1);
    else {
      atomic_fetch_add(&errors, 1);
      fprintf(stderr, "cond put: %s %s\n", dtx_errname(rc), dtx_errdetail());
    }
    for (size_t i = 0; i < n; i++)
      json_decref((json_t *)ch[i].doc);
    json_decref(out);
    json_decref(root);
    json_decref(tree);
    json_decref(cur);
  }
  dtx_store_close(st);
  return NULL;
}

static void *reader(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  dtx_store_t *st = dtx_t_open(uri);
  int64_t last[NITEMS] = {0};
  while (!atomic_load(&stop)) {
    int item = rand_r(&seed) % NITEMS;
    json_t *t = NULL, *h = NULL;
    int rc = dtx_version_get(st, item_name(item), DTX_VERSION_LATEST, &t);
    if (rc == 0) {
      int64_t v = json_integer_value(json_object_get(t, "version"));
      atomic_fetch_add(&reads, 1);
      if (!whole(t)) {
        atomic_fetch_add(&mixed, 1);
        char *s = json_dumps(t, JSON_COMPACT);
        fprintf(stderr, "MIXED: %s\n", s);
        free(s);
      }
      if (v < last[item])
        atomic_fetch_add(&backwards, 1);
      last[item] = v;
    } else if (rc != DTX_ENOTFOUND) {
      atomic_fetch_add(&errors, 1);
      fprintf(stderr, "get: %s %s\n", dtx_errname(rc), dtx_errdetail());
    }
    json_decref(t);
    t = NULL;
    /* now and then the oldest version kept: gc may remove it meanwhile
     * (ENOTFOUND), but a read that succeeds is whole */
    if (rand_r(&seed) % 8 == 0 &&
        dtx_version_history(st, item_name(item), &h) == 0 &&
        json_array_size(h)) {
      int64_t v = json_integer_value(
          json_object_get(json_array_get(h, 0), "version"));
      rc = dtx_version_get(st, item_name(item), v, &t);
      if (rc == 0) {
        atomic_fetch_add(&old_reads, 1);
        if (!whole(t))
          atomic_fetch_add(&mixed, 1);
      } else if (rc != DTX_ENOTFOUND) {
        atomic_fetch_add(&errors, 1);
        fprintf(stderr, "get old: %s %s\n", dtx_errname(rc), dtx_errdetail());
      }
      json_decref(t);
    }
    json_decref(h);
  }
  dtx_store_close(st);
  return NULL;
}

static void *collector(void *arg) {
  (void)arg;
  dtx_store_t *st = dtx_t_open(uri);
  dtx_version_gc_opts_t o = {.keep = 3, .grace_ms = 0};
  while (!atomic_load(&stop)) {
    json_t *sum = NULL;
    int rc = dtx_version_gc(st, &o, &sum);
    if (rc) {
      atomic_fetch_add(&errors, 1);
      fprintf(stderr, "gc: %s %s\n", dtx_errname(rc), dtx_errdetail());
    }
    json_decref(sum);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  dtx_store_close(st);
  return NULL;
}

static int cmp64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void test_readers_never_mix(void) {
  pthread_t th[8];
  int n = 0;
  int secs_ms = getenv("DTX_QUICK") ? 1000 : 2000;
  for (int i = 0; i < 2; i++)
    pthread_create(&th[n++], NULL, blind_writer, (void *)(uintptr_t)(11 + i));
  for (int i = 0; i < 2; i++)
    pthread_create(&th[n++], NULL, cond_writer, (void *)(uintptr_t)(21 + i));
  for (int i = 0; i < 3; i++)
    pthread_create(&th[n++], NULL, reader, (void *)(uintptr_t)(31 + i));
  pthread_create(&th[n++], NULL, collector, NULL);
  /* secs_ms, or up to 4 times that on a machine too loaded for 20 puts */
  for (int t = 0; t < 4 * secs_ms / 50; t++) {
    struct timespec ts = {0, 50 * 1000000L};
    nanosleep(&ts, NULL);
    if (t >= secs_ms / 50 && atomic_load(&nputs) >= 20)
      break;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < n; i++)
    pthread_join(th[i], NULL);
  printf("puts %ld (conflicts %ld), reads %ld (old %ld), mixed %ld, "
         "backwards %ld, errors %ld\n", atomic_load(&nputs),
         atomic_load(&conflicts), atomic_load(&reads), atomic_load(&old_reads),
         atomic_load(&mixed), atomic_load(&backwards), atomic_load(&errors));
  CHECK(atomic_load(&mixed) == 0);
  CHECK(atomic_load(&backwards) == 0);
  CHECK(atomic_load(&errors) == 0);
  CHECK(atomic_load(&nputs) >= 5 && atomic_load(&reads) >= 5);
  /* V1: every put got its own version */
  for (int i = 0; i < NITEMS; i++) {
    qsort(seen[i], nseen[i], sizeof seen[i][0], cmp64);
    for (size_t j = 1; j < nseen[i]; j++)
      CHECKF(seen[i][j] != seen[i][j - 1], "item %s: version %lld twice",
             item_name(i), (long long)seen[i][j]);
  }
  /* recovery, then the settled audit finds nothing wrong with versions */
  dtx_store_t *st = dtx_t_open(uri);
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *rep = NULL, *f;
  size_t i, nf = 0;
  CHECK_RC(dtx_recover(st, &ro, NULL), 0);
  int rc = dtx_audit(st, DTX_AUDIT_SETTLED, &rep);
  CHECKF(rc == 0 || rc == DTX_EAUDIT, "audit: %s %s", dtx_errname(rc),
         dtx_errdetail());
  json_array_foreach(json_object_get(rep, "findings"), i, f) {
    const char *p = json_string_value(json_object_get(f, "pattern"));
    if (p && strcmp(p, "version") == 0) {
      char *s = json_dumps(f, JSON_COMPACT);
      fprintf(stderr, "finding: %s\n", s);
      free(s);
      nf++;
    }
  }
  CHECKF(nf == 0, "the audit found %zu version findings", nf);
  char *s = json_dumps(json_object_get(json_object_get(rep, "patterns"),
                                       "version"), JSON_COMPACT);
  printf("audit version: %s\n", s ? s : "-");
  free(s);
  json_decref(rep);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  static char buf[4096];
  uri = argc > 1 ? argv[1] : "sqlite:/tmp/doctx_txn_version.db";
  /* What this proves is isolation, not durability: on a SQLite file,
   * sync=normal gives the writers ~10x the puts in the same time. */
  if (strncmp(uri, "sqlite:", 7) == 0 && !strchr(uri, '?') &&
      strcmp(uri, "sqlite::memory:") != 0) {
    snprintf(buf, sizeof buf, "%s?sync=normal", uri);
    uri = buf;
  }
  dtx_store_t *st = dtx_t_open(uri);
  dtx_store_drop_collection_ex(st, DTX_VERSION_ROOTS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_VERSION_RECORDS, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_VERSION_CHILDREN, &(dtx_drop_opts_t){1});
  dtx_store_close(st);
  TEST_RUN(test_readers_never_mix);
  return TEST_DONE();
}
