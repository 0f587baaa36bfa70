/* conf_bulk.c -- conformance: bulk writes (dtx_store_bulk_write).
 *
 * Two parts.  The "bulk" topic tests the call itself: results of every
 * kind, per-operation errors beside successes, call-level errors, many
 * processes sending batches of conditional decrements, and fault
 * injection inside a batch (an error fails one operation alone; a crash
 * leaves each operation all or nothing).
 *
 * And with DTX_CONF_VIA_BULK=1 the whole suite runs its single-document
 * writes through dtx_store_bulk_write: conf.h maps dtx_store_insert,
 * _insert_ex, _update (without many), _find_one_and_update, _delete and
 * _delete_ex (without many) to the wrappers below, which put the test's
 * operation at a random place in a batch of 1..64, the others unrelated
 * (inserts, upserts and no-match updates and deletes on a collection of
 * their own, each checked), and hand back the test's own result exactly
 * as the single call returns it -- code, detail and out-parameters.  The
 * unrelated operations touch no existing document, so tests that count
 * the documents a call examined still see only their own. */
#define CONF_NO_WRAP
#include "conf.h"

#include "store/store.h"
#include "util/err.h"
#include "util/fault.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int via_bulk = -1;
static _Thread_local uint64_t noise_rnd; /* threads share the store */
static const char *noise_coll;

int conf_via_bulk(void) {
  if (via_bulk < 0) {
    const char *v = getenv("DTX_CONF_VIA_BULK");
    via_bulk = v && *v && strcmp(v, "0") != 0;
    /* First called by conf_main before any test, so before threads. */
    if (via_bulk)
      noise_coll = conf_coll("bulk_noise");
  }
  return via_bulk;
}

static uint64_t nrand(void) {
  if (!noise_rnd)
    noise_rnd = conf_random() | 1;
  noise_rnd ^= noise_rnd << 13;
  noise_rnd ^= noise_rnd >> 7;
  noise_rnd ^= noise_rnd << 17;
  return noise_rnd;
}

/* One unrelated operation (its JSON values collected by conf_gc). */
static void noise_op(dtx_bulk_op_t *op, int *expect) {
  static const dtx_fam_opts_t upsert_new = {.upsert = 1, .return_new = 1};
  char id[64];
  snprintf(id, sizeof id, "{'_id':'nx-%d-%llx-%llx'}", (int)getpid(),
           (unsigned long long)nrand(), (unsigned long long)nrand());
  memset(op, 0, sizeof *op);
  op->coll = noise_coll;
  *expect = (int)(nrand() % 4);
  switch (*expect) {
  case 0:
    op->kind = DTX_BULK_INSERT;
    op->doc = JQ("{'n':0}");
    break;
  case 1:
    op->kind = DTX_BULK_UPDATE_ONE;
    op->filter = JQ(id);
    op->update = JQ("{'$inc':{'n':1}}");
    break;
  case 2:
    op->kind = DTX_BULK_DELETE_ONE;
    op->filter = JQ(id);
    break;
  default:
    op->kind = DTX_BULK_FIND_ONE_AND_UPDATE;
    op->filter = JQ(id);
    op->update = JQ("{'$inc':{'n':1}}");
    op->fam_opts = &upsert_new;
  }
}

static int noise_ok(int expect, const dtx_bulk_result_t *r) {
  if (r->rc != 0)
    return 0;
  switch (expect) {
  case 0:
    return r->id != NULL;
  case 1:
  case 2:
    return r->matched == 0 && r->modified == 0 && !r->id;
  default:
    return r->id && json_integer_value(json_object_get(r->doc, "n")) == 1;
  }
}

/* Runs *op in a batch (alone when st is not the suite's store, so other
 * namespaces stay as the test left them) and leaves its result in *r and
 * its error detail as this thread's.  Returns r->rc. */
static int run_in_batch(dtx_store_t *st, const dtx_bulk_op_t *op,
                        dtx_bulk_result_t *r) {
  enum { MAXB = 64 };
  dtx_bulk_op_t ops[MAXB];
  dtx_bulk_result_t res[MAXB];
  int expect[MAXB];
  size_t n = 1, at = 0;
  if (st == conf_st && st) {
    n = 1 + (size_t)(nrand() % MAXB);
    at = (size_t)(nrand() % n);
  }
  for (size_t i = 0; i < n; i++) {
    if (i == at)
      ops[i] = *op;
    else
      noise_op(&ops[i], &expect[i]);
  }
  (void)dtx_store_bulk_write(st, ops, n, res);
  for (size_t i = 0; i < n; i++)
    if (i != at)
      CHECKF(noise_ok(expect[i], &res[i]),
             "unrelated op %zu (kind %d) of a batch of %zu: %s (%s)", i,
             expect[i], n, dtx_errname(res[i].rc),
             res[i].detail ? res[i].detail : "");
  *r = res[at];
  memset(&res[at], 0, sizeof res[at]);
  dtx_bulk_results_clear(res, n);
  if (r->rc < 0)
    dtx__err(r->rc, "%s", r->detail ? r->detail : "");
  else
    dtx__err_clear();
  return r->rc;
}

/* ---- the wrappers (conf.h maps the single calls to these) ----------------- */

int conf_insert_ex(dtx_store_t *st, const char *coll, const json_t *doc,
                   const dtx_insert_opts_t *opts, json_t **id_out) {
  if (!conf_via_bulk() || !st)
    return dtx_store_insert_ex(st, coll, doc, opts, id_out);
  dtx_bulk_op_t op = {.kind = DTX_BULK_INSERT, .coll = coll, .doc = doc,
                      .insert_opts = opts};
  dtx_bulk_result_t r;
  int rc = run_in_batch(st, &op, &r);
  if (id_out)
    *id_out = rc == 0 ? json_incref(r.id) : NULL;
  dtx_bulk_results_clear(&r, 1);
  return rc;
}

int conf_insert(dtx_store_t *st, const char *coll, const json_t *doc,
                json_t **id_out) {
  return conf_insert_ex(st, coll, doc, NULL, id_out);
}

int conf_update(dtx_store_t *st, const char *coll, const json_t *filter,
                const json_t *update, const dtx_update_opts_t *opts,
                dtx_update_result_t *res) {
  if (!conf_via_bulk() || !st || (opts && opts->many))
    return dtx_store_update(st, coll, filter, update, opts, res);
  dtx_bulk_op_t op = {.kind = DTX_BULK_UPDATE_ONE, .coll = coll,
                      .filter = filter, .update = update,
                      .update_opts = opts};
  dtx_bulk_result_t r;
  int rc = run_in_batch(st, &op, &r);
  if (res) {
    memset(res, 0, sizeof *res);
    if (rc == 0) {
      res->matched = r.matched;
      res->modified = r.modified;
      res->upserted_id = json_incref(r.id);
    }
  }
  dtx_bulk_results_clear(&r, 1);
  return rc;
}

static int fam(dtx_bulk_kind_t kind, dtx_store_t *st, const char *coll,
               const json_t *filter, const json_t *update,
               const dtx_fam_opts_t *opts, json_t **out) {
  dtx_bulk_op_t op = {.kind = kind, .coll = coll, .filter = filter,
                      .update = update, .fam_opts = opts};
  dtx_bulk_result_t r;
  int rc = run_in_batch(st, &op, &r);
  *out = rc == 0 ? r.doc : NULL;
  if (rc == 0)
    r.doc = NULL;
  dtx_bulk_results_clear(&r, 1);
  return rc;
}

int conf_find_one_and_update(dtx_store_t *st, const char *coll,
                             const json_t *filter, const json_t *update,
                             const dtx_fam_opts_t *opts, json_t **out) {
  if (!conf_via_bulk() || !st || !out)
    return dtx_store_find_one_and_update(st, coll, filter, update, opts, out);
  return fam(DTX_BULK_FIND_ONE_AND_UPDATE, st, coll, filter, update, opts,
             out);
}

int conf_find_one_and_delete(dtx_store_t *st, const char *coll,
                             const json_t *filter, const dtx_fam_opts_t *opts,
                             json_t **out) {
  if (!conf_via_bulk() || !st || !out)
    return dtx_store_find_one_and_delete(st, coll, filter, opts, out);
  return fam(DTX_BULK_FIND_ONE_AND_DELETE, st, coll, filter, NULL, opts, out);
}

int conf_delete_ex(dtx_store_t *st, const char *coll, const json_t *filter,
                   const dtx_delete_opts_t *opts, int64_t *deleted) {
  if (!conf_via_bulk() || !st || (opts && opts->many))
    return dtx_store_delete_ex(st, coll, filter, opts, deleted);
  dtx_bulk_op_t op = {.kind = DTX_BULK_DELETE_ONE, .coll = coll,
                      .filter = filter, .delete_opts = opts};
  dtx_bulk_result_t r;
  int rc = run_in_batch(st, &op, &r);
  if (deleted)
    *deleted = rc == 0 ? r.modified : 0;
  dtx_bulk_results_clear(&r, 1);
  return rc;
}

int conf_delete(dtx_store_t *st, const char *coll, const json_t *filter,
                int many, int64_t *deleted) {
  dtx_delete_opts_t o = {.many = many};
  return conf_delete_ex(st, coll, filter, &o, deleted);
}

/* ---- the bulk topic --------------------------------------------------------- */

static dtx_bulk_op_t inc_op(const char *coll, int id, const char *update) {
  char f[64];
  snprintf(f, sizeof f, "{'_id':%d}", id);
  return (dtx_bulk_op_t){.kind = DTX_BULK_UPDATE_ONE, .coll = coll,
                         .filter = JQ(f), .update = JQ(update)};
}

static void test_bulk_every_kind(void) {
  const char *c = conf_coll("bulk_kinds");
  REQUIRE(conf_seed(c, "[{'_id':1,'n':5},{'_id':2,'n':0},{'_id':3}]") == 0);
  static const dtx_fam_opts_t after = {.return_new = 1,
                                       .projection = NULL};
  dtx_fam_opts_t proj = {.projection = JQ("{'n':1,'_id':0}")};
  dtx_update_opts_t ups = {.upsert = 1};
  dtx_bulk_op_t ops[] = {
      {.kind = DTX_BULK_INSERT, .coll = c, .doc = JQ("{'_id':10,'n':1}")},
      {.kind = DTX_BULK_INSERT, .coll = c, .doc = JQ("{'_id':1}")},
      inc_op(c, 1, "{'$inc':{'n':-1}}"),
      {.kind = DTX_BULK_FIND_ONE_AND_UPDATE, .coll = c,
       .filter = JQ("{'_id':2}"), .update = JQ("{'$set':{'x':1}}"),
       .fam_opts = &after},
      {.kind = DTX_BULK_FIND_ONE_AND_UPDATE, .coll = c,
       .filter = JQ("{'_id':99}"), .update = JQ("{'$set':{'x':1}}")},
      {.kind = DTX_BULK_DELETE_ONE, .coll = c, .filter = JQ("{'_id':3}")},
      {.kind = DTX_BULK_UPDATE_ONE, .coll = c, .filter = JQ("{'_id':7}"),
       .update = JQ("{'$set':{'y':1}}"), .update_opts = &ups},
      {.kind = DTX_BULK_UPDATE_ONE, .coll = c, .filter = JQ("{'_id':1}"),
       .update = JQ("{'$bogus':1}")},
      {.kind = DTX_BULK_FIND_ONE_AND_DELETE, .coll = c,
       .filter = JQ("{'_id':10}"), .fam_opts = &proj},
      {.kind = DTX_BULK_UPDATE_ONE, .coll = c, .filter = JQ("{'_id':1}"),
       .update = JQ("{'$inc':{'n':1}}"),
       .update_opts = &(dtx_update_opts_t){.many = 1}},
      {.kind = DTX_BULK_UPDATE_ONE, .coll = "bad name!",
       .filter = JQ("{}"), .update = JQ("{'$set':{'a':1}}")},
  };
  enum { N = sizeof ops / sizeof ops[0] };
  dtx_bulk_result_t r[N];
  int rc = dtx_store_bulk_write(conf_st, ops, N, r);
  CHECK_RC(rc, DTX_EDUPKEY); /* the first failure's code */
  CHECKF(strstr(dtx_errdetail(), " of 11 operations failed; first: #1"),
         "%s", dtx_errdetail());
  CHECK(r[0].rc == 0 && json_integer_value(r[0].id) == 10);
  CHECK(r[1].rc == DTX_EDUPKEY && r[1].detail && strstr(r[1].detail, "_id_"));
  CHECK(r[2].rc == 0 && r[2].matched == 1 && r[2].modified == 1);
  CHECKF(r[3].rc == 0 &&
             json_integer_value(json_object_get(r[3].doc, "x")) == 1,
         "%s", JS(r[3].doc));
  CHECK(r[4].rc == DTX_ENOMATCH && !r[4].doc);
  CHECK(r[5].rc == 0 && r[5].modified == 1);
  CHECK(r[6].rc == 0 && r[6].matched == 0 && json_integer_value(r[6].id) == 7);
  CHECK(r[7].rc == DTX_EBADUPDATE && strstr(r[7].detail, "$bogus"));
  /* Unordered: the insert of 10 and its delete may run in either order. */
  CHECKF((r[8].rc == 0 && json_equal(r[8].doc, JQ("{'n':1}"))) ||
             r[8].rc == DTX_ENOMATCH,
         "%s %s", dtx_errname(r[8].rc), JS(r[8].doc));
  CHECK(r[9].rc == DTX_EINVAL && strstr(r[9].detail, "many"));
  CHECK(r[10].rc == DTX_EINVAL && strstr(r[10].detail, "bad name!"));
  dtx_bulk_results_clear(r, N);
  CHECK(r[0].id == NULL && r[1].detail == NULL);
  CHECK(conf_int_field(c, 1, "n") == 4);
  CHECK(conf_count(c, JQ("{'_id':3}")) == 0);
  CHECK(conf_count(c, JQ("{'_id':7,'y':1}")) == 1);
  /* Call-level errors. */
  dtx_bulk_result_t one;
  CHECK_RC(dtx_store_bulk_write(NULL, ops, 1, &one), DTX_EINVAL);
  CHECK(one.rc == DTX_EINVAL && one.detail);
  dtx_bulk_results_clear(&one, 1);
  CHECK_RC(dtx_store_bulk_write(conf_st, ops, 1, NULL), DTX_EINVAL);
  CHECK_RC(dtx_store_bulk_write(conf_st, NULL, 0, &one), 0);
}

/* Many operations on ONE document in one batch (a hot account's debits):
 * each is its own atomic step, as if the operations ran one after
 * another -- exactly 10 of 14 conditional debits of 100 from 1,000
 * apply, each result's before and after are consecutive states, a no-
 * match and an error keep their own outcome, the index follows the last
 * state -- and on Redis the batch is one read and one write (the
 * operations form one group, bulk.c), not a round per operation. */
static void test_bulk_one_document(void) {
  const char *c = conf_coll("bulk_onedoc");
  REQUIRE(conf_seed(c, "[{'_id':1,'n':1000,'s':'x','log':[]}]") == 0);
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'n':1}"), NULL, NULL), 0);
  CHECK(conf_int_field(c, 1, "n") == 1000); /* the catalog is loaded */
  static const dtx_fam_opts_t after = {.return_new = 1};
  enum { N = 16 };
  dtx_bulk_op_t ops[N];
  for (int i = 0; i < N; i++) {
    char u[96];
    snprintf(u, sizeof u, "{'$inc':{'n':-100},'$push':{'log':%d}}", i);
    ops[i] = (dtx_bulk_op_t){.kind = i % 2 ? DTX_BULK_FIND_ONE_AND_UPDATE
                                           : DTX_BULK_UPDATE_ONE,
                             .coll = c,
                             .filter = JQ("{'_id':1,'n':{'$gte':100}}"),
                             .update = JQ(u),
                             .fam_opts = i % 4 == 1 ? &after : NULL};
  }
  /* #3: an error at apply time ($inc of a string), on the predicted state;
   * #12: a filter no state matches. */
  ops[3].update = JQ("{'$inc':{'s':1}}");
  ops[12].filter = JQ("{'_id':1,'n':-5}");
  dtx_bulk_result_t r[N];
  int64_t rt0 = dtx__store_round_trips();
  (void)dtx_store_bulk_write(conf_st, ops, N, r);
  int64_t rts = dtx__store_round_trips() - rt0;
  int applied = 0, none = 0;
  int seen[N] = {0};
  for (int i = 0; i < N; i++) {
    if (i == 3) {
      CHECKF(r[i].rc == DTX_ETYPE && r[i].detail && strstr(r[i].detail, "s"),
             "#3: %s %s", dtx_errname(r[i].rc), r[i].detail);
      continue;
    }
    if (ops[i].kind == DTX_BULK_UPDATE_ONE) {
      CHECKF(r[i].rc == 0, "#%d: %s %s", i, dtx_errname(r[i].rc),
             r[i].detail);
      applied += r[i].modified;
      none += !r[i].matched;
      continue;
    }
    if (r[i].rc == DTX_ENOMATCH) {
      none++;
      continue;
    }
    CHECKF(r[i].rc == 0, "#%d: %s %s", i, dtx_errname(r[i].rc), r[i].detail);
    applied++;
    /* The state it returns is the one it made or the one it found. */
    int64_t n = json_integer_value(json_object_get(r[i].doc, "n"));
    json_t *log = json_object_get(r[i].doc, "log");
    size_t k = json_array_size(log);
    int64_t last = k ? json_integer_value(json_array_get(log, k - 1)) : -1;
    CHECKF(n >= 0 && n % 100 == 0, "#%d: n=%lld", i, (long long)n);
    if (ops[i].fam_opts) {
      CHECKF(last == i && n == 1000 - 100 * (int64_t)k, "#%d returns %s", i,
             JS(r[i].doc));
    } else {
      CHECKF(n == 1000 - 100 * (int64_t)k && n >= 100, "#%d found %s", i,
             JS(r[i].doc));
    }
    /* The number of debits once it applied: one per operation. */
    size_t made = ops[i].fam_opts ? k : k + 1;
    CHECKF(made < N && !seen[made], "#%d: a state made twice: %s", i,
           JS(r[i].doc));
    if (made < N)
      seen[made] = 1;
  }
  CHECKF(applied == 10 && none == 5, "%d applied, %d did not match", applied,
         none);
  dtx_bulk_results_clear(r, N);
  CHECK(conf_int_field(c, 1, "n") == 0);
  CHECK(conf_count(c, JQ("{'n':0}")) == 1 && conf_count(c, JQ("{'n':1000}")) == 0);
  json_t *all = conf_find(c, NULL, NULL);
  json_t *log = json_object_get(json_array_get(all, 0), "log");
  CHECKF(json_array_size(log) == 10, "%s", JS(all));
  json_decref(all);
  if (strncmp(conf_uri, "redis", 5) == 0)
    CHECKF(rts <= 2, "%lld round trips for 16 operations on one document",
           (long long)rts);
}

/* find_one_and_update returning the document BEFORE, several times on
 * one document in one batch: each returns a real state, and the states
 * they return are the consecutive ones 0, 1, 2, 3.  (On Redis the first
 * of them heads the group; it once returned no document at all.) */
static void test_bulk_group_returns_before(void) {
  const char *c = conf_coll("bulk_before");
  REQUIRE(conf_seed(c, "[{'_id':1,'n':0}]") == 0);
  static const dtx_fam_opts_t before = {0};
  enum { N = 4 };
  dtx_bulk_op_t ops[N];
  for (int i = 0; i < N; i++)
    ops[i] = (dtx_bulk_op_t){.kind = DTX_BULK_FIND_ONE_AND_UPDATE, .coll = c,
                             .filter = JQ("{'_id':1}"),
                             .update = JQ("{'$inc':{'n':1}}"),
                             .fam_opts = &before};
  dtx_bulk_result_t r[N];
  CHECK_RC(dtx_store_bulk_write(conf_st, ops, N, r), 0);
  int seen[N] = {0};
  for (int i = 0; i < N; i++) {
    int64_t n = json_integer_value(json_object_get(r[i].doc, "n"));
    CHECKF(r[i].rc == 0 && r[i].doc && n >= 0 && n < N && !seen[n],
           "#%d: %s %s", i, dtx_errname(r[i].rc), JS(r[i].doc));
    if (r[i].doc && n >= 0 && n < N)
      seen[n] = 1;
  }
  dtx_bulk_results_clear(r, N);
  CHECK(conf_int_field(c, 1, "n") == N);
}

/* A collection with a unique index: 8 updates of the unique field of one
 * document and 4 inserts of one new _id, all in one batch.  Each update
 * applies (k ends at 8), one insert wins and the others are DUPKEY, and
 * quickly.  (On Redis two writes of one document in one round fenced
 * each other's unique claims and both lost, round after round, until
 * the 10 s retry window failed every one with BUSY.) */
static void test_bulk_unique_one_document(void) {
  const char *c = conf_coll("bulk_uq1");
  REQUIRE(conf_seed(c, "[{'_id':1,'k':0}]") == 0);
  dtx_index_opts_t uq = {.unique = 1};
  CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), &uq, NULL), 0);
  enum { NU = 8, NI = 4, N = NU + NI };
  dtx_bulk_op_t ops[N];
  for (int i = 0; i < N; i++) {
    char d[64];
    snprintf(d, sizeof d, "{'_id':2,'k':%d}", 100 + i);
    ops[i] = i < NU ? inc_op(c, 1, "{'$inc':{'k':1}}")
                    : (dtx_bulk_op_t){.kind = DTX_BULK_INSERT, .coll = c,
                                      .doc = JQ(d)};
  }
  dtx_bulk_result_t r[N];
  int64_t t0 = conf_now_ms();
  (void)dtx_store_bulk_write(conf_st, ops, N, r);
  int64_t took = conf_now_ms() - t0;
  int inserted = 0;
  for (int i = 0; i < N; i++) {
    if (i < NU)
      CHECKF(r[i].rc == 0 && r[i].modified == 1, "#%d: %s %s", i,
             dtx_errname(r[i].rc), r[i].detail);
    else if (r[i].rc == 0)
      inserted++;
    else
      CHECKF(r[i].rc == DTX_EDUPKEY, "#%d: %s %s", i, dtx_errname(r[i].rc),
             r[i].detail);
  }
  dtx_bulk_results_clear(r, N);
  CHECKF(inserted == 1, "%d inserts of one _id", inserted);
  CHECK(conf_int_field(c, 1, "k") == NU);
  CHECK(conf_count(c, JQ("{'_id':2}")) == 1);
  CHECKF(took < 3000, "%lld ms", (long long)took);
}

/* Shared between the parent and the children of the tests below. */
typedef struct shared {
  int64_t ok[16];
  int64_t errors;
} shared_t;

static shared_t *shared_new(void) {
  void *p = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : memset(p, 0, sizeof(shared_t));
}

typedef struct dec_job {
  const char *coll;
  int batches;
  int onedoc; /* every decrement on document 0 */
  conf_barrier_t *bar;
  shared_t *sh;
} dec_job_t;

/* One thread: batches of 16 conditional decrements, one per document (or
 * all on document 0), counting the ones that applied per document.  1 on
 * a failed operation. */
typedef struct dec_thread {
  dec_job_t *j;
  dtx_store_t *st;
  int batches, bad;
} dec_thread_t;

static void *dec_thread(void *arg) {
  dec_thread_t *t = arg;
  dec_job_t *j = t->j;
  json_t *upd = json_pack("{s:{s:i}}", "$inc", "n", -1);
  json_t *filters[16];
  dtx_bulk_op_t ops[16];
  for (int i = 0; i < 16; i++) {
    filters[i] =
        json_pack("{s:i,s:{s:i}}", "_id", j->onedoc ? 0 : i, "n", "$gt", 0);
    ops[i] = (dtx_bulk_op_t){.kind = DTX_BULK_UPDATE_ONE, .coll = j->coll,
                             .filter = filters[i], .update = upd};
  }
  for (int b = 0; b < t->batches && !t->bad; b++) {
    dtx_bulk_result_t r[16];
    int rc = dtx_store_bulk_write(t->st, ops, 16, r);
    for (int i = 0; i < 16; i++) {
      if (r[i].rc != 0) {
        CONF_CHILD_FAIL("batch %d op %d: %s (%s); call %s", b, i,
                        dtx_errname(r[i].rc), r[i].detail,
                        dtx_errname(rc));
        t->bad = 1;
      } else if (r[i].modified) {
        __atomic_fetch_add(&j->sh->ok[j->onedoc ? 0 : i], 1,
                           __ATOMIC_SEQ_CST);
      }
    }
    dtx_bulk_results_clear(r, 16);
  }
  for (int i = 0; i < 16; i++)
    json_decref(filters[i]);
  json_decref(upd);
  return NULL;
}

/* One process.  On one document, two threads share its store handle:
 * writers of one process on one document take turns (redis/bulk.c). */
static int dec_child(void *arg) {
  dec_job_t *j = arg;
  dtx_store_t *st = NULL;
  if (dtx_store_open(conf_uri, &st) != 0 || conf_barrier_child(j->bar) != 0) {
    CONF_CHILD_FAIL("open or barrier: %s", dtx_errdetail());
    return 1;
  }
  int nt = j->onedoc ? 2 : 1, bad = 0;
  dec_thread_t t[2];
  pthread_t th[2];
  for (int k = 0; k < nt; k++) {
    t[k] = (dec_thread_t){j, st, j->batches / nt, 0};
    if (k > 0 && pthread_create(&th[k], NULL, dec_thread, &t[k]) != 0) {
      CONF_CHILD_FAIL("%s", "pthread_create");
      nt = k;
      bad = 1;
    }
  }
  dec_thread(&t[0]);
  for (int k = 1; k < nt; k++)
    pthread_join(th[k], NULL);
  for (int k = 0; k < nt; k++)
    bad |= t[k].bad;
  dtx_store_close(st);
  return bad;
}

/* 4 processes each send B batches of 16 conditional decrements ($gt: 0)
 * on 16 documents that start at S < 4B: each document must end at 0 with
 * exactly S decrements applied, and a sampling reader must never see one
 * below 0.  With onedoc, all 16 of every batch go to one document (a hot
 * account), which starts at S = 16 x 4B x 3/5, and each process sends
 * its B batches from two threads sharing its store handle. */
static void concurrent_decrements(int onedoc) {
  if (conf_store_is_private()) {
    conf_skip("needs a store shared between processes");
    return;
  }
  const char *c = conf_coll(onedoc ? "bulk_dec1" : "bulk_dec");
  const int B = onedoc ? (conf_quick ? 40 : 150) : (conf_quick ? 125 : 500);
  const int S = B * 4 * 3 / 5 * (onedoc ? 16 : 1), NP = 4, ND = onedoc ? 1 : 16;
  json_t *docs = json_array();
  for (int i = 0; i < ND; i++)
    json_array_append_new(docs, json_pack("{s:i,s:i}", "_id", i, "n", S));
  CHECK_RC(dtx_store_insert_many(conf_st, c, docs, NULL, NULL), 0);
  json_decref(docs);
  shared_t *sh = shared_new();
  REQUIRE(sh != NULL);
  conf_barrier_t bar;
  REQUIRE(conf_barrier_init(&bar) == 0);
  dec_job_t job = {c, B, onedoc, &bar, sh};
  conf_store_release();
  pid_t pids[4];
  for (int p = 0; p < NP; p++)
    pids[p] = conf_fork(dec_child, &job);
  CHECK(conf_barrier_release(&bar, NP) == 0);
  conf_store_reacquire();
  /* Sample while they run: no document below its limit. */
  int64_t samples = 0, below = 0, t_end = conf_now_ms() + 60000;
  for (;;) {
    int64_t sum = 0;
    json_t *all = conf_find(c, NULL, NULL);
    size_t i;
    json_t *d;
    json_array_foreach(all, i, d) {
      int64_t n = json_integer_value(json_object_get(d, "n"));
      below += n < 0;
      sum += n;
    }
    json_decref(all);
    samples++;
    if (sum == 0 || conf_now_ms() > t_end)
      break;
    usleep(2000);
  }
  for (int p = 0; p < NP; p++)
    CHECKF(conf_wait(pids[p]) == 0, "child %d failed", p);
  conf_barrier_close(&bar);
  CHECKF(below == 0, "%lld samples saw a document below 0", (long long)below);
  for (int i = 0; i < ND; i++) {
    CHECKF(sh->ok[i] == S, "doc %d: %lld decrements applied, want %d", i,
           (long long)sh->ok[i], S);
    CHECKF(conf_int_field(c, i, "n") == 0, "doc %d ends at %lld", i,
           (long long)conf_int_field(c, i, "n"));
  }
  printf("     %d processes x %d batches of 16 on %d document(s): %lld "
         "samples\n",
         NP, B, ND, (long long)samples);
  munmap(sh, sizeof *sh);
}

static void test_bulk_concurrent_decrements(void) { concurrent_decrements(0); }

static void test_bulk_concurrent_one_document(void) {
  concurrent_decrements(1);
}

/* Arms DOCTX_FAULT (NULL: disarms) for this process. */
static void arm(const char *spec) {
  if (spec)
    setenv("DOCTX_FAULT", spec, 1);
  else
    unsetenv("DOCTX_FAULT");
  dtx__fault_init(NULL);
}

/* An error injected into one operation of a batch fails it alone. */
static void test_bulk_fault_error_one_op(void) {
  const char *c = conf_coll("bulk_fault_err");
  REQUIRE(conf_seed(c, "[{'_id':0,'n':0},{'_id':1,'n':0},{'_id':2,'n':0},"
                       "{'_id':3,'n':0},{'_id':4,'n':0},{'_id':5,'n':0}]") ==
          0);
  dtx_bulk_op_t ops[6];
  for (int i = 0; i < 6; i++)
    ops[i] = inc_op(c, i, "{'$inc':{'n':1}}");
  dtx_bulk_result_t r[6];
  arm("store.bulk_op:error:3");
  int rc = dtx_store_bulk_write(conf_st, ops, 6, r);
  arm(NULL);
  CHECK_RC(rc, DTX_EFAULT);
  int failed = 0;
  for (int i = 0; i < 6; i++) {
    int64_t n = conf_int_field(c, i, "n");
    if (r[i].rc == DTX_EFAULT) {
      failed++;
      CHECKF(n == 0, "the failed op's document changed: %lld", (long long)n);
    } else {
      CHECKF(r[i].rc == 0 && r[i].modified == 1 && n == 1, "op %d: %s n=%lld",
             i, dtx_errname(r[i].rc), (long long)n);
    }
  }
  CHECK(failed == 1);
  dtx_bulk_results_clear(r, 6);
}

typedef struct crash_job {
  const char *coll;
  const char *fault;
} crash_job_t;

static int crash_child(void *arg) {
  crash_job_t *j = arg;
  dtx_store_t *st = NULL;
  if (dtx_store_open(conf_uri, &st) != 0)
    return 1;
  dtx_bulk_op_t ops[8];
  for (int i = 0; i < 8; i++)
    ops[i] = inc_op(j->coll, i, "{'$inc':{'n':1},'$set':{'k':1}}");
  dtx_bulk_result_t r[8];
  arm(j->fault);
  int rc = dtx_store_bulk_write(st, ops, 8, r);
  dtx_bulk_results_clear(r, 8);
  dtx_store_close(st);
  return rc == 0 ? 0 : 2;
}

/* A crash inside a batch: every operation is all or nothing -- the
 * document and its index entry agree -- and at the per-op point, before
 * anything of the batch was sent or committed, nothing applied.  On a
 * backend that never reaches a point the batch simply completes. */
static void test_bulk_fault_crash(void) {
  if (conf_store_is_private()) {
    conf_skip("needs a store shared between processes");
    return;
  }
  static const char *const points[] = {"store.bulk_op:crash:4",
                                       "store.bulk_sent:crash"};
  for (int p = 0; p < 2; p++) {
    char name[32];
    snprintf(name, sizeof name, "bulk_crash%d", p);
    const char *c = conf_coll(name);
    json_t *docs = json_array();
    for (int i = 0; i < 8; i++)
      json_array_append_new(docs,
                            json_pack("{s:i,s:i,s:i}", "_id", i, "n", 0, "k", 0));
    CHECK_RC(dtx_store_insert_many(conf_st, c, docs, NULL, NULL), 0);
    json_decref(docs);
    CHECK_RC(dtx_store_create_index(conf_st, c, JQ("{'k':1}"), NULL, NULL), 0);
    crash_job_t job = {c, points[p]};
    conf_store_release();
    pid_t pid = conf_fork(crash_child, &job);
    int st = conf_wait(pid);
    conf_store_reacquire();
    CHECKF(st == 137 || st == 0, "%s: child exited %d", points[p], st);
    int64_t applied = 0;
    for (int i = 0; i < 8; i++) {
      int64_t n = conf_int_field(c, i, "n");
      char f[64];
      snprintf(f, sizeof f, "{'_id':%d,'k':%lld}", i, (long long)n);
      CHECKF(n == 0 || n == 1, "%s: doc %d n=%lld", points[p], i,
             (long long)n);
      CHECKF(conf_count(c, JQ(f)) == 1, "%s: doc %d: index and body disagree",
             points[p], i);
      applied += n;
    }
    CHECKF(conf_count(c, JQ("{'k':1}")) == applied, "%s: %lld by index",
           points[p], (long long)conf_count(c, JQ("{'k':1}")));
    if (p == 0)
      CHECKF(applied == 0 || st == 0, "%s: %lld applied before the crash",
             points[p], (long long)applied);
    if (st == 0)
      CHECKF(applied == 8, "%s: completed with %lld applied", points[p],
             (long long)applied);
  }
}

void conf_run_bulk(void) {
  CONF_RUN(test_bulk_every_kind);
  CONF_RUN(test_bulk_one_document);
  CONF_RUN(test_bulk_group_returns_before);
  CONF_RUN(test_bulk_unique_one_document);
  CONF_RUN(conf_test_bulk_serial);
  CONF_RUN(conf_test_turn_deadline);
  CONF_RUN(test_bulk_fault_error_one_op);
  CONF_RUN(test_bulk_fault_crash);
  CONF_RUN(test_bulk_concurrent_decrements);
  CONF_RUN(test_bulk_concurrent_one_document);
}
