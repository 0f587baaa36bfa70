/* store.c -- the public dtx_store_* API on top of the backend method table:
 * the checks and compilation every call shares, open and close, indexes,
 * collections and their rules.  The other calls are its siblings, by
 * family: store_write.c (insert, update, delete), store_read.c (find,
 * count, aggregate) and store_bulk.c (bulk_write); store_int.h is what
 * they share.
 *
 * These files are the one place where caller input is checked: collection
 * names, filter/update/sort/projection shapes, skip and limit, documents
 * and their _ids.  Filters and updates are compiled here (src/doc) and
 * handed to the backend already compiled, so every backend sees only
 * valid requests and shares one definition of MongoDB's semantics.
 * Projections are applied here too, after the backend returns, because
 * they never affect which document is chosen.  The backend is picked by
 * the URI's scheme from the registry below; a new backend is one line
 * there.
 *
 * Ownership: a dtx_store_t owns its backend handle and a copy of its URI;
 * both are freed by dtx_store_close().  The handle is immutable after
 * dtx_store_open(), so sharing it between threads needs no locking here. */
#include "store/store_int.h"

#include "util/assert.h"
#include "util/err.h"

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

/* ---- the backend contract (store.h), after every method call ---------------- */

void dtx__st_check_rc(int rc, const char *detail) {
  DTX_ASSERT(DTX__IS_CODE(rc), "store.rc_is_a_code");
  DTX_ASSERT(rc == 0 || (detail && detail[0]), "store.error_has_detail");
}

/* Each rule is a field or two of res: no document is walked. */
void dtx__st_check_modify(const dtx__modify_t *m,
                          const dtx__modify_result_t *res, int rc,
                          const char *detail) {
  dtx__st_check_rc(rc, detail);
  if (rc < 0) {
    DTX_ASSERT(!res->matched && !res->modified && !res->before &&
                   !res->after && !res->upserted_id,
               "store.result_zeroed_on_error");
    return;
  }
  DTX_ASSERT(!res->modified || res->matched, "store.modified<=matched");
  DTX_ASSERT(!res->matched == !res->before, "store.matched_has_before");
  DTX_ASSERT(m->update ? !res->matched || res->after : !res->after,
             "store.after_iff_update");
  DTX_ASSERT(!res->upserted_id || (m->upsert && m->update && !res->matched &&
                                   res->after),
             "store.upsert_only_when_asked");
  DTX_ASSERT(!res->matched || !res->after ||
                 json_equal(json_object_get(res->before, "_id"),
                            json_object_get(res->after, "_id")),
             "store.id_immutable");
  /* A fenced write that went through carries its token on the record
   * (fence.c): a larger one would have refused it. */
  DTX_ASSERT(!m->fence_name || !res->after ||
                 json_integer_value(json_object_get(
                     json_object_get(res->after, "_fence"), m->fence_name)) ==
                     m->fence_token,
             "store.fence_recorded");
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
  /* A byte outside printable ASCII (0xff, not UTF-8) is named, never
   * quoted, so the detail stays text a JSON answer can carry. */
  int bad = dtx__bad_byte(coll, n);
  if (bad >= 0)
    return dtx__err(DTX_EINVAL,
                    "collection name has byte 0x%02x at offset %d: must be "
                    "1..120 bytes of [A-Za-z0-9_.-]",
                    (unsigned char)coll[bad], bad);
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

int dtx__st_check_coll(const dtx_store_t *st, const char *coll) {
  if (!st)
    return dtx__err(DTX_EINVAL, "store is NULL");
  dtx__store_count_call();
  return dtx__coll_check(coll);
}

void dtx__st_compiled_free(st_compiled_t *c) {
  if (c->f)
    dtx__filter_free(c->f);
  if (c->u)
    dtx__update_free(c->u);
  json_decref(c->empty);
  memset(c, 0, sizeof *c);
}

/* A filter that is not an object is a mistake in the query, so it is
 * DTX_EBADQUERY rather than EINVAL; likewise EBADUPDATE for an update.
 * The compiled forms live for one call, which already borrows filter,
 * update and array_filters (const, unchanged until c is freed), so they
 * reference their operands instead of copying them
 * (DTX__COMPILE_BORROW): a batched transfer compiles a filter and an
 * update per single-document step. */
int dtx__st_compile(const json_t *filter, const json_t *update,
                    const json_t *array_filters, int with_update,
                    st_compiled_t *c) {
  int rc;
  memset(c, 0, sizeof *c);
  if (filter && !json_is_object(filter))
    return dtx__err(DTX_EBADQUERY, "filter must be an object");
  if (!filter && !(filter = c->empty = json_object()))
    return dtx__err(DTX_ENOMEM, "compiling a filter");
  c->filter = filter;
  if ((rc = dtx__filter_compile_flags(filter, DTX__COMPILE_BORROW,
                                      &c->f)) < 0)
    goto fail;
  DTX_ASSERT(c->f, "store.compiled");
  if (with_update) {
    if (!update)
      rc = dtx__err(DTX_EBADUPDATE, "update is NULL");
    else if (!json_is_object(update))
      rc = dtx__err(DTX_EBADUPDATE, "update must be an object");
    else
      rc = dtx__update_compile_flags(update, array_filters,
                                     DTX__COMPILE_BORROW, &c->u);
    if (rc < 0)
      goto fail;
    DTX_ASSERT(c->u, "store.compiled");
    /* The positional $ reads the filter's match; an upsert checks it for
     * a matching error before inserting. */
    dtx__update_bind_filter(c->u, c->f);
  } else if (array_filters) {
    rc = dtx__err(DTX_EBADUPDATE, "arrayFilters are only for updates");
    goto fail;
  }
  return 0;
fail:
  dtx__st_compiled_free(c);
  return rc;
}

int dtx__st_check_sort_proj(const json_t *sort, const json_t *projection) {
  int rc;
  if (sort && (rc = dtx__sort_check(sort)) < 0)
    return rc;
  if (projection && (rc = dtx__projection_check(projection)) < 0)
    return rc;
  return 0;
}

int dtx__st_project_in_place(json_t **doc, const dtx__proj_t *proj,
                             const dtx__filter_t *f, const json_t *matched) {
  json_t *p;
  int rc;
  if (!proj || !*doc)
    return 0;
  if ((rc = dtx__proj_apply_at(proj, *doc, f, matched, &p)) < 0)
    return rc;
  DTX_ASSERT(p, "store.projected");
  json_decref(*doc);
  *doc = p;
  return 0;
}

/* A matching error (a $regex past PCRE2's limits) means the backend's
 * "no match" answers were not true: the whole call fails with it. */
int dtx__st_match_error(const st_compiled_t *c, int rc) {
  int e = dtx__filter_error(c->f);
  return e ? e : rc;
}

/* A document nested too deeply is refused here already, so that
 * insert_many inserts nothing when one of its documents is; the backend
 * checks again (with the collection's rules) when it writes. */
int dtx__st_prepare_doc(const char *coll, const json_t *doc, json_t **out) {
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
  DTX_ASSERT(strlen(hex) == 24, "store.id_generated");
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
  if (!colon || colon == uri) {
    char *shown = dtx__uri_masked(uri); /* a password never shows */
    int rc = dtx__err(DTX_EBADURI,
                      "store URI '%s' has no scheme (expected %s)",
                      shown ? shown : "(out of memory)", known_schemes());
    free(shown);
    return rc;
  }
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
  if (!st || !(st->uri = strdup(uri)) || !(st->shown = dtx__uri_masked(uri))) {
    if (st)
      free(st->uri);
    free(st);
    return dtx__err(DTX_ENOMEM, "opening a store");
  }
  st->m = m;
  static _Atomic uint64_t opened;
  st->serial = ++opened;
  int rc = m->open(uri, flags, &st->b);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc < 0 || st->b, "store.open.handle");
  if (rc < 0) {
    free(st->uri);
    free(st->shown);
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
  free(st->shown);
  free(st);
}

const char *dtx_store_uri(const dtx_store_t *st) {
  return st ? st->shown : NULL;
}

const char *dtx__store_uri_secret(const dtx_store_t *st) {
  return st ? st->uri : NULL;
}

uint64_t dtx__store_serial(const dtx_store_t *st) { return st ? st->serial : 0; }

/* ---- indexes and collections ----------------------------------------------------------------- */

/* 1 when coll has an index named as spec (the backend then judges a
 * second create: the same spec is a no-op, another is refused), 0 when
 * not, or an error. */
static int index_exists(dtx_store_t *st, const char *coll,
                        const dtx__index_spec_t *spec) {
  json_t *list = NULL, *e;
  size_t i;
  int rc = st->m->list_indexes(st->b, coll, &list), found = 0;
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc == 0 ? !list || json_is_array(list) : !list,
             "store.out_iff_ok");
  json_array_foreach(list, i, e) {
    found |= json_is_string(json_object_get(e, "name")) &&
             strcmp(json_string_value(json_object_get(e, "name")),
                    spec->name) == 0;
  }
  json_decref(list);
  return rc < 0 ? rc : found;
}

/* Whether spec's name is not the one its keys give (a name chosen). */
static int custom_name(const json_t *keys, const dtx__index_spec_t *spec) {
  dtx__index_spec_t *derived = NULL;
  int custom = dtx__index_spec_parse(keys, NULL, &derived) == 0 &&
               strcmp(derived->name, spec->name) != 0;
  dtx__index_spec_free(derived);
  return custom;
}

int dtx_store_create_index(dtx_store_t *st, const char *coll,
                           const json_t *keys, const dtx_index_opts_t *opts,
                           char **name_out) {
  dtx__err_clear();
  if (name_out)
    *name_out = NULL;
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0)
    return rc;
  if (!keys)
    return dtx__err(DTX_EBADINDEX, "index keys are NULL");
  dtx__index_spec_t *spec;
  if ((rc = dtx__index_spec_parse(keys, opts, &spec)) < 0)
    return rc;
  /* A pattern's collection takes no unique index but its own: a user's
   * could refuse a protocol step's write half way.  Nor an index under a
   * name other than its keys give it: a pattern may create an index by
   * name later (the ledger's ref_unique, docs/ledger.md), and one of
   * yours under that name would refuse it for good. */
  int named = opts && opts->name && custom_name(keys, spec);
  if ((spec->unique || named) && !(opts && opts->bypass_validation)) {
    json_t *rules = NULL;
    const char *pat = NULL;
    if ((rc = dtx_store_get_rules(st, coll, &rules)) == 0 &&
        json_is_string(json_object_get(rules, "pattern")))
      pat = json_string_value(json_object_get(rules, "pattern"));
    if (pat && !(rc = index_exists(st, coll, spec)))
      rc = spec->unique
               ? dtx__err(DTX_EVALIDATION,
                          "collection '%s' is the %s pattern's: a unique "
                          "index of yours could refuse its steps (bypass "
                          "validation to create it anyway)", coll, pat)
               : dtx__err(DTX_EVALIDATION,
                          "collection '%s' is the %s pattern's: an index of "
                          "yours takes the name its keys give it, not '%s' "
                          "(the pattern's own names are its; bypass "
                          "validation to name it anyway)", coll, pat,
                          spec->name);
    json_decref(rules);
    if (rc < 0) {
      dtx__index_spec_free(spec);
      return rc;
    }
    if (rc > 0)
      rc = 0;
  }
  if (strcmp(spec->name, "_id_") != 0) {
    rc = st->m->create_index(st->b, coll, spec);
    dtx__st_check_rc(rc, dtx_errdetail());
  } else if (spec->nfields != 1 || strcmp(spec->paths[0], "_id") != 0 ||
           spec->sparse) /* the _id index itself is always there */
    rc = dtx__err(DTX_EBADINDEX,
                  "index name _id_ is reserved for the _id index");
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
  return dtx__st_check_coll(st, coll);
}

int dtx_store_list_indexes(dtx_store_t *st, const char *coll, json_t **out) {
  int rc = check_out_call(st, coll, out);
  json_t *specs = NULL;
  if (rc < 0)
    return rc;
  rc = st->m->list_indexes(st->b, coll, &specs);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc == 0 ? !specs || json_is_array(specs) : !specs,
             "store.out_iff_ok");
  if (rc < 0)
    return rc;
  /* Every collection has the _id index first; a missing one has none,
   * as find on it gives no documents. */
  json_t *arr = specs ? json_pack("[{s:s,s:{s:i},s:b,s:b}]", "name", "_id_",
                                  "key", "_id", 1, "unique", 1, "sparse", 0)
                      : json_array();
  if (!arr || (specs && json_array_extend(arr, specs) < 0)) {
    json_decref(arr);
    arr = NULL;
    rc = dtx__err(DTX_ENOMEM, "listing indexes of '%s'", coll);
  }
  json_decref(specs);
  *out = arr;
  return rc;
}

int dtx_store_drop_collection_ex(dtx_store_t *st, const char *coll,
                                 const dtx_drop_opts_t *opts) {
  dtx__err_clear();
  int rc = dtx__st_check_coll(st, coll);
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
    /* A transition rule's "delete" guards as the delete guard does (a
     * job effect's markers in a user's collection: dropped, they would
     * let the effect land again on a document of the same _id). */
    const json_t *t = json_object_get(rules, "transition"), *e;
    size_t i;
    guarded = guarded || json_object_get(t, "delete");
    json_array_foreach(t, i, e) guarded = guarded || json_object_get(e, "delete");
    char owner[40] = "";
    if (json_is_string(json_object_get(rules, "pattern")))
      snprintf(owner, sizeof owner, "%s",
               json_string_value(json_object_get(rules, "pattern")));
    json_decref(rules);
    if (guarded && (rc = dtx_store_count(st, coll, NULL, &n)) < 0)
      return rc;
    if (guarded && n > 0)
      return dtx__err(DTX_EVALIDATION,
                      "collection '%s' has a delete guard and holds %lld "
                      "documents: a drop would delete them unchecked "
                      "(bypass validation to drop it anyway)",
                      coll, (long long)n);
    /* Even empty, a pattern's collection keeps its rules: dropped, they
     * would be gone until the pattern's next write, and a plain insert
     * in between would go unjudged (docs/validation.md, "Rules a pattern
     * owns"). */
    if (owner[0])
      return dtx__err(DTX_EVALIDATION,
                      "collection '%s' is the %s pattern's: a drop would "
                      "take its rules with it (bypass validation to drop it "
                      "anyway)", coll, owner);
    dtx__err_clear();
  }
  rc = st->m->drop_collection(st->b, coll);
  dtx__st_check_rc(rc, dtx_errdetail());
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
  int rc = st->m->list_collections(st->b, out);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc == 0 ? json_is_array(*out) : !*out, "store.out_iff_ok");
  return rc;
}

/* ---- collection rules ------------------------------------------------------------------------- */

/* The rules are compiled here first, so an invalid one never reaches a
 * catalog, and the backend stores the normalised form that every process
 * compiles the same way when it loads its catalog. */
int dtx_store_set_rules_ex(dtx_store_t *st, const char *coll,
                           const dtx_collection_rules_t *rules,
                           const dtx_rules_opts_t *opts) {
  dtx__err_clear();
  int rc = dtx__st_check_coll(st, coll);
  if (rc < 0)
    return rc;
  json_t *spec = json_pack("{s:O?,s:O?,s:O?,s:s?}", "validator",
                           rules ? rules->validator : NULL, "delete_guard",
                           rules ? rules->delete_guard : NULL, "transition",
                           rules ? rules->transition : NULL, "pattern",
                           opts ? opts->pattern : NULL);
  if (!spec)
    return dtx__err(DTX_ENOMEM, "setting the rules of %s", coll);
  dtx__rules_t *r = NULL;
  rc = dtx__rules_compile(spec, &r);
  json_decref(spec);
  if (rc < 0)
    return dtx__err_wrap(rc, "rules of %s", coll);
  /* A pattern's rules are its promises: a plain change of rules may not
   * take them away (docs/validation.md, "Rules a pattern owns").  The
   * read and the write are two steps; both are administration. */
  json_t *cur = NULL;
  if (!(opts && opts->bypass_validation)) {
    rc = st->m->get_rules(st->b, coll, &cur);
    dtx__st_check_rc(rc, dtx_errdetail());
    if (rc == 0)
      rc = dtx__rules_keep_owned(coll, cur, dtx__rules_spec(r));
  }
  json_decref(cur);
  if (rc == 0) {
    rc = st->m->set_rules(st->b, coll, dtx__rules_spec(r));
    dtx__st_check_rc(rc, dtx_errdetail());
  }
  dtx__rules_free(r);
  catalog_gen++;
  return rc;
}

int dtx_store_set_rules(dtx_store_t *st, const char *coll,
                        const dtx_collection_rules_t *rules) {
  return dtx_store_set_rules_ex(st, coll, rules, NULL);
}

int dtx__store_fence_records(dtx_store_t *st, const char *coll,
                             json_t **out) {
  int rc = check_out_call(st, coll, out);
  if (rc < 0)
    return rc;
  rc = st->m->fence_records(st->b, coll, out);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc == 0 ? json_is_array(*out) : !*out, "store.out_iff_ok");
  return rc;
}

int dtx_store_get_rules(dtx_store_t *st, const char *coll, json_t **out) {
  int rc = check_out_call(st, coll, out);
  if (rc < 0)
    return rc;
  json_t *spec = NULL;
  rc = st->m->get_rules(st->b, coll, &spec);
  dtx__st_check_rc(rc, dtx_errdetail());
  DTX_ASSERT(rc == 0 ? !spec || json_is_object(spec) : !spec,
             "store.out_iff_ok");
  if (rc < 0)
    return rc;
  json_t *v = json_object_get(spec, "validator");
  json_t *g = json_object_get(spec, "delete_guard");
  json_t *t = json_object_get(spec, "transition");
  json_t *p = json_object_get(spec, "pattern");
  *out = json_pack("{s:O?,s:O?,s:O?}", "validator",
                   json_is_null(v) ? NULL : v, "delete_guard",
                   json_is_null(g) ? NULL : g, "transition",
                   json_is_null(t) ? NULL : t);
  if (*out && json_is_string(p) && json_object_set(*out, "pattern", p) < 0) {
    json_decref(*out);
    *out = NULL;
  }
  json_decref(spec);
  return *out ? 0 : dtx__err(DTX_ENOMEM, "reading the rules of %s", coll);
}
