/* conds.c -- gathers the planner's conditions from a filter (conds.h).
 * and scores an index against them.  Shared by the SQLite and Redis
 * planners so both choose indexes by the same rules, among them: an
 * anchored $regex prefix is a string range (regex_range). */
#include "store/conds.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_opdoc(const json_t *v) {
  if (!json_is_object(v) || json_object_size(v) == 0)
    return 0;
  return json_object_iter_key(json_object_iter((json_t *)v))[0] == '$';
}

/* A value an equality can look up in an index: a scalar, or an object
 * (compared whole; an array element equal to it has the same key).  An
 * array is not, as {a: [1, 2]} also matches the whole array, which is not
 * one of the keys. */
static int is_scalar(const json_t *v) {
  return json_is_null(v) || json_is_number(v) || json_is_string(v) ||
         json_is_boolean(v) || (json_is_object(v) && !is_opdoc(v));
}

static char *join(const char *prefix, const char *key) {
  char *p;
  return asprintf(&p, "%s%s", prefix, key) < 0 ? NULL : p;
}

static dtx__cond_t *cond_add(dtx__conds_t *cs, const char *prefix, const char *key,
                        int group, size_t gprefix, int kind) {
  if (cs->n == DTX__MAX_CONDS)
    return NULL;
  dtx__cond_t *c = &cs->c[cs->n];
  memset(c, 0, sizeof *c);
  if (!(c->path = join(prefix, key)))
    return NULL;
  c->group = group;
  c->gprefix = gprefix;
  c->kind = kind;
  cs->n++;
  return c;
}

void dtx__conds_free(dtx__conds_t *cs) {
  for (size_t i = 0; i < cs->n; i++) {
    free(cs->c[i].path);
    json_decref(cs->c[i].vals);
  }
  cs->n = 0;
}

static void collect(dtx__conds_t *cs, const json_t *spec, const char *prefix,
                    int group, size_t gprefix);

/* An anchored $regex ("^abc", no i/m/x) only matches strings in
 * ["abc", "abd"), so it narrows an index like a range on one value.  The
 * bounds are made here and owned by the condition (in vals).  The upper
 * bound is the prefix with its last byte raised; a prefix of 0xFF bytes
 * only (impossible in UTF-8) has none. */
static void regex_range(dtx__conds_t *cs, const json_t *ops, const json_t *re,
                        const char *prefix, const char *key, int group,
                        size_t gprefix) {
  const json_t *o = json_object_get(ops, "$options");
  char *p;
  size_t n;
  if (o && !json_is_string(o))
    return;
  if (dtx__regex_prefix(json_string_value(re), json_string_length(re),
                        o ? json_string_value(o) : "", &p, &n) < 0 ||
      !p)
    return;
  json_t *b = json_array();
  json_t *lo = json_stringn_nocheck(p, n);
  size_t m = n;
  while (m > 0 && (unsigned char)p[m - 1] == 0xff)
    m--;
  json_t *hi = NULL;
  if (m > 0) {
    p[m - 1] = (char)((unsigned char)p[m - 1] + 1);
    hi = json_stringn_nocheck(p, m);
  }
  free(p);
  dtx__cond_t *c = NULL;
  if (b && lo && (m == 0 || hi) && !json_array_append(b, lo) &&
      (!hi || !json_array_append(b, hi)))
    c = cond_add(cs, prefix, key, group, gprefix, DTX__COND_RANGE);
  if (c) {
    c->vals = b;
    c->lo = lo;
    c->lo_incl = 1;
    c->hi = hi;
    c->hi_incl = 0;
    c->one_elem = 1; /* one regex test, on one value, gives both bounds */
  } else {
    json_decref(b);
  }
  json_decref(lo);
  json_decref(hi);
}

/* The operators of {path: {$op: ...}} that narrow an index lookup.  A
 * planner cannot fail a query, so anything it does not understand is just
 * left to the matcher. */
static void collect_ops(dtx__conds_t *cs, const json_t *ops, const char *prefix,
                        const char *key, int group, size_t gprefix,
                        int one_elem) {
  const char *op;
  json_t *arg;
  dtx__cond_t *range = NULL;
  json_object_foreach((json_t *)ops, op, arg) {
    if (strcmp(op, "$eq") == 0 && is_scalar(arg)) {
      dtx__cond_t *c = cond_add(cs, prefix, key, group, gprefix, DTX__COND_EQ);
      if (c && !(c->vals = json_pack("[O]", arg)))
        c->kind = DTX__COND_RANGE; /* no bounds: never used */
    } else if (strcmp(op, "$in") == 0 && json_is_array(arg)) {
      size_t i;
      json_t *v;
      int ok = 1;
      json_array_foreach(arg, i, v) ok &= is_scalar(v);
      if (!ok)
        continue;
      dtx__cond_t *c = cond_add(cs, prefix, key, group, gprefix, DTX__COND_EQ);
      if (c)
        c->vals = json_incref(arg);
    } else if ((strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 ||
                strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0) &&
               (json_is_number(arg) || json_is_string(arg))) {
      if (!range &&
          !(range = cond_add(cs, prefix, key, group, gprefix, DTX__COND_RANGE)))
        continue;
      range->one_elem = one_elem;
      int incl = op[3] == 'e';
      if (op[1] == 'g') {
        range->lo = arg;
        range->lo_incl = incl;
      } else {
        range->hi = arg;
        range->hi_incl = incl;
      }
    } else if (strcmp(op, "$regex") == 0 && json_is_string(arg)) {
      regex_range(cs, ops, arg, prefix, key, group, gprefix);
    } else if (strcmp(op, "$elemMatch") == 0 && json_is_object(arg)) {
      char *path = join(prefix, key);
      if (!path)
        continue;
      if (is_opdoc(arg)) {
        /* {$elemMatch: {$gt: 1}}: conditions on the elements themselves,
         * which are exactly the index keys of path. */
        collect_ops(cs, arg, "", path, group, gprefix, 1);
      } else {
        char *sub = join(path, ".");
        if (sub)
          collect(cs, arg, sub, ++cs->ngroups, strlen(sub));
        free(sub);
      }
      free(path);
    }
  }
}

static void collect(dtx__conds_t *cs, const json_t *spec, const char *prefix,
                    int group, size_t gprefix) {
  const char *key;
  json_t *v;
  if (!json_is_object(spec))
    return;
  json_object_foreach((json_t *)spec, key, v) {
    if (strcmp(key, "$and") == 0 && json_is_array(v)) {
      size_t i;
      json_t *e;
      json_array_foreach(v, i, e) collect(cs, e, prefix, group, gprefix);
    } else if (key[0] == '$') {
      continue; /* $or, $nor, ...: not a conjunct on one path */
    } else if (is_opdoc(v)) {
      collect_ops(cs, v, prefix, key, group, gprefix, 0);
    } else if (is_scalar(v)) {
      dtx__cond_t *c = cond_add(cs, prefix, key, group, gprefix, DTX__COND_EQ);
      if (c && !(c->vals = json_pack("[O]", v)))
        c->kind = DTX__COND_RANGE;
    }
  }
}

static size_t first_seg_len(const char *p) {
  const char *dot = strchr(p, '.');
  return dot ? (size_t)(dot - p) : strlen(p);
}

int dtx__same_first_seg(const char *a, const char *b) {
  size_t la = first_seg_len(a), lb = first_seg_len(b);
  return la == lb && memcmp(a, b, la) == 0;
}


void dtx__conds_collect(dtx__conds_t *cs, const json_t *filter_spec) {
  cs->n = 0;
  cs->ngroups = 0;
  collect(cs, filter_spec, "", 0, 0);
}

/* Whether index lookups may require a and b on one key tuple (see
 * sqlite/plan.c's file comment).  In an index that never held several
 * keys for one document, every document has one tuple, so any conditions
 * combine. */
static int combinable(int multikey, const dtx__cond_t *a,
                      const dtx__cond_t *b) {
  if (!multikey || !dtx__same_first_seg(a->path, b->path))
    return 1;
  return a->group && a->group == b->group && a->gprefix == b->gprefix &&
         strlen(a->path) > a->gprefix && strlen(b->path) > b->gprefix &&
         !dtx__same_first_seg(a->path + a->gprefix, b->path + b->gprefix);
}

static int has_null(const json_t *vals) {
  size_t i;
  json_t *v;
  json_array_foreach(vals, i, v) if (json_is_null(v)) return 1;
  return 0;
}

void dtx__conds_consider(const dtx__conds_t *cs, const void *ix,
                         const dtx__index_spec_t *s, int multikey,
                         dtx__choice_t *best) {
  dtx__choice_t ch = {ix, 0, {0}, NULL, 0};
  size_t combos = 1;
  for (size_t f = 0; f < s->nfields && f < 16; f++) {
    const dtx__cond_t *pick = NULL;
    for (size_t i = 0; i < cs->n && !pick; i++) {
      const dtx__cond_t *c = &cs->c[i];
      if (c->kind != DTX__COND_EQ || strcmp(c->path, s->paths[f]) != 0)
        continue;
      if (s->sparse && has_null(c->vals))
        continue;
      size_t nv = json_array_size(c->vals);
      if (nv && combos * nv > DTX__MAX_COMBOS)
        continue;
      int ok = 1;
      for (size_t k = 0; k < ch.neq && ok; k++)
        ok = combinable(multikey, ch.eq[k], c);
      if (ok)
        pick = c;
    }
    if (!pick)
      break;
    combos *= json_array_size(pick->vals) ? json_array_size(pick->vals) : 1;
    ch.eq[ch.neq++] = pick;
  }
  if (ch.neq < s->nfields) {
    for (size_t i = 0; i < cs->n && !ch.range; i++) {
      const dtx__cond_t *c = &cs->c[i];
      if (c->kind != DTX__COND_RANGE || (!c->lo && !c->hi) ||
          strcmp(c->path, s->paths[ch.neq]) != 0)
        continue;
      int ok = 1;
      for (size_t k = 0; k < ch.neq && ok; k++)
        ok = combinable(multikey, ch.eq[k], c);
      if (ok)
        ch.range = c;
    }
  }
  if (ch.neq == 0 && !ch.range)
    return;
  ch.score = (int)ch.neq * 4 + (ch.range ? 2 : 0) +
             (s->unique && ch.neq == s->nfields ? 100 : 0);
  if (ch.score > best->score)
    *best = ch;
}

int dtx__conds_sorted(const dtx__conds_t *cs, const void *ix,
                      const dtx__index_spec_t *s, int multikey,
                      const json_t *sort, dtx__choice_t *ch) {
  size_t ns = json_object_size(sort);
  memset(ch, 0, sizeof *ch);
  if (multikey || s->unique || ns == 0 || ns > s->nfields || s->nfields > 16)
    return 0;
  size_t neq = s->nfields - ns, k = 0;
  const char *path;
  json_t *dir;
  json_object_foreach((json_t *)sort, path, dir) {
    if (json_integer_value(dir) != 1 || strcmp(path, s->paths[neq + k]) != 0)
      return 0;
    k++;
  }
  if (s->sparse && neq == 0)
    return 0; /* documents without the fields are not in it */
  for (size_t f = 0; f < neq; f++) {
    const dtx__cond_t *pick = NULL;
    for (size_t i = 0; i < cs->n && !pick; i++) {
      const dtx__cond_t *c = &cs->c[i];
      if (c->kind == DTX__COND_EQ && json_array_size(c->vals) == 1 &&
          strcmp(c->path, s->paths[f]) == 0 &&
          !(s->sparse && has_null(c->vals)))
        pick = c;
    }
    if (!pick)
      return 0;
    ch->eq[ch->neq++] = pick;
  }
  ch->ix = ix;
  ch->score = (int)ch->neq * 4;
  return 1;
}
