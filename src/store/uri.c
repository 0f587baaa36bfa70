/* uri.c -- the one parser of a store URI's options (store.h): the
 * name=value pairs after '?', joined by '&'.  Each backend declares the
 * options it takes as a table (sqlite/sqlite.c, redis/redis.c), so a
 * mistake gets the same words on every backend. */
#include "store/store.h"

#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    if (!eq)
      return dtx__err(DTX_EBADURI,
                      "store URI '%s': option '%.*s' is not name=value", uri,
                      (int)len, opt);
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
