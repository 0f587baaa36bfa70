/* bench_native.h -- the native Redis side the Redis benchmarks share: a
 * hiredis connection with the URI's timeout and password, and the node
 * that owns a hash tag's slot (so a native pipeline on keys of one tag
 * goes to one node, as a Redis user would send it).  Header-only (static
 * inline), like bench_common.h. */
#ifndef DTX_BENCH_NATIVE_H
#define DTX_BENCH_NATIVE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/redis/redis_int.h"

/* A connection to host:port, authenticated, with the URI's timeout so
 * that a stuck server fails the benchmark instead of hanging it. */
static inline redisContext *native_connect_to(const rd_uri_t *u,
                                              const char *host, int port,
                                              char *why, size_t wl) {
  struct timeval tv = {u->timeout_ms / 1000,
                       (u->timeout_ms % 1000) * 1000};
  redisContext *rc = redisConnectWithTimeout(host, port, tv);
  if (!rc || rc->err) {
    snprintf(why, wl, "connect %s:%d: %s", host, port,
             rc ? rc->errstr : "out of memory");
    redisFree(rc);
    return NULL;
  }
  redisSetTimeout(rc, tv);
  if (u->password) {
    redisReply *r = redisCommand(rc, "AUTH %s", u->password);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
      snprintf(why, wl, "AUTH on %s:%d: %s", host, port,
               r && r->type == REDIS_REPLY_ERROR ? r->str : "failed");
    freeReplyObject(r);
    if (!ok) {
      redisFree(rc);
      return NULL;
    }
  }
  return rc;
}

/* native_connect_to, exiting naming who on failure (the benchmarks'
 * workers connect before the clock starts). */
static inline redisContext *native_connect_or_die(const rd_uri_t *u,
                                                  const char *host, int port,
                                                  const char *who) {
  char why[512];
  redisContext *rc = native_connect_to(u, host, port, why, sizeof why);
  if (!rc) {
    fprintf(stderr, "%s: native: %s\n", who, why);
    exit(1);
  }
  return rc;
}

/* Finds the node that owns tag's slot (host[256], *port): CLUSTER SLOTS
 * from the first seed that answers, or that seed itself when it is not a
 * cluster.  who names the benchmark in the message on failure. */
static inline int native_find_node(const rd_uri_t *u, const char *tag,
                                   char *host, int *port, const char *who) {
  char why[512] = "no seed";
  int slot = dtx__rd_slot(tag, strlen(tag));
  for (size_t s = 0; s < u->nseeds; s++) {
    snprintf(host, 256, "%s", u->hosts[s]);
    *port = u->ports[s];
    redisContext *rc = native_connect_to(u, host, *port, why, sizeof why);
    if (!rc)
      continue;
    redisReply *r = redisCommand(rc, "CLUSTER SLOTS");
    int found = 0;
    if (r && r->type == REDIS_REPLY_ERROR) {
      found = 1; /* standalone: the seed holds every key */
    } else if (r && r->type == REDIS_REPLY_ARRAY) {
      for (size_t i = 0; i < r->elements && !found; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
            e->element[0]->type != REDIS_REPLY_INTEGER ||
            e->element[1]->type != REDIS_REPLY_INTEGER ||
            e->element[0]->integer > slot || e->element[1]->integer < slot ||
            e->element[2]->type != REDIS_REPLY_ARRAY ||
            e->element[2]->elements < 2)
          continue;
        const redisReply *m = e->element[2];
        if (m->element[1]->type != REDIS_REPLY_INTEGER)
          continue;
        if (m->element[0]->type == REDIS_REPLY_STRING && m->element[0]->len)
          snprintf(host, 256, "%s", m->element[0]->str);
        *port = (int)m->element[1]->integer;
        found = 1;
      }
      if (!found)
        snprintf(why, sizeof why, "no node serves slot %d", slot);
    } else {
      snprintf(why, sizeof why, "CLUSTER SLOTS: %s", rc->errstr);
    }
    freeReplyObject(r);
    redisFree(rc);
    if (found)
      return 0;
  }
  fprintf(stderr, "%s: native baseline: %s\n", who, why);
  return -1;
}

/* A benchmark's --store target: parses store (a redis:// URI) into *u
 * and finds the node owning tag's slot (host[256], *port), where the
 * native baseline runs.  Returns 0; 2 for a URI that is not Redis's
 * (reported), 1 when no node answers (reported; *u is freed then). */
static inline int native_target(const char *store, const char *tag,
                                rd_uri_t *u, char *host, int *port,
                                const char *who) {
  if (strncmp(store, "redis", 5) || dtx__rd_uri_parse(store, u)) {
    fprintf(stderr, "%s: --store takes a redis:// URI\n", who);
    return 2;
  }
  if (native_find_node(u, tag, host, port, who) < 0) {
    dtx__rd_uri_free(u);
    return 1;
  }
  return 0;
}

#endif
