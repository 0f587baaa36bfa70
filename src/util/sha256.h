/* sha256.h -- SHA-256 (FIPS 180-4), for names derived from user input
 * that must stay short and distinct whatever the input: two inputs that
 * give one name would have to be a SHA-256 collision.  Not for secrets
 * (no constant-time promise). */
#ifndef DTX_UTIL_SHA256_H
#define DTX_UTIL_SHA256_H

#include <stddef.h>

/* The digest of the n bytes at data as 64 lowercase hex digits and a NUL
 * in out.  Thread-safe; never allocates. */
void dtx__sha256_hex(const void *data, size_t n, char out[65]);

#endif
