/* plan.c -- the Redis backend's execution of a query plan (the one
 * planner, store/plan.h, chooses it): the scatter/gather read of
 * candidate documents.  An _id plan reads those documents; an index plan
 * reads the index zsets' ranges of every bucket (per equality
 * combination); a scan reads the members zsets.  Candidates are only
 * candidates: the caller checks every one with dtx__filter_match.
 *
 * Reading is a scatter: one command per bucket (per equality combination
 * for an index), all sent in one batch, so each node gets one pipeline
 * and the nodes work in parallel; a bucket whose page filled up is asked
 * again from where it stopped (on a standalone server a round's ranges go
 * as one script call per 16, see round_run).  A full scan is made a
 * snapshot by a double collect (versions read twice, see
 * dtx__rd_candidates). */
#include "store/redis/redis_int.h"

#include "util/err.h"

#include <stdlib.h>
#include <string.h>

#define PAGE 500
/* A scan tries for a snapshot at least SNAPSHOT_TRIES times and for up to
 * SNAPSHOT_MS, then settles for one pipelined round. */
#define SNAPSHOT_TRIES 8
#define SNAPSHOT_MS 5000

/* Queries may use an index once it is built (catalog.c). */
static int index_of(const void *coll, size_t i, dtx__plan_index_t *out) {
  const rd_idx_t *ix = &((const rd_coll_t *)coll)->idx[i];
  *out = (dtx__plan_index_t){ix, ix->spec, ix->multikey};
  return ix->ready;
}

int dtx__rd_plan(const rd_coll_t *co, const json_t *fspec, dtx__plan_t *p) {
  return dtx__plan_choose(fspec, NULL, co, co->nidx, index_of, p);
}

int dtx__rd_plan_sorted(const rd_coll_t *co, const json_t *fspec,
                        const json_t *sort, dtx__plan_t *p) {
  int rc = dtx__plan_choose(fspec, sort, co, co->nidx, index_of, p);
  if (rc == 0 && p->kind == DTX__PLAN_SORTED)
    return 1;
  dtx__plan_free(p);
  return rc;
}

/* ---- candidates ------------------------------------------------------------------ */

void dtx__rd_docs_free(rd_doc_t *d, size_t n) {
  if (!d)
    return;
  for (size_t i = 0; i < n; i++)
    dtx__rd_doc_clear(&d[i]);
  free(d);
}

typedef struct docset {
  const char *coll; /* for messages */
  rd_doc_t *d;
  size_t n, cap;
  /* open-addressing set of (bucket, id) for distinctness */
  size_t *slot; /* index + 1, 0 empty */
  size_t nslot;
} docset_t;

/* 1 when (bucket, id) is in s, with *pos its slot; else 0 with *pos the
 * free slot it would take. */
static int docset_has(docset_t *s, int bucket, const char *id, size_t n,
                      size_t *pos) {
  uint64_t h = dtx__rd_hash64(id, n) ^ (uint64_t)bucket * 0x9e3779b97f4a7c15ULL;
  size_t j = (size_t)(h & (s->nslot - 1));
  for (; s->slot[j]; j = (j + 1) & (s->nslot - 1)) {
    const rd_doc_t *d = &s->d[s->slot[j] - 1];
    if (d->bucket == bucket && d->id.n == n && memcmp(d->id.p, id, n) == 0) {
      *pos = j;
      return 1;
    }
  }
  *pos = j;
  return 0;
}

static int docset_grow(docset_t *s) {
  size_t ns = s->nslot ? s->nslot * 2 : 64;
  size_t *nt = calloc(ns, sizeof *nt);
  if (!nt)
    return -1;
  free(s->slot);
  s->slot = nt;
  s->nslot = ns;
  for (size_t i = 0; i < s->n; i++) {
    size_t pos;
    if (!docset_has(s, s->d[i].bucket, s->d[i].id.p, s->d[i].id.n, &pos))
      s->slot[pos] = i + 1;
  }
  return 0;
}

/* Adds one document from a reply (id, v, s, b) unless already present. */
static int docset_add(docset_t *s, int bucket, const redisReply *id,
                      const redisReply *v, const redisReply *seq,
                      const redisReply *body) {
  if ((s->n + 1) * 2 > s->nslot && docset_grow(s) < 0)
    return dtx__err(DTX_ENOMEM, "collecting candidates");
  size_t pos;
  if (docset_has(s, bucket, id->str, id->len, &pos))
    return 0;
  if (s->n == s->cap && DTX__GROW(s->d, s->cap, 16))
    return dtx__err(DTX_ENOMEM, "collecting candidates");
  rd_doc_t *d = &s->d[s->n];
  memset(d, 0, sizeof *d);
  d->bucket = bucket;
  dtx__rd_put(&d->id, id->str, id->len);
  int rc = dtx__rd_doc_fill(d, s->coll, v, seq, body, NULL);
  if (rc < 0 || d->id.oom) {
    dtx__rd_doc_clear(d);
    return rc < 0 ? rc : dtx__err(DTX_ENOMEM, "collecting candidates");
  }
  if (!d->body) {
    dtx__rd_doc_clear(d);
    return 0;
  }
  s->slot[pos] = ++s->n;
  return 0;
}

/* 1 when a bucket's stamp means our catalog is out of date for reading:
 * the bucket was dropped, or writers now maintain an index we lack. */
static int stamp_stale(const rd_coll_t *co, const redisReply *st) {
  if (st->type != REDIS_REPLY_STRING)
    return 1;
  if (st->len == 7 && memcmp(st->str, "dropped", 7) == 0)
    return 1;
  return strtoll(st->str, NULL, 10) > co->ver;
}

/* One pending range read. */
typedef struct rq {
  int bucket;
  rd_buf_t zkey, min, max;
} rq_t;

static void rq_free(rq_t *q, size_t n) {
  for (size_t i = 0; q && i < n; i++) {
    dtx__rd_buf_free(&q[i].zkey);
    dtx__rd_buf_free(&q[i].min);
    dtx__rd_buf_free(&q[i].max);
  }
  free(q);
}

/* One round of range reads: the sub-ranges qs[which[0..n)], each with
 * its limit (lim[j] for qs[j], or PAGE without lim).  On a cluster each
 * is one RD_S_RANGE call to its bucket's slot.  On a standalone server
 * every bucket lives on the one node, and a call's own cost is about a
 * third of the server time of a range that finds nothing (the common
 * case in a ledger post's 32), so the sub-ranges go as RD_S_MRANGE calls
 * of up to RD_MRANGE_MAX each (a lone one still as RD_S_RANGE): a post is
 * 7 script calls instead of 37.  Either way rd->r[i] is sub-range i's
 * reply in RD_S_RANGE's format, owned by rd->cmds until round_free; on
 * error rd is empty. */
typedef struct round {
  rd_cmd_t *cmds;
  size_t nc;
  const redisReply **r;
} round_t;

static void round_free(round_t *rd) {
  dtx__rd_cmds_free(rd->cmds, rd->nc);
  free(rd->r);
  memset(rd, 0, sizeof *rd);
}

static int round_run(dtx__backend_t *b, const rd_coll_t *co, const rq_t *qs,
                     const size_t *which, const int *lim, size_t n,
                     int members, int versions, int together,
                     round_t *rd) {
  memset(rd, 0, sizeof *rd);
  size_t group = b->cluster ? 1 : RD_MRANGE_MAX;
  size_t ncmd = (n + group - 1) / group;
  rd->cmds = calloc(ncmd ? ncmd : 1, sizeof *rd->cmds);
  rd->r = calloc(n ? n : 1, sizeof *rd->r);
  if (!rd->cmds || !rd->r) {
    round_free(rd);
    return dtx__err(DTX_ENOMEM, "reading candidates");
  }
  rd_buf_t stamp = {0}, prefix = {0};
  for (size_t i = 0; i < n; i += group) {
    size_t m = n - i < group ? n - i : group;
    rd_cmd_t *c = &rd->cmds[rd->nc++];
    dtx__rd_cmd_init(c, co->slots[qs[which[i]].bucket],
                     m == 1 ? RD_S_RANGE : RD_S_MRANGE, 0);
    c->nkeys = (int)(2 * m);
    for (size_t j = i; j < i + m; j++) {
      stamp.n = 0;
      dtx__rd_key_stamp(&stamp, co, qs[which[j]].bucket);
      dtx__rd_argb(c, &qs[which[j]].zkey);
      dtx__rd_argb(c, &stamp);
    }
    for (size_t j = i; j < i + m; j++) {
      const rq_t *q = &qs[which[j]];
      prefix.n = 0;
      dtx__rd_key_doc(&prefix, co, q->bucket, "", 0);
      dtx__rd_argb(c, &q->min);
      dtx__rd_argb(c, &q->max);
      dtx__rd_argi(c, lim ? lim[which[j]] : PAGE);
      dtx__rd_argb(c, &prefix);
      dtx__rd_args(c, members ? "m" : "x");
      if (versions)
        dtx__rd_args(c, "v");
      else if (m > 1)
        dtx__rd_args(c, ""); /* MRANGE's arguments are six per range */
    }
  }
  dtx__rd_buf_free(&stamp);
  dtx__rd_buf_free(&prefix);
  int rc = together
               ? dtx__rd_run_together(b, rd->cmds, rd->nc, "reading candidates")
               : dtx__rd_run(b, rd->cmds, rd->nc, "reading candidates");
  for (size_t k = 0, i = 0; rc == 0 && k < rd->nc; k++, i += group) {
    size_t m = n - i < group ? n - i : group;
    const redisReply *r = rd->cmds[k].reply;
    if (m == 1) {
      rd->r[i] = r;
      continue;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != m) {
      rc = dtx__rd_bad_reply(r, "reading candidates");
      break;
    }
    for (size_t j = 0; j < m; j++)
      rd->r[i + j] = r->element[j];
  }
  if (rc < 0)
    round_free(rd);
  return rc;
}

/* Runs the range reads, following pages, into s.  With versions (a
 * second collect, see dtx__rd_candidates), only ids and versions are
 * read, and *same says whether they are exactly those of s. */
static int run_ranges(dtx__backend_t *b, const rd_coll_t *co, rq_t *qs,
                      size_t nq, int members, docset_t *s, int versions,
                      int *same) {
  size_t seen = 0;
  int rc = 0;
  size_t live = nq;
  int *done = calloc(nq ? nq : 1, sizeof *done);
  if (!done)
    return dtx__err(DTX_ENOMEM, "reading candidates");
  while (rc == 0 && live > 0) {
    size_t *which = calloc(live, sizeof *which);
    if (!which) {
      rc = dtx__err(DTX_ENOMEM, "reading candidates");
      break;
    }
    size_t nc = 0;
    for (size_t i = 0; i < nq; i++)
      if (!done[i])
        which[nc++] = i;
    round_t rd;
    rc = round_run(b, co, qs, which, NULL, nc, members, versions, 1, &rd);
    for (size_t k = 0; rc == 0 && k < nc; k++) {
      const redisReply *r = rd.r[k];
      rq_t *q = &qs[which[k]];
      size_t per = versions ? 2 : 4;
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
          (r->elements - 3) % per != 0) {
        rc = dtx__rd_bad_reply(r, "reading candidates");
        break;
      }
      if (stamp_stale(co, r->element[0])) {
        rc = RD_ESTALE;
        break;
      }
      for (size_t i = 3; rc == 0 && !versions && i + 3 < r->elements; i += 4)
        rc = docset_add(s, q->bucket, r->element[i], r->element[i + 1],
                        r->element[i + 2], r->element[i + 3]);
      for (size_t i = 3; versions && *same && i + 1 < r->elements; i += 2) {
        const redisReply *id = r->element[i], *v = r->element[i + 1];
        size_t pos;
        seen++;
        if (!s->nslot ||
            !docset_has(s, q->bucket, id->str, id->len, &pos) ||
            v->type != REDIS_REPLY_STRING ||
            strlen(s->d[s->slot[pos] - 1].ver) != v->len ||
            memcmp(s->d[s->slot[pos] - 1].ver, v->str, v->len) != 0)
          *same = 0;
      }
      if (r->element[1]->integer < PAGE) {
        done[which[k]] = 1;
        live--;
      } else {
        q->min.n = 0;
        dtx__rd_putc(&q->min, '(');
        dtx__rd_put(&q->min, r->element[2]->str, r->element[2]->len);
      }
    }
    round_free(&rd); /* zeroed when round_run failed */
    free(which);
  }
  free(done);
  if (versions && seen != s->n)
    *same = 0;
  return rc;
}

/* The _id value as the key text of a stored _id, or 0 when no stored
 * document can have it (an array). */
static int id_of_value(const json_t *v, rd_buf_t *out) {
  return dtx__id_valid(v) && dtx__rd_idenc(v, out) == 0;
}

static int read_ids(dtx__backend_t *b, const rd_coll_t *co, const json_t *ids,
                    docset_t *s) {
  size_t n = json_array_size(ids), nc = 0;
  if (!n)
    return 0;
  rd_cmd_t *cmds = calloc(n, sizeof *cmds);
  int *buckets = calloc(n, sizeof *buckets);
  rd_buf_t *idb = calloc(n, sizeof *idb);
  if (!cmds || !buckets || !idb) {
    free(cmds);
    free(buckets);
    free(idb);
    return dtx__err(DTX_ENOMEM, "reading documents");
  }
  rd_buf_t key = {0};
  for (size_t i = 0; i < n; i++) {
    if (!id_of_value(json_array_get(ids, i), &idb[nc])) {
      dtx__rd_buf_free(&idb[nc]);
      continue;
    }
    int bk = dtx__rd_bucket(co, idb[nc].p, idb[nc].n);
    buckets[nc] = bk;
    rd_cmd_t *c = &cmds[nc];
    dtx__rd_cmd_init(c, co->slots[bk], RD_S_READDOC, 0);
    c->nkeys = 2;
    key.n = 0;
    dtx__rd_key_doc(&key, co, bk, idb[nc].p, idb[nc].n);
    dtx__rd_argb(c, &key);
    key.n = 0;
    dtx__rd_key_stamp(&key, co, bk);
    dtx__rd_argb(c, &key);
    nc++;
  }
  int rc = dtx__rd_run_together(b, cmds, nc, "reading documents");
  for (size_t k = 0; rc == 0 && k < nc; k++) {
    const redisReply *r = cmds[k].reply;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5) {
      rc = dtx__rd_bad_reply(r, "reading documents");
      break;
    }
    if (stamp_stale(co, r->element[0])) {
      rc = RD_ESTALE;
      break;
    }
    redisReply idr = {.type = REDIS_REPLY_STRING,
                      .str = idb[k].p,
                      .len = idb[k].n};
    size_t before = s->n;
    rc = docset_add(s, buckets[k], &idr, r->element[1], r->element[2],
                    r->element[3]);
    if (rc == 0 && s->n > before) {
      /* A by-_id read is usually followed by a write of that document:
       * remember it, so the write needs no read of its own. */
      key.n = 0;
      dtx__rd_key_doc(&key, co, buckets[k], idb[k].p, idb[k].n);
      size_t rn;
      const char *raw = dtx__rd_reply_bson(r->element[3], &rn);
      dtx__rd_cache_put(b, &key, &s->d[s->n - 1], raw, rn);
    }
  }
  dtx__rd_buf_free(&key);
  dtx__rd_cmds_free(cmds, nc);
  for (size_t k = 0; k < n; k++)
    dtx__rd_buf_free(&idb[k]);
  free(idb);
  free(buckets);
  return rc;
}

/* The lexical bounds of an index plan for one combination of equality
 * values (see codec.c for why "+ 0xFF" bounds a prefix). */
static void index_bounds(const dtx__plan_t *p, const size_t *pos, rd_buf_t *min,
                         rd_buf_t *max) {
  rd_buf_t pre = {0};
  for (size_t f = 0; f < p->neq; f++)
    dtx__rd_valenc(&pre, json_array_get(p->eq[f], pos[f]));
  if (!p->lo && !p->hi) {
    dtx__rd_putc(min, '[');
    dtx__rd_put(min, pre.p, pre.n);
    dtx__rd_putc(max, '(');
    dtx__rd_put(max, pre.p, pre.n);
    dtx__rd_putc(max, '\xff');
  } else {
    int br = dtx__value_bracket(p->lo ? p->lo : p->hi);
    if (p->lo) {
      dtx__rd_putc(min, p->lo_incl ? '[' : '(');
      dtx__rd_put(min, pre.p, pre.n);
      dtx__rd_valenc(min, p->lo);
      if (!p->lo_incl)
        dtx__rd_putc(min, '\xff');
    } else {
      dtx__rd_putc(min, '[');
      dtx__rd_put(min, pre.p, pre.n);
      dtx__rd_putc(min, (char)br);
    }
    dtx__rd_putc(max, '(');
    dtx__rd_put(max, pre.p, pre.n);
    if (p->hi) {
      dtx__rd_valenc(max, p->hi);
      if (p->hi_incl)
        dtx__rd_putc(max, '\xff');
    } else {
      dtx__rd_putc(max, (char)(br + 1));
    }
  }
  dtx__rd_buf_free(&pre);
}

/* The range reads of plan p in each bucket, into qs[0..nb): for a scan
 * the whole members zsets, else the index zsets' entries under the
 * equality values at pos (within the range, if any). */
static void bucket_ranges(const rd_coll_t *co, const dtx__plan_t *p,
                          const size_t *pos, rq_t *qs) {
  rd_buf_t min = {0}, max = {0};
  int scan = p->kind == DTX__PLAN_SCAN;
  if (scan) {
    dtx__rd_puts(&min, "-");
    dtx__rd_puts(&max, "+");
  } else {
    index_bounds(p, pos, &min, &max);
  }
  for (int k = 0; k < co->nb; k++) {
    qs[k].bucket = k;
    if (scan)
      dtx__rd_key_members(&qs[k].zkey, co, k);
    else
      dtx__rd_key_index(&qs[k].zkey, co, k, ((const rd_idx_t *)p->ix)->id);
    dtx__rd_put(&qs[k].min, min.p, min.n);
    dtx__rd_put(&qs[k].max, max.p, max.n);
    qs[k].min.oom |= min.oom;
    qs[k].max.oom |= max.oom;
  }
  dtx__rd_buf_free(&min);
  dtx__rd_buf_free(&max);
}

int dtx__rd_candidates(dtx__backend_t *b, const rd_coll_t *co,
                       const dtx__plan_t *p, rd_doc_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  docset_t s = {.coll = co->name};
  int rc = 0;
  if (p->kind == DTX__PLAN_NONE) {
    rc = 0;
  } else if (p->kind == DTX__PLAN_IDS) {
    rc = read_ids(b, co, p->ids, &s);
  } else {
    size_t combos = 1;
    for (size_t f = 0; f < p->neq; f++)
      combos *= json_array_size(p->eq[f]);
    size_t nq = (size_t)co->nb * combos; /* a scan: no equalities, 1 */
    rq_t *qs = calloc(nq ? nq : 1, sizeof *qs);
    if (!qs)
      return dtx__err(DTX_ENOMEM, "reading candidates");
    size_t q = 0, pos[16] = {0};
    for (;;) { /* an odometer over the equality values (a scan has none) */
      bucket_ranges(co, p, pos, &qs[q]);
      q += (size_t)co->nb;
      size_t f = p->neq;
      while (f > 0 && ++pos[f - 1] == json_array_size(p->eq[f - 1]))
        pos[--f] = 0;
      if (f == 0)
        break;
    }
    for (size_t i = 0; i < q; i++)
      if (qs[i].zkey.oom || qs[i].min.oom || qs[i].max.oom)
        rc = dtx__err(DTX_ENOMEM, "reading candidates");
    int scan = p->kind == DTX__PLAN_SCAN;
    int64_t t0 = dtx__rd_mono_ms();
    for (int attempt = 0; rc == 0; attempt++) {
      if ((rc = run_ranges(b, co, qs, q, scan, &s, 0, NULL)) < 0 || !scan ||
          (attempt >= SNAPSHOT_TRIES &&
           dtx__rd_mono_ms() - t0 > SNAPSHOT_MS))
        break;
      /* Double collect: if no document changed, came or went between
       * the first read of it and this second one, every one of them was
       * as read at the moment between the two rounds, so the scan is a
       * snapshot (transactions such as transfers touch two documents,
       * and a reader summing them needs one). */
      for (size_t i = 0; i < q; i++) {
        qs[i].min.n = 0;
        dtx__rd_puts(&qs[i].min, "-");
      }
      int same = 1;
      if ((rc = run_ranges(b, co, qs, q, 1, &s, 1, &same)) < 0 || same)
        break;
      for (size_t i = 0; i < q; i++) {
        qs[i].min.n = 0;
        dtx__rd_puts(&qs[i].min, "-");
      }
      for (size_t i = 0; i < s.n; i++)
        dtx__rd_doc_clear(&s.d[i]);
      s.n = 0;
      if (s.slot)
        memset(s.slot, 0, s.nslot * sizeof *s.slot);
    }
    rq_free(qs, nq);
  }
  free(s.slot);
  if (rc < 0) {
    dtx__rd_docs_free(s.d, s.n);
    return rc;
  }
  *out = s.d;
  *n = s.n;
  return 0;
}

/* ---- first matches ---------------------------------------------------------------- */

#define FIRST_PAGE 4
#define FIRST_PAGE_MAX 256

/* Whether a's entry comes before b's in the walk's order: (sort, seq). */
static int walk_before(const json_t *sort, const rd_doc_t *a,
                       const rd_doc_t *b) {
  int c = sort ? dtx__sort_cmp(sort, a->body, b->body) : 0;
  return c ? c < 0 : strcmp(a->seq, b->seq) < 0;
}

/* The want best matches so far in walk order, kept across rounds as
 * indexes into the growing array of matches (which a realloc may move):
 * each new match is placed by binary search, so a page of want costs
 * O(matches x log want) comparisons, not the O(matches x want) of
 * sorting every round's matches again.  top_bar() is the want-th, or NULL
 * when there are fewer: the bar a bucket's later entries must beat. */
typedef struct top {
  size_t *ix; /* indexes into the matches, best first */
  size_t n, want;
} top_t;

static void top_add(top_t *t, const json_t *sort, const rd_doc_t *d,
                    size_t i) {
  size_t lo = 0, hi = t->n;
  while (lo < hi) { /* the first place whose entry d comes before */
    size_t mid = lo + (hi - lo) / 2;
    if (walk_before(sort, &d[i], &d[t->ix[mid]]))
      hi = mid;
    else
      lo = mid + 1;
  }
  if (lo >= t->want)
    return;
  size_t keep = t->n < t->want ? t->n : t->want - 1;
  memmove(&t->ix[lo + 1], &t->ix[lo], (keep - lo) * sizeof *t->ix);
  t->ix[lo] = i;
  if (t->n < t->want)
    t->n++;
}

static const rd_doc_t *top_bar(const top_t *t, const rd_doc_t *d) {
  return t->n == t->want ? &d[t->ix[t->want - 1]] : NULL;
}

/* The documents already taken, by (bucket, encoded _id): a multikey
 * index lists a document once per key, so a walk may meet one again.
 * Open addressing over indexes into the matches, kept at most half
 * full. */
typedef struct seen {
  size_t *slot; /* index + 1; 0 is empty */
  size_t cap, n;
} seen_t;

static uint64_t seen_hash(const rd_doc_t *d) {
  uint64_t h = 1469598103934665603ull ^ (uint64_t)d->bucket;
  for (size_t i = 0; i < d->id.n; i++)
    h = (h ^ (unsigned char)d->id.p[i]) * 1099511628211ull;
  return h;
}

static int same_doc(const rd_doc_t *a, const rd_doc_t *b) {
  return a->bucket == b->bucket && a->id.n == b->id.n &&
         memcmp(a->id.p, b->id.p, a->id.n) == 0;
}

/* 1 when d is among got[] already (by s), else 0. */
static int seen_has(const seen_t *s, const rd_doc_t *got, const rd_doc_t *d) {
  if (!s->cap)
    return 0;
  for (size_t h = seen_hash(d) & (s->cap - 1); s->slot[h];
       h = (h + 1) & (s->cap - 1))
    if (same_doc(&got[s->slot[h] - 1], d))
      return 1;
  return 0;
}

/* Records got[i]; -1 when out of memory. */
static int seen_add(seen_t *s, const rd_doc_t *got, size_t i) {
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    size_t *slot = calloc(cap, sizeof *slot);
    if (!slot)
      return -1;
    for (size_t k = 0; k < s->cap; k++)
      if (s->slot[k]) {
        size_t h = seen_hash(&got[s->slot[k] - 1]) & (cap - 1);
        while (slot[h])
          h = (h + 1) & (cap - 1);
        slot[h] = s->slot[k];
      }
    free(s->slot);
    s->slot = slot;
    s->cap = cap;
  }
  size_t h = seen_hash(&got[i]) & (s->cap - 1);
  while (s->slot[h])
    h = (h + 1) & (s->cap - 1);
  s->slot[h] = i + 1;
  s->n++;
  return 0;
}

/* Within one bucket, members and the entries of one full-equality index
 * key are ordered by sequence number, and the entries of a sorted plan's
 * index (dtx__rd_plan_sorted) by the sort and then sequence number; so the
 * bucket's first matches in that order are found by reading a few entries
 * at a time, and a bucket whose entries have passed the want-th best
 * match found over all buckets can stop: its later matches come after
 * want others. */
int dtx__rd_first_matches(dtx__backend_t *b, const rd_coll_t *co,
                          const dtx__plan_t *p, const dtx__filter_t *f,
                          const json_t *sort, size_t want, rd_doc_t **out,
                          size_t *n) {
  *out = NULL;
  *n = 0;
  if (want < 1)
    want = 1;
  const rd_idx_t *ix = p->ix;
  if (p->kind == DTX__PLAN_INDEX) {
    if (p->lo || p->hi || p->neq != ix->spec->nfields)
      return 0;
    for (size_t k = 0; k < p->neq; k++)
      if (json_array_size(p->eq[k]) != 1)
        return 0;
  } else if (p->kind != DTX__PLAN_SCAN && p->kind != DTX__PLAN_SORTED) {
    return 0;
  }
  /* got grows as matches come: up to nb x want may (one bucket's want
   * each), which at 4,096 buckets and a page of thousands is too much to
   * reserve at once. */
  size_t nb = (size_t)co->nb, ngot = 0, cap = 64;
  rq_t *qs = calloc(nb, sizeof *qs);
  int *done = calloc(nb, sizeof *done), *limit = calloc(nb, sizeof *limit);
  size_t *per = calloc(nb, sizeof *per);
  rd_doc_t *got = calloc(cap, sizeof *got);
  rd_doc_t *last = calloc(nb, sizeof *last); /* each bucket's last entry */
  top_t top = {calloc(want, sizeof *top.ix), 0, want};
  seen_t seen = {0};
  size_t *which = calloc(nb, sizeof *which);
  int rc = 0;
  if (!qs || !done || !limit || !per || !got || !last || !top.ix || !which) {
    rc = dtx__err(DTX_ENOMEM, "reading candidates");
    goto out;
  }
  size_t pos[16] = {0};
  bucket_ranges(co, p, pos, qs);
  /* The first page: FIRST_PAGE entries per bucket for one match (a few
   * may not match); for more, about twice a bucket's share of them, since
   * every entry read is a document parsed and a page of N for a job
   * worker's batch is spread over every bucket. */
  int page = FIRST_PAGE;
  if (want > 1) {
    size_t share = (2 * want + nb - 1) / nb;
    page = share < 1 ? 1 : share > FIRST_PAGE ? FIRST_PAGE : (int)share;
  }
  for (size_t k = 0; k < nb; k++)
    limit[k] = page;
  for (;;) {
    size_t nc = 0;
    for (size_t k = 0; k < nb; k++)
      if (!done[k])
        which[nc++] = k;
    if (nc == 0)
      break;
    round_t rd;
    rc = round_run(b, co, qs, which, limit, nc, p->kind == DTX__PLAN_SCAN, 0, 0,
                   &rd);
    for (size_t i = 0; rc == 0 && i < nc; i++) {
      size_t k = which[i];
      const redisReply *r = rd.r[i];
      if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
          (r->elements - 3) % 4 != 0) {
        rc = dtx__rd_bad_reply(r, "reading candidates");
        break;
      }
      if (stamp_stale(co, r->element[0])) {
        rc = RD_ESTALE;
        break;
      }
      for (size_t e = 3; rc == 0 && e + 3 < r->elements && !done[k];
           e += 4) {
        rd_doc_t d = {0};
        d.bucket = (int)k;
        dtx__rd_put(&d.id, r->element[e]->str, r->element[e]->len);
        rc = dtx__rd_doc_fill(&d, co->name, r->element[e + 1],
                              r->element[e + 2], r->element[e + 3], NULL);
        if (rc == 0 && d.body) {
          /* the stop rule's entry: the last one read, match or not */
          dtx__rd_doc_clear(&last[k]);
          last[k].body = json_incref(d.body);
          memcpy(last[k].seq, d.seq, sizeof d.seq);
          dtx__docs_examined++;
          if (!seen_has(&seen, got, &d) && dtx__filter_match(f, d.body)) {
            size_t ncap = ngot < cap ? cap : 2 * cap;
            rd_doc_t *g = ncap == cap ? got : realloc(got, ncap * sizeof *got);
            if (!g) {
              rc = dtx__err(DTX_ENOMEM, "reading candidates");
            } else {
              cap = ncap;
              got = g;
              got[ngot] = d; /* got owns it now: freed with got */
              memset(&d, 0, sizeof d);
              if (seen_add(&seen, got, ngot) < 0)
                rc = dtx__err(DTX_ENOMEM, "reading candidates");
              top_add(&top, sort, got, ngot++);
              if (++per[k] >= want)
                done[k] = 1; /* its later matches come after these */
            }
          }
        }
        dtx__rd_doc_clear(&d);
      }
      if (rc < 0 || done[k])
        continue;
      if (r->element[1]->integer < limit[k]) {
        done[k] = 1; /* exhausted */
      } else {
        qs[k].min.n = 0;
        dtx__rd_putc(&qs[k].min, '(');
        dtx__rd_put(&qs[k].min, r->element[2]->str, r->element[2]->len);
        if (limit[k] < FIRST_PAGE_MAX)
          limit[k] *= 2;
      }
    }
    round_free(&rd); /* zeroed when round_run failed */
    if (rc < 0)
      break;
    /* A bucket's next entries come after its last one: past the want-th
     * best found anywhere, it can stop. */
    const rd_doc_t *bar = top_bar(&top, got);
    for (size_t k = 0; bar && k < nb; k++)
      if (!done[k] && last[k].body && walk_before(sort, bar, &last[k]))
        done[k] = 1;
  }
  if (rc == 0) {
    *out = got;
    *n = ngot;
    got = NULL;
    rc = 1;
  }
out:
  if (got)
    dtx__rd_docs_free(got, ngot);
  if (last)
    dtx__rd_docs_free(last, nb);
  rq_free(qs, nb);
  free(done);
  free(limit);
  free(per);
  free(top.ix);
  free(seen.slot);
  free(which);
  return rc;
}
