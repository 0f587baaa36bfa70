/* codec.c -- the forms the SQLite backend stores: document bodies, and
 * the canonical text of object and array index keys.
 *
 * Bodies are BSON (format 4, docs/engine.md "The store format"): a
 * document is bridged from json_t once on its way in
 * (dtx__bson_from_json), and on its way out its bytes are checked once
 * (dtx__bson_check, the stored-body check) and bridged back
 * (dtx__bson_to_json).  The bridge keeps what the store gave back
 * before: integers stay integers, reals reals, keys keep their order.
 * A body that is not a BLOB, or fails the check, is DTX_ECORRUPT naming
 * its collection, _id and seq, and nothing is half-read.
 *
 * The JSON text reader below is what format 3 stored; it stays for the
 * upgrade of such a store (catalog.c), which reads each text body once.
 * It is written here rather than through jansson's load because jansson's
 * general-purpose stream machinery costs several times what a
 * recursive-descent reader over a buffer does.
 *
 * Canonical key text is JSON whose numbers are written by value: a real with an integral value in int64 range is written as that
 * integer, so {a: 1} and {a: 1.0} (equal under MongoDB's comparison) give
 * one key in a unique index, while 9007199254740993 and the double next
 * to it stay apart.  The same canonical text, bound as a BLOB, is the key
 * of an _id that is an object, null or a boolean (docs.c), so equal
 * objects collide and no such _id can equal a string or number _id;
 * numeric _ids are bound as INTEGER or REAL, which SQLite compares by
 * value, so 1 and 1.0 are one _id. */
#include "store/sqlite/sqlite_int.h"

#include "doc/bdoc.h"
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

void dtx__sq_text_put(buf_t *b, const json_t *v, int canonical) {
  put_value(b, v, canonical, 0);
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

/* ---- bodies as BSON (format 4) ------------------------------------------------------------ */

int dtx__sq_body_bson(const json_t *doc, const char *coll, uint8_t **out,
                      size_t *len) {
  bson_t b = BSON_INITIALIZER;
  *out = NULL;
  *len = 0;
  int rc = dtx__store_body(doc, coll, &b);
  if (rc < 0) {
    bson_destroy(&b);
    return rc;
  }
  uint32_t n = 0;
  uint8_t *p = bson_destroy_with_steal(&b, true, &n);
  if (!p)
    return dtx__err(DTX_ENOMEM, "encoding a document of %s", coll);
  *out = p;
  *len = n;
  return 0;
}

/* At most max bytes of s into out (NUL-terminated), bytes outside
 * printable ASCII as '?', so an error detail stays valid UTF-8 whatever
 * a stored _id holds (err.h, dtx__bad_byte). */
static void printable(char *out, size_t max, const char *s, size_t n) {
  size_t j = 0;
  for (size_t i = 0; i < n && j + 1 < max; i++)
    out[j++] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
  out[j] = '\0';
}

/* The _id of a stored value as an error names it: a string quoted, a
 * number as itself, an object, null or boolean _id by its canonical text
 * (the BLOB docs.c binds). */
void dtx__sq_id_name(sqlite3_value *v, char *out, size_t n) {
  char tmp[100];
  switch (v ? sqlite3_value_type(v) : SQLITE_NULL) {
  case SQLITE_INTEGER:
    snprintf(out, n, "%lld", (long long)sqlite3_value_int64(v));
    break;
  case SQLITE_FLOAT:
    snprintf(out, n, "%.17g", sqlite3_value_double(v));
    break;
  case SQLITE_TEXT:
    printable(tmp, sizeof tmp, (const char *)sqlite3_value_text(v),
              (size_t)sqlite3_value_bytes(v));
    snprintf(out, n, "\"%s\"", tmp);
    break;
  case SQLITE_BLOB:
    printable(tmp, sizeof tmp, (const char *)sqlite3_value_blob(v),
              (size_t)sqlite3_value_bytes(v));
    snprintf(out, n, "%s", tmp);
    break;
  default:
    snprintf(out, n, "?");
  }
}

/* "sqlite: stored document of 'coll' (_id X, seq N)" into out: the _id
 * is looked up by seq on c, once, only when a body is found bad. */
static void body_what(sq_conn_t *c, const sq_coll_t *co, int64_t seq,
                      char *out, size_t n) {
  char sql[SQ_TABLE_MAX + 40], id[160] = "?";
  sqlite3_stmt *st = NULL;
  snprintf(sql, sizeof sql, "SELECT id FROM %s WHERE seq=?1", co->table);
  if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, seq);
    if (sqlite3_step(st) == SQLITE_ROW)
      dtx__sq_id_name(sqlite3_column_value(st, 0), id, sizeof id);
  }
  sqlite3_finalize(st);
  snprintf(out, n, "sqlite: stored document of '%s' (_id %s, seq %lld)",
           co->name, id, (long long)seq);
}

int dtx__sq_blob_check(sqlite3_stmt *st, int col, const char *what,
                       const uint8_t **p, uint32_t *n) {
  int type = sqlite3_column_type(st, col);
  *p = NULL;
  *n = 0;
  if (type == SQLITE_NULL)
    return dtx__err(DTX_ECORRUPT, "%s is missing", what);
  /* Format 3 kept JSON text here; a TEXT value in a format-4 store is
   * not read as JSON: only the upgrade (catalog.c) converts text. */
  if (type != SQLITE_BLOB)
    return dtx__err(DTX_ECORRUPT,
                    "%s is not a valid document: %s instead of a BSON BLOB at "
                    "byte 0",
                    what, type == SQLITE_TEXT ? "TEXT" : "a number");
  const uint8_t *data = sqlite3_column_blob(st, col);
  int len = sqlite3_column_bytes(st, col);
  int rc = dtx__bson_check(data, (size_t)len, DTX_ECORRUPT, what);
  if (rc < 0)
    return rc;
  *p = data;
  *n = (uint32_t)len;
  return 0;
}

int dtx__sq_body_view(sq_conn_t *c, const sq_coll_t *co, int64_t seq,
                      sqlite3_stmt *st, int col, const uint8_t **p,
                      uint32_t *n) {
  /* The common case names nothing; a bad body is checked again under its
   * full name (the check is a pure function of the bytes). */
  int rc = dtx__sq_blob_check(st, col, "sqlite: stored document", p, n);
  if (rc == 0)
    return 0;
  char what[400];
  body_what(c, co, seq, what, sizeof what);
  return dtx__sq_blob_check(st, col, what, p, n);
}

int dtx__sq_body_get(sq_conn_t *c, const sq_coll_t *co, int64_t seq,
                     sqlite3_stmt *st, int col, json_t **out) {
  const uint8_t *p;
  uint32_t n;
  *out = NULL;
  int rc = dtx__sq_body_view(c, co, seq, st, col, &p, &n);
  return rc < 0 ? rc : dtx__sq_body_json(co, seq, p, n, out);
}

int dtx__sq_body_json(const sq_coll_t *co, int64_t seq, const uint8_t *p,
                      uint32_t n, json_t **out) {
  int rc = dtx__bson_to_json(p, n, 0, out);
  if (rc < 0)
    rc = dtx__err_wrap(rc == DTX_ENOMEM ? rc : DTX_ECORRUPT,
                       "sqlite: stored document of '%s' (seq %lld)",
                       co->name, (long long)seq);
  return rc;
}
