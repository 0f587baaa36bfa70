/* conf.h -- shared state and helpers of the backend conformance suite.
 *
 * The suite is written once against the public API in doctx.h and run
 * against every store URI (argv[1]), so nothing here may know which backend
 * is behind the handle.  conf_main.c owns the store handle, the per-run
 * collection-name tag and the runner; each conf_<topic>.c file exports one
 * conf_run_<topic>() that calls TEST_RUN for its tests.
 *
 * Ownership: conf_coll() returns a string owned by the suite (valid until
 * the program exits); every helper returning json_t gives a new reference
 * the caller json_decref()s. */
#ifndef DTX_CONF_H
#define DTX_CONF_H

#include <stdint.h>
#include <sys/types.h>

#include "doctx.h"
#include "testlib.h"

/* The store under test, opened by conf_main.c.  Tests that fork close it
 * first (conf_store_release) and reopen it after (conf_store_reacquire):
 * a store handle, like an SQLite connection or a socket, must not be
 * carried across fork(). */
extern dtx_store_t *conf_st;
extern const char *conf_uri;
/* 1 when $DTX_QUICK is set: long loops run a quarter of their length. */
extern int conf_quick;

void conf_store_release(void);
void conf_store_reacquire(void);

/* 1 when the store is private to this process (e.g. sqlite::memory:), so
 * tests that need a second process must skip. */
int conf_store_is_private(void);

/* A fresh collection name for this run ("conf_<tag>_<name>"); it is
 * recorded and dropped when the suite ends. */
const char *conf_coll(const char *name);

/* Prints a skip line for the current test. */
void conf_skip(const char *why);

/* ---- JSON helpers -------------------------------------------------------- */

/* Parses test JSON written with single quotes ('a' for "a"; test texts
 * never contain a quote character themselves) and returns a BORROWED
 * value that lives until conf_gc(), which CONF_RUN calls after each test.
 * It keeps the tables readable and leak-free under LeakSanitizer. */
json_t *JQ(const char *text);

/* Hands a new reference to the same collector and returns it (NULL is
 * passed through), for results a test only reads. */
json_t *conf_keep(json_t *v);
void conf_gc(void);

#define CONF_RUN(fn)                                                         \
  do {                                                                       \
    TEST_RUN(fn);                                                            \
    conf_gc();                                                               \
    fflush(stdout);                                                          \
  } while (0)

/* A non-NULL value to preset out-parameters with, to prove that errors
 * set them to NULL. */
extern json_t *conf_poison;

/* The one document matching filter in coll (new reference), or NULL when
 * none or more than one (with a CHECK failure describing it). */
json_t *conf_get(const char *coll, const json_t *filter);

/* find(filter) in natural order (new reference; NULL on error). */
json_t *conf_find(const char *coll, const json_t *filter,
                  const dtx_find_opts_t *opts);

/* The _ids of an array of documents, as compact JSON text ("[1,2]"), in a
 * rotating static buffer. */
const char *conf_ids(const json_t *docs);

/* count(filter), or -1 on error (with a CHECK failure). */
int64_t conf_count(const char *coll, const json_t *filter);

/* Inserts docs (a JSON array text in JQ quoting) and checks that all went
 * in; returns the insert_many code. */
int conf_seed(const char *coll, const char *docs_json);

/* The integer at field of the document with _id id, or INT64_MIN. */
int64_t conf_int_field(const char *coll, json_int_t id, const char *field);

/* ---- processes ------------------------------------------------------------ */

/* Forks a child that runs fn(arg) and _exit()s with its return value.
 * The parent's store must be released first.  Returns the pid or -1. */
pid_t conf_fork(int (*fn)(void *), void *arg);

/* Waits for pid; returns its exit status, or 128+signal, or -1. */
int conf_wait(pid_t pid);

/* A start line for child processes: every child announces it is ready
 * (after opening its store) and then blocks until the parent releases all
 * of them at once, so their work overlaps. */
typedef struct conf_barrier {
  int ready[2];
  int go[2];
} conf_barrier_t;

int conf_barrier_init(conf_barrier_t *b);
/* In a child: announce readiness and wait for the start.  0 on success. */
int conf_barrier_child(conf_barrier_t *b);
/* In the parent, after forking n children: wait until all are ready, then
 * release them.  0 on success, -1 when a child died first. */
int conf_barrier_release(conf_barrier_t *b, int n);
void conf_barrier_close(conf_barrier_t *b);

/* Reports a child's failure on stderr (children cannot use CHECK). */
#define CONF_CHILD_FAIL(...)                                                 \
  do {                                                                       \
    fprintf(stderr, "[child %d] %s:%d: ", (int)getpid(), __FILE__,           \
            __LINE__);                                                       \
    fprintf(stderr, __VA_ARGS__);                                            \
    fputc('\n', stderr);                                                     \
  } while (0)

/* Monotonic milliseconds. */
int64_t conf_now_ms(void);

/* A random 64-bit value from the kernel (falls back to time and pid). */
uint64_t conf_random(void);

/* ---- topics ------------------------------------------------------------- */

void conf_run_crud(void);
void conf_run_query(void);
void conf_run_index(void);
void conf_run_concurrency(void);
void conf_run_crash(void);
void conf_run_mongo(void);
void conf_run_rules(void);
/* conf_rules_threads.c, run by conf_run_rules: a plain-scope rule judges
 * each write by the thread that made it. */
void conf_test_rules_scope_threads(void);
void conf_test_rules_read_while_set(void);
void conf_run_store(void);
void conf_run_scale(void);
void conf_run_fence(void);
void conf_run_window(void); /* conf_window.c: time-bounded writes */
/* conf_redis.c: a Redis namespace's body format (skips on other stores) */
void conf_run_redis(void);
void conf_run_bulk(void);
/* Random batches explained by a serial order (conf_bulk_serial.c), run
 * by conf_run_bulk. */
void conf_test_bulk_serial(void);
/* A wait for a hot document's turn keeps the call's deadline
 * (conf_bulk_turns.c, Redis only), run by conf_run_bulk. */
void conf_test_turn_deadline(void);

/* ---- every single write through bulk (conf_bulk.c) ---------------------- */

/* 1 when $DTX_CONF_VIA_BULK is set: the single-document writes of every
 * test then run inside dtx_store_bulk_write batches, mixed with unrelated
 * operations, through the wrappers below (same signatures, same results
 * as the calls they stand for). */
int conf_via_bulk(void);
int conf_insert(dtx_store_t *, const char *, const json_t *, json_t **);
int conf_insert_ex(dtx_store_t *, const char *, const json_t *,
                   const dtx_insert_opts_t *, json_t **);
int conf_update(dtx_store_t *, const char *, const json_t *, const json_t *,
                const dtx_update_opts_t *, dtx_update_result_t *);
int conf_find_one_and_update(dtx_store_t *, const char *, const json_t *,
                             const json_t *, const dtx_fam_opts_t *,
                             json_t **);
int conf_find_one_and_delete(dtx_store_t *, const char *, const json_t *,
                             const dtx_fam_opts_t *, json_t **);
int conf_delete(dtx_store_t *, const char *, const json_t *, int, int64_t *);
int conf_delete_ex(dtx_store_t *, const char *, const json_t *,
                   const dtx_delete_opts_t *, int64_t *);
/* Redis targets (conf_redis.c): calls fn(ctx, arg) on the server of
 * conf_uri -- on a cluster on every node CLUSTER NODES lists (masters
 * only: every master), until fn returns nonzero.  ctx is a hiredis
 * redisContext (void * here so this header needs no hiredis).  Returns
 * how many calls returned nonzero (0 when conf_uri is not redis://HOST:
 * PORT or nothing answers). */
int conf_redis_each_node(int masters_only, int (*fn)(void *ctx, void *arg),
                         void *arg, int stop_at_first);

#ifndef CONF_NO_WRAP
#define dtx_store_insert conf_insert
#define dtx_store_insert_ex conf_insert_ex
#define dtx_store_update conf_update
#define dtx_store_find_one_and_update conf_find_one_and_update
#define dtx_store_find_one_and_delete conf_find_one_and_delete
#define dtx_store_delete conf_delete
#define dtx_store_delete_ex conf_delete_ex
#endif

#endif
