/* store_int.h -- what the files of the public store API share; nothing
 * outside them includes it (backends include store.h alone).
 *
 *   store.c        the shared checks and compilation below, open/close,
 *                  indexes, collections and their rules
 *   store_write.c  insert, update, delete
 *   store_read.c   find, count, aggregate
 *   store_bulk.c   bulk_write
 *
 * Ownership: a dtx_store_t owns its backend handle and a copy of its URI,
 * both freed by dtx_store_close(); it is immutable after dtx_store_open().
 * An st_compiled_t owns what it holds until dtx__st_compiled_free. */
#ifndef DTX_STORE_INT_H
#define DTX_STORE_INT_H

#include "store/store.h"

struct dtx_store {
  const dtx_store_methods_t *m;
  dtx__backend_t *b;
  char *uri;   /* as given, password included: dtx__store_uri_secret */
  char *shown; /* its password masked: dtx_store_uri */
  uint64_t serial; /* dtx__store_serial: unique per handle in this process */
};

/* Checks the arguments every collection-level call shares: st non-NULL
 * and a valid collection name (dtx__coll_check).  Every operation on a
 * collection passes here, so it is also where the benchmark's operation
 * counter ticks. */
int dtx__st_check_coll(const dtx_store_t *st, const char *coll);

/* A filter and (for updates) an update, compiled.  The backend gets
 * filter_spec as given, except that a NULL filter becomes a real {}, as
 * store.h promises backends. */
typedef struct compiled {
  json_t *empty; /* owned {} standing in for a NULL filter */
  const json_t *filter;
  dtx__filter_t *f;
  dtx__update_t *u;
} st_compiled_t;

/* Compiles filter (and, with with_update, update and its array_filters)
 * into *c, which borrows filter, update and array_filters: they must
 * outlive it and not change until it is freed (the compiled forms hold
 * references to their values, DTX__COMPILE_BORROW).  On
 * error nothing is left to free; else free *c with dtx__st_compiled_free,
 * which leaves it empty. */
int dtx__st_compile(const json_t *filter, const json_t *update,
                    const json_t *array_filters, int with_update,
                    st_compiled_t *c);
void dtx__st_compiled_free(st_compiled_t *c);

/* A matching error the filter of c met (a $regex past PCRE2's limits)
 * in place of the backend's rc, else rc. */
int dtx__st_match_error(const st_compiled_t *c, int rc);

/* Checks a sort and a projection; NULL skips either check. */
int dtx__st_check_sort_proj(const json_t *sort, const json_t *projection);

/* Replaces *doc (owned by the caller) by its projection, a no-op without
 * proj or *doc; on error *doc is unchanged.  f, the query's filter,
 * serves a positional "path.$" with the element it matched in matched
 * (NULL: *doc itself). */
int dtx__st_project_in_place(json_t **doc, const dtx__proj_t *proj,
                             const dtx__filter_t *f, const json_t *matched);


/* The checks every modifying call shares (store_write.c), then compiles
 * filter (and update unless this is a delete) into c and describes the
 * request in m, which borrows from c (and from the arguments).  On error
 * nothing is left to free; else the caller frees c with
 * dtx__st_compiled_free once m is no longer used. */
int dtx__st_modify_prepare(dtx_store_t *st, const char *coll,
                           const json_t *filter, const json_t *update,
                           const json_t *array_filters, int is_delete,
                           int bypass, const char *fence_name,
                           int64_t fence_token, dtx__modify_t *m,
                           st_compiled_t *c);

#endif
