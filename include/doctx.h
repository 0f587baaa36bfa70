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
  X(VALIDATION, -25, "document failed validation")

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
 *   redis://HOST:PORT[,HOST:PORT...][?wait=N&password=P&timeout_ms=N
 *           &retry_ms=N&buckets=N&ns=NAME]
 *                                        Redis standalone or Cluster; ns
 *                                        (1..32 of [A-Za-z0-9_-]) isolates
 *                                        this store's keys from every
 *                                        other namespace on the servers
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

/* The canonical URI the store was opened with.  Owned by the store. */
const char *dtx_store_uri(const dtx_store_t *st);

/* Collection names are 1..120 bytes of [A-Za-z0-9_.-], not starting with
 * "_dtx" or "system.", and case-sensitive on every backend, as in MongoDB:
 * "Orders" and "orders" are two collections.
 *
 * Documents nest at most DTX_MAX_DEPTH levels (the document itself is
 * level 1; every object or array inside adds one), as MongoDB's BSON
 * limit.  Every write that would store a deeper document -- an insert, an
 * update's result, an upsert, a replacement -- is refused with DTX_EINVAL
 * naming the path where the limit was passed, and changes nothing. */
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

typedef struct dtx_update_opts {
  int many;   /* update every matching document (each atomic on its own) */
  int upsert; /* insert a document built from filter + update if none */
  /* MongoDB's arrayFilters: an array of filter documents, one per
   * identifier used as $[id] in update paths; NULL when none. */
  const json_t *array_filters;
  int bypass_validation; /* skip the collection's validator */
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
} dtx_delete_opts_t;

/* dtx_store_delete with options; opts may be NULL (delete one). */
int dtx_store_delete_ex(dtx_store_t *st, const char *coll,
                        const json_t *filter, const dtx_delete_opts_t *opts,
                        int64_t *deleted);

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
 * A refused write is DTX_EVALIDATION and changes nothing; the detail names
 * the collection, the _id and the rule that failed, e.g.
 *   accounts 'A': min_balance is double, must be long or null
 *   ($jsonSchema properties.min_balance.bsonType)
 * The bypass_validation option of each write skips both rules for that
 * call only (never the depth limit).  A change of rules is seen by every
 * writer of every process before its next write: a write that commits
 * after dtx_store_set_rules() returned was checked against the new rules. */

typedef struct dtx_collection_rules {
  const json_t *validator;    /* NULL or {} = none */
  const json_t *delete_guard; /* NULL or {} = none */
} dtx_collection_rules_t;

/* Replaces coll's rules by *rules (NULL removes both), creating the
 * collection if it does not exist.  Both are compiled first: an invalid
 * one is DTX_EBADQUERY (naming the operator or $jsonSchema keyword) and
 * changes nothing.  The json_t values are borrowed (copied into the
 * catalog).  Dropping the collection removes its rules. */
int dtx_store_set_rules(dtx_store_t *st, const char *coll,
                        const dtx_collection_rules_t *rules);

/* *out: {"validator": V or null, "delete_guard": G or null} as stored (a
 * new reference); both null for a collection without rules or a missing
 * one.  Always read from the store, never from a cache. */
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

/* Paging of the list functions: skip the first `skip`, then at most
 * `limit` (0: no limit).  A NULL page means all. */
typedef struct dtx_page {
  int64_t skip;  /* >= 0 */
  int64_t limit; /* >= 0; 0 = no limit */
} dtx_page_t;

/* How to create an account.  The zero value is the safe one: balance 0
 * and min_balance 0, so the account can never go negative. */
typedef struct dtx_account_opts {
  int64_t balance;     /* the opening balance */
  int64_t min_balance; /* the lowest balance a debit may leave; <= balance */
  int no_min_balance;  /* 1: no lower limit at all (external or settlement
                          accounts); min_balance is then ignored */
} dtx_account_opts_t;

/* Creates an account (opts NULL: the zero value).  Unless no_min_balance,
 * balance must be >= min_balance (DTX_EINVAL).  An existing id is
 * DTX_EDUPKEY.  *out (may be NULL) receives the account. */
int dtx_account_create(dtx_store_t *st, const char *id,
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
 * for; whatever it left half done is finished by dtx_recover. */

typedef struct dtx_exec_opts {
  const char *owner; /* executor name recorded in the transfer; NULL: host:pid */
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
  const char *owner; /* NULL: host:pid */
  volatile int *stop; /* set to non-zero to make the workers return */
  int64_t deadline_ms; /* budget of each item; 0: see "Deadlines" */
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

typedef struct dtx_recover_opts {
  int64_t older_than_ms; /* a transfer not updated for this long is
                            abandoned; < 0: only when its lease expired */
  int64_t tombstone_ttl_ms; /* tombstones older than this are cleared;
                               0: 24 hours */
  int64_t deadline_ms; /* budget of the whole pass; 0: see "Deadlines" */
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
 * another error (then *report is NULL). */
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

/* ---- ledger: log reconciliation with multi-leg entries ---------------------
 *
 * An entry is ONE immutable document carrying all its legs, so a transfer
 * among any number of accounts is all or nothing without a two-phase
 * protocol:
 *   ledger_entries  {_id, changes: [{account, value, seqId[, min]}...],
 *                    state, proc, created, updated[, expires_at]
 *                    [, reverses][, committed_at]}
 *   ledger_accounts {_id, min_balance, cache: {balance, seqId}, created,
 *                    updated}
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

/* A ledger account's limit.  The zero value: min_balance 0. */
typedef struct dtx_ledger_limit {
  int64_t min_balance; /* the lowest available balance a debit may leave */
  int no_min_balance;  /* 1: no limit (external or settlement accounts) */
} dtx_ledger_limit_t;

/* Creates ledger account id (1..128 of [A-Za-z0-9_.:-]) with balance 0
 * and the limit *limit (NULL: min_balance 0).  An existing id is
 * DTX_EDUPKEY.  *out (may be NULL) receives the account. */
int dtx_ledger_account_create(dtx_store_t *st, const char *id,
                              const dtx_ledger_limit_t *limit, json_t **out);

/* Changes account id's limit (NULL: min_balance 0).  It applies to debits
 * posted after this call returns; history is never touched, and a limit
 * above the current balance only refuses later debits.  (A debit whose
 * post was already running may still be checked against the old limit;
 * each debit leg records the limit it was checked against as "min".)
 * DTX_ENOACCOUNT when there is no such account.  *out (may be NULL): the
 * account afterwards. */
int dtx_ledger_account_limit(dtx_store_t *st, const char *id,
                             const dtx_ledger_limit_t *limit, json_t **out);

typedef struct dtx_ledger_leg {
  const char *account;
  int64_t value; /* != 0; < 0 debits the account, > 0 credits it */
} dtx_ledger_leg_t;

typedef struct dtx_ledger_post_req {
  const char *id; /* NULL: generated.  Else 1..128 of [A-Za-z0-9_.:-] */
  const dtx_ledger_leg_t *legs;
  size_t nlegs;        /* 2..DTX_LEDGER_MAX_LEGS, distinct accounts */
  int pending;         /* hold the debits; resolve with post_pending/void */
  int64_t timeout_ms;  /* pending: expires after this; 0: one hour */
} dtx_ledger_post_req_t;

/* Posts an entry.  Checked first, recording nothing when wrong: 2 to 128
 * legs, distinct accounts, non-zero values summing to zero (DTX_EINVAL),
 * every account existing (DTX_ENOACCOUNT naming it).  Then each debited
 * account's available balance (balance - pending debits) after the debit
 * must stay >= its min_balance (DTX_EINSUFFICIENT naming the account,
 * nothing recorded), and every account's balance must stay within int64
 * whatever its pending entries become (DTX_EOVERFLOW naming it).  An
 * existing id with the same legs (and the same pending flag) returns the
 * existing entry, so a retry posts at most once; with other legs it is
 * DTX_ECONFLICT.  Losing a seqId to a concurrent poster is retried within
 * opts' deadline (DTX_EUNAVAILABLE past it; nothing recorded).  *out: the
 * entry.  opts may be NULL. */
int dtx_ledger_post(dtx_store_t *st, const dtx_ledger_post_req_t *req,
                    const dtx_exec_opts_t *opts, json_t **out);

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

/* *out: {"account","balance","available","pending_debits","seq"}: the
 * balance (cache + posted legs after it), the available balance (balance
 * - pending debits) and the seqId they are as of -- the latest, or at_seq
 * (>= 0, at most the latest: DTX_EINVAL beyond it), the point-in-time
 * balance over the legs up to that seqId.  DTX_ENOACCOUNT when there is
 * no such account. */
int dtx_ledger_balance(dtx_store_t *st, const char *account, int64_t at_seq,
                       json_t **out);

/* *out: an array of the account's valid (posted) legs with seqId >=
 * from_seq (>= 1), in seqId order, at most limit (0: all):
 * {"entry","seq","value","balance","state"}, balance being the running
 * balance after the leg and state "committed" or "uncommitted".
 * DTX_ENOACCOUNT when there is no such account. */
int dtx_ledger_statement(dtx_store_t *st, const char *account,
                         int64_t from_seq, int64_t limit, json_t **out);

/* *out: entry id, or DTX_ENOTFOUND. */
int dtx_ledger_get(dtx_store_t *st, const char *id, json_t **out);

/* *out: an array of entries: of one account in its seqId order, or
 * (account NULL) all in creation order; paged by page (may be NULL). */
int dtx_ledger_list(dtx_store_t *st, const char *account,
                    const dtx_page_t *page, json_t **out);

/* ---- versioned documents ------------------------------------------------------
 *
 * An item is a root document plus children, each child stored per version,
 * so a change that spans many documents becomes visible all at once:
 *   version_roots    {_id: item, version, next, root, manifest: {KEY: v},
 *                     dead: [v...], unfinished: [v...], committed_at}
 *   version_log      {_id: "item@v", item, version, state, base, root,
 *                     manifest, owner, lease_until, epoch, updated, ...}
 *   version_children {_id: "item@v/KEY", item, version, key, doc}
 * A writer reserves the next version (a counter on the root; numbers are
 * never reused), records it (state writing, under a lease), writes the
 * children it names under that version, and commits by moving the root
 * to it in ONE conditional step, which also takes the manifest (KEY ->
 * the version holding that child).  Readers read the root and then
 * exactly the children its manifest names: children are immutable, so a
 * reader never sees a mix of two versions.  A reservation abandoned by a
 * crashed or stalled writer is marked dead on the root by recovery (after
 * its lease), so it can never commit, and its children are deleted.
 * src/txn/version/version.c has the diagram and invariants, docs/versions.md
 * the design. */

#define DTX_VERSION_ROOTS "version_roots"
#define DTX_VERSION_LOG "version_log"
#define DTX_VERSION_CHILDREN "version_children"

typedef struct dtx_version_child {
  const char *key;   /* 1..100 of [A-Za-z0-9_:-] */
  const json_t *doc; /* any JSON value */
} dtx_version_child_t;

typedef struct dtx_version_put_req {
  const char *item;   /* 1..100 of [A-Za-z0-9_.:-] */
  const json_t *root; /* the root document of the new version */
  const dtx_version_child_t *children; /* written under the new version */
  size_t nchildren;
  const char *const *remove; /* keys dropped from the new version */
  size_t nremove;
  int expect;             /* 1: commit only over expect_version */
  int64_t expect_version; /* 0: the item must not exist yet */
} dtx_version_put_req_t;

/* Writes a new version of req->item: children named carry their new
 * documents, removed keys are dropped, every other child carries over
 * from the version it is committed over.  *version (may be NULL)
 * receives the new version.  With expect, a current version other than
 * expect_version is DTX_ECONFLICT (nothing becomes visible).  Without it,
 * a put that loses the race to a later reservation reserves again and
 * rewrites, within opts' deadline.  A key both named and removed, or
 * named twice, is DTX_EINVAL. */
int dtx_version_put(dtx_store_t *st, const dtx_version_put_req_t *req,
                    const dtx_exec_opts_t *opts, int64_t *version);

/* *out: {"item","version","root","children":{KEY: DOC}} as of the
 * current committed version (version 0) or of version (> 0, a committed
 * version not yet removed by gc).  DTX_ENOTFOUND when there is none. */
int dtx_version_get(dtx_store_t *st, const char *item, int64_t version,
                    json_t **out);

/* *out: an array, one per version in order, of
 * {"version","committed","children":[KEYS]}: the committed versions still
 * kept, and (committed false) reservations still being written. */
int dtx_version_history(dtx_store_t *st, const char *item, json_t **out);

typedef struct dtx_version_gc_opts {
  int64_t keep;     /* committed versions kept per item; 0: 10 */
  int64_t grace_ms; /* a version superseded less than this long ago is
                       kept (a reader may be reading it); 0: 60000 */
} dtx_version_gc_opts_t;

/* Removes, for every item, the committed versions older than the last
 * `keep`, unless superseded less than grace_ms ago, and the children no
 * kept version names.  *summary (may be NULL): {"items","versions_removed",
 * "children_removed"}.  opts may be NULL. */
int dtx_version_gc(dtx_store_t *st, const dtx_version_gc_opts_t *opts,
                   json_t **summary);

#ifdef __cplusplus
}
#endif
#endif /* DOCTX_H */
