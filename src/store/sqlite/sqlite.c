/* sqlite.c -- the embedded SQLite backend: its URI (the options through
 * store.h's one parser), connections and their statement caches, lock
 * waiting, error mapping, read transactions, and the method table that
 * store.c calls.
 *
 * A backend has one writer connection, shared by all threads of the
 * process through the group commit (commit.c), and a small pool of read
 * connections: WAL lets readers run beside the writer, each in its own
 * snapshot.  The in-memory database is private to its connection, so there
 * the writer connection serves reads too, under its mutex.
 *
 * Many processes may share one file.  SQLite's write lock then passes
 * between them; a busy handler waits for it with short sleeps for up to
 * five minutes (or the command's deadline, util/deadline.h), so an
 * operation does not fail merely because another process is writing. */
#include "store/sqlite/sqlite_int.h"

#include "util/deadline.h"
#include "util/err.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS (5 * 60 * 1000)
#define MAX_READERS 8
#define STMT_CACHE_MAX 512

/* ---- URI ------------------------------------------------------------------------ */

/* The options a sqlite: URI takes (store.h's one parser reads them);
 * sync's words are in SQ_SYNC_* order. */
static const dtx__uri_opt_t opts[] = {
    {"sync", DTX__URI_WORD, offsetof(sq_uri_t, sync), 0, 0, "off|normal|full",
     1},
    /* SQLite's own default page cache is 2 MiB a connection; a file many
     * times that makes every scattered read a pread (docs/benchmarks.md,
     * "How cost grows with the work").  Memory is the user's to spend:
     * each of the store's connections (a writer and up to MAX_READERS
     * readers) gets this much. */
    {"cache_mb", DTX__URI_INT, offsetof(sq_uri_t, cache_mb), 1, 65536, NULL,
     1},
};

/* Every message names the URI masked (dtx__uri_masked): a SQLite URI
 * holds no secret, but a password= given to it by mistake is one. */
static int sq_uri_parse(const char *uri, const char *shown, sq_uri_t *out) {
  memset(out, 0, sizeof *out);
  out->sync = SQ_SYNC_FULL;
  if (!uri || strncmp(uri, "sqlite:", 7) != 0)
    return dtx__err(DTX_EBADURI, "store URI '%s' does not start with sqlite:",
                    shown);
  const char *p = uri + 7;
  const char *q = strchr(p, '?');
  size_t plen = q ? (size_t)(q - p) : strlen(p);
  if (plen == 0)
    return dtx__err(DTX_EBADURI, "store URI '%s' has an empty path", shown);
  int rc = q ? dtx__uri_opts(shown, q + 1, opts, sizeof opts / sizeof *opts,
                             out)
             : 0;
  if (rc < 0)
    return rc;
  if (plen == 8 && strncmp(p, ":memory:", 8) == 0) {
    out->memory = 1;
    return 0;
  }
  if (!(out->path = strndup(p, plen)))
    return dtx__err(DTX_ENOMEM, "parsing %s", shown);
  return 0;
}

int dtx__sq_uri_parse(const char *uri, sq_uri_t *out) {
  char *shown = dtx__uri_masked(uri ? uri : "(null)");
  if (!shown)
    return dtx__err(DTX_ENOMEM, "parsing a sqlite: URI");
  int rc = sq_uri_parse(uri, shown, out);
  free(shown);
  return rc;
}

/* ---- time ----------------------------------------------------------------------- */

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Short sleeps first: another process's write transaction usually ends
 * within tens of microseconds, and a long first sleep would waste most of
 * the lock's idle time.  The backoff caps at 1 ms. */
static long backoff_us(int count) {
  int shift = count < 7 ? count : 7;
  long us = 10L << shift;
  return us > 1000 ? 1000 : us;
}

static int busy_cb(void *arg, int count) {
  sq_conn_t *c = arg;
  int64_t now = mono_ms();
  if (count == 0)
    c->busy_t0 = now;
  /* The busy timeout, or the command's deadline when sooner. */
  if (dtx__deadline_expired(c->busy_t0, BUSY_TIMEOUT_MS + 1))
    return 0;
  sleep_us(backoff_us(count));
  return 1;
}

/* ---- statement cache -------------------------------------------------------------- */

uint64_t dtx__sq_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h ? h : 1;
}

static void cache_flush(sq_conn_t *c) {
  for (size_t i = 0; i < c->cap; i++) {
    if (c->tab[i].st) {
      sqlite3_finalize(c->tab[i].st);
      free(c->tab[i].sql);
    }
  }
  if (c->tab)
    memset(c->tab, 0, c->cap * sizeof *c->tab);
  c->n = 0;
}

static int cache_grow(sq_conn_t *c) {
  size_t ncap = c->cap ? c->cap * 2 : 64;
  sq_stmt_ent_t *nt = calloc(ncap, sizeof *nt);
  if (!nt)
    return dtx__err(DTX_ENOMEM, "growing the statement cache");
  for (size_t i = 0; i < c->cap; i++) {
    if (!c->tab[i].st)
      continue;
    size_t j = c->tab[i].h & (ncap - 1);
    while (nt[j].st)
      j = (j + 1) & (ncap - 1);
    nt[j] = c->tab[i];
  }
  free(c->tab);
  c->tab = nt;
  c->cap = ncap;
  return 0;
}

int dtx__sq_prep(sq_conn_t *c, const char *sql, uint64_t h,
                 sqlite3_stmt **out) {
  *out = NULL;
  if (!h)
    h = dtx__sq_hash(sql);
  if (c->cap) {
    size_t j = h & (c->cap - 1);
    for (; c->tab[j].st; j = (j + 1) & (c->cap - 1)) {
      if (c->tab[j].h == h && strcmp(c->tab[j].sql, sql) == 0) {
        sqlite3_reset(c->tab[j].st);
        sqlite3_clear_bindings(c->tab[j].st);
        *out = c->tab[j].st;
        return 0;
      }
    }
  }
  if ((c->n + 1) * 2 > c->cap) {
    int rc = cache_grow(c);
    if (rc < 0)
      return rc;
  }
  sqlite3_stmt *st;
  int src =
      sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
  if (src != SQLITE_OK)
    return dtx__sq_err(c, src, "preparing a statement");
  char *copy = strdup(sql);
  if (!copy) {
    sqlite3_finalize(st);
    return dtx__err(DTX_ENOMEM, "caching a statement");
  }
  size_t j = h & (c->cap - 1);
  while (c->tab[j].st)
    j = (j + 1) & (c->cap - 1);
  c->tab[j] = (sq_stmt_ent_t){h, copy, st};
  c->n++;
  *out = st;
  return 0;
}

int dtx__sq_err(sq_conn_t *c, int src, const char *what) {
  const char *msg = c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(src);
  switch (src & 0xff) {
  case SQLITE_BUSY:
  case SQLITE_LOCKED:
    return dtx__err(DTX_EBUSY, "sqlite: %s: %s", what, msg);
  case SQLITE_NOMEM:
    return dtx__err(DTX_ENOMEM, "sqlite: %s: %s", what, msg);
  default:
    return dtx__err(DTX_EBACKEND, "sqlite: %s: %s (code %d)", what, msg, src);
  }
}

int dtx__sq_exec(sq_conn_t *c, const char *sql) {
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(c, sql, 0, &st);
  if (rc < 0)
    return rc;
  int src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
  }
  sqlite3_reset(st);
  return src == SQLITE_DONE ? 0 : dtx__sq_err(c, src, sql);
}

int dtx__sq_exec_once(sq_conn_t *c, const char *sql) {
  char *msg = NULL;
  int src = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
  if (src == SQLITE_OK)
    return 0;
  int rc = dtx__err(src == SQLITE_BUSY ? DTX_EBUSY : DTX_EBACKEND,
                    "sqlite: %s: %s", sql, msg ? msg : sqlite3_errstr(src));
  sqlite3_free(msg);
  return rc;
}

/* SQLite reports SQLITE_BUSY without calling the busy handler in a few
 * cases (for instance while another connection recovers the WAL), so the
 * statements that take or release the write lock retry on their own too,
 * under the same overall deadline. */
static int exec_retry(sq_conn_t *c, const char *sql) {
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(c, sql, 0, &st);
  if (rc < 0)
    return rc;
  int64_t t0 = mono_ms();
  for (int n = 0;; n++) {
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    if (src == SQLITE_DONE)
      return 0;
    if ((src & 0xff) != SQLITE_BUSY ||
        dtx__deadline_expired(t0, BUSY_TIMEOUT_MS + 1))
      return dtx__sq_err(c, src, sql);
    sleep_us(backoff_us(n));
  }
}

int dtx__sq_begin_write(sq_conn_t *c) {
  return exec_retry(c, "BEGIN IMMEDIATE");
}

int dtx__sq_commit(sq_conn_t *c) { return exec_retry(c, "COMMIT"); }

void dtx__sq_rollback(sq_conn_t *c) {
  if (!sqlite3_get_autocommit(c->db))
    (void)dtx__sq_exec(c, "ROLLBACK");
}

/* ---- connections -------------------------------------------------------------------- */

static void conn_close(sq_conn_t *c) {
  if (!c)
    return;
  cache_flush(c);
  free(c->tab);
  sqlite3_close_v2(c->db);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

/* A missing store, in the words every command prints. */
static int no_store(const char *path) {
  return dtx__err(DTX_EUNAVAILABLE,
                  "no store at %s (a command that only reads never creates "
                  "one)",
                  path);
}

/* Opens one connection.  create 0 opens an existing file only (readers,
 * and the writer under DTX_OPEN_NOCREATE). */
static int conn_open(const sq_uri_t *u, int writer, int create,
                     sq_conn_t **out) {
  *out = NULL;
  const char *path = u->memory ? ":memory:" : u->path;
  if (!create && !u->memory && access(path, F_OK) < 0 && errno == ENOENT)
    return no_store(path);
  sq_conn_t *c = calloc(1, sizeof *c);
  if (!c)
    return dtx__err(DTX_ENOMEM, "opening a connection");
  pthread_mutex_init(&c->mu, NULL);
  int src = sqlite3_open_v2(path, &c->db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                                (create ? SQLITE_OPEN_CREATE : 0),
                            NULL);
  int rc;
  if (src != SQLITE_OK) {
    rc = dtx__err(DTX_EUNAVAILABLE, "cannot open sqlite:%s: %s", path,
                  c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(src));
    conn_close(c);
    return rc;
  }
  sqlite3_extended_result_codes(c->db, 1);
  sqlite3_busy_handler(c->db, busy_cb, c);
  static const char *const sync_sql[] = {"PRAGMA synchronous=OFF",
                                         "PRAGMA synchronous=NORMAL",
                                         "PRAGMA synchronous=FULL"};
  if ((rc = dtx__sq_exec_once(c, sync_sql[u->sync])) < 0)
    goto fail;
  if (u->cache_mb) {
    char sql[64]; /* negative: KiB, not pages */
    snprintf(sql, sizeof sql, "PRAGMA cache_size=-%lld",
             (long long)u->cache_mb * 1024);
    if ((rc = dtx__sq_exec_once(c, sql)) < 0)
      goto fail;
  }
  if (writer && !u->memory) {
    /* journal_mode answers with a row naming the mode it ended in. */
    sqlite3_stmt *st;
    src = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (src != SQLITE_OK) {
      rc = dtx__sq_err(c, src, "setting WAL mode");
      goto fail;
    }
    src = sqlite3_step(st);
    int wal = src == SQLITE_ROW &&
              strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
    if (src != SQLITE_ROW)
      rc = dtx__sq_err(c, src, "setting WAL mode");
    else if (!wal)
      rc = dtx__err(DTX_EBACKEND, "sqlite: %s cannot use WAL mode (got %s)",
                    path, sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (!wal)
      goto fail;
  }
  *out = c;
  return 0;
fail:
  conn_close(c);
  return rc;
}

static int reader_get(dtx__backend_t *b, sq_conn_t **out) {
  pthread_mutex_lock(&b->rmu);
  for (;;) {
    if (b->nidle) {
      *out = b->idle[--b->nidle];
      pthread_mutex_unlock(&b->rmu);
      return 0;
    }
    if (b->nopen < MAX_READERS)
      break;
    pthread_cond_wait(&b->rcv, &b->rmu);
  }
  b->nopen++;
  pthread_mutex_unlock(&b->rmu);
  int rc = conn_open(&b->uri, 0, 0, out);
  if (rc < 0) {
    pthread_mutex_lock(&b->rmu);
    b->nopen--;
    pthread_cond_signal(&b->rcv);
    pthread_mutex_unlock(&b->rmu);
    /* The file opened once already, so this is not "unavailable". */
    return rc == DTX_EUNAVAILABLE ? DTX_EBACKEND : rc;
  }
  return 0;
}

static void reader_put(dtx__backend_t *b, sq_conn_t *c) {
  pthread_mutex_lock(&b->rmu);
  b->idle[b->nidle++] = c;
  pthread_cond_signal(&b->rcv);
  pthread_mutex_unlock(&b->rmu);
}

/* ---- read transactions ------------------------------------------------------------------- */

int dtx__sq_read_begin(dtx__backend_t *b, const char *coll, sq_conn_t **cp,
                       sq_cat_t **cat, const sq_coll_t **co) {
  sq_conn_t *c;
  int rc;
  *cp = NULL;
  *cat = NULL;
  if (b->uri.memory) {
    c = b->w;
    pthread_mutex_lock(&c->mu);
  } else if ((rc = reader_get(b, &c)) < 0) {
    return rc;
  }
  dtx__sq_cache_trim(c);
  if ((rc = dtx__sq_exec(c, "BEGIN")) < 0)
    goto fail;
  *cat = dtx__sq_cat_get(b);
  if ((rc = dtx__sq_cat_sync(b, c, cat)) < 0)
    goto fail;
  *cp = c;
  if (co)
    *co = dtx__sq_coll_find(*cat, coll);
  return 0;
fail:
  dtx__sq_cat_put(*cat);
  *cat = NULL;
  dtx__sq_rollback(c);
  if (b->uri.memory)
    pthread_mutex_unlock(&c->mu);
  else
    reader_put(b, c);
  return rc;
}

void dtx__sq_read_end(dtx__backend_t *b, sq_conn_t *c, sq_cat_t *cat) {
  dtx__sq_cat_put(cat);
  if (!c)
    return;
  /* A read transaction has nothing to commit; ending it cannot fail in a
   * way that matters, and ROLLBACK would do the same. */
  if (dtx__sq_exec(c, "COMMIT") < 0)
    dtx__sq_rollback(c);
  if (b->uri.memory)
    pthread_mutex_unlock(&c->mu);
  else
    reader_put(b, c);
}

void dtx__sq_cache_trim(sq_conn_t *c) {
  if (c->n > STMT_CACHE_MAX)
    cache_flush(c);
}

/* ---- open / close ------------------------------------------------------------------------- */

static void sq_close(dtx__backend_t *b);

static int sq_open(const char *uri, unsigned flags, dtx__backend_t **out) {
  *out = NULL;
  dtx__backend_t *b = calloc(1, sizeof *b);
  if (!b)
    return dtx__err(DTX_ENOMEM, "opening a sqlite: store");
  int rc = dtx__sq_uri_parse(uri, &b->uri);
  if (rc < 0) {
    free(b);
    return rc;
  }
  pthread_mutex_init(&b->qmu, NULL);
  pthread_mutex_init(&b->rmu, NULL);
  pthread_cond_init(&b->rcv, NULL);
  pthread_mutex_init(&b->catmu, NULL);
  if (!(b->idle = calloc(MAX_READERS, sizeof *b->idle))) {
    rc = dtx__err(DTX_ENOMEM, "opening a sqlite: store");
    goto fail;
  }
  /* A private in-memory store is always new: nothing to refuse. */
  int create = !(flags & DTX_OPEN_NOCREATE) || b->uri.memory;
  if ((rc = conn_open(&b->uri, 1, create, &b->w)) < 0)
    goto fail;
  if ((rc = dtx__sq_schema_init(b->w, create)) < 0) {
    if (rc == DTX_ENOTFOUND)
      rc = no_store(b->uri.path);
    goto fail;
  }
  *out = b;
  return 0;
fail:
  if (rc == DTX_EBACKEND || rc == DTX_EBUSY) {
    char *shown = dtx__uri_masked(uri);
    rc = dtx__err_wrap(DTX_EUNAVAILABLE, "opening %s",
                       shown ? shown : "a sqlite: store");
    free(shown);
  }
  sq_close(b);
  return rc;
}

static void sq_close(dtx__backend_t *b) {
  if (!b)
    return;
  for (size_t i = 0; i < b->nidle; i++)
    conn_close(b->idle[i]);
  free(b->idle);
  conn_close(b->w);
  dtx__sq_cat_put(b->cat);
  pthread_mutex_destroy(&b->qmu);
  pthread_mutex_destroy(&b->rmu);
  pthread_cond_destroy(&b->rcv);
  pthread_mutex_destroy(&b->catmu);
  free(b->uri.path);
  free(b);
}

const dtx_store_methods_t dtx__sqlite_methods = {
    .version = 4,
    .scheme = "sqlite",
    .uri_form = "sqlite:PATH",
    .open = sq_open,
    .close = sq_close,
    .insert = dtx__sq_insert,
    .find = dtx__sq_find,
    .count = dtx__sq_count,
    .modify_one = dtx__sq_modify_one,
    .modify_many = dtx__sq_modify_many,
    .create_index = dtx__sq_create_index,
    .list_indexes = dtx__sq_list_indexes,
    .drop_collection = dtx__sq_drop_collection,
    .list_collections = dtx__sq_list_collections,
    .set_rules = dtx__sq_set_rules,
    .get_rules = dtx__sq_get_rules,
    .bulk = dtx__sq_bulk,
    .fence_records = dtx__sq_fence_records,
};
