/* agg_group.c -- the $group stage and its accumulators (the manual's
 * "$group (aggregation)" and "Accumulators").
 *
 * Documents are grouped by the value of the _id expression, compared as
 * MongoDB compares values: 1 and 1.0 are one group, and null and missing
 * are one group whose _id is null.  A hash table (open addressing) keyed by
 * the value's canonical bytes (dtx__value_key) finds a document's group;
 * groups come out in the order they were first seen.
 *
 * Accumulators:
 *   $sum     numbers only (others ignored).  Integers add up exactly in a
 *            128-bit accumulator and the result must fit int64, or the
 *            stage fails with DTX_EOVERFLOW (never a wrap, never a silent
 *            double); a double anywhere makes the result a double
 *            (compensated summation).  {$sum: 1} counts.
 *   $avg     the mean of the numbers as a double; null when none.
 *   $min/$max  by MongoDB's order, ignoring null and missing; null when
 *            only those were seen.
 *   $first/$last  the value of the first/last document (null if missing).
 *   $push/$addToSet  the values (missing ones left out); $addToSet keeps
 *            the first of equal values, in first-seen order.
 *   $count   {} -- the number of documents.
 * The groups, their keys and what $push/$addToSet collect are charged to
 * the run's memory limit (agg.c); what one $push/$addToSet collects is also
 * bounded by 16 MiB, the size of the document it goes into (DTX_ELIMIT).
 */
#include "doc/agg_int.h"
#include "util/buf.h"
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
  char *field;
  int kind;
  dtx__expr_t *e; /* NULL for $count */
} acc_spec_t;

struct group_spec {
  dtx__expr_t *id;
  size_t nacc;
  acc_spec_t *acc;
};

/* The running value of one accumulator in one group. */
typedef struct acc {
  __int128 isum;
  double dsum, comp; /* compensated (Kahan) sum of the doubles */
  int has_real;
  int64_t n;
  json_t *val; /* $min/$max/$first/$last value; $push/$addToSet array */
  int seen;
  /* $addToSet: a hash set over val's elements (index + 1; 0 empty), so
   * membership stays O(1) however large the set grows */
  size_t *set;
  uint64_t *hashes; /* hash of val's element i */
  size_t nset;
  size_t bytes; /* $push/$addToSet: val's size (dtx__value_bson_size) */
} acc_t;

typedef struct group {
  char *key;
  size_t klen;
  uint64_t hash;
  json_t *id;
  acc_t *acc;
} group_t;

struct group_state {
  group_t *g; /* in first-seen order */
  size_t n, cap;
  size_t *slots; /* hash table of indexes + 1 into g; 0 = empty */
  size_t nslots;
  dtx__buf_t kb; /* scratch for keys */
};

void dtx__group_spec_free(group_spec_t *g) {
  if (!g)
    return;
  dtx__expr_free(g->id);
  for (size_t i = 0; i < g->nacc; i++) {
    free(g->acc[i].field);
    dtx__expr_free(g->acc[i].e);
  }
  free(g->acc);
  free(g);
}

int dtx__group_compile(const json_t *spec, group_spec_t **out) {
  const char *k;
  json_t *v;
  int rc = 0;
  *out = NULL;
  if (!json_is_object(spec))
    return dtx__err(DTX_EBADQUERY, "$group needs an object");
  if (!json_object_get(spec, "_id"))
    return dtx__err(DTX_EBADQUERY,
                    "$group needs an _id (the group key; null for one "
                    "group)");
  group_spec_t *g = calloc(1, sizeof *g);
  if (!g || !(g->acc = calloc(json_object_size(spec), sizeof *g->acc))) {
    free(g);
    return dtx__err(DTX_ENOMEM, "out of memory compiling $group");
  }
  json_object_foreach((json_t *)spec, k, v) {
    if (!strcmp(k, "_id")) {
      if ((rc = dtx__expr_compile(v, "$group._id", &g->id)))
        break;
      continue;
    }
    if (k[0] == '$' || strchr(k, '.') || !*k) {
      rc = dtx__err(DTX_EBADQUERY,
                    "$group: field name '%s' may not be empty, start with "
                    "'$' or contain '.'", k);
      break;
    }
    if (!json_is_object(v) || json_object_size(v) != 1) {
      rc = dtx__err(DTX_EBADQUERY,
                    "$group: field '%s' must be an accumulator object such "
                    "as {$sum: \"$x\"}", k);
      break;
    }
    const char *op = json_object_iter_key(json_object_iter(v));
    json_t *arg = json_object_iter_value(json_object_iter(v));
    size_t t;
    for (t = 0; t < sizeof accs / sizeof accs[0]; t++)
      if (!strcmp(op, accs[t].name))
        break;
    if (t == sizeof accs / sizeof accs[0]) {
      rc = dtx__err(DTX_EBADQUERY,
                    "$group: unknown or unsupported accumulator %s for "
                    "field '%s'", op, k);
      break;
    }
    acc_spec_t *a = &g->acc[g->nacc++];
    a->kind = accs[t].kind;
    if (!(a->field = strdup(k))) {
      rc = dtx__err(DTX_ENOMEM, "out of memory compiling $group");
      break;
    }
    if (a->kind == A_COUNT) {
      if (!json_is_object(arg) || json_object_size(arg)) {
        rc = dtx__err(DTX_EBADQUERY, "$group: $count for '%s' takes {}", k);
        break;
      }
      continue;
    }
    char where[160];
    snprintf(where, sizeof where, "$group.%s.%s", k, op);
    if ((rc = dtx__expr_compile(arg, where, &a->e)))
      break;
  }
  if (rc) {
    dtx__group_spec_free(g);
    return rc;
  }
  *out = g;
  return 0;
}

int dtx__group_state_new(const group_spec_t *g, group_state_t **out) {
  (void)g;
  *out = calloc(1, sizeof **out);
  return *out ? 0 : dtx__err(DTX_ENOMEM, "out of memory running $group");
}

static void group_clear(const group_state_t *s, group_t *gr, size_t nacc) {
  (void)s;
  free(gr->key);
  json_decref(gr->id);
  for (size_t i = 0; gr->acc && i < nacc; i++) {
    json_decref(gr->acc[i].val);
    free(gr->acc[i].set);
    free(gr->acc[i].hashes);
  }
  free(gr->acc);
}

void dtx__group_state_free(const group_spec_t *g, group_state_t *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->n; i++)
    group_clear(s, &s->g[i], g->nacc);
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

static int grow(group_state_t *s) {
  size_t ns = s->nslots ? s->nslots * 2 : 64;
  size_t *t = calloc(ns, sizeof *t);
  if (!t)
    return dtx__err(DTX_ENOMEM, "out of memory running $group");
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

/* The group for key kb (new when unseen; *fresh says so). */
static int find_group(const group_spec_t *g, group_state_t *s, agg_run_t *r,
                      const json_t *id, group_t **out) {
  int rc;
  uint64_t h = hash_bytes(s->kb.p, s->kb.n);
  if (s->nslots) {
    for (size_t j = h & (s->nslots - 1); s->slots[j];
         j = (j + 1) & (s->nslots - 1)) {
      group_t *gr = &s->g[s->slots[j] - 1];
      if (gr->hash == h && gr->klen == s->kb.n &&
          !memcmp(gr->key, s->kb.p, s->kb.n)) {
        *out = gr;
        return 0;
      }
    }
  }
  if ((rc = dtx__agg_charge(r,
                            96 + s->kb.n + dtx__value_size(id) +
                                g->nacc * sizeof(acc_t),
                            "$group")))
    return rc;
  if (s->n == s->cap && DTX__GROW(s->g, s->cap, 64))
    return dtx__err(DTX_ENOMEM, "out of memory running $group");
  if (2 * (s->n + 1) > s->nslots && (rc = grow(s)))
    return rc;
  group_t *gr = &s->g[s->n];
  memset(gr, 0, sizeof *gr);
  gr->hash = h;
  gr->klen = s->kb.n;
  gr->key = malloc(s->kb.n ? s->kb.n : 1);
  gr->acc = calloc(g->nacc ? g->nacc : 1, sizeof *gr->acc);
  if (!gr->key || !gr->acc) {
    free(gr->key);
    free(gr->acc);
    return dtx__err(DTX_ENOMEM, "out of memory running $group");
  }
  memcpy(gr->key, s->kb.p, s->kb.n);
  gr->id = id ? json_incref((json_t *)id) : json_null();
  size_t j = h & (s->nslots - 1);
  while (s->slots[j])
    j = (j + 1) & (s->nslots - 1);
  s->slots[j] = ++s->n;
  *out = gr;
  return 0;
}

static void add_number(acc_t *a, const json_t *v) {
  if (json_is_integer(v)) {
    a->isum += json_integer_value(v);
  } else {
    double y = json_real_value(v) - a->comp;
    double t = a->dsum + y;
    a->comp = (t - a->dsum) - y;
    a->dsum = t;
    a->has_real = 1;
  }
  a->n++;
}

/* Whether $addToSet's a already holds v (equal by MongoDB's comparison,
 * found through the hash of its canonical key h).  Grows the set as
 * needed and records h for the element about to be appended. */
static int set_has(acc_t *a, dtx__buf_t *kb, const json_t *v, int *rc) {
  kb->n = 0;
  if (dtx__value_key(v, kb) < 0) {
    *rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
    return 0;
  }
  uint64_t h = hash_bytes(kb->p, kb->n);
  size_t n = json_array_size(a->val);
  if (2 * (n + 1) > a->nset) {
    size_t ns = a->nset ? 2 * a->nset : 16;
    size_t *t = calloc(ns, sizeof *t);
    uint64_t *hs = realloc(a->hashes, ns / 2 * sizeof *hs);
    if (!t || !hs) {
      free(t);
      if (hs)
        a->hashes = hs;
      *rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
      return 0;
    }
    a->hashes = hs;
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
    if (a->hashes[i] == h &&
        dtx__value_cmp(json_array_get(a->val, i), v) == 0)
      return 1;
  }
  a->set[j] = n + 1; /* v will be element n */
  a->hashes[n] = h;
  return 0;
}

/* Takes v (a new reference or NULL) into accumulator a. */
static int accumulate(const acc_spec_t *sp, acc_t *a, agg_run_t *r,
                      dtx__buf_t *kb, json_t *v) {
  int rc = 0;
  switch (sp->kind) {
  case A_COUNT:
    a->n++;
    break;
  case A_SUM:
  case A_AVG:
    if (json_is_number(v))
      add_number(a, v);
    break;
  case A_MIN:
  case A_MAX:
    if (!v || json_is_null(v))
      break;
    if (!a->val || (sp->kind == A_MIN ? dtx__value_cmp(v, a->val) < 0
                                      : dtx__value_cmp(v, a->val) > 0)) {
      json_decref(a->val);
      a->val = v;
      v = NULL;
    }
    break;
  case A_FIRST:
    if (!a->seen) {
      a->val = v ? v : json_null();
      v = NULL;
      a->seen = 1;
    }
    break;
  case A_LAST:
    json_decref(a->val);
    a->val = v ? v : json_null();
    v = NULL;
    break;
  case A_PUSH:
  case A_ADDTOSET:
    if (!v)
      break;
    if (!a->val && !(a->val = json_array())) {
      rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
      break;
    }
    if (sp->kind == A_ADDTOSET && (set_has(a, kb, v, &rc) || rc))
      break;
    if ((rc = dtx__agg_charge(r, 24 + dtx__value_size(v), "$group")))
      break;
    /* The array becomes a field of the group's document: past 16 MiB it
     * could never be passed on, so stop now, not at the memory limit. */
    a->bytes += 1 + dtx__value_bson_size(v, DTX__DOC_MAX);
    if (a->bytes > DTX__DOC_MAX) {
      rc = dtx__err(DTX_ELIMIT,
                    "$group: %s into '%s' would collect more than 16 MiB "
                    "(%zu bytes), the limit of a document",
                    sp->kind == A_PUSH ? "$push" : "$addToSet", sp->field,
                    DTX__DOC_MAX);
      break;
    }
    if (json_array_append_new(a->val, v))
      rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
    v = NULL;
    break;
  }
  json_decref(v);
  return rc;
}

int dtx__group_add(const group_spec_t *g, group_state_t *s, agg_run_t *r,
                   const json_t *doc) {
  json_t *id;
  group_t *gr = NULL;
  int rc = dtx__expr_eval(g->id, doc, &id);
  if (rc)
    return rc;
  s->kb.n = 0;
  if (dtx__value_key(id, &s->kb) < 0) {
    json_decref(id);
    return dtx__err(DTX_ENOMEM, "out of memory running $group");
  }
  rc = find_group(g, s, r, id, &gr);
  json_decref(id);
  if (rc)
    return rc;
  for (size_t i = 0; i < g->nacc; i++) {
    json_t *v = NULL;
    if (g->acc[i].e && (rc = dtx__expr_eval(g->acc[i].e, doc, &v)))
      return rc;
    if ((rc = accumulate(&g->acc[i], &gr->acc[i], r, &s->kb, v)))
      return rc;
  }
  return 0;
}

static json_t *result(const acc_spec_t *sp, acc_t *a, int *rc) {
  switch (sp->kind) {
  case A_COUNT:
    return json_integer(a->n);
  case A_SUM:
    if (a->has_real)
      return json_real((double)a->isum + a->dsum);
    if (a->isum > INT64_MAX || a->isum < INT64_MIN) {
      *rc = dtx__err(DTX_EOVERFLOW,
                     "$group: $sum for '%s' overflows int64", sp->field);
      return NULL;
    }
    return json_integer((json_int_t)a->isum);
  case A_AVG:
    if (!a->n)
      return json_null();
    return json_real(((double)a->isum + a->dsum) / (double)a->n);
  case A_PUSH:
  case A_ADDTOSET:
    if (!a->val)
      return json_array();
    /* fall through */
  default: {
    json_t *v = a->val ? a->val : json_null();
    a->val = NULL;
    return v;
  }
  }
}

int dtx__group_finish(const group_spec_t *g, group_state_t *s,
                      int (*emit)(void *ctx, json_t *doc), void *ctx) {
  int rc = 0;
  size_t i;
  for (i = 0; i < s->n && rc >= 0; i++) {
    group_t *gr = &s->g[i];
    json_t *d = json_object();
    if (!d || json_object_set(d, "_id", gr->id))
      rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
    for (size_t k = 0; rc == 0 && k < g->nacc; k++) {
      json_t *v = result(&g->acc[k], &gr->acc[k], &rc);
      if (!v && !rc)
        rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
      if (v && json_object_set_new(d, g->acc[k].field, v))
        rc = dtx__err(DTX_ENOMEM, "out of memory running $group");
    }
    group_clear(s, gr, g->nacc);
    if (rc < 0) {
      json_decref(d);
      i++;
      break;
    }
    rc = emit(ctx, d); /* may stop (a $limit further on) */
    if (rc > 0) {
      rc = 0;
      i++;
      break;
    }
  }
  for (; i < s->n; i++)
    group_clear(s, &s->g[i], g->nacc);
  s->n = 0;
  return rc;
}
