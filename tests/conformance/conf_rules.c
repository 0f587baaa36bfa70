/* conf_rules.c -- conformance: collection validators and delete guards.
 *
 * Every write that stores a document -- insert, insert_many, update (one,
 * many, upsert, replacement), find_one_and_update (also upserting) -- is
 * refused with DTX_EVALIDATION when its result fails the collection's
 * validator, and leaves the collection exactly as it was; every delete
 * (one, many, find_one_and_delete) is refused when the document does not
 * match the delete guard.  bypass_validation lets each through.  The rules
 * live in the store: they survive closing and reopening it, a second
 * handle (another process) obeys them from its next write on, and a
 * writer racing a change of rules never commits a document the rules in
 * force at its commit refuse.  Dropping the collection drops its rules.
 * A transition rule judges each update by the document before and after
 * it, and an insert by its "insert" clause; one of scope "plain" judges
 * only writes made outside a pattern's steps (the generic commands). */
#include "conf.h"

#include "doc/doc.h" /* dtx__rules_step_enter: what the kit's steps do */

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

/* The account shape of the transfer protocol, in both languages. */
#define ACCOUNT_VALIDATOR                                                    \
  "{'$jsonSchema':{'bsonType':'object','required':['_id','balance'],"       \
  "'properties':{'_id':{'bsonType':'string'},'balance':{'bsonType':'long'}," \
  "'min_balance':{'bsonType':['long','null']}}},'balance':{'$gte':0}}"

static int set_rules(const char *coll, const char *validator,
                     const char *guard) {
  dtx_collection_rules_t r = {validator ? JQ(validator) : NULL,
                              guard ? JQ(guard) : NULL, NULL};
  return dtx_store_set_rules(conf_st, coll, &r);
}

static int set_transition(const char *coll, const char *transition) {
  dtx_collection_rules_t r = {NULL, NULL, JQ(transition)};
  return dtx_store_set_rules(conf_st, coll, &r);
}

/* The whole collection, for "nothing changed" comparisons (a new
 * reference, owned by the collector). */
static json_t *snapshot(const char *coll) {
  return conf_keep(conf_find(coll, NULL, NULL));
}

static void check_same(const char *coll, const json_t *before,
                       const char *what) {
  json_t *now = snapshot(coll);
  CHECKF(now && json_equal(now, before), "%s changed %s: %s -> %s", what,
         coll, JS(before), JS(now));
}

/* The detail of a refusal names the collection and the _id first. */
static void check_detail(const char *coll, const char *id, const char *has) {
  char want[200];
  snprintf(want, sizeof want, "%s '%s': ", coll, id);
  const char *d = dtx_errdetail();
  CHECKF(strncmp(d, want, strlen(want)) == 0, "detail '%s' does not start "
         "with '%s'", d, want);
  if (has)
    CHECKF(strstr(d, has) != NULL, "detail '%s' lacks '%s'", d, has);
}

static void test_rules_set_get_replace_remove(void) {
  const char *c = conf_coll("rules_get");
  json_t *out = conf_poison;
  /* A missing collection has no rules. */
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(out, JQ("{'validator':null,'delete_guard':null,'transition':null}")), "%s",
         JS(out));
  json_decref(out);
  /* Setting them creates the collection. */
  CHECK_RC(set_rules(c, "{'a':{'$gte':1}}", "{'b':0}"), 0);
  json_t *names = NULL;
  CHECK_RC(dtx_store_list_collections(conf_st, &names), 0);
  conf_keep(names);
  int listed = 0;
  for (size_t i = 0; i < json_array_size(names); i++)
    listed |= strcmp(json_string_value(json_array_get(names, i)), c) == 0;
  CHECKF(listed, "%s not in %s", c, JS(names));
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(out, JQ("{'validator':{'a':{'$gte':1}},'delete_guard':"
                            "{'b':0},'transition':null}")),
         "%s", JS(out));
  json_decref(out);
  /* Replacing replaces both; {} and NULL are none. */
  CHECK_RC(set_rules(c, "{'$jsonSchema':{'required':['a']}}", "{}"), 0);
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(out, JQ("{'validator':{'$jsonSchema':{'required':['a']}},"
                            "'delete_guard':null,'transition':null}")),
         "%s", JS(out));
  json_decref(out);
  /* An invalid rule is refused and changes nothing. */
  CHECK_RC(set_rules(c, "{'a':{'$bogus':1}}", NULL), DTX_EBADQUERY);
  CHECKF(strstr(dtx_errdetail(), "$bogus"), "%s", dtx_errdetail());
  CHECK_RC(set_rules(c, "{'$jsonSchema':{'patternProperties':{}}}", NULL),
           DTX_EBADQUERY);
  CHECKF(strstr(dtx_errdetail(), "'patternProperties'"), "%s",
         dtx_errdetail());
  CHECK_RC(set_rules(c, "{'$jsonSchema':{'properties':{'s':{'pattern':'('}}}}",
                     NULL),
           DTX_EBADQUERY);
  CHECK_RC(set_rules(c, NULL, "[1]"), DTX_EBADQUERY);
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(out, JQ("{'validator':{'$jsonSchema':{'required':['a']}},"
                            "'delete_guard':null,'transition':null}")),
         "%s", JS(out));
  json_decref(out);
  CHECK_RC(dtx_store_set_rules(conf_st, c, NULL), 0);
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(out, JQ("{'validator':null,'delete_guard':null,'transition':null}")), "%s",
         JS(out));
  json_decref(out);
  /* A pattern (PCRE2) validator, checked in the store's atomic step. */
  CHECK_RC(set_rules(c, "{'$jsonSchema':{'properties':{'cur':"
                        "{'pattern':'^[A-Z]{3}$'}}}}", NULL),
           0);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'p1','cur':'eur'}"), NULL),
           DTX_EVALIDATION);
  CHECKF(strstr(dtx_errdetail(), "cur does not match /^[A-Z]{3}$/"), "%s",
         dtx_errdetail());
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'p1','cur':'EUR'}"), NULL),
           0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'p1'}"),
                            JQ("{'$set':{'cur':'EURO'}}"), NULL, NULL),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_set_rules(conf_st, c, NULL), 0);
  /* Removing the rules of a missing collection is no error, and creates
   * nothing. */
  CHECK_RC(dtx_store_set_rules(conf_st, conf_coll("rules_none"), NULL), 0);
  CHECK_RC(dtx_store_get_rules(conf_st, "bad name", &out), DTX_EINVAL);
  CHECK(out == NULL);
}

/* Each kind of write, with a result the validator refuses: VALIDATION,
 * nothing changed; then the same kinds with valid results go through. */
static void test_validator_refuses_every_write(void) {
  const char *c = conf_coll("rules_writes");
  REQUIRE(set_rules(c, ACCOUNT_VALIDATOR, NULL) == 0);
  REQUIRE(conf_seed(c, "[{'_id':'A','balance':100,'min_balance':0}]") == 0);
  json_t *before = snapshot(c);
  json_t *id = conf_poison;

  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'B','balance':1.5}"), &id),
           DTX_EVALIDATION);
  CHECK(id == NULL);
  check_detail(c, "B", "balance is double, must be long ($jsonSchema "
                       "properties.balance.bsonType)");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'B','balance':-5}"), NULL),
           DTX_EVALIDATION);
  check_detail(c, "B", "the validator condition {\"balance\":{\"$gte\":0}}");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':7,'balance':5}"), NULL),
           DTX_EVALIDATION);
  CHECKF(strstr(dtx_errdetail(), "_id is long, must be string"), "%s",
         dtx_errdetail());
  check_same(c, before, "insert");

  size_t n = 99;
  CHECK_RC(dtx_store_insert_many(conf_st, c,
                                 JQ("[{'_id':'C','balance':1},{'_id':'D'},"
                                    "{'_id':'E','balance':1}]"),
                                 &n, NULL),
           DTX_EVALIDATION);
  CHECKF(n == 1, "inserted %zu before the refused one", n);
  CHECKF(strstr(dtx_errdetail(), "missing required field 'balance'"), "%s",
         dtx_errdetail());
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'C'}"), 0, NULL), 0);
  check_same(c, before, "insert_many");

  dtx_update_result_t r;
  static const char *const bad_updates[] = {
      "{'$set':{'min_balance':0.0}}",
      "{'$set':{'min_balance':'50'}}",
      "{'$inc':{'balance':-101}}",
      "{'$unset':{'balance':''}}",
      "{'_id':'A','balance':'100'}", /* a replacement */
  };
  for (size_t i = 0; i < sizeof bad_updates / sizeof *bad_updates; i++) {
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                              JQ(bad_updates[i]), NULL, &r),
             DTX_EVALIDATION);
    check_detail(c, "A", NULL);
    dtx_update_opts_t many = {.many = 1};
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{}"), JQ(bad_updates[i]), &many,
                              &r),
             i == 4 ? DTX_EBADUPDATE : DTX_EVALIDATION);
    json_t *doc = conf_poison;
    CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'A'}"),
                                           JQ(bad_updates[i]), NULL, &doc),
             DTX_EVALIDATION);
    CHECK(doc == NULL);
  }
  check_same(c, before, "update");

  dtx_update_opts_t up = {.upsert = 1};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'U'}"),
                            JQ("{'$set':{'balance':'x'}}"), &up, &r),
           DTX_EVALIDATION);
  check_detail(c, "U", "balance is string");
  CHECK(r.upserted_id == NULL);
  dtx_fam_opts_t fup = {.upsert = 1, .return_new = 1};
  json_t *doc = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'U'}"),
                                         JQ("{'$setOnInsert':{'x':1}}"), &fup,
                                         &doc),
           DTX_EVALIDATION);
  CHECK(doc == NULL);
  check_detail(c, "U", "missing required field 'balance'");
  check_same(c, before, "upsert");

  /* Valid writes of each kind go through. */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'B','balance':0}"), NULL),
           0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                            JQ("{'$inc':{'balance':-100}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'U'}"),
                            JQ("{'$set':{'balance':3}}"), &up, &r),
           0);
  json_decref(r.upserted_id);
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'B'}"),
                                         JQ("{'_id':'B','balance':9}"), NULL,
                                         &doc),
           0);
  json_decref(doc);
  CHECK(conf_count(c, NULL) == 3);
}

/* validationLevel strict: a document stored before the validator (or
 * with bypass) stays as it is, but an update of it must make it valid.  An
 * update that changes nothing writes nothing and passes. */
static void test_invalid_documents_stay_until_updated(void) {
  const char *c = conf_coll("rules_strict");
  REQUIRE(conf_seed(c, "[{'_id':'A','balance':'old'}]") == 0);
  REQUIRE(set_rules(c, ACCOUNT_VALIDATOR, NULL) == 0);
  json_t *d = conf_get(c, JQ("{'_id':'A'}"));
  CHECKF(d && json_equal(d, JQ("{'_id':'A','balance':'old'}")), "%s", JS(d));
  json_decref(d);
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                            JQ("{'$set':{'note':1}}"), NULL, &r),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                            JQ("{'$set':{'balance':'old'}}"), NULL, &r),
           0);
  CHECK(r.matched == 1 && r.modified == 0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                            JQ("{'$set':{'balance':5}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
}

static void test_bypass_validation(void) {
  const char *c = conf_coll("rules_bypass");
  REQUIRE(set_rules(c, ACCOUNT_VALIDATOR, "{'balance':0}") == 0);
  dtx_insert_opts_t io = {.bypass_validation = 1};
  CHECK_RC(dtx_store_insert_ex(conf_st, c, JQ("{'_id':'A','balance':1.5}"),
                               &io, NULL),
           0);
  size_t n = 0;
  CHECK_RC(dtx_store_insert_many_ex(conf_st, c,
                                    JQ("[{'_id':'B'},{'_id':'C','balance':"
                                       "-1}]"),
                                    &io, &n, NULL),
           0);
  CHECK(n == 2);
  dtx_update_opts_t uo = {.bypass_validation = 1};
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'B'}"),
                            JQ("{'$set':{'balance':'x'}}"), &uo, &r),
           0);
  CHECK(r.modified == 1);
  uo.upsert = 1;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'D'}"),
                            JQ("{'$set':{'balance':-4}}"), &uo, &r),
           0);
  CHECK(json_equal(r.upserted_id, JQ("'D'")));
  json_decref(r.upserted_id);
  dtx_fam_opts_t fo = {.bypass_validation = 1, .return_new = 1};
  json_t *doc = NULL;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'A'}"),
                                         JQ("{'$set':{'min_balance':'z'}}"),
                                         &fo, &doc),
           0);
  CHECKF(json_equal(json_object_get(doc, "min_balance"), JQ("'z'")), "%s",
         JS(doc));
  json_decref(doc);
  /* Without bypass the same kind of write is still refused: the option
   * is per call. */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'E','balance':1.5}"),
                            NULL),
           DTX_EVALIDATION);
  CHECK(conf_count(c, NULL) == 4);
}

static void test_delete_guard(void) {
  const char *c = conf_coll("rules_guard");
  REQUIRE(set_rules(c, NULL, "{'balance':0,'pending':{'$size':0}}") == 0);
  REQUIRE(conf_seed(c, "[{'_id':'A','balance':0,'pending':[]},"
                       "{'_id':'B','balance':30,'pending':[]},"
                       "{'_id':'C','balance':0,'pending':['t1']},"
                       "{'_id':'D','balance':0,'pending':[]}]") == 0);
  json_t *before = snapshot(c);
  int64_t n = 99;
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'B'}"), 0, &n),
           DTX_EVALIDATION);
  CHECK(n == 0);
  check_detail(c, "B", "delete refused: the delete_guard condition "
                       "{\"balance\":0} is not met");
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'C'}"), 0, NULL),
           DTX_EVALIDATION);
  check_detail(c, "C", "pending");
  json_t *doc = conf_poison;
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'B'}"), NULL,
                                         &doc),
           DTX_EVALIDATION);
  CHECK(doc == NULL);
  check_same(c, before, "delete");
  /* The guard does not judge inserts or updates. */
  dtx_update_result_t r;
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'D'}"),
                            JQ("{'$set':{'balance':1}}"), NULL, &r),
           0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'D'}"),
                            JQ("{'$set':{'balance':0}}"), NULL, &r),
           0);
  /* deleteMany goes in natural order and stops at the first refusal; the
   * ones before it stay deleted and are counted. */
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{}"), 1, &n), DTX_EVALIDATION);
  CHECKF(n == 1, "deleted %lld", (long long)n);
  CHECK(conf_count(c, NULL) == 3);
  CHECK(conf_count(c, JQ("{'_id':'A'}")) == 0);
  /* A document that matches may go; bypass lets any go. */
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'D'}"), NULL,
                                         &doc),
           0);
  json_decref(doc);
  dtx_delete_opts_t del = {.many = 1, .bypass_validation = 1};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{}"), &del, &n), 0);
  CHECK(n == 2);
  dtx_fam_opts_t fo = {.bypass_validation = 1};
  REQUIRE(conf_seed(c, "[{'_id':'B','balance':30,'pending':[]}]") == 0);
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'B'}"), &fo,
                                         &doc),
           0);
  json_decref(doc);
  CHECK(conf_count(c, NULL) == 0);
}

static void test_rules_survive_reopen_and_drop_removes_them(void) {
  const char *c = conf_coll("rules_reopen");
  REQUIRE(set_rules(c, ACCOUNT_VALIDATOR, "{'balance':0}") == 0);
  REQUIRE(conf_seed(c, "[{'_id':'A','balance':5}]") == 0);
  if (conf_store_is_private()) {
    conf_skip("a private store does not survive closing");
  } else {
    conf_store_release();
    conf_store_reacquire();
  }
  json_t *out = NULL;
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(json_object_get(out, "delete_guard"), JQ("{'balance':0}")),
         "%s", JS(out));
  json_decref(out);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'B'}"), NULL),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'A'}"), 0, NULL),
           DTX_EVALIDATION);
  /* A drop would delete A without asking the guard: refused while the
   * guarded collection holds documents, nothing changed; bypassing
   * validation drops it, and its rules with it. */
  CHECK_RC(dtx_store_drop_collection(conf_st, c), DTX_EVALIDATION);
  CHECKF(strstr(dtx_errdetail(), "has a delete guard and holds 1 documents")
         != NULL, "detail '%s'", dtx_errdetail());
  CHECK(conf_count(c, NULL) == 1);
  dtx_drop_opts_t dro = {.bypass_validation = 1};
  CHECK_RC(dtx_store_drop_collection_ex(conf_st, c, &dro), 0);
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(out, JQ("{'validator':null,'delete_guard':null,'transition':null}")), "%s",
         JS(out));
  json_decref(out);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'B'}"), NULL), 0);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'B'}"), 0, NULL), 0);
  /* An empty guarded collection drops without a bypass. */
  REQUIRE(set_rules(c, NULL, "{'balance':0}") == 0);
  CHECK_RC(dtx_store_drop_collection(conf_st, c), 0);
}

/* A second handle -- as another process would -- that has already
 * written to the collection (so it has the catalog cached) obeys new
 * rules from its very next write, and their removal too. */
static void test_second_handle_sees_rules_at_once(void) {
  if (conf_store_is_private()) {
    conf_skip("a private store has no second handle");
    return;
  }
  const char *c = conf_coll("rules_second");
  dtx_store_t *two = NULL;
  REQUIRE(dtx_store_open(conf_uri, &two) == 0);
  CHECK_RC(dtx_store_insert(two, c, JQ("{'_id':'A','balance':1}"), NULL), 0);
  CHECK_RC(dtx_store_insert(two, c, JQ("{'_id':'B','balance':1}"), NULL), 0);
  json_t *d = NULL;
  CHECK_RC(dtx_store_find(two, c, NULL, NULL, &d), 0);
  json_decref(d);
  for (int round = 0; round < 3; round++) {
    CHECK_RC(set_rules(c, ACCOUNT_VALIDATOR, "{'balance':0}"), 0);
    dtx_update_result_t r;
    CHECK_RC(dtx_store_update(two, c, JQ("{'_id':'A'}"),
                              JQ("{'$set':{'balance':-1}}"), NULL, &r),
             DTX_EVALIDATION);
    CHECK_RC(dtx_store_insert(two, c, JQ("{'_id':'X','balance':0.5}"), NULL),
             DTX_EVALIDATION);
    CHECK_RC(dtx_store_delete(two, c, JQ("{'_id':'B'}"), 0, NULL),
             DTX_EVALIDATION);
    CHECK_RC(dtx_store_set_rules(conf_st, c, NULL), 0);
    CHECK_RC(dtx_store_update(two, c, JQ("{'_id':'A'}"),
                              JQ("{'$set':{'balance':-1}}"), NULL, &r),
             0);
    CHECK_RC(dtx_store_update(two, c, JQ("{'_id':'A'}"),
                              JQ("{'$set':{'balance':1}}"), NULL, &r),
             0);
  }
  dtx_store_close(two);
  CHECK(conf_count(c, NULL) == 2);
}

/* ---- a change of rules racing writers ------------------------------------------ */

enum { NWRITERS = 4 };

typedef struct race_job {
  const char *coll;
  conf_barrier_t *bar;
  int fd;      /* report pipe, write end */
  int stop_fd; /* read end: EOF when the parent has done its part */
  int stop_w;  /* the write end, which the child closes at once */
  unsigned seed;
} race_job_t;

/* 1 once the parent closed the stop pipe. */
static int stopped(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0;
}

typedef struct race_report {
  int64_t ok, refused, errors;
} race_report_t;

/* Writes v = "ok" or "bad" at random into the one counter document, with
 * its commit order recorded in the document itself: n counts the writes
 * and log lists each write's v, in the order they committed. */
static int race_writer(void *arg) {
  race_job_t *j = arg;
  race_report_t rep = {0, 0, 0};
  close(j->stop_w);
  dtx_store_t *st = NULL;
  if (dtx_store_open(conf_uri, &st) != 0 || conf_barrier_child(j->bar) != 0) {
    CONF_CHILD_FAIL("open or barrier failed");
    return 1;
  }
  json_t *f = json_pack("{s:s}", "_id", "ctr");
  json_t *ok = json_pack("{s:{s:i},s:{s:s},s:{s:s}}", "$inc", "n", 1, "$set",
                         "v", "ok", "$push", "log", "ok");
  json_t *bad = json_pack("{s:{s:i},s:{s:s},s:{s:s}}", "$inc", "n", 1, "$set",
                          "v", "bad", "$push", "log", "bad");
  unsigned s = j->seed;
  while (!stopped(j->stop_fd)) {
    s = s * 1103515245u + 12345u;
    int is_bad = (s >> 16) & 1;
    json_t *out = NULL;
    int rc = dtx_store_find_one_and_update(st, j->coll, f, is_bad ? bad : ok,
                                           NULL, &out);
    json_decref(out);
    if (rc == 0)
      rep.ok++;
    else if (rc == DTX_EVALIDATION && is_bad)
      rep.refused++;
    else {
      rep.errors++;
      CONF_CHILD_FAIL("write: %s (%s)", dtx_errname(rc), dtx_errdetail());
    }
  }
  json_decref(f);
  json_decref(ok);
  json_decref(bad);
  dtx_store_close(st);
  ssize_t w = write(j->fd, &rep, sizeof rep);
  close(j->fd);
  close(j->stop_fd);
  return w == (ssize_t)sizeof rep && rep.errors == 0 ? 0 : 1;
}

static int64_t read_n(const char *c) {
  json_t *d = conf_get(c, JQ("{'_id':'ctr'}"));
  int64_t n = json_integer_value(json_object_get(d, "n"));
  json_decref(d);
  return d ? n : -1;
}

/* Writers in other processes keep writing while this one turns a
 * validator {v: "ok"} on and off.  Between reading n after a switch-on
 * returned and reading it before the next switch-off began, every write
 * that committed must have written "ok" -- whatever rules the writer had
 * seen before.  A writer deciding on rules it cached would commit "bad"
 * there.  The switching goes on for run_ms, and longer (up to 60 s) on a
 * slow machine until enough writes fell inside the windows. */
static void test_rules_change_races_writers(void) {
  if (conf_store_is_private()) {
    conf_skip("a private store cannot be shared with other processes");
    return;
  }
  const char *c = conf_coll("rules_race");
  REQUIRE(conf_seed(c, "[{'_id':'ctr','n':0,'v':'ok','log':[]}]") == 0);
  int64_t run_ms = conf_quick ? 1500 : 4000;
  conf_barrier_t bar;
  int rp[2], sp[2];
  REQUIRE(conf_barrier_init(&bar) == 0 && pipe(rp) == 0 && pipe(sp) == 0);
  race_job_t jobs[NWRITERS];
  pid_t pids[NWRITERS];
  conf_store_release();
  for (int i = 0; i < NWRITERS; i++) {
    jobs[i] = (race_job_t){c, &bar, rp[1], sp[0], sp[1],
                           (unsigned)conf_random()};
    pids[i] = conf_fork(race_writer, &jobs[i]);
  }
  close(rp[1]);
  close(sp[0]);
  conf_store_reacquire();
  CHECK(conf_barrier_release(&bar, NWRITERS) == 0);
  enum { MAXWIN = 400 };
  static int64_t on[MAXWIN], off[MAXWIN];
  int nwin = 0;
  int64_t t0 = conf_now_ms(), inside = 0;
  while (nwin < MAXWIN && (conf_now_ms() - t0 < run_ms ||
                           (inside < 40 && conf_now_ms() - t0 < 60000))) {
    CHECK_RC(set_rules(c, "{'v':'ok'}", NULL), 0);
    on[nwin] = read_n(c);
    usleep(40000);
    off[nwin] = read_n(c);
    inside += off[nwin] - on[nwin];
    nwin++;
    CHECK_RC(dtx_store_set_rules(conf_st, c, NULL), 0);
    usleep(40000);
  }
  close(sp[1]); /* the writers stop */
  race_report_t sum = {0, 0, 0};
  for (int i = 0; i < NWRITERS; i++) {
    race_report_t r;
    ssize_t got;
    while ((got = read(rp[0], &r, sizeof r)) < 0 && errno == EINTR)
      ;
    if (got == (ssize_t)sizeof r) {
      sum.ok += r.ok;
      sum.refused += r.refused;
      sum.errors += r.errors;
    }
  }
  for (int i = 0; i < NWRITERS; i++)
    CHECKF(conf_wait(pids[i]) == 0, "writer %d failed", i);
  close(rp[0]);
  conf_barrier_close(&bar);
  json_t *d = conf_get(c, JQ("{'_id':'ctr'}"));
  REQUIRE(d != NULL);
  conf_keep(d);
  json_t *log = json_object_get(d, "log");
  CHECKF((int64_t)json_array_size(log) ==
             json_integer_value(json_object_get(d, "n")) &&
             json_array_size(log) == (size_t)sum.ok,
         "log %zu entries, n %lld, writers counted %lld",
         json_array_size(log),
         (long long)json_integer_value(json_object_get(d, "n")),
         (long long)sum.ok);
  int64_t covered = 0, bad_total = 0, violations = 0;
  for (size_t i = 0; i < json_array_size(log); i++)
    bad_total += strcmp(json_string_value(json_array_get(log, i)), "bad") == 0;
  for (int w = 0; w < nwin; w++) {
    for (int64_t k = on[w] + 1; k <= off[w]; k++) {
      covered++;
      const char *v = json_string_value(json_array_get(log, (size_t)(k - 1)));
      if (!v || strcmp(v, "ok") != 0) {
        violations++;
        if (violations <= 3)
          CHECKF(0, "write %lld committed '%s' inside window %d (%lld, %lld] "
                 "with the validator on",
                 (long long)k, v ? v : "?", w, (long long)on[w],
                 (long long)off[w]);
      }
    }
  }
  CHECKF(violations == 0, "%lld writes broke the rules in force",
         (long long)violations);
  /* The test must have exercised both sides of the race. */
  CHECKF(nwin >= 3 && covered > 0 && sum.refused > 0 && bad_total > 0,
         "windows %d, writes inside them %lld, refused %lld, bad committed "
         "while off %lld",
         nwin, (long long)covered, (long long)sum.refused,
         (long long)bad_total);
  printf("     rules race: %d windows, %lld writes inside, %lld refused, "
         "%lld ok\n",
         nwin, (long long)covered, (long long)sum.refused, (long long)sum.ok);
}

/* A transition rule judges an update by the document before and after
 * it: immutable fields, increasing numbers and the allowed moves, on
 * every kind of update (one, many, replacement, find_one_and_update, an
 * upsert that matched); inserts and deletes are not updates; bypass skips
 * it; a bad rule is refused naming the key. */
#define TRANSITION                                                           \
  "{'immutable':['payer','terms.rate'],'increasing':['token'],"             \
  "'moves':[{'name':'open->open','from':{'s':'open'},'to':{'s':'open'}},"   \
  "{'name':'open->held','from':{'s':'open'},'to':{'s':'held'}},"            \
  "{'from':{'s':'held'},'to':{'s':'done'}}]}"

static void test_transition_rule(void) {
  const char *c = conf_coll("rules_trans");
  json_t *out = conf_poison;
  CHECK_RC(set_transition(c, TRANSITION), 0);
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(json_object_get(out, "transition"), JQ(TRANSITION)), "%s",
         JS(out));
  json_decref(out);
  REQUIRE(conf_seed(c, "[{'_id':'X','s':'open','payer':'alice',"
                       "'terms':{'rate':5},'token':3}]") == 0);
  json_t *before = snapshot(c);
  static const struct {
    const char *update, *why;
  } bad[] = {
      {"{'$set':{'payer':'bob'}}", "payer may not change (transition "
                                   "immutable)"},
      {"{'$unset':{'payer':''}}", "payer may not change"},
      {"{'$set':{'terms.rate':5.0}}", "terms.rate may not change"},
      {"{'$set':{'terms':{}}}", "terms.rate may not change"},
      {"{'$inc':{'token':-1}}", "token may not decrease: 3 -> 2 (transition "
                                "increasing)"},
      {"{'$unset':{'token':''}}", "token may not decrease: 3 -> missing"},
      {"{'$set':{'token':'9'}}", "token may not decrease"},
      {"{'$set':{'s':'done'}}", "the change fits no allowed move (transition "
                                "moves; allowed from this state: "
                                "open->open, open->held)"},
      {"{'_id':'X','s':'held','payer':'bob','terms':{'rate':5},'token':3}",
       "payer may not change"},
  };
  dtx_update_result_t r;
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                              JQ(bad[i].update), NULL, &r),
             DTX_EVALIDATION);
    check_detail(c, "X", bad[i].why);
    json_t *doc = conf_poison;
    CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'X'}"),
                                           JQ(bad[i].update), NULL, &doc),
             DTX_EVALIDATION);
    CHECK(doc == NULL);
    check_detail(c, "X", bad[i].why);
    if (bad[i].update[2] == '$') {
      dtx_update_opts_t many = {.many = 1};
      CHECK_RC(dtx_store_update(conf_st, c, JQ("{}"), JQ(bad[i].update),
                                &many, &r),
               DTX_EVALIDATION);
      dtx_update_opts_t up = {.upsert = 1};
      CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                                JQ(bad[i].update), &up, &r),
               DTX_EVALIDATION);
    }
  }
  check_same(c, before, "a refused transition");
  /* The allowed moves go, one after the other; a counter may grow. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$inc':{'token':1},'$set':{'note':1}}"),
                            NULL, &r),
           0);
  CHECK(r.modified == 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'held'}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'open'}}"), NULL, &r),
           DTX_EVALIDATION);
  check_detail(c, "X", "allowed from this state: #3)");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'done'}}"), NULL, &r),
           0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'open'}}"), NULL, &r),
           DTX_EVALIDATION);
  check_detail(c, "X", "none is allowed from this state)");
  /* A change that changes nothing writes nothing and is not judged. */
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'done'}}"), NULL, &r),
           0);
  CHECK(r.modified == 0);
  /* Inserts, upserts that insert, and deletes are not updates. */
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'Y','s':'done'}"), NULL),
           0);
  dtx_update_opts_t up = {.upsert = 1};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'Z'}"),
                            JQ("{'$set':{'s':'weird','token':-5}}"), &up, &r),
           0);
  json_decref(r.upserted_id);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'Y'}"), 0, NULL), 0);
  /* Bypass lets any change through. */
  dtx_update_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'payer':'bob','token':0}}"), &by, &r),
           0);
  CHECK(r.modified == 1);
  /* An array of rules: each must hold. */
  CHECK_RC(set_transition(c, "[{'immutable':['a']},{'increasing':['n']}]"),
           0);
  REQUIRE(conf_seed(c, "[{'_id':'W','a':1,'n':1}]") == 0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'W'}"),
                            JQ("{'$set':{'n':0}}"), NULL, &r),
           DTX_EVALIDATION);
  check_detail(c, "W", "n may not decrease");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'W'}"),
                            JQ("{'$set':{'a':2}}"), NULL, &r),
           DTX_EVALIDATION);
  /* Bad rules are refused naming what is wrong, and change nothing. */
  static const struct {
    const char *rule, *why;
  } bad_rules[] = {
      {"{'immutable':[]}", "transition[0].immutable must be a non-empty"},
      {"{'immutable':['a','a']}", "names 'a' twice"},
      {"{'immutable':['$a']}", "starts with '$'"},
      {"{'increasing':[7]}", "increasing[0] must be a field path"},
      {"{'moves':{}}", "moves must be a non-empty array"},
      {"{'moves':[{'from':{}}]}", "moves[0].to must be a filter"},
      {"{'moves':[{'from':{'a':{'$bogus':1}},'to':{}}]}", "$bogus"},
      {"{'moves':[{'from':{},'to':{},'when':1}]}", "unknown key 'when'"},
      {"{'final':['s']}", "unknown key 'final'"},
      {"[]", "non-empty array"},
      {"[{'immutable':['a']},3]", "transition[1] must be a non-empty object"},
      {"'x'", "transition must be an object"},
  };
  for (size_t i = 0; i < sizeof bad_rules / sizeof *bad_rules; i++) {
    CHECK_RC(set_transition(c, bad_rules[i].rule), DTX_EBADQUERY);
    CHECKF(strstr(dtx_errdetail(), bad_rules[i].why), "%s: '%s' lacks '%s'",
           bad_rules[i].rule, dtx_errdetail(), bad_rules[i].why);
  }
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(json_object_get(out, "transition"),
                    JQ("[{'immutable':['a']},{'increasing':['n']}]")),
         "%s", JS(out));
  json_decref(out);
}

/* "insert" judges what a document may be born as; "scope": "plain" rules
 * judge only writes outside a pattern's steps -- every write of this test
 * is plain unless made between dtx__rules_step_enter and _leave, as the
 * kit's steps are -- or, with "steps", outside those patterns' steps; and
 * "why" ends their refusals. */
/* A transition rule's "delete": a document it does not match is not
 * deleted, by any delete path, nor dropped with its collection -- as the
 * delete guard, but in a rule a pattern owns (the job effect's markers,
 * docs/jobs.md).  Inside an exempt step, and past the rules, it goes. */
static void test_transition_delete(void) {
  const char *c = conf_coll("rules_delete");
  CHECK_RC(set_transition(c, "[{'scope':'plain','steps':['p'],"
                             "'delete':{'k':{'$exists':false}}}]"),
           0);
  CHECK_RC(dtx_store_insert_many(conf_st, c,
                                 JQ("[{'_id':'A','k':1},{'_id':'B'}]"), NULL,
                                 NULL),
           0);
  json_t *before = snapshot(c), *out = conf_poison;
  int64_t n = -1;
  const char *why = "delete refused: the delete condition "
                    "{\"k\":{\"$exists\":false}} is not met (transition "
                    "delete, plain writes)";
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'A'}"), 0, &n),
           DTX_EVALIDATION);
  check_detail(c, "A", why);
  CHECK_RC(dtx_store_find_one_and_delete(conf_st, c, JQ("{'_id':'A'}"), NULL,
                                         &out),
           DTX_EVALIDATION);
  CHECK(out == NULL);
  dtx_bulk_op_t op = {.kind = DTX_BULK_DELETE_ONE, .coll = c,
                      .filter = JQ("{'_id':'A'}")};
  dtx_bulk_result_t br;
  dtx_store_bulk_write(conf_st, &op, 1, &br);
  CHECK_RC(br.rc, DTX_EVALIDATION);
  dtx_bulk_results_clear(&br, 1);
  CHECK_RC(dtx_store_drop_collection(conf_st, c), DTX_EVALIDATION);
  check_same(c, before, "a refused delete");
  /* A step of another pattern is a plain write to it. */
  const char *step = dtx__rules_step_enter("q.x");
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'A'}"), 0, &n),
           DTX_EVALIDATION);
  dtx__rules_step_leave(step);
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'B'}"), 0, &n), 0);
  CHECK(n == 1);
  step = dtx__rules_step_enter("p.clear");
  CHECK_RC(dtx_store_delete(conf_st, c, JQ("{'_id':'A'}"), 0, &n), 0);
  CHECK(n == 1);
  dtx__rules_step_leave(step);
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'A','k':1}"), NULL), 0);
  dtx_delete_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_delete_ex(conf_st, c, JQ("{'_id':'A'}"), &by, &n), 0);
  CHECK(n == 1);
  CHECK_RC(set_transition(c, "[{'delete':1}]"), DTX_EBADQUERY);
}

#define SCOPED                                                               \
  "[{'immutable':['a'],'insert':{'s':'new'}},"                               \
  "{'scope':'plain','immutable':['s'],'insert':false,"                       \
  "'why':'s moves by its commands'},"                                        \
  "{'scope':'plain','steps':['p'],'immutable':['t']}]"
static void test_transition_scope_and_insert(void) {
  const char *c = conf_coll("rules_scope");
  dtx_update_result_t r;
  json_t *out = conf_poison;
  CHECK_RC(set_transition(c, SCOPED), 0);
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(json_object_get(out, "transition"), JQ(SCOPED)), "%s",
         JS(out));
  json_decref(out);
  /* A plain insert, in every form, is refused and changes nothing. */
  json_t *before = snapshot(c);
  const char *plain = "an insert is refused (transition insert, plain "
                      "writes): s moves by its commands";
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'X','s':'new','a':1}"),
                            NULL),
           DTX_EVALIDATION);
  check_detail(c, "X", plain);
  CHECK_RC(dtx_store_insert_many(conf_st, c,
                                 JQ("[{'_id':'X','s':'new','a':1}]"), NULL,
                                 NULL),
           DTX_EVALIDATION);
  dtx_update_opts_t up = {.upsert = 1};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'new','a':1}}"), &up, &r),
           DTX_EVALIDATION);
  dtx_fam_opts_t fup = {.upsert = 1};
  out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'X'}"),
                                         JQ("{'$set':{'s':'new','a':1}}"),
                                         &fup, &out),
           DTX_EVALIDATION);
  CHECK(out == NULL);
  dtx_bulk_op_t op = {.kind = DTX_BULK_INSERT, .coll = c,
                      .doc = JQ("{'_id':'X','s':'new','a':1}")};
  dtx_bulk_result_t br;
  dtx_store_bulk_write(conf_st, &op, 1, &br);
  CHECK_RC(br.rc, DTX_EVALIDATION);
  dtx_bulk_results_clear(&br, 1);
  check_same(c, before, "a plain insert");
  /* A step's insert obeys the rule of every scope only. */
  const char *step = dtx__rules_step_enter("p.make");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'X','s':'old','a':1}"),
                            NULL),
           DTX_EVALIDATION);
  check_detail(c, "X", "the insert condition {\"s\":\"new\"} is not met "
                       "(transition insert)");
  CHECK_RC(dtx_store_insert(conf_st, c, JQ("{'_id':'X','s':'new','a':1}"),
                            NULL),
           0);
  dtx__rules_step_leave(step);
  /* A plain update may not change s, and may change the rest but a. */
  before = snapshot(c);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'done'}}"), NULL, &r),
           DTX_EVALIDATION);
  check_detail(c, "X", "s may not change (transition immutable, plain "
                       "writes): s moves by its commands");
  out = conf_poison;
  CHECK_RC(dtx_store_find_one_and_update(conf_st, c, JQ("{'_id':'X'}"),
                                         JQ("{'$set':{'s':'done'}}"), NULL,
                                         &out),
           DTX_EVALIDATION);
  CHECK(out == NULL);
  op = (dtx_bulk_op_t){.kind = DTX_BULK_UPDATE_ONE, .coll = c,
                       .filter = JQ("{'_id':'X'}"),
                       .update = JQ("{'$set':{'s':'done'}}")};
  dtx_store_bulk_write(conf_st, &op, 1, &br);
  CHECK_RC(br.rc, DTX_EVALIDATION);
  dtx_bulk_results_clear(&br, 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'a':2}}"), NULL, &r),
           DTX_EVALIDATION);
  check_detail(c, "X", "a may not change (transition immutable)");
  check_same(c, before, "a plain update");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'note':1}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
  /* Steps nest: s moves inside them, a never does; t only in a step of
   * pattern p (its rule's "steps"): a step of q, or of no known pattern,
   * is a plain write to it. */
  step = dtx__rules_step_enter("q.copy");
  const char *inner = dtx__rules_step_enter("p");
  dtx__rules_step_leave(inner);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'done'}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'a':3}}"), NULL, &r),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'t':1}}"), NULL, &r),
           DTX_EVALIDATION);
  check_detail(c, "X", "t may not change (transition immutable, plain "
                       "writes)");
  dtx__rules_step_leave(step);
  static const char *const others[] = {NULL, "pq.x", "q.p"};
  for (size_t i = 0; i < 3; i++) {
    step = dtx__rules_step_enter(others[i]);
    CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                              JQ("{'$set':{'t':1}}"), NULL, &r),
             DTX_EVALIDATION);
    dtx__rules_step_leave(step);
  }
  step = dtx__rules_step_enter("p.set");
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'t':1}}"), NULL, &r),
           0);
  CHECK(r.modified == 1);
  dtx__rules_step_leave(step);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'new'}}"), NULL, &r),
           DTX_EVALIDATION);
  /* Bypass lets a plain write through. */
  dtx_update_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'X'}"),
                            JQ("{'$set':{'s':'new'}}"), &by, &r),
           0);
  CHECK_RC(dtx_store_insert_ex(conf_st, c, JQ("{'_id':'Y','s':'odd'}"),
                               &(dtx_insert_opts_t){.bypass_validation = 1},
                               NULL),
           0);
  /* Bad clauses are refused naming what is wrong, and change nothing. */
  static const struct {
    const char *rule, *why;
  } bad_rules[] = {
      {"{'scope':'x','immutable':['a']}", "scope must be \"all\" or"},
      {"{'scope':1,'immutable':['a']}", "scope must be \"all\" or"},
      {"{'insert':3}", "insert must be false or a filter object"},
      {"{'insert':true}", "insert must be false or a filter object"},
      {"{'insert':{'a':{'$bogus':1}}}", "$bogus"},
      {"{'why':'','immutable':['a']}", "why must be a string of 1..200"},
      {"{'scope':'plain','why':'x'}", "judges nothing"},
      {"{'steps':['p'],'immutable':['a']}", "steps goes with \"scope\""},
      {"{'scope':'plain','steps':[],'immutable':['a']}", "non-empty array of "
                                                         "pattern names"},
      {"{'scope':'plain','steps':['P.x'],'immutable':['a']}",
       "steps[0] must be a pattern name"},
      {"{'scope':'plain','steps':['p','p'],'immutable':['a']}", "twice"},
  };
  for (size_t i = 0; i < sizeof bad_rules / sizeof *bad_rules; i++) {
    CHECK_RC(set_transition(c, bad_rules[i].rule), DTX_EBADQUERY);
    CHECKF(strstr(dtx_errdetail(), bad_rules[i].why), "%s: '%s' lacks '%s'",
           bad_rules[i].rule, dtx_errdetail(), bad_rules[i].why);
  }
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(json_object_get(out, "transition"), JQ(SCOPED)), "%s",
         JS(out));
  json_decref(out);
}

/* Rules a pattern owns are its promises: a plain change of rules may not
 * take them away (dtx_rules_opts_t).  Its own collection's rules name it
 * and do not change; its transition object in a user's collection must be
 * kept, while the user's own parts change freely; bypass lifts both. */
static void test_rules_a_pattern_owns(void) {
  const char *c = conf_coll("rules_owned");
  dtx_collection_rules_t mine = {JQ("{'n':{'$gte':0}}"), NULL,
                                 JQ("{'increasing':['n']}")};
  dtx_rules_opts_t own = {.bypass_validation = 1, .pattern = "kit_test"};
  CHECK_RC(dtx_store_set_rules_ex(conf_st, c, &mine, &own), 0);
  json_t *out = NULL;
  CHECK_RC(dtx_store_get_rules(conf_st, c, &out), 0);
  CHECKF(json_equal(json_object_get(out, "pattern"), JQ("'kit_test'")), "%s",
         JS(out));
  json_decref(out);
  CHECK_RC(dtx_store_set_rules(conf_st, c, NULL), DTX_EVALIDATION);
  CHECKF(strstr(dtx_errdetail(), "are the kit_test pattern's"), "%s",
         dtx_errdetail());
  dtx_collection_rules_t looser = {JQ("{'n':{'$gte':-5}}"), NULL, NULL};
  CHECK_RC(dtx_store_set_rules(conf_st, c, &looser), DTX_EVALIDATION);
  /* Setting exactly what is there changes nothing and is no error. */
  dtx_rules_opts_t same = {.pattern = "kit_test"};
  CHECK_RC(dtx_store_set_rules_ex(conf_st, c, &mine, &same), 0);
  REQUIRE(conf_seed(c, "[{'_id':'A','n':3}]") == 0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                            JQ("{'$set':{'n':1}}"), NULL, NULL),
           DTX_EVALIDATION);
  /* A pattern's transition object in a user's collection stays; the
   * user's own validator may change around it. */
  const char *u = conf_coll("rules_owned_user");
  dtx_collection_rules_t both = {
      JQ("{'a':{'$exists':true}}"), NULL,
      JQ("[{'immutable':['a']},{'pattern':'batch','immutable':['m']}]")};
  dtx_rules_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_set_rules_ex(conf_st, u, &both, &by), 0);
  dtx_collection_rules_t drop_it = {JQ("{'a':{'$exists':true}}"), NULL,
                                    JQ("{'immutable':['a']}")};
  CHECK_RC(dtx_store_set_rules(conf_st, u, &drop_it), DTX_EVALIDATION);
  CHECKF(strstr(dtx_errdetail(), "hold a transition rule of the batch pattern"),
         "%s", dtx_errdetail());
  CHECK_RC(dtx_store_set_rules(conf_st, u, NULL), DTX_EVALIDATION);
  dtx_collection_rules_t keep_it = {
      NULL, JQ("{'a':0}"), JQ("{'pattern':'batch','immutable':['m']}")};
  CHECK_RC(dtx_store_set_rules(conf_st, u, &keep_it), 0);
  /* Past the rules, both go. */
  CHECK_RC(dtx_store_set_rules_ex(conf_st, u, NULL, &by), 0);
  CHECK_RC(dtx_store_set_rules_ex(conf_st, c, NULL, &by), 0);
  CHECK_RC(dtx_store_update(conf_st, c, JQ("{'_id':'A'}"),
                            JQ("{'$set':{'n':1}}"), NULL, NULL),
           0);
  dtx_rules_opts_t badname = {.bypass_validation = 1, .pattern = "Bad-Name"};
  CHECK_RC(dtx_store_set_rules_ex(conf_st, c, &mine, &badname), DTX_EBADQUERY);
}

void conf_run_rules(void) {
  CONF_RUN(test_rules_set_get_replace_remove);
  CONF_RUN(test_validator_refuses_every_write);
  CONF_RUN(test_invalid_documents_stay_until_updated);
  CONF_RUN(test_bypass_validation);
  CONF_RUN(test_delete_guard);
  CONF_RUN(test_transition_rule);
  CONF_RUN(test_rules_a_pattern_owns);
  CONF_RUN(test_transition_scope_and_insert);
  CONF_RUN(test_transition_delete);
  CONF_RUN(conf_test_rules_scope_threads);
  CONF_RUN(conf_test_rules_read_while_set);
  CONF_RUN(test_rules_survive_reopen_and_drop_removes_them);
  CONF_RUN(test_second_handle_sees_rules_at_once);
  CONF_RUN(test_rules_change_races_writers);
}
