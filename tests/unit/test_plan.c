/* test_plan.c -- the one query planner (store/plan.h) on its own: which
 * plan a filter (and a sort) gets over a set of indexes -- _id lookups,
 * index equalities and ranges, the multikey and sparse rules, a sorted
 * walk, a scan, or nothing -- table-driven.  The backends' suites
 * (test_sqlite_plan, conformance) prove the plans are executed right. */
#include "testlib.h"

#include "store/plan.h"
#include "txn/kit/kit.h"

#include <stdlib.h>
#include <string.h>

typedef struct ix {
  const char *keys;
  int unique, sparse, multikey, ready;
  dtx__index_spec_t *spec;
} ix_t;

static ix_t ixs[] = {
    {"{\"k\":1}", 0, 0, 0, 1, NULL},
    {"{\"k\":1,\"s\":1}", 0, 0, 0, 1, NULL},
    {"{\"tags\":1}", 0, 0, 1, 1, NULL},
    {"{\"z\":1}", 0, 1, 0, 1, NULL},
    {"{\"u\":1}", 1, 0, 0, 1, NULL},
    {"{\"a.x\":1,\"a.y\":1}", 0, 0, 1, 1, NULL},
    {"{\"q\":1,\"p\":1}", 0, 0, 0, 1, NULL},
    {"{\"r\":1}", 0, 0, 0, 0, NULL}, /* not built yet */
    {"{\"n\":1}", 0, 0, 0, 1, NULL},
    {"{\"m\":1,\"p\":1}", 0, 0, 1, 1, NULL}, /* multikey: no walk */
    {"{\"w\":1,\"_id\":1}", 0, 0, 0, 1, NULL}, /* a list's keyset walk */
};
#define NIX (sizeof ixs / sizeof *ixs)

static int index_of(const void *coll, size_t i, dtx__plan_index_t *out) {
  const ix_t *x = &((const ix_t *)coll)[i];
  *out = (dtx__plan_index_t){x, x->spec, x->multikey};
  return x->ready;
}

typedef struct plan_case {
  const char *filter, *sort;
  int kind;
  const char *index;   /* INDEX, SORTED: the index's name */
  size_t n;            /* IDS: how many ids; INDEX, SORTED: neq */
  const char *lo, *hi; /* INDEX: the bounds as JSON, NULL: none */
} plan_case_t;

#define IDS DTX__PLAN_IDS
#define NONE DTX__PLAN_NONE
#define INDEX DTX__PLAN_INDEX
#define SORTED DTX__PLAN_SORTED
#define SCAN DTX__PLAN_SCAN

static const plan_case_t cases[] = {
    {"{'_id':5}", NULL, IDS, NULL, 1, NULL, NULL},
    {"{'_id':5,'k':1}", NULL, IDS, NULL, 1, NULL, NULL},
    {"{'_id':{'a':1}}", NULL, IDS, NULL, 1, NULL, NULL},
    {"{'_id':{'$eq':5},'k':1}", NULL, IDS, NULL, 1, NULL, NULL},
    {"{'_id':{'$in':[1,2,'x']}}", NULL, IDS, NULL, 3, NULL, NULL},
    {"{'$and':[{'_id':7}]}", NULL, IDS, NULL, 1, NULL, NULL},
    {"{'_id':{'$in':[]}}", NULL, NONE, NULL, 0, NULL, NULL},
    {"{'_id':[1]}", NULL, SCAN, NULL, 0, NULL, NULL},
    {"{'_id':{'$gt':1}}", NULL, SCAN, NULL, 0, NULL, NULL},
    /* equalities: the first index of the best score */
    {"{'k':1}", NULL, INDEX, "k_1", 1, NULL, NULL},
    {"{'k':{'$in':[1,2]}}", NULL, INDEX, "k_1", 1, NULL, NULL},
    {"{'k':1,'s':'a'}", NULL, INDEX, "k_1_s_1", 2, NULL, NULL},
    {"{'k':{'$in':[]},'s':'a'}", NULL, NONE, NULL, 0, NULL, NULL},
    {"{'k':1,'s':{'$gte':'a'}}", NULL, INDEX, "k_1_s_1", 1, "\"a\"", NULL},
    /* a unique index fully covered wins outright */
    {"{'k':1,'s':'a','u':3}", NULL, INDEX, "u_1", 1, NULL, NULL},
    /* ranges: both bounds narrow one key of a single-key index ... */
    {"{'k':{'$gt':1,'$lt':5}}", NULL, INDEX, "k_1", 0, "1", "5"},
    {"{'k':{'$lte':5}}", NULL, INDEX, "k_1", 0, NULL, "5"},
    /* ... but not bounds of two type brackets */
    {"{'k':{'$gt':1,'$lt':'a'}}", NULL, INDEX, "k_1", 0, "1", NULL},
    /* ... nor of a multikey one, except inside $elemMatch */
    {"{'tags':{'$gt':1,'$lt':5}}", NULL, INDEX, "tags_1", 0, "1", NULL},
    {"{'tags':{'$elemMatch':{'$gt':1,'$lt':5}}}", NULL, INDEX, "tags_1", 0, "1",
     "5"},
    /* an anchored $regex is a string range */
    {"{'n':{'$regex':'^ab'}}", NULL, INDEX, "n_1", 0, "\"ab\"", "\"ac\""},
    {"{'n':{'$regex':'^ab','$options':'i'}}", NULL, SCAN, NULL, 0, NULL, NULL},
    /* a sparse index lacks null */
    {"{'z':null}", NULL, SCAN, NULL, 0, NULL, NULL},
    {"{'z':{'$in':[1,null]}}", NULL, SCAN, NULL, 0, NULL, NULL},
    {"{'z':3}", NULL, INDEX, "z_1", 1, NULL, NULL},
    /* a multikey index pairs a.x and a.y only inside $elemMatch */
    {"{'a.x':1,'a.y':2}", NULL, INDEX, "a.x_1_a.y_1", 1, NULL, NULL},
    {"{'a':{'$elemMatch':{'x':1,'y':2}}}", NULL, INDEX, "a.x_1_a.y_1", 2, NULL,
     NULL},
    /* an index not built yet, and what no index serves */
    {"{'r':1}", NULL, SCAN, NULL, 0, NULL, NULL},
    {"{'$or':[{'k':1},{'k':2}]}", NULL, SCAN, NULL, 0, NULL, NULL},
    {"{'k':{'$ne':1}}", NULL, SCAN, NULL, 0, NULL, NULL},
    {"{}", NULL, SCAN, NULL, 0, NULL, NULL},
    /* sorts: a walk in the sort's order when nothing has more equalities */
    {"{'q':1}", "{'p':1}", SORTED, "q_1_p_1", 1, NULL, NULL},
    {"{'q':1}", NULL, INDEX, "q_1_p_1", 1, NULL, NULL},
    {"{'q':1}", "{'p':-1}", INDEX, "q_1_p_1", 1, NULL, NULL},
    {"{'q':{'$in':[1,2]}}", "{'p':1}", INDEX, "q_1_p_1", 1, NULL, NULL},
    {"{'q':1,'k':1,'s':'a'}", "{'p':1}", INDEX, "k_1_s_1", 2, NULL, NULL},
    {"{'q':1,'k':1}", "{'p':1}", SORTED, "q_1_p_1", 1, NULL, NULL},
    {"{'m':1}", "{'p':1}", INDEX, "m_1_p_1", 1, NULL, NULL},
    {"{}", "{'p':1}", SCAN, NULL, 0, NULL, NULL},
    {"{'_id':1,'q':1}", "{'p':1}", IDS, NULL, 1, NULL, NULL},
    {"{'$and':[{'_id':1}],'q':1}", "{'p':1}", IDS, NULL, 1, NULL, NULL},
    /* keyset paging: a range on the first sort field starts the walk
     * there (it beat the walk as an index range, which read every entry
     * after the key and sorted them) */
    {"{'q':1,'p':{'$gte':5}}", "{'p':1}", SORTED, "q_1_p_1", 1, "5", NULL},
    {"{'q':1,'p':{'$gt':5,'$lt':9}}", "{'p':1}", SORTED, "q_1_p_1", 1, "5",
     "9"},
    {"{'q':1,'p':{'$gt':5,'$lt':'a'}}", "{'p':1}", SORTED, "q_1_p_1", 1, "5",
     NULL},
    {"{'q':1,'p':{'$gte':5}}", NULL, INDEX, "q_1_p_1", 1, "5", NULL},
    {"{'w':{'$gte':3}}", "{'w':1,'_id':1}", SORTED, "w_1__id_1", 0, "3", NULL},
    {"{'$and':[{'w':{'$gte':3}},{'$nor':[{'w':3,'_id':{'$lte':'x'}}]}]}",
     "{'w':1,'_id':1}", SORTED, "w_1__id_1", 0, "3", NULL},
    {"{'w':{'$gte':3}}", "{'w':-1,'_id':1}", INDEX, "w_1__id_1", 0, "3", NULL},
    {"{}", "{'w':1,'_id':1}", SORTED, "w_1__id_1", 0, NULL, NULL},
    /* a range on a later sort field does not bound the walk */
    {"{'_id':{'$gt':'x'}}", "{'w':1,'_id':1}", SORTED, "w_1__id_1", 0, NULL,
     NULL},
};

/* JSON with ' for ". */
static json_t *jq(const char *s) {
  char *t = strdup(s);
  for (char *p = t; *p; p++)
    if (*p == '\'')
      *p = '"';
  json_t *j = J(t);
  free(t);
  return j;
}

static int bound_is(const json_t *b, const char *want) {
  if (!want)
    return b == NULL;
  json_t *w = J(want);
  int same = b && json_equal(b, w);
  json_decref(w);
  return same;
}

static void test_plan_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const plan_case_t *c = &cases[i];
    json_t *f = jq(c->filter), *sort = c->sort ? jq(c->sort) : NULL;
    dtx__plan_t p;
    CHECK_RC(dtx__plan_choose(f, sort, ixs, NIX, index_of, &p), 0);
    const ix_t *x = p.ix;
    size_t n = p.kind == IDS    ? json_array_size(p.ids)
               : p.kind == NONE ? 0
                                : p.neq;
    CHECKF(p.kind == c->kind && n == c->n, "%s %s: kind %d n %zu", c->filter,
           c->sort ? c->sort : "", p.kind, n);
    if (p.kind == INDEX || p.kind == SORTED)
      CHECKF(x && c->index && strcmp(x->spec->name, c->index) == 0,
             "%s: index %s", c->filter, x ? x->spec->name : "(none)");
    CHECKF(bound_is(p.lo, c->lo) && bound_is(p.hi, c->hi), "%s: lo %s hi %s",
           c->filter, p.lo ? json_dumps(p.lo, JSON_ENCODE_ANY) : "-",
           p.hi ? json_dumps(p.hi, JSON_ENCODE_ANY) : "-");
    for (size_t k = 0; p.kind == SORTED && k < p.neq; k++)
      CHECK(json_array_size(p.eq[k]) == 1);
    dtx__plan_free(&p);
    CHECK(p.kind == 0 && p.ids == NULL && p.neq == 0);
    json_decref(f);
    json_decref(sort);
  }
}

/* The plans of a pattern's own hot queries over the indexes the pattern
 * declares (its dtx__pattern_t), so an index or a filter changed in one
 * place cannot silently turn a page into a read of the whole backlog.
 * The ledger committer's round (src/txn/ledger/commit.c, plan_round):
 * the scan of uncommitted entries walks {proc, created, _id} in its sort
 * order, and the read of pending ones takes {state, expires_at}'s
 * entries -- a walk of the first would read every uncommitted entry to
 * find the few pending ones, every round (O(backlog^2) to catch up, as
 * docs/benchmarks.md's bench_scale section measured). */
static void test_pattern_plans(void) {
  static const struct {
    const char *pattern, *coll, *filter, *sort;
    int kind;
    const char *index;
  } rows[] = {
      {"ledger", DTX_LEDGER_ENTRIES,
       "{'proc':'uncommitted','state':{'$ne':'pending'}}",
       "{'created':1,'_id':1}", SORTED, "proc_1_created_1__id_1"},
      /* A round's next page (commit.c, scan_filter): still the walk. */
      {"ledger", DTX_LEDGER_ENTRIES,
       "{'proc':'uncommitted','state':{'$ne':'pending'},'created':{'$gte':5},"
       "'$nor':[{'created':5,'_id':{'$lte':'e9'}}]}",
       "{'created':1,'_id':1}", SORTED, "proc_1_created_1__id_1"},
      {"ledger", DTX_LEDGER_ENTRIES, "{'state':'pending'}",
       "{'created':1,'_id':1}", INDEX, "state_1_expires_at_1"},
  };
  for (size_t r = 0; r < sizeof rows / sizeof *rows; r++) {
    const dtx__pattern_t *pat = NULL;
    for (size_t i = 0; dtx__patterns[i] && !pat; i++)
      if (strcmp(dtx__patterns[i]->name, rows[r].pattern) == 0)
        pat = dtx__patterns[i];
    REQUIRE(pat);
    ix_t own[16];
    size_t n = 0;
    for (const dtx__index_def_t *d = pat->indexes; d && d->keys; d++) {
      if (strcmp(d->coll, rows[r].coll) != 0)
        continue;
      REQUIRE(n < 16);
      json_t *k = J(d->keys);
      dtx_index_opts_t o = {.unique = d->unique, .sparse = d->sparse};
      own[n] = (ix_t){d->keys, d->unique, d->sparse, 0, 1, NULL};
      CHECK_RC(dtx__index_spec_parse(k, &o, &own[n].spec), 0);
      json_decref(k);
      n++;
    }
    json_t *f = jq(rows[r].filter), *sort = jq(rows[r].sort);
    dtx__plan_t p;
    CHECK_RC(dtx__plan_choose(f, sort, own, n, index_of, &p), 0);
    const ix_t *x = p.ix;
    /* A later page starts at its created bound: the range on the
     * index's second field, not a walk from the first entry. */
    CHECKF(!strstr(rows[r].filter, "$gte") ||
               (p.neq == 1 && p.lo && json_integer_value(p.lo) == 5 &&
                p.lo_incl),
           "%s: the range on created is not the plan's (neq %zu)",
           rows[r].filter, p.neq);
    CHECKF(p.kind == rows[r].kind && x &&
               strcmp(x->spec->name, rows[r].index) == 0,
           "%s %s: plan %d on %s, want %d on %s", rows[r].pattern,
           rows[r].filter, p.kind, x ? x->spec->name : "(none)",
           rows[r].kind, rows[r].index);
    dtx__plan_free(&p);
    json_decref(f);
    json_decref(sort);
    for (size_t i = 0; i < n; i++)
      dtx__index_spec_free(own[i].spec);
  }
}

int main(void) {
  for (size_t i = 0; i < NIX; i++) {
    json_t *k = J(ixs[i].keys);
    dtx_index_opts_t o = {.unique = ixs[i].unique, .sparse = ixs[i].sparse};
    if (dtx__index_spec_parse(k, &o, &ixs[i].spec) < 0) {
      fprintf(stderr, "index %s: %s\n", ixs[i].keys, dtx_errdetail());
      return 1;
    }
    json_decref(k);
  }
  TEST_RUN(test_plan_table);
  TEST_RUN(test_pattern_plans);
  for (size_t i = 0; i < NIX; i++)
    dtx__index_spec_free(ixs[i].spec);
  return TEST_DONE();
}
