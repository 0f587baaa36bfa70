/* cron.h -- five-field cron expressions in UTC (job schedules,
 * src/txn/jobq/sched.c; docs/jobs.md "Schedules").
 *
 *   minute hour day-of-month month day-of-week
 *   0-59   0-23 1-31         1-12  0-7 (0 and 7: Sunday)
 *
 * Each field is a comma list of items; an item is `*`, N, N-M, each
 * optionally /STEP (1..the field's span; N/STEP means N-max/STEP), and
 * months and days may be named by their first three letters (jan, mon;
 * any case).  Day-of-month and day-of-week follow Vixie cron: when both
 * are restricted (neither starts with `*`) a day matches when EITHER
 * does; otherwise both must (a `*` one always does).  No time zone and no
 * daylight saving: every time is UTC milliseconds since the epoch. */
#ifndef DTX_UTIL_CRON_H
#define DTX_UTIL_CRON_H

#include <stdint.h>

typedef struct dtx__cron {
  uint64_t minute; /* bit m: minute m matches */
  uint32_t hour;   /* bit h */
  uint32_t dom;    /* bit d, 1..31 */
  uint16_t month;  /* bit m, 1..12 */
  uint8_t dow;     /* bit d, 0..6 (7 is folded into 0) */
  uint8_t dom_star, dow_star; /* the field starts with '*' */
} dtx__cron_t;

/* The longest cron text accepted. */
#define DTX__CRON_MAX 256

/* Parses text into *c: 0, or DTX_EINVAL naming the field ("cron
 * day-of-month: 32 is out of 1..31"). */
int dtx__cron_parse(const char *text, dtx__cron_t *c);

/* The first time c fires strictly after `after` (UTC ms; a whole minute),
 * looking at most `horizon_days` days ahead: -1 when there is none in
 * that span (Feb 30 never fires).  after < 0 counts from 0. */
int64_t dtx__cron_next(const dtx__cron_t *c, int64_t after, int horizon_days);

/* 1 when t (UTC ms) is a time c fires at (a whole minute that matches). */
int dtx__cron_matches(const dtx__cron_t *c, int64_t t);

#endif
