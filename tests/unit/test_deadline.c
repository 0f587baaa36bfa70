/* test_deadline.c -- the per-thread command deadline (util/deadline.h):
 * hard and soft frames, nesting that only tightens, a store window that
 * arms a soft frame once, and leaving that restores the outer frame. */
#include <unistd.h>

#include "testlib.h"
#include "util/deadline.h"

static void test_no_frame(void) {
  int64_t t0 = dtx__mono_ms();
  CHECK(dtx__deadline_left_ms() == INT64_MAX);
  CHECK(!dtx__deadline_passed());
  /* Outside a frame a store loop keeps its own window only. */
  CHECK(!dtx__deadline_expired(t0, 1000));
  CHECK(dtx__deadline_expired(t0 - 2000, 1000));
  CHECK(dtx__deadline_left_ms() == INT64_MAX); /* and arms nothing */
}

static void test_hard_frame(void) {
  dtx__deadline_frame_t f;
  dtx__deadline_enter(&f, 50);
  int64_t left = dtx__deadline_left_ms();
  CHECK(left > 0 && left <= 50);
  CHECK(dtx__deadline_budget_ms() == 50);
  /* A store window longer than the budget is cut by it. */
  int64_t t0 = dtx__mono_ms();
  CHECK(!dtx__deadline_expired(t0, 10000));
  dtx__deadline_sleep_ms(10000); /* capped at the deadline */
  CHECK(dtx__mono_ms() - t0 < 1000);
  CHECK(dtx__deadline_passed());
  CHECK(dtx__deadline_expired(t0, 10000));
  CHECK(dtx__deadline_left_ms() == 0);
  dtx__deadline_leave(&f);
  CHECK(dtx__deadline_left_ms() == INT64_MAX);
}

static void test_soft_frame_arms_once(void) {
  dtx__deadline_frame_t f;
  dtx__deadline_enter(&f, 0);
  CHECK(dtx__deadline_left_ms() == INT64_MAX); /* unarmed */
  int64_t t0 = dtx__mono_ms();
  /* The first store wait arms the frame at the end of its window ... */
  CHECK(!dtx__deadline_expired(t0, 80));
  int64_t left = dtx__deadline_left_ms();
  CHECK(left > 0 && left <= 80);
  CHECK(dtx__deadline_budget_ms() == 80);
  /* ... and a later operation with a fresh window of its own does not
   * extend it: one window per command, not per operation. */
  usleep(100 * 1000);
  CHECK(dtx__deadline_expired(dtx__mono_ms(), 80));
  CHECK(dtx__deadline_passed());
  dtx__deadline_leave(&f);
  CHECK(!dtx__deadline_passed());
}

static void test_nesting_only_tightens(void) {
  dtx__deadline_frame_t outer, inner, inner2;
  dtx__deadline_enter(&outer, 1000);
  dtx__deadline_enter(&inner, 5000); /* looser: keeps the outer */
  CHECK(dtx__deadline_budget_ms() == 1000);
  dtx__deadline_enter(&inner2, 20); /* tighter: wins */
  CHECK(dtx__deadline_budget_ms() == 20);
  CHECK(dtx__deadline_left_ms() <= 20);
  dtx__deadline_leave(&inner2);
  CHECK(dtx__deadline_budget_ms() == 1000);
  dtx__deadline_leave(&inner);
  dtx__deadline_leave(&outer);
  CHECK(dtx__deadline_left_ms() == INT64_MAX);
  /* A soft frame inside a hard one keeps the hard deadline. */
  dtx__deadline_enter(&outer, 1000);
  dtx__deadline_enter(&inner, 0);
  CHECK(dtx__deadline_budget_ms() == 1000);
  CHECK(!dtx__deadline_expired(dtx__mono_ms(), 10));
  CHECK(dtx__deadline_budget_ms() == 1000);
  dtx__deadline_leave(&inner);
  dtx__deadline_leave(&outer);
}

int main(void) {
  TEST_RUN(test_no_frame);
  TEST_RUN(test_hard_frame);
  TEST_RUN(test_soft_frame_arms_once);
  TEST_RUN(test_nesting_only_tightens);
  return TEST_DONE();
}
