/* bench_common.h -- what the benchmarks share: the clock, the percentile,
 * a transfer pair and one timed doctx transfer (so that bench_transfer
 * (SQLite) and bench_redis measure the doctx side the same way), and a
 * field's sum over a collection (the check that no update was lost).
 * Header-only (static inline): each benchmark is one executable. */
#ifndef DTX_BENCH_COMMON_H
#define DTX_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctx.h"

typedef struct pair {
  int from, to;
  int64_t amount;
} pair_t;

static inline double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Wall-clock microseconds: what a job's "finished" stamp (ms) compares to. */
static inline double wall_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static inline int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The p-quantile of v[0..n) (sorts v in place). */
static inline double pct(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[(int)(p * (n - 1))];
}

/* The sum of the integer field `field` over coll's documents, in *sum. */
static inline int bench_sum(dtx_store_t *st, const char *coll,
                            const char *field, int64_t *sum) {
  json_t *docs, *d;
  size_t i;
  int rc = dtx_store_find(st, coll, NULL, NULL, &docs);
  *sum = 0;
  if (rc < 0)
    return rc;
  json_array_foreach(docs, i, d) *sum += json_integer_value(json_object_get(d, field));
  json_decref(docs);
  return 0;
}

/* Runs one transfer a<from> -> a<to> to its end; *lat receives its
 * latency in microseconds.  Returns 1 when it succeeded. */
static inline int bench_transfer_one(dtx_store_t *st, const pair_t *p,
                                     double *lat) {
  char from[32], to[32];
  snprintf(from, sizeof from, "a%d", p->from);
  snprintf(to, sizeof to, "a%d", p->to);
  dtx_transfer_req_t req = {.from = from, .to = to, .amount = p->amount};
  json_t *tx = NULL;
  double t0 = now_us();
  int rc = dtx_transfer_execute(st, &req, NULL, &tx);
  *lat = now_us() - t0;
  const char *s = json_string_value(json_object_get(tx, "state"));
  int ok = rc == 0 && s && strcmp(s, "succeeded") == 0;
  json_decref(tx);
  return ok;
}

#endif
