/* docs.c -- the document operations of the Redis backend: the
 * compare-and-set write with its index entries and unique claims, insert,
 * find, count, modify_one and modify_many.
 *
 * Every change goes through dtx__rd_write, which sends one WRITE script
 * (scripts.c) to the document's node: the expected version, the new body
 * and version, the bucket's index entries to remove and add, and the
 * unique claims to record and release.  Filters and updates are evaluated
 * here in C before it is sent; the script only refuses when the document
 * moved since (then its reply is the current state, and the caller
 * evaluates again) or when the catalog did (RD_ESTALE: reload, redo).
 *
 * Unique claims (redis.c has the argument):
 *
 *   take(t):  CLAIM(key, '' -> mine) ---------------------------> taken
 *                |  held by X                                      ^
 *                v                                                 |
 *             FENCE(owner of X): owner records X? --yes--> DUPKEY  |
 *                |  no: owner's version bumped (or tombstoned)     |  (X is
 *                v                                                 |  mine:
 *             CLAIM(key, X -> mine) --------------------------------+  keep)
 *                |  changed meanwhile: start over
 *   write:    WRITE records u<key> = value for every claim taken, and
 *             returns the recorded values of the claims it drops
 *   release:  UNCLAIM(key, recorded value) after the write succeeded; a
 *             failed write releases the claims it took fresh.
 * A crash between the steps leaves orphan claims (nobody records them),
 * which the next taker fences and takes over. */
#include "store/redis/redis_int.h"

#include "util/deadline.h"
#include "util/err.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOMBSTONE_TTL_MS (24LL * 3600 * 1000)
#define MAX_ATTEMPTS 200

/* ---- contention ----------------------------------------------------------------------- */

/* A compare-and-set that keeps losing is retried for up to the URI's
 * retry budget, with a randomised pause that grows with the losses, so
 * that writers of one hot document take turns instead of starving. */
static int keep_trying(const dtx__backend_t *b, int64_t t0, int losses) {
  if (losses < 3)
    return 1;
  if (dtx__deadline_expired(t0, b->uri.retry_ms + 1)) /* or the command's */
    return 0;
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
  return 1;
}

/* ---- documents --------------------------------------------------------------------- */

void dtx__rd_doc_clear(rd_doc_t *d) {
  dtx__rd_buf_free(&d->id);
  json_decref(d->body);
  memset(d, 0, sizeof *d);
}

static int reply_str(const redisReply *r) {
  return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_NIL);
}

int dtx__rd_doc_fill(rd_doc_t *d, const redisReply *v, const redisReply *s,
                     const redisReply *body) {
  if (!reply_str(v) || !reply_str(s) || !reply_str(body) ||
      (v->type == REDIS_REPLY_STRING && v->len > RD_VERMAX))
    return dtx__err(DTX_EBACKEND, "redis: malformed document record");
  json_decref(d->body);
  d->body = NULL;
  d->cached = 0;
  size_t vl = v->type == REDIS_REPLY_STRING ? v->len : 0;
  memcpy(d->ver, vl ? v->str : "", vl);
  d->ver[vl] = '\0';
  size_t sl = s->type == REDIS_REPLY_STRING && s->len <= RD_SEQLEN ? s->len : 0;
  memcpy(d->seq, sl ? s->str : "", sl);
  d->seq[sl] = '\0';
  if (body->type == REDIS_REPLY_STRING && body->len > 0) {
    json_t *j;
    if (dtx__json_parse(body->str, &j) < 0 || !json_is_object(j)) {
      json_decref(j);
      return dtx__err(DTX_EBACKEND, "redis: stored document is not a JSON "
                                    "object");
    }
    d->body = j;
  }
  return 0;
}

static void doc_key(const rd_coll_t *co, const rd_doc_t *d, rd_buf_t *key) {
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
  doc_key(co, d, &key);
  dtx__rd_argb(c, &key);
  key.n = 0;
  dtx__rd_key_stamp(&key, co, d->bucket);
  dtx__rd_argb(c, &key);
  dtx__rd_buf_free(&key);
}

int dtx__rd_read_reply(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *d,
                       const rd_cmd_t *c) {
  const redisReply *r = c->reply;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 4)
    return dtx__rd_bad_reply(r, "reading a document");
  if (r->element[0]->type != REDIS_REPLY_STRING ||
      (r->element[0]->len == 7 &&
       memcmp(r->element[0]->str, "dropped", 7) == 0))
    return RD_ESTALE;
  int rc = dtx__rd_doc_fill(d, r->element[1], r->element[2], r->element[3]);
  if (rc == 0 && d->body) {
    rd_buf_t key = {0};
    doc_key(co, d, &key);
    dtx__rd_cache_put(b, &key, d);
    dtx__rd_buf_free(&key);
  }
  return rc;
}

int dtx__rd_read_doc(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *d) {
  rd_cmd_t c;
  dtx__rd_read_cmd(co, d, &c);
  int rc = dtx__rd_run(b, &c, 1, "reading a document");
  if (rc == 0)
    rc = dtx__rd_read_reply(b, co, d, &c);
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

/* ---- index keys of a document ----------------------------------------------------------- */

/* The encoded, distinct index key tuples of doc for ix, sorted by their
 * encoding, with the tuple values kept for error messages.  doc NULL has
 * none.  Sorted, so that deduplicating them and diffing the old keys of a
 * document against its new ones cost O(n log n) for an n-element array,
 * not O(n^2). */
typedef struct enckeys {
  json_t *keys; /* dtx__index_keys result */
  rd_buf_t *enc; /* sorted by enc_cmp, distinct */
  size_t *which; /* tuple index in keys of each enc */
  size_t n;
} enckeys_t;

static void enckeys_free(enckeys_t *e) {
  for (size_t i = 0; i < e->n; i++)
    dtx__rd_buf_free(&e->enc[i]);
  free(e->enc);
  free(e->which);
  json_decref(e->keys);
  memset(e, 0, sizeof *e);
}

/* Bytewise, a shorter prefix first. */
static int enc_cmp(const rd_buf_t *a, const rd_buf_t *b) {
  int c = memcmp(a->p, b->p, a->n < b->n ? a->n : b->n);
  return c ? c : (a->n > b->n) - (a->n < b->n);
}

static int enckeys_has(const enckeys_t *e, const rd_buf_t *x) {
  size_t lo = 0, hi = e->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = enc_cmp(&e->enc[mid], x);
    if (c == 0)
      return 1;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

typedef struct encref {
  rd_buf_t enc;
  size_t which;
} encref_t;

/* Equal encodings keep the first tuple (the lowest which). */
static int encref_cmp(const void *pa, const void *pb) {
  const encref_t *a = pa, *b = pb;
  int c = enc_cmp(&a->enc, &b->enc);
  return c ? c : (a->which > b->which) - (a->which < b->which);
}

/* single: the index is not multikey yet, so a document with keys that
 * make it so (several, or an array or object value:
 * dtx__index_keys_multikey) is RD_EMULTI -- found before the keys are encoded, since the write is
 * then redone after the catalog changed. */
static int enckeys_of(const rd_idx_t *ix, const json_t *doc, int single,
                      enckeys_t *e) {
  memset(e, 0, sizeof *e);
  if (!doc)
    return 0;
  int rc = dtx__index_keys(ix->spec, doc, &e->keys);
  if (rc < 0)
    return dtx__err_wrap(rc, "index '%s'", ix->spec->name);
  size_t n = json_array_size(e->keys), i;
  if (single && dtx__index_keys_multikey(e->keys))
    return RD_EMULTI;
  encref_t *r = calloc(n ? n : 1, sizeof *r);
  e->enc = calloc(n ? n : 1, sizeof *e->enc);
  e->which = calloc(n ? n : 1, sizeof *e->which);
  int oom = !r || !e->enc || !e->which;
  for (i = 0; !oom && i < n; i++) {
    dtx__rd_tupleenc(&r[i].enc, json_array_get(e->keys, i));
    r[i].which = i;
    oom = r[i].enc.oom;
  }
  if (oom) {
    for (size_t k = 0; r && k < n; k++)
      dtx__rd_buf_free(&r[k].enc);
    free(r);
    enckeys_free(e);
    return dtx__err(DTX_ENOMEM, "computing index keys");
  }
  qsort(r, n, sizeof *r, encref_cmp);
  /* 1 and 1.0 are distinct tuples to dtx__index_keys but one key. */
  for (i = 0; i < n; i++) {
    if (e->n > 0 && enc_cmp(&e->enc[e->n - 1], &r[i].enc) == 0) {
      dtx__rd_buf_free(&r[i].enc);
      continue;
    }
    e->which[e->n] = r[i].which;
    e->enc[e->n++] = r[i].enc;
  }
  free(r);
  return 0;
}

/* ---- claims --------------------------------------------------------------------------- */

/* Takes the claim at key for document self (see the diagram above).  On
 * success *val holds the claim's value and *fresh is 1 when this call
 * set it (0 when self already held it). */
static int claim_take(dtx__backend_t *b, const rd_coll_t *co,
                      const rd_idx_t *ix, const json_t *tuple,
                      const rd_buf_t *key, const rd_doc_t *self, rd_buf_t *val,
                      int *fresh) {
  char tok[RD_VERMAX + 1];
  dtx__rd_token(b, tok);
  val->n = 0;
  dtx__rd_put(val, self->id.p, self->id.n);
  dtx__rd_putc(val, '\n');
  dtx__rd_puts(val, tok);
  rd_buf_t expect = {0}, field = {0}, okey = {0};
  dtx__rd_putc(&field, 'u');
  dtx__rd_put(&field, key->p, key->n);
  dtx__rd_put(&expect, "", 0);
  int rc = DTX_EBUSY;
  uint16_t slot = dtx__rd_slot(key->p, key->n);
  for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    rd_cmd_t c;
    dtx__rd_cmd_init(&c, slot, RD_S_CLAIM, 1);
    c.nkeys = 1;
    dtx__rd_argb(&c, key);
    dtx__rd_argb(&c, &expect);
    dtx__rd_argb(&c, val);
    if ((rc = dtx__rd_run(b, &c, 1, "taking a unique claim")) < 0) {
      dtx__rd_cmd_clear(&c);
      break;
    }
    const redisReply *r = c.reply;
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER) {
      rc = dtx__rd_bad_reply(r, "taking a unique claim");
      dtx__rd_cmd_clear(&c);
      break;
    }
    if (r->element[0]->integer == 1) {
      *fresh = 1;
      rc = 0;
      dtx__rd_cmd_clear(&c);
      break;
    }
    const redisReply *cur = r->elements > 1 ? r->element[1] : NULL;
    if (!cur || cur->type != REDIS_REPLY_STRING) {
      rc = dtx__rd_bad_reply(r, "taking a unique claim");
      dtx__rd_cmd_clear(&c);
      break;
    }
    if (cur->len == val->n && memcmp(cur->str, val->p, val->n) == 0) {
      *fresh = 1; /* our own resent claim */
      rc = 0;
      dtx__rd_cmd_clear(&c);
      break;
    }
    expect.n = 0;
    dtx__rd_put(&expect, cur->str, cur->len);
    dtx__rd_cmd_clear(&c);
    if (expect.n == 0)
      continue; /* released meanwhile: take it free */
    /* The owner is the id before the last newline. */
    size_t olen = expect.n;
    while (olen > 0 && expect.p[olen - 1] != '\n')
      olen--;
    if (olen == 0) {
      rc = dtx__err(DTX_EBACKEND, "redis: malformed unique claim");
      break;
    }
    olen--;
    int obucket = dtx__rd_bucket(co, expect.p, olen);
    okey.n = 0;
    dtx__rd_key_doc(&okey, co, obucket, expect.p, olen);
    char ftok[RD_VERMAX + 1];
    dtx__rd_token(b, ftok);
    rd_cmd_t f;
    dtx__rd_cmd_init(&f, co->slots[obucket], RD_S_FENCE, 1);
    f.nkeys = 1;
    dtx__rd_argb(&f, &okey);
    dtx__rd_argb(&f, &field);
    dtx__rd_argb(&f, &expect);
    dtx__rd_args(&f, ftok);
    dtx__rd_argi(&f, TOMBSTONE_TTL_MS);
    if ((rc = dtx__rd_run(b, &f, 1, "checking a unique claim")) < 0) {
      dtx__rd_cmd_clear(&f);
      break;
    }
    long long held = f.reply->type == REDIS_REPLY_INTEGER
                         ? f.reply->integer == 0
                         : -1;
    if (held < 0)
      rc = dtx__rd_bad_reply(f.reply, "checking a unique claim");
    dtx__rd_cmd_clear(&f);
    if (held < 0)
      break;
    if (held) {
      if (olen == self->id.n && memcmp(expect.p, self->id.p, olen) == 0) {
        val->n = 0;
        dtx__rd_put(val, expect.p, expect.n);
        *fresh = 0;
        rc = 0;
      } else {
        rc = dtx__err_dupkey(ix->spec->name,
                             (const char *const *)ix->spec->paths, tuple,
                             ix->spec->nfields);
      }
      break;
    }
    dtx__rd_cache_drop(b, &okey); /* its version moved */
    if (attempt > 3)
      dtx__rd_sleep_ms(1 + attempt % 8);
    /* Fenced: take it over if it still holds that value. */
    rc = DTX_EBUSY;
  }
  if (rc == DTX_EBUSY)
    rc = dtx__err(DTX_EBUSY, "redis: unique claim on index '%s' kept changing",
                  ix->spec->name);
  dtx__rd_buf_free(&expect);
  dtx__rd_buf_free(&field);
  dtx__rd_buf_free(&okey);
  return rc;
}

/* ---- the compare-and-set write --------------------------------------------------------------- */

/* Adds "nrem entries... nadd entries..." of one index to c. */
static void put_entries(rd_cmd_t *c, const enckeys_t *e, const size_t *pick,
                        size_t npick, const char *seq, const rd_buf_t *id) {
  dtx__rd_argi(c, (long long)npick);
  rd_buf_t m = {0};
  for (size_t i = 0; i < npick; i++) {
    m.n = 0;
    const rd_buf_t *t = &e->enc[pick[i]];
    dtx__rd_put(&m, t->p, t->n);
    dtx__rd_put(&m, seq, RD_SEQLEN);
    dtx__rd_put(&m, id->p, id->n);
    unsigned char len[4] = {(unsigned char)(id->n >> 24),
                            (unsigned char)(id->n >> 16),
                            (unsigned char)(id->n >> 8),
                            (unsigned char)id->n};
    dtx__rd_put(&m, len, 4);
    dtx__rd_argb(c, &m);
  }
  dtx__rd_buf_free(&m);
}

typedef struct wstate {
  size_t nix;
  enckeys_t *old, *new_;
  size_t **rem, **add; /* per index: picked positions */
  size_t *nrem, *nadd;
  rd_claims_t taken;   /* fresh claims of this write */
  rd_claims_t rec;     /* claims to record (key, value) */
  rd_claims_t rel;     /* claim keys to release (value filled from reply) */
  int64_t multi;       /* RD_EMULTI: the index to mark multikey */
} wstate_t;

static void wstate_free(wstate_t *w) {
  for (size_t i = 0; i < w->nix; i++) {
    if (w->old)
      enckeys_free(&w->old[i]);
    if (w->new_)
      enckeys_free(&w->new_[i]);
    if (w->rem)
      free(w->rem[i]);
    if (w->add)
      free(w->add[i]);
  }
  free(w->old);
  free(w->new_);
  free(w->rem);
  free(w->add);
  free(w->nrem);
  free(w->nadd);
  dtx__rd_claims_free(&w->taken);
  dtx__rd_claims_free(&w->rec);
  dtx__rd_claims_free(&w->rel);
}

/* Computes index diffs and takes the unique claims the new body needs. */
static int prepare(dtx__backend_t *b, const rd_coll_t *co, const rd_doc_t *cur,
                   const json_t *newbody, wstate_t *w) {
  size_t n = co->nidx;
  w->nix = n;
  w->old = calloc(n + 1, sizeof *w->old);
  w->new_ = calloc(n + 1, sizeof *w->new_);
  w->rem = calloc(n + 1, sizeof *w->rem);
  w->add = calloc(n + 1, sizeof *w->add);
  w->nrem = calloc(n + 1, sizeof *w->nrem);
  w->nadd = calloc(n + 1, sizeof *w->nadd);
  if (!w->old || !w->new_ || !w->rem || !w->add || !w->nrem || !w->nadd)
    return dtx__err(DTX_ENOMEM, "writing a document");
  rd_buf_t ckey = {0};
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const rd_idx_t *ix = &co->idx[i];
    /* A stored document that a building index cannot hold (parallel
     * arrays) simply has no old keys there. */
    if (enckeys_of(ix, cur->body, 0, &w->old[i]) < 0)
      memset(&w->old[i], 0, sizeof w->old[i]);
    if ((rc = enckeys_of(ix, newbody, !ix->multikey, &w->new_[i])) < 0) {
      if (rc == RD_EMULTI)
        w->multi = ix->id;
      break;
    }
    const enckeys_t *o = &w->old[i], *nw = &w->new_[i];
    w->rem[i] = calloc(o->n + 1, sizeof **w->rem);
    w->add[i] = calloc(nw->n + 1, sizeof **w->add);
    if (!w->rem[i] || !w->add[i]) {
      rc = dtx__err(DTX_ENOMEM, "writing a document");
      break;
    }
    for (size_t k = 0; k < o->n; k++)
      if (!enckeys_has(nw, &o->enc[k]))
        w->rem[i][w->nrem[i]++] = k;
    for (size_t k = 0; k < nw->n; k++)
      if (!ix->ready || !enckeys_has(o, &nw->enc[k]))
        w->add[i][w->nadd[i]++] = k;
    if (!ix->spec->unique)
      continue;
    for (size_t k = 0; k < w->nrem[i]; k++) {
      const rd_buf_t *t = &o->enc[w->rem[i][k]];
      ckey.n = 0;
      dtx__rd_putc(&ckey, 'u');
      dtx__rd_key_claim(&ckey, co, ix->id, t->p, t->n);
      dtx__rd_claims_add(&w->rel, ckey.p + 1, ckey.n - 1, "", 0);
    }
    for (size_t k = 0; rc == 0 && k < w->nadd[i]; k++) {
      const rd_buf_t *t = &nw->enc[w->add[i][k]];
      const json_t *tuple = json_array_get(nw->keys, nw->which[w->add[i][k]]);
      ckey.n = 0;
      dtx__rd_key_claim(&ckey, co, ix->id, t->p, t->n);
      rd_buf_t val = {0};
      int fresh = 0;
      rc = claim_take(b, co, ix, tuple, &ckey, cur, &val, &fresh);
      if (rc == 0) {
        if (fresh)
          dtx__rd_claims_add(&w->taken, ckey.p, ckey.n, val.p, val.n);
        dtx__rd_claims_add(&w->rec, ckey.p, ckey.n, val.p, val.n);
      }
      dtx__rd_buf_free(&val);
    }
  }
  if (rc == 0 && (ckey.oom || w->taken.oom || w->rec.oom || w->rel.oom))
    rc = dtx__err(DTX_ENOMEM, "writing a document");
  dtx__rd_buf_free(&ckey);
  return rc;
}

/* A write in flight: built by dtx__rd_write_begin, its reply read by
 * dtx__rd_write_end.  Split so that a bulk write sends the WRITE scripts
 * of many documents in one pipeline. */
struct rd_wprep {
  wstate_t w;
  rd_cmd_t c;
  rd_buf_t key;
  char seq[RD_SEQLEN + 1], ver[RD_VERMAX + 1];
  json_t *newbody; /* borrowed */
};

int dtx__rd_write_begin(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                        json_t *newbody, rd_wprep_t **out) {
  *out = NULL;
  char op = !cur->body ? 'i' : !newbody ? 'd' : 'u';
  if (op == 'i' && !newbody)
    return 0; /* deleting nothing */
  rd_wprep_t *p = calloc(1, sizeof *p);
  if (!p)
    return dtx__err(DTX_ENOMEM, "writing a document");
  wstate_t *w = &p->w;
  char *seq = p->seq, *ver = p->ver;
  p->newbody = newbody;
  if (op == 'i')
    dtx__rd_newseq(b, seq);
  else
    memcpy(seq, cur->seq, sizeof p->seq);
  if (strlen(seq) != RD_SEQLEN) {
    free(p);
    return dtx__err(DTX_EBACKEND, "redis: document without a sequence");
  }
  dtx__rd_token(b, ver);
  char *text = NULL;
  if (newbody && !(text = dtx__json_dump(newbody))) {
    free(p);
    return dtx__err(DTX_ENOMEM, "writing a document");
  }
  int rc = prepare(b, co, cur, newbody, w);
  /* A protocol step of its own: the claims are held but no document
   * records them yet, so a crash here leaves orphans and a pause lets a
   * rival fence this write.  Only writes that record claims reach it.  An
   * injected error fails like any failed write: fresh claims go back. */
  if (rc == 0 && w->rec.n > 0)
    rc = DTX_FAULTPOINT("redis.unique_claimed");
  if (rc < 0) {
    dtx__rd_claims_release(b, &w->taken);
    if (rc == RD_EMULTI && (rc = dtx__rd_mark_multikey(b, co, w->multi)) == 0)
      rc = RD_ESTALE; /* write again with the new catalog */
    wstate_free(w);
    free(text);
    free(p);
    return rc;
  }
  rd_buf_t tmp = {0};
  rd_cmd_t *c = &p->c;
  dtx__rd_cmd_init(c, co->slots[cur->bucket], RD_S_WRITE, 1);
  doc_key(co, cur, &p->key);
  dtx__rd_argb(c, &p->key);
  dtx__rd_key_members(&tmp, co, cur->bucket);
  dtx__rd_argb(c, &tmp);
  tmp.n = 0;
  dtx__rd_key_stamp(&tmp, co, cur->bucket);
  dtx__rd_argb(c, &tmp);
  for (size_t i = 0; i < co->nidx; i++) {
    tmp.n = 0;
    dtx__rd_key_index(&tmp, co, cur->bucket, co->idx[i].id);
    dtx__rd_argb(c, &tmp);
  }
  c->nkeys = (int)c->argc;
  dtx__rd_args(c, cur->ver);
  dtx__rd_args(c, ver);
  dtx__rd_argi(c, co->ver);
  dtx__rd_arg(c, &op, 1);
  dtx__rd_args(c, text ? text : "");
  tmp.n = 0;
  dtx__rd_put(&tmp, seq, RD_SEQLEN);
  dtx__rd_put(&tmp, cur->id.p, cur->id.n);
  dtx__rd_argb(c, &tmp);
  dtx__rd_args(c, seq);
  dtx__rd_argi(c, (long long)w->rel.n);
  for (size_t i = 0; i < w->rel.n; i++) {
    tmp.n = 0;
    dtx__rd_putc(&tmp, 'u');
    dtx__rd_put(&tmp, w->rel.keys[i].p, w->rel.keys[i].n);
    dtx__rd_argb(c, &tmp);
  }
  dtx__rd_argi(c, (long long)w->rec.n);
  for (size_t i = 0; i < w->rec.n; i++) {
    tmp.n = 0;
    dtx__rd_putc(&tmp, 'u');
    dtx__rd_put(&tmp, w->rec.keys[i].p, w->rec.keys[i].n);
    dtx__rd_argb(c, &tmp);
    dtx__rd_argb(c, &w->rec.vals[i]);
  }
  for (size_t i = 0; i < co->nidx; i++) {
    put_entries(c, &w->old[i], w->rem[i], w->nrem[i], seq, &cur->id);
    put_entries(c, &w->new_[i], w->add[i], w->nadd[i], seq, &cur->id);
  }
  dtx__rd_buf_free(&tmp);
  free(text);
  *out = p;
  return 0;
}

rd_cmd_t *dtx__rd_write_cmd(rd_wprep_t *p) { return &p->c; }

int dtx__rd_write_end(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                      rd_wprep_t *p, int rc, rd_claims_t *claims) {
  wstate_t *w = &p->w;
  rd_cmd_t *c = &p->c;
  const char *seq = p->seq, *ver = p->ver;
  json_t *newbody = p->newbody;
  /* A stamp below the catalog's version means a catalog change whose
   * author died before raising every stamp: finish that for it. */
  for (int heal = 0; rc == 0 && heal < 3; heal++) {
    const redisReply *r = c->reply;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER ||
        r->element[0]->integer != -1 ||
        r->element[1]->type != REDIS_REPLY_STRING ||
        strcmp(r->element[1]->str, "dropped") == 0 ||
        strtoll(r->element[1]->str, NULL, 10) >= co->ver)
      break;
    if ((rc = dtx__rd_raise_stamps(b, co)) < 0)
      break;
    freeReplyObject(c->reply);
    c->reply = NULL;
    rc = dtx__rd_run(b, c, 1, "writing a document");
  }
  int applied = 0;
  if (rc == 0) {
    const redisReply *r = c->reply;
    long long tag = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                            r->element[0]->type == REDIS_REPLY_INTEGER
                        ? r->element[0]->integer
                        : -2;
    if (tag == 1) {
      applied = 1;
      for (size_t i = 0; i < w->rel.n && i + 1 < r->elements; i++) {
        const redisReply *v = r->element[i + 1];
        if (v->type == REDIS_REPLY_STRING) {
          w->rel.vals[i].n = 0;
          dtx__rd_put(&w->rel.vals[i], v->str, v->len);
        }
      }
    } else if (tag == 0 && r->elements == 4) {
      const redisReply *v = r->element[1];
      if (v->type == REDIS_REPLY_STRING && strlen(ver) == v->len &&
          memcmp(v->str, ver, v->len) == 0) {
        applied = 1; /* a resend found its own earlier success */
        for (size_t i = 0; i < w->rel.n; i++)
          w->rel.vals[i].n = 0; /* unknown: they become orphans */
      } else {
        rc = dtx__rd_doc_fill(cur, r->element[1], r->element[2],
                              r->element[3]);
        if (rc == 0)
          rc = RD_ELOST;
      }
    } else if (tag == -1) {
      rc = RD_ESTALE;
    } else {
      rc = dtx__rd_bad_reply(r, "writing a document");
    }
  }
  if (applied) {
    /* The write is done and cannot be undone; releasing the dropped keys'
     * claims is the next step.  An injected error fails that step as a
     * lost connection would: the claims stay as orphans for the next
     * taker to fence, and the write still succeeded (as in
     * dtx__rd_claims_release, a failed release is no error of the write). */
    if (w->rel.n == 0 || DTX_FAULTPOINT("redis.unique_written") == 0)
      dtx__rd_claims_release(b, &w->rel);
    if (claims)
      for (size_t i = 0; i < w->taken.n; i++)
        dtx__rd_claims_add(claims, w->taken.keys[i].p, w->taken.keys[i].n,
                           w->taken.vals[i].p, w->taken.vals[i].n);
    memcpy(cur->ver, ver, sizeof cur->ver);
    memcpy(cur->seq, seq, sizeof cur->seq);
    json_decref(cur->body);
    cur->body = json_incref(newbody);
    cur->cached = 0;
    if (newbody)
      dtx__rd_cache_put(b, &p->key, cur);
    else
      dtx__rd_cache_drop(b, &p->key);
    /* Even when fewer replicas than ?wait= acknowledged it in time (see
     * conn.c), the write is done and cannot be undone, so the state above
     * is recorded either way.  A replica that is catching up was waited
     * for; but when its master has fewer replicas connected than ?wait=,
     * the caller must hear that the write is not durable as asked: an
     * UNAVAILABLE whose outcome is unknown, as after a lost reply. */
    rc = c->few ? dtx__rd_few_replicas_err(b, c) : 0;
  } else {
    if (rc == RD_ELOST && cur->body)
      dtx__rd_cache_put(b, &p->key, cur);
    else if (rc == RD_ELOST)
      dtx__rd_cache_drop(b, &p->key);
    dtx__rd_claims_release(b, &w->taken);
  }
  dtx__rd_cmd_clear(c);
  dtx__rd_buf_free(&p->key);
  wstate_free(w);
  free(p);
  return rc;
}

int dtx__rd_write(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                  json_t *newbody, rd_claims_t *claims) {
  rd_wprep_t *p;
  int rc = dtx__rd_write_begin(b, co, cur, newbody, &p);
  if (rc < 0 || !p)
    return rc;
  rc = dtx__rd_run(b, &p->c, 1, "writing a document");
  return dtx__rd_write_end(b, co, cur, p, rc, claims);
}

/* A version-only check of a state read from the cache: 0 when it is
 * current, RD_ELOST with cur refreshed when not, RD_ESTALE.  In two
 * halves, so a bulk write pipelines the checks of many documents. */
void dtx__rd_verify_cmd(const rd_coll_t *co, const rd_doc_t *cur,
                        rd_cmd_t *c) {
  rd_buf_t tmp = {0};
  dtx__rd_cmd_init(c, co->slots[cur->bucket], RD_S_WRITE, 0);
  c->nkeys = 3;
  doc_key(co, cur, &tmp);
  dtx__rd_argb(c, &tmp);
  tmp.n = 0;
  dtx__rd_key_members(&tmp, co, cur->bucket);
  dtx__rd_argb(c, &tmp);
  tmp.n = 0;
  dtx__rd_key_stamp(&tmp, co, cur->bucket);
  dtx__rd_argb(c, &tmp);
  dtx__rd_buf_free(&tmp);
  dtx__rd_args(c, cur->ver);
  dtx__rd_args(c, "");
  dtx__rd_argi(c, co->ver);
  dtx__rd_args(c, "c");
}

int dtx__rd_verify_reply(dtx__backend_t *b, const rd_coll_t *co,
                         rd_doc_t *cur, const rd_cmd_t *c) {
  const redisReply *r = c->reply;
  long long tag = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                          r->element[0]->type == REDIS_REPLY_INTEGER
                      ? r->element[0]->integer
                      : -2;
  if (tag == 1) {
    cur->cached = 0;
    return 0;
  }
  if (tag == -1)
    return RD_ESTALE;
  if (tag != 0 || r->elements != 4)
    return dtx__rd_bad_reply(r, "checking a document");
  int rc = dtx__rd_doc_fill(cur, r->element[1], r->element[2], r->element[3]);
  if (rc < 0)
    return rc;
  rd_buf_t key = {0};
  doc_key(co, cur, &key);
  if (cur->body)
    dtx__rd_cache_put(b, &key, cur);
  else
    dtx__rd_cache_drop(b, &key);
  dtx__rd_buf_free(&key);
  return RD_ELOST;
}

static int verify(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur) {
  rd_cmd_t c;
  dtx__rd_verify_cmd(co, cur, &c);
  int rc = dtx__rd_run(b, &c, 1, "checking a document");
  if (rc == 0)
    rc = dtx__rd_verify_reply(b, co, cur, &c);
  dtx__rd_cmd_clear(&c);
  return rc;
}

/* ---- insert ------------------------------------------------------------------------------- */

/* Inserts one document (with an _id) into co.  DTX_EDUPKEY when the _id
 * exists.  The document is checked against the rules of the descriptor
 * each attempt writes with: a stale one fails its stamp (RD_ESTALE), and
 * the next attempt checks against the fresh rules. */
static int insert_one(dtx__backend_t *b, rd_coll_t **cop, json_t *doc,
                      int bypass) {
  rd_doc_t cur = {0};
  int rc = dtx__rd_doc_set_id(*cop, &cur, json_object_get(doc, "_id"));
  for (int attempt = 0; rc == 0 && attempt < MAX_ATTEMPTS; attempt++) {
    rc = dtx__doc_check_write((*cop)->rules, (*cop)->name, NULL, doc, bypass);
    if (rc == 0)
      rc = dtx__rd_write(b, *cop, &cur, doc, NULL);
    if (rc == RD_ELOST && cur.body) {
      rc = dtx__err_dupid(json_object_get(doc, "_id"));
      break;
    }
    if (rc == RD_ELOST) {
      rc = 0; /* a fence tombstone: insert over its version */
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

/* ---- reads ------------------------------------------------------------------------------ */

static int doc_seq_cmp(const void *pa, const void *pb) {
  const rd_doc_t *a = pa, *b = pb;
  int c = strcmp(a->seq, b->seq);
  if (c)
    return c;
  size_t n = a->id.n < b->id.n ? a->id.n : b->id.n;
  c = memcmp(a->id.p, b->id.p, n);
  return c ? c : (a->id.n > b->id.n) - (a->id.n < b->id.n);
}

/* The fresh documents that match f, in natural order.  *co may be
 * replaced by a fresher descriptor. */
static int matches(dtx__backend_t *b, rd_coll_t **cop, const json_t *fspec,
                   const dtx__filter_t *f, rd_doc_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  for (int attempt = 0; attempt < 20; attempt++) {
    rd_plan_t p;
    int rc = dtx__rd_plan(*cop, fspec, &p);
    if (rc < 0)
      return rc;
    rd_doc_t *d;
    size_t nd;
    rc = dtx__rd_candidates(b, *cop, &p, &d, &nd);
    dtx__rd_plan_free(&p);
    if (rc == RD_ESTALE) {
      rd_coll_t *fresh;
      if ((rc = dtx__rd_coll_get(b, (*cop)->name, 0, 1, &fresh)) < 0)
        return rc;
      dtx__rd_coll_put(*cop);
      *cop = fresh;
      if (!fresh)
        return 0;
      continue;
    }
    if (rc < 0)
      return rc;
    size_t w = 0;
    for (size_t i = 0; i < nd; i++) {
      dtx__docs_examined++;
      if (dtx__filter_match(f, d[i].body)) {
        if (w != i) {
          d[w] = d[i];
          memset(&d[i], 0, sizeof d[i]);
        }
        w++;
      } else {
        dtx__rd_doc_clear(&d[i]);
      }
    }
    if (w > 1)
      qsort(d, w, sizeof *d, doc_seq_cmp);
    *out = d;
    *n = w;
    return 0;
  }
  return dtx__err(DTX_EBUSY, "redis: the catalog kept changing during a read");
}

/* The first `want` matches in sort order, for a find with a sort and a
 * small page: read from an index walked in sort order, a few entries per
 * bucket (dtx__rd_first_matches), instead of every match -- a job
 * worker's claim round reads its batch, not the queue's backlog.  Each
 * document read goes into the doc cache, since the caller usually writes
 * it next (a claim by _id then needs no read of its own).  0 when no
 * such walk serves the query (the caller reads every match), 1 with *out
 * and *n in natural order, <0 on error (RD_ESTALE included). */
static int first_sorted(dtx__backend_t *b, const rd_coll_t *co,
                        const json_t *fspec, const dtx__filter_t *f,
                        const json_t *sort, size_t want, rd_doc_t **out,
                        size_t *n) {
  rd_plan_t p;
  int rc = dtx__rd_plan_sorted(co, fspec, sort, &p);
  if (rc == 1)
    rc = dtx__rd_first_matches(b, co, &p, f, sort, want, out, n);
  dtx__rd_plan_free(&p);
  if (rc != 1)
    return rc;
  rd_buf_t key = {0};
  for (size_t i = 0; i < *n; i++) {
    key.n = 0;
    dtx__rd_key_doc(&key, co, (*out)[i].bucket, (*out)[i].id.p,
                    (*out)[i].id.n);
    dtx__rd_cache_put(b, &key, &(*out)[i]);
  }
  dtx__rd_buf_free(&key);
  if (*n > 1)
    qsort(*out, *n, sizeof **out, doc_seq_cmp);
  return 1;
}

/* Pages up to this many documents are served by first_sorted. */
#define FIRST_SORTED_MAX 1000

int dtx__rd_find(dtx__backend_t *b, const char *coll, const json_t *fspec,
                 const dtx__filter_t *f, const json_t *sort, int64_t skip,
                 int64_t limit, json_t **out) {
  *out = NULL;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, coll, 0, 0, &co);
  if (rc < 0)
    return rc;
  json_t *arr = json_array();
  if (!arr) {
    dtx__rd_coll_put(co);
    return dtx__err(DTX_ENOMEM, "finding documents");
  }
  rd_doc_t *d = NULL;
  size_t n = 0;
  if (co && sort && limit > 0 && skip >= 0 &&
      skip + limit <= FIRST_SORTED_MAX)
    rc = first_sorted(b, co, fspec, f, sort, (size_t)(skip + limit), &d, &n);
  if (rc == 1)
    rc = 0; /* served: sorted and paged below, as the full read is */
  else if (co && (rc == 0 || rc == RD_ESTALE)) /* matches reloads a stale co */
    rc = matches(b, &co, fspec, f, &d, &n);
  dtx__rd_coll_put(co);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (json_array_append(arr, d[i].body) < 0)
      rc = dtx__err(DTX_ENOMEM, "finding documents");
  dtx__rd_docs_free(d, n);
  if (rc == 0 && sort)
    rc = dtx__sort_array(arr, sort);
  if (rc == 0 && (skip > 0 || limit > 0)) {
    size_t total = json_array_size(arr);
    size_t from = skip > 0 && (uint64_t)skip < total ? (size_t)skip
                  : skip > 0                         ? total
                                                     : 0;
    size_t to = limit > 0 && (uint64_t)limit < total - from
                    ? from + (size_t)limit
                    : total;
    json_t *page = json_array();
    for (size_t i = from; page && i < to; i++)
      json_array_append(page, json_array_get(arr, i));
    json_decref(arr);
    arr = page;
    if (!arr)
      rc = dtx__err(DTX_ENOMEM, "finding documents");
  }
  if (rc < 0) {
    json_decref(arr);
    return rc;
  }
  *out = arr;
  return 0;
}

static int count_all(dtx__backend_t *b, rd_coll_t *co, int64_t *out) {
  size_t nb = (size_t)co->nb;
  rd_cmd_t *cmds = calloc(nb, sizeof *cmds);
  if (!cmds)
    return dtx__err(DTX_ENOMEM, "counting documents");
  rd_buf_t key = {0};
  for (int k = 0; k < co->nb; k++) {
    dtx__rd_cmd_init(&cmds[k], co->slots[k], RD_S_COUNT, 0);
    cmds[k].nkeys = 2;
    key.n = 0;
    dtx__rd_key_members(&key, co, k);
    dtx__rd_argb(&cmds[k], &key);
    key.n = 0;
    dtx__rd_key_stamp(&key, co, k);
    dtx__rd_argb(&cmds[k], &key);
  }
  dtx__rd_buf_free(&key);
  int rc = dtx__rd_run_together(b, cmds, nb, "counting documents");
  int64_t total = 0;
  for (size_t k = 0; rc == 0 && k < nb; k++) {
    const redisReply *r = cmds[k].reply;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING ||
        r->element[1]->type != REDIS_REPLY_INTEGER) {
      rc = dtx__rd_bad_reply(r, "counting documents");
      break;
    }
    if (strcmp(r->element[0]->str, "dropped") == 0) {
      rc = RD_ESTALE;
      break;
    }
    total += r->element[1]->integer;
  }
  dtx__rd_cmds_free(cmds, nb);
  *out = total;
  return rc;
}

int dtx__rd_count(dtx__backend_t *b, const char *coll, const json_t *fspec,
                  const dtx__filter_t *f, int64_t *out) {
  *out = 0;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, coll, 0, 0, &co);
  if (rc < 0 || !co)
    return rc;
  if (!fspec || json_object_size(fspec) == 0) {
    for (int attempt = 0; co && attempt < 20; attempt++) {
      rc = count_all(b, co, out);
      if (rc != RD_ESTALE)
        break;
      rd_coll_t *fresh;
      if ((rc = dtx__rd_coll_get(b, coll, 0, 1, &fresh)) < 0)
        break;
      dtx__rd_coll_put(co);
      co = fresh;
      *out = 0;
    }
    dtx__rd_coll_put(co);
    if (rc == RD_ESTALE)
      rc = dtx__err(DTX_EBUSY, "redis: the catalog kept changing");
    return rc;
  }
  rd_doc_t *d = NULL;
  size_t n = 0;
  rc = matches(b, &co, fspec, f, &d, &n);
  dtx__rd_coll_put(co);
  dtx__rd_docs_free(d, n);
  if (rc == 0)
    *out = (int64_t)n;
  return rc;
}

/* ---- modify ------------------------------------------------------------------------------ */

enum { M_DONE, M_NOMATCH };

/* Applies m to the document cur (as last seen) until a compare-and-set
 * succeeds or the document no longer matches.  *outcome says which. */
static int modify_doc(dtx__backend_t *b, const rd_coll_t *co,
                      const dtx__modify_t *m, rd_doc_t *cur, int64_t now,
                      dtx__modify_result_t *res, int *outcome) {
  *outcome = M_NOMATCH;
  int64_t t0 = dtx__rd_mono_ms();
  for (int attempt = 0; keep_trying(b, t0, attempt); attempt++) {
    if (!cur->body) {
      if (cur->cached) {
        int rc = verify(b, co, cur);
        if (rc == RD_ELOST)
          continue;
        if (rc < 0)
          return rc;
      }
      return 0;
    }
    dtx__docs_examined++;
    int rc;
    if (!dtx__filter_match(m->filter, cur->body)) {
      if (cur->cached) {
        rc = verify(b, co, cur);
        if (rc == RD_ELOST)
          continue;
        if (rc < 0)
          return rc;
      }
      return 0;
    }
    json_t *nd = NULL;
    int changed = 1;
    /* The update and the fence (fence.c), decided on this version of
     * the document: the write below is refused if it moved since. */
    rc = dtx__modify_apply(m, cur->body, now, &nd, &changed);
    /* The new document (or the delete) against the rules of co, the
     * descriptor whose stamp the write will carry. */
    if (rc == 0 && changed)
      rc = dtx__doc_check_write(co->rules, co->name, cur->body, nd,
                                m->bypass);
    if (rc < 0 || !changed) {
      /* An error or a no-op decided on a cached state must hold for the
       * current one too. */
      char keep[512];
      snprintf(keep, sizeof keep, "%s", dtx_errdetail());
      if (cur->cached) {
        int vr = verify(b, co, cur);
        if (vr == RD_ELOST) {
          json_decref(nd);
          continue;
        }
        if (vr < 0) {
          json_decref(nd);
          return vr;
        }
      }
      if (rc < 0) {
        json_decref(nd);
        return dtx__err(rc, "%s", keep);
      }
      res->matched = 1;
      res->modified = 0;
      res->before = json_incref(cur->body);
      res->after = nd;
      *outcome = M_DONE;
      return 0;
    }
    json_t *before = json_incref(cur->body);
    rc = dtx__rd_write(b, co, cur, nd, NULL);
    if (rc == RD_ELOST) {
      json_decref(before);
      json_decref(nd);
      continue;
    }
    if (rc < 0) {
      json_decref(before);
      json_decref(nd);
      return rc;
    }
    res->matched = 1;
    res->modified = 1;
    res->before = before;
    res->after = nd;
    *outcome = M_DONE;
    return 0;
  }
  return dtx__err(DTX_EBUSY, "redis: document in '%s' kept changing", m->coll);
}

const json_t *dtx__rd_plan_single_id(const rd_plan_t *p) {
  if (p->kind != RD_PLAN_IDS || json_array_size(p->ids) != 1)
    return NULL;
  const json_t *v = json_array_get(p->ids, 0);
  return json_is_integer(v) || json_is_string(v) ? v : NULL;
}

static int pick_by(const dtx__modify_t *m, const rd_doc_t *a,
                   const rd_doc_t *b) {
  if (m->sort) {
    int c = dtx__sort_cmp(m->sort, a->body, b->body);
    if (c)
      return c < 0;
  }
  return doc_seq_cmp(a, b) < 0;
}

/* Chooses the document m applies to: *have is 0 when none matches.
 * *by_id is 1 when the filter names one _id: then that document is the
 * only candidate, and its not matching is final. */
static int select_doc(dtx__backend_t *b, rd_coll_t **cop,
                      const dtx__modify_t *m, int spread, rd_doc_t *out,
                      int *have, int *by_id) {
  *have = 0;
  *by_id = 0;
  rd_plan_t p;
  int rc = dtx__rd_plan(*cop, m->filter_spec, &p);
  if (rc < 0)
    return rc;
  const json_t *id = dtx__rd_plan_single_id(&p);
  if (id) {
    *by_id = 1;
    rd_buf_t key = {0};
    rc = dtx__rd_doc_set_id(*cop, out, id);
    if (rc == 0) {
      doc_key(*cop, out, &key);
      if (!dtx__rd_cache_get(b, &key, out))
        rc = dtx__rd_read_doc(b, *cop, out);
    }
    dtx__rd_buf_free(&key);
    dtx__rd_plan_free(&p);
    if (rc == RD_ESTALE)
      return rc;
    *have = rc == 0 && out->body != NULL;
    return rc;
  }
  rd_doc_t *d = NULL;
  size_t n = 0;
  /* Only the first match in natural (or sort) order is wanted: each
   * bucket's first will do, when the plan keeps a bucket in that order --
   * for a sort, an index walked in sort order (dtx__rd_plan_sorted). */
  if (m->sort) {
    dtx__rd_plan_free(&p);
    rc = dtx__rd_plan_sorted(*cop, m->filter_spec, m->sort, &p);
    if (rc == 1)
      rc = dtx__rd_first_matches(b, *cop, &p, m->filter, m->sort, 1, &d, &n);
  } else {
    rc = dtx__rd_first_matches(b, *cop, &p, m->filter, NULL, 1, &d, &n);
  }
  dtx__rd_plan_free(&p);
  if (rc < 0)
    return rc;
  if (rc == 0 && (rc = matches(b, cop, m->filter_spec, m->filter, &d, &n)) < 0)
    return rc;
  if (!*cop || n == 0) {
    dtx__rd_docs_free(d, n);
    return 0;
  }
  size_t best = 0;
  if (spread && !m->sort) {
    /* Lost a race for the first match: others want it too, so try any. */
    best = (size_t)(dtx__rd_hash64(&d, sizeof d) ^
                    (uint64_t)dtx__rd_mono_ms() * 2654435761ULL) %
           n;
  } else {
    for (size_t i = 1; i < n; i++)
      if (pick_by(m, &d[i], &d[best]))
        best = i;
  }
  *out = d[best];
  memset(&d[best], 0, sizeof d[best]);
  dtx__rd_docs_free(d, n);
  *have = 1;
  return 0;
}

/* Builds and inserts an upserted document.  RD_ELOST when its _id
 * appeared meanwhile (select again). */
static int upsert(dtx__backend_t *b, rd_coll_t **cop, const dtx__modify_t *m,
                  int64_t now, dtx__modify_result_t *res) {
  json_t *doc;
  int rc = dtx__modify_upsert_doc(m, now, &doc);
  if (rc == 0)
    rc = dtx__doc_check_write((*cop)->rules, (*cop)->name, NULL, doc,
                              m->bypass);
  if (rc < 0) {
    json_decref(doc);
    return rc;
  }
  rd_doc_t cur = {0};
  rc = dtx__rd_doc_set_id(*cop, &cur, json_object_get(doc, "_id"));
  for (int attempt = 0; rc == 0 && attempt < MAX_ATTEMPTS; attempt++) {
    rc = dtx__rd_write(b, *cop, &cur, doc, NULL);
    if (rc == RD_ELOST && !cur.body) {
      rc = 0;
      continue; /* a tombstone */
    }
    if (rc == RD_ELOST && !dtx__filter_match(m->filter, cur.body)) {
      /* The _id exists and does not match: as an insert would, refuse. */
      rc = dtx__err_dupid(json_object_get(doc, "_id"));
    }
    break;
  }
  if (rc == 0) {
    res->after = doc;
    res->upserted_id = json_incref(json_object_get(doc, "_id"));
  } else {
    json_decref(doc);
  }
  dtx__rd_doc_clear(&cur);
  return rc;
}

static int reload(dtx__backend_t *b, rd_coll_t **cop, const char *name,
                  int create) {
  rd_coll_t *fresh;
  int rc = dtx__rd_coll_get(b, name, create, 1, &fresh);
  if (rc < 0)
    return rc;
  dtx__rd_coll_put(*cop);
  *cop = fresh;
  return 0;
}

int dtx__rd_modify_one(dtx__backend_t *b, const dtx__modify_t *m,
                       dtx__modify_result_t *res) {
  memset(res, 0, sizeof *res);
  int create = m->upsert && m->update;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, m->coll, create, 0, &co);
  if (rc < 0 || !co)
    return rc;
  int64_t now = dtx__now_ms(), t0 = dtx__rd_mono_ms();
  int spread = 0;
  rc = DTX_EBUSY;
  for (int attempt = 0; keep_trying(b, t0, attempt); attempt++) {
    rd_doc_t cur = {0};
    int have, by_id;
    rc = select_doc(b, &co, m, spread, &cur, &have, &by_id);
    if (rc == RD_ESTALE) {
      dtx__rd_doc_clear(&cur);
      if ((rc = reload(b, &co, m->coll, create)) < 0 || !co)
        break;
      continue;
    }
    if (rc < 0 || !co) {
      dtx__rd_doc_clear(&cur);
      break;
    }
    if (!have) {
      dtx__rd_doc_clear(&cur);
      if (!create)
        break;
      rc = upsert(b, &co, m, now, res);
      if (rc == RD_ELOST) {
        dtx__modify_result_clear(res);
        continue; /* the _id appeared: it may match now */
      }
      if (rc == RD_ESTALE) {
        dtx__modify_result_clear(res);
        if ((rc = reload(b, &co, m->coll, create)) < 0)
          break;
        continue;
      }
      break;
    }
    int outcome;
    rc = modify_doc(b, co, m, &cur, now, res, &outcome);
    dtx__rd_doc_clear(&cur);
    if (rc == RD_ESTALE) {
      dtx__modify_result_clear(res);
      if ((rc = reload(b, &co, m->coll, create)) < 0 || !co)
        break;
      continue;
    }
    if (rc < 0 || outcome == M_DONE)
      break;
    if (by_id) {
      /* The one candidate does not match (a fresh or verified state). */
      if (!create)
        break;
      rc = upsert(b, &co, m, now, res);
      if (rc == RD_ELOST) {
        dtx__modify_result_clear(res);
        rc = DTX_EBUSY;
        continue;
      }
      if (rc == RD_ESTALE) {
        dtx__modify_result_clear(res);
        if ((rc = reload(b, &co, m->coll, create)) < 0)
          break;
        rc = DTX_EBUSY;
        continue;
      }
      break;
    }
    /* It stopped matching before we could change it: choose again. */
    spread = 1;
    rc = DTX_EBUSY;
  }
  dtx__rd_coll_put(co);
  if (rc == RD_ESTALE || rc == RD_ELOST || rc == DTX_EBUSY)
    rc = dtx__err(DTX_EBUSY, "redis: collection '%s' kept changing", m->coll);
  if (rc < 0)
    dtx__modify_result_clear(res);
  return rc;
}

int dtx__rd_modify_many(dtx__backend_t *b, const dtx__modify_t *m,
                        int64_t *matched, int64_t *modified) {
  *matched = *modified = 0;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, m->coll, 0, 0, &co);
  if (rc < 0 || !co)
    return rc;
  rd_doc_t *d = NULL;
  size_t n = 0;
  rc = matches(b, &co, m->filter_spec, m->filter, &d, &n);
  int64_t now = dtx__now_ms();
  for (size_t i = 0; rc == 0 && co && i < n; i++) {
    for (int attempt = 0; attempt < 20; attempt++) {
      dtx__modify_result_t r = {0};
      int outcome;
      rc = modify_doc(b, co, m, &d[i], now, &r, &outcome);
      if (rc == 0 && outcome == M_DONE) {
        (*matched)++;
        *modified += r.modified;
      }
      dtx__modify_result_clear(&r);
      if (rc != RD_ESTALE)
        break;
      if ((rc = reload(b, &co, m->coll, 0)) < 0 || !co)
        break;
      rc = dtx__rd_read_doc(b, co, &d[i]);
      if (rc < 0 && rc != RD_ESTALE)
        break;
    }
  }
  dtx__rd_docs_free(d, n);
  dtx__rd_coll_put(co);
  if (rc == RD_ESTALE)
    rc = dtx__err(DTX_EBUSY, "redis: collection '%s' kept changing", m->coll);
  return rc;
}
