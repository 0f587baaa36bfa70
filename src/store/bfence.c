/* bfence.c -- the fenced write on BSON bytes: the twin of fence.c, whose
 * head comment states the rule (the fence test, the record, the
 * tombstones), for the backends' per-document path on stored bytes
 * (docs/engine.md, "Stages", 2b).  The rule is fence.c's; what differs is
 * only how a record is written: BSON is not edited in place, so every
 * result is a new document, spliced from the old one's bytes -- the
 * elements the rule does not touch are copied as they are, and the one
 * element it does touch (_fence, or a name inside it) is rewritten where
 * it stood, or appended last when new, as jansson's json_object_set does
 * in fence.c, so both engines give the same field order.
 *
 * Tokens written here are int64 (a token is a lock's counter; an int32
 * one the bridge wrote for a small value reads the same).  The refusals'
 * details come from fence.c's own helpers (fence_int.h). */
#include "store/fence_int.h"

#include "util/assert.h"
#include "util/err.h"

#include <string.h>

#define FENCE_LEN 6 /* strlen(FENCE_FIELD) */

static const uint8_t empty_doc[5] = {5, 0, 0, 0, 0};
static const dtx__bval_t none = {BSON_TYPE_EOD, 0, NULL};

/* ---- splicing ------------------------------------------------------------ */

/* Where key's element lies in doc: bytes [*start, *end), its value in
 * *v; when absent, both are the offset of doc's terminating NUL and
 * v->type is 0. */
static void find_span(const uint8_t *doc, uint32_t len, const char *key,
                      size_t klen, uint32_t *start, uint32_t *end,
                      dtx__bval_t *v) {
  uint32_t off = 0, at = 4;
  dtx__belem_t e;
  while (dtx__belem_next(doc, len, &off, &e)) {
    if (e.keylen == klen && memcmp(e.key, key, klen) == 0) {
      *start = at;
      *end = off;
      *v = e.v;
      return;
    }
    at = off;
  }
  *start = *end = len - 1;
  *v = none;
}

/* Writes into out (bson_init'ed, empty) the document doc[0..len) (NULL:
 * {}) with its element key set to a value of type t whose payload is
 * p[0..plen): in the existing element's place, or last when there is
 * none or when `last` is set (the existing one then goes); p NULL
 * removes the element.  -1 when out of memory. */
static int splice_elem(bson_t *out, const uint8_t *doc, uint32_t len,
                       const char *key, bson_type_t t, const void *p,
                       uint32_t plen, int last) {
  if (!doc) {
    doc = empty_doc;
    len = sizeof empty_doc;
  }
  size_t klen = strlen(key);
  uint32_t start, end;
  dtx__bval_t old;
  find_span(doc, len, key, klen, &start, &end, &old);
  size_t elen = p ? 1 + klen + 1 + plen : 0;
  size_t n = len - (end - start) + elen;
  if (n > INT32_MAX)
    return -1;
  uint8_t *w = bson_reserve_buffer(out, (uint32_t)n);
  if (!w)
    return -1;
  uint32_t le = BSON_UINT32_TO_LE((uint32_t)n);
  uint8_t *q = w;
  memcpy(q, &le, 4);
  q += 4;
  /* the elements before the old one; then the new one when it takes the
   * old one's place */
  memcpy(q, doc + 4, start - 4);
  q += start - 4;
  if (!last && p) {
    *q++ = (uint8_t)t;
    memcpy(q, key, klen + 1);
    q += klen + 1;
    memcpy(q, p, plen);
    q += plen;
  }
  memcpy(q, doc + end, len - 1 - end); /* the elements after it */
  q += len - 1 - end;
  if (last && p) {
    *q++ = (uint8_t)t;
    memcpy(q, key, klen + 1);
    q += klen + 1;
    memcpy(q, p, plen);
    q += plen;
  }
  *q++ = 0;
  DTX_ASSERT((size_t)(q - w) == n, "bfence.splice");
  return 0;
}

/* rec (a record's bytes, NULL: {}) with name's token set to token, as an
 * int64, into out (bson_init'ed, empty).  -1 when out of memory. */
static int put_token(bson_t *out, const uint8_t *rec, uint32_t len,
                     const char *name, int64_t token) {
  uint64_t le = BSON_UINT64_TO_LE((uint64_t)token);
  return splice_elem(out, rec, len, name, BSON_TYPE_INT64, &le, 8, 0);
}

/* ---- the fence test ------------------------------------------------------ */

/* doc's _id through the bridge, for a refusal's detail (NULL when it has
 * none, or when memory ran out: the detail then says "?"). */
static json_t *id_of(const uint8_t *doc, uint32_t len) {
  dtx__belem_t e;
  json_t *id = NULL;
  if (doc && dtx__belem_find(doc, len, "_id", 3, &e))
    dtx__bval_to_json(&e.v, &id);
  return id;
}

/* fence.c's judge: m's token against the record f (type 0: none) of
 * doc, a stored document (gone 0) or one about to be created over a
 * deleted one's tombstone (gone 1).  *recorded: the token on record, 0
 * when none. */
static int judge(const dtx__modify_t *m, const dtx__bval_t *f,
                 const uint8_t *doc, uint32_t len, int gone,
                 int64_t *recorded) {
  dtx__belem_t t;
  int named = 0, rc;
  *recorded = 0;
  if (f->type == BSON_TYPE_EOD)
    return 0;
  if (f->type == BSON_TYPE_DOCUMENT) {
    if (!dtx__belem_find(f->data, f->len, m->fence_name, strlen(m->fence_name),
                         &t))
      return 0;
    named = 1;
  }
  if (!named || !dtx__bval_integer(&t.v, recorded)) {
    *recorded = 0;
    json_t *id = id_of(doc, len);
    rc = dtx__fence_err_malformed(m, id, named);
    json_decref(id);
    return rc;
  }
  /* dtx__fence_check_args refused a token below 1 */
  DTX_ASSERT(m->fence_token >= 1, "fence.token");
  if (*recorded > m->fence_token) {
    json_t *id = id_of(doc, len);
    rc = dtx__fence_err_stale(m, id, *recorded, gone);
    json_decref(id);
    return rc;
  }
  return 0;
}

/* ---- inside the atomic step ---------------------------------------------- */

/* 1 when doc's _fence holds token under name (the record a fenced write
 * leaves). */
static int holds(const bson_t *doc, const char *name, int64_t token) {
  dtx__belem_t f, t;
  int64_t v;
  return dtx__belem_find(bson_get_data(doc), doc->len, FENCE_FIELD, FENCE_LEN,
                         &f) &&
         f.v.type == BSON_TYPE_DOCUMENT &&
         dtx__belem_find(f.v.data, f.v.len, name, strlen(name), &t) &&
         dtx__bval_integer(&t.v, &v) && v == token;
}

/* fence.c's same_but_fence on bytes: a[0..alen) and b[0..blen) hold the
 * same elements in the same order once each one's _fence element is set
 * aside, and the same _fence element (bytes) wherever it stands. */
static int same_but_fence(const uint8_t *a, uint32_t alen, const uint8_t *b,
                          uint32_t blen) {
  uint32_t as, ae, bs, be;
  dtx__bval_t v;
  find_span(a, alen, FENCE_FIELD, FENCE_LEN, &as, &ae, &v);
  find_span(b, blen, FENCE_FIELD, FENCE_LEN, &bs, &be, &v);
  if (ae - as != be - bs || memcmp(a + as, b + bs, ae - as) != 0 ||
      alen - (ae - as) != blen - (be - bs))
    return 0;
  /* The rest, [4, s) then [e, len - 1) of each, compared as one run. */
  const uint8_t *pa[2] = {a + 4, a + ae}, *pb[2] = {b + 4, b + be};
  uint32_t na[2] = {as - 4, alen - 1 - ae}, nb[2] = {bs - 4, blen - 1 - be};
  for (int i = 0, j = 0; i < 2 && j < 2;) {
    uint32_t k = na[i] < nb[j] ? na[i] : nb[j];
    if (memcmp(pa[i], pb[j], k) != 0)
      return 0;
    pa[i] += k, na[i] -= k, pb[j] += k, nb[j] -= k;
    if (!na[i])
      i++;
    if (!nb[j])
      j++;
  }
  return 1;
}

int dtx__bmodify_apply(const dtx__modify_t *m, const dtx__bupdate_t *u,
                       const uint8_t *before, uint32_t blen, int64_t now,
                       bson_t **after, int *changed) {
  int64_t recorded = 0;
  int rc;
  dtx__belem_t bf;
  bson_t sub = BSON_INITIALIZER, *a = NULL, *n = NULL;
  *after = NULL;
  *changed = 1;
  if (!dtx__belem_find(before, blen, FENCE_FIELD, FENCE_LEN, &bf))
    bf.v = none;
  if (m->fence_name && (rc = judge(m, &bf.v, before, blen, 0, &recorded)) < 0)
    return rc;
  if (!u)
    return 0; /* a delete: the test is all */
  if ((rc = dtx__bupdate_apply(u, before, blen, 0, now, &a, changed)) < 0)
    return rc;
  const uint8_t *ad = bson_get_data(a);
  dtx__belem_t ae;
  int record = m->fence_name && recorded != m->fence_token;
  dtx__bval_t af = none; /* after's _fence, looked for when it matters */
  if ((bf.v.type || record) &&
      dtx__belem_find(ad, a->len, FENCE_FIELD, FENCE_LEN, &ae))
    af = ae.v;
  /* A replacement keeps the record, as it keeps _id (fence.c): before's
   * _fence goes back, last, as fence.c sets it. */
  int keep = bf.v.type && !af.type;
  if (!keep && !record)
    goto done;
  if (!keep && af.type == BSON_TYPE_DOCUMENT &&
      dtx__belem_find(af.data, af.len, m->fence_name, strlen(m->fence_name),
                      &ae) &&
      ae.v.type == BSON_TYPE_INT64) {
    /* The usual case once a token is int64: its 8 bytes change where
     * they stand, in the one buffer the update wrote (bson_reserve_buffer
     * of its own length hands that buffer out writable, unmoved). */
    size_t at = (size_t)(ae.v.data - ad);
    uint8_t *w = bson_reserve_buffer(a, a->len);
    if (!w)
      goto nomem;
    uint64_t le = BSON_UINT64_TO_LE((uint64_t)m->fence_token);
    memcpy(w + at, &le, 8);
    *changed = 1;
    goto done;
  }
  dtx__bval_t f = keep ? bf.v : af;
  if (record) {
    /* fence.c cannot record into a _fence that is not an object and says
     * so as it says an allocation failure; store.c keeps every update
     * from writing one, so only a unit test gets here. */
    if (f.type && f.type != BSON_TYPE_DOCUMENT)
      goto nomem;
    if (put_token(&sub, f.type ? f.data : NULL, f.len, m->fence_name,
                  m->fence_token) < 0)
      goto nomem;
    f.type = BSON_TYPE_DOCUMENT;
    f.data = bson_get_data(&sub);
    f.len = sub.len;
  }
  if (!(n = bson_new()) ||
      splice_elem(n, ad, a->len, FENCE_FIELD, f.type, f.data, f.len, 0) < 0)
    goto nomem;
  bson_destroy(&sub);
  bson_destroy(a);
  a = n;
  /* As fence.c: the bytes, with _fence's place set aside (a replacement
   * that writes the document back as it was is no write). */
  *changed = record || !same_but_fence(bson_get_data(a), a->len, before, blen);
  if (!*changed) {
    /* No write: the document is what is stored, _fence where it stands
     * (fence.c). */
    bson_destroy(a);
    if (!(a = bson_new_from_data(before, blen)))
      return dtx__err(DTX_ENOMEM, "applying an update");
  }
done:
  /* The document written carries the token it was written with (a larger
   * one refused it above). */
  DTX_ASSERT(!m->fence_name || holds(a, m->fence_name, m->fence_token),
             "fence.recorded");
  *after = a;
  return 0;
nomem:
  bson_destroy(&sub);
  if (n)
    bson_destroy(n);
  bson_destroy(a);
  return dtx__err(DTX_ENOMEM,
                  record ? "recording a fence" : "applying an update");
}

int dtx__bmodify_upsert_doc(const dtx__modify_t *m, const dtx__bupdate_t *u,
                            const uint8_t *filter, uint32_t flen, int64_t now,
                            bson_t **out) {
  bson_t *d = NULL, rec = BSON_INITIALIZER, *n = NULL;
  dtx__belem_t seeded;
  *out = NULL;
  int rc = dtx__bupsert_doc(filter, flen, u, now, &d);
  if (rc < 0)
    return rc;
  int has = dtx__belem_find(bson_get_data(d), d->len, FENCE_FIELD, FENCE_LEN,
                            &seeded);
  if (!has && !m->fence_name) {
    *out = d;
    return 0;
  }
  /* A filter on _fence seeds nothing: the record is only ever a fenced
   * write's, and it goes last (fence.c deletes the seeded one first). */
  if ((m->fence_name &&
       put_token(&rec, NULL, 0, m->fence_name, m->fence_token) < 0) ||
      !(n = bson_new()) ||
      splice_elem(n, bson_get_data(d), d->len, FENCE_FIELD, BSON_TYPE_DOCUMENT,
                  m->fence_name ? bson_get_data(&rec) : NULL, rec.len, 1) < 0) {
    bson_destroy(&rec);
    bson_destroy(d);
    if (n)
      bson_destroy(n);
    return dtx__err(DTX_ENOMEM, "recording a fence");
  }
  bson_destroy(&rec);
  bson_destroy(d);
  *out = n;
  return 0;
}

/* ---- fence tombstones ---------------------------------------------------- */

int dtx__bfence_tombstone(const dtx__modify_t *m, const uint8_t *before,
                          uint32_t blen, bson_t **rec) {
  dtx__belem_t f;
  *rec = NULL;
  int obj = dtx__belem_find(before, blen, FENCE_FIELD, FENCE_LEN, &f) &&
            f.v.type == BSON_TYPE_DOCUMENT;
  if (!obj && !m->fence_name)
    return 0;
  bson_t *r =
      m->fence_name ? bson_new() : bson_new_from_data(f.v.data, f.v.len);
  if (!r || (m->fence_name && put_token(r, obj ? f.v.data : NULL, f.v.len,
                                        m->fence_name, m->fence_token) < 0)) {
    if (r)
      bson_destroy(r);
    return dtx__err(DTX_ENOMEM, "keeping a fence record");
  }
  if (bson_empty(r))
    bson_destroy(r);
  else
    *rec = r;
  /* A fenced delete keeps its own token under the _id. */
  DTX_ASSERT(!m->fence_name || *rec, "fence.tombstone");
  return 0;
}

int dtx__bfence_revive(const dtx__modify_t *m, const char *coll,
                       const uint8_t *rec, uint32_t rlen, const uint8_t *doc,
                       uint32_t dlen, bson_t **out) {
  int64_t recorded;
  int rc;
  dtx__belem_t f, e, mine;
  *out = NULL;
  if (rlen > sizeof empty_doc && m && m->fence_name) {
    dtx__modify_t j = *m;
    j.coll = coll;
    dtx__bval_t r = dtx__bval_of_doc(rec, rlen);
    if ((rc = judge(&j, &r, doc, dlen, 1, &recorded)) < 0)
      return rc;
  }
  int has = dtx__belem_find(doc, dlen, FENCE_FIELD, FENCE_LEN, &f);
  /* nothing to keep; or a _fence store.c refuses in an insert before it
   * gets here */
  if (rlen <= sizeof empty_doc || (has && f.v.type != BSON_TYPE_DOCUMENT)) {
    if (!(*out = bson_new_from_data(doc, dlen)))
      return dtx__err(DTX_ENOMEM, "reviving a fence record");
    return 0;
  }
  /* Per lock name, the larger token: the new document may carry its own
   * (a fenced upsert's, a restored copy's), never a smaller one than the
   * deleted document had. */
  bson_t *cur = has ? bson_new_from_data(f.v.data, f.v.len)
                    : bson_new_from_data(empty_doc, sizeof empty_doc);
  bson_t *n = NULL;
  uint32_t off = 0;
  if (!cur)
    goto nomem;
  while (dtx__belem_next(rec, rlen, &off, &e)) {
    int64_t a, b;
    if (dtx__belem_find(bson_get_data(cur), cur->len, e.key, e.keylen, &mine) &&
        (!dtx__bval_integer(&e.v, &a) || !dtx__bval_integer(&mine.v, &b) ||
         b >= a))
      continue;
    if (!(n = bson_new()) || splice_elem(n, bson_get_data(cur), cur->len, e.key,
                                         e.v.type, e.v.data, e.v.len, 0) < 0)
      goto nomem;
    bson_destroy(cur);
    cur = n;
    n = NULL;
  }
  if (!(n = bson_new()) ||
      splice_elem(n, doc, dlen, FENCE_FIELD, BSON_TYPE_DOCUMENT,
                  bson_get_data(cur), cur->len, 0) < 0)
    goto nomem;
  bson_destroy(cur);
  *out = n;
  return 0;
nomem:
  if (n)
    bson_destroy(n);
  if (cur)
    bson_destroy(cur);
  return dtx__err(DTX_ENOMEM, "reviving a fence record");
}
