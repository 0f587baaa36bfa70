/* test_sqlite_uri.c -- the SQLite backend's URI parsing and opening: the
 * accepted forms and their settings, every kind of malformed URI
 * (DTX_EBADURI), files that cannot be opened (DTX_EUNAVAILABLE), and the
 * pragmas a file store runs with (WAL, synchronous per sync=). */
#include "testlib.h"

#include "store/sqlite/sqlite_int.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/dtx_test_uri.XXXXXX";

typedef struct uri_case {
  const char *uri;
  int rc;
  int memory;
  int sync;
  const char *path;
  const char *detail_has; /* for errors: a word the detail must contain */
} uri_case_t;

static const uri_case_t cases[] = {
    {"sqlite:/tmp/x.db", 0, 0, SQ_SYNC_FULL, "/tmp/x.db", NULL},
    {"sqlite:x.db", 0, 0, SQ_SYNC_FULL, "x.db", NULL},
    {"sqlite:./a/b.db?sync=normal", 0, 0, SQ_SYNC_NORMAL, "./a/b.db", NULL},
    {"sqlite:x.db?sync=off", 0, 0, SQ_SYNC_OFF, "x.db", NULL},
    {"sqlite:x.db?sync=full", 0, 0, SQ_SYNC_FULL, "x.db", NULL},
    {"sqlite::memory:", 0, 1, SQ_SYNC_FULL, NULL, NULL},
    {"sqlite::memory:?sync=off", 0, 1, SQ_SYNC_OFF, NULL, NULL},
    {"sqlite:", DTX_EBADURI, 0, 0, NULL, "empty path"},
    {"sqlite:?sync=full", DTX_EBADURI, 0, 0, NULL, "empty path"},
    {"sqlite:x.db?", DTX_EBADURI, 0, 0, NULL, "empty option"},
    {"sqlite:x.db?sync", DTX_EBADURI, 0, 0, NULL, "name=value"},
    {"sqlite:x.db?sync=", DTX_EBADURI, 0, 0, NULL, "bad value"},
    {"sqlite:x.db?sync=fast", DTX_EBADURI, 0, 0, NULL, "fast"},
    {"sqlite:x.db?sync=FULL", DTX_EBADURI, 0, 0, NULL, "FULL"},
    {"sqlite:x.db?foo=1", DTX_EBADURI, 0, 0, NULL, "unknown option 'foo'"},
    {"sqlite:x.db?sync=full&sync=off", DTX_EBADURI, 0, 0, NULL, "repeated"},
    {"sqlite:x.db?sync=full&", DTX_EBADURI, 0, 0, NULL, "&"},
    {"sqlite:x.db?&sync=full", DTX_EBADURI, 0, 0, NULL, "name=value"},
    {"sqlite:x.db?sync=normal&cache=1", DTX_EBADURI, 0, 0, NULL, "cache"},
    /* cache_mb: 1..65536 MiB a connection, digits only, once. */
    {"sqlite:x.db?cache_mb=0", DTX_EBADURI, 0, 0, NULL, "cache_mb"},
    {"sqlite:x.db?cache_mb=65537", DTX_EBADURI, 0, 0, NULL, "cache_mb"},
    {"sqlite:x.db?cache_mb=-5", DTX_EBADURI, 0, 0, NULL, "cache_mb"},
    {"sqlite:x.db?cache_mb=9223372036854775808", DTX_EBADURI, 0, 0, NULL,
     "cache_mb"},
    {"sqlite:x.db?cache_mb=1&cache_mb=2", DTX_EBADURI, 0, 0, NULL,
     "repeated"},
    {"sqlitex:y.db", DTX_EBADURI, 0, 0, NULL, "sqlite:"},
    {"mysql://h/db", DTX_EBADURI, 0, 0, NULL, "sqlite:"},
    {"", DTX_EBADURI, 0, 0, NULL, "sqlite:"},
};

static void test_uri_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const uri_case_t *c = &cases[i];
    sq_uri_t u;
    dtx__err_clear();
    int rc = dtx__sq_uri_parse(c->uri, &u);
    CHECKF(rc == c->rc, "%s: rc %s, want %s (%s)", c->uri, dtx_errname(rc),
           dtx_errname(c->rc), dtx_errdetail());
    if (rc == 0 && c->rc == 0) {
      CHECKF(u.memory == c->memory, "%s: memory %d", c->uri, u.memory);
      CHECKF(u.sync == c->sync, "%s: sync %d", c->uri, u.sync);
      CHECKF((!u.path && !c->path) ||
                 (u.path && c->path && strcmp(u.path, c->path) == 0),
             "%s: path %s", c->uri, u.path ? u.path : "(null)");
      free(u.path);
    } else if (rc < 0) {
      CHECKF(u.path == NULL, "%s: path left set on error", c->uri);
      CHECKF(strstr(dtx_errdetail(), c->detail_has) != NULL,
             "%s: detail '%s' lacks '%s'", c->uri, dtx_errdetail(),
             c->detail_has);
    }
  }
}

/* The same errors come out of the public API, with *out NULL. */
static void test_open_bad_uri(void) {
  dtx_store_t *st = (dtx_store_t *)1;
  CHECK_RC(dtx_store_open("sqlite:x.db?sync=sometimes", &st), DTX_EBADURI);
  CHECK(st == NULL);
  CHECK(strstr(dtx_errdetail(), "sometimes") != NULL);
  st = (dtx_store_t *)1;
  CHECK_RC(dtx_store_open("sqlite:x.db?journal=wal", &st), DTX_EBADURI);
  CHECK(st == NULL);
}

static void test_open_unavailable(void) {
  char path[400];
  dtx_store_t *st = (dtx_store_t *)1;
  snprintf(path, sizeof path, "sqlite:%s/no/such/dir/x.db", dir);
  CHECK_RC(dtx_store_open(path, &st), DTX_EUNAVAILABLE);
  CHECK(st == NULL);
  CHECK(strstr(dtx_errdetail(), "no/such/dir") != NULL);

  /* A file that is not a database. */
  char file[300];
  snprintf(file, sizeof file, "%s/garbage.db", dir);
  FILE *f = fopen(file, "w");
  REQUIRE(f != NULL);
  for (int i = 0; i < 200; i++)
    fputs("this is not an sqlite database at all. ", f);
  fclose(f);
  snprintf(path, sizeof path, "sqlite:%s", file);
  st = (dtx_store_t *)1;
  CHECK_RC(dtx_store_open(path, &st), DTX_EUNAVAILABLE);
  CHECK(st == NULL);
}

/* Reads one integer or text pragma on the backend's writer. */
static void pragma(dtx__backend_t *b, const char *sql, char *out, size_t n) {
  sqlite3_stmt *st;
  out[0] = '\0';
  if (sqlite3_prepare_v2(b->w->db, sql, -1, &st, NULL) != SQLITE_OK)
    return;
  if (sqlite3_step(st) == SQLITE_ROW)
    snprintf(out, n, "%s", (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
}

static void test_pragmas(void) {
  static const struct {
    const char *opt;
    const char *sync;
    const char *cache; /* PRAGMA cache_size: SQLite's default, or KiB */
  } t[] = {{"", "2", "-2000"},
           {"?sync=full", "2", "-2000"},
           {"?sync=normal", "1", "-2000"},
           {"?sync=off", "0", "-2000"},
           {"?sync=normal&cache_mb=64", "1", "-65536"},
           {"?cache_mb=65536", "2", "-67108864"}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    char uri[300], got[64];
    snprintf(uri, sizeof uri, "sqlite:%s/p%zu.db%s", dir, i, t[i].opt);
    dtx__backend_t *b;
    CHECK_RC(dtx__sqlite_methods.open(uri, 0, &b), 0);
    if (!b)
      continue;
    pragma(b, "PRAGMA journal_mode", got, sizeof got);
    CHECKF(strcmp(got, "wal") == 0, "%s: journal_mode %s", uri, got);
    pragma(b, "PRAGMA synchronous", got, sizeof got);
    CHECKF(strcmp(got, t[i].sync) == 0, "%s: synchronous %s, want %s", uri,
           got, t[i].sync);
    pragma(b, "PRAGMA cache_size", got, sizeof got);
    CHECKF(strcmp(got, t[i].cache) == 0, "%s: cache_size %s, want %s", uri,
           got, t[i].cache);
    dtx__sqlite_methods.close(b);
  }
}

/* Each :memory: store is private: two opens do not share data. */
static void test_memory_private(void) {
  dtx_store_t *a, *b;
  REQUIRE(dtx_store_open("sqlite::memory:", &a) == 0);
  REQUIRE(dtx_store_open("sqlite::memory:", &b) == 0);
  json_t *doc = J("{\"_id\":1}");
  CHECK_RC(dtx_store_insert(a, "c", doc, NULL), 0);
  int64_t n = -1;
  CHECK_RC(dtx_store_count(a, "c", NULL, &n), 0);
  CHECK(n == 1);
  CHECK_RC(dtx_store_count(b, "c", NULL, &n), 0);
  CHECK(n == 0);
  json_decref(doc);
  dtx_store_close(a);
  dtx_store_close(b);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_uri_table);
  TEST_RUN(test_open_bad_uri);
  TEST_RUN(test_open_unavailable);
  TEST_RUN(test_pragmas);
  TEST_RUN(test_memory_private);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return TEST_DONE();
}
