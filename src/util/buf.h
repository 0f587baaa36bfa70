/* buf.h -- a growable byte buffer for the backends' encoders.
 *
 * Running out of memory is sticky: the first failed growth sets oom and
 * every later write is dropped, so an encoder writes on without checking
 * and looks at oom once at the end.  A zeroed dtx__buf_t is empty; the
 * buffer owns p (free it with free()). */
#ifndef DTX_UTIL_BUF_H
#define DTX_UTIL_BUF_H

#include <stddef.h>

typedef struct dtx__buf {
  char *p;
  size_t n, cap;
  int oom;
} dtx__buf_t;

/* Room for `more` bytes after n: 1, or 0 (and oom set) when it cannot
 * grow or oom is already set. */
int dtx__buf_reserve(dtx__buf_t *b, size_t more);

/* Appends n bytes of p (dropped when out of memory). */
void dtx__buf_put(dtx__buf_t *b, const void *p, size_t n);

/* v in decimal, as "%lld" prints it, into out (not NUL-terminated);
 * returns the length.  Without snprintf: keys, _id encodings and integer
 * fields are formatted for every operation of every backend, and the
 * formatting showed in profiles of batched transfers. */
size_t dtx__itoa(long long v, char out[24]);

/* Doubles the capacity of the array ARR (a T *, NULL when CAP is 0) to
 * CAP*2 elements, or FIRST when CAP is 0: 0, or -1 with ARR and CAP as
 * they were when memory ran out (the caller says what it was doing).
 * `if (n == cap && DTX__GROW(arr, cap, 16)) return <out of memory>;` */
#define DTX__GROW(arr, cap, first)                                       \
  dtx__grow(&(arr), &(cap), sizeof *(arr), (first))
/* arrp is a T **: read and written with memcpy, as pointers to objects
 * share one representation on every POSIX system. */
int dtx__grow(void *arrp, size_t *cap, size_t elem, size_t first);

#endif
