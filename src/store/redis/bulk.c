/* bulk.c -- the bulk method of the Redis backend: many single-document
 * writes, each its own compare-and-set exactly as modify_one or insert
 * would send it, but sent together, one pipeline per node per round.
 *
 * The fast path covers inserts and modifications whose filter names one
 * _id (the patterns' every step): the document is known (from the doc
 * cache) or read, with all the other reads of the round, in one pipeline
 * per node; the filter and update are evaluated here in C; then every
 * WRITE (and every version check of a decision taken on a cached state)
 * goes out in one pipeline per node.  A compare-and-set that lost comes
 * back with the current state, and only those operations go again in the
 * next round.  What the fast path does not cover -- other filters, an
 * upsert that would insert, a catalog change in the middle (RD_ESTALE) --
 * runs afterwards through the single-operation path, from scratch: an
 * operation leaves the fast path only before anything of it was applied.
 *
 *   read --(cached or READDOC)--> eval --WRITE--> done
 *                                  ^  \--check (cached decision)--> done
 *                                  |        |
 *                                  +--lost--+ (fresh state in the reply)
 *   eval --other filter/upsert/stale--> slow (dtx__rd_modify_one/insert)
 *
 * I1: an operation reaches DTX__FP_BULK_OP once, before its first write.
 * I2: an operation moves to the slow path only while nothing of it was
 *     applied (before its first write, or after a write that lost or met
 *     a stale stamp, both of which change nothing). */
#include "store/redis/redis_int.h"

#include "util/deadline.h"
#include "util/err.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FP_SENT "store.bulk_sent"

enum { B_READ, B_EVAL, B_WRITE, B_CHECK, B_DONE, B_SLOW };

typedef struct bitem {
  dtx__bulk_op_t *op;
  rd_coll_t *co;
  rd_doc_t cur;
  int state;
  int started; /* reached the fault point (I1) */
  rd_wprep_t *wp;
  rd_cmd_t cmd; /* a READDOC or a version check */
  json_t *nd;   /* the new body of the write in flight, or of a no-op */
  /* a decision taken on a cached state, kept until the check confirms it */
  int held_rc;
  char held_detail[sizeof ((dtx__bulk_op_t *)0)->detail];
  int held_matched;
} bitem_t;

static void item_fail(bitem_t *it, int rc) {
  dtx__bulk_op_fail(it->op, rc);
  it->state = B_DONE;
}

/* The operation's outcome when it matched (modified or not). */
static void item_matched(bitem_t *it, int modified, json_t *before) {
  dtx__modify_result_t *r = &it->op->res;
  r->matched = 1;
  r->modified = modified;
  r->before = before;
  r->after = it->nd;
  it->nd = NULL;
  it->state = B_DONE;
}

/* Starts an item: its collection, and whether the fast path takes it. */
static void item_start(dtx__backend_t *b, bitem_t *it) {
  dtx__modify_t *m = &it->op->m;
  int insert = it->op->doc != NULL;
  int rc = dtx__rd_coll_get(b, m->coll, insert || (m->upsert && m->update), 0,
                            &it->co);
  if (rc < 0) {
    item_fail(it, rc);
    return;
  }
  if (!it->co) { /* no collection and nothing to create: nothing matches */
    it->state = B_DONE;
    return;
  }
  const json_t *id = NULL;
  rd_plan_t p;
  if (insert) {
    id = json_object_get(it->op->doc, "_id");
  } else if ((rc = dtx__rd_plan(it->co, m->filter_spec, &p)) == 0) {
    id = dtx__rd_plan_single_id(&p);
    if (id && (rc = dtx__rd_doc_set_id(it->co, &it->cur, id)) < 0)
      id = NULL;
    dtx__rd_plan_free(&p);
    it->state = id ? B_READ : B_SLOW;
    return;
  }
  if (rc == 0)
    rc = dtx__rd_doc_set_id(it->co, &it->cur, id);
  if (rc < 0)
    item_fail(it, rc);
  else
    it->state = B_EVAL; /* an insert needs no read: its write says */
}

/* An outcome decided on a cached state holds only if the state was
 * current: keep it and check the version. */
static void hold(bitem_t *it, int rc, int matched) {
  it->held_rc = rc;
  snprintf(it->held_detail, sizeof it->held_detail, "%s",
           rc < 0 ? dtx_errdetail() : "");
  it->held_matched = matched;
  dtx__rd_verify_cmd(it->co, &it->cur, &it->cmd);
  it->state = B_CHECK;
}

/* Decides an outcome now (a fresh state) or holds it (a cached one). */
static void decide(bitem_t *it, int rc, int matched) {
  if (it->cur.cached) {
    hold(it, rc, matched);
  } else if (rc < 0) {
    item_fail(it, rc);
  } else if (matched) {
    item_matched(it, 0, json_incref(it->cur.body));
  } else {
    json_decref(it->nd);
    it->nd = NULL;
    it->state = B_DONE;
  }
}

/* Starts the write of it->nd over it->cur. */
static void write_begin(dtx__backend_t *b, bitem_t *it) {
  int rc = dtx__rd_write_begin(b, it->co, &it->cur, it->nd, &it->wp);
  if (rc == RD_ESTALE)
    it->state = B_SLOW;
  else if (rc < 0)
    item_fail(it, rc);
  else
    it->state = it->wp ? B_WRITE : B_DONE; /* no wp: deleting nothing */
}

/* One evaluation of an item whose state is known: the fault point the
 * first time, then as modify_doc (docs.c) decides -- but with the
 * command it needs built for the round instead of sent. */
static void eval(dtx__backend_t *b, bitem_t *it, int64_t now) {
  dtx__bulk_op_t *op = it->op;
  const dtx__modify_t *m = &op->m;
  int rc;
  if (!it->started) {
    it->started = 1;
    if ((rc = DTX_FAULTPOINT(DTX__FP_BULK_OP)) < 0) {
      item_fail(it, rc);
      return;
    }
  }
  json_decref(it->nd);
  it->nd = NULL;
  if (op->doc) {
    if (it->cur.body) { /* the insert's write met an existing _id */
      item_fail(it, dtx__err_dupid(json_object_get(op->doc, "_id")));
      return;
    }
    if ((rc = dtx__doc_check_write(it->co->rules, it->co->name, NULL, op->doc,
                                   m->bypass)) < 0) {
      item_fail(it, rc);
      return;
    }
    it->nd = json_incref(op->doc);
    write_begin(b, it);
    return;
  }
  if (it->cur.body)
    dtx__docs_examined++;
  if (!it->cur.body || !dtx__filter_match(m->filter, it->cur.body)) {
    /* An upsert may insert: the single path does that (I2). */
    if (m->upsert && m->update)
      it->state = B_SLOW;
    else
      decide(it, 0, 0);
    return;
  }
  int changed = 1;
  /* The update and the fence (fence.c), as on the single path: decided on
   * this version of the document, and the write is refused if it moved. */
  rc = dtx__modify_apply(m, it->cur.body, now, &it->nd, &changed);
  if (rc == 0 && changed)
    rc = dtx__doc_check_write(it->co->rules, it->co->name, it->cur.body,
                              it->nd, m->bypass);
  if (rc < 0 || !changed) {
    decide(it, rc, 1);
    return;
  }
  write_begin(b, it);
}

/* Reads a round's replies back into the items.  run_rc is the round's
 * code: a command without a reply failed with it. */
static void finish(dtx__backend_t *b, bitem_t *it, int run_rc) {
  int rc;
  switch (it->state) {
  case B_READ:
    rc = it->cmd.reply ? dtx__rd_read_reply(b, it->co, &it->cur, &it->cmd)
                       : run_rc;
    dtx__rd_cmd_clear(&it->cmd);
    if (rc == RD_ESTALE)
      it->state = B_SLOW;
    else if (rc < 0)
      item_fail(it, rc);
    else
      it->state = B_EVAL;
    return;
  case B_CHECK:
    rc = it->cmd.reply ? dtx__rd_verify_reply(b, it->co, &it->cur, &it->cmd)
                       : run_rc;
    dtx__rd_cmd_clear(&it->cmd);
    if (rc == RD_ELOST) {
      it->state = B_EVAL; /* decide again on the fresh state */
    } else if (rc == RD_ESTALE) {
      it->state = B_SLOW;
    } else if (rc < 0) {
      item_fail(it, rc);
    } else if (it->held_rc < 0) {
      dtx__err(it->held_rc, "%s", it->held_detail);
      item_fail(it, it->held_rc);
    } else {
      decide(it, 0, it->held_matched); /* now fresh: final */
    }
    return;
  case B_WRITE: {
    json_t *before = json_incref(it->cur.body);
    rc = dtx__rd_write_end(b, it->co, &it->cur, it->wp,
                           dtx__rd_write_cmd(it->wp)->reply ? 0 : run_rc,
                           NULL);
    it->wp = NULL;
    if (rc == 0 && it->op->doc) {
      json_decref(before);
      json_decref(it->nd);
      it->nd = NULL;
      it->state = B_DONE;
    } else if (rc == 0) {
      item_matched(it, 1, before);
    } else {
      json_decref(before);
      if (rc == RD_ELOST)
        it->state = B_EVAL; /* the reply carried the current state */
      else if (rc == RD_ESTALE)
        it->state = B_SLOW;
      else
        item_fail(it, rc);
    }
    return;
  }
  }
}

/* The command an item sends this round, or NULL. */
static rd_cmd_t *item_cmd(bitem_t *it) {
  if (it->state == B_WRITE)
    return dtx__rd_write_cmd(it->wp);
  return it->state == B_READ || it->state == B_CHECK ? &it->cmd : NULL;
}

/* Sends the commands of every item in state `state` (1 or 2 kinds) as one
 * batch -- one pipeline per node -- and reads the replies back.  The
 * commands are moved into one array for the executor and back after. */
static int round_trip(dtx__backend_t *b, bitem_t *items, size_t n,
                      const char *what, const char *point) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    k += item_cmd(&items[i]) != NULL;
  if (k == 0)
    return 0;
  rd_cmd_t *cmds = calloc(k, sizeof *cmds);
  if (!cmds)
    return dtx__err(DTX_ENOMEM, "redis: %s", what);
  k = 0;
  for (size_t i = 0; i < n; i++) {
    rd_cmd_t *c = item_cmd(&items[i]);
    if (c)
      cmds[k++] = *c;
  }
  int rc = point ? dtx__rd_run_sent(b, cmds, k, what, point)
                 : dtx__rd_run(b, cmds, k, what);
  k = 0;
  for (size_t i = 0; i < n; i++) {
    rd_cmd_t *c = item_cmd(&items[i]);
    if (c)
      *c = cmds[k++];
  }
  free(cmds);
  for (size_t i = 0; i < n; i++)
    if (item_cmd(&items[i]))
      finish(b, &items[i], rc);
  return 0;
}

/* The operations the fast path does not take, each through the single
 * operation's own path, from scratch (I2). */
static void run_slow(dtx__backend_t *b, bitem_t *it) {
  dtx__bulk_op_t *op = it->op;
  int rc = 0;
  if (!it->started) {
    it->started = 1;
    rc = DTX_FAULTPOINT(DTX__FP_BULK_OP);
  }
  dtx__modify_result_clear(&op->res);
  if (rc == 0)
    rc = op->doc ? dtx__rd_insert(b, op->m.coll, &op->doc, 1, op->m.bypass,
                                  NULL)
                 : dtx__rd_modify_one(b, &op->m, &op->res);
  if (rc < 0)
    item_fail(it, rc);
  it->state = B_DONE;
}

/* Rounds until every fast-path item is done or slow: reads, then
 * evaluations, then writes and checks.  Losers go again; after the
 * URI's retry budget (or the command's deadline) they fail EBUSY, as a
 * single call whose document kept changing does. */
static int rounds(dtx__backend_t *b, bitem_t *items, size_t n) {
  int64_t now = dtx__now_ms(), t0 = dtx__rd_mono_ms();
  uint64_t rnd = (uint64_t)t0 * 0x9e3779b97f4a7c15ULL ^ (uintptr_t)items;
  for (int round = 0;; round++) {
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
      if (items[i].state != B_READ)
        continue;
      rd_buf_t key = {0};
      dtx__rd_key_doc(&key, items[i].co, items[i].cur.bucket,
                      items[i].cur.id.p, items[i].cur.id.n);
      if (dtx__rd_cache_get(b, &key, &items[i].cur))
        items[i].state = B_EVAL;
      else
        dtx__rd_read_cmd(items[i].co, &items[i].cur, &items[i].cmd);
      dtx__rd_buf_free(&key);
    }
    int rc = round_trip(b, items, n, "reading documents", NULL);
    for (size_t i = 0; rc == 0 && i < n; i++)
      if (items[i].state == B_EVAL)
        eval(b, &items[i], now);
    if (rc == 0)
      rc = round_trip(b, items, n, "writing documents",
                      round == 0 ? FP_SENT : NULL);
    for (size_t i = 0; i < n; i++)
      live += items[i].state == B_EVAL || items[i].state == B_READ;
    if (rc < 0 || live == 0) {
      for (size_t i = 0; rc < 0 && i < n; i++)
        if (items[i].state != B_DONE && items[i].state != B_SLOW)
          item_fail(&items[i], rc);
      return rc;
    }
    if (dtx__deadline_expired(t0, b->uri.retry_ms + 1)) {
      for (size_t i = 0; i < n; i++)
        if (items[i].state == B_EVAL || items[i].state == B_READ)
          item_fail(&items[i],
                    dtx__err(DTX_EBUSY, "redis: document in '%s' kept "
                                        "changing",
                             items[i].op->m.coll));
      return 0;
    }
    if (round >= 2) {
      /* Writers of one hot document take turns (docs.c's keep_trying). */
      rnd = rnd * 6364136223846793005ULL + 1442695040888963407ULL;
      int shift = round - 2 < 7 ? round - 2 : 7;
      long us = (long)((rnd >> 33) % (uint64_t)(50L << shift)) + 1;
      struct timespec ts = {0, us * 1000L};
      nanosleep(&ts, NULL);
    }
  }
}

int dtx__rd_bulk(dtx__backend_t *b, dtx__bulk_op_t *ops, size_t n) {
  bitem_t *items = calloc(n ? n : 1, sizeof *items);
  if (!items)
    return dtx__err(DTX_ENOMEM, "a bulk write of %zu operations", n);
  for (size_t i = 0; i < n; i++) {
    items[i].op = &ops[i];
    if (ops[i].rc < 0)
      items[i].state = B_DONE;
    else
      item_start(b, &items[i]);
  }
  (void)rounds(b, items, n);
  for (size_t i = 0; i < n; i++) {
    bitem_t *it = &items[i];
    if (it->wp) /* a round that failed before sending it */
      (void)dtx__rd_write_end(b, it->co, &it->cur, it->wp, it->op->rc, NULL);
    if (it->state == B_SLOW)
      run_slow(b, it);
    if (it->op->rc < 0)
      dtx__modify_result_clear(&it->op->res);
    json_decref(it->nd);
    dtx__rd_cmd_clear(&it->cmd);
    dtx__rd_doc_clear(&it->cur);
    dtx__rd_coll_put(it->co);
  }
  free(items);
  return 0;
}
