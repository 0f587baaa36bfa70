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
 * inside the plain one's -- which this caught.
 *
 * A second pair reads a collection's rules and indexes while another
 * thread replaces the rules: every reader must see one whole spec.  On
 * SQLite a rules change installs a new catalog and frees the old one when
 * its last reader lets go, so a reader that looked at the collection after
 * letting go read freed memory (ASan caught it in the job runner's effect
 * race). */
#include "conf.h"

#include "doc/doc.h" /* dtx__rules_step_enter: what the kit's steps do */

#include <pthread.h>
#include <string.h>

enum { ROUNDS = 400, SET_ROUNDS = 150 };

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

/* Replaces the rules of coll SET_ROUNDS times, alternating two specs whose
 * first immutable path is "a" or "b"; a long list of paths keeps a
 * reader's copy of them slow, so its read overlaps a change. */
typedef struct rules_setter {
  const char *coll;
  int done, failed;
} rules_setter_t;

static json_t *wide_spec(const char *first) {
  json_t *paths = json_pack("[s]", first);
  char p[16];
  for (int i = 0; i < 100; i++) {
    snprintf(p, sizeof p, "f%d", i);
    json_array_append_new(paths, json_string(p));
  }
  return json_pack("[{s:s,s:o}]", "scope", "plain", "immutable", paths);
}

static void *rules_setter(void *arg) {
  rules_setter_t *s = arg;
  json_t *spec[2] = {wide_spec("a"), wide_spec("b")};
  for (int i = 0; i < SET_ROUNDS && !s->failed; i++) {
    dtx_collection_rules_t r = {NULL, NULL, spec[i % 2]};
    s->failed = dtx_store_set_rules(conf_st, s->coll, &r) < 0;
  }
  json_decref(spec[0]);
  json_decref(spec[1]);
  __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

void conf_test_rules_read_while_set(void) {
  const char *c = conf_coll("rules_reread");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'D'}"), NULL), 0);
  rules_setter_t set = {c, 0, 0};
  pthread_t th;
  REQUIRE(pthread_create(&th, NULL, rules_setter, &set) == 0);
  int reads = 0, seen = 0, torn = 0, failed = 0;
  char detail[256] = "";
  while (!__atomic_load_n(&set.done, __ATOMIC_ACQUIRE)) {
    json_t *rules = NULL, *idx = NULL;
    int rc = dtx_store_get_rules(conf_st, c, &rules);
    if (rc == 0)
      rc = dtx_store_list_indexes(conf_st, c, &idx);
    if (rc < 0 && !failed++)
      snprintf(detail, sizeof detail, "%s: %s", dtx_errname(rc),
               dtx_errdetail());
    /* Before the setter's first change the transition is null; after it,
     * one of the two whole specs. */
    json_t *t = json_object_get(rules, "transition");
    const char *imm = json_string_value(json_array_get(
        json_object_get(json_array_get(t, 0), "immutable"), 0));
    if (rc == 0 && !json_is_null(t) &&
        !(imm && (!strcmp(imm, "a") || !strcmp(imm, "b"))) && !torn++)
      snprintf(detail, sizeof detail, "rules read as %.200s", JS(rules));
    seen += imm != NULL;
    reads++;
    json_decref(rules);
    json_decref(idx);
  }
  pthread_join(th, NULL);
  CHECKF(!set.failed, "the setter failed: %s", dtx_errdetail());
  CHECKF(!failed && !torn, "%d failed, %d torn reads of %d: %s", failed, torn,
         reads, detail);
  CHECKF(seen > 0, "none of %d reads saw the rules", reads);
}
