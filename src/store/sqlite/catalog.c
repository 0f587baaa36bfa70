/* catalog.c -- collections and secondary indexes: the schema tables, the
 * cached catalog snapshot, and the operations that change it
 * (implicit collection creation, create_index, drop_collection) or list it.
 * The schema tables' creation and the format upgrades are format.c's.
 *
 * Collection rules (validator, delete guard) are catalog entries too:
 * _dtx_rules holds each collection's normalised rules, compiled into the
 * snapshot, so a writer checks a document against the rules of the very
 * catalog generation its transaction sees.
 *
 * Table names: SQLite compares table names case-insensitively, while
 * collection names are case-sensitive ("Foo" and "foo" are two
 * collections, as in MongoDB and the Redis backend).  So a collection's
 * tables are named after its name with every upper-case letter X written
 * "^x" ("Foo" -> "c:^foo"), which no two collection names share.  Format 2
 * stores used the name as it was; opening one renames its tables (format
 * 3).  Format 3 stores kept bodies as JSON text; opening one rewrites them
 * as BSON (format 4, codec.c).
 *
 * Every catalog change replaces _dtx_meta's 'catalog' value, the catalog's
 * generation, with a fresh random number in the same transaction.  Every
 * transaction, read or write, compares that value (one cached SELECT) with
 * its snapshot's and reloads the snapshot when they differ.  So a process
 * that missed another process's new unique index learns of it before its
 * next write, and a snapshot built inside a transaction that later rolled
 * back is never mistaken for the current one: random values do not come
 * back the way a counter would after a rollback. */
#include "store/sqlite/sqlite_int.h"

#include "doc/bdoc.h"
#include "util/assert.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- table names ------------------------------------------------------------------ */

/* name with each upper-case X as "^x": lower-case only, so two names that
 * differ only in case get table names that differ in more than case
 * (collection names never contain '^'). */
static void enc_name(char *out, size_t n, const char *name) {
  size_t j = 0;
  for (size_t i = 0; name[i] && j + 3 < n; i++) {
    char ch = name[i];
    if (ch >= 'A' && ch <= 'Z') {
      out[j++] = '^';
      ch = (char)(ch - 'A' + 'a');
    }
    out[j++] = ch;
  }
  out[j] = '\0';
}

void dtx__sq_coll_table(char *out, size_t n, const char *name) {
  char e[SQ_NAME_MAX];
  enc_name(e, sizeof e, name);
  snprintf(out, n, "\"c:%s\"", e);
}

void dtx__sq_idx_table(char *out, size_t n, const char *coll, int64_t id) {
  char e[SQ_NAME_MAX];
  enc_name(e, sizeof e, coll);
  snprintf(out, n, "\"i:%s:%lld\"", e, (long long)id);
}


int dtx__sq_cat_gen(sq_conn_t *c, int64_t *v) {
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(c, "SELECT v FROM _dtx_meta WHERE k='catalog'", 0,
                        &st);
  if (rc < 0)
    return rc;
  int src = sqlite3_step(st);
  *v = src == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_reset(st);
  if (src != SQLITE_ROW)
    return src == SQLITE_DONE
               ? dtx__err(DTX_EBACKEND, "sqlite: catalog generation missing")
               : dtx__sq_err(c, src, "reading the catalog generation");
  return 0;
}

static int bump_gen(sq_conn_t *c) {
  return dtx__sq_exec(c,
                      "UPDATE _dtx_meta SET v=random() WHERE k='catalog'");
}

/* ---- snapshots ------------------------------------------------------------------------ */

static int fmt_sql(char **out, uint64_t *h, const char *fmt, const char *t) {
  if (asprintf(out, fmt, t) < 0) {
    *out = NULL;
    return dtx__err(DTX_ENOMEM, "building SQL");
  }
  *h = dtx__sq_hash(*out);
  return 0;
}

static int coll_init(sq_coll_t *co, const char *name) {
  static const char *const tmpl[SQ_C_NSQL] = {
      [SQ_C_BYID] = "SELECT seq, body FROM %s WHERE id=?1",
      [SQ_C_SEQBYID] = "SELECT seq FROM %s WHERE id=?1",
      [SQ_C_BYSEQ] = "SELECT body FROM %s WHERE seq=?1",
      [SQ_C_SCAN] = "SELECT seq, body FROM %s ORDER BY seq",
      [SQ_C_INS] = "INSERT INTO %s(id, body) VALUES(?1, ?2)",
      [SQ_C_UPD] = "UPDATE %s SET body=?2 WHERE seq=?1",
      [SQ_C_DEL] = "DELETE FROM %s WHERE seq=?1",
      [SQ_C_COUNT] = "SELECT count(*) FROM %s",
  };
  int rc;
  if (!(co->name = strdup(name)))
    return dtx__err(DTX_ENOMEM, "loading the catalog");
  dtx__sq_coll_table(co->table, sizeof co->table, name);
  for (int i = 0; i < SQ_C_NSQL; i++)
    if ((rc = fmt_sql(&co->sql[i], &co->h[i], tmpl[i], co->table)) < 0)
      return rc;
  return 0;
}

static void idx_fini(sq_idx_t *ix) {
  dtx__index_spec_free(ix->spec);
  free(ix->sql_ins);
  free(ix->sql_del);
  memset(ix, 0, sizeof *ix);
}

/* Takes ownership of spec (also on error). */
static int idx_init(sq_idx_t *ix, const char *coll, int64_t id,
                    dtx__index_spec_t *spec) {
  memset(ix, 0, sizeof *ix);
  ix->id = id;
  ix->spec = spec;
  dtx__sq_idx_table(ix->table, sizeof ix->table, coll, id);
  size_t nf = spec->nfields;
  /* The table's name can be most of SQ_TABLE_MAX (a long collection
   * name, its capitals doubled): room for it, the words, and per field
   * two "?N, " in ins and "bI=?N AND vI=?N AND " in del. */
  size_t cap = 64 + strlen(ix->table) + nf * 48;
  char *ins = malloc(cap), *del = malloc(cap);
  if (!ins || !del) {
    free(ins);
    free(del);
    return dtx__err(DTX_ENOMEM, "loading the catalog");
  }
  /* Within one document dtx__index_keys gives distinct keys, but 1 and 1.0
   * are distinct there and equal to SQLite; OR IGNORE keeps that from
   * failing a non-unique index. */
  size_t a = (size_t)snprintf(ins, cap, "INSERT %sINTO %s VALUES(",
                              spec->unique ? "" : "OR IGNORE ", ix->table);
  size_t d = (size_t)snprintf(del, cap, "DELETE FROM %s WHERE ", ix->table);
  for (size_t i = 0; i < nf; i++) {
    a += (size_t)snprintf(ins + a, cap - a, "?%zu, ?%zu, ", 2 * i + 1,
                          2 * i + 2);
    d += (size_t)snprintf(del + d, cap - d, "b%zu=?%zu AND v%zu=?%zu AND ", i,
                          2 * i + 1, i, 2 * i + 2);
  }
  a += (size_t)snprintf(ins + a, cap - a, "?%zu)", 2 * nf + 1);
  d += (size_t)snprintf(del + d, cap - d, "seq=?%zu", 2 * nf + 1);
  DTX_ASSERT(a < cap && d < cap, "sqlite.index_sql_fits");
  ix->sql_ins = ins;
  ix->sql_del = del;
  ix->h_ins = dtx__sq_hash(ins);
  ix->h_del = dtx__sq_hash(del);
  return 0;
}

static void cat_free(sq_cat_t *cat) {
  for (size_t i = 0; i < cat->ncoll; i++) {
    sq_coll_t *co = &cat->colls[i];
    free(co->name);
    for (int k = 0; k < SQ_C_NSQL; k++)
      free(co->sql[k]);
    for (size_t j = 0; j < co->nidx; j++)
      idx_fini(&co->idx[j]);
    free(co->idx);
    dtx__rules_free(co->rules);
  }
  free(cat->colls);
  free(cat);
}

/* Parses a stored spec ({"name","key","unique","sparse"}). */
static int spec_from_text(const char *text, dtx__index_spec_t **out) {
  json_t *j;
  *out = NULL;
  int rc = dtx__json_parse(text, &j);
  if (rc < 0)
    return dtx__err_wrap(DTX_EBACKEND, "sqlite: stored index spec");
  json_t *name = json_object_get(j, "name");
  dtx_index_opts_t o = {
      .unique = json_is_true(json_object_get(j, "unique")),
      .sparse = json_is_true(json_object_get(j, "sparse")),
      .name = json_string_value(name),
  };
  rc = dtx__index_spec_parse(json_object_get(j, "key"), &o, out);
  json_decref(j);
  return rc < 0 ? dtx__err_wrap(DTX_EBACKEND, "sqlite: stored index spec")
                : 0;
}

static int coll_cmp(const void *a, const void *b) {
  return strcmp(((const sq_coll_t *)a)->name, ((const sq_coll_t *)b)->name);
}

const sq_coll_t *dtx__sq_coll_find(const sq_cat_t *cat, const char *name) {
  if (!cat)
    return NULL;
  size_t lo = 0, hi = cat->ncoll;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(cat->colls[mid].name, name);
    if (c == 0)
      return &cat->colls[mid];
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

int dtx__sq_cat_load(sq_conn_t *c, sq_cat_t **out) {
  *out = NULL;
  sq_cat_t *cat = calloc(1, sizeof *cat);
  if (!cat)
    return dtx__err(DTX_ENOMEM, "loading the catalog");
  cat->refs = 1;
  sqlite3_stmt *st;
  int rc, src;
  size_t cap = 0;
  if ((rc = dtx__sq_cat_gen(c, &cat->gen)) < 0)
    goto fail;
  if ((rc = dtx__sq_prep(c, "SELECT name FROM _dtx_coll ORDER BY name", 0,
                         &st)) < 0)
    goto fail;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    if (cat->ncoll == cap && DTX__GROW(cat->colls, cap, 8)) {
      sqlite3_reset(st);
      rc = dtx__err(DTX_ENOMEM, "loading the catalog");
      goto fail;
    }
    sq_coll_t *co = &cat->colls[cat->ncoll++];
    memset(co, 0, sizeof *co);
    if ((rc = coll_init(co, (const char *)sqlite3_column_text(st, 0))) < 0) {
      sqlite3_reset(st);
      goto fail;
    }
  }
  sqlite3_reset(st);
  if (src != SQLITE_DONE) {
    rc = dtx__sq_err(c, src, "loading the collections");
    goto fail;
  }
  /* Binary search needs strcmp order; SQLite's BINARY collation agrees,
   * but sorting again costs nothing and depends on nothing. */
  if (cat->ncoll)
    qsort(cat->colls, cat->ncoll, sizeof *cat->colls, coll_cmp);
  if ((rc = dtx__sq_prep(c,
                         "SELECT 1 FROM sqlite_master WHERE type='table' "
                         "AND name='_dtx_fence'",
                         0, &st)) < 0)
    goto fail;
  src = sqlite3_step(st);
  sqlite3_reset(st);
  if (src != SQLITE_ROW && src != SQLITE_DONE) {
    rc = dtx__sq_err(c, src, "loading the catalog");
    goto fail;
  }
  cat->has_fence = src == SQLITE_ROW;

  if ((rc = dtx__sq_prep(c,
                         "SELECT id, coll, spec, multikey FROM _dtx_index "
                         "ORDER BY id",
                         0, &st)) < 0)
    goto fail;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    const char *cname = (const char *)sqlite3_column_text(st, 1);
    sq_coll_t *co = (sq_coll_t *)dtx__sq_coll_find(cat, cname);
    if (!co) {
      sqlite3_reset(st);
      rc = dtx__err(DTX_EBACKEND,
                    "sqlite: index %lld belongs to missing collection '%s'",
                    (long long)sqlite3_column_int64(st, 0), cname);
      goto fail;
    }
    dtx__index_spec_t *spec;
    if ((rc = spec_from_text((const char *)sqlite3_column_text(st, 2),
                             &spec)) < 0) {
      sqlite3_reset(st);
      goto fail;
    }
    sq_idx_t *n = realloc(co->idx, (co->nidx + 1) * sizeof *n);
    if (!n) {
      dtx__index_spec_free(spec);
      sqlite3_reset(st);
      rc = dtx__err(DTX_ENOMEM, "loading the catalog");
      goto fail;
    }
    co->idx = n;
    if ((rc = idx_init(&co->idx[co->nidx], cname, sqlite3_column_int64(st, 0),
                       spec)) < 0) {
      sqlite3_reset(st);
      goto fail;
    }
    co->idx[co->nidx].multikey = sqlite3_column_int(st, 3) != 0;
    co->nidx++;
  }
  sqlite3_reset(st);
  if (src != SQLITE_DONE) {
    rc = dtx__sq_err(c, src, "loading the indexes");
    goto fail;
  }
  if ((rc = dtx__sq_prep(c, "SELECT coll, spec FROM _dtx_rules", 0, &st)) <
      0)
    goto fail;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    const char *cname = (const char *)sqlite3_column_text(st, 0);
    sq_coll_t *co = (sq_coll_t *)dtx__sq_coll_find(cat, cname);
    json_t *spec = NULL;
    /* Rules that no longer compile fail closed: the catalog is unusable
     * until they are fixed, rather than writes going unchecked. */
    if (!co ||
        dtx__json_parse((const char *)sqlite3_column_text(st, 1), &spec) < 0 ||
        dtx__rules_compile(spec, &co->rules) < 0) {
      rc = dtx__err(DTX_EBACKEND, "sqlite: stored rules of %s: %s",
                    cname ? cname : "?",
                    co ? dtx_errdetail() : "no such collection");
      json_decref(spec);
      sqlite3_reset(st);
      goto fail;
    }
    json_decref(spec);
  }
  sqlite3_reset(st);
  if (src != SQLITE_DONE) {
    rc = dtx__sq_err(c, src, "loading the rules");
    goto fail;
  }
  *out = cat;
  return 0;
fail:
  cat_free(cat);
  return rc;
}

sq_cat_t *dtx__sq_cat_get(dtx__backend_t *b) {
  pthread_mutex_lock(&b->catmu);
  sq_cat_t *cat = b->cat;
  if (cat)
    __atomic_add_fetch(&cat->refs, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&b->catmu);
  return cat;
}

void dtx__sq_cat_put(sq_cat_t *cat) {
  if (cat && __atomic_sub_fetch(&cat->refs, 1, __ATOMIC_ACQ_REL) == 0)
    cat_free(cat);
}

void dtx__sq_cat_install(dtx__backend_t *b, sq_cat_t *cat) {
  __atomic_add_fetch(&cat->refs, 1, __ATOMIC_RELAXED);
  pthread_mutex_lock(&b->catmu);
  sq_cat_t *old = b->cat;
  b->cat = cat;
  pthread_mutex_unlock(&b->catmu);
  dtx__sq_cat_put(old);
}

int dtx__sq_cat_sync(dtx__backend_t *b, sq_conn_t *c, sq_cat_t **cat) {
  int64_t v;
  int rc = dtx__sq_cat_gen(c, &v);
  if (rc < 0)
    return rc;
  if (*cat && (*cat)->gen == v)
    return 0;
  sq_cat_t *shared = dtx__sq_cat_get(b);
  if (shared && shared->gen == v) {
    dtx__sq_cat_put(*cat);
    *cat = shared;
    return 0;
  }
  dtx__sq_cat_put(shared);
  sq_cat_t *fresh;
  if ((rc = dtx__sq_cat_load(c, &fresh)) < 0)
    return rc;
  dtx__sq_cat_install(b, fresh);
  dtx__sq_cat_put(*cat);
  *cat = fresh;
  return 0;
}

/* Records a catalog change made in w's transaction and reloads w's
 * snapshot so the rest of the op sees it. */
static int cat_changed(sq_wctx_t *w) {
  int rc = bump_gen(w->c);
  if (rc < 0)
    return rc;
  w->cat_changed = 1;
  return dtx__sq_cat_sync(w->b, w->c, &w->cat);
}

int dtx__sq_coll_ensure(sq_wctx_t *w, const char *name,
                        const sq_coll_t **out) {
  if ((*out = dtx__sq_coll_find(w->cat, name)))
    return 0;
  char sql[SQ_TABLE_MAX + 100], table[SQ_TABLE_MAX];
  dtx__sq_coll_table(table, sizeof table, name);
  snprintf(sql, sizeof sql,
           "CREATE TABLE %s(seq INTEGER PRIMARY KEY, id UNIQUE NOT "
           "NULL, body BLOB NOT NULL)",
           table);
  int rc = dtx__sq_exec_once(w->c, sql);
  sqlite3_stmt *st;
  if (rc < 0 ||
      (rc = dtx__sq_prep(w->c, "INSERT INTO _dtx_coll(name) VALUES(?1)", 0,
                         &st)) < 0)
    return rc;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  if (src != SQLITE_DONE)
    return dtx__sq_err(w->c, src, "creating a collection");
  if ((rc = cat_changed(w)) < 0)
    return rc;
  if (!(*out = dtx__sq_coll_find(w->cat, name)))
    return dtx__err(DTX_EBACKEND, "sqlite: collection '%s' vanished", name);
  return 0;
}

/* Made by the first delete that keeps a fence record, not with the
 * schema: a store that never kept one (or one of an older doctx) has no
 * table to look in, and its inserts pay nothing. */
int dtx__sq_fence_table(sq_wctx_t *w) {
  if (w->cat->has_fence)
    return 0;
  int rc = dtx__sq_exec_once(
      w->c, "CREATE TABLE IF NOT EXISTS _dtx_fence(coll TEXT NOT NULL,"
            " id NOT NULL, rec BLOB NOT NULL, PRIMARY KEY(coll, id))"
            " WITHOUT ROWID");
  return rc < 0 ? rc : cat_changed(w);
}

int dtx__sq_mk_flush(sq_wctx_t *w) {
  if (!w->nmk)
    return 0;
  sqlite3_stmt *st;
  int rc = dtx__sq_prep(w->c, "UPDATE _dtx_index SET multikey=1 WHERE id=?1",
                        0, &st);
  for (size_t i = 0; rc == 0 && i < w->nmk; i++) {
    sqlite3_bind_int64(st, 1, w->mk[i]);
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    if (src != SQLITE_DONE)
      rc = dtx__sq_err(w->c, src, "marking an index multikey");
  }
  w->nmk = 0;
  return rc < 0 ? rc : cat_changed(w);
}

/* ---- create_index ------------------------------------------------------------------- */

typedef struct ci_arg {
  const char *coll;
  const dtx__index_spec_t *spec;
} ci_arg_t;

/* Indexes every existing document; a unique violation fails the op and
 * the op's rollback removes the half-built index.  The keys come from
 * each stored body's checked bytes (keyrows.c: dtx__index_keys' tuples
 * and errors, and the same multikey flag), so no document is bridged to
 * json_t. */
static int index_build(sq_wctx_t *w, const sq_coll_t *co,
                       const sq_idx_t *ix) {
  sq_conn_t *c = w->c;
  sqlite3_stmt *scan;
  int rc = dtx__sq_prep(c, co->sql[SQ_C_SCAN], co->h[SQ_C_SCAN], &scan);
  if (rc < 0)
    return rc;
  int src;
  while ((src = sqlite3_step(scan)) == SQLITE_ROW) {
    sq_keys_t keys;
    const uint8_t *p;
    uint32_t n;
    int64_t seq = sqlite3_column_int64(scan, 0);
    if ((rc = dtx__sq_body_view(c, co, seq, scan, 1, &p, &n)) < 0)
      break;
    rc = dtx__sq_keys_of(ix, p, n, &keys);
    if (rc == 0) {
      rc = dtx__sq_keys_insert(w, ix, &keys, seq);
    } else {
      dtx__belem_t id;
      dtx__err_wrap(rc, "document %s",
                    dtx__belem_find(p, n, "_id", 3, &id) ? "with _id"
                                                          : "without _id");
    }
    dtx__sq_keys_free(&keys);
    if (rc < 0)
      break;
  }
  sqlite3_reset(scan);
  if (rc == 0 && src != SQLITE_DONE)
    rc = dtx__sq_err(c, src, "scanning a collection");
  return rc;
}

static int create_index_run(sq_wctx_t *w, sq_op_t *op) {
  ci_arg_t *a = op->arg;
  const dtx__index_spec_t *spec = a->spec;
  const sq_coll_t *co;
  int rc = dtx__sq_coll_ensure(w, a->coll, &co);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < co->nidx; i++)
    if ((rc = dtx__index_spec_same(co->idx[i].spec, spec, a->coll)) != 0)
      return rc < 0 ? rc : 0;
  json_t *sj = dtx__index_spec_json(spec);
  char *text = sj ? dtx__json_dump(sj) : NULL;
  json_decref(sj);
  if (!text)
    return dtx__err(DTX_ENOMEM, "creating index '%s'", spec->name);
  sqlite3_stmt *st;
  if ((rc = dtx__sq_prep(w->c,
                         "INSERT INTO _dtx_index(coll, name, spec) "
                         "VALUES(?1, ?2, ?3)",
                         0, &st)) < 0) {
    free(text);
    return rc;
  }
  sqlite3_bind_text(st, 1, a->coll, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, spec->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, text, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  free(text);
  if (src != SQLITE_DONE)
    return dtx__sq_err(w->c, src, "recording an index");
  int64_t id = sqlite3_last_insert_rowid(w->c->db);

  /* A private copy of the spec for building, before the snapshot has it. */
  json_t *keys = json_object();
  for (size_t i = 0; keys && i < spec->nfields; i++)
    json_object_set_new(keys, spec->paths[i], json_integer(spec->dirs[i]));
  dtx_index_opts_t o = {.unique = spec->unique, .sparse = spec->sparse, .name = spec->name};
  dtx__index_spec_t *copy;
  rc = keys ? dtx__index_spec_parse(keys, &o, &copy)
            : dtx__err(DTX_ENOMEM, "creating index '%s'", spec->name);
  json_decref(keys);
  if (rc < 0)
    return rc;
  sq_idx_t ix;
  if ((rc = idx_init(&ix, a->coll, id, copy)) < 0)
    return rc;

  size_t cap = 128 + strlen(ix.table) + spec->nfields * 48; /* as idx_init */
  char *ddl = malloc(cap);
  if (!ddl) {
    idx_fini(&ix);
    return dtx__err(DTX_ENOMEM, "creating index '%s'", spec->name);
  }
  size_t n = (size_t)snprintf(ddl, cap, "CREATE TABLE %s(", ix.table);
  for (size_t i = 0; i < spec->nfields; i++)
    n += (size_t)snprintf(ddl + n, cap - n, "b%zu INTEGER NOT NULL, "
                          "v%zu NOT NULL, ", i, i);
  n += (size_t)snprintf(ddl + n, cap - n, "seq INTEGER NOT NULL, PRIMARY KEY(");
  for (size_t i = 0; i < spec->nfields; i++)
    n += (size_t)snprintf(ddl + n, cap - n, "%sb%zu, v%zu", i ? ", " : "", i,
                          i);
  n += (size_t)snprintf(ddl + n, cap - n, "%s)) WITHOUT ROWID",
                        spec->unique ? "" : ", seq");
  DTX_ASSERT(n < cap, "sqlite.index_sql_fits");
  rc = dtx__sq_exec_once(w->c, ddl);
  free(ddl);
  if (rc == 0)
    rc = index_build(w, co, &ix);
  idx_fini(&ix);
  if (rc < 0)
    return rc;
  return cat_changed(w);
}

int dtx__sq_create_index(dtx__backend_t *b, const char *coll,
                         const dtx__index_spec_t *spec) {
  ci_arg_t a = {coll, spec};
  sq_op_t op = {.run = create_index_run, .arg = &a};
  return dtx__sq_submit(b, &op);
}

/* ---- drop_collection ------------------------------------------------------------------- */

static int drop_run(sq_wctx_t *w, sq_op_t *op) {
  const char *coll = op->arg;
  const sq_coll_t *co = dtx__sq_coll_find(w->cat, coll);
  if (!co)
    return 0;
  char sql[SQ_TABLE_MAX + 20];
  int rc;
  for (size_t i = 0; i < co->nidx; i++) {
    snprintf(sql, sizeof sql, "DROP TABLE %s", co->idx[i].table);
    if ((rc = dtx__sq_exec_once(w->c, sql)) < 0)
      return rc;
  }
  snprintf(sql, sizeof sql, "DROP TABLE %s", co->table);
  if ((rc = dtx__sq_exec_once(w->c, sql)) < 0)
    return rc;
  static const char *const del[] = {
      "DELETE FROM _dtx_index WHERE coll=?1",
      "DELETE FROM _dtx_rules WHERE coll=?1",
      "DELETE FROM _dtx_coll WHERE name=?1",
      "DELETE FROM _dtx_fence WHERE coll=?1", /* its fence tombstones */
  };
  size_t ndel = sizeof del / sizeof *del - !w->cat->has_fence;
  for (size_t i = 0; i < ndel; i++) {
    sqlite3_stmt *st;
    if ((rc = dtx__sq_prep(w->c, del[i], 0, &st)) < 0)
      return rc;
    sqlite3_bind_text(st, 1, coll, -1, SQLITE_STATIC);
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    if (src != SQLITE_DONE)
      return dtx__sq_err(w->c, src, "dropping a collection");
  }
  return cat_changed(w);
}

int dtx__sq_drop_collection(dtx__backend_t *b, const char *coll) {
  sq_op_t op = {.run = drop_run, .arg = (void *)coll};
  return dtx__sq_submit(b, &op);
}

/* ---- rules ------------------------------------------------------------------------------- */

typedef struct rules_arg {
  const char *coll;
  const char *text; /* normalised spec, or NULL to remove */
} rules_arg_t;

static int rules_run(sq_wctx_t *w, sq_op_t *op) {
  rules_arg_t *a = op->arg;
  const sq_coll_t *co = dtx__sq_coll_find(w->cat, a->coll);
  int rc;
  if (!co && !a->text)
    return 0; /* no collection, no rules: nothing to remove */
  if (!co && (rc = dtx__sq_coll_ensure(w, a->coll, &co)) < 0)
    return rc;
  sqlite3_stmt *st;
  if ((rc = dtx__sq_prep(w->c,
                         a->text ? "INSERT OR REPLACE INTO _dtx_rules(coll, "
                                   "spec) VALUES(?1, ?2)"
                                 : "DELETE FROM _dtx_rules WHERE coll=?1",
                         0, &st)) < 0)
    return rc;
  sqlite3_bind_text(st, 1, a->coll, -1, SQLITE_STATIC);
  if (a->text)
    sqlite3_bind_text(st, 2, a->text, -1, SQLITE_STATIC);
  int src = sqlite3_step(st);
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  if (src != SQLITE_DONE)
    return dtx__sq_err(w->c, src, "recording collection rules");
  return cat_changed(w);
}

int dtx__sq_set_rules(dtx__backend_t *b, const char *coll,
                      const json_t *spec) {
  char *text = spec ? dtx__json_dump(spec) : NULL;
  if (spec && !text)
    return dtx__err(DTX_ENOMEM, "setting the rules of %s", coll);
  rules_arg_t a = {coll, text};
  sq_op_t op = {.run = rules_run, .arg = &a};
  int rc = dtx__sq_submit(b, &op);
  free(text);
  return rc;
}

int dtx__sq_get_rules(dtx__backend_t *b, const char *coll, json_t **out) {
  sq_conn_t *c;
  sq_cat_t *cat;
  const sq_coll_t *co;
  *out = NULL;
  int rc = dtx__sq_read_begin(b, coll, &c, &cat, &co);
  if (rc < 0)
    return rc;
  /* Whether the collection has rules is noted before read_end: that drops
   * this reader's catalog reference, and a concurrent set_rules may free
   * the catalog (and co with it) the moment it does. */
  int has_rules = co && co->rules;
  if (has_rules)
    *out = json_deep_copy(dtx__rules_spec(co->rules));
  dtx__sq_read_end(b, c, cat);
  if (has_rules && !*out)
    return dtx__err(DTX_ENOMEM, "reading the rules of %s", coll);
  return 0;
}

/* ---- listing ------------------------------------------------------------------------------ */

int dtx__sq_list_indexes(dtx__backend_t *b, const char *coll, json_t **out) {
  sq_conn_t *c;
  sq_cat_t *cat;
  const sq_coll_t *co;
  *out = NULL;
  int rc = dtx__sq_read_begin(b, coll, &c, &cat, &co);
  if (rc < 0)
    return rc;
  json_t *arr = co ? json_array() : NULL;
  for (size_t i = 0; arr && rc == 0 && i < co->nidx; i++)
    if (json_array_append_new(arr, dtx__index_spec_json(co->idx[i].spec)) <
        0)
      rc = DTX_ENOMEM;
  int found = co != NULL; /* co dies with the catalog reference */
  dtx__sq_read_end(b, c, cat);
  if ((found && !arr) || rc < 0) {
    json_decref(arr);
    return dtx__err(DTX_ENOMEM, "listing indexes of '%s'", coll);
  }
  *out = arr;
  return 0;
}

int dtx__sq_list_collections(dtx__backend_t *b, json_t **out) {
  sq_conn_t *c;
  sq_cat_t *cat;
  *out = NULL;
  int rc = dtx__sq_read_begin(b, NULL, &c, &cat, NULL);
  if (rc < 0)
    return rc;
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < cat->ncoll; i++)
    if (json_array_append_new(arr, json_string(cat->colls[i].name)) < 0) {
      json_decref(arr);
      arr = NULL;
    }
  dtx__sq_read_end(b, c, cat);
  if (!arr)
    return dtx__err(DTX_ENOMEM, "listing collections");
  *out = arr;
  return 0;
}
