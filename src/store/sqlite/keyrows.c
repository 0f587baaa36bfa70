/* keyrows.c -- the SQLite backend's index rows of one document: its keys,
 * read from the bytes the write stores or read, and the rows an insert,
 * update or delete adds and removes (docs.c, catalog.c's index build).
 *
 * Keys come in one of two forms (sq_keys_t).  The plain form, when every
 * key value is a plain scalar (an integer, a finite double, a string, a
 * boolean, null or missing) and the document has few keys for a
 * non-unique index, is a table of views into the body: found by bkeys.c's
 * walk (dtx__bindex_walk), deduplicated by dtx__bval_cmp and bound to the
 * row statements straight from the bytes, nothing allocated per value.
 * Any other document takes the json_t form, the very tuples
 * dtx__index_keys gives (bkeyvals.c's dtx__bindex_key_tuples), handled as
 * before.  Both forms write the same rows in the same order:
 *  - for plain scalars dtx__bval_cmp's equality is dtx__value_cmp's on
 *    the bridged values (numbers by exact value, strings bytewise, null
 *    equal to missing), so the deduplication keeps the same tuples, the
 *    first of equals;
 *  - a value is bound as dtx__sq_bind_key binds its bridged json_t
 *    (int32 and int64 as INTEGER, doubles as REAL, strings as TEXT,
 *    booleans as 0/1, null and missing as 0, with dtx__value_bracket's
 *    bracket);
 *  - the multikey flag is dtx__index_keys_multikey's: with scalars only,
 *    several tuples.
 * A Date, ObjectId or Decimal128 key is an object once bridged, and marks
 * its index multikey as keys.c always did; bkeys.c's own flag
 * (dtx__bindex_keys: BSON documents and arrays only) would not, and is
 * not used here.  A unique index takes the json_t form, so the order in
 * which an update's new keys meet a duplicate, hence the key the error
 * names, stays as before. */
#include "store/sqlite/sqlite_int.h"

#include "doc/bdoc.h"
#include "util/buf.h"
#include "util/err.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- binding a json_t key; the multikey mark -------------------------------------- */

int dtx__sq_bind_key(sqlite3_stmt *st, int i, const json_t *v) {
  int br = dtx__value_bracket(v);
  int src = sqlite3_bind_int(st, i, br);
  if (src == SQLITE_OK) {
    if (!v || json_is_null(v))
      src = sqlite3_bind_int(st, i + 1, 0);
    else if (json_is_integer(v))
      src = sqlite3_bind_int64(st, i + 1, json_integer_value(v));
    else if (json_is_real(v))
      src = sqlite3_bind_double(st, i + 1, json_real_value(v));
    else if (json_is_string(v))
      src = sqlite3_bind_text(st, i + 1, json_string_value(v),
                              (int)json_string_length(v), SQLITE_STATIC);
    else if (json_is_boolean(v))
      src = sqlite3_bind_int(st, i + 1, json_is_true(v));
    else {
      char *text;
      size_t len;
      int rc = dtx__sq_text(v, 1, &text, &len);
      if (rc < 0)
        return rc;
      src = sqlite3_bind_text(st, i + 1, text, (int)len, free);
    }
  }
  return src == SQLITE_OK
             ? 0
             : dtx__err(DTX_EBACKEND, "sqlite: binding an index key");
}

/* Notes ix multikey in w when a document's keys (all of them) make it
 * so: the catalog learns it when the write commits. */
static int note_mk(sq_wctx_t *w, const sq_idx_t *ix, int multikey) {
  if (!ix->multikey && multikey) {
    size_t i = 0;
    while (i < w->nmk && w->mk[i] != ix->id)
      i++;
    if (i == w->nmk) {
      if (w->nmk == w->capmk && DTX__GROW(w->mk, w->capmk, 4))
        return dtx__err(DTX_ENOMEM, "noting a multikey index");
      w->mk[w->nmk++] = ix->id;
    }
  }
  return 0;
}

/* ---- key set differences ------------------------------------------------------------------- */

/* A key tuple's text (dtx__sq_text, not canonical): equal texts are
 * equal values, hence one index row (distinct texts may still be one row,
 * 1 and 1.0: such a key is deleted and inserted again, which is right
 * too).  All texts of a key set share one buffer: this runs for every
 * update that touches an indexed field, and a malloc'd text per tuple
 * (jansson's json_dumps) was most of its cost in the profile of batched
 * transfers (docs/benchmarks.md). */
typedef struct ktext {
  const char *t;
  size_t n; /* its length; texts hold no NUL */
  size_t i; /* its place in the keys array */
} ktext_t;

static int ktext_cmp(const void *a, const void *b) {
  const ktext_t *x = a, *y = b;
  int c = memcmp(x->t, y->t, x->n < y->n ? x->n : y->n);
  return c ? c : x->n < y->n ? -1 : x->n > y->n;
}

/* keys' tuples as texts in *b (the caller frees b->p), sorted; NULL when
 * out of memory. */
static ktext_t *ktexts(const json_t *keys, dtx__buf_t *b) {
  size_t n = json_array_size(keys);
  ktext_t *k = calloc(n ? n : 1, sizeof *k);
  for (size_t i = 0; k && i < n; i++) {
    k[i].i = i;
    k[i].n = b->n; /* its start until the buffer stops moving */
    dtx__sq_text_put(b, json_array_get(keys, i), 0);
  }
  if (!k || b->oom) {
    free(k);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    size_t end = i + 1 < n ? k[i + 1].n : b->n;
    k[i].t = b->p + k[i].n;
    k[i].n = end - k[i].n;
  }
  qsort(k, n, sizeof *k, ktext_cmp);
  return k;
}

/* The tuples only ko has (*gone) and only kn has (*added), new arrays:
 * an update that pushes one marker onto an indexed array of 200 touches
 * one index row, not 401. */
static int keys_diff(const json_t *ko, const json_t *kn, json_t **gone,
                     json_t **added) {
  size_t no = json_array_size(ko), nn = json_array_size(kn), i = 0, j = 0;
  dtx__buf_t ta = {0}, tb = {0};
  ktext_t *a = ktexts(ko, &ta), *b = ktexts(kn, &tb);
  *gone = json_array();
  *added = json_array();
  int rc = a && b && *gone && *added ? 0 : DTX_ENOMEM;
  while (rc == 0 && (i < no || j < nn)) {
    int c = i == no ? 1 : j == nn ? -1 : ktext_cmp(&a[i], &b[j]);
    if (c < 0)
      rc = json_array_append(*gone, json_array_get(ko, a[i++].i));
    else if (c > 0)
      rc = json_array_append(*added, json_array_get(kn, b[j++].i));
    else
      i++, j++;
    rc = rc ? DTX_ENOMEM : 0;
  }
  free(a);
  free(b);
  free(ta.p);
  free(tb.p);
  if (rc < 0) {
    json_decref(*gone);
    json_decref(*added);
    *gone = *added = NULL;
    return dtx__err(rc, "comparing index keys");
  }
  return 0;
}



/* ---- keys of a document ---------------------------------------------------------- */

/* More tuples than this take the json_t form, whose deduplication sorts:
 * the plain form compares each new tuple with those kept. */
#define PLAIN_MAX 16

static int plain(const dtx__bval_t *v) {
  switch (v->type) {
  case BSON_TYPE_EOD: case BSON_TYPE_NULL: case BSON_TYPE_INT32:
  case BSON_TYPE_INT64: case BSON_TYPE_UTF8: case BSON_TYPE_BOOL:
    return 1;
  case BSON_TYPE_DOUBLE:
    return isfinite(dtx__bval_double(v)); /* bridged NaN is an object */
  default:
    return 0;
  }
}

enum { NOT_PLAIN = 1 }; /* collect's answer that stops the walk */

static int collect(void *arg, const dtx__bval_t *vals) {
  sq_keys_t *k = arg;
  for (size_t f = 0; f < k->nf; f++)
    if (!plain(&vals[f]))
      return NOT_PLAIN;
  for (size_t t = 0; t < k->n; t++) {
    size_t f = 0;
    while (f < k->nf && dtx__bval_cmp(&k->v[t * k->nf + f], &vals[f]) == 0)
      f++;
    if (f == k->nf)
      return 0; /* an equal tuple is kept already */
  }
  if (k->n == PLAIN_MAX)
    return NOT_PLAIN;
  memcpy(&k->v[k->n++ * k->nf], vals, k->nf * sizeof *vals);
  return 0;
}

int dtx__sq_keys_of(const sq_idx_t *ix, const uint8_t *body, uint32_t len,
                    sq_keys_t *k) {
  const dtx__index_spec_t *s = ix->spec;
  memset(k, 0, sizeof *k);
  k->nf = s->nfields;
  int found = 0, rc = NOT_PLAIN;
  if (!s->unique) {
    k->v = malloc(PLAIN_MAX * k->nf * sizeof *k->v);
    if (!k->v)
      return dtx__err(DTX_ENOMEM, "index '%s': out of memory", s->name);
    rc = dtx__bindex_walk(s, body, len, collect, k, &found);
  }
  if (rc == 0) {
    if (s->sparse && !found)
      k->n = 0;
    return 0;
  }
  free(k->v);
  k->v = NULL;
  k->n = 0;
  if (rc == NOT_PLAIN)
    rc = dtx__bindex_key_tuples(s, body, len, &k->json, NULL);
  return rc < 0 ? dtx__err_wrap(rc, "index '%s'", s->name) : 0;
}

void dtx__sq_keys_free(sq_keys_t *k) {
  free(k->v);
  json_decref(k->json);
  memset(k, 0, sizeof *k);
}

/* ---- binding a plain key; the rows of a key set ------------------------------------ */

/* v bound as dtx__sq_bind_key binds its bridged json_t (the file's
 * opening comment), with dtx__value_bracket's numbers (null 1, numbers
 * 2, strings 3, booleans 8); test_sqlite_keyrows compares every column
 * of the rows both ways give. */
static int bind_plain(sqlite3_stmt *st, int i, const dtx__bval_t *v) {
  int src;
  switch (v->type) {
  case BSON_TYPE_INT32:
  case BSON_TYPE_INT64:
  case BSON_TYPE_DOUBLE:
    src = sqlite3_bind_int(st, i, 2);
    if (src == SQLITE_OK)
      src = v->type == BSON_TYPE_DOUBLE
                ? sqlite3_bind_double(st, i + 1, dtx__bval_double(v))
                : sqlite3_bind_int64(st, i + 1,
                                     v->type == BSON_TYPE_INT32
                                         ? dtx__bval_int32(v)
                                         : dtx__bval_int64(v));
    break;
  case BSON_TYPE_UTF8: {
    uint32_t n;
    const char *s = dtx__bval_str(v, &n);
    src = sqlite3_bind_int(st, i, 3);
    if (src == SQLITE_OK) /* the body outlives the step */
      src = sqlite3_bind_text(st, i + 1, s, (int)n, SQLITE_STATIC);
    break;
  }
  case BSON_TYPE_BOOL:
    src = sqlite3_bind_int(st, i, 8);
    if (src == SQLITE_OK)
      src = sqlite3_bind_int(st, i + 1, dtx__bval_bool(v));
    break;
  default: /* null, missing */
    src = sqlite3_bind_int(st, i, 1);
    if (src == SQLITE_OK)
      src = sqlite3_bind_int(st, i + 1, 0);
  }
  return src == SQLITE_OK
             ? 0
             : dtx__err(DTX_EBACKEND, "sqlite: binding an index key");
}

/* The rows of a key set added (insert) or removed for seq: the tuples
 * of keys (the json_t form, bound by dtx__sq_bind_key) or else of k (the
 * plain form, bound by bind_plain), those whose flag in pick is set
 * (pick NULL: all). */
static int rows(sq_conn_t *c, const sq_idx_t *ix, const json_t *keys,
                const sq_keys_t *k, const char *pick, int64_t seq,
                int insert) {
  size_t nf = ix->spec->nfields, n = keys ? json_array_size(keys) : k->n;
  sqlite3_stmt *st;
  int rc = insert ? dtx__sq_prep(c, ix->sql_ins, ix->h_ins, &st)
                  : dtx__sq_prep(c, ix->sql_del, ix->h_del, &st);
  if (rc < 0)
    return rc;
  for (size_t t = 0; t < n; t++) {
    if (pick && !pick[t])
      continue;
    json_t *tuple = keys ? json_array_get(keys, t) : NULL;
    sqlite3_reset(st);
    for (size_t f = 0; f < nf; f++)
      if ((rc = keys ? dtx__sq_bind_key(st, (int)(2 * f + 1),
                                        json_array_get(tuple, f))
                     : bind_plain(st, (int)(2 * f + 1), &k->v[t * nf + f])) <
          0)
        return rc;
    sqlite3_bind_int64(st, (int)(2 * nf + 1), seq);
    int src = sqlite3_step(st);
    sqlite3_reset(st);
    if (!keys)
      sqlite3_clear_bindings(st); /* no view into the body stays bound */
    if (src == SQLITE_DONE)
      continue;
    /* A duplicate needs a unique index, which takes the json_t form. */
    if ((src & 0xff) == SQLITE_CONSTRAINT && insert && tuple)
      return dtx__err_dupkey(ix->spec->name,
                             (const char *const *)ix->spec->paths, tuple,
                             nf);
    return dtx__sq_err(c, src, insert ? "adding index keys"
                                      : "removing index keys");
  }
  return 0;
}

/* k as json_t tuples (the bridge of each value, missing as null), for an
 * update whose other key set took the json_t form. */
static int plain_json(const sq_keys_t *k, json_t **out) {
  json_t *arr = json_array();
  int rc = arr ? 0 : DTX_ENOMEM;
  for (size_t t = 0; rc == 0 && t < k->n; t++) {
    json_t *tup = json_array();
    rc = tup && json_array_append_new(arr, tup) == 0 ? 0 : DTX_ENOMEM;
    for (size_t f = 0; rc == 0 && f < k->nf; f++) {
      const dtx__bval_t *v = &k->v[t * k->nf + f];
      json_t *j = NULL;
      if (v->type == BSON_TYPE_EOD)
        j = json_null();
      else if (dtx__bval_to_json(v, &j) < 0)
        j = NULL;
      rc = j && json_array_append_new(tup, j) == 0 ? 0 : DTX_ENOMEM;
    }
  }
  if (rc < 0) {
    json_decref(arr);
    return dtx__err(DTX_ENOMEM, "comparing index keys");
  }
  *out = arr;
  return 0;
}

/* 1 when a and b write one index row text for text (keys_diff's identity
 * of the json_t form: the same JSON type and value; a double by its bits,
 * so -0.0 and 0.0 differ there as their texts do). */
static int same_row(const dtx__bval_t *a, const dtx__bval_t *b) {
  int ai = a->type == BSON_TYPE_INT32 || a->type == BSON_TYPE_INT64;
  int bi = b->type == BSON_TYPE_INT32 || b->type == BSON_TYPE_INT64;
  if (ai || bi) {
    if (!ai || !bi)
      return 0;
    int64_t x, y;
    dtx__bval_integer(a, &x);
    dtx__bval_integer(b, &y);
    return x == y;
  }
  int an = a->type == BSON_TYPE_EOD || a->type == BSON_TYPE_NULL;
  int bn = b->type == BSON_TYPE_EOD || b->type == BSON_TYPE_NULL;
  if (an || bn)
    return an && bn;
  if (a->type != b->type)
    return 0;
  if (a->type == BSON_TYPE_DOUBLE) {
    double x = dtx__bval_double(a), y = dtx__bval_double(b);
    return memcmp(&x, &y, sizeof x) == 0;
  }
  if (a->type == BSON_TYPE_BOOL)
    return dtx__bval_bool(a) == dtx__bval_bool(b);
  uint32_t na, nb;
  const char *sa = dtx__bval_str(a, &na), *sb = dtx__bval_str(b, &nb);
  return na == nb && memcmp(sa, sb, na) == 0;
}

static int tuple_in(const sq_keys_t *k, const dtx__bval_t *tup) {
  for (size_t t = 0; t < k->n; t++) {
    size_t f = 0;
    while (f < k->nf && same_row(&k->v[t * k->nf + f], &tup[f]))
      f++;
    if (f == k->nf)
      return 1;
  }
  return 0;
}

/* ---- the rows of an insert, a delete, an update ------------------------------------- */

int dtx__sq_keys_insert(sq_wctx_t *w, const sq_idx_t *ix, const sq_keys_t *k,
                        int64_t seq) {
  int rc = note_mk(w, ix, k->json ? dtx__index_keys_multikey(k->json)
                                  : k->n > 1);
  return rc < 0 ? rc : rows(w->c, ix, k->json, k, NULL, seq, 1);
}

int dtx__sq_keys_delete(sq_conn_t *c, const sq_idx_t *ix, const sq_keys_t *k,
                        int64_t seq) {
  return rows(c, ix, k->json, k, NULL, seq, 0);
}

/* Only the keys that changed are touched.  All gone rows go before any
 * added one, so a key moving between fields of one document is not
 * mistaken for a duplicate; whether the index becomes multikey is judged
 * on all the new keys. */
int dtx__sq_keys_update(sq_wctx_t *w, const sq_idx_t *ix, const sq_keys_t *ko,
                        const sq_keys_t *kn, int64_t seq) {
  int rc = 0;
  if (!ko->json && !kn->json) {
    char gone[PLAIN_MAX], added[PLAIN_MAX];
    size_t ng = 0, na = 0;
    for (size_t t = 0; t < ko->n; t++)
      ng += gone[t] = !tuple_in(kn, &ko->v[t * ko->nf]);
    for (size_t t = 0; t < kn->n; t++)
      na += added[t] = !tuple_in(ko, &kn->v[t * kn->nf]);
    if (ng && (rc = rows(w->c, ix, NULL, ko, gone, seq, 0)) < 0)
      return rc;
    /* Whatever changed: this document's keys make the index multikey
     * (a store that missed the mark before gets it now). */
    if ((rc = note_mk(w, ix, kn->n > 1)) < 0)
      return rc;
    return na ? rows(w->c, ix, NULL, kn, added, seq, 1) : 0;
  }
  json_t *jo = ko->json, *jn = kn->json;
  if ((!jo && (rc = plain_json(ko, &jo)) < 0) ||
      (!jn && (rc = plain_json(kn, &jn)) < 0)) {
    if (jo != ko->json)
      json_decref(jo);
    return rc;
  }
  json_t *gone = NULL, *added = NULL;
  if (!json_equal(jo, jn) && (rc = keys_diff(jo, jn, &gone, &added)) == 0 &&
      (rc = rows(w->c, ix, gone, NULL, NULL, seq, 0)) == 0 &&
      (rc = note_mk(w, ix, dtx__index_keys_multikey(jn))) == 0)
    rc = rows(w->c, ix, added, NULL, NULL, seq, 1);
  json_decref(gone);
  json_decref(added);
  if (jo != ko->json)
    json_decref(jo);
  if (jn != kn->json)
    json_decref(jn);
  return rc;
}
