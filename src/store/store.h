/* store.h -- the backend method table, as SQLite's VFS.
 *
 * src/store/store.c and its siblings (store_int.h lists them) implement
 * the public dtx_store_* API: they validate and compile filters and
 * updates, generate _ids, apply projections, and then call one backend
 * through this table.  A backend is one folder
 * under src/store/ and one line in store.c's registry; the core never
 * includes a backend's headers.
 *
 * Contract for every backend:
 *  - Each method that changes a document does so atomically and isolated
 *    from every other thread and process using the same store: the filter
 *    check, the update and the index maintenance of one document happen as
 *    one step.  The change is durable, to the level the URI asks for, when
 *    the method returns.
 *  - Inputs are already validated: collection names are checked, filters
 *    and updates compiled, documents carry a valid _id.
 *  - Errors are DTX_E* codes with a detail (util/err.h); a backend's own
 *    codes never escape.  On error nothing was changed, except where a
 *    method says otherwise.
 *  - Out-parameters follow doctx.h's conventions.
 *  - Collection rules live in the backend's catalog, versioned with it
 *    like the indexes, so that every process sees a change before its next
 *    write.  Every document a method stores or deletes is first passed to
 *    dtx__doc_check_write() (src/doc/doc.h) with the rules of the catalog
 *    version the write commits under, inside the same atomic step; the
 *    rewrite of existing documents by an index build is not a write of a
 *    new document and is not checked.
 *  - Collection names are case-sensitive: "Foo" and "foo" are two
 *    collections on every backend, as in MongoDB. */
#ifndef DTX_STORE_H
#define DTX_STORE_H

#include "doc/bdoc.h"
#include "doc/bupdate.h"
#include "doc/doc.h"
#include "doctx.h"

typedef struct dtx__backend dtx__backend_t; /* each backend defines it */

/* One single-document modification (find_one_and_update/delete, update one,
 * delete one), or the per-document step of a *_many call. */
typedef struct dtx__modify {
  const char *coll;
  const json_t *filter_spec;    /* as given ({} when NULL) */
  const dtx__filter_t *filter;  /* compiled filter_spec */
  const json_t *update_spec;    /* NULL for a delete */
  const dtx__update_t *update;  /* compiled update_spec, NULL for delete */
  const json_t *sort;           /* checked sort spec or NULL */
  int upsert;                   /* insert when nothing matches */
  int bypass;                   /* skip the validator / delete guard */
  const char *fence_name;       /* NULL, or the lock fencing this write */
  int64_t fence_token;          /* its token (>= 1) */
  int64_t not_before;           /* a time-bounded write (window.c): */
  int64_t not_after;            /* wall-clock ms, 0 for no bound */
} dtx__modify_t;

/* The outcome of one modify_one call. */
typedef struct dtx__modify_result {
  int matched;      /* a document matched the filter */
  int modified;     /* it changed (or was deleted) */
  json_t *before;   /* the matched document, new ref; NULL if none */
  json_t *after;    /* after the update (or the upserted doc); NULL after a
                       delete or when nothing matched */
  json_t *upserted_id; /* _id of an upserted document, else NULL */
} dtx__modify_result_t;

/* One operation of a bulk write, compiled by store_bulk.c.  An insert has
 * doc set (a prepared copy with its _id) and m.coll, m.bypass; every
 * other kind is a modify_one request in m.  The backend fills rc, detail
 * (when rc < 0) and res; ops already failed in store_bulk.c (rc < 0 on
 * entry) are left alone. */
typedef struct dtx__bulk_op {
  dtx__modify_t m;
  json_t *doc;              /* insert: the document (owned by store_bulk.c) */
  int rc;
  char detail[512];
  dtx__modify_result_t res; /* modify: as modify_one fills it */
} dtx__bulk_op_t;

/* Reached once per operation of a bulk write, as the backend starts it
 * (doctx faults lists it): an injected error fails that operation alone;
 * a crash leaves each operation all or nothing (SQLite: the whole batch
 * transaction is lost). */
#define DTX__FP_BULK_OP "store.bulk_op"

/* Records rc and the current detail as op's outcome. */
void dtx__bulk_op_fail(dtx__bulk_op_t *op, int rc);

typedef struct dtx_store_methods {
  int version;          /* 4: every member below is set */
  const char *scheme;   /* URI scheme this backend serves: "sqlite" */
  const char *uri_form; /* for messages: "sqlite:PATH" */

  /* uri is the whole URI, scheme included; flags are dtx_store_open_ex's
   * (DTX_OPEN_NOCREATE: create nothing, "no store at PATH" instead). */
  int (*open)(const char *uri, unsigned flags, dtx__backend_t **out);
  void (*close)(dtx__backend_t *b);

  /* Inserts docs[0..n) in order, each atomically; stops at the first error
   * with *ninserted counting those that went in (they stay).  bypass skips
   * the validator. */
  int (*insert)(dtx__backend_t *b, const char *coll, json_t *const *docs,
                size_t n, int bypass, size_t *ninserted);

  /* Matching documents in sort order (insertion/_id order without sort),
   * after skip, at most limit (0 = all), as a new array.  A query on
   * indexed fields must not scan the collection. */
  int (*find)(dtx__backend_t *b, const char *coll, const json_t *filter_spec,
              const dtx__filter_t *filter, const json_t *sort, int64_t skip,
              int64_t limit, json_t **out);

  int (*count)(dtx__backend_t *b, const char *coll, const json_t *filter_spec,
               const dtx__filter_t *filter, int64_t *out);

  /* Atomically: pick the first match (by m->sort), apply m->update (or
   * delete when m->update is NULL), maintain indexes; or upsert.  res is
   * filled on success and zeroed on error. */
  int (*modify_one)(dtx__backend_t *b, const dtx__modify_t *m,
                    dtx__modify_result_t *res);

  /* Applies m to every match, each document atomically on its own (as
   * MongoDB's updateMany/deleteMany).  On error the documents already
   * changed stay changed; the counts say how many. */
  int (*modify_many)(dtx__backend_t *b, const dtx__modify_t *m,
                     int64_t *matched, int64_t *modified);

  /* Never called for the name _id_: store.c answers that itself. */
  int (*create_index)(dtx__backend_t *b, const char *coll,
                      const dtx__index_spec_t *spec);
  /* *out: a new array of coll's indexes (dtx__index_spec_json), the _id
   * index left out (store.c adds it), or NULL when coll does not exist. */
  int (*list_indexes)(dtx__backend_t *b, const char *coll, json_t **out);
  int (*drop_collection)(dtx__backend_t *b, const char *coll);
  int (*list_collections)(dtx__backend_t *b, json_t **out);

  /* Version 2. */
  /* Replaces coll's rules (creating coll when missing) by spec, the
   * normalised form dtx__rules_spec() gives (already compiled and checked),
   * or removes them when spec is NULL.  On return every writer of every
   * process is bound to the new rules (a catalog change). */
  int (*set_rules)(dtx__backend_t *b, const char *coll, const json_t *spec);
  /* *out: the stored spec (new reference), or NULL when coll has none or
   * does not exist.  Read from the store, not a cache. */
  int (*get_rules)(dtx__backend_t *b, const char *coll, json_t **out);

  /* Version 3. */
  /* Runs ops[0..n), each exactly as insert (of one document) or
   * modify_one would run it alone -- atomic, isolated, its own outcome in
   * ops[i].rc/detail/res -- but sharing the store's cost: one write
   * transaction, one pipeline per node.  No order between them is
   * promised.  Reaches DTX__FP_BULK_OP once per operation it starts.
   * Returns 0; a negative code means nothing ran (every op fails with
   * it). */
  int (*bulk)(dtx__backend_t *b, dtx__bulk_op_t *ops, size_t n);

  /* Version 4. */
  /* *out: a new array of the fence records (objects {NAME: token}) that
   * coll's fence tombstones keep (fence.c), one per tombstone, in no
   * order; empty when there are none or coll does not exist.  A read, as
   * find; the tombstones stay invisible to every other read. */
  int (*fence_records)(dtx__backend_t *b, const char *coll, json_t **out);
} dtx_store_methods_t;

/* The contract above, checked by store.c after every method call with
 * DTX_ASSERT (util/assert.h), so a backend that breaks it aborts naming
 * the rule ("store.modified<=matched") instead of handing a caller an
 * outcome it would misread.  dtx__st_check_rc: rc is 0 or a DTX_E* code,
 * with a detail (detail: the backend's text) when it is an error.
 * dtx__st_check_modify: a modify_one outcome (or a bulk operation's) as
 * the method promises it for the request m. */
void dtx__st_check_rc(int rc, const char *detail);
void dtx__st_check_modify(const dtx__modify_t *m,
                          const dtx__modify_result_t *res, int rc,
                          const char *detail);

extern const dtx_store_methods_t dtx__sqlite_methods;
extern const dtx_store_methods_t dtx__redis_methods; /* with DTX_REDIS */

/* ---- URI options (uri.c) ---------------------------------------------------- */

/* One option a backend's URI takes after '?', as name=value pairs joined
 * by '&'.  Each backend declares a table of them; dtx__uri_opts parses
 * the pairs into the backend's settings struct, with one error text per
 * kind of mistake whatever the backend. */
enum {
  DTX__URI_INT,  /* an int in lo..hi, digits only */
  DTX__URI_WORD, /* one of words ("off|normal|full"): its index, an int */
  DTX__URI_NAME, /* lo..hi of [A-Za-z0-9_-] into a char[hi + 1] */
  DTX__URI_TEXT  /* any text without control bytes, into a malloc'd char *
                  * (the caller frees it); never shown in a message */
};

typedef struct dtx__uri_opt {
  const char *name;
  int kind;
  size_t off; /* offsetof the setting in the settings struct */
  int lo, hi;
  const char *words; /* DTX__URI_WORD */
  int once;          /* a repeat is refused (else the last one counts) */
} dtx__uri_opt_t;

/* Parses query (the text after uri's '?') by the nopts (at most 64)
 * options of opts into the struct at out; settings not named keep their
 * values.  0, or DTX_EBADURI naming uri and the mistake (an empty list, a
 * pair without '=', an unknown or repeated option, a bad value, a
 * trailing '&'), or DTX_ENOMEM; what was set before the mistake stays. */
int dtx__uri_opts(const char *uri, const char *query,
                  const dtx__uri_opt_t *opts, size_t nopts, void *out);

/* uri with its secrets masked, for every message and dtx_store_uri: in
 * a scheme://USER:PASSWORD@ userinfo the password becomes *** (all of a
 * userinfo without ':'), and so does each password= option's value.  A
 * new string the caller frees, or NULL when out of memory. */
char *dtx__uri_masked(const char *uri);

/* A scheme://USER:PASSWORD@ userinfo (the n bytes at s, without the '@'),
 * percent-decoded into two new strings the caller frees.  0; DTX_EBADURI
 * (naming shown, the masked URI) for a user without a password, a bad
 * '%' escape or a control byte (%00 included); or DTX_ENOMEM.  An empty
 * USER stays "" (the caller decides what it means). */
int dtx__uri_userinfo(const char *shown, const char *s, size_t n,
                      char **user, char **password);

/* The int of the n digits at s when it is in lo..hi: 0 with *out set,
 * else -1 (no digits, a non-digit, more than 9 digits, out of range). */
int dtx__uri_int(const char *s, size_t n, int lo, int hi, int *out);

/* Documents a backend loaded on this thread to evaluate filters (every
 * candidate it ran the matcher on).  Tests read it to prove that a query
 * on indexed fields does not scan the collection. */
extern _Thread_local int64_t dtx__docs_examined;

/* The fence records coll's fence tombstones keep (the backend's
 * fence_records): what deleted documents' _fence said, for a reader that
 * must know every token a lock name has fenced -- a lock created again
 * after its collection was dropped, and the lock audit (docs/locks.md).
 * *out is a new array of {NAME: token} objects (empty for a missing
 * collection); NULL on error. */
int dtx__store_fence_records(dtx_store_t *st, const char *coll, json_t **out);

/* The process's catalog generation: raised after every drop of a
 * collection and every change of a collection's rules made through this
 * library in this process, on any handle.  A cache above the store of
 * what some catalog holds (the kit's memo of the indexes it created,
 * txn/registry.c) reads it before filling an entry and trusts the entry
 * only while it is unchanged.  A drop by another process does not raise
 * it. */
uint64_t dtx__store_catalog_gen(void);

/* How many store operations (public dtx_store_* calls) this process has
 * made; the transfer benchmark reports operations per transfer. */
int64_t dtx__store_calls(void);
void dtx__store_count_call(void);

/* A number naming this handle, unique among the handles this process has
 * opened (never reused, unlike the pointer after a close), so a cache
 * above the store can key on it without outliving the handle's data. */
uint64_t dtx__store_serial(const dtx_store_t *st);

/* The URI st was opened with, password included (dtx_store_uri masks
 * it): only for handing to a process that opens the same store (a job
 * command's DOCTX_STORE), never for a message. */
const char *dtx__store_uri_secret(const dtx_store_t *st);

/* Network exchanges with the store's servers (the Redis backend counts
 * them; SQLite has none): round_trips is one per pipeline written to a
 * connection and answered, commands what those pipelines carried.
 * bench_redis reports both per transfer, beside the server's ceiling. */
void dtx__store_count_rt(int64_t round_trips, int64_t commands);
int64_t dtx__store_round_trips(void);
int64_t dtx__store_commands(void);

/* ---- corrupt stored documents (check.c) ------------------------------------- */

/* A read that meets a stored body it cannot read (bytes that fail the
 * stored-body check, a body that is no document) fails with
 * DTX_ECORRUPT naming the collection and the _id -- unless this thread
 * collects them: the audit does (src/txn/frame/audit.c), so that one bad
 * document is a finding and the audit reads every other one.  Then the
 * backend's dtx__corrupt_skip(rc) appends the error's detail (a string,
 * once a document) to the list, clears the error and returns 1, and the
 * read goes on as if the document were absent; for any other rc, or
 * without a collector, it returns 0 and the read fails.  Writes never
 * skip: a backend calls it from reads only.  dtx__corrupt_collect(list)
 * starts collecting into list (borrowed, an array the caller owns), NULL
 * stops. */
void dtx__corrupt_collect(json_t *list);
int dtx__corrupt_skip(int rc);

/* The body a backend stores for doc (both keep BSON, docs/engine.md "The
 * store format"): the bridge's bytes in *out (initialised by the caller,
 * who destroys it).  DTX_ELIMIT past 16 MiB, naming coll: a write's check
 * counts the same bytes (dtx__value_bson_size), so only a rewrite of a
 * document stored under the older, rougher count can meet it. */
int dtx__store_body(const json_t *doc, const char *coll, bson_t *out);

/* Frees the references held by res and zeroes it. */
void dtx__modify_result_clear(dtx__modify_result_t *res);

/* DTX_EDUPKEY with the detail every backend gives: the index name and the
 * key as {path: value}, from the n values of tuple (a JSON array) under
 * paths.  dtx__err_dupid is the same for the _id_ index. */
int dtx__err_dupkey(const char *index, const char *const *paths,
                    const json_t *tuple, size_t n);
int dtx__err_dupid(const json_t *id);

/* ---- fenced writes (fence.c) ------------------------------------------------ */

/* The one step every backend runs on the document a modify matched, inside
 * its atomic step, where it would apply m->update: the fence test (a
 * larger token recorded in before's _fence: DTX_EFENCED, nothing changes),
 * then the update (none for a delete: *after NULL), keeping before's
 * _fence across a replacement, then the token recorded.  *after is a new
 * document (NULL on error or for a delete); *changed is 1 when it differs
 * from before (always 1 for a delete).  The backend then checks *after
 * with dtx__doc_check_write as before. */
int dtx__modify_apply(const dtx__modify_t *m, const json_t *before,
                      int64_t now, json_t **after, int *changed);

/* The document an upserting m inserts: dtx__upsert_doc without any _fence
 * the filter seeded, plus m's token when fenced.  *out is new. */
int dtx__modify_upsert_doc(const dtx__modify_t *m, int64_t now, json_t **out);

/* Fence tombstones (docs/locks.md).  A delete of a document that carries
 * a _fence record, or a fenced delete, leaves a record under the
 * document's _id: *rec (new, or NULL when there is nothing to keep) is
 * before's _fence with m's token recorded.  The backend stores it in the
 * same atomic step as the delete, invisible to every read, count, index
 * and scan, and keeps it until that _id is created again or the
 * collection is dropped (never on a timer: a stale holder may be paused
 * for any time).  Whatever stored record exists for the _id of a document
 * about to be created (an insert: m NULL; an upsert: m) goes through
 * dtx__fence_revive in the same atomic step: a fenced upsert is judged
 * against it as against a stored document's record (DTX_EFENCED, doc
 * unchanged), then doc (the caller's private copy) receives each token of
 * rec it lacks or holds lower, and the backend removes the record. */
int dtx__fence_tombstone(const dtx__modify_t *m, const json_t *before,
                         json_t **rec);
int dtx__fence_revive(const dtx__modify_t *m, const char *coll,
                      const json_t *rec, json_t *doc);

/* The BSON twins of the four above (bfence.c), the same rule on stored
 * bytes, giving the same codes, details, *changed and field order
 * (tests/unit/test_bfence.c runs each row through both).  Every document
 * passed as (bytes, len) is a whole document that passed dtx__bson_check
 * or was written by libbson; all are borrowed, and each bson_t ** out is
 * a new document the caller bson_destroy()s, NULL on error.
 *  - dtx__bmodify_apply: dtx__modify_apply with the compiled update u in
 *    place of m->update (u NULL: a delete, the test alone, *after NULL).
 *    A token written by it is an int64; an int32 one the bridge wrote
 *    reads the same.  *changed is 1 when *after's bytes differ from
 *    before's, as dtx__modify_apply's: field order counts, but where a
 *    replacement dropped _fence and it went back last, _fence's own
 *    place does not (a replacement that writes the document back as it
 *    was is no write).
 *  - dtx__bmodify_upsert_doc: the document an upserting m inserts, from
 *    its filter's bytes (NULL: {}) and u, by dtx__bupsert_doc.
 *  - dtx__bfence_tombstone: *rec is the record to keep, or NULL when
 *    there is nothing to keep.
 *  - dtx__bfence_revive: BSON is not edited in place, so the document to
 *    create is *out, a new one (a copy of doc when rec adds nothing); doc
 *    is untouched.  rec (rlen bytes) is the stored record, m NULL for an
 *    insert as in dtx__fence_revive; on DTX_EFENCED nothing is made. */
int dtx__bmodify_apply(const dtx__modify_t *m, const dtx__bupdate_t *u,
                       const uint8_t *before, uint32_t blen, int64_t now,
                       bson_t **after, int *changed);
int dtx__bmodify_upsert_doc(const dtx__modify_t *m, const dtx__bupdate_t *u,
                            const uint8_t *filter, uint32_t flen, int64_t now,
                            bson_t **out);
int dtx__bfence_tombstone(const dtx__modify_t *m, const uint8_t *before,
                          uint32_t blen, bson_t **rec);
int dtx__bfence_revive(const dtx__modify_t *m, const char *coll,
                       const uint8_t *rec, uint32_t rlen, const uint8_t *doc,
                       uint32_t dlen, bson_t **out);

/* Argument checks of store.c: a fence name is 1..128 of [A-Za-z0-9_.:-]
 * and its token >= 1 (name NULL: no fence, 0); a user update may not name
 * _fence (DTX_EBADUPDATE); an inserted document's _fence, when present,
 * must be {NAME: token >= 1, ...} (DTX_EINVAL). */
int dtx__fence_name_check(const char *name);
int dtx__fence_check_args(const char *name, int64_t token);
int dtx__fence_check_update(const json_t *update);
int dtx__fence_check_doc(const json_t *doc);

/* A document as an insert checks it (store.c): in *out (new, the
 * caller's), a deep copy of doc with a valid _id, generated first in key
 * order (as MongoDB does) when missing, its names, size and _fence
 * checked (DTX_EINVAL); doc itself is never modified.  *out is NULL on
 * error.  Also the check a transaction's insert makes before any write
 * (src/txn/multi). */
int dtx__st_prepare_doc(const char *coll, const json_t *doc, json_t **out);

/* ---- time-bounded writes (window.c) ------------------------------------------ */

/* Checks and sets m's bounds (doctx.h, "time-bounded writes"): each >= 0
 * (0: none) and not_before <= not_after when both are set; DTX_EINVAL
 * otherwise, m unchanged. */
int dtx__window_set(dtx__modify_t *m, int64_t not_before, int64_t not_after);

/* 1 when m carries a bound. */
int dtx__window_any(const dtx__modify_t *m);

/* The one test of a bounded write, at the store's clock now (ms), on the
 * document doc it would write (for the detail; may be NULL): 0 when now
 * is within m's bounds, else DTX_ESTALE (past not_after) or DTX_ESTATE
 * (before not_before) with the detail every backend gives.  SQLite calls
 * it inside its write transaction; Redis with the server time its write
 * script refused at. */
int dtx__window_test(const dtx__modify_t *m, const json_t *doc, int64_t now);

/* dtx__window_test on a document's bytes (doc NULL: none, an upsert's
 * document to come): the same codes and details. */
int dtx__bwindow_test(const dtx__modify_t *m, const uint8_t *doc,
                      uint32_t len, int64_t now);

/* The rule of an update of many documents: no replacement document
 * (DTX_EBADUPDATE).  dtx_store_update and dtx_check_update both use it. */
int dtx__many_check(const dtx__update_t *u);

/* Checks a collection name: 1..120 bytes of [A-Za-z0-9_.-], not starting
 * with "_dtx" or "system.".  DTX_EINVAL otherwise. */
int dtx__coll_check(const char *coll);

#endif
