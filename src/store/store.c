/* store.c -- the public dtx_store_* API on top of the backend method table.
 *
 * This is the one place where caller input is checked: collection names,
 * filter/update/sort/projection shapes, skip and limit, documents and their
 * _ids.  Filters and updates are compiled here (src/doc) and handed to the
 * backend already compiled, so every backend sees only valid requests and
 * shares one definition of MongoDB's semantics.  Projections are applied
 * here too, after the backend returns, because they never affect which
 * document is chosen.  The backend is picked by the URI's scheme from the
 * registry below; a new backend is one line there.
 *
 * Ownership: a dtx_store_t owns its backend handle and a copy of its URI;
 * both are freed by dtx_store_close().  The handle is immutable after
 * dtx_store_open(), so sharing it between threads needs no locking here. */
#include "store/store.h"

#include "util/err.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local int64_t dtx__docs_examined;

/* Raised after (never before) the change: a reader that saw the old value
 * before the change started fills its cache entry with that old value,
 * and the next look sees the new one. */
static _Atomic uint64_t catalog_gen;

uint64_t dtx__store_catalog_gen(void) { return catalog_gen; }

/* The registry: one line per backend, matched by URI scheme. */
static const dtx_store_methods_t *const backends[] = {
    &dtx__sqlite_methods,
#ifdef DTX_HAVE_REDIS
    &dtx__redis_methods,
#endif
};
#define NBACKENDS (sizeof backends / sizeof backends[0])

struct dtx_store {
  const dtx_store_methods_t *m;
  dtx__backend_t *b;
  char *uri;
  uint64_t serial; /* dtx__store_serial: unique per handle in this process */
};

#define DEFAULT_URI "sqlite:./doctx.db"

/* ---- helpers -------------------------------------------------------------- */

void dtx__modify_result_clear(dtx__modify_result_t *res) {
  if (!res)
    return;
  json_decref(res->before);
  json_decref(res->after);
  json_decref(res->upserted_id);
  memset(res, 0, sizeof *res);
}

int dtx__many_check(const dtx__update_t *u) {
  if (dtx__update_is_replacement(u))
    return dtx__err(DTX_EBADUPDATE, "a replacement document cannot update "
                    "many documents (many, --many)");
  return 0;
}

int dtx__coll_check(const char *coll) {
  if (!coll)
    return dtx__err(DTX_EINVAL, "collection name is NULL");
  size_t n = strlen(coll);
  if (n == 0)
    return dtx__err(DTX_EINVAL, "collection name is empty");
  if (n > 120)
    return dtx__err(DTX_EINVAL,
                    "collection name '%.40s...' is longer than 120 bytes", coll);
  for (size_t i = 0; i < n; i++) {
    char c = coll[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
      return dtx__err(DTX_EINVAL,
                      "collection name '%s' has a character outside "
                      "[A-Za-z0-9_.-]",
                      coll);
  }
  if (strncmp(coll, "_dtx", 4) == 0 || strncmp(coll, "system.", 7) == 0)
    return dtx__err(DTX_EINVAL, "collection name '%s' is reserved", coll);
  return 0;
}

/* The one duplicate-key message of every backend: the index and the key
 * as {path: value, ...}, e.g. duplicate key {"email":"a@x"} in unique
 * index 'email_1'. */
int dtx__err_dupkey(const char *index, const char *const *paths,
                    const json_t *tuple, size_t n) {
  json_t *k = json_object();
  for (size_t i = 0; k && i < n; i++)
    json_object_set(k, paths[i], json_array_get(tuple, i));
  char *text = k ? dtx__json_dump(k) : NULL;
  json_decref(k);
  int rc = dtx__err(DTX_EDUPKEY, "duplicate key %s in unique index '%s'",
                    text ? text : "?", index);
  free(text);
  return rc;
}

int dtx__err_dupid(const json_t *id) {
  static const char *const idpath[] = {"_id"};
  json_t *t = json_pack("[O]", id);
  int rc = dtx__err_dupkey("_id_", idpath, t, 1);
  json_decref(t);
  return rc;
}

/* Checks the arguments every collection-level call shares. */
/* Every operation on a collection passes here, so it is also where the
 * benchmark's operation counter ticks. */
static int check_st_coll(const dtx_store_t *st, const char *coll) {
  if (!st)
    return dtx__err(DTX_EINVAL, "store is NULL");
  dtx__store_count_call();
  return dtx__coll_check(coll);
}

/* A filter and (for updates) an update, compiled.  The backend gets
 * filter_spec as given, except that a NULL filter becomes a real {}, as
 * store.h promises backends. */
typedef struct compiled {
  json_t *empty; /* owned {} standing in for a NULL filter */
  const json_t *filter;
  dtx__filter_t *f;
  dtx__update_t *u;
} compiled_t;

static void compiled_free(compiled_t *c) {
  if (c->f)
    dtx__filter_free(c->f);
  if (c->u)
    dtx__update_free(c->u);
  json_decref(c->empty);
  memset(c, 0, sizeof *c);
}

/* A filter that is not an object is a mistake in the query, so it is
 * DTX_EBADQUERY rather than EINVAL; likewise EBADUPDATE for an update.
 * On error nothing is left to free. */
static int compile(const json_t *filter, const json_t *update,
                   const json_t *array_filters, int with_update,
                   compiled_t *c) {
  int rc;
  memset(c, 0, sizeof *c);
  if (filter && !json_is_object(filter))
    return dtx__err(DTX_EBADQUERY, "filter must be an object");
  if (!filter && !(filter = c->empty = json_object()))
    return dtx__err(DTX_ENOMEM, "compiling a filter");
  c->filter = filter;
  if ((rc = dtx__filter_compile(filter, &c->f)) < 0)
    goto fail;
  if (with_update) {
    if (!update)
      rc = dtx__err(DTX_EBADUPDATE, "update is NULL");
    else if (!json_is_object(update))
      rc = dtx__err(DTX_EBADUPDATE, "update must be an object");
    else
      rc = dtx__update_compile_ex(update, array_filters, &c->u);
    if (rc < 0)
      goto fail;
    /* The positional $ reads the filter's match; an upsert checks it for
     * a matching error before inserting. */
    dtx__update_bind_filter(c->u, c->f);
  } else if (array_filters) {
    rc = dtx__err(DTX_EBADUPDATE, "arrayFilters are only for updates");
    goto fail;
  }
  return 0;
fail:
  compiled_free(c);
  return rc;
}

/* Sort and projection are optional; NULL skips the check. */
static int check_sort_proj(const json_t *sort, const json_t *projection) {
  int rc;
  if (sort && (rc = dtx__sort_check(sort)) < 0)
    return rc;
  if (projection && (rc = dtx__projection_check(projection)) < 0)
    return rc;
  return 0;
}

/* Replaces *doc by its projection (a no-op without one); f, the query's
 * filter, serves a positional "path.$" with the element it matched in
 * matched (NULL: *doc itself). */
static int project_in_place(json_t **doc, const dtx__proj_t *proj,
                            const dtx__filter_t *f, const json_t *matched) {
  json_t *p;
  int rc;
  if (!proj || !*doc)
    return 0;
  if ((rc = dtx__proj_apply_at(proj, *doc, f, matched, &p)) < 0)
    return rc;
  json_decref(*doc);
  *doc = p;
  return 0;
}

/* A matching error (a $regex past PCRE2's limits) means the backend's
 * "no match" answers were not true: the whole call fails with it. */
static int match_error(const compiled_t *c, int rc) {
  int e = dtx__filter_error(c->f);
  return e ? e : rc;
}

/* A deep copy of doc with a valid _id, generated first in key order (as
 * MongoDB does) when missing.  doc itself is never modified.  A document
 * nested too deeply is refused here already, so that insert_many inserts
 * nothing when one of its documents is; the backend checks again (with
 * the collection's rules) when it writes. */
static int prepare_doc(const char *coll, const json_t *doc, json_t **out) {
  int rc;
  *out = NULL;
  if (!json_is_object(doc))
    return dtx__err(DTX_EINVAL, "document must be an object");
  if ((rc = dtx__fence_check_doc(doc)) < 0)
    return rc;
  json_t *id = json_object_get(doc, "_id");
  if (id) {
    if ((rc = dtx__id_check(id)) < 0 ||
        (rc = dtx__doc_check_write(NULL, coll, NULL, doc, 1)) < 0)
      return rc;
    if (!(*out = json_deep_copy(doc)))
      return dtx__err(DTX_ENOMEM, "copying a document");
    return 0;
  }
  char hex[25];
  dtx__id_new(hex);
  json_t *copy = json_object();
  if (!copy || json_object_set_new(copy, "_id", json_string(hex)) < 0)
    goto nomem;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)doc, k, v) {
    if (json_object_set_new(copy, k, json_deep_copy(v)) < 0)
      goto nomem;
  }
  if ((rc = dtx__doc_check_write(NULL, coll, NULL, copy, 1)) < 0) {
    json_decref(copy);
    return rc;
  }
  *out = copy;
  return 0;
nomem:
  json_decref(copy);
  return dtx__err(DTX_ENOMEM, "copying a document");
}

/* ---- open / close ------------------------------------------------------------ */

/* What a bad scheme's message suggests: every registered backend's URI
 * form, so the list can never be out of date. */
static const char *known_schemes(void) {
  static _Thread_local char text[160];
  size_t n = 0;
  text[0] = '\0';
  for (size_t i = 0; i < NBACKENDS && n < sizeof text; i++)
    n += (size_t)snprintf(text + n, sizeof text - n, "%s%s", i ? " or " : "",
                          backends[i]->uri_form);
  return text;
}

int dtx_store_open(const char *uri, dtx_store_t **out) {
  return dtx_store_open_ex(uri, 0, out);
}

int dtx_store_open_ex(const char *uri, unsigned flags, dtx_store_t **out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  if (flags & ~DTX_OPEN_NOCREATE)
    return dtx__err(DTX_EINVAL, "unknown open flags 0x%x",
                    flags & ~DTX_OPEN_NOCREATE);
  if (!uri) {
    uri = getenv("DOCTX_STORE");
    if (!uri || !*uri)
      uri = DEFAULT_URI;
  }
  const char *colon = strchr(uri, ':');
  if (!colon || colon == uri)
    return dtx__err(DTX_EBADURI,
                    "store URI '%s' has no scheme (expected %s)", uri,
                    known_schemes());
  size_t slen = (size_t)(colon - uri);
  const dtx_store_methods_t *m = NULL;
  for (size_t i = 0; i < NBACKENDS; i++) {
    if (strlen(backends[i]->scheme) == slen &&
        strncmp(backends[i]->scheme, uri, slen) == 0) {
      m = backends[i];
      break;
    }
  }
  if (!m)
    return dtx__err(DTX_EBADURI, "unknown scheme '%.*s' (expected %s)",
                    (int)slen, uri, known_schemes());
  if (m->version < 2)
    return dtx__err(DTX_EBACKEND, "backend '%s' has version %d", m->scheme,
                    m->version);

  dtx_store_t *st = calloc(1, sizeof *st);
  if (!st || !(st->uri = strdup(uri))) {
    free(st);
    return dtx__err(DTX_ENOMEM, "opening %s", uri);
  }
  st->m = m;
  static _Atomic uint64_t opened;
  st->serial = ++opened;
  int rc = m->open(uri, flags, &st->b);
  if (rc < 0) {
    free(st->uri);
    free(st);
    return rc;
  }
  *out = st;
  return 0;
}

void dtx_store_close(dtx_store_t *st) {
  if (!st)
    return;
  st->m->close(st->b);
  free(st->uri);
  free(st);
}

const char *dtx_store_uri(const dtx_store_t *st) { return st ? st->uri : NULL; }

uint64_t dtx__store_serial(const dtx_store_t *st) { return st ? st->serial : 0; }

/* ---- insert ---------------------------------------------------------------------- */

int dtx_store_insert(dtx_store_t *st, const char *coll, const json_t *doc,
                     json_t **id_out) {
  return dtx_store_insert_ex(st, coll, doc, NULL, id_out);
}

int dtx_store_insert_ex(dtx_store_t *st, const char *coll, const json_t *doc,
                        const dtx_insert_opts_t *opts, json_t **id_out) {
  dtx__err_clear();
  if (id_out)
    *id_out = NULL;
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  json_t *copy;
  if ((rc = prepare_doc(coll, doc, &copy)) < 0)
    return rc;
  size_t n = 0;
  rc = st->m->insert(st->b, coll, (json_t *const *)&copy, 1,
                     opts && opts->bypass_validation, &n);
  if (rc == 0 && id_out)
    *id_out = json_incref(json_object_get(copy, "_id"));
  json_decref(copy);
  return rc;
}

int dtx_store_insert_many(dtx_store_t *st, const char *coll,
                          const json_t *docs, size_t *ninserted,
                          json_t **ids_out) {
  return dtx_store_insert_many_ex(st, coll, docs, NULL, ninserted, ids_out);
}

/* Every document is checked before the first goes in, so malformed input
 * inserts nothing.  Unlike most out-parameters, *ninserted and *ids_out
 * are also set on a backend error: they describe the documents that did
 * go in before it, which stay. */
int dtx_store_insert_many_ex(dtx_store_t *st, const char *coll,
                             const json_t *docs, const dtx_insert_opts_t *opts,
                             size_t *ninserted, json_t **ids_out) {
  dtx__err_clear();
  if (ninserted)
    *ninserted = 0;
  if (ids_out)
    *ids_out = NULL;
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  if (!json_is_array(docs))
    return dtx__err(DTX_EINVAL, "documents must be an array");
  size_t n = json_array_size(docs);
  json_t **copies = calloc(n ? n : 1, sizeof *copies);
  if (!copies)
    return dtx__err(DTX_ENOMEM, "inserting %zu documents", n);
  size_t ncopied = 0, done = 0;
  for (; ncopied < n; ncopied++) {
    if ((rc = prepare_doc(coll, json_array_get(docs, ncopied),
                          &copies[ncopied])) < 0) {
      dtx__err_wrap(rc, "document %zu", ncopied);
      goto out;
    }
  }
  if (n > 0)
    rc = st->m->insert(st->b, coll, copies, n,
                       opts && opts->bypass_validation, &done);
  if (ninserted)
    *ninserted = done;
  if (ids_out) {
    json_t *ids = json_array();
    for (size_t i = 0; ids && i < done; i++)
      json_array_append(ids, json_object_get(copies[i], "_id"));
    if (!ids && rc == 0)
      rc = dtx__err(DTX_ENOMEM, "listing inserted ids");
    *ids_out = ids;
  }
out:
  for (size_t i = 0; i < ncopied; i++)
    json_decref(copies[i]);
  free(copies);
  return rc;
}

/* ---- find / count -------------------------------------------------------------------- */

int dtx_store_find(dtx_store_t *st, const char *coll, const json_t *filter,
                   const dtx_find_opts_t *opts, json_t **out) {
  dtx__err_clear();
  static const dtx_find_opts_t none;
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  if (!opts)
    opts = &none;
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  if (opts->skip < 0)
    return dtx__err(DTX_EINVAL, "skip must be >= 0, not %lld",
                    (long long)opts->skip);
  if (opts->limit < 0)
    return dtx__err(DTX_EINVAL, "limit must be >= 0, not %lld",
                    (long long)opts->limit);
  compiled_t c;
  dtx__proj_t *proj = NULL;
  if ((rc = check_sort_proj(opts->sort, NULL)) < 0 ||
      (opts->projection &&
       (rc = dtx__proj_compile(opts->projection, &proj)) < 0))
    return rc;
  if ((proj && (rc = dtx__proj_check_query(proj, filter)) < 0) ||
      (rc = compile(filter, NULL, NULL, 0, &c)) < 0) {
    dtx__proj_free(proj);
    return rc;
  }
  json_t *docs = NULL;
  rc = st->m->find(st->b, coll, c.filter, c.f, opts->sort, opts->skip,
                   opts->limit, &docs);
  rc = match_error(&c, rc);
  for (size_t i = 0; rc == 0 && proj && i < json_array_size(docs); i++) {
    json_t *d = json_incref(json_array_get(docs, i));
    if ((rc = project_in_place(&d, proj, c.f, NULL)) < 0)
      json_decref(d);
    else
      json_array_set_new(docs, i, d);
  }
  compiled_free(&c);
  dtx__proj_free(proj);
  if (rc < 0) {
    json_decref(docs);
    return rc;
  }
  *out = docs;
  return 0;
}

int dtx_store_count(dtx_store_t *st, const char *coll, const json_t *filter,
                    int64_t *out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = 0;
  compiled_t c;
  int rc = check_st_coll(st, coll);
  if (rc < 0 || (rc = compile(filter, NULL, NULL, 0, &c)) < 0)
    return rc;
  rc = st->m->count(st->b, coll, c.filter, c.f, out);
  rc = match_error(&c, rc);
  compiled_free(&c);
  if (rc < 0)
    *out = 0;
  return rc;
}

/* ---- update and delete ------------------------------------------------------------------ */

/* The checks every modifying call shares, then compiles filter (and update
 * unless this is a delete) into c and describes the request in m, which
 * borrows from c.  On error nothing is left to free. */
static int modify_prepare(dtx_store_t *st, const char *coll,
                          const json_t *filter, const json_t *update,
                          const json_t *array_filters, int is_delete,
                          int bypass, const char *fence_name,
                          int64_t fence_token, dtx__modify_t *m,
                          compiled_t *c) {
  int rc;
  memset(m, 0, sizeof *m);
  memset(c, 0, sizeof *c);
  if ((rc = check_st_coll(st, coll)) < 0 ||
      (rc = dtx__fence_check_args(fence_name, fence_token)) < 0 ||
      (!is_delete && (rc = dtx__fence_check_update(update)) < 0) ||
      (rc = compile(filter, update, array_filters, !is_delete, c)) < 0)
    return rc;
  m->fence_name = fence_name;
  m->fence_token = fence_token;
  /* A lock holder paused between deciding to write and writing is the
   * case fencing exists for: the fault point to stop it at. */
  if (fence_name && (rc = DTX_FAULTPOINT("fence.write")) < 0) {
    compiled_free(c);
    return rc;
  }
  m->coll = coll;
  m->filter_spec = c->filter;
  m->filter = c->f;
  m->update_spec = is_delete ? NULL : update;
  m->update = c->u;
  m->bypass = bypass;
  return 0;
}

/* updateMany has no upsert of its own in the method table: when nothing
 * matched, an upserting modify_one does it, which re-checks the filter
 * atomically, so a document inserted meanwhile is updated, not doubled. */
int dtx_store_update(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *update, const dtx_update_opts_t *opts,
                     dtx_update_result_t *res) {
  dtx__err_clear();
  static const dtx_update_opts_t none;
  dtx_update_result_t r = {0, 0, NULL};
  if (res)
    memset(res, 0, sizeof *res);
  if (!opts)
    opts = &none;
  dtx__modify_t m;
  compiled_t c;
  int rc = modify_prepare(st, coll, filter, update, opts->array_filters, 0,
                          opts->bypass_validation, opts->fence_name,
                          opts->fence_token, &m, &c);
  if (rc < 0)
    return rc;
  if (opts->many && (rc = dtx__many_check(c.u)) < 0) {
    compiled_free(&c);
    return rc;
  }
  if (opts->many)
    rc = st->m->modify_many(st->b, &m, &r.matched, &r.modified);
  if (rc == 0 && (!opts->many || (r.matched == 0 && opts->upsert))) {
    dtx__modify_result_t mr = {0};
    m.upsert = opts->upsert;
    rc = st->m->modify_one(st->b, &m, &mr);
    if (rc == 0) {
      r.matched = mr.matched ? 1 : 0;
      r.modified = mr.matched && mr.modified ? 1 : 0;
      r.upserted_id = json_incref(mr.upserted_id);
    }
    dtx__modify_result_clear(&mr);
  }
  rc = match_error(&c, rc);
  compiled_free(&c);
  if (rc < 0) {
    json_decref(r.upserted_id);
    return rc;
  }
  if (res)
    *res = r;
  else
    json_decref(r.upserted_id);
  return 0;
}

/* The primitive, and its delete twin (update NULL).  The returned document
 * is taken out of the backend's result, so it is not copied. */
static int find_one_and_modify(dtx_store_t *st, const char *coll,
                               const json_t *filter, const json_t *update,
                               const dtx_fam_opts_t *opts, json_t **out) {
  dtx__err_clear();
  static const dtx_fam_opts_t none;
  int is_delete = update == NULL;
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  if (!opts)
    opts = &none;
  dtx__modify_t m;
  compiled_t c;
  dtx__proj_t *proj = NULL;
  int rc = check_sort_proj(opts->sort, NULL);
  if (rc < 0 || (opts->projection &&
                 (rc = dtx__proj_compile(opts->projection, &proj)) < 0))
    return rc;
  if (proj && (rc = dtx__proj_check_query(proj, filter)) < 0) {
    dtx__proj_free(proj);
    return rc;
  }
  if ((rc = modify_prepare(st, coll, filter, update,
                           is_delete ? NULL : opts->array_filters, is_delete,
                           opts->bypass_validation, opts->fence_name,
                           opts->fence_token, &m, &c)) < 0) {
    dtx__proj_free(proj);
    return rc;
  }
  m.sort = opts->sort;
  m.upsert = !is_delete && opts->upsert;
  dtx__modify_result_t mr = {0};
  rc = st->m->modify_one(st->b, &m, &mr);
  rc = match_error(&c, rc);
  if (rc == 0 && !mr.matched && !mr.upserted_id)
    rc = dtx__err(DTX_ENOMATCH, "no document in '%s' matched the filter",
                  coll);
  json_t *doc = NULL;
  if (rc == 0) {
    /* The positional $ takes its element from the document the query
     * matched, also when the new one is returned. */
    json_t **pick = !is_delete && opts->return_new ? &mr.after : &mr.before;
    doc = *pick;
    *pick = NULL;
    rc = project_in_place(&doc, proj, c.f, mr.before);
  }
  dtx__modify_result_clear(&mr);
  compiled_free(&c);
  dtx__proj_free(proj);
  if (rc < 0) {
    json_decref(doc);
    return rc;
  }
  *out = doc;
  return 0;
}

int dtx_store_find_one_and_update(dtx_store_t *st, const char *coll,
                                  const json_t *filter, const json_t *update,
                                  const dtx_fam_opts_t *opts, json_t **out) {
  if (!update) {
    dtx__err_clear();
    return dtx__err(DTX_EBADUPDATE, "update is NULL");
  }
  return find_one_and_modify(st, coll, filter, update, opts, out);
}

int dtx_store_find_one_and_delete(dtx_store_t *st, const char *coll,
                                  const json_t *filter,
                                  const dtx_fam_opts_t *opts, json_t **out) {
  return find_one_and_modify(st, coll, filter, NULL, opts, out);
}

int dtx_store_delete(dtx_store_t *st, const char *coll, const json_t *filter,
                     int many, int64_t *deleted) {
  dtx_delete_opts_t o = {.many = many};
  return dtx_store_delete_ex(st, coll, filter, &o, deleted);
}

int dtx_store_delete_ex(dtx_store_t *st, const char *coll,
                        const json_t *filter, const dtx_delete_opts_t *opts,
                        int64_t *deleted) {
  dtx__err_clear();
  static const dtx_delete_opts_t none;
  if (deleted)
    *deleted = 0;
  if (!opts)
    opts = &none;
  dtx__modify_t m;
  compiled_t c;
  int rc = modify_prepare(st, coll, filter, NULL, NULL, 1,
                          opts->bypass_validation, opts->fence_name,
                          opts->fence_token, &m, &c);
  if (rc < 0)
    return rc;
  int64_t matched = 0, n = 0;
  if (opts->many) {
    rc = st->m->modify_many(st->b, &m, &matched, &n);
  } else {
    dtx__modify_result_t mr = {0};
    rc = st->m->modify_one(st->b, &m, &mr);
    n = rc == 0 && mr.matched ? 1 : 0;
    dtx__modify_result_clear(&mr);
  }
  rc = match_error(&c, rc);
  compiled_free(&c);
  /* deleteMany keeps what it removed before an error, so say how many. */
  if (deleted && (rc == 0 || opts->many))
    *deleted = n;
  return rc;
}

/* ---- aggregation ------------------------------------------------------------ */

/* What dtx_store_aggregate and its $lookup read: the backend's find with
 * the filter compiled here, as dtx_store_find does. */
static int find_docs(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *sort, int64_t skip, int64_t limit,
                     json_t **out) {
  compiled_t c;
  int rc = compile(filter, NULL, NULL, 0, &c);
  if (rc < 0)
    return rc;
  rc = st->m->find(st->b, coll, c.filter, c.f, sort, skip, limit, out);
  rc = match_error(&c, rc);
  compiled_free(&c);
  if (rc < 0) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}

static int lookup_find(void *ctx, const char *coll, const json_t *filter,
                       json_t **out) {
  dtx_store_t *st = ctx;
  *out = NULL;
  int rc = dtx__coll_check(coll);
  return rc < 0 ? rc : find_docs(st, coll, filter, NULL, 0, 0, out);
}

/* The pipeline's source runs in the backend's find (indexes apply); the
 * rest runs in src/doc over what it returns.  The result is an array, as
 * dtx_store_find's: memory is bounded where a pipeline collects ($group,
 * $sort) by opts->max_bytes. */
int dtx_store_aggregate(dtx_store_t *st, const char *coll,
                        const json_t *pipeline, const dtx_agg_opts_t *opts,
                        json_t **out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  if (opts && opts->max_bytes < 0)
    return dtx__err(DTX_EINVAL, "max_bytes must be >= 0");
  dtx__pipeline_t *p;
  if ((rc = dtx__pipeline_compile(pipeline, &p)) < 0)
    return rc;
  const json_t *filter, *sort;
  int64_t skip, limit;
  dtx__pipeline_source(p, &filter, &sort, &skip, &limit);
  json_t *docs = NULL;
  if ((rc = find_docs(st, coll, filter, sort, skip, limit, &docs)) == 0) {
    dtx__agg_env_t env = {opts ? (size_t)opts->max_bytes : 0, lookup_find,
                          st};
    rc = dtx__pipeline_run(p, docs, &env, out);
  }
  dtx__pipeline_free(p);
  return rc;
}

/* ---- indexes and collections ----------------------------------------------------------------- */

int dtx_store_create_index(dtx_store_t *st, const char *coll,
                           const json_t *keys, const dtx_index_opts_t *opts,
                           char **name_out) {
  dtx__err_clear();
  if (name_out)
    *name_out = NULL;
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  if (!keys)
    return dtx__err(DTX_EBADINDEX, "index keys are NULL");
  dtx__index_spec_t *spec;
  if ((rc = dtx__index_spec_parse(keys, opts, &spec)) < 0)
    return rc;
  rc = st->m->create_index(st->b, coll, spec);
  if (rc == 0 && name_out && !(*name_out = strdup(spec->name)))
    rc = dtx__err(DTX_ENOMEM, "copying index name");
  dtx__index_spec_free(spec);
  return rc;
}

/* The checks of a call that reads something of coll into *out. */
static int check_out_call(dtx_store_t *st, const char *coll, json_t **out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  return check_st_coll(st, coll);
}

int dtx_store_list_indexes(dtx_store_t *st, const char *coll, json_t **out) {
  int rc = check_out_call(st, coll, out);
  if (rc < 0)
    return rc;
  return st->m->list_indexes(st->b, coll, out);
}

int dtx_store_drop_collection_ex(dtx_store_t *st, const char *coll,
                                 const dtx_drop_opts_t *opts) {
  dtx__err_clear();
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  if (!(opts && opts->bypass_validation)) {
    /* A drop deletes every document without asking the delete guard: the
     * guard of doctx's protocol collections (an account with money or a
     * marker, a live transfer, a lock's token) would be bypassed by one
     * `doctx drop accounts`.  So a guarded collection must be empty. */
    json_t *rules = NULL;
    int64_t n = 0;
    if ((rc = dtx_store_get_rules(st, coll, &rules)) < 0)
      return rc;
    const json_t *g = json_object_get(rules, "delete_guard");
    int guarded = json_is_object(g) && json_object_size(g) > 0;
    json_decref(rules);
    if (guarded && (rc = dtx_store_count(st, coll, NULL, &n)) < 0)
      return rc;
    if (guarded && n > 0)
      return dtx__err(DTX_EVALIDATION,
                      "collection '%s' has a delete guard and holds %lld "
                      "documents: a drop would delete them unchecked "
                      "(bypass validation to drop it anyway)",
                      coll, (long long)n);
    dtx__err_clear();
  }
  rc = st->m->drop_collection(st->b, coll);
  catalog_gen++; /* also on an error: part of it may be gone */
  return rc;
}

int dtx_store_drop_collection(dtx_store_t *st, const char *coll) {
  return dtx_store_drop_collection_ex(st, coll, NULL);
}

int dtx_store_list_collections(dtx_store_t *st, json_t **out) {
  dtx__err_clear();
  if (!out)
    return dtx__err(DTX_EINVAL, "out is NULL");
  *out = NULL;
  if (!st)
    return dtx__err(DTX_EINVAL, "store is NULL");
  return st->m->list_collections(st->b, out);
}

/* ---- collection rules ------------------------------------------------------------------------- */

/* The rules are compiled here first, so an invalid one never reaches a
 * catalog, and the backend stores the normalised form that every process
 * compiles the same way when it loads its catalog. */
int dtx_store_set_rules(dtx_store_t *st, const char *coll,
                        const dtx_collection_rules_t *rules) {
  dtx__err_clear();
  int rc = check_st_coll(st, coll);
  if (rc < 0)
    return rc;
  json_t *spec = json_pack("{s:O?,s:O?}", "validator",
                           rules ? rules->validator : NULL, "delete_guard",
                           rules ? rules->delete_guard : NULL);
  if (!spec)
    return dtx__err(DTX_ENOMEM, "setting the rules of %s", coll);
  dtx__rules_t *r = NULL;
  rc = dtx__rules_compile(spec, &r);
  json_decref(spec);
  if (rc < 0)
    return dtx__err_wrap(rc, "rules of %s", coll);
  rc = st->m->set_rules(st->b, coll, dtx__rules_spec(r));
  dtx__rules_free(r);
  catalog_gen++;
  return rc;
}

int dtx_store_get_rules(dtx_store_t *st, const char *coll, json_t **out) {
  int rc = check_out_call(st, coll, out);
  if (rc < 0)
    return rc;
  json_t *spec = NULL;
  if ((rc = st->m->get_rules(st->b, coll, &spec)) < 0)
    return rc;
  json_t *v = json_object_get(spec, "validator");
  json_t *g = json_object_get(spec, "delete_guard");
  *out = json_pack("{s:O?,s:O?}", "validator", json_is_null(v) ? NULL : v,
                   "delete_guard", json_is_null(g) ? NULL : g);
  json_decref(spec);
  return *out ? 0 : dtx__err(DTX_ENOMEM, "reading the rules of %s", coll);
}

/* ---- bulk writes ------------------------------------------------------------------------------ */

/* What store.c keeps per operation of a bulk write besides the backend's
 * dtx__bulk_op_t: the compiled filter/update the op borrows, and what is
 * applied to its result afterwards. */
typedef struct bulk_item {
  compiled_t c;
  dtx__proj_t *proj;
  int return_new;
} bulk_item_t;

void dtx__bulk_op_fail(dtx__bulk_op_t *op, int rc) {
  op->rc = rc;
  snprintf(op->detail, sizeof op->detail, "%s", dtx_errdetail());
}

/* The checks and compilation of one operation, exactly those of the
 * single call of its kind (same options, same errors), into op and it.
 * The option structs are the single calls' own; each member they have is
 * mapped here as the single call maps it. */
static int bulk_prepare(dtx_store_t *st, const dtx_bulk_op_t *o,
                        dtx__bulk_op_t *op, bulk_item_t *it) {
  static const dtx_update_opts_t no_update;
  static const dtx_delete_opts_t no_delete;
  static const dtx_fam_opts_t no_fam;
  int rc;
  switch (o->kind) {
  case DTX_BULK_INSERT:
    if ((rc = check_st_coll(st, o->coll)) < 0 ||
        (rc = prepare_doc(o->coll, o->doc, &op->doc)) < 0)
      return rc;
    op->m.coll = o->coll;
    op->m.bypass = o->insert_opts && o->insert_opts->bypass_validation;
    return 0;
  case DTX_BULK_UPDATE_ONE: {
    const dtx_update_opts_t *u = o->update_opts ? o->update_opts : &no_update;
    if (u->many)
      return dtx__err(DTX_EINVAL, "a bulk updateOne cannot have many set");
    if ((rc = modify_prepare(st, o->coll, o->filter, o->update,
                             u->array_filters, 0, u->bypass_validation,
                             u->fence_name, u->fence_token, &op->m,
                             &it->c)) < 0)
      return rc;
    op->m.upsert = u->upsert;
    return 0;
  }
  case DTX_BULK_DELETE_ONE: {
    const dtx_delete_opts_t *d = o->delete_opts ? o->delete_opts : &no_delete;
    if (d->many)
      return dtx__err(DTX_EINVAL, "a bulk deleteOne cannot have many set");
    return modify_prepare(st, o->coll, o->filter, NULL, NULL, 1,
                          d->bypass_validation, d->fence_name,
                          d->fence_token, &op->m, &it->c);
  }
  case DTX_BULK_FIND_ONE_AND_UPDATE:
  case DTX_BULK_FIND_ONE_AND_DELETE: {
    const dtx_fam_opts_t *f = o->fam_opts ? o->fam_opts : &no_fam;
    int is_delete = o->kind == DTX_BULK_FIND_ONE_AND_DELETE;
    if (!is_delete && !o->update)
      return dtx__err(DTX_EBADUPDATE, "update is NULL");
    if ((rc = check_sort_proj(f->sort, NULL)) < 0 ||
        (f->projection &&
         (rc = dtx__proj_compile(f->projection, &it->proj)) < 0) ||
        (it->proj && (rc = dtx__proj_check_query(it->proj, o->filter)) < 0))
      return rc;
    if ((rc = modify_prepare(st, o->coll, o->filter,
                             is_delete ? NULL : o->update,
                             is_delete ? NULL : f->array_filters, is_delete,
                             f->bypass_validation, f->fence_name,
                             f->fence_token, &op->m, &it->c)) < 0)
      return rc;
    op->m.sort = f->sort;
    op->m.upsert = !is_delete && f->upsert;
    it->return_new = !is_delete && f->return_new;
    return 0;
  }
  }
  return dtx__err(DTX_EINVAL, "unknown bulk operation kind %d", (int)o->kind);
}

/* Turns the backend's outcome of one operation into its public result,
 * as the single call of its kind would report it. */
static int bulk_finish(const dtx_bulk_op_t *o, dtx__bulk_op_t *op,
                       bulk_item_t *it, dtx_bulk_result_t *r) {
  int rc = it->c.f ? match_error(&it->c, 0) : 0;
  if (rc < 0)
    return rc;
  if ((rc = op->rc) < 0)
    return dtx__err(rc, "%s", op->detail);
  dtx__modify_result_t *mr = &op->res;
  switch (o->kind) {
  case DTX_BULK_INSERT:
    r->id = json_incref(json_object_get(op->doc, "_id"));
    return 0;
  case DTX_BULK_UPDATE_ONE:
    r->matched = mr->matched ? 1 : 0;
    r->modified = mr->matched && mr->modified ? 1 : 0;
    r->id = json_incref(mr->upserted_id);
    return 0;
  case DTX_BULK_DELETE_ONE:
    r->matched = r->modified = mr->matched ? 1 : 0;
    return 0;
  default: {
    if (!mr->matched && !mr->upserted_id)
      return dtx__err(DTX_ENOMATCH, "no document in '%s' matched the filter",
                      o->coll);
    r->id = json_incref(mr->upserted_id);
    json_t **pick = it->return_new ? &mr->after : &mr->before;
    json_t *doc = *pick;
    *pick = NULL;
    if ((rc = project_in_place(&doc, it->proj, it->c.f, mr->before)) < 0) {
      json_decref(doc);
      return rc;
    }
    r->doc = doc;
    return 0;
  }
  }
}

void dtx_bulk_results_clear(dtx_bulk_result_t *results, size_t n) {
  for (size_t i = 0; results && i < n; i++) {
    free(results[i].detail);
    json_decref(results[i].id);
    json_decref(results[i].doc);
    memset(&results[i], 0, sizeof results[i]);
  }
}

static void bulk_result_error(dtx_bulk_result_t *r, int rc) {
  r->rc = rc;
  r->detail = strdup(dtx_errdetail());
}

/* Every operation is checked and compiled here first; the ones that fail
 * get their error and never reach the backend, which runs the rest in one
 * call.  Results are then built as the single calls build theirs. */
int dtx_store_bulk_write(dtx_store_t *st, const dtx_bulk_op_t *ops, size_t n,
                         dtx_bulk_result_t *results) {
  dtx__err_clear();
  if (!results)
    return dtx__err(DTX_EINVAL, "results is NULL");
  memset(results, 0, n * sizeof *results);
  int rc = 0;
  if (!st)
    rc = dtx__err(DTX_EINVAL, "store is NULL");
  else if (!ops && n > 0)
    rc = dtx__err(DTX_EINVAL, "ops is NULL");
  if (rc < 0) {
    for (size_t i = 0; i < n; i++)
      bulk_result_error(&results[i], rc);
    return rc;
  }
  if (n == 0)
    return 0;
  dtx__bulk_op_t *bops = calloc(n, sizeof *bops);
  bulk_item_t *items = calloc(n, sizeof *items);
  if (!bops || !items) {
    free(bops);
    free(items);
    rc = dtx__err(DTX_ENOMEM, "a bulk write of %zu operations", n);
    for (size_t i = 0; i < n; i++)
      bulk_result_error(&results[i], rc);
    return rc;
  }
  size_t torun = 0;
  for (size_t i = 0; i < n; i++) {
    dtx__err_clear();
    if ((rc = bulk_prepare(st, &ops[i], &bops[i], &items[i])) < 0)
      dtx__bulk_op_fail(&bops[i], rc);
    else
      torun++;
  }
  if (torun > 0 && (rc = st->m->bulk(st->b, bops, n)) < 0) {
    for (size_t i = 0; i < n; i++)
      if (bops[i].rc == 0)
        dtx__bulk_op_fail(&bops[i], rc);
  }
  size_t nfailed = 0, first = 0;
  int first_rc = 0;
  for (size_t i = 0; i < n; i++) {
    dtx__err_clear();
    if ((rc = bulk_finish(&ops[i], &bops[i], &items[i], &results[i])) < 0) {
      bulk_result_error(&results[i], rc);
      if (nfailed++ == 0) {
        first = i;
        first_rc = rc;
      }
    }
    dtx__modify_result_clear(&bops[i].res);
    json_decref(bops[i].doc);
    compiled_free(&items[i].c);
    dtx__proj_free(items[i].proj);
  }
  free(bops);
  free(items);
  dtx__err_clear();
  if (nfailed == 0)
    return 0;
  return dtx__err(first_rc, "%zu of %zu operations failed; first: #%zu: %s",
                  nfailed, n, first,
                  results[first].detail ? results[first].detail : "");
}
