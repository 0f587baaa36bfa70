/* schema_where.c -- schema_where.h. */
#include "doc/schema_where.h"

#include "util/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Plain copies, not snprintf: every property of every write's schema
 * check passes here, and formatting showed in profiles (~3 % of a batched
 * transfer on SQLite). */
static void where_add(dtx__where_t *w, const char *t, size_t len) {
  size_t room = sizeof w->buf - 1 - w->n;
  if (len > room)
    len = room;
  memcpy(w->buf + w->n, t, len);
  w->n += len;
  w->buf[w->n] = '\0';
}

size_t dtx__where_push(dtx__where_t *w, const char *prefix, const char *s,
                       size_t i) {
  size_t save = w->n;
  if (w->n)
    where_add(w, ".", 1);
  if (s) {
    where_add(w, prefix, strlen(prefix));
    where_add(w, s, strlen(s));
  } else {
    char num[24];
    int k = snprintf(num, sizeof num, "%zu", i);
    where_add(w, num, (size_t)k);
  }
  return save;
}

void dtx__where_pop(dtx__where_t *w, size_t save) {
  w->n = save;
  w->buf[w->n] = '\0';
}

const char *dtx__where_at(const dtx__where_t *w) {
  return w->n ? w->buf : "(top)";
}

int dtx__where_bad(const dtx__where_t *w, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return dtx__err(DTX_EBADQUERY, "$jsonSchema at %s: %s", dtx__where_at(w),
                  msg);
}
