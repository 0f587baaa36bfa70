/* buf.c -- the growable byte buffer (buf.h): doubling growth, sticky
 * out-of-memory. */
#include "util/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int dtx__buf_reserve(dtx__buf_t *b, size_t more) {
  if (b->oom)
    return 0;
  if (b->n + more <= b->cap)
    return 1;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->n + more)
    cap *= 2;
  char *p = realloc(b->p, cap);
  if (!p) {
    b->oom = 1;
    return 0;
  }
  b->p = p;
  b->cap = cap;
  return 1;
}

void dtx__buf_put(dtx__buf_t *b, const void *p, size_t n) {
  if (n && dtx__buf_reserve(b, n)) {
    memcpy(b->p + b->n, p, n);
    b->n += n;
  }
}

int dtx__grow(void *arrp, size_t *cap, size_t elem, size_t first) {
  void *arr;
  size_t ncap = *cap ? *cap * 2 : first;
  if (ncap > SIZE_MAX / elem)
    return -1;
  memcpy(&arr, arrp, sizeof arr);
  if (!(arr = realloc(arr, ncap * elem)))
    return -1;
  memcpy(arrp, &arr, sizeof arr);
  *cap = ncap;
  return 0;
}

size_t dtx__itoa(long long v, char out[24]) {
  char tmp[24];
  size_t i = sizeof tmp;
  /* Negate in unsigned arithmetic so LLONG_MIN needs no special case. */
  unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v
                               : (unsigned long long)v;
  do {
    tmp[--i] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  if (v < 0)
    tmp[--i] = '-';
  memcpy(out, tmp + i, sizeof tmp - i);
  return sizeof tmp - i;
}
