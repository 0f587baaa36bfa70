/* find.c -- the reads of the Redis backend: find and count, and the
 * matching documents in natural order that modify.c chooses from.
 *
 * A read plans (plan.c), reads the candidates of every bucket, and
 * evaluates the filter here in C.  A stale catalog stamp in any bucket
 * (RD_ESTALE) means the descriptor moved: reload it and read again. */
#include "store/redis/redis_int.h"

#include "util/err.h"

#include <stdlib.h>
#include <string.h>

/* ---- reads ------------------------------------------------------------------------------ */

int dtx__rd_doc_seq_cmp(const void *pa, const void *pb) {
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
int dtx__rd_matches(dtx__backend_t *b, rd_coll_t **cop, const json_t *fspec,
                    const dtx__filter_t *f, rd_doc_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  for (int attempt = 0; attempt < 20; attempt++) {
    dtx__plan_t p;
    int rc = dtx__rd_plan(*cop, fspec, &p);
    if (rc < 0)
      return rc;
    rd_doc_t *d;
    size_t nd;
    rc = dtx__rd_candidates(b, *cop, &p, &d, &nd);
    dtx__plan_free(&p);
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
      qsort(d, w, sizeof *d, dtx__rd_doc_seq_cmp);
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
  dtx__plan_t p;
  int rc = dtx__rd_plan_sorted(co, fspec, sort, &p);
  if (rc == 1)
    rc = dtx__rd_first_matches(b, co, &p, f, sort, want, out, n);
  dtx__plan_free(&p);
  if (rc != 1)
    return rc;
  rd_buf_t key = {0};
  for (size_t i = 0; i < *n; i++) {
    key.n = 0;
    dtx__rd_key_doc(&key, co, (*out)[i].bucket, (*out)[i].id.p,
                    (*out)[i].id.n);
    dtx__rd_cache_put(b, &key, &(*out)[i], NULL, 0); /* replies gone */
  }
  dtx__rd_buf_free(&key);
  if (*n > 1)
    qsort(*out, *n, sizeof **out, dtx__rd_doc_seq_cmp);
  return 1;
}

/* Pages up to this many documents are served by first_sorted: a job
 * worker's claim round, a page of a sorted listing, the ledger
 * committer's round (ROUND_SCAN, src/txn/ledger/commit.c).  Such a page
 * is not a snapshot (docs/redis.md): a larger one is left to the full
 * read, which a filter without an index makes a double-collect scan. */
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
  /* skip + limit is not summed: near INT64_MAX it would wrap negative
   * and pass the bound. */
  if (co && sort && limit > 0 && skip >= 0 && limit <= FIRST_SORTED_MAX &&
      skip <= FIRST_SORTED_MAX - limit)
    rc = first_sorted(b, co, fspec, f, sort, (size_t)(skip + limit), &d, &n);
  if (rc == 1)
    rc = 0; /* served: sorted and paged below, as the full read is */
  else if (co && (rc == 0 || rc == RD_ESTALE)) /* matches reloads a stale co */
    rc = dtx__rd_matches(b, &co, fspec, f, &d, &n);
  dtx__rd_coll_put(co);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (json_array_append(arr, d[i].body) < 0)
      rc = dtx__err(DTX_ENOMEM, "finding documents");
  dtx__rd_docs_free(d, n);
  if (rc == 0 && sort)
    rc = dtx__sort_array(arr, sort);
  if (rc == 0 && (skip > 0 || limit > 0))
    rc = dtx__page_array(&arr, skip, limit);
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
  rc = dtx__rd_matches(b, &co, fspec, f, &d, &n);
  dtx__rd_coll_put(co);
  dtx__rd_docs_free(d, n);
  if (rc == 0)
    *out = (int64_t)n;
  return rc;
}

/* ---- fence records ------------------------------------------------------------------ */

/* Every record coll's tombstones keep: each bucket's tombstones set, then
 * field f of each tombstone's key (a key that is a document again by
 * then holds its record in its body, which find reads). */
int dtx__rd_fence_records(dtx__backend_t *b, const char *coll, json_t **out) {
  *out = NULL;
  rd_coll_t *co;
  int rc = dtx__rd_coll_get(b, coll, 0, 1, &co);
  if (rc < 0)
    return rc;
  json_t *arr = json_array();
  size_t nb = co ? (size_t)co->nb : 0, nt = 0;
  rd_cmd_t *sets = nb ? calloc(nb, sizeof *sets) : NULL, *gets = NULL;
  rd_buf_t key = {0};
  if (!arr || (nb && !sets))
    rc = dtx__err(DTX_ENOMEM, "reading the fence records of %s", coll);
  for (size_t k = 0; rc == 0 && k < nb; k++) {
    dtx__rd_cmd_init(&sets[k], co->slots[k], -1, 0);
    dtx__rd_args(&sets[k], "SMEMBERS");
    key.n = 0;
    dtx__rd_key_tombs(&key, co, (int)k);
    dtx__rd_argb(&sets[k], &key);
  }
  if (rc == 0 && nb)
    rc = dtx__rd_run(b, sets, nb, "reading fence tombstones");
  for (size_t k = 0; rc == 0 && k < nb; k++) {
    if (sets[k].reply->type != REDIS_REPLY_ARRAY)
      rc = dtx__rd_bad_reply(sets[k].reply, "reading fence tombstones");
    else
      nt += sets[k].reply->elements;
  }
  if (rc == 0 && nt && !(gets = calloc(nt, sizeof *gets)))
    rc = dtx__err(DTX_ENOMEM, "reading the fence records of %s", coll);
  size_t n = 0;
  for (size_t k = 0; rc == 0 && k < nb; k++)
    for (size_t i = 0; i < sets[k].reply->elements; i++, n++) {
      const redisReply *m = sets[k].reply->element[i];
      dtx__rd_cmd_init(&gets[n], co->slots[k], -1, 0);
      dtx__rd_args(&gets[n], "HGET");
      key.n = 0;
      dtx__rd_key_doc(&key, co, (int)k, m->type == REDIS_REPLY_STRING
                                            ? m->str : "",
                      m->type == REDIS_REPLY_STRING ? m->len : 0);
      dtx__rd_argb(&gets[n], &key);
      dtx__rd_args(&gets[n], "f");
    }
  if (rc == 0 && nt)
    rc = dtx__rd_run(b, gets, nt, "reading fence records");
  for (size_t i = 0; rc == 0 && i < nt; i++) {
    const redisReply *r = gets[i].reply;
    json_t *rec = NULL;
    if (r->type == REDIS_REPLY_NIL)
      continue; /* created again meanwhile */
    if (r->type != REDIS_REPLY_STRING)
      rc = dtx__rd_bad_reply(r, "reading fence records");
    else if (dtx__json_parse(r->str, &rec) < 0)
      rc = dtx__err(DTX_EBACKEND, "redis: a malformed fence record in %s",
                    coll);
    else if (json_array_append_new(arr, rec) < 0)
      rc = dtx__err(DTX_ENOMEM, "reading the fence records of %s", coll);
  }
  dtx__rd_buf_free(&key);
  if (sets)
    dtx__rd_cmds_free(sets, nb);
  if (gets)
    dtx__rd_cmds_free(gets, nt);
  dtx__rd_coll_put(co);
  if (rc < 0)
    json_decref(arr);
  else
    *out = arr;
  return rc;
}
