/* uri.c -- the one parser of a store URI's options (store.h): the
 * name=value pairs after '?', joined by '&'.  Each backend declares the
 * options it takes as a table (sqlite/sqlite.c, redis/redis.c), so a
 * mistake gets the same words on every backend.  Also the URI's secrets:
 * a userinfo's USER:PASSWORD, and the mask that keeps a password out of
 * every message (docs/redis.md, "ACL users"). */
#include "store/store.h"

#include "util/assert.h"
#include "util/err.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int dtx__uri_int(const char *s, size_t n, int lo, int hi, int *out) {
  if (n == 0 || n > 9)
    return -1;
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9')
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi)
    return -1;
  *out = v;
  return 0;
}

/* The index of the n bytes at w among words ("a|b|c"), or -1. */
static int word_index(const char *words, const char *w, size_t n) {
  for (int i = 0;; i++) {
    const char *bar = strchr(words, '|');
    size_t len = bar ? (size_t)(bar - words) : strlen(words);
    if (len == n && memcmp(words, w, n) == 0)
      return i;
    if (!bar)
      return -1;
    words = bar + 1;
  }
}

/* 1 when the n bytes at v hold a control byte (NUL included). */
static int has_ctl(const char *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
      return 1;
  return 0;
}

static int name_ok(const char *v, size_t n, int lo, int hi) {
  if (n < (size_t)lo || n > (size_t)hi)
    return 0;
  for (size_t i = 0; i < n; i++) {
    char ch = v[i];
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
          (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
      return 0;
  }
  return 1;
}

/* Sets option o from the n bytes at v: 0, 1 when the value is bad, or
 * DTX_ENOMEM. */
static int set_one(const dtx__uri_opt_t *o, const char *uri, const char *v,
                   size_t n, char *out) {
  char *at = out + o->off;
  int i;
  switch (o->kind) {
  case DTX__URI_INT:
    return dtx__uri_int(v, n, o->lo, o->hi, (int *)(void *)at) < 0;
  case DTX__URI_WORD:
    if ((i = word_index(o->words, v, n)) < 0)
      return 1;
    *(int *)(void *)at = i;
    return 0;
  case DTX__URI_NAME:
    if (!name_ok(v, n, o->lo, o->hi))
      return 1;
    memcpy(at, v, n);
    at[n] = '\0';
    return 0;
  default: {
    if (has_ctl(v, n))
      return 1;
    char **s = (char **)(void *)at;
    free(*s);
    if (!(*s = strndup(v, n)))
      return dtx__err(DTX_ENOMEM, "parsing %s", uri);
    return 0;
  }
  }
}

static int bad_value(const char *uri, const dtx__uri_opt_t *o, const char *v,
                     size_t n) {
  char must[64];
  if (o->kind == DTX__URI_TEXT) /* it may be a password: never shown */
    return dtx__err(DTX_EBADURI,
                    "store URI '%s': bad value (%s must hold no control "
                    "byte)",
                    uri, o->name);
  if (o->kind == DTX__URI_WORD)
    snprintf(must, sizeof must, "%s", o->words);
  else
    snprintf(must, sizeof must, "%d..%d%s", o->lo, o->hi,
             o->kind == DTX__URI_NAME ? " of [A-Za-z0-9_-]" : "");
  return dtx__err(DTX_EBADURI,
                  "store URI '%s': bad value '%.*s' (%s must be %s)", uri,
                  (int)n, v, o->name, must);
}

int dtx__uri_opts(const char *uri, const char *query,
                  const dtx__uri_opt_t *opts, size_t nopts, void *out) {
  if (!*query)
    return dtx__err(DTX_EBADURI, "store URI '%s' has an empty option list",
                    uri);
  unsigned long long seen = 0; /* bit i: opts[i] was given */
  DTX_ASSERT(nopts <= 64, "uri.opts"); /* a table of at most 64 */
  for (const char *opt = query;;) {
    const char *end = strchr(opt, '&');
    size_t len = end ? (size_t)(end - opt) : strlen(opt);
    const char *eq = memchr(opt, '=', len);
    if (!eq) { /* "password:s3cret": quote the name, never what follows */
      size_t nl = 0;
      while (nl < len && ((opt[nl] >= 'a' && opt[nl] <= 'z') ||
                          (opt[nl] >= 'A' && opt[nl] <= 'Z') ||
                          opt[nl] == '_'))
        nl++;
      return dtx__err(DTX_EBADURI,
                      "store URI '%s': option '%.*s%s' is not name=value",
                      uri, (int)nl, opt, nl < len ? "..." : "");
    }
    size_t nlen = (size_t)(eq - opt), i = 0;
    while (i < nopts && (strlen(opts[i].name) != nlen ||
                         memcmp(opts[i].name, opt, nlen) != 0))
      i++;
    char known[256] = "";
    for (size_t k = 0, j = 0; i == nopts && j < nopts && k < sizeof known; j++)
      k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", j ? ", " : "",
                            opts[j].name);
    if (i == nopts)
      return dtx__err(DTX_EBADURI,
                      "store URI '%s': unknown option '%.*s' (known: %s)", uri,
                      (int)nlen, opt, known);
    const dtx__uri_opt_t *o = &opts[i];
    if (o->once && (seen >> i & 1))
      return dtx__err(DTX_EBADURI, "store URI '%s': option %s repeated", uri,
                      o->name);
    seen |= 1ULL << (i & 63);
    int rc = set_one(o, uri, eq + 1, len - nlen - 1, out);
    if (rc == 1)
      return bad_value(uri, o, eq + 1, len - nlen - 1);
    if (rc < 0 || !end)
      return rc;
    opt = end + 1;
    if (!*opt)
      return dtx__err(DTX_EBADURI, "store URI '%s' ends with '&'", uri);
  }
}

/* ---- secrets ------------------------------------------------------------------ */

char *dtx__uri_masked(const char *uri) {
  size_t n = strlen(uri);
  /* each "***" adds at most 3 bytes, per 10 of "password=&" or 1 of "@" */
  char *out = malloc(2 * n + 4);
  if (!out)
    return NULL;
  /* The authority after "scheme://" -- or after "scheme:" and its '/'s,
   * so a mistyped redis:/U:P@H is masked too.  A SQLite path is no
   * secret and may hold '@'. */
  int secret = strncmp(uri, "sqlite:", 7) != 0;
  const char *auth = strchr(uri, ':');
  auth = auth ? auth + 1 : uri;
  while (auth > uri && *auth == '/')
    auth++;
  const char *q = auth + strcspn(auth, "?");
  const char *at = NULL; /* the userinfo's '@': the last one before '?' */
  for (const char *p = auth; p < q; p++)
    if (*p == '@')
      at = p;
  size_t k = (size_t)(auth - uri);
  memcpy(out, uri, k);
  if (at && secret) {
    /* USER:PASSWORD@ keeps USER; a userinfo without ':' may be a
     * password written without its user, so all of it goes. */
    const char *colon = memchr(auth, ':', (size_t)(at - auth));
    size_t keep = colon ? (size_t)(colon + 1 - auth) : 0;
    memcpy(out + k, auth, keep);
    k += keep;
    memcpy(out + k, "***", 3);
    k += 3;
    auth = at;
  }
  memcpy(out + k, auth, (size_t)(q - auth));
  k += (size_t)(q - auth);
  for (const char *p = q; *p;) { /* '?' or '&', then one option */
    out[k++] = *p++;
    size_t len = strcspn(p, "&");
    /* password=, Password=, and password:VALUE written without its '='
     * (refused, but quoted by the refusal): the name as written, then
     * *** for whatever follows it. */
    size_t nl = 0;
    while (nl < len && (isalpha((unsigned char)p[nl]) || p[nl] == '_'))
      nl++;
    if (nl == 8 && strncasecmp(p, "password", 8) == 0 && len > 8) {
      size_t keep = p[8] == '=' ? 9 : 8;
      memcpy(out + k, p, keep);
      memcpy(out + k + keep, "***", 3);
      k += keep + 3;
    } else {
      memcpy(out + k, p, len);
      k += len;
    }
    p += len;
  }
  out[k] = '\0';
  return out;
}

static int hexval(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* The n bytes at s percent-decoded into a new string in *out: 0, 1 for a
 * bad escape or a control byte (%00 included), or DTX_ENOMEM. */
static int pct_decode(const char *shown, const char *s, size_t n,
                      char **out) {
  char *d = malloc(n + 1);
  if (!d)
    return dtx__err(DTX_ENOMEM, "parsing %s", shown);
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    int hi, lo;
    if (s[i] != '%')
      d[k++] = s[i];
    else if (i + 2 < n && (hi = hexval(s[i + 1])) >= 0 &&
             (lo = hexval(s[i + 2])) >= 0) {
      d[k++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      free(d);
      return 1;
    }
  }
  if (has_ctl(d, k)) {
    free(d);
    return 1;
  }
  d[k] = '\0';
  *out = d;
  return 0;
}

int dtx__uri_userinfo(const char *shown, const char *s, size_t n,
                      char **user, char **password) {
  *user = *password = NULL;
  const char *colon = memchr(s, ':', n);
  if (!colon || colon + 1 == s + n)
    return dtx__err(DTX_EBADURI,
                    "store URI '%s': its userinfo names a user without a "
                    "password (USER:PASSWORD@)",
                    shown);
  size_t ulen = (size_t)(colon - s);
  int rc = pct_decode(shown, s, ulen, user);
  if (rc == 0 && (rc = pct_decode(shown, colon + 1, n - ulen - 1,
                                  password)) != 0) {
    free(*user);
    *user = NULL;
  }
  if (rc == 1)
    return dtx__err(DTX_EBADURI,
                    "store URI '%s': bad userinfo (a '%%' not followed by "
                    "two hex digits, or a control byte)",
                    shown);
  return rc;
}
