/* sqlite_int.h -- internals shared by the files of the embedded SQLite
 * backend; nothing outside src/store/sqlite/ includes it.
 *
 * Layout of the backend:
 *   sqlite.c   URI parsing, connections, statement cache, busy handling,
 *              error mapping, read transactions, the method table
 *   commit.c   group commit: many threads share one writer connection
 *   catalog.c  collections and indexes (the catalog and its cache)
 *   plan.c     executing a query plan (store/plan.h): the candidate cursor
 *   codec.c    the stored bytes of bodies (BSON) and the text of
 *              object/array keys
 *   docs.c     insert, find, count, modify_one, modify_many
 *   keyrows.c  a document's index keys, from its stored bytes, and the
 *              index rows a write adds and removes
 *
 * On-disk schema (one SQLite file, WAL mode):
 *   _dtx_meta(k PRIMARY KEY, v)      'format' = 4; 'catalog' = a random
 *                                    64-bit value replaced by every catalog
 *                                    change, so a stale cache is noticed
 *   _dtx_coll(name PRIMARY KEY)      one row per collection
 *   _dtx_index(id, coll, name, spec) one row per secondary index; spec is
 *                                    dtx__index_spec_json() text
 *   _dtx_rules(coll PRIMARY KEY, spec)
 *                                    a collection's rules (normalised
 *                                    dtx__rules_spec() text)
 *   _dtx_fence(coll, id, rec)        fence tombstones (docs.c), made by the
 *                                    first delete that keeps one; rec is a
 *                                    BSON document (format 4)
 *   "c:NAME"(seq INTEGER PRIMARY KEY, id UNIQUE NOT NULL, body BLOB)
 *                                    documents, bodies as BSON (format 4;
 *                                    format 3 kept JSON text, and its
 *                                    tables keep their declared TEXT,
 *                                    which a BLOB ignores); seq keeps
 *                                    insertion order;
 *                                    id has no type affinity, so 1 and "1"
 *                                    are different _ids
 *   "i:NAME:ID"(b0, v0, ..., seq) WITHOUT ROWID
 *                                    index ID: per field a type bracket and
 *                                    a value (no affinity), then the doc's
 *                                    seq; primary key (fields..., seq), or
 *                                    (fields...) when unique, which is what
 *                                    enforces uniqueness
 * where NAME is the collection name with each upper-case letter X written
 * "^x" (catalog.c says why; format 3).
 *
 * Ownership: the backend owns its connections, their statement caches and
 * the catalog snapshots; a snapshot (cat_t) is immutable and refcounted,
 * so a reader keeps the one it started with while another thread installs
 * a newer one. */
#ifndef DTX_STORE_SQLITE_INT_H
#define DTX_STORE_SQLITE_INT_H

#include "store/store.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

/* ---- URI ------------------------------------------------------------------ */

enum { SQ_SYNC_OFF = 0, SQ_SYNC_NORMAL = 1, SQ_SYNC_FULL = 2 };

typedef struct sq_uri {
  char *path; /* malloc'd; NULL for the in-memory database */
  int memory;
  int sync; /* SQ_SYNC_* */
  int cache_mb; /* each connection's page cache in MiB; 0: SQLite's 2 MiB */
} sq_uri_t;

/* Parses "sqlite:PATH[?sync=full|normal|off][&cache_mb=N]" or
 * "sqlite::memory:".
 * DTX_EBADURI with a detail on any malformed part; out->path is malloc'd
 * (free with free()) on success and NULL on error. */
int dtx__sq_uri_parse(const char *uri, sq_uri_t *out);

/* ---- connections -------------------------------------------------------------- */

typedef struct sq_stmt_ent {
  uint64_t h;
  char *sql;
  sqlite3_stmt *st;
} sq_stmt_ent_t;

typedef struct sq_conn {
  sqlite3 *db;
  pthread_mutex_t mu; /* held while one thread uses the connection */
  sq_stmt_ent_t *tab; /* open-addressing statement cache */
  size_t cap, n;
  int64_t busy_t0; /* when the current wait for a lock began (ms) */
} sq_conn_t;

uint64_t dtx__sq_hash(const char *s);

/* The cached prepared statement for sql (prepared on first use), reset and
 * with its bindings cleared.  h is dtx__sq_hash(sql) or 0 to compute it.
 * Statements stay owned by the connection. */
int dtx__sq_prep(sq_conn_t *c, const char *sql, uint64_t h,
                 sqlite3_stmt **out);

/* Runs a statement without results (cached). */
int dtx__sq_exec(sq_conn_t *c, const char *sql);

/* Runs a one-off statement (DDL) without caching it. */
int dtx__sq_exec_once(sq_conn_t *c, const char *sql);

/* Maps a SQLite result code to a doctx error with the SQLite message and
 * what was being done in the detail. */
int dtx__sq_err(sq_conn_t *c, int src, const char *what);

/* BEGIN IMMEDIATE / COMMIT, retrying SQLITE_BUSY for up to the busy
 * timeout (another process may hold the write lock for a while). */
int dtx__sq_begin_write(sq_conn_t *c);
int dtx__sq_commit(sq_conn_t *c);
void dtx__sq_rollback(sq_conn_t *c);

/* Empties the statement cache when it grew too big; only called between
 * transactions, when none of its statements can be running. */
void dtx__sq_cache_trim(sq_conn_t *c);

/* ---- catalog ------------------------------------------------------------------- */

/* Hot statements of a collection, prepared from text kept in the
 * snapshot so each op neither formats nor hashes SQL. */
enum {
  SQ_C_BYID,    /* seq, body by id */
  SQ_C_SEQBYID, /* seq by id */
  SQ_C_BYSEQ,   /* body by seq */
  SQ_C_SCAN,    /* seq, body in seq order */
  SQ_C_INS,     /* insert id, body */
  SQ_C_UPD,     /* body by seq */
  SQ_C_DEL,     /* by seq */
  SQ_C_COUNT,   /* count(*) */
  SQ_C_NSQL
};

/* Room for a quoted table name: a collection name (120 bytes) with every
 * letter escaped, a prefix and an index id. */
#define SQ_NAME_MAX 244
#define SQ_TABLE_MAX 280

typedef struct sq_idx {
  int64_t id;
  dtx__index_spec_t *spec;
  int multikey; /* some document made it so (dtx__index_keys_multikey) */
  char table[SQ_TABLE_MAX]; /* quoted: "i:NAME:ID" */
  char *sql_ins, *sql_del;
  uint64_t h_ins, h_del;
} sq_idx_t;

typedef struct sq_coll {
  char *name;
  char table[SQ_TABLE_MAX]; /* quoted: "c:NAME" */
  char *sql[SQ_C_NSQL];
  uint64_t h[SQ_C_NSQL];
  size_t nidx;
  sq_idx_t *idx;
  dtx__rules_t *rules; /* NULL: none */
} sq_coll_t;

typedef struct sq_cat {
  int refs; /* atomic */
  int64_t gen;      /* _dtx_meta's 'catalog': new at every catalog change */
  size_t ncoll;
  sq_coll_t *colls; /* sorted by name */
  int has_fence;    /* _dtx_fence exists: fence tombstones may be kept */
} sq_cat_t;

/* ---- the backend -------------------------------------------------------------- */

typedef struct sq_op sq_op_t;

struct dtx__backend {
  sq_uri_t uri;
  sq_conn_t *w; /* the writer; also the only connection in memory mode */

  /* group commit (commit.c) */
  pthread_mutex_t qmu;
  sq_op_t *qhead, *qtail;
  int leading; /* a thread is running a batch */
  uint64_t nbatches, nbatched; /* statistics, for tests */
  size_t maxbatch;

  /* idle read connections (file mode) */
  pthread_mutex_t rmu;
  pthread_cond_t rcv;
  sq_conn_t **idle;
  size_t nidle, nopen;

  /* the newest catalog snapshot seen by any thread */
  pthread_mutex_t catmu;
  sq_cat_t *cat;
};

/* The context of a write transaction run by the group commit leader. */
typedef struct sq_wctx {
  dtx__backend_t *b;
  sq_conn_t *c;
  sq_cat_t *cat;   /* ref held; kept in step with the transaction */
  int cat_changed; /* the current op changed the catalog */
  int64_t *mk;     /* indexes the current op made multikey */
  size_t nmk, capmk;
} sq_wctx_t;

/* One queued write.  run() executes it inside the batch's transaction; on
 * error it returns a negative code with the detail set.  With keep_partial,
 * run() has already undone the failed part itself (per-document
 * savepoints) and what it did before the failure is kept; otherwise the
 * whole op is rolled back.  discard() frees results when the batch's COMMIT
 * failed after run() succeeded. */
struct sq_op {
  int (*run)(sq_wctx_t *w, sq_op_t *op);
  void (*discard)(sq_op_t *op);
  void *arg;
  int keep_partial;
  /* filled by the group commit */
  const char *step; /* the writing thread's pattern step (rules.c): the
                       leader judges the op under it, not under its own */
  int rc;
  int done;
  int64_t examined;
  char detail[512];
  pthread_cond_t cv; /* the group head's: its caller waits on it */
  sq_op_t *next;
  sq_op_t *grp;      /* the head of the group this op came in */
  size_t glen;       /* on a group's first op still queued: ops left */
  size_t glen_left;  /* on the head: ops of the group not yet taken */
};

/* Runs op through the group commit and returns its result code, with the
 * detail and docs-examined count moved to the calling thread. */
int dtx__sq_submit(dtx__backend_t *b, sq_op_t *op);

/* Runs ops[0..n) (n >= 1) through the group commit as one group: they go
 * into one batch, so one transaction and one COMMIT, each in its own
 * savepoint with its own outcome (ops[i]->rc, ->detail).  Returns
 * ops[0]'s code (callers read every op's), with the docs-examined counts
 * of all moved to the calling thread. */
int dtx__sq_submit_many(dtx__backend_t *b, sq_op_t **ops, size_t n);

/* Read transactions: a connection (from the pool, or the shared one in
 * memory mode) inside BEGIN with a catalog snapshot valid for it, and in
 * it, when co is not NULL, coll's descriptor (NULL: no such collection). */
int dtx__sq_read_begin(dtx__backend_t *b, const char *coll, sq_conn_t **c,
                       sq_cat_t **cat, const sq_coll_t **co);
void dtx__sq_read_end(dtx__backend_t *b, sq_conn_t *c, sq_cat_t *cat);

/* format.c */
/* Checks the file's doctx schema and format, creating the schema in an
 * empty database when create is set; without it an empty database is
 * DTX_ENOTFOUND (no detail: the caller says "no store at PATH"). */
int dtx__sq_schema_init(sq_conn_t *c, int create);

/* catalog.c */
/* The quoted table name of collection name's documents, and of its index
 * id's rows, into out (n bytes; SQ_NAME_MAX is enough): an upper-case
 * letter X is written "^x", so that names differing only in case get
 * tables whose names differ in more than case (catalog.c). */
void dtx__sq_coll_table(char *out, size_t n, const char *name);
void dtx__sq_idx_table(char *out, size_t n, const char *coll, int64_t id);
/* *v: the catalog's generation, the random number _dtx_meta keeps under
 * 'catalog' and every catalog change replaces (see catalog.c). */
int dtx__sq_cat_gen(sq_conn_t *c, int64_t *v);
int dtx__sq_cat_load(sq_conn_t *c, sq_cat_t **out);
sq_cat_t *dtx__sq_cat_get(dtx__backend_t *b);
void dtx__sq_cat_put(sq_cat_t *cat);
void dtx__sq_cat_install(dtx__backend_t *b, sq_cat_t *cat);
/* Brings *cat in line with connection c's transaction. */
int dtx__sq_cat_sync(dtx__backend_t *b, sq_conn_t *c, sq_cat_t **cat);
const sq_coll_t *dtx__sq_coll_find(const sq_cat_t *cat, const char *name);
/* The collection, created (with a catalog change) when missing. */
int dtx__sq_coll_ensure(sq_wctx_t *w, const char *name,
                        const sq_coll_t **out);
/* Creates _dtx_fence, the table of fence tombstones (docs.c), in w's
 * transaction unless the snapshot has it: a catalog change, so the
 * snapshot is reloaded (pointers into the old one die) and every process
 * looks there from its next write on. */
int dtx__sq_fence_table(sq_wctx_t *w);
/* Records the multikey indexes noted by the op that just ran (a catalog
 * change, so the snapshot is reloaded: pointers into the old one die). */
int dtx__sq_mk_flush(sq_wctx_t *w);

int dtx__sq_create_index(dtx__backend_t *b, const char *coll,
                         const dtx__index_spec_t *spec);
int dtx__sq_list_indexes(dtx__backend_t *b, const char *coll, json_t **out);
int dtx__sq_drop_collection(dtx__backend_t *b, const char *coll);
int dtx__sq_list_collections(dtx__backend_t *b, json_t **out);
int dtx__sq_set_rules(dtx__backend_t *b, const char *coll, const json_t *spec);
int dtx__sq_get_rules(dtx__backend_t *b, const char *coll, json_t **out);
/* docs.c: the fence_records method. */
int dtx__sq_fence_records(dtx__backend_t *b, const char *coll, json_t **out);

/* ---- index rows (keyrows.c) ------------------------------------------------------- */

/* Binds one index key value as (bracket, value) at columns i, i+1. */
int dtx__sq_bind_key(sqlite3_stmt *st, int i, const json_t *v);

/* One document's keys for one index: n plain tuples of nf views into the
 * body it was read from (which must outlive it), or, when json is not
 * NULL, the tuples as json_t (keyrows.c says which form when). */
typedef struct sq_keys {
  size_t nf, n;
  dtx__bval_t *v; /* n * nf values */
  json_t *json;
} sq_keys_t;

/* ix's keys of the checked body[0..len) into *k (free with
 * dtx__sq_keys_free, also after an error): dtx__index_keys' tuples of the
 * document, with its errors under "index 'NAME'". */
int dtx__sq_keys_of(const sq_idx_t *ix, const uint8_t *body, uint32_t len,
                    sq_keys_t *k);
void dtx__sq_keys_free(sq_keys_t *k);
/* Adds a document's index rows; an index that gets several keys from one
 * document (dtx__index_keys_multikey) is noted in w to be marked
 * multikey (dtx__sq_mk_flush). */
int dtx__sq_keys_insert(sq_wctx_t *w, const sq_idx_t *ix, const sq_keys_t *k,
                        int64_t seq);
int dtx__sq_keys_delete(sq_conn_t *c, const sq_idx_t *ix, const sq_keys_t *k,
                        int64_t seq);
/* Replaces the rows of keys ko by those of kn: only the tuples that
 * changed are removed and added. */
int dtx__sq_keys_update(sq_wctx_t *w, const sq_idx_t *ix, const sq_keys_t *ko,
                        const sq_keys_t *kn, int64_t seq);
int dtx__sq_bind_id(sqlite3_stmt *st, int i, const json_t *id);

/* ---- executing a plan (plan.c) ------------------------------------------------------ */

/* Yields the documents of a collection that match a filter, in seq
 * (insertion) order, loading only the candidates an index or the primary
 * key allows, or scanning when none applies. */
typedef struct sq_cursor {
  sq_conn_t *c;
  const sq_coll_t *coll;
  const dtx__filter_t *f;
  struct dtx__bfilter *bf; /* f on BSON (doc/bfilter.h), matched on the
                              stored bytes; NULL: f on the json_t */
  int kind;           /* the plan's kind (store/plan.h), or plan.c's */
  int64_t *seqs;      /* candidates, sorted and distinct */
  size_t nseq, pos;
  json_t *one;        /* single-id plan: the loaded document */
  int64_t one_seq;
  sqlite3_stmt *scan; /* scan and sorted plans: the running statement */
  int want_body;      /* keep each match's stored bytes (open_write) */
  uint8_t *one_body;  /* single-id plan: the loaded document's bytes */
  uint32_t one_blen;
  uint8_t *body;      /* the last match's bytes, until next_body takes them */
  uint32_t blen;
} sq_cursor_t;

int dtx__sq_cursor_open(sq_cursor_t *cur, sq_conn_t *c, const sq_coll_t *coll,
                        const json_t *filter_spec, const dtx__filter_t *f);
/* dtx__sq_cursor_open for a query sorted by sort (NULL: none): 1 when
 * an index walk yields the matches in sort order (DTX__PLAN_SORTED; the
 * caller need not sort, and may stop early), 0 when the cursor yields
 * them in seq order as dtx__sq_cursor_open's, <0 on error. */
int dtx__sq_cursor_open_sorted(sq_cursor_t *cur, sq_conn_t *c,
                               const sq_coll_t *coll,
                               const json_t *filter_spec,
                               const dtx__filter_t *f, const json_t *sort);
/* 1 with *seq and *doc (new ref) for the next match, 0 at the end, <0 error. */
int dtx__sq_cursor_next(sq_cursor_t *cur, int64_t *seq, json_t **doc);
/* The cursor of a write, which computes the old document's index keys
 * from its stored bytes (docs.c): dtx__sq_cursor_open_sorted's, whose
 * dtx__sq_cursor_next_body also hands over a malloc'd copy of each
 * match's checked body in *body (the caller frees it), *blen its length;
 * on 0 or error *body is NULL.  (A copy: the row's bytes are SQLite's
 * only until the statement steps, and a sorted pick or modify_many keeps
 * a match past that.) */
int dtx__sq_cursor_open_write(sq_cursor_t *cur, sq_conn_t *c,
                              const sq_coll_t *coll,
                              const json_t *filter_spec,
                              const dtx__filter_t *f, const json_t *sort);
int dtx__sq_cursor_next_body(sq_cursor_t *cur, int64_t *seq, json_t **doc,
                             uint8_t **body, uint32_t *blen);
void dtx__sq_cursor_close(sq_cursor_t *cur);

/* codec.c: a format-3 body (JSON text of an object) back to a document;
 * only the upgrade to format 4 reads text bodies (catalog.c). */
int dtx__sq_body_parse(const char *text, int len, json_t **out);

/* The body of doc, a document of coll, as BSON: *out (free with
 * bson_free, e.g. as sqlite3_bind_blob's destructor) and *len.  The
 * bridge's error (a key with a NUL byte), DTX_ELIMIT past 16 MiB of BSON,
 * DTX_ENOMEM; *out NULL on error. */
int dtx__sq_body_bson(const json_t *doc, const char *coll, uint8_t **out,
                      size_t *len);

/* The stored body at column col of st's current row, the document of co
 * at seq: checked (dtx__bson_check) and borrowed in *p, *n (valid until
 * st steps or resets).  A NULL, a non-BLOB (format 3's TEXT included) or
 * bytes that fail the check are DTX_ECORRUPT "sqlite: stored document of
 * 'COLL' (_id ID, seq N) is not a valid document: <why> at byte B" (a
 * reader the audit runs skips it instead: plan.c, store.h's
 * dtx__corrupt_skip).
 * dtx__sq_body_get bridges the view into a new json_t. */
int dtx__sq_body_view(sq_conn_t *c, const sq_coll_t *co, int64_t seq,
                      sqlite3_stmt *st, int col, const uint8_t **p,
                      uint32_t *n);
int dtx__sq_body_get(sq_conn_t *c, const sq_coll_t *co, int64_t seq,
                     sqlite3_stmt *st, int col, json_t **out);
/* The checked body p[0..n) of co's document at seq bridged into *out (a
 * new json_t): a body the bridge refuses is DTX_ECORRUPT naming it. */
int dtx__sq_body_json(const sq_coll_t *co, int64_t seq, const uint8_t *p,
                      uint32_t n, json_t **out);

/* dtx__sq_body_view's check under a name of the caller's (what), for
 * BSON values that are not collection rows (fence records). */
int dtx__sq_blob_check(sqlite3_stmt *st, int col, const char *what,
                       const uint8_t **p, uint32_t *n);

/* A stored _id value (the id column) as an error names it, into out[n]:
 * printable ASCII only. */
void dtx__sq_id_name(sqlite3_value *v, char *out, size_t n);

/* JSON text of v in *out (malloc'd, NUL-terminated, *len bytes).  With
 * canonical, numbers are written by value (1.0 as 1), for index keys. */
int dtx__sq_text(const json_t *v, int canonical, char **out, size_t *len);
/* The same text appended to b (util/buf.h: b->oom tells of a failure). */
struct dtx__buf;
void dtx__sq_text_put(struct dtx__buf *b, const json_t *v, int canonical);

/* docs.c */
int dtx__sq_insert(dtx__backend_t *b, const char *coll, json_t *const *docs,
                   size_t n, int bypass, size_t *ninserted);
int dtx__sq_find(dtx__backend_t *b, const char *coll, const json_t *fspec,
                 const dtx__filter_t *f, const json_t *sort, int64_t skip,
                 int64_t limit, json_t **out);
int dtx__sq_count(dtx__backend_t *b, const char *coll, const json_t *fspec,
                  const dtx__filter_t *f, int64_t *out);
int dtx__sq_modify_one(dtx__backend_t *b, const dtx__modify_t *m,
                       dtx__modify_result_t *res);
int dtx__sq_modify_many(dtx__backend_t *b, const dtx__modify_t *m,
                        int64_t *matched, int64_t *modified);
/* The bulk method: every op that has not failed yet goes to the group
 * commit as one group (one transaction, a savepoint each). */
int dtx__sq_bulk(dtx__backend_t *b, dtx__bulk_op_t *ops, size_t n);

#endif
