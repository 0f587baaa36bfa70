/* sync.c -- the sync flag (src/txn/sync/) through the public C API on a
 * real store: rule definition (idempotent, CONFLICT, bad rules refused),
 * update results and error codes, then 4 threads (each with its own
 * store handle) racing 25 updates each on one master: at the end the
 * master's version is 100, every dependent carries its final values at
 * that version, no flag is left, and the audit is clean.
 *
 * usage: txn_sync STORE-URI   (collections csync_users and csync_comments
 * are dropped first; rule csync is defined, or found, in sync_rules) */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "testlib.h"
#include "util/err.h"

static const char *uri;

static dtx_store_t *open_store(void) { return dtx_t_open(uri); }

static const dtx_sync_rule_t rule = {.name = "csync",
                                     .master = "csync_users",
                                     .dependents = "csync_comments",
                                     .link = "user",
                                     .copy = "name:author,n:n"};

static void insert(dtx_store_t *st, const char *coll, const char *text) {
  json_t *d = json_loads(text, 0, NULL);
  CHECK_RC(dtx_store_insert(st, coll, d, NULL), 0);
  json_decref(d);
}

static void test_api(void) {
  dtx_store_t *st = open_store();
  dtx_store_drop_collection_ex(st, "csync_users", &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, "csync_comments", &(dtx_drop_opts_t){1});
  insert(st, "csync_users", "{\"_id\":\"u1\",\"name\":\"ann\",\"n\":0}");
  for (int i = 0; i < 3; i++) {
    char c[80];
    snprintf(c, sizeof c, "{\"_id\":\"c%d\",\"user\":\"u1\"}", i);
    insert(st, "csync_comments", c);
  }
  json_t *v = NULL;
  CHECK_RC(dtx_sync_rule_define(st, &rule, &v), 0);
  CHECK(strcmp(json_string_value(json_object_get(v, "link")), "user") == 0);
  json_decref(v);
  CHECK_RC(dtx_sync_rule_define(st, &rule, NULL), 0);
  dtx_sync_rule_t other = rule;
  other.copy = "name:author";
  CHECK_RC(dtx_sync_rule_define(st, &other, NULL), DTX_ECONFLICT);
  other.name = "csync_bad";
  other.copy = "name:user";
  CHECK_RC(dtx_sync_rule_define(st, &other, NULL), DTX_EINVAL);
  CHECK_RC(dtx_sync_rule_get(st, "csync_bad", &v), DTX_ENOTFOUND);

  json_t *u = json_pack("{s:{s:s}}", "$set", "name", "bea");
  CHECK_RC(dtx_sync_update(st, "csync", "u1", u, NULL, &v), 0);
  CHECK(json_integer_value(json_object_get(v, "version")) == 1);
  CHECK(json_integer_value(json_object_get(v, "dependents")) == 3);
  CHECK(json_is_true(json_object_get(v, "flag_cleared")));
  json_decref(v);
  CHECK_RC(dtx_sync_update(st, "csync", "nope", u, NULL, &v), DTX_ENOTFOUND);
  CHECK(v == NULL);
  CHECK_RC(dtx_sync_update(st, "nope", "u1", u, NULL, &v), DTX_ENOTFOUND);
  json_decref(u);
  u = json_pack("{s:{s:i}}", "$set", "_syncm.csync.v", 7);
  CHECK_RC(dtx_sync_update(st, "csync", "u1", u, NULL, &v), DTX_EINVAL);
  json_decref(u);
  dtx_store_close(st);
}

static void *racer(void *arg) {
  int t = (int)(intptr_t)arg;
  dtx_store_t *st = open_store();
  for (int i = 0; i < 25; i++) {
    char name[32];
    snprintf(name, sizeof name, "t%d-%d", t, i);
    json_t *u = json_pack("{s:{s:s},s:{s:i}}", "$set", "name", name, "$inc",
                          "n", 1);
    CHECK_RC(dtx_sync_update(st, "csync", "u1", u, NULL, NULL), 0);
    json_decref(u);
  }
  dtx_store_close(st);
  return NULL;
}

static void test_race(void) {
  pthread_t th[4];
  for (int i = 0; i < 4; i++)
    pthread_create(&th[i], NULL, racer, (void *)(intptr_t)i);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  dtx_store_t *st = open_store();
  json_t *all = NULL, *m, *c;
  size_t i;
  CHECK_RC(dtx_store_find(st, "csync_users", NULL, NULL, &all), 0);
  m = json_array_get(all, 0);
  json_t *sm = json_object_get(json_object_get(m, "_syncm"), "csync");
  CHECK(json_integer_value(json_object_get(sm, "v")) == 101);
  CHECK(json_integer_value(json_object_get(m, "n")) == 100);
  CHECK(!json_object_get(json_object_get(m, "_syncing"), "csync"));
  json_t *deps = NULL;
  CHECK_RC(dtx_store_find(st, "csync_comments", NULL, NULL, &deps), 0);
  CHECK(json_array_size(deps) == 3);
  json_array_foreach(deps, i, c) {
    CHECK(json_equal(json_object_get(c, "author"), json_object_get(m, "name")));
    CHECK(json_integer_value(json_object_get(c, "n")) == 100);
    CHECK(json_integer_value(json_object_get(json_object_get(c, "_sync"),
                                             "csync")) == 101);
  }
  json_decref(deps);
  json_decref(all);
  json_t *rep = NULL;
  CHECK_RC(dtx_audit(st, DTX_AUDIT_SETTLED, &rep), 0);
  json_decref(rep);
  json_t *sum = NULL;
  CHECK_RC(dtx_sync_repair(st, NULL, &sum), 0);
  CHECK(json_is_true(json_object_get(sum, "ok")));
  json_decref(sum);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:sync.db";
  TEST_RUN(test_api);
  TEST_RUN(test_race);
  return TEST_DONE();
}
