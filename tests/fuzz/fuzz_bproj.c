/* fuzz_bproj.c -- differential libFuzzer target: projection, sort and
 * index keys on json_t (project.c, sort.c, keys.c) against the BSON
 * engine (bproject.c, bsort.c, bkeys.c), and dtx__bkey_encode's order
 * against dtx__bval_cmp.
 *
 * The input is "<spec JSON>\n<document JSON>" (fuzz_pair.h).  Both are
 * converted by the bridge; then, for the spec read as a projection, a
 * sort and an index key, both engines must give the same error code and
 * detail or the same answer (the same output text, the same order, the
 * same keys byte for byte), and for every pair of values found in the two
 * documents (top-level fields and array elements) memcmp of their
 * encodings must have dtx__bval_cmp's sign, ascending and descending.
 * The input is also read as BSON bytes (try_raw), for the types JSON
 * lacks.  Index keys as json_t tuples from the bytes
 * (dtx__bindex_key_tuples, bkeyvals.c) must be keys.c's on the bridged
 * document exactly: same code and detail, or the same text (key order,
 * integer or real), json_equal, and the same multikey flag.  Any
 * disagreement aborts. */
#include "doc/bfilter.h"
#include "doc/bdoc.h"
#include "doc/bproj.h"
#include "doc/doc.h"
#include "fuzz_pair.h"
#include "util/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *detail_copy(void) { return strdup(dtx_errdetail()); }

static void same_error(int rc, const char *det, int brc) {
  if (rc != brc)
    abort();
  if (rc && (!det || strcmp(det, dtx_errdetail())))
    abort();
}

/* The projection read from spec, applied to doc; "path.$" gets its
 * position from doc read as a filter (matched against doc itself), when
 * both engines compile it. */
static void try_project(const json_t *spec, bson_t *bspec, const json_t *doc,
                        bson_t *bdoc) {
  dtx__proj_t *p = NULL;
  dtx__bproj_t *bp = NULL;
  int rc = dtx__proj_compile(spec, &p);
  char *det = rc ? detail_copy() : NULL;
  int brc = dtx__bproj_compile(bson_get_data(bspec), bspec->len, &bp);
  same_error(rc, det, brc);
  free(det);
  if (rc)
    return;
  dtx__filter_t *f = NULL;
  dtx__bfilter_t *bf = NULL;
  int frc = dtx__filter_compile(doc, &f), bfrc = dtx__bfilter_compile(bdoc, &bf);
  if (frc || bfrc) {
    dtx__filter_free(f);
    dtx__bfilter_free(bf);
    f = NULL;
    bf = NULL;
  }
  json_t *out = NULL;
  rc = dtx__proj_apply_at(p, doc, f, NULL, &out);
  det = rc ? detail_copy() : NULL;
  bson_t bout;
  brc = dtx__bproj_apply_at(bp, bson_get_data(bdoc), bdoc->len, bf, NULL, 0,
                            &bout);
  same_error(rc, det, brc);
  if (!rc) {
    json_t *jb = NULL;
    if (dtx__bson_to_json(bson_get_data(&bout), bout.len, 0, &jb))
      abort();
    char *a = dtx__json_dump(out), *b = dtx__json_dump(jb);
    if (!a || !b || strcmp(a, b))
      abort();
    free(a);
    free(b);
    json_decref(jb);
    bson_destroy(&bout);
  }
  json_decref(out);
  free(det);
  dtx__filter_free(f);
  dtx__bfilter_free(bf);
  dtx__proj_free(p);
  dtx__bproj_free(bp);
}

static int sgn(int x) { return (x > 0) - (x < 0); }

static void try_sort(const json_t *spec, bson_t *bspec, const json_t *doc,
                     bson_t *bdoc) {
  int rc = dtx__sort_check(spec);
  char *det = rc ? detail_copy() : NULL;
  int brc = dtx__bsort_check(bson_get_data(bspec), bspec->len);
  same_error(rc, det, brc);
  free(det);
  if (rc)
    return;
  const json_t *jd[3] = {doc, spec, doc};
  dtx__bval_t bd[3] = {dtx__bval_of_doc(bson_get_data(bdoc), bdoc->len),
                       dtx__bval_of_doc(bson_get_data(bspec), bspec->len),
                       dtx__bval_of_doc(bson_get_data(bdoc), bdoc->len)};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      if (sgn(dtx__sort_cmp(spec, jd[i], jd[j])) !=
          sgn(dtx__bsort_cmp(bson_get_data(bspec), bspec->len, &bd[i],
                             &bd[j])))
        abort();
  /* Both stable sorts of [doc, spec, doc] give the same permutation. */
  json_t *arr = json_pack("[O,O,O]", doc, spec, doc);
  if (!arr || dtx__sort_array(arr, spec) ||
      dtx__bsort_docs(bd, 3, bson_get_data(bspec), bspec->len))
    abort();
  for (int i = 0; i < 3; i++) {
    const json_t *x = json_array_get(arr, (size_t)i);
    int want = x == spec ? 1 : 0; /* which input slot: 0/2 docs, 1 spec */
    int got = bd[i].data == (const uint8_t *)bson_get_data(bspec) ? 1 : 0;
    if (want != got)
      abort();
  }
  json_decref(arr);
}

/* keys.c's answer for jdoc (rc, det, keys) against dtx__bindex_key_tuples
 * on doc, jdoc's bytes. */
static void same_tuples(const dtx__index_spec_t *s, const uint8_t *doc,
                        uint32_t len, int rc, const char *det,
                        const json_t *keys) {
  json_t *got = NULL;
  int mk = -1;
  int brc = dtx__bindex_key_tuples(s, doc, len, &got, &mk);
  same_error(rc, det, brc);
  if (rc) {
    if (got || mk != 0)
      abort();
    return;
  }
  char *a = dtx__json_dump(keys), *b = dtx__json_dump(got);
  if (!a || !b || strcmp(a, b) || !json_equal(keys, got) ||
      mk != dtx__index_keys_multikey(keys))
    abort();
  free(a);
  free(b);
  json_decref(got);
}

static void try_keys(const json_t *spec, const json_t *doc, bson_t *bdoc) {
  dtx__index_spec_t *s = NULL;
  if (dtx__index_spec_parse(spec, NULL, &s))
    return;
  json_t *keys = NULL;
  int rc = dtx__index_keys(s, doc, &keys);
  char *det = rc ? detail_copy() : NULL;
  dtx__bkeys_t k = {0};
  int brc = dtx__bindex_keys(s, bson_get_data(bdoc), bdoc->len, &k);
  same_error(rc, det, brc);
  same_tuples(s, bson_get_data(bdoc), bdoc->len, rc, det, keys);
  free(det);
  if (!rc) {
    if (k.n != json_array_size(keys) ||
        k.multikey != dtx__index_keys_multikey(keys))
      abort();
    dtx__buf_t want = {0};
    bson_t holder = BSON_INITIALIZER;
    for (size_t t = 0; t < k.n; t++) {
      json_t *tuple = json_array_get(keys, t);
      want.n = 0;
      for (size_t f = 0; f < s->nfields; f++) {
        dtx__bval_t v;
        bson_reinit(&holder);
        if (dtx__bval_from_json(json_array_get(tuple, f), &holder, &v) ||
            dtx__bkey_encode(&v, s->dirs[f] < 0, &want))
          abort();
      }
      size_t len;
      const uint8_t *got = dtx__bkeys_at(&k, t, &len);
      if (len != want.n || memcmp(got, want.p, len))
        abort();
    }
    bson_destroy(&holder);
    free(want.p);
  }
  dtx__bkeys_free(&k);
  json_decref(keys);
  dtx__index_spec_free(s);
}

/* Values to compare: the top-level fields of both documents, and the
 * elements of arrays among them. */
#define MAXV 64

static size_t collect(const bson_t *b, dtx__bval_t *v, size_t n) {
  uint32_t off = 0;
  dtx__belem_t e;
  while (n < MAXV && dtx__belem_next(bson_get_data(b), b->len, &off, &e)) {
    v[n++] = e.v;
    if (e.v.type == BSON_TYPE_ARRAY) {
      uint32_t alen, aoff = 0;
      const uint8_t *a = dtx__bval_doc(&e.v, &alen);
      dtx__belem_t x;
      while (n < MAXV && dtx__belem_next(a, alen, &aoff, &x))
        v[n++] = x.v;
    }
  }
  return n;
}

static int bytes_cmp(const dtx__buf_t *a, const dtx__buf_t *b) {
  size_t n = a->n < b->n ? a->n : b->n;
  int c = memcmp(a->p, b->p, n);
  return c ? sgn(c) : (a->n > b->n) - (a->n < b->n);
}

static void try_order(bson_t *bspec, bson_t *bdoc) {
  dtx__bval_t v[MAXV];
  size_t n = collect(bdoc, v, collect(bspec, v, 0));
  dtx__buf_t a[MAXV], d[MAXV];
  memset(a, 0, sizeof a);
  memset(d, 0, sizeof d);
  for (size_t i = 0; i < n; i++)
    if (dtx__bkey_encode(&v[i], 0, &a[i]) || dtx__bkey_encode(&v[i], 1, &d[i]))
      abort();
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < n; j++) {
      int c = sgn(dtx__bval_cmp(&v[i], &v[j]));
      if (bytes_cmp(&a[i], &a[j]) != c || bytes_cmp(&d[i], &d[j]) != -c)
        abort();
    }
  for (size_t i = 0; i < n; i++) {
    free(a[i].p);
    free(d[i].p);
  }
}

static void try_all(const json_t *spec, const json_t *doc) {
  bson_t bspec = BSON_INITIALIZER, bdoc = BSON_INITIALIZER;
  if (!json_is_object(spec) || !json_is_object(doc) ||
      dtx__bson_from_json(spec, &bspec) || dtx__bson_from_json(doc, &bdoc))
    goto out;
  try_project(spec, &bspec, doc, &bdoc);
  try_sort(spec, &bspec, doc, &bdoc);
  try_keys(spec, doc, &bdoc);
  try_order(&bspec, &bdoc);
out:
  bson_destroy(&bspec);
  bson_destroy(&bdoc);
}

/* Index keys of raw bytes (every BSON type) on each top-level field, on
 * field.x, and on each field with the one before it: keys.c on the
 * bridged document against dtx__bindex_key_tuples on the bytes. */
static void raw_keys(const uint8_t *data, uint32_t size) {
  json_t *jdoc = NULL;
  if (dtx__bson_to_json(data, size, 0, &jdoc))
    return; /* nothing to compare with (checked bytes do bridge) */
  uint32_t off = 0;
  dtx__belem_t e;
  char prev[64] = "";
  for (int i = 0; i < 8 && dtx__belem_next(data, size, &off, &e); i++) {
    char sub[80];
    snprintf(sub, sizeof sub, "%.60s.x", e.key);
    json_t *specs[3] = {json_pack("{s:i}", e.key, 1),
                        json_pack("{s:i}", sub, -1),
                        prev[0] ? json_pack("{s:i,s:i}", prev, 1, e.key, 1)
                                : NULL};
    for (int k = 0; k < 3; k++) {
      dtx__index_spec_t *s = NULL;
      dtx_index_opts_t o = {.sparse = (int)(e.keylen + (uint32_t)k) % 2};
      if (specs[k] && dtx__index_spec_parse(specs[k], &o, &s) == 0) {
        json_t *keys = NULL;
        int rc = dtx__index_keys(s, jdoc, &keys);
        char *det = rc ? detail_copy() : NULL;
        same_tuples(s, data, size, rc, det, keys);
        free(det);
        json_decref(keys);
      }
      dtx__index_spec_free(s);
      json_decref(specs[k]);
    }
    snprintf(prev, sizeof prev, "%.60s", e.key);
  }
  json_decref(jdoc);
}

/* The input read as BSON bytes instead (when it passes the stored-body
 * check): every type JSON lacks.  Key order against dtx__bval_cmp over
 * its values; the document projected and sorted by each of its own field
 * names, which must not crash and must write checked bytes. */
static void try_raw(const uint8_t *data, size_t size) {
  if (size < 5 || size > 4096 ||
      dtx__bson_check(data, size, DTX_EINVAL, "fuzz input"))
    return;
  bson_t b;
  if (!bson_init_static(&b, data, size))
    return;
  try_order(&b, &b);
  raw_keys(data, (uint32_t)size);
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(data, (uint32_t)size, &off, &e)) {
    bson_t spec = BSON_INITIALIZER, out;
    BSON_APPEND_INT32(&spec, e.key, e.keylen % 2 ? 1 : -1);
    dtx__bval_t docs[2] = {dtx__bval_of_doc(data, (uint32_t)size),
                           dtx__bval_of_doc(bson_get_data(&spec), spec.len)};
    if (dtx__bsort_docs(docs, 2, bson_get_data(&spec), spec.len) == 0 &&
        dtx__bproject(data, (uint32_t)size, bson_get_data(&spec), spec.len,
                      &out) == 0) {
      if (dtx__bson_check(bson_get_data(&out), out.len, DTX_EINVAL, "out"))
        abort();
      bson_destroy(&out);
    }
    bson_destroy(&spec);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_pair(data, size, try_all);
  try_raw(data, size);
  return 0;
}
