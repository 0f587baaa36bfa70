/* ejson_int.h -- what the Extended JSON reader, its writer and the
 * stored-body check share (private to src/doc/ejson*.c and bcheck.c). */
#ifndef DTX_EJSON_INT_H
#define DTX_EJSON_INT_H

#include "util/buf.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* The offset of the first byte of s[0..n) that does not start (or
 * continue) a well-formed UTF-8 sequence -- overlong forms, surrogates
 * and code points past U+10FFFF are ill-formed -- or n when all of it is
 * valid.  NUL bytes are valid here (BSON strings may hold them; names are
 * checked for NUL apart).  ASCII runs are skipped 8 bytes at a time: this
 * is on the path of every stored read. */
size_t dtx__utf8_valid_prefix(const uint8_t *s, size_t n);

/* The regular expression option letters BSON allows, in the order BSON
 * stores them (alphabetical). */
#define DTX__BREGEX_OPTS "ilmsux"

/* ---- the reader's state (ejson.c; the $-wrappers in ejson_wrap.c) ---------- */

/* One name already written into out, for the duplicate check: the
 * document's number in this read and the name's offset in out (names are
 * NUL-terminated there). */
typedef struct dtx__ejslot {
  uint32_t id;
  uint32_t off; /* 0 = empty: no name starts at byte 0 */
} dtx__ejslot_t;

typedef struct dtx__ejr {
  const char *s; /* the text, s[0..n) */
  size_t n, i;   /* i: the cursor */
  dtx__buf_t out; /* the BSON bytes being written */
  dtx__buf_t tmp; /* a decoded name or wrapper string, used at once */
  dtx__ejslot_t *tab; /* names of documents past their first few */
  size_t cap, used;
  uint32_t ids;  /* documents opened so far */
  int depth;     /* documents open now */
} dtx__ejr_t;

/* DTX_EBADJSON with "line L col C (byte B): reason" for the text at `at`
 * (DTX_ENOMEM when the reason is that memory ran out). */
int dtx__ejr_err(dtx__ejr_t *r, size_t at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Skips JSON white space. */
void dtx__ejr_ws(dtx__ejr_t *r);
/* Skips white space and consumes c, or fails naming what was expected. */
int dtx__ejr_expect(dtx__ejr_t *r, char c, const char *what);
/* Reads a JSON string at the cursor (after white space), appending its
 * decoded bytes to *into (no NUL added); *at gets its position. */
int dtx__ejr_string(dtx__ejr_t *r, dtx__buf_t *into, size_t *at);
/* Reads a plain JSON integer at the cursor (after white space) into *v:
 * an error for a real, a string, anything else, or past int64. */
int dtx__ejr_integer(dtx__ejr_t *r, int64_t *v, size_t *at);
/* Reads a document ('{' ... '}', not a wrapper) into out, counting one
 * level of depth; at: where it starts. */
int dtx__ejr_document(dtx__ejr_t *r, size_t at);
/* 1 when name is one of the keys that make an object a type wrapper
 * ($oid, $date, ...: the first key decides). */
int dtx__ejr_is_wrapper(const char *name, size_t len);
/* Reads the rest of a wrapper object whose first key was name (at `at`,
 * the ':' consumed) and writes its value into out; the element's type
 * byte is out.p[type_at]. */
int dtx__ejr_wrapper(dtx__ejr_t *r, const char *name, size_t len,
                     size_t type_at, size_t at);

/* Days from 1970-01-01 to the proleptic Gregorian date y-m-d (m 1..12). */
int64_t dtx__ejd_days(int64_t y, int m, int d);

/* Little-endian writers into a dtx__buf (sticky out-of-memory). */
void dtx__ejr_put32(dtx__buf_t *b, uint32_t v);
void dtx__ejr_put64(dtx__buf_t *b, uint64_t v);

#endif
