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
 * Groups.  Several operations on one document in one round (k debits of
 * one hot account) would lose to each other: the first write wins, the
 * others come back with its state and go again -- k rounds, each a
 * compare-and-set that other threads' writes can beat.  Instead, in each
 * round an operation on a document that an earlier operation of the
 * round is writing is evaluated on the state that write leaves (a
 * prediction), and the group's writes go out as ONE compare-and-set from
 * the state the first was evaluated on to the state the last leaves.
 * That is the operations run one after another with nothing in between,
 * a serial order any caller could have seen; each keeps its own result
 * (before, after, or its own error).  If the write lost, every member
 * goes again from the state its reply carries; if it could not be sent
 * or its outcome is unknown, every member gets that outcome.  Decisions
 * taken on a prediction without a write of their own (no match, no
 * change, an error) ride on the group's write in the same way.  Inserts
 * and deletes do not group (a delete waits for the next round), nor do
 * time-bounded writes (one write would carry one member's bounds), nor
 * collections with a unique index: a middle state's unique keys would
 * never be claimed, where a serial run would have checked them.  There,
 * and after an insert, a later write of the same document waits for the
 * next round (B_WAIT, then read from the doc cache): two writes of one
 * document in one round would each fence the other's fresh unique claim
 * (write.c), and both would lose every round until the retry window.
 *
 *   round r: op1 eval(base) ----\
 *            op2 eval(op1's)  ---+--> WRITE base.ver -> op3's body (op3's wp)
 *            op3 eval(op2's) ---/     op1, op2: B_RIDE on op3's outcome
 *
 * Turns.  Groups make one thread's operations on a document one write;
 * several threads of this process writing the same hot document still
 * beat each other's compare-and-sets, and an evaluation that takes long
 * (a group on a large document) can lose every time until the retry
 * window ends.  So an operation whose write lost holds its document's
 * turn (a mutex by key hash, b->turns) in the rounds after: from before
 * its evaluation, on the newest state this process knows (the doc cache),
 * to the write's reply.  A round takes all its turns at once, in index
 * order, and does nothing but its own round trips while holding them, so
 * turns cannot deadlock.  Writers in other processes still race as
 * before; each write stays its own compare-and-set, so turns change who
 * goes first, never what a write does.
 *
 * I1: an operation reaches DTX__FP_BULK_OP once, before its first write.
 * I2: an operation moves to the slow path only while nothing of it was
 *     applied (before its first write, or after a write that lost or met
 *     a stale stamp, both of which change nothing).
 * I3: a group's members are applied together or not at all: only the
 *     last writer sends a write, and every other member's outcome is
 *     taken from that write's. */
#include "store/redis/redis_int.h"

#include "util/deadline.h"
#include "util/err.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

#define FP_SENT "store.bulk_sent"

/* B_WAIT: a write of its document goes first this round, or an insert
 * refused on no state must see its _id (eval); it reads the state in the
 * next round (B_READ). */
enum { B_READ, B_EVAL, B_PREP, B_WRITE, B_CHECK, B_RIDE, B_DONE, B_SLOW,
       B_WAIT };

typedef struct bitem {
  dtx__bulk_op_t *op;
  rd_coll_t *co;
  rd_doc_t cur;
  int state;
  int started; /* reached the fault point (I1) */
  /* Groups (per round; see above). */
  rd_buf_t key;    /* the document's key: set for single-_id modifications */
  uint64_t hash;   /* of key */
  size_t head;     /* index + 1 of its group's first writer (0: none) */
  size_t last;     /* on a head: index + 1 of the group's last writer */
  int grouped;     /* on a head: a later operation was evaluated on it */
  int held;        /* its decision was held (hold()) */
  json_t *pbefore; /* evaluated on a group's prediction: that state */
  int wrc;         /* B_WRITE's outcome: dtx__rd_write_end's code */
  int seen;        /* cur was read, or a lost write's reply carried it */
  int contended;   /* a write of it (or of its group) lost: take turns */
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

/* The key of the item's document (id and bucket set), for the round's
 * map of writers (eval_all) and for turns. */
static void set_key(bitem_t *it) {
  dtx__rd_key_doc(&it->key, it->co, it->cur.bucket, it->cur.id.p,
                  it->cur.id.n);
  it->hash = dtx__rd_hash64(it->key.p, it->key.n);
}

/* Starts an item: its collection, and whether the fast path takes it. */
/* The batch's budget (dtx__rd_bulk) ran out: an operation not sent yet
 * fails without sending anything, instead of adding one more request's
 * timeout_ms to the batch. */
static int budget_gone(const dtx__bulk_op_t *op) {
  if (!dtx__deadline_passed())
    return 0;
  return dtx__err(DTX_EUNAVAILABLE,
                  "redis: the bulk write's budget (%lld ms) ran out before "
                  "this operation on '%s' was sent",
                  (long long)dtx__deadline_budget_ms(), op->m.coll);
}

static void item_start(dtx__backend_t *b, bitem_t *it) {
  dtx__modify_t *m = &it->op->m;
  int insert = it->op->doc != NULL;
  int rc = budget_gone(it->op);
  if (rc < 0) {
    item_fail(it, rc);
    return;
  }
  rc = dtx__rd_coll_get(b, m->coll, insert || (m->upsert && m->update), 0,
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
  dtx__plan_t p;
  if (insert) {
    id = json_object_get(it->op->doc, "_id");
  } else if ((rc = dtx__rd_plan(it->co, m->filter_spec, &p)) == 0) {
    id = dtx__rd_plan_single_id(&p);
    if (id && (rc = dtx__rd_doc_set_id(it->co, &it->cur, id)) < 0)
      id = NULL;
    dtx__plan_free(&p);
    it->state = id ? B_READ : B_SLOW;
    if (id)
      set_key(it);
    return;
  }
  if (rc == 0)
    rc = dtx__rd_doc_set_id(it->co, &it->cur, id);
  if (rc < 0) {
    item_fail(it, rc);
    return;
  }
  it->state = B_EVAL; /* an insert needs no read: its write says */
  set_key(it);
}

/* An outcome decided on a cached state holds only if the state was
 * current: keep it and check the version. */
static void hold(bitem_t *it, int rc, int matched) {
  it->held_rc = rc;
  snprintf(it->held_detail, sizeof it->held_detail, "%s",
           rc < 0 ? dtx_errdetail() : "");
  it->held_matched = matched;
  it->held = 1;
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

/* Starts the write of it->nd over it->cur (a delete leaves the
 * document's fence record, fence.c: dtx__rd_write_begin keeps it). */
static void write_begin(dtx__backend_t *b, bitem_t *it) {
  int rc = dtx__rd_write_begin(b, it->co, &it->cur, it->nd, &it->op->m,
                                &it->wp);
  if (rc == RD_ESTALE)
    it->state = B_SLOW;
  else if (rc < 0)
    item_fail(it, rc);
  else
    it->state = it->wp ? B_WRITE : B_DONE; /* no wp: deleting nothing */
}

/* One evaluation of an item whose state is known: the fault point the
 * first time, then as modify_doc (modify.c) decides -- but with the
 * command it needs built for the round instead of sent. */
static void eval(dtx__backend_t *b, bitem_t *it, int64_t now) {
  dtx__bulk_op_t *op = it->op;
  const dtx__modify_t *m = &op->m;
  int rc;
  if (!it->started) {
    it->started = 1;
    if ((rc = DTX_FAULTPOINT_INNER(DTX__FP_BULK_OP)) < 0) {
      item_fail(it, rc);
      return;
    }
  }
  json_decref(it->nd);
  it->nd = NULL;
  if (op->doc) {
    /* SQLite's order (docs.c, dtx__rd_check_new): a fence tombstone's
     * record taken over, the rules, then the existing _id.  The first
     * attempt goes from no state (an insert reads nothing): a refusal
     * made on it was made without a tombstone's record, so it reads the
     * _id in the next round (B_WAIT: nothing to send in this round's
     * writes) and is judged again on what it finds. */
    if (it->cur.fence && !it->cur.body)
      rc = dtx__fence_revive(NULL, it->co->name, it->cur.fence, op->doc);
    else
      rc = 0;
    if (rc == 0)
      rc = dtx__doc_check_write(it->co->rules, it->co->name, NULL, op->doc,
                                m->bypass);
    if (rc < 0 && !it->seen) {
      it->state = B_WAIT;
      return;
    }
    if (rc == 0 && it->cur.body) /* the insert's write met an existing _id */
      rc = dtx__err_dupid(json_object_get(op->doc, "_id"));
    if (rc < 0) {
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
  it->state = B_PREP; /* the round begins the write (prep_writes) */
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
    it->seen = 1;
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
    /* A group's last writer was evaluated on the prediction, not on the
     * state its write goes from. */
    json_t *before = json_incref(it->pbefore ? it->pbefore : it->cur.body);
    rc = dtx__rd_write_end(b, it->co, &it->cur, it->wp,
                           dtx__rd_write_cmd(it->wp)->reply ? 0 : run_rc,
                           NULL);
    it->wp = NULL;
    it->wrc = rc;
    if (rc == 0 && it->op->doc) {
      json_decref(before);
      json_decref(it->nd);
      it->nd = NULL;
      it->state = B_DONE;
    } else if (rc == 0) {
      item_matched(it, 1, before);
    } else {
      json_decref(before);
      if (rc == RD_ELOST) {
        it->state = B_EVAL; /* the reply carried the current state */
        it->contended = 1;
        it->seen = 1;
      }
      else if (rc == RD_ESTALE)
        it->state = B_SLOW;
      else
        item_fail(it, rc);
    }
    return;
  }
  }
}

/* ---- groups ------------------------------------------------------------------------ */

/* Per round: document key -> index + 1 of the group's head.  Open
 * addressing; cap is a power of two, at least twice the items. */
typedef struct groups {
  size_t *slot;
  size_t cap;
} groups_t;

static size_t *group_slot(groups_t *g, const bitem_t *items,
                          const bitem_t *it) {
  size_t m = g->cap - 1;
  for (size_t h = (size_t)it->hash & m;; h = (h + 1) & m) {
    size_t j = g->slot[h];
    const bitem_t *o = j ? &items[j - 1] : NULL;
    if (!o || (o->hash == it->hash && o->key.n == it->key.n &&
               memcmp(o->key.p, it->key.p, it->key.n) == 0))
      return &g->slot[h];
  }
}

/* A single-_id modification of a collection without a unique index. */
/* A time-bounded write (window.c) does not group either: the group's one
 * write would carry one member's bounds for all of them. */
static int groupable(const bitem_t *it) {
  if (it->op->doc || it->key.n == 0 || dtx__window_any(&it->op->m))
    return 0;
  for (size_t i = 0; i < it->co->nidx; i++)
    if (it->co->idx[i].spec->unique)
      return 0;
  return 1;
}

static void doc_copy(rd_doc_t *d, const rd_doc_t *s) {
  memcpy(d->ver, s->ver, sizeof d->ver);
  memcpy(d->seq, s->seq, sizeof d->seq);
  json_decref(d->body);
  d->body = json_incref(s->body);
  json_decref(d->fence);
  d->fence = json_incref(s->fence);
  d->cached = s->cached;
}

/* Back to B_EVAL with the state in s (a member of a group that lost, or a
 * delete that waits for the next round). */
static void reevaluate(bitem_t *it, const rd_doc_t *s) {
  doc_copy(&it->cur, s);
  json_decref(it->nd);
  it->nd = NULL;
  it->state = B_EVAL;
}

/* Evaluates the round's items in order, each on the state the group of
 * its document leaves so far (see "Groups" above). */
static void eval_all(dtx__backend_t *b, bitem_t *items, size_t n,
                     groups_t *g, int64_t now) {
  if (g->slot)
    memset(g->slot, 0, g->cap * sizeof *g->slot);
  for (size_t i = 0; i < n; i++) {
    bitem_t *it = &items[i];
    if (it->state != B_EVAL)
      continue;
    it->head = it->last = 0;
    it->grouped = it->held = 0;
    json_decref(it->pbefore);
    it->pbefore = NULL;
    int gr = groupable(it);
    size_t *slot = g->slot && it->key.n > 0 ? group_slot(g, items, it) : NULL;
    bitem_t *head = slot && *slot ? &items[*slot - 1] : NULL;
    if (head && (!gr || !groupable(head))) {
      /* No group (an insert, a collection with a unique index), and two
       * writes of one document in one round would fence each other's
       * fresh unique claims (write.c: a claim whose owner does not record
       * it yet is taken over by bumping the owner's version), so both
       * would lose, round after round.  The later one waits for the next
       * round, and reads the state the earlier leaves in the doc cache. */
      it->state = B_WAIT;
      continue;
    }
    if (head) { /* evaluated on the prediction */
      json_t *tip = items[head->last - 1].nd;
      it->pbefore = json_incref(tip);
      json_decref(it->cur.body);
      it->cur.body = json_incref(tip);
      it->cur.cached = 1; /* a decision on it is held (decide) */
    }
    eval(b, it, now);
    if (!slot)
      continue;
    if (!head) {
      if ((it->state == B_PREP && it->nd) ||
          (it->op->doc && it->state == B_WRITE)) { /* a head */
        *slot = i + 1;
        it->head = it->last = i + 1;
      }
    } else if (it->state == B_PREP && it->nd) {
      it->head = *slot;
      head->last = i + 1;
      head->grouped = 1;
    } else if (it->state == B_CHECK) { /* held: rides on the group */
      dtx__rd_cmd_clear(&it->cmd);
      it->head = *slot;
      it->state = B_RIDE;
      head->grouped = 1;
    } else if (it->state == B_PREP) { /* a delete: next round */
      json_decref(it->pbefore);
      it->pbefore = NULL;
      reevaluate(it, &head->cur);
    } /* else done (failed at its fault point) or slow: on its own */
  }
}

/* Begins the writes of the round's B_PREP items: each alone, or, for a
 * group, one write by its last writer from the head's state; the other
 * writers ride on it. */
static void prep_writes(dtx__backend_t *b, bitem_t *items, size_t n) {
  for (size_t i = 0; i < n; i++) {
    bitem_t *it = &items[i];
    if (it->state != B_PREP)
      continue;
    bitem_t *head = it->head ? &items[it->head - 1] : NULL;
    if (!head || !head->grouped) {
      write_begin(b, it);
      continue;
    }
    if (head->last != i + 1) {
      it->state = B_RIDE;
      continue;
    }
    if (it != head)
      doc_copy(&it->cur, &head->cur);
    write_begin(b, it);
    if (it->state == B_WRITE)
      continue;
    /* Not sent (a stale catalog stamp, an error): nothing of the group
     * was applied (I2, I3), and every member goes the way the write
     * went. */
    for (size_t j = 0; j < n; j++) {
      bitem_t *o = &items[j];
      if (o == it || o->head != it->head || o->state != B_RIDE)
        continue;
      if (it->state == B_SLOW || it->op->rc == 0) {
        o->state = B_SLOW;
      } else {
        dtx__err(it->op->rc, "%s", it->op->detail);
        item_fail(o, it->op->rc);
      }
    }
  }
}

/* After the writes: each rider's outcome, from its group's write (I3). */
static void ride_all(bitem_t *items, size_t n) {
  for (size_t i = 0; i < n; i++) {
    bitem_t *it = &items[i];
    if (it->state != B_RIDE)
      continue;
    const bitem_t *x = &items[items[it->head - 1].last - 1];
    if (x->state == B_SLOW) {
      it->state = B_SLOW;
    } else if (x->wrc == RD_ELOST) {
      reevaluate(it, &x->cur); /* x->cur: the state its reply carried */
      it->contended = 1;
    } else if (x->wrc < 0) {
      dtx__err(x->wrc, "%s", x->op->detail);
      item_fail(it, x->wrc);
    } else if (!it->held) { /* a writer: applied */
      /* The head was evaluated on its own state (no prediction). */
      item_matched(it, 1,
                   json_incref(it->pbefore ? it->pbefore : it->cur.body));
    } else { /* its held decision stands: the state it saw was real */
      it->cur.cached = 0;
      if (it->held_rc < 0) {
        dtx__err(it->held_rc, "%s", it->held_detail);
        item_fail(it, it->held_rc);
      } else {
        decide(it, 0, it->held_matched);
      }
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
    rc = DTX_FAULTPOINT_INNER(DTX__FP_BULK_OP);
  }
  dtx__modify_result_clear(&op->res);
  if (rc == 0)
    rc = budget_gone(op);
  if (rc == 0)
    rc = op->doc ? dtx__rd_insert(b, op->m.coll, &op->doc, 1, op->m.bypass,
                                  NULL)
                 : dtx__rd_modify_one(b, &op->m, &op->res);
  if (rc < 0)
    item_fail(it, rc);
  it->state = B_DONE;
}

/* ---- turns ----------------------------------------------------------------------- */

static int turn_cmp(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Takes the turns of the round's contended items, in index order, into
 * held[] (*nheld of them), and brings each such item waiting to be
 * evaluated to the newest state this process knows.  A turn whose wait
 * runs out (the holder's server stopped answering; dtx__rd_turn_lock)
 * is not held: those items go on without it. */
/* A modification waiting for evaluation whose last write lost. */
static int wants_turn(const bitem_t *it) {
  return it->contended && it->key.n > 0 && !it->op->doc &&
         it->state == B_EVAL;
}

static void turns_take(dtx__backend_t *b, bitem_t *items, size_t n,
                       int64_t t0, size_t *held, size_t *nheld) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (wants_turn(&items[i]))
      held[k++] = (size_t)(items[i].hash % RD_TURNS);
  qsort(held, k, sizeof *held, turn_cmp);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (u == 0 || held[u - 1] != held[i])
      held[u++] = held[i];
  size_t k2 = 0;
  for (size_t i = 0; i < u; i++)
    if (dtx__rd_turn_lock(b, held[i], t0) == 0)
      held[k2++] = held[i];
  *nheld = k2;
  /* The writer before us in turn left its state in the cache: our
   * reply's is older.  (A stale one only costs a lost write.) */
  for (size_t i = 0; i < n; i++)
    if (wants_turn(&items[i]))
      (void)dtx__rd_cache_get(b, &items[i].key, &items[i].cur);
}

static void turns_give(dtx__backend_t *b, const size_t *held, size_t nheld) {
  for (size_t i = nheld; i-- > 0;)
    pthread_mutex_unlock(&b->turns[held[i]]);
}

/* Rounds until every fast-path item is done or slow: reads, then
 * evaluations, then writes and checks.  Losers go again; after the
 * URI's retry budget (or the command's deadline) they fail EBUSY, as a
 * single call whose document kept changing does. */
static int rounds(dtx__backend_t *b, bitem_t *items, size_t n) {
  int64_t now = dtx__now_ms(), t0 = dtx__rd_mono_ms();
  /* Without memory for the map nothing groups: the operations of one
   * document then take turns, round by round. */
  groups_t g = {0};
  if (n > 1) {
    for (g.cap = 4; g.cap < 2 * n; g.cap *= 2)
      ;
    g.slot = malloc(g.cap * sizeof *g.slot);
  }
  /* Without memory for it, no turns are taken: writers race as before. */
  size_t *held = malloc(n * sizeof *held), nheld = 0;
  int rc = 0;
  for (int round = 0;; round++) {
    if (held && round > 0)
      turns_take(b, items, n, t0, held, &nheld);
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
      if (items[i].state == B_WAIT)
        items[i].state = B_READ;
      if (items[i].state != B_READ)
        continue;
      /* An insert decides on what it finds without a check (eval): a
       * state read now, never a cached one. */
      if (!items[i].op->doc &&
          dtx__rd_cache_get(b, &items[i].key, &items[i].cur))
        items[i].state = B_EVAL;
      else
        dtx__rd_read_cmd(items[i].co, &items[i].cur, &items[i].cmd);
    }
    rc = round_trip(b, items, n, "reading documents", NULL);
    if (rc == 0) {
      eval_all(b, items, n, &g, now);
      prep_writes(b, items, n);
      rc = round_trip(b, items, n, "writing documents",
                      round == 0 ? FP_SENT : NULL);
    }
    if (rc == 0)
      ride_all(items, n);
    turns_give(b, held, nheld);
    nheld = 0;
    for (size_t i = 0; i < n; i++)
      live += items[i].state == B_EVAL || items[i].state == B_READ ||
              items[i].state == B_WAIT;
    if (rc < 0 || live == 0) {
      for (size_t i = 0; rc < 0 && i < n; i++)
        if (items[i].state != B_DONE && items[i].state != B_SLOW)
          item_fail(&items[i], rc);
      break;
    }
    if (dtx__deadline_expired(t0, b->uri.retry_ms + 1)) {
      for (size_t i = 0; i < n; i++)
        if (items[i].state == B_EVAL || items[i].state == B_READ ||
            items[i].state == B_WAIT)
          item_fail(&items[i],
                    dtx__err(DTX_EBUSY, "redis: document in '%s' kept "
                                        "changing",
                             items[i].op->m.coll));
      break;
    }
    size_t waiting = 0; /* only waiting for this round's own write */
    for (size_t i = 0; i < n; i++)
      waiting += items[i].state == B_WAIT;
    /* Round r has lost r + 1 times: the single path's pause. */
    if (waiting < live)
      dtx__rd_contend_pause(round + 1);
  }
  free(g.slot);
  free(held);
  return rc;
}

int dtx__rd_bulk(dtx__backend_t *b, dtx__bulk_op_t *ops, size_t n) {
  bitem_t *items = calloc(n ? n : 1, sizeof *items);
  if (!items)
    return dtx__err(DTX_ENOMEM, "a bulk write of %zu operations", n);
  /* One budget for the whole batch (util/deadline.h; a soft frame keeps
   * an enclosing command's deadline): the first wait sets it to the end
   * of its own window, and every later wait -- each operation's catalog
   * read, the rounds, the slow path -- stops there.  Without it, against
   * a server that stopped answering, each operation's catalog read waited
   * a window of its own: 4 operations with retry_ms=1000 took 2.8 s. */
  dtx__deadline_frame_t frame;
  dtx__deadline_enter(&frame, 0);
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
    dtx__rd_buf_free(&it->key);
    json_decref(it->pbefore);
    dtx__rd_doc_clear(&it->cur);
    dtx__rd_coll_put(it->co);
  }
  free(items);
  /* Inside a command's frame (frame.open), that frame is the one the
   * waits above armed: it stays armed, or the command's next step would
   * get a window of its own (a transfer against a stopped server took
   * one window per step, 13.8 s for retry_ms=3000: tests/redis/
   * deadline.sh).  Outside any, the frame opened here closes. */
  if (!frame.open)
    dtx__deadline_leave(&frame);
  return 0;
}
