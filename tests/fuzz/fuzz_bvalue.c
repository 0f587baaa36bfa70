/* fuzz_bvalue.c -- the BSON engine's values over arbitrary documents.
 *
 * Input: BSON bytes.  What libbson's validator accepts (lengths, types,
 * UTF-8; the stored-body check, bcheck.c, is stricter) must be readable
 * by the raw reader without stepping outside the bytes (ASan watches),
 * and then:
 *  - dtx__bval_cmp is a total order on the top-level values and the
 *    values a few paths reach: reflexive, antisymmetric, transitive, and
 *    0 only within one bracket;
 *  - every value converts to JSON (relaxed Extended JSON), or fails
 *    with DTX_EINVAL for text that is not UTF-8;
 *  - the walks and gets of a few paths, in the three leaf modes, reach
 *    only values that convert.
 * Any failure aborts. */
#include "doc/bdoc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXV 24

typedef struct pool {
  dtx__bval_t v[MAXV];
  size_t n;
} pool_t;

static void need(int cond, const char *what) {
  if (!cond) {
    fprintf(stderr, "fuzz_bvalue: %s\n", what);
    abort();
  }
}

/* libbson's validator does not check every text for UTF-8 (code,
 * regexes; the stored-body check does): the bridge refuses
 * those with DTX_EINVAL, and nothing else. */
static void converts(const dtx__bval_t *v) {
  json_t *j = NULL;
  int rc = dtx__bval_to_json(v, &j);
  need(rc == 0 ? j != NULL : rc == DTX_EINVAL && j == NULL,
       "a value does not convert");
  json_decref(j);
}

static int collect(void *ctx, const dtx__bval_t *v, int empty) {
  pool_t *p = ctx;
  (void)empty;
  if (v) {
    converts(v);
    if (p->n < MAXV)
      p->v[p->n++] = *v;
  }
  return 0;
}

static int sgn(int x) { return (x > 0) - (x < 0); }

static void check_order(const pool_t *p) {
  for (size_t i = 0; i < p->n; i++) {
    need(dtx__bval_cmp(&p->v[i], &p->v[i]) == 0, "not reflexive");
    for (size_t j = 0; j < p->n; j++) {
      int ab = sgn(dtx__bval_cmp(&p->v[i], &p->v[j]));
      need(ab == -sgn(dtx__bval_cmp(&p->v[j], &p->v[i])), "not antisymmetric");
      if (ab == 0)
        need(dtx__bval_bracket(p->v[i].type) == dtx__bval_bracket(p->v[j].type),
             "equal across brackets");
      if (ab > 0)
        continue;
      for (size_t k = 0; k < p->n; k++)
        if (sgn(dtx__bval_cmp(&p->v[j], &p->v[k])) <= 0)
          need(sgn(dtx__bval_cmp(&p->v[i], &p->v[k])) <= 0, "not transitive");
    }
  }
}

/* libbson 1.23's bson_validate passes an unknown type byte inside an
 * array (its iteration just stops there), and the raw reader trusts
 * checked bytes only: so every level is iterated here too, and an
 * iteration that stopped on an error (err_off) rejects the input, as the
 * stored-body check (bcheck.c) would. */
static int deep_ok(const uint8_t *d, uint32_t len, int depth) {
  bson_iter_t it;
  if (depth > 100 || !bson_iter_init_from_data(&it, d, len))
    return 0;
  while (bson_iter_next(&it)) {
    const uint8_t *sub = NULL;
    uint32_t n = 0, cl = 0;
    if (BSON_ITER_HOLDS_DOCUMENT(&it))
      bson_iter_document(&it, &n, &sub);
    else if (BSON_ITER_HOLDS_ARRAY(&it))
      bson_iter_array(&it, &n, &sub);
    else if (BSON_ITER_HOLDS_CODEWSCOPE(&it))
      bson_iter_codewscope(&it, &cl, &n, &sub);
    if (sub && !deep_ok(sub, n, depth + 1))
      return 0;
  }
  return it.err_off == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bson_t b;
  size_t err_off;
  if (size < 5 || size > 1 << 16 || !bson_init_static(&b, data, size) ||
      !bson_validate(&b, BSON_VALIDATE_UTF8 | BSON_VALIDATE_UTF8_ALLOW_NULL,
                     &err_off) ||
      !deep_ok(data, (uint32_t)size, 0))
    return 0;
  /* A private copy: the reader must not read past the document's end. */
  uint8_t *doc = malloc(size);
  if (!doc)
    return 0;
  memcpy(doc, data, size);
  uint32_t len = (uint32_t)size;

  pool_t p = {.n = 0};
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(doc, len, &off, &e)) {
    converts(&e.v);
    if (p.n < MAXV / 2)
      p.v[p.n++] = e.v;
    dtx__belem_t f;
    need(dtx__belem_find(doc, len, e.key, e.keylen, &f) && f.v.type != 0,
         "find misses a present key");
  }
  json_t *all = NULL;
  int rc = dtx__bson_to_json(doc, len, 0, &all);
  need(rc == 0 || rc == DTX_EINVAL, "document does not convert");
  json_decref(all);

  static const char *paths[] = {"a", "a.b", "a.0", "a.0.b", "0", "0.0", "b.c",
                                "a.b.c", "1"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
    for (int m = DTX__LEAF_WHOLE; m <= DTX__LEAF_ELEMS; m++) {
      size_t pos;
      dtx__bpath_walk(paths[i], doc, len, m, collect, &p, &pos);
    }
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    dtx__bval_t g = dtx__bpath_get(doc, len, paths[i]);
    if (g.type)
      converts(&g);
  }
  check_order(&p);
  free(doc);
  return 0;
}
