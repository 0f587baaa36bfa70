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

int dtx__srv_body_parse(dtx__srv_ctx_t *c, const char *body, size_t len,
                        const dtx__srv_field_t *fields, json_t **out) {
  json_t *v = NULL;
  const char *key;
  json_t *x;
  *out = NULL;
  const char *nul = len ? memchr(body, '\0', len) : NULL;
  if (nul) {
    dtx__srv_bad(c, DTX_EBADJSON, "the body holds a NUL byte at offset %zu",
                 (size_t)(nul - body));
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
  free(text);
  if (rc) {
    dtx__srv_fail(c, rc, NULL);
    return -1;
  }
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

static uint64_t fnv(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* A cursor is base64url of "1.SKIP.DIGEST": the skip to resume at, and a
 * digest of what it pages (route, collection, filter, sort...), so a
 * cursor of another query, or one made up, is refused instead of paging
 * something else.  It carries no store state: any doctxd takes it. */
json_t *dtx__srv_cursor(const char *what, int64_t skip) {
  char raw[64], enc[96];
  int n = snprintf(raw, sizeof raw, "1.%lld.%016llx", (long long)skip,
                   (unsigned long long)fnv(what));
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

static int cursor_skip(const char *what, const char *cur, int64_t *skip) {
  char raw[64];
  size_t n = strlen(cur), o = 0;
  uint32_t acc = 0;
  int bits = 0;
  if (n == 0 || n > 80)
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
  if (sscanf(raw, "1.%lld.%16llx%n", &s, &h, &used) != 2 || (size_t)used != o ||
      s < 0 || h != (unsigned long long)fnv(what))
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
  if (after && cursor_skip(what, after, skip)) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "the cursor '%.100s' is not one this query "
                 "returned as \"next\"",
                 after);
    return -1;
  }
  return 0;
}
