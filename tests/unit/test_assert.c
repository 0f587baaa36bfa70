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
#include "txn/kit/kit.h"
#include "txn/transfer/transfer.h"
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

/* A move the transition rules allow but the transfer's shape does not: a
 * claim without the lease (preparing, epoch 0, no owner). */
static void move_breaks_shape(void) {
  dtx_store_t *st = dtx_t_open("sqlite::memory:");
  dtx__exec_t ex;
  dtx__exec_init(&ex, st, "w", 0, 0);
  dtx_transfer_req_t req = {.from = "a", .to = "b", .amount = 5};
  json_t *tx = dtx__tx_new(&ex, &req, "t1", 0), *out = NULL;
  if (dtx__kit_ensure(st, &dtx__transfer_pattern) ||
      dtx__kit_insert(&ex, "transfer.submit", DTX_TRANSFERS, tx))
    _exit(3);
  dtx__move_t m = {.point = "transfer.claim", .from = DTX_ST_INITIATED,
                   .to = DTX_ST_PREPARING};
  _exit(dtx__kit_move(&ex, &dtx__tx_kind, tx, &m, &out) == 0 &&
                dtx__state_is(out, DTX_ST_PREPARING)
            ? 0
            : 4);
}

/* The kit runs the pattern's shape check after every move in a debug
 * build (a move that breaks it aborts naming it), not in a release one. */
static void test_shape_after_move(void) {
  char err[1024];
  int st = in_child(move_breaks_shape, err, sizeof err);
  if (dtx__assert_debug) {
    CHECKF(aborted(st), "status %d, stderr: %s", st, err);
    CHECKF(strstr(err, "doctx: assertion failed: transfers.shape: t1 "
                       "preparing: state preparing, yet never claimed"),
           "stderr: %s", err);
  } else {
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d, stderr: %s",
           st, err);
  }
}

int main(void) {
  TEST_RUN(test_assert_fires_and_names_it);
  TEST_RUN(test_library_checks_run_in_release);
  TEST_RUN(test_shape_after_move);
  return TEST_DONE();
}
