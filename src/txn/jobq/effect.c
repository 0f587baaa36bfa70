/* effect.c -- effects of a job on other documents: an effect (job, key)
 * applies at most once over every document of its collection, every
 * attempt and every process -- paused and lingering ones included -- and
 * exactly once for a job that succeeded after applying it (invariant J5;
 * docs/jobs.md, "Effects: exactly once").
 *
 * An effect is read, pinned, bounded and marked.  Its steps:
 *
 *   read    the job: running at the attempt's epoch E, its lease end L
 *           not passed, and its pin for the key (fx_pins.K), if any.
 *           Otherwise DTX_ESTALE, and nothing is written: no index, no
 *           collection.
 *   choose  (no pin yet) the first document of COLL matching FILTER that
 *           holds no marker of (job, key): its _id T.  None: NOMATCH,
 *           nothing written.
 *   fence   job.effect.fence: ONE conditional update of the job,
 *           {_id, state: running, epoch: E, the pin as read, no
 *           cancel_requested (cancel.c)} ->
 *           $addToSet fx_colls COLL, $max fx_until L and, when there was
 *           no pin, $set fx_pins.K {coll, id: T}.  So only the current
 *           epoch pins, a key is pinned once, and fx_until covers L
 *           before any write bounded by L is sent.
 *   apply   job.effect.apply: ONE conditional update of the target,
 *           {_id: T} AND FILTER AND no marker of (job, key) ->
 *           UPDATE + $push dtx_fx {job, key, at, n}, n the call's nonce,
 *           bounded by not_after L:
 *           the store refuses it (DTX_ESTALE) once ITS clock is past L
 *           (doctx.h, "time-bounded writes").
 *   repeat  nothing matched and T holds the marker: {"applied": false},
 *           whatever FILTER says of T now -- but true when the marker is
 *           this call's (its nonce): its write landed, the reply was lost.
 *   void    job.effect.void: T holds no marker and no longer matches
 *           FILTER (another writer took it): {_id: T, no marker} ->
 *           $push dtx_fx {job, key, at, void: true}, bounded by L, so no
 *           late writer of this effect can land on T any more; then
 *   repin   job.effect.repin: {_id, running, epoch: E, fx_pins.K.id: T}
 *           -> fx_pins.K.id = T2 (the next choice), $addToSet
 *           fx_pins.K.voided T, and the loop applies to T2.  With no T2
 *           the pin stays on the voided T and the call is NOMATCH; a
 *           later attempt repins.
 *
 * Invariants:
 *  F1 The update lands only on the document the key's pin names (every
 *     apply filters on {_id: T} read from the pin), and a pin changes only
 *     away from a document that holds a marker of the effect (a void one),
 *     made by the epoch that then repins.
 *  F2 On that document the marker is tested and added in the update's own
 *     atomic step: the update lands at most once there, and a voided
 *     document takes it never.  With F1: at most once in the collection.
 *  F3 Every write an attempt makes for an effect carries not_after = a
 *     lease end L of that attempt, and the job's fx_until >= L before the
 *     write is sent (the fence step): no write of the effect lands once
 *     the store's clock is past fx_until.
 *  F4 Markers are removed only from terminal jobs, by writes bounded by
 *     not_before = fx_until + DTX_JOB_FX_MARGIN_MS (recover.c): by F3 no
 *     write of the effect can land after its marker is gone, however long
 *     its process was paused.
 *  F5 Markers change only by the job's steps: before an effect first
 *     writes to a collection, a transition rule of scope "plain" goes on
 *     it (marker_rule) that refuses any other write changing dtx_fx,
 *     inserting a document carrying it or deleting one that carries a
 *     marker (and so a plain drop of the collection while it holds
 *     documents).  A marker taken off by hand made the next attempt apply
 *     the effect again (the audit cannot see a marker that is gone: a
 *     pinned document deleted and inserted again under its _id was a new
 *     target for the effect); a forged one made it skip.
 * The epoch check of the read and the fence keeps an attempt that knows
 * it is stale from acting; correctness does not rest on it (a paused
 * attempt passes it and writes later), but on F1-F4. */
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/err.h"

/* The pin's field of key: "fx_pins.K" (plus ".sub"), K being key with
 * '.' written '~' -- a key may hold '.', which a path would split, and
 * never '~' (dtx__check_ident), so the encoding is one to one. */
static void pin_path(char *out, size_t n, const char *key, const char *sub) {
  size_t k = (size_t)snprintf(out, n, "%s.", DTX_JOB_PINS);
  for (const char *p = key; *p && k + 1 < n; p++)
    out[k++] = *p == '.' ? '~' : *p;
  out[k < n ? k : n - 1] = 0;
  if (sub && k + 1 < n)
    snprintf(out + k, n - k, ".%s", sub);
}

const json_t *dtx__job_pin(const json_t *job, const char *key) {
  char path[200];
  pin_path(path, sizeof path, key, NULL);
  return json_object_get(json_object_get(job, DTX_JOB_PINS),
                         path + strlen(DTX_JOB_PINS) + 1);
}

/* The job's pin of key (borrowed), or NULL; DTX_ESTATE when it is not
 * {coll: string, id: a value}. */
static int pin_of(const json_t *job, const char *key, const json_t **pin) {
  *pin = dtx__job_pin(job, key);
  if (*pin && (!json_is_object(*pin) || !dtx__str(*pin, "coll") ||
               !json_object_get(*pin, "id")))
    return dtx__err(DTX_ESTATE, "job %s: the pin of effect %s is malformed "
                    "(not {coll, id}); the audit reports it",
                    dtx__str(job, "_id"), key);
  return 0;
}

/* The job, when it is running at epoch with its lease not over: the
 * attempt may act.  DTX_ESTALE otherwise, naming why. */
static int current_job(dtx__exec_t *ex, const char *id, int64_t epoch,
                       json_t **job) {
  int rc = dtx__kit_get(ex, DTX_JOBS, id, job);
  if (rc == DTX_ENOTFOUND)
    return dtx__err(DTX_ESTALE, "job %s does not exist: the effect was not "
                    "applied", id);
  if (rc)
    return rc;
  if (!dtx__state_is(*job, DTX_JOB_RUNNING) ||
      dtx__int(*job, "epoch") != epoch) {
    json_decref(*job);
    *job = NULL;
    return dtx__err(DTX_ESTALE,
                    "job %s is no longer running at epoch %lld (taken over "
                    "or ended): the effect was not applied",
                    id, (long long)epoch);
  }
  if (dtx__job_cancel_requested(*job)) { /* J17: its attempt is ending */
    json_decref(*job);
    *job = NULL;
    return dtx__err(DTX_ESTALE,
                    "job %s was canceled (a cancel was requested): the "
                    "effect was not applied",
                    id);
  }
  int64_t until = dtx__int(*job, "lease_until"), now = dtx__now_ms();
  if (until <= now) {
    json_decref(*job);
    *job = NULL;
    return dtx__err(DTX_ESTALE,
                    "job %s: the lease of attempt %lld ended %lld ms ago "
                    "(recovery takes it over): the effect was not applied",
                    id, (long long)epoch, (long long)(now - until));
  }
  return 0;
}

/* 1 when path is the marker array or inside it. */
static int is_fx_path(const char *path) {
  return dtx__path_covers(DTX_JOB_FX, path);
}

/* The effect's update: operators only (a replacement would drop the
 * markers), none of them on the markers -- a $rename onto them included
 * (the kit's one check, as batch updates and sync make it) -- and the
 * update's own errors (an unknown operator, a bad argument), found
 * before anything is written. */
static int check_fx_update(const json_t *update) {
  int rc = dtx__check_op_update("effect", update, is_fx_path, "the document",
                                "its markers in " DTX_JOB_FX);
  return rc ? rc : dtx_check_update(update, NULL, 0);
}

/* update (checked: check_fx_update) plus the marker push, or NULL (no
 * memory).  The marker carries the call's nonce: the marker found after a
 * write whose reply was lost tells whether this call wrote it. */
static json_t *with_marker(const json_t *update, const char *id,
                           const char *key, const char *nonce, int *rc) {
  *rc = 0;
  json_t *u = json_deep_copy(update);
  json_t *marker = json_pack("{s:s,s:s,s:I,s:s}", "job", id, "key", key,
                             "at", (json_int_t)dtx__now_ms(), "n", nonce);
  json_t *push = u ? json_object_get(u, "$push") : NULL;
  if (!u || !marker) {
    json_decref(u);
    json_decref(marker);
    *rc = DTX_ENOMEM;
    return NULL;
  }
  if (!push) {
    push = json_object();
    json_object_set_new(u, "$push", push);
  }
  json_object_set_new(push, DTX_JOB_FX, marker);
  DTX_ASSERT(*rc == 0, "F2"); /* the marker goes in the update's own step */
  return u;
}

/* {dtx_fx: {$elemMatch: {job, key}}} (present) or its $not: a marker of
 * the effect, void or not. */
static json_t *marker_cond(const char *id, const char *key, int present) {
  json_t *m = json_pack("{s:s,s:s}", "job", id, "key", key);
  return present ? json_pack("{s:{s:o}}", DTX_JOB_FX, "$elemMatch", m)
                 : json_pack("{s:{s:{s:o}}}", DTX_JOB_FX, "$not",
                             "$elemMatch", m);
}

static json_t *id_is(const json_t *t) {
  return json_pack("{s:{s:O}}", "_id", "$eq", t);
}

/* The first document of coll matching filter without a marker of the
 * effect: *t its _id (new reference), NULL when none. */
static int choose(dtx__exec_t *ex, const char *id, const char *key,
                  const char *coll, const json_t *filter, json_t **t) {
  json_t *f = json_pack("{s:[O,o]}", "$and", filter, marker_cond(id, key, 0));
  json_t *docs = NULL;
  *t = NULL;
  int rc = f ? dtx__kit_find_n(ex, coll, f, NULL, 1, &docs) : DTX_ENOMEM;
  json_decref(f);
  if (rc == 0 && json_array_size(docs) > 0)
    *t = json_incref(json_object_get(json_array_get(docs, 0), "_id"));
  json_decref(docs);
  return rc;
}

/* 1 when some document of coll holds a (not void) marker of the effect:
 * one made before effects were pinned. */
static int legacy_marker(dtx__exec_t *ex, const char *id, const char *key,
                         const char *coll, int *found) {
  json_t *f = json_pack("{s:{s:{s:s,s:s,s:{s:b}}}}", DTX_JOB_FX, "$elemMatch",
                        "job", id, "key", key, "void", "$ne", 1);
  json_t *docs = NULL;
  int rc = f ? dtx__kit_find_n(ex, coll, f, NULL, 1, &docs) : DTX_ENOMEM;
  *found = rc == 0 && json_array_size(docs) > 0;
  json_decref(f);
  json_decref(docs);
  return rc;
}

/* The fence step (job.effect.fence): the job still running at epoch,
 * its pin of key as read (pinned: id T; else absent, and then it pins
 * fresh), fx_colls and fx_until raised.  DTX_ENOMATCH when the job moved
 * on or the pin changed meanwhile. */
static int fence(dtx__exec_t *ex, const char *id, int64_t epoch,
                 const char *key, const char *coll, int64_t until,
                 const json_t *pinned, const json_t *fresh) {
  char path[200], idpath[204];
  pin_path(path, sizeof path, key, NULL);
  pin_path(idpath, sizeof idpath, key, "id");
  json_t *f = json_pack("{s:s,s:s,s:I}", "_id", id, "state", DTX_JOB_RUNNING,
                        "epoch", (json_int_t)epoch);
  /* J17: no effect is pinned once a cancel is recorded. */
  if (f)
    json_object_set_new(f, "cancel_requested",
                        json_pack("{s:b}", "$exists", 0));
  json_t *u = json_pack("{s:{s:s},s:{s:I}}", "$addToSet", "fx_colls", coll,
                        "$max", "fx_until", (json_int_t)until);
  if (f && pinned)
    json_object_set_new(f, idpath, json_pack("{s:O}", "$eq", pinned));
  else if (f)
    json_object_set_new(f, path, json_pack("{s:b}", "$exists", 0));
  if (u && fresh)
    json_object_set_new(u, "$set",
                        json_pack("{s:{s:s,s:O}}", path, "coll", coll, "id",
                                  fresh));
  int matched = 0;
  int rc = dtx__kit_update(ex, "job.effect.fence", DTX_JOBS, f, u, &matched);
  return rc ? rc : matched ? 0 : DTX_ENOMATCH;
}

/* The repin step (job.effect.repin): the pin of key moves from the voided
 * t to next, fenced by the epoch and the pin as read.  DTX_ENOMATCH when
 * the job or the pin moved on meanwhile. */
static int repin(dtx__exec_t *ex, const char *id, int64_t epoch,
                 const char *key, int64_t until, const json_t *t,
                 const json_t *next) {
  char idpath[204], vpath[204];
  pin_path(idpath, sizeof idpath, key, "id");
  pin_path(vpath, sizeof vpath, key, "voided");
  json_t *f = json_pack("{s:s,s:s,s:I,s:{s:O}}", "_id", id, "state",
                        DTX_JOB_RUNNING, "epoch", (json_int_t)epoch, idpath,
                        "$eq", t);
  json_t *u = json_pack("{s:{s:O},s:{s:O},s:{s:I}}", "$set", idpath, next,
                        "$addToSet", vpath, t, "$max", "fx_until",
                        (json_int_t)until);
  int matched = 0;
  int rc = dtx__kit_update(ex, "job.effect.repin", DTX_JOBS, f, u, &matched);
  return rc ? rc : matched ? 0 : DTX_ENOMATCH;
}

/* What the pinned document t holds when the apply matched nothing. */
enum { T_MARKED, T_VOID, T_GONE, T_MATCHES, T_OTHER };

static int inspect(dtx__exec_t *ex, const char *id, const char *key,
                   const char *coll, const json_t *filter, const json_t *t,
                   const char *nonce, int *what, int *mine) {
  json_t *f = id_is(t), *docs = NULL;
  int rc = f ? dtx__kit_find_n(ex, coll, f, NULL, 1, &docs) : DTX_ENOMEM;
  json_decref(f);
  if (rc)
    return rc;
  const json_t *d = json_array_get(docs, 0), *m;
  size_t i;
  *what = d ? T_OTHER : T_GONE;
  json_array_foreach(json_object_get(d, DTX_JOB_FX), i, m) {
    if (dtx__str_is(m, "job", id) && dtx__str_is(m, "key", key)) {
      *what = json_is_true(json_object_get(m, "void")) ? T_VOID : T_MARKED;
      *mine = *what == T_MARKED && dtx__str_is(m, "n", nonce);
      break;
    }
  }
  json_decref(docs);
  if (*what == T_OTHER) { /* does it match FILTER again (a race)? */
    json_t *g = json_pack("{s:[o,O]}", "$and", id_is(t), filter), *x = NULL;
    rc = g ? dtx__kit_find_n(ex, coll, g, NULL, 1, &x) : DTX_ENOMEM;
    if (rc == 0 && json_array_size(x) > 0)
      *what = T_MATCHES;
    json_decref(g);
    json_decref(x);
  }
  return rc;
}

/* The void step (job.effect.void): a void marker on t unless it holds a
 * marker of the effect already, bounded by until as every write of the
 * attempt.  *matched: it was written now. */
static int void_target(dtx__exec_t *ex, const char *id, const char *key,
                       const char *coll, const json_t *t, int64_t until,
                       int *matched) {
  json_t *f = json_pack("{s:[o,o]}", "$and", id_is(t),
                        marker_cond(id, key, 0));
  json_t *u = json_pack("{s:{s:{s:s,s:s,s:I,s:b}}}", "$push", DTX_JOB_FX,
                        "job", id, "key", key, "at",
                        (json_int_t)dtx__now_ms(), "void", 1);
  dtx_update_opts_t uo = {.not_after = until};
  DTX_ASSERT(until > 0, "F3"); /* bounded as every write of the attempt */
  return dtx__kit_update_ex(ex, "job.effect.void", coll, f, u, &uo, matched);
}

/* "COLL ID" of a target, for details. */
static void target_name(const char *coll, const json_t *t, char *out,
                        size_t n) {
  char *s = json_dumps(t, JSON_ENCODE_ANY | JSON_COMPACT);
  snprintf(out, n, "%s %.120s", coll, s ? s : "?");
  free(s);
}

/* The plain-write rule on the markers (F5): a plain write -- the generic
 * commands, another pattern's step (a batch update, a sync copy), a
 * program's own store calls -- may not change a document's markers nor
 * insert one carrying any; the job's own steps (apply, void, recovery's
 * pull) still do. */
static const char marker_rule[] =
    "{\"pattern\":\"job\",\"scope\":\"plain\",\"steps\":[\"job\"],"
    "\"immutable\":[\"" DTX_JOB_FX "\"],"
    "\"insert\":{\"" DTX_JOB_FX "\":{\"$exists\":false}},"
    "\"delete\":{\"$or\":[{\"" DTX_JOB_FX "\":{\"$exists\":false}},"
    "{\"" DTX_JOB_FX "\":{\"$size\":0}}]},"
    "\"why\":\"job effect markers make each effect land once; only "
    "doctx's job steps change them (docs/jobs.md)\"}";

typedef struct fx {
  dtx__exec_t *ex;
  const char *id, *key, *coll;
  int64_t epoch;
  const json_t *filter;
  json_t *u; /* the update with its marker */
  char nonce[25]; /* this call's, in its marker */
  dtx_update_opts_t uo; /* the user's fence; not_after set per round */
} fx_t;

/* One round: read, choose, fence, apply, and what follows when the apply
 * matched nothing.  *again: a race was lost or the pin moved; the caller
 * runs another round. */
static int round_once(fx_t *x, int *indexed, int *applied, int *again) {
  json_t *job = NULL, *t = NULL, *next = NULL, *f;
  const json_t *pin = NULL;
  char who[200];
  int rc, matched = 0, what = 0, mine = 0;
  int64_t until = 0;
  *again = 0;
  if ((rc = current_job(x->ex, x->id, x->epoch, &job)) ||
      (rc = pin_of(job, x->key, &pin)))
    goto out;
  until = dtx__int(job, "lease_until");
  if (pin && strcmp(dtx__str(pin, "coll"), x->coll) != 0) {
    rc = dtx__err(DTX_ECONFLICT, "effect %s of job %s is pinned to a "
                  "document of %s, not %s: an effect key names one effect",
                  x->key, x->id, dtx__str(pin, "coll"), x->coll);
    goto out;
  }
  if (pin) {
    t = json_incref(json_object_get(pin, "id"));
  } else {
    /* A job that lists coll but has no pin of the key may hold a marker
     * made before effects were pinned: that one counts. */
    int found = 0;
    if (dtx__lists(job, "fx_colls", x->coll) &&
        (rc = legacy_marker(x->ex, x->id, x->key, x->coll, &found)))
      goto out;
    if (found)
      goto out; /* a repeat */
    if ((rc = choose(x->ex, x->id, x->key, x->coll, x->filter, &t)))
      goto out;
    if (!t) {
      rc = dtx__err(DTX_ENOMATCH, "effect %s of job %s: no document of %s "
                    "matches the filter", x->key, x->id, x->coll);
      goto out;
    }
  }
  /* The marker index serves recovery and the audit (which scans every
   * collection carrying it), and the markers' rule keeps plain writes off
   * them (F5); made once per store, before the first marker, and only now
   * that the attempt is known current and has a target. */
  if (!*indexed) {
    json_t *ik = json_pack("{s:i}", DTX_JOB_FX ".job", 1);
    rc = ik ? dtx__kit_guard_coll(x->ex->st, x->coll, marker_rule)
            : DTX_ENOMEM;
    if (rc)
      rc = dtx__err_wrap(rc, "effect %s of job %s: guarding the markers in "
                         "%s", x->key, x->id, x->coll);
    else
      rc = dtx_store_create_index(x->ex->st, x->coll, ik, NULL, NULL);
    json_decref(ik);
    if (rc)
      goto out;
    *indexed = 1;
  }
  rc = fence(x->ex, x->id, x->epoch, x->key, x->coll, until, pin ? t : NULL,
             pin ? NULL : t);
  if (rc == DTX_ENOMATCH) { /* stale (the next read says so) or repinned */
    *again = 1;
    rc = 0;
    goto out;
  }
  if (rc)
    goto out;
  /* F3: the write carries a lease end of this attempt, which the fence
   * step just raised fx_until to (current_job: until > now). */
  DTX_ASSERT(until > 0 && x->epoch >= 1, "F3");
  x->uo.not_after = until;
  f = json_pack("{s:[o,O,o]}", "$and", id_is(t), x->filter,
                        marker_cond(x->id, x->key, 0));
  if ((rc = dtx__kit_update_ex(x->ex, "job.effect.apply", x->coll, f,
                               json_incref(x->u), &x->uo, &matched)) ||
      matched) {
    *applied = rc == 0;
    goto out;
  }
  if ((rc = inspect(x->ex, x->id, x->key, x->coll, x->filter, t, x->nonce,
                    &what, &mine)))
    goto out;
  target_name(x->coll, t, who, sizeof who);
  switch (what) {
  case T_MARKED: /* a repeat: it landed before, whatever FILTER says now;
                  * or this call's own write, whose reply was lost */
    *applied = mine;
    goto out;
  case T_GONE:
    rc = dtx__err(DTX_ENOMATCH, "effect %s of job %s is pinned to %s, which "
                  "no longer exists: it may have applied there, so it is "
                  "applied to no other document", x->key, x->id, who);
    goto out;
  case T_MATCHES: /* it changed back under us */
    *again = 1;
    goto out;
  case T_OTHER:
    if ((rc = void_target(x->ex, x->id, x->key, x->coll, t, until,
                          &matched)))
      goto out;
    if (!matched) { /* a marker came meanwhile: look again */
      *again = 1;
      goto out;
    }
    break;
  default: /* T_VOID: voided before, not yet repinned */
    break;
  }
  if ((rc = choose(x->ex, x->id, x->key, x->coll, x->filter, &next)))
    goto out;
  if (!next) {
    rc = dtx__err(DTX_ENOMATCH, "effect %s of job %s: its document %s no "
                  "longer matches the filter and was voided; no other "
                  "document of %s matches it", x->key, x->id, who, x->coll);
    goto out;
  }
  rc = repin(x->ex, x->id, x->epoch, x->key, until, t, next);
  if (rc == 0 || rc == DTX_ENOMATCH) {
    *again = 1; /* apply to the new pin, or read what moved */
    rc = 0;
  }
out:
  json_decref(job);
  json_decref(t);
  json_decref(next);
  return rc;
}

int dtx_job_effect_check(const char *id, int64_t epoch, const char *key,
                         const char *coll, const json_t *filter,
                         const json_t *update,
                         const dtx_job_effect_opts_t *eo) {
  int rc;
  dtx__err_clear();
  if (eo && eo->fence_name &&
      (rc = dtx_check_fence(eo->fence_name, eo->fence_token)))
    return rc;
  if ((rc = dtx__check_ident("job id", id)) ||
      (rc = dtx__check_ident("effect key", key)))
    return rc;
  /* A protocol's documents change only through its steps: an effect's
   * $inc on accounts would make money up, one on jobs rewrite a job. */
  if ((rc = dtx__check_user_coll("effect", coll ? coll : "")))
    return rc;
  if (!json_is_object(filter))
    return dtx__err(DTX_EBADQUERY, "an effect's filter must be an object");
  if ((rc = dtx_check_filter(filter)))
    return rc;
  if (epoch < 1)
    return dtx__err(DTX_EINVAL, "epoch must be >= 1, got %lld",
                    (long long)epoch);
  return check_fx_update(update);
}

static int apply(dtx__exec_t *ex, const char *id, int64_t epoch,
                 const char *key, const char *coll, const json_t *filter,
                 const json_t *update, const dtx_job_effect_opts_t *eo,
                 int *applied) {
  int rc;
  *applied = 0;
  fx_t x = {.ex = ex, .id = id, .key = key, .coll = coll, .epoch = epoch,
            .filter = filter,
            .uo = {.fence_name = eo ? eo->fence_name : NULL,
                   .fence_token = eo ? eo->fence_token : 0}};
  /* Every usage error before the first write (and the first read). */
  if ((rc = dtx_job_effect_check(id, epoch, key, coll, filter, update, eo)))
    return rc;
  dtx__id_new(x.nonce);
  if (!(x.u = with_marker(update, id, key, x.nonce, &rc)))
    return rc;
  dtx__contend_t ct = {0};
  int indexed = 0, again = 0;
  do
    rc = round_once(&x, &indexed, applied, &again);
  while (rc == 0 && again &&
         dtx__kit_contend(&ct, &rc, "applying a job's effect"));
  json_decref(x.u);
  DTX_ASSERT(!rc || !*applied, "F2"); /* applied only by a round's end */
  return rc;
}

int dtx_job_effect_ex(dtx_job_run_t *run, const char *key, const char *coll,
                      const json_t *filter, const json_t *update,
                      const dtx_job_effect_opts_t *opts, int *applied) {
  int dummy;
  if (!applied)
    applied = &dummy;
  if (atomic_load(&run->lost)) {
    *applied = 0;
    return dtx__err(DTX_ESTALE, "job %s: this attempt lost its lease",
                    run->id);
  }
  dtx__call_t c;
  dtx__call_begin(&c, run->ex->deadline_ms);
  return dtx__call_end(&c, apply(run->ex, run->id, run->epoch, key, coll,
                                 filter, update, opts, applied));
}

int dtx_job_effect(dtx_job_run_t *run, const char *key, const char *coll,
                   const json_t *filter, const json_t *update, int *applied) {
  return dtx_job_effect_ex(run, key, coll, filter, update, NULL, applied);
}

int dtx_job_effect_at_ex(dtx_store_t *st, const char *job_id, int64_t epoch,
                         const char *key, const char *coll,
                         const json_t *filter, const json_t *update,
                         const dtx_job_effect_opts_t *opts, int *applied) {
  dtx__exec_t ex;
  dtx__call_t c;
  int dummy;
  if (!applied)
    applied = &dummy;
  dtx__call_begin(&c, 0);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  return dtx__call_end(&c, apply(&ex, job_id, epoch, key, coll, filter,
                                 update, opts, applied));
}

int dtx_job_effect_at(dtx_store_t *st, const char *job_id, int64_t epoch,
                      const char *key, const char *coll, const json_t *filter,
                      const json_t *update, int *applied) {
  return dtx_job_effect_at_ex(st, job_id, epoch, key, coll, filter, update,
                              NULL, applied);
}
