/* conn.c -- the Redis client's connections: the nodes and their idle
 * connections, the Cluster slot map, and the topology learnt at open.
 * exec.c holds the batch executor that every other file sends its
 * commands through, on top of these.
 *
 * Topology.  At open the seeds are tried in order; the first that answers
 * is asked CLUSTER SLOTS.  "cluster support disabled" means standalone:
 * every slot maps to that node.  Otherwise the reply fills slot2node.  The
 * map is refreshed (from any node that answers) after MOVED, connection
 * loss, CLUSTERDOWN and the like, at most once per REFRESH_MIN_MS.
 *
 * Connections.  Each node keeps a stack of idle hiredis contexts; a
 * thread takes one per node for the duration of one batch, so contexts
 * are never shared and each node needs only as many as there are threads
 * talking to it at once.  Every context has connect and command timeouts
 * (timeout_ms), so a dead or paused node makes a command fail, never hang. */
#include "store/redis/redis_int.h"

#include "util/err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REFRESH_MIN_MS 50
#define MAX_IDLE 64

/* ---- time ------------------------------------------------------------------- */

int64_t dtx__rd_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dtx__rd_sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* ---- commands ------------------------------------------------------------------ */

void dtx__rd_cmd_init(rd_cmd_t *c, int slot, int script, int write) {
  memset(c, 0, sizeof *c);
  c->slot = slot;
  c->script = script;
  c->write = write;
}

void dtx__rd_arg(rd_cmd_t *c, const void *p, size_t n) {
  if (c->oom)
    return;
  if (c->argc == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 16;
    char **nv = realloc(c->argv, ncap * sizeof *nv);
    if (!nv) {
      c->oom = 1;
      return;
    }
    c->argv = nv;
    size_t *nl = realloc(c->argvlen, ncap * sizeof *nl);
    if (!nl) {
      c->oom = 1;
      return;
    }
    c->argvlen = nl;
    c->cap = ncap;
  }
  char *copy = malloc(n ? n : 1);
  if (!copy) {
    c->oom = 1;
    return;
  }
  if (n)
    memcpy(copy, p, n);
  c->argv[c->argc] = copy;
  c->argvlen[c->argc++] = n;
}

void dtx__rd_args(rd_cmd_t *c, const char *s) { dtx__rd_arg(c, s, strlen(s)); }

void dtx__rd_argi(rd_cmd_t *c, long long v) {
  char tmp[24];
  dtx__rd_arg(c, tmp, dtx__itoa(v, tmp));
}

void dtx__rd_argb(rd_cmd_t *c, const rd_buf_t *b) {
  if (b->oom)
    c->oom = 1;
  else
    dtx__rd_arg(c, b->p ? b->p : "", b->n);
}

void dtx__rd_cmd_clear(rd_cmd_t *c) {
  for (size_t i = 0; i < c->argc; i++)
    free(c->argv[i]);
  free(c->argv);
  free(c->argvlen);
  if (c->reply)
    freeReplyObject(c->reply);
  memset(c, 0, sizeof *c);
}

void dtx__rd_cmds_free(rd_cmd_t *c, size_t n) {
  if (!c)
    return;
  for (size_t i = 0; i < n; i++)
    dtx__rd_cmd_clear(&c[i]);
  free(c);
}

int dtx__rd_bad_reply(const redisReply *r, const char *what) {
  if (!r)
    return dtx__err(DTX_EBACKEND, "redis: %s: no reply", what);
  if (r->type == REDIS_REPLY_ERROR)
    return dtx__err(DTX_EBACKEND, "redis: %s: server error: %.200s", what,
                    r->str);
  return dtx__err(DTX_EBACKEND, "redis: %s: unexpected reply (type %d)", what,
                  r->type);
}

/* ---- nodes and connections ------------------------------------------------------- */

static rd_node_t *node_new(const char *host, int port) {
  rd_node_t *n = calloc(1, sizeof *n);
  if (!n || !(n->host = strdup(host))) {
    free(n);
    return NULL;
  }
  n->port = port;
  pthread_mutex_init(&n->mu, NULL);
  return n;
}

static void node_free(rd_node_t *n) {
  if (!n)
    return;
  for (size_t i = 0; i < n->nidle; i++)
    redisFree(n->idle[i]);
  free(n->idle);
  free(n->host);
  pthread_mutex_destroy(&n->mu);
  free(n);
}

/* The node for host:port, added when new.  Caller holds maplock for
 * writing.  Returns its index or -1 when out of memory. */
int dtx__rd_node_index_locked(dtx__backend_t *b, const char *host,
                              int port) {
  for (size_t i = 0; i < b->nnodes; i++)
    if (b->nodes[i]->port == port && strcmp(b->nodes[i]->host, host) == 0)
      return (int)i;
  if (b->nnodes >= RD_NO_NODE - 1)
    return -1;
  if (b->nnodes == b->capnodes && DTX__GROW(b->nodes, b->capnodes, 8))
    return -1;
  rd_node_t *n = node_new(host, port);
  if (!n)
    return -1;
  b->nodes[b->nnodes] = n;
  return (int)b->nnodes++;
}

static struct timeval tv_ms(int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  return tv;
}

/* A new connection, authenticated.  On failure *why says what failed. */
static redisContext *conn_open(dtx__backend_t *b, const rd_node_t *n,
                               char *why, size_t whylen) {
  redisContext *c =
      redisConnectWithTimeout(n->host, n->port, tv_ms(b->uri.timeout_ms));
  if (!c || c->err) {
    snprintf(why, whylen, "cannot connect to %s:%d: %s", n->host, n->port,
             c ? c->errstr : "out of memory");
    if (c)
      redisFree(c);
    return NULL;
  }
  redisSetTimeout(c, tv_ms(b->uri.timeout_ms));
  if (b->uri.password) {
    /* AUTH USER PASSWORD for an ACL user (Redis 6+); the one-argument
     * form for the default user, which every version takes. */
    const char *u = b->uri.user, *pw = b->uri.password;
    const char *argv[3] = {"AUTH", u ? u : pw, pw};
    size_t len[3] = {4, strlen(argv[1]), strlen(pw)};
    redisReply *r = redisCommandArgv(c, u ? 3 : 2, argv, len);
    dtx__store_count_rt(1, 1); /* new pooled connections pay it mid-run */
    int ok = r && r->type == REDIS_REPLY_STATUS;
    /* The server's whole reason: Redis's AUTH errors are one sentence
     * ("... called without any password configured ..."), and a cut one
     * reads as garbage.  The user is named, the password never. */
    if (!ok)
      snprintf(why, whylen, "authentication to %s:%d%s%.64s%s failed%s%s",
               n->host, n->port, u ? " as user '" : "", u ? u : "",
               u ? "'" : "", r && r->type == REDIS_REPLY_ERROR ? ": " : "",
               r && r->type == REDIS_REPLY_ERROR ? r->str
               : r                               ? ""
                                                 : c->errstr);
    if (r)
      freeReplyObject(r);
    if (!ok) {
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

redisContext *dtx__rd_conn_get(dtx__backend_t *b, rd_node_t *n, char *why,
                               size_t whylen) {
  pthread_mutex_lock(&n->mu);
  if (n->nidle) {
    redisContext *c = n->idle[--n->nidle];
    pthread_mutex_unlock(&n->mu);
    return c;
  }
  pthread_mutex_unlock(&n->mu);
  return conn_open(b, n, why, whylen);
}

void dtx__rd_conn_put(rd_node_t *n, redisContext *c) {
  if (!c)
    return;
  if (c->err) {
    redisFree(c);
    return;
  }
  pthread_mutex_lock(&n->mu);
  if (n->nidle < MAX_IDLE) {
    if (n->nidle == n->cap)
      (void)DTX__GROW(n->idle, n->cap, 4); /* else it is freed */
    if (n->nidle < n->cap) {
      n->idle[n->nidle++] = c;
      c = NULL;
    }
  }
  pthread_mutex_unlock(&n->mu);
  if (c)
    redisFree(c);
}

/* ---- the slot map ------------------------------------------------------------------- */

int dtx__rd_reply_is_err(const redisReply *r, const char *prefix) {
  return r && r->type == REDIS_REPLY_ERROR &&
         strncmp(r->str, prefix, strlen(prefix)) == 0;
}

/* Applies a CLUSTER SLOTS reply; fallback_host replaces empty hosts. */
static int apply_slots(dtx__backend_t *b, const redisReply *r,
                       const char *fallback_host) {
  if (r->type != REDIS_REPLY_ARRAY)
    return -1;
  static _Thread_local uint16_t map[RD_SLOTS];
  for (size_t i = 0; i < RD_SLOTS; i++)
    map[i] = RD_NO_NODE;
  pthread_rwlock_wrlock(&b->maplock);
  for (size_t i = 0; i < r->elements; i++) {
    const redisReply *e = r->element[i];
    if (e->type != REDIS_REPLY_ARRAY || e->elements < 3 ||
        e->element[0]->type != REDIS_REPLY_INTEGER ||
        e->element[1]->type != REDIS_REPLY_INTEGER ||
        e->element[2]->type != REDIS_REPLY_ARRAY ||
        e->element[2]->elements < 2)
      continue;
    const redisReply *m = e->element[2];
    const char *host = m->element[0]->type == REDIS_REPLY_STRING &&
                               m->element[0]->len > 0
                           ? m->element[0]->str
                           : fallback_host;
    if (m->element[1]->type != REDIS_REPLY_INTEGER)
      continue;
    int idx =
        dtx__rd_node_index_locked(b, host, (int)m->element[1]->integer);
    if (idx < 0)
      continue;
    long long lo = e->element[0]->integer, hi = e->element[1]->integer;
    for (long long s = lo; s <= hi && s < RD_SLOTS; s++)
      if (s >= 0)
        map[s] = (uint16_t)idx;
  }
  memcpy(b->slot2node, map, sizeof map);
  pthread_rwlock_unlock(&b->maplock);
  return 0;
}

/* Re-reads the slot map from the first node that answers.  why receives
 * the last failure.  0 when the map was refreshed (or is fresh enough). */
int dtx__rd_refresh_slots(dtx__backend_t *b, int force, char *why,
                          size_t whylen) {
  if (!b->cluster)
    return 0;
  pthread_mutex_lock(&b->refreshmu);
  int64_t now = dtx__rd_mono_ms();
  if (!force && now - b->refreshed_ms < REFRESH_MIN_MS) {
    pthread_mutex_unlock(&b->refreshmu);
    return 0;
  }
  int rc = -1;
  /* Known nodes first (any of them knows the map), then the seeds. */
  pthread_rwlock_rdlock(&b->maplock);
  size_t nn = b->nnodes;
  rd_node_t **list = malloc((nn + b->uri.nseeds + 1) * sizeof *list);
  if (list)
    memcpy(list, b->nodes, nn * sizeof *list);
  pthread_rwlock_unlock(&b->maplock);
  if (!list) {
    pthread_mutex_unlock(&b->refreshmu);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  for (size_t i = 0; i < nn && rc != 0; i++) {
    rd_node_t *n = list[i];
    redisContext *c = dtx__rd_conn_get(b, n, why, whylen);
    if (!c)
      continue;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    dtx__store_count_rt(1, 1); /* the executor's refreshes cost a trip */
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0)
      rc = apply_slots(b, r, n->host);
    else
      snprintf(why, whylen, "CLUSTER SLOTS from %s:%d: %s", n->host, n->port,
               r && r->type == REDIS_REPLY_ERROR ? r->str
               : r                               ? "empty map"
                                                 : c->errstr);
    if (r)
      freeReplyObject(r);
    dtx__rd_conn_put(n, c);
  }
  free(list);
  b->refreshed_ms = dtx__rd_mono_ms();
  pthread_mutex_unlock(&b->refreshmu);
  return rc;
}

/* ---- topology at open --------------------------------------------------------------------- */

/* The scripts' SHA1s, for EVALSHA.  The loads go out as one pipeline: one
 * round trip per open instead of one per script (a CLI run opens a store
 * once per command).  Every reply is read even after a bad one, so the
 * connection is never left with replies pending. */
static int load_scripts(dtx__backend_t *b, redisContext *c) {
  int rc = 0;
  for (int i = 0; i < RD_NSCRIPTS; i++)
    if (redisAppendCommand(c, "SCRIPT LOAD %s", dtx__rd_scripts[i]) != REDIS_OK)
      return dtx__err(DTX_EUNAVAILABLE, "redis: loading scripts: %s",
                      c->errstr[0] ? c->errstr : "out of memory");
  for (int i = 0; i < RD_NSCRIPTS; i++) {
    redisReply *r = NULL;
    if (redisGetReply(c, (void **)&r) != REDIS_OK || !r)
      return rc ? rc
                : dtx__err(DTX_EUNAVAILABLE, "redis: loading scripts: %s",
                           c->errstr[0] ? c->errstr : "no reply");
    if (rc == 0) {
      if (r->type == REDIS_REPLY_STRING && r->len < sizeof b->sha[i]) {
        memcpy(b->sha[i], r->str, r->len);
        b->sha[i][r->len] = '\0';
      } else {
        rc = r->type == REDIS_REPLY_ERROR
                 ? dtx__err(DTX_EBACKEND, "redis: loading script %d: %.200s",
                            i, r->str)
                 : dtx__err(DTX_EUNAVAILABLE,
                            "redis: loading script %d: bad reply", i);
      }
    }
    freeReplyObject(r);
  }
  return rc;
}

int dtx__rd_connect(dtx__backend_t *b) {
  char why[300] = "no seeds";
  for (size_t i = 0; i < RD_SLOTS; i++)
    b->slot2node[i] = RD_NO_NODE;
  for (size_t s = 0; s < b->uri.nseeds; s++) {
    rd_node_t probe = {.host = b->uri.hosts[s], .port = b->uri.ports[s]};
    redisContext *c = conn_open(b, &probe, why, sizeof why);
    if (!c)
      continue;
    redisReply *r = redisCommand(c, "CLUSTER SLOTS");
    if (!r) {
      snprintf(why, sizeof why, "%s:%d: %s", probe.host, probe.port,
               c->errstr);
      redisFree(c);
      continue;
    }
    int rc = 0;
    if (r->type == REDIS_REPLY_ERROR &&
        strstr(r->str, "cluster support disabled")) {
      b->cluster = 0;
      pthread_rwlock_wrlock(&b->maplock);
      int idx = dtx__rd_node_index_locked(b, probe.host, probe.port);
      for (size_t i = 0; idx >= 0 && i < RD_SLOTS; i++)
        b->slot2node[i] = (uint16_t)idx;
      pthread_rwlock_unlock(&b->maplock);
      if (idx < 0)
        rc = dtx__err(DTX_ENOMEM, "redis: adding a node");
    } else if (r->type == REDIS_REPLY_ARRAY) {
      b->cluster = 1;
      pthread_rwlock_wrlock(&b->maplock);
      int idx = dtx__rd_node_index_locked(b, probe.host, probe.port);
      pthread_rwlock_unlock(&b->maplock);
      if (idx < 0)
        rc = dtx__err(DTX_ENOMEM, "redis: adding a node");
      else
        apply_slots(b, r, probe.host);
      b->refreshed_ms = dtx__rd_mono_ms();
    } else if (r->type == REDIS_REPLY_ERROR &&
               (strncmp(r->str, "NOAUTH", 6) == 0 ||
                strncmp(r->str, "WRONGPASS", 9) == 0)) {
      rc = dtx__err(DTX_EUNAVAILABLE,
                    "redis: %s:%d needs a password (redis://[USER]:PASSWORD@ "
                    "or password= in the URI)",
                    probe.host, probe.port);
    } else {
      rc = dtx__err(DTX_EUNAVAILABLE,
                    "redis: %s:%d%s%.64s%s: unexpected answer to CLUSTER "
                    "SLOTS%s%.200s",
                    probe.host, probe.port, b->uri.user ? " as user '" : "",
                    b->uri.user ? b->uri.user : "",
                    b->uri.user ? "'" : "",
                    r->type == REDIS_REPLY_ERROR ? ": " : "",
                    r->type == REDIS_REPLY_ERROR ? r->str : "");
    }
    freeReplyObject(r);
    if (rc == 0)
      rc = load_scripts(b, c);
    redisFree(c);
    if (rc == 0)
      rc = dtx__rd_check_replicas(b);
    return rc;
  }
  return dtx__err(DTX_EUNAVAILABLE, "redis: no seed answered: %s", why);
}

void dtx__rd_disconnect(dtx__backend_t *b) {
  for (size_t i = 0; i < b->nnodes; i++)
    node_free(b->nodes[i]);
  free(b->nodes);
  b->nodes = NULL;
  b->nnodes = b->capnodes = 0;
}
