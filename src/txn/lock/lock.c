/* lock.c -- lease locks with fencing tokens (issue 12, docs/locks.md).
 *
 * A lock is one document of DTX_LOCKS, _id = its name, never deleted, so
 * its token only grows.  Each operation is ONE conditional update of it;
 * a lease alone does not exclude a paused holder, so the token it hands
 * out is meant as the fence of every protected write (the store refuses
 * an older token: src/store/fence.c).
 *
 *             acquire (expires <= now; upsert when missing): token + 1
 *   free  --------------------------------------------------------> held
 *    ^  ^                                                          | |
 *    |  +------------------ release (token = T, owner set) --------+ |
 *    |                                                               |
 *    +--- the lease lapses (expires <= now): acquirable again -------+
 *         renew (token = T, owner set): expires = now + ttl, stays held
 *
 *   transition         function        fault point
 *   free/lapsed->held  lock_acquire    lock.acquire (before the update),
 *                                      lock.acquired (after it, before the
 *                                      token is returned)
 *   held->held         lock_renew      lock.renew
 *   held->free         lock_release    lock.release
 *
 * Invariants (the audit checks 2 against the fenced documents; asserts
 * check 1 on every acquire):
 *   1. an acquire returns the stored token after its own $inc: greater than
 *      every token returned before for that name (the document is never
 *      deleted; its delete guard matches nothing);
 *   2. no fenced write recorded a token of NAME above the lock's token (a
 *      lock whose token went back -- restored, or edited by hand -- would
 *      hand out a token the resources already refuse, or worse, accept);
 *   3. at most one live lease: acquire's filter requires expires <= now,
 *      and a live lease has expires > now.  (The lease is judged by the
 *      acquiring client's clock: a skewed clock may end a lease early,
 *      which is exactly what the fence is for.)
 *
 * A retried acquire whose first attempt landed but whose reply was lost
 * finds the lock held (DUPKEY): the nonce it wrote tells it the holder is
 * itself. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/kit.h"
#include "util/err.h"

#define DTX_LOCKS "locks"
#define MAX_TTL_MS (366LL * 24 * 3600 * 1000)

extern const dtx__pattern_t dtx__lock_pattern;

/* The view every call returns. */
static json_t *view(const json_t *doc, int64_t now) {
  const json_t *owner = json_object_get(doc, "owner");
  int64_t expires = dtx__int(doc, "expires");
  return json_pack("{s:O,s:O,s:I,s:I,s:b}", "name",
                   json_object_get(doc, "_id"), "owner",
                   owner ? owner : json_null(), "token",
                   (json_int_t)dtx__int(doc, "token"), "expires",
                   (json_int_t)expires, "held",
                   json_is_string(owner) && expires > now);
}

static int set_out(const json_t *doc, json_t **out) {
  if (!out)
    return 0;
  *out = view(doc, dtx__now_ms());
  return *out ? 0 : DTX_ENOMEM;
}

static int check_ttl(int64_t ttl) {
  if (ttl < 0 || ttl > MAX_TTL_MS)
    return dtx__err(DTX_EINVAL, "lock ttl %lld ms: must be 1..%lld",
                    (long long)ttl, (long long)MAX_TTL_MS);
  return 0;
}

static int check_args(const char *name, const dtx_lock_opts_t *o) {
  int rc = dtx__check_ident("lock name", name);
  if (rc == 0 && o) {
    rc = check_ttl(o->ttl_ms);
    if (rc == 0 && o->wait_ms < 0)
      rc = dtx__err(DTX_EINVAL, "lock wait %lld ms: must be >= 0",
                    (long long)o->wait_ms);
    if (rc == 0 && o->owner && *o->owner)
      rc = dtx__check_ident("lock owner", o->owner);
  }
  return rc;
}

static int check_token(const char *name, int64_t token) {
  if (token < 1)
    return dtx__err(DTX_EINVAL, "lock '%s': token %lld: must be >= 1", name,
                    (long long)token);
  return 0;
}

/* "held by O (token N) for another M ms" */
static int held_error(const char *name, const json_t *doc) {
  const char *owner = dtx__str(doc, "owner");
  int64_t left = dtx__sub_sat(dtx__int(doc, "expires"), dtx__now_ms());
  return dtx__err(DTX_ENOMATCH,
                  "lock '%s' is held by %s (token %lld) for another %lld ms",
                  name, owner ? owner : "?", (long long)dtx__int(doc, "token"),
                  (long long)(left > 0 ? left : 0));
}

/* One acquire attempt: 0 and *doc (the lock after it) when taken; 1 and
 * *doc (as read) when held by another; or an error. */
static int try_acquire(dtx__exec_t *ex, const char *name, int64_t ttl,
                       json_t **doc) {
  char nonce[25];
  dtx__id_new(nonce);
  int64_t now = dtx__now_ms();
  json_t *filter = json_pack("{s:s,s:{s:I}}", "_id", name, "expires", "$lte",
                             (json_int_t)now);
  json_t *update = json_pack(
      "{s:{s:i},s:{s:s,s:I,s:I,s:I,s:I,s:s}}", "$inc", "token", 1, "$set",
      "owner", ex->owner, "expires", (json_int_t)(now + ttl), "ttl",
      (json_int_t)ttl, "acquired", (json_int_t)now, "updated",
      (json_int_t)now, "nonce", nonce);
  dtx_fam_opts_t o = {.upsert = 1, .return_new = 1};
  int rc = dtx__kit_modify_ex(ex, "lock.acquire", DTX_LOCKS, filter, update,
                              &o, doc);
  if (rc != DTX_EDUPKEY && rc != DTX_ENOMATCH)
    return rc;
  /* The document exists and its lease is live: someone holds it -- maybe
   * this very call, when an earlier attempt's reply was lost. */
  dtx__err_clear();
  rc = dtx__kit_get(ex, DTX_LOCKS, name, doc);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_ECONFLICT, "lock '%s' vanished while acquiring "
                    "(deleted by hand?)", name);
  if (rc)
    return rc;
  return dtx__str_is(*doc, "nonce", nonce) ? 0 : 1;
}

static int acquire(dtx_store_t *st, const char *name,
                   const dtx_lock_opts_t *o, json_t **out) {
  dtx__exec_t ex;
  int rc = check_args(name, o);
  if (rc)
    return rc;
  dtx__exec_init(&ex, st, o->owner, o->ttl_ms, o->deadline_ms);
  if ((rc = dtx__kit_ensure(st, &dtx__lock_pattern)))
    return rc;
  /* Saturated: a wait too large for int64 is "wait as long as it takes"
   * (docs/deadlines.md), not a wait that wrapped and gave up at once. */
  int64_t until = dtx__add_sat(dtx__mono_ms(), o->wait_ms), pause = 5;
  for (;;) {
    json_t *doc = NULL;
    rc = try_acquire(&ex, name, ex.lease_ms, &doc);
    if (rc == 0) {
      assert(dtx__int(doc, "token") >= 1); /* invariant 1 */
      /* Taken, the token not yet handed out: where Kleppmann's holder is
       * paused (GC, SIGSTOP) past its lease.  An error here leaves the
       * lock to lapse. */
      rc = DTX_FAULTPOINT("lock.acquired");
      if (rc == 0)
        rc = set_out(doc, out);
      json_decref(doc);
      return rc;
    }
    if (rc < 0)
      return rc;
    /* Held: wait for its lease to run out, a release, or the budget. */
    int64_t left = until - dtx__mono_ms();
    int64_t dl = dtx__deadline_left_ms();
    if (left <= 0 || dl <= 0) {
      rc = held_error(name, doc);
      json_decref(doc);
      return rc;
    }
    int64_t lapse =
        dtx__add_sat(dtx__sub_sat(dtx__int(doc, "expires"), dtx__now_ms()), 1);
    json_decref(doc);
    int64_t nap = pause;
    if (lapse > 0 && lapse < nap)
      nap = lapse;
    if (nap > left)
      nap = left;
    dtx__deadline_sleep_ms(nap);
    if (pause < 200)
      pause *= 2;
  }
}

int dtx_lock_acquire(dtx_store_t *st, const char *name,
                     const dtx_lock_opts_t *opts, json_t **out) {
  dtx_lock_opts_t o = opts ? *opts : (dtx_lock_opts_t){0};
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, o.deadline_ms);
  return dtx__call_end(&c, acquire(st, name, &o, out));
}

/* Why token is not current, read after a conditional update missed. */
static int not_current(dtx__exec_t *ex, const char *name, int64_t token) {
  json_t *doc = NULL;
  int rc = dtx__kit_get(ex, DTX_LOCKS, name, &doc);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_ENOTFOUND, "no lock '%s'", name);
  if (rc)
    return rc;
  int64_t cur = dtx__int(doc, "token");
  const char *owner = dtx__str(doc, "owner");
  json_decref(doc);
  if (cur == token && !owner)
    return dtx__err(DTX_ENOMATCH, "lock '%s': token %lld was released", name,
                    (long long)token);
  return dtx__err(DTX_ENOMATCH,
                  "lock '%s': token %lld is no longer current (token %lld%s)",
                  name, (long long)token, (long long)cur,
                  owner ? " is held" : " was released");
}

/* renew (release = 0) or release (1) of token: one update filtered on
 * {_id, token, owner != null}. */
static int change(dtx_store_t *st, const char *name, int64_t token,
                  const dtx_lock_opts_t *o, int release, json_t **out) {
  dtx__exec_t ex;
  int rc = check_args(name, o);
  if (rc == 0)
    rc = check_token(name, token);
  if (rc)
    return rc;
  dtx__exec_init(&ex, st, NULL, 0, o->deadline_ms);
  if ((rc = dtx__kit_ensure(st, &dtx__lock_pattern)))
    return rc;
  int64_t now = dtx__now_ms();
  json_t *filter = json_pack("{s:s,s:I,s:{s:n}}", "_id", name, "token",
                             (json_int_t)token, "owner", "$ne");
  json_t *update;
  if (release) {
    update = json_pack("{s:{s:n,s:I,s:I}}", "$set", "owner", "expires",
                       (json_int_t)0, "updated", (json_int_t)now);
  } else if (o->ttl_ms > 0) {
    update = json_pack("{s:{s:I,s:I,s:I}}", "$set", "expires",
                       (json_int_t)(now + o->ttl_ms), "ttl",
                       (json_int_t)o->ttl_ms, "updated", (json_int_t)now);
  } else {
    /* The lock's own ttl: expires = now + ttl in one step needs the
     * stored value, so read it (a renew racing a re-acquire is still
     * decided by the filter on the token). */
    json_t *doc = NULL;
    rc = dtx__kit_get(&ex, DTX_LOCKS, name, &doc);
    int64_t ttl = rc == 0 ? dtx__int(doc, "ttl") : 0;
    json_decref(doc);
    if (rc == DTX_ENOTFOUND) {
      json_decref(filter);
      return dtx__err(DTX_ENOTFOUND, "no lock '%s'", name);
    }
    if (rc) {
      json_decref(filter);
      return rc;
    }
    if (ttl <= 0)
      ttl = DTX__DEFAULT_LEASE_MS;
    /* The stored ttl is what any write left (the validator bounds it
     * below only): saturate, never wrap into a lease that lapsed. */
    update = json_pack("{s:{s:I,s:I}}", "$set", "expires",
                       (json_int_t)dtx__add_sat(now, ttl), "updated",
                       (json_int_t)now);
  }
  json_t *doc = NULL;
  rc = dtx__kit_modify(&ex, release ? "lock.release" : "lock.renew",
                       DTX_LOCKS, filter, update, NULL, &doc);
  if (rc == DTX_ENOMATCH)
    return not_current(&ex, name, token);
  if (rc == 0)
    rc = set_out(doc, out);
  json_decref(doc);
  return rc;
}

int dtx_lock_renew(dtx_store_t *st, const char *name, int64_t token,
                   const dtx_lock_opts_t *opts, json_t **out) {
  dtx_lock_opts_t o = opts ? *opts : (dtx_lock_opts_t){0};
  o.wait_ms = 0;
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, o.deadline_ms);
  return dtx__call_end(&c, change(st, name, token, &o, 0, out));
}

int dtx_lock_release(dtx_store_t *st, const char *name, int64_t token,
                     json_t **out) {
  dtx_lock_opts_t o = {0};
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, change(st, name, token, &o, 1, out));
}

int dtx_lock_get(dtx_store_t *st, const char *name, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *doc = NULL;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx__check_ident("lock name", name);
  if (rc == 0) {
    dtx__exec_init(&ex, st, NULL, 0, 0);
    rc = dtx__kit_get(&ex, DTX_LOCKS, name, &doc);
    if (rc == DTX_ENOTFOUND)
      rc = dtx__err(DTX_ENOTFOUND, "no lock '%s'", name);
  }
  if (rc == 0)
    rc = set_out(doc, out);
  json_decref(doc);
  return dtx__call_end(&c, rc);
}

int dtx_lock_list(dtx_store_t *st, const dtx_page_t *page, json_t **out) {
  dtx__call_t c;
  json_t *all = NULL;
  *out = NULL;
  dtx__call_begin(&c, 0);
  int rc = dtx__kit_list(st, DTX_LOCKS, NULL, NULL, page, &all);
  if (rc == 0 && !(*out = json_array()))
    rc = DTX_ENOMEM;
  int64_t now = dtx__now_ms();
  size_t i;
  json_t *d;
  if (rc == 0)
    json_array_foreach(all, i, d) {
      if (json_array_append_new(*out, view(d, now))) {
        rc = DTX_ENOMEM;
        break;
      }
    }
  json_decref(all);
  if (rc) {
    json_decref(*out);
    *out = NULL;
  }
  return dtx__call_end(&c, rc);
}

/* ---- audit (invariant 2) ------------------------------------------------------ */

/* Largest token of each lock name recorded by fenced writes in coll, into
 * seen {NAME: {"token": n, "where": "coll 'id'"}}. */
static int scan_fences(dtx_store_t *st, const char *coll, json_t *seen) {
  json_t *filter = json_pack("{s:{s:b}}", "_fence", "$exists", 1);
  json_t *docs = NULL;
  int rc = filter ? dtx_store_find(st, coll, filter, NULL, &docs) : DTX_ENOMEM;
  json_decref(filter);
  size_t i;
  json_t *d;
  if (rc == 0)
    json_array_foreach(docs, i, d) {
      const char *k;
      json_t *v;
      json_object_foreach(json_object_get(d, "_fence"), k, v) {
        if (!json_is_integer(v))
          continue;
        json_t *cur = json_object_get(seen, k);
        if (cur && dtx__int(cur, "token") >= json_integer_value(v))
          continue;
        char where[300];
        const json_t *id = json_object_get(d, "_id");
        snprintf(where, sizeof where, "%s '%s'", coll,
                 json_is_string(id) ? json_string_value(id) : "?");
        json_object_set_new(seen, k,
                            json_pack("{s:I,s:s}", "token",
                                      (json_int_t)json_integer_value(v),
                                      "where", where));
      }
    }
  json_decref(docs);
  return rc;
}

static int lock_audit(dtx__audit_t *a) {
  json_t *colls = NULL, *seen = json_object(), *locks = NULL;
  int64_t n = 0, held = 0, fenced_names = 0;
  int rc = seen ? dtx_store_list_collections(a->st, &colls) : DTX_ENOMEM;
  size_t i;
  json_t *c;
  int has_locks = 0;
  if (rc == 0)
    json_array_foreach(colls, i, c) has_locks |=
        json_is_string(c) && strcmp(json_string_value(c), DTX_LOCKS) == 0;
  /* The worker and recovery set every pattern up, so "locks" exists in
   * stores that never took a lock: scan the other collections only when
   * there is a lock to judge (a store of transfers pays one count). */
  int64_t nlocks = 0;
  if (rc == 0 && has_locks)
    rc = dtx_store_count(a->st, DTX_LOCKS, NULL, &nlocks);
  has_locks = has_locks && nlocks > 0;
  /* The fenced documents first, the locks after: tokens only grow, so a
   * lock read later holds at least the token it had when a document was
   * read -- an acquire in between cannot look like a regression. */
  if (rc == 0 && has_locks)
    json_array_foreach(colls, i, c) {
      const char *name = json_string_value(c);
      if (!name || strcmp(name, DTX_LOCKS) == 0)
        continue;
      if ((rc = scan_fences(a->st, name, seen)))
        break;
    }
  if (rc == 0 && has_locks)
    rc = dtx__audit_load(a, DTX_LOCKS, &locks);
  if (rc == 0 && locks) {
    int64_t now = dtx__now_ms();
    const char *k;
    json_t *l;
    json_object_foreach(locks, k, l) {
      n++;
      held += json_is_string(json_object_get(l, "owner")) &&
              dtx__int(l, "expires") > now;
      json_t *s = json_object_get(seen, k);
      if (!s)
        continue;
      fenced_names++;
      if (dtx__int(s, "token") > dtx__int(l, "token"))
        dtx__audit_finding(a, "lock_token_regressed",
                           "lock '%s' holds token %lld, below token %lld "
                           "already used in a fenced write of %s",
                           k, (long long)dtx__int(l, "token"),
                           (long long)dtx__int(s, "token"),
                           dtx__str(s, "where"));
    }
  }
  if (rc == 0) {
    dtx__audit_set(a, "locks", json_integer(n));
    dtx__audit_set(a, "held", json_integer(held));
    dtx__audit_summary(a, "%lld locks, %lld held, %lld fenced by writes",
                       (long long)n, (long long)held,
                       (long long)fenced_names);
  }
  json_decref(colls);
  json_decref(seen);
  json_decref(locks);
  return rc;
}

/* ---- the pattern ----------------------------------------------------------------- */

static const char *const collections[] = {DTX_LOCKS, NULL};
static const dtx__index_def_t indexes[] = {{NULL, NULL, 0, 0}};

#define LONG "{\"bsonType\":\"long\"}"
static const char lock_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"owner\",\"token\",\"expires\",\"ttl\","
    "\"acquired\",\"updated\",\"nonce\"],"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128},"
    "\"owner\":{\"bsonType\":[\"string\",\"null\"]},"
    "\"token\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"expires\":" LONG ",\"ttl\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"acquired\":" LONG ",\"updated\":" LONG ","
    "\"nonce\":{\"bsonType\":\"string\"}}}}";
#undef LONG

static const dtx__rules_def_t rules[] = {
    /* Never deleted (token >= 1 is required, so the guard matches
     * nothing): a deleted lock would start again at token 1. */
    {DTX_LOCKS, lock_shape, "{\"token\":{\"$lt\":0}}", NULL},
    {NULL, NULL, NULL, NULL},
};

static const char *const fault_points[] = {
    "lock.acquire",
    "lock.acquired",
    "lock.renew",
    "lock.release",
    NULL,
};

const dtx__pattern_t dtx__lock_pattern = {
    .name = "lock",
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .audit = lock_audit,
    .rules = rules,
};
