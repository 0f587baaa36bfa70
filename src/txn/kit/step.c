/* step.c -- the kit's ONE step engine (kit.h, "steps").  Every store call
 * a pattern makes is a step: a read, an insert, a conditional update, a
 * find-and-modify, a delete, or a bare fault point.  A step alone is a
 * round of one through the same engine as the steps of many items
 * (dtx__kit_run), so what follows is decided here and nowhere else:
 *
 *   fault point   each step reaches its own just before it joins a round
 *                 (a crash there sends none of the round; an injected
 *                 error fails that step alone); DOCTX_FAULT=POINT:lost
 *                 applies a write and then reports DTX_EUNAVAILABLE
 *   step mark     the store call of a round of writes runs inside
 *                 dtx__rules_step_enter/_leave, named by its first step
 *                 (its fault point, or the name the step gives), so
 *                 plain-scope rules skip the pattern's own steps
 *                 (docs/validation.md); reads carry no mark
 *   retry         a step that failed transiently (dtx__transient: BUSY,
 *                 UNAVAILABLE, BACKEND, an injected FAULT or lost reply)
 *                 goes again alone in the next round, a few times with a
 *                 short backoff, never past the call's one deadline
 *                 (util/deadline.h); a round pauses once, for the longest
 *                 backoff among its steps
 *   unsure        an attempt whose store call failed transiently may
 *                 have been applied before its reply was lost: the step
 *                 is then "unsure", and a later "nothing matched" may be
 *                 its own write (the moves and claims read it back).  A
 *                 definite answer -- success, nothing matched, a
 *                 duplicate key, a refusal -- is never unsure.  (Only a
 *                 transient error is retried, so this is the one rule
 *                 both of the kit's former loops applied where it could
 *                 matter: one counted a DUPKEY, the other not, but a
 *                 DUPKEY ends the step and is never followed by a
 *                 "nothing matched".)
 *
 * A round of several writes is ONE dtx_store_bulk_write (one write
 * transaction on SQLite, one pipeline per node on Redis), each step still
 * the atomic single-document operation it is alone; a round of one step
 * is that step's single store call (a bulk of one would cost the Redis
 * fast path a read before its compare-and-set).  The single steps of
 * kit.h (get, find, count, update, modify, insert, delete, renew, point)
 * are a round of one. */
#include "txn/kit/kit.h"
#include "txn/kit/kit_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h" /* dtx__rules_step_enter */
#include "store/store.h" /* dtx__store_fence_records */
#include "util/err.h"

#define STEP_RETRIES 4
#define SMALL 4 /* rounds of up to SMALL steps keep their state on the stack */

/* ---- the retry policy ---------------------------------------------------------- */

int dtx__transient(int rc) {
  return rc == DTX_EBUSY || rc == DTX_EBACKEND || rc == DTX_EUNAVAILABLE ||
         rc == DTX_EFAULT;
}

/* After an attempt that ended in *rc: 1 when it should be made again (a
 * transient error, attempts left, deadline not passed), with *pause_ms
 * the backoff to sleep first; else 0.  When the deadline is what stops
 * it, *rc becomes DTX_EUNAVAILABLE naming `what` and the budget. */
static int retry_next(int *attempt, int *rc, const char *what,
                      int64_t *pause_ms) {
  *pause_ms = 0;
  if (*rc == 0 || !dtx__transient(*rc))
    return 0;
  if (dtx__deadline_passed()) {
    *rc = dtx__err_wrap(DTX_EUNAVAILABLE,
                        "%s: gave up at the command's deadline (%lld ms)",
                        what, (long long)dtx__deadline_budget_ms());
    return 0;
  }
  if (++*attempt >= STEP_RETRIES)
    return 0;
  *pause_ms = 1LL << ((*attempt - 1) * 2); /* 1, 4, 16 ms */
  return 1;
}

/* ---- the engine ------------------------------------------------------------------ */

static int is_write(int kind) {
  return kind >= DTX_BULK_INSERT && kind <= DTX_BULK_FIND_ONE_AND_DELETE;
}

/* What the retry's deadline message names. */
static const char *what_of(const dtx__kit_op_t *o) {
  return o->what ? o->what : o->point ? o->point : o->coll ? o->coll : "?";
}

/* Step o alone, as its single store call. */
static void call_one(dtx_store_t *st, dtx__kit_op_t *o, dtx_bulk_result_t *res) {
  memset(res, 0, sizeof *res);
  dtx__err_clear();
  switch (o->kind) {
  case DTX_BULK_INSERT:
    res->rc = dtx_store_insert(st, o->coll, o->doc, NULL);
    break;
  case DTX_BULK_UPDATE_ONE: {
    dtx_update_result_t u = {0};
    res->rc = dtx_store_update(st, o->coll, o->filter, o->update, &o->upd, &u);
    res->matched = u.matched;
    res->modified = u.modified;
    json_decref(u.upserted_id);
    break;
  }
  case DTX_BULK_DELETE_ONE:
    res->rc = dtx_store_delete(st, o->coll, o->filter, 0, &res->modified);
    break;
  case DTX_BULK_FIND_ONE_AND_UPDATE:
    res->rc = dtx_store_find_one_and_update(st, o->coll, o->filter, o->update,
                                            &o->fam, &res->doc);
    break;
  case DTX__KIT_FIND:
    res->rc = dtx_store_find(st, o->coll, o->filter, &o->find, &res->doc);
    break;
  case DTX__KIT_COUNT:
    res->rc = dtx_store_count(st, o->coll, o->filter, &res->modified);
    break;
  case DTX__KIT_COLLS:
    res->rc = dtx_store_list_collections(st, &res->doc);
    break;
  case DTX__KIT_INDEXES:
    res->rc = dtx_store_list_indexes(st, o->coll, &res->doc);
    break;
  case DTX__KIT_FENCE_RECORDS:
    res->rc = dtx__store_fence_records(st, o->coll, &res->doc);
    break;
  default:
    res->rc = dtx__err(DTX_EINVAL, "a kit step of unknown kind %d", o->kind);
  }
  if (res->rc) {
    const char *d = dtx_errdetail();
    res->detail = strdup(d && *d ? d : dtx_strerror(res->rc));
  }
}

/* Records an attempt's outcome of o: its rc and a copy of its detail. */
static void set_rc(dtx__kit_op_t *o, int rc, const char *detail) {
  free(o->detail);
  o->detail = NULL;
  o->rc = rc;
  if (rc && rc != DTX_ENOMATCH)
    o->detail = strdup(detail && *detail ? detail : dtx_strerror(rc));
}

/* A step's private state in a round. */
typedef struct slot {
  int attempt;
  char pending, lost;
} slot_t;

/* The rounds of ops[0..n) on st; bad: the executor's refusal (0: none,
 * its detail this thread's). */
static int engine(dtx_store_t *st, int bad, dtx__kit_op_t *ops, size_t n) {
  slot_t s_slot[SMALL];
  size_t s_idx[SMALL], i;
  dtx_bulk_op_t s_bop[SMALL];
  dtx_bulk_result_t s_res[SMALL];
  int big = n > SMALL;
  slot_t *slot = big ? calloc(n, sizeof *slot) : s_slot;
  size_t *idx = big ? calloc(n, sizeof *idx) : s_idx;
  dtx_bulk_op_t *bop = big ? calloc(n, sizeof *bop) : s_bop;
  dtx_bulk_result_t *res = big ? calloc(n, sizeof *res) : s_res;
  int nomem = !slot || !idx || !bop || !res, touched = bad || n == 0;
  if (!big)
    memset(s_slot, 0, sizeof s_slot);
  for (i = 0; i < n; i++) {
    dtx__kit_op_t *o = &ops[i];
    o->matched = o->unsure = 0;
    o->n = 0;
    o->out = NULL;
    o->detail = NULL;
    int ok = o->kind == DTX_BULK_INSERT ? o->doc != NULL
             : o->kind == DTX_BULK_DELETE_ONE ? o->filter != NULL
             : o->kind == DTX_BULK_UPDATE_ONE ||
                     o->kind == DTX_BULK_FIND_ONE_AND_UPDATE
                 ? o->filter && o->update
                 : 1;
    o->rc = nomem || !ok ? DTX_ENOMEM : 0;
    if (!nomem)
      slot[i].pending = o->rc == 0;
  }
  /* An executor whose owner the rule refused writes (and reads) nothing. */
  for (i = 0; !nomem && bad && i < n; i++)
    if (slot[i].pending) {
      set_rc(&ops[i], bad, dtx_errdetail());
      slot[i].pending = 0;
    }
  while (!nomem && !bad) {
    size_t k = 0;
    const char *name = NULL;
    int writes = 0;
    for (i = 0; i < n; i++) {
      dtx__kit_op_t *o = &ops[i];
      if (!slot[i].pending)
        continue;
      /* Its own fault point just before it joins; "lost" is per write. */
      int f = o->point ? DTX_FAULTPOINT(o->point) : 0;
      slot[i].lost = f == 0 && is_write(o->kind) && dtx__fault_lost(0) != 0;
      if (f || o->kind == DTX__KIT_POINT) {
        set_rc(o, f, dtx_errdetail());
        continue;
      }
      if (is_write(o->kind) && !writes++)
        name = o->step ? o->step : o->point; /* one pattern's round */
      bop[k] = (dtx_bulk_op_t){
          .kind = (dtx_bulk_kind_t)o->kind,
          .coll = o->coll,
          .doc = o->doc,
          .filter = o->filter,
          .update = o->update,
          .update_opts = o->kind == DTX_BULK_UPDATE_ONE ? &o->upd : NULL,
          .fam_opts = o->kind == DTX_BULK_FIND_ONE_AND_UPDATE ? &o->fam
                                                              : NULL};
      idx[k++] = i;
    }
    const char *saved = writes ? dtx__rules_step_enter(name) : NULL;
    if (k == 1 || (k > 1 && writes < (int)k)) {
      for (size_t j = 0; j < k; j++) /* alone (a read cannot join a bulk) */
        call_one(st, &ops[idx[j]], &res[j]);
    } else if (k > 1) {
      (void)dtx_store_bulk_write(st, bop, k, res);
    }
    if (writes)
      dtx__rules_step_leave(saved);
    touched |= k > 0;
    for (size_t j = 0; j < k; j++) {
      dtx__kit_op_t *o = &ops[idx[j]];
      int rc = res[j].rc;
      json_decref(o->out);
      o->out = NULL;
      if (rc == 0 && slot[idx[j]].lost) {
        rc = dtx__err(DTX_EUNAVAILABLE, "injected lost reply at fault point "
                      "%s (the write was applied)", o->point);
        set_rc(o, rc, dtx_errdetail());
      } else {
        set_rc(o, rc, res[j].detail);
      }
      o->unsure |= dtx__transient(rc); /* the one rule (file comment) */
      o->matched = rc == 0 && (o->kind != DTX_BULK_UPDATE_ONE ||
                               res[j].matched > 0);
      if (rc == 0) {
        o->out = json_incref(res[j].doc);
        o->n = res[j].modified;
      }
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
      dtx__kit_op_t *o = &ops[i];
      if (!slot[i].pending)
        continue;
      if (o->flags & DTX__OP_ONCE) {
        slot[i].pending = 0;
        continue;
      }
      int rc = o->rc;
      /* The deadline's words wrap this step's own detail, not whatever
       * the step before it left in the thread's. */
      if (o->detail)
        (void)dtx__err(rc, "%s", o->detail);
      else if (rc)
        dtx__err_clear();
      slot[i].pending = (char)retry_next(&slot[i].attempt, &rc, what_of(o), &p);
      if (rc != o->rc) /* the deadline stopped it: its own words */
        set_rc(o, rc, dtx_errdetail());
      again |= slot[i].pending;
      pause = p > pause ? p : pause;
    }
    if (!again)
      break;
    dtx__deadline_sleep_ms(pause);
  }
  if (big) {
    free(slot);
    free(idx);
    free(bop);
    free(res);
  }
  for (i = 0; i < n; i++) {
    json_decref(ops[i].doc);
    json_decref(ops[i].filter);
    json_decref(ops[i].update);
    ops[i].doc = ops[i].filter = ops[i].update = NULL;
  }
  for (i = 0; i < n; i++)
    if (ops[i].rc && ops[i].rc != DTX_ENOMATCH) {
      if (ops[i].detail)
        return dtx__err(ops[i].rc, "%s", ops[i].detail);
      dtx__err_clear();
      return ops[i].rc;
    }
  /* A round of bare fault points that all passed leaves the detail as
   * it was, as such a point alone does; after a store call it is clear. */
  if (touched)
    dtx__err_clear();
  return 0;
}

int dtx__kit_run(dtx__exec_t *ex, dtx__kit_op_t *ops, size_t n) {
  return engine(ex->st, dtx__exec_check(ex), ops, n);
}

void dtx__kit_ops_clear(dtx__kit_op_t *ops, size_t n) {
  for (size_t i = 0; ops && i < n; i++) {
    json_decref(ops[i].out);
    free(ops[i].detail);
    ops[i].out = NULL;
    ops[i].detail = NULL;
  }
}

/* ---- single steps: a round of one -------------------------------------------------- */

/* Runs o alone on st (bad: the executor's refusal) and hands its document
 * or array over (*out, may be NULL: dropped); returns its rc, with its
 * detail this thread's. */
static int one(dtx_store_t *st, int bad, dtx__kit_op_t *o, json_t **out) {
  (void)engine(st, bad, o, 1); /* 0 also when it matched nothing */
  int rc = o->rc;
  if (out)
    *out = o->out;
  else
    json_decref(o->out);
  o->out = NULL;
  free(o->detail);
  o->detail = NULL;
  return rc;
}

int dtx__kit_step(dtx__exec_t *ex, dtx__kit_op_t *o, json_t **out) {
  return one(ex->st, dtx__exec_check(ex), o, out);
}

/* A read of q on st (bad as for one()). */
static int read_on(dtx_store_t *st, int bad, const dtx__kit_read_t *q,
                   json_t **out) {
  dtx__kit_op_t o = {.kind = q->kind ? q->kind : DTX__KIT_FIND,
                     .coll = q->coll,
                     .what = q->what,
                     .filter = json_incref((json_t *)q->filter),
                     .find = {.sort = q->sort,
                              .skip = q->skip > 0 ? q->skip : 0,
                              .limit = q->limit > 0 ? q->limit : 0}};
  return one(st, bad, &o, out);
}

int dtx__kit_read(dtx_store_t *st, const dtx__kit_read_t *q, json_t **out) {
  return read_on(st, 0, q, out);
}

int dtx__kit_colls(dtx_store_t *st, json_t **out) {
  dtx__kit_read_t q = {.kind = DTX__KIT_COLLS, .what = "the collections"};
  return read_on(st, 0, &q, out);
}

int dtx__kit_count(dtx_store_t *st, const char *coll, const json_t *filter,
                   const char *what, int64_t *n) {
  dtx__kit_op_t o = {.kind = DTX__KIT_COUNT, .coll = coll, .what = what,
                     .filter = json_incref((json_t *)filter)};
  int rc = one(st, 0, &o, NULL);
  *n = rc ? 0 : o.n;
  return rc;
}

int dtx__kit_get(dtx__exec_t *ex, const char *coll, const char *id,
                 json_t **out) {
  json_t *filter = dtx__pack("{s:s}", "_id", id), *docs = NULL;
  *out = NULL;
  if (!filter)
    return DTX_ENOMEM;
  dtx__kit_read_t q = {.coll = coll, .filter = filter, .what = id};
  int rc = read_on(ex->st, dtx__exec_check(ex), &q, &docs);
  json_decref(filter);
  if (rc == 0 && json_array_size(docs) == 0)
    rc = DTX_ENOTFOUND; /* no detail: callers name the missing thing */
  else if (rc == 0)
    *out = json_incref(json_array_get(docs, 0));
  json_decref(docs);
  return rc;
}

int dtx__kit_find(dtx__exec_t *ex, const char *coll, const json_t *filter,
                  const json_t *sort, json_t **out) {
  return dtx__kit_find_n(ex, coll, filter, sort, 0, out);
}

int dtx__kit_find_n(dtx__exec_t *ex, const char *coll, const json_t *filter,
                    const json_t *sort, int64_t limit, json_t **out) {
  dtx__kit_read_t q = {.coll = coll, .filter = filter, .sort = sort,
                       .limit = limit};
  return read_on(ex->st, dtx__exec_check(ex), &q, out);
}

int dtx__kit_update(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, json_t *update, int *matched) {
  return dtx__kit_update_ex(ex, point, coll, filter, update, NULL, matched);
}

int dtx__kit_update_ex(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_update_opts_t *opts, int *matched) {
  dtx__kit_op_t o = {.kind = DTX_BULK_UPDATE_ONE, .point = point,
                     .coll = coll, .filter = filter, .update = update};
  if (opts)
    o.upd = *opts;
  int rc = dtx__kit_step(ex, &o, NULL);
  if (matched)
    *matched = rc == 0 && o.matched;
  return rc;
}

int dtx__kit_modify_ex(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_fam_opts_t *opts, json_t **out) {
  dtx__kit_op_t o = {.kind = DTX_BULK_FIND_ONE_AND_UPDATE, .point = point,
                     .coll = coll, .filter = filter, .update = update,
                     .fam = *opts};
  return dtx__kit_step(ex, &o, out);
}

int dtx__kit_modify(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, json_t *update, const json_t *sort,
                    json_t **out) {
  dtx_fam_opts_t o = {.return_new = 1, .sort = sort};
  return dtx__kit_modify_ex(ex, point, coll, filter, update, &o, out);
}

int dtx__kit_insert(dtx__exec_t *ex, const char *point, const char *coll,
                    const json_t *doc) {
  dtx__kit_op_t o = {.kind = DTX_BULK_INSERT, .point = point, .coll = coll,
                     .doc = json_incref((json_t *)doc)};
  return dtx__kit_step(ex, &o, NULL);
}

int dtx__kit_delete(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, int64_t *deleted) {
  dtx__kit_op_t o = {.kind = DTX_BULK_DELETE_ONE, .point = point,
                     .coll = coll, .filter = filter};
  int rc = dtx__kit_step(ex, &o, NULL);
  if (deleted)
    *deleted = rc ? 0 : o.n;
  return rc;
}

int dtx__kit_point(const char *point, const char *what) {
  dtx__kit_op_t o = {.kind = DTX__KIT_POINT, .point = point, .what = what,
                     .flags = what ? 0 : DTX__OP_ONCE};
  return one(NULL, 0, &o, NULL);
}

/* The pair (or any few) of updates as one round; the `done` point follows
 * with every result. */
int dtx__kit_update_many(dtx__exec_t *ex, dtx__kit_upd_t *u, size_t n,
                         const char *done) {
  dtx__kit_op_t s_ops[SMALL];
  dtx__kit_op_t *ops = n > SMALL ? calloc(n, sizeof *ops) : s_ops;
  size_t i;
  for (i = 0; i < n; i++) {
    if (ops)
      ops[i] = (dtx__kit_op_t){.kind = DTX_BULK_UPDATE_ONE,
                               .point = u[i].point,
                               .coll = u[i].coll,
                               .filter = u[i].filter,
                               .update = u[i].update};
    else {
      json_decref(u[i].filter);
      json_decref(u[i].update);
      u[i].rc = DTX_ENOMEM;
    }
    u[i].filter = u[i].update = NULL;
    u[i].matched = 0;
  }
  if (!ops)
    return DTX_ENOMEM;
  int rc = dtx__kit_run(ex, ops, n);
  for (i = 0; i < n; i++) {
    u[i].rc = ops[i].rc;
    u[i].matched = ops[i].matched;
  }
  dtx__kit_ops_clear(ops, n);
  if (ops != s_ops)
    free(ops);
  if (rc)
    return rc; /* the first failure's detail */
  return done ? dtx__kit_point(done, NULL) : 0;
}
