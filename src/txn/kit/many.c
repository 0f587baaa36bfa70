/* many.c -- the kit's batch driver (kit.h, "the batch driver"): one
 * protocol run for many items at once -- dtx_transfer_execute_many and
 * the transfer worker's batch (transfer/many.c), dtx_order_confirm_many
 * (order/many.c), dtx_ledger_post_many (ledger/many.c).  The pattern
 * gives a table of rounds; the kit owns the items, their lanes, the split
 * queue, the key scheduler and the results.
 *
 *   init each item --> pass: [round 1] [round 2] ... [round R]
 *                      (with keys: again?) --> split queue --> results
 *   lanes:  STEP (in the lockstep) --split--> SPLIT --resume--> DONE
 *              \-----------------end / fail--------------------/
 *
 * K1 An item takes part in at most one round at a time with at most
 *    `width` steps, and a round holds only steps of items in the lockstep
 *    (the driver builds them from its participants, skipping any that
 *    ended or split meanwhile).
 * K2 Leaving the lockstep never undoes a step: a split item is where its
 *    last applied step left it, which is what the pattern's alone path
 *    (and its recovery, after a crash) starts from; it is resumed after
 *    every round, in index order (DTX__SPLIT_LAST ones after the rest),
 *    so the lockstep never waits for it.
 * K3 Every item ends exactly once: its result is set by dtx__batch_end
 *    (or _fail, _end_rest), which takes it out of every lane; an item
 *    not ended when the driver finishes is a bug, reported as one.
 * K4 With keys, the items of one pass share no key, and the items of
 *    one key end in index order: a pass takes exactly the items heading
 *    the queue of each of their keys.
 *
 * A round's steps are ONE dtx__kit_run (or dtx__kit_move_many), so each
 * step keeps its fault point, its retry and its lost-reply judgement
 * (step.c): a batch changes how many round trips and commits the steps
 * cost, never what any one of them does (docs/batching.md). */
#include "txn/kit/kit.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "util/err.h"

/* ---- the results --------------------------------------------------------------- */

static dtx__many_res_t *res_at(const void *results, size_t i, size_t size) {
  return (dtx__many_res_t *)((char *)results + i * size);
}

void dtx__many_clear(void *results, size_t n, size_t size) {
  for (size_t i = 0; results && i < n; i++) {
    dtx__many_res_t *r = res_at(results, i, size);
    free(r->detail);
    json_decref(r->doc);
    memset(r, 0, size);
  }
}

/* A call refused as a whole: the error (fmt) in every result. */
static int refuse(void *results, size_t n, size_t size, const char *fmt,
                  ...) __attribute__((format(printf, 4, 5)));
static int refuse(void *results, size_t n, size_t size, const char *fmt,
                  ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dtx__err_clear();
  int rc = dtx__err(DTX_EINVAL, "%s", msg);
  for (size_t i = 0; results && i < n; i++) {
    res_at(results, i, size)->rc = rc;
    res_at(results, i, size)->detail = strdup(dtx_errdetail());
  }
  return rc;
}

/* 0 when every rc is 0, else the first failure's, summarised. */
static int summary(const void *results, size_t n, size_t size,
                   const char *noun) {
  size_t failed = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (res_at(results, i, size)->rc && failed++ == 0)
      first = i;
  dtx__err_clear();
  if (!failed)
    return 0;
  const dtx__many_res_t *f = res_at(results, first, size);
  return dtx__err(f->rc, "%zu of %zu %s failed; first: #%zu: %s", failed, n,
                  noun, first, f->detail ? f->detail : dtx_strerror(f->rc));
}

/* ---- the key scheduler (K4) ------------------------------------------------------ */

/* A key's queue: the items naming it, in index order; head: the first
 * not ended.  A pass looks only at items that may just have come to the
 * head of their queues (those of the last pass that did not end, and the
 * next in each queue one of them left), never at every waiting one: a
 * hot batch (a pass per item) would otherwise scan n items per pass, n^2
 * in all -- 16,000 ledger entries on one account took 12.3 s, against
 * 3.0 s posted one at a time. */
typedef struct queue {
  size_t *q; /* item indexes, ascending (in sched_t's qbuf) */
  size_t n, head;
} queue_t;

typedef struct sched {
  queue_t *queues;
  size_t nqueues;
  size_t *in, *off; /* item i's queues: in[off[i] .. off[i + 1]) */
  size_t *qbuf;     /* every queue's q, one after the other */
  size_t *cand;     /* may head all its queues (each once: mark) */
  size_t ncand;
  char *mark;
  size_t *picked, npicked; /* the pass's items */
} sched_t;

struct dtx__batch_keys {
  sched_t *s;
  json_t *names; /* key -> its queue's index */
  size_t count;  /* counting pass: how many keys in all */
  size_t pos;    /* filling pass: the next slot of in[] */
  int fill;
};

int dtx__batch_key(dtx__batch_keys_t *k, char kind, const char *name) {
  if (!k->fill) {
    k->count++;
    return 0;
  }
  char key[136];
  snprintf(key, sizeof key, "%c%s", kind, name); /* names <= 128 */
  json_t *slot = json_object_get(k->names, key);
  size_t at = slot ? (size_t)json_integer_value(slot) : k->s->nqueues;
  if (!slot) {
    if (json_object_set_new(k->names, key, json_integer((json_int_t)at)))
      return DTX_ENOMEM;
    k->s->nqueues++;
  }
  k->s->queues[at].n++;
  k->s->in[k->pos++] = at;
  return 0;
}

static void sched_free(sched_t *s) {
  if (!s)
    return;
  free(s->queues);
  free(s->in);
  free(s->off);
  free(s->qbuf);
  free(s->cand);
  free(s->mark);
  free(s->picked);
  free(s);
}

static void add_cand(sched_t *s, size_t i) {
  if (!s->mark[i]) {
    s->mark[i] = 1;
    s->cand[s->ncand++] = i;
  }
}

/* The queues of the items not ended: the keys counted, then filled into
 * one buffer (a queue per account and id of a big batch would otherwise
 * be as many small allocations); every item heading all its queues is a
 * candidate. */
static int sched_init(dtx__batch_t *b) {
  sched_t *s = calloc(1, sizeof *s);
  dtx__batch_keys_t k = {.s = s};
  size_t n = b->n, i, j;
  int rc = s ? 0 : DTX_ENOMEM;
  for (i = 0; rc == 0 && i < n; i++)
    if (dtx__batch_live(dtx__batch_item(b, i)))
      rc = b->def->keys(dtx__batch_item(b, i), &k);
  k.names = json_object();
  if (rc == 0) {
    s->queues = calloc(k.count + 1, sizeof *s->queues);
    s->in = malloc((k.count + 1) * sizeof *s->in);
    s->off = malloc((n + 1) * sizeof *s->off);
    s->qbuf = malloc((k.count + 1) * sizeof *s->qbuf);
    s->cand = malloc((n + 1) * sizeof *s->cand);
    s->mark = calloc(n + 1, 1);
    s->picked = malloc((n + 1) * sizeof *s->picked);
    if (!k.names || !s->queues || !s->in || !s->off || !s->qbuf ||
        !s->cand || !s->mark || !s->picked)
      rc = DTX_ENOMEM;
  }
  k.fill = 1;
  for (i = 0; rc == 0 && i < n; i++) {
    s->off[i] = k.pos;
    if (dtx__batch_live(dtx__batch_item(b, i)))
      rc = b->def->keys(dtx__batch_item(b, i), &k);
  }
  json_decref(k.names);
  b->sched = s;
  if (rc)
    return rc;
  s->off[n] = k.pos;
  size_t pos = 0;
  for (i = 0; i < s->nqueues; i++) { /* carve, then fill */
    s->queues[i].q = s->qbuf + pos;
    pos += s->queues[i].n;
    s->queues[i].n = 0;
  }
  for (i = 0; i < n; i++)
    for (j = s->off[i]; j < s->off[i + 1]; j++) {
      queue_t *l = &s->queues[s->in[j]];
      l->q[l->n++] = i;
    }
  for (i = 0; i < n; i++) { /* heads of all its queues, all heads at 0 */
    int head = dtx__batch_live(dtx__batch_item(b, i));
    for (j = s->off[i]; head && j < s->off[i + 1]; j++)
      head = s->queues[s->in[j]].q[0] == i;
    if (head)
      add_cand(s, i);
  }
  return 0;
}

/* Skips the ended items at the head of queue l. */
static void advance(const dtx__batch_t *b, queue_t *l) {
  while (l->head < l->n && !dtx__batch_live(dtx__batch_item(b, l->q[l->head])))
    l->head++;
}

static int heads_all(const dtx__batch_t *b, sched_t *s, size_t i) {
  for (size_t j = s->off[i]; j < s->off[i + 1]; j++) {
    queue_t *l = &s->queues[s->in[j]];
    advance(b, l);
    if (l->head >= l->n || l->q[l->head] != i)
      return 0;
  }
  return 1;
}

static int by_index(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* The pass's items, in index order: the candidates heading all their
 * queues.  The first item not ended always does, so every pass ends an
 * item or meets a lost race.  Returns how many. */
static size_t pick(dtx__batch_t *b) {
  sched_t *s = b->sched;
  s->npicked = 0;
  qsort(s->cand, s->ncand, sizeof *s->cand, by_index);
  for (size_t c = 0; c < s->ncand; c++) {
    size_t i = s->cand[c];
    s->mark[i] = 0;
    if (dtx__batch_live(dtx__batch_item(b, i)) && heads_all(b, s, i))
      s->picked[s->npicked++] = i;
  }
  s->ncand = 0;
  return s->npicked;
}

/* After a pass: an item that did not end is a candidate again; for one
 * that ended, the next item of each of its queues may now head them all. */
static void sched_next(dtx__batch_t *b) {
  sched_t *s = b->sched;
  for (size_t m = 0; m < s->npicked; m++) {
    size_t i = s->picked[m];
    if (dtx__batch_live(dtx__batch_item(b, i))) {
      add_cand(s, i);
      continue;
    }
    for (size_t j = s->off[i]; j < s->off[i + 1]; j++) {
      queue_t *l = &s->queues[s->in[j]];
      advance(b, l);
      if (l->head < l->n)
        add_cand(s, l->q[l->head]);
    }
  }
}

/* ---- the items ------------------------------------------------------------------- */

void *dtx__batch_item(const dtx__batch_t *b, size_t i) {
  return b->items + i * b->def->isize;
}

int dtx__batch_live(const void *it) {
  return ((const dtx__bitem_t *)it)->lane == DTX__LANE_STEP;
}

void dtx__batch_end(dtx__batch_t *b, void *it, int rc, json_t *doc) {
  dtx__bitem_t *h = it;
  dtx__many_res_t *r = res_at(b->results, h->i, b->rsize);
  const char *d = dtx_errdetail();
  if (h->lane == DTX__LANE_DONE) { /* K3: never twice */
    json_decref(doc);
    return;
  }
  r->rc = rc;
  r->detail = rc ? strdup(d && *d ? d : dtx_strerror(rc)) : NULL;
  r->doc = doc;
  h->lane = DTX__LANE_DONE;
  b->left--;
}

void dtx__batch_fail(dtx__batch_t *b, void *it, int rc, const char *detail) {
  json_t *doc = NULL;
  if (detail)
    (void)dtx__err(rc, "%s", detail);
  if (b->def->fail)
    rc = b->def->fail(b, it, rc, &doc);
  dtx__batch_end(b, it, rc, doc);
}

void dtx__batch_split(dtx__batch_t *b, void *it, int resume) {
  dtx__bitem_t *h = it;
  int rc = b->def->split ? dtx__kit_point(b->def->split, NULL) : 0;
  h->resume = resume;
  h->lane = DTX__LANE_SPLIT;
  if (rc) /* as a failed step: left where it stands, for recovery */
    dtx__batch_fail(b, it, rc, NULL);
}

void dtx__batch_end_rest(dtx__batch_t *b, int rc) {
  char *d = strdup(dtx_errdetail() ? dtx_errdetail() : "");
  for (size_t i = 0; i < b->n; i++) {
    void *it = dtx__batch_item(b, i);
    if (((dtx__bitem_t *)it)->lane == DTX__LANE_DONE)
      continue;
    if (d && *d)
      (void)dtx__err(rc, "%s", d);
    dtx__batch_end(b, it, rc, NULL);
  }
  free(d);
}

/* ---- a round ------------------------------------------------------------------------ */

/* The round's items: with keys the pass's (already in b->at), else every
 * item in the lockstep. */
static void participants(dtx__batch_t *b) {
  size_t k = 0;
  if (b->sched) {
    sched_t *s = b->sched;
    for (size_t j = 0; j < s->npicked; j++)
      if (dtx__batch_live(dtx__batch_item(b, s->picked[j])))
        b->at[k++] = s->picked[j];
  } else {
    for (size_t i = 0; i < b->n; i++)
      if (dtx__batch_live(dtx__batch_item(b, i)))
        b->at[k++] = i;
  }
  b->k = k;
}

static void run_round(dtx__batch_t *b, const dtx__round_t *r) {
  size_t nops = 0, j;
  participants(b);
  if (r->all) {
    r->all(b);
    return;
  }
  for (j = 0; j < b->k; j++) {
    dtx__bitem_t *h = dtx__batch_item(b, b->at[j]);
    h->op = nops;
    h->nops = 0;
    if (r->move) { /* one move each */
      memset(&b->m[nops], 0, sizeof b->m[nops]);
      b->docs[nops] = r->move(b, h, &b->m[nops]);
      h->nops = 1;
    } else {
      h->nops = r->build(b, h, &b->ops[nops]);
    }
    nops += (size_t)h->nops;
  }
  if (r->move) {
    (void)dtx__kit_move_many(b->ex, r->kind, b->docs, b->m, nops, b->outs,
                             b->rcs, b->details);
    for (j = 0; j < nops; j++) /* the moves' outcomes, as steps */
      b->ops[j] = (dtx__kit_op_t){.rc = b->rcs[j], .out = b->outs[j],
                                  .detail = b->details[j],
                                  .matched = b->rcs[j] == 0};
  } else if (nops) {
    (void)dtx__kit_run(b->ex, b->ops, nops);
  }
  for (j = 0; j < b->k; j++) {
    dtx__bitem_t *h = dtx__batch_item(b, b->at[j]);
    dtx__kit_op_t *o = &b->ops[h->op];
    int failed = 0;
    if (h->lane != DTX__LANE_STEP || h->nops == 0)
      continue; /* it split or ended while its steps were built */
    for (int s = 0; (r->flags & DTX__ROUND_FAIL) && s < h->nops; s++)
      if (o[s].rc && o[s].rc != DTX_ENOMATCH) {
        dtx__batch_fail(b, h, o[s].rc, o[s].detail);
        failed = 1;
        break;
      }
    if (!failed && r->done) {
      int rc = dtx__kit_point(r->done, NULL);
      if (rc) {
        dtx__batch_fail(b, h, rc, NULL);
        failed = 1;
      }
    }
    if (!failed && r->back)
      r->back(b, h, o);
  }
  dtx__kit_ops_clear(b->ops, nops);
}

/* ---- the driver ------------------------------------------------------------------ */

void dtx__batch_drive(dtx__exec_t *ex, const dtx__batch_def_t *def,
                      const void *reqs, size_t n, void *ctx, void *results,
                      size_t rsize) {
  dtx__batch_t b = {.ex = ex, .def = def, .reqs = reqs, .n = n, .ctx = ctx,
                    .results = results, .rsize = rsize};
  size_t width = 1, i;
  for (const dtx__round_t *r = def->rounds; r->all || r->build || r->move;
       r++)
    width = (size_t)r->width > width ? (size_t)r->width : width;
  memset(results, 0, n * rsize);
  b.items = calloc(n ? n : 1, def->isize);
  b.at = calloc(n ? n : 1, sizeof *b.at);
  b.ops = calloc(n ? n * width : 1, sizeof *b.ops);
  b.docs = calloc(n ? n : 1, sizeof *b.docs);
  b.m = calloc(n ? n : 1, sizeof *b.m);
  b.outs = calloc(n ? n : 1, sizeof *b.outs);
  b.rcs = calloc(n ? n : 1, sizeof *b.rcs);
  b.details = calloc(n ? n : 1, sizeof *b.details);
  if (!b.items || !b.at || !b.ops || !b.docs || !b.m || !b.outs || !b.rcs ||
      !b.details) {
    (void)dtx__err(DTX_ENOMEM, "a batch of %zu %s: out of memory", n,
                   def->noun);
    for (i = 0; i < n; i++) {
      dtx__many_res_t *r = res_at(results, i, rsize);
      r->rc = DTX_ENOMEM;
      r->detail = strdup(dtx_errdetail());
    }
    goto out;
  }
  b.left = n;
  for (i = 0; i < n; i++) {
    dtx__bitem_t *h = dtx__batch_item(&b, i);
    h->i = i;
    def->init(&b, h, i);
  }
  if (def->keys && b.left && sched_init(&b))
    dtx__batch_end_rest(&b, dtx__err(DTX_ENOMEM, "a batch of %zu %s: out "
                                     "of memory", n, def->noun));
  for (b.pass = 0; b.left; b.pass++) {
    if (b.sched && pick(&b) == 0) {
      dtx__batch_end_rest(&b, dtx__err(DTX_EBACKEND, "a batch of %s: no "
                                       "item could go (a bug: the first "
                                       "always can)", def->noun));
      break;
    }
    for (const dtx__round_t *r = def->rounds; r->all || r->build || r->move;
         r++)
      run_round(&b, r);
    if (!b.sched)
      break;
    sched_next(&b);
    if (!b.left || !def->again || !def->again(&b))
      break;
  }
  /* The split queue (K2): in index order, the DTX__SPLIT_LAST ones last. */
  for (int last = 0; last < 2; last++)
    for (i = 0; i < n; i++) {
      dtx__bitem_t *h = dtx__batch_item(&b, i);
      if (h->lane == DTX__LANE_SPLIT &&
          ((h->resume & DTX__SPLIT_LAST) != 0) == last)
        def->resume(&b, h);
    }
  for (i = 0; i < n; i++) { /* K3 */
    dtx__bitem_t *h = dtx__batch_item(&b, i);
    if (h->lane != DTX__LANE_DONE)
      dtx__batch_end(&b, h, dtx__err(DTX_EBACKEND, "a batch of %s: item "
                                     "#%zu was never ended (a bug)",
                                     def->noun, i), NULL);
    if (def->clear)
      def->clear(h);
  }
out:
  sched_free(b.sched);
  free(b.items);
  free(b.at);
  free(b.ops);
  free(b.docs);
  free(b.m);
  free(b.outs);
  free(b.rcs);
  free(b.details);
}

int dtx__many_run(const dtx__many_t *c) {
  const dtx__batch_def_t *def = c->def;
  if (c->results)
    memset(c->results, 0, c->n * c->rsize);
  if (!c->st || !c->reqs || !c->results)
    return refuse(c->results, c->n, c->rsize, "%s: %s is NULL", c->fn,
                  !c->st ? "st" : !c->reqs ? def->reqs_name : "results");
  if (c->n == 0) {
    dtx__err_clear();
    return 0;
  }
  dtx__exec_t ex;
  dtx__call_t call;
  dtx__exec_from(&ex, c->st, c->opts);
  dtx__call_begin(&call, ex.deadline_ms);
  if (dtx__exec_check(&ex)) { /* a bad owner: refused before any item */
    char msg[200];
    snprintf(msg, sizeof msg, "%s", dtx_errdetail());
    return dtx__call_end(&call, refuse(c->results, c->n, c->rsize, "%s: %s",
                                       c->fn, msg));
  }
  dtx__batch_drive(&ex, def, c->reqs, c->n, c->ctx, c->results, c->rsize);
  return dtx__call_end(&call,
                       summary(c->results, c->n, c->rsize, def->noun));
}
