/* deadline.c -- the per-thread command deadline (deadline.h says why).
 *
 * The state is one small thread-local struct; entering a frame copies it
 * out and leaving copies it back, so nesting needs no allocation. */
#include "util/deadline.h"

#include <errno.h>
#include <time.h>

static _Thread_local dtx__deadline_frame_t cur;

int64_t dtx__mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dtx__deadline_enter(dtx__deadline_frame_t *saved, int64_t budget_ms) {
  *saved = cur;
  if (!cur.open) {
    cur.open = 1;
    cur.at = 0;
    cur.budget = 0;
  }
  if (budget_ms > 0) {
    int64_t at = dtx__add_sat(dtx__mono_ms(), budget_ms);
    if (cur.at == 0 || at < cur.at) { /* a nested frame only tightens */
      cur.at = at;
      cur.budget = budget_ms;
    }
  }
}

void dtx__deadline_leave(const dtx__deadline_frame_t *saved) { cur = *saved; }

int dtx__deadline_expired(int64_t op_start_ms, int64_t window_ms) {
  int64_t now = dtx__mono_ms(),
          op_stop_ms = dtx__add_sat(op_start_ms, window_ms);
  if (cur.open && cur.at == 0) {
    /* Soft frame: the store's own window, once, is the command's. */
    cur.at = op_stop_ms;
    cur.budget = window_ms;
  }
  if (now >= op_stop_ms)
    return 1;
  return cur.open && now >= cur.at;
}

int dtx__deadline_passed(void) {
  return cur.open && cur.at != 0 && dtx__mono_ms() >= cur.at;
}

int64_t dtx__deadline_left_ms(void) {
  if (!cur.open || cur.at == 0)
    return INT64_MAX;
  int64_t left = cur.at - dtx__mono_ms();
  return left > 0 ? left : 0;
}

int64_t dtx__deadline_budget_ms(void) {
  return cur.open && cur.at != 0 ? cur.budget : 0;
}

void dtx__deadline_sleep_ms(int64_t ms) {
  int64_t left = dtx__deadline_left_ms();
  if (ms > left)
    ms = left;
  if (ms <= 0)
    return;
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}
