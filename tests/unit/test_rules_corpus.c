/* test_rules_corpus.c -- the two rules engines (rules.c on json_t, brules.c
 * on BSON) on real documents: the patterns' own, as a build wrote them.
 *
 * The store's per-document write path moves to BSON (docs/engine.md,
 * "Stages", 2b), and the rules check with it; the switch is safe only if
 * dtx__bdoc_check_write judges every write dtx__doc_check_write judges,
 * refusals included, with the same code and detail.  The unit tables
 * (test_schema.c, test_bschema.c) hold hand-written rows; this file holds
 * the patterns' stored documents and rules: the committed store of
 * tests/fixtures/json-text (populate.sh says what it holds: transfers,
 * jobs, a lock, a ledger, an order, versions, plain documents), loaded
 * from its sqlite3 .dump text with sqlite3_exec (no sqlite3 program
 * needed) and opened with dtx_store_open, which upgrades it to format 4.
 * It runs twice: with the rules the fixture's build stored, then with
 * this build's (every pattern's dtx__kit_ensure installs its own).
 *
 * For every collection with rules, both engines compile the stored form
 * the catalog gives (dtx_store_get_rules), and for every document D both
 * judge: the insert of D, the no-op update D -> D, the delete of D, D ->
 * D' for every other document D' of the collection, and D -> M and the
 * insert of M for mutations M of D (each top-level integer field +1, set
 * to a string, to the double 1.5, removed).  Each write is judged with
 * and without bypass, outside any step, inside a step of the collection's
 * pattern and inside another pattern's step (the "plain" transition
 * rules and their "steps"), and on BSON four times: each side as stored
 * (the bytes of the store's body) or bridged, or with every integer
 * int64 -- a stored NumberLong a JSON write brings back as int32 has not
 * changed, as JSON cannot tell them apart.  Code and detail must be
 * equal; the counts print at the end. */
#include "bschemadiff.h"
#include "testlib.h"

#include "doc/bdoc.h"
#include "doc/brules.h"
#include "doc/doc.h"
#include "txn/kit/kit.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef DTX_FIXTURE_DIR
#error "DTX_FIXTURE_DIR names tests/fixtures (CMakeLists.txt)"
#endif

static char dir[] = "/tmp/dtx_test_corpus.XXXXXX";
static char file[300];

static struct {
  size_t colls, ruled, docs, pairs, judged, refused, checks, differ;
} n;

/* The fixture's dump text executed into a new file. */
static int load_fixture(void) {
  char *sql = dtx_t_slurp(DTX_FIXTURE_DIR "/json-text/sqlite.sql");
  if (!sql) {
    fprintf(stderr, "cannot read %s\n",
            DTX_FIXTURE_DIR "/json-text/sqlite.sql");
    return -1;
  }
  snprintf(file, sizeof file, "%s/old.db", dir);
  sqlite3 *db = NULL;
  char *err = NULL;
  int rc = sqlite3_open(file, &db);
  if (rc == SQLITE_OK)
    rc = sqlite3_exec(db, sql, NULL, NULL, &err);
  if (rc != SQLITE_OK)
    fprintf(stderr, "loading the fixture: %s\n",
            err ? err : sqlite3_errmsg(db));
  sqlite3_free(err);
  sqlite3_close(db);
  free(sql);
  return rc == SQLITE_OK ? 0 : -1;
}

/* One document: its JSON and its stored bytes (malloc'd: a bson_t may
 * point into itself, so an array of them cannot grow). */
typedef struct doc {
  json_t *j;
  uint8_t *b;
  uint32_t len;
} doc_t;

/* The stored bodies of coll, in seq order (format 4: BSON blobs), each
 * read back as JSON by the bridge, into *out (malloc'd) and *nd.  0, or
 * -1 (nothing to free). */
static int read_docs(const char *coll, doc_t **out, size_t *nd) {
  sqlite3 *db = NULL;
  sqlite3_stmt *q = NULL;
  doc_t *d = NULL;
  size_t cap = 0;
  char sql[300];
  int ok = 1;
  *nd = 0;
  snprintf(sql, sizeof sql, "SELECT body FROM \"c:%s\" ORDER BY seq", coll);
  if (sqlite3_open_v2(file, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(db, sql, -1, &q, NULL) != SQLITE_OK) {
    fprintf(stderr, "%s: %s\n", coll, sqlite3_errmsg(db));
    ok = 0;
  }
  while (ok && sqlite3_step(q) == SQLITE_ROW) {
    const void *p = sqlite3_column_blob(q, 0);
    int len = sqlite3_column_bytes(q, 0);
    CHECKF(sqlite3_column_type(q, 0) == SQLITE_BLOB, "%s: a body is no blob",
           coll);
    if (*nd == cap) {
      cap = cap ? 2 * cap : 16;
      doc_t *g = realloc(d, cap * sizeof *d);
      if (!g) {
        ok = 0;
        break;
      }
      d = g;
    }
    doc_t *x = &d[*nd];
    x->j = NULL;
    x->len = (uint32_t)len;
    x->b = len >= 5 ? malloc((size_t)len) : NULL;
    if (!p || !x->b ||
        dtx__bson_check(p, (size_t)len, DTX_ECORRUPT, coll) != 0) {
      CHECKF(0, "%s: body %zu is no document (%s)", coll, *nd, dtx_errdetail());
      free(x->b);
      ok = 0;
      break;
    }
    memcpy(x->b, p, (size_t)len);
    (*nd)++;
    if (dtx__bson_to_json(x->b, x->len, 0, &x->j)) {
      CHECKF(0, "%s: body %zu: %s", coll, *nd - 1, dtx_errdetail());
      ok = 0;
    }
  }
  sqlite3_finalize(q);
  sqlite3_close(db);
  if (!ok) {
    for (size_t i = 0; i < *nd; i++) {
      json_decref(d[i].j);
      free(d[i].b);
    }
    free(d);
    return -1;
  }
  *out = d;
  return 0;
}

/* The BSON form of one side of a write: the stored bytes when the side is
 * a stored document and i64 is 0, else j bridged into *hold (i64: every
 * integer as int64).  NULL when the bridge refused j. */
static const uint8_t *side(const json_t *j, const doc_t *stored, int i64,
                           bson_t *hold, uint32_t *len) {
  if (!i64 && stored) {
    *len = stored->len;
    return stored->b;
  }
  if (i64 ? bsd_doc_i64(j, hold) : dtx__bson_from_json(j, hold))
    return NULL;
  *len = hold->len;
  return bson_get_data(hold);
}

typedef struct judge {
  const char *coll, *pattern, *what;
  const dtx__rules_t *jr;
  const dtx__brules_t *br;
} judge_t;

/* Both engines on one write, under every bypass, step and BSON leg. */
static void both(const judge_t *g, const json_t *before, const doc_t *bst,
                 const json_t *after, const doc_t *ast) {
  char other[80], own[80];
  snprintf(own, sizeof own, "%s.corpus", g->pattern ? g->pattern : "none");
  snprintf(other, sizeof other, "%s.corpus",
           g->pattern && strcmp(g->pattern, "transfer") == 0 ? "job"
                                                             : "transfer");
  const char *steps[3] = {NULL, other, own};
  static const char *const legs[4] = {"as stored", "before int64",
                                      "after int64", "both int64"};
  n.pairs++;
  for (int bypass = 0; bypass < 2; bypass++)
    for (int s = 0; s < (g->pattern ? 3 : 2); s++) {
      const char *saved = dtx__rules_step_enter(steps[s]);
      char jd[600], bd[600];
      int jrc = dtx__doc_check_write(g->jr, g->coll, before, after, bypass);
      snprintf(jd, sizeof jd, "%s", jrc ? dtx_errdetail() : "");
      n.judged++;
      n.refused += jrc != 0;
      /* legs: bit 0 writes before's integers int64, bit 1 after's */
      for (int leg = 0; leg < 4; leg++) {
        bson_t hb = BSON_INITIALIZER, ha = BSON_INITIALIZER;
        uint32_t blen = 0, alen = 0;
        const uint8_t *b =
            before ? side(before, bst, leg & 1, &hb, &blen) : NULL;
        const uint8_t *a =
            after ? side(after, ast, leg >> 1, &ha, &alen) : NULL;
        int ok = !before == !b && !after == !a;
        CHECKF(ok, "%s %s: the bridge refused a document", g->coll, g->what);
        if (ok) {
          int brc =
              dtx__bdoc_check_write(g->br, g->coll, b, blen, a, alen, bypass);
          snprintf(bd, sizeof bd, "%s", brc ? dtx_errdetail() : "");
          n.checks++;
          int same = jrc == brc && strcmp(jd, bd) == 0;
          n.differ += !same;
          /* the first few differences in full; run_pass counts them all */
          if (!same && n.differ <= 20)
            CHECKF(same,
                   "%s %s (bypass %d, step %s, %s): json %s (%s), bson %s (%s)"
                   "\n  before %s\n  after  %s",
                   g->coll, g->what, bypass, steps[s] ? steps[s] : "none",
                   legs[leg], dtx_errname(jrc), jd, dtx_errname(brc), bd,
                   before ? JS(before) : "-", after ? JS(after) : "-");
        }
        bson_destroy(&hb);
        bson_destroy(&ha);
      }
      dtx__rules_step_leave(saved);
    }
}

/* The mutations of d's top-level integer fields: D -> M and insert M. */
static void mutations(const judge_t *g0, const doc_t *d) {
  const char *k;
  json_t *v;
  json_object_foreach(d->j, k, v) {
    if (!json_is_integer(v))
      continue;
    json_int_t i = json_integer_value(v);
    json_t *muts[4] = {
        json_integer(i == INT64_MAX ? i - 1 : i + 1), json_string("x"),
        json_real(1.5), NULL, /* removed */
    };
    static const char *const names[4] = {"+1", "a string", "1.5", "removed"};
    for (int m = 0; m < 4; m++) {
      json_t *mut = json_deep_copy(d->j);
      if (!mut)
        abort();
      if (muts[m])
        json_object_set(mut, k, muts[m]);
      else
        json_object_del(mut, k);
      char what[200];
      judge_t g = *g0;
      g.what = what;
      snprintf(what, sizeof what, "%s's %s %s",
               JS(json_object_get(d->j, "_id")), k, names[m]);
      both(&g, d->j, d, mut, NULL);
      both(&g, NULL, NULL, mut, NULL);
      json_decref(mut);
      json_decref(muts[m]);
    }
  }
}

static void one_collection(dtx_store_t *st, const char *coll) {
  json_t *rules = NULL;
  n.colls++;
  CHECK_RC(dtx_store_get_rules(st, coll, &rules), 0);
  if (!rules)
    return;
  int any = 0;
  const char *k;
  json_t *v;
  json_object_foreach(rules, k, v) any |=
      strcmp(k, "pattern") && !json_is_null(v);
  if (!any) {
    json_decref(rules);
    return;
  }
  n.ruled++;
  dtx__rules_t *jr = NULL;
  dtx__brules_t *br = NULL;
  bson_t bs = BSON_INITIALIZER;
  char jd[600], bd[600];
  int jrc = dtx__rules_compile(rules, &jr);
  snprintf(jd, sizeof jd, "%s", jrc ? dtx_errdetail() : "");
  CHECKF(dtx__bson_from_json(rules, &bs) == 0, "%s: the bridge: %s", coll,
         dtx_errdetail());
  int brc = dtx__brules_compile(&bs, &br);
  snprintf(bd, sizeof bd, "%s", brc ? dtx_errdetail() : "");
  CHECKF(jrc == 0 && brc == 0 && jr && br,
         "%s: compile: json %s (%s), bson %s (%s)", coll, dtx_errname(jrc), jd,
         dtx_errname(brc), bd);
  size_t nd = 0;
  doc_t *d = NULL;
  int rd = jr && br ? read_docs(coll, &d, &nd) : -1;
  int64_t count = -1;
  CHECK_RC(dtx_store_count(st, coll, NULL, &count), 0);
  CHECKF(rd == 0 && count == (int64_t)nd, "%s: %zu stored bodies, count %lld",
         coll, nd, (long long)count);
  const json_t *pat = json_object_get(rules, "pattern");
  judge_t g = {coll, json_string_value(pat), NULL, jr, br};
  for (size_t i = 0; d && i < nd; i++) {
    char what[200];
    const char *id = JS(json_object_get(d[i].j, "_id"));
    g.what = what;
    /* The stored body is the bridge's form of its JSON: the mutations,
     * bridged, differ from D by the mutation alone. */
    bson_t br2 = BSON_INITIALIZER;
    CHECKF(dtx__bson_from_json(d[i].j, &br2) == 0 && br2.len == d[i].len &&
               memcmp(bson_get_data(&br2), d[i].b, br2.len) == 0,
           "%s %s: the stored body is not the bridge's form of its JSON", coll,
           id);
    bson_destroy(&br2);
    snprintf(what, sizeof what, "insert %s", id);
    both(&g, NULL, NULL, d[i].j, &d[i]);
    snprintf(what, sizeof what, "no-op update %s", id);
    both(&g, d[i].j, &d[i], d[i].j, &d[i]);
    snprintf(what, sizeof what, "delete %s", id);
    both(&g, d[i].j, &d[i], NULL, NULL);
    for (size_t j = 0; j < nd; j++) {
      if (j == i)
        continue;
      snprintf(what, sizeof what, "%s -> %s", id,
               JS(json_object_get(d[j].j, "_id")));
      both(&g, d[i].j, &d[i], d[j].j, &d[j]);
    }
    mutations(&g, &d[i]);
    n.docs++;
  }
  for (size_t i = 0; i < nd; i++) {
    json_decref(d[i].j);
    free(d[i].b);
  }
  free(d);
  dtx__rules_free(jr);
  dtx__brules_free(br);
  bson_destroy(&bs);
  json_decref(rules);
}

/* Every collection of the store through both engines, with the rules
 * the catalog holds now; the counts print under label. */
static void run_pass(dtx_store_t *st, const char *label) {
  memset(&n, 0, sizeof n);
  json_t *colls = NULL;
  CHECK_RC(dtx_store_list_collections(st, &colls), 0);
  size_t i;
  json_t *c;
  json_array_foreach(colls, i, c) one_collection(st, json_string_value(c));
  json_decref(colls);
  printf("rules corpus, %s: %zu collections, %zu with rules, %zu "
         "documents; %zu writes, judged %zu times (bypass, steps) by the "
         "json_t engine, %zu of them refusals, and %zu times by the BSON "
         "engine (each side as stored or int64), %zu different\n",
         label, n.colls, n.ruled, n.docs, n.pairs, n.judged, n.refused,
         n.checks, n.differ);
  /* The fixture holds every pattern's collections (populate.sh): a corpus
   * that shrank to nothing would pass vacuously. */
  CHECK(n.ruled >= 15 && n.docs >= 25 && n.pairs >= 1000);
  CHECK(n.refused > 0 && n.refused < n.judged && n.checks == 4 * n.judged);
  CHECKF(n.differ == 0, "%s: %zu judgements differ", label, n.differ);
}

static void test_corpus(void) {
  REQUIRE(load_fixture() == 0);
  char uri[320];
  snprintf(uri, sizeof uri, "sqlite:%s", file);
  dtx_store_t *st = NULL;
  CHECK_RC(dtx_store_open(uri, &st), 0);
  REQUIRE(st);
  run_pass(st, "the fixture's rules");
  /* Then this build's rules: each pattern sets its collections up as its
   * first write would (stored rules that differ are replaced), and the
   * same documents are judged again. */
  for (size_t i = 0; dtx__patterns[i]; i++)
    CHECKF(dtx__kit_ensure(st, dtx__patterns[i]) == 0, "%s: %s",
           dtx__patterns[i]->name, dtx_errdetail());
  run_pass(st, "this build's rules");
  dtx_store_close(st);
}

int main(void) {
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  TEST_RUN(test_corpus);
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
  return TEST_DONE();
}
