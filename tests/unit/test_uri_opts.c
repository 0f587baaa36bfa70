/* test_uri_opts.c -- the one parser of store URI options (store.h,
 * src/store/uri.c): each kind of option a backend can declare, and each
 * kind of mistake with its one text, on a made-up table; then that the
 * SQLite and Redis URIs word the same mistake the same way. */
#include "testlib.h"

#include "store/store.h"
#include "util/err.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct settings {
  int n, mode;
  char name[9];
  char *text;
} settings_t;

static const dtx__uri_opt_t opts[] = {
    {"n", DTX__URI_INT, offsetof(settings_t, n), 1, 500, NULL, 0},
    {"mode", DTX__URI_WORD, offsetof(settings_t, mode), 0, 0, "a|bb|c", 1},
    {"name", DTX__URI_NAME, offsetof(settings_t, name), 2, 8, NULL, 0},
    {"text", DTX__URI_TEXT, offsetof(settings_t, text), 0, 0, NULL, 0},
};

typedef struct opt_case {
  const char *query;
  int rc;
  int n, mode;        /* settings after success (defaults 7, 2) */
  const char *name;   /* "" when not given */
  const char *text;   /* NULL when not given */
  const char *detail; /* on error: the whole detail, after "store URI 'u'" */
} opt_case_t;

static const opt_case_t cases[] = {
    {"n=1", 0, 1, 2, "", NULL, NULL},
    {"n=500&mode=a", 0, 500, 0, "", NULL, NULL},
    {"mode=bb&name=ab_9-Z", 0, 7, 1, "ab_9-Z", NULL, NULL},
    {"name=abcdefgh", 0, 7, 2, "abcdefgh", NULL, NULL},
    {"text=", 0, 7, 2, "", "", NULL},
    {"text=p%20q=r&n=3", 0, 3, 2, "", "p%20q=r", NULL},
    /* an option without once may repeat; the last one counts */
    {"n=3&n=4&text=x&text=y", 0, 4, 2, "", "y", NULL},
    {"", DTX_EBADURI, 0, 0, NULL, NULL, " has an empty option list"},
    {"n", DTX_EBADURI, 0, 0, NULL, NULL, ": option 'n' is not name=value"},
    {"&n=1", DTX_EBADURI, 0, 0, NULL, NULL, ": option '' is not name=value"},
    {"n=1&&n=2", DTX_EBADURI, 0, 0, NULL, NULL,
     ": option '' is not name=value"},
    {"n=1&", DTX_EBADURI, 0, 0, NULL, NULL, " ends with '&'"},
    {"x=1", DTX_EBADURI, 0, 0, NULL, NULL,
     ": unknown option 'x' (known: n, mode, name, text)"},
    {"N=1", DTX_EBADURI, 0, 0, NULL, NULL,
     ": unknown option 'N' (known: n, mode, name, text)"},
    {"mode=a&mode=a", DTX_EBADURI, 0, 0, NULL, NULL, ": option mode repeated"},
    {"n=0", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value '0' (n must be 1..500)"},
    {"n=501", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value '501' (n must be 1..500)"},
    {"n=", DTX_EBADURI, 0, 0, NULL, NULL, ": bad value '' (n must be 1..500)"},
    {"n=-1", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value '-1' (n must be 1..500)"},
    {"n=0000000001", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value '0000000001' (n must be 1..500)"},
    {"mode=b", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value 'b' (mode must be a|bb|c)"},
    {"mode=A", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value 'A' (mode must be a|bb|c)"},
    {"name=a", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value 'a' (name must be 2..8 of [A-Za-z0-9_-])"},
    {"name=abcdefghi", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value 'abcdefghi' (name must be 2..8 of [A-Za-z0-9_-])"},
    {"name=a.b", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value 'a.b' (name must be 2..8 of [A-Za-z0-9_-])"},
    /* text may be a password: a control byte is refused, never shown */
    {"text=s3\001cret", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value (text must hold no control byte)"},
    {"text=s3\177", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value (text must hold no control byte)"},
    {"text=s3\tx", DTX_EBADURI, 0, 0, NULL, NULL,
     ": bad value (text must hold no control byte)"},
};

static void test_opts_table(void) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const opt_case_t *c = &cases[i];
    settings_t s = {.n = 7, .mode = 2};
    dtx__err_clear();
    int rc = dtx__uri_opts("u", c->query, opts, sizeof opts / sizeof *opts, &s);
    CHECKF(rc == c->rc, "'%s': %s (%s)", c->query, dtx_errname(rc),
           dtx_errdetail());
    if (rc == 0 && c->rc == 0) {
      CHECKF(s.n == c->n && s.mode == c->mode && strcmp(s.name, c->name) == 0,
             "'%s': n %d mode %d name '%s'", c->query, s.n, s.mode, s.name);
      CHECKF((!s.text && !c->text) ||
                 (s.text && c->text && strcmp(s.text, c->text) == 0),
             "'%s': text %s", c->query, s.text ? s.text : "(null)");
    } else if (rc < 0 && c->detail) {
      char want[200];
      snprintf(want, sizeof want, "store URI 'u'%s", c->detail);
      CHECKF(strcmp(dtx_errdetail(), want) == 0, "'%s': '%s', want '%s'",
             c->query, dtx_errdetail(), want);
    }
    free(s.text);
  }
}

/* dtx__uri_masked: what every message and dtx_store_uri show. */
static void test_masked(void) {
  static const char *const cases[][2] = {
      {"redis://h:1", "redis://h:1"},
      {"redis://u:s3cret@h:1", "redis://u:***@h:1"},
      {"redis://:s3cret@h:1,h:2", "redis://:***@h:1,h:2"},
      {"redis://s3cret@h:1", "redis://***@h:1"}, /* a user, or a password? */
      {"redis://u:p@ss:w@rd@h:1?ns=a", "redis://u:***@h:1?ns=a"},
      {"redis://u:@h:1", "redis://u:***@h:1"},
      {"redis://h:1?password=s3cret", "redis://h:1?password=***"},
      {"redis://h:1?wait=1&password=s3cret&ns=a",
       "redis://h:1?wait=1&password=***&ns=a"},
      {"redis://h:1?password=&password=x&password=",
       "redis://h:1?password=***&password=***&password=***"},
      {"redis://h:1?user=u&xpassword=y", "redis://h:1?user=u&xpassword=y"},
      {"redis://h:1?Password=s3cret", "redis://h:1?Password=***"},
      {"redis://h:1?password:s3cret&ns=a", "redis://h:1?password***&ns=a"},
      {"redis://h:1?passwords=1", "redis://h:1?passwords=1"},
      {"sqlite:x.db?password=s3cret", "sqlite:x.db?password=***"},
      {"sqlite:/tmp/a@b:c.db", "sqlite:/tmp/a@b:c.db"}, /* no userinfo */
      {"sqlite:x.db?sync=full", "sqlite:x.db?sync=full"},
      {"", ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char *m = dtx__uri_masked(cases[i][0]);
    REQUIRE(m != NULL);
    CHECKF(strcmp(m, cases[i][1]) == 0, "'%s' masked as '%s', want '%s'",
           cases[i][0], m, cases[i][1]);
    free(m);
  }
}

static void test_int(void) {
  int v = -5;
  CHECK(dtx__uri_int("123456789", 9, 0, 999999999, &v) == 0 && v == 123456789);
  CHECK(dtx__uri_int("1234567890", 10, 0, 2147483647, &v) < 0);
  CHECK(dtx__uri_int("12x", 3, 0, 1000, &v) < 0);
  CHECK(dtx__uri_int("", 0, 0, 1000, &v) < 0);
  CHECK(dtx__uri_int("65536", 5, 1, 65535, &v) < 0 && v == 123456789);
}

/* The tail of the current detail after the URI it names. */
static const char *after_uri(const char *uri) {
  const char *d = dtx_errdetail();
  size_t n = strlen("store URI '") + strlen(uri) + 1;
  return strlen(d) > n ? d + n : d;
}

/* Every message that quotes a store URI shows it masked: a row per
 * message, each URI carrying the secret "s3cret" where that message's
 * check fails (docs/redis.md, "ACL users").  Before, the SQLite parser,
 * an option written without '=' and a password= spelled with capitals
 * quoted the secret. */
static void test_messages_mask(void) {
  static const struct {
    const char *uri, *detail; /* detail: a fragment of the message */
  } t[] = {
      /* store.c */
      {"s3cret@h?password=s3cret",
       "store URI '***@h?password=***' has no scheme"},
      /* sqlite.c and uri.c through it */
      {"sqlite:?password=s3cret",
       "store URI 'sqlite:?password=***' has an empty path"},
      {"sqlite:x.db?password=s3cret",
       "store URI 'sqlite:x.db?password=***': unknown option 'password'"},
      {"sqlite:x.db?Password=s3cret",
       "store URI 'sqlite:x.db?Password=***': unknown option 'Password'"},
      {"sqlite:x.db?password:s3cret",
       "'sqlite:x.db?password***': option 'password...' is not name=value"},
      {"sqlite:x.db?sync=full&sync=off&password=s3cret", "repeated"},
      {"sqlite:x.db?sync=s3cret", "bad value"}, /* not a secret: shown */
#ifdef DTX_HAVE_REDIS
      /* redis.c and uri.c through it */
      {"redis:/u:s3cret@h:1", "'redis:/u:***@h:1' does not start with"},
      {"redis://u:s3cret@", "'redis://u:***@' names no host"},
      {"redis://u:s3cret@h:x", "'redis://u:***@h:x': bad port in 'h:x'"},
      {"redis://u:s3cret@h:1,", "'redis://u:***@h:1,' ends its hosts"},
      {"redis://u:s3cret@h:1,,h:2", "has an empty host"},
      {"redis://u:s3cret@h/x:1", "bad host"},
      {"redis://h:1?password=s3cret&ns=a/b", "bad value 'a/b'"},
      {"redis://h:1?password=s3cret&bogus=1",
       "'redis://h:1?password=***&bogus=1': unknown option 'bogus'"},
      {"redis://h:1?password:s3cret", "option 'password...' is not"},
      {"redis://h:1?Password=s3cret", "'redis://h:1?Password=***'"},
      {"redis://h:1?password=s3cret&", "'redis://h:1?password=***&' ends"},
      {"redis://u:s3cret@h:1?password=s3cret", "gives its user and password"},
      {"redis://h:1?password=s3cr\001et", "password must hold no control"},
#endif
  };
  for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
    dtx_store_t *st = NULL;
    int rc = dtx_store_open(t[i].uri, &st);
    CHECKF(rc == DTX_EBADURI, "%s: %s (%s)", t[i].uri, dtx_errname(rc),
           dtx_errdetail());
    if (st)
      dtx_store_close(st);
    const char *d = dtx_errdetail();
    CHECKF(strstr(d, t[i].detail) != NULL, "%s: '%s' lacks '%s'", t[i].uri, d,
           t[i].detail);
    CHECKF(strstr(d, "s3cret") == NULL || strstr(t[i].uri, "sync=s3cret"),
           "%s: '%s' shows the password", t[i].uri, d);
  }
}

/* The same mistake in a sqlite: and a redis:// URI: the same words. */
static void test_backends_agree(void) {
#ifdef DTX_HAVE_REDIS
  static const char *const q[] = {"?", "?x=1", "?sync", "?&"};
  for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
    char su[64], ru[64], sd[300];
    snprintf(su, sizeof su, "sqlite:x.db%s", q[i]);
    snprintf(ru, sizeof ru, "redis://h:1%s", q[i]);
    dtx_store_t *st = NULL;
    CHECK_RC(dtx_store_open(su, &st), DTX_EBADURI);
    snprintf(sd, sizeof sd, "%s", after_uri(su));
    CHECK_RC(dtx_store_open(ru, &st), DTX_EBADURI);
    const char *rd = after_uri(ru);
    /* the unknown option's list names each backend's own options */
    size_t n = strcspn(sd, "(");
    CHECKF(strncmp(sd, rd, n) == 0, "'%s' vs '%s'", sd, rd);
  }
  dtx_store_t *st = NULL;
  CHECK_RC(dtx_store_open("redis://h:1?wait=65", &st), DTX_EBADURI);
  CHECKF(strcmp(after_uri("redis://h:1?wait=65"),
                ": bad value '65' (wait must be 0..64)") == 0,
         "%s", dtx_errdetail());
  CHECK_RC(dtx_store_open("sqlite:x.db?sync=65", &st), DTX_EBADURI);
  CHECKF(strcmp(after_uri("sqlite:x.db?sync=65"),
                ": bad value '65' (sync must be off|normal|full)") == 0,
         "%s", dtx_errdetail());
#endif
}

int main(void) {
  TEST_RUN(test_opts_table);
  TEST_RUN(test_masked);
  TEST_RUN(test_messages_mask);
  TEST_RUN(test_int);
  TEST_RUN(test_backends_agree);
  return TEST_DONE();
}
