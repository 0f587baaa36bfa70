/* redis_int.h -- internals shared by the files of the Redis backend
 * (standalone and Cluster); nothing outside src/store/redis/ includes it.
 *
 * Layout of the backend (redis.c carries the design argument):
 *   redis.c    the method table, the URI (its options: store.h), ids,
 *              versions, the doc cache
 *   conn.c     nodes, connections, the cluster slot map, topology at open
 *   exec.c     the batch executor every other file sends commands through:
 *              routing, redirects, retries, ?wait=N replicas
 *   scripts.c  the Lua scripts (small, data-only: no doctx semantics)
 *   codec.c    buffers, CRC16 slots, _id and index key encodings
 *   format.c   the namespace's format key, the upgrade of JSON-text bodies
 *   catalog.c  key names; collections and indexes: the catalog,
 *              create_index, drop, the multikey flag
 *   plan.c     executing a query plan (store/plan.h): candidate reads
 *              across buckets (scans made snapshots by a double
 *              collect; first matches)
 *   docs.c     document records, reading one, claim lists, insert
 *   write.c    the compare-and-set write: index entries, unique claims
 *   find.c     find, count, and the matches modify.c chooses from
 *   modify.c   modify_one (with upsert), modify_many
 *
 * Keys (B is a bucket 0..nb-1 of a collection incarnation GEN; every key of
 * one bucket shares the hash tag {COLL:GEN:B}, so one slot; with ?ns=NAME
 * every key starts "dtx@NAME:" instead of "dtx:"):
 *   dtx:{cat}                  hash: collection name -> catalog JSON
 *   dtx:{cat}:format           string: the namespace's format (format.c)
 *   dtx:d:{COLL:GEN:B}ID       hash: v version, s seq, b body (BSON;
 *                              JSON text in format 3, docs.c), f fence
 *                              record JSON (a tombstone's),
 *                              u<claim key> claim value (unique claims held)
 *   dtx:c:{COLL:GEN:B}         zset (score 0): SEQ ID   -- the bucket's docs
 *   dtx:x:{COLL:GEN:B}N        zset (score 0): KEY SEQ ID LEN -- index N
 *   dtx:m:{COLL:GEN:B}         string: catalog version writers must match
 *   dtx:u:{COLL:GEN:N:KEY}     string: ID "\n" token -- unique claim
 *
 * Ownership: the backend owns its nodes, their idle connections, the slot
 * map, the catalog cache (rd_coll_t, refcounted and immutable once built)
 * and the doc cache.  rd_cmd_t and rd_doc_t own what they hold until
 * cleared. */
#ifndef DTX_STORE_REDIS_INT_H
#define DTX_STORE_REDIS_INT_H

#include "store/plan.h"
#include "store/store.h"
#include "util/buf.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define RD_SLOTS 16384
#define RD_VERMAX 40 /* version tokens are 24 hex digits; room for more */
#define RD_SEQLEN 16

/* Internal outcomes that never leave the backend. */
#define RD_ESTALE (-1000) /* a bucket's catalog stamp moved: reload, retry */
#define RD_ELOST (-1001)  /* a compare-and-set lost: retry with the reply */
#define RD_EMULTI (-1002) /* a write makes an index multikey: mark it first */

/* ---- buffers -------------------------------------------------------------- */

typedef dtx__buf_t rd_buf_t; /* kept NUL-terminated by dtx__rd_put* */

void dtx__rd_put(rd_buf_t *b, const void *p, size_t n);
void dtx__rd_putc(rd_buf_t *b, char c);
void dtx__rd_puts(rd_buf_t *b, const char *s);
void dtx__rd_puti(rd_buf_t *b, long long v);
void dtx__rd_putf(rd_buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void dtx__rd_buf_free(rd_buf_t *b);

/* ---- URI ------------------------------------------------------------------ */

typedef struct rd_uri {
  size_t nseeds;
  char **hosts;
  int *ports;
  char *user;     /* an ACL user, NULL for the default one */
  char *password; /* NULL: no AUTH */
  int timeout_ms; /* connect and command timeout */
  int wait;       /* replicas each write waits for (WAIT) */
  int buckets;    /* buckets of collections created through this handle */
  int retry_ms;   /* budget for retrying transient errors */
  char ns[33];    /* namespace, "" for none */
} rd_uri_t;

/* Parses redis://[USER:PASSWORD@]H:P[,H:P...][?wait=N&user=U&password=S
 * &timeout_ms=N&buckets=N&retry_ms=N&ns=NAME].  DTX_EBADURI with a detail
 * otherwise, naming the URI with its password masked. */
int dtx__rd_uri_parse(const char *uri, rd_uri_t *out);
void dtx__rd_uri_free(rd_uri_t *u);

/* ---- scripts ----------------------------------------------------------------- */

enum {
  RD_S_WRITE,   /* compare-and-set of one document + its bucket entries */
  RD_S_READDOC, /* one document and its bucket's stamp */
  RD_S_RANGE,   /* documents listed by a range of a bucket zset */
  RD_S_COUNT,   /* zcard of a bucket's documents and its stamp */
  RD_S_FENCE,   /* unique claims: is it held, else bump the owner */
  RD_S_CLAIM,   /* unique claims: compare-and-set */
  RD_S_UNCLAIM, /* unique claims: delete if it still has a value */
  RD_S_CATSET,  /* catalog: compare-and-set of one collection */
  RD_S_STAMP,   /* raise a bucket's stamp */
  RD_S_DROP,    /* drop one bucket */
  RD_S_MRANGE,  /* standalone: RD_S_RANGE over up to RD_MRANGE_MAX buckets */
  RD_S_REBODY,  /* format.c: one body's bytes compare-and-set */
  RD_NSCRIPTS
};

extern const char *const dtx__rd_scripts[RD_NSCRIPTS];

/* The most sub-ranges one RD_S_MRANGE call carries: each reads up to its
 * own page, so this bounds how long one call holds the server. */
#define RD_MRANGE_MAX 16

/* ---- the cluster client ------------------------------------------------------- */

typedef struct rd_node {
  char *host;
  int port;
  pthread_mutex_t mu;
  redisContext **idle; /* connections not in use */
  size_t nidle, cap;
  /* ?wait=N: set (under mu) when this master was found with fewer than N
   * connected replicas; writes to it are refused until a re-check (at
   * most every RD_REPLICA_RECHECK_MS) finds N again. */
  int few_replicas;
  int replicas;          /* the count last seen */
  int64_t replicas_ms;   /* when it was seen (dtx__rd_mono_ms) */
} rd_node_t;

#define RD_REPLICA_RECHECK_MS 200

/* One command of a batch.  Arguments are copied in.  For a script the
 * arguments are its keys (nkeys of them) and then its ARGV; the executor
 * sends EVALSHA, or EVAL when a node lacks the script. */
typedef struct rd_cmd {
  int slot;   /* hash slot that routes it */
  int script; /* RD_S_* or -1 for a plain command */
  int nkeys;
  int write;  /* followed by WAIT when the URI asks for replicas */
  size_t argc, cap;
  char **argv;
  size_t *argvlen;
  int oom;
  /* executor state */
  int eval;      /* send the script text (NOSCRIPT seen) */
  rd_node_t *ask; /* one-shot ASK target */
  /* results */
  redisReply *reply; /* owned; NULL until answered */
  int short_wait;    /* fewer replicas than ?wait= acknowledged in time */
  int sent;          /* a copy went out and its reply was never read (the
                        connection broke after the send): it may have run,
                        and the reply, if any, is a resend's */
  rd_node_t *few;    /* a write answered by a master found with fewer
                        connected replicas than ?wait=: applied there, but
                        not acknowledged (dtx__rd_few_replicas_err) */
} rd_cmd_t;

void dtx__rd_cmd_init(rd_cmd_t *c, int slot, int script, int write);
void dtx__rd_arg(rd_cmd_t *c, const void *p, size_t n);
void dtx__rd_args(rd_cmd_t *c, const char *s);
void dtx__rd_argi(rd_cmd_t *c, long long v);
void dtx__rd_argb(rd_cmd_t *c, const rd_buf_t *b);
void dtx__rd_cmd_clear(rd_cmd_t *c);
void dtx__rd_cmds_free(rd_cmd_t *c, size_t n); /* clears each, frees c */

/* Runs every command of the batch, pipelined per node and nodes in
 * parallel, following MOVED and ASK, loading scripts on NOSCRIPT, and
 * retrying connection loss, TRYAGAIN, CLUSTERDOWN and the like with
 * backoff for up to the URI's retry budget.  0 when every command has a
 * reply (which may be an error reply of the command itself); else
 * DTX_EUNAVAILABLE (or DTX_ENOMEM) with a detail naming what.  With
 * ?wait=N a batch holding a write for a master known to have fewer than N
 * connected replicas fails with DTX_EUNAVAILABLE before it is sent. */
int dtx__rd_run(dtx__backend_t *b, rd_cmd_t *cmds, size_t n,
                const char *what);

/* As dtx__rd_run, but every reply comes from one round: when any command
 * must be resent, all are.  Scans use it, so the buckets of a collection
 * are read at (nearly) one moment even while slots migrate. */
int dtx__rd_run_together(dtx__backend_t *b, rd_cmd_t *cmds, size_t n,
                         const char *what);

/* As dtx__rd_run, and once every node's pipeline of the first round is
 * written (before any reply is read) it reaches fault point `point`: a
 * crash there leaves the server to apply what it received, an injected
 * error is taken as every connection lost, so all is sent again (every
 * write the backend sends is safe to run twice, see redis.c). */
int dtx__rd_run_sent(dtx__backend_t *b, rd_cmd_t *cmds, size_t n,
                     const char *what, const char *point);

/* bulk.c: the bulk method. */
int dtx__rd_bulk(dtx__backend_t *b, dtx__bulk_op_t *ops, size_t n);

/* DTX_EUNAVAILABLE for a write c whose master had fewer connected
 * replicas than ?wait= (c->few set by the executor): names the master
 * and both counts, and says the write was applied there. */
int dtx__rd_few_replicas_err(const dtx__backend_t *b, const rd_cmd_t *c);

/* DTX_EBACKEND for a reply the caller did not expect, with a detail. */
int dtx__rd_bad_reply(const redisReply *r, const char *what);

/* format.c: reads the namespace's format key at open; upgrades a format-3
 * namespace (JSON-text bodies) to format 4 (BSON bodies) in place, and
 * refuses a format it does not read (DTX_EBACKEND). */
int dtx__rd_format_open(dtx__backend_t *b);

/* Opens connections and learns the topology (standalone or cluster). */
int dtx__rd_connect(dtx__backend_t *b);
void dtx__rd_disconnect(dtx__backend_t *b);

/* conn.c's pieces the executor (exec.c) runs on. */

/* slot2node's value for a slot no known node serves. */
#define RD_NO_NODE UINT16_MAX

/* The index in b->nodes of the node host:port, added when new (the
 * backend owns it until close).  The caller holds maplock for writing.
 * -1 when out of memory. */
int dtx__rd_node_index_locked(dtx__backend_t *b, const char *host, int port);
/* A connection to n for the calling thread alone: an idle one, or a new
 * one (authenticated).  NULL with why (whylen bytes) saying what failed.
 * Give it back with dtx__rd_conn_put, or redisFree it when its state is
 * unknown. */
redisContext *dtx__rd_conn_get(dtx__backend_t *b, rd_node_t *n, char *why,
                               size_t whylen);
/* Returns c (NULL: nothing) to n's idle connections, or frees it when it
 * has failed or n keeps enough; c must not be used after the call. */
void dtx__rd_conn_put(rd_node_t *n, redisContext *c);
/* Whether r is an error reply starting with prefix. */
int dtx__rd_reply_is_err(const redisReply *r, const char *prefix);
/* Re-reads the cluster slot map from the first node that answers, at
 * most once per REFRESH_MIN_MS unless force (standalone: nothing to do).
 * 0 when refreshed or fresh enough; else -1 with why (whylen bytes)
 * holding the last failure. */
int dtx__rd_refresh_slots(dtx__backend_t *b, int force, char *why,
                          size_t whylen);
/* At open (exec.c): with ?wait=N, DTX_EUNAVAILABLE when a master that
 * serves slots has fewer than N connected replicas, as no write to it
 * could be acknowledged; 0 otherwise. */
int dtx__rd_check_replicas(dtx__backend_t *b);

/* ---- keys and encodings ------------------------------------------------------- */

uint16_t dtx__rd_slot(const char *key, size_t len);
uint64_t dtx__rd_hash64(const void *p, size_t n);

/* _id -> its key text: "i" decimal for integers (and integral doubles),
 * "s" bytes for strings, "v" hex of the value encoding for the rest. */
int dtx__rd_idenc(const json_t *id, rd_buf_t *out);

/* Order-preserving, prefix-free encoding of one index key value (MongoDB
 * order within a type bracket, numbers exactly by value), and of a tuple
 * of them. */
void dtx__rd_valenc(rd_buf_t *b, const json_t *v);
void dtx__rd_tupleenc(rd_buf_t *b, const json_t *tuple);

/* ---- catalog -------------------------------------------------------------- */

typedef struct rd_idx {
  int64_t id;
  dtx__index_spec_t *spec;
  int ready;    /* built: queries may use it */
  int multikey; /* some document made it so (dtx__index_keys_multikey) */
} rd_idx_t;

#define RD_KPMAX 48 /* a key prefix: "dtx:" or "dtx@NAME:" */

/* The key prefix of namespace ns ("" or NULL: none). */
void dtx__rd_key_prefix(char out[RD_KPMAX], const char *ns);

typedef struct rd_coll {
  atomic_int refs;
  char *name;
  char kp[RD_KPMAX]; /* the backend's key prefix */
  char gen[20];
  int nb;
  int64_t ver; /* the stamp every bucket must show for writes */
  int64_t next;
  size_t nidx;
  rd_idx_t *idx;
  char *raw; /* the stored catalog text */
  int64_t loaded_ms;
  uint16_t *slots; /* slot of each bucket */
  dtx__rules_t *rules; /* compiled "rules" of the entry, or NULL */
} rd_coll_t;

void dtx__rd_coll_put(rd_coll_t *co);
/* The descriptor of collection name (new reference) in *out, or NULL when
 * it does not exist and create is 0.  fresh forces a catalog read. */
int dtx__rd_coll_get(dtx__backend_t *b, const char *name, int create,
                     int fresh, rd_coll_t **out);
void dtx__rd_coll_forget(dtx__backend_t *b, const char *name);

void dtx__rd_key_doc(rd_buf_t *o, const rd_coll_t *co, int bucket,
                     const char *id, size_t idlen);
void dtx__rd_key_members(rd_buf_t *o, const rd_coll_t *co, int bucket);
void dtx__rd_key_stamp(rd_buf_t *o, const rd_coll_t *co, int bucket);

/* One page of bucket k of co in insertion order (RD_S_RANGE with bodies):
 * up to page members after *min ("-" at first), into c (the caller
 * clears it): its checked reply is {stamp, nread, last seq, then per
 * document _id, version, seq, body}.  On return *min is the next page's
 * start and *more 1 when a full page came back.  0, or <0 with c
 * cleared (what names the walk in errors).  The index backfill and the
 * format upgrade walk buckets with it (catalog.c, format.c). */
int dtx__rd_bucket_page(dtx__backend_t *b, const rd_coll_t *co, int k,
                        rd_buf_t *min, long long page, const char *what,
                        rd_cmd_t *c, int *more);
/* The set of the bucket's fence tombstones (by encoded _id). */
void dtx__rd_key_tombs(rd_buf_t *o, const rd_coll_t *co, int bucket);
void dtx__rd_key_index(rd_buf_t *o, const rd_coll_t *co, int bucket,
                       int64_t ixid);
void dtx__rd_key_claim(rd_buf_t *o, const rd_coll_t *co, int64_t ixid,
                       const char *tuple, size_t tlen);
int dtx__rd_bucket(const rd_coll_t *co, const char *id, size_t idlen);

/* Raises every bucket's stamp to co->ver (they only ever go up). */
int dtx__rd_raise_stamps(dtx__backend_t *b, const rd_coll_t *co);
/* Marks index ixid of co multikey in the catalog (a new catalog version,
 * with every stamp raised), before a document with several keys in it is
 * written: readers that plan with the old flag then see a stale stamp in
 * every bucket such a document can be in. */
int dtx__rd_mark_multikey(dtx__backend_t *b, const rd_coll_t *co,
                          int64_t ixid);

int dtx__rd_create_index(dtx__backend_t *b, const char *coll,
                         const dtx__index_spec_t *spec);
int dtx__rd_list_indexes(dtx__backend_t *b, const char *coll, json_t **out);
int dtx__rd_drop_collection(dtx__backend_t *b, const char *coll);
int dtx__rd_list_collections(dtx__backend_t *b, json_t **out);
int dtx__rd_set_rules(dtx__backend_t *b, const char *coll, const json_t *spec);
int dtx__rd_get_rules(dtx__backend_t *b, const char *coll, json_t **out);
/* find.c: the fence_records method. */
int dtx__rd_fence_records(dtx__backend_t *b, const char *coll, json_t **out);

/* ---- unique claims -------------------------------------------------------------- */

/* A list of claims (claim key, value) some writes took. */
typedef struct rd_claims {
  rd_buf_t *keys, *vals;
  size_t n, cap;
  int oom; /* an add failed: the list is incomplete */
} rd_claims_t;

void dtx__rd_claims_add(rd_claims_t *c, const char *k, size_t klen,
                        const char *v, size_t vlen);
void dtx__rd_claims_free(rd_claims_t *c);
/* Deletes each claim that still holds its value (best effort). */
void dtx__rd_claims_release(dtx__backend_t *b, const rd_claims_t *c);

/* ---- documents ------------------------------------------------------------- */

typedef struct rd_doc {
  rd_buf_t id; /* encoded _id */
  int bucket;
  char ver[RD_VERMAX + 1]; /* "" when the key does not exist */
  char seq[RD_SEQLEN + 1];
  json_t *body; /* NULL when absent (or a tombstone of either kind) */
  json_t *fence; /* absent: the fence record a deleted document left
                    (src/store/fence.c), NULL when none */
  int cached;   /* from this process's cache: may be stale */
} rd_doc_t;

void dtx__rd_doc_clear(rd_doc_t *d);
/* Fills d from a {v, s, b} triple of replies (bodies parsed) and f, the
 * fence record field (NULL for replies that list only live documents).
 * d's id must be set: a corrupt body is DTX_EBACKEND naming coll and it. */
int dtx__rd_doc_fill(rd_doc_t *d, const char *coll, const redisReply *v,
                     const redisReply *s, const redisReply *body,
                     const redisReply *f);

/* Bodies (docs.c): BSON bytes, or JSON text in a namespace of format 3;
 * the last byte tells which (docs.c says why). */
int dtx__rd_body_is_bson(const char *p, size_t n);
/* Parses the stored body p[0..n) (NUL-terminated after n, as hiredis
 * leaves it) of d (its id set, for the message) in coll into a new
 * object *out: BSON through dtx__bson_check, JSON text through the
 * parser.  DTX_EBACKEND naming coll and the _id when corrupt. */
int dtx__rd_body_parse(const char *coll, const rd_doc_t *d, const char *p,
                       size_t n, json_t **out);
/* Appends the stored form of body, a document of coll, to out: its BSON
 * bytes (dtx__store_body).  DTX_ELIMIT past 16 MiB, DTX_ENOMEM. */
int dtx__rd_body_encode(const json_t *body, const char *coll, rd_buf_t *out);
/* Sets key (emptied first; the caller owns and frees it) to the key of
 * d's record in co; d's id and bucket must be set. */
void dtx__rd_doc_key(const rd_coll_t *co, const rd_doc_t *d, rd_buf_t *key);

/* The most attempts of a compare-and-set loop that dtx__rd_keep_trying
 * does not pace (taking a unique claim, an insert, an upsert). */
#define RD_WRITE_ATTEMPTS 200

/* Whether a compare-and-set loop begun at t0 (dtx__rd_mono_ms) that has
 * lost `losses` times tries again (docs.c): 1, after a randomised pause
 * growing with the losses from the third on, until the URI's retry budget
 * is spent; then 0. */
int dtx__rd_keep_trying(const dtx__backend_t *b, int64_t t0, int losses);
/* The pause after `losses` lost compare-and-sets (none before the third;
 * then random, up to 50 us << min(losses - 3, 7)), shared by the single
 * path's loop above and the bulk write's rounds (bulk.c). */
void dtx__rd_contend_pause(int losses);

/* The compare-and-set write of one document (write.c): takes cur (a
 * document as last seen, body NULL when absent) to newbody (NULL deletes),
 * with its index entries and unique claims.  0 on success (*cur then
 * describes the new state), RD_ELOST with *cur replaced by the current
 * state when it changed meanwhile, RD_ESTALE when the catalog moved, or
 * an error (DTX_EDUPKEY ...).  Claims the write took and recorded are
 * appended to claims when it is not NULL (an index build releases them
 * if it fails).  m (borrowed, may be NULL) is the modify request whose
 * time bounds the script checks against the server's TIME (window.c):
 * DTX_ESTALE / DTX_ESTATE when outside them, nothing written.  A delete by
 * m leaves the deleted document's fence record under its key
 * (dtx__fence_tombstone of m and cur's body), in the same script; an
 * insert over a fence tombstone drops it (the caller has folded
 * cur->fence into newbody with dtx__fence_revive). */
int dtx__rd_write(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                  json_t *newbody, const dtx__modify_t *m,
                  rd_claims_t *claims);

/* dtx__rd_write in halves, so that a bulk write pipelines many: begin
 * prepares (index diffs; unique claims are taken here, a round trip each)
 * and builds the WRITE command, dtx__rd_write_cmd(p); after running it,
 * end reads its reply with rc the run's code, and returns what
 * dtx__rd_write would (it frees p).  begin returns 0 with *out NULL when
 * there is nothing to write, or an error (nothing to end). */
typedef struct rd_wprep rd_wprep_t;
int dtx__rd_write_begin(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                        json_t *newbody, const dtx__modify_t *m,
                        rd_wprep_t **out);
rd_cmd_t *dtx__rd_write_cmd(rd_wprep_t *p);
int dtx__rd_write_end(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                      rd_wprep_t *p, int rc, rd_claims_t *claims);

/* One round trip for one document d (its id and bucket set): with
 * verify 0 it re-reads d (fresh, docs.c); with verify 1 it is the
 * version-only check of a cached state below.  A bulk write pipelines the
 * halves of each instead. */
int dtx__rd_doc_round(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *d,
                      int verify);
/* The READDOC command of d, and its reply into d. */
void dtx__rd_read_cmd(const rd_coll_t *co, const rd_doc_t *d, rd_cmd_t *c);
int dtx__rd_read_reply(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *d,
                       const rd_cmd_t *c);

/* The version-only check of a cached state (write.c): 0 when cur is
 * current, RD_ELOST with cur refreshed when not, RD_ESTALE, or an error. */
void dtx__rd_verify_cmd(const rd_coll_t *co, const rd_doc_t *cur,
                        rd_cmd_t *c);
int dtx__rd_verify_reply(dtx__backend_t *b, const rd_coll_t *co,
                         rd_doc_t *cur, const rd_cmd_t *c);

/* Sets d's encoded id and bucket from an _id value. */
int dtx__rd_doc_set_id(const rd_coll_t *co, rd_doc_t *d, const json_t *id);

int dtx__rd_insert(dtx__backend_t *b, const char *coll, json_t *const *docs,
                   size_t n, int bypass, size_t *ninserted);

/* The checks of doc, a new document of cur's _id (an insert's, or the
 * upsert m's), in SQLite's order (docs.c says why): the fence record a
 * tombstone of the _id keeps first, then the rules.  *seen: cur was read
 * (a refusal on a state never read is made again on a read one).  0, the
 * refusal, or the read's error (RD_ESTALE among them). */
int dtx__rd_check_new(dtx__backend_t *b, const rd_coll_t *co,
                      const dtx__modify_t *m, rd_doc_t *cur, json_t *doc,
                      int bypass, int *seen);

/* The fresh documents of *cop that match f, in natural order (find.c): an
 * array of *n docs in *out that the caller frees with dtx__rd_docs_free
 * (NULL and 0 on error).  *cop may be replaced by a fresher descriptor
 * (the old reference is put); NULL when the collection was dropped. */
int dtx__rd_matches(dtx__backend_t *b, rd_coll_t **cop, const json_t *fspec,
                    const dtx__filter_t *f, rd_doc_t **out, size_t *n);
/* qsort order of rd_doc_t: natural order (insertion sequence, then the
 * encoded _id). */
int dtx__rd_doc_seq_cmp(const void *pa, const void *pb);
int dtx__rd_find(dtx__backend_t *b, const char *coll, const json_t *fspec,
                 const dtx__filter_t *f, const json_t *sort, int64_t skip,
                 int64_t limit, json_t **out);
int dtx__rd_count(dtx__backend_t *b, const char *coll, const json_t *fspec,
                  const dtx__filter_t *f, int64_t *out);
int dtx__rd_modify_one(dtx__backend_t *b, const dtx__modify_t *m,
                       dtx__modify_result_t *res);
int dtx__rd_modify_many(dtx__backend_t *b, const dtx__modify_t *m,
                        int64_t *matched, int64_t *modified);

/* ---- planning ---------------------------------------------------------------- */

/* The plan of fspec over co's built indexes (dtx__plan_choose). */
int dtx__rd_plan(const rd_coll_t *co, const json_t *fspec, dtx__plan_t *p);
/* The single _id (an integer or a string) of a plain by-id plan, or
 * NULL: then that document is the only candidate. */
const json_t *dtx__rd_plan_single_id(const dtx__plan_t *p);

/* Fresh documents that may match the plan, each once, bodies present, in
 * no particular order.  RD_ESTALE when a bucket's stamp disagrees with co.
 * *out is an array of *n docs the caller frees with dtx__rd_docs_free. */
int dtx__rd_candidates(dtx__backend_t *b, const rd_coll_t *co,
                       const dtx__plan_t *p, rd_doc_t **out, size_t *n);
void dtx__rd_docs_free(rd_doc_t *d, size_t n);

/* For modify_one (want 1) and a sorted find with a small page (want: its
 * skip + limit): the first matches of f in each bucket (at most want per
 * bucket, in *out, no document twice), reading a few entries at a time;
 * a bucket stops early once its entries pass the want-th best match found
 * over all buckets, so *out holds the first `want` matches overall (and
 * maybe more).  Without sort, only for plans whose entries are in
 * insertion order within a bucket (a scan, or an index with every field
 * equal to one value); with sort, for a plan of dtx__rd_plan_sorted,
 * whose entries are in sort order.  Returns 0 for other plans (then use
 * dtx__rd_candidates), 1 when done, <0 on error. */
int dtx__rd_first_matches(dtx__backend_t *b, const rd_coll_t *co,
                          const dtx__plan_t *p, const dtx__filter_t *f,
                          const json_t *sort, size_t want, rd_doc_t **out,
                          size_t *n);

/* A plan that walks an index in sort order (DTX__PLAN_SORTED): 1 and *p
 * set when one is better than dtx__rd_plan's, else 0 (*p empty); <0 on
 * error.  Free *p with dtx__plan_free. */
int dtx__rd_plan_sorted(const rd_coll_t *co, const json_t *fspec,
                        const json_t *sort, dtx__plan_t *p);

/* ---- the backend --------------------------------------------------------------- */

#define RD_CACHE_SLOTS 4096
#define RD_CACHE_LOCKS 64
#define RD_TURNS 256 /* bulk.c's turns on contended documents */

/* A cache entry holds the document's stored bytes, never a json_t:
 * nothing a caller of the store API holds can reach it (redis.c). */
typedef struct rd_centry {
  char *key;
  size_t klen;
  char ver[RD_VERMAX + 1];
  char seq[RD_SEQLEN + 1];
  uint8_t *raw; /* checked BSON bytes of the body, rawlen of them */
  uint32_t rawlen;
} rd_centry_t;

struct dtx__backend {
  rd_uri_t uri;
  int cluster;
  char kp[RD_KPMAX];  /* key prefix of every key ("dtx:", "dtx@NS:") */
  char catkey[RD_KPMAX + 8]; /* the catalog hash: kp "{cat}" */

  /* topology: nodes are appended, never removed, until close */
  pthread_rwlock_t maplock;
  rd_node_t **nodes;
  size_t nnodes, capnodes;
  uint16_t slot2node[RD_SLOTS]; /* index into nodes; UINT16_MAX: unknown */
  pthread_mutex_t refreshmu;
  int64_t refreshed_ms;
  char sha[RD_NSCRIPTS][48];

  /* catalog cache */
  pthread_mutex_t catmu;
  rd_coll_t **colls;
  size_t ncolls, capcolls;

  /* recently seen documents, by key */
  pthread_mutex_t cachemu[RD_CACHE_LOCKS];
  rd_centry_t cache[RD_CACHE_SLOTS];

  /* Turns: a bulk write whose compare-and-set on a document lost holds
   * that document's turn (by key hash) from its next evaluation to the
   * write's reply, so this process's threads write a hot document one
   * after another instead of beating each other's writes (bulk.c). */
  pthread_mutex_t turns[RD_TURNS];

  /* version tokens and sequence numbers */
  uint64_t rnd;
  atomic_ullong counter;
  atomic_ullong lastseq;
};

/* A version token no other write of any process will use. */
void dtx__rd_token(dtx__backend_t *b, char out[RD_VERMAX + 1]);
/* An insertion sequence number: increasing in this process, and ordered
 * by milliseconds across processes. */
void dtx__rd_newseq(dtx__backend_t *b, char out[RD_SEQLEN + 1]);

/* The document cache (redis.c says why it keeps bytes).  get: 1 with d's
 * version, sequence and a new body of its own decoded from the entry
 * (d->fence cleared, d->cached set), 0 on a miss (d unchanged).  put:
 * remembers d (a live document: body set) under key; raw[0..rawlen)
 * (borrowed) are the stored BSON bytes d->body was read from or written
 * as -- checked by dtx__bson_check or made by libbson -- and raw NULL
 * has put encode d->body itself (a JSON-text body of a format-3
 * namespace, a read whose reply is gone).  Out of memory drops the
 * entry instead. */
int dtx__rd_cache_get(dtx__backend_t *b, const rd_buf_t *key, rd_doc_t *d);
void dtx__rd_cache_put(dtx__backend_t *b, const rd_buf_t *key,
                       const rd_doc_t *d, const char *raw, size_t rawlen);
void dtx__rd_cache_drop(dtx__backend_t *b, const rd_buf_t *key);
/* The stored BSON bytes a reply's body field holds (*n of them), or NULL
 * when it holds none (nil, or a format-3 JSON-text body): what
 * dtx__rd_doc_fill parsed, for dtx__rd_cache_put (docs.c). */
const char *dtx__rd_reply_bson(const redisReply *body, size_t *n);

/* Locks turn i (b->turns), waiting no longer than the operation's own
 * window (retry_ms from t0, mono ms) or the command's deadline: the
 * holder may be stuck on a server that stopped answering, for its whole
 * window, and a queue of waiters behind it would each add theirs (with 8
 * threads on one document of a stopped server, calls with retry_ms=1000
 * waited out the whole 4 s outage).  0 when taken; -1 when the wait ran
 * out: the caller goes on without it (turns only order the writers) and
 * meets the server's error, or the deadline, itself. */
int dtx__rd_turn_lock(dtx__backend_t *b, size_t i, int64_t t0);

int64_t dtx__rd_mono_ms(void);
void dtx__rd_sleep_ms(int64_t ms);

#endif
