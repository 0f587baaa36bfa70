/* bfilterdiff.c -- the BSON leg of the filter tables (bfilterdiff.h):
 * dtx_t_filter_table and the invalid-filter and position tables call
 * dtx_t_bfilter_row for every row, and the counts (rows through both
 * engines, rows skipped and why) print when the program exits. */
#include "bfilterdiff.h"
#include "testlib.h"

#include <stdlib.h>

#define MAX_REASONS 8

static struct {
  int registered;
  size_t same, skipped;
  struct {
    char why[96];
    size_t n;
  } reasons[MAX_REASONS];
} counts;

static void print_counts(void) {
  printf("     bfilter differential: %zu rows through both engines, %zu "
         "skipped\n",
         counts.same, counts.skipped);
  for (int i = 0; i < MAX_REASONS && counts.reasons[i].n; i++)
    printf("       skipped %zu: %s\n", counts.reasons[i].n,
           counts.reasons[i].why);
}

static void count_skip(const char *why) {
  counts.skipped++;
  int i = 0;
  for (; i < MAX_REASONS && counts.reasons[i].n; i++)
    if (!strncmp(counts.reasons[i].why, why, sizeof counts.reasons[i].why - 1))
      break;
  if (i == MAX_REASONS)
    i = MAX_REASONS - 1; /* the last slot takes the rest */
  if (!counts.reasons[i].n)
    snprintf(counts.reasons[i].why, sizeof counts.reasons[i].why, "%s", why);
  counts.reasons[i].n++;
}

void dtx_t_bfilter_row(const char *table, size_t i, const json_t *spec,
                       const json_t *doc) {
  if (!counts.registered) {
    counts.registered = 1;
    atexit(print_counts);
  }
  bfd_out_t o;
  int v = bfd_run(spec, doc, &o);
  if (v == BFD_SKIP) {
    count_skip(o.why);
    return;
  }
  if (v == BFD_SAME)
    counts.same++;
  CHECKF(v == BFD_SAME, "bson %s[%zu] filter %s doc %s: %s", table, i,
         JS(spec), JS(doc), o.why);
}
