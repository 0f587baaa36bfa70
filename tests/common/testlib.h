/* testlib.h -- a minimal table-friendly test harness.
 *
 * CHECK records a failure and goes on; REQUIRE stops the test function.
 * Each executable calls TEST_RUN(fn) per test and returns TEST_DONE(),
 * which prints "N passed, N failed" and exits non-zero on any failure. */
#ifndef DTX_TESTLIB_H
#define DTX_TESTLIB_H

#include <stdio.h>
#include <stdlib.h>

#include "doctx.h"

extern int dtx_t_failed, dtx_t_checks, dtx_t_tests_failed, dtx_t_tests;
extern const char *dtx_t_current;

#define CHECK(cond)                                                          \
  do {                                                                       \
    dtx_t_checks++;                                                          \
    if (!(cond)) {                                                           \
      dtx_t_failed++;                                                        \
      fprintf(stderr, "%s:%d: [%s] CHECK failed: %s\n", __FILE__, __LINE__, \
              dtx_t_current, #cond);                                         \
    }                                                                        \
  } while (0)

#define CHECKF(cond, ...)                                                    \
  do {                                                                       \
    dtx_t_checks++;                                                          \
    if (!(cond)) {                                                           \
      dtx_t_failed++;                                                        \
      fprintf(stderr, "%s:%d: [%s] CHECK failed: %s: ", __FILE__, __LINE__, \
              dtx_t_current, #cond);                                         \
      fprintf(stderr, __VA_ARGS__);                                          \
      fputc('\n', stderr);                                                   \
    }                                                                        \
  } while (0)

#define REQUIRE(cond)                                                        \
  do {                                                                       \
    dtx_t_checks++;                                                          \
    if (!(cond)) {                                                           \
      dtx_t_failed++;                                                        \
      fprintf(stderr, "%s:%d: [%s] REQUIRE failed: %s\n", __FILE__,          \
              __LINE__, dtx_t_current, #cond);                               \
      return;                                                                \
    }                                                                        \
  } while (0)

/* Checks an int return code and prints the doctx error on mismatch. */
#define CHECK_RC(expr, want)                                                 \
  do {                                                                       \
    int rc_ = (expr);                                                        \
    dtx_t_checks++;                                                          \
    if (rc_ != (want)) {                                                     \
      dtx_t_failed++;                                                        \
      fprintf(stderr, "%s:%d: [%s] %s = %s (%s), want %s\n", __FILE__,       \
              __LINE__, dtx_t_current, #expr, dtx_errname(rc_),              \
              dtx_errdetail(), dtx_errname(want));                           \
    }                                                                        \
  } while (0)

#define TEST_RUN(fn) dtx_t_run(#fn, fn)
#define TEST_DONE() dtx_t_done()

void dtx_t_run(const char *name, void (*fn)(void));
int dtx_t_done(void);

/* Empties the transfer pattern's collections (accounts, their opening
 * records, transfers) of a store shared by several suites: dropping the
 * accounts alone leaves opening records that the audit rightly reads as
 * accounts deleted with money on them. */
void dtx_t_drop_transfers(dtx_store_t *st);
/* Opens the store at uri or ends the test program (exit 1, naming the
 * error): the suites' stores are given, not optional.  The caller closes
 * it with dtx_store_close. */
dtx_store_t *dtx_t_open(const char *uri);

/* Parses JSON text or aborts the test program (test inputs are trusted). */
json_t *J(const char *text);

/* J for tables written with ' instead of " (no escaping needed in C).
 * A new reference; the conformance suite's JQ wraps it to free later. */
json_t *JQNEW(const char *text);

/* Compact JSON text of v with its stored key order, malloc'd (caller
 * frees), for exact comparisons. */
char *JDUMP(const json_t *v);

/* Compact JSON text of v in a static rotating buffer (for messages). */
const char *JS(const json_t *v);

/* The whole file at path, NUL-terminated, malloc'd (the caller frees);
 * NULL when unreadable. */
char *dtx_t_slurp(const char *path);

/* A filter table row: filter and document (JQNEW quoting) and whether the
 * filter must match the document. */
typedef struct dtx_t_fcase {
  const char *filter;
  const char *doc;
  int want;
} dtx_t_fcase_t;

/* Compiles each row's filter (which must succeed), matches it and checks
 * the answer, and that the match left no error behind. */
void dtx_t_filter_table(const char *name, const dtx_t_fcase_t *t, size_t n);
/* The path walks dtx_t_filter_table ran through both engines (bdiff.h's
 * bdiff_walk_spec on each row); TEST_DONE prints it when not 0. */
extern size_t dtx_t_bpath_walks;
/* {"k": {"k": ... {"leaf": 1}}}: `levels` nested objects in all, built
 * without a parser (so deeper than any parser takes); a new reference. */
json_t *JNEST(int levels, const char *k);


#endif
