/* docs.c -- the document records of the Redis backend and the helpers
 * every document operation shares: the retry pause of a compare-and-set
 * that keeps losing, reading one document (and its cache entry), lists of
 * unique claims and their release, and insert.
 *
 * The other document operations live beside it: write.c is the
 * compare-and-set write (index entries, unique claims) that every change
 * goes through, find.c the reads (find, count), modify.c modify_one and
 * modify_many. */
#include "store/redis/redis_int.h"

#include "doc/bdoc.h"
#include "util/deadline.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- contention ----------------------------------------------------------------------- */

void dtx__rd_contend_pause(int losses) {
  if (losses < 3)
    return;
  static _Thread_local uint64_t rnd;
  if (!rnd)
    rnd = dtx__rd_hash64(&rnd, sizeof rnd) ^ (uint64_t)dtx__rd_mono_ms() ^
          (uint64_t)(uintptr_t)&rnd;
  rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
  int shift = losses - 3 < 7 ? losses - 3 : 7;
  long us = 50L << shift; /* up to 6.4 ms */
  long pause = (long)((rnd >> 33) % (uint64_t)us) + 1;
  struct timespec ts = {0, pause * 1000L};
  nanosleep(&ts, NULL);
}

/* A compare-and-set that keeps losing is retried for up to the URI's
 * retry budget, with a randomised pause that grows with the losses, so
 * that writers of one hot document take turns instead of starving. */
int dtx__rd_keep_trying(const dtx__backend_t *b, int64_t t0, int losses) {
  if (losses < 3)
    return 1;
  if (dtx__deadline_expired(t0, b->uri.retry_ms + 1)) /* or the command's */
    return 0;
  dtx__rd_contend_pause(losses);
  return 1;
}

/* ---- documents --------------------------------------------------------------------- */

void dtx__rd_doc_clear(rd_doc_t *d) {
  dtx__rd_buf_free(&d->id);
  json_decref(d->body);
  json_decref(d->fence);
  memset(d, 0, sizeof *d);
}

static int reply_str(const redisReply *r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
}

/* ---- bodies ------------------------------------------------------------------------ */

/* A body is stored as BSON bytes (namespace format 4, format.c) or, in a
 * namespace written before it (format 3) and not yet upgraded, as JSON
 * text.  The last byte tells them apart, always: a BSON document ends
 * with its terminating 0x00, and JSON text of an object ends with '}'
 * (JSON text never holds a raw NUL, not even inside a string).  The first
 * byte could not: it is the low byte of BSON's length, which is '{' for
 * a document of 123 bytes.  So the reader needs no format number, and a
 * body an upgrade missed (a slot migrating under its SCAN) still reads. */
int dtx__rd_body_is_bson(const char *p, size_t n) {
  return n >= 5 && p[n - 1] == '\0';
}

/* The _id of d for messages: the number or the string its key encodes,
 * else the key's encoding itself. */
static void id_text(const rd_doc_t *d, char *out, size_t cap) {
  const char *p = d->id.p ? d->id.p : "";
  int n = d->id.n > 64 ? 64 : (int)d->id.n;
  if (n > 0 && p[0] == 'i')
    snprintf(out, cap, "%.*s", n - 1, p + 1);
  else if (n > 0 && p[0] == 's')
    snprintf(out, cap, "\"%.*s\"", n - 1, p + 1);
  else
    snprintf(out, cap, "(key %.*s)", n, p);
}

int dtx__rd_body_parse(const char *coll, const rd_doc_t *d, const char *p,
                       size_t n, json_t **out) {
  *out = NULL;
  char id[80], what[200];
  id_text(d, id, sizeof id);
  snprintf(what, sizeof what, "redis: stored document _id %s in %s", id,
           coll ? coll : "?");
  if (dtx__rd_body_is_bson(p, n)) {
    int rc = dtx__bson_check((const uint8_t *)p, n, DTX_ECORRUPT, what);
    if (rc < 0)
      return rc;
    return dtx__bson_to_json((const uint8_t *)p, (uint32_t)n, 0, out);
  }
  json_t *j = NULL;
  if (dtx__json_parse(p, &j) < 0 || !json_is_object(j)) {
    json_decref(j);
    return dtx__err(DTX_ECORRUPT, "%s is not a JSON object", what);
  }
  *out = j;
  return 0;
}

const char *dtx__rd_reply_bson(const redisReply *body, size_t *n) {
  *n = 0;
  if (!body || body->type != REDIS_REPLY_STRING ||
      !dtx__rd_body_is_bson(body->str, body->len))
    return NULL;
  *n = body->len;
  return body->str;
}

int dtx__rd_body_encode(const json_t *body, const char *coll,
                        rd_buf_t *out) {
  bson_t bs = BSON_INITIALIZER;
  int rc = dtx__store_body(body, coll, &bs);
  if (rc == 0)
    dtx__rd_put(out, bson_get_data(&bs), bs.len);
  bson_destroy(&bs);
  if (rc == 0 && out->oom)
    rc = dtx__err(DTX_ENOMEM, "encoding a document");
  return rc;
}

int dtx__rd_doc_fill(rd_doc_t *d, const char *coll, const redisReply *v,
                     const redisReply *s, const redisReply *body,
                     const redisReply *f) {
  if (!reply_str(v) || !reply_str(s) || !reply_str(body) ||
      (f && !reply_str(f)) ||
      (v->type == REDIS_REPLY_STRING && v->len > RD_VERMAX))
    return dtx__err(DTX_EBACKEND, "redis: malformed document record");
  json_decref(d->body);
  d->body = NULL;
  json_decref(d->fence);
  d->fence = NULL;
  d->cached = 0;
  if (f && f->type == REDIS_REPLY_STRING && f->len > 0 &&
      (dtx__json_parse(f->str, &d->fence) < 0 || !json_is_object(d->fence))) {
    json_decref(d->fence);
    d->fence = NULL;
    return dtx__err(DTX_EBACKEND, "redis: malformed fence record");
  }
  size_t vl = v->type == REDIS_REPLY_STRING ? v->len : 0;
  memcpy(d->ver, vl ? v->str : "", vl);
  d->ver[vl] = '\0';
  size_t sl = s->type == REDIS_REPLY_STRING && s->len <= RD_SEQLEN ? s->len : 0;
  memcpy(d->seq, sl ? s->str : "", sl);
  d->seq[sl] = '\0';
  if (body->type == REDIS_REPLY_STRING && body->len > 0) {
    int rc = dtx__rd_body_parse(coll, d, body->str, body->len, &d->body);
    /* The audit reads past a corrupt body (store.h): absent to it. */
    return dtx__corrupt_skip(rc) ? 0 : rc;
  }
  return 0;
}

void dtx__rd_doc_key(const rd_coll_t *co, const rd_doc_t *d, rd_buf_t *key) {
  key->n = 0;
  dtx__rd_key_doc(key, co, d->bucket, d->id.p, d->id.n);
}

int dtx__rd_doc_set_id(const rd_coll_t *co, rd_doc_t *d, const json_t *id) {
  d->id.n = 0;
  int rc = dtx__rd_idenc(id, &d->id);
  if (rc < 0)
    return rc;
  d->bucket = dtx__rd_bucket(co, d->id.p, d->id.n);
  return 0;
}

void dtx__rd_read_cmd(const rd_coll_t *co, const rd_doc_t *d, rd_cmd_t *c) {
  rd_buf_t key = {0};
  dtx__rd_cmd_init(c, co->slots[d->bucket], RD_S_READDOC, 0);
  c->nkeys = 2;
  dtx__rd_doc_key(co, d, &key);
  dtx__rd_argb(c, &key);
  key.n = 0;
  dtx__rd_key_stamp(&key, co, d->bucket);
  dtx__rd_argb(c, &key);
  dtx__rd_buf_free(&key);
}

int dtx__rd_read_reply(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *d,
                       const rd_cmd_t *c) {
  const redisReply *r = c->reply;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 5)
    return dtx__rd_bad_reply(r, "reading a document");
  if (r->element[0]->type != REDIS_REPLY_STRING ||
      (r->element[0]->len == 7 &&
       memcmp(r->element[0]->str, "dropped", 7) == 0))
    return RD_ESTALE;
  int rc = dtx__rd_doc_fill(d, co->name, r->element[1], r->element[2], r->element[3],
                            r->element[4]);
  if (rc == 0 && d->body) {
    rd_buf_t key = {0};
    size_t n;
    const char *raw = dtx__rd_reply_bson(r->element[3], &n);
    dtx__rd_doc_key(co, d, &key);
    dtx__rd_cache_put(b, &key, d, raw, n);
    dtx__rd_buf_free(&key);
  }
  return rc;
}

int dtx__rd_doc_round(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *d,
                      int verify) {
  rd_cmd_t c;
  if (verify)
    dtx__rd_verify_cmd(co, d, &c);
  else
    dtx__rd_read_cmd(co, d, &c);
  int rc = dtx__rd_run(b, &c, 1,
                       verify ? "checking a document" : "reading a document");
  if (rc == 0)
    rc = verify ? dtx__rd_verify_reply(b, co, d, &c)
                : dtx__rd_read_reply(b, co, d, &c);
  dtx__rd_cmd_clear(&c);
  return rc;
}

/* ---- claim lists ---------------------------------------------------------------------- */

void dtx__rd_claims_add(rd_claims_t *c, const char *k, size_t klen,
                        const char *v, size_t vlen) {
  if (c->n == c->cap) {
    size_t ncap = c->cap ? c->cap * 2 : 8;
    rd_buf_t *nk = realloc(c->keys, ncap * sizeof *nk);
    if (nk)
      c->keys = nk;
    rd_buf_t *nv = nk ? realloc(c->vals, ncap * sizeof *nv) : NULL;
    if (nv)
      c->vals = nv;
    if (!nk || !nv) {
      c->oom = 1;
      return;
    }
    c->cap = ncap;
  }
  memset(&c->keys[c->n], 0, sizeof c->keys[c->n]);
  memset(&c->vals[c->n], 0, sizeof c->vals[c->n]);
  dtx__rd_put(&c->keys[c->n], k, klen);
  dtx__rd_put(&c->vals[c->n], v, vlen);
  if (c->keys[c->n].oom || c->vals[c->n].oom)
    c->oom = 1;
  c->n++;
}

void dtx__rd_claims_free(rd_claims_t *c) {
  for (size_t i = 0; i < c->n; i++) {
    dtx__rd_buf_free(&c->keys[i]);
    dtx__rd_buf_free(&c->vals[i]);
  }
  free(c->keys);
  free(c->vals);
  memset(c, 0, sizeof *c);
}

void dtx__rd_claims_release(dtx__backend_t *b, const rd_claims_t *c) {
  if (!c->n)
    return;
  rd_cmd_t *cmds = calloc(c->n, sizeof *cmds);
  if (!cmds)
    return;
  size_t nc = 0;
  for (size_t i = 0; i < c->n; i++) {
    if (c->vals[i].n == 0)
      continue;
    rd_cmd_t *cmd = &cmds[nc++];
    dtx__rd_cmd_init(cmd, dtx__rd_slot(c->keys[i].p, c->keys[i].n),
                     RD_S_UNCLAIM, 1);
    cmd->nkeys = 1;
    dtx__rd_argb(cmd, &c->keys[i]);
    dtx__rd_argb(cmd, &c->vals[i]);
  }
  /* An unreleased claim is an orphan the next taker fences and takes
   * over, so a failure here is not an error of the write. */
  char keep[512];
  snprintf(keep, sizeof keep, "%s", dtx_errdetail());
  (void)dtx__rd_run(b, cmds, nc, "releasing unique claims");
  dtx__err(0, "%s", keep);
  dtx__rd_cmds_free(cmds, nc);
}

/* ---- insert ------------------------------------------------------------------------------- */

/* A new document of a deleted _id takes over the fence record its
 * tombstone keeps and is judged with it, fence first, then the rules
 * (fence.c): SQLite reads the tombstone in the insert's own transaction,
 * so a stale fenced upsert is DTX_EFENCED there even when the rules
 * would refuse its document too, and a rule about _fence sees the record.
 * Here a write goes from the state it last saw -- at first none, the
 * key's absence, never read -- and learns of a tombstone only when that
 * write loses; so a refusal made before any write, on no state, was
 * made without the record (a bulk batch's fenced delete followed by a
 * stale fenced upsert of the _id answered VALIDATION: conf_fence.c,
 * test_fence_tombstone_before_rules).  Such a refusal stands only once
 * cur was read: a tombstone's record is then taken over and the checks
 * run again; without one, the refusal is what SQLite gives (a live
 * document of the _id: the rules refuse before the duplicate _id). */
static int check_new(const rd_coll_t *co, const dtx__modify_t *m,
                     const rd_doc_t *cur, json_t *doc, int bypass) {
  int rc = 0;
  if (cur->fence)
    rc = dtx__fence_revive(m, co->name, cur->fence, doc);
  if (rc == 0)
    rc = dtx__doc_check_write(co->rules, co->name, NULL, doc, bypass);
  return rc;
}

int dtx__rd_check_new(dtx__backend_t *b, const rd_coll_t *co,
                      const dtx__modify_t *m, rd_doc_t *cur, json_t *doc,
                      int bypass, int *seen) {
  int rc = check_new(co, m, cur, doc, bypass);
  if (rc == 0 || *seen)
    return rc;
  *seen = 1;
  char keep[512];
  snprintf(keep, sizeof keep, "%s", dtx_errdetail());
  int rr = dtx__rd_doc_round(b, co, cur, 0);
  if (rr < 0)
    return rr;
  if (cur->fence && !cur->body)
    return check_new(co, m, cur, doc, bypass);
  return dtx__err(rc, "%s", keep);
}

/* Inserts one document (with an _id) into co.  DTX_EDUPKEY when the _id
 * exists.  The document is checked against the rules of the descriptor
 * each attempt writes with: a stale one fails its stamp (RD_ESTALE), and
 * the next attempt checks against the fresh rules.  Over a tombstone it
 * writes on that tombstone's version, after folding in the fence record
 * a deleted document left (fence.c; doc is the store's private copy). */
static int insert_one(dtx__backend_t *b, rd_coll_t **cop, json_t *doc,
                      int bypass) {
  rd_doc_t cur = {0};
  int seen = 0;
  int rc = dtx__rd_doc_set_id(*cop, &cur, json_object_get(doc, "_id"));
  for (int attempt = 0; rc == 0 && attempt < RD_WRITE_ATTEMPTS; attempt++) {
    rc = dtx__rd_check_new(b, *cop, NULL, &cur, doc, bypass, &seen);
    if (rc == 0)
      rc = dtx__rd_write(b, *cop, &cur, doc, NULL, NULL);
    if (rc == RD_ELOST && cur.body) {
      rc = dtx__err_dupid(json_object_get(doc, "_id"));
      break;
    }
    if (rc == RD_ELOST) {
      rc = 0; /* a tombstone: insert over its version */
      seen = 1;
      continue;
    }
    if (rc == RD_ESTALE) {
      rd_coll_t *fresh;
      if ((rc = dtx__rd_coll_get(b, (*cop)->name, 1, 1, &fresh)) < 0)
        break;
      dtx__rd_coll_put(*cop);
      *cop = fresh;
      json_t *id = json_incref(json_object_get(doc, "_id"));
      dtx__rd_doc_clear(&cur);
      seen = 0; /* judged on the fresh rules, on no state again */
      rc = dtx__rd_doc_set_id(*cop, &cur, id);
      json_decref(id);
      continue;
    }
    break;
  }
  if (rc == 0 && !cur.body)
    rc = dtx__err(DTX_EBUSY, "redis: insert kept conflicting");
  dtx__rd_doc_clear(&cur);
  return rc;
}

int dtx__rd_insert(dtx__backend_t *b, const char *coll, json_t *const *docs,
                   size_t n, int bypass, size_t *ninserted) {
  if (ninserted)
    *ninserted = 0;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, coll, 1, 0, &co);
  if (rc < 0)
    return rc;
  for (size_t i = 0; i < n; i++) {
    if ((rc = insert_one(b, &co, docs[i], bypass)) < 0) {
      if (n > 1)
        dtx__err_wrap(rc, "document %zu", i);
      break;
    }
    if (ninserted)
      (*ninserted)++;
  }
  dtx__rd_coll_put(co);
  return rc;
}
