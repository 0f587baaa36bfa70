/* plan.c -- the one query planner (plan.h): gathers the conditions of a
 * filter, scores each index against them and builds the plan the
 * backends execute.  Among its rules: an anchored $regex prefix is a
 * string range (regex_range). */
#include "store/plan.h"

#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- conditions --------------------------------------------------------------------- */

enum { COND_EQ, COND_RANGE };

#define MAX_CONDS 64
#define MAX_COMBOS 256 /* equality value combinations one plan probes */

/* One condition on one path.  The matcher still re-checks every
 * candidate, so what is not understood is simply left out, never an
 * error, and conditions beyond MAX_CONDS or lost to a failed malloc only
 * make the plan less selective. */
typedef struct cond {
  char *path;     /* malloc'd */
  int group;      /* 0: top level; else the $elemMatch it came from */
  size_t gprefix; /* length of "elemMatchPath." when group != 0 */
  int kind;
  json_t *vals; /* COND_EQ: array of scalars (owned); RANGE from a $regex:
                   the bounds lo and hi point into (owned) */
  const json_t *lo, *hi; /* COND_RANGE bounds (borrowed), either NULL */
  int lo_incl, hi_incl;
  int one_elem; /* both bounds hold for one value (from $elemMatch) */
} cond_t;

/* The conditions of a filter; they borrow range bounds from it. */
typedef struct conds {
  cond_t c[MAX_CONDS];
  size_t n;
  int ngroups;
} conds_t;

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

static cond_t *cond_add(conds_t *cs, const char *prefix, const char *key,
                        int group, size_t gprefix, int kind) {
  if (cs->n == MAX_CONDS)
    return NULL;
  cond_t *c = &cs->c[cs->n];
  memset(c, 0, sizeof *c);
  if (!(c->path = join(prefix, key)))
    return NULL;
  c->group = group;
  c->gprefix = gprefix;
  c->kind = kind;
  cs->n++;
  return c;
}

static void collect(conds_t *cs, const json_t *spec, const char *prefix,
                    int group, size_t gprefix);

/* An anchored $regex ("^abc", no i/m/x) only matches strings in
 * ["abc", "abd"), so it narrows an index like a range on one value.  The
 * bounds are made here and owned by the condition (in vals).  The upper
 * bound is the prefix with its last byte raised; a prefix of 0xFF bytes
 * only (impossible in UTF-8) has none. */
static void regex_range(conds_t *cs, const json_t *ops, const json_t *re,
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
  cond_t *c = NULL;
  if (b && lo && (m == 0 || hi) && !json_array_append(b, lo) &&
      (!hi || !json_array_append(b, hi)))
    c = cond_add(cs, prefix, key, group, gprefix, COND_RANGE);
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
static void collect_ops(conds_t *cs, const json_t *ops, const char *prefix,
                        const char *key, int group, size_t gprefix,
                        int one_elem) {
  const char *op;
  json_t *arg;
  cond_t *range = NULL;
  json_object_foreach((json_t *)ops, op, arg) {
    if (strcmp(op, "$eq") == 0 && is_scalar(arg)) {
      cond_t *c = cond_add(cs, prefix, key, group, gprefix, COND_EQ);
      if (c && !(c->vals = json_pack("[O]", arg)))
        c->kind = COND_RANGE; /* no bounds: never used */
    } else if (strcmp(op, "$in") == 0 && json_is_array(arg)) {
      size_t i;
      json_t *v;
      int ok = 1;
      json_array_foreach(arg, i, v) ok &= is_scalar(v);
      if (!ok)
        continue;
      cond_t *c = cond_add(cs, prefix, key, group, gprefix, COND_EQ);
      if (c)
        c->vals = json_incref(arg);
    } else if ((strcmp(op, "$gt") == 0 || strcmp(op, "$gte") == 0 ||
                strcmp(op, "$lt") == 0 || strcmp(op, "$lte") == 0) &&
               (json_is_number(arg) || json_is_string(arg))) {
      if (!range &&
          !(range = cond_add(cs, prefix, key, group, gprefix, COND_RANGE)))
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

static void collect(conds_t *cs, const json_t *spec, const char *prefix,
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
      cond_t *c = cond_add(cs, prefix, key, group, gprefix, COND_EQ);
      if (c && !(c->vals = json_pack("[O]", v)))
        c->kind = COND_RANGE;
    }
  }
}

static void conds_free(conds_t *cs) {
  for (size_t i = 0; i < cs->n; i++) {
    free(cs->c[i].path);
    json_decref(cs->c[i].vals);
  }
  cs->n = 0;
}

/* ---- choosing an index ---------------------------------------------------------------- */

/* An index chosen for a query: equalities on its first neq fields, then
 * perhaps a range on the next. */
typedef struct choice {
  dtx__plan_index_t pi; /* pi.ix NULL: none chosen */
  size_t neq;
  const cond_t *eq[16];
  const cond_t *range;
  int score;
} choice_t;

static size_t first_seg_len(const char *p) {
  const char *dot = strchr(p, '.');
  return dot ? (size_t)(dot - p) : strlen(p);
}

static int same_first_seg(const char *a, const char *b) {
  size_t la = first_seg_len(a), lb = first_seg_len(b);
  return la == lb && memcmp(a, b, la) == 0;
}

/* Whether index lookups may require a and b on one key tuple (plan.h's
 * rules).  In an index that never held several keys for one document,
 * every document has one tuple, so any conditions combine. */
static int combinable(int multikey, const cond_t *a, const cond_t *b) {
  if (!multikey || !same_first_seg(a->path, b->path))
    return 1;
  return a->group && a->group == b->group && a->gprefix == b->gprefix &&
         strlen(a->path) > a->gprefix && strlen(b->path) > b->gprefix &&
         !same_first_seg(a->path + a->gprefix, b->path + b->gprefix);
}

static int has_null(const json_t *vals) {
  size_t i;
  json_t *v;
  json_array_foreach(vals, i, v) if (json_is_null(v)) return 1;
  return 0;
}

/* Scores index pi against cs, and makes it *best if it scores higher:
 * equalities count most, a full unique match wins outright. */
static void consider(const conds_t *cs, const dtx__plan_index_t *pi,
                     choice_t *best) {
  const dtx__index_spec_t *s = pi->spec;
  choice_t ch = {*pi, 0, {0}, NULL, 0};
  size_t combos = 1;
  for (size_t f = 0; f < s->nfields && f < 16; f++) {
    const cond_t *pick = NULL;
    for (size_t i = 0; i < cs->n && !pick; i++) {
      const cond_t *c = &cs->c[i];
      if (c->kind != COND_EQ || strcmp(c->path, s->paths[f]) != 0)
        continue;
      if (s->sparse && has_null(c->vals))
        continue;
      size_t nv = json_array_size(c->vals);
      if (nv && combos * nv > MAX_COMBOS)
        continue;
      int ok = 1;
      for (size_t k = 0; k < ch.neq && ok; k++)
        ok = combinable(pi->multikey, ch.eq[k], c);
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
      const cond_t *c = &cs->c[i];
      if (c->kind != COND_RANGE || (!c->lo && !c->hi) ||
          strcmp(c->path, s->paths[ch.neq]) != 0)
        continue;
      int ok = 1;
      for (size_t k = 0; k < ch.neq && ok; k++)
        ok = combinable(pi->multikey, ch.eq[k], c);
      if (ok)
        ch.range = c;
    }
  }
  if (ch.neq == 0 && !ch.range)
    return;
  /* An equality per leading field, a range only on the next one, and
   * never more value combinations than a plan probes. */
  DTX_ASSERT(ch.neq <= s->nfields && ch.neq <= 16 && combos <= MAX_COMBOS,
             "plan.index_prefix");
  DTX_ASSERT(!ch.range || ch.neq < s->nfields, "plan.index_prefix");
  ch.score = (int)ch.neq * 4 + (ch.range ? 2 : 0) +
             (s->unique && ch.neq == s->nfields ? 100 : 0);
  if (ch.score > best->score)
    *best = ch;
}

/* Whether index pi can serve a sort by walking its entries in key order
 * under an equality prefix, so that the first entry whose document
 * matches is the least document in `sort` order (ties in insertion order,
 * as a stable sort of all matches gives them).  It can when: every sort
 * direction is 1; the index is neither unique nor multikey (one entry per
 * document, scalars only: their key order is the sort order, brackets
 * and all; dtx__index_keys_multikey); its first fields are equalities of
 * cs with one value each (not null for a sparse index, which must have at
 * least one); and its remaining fields are exactly the sort's paths, in
 * order.  Then *ch is that walk (neq equalities, no range) and the result
 * is 1; else 0.  A range of cs on the first sort field bounds the walk
 * (ch->range). */
static int sorted(const conds_t *cs, const dtx__plan_index_t *pi,
                  const json_t *sort, choice_t *ch) {
  const dtx__index_spec_t *s = pi->spec;
  size_t ns = json_object_size(sort);
  memset(ch, 0, sizeof *ch);
  if (pi->multikey || s->unique || ns == 0 || ns > s->nfields ||
      s->nfields > 16)
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
    const cond_t *pick = NULL;
    for (size_t i = 0; i < cs->n && !pick; i++) {
      const cond_t *c = &cs->c[i];
      if (c->kind == COND_EQ && json_array_size(c->vals) == 1 &&
          strcmp(c->path, s->paths[f]) == 0 &&
          !(s->sparse && has_null(c->vals)))
        pick = c;
    }
    if (!pick)
      return 0;
    ch->eq[ch->neq++] = pick;
  }
  /* A range on the first sort field starts (and may end) the walk there:
   * keyset paging's {created: {$gte: v}} or {_id: {$gt: after}} reads a
   * page deep in the list as cheaply as the first.  The index is not
   * multikey, so both bounds hold for its one key (plan.h's rules). */
  for (size_t i = 0; i < cs->n && !ch->range; i++) {
    const cond_t *c = &cs->c[i];
    if (c->kind == COND_RANGE && (c->lo || c->hi) &&
        strcmp(c->path, s->paths[neq]) == 0)
      ch->range = c;
  }
  /* The walk delivers the sort's order: one value per equality, the
   * sort on the fields right after them. */
  DTX_ASSERT(ch->neq == neq && neq + ns == s->nfields && !pi->multikey,
             "plan.sorted_walk");
  ch->pi = *pi;
  ch->score = (int)ch->neq * 4 + (ch->range ? 2 : 0);
  return 1;
}

/* ---- the plan ------------------------------------------------------------------------- */

void dtx__plan_free(dtx__plan_t *p) {
  json_decref(p->ids);
  for (size_t i = 0; i < p->neq; i++)
    json_decref(p->eq[i]);
  json_decref(p->lo);
  json_decref(p->hi);
  memset(p, 0, sizeof *p);
}

/* The IDS plan of ids (a new reference, NULL when out of memory). */
static int ids_plan(dtx__plan_t *p, json_t *ids) {
  if (!ids)
    return dtx__err(DTX_ENOMEM, "planning a query");
  DTX_ASSERT(json_is_array(ids), "plan.kind");
  p->ids = ids;
  p->kind = json_array_size(ids) ? DTX__PLAN_IDS : DTX__PLAN_NONE;
  return 0;
}

static void choice_plan(dtx__plan_t *p, const choice_t *ch, int kind) {
  p->kind = kind;
  p->ix = ch->pi.ix;
  p->neq = ch->neq;
  for (size_t f = 0; f < ch->neq; f++) {
    p->eq[f] = json_incref(ch->eq[f]->vals);
    if (json_array_size(p->eq[f]) == 0)
      p->kind = DTX__PLAN_NONE; /* $in: [] matches nothing */
  }
  if (ch->range) {
    const cond_t *r = ch->range;
    const json_t *lo = r->lo, *hi = r->hi;
    /* plan.h's rule on two bounds */
    if (lo && hi &&
        ((ch->pi.multikey && !r->one_elem) ||
         dtx__value_bracket(lo) != dtx__value_bracket(hi)))
      hi = NULL;
    /* plan.h: two bounds narrow one key only where one value holds both */
    DTX_ASSERT(!(lo && hi) || !ch->pi.multikey || r->one_elem,
               "plan.two_bounds");
    p->lo = json_incref((json_t *)lo);
    p->hi = json_incref((json_t *)hi);
    p->lo_incl = r->lo_incl;
    p->hi_incl = r->hi_incl;
  }
}

const json_t *dtx__plan_one_id(const json_t *filter_spec) {
  const json_t *id =
      json_is_object(filter_spec) ? json_object_get(filter_spec, "_id") : NULL;
  return id && dtx__id_valid(id) ? id : NULL;
}

int dtx__plan_choose(const json_t *filter_spec, const json_t *sort,
                     const void *coll, size_t nidx, dtx__plan_index_fn index,
                     dtx__plan_t *p) {
  memset(p, 0, sizeof *p);
  p->kind = DTX__PLAN_SCAN;
  const json_t *id = dtx__plan_one_id(filter_spec);
  if (id)
    return ids_plan(p, json_pack("[O]", id));
  conds_t *cs = malloc(sizeof *cs);
  if (!cs)
    return dtx__err(DTX_ENOMEM, "planning a query");
  cs->n = 0;
  cs->ngroups = 0;
  collect(cs, filter_spec, "", 0, 0); /* cs borrows from filter_spec */
  const cond_t *idc = NULL;
  for (size_t i = 0; i < cs->n && !idc; i++)
    if (cs->c[i].kind == COND_EQ && cs->c[i].group == 0 &&
        strcmp(cs->c[i].path, "_id") == 0)
      idc = &cs->c[i];
  int rc = 0;
  if (idc) {
    rc = ids_plan(p, json_incref(idc->vals));
  } else {
    choice_t best = {0}, walk = {0}, ch;
    for (size_t i = 0; i < nidx; i++) {
      dtx__plan_index_t pi;
      if (!index(coll, i, &pi))
        continue;
      consider(cs, &pi, &best);
      if (sort && sorted(cs, &pi, sort, &ch) &&
          (!walk.pi.ix || ch.score > walk.score))
        walk = ch;
    }
    /* An index with more equalities reads fewer documents than the walk
     * would (which may pass non-matching ones). */
    if (walk.pi.ix && best.score <= walk.score)
      choice_plan(p, &walk, DTX__PLAN_SORTED);
    else if (best.pi.ix)
      choice_plan(p, &best, DTX__PLAN_INDEX);
  }
  conds_free(cs);
  free(cs);
  /* A plan names what it reads: ids for IDS, an index for INDEX and
   * SORTED, and a SORTED walk only for a sort. */
  DTX_ASSERT(rc || p->kind != DTX__PLAN_IDS || json_array_size(p->ids) > 0,
             "plan.kind");
  DTX_ASSERT(rc || (p->kind != DTX__PLAN_INDEX &&
                    p->kind != DTX__PLAN_SORTED) || p->ix,
             "plan.kind");
  DTX_ASSERT(rc || p->kind != DTX__PLAN_SORTED || sort, "plan.kind");
  return rc;
}
