/* stats.c -- process-wide operation counter for benchmarks.
 *
 * store.c counts every public dtx_store_* call here; the transfer benchmark
 * divides by the number of transfers to report store operations per
 * transfer.  Relaxed atomics: a statistic, not a synchronisation point. */
#include <stdatomic.h>

#include "store/store.h"

static atomic_llong calls;

void dtx__store_count_call(void) {
  atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
}

int64_t dtx__store_calls(void) {
  return (int64_t)atomic_load_explicit(&calls, memory_order_relaxed);
}
