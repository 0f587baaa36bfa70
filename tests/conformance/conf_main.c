/* conf_main.c -- runner of the backend conformance suite.
 *
 * Usage: conformance URI [TOPIC...]
 * opens the store named by URI (sqlite:..., redis://...), runs every topic
 * (crud query index concurrency crash mongo rules store scale bulk fence)
 * or only those named (DTX_CONF_VIA_BULK=1: every single-document write
 * through dtx_store_bulk_write, see conf_bulk.c), drops every
 * collection it created and exits non-zero on any failure.  Collection
 * names carry a random per-run tag so runs against one long-lived store
 * never see each other's data.  This file also holds the helpers declared
 * in conf.h that all topics share. */
#include "conf.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

dtx_store_t *conf_st;
const char *conf_uri;
int conf_quick;
json_t *conf_poison;

static pthread_mutex_t gc_lock = PTHREAD_MUTEX_INITIALIZER;
static json_t *gc_list;

static char run_tag[32];
static char **colls;
static size_t ncolls, capcolls;

int64_t conf_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t conf_random(void) {
  uint64_t v;
  if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
    return v;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
         ((uint64_t)getpid() << 40);
}

json_t *conf_keep(json_t *v) {
  if (!v)
    return NULL;
  pthread_mutex_lock(&gc_lock);
  if (!gc_list)
    gc_list = json_array();
  json_array_append_new(gc_list, v);
  pthread_mutex_unlock(&gc_lock);
  return v;
}

json_t *JQ(const char *text) { return conf_keep(JQNEW(text)); }

void conf_gc(void) {
  pthread_mutex_lock(&gc_lock);
  json_decref(gc_list);
  gc_list = NULL;
  pthread_mutex_unlock(&gc_lock);
}

void conf_store_release(void) {
  dtx_store_close(conf_st);
  conf_st = NULL;
}

/* Every later test needs the store, so failing to reopen it ends the run
 * rather than cascading into hundreds of NULL-handle failures. */
void conf_store_reacquire(void) {
  if (conf_st)
    return;
  int rc = dtx_store_open(conf_uri, &conf_st);
  if (rc != 0 || !conf_st) {
    fprintf(stderr, "cannot reopen %s: %s (%s)\n", conf_uri, dtx_errname(rc),
            dtx_errdetail());
    exit(2);
  }
}

int conf_store_is_private(void) {
  const char *u = conf_st ? dtx_store_uri(conf_st) : conf_uri;
  return u && strstr(u, ":memory:") != NULL;
}

const char *conf_coll(const char *name) {
  if (ncolls == capcolls) {
    capcolls = capcolls ? capcolls * 2 : 64;
    colls = realloc(colls, capcolls * sizeof *colls);
    if (!colls)
      abort();
  }
  size_t n = strlen(run_tag) + strlen(name) + 8;
  char *s = malloc(n);
  if (!s)
    abort();
  snprintf(s, n, "%s_%s", run_tag, name);
  colls[ncolls++] = s;
  return s;
}

void conf_skip(const char *why) {
  printf("skip %s: %s\n", dtx_t_current, why);
  fflush(stdout);
}

json_t *conf_find(const char *coll, const json_t *filter,
                  const dtx_find_opts_t *opts) {
  json_t *out = (json_t *)1;
  int rc = dtx_store_find(conf_st, coll, filter, opts, &out);
  CHECKF(rc == 0, "find %s in %s: %s (%s)", JS(filter), coll,
         dtx_errname(rc), dtx_errdetail());
  if (rc != 0) {
    CHECKF(out == NULL, "find error left *out set");
    return NULL;
  }
  CHECKF(json_is_array(out), "find returned %s", JS(out));
  return out;
}

json_t *conf_get(const char *coll, const json_t *filter) {
  json_t *all = conf_find(coll, filter, NULL);
  if (!all)
    return NULL;
  if (json_array_size(all) != 1) {
    CHECKF(json_array_size(all) == 1, "%s in %s matched %s", JS(filter),
           coll, JS(all));
    json_decref(all);
    return NULL;
  }
  json_t *d = json_incref(json_array_get(all, 0));
  json_decref(all);
  return d;
}

const char *conf_ids(const json_t *docs) {
  static _Thread_local char buf[4][1024];
  static _Thread_local int slot;
  char *out = buf[slot++ % 4];
  json_t *ids = json_array();
  size_t i;
  json_t *d;
  json_array_foreach(docs, i, d) {
    json_t *id = json_object_get(d, "_id");
    json_array_append(ids, id ? id : json_null());
  }
  snprintf(out, 1024, "%s", JS(ids));
  json_decref(ids);
  return out;
}

int64_t conf_count(const char *coll, const json_t *filter) {
  int64_t n = -7;
  int rc = dtx_store_count(conf_st, coll, filter, &n);
  CHECKF(rc == 0, "count %s in %s: %s (%s)", JS(filter), coll,
         dtx_errname(rc), dtx_errdetail());
  return rc == 0 ? n : -1;
}

int conf_seed(const char *coll, const char *docs_json) {
  json_t *docs = JQ(docs_json);
  size_t n = 0;
  int rc = dtx_store_insert_many(conf_st, coll, docs, &n, NULL);
  CHECKF(rc == 0 && n == json_array_size(docs), "seed %s: %s (%s), n=%zu",
         coll, dtx_errname(rc), dtx_errdetail(), n);
  return rc;
}

int64_t conf_int_field(const char *coll, json_int_t id, const char *field) {
  json_t *f = json_pack("{sI}", "_id", id);
  json_t *d = conf_get(coll, f);
  json_decref(f);
  json_t *v = d ? json_object_get(d, field) : NULL;
  int64_t out = json_is_integer(v) ? json_integer_value(v) : INT64_MIN;
  json_decref(d);
  return out;
}

/* ---- processes ------------------------------------------------------------ */

pid_t conf_fork(int (*fn)(void *), void *arg) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    /* A child stuck in the store (a deadlock) dies of SIGALRM and the
     * parent reports it, instead of the whole suite hanging. */
    alarm(120);
    /* _exit: the child must not run the parent's atexit handlers or flush
     * its inherited stdio buffers a second time. */
    int st = fn(arg);
    fflush(stderr);
    _exit(st);
  }
  return pid;
}

int conf_wait(pid_t pid) {
  int status;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return -1;
  }
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return -1;
}

int conf_barrier_init(conf_barrier_t *b) {
  if (pipe(b->ready) != 0)
    return -1;
  if (pipe(b->go) != 0) {
    close(b->ready[0]);
    close(b->ready[1]);
    return -1;
  }
  return 0;
}

int conf_barrier_child(conf_barrier_t *b) {
  close(b->ready[0]);
  close(b->go[1]);
  char c = 'r';
  if (write(b->ready[1], &c, 1) != 1)
    return -1;
  close(b->ready[1]);
  /* The parent closes its write end to start everyone at once: read()
   * then returns 0 (EOF) in every child simultaneously. */
  ssize_t r;
  while ((r = read(b->go[0], &c, 1)) < 0 && errno == EINTR)
    ;
  close(b->go[0]);
  return r == 0 ? 0 : -1;
}

int conf_barrier_release(conf_barrier_t *b, int n) {
  close(b->ready[1]);
  b->ready[1] = -1;
  close(b->go[0]);
  b->go[0] = -1;
  int got = 0;
  while (got < n) {
    char c;
    ssize_t r = read(b->ready[0], &c, 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    got++;
  }
  close(b->go[1]);
  b->go[1] = -1;
  return got == n ? 0 : -1;
}

void conf_barrier_close(conf_barrier_t *b) {
  for (int i = 0; i < 2; i++) {
    if (b->ready[i] >= 0)
      close(b->ready[i]);
    if (b->go[i] >= 0)
      close(b->go[i]);
    b->ready[i] = b->go[i] = -1;
  }
}

/* ---- runner ------------------------------------------------------------- */

/* Drops everything this run created and proves it is gone, so a long-lived
 * store (a shared Redis) does not accumulate test data. */
static void test_cleanup_drops_every_collection(void) {
  REQUIRE(conf_st != NULL);
  dtx_drop_opts_t dro = {.bypass_validation = 1}; /* guarded ones too */
  for (size_t i = 0; i < ncolls; i++)
    CHECK_RC(dtx_store_drop_collection_ex(conf_st, colls[i], &dro), 0);
  json_t *names = NULL;
  CHECK_RC(dtx_store_list_collections(conf_st, &names), 0);
  REQUIRE(json_is_array(names));
  size_t i;
  json_t *n;
  size_t taglen = strlen(run_tag);
  json_array_foreach(names, i, n) {
    const char *s = json_string_value(n);
    CHECKF(s && strncmp(s, run_tag, taglen) != 0, "still listed: %s",
           s ? s : "(non-string)");
  }
  json_decref(names);
}

static int wanted(int argc, char **argv, const char *topic) {
  if (argc <= 2)
    return 1;
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], topic) == 0)
      return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '\0') {
    fprintf(stderr,
            "usage: %s URI [crud|query|index|concurrency|crash|rules|store|"
            "scale|bulk ...]\n",
            argv[0]);
    return 2;
  }
  /* A child killed mid-test must not take the runner down with SIGPIPE. */
  signal(SIGPIPE, SIG_IGN);
  conf_uri = argv[1];
  conf_poison = json_string("poison");
  const char *quick = getenv("DTX_QUICK");
  conf_quick = quick && *quick && strcmp(quick, "0") != 0;
  snprintf(run_tag, sizeof run_tag, "conf_%08x",
           (unsigned)(conf_random() & 0xffffffffu));
  int rc = dtx_store_open(conf_uri, &conf_st);
  if (rc != 0 || !conf_st) {
    fprintf(stderr, "cannot open %s: %s (%s)\n", conf_uri, dtx_errname(rc),
            dtx_errdetail());
    return 2;
  }
  printf("conformance: %s (tag %s%s%s)\n", dtx_store_uri(conf_st), run_tag,
         conf_quick ? ", quick" : "",
         conf_via_bulk() ? ", single writes through bulk_write" : "");
  fflush(stdout);

  static const struct {
    const char *name;
    void (*run)(void);
  } topics[] = {
      {"crud", conf_run_crud},
      {"query", conf_run_query},
      {"index", conf_run_index},
      {"concurrency", conf_run_concurrency},
      {"crash", conf_run_crash},
      {"mongo", conf_run_mongo},
      {"rules", conf_run_rules},
      {"store", conf_run_store},
      {"scale", conf_run_scale},
      {"bulk", conf_run_bulk},
      {"fence", conf_run_fence},
      {"window", conf_run_window},
      {"redis", conf_run_redis},
  };
  int64_t t_all = conf_now_ms();
  for (size_t i = 0; i < sizeof topics / sizeof topics[0]; i++) {
    if (!wanted(argc, argv, topics[i].name))
      continue;
    int64_t t0 = conf_now_ms();
    topics[i].run();
    printf("-- %s: %lld ms\n", topics[i].name,
           (long long)(conf_now_ms() - t0));
    fflush(stdout);
  }
  conf_store_reacquire();
  CONF_RUN(test_cleanup_drops_every_collection);
  printf("-- total: %lld ms\n", (long long)(conf_now_ms() - t_all));
  dtx_store_close(conf_st);
  for (size_t i = 0; i < ncolls; i++)
    free(colls[i]);
  free(colls);
  json_decref(conf_poison);
  return TEST_DONE();
}
