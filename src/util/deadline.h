/* deadline.h -- one wall-time budget per command, per thread.
 *
 * Every layer that waits (the kit's retry of transient errors, the Redis
 * backend's backoff, the SQLite busy handler) used to have its own
 * window, and the windows multiplied: a transfer against a paused Redis
 * server waited retry_ms per store call, four calls per step, many steps.
 * Now a public call opens a frame on its thread, and every waiting loop
 * below it asks this module whether to go on, so the windows no longer
 * add up: one budget bounds the whole call.
 *
 * A frame is hard or soft:
 *  - hard (budget_ms > 0): the deadline is now + budget_ms, saturated:
 *    a budget too large for int64 (up to INT64_MAX) is "no deadline in
 *    practice", never a deadline that wrapped into the past;
 *  - soft (budget_ms == 0): the deadline is set by the store itself, the
 *    first time one of its operations has to wait -- to the end of that
 *    operation's own retry window (Redis: retry_ms after it started;
 *    SQLite: the busy timeout).  So by default a command gives up when
 *    the store's window runs out once, not once per step, and the kit
 *    needs to know nothing about the store's options.
 * Frames nest (a public call made by another keeps the outer deadline,
 * or a tighter one).  Outside any frame a store loop keeps its own
 * per-operation window, exactly as before.
 *
 * A call that is cut short fails with DTX_EUNAVAILABLE; its detail names
 * what it was waiting for.  The socket timeout of a request already in
 * flight (Redis timeout_ms) is not cut: it is the slack on top of the
 * budget. */
#ifndef DTX_UTIL_DEADLINE_H
#define DTX_UTIL_DEADLINE_H

#include <stdint.h>

/* Milliseconds on the monotonic clock. */
int64_t dtx__mono_ms(void);

/* a + b, saturated at INT64_MAX / INT64_MIN instead of wrapping.  Every
 * "time + duration" in doctx goes through it or through a bound checked
 * before it (docs/deadlines.md, "Huge durations"): a wrapped sum is a
 * time in the past, so a budget of INT64_MAX ms would mean "already
 * expired" -- a command that skips everything and reports success. */
static inline int64_t dtx__add_sat(int64_t a, int64_t b) {
  int64_t s;
  if (__builtin_add_overflow(a, b, &s))
    return b > 0 ? INT64_MAX : INT64_MIN;
  return s;
}

/* a - b, saturated likewise: for "how long ago" and "how long left" of a
 * time read from a document, which a bypassing write may have set to
 * anything (INT64_MIN included). */
static inline int64_t dtx__sub_sat(int64_t a, int64_t b) {
  int64_t s;
  if (__builtin_sub_overflow(a, b, &s))
    return b < 0 ? INT64_MAX : INT64_MIN;
  return s;
}

/* What enter saved, for leave to restore.  Opaque to callers. */
typedef struct dtx__deadline_frame {
  int64_t at;     /* absolute deadline (mono ms); 0 while unarmed */
  int64_t budget; /* the budget that set `at`, for messages */
  int open;       /* a frame is open on this thread */
} dtx__deadline_frame_t;

/* Opens a frame with budget_ms (> 0 hard, 0 soft; see above), saving the
 * thread's previous state in *saved.  Every enter needs its leave. */
void dtx__deadline_enter(dtx__deadline_frame_t *saved, int64_t budget_ms);

/* Closes the frame opened by the enter that filled saved. */
void dtx__deadline_leave(const dtx__deadline_frame_t *saved);

/* For a store's retry loop, before it waits again: 1 when it must give
 * up now -- its own operation's window (window_ms from op_start_ms, mono
 * ms) has passed, or the command's deadline has.  In an unarmed soft
 * frame the first call arms the frame's deadline at the end of this
 * operation's window. */
int dtx__deadline_expired(int64_t op_start_ms, int64_t window_ms);

/* 1 when the current frame has an armed deadline that has passed. */
int dtx__deadline_passed(void);

/* Milliseconds left before the current frame's deadline (>= 0), or
 * INT64_MAX when none is armed.  Loops cap their sleeps with it. */
int64_t dtx__deadline_left_ms(void);

/* The budget (ms) behind the armed deadline, 0 when none: for messages. */
int64_t dtx__deadline_budget_ms(void);

/* Sleeps ms milliseconds, or less when the deadline comes first. */
void dtx__deadline_sleep_ms(int64_t ms);

#endif
