/* err.c -- the error table and the thread-local detail message.
 *
 * The codes and their texts come from DTX_ERRNO_MAP in doctx.h, so adding
 * an error is one line there. */
#include "util/err.h"

#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define DETAIL_MAX 512
static _Thread_local char detail[DETAIL_MAX];

const char *dtx_strerror(int err) {
  switch (err) {
  case DTX_OK:
    return "success";
#define X(name, code, msg)                                                   \
  case code:                                                                 \
    return msg;
    DTX_ERRNO_MAP(X)
#undef X
  }
  return "unknown error";
}

const char *dtx_errname(int err) {
  switch (err) {
  case DTX_OK:
    return "OK";
#define X(name, code, msg)                                                   \
  case code:                                                                 \
    return #name;
    DTX_ERRNO_MAP(X)
#undef X
  }
  return "UNKNOWN";
}

const char *dtx_errdetail(void) { return detail; }

void dtx__err_clear(void) { detail[0] = '\0'; }

int dtx__err(int code, const char *fmt, ...) {
  /* Formatted apart, then copied: an argument may be dtx_errdetail()
   * itself (a caller adding context), and vsnprintf into the buffer it
   * reads from is undefined. */
  char text[DETAIL_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  size_t len = (size_t)n < sizeof text ? (size_t)n : sizeof text - 1;
  memcpy(detail, text, len);
  detail[len] = '\0';
  return code;
}

int dtx__err_wrap(int code, const char *fmt, ...) {
  char prefix[DETAIL_MAX], old[DETAIL_MAX];
  va_list ap;
  memcpy(old, detail, sizeof old);
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  /* Truncation of an over-long detail is fine; say so to the compiler. */
  int n = snprintf(detail, sizeof detail, "%s", prefix);
  if (old[0] && n >= 0 && (size_t)n + 2 < sizeof detail)
    snprintf(detail + n, sizeof detail - (size_t)n, ": %.*s",
             (int)(sizeof detail - (size_t)n - 3), old);
  return code;
}

int dtx__bad_byte(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
      return (int)(i < INT_MAX ? i : INT_MAX);
  return -1;
}

int dtx__utf8_ok(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    unsigned c = u[i];
    size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2
                 : c >= 0xe0 && c <= 0xef           ? 3
                 : c >= 0xf0 && c <= 0xf4           ? 4
                                                    : 0;
    if (!len || (c == 0 && len == 1) || i + len > n)
      return 0;
    for (size_t k = 1; k < len; k++)
      if ((u[i + k] & 0xc0) != 0x80)
        return 0;
    /* overlong forms, UTF-16 surrogates and past U+10FFFF */
    if ((c == 0xe0 && u[i + 1] < 0xa0) || (c == 0xed && u[i + 1] >= 0xa0) ||
        (c == 0xf0 && u[i + 1] < 0x90) || (c == 0xf4 && u[i + 1] >= 0x90))
      return 0;
    i += len;
  }
  return 1;
}

int dtx__check_word(const char *what, const char *s, size_t max,
                    const char *punct) {
  size_t n = s ? strlen(s) : 0;
  int ok = n >= 1 && n <= max;
  for (size_t i = 0; ok && i < n; i++) {
    char c = s[i];
    ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || (c && strchr(punct, c));
  }
  if (ok)
    return 0;
  /* A byte outside printable ASCII (0xff, not UTF-8) is named, never
   * quoted: a detail stays text any JSON answer can carry. */
  int bad = s ? dtx__bad_byte(s, n < 140 ? n : 140) : -1;
  if (bad >= 0)
    return dtx__err(DTX_EINVAL, "%s has byte 0x%02x at offset %d: must be "
                    "1..%zu of [A-Za-z0-9%s]", what,
                    (unsigned char)s[bad], bad, max, punct);
  return dtx__err(DTX_EINVAL, "%s '%.140s': must be 1..%zu of "
                  "[A-Za-z0-9%s]", what, s ? s : "(null)", max, punct);
}
