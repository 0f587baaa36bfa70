/* tokens.c -- doctxd's bearer tokens and their rate limit.  The --tokens
 * file holds lines "NAME TOKEN SCOPES" (SCOPES comma-separated from read,
 * write, admin, metrics; '#' starts a comment).  doctxd refuses to start
 * when group or others may read or write the file, or a token is shorter
 * than 16 characters: a secret anyone on the machine can read, or guess,
 * protects nothing.  A presented token is compared with EVERY token in
 * constant time, so neither its bytes nor which token it was leak through
 * timing.  Each token has a token bucket (--rate per second, --burst
 * deep): a client over its rate gets 429 with Retry-After, and other
 * tokens are not slowed.  docs/server.md, "Tokens". */
#include "server/server.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#define MIN_TOKEN 16
#define MAX_TOKEN 256

static unsigned scope_bits(char *list, char *bad, size_t badlen) {
  unsigned bits = 0;
  for (char *s = strtok(list, ","); s; s = strtok(NULL, ",")) {
    unsigned b = strcmp(s, "read") == 0      ? DTX__SRV_SCOPE_READ
                 : strcmp(s, "write") == 0   ? DTX__SRV_SCOPE_WRITE
                 : strcmp(s, "admin") == 0   ? DTX__SRV_SCOPE_ADMIN
                 : strcmp(s, "metrics") == 0 ? DTX__SRV_SCOPE_METRICS
                                             : 0;
    if (!b) {
      snprintf(bad, badlen, "%.40s", s);
      return 0;
    }
    bits |= b;
  }
  return bits;
}

int dtx__srv_tokens_load(const char *path, dtx__srv_tokens_t *t, char *err,
                         size_t errlen) {
  struct stat sb;
  char line[1024];
  int lineno = 0;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "--tokens %s: %s", path, strerror(errno));
    return -1;
  }
  /* fstat of the open file: the file read is the file judged. */
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
    snprintf(err, errlen, "--tokens %s: not a regular file", path);
    fclose(f);
    return -1;
  }
  if (sb.st_mode & 077) {
    snprintf(err, errlen,
             "--tokens %s: mode %03o lets group or others "
             "read or write it; chmod 600 it",
             path, (unsigned)(sb.st_mode & 0777));
    fclose(f);
    return -1;
  }
  t->v = calloc(DTX__SRV_MAX_TOKENS, sizeof *t->v);
  t->n = 0;
  if (!t->v) {
    snprintf(err, errlen, "out of memory");
    fclose(f);
    return -1;
  }
  while (fgets(line, sizeof line, f)) {
    char *hash = strchr(line, '#'), name[128], tok[MAX_TOKEN + 2], scopes[256],
         extra[2], bad[48] = "";
    lineno++;
    if (hash)
      *hash = '\0';
    int k = sscanf(line, "%127s %257s %255s %1s", name, tok, scopes, extra);
    if (k <= 0)
      continue;
    if (k != 3) {
      snprintf(err, errlen, "--tokens %s:%d: a line is NAME TOKEN SCOPES", path,
               lineno);
      goto fail;
    }
    size_t len = strlen(tok);
    if (len < MIN_TOKEN || len > MAX_TOKEN) {
      snprintf(err, errlen,
               "--tokens %s:%d: token of '%.40s' has %zu "
               "characters; a token has %d..%d",
               path, lineno, name, len, MIN_TOKEN, MAX_TOKEN);
      goto fail;
    }
    if (strlen(name) >= sizeof t->v[0].name) {
      snprintf(err, errlen, "--tokens %s:%d: name longer than 63 bytes", path,
               lineno);
      goto fail;
    }
    unsigned bits = scope_bits(scopes, bad, sizeof bad);
    if (!bits) {
      snprintf(err, errlen,
               "--tokens %s:%d: unknown scope '%s' (read, "
               "write, admin, metrics)",
               path, lineno, bad);
      goto fail;
    }
    for (size_t i = 0; i < t->n; i++) {
      if (strcmp(t->v[i].name, name) == 0 || strcmp(t->v[i].secret, tok) == 0) {
        snprintf(err, errlen, "--tokens %s:%d: name or token given twice", path,
                 lineno);
        goto fail;
      }
    }
    if (t->n == DTX__SRV_MAX_TOKENS) {
      snprintf(err, errlen, "--tokens %s: more than %d tokens", path,
               DTX__SRV_MAX_TOKENS);
      goto fail;
    }
    dtx__srv_token_t *x = &t->v[t->n];
    memcpy(x->name, name, strlen(name) + 1); /* length checked above */
    x->secret = strdup(tok);
    x->len = len;
    x->scopes = bits;
    x->tokens = t->burst;
    x->last_us = -1;
    pthread_mutex_init(&x->mu, NULL);
    t->n++;
    if (!x->secret) {
      snprintf(err, errlen, "out of memory");
      goto fail;
    }
  }
  fclose(f);
  if (t->n == 0) {
    snprintf(err, errlen, "--tokens %s: no token", path);
    dtx__srv_tokens_free(t);
    return -1;
  }
  return 0;
fail:
  fclose(f);
  dtx__srv_tokens_free(t);
  return -1;
}

void dtx__srv_tokens_free(dtx__srv_tokens_t *t) {
  for (size_t i = 0; t->v && i < t->n; i++) {
    free(t->v[i].secret);
    pthread_mutex_destroy(&t->v[i].mu);
  }
  free(t->v);
  t->v = NULL;
  t->n = 0;
}

/* Compares a presented secret with every token, touching the same bytes
 * whatever matches: MAX_TOKEN bytes each, padded with zeros. */
dtx__srv_token_t *dtx__srv_tokens_find(dtx__srv_tokens_t *t, const char *auth) {
  static const char prefix[] = "Bearer ";
  unsigned char given[MAX_TOKEN + 1] = {0};
  dtx__srv_token_t *found = NULL;
  /* The scheme is case-insensitive (RFC 9110 11.1): "bearer X" too. */
  if (!auth || strncasecmp(auth, prefix, sizeof prefix - 1) != 0)
    return NULL;
  const char *s = auth + sizeof prefix - 1;
  size_t n = strlen(s);
  if (n > MAX_TOKEN)
    return NULL;
  memcpy(given, s, n);
  for (size_t i = 0; i < t->n; i++) {
    const unsigned char *sec = (const unsigned char *)t->v[i].secret;
    unsigned diff = (unsigned)(t->v[i].len ^ n);
    for (size_t k = 0; k <= MAX_TOKEN; k++)
      diff |= (unsigned)(given[k] ^ (k < t->v[i].len ? sec[k] : 0));
    /* Branch-free select: found keeps the first match. */
    uintptr_t m = (uintptr_t)0 - (uintptr_t)(diff == 0 && !found);
    found = (dtx__srv_token_t *)(((uintptr_t)&t->v[i] & m) |
                                 ((uintptr_t)found & ~m));
  }
  return found;
}

int dtx__srv_tokens_take(dtx__srv_tokens_t *t, dtx__srv_token_t *tok) {
  struct timespec ts;
  int wait = 0;
  if (t->rate <= 0)
    return 0;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t now = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
  pthread_mutex_lock(&tok->mu);
  if (tok->last_us >= 0) {
    tok->tokens += (double)(now - tok->last_us) / 1e6 * t->rate;
    if (tok->tokens > t->burst)
      tok->tokens = t->burst;
  } else {
    tok->tokens = t->burst;
  }
  tok->last_us = now;
  if (tok->tokens >= 1) {
    tok->tokens -= 1;
  } else {
    double secs = (1 - tok->tokens) / t->rate;
    wait = (int)secs + 1; /* whole seconds, rounded up */
  }
  pthread_mutex_unlock(&tok->mu);
  return wait;
}
