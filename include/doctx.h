/* doctx.h -- the public API of doctx, and the only header users include.
 *
 * doctx builds reliable multi-document work (two-phase transfers, ...) from
 * one primitive: an atomic conditional update of a single document, with
 * MongoDB's filter and update languages.  Documents are jansson values
 * (json_t), so this header includes <jansson.h>.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *  - The return value is 0 (DTX_OK) on success or a negative DTX_E* code.
 *    dtx_strerror() names it in English, dtx_errname() as a token, and
 *    dtx_errdetail() gives this thread's detail for the last error (which
 *    operator, path, key or account was involved).
 *  - json_t arguments are borrowed: doctx never keeps or frees them.
 *  - json_t results returned through an out-parameter are new references
 *    owned by the caller, who releases them with json_decref().  On error
 *    the out-parameter is set to NULL.
 *  - A dtx_store_t may be shared by any number of threads.  It must outlive
 *    every call made on it; dtx_store_close() invalidates it.
 *  - Integers are int64 (json_int_t).  Dates written by $currentDate are
 *    integer milliseconds since the Unix epoch (MongoDB writes a BSON Date).
 */
#ifndef DOCTX_H
#define DOCTX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DOCTX_VERSION "0.1.0"

/* ---- errors ------------------------------------------------------------ */

/* One table generates the codes, dtx_strerror() and dtx_errname(). */
#define DTX_ERRNO_MAP(X)                                                     \
  X(NOMEM, -1, "out of memory")                                              \
  X(INVAL, -2, "invalid argument")                                           \
  X(BADJSON, -3, "malformed JSON")                                           \
  X(BADQUERY, -4, "invalid filter")                                          \
  X(BADUPDATE, -5, "invalid update")                                         \
  X(BADURI, -6, "invalid store URI")                                         \
  X(BADINDEX, -7, "invalid index specification")                             \
  X(NOMATCH, -8, "no document matched")                                      \
  X(DUPKEY, -9, "duplicate key for unique index")                            \
  X(TYPE, -10, "operation not valid for the value's type")                   \
  X(OVERFLOW, -11, "integer overflow")                                       \
  X(IMMUTABLE, -12, "_id is immutable")                                      \
  X(CONFLICT, -13, "conflicting request")                                    \
  X(INSUFFICIENT, -14, "insufficient funds")                                 \
  X(NOACCOUNT, -15, "no such account")                                       \
  X(STATE, -16, "not allowed in the current state")                          \
  X(NOTFOUND, -17, "not found")                                              \
  X(BUSY, -18, "store busy")                                                 \
  X(UNAVAILABLE, -19, "store unavailable")                                   \
  X(BACKEND, -20, "storage backend error")                                   \
  X(FAULT, -21, "injected fault")                                            \
  X(AUDIT, -22, "audit found broken invariants")                             \
  X(STALE, -23, "lease lost to another owner")

typedef enum dtx_errno {
  DTX_OK = 0,
#define DTX__ERRENUM(name, code, msg) DTX_E##name = code,
  DTX_ERRNO_MAP(DTX__ERRENUM)
#undef DTX__ERRENUM
} dtx_errno_t;

/* Static strings; never NULL (unknown codes give "unknown error"). */
const char *dtx_strerror(int err);
const char *dtx_errname(int err); /* "DUPKEY", "OK", "UNKNOWN" */

/* The detail message of the last error raised on this thread, or "" when
 * none.  The string is owned by doctx and stays valid until the next doctx
 * call on the same thread. */
const char *dtx_errdetail(void);

/* ---- store ------------------------------------------------------------- */

typedef struct dtx_store dtx_store_t;

/* Opens the store named by uri:
 *   sqlite:PATH[?sync=full|normal|off]   embedded, WAL mode (default full)
 *   sqlite::memory:                      private in-memory database
 * A NULL uri means $DOCTX_STORE, or else "sqlite:./doctx.db".
 * On success *out is a handle to release with dtx_store_close(); on error
 * *out is NULL. */
int dtx_store_open(const char *uri, dtx_store_t **out);

/* Flushes and frees the store.  The handle and everything borrowed from it
 * must not be used again.  NULL is a no-op. */
void dtx_store_close(dtx_store_t *st);

/* The canonical URI the store was opened with.  Owned by the store. */
const char *dtx_store_uri(const dtx_store_t *st);

/* Inserts one document.  A missing _id is generated (24 hex digits, time
 * ordered); _id must be a string or an integer.  doc is not modified.
 * If id_out is not NULL it receives the _id (new reference). */
int dtx_store_insert(dtx_store_t *st, const char *coll, const json_t *doc,
                     json_t **id_out);

/* Inserts an array of documents in order, each atomically on its own.  It
 * stops at the first failure; *ninserted (if not NULL) counts the ones that
 * went in.  ids_out (if not NULL) receives an array of their _ids. */
int dtx_store_insert_many(dtx_store_t *st, const char *coll,
                          const json_t *docs, size_t *ninserted,
                          json_t **ids_out);

typedef struct dtx_find_opts {
  const json_t *sort;       /* {"field": 1|-1, ...}, or NULL */
  const json_t *projection; /* {"a":1,...} or {"a":0,...}, or NULL */
  int64_t skip;             /* >= 0 */
  int64_t limit;            /* 0 means no limit; >= 0 */
} dtx_find_opts_t;

/* Finds the documents matching filter (NULL means {}).  *out receives a
 * new array.  opts may be NULL. */
int dtx_store_find(dtx_store_t *st, const char *coll, const json_t *filter,
                   const dtx_find_opts_t *opts, json_t **out);

/* Counts the documents matching filter (NULL means {}). */
int dtx_store_count(dtx_store_t *st, const char *coll, const json_t *filter,
                    int64_t *out);

typedef struct dtx_update_opts {
  int many;   /* update every matching document (each atomic on its own) */
  int upsert; /* insert a document built from filter + update if none */
} dtx_update_opts_t;

typedef struct dtx_update_result {
  int64_t matched;
  int64_t modified;
  json_t *upserted_id; /* new reference, or NULL; caller json_decref()s */
} dtx_update_result_t;

/* Applies update (operators such as $set/$inc, or a replacement document)
 * to the first matching document, or to all with opts->many.  Each
 * document changes all or nothing; an error leaves it unchanged.  res is
 * filled on success and zeroed on error.  opts may be NULL. */
int dtx_store_update(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *update, const dtx_update_opts_t *opts,
                     dtx_update_result_t *res);

typedef struct dtx_fam_opts {
  const json_t *sort;       /* picks which match is modified; NULL = any */
  const json_t *projection; /* applied to the returned document */
  int upsert;
  int return_new; /* return the document after the update (else before) */
} dtx_fam_opts_t;

/* The primitive: atomically finds one document matching filter and applies
 * update to it.  *out receives the document before (or after, with
 * return_new) the update.  Returns DTX_ENOMATCH, with *out NULL, when no
 * document matched and none was upserted.  On an upsert without
 * return_new, *out is NULL and the return is 0.  opts may be NULL. */
int dtx_store_find_one_and_update(dtx_store_t *st, const char *coll,
                                  const json_t *filter, const json_t *update,
                                  const dtx_fam_opts_t *opts, json_t **out);

/* Atomically removes one matching document and returns it in *out.
 * DTX_ENOMATCH when none matched.  opts->upsert/return_new are ignored. */
int dtx_store_find_one_and_delete(dtx_store_t *st, const char *coll,
                                  const json_t *filter,
                                  const dtx_fam_opts_t *opts, json_t **out);

/* Deletes the first (or, with many, every) matching document. */
int dtx_store_delete(dtx_store_t *st, const char *coll, const json_t *filter,
                     int many, int64_t *deleted);

typedef struct dtx_index_opts {
  int unique;
  int sparse;
  const char *name; /* NULL: derived from the keys, e.g. "a_1_b_-1" */
} dtx_index_opts_t;

/* Creates an index on keys ({"path": 1|-1, ...}, in order).  Existing
 * documents are indexed; a unique index that they violate is refused with
 * DTX_EDUPKEY.  Creating an identical index again is a no-op; a different
 * one under the same name is DTX_EBADINDEX.  Paths must not contain numeric
 * (positional) segments.  name_out, if not NULL, receives a malloc'd name
 * the caller free()s. */
int dtx_store_create_index(dtx_store_t *st, const char *coll,
                           const json_t *keys, const dtx_index_opts_t *opts,
                           char **name_out);

/* *out: array of {"name","key","unique","sparse"}. */
int dtx_store_list_indexes(dtx_store_t *st, const char *coll, json_t **out);

/* Drops the collection with its documents and indexes.  Dropping a missing
 * collection is not an error. */
int dtx_store_drop_collection(dtx_store_t *st, const char *coll);

/* *out: sorted array of collection names. */
int dtx_store_list_collections(dtx_store_t *st, json_t **out);

#ifdef __cplusplus
}
#endif
#endif /* DOCTX_H */
