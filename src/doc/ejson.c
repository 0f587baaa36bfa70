/* ejson.c -- the Extended JSON v2 reader: text straight into BSON bytes
 * (bdoc.h, dtx__ejson_read).  The $-wrappers are read in ejson_wrap.c.
 *
 * Our own reader rather than libbson's bson_new_from_json, because doctx
 * promises errors that one cannot give: the byte position and the reason,
 * duplicate names refused, NUL bytes refused, integers past int64 refused
 * (not turned into doubles), depth past DTX_MAX_DEPTH refused, and a
 * malformed wrapper ({"$numberLong": 5}) refused instead of read as a
 * plain object.  The reasons keep jansson's words where dtx__json_parse
 * gives them today ("duplicate object key", "too big integer", "end of
 * file expected", "unable to decode byte 0x..", ...) so a caller's message
 * does not change when a path moves to this reader; the position is
 * "line L col C (byte B)" (jansson's prefix plus the byte offset).
 *
 * It writes BSON bytes into one growing buffer (no json_t, no allocation
 * per field: names are checked for duplicates against offsets in that
 * buffer, linearly for a document's first few names, then in one hash
 * table shared by the whole read) and hands them to the caller's bson_t
 * with one copy at the end.
 *
 * Choices where Extended JSON leaves room (docs/engine.md):
 *  - \u0000 is allowed inside string values (BSON strings carry their
 *    length, MongoDB allows them) but not in names (BSON names are
 *    C strings).  A raw NUL byte in the text is always an error.
 *  - "$regex"/"$options" (the legacy regex form) are NOT a wrapper: they
 *    stay plain keys, because filters use them as the $regex operator.
 *    Likewise "$type" stays a plain key unless it follows a legacy
 *    {"$binary": "<base64>"} (the query operator $type must survive).
 *  - A type wrapper is recognised by its first key; a wrapper key after
 *    another key ({"a": 1, "$oid": ...}) is an error, as the Extended JSON
 *    spec says extra keys in a wrapper are.
 *  - A document larger than 16 MiB (DTX__DOC_MAX) is DTX_ELIMIT. */
#include "doc/bdoc.h"
#include "doc/ejson_int.h"
#include "util/assert.h"
#include "util/err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the BSON writers here assume a little-endian host"
#endif

/* ---- positions, errors, tokens ----------------------------------------------- */

int dtx__ejr_err(dtx__ejr_t *r, size_t at, const char *fmt, ...) {
  if (r->out.oom || r->tmp.oom)
    return dtx__err(DTX_ENOMEM, "out of memory reading Extended JSON");
  if (at > r->n)
    at = r->n;
  int line = 1;
  size_t ls = 0;
  for (size_t k = 0; k < at; k++)
    if (r->s[k] == '\n') {
      line++;
      ls = k + 1;
    }
  /* jansson counts the bytes it read on the line: the offending one
   * included, none at the end of the input */
  size_t col = at - ls + (at < r->n ? 1 : 0);
  char why[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  return dtx__err(DTX_EBADJSON, "line %d col %zu (byte %zu): %s", line, col,
                  at, why);
}

void dtx__ejr_ws(dtx__ejr_t *r) {
  while (r->i < r->n) {
    char c = r->s[r->i];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
      break;
    r->i++;
  }
}

/* Names the byte at the cursor for a message ("near 'x'"), keeping the
 * detail printable ASCII. */
static int unexpected(dtx__ejr_t *r, const char *expected) {
  if (r->i >= r->n)
    return dtx__ejr_err(r, r->i, "%s near end of file", expected);
  unsigned char c = (unsigned char)r->s[r->i];
  if (c == 0)
    return dtx__ejr_err(r, r->i, "NUL byte in the text");
  if (c > 0x20 && c < 0x7f)
    return dtx__ejr_err(r, r->i, "%s near '%c'", expected, c);
  return dtx__ejr_err(r, r->i, "%s near byte 0x%02x", expected, c);
}

int dtx__ejr_expect(dtx__ejr_t *r, char c, const char *what) {
  dtx__ejr_ws(r);
  if (r->i < r->n && r->s[r->i] == c) {
    r->i++;
    return 0;
  }
  return unexpected(r, what);
}

void dtx__ejr_put32(dtx__buf_t *b, uint32_t v) { dtx__buf_put(b, &v, 4); }
void dtx__ejr_put64(dtx__buf_t *b, uint64_t v) { dtx__buf_put(b, &v, 8); }

static void put8(dtx__buf_t *b, uint8_t v) { dtx__buf_put(b, &v, 1); }

static void patch32(dtx__buf_t *b, size_t at, uint32_t v) {
  if (!b->oom)
    memcpy(b->p + at, &v, 4);
}

/* ---- strings ------------------------------------------------------------------ */

static int hex4(const char *p, uint32_t *v) {
  uint32_t x = 0;
  for (int k = 0; k < 4; k++) {
    char c = p[k];
    x <<= 4;
    if (c >= '0' && c <= '9')
      x |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      x |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      x |= (uint32_t)(c - 'A' + 10);
    else
      return -1;
  }
  *v = x;
  return 0;
}

static void put_utf8(dtx__buf_t *b, uint32_t cp) {
  uint8_t u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (uint8_t)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (uint8_t)(0xC0 | cp >> 6);
    u[1] = (uint8_t)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (uint8_t)(0xE0 | cp >> 12);
    u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    u[2] = (uint8_t)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    u[0] = (uint8_t)(0xF0 | cp >> 18);
    u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
    u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
    u[3] = (uint8_t)(0x80 | (cp & 0x3F));
    n = 4;
  }
  dtx__buf_put(b, u, n);
}

int dtx__ejr_string(dtx__ejr_t *r, dtx__buf_t *into, size_t *at) {
  dtx__ejr_ws(r);
  *at = r->i;
  if (r->i >= r->n || r->s[r->i] != '"')
    return unexpected(r, "string expected");
  const unsigned char *s = (const unsigned char *)r->s;
  size_t i = r->i + 1, n = r->n;
  for (;;) {
    size_t st = i;
    while (i < n && s[i] != '"' && s[i] != '\\' && s[i] >= 0x20 && s[i] < 0x80)
      i++;
    dtx__buf_put(into, s + st, i - st);
    if (i >= n)
      return dtx__ejr_err(r, n, "premature end of input in a string");
    unsigned char c = s[i];
    if (c == '"') {
      r->i = i + 1;
      return into->oom ? dtx__ejr_err(r, i, "out of memory") : 0;
    }
    if (c >= 0x80) {
      size_t e = i;
      while (e < n && s[e] >= 0x80)
        e++;
      size_t u = dtx__utf8_valid_prefix(s + i, e - i);
      if (u != e - i)
        return dtx__ejr_err(r, i + u, "unable to decode byte 0x%02x",
                            s[i + u]);
      dtx__buf_put(into, s + i, e - i);
      i = e;
      continue;
    }
    if (c == 0)
      return dtx__ejr_err(r, i, "NUL byte in the text");
    if (c < 0x20)
      return dtx__ejr_err(r, i, "control character 0x%x in a string", c);
    /* an escape */
    if (i + 1 >= n)
      return dtx__ejr_err(r, n, "premature end of input in a string");
    char e = (char)s[i + 1];
    const char *simple = "\"\\/bfnrt", *as = "\"\\/\b\f\n\r\t";
    const char *k = strchr(simple, e);
    if (e && k) {
      put8(into, (uint8_t)as[k - simple]);
      i += 2;
      continue;
    }
    if (e != 'u')
      return dtx__ejr_err(r, i, "invalid escape");
    uint32_t cp, lo;
    if (n - i < 6 || hex4((const char *)s + i + 2, &cp))
      return dtx__ejr_err(r, i, "invalid \\u escape");
    size_t at_u = i;
    i += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (n - i < 6 || s[i] != '\\' || s[i + 1] != 'u' ||
          hex4((const char *)s + i + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
        return dtx__ejr_err(r, at_u, "invalid Unicode '\\u%04X'", cp);
      cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
      i += 6;
    } else if (cp >= 0xDC00 && cp <= 0xDFFF)
      return dtx__ejr_err(r, at_u, "invalid Unicode '\\u%04X'", cp);
    put_utf8(into, cp);
  }
}

/* ---- numbers ------------------------------------------------------------------ */

/* Scans a JSON number at the cursor: its end, whether it is an integer
 * (no fraction, no exponent), or -1 when the grammar is broken. */
static int scan_number(dtx__ejr_t *r, size_t *end, int *integer) {
  const char *s = r->s;
  size_t i = r->i, n = r->n;
  *integer = 1;
  if (i < n && s[i] == '-')
    i++;
  if (i >= n || s[i] < '0' || s[i] > '9')
    return -1;
  if (s[i] == '0')
    i++;
  else
    while (i < n && s[i] >= '0' && s[i] <= '9')
      i++;
  if (i < n && s[i] == '.') {
    *integer = 0;
    i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
      return -1;
    while (i < n && s[i] >= '0' && s[i] <= '9')
      i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    *integer = 0;
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-'))
      i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
      return -1;
    while (i < n && s[i] >= '0' && s[i] <= '9')
      i++;
  }
  *end = i;
  return 0;
}

/* Digits s[st..end) (an optional '-' first) as int64: 0, or -1 when the
 * value is outside int64. */
static int to_int64(const char *s, size_t st, size_t end, int64_t *v) {
  int neg = s[st] == '-';
  uint64_t m = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (size_t k = st + (size_t)neg; k < end; k++) {
    uint64_t d = (uint64_t)(s[k] - '0');
    if (m > (lim - d) / 10)
      return -1;
    m = m * 10 + d;
  }
  *v = neg ? (int64_t)(0 - m) : (int64_t)m;
  return 0;
}

/* The number at the cursor: an integer (*is_int 1, *iv) or a double. */
static int read_number(dtx__ejr_t *r, int *is_int, int64_t *iv, double *dv) {
  size_t at = r->i, end;
  if (scan_number(r, &end, is_int))
    return unexpected(r, "invalid token");
  if (*is_int) {
    if (to_int64(r->s, at, end, iv))
      return dtx__ejr_err(r, at, r->s[at] == '-' ? "too big negative integer"
                                                 : "too big integer");
  } else {
    /* strtod needs a NUL: the digits go through tmp (free here) */
    r->tmp.n = 0;
    dtx__buf_put(&r->tmp, r->s + at, end - at);
    put8(&r->tmp, 0);
    if (r->tmp.oom)
      return dtx__ejr_err(r, at, "out of memory");
    errno = 0;
    *dv = strtod(r->tmp.p, NULL);
    if (errno == ERANGE && isinf(*dv))
      return dtx__ejr_err(r, at, "real number overflow");
  }
  r->i = end;
  return 0;
}

int dtx__ejr_integer(dtx__ejr_t *r, int64_t *v, size_t *at) {
  dtx__ejr_ws(r);
  *at = r->i;
  int is_int;
  double d;
  if (r->i >= r->n || (r->s[r->i] != '-' && (r->s[r->i] < '0' ||
                                              r->s[r->i] > '9')))
    return unexpected(r, "integer expected");
  int rc = read_number(r, &is_int, v, &d);
  if (rc)
    return rc;
  if (!is_int)
    return dtx__ejr_err(r, *at, "integer expected, not a real");
  return 0;
}

/* ---- names and duplicates ------------------------------------------------------- */

enum { SMALL = 8 };

typedef struct frame {
  uint32_t id, n;
  uint32_t keys[SMALL];
} frame_t;

static uint32_t name_hash(const char *k, uint32_t id) {
  uint32_t h = 2166136261u ^ (id * 0x9E3779B1u); /* FNV-1a, seeded */
  for (; *k; k++)
    h = (h ^ (unsigned char)*k) * 16777619u;
  return h;
}

/* 1 new, 0 duplicate, -1 out of memory. */
static int hash_add(dtx__ejr_t *r, uint32_t id, uint32_t off) {
  if ((r->used + 1) * 2 > r->cap) {
    size_t ncap = r->cap ? r->cap * 2 : 64;
    dtx__ejslot_t *nt = calloc(ncap, sizeof *nt);
    if (!nt)
      return -1;
    for (size_t k = 0; k < r->cap; k++) {
      if (!r->tab[k].off)
        continue;
      size_t j = name_hash(r->out.p + r->tab[k].off, r->tab[k].id) & (ncap - 1);
      while (nt[j].off)
        j = (j + 1) & (ncap - 1);
      nt[j] = r->tab[k];
    }
    free(r->tab);
    r->tab = nt;
    r->cap = ncap;
  }
  const char *k = r->out.p + off;
  size_t j = name_hash(k, id) & (r->cap - 1);
  while (r->tab[j].off) {
    if (r->tab[j].id == id && !strcmp(k, r->out.p + r->tab[j].off))
      return 0;
    j = (j + 1) & (r->cap - 1);
  }
  r->tab[j].id = id;
  r->tab[j].off = off;
  r->used++;
  return 1;
}

/* The name just written at off: 0 when new in its document. */
static int check_dup(dtx__ejr_t *r, frame_t *f, uint32_t off, size_t at) {
  const char *k = r->out.p + off;
  int r1 = 1;
  if (f->n < SMALL) {
    for (uint32_t q = 0; q < f->n; q++)
      if (!strcmp(k, r->out.p + f->keys[q]))
        r1 = 0;
    f->keys[f->n] = off;
  } else {
    if (f->n == SMALL)
      for (uint32_t q = 0; q < SMALL && r1 >= 0; q++)
        r1 = hash_add(r, f->id, f->keys[q]) < 0 ? -1 : 1;
    if (r1 > 0)
      r1 = hash_add(r, f->id, off);
  }
  if (r1 < 0)
    return dtx__err(DTX_ENOMEM, "out of memory reading Extended JSON");
  if (r1 == 0)
    return dtx__ejr_err(r, at, "duplicate object key");
  f->n++;
  return 0;
}

/* ---- values ------------------------------------------------------------------- */

static int value(dtx__ejr_t *r, size_t type_at);

static int open_level(dtx__ejr_t *r, size_t at) {
  if (r->depth >= DTX_MAX_DEPTH)
    return dtx__ejr_err(r, at, "nesting deeper than %d levels", DTX_MAX_DEPTH);
  r->depth++;
  return 0;
}

/* The members of a plain document after '{' up to '}', the first name
 * already decoded in tmp (read at kat). */
static int doc_body(dtx__ejr_t *r, size_t at, size_t kat) {
  int rc = open_level(r, at);
  if (rc)
    return rc;
  frame_t f;
  f.id = r->ids++;
  f.n = 0;
  size_t start = r->out.n;
  dtx__ejr_put32(&r->out, 0);
  for (;;) {
    if (r->tmp.n && memchr(r->tmp.p, 0, r->tmp.n))
      return dtx__ejr_err(r, kat, "NUL (\\u0000) in a name");
    if (f.n > 0 && dtx__ejr_is_wrapper(r->tmp.p, r->tmp.n))
      return dtx__ejr_err(r, kat,
                          "'%.*s' after another key: a type wrapper must be "
                          "its object's only key",
                          (int)r->tmp.n, r->tmp.p);
    size_t type_at = r->out.n;
    put8(&r->out, 0);
    size_t koff = r->out.n;
    dtx__buf_put(&r->out, r->tmp.p, r->tmp.n);
    put8(&r->out, 0);
    if (r->out.oom)
      return dtx__ejr_err(r, kat, "out of memory");
    if ((rc = check_dup(r, &f, (uint32_t)koff, kat)))
      return rc;
    if ((rc = dtx__ejr_expect(r, ':', "':' expected")))
      return rc;
    if ((rc = value(r, type_at)))
      return rc;
    dtx__ejr_ws(r);
    if (r->i < r->n && r->s[r->i] == '}') {
      r->i++;
      break;
    }
    if (r->i >= r->n || r->s[r->i] != ',')
      return unexpected(r, "',' or '}' expected");
    r->i++;
    r->tmp.n = 0;
    if ((rc = dtx__ejr_string(r, &r->tmp, &kat)))
      return rc;
    if (r->tmp.oom)
      return dtx__ejr_err(r, kat, "out of memory");
  }
  put8(&r->out, 0);
  if (r->out.n - start > DTX__DOC_MAX)
    return dtx__err(DTX_ELIMIT, "Extended JSON document larger than 16 MiB "
                                "at byte %zu", at);
  patch32(&r->out, start, (uint32_t)(r->out.n - start));
  r->depth--;
  return 0;
}

/* '{' at the cursor, as a value: a type wrapper, an empty document or a
 * plain one. */
static int object_value(dtx__ejr_t *r, size_t type_at, int allow_wrapper) {
  size_t at = r->i;
  r->i++;
  dtx__ejr_ws(r);
  if (r->i < r->n && r->s[r->i] == '}') {
    r->i++;
    int rc = open_level(r, at); /* an empty document is a level too */
    if (rc)
      return rc;
    r->depth--;
    dtx__ejr_put32(&r->out, 5);
    put8(&r->out, 0);
    if (r->out.oom)
      return dtx__ejr_err(r, at, "out of memory");
    if (type_at != (size_t)-1)
      r->out.p[type_at] = BSON_TYPE_DOCUMENT;
    return 0;
  }
  size_t kat;
  r->tmp.n = 0;
  int rc = dtx__ejr_string(r, &r->tmp, &kat);
  if (rc)
    return rc;
  if (dtx__ejr_is_wrapper(r->tmp.p, r->tmp.n)) {
    if (!allow_wrapper)
      return dtx__ejr_err(r, kat, "a document expected, not a %.*s value",
                          (int)r->tmp.n, r->tmp.p);
    char name[32]; /* wrapper names are short; tmp is reused below */
    size_t len = r->tmp.n;
    memcpy(name, r->tmp.p, len);
    name[len] = '\0';
    if ((rc = dtx__ejr_expect(r, ':', "':' expected")))
      return rc;
    return dtx__ejr_wrapper(r, name, len, type_at, kat);
  }
  if (type_at != (size_t)-1)
    r->out.p[type_at] = BSON_TYPE_DOCUMENT;
  return doc_body(r, at, kat);
}

int dtx__ejr_document(dtx__ejr_t *r, size_t at) {
  dtx__ejr_ws(r);
  if (r->i >= r->n || r->s[r->i] != '{')
    return unexpected(r, "'{' expected");
  (void)at;
  return object_value(r, (size_t)-1, 0);
}

static int array_value(dtx__ejr_t *r) {
  size_t at = r->i;
  int rc = open_level(r, at);
  if (rc)
    return rc;
  r->i++;
  size_t start = r->out.n;
  dtx__ejr_put32(&r->out, 0);
  dtx__ejr_ws(r);
  if (r->i < r->n && r->s[r->i] == ']')
    r->i++;
  else
    for (uint32_t idx = 0;; idx++) {
      size_t type_at = r->out.n;
      char name[24];
      put8(&r->out, 0);
      dtx__buf_put(&r->out, name, dtx__itoa(idx, name));
      put8(&r->out, 0);
      if ((rc = value(r, type_at)))
        return rc;
      dtx__ejr_ws(r);
      if (r->i < r->n && r->s[r->i] == ']') {
        r->i++;
        break;
      }
      if (r->i >= r->n || r->s[r->i] != ',')
        return unexpected(r, "',' or ']' expected");
      r->i++;
    }
  put8(&r->out, 0);
  if (r->out.oom)
    return dtx__ejr_err(r, at, "out of memory");
  if (r->out.n - start > DTX__DOC_MAX)
    return dtx__err(DTX_ELIMIT, "Extended JSON document larger than 16 MiB "
                                "at byte %zu", at);
  patch32(&r->out, start, (uint32_t)(r->out.n - start));
  r->depth--;
  return 0;
}

static int literal(dtx__ejr_t *r, const char *word) {
  size_t l = strlen(word);
  if (r->n - r->i < l || memcmp(r->s + r->i, word, l))
    return unexpected(r, "invalid token");
  r->i += l;
  return 0;
}

static int value(dtx__ejr_t *r, size_t type_at) {
  if (r->out.oom) /* the type byte at type_at may not exist */
    return dtx__ejr_err(r, r->i, "out of memory");
  /* out holds one document: past the limit already, it can only fail, so
   * fail now rather than convert the rest of a huge text */
  if (r->out.n > DTX__DOC_MAX)
    return dtx__err(DTX_ELIMIT, "Extended JSON document larger than 16 MiB "
                                "at byte %zu", r->i);
  dtx__ejr_ws(r);
  if (r->i >= r->n)
    return unexpected(r, "value expected");
  char c = r->s[r->i];
  int rc;
  uint8_t t;
  switch (c) {
  case '{':
    return object_value(r, type_at, 1);
  case '[':
    r->out.p[type_at] = BSON_TYPE_ARRAY;
    return array_value(r);
  case '"': {
    size_t at, start = r->out.n;
    dtx__ejr_put32(&r->out, 0);
    if ((rc = dtx__ejr_string(r, &r->out, &at)))
      return rc;
    put8(&r->out, 0);
    if (r->out.oom)
      return dtx__ejr_err(r, at, "out of memory");
    if (r->out.n - start > DTX__DOC_MAX)
      return dtx__err(DTX_ELIMIT, "Extended JSON string larger than 16 MiB "
                                  "at byte %zu", at);
    patch32(&r->out, start, (uint32_t)(r->out.n - start - 4));
    r->out.p[type_at] = BSON_TYPE_UTF8;
    return 0;
  }
  case 't':
  case 'f':
    if ((rc = literal(r, c == 't' ? "true" : "false")))
      return rc;
    put8(&r->out, c == 't');
    t = BSON_TYPE_BOOL;
    break;
  case 'n':
    if ((rc = literal(r, "null")))
      return rc;
    t = BSON_TYPE_NULL;
    break;
  default: {
    int is_int;
    int64_t iv;
    double dv;
    if (c != '-' && (c < '0' || c > '9'))
      return unexpected(r, "invalid token");
    if ((rc = read_number(r, &is_int, &iv, &dv)))
      return rc;
    if (!is_int) {
      uint64_t u;
      memcpy(&u, &dv, 8);
      dtx__ejr_put64(&r->out, u);
      t = BSON_TYPE_DOUBLE;
    } else if (iv >= INT32_MIN && iv <= INT32_MAX) {
      dtx__ejr_put32(&r->out, (uint32_t)(int32_t)iv);
      t = BSON_TYPE_INT32;
    } else {
      dtx__ejr_put64(&r->out, (uint64_t)iv);
      t = BSON_TYPE_INT64;
    }
  }
  }
  if (r->out.oom)
    return dtx__ejr_err(r, r->i, "out of memory");
  r->out.p[type_at] = t;
  return 0;
}

/* ---- the entry point -------------------------------------------------------------- */

int dtx__ejson_read(const char *text, size_t len, bson_t *out) {
  dtx__ejr_t r;
  memset(&r, 0, sizeof r);
  r.s = text ? text : "";
  r.n = text ? len : 0;
  int rc = dtx__ejr_document(&r, 0);
  if (!rc) {
    dtx__ejr_ws(&r);
    if (r.i < r.n)
      rc = unexpected(&r, "end of file expected");
  }
  if (!rc) {
    DTX_ASSERT(r.depth == 0 && r.out.n >= 5, "ejson.balanced");
    bson_t tmp;
    if (!bson_init_static(&tmp, (const uint8_t *)r.out.p, r.out.n) ||
        !bson_concat(out, &tmp))
      rc = dtx__err(DTX_ENOMEM, "out of memory reading Extended JSON");
  }
  free(r.out.p);
  free(r.tmp.p);
  free(r.tab);
  return rc;
}
