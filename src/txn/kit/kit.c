/* kit.c -- the executor, the call frame, contention and waiting, the wait
 * on another executor's item, listing and the small helpers of the
 * pattern kit (kit.h says what each is for).  The steps and their one
 * retry policy are in step.c, the moves in move.c, the claims in claim.c,
 * the batch driver in many.c.
 *
 * Every pause a pattern or frame makes is one of the kit's: the retry
 * backoff (step.c), a lost race (dtx__kit_contend), a wait on something
 * held (dtx__kit_wait) or a worker's idle pace (tally.c) -- each bounded
 * by the command's deadline (util/deadline.h), so the windows of the kit
 * and of the store below it do not multiply.  tests/layers.sh refuses a
 * sleep, retry or fault point in src/txn outside src/txn/kit/. */
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
#include "util/assert.h"
#include "util/err.h"

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

int64_t dtx__kit_wait(dtx__wait_t *w, int64_t bound) {
  if (w->pause < 1)
    w->pause = 1;
  int64_t nap = w->pause;
  if (bound > 0 && bound < nap)
    nap = bound;
  dtx__deadline_sleep_ms(nap);
  if (w->pause < w->cap)
    w->pause *= 2;
  return nap;
}

int dtx__kit_await(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                   json_t **out) {
  const char *id = dtx__str(doc, "_id");
  json_t *cur = json_incref((json_t *)doc);
  dtx__wait_t w = {.pause = 2, .cap = 100};
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
    dtx__kit_wait(&w, lease - now);
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

int dtx__kit_page_check(const dtx_page_t *page) {
  if (page && (page->skip < 0 || page->limit < 0))
    return dtx__err(DTX_EINVAL, "skip and limit must be >= 0, got %lld, %lld",
                    (long long)page->skip, (long long)page->limit);
  if (page && page->after)
    return dtx__check_ident("page after", page->after);
  return 0;
}

int dtx_page_check(const dtx_page_t *page) {
  dtx__err_clear();
  return dtx__kit_page_check(page);
}

/* The conditions that keep only the entries after page->after in sort
 * order (NULL: by _id), appended to all (an $and's array).  By _id it is a
 * range on _id, and the entry need not exist.  In (F, _id) order the entry
 * is read for its F = v, and the rest are {F >= v} -- the range the
 * planner walks an index {F: 1, _id: 1} from -- less those of F = v with
 * an _id <= after: a key on (F, _id) as one range, which the planner's
 * single-field ranges cannot say, so the few entries that share v are
 * read and dropped by the matcher. */
static int keyset(dtx_store_t *st, const char *coll, const json_t *sort,
                  const char *after, json_t *all) {
  if (!sort)
    return json_array_append_new(all, dtx__pack("{s:{s:s}}", "_id", "$gt",
                                                 after))
               ? DTX_ENOMEM
               : 0;
  void *it = json_object_iter((json_t *)sort);
  const char *f = json_object_iter_key(it);
  void *it2 = json_object_iter_next((json_t *)sort, it);
  /* The lists' orders: (created, _id), every direction 1. */
  DTX_ASSERT(json_object_size(sort) == 2 &&
                 strcmp(json_object_iter_key(it2), "_id") == 0 &&
                 json_integer_value(json_object_iter_value(it)) == 1 &&
                 json_integer_value(json_object_iter_value(it2)) == 1,
             "kit.list_keyset");
  json_t *id = dtx__pack("{s:s}", "_id", after), *one = NULL;
  dtx__kit_read_t q = {.coll = coll, .filter = id, .limit = 1};
  int rc = id ? dtx__kit_read(st, &q, &one) : DTX_ENOMEM;
  json_decref(id);
  if (rc)
    return rc;
  json_t *v = json_object_get(json_array_get(one, 0), f);
  if (json_array_size(one) == 0)
    rc = dtx__err(DTX_ENOTFOUND, "page after '%s': no such entry in %s "
                  "(a list in creation order pages from an entry's place)",
                  after, coll);
  else if (!json_is_integer(v))
    rc = dtx__err(DTX_EINVAL, "page after '%s': the entry has no integer "
                  "'%s' to page by", after, f);
  else if (json_array_append_new(all, dtx__pack("{s:{s:O}}", f, "$gte", v)) ||
           json_array_append_new(
               all, dtx__pack("{s:[{s:O,s:{s:s}}]}", "$nor", f, v, "_id",
                              "$lte", after)))
    rc = DTX_ENOMEM;
  json_decref(one);
  return rc;
}

int dtx__kit_list(dtx_store_t *st, const char *coll, const json_t *filter,
                  const json_t *sort, const dtx_page_t *page, json_t **out) {
  *out = NULL;
  int rc = dtx__kit_page_check(page);
  if (rc)
    return rc;
  json_t *by_id = sort ? NULL : dtx__pack("{s:i}", "_id", 1), *and = NULL;
  if (page && page->after) {
    /* {$and: [filter, keyset...]}: the planner reads inside an $and. */
    and = json_array();
    if (and && filter && json_array_append(and, (json_t *)filter))
      rc = DTX_ENOMEM;
    if (!and)
      rc = DTX_ENOMEM;
    if (rc == 0)
      rc = keyset(st, coll, sort, page->after, and);
    if (rc == 0 && !(and = json_pack("{s:o}", "$and", and)))
      rc = DTX_ENOMEM;
  }
  dtx__kit_read_t q = {.coll = coll, .filter = and ? and : filter,
                       .sort = sort ? sort : by_id,
                       .skip = page ? page->skip : 0,
                       .limit = page ? page->limit : 0};
  if (rc == 0)
    rc = by_id || sort ? dtx__kit_read(st, &q, out) : DTX_ENOMEM;
  json_decref(by_id);
  json_decref(and);
  return rc;
}

int dtx__kit_list_state(dtx_store_t *st, const char *coll,
                        const char *const *states, const char *what,
                        const char *state, const dtx_page_t *page,
                        json_t **out) {
  size_t i = 0;
  *out = NULL;
  while (state && states[i] && strcmp(state, states[i]) != 0)
    i++;
  if (state && !states[i]) {
    char known[256] = "";
    for (i = 0; states[i]; i++)
      snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s",
               i ? ", " : "", states[i]);
    return dtx__err(DTX_EINVAL, "unknown %s '%s' (%s)", what, state, known);
  }
  json_t *filter = state ? dtx__pack("{s:s}", "state", state) : NULL;
  json_t *sort = dtx__pack("{s:i,s:i}", "created", 1, "_id", 1);
  int rc = sort ? dtx__kit_list(st, coll, filter, sort, page, out)
                : DTX_ENOMEM;
  json_decref(filter);
  json_decref(sort);
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
