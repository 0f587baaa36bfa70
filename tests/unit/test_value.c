/* test_value.c -- value order, type brackets, JSON text, ids and paths.
 *
 * The order tables pin down MongoDB's cross-type order and exact number
 * comparison; a ladder of values in ascending order checks that the order
 * is total and transitive.  The JSON tables check what the parser refuses
 * and that dumping keeps key order and number types.  The id tests check
 * the ObjectId layout, uniqueness across threads and re-seeding after
 * fork().
 */
#include "testlib.h"

#include "bdiff.h"
#include "doc/doc.h"
#include "doc/bdoc.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- dtx__value_cmp ----------------------------------------------------- */

typedef struct ocase {
  const char *a, *b; /* JSON values */
  int sign;          /* expected sign of cmp(a, b) */
} ocase_t;

static const ocase_t order_cases[] = {
    /* brackets: null < number < string < object < array < bool */
    {"null", "0", -1},
    {"null", "-1e300", -1},
    {"0", "\"\"", -1},
    {"1e300", "\"\"", -1},
    {"\"zzz\"", "{}", -1},
    {"{\"a\":[1]}", "[]", -1},
    {"[{}]", "false", -1},
    {"[]", "false", -1},
    {"false", "true", -1},
    {"true", "null", 1},
    {"\"1\"", "1", 1},
    {"{}", "\"a\"", 1},
    {"null", "null", 0},
    {"true", "true", 0},
    {"false", "false", 0},
    /* numbers */
    {"1", "2", -1},
    {"-5", "3", -1},
    {"1", "1.0", 0},
    {"1.0", "1", 0},
    {"0", "-0.0", 0},
    {"1", "1.5", -1},
    {"2", "1.5", 1},
    {"-1", "-1.5", 1},
    {"-2", "-1.5", -1},
    {"0.1", "0.2", -1},
    {"9007199254740993", "9007199254740992.0", 1},
    {"9007199254740992.0", "9007199254740993", -1},
    {"9007199254740992", "9007199254740992.0", 0},
    {"9007199254740991", "9007199254740992.0", -1},
    {"9223372036854775807", "9.223372036854775807e18", -1},
    {"9223372036854775807", "9223372036854775806", 1},
    {"9223372036854775807", "1e19", -1},
    {"9223372036854775807", "1e300", -1},
    {"-9223372036854775808", "-9.223372036854775808e18", 0},
    {"-9223372036854775808", "-1e19", 1},
    {"-9223372036854775808", "-9223372036854775807", -1},
    {"-9223372036854775808", "9223372036854775807", -1},
    {"4611686018427387905", "4.611686018427387904e18", 1},
    {"-4611686018427387905", "-4.611686018427387904e18", -1},
    {"1e308", "1.7e308", -1},
    {"-1e308", "1e308", -1},
    /* strings: bytewise, prefix first */
    {"\"a\"", "\"b\"", -1},
    {"\"a\"", "\"ab\"", -1},
    {"\"\"", "\"a\"", -1},
    {"\"B\"", "\"a\"", -1},
    {"\"abc\"", "\"abc\"", 0},
    {"\"z\"", "\"\\u00e9\"", -1},
    {"\"\\u00e9\"", "\"\\u00e8\"", 1},
    {"\"a\\u0001\"", "\"a\"", 1},
    /* objects: value type, then key, then value; fewer pairs first */
    {"{}", "{}", 0},
    {"{}", "{\"a\":1}", -1},
    {"{\"a\":1}", "{\"a\":1}", 0},
    {"{\"a\":1}", "{\"a\":1.0}", 0},
    {"{\"a\":1}", "{\"a\":2}", -1},
    {"{\"a\":1}", "{\"b\":1}", -1},
    {"{\"b\":1}", "{\"a\":\"x\"}", -1},
    {"{\"a\":null}", "{\"a\":0}", -1},
    {"{\"b\":null}", "{\"a\":0}", -1},
    {"{\"a\":1}", "{\"a\":1,\"b\":0}", -1},
    {"{\"a\":1,\"b\":2}", "{\"b\":2,\"a\":1}", -1},
    {"{\"a\":{\"b\":1}}", "{\"a\":{\"b\":2}}", -1},
    {"{\"a\":{\"b\":1}}", "{\"a\":{\"c\":0}}", -1},
    {"{\"ab\":1}", "{\"a\":1}", 1},
    /* arrays: element by element, shorter first */
    {"[]", "[]", 0},
    {"[]", "[null]", -1},
    {"[1]", "[1,2]", -1},
    {"[1,2]", "[1.0,2.0]", 0},
    {"[2]", "[1,5]", 1},
    {"[1,\"a\"]", "[1,2]", 1},
    {"[[1]]", "[[1],0]", -1},
    {"[[2]]", "[[1,3]]", 1},
    {"[{}]", "[[]]", -1},
    {"[true]", "[{}]", 1},
};

static void test_order(void) {
  for (size_t i = 0; i < sizeof order_cases / sizeof order_cases[0]; i++) {
    json_t *a = J(order_cases[i].a), *b = J(order_cases[i].b);
    int want = order_cases[i].sign;
    int ab = dtx__value_cmp(a, b), ba = dtx__value_cmp(b, a);
    CHECKF(ab == want, "cmp(%s, %s) = %d, want %d", order_cases[i].a,
           order_cases[i].b, ab, want);
    CHECKF(ba == -want, "cmp(%s, %s) = %d, want %d", order_cases[i].b,
           order_cases[i].a, ba, -want);
    /* the BSON engine's leg (tests/common/bdiff.c) */
    int bab = 9, bba = 9;
    CHECK(bdiff_cmp(a, b, &bab) == 0 && bdiff_cmp(b, a, &bba) == 0);
    CHECKF(bab == want && bba == -want, "bson cmp(%s, %s) = %d/%d, want %d",
           order_cases[i].a, order_cases[i].b, bab, bba, want);
    json_decref(a);
    json_decref(b);
  }
}

/* Values in strictly ascending order (each row greater than the one
 * before), except rows marked equal to their predecessor.  Every pair is
 * checked, so any intransitivity shows up. */
static const struct {
  const char *v;
  int eq_prev;
} ladder[] = {
    {"null", 0},
    {"-1e300", 0},
    {"-9223372036854775808", 0},
    {"-9.223372036854775808e18", 1},
    {"-9223372036854775807", 0},
    {"-2", 0},
    {"-1.5", 0},
    {"-1", 0},
    {"-1.0", 1},
    {"0", 0},
    {"-0.0", 1},
    {"0.5", 0},
    {"1", 0},
    {"1.0", 1},
    {"9007199254740992", 0},
    {"9007199254740992.0", 1},
    {"9007199254740993", 0},
    {"9007199254740994.0", 0},
    {"9223372036854775807", 0},
    {"9.223372036854775807e18", 0},
    {"1e300", 0},
    {"\"\"", 0},
    {"\"A\"", 0},
    {"\"a\"", 0},
    {"\"a\\u0000\"", 0},
    {"\"ab\"", 0},
    {"\"b\"", 0},
    {"\"\\u00e9\"", 0},
    {"{}", 0},
    {"{\"b\":null}", 0},
    {"{\"a\":1}", 0},
    {"{\"a\":1.0}", 1},
    {"{\"a\":1,\"b\":1}", 0},
    {"{\"a\":2}", 0},
    {"{\"b\":1}", 0},
    {"{\"a\":\"x\"}", 0},
    {"{\"a\":[]}", 0},
    {"[]", 0},
    {"[null]", 0},
    {"[1]", 0},
    {"[1,1]", 0},
    {"[2]", 0},
    {"[\"a\"]", 0},
    {"[[]]", 0},
    {"[true]", 0},
    {"false", 0},
    {"true", 0},
};

static void test_ladder(void) {
  size_t n = sizeof ladder / sizeof ladder[0];
  json_t *v[64];
  REQUIRE(n <= 64);
  for (size_t i = 0; i < n; i++) {
    json_error_t e;
    /* JSON_ALLOW_NUL for the "a\u0000" rung; J() does not allow it. */
    v[i] = json_loads(ladder[i].v, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    REQUIRE(v[i] != NULL);
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t j = i + 1; j < n; j++) {
      int want = -1;
      if (j == i + 1 && ladder[j].eq_prev)
        want = 0;
      /* equal runs: i and j equal when every rung between is eq_prev */
      int all_eq = 1;
      for (size_t k = i + 1; k <= j; k++)
        all_eq &= ladder[k].eq_prev;
      if (all_eq)
        want = 0;
      int got = dtx__value_cmp(v[i], v[j]);
      CHECKF(got == want, "cmp(%s, %s) = %d, want %d", ladder[i].v,
             ladder[j].v, got, want);
      CHECKF(dtx__value_cmp(v[j], v[i]) == -want, "cmp(%s, %s) asymmetric",
             ladder[j].v, ladder[i].v);
      int bij = 9, bji = 9;
      CHECK(bdiff_cmp(v[i], v[j], &bij) == 0 && bdiff_cmp(v[j], v[i], &bji) == 0);
      CHECKF(bij == want && bji == -want, "bson cmp(%s, %s) = %d/%d, want %d",
             ladder[i].v, ladder[j].v, bij, bji, want);
    }
    CHECK(dtx__value_cmp(v[i], v[i]) == 0);
  }
  for (size_t i = 0; i < n; i++)
    json_decref(v[i]);
}

static void test_missing_is_null(void) {
  json_t *n = json_null(), *z = json_integer(0);
  CHECK(dtx__value_cmp(NULL, n) == 0);
  CHECK(dtx__value_cmp(NULL, z) == -1);
  CHECK(dtx__value_cmp(z, NULL) == 1);
  CHECK(dtx__value_bracket(NULL) == 1);
  int r = 9;
  CHECK(bdiff_cmp(NULL, n, &r) == 0 && r == 0);
  CHECK(bdiff_cmp(NULL, z, &r) == 0 && r == -1);
  CHECK(bdiff_cmp(z, NULL, &r) == 0 && r == 1);
  CHECK(bdiff_bracket(NULL) == 1);
  json_decref(z);
}

/* ---- dtx__value_bracket --------------------------------------------------- */

static const struct {
  const char *v;
  int bracket;
} bracket_cases[] = {
    {"null", 1},   {"0", 2},          {"-7", 2},           {"1.5", 2},
    {"1e300", 2},  {"\"\"", 3},       {"\"x\"", 3},        {"{}", 4},
    {"{\"a\":1}", 4}, {"[]", 5},      {"[1,2]", 5},        {"true", 8},
    {"false", 8},
};

static void test_bracket(void) {
  for (size_t i = 0; i < sizeof bracket_cases / sizeof bracket_cases[0];
       i++) {
    json_t *v = J(bracket_cases[i].v);
    CHECKF(dtx__value_bracket(v) == bracket_cases[i].bracket,
           "bracket(%s) = %d, want %d", bracket_cases[i].v,
           dtx__value_bracket(v), bracket_cases[i].bracket);
    CHECKF(bdiff_bracket(v) == bracket_cases[i].bracket, "bson bracket(%s)",
           bracket_cases[i].v);
    json_decref(v);
  }
}

/* ---- JSON text ------------------------------------------------------------ */

static const struct {
  const char *text;
  const char *dump; /* expected compact dump */
} parse_ok[] = {
    {"{}", "{}"},
    {" { \"b\" : 1 , \"a\" : 2 } ", "{\"b\":1,\"a\":2}"},
    {"{\"z\":1,\"y\":{\"x\":[3,2,1],\"w\":null}}",
     "{\"z\":1,\"y\":{\"x\":[3,2,1],\"w\":null}}"},
    {"[1,2.0,\"x\",true,false,null]", "[1,2.0,\"x\",true,false,null]"},
    {"1", "1"},
    {"1.0", "1.0"},
    {"-0.0", "-0.0"},
    {"\"s\"", "\"s\""},
    {"null", "null"},
    {"9223372036854775807", "9223372036854775807"},
    {"-9223372036854775808", "-9223372036854775808"},
    {"9007199254740993", "9007199254740993"},
    {"0.1", "0.10000000000000001"},
    {"1e3", "1000.0"},
    {"\"\\u00e9\\n\\\"\"", "\"\xc3\xa9\\n\\\"\""},
    {"{\"a\":{\"a\":{\"a\":{}}}}", "{\"a\":{\"a\":{\"a\":{}}}}"},
};

static void test_parse_ok(void) {
  for (size_t i = 0; i < sizeof parse_ok / sizeof parse_ok[0]; i++) {
    json_t *v = (json_t *)&v;
    int rc = dtx__json_parse(parse_ok[i].text, &v);
    CHECKF(rc == 0, "parse %s: %s (%s)", parse_ok[i].text, dtx_errname(rc),
           dtx_errdetail());
    if (rc)
      continue;
    char *s = dtx__json_dump(v);
    CHECKF(s && !strcmp(s, parse_ok[i].dump), "dump(%s) = %s, want %s",
           parse_ok[i].text, s ? s : "(null)", parse_ok[i].dump);
    /* and the dump parses back to the same value and text */
    json_t *w = NULL;
    CHECK_RC(dtx__json_parse(s, &w), 0);
    CHECK(w && json_equal(v, w));
    CHECK(w && json_typeof(w) == json_typeof(v));
    char *s2 = w ? dtx__json_dump(w) : NULL;
    CHECK(s2 && !strcmp(s, s2));
    /* the BSON leg: over the bridge and back, the same dump */
    bson_t h = BSON_INITIALIZER;
    dtx__bval_t bv;
    json_t *back = NULL;
    char *s3 = NULL;
    CHECK(dtx__bval_from_json(v, &h, &bv) == 0 &&
          dtx__bval_to_json(&bv, &back) == 0 &&
          (s3 = dtx__json_dump(back)) != NULL);
    CHECKF(s3 && !strcmp(s3, parse_ok[i].dump), "bson dump(%s) = %s",
           parse_ok[i].text, s3 ? s3 : "(null)");
    free(s3);
    json_decref(back);
    bson_destroy(&h);
    free(s);
    free(s2);
    json_decref(v);
    json_decref(w);
  }
  /* the BSON leg: the Extended JSON reader reads documents only, so each
   * row is read as {"v": row}; its relaxed text must be the dump's, but
   * for reals, which it prints in the shortest form that reads back
   * (0.1, where the dump has 0.10000000000000001) */
  int skipped = 0;
  for (size_t i = 0; i < sizeof parse_ok / sizeof parse_ok[0]; i++) {
    char t[256], want[256];
    snprintf(t, sizeof t, "{\"v\":%s}", parse_ok[i].text);
    snprintf(want, sizeof want, "{\"v\":%s}", parse_ok[i].dump);
    bson_t b = BSON_INITIALIZER;
    int rc = dtx__ejson_read(t, strlen(t), &b);
    CHECKF(rc == 0, "ejson read %s: %s", t, dtx_errdetail());
    char *s = rc ? NULL : dtx__ejson_write(bson_get_data(&b), b.len, 0, NULL);
    if (s && strcmp(s, want) && strcmp(parse_ok[i].text, parse_ok[i].dump) &&
        strpbrk(parse_ok[i].dump, ".e") && !strchr(parse_ok[i].dump, '"')) {
      skipped++;
      printf("  BSON leg skips %s: shortest double form %s\n", want, s);
    } else
      CHECKF(s && !strcmp(s, want), "ejson %s wrote %s", t, s ? s : "NULL");
    free(s);
    bson_destroy(&b);
  }
  printf("  BSON leg of parse_ok: %zu rows, %d skipped\n",
         sizeof parse_ok / sizeof parse_ok[0], skipped);
}

static const struct {
  const char *text;
  const char *detail; /* substring of the detail */
} parse_bad[] = {
    {"", "line 1 col 0"},
    {"   ", "line 1"},
    {"{\"a\":1,\"a\":2}", "duplicate"},
    {"{\"a\":{\"b\":1,\"b\":1}}", "duplicate"},
    {"{} x", "end of file expected"},
    {"1 2", "end of file expected"},
    {"{}}", "line 1"},
    {"9223372036854775808", "too big"},
    {"-9223372036854775809", "too big"},
    {"{\"a\":99999999999999999999}", "too big"},
    {"1e400", "overflow"},
    {"\"\\u0000\"", "\\u0000"},
    {"{\"a\\u0000\":1}", "line 1"},
    {"\"\xff\"", "unable to decode byte 0xff"},
    {"[1,]", "line 1"},
    {"{\"a\" 1}", "line 1"},
    {"{a:1}", "line 1"},
    {"'x'", "line 1"},
    {"NaN", "line 1"},
    {"[1,2", "line 1"},
    {"{\n\"a\":\n  tru}", "line 3"},
    {"\"abc", "line 1"},
};

static void test_parse_bad(void) {
  for (size_t i = 0; i < sizeof parse_bad / sizeof parse_bad[0]; i++) {
    json_t *v = (json_t *)&v;
    int rc = dtx__json_parse(parse_bad[i].text, &v);
    CHECKF(rc == DTX_EBADJSON, "parse '%s' = %s, want BADJSON",
           parse_bad[i].text, dtx_errname(rc));
    CHECKF(v == NULL, "parse '%s' left *out set", parse_bad[i].text);
    CHECKF(strncmp(dtx_errdetail(), "line ", 5) == 0 &&
               strstr(dtx_errdetail(), " col ") != NULL,
           "parse '%s': detail '%s' lacks a position", parse_bad[i].text,
           dtx_errdetail());
    CHECKF(strstr(dtx_errdetail(), parse_bad[i].detail) != NULL,
           "parse '%s': detail '%s' lacks '%s'", parse_bad[i].text,
           dtx_errdetail(), parse_bad[i].detail);
    if (rc == 0)
      json_decref(v);
  }
  json_t *v = (json_t *)&v;
  CHECK_RC(dtx__json_parse(NULL, &v), DTX_EBADJSON);
  CHECK(v == NULL);
  /* the BSON leg: every row is refused with a position; where the text is
   * (meant as) a document, with the same words */
  int skipped = 0;
  for (size_t i = 0; i < sizeof parse_bad / sizeof parse_bad[0]; i++) {
    const char *t = parse_bad[i].text + strspn(parse_bad[i].text, " ");
    bson_t b = BSON_INITIALIZER;
    int rc = dtx__ejson_read(parse_bad[i].text, strlen(parse_bad[i].text), &b);
    CHECKF(rc == DTX_EBADJSON && !strncmp(dtx_errdetail(), "line ", 5) &&
               strstr(dtx_errdetail(), " col "),
           "ejson read '%s' = %s (%s)", parse_bad[i].text, dtx_errname(rc),
           dtx_errdetail());
    if (*t == '{' || !*t)
      CHECKF(strstr(dtx_errdetail(), parse_bad[i].detail) != NULL,
             "ejson read '%s': detail '%s' lacks '%s'", parse_bad[i].text,
             dtx_errdetail(), parse_bad[i].detail);
    else
      skipped++;
    bson_destroy(&b);
  }
  printf("  BSON leg of parse_bad: %d rows' words not compared (not a "
         "document at the top: refused as such)\n",
         skipped);
}

static void test_dump(void) {
  json_t *o = json_object();
  json_object_set_new(o, "zeta", json_integer(1));
  json_object_set_new(o, "alpha", json_real(2.5));
  json_object_set_new(o, "mid", json_pack("[i,f]", 3, 4.0));
  char *s = dtx__json_dump(o);
  CHECK(s && !strcmp(s, "{\"zeta\":1,\"alpha\":2.5,\"mid\":[3,4.0]}"));
  free(s);
  json_decref(o);
  CHECK(dtx__json_dump(NULL) == NULL);
}

/* ---- ids -------------------------------------------------------------------- */

static int is_id(const char *s) {
  if (strlen(s) != 24)
    return 0;
  for (int i = 0; i < 24; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

static unsigned long id_secs(const char *s) {
  char buf[9];
  memcpy(buf, s, 8);
  buf[8] = 0;
  return strtoul(buf, NULL, 16);
}

static void test_id_format(void) {
  char a[25], b[25];
  memset(a, 'X', sizeof a);
  time_t before = time(NULL);
  dtx__id_new(a);
  dtx__id_new(b);
  time_t after = time(NULL);
  CHECKF(is_id(a), "bad id %s", a);
  CHECK(a[24] == '\0');
  CHECK(id_secs(a) >= (unsigned long)before &&
        id_secs(a) <= (unsigned long)after);
  /* same process: same random middle, counter advanced by one */
  CHECK(!memcmp(a + 8, b + 8, 10));
  unsigned long ca = strtoul(a + 18, NULL, 16), cb = strtoul(b + 18, NULL, 16);
  CHECK(cb == ((ca + 1) & 0xffffff));
  CHECK(strcmp(a, b) != 0);
}

#define NTHREADS 4
#define PER_THREAD 20000
static char thread_ids[NTHREADS * PER_THREAD][25];

static void *id_thread(void *p) {
  char(*out)[25] = p;
  for (int i = 0; i < PER_THREAD; i++)
    dtx__id_new(out[i]);
  return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

static void test_id_threads(void) {
  pthread_t th[NTHREADS];
  for (int t = 0; t < NTHREADS; t++)
    pthread_create(&th[t], NULL, id_thread, thread_ids[t * PER_THREAD]);
  for (int t = 0; t < NTHREADS; t++)
    pthread_join(th[t], NULL);
  qsort(thread_ids, NTHREADS * PER_THREAD, 25, cmp_str);
  int dups = 0, bad = 0;
  for (int i = 0; i < NTHREADS * PER_THREAD; i++) {
    bad += !is_id(thread_ids[i]);
    if (i && !strcmp(thread_ids[i], thread_ids[i - 1]))
      dups++;
  }
  CHECK(dups == 0);
  CHECK(bad == 0);
}

/* A forked child must not reuse the parent's random bytes. */
static void test_id_fork(void) {
  char parent[25], child[25] = {0};
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  dtx__id_new(parent);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    char id[25];
    dtx__id_new(id);
    ssize_t w = write(fds[1], id, 25);
    _exit(w == 25 ? 0 : 1);
  }
  close(fds[1]);
  ssize_t r = read(fds[0], child, 25);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(r == 25);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECKF(is_id(child), "child id %s", child);
  CHECKF(memcmp(parent + 8, child + 8, 10) != 0,
         "child reused the parent's random part: %s vs %s", parent, child);
  /* the parent's own sequence is undisturbed */
  char again[25];
  dtx__id_new(again);
  CHECK(!memcmp(parent + 8, again + 8, 10));
}

/* MongoDB accepts any _id but an array (the manual's "Documents: The _id
 * Field" and "Field Names with Periods and Dollar Signs: General
 * Restrictions" -- no '$' or '.' in an _id document's field names). */
static const struct {
  const char *v;
  int rc;
} id_check_cases[] = {
    {"\"a\"", 0},
    {"\"acct-1\"", 0},
    {"0", 0},
    {"-5", 0},
    {"9223372036854775807", 0},
    {"\"\"", DTX_EINVAL},
    {"1.5", 0},
    {"1.0", 0},
    {"null", 0},
    {"true", 0},
    {"false", 0},
    {"{}", 0},
    {"{\"a\":1,\"b\":{\"c\":[1,2]}}", 0},
    {"{\"$a\":1}", DTX_EINVAL},
    {"{\"a\":{\"$b\":1}}", DTX_EINVAL},
    {"{\"a.b\":1}", DTX_EINVAL},
    {"{\"a\":[{\"b.c\":1}]}", DTX_EINVAL},
    {"[1]", DTX_EINVAL},
    {"[]", DTX_EINVAL},
};

static void test_id_check(void) {
  for (size_t i = 0; i < sizeof id_check_cases / sizeof id_check_cases[0];
       i++) {
    json_t *v = J(id_check_cases[i].v);
    int rc = dtx__id_check(v);
    CHECKF(rc == id_check_cases[i].rc, "id_check(%s) = %s",
           id_check_cases[i].v, dtx_errname(rc));
    json_decref(v);
  }
  json_t *arr = J("[]");
  dtx__id_check(arr);
  CHECK(!strcmp(dtx_errdetail(), "_id cannot be an array"));
  json_decref(arr);
  json_t *big_obj = json_object();
  for (int i = 0; i < 100; i++) {
    char k[16];
    snprintf(k, sizeof k, "field%d", i);
    json_object_set_new(big_obj, k, json_integer(i));
  }
  CHECK_RC(dtx__id_check(big_obj), DTX_EINVAL); /* over 1 KiB */
  CHECK(!dtx__id_valid(big_obj));
  json_decref(big_obj);
  CHECK_RC(dtx__id_check(NULL), DTX_EINVAL);
  char big[258];
  memset(big, 'k', sizeof big);
  big[256] = 0;
  json_t *s = json_string(big);
  CHECK_RC(dtx__id_check(s), 0); /* exactly 256 bytes */
  json_decref(s);
  big[256] = 'k';
  big[257] = 0;
  s = json_string(big);
  CHECK_RC(dtx__id_check(s), DTX_EINVAL);
  json_decref(s);
}

static void test_now(void) {
  int64_t a = dtx__now_ms();
  time_t t = time(NULL);
  int64_t b = dtx__now_ms();
  CHECK(b >= a);
  CHECK(a / 1000 <= (int64_t)t + 1 && a / 1000 >= (int64_t)t - 1);
}

/* ---- dtx__path_check ---------------------------------------------------------- */

static void test_path_check(void) {
  static const struct {
    const char *p;
    int ok;
    const char *detail;
  } cases[] = {
      {"a", 1, NULL},
      {"a.b.c", 1, NULL},
      {"a.0.b", 1, NULL},
      {"_id", 1, NULL},
      {"a$", 1, NULL},
      {"a.b$c", 1, NULL},
      {"", 0, "empty field path"},
      {".", 0, "empty segment"},
      {"a.", 0, "empty segment"},
      {".a", 0, "empty segment"},
      {"a..b", 0, "a..b"},
      {"$a", 0, "'$a'"},
      {"a.$b", 0, "'$b'"},
      {"a.$", 0, "'$'"},
      {"a.b.$[]", 0, "$[]"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int rc = dtx__path_check(cases[i].p, DTX_EBADUPDATE);
    if (cases[i].ok) {
      CHECKF(rc == 0, "path_check(%s) = %s (%s)", cases[i].p,
             dtx_errname(rc), dtx_errdetail());
    } else {
      CHECKF(rc == DTX_EBADUPDATE, "path_check(%s) = %s", cases[i].p,
             dtx_errname(rc));
      CHECKF(strstr(dtx_errdetail(), cases[i].detail) != NULL,
             "path_check(%s): detail '%s' lacks '%s'", cases[i].p,
             dtx_errdetail(), cases[i].detail);
    }
  }
  CHECK_RC(dtx__path_check(NULL, DTX_EBADQUERY), DTX_EBADQUERY);
  char longp[1100];
  memset(longp, 'a', sizeof longp);
  longp[1024] = 0;
  CHECK_RC(dtx__path_check(longp, DTX_EINVAL), 0);
  longp[1024] = 'a';
  longp[1025] = 0;
  CHECK_RC(dtx__path_check(longp, DTX_EINVAL), DTX_EINVAL);
}

/* ---- dtx__value_bson_size: the 16 MiB limit's count --------------------- */

/* The count is the bridge's BSON length exactly: for documents whose
 * integers straddle int32, strings with escapes, arrays past ten and a
 * hundred elements (index names of two and three digits), nesting. */
static void test_bson_size(void) {
  static const char *docs[] = {
      "{}",
      "{\"a\":1}",
      "{\"a\":2147483647,\"b\":2147483648,\"c\":-2147483648,\"d\":-2147483649}",
      "{\"a\":1.5,\"b\":true,\"c\":false,\"d\":null}",
      "{\"s\":\"\",\"t\":\"a\\tb\",\"u\":\"\\u00e9\\u4e2d\"}",
      "{\"a\":[1,2,3,4,5,6,7,8,9,10,11,12]}",
      "{\"a\":{\"b\":{\"c\":[[],{},[{}]]}},\"\":0}",
  };
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    json_t *v = NULL;
    CHECK_RC(dtx__json_parse(docs[i], &v), 0);
    bson_t b = BSON_INITIALIZER;
    CHECK_RC(dtx__bson_from_json(v, &b), 0);
    CHECKF(dtx__value_bson_size(v, DTX__DOC_MAX) == b.len,
           "%s: counted %zu, the bridge wrote %u", docs[i],
           dtx__value_bson_size(v, DTX__DOC_MAX), b.len);
    bson_destroy(&b);
    json_decref(v);
  }
  /* 1,000 elements: index names of one to three digits */
  json_t *arr = json_array(), *doc = json_object();
  for (int i = 0; i < 1000; i++)
    json_array_append_new(arr, json_integer((json_int_t)i * 5000000));
  json_object_set_new(doc, "big", arr);
  bson_t b = BSON_INITIALIZER;
  CHECK_RC(dtx__bson_from_json(doc, &b), 0);
  CHECK(dtx__value_bson_size(doc, DTX__DOC_MAX) == b.len);
  bson_destroy(&b);
  /* and the parse_ok table's documents */
  for (size_t i = 0; i < sizeof parse_ok / sizeof parse_ok[0]; i++) {
    json_t *v = NULL;
    if (dtx__json_parse(parse_ok[i].text, &v) || !json_is_object(v)) {
      json_decref(v);
      continue;
    }
    bson_t c = BSON_INITIALIZER;
    CHECK_RC(dtx__bson_from_json(v, &c), 0);
    CHECKF(dtx__value_bson_size(v, DTX__DOC_MAX) == c.len, "%s",
           parse_ok[i].text);
    bson_destroy(&c);
    json_decref(v);
  }
  /* An array of 2,000,000 small integers: 4 MB as JSON text, 18 MB as
   * BSON -- refused, as MongoDB would. */
  json_t *many = json_array();
  for (int i = 0; i < 2000000; i++)
    json_array_append_new(many, json_integer(1));
  json_object_set_new(doc, "many", many);
  CHECK_RC(dtx__doc_size_check(doc, "the document"), DTX_ELIMIT);
  json_decref(doc);
}

int main(void) {
  TEST_RUN(test_order);
  TEST_RUN(test_ladder);
  TEST_RUN(test_missing_is_null);
  TEST_RUN(test_bracket);
  TEST_RUN(test_parse_ok);
  TEST_RUN(test_parse_bad);
  TEST_RUN(test_dump);
  TEST_RUN(test_id_format);
  TEST_RUN(test_id_threads);
  TEST_RUN(test_id_fork);
  TEST_RUN(test_id_check);
  TEST_RUN(test_now);
  TEST_RUN(test_path_check);
  TEST_RUN(test_bson_size);
  return TEST_DONE();
}
