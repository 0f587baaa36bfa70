/* conf_crash.c -- conformance: a writer killed at a random moment.
 *
 * A child process streams updates over 50 documents; every update rewrites
 * several fields to one new value v at once (a, b, c.x, arr, gen, u), so a
 * torn write shows up as fields that disagree.  The parent SIGKILLs it at
 * a random moment, reopens the store and checks that every document is
 * whole (fully old or fully new), that none was lost, that the unique
 * index on u still agrees with the documents, and that every update the
 * writer saw acknowledged survived (a process kill must not lose
 * acknowledged writes at any sync level).  Three rounds, each continuing
 * from the state the last one left. */
#include "conf.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { NDOCS = 50, ROUNDS = 3, U_STRIDE = 1000000 };

typedef struct ack {
  int32_t id, v;
} ack_t;

typedef struct writer_job {
  const char *coll;
  int ack_fd; /* write end */
  int unused_fd;
} writer_job_t;

/* The whole document for _id i at generation v. */
static json_t *doc_at(int i, int64_t v) {
  char b[32];
  snprintf(b, sizeof b, "s%lld", (long long)v);
  return json_pack("{sisIsss{sI}s[III]sIsI}", "_id", i, "a", (json_int_t)v,
                   "b", b, "c", "x", (json_int_t)v, "arr", (json_int_t)v,
                   (json_int_t)v, (json_int_t)v, "gen", (json_int_t)v, "u",
                   (json_int_t)i * U_STRIDE + v);
}

/* Runs until killed.  It is the only writer, so it knows each document's
 * generation; the filter still names it, so a lost or doubled update
 * would stop the writer with an error rather than go unnoticed. */
static int writer_child(void *arg) {
  writer_job_t *w = arg;
  close(w->unused_fd);
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(conf_uri, &st);
  if (rc != 0) {
    CONF_CHILD_FAIL("open: %s (%s)", dtx_errname(rc), dtx_errdetail());
    return 1;
  }
  int64_t gen[NDOCS];
  json_t *all = NULL;
  rc = dtx_store_find(st, w->coll, NULL, NULL, &all);
  if (rc != 0 || json_array_size(all) != NDOCS) {
    CONF_CHILD_FAIL("load: %s", dtx_errname(rc));
    return 1;
  }
  size_t k;
  json_t *d;
  json_array_foreach(all, k, d) {
    json_int_t id = json_integer_value(json_object_get(d, "_id"));
    if (id >= 0 && id < NDOCS)
      gen[id] = json_integer_value(json_object_get(d, "gen"));
  }
  json_decref(all);
  ack_t ready = {-1, -1};
  if (write(w->ack_fd, &ready, sizeof ready) != (ssize_t)sizeof ready)
    return 1;

  uint64_t seed = conf_random();
  for (uint64_t step = 0;; step++) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    int i = (int)((seed >> 33) % NDOCS);
    int64_t v = gen[i] + 1;
    json_t *filter = json_pack("{sisI}", "_id", i, "gen", (json_int_t)gen[i]);
    json_t *upd;
    if (step % 3 == 2) {
      upd = doc_at(i, v); /* a replacement */
    } else {
      json_t *whole = doc_at(i, v);
      json_object_del(whole, "_id");
      json_object_del(whole, "gen");
      upd = json_pack("{sOs{si}}", "$set", whole, "$inc", "gen", 1);
      json_decref(whole);
    }
    if (step % 2 == 0) {
      dtx_update_result_t r;
      rc = dtx_store_update(st, w->coll, filter, upd, NULL, &r);
      if (rc == 0 && r.modified != 1)
        rc = DTX_ENOMATCH;
    } else {
      json_t *out = NULL;
      rc = dtx_store_find_one_and_update(st, w->coll, filter, upd, NULL, &out);
      json_decref(out);
    }
    json_decref(filter);
    json_decref(upd);
    if (rc != 0) {
      CONF_CHILD_FAIL("update %d to %lld: %s (%s)", i, (long long)v,
                      dtx_errname(rc), dtx_errdetail());
      return 1;
    }
    gen[i] = v;
    ack_t a = {i, (int32_t)v};
    if (write(w->ack_fd, &a, sizeof a) != (ssize_t)sizeof a)
      return 1;
  }
}

/* Waits up to timeout_ms for the writer's ready record.  1 when it came. */
static int wait_ready(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  ack_t a;
  return poll(&p, 1, timeout_ms) == 1 && read(fd, &a, sizeof a) == sizeof a &&
         a.id == -1;
}

typedef struct ack_reader {
  char buf[8192];
  size_t have;
  int eof;
} ack_reader_t;

/* Reads ack records into acked[] until deadline_ms (monotonic), or until
 * EOF when deadline_ms is negative.  Returns the number of records read.
 * Each record is one 8-byte write, but a read may still end mid-record,
 * so leftovers are carried over. */
static int64_t drain_acks(int fd, int64_t deadline_ms, ack_reader_t *ar,
                          int32_t *acked) {
  int64_t n = 0;
  while (!ar->eof) {
    int timeout = -1;
    if (deadline_ms >= 0) {
      int64_t left = deadline_ms - conf_now_ms();
      if (left <= 0)
        break;
      timeout = (int)left;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int pr = poll(&p, 1, timeout);
    if (pr <= 0)
      continue; /* timeout or EINTR: the deadline check decides */
    ssize_t r = read(fd, ar->buf + ar->have, sizeof ar->buf - ar->have);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      ar->eof = 1;
      break;
    }
    ar->have += (size_t)r;
    size_t off = 0;
    for (; ar->have - off >= sizeof(ack_t); off += sizeof(ack_t)) {
      ack_t a;
      memcpy(&a, ar->buf + off, sizeof a);
      if (a.id >= 0 && a.id < NDOCS && a.v > acked[a.id])
        acked[a.id] = a.v;
      n++;
    }
    memmove(ar->buf, ar->buf + off, ar->have - off);
    ar->have -= off;
  }
  return n;
}

/* Also advances acked[] to the generations found: the next writer starts
 * from them, and an update it has in flight when killed may only add one
 * more.  (Against the acknowledgements alone, an unacknowledged update
 * applied in each of two rounds would look like two in flight.) */
static void check_after_crash(const char *c, int32_t *acked, int round) {
  CHECKF(conf_count(c, NULL) == NDOCS, "round %d: %lld documents", round,
         (long long)conf_count(c, NULL));
  json_t *all = conf_keep(conf_find(c, NULL, NULL));
  REQUIRE(all != NULL);
  int torn = 0;
  size_t k;
  json_t *d;
  json_array_foreach(all, k, d) {
    json_int_t i = json_integer_value(json_object_get(d, "_id"));
    json_t *g = json_object_get(d, "gen");
    json_int_t v = json_integer_value(g);
    json_t *want = doc_at((int)i, v);
    if (!json_is_integer(g) || !json_equal(d, want)) {
      if (torn++ < 3)
        CHECKF(0, "round %d: torn document %s", round, JS(d));
    }
    json_decref(want);
    if (i >= 0 && i < NDOCS) {
      CHECKF(v >= acked[i] && v <= (json_int_t)acked[i] + 1,
             "round %d: doc %lld at gen %lld, last acknowledged %d", round,
             (long long)i, (long long)v, acked[i]);
      if (v > acked[i])
        acked[i] = (int32_t)v;
      /* The unique index still points at this very document. */
      json_t *f = json_pack("{sI}", "u", (json_int_t)i * U_STRIDE + v);
      json_t *hit = conf_keep(conf_find(c, f, NULL));
      CHECKF(hit && json_array_size(hit) == 1 &&
                 json_equal(json_array_get(hit, 0), d),
             "round %d: index lookup %s gives %s", round, JS(f), JS(hit));
      json_decref(f);
    }
  }
  CHECK(torn == 0);
  /* ... and still refuses a duplicate. */
  json_t *first = json_array_get(all, 0);
  json_t *dup = conf_keep(
      json_pack("{sisO}", "_id", 1000 + round, "u",
                json_object_get(first, "u")));
  CHECK_RC(dtx_store_insert(conf_st, c, dup, NULL), DTX_EDUPKEY);
  CHECK(conf_count(c, NULL) == NDOCS);
}

static void test_writer_killed_at_random_moments(void) {
  if (conf_store_is_private()) {
    conf_skip("store is private to one process");
    return;
  }
  const char *c = conf_coll("crash");
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'u':1}"),
                                  &(dtx_index_opts_t){.unique = 1}, NULL),
           0);
  json_t *docs = conf_keep(json_array());
  for (int i = 0; i < NDOCS; i++)
    json_array_append_new(docs, doc_at(i, 0));
  size_t n = 0;
  CHECK_RC(dtx_store_insert_many(conf_st, c, docs, &n, NULL), 0);
  REQUIRE(n == NDOCS);

  int32_t acked[NDOCS];
  memset(acked, 0, sizeof acked);
  int64_t total = 0;
  for (int round = 1; round <= ROUNDS; round++) {
    conf_store_release();
    int p[2];
    REQUIRE(pipe(p) == 0);
    writer_job_t w = {.coll = c, .ack_fd = p[1], .unused_fd = p[0]};
    pid_t pid = conf_fork(writer_child, &w);
    close(p[1]);
    REQUIRE(pid > 0);
    /* Start the clock once the writer is writing, not while it opens. */
    int64_t kill_after = 50 + (int64_t)(conf_random() % 251);
    static ack_reader_t ar;
    memset(&ar, 0, sizeof ar);
    int64_t updates = 0;
    if (wait_ready(p[0], 10000)) {
      updates = drain_acks(p[0], conf_now_ms() + kill_after, &ar, acked);
      CHECKF(!ar.eof, "round %d: writer stopped before the kill", round);
    } else {
      CHECKF(0, "round %d: writer never became ready", round);
    }
    kill(pid, SIGKILL);
    int st = conf_wait(pid);
    CHECKF(st == 128 + SIGKILL, "round %d: writer ended with %d", round, st);
    updates += drain_acks(p[0], -1, &ar, acked);
    close(p[0]);
    conf_store_reacquire();
    check_after_crash(c, acked, round);
    printf("     round %d: killed after %lld ms, %lld updates acknowledged\n",
           round, (long long)kill_after, (long long)updates);
    total += updates;
  }
  CHECKF(total >= ROUNDS, "the writer made no progress (%lld updates)",
         (long long)total);
  /* The store is fully usable afterwards. */
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, NULL, JQ("{'$set':{'after':1}}"),
                            &(dtx_update_opts_t){.many = 1}, &r),
           0);
  CHECK(r.matched == NDOCS && r.modified == NDOCS);
}

void conf_run_crash(void) { CONF_RUN(test_writer_killed_at_random_moments); }
