/* test_cron.c -- the cron parser and next-fire arithmetic (util/cron.h,
 * docs/jobs.md "Schedules"): tables of texts that parse or fail naming
 * their field, and of (expression, after) -> next fire, at the calendar's
 * edges: Feb 29, the 31st, year ends, the Vixie day-of-month/day-of-week
 * OR rule, steps that overflow their field, Feb 30 that never fires.  UTC
 * only: no daylight-saving gap or repeat exists. */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "doctx.h"
#include "testlib.h"
#include "util/cron.h"

/* "YYYY-MM-DD HH:MM" UTC -> ms (timegm: an implementation independent of
 * cron.c's civil arithmetic). */
static int64_t at(const char *s) {
  struct tm tm = {0};
  if (!strptime(s, "%Y-%m-%d %H:%M", &tm))
    return -2;
  return (int64_t)timegm(&tm) * 1000;
}

static void test_bad_text(void) {
  static const struct {
    const char *text, *names; /* what the detail must contain */
  } rows[] = {
      {"", "minute missing"},
      {"* * * *", "day-of-week missing"},
      {"* * * * * *", "more than five fields"},
      {"60 * * * *", "minute: 60 is out of 0..59"},
      {"* 24 * * *", "hour: 24 is out of 0..23"},
      {"* * 0 * *", "day-of-month: 0 is out of 1..31"},
      {"* * 32 * *", "day-of-month: 32"},
      {"* * * 13 *", "month: 13"},
      {"* * * * 8", "day-of-week: 8"},
      {"*/0 * * * *", "minute: step"},
      {"*/61 * * * *", "minute: step"},
      {"*/4294967297 * * * *", "minute: step"},
      {"* */99999999999999999999 * * *", "hour: step"},
      {"1000 * * * *", "minute: number too long"},
      {"5-1 * * * *", "minute: range 5-1 runs backwards"},
      {"* * * foo *", "month: expected a number or a name"},
      {"* * * * mon-", "day-of-week: expected"},
      {"a * * * *", "minute: expected a number at"},
      {"1,,2 * * * *", "minute: expected"},
      {"*5 * * * *", "minute: unexpected '5'"},
      {"* * * january *", "month: expected a number or a name"},
      {"-1 * * * *", "minute: expected"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    dtx__cron_t c;
    int rc = dtx__cron_parse(rows[i].text, &c);
    CHECKF(rc == DTX_EINVAL, "'%s' -> %d", rows[i].text, rc);
    CHECKF(strstr(dtx_errdetail(), rows[i].names) != NULL,
           "'%s': detail '%s' lacks '%s'", rows[i].text, dtx_errdetail(),
           rows[i].names);
  }
  char big[DTX__CRON_MAX + 8];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = 0;
  CHECK(dtx__cron_parse(big, &(dtx__cron_t){0}) == DTX_EINVAL);
  CHECK(dtx__cron_parse(NULL, &(dtx__cron_t){0}) == DTX_EINVAL);
}

static void test_next_table(void) {
  static const struct {
    const char *cron, *after, *next; /* next NULL: never (in 5 years) */
  } rows[] = {
      {"* * * * *", "2026-03-01 10:00", "2026-03-01 10:01"},
      {"*/5 * * * *", "2026-03-01 10:03", "2026-03-01 10:05"},
      {"*/5 * * * *", "2026-03-01 23:57", "2026-03-02 00:00"},
      {"0 0 1 1 *", "2026-12-31 23:59", "2027-01-01 00:00"},
      {"0 12 31 * *", "2026-04-01 00:00", "2026-05-31 12:00"}, /* no Apr 31 */
      {"0 0 29 2 *", "2026-03-01 00:00", "2028-02-29 00:00"},
      {"0 0 29 2 *", "2096-03-01 00:00", NULL}, /* 2100 is no leap year */
      {"0 0 30 2 *", "2026-01-01 00:00", NULL}, /* never */
      {"0 0 31 4,6,9,11 *", "2026-01-01 00:00", NULL},
      /* Vixie: both restricted -> either; one '*' -> the other alone */
      {"0 0 13 * fri", "2026-03-01 00:00", "2026-03-06 00:00"},
      {"0 0 13 * 5", "2026-03-07 00:00", "2026-03-13 00:00"},
      {"0 0 * * fri", "2026-03-01 00:00", "2026-03-06 00:00"},
      {"0 0 */31 * 1", "2026-03-01 00:00", "2026-06-01 00:00"}, /* '*': AND */
      {"0 0 1 * 7", "2026-03-02 00:00", "2026-03-08 00:00"},     /* 7: Sun */
      {"30 8 * jan-mar mon-fri", "2026-03-31 09:00", "2027-01-01 08:30"},
      {"5/20 * * * *", "2026-03-01 10:26", "2026-03-01 10:45"},
      {"10-20/5 3 * * *", "2026-03-01 03:20", "2026-03-02 03:10"},
      {"59 23 31 12 *", "2026-12-31 23:59", "2027-12-31 23:59"},
      {"0 0 * * SUN", "1970-01-01 00:00", "1970-01-04 00:00"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    dtx__cron_t c;
    int rc = dtx__cron_parse(rows[i].cron, &c);
    CHECKF(rc == 0, "'%s': %s", rows[i].cron, dtx_errdetail());
    if (rc)
      continue;
    int64_t n = dtx__cron_next(&c, at(rows[i].after), 5 * 366);
    int64_t want = rows[i].next ? at(rows[i].next) : -1;
    CHECKF(n == want, "'%s' after %s: %lld, want %lld", rows[i].cron,
           rows[i].after, (long long)n, (long long)want);
    if (n > 0)
      CHECK(dtx__cron_matches(&c, n));
    if (n > 0) /* strictly after, also from the middle of a minute */
      CHECK(dtx__cron_next(&c, n - 1, 5 * 366) == n &&
            dtx__cron_next(&c, n - 30000, 5 * 366) == n);
  }
}

static void test_matches(void) {
  dtx__cron_t c;
  REQUIRE(dtx__cron_parse("*/15 * * * *", &c) == 0);
  CHECK(dtx__cron_matches(&c, at("2026-03-01 10:15")));
  CHECK(!dtx__cron_matches(&c, at("2026-03-01 10:16")));
  CHECK(!dtx__cron_matches(&c, at("2026-03-01 10:15") + 1)); /* not whole */
  CHECK(!dtx__cron_matches(&c, -60000));
  /* the far end of time: no overflow, just none */
  CHECK(dtx__cron_next(&c, INT64_MAX - 1, 5 * 366) == -1);
  CHECK(dtx__cron_next(&c, -5, 1) == 0);
}

int main(void) {
  TEST_RUN(test_bad_text);
  TEST_RUN(test_next_table);
  TEST_RUN(test_matches);
  return TEST_DONE();
}
