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
 *    integer milliseconds since the Unix epoch (MongoDB writes a BSON Date);
 *    {$currentDate: {f: {$type: "timestamp"}}} writes MongoDB's Timestamp
 *    as one integer, seconds << 32 | an increment within the second.
 *  - Filters, updates, projections and pipelines follow MongoDB; what is
 *    supported and every deviation is listed in docs/mongodb.md.
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
  X(STALE, -23, "lease lost to another owner")                              \
  X(LIMIT, -24, "resource limit exceeded")                                   \
  X(VALIDATION, -25, "document failed validation")                          \
  X(FENCED, -26, "a newer fencing token wrote the document")               \
  X(CORRUPT, -27, "a stored document is corrupt")

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
 *   redis://[USER:PASSWORD@]HOST:PORT[,HOST:PORT...][?wait=N&user=U
 *           &password=P&timeout_ms=N&retry_ms=N&buckets=N&ns=NAME]
 *                                        Redis standalone or Cluster; ns
 *                                        (1..32 of [A-Za-z0-9_-]) isolates
 *                                        this store's keys from every
 *                                        other namespace on the servers
 * A Redis ACL user (USER:PASSWORD@, percent-decoded, or user= and
 * password=, as written) sends AUTH USER PASSWORD on every connection to
 * every node; an empty USER or password= alone is the default user.  A
 * user without a password, or the user given both ways, is DTX_EBADURI;
 * a refused AUTH is DTX_EUNAVAILABLE naming the node and the user.  No
 * error detail shows the password (docs/redis.md, "ACL users").
 * A NULL uri means $DOCTX_STORE, or else "sqlite:./doctx.db".  A missing
 * SQLite file is created (see dtx_store_open_ex to refuse that).
 * On success *out is a handle to release with dtx_store_close(); on error
 * *out is NULL.
 *
 * ?wait=N (Redis): each write is acknowledged only once N replicas of its
 * master have it (WAIT).  The open checks every master that serves slots
 * (INFO replication) and fails with DTX_EUNAVAILABLE, naming the master
 * and its count, when one has fewer than N connected replicas, since no
 * write there could ever be acknowledged.  Later, when a WAIT comes back
 * short, the master's replicas are counted again: while N or more are
 * connected (one is catching up) the write waits on, within retry_ms;
 * with fewer, the call fails at once with DTX_EUNAVAILABLE naming the
 * master and both counts.  That write was applied on the master but is
 * on fewer than N replicas, so its outcome is unknown, as after a lost
 * reply; and further writes to that master are refused before they are
 * sent (DTX_EUNAVAILABLE, nothing changed) until it has N replicas
 * again, which is re-checked at most every 200 ms. */
int dtx_store_open(const char *uri, dtx_store_t **out);

/* dtx_store_open_ex flags. */
#define DTX_OPEN_NOCREATE 0x1u /* open an existing store only */

/* dtx_store_open with flags: 0, or DTX_OPEN_NOCREATE.  With
 * DTX_OPEN_NOCREATE a sqlite:PATH whose file does not exist, or holds no
 * doctx store, is DTX_EUNAVAILABLE with the detail "no store at PATH" and
 * nothing is created on disk; tools that only read use it, so a mistyped
 * path is an error instead of a new, empty store.  It does not change
 * sqlite::memory: (always a new private store) or redis:// (a server
 * answers or it does not).  Unknown flag bits are DTX_EINVAL.  Ownership
 * and out-parameters as dtx_store_open. */
int dtx_store_open_ex(const char *uri, unsigned flags, dtx_store_t **out);

/* Flushes and frees the store.  The handle and everything borrowed from it
 * must not be used again.  NULL is a no-op. */
void dtx_store_close(dtx_store_t *st);

/* The canonical URI the store was opened with, its password shown as
 * *** (USER:***@, password=***), so it may be printed or logged.  Owned
 * by the store. */
const char *dtx_store_uri(const dtx_store_t *st);

/* Collection names are 1..120 bytes of [A-Za-z0-9_.-], not starting with
 * "_dtx" or "system.", and case-sensitive on every backend, as in MongoDB:
 * "Orders" and "orders" are two collections.
 *
 * Documents nest at most DTX_MAX_DEPTH levels (the document itself is
 * level 1; every object or array inside adds one), as MongoDB's BSON
 * limit.  Every write that would store a deeper document -- an insert, an
 * update's result, an upsert, a replacement -- is refused with DTX_EINVAL
 * naming the path where the limit was passed, and changes nothing.
 *
 * Documents hold at most 16 MiB (as MongoDB's BSON limit; counted as their
 * compact JSON, docs/semantics.md "Size limits"): a write that would store
 * a bigger one -- with or without bypass_validation -- is refused with
 * DTX_ELIMIT naming it, and changes nothing.  An aggregation refuses the
 * same way a value or document that would pass 16 MiB. */
#define DTX_MAX_DEPTH 100

/* Inserts one document.  A missing _id is generated (24 hex digits, time
 * ordered).  _id may be any value but an array, as in MongoDB: a number
 * (1 and 1.0 are the same _id), a string of 1 to 256 bytes, null, a
 * boolean, or an object of up to about 1 KiB whose field names neither
 * start with '$' nor contain '.' (equal objects are the same _id; field
 * order counts).  doc is not modified.  If id_out is not NULL it receives
 * the _id (new reference).  The collection's validator applies
 * (DTX_EVALIDATION, see dtx_store_set_rules). */
int dtx_store_insert(dtx_store_t *st, const char *coll, const json_t *doc,
                     json_t **id_out);

typedef struct dtx_insert_opts {
  int bypass_validation; /* skip the collection's validator (not the depth
                            limit) */
} dtx_insert_opts_t;

/* dtx_store_insert with options; opts may be NULL (= dtx_store_insert). */
int dtx_store_insert_ex(dtx_store_t *st, const char *coll, const json_t *doc,
                        const dtx_insert_opts_t *opts, json_t **id_out);

/* Inserts an array of documents in order, each atomically on its own.
 * Every document is validated first, so an invalid one inserts nothing.
 * A store error (e.g. a duplicate key) stops the inserts there; the
 * documents before it stay.  *ninserted (if not NULL) counts the ones that
 * went in and ids_out (if not NULL) receives an array of their _ids -- on
 * that error too, an exception to the rule that out-parameters are NULL on
 * error. */
int dtx_store_insert_many(dtx_store_t *st, const char *coll,
                          const json_t *docs, size_t *ninserted,
                          json_t **ids_out);

/* dtx_store_insert_many with options; opts may be NULL.  A document the
 * validator refuses stops the inserts there, as a duplicate key does. */
int dtx_store_insert_many_ex(dtx_store_t *st, const char *coll,
                             const json_t *docs, const dtx_insert_opts_t *opts,
                             size_t *ninserted, json_t **ids_out);

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

/* Fenced writes.  Every modify call -- dtx_store_update (one or many),
 * find_one_and_update, find_one_and_delete, dtx_store_delete_ex -- may be
 * fenced by a lock name and token (fence_name, fence_token in its
 * options): Kleppmann's fencing token, so that a resource refuses a lock
 * holder whose lease lapsed while it was paused.  A document records, per
 * lock name, the largest token that wrote it, in the reserved top-level
 * field
 *   _fence: {NAME: token, ...}
 * On the document the filter matched, in the same atomic step as the
 * write: when a token larger than fence_token is recorded there, the call
 * fails with DTX_EFENCED, naming both tokens, and changes nothing;
 * otherwise the update (or delete) is applied and fence_token recorded.
 * A document with no token of that lock yet accepts the write and records
 * its token; an equal token writes again.  A document the filter does not
 * match is DTX_ENOMATCH (or matched 0), as unfenced: FENCED means the
 * filter matched and the token was refused.  With many, each document is
 * judged on its own and a refused one stops the call there, as a
 * validation error does.  A fenced upsert records the token in the new
 * document.
 * fence_name is 1..128 of [A-Za-z0-9_.:-] and fence_token >= 1
 * (DTX_EINVAL).  The lock names of doctx's own locks (dtx_lock_*) are
 * their names, and their tokens the tokens acquire returned.
 * _fence is written only by fenced writes: an update naming it (any
 * operator, or $rename to it) and a replacement holding it are
 * DTX_EBADUPDATE; a replacement keeps the stored _fence, as it keeps _id;
 * an upsert's filter does not seed it; an inserted document may carry a
 * well-formed _fence ({NAME: integer >= 1}) or none (DTX_EINVAL), e.g. to
 * restore a copy.  Filters may read it ({"_fence.L": {"$lte": 7}}; a name
 * holding '.' reads as a path).  Writes without a fence are not checked
 * against it: every writer of a fenced resource must fence.
 *
 * A delete does not erase the record: a deleted document that carried
 * one, or was deleted by a fenced call, leaves it under its _id (a fence
 * tombstone, in the same atomic step), which no read, count, index or
 * scan sees.  The next document created with that _id takes it over in
 * its insert's atomic step: a fenced upsert older than it fails with
 * DTX_EFENCED and creates nothing; an insert or unfenced upsert carries
 * it on (per name the larger of it and the document's own token).  It
 * stays until then, or until the collection is dropped -- never on a
 * timer (docs/locks.md, "Fence tombstones").
 *
 * Time-bounded writes.  An update (one or many, upsert included) and a
 * find_one_and_update or find_one_and_delete may carry not_before and
 * not_after (dtx_update_opts_t, dtx_fam_opts_t; wall-clock ms since the
 * epoch, 0 for no bound; negative, or not_before past not_after, is
 * DTX_EINVAL).  The store reads ITS clock inside the atomic step of each
 * write the call makes -- SQLite: the writing process's clock, read
 * inside the write transaction while it holds the write lock; Redis: the
 * server's TIME, read inside the write's script on the node that holds the
 * document -- and refuses the write when that clock is past not_after
 * (DTX_ESTALE: its time is over) or before not_before (DTX_ESTATE: not
 * yet), naming the bound and the store's time; nothing changes.  A call
 * that matches nothing, or whose update changes nothing, writes nothing
 * and is not judged.  A writer that may be paused for an unbounded time
 * (a job attempt taken over meanwhile) so learns, in the same step, that
 * its write came too late -- unlike a deadline in the client, which a
 * pause outlasts.  With many, each document is judged on its own and a
 * refused one stops the call there.  docs/jobs.md has the clock
 * assumptions its user states. */

typedef struct dtx_update_opts {
  int many;   /* update every matching document (each atomic on its own) */
  int upsert; /* insert a document built from filter + update if none */
  /* MongoDB's arrayFilters: an array of filter documents, one per
   * identifier used as $[id] in update paths; NULL when none. */
  const json_t *array_filters;
  int bypass_validation; /* skip the collection's validator */
  /* A fenced write (see "fenced writes" below): fence_name NULL for none. */
  const char *fence_name;
  int64_t fence_token;
  /* A time-bounded write (see "time-bounded writes" below): wall-clock
   * ms since the epoch, 0 for no bound. */
  int64_t not_before;
  int64_t not_after;
} dtx_update_opts_t;

typedef struct dtx_update_result {
  int64_t matched;
  int64_t modified;
  json_t *upserted_id; /* new reference, or NULL; caller json_decref()s */
} dtx_update_result_t;

/* Applies update (operators such as $set/$inc, or a replacement document)
 * to the first matching document, or to all with opts->many.  Each
 * document changes all or nothing; an error leaves it unchanged.  res is
 * filled on success and zeroed on error.  opts may be NULL.  A result (or
 * upserted document) the collection's validator refuses is
 * DTX_EVALIDATION; with many, the documents changed before it stay, as
 * with any other error of one document. */
int dtx_store_update(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *update, const dtx_update_opts_t *opts,
                     dtx_update_result_t *res);

typedef struct dtx_fam_opts {
  const json_t *sort;       /* picks which match is modified; NULL = any */
  const json_t *projection; /* applied to the returned document */
  int upsert;
  int return_new; /* return the document after the update (else before) */
  const json_t *array_filters; /* as in dtx_update_opts_t */
  int bypass_validation; /* skip the validator (find_one_and_update) or
                            the delete guard (find_one_and_delete) */
  const char *fence_name; /* a fenced write; NULL for none */
  int64_t fence_token;
  int64_t not_before; /* a time-bounded write, as in dtx_update_opts_t */
  int64_t not_after;
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

typedef struct dtx_agg_opts {
  /* What $group and $sort may hold in memory together, in bytes; 0 means
   * 100 MiB.  Past it the call fails with DTX_ELIMIT. */
  int64_t max_bytes;
} dtx_agg_opts_t;

/* Runs an aggregation pipeline (a JSON array of stages: $match, $unwind,
 * $group, $sort, $skip, $limit, $project, $addFields/$set, $unset,
 * $count, $replaceRoot/$replaceWith, $lookup in its equality form) over
 * coll.  A leading $match, and a $sort, $skip and $limit right after it,
 * run in the store's find, so they use indexes.  *out receives the result
 * documents as a new array (caller json_decref()s; NULL on error).  The
 * documents the leading stages select are read in one call, as
 * dtx_store_find reads them; the later stages stream them, and only
 * $group and $sort hold data, within opts->max_bytes.  Errors:
 * DTX_EBADQUERY (an unknown or unsupported stage, operator or option,
 * named in the detail), DTX_ELIMIT, DTX_ETYPE and DTX_EOVERFLOW (an int64
 * $sum or $add that does not fit).  Nothing is written.  opts may be
 * NULL. */
int dtx_store_aggregate(dtx_store_t *st, const char *coll,
                        const json_t *pipeline, const dtx_agg_opts_t *opts,
                        json_t **out);

/* Deletes the first (or, with many, every) matching document.  A
 * document the collection's delete guard does not match is not deleted:
 * DTX_EVALIDATION (with many, the documents deleted before it stay and
 * *deleted counts them).  = dtx_store_delete_ex with {many}. */
int dtx_store_delete(dtx_store_t *st, const char *coll, const json_t *filter,
                     int many, int64_t *deleted);

typedef struct dtx_delete_opts {
  int many;              /* delete every match (each atomically) */
  int bypass_validation; /* skip the collection's delete guard */
  const char *fence_name; /* a fenced delete; NULL for none */
  int64_t fence_token;
} dtx_delete_opts_t;

/* dtx_store_delete with options; opts may be NULL (delete one). */
int dtx_store_delete_ex(dtx_store_t *st, const char *coll,
                        const json_t *filter, const dtx_delete_opts_t *opts,
                        int64_t *deleted);

/* ---- bulk writes -----------------------------------------------------------
 *
 * dtx_store_bulk_write runs many independent single-document writes in one
 * call, as MongoDB's bulkWrite with ordered: false.  Each operation is
 * atomic and isolated on its own, exactly as the single call of its kind
 * with the same options, and gets its own result, error and detail; the
 * batch as a whole is NOT a transaction.  No order between the operations
 * is promised (two on one document apply one after the other, in some
 * order).  What the batch buys is the store's cost: SQLite runs the batch
 * in one write transaction (one savepoint per operation, one commit, so
 * one fsync at sync=full); Redis sends each node's share as one pipeline
 * (one round trip per node per round), and only the operations whose
 * compare-and-set lost go again. */

typedef enum dtx_bulk_kind {
  DTX_BULK_INSERT = 1,          /* insertOne: doc (insert_opts) */
  DTX_BULK_UPDATE_ONE,          /* updateOne: filter, update (update_opts;
                                   many must be 0) */
  DTX_BULK_DELETE_ONE,          /* deleteOne: filter (delete_opts; many
                                   must be 0) */
  DTX_BULK_FIND_ONE_AND_UPDATE, /* filter, update (fam_opts) */
  DTX_BULK_FIND_ONE_AND_DELETE  /* filter (fam_opts) */
} dtx_bulk_kind_t;

/* One operation.  Everything is borrowed for the duration of the call.
 * The option pointer of the op's kind may be NULL (the defaults); the
 * others are ignored.  They are the single calls' own option structs, so
 * an option added there applies here too. */
typedef struct dtx_bulk_op {
  dtx_bulk_kind_t kind;
  const char *coll;
  const json_t *doc;    /* DTX_BULK_INSERT */
  const json_t *filter; /* NULL means {} */
  const json_t *update; /* the update kinds */
  const dtx_insert_opts_t *insert_opts;
  const dtx_update_opts_t *update_opts;
  const dtx_delete_opts_t *delete_opts;
  const dtx_fam_opts_t *fam_opts;
} dtx_bulk_op_t;

/* The outcome of one operation.  Owned by the caller's array; the members
 * that are pointers are freed by dtx_bulk_results_clear(). */
typedef struct dtx_bulk_result {
  int rc;         /* 0 or DTX_E*, as the single call would return */
  char *detail;   /* the error detail (malloc'd), NULL when rc == 0 */
  int64_t matched;  /* UPDATE_ONE, DELETE_ONE: 0 or 1 */
  int64_t modified; /* UPDATE_ONE: changed; DELETE_ONE: deleted (0 or 1) */
  json_t *id;     /* INSERT: the _id (also when generated); UPDATE_ONE
                     and FIND_ONE_AND_UPDATE with upsert: the upserted
                     _id, else NULL */
  json_t *doc;    /* FIND_ONE_AND_*: the document as the single call's *out
                     (projection applied); NULL otherwise */
} dtx_bulk_result_t;

/* Runs ops[0..n) and fills results[0..n) (the caller's array of n; its
 * prior contents are ignored).  An operation that is invalid (a bad
 * filter, update, document or option, e.g. many set) fails alone with the
 * error the single call would give, and the others still run.  Returns 0
 * when every operation succeeded; otherwise the rc of the first failed
 * one, with a detail "K of N operations failed; first: #i: ...".  A
 * call-level error (st, ops or results NULL: DTX_EINVAL, before anything
 * ran) is returned with every result set to it.  n == 0 is a no-op.
 * Release the results with dtx_bulk_results_clear() in every case. */
int dtx_store_bulk_write(dtx_store_t *st, const dtx_bulk_op_t *ops, size_t n,
                         dtx_bulk_result_t *results);

/* Frees what results[0..n) hold and zeroes them.  NULL is a no-op. */
void dtx_bulk_results_clear(dtx_bulk_result_t *results, size_t n);

typedef struct dtx_index_opts {
  int unique;
  int sparse;
  const char *name; /* NULL: derived from the keys, e.g. "a_1_b_-1" */
  /* A unique index on a collection whose rules a pattern owns
   * (dtx_rules_opts_t) could refuse one of its protocol steps half way
   * (a transfer stuck with DUPKEY), and so could a name other than the
   * keys give (a pattern may create an index by that name later):
   * refused with DTX_EVALIDATION unless this is set.  The patterns' own
   * set-up sets it. */
  int bypass_validation;
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
 * collection is not an error.  A collection whose rules have a delete
 * guard (dtx_store_set_rules) is dropped only while it is empty: a drop
 * deletes every document without asking the guard, so a guarded
 * collection that holds documents is refused with DTX_EVALIDATION, and
 * nothing changes.  = dtx_store_drop_collection_ex with opts NULL. */
int dtx_store_drop_collection(dtx_store_t *st, const char *coll);

typedef struct dtx_drop_opts {
  int bypass_validation; /* drop a guarded collection that holds documents */
} dtx_drop_opts_t;

/* dtx_store_drop_collection with options; opts may be NULL.  The check and
 * the drop are two steps: a document inserted between them is dropped
 * with the rest. */
int dtx_store_drop_collection_ex(dtx_store_t *st, const char *coll,
                                 const dtx_drop_opts_t *opts);

/* *out: sorted array of collection names. */
int dtx_store_list_collections(dtx_store_t *st, json_t **out);

/* ---- checking input without a store ----------------------------------------
 *
 * The checks every store call makes before it touches the store, exposed
 * so that a caller can refuse bad input before it opens (and so creates)
 * a store, as the CLI does.  They are the same functions the store calls,
 * not copies.  Each returns 0, or a negative DTX_E* with dtx_errdetail()
 * naming the operator, path or key.  Arguments are only read (borrowed).
 */

/* Parses text as one JSON value.  Duplicate object keys, NUL bytes,
 * trailing garbage, integers outside int64 and nesting past jansson's
 * limit are DTX_EBADJSON with the position.  *out is a new reference the
 * caller json_decref()s (NULL on error). */
int dtx_json_parse(const char *text, json_t **out);

/* Compact, key-order-preserving JSON of v, malloc'd (the caller free()s
 * it); NULL only when out of memory.  The CLI prints documents this way. */
char *dtx_json_dump(const json_t *v);

/* A collection name: 1..120 bytes of [A-Za-z0-9_.-], not starting with
 * "_dtx" or "system." (DTX_EINVAL). */
int dtx_check_collection(const char *name);

/* An _id value (any JSON value but an array; see docs/mongodb.md). */
int dtx_check_id(const json_t *id);

/* A filter document (DTX_EBADQUERY: unknown operator, bad argument). */
int dtx_check_filter(const json_t *filter);

/* An update document with its arrayFilters (NULL when none).  With
 * DTX_CHECK_MANY a replacement document is refused, as update --many
 * refuses it (DTX_EBADUPDATE). */
#define DTX_CHECK_MANY 1u
int dtx_check_update(const json_t *update, const json_t *array_filters,
                     unsigned flags);

/* A sort ({path: 1|-1}) and a projection (DTX_EBADQUERY). */
int dtx_check_sort(const json_t *sort);
int dtx_check_projection(const json_t *projection);

/* Index keys with their options (DTX_EBADINDEX). */
int dtx_check_index(const json_t *keys, const dtx_index_opts_t *opts);

/* An aggregation pipeline (DTX_EBADQUERY naming the stage or operator). */
int dtx_check_pipeline(const json_t *pipeline);

/* A fence of a fenced write: lock name (1..128 of [A-Za-z0-9_.:-]) and
 * token >= 1 (DTX_EINVAL). */
int dtx_check_fence(const char *name, int64_t token);

/* ---- collection rules ------------------------------------------------------
 *
 * A collection may carry two rules, kept in the store's catalog so that
 * every process and handle enforces them, and checked inside the same
 * atomic step as the write they judge (on every backend):
 *  - validator: MongoDB's validator language -- query operators, and/or
 *    {"$jsonSchema": {...}} at the top level (the supported subset is in
 *    docs/validation.md).  Every document an insert, update, upsert,
 *    replacement or find_one_and_update would store must match it
 *    (MongoDB's validationLevel "strict", validationAction "error").
 *    Documents stored before the validator was set are not checked or
 *    rewritten, but an update of one must produce a valid document.  An
 *    update that changes nothing writes nothing and is not checked.
 *  - delete_guard (a doctx extension): a filter in the same language that
 *    a document must match to be deleted, by any delete or
 *    find_one_and_delete.
 *  - transition (a doctx extension): what an update may change, judged on
 *    the document before AND after it (an insert or a delete is not an
 *    update).  One rule object, or an array of them that must all hold:
 *      {"immutable":  [PATH...],  the value at each path never changes
 *                                 (a missing one stays missing);
 *       "increasing": [PATH...],  a number there never decreases nor goes;
 *       "moves": [{"from": FILTER, "to": FILTER, "name": TEXT}...]}
 *                                 some move's "from" must match the
 *                                 document before and its "to" the one
 *                                 after (a state machine's edges).
 *    The patterns use it for what a validator cannot see: a settlement
 *    that must not move to another payer, a token that must not go back
 *    (docs/validation.md, "Transition rules").
 * A refused write is DTX_EVALIDATION and changes nothing; the detail names
 * the collection, the _id and the rule that failed, e.g.
 *   accounts 'A': min_balance is double, must be long or null
 *   ($jsonSchema properties.min_balance.bsonType)
 * The bypass_validation option of each write skips every rule for that
 * call only (never the depth limit).  A change of rules is seen by every
 * writer of every process before its next write: a write that commits
 * after dtx_store_set_rules() returned was checked against the new rules. */

typedef struct dtx_collection_rules {
  const json_t *validator;    /* NULL or {} = none */
  const json_t *delete_guard; /* NULL or {} = none */
  const json_t *transition;   /* NULL or {} = none */
} dtx_collection_rules_t;

/* Replaces coll's rules by *rules (NULL removes them all), creating the
 * collection if it does not exist.  All are compiled first: an invalid
 * one is DTX_EBADQUERY (naming the operator, $jsonSchema keyword or
 * transition key) and changes nothing.  The json_t values are borrowed
 * (copied into the catalog).  Dropping the collection removes its rules.
 * Rules a pattern owns are refused (DTX_EVALIDATION, nothing changed):
 * see dtx_rules_opts_t. */
int dtx_store_set_rules(dtx_store_t *st, const char *coll,
                        const dtx_collection_rules_t *rules);

/* Options of dtx_store_set_rules_ex (zeroed: those of
 * dtx_store_set_rules). */
typedef struct dtx_rules_opts {
  /* A pattern's rules are its promises, and a plain change of rules may
   * not take them away: rules that name a pattern (their "pattern", set
   * by the pattern's own set-up) do not change, and a transition object
   * naming one (a pattern's rule in a user's collection) must be kept,
   * else DTX_EVALIDATION naming the pattern.  bypass_validation lifts
   * that, as it lifts the rules for a write (doctx rules ...
   * --bypass-validation). */
  int bypass_validation;
  /* The pattern whose own collection this is (1..32 of [a-z0-9_]), stored
   * as the rules' "pattern"; NULL: none.  Used by the patterns' set-up. */
  const char *pattern;
} dtx_rules_opts_t;

/* dtx_store_set_rules with options (NULL: none). */
int dtx_store_set_rules_ex(dtx_store_t *st, const char *coll,
                           const dtx_collection_rules_t *rules,
                           const dtx_rules_opts_t *opts);

/* Collection rules as dtx_store_set_rules compiles them (DTX_EBADQUERY /
 * DTX_EINVAL naming the rule), without a store
 * (the checks above). */
int dtx_check_rules(const dtx_collection_rules_t *rules);

/* *out: {"validator": V or null, "delete_guard": G or null,
 * "transition": T or null} as stored, plus "pattern": NAME when a
 * pattern owns them (a new reference); all null for a collection without
 * rules or a missing one.  Always read from the store, never from a cache. */
int dtx_store_get_rules(dtx_store_t *st, const char *coll, json_t **out);


/* ---- accounts and two-phase transfers ------------------------------------
 *
 * Accounts live in the collection "accounts" as
 *   {_id, balance, min_balance, opening_balance, pending: [marker...]}
 * with int64 minor units; min_balance null means no limit (external or
 * settlement accounts).  Transfers live in "transfers" as
 *   {_id, from, to, amount, state, reason, owner, lease_until, epoch,
 *    created, updated}
 * and move through initiated -> preparing -> committed -> succeeded, or
 * preparing -> rolling_back -> failed (src/txn/transfer.c has the diagram
 * and the invariants).  Every function here is safe to call from many
 * threads and processes on one store at once. */

#define DTX_ACCOUNTS "accounts"
#define DTX_TRANSFERS "transfers"
/* One immutable record per account ever created, {_id, opening_balance,
 * at}: what lets the audit find an account that was deleted while it
 * still held money (docs/transfers.md, "Account registry"). */
#define DTX_OPENINGS "openings"

/* Paging of the list functions: the entries after the entry whose _id is
 * `after` (NULL: from the start), of those skip the first `skip`, then at
 * most `limit` (0: no limit).  A NULL page, or the zero value, means all.
 *
 * `after` is keyset paging: pass the _id of the last entry of the page
 * before, and the next page costs the same however deep it is (skip costs
 * the entries it skips).  It is the entry's place in the list's order that
 * counts: in a list by _id (accounts, locks) any id is a place and need not
 * exist; in a list in creation order (transfers, jobs, orders, ledger
 * entries) the entry `after` is read for its creation time, so it must
 * still exist (DTX_ENOTFOUND naming it otherwise), though it may have
 * changed state since.  Entries inserted behind the key are not seen;
 * every entry that stays in the list is listed once by paging to the end.
 * `after` is an id (1..128 of [A-Za-z0-9_.:-]): anything else is
 * DTX_EINVAL before anything is read.  Borrowed for the call only. */
typedef struct dtx_page {
  int64_t skip;      /* >= 0 */
  int64_t limit;     /* >= 0; 0 = no limit */
  const char *after; /* NULL: from the start; else an entry's _id */
} dtx_page_t;

/* How to create an account.  The zero value is the safe one: balance 0
 * and min_balance 0, so the account can never go negative. */
typedef struct dtx_account_opts {
  int64_t balance;     /* the opening balance */
  int64_t min_balance; /* the lowest balance a debit may leave; <= balance */
  int no_min_balance;  /* 1: no lower limit at all (external or settlement
                          accounts); min_balance is then ignored */
} dtx_account_opts_t;

/* The check every list function makes of page (NULL: fine) before it
 * reads anything: 0, or DTX_EINVAL for a negative skip or limit or an
 * after that is no id.  Needs no store, so a front door can refuse bad
 * paging before it opens one. */
int dtx_page_check(const dtx_page_t *page);

/* Creates an account (opts NULL: the zero value).  Unless no_min_balance,
 * balance must be >= min_balance (DTX_EINVAL).  An existing id, or the id
 * of an account that was closed (ids are never reused), is DTX_EDUPKEY.
 * The account and its opening record are two writes: an account whose
 * creator stopped between them is marked "unregistered" until
 * dtx_recover (or the next create's retry) records its opening.  *out
 * (may be NULL) receives the account. */
int dtx_account_create(dtx_store_t *st, const char *id,
                       const dtx_account_opts_t *opts, json_t **out);

/* The check dtx_account_create makes of id and opts before anything is
 * set up or written: 0 or DTX_EINVAL.  Needs no store (as
 * dtx_job_req_check), so a caller can refuse bad input before opening
 * one -- opening a SQLite path creates it. */
int dtx_account_check(const char *id, const dtx_account_opts_t *opts);

/* Sets account id's lowest balance a debit may leave: opts->min_balance,
 * or none with opts->no_min_balance (opts NULL: min_balance 0;
 * opts->balance is not read).  One conditional step: a limit is set only
 * when the account's balance meets it, else DTX_EINSUFFICIENT naming the
 * balance and the limit, nothing changed; no limit is always set.  This is
 * how a limit changes: a plain write of min_balance is refused
 * (docs/transfers.md, "What a plain write may change").  DTX_ENOACCOUNT
 * when there is no such account.  *out (may be NULL; NULL on error)
 * receives the account afterwards. */
int dtx_account_limit(dtx_store_t *st, const char *id,
                      const dtx_account_opts_t *opts, json_t **out);

/* *out: the account, or DTX_ENOACCOUNT. */
int dtx_account_get(dtx_store_t *st, const char *id, json_t **out);

/* *out: array of the accounts, by _id, paged by page (may be NULL). */
int dtx_account_list(dtx_store_t *st, const dtx_page_t *page, json_t **out);

typedef struct dtx_transfer_req {
  const char *id;   /* NULL: generated.  Else 1..128 of [A-Za-z0-9_.:-] */
  const char *from; /* payer account id */
  const char *to;   /* payee account id, != from */
  int64_t amount;   /* > 0 */
} dtx_transfer_req_t;

/* Deadlines.  Every call below runs under ONE wall-time budget, however
 * many store operations it makes: deadline_ms when given, else the
 * store's own retry window, counted once for the whole call (Redis: the
 * URI's retry_ms; SQLite: its busy timeout of 5 minutes), not once per
 * operation.  A request already in flight when the budget runs out may
 * still take its socket timeout (Redis timeout_ms).  A call cut short
 * fails with DTX_EUNAVAILABLE, and the detail says what it was waiting
 * for; whatever it left half done is finished by dtx_recover.  A
 * deadline_ms of any size up to INT64_MAX is a budget: too large for the
 * clock, it saturates ("no deadline in practice"), never wraps into the
 * past.  docs/deadlines.md lists the rule of every duration. */

typedef struct dtx_exec_opts {
  const char *owner; /* executor name recorded in the transfer; NULL:
                        host:pid; else 1..128 of [A-Za-z0-9_.:@#-] ("" is
                        DTX_EINVAL, as on every call that takes an owner,
                        and nothing is written) */
  int64_t lease_ms;  /* how long a claim is exclusive; 0: 30000 */
  int64_t deadline_ms; /* budget of the whole call; 0: see "Deadlines" */
} dtx_exec_opts_t;

/* Records a transfer in state initiated (after checking the arguments and
 * that both accounts exist: DTX_EINVAL / DTX_ENOACCOUNT record nothing).
 * Submitting an existing id with the same from/to/amount returns the
 * existing transfer (so a retry applies it at most once); with different
 * parameters it is DTX_ECONFLICT.  *out receives the transfer document. */
int dtx_transfer_submit(dtx_store_t *st, const dtx_transfer_req_t *req,
                        json_t **out);

/* Drives transfer id to a terminal state if it can be claimed (initiated),
 * or finishes it (committed, rolling_back); *out receives the document as
 * it stands afterwards.  Returns 0 whatever the outcome (see "state" and
 * "reason"), or an error when a store step kept failing, in which case the
 * transfer is left for recovery.  opts may be NULL. */
int dtx_transfer_run(dtx_store_t *st, const char *id,
                     const dtx_exec_opts_t *opts, json_t **out);

/* dtx_transfer_submit then dtx_transfer_run. */
int dtx_transfer_execute(dtx_store_t *st, const dtx_transfer_req_t *req,
                         const dtx_exec_opts_t *opts, json_t **out);

/* The checks dtx_transfer_submit and _execute make of a request before
 * anything is recorded (ids, amount > 0, from != to), without a store:
 * 0 or DTX_EINVAL with a detail.  For a caller that checks all its
 * requests before running any (doctx transfer batch). */
int dtx_transfer_req_check(const dtx_transfer_req_t *req);

/* The outcome of one transfer of dtx_transfer_execute_many, in the
 * caller's array.  Pointers are freed by dtx_transfer_results_clear. */
typedef struct dtx_transfer_result {
  int rc;       /* 0 or DTX_E*: what dtx_transfer_execute returns for this
                   request alone (0 for a declined transfer: state failed) */
  char *detail; /* malloc'd error detail, NULL when rc == 0 */
  json_t *tx;   /* the transfer document, as dtx_transfer_execute's *out
                   (NULL where it would be NULL) */
} dtx_transfer_result_t;

/* Runs the n transfers of reqs (borrowed for the call) as
 * dtx_transfer_execute runs each alone -- same checks, states, rc and
 * detail per transfer, same idempotency (an existing id with the same
 * parameters is returned and driven, with others DTX_ECONFLICT; an id
 * twice in reqs is that too for the later one) -- but the same step of
 * all of them goes to the store as one bulk write per round: one find of
 * all their accounts, one insert of all transfers, one batch of debits
 * and payee marks, of commits, of clears and credits, of finishes (6
 * round trips for n transfers).  A transfer that leaves this lockstep (a
 * decline, a missing account, an id that exists, an error) is driven on
 * alone from where it stands, without holding up the others; two
 * transfers of one payer are two independent conditional debits, and the
 * one the funds do not cover fails alone.  Transfers of one batch may
 * complete in any order.  opts (may be NULL) as for dtx_transfer_execute:
 * one executor, and ONE deadline for the whole call.
 * results[i] (caller's array of n) receives transfer i's outcome, set in
 * every case; release it with dtx_transfer_results_clear().  Returns 0
 * when every rc is 0, else the first failure's rc with the detail
 * "K of N transfers failed; first: #i: ...".  st, reqs or results NULL is
 * DTX_EINVAL (every result set to it when results is given), nothing run;
 * n == 0 is a no-op. */
int dtx_transfer_execute_many(dtx_store_t *st, const dtx_transfer_req_t *reqs,
                              size_t n, const dtx_exec_opts_t *opts,
                              dtx_transfer_result_t *results);
/* Frees the pointers of results[0..n) and zeroes them. */
void dtx_transfer_results_clear(dtx_transfer_result_t *results, size_t n);

/* *out: the transfer, or DTX_ENOTFOUND. */
int dtx_transfer_get(dtx_store_t *st, const char *id, json_t **out);

/* *out: array of transfers (in creation order), all or of one state
 * (NULL: all), paged by page (may be NULL). */
int dtx_transfer_list(dtx_store_t *st, const char *state,
                      const dtx_page_t *page, json_t **out);

/* Cancels a transfer that has not committed: it is rolled back and ends
 * failed with reason "canceled"; a running executor is fenced off.  After
 * commit it is DTX_ESTATE (make a reverse transfer instead); an unknown id
 * is DTX_ENOTFOUND.  *out receives the final document. */
int dtx_transfer_cancel(dtx_store_t *st, const char *id, json_t **out);

typedef struct dtx_worker_opts {
  int threads;       /* 0: 1 */
  int once;          /* process everything due, then return */
  int64_t lease_ms;  /* 0: 30000 */
  const char *owner; /* NULL: host:pid; else 1..128 of [A-Za-z0-9_.:@#-]
                        (DTX_EINVAL before anything runs) */
  volatile int *stop; /* set to non-zero to make the workers return */
  int64_t deadline_ms; /* budget of each item; 0: see "Deadlines" */
  int batch; /* the most items a thread claims and drives together, for a
                pattern with a batched path (transfers): 0: 16; 1: one at
                a time; at most 256 */
} dtx_worker_opts_t;

/* Runs executors that claim the due work of every pattern (initiated
 * transfers, ...) and also recover abandoned work (lease expired).
 * Returns when once is set and nothing is due, or when *stop becomes
 * non-zero.  With once, an error -- the store could not be reached
 * within the deadline, or an item failed and was left for recovery -- is
 * returned (the first one, with its detail); without once the workers
 * keep serving and only count errors.  *summary (may be NULL) receives,
 * per pattern, what ran, what the last recovery pass left alone and why,
 * and what failed:
 *   {"ok": bool, "patterns": {"transfer": {"ran": {"succeeded": n, ...},
 *     "skipped": {WHY: {"count": n, "ids": [...]}},
 *     "errors": {"count": n, "first": [{"id","error","detail"}...]}}}} */
int dtx_worker_run(dtx_store_t *st, const dtx_worker_opts_t *opts,
                   json_t **summary);

/* The check dtx_worker_run makes of opts (NULL: the defaults) before it
 * runs: 0, or DTX_EINVAL naming the field (threads and batch at most 256,
 * the owner's name).  Needs no store, as dtx_job_req_check. */
int dtx_worker_opts_check(const dtx_worker_opts_t *opts);

typedef struct dtx_recover_opts {
  int64_t older_than_ms; /* a transfer not updated for this long is
                            abandoned; < 0: only when its lease expired */
  int64_t tombstone_ttl_ms; /* tombstones older than this are cleared;
                               0: 24 hours */
  int64_t deadline_ms; /* budget of the whole pass; 0: see "Deadlines" */
  int64_t retention_ms; /* succeeded jobs finished longer ago than this
                           are purged (in batches); 0: 24 hours */
  /* job events (docs/jobs.md, "Events"): log entries older than this are
   * trimmed (0: 24 hours), and those more than events_keep behind their
   * queue's newest (0: no count bound); a queue's newest is kept. */
  int64_t events_keep_ms;
  int64_t events_keep;
  int64_t keep_dead_ms; /* dead and canceled jobs finished longer ago
                           than this, their effect markers cleared, are
                           purged (in batches, every queue); 0: kept
                           (docs/jobs.md, "Retention") */
} dtx_recover_opts_t;

/* One recovery pass of every pattern: for transfers, abandoned preparing
 * ones roll back; committed and rolling_back ones are finished; abandoned
 * initiated ones are executed; account markers whose transfer is terminal
 * or missing are repaired.  *summary (may be NULL) receives, in the shape
 * dtx_worker_run's has, what ran ("rolled_back", "finished", "executed",
 * "markers_repaired", "tombstones_cleared"), what was left alone and why
 * (a lease not expired, ...) and what failed; it is set on an error too.
 * Returns the first error, or 0. */
int dtx_recover(dtx_store_t *st, const dtx_recover_opts_t *opts,
                json_t **summary);

/* dtx_audit flags. */
#define DTX_AUDIT_SETTLED 1 /* also require every transfer to be terminal */

/* Runs every pattern's audit.  For transfers it checks conservation
 * (balances + money in flight == opening total), no balance below its
 * limit, each balance against its transfers, no dangling marker, transfer
 * states agreeing with markers.  It may run at any time: items that move
 * while it reads are counted as "unsettled" and left to a later audit.
 * *report receives
 *   {"ok": bool, "findings": [{"pattern","kind","detail"}...],
 *    "unsettled": n, "patterns": {NAME: {"summary": "one line", ...}},
 *    ...the transfer pattern's counts, also at the top level}.
 * Returns 0 when clean, DTX_EAUDIT when any invariant is broken, or
 * another error (then *report is NULL): only a store that keeps failing.
 * One bad document never stops it: a pattern's audit that stops at a
 * document or name it cannot judge is a finding ("audit_error"), and the
 * other patterns are audited all the same. */
int dtx_audit(dtx_store_t *st, int flags, json_t **report);

/* dtx_audit, and also the client's record of acknowledged transfers
 * against the store.  A store may lose a consistent set of recent writes
 * (a Redis failover to a replica that lacked them) and still pass every
 * invariant; what the client was told shows the loss.  acked (borrowed,
 * may be NULL) is a JSON array of transfer documents as
 * dtx_transfer_execute/submit/get returned them; _id, from, to, amount
 * and state are read.  Each must be in the store with the same from, to
 * and amount, in its acknowledged state or one it can reach (a terminal
 * state exactly); otherwise a finding "acked_lost", "acked_mismatch" or
 * "acked_regressed".  The report adds "acked" and "acked_lost" counts. */
int dtx_audit_acked(dtx_store_t *st, int flags, const json_t *acked,
                    json_t **report);

/* NULL-terminated list of every fault point name (static storage): each
 * pattern's ("transfer.debit", ...), then the store's ("redis.*").  The
 * text before the first '.' names the pattern or layer. */
const char *const *dtx_fault_points(void);

/* Reads and checks $DOCTX_FAULT now: DTX_EINVAL, with a detail, when it
 * is malformed or names a point dtx_fault_points() does not list.  (It is
 * otherwise read on first use, and a typo would inject nothing.) */
int dtx_fault_check(void);


/* ---- job queue ---------------------------------------------------------------
 *
 * A job is a document of the collection "jobs" (src/txn/jobq/job.c has
 * the state diagram and the invariants):
 *   {_id, queue, type, payload, state, priority, rank, run_at, attempts,
 *    max_attempts, backoff_ms, unique_key, unique_live, last_error,
 *    result, fx_colls, created, updated, finished, owner, lease_until,
 *    epoch}
 * States: ready (due), delayed (run_at in the future, including a
 * retry's backoff), running (claimed under a lease), succeeded, dead
 * (attempts exhausted) and canceled.  A worker claims the due job of its
 * queue with the highest priority, then the oldest run_at, in ONE
 * conditional update, and renews its lease while the handler runs.
 * Every write of a running job -- completing, failing, renewing, effects
 * -- is fenced by the claim's epoch, so a worker whose lease lapsed and
 * was taken over changes nothing.  A takeover counts as an attempt.
 * Times are wall-clock milliseconds. */

#define DTX_JOBS "jobs"

#define DTX_JOB_PRIORITY_MIN (-100)
#define DTX_JOB_PRIORITY_MAX 100
#define DTX_JOB_MAX_ATTEMPTS 5        /* default of dtx_job_req_t */
#define DTX_JOB_MAX_ATTEMPTS_LIMIT 1000000 /* the most max_attempts may be */
#define DTX_JOB_BACKOFF_MS 1000       /* default first backoff */
#define DTX_JOB_BATCH 16              /* default of dtx_job_work_opts_t */
#define DTX_JOB_BACKOFF_CAP_MS 3600000 /* backoff never exceeds one hour */

typedef struct dtx_job_req {
  const char *queue;      /* 1..128 of [A-Za-z0-9_.:-] */
  const char *type;       /* 1..128 of [A-Za-z0-9_.:-] */
  const json_t *payload;  /* any JSON value (borrowed); NULL: null */
  const char *id;         /* NULL: generated; else as queue */
  int priority;           /* DTX_JOB_PRIORITY_MIN..MAX; higher runs first */
  int64_t delay_ms;       /* >= 0: run_at = now + delay_ms */
  int max_attempts;       /* 1..DTX_JOB_MAX_ATTEMPTS_LIMIT; 0:
                             DTX_JOB_MAX_ATTEMPTS */
  int64_t backoff_ms;     /* >= 1; 0: DTX_JOB_BACKOFF_MS */
  const char *unique_key; /* NULL: none; else 1..256 bytes */
  int64_t unique_for_ms;  /* >= 0, with unique_key: the key stays held
                             this long after the job ends too (past
                             ~292 million years: saturated); 0: freed
                             when it ends (docs/jobs.md, "Uniqueness") */
} dtx_job_req_t;

/* Records a job (ready, or delayed when delay_ms > 0).  Bad input is
 * DTX_EINVAL and records nothing.  An existing id with the same queue,
 * type and payload returns that job (so a retried add records at most
 * one); with anything else it is DTX_ECONFLICT.  With unique_key, while
 * a non-terminal job of the same queue holds that key (the store's
 * unique index enforces it across processes) -- or, with unique_for_ms,
 * a job of the queue that ended less than its unique_for_ms ago -- that
 * job is returned and nothing is recorded.  *out receives the job; *added (may be NULL) is 1
 * when this call recorded it, 0 when it returned an existing one. */
int dtx_job_add(dtx_store_t *st, const dtx_job_req_t *req, json_t **out,
                int *added);

/* The check dtx_job_add makes of req before it writes (0 or DTX_EINVAL
 * naming the field), without a store: a caller can refuse a bad request
 * before it opens (and so creates) one, as doctx job add does. */
int dtx_job_req_check(const dtx_job_req_t *req);

/* *out: the job, or DTX_ENOTFOUND. */
int dtx_job_get(dtx_store_t *st, const char *id, json_t **out);

/* *out: array of jobs of queue (NULL: all) in state (NULL: all; else one
 * of the eight states -- the six above, and a flow's waiting and held --,
 * DTX_EINVAL otherwise), in creation order, paged by page (may be
 * NULL). */
int dtx_job_list(dtx_store_t *st, const char *queue, const char *state,
                 const dtx_page_t *page, json_t **out);

/* *out: {"ready": n, "delayed": n, "running": n, "succeeded": n,
 * "dead": n, "canceled": n, "waiting": n, "held": n, "total": n} for
 * queue (NULL: all); for one queue also "paused": bool and
 * "max_running": N or null (its settings, dtx_job_queue_pause,
 * dtx_job_queue_set). */
int dtx_job_stats(dtx_store_t *st, const char *queue, json_t **out);

/* Cancels a ready or delayed job (-> canceled; its unique key is free
 * again).  On a running job it records the request (cancel_requested;
 * the job stays running): its holder ends the attempt canceled -- never
 * succeeded, never retried -- at its next heartbeat, or at its complete
 * or fail; recovery ends a lapsed one canceled (docs/jobs.md, "Canceling
 * a running job").  A canceled job, or a running one whose cancel is
 * recorded, is returned as it is; succeeded and dead ones are DTX_ESTATE;
 * an unknown id DTX_ENOTFOUND.  *out: the job. */
int dtx_job_cancel(dtx_store_t *st, const char *id, json_t **out);

/* Retries a dead job by hand: -> ready with attempts 0.  DTX_ESTATE for
 * any other state, or when recovery has already cleared the job's effect
 * markers (its effects could then apply twice: add a new job instead);
 * DTX_ECONFLICT when another live job holds its unique key. */
int dtx_job_retry(dtx_store_t *st, const char *id, json_t **out);

/* The attempt a handler runs in: opaque, valid only during the call. */
typedef struct dtx_job_run dtx_job_run_t;

/* A handler runs one attempt of job (borrowed; its _id, epoch, payload).
 * Return 0 for success (the job succeeds, with the result set by
 * dtx_job_result) or non-zero for failure (retried with backoff, or dead
 * after max_attempts; the message set by dtx_job_fail is kept as
 * last_error).  It may be called from several threads at once. */
typedef int (*dtx_job_handler_fn)(dtx_job_run_t *run, const json_t *job,
                                  void *arg);

typedef struct dtx_job_handler {
  const char *type; /* the job type it runs; NULL: every type */
  dtx_job_handler_fn fn;
  void *arg;        /* passed to fn */
} dtx_job_handler_t;

/* The one way a handler changes other documents: applies update (an
 * operator update, borrowed) to one document of coll matching filter
 * (borrowed) -- the first match when the effect (job, key) is first
 * applied, which the job then pins -- at most once per (job, key) over
 * every document of coll, every attempt and every process, paused ones
 * included (docs/jobs.md, "Effects: exactly once").  A marker {job, key,
 * at} in the target's "dtx_fx" array is checked and added in the same
 * atomic step; the job must be running at this attempt's epoch with its
 * lease not over (DTX_ESTALE otherwise, nothing written), and the store
 * refuses the write (DTX_ESTALE) once its own clock is past that lease's
 * end.  *applied: 1 the first time, 0 on any repeat, whatever filter says
 * of the pinned document then (both return 0); DTX_ENOMATCH when no
 * document matches (nothing written), or when the pinned document was
 * deleted or no longer matches and no other does; DTX_ECONFLICT when the
 * key was pinned in another collection.  key: 1..128 of
 * [A-Za-z0-9_.:-].  The first effect on a collection creates the index
 * {"dtx_fx.job": 1} there.  Markers are cleared by dtx_recover once the
 * job is terminal, tombstone_ttl_ms has passed and the store's clock is
 * past every bound an effect's write carried (the job's fx_until) plus
 * 1 s. */
int dtx_job_effect(dtx_job_run_t *run, const char *key, const char *coll,
                   const json_t *filter, const json_t *update, int *applied);

/* dtx_job_effect for a handler in another process (doctx job effect):
 * the attempt is named by the job id and its epoch. */
int dtx_job_effect_at(dtx_store_t *st, const char *job_id, int64_t epoch,
                      const char *key, const char *coll, const json_t *filter,
                      const json_t *update, int *applied);

/* An effect's options.  fence_name (NULL for none) and fence_token make
 * the effect a fenced write (see "fenced writes" above): the handler holds
 * that lease lock, and the target refuses the effect with DTX_EFENCED,
 * changing nothing, once a larger token of the lock has written it -- so a
 * handler that kept running after its lock lapsed cannot overwrite the
 * next holder's work.  Strings are borrowed for the call. */
typedef struct dtx_job_effect_opts {
  const char *fence_name;
  int64_t fence_token;
} dtx_job_effect_opts_t;

/* The checks an effect makes of its arguments before anything is read,
 * set up or written (ids, collection, filter, update, epoch, fence): 0 or
 * the error the call would return.  Needs no store. */
int dtx_job_effect_check(const char *job_id, int64_t epoch, const char *key,
                         const char *coll, const json_t *filter,
                         const json_t *update,
                         const dtx_job_effect_opts_t *opts);

/* dtx_job_effect and dtx_job_effect_at with options (opts may be NULL). */
int dtx_job_effect_ex(dtx_job_run_t *run, const char *key, const char *coll,
                      const json_t *filter, const json_t *update,
                      const dtx_job_effect_opts_t *opts, int *applied);
int dtx_job_effect_at_ex(dtx_store_t *st, const char *job_id, int64_t epoch,
                         const char *key, const char *coll,
                         const json_t *filter, const json_t *update,
                         const dtx_job_effect_opts_t *opts, int *applied);

/* Sets the result the job keeps when the handler succeeds (copied). */
void dtx_job_result(dtx_job_run_t *run, const json_t *result);
/* Sets the message kept as last_error when the handler fails (copied). */
void dtx_job_fail(dtx_job_run_t *run, const char *message);
/* 1 while the attempt may go on: its lease is held and --timeout-ms has
 * not passed.  A long handler should stop when it turns 0. */
int dtx_job_alive(const dtx_job_run_t *run);
/* The store the attempt runs on (borrowed). */
dtx_store_t *dtx_job_store(const dtx_job_run_t *run);

/* A built-in handler: runs cmd (a const char *, passed as arg) with
 * /bin/sh -c, the job's JSON on its stdin and DOCTX_JOB_ID,
 * DOCTX_JOB_EPOCH and DOCTX_STORE (the store URI) in its environment.
 * Exit 0 succeeds, with stdout as the result when it is JSON; any other
 * exit fails, with (the end of) stderr as the error.  The command is
 * killed (its process group) when the attempt stops being alive: its
 * lease was lost, or the timeout passed.  A command that exits without
 * reading its stdin makes the write fail with EPIPE: the process should
 * ignore SIGPIPE (doctx job work does). */
int dtx_job_exec(dtx_job_run_t *run, const json_t *job, void *cmd);

typedef struct dtx_job_work_opts {
  const char *queue;                  /* required */
  const dtx_job_handler_t *handlers;  /* required: nhandlers entries; the
                                         first whose type matches runs */
  size_t nhandlers;
  int threads;         /* 0: 1; at most 256 */
  int once;            /* process everything due, then return */
  int64_t lease_ms;    /* 0: 30000; renewed every third of it */
  int64_t timeout_ms;  /* a handler's time; 0: 300000 */
  const char *owner;   /* NULL: host:pid; else 1..128 of [A-Za-z0-9_.:@#-]
                          (DTX_EINVAL before anything runs) */
  volatile int *stop;  /* set non-zero to make the workers return */
  int64_t deadline_ms; /* budget of each job's store steps; 0: see
                          "Deadlines" */
  int batch;           /* the most jobs a thread claims in one round (one
                          find, one bulk write of claims), 1..256; 0:
                          DTX_JOB_BATCH.  A thread claims fewer while its
                          jobs are slow (what it starts within ~100 ms),
                          renews the lease of every job it holds, and runs
                          them one after another in priority order */
} dtx_job_work_opts_t;

/* Runs workers that claim the due jobs of opts->queue whose types have a
 * handler, run them and record the outcome, and now and then run the job
 * pattern's recovery (stalled jobs, due delayed jobs, markers, retention).
 * Returns when once is set and nothing is due, or when *stop is set (a
 * thread first runs the jobs it has claimed: at most its batch).
 * *summary (may be NULL) receives
 *   {"ok": bool, "queue": Q, "ran": {"succeeded": n, "retried": n,
 *    "dead": n, "fenced": n}, "errors": {...}}
 * ("fenced": attempts whose lease was taken over; they changed nothing).
 * With once, the first store error is returned; otherwise errors are
 * counted. */
int dtx_job_work(dtx_store_t *st, const dtx_job_work_opts_t *opts,
                 json_t **summary);

/* The check dtx_job_work makes of opts before it runs: 0, or DTX_EINVAL
 * naming the field (the queue, the handlers, threads and batch at most
 * 256, lease and timeout >= 0, the owner's name).  Needs no store, as
 * dtx_job_req_check. */
int dtx_job_work_opts_check(const dtx_job_work_opts_t *opts);

/* ---- remote workers (src/txn/jobq/remote.c, docs/jobs.md "Remote
 * workers") ----
 *
 * A handler in another process (a Python or Node worker behind doctxd,
 * a shell script behind the CLI) runs the runner's protocol one call at a
 * time, on the same steps and fault points: claim with a lease, renew it
 * every third of it, then end the attempt with ONE of complete or fail,
 * each fenced by the claim's epoch (J1: after a takeover the old epoch's
 * calls are DTX_ESTALE and change nothing).  Effects: dtx_job_effect_at.
 * Strings and JSON arguments are borrowed for the call; every *out is a
 * new reference the caller owns (json_decref), NULL on an error. */

/* Claims up to n (1..256; 0: 1) due jobs of queue, highest priority then
 * oldest run_at first, each under a lease of lease_ms (0: 30000; past
 * 366 days: that) held by owner (NULL: host:pid; else as
 * dtx_job_work_opts_t's owner).  When none is ready, due delayed jobs are
 * made ready first.  *out: an array of the jobs won, each running at its
 * new "epoch" (the fence of its heartbeat, effects and outcome) with its
 * "lease_until"; [] when nothing is due (0).  Jobs of every type. */
int dtx_job_claim(dtx_store_t *st, const char *queue, int n, int64_t lease_ms,
                  const char *owner, json_t **out);

/* Renews the lease of job id's attempt at epoch to now + lease_ms (0:
 * 30000) while the job runs at that epoch: DTX_ESTALE otherwise (taken
 * over by recovery, canceled before, or ended), nothing written;
 * DTX_ESTATE once a cancel of the job was requested (dtx_job_cancel),
 * *out then the job: stop, and end the attempt with dtx_job_complete or
 * dtx_job_fail_at, which end it canceled; DTX_ENOTFOUND for an unknown
 * id.  *out (may be NULL): the job. */
int dtx_job_heartbeat(dtx_store_t *st, const char *id, int64_t epoch,
                      int64_t lease_ms, json_t **out);

/* Ends job id's attempt at epoch: complete -> succeeded with result
 * (NULL: null; one the store cannot keep is kept in its marked text form,
 * docs/jobs.md "Results"); fail_at -> delayed with backoff, or dead when
 * its attempts are used up, error (NULL: none) kept as last_error.  Once
 * a cancel of the job was requested, either ends it canceled instead
 * (0, *out the job, state canceled, no result kept).  Each
 * at most once: a stale epoch or a lapsed lease taken over by recovery is
 * DTX_ESTALE and changes nothing.  The same call repeated after a lost
 * reply (the job already ended by that epoch's own outcome: succeeded,
 * or delayed/dead with the same error) answers 0 and the job again,
 * writing nothing.  DTX_ENOTFOUND for an unknown id.  *out (may be
 * NULL): the job afterwards.  (dtx_job_fail, without _at, is the
 * in-process handler's message setter.) */
int dtx_job_complete(dtx_store_t *st, const char *id, int64_t epoch,
                     const json_t *result, json_t **out);
int dtx_job_fail_at(dtx_store_t *st, const char *id, int64_t epoch,
                    const char *error, json_t **out);

/* The checks these calls make of their arguments before the store is
 * touched (0, or DTX_EINVAL naming the argument), so a front door can
 * refuse bad input before it opens, and so creates, a store: the queue
 * and owner names, n 0..256, lease_ms >= 0; the job id, epoch >= 1, an
 * error of valid UTF-8 of at most 16 KiB (result: any JSON value). */
int dtx_job_claim_check(const char *queue, int n, int64_t lease_ms,
                        const char *owner);
int dtx_job_heartbeat_check(const char *id, int64_t epoch, int64_t lease_ms);
int dtx_job_end_check(const char *id, int64_t epoch, const json_t *result,
                      const char *error);

/* ---- job events (src/txn/jobq/events.c, docs/jobs.md "Events") -----------
 *
 * Every transition of every job (added, claimed, succeeded, failed, dead,
 * stalled, promoted, canceled, retried, and what other steps record) is
 * recorded once, by the step that makes it, in an outbox inside the job,
 * then relayed into the log DTX_JOB_EVENTS, one document per event:
 *   {_id: "QUEUE/SEQ", queue, seq, job, born, n, event, at, epoch, from, to
 *    [, data]}
 * seq is dense per queue (1, 2, 3, ...; only a trimmed prefix is gone);
 * n is dense per job (born: the job's created time, so a job purged and
 * added again under its id is told apart).  Plain writes may not
 * insert, change or delete it. */
#define DTX_JOB_EVENTS "job_events"
#define DTX_JOB_EVENTS_LIMIT_MAX 1000
#define DTX_JOB_EVENTS_WAIT_MAX_MS 30000

/* The check of dtx_job_events' arguments, before a store is opened:
 * the queue name, after >= 0, limit 0..DTX_JOB_EVENTS_LIMIT_MAX, wait_ms
 * 0..DTX_JOB_EVENTS_WAIT_MAX_MS.  0 or DTX_EINVAL naming the argument. */
int dtx_job_events_check(const char *queue, int64_t after, int64_t limit,
                         int64_t wait_ms);

/* The events of queue after cursor `after` (0: from the start), at most
 * limit (0: 100), oldest first, in *out (a new array; NULL on error) of
 * {cursor, job, n, event, at, epoch, from, to [, data]}: read from
 * `after` = the last cursor seen to go on without loss.  Events still in
 * jobs' outboxes are relayed first.  wait_ms > 0: when there is none yet,
 * polls until one comes or wait_ms passes (then an empty array).
 * DTX_ESTATE when the events right after `after` were trimmed (the
 * detail names the oldest cursor kept): a reader is never moved past a
 * gap silently. */
int dtx_job_events(dtx_store_t *st, const char *queue, int64_t after,
                   int64_t limit, int64_t wait_ms, json_t **out);
/* ---- job queues: the rate limit (src/txn/jobq/rate.c, docs/jobs.md
 * "Rate limits") ----------------------------------------------------------
 *
 * A queue's rate (dtx_job_queue_opts_t.set_rate): at most n claims per
 * fixed window of ms ms, per queue or, with a group path, per value of
 * the job at that path (e.g. "payload.customer"; a job without one is in
 * the group null).  Each group's window is a document of "job_rates"
 * (_id QUEUE/KEY) whose count a claim raises by one conditional update
 * before it claims; windows are anchored at the group's first claim and
 * follow on its grid.  A group over its rate is skipped: the jobs of
 * other groups are claimed. */

#define DTX_JOB_RATES "job_rates"
#define DTX_JOB_RATE_N_MAX 1000000        /* the most claims per window */
#define DTX_JOB_RATE_MS_MAX 86400000LL    /* the longest window (a day) */

/* Parses "N/MS" (whole numbers, N 1..DTX_JOB_RATE_N_MAX, MS
 * 1..DTX_JOB_RATE_MS_MAX) into *n and *ms: 0 or DTX_EINVAL. */
int dtx_job_rate_parse(const char *text, int64_t *n, int64_t *ms);
/* The check of a rate: n, ms as above; group NULL (the whole queue) or a
 * dotted path of [A-Za-z0-9_-] names, 1..128 characters. */
int dtx_job_rate_check(int64_t n, int64_t ms, const char *group);

/* ---- Job flows: parent and child jobs (docs/jobs.md, "Flows") ---- */

#define DTX_JOB_CHILDREN_MAX 1000 /* the most children one parent records */

typedef struct dtx_job_flow {
  const char *parent;        /* NULL: none; else the id of the job this one
                                is a child of (it must exist and never
                                have been claimed) */
  const char *on_child_fail; /* this job's policy as a parent: NULL or
                                "fail" (a dead, canceled or missing child
                                makes it dead), or "hold" (it waits until
                                the child is retried and succeeds) */
} dtx_job_flow_t;

/* dtx_job_req_check and the flow's fields (flow may be NULL), without a
 * store: DTX_EINVAL naming the field. */
int dtx_job_flow_check(const dtx_job_req_t *req, const dtx_job_flow_t *flow);

/* dtx_job_add with a flow (flow NULL: dtx_job_add).  With a parent, the
 * job is a child: the parent (state "waiting" until every child it
 * recorded succeeded) runs once, after them, its handler seeing
 * "children": [{id, state, result}].  DTX_ENOTFOUND: no such parent;
 * DTX_ESTATE: the parent was claimed already (or has
 * DTX_JOB_CHILDREN_MAX children) -- nothing is left recorded;
 * DTX_ECONFLICT: the id is another job's (another parent included). */
int dtx_job_add_flow(dtx_store_t *st, const dtx_job_req_t *req,
                     const dtx_job_flow_t *flow, json_t **out, int *added);
/* ---- job schedules (src/txn/jobq/sched.c, docs/jobs.md "Schedules") -------
 *
 * A schedule is a document of "job_schedules", _id = its name, that makes
 * one job of its queue per tick: a five-field cron in UTC (ticks on whole
 * minutes) or every every_ms (ticks at the multiples of every_ms since the
 * epoch).  Any number of tickers (every `job work` of the queue, `job
 * scheduler`) may run at once: a tick's job has the deterministic _id
 * "sched:NAME:GEN:TICK", so racing tickers insert one job, and the
 * schedule's next tick advances by an update fenced by {gen, next_at}.
 * Replacing a schedule bumps gen (its next tick is the first after the
 * change); removing it leaves a tombstone (state "removed"): at most the
 * one tick due before the change and in flight at it still gets its job.
 * A tick more than grace_ms late is missed: "run-once" makes one job for
 * a run of missed ticks (its "sched.last" names the last), "skip" none
 * (the schedule records the run in "skipped"). */
#define DTX_JOB_SCHEDULES "job_schedules"
#define DTX_JOB_SCHED_MIN_EVERY_MS 10
#define DTX_JOB_SCHED_HORIZON_MS (5LL * 365 * 24 * 3600 * 1000) /* 5 years */
#define DTX_JOB_SCHED_GRACE_MS 60000 /* default of grace_ms */

typedef struct dtx_job_sched_req {
  const char *name;      /* 1..64 of [A-Za-z0-9_.:-] */
  const char *queue;     /* the jobs' queue, type and payload (borrowed) */
  const char *type;
  const json_t *payload; /* NULL: null */
  const char *cron;      /* five fields, UTC; or NULL and every_ms */
  int64_t every_ms;      /* DTX_JOB_SCHED_MIN_EVERY_MS..5 years; 0 with cron */
  const char *missed;    /* "run-once" (NULL) or "skip" */
  int64_t grace_ms;      /* 0: DTX_JOB_SCHED_GRACE_MS; at most one day */
  int priority;          /* as dtx_job_req_t */
  int max_attempts;
  int64_t backoff_ms;
} dtx_job_sched_req_t;

/* The check dtx_job_schedule makes before it writes: 0, or DTX_EINVAL
 * naming the field (a cron's field; a cron that does not fire within 5
 * years from now, Feb 30 say; every_ms out of range).  Needs no store. */
int dtx_job_sched_check(const dtx_job_sched_req_t *req);

/* Adds the schedule, or replaces the one of that name (gen + 1; a removed
 * one comes back).  Its first tick is the first after now.  *out: the
 * schedule document. */
int dtx_job_schedule(dtx_store_t *st, const dtx_job_sched_req_t *req,
                     json_t **out);

/* *out: array of the active schedules of queue (NULL: all) by name, each
 * with gen, next_at (the next tick), last_tick (the last tick enqueued,
 * null before the first) and skipped. */
int dtx_job_schedules(dtx_store_t *st, const char *queue, json_t **out);

/* Removes schedule name: its tombstone stays (state "removed", gen + 1),
 * so no ticker enqueues for it afterwards but the one tick in flight.
 * DTX_ENOTFOUND when there is no active one.  *out: the tombstone. */
int dtx_job_unschedule(dtx_store_t *st, const char *name, json_t **out);

typedef struct dtx_job_scheduler_opts {
  const char *queue;    /* NULL: the schedules of every queue */
  int once;             /* one round: every due tick, then return */
  volatile int *stop;   /* set non-zero to make it return */
  int64_t poll_ms;      /* the pause between rounds; 0: 100 */
  int64_t deadline_ms;  /* budget of each round's store steps; 0: see
                           "Deadlines" */
} dtx_job_scheduler_opts_t;

/* Ticks the schedules of opts->queue, only (no jobs are run): enqueues
 * each due tick's job and advances the schedule.  *summary (may be NULL):
 *   {"ok", "queue", "enqueued": n, "missed": n, "skipped": n,
 *    "fenced": n (ticks another ticker advanced first), "errors": {...}}
 * With once, the first store error is returned. */
int dtx_job_scheduler(dtx_store_t *st, const dtx_job_scheduler_opts_t *opts,
                      json_t **summary);

/* The check dtx_job_scheduler makes of opts (the queue name, poll_ms
 * 0..60000, deadline_ms >= 0).  Needs no store. */
int dtx_job_scheduler_check(const dtx_job_scheduler_opts_t *opts);
/* ---- job queues: pause and resume (src/txn/jobq/queues.c, docs/jobs.md
 * "Pause and resume") ----------------------------------------------------
 *
 * A queue's settings are one document of "job_queues", _id = the queue:
 * {_id, paused, gen, updated}; only these calls write it (a plain write,
 * insert or delete of it is refused).  A paused queue's workers claim
 * nothing; its running jobs finish. */

#define DTX_JOB_QUEUES "job_queues"
/* How old a worker's view of a queue's settings may be: a pause returns
 * only after this long, and from then on no claim round starts. */
#define DTX_JOB_QUEUE_TTL_MS 500

/* The check of a queue name (0 or DTX_EINVAL), before any store opens. */
int dtx_job_queue_check(const char *queue);

/* Pauses (paused 1) or resumes (0) queue.  A pause returns after
 * DTX_JOB_QUEUE_TTL_MS: from then on a claim lands only from a claim
 * round that started before (at most one batch per worker thread).
 * Pausing a paused queue is fine (gen grows).  *out: {queue, paused,
 * gen}. */
int dtx_job_queue_pause(dtx_store_t *st, const char *queue, int paused,
                        json_t **out);

/* *out: [{queue, paused, gen, max_running}] of every queue that has
 * settings, by name (max_running null when there is no limit). */
int dtx_job_queue_list(dtx_store_t *st, json_t **out);

/* ---- job queues: the concurrency limit (src/txn/jobq/limits.c,
 * docs/jobs.md "Queue limits") -------------------------------------------
 *
 * With max_running N, at most N jobs of the queue run at any instant,
 * whatever the number of workers and processes: each claim takes a
 * running slot of the queue's settings document first, in one
 * conditional update, and a slot comes back only once its job is no
 * longer running (ended, or taken over by recovery). */

#define DTX_JOB_MAX_RUNNING_LIMIT 256

typedef struct dtx_job_queue_opts {
  int set_max_running;  /* 1: change the limit (else DTX_EINVAL: nothing
                           to set) */
  int64_t max_running;  /* 1..DTX_JOB_MAX_RUNNING_LIMIT */
  int no_max_running;   /* 1: no limit (max_running ignored) */
  /* the rate limit (rate.c, "Rate limits" below the job API) */
  int set_rate;         /* 1: change the rate */
  int64_t rate_n;       /* claims per window: 1..DTX_JOB_RATE_N_MAX */
  int64_t rate_ms;      /* the window: 1..DTX_JOB_RATE_MS_MAX ms */
  const char *rate_group; /* NULL: per queue; else a path into the job */
  int no_rate;          /* 1: no rate (the others ignored) */
} dtx_job_queue_opts_t;

/* The checks of dtx_job_queue_set (0 or DTX_EINVAL), before any store. */
int dtx_job_queue_opts_check(const char *queue,
                             const dtx_job_queue_opts_t *opts);

/* Sets queue's limits; returns after DTX_JOB_QUEUE_TTL_MS, when every
 * claim round that starts reads them.  Jobs running already are not
 * counted.  *out: {queue, paused, gen, max_running, rate} (rate:
 * {n, ms[, group]} or null). */
int dtx_job_queue_set(dtx_store_t *st, const char *queue,
                      const dtx_job_queue_opts_t *opts, json_t **out);
/* ---- job progress (src/txn/jobq/remote.c, docs/jobs.md "Progress";
 * the cancel of a running job is dtx_job_cancel's, cancel.c) ----
 *
 * A running attempt's progress: any JSON value of at most 4096 bytes of
 * JSON text, kept as the job's "progress" (shown by dtx_job_get and
 * dtx_job_list) by ONE move fenced by the attempt's epoch (fault point
 * job.progress), which changes neither the state nor the epoch: a stale
 * epoch, or a job no longer running, is DTX_ESTALE and writes nothing;
 * DTX_ENOTFOUND for an unknown id.  *out (may be NULL): the job. */
int dtx_job_progress(dtx_store_t *st, const char *id, int64_t epoch,
                     const json_t *value, json_t **out);
/* The same from a handler, for the attempt run runs. */
int dtx_job_run_progress(dtx_job_run_t *run, const json_t *value);
/* dtx_job_progress's check before the store is touched: the id, epoch
 * >= 1, a value (not NULL) of at most 4096 bytes that a job can hold. */
int dtx_job_progress_check(const char *id, int64_t epoch,
                           const json_t *value);
/* ---- lease locks with fencing tokens (src/txn/lock/, docs/locks.md) --------
 *
 * A lock is a document of the collection "locks", _id = its name, never
 * deleted (its delete guard refuses) and whose token a plain update may
 * not lower (its transition rule), so its token never resets:
 *   {_id: NAME, owner: O|null, token: N, expires: ms, ttl: ms,
 *    acquired: ms, updated: ms, nonce: "...", _fence: {NAME: N}}
 * Renew and release are each ONE conditional update of it; acquire reads
 * it and makes ONE conditional update, fenced by its own name and new
 * token (so a lock deleted with bypass_validation leaves its newest token
 * in a fence tombstone), and the first acquire of a name first registers
 * it in "lock_names" and creates the lock free (docs/locks.md).
 * Acquire succeeds when the lock is free (released, or never taken) or its
 * lease lapsed (expires <= now, wall-clock ms of the acquiring client), and
 * returns a token one past both the stored one and the lock's own fence
 * record: strictly greater than every token issued before for that name,
 * across expiry, release, restarts and a deleted lock.
 * A lease alone does not give mutual exclusion (a holder paused past it
 * still believes it holds the lock): every protected write must carry the
 * token as a fence (fence_name = the lock's name, fence_token = the
 * token), and the store refuses the older holder (DTX_EFENCED).
 * Names are 1..128 of [A-Za-z0-9_.:-].  The lock's view, returned by every
 * call (*out, new reference, may be NULL):
 *   {"name", "owner", "token", "expires" (ms), "held": bool}
 * ("held": a live lease at the time of the call). */
typedef struct dtx_lock_opts {
  const char *owner;   /* recorded holder; NULL: host:pid; else 1..128 of
                          [A-Za-z0-9_.:@#-] ("" is DTX_EINVAL) */
  int64_t ttl_ms;      /* lease; 0: 30000 (renew: the lock's last ttl) */
  int64_t wait_ms;     /* acquire: wait up to this long while the lock is
                          held, polling with backoff; waiters are served
                          in arrival order, by ticket (docs/locks.md,
                          "Fair waiting"); 0: do not wait */
  int64_t deadline_ms; /* budget of the whole call (a wait included); 0: see
                          "Deadlines" */
  int64_t max;         /* acquire: holders allowed at once; 0 or 1: a lock
                          of one holder; 2..100: a semaphore (below) */
} dtx_lock_opts_t;

/* Takes lock name.  DTX_ENOMATCH, naming the holder, its token and how
 * long its lease runs, when it is held (after waiting wait_ms).  opts may
 * be NULL. */
int dtx_lock_acquire(dtx_store_t *st, const char *name,
                     const dtx_lock_opts_t *opts, json_t **out);

/* The check dtx_lock_acquire makes of name and opts before anything is
 * set up or written: 0 or DTX_EINVAL.  Needs no store. */
int dtx_lock_check(const char *name, const dtx_lock_opts_t *opts);

/* Extends the lease of token (expires = now + ttl) while it is the
 * current token and not released -- also after it lapsed, as long as no
 * one acquired since.  DTX_ENOMATCH when the token is no longer current;
 * DTX_ENOTFOUND when there is no such lock. */
int dtx_lock_renew(dtx_store_t *st, const char *name, int64_t token,
                   const dtx_lock_opts_t *opts, json_t **out);

/* Frees the lock, when token is its current token and not released yet
 * (the token itself is kept: the next acquire gets token + 1).
 * DTX_ENOMATCH when the token is no longer current; DTX_ENOTFOUND when
 * there is no such lock. */
int dtx_lock_release(dtx_store_t *st, const char *name, int64_t token,
                     json_t **out);

/* *out: the lock's view, or DTX_ENOTFOUND. */
int dtx_lock_get(dtx_store_t *st, const char *name, json_t **out);

/* *out: array of lock views by name, paged by page (may be NULL). */
int dtx_lock_list(dtx_store_t *st, const dtx_page_t *page, json_t **out);

/* ---- holding a lock: a keep-alive with a loss callback ---------------------
 * (src/txn/lock/hold.c, docs/locks.md "Holding a lock")
 *
 * dtx_lock_hold_start acquires NAME (as dtx_lock_acquire, opts alike:
 * ttl_ms 0 is 30000; wait_ms waits while another holds it; deadline_ms is
 * the acquire's budget) and starts a thread, the keeper, that renews the
 * lease every ttl/3 (dtx_lock_renew, each bounded by the lease's end).
 * The lock is LOST when a renewal fails (any error: the token no longer
 * current, the store unavailable, an injected fault) or when the lease
 * lapses -- measured on the monotonic clock from the START of the last
 * call that succeeded (the acquire, then each renew), so a paused process
 * counts its pause, and the keeper reports a loss no later than another
 * holder could take the lock (a process stopped as a whole cannot: the
 * next holder's fencing token refuses its writes).  Then on_lost(arg, rc)
 * (may be NULL) is called ONCE, on a thread of the library's (the hold's
 * keeper, which starts when the first renewal is due), with rc the
 * renew's error or DTX_ESTALE for a lapse (dtx_errdetail() on that thread
 * says which; DTX_ENOMEM: the keeper could not start), and the keeper
 * renews no more.  on_lost must return soon
 * and must not call dtx_lock_hold_stop (it would wait for its own thread);
 * it may call dtx_lock_hold_token and dtx_lock_hold_lost.  It is never
 * called once dtx_lock_hold_stop has begun.
 * Ownership: *out (NULL on error) belongs to the caller, who must end it
 * with dtx_lock_hold_stop exactly once, from any one thread; st must
 * outlive it.  On error nothing is held (a lock acquired before the keeper
 * failed to start is released).  Errors: those of dtx_lock_acquire
 * (DTX_ENOMATCH while held, DTX_EINVAL for bad name or opts: ttl_ms past
 * a year is refused, wait_ms and deadline_ms saturate, max above 1 -- a
 * semaphore -- is refused), DTX_ENOMEM. */
typedef struct dtx_lock_hold dtx_lock_hold_t;
typedef void (*dtx_lock_lost_fn)(void *arg, int rc);
int dtx_lock_hold_start(dtx_store_t *st, const char *name,
                        const dtx_lock_opts_t *opts, dtx_lock_lost_fn on_lost,
                        void *arg, dtx_lock_hold_t **out);

/* The token held (the fence of every protected write: fence_name = the
 * lock's name).  Any thread, until dtx_lock_hold_stop. */
int64_t dtx_lock_hold_token(const dtx_lock_hold_t *h);

/* The acquire's view {"name", "owner", "token", "expires", "held"},
 * borrowed: valid until dtx_lock_hold_stop. */
json_t *dtx_lock_hold_view(const dtx_lock_hold_t *h);

/* 0 while held, else the code on_lost got.  Any thread, until stop. */
int dtx_lock_hold_lost(dtx_lock_hold_t *h);

/* Stops the keeper (waits for a renewal in flight, itself bounded by the
 * lease's end), releases the lock and frees h: h is invalid after the
 * call, whatever it returns.  0 when the lock was held throughout and is
 * released (*out, may be NULL: the released view); DTX_ESTALE when it was
 * lost (the detail says how; the release is still tried: after a lapse
 * no one else took, it frees the lock at once); another error when the
 * release failed (the lease then lapses on its own).  h NULL: 0. */
int dtx_lock_hold_stop(dtx_lock_hold_t *h, json_t **out);
/* Semaphores (src/txn/lock/sem.c, docs/locks.md "Semaphores"): an acquire
 * with opts->max N >= 2 takes one of N slots of the name, each holder with
 * its own token (the name's tokens only grow, across slots); its view adds
 * "slot" and "fence", the fence name of that slot ("NAME:SLOT"), which
 * every protected write of the holder carries with its token: a holder
 * whose slot passed to a newer token is then DTX_EFENCED, while the other
 * slots' holders never fence it.  A name has one max: an acquire with
 * another is DTX_EINVAL.  renew and release take the holder's token as
 * for a plain lock; show and list add "max" and "holders" [{slot, owner,
 * token, expires, fence}] (the live ones).
 *
 * Leader election (src/txn/lock/elect.c, docs/locks.md "Leader
 * election"): a campaign is an acquire of a lock of one holder that
 * waits until it leads -- up to opts->wait_ms, and with wait_ms 0 as long
 * as it takes (within deadline_ms) -- and returns the acquire's view: its
 * token is the term, which only grows.  The leader keeps its lease with
 * dtx_lock_renew and fences its writes by NAME:term.  opts->max must be 0
 * or 1 (DTX_EINVAL). */
int dtx_lock_campaign(dtx_store_t *st, const char *name,
                      const dtx_lock_opts_t *opts, json_t **out);

/* *out: {"name", "leader": the owner of the live lease or null, "term":
 * the lock's token (the last term begun), "expires"}; DTX_ENOTFOUND when
 * no one ever campaigned; DTX_EINVAL for a semaphore. */
int dtx_lock_leader(dtx_store_t *st, const char *name, json_t **out);

/* ---- sync flag (src/txn/sync/, docs/sync.md) --------------------------------
 *
 * A rule copies fields of a master document (a user) into its dependents
 * (the user's comments: documents of another collection whose LINK field
 * equals the master's _id).  dtx_sync_update applies a change to the
 * master and, in the SAME atomic step, raises the master's version and sets
 * a "syncing" flag; it then writes the copied fields into every dependent,
 * each write conditioned on the dependent reflecting an older version, and
 * clears the flag only if it is still this change's.  A change interrupted
 * (crash, pause, store outage) leaves its flag; dtx_sync_repair (and
 * dtx_recover, doctx worker) re-propagates it from the master's CURRENT
 * values and version.  Fields doctx keeps (an UPDATE may not touch them):
 *   master     _syncm.NAME   {"v": version, "stamp": the last change's}
 *              _syncing.NAME {"stamp","owner","at","until"} while a change
 *                            propagates (sparse index on .at)
 *   dependent  _sync.NAME    the master version it reflects
 * Rules are documents of the collection "sync_rules" (_id = NAME), never
 * deleted, so any process can repair any rule's changes. */
typedef struct dtx_sync_rule {
  const char *name;       /* 1..64 of [A-Za-z0-9_-] */
  const char *master;     /* the masters' collection */
  const char *dependents; /* the dependents' collection */
  const char *link;       /* a dependent's field holding its master's _id
                             (a string); not _id, not a copied DST */
  const char *copy;       /* "SRC:DST[,SRC:DST...]": dotted field paths of
                             the master (SRC) and the dependent (DST); no
                             DST twice or inside another; at most 64 */
} dtx_sync_rule_t;

/* Records rule (every string borrowed, checked first: DTX_EINVAL names the
 * bad part and records nothing) and creates the index on the link field
 * of the dependents, the sparse index on the flag of the masters, and the
 * transition rule that keeps the masters' versions from going back
 * (merged into the collection's own; docs/sync.md).
 * Defining a rule again with the same definition returns it (0); with a
 * different one it is DTX_ECONFLICT and the stored rule is kept (rules are
 * never replaced: a change in flight must be repaired with the rule it was
 * made under).  A new rule that clashes with one on record -- writes a
 * field another rule writes or links by, or copies into a field another
 * copies from -- is DTX_ECONFLICT too, nothing written.  Rules may share
 * master fields: a change propagates every rule it touches.  *out (may be
 * NULL): the stored rule document, new reference, NULL on error. */
int dtx_sync_rule_define(dtx_store_t *st, const dtx_sync_rule_t *rule,
                         json_t **out);

/* *out: the rule document {_id, master, dependents, link, copy: [{src,
 * dst}...], created}, new reference; DTX_ENOTFOUND when there is none. */
int dtx_sync_rule_get(dtx_store_t *st, const char *name, json_t **out);

/* Applies update (borrowed: an operator update, e.g. {"$set": {...}},
 * that must not touch the fields above: DTX_EINVAL) to the master
 * master_id (a string _id) of rule and propagates the copied fields --
 * of rule, and of every other rule on the same master collection whose
 * copied fields update can change: the one master step raises the
 * version and sets the flag of each.  DTX_ENOTFOUND when there is no such
 * rule or master (nothing changed; a missing rule creates nothing).  An
 * error after the master step leaves the flags not yet cleared for
 * repair: the change itself is made.  *out (may be NULL), new reference,
 * NULL on error:
 *   {"rule", "master", "version", "dependents": N written,
 *    "flag_cleared": false when a newer change owns the flag,
 *    "also": [{"rule", "version", "dependents", "flag_cleared"}...] for
 *    the other rules the change touched}
 * opts may be NULL; its lease_ms is how long the flag counts as live
 * (dtx_sync_repair and the audit leave a live flag alone). */
int dtx_sync_update(dtx_store_t *st, const char *rule, const char *master_id,
                    const json_t *update, const dtx_exec_opts_t *opts,
                    json_t **out);

/* One repair pass over every rule: each master whose flag is stale (its
 * lease lapsed; with opts->older_than_ms >= 0, set at least that long
 * ago) is propagated again from its current values and version, and its
 * flag cleared if no newer change set it meanwhile.  Only older_than_ms
 * and deadline_ms of opts are read (opts may be NULL: lease-based).
 * *summary (may be NULL, new reference, set on an error too):
 *   {"ok", "ran": {"repaired": N, "dependents_updated": N}, "skipped",
 *    "errors"} (the per-pattern shape of dtx_recover). */
int dtx_sync_repair(dtx_store_t *st, const dtx_recover_opts_t *opts,
                    json_t **summary);
/* ---- ledger: log reconciliation with multi-leg entries ---------------------
 *
 * An entry is ONE immutable document carrying all its legs, so a transfer
 * among any number of accounts is all or nothing without a two-phase
 * protocol:
 *   ledger_entries  {_id, changes: [{account, value, seqId[, min][, max]}...],
 *                    state, proc, created, updated, at[, expires_at]
 *                    [, reverses][, committed_at][, meta][, ref]
 *                    [, amounts][, post_id][, imported]}
 *   ledger_accounts {_id, min_balance[, max_balance], cache: {balance,
 *                    seqId}, created, updated[, asset]}
 * A negative value is a debit (money leaves the account), a positive one a
 * credit; the values of an entry sum to zero.  Each account numbers its
 * legs 1, 2, 3, ... (seqId, dense), unique by the index
 * {changes.account: 1, changes.seqId: 1}: a poster derives each account's
 * next seqId and balance, checks its debits, and inserts; a concurrent
 * poster that took the same seqId loses at the index and derives again,
 * so the balance check is serialisable per account without a lock.
 * state: posted (the legs count), pending (debits held against the
 * available balance, credits not yet counted), voided or expired (the legs
 * never count).  proc: uncommitted, or committed once resolved and every
 * earlier seqId of each of its accounts is committed; the cache advances
 * over committed entries only (the worker's committer does both).
 * src/txn/ledger/ledger.c has the diagram and the invariants, and
 * docs/ledger.md the design. */

#define DTX_LEDGER_ACCOUNTS "ledger_accounts"
#define DTX_LEDGER_ENTRIES "ledger_entries"
#define DTX_LEDGER_MAX_LEGS 128
#define DTX_LEDGER_TIMEOUT_MS 3600000 /* a pending entry's usual timeout */

/* A ledger account's limits.  The zero value: min_balance 0, no
 * max_balance. */
typedef struct dtx_ledger_limit {
  int64_t min_balance; /* the lowest available balance a debit may leave */
  int no_min_balance;  /* 1: no limit (external or settlement accounts) */
  int64_t max_balance; /* with has_max_balance: the highest balance plus
                          pending credits a credit may leave (TigerBeetle's
                          credits_must_not_exceed_debits; docs/ledger.md,
                          "The upper limit") */
  int has_max_balance; /* 1: max_balance applies; 0: no upper limit */
} dtx_ledger_limit_t;

/* Which limits dtx_ledger_account_limits changes. */
#define DTX_LEDGER_LIMIT_MIN 1
#define DTX_LEDGER_LIMIT_MAX 2

/* Creates ledger account id (1..128 of [A-Za-z0-9_.:-]) with balance 0
 * and the limits *limit (NULL: min_balance 0, no max).  An existing id is
 * DTX_EDUPKEY; a max_balance below the min_balance is DTX_EINVAL.  *out
 * (may be NULL) receives the account. */
int dtx_ledger_account_create(dtx_store_t *st, const char *id,
                              const dtx_ledger_limit_t *limit, json_t **out);

/* An account's asset: CODE/SCALE, CODE 1..16 of [A-Z0-9_], SCALE 0..18
 * (the digits after the point of the minor unit a value counts: USD/2,
 * BTC/8, JPY/0).  docs/ledger.md, "Assets". */
typedef struct dtx_ledger_account_opts {
  const dtx_ledger_limit_t *limit; /* NULL: min_balance 0 */
  const char *asset; /* NULL: none (the asset of every account created
                        without one, older stores' included) */
} dtx_ledger_account_opts_t;

/* dtx_ledger_account_create with opts (NULL: as it).  The asset is fixed
 * at creation: no command changes it.  A bad asset is DTX_EINVAL,
 * nothing set up or written. */
int dtx_ledger_account_create_ex(dtx_store_t *st, const char *id,
                                 const dtx_ledger_account_opts_t *opts,
                                 json_t **out);

/* The check of an asset (not NULL) create_ex makes: 0 or DTX_EINVAL.
 * Needs no store. */
int dtx_ledger_asset_check(const char *asset);

/* The check dtx_ledger_account_create makes of id before anything is set
 * up or written: 0 or DTX_EINVAL.  Needs no store. */
int dtx_ledger_account_id_check(const char *id);

/* The check post-pending, void and reverse make of an entry id (1..128 of
 * [A-Za-z0-9_.:-]) before anything is set up: 0 or DTX_EINVAL.  Needs no
 * store. */
int dtx_ledger_entry_id_check(const char *id);

/* Changes account id's limit (NULL: min_balance 0).  It applies to debits
 * posted after this call returns; history is never touched, and a limit
 * above the current balance only refuses later debits.  (A debit whose
 * post was already running may still be checked against the old limit;
 * each debit leg records the limit it was checked against as "min".)
 * DTX_ENOACCOUNT when there is no such account.  *out (may be NULL): the
 * account afterwards. */
int dtx_ledger_account_limit(dtx_store_t *st, const char *id,
                             const dtx_ledger_limit_t *limit, json_t **out);

/* Changes the limits of account id that `which` names
 * (DTX_LEDGER_LIMIT_MIN, DTX_LEDGER_LIMIT_MAX or both) to *limit's, in
 * one step; the others stay as they are (dtx_ledger_account_limit is
 * which = DTX_LEDGER_LIMIT_MIN).  As with the floor, a new max_balance
 * applies to credits posted after the call returns and each credit leg
 * records the max it was checked against ("max"); a max_balance the
 * current balance already exceeds is accepted and refuses later credits
 * only (debits bring the balance down).  A max_balance below the
 * min_balance the account would have is DTX_EINVAL, nothing changed;
 * which = 0 is DTX_EINVAL; DTX_ENOACCOUNT when there is no such
 * account. */
int dtx_ledger_account_limits(dtx_store_t *st, const char *id, int which,
                              const dtx_ledger_limit_t *limit, json_t **out);

/* Closes account id for good (docs/ledger.md, "Closing an account"): its
 * balance must be 0 and no pending entry may hold it, judged in the same
 * atomic step as the close takes the account's next seqId, so a post
 * racing it either lands first (and the close judges it) or is refused.
 * A closed account takes no leg: a post, pending post, post-many line or
 * reversal naming it is DTX_ESTATE naming the account.  A balance other
 * than 0 or a hold is DTX_ESTATE naming it, nothing written; an unknown
 * account DTX_ENOACCOUNT.  Closing a closed account returns its close.
 * *out (may be NULL): the close entry {_id, changes: [{account, value: 0,
 * seqId}], state: "closed", proc: "closed", created}.  opts: the
 * deadline (NULL: the default). */
int dtx_ledger_account_close(dtx_store_t *st, const char *id,
                             const dtx_exec_opts_t *opts, json_t **out);

typedef struct dtx_ledger_leg {
  const char *account;
  int64_t value; /* != 0; < 0 debits the account, > 0 credits it (a
                    balancing leg: below) */
} dtx_ledger_leg_t;

/* A leg's kind (docs/ledger.md, "Balancing legs"). */
#define DTX_LEDGER_LEG_FIXED 0     /* value is what moves */
#define DTX_LEDGER_LEG_MAX_DEBIT 1 /* `ACC:-max[=CAP]`: debits as much as
                                      the limits allow (this account's
                                      floor and holds, the max leg's
                                      max_balance and pending credits), up
                                      to its value (the cap; 0: none) */
#define DTX_LEDGER_LEG_MAX_CREDIT 2 /* `ACC:max`: credited what the -max
                                       leg debits; its value 0 */

/* Reads a balancing leg's value as the CLI and doctxd write it: "-max",
 * "-max=CAP" (CAP an int64 > 0) or "max", into leg->value (the cap, 0 for
 * none or for max) and *kind (DTX_LEDGER_LEG_MAX_*).  DTX_EINVAL for
 * anything else (a number is written as a number).  Needs no store. */
int dtx_ledger_leg_value_parse(const char *text, dtx_ledger_leg_t *leg,
                               int *kind);

typedef struct dtx_ledger_post_req {
  const char *id; /* NULL: generated.  Else 1..128 of [A-Za-z0-9_.:-] */
  const dtx_ledger_leg_t *legs;
  size_t nlegs;        /* 2..DTX_LEDGER_MAX_LEGS, distinct accounts */
  int pending;         /* hold the debits; resolve with post_pending/void */
  int64_t timeout_ms;  /* pending: expires after this, 1 ms to 100 years
                          (DTX_LEDGER_TIMEOUT_MS, one hour, is the CLI's
                          default); not pending: 0.  Anything else --
                          0 or less for a pending entry, a timeout on
                          one that is not, past 100 years -- is
                          DTX_EINVAL, nothing recorded */
  /* A balancing pair (docs/ledger.md, "Balancing legs"), 0: none.
   * max_debit is the 1-based index of the -max leg in legs (its value the
   * cap, > 0, or 0: as much as the floor allows), max_credit that of the
   * leg credited the same amount (its value 0); both or neither.  The
   * other legs sum to zero; the stored entry has the amounts that moved;
   * nothing to move is DTX_EINSUFFICIENT naming the account. */
  size_t max_debit;
  size_t max_credit;
  /* Optional, stored with the entry and never changed (docs/ledger.md,
   * "Metadata and references"); checked with the rest, DTX_EINVAL and
   * nothing recorded when wrong.  An existing id is the same request only
   * with the same meta and ref. */
  const json_t *meta; /* NULL: none.  A JSON object, at most
                         DTX_LEDGER_MAX_META bytes serialized compactly,
                         no NUL byte in a key or string */
  const char *ref;    /* NULL: none.  1..DTX_LEDGER_MAX_REF bytes, an
                         external reference (order, invoice), indexed;
                         unique per ledger after dtx_ledger_unique_refs */
  /* An imported entry (docs/ledger.md, "Entry time"): history from
   * another system, at the time at_ms states (ms since 1970, UTC, at most
   * the poster's clock; not pending).  DTX_ESTATE, nothing recorded, once
   * an account of its legs has an entry timed after at_ms.  Not imported:
   * at_ms 0, and doctx times the entry. */
  int imported;
  int64_t at_ms;
} dtx_ledger_post_req_t;

#define DTX_LEDGER_MAX_META 4096 /* bytes of an entry's meta, serialized */
#define DTX_LEDGER_MAX_REF 256   /* bytes of an entry's ref */

/* Posts an entry.  Checked first, recording nothing when wrong: 2 to 128
 * legs, distinct accounts, non-zero values summing to zero (DTX_EINVAL),
 * every account existing (DTX_ENOACCOUNT naming it), all in one asset
 * (DTX_EINVAL naming two accounts; no asset is one too).  Then each debited
 * account's available balance (balance - pending debits) after the debit
 * must stay >= its min_balance (DTX_EINSUFFICIENT naming the account,
 * nothing recorded), and every account's balance must stay within int64
 * whatever its pending entries become (DTX_EOVERFLOW naming it).  An
 * existing id with the same legs (and the same pending flag) returns the
 * existing entry, so a retry posts at most once; with other legs it is
 * DTX_ECONFLICT.  Losing a seqId to a concurrent poster is retried within
 * opts' deadline (DTX_EUNAVAILABLE past it; nothing recorded).  *out (may be NULL):
 * the entry, a new reference.  opts may be NULL. */
int dtx_ledger_post(dtx_store_t *st, const dtx_ledger_post_req_t *req,
                    const dtx_exec_opts_t *opts, json_t **out);

/* The check dtx_ledger_post makes of req (legs, sum, id, timeout) before
 * anything is set up or written: 0 or DTX_EINVAL.  Needs no store.  An
 * unknown account needs the store: dtx_ledger_post reads the accounts
 * before it sets the ledger's collections up, so that error creates
 * nothing either. */
int dtx_ledger_post_req_check(const dtx_ledger_post_req_t *req);

/* The outcome of one entry of dtx_ledger_post_many, in the caller's
 * array.  Its pointers are owned by the array and freed by
 * dtx_ledger_results_clear. */
typedef struct dtx_ledger_result {
  int rc;        /* 0 or DTX_E*: what dtx_ledger_post returns for this
                    request alone */
  char *detail;  /* malloc'd error detail, NULL when rc == 0 */
  json_t *entry; /* the entry, as dtx_ledger_post's *out (NULL when rc) */
} dtx_ledger_result_t;

/* Posts the n entries of reqs (borrowed for the call), each exactly as
 * dtx_ledger_post would alone -- same checks and refusals, rc, detail and
 * entry, same idempotency on id (an existing id with the same legs returns
 * the entry, with other legs DTX_ECONFLICT) -- and, without concurrent
 * posters, with the result of posting them one at a time in array order:
 * an earlier request takes the lower seqId of an account they share, and
 * a debit that fits only before another's is decided in array order; an
 * id given twice is the later one's retry (or conflict).  The work goes in
 * rounds, each ONE bulk write of inserts (one write transaction on SQLite,
 * one pipeline per node on Redis): a round reads the ids asked for and
 * every account once, and takes each request whose accounts and id no
 * earlier unfinished request of the call uses; the rest wait for the next
 * round (so entries on disjoint accounts go together, and a batch that
 * debits one account takes a round per entry).  Pending requests are
 * allowed.  opts (may be NULL) as for dtx_ledger_post, with ONE deadline
 * for the whole call: no round starts past it, and each request not yet
 * posted then gets DTX_EUNAVAILABLE ("gave up at the command's deadline";
 * nothing recorded for it; the posted ones are a prefix of each
 * account's requests, and posting the batch again posts each once).
 * results[i] (caller's array of n) receives reqs[i]'s
 * outcome, set in every case; release it with dtx_ledger_results_clear().
 * Returns 0 when every rc is 0, else the first failure's rc with the
 * detail "K of N entries failed; first: #i: ...".  st, reqs or results
 * NULL is DTX_EINVAL (every result set to it when results is given),
 * nothing posted; n == 0 is a no-op. */
int dtx_ledger_post_many(dtx_store_t *st, const dtx_ledger_post_req_t *reqs,
                         size_t n, const dtx_exec_opts_t *opts,
                         dtx_ledger_result_t *results);
/* Frees the pointers of results[0..n) and zeroes them. */
void dtx_ledger_results_clear(dtx_ledger_result_t *results, size_t n);

/* Posts pending entry id in full: its debits and credits count from now
 * on.  An entry already posted is returned as is (0).  A voided or expired
 * one, or one past its timeout, is DTX_ESTATE; an unknown id
 * DTX_ENOTFOUND.  Races with void and expiry have exactly one winner.
 * *out: the entry afterwards. */
int dtx_ledger_post_pending(dtx_store_t *st, const char *id, json_t **out);

/* Voids pending entry id: its legs never count.  Voiding a voided entry
 * returns it (0); a posted one (reverse it instead) or an expired one is
 * DTX_ESTATE.  *out: the entry afterwards. */
int dtx_ledger_void(dtx_store_t *st, const char *id, json_t **out);

/* Posts pending entry id partly, in ONE step (docs/ledger.md, "Partial
 * post of a hold"): the leg on amounts[k].account posts amounts[k].value,
 * between 0 and what the leg holds (same sign), a leg not named posts 0,
 * and the rest is released; the amounts sum to zero.  The entry records
 * them as "amounts" (aligned with its legs, which never change) and
 * post_id (may be NULL; 1..128 of [A-Za-z0-9_.:-]) as "post_id".  All of
 * every leg is post-pending in full, 0 everywhere is a void (the same
 * documents).  A retry -- the entry already resolved as this request
 * would resolve it, and with the same post_id when one is given --
 * returns the entry; resolved otherwise is DTX_ECONFLICT (expired:
 * DTX_ESTATE).  An amount over the held one, of the other sign, on an
 * account the entry lacks, or amounts not summing to zero: DTX_EINVAL
 * naming the account, nothing changed. */
int dtx_ledger_post_partial(dtx_store_t *st, const char *id,
                            const dtx_ledger_leg_t *amounts, size_t n,
                            const char *post_id, json_t **out);

/* The checks dtx_ledger_post_partial makes before the store: the ids,
 * 0..128 distinct accounts.  Needs no store. */
int dtx_ledger_partial_check(const char *id, const dtx_ledger_leg_t *amounts,
                             size_t n, const char *post_id);

/* Reverses posted entry id: posts a new entry with the negated legs and
 * "reverses": id (the original is never edited).  The new entry is
 * checked like any post (DTX_EINSUFFICIENT when an account credited by
 * the original has spent the money).  An entry is reversed at most once:
 * reversing it again returns the existing reversal, unless new_id names
 * another id (DTX_ECONFLICT).  new_id NULL: generated. */
int dtx_ledger_reverse(dtx_store_t *st, const char *id, const char *new_id,
                       const dtx_exec_opts_t *opts, json_t **out);

/* at_seq for dtx_ledger_balance: the latest. */
#define DTX_LEDGER_LATEST (-1)

/* *out: {"account","balance","available","pending_debits","seq"[,"asset"]}
 * (asset: the account's, when it has one): the
 * balance (cache + posted legs after it), the available balance (balance
 * - pending debits) and the seqId they are as of -- the latest, or at_seq
 * (>= 0, at most the latest: DTX_EINVAL beyond it), the point-in-time
 * balance over the legs up to that seqId.  DTX_ENOACCOUNT when there is
 * no such account. */
int dtx_ledger_balance(dtx_store_t *st, const char *account, int64_t at_seq,
                       json_t **out);

/* *out: an array of the account's valid (posted) legs with seqId >=
 * from_seq (>= 1), in seqId order, at most limit (0: all):
 * {"entry","seq","value","balance","state"[,"asset"][,"ref"][,"meta"]},
 * balance
 * being the running balance after the leg, state "committed" or
 * "uncommitted", ref and meta the entry's when it has them.
 * DTX_ENOACCOUNT when there is no such account. */
int dtx_ledger_statement(dtx_store_t *st, const char *account,
                         int64_t from_seq, int64_t limit, json_t **out);

/* ---- entry time (docs/ledger.md, "Entry time") ----
 * Every entry has a time "at" (ms since 1970-01-01T00:00:00Z), assigned
 * in the step that takes its seqIds: the poster's clock, raised to the
 * latest time of its accounts, so each account's times never decrease in
 * seqId order, whatever the posters' clocks. */

#define DTX_LEDGER_MAX_TIME_MS 253402300799999LL /* 9999-12-31T23:59:59.999Z */
#define DTX_LEDGER_NO_TIME (-1)                 /* to_ms: no upper bound */

/* Parses TIME: RFC 3339 in UTC ("2026-01-31T12:00:00Z", ".fff" optional,
 * digits past ms dropped, "+00:00" for Z allowed) or ms since the epoch
 * (digits only), years 1970..9999: *ms, or DTX_EINVAL naming s (*ms
 * unchanged).  Needs no store. */
int dtx_ledger_time_parse(const char *s, int64_t *ms);

/* dtx_ledger_balance as of time at_ms (0..DTX_LEDGER_MAX_TIME_MS, else
 * DTX_EINVAL): over the legs of the account's entries timed <= at_ms,
 * which are its seqIds 1..n; *out also has "at". */
int dtx_ledger_balance_time(dtx_store_t *st, const char *account,
                            int64_t at_ms, json_t **out);

/* dtx_ledger_statement of the legs with seqId >= from_seq whose entry is
 * timed in [from_ms, to_ms) (to_ms DTX_LEDGER_NO_TIME: no bound; from_ms
 * after to_ms, or either out of range: DTX_EINVAL). */
int dtx_ledger_statement_time(dtx_store_t *st, const char *account,
                              int64_t from_seq, int64_t from_ms,
                              int64_t to_ms, int64_t limit, json_t **out);

/* *out: entry id, or DTX_ENOTFOUND. */
int dtx_ledger_get(dtx_store_t *st, const char *id, json_t **out);

/* *out: an array of entries: of one account in its seqId order, or
 * (account NULL) all in creation order; paged by page (may be NULL). */
int dtx_ledger_list(dtx_store_t *st, const char *account,
                    const dtx_page_t *page, json_t **out);

/* Makes refs unique in this store's ledger from now on: creates the
 * unique sparse index "ref_unique" on ledger_entries {ref: 1}.  Existing
 * entries sharing a ref make it DTX_EDUPKEY (nothing changed); doing it
 * again is a no-op.  Afterwards a post, post-many entry or pending post
 * whose ref another entry holds is DTX_EDUPKEY naming the ref and that
 * entry, nothing recorded (a retry of the same id is that entry again). */
int dtx_ledger_unique_refs(dtx_store_t *st);

/* *out: the entries whose ref is ref (NULL: any) and whose meta matches
 * meta_filter (a MongoDB filter over the meta object, its paths relative
 * to it, top-level $and/$or/$nor allowed; NULL: any), oldest first
 * (created, then _id), paged by page (may be NULL).  Both NULL is
 * DTX_EINVAL (dtx_ledger_list lists everything).  A ref is read through
 * the {ref: 1} index; a meta filter alone reads every entry. */
int dtx_ledger_entries(dtx_store_t *st, const char *ref,
                       const json_t *meta_filter, const dtx_page_t *page,
                       json_t **out);

/* ---- order confirmation (src/txn/order/, docs/orders.md) --------------------
 *
 * Reference 003's payment-order flow.  An order is a document of the
 * collection "orders", _id = its trade id (1..100 of [A-Za-z0-9_.-]):
 *   {_id, account, amount, settlement, state, transfer, attempt, created,
 *    owner, lease_until, epoch, updated}
 * States: pending -> confirming -> confirmed -> success, or pending ->
 * canceled.  Confirming credits the order's account with amount through a
 * transfer from the settlement account (id "order:TRADE_ID"; after a
 * credit its executor lost, "order:TRADE_ID:N"), so the transfer audit's
 * conservation covers orders, and the account is credited exactly once
 * however often confirm runs and wherever a crash stops it; dtx_recover
 * (and the worker) finish interrupted confirmations.  Every call returns
 * the order document in *out (new reference, the caller releases it; NULL
 * on errors before the order was read). */
typedef struct dtx_order_req {
  const char *trade_id;   /* the payment's trade id: unique */
  const char *account;    /* the transfer account credited; must exist */
  int64_t amount;         /* > 0 */
  const char *settlement; /* the account paying; NULL: "settlement".  It is
                             created on first use with no lower limit; one
                             that exists with a limit is refused */
} dtx_order_req_t;

/* Records the order pending.  The same trade id again with the same
 * account, amount and settlement returns the stored order (whatever its
 * state); with anything different it is DTX_ECONFLICT.  Bad input -- a
 * malformed trade id or account id, amount <= 0, an unknown account, a
 * settlement with a lower limit -- is DTX_EINVAL and records nothing.
 * All strings of req are borrowed for the call only. */
int dtx_order_create(dtx_store_t *st, const dtx_order_req_t *req,
                     json_t **out);

/* The check dtx_order_create makes of req before anything is set up or
 * written: 0 or DTX_EINVAL.  Needs no store (the unknown account is read
 * by dtx_order_create, also before its set-up). */
int dtx_order_req_check(const dtx_order_req_t *req);

/* The payment callback: drives the order to success, crediting its
 * account once.  An order another executor is confirming is waited for
 * (its lease, bounded by the deadline) or taken over when its lease
 * lapsed.  success already: 0, nothing credited.  canceled: DTX_ESTATE.
 * A credit declined by the transfer (the account is gone, its balance
 * would pass int64) is DTX_ESTATE and leaves the order confirming; each
 * call retries it once.  DTX_ENOTFOUND for an unknown trade id.  opts (may
 * be NULL) gives the executor's owner, lease and deadline. */
int dtx_order_confirm(dtx_store_t *st, const char *trade_id,
                      const dtx_exec_opts_t *opts, json_t **out);

/* The check every order call makes of a trade id before anything is
 * recorded (1..100 of [A-Za-z0-9_.-]), without a store: 0 or DTX_EINVAL
 * naming it.  For a caller that checks all its ids before confirming any
 * (doctx order confirm ID...). */
int dtx_order_id_check(const char *trade_id);

/* The outcome of one order of dtx_order_confirm_many, in the caller's
 * array.  Its pointers are owned by the array and freed by
 * dtx_order_results_clear. */
typedef struct dtx_order_result {
  int rc;        /* 0 or DTX_E*: what dtx_order_confirm returns for this
                    trade id alone */
  char *detail;  /* malloc'd error detail, NULL when rc == 0 */
  json_t *order; /* the order document, as dtx_order_confirm's *out (NULL
                    where it would be NULL, e.g. an unknown trade id) */
} dtx_order_result_t;

/* Confirms the n orders trade_ids[0..n) (borrowed for the call), each
 * exactly as dtx_order_confirm would alone -- same rc, detail and order
 * document per id, same crediting exactly once -- but the same step of
 * all of them goes to the store as one bulk write per round: one read of
 * all the orders, one round of claims, ONE dtx_transfer_execute_many for
 * all their credits, one round of commits, one of finishes.  An order off
 * that path (unknown, canceled, success already, held by another
 * executor, a credit declined or failed, a step that failed) is confirmed
 * alone from where it stands, after the rounds, without holding up the
 * others; an id given twice is confirmed again after its first
 * occurrence, as a second callback would be (0, nothing credited twice).
 * opts (may be NULL) as for dtx_order_confirm: one executor, and ONE
 * deadline for the whole call.  results[i] (caller's array of n) receives
 * trade_ids[i]'s outcome, set in every case; release it with
 * dtx_order_results_clear().  Returns 0 when every rc is 0, else the
 * first failure's rc with the detail "K of N orders failed; first: #i:
 * ...".  st, trade_ids or results NULL is DTX_EINVAL (every result set to
 * it when results is given), nothing run; n == 0 is a no-op. */
int dtx_order_confirm_many(dtx_store_t *st, const char *const *trade_ids,
                           size_t n, const dtx_exec_opts_t *opts,
                           dtx_order_result_t *results);
/* Frees the pointers of results[0..n) and zeroes them. */
void dtx_order_results_clear(dtx_order_result_t *results, size_t n);

/* Cancels a pending order (canceled again: 0).  confirming, confirmed or
 * success: DTX_ESTATE, *out the order as it stands. */
int dtx_order_cancel(dtx_store_t *st, const char *trade_id, json_t **out);

/* *out: the order, or DTX_ENOTFOUND. */
int dtx_order_get(dtx_store_t *st, const char *trade_id, json_t **out);

/* *out: array of orders in creation order, all or of one state (NULL:
 * all; an unknown state is DTX_EINVAL), paged by page (may be NULL). */
int dtx_order_list(dtx_store_t *st, const char *state, const dtx_page_t *page,
                   json_t **out);
/* ---- versioned documents: a tree of documents read at one version ---------
 *
 * An ITEM is a root document plus child documents (KEY -> DOC), stored
 * per version, so a reader sees the whole tree as of one committed
 * version and never a mix of two (reference solution 5).  A writer
 * reserves a fresh version number on the item's root (never reused),
 * writes the version's record and its new children, and commits by
 * moving the root's committed version in ONE conditional step.  A child
 * not named in a put carries over by reference (the version's record maps
 * KEY -> the version that wrote it), so a put writes only what changed.
 *   version_roots    {_id: ITEM, version: committed (0: none), next: the
 *                     last number reserved, res: {"V": {owner, token,
 *                     until, at}} reservations in flight, log: [{v, at}]
 *                     committed versions still kept, trash: [V] versions
 *                     to clean, updated}
 *   versions         {_id: "ITEM/V", item, version, base, root, children:
 *                     {KEY: W}, owner, created[, dead]}
 *   version_children {_id: "ITEM/W/KEY", item, version: W, key, doc[, dead]}
 * src/txn/version/version.c has the diagram and the invariants,
 * docs/versions.md the design. */
#define DTX_VERSION_ROOTS "version_roots"
#define DTX_VERSION_RECORDS "versions"
#define DTX_VERSION_CHILDREN "version_children"
#define DTX_VERSION_MAX_CHILDREN 1024
#define DTX_VERSION_ANY (-1)   /* expect_version: no condition */
#define DTX_VERSION_LATEST 0   /* dtx_version_get: the committed version */
#define DTX_VERSION_GRACE_MS 60000 /* dtx_version_gc's default grace */
#define DTX_VERSION_KEEP 10        /* dtx_version_gc's default keep */

/* One child change of a put: doc (borrowed, a JSON object) sets child key
 * (1..64 of [A-Za-z0-9_-]); doc NULL removes it (it must exist in the
 * version the put builds on: DTX_ENOTFOUND otherwise). */
typedef struct dtx_version_child {
  const char *key;
  const json_t *doc;
} dtx_version_child_t;

typedef struct dtx_version_put_req {
  const char *item;   /* 1..128 of [A-Za-z0-9_.:-] */
  const json_t *root; /* the new version's root document (an object),
                         borrowed */
  const dtx_version_child_t *children; /* changes, borrowed; keys distinct */
  size_t nchildren;   /* 0..DTX_VERSION_MAX_CHILDREN */
  int64_t expect_version; /* DTX_VERSION_ANY, or the committed version the
                             put must build on (0: the item has none) */
} dtx_version_put_req_t;

/* Writes a new version of req->item: its root, the children of the
 * previous committed version with req's changes applied.  Bad input
 * (DTX_EINVAL: a bad item or key, a key given twice, a root or child that
 * is not an object, too many children) writes nothing.  With
 * expect_version >= 0, a committed version other than it is DTX_ECONFLICT
 * (nothing becomes visible; for an item that does not exist yet, nothing
 * is written at all, nor for a removal there: DTX_ENOTFOUND); without, a
 * put that loses the race to
 * another writer releases its version and tries again on the new one,
 * within the deadline of opts (may be NULL; lease_ms is how long the
 * reservation stays its own before recovery may abandon it).  *out (may
 * be NULL; new reference, NULL on error): {"item","version"}. */
int dtx_version_put(dtx_store_t *st, const dtx_version_put_req_t *req,
                    const dtx_exec_opts_t *opts, json_t **out);

/* The check dtx_version_put makes of req before anything is set up or
 * written: 0 or DTX_EINVAL.  Needs no store. */
int dtx_version_put_req_check(const dtx_version_put_req_t *req);

/* *out (new reference, NULL on error): {"item","version","root",
 * "children": {KEY: DOC}} of the committed version (version
 * DTX_VERSION_LATEST) or of version (a committed version still kept).
 * DTX_ENOTFOUND when the item or that version does not exist. */
int dtx_version_get(dtx_store_t *st, const char *item, int64_t version,
                    json_t **out);

/* *out (new reference): an array, oldest first, of the item's committed
 * versions still kept: {"version","committed" (ms),"children":[KEYS]}.
 * DTX_ENOTFOUND when there is no such item. */
int dtx_version_history(dtx_store_t *st, const char *item, json_t **out);

typedef struct dtx_version_gc_opts {
  int64_t keep;        /* committed versions kept per item, >= 1; 0:
                          DTX_VERSION_KEEP */
  int64_t grace_ms;    /* only versions superseded at least this long ago
                          are removed (a reader started before may still
                          read them); < 0: DTX_VERSION_GRACE_MS; 0: none */
  int64_t deadline_ms; /* budget of the whole pass; 0: see "Deadlines" */
} dtx_version_gc_opts_t;

/* Retention over every item: all but the last keep committed versions
 * that were superseded more than grace_ms ago are removed, and so is what
 * no kept version refers to (children carried over stay while a kept
 * version refers to them), and what abandoned writers left.  opts may be
 * NULL.  *summary (may be NULL; new reference, set on an error too):
 * {"ok","items","removed","deleted"}. */
int dtx_version_gc(dtx_store_t *st, const dtx_version_gc_opts_t *opts,
                   json_t **summary);

/* ---- scenarios (LeanCloud 003): batch update and daily interest ---------
 *
 * Batch update.  Applies an operator UPDATE once to every document of coll
 * matching filter, for batch id: each document gets the marker
 *   _batches: {ID: STAMP}
 * in the SAME conditional step as the update (the step's filter demands
 * the marker be absent), so a batch that crashed and runs again resumes
 * where it stopped and never applies the update to a document twice.
 * UPDATE must be update operators, none touching _batches; the id is
 * 1..64 of [A-Za-z0-9_-].  A collection whose validator forbids unknown
 * fields must admit _batches.  doctx's own protocol collections
 * (accounts, transfers, ...) are refused.  The id run again with another
 * filter or update is DTX_ECONFLICT, nothing written (STAMP starts with a
 * digest of coll, filter and update).  docs/scenarios.md. */
#define DTX_BATCH_FIELD "_batches"

typedef struct dtx_batch_result {
  int64_t matched;  /* documents found matching filter (marked or not) */
  int64_t modified; /* updated (and marked) by this call */
  int64_t already;  /* carrying the marker already: an earlier run, or a
                       concurrent one, applied it */
} dtx_batch_result_t;

/* Runs batch id over coll (filter NULL: every document; borrowed, as is
 * update).  res (may be NULL) receives the counts -- also after an error,
 * as far as the call got; the batch then resumes when it is run again.
 * Bad input is DTX_EINVAL / DTX_EBADQUERY / DTX_EBADUPDATE before anything
 * is written.  A document the update cannot be applied to (a type error,
 * its collection's validator) stops the batch with that error, naming
 * the document.  opts may be NULL (deadline_ms bounds the call). */
int dtx_batch_update(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *update, const char *id,
                     const dtx_exec_opts_t *opts, dtx_batch_result_t *res);

/* The checks dtx_batch_update makes of its arguments before anything is
 * written (the same errors), without a store. */
int dtx_batch_update_check(const char *coll, const json_t *filter,
                           const json_t *update, const char *id);

/* Daily interest.  Credits floor(balance * rate_ppm / 1,000,000) to every
 * account with a positive balance and a limit (min_balance not null; the
 * settlement account and other unlimited accounts never earn), each
 * credit a transfer from the settlement account with id
 * "interest:DAY:ACCOUNT" -- so transfer idempotency credits each (account,
 * day) at most once however often the run is repeated.  A credit cut short
 * before it committed is rolled back by the transfer protocol (failed);
 * the next attempt, "interest.2:DAY:ACCOUNT" (then .3, ... up to 5), is
 * made only once every earlier one failed, for the same amount.  An id
 * that would pass 128 bytes (a long account id) carries the account id's
 * SHA-256 instead: "interest-sha256:DAY:HEX", "interest-sha256.K:DAY:HEX"
 * (docs/scenarios.md "Credit ids").  The
 * balance used
 * is the account's balance when its credit is first recorded; a rerun
 * finds the recorded transfer and never recomputes it, so it does not
 * compound on the same day's credit (docs/scenarios.md). */
typedef struct dtx_interest_req {
  const char *day;        /* YYYY-MM-DD, a real calendar date */
  int64_t rate_ppm;       /* 0..DTX_INTEREST_MAX_PPM */
  const char *settlement; /* NULL: "settlement"; created on first use with
                             no limit */
} dtx_interest_req_t;

#define DTX_INTEREST_MAX_PPM 1000000 /* 100% a day */

/* Runs the day's interest.  *out (may be NULL) receives
 *   {"day","rate_ppm","settlement","accounts","credited","already",
 *    "pending","failed","skipped","zero","total","refused","refusals"}
 * accounts: the eligible accounts seen; credited: credits this call's
 * executor completed (each credit is counted so by one run at most, also
 * among concurrent runs); already: credits found completed by another
 * (an earlier or concurrent run, or recovery); pending: credits left unfinished
 * (a live executor holds them past the deadline; a rerun or doctx
 * recover finishes them); failed: accounts whose 5 attempts failed;
 * skipped:
 * accounts that earn nothing (no limit, balance <= 0); zero: eligible
 * accounts whose interest rounds to 0; total: the amount credited by this
 * call.  Bad input (day, rate, settlement id) is DTX_EINVAL before
 * anything is written; so is a settlement account that exists with a
 * limit, or was closed.  An account that cannot be credited for a reason
 * of its own (its balance plus its interest would pass INT64_MAX, a
 * transfer under its credit id that is not its credit, an id the
 * transfers refuse) is not credited; the run goes on, and ends
 * DTX_EOVERFLOW (when that was the first reason) or DTX_ECONFLICT after
 * crediting the others: refused counts such accounts and refusals lists
 * the first 20 as {"account","error","detail"}.  A store error stops the
 * run (*out says how far it got; run it again).  A day is paid at one
 * rate: its first run records rate_ppm and the settlement (collection
 * interest_days), and a run of the day with others is DTX_ECONFLICT
 * before anything is written.  opts (may be NULL) are the transfers'; the run executes them
 * under opts->owner (or host:pid) plus a nonce of its own. */
int dtx_interest_run(dtx_store_t *st, const dtx_interest_req_t *req,
                     const dtx_exec_opts_t *opts, json_t **out);

/* The check dtx_interest_run makes of req (day, rate, settlement id)
 * before anything is set up or written: 0 or DTX_EINVAL.  Needs no
 * store. */
int dtx_interest_req_check(const dtx_interest_req_t *req);

/* ---- multi-document transactions (src/txn/multi/, docs/transactions.md) ---
 * Reads at one snapshot and writes that land all or none, over any
 * collections, on every backend.  A handle is used by one thread at a
 * time.  Documents returned are new references the caller owns; json_t
 * arguments are borrowed.  A transaction's writes are buffered in the
 * handle: nothing is stored before dtx_txn_commit.  Documents written by a
 * transaction carry the reserved field "_txn" (stripped from what the
 * dtx_txn_* reads return; kept in what plain reads return). */

typedef struct dtx_txn dtx_txn_t;

#define DTX_TXN_SNAPSHOT 0     /* the default: snapshot isolation */
#define DTX_TXN_SERIALIZABLE 1 /* also validates every read at commit */

typedef struct dtx_txn_opts {
  int isolation;       /* DTX_TXN_SNAPSHOT | DTX_TXN_SERIALIZABLE */
  int64_t lease_ms;    /* how long readers wait on its commit before
                          aborting it; 0: 10000; 1..366 days */
  int64_t deadline_ms; /* budget of dtx_txn_run (all attempts) or of each
                          call on the handle; 0: 30000; at most 100 years */
  const char *id;      /* NULL: generated; else 1..128 of [A-Za-z0-9_.:-],
                          and the commit always writes a record under it,
                          so dtx_txn_outcome can answer for it */
  int64_t max_age_ms;  /* a read or commit this long after begin fails with
                          DTX_ECONFLICT ("snapshot too old"); 0: 60000,
                          the most (recovery collects older versions) */
} dtx_txn_opts_t;

/* The check dtx_txn_begin makes of opts (NULL: the defaults): 0 or
 * DTX_EINVAL naming the option.  Needs no store. */
int dtx_txn_opts_check(const dtx_txn_opts_t *opts);

/* Begins a transaction: checks opts (DTX_EINVAL, nothing written), sets
 * the pattern's collections up and takes the snapshot timestamp.  *out: a
 * new handle (NULL on error) that the caller frees with dtx_txn_free; it
 * borrows st, which must outlive it. */
int dtx_txn_begin(dtx_store_t *st, const dtx_txn_opts_t *opts,
                  dtx_txn_t **out);

/* The transaction's id (owned by the handle, valid until dtx_txn_free). */
const char *dtx_txn_id(const dtx_txn_t *t);

/* The first document of coll matching filter at the snapshot, with this
 * transaction's own writes applied; *out a new reference, or NULL when
 * none matched (rc 0).  DTX_ECONFLICT: the snapshot is too old (retry
 * the whole transaction). */
int dtx_txn_find_one(dtx_txn_t *t, const char *coll, const json_t *filter,
                     json_t **out);

/* At most limit (1..1000) documents of coll matching filter at the
 * snapshot, as for dtx_txn_find_one; *out a new array (caller owns). */
int dtx_txn_find(dtx_txn_t *t, const char *coll, const json_t *filter,
                 int64_t limit, json_t **out);

/* Buffers the insert of doc (copied; an _id is generated when missing).
 * DTX_EDUPKEY when a document of that _id exists at the snapshot;
 * DTX_EINVAL for a "_txn" field. */
int dtx_txn_insert(dtx_txn_t *t, const char *coll, const json_t *doc);

/* Buffers the update of the first document matching filter (MongoDB's
 * update language: operators or a replacement); with upsert, inserts
 * what MongoDB's upsert would when none matches.  *matched (may be NULL):
 * 1 when a document matched. */
int dtx_txn_update(dtx_txn_t *t, const char *coll, const json_t *filter,
                   const json_t *update, int upsert, int *matched);

/* Buffers the delete of the first document matching filter; *deleted
 * (may be NULL): 1 when one matched. */
int dtx_txn_delete(dtx_txn_t *t, const char *coll, const json_t *filter,
                   int *deleted);

/* Commits.  0: committed.  DTX_ECONFLICT: aborted, nothing of it stays
 * visible (retry the whole transaction).  DTX_EUNAVAILABLE: the outcome
 * is unknown -- ask dtx_txn_outcome with dtx_txn_id.  Other errors:
 * aborted.  After any return the handle takes no more calls but
 * dtx_txn_id and dtx_txn_free. */
int dtx_txn_commit(dtx_txn_t *t);

/* Aborts: drops the buffered writes (nothing was stored).  0. */
int dtx_txn_abort(dtx_txn_t *t);

/* Frees the handle (NULL: nothing); an open transaction is aborted. */
void dtx_txn_free(dtx_txn_t *t);

/* Runs fn in a transaction and commits, retrying the whole transaction
 * (with the kit's randomised backoff) while fn or the commit returns
 * DTX_ECONFLICT, until opts->deadline_ms (then DTX_ECONFLICT naming
 * the attempts).  fn returns 0 to commit, or an error to abort (returned
 * as is; DTX_ECONFLICT retries).  With opts->id a conflict is returned,
 * not retried: the id is spent once its record exists.  fn must not free
 * t. */
typedef int (*dtx_txn_fn)(dtx_txn_t *t, void *arg);
int dtx_txn_run(dtx_store_t *st, const dtx_txn_opts_t *opts, dtx_txn_fn fn,
                void *arg);

#define DTX_TXN_UNKNOWN 0   /* pending under a live lease (ask again), or
                               no record once records were collected */
#define DTX_TXN_COMMITTED 1
#define DTX_TXN_ABORTED 2

/* The outcome of transaction id (after DTX_EUNAVAILABLE from its commit).
 * An id with no record is fenced (an aborted record is written, so a late
 * commit of it fails) and answers DTX_TXN_ABORTED -- or DTX_TXN_UNKNOWN,
 * for good, once recovery ever collected a finished record (after the
 * retention): a missing record may then be a collected commit
 * (docs/transactions.md, "Outcome").  A pending one whose lease lapsed is
 * aborted first.  So COMMITTED and ABORTED are final. */
int dtx_txn_outcome(dtx_store_t *st, const char *id, int *outcome);

/* Checks a transaction script (doctx txn; docs/transactions.md,
 * "Scripts"): a JSON array of 1..1000 steps, each an object of one verb
 *   {"find_one":COLL,"filter":F,"as":NAME}
 *   {"find":COLL,"filter":F,"limit":N,"as":NAME}      N in 1..1000
 *   {"require":NAME,"filter":F}   NAME read by an earlier find_one
 *   {"insert":COLL,"doc":D}
 *   {"update":COLL,"filter":F,"with":U[,"upsert":BOOL]}
 *   {"delete":COLL,"filter":F}
 * with no other keys.  0, or DTX_EINVAL (or the filter's or update's
 * compile error) naming the step.  Needs no store. */
int dtx_txn_script_check(const json_t *script);

/* Runs script (borrowed) in one transaction under dtx_txn_run (conflicts
 * retried until the deadline).  0: *out (new, caller owns) is
 * {"outcome":"committed","reads":{NAME: doc|null|[docs]}}.  A require
 * that does not hold aborts it, nothing written: DTX_ENOMATCH, and *out
 * is {"outcome":"aborted","reads":{...}}.  Other errors: *out NULL;
 * DTX_ECONFLICT when still conflicting at the deadline, DTX_EUNAVAILABLE
 * with the outcome unknown (the detail names the id to ask). */
int dtx_txn_script_run(dtx_store_t *st, const dtx_txn_opts_t *opts,
                       const json_t *script, json_t **out);

#ifdef __cplusplus
}
#endif
#endif /* DOCTX_H */
