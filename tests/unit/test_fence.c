/* test_fence.c -- the fenced-write step (src/store/fence.c) as a table.
 *
 * dtx__modify_apply is what both backends run on the matched document
 * inside their atomic step; each row gives the stored document, the
 * update (NULL: a delete), the fence and the expected outcome: the new
 * document, or DTX_EFENCED.  Rows with a malformed record (only a tampered
 * store can hold one: every API write checks it) must refuse every fenced
 * write, never guess.  The conformance suite (conf_fence.c) checks the
 * same rule through every backend. */
#include "testlib.h"

#include "store/store.h"

#include <string.h>

typedef struct fcase {
  const char *before;
  const char *update; /* NULL: delete */
  const char *name;   /* NULL: unfenced */
  int64_t token;
  int rc;
  const char *after; /* expected (with key order), NULL for delete/error */
  int changed;
} fcase_t;

static const fcase_t cases[] = {
    /* first fenced write records */
    {"{'_id':1,'v':0}", "{'$set':{'v':1}}", "L", 3, 0,
     "{'_id':1,'v':1,'_fence':{'L':3}}", 1},
    /* equal, larger, smaller */
    {"{'_id':1,'_fence':{'L':3}}", "{'$set':{'v':1}}", "L", 3, 0,
     "{'_id':1,'_fence':{'L':3},'v':1}", 1},
    {"{'_id':1,'_fence':{'L':3}}", "{'$set':{'v':1}}", "L", 4, 0,
     "{'_id':1,'_fence':{'L':4},'v':1}", 1},
    {"{'_id':1,'_fence':{'L':3}}", "{'$set':{'v':1}}", "L", 2, DTX_EFENCED,
     NULL, 0},
    /* no-op: same token changes nothing, a new token is recorded */
    {"{'_id':1,'v':1,'_fence':{'L':3}}", "{'$set':{'v':1}}", "L", 3, 0,
     "{'_id':1,'v':1,'_fence':{'L':3}}", 0},
    {"{'_id':1,'v':1,'_fence':{'L':3}}", "{'$set':{'v':1}}", "L", 9, 0,
     "{'_id':1,'v':1,'_fence':{'L':9}}", 1},
    /* other locks are independent */
    {"{'_id':1,'_fence':{'M':99}}", "{'$set':{'v':1}}", "L", 1, 0,
     "{'_id':1,'_fence':{'M':99,'L':1},'v':1}", 1},
    /* replacement keeps the record, unfenced or fenced */
    {"{'_id':1,'a':1,'_fence':{'L':3}}", "{'b':2}", NULL, 0, 0,
     "{'_id':1,'b':2,'_fence':{'L':3}}", 1},
    {"{'_id':1,'a':1,'_fence':{'L':3}}", "{'b':2}", "L", 5, 0,
     "{'_id':1,'b':2,'_fence':{'L':5}}", 1},
    {"{'_id':1,'a':1,'_fence':{'L':3}}", "{'a':1}", NULL, 0, 0,
     "{'_id':1,'a':1,'_fence':{'L':3}}", 0},
    /* deletes: judged, nothing recorded */
    {"{'_id':1,'_fence':{'L':3}}", NULL, "L", 2, DTX_EFENCED, NULL, 0},
    {"{'_id':1,'_fence':{'L':3}}", NULL, "L", 3, 0, NULL, 1},
    {"{'_id':1}", NULL, "L", 1, 0, NULL, 1},
    /* unfenced writes are not judged */
    {"{'_id':1,'_fence':{'L':3}}", "{'$inc':{'v':1}}", NULL, 0, 0,
     "{'_id':1,'_fence':{'L':3},'v':1}", 1},
    /* tampered records refuse fenced writes of that lock */
    {"{'_id':1,'_fence':5}", "{'$set':{'v':1}}", "L", 9, DTX_EFENCED, NULL, 0},
    {"{'_id':1,'_fence':{'L':'7'}}", "{'$set':{'v':1}}", "L", 9, DTX_EFENCED,
     NULL, 0},
    {"{'_id':1,'_fence':{'L':7.5}}", NULL, "L", 9, DTX_EFENCED, NULL, 0},
    {"{'_id':1,'_fence':[1]}", NULL, "L", 9, DTX_EFENCED, NULL, 0},
    /* ... but not another lock's, whose entry is absent */
    {"{'_id':1,'_fence':{'M':'x'}}", "{'$set':{'v':1}}", "L", 9, 0,
     "{'_id':1,'_fence':{'M':'x','L':9},'v':1}", 1},
};

static void test_fence_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const fcase_t *t = &cases[i];
    json_t *before = JQNEW(t->before);
    char *before_text = JDUMP(before);
    json_t *uspec = t->update ? JQNEW(t->update) : NULL;
    dtx__update_t *u = NULL;
    if (uspec && dtx__update_compile(uspec, &u) != 0) {
      CHECKF(0, "row %zu: update does not compile", i);
      json_decref(before);
      json_decref(uspec);
      free(before_text);
      continue;
    }
    dtx__modify_t m = {.coll = "c", .update_spec = uspec, .update = u,
                       .fence_name = t->name, .fence_token = t->token};
    json_t *after = NULL;
    int changed = -1;
    int rc = dtx__modify_apply(&m, before, 0, &after, &changed);
    CHECKF(rc == t->rc, "row %zu: rc %s (%s), want %s", i, dtx_errname(rc),
           dtx_errdetail(), dtx_errname(t->rc));
    if (rc == 0 && t->after) {
      char *got = JDUMP(after);
      json_t *w = JQNEW(t->after);
      char *want = JDUMP(w);
      CHECKF(strcmp(got, want) == 0, "row %zu: %s, want %s", i, got, want);
      CHECKF(changed == t->changed, "row %zu: changed %d", i, changed);
      free(got);
      free(want);
      json_decref(w);
    } else {
      CHECKF(after == NULL, "row %zu: a document on %s", i, dtx_errname(rc));
    }
    if (rc == DTX_EFENCED)
      CHECKF(strstr(dtx_errdetail(), "c 1") != NULL, "row %zu: detail %s", i,
             dtx_errdetail());
    /* The new document shares what it did not change with the stored
     * one (dtx__update_apply): recording the token must not reach it. */
    char *still = JDUMP(before);
    CHECKF(strcmp(still, before_text) == 0, "row %zu: before changed: %s", i,
           still);
    free(still);
    free(before_text);
    json_decref(after);
    json_decref(before);
    json_decref(uspec);
    dtx__update_free(u);
  }
}

/* The argument and reservation checks store.c makes. */
static void test_fence_checks(void) {
  CHECK_RC(dtx__fence_check_args(NULL, 0), 0);
  CHECK_RC(dtx__fence_check_args("job:7.a-b_c", 1), 0);
  CHECK_RC(dtx__fence_check_args("", 1), DTX_EINVAL);
  CHECK_RC(dtx__fence_check_args("L", 0), DTX_EINVAL);
  CHECK_RC(dtx__fence_check_args("a$b", 1), DTX_EINVAL);
  static const char *const reserved[] = {
      "{'$set':{'_fence':1}}", "{'$unset':{'_fence.L':1}}",
      "{'$rename':{'a':'_fence.x'}}", "{'_fence':{}}"};
  for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
    json_t *u = JQNEW(reserved[i]);
    CHECK_RC(dtx__fence_check_update(u), DTX_EBADUPDATE);
    json_decref(u);
  }
  json_t *ok = JQNEW("{'$set':{'_fencex':1,'a._fence':2}}");
  CHECK_RC(dtx__fence_check_update(ok), 0);
  json_decref(ok);
}

int main(void) {
  TEST_RUN(test_fence_table);
  TEST_RUN(test_fence_checks);
  return TEST_DONE();
}
