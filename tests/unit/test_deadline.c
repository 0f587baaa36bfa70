/* test_deadline.c -- the per-thread command deadline (util/deadline.h):
 * hard and soft frames, nesting that only tightens, a store window that
 * arms a soft frame once, and leaving that restores the outer frame; and
 * the time arithmetic at the edges of int64 (docs/deadlines.md, "Huge
 * durations"): a budget up to INT64_MAX saturates, never wraps into a
 * deadline in the past. */
#include <stdint.h>
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

/* dtx__add_sat / dtx__sub_sat: every "time + duration" and "how long
 * ago" goes through them, so each row is an edge a caller can reach. */
static void test_sat_table(void) {
  static const struct {
    int64_t a, b, sum, diff;
  } rows[] = {
      {0, 0, 0, 0},
      {0, -1, -1, 1},
      {-1, -1, -2, 0},
      {0, INT64_MAX, INT64_MAX, -INT64_MAX},
      {0, INT64_MIN, INT64_MIN, INT64_MAX}, /* -INT64_MIN saturates */
      {1, INT64_MAX, INT64_MAX, 1 - INT64_MAX},
      {-1, INT64_MIN, INT64_MIN, INT64_MAX},
      {INT64_MAX, INT64_MAX, INT64_MAX, 0},
      {INT64_MIN, INT64_MIN, INT64_MIN, 0},
      {INT64_MAX, INT64_MIN, -1, INT64_MAX},
      {INT64_MIN, INT64_MAX, -1, INT64_MIN},
      {INT64_MAX, 1, INT64_MAX, INT64_MAX - 1},
      {INT64_MIN, -1, INT64_MIN, INT64_MIN + 1},
      {INT64_MIN, 1, INT64_MIN + 1, INT64_MIN},
      {INT64_MAX, -1, INT64_MAX - 1, INT64_MAX},
      /* wall-clock now (2024) plus and minus huge durations */
      {1714560000000, INT64_MAX, INT64_MAX, 1714560000000 - INT64_MAX},
      {1714560000000, INT64_MAX - 1000, INT64_MAX,
       1714560000000 - (INT64_MAX - 1000)},
      {1714560000000, INT64_MIN, INT64_MIN + 1714560000000, INT64_MAX},
      {1714560000000, -1714560000000, 0, 3429120000000},
      {1714560000000, 4611686018427387904, 4611687732987387904,
       1714560000000 - 4611686018427387904},
      {-1714560000000, INT64_MIN, INT64_MIN, INT64_MAX - 1714560000000 + 1},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    int64_t s = dtx__add_sat(rows[i].a, rows[i].b);
    int64_t d = dtx__sub_sat(rows[i].a, rows[i].b);
    CHECKF(s == rows[i].sum, "row %zu: %lld + %lld = %lld, want %lld", i,
           (long long)rows[i].a, (long long)rows[i].b, (long long)s,
           (long long)rows[i].sum);
    CHECKF(d == rows[i].diff, "row %zu: %lld - %lld = %lld, want %lld", i,
           (long long)rows[i].a, (long long)rows[i].b, (long long)d,
           (long long)rows[i].diff);
  }
}

/* A frame entered with each budget: > 0 is hard and, however large, a
 * deadline in the future (the old now + budget wrapped for INT64_MAX and
 * every step was "past the deadline"); <= 0 is soft, unarmed. */
static void test_budget_table(void) {
  static const struct {
    int64_t budget;
    int hard;           /* armed at enter */
    int64_t min_left;   /* dtx__deadline_left_ms() at least this */
  } rows[] = {
      {INT64_MAX, 1, INT64_MAX / 2},
      {INT64_MAX - 1, 1, INT64_MAX / 2},
      {INT64_MAX - 1000, 1, INT64_MAX / 2},
      {INT64_MAX - 1714560000000, 1, INT64_MAX / 2},
      {4611686018427387904, 1, 4611686018427387904 - 1000},
      {100LL * 365 * 24 * 3600 * 1000, 1, 100LL * 365 * 24 * 3600 * 1000 - 1000},
      {60000, 1, 59000},
      {1000000, 1, 999000},
      {0, 0, INT64_MAX},
      {-1, 0, INT64_MAX},
      {-60000, 0, INT64_MAX},
      {INT64_MIN, 0, INT64_MAX},
      {INT64_MIN + 1, 0, INT64_MAX},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    dtx__deadline_frame_t f;
    int64_t b = rows[i].budget;
    dtx__deadline_enter(&f, b);
    CHECKF(!dtx__deadline_passed(), "budget %lld: passed at once",
           (long long)b);
    CHECKF(dtx__deadline_left_ms() >= rows[i].min_left,
           "budget %lld: %lld ms left, want >= %lld", (long long)b,
           (long long)dtx__deadline_left_ms(), (long long)rows[i].min_left);
    CHECKF(dtx__deadline_budget_ms() == (rows[i].hard ? b : 0),
           "budget %lld: budget_ms %lld", (long long)b,
           (long long)dtx__deadline_budget_ms());
    /* A store's wait inside it is not cut short by the frame ... */
    CHECKF(!dtx__deadline_expired(dtx__mono_ms(), 10000),
           "budget %lld: a store wait expired at once", (long long)b);
    /* ... and a nested 30 ms frame still tightens it. */
    dtx__deadline_frame_t g;
    dtx__deadline_enter(&g, 30);
    CHECK(dtx__deadline_budget_ms() == 30);
    CHECK(dtx__deadline_left_ms() <= 30);
    dtx__deadline_leave(&g);
    dtx__deadline_leave(&f);
    CHECK(dtx__deadline_left_ms() == INT64_MAX);
  }
  /* A huge budget nested in a short one keeps the short one. */
  dtx__deadline_frame_t outer, inner;
  dtx__deadline_enter(&outer, 40);
  dtx__deadline_enter(&inner, INT64_MAX);
  CHECK(dtx__deadline_budget_ms() == 40);
  CHECK(dtx__deadline_left_ms() <= 40);
  dtx__deadline_leave(&inner);
  dtx__deadline_leave(&outer);
}

/* A store window at the edges: op_start + window saturates (a window of
 * INT64_MAX never expires), and sleeps of any length return at once or
 * at the deadline. */
static void test_window_and_sleep_edges(void) {
  int64_t now = dtx__mono_ms();
  CHECK(!dtx__deadline_expired(now, INT64_MAX));
  CHECK(!dtx__deadline_expired(INT64_MAX - 10, 100)); /* saturated stop */
  CHECK(dtx__deadline_expired(now - 2000, 0));
  CHECK(dtx__deadline_expired(INT64_MIN, 1000)); /* began long ago */
  dtx__deadline_sleep_ms(INT64_MIN); /* each returns at once */
  dtx__deadline_sleep_ms(-1);
  dtx__deadline_sleep_ms(0);
  CHECK(dtx__mono_ms() - now < 1000);
  dtx__deadline_frame_t f;
  dtx__deadline_enter(&f, 20);
  dtx__deadline_sleep_ms(INT64_MAX); /* capped at the deadline */
  CHECK(dtx__deadline_passed());
  CHECK(dtx__mono_ms() - now < 1000);
  dtx__deadline_leave(&f);
}

int main(void) {
  TEST_RUN(test_no_frame);
  TEST_RUN(test_hard_frame);
  TEST_RUN(test_soft_frame_arms_once);
  TEST_RUN(test_nesting_only_tightens);
  TEST_RUN(test_sat_table);
  TEST_RUN(test_budget_table);
  TEST_RUN(test_window_and_sleep_edges);
  return TEST_DONE();
}
