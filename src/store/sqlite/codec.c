/* codec.c -- the text forms the SQLite backend stores: document bodies and
 * the canonical text of object and array index keys.
 *
 * Bodies are JSON written and read here rather than through jansson's
 * dump and load, because every single-document operation parses one body
 * and writes one, and jansson's general-purpose stream machinery costs
 * several times what a direct writer and a recursive-descent reader over
 * a buffer do.  The format is plain JSON, readable by any tool; reals keep
 * a '.' or an exponent so they read back as reals.
 *
 * Canonical key text is the same JSON except that numbers are written by
 * value: a real with an integral value in int64 range is written as that
 * integer, so {a: 1} and {a: 1.0} (equal under MongoDB's comparison) give
 * one key in a unique index, while 9007199254740993 and the double next
 * to it stay apart.  The same canonical text, bound as a BLOB, is the key
 * of an _id that is an object, null or a boolean (docs.c), so equal
 * objects collide and no such _id can equal a string or number _id;
 * numeric _ids are bound as INTEGER or REAL, which SQLite compares by
 * value, so 1 and 1.0 are one _id. */
#include "store/sqlite/sqlite_int.h"

#include "util/buf.h"
#include "util/err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ------------------------------------------------------------------------ */

typedef dtx__buf_t buf_t;

static void putc_(buf_t *b, char c) {
  if (dtx__buf_reserve(b, 1))
    b->p[b->n++] = c;
}

static void put_int(buf_t *b, json_int_t v) {
  char tmp[24];
  dtx__buf_put(b, tmp, dtx__itoa((long long)v, tmp));
}

static void put_real(buf_t *b, double d, int canonical) {
  /* 2^63 is exact as a double; [-2^63, 2^63) converts without overflow. */
  if (canonical && d == floor(d) && d >= -9223372036854775808.0 &&
      d < 9223372036854775808.0) {
    put_int(b, (json_int_t)d);
    return;
  }
  char tmp[40];
  int n = snprintf(tmp, sizeof tmp, "%.17g", d);
  int has_mark = 0;
  for (int i = 0; i < n; i++) {
    if (tmp[i] == ',') /* a locale's decimal comma */
      tmp[i] = '.';
    if (tmp[i] == '.' || tmp[i] == 'e' || tmp[i] == 'E')
      has_mark = 1;
  }
  dtx__buf_put(b, tmp, (size_t)n);
  if (!has_mark)
    dtx__buf_put(b, ".0", 2);
}

static void put_string(buf_t *b, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  putc_(b, '"');
  size_t run = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    dtx__buf_put(b, s + run, i - run);
    run = i + 1;
    char esc[6] = {'\\', 0};
    size_t elen = 2;
    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    default:
      memcpy(esc, "\\u00", 4);
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      elen = 6;
    }
    dtx__buf_put(b, esc, elen);
  }
  dtx__buf_put(b, s + run, n - run);
  putc_(b, '"');
}

static void put_value(buf_t *b, const json_t *v, int canonical, int depth) {
  if (depth > 2000) { /* jansson refuses deeper documents anyway */
    b->oom = 1;
    return;
  }
  switch (json_typeof(v)) {
  case JSON_OBJECT: {
    const char *k;
    json_t *x;
    int first = 1;
    putc_(b, '{');
    json_object_foreach((json_t *)v, k, x) {
      if (!first)
        putc_(b, ',');
      first = 0;
      put_string(b, k, strlen(k));
      putc_(b, ':');
      put_value(b, x, canonical, depth + 1);
    }
    putc_(b, '}');
    break;
  }
  case JSON_ARRAY: {
    size_t i;
    json_t *x;
    putc_(b, '[');
    json_array_foreach(v, i, x) {
      if (i)
        putc_(b, ',');
      put_value(b, x, canonical, depth + 1);
    }
    putc_(b, ']');
    break;
  }
  case JSON_STRING:
    put_string(b, json_string_value(v), json_string_length(v));
    break;
  case JSON_INTEGER:
    put_int(b, json_integer_value(v));
    break;
  case JSON_REAL:
    put_real(b, json_real_value(v), canonical);
    break;
  case JSON_TRUE:
    dtx__buf_put(b, "true", 4);
    break;
  case JSON_FALSE:
    dtx__buf_put(b, "false", 5);
    break;
  case JSON_NULL:
    dtx__buf_put(b, "null", 4);
    break;
  }
}

int dtx__sq_text(const json_t *v, int canonical, char **out, size_t *len) {
  buf_t b = {0};
  put_value(&b, v, canonical, 0);
  putc_(&b, '\0');
  if (b.oom) {
    free(b.p);
    *out = NULL;
    return dtx__err(DTX_ENOMEM, "encoding a document");
  }
  *out = b.p;
  *len = b.n - 1;
  return 0;
}

/* ---- reading --------------------------------------------------------------------------- */

typedef struct rd {
  const char *p, *end;
  char *tmp; /* scratch for unescaped strings */
  size_t tcap;
  const char *err;
} rd_t;

static void ws(rd_t *r) {
  while (r->p < r->end &&
         (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
    r->p++;
}

/* After any whitespace, 1 (and past it) when the next byte is c. */
static int eat(rd_t *r, char c) {
  ws(r);
  if (r->p < r->end && *r->p == c) {
    r->p++;
    return 1;
  }
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

static int read_hex4(rd_t *r, unsigned *u) {
  if (r->end - r->p < 4)
    return 0;
  *u = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(r->p[i]);
    if (h < 0)
      return 0;
    *u = *u << 4 | (unsigned)h;
  }
  r->p += 4;
  return 1;
}

static int tmp_reserve(rd_t *r, size_t n) {
  if (n <= r->tcap)
    return 1;
  size_t cap = r->tcap ? r->tcap * 2 : 256;
  while (cap < n)
    cap *= 2;
  char *t = realloc(r->tmp, cap);
  if (!t)
    return 0;
  r->tmp = t;
  r->tcap = cap;
  return 1;
}

/* Reads a string after its opening quote.  Strings without escapes are
 * returned in place; others are unescaped into r->tmp. */
static int read_string(rd_t *r, const char **s, size_t *n) {
  const char *start = r->p;
  while (r->p < r->end && *r->p != '"' && *r->p != '\\')
    r->p++;
  if (r->p < r->end && *r->p == '"') {
    *s = start;
    *n = (size_t)(r->p - start);
    r->p++;
    return 1;
  }
  size_t len = (size_t)(r->p - start);
  if (!tmp_reserve(r, len + 16))
    return 0;
  memcpy(r->tmp, start, len);
  while (r->p < r->end && *r->p != '"') {
    if (!tmp_reserve(r, len + 8))
      return 0;
    char c = *r->p++;
    if (c != '\\') {
      r->tmp[len++] = c;
      continue;
    }
    if (r->p >= r->end)
      return 0;
    c = *r->p++;
    switch (c) {
    case '"': case '\\': case '/': r->tmp[len++] = c; break;
    case 'n': r->tmp[len++] = '\n'; break;
    case 'r': r->tmp[len++] = '\r'; break;
    case 't': r->tmp[len++] = '\t'; break;
    case 'b': r->tmp[len++] = '\b'; break;
    case 'f': r->tmp[len++] = '\f'; break;
    case 'u': {
      unsigned u;
      if (!read_hex4(r, &u))
        return 0;
      if (u >= 0xd800 && u < 0xdc00) { /* a surrogate pair */
        unsigned lo;
        if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
          return 0;
        r->p += 2;
        if (!read_hex4(r, &lo) || lo < 0xdc00 || lo >= 0xe000)
          return 0;
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
      } else if (u >= 0xdc00 && u < 0xe000) {
        return 0;
      }
      if (u < 0x80) {
        r->tmp[len++] = (char)u;
      } else if (u < 0x800) {
        r->tmp[len++] = (char)(0xc0 | u >> 6);
        r->tmp[len++] = (char)(0x80 | (u & 0x3f));
      } else if (u < 0x10000) {
        r->tmp[len++] = (char)(0xe0 | u >> 12);
        r->tmp[len++] = (char)(0x80 | (u >> 6 & 0x3f));
        r->tmp[len++] = (char)(0x80 | (u & 0x3f));
      } else {
        r->tmp[len++] = (char)(0xf0 | u >> 18);
        r->tmp[len++] = (char)(0x80 | (u >> 12 & 0x3f));
        r->tmp[len++] = (char)(0x80 | (u >> 6 & 0x3f));
        r->tmp[len++] = (char)(0x80 | (u & 0x3f));
      }
      break;
    }
    default:
      return 0;
    }
  }
  if (r->p >= r->end)
    return 0;
  r->p++;
  *s = r->tmp;
  *n = len;
  return 1;
}

static json_t *read_number(rd_t *r) {
  const char *start = r->p;
  int real = 0;
  if (r->p < r->end && *r->p == '-')
    r->p++;
  while (r->p < r->end) {
    char c = *r->p;
    if (c == '.' || c == 'e' || c == 'E' || c == '+' ||
        (c == '-' && r->p > start))
      real = 1;
    else if (c < '0' || c > '9')
      break;
    r->p++;
  }
  size_t n = (size_t)(r->p - start);
  char tmp[64];
  if (n == 0 || n >= sizeof tmp)
    return NULL;
  memcpy(tmp, start, n);
  tmp[n] = '\0';
  char *e;
  if (!real) {
    /* Bodies hold int64 only; a short digit string is parsed inline. */
    if (n < 19 && !(n == 1 && tmp[0] == '-')) {
      const char *q = tmp;
      int neg = *q == '-';
      long long v = 0;
      for (q += neg; *q; q++)
        v = v * 10 + (*q - '0');
      return json_integer(neg ? -v : v);
    }
    errno = 0;
    long long v = strtoll(tmp, &e, 10);
    return *e || errno ? NULL : json_integer(v);
  }
  double d = strtod(tmp, &e);
  return *e ? NULL : json_real(d);
}

static json_t *read_value(rd_t *r, int depth);

static json_t *read_object(rd_t *r, int depth) {
  json_t *o = json_object();
  if (!o)
    return NULL;
  if (eat(r, '}'))
    return o;
  for (;;) {
    const char *k;
    size_t kn;
    if (!eat(r, '"') || !read_string(r, &k, &kn))
      break;
    /* The key may sit in r->tmp, which the value may reuse: copy it. */
    char small[64], *key = kn < sizeof small ? small : malloc(kn + 1);
    if (!key)
      break;
    memcpy(key, k, kn);
    key[kn] = '\0';
    json_t *v = eat(r, ':') ? read_value(r, depth + 1) : NULL;
    int ok = v && json_object_setn_new_nocheck(o, key, kn, v) == 0;
    if (key != small)
      free(key);
    if (!ok)
      break;
    if (eat(r, '}'))
      return o;
    if (!eat(r, ','))
      break;
  }
  json_decref(o);
  return NULL;
}

static json_t *read_array(rd_t *r, int depth) {
  json_t *a = json_array();
  if (!a)
    return NULL;
  if (eat(r, ']'))
    return a;
  for (;;) {
    json_t *v = read_value(r, depth + 1);
    if (!v || json_array_append_new(a, v) < 0)
      break;
    if (eat(r, ']'))
      return a;
    if (!eat(r, ','))
      break;
  }
  json_decref(a);
  return NULL;
}

static json_t *read_value(rd_t *r, int depth) {
  if (depth > 2000)
    return NULL;
  ws(r);
  if (r->p >= r->end)
    return NULL;
  size_t left = (size_t)(r->end - r->p);
  switch (*r->p) {
  case '{':
    r->p++;
    return read_object(r, depth);
  case '[':
    r->p++;
    return read_array(r, depth);
  case '"': {
    const char *s;
    size_t n;
    r->p++;
    return read_string(r, &s, &n) ? json_stringn_nocheck(s, n) : NULL;
  }
  case 't':
    if (left >= 4 && memcmp(r->p, "true", 4) == 0) {
      r->p += 4;
      return json_true();
    }
    return NULL;
  case 'f':
    if (left >= 5 && memcmp(r->p, "false", 5) == 0) {
      r->p += 5;
      return json_false();
    }
    return NULL;
  case 'n':
    if (left >= 4 && memcmp(r->p, "null", 4) == 0) {
      r->p += 4;
      return json_null();
    }
    return NULL;
  default:
    return read_number(r);
  }
}

int dtx__sq_body_parse(const char *text, int len, json_t **out) {
  *out = NULL;
  if (!text || len < 0)
    return dtx__err(DTX_EBACKEND, "sqlite: stored document is missing");
  rd_t r = {text, text + len, NULL, 0, NULL};
  json_t *v = read_value(&r, 0);
  free(r.tmp);
  ws(&r);
  if (!v || r.p != r.end || !json_is_object(v)) {
    json_decref(v);
    return dtx__err(DTX_EBACKEND,
                    "sqlite: stored document is corrupt near byte %ld",
                    (long)(r.p - text));
  }
  *out = v;
  return 0;
}
