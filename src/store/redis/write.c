/* write.c -- the compare-and-set write of the Redis backend: one
 * document's new body with its index entries and unique claims.
 *
 * Every change goes through dtx__rd_write, which sends one WRITE script
 * (scripts.c) to the document's node: the expected version, the new body
 * and version, the bucket's index entries to remove and add, and the
 * unique claims to record and release.  Filters and updates are evaluated
 * in C before it is sent (find.c, modify.c, bulk.c); the script only
 * refuses when the document moved since (then its reply is the current
 * state, and the caller evaluates again) or when the catalog did
 * (RD_ESTALE: reload, redo).
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

#include "util/err.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

#define TOMBSTONE_TTL_MS (24LL * 3600 * 1000)

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
  for (int attempt = 0; attempt < RD_WRITE_ATTEMPTS; attempt++) {
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
    /* Unchanged fields, unchanged keys: nothing to remove, add or claim
     * (a building index still gets every key added). */
    if (ix->ready && cur->body && newbody &&
        dtx__index_fields_same(ix->spec, cur->body, newbody))
      continue;
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

/* Adds "n field [value] ..." of a claim list to c: each claim's field in
 * the document's hash ('u' and the claim key), and its value when
 * vals. */
static void put_claims(rd_cmd_t *c, const rd_claims_t *l, int vals) {
  rd_buf_t f = {0};
  dtx__rd_argi(c, (long long)l->n);
  for (size_t i = 0; i < l->n; i++) {
    f.n = 0;
    dtx__rd_putc(&f, 'u');
    dtx__rd_put(&f, l->keys[i].p, l->keys[i].n);
    dtx__rd_argb(c, &f);
    if (vals)
      dtx__rd_argb(c, &l->vals[i]);
  }
  dtx__rd_buf_free(&f);
}

/* The WRITE script's first reply element: 1 applied (or current), 0 lost
 * (the current state follows), -1 stale stamp; -2 for anything else. */
static long long reply_tag(const redisReply *r) {
  return r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                 r->element[0]->type == REDIS_REPLY_INTEGER
             ? r->element[0]->integer
             : -2;
}

/* A write whose first copy went out and whose reply was lost (exec.c
 * marks it sent), answered on its resend by a state that cannot tell
 * whether the first copy ran: DTX_EUNAVAILABLE, the outcome unknown. */
static int lost_outcome(const char *why) {
  return dtx__err(DTX_EUNAVAILABLE,
                  "redis: the reply to a write was lost and %s: it may or "
                  "may not have been applied (outcome unknown)", why);
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
  rd_buf_t text;   /* newbody's BSON bytes as sent (none for a delete) */
  const dtx__modify_t *m; /* borrowed: its time bounds, or NULL */
  json_t *tomb;    /* a delete's fence record (owned), or NULL */
};

/* The WRITE script's first three keys, a write's and a check's alike: the
 * document (its key left in key, which may be tmp), its bucket's members
 * and stamp. */
static void write_cmd_keys(rd_cmd_t *c, const rd_coll_t *co,
                           const rd_doc_t *cur, int write, rd_buf_t *key,
                           rd_buf_t *tmp) {
  dtx__rd_cmd_init(c, co->slots[cur->bucket], RD_S_WRITE, write);
  dtx__rd_doc_key(co, cur, key);
  dtx__rd_argb(c, key);
  tmp->n = 0;
  dtx__rd_key_members(tmp, co, cur->bucket);
  dtx__rd_argb(c, tmp);
  tmp->n = 0;
  dtx__rd_key_stamp(tmp, co, cur->bucket);
  dtx__rd_argb(c, tmp);
}

int dtx__rd_write_begin(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                        json_t *newbody, const dtx__modify_t *m,
                        rd_wprep_t **out) {
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
  p->m = m && dtx__window_any(m) ? m : NULL;
  if (op == 'i')
    dtx__rd_newseq(b, seq);
  else
    memcpy(seq, cur->seq, sizeof p->seq);
  if (strlen(seq) != RD_SEQLEN) {
    free(p);
    return dtx__err(DTX_EBACKEND, "redis: document without a sequence");
  }
  dtx__rd_token(b, ver);
  /* The body goes as BSON bytes (docs.c); the fence record a delete
   * leaves stays JSON text: it is the pattern kit's record of a deleted
   * document, never matched, sorted or indexed, read only to revive or
   * list it (fence.c). */
  rd_buf_t *text = &p->text;
  char *ttext = NULL;
  int rc = op == 'd' && m ? dtx__fence_tombstone(m, cur->body, &p->tomb) : 0;
  if (rc == 0 && newbody)
    rc = dtx__rd_body_encode(newbody, co->name, text);
  if (rc == 0 && p->tomb && !(ttext = dtx__json_dump(p->tomb)))
    rc = dtx__err(DTX_ENOMEM, "writing a document");
  if (rc < 0) {
    dtx__rd_buf_free(text);
    free(ttext);
    json_decref(p->tomb);
    free(p);
    return rc;
  }
  rc = prepare(b, co, cur, newbody, w);
  /* A protocol step of its own: the claims are held but no document
   * records them yet, so a crash here leaves orphans and a pause lets a
   * rival fence this write.  Only writes that record claims reach it.  An
   * injected error fails like any failed write: fresh claims go back. */
  if (rc == 0 && w->rec.n > 0)
    rc = DTX_FAULTPOINT_INNER("redis.unique_claimed");
  if (rc < 0) {
    dtx__rd_claims_release(b, &w->taken);
    if (rc == RD_EMULTI && (rc = dtx__rd_mark_multikey(b, co, w->multi)) == 0)
      rc = RD_ESTALE; /* write again with the new catalog */
    wstate_free(w);
    dtx__rd_buf_free(text);
    free(ttext);
    json_decref(p->tomb);
    free(p);
    return rc;
  }
  rd_buf_t tmp = {0};
  rd_cmd_t *c = &p->c;
  write_cmd_keys(c, co, cur, 1, &p->key, &tmp);
  tmp.n = 0;
  dtx__rd_key_tombs(&tmp, co, cur->bucket);
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
  dtx__rd_argb(c, text); /* binary-safe: BSON holds NULs */
  tmp.n = 0;
  dtx__rd_put(&tmp, seq, RD_SEQLEN);
  dtx__rd_put(&tmp, cur->id.p, cur->id.n);
  dtx__rd_argb(c, &tmp);
  dtx__rd_args(c, seq);
  /* The time bounds, which the script compares with the server's TIME. */
  if (p->m && p->m->not_before > 0)
    dtx__rd_argi(c, (long long)p->m->not_before);
  else
    dtx__rd_args(c, "");
  if (p->m && p->m->not_after > 0)
    dtx__rd_argi(c, (long long)p->m->not_after);
  else
    dtx__rd_args(c, "");
  /* What a delete leaves: the deleted document's fence record
   * (fence.c), on the version this write replaces. */
  dtx__rd_args(c, ttext ? ttext : "");
  put_claims(c, &w->rel, 0); /* to release */
  put_claims(c, &w->rec, 1); /* to record, with their values */
  for (size_t i = 0; i < co->nidx; i++) {
    put_entries(c, &w->old[i], w->rem[i], w->nrem[i], seq, &cur->id);
    put_entries(c, &w->new_[i], w->add[i], w->nadd[i], seq, &cur->id);
  }
  dtx__rd_buf_free(&tmp);
  free(ttext);
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
  /* A run that failed after a copy went out: that copy may have run. */
  int applied = 0, unknown = rc < 0 && c->sent;
  if (rc == 0) {
    const redisReply *r = c->reply;
    long long tag = reply_tag(r);
    if (tag == 1) {
      applied = 1;
      for (size_t i = 0; i < w->rel.n && i + 1 < r->elements; i++) {
        const redisReply *v = r->element[i + 1];
        if (v->type == REDIS_REPLY_STRING) {
          w->rel.vals[i].n = 0;
          dtx__rd_put(&w->rel.vals[i], v->str, v->len);
        }
      }
    } else if (tag == 0 && r->elements == 5) {
      const redisReply *v = r->element[1];
      if (v->type == REDIS_REPLY_STRING && strlen(ver) == v->len &&
          memcmp(v->str, ver, v->len) == 0) {
        applied = 1; /* a resend found its own earlier success */
        for (size_t i = 0; i < w->rel.n; i++)
          w->rel.vals[i].n = 0; /* unknown: they become orphans */
      } else if (c->sent) {
        /* A resend found another writer's version: the first copy may
         * have run before that writer, or not at all.  Applying the
         * update again to the new state could apply it twice (an $inc
         * counted twice), so the outcome is unknown -- the contract of a
         * lost reply (doctx.h, "Errors"). */
        rc = lost_outcome("the document changed since");
        unknown = 1;
      } else {
        rc = dtx__rd_doc_fill(cur, co->name, r->element[1], r->element[2],
                              r->element[3], r->element[4]);
        if (rc == 0)
          rc = RD_ELOST;
      }
    } else if (tag == -1 && c->sent) {
      /* The first copy may have run before the catalog moved on. */
      rc = lost_outcome("the collection's catalog changed since");
      unknown = 1;
    } else if (tag == -1) {
      rc = RD_ESTALE;
    } else if (tag == -3 && c->sent) {
      rc = lost_outcome("the server's clock is now outside its time "
                        "bounds");
      unknown = 1;
    } else if (tag == -3 && p->m && r->elements == 2 &&
               r->element[1]->type == REDIS_REPLY_INTEGER) {
      /* Refused at the server's time: the one rule names it (window.c). */
      rc = dtx__window_test(p->m, cur->body ? cur->body : newbody,
                            (int64_t)r->element[1]->integer);
      if (rc == 0)
        rc = dtx__rd_bad_reply(r, "writing a time-bounded document");
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
    if (w->rel.n == 0 || DTX_FAULTPOINT_INNER("redis.unique_written") == 0)
      dtx__rd_claims_release(b, &w->rel);
    if (claims)
      for (size_t i = 0; i < w->taken.n; i++)
        dtx__rd_claims_add(claims, w->taken.keys[i].p, w->taken.keys[i].n,
                           w->taken.vals[i].p, w->taken.vals[i].n);
    memcpy(cur->ver, ver, sizeof cur->ver);
    memcpy(cur->seq, seq, sizeof cur->seq);
    json_decref(cur->body);
    cur->body = json_incref(newbody);
    json_decref(cur->fence);
    cur->fence = p->tomb; /* what a delete left; NULL after any other */
    p->tomb = NULL;
    cur->cached = 0;
    if (newbody)
      dtx__rd_cache_put(b, &p->key, cur, p->text.p, p->text.n);
    else
      dtx__rd_cache_drop(b, &p->key);
    /* Even when fewer replicas than ?wait= acknowledged it in time (see
     * exec.c), the write is done and cannot be undone, so the state above
     * is recorded either way.  A replica that is catching up was waited
     * for; but when its master has fewer replicas connected than ?wait=,
     * the caller must hear that the write is not durable as asked: an
     * UNAVAILABLE whose outcome is unknown, as after a lost reply. */
    rc = c->few ? dtx__rd_few_replicas_err(b, c) : 0;
  } else if (unknown) {
    /* The first copy may hold the claims it took: they stay, as orphans
     * for the next taker to fence if it did not run. */
    dtx__rd_cache_drop(b, &p->key);
  } else {
    size_t n = 0;
    /* RD_ELOST: cur was filled from the reply's {v, s, b, f} above. */
    const char *raw =
        rc == RD_ELOST ? dtx__rd_reply_bson(c->reply->element[3], &n) : NULL;
    if (rc == RD_ELOST && cur->body)
      dtx__rd_cache_put(b, &p->key, cur, raw, n);
    else if (rc == RD_ELOST)
      dtx__rd_cache_drop(b, &p->key);
    dtx__rd_claims_release(b, &w->taken);
  }
  dtx__rd_cmd_clear(c);
  dtx__rd_buf_free(&p->key);
  dtx__rd_buf_free(&p->text);
  json_decref(p->tomb);
  wstate_free(w);
  free(p);
  return rc;
}

int dtx__rd_write(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                  json_t *newbody, const dtx__modify_t *m,
                  rd_claims_t *claims) {
  rd_wprep_t *p;
  int rc = dtx__rd_write_begin(b, co, cur, newbody, m, &p);
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
  write_cmd_keys(c, co, cur, 0, &tmp, &tmp);
  c->nkeys = 3;
  dtx__rd_buf_free(&tmp);
  dtx__rd_args(c, cur->ver);
  dtx__rd_args(c, "");
  dtx__rd_argi(c, co->ver);
  dtx__rd_args(c, "c");
}

int dtx__rd_verify_reply(dtx__backend_t *b, const rd_coll_t *co,
                         rd_doc_t *cur, const rd_cmd_t *c) {
  const redisReply *r = c->reply;
  long long tag = reply_tag(r);
  if (tag == 1) {
    cur->cached = 0;
    return 0;
  }
  if (tag == -1)
    return RD_ESTALE;
  if (tag != 0 || r->elements != 5)
    return dtx__rd_bad_reply(r, "checking a document");
  int rc = dtx__rd_doc_fill(cur, co->name, r->element[1], r->element[2], r->element[3],
                            r->element[4]);
  if (rc < 0)
    return rc;
  rd_buf_t key = {0};
  dtx__rd_doc_key(co, cur, &key);
  size_t n;
  const char *raw = dtx__rd_reply_bson(r->element[3], &n);
  if (cur->body)
    dtx__rd_cache_put(b, &key, cur, raw, n);
  else
    dtx__rd_cache_drop(b, &key);
  dtx__rd_buf_free(&key);
  return RD_ELOST;
}
