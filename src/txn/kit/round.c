/* round.c -- the kit's batched steps: the same step of many items goes
 * to the store as one dtx_store_bulk_write (kit.h, "batched steps").
 *
 * A pattern that drives many items at once (the transfer batch,
 * transfer/batch.c) hands each round's steps -- inserts, conditional
 * updates, fenced moves -- to dtx__kit_run, which is the batch form of
 * the single steps in kit.c: the same fault point per step, the same retry
 * policy per step (a transient failure goes again alone, under the call's
 * one deadline), the same "was it my own write" judgement after a lost
 * reply.  The store makes each step exactly its single call
 * (docs/batching.md), so a batch only changes how many round trips and
 * commits the steps cost, never what any one of them does. */
#include "txn/kit/kit.h"
#include "txn/kit/kit_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h" /* dtx__rules_step_enter */
#include "util/err.h"

/* The step's result as the single store call: one operation alone goes
 * as that call (a bulk of one would cost the Redis fast path a read
 * before its compare-and-set), several as one bulk write. */
static void run_one(dtx_store_t *st, const dtx_bulk_op_t *op,
                    dtx_bulk_result_t *res) {
  memset(res, 0, sizeof *res);
  dtx__err_clear();
  switch (op->kind) {
  case DTX_BULK_INSERT:
    res->rc = dtx_store_insert(st, op->coll, op->doc, NULL);
    break;
  case DTX_BULK_UPDATE_ONE: {
    dtx_update_result_t u = {0};
    res->rc = dtx_store_update(st, op->coll, op->filter, op->update,
                               op->update_opts, &u);
    res->matched = u.matched;
    res->modified = u.modified;
    json_decref(u.upserted_id);
    break;
  }
  default:
    res->rc = dtx_store_find_one_and_update(st, op->coll, op->filter,
                                            op->update, op->fam_opts,
                                            &res->doc);
  }
  if (res->rc) {
    const char *d = dtx_errdetail();
    res->detail = strdup(d && *d ? d : dtx_strerror(res->rc));
  }
}

/* Records a failed attempt of op: its rc and a copy of its detail. */
static void set_failed(dtx__kit_op_t *op, int rc, const char *detail) {
  free(op->detail);
  op->detail = NULL;
  op->rc = rc;
  if (rc && rc != DTX_ENOMATCH)
    op->detail = strdup(detail && *detail ? detail : dtx_strerror(rc));
}

int dtx__kit_run(dtx__exec_t *ex, dtx__kit_op_t *ops, size_t n) {
  size_t i;
  dtx__retry_t *r = calloc(n ? n : 1, sizeof *r);
  char *pending = calloc(n ? n : 1, 1), *lost = calloc(n ? n : 1, 1);
  size_t *idx = calloc(n ? n : 1, sizeof *idx);
  dtx_bulk_op_t *bops = calloc(n ? n : 1, sizeof *bops);
  dtx_bulk_result_t *res = calloc(n ? n : 1, sizeof *res);
  int nomem = !r || !pending || !lost || !idx || !bops || !res;
  for (i = 0; i < n; i++) {
    dtx__kit_op_t *o = &ops[i];
    o->matched = o->unsure = 0;
    o->out = NULL;
    o->detail = NULL;
    int ok = o->kind == DTX_BULK_INSERT ? o->doc != NULL
                                         : (o->filter && o->update);
    o->rc = nomem || !ok ? DTX_ENOMEM : 0;
    if (!nomem)
      pending[i] = o->rc == 0;
  }
  /* An executor whose owner the rule refused writes nothing. */
  int bad = nomem ? 0 : dtx__exec_check(ex);
  for (i = 0; bad && i < n; i++)
    if (pending[i]) {
      set_failed(&ops[i], bad, dtx_errdetail());
      pending[i] = 0;
    }
  while (!nomem && !bad) {
    size_t k = 0;
    for (i = 0; i < n; i++) {
      dtx__kit_op_t *o = &ops[i];
      if (!pending[i])
        continue;
      /* Its own fault point just before it joins; "lost" is per step. */
      int f = DTX_FAULTPOINT(o->point);
      lost[i] = f == 0 && dtx__fault_lost(0) != 0;
      if (f) {
        set_failed(o, f, dtx_errdetail());
        continue;
      }
      bops[k] = (dtx_bulk_op_t){.kind = o->kind,
                                .coll = o->coll,
                                .doc = o->doc,
                                .filter = o->filter,
                                .update = o->update,
                                .fam_opts = &o->fam};
      idx[k++] = i;
    }
    /* the round's steps are one pattern's: the first names them */
    const char *step = dtx__rules_step_enter(k ? ops[idx[0]].point : NULL);
    if (k == 1)
      run_one(ex->st, &bops[0], &res[0]);
    else if (k > 1)
      (void)dtx_store_bulk_write(ex->st, bops, k, res);
    dtx__rules_step_leave(step);
    for (size_t j = 0; j < k; j++) {
      dtx__kit_op_t *o = &ops[idx[j]];
      int rc = res[j].rc;
      json_decref(o->out);
      o->out = NULL;
      if (rc == 0 && lost[idx[j]]) {
        rc = dtx__err(DTX_EUNAVAILABLE, "injected lost reply at fault point "
                      "%s (the write was applied)", o->point);
        set_failed(o, rc, dtx_errdetail());
      } else {
        set_failed(o, rc, res[j].detail);
      }
      if (rc && rc != DTX_ENOMATCH && rc != DTX_EDUPKEY)
        o->unsure = 1;
      o->matched = rc == 0 && (o->kind != DTX_BULK_UPDATE_ONE ||
                               res[j].matched > 0);
      if (rc == 0 && o->kind == DTX_BULK_FIND_ONE_AND_UPDATE)
        o->out = json_incref(res[j].doc);
    }
    if (k)
      dtx_bulk_results_clear(res, k);
    /* Who goes again: a transient failure, under the one retry policy.
     * The round pauses once, for the longest backoff among them: a pause
     * per step would add up over a wide round (128 steps of a batch of 64
     * transfers, all failing while the store is away, would sleep 128
     * times the backoff before their next attempt). */
    int again = 0;
    int64_t pause = 0, p;
    for (i = 0; i < n; i++) {
      if (!pending[i])
        continue;
      int rc = ops[i].rc;
      /* The deadline's words wrap this step's own detail, not whatever
       * the step before it left in the thread's. */
      if (ops[i].detail)
        (void)dtx__err(rc, "%s", ops[i].detail);
      else
        dtx__err_clear();
      pending[i] = (char)dtx__retry_next(&r[i], &rc, ops[i].point, &p);
      if (rc != ops[i].rc) /* the deadline stopped it: its own words */
        set_failed(&ops[i], rc, dtx_errdetail());
      again |= pending[i];
      pause = p > pause ? p : pause;
    }
    if (!again)
      break;
    dtx__deadline_sleep_ms(pause);
  }
  free(r);
  free(pending);
  free(lost);
  free(idx);
  free(bops);
  free(res);
  for (i = 0; i < n; i++) {
    json_decref(ops[i].doc);
    json_decref(ops[i].filter);
    json_decref(ops[i].update);
    ops[i].doc = ops[i].filter = ops[i].update = NULL;
  }
  dtx__err_clear();
  for (i = 0; i < n; i++)
    if (ops[i].rc && ops[i].rc != DTX_ENOMATCH)
      return ops[i].detail ? dtx__err(ops[i].rc, "%s", ops[i].detail)
                           : ops[i].rc;
  return 0;
}

void dtx__kit_ops_clear(dtx__kit_op_t *ops, size_t n) {
  for (size_t i = 0; ops && i < n; i++) {
    json_decref(ops[i].out);
    free(ops[i].detail);
    ops[i].out = NULL;
    ops[i].detail = NULL;
  }
}

int dtx__kit_move_many(dtx__exec_t *ex, const dtx__kind_t *k,
                       const json_t *const *docs, const dtx__move_t *m,
                       size_t n, json_t **outs, int *rcs, char **details) {
  dtx__kit_op_t *ops = calloc(n ? n : 1, sizeof *ops);
  size_t *idx = calloc(n ? n : 1, sizeof *idx), nb = 0, i;
  char **why = details ? details : calloc(n ? n : 1, sizeof *why);
  int first = 0;
  for (i = 0; i < n; i++) {
    outs[i] = NULL;
    rcs[i] = 0;
    if (details)
      details[i] = NULL;
  }
  if (!ops || !idx || !why) {
    for (i = 0; i < n; i++) {
      json_decref(m[i].cond);
      json_decref(m[i].set);
      json_decref(m[i].unset);
      rcs[i] = DTX_ENOMEM;
    }
    free(ops);
    free(idx);
    if (!details)
      free(why);
    return DTX_ENOMEM;
  }
  /* Items whose move cannot even be written (no state, no epoch) fail
   * alone, before the round; the rest go together. */
  for (i = 0; i < n; i++) {
    json_t *filter = NULL, *upd = NULL;
    int rc = dtx__kit_move_op(ex, k, docs[i], &m[i], &filter, &upd);
    if (rc) {
      rcs[i] = rc;
      why[i] = strdup(dtx_errdetail());
      continue;
    }
    ops[nb] = (dtx__kit_op_t){.kind = DTX_BULK_FIND_ONE_AND_UPDATE,
                              .point = m[i].point,
                              .coll = k->coll,
                              .filter = filter,
                              .update = upd,
                              .fam = {.return_new = 1}};
    idx[nb++] = i;
  }
  (void)dtx__kit_run(ex, ops, nb);
  for (size_t j = 0; j < nb; j++) {
    dtx__kit_op_t *o = &ops[j];
    i = idx[j];
    rcs[i] = o->rc;
    outs[i] = o->out;
    o->out = NULL;
    if (o->rc == DTX_ENOMATCH && o->unsure)
      rcs[i] = dtx__kit_own_move(ex, k, docs[i], &m[i], &outs[i]);
    else if (o->rc && o->detail)
      why[i] = strdup(o->detail);
    dtx__kit_move_check(ex, k, docs[i], &m[i], rcs[i], outs[i]);
  }
  dtx__kit_ops_clear(ops, nb);
  dtx__err_clear();
  for (i = 0; i < n && !first; i++)
    if (rcs[i] && rcs[i] != DTX_ENOMATCH)
      first = why[i] ? dtx__err(rcs[i], "%s", why[i]) : rcs[i];
  if (!details) {
    for (i = 0; i < n; i++)
      free(why[i]);
    free(why);
  }
  free(idx);
  free(ops);
  return first;
}

/* ---- the results of a batched public call ------------------------------------ */

static dtx__many_res_t *many_at(const void *results, size_t i, size_t size) {
  return (dtx__many_res_t *)((char *)results + i * size);
}

void dtx__many_set(void *res, int rc, json_t *doc) {
  dtx__many_res_t *r = res;
  const char *d = dtx_errdetail();
  r->rc = rc;
  r->detail = rc ? strdup(d && *d ? d : dtx_strerror(rc)) : NULL;
  r->doc = doc;
}

void dtx__many_clear(void *results, size_t n, size_t size) {
  for (size_t i = 0; results && i < n; i++) {
    dtx__many_res_t *r = many_at(results, i, size);
    free(r->detail);
    json_decref(r->doc);
    memset(r, 0, size);
  }
}

int dtx__many_refuse(void *results, size_t n, size_t size, const char *fmt,
                     ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  dtx__err_clear();
  int rc = dtx__err(DTX_EINVAL, "%s", msg);
  for (size_t i = 0; results && i < n; i++) {
    many_at(results, i, size)->rc = rc;
    many_at(results, i, size)->detail = strdup(dtx_errdetail());
  }
  return rc;
}

int dtx__many_begin(dtx_store_t *st, const void *reqs, const char *reqs_name,
                    size_t n, const dtx_exec_opts_t *opts, void *results,
                    size_t rsize, const char *fn, size_t isize,
                    dtx__exec_t *ex, dtx__call_t *c, void **items, int *rc) {
  *items = NULL;
  if (results)
    memset(results, 0, n * rsize);
  if (!st || !reqs || !results) {
    *rc = dtx__many_refuse(results, n, rsize, "%s: %s is NULL", fn,
                           !st ? "st" : !reqs ? reqs_name : "results");
    return 0;
  }
  if (n == 0) {
    dtx__err_clear();
    *rc = 0;
    return 0;
  }
  dtx__exec_from(ex, st, opts);
  dtx__call_begin(c, ex->deadline_ms);
  if (dtx__exec_check(ex)) { /* a bad owner: refused before any item */
    char msg[200];
    snprintf(msg, sizeof msg, "%s", dtx_errdetail());
    *rc = dtx__call_end(c, dtx__many_refuse(results, n, rsize, "%s: %s", fn,
                                            msg));
    return 0;
  }
  if (!(*items = calloc(n, isize))) {
    for (size_t i = 0; i < n; i++)
      many_at(results, i, rsize)->rc = DTX_ENOMEM;
    *rc = dtx__call_end(c, DTX_ENOMEM);
    return 0;
  }
  return 1;
}

int dtx__many_summary(const void *results, size_t n, size_t size,
                      const char *noun) {
  size_t failed = 0, first = n;
  for (size_t i = 0; i < n; i++)
    if (many_at(results, i, size)->rc && failed++ == 0)
      first = i;
  dtx__err_clear();
  if (!failed)
    return 0;
  const dtx__many_res_t *f = many_at(results, first, size);
  return dtx__err(f->rc, "%zu of %zu %s failed; first: #%zu: %s", failed, n,
                  noun, first, f->detail ? f->detail : dtx_strerror(f->rc));
}
