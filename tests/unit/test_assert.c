/* test_assert.c -- invariants that run (util/assert.h): a DTX_ASSERT that
 * fails aborts the process naming its invariant, also where NDEBUG is
 * defined (a release build), and the library's own checks do the same --
 * the store's backend contract fed an outcome no backend may give.  Each
 * case runs in a child process, so the abort it expects ends the child
 * alone; the parent checks the signal and the line on stderr. */
#ifndef NDEBUG
#define NDEBUG 1 /* what a release build defines: DTX_ASSERT must stay */
#endif
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "testlib.h"
#include "util/assert.h"

/* Runs fn in a child with its stderr into a pipe; returns the child's
 * wait status and its stderr (up to n - 1 bytes) in out. */
static int in_child(void (*fn)(void), char *out, size_t n) {
  int p[2];
  out[0] = '\0';
  if (pipe(p) < 0)
    return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(20); /* bounded: a child that does not abort is killed */
    dup2(p[1], 2);
    close(p[0]);
    fn();
    _exit(0);
  }
  close(p[1]);
  size_t got = 0;
  ssize_t k;
  while (got + 1 < n && (k = read(p[0], out + got, n - 1 - got)) > 0)
    got += (size_t)k;
  out[got] = '\0';
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

static int aborted(int status) {
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

static void fires_here(void) {
  int two = 2;
  DTX_ASSERT(two + two == 5, "T0");
}

static void holds_here(void) {
  int two = 2;
  DTX_ASSERT(two + two == 4, "T0");
}

static void test_assert_fires_and_names_it(void) {
  char err[1024];
  CHECK(DTX_DEBUG == 0); /* NDEBUG is defined above */
  int st = in_child(fires_here, err, sizeof err);
  CHECKF(aborted(st), "status %d, stderr: %s", st, err);
  CHECKF(strstr(err, "doctx: assertion failed: T0: two + two == 5 "
                     "(tests/unit/test_assert.c:") ||
             strstr(err, "doctx: assertion failed: T0: two + two == 5 ("),
         "stderr: %s", err);
  st = in_child(holds_here, err, sizeof err);
  CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !err[0],
         "status %d, stderr: %s", st, err);
}

/* A backend that says it modified a document it did not match. */
static void backend_breaks_contract(void) {
  static json_t *update;
  update = json_object();
  dtx__modify_t m = {.coll = "c", .update_spec = update};
  m.update = (const dtx__update_t *)update; /* only tested for NULL */
  dtx__modify_result_t res = {.matched = 0, .modified = 1};
  dtx__st_check_modify(&m, &res, 0, "");
}

/* ... or fails without saying why. */
static void backend_error_without_detail(void) {
  dtx__st_check_rc(DTX_EBACKEND, "");
}

static void test_library_checks_run_in_release(void) {
  char err[1024];
  int st = in_child(backend_breaks_contract, err, sizeof err);
  CHECKF(aborted(st), "status %d, stderr: %s", st, err);
  CHECKF(strstr(err, "doctx: assertion failed: store.modified<=matched: ") &&
             strstr(err, "(src/store/store.c:"),
         "stderr: %s", err);
  st = in_child(backend_error_without_detail, err, sizeof err);
  CHECKF(aborted(st), "status %d, stderr: %s", st, err);
  CHECKF(strstr(err, "assertion failed: store.error_has_detail: "),
         "stderr: %s", err);
}

int main(void) {
  TEST_RUN(test_assert_fires_and_names_it);
  TEST_RUN(test_library_checks_run_in_release);
  return TEST_DONE();
}
