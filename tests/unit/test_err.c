/* test_err.c -- the error detail (util/err.c): a detail built from the
 * current one, as a caller adds context to what a callee said, reads the
 * old text whole.  dtx__err once formatted straight into the buffer it was
 * reading (vsnprintf with overlapping source and destination: undefined,
 * and in practice a garbled "meta filter: meta filter: perator ..."). */
#include "testlib.h"
#include "util/err.h"

#include <string.h>

typedef struct ecase {
  const char *first; /* the callee's detail */
  const char *ctx;   /* the caller's context */
  const char *want;
} ecase_t;

static const ecase_t cases[] = {
    {"unknown operator $where at meta.k", "meta filter",
     "meta filter: unknown operator $where at meta.k"},
    {"x", "a longer context than the detail it wraps", "a longer context than "
                                                       "the detail it wraps: x"},
    {"", "empty", "empty: "},
};

static void test_detail_from_detail(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const ecase_t *c = &cases[i];
    dtx__err(DTX_EINVAL, "%s", c->first);
    int rc = dtx__err(DTX_ESTATE, "%s: %s", c->ctx, dtx_errdetail());
    CHECKF(rc == DTX_ESTATE && !strcmp(dtx_errdetail(), c->want),
           "case %zu: '%s', want '%s'", i, dtx_errdetail(), c->want);
    dtx__err(DTX_EINVAL, "%s", c->first);
    rc = dtx__err_wrap(DTX_EBACKEND, "%s", c->ctx);
    const char *w = c->first[0] ? c->want : c->ctx; /* no ": " for none */
    CHECKF(rc == DTX_EBACKEND && !strcmp(dtx_errdetail(), w),
           "wrap case %zu: '%s', want '%s'", i, dtx_errdetail(), w);
  }
}

/* A detail at the buffer's bound stays a C string when it is wrapped. */
static void test_long_detail(void) {
  char big[4096];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  dtx__err(DTX_EINVAL, "%s", big);
  size_t n = strlen(dtx_errdetail());
  CHECK(n > 0 && n < sizeof big);
  dtx__err(DTX_EINVAL, "ctx: %s", dtx_errdetail());
  CHECK(!strncmp(dtx_errdetail(), "ctx: aaaa", 9) &&
        strlen(dtx_errdetail()) == n);
}

int main(void) {
  TEST_RUN(test_detail_from_detail);
  TEST_RUN(test_long_detail);
  return TEST_DONE();
}
