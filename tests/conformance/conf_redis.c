/* conf_redis.c -- reaching the Redis servers behind conf_uri directly
 * (hiredis), for the cases that tamper with or pause the server: the
 * standalone server, or every node of a cluster. */
#include "conf.h"

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs fn on k; 1 when it returned nonzero. */
static int call(redisContext *k, int (*fn)(void *, void *), void *arg) {
  return k && !k->err && fn(k, arg) != 0;
}

int conf_redis_each_node(int masters_only, int (*fn)(void *ctx, void *arg),
                         void *arg, int stop_at_first) {
  char host[256];
  int port = 0, n = 0;
  if (strncmp(conf_uri, "redis://", 8) != 0)
    return 0;
  /* Past a USER:PASSWORD@ (docs/redis.md): these connections are the
   * test's own, as the default user, not the store's ACL user. */
  const char *seeds = conf_uri + 8, *q = seeds + strcspn(seeds, "?");
  for (const char *p = seeds; p < q; p++)
    if (*p == '@')
      seeds = p + 1;
  if (sscanf(seeds, "%255[^:]:%d", host, &port) != 2)
    return 0;
  redisContext *c = redisConnect(host, port);
  if (!c || c->err) {
    redisFree(c);
    return 0;
  }
  char *nodes = NULL;
  redisReply *r = redisCommand(c, "CLUSTER NODES");
  if (r && r->type == REDIS_REPLY_STRING)
    nodes = strdup(r->str);
  freeReplyObject(r);
  if (!nodes) /* standalone */
    n = call(c, fn, arg);
  redisFree(c);
  /* Lines: "<id> <ip>:<port>@<bus> flags ..." */
  for (char *line = nodes, *next; line && *line && !(stop_at_first && n);
       line = next) {
    next = strchr(line, '\n');
    if (next)
      *next++ = '\0';
    else
      next = line + strlen(line);
    char *sp = strchr(line, ' ');
    char *colon = sp ? strchr(sp + 1, ':') : NULL;
    if (!colon || (masters_only && !strstr(colon, "master")))
      continue;
    *colon = '\0';
    redisContext *k = redisConnect(sp + 1, atoi(colon + 1));
    n += call(k, fn, arg);
    redisFree(k);
  }
  free(nodes);
  return n;
}
