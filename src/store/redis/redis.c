/* redis.c -- the Redis backend (standalone and Cluster): the method
 * table, URI parsing, version tokens and sequence numbers, the cache of
 * recently seen documents, and the design argument below.
 *
 * ---- One document, one key, one compare-and-set ---------------------------
 *
 * doctx's filter and update languages are evaluated in C only (src/doc),
 * exactly as for SQLite; there is no second implementation in Lua.  A
 * document is one hash dtx:d:{COLL:GEN:B}ID holding its body (BSON bytes;
 * JSON text in a namespace of format 3, format.c), its insertion sequence
 * number and a version token.  Every change of a document is one EVALSHA
 * of the WRITE script (scripts.c) on the node that
 * owns the key: "if the version is still V, write this body with the new
 * version V' (and this bucket's index entries); otherwise return the
 * current version and body".  The C side reads (or remembers) V and the
 * body, evaluates the filter, applies the update, and sends the result
 * with V.
 *
 * No lost updates: a write succeeds only if no other write touched the
 * document since the state it was computed from was read, because every
 * write replaces the version with a token no write ever used before (a
 * per-process random prefix and a counter).  Tokens, unlike counters, also
 * rule out ABA across delete and re-insert.  Redis runs a script
 * atomically on the node owning the key, so the check and the write are
 * one step; with a failover, acknowledged writes are as durable as Redis
 * replication makes them: with ?wait=N each write is followed by WAIT N on
 * the same connection, and while fewer replicas have it but N are
 * connected (one resyncing) the backend waits on, within retry_ms.  If
 * they do not catch up in time the write still counts as done -- it is
 * applied and cannot be undone -- so durability then falls back to
 * Redis's asynchronous replication for that write.  A master with fewer
 * than N replicas connected cannot acknowledge anything, so waiting is
 * pointless: the open refuses such a master, and one found so later
 * fails the write that found it (DTX_EUNAVAILABLE, outcome unknown, as
 * after a lost reply) and refuses further writes until it has N again
 * (exec.c).
 *
 * One round trip in the common case: the backend keeps the last (version,
 * body) it saw of each document, the body as its stored bytes (a bounded
 * cache shared by the threads of the handle).  A by-_id update computes
 * the new body from the cached state and sends the compare-and-set at
 * once; if the version moved, the script's reply already carries the
 * current state, so the retry needs no extra read.  Outcomes decided from a cached state without a write (no
 * match, an update error, no change) are confirmed with a version-only
 * check (one round trip) before they are reported, so the cache never
 * changes an answer.  With no cached state, a read comes first (two round
 * trips).  A lost reply and a resend are harmless: the resent write finds
 * its own new token and counts as done.
 *
 * ---- Buckets, indexes and queries across shards ----------------------------
 *
 * A collection incarnation (GEN, new on every drop) has nb buckets
 * (?buckets=, default 16, fixed at creation).  A document lives in
 * bucket hash(_id) % nb, and everything of a bucket shares the hash tag
 * {COLL:GEN:B}: the documents, the members zset listing them (for scans,
 * in insertion order), the index zsets, and the catalog stamp.  So the
 * WRITE script updates a document, its membership and all of its
 * secondary index entries atomically on one slot: non-unique indexes are
 * exact, never stale, and a crash cannot leave them behind.  Documents
 * still spread over nb slots per collection (and collections over the
 * cluster), and a compare-and-set contends only with writes to the same
 * document.  (This departs from "one hash tag per document" in the issue:
 * placing by bucket costs nothing in contention, since Redis serialises
 * per node anyway, and makes index entries exact instead of
 * over-approximations that need lazy cleaning.)
 *
 * Queries scatter to every bucket (one pipelined round trip per node, the
 * nodes in parallel), each bucket answering with the documents its index
 * range or its members zset lists (RANGE script), and gather in C: every
 * candidate is checked with dtx__filter_match, then ordered by sequence
 * number (natural order) or dtx__sort_array, then skip and limit.  The
 * planner (plan.c) uses the same rules as the SQLite planner.  Across
 * shards there is no snapshot for free, yet a reader that sums documents
 * (dtx_audit's conservation check) needs one: a full scan is therefore a
 * double collect -- all buckets, then their versions once more; when no
 * document changed, came or went in between, every document was as read
 * at the instant between the two rounds (retried for up to 5 s, then
 * the scan settles for one pipelined round).  The read scripts are declared
 * no-writes, so a master pausing writes for a manual failover still
 * answers them in the same round as the other nodes.  A queue
 * claim such as the transfer worker's find_one_and_update {state:
 * "initiated"} reads the index ranges of all buckets at once, so no one
 * slot is a bottleneck; when several claimers lose the race for the same
 * document, their retries pick a random remaining candidate instead of
 * the next oldest.
 *
 * ---- Unique indexes across shards -------------------------------------------
 *
 * A unique key must be unique over all buckets, which no single script
 * can see.  Each unique key value has a claim key dtx:u:{COLL:GEN:N:KEY}
 * whose value names the owning document and a random token.  A writer
 * takes the claims of the keys it adds BEFORE its document write, and the
 * document records each claim it holds (field u<claim key> = value) in the
 * same WRITE script; claims for keys it drops are released AFTER (deleted
 * only if they still hold the recorded value).  A claim held by another
 * value is checked with the FENCE script on its owner document: if the
 * owner records that very value, the key is taken (DTX_EDUPKEY).
 * Otherwise the claim is an orphan (its writer crashed or lost its
 * compare-and-set) or belongs to a write still in flight; FENCE then
 * bumps the owner's version (a tombstone if the owner does not exist), so
 * that in-flight write can no longer succeed, and the claim is taken over
 * with a compare-and-set on its value.  So a document holding a key
 * always holds a recorded claim on it, and two documents never both do.
 * A crash leaves at most orphan claims, which the next writer of that key
 * takes over.  These claim tombstones (a version, no body) expire after
 * TOMBSTONE_TTL_MS.
 *
 * ---- Fence tombstones --------------------------------------------------------
 *
 * Not to be confused with the claim tombstones above: a deleted document
 * that carried a _fence record (src/store/fence.c) keeps its key, with a
 * new version and the record in field f and no body, for as long as the
 * _id is not created again (no expiry: a stale lock holder may wake at
 * any time), listed by _id in its bucket's tombstones set, which a drop
 * empties.  Reads see no body: to them it is absent.  The WRITE script
 * that deletes keeps it; an insert over it is a compare-and-set on its
 * version, decided in C on the record READDOC (or the lost write's reply)
 * returned, and drops f.
 *
 * ---- The catalog -------------------------------------------------------------
 *
 * dtx:{cat} maps collection names to JSON (generation, buckets, version,
 * index specs).  Each bucket has a stamp that writes must match (WRITE
 * returns "stale" otherwise, and the writer reloads the catalog), so a new
 * index is maintained by every writer from the moment the stamps move:
 * create_index records the index as building, raises every stamp, then
 * rewrites each existing document through the ordinary write path (which,
 * for a building index, adds all of the document's entries and claims),
 * and finally marks it ready for queries.  Dropping removes the catalog
 * entry, then marks each bucket dropped and deletes it.  An index that
 * gets a document with several keys is first marked multikey the same
 * way (new version, stamps raised), so no reader plans with the old flag
 * once such a document is visible.
 *
 * ---- Limits -------------------------------------------------------------------
 *
 *  - Natural (insertion) order is by a sequence number taken from the
 *    clock (milliseconds, then a per-process counter): exact within a
 *    process, by millisecond across processes.
 *  - Left behind with an expiry: claim tombstones and the stamps of
 *    dropped buckets (24 h).  Left behind for good: orphan claims of a
 *    dropped collection (claims no document records), and claims a
 *    failed unique index build took on behalf of concurrent writers.
 *    Kept on purpose, without expiry: fence tombstones (above) until
 *    their _id is created again or their collection dropped.
 *  - Slot migration: a bucket's multi-key scripts answer TRYAGAIN while
 *    its keys are split between two nodes, so its writes wait (retried
 *    with backoff) until the slot has moved. */
#include "store/redis/redis_int.h"

#include "doc/bdoc.h"
#include "util/assert.h"
#include "util/deadline.h"
#include "util/err.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 2000
#define DEFAULT_RETRY_MS 10000
#define DEFAULT_BUCKETS 16

/* ---- URI ---------------------------------------------------------------------- */

void dtx__rd_uri_free(rd_uri_t *u) {
  for (size_t i = 0; i < u->nseeds; i++)
    free(u->hosts[i]);
  free(u->hosts);
  free(u->ports);
  free(u->user);
  free(u->password);
  memset(u, 0, sizeof *u);
}

static int add_seed(rd_uri_t *u, const char *uri, const char *s, size_t n) {
  const char *colon = NULL;
  for (size_t i = 0; i < n; i++)
    if (s[i] == ':')
      colon = s + i;
  if (n == 0)
    return dtx__err(DTX_EBADURI, "store URI '%s' has an empty host", uri);
  size_t hlen = colon ? (size_t)(colon - s) : n;
  int port = 6379;
  if (colon && dtx__uri_int(colon + 1, n - hlen - 1, 1, 65535, &port) < 0)
    return dtx__err(DTX_EBADURI, "store URI '%s': bad port in '%.*s'", uri,
                    (int)n, s);
  if (hlen == 0 || hlen > 255)
    return dtx__err(DTX_EBADURI, "store URI '%s': bad host in '%.*s'", uri,
                    (int)n, s);
  for (size_t i = 0; i < hlen; i++)
    if (s[i] == '/' || s[i] == '@' || s[i] == ' ' || s[i] == '?')
      return dtx__err(DTX_EBADURI, "store URI '%s': bad host in '%.*s'", uri,
                      (int)n, s);
  char **nh = realloc(u->hosts, (u->nseeds + 1) * sizeof *nh);
  if (!nh)
    return dtx__err(DTX_ENOMEM, "parsing %s", uri);
  u->hosts = nh;
  int *np = realloc(u->ports, (u->nseeds + 1) * sizeof *np);
  if (!np)
    return dtx__err(DTX_ENOMEM, "parsing %s", uri);
  u->ports = np;
  if (!(u->hosts[u->nseeds] = strndup(s, hlen)))
    return dtx__err(DTX_ENOMEM, "parsing %s", uri);
  u->ports[u->nseeds++] = port;
  return 0;
}

/* The options a redis:// URI takes (store.h's one parser reads them). */
static const dtx__uri_opt_t opts[] = {
    {"wait", DTX__URI_INT, offsetof(rd_uri_t, wait), 0, 64, NULL, 0},
    {"password", DTX__URI_TEXT, offsetof(rd_uri_t, password), 0, 0, NULL, 0},
    {"user", DTX__URI_TEXT, offsetof(rd_uri_t, user), 0, 0, NULL, 0},
    {"timeout_ms", DTX__URI_INT, offsetof(rd_uri_t, timeout_ms), 1, 600000,
     NULL, 0},
    {"retry_ms", DTX__URI_INT, offsetof(rd_uri_t, retry_ms), 0, 3600000, NULL,
     0},
    {"buckets", DTX__URI_INT, offsetof(rd_uri_t, buckets), 1, 4096, NULL, 0},
    {"ns", DTX__URI_NAME, offsetof(rd_uri_t, ns), 1, 32, NULL, 0},
};

/* Who the connections authenticate as, once the userinfo (ui_user and
 * ui_pass, NULL when none; taken over) and the options are read: one
 * place for each, a user only with a password, and "" as the user means
 * the default user (a one-argument AUTH, see conn.c). */
static int set_auth(rd_uri_t *out, const char *shown, char *ui_user,
                    char *ui_pass) {
  if (ui_pass && (out->user || out->password)) {
    free(ui_user);
    free(ui_pass);
    return dtx__err(DTX_EBADURI,
                    "store URI '%s' gives its user and password both as "
                    "USER:PASSWORD@ and as %s=: give them once",
                    shown, out->user ? "user" : "password");
  }
  if (ui_pass) {
    out->user = ui_user;
    out->password = ui_pass;
  }
  if (out->user && !*out->user) {
    free(out->user); /* the default user */
    out->user = NULL;
  }
  if (out->user && (!out->password || !*out->password))
    return dtx__err(DTX_EBADURI,
                    "store URI '%s' names user '%s' without a password",
                    shown, out->user);
  return 0;
}

int dtx__rd_uri_parse(const char *uri, rd_uri_t *out) {
  memset(out, 0, sizeof *out);
  out->timeout_ms = DEFAULT_TIMEOUT_MS;
  out->retry_ms = DEFAULT_RETRY_MS;
  out->buckets = DEFAULT_BUCKETS;
  /* Every message names the URI with its password masked. */
  char *shown = dtx__uri_masked(uri ? uri : "(null)");
  if (!shown)
    return dtx__err(DTX_ENOMEM, "parsing a redis:// URI");
  if (!uri || strncmp(uri, "redis://", 8) != 0) {
    int bad = dtx__err(DTX_EBADURI,
                       "store URI '%s' does not start with redis://HOST:PORT",
                       shown);
    free(shown);
    return bad;
  }
  const char *p = uri + 8;
  const char *q = strchr(p, '?');
  size_t hlen = q ? (size_t)(q - p) : strlen(p);
  char *ui_user = NULL, *ui_pass = NULL;
  int rc = 0;
  for (size_t i = hlen; i > 0; i--)
    if (p[i - 1] == '@') { /* USER:PASSWORD@ before the seeds */
      if ((rc = dtx__uri_userinfo(shown, p, i - 1, &ui_user, &ui_pass)) < 0)
        goto fail;
      p += i;
      hlen -= i;
      break;
    }
  if (hlen && p[hlen - 1] == '/')
    hlen--; /* redis://host:port/ */
  if (hlen == 0) {
    rc = dtx__err(DTX_EBADURI, "store URI '%s' names no host", shown);
    goto fail;
  }
  for (const char *s = p, *end = p + hlen; s < end;) {
    const char *comma = memchr(s, ',', (size_t)(end - s));
    size_t n = comma ? (size_t)(comma - s) : (size_t)(end - s);
    if ((rc = add_seed(out, shown, s, n)) < 0)
      goto fail;
    s += n + 1;
    if (comma && s >= end) {
      rc = dtx__err(DTX_EBADURI, "store URI '%s' ends its hosts with ','",
                    shown);
      goto fail;
    }
  }
  if (q && (rc = dtx__uri_opts(shown, q + 1, opts, sizeof opts / sizeof *opts,
                               out)) < 0)
    goto fail;
  rc = set_auth(out, shown, ui_user, ui_pass);
  ui_user = ui_pass = NULL;
  if (rc < 0)
    goto fail;
  free(shown);
  return 0;
fail:
  free(ui_user);
  free(ui_pass);
  free(shown);
  dtx__rd_uri_free(out);
  return rc;
}

/* ---- tokens and sequence numbers -------------------------------------------------- */

void dtx__rd_token(dtx__backend_t *b, char out[RD_VERMAX + 1]) {
  unsigned long long c = atomic_fetch_add(&b->counter, 1);
  snprintf(out, RD_VERMAX + 1, "%012llx%012llx",
           (unsigned long long)(b->rnd & 0xffffffffffffULL),
           c & 0xffffffffffffULL);
}

void dtx__rd_newseq(dtx__backend_t *b, char out[RD_SEQLEN + 1]) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  unsigned long long now =
      ((unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec /
                                                  1000000) << 12;
  unsigned long long last = atomic_load(&b->lastseq), next;
  do {
    next = now > last ? now : last + 1;
  } while (!atomic_compare_exchange_weak(&b->lastseq, &last, next));
  snprintf(out, RD_SEQLEN + 1, "%016llx", next);
}

/* ---- the document cache ------------------------------------------------------------- */

static size_t cache_slot(const rd_buf_t *key) {
  return (size_t)(dtx__rd_hash64(key->p, key->n) % RD_CACHE_SLOTS);
}

/* The cache keeps each document's stored bytes (with its version and
 * sequence), never a json_t.  Every body a read or write produces is
 * handed on to the store API's caller, who owns it and may change it (the
 * ledger committer marks the entries of its round), and a change seen
 * through the cache would be written back by this process's next write
 * of that document, as if stored.  Bytes are copied in and out, and a hit
 * decodes its own copy into a new json_t, so nothing the cache holds is
 * shared with anyone.  Bytes, not a deep copy of the json_t, because
 * copying a few hundred bytes and decoding them on a hit costs a fraction
 * of copying a tree both ways (docs/benchmarks.md, "Client instructions
 * per batched transfer"). */
int dtx__rd_cache_get(dtx__backend_t *b, const rd_buf_t *key, rd_doc_t *d) {
  size_t s = cache_slot(key);
  pthread_mutex_t *mu = &b->cachemu[s % RD_CACHE_LOCKS];
  char ver[sizeof d->ver], seq[sizeof d->seq];
  uint8_t *raw = NULL;
  uint32_t len = 0;
  pthread_mutex_lock(mu);
  rd_centry_t *e = &b->cache[s];
  if (e->key && e->klen == key->n && memcmp(e->key, key->p, key->n) == 0 &&
      (raw = malloc(e->rawlen)) != NULL) {
    memcpy(ver, e->ver, sizeof ver);
    memcpy(seq, e->seq, sizeof seq);
    len = e->rawlen;
    memcpy(raw, e->raw, len);
  }
  pthread_mutex_unlock(mu);
  json_t *body = NULL;
  int rc = raw ? dtx__bson_to_json(raw, len, 0, &body) : -1;
  free(raw);
  if (rc < 0) {
    if (raw)
      dtx__err_clear(); /* out of memory: a miss, the caller reads */
    return 0;
  }
  memcpy(d->ver, ver, sizeof d->ver);
  memcpy(d->seq, seq, sizeof d->seq);
  json_decref(d->body);
  d->body = body;
  json_decref(d->fence); /* the cache holds live documents only */
  d->fence = NULL;
  d->cached = 1;
  return 1;
}

void dtx__rd_cache_put(dtx__backend_t *b, const rd_buf_t *key,
                       const rd_doc_t *d, const char *raw, size_t rawlen) {
  DTX_ASSERT(d->body, "rd.cache_live"); /* the cache holds live documents */
  DTX_ASSERT(!raw || dtx__rd_body_is_bson(raw, rawlen), "rd.cache_bytes");
  if (key->oom)
    return;
  size_t s = cache_slot(key);
  pthread_mutex_t *mu = &b->cachemu[s % RD_CACHE_LOCKS];
  bson_t enc = BSON_INITIALIZER;
  if (!raw) {
    /* Encoded as a write would store it; a failure is out of memory
     * (the body was stored, so it is an object under the size limit),
     * and this put's own: the entry is dropped, no error is left. */
    if (dtx__bson_from_json(d->body, &enc) < 0) {
      dtx__err_clear();
      bson_destroy(&enc);
      dtx__rd_cache_drop(b, key);
      return;
    }
    raw = (const char *)bson_get_data(&enc);
    rawlen = enc.len;
  }
  char *k = malloc(key->n ? key->n : 1);
  uint8_t *copy = k ? malloc(rawlen) : NULL;
  if (copy)
    memcpy(copy, raw, rawlen);
  bson_destroy(&enc);
  if (!copy) {
    free(k);
    dtx__rd_cache_drop(b, key); /* no stale entry stays behind */
    return;
  }
  memcpy(k, key->p, key->n);
  pthread_mutex_lock(mu);
  rd_centry_t *e = &b->cache[s];
  char *oldk = e->key;
  uint8_t *oldr = e->raw;
  e->key = k;
  e->klen = key->n;
  memcpy(e->ver, d->ver, sizeof e->ver);
  memcpy(e->seq, d->seq, sizeof e->seq);
  e->raw = copy;
  e->rawlen = (uint32_t)rawlen;
  pthread_mutex_unlock(mu);
  free(oldk);
  free(oldr);
}

/* ---- turns (bulk.c, modify.c) ---- */

int dtx__rd_turn_lock(dtx__backend_t *b, size_t i, int64_t t0) {
  if (pthread_mutex_trylock(&b->turns[i]) == 0)
    return 0;
  int64_t left = t0 + b->uri.retry_ms - dtx__rd_mono_ms();
  int64_t cmd = dtx__deadline_left_ms();
  if (cmd < left)
    left = cmd;
  if (left <= 0)
    return -1;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += (time_t)(left / 1000);
  ts.tv_nsec += (long)(left % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return pthread_mutex_timedlock(&b->turns[i], &ts) == 0 ? 0 : -1;
}

void dtx__rd_cache_drop(dtx__backend_t *b, const rd_buf_t *key) {
  size_t s = cache_slot(key);
  pthread_mutex_t *mu = &b->cachemu[s % RD_CACHE_LOCKS];
  char *oldk = NULL;
  uint8_t *oldr = NULL;
  pthread_mutex_lock(mu);
  rd_centry_t *e = &b->cache[s];
  if (e->key && e->klen == key->n && memcmp(e->key, key->p, key->n) == 0) {
    oldk = e->key;
    oldr = e->raw;
    e->key = NULL;
    e->raw = NULL;
  }
  pthread_mutex_unlock(mu);
  free(oldk);
  free(oldr);
}

/* ---- open / close ---------------------------------------------------------------------- */

static void rd_close(dtx__backend_t *b);

/* flags: DTX_OPEN_NOCREATE changes nothing here, since a Redis server
 * either answers or it does not; opening creates nothing but the
 * namespace's format key (format.c). */
static int rd_open(const char *uri, unsigned flags, dtx__backend_t **out) {
  (void)flags;
  *out = NULL;
  dtx__backend_t *b = calloc(1, sizeof *b);
  if (!b)
    return dtx__err(DTX_ENOMEM, "opening a redis:// store");
  int rc = dtx__rd_uri_parse(uri, &b->uri);
  if (rc < 0) {
    free(b);
    return rc;
  }
  dtx__rd_key_prefix(b->kp, b->uri.ns);
  snprintf(b->catkey, sizeof b->catkey, "%s{cat}", b->kp);
  pthread_rwlock_init(&b->maplock, NULL);
  pthread_mutex_init(&b->refreshmu, NULL);
  pthread_mutex_init(&b->catmu, NULL);
  for (int i = 0; i < RD_CACHE_LOCKS; i++)
    pthread_mutex_init(&b->cachemu[i], NULL);
  for (int i = 0; i < RD_TURNS; i++)
    pthread_mutex_init(&b->turns[i], NULL);
  if (getrandom(&b->rnd, sizeof b->rnd, 0) != (ssize_t)sizeof b->rnd) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    b->rnd = ((uint64_t)ts.tv_nsec << 24) ^ (uint64_t)ts.tv_sec ^
             ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)b;
  }
  if ((rc = dtx__rd_connect(b)) < 0 || (rc = dtx__rd_format_open(b)) < 0) {
    rd_close(b);
    return rc;
  }
  *out = b;
  return 0;
}

static void rd_close(dtx__backend_t *b) {
  if (!b)
    return;
  dtx__rd_disconnect(b);
  for (size_t i = 0; i < b->ncolls; i++)
    dtx__rd_coll_put(b->colls[i]);
  free(b->colls);
  for (size_t i = 0; i < RD_CACHE_SLOTS; i++) {
    free(b->cache[i].key);
    free(b->cache[i].raw);
  }
  for (int i = 0; i < RD_CACHE_LOCKS; i++)
    pthread_mutex_destroy(&b->cachemu[i]);
  for (int i = 0; i < RD_TURNS; i++)
    pthread_mutex_destroy(&b->turns[i]);
  pthread_rwlock_destroy(&b->maplock);
  pthread_mutex_destroy(&b->refreshmu);
  pthread_mutex_destroy(&b->catmu);
  dtx__rd_uri_free(&b->uri);
  free(b);
}

const dtx_store_methods_t dtx__redis_methods = {
    .version = 4,
    .scheme = "redis",
    .uri_form = "redis://HOST:PORT",
    .open = rd_open,
    .close = rd_close,
    .insert = dtx__rd_insert,
    .find = dtx__rd_find,
    .count = dtx__rd_count,
    .modify_one = dtx__rd_modify_one,
    .modify_many = dtx__rd_modify_many,
    .create_index = dtx__rd_create_index,
    .list_indexes = dtx__rd_list_indexes,
    .drop_collection = dtx__rd_drop_collection,
    .list_collections = dtx__rd_list_collections,
    .set_rules = dtx__rd_set_rules,
    .get_rules = dtx__rd_get_rules,
    .bulk = dtx__rd_bulk,
    .fence_records = dtx__rd_fence_records,
};
