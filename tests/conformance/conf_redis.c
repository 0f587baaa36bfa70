/* conf_redis.c -- reaching the Redis servers behind conf_uri directly
 * (hiredis), for the cases that tamper with or pause the server: the
 * standalone server, or every node of a cluster. */
#include "conf.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs fn on k; 1 when it returned nonzero. */
static int call(redisContext *k, int (*fn)(void *, void *), void *arg) {
  return k && !k->err && fn(k, arg) != 0;
}

int conf_redis_each_node(int masters_only, int (*fn)(void *ctx, void *arg),
                         void *arg, int stop_at_first) {
  char host[256];
  int port = 0, n = 0;
  if (strncmp(conf_uri, "redis://", 8) != 0)
    return 0;
  /* Past a USER:PASSWORD@ (docs/redis.md): these connections are the
   * test's own, as the default user, not the store's ACL user. */
  const char *seeds = conf_uri + 8, *q = seeds + strcspn(seeds, "?");
  for (const char *p = seeds; p < q; p++)
    if (*p == '@')
      seeds = p + 1;
  if (sscanf(seeds, "%255[^:]:%d", host, &port) != 2)
    return 0;
  redisContext *c = redisConnect(host, port);
  if (!c || c->err) {
    redisFree(c);
    return 0;
  }
  char *nodes = NULL;
  redisReply *r = redisCommand(c, "CLUSTER NODES");
  if (r && r->type == REDIS_REPLY_STRING)
    nodes = strdup(r->str);
  freeReplyObject(r);
  if (!nodes) /* standalone */
    n = call(c, fn, arg);
  redisFree(c);
  /* Lines: "<id> <ip>:<port>@<bus> flags ..." */
  for (char *line = nodes, *next; line && *line && !(stop_at_first && n);
       line = next) {
    next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    else
      next = line + strlen(line);
    char *sp = strchr(line, ' ');
    char *colon = sp ? strchr(sp + 1, ':') : NULL;
    if (!colon || (masters_only && !strstr(colon, "master")))
      continue;
    *colon = '\0';
    redisContext *k = redisConnect(sp + 1, atoi(colon + 1));
    n += call(k, fn, arg);
    redisFree(k);
  }
  free(nodes);
  return n;
}

/* ---- the namespace format (src/store/redis/format.c) ------------------------------ */

/* A URI of conf_uri's servers with a namespace of its own (NULL when the
 * store is not Redis, or names a namespace already). */
static char fmt_uri[512];
static char fmt_ns[40];

static const char *fresh_ns_uri(void) {
  if (strncmp(conf_uri, "redis://", 8) != 0 || strstr(conf_uri, "ns="))
    return NULL;
  snprintf(fmt_ns, sizeof fmt_ns, "cf%016llx",
           (unsigned long long)conf_random());
  snprintf(fmt_uri, sizeof fmt_uri, "%s%cns=%s", conf_uri,
           strchr(conf_uri, '?') ? '&' : '?', fmt_ns);
  return fmt_uri;
}

/* What a document's raw body is, across the masters. */
typedef struct fmt_walk {
  char pattern[96];
  int bson, json, other;
  /* rewrite: every body of a document whose _id is an integer i with
   * docs[i] set becomes docs[i]'s JSON text (as a format-3 build wrote
   * it), for every i with i % every == 0 */
  json_t **docs;
  size_t ndocs;
  int every;
  int corrupt_id;  /* > 0: break that document's BSON instead */
  int corrupt_all; /* break every matched document's BSON */
  int corrupt_json; /* make every matched body JSON text that does not parse */
} fmt_walk_t;

static int fmt_visit(void *ctx, void *arg) {
  redisContext *k = ctx;
  fmt_walk_t *w = arg;
  char cursor[32] = "0";
  int rounds = 0;
  do {
    redisReply *r = redisCommand(k, "SCAN %s MATCH %s COUNT 500", cursor,
                                 w->pattern);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      freeReplyObject(r);
      return 0;
    }
    snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
    const redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
      const char *key = keys->element[i]->str;
      const char *tail = strrchr(key, '}');
      long id = tail && tail[1] == 'i' ? atol(tail + 2) : -1;
      redisReply *b = redisCommand(k, "HGET %s b", key);
      if (b && b->type == REDIS_REPLY_STRING && b->len > 0) {
        if (b->str[b->len - 1] == '\0')
          w->bson++;
        else if (b->str[0] == '{')
          w->json++;
        else
          w->other++;
        if (w->docs && id > 0 && (size_t)id < w->ndocs && w->docs[id] &&
            id % w->every == 0) {
          char *text = json_dumps(w->docs[id], JSON_COMPACT |
                                                   JSON_PRESERVE_ORDER |
                                                   JSON_REAL_PRECISION(17));
          freeReplyObject(redisCommand(k, "HSET %s b %s", key, text));
          free(text);
        }
        if ((w->corrupt_all || (id > 0 && id == w->corrupt_id)) &&
            b->len > 12) {
          /* The first element's type byte becomes 0x42, no BSON type:
           * the length and the terminator still say BSON. */
          char *bad = malloc(b->len);
          memcpy(bad, b->str, b->len);
          bad[4] = 0x42;
          freeReplyObject(redisCommand(k, "HSET %s b %b", key, bad,
                                       (size_t)b->len));
          free(bad);
        }
      }
      if (w->corrupt_json)
        freeReplyObject(redisCommand(k, "HSET %s b %s", key, "{\"a\":"));
      freeReplyObject(b);
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0 && ++rounds < 100000);
  return 1;
}

static void fmt_scan(fmt_walk_t *w) {
  if (!w->pattern[0])
    snprintf(w->pattern, sizeof w->pattern, "dtx@%s:d:*", fmt_ns);
  conf_redis_each_node(1, fmt_visit, w, 0);
}

/* The format key: GET (set NULL) or SET (set its value, "" deletes). */
static int fmt_key_cb(void *ctx, void *arg) {
  redisContext *k = ctx;
  char **io = arg;
  char key[96];
  snprintf(key, sizeof key, "dtx@%s:{cat}:format", fmt_ns);
  redisReply *r;
  if (io[1] && !*io[1])
    r = redisCommand(k, "DEL %s", key);
  else if (io[1])
    r = redisCommand(k, "SET %s %s", key, io[1]);
  else
    r = redisCommand(k, "GET %s", key);
  int done = r && r->type != REDIS_REPLY_ERROR; /* MOVED: another master */
  if (done && !io[1])
    io[0] = r->type == REDIS_REPLY_STRING ? strdup(r->str) : strdup("");
  freeReplyObject(r);
  return done;
}

static char *fmt_key_get(void) {
  char *io[2] = {NULL, NULL};
  conf_redis_each_node(1, fmt_key_cb, io, 1);
  return io[0];
}

static void fmt_key_set(const char *v) {
  char *io[2] = {NULL, (char *)v};
  conf_redis_each_node(1, fmt_key_cb, io, 1);
}

static char *dump_ordered(const json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER |
                           JSON_REAL_PRECISION(17));
}

/* Every document of coll in st equals docs[1..n) exactly: the same
 * text, so integers stay integers, reals reals, keys in their order. */
static void fmt_check_docs(dtx_store_t *st, const char *coll, json_t **docs,
                           size_t n, const char *when) {
  for (size_t i = 1; i < n; i++) {
    json_t *f = json_pack("{s:I}", "_id", (json_int_t)i), *got = NULL;
    int rc = dtx_store_find(st, coll, f, NULL, &got);
    CHECKF(rc == 0 && json_array_size(got) == 1, "%s: _id %zu: %s %s", when,
           i, dtx_errname(rc), dtx_errdetail());
    if (rc == 0 && json_array_size(got) == 1) {
      char *a = dump_ordered(json_array_get(got, 0));
      char *b = dump_ordered(docs[i]);
      CHECKF(strcmp(a, b) == 0, "%s: _id %zu:\n got  %s\n want %s", when, i,
             a, b);
      free(a);
      free(b);
    }
    json_decref(got);
    json_decref(f);
  }
}

/* The documents of every value kind JSON text can hold, as a format-3
 * build stored them, read back identically through a handle opened
 * before (a half-upgraded namespace: the reader tells the two apart)
 * and after the upgrade that the next open makes (all BSON, format 4). */
static void test_redis_format3_upgrade(void) {
  const char *uri = fresh_ns_uri();
  if (!uri) {
    conf_skip("needs a Redis store without ?ns=");
    return;
  }
  static const char *const texts[] = {
      NULL,
      "{\"_id\":1,\"i\":0,\"neg\":-7,\"i32max\":2147483647,"
      "\"i32min\":-2147483648,\"over\":2147483648,"
      "\"i64max\":9223372036854775807,\"i64min\":-9223372036854775808}",
      "{\"_id\":2,\"r\":1.0,\"tenth\":0.1,\"big\":1e300,\"tiny\":5e-324,"
      "\"negr\":-2.5,\"zero\":0.0,\"negzero\":-0.0,\"int_like\":3.0}",
      "{\"_id\":3,\"s\":\"\",\"u\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\","
      "\"esc\":\"a\\\"b\\\\c\\n\\t/\",\"brace\":\"{}\",\"t\":true,\"f\":false,"
      "\"n\":null}",
      "{\"_id\":4,\"z\":1,\"a\":2,\"m\":{\"y\":1,\"b\":[1,2.5,\"x\",null,"
      "{\"q\":[]}],\"e\":{}},\"arr\":[[],[[1]],{}],\"\":\"empty key\"}",
      NULL, /* 5: a body of 123 BSON bytes, whose first byte is '{' */
      "{\"_id\":6,\"deep\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":[1,{\"f\":"
      "[2,[3,[4.5]]]}]}}}}}}",
  };
  size_t n = sizeof texts / sizeof texts[0];
  json_t *docs[sizeof texts / sizeof texts[0]] = {0};
  for (size_t i = 1; i < n; i++) {
    json_error_t e;
    if (texts[i])
      docs[i] = json_loads(texts[i], 0, &e);
    CHECKF(!texts[i] || docs[i], "text %zu: %s", i, e.text);
  }
  char pad[102];
  memset(pad, 'p', 101);
  pad[101] = '\0';
  docs[5] = json_pack("{s:i,s:s}", "_id", 5, "s", pad);
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(uri, &st);
  REQUIRE(rc == 0);
  const char *coll = "fmt";
  for (size_t i = 1; i < n; i++)
    CHECK_RC(dtx_store_insert(st, coll, docs[i], NULL), 0);
  fmt_walk_t w = {.docs = docs, .ndocs = n, .every = 1};
  fmt_scan(&w);
  CHECKF(w.bson == (int)n - 1 && w.json == 0, "written as BSON: %d %d %d",
         w.bson, w.json, w.other);
  fmt_check_docs(st, coll, docs, n, "BSON bodies");
  /* Now every body is JSON text and the key is gone: a format-3
   * namespace.  Documents 2, 4 and 6 become BSON again below, so it is a
   * half-upgraded one. */
  fmt_key_set("");
  fmt_walk_t w2 = {0};
  fmt_scan(&w2);
  CHECKF(w2.json == (int)n - 1 && w2.bson == 0, "rewritten as JSON: %d %d",
         w2.json, w2.bson);
  fmt_check_docs(st, coll, docs, n, "JSON text bodies, old handle");
  /* Half upgraded: documents 2, 4, 6 as BSON again (writes of this
   * build), the rest still JSON, no format key. */
  for (size_t i = 2; i < n; i += 2) {
    json_t *f = json_pack("{s:I}", "_id", (json_int_t)i);
    json_t *u = json_pack("{s:{s:i}}", "$set", "w", 1);
    CHECK_RC(dtx_store_update(st, coll, f, u, NULL, NULL), 0);
    json_object_set_new(docs[i], "w", json_integer(1));
    json_decref(f);
    json_decref(u);
  }
  fmt_walk_t w3 = {0};
  fmt_scan(&w3);
  CHECKF(w3.bson == 3 && w3.json == 3, "half: %d BSON, %d JSON", w3.bson,
         w3.json);
  fmt_check_docs(st, coll, docs, n, "half upgraded, old handle");
  dtx_store_close(st);
  char *k = fmt_key_get();
  CHECKF(k && !*k, "format key before the re-open: %s", k ? k : "(none)");
  free(k);
  st = NULL;
  rc = dtx_store_open(uri, &st);
  CHECK_RC(rc, 0);
  if (rc == 0) {
    fmt_walk_t w4 = {0};
    fmt_scan(&w4);
    CHECKF(w4.bson == (int)n - 1 && w4.json == 0 && w4.other == 0,
           "after the upgrade: %d BSON, %d JSON, %d other", w4.bson, w4.json,
           w4.other);
    k = fmt_key_get();
    CHECKF(k && strcmp(k, "4") == 0, "format key: %s", k ? k : "(none)");
    free(k);
    fmt_check_docs(st, coll, docs, n, "upgraded");
    CHECK_RC(dtx_store_drop_collection(st, coll), 0);
    dtx_store_close(st);
  }
  for (size_t i = 1; i < n; i++)
    json_decref(docs[i]);
}

/* A namespace of a newer format is refused, nothing changed. */
static void test_redis_format_newer_refused(void) {
  const char *uri = fresh_ns_uri();
  if (!uri) {
    conf_skip("needs a Redis store without ?ns=");
    return;
  }
  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  dtx_store_close(st);
  fmt_key_set("5");
  st = NULL;
  int rc = dtx_store_open(uri, &st);
  CHECK_RC(rc, DTX_EBACKEND);
  CHECKF(strstr(dtx_errdetail(),
                "redis: namespace format 5, this doctx reads format 4"),
         "detail: %s", dtx_errdetail());
  CHECK(st == NULL);
  char *k = fmt_key_get();
  CHECKF(k && strcmp(k, "5") == 0, "format key: %s", k ? k : "(none)");
  free(k);
  fmt_key_set("");
}

/* A corrupt BSON body: find names it (DTX_ECORRUPT, the collection and
 * the _id, as a corrupt JSON body is reported), and the audit reports
 * it as its own finding and still audits the other patterns. */
static void test_redis_corrupt_body(void) {
  const char *uri = fresh_ns_uri();
  if (!uri) {
    conf_skip("needs a Redis store without ?ns=");
    return;
  }
  dtx_store_t *st = NULL;
  REQUIRE(dtx_store_open(uri, &st) == 0);
  const char *coll = "cb";
  for (int i = 1; i <= 3; i++) {
    json_t *d = json_pack("{s:i,s:i}", "_id", i, "a", i);
    CHECK_RC(dtx_store_insert(st, coll, d, NULL), 0);
    json_decref(d);
  }
  CHECK_RC(dtx_account_create(st, "acc1", NULL, NULL), 0);
  fmt_walk_t w = {.corrupt_id = 2};
  fmt_scan(&w);
  json_t *got = NULL;
  int rc = dtx_store_find(st, coll, NULL, NULL, &got);
  CHECK_RC(rc, DTX_ECORRUPT);
  CHECKF(strstr(dtx_errdetail(), "stored document _id 2 in cb is not a "
                                 "valid document"),
         "detail: %s", dtx_errdetail());
  json_decref(got);
  got = NULL;
  json_t *f = json_pack("{s:i}", "_id", 3);
  CHECK_RC(dtx_store_find(st, coll, f, NULL, &got), 0);
  CHECK(json_array_size(got) == 1);
  json_decref(got);
  json_decref(f);
  /* A JSON-text body that does not parse (format 3's corruption): the
   * same code, the same shape. */
  fmt_walk_t wj = {.corrupt_json = 1};
  snprintf(wj.pattern, sizeof wj.pattern, "dtx@%s:d:{cb:*}i3", fmt_ns);
  fmt_scan(&wj);
  CHECKF(wj.bson == 1, "document 3's body: %d", wj.bson);
  got = NULL;
  f = json_pack("{s:i}", "_id", 3);
  CHECK_RC(dtx_store_find(st, coll, f, NULL, &got), DTX_ECORRUPT);
  CHECKF(strstr(dtx_errdetail(), "stored document _id 3 in cb is not a "
                                 "JSON object"),
         "detail: %s", dtx_errdetail());
  json_decref(got);
  json_decref(f);
  /* The audit, on a corrupt account (src/txn/frame/audit.c): it reads
   * past it, reports it as a finding naming it, and judges the rest --
   * never clean, never stopped. */
  json_t *report = NULL;
  CHECK_RC(dtx_audit(st, 0, &report), 0); /* cb is no pattern's */
  json_decref(report);
  fmt_walk_t wa = {.corrupt_all = 1};
  snprintf(wa.pattern, sizeof wa.pattern, "dtx@%s:d:{accounts:*}sacc1",
           fmt_ns);
  fmt_scan(&wa);
  CHECKF(wa.bson == 1, "the account's body: %d", wa.bson);
  report = NULL;
  CHECK_RC(dtx_audit(st, 0, &report), DTX_EAUDIT);
  REQUIRE(report != NULL);
  CHECK(json_is_false(json_object_get(report, "ok")));
  char *text = json_dumps(report, 0);
  CHECKF(text && strstr(text, "\"corrupt_document\"") &&
             strstr(text, "_id \\\"acc1\\\" in accounts is not a valid "
                          "document"),
         "report: %s", text ? text : "?");
  free(text);
  json_decref(report);
  CHECK_RC(dtx_store_drop_collection(st, coll), 0);
  dtx_store_close(st);
}

/* Two processes open one format-3 namespace at once: both upgrade it (the
 * compare-and-set of each body decides), both succeed, and every
 * document reads back as it was. */
typedef struct up_child {
  conf_barrier_t bar;
} up_child_t;

static int up_open(void *arg) {
  up_child_t *c = arg;
  if (conf_barrier_child(&c->bar) != 0)
    return 2;
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(fmt_uri, &st);
  if (rc != 0)
    CONF_CHILD_FAIL("open: %s %s", dtx_errname(rc), dtx_errdetail());
  dtx_store_close(st);
  return rc != 0;
}

static void test_redis_format3_two_upgraders(void) {
  if (!fresh_ns_uri()) {
    conf_skip("needs a Redis store without ?ns=");
    return;
  }
  enum { N = 400, KIDS = 3 };
  json_t **docs = calloc(N + 1, sizeof *docs);
  REQUIRE(docs);
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(fmt_uri, &st);
  CHECK_RC(rc, 0);
  for (int i = 1; rc == 0 && i <= N; i++) {
    docs[i] = json_pack("{s:i,s:i,s:f,s:[i,s]}", "_id", i, "n", i * 1000003,
                        "r", i / 8.0, "l", i, "x");
    CHECK_RC(dtx_store_insert(st, "up", docs[i], NULL), 0);
  }
  dtx_store_close(st);
  fmt_walk_t w = {.docs = docs, .ndocs = N + 1, .every = 1};
  fmt_scan(&w);
  fmt_key_set("");
  fmt_walk_t wj = {0};
  fmt_scan(&wj);
  CHECKF(wj.json == N, "format 3: %d JSON bodies", wj.json);
  up_child_t c;
  REQUIRE(conf_barrier_init(&c.bar) == 0);
  conf_store_release();
  pid_t pids[KIDS];
  for (int i = 0; i < KIDS; i++)
    pids[i] = conf_fork(up_open, &c);
  CHECK(conf_barrier_release(&c.bar, KIDS) == 0);
  for (int i = 0; i < KIDS; i++)
    CHECKF(conf_wait(pids[i]) == 0, "upgrader %d failed", i);
  conf_barrier_close(&c.bar);
  conf_store_reacquire();
  fmt_walk_t wb = {0};
  fmt_scan(&wb);
  CHECKF(wb.bson == N && wb.json == 0, "after: %d BSON, %d JSON", wb.bson,
         wb.json);
  char *k = fmt_key_get();
  CHECKF(k && strcmp(k, "4") == 0, "format key: %s", k ? k : "(none)");
  free(k);
  st = NULL;
  if (dtx_store_open(fmt_uri, &st) == 0) {
    fmt_check_docs(st, "up", docs, N + 1, "after two upgraders");
    CHECK_RC(dtx_store_drop_collection(st, "up"), 0);
    dtx_store_close(st);
  }
  for (int i = 1; i <= N; i++)
    json_decref(docs[i]);
  free(docs);
}

void conf_run_redis(void) {
  CONF_RUN(test_redis_format3_upgrade);
  CONF_RUN(test_redis_format3_two_upgraders);
  CONF_RUN(test_redis_format_newer_refused);
  CONF_RUN(test_redis_corrupt_body);
}
