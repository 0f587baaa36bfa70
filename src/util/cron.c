/* cron.c -- the cron parser and its next-fire arithmetic (cron.h).
 * Table-driven: one row per field gives its span and names, and every
 * field goes through the same item parser, so a bound or a step is
 * checked once for all five.  Days are counted with the proleptic
 * Gregorian civil calendar (days_from_civil / civil_from_days), so the
 * search needs neither timegm nor a time zone. */
#include "util/cron.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "doctx.h"
#include "util/err.h"

typedef struct field {
  const char *name;
  int lo, hi;
  const char *const *names; /* names[i] is value lo + i (NULL: none) */
} field_t;

static const char *const months[] = {"jan", "feb", "mar", "apr", "may",
                                     "jun", "jul", "aug", "sep", "oct",
                                     "nov", "dec", NULL};
static const char *const days[] = {"sun", "mon", "tue", "wed",
                                   "thu", "fri", "sat", NULL};

static const field_t fields[5] = {
    {"minute", 0, 59, NULL},     {"hour", 0, 23, NULL},
    {"day-of-month", 1, 31, NULL}, {"month", 1, 12, months},
    {"day-of-week", 0, 7, days},
};

/* One value of field f at *p: a number (at most 3 digits: no overflow)
 * or a name.  *v the value; 0 or DTX_EINVAL. */
static int value(const field_t *f, const char **p, int *v) {
  const char *s = *p;
  if (isdigit((unsigned char)*s)) {
    int n = 0, digits = 0;
    while (isdigit((unsigned char)*s)) {
      if (++digits > 3)
        return dtx__err(DTX_EINVAL, "cron %s: number too long at '%.8s'",
                        f->name, *p);
      n = n * 10 + (*s++ - '0');
    }
    if (n < f->lo || n > f->hi)
      return dtx__err(DTX_EINVAL, "cron %s: %d is out of %d..%d", f->name, n,
                      f->lo, f->hi);
    *v = n;
    *p = s;
    return 0;
  }
  for (int i = 0; f->names && f->names[i]; i++)
    if (strncasecmp(s, f->names[i], 3) == 0 && !isalpha((unsigned char)s[3])) {
      *v = f->lo + i;
      *p = s + 3;
      return 0;
    }
  return dtx__err(DTX_EINVAL, "cron %s: expected a number%s at '%.8s'",
                  f->name, f->names ? " or a name" : "", s);
}

/* One comma-separated field (text up to a blank or the end) into bits. */
static int field(const field_t *f, const char **p, uint64_t *bits,
                 uint8_t *star) {
  const char *s = *p;
  int rc;
  *bits = 0;
  *star = *s == '*';
  for (;;) {
    int a, b, step = 1, whole = 0;
    if (*s == '*') {
      a = f->lo;
      b = f->hi;
      whole = 1;
      s++;
    } else {
      if ((rc = value(f, &s, &a)))
        return rc;
      b = a;
      if (*s == '-') {
        s++;
        if ((rc = value(f, &s, &b)))
          return rc;
        if (b < a)
          return dtx__err(DTX_EINVAL, "cron %s: range %d-%d runs backwards",
                          f->name, a, b);
      }
    }
    if (*s == '/') {
      const char *t = ++s;
      int n = 0, digits = 0;
      while (isdigit((unsigned char)*s) && digits < 4) {
        n = n * 10 + (*s++ - '0');
        digits++;
      }
      int span = f->hi - f->lo + 1;
      if (!digits || isdigit((unsigned char)*s) || n < 1 || n > span)
        return dtx__err(DTX_EINVAL, "cron %s: step '%.8s' must be 1..%d",
                        f->name, t, span);
      step = n;
      if (!whole && a == b) /* N/S: from N to the end, Vixie's extension */
        b = f->hi;
    }
    for (int v = a; v <= b; v += step)
      *bits |= 1ull << v;
    if (*s != ',')
      break;
    s++;
  }
  if (*s && *s != ' ' && *s != '\t')
    return dtx__err(DTX_EINVAL, "cron %s: unexpected '%c'", f->name,
                    isprint((unsigned char)*s) ? *s : '?');
  *p = s;
  return 0;
}

int dtx__cron_parse(const char *text, dtx__cron_t *c) {
  memset(c, 0, sizeof *c);
  if (!text)
    return dtx__err(DTX_EINVAL, "cron: no expression");
  if (strlen(text) > DTX__CRON_MAX)
    return dtx__err(DTX_EINVAL, "cron: longer than %d bytes", DTX__CRON_MAX);
  const char *s = text;
  uint64_t bits[5];
  uint8_t star[5];
  for (int i = 0; i < 5; i++) {
    while (*s == ' ' || *s == '\t')
      s++;
    if (!*s)
      return dtx__err(DTX_EINVAL, "cron: %s missing (five fields: minute "
                      "hour day-of-month month day-of-week)",
                      fields[i].name);
    int rc = field(&fields[i], &s, &bits[i], &star[i]);
    if (rc)
      return rc;
  }
  while (*s == ' ' || *s == '\t')
    s++;
  if (*s)
    return dtx__err(DTX_EINVAL, "cron: more than five fields at '%.16s'", s);
  c->minute = bits[0];
  c->hour = (uint32_t)bits[1];
  c->dom = (uint32_t)bits[2];
  c->month = (uint16_t)bits[3];
  c->dow = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f); /* 7 is Sunday */
  c->dom_star = star[2];
  c->dow_star = star[4];
  return 0;
}

/* ---- calendar arithmetic (days since 1970-01-01, UTC) ----------------- */

static void civil(int64_t z, int64_t *y, int *m, int *d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

static int day_matches(const dtx__cron_t *c, int64_t day) {
  int64_t y;
  int m, d;
  civil(day, &y, &m, &d);
  if (!(c->month >> m & 1))
    return 0;
  int wd = (int)(((day % 7) + 7 + 4) % 7); /* 1970-01-01 was a Thursday */
  int dm = (int)(c->dom >> d & 1), dw = c->dow >> wd & 1;
  if (c->dom_star || c->dow_star)
    return dm && dw;
  return dm || dw; /* both restricted: either (Vixie) */
}

#define MIN_MS 60000LL
#define DAY_MS 86400000LL

int dtx__cron_matches(const dtx__cron_t *c, int64_t t) {
  if (t < 0 || t % MIN_MS)
    return 0;
  int64_t day = t / DAY_MS, mins = t % DAY_MS / MIN_MS;
  return day_matches(c, day) && (c->hour >> (mins / 60) & 1) &&
         (c->minute >> (mins % 60) & 1);
}

int64_t dtx__cron_next(const dtx__cron_t *c, int64_t after, int horizon_days) {
  /* The first whole minute strictly after `after` (0 for any negative;
   * none near the end of int64, where the sum would wrap). */
  if (after > INT64_MAX - 2 * DAY_MS)
    return -1;
  int64_t t = after < 0 ? 0 : (after / MIN_MS + 1) * MIN_MS;
  int64_t day = t / DAY_MS, from = t % DAY_MS / MIN_MS;
  for (int i = 0; i <= horizon_days; i++, day++, from = 0) {
    if (day >= INT64_MAX / DAY_MS - 1)
      return -1;
    if (!day_matches(c, day))
      continue;
    for (int64_t mins = from; mins < 24 * 60; mins++)
      if ((c->hour >> (mins / 60) & 1) && (c->minute >> (mins % 60) & 1))
        return day * DAY_MS + mins * MIN_MS;
  }
  return -1;
}
