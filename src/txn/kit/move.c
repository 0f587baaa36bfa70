/* move.c -- the kit's moves of items (kit.h, "items"): the fenced state
 * change of one item (dtx__kit_move) or of many at once
 * (dtx__kit_move_many), takeover of a lapsed lease, and the heartbeat.
 *
 * A move is one step of the step engine (step.c): a find_one_and_update
 * conditioned on the item's state (and epoch, when fenced), behind the
 * move's fault point and the retry policy; the moves of many items are
 * one round (one dtx_store_bulk_write).  After a move matched nothing on
 * an attempt that followed an unsure one (a lost reply), the item is read
 * back: when it stands where this executor's own move would have left it,
 * that was the move (dtx__kit_own_move), so a lost reply never turns a done move
 * into "fenced off".  One item and many take the same path (move_back). */
#include "txn/kit/kit.h"
#include "txn/kit/kit_int.h"

#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "util/err.h"

/* $set {<state>: to, updated: now} plus, when taking the lease, the owner
 * and lease_until, merged into set (stolen). */
json_t *dtx__kit_move_update(const dtx__exec_t *ex, const dtx__kind_t *k,
                             const char *to, int take, json_t *set) {
  int64_t now = dtx__now_ms();
  json_t *s = set ? set : json_object();
  if (!s)
    return NULL;
  if (to)
    json_object_set_new(s, k->state, json_string(to));
  json_object_set_new(s, "updated", json_integer((json_int_t)now));
  if (take) {
    json_object_set_new(s, "owner", json_string(ex->owner));
    json_object_set_new(s, "lease_until",
                        json_integer((json_int_t)(now + ex->lease_ms)));
  }
  return take ? dtx__pack("{s:o,s:{s:i}}", "$set", s, "$inc", "epoch", 1)
              : dtx__pack("{s:o}", "$set", s);
}

/* After a move matched nothing on a retry that followed an error which may
 * have hidden its applied write (a lost reply, Redis ?wait=N): is the
 * document where this executor's own move would have left it?  For a move
 * taking the lease: in state `to`, owned by this executor at the epoch
 * after doc's.  For a fenced move: in state `to`, at doc's epoch, owned by
 * this executor.  Only an executor at that epoch can make such a move, so
 * it is ours: 0 with *out the document.  Otherwise DTX_ENOMATCH, as the
 * store said.  Unfenced moves (anyone may make them) stay DTX_ENOMATCH:
 * their callers reread and go on from what they find. */
int dtx__kit_own_move(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                      const dtx__move_t *m, json_t **out) {
  json_t *cur = NULL;
  const char *id = dtx__str(doc, "_id");
  *out = NULL;
  if (!id || !m->to || !(m->flags & (DTX__TAKE | DTX__FENCED)) ||
      dtx__kit_get(ex, k->coll, id, &cur) != 0)
    return DTX_ENOMATCH;
  json_int_t epoch = json_integer_value(json_object_get(doc, "epoch"));
  if (m->flags & DTX__TAKE)
    epoch++;
  int ours = dtx__str_is(cur, k->state, m->to) &&
             dtx__str_is(cur, "owner", ex->owner) &&
             json_is_integer(json_object_get(cur, "epoch")) &&
             json_integer_value(json_object_get(cur, "epoch")) == epoch;
  if (!ours) {
    json_decref(cur);
    dtx__err_clear();
    return DTX_ENOMATCH;
  }
  *out = cur;
  return 0;
}

/* The step of move m of item doc: a find_one_and_update returning the new
 * document, {_id, <state>: from [, epoch] [, lease lapsed]} + cond ->
 * $set {<state>: to, updated} + set [+ lease, $inc epoch] [$unset].
 * m's cond, set and unset are stolen in every case; DTX_ESTATE for an
 * item without a state or (fenced) an epoch. */
static int move_op(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                   const dtx__move_t *m, dtx__kit_op_t *o) {
  const char *from = m->from ? m->from : dtx__str(doc, k->state);
  *o = (dtx__kit_op_t){.kind = DTX_BULK_FIND_ONE_AND_UPDATE,
                       .point = m->point,
                       .coll = k->coll,
                       .fam = {.return_new = 1, .not_after = m->not_after}};
  if (!from) {
    json_decref(m->cond);
    json_decref(m->set);
    json_decref(m->unset);
    return dtx__err(DTX_ESTATE, "%s %s has no %s", k->coll,
                    dtx__str(doc, "_id") ? dtx__str(doc, "_id") : "?",
                    k->state);
  }
  if ((m->flags & DTX__FENCED) && !json_is_integer(json_object_get(doc, "epoch"))) {
    json_decref(m->cond);
    json_decref(m->set);
    json_decref(m->unset);
    return dtx__err(DTX_ESTATE, "%s %s has no integer epoch to fence on",
                    k->coll, dtx__str(doc, "_id") ? dtx__str(doc, "_id") : "?");
  }
  json_t *f = dtx__pack("{s:O,s:s}", "_id", json_object_get(doc, "_id"),
                        k->state, from);
  json_t *cond = m->cond;
  if (f && (m->flags & DTX__FENCED))
    json_object_set(f, "epoch", json_object_get(doc, "epoch"));
  if (f && (m->flags & DTX__LAPSED))
    json_object_set_new(f, "lease_until",
                        dtx__pack("{s:I}", "$lte", (json_int_t)dtx__now_ms()));
  if (f && cond)
    json_object_update(f, cond);
  json_decref(cond);
  json_t *upd = dtx__kit_move_update(ex, k, m->to,
                                     (m->flags & DTX__TAKE) != 0, m->set);
  if (upd && m->unset && json_object_set_new(upd, "$unset", m->unset) < 0) {
    json_decref(upd);
    upd = NULL;
  } else if (!upd) {
    json_decref(m->unset);
  }
  if (upd && k->on_move &&
      k->on_move(doc, m->point, from, m->to, (m->flags & DTX__TAKE) != 0,
                 upd)) {
    json_decref(upd);
    upd = NULL;
  }
  if (!f || !upd) {
    json_decref(f);
    json_decref(upd);
    return DTX_ENOMEM;
  }
  o->filter = f;
  o->update = upd;
  return 0;
}

/* The outcome of move m of item doc, whose step o ran: o's rc and
 * document (handed over to *out), or after "nothing matched" on an unsure
 * step, the own-move check. */
static int move_back(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                     const dtx__move_t *m, dtx__kit_op_t *o, json_t **out) {
  *out = o->out;
  o->out = NULL;
  int rc = o->rc;
  if (rc == DTX_ENOMATCH && o->unsure)
    rc = dtx__kit_own_move(ex, k, doc, m, out);
  dtx__kit_move_check(ex, k, doc, m, rc, *out);
  return rc;
}

int dtx__kit_move(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                  const dtx__move_t *m, json_t **out) {
  dtx__kit_op_t o;
  *out = NULL;
  int rc = move_op(ex, k, doc, m, &o);
  if (rc)
    return rc;
  (void)dtx__kit_run(ex, &o, 1);
  rc = move_back(ex, k, doc, m, &o, out); /* the run left o's detail */
  dtx__kit_ops_clear(&o, 1);
  return rc;
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
    int rc = move_op(ex, k, docs[i], &m[i], &ops[nb]);
    if (rc) {
      rcs[i] = rc;
      why[i] = strdup(dtx_errdetail());
      continue;
    }
    idx[nb++] = i;
  }
  (void)dtx__kit_run(ex, ops, nb);
  for (size_t j = 0; j < nb; j++) {
    i = idx[j];
    rcs[i] = move_back(ex, k, docs[i], &m[i], &ops[j], &outs[i]);
    if (rcs[i] && rcs[i] != DTX_ENOMATCH && ops[j].detail)
      why[i] = strdup(ops[j].detail);
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

int dtx__kit_takeover(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                      const char *point, const char *to, json_t *cond,
                      json_t *set, json_t **out) {
  dtx__move_t m = {.point = point,
                   .to = to,
                   .flags = DTX__FENCED | DTX__TAKE | (cond ? 0 : DTX__LAPSED),
                   .cond = cond,
                   .set = set};
  return dtx__kit_move(ex, k, doc, &m, out);
}

/* The name of the pattern whose collections include coll, or NULL. */
static const char *owner_of(const char *coll) {
  for (size_t i = 0; dtx__patterns[i]; i++)
    for (const char *const *c = dtx__patterns[i]->collections; c && *c; c++)
      if (strcmp(*c, coll) == 0)
        return dtx__patterns[i]->name;
  return NULL;
}

int dtx__kit_renew(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                   json_t **out) {
  int64_t now = dtx__now_ms();
  /* The heartbeat is no protocol step: no fault point of its own; its
   * store call is named after the pattern owning the item (the rules'
   * step mark). */
  dtx__kit_op_t o = {
      .kind = DTX_BULK_FIND_ONE_AND_UPDATE,
      .coll = k->coll,
      .what = "renewing a lease",
      .step = owner_of(k->coll),
      .filter = dtx__pack("{s:O,s:O,s:O,s:s}", "_id",
                          json_object_get(doc, "_id"), k->state,
                          json_object_get(doc, k->state), "epoch",
                          json_object_get(doc, "epoch"), "owner", ex->owner),
      .update = dtx__pack("{s:{s:I}}", "$set", "lease_until",
                          (json_int_t)(now + ex->lease_ms)),
      .fam = {.return_new = 1}};
  return dtx__kit_step(ex, &o, out);
}
