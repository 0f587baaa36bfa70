/* stats.c -- process-wide counters for benchmarks.
 *
 * store.c counts every public dtx_store_* call here; the transfer benchmark
 * divides by the number of transfers to report store operations per
 * transfer.  The Redis backend's executor also counts its network
 * exchanges (round trips) and the commands they carried, so bench_redis
 * can say how much of the server's capacity one transfer costs.  Relaxed
 * atomics: statistics, not synchronisation points. */
#include <stdatomic.h>

#include "store/store.h"

static atomic_llong calls;
static atomic_llong round_trips;
static atomic_llong commands;

void dtx__store_count_call(void) {
  atomic_fetch_add_explicit(&calls, 1, memory_order_relaxed);
}

int64_t dtx__store_calls(void) {
  return (int64_t)atomic_load_explicit(&calls, memory_order_relaxed);
}

void dtx__store_count_rt(int64_t rts, int64_t cmds) {
  atomic_fetch_add_explicit(&round_trips, rts, memory_order_relaxed);
  atomic_fetch_add_explicit(&commands, cmds, memory_order_relaxed);
}

int64_t dtx__store_round_trips(void) {
  return (int64_t)atomic_load_explicit(&round_trips, memory_order_relaxed);
}

int64_t dtx__store_commands(void) {
  return (int64_t)atomic_load_explicit(&commands, memory_order_relaxed);
}
