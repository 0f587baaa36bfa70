/* exec.c -- the batch executor of the Redis client: routes each command
 * by slot over the connections and slot map of conn.c, follows redirects,
 * retries what is transient, and makes writes wait for ?wait=N replicas.
 * Every other file of the backend sends its commands through it.
 *
 * The executor (dtx__rd_run).  A batch is grouped by node, written to
 * every node before any reply is read (nodes work in parallel; commands
 * to one node are pipelined), and answered in order.  Per command:
 *   MOVED          update that slot, refresh the map, resend at once
 *   ASK            resend once to the named node, preceded by ASKING
 *   NOSCRIPT       resend as EVAL (which also caches the script there)
 *   TRYAGAIN, CLUSTERDOWN, LOADING, MASTERDOWN, READONLY, BUSY, I/O
 *   errors and timeouts
 *                  back off (10 ms doubling to 500 ms) and resend, until
 *                  retry_ms (default 10 s) has passed; then
 *                  DTX_EUNAVAILABLE with the last reason.
 * A write is followed, in the same pipeline, by WAIT when the URI has
 * ?wait=N.  If fewer replicas acknowledged, the master's connected
 * replicas are counted (INFO replication): with N or more (one is
 * catching up) WAIT is repeated on that connection until they have it or
 * retry_ms has passed (the write itself stands); with fewer, waiting
 * cannot help, so the write is flagged (rd_cmd_t.few: its caller fails
 * with DTX_EUNAVAILABLE) and the master is marked, and further batches
 * with a write for it fail before they are sent until a re-check, at most
 * every RD_REPLICA_RECHECK_MS, counts N again.  The open checks every
 * master the same way (dtx__rd_connect), so a master that never had N
 * replicas fails at once instead of making each write wait retry_ms.
 * Resending after a lost reply may run a command twice; every write the
 * backend sends is safe under that (see redis.c: version tokens, claim
 * values and catalog texts are unique, so a rerun recognises its own
 * earlier success). */
#include "store/redis/redis_int.h"

#include "util/deadline.h"
#include "util/err.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- replicas (?wait=N) ------------------------------------------------------------------- */

/* How many replicas are connected to the master on c (INFO replication),
 * in any state: one that is still syncing will acknowledge writes once
 * it has caught up.  -1 when the server is not a master or the answer
 * is unreadable; then nothing is concluded from it. */
static int connected_replicas(redisContext *c) {
  redisReply *r = redisCommand(c, "INFO replication");
  dtx__store_count_rt(1, 1);
  int n = -1;
  if (r && r->type == REDIS_REPLY_STRING &&
      strstr(r->str, "role:master")) {
    const char *p = strstr(r->str, "connected_slaves:");
    if (p)
      n = atoi(p + strlen("connected_slaves:"));
  }
  if (r)
    freeReplyObject(r);
  return n;
}

/* Records a count of node's replicas; returns 1 when it is short of
 * ?wait=. */
static int note_replicas(dtx__backend_t *b, rd_node_t *node, int n) {
  int few = n >= 0 && n < b->uri.wait;
  pthread_mutex_lock(&node->mu);
  node->few_replicas = few;
  node->replicas = n;
  node->replicas_ms = dtx__rd_mono_ms();
  pthread_mutex_unlock(&node->mu);
  return few;
}

/* The one message for a master short of replicas; consequence says what
 * it meant for this call. */
static int few_err(const dtx__backend_t *b, const rd_node_t *node, int n,
                   const char *consequence) {
  return dtx__err(DTX_EUNAVAILABLE,
                  "redis: ?wait=%d: master %s:%d has %d connected "
                  "replica%s, fewer than the %d each write must reach; %s",
                  b->uri.wait, node->host, node->port, n, n == 1 ? "" : "s",
                  b->uri.wait, consequence);
}

int dtx__rd_few_replicas_err(const dtx__backend_t *b, const rd_cmd_t *c) {
  rd_node_t *node = c->few;
  pthread_mutex_lock(&node->mu);
  int n = node->replicas;
  pthread_mutex_unlock(&node->mu);
  return few_err(b, node, n,
                 "the write was applied on the master only, so whether it "
                 "lasts is unknown (as after a lost reply)");
}

/* Whether writes to node must be refused now: it was found short of
 * replicas, and a re-check (when the last is older than
 * RD_REPLICA_RECHECK_MS) still finds it so.  1 with the error raised. */
static int refuse_writes(dtx__backend_t *b, rd_node_t *node, char *why,
                         size_t whylen) {
  pthread_mutex_lock(&node->mu);
  int few = node->few_replicas, n = node->replicas;
  int64_t age = dtx__rd_mono_ms() - node->replicas_ms;
  pthread_mutex_unlock(&node->mu);
  if (!few)
    return 0;
  if (age >= RD_REPLICA_RECHECK_MS) {
    redisContext *c = dtx__rd_conn_get(b, node, why, whylen);
    if (!c)
      return 0; /* unreachable: the executor's own retries handle that */
    n = connected_replicas(c);
    dtx__rd_conn_put(node, c);
    if (!note_replicas(b, node, n))
      return 0;
  }
  few_err(b, node, n, "the write was refused (nothing changed)");
  return 1;
}

/* At open: every master that serves slots must have ?wait= replicas, or
 * no write could ever be acknowledged. */
int dtx__rd_check_replicas(dtx__backend_t *b) {
  if (b->uri.wait <= 0)
    return 0;
  char seen[RD_SLOTS / 8] = {0}, why[300] = "";
  for (size_t s = 0; s < RD_SLOTS; s++) {
    pthread_rwlock_rdlock(&b->maplock);
    uint16_t idx = b->slot2node[s];
    rd_node_t *node = idx == RD_NO_NODE ? NULL : b->nodes[idx];
    pthread_rwlock_unlock(&b->maplock);
    if (!node || (idx < sizeof seen * 8 && (seen[idx / 8] >> (idx % 8)) & 1))
      continue;
    if (idx < sizeof seen * 8)
      seen[idx / 8] |= (char)(1 << (idx % 8));
    redisContext *c = dtx__rd_conn_get(b, node, why, sizeof why);
    if (!c)
      continue; /* the first command to it will say why */
    int n = connected_replicas(c);
    dtx__rd_conn_put(node, c);
    if (note_replicas(b, node, n))
      return few_err(b, node, n,
                     "no write could be acknowledged (lower wait= or add "
                     "replicas)");
  }
  return 0;
}

/* ---- the executor --------------------------------------------------------------------- */

/* Parses "MOVED 3999 127.0.0.1:6381" (or ASK) into slot, host, port. */
static int parse_redirect(const char *s, int *slot, char *host, size_t hl,
                          int *port) {
  const char *sp = strchr(s, ' ');
  if (!sp)
    return -1;
  *slot = atoi(sp + 1);
  const char *addr = strchr(sp + 1, ' ');
  if (!addr)
    return -1;
  addr++;
  const char *colon = strrchr(addr, ':');
  if (!colon || (size_t)(colon - addr) >= hl)
    return -1;
  memcpy(host, addr, (size_t)(colon - addr));
  host[colon - addr] = '\0';
  *port = atoi(colon + 1);
  return *slot >= 0 && *slot < RD_SLOTS && *port > 0 ? 0 : -1;
}

static rd_node_t *node_for(dtx__backend_t *b, const char *host, int port,
                           int slot) {
  pthread_rwlock_wrlock(&b->maplock);
  int idx = dtx__rd_node_index_locked(b, host, port);
  if (idx >= 0 && slot >= 0)
    b->slot2node[slot] = (uint16_t)idx;
  rd_node_t *n = idx >= 0 ? b->nodes[idx] : NULL;
  pthread_rwlock_unlock(&b->maplock);
  return n;
}

static const char *const transient_prefixes[] = {
    "TRYAGAIN", "CLUSTERDOWN", "LOADING", "MASTERDOWN", "READONLY",
    "BUSY",     "NOREPLICAS",  "UNBLOCKED"};

/* Errors after which the same command may well succeed shortly.  A
 * script that touched a key of a slot this node no longer serves (a
 * migration or failover in progress) fails with a script error naming
 * it; that is transient too. */
static int is_transient(const redisReply *r, int *refresh) {
  for (size_t i = 0;
       i < sizeof transient_prefixes / sizeof transient_prefixes[0]; i++)
    if (dtx__rd_reply_is_err(r, transient_prefixes[i])) {
      *refresh |= i < 5;
      return 1;
    }
  if (r->type == REDIS_REPLY_ERROR &&
      (strstr(r->str, "non local key") || strstr(r->str, "-MOVED") ||
       strstr(r->str, "-ASK") || strstr(r->str, "TRYAGAIN") ||
       strstr(r->str, "CLUSTERDOWN"))) {
    *refresh = 1;
    return 1;
  }
  return 0;
}

typedef struct group {
  rd_node_t *node;
  redisContext *c;
  size_t *idx; /* commands sent to this node, in order */
  size_t n, cap;
  int broken;
  int flushed; /* its pipeline went (or began to go) out this round */
} group_t;

static int group_add(group_t *g, size_t i) {
  if (g->n == g->cap && DTX__GROW(g->idx, g->cap, 8))
    return -1;
  g->idx[g->n++] = i;
  return 0;
}

/* The timeout WAIT is given: half the command timeout, so that a WAIT
 * that runs its full course answers before the socket's read timeout
 * would cut it off. */
static int wait_ms(const dtx__backend_t *b) {
  return b->uri.timeout_ms / 2 > 0 ? b->uri.timeout_ms / 2 : 1;
}

static int append_cmd(dtx__backend_t *b, redisContext *c, rd_cmd_t *cmd) {
  if (cmd->ask) {
    const char *a[1] = {"ASKING"};
    size_t al[1] = {6};
    if (redisAppendCommandArgv(c, 1, a, al) != REDIS_OK)
      return -1;
  }
  int rc;
  if (cmd->script < 0) {
    rc = redisAppendCommandArgv(c, (int)cmd->argc, (const char **)cmd->argv,
                                cmd->argvlen);
  } else {
    size_t n = cmd->argc + 3;
    const char **argv = malloc(n * sizeof *argv);
    size_t *len = malloc(n * sizeof *len);
    if (!argv || !len) {
      free(argv);
      free(len);
      return -1;
    }
    char nk[16];
    snprintf(nk, sizeof nk, "%d", cmd->nkeys);
    argv[0] = cmd->eval ? "EVAL" : "EVALSHA";
    argv[1] = cmd->eval ? dtx__rd_scripts[cmd->script] : b->sha[cmd->script];
    argv[2] = nk;
    for (size_t i = 0; i < 3; i++)
      len[i] = strlen(argv[i]);
    for (size_t i = 0; i < cmd->argc; i++) {
      argv[i + 3] = cmd->argv[i];
      len[i + 3] = cmd->argvlen[i];
    }
    rc = redisAppendCommandArgv(c, (int)n, argv, len);
    free(argv);
    free(len);
  }
  if (rc != REDIS_OK)
    return -1;
  if (cmd->write && b->uri.wait > 0) {
    char w[16], t[16];
    snprintf(w, sizeof w, "%d", b->uri.wait);
    snprintf(t, sizeof t, "%d", wait_ms(b));
    const char *a[3] = {"WAIT", w, t};
    size_t al[3] = {4, strlen(w), strlen(t)};
    if (redisAppendCommandArgv(c, 3, a, al) != REDIS_OK)
      return -1;
  }
  return 0;
}

/* After a write whose WAIT came back short (a replica is resyncing, or a
 * failover is in progress), waits again on the same connection -- WAIT
 * counts the replicas that have this connection's writes -- until enough
 * replicas have it or the retry window since t0 (or the command's
 * deadline) ends.  Returns 1 when they do. */
static int wait_more(dtx__backend_t *b, redisContext *c, int64_t t0) {
  while (!dtx__deadline_expired(t0, b->uri.retry_ms)) {
    redisReply *r = redisCommand(c, "WAIT %d %d", b->uri.wait, wait_ms(b));
    dtx__store_count_rt(1, 1);
    if (!r)
      return 0;
    int enough = r->type == REDIS_REPLY_INTEGER && r->integer >= b->uri.wait;
    int err = r->type == REDIS_REPLY_ERROR; /* e.g. demoted to a replica */
    freeReplyObject(r);
    if (enough)
      return 1;
    if (err)
      return 0;
  }
  return 0;
}

static int flush_ctx(redisContext *c) {
  int done = 0;
  while (!done)
    if (redisBufferWrite(c, &done) != REDIS_OK)
      return -1;
  return 0;
}

static int run(dtx__backend_t *b, rd_cmd_t *cmds, size_t n, const char *what,
               int together, const char *point) {
  for (size_t i = 0; i < n; i++)
    if (cmds[i].oom)
      return dtx__err(DTX_ENOMEM, "redis: building %s", what);
  int64_t t0 = dtx__rd_mono_ms();
  char why[300] = "";
  size_t pending = 0;
  for (size_t i = 0; i < n; i++)
    if (!cmds[i].reply)
      pending++;
  group_t *groups = NULL;
  size_t ngroups = 0, capgroups = 0;
  int rc = 0;
  for (int round = 0; pending > 0; round++) {
    int transient = 0, refresh = 0;
    ngroups = 0;
    /* Route every unanswered command. */
    pthread_rwlock_rdlock(&b->maplock);
    for (size_t i = 0; i < n; i++) {
      rd_cmd_t *c = &cmds[i];
      if (c->reply)
        continue;
      rd_node_t *node = c->ask;
      if (!node) {
        uint16_t idx = b->slot2node[c->slot & (RD_SLOTS - 1)];
        node = idx == RD_NO_NODE ? NULL : b->nodes[idx];
      }
      if (!node) {
        snprintf(why, sizeof why, "no node serves slot %d", c->slot);
        transient = refresh = 1;
        continue;
      }
      size_t g = 0;
      while (g < ngroups && groups[g].node != node)
        g++;
      if (g == ngroups) {
        if (ngroups == capgroups) {
          size_t ncap = capgroups ? capgroups * 2 : 4;
          group_t *ng = realloc(groups, ncap * sizeof *ng);
          if (!ng) {
            pthread_rwlock_unlock(&b->maplock);
            rc = dtx__err(DTX_ENOMEM, "redis: routing %s", what);
            goto out;
          }
          memset(ng + capgroups, 0, (ncap - capgroups) * sizeof *ng);
          groups = ng;
          capgroups = ncap;
        }
        groups[ngroups].node = node;
        groups[ngroups].n = 0;
        groups[ngroups].c = NULL;
        groups[ngroups].broken = 0;
        groups[ngroups].flushed = 0;
        ngroups++;
      }
      if (group_add(&groups[g], i) < 0) {
        pthread_rwlock_unlock(&b->maplock);
        rc = dtx__err(DTX_ENOMEM, "redis: routing %s", what);
        goto out;
      }
    }
    pthread_rwlock_unlock(&b->maplock);

    /* ?wait=N: nothing goes out while a batch holds a write for a master
     * known to be short of replicas (refuse_writes re-checks it). */
    for (size_t g = 0; b->uri.wait > 0 && g < ngroups; g++) {
      int writes = 0;
      for (size_t k = 0; k < groups[g].n; k++)
        writes |= cmds[groups[g].idx[k]].write;
      if (writes && refuse_writes(b, groups[g].node, why, sizeof why)) {
        rc = DTX_EUNAVAILABLE;
        goto out;
      }
    }

    /* Write every node's pipeline before reading any reply. */
    for (size_t g = 0; g < ngroups; g++) {
      group_t *gr = &groups[g];
      gr->c = dtx__rd_conn_get(b, gr->node, why, sizeof why);
      if (!gr->c) {
        gr->broken = 1;
        continue;
      }
      for (size_t k = 0; k < gr->n && !gr->broken; k++) {
        rd_cmd_t *c = &cmds[gr->idx[k]];
        /* A write that went out before and may have run goes again: a
         * pause here lets another writer change the document between
         * the two copies (tests/redis/lost_reply.sh). */
        int lost;
        if (c->write && c->sent &&
            dtx__fault_inner("redis.write_resend", &lost) < 0) {
          snprintf(why, sizeof why, "%s", dtx_errdetail());
          gr->broken = 1;
        } else if (append_cmd(b, gr->c, c) < 0) {
          gr->broken = 1;
        }
      }
      /* Once a byte may have gone out, a command may run: a write whose
       * reply is then never read is marked sent (below). */
      if (!gr->broken) {
        gr->flushed = 1;
        if (flush_ctx(gr->c) < 0)
          gr->broken = 1;
      }
      if (!gr->broken) {
        /* One round trip per pipeline written (its replies are read
         * below); the commands count the ASKING and WAIT riding in it,
         * since the server executes those too (bench_redis). */
        int64_t sent = 0;
        for (size_t k = 0; k < gr->n; k++)
          sent += 1 + (cmds[gr->idx[k]].ask != NULL) +
                  (cmds[gr->idx[k]].write && b->uri.wait > 0);
        dtx__store_count_rt(1, sent);
      }
      if (gr->broken && gr->c && gr->c->err)
        snprintf(why, sizeof why, "%s:%d: %s", gr->node->host, gr->node->port,
                 gr->c->errstr);
    }

    /* A bulk write's step: its pipelines are out, no reply is read. */
    if (point && round == 0 && DTX_FAULTPOINT_INNER(point) < 0) {
      snprintf(why, sizeof why, "%s", dtx_errdetail());
      for (size_t g = 0; g < ngroups; g++)
        groups[g].broken = 1;
    }

    /* Read the answers, in order, node by node. */
    for (size_t g = 0; g < ngroups; g++) {
      group_t *gr = &groups[g];
      for (size_t k = 0; k < gr->n && !gr->broken; k++) {
        rd_cmd_t *c = &cmds[gr->idx[k]];
        redisReply *r = NULL;
        int was_ask = c->ask != NULL;
        c->ask = NULL;
        if (was_ask) {
          if (redisGetReply(gr->c, (void **)&r) != REDIS_OK) {
            gr->broken = 1;
            break;
          }
          freeReplyObject(r);
          r = NULL;
        }
        if (redisGetReply(gr->c, (void **)&r) != REDIS_OK) {
          gr->broken = 1;
          break;
        }
        /* A write ran and its reply is lost on the way back, as when the
         * network fails after the server answered ("lost" at this point):
         * the connection is dropped and the write goes again, marked
         * sent, so its reply is judged as a resend's (write.c). */
        int lost = 0;
        if (c->write &&
            (dtx__fault_inner("redis.write_replied", &lost) < 0 || lost)) {
          freeReplyObject(r);
          snprintf(why, sizeof why, "injected lost reply at fault point "
                   "redis.write_replied");
          gr->broken = 1;
          break;
        }
        redisReply *w = NULL;
        if (c->write && b->uri.wait > 0 &&
            redisGetReply(gr->c, (void **)&w) != REDIS_OK) {
          freeReplyObject(r);
          gr->broken = 1;
          break;
        }
        if (w) {
          if (w->type != REDIS_REPLY_INTEGER || w->integer < b->uri.wait)
            c->short_wait = 1;
          freeReplyObject(w);
        }
        char host[256];
        int slot, port;
        if (dtx__rd_reply_is_err(r, "MOVED ")) {
          if (parse_redirect(r->str, &slot, host, sizeof host, &port) == 0)
            node_for(b, host, port, slot);
          snprintf(why, sizeof why, "%.200s", r->str);
          refresh = 1;
          if (round > 3)
            transient = 1; /* a redirect loop: give the cluster time */
          freeReplyObject(r);
        } else if (dtx__rd_reply_is_err(r, "ASK ")) {
          if (parse_redirect(r->str, &slot, host, sizeof host, &port) == 0)
            c->ask = node_for(b, host, port, -1);
          snprintf(why, sizeof why, "%.200s", r->str);
          if (round > 3)
            transient = 1;
          freeReplyObject(r);
        } else if (dtx__rd_reply_is_err(r, "NOSCRIPT")) {
          c->eval = 1;
          freeReplyObject(r);
        } else if (is_transient(r, &refresh)) {
          snprintf(why, sizeof why, "%s:%d: %.200s", gr->node->host,
                   gr->node->port, r->str);
          transient = 1;
          freeReplyObject(r);
        } else {
          c->reply = r;
          pending--;
        }
      }
      /* Replicas short of ?wait=, once every reply is read: with enough
       * of them connected, wait on; with too few, waiting cannot help. */
      for (size_t k = 0; k < gr->n && !gr->broken; k++) {
        rd_cmd_t *c = &cmds[gr->idx[k]];
        if (!c->reply || !c->short_wait || c->few)
          continue;
        if (note_replicas(b, gr->node, connected_replicas(gr->c)))
          c->few = gr->node;
        else if (wait_more(b, gr->c, t0))
          c->short_wait = 0;
      }
      if (gr->broken) {
        /* Every write of the pipeline still unanswered may have run. */
        for (size_t k = 0; gr->flushed && k < gr->n; k++)
          if (!cmds[gr->idx[k]].reply && cmds[gr->idx[k]].write)
            cmds[gr->idx[k]].sent = 1;
        /* The connection's state is unknown: drop it, and look again at
         * the topology (the node may have failed over). */
        if (gr->c)
          snprintf(why, sizeof why, "%s:%d: %s", gr->node->host,
                   gr->node->port,
                   gr->c->errstr[0] ? gr->c->errstr : "connection lost");
        transient = refresh = 1;
        if (gr->c) {
          redisFree(gr->c);
          gr->c = NULL;
        }
      } else {
        dtx__rd_conn_put(gr->node, gr->c);
        gr->c = NULL;
      }
    }
    if (pending == 0)
      break;
    if (together) {
      for (size_t i = 0; i < n; i++) {
        if (cmds[i].reply) {
          freeReplyObject(cmds[i].reply);
          cmds[i].reply = NULL;
        }
      }
      pending = n;
    }
    int64_t elapsed = dtx__rd_mono_ms() - t0;
    /* The URI's retry window, or the command's deadline when sooner
     * (util/deadline.h): one budget for the whole command. */
    if (dtx__deadline_expired(t0, b->uri.retry_ms + 1)) {
      rc = dtx__err(DTX_EUNAVAILABLE, "redis: %s: gave up after %lld ms: %s",
                    what, (long long)elapsed, why);
      goto out;
    }
    if (transient) {
      int shift = round < 6 ? round : 6;
      int64_t ms = 10LL << shift;
      if (ms > 500)
        ms = 500;
      dtx__deadline_sleep_ms(ms);
    }
    if (refresh) {
      char rwhy[300] = "";
      if (dtx__rd_refresh_slots(b, 0, rwhy, sizeof rwhy) < 0 && rwhy[0])
        snprintf(why, sizeof why, "%s", rwhy);
    }
  }
out:
  for (size_t g = 0; g < capgroups; g++)
    free(groups[g].idx);
  free(groups);
  return rc;
}

int dtx__rd_run(dtx__backend_t *b, rd_cmd_t *cmds, size_t n,
                const char *what) {
  return run(b, cmds, n, what, 0, NULL);
}

int dtx__rd_run_sent(dtx__backend_t *b, rd_cmd_t *cmds, size_t n,
                     const char *what, const char *point) {
  return run(b, cmds, n, what, 0, point);
}

int dtx__rd_run_together(dtx__backend_t *b, rd_cmd_t *cmds, size_t n,
                         const char *what) {
  return run(b, cmds, n, what, 1, NULL);
}
