/* conf_rules_threads.c -- conformance: a rule of scope "plain" judges each
 * write by the thread that made it, whatever thread the store runs it on.
 *
 * Two threads of one process write one document of a collection whose
 * plain-scope rule keeps x immutable: one inside a pattern's step
 * (dtx__rules_step_enter, as the kit's steps are), every write of which
 * must pass, and one plain, every write of which must be refused.  On
 * SQLite the group commit runs the writes of concurrent threads in one
 * transaction on whichever thread leads it (store/sqlite/commit.c), so a
 * scope read from the running thread instead of the writing one lets a
 * plain write through inside the step's batch and refuses the step's
 * inside the plain one's -- which this caught. */
#include "conf.h"

#include "doc/doc.h" /* dtx__rules_step_enter: what the kit's steps do */

#include <pthread.h>

enum { ROUNDS = 400 };

typedef struct scope_thread {
  const char *coll;
  int in_step;
  int ok, refused, other; /* outcomes of its ROUNDS writes */
  char other_detail[256];
} scope_thread_t;

static void *scope_writer(void *arg) {
  scope_thread_t *t = arg;
  const char *saved = t->in_step ? dtx__rules_step_enter("p.step") : NULL;
  json_t *f = json_pack("{s:s}", "_id", "D");
  json_t *u = json_pack("{s:{s:i}}", "$inc", "x", 1);
  for (int i = 0; i < ROUNDS; i++) {
    dtx_update_result_t r = {0};
    int rc = dtx_store_update(conf_st, t->coll, f, u, NULL, &r);
    if (rc == 0 && r.modified == 1)
      t->ok++;
    else if (rc == DTX_EVALIDATION)
      t->refused++;
    else if (!t->other++)
      snprintf(t->other_detail, sizeof t->other_detail, "%s: %s",
               dtx_errname(rc), dtx_errdetail());
  }
  json_decref(f);
  json_decref(u);
  if (t->in_step)
    dtx__rules_step_leave(saved);
  return NULL;
}

void conf_test_rules_scope_threads(void) {
  const char *c = conf_coll("rules_threads");
  dtx_collection_rules_t r = {NULL, NULL,
                              JQ("[{'scope':'plain','immutable':['x']}]")};
  CHECK_RC(dtx_store_set_rules(conf_st, c, &r), 0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'D','x':0}"), NULL), 0);
  scope_thread_t t[2] = {{c, 1, 0, 0, 0, ""}, {c, 0, 0, 0, 0, ""}};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, scope_writer, &t[1]) == 0);
  scope_writer(&t[0]);
  pthread_join(th, NULL);
  CHECKF(t[0].ok == ROUNDS && t[0].refused == 0,
         "the step's writes: %d passed, %d refused as plain (of %d)", t[0].ok,
         t[0].refused, ROUNDS);
  CHECKF(t[1].ok == 0 && t[1].refused == ROUNDS,
         "the plain writes: %d passed, %d refused (of %d)", t[1].ok,
         t[1].refused, ROUNDS);
  CHECKF(!t[0].other && !t[1].other, "other outcomes: %s %s",
         t[0].other_detail, t[1].other_detail);
  json_t *d = conf_get(c, JQ("{'_id':'D'}"));
  CHECKF(json_integer_value(json_object_get(d, "x")) == t[0].ok,
         "x is %lld after %d step writes",
         (long long)json_integer_value(json_object_get(d, "x")), t[0].ok);
  json_decref(d);
}
