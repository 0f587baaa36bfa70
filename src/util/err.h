/* err.h -- raising doctx errors with a detail message.
 *
 * Every layer reports failure as a negative DTX_E* code (include/doctx.h)
 * and records a human-readable detail in a thread-local buffer, which
 * dtx_errdetail() returns.  Backends map their own errors into this space
 * here, so nothing backend-specific reaches the caller. */
#ifndef DTX_UTIL_ERR_H
#define DTX_UTIL_ERR_H

#include "doctx.h"

/* Records the printf-style detail for code and returns code, so callers can
 * write `return dtx__err(DTX_EBADQUERY, "unknown operator %s", op);`. */
int dtx__err(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* How many codes DTX_ERRNO_MAP has: they run -1, -2, ... -DTX__NCODES,
 * so DTX__IS_CODE(rc) says rc is 0 or one of them. */
#define DTX__COUNT_CODE(name, code, msg) +1
enum { DTX__NCODES = 0 DTX_ERRNO_MAP(DTX__COUNT_CODE) };
#undef DTX__COUNT_CODE
#define DTX__IS_CODE(rc) ((rc) <= 0 && (rc) >= -DTX__NCODES)

/* Clears this thread's detail (called at the top of each public entry). */
void dtx__err_clear(void);

/* Prefixes the current detail with context, keeping the code: "ctx: old". */
int dtx__err_wrap(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Checks a name a user gives (an id, a key, a rule name): 1..max bytes of
 * [A-Za-z0-9] and the characters of punct (e.g. "_-").  0, or DTX_EINVAL
 * naming what, the name and the rule. */
int dtx__check_word(const char *what, const char *s, size_t max,
                    const char *punct);

/* The offset of the first of the n bytes at s outside printable ASCII
 * (a control byte, DEL, or any byte >= 0x80), or -1: a name holding one
 * is named by that byte in an error detail, never quoted, so the detail
 * stays valid UTF-8 (a JSON answer can carry it). */
int dtx__bad_byte(const char *s, size_t n);

/* 1 when the n bytes at s are valid UTF-8 without a NUL (what jansson
 * takes as a string), else 0: a free-form text a caller gives (a job's
 * unique key, a sync master id) is checked with it, so a bad byte is
 * DTX_EINVAL rather than an out-of-memory from building its document. */
int dtx__utf8_ok(const char *s, size_t n);

#endif
