/* test_redis_codec.c -- the Redis backend's pure parts, no server needed:
 * hash slots (CRC16/XMODEM and hash tags, against values Redis Cluster
 * itself computes), the order-preserving index key encoding (equal values
 * encode alike, order within a bracket is MongoDB's, tuples are
 * prefix-free), URI parsing (accepted forms with their settings, and
 * DTX_EBADURI for each malformed part; an unreachable server is
 * DTX_EUNAVAILABLE), namespaced key names (one slot per bucket), and
 * that a wait for a document's turn is bounded. */
#include "testlib.h"

#include "store/redis/redis_int.h"
#include "util/deadline.h"
#include "util/err.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- slots ----------------------------------------------------------------- */

static void test_slots_match_redis_cluster(void) {
  /* Values from CLUSTER KEYSLOT on a Redis 7 node. */
  static const struct {
    const char *key;
    int slot;
  } cases[] = {
      {"foo", 12182},
      {"bar", 5061},
      {"123456789", 12739}, /* CRC16/XMODEM check value 0x31C3 */
      {"{user1000}.following", 3443},
      {"{user1000}.followers", 3443},
      {"user1000", 3443},
      {"foo{}{bar}", 8363},  /* empty tag: the whole key is hashed */
      {"foo{{bar}}zap", 4015}, /* tag is "{bar" */
      {"foo{bar}{zap}", 5061}, /* first tag only */
      {"", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int got = dtx__rd_slot(cases[i].key, strlen(cases[i].key));
    CHECKF(got == cases[i].slot, "%s: slot %d, want %d", cases[i].key, got,
           cases[i].slot);
  }
}

/* ---- index key encoding ------------------------------------------------------- */

static int enc_cmp(const json_t *a, const json_t *b) {
  rd_buf_t x = {0}, y = {0};
  dtx__rd_valenc(&x, a);
  dtx__rd_valenc(&y, b);
  size_t n = x.n < y.n ? x.n : y.n;
  int c = memcmp(x.p, y.p, n);
  if (c == 0)
    c = (x.n > y.n) - (x.n < y.n);
  dtx__rd_buf_free(&x);
  dtx__rd_buf_free(&y);
  return c < 0 ? -1 : c > 0;
}

static void test_numbers_encode_by_exact_value(void) {
  /* Ascending; "=" marks a value equal to the one before it. */
  static const char *seq[] = {
      "-1e300", "-9223372036854775808", "=-9223372036854775808.0",
      "-9223372036854775807", "-9007199254740993", "-9007199254740992",
      "=-9007199254740992.0", "-2.5", "-1", "=-1.0", "-0.5",
      "-5e-324", "0", "=0.0", "=-0.0", "5e-324", "1e-300", "0.5", "1",
      "=1.0", "1.5", "2", "3", "4.5", "1024", "9007199254740992",
      "=9007199254740992.0", "9007199254740993", "9223372036854775806",
      "9223372036854775807", "9223372036854775808.0", "1e300"};
  json_t *prev = NULL;
  for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
    int eq = seq[i][0] == '=';
    json_t *v = J(seq[i] + eq);
    if (prev) {
      int c = enc_cmp(prev, v);
      CHECKF(c == (eq ? 0 : -1), "%s vs %s: %d", JS(prev), JS(v), c);
      CHECKF(enc_cmp(v, prev) == (eq ? 0 : 1), "%s vs %s reversed", JS(v),
             JS(prev));
    }
    json_decref(prev);
    prev = v;
  }
  json_decref(prev);
}

static void test_values_order_within_brackets(void) {
  static const struct {
    const char *a, *b;
    int want;
  } cases[] = {
      {"null", "-1e300", -1},        /* null < numbers */
      {"1e300", "\"\"", -1},         /* numbers < strings */
      {"\"\"", "\"a\"", -1},
      {"\"a\"", "\"a\\u0001\"", -1}, /* a prefix sorts first */
      {"\"ab\"", "\"b\"", -1},
      {"\"B\"", "\"a\"", -1},        /* bytewise */
      {"\"\\u00e9\"", "\"z\"", 1},   /* UTF-8 bytes above ASCII */
      {"\"zzz\"", "{}", -1},         /* strings < objects */
      {"{\"a\":1}", "{\"a\":1.0}", 0},
      {"{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}", -1}, /* field order counts */
      {"{}", "[]", -1},              /* objects < arrays */
      {"[1]", "[1.0]", 0},
      {"[[1]]", "[[1.0]]", 0},
      {"[1]", "[1,2]", -1},
      {"[]", "false", -1},           /* arrays < booleans */
      {"false", "true", -1},
      {"true", "true", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *a = J(cases[i].a), *b = J(cases[i].b);
    int c = enc_cmp(a, b);
    CHECKF(c == cases[i].want, "%s vs %s: %d, want %d", cases[i].a,
           cases[i].b, c, cases[i].want);
    json_decref(a);
    json_decref(b);
  }
}

/* A tuple's encoding starts with the encoding of each of its prefixes, and
 * the byte after a complete value is never 0xFF, so "prefix" .. "prefix
 * 0xFF" selects exactly the tuples starting with it. */
static void test_tuples_are_prefix_free(void) {
  static const char *tuples[] = {
      "[\"a\",1]", "[\"a\\u0001\",1]", "[\"ab\",1]", "[\"a\",null]",
      "[{\"x\":\"a\"},1]", "[[\"a\"],2]", "[1,\"a\"]", "[1.5,\"a\"]"};
  size_t n = sizeof tuples / sizeof tuples[0];
  for (size_t i = 0; i < n; i++) {
    json_t *t = J(tuples[i]);
    rd_buf_t whole = {0}, first = {0};
    dtx__rd_tupleenc(&whole, t);
    dtx__rd_valenc(&first, json_array_get(t, 0));
    CHECKF(whole.n > first.n && memcmp(whole.p, first.p, first.n) == 0,
           "%s: first value is not a prefix", tuples[i]);
    CHECKF((unsigned char)whole.p[first.n] != 0xff, "%s: 0xFF follows",
           tuples[i]);
    for (size_t k = 0; k < n; k++) {
      if (k == i)
        continue;
      json_t *u = J(tuples[k]);
      rd_buf_t other = {0};
      dtx__rd_valenc(&other, json_array_get(u, 0));
      int same_first = json_equal(json_array_get(t, 0), json_array_get(u, 0));
      int prefix = other.n <= whole.n &&
                   memcmp(whole.p, other.p, other.n) == 0;
      CHECKF(prefix == same_first, "%s vs first of %s: prefix %d",
             tuples[i], tuples[k], prefix);
      dtx__rd_buf_free(&other);
      json_decref(u);
    }
    dtx__rd_buf_free(&whole);
    dtx__rd_buf_free(&first);
    json_decref(t);
  }
}

/* NUL bytes (possible through json_stringn) are escaped, keeping order:
 * "a" < "a\0" < "a\0b" < "a\1". */
static void test_strings_with_nul(void) {
  json_t *v[4] = {json_stringn("a", 1), json_stringn("a\0", 2),
                  json_stringn("a\0b", 3), json_stringn("a\1", 2)};
  for (int i = 0; i < 3; i++)
    CHECKF(enc_cmp(v[i], v[i + 1]) == -1, "%d < %d", i, i + 1);
  for (int i = 0; i < 4; i++)
    json_decref(v[i]);
}

/* 1 and "1" are different _ids; 1 and 1.0 the same, as are {a:1} and
 * {a:1.0}; arrays are refused. */
static void test_ids_keep_types_apart(void) {
  static const struct {
    const char *a, *b;
    int same;
  } pairs[] = {
      {"1", "\"1\"", 0},      {"1", "1.0", 1},
      {"1.5", "1.5", 1},       {"1.5", "2.5", 0},
      {"{\"a\":1}", "{\"a\":1.0}", 1},
      {"{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}", 0},
      {"null", "false", 0},    {"true", "true", 1},
      {"9007199254740993", "9007199254740992.0", 0},
      {"\"v\"", "{}", 0},
  };
  for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    rd_buf_t a = {0}, b = {0};
    json_t *x = J(pairs[k].a), *y = J(pairs[k].b);
    CHECK_RC(dtx__rd_idenc(x, &a), 0);
    CHECK_RC(dtx__rd_idenc(y, &b), 0);
    int same = a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
    CHECKF(same == pairs[k].same, "%s vs %s", pairs[k].a, pairs[k].b);
    dtx__rd_buf_free(&a);
    dtx__rd_buf_free(&b);
    json_decref(x);
    json_decref(y);
  }
  rd_buf_t a = {0}, c = {0};
  json_t *i = J("1"), *arr = J("[1]");
  CHECK_RC(dtx__rd_idenc(i, &a), 0);
  CHECK(a.n == 2 && memcmp(a.p, "i1", 2) == 0);
  CHECK_RC(dtx__rd_idenc(arr, &c), DTX_EINVAL);
  dtx__rd_buf_free(&a);
  dtx__rd_buf_free(&c);
  json_decref(i);
  json_decref(arr);
}

/* ---- URIs ------------------------------------------------------------------------ */

static void test_uri_parsing(void) {
  static const struct {
    const char *uri;
    int rc;
    size_t nseeds;
    const char *host0;
    int port0, wait, timeout, buckets;
    const char *detail_has;
  } cases[] = {
      {"redis://127.0.0.1:6380", 0, 1, "127.0.0.1", 6380, 0, 2000, 16, NULL},
      {"redis://localhost", 0, 1, "localhost", 6379, 0, 2000, 16, NULL},
      {"redis://h:1/", 0, 1, "h", 1, 0, 2000, 16, NULL},
      {"redis://a:7000,b:7001,c:7002", 0, 3, "a", 7000, 0, 2000, 16, NULL},
      {"redis://h:7000?wait=1&timeout_ms=500&buckets=64", 0, 1, "h", 7000, 1,
       500, 64, NULL},
      {"redis://h:7000?password=s3cret", 0, 1, "h", 7000, 0, 2000, 16, NULL},
      {"redis:/h:1", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "redis://"},
      {"redis://", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "no host"},
      {"redis://:6379", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "bad host"},
      {"redis://h:0", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "bad port"},
      {"redis://h:70000", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "bad port"},
      {"redis://h:12x", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "bad port"},
      {"redis://a:1,", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "','"},
      {"redis://a:1,,b:2", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "empty host"},
      {"redis://h:1?", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "empty option"},
      {"redis://h:1?wait", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "name=value"},
      {"redis://h:1?wait=x", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "wait"},
      {"redis://h:1?wait=-1", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "wait"},
      {"redis://h:1?timeout_ms=0", DTX_EBADURI, 0, NULL, 0, 0, 0, 0,
       "timeout_ms"},
      {"redis://h:1?buckets=0", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "buckets"},
      {"redis://h:1?db=2", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "unknown"},
      {"redis://h:1?wait=1&", DTX_EBADURI, 0, NULL, 0, 0, 0, 0, "'&'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rd_uri_t u;
    int rc = dtx__rd_uri_parse(cases[i].uri, &u);
    CHECKF(rc == cases[i].rc, "%s: %s (%s)", cases[i].uri, dtx_errname(rc),
           dtx_errdetail());
    if (rc == 0 && cases[i].rc == 0) {
      CHECKF(u.nseeds == cases[i].nseeds &&
                 strcmp(u.hosts[0], cases[i].host0) == 0 &&
                 u.ports[0] == cases[i].port0 && u.wait == cases[i].wait &&
                 u.timeout_ms == cases[i].timeout &&
                 u.buckets == cases[i].buckets,
             "%s: %zu seeds, %s:%d wait %d timeout %d buckets %d",
             cases[i].uri, u.nseeds, u.hosts[0], u.ports[0], u.wait,
             u.timeout_ms, u.buckets);
      dtx__rd_uri_free(&u);
    } else if (rc != 0 && cases[i].detail_has) {
      CHECKF(strstr(dtx_errdetail(), cases[i].detail_has) != NULL,
             "%s: detail '%s' lacks '%s'", cases[i].uri, dtx_errdetail(),
             cases[i].detail_has);
    }
  }
  rd_uri_t u;
  REQUIRE(dtx__rd_uri_parse("redis://x:1?password=p%20q", &u) == 0);
  CHECK(u.password && strcmp(u.password, "p%20q") == 0);
  dtx__rd_uri_free(&u);
}

/* Who the connections authenticate as: USER:PASSWORD@ (percent-decoded,
 * for every seed) or user= and password= (as written), never both; an
 * empty user is the default one (user NULL); every refusal is BADURI and
 * its detail never holds the password. */
static void test_uri_auth(void) {
  static const struct {
    const char *uri;
    int rc;
    const char *user, *password; /* on success; NULL for none */
    size_t nseeds;
    const char *detail_has; /* on error */
  } cases[] = {
      {"redis://doctx:s3cret@h:1", 0, "doctx", "s3cret", 1, NULL},
      {"redis://doctx:s3cret@a:1,b:2,c:3/", 0, "doctx", "s3cret", 3, NULL},
      {"redis://doctx:s3cret@h:1?ns=x&wait=0", 0, "doctx", "s3cret", 1, NULL},
      {"redis://d%40x:p%3As%25%26%3F@h:1", 0, "d@x", "p:s%&?", 1, NULL},
      {"redis://u:p@ss@h:1", 0, "u", "p@ss", 1, NULL}, /* the last '@' */
      {"redis://u:a:b@h:1", 0, "u", "a:b", 1, NULL},   /* the first ':' */
      {"redis://:s3cret@h:1", 0, NULL, "s3cret", 1, NULL},
      {"redis://h:1?user=doctx&password=s3cret", 0, "doctx", "s3cret", 1,
       NULL},
      {"redis://h:1?password=s3cret&user=doctx", 0, "doctx", "s3cret", 1,
       NULL},
      {"redis://h:1?user=&password=s3cret", 0, NULL, "s3cret", 1, NULL},
      {"redis://h:1?user=d%40x&password=p%20q", 0, "d%40x", "p%20q", 1, NULL},
      {"redis://h:1?password=s3cret", 0, NULL, "s3cret", 1, NULL},
      {"redis://h:1", 0, NULL, NULL, 1, NULL},
      {"redis://doctx@h:1", DTX_EBADURI, NULL, NULL, 0,
       "'redis://***@h:1': its userinfo names a user without a password"},
      {"redis://doctx:@h:1", DTX_EBADURI, NULL, NULL, 0,
       "without a password"},
      {"redis://h:1?user=doctx", DTX_EBADURI, NULL, NULL, 0,
       "names user 'doctx' without a password"},
      {"redis://h:1?user=doctx&password=", DTX_EBADURI, NULL, NULL, 0,
       "names user 'doctx' without a password"},
      {"redis://doctx:s3cret@h:1?user=doctx", DTX_EBADURI, NULL, NULL, 0,
       "both as USER:PASSWORD@ and as user="},
      {"redis://doctx:s3cret@h:1?password=s3cret", DTX_EBADURI, NULL, NULL, 0,
       "'redis://doctx:***@h:1?password=***' gives its user and password "
       "both as USER:PASSWORD@ and as password="},
      {"redis://doctx:s3%00cret@h:1", DTX_EBADURI, NULL, NULL, 0,
       "bad userinfo"},
      {"redis://doc%0atx:s3cret@h:1", DTX_EBADURI, NULL, NULL, 0,
       "bad userinfo"},
      {"redis://doctx:s3cret%@h:1", DTX_EBADURI, NULL, NULL, 0,
       "bad userinfo"},
      {"redis://doctx:s3cret%4@h:1", DTX_EBADURI, NULL, NULL, 0,
       "bad userinfo"},
      {"redis://doctx:s3%zzcret@h:1", DTX_EBADURI, NULL, NULL, 0,
       "bad userinfo"},
      {"redis://doctx:s3\001cret@h:1", DTX_EBADURI, NULL, NULL, 0,
       "bad userinfo"},
      {"redis://h:1?user=doctx&password=s3\001cret", DTX_EBADURI, NULL, NULL,
       0, "bad value (password must hold no control byte)"},
      {"redis://h:1?user=do\033ctx&password=s3cret", DTX_EBADURI, NULL, NULL,
       0, "bad value (user must hold no control byte)"},
      {"redis://doctx:s3cret@", DTX_EBADURI, NULL, NULL, 0, "names no host"},
      {"redis://doctx:s3cret@h:x", DTX_EBADURI, NULL, NULL, 0,
       "'redis://doctx:***@h:x': bad port in 'h:x'"},
      {"redis://doctx:s3cret@h:1?wait", DTX_EBADURI, NULL, NULL, 0,
       "is not name=value"},
      {"redis:/doctx:s3cret@h:1", DTX_EBADURI, NULL, NULL, 0,
       "'redis:/doctx:***@h:1' does not start with redis://"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    rd_uri_t u;
    int rc = dtx__rd_uri_parse(cases[i].uri, &u);
    CHECKF(rc == cases[i].rc, "%s: %s (%s)", cases[i].uri, dtx_errname(rc),
           dtx_errdetail());
    if (rc == 0 && cases[i].rc == 0) {
      CHECKF(u.nseeds == cases[i].nseeds, "%s: %zu seeds", cases[i].uri,
             u.nseeds);
#define SAME(a, b) ((!(a) && !(b)) || ((a) && (b) && strcmp(a, b) == 0))
      CHECKF(SAME(u.user, cases[i].user) &&
                 SAME(u.password, cases[i].password),
             "%s: user %s password %s", cases[i].uri,
             u.user ? u.user : "(none)", u.password ? u.password : "(none)");
#undef SAME
      dtx__rd_uri_free(&u);
    } else if (rc != 0) {
      CHECKF(strstr(dtx_errdetail(), cases[i].detail_has) != NULL,
             "%s: detail '%s' lacks '%s'", cases[i].uri, dtx_errdetail(),
             cases[i].detail_has);
      CHECKF(!strstr(dtx_errdetail(), "s3cret") &&
                 !strstr(dtx_errdetail(), "s3"),
             "%s: detail '%s' shows the password", cases[i].uri,
             dtx_errdetail());
    }
  }
}

/* ?ns=NAME: accepted names, refused ones, and keys that keep a bucket in
 * one slot whatever the prefix. */
static void test_namespace_keys(void) {
  static const struct {
    const char *uri;
    int rc;
    const char *ns;
  } cases[] = {
      {"redis://h:1", 0, ""},
      {"redis://h:1?ns=a", 0, "a"},
      {"redis://h:1?wait=1&ns=Tx_9-b", 0, "Tx_9-b"},
      {"redis://h:1?ns=abcdefghijklmnopqrstuvwxyz012345", 0,
       "abcdefghijklmnopqrstuvwxyz012345"},
      {"redis://h:1?ns=abcdefghijklmnopqrstuvwxyz0123456", DTX_EBADURI, NULL},
      {"redis://h:1?ns=", DTX_EBADURI, NULL},
      {"redis://h:1?ns=a:b", DTX_EBADURI, NULL},
      {"redis://h:1?ns=a{b}", DTX_EBADURI, NULL},
      {"redis://h:1?ns=a.b", DTX_EBADURI, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rd_uri_t u;
    int rc = dtx__rd_uri_parse(cases[i].uri, &u);
    CHECKF(rc == cases[i].rc, "%s: %s (%s)", cases[i].uri, dtx_errname(rc),
           dtx_errdetail());
    if (rc == 0) {
      CHECKF(strcmp(u.ns, cases[i].ns) == 0, "%s: ns '%s'", cases[i].uri,
             u.ns);
      dtx__rd_uri_free(&u);
    } else {
      CHECKF(strstr(dtx_errdetail(), "ns must be 1..32"), "%s: %s",
             cases[i].uri, dtx_errdetail());
    }
  }
  char kp[RD_KPMAX];
  dtx__rd_key_prefix(kp, "");
  CHECK(strcmp(kp, "dtx:") == 0);
  dtx__rd_key_prefix(kp, "t1");
  CHECK(strcmp(kp, "dtx@t1:") == 0);
  rd_coll_t co;
  memset(&co, 0, sizeof co);
  co.name = "acc";
  snprintf(co.gen, sizeof co.gen, "00ff");
  for (int k = 0; k < 2; k++) {
    dtx__rd_key_prefix(co.kp, k ? "ns-1" : "");
    rd_buf_t d = {0}, m = {0}, x = {0}, c = {0};
    dtx__rd_key_doc(&d, &co, 3, "sA", 2);
    dtx__rd_key_members(&m, &co, 3);
    dtx__rd_key_index(&x, &co, 3, 7);
    dtx__rd_key_claim(&c, &co, 7, "k", 1);
    CHECKF(strncmp(d.p, co.kp, strlen(co.kp)) == 0 &&
               strncmp(c.p, co.kp, strlen(co.kp)) == 0,
           "%.*s / %.*s", (int)d.n, d.p, (int)c.n, c.p);
    uint16_t s = dtx__rd_slot("acc:00ff:3", 10);
    CHECK(dtx__rd_slot(d.p, d.n) == s && dtx__rd_slot(m.p, m.n) == s &&
          dtx__rd_slot(x.p, x.n) == s);
    dtx__rd_buf_free(&d);
    dtx__rd_buf_free(&m);
    dtx__rd_buf_free(&x);
    dtx__rd_buf_free(&c);
  }
}

static void test_unreachable_is_unavailable(void) {
  dtx_store_t *st = (dtx_store_t *)1;
  /* Port 1 on loopback refuses at once. */
  CHECK_RC(dtx_store_open("redis://127.0.0.1:1?timeout_ms=200", &st),
           DTX_EUNAVAILABLE);
  CHECK(st == NULL);
  CHECKF(strstr(dtx_errdetail(), "127.0.0.1:1") != NULL, "detail %s",
         dtx_errdetail());
  CHECK_RC(dtx_store_open("redis://127.0.0.1:1,127.0.0.1:2?timeout_ms=200",
                          &st),
           DTX_EUNAVAILABLE);
}

/* ---- turns ------------------------------------------------------------------ */

typedef struct turn_try {
  dtx__backend_t *b;
  int64_t budget; /* > 0: a command deadline of this many ms */
  int got;
  int64_t took;
} turn_try_t;

static void *turn_try(void *arg) {
  turn_try_t *t = arg;
  dtx__deadline_frame_t saved;
  if (t->budget > 0)
    dtx__deadline_enter(&saved, t->budget);
  int64_t t0 = dtx__rd_mono_ms();
  t->got = dtx__rd_turn_lock(t->b, 3, t0) == 0;
  t->took = dtx__rd_mono_ms() - t0;
  if (t->got)
    pthread_mutex_unlock(&t->b->turns[3]);
  if (t->budget > 0)
    dtx__deadline_leave(&saved);
  return NULL;
}

/* A writer waiting for a document's turn (bulk.c, modify.c) behind a
 * holder stuck on an unreachable server gives up with its retry window,
 * or sooner with its command's deadline, and goes on without the turn:
 * it must not outlive its budget.  A free turn is taken at once. */
static void test_turn_waits_are_bounded(void) {
  dtx__backend_t *b = calloc(1, sizeof *b);
  REQUIRE(b != NULL);
  for (int i = 0; i < RD_TURNS; i++)
    pthread_mutex_init(&b->turns[i], NULL);
  b->uri.retry_ms = 300;
  turn_try_t free_turn = {b, 0, 0, 0};
  turn_try(&free_turn);
  CHECKF(free_turn.got == 1 && free_turn.took < 100, "free: got %d in %lld ms",
         free_turn.got, (long long)free_turn.took);
  pthread_mutex_lock(&b->turns[3]); /* the stuck holder */
  turn_try_t window = {b, 0, 0, 0}, deadline = {b, 40, 0, 0};
  turn_try_t *tries[2] = {&window, &deadline};
  for (int k = 0; k < 2; k++) {
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, turn_try, tries[k]) == 0);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5; /* bounded: a waiter that never gives up fails */
    int jr = pthread_timedjoin_np(th, NULL, &until);
    CHECKF(jr == 0, "try %d still waiting after 5 s", k);
    if (jr != 0) {
      pthread_mutex_unlock(&b->turns[3]);
      pthread_join(th, NULL);
      pthread_mutex_lock(&b->turns[3]);
    }
  }
  pthread_mutex_unlock(&b->turns[3]);
  CHECKF(window.got == 0 && window.took >= 250 && window.took < 2000,
         "retry window: got %d after %lld ms", window.got,
         (long long)window.took);
  CHECKF(deadline.got == 0 && deadline.took < 250,
         "deadline: got %d after %lld ms", deadline.got,
         (long long)deadline.took);
  for (int i = 0; i < RD_TURNS; i++)
    pthread_mutex_destroy(&b->turns[i]);
  free(b);
}

int main(void) {
  TEST_RUN(test_slots_match_redis_cluster);
  TEST_RUN(test_numbers_encode_by_exact_value);
  TEST_RUN(test_values_order_within_brackets);
  TEST_RUN(test_tuples_are_prefix_free);
  TEST_RUN(test_strings_with_nul);
  TEST_RUN(test_ids_keep_types_apart);
  TEST_RUN(test_uri_parsing);
  TEST_RUN(test_uri_auth);
  TEST_RUN(test_namespace_keys);
  TEST_RUN(test_unreachable_is_unavailable);
  TEST_RUN(test_turn_waits_are_bounded);
  return TEST_DONE();
}
