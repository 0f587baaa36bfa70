/* test_sqlite_codec.c -- the SQLite backend's body and key text
 * (src/store/sqlite/codec.c): documents survive a write and read exactly,
 * types included (1 stays an integer, 1.0 a real); the text is valid JSON
 * for other readers; canonical key text equates numbers by value only;
 * corrupt bodies are reported, not half-read. */
#include "testlib.h"

#include "store/sqlite/sqlite_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const docs[] = {
    "{}",
    "{\"_id\":1}",
    "{\"_id\":\"x\",\"n\":0,\"neg\":-17,\"r\":1.0,\"h\":0.5,\"z\":-0.0}",
    "{\"max\":9223372036854775807,\"min\":-9223372036854775808}",
    "{\"big\":1e300,\"tiny\":5e-324,\"p\":0.1,\"q\":123456789.125}",
    "{\"t\":true,\"f\":false,\"n\":null,\"e\":\"\",\"a\":[],\"o\":{}}",
    "{\"s\":\"quote\\\" back\\\\ slash/ nl\\n tab\\t cr\\r bs\\b ff\\f\"}",
    "{\"ctl\":\"\\u0001\\u001f\",\"uni\":\"\\u00e9\\u4e2d\\ud83d\\ude00\"}",
    "{\"utf8\":\"caf\xc3\xa9 \xe4\xb8\xad\"}",
    "{\"k\\\"ey\":1,\"k\\\\2\":{\"deep\":[1,[2,[3,{\"x\":[]}]]]}}",
    "{\"order\":{\"b\":1,\"a\":2,\"c\":3}}",
    "{\"arr\":[1,1.5,\"s\",null,true,{\"a\":[{}]}]}",
};

static void test_roundtrip(void) {
  for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
    json_t *d = J(docs[i]), *back = NULL;
    char *text = NULL;
    size_t len = 0;
    CHECK_RC(dtx__sq_text(d, 0, &text, &len), 0);
    REQUIRE(text);
    CHECK(strlen(text) == len);
    CHECK_RC(dtx__sq_body_parse(text, (int)len, &back), 0);
    /* json_equal treats 1 and 1.0 as different, so this also checks
     * that every number kept its type; dumping checks key order. */
    CHECKF(back && json_equal(d, back), "%s -> %s -> %s", docs[i], text,
           JS(back));
    char *a = json_dumps(d, JSON_COMPACT), *b = json_dumps(back, JSON_COMPACT);
    CHECKF(a && b && strcmp(a, b) == 0, "order: %s vs %s", a, b);
    free(a);
    free(b);
    /* Other JSON readers read the same document. */
    json_error_t e;
    json_t *j = json_loadb(text, len, 0, &e);
    CHECKF(j && json_equal(j, d), "%s: jansson reads %s", text,
           j ? JS(j) : e.text);
    json_decref(j);
    json_decref(back);
    json_decref(d);
    free(text);
  }
}

static void test_canonical(void) {
  static const struct {
    const char *in, *want;
  } t[] = {
      {"{\"a\":1.0}", "{\"a\":1}"},
      {"[[1.0],-0.0,2.5]", "[[1],0,2.5]"},
      {"[9007199254740992.0,9007199254740993]",
       "[9007199254740992,9007199254740993]"},
      {"[1e300,-9223372036854775808.0,9223372036854775808.0]",
       "[1.0000000000000001e+300,-9223372036854775808,"
       "9.2233720368547758e+18]"},
      {"{\"b\":1,\"a\":\"x\"}", "{\"b\":1,\"a\":\"x\"}"},
  };
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    json_t *v = J(t[i].in);
    char *text = NULL;
    size_t len;
    CHECK_RC(dtx__sq_text(v, 1, &text, &len), 0);
    CHECKF(text && strcmp(text, t[i].want) == 0, "%s: %s, want %s", t[i].in,
           text, t[i].want);
    free(text);
    json_decref(v);
  }
}

static void test_corrupt(void) {
  static const char *const bad[] = {
      "",          "{",           "{\"a\":}",  "{\"a\":1,}", "[1]",
      "{\"a\":1}x", "{\"a\":tru}", "{\"a\":\"\\ud800\"}", "{\"a\":\"x}",
      "{\"a\":-}",   "{\"a\":1e}",  "null",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *out = (json_t *)1;
    CHECKF(dtx__sq_body_parse(bad[i], (int)strlen(bad[i]), &out) ==
               DTX_EBACKEND,
           "'%s' accepted", bad[i]);
    CHECK(out == NULL);
  }
}

int main(void) {
  TEST_RUN(test_roundtrip);
  TEST_RUN(test_canonical);
  TEST_RUN(test_corrupt);
  return TEST_DONE();
}
