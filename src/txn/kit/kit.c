/* kit.c -- the executor, call frame, retry policy, steps (single and
 * batched) and item moves of the pattern kit (kit.h says what each is
 * for; the claims are in claim.c).
 *
 * The retry policy is the only one in src/txn: a step that meets a
 * transient store error tries again a few times with a short backoff, and
 * never past the command's deadline (util/deadline.h), so the windows of
 * the kit and of the store below it do not multiply.  Every store call a
 * pattern makes goes through one of the steps here, behind its fault
 * point, so `DOCTX_FAULT=POINT:error` exercises exactly this policy. */
#include "txn/kit/kit.h"
#include "txn/kit/kit_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "doc/doc.h"
#include "store/store.h"
#include "util/err.h"

#define STEP_RETRIES 4

/* ---- executor and call frame ------------------------------------------------ */

int dtx__check_owner(const char *owner) {
  return owner ? dtx__check_word("owner", owner, 128, "_.:@#-") : 0;
}

int dtx__exec_init(dtx__exec_t *ex, dtx_store_t *st, const char *owner,
                   int64_t lease_ms, int64_t deadline_ms) {
  int rc = dtx__check_owner(owner);
  ex->st = st;
  ex->bad_owner = rc != 0;
  /* Bounded as a lock's ttl is: every lease end is now + lease_ms, which
   * past int64 would wrap to a lease that lapsed before it began (another
   * executor takes the item over while this one still runs it). */
  ex->lease_ms = lease_ms <= 0 ? DTX__DEFAULT_LEASE_MS
                 : lease_ms > DTX__MAX_LEASE_MS ? DTX__MAX_LEASE_MS
                                                : lease_ms;
  ex->deadline_ms = deadline_ms > 0 ? deadline_ms : 0;
  if (owner) {
    /* A refused name is kept (cut to the buffer) for dtx__exec_check to
     * name: nothing is ever written under it. */
    snprintf(ex->owner, sizeof ex->owner, "%s", owner);
  } else {
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(ex->owner, sizeof ex->owner, "%s:%ld", host, (long)getpid());
  }
  return rc;
}

int dtx__exec_from(dtx__exec_t *ex, dtx_store_t *st,
                   const dtx_exec_opts_t *opts) {
  return dtx__exec_init(ex, st, opts ? opts->owner : NULL,
                        opts ? opts->lease_ms : 0,
                        opts ? opts->deadline_ms : 0);
}

int dtx__exec_check(const dtx__exec_t *ex) {
  if (!ex->bad_owner)
    return 0;
  int rc = dtx__check_owner(ex->owner);
  return rc ? rc
            : dtx__err(DTX_EINVAL, "owner '%.100s...': must be 1..128 of "
                                   "[A-Za-z0-9_.:@#-]", ex->owner);
}

void dtx__exec_rename(dtx__exec_t *ex, const char *fmt, ...) {
  char name[sizeof ex->owner];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(name, sizeof name, fmt, ap); /* may read the old ex->owner */
  va_end(ap);
  memcpy(ex->owner, name, sizeof name);
}

void dtx__call_begin(dtx__call_t *c, int64_t budget_ms) {
  dtx__err_clear();
  dtx__deadline_enter(&c->saved, budget_ms);
}

int dtx__call_end(dtx__call_t *c, int rc) {
  dtx__deadline_leave(&c->saved);
  return rc;
}

/* ---- retry policy ------------------------------------------------------------- */

int dtx__transient(int rc) {
  return rc == DTX_EBUSY || rc == DTX_EBACKEND || rc == DTX_EUNAVAILABLE ||
         rc == DTX_EFAULT;
}

int dtx__retry_next(dtx__retry_t *r, int *rc, const char *what,
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
  if (++r->attempt >= STEP_RETRIES)
    return 0;
  *pause_ms = 1LL << ((r->attempt - 1) * 2); /* 1, 4, 16 ms */
  return 1;
}

int dtx__retry_again(dtx__retry_t *r, int *rc, const char *what) {
  int64_t pause;
  int again = dtx__retry_next(r, rc, what, &pause);
  if (again)
    dtx__deadline_sleep_ms(pause);
  return again;
}

/* ---- contention ----------------------------------------------------------------- */

int dtx__kit_contend(dtx__contend_t *c, int *rc, const char *what) {
  static _Thread_local unsigned seed;
  int64_t now = dtx__mono_ms();
  if (!seed)
    seed = (unsigned)now ^ (unsigned)(uintptr_t)&seed;
  if (c->until == 0)
    c->until = now + DTX__CONTEND_MS;
  c->attempt++;
  if (dtx__deadline_passed() || now >= c->until) {
    *rc = dtx__err(DTX_EUNAVAILABLE,
                   "%s: lost %d races to concurrent writers; gave up at the "
                   "command's deadline (%lld ms)",
                   what, c->attempt,
                   (long long)(dtx__deadline_budget_ms()
                                   ? dtx__deadline_budget_ms()
                                   : DTX__CONTEND_MS));
    return 0;
  }
  /* The first loss retries at once (the winner is done); later ones back
   * off at random up to a cap that doubles, 1 .. 16 ms. */
  if (c->attempt > 1) {
    int cap = 1 << (c->attempt < 5 ? c->attempt - 1 : 4);
    dtx__deadline_sleep_ms(1 + (int64_t)(rand_r(&seed) % (unsigned)cap));
  }
  return 1;
}

/* ---- steps ---------------------------------------------------------------------- */

int dtx__kit_get(dtx__exec_t *ex, const char *coll, const char *id,
                 json_t **out) {
  *out = NULL;
  int rc = dtx__exec_check(ex);
  if (rc)
    return rc;
  json_t *filter = dtx__pack("{s:s}", "_id", id), *docs = NULL;
  dtx__retry_t r = {0};
  rc = DTX_ENOMEM;
  if (filter) {
    do
      rc = dtx_store_find(ex->st, coll, filter, NULL, &docs);
    while (dtx__retry_again(&r, &rc, id));
  }
  json_decref(filter);
  if (rc)
    return rc;
  if (json_array_size(docs) == 0)
    rc = DTX_ENOTFOUND;
  else
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
  dtx_find_opts_t o = {.sort = sort, .limit = limit > 0 ? limit : 0};
  dtx__retry_t r = {0};
  int rc = dtx__exec_check(ex);
  if (rc) {
    *out = NULL;
    return rc;
  }
  do
    rc = dtx_store_find(ex->st, coll, filter, &o, out);
  while (dtx__retry_again(&r, &rc, coll));
  return rc;
}

int dtx__kit_update(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, json_t *update, int *matched) {
  return dtx__kit_update_ex(ex, point, coll, filter, update, NULL, matched);
}

int dtx__kit_update_ex(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_update_opts_t *opts, int *matched) {
  dtx__retry_t r = {0};
  int rc = dtx__exec_check(ex);
  if (matched)
    *matched = 0;
  if (rc == 0 && !(filter && update))
    rc = DTX_ENOMEM;
  if (rc == 0) {
    dtx_update_result_t res;
    const char *step = dtx__rules_step_enter(point);
    do {
      memset(&res, 0, sizeof res);
      rc = DTX_FAULTPOINT(point);
      if (rc == 0)
        rc = dtx__fault_lost(
            dtx_store_update(ex->st, coll, filter, update, opts, &res));
    } while (dtx__retry_again(&r, &rc, point));
    dtx__rules_step_leave(step);
    if (rc == 0 && matched)
      *matched = res.matched > 0;
  }
  json_decref(filter);
  json_decref(update);
  return rc;
}

/* The one retry loop of a conditional update.  *unsure (may be NULL) is
 * set when an attempt ended in an error after which the write may have
 * been applied (a lost reply): then a later "nothing matched" may be this
 * executor's own write. */
static int modify_opts(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_fam_opts_t *opts, json_t **out,
                       int *unsure) {
  dtx_fam_opts_t o = *opts;
  dtx__retry_t r = {0};
  int rc = dtx__exec_check(ex);
  *out = NULL;
  if (rc == 0 && !(filter && update))
    rc = DTX_ENOMEM;
  if (rc == 0) {
    const char *step = dtx__rules_step_enter(point);
    do {
      rc = DTX_FAULTPOINT(point);
      if (rc == 0) {
        rc = dtx__fault_lost(dtx_store_find_one_and_update(
            ex->st, coll, filter, update, &o, out));
        if (rc && rc != DTX_ENOMATCH && unsure)
          *unsure = 1;
        if (rc) {
          json_decref(*out);
          *out = NULL;
        }
      }
    } while (dtx__retry_again(&r, &rc, point));
    dtx__rules_step_leave(step);
  }
  json_decref(filter);
  json_decref(update);
  if (rc == DTX_ENOMATCH)
    dtx__err_clear(); /* an expected outcome, not an error to show */
  return rc;
}

static int modify(dtx__exec_t *ex, const char *point, const char *coll,
                  json_t *filter, json_t *update, const json_t *sort,
                  json_t **out, int *unsure) {
  dtx_fam_opts_t o = {.return_new = 1, .sort = sort};
  return modify_opts(ex, point, coll, filter, update, &o, out, unsure);
}

int dtx__kit_modify_ex(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_fam_opts_t *opts, json_t **out) {
  return modify_opts(ex, point, coll, filter, update, opts, out, NULL);
}

int dtx__kit_modify_unsure(dtx__exec_t *ex, const char *point,
                           const char *coll, json_t *filter, json_t *update,
                           const json_t *sort, json_t **out, int *unsure) {
  return modify(ex, point, coll, filter, update, sort, out, unsure);
}

int dtx__kit_modify(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, json_t *update, const json_t *sort,
                    json_t **out) {
  return modify(ex, point, coll, filter, update, sort, out, NULL);
}

int dtx__kit_insert(dtx__exec_t *ex, const char *point, const char *coll,
                    const json_t *doc) {
  dtx__retry_t r = {0};
  int rc = dtx__exec_check(ex);
  if (rc)
    return rc;
  const char *step = dtx__rules_step_enter(point);
  do {
    rc = DTX_FAULTPOINT(point);
    if (rc == 0)
      rc = dtx__fault_lost(dtx_store_insert(ex->st, coll, doc, NULL));
  } while (dtx__retry_again(&r, &rc, point));
  dtx__rules_step_leave(step);
  return rc;
}

int dtx__kit_delete(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, int64_t *deleted) {
  dtx__retry_t r = {0};
  int64_t n = 0;
  int rc = dtx__exec_check(ex);
  if (rc) {
    json_decref(filter);
    if (deleted)
      *deleted = 0;
    return rc;
  }
  const char *step = dtx__rules_step_enter(point);
  do {
    rc = filter ? DTX_FAULTPOINT(point) : DTX_ENOMEM;
    if (rc == 0)
      rc = dtx__fault_lost(dtx_store_delete(ex->st, coll, filter, 0, &n));
  } while (dtx__retry_again(&r, &rc, point));
  dtx__rules_step_leave(step);
  json_decref(filter);
  if (deleted)
    *deleted = rc ? 0 : n;
  return rc;
}

/* The pair (or any few) of updates as one batch: dtx__kit_run does the
 * rounds and the retries; the `done` point follows with every result. */
int dtx__kit_update_many(dtx__exec_t *ex, dtx__kit_upd_t *u, size_t n,
                         const char *done) {
  dtx__kit_op_t *ops = calloc(n ? n : 1, sizeof *ops);
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
  free(ops);
  if (rc)
    return rc; /* dtx__kit_run left the first failure's detail */
  return done ? DTX_FAULTPOINT(done) : 0;
}

/* ---- items ---------------------------------------------------------------------- */

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
int dtx__kit_own_move(dtx__exec_t *ex, const dtx__kind_t *k,
                      const json_t *doc, const dtx__move_t *m, json_t **out) {
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

int dtx__kit_move_op(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                     const dtx__move_t *m, json_t **filter, json_t **update) {
  const char *from = m->from ? m->from : dtx__str(doc, k->state);
  *filter = *update = NULL;
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
  if (!f || !upd) {
    json_decref(f);
    json_decref(upd);
    return DTX_ENOMEM;
  }
  *filter = f;
  *update = upd;
  return 0;
}

int dtx__kit_move(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                  const dtx__move_t *m, json_t **out) {
  json_t *filter, *upd;
  *out = NULL;
  int rc = dtx__kit_move_op(ex, k, doc, m, &filter, &upd);
  if (rc)
    return rc;
  int unsure = 0;
  rc = modify(ex, m->point, k->coll, filter, upd, NULL, out, &unsure);
  if (rc == DTX_ENOMATCH && unsure)
    rc = dtx__kit_own_move(ex, k, doc, m, out);
  dtx__kit_move_check(ex, k, doc, m, rc, *out);
  return rc;
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
  json_t *filter = dtx__pack("{s:O,s:O,s:O,s:s}", "_id",
                             json_object_get(doc, "_id"), k->state,
                             json_object_get(doc, k->state), "epoch",
                             json_object_get(doc, "epoch"), "owner", ex->owner);
  json_t *upd = dtx__pack("{s:{s:I}}", "$set", "lease_until",
                          (json_int_t)(now + ex->lease_ms));
  /* The heartbeat is no protocol step: no fault point of its own. */
  dtx_fam_opts_t o = {.return_new = 1};
  dtx__retry_t r = {0};
  int rc = DTX_ENOMEM;
  *out = NULL;
  if (filter && upd) {
    /* No fault point: the step is named after the pattern of the item. */
    const char *step = dtx__rules_step_enter(owner_of(k->coll));
    do
      rc = dtx_store_find_one_and_update(ex->st, k->coll, filter, upd, &o, out);
    while (dtx__retry_again(&r, &rc, "renewing a lease"));
    dtx__rules_step_leave(step);
  }
  json_decref(filter);
  json_decref(upd);
  return rc;
}

int dtx__kit_await(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                   json_t **out) {
  const char *id = dtx__str(doc, "_id");
  json_t *cur = json_incref((json_t *)doc);
  int64_t pause = 2;
  *out = NULL;
  for (;;) {
    int64_t lease = dtx__int(cur, "lease_until"), now = dtx__now_ms();
    if (cur != doc && (!json_equal(json_object_get(cur, k->state),
                                   json_object_get(doc, k->state)) ||
                       !json_equal(json_object_get(cur, "epoch"),
                                   json_object_get(doc, "epoch")))) {
      break; /* it moved on */
    }
    if (lease <= now)
      break; /* lapsed: the caller may take it over */
    if (dtx__deadline_passed() || dtx__deadline_left_ms() == 0) {
      int rc = dtx__err(DTX_EUNAVAILABLE,
                        "%s %s is held by %s until its lease ends in %lld ms; "
                        "gave up at the command's deadline (%lld ms)",
                        k->coll, id ? id : "?",
                        dtx__str(cur, "owner") ? dtx__str(cur, "owner") : "?",
                        (long long)(lease - now),
                        (long long)dtx__deadline_budget_ms());
      json_decref(cur);
      return rc;
    }
    /* Sleep no longer than the lease has left: a lapse is worth acting on
     * at once.  (The deadline caps it too.) */
    int64_t nap = pause < lease - now ? pause : lease - now;
    dtx__deadline_sleep_ms(nap > 0 ? nap : 1);
    if (pause < 100)
      pause *= 2;
    json_t *next = NULL;
    int rc = dtx__kit_get(ex, k->coll, id, &next);
    json_decref(cur);
    if (rc)
      return rc;
    cur = next;
  }
  *out = cur;
  return 0;
}

/* ---- listing and helpers -------------------------------------------------------- */

int dtx__kit_list(dtx_store_t *st, const char *coll, const json_t *filter,
                  const json_t *sort, const dtx_page_t *page, json_t **out) {
  *out = NULL;
  if (page && (page->skip < 0 || page->limit < 0))
    return dtx__err(DTX_EINVAL, "skip and limit must be >= 0, got %lld, %lld",
                    (long long)page->skip, (long long)page->limit);
  json_t *by_id = sort ? NULL : dtx__pack("{s:i}", "_id", 1);
  dtx_find_opts_t o = {.sort = sort ? sort : by_id,
                       .skip = page ? page->skip : 0,
                       .limit = page ? page->limit : 0};
  int rc = dtx_store_find(st, coll, filter, &o, out);
  json_decref(by_id);
  return rc;
}

const char *dtx__str(const json_t *doc, const char *key) {
  return json_string_value(json_object_get(doc, key));
}

int64_t dtx__int(const json_t *doc, const char *key) {
  return (int64_t)json_integer_value(json_object_get(doc, key));
}

int dtx__str_is(const json_t *doc, const char *key, const char *value) {
  const char *s = dtx__str(doc, key);
  return s && strcmp(s, value) == 0;
}

int dtx__lists(const json_t *doc, const char *key, const char *value) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(doc, key), i, v) {
    if (json_is_string(v) && strcmp(json_string_value(v), value) == 0)
      return 1;
  }
  return 0;
}

int dtx__state_is(const json_t *doc, const char *state) {
  return dtx__str_is(doc, "state", state);
}

int dtx__check_ident(const char *what, const char *id) {
  return dtx__check_word(what, id, 128, "_.:-");
}

int dtx__check_user_coll(const char *what, const char *coll) {
  int rc = dtx__coll_check(coll);
  if (rc)
    return dtx__err_wrap(rc, "%s collection", what);
  for (size_t i = 0; dtx__patterns[i]; i++)
    for (const char *const *c = dtx__patterns[i]->collections; c && *c; c++)
      if (strcmp(*c, coll) == 0)
        return dtx__err(DTX_EINVAL, "%s collection '%s' belongs to doctx's "
                        "%s pattern", what, coll, dtx__patterns[i]->name);
  return 0;
}

int dtx__check_op_update(const char *what, const json_t *u,
                         int (*is_reserved)(const char *path),
                         const char *replaces, const char *keeps) {
  const char *op, *path;
  json_t *args, *v;
  if (!json_is_object(u) || json_object_size(u) == 0)
    return dtx__err(DTX_EINVAL, "%s: UPDATE must be a non-empty object of "
                    "update operators", what);
  json_object_foreach((json_t *)u, op, args) {
    if (op[0] != '$')
      return dtx__err(DTX_EINVAL, "%s: UPDATE must use update operators "
                      "($set, $inc, ...), not replace %s (field '%s')", what,
                      replaces, op);
    if (!json_is_object(args))
      continue;
    json_object_foreach(args, path, v) {
      const char *to = strcmp(op, "$rename") == 0 && json_is_string(v)
                           ? json_string_value(v) : NULL;
      if (is_reserved(path) || (to && is_reserved(to)))
        return dtx__err(DTX_EINVAL, "%s: UPDATE may not touch '%s' (%s): "
                        "doctx keeps %s", what,
                        is_reserved(path) ? path : to, op, keeps);
    }
  }
  return 0;
}

int dtx__kit_abandoned(const dtx_recover_opts_t *o, int64_t changed_at,
                       int64_t lease_until, int64_t now) {
  return o->older_than_ms >= 0 ? changed_at <= now - o->older_than_ms
                               : lease_until <= now;
}
