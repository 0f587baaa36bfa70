/* meta.c -- an entry's metadata and external reference (docs/ledger.md,
 * "Metadata and references"): the checks of a request's meta and ref,
 * what an idempotent retry must repeat of them, the unique-refs switch,
 * and finding entries by ref or by a filter over their meta.
 *
 * Both are fields of the entry document, written by the post's one
 * insert (ledger.c's table: ledger.post, ledger.reverse) and never
 * changed afterwards: the transition rules hold "meta" and "ref"
 * immutable for every writer (ledger.c, entry_moves), so no step of the
 * protocol gains a document or a fault point from them.  A ref is
 * indexed ({ref: 1} sparse, the pattern's own); refs become unique per
 * store when dtx_ledger_unique_refs adds a unique sparse index on the
 * same key, so the refusal of a duplicate is the insert's own unique key,
 * in the same atomic step as the entry on every backend (on the Redis
 * Cluster a claim key), never a read before the write. */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/err.h"

/* The name of the unique index dtx_ledger_unique_refs creates. */
#define REF_UNIQUE "ref_unique"

/* ---- the request ---------------------------------------------------------------- */

/* A NUL byte in a key or string of the meta: jansson writes it as \u0000,
 * a literal backslash before "u0000" as "\\u0000", so an escape with an
 * even number of backslashes before it is a NUL. */
static int has_nul(const char *text) {
  for (const char *p = strstr(text, "\\u0000"); p;
       p = strstr(p + 1, "\\u0000")) {
    size_t n = 0;
    while (p - n > text && p[-(ptrdiff_t)n - 1] == '\\')
      n++;
    if (n % 2 == 0)
      return 1;
  }
  return 0;
}

/* An upper bound of v's compact serialized size (every string byte
 * counted as its longest escape, \u00XX; numbers as 32 bytes), and
 * whether a key or string holds a NUL byte: one walk, no text.  -1 past
 * `cap`, or nested deeper than jansson writes. */
static long size_bound(const json_t *v, long cap, int depth, int *nul) {
  const char *k;
  size_t kl, i;
  json_t *x;
  long n = 0, m;
  if (depth > 2000)
    return -1;
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    n = 2;
    json_object_keylen_foreach((json_t *)v, k, kl, x) {
      if (memchr(k, 0, kl))
        *nul = 1;
      if ((m = size_bound(x, cap, depth + 1, nul)) < 0)
        return -1;
      n += 2 + 6 * (long)kl + 2 + m;
      if (n > cap)
        return -1;
    }
    return n;
  case JSON_ARRAY:
    n = 2;
    json_array_foreach((json_t *)v, i, x) {
      if ((m = size_bound(x, cap, depth + 1, nul)) < 0)
        return -1;
      if ((n += m + 1) > cap)
        return -1;
    }
    return n;
  case JSON_STRING:
    kl = json_string_length(v);
    if (memchr(json_string_value(v), 0, kl))
      *nul = 1;
    n = 2 + 6 * (long)kl;
    return n > cap ? -1 : n;
  default:
    return 32;
  }
}

int dtx__lg_check_meta(const dtx_ledger_post_req_t *req) {
  if (req->ref) {
    size_t n = strlen(req->ref);
    if (n == 0 || n > DTX_LEDGER_MAX_REF)
      return dtx__err(DTX_EINVAL, "ref has %zu bytes (1..%d)", n,
                      DTX_LEDGER_MAX_REF);
    /* No JSON string holds it: the entry would be written without its
     * ref, and a lookup by it would match every entry. */
    if (!dtx__utf8_ok(req->ref, n))
      return dtx__err(DTX_EINVAL, "ref is not valid UTF-8");
  }
  if (!req->meta)
    return 0;
  if (!json_is_object(req->meta))
    return dtx__err(DTX_EINVAL, "meta must be a JSON object, got %s",
                    dtx__value_type_name(req->meta, DTX__TN_JSON));
  /* Most metas are far below the bound: one walk says so, and finds a
   * NUL, without writing the text (a post's own cost, docs/ledger.md). */
  int nul = 0;
  if (size_bound(req->meta, DTX_LEDGER_MAX_META, 0, &nul) >= 0)
    return nul ? dtx__err(DTX_EINVAL, "meta holds a NUL byte in a key or "
                          "string")
               : 0;
  char *text = json_dumps(req->meta, JSON_COMPACT | JSON_ENCODE_ANY);
  if (!text)
    return dtx__err(DTX_EINVAL, "meta cannot be serialized (nested too "
                    "deep?)");
  size_t n = strlen(text);
  int rc = 0;
  if (n > DTX_LEDGER_MAX_META)
    rc = dtx__err(DTX_EINVAL, "meta has %zu bytes serialized (at most %d)", n,
                  DTX_LEDGER_MAX_META);
  else if (has_nul(text))
    rc = dtx__err(DTX_EINVAL, "meta holds a NUL byte in a key or string");
  free(text);
  return rc;
}

int dtx__lg_same_meta(const json_t *e, const dtx_ledger_post_req_t *req) {
  const json_t *m = json_object_get(e, "meta");
  const char *r = dtx__str(e, "ref");
  if (req->meta ? !m || !json_equal(m, (json_t *)req->meta) : m != NULL)
    return 0;
  return req->ref ? r && strcmp(r, req->ref) == 0 : r == NULL;
}

void dtx__lg_set_meta(json_t *doc, const dtx_ledger_post_req_t *req) {
  if (req->meta)
    json_object_set_new(doc, "meta", json_deep_copy(req->meta));
  if (req->ref)
    json_object_set_new(doc, "ref", json_string(req->ref));
}

/* ---- unique refs ------------------------------------------------------------------ */

/* Whether dtx_ledger_unique_refs was called on this store: its index is
 * there. */
static int refs_unique(dtx__exec_t *ex, int *unique) {
  json_t *ixs = NULL, *ix;
  size_t i;
  dtx__kit_read_t q = {.kind = DTX__KIT_INDEXES, .coll = DTX_LEDGER_ENTRIES};
  int rc = dtx__kit_read(ex->st, &q, &ixs);
  *unique = 0;
  json_array_foreach(ixs, i, ix) {
    if (dtx__str_is(ix, "name", REF_UNIQUE) &&
        json_is_true(json_object_get(ix, "unique")))
      *unique = 1;
  }
  json_decref(ixs);
  return rc;
}

int dtx__lg_ref_taken(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                      const char *id) {
  json_t *docs = NULL, *d;
  size_t i;
  int unique = 0;
  if (!req->ref)
    return DTX_ENOTFOUND;
  json_t *f = json_pack("{s:s}", "ref", req->ref);
  int rc = f ? dtx__kit_find_n(ex, DTX_LEDGER_ENTRIES, f, NULL, 2, &docs)
             : DTX_ENOMEM;
  json_decref(f);
  const char *other = NULL;
  json_array_foreach(docs, i, d) {
    if (!dtx__str_is(d, "_id", id) && dtx__str(d, "_id"))
      other = dtx__str(d, "_id");
  }
  if (rc == 0 && other && (rc = refs_unique(ex, &unique)) == 0 && unique)
    rc = dtx__err(DTX_EDUPKEY, "ref '%s' is already ledger entry '%s''s "
                  "(refs are unique in this ledger: ledger unique-refs)",
                  req->ref, other);
  else if (rc == 0)
    rc = DTX_ENOTFOUND; /* a seqId, not the ref */
  json_decref(docs);
  return rc;
}

int dtx_ledger_unique_refs(dtx_store_t *st) {
  dtx__call_t c;
  dtx__call_begin(&c, 0);
  int rc = st ? dtx__lg_setup(st) : dtx__err(DTX_EINVAL, "no store");
  json_t *keys = rc ? NULL : json_pack("{s:i}", "ref", 1);
  if (rc == 0 && !keys)
    rc = DTX_ENOMEM;
  if (rc == 0) {
    /* The ledger's own unique index on its own collection: it refuses
     * only the post's insert, which then names the ref (post.c). */
    dtx_index_opts_t o = {.unique = 1, .sparse = 1, .name = REF_UNIQUE,
                          .bypass_validation = 1};
    rc = dtx_store_create_index(st, DTX_LEDGER_ENTRIES, keys, &o, NULL);
    if (rc == DTX_EDUPKEY)
      rc = dtx__err(DTX_EDUPKEY, "refs cannot be made unique: entries "
                    "already share a ref (find them with ledger entries "
                    "--ref)");
  }
  json_decref(keys);
  return dtx__call_end(&c, rc);
}

/* ---- finding entries ---------------------------------------------------------------- */

/* filter over the meta -> the same over the entry: each field path gets
 * "meta." in front, $and/$or/$nor are followed into; any other top-level
 * operator ($expr, $where, ...) would see the whole entry, so it is
 * refused.  *out: a new object. */
static int rebase(const json_t *filter, json_t **out) {
  const char *k;
  json_t *v;
  *out = NULL;
  if (!json_is_object(filter))
    return dtx__err(DTX_EINVAL, "a meta filter is a JSON object, got %s",
                    dtx__value_type_name(filter, DTX__TN_JSON));
  json_t *o = json_object();
  int rc = o ? 0 : DTX_ENOMEM;
  json_object_foreach((json_t *)filter, k, v) {
    if (rc)
      break;
    if (k[0] != '$') {
      size_t n = strlen(k) + 6;
      char *path = malloc(n);
      if (!path) {
        rc = DTX_ENOMEM;
        break;
      }
      snprintf(path, n, "meta.%s", k);
      json_object_set(o, path, v);
      free(path);
    } else if (strcmp(k, "$and") && strcmp(k, "$or") && strcmp(k, "$nor")) {
      rc = dtx__err(DTX_EINVAL, "meta filter: top-level operator %s is not "
                    "allowed ($and, $or, $nor and field conditions)", k);
    } else if (!json_is_array(v) || json_array_size(v) == 0) {
      rc = dtx__err(DTX_EINVAL, "meta filter: %s takes a non-empty array of "
                    "filters", k);
    } else {
      json_t *arr = json_array(), *sub, *r = NULL;
      size_t i;
      json_array_foreach(v, i, sub) {
        if (!arr || (rc = rebase(sub, &r)))
          break;
        json_array_append_new(arr, r);
      }
      if (!arr && rc == 0)
        rc = DTX_ENOMEM;
      if (rc == 0)
        json_object_set(o, k, arr);
      json_decref(arr);
    }
  }
  if (rc)
    json_decref(o);
  else
    *out = o;
  return rc;
}

static int entries(dtx_store_t *st, const char *ref, const json_t *meta_filter,
                   const dtx_page_t *page, json_t **out) {
  json_t *filter = NULL;
  int rc = 0;
  if (!ref && !meta_filter)
    return dtx__err(DTX_EINVAL, "give a ref, a meta filter or both (ledger "
                    "list lists every entry)");
  if (ref &&
      (rc = dtx__lg_check_meta(&(dtx_ledger_post_req_t){.ref = ref})))
    return rc;
  if ((rc = dtx__kit_page_check(page)))
    return rc;
  if (meta_filter ? (rc = rebase(meta_filter, &filter))
                  : !(filter = json_object()))
    return rc ? rc : DTX_ENOMEM;
  /* "ref" cannot clash: every other key is "meta." or an operator. */
  if (ref)
    json_object_set_new(filter, "ref", json_string(ref));
  dtx__filter_t *cf = NULL;
  /* Wrapped, not formatted from dtx_errdetail(): that is the buffer
   * dtx__err writes, and overlapping it garbled the compiler's words. */
  if ((rc = dtx__filter_compile(filter, &cf)))
    rc = dtx__err_wrap(DTX_EINVAL, "meta filter");
  dtx__filter_free(cf);
  json_t *sort = json_pack("{s:i,s:i}", "created", 1, "_id", 1);
  if (rc == 0)
    rc = sort ? dtx__kit_list(st, DTX_LEDGER_ENTRIES, filter, sort, page, out)
              : DTX_ENOMEM;
  json_decref(sort);
  json_decref(filter);
  return rc;
}

int dtx_ledger_entries(dtx_store_t *st, const char *ref,
                       const json_t *meta_filter, const dtx_page_t *page,
                       json_t **out) {
  dtx__call_t c;
  *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, entries(st, ref, meta_filter, page, out));
}
