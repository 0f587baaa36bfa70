/* format.c -- the SQLite store's schema tables and its format: creating
 * them in a new file, and upgrading an older file in place when this
 * build opens it (format 2 -> 3: table names that keep case apart,
 * catalog.c's header says how; 3 -> 4: bodies as BSON, codec.c).  Split
 * from catalog.c, which keeps the snapshot and the operations that change
 * the catalog. */
#include "store/sqlite/sqlite_int.h"

#include "doc/bdoc.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- schema ------------------------------------------------------------------------ */

/* The file's format number, _dtx_meta's 'format' (2 and 3 are
 * upgraded): 4 keeps bodies as BSON (codec.c). */
#define DTX__SQ_FORMAT 4

#define RULES_SQL                                                            \
  "CREATE TABLE IF NOT EXISTS _dtx_rules(coll TEXT PRIMARY KEY,"             \
  " spec TEXT NOT NULL) WITHOUT ROWID;"

static const char SCHEMA_SQL[] =
    "CREATE TABLE IF NOT EXISTS _dtx_meta(k TEXT PRIMARY KEY, v) WITHOUT ROWID;"
    "INSERT OR IGNORE INTO _dtx_meta VALUES('format', 4), ('catalog', 0);"
    "CREATE TABLE IF NOT EXISTS _dtx_coll(name TEXT PRIMARY KEY) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS _dtx_index("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, coll TEXT NOT NULL,"
    " name TEXT NOT NULL, spec TEXT NOT NULL,"
    " multikey INTEGER NOT NULL DEFAULT 0, UNIQUE(coll, name));" RULES_SQL;


static int has_upper(const char *s) {
  for (; *s; s++)
    if (*s >= 'A' && *s <= 'Z')
      return 1;
  return 0;
}

/* The file's format number (0 when _dtx_meta has none). */
static int meta_format(sq_conn_t *c, int64_t *fmt) {
  sqlite3_stmt *st;
  *fmt = 0;
  int rc = dtx__sq_prep(
      c, "SELECT v FROM _dtx_meta WHERE k='format'", 0, &st);
  if (rc < 0)
    return rc;
  int src = sqlite3_step(st);
  if (src == SQLITE_ROW)
    *fmt = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  return src == SQLITE_ROW || src == SQLITE_DONE
             ? 0
             : dtx__sq_err(c, src, "reading the store format");
}

/* Format 2 -> 3: the tables of collections with upper-case letters get
 * their encoded names, and _dtx_rules appears.  One write transaction, so
 * a crash leaves format 2 untouched, and a process racing to do the same
 * finds format 3 once it has the lock. */
static int migrate_2_to_3(sq_conn_t *c) {
  int rc = dtx__sq_begin_write(c);
  if (rc < 0)
    return rc;
  sqlite3_stmt *st;
  int src = SQLITE_DONE;
  int64_t fmt = 0;
  char **renames = NULL; /* pairs of old, new table names */
  size_t nren = 0, cap = 0;
  if ((rc = meta_format(c, &fmt)) < 0)
    goto out;
  if (fmt != 2)
    goto out; /* migrated meanwhile (or not ours to migrate) */
  static const char *const q[] = {
      "SELECT name, NULL FROM _dtx_coll",
      "SELECT coll, id FROM _dtx_index",
  };
  for (int k = 0; k < 2 && rc == 0; k++) {
    if ((rc = dtx__sq_prep(c, q[k], 0, &st)) < 0)
      goto out;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
      const char *name = (const char *)sqlite3_column_text(st, 0);
      if (!name || !has_upper(name))
        continue;
      if (nren + 2 > cap && DTX__GROW(renames, cap, 16)) {
        rc = dtx__err(DTX_ENOMEM, "sqlite: migrating the store");
        break;
      }
      char from[SQ_TABLE_MAX], to[SQ_TABLE_MAX];
      int64_t id = sqlite3_column_int64(st, 1);
      if (k == 0) {
        snprintf(from, sizeof from, "\"c:%s\"", name);
        dtx__sq_coll_table(to, sizeof to, name);
      } else {
        snprintf(from, sizeof from, "\"i:%s:%lld\"", name, (long long)id);
        dtx__sq_idx_table(to, sizeof to, name, id);
      }
      renames[nren] = strdup(from);
      renames[nren + 1] = strdup(to);
      nren += 2;
      if (!renames[nren - 2] || !renames[nren - 1]) {
        rc = dtx__err(DTX_ENOMEM, "sqlite: migrating the store");
        break;
      }
    }
    sqlite3_reset(st);
    if (rc == 0 && src != SQLITE_DONE)
      rc = dtx__sq_err(c, src, "sqlite: migrating the store");
  }
  for (size_t i = 0; rc == 0 && i < nren; i += 2) {
    char sql[2 * SQ_TABLE_MAX + 40];
    snprintf(sql, sizeof sql, "ALTER TABLE %s RENAME TO %s", renames[i],
             renames[i + 1]);
    rc = dtx__sq_exec_once(c, sql);
  }
  if (rc == 0)
    rc = dtx__sq_exec_once(c, RULES_SQL
                           "UPDATE _dtx_meta SET v=3 WHERE k='format';"
                           "UPDATE _dtx_meta SET v=random() WHERE "
                           "k='catalog';");
out:
  for (size_t i = 0; i < nren; i++)
    free(renames[i]);
  free(renames);
  if (rc == 0)
    rc = dtx__sq_commit(c);
  if (rc < 0)
    dtx__sq_rollback(c);
  return rc;
}

/* Format 3 -> 4, the SQL function the upgrade's UPDATEs call on each
 * row: dtx_bson(text, id, coll, kind) is the BSON of a format-3 body
 * (kind 0, codec.c's JSON text) or fence record (kind 1, jansson's text,
 * as docs.c wrote it), or an error naming the collection and the _id.
 * The error's code and detail are kept in the context for the caller
 * (SQLite passes on only a message). */
typedef struct up_ctx {
  int rc;
  char detail[600];
} up_ctx_t;

static void up_bson(sqlite3_context *fc, int argc, sqlite3_value **argv) {
  up_ctx_t *u = sqlite3_user_data(fc);
  (void)argc;
  const char *text = (const char *)sqlite3_value_text(argv[0]);
  const char *coll = (const char *)sqlite3_value_text(argv[2]);
  int kind = sqlite3_value_int(argv[3]);
  json_t *doc = NULL;
  uint8_t *bytes = NULL;
  size_t n = 0;
  int rc;
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT)
    rc = dtx__err(DTX_EBACKEND, "not JSON text");
  else if (kind == 0)
    rc = dtx__sq_body_parse(text, sqlite3_value_bytes(argv[0]), &doc);
  else if ((rc = dtx__json_parse(text, &doc)) == 0 && !json_is_object(doc))
    rc = dtx__err(DTX_EBACKEND, "not a JSON object");
  if (rc == 0)
    rc = dtx__sq_body_bson(doc, coll ? coll : "?", &bytes, &n);
  json_decref(doc);
  if (rc == 0) {
    sqlite3_result_blob(fc, bytes, (int)n, bson_free);
    return;
  }
  char id[160];
  dtx__sq_id_name(argv[1], id, sizeof id);
  if (!u->rc) {
    u->rc = rc == DTX_ENOMEM ? rc : DTX_EBACKEND;
    snprintf(u->detail, sizeof u->detail, "the stored %s of '%s' (_id %s): %s",
             kind ? "fence record" : "document", coll ? coll : "?", id,
             dtx_errdetail());
  }
  sqlite3_result_error(fc, u->detail, -1);
}

/* Rewrites every row's column col of table through dtx_bson; coll is
 * the collection of a collection table (NULL: the fence table, whose
 * rows name theirs). */
static int up_table(sq_conn_t *c, up_ctx_t *u, const char *table,
                    const char *col, const char *coll) {
  char sql[SQ_TABLE_MAX + 120];
  snprintf(sql, sizeof sql, "UPDATE %s SET %s=dtx_bson(%s, id, %s, %d)", table,
           col, col, coll ? "?1" : "coll", coll ? 0 : 1);
  sqlite3_stmt *st;
  int src = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
  if (src != SQLITE_OK)
    return dtx__sq_err(c, src, "upgrading the store");
  if (coll)
    sqlite3_bind_text(st, 1, coll, -1, SQLITE_STATIC);
  src = sqlite3_step(st);
  sqlite3_finalize(st);
  if (src == SQLITE_DONE)
    return 0;
  if (u->rc)
    return dtx__err(u->rc, "%s", u->detail);
  return dtx__sq_err(c, src, "upgrading the store");
}

/* Format 3 -> 4: every body of every collection, and every fence record,
 * from JSON text to a BSON BLOB (codec.c), then format=4.  As the 2 -> 3
 * upgrade: one write transaction, so a crash, or a body that does not
 * convert (the error names its collection and _id), leaves format 3
 * untouched, and a process racing to do the same finds format 4 once it
 * has the lock.  The catalog does not change: its generation stays. */
static int migrate_3_to_4(sq_conn_t *c) {
  int rc = dtx__sq_begin_write(c);
  if (rc < 0)
    return rc;
  up_ctx_t u = {0};
  char **colls = NULL;
  size_t ncoll = 0, cap = 0;
  int64_t fmt = 0;
  sqlite3_stmt *st;
  int src;
  if ((rc = meta_format(c, &fmt)) < 0)
    goto out;
  if (fmt != 3)
    goto out; /* upgraded meanwhile (or not ours to upgrade) */
  src = sqlite3_create_function_v2(c->db, "dtx_bson", 4, SQLITE_UTF8, &u,
                                   up_bson, NULL, NULL, NULL);
  if (src != SQLITE_OK) {
    rc = dtx__sq_err(c, src, "upgrading the store");
    goto out;
  }
  if ((rc = dtx__sq_prep(c, "SELECT name FROM _dtx_coll", 0, &st)) < 0)
    goto out;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(st, 0);
    if ((ncoll == cap && DTX__GROW(colls, cap, 16)) ||
        !(colls[ncoll] = strdup(name ? name : ""))) {
      rc = dtx__err(DTX_ENOMEM, "sqlite: upgrading the store");
      break;
    }
    ncoll++;
  }
  sqlite3_reset(st);
  if (rc == 0 && src != SQLITE_DONE)
    rc = dtx__sq_err(c, src, "upgrading the store");
  for (size_t i = 0; rc == 0 && i < ncoll; i++) {
    char table[SQ_TABLE_MAX];
    dtx__sq_coll_table(table, sizeof table, colls[i]);
    rc = up_table(c, &u, table, "body", colls[i]);
  }
  if (rc == 0 && (rc = dtx__sq_prep(c,
                                    "SELECT 1 FROM sqlite_master WHERE "
                                    "type='table' AND name='_dtx_fence'",
                                    0, &st)) == 0) {
    int has_fence = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_reset(st);
    if (has_fence)
      rc = up_table(c, &u, "_dtx_fence", "rec", NULL);
  }
  if (rc == 0)
    rc = dtx__sq_exec_once(c, "UPDATE _dtx_meta SET v=4 WHERE k='format'");
out:
  sqlite3_create_function_v2(c->db, "dtx_bson", 4, SQLITE_UTF8, NULL, NULL,
                             NULL, NULL, NULL);
  for (size_t i = 0; i < ncoll; i++)
    free(colls[i]);
  free(colls);
  if (rc == 0)
    rc = dtx__sq_commit(c);
  if (rc < 0)
    dtx__sq_rollback(c);
  return rc;
}


/* Creates the catalog tables unless they exist.  Processes may race to do
 * it; BEGIN IMMEDIATE plus IF NOT EXISTS makes the race harmless. */
int dtx__sq_schema_init(sq_conn_t *c, int create) {
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(c,
                        "SELECT 1 FROM sqlite_master WHERE type='table' AND "
                        "name='_dtx_meta'",
                        0, &st);
  if (rc < 0)
    return rc;
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  if (src != SQLITE_ROW && src != SQLITE_DONE)
    return dtx__sq_err(c, src, "reading the schema");
  if (src == SQLITE_DONE && !create)
    return DTX_ENOTFOUND; /* the caller names the path */
  if (src == SQLITE_DONE) {
    if ((rc = dtx__sq_begin_write(c)) < 0)
      return rc;
    if ((rc = dtx__sq_exec_once(c, SCHEMA_SQL)) < 0 ||
        (rc = dtx__sq_commit(c)) < 0) {
      dtx__sq_rollback(c);
      return rc;
    }
  }
  int64_t fmt;
  if ((rc = meta_format(c, &fmt)) < 0)
    return rc;
  if (fmt == 2 && ((rc = migrate_2_to_3(c)) < 0 ||
                   (rc = meta_format(c, &fmt)) < 0))
    return dtx__err_wrap(rc, "sqlite: upgrading the store to format %d", 3);
  if (fmt == 3 && ((rc = migrate_3_to_4(c)) < 0 ||
                   (rc = meta_format(c, &fmt)) < 0))
    return dtx__err_wrap(rc, "sqlite: upgrading the store to format %d", 4);
  if (fmt != DTX__SQ_FORMAT)
    return dtx__err(DTX_EBACKEND,
                    "sqlite: store format %lld, this doctx reads format %d",
                    (long long)fmt, DTX__SQ_FORMAT);
  return 0;
}
