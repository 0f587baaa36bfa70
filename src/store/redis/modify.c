/* modify.c -- modify_one and modify_many of the Redis backend: choose the
 * matching document (or each of them), apply the update in C, and write it
 * with the compare-and-set write (write.c); when that loses, evaluate the
 * current state again.  modify_one upserts when nothing matches. */
#include "store/redis/redis_int.h"

#include "util/deadline.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- modify ------------------------------------------------------------------------------ */

enum { M_DONE, M_NOMATCH };

/* Takes the turn of cur's document (b->turns; bulk.c says why) into
 * *turn (-1 when the wait ran out, dtx__rd_turn_lock), and brings cur to
 * the newest state this process knows: the writer before us in turn left
 * it in the doc cache. */
static void turn_take(dtx__backend_t *b, const rd_coll_t *co, rd_doc_t *cur,
                      int64_t t0, int *turn) {
  rd_buf_t key = {0};
  dtx__rd_doc_key(co, cur, &key);
  int i = (int)(dtx__rd_hash64(key.p, key.n) % RD_TURNS);
  *turn = dtx__rd_turn_lock(b, (size_t)i, t0) == 0 ? i : -1;
  (void)dtx__rd_cache_get(b, &key, cur);
  dtx__rd_buf_free(&key);
}

/* Applies m to the document cur (as last seen) until a compare-and-set
 * succeeds or the document no longer matches.  *outcome says which.
 * After a first loss it holds the document's turn (*turn, taken by
 * turn_take) until it returns: threads of this process writing one hot
 * document go one after another instead of beating each other's writes;
 * while holding it, it does nothing but this document's round trips. */
static int modify_turns(dtx__backend_t *b, const rd_coll_t *co,
                        const dtx__modify_t *m, rd_doc_t *cur, int64_t now,
                        dtx__modify_result_t *res, int *outcome, int *turn) {
  *outcome = M_NOMATCH;
  int64_t t0 = dtx__rd_mono_ms();
  for (int attempt = 0; dtx__rd_keep_trying(b, t0, attempt); attempt++) {
    if (attempt > 0 && *turn < 0)
      turn_take(b, co, cur, t0, turn);
    if (cur->body)
      dtx__docs_examined++;
    int rc;
    /* Gone or no match: an answer read from the cache is checked first. */
    if (!cur->body || !dtx__filter_match(m->filter, cur->body)) {
      if (cur->cached) {
        rc = dtx__rd_doc_round(b, co, cur, 1);
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
        int vr = dtx__rd_doc_round(b, co, cur, 1);
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
    rc = dtx__rd_write(b, co, cur, nd, m, NULL);
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

static int modify_doc(dtx__backend_t *b, const rd_coll_t *co,
                      const dtx__modify_t *m, rd_doc_t *cur, int64_t now,
                      dtx__modify_result_t *res, int *outcome) {
  int turn = -1;
  int rc = modify_turns(b, co, m, cur, now, res, outcome, &turn);
  if (turn >= 0)
    pthread_mutex_unlock(&b->turns[turn]);
  return rc;
}

const json_t *dtx__rd_plan_single_id(const dtx__plan_t *p) {
  if (p->kind != DTX__PLAN_IDS || json_array_size(p->ids) != 1)
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
  return dtx__rd_doc_seq_cmp(a, b) < 0;
}

/* Chooses the document m applies to: *have is 0 when none matches.
 * *by_id is 1 when the filter names one _id: then that document is the
 * only candidate, and its not matching is final. */
static int select_doc(dtx__backend_t *b, rd_coll_t **cop,
                      const dtx__modify_t *m, int spread, rd_doc_t *out,
                      int *have, int *by_id) {
  *have = 0;
  *by_id = 0;
  dtx__plan_t p;
  int rc = dtx__rd_plan(*cop, m->filter_spec, &p);
  if (rc < 0)
    return rc;
  const json_t *id = dtx__rd_plan_single_id(&p);
  if (id) {
    *by_id = 1;
    rd_buf_t key = {0};
    rc = dtx__rd_doc_set_id(*cop, out, id);
    if (rc == 0) {
      dtx__rd_doc_key(*cop, out, &key);
      if (!dtx__rd_cache_get(b, &key, out))
        rc = dtx__rd_doc_round(b, *cop, out, 0);
    }
    dtx__rd_buf_free(&key);
    dtx__plan_free(&p);
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
    dtx__plan_free(&p);
    rc = dtx__rd_plan_sorted(*cop, m->filter_spec, m->sort, &p);
    if (rc == 1)
      rc = dtx__rd_first_matches(b, *cop, &p, m->filter, m->sort, 1, &d, &n);
  } else {
    rc = dtx__rd_first_matches(b, *cop, &p, m->filter, NULL, 1, &d, &n);
  }
  dtx__plan_free(&p);
  if (rc < 0)
    return rc;
  if (rc == 0 &&
      (rc = dtx__rd_matches(b, cop, m->filter_spec, m->filter, &d, &n)) < 0)
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
 * appeared meanwhile (select again).  Over a tombstone it writes on that
 * tombstone's version, the fenced upsert judged by (and the document
 * given) the fence record a deleted document left (fence.c). */
static int upsert(dtx__backend_t *b, rd_coll_t **cop, const dtx__modify_t *m,
                  int64_t now, dtx__modify_result_t *res) {
  json_t *doc;
  int rc = dtx__modify_upsert_doc(m, now, &doc);
  if (rc < 0)
    return rc;
  rd_doc_t cur = {0};
  int seen = 0;
  rc = dtx__rd_doc_set_id(*cop, &cur, json_object_get(doc, "_id"));
  for (int attempt = 0; rc == 0 && attempt < RD_WRITE_ATTEMPTS; attempt++) {
    rc = dtx__rd_check_new(b, *cop, m, &cur, doc, m->bypass, &seen);
    /* Refused, and the read that confirmed it found the _id live and
     * matching: it appeared meanwhile (select again). */
    if (rc < 0 && rc != RD_ESTALE && cur.body &&
        dtx__filter_match(m->filter, cur.body))
      rc = RD_ELOST;
    if (rc == 0)
      rc = dtx__rd_write(b, *cop, &cur, doc, m, NULL);
    if (rc == RD_ELOST && !cur.body) {
      rc = 0;
      seen = 1; /* the reply carried the state */
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
  for (int attempt = 0; dtx__rd_keep_trying(b, t0, attempt); attempt++) {
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
  rc = dtx__rd_matches(b, &co, m->filter_spec, m->filter, &d, &n);
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
      rc = dtx__rd_doc_round(b, co, &d[i], 0);
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
