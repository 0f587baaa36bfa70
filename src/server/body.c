/* body.c -- what doctxd checks of a request before any handler runs: the
 * body (one JSON object; no NUL byte, duplicate key or nesting past
 * DTX__SRV_MAX_DEPTH; only the route's fields, each of its type), the query's
 * values, percent-decoding and the opaque paging cursor.  The JSON text is
 * parsed by the library's dtx_json_parse (duplicate keys, integers past
 * int64 and trailing garbage are its to refuse), so a body is judged as
 * the CLI judges its arguments.  All of it runs before the first write:
 * bad input changes nothing. */
#include "server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dtx__srv_pct_decode(const char *s, size_t n, char *out, size_t outlen) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    int ch = (unsigned char)s[i];
    if (ch == '%') {
      int hi, lo;
      if (i + 2 >= n)
        return -1;
      char h = s[i + 1], l = s[i + 2];
      hi = h >= '0' && h <= '9'                 ? h - '0'
           : (h | 32) >= 'a' && (h | 32) <= 'f' ? (h | 32) - 'a' + 10
                                                : -1;
      lo = l >= '0' && l <= '9'                 ? l - '0'
           : (l | 32) >= 'a' && (l | 32) <= 'f' ? (l | 32) - 'a' + 10
                                                : -1;
      if (hi < 0 || lo < 0)
        return -1;
      ch = hi * 16 + lo;
      i += 2;
    }
    if (ch == 0 || o + 1 >= outlen)
      return -1;
    out[o++] = (char)ch;
  }
  out[o] = '\0';
  return 0;
}

/* The nesting depth of v (a scalar is 1). */
static int depth(const json_t *v, int limit) {
  int best = 0, d;
  size_t i;
  const char *k;
  json_t *x;
  if (limit <= 0)
    return 1;
  if (json_is_object(v)) {
    json_object_foreach((json_t *)v, k, x) {
      if ((d = depth(x, limit - 1)) > best)
        best = d;
    }
  } else if (json_is_array(v)) {
    json_array_foreach(v, i, x) {
      if ((d = depth(x, limit - 1)) > best)
        best = d;
    }
  }
  return best + 1;
}

static const char *type_name(dtx__srv_ftype_t t) {
  switch (t) {
  case F_OBJ:
    return "an object";
  case F_ARR:
    return "an array";
  case F_STR:
    return "a string";
  case F_INT:
    return "an integer";
  case F_BOOL:
    return "a boolean";
  case F_ANY:
    return "a JSON value";
  default:
    return "an integer or a string";
  }
}

static int type_ok(dtx__srv_ftype_t t, const json_t *v) {
  switch (t) {
  case F_OBJ:
    return json_is_object(v);
  case F_ARR:
    return json_is_array(v);
  case F_STR:
    return json_is_string(v);
  case F_INT:
    return json_is_integer(v);
  case F_BOOL:
    return json_is_boolean(v);
  case F_ANY:
    return v != NULL;
  default:
    return json_is_integer(v) || json_is_string(v);
  }
}

/* The body field holding byte off of text: the top-level key whose value
 * it is in ("filter"), with the item's index when that value is an array
 * ("docs[1]"); "" before the first key.  A scan of the JSON's structure
 * only -- the text is malformed, that is why it is asked. */
static void field_at(const char *t, size_t off, char *out, size_t cap) {
  int depth = 0, in_str = 0, esc = 0, want_key = 0, arr = 0;
  size_t ks = 0, kstart = 0, klen = 0;
  long item = 0;
  out[0] = '\0';
  for (size_t i = 0; i < off && t[i]; i++) {
    char ch = t[i];
    if (in_str) {
      if (esc)
        esc = 0;
      else if (ch == '\\')
        esc = 1;
      else if (ch == '"') {
        in_str = 0;
        if (depth == 1 && want_key)
          kstart = ks, klen = i - ks, want_key = 0, arr = 0;
      }
      continue;
    }
    switch (ch) {
    case '"':
      in_str = 1, ks = i + 1;
      break;
    case '{':
    case '[':
      if (++depth == 1)
        want_key = 1;
      else if (depth == 2)
        arr = ch == '[', item = 0;
      break;
    case '}':
    case ']':
      depth--;
      break;
    case ',':
      if (depth == 1)
        want_key = 1;
      else if (depth == 2 && arr)
        item++;
      break;
    default:
      break;
    }
  }
  if (klen && arr && depth >= 2)
    snprintf(out, cap, "%.*s[%ld]", (int)(klen > 100 ? 100 : klen), t + kstart,
             item);
  else if (klen)
    snprintf(out, cap, "%.*s", (int)(klen > 100 ? 100 : klen), t + kstart);
}

/* The byte offset of the library's "line L col C" (C counts UTF-8
 * characters, as jansson does) in text; 0 when detail has none. */
static size_t offset_of(const char *text, const char *detail) {
  int line, col;
  const char *p = detail ? strstr(detail, "line ") : NULL;
  if (!p || sscanf(p, "line %d col %d", &line, &col) != 2)
    return 0;
  size_t i = 0;
  for (; text[i] && line > 1; i++)
    if (text[i] == '\n')
      line--;
  for (; text[i] && col > 1; col--)
    do
      i++;
    while (((unsigned char)text[i] & 0xC0) == 0x80);
  return i;
}

/* A field of the wrong type whose value the library checks is refused
 * with the library's error, as the CLI refuses the argument (a filter
 * that is no object is BADQUERY; tests/cli/bad_input.rows).  0 when the
 * library has no check for it (the caller answers INVAL). */
static int library_refusal(const char *name, const json_t *x) {
  if (strcmp(name, "filter") == 0)
    return dtx_check_filter(x);
  if (strcmp(name, "update") == 0)
    return dtx_check_update(x, NULL, 0);
  if (strcmp(name, "pipeline") == 0)
    return dtx_check_pipeline(x);
  if (strcmp(name, "sort") == 0)
    return dtx_check_sort(x);
  if (strcmp(name, "projection") == 0)
    return dtx_check_projection(x);
  return 0;
}

int dtx__srv_body_parse(dtx__srv_ctx_t *c, const char *body, size_t len,
                        const dtx__srv_field_t *fields, json_t **out) {
  json_t *v = NULL;
  const char *key;
  json_t *x;
  *out = NULL;
  const char *nul = len ? memchr(body, '\0', len) : NULL;
  if (nul) { /* named by its field, as the CLI names the argument */
    char field[128];
    field_at(body, (size_t)(nul - body), field, sizeof field);
    dtx__srv_bad(c, DTX_EBADJSON, "%s%sthe body holds a NUL byte at offset %zu",
                 field, field[0] ? ": " : "", (size_t)(nul - body));
    return -1;
  }
  if (len == 0) {
    *out = json_object();
    return *out ? 0 : (dtx__srv_fail(c, DTX_ENOMEM, NULL), -1);
  }
  char *text = malloc(len + 1);
  if (!text) {
    dtx__srv_bad(c, DTX_ENOMEM, "copying a body of %zu bytes", len);
    return -1;
  }
  memcpy(text, body, len);
  text[len] = '\0';
  int rc = dtx_json_parse(text, &v);
  if (rc) {
    /* Named by its field, as the CLI names the argument ("FILTER: line 1
     * col 9: ..."). */
    char field[128], detail[400];
    snprintf(detail, sizeof detail, "%s", dtx_errdetail());
    field_at(text, offset_of(text, detail), field, sizeof field);
    free(text);
    if (field[0])
      dtx__srv_bad(c, rc, "%s: %s", field, detail);
    else
      dtx__srv_fail(c, rc, NULL);
    return -1;
  }
  free(text);
  if (!json_is_object(v)) {
    json_decref(v);
    dtx__srv_bad(c, DTX_EINVAL, "the body must be a JSON object");
    return -1;
  }
  if (depth(v, DTX__SRV_MAX_DEPTH + 1) > DTX__SRV_MAX_DEPTH) {
    json_decref(v);
    dtx__srv_bad(c, DTX_EINVAL, "the body nests deeper than %d levels",
                 DTX__SRV_MAX_DEPTH);
    return -1;
  }
  json_object_foreach(v, key, x) {
    const dtx__srv_field_t *f = fields;
    while (f->name && strcmp(f->name, key) != 0)
      f++;
    if (!f->name) {
      char names[256] = "";
      for (f = fields; f->name; f++) {
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", f->name);
      }
      dtx__srv_bad(c, DTX_EINVAL,
                   "unknown field '%.100s' (this route takes: %s)", key,
                   names[0] ? names : "no fields");
      json_decref(v);
      return -1;
    }
    if (!type_ok(f->type, x)) {
      if ((rc = library_refusal(f->name, x)) < 0) {
        dtx__srv_bad(c, rc, "%s: %s", f->name, dtx_errdetail());
        json_decref(v);
        return -1;
      }
      dtx__srv_bad(c, DTX_EINVAL, "field '%s' must be %s", f->name,
                   type_name(f->type));
      json_decref(v);
      return -1;
    }
  }
  *out = v;
  return 0;
}

json_t *dtx__srv_arg(dtx__srv_ctx_t *c, const char *name) {
  return json_object_get(c->body, name);
}

int64_t dtx__srv_arg_int(dtx__srv_ctx_t *c, const char *name, int64_t dflt) {
  json_t *v = dtx__srv_arg(c, name);
  return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

int dtx__srv_arg_bool(dtx__srv_ctx_t *c, const char *name) {
  return json_is_true(dtx__srv_arg(c, name));
}

const char *dtx__srv_arg_str(dtx__srv_ctx_t *c, const char *name) {
  return json_string_value(dtx__srv_arg(c, name));
}

int dtx__srv_arg_fence(dtx__srv_ctx_t *c, const char **name, int64_t *token) {
  static _Thread_local char buf[160];
  const char *f = dtx__srv_arg_str(c, "fence");
  *name = NULL;
  *token = 0;
  if (!f)
    return 0;
  const char *colon = strrchr(f, ':');
  char *end;
  errno = 0;
  long long t = colon ? strtoll(colon + 1, &end, 10) : 0;
  if (!colon || (size_t)(colon - f) >= sizeof buf || colon[1] == '\0' || *end ||
      errno) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "fence must be \"NAME:TOKEN\" (TOKEN an int64 "
                 ">= 1), got '%.160s'",
                 f);
    return -1;
  }
  memcpy(buf, f, (size_t)(colon - f));
  buf[colon - f] = '\0';
  int rc = dtx_check_fence(buf, (int64_t)t);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return -1;
  }
  *name = buf;
  *token = (int64_t)t;
  return 0;
}

const char *dtx__srv_query(dtx__srv_ctx_t *c, const char *key, char *buf,
                           size_t buflen, int *bad) {
  size_t klen = strlen(key);
  for (const char *q = c->query; *q;) {
    const char *amp = strchr(q, '&');
    size_t n = amp ? (size_t)(amp - q) : strlen(q);
    if (n > klen && q[klen] == '=' && memcmp(q, key, klen) == 0) {
      if (dtx__srv_pct_decode(q + klen + 1, n - klen - 1, buf, buflen)) {
        dtx__srv_bad(c, DTX_EINVAL,
                     "query parameter '%s': a bad "
                     "percent-escape, a NUL byte or too long",
                     key);
        *bad = 1;
        return NULL;
      }
      return buf;
    }
    q = amp ? amp + 1 : q + n;
  }
  return NULL;
}

/* ---- the cursor --------------------------------------------------------- */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

uint64_t dtx__srv_fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* A cursor is base64url of "1.SKIP.DIGEST" (the skip to resume at) or,
 * for the list routes, "2.DIGEST.ID" (keyset paging: resume after the
 * entry ID, dtx_page_t.after, so a page deep in a list costs what the
 * first does), with a digest of what it pages (route, collection,
 * filter, sort...), so a cursor of another query, or one made up, is
 * refused instead of paging something else.  It carries no store state:
 * any doctxd takes it.  CURSOR_RAW holds the longest: an ID of 128. */
#define CURSOR_RAW 192

static json_t *encode(const char *raw, int n) {
  char enc[CURSOR_RAW * 4 / 3 + 8];
  size_t o = 0;
  for (int i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)(unsigned char)raw[i] << 16;
    if (i + 1 < n)
      v |= (uint32_t)(unsigned char)raw[i + 1] << 8;
    if (i + 2 < n)
      v |= (unsigned char)raw[i + 2];
    enc[o++] = b64[v >> 18 & 63];
    enc[o++] = b64[v >> 12 & 63];
    if (i + 1 < n)
      enc[o++] = b64[v >> 6 & 63];
    if (i + 2 < n)
      enc[o++] = b64[v & 63];
  }
  enc[o] = '\0';
  return json_string(enc);
}

json_t *dtx__srv_cursor(const char *what, int64_t skip) {
  char raw[CURSOR_RAW];
  int n = snprintf(raw, sizeof raw, "1.%lld.%016llx", (long long)skip,
                   (unsigned long long)dtx__srv_fnv(what));
  return encode(raw, n);
}

json_t *dtx__srv_cursor_after(const char *what, const char *id) {
  char raw[CURSOR_RAW];
  int n = snprintf(raw, sizeof raw, "2.%016llx.%s",
                   (unsigned long long)dtx__srv_fnv(what), id);
  return n > 0 && (size_t)n < sizeof raw ? encode(raw, n) : NULL;
}

int dtx__srv_cursor_parse(const char *what, const char *cur, int64_t *skip,
                          char *key, size_t keycap) {
  char raw[CURSOR_RAW];
  size_t n = strlen(cur), o = 0;
  uint32_t acc = 0;
  int bits = 0;
  *skip = 0;
  if (key && keycap)
    key[0] = '\0';
  if (n == 0 || n > CURSOR_RAW * 4 / 3 + 4)
    return -1;
  for (size_t i = 0; i < n; i++) {
    const char *p = strchr(b64, cur[i]);
    if (!p || !cur[i])
      return -1;
    acc = acc << 6 | (uint32_t)(p - b64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (o + 1 >= sizeof raw)
        return -1;
      raw[o++] = (char)(acc >> bits & 0xff);
    }
  }
  raw[o] = '\0';
  long long s;
  unsigned long long h;
  int used = 0;
  if (raw[0] == '2' && key) {
    /* The key must be the rest, whole: a NUL in it would cut it. */
    if (sscanf(raw, "2.%16llx.%n", &h, &used) != 1 || used == 0 ||
        h != (unsigned long long)dtx__srv_fnv(what) ||
        strlen(raw + used) != o - (size_t)used || o - (size_t)used == 0 ||
        o - (size_t)used >= keycap)
      return -1;
    memcpy(key, raw + used, o - (size_t)used + 1);
    return 0;
  }
  if (sscanf(raw, "1.%lld.%16llx%n", &s, &h, &used) != 2 || (size_t)used != o ||
      s < 0 || h != (unsigned long long)dtx__srv_fnv(what))
    return -1;
  *skip = s;
  return 0;
}

int dtx__srv_page(dtx__srv_ctx_t *c, json_t *limit, const char *after,
                  const char *what, int64_t *skip, int64_t *lim) {
  *skip = 0;
  *lim = DTX__SRV_DEFAULT_PAGE;
  if (limit) {
    json_int_t l = json_integer_value(limit);
    if (!json_is_integer(limit) || l < 1 || l > DTX__SRV_MAX_PAGE) {
      dtx__srv_bad(c, DTX_EINVAL, "limit must be an integer 1..%d",
                   DTX__SRV_MAX_PAGE);
      return -1;
    }
    *lim = l;
  }
  if (after && dtx__srv_cursor_parse(what, after, skip, NULL, 0)) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "the cursor '%.100s' is not one this query "
                 "returned as \"next\"",
                 after);
    return -1;
  }
  return 0;
}

/* ---- UTF-8 --------------------------------------------------------------
 * Every text doctxd quotes back goes into JSON, which must be UTF-8:
 * input that is not is refused 400 (path parameters, query keys and
 * values), and a detail that quotes a cut or bad byte is mended. */

/* The length of the valid UTF-8 character at s[0..n), or 0. */
static size_t utf8_char(const unsigned char *s, size_t n) {
  unsigned c = s[0];
  size_t len;
  unsigned cp, min;
  if (c < 0x80)
    return 1;
  if (c >= 0xC2 && c <= 0xDF)
    len = 2, cp = c & 0x1F, min = 0x80;
  else if (c >= 0xE0 && c <= 0xEF)
    len = 3, cp = c & 0x0F, min = 0x800;
  else if (c >= 0xF0 && c <= 0xF4)
    len = 4, cp = c & 0x07, min = 0x10000;
  else
    return 0;
  if (n < len)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xC0) != 0x80)
      return 0;
    cp = cp << 6 | (s[i] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return len;
}

int dtx__srv_utf8_ok(const char *s, size_t n) {
  for (size_t i = 0, k; i < n; i += k)
    if (!(k = utf8_char((const unsigned char *)s + i, n - i)))
      return 0;
  return 1;
}

void dtx__srv_utf8_fix(const char *s, char *out, size_t cap) {
  size_t n = strlen(s), o = 0;
  for (size_t i = 0, k; i < n && o + 1 < cap; i += k) {
    k = utf8_char((const unsigned char *)s + i, n - i);
    if (!k) { /* a bad byte; at the very end, a cut character: dropped */
      k = 1;
      if (n - i < 4 && ((unsigned char)s[i] & 0xC0) == 0xC0) {
        size_t j = i + 1;
        while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80)
          j++;
        if (j == n)
          break;
      }
      out[o++] = '?';
      continue;
    }
    if (o + k >= cap)
      break;
    memcpy(out + o, s + i, k);
    o += k;
  }
  out[o] = '\0';
}

/* ---- a batch's items -------------------------------------------------- */

int dtx__srv_item_check(dtx__srv_ctx_t *c, json_t *v, const char *where,
                        const char *shape, const char *const *keys) {
  const char *key;
  json_t *f;
  if (!json_is_object(v)) {
    dtx__srv_bad(c, DTX_EINVAL, "%s%s", where, shape);
    return -1;
  }
  json_object_foreach(v, key, f) {
    size_t j = 0;
    while (keys[j] && strcmp(keys[j], key) != 0)
      j++;
    if (keys[j])
      continue;
    char names[256] = "";
    for (j = 0; keys[j]; j++) {
      size_t n = strlen(names);
      snprintf(names + n, sizeof names - n, "%s%s", n ? ", " : "", keys[j]);
    }
    dtx__srv_bad(c, DTX_EINVAL, "%sunknown field '%.100s' (%s)", where, key,
                 names);
    return -1;
  }
  return 0;
}
