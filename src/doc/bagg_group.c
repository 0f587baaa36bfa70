/* bagg_group.c -- $group on BSON (bagg.h), the twin of agg_group.c: the
 * same accumulators, details and limits, with MongoDB's number types.
 *
 * Groups are found by dtx__bkey_encode of the _id value (equal exactly
 * when dtx__bval_cmp says so; missing is null) in an open-addressing
 * table; they come out in first-seen order.  Each group owns one malloc'd
 * copy of its _id's payload and, per accumulator, the bytes it keeps:
 * $min/$max/$first/$last one value, $push/$addToSet the elements of the
 * array being built (written as array elements as they come, so the
 * result is one memcpy).
 *
 * $sum/$avg: integers add exactly in 128 bits; the result is an int32
 * when every addend was one and it fits, an int64 when it fits, otherwise
 * a double (MongoDB's rule; the json_t engine refuses the overflow with
 * DTX_EOVERFLOW).  Doubles add with compensation as agg_group.c.  Any
 * Decimal128 makes the result a decimal (the integers and doubles
 * converted once at the end).  $avg is a double, or a decimal when a
 * decimal was seen. */
#include "doc/bagg_int.h"
#include "doc/bdec.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

enum { A_SUM, A_AVG, A_MIN, A_MAX, A_FIRST, A_LAST, A_PUSH, A_ADDTOSET,
       A_COUNT };

static const struct {
  const char *name;
  int kind;
} accs[] = {
    {"$sum", A_SUM},     {"$avg", A_AVG},     {"$min", A_MIN},
    {"$max", A_MAX},     {"$first", A_FIRST}, {"$last", A_LAST},
    {"$push", A_PUSH},   {"$addToSet", A_ADDTOSET}, {"$count", A_COUNT},
};

typedef struct acc_spec {
  const char *field;
  int kind;
  dtx__bexpr_t *e;
} acc_spec_t;

struct bgroup_spec {
  dtx__bexpr_t *id;
  size_t nacc;
  acc_spec_t *acc;
};

typedef struct acc {
  __int128 isum;
  double dsum, comp;
  int has_real, wide, has_dec;
  bson_decimal128_t dec;
  int64_t n;
  dtx__bval_t val;   /* $min/$max/$first/$last: data malloc'd */
  int seen;
  dtx__buf_t arr;    /* $push/$addToSet: the array's elements */
  size_t nel;
  /* $addToSet: hash set of element keys (index + 1), keys in kb */
  size_t *set;
  uint64_t *hashes;
  size_t nset;
  dtx__buf_t kb;     /* the elements' keys, one after another */
  size_t *koff;      /* element i's key: kb.p[koff[i] .. koff[i + 1]) */
} acc_t;

typedef struct group {
  char *key;
  size_t klen;
  uint64_t hash;
  dtx__bval_t id;
  acc_t *acc;
} group_t;

struct bgroup_state {
  group_t *g;
  size_t n, cap;
  size_t *slots;
  size_t nslots;
  dtx__buf_t kb;
};

static int nomem(void) {
  return dtx__err(DTX_ENOMEM, "out of memory running $group");
}

int dtx__bgroup_compile(const dtx__bval_t *spec, dtx__arena_t *a,
                        bgroup_spec_t **out) {
  *out = NULL;
  if (spec->type != BSON_TYPE_DOCUMENT)
    return dtx__err(DTX_EBADQUERY, "$group needs an object");
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(spec, &len);
  dtx__belem_t el;
  size_t n = 0;
  while (dtx__belem_next(d, len, &off, &el))
    n++;
  if (!dtx__belem_find(d, len, "_id", 3, &el))
    return dtx__err(DTX_EBADQUERY,
                    "$group needs an _id (the group key; null for one "
                    "group)");
  bgroup_spec_t *g = dtx__arena_alloc(a, sizeof *g);
  if (!g || !(g->acc = dtx__arena_alloc(a, n * sizeof *g->acc)))
    return dtx__err(DTX_ENOMEM, "out of memory compiling $group");
  int rc;
  off = 0;
  while (dtx__belem_next(d, len, &off, &el)) {
    const char *k = el.key;
    if (!strcmp(k, "_id")) {
      if ((rc = dtx__bexpr_compile(&el.v, "$group._id", a, &g->id)))
        return rc;
      continue;
    }
    if (k[0] == '$' || strchr(k, '.') || !*k)
      return dtx__err(DTX_EBADQUERY,
                      "$group: field name '%s' may not be empty, start with "
                      "'$' or contain '.'", k);
    uint32_t alen, aoff = 0, an = 0;
    const uint8_t *ad = el.v.type == BSON_TYPE_DOCUMENT
                            ? dtx__bval_doc(&el.v, &alen) : NULL;
    dtx__belem_t op, x;
    while (ad && dtx__belem_next(ad, alen, &aoff, &x))
      if (an++ == 0)
        op = x;
    if (an != 1)
      return dtx__err(DTX_EBADQUERY,
                      "$group: field '%s' must be an accumulator object such "
                      "as {$sum: \"$x\"}", k);
    size_t t;
    for (t = 0; t < sizeof accs / sizeof accs[0]; t++)
      if (!strcmp(op.key, accs[t].name))
        break;
    if (t == sizeof accs / sizeof accs[0])
      return dtx__err(DTX_EBADQUERY,
                      "$group: unknown or unsupported accumulator %s for "
                      "field '%s'", op.key, k);
    acc_spec_t *s = &g->acc[g->nacc++];
    s->kind = accs[t].kind;
    s->field = k;
    if (s->kind == A_COUNT) {
      uint32_t cl = 0, co = 0;
      const uint8_t *cd = op.v.type == BSON_TYPE_DOCUMENT
                              ? dtx__bval_doc(&op.v, &cl) : NULL;
      if (!cd || dtx__belem_next(cd, cl, &co, &x))
        return dtx__err(DTX_EBADQUERY, "$group: $count for '%s' takes {}",
                        k);
      continue;
    }
    char where[160];
    snprintf(where, sizeof where, "$group.%s.%s", k, op.key);
    if ((rc = dtx__bexpr_compile(&op.v, where, a, &s->e)))
      return rc;
  }
  *out = g;
  return 0;
}

int dtx__bgroup_state_new(bgroup_state_t **out) {
  *out = calloc(1, sizeof **out);
  return *out ? 0 : nomem();
}

static void acc_clear(acc_t *a) {
  free((void *)a->val.data);
  a->val.data = NULL;
  a->val.type = BSON_TYPE_EOD;
  free(a->arr.p);
  free(a->set);
  free(a->hashes);
  free(a->kb.p);
  free(a->koff);
  memset(a, 0, sizeof *a);
}

static void group_clear(group_t *gr, size_t nacc) {
  free(gr->key);
  free((void *)gr->id.data);
  for (size_t i = 0; gr->acc && i < nacc; i++)
    acc_clear(&gr->acc[i]);
  free(gr->acc);
  memset(gr, 0, sizeof *gr);
}

void dtx__bgroup_state_free(const bgroup_spec_t *g, bgroup_state_t *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->n; i++)
    group_clear(&s->g[i], g->nacc);
  free(s->g);
  free(s->slots);
  free(s->kb.p);
  free(s);
}

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
  return h ^ (h >> 29);
}

/* A malloc'd copy of v (missing becomes null). */
static int copy_val(const dtx__bval_t *v, dtx__bval_t *out) {
  out->type = v->type ? v->type : BSON_TYPE_NULL;
  out->len = v->type ? v->len : 0;
  uint8_t *d = malloc(out->len ? out->len : 1);
  if (!d)
    return nomem();
  if (out->len)
    memcpy(d, v->data, out->len);
  out->data = d;
  return 0;
}

static int grow(bgroup_state_t *s) {
  size_t ns = s->nslots ? s->nslots * 2 : 64;
  size_t *t = calloc(ns, sizeof *t);
  if (!t)
    return nomem();
  for (size_t i = 0; i < s->n; i++) {
    size_t j = s->g[i].hash & (ns - 1);
    while (t[j])
      j = (j + 1) & (ns - 1);
    t[j] = i + 1;
  }
  free(s->slots);
  s->slots = t;
  s->nslots = ns;
  return 0;
}

static int find_group(const bgroup_spec_t *g, bgroup_state_t *s,
                      bagg_run_t *r, const dtx__bval_t *id, group_t **out) {
  int rc;
  uint64_t h = hash_bytes(s->kb.p, s->kb.n);
  if (s->nslots)
    for (size_t j = h & (s->nslots - 1); s->slots[j];
         j = (j + 1) & (s->nslots - 1)) {
      group_t *gr = &s->g[s->slots[j] - 1];
      if (gr->hash == h && gr->klen == s->kb.n &&
          !memcmp(gr->key, s->kb.p, s->kb.n)) {
        *out = gr;
        return 0;
      }
    }
  if ((rc = dtx__bagg_charge(r, 96 + s->kb.n + id->len +
                                    g->nacc * sizeof(acc_t), "$group")))
    return rc;
  if (s->n == s->cap && DTX__GROW(s->g, s->cap, 64))
    return nomem();
  if (2 * (s->n + 1) > s->nslots && (rc = grow(s)))
    return rc;
  group_t *gr = &s->g[s->n];
  memset(gr, 0, sizeof *gr);
  gr->hash = h;
  gr->klen = s->kb.n;
  gr->key = malloc(s->kb.n ? s->kb.n : 1);
  gr->acc = calloc(g->nacc ? g->nacc : 1, sizeof *gr->acc);
  if (!gr->key || !gr->acc || copy_val(id, &gr->id)) {
    free(gr->key);
    free(gr->acc);
    return nomem();
  }
  memcpy(gr->key, s->kb.p, s->kb.n);
  size_t j = h & (s->nslots - 1);
  while (s->slots[j])
    j = (j + 1) & (s->nslots - 1);
  s->slots[j] = ++s->n;
  *out = gr;
  return 0;
}

static void add_number(acc_t *a, const dtx__bval_t *v) {
  bson_decimal128_t r;
  switch (v->type) {
  case BSON_TYPE_INT32:
    a->isum += dtx__bval_int32(v);
    break;
  case BSON_TYPE_INT64:
    a->isum += dtx__bval_int64(v);
    a->wide = 1;
    break;
  case BSON_TYPE_DECIMAL128:
    dtx__dec_add(a->has_dec ? a->dec : dtx__dec_from_i64(0),
                 dtx__bval_dec(v), &r);
    a->dec = r;
    a->has_dec = 1;
    break;
  default: {
    double y = dtx__bval_double(v) - a->comp;
    double t = a->dsum + y;
    a->comp = (t - a->dsum) - y;
    a->dsum = t;
    a->has_real = 1;
  }
  }
  a->n++;
}

/* Whether $addToSet's a already holds v (by its key in kb). */
static int set_has(acc_t *a, dtx__buf_t *kb, int *rc) {
  uint64_t h = hash_bytes(kb->p, kb->n);
  size_t n = a->nel;
  if (2 * (n + 1) > a->nset) {
    size_t ns = a->nset ? 2 * a->nset : 16;
    size_t *t = calloc(ns, sizeof *t);
    uint64_t *hs = realloc(a->hashes, ns / 2 * sizeof *hs);
    size_t *ko = hs ? realloc(a->koff, (ns / 2 + 1) * sizeof *ko) : NULL;
    if (hs)
      a->hashes = hs;
    if (ko)
      a->koff = ko;
    if (!t || !hs || !ko) {
      free(t);
      *rc = nomem();
      return 0;
    }
    if (n == 0)
      ko[0] = 0;
    for (size_t i = 0; i < n; i++) {
      size_t j = hs[i] & (ns - 1);
      while (t[j])
        j = (j + 1) & (ns - 1);
      t[j] = i + 1;
    }
    free(a->set);
    a->set = t;
    a->nset = ns;
  }
  size_t j = h & (a->nset - 1);
  for (; a->set[j]; j = (j + 1) & (a->nset - 1)) {
    size_t i = a->set[j] - 1;
    if (a->hashes[i] == h && a->koff[i + 1] - a->koff[i] == kb->n &&
        !memcmp(a->kb.p + a->koff[i], kb->p, kb->n))
      return 1;
  }
  a->set[j] = n + 1;
  a->hashes[n] = h;
  dtx__buf_put(&a->kb, kb->p, kb->n);
  a->koff[n + 1] = a->kb.n;
  if (a->kb.oom)
    *rc = nomem();
  return 0;
}

static int accumulate(const acc_spec_t *sp, acc_t *a, bagg_run_t *r,
                      dtx__buf_t *kb, const dtx__bval_t *v) {
  int rc = 0;
  int none = v->type == BSON_TYPE_EOD;
  switch (sp->kind) {
  case A_COUNT:
    a->n++;
    break;
  case A_SUM:
  case A_AVG:
    if (dtx__bval_is_number(v))
      add_number(a, v);
    break;
  case A_MIN:
  case A_MAX:
    if (none || v->type == BSON_TYPE_NULL || v->type == BSON_TYPE_UNDEFINED)
      break;
    if (!a->val.type || (sp->kind == A_MIN ? dtx__bval_cmp(v, &a->val) < 0
                                           : dtx__bval_cmp(v, &a->val) > 0)) {
      free((void *)a->val.data);
      a->val.type = BSON_TYPE_EOD;
      a->val.data = NULL;
      rc = copy_val(v, &a->val);
    }
    break;
  case A_FIRST:
    if (!a->seen) {
      a->seen = 1;
      rc = copy_val(v, &a->val);
    }
    break;
  case A_LAST:
    free((void *)a->val.data);
    a->val.data = NULL;
    rc = copy_val(v, &a->val);
    break;
  case A_PUSH:
  case A_ADDTOSET:
    if (none)
      break;
    if (sp->kind == A_ADDTOSET) {
      kb->n = 0;
      if (dtx__bkey_encode(v, 0, kb) < 0)
        return nomem();
      if (set_has(a, kb, &rc) || rc)
        break;
    }
    if ((rc = dtx__bagg_charge(r, 24 + v->len, "$group")))
      break;
    /* As agg_group.c: the array becomes a field of the group's document,
     * so past 16 MiB it could never be passed on. */
    if (a->arr.n + v->len + 32 > DTX__DOC_MAX) {
      rc = dtx__err(DTX_ELIMIT,
                    "$group: %s into '%s' would collect more than 16 MiB "
                    "(%zu bytes), the limit of a document",
                    sp->kind == A_PUSH ? "$push" : "$addToSet", sp->field,
                    DTX__DOC_MAX);
      break;
    }
    dtx__bw_idx(&a->arr, a->nel++, v);
    if (a->arr.oom)
      rc = nomem();
    break;
  }
  return rc;
}

int dtx__bgroup_add(const bgroup_spec_t *g, bgroup_state_t *s, bagg_run_t *r,
                    dtx__bx_t *x) {
  dtx__bval_t id;
  group_t *gr = NULL;
  int rc = dtx__bexpr_eval(g->id, x, &id);
  if (rc)
    return rc;
  s->kb.n = 0;
  if (dtx__bkey_encode(&id, 0, &s->kb) < 0)
    return nomem();
  if ((rc = find_group(g, s, r, &id, &gr)))
    return rc;
  for (size_t i = 0; i < g->nacc; i++) {
    dtx__bval_t v = {BSON_TYPE_EOD, 0, NULL};
    if (g->acc[i].e && (rc = dtx__bexpr_eval(g->acc[i].e, x, &v)))
      return rc;
    if ((rc = accumulate(&g->acc[i], &gr->acc[i], r, &s->kb, &v)))
      return rc;
  }
  return 0;
}

static void put_le(uint8_t *d, uint64_t v, int n) {
  for (int i = 0; i < n; i++)
    d[i] = (uint8_t)(v >> (8 * i));
}

/* The decimal of a's whole sum (integers, doubles, decimals). */
static bson_decimal128_t dec_total(const acc_t *a) {
  bson_decimal128_t t = a->has_dec ? a->dec : dtx__dec_from_i64(0), r;
  /* the integer part may pass int64: add it in two halves */
  __int128 i = a->isum;
  int64_t hi = (int64_t)(i / ((__int128)1 << 62)),
          lo = (int64_t)(i % ((__int128)1 << 62));
  dtx__dec_mul(dtx__dec_from_i64(hi), dtx__dec_from_i64((int64_t)1 << 62),
               &r);
  dtx__dec_add(t, r, &t);
  dtx__dec_add(t, dtx__dec_from_i64(lo), &t);
  if (a->has_real)
    dtx__dec_add(t, dtx__dec_from_double(a->dsum), &t);
  return t;
}

/* Writes accumulator a's result as field sp->field into b. */
static void result(const acc_spec_t *sp, acc_t *a, dtx__buf_t *b) {
  uint8_t d[16];
  dtx__bval_t v = {BSON_TYPE_NULL, 0, d};
  const char *f = sp->field;
  switch (sp->kind) {
  case A_COUNT:
  case A_SUM:
    if (sp->kind == A_SUM && a->has_dec) {
      bson_decimal128_t t = dec_total(a);
      put_le(d, t.low, 8);
      put_le(d + 8, t.high, 8);
      v.type = BSON_TYPE_DECIMAL128;
      v.len = 16;
    } else if (sp->kind == A_SUM &&
               (a->has_real || a->isum > INT64_MAX || a->isum < INT64_MIN)) {
      /* an integer sum past int64 goes on as a double (MongoDB) */
      double x = (double)a->isum + a->dsum;
      uint64_t u;
      memcpy(&u, &x, 8);
      put_le(d, u, 8);
      v.type = BSON_TYPE_DOUBLE;
      v.len = 8;
    } else {
      int64_t n = sp->kind == A_COUNT ? a->n : (int64_t)a->isum;
      int wide = sp->kind == A_SUM && a->wide;
      if (!wide && n >= INT32_MIN && n <= INT32_MAX) {
        put_le(d, (uint32_t)n, 4);
        v.type = BSON_TYPE_INT32;
        v.len = 4;
      } else {
        put_le(d, (uint64_t)n, 8);
        v.type = BSON_TYPE_INT64;
        v.len = 8;
      }
    }
    break;
  case A_AVG:
    if (!a->n)
      break;
    if (a->has_dec) {
      bson_decimal128_t q;
      dtx__dec_div(dec_total(a), dtx__dec_from_i64(a->n), &q);
      put_le(d, q.low, 8);
      put_le(d + 8, q.high, 8);
      v.type = BSON_TYPE_DECIMAL128;
      v.len = 16;
    } else {
      double x = ((double)a->isum + a->dsum) / (double)a->n;
      uint64_t u;
      memcpy(&u, &x, 8);
      put_le(d, u, 8);
      v.type = BSON_TYPE_DOUBLE;
      v.len = 8;
    }
    break;
  case A_PUSH:
  case A_ADDTOSET: {
    uint8_t t = BSON_TYPE_ARRAY;
    dtx__buf_put(b, &t, 1);
    dtx__buf_put(b, f, strlen(f) + 1);
    size_t st = dtx__bw_begin(b);
    dtx__buf_put(b, a->arr.p, a->arr.n);
    dtx__bw_end(b, st);
    return;
  }
  default:
    if (a->val.type)
      v = a->val;
  }
  dtx__bw_val(b, f, strlen(f), &v);
}

int dtx__bgroup_finish(const bgroup_spec_t *g, bgroup_state_t *s,
                       int (*emit)(void *ctx, const uint8_t *doc,
                                   uint32_t len),
                       void *ctx) {
  int rc = 0;
  size_t i;
  dtx__buf_t b = {0};
  for (i = 0; i < s->n && rc >= 0; i++) {
    group_t *gr = &s->g[i];
    b.n = 0;
    size_t st = dtx__bw_begin(&b);
    dtx__bw_val(&b, "_id", 3, &gr->id);
    for (size_t k = 0; k < g->nacc; k++)
      result(&g->acc[k], &gr->acc[k], &b);
    dtx__bw_end(&b, st);
    group_clear(gr, g->nacc);
    if (b.oom) {
      rc = nomem();
      i++;
      break;
    }
    rc = emit(ctx, (const uint8_t *)b.p, (uint32_t)b.n);
    if (rc > 0) {
      rc = 0;
      i++;
      break;
    }
  }
  for (; i < s->n; i++)
    group_clear(&s->g[i], g->nacc);
  s->n = 0;
  free(b.p);
  return rc;
}
