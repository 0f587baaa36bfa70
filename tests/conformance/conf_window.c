/* conf_window.c -- conformance: time-bounded writes (doctx.h,
 * "Time-bounded writes").
 *
 * An update or find_one_and_update/delete that carries not_after or
 * not_before is refused -- DTX_ESTALE past not_after, DTX_ESTATE before
 * not_before -- when the store's clock, read in the write's atomic step,
 * is outside them; nothing changes, no upsert is inserted.  A call that
 * matches nothing, or changes nothing, is not judged.  Each write of an
 * update of many is judged on its own, and a bulk operation as its single
 * call.  The bounds are checked (negative, or an empty window: EINVAL).
 * The job queue's exactly-once effects rest on this (docs/jobs.md): a
 * paused writer learns in the store that it came too late. */
#include "conf.h"

#include <string.h>
#include <time.h>

/* Far enough from now that neither a slow machine nor a store clock a
 * little off ours makes the verdict flip. */
#define HOUR (3600LL * 1000)

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *doc_of(const char *c, const char *id) {
  char f[160];
  snprintf(f, sizeof f, "{'_id':'%s'}", id);
  return conf_keep(conf_get(c, JQ(f)));
}

static void check_doc(const char *c, const char *id, const char *want) {
  json_t *d = doc_of(c, id);
  CHECKF(d && json_equal(d, JQ(want)), "%s: %s, want %s", id, JS(d), want);
}

/* update: past not_after is STALE, before not_before is STATE, both
 * naming the bound; inside the window it writes. */
static void test_window_update(void) {
  const char *c = conf_coll("window_update");
  REQUIRE(conf_seed(c, "[{'_id':'w','v':0}]") == 0);
  int64_t now = wall_ms();
  dtx_update_result_t res;
  dtx_update_opts_t o = {.not_after = now - HOUR};
  res.matched = 99;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'w'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), DTX_ESTALE);
  CHECK(res.matched == 0 && res.modified == 0);
  CHECKF(strstr(dtx_errdetail(), "not_after") &&
             strstr(dtx_errdetail(), "\"w\""),
         "detail: %s", dtx_errdetail());
  o = (dtx_update_opts_t){.not_before = now + HOUR};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'w'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), DTX_ESTATE);
  CHECKF(strstr(dtx_errdetail(), "not_before"), "detail: %s",
         dtx_errdetail());
  check_doc(c, "w", "{'_id':'w','v':0}");
  o = (dtx_update_opts_t){.not_before = now - HOUR, .not_after = now + HOUR};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'w'}"),
                            JQ("{'$set':{'v':2}}"), &o, &res), 0);
  CHECK(res.matched == 1 && res.modified == 1);
  check_doc(c, "w", "{'_id':'w','v':2}");
  /* Nothing matched, or nothing changed: no write, no verdict. */
  o = (dtx_update_opts_t){.not_after = now - HOUR};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'none'}"),
                            JQ("{'$set':{'v':3}}"), &o, &res), 0);
  CHECK(res.matched == 0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'w'}"),
                            JQ("{'$set':{'v':2}}"), &o, &res), 0);
  CHECK(res.matched == 1 && res.modified == 0);
  /* An upsert that would insert is a write too. */
  o.upsert = 1;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'up'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), DTX_ESTALE);
  CHECK(conf_count(c, JQ("{'_id':'up'}")) == 0);
  o.not_after = now + HOUR;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'up'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), 0);
  CHECK(conf_count(c, JQ("{'_id':'up'}")) == 1);
  json_decref(res.upserted_id); /* the caller's reference (doctx.h) */
}

/* find_one_and_update and find_one_and_delete take the bounds too. */
static void test_window_fam(void) {
  const char *c = conf_coll("window_fam");
  REQUIRE(conf_seed(c, "[{'_id':'f','v':0},{'_id':'g','v':0}]") == 0);
  int64_t now = wall_ms();
  json_t *out = conf_poison;
  dtx_fam_opts_t o = {.not_after = now - HOUR, .return_new = 1};
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'f'}"),
                                         JQ("{'$inc':{'v':1}}"), &o, &out),
           DTX_ESTALE);
  CHECK(out == NULL);
  out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'g'}"), &o,
                                         &out),
           DTX_ESTALE);
  CHECK(out == NULL);
  check_doc(c, "f", "{'_id':'f','v':0}");
  check_doc(c, "g", "{'_id':'g','v':0}");
  o = (dtx_fam_opts_t){.not_before = now + HOUR};
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'f'}"),
                                         JQ("{'$inc':{'v':1}}"), &o, &out),
           DTX_ESTATE);
  o = (dtx_fam_opts_t){.not_after = now + HOUR, .return_new = 1};
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'f'}"),
                                         JQ("{'$inc':{'v':1}}"), &o, &out),
           0);
  CHECKF(out && json_equal(out, JQ("{'_id':'f','v':1}")), "%s", JS(out));
  json_decref(out);
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'g'}"), &o,
                                         &out),
           0);
  json_decref(out);
  CHECK(conf_count(c, JQ("{'_id':'g'}")) == 0);
  /* No match: NOMATCH as always, not a verdict on the clock. */
  o.not_after = now - HOUR;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'none'}"),
                                         JQ("{'$inc':{'v':1}}"), &o, &out),
           DTX_ENOMATCH);
}

/* An update of many judges each document: past not_after the first
 * refusal stops it and nothing was written. */
static void test_window_many(void) {
  const char *c = conf_coll("window_many");
  REQUIRE(conf_seed(c, "[{'_id':1,'v':0},{'_id':2,'v':0}]") == 0);
  int64_t now = wall_ms();
  dtx_update_result_t res;
  dtx_update_opts_t o = {.many = 1, .not_after = now - HOUR};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{}"), JQ("{'$inc':{'v':1}}"), &o,
                            &res),
           DTX_ESTALE);
  CHECK(conf_count(c, JQ("{'v':0}")) == 2);
  o.not_after = now + HOUR;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{}"), JQ("{'$inc':{'v':1}}"), &o,
                            &res),
           0);
  CHECK(res.matched == 2 && res.modified == 2);
}

/* In a bulk write each operation is judged as its single call. */
static void test_window_bulk(void) {
  const char *c = conf_coll("window_bulk");
  REQUIRE(conf_seed(c, "[{'_id':'a','v':0},{'_id':'b','v':0}]") == 0);
  int64_t now = wall_ms();
  dtx_update_opts_t late = {.not_after = now - HOUR};
  dtx_fam_opts_t early = {.not_before = now + HOUR};
  dtx_update_opts_t fine = {.not_after = now + HOUR};
  dtx_bulk_op_t ops[3] = {
      {.kind = DTX_BULK_UPDATE_ONE, .coll = c, .filter = JQ("{'_id':'a'}"),
       .update = JQ("{'$inc':{'v':1}}"), .update_opts = &late},
      {.kind = DTX_BULK_FIND_ONE_AND_UPDATE, .coll = c,
       .filter = JQ("{'_id':'a'}"), .update = JQ("{'$inc':{'v':10}}"),
       .fam_opts = &early},
      {.kind = DTX_BULK_UPDATE_ONE, .coll = c, .filter = JQ("{'_id':'b'}"),
       .update = JQ("{'$inc':{'v':1}}"), .update_opts = &fine},
  };
  dtx_bulk_result_t r[3];
  dtx_store_bulk_write(conf_st, ops, 3, r);
  CHECKF(r[0].rc == DTX_ESTALE, "op 0: %s", dtx_errname(r[0].rc));
  CHECKF(r[1].rc == DTX_ESTATE, "op 1: %s", dtx_errname(r[1].rc));
  CHECKF(r[2].rc == 0 && r[2].modified == 1, "op 2: %s",
         dtx_errname(r[2].rc));
  dtx_bulk_results_clear(r, 3);
  check_doc(c, "a", "{'_id':'a','v':0}");
  check_doc(c, "b", "{'_id':'b','v':1}");
}

/* Bad bounds are refused before anything is written. */
static void test_window_args(void) {
  const char *c = conf_coll("window_args");
  REQUIRE(conf_seed(c, "[{'_id':'x','v':0}]") == 0);
  int64_t now = wall_ms();
  dtx_update_result_t res;
  dtx_update_opts_t o = {.not_after = -1};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'x'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), DTX_EINVAL);
  o = (dtx_update_opts_t){.not_before = now + HOUR, .not_after = now};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'x'}"),
                            JQ("{'$set':{'v':1}}"), &o, &res), DTX_EINVAL);
  dtx_fam_opts_t f = {.not_before = -5};
  json_t *out = NULL;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'x'}"),
                                         JQ("{'$set':{'v':1}}"), &f, &out),
           DTX_EINVAL);
  /* INT64_MAX is a bound like any other (never passed). */
  o = (dtx_update_opts_t){.not_after = INT64_MAX};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'x'}"),
                            JQ("{'$set':{'v':2}}"), &o, &res), 0);
  check_doc(c, "x", "{'_id':'x','v':2}");
}

void conf_run_window(void) {
  CONF_RUN(test_window_update);
  CONF_RUN(test_window_fam);
  CONF_RUN(test_window_many);
  CONF_RUN(test_window_bulk);
  CONF_RUN(test_window_args);
}
