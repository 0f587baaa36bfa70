/* txn.c -- the multi-document transaction handle: options, begin, reads
 * at the snapshot (resolving the intents they meet), buffered writes,
 * abort, free and the retrying runner.  The commit protocol is commit.c;
 * docs/transactions.md is the design.
 *
 * A read of a document at snapshot S (docs/transactions.md, "Snapshot
 * reads"): an intent of another transaction is resolved by its record
 * first (dtx__txn_resolve: rolled forward, cleared, or waited on while
 * its lease lives); then the body when _txn.v <= S, else the previous
 * version kept in _txn.p when p.v <= S, else "snapshot too old"
 * (DTX_ECONFLICT).  Every document read is remembered in the handle (its
 * version, whether the view is the latest), so a second read gives the
 * same answer and the commit conditions each write on what was read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/multi/multi.h"
#include "util/err.h"

const json_t *dtx__txn_meta(const json_t *doc) {
  const json_t *m = json_object_get(doc, DTX__TXN_FIELD);
  return json_is_object(m) ? m : NULL;
}

json_t *dtx__txn_body(const json_t *doc) {
  json_t *b = json_copy((json_t *)doc);
  if (b)
    json_object_del(b, DTX__TXN_FIELD);
  return b;
}

/* ---- options ------------------------------------------------------------ */

int dtx_txn_opts_check(const dtx_txn_opts_t *o) {
  if (!o)
    return 0;
  if (o->isolation != DTX_TXN_SNAPSHOT && o->isolation != DTX_TXN_SERIALIZABLE)
    return dtx__err(DTX_EINVAL, "txn: isolation %d is neither snapshot (0) "
                                "nor serializable (1)",
                    o->isolation);
  if (o->lease_ms < 0 || o->lease_ms > DTX__MAX_LEASE_MS)
    return dtx__err(DTX_EINVAL, "txn: lease_ms %lld is not in 0..%lld",
                    (long long)o->lease_ms, (long long)DTX__MAX_LEASE_MS);
  if (o->deadline_ms < 0 || o->deadline_ms > DTX__MAX_DELAY_MS)
    return dtx__err(DTX_EINVAL, "txn: deadline_ms %lld is not in 0..%lld",
                    (long long)o->deadline_ms, (long long)DTX__MAX_DELAY_MS);
  if (o->max_age_ms < 0 || o->max_age_ms > DTX__TXN_MAX_AGE_MS)
    return dtx__err(DTX_EINVAL, "txn: max_age_ms %lld is not in 0..%lld "
                                "(recovery collects older versions)",
                    (long long)o->max_age_ms, (long long)DTX__TXN_MAX_AGE_MS);
  int rc = o->id ? dtx__check_ident("txn id", o->id) : 0;
  if (rc)
    return rc;
  /* "t" and 24 hex digits is a generated id (dtx_txn_begin): a caller's
   * record under one -- a 1PC commit's _txn.by, which a plain read
   * shows -- made the audit judge that version by the caller's record. */
  if (o->id && strlen(o->id) == 25 && o->id[0] == 't' &&
      strspn(o->id + 1, "0123456789abcdef") == 24)
    return dtx__err(DTX_EINVAL, "txn id '%s': t and 24 hex digits is the "
                                "form of doctx's generated ids",
                    o->id);
  return 0;
}

int dtx__txn_age_check(dtx_txn_t *t) {
  int64_t age = dtx__now_ms() - t->begin_ms;
  if (age <= t->max_age_ms)
    return 0;
  return dtx__err(DTX_ECONFLICT, "txn %s: snapshot too old: begun %lld ms "
                                 "ago, past its maximum age of %lld ms "
                                 "(older versions may be collected)",
                  t->id, (long long)age, (long long)t->max_age_ms);
}

static int64_t budget_of(const dtx_txn_opts_t *o) {
  return o && o->deadline_ms ? o->deadline_ms : DTX__TXN_DEADLINE_MS;
}

/* ---- the clock ------------------------------------------------------------ */

/* One $inc of the counter document per commit timestamp (a snapshot
 * reads the counter: clock_read below), never batched: a
 * timestamp handed out after another was returned is larger, which T4
 * and T6 need (docs/transactions.md, "Timestamps").  A retry after a lost
 * reply skips a number; that is harmless. */
int dtx__txn_tick(dtx__exec_t *ex, int64_t *ts) {
  dtx_fam_opts_t fo = {.upsert = 1, .return_new = 1};
  json_t *out = NULL;
  int rc = dtx__kit_modify_ex(ex, "txn.clock", DTX__TXN_CLOCK,
                              json_pack("{s:s}", "_id", "clock"),
                              json_pack("{s:{s:i}}", "$inc", "ts", 1), &fo,
                              &out);
  if (rc == 0) {
    json_t *v = json_object_get(out, "ts");
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
      rc = dtx__err(DTX_ESTATE, "txn: the clock document %s/clock holds no "
                                "positive integer ts",
                    DTX__TXN_CLOCK);
    else
      *ts = json_integer_value(v);
  }
  json_decref(out);
  return rc;
}

/* The clock's current value, READ (not advanced): a transaction's
 * snapshot S.  Safe by T4 (docs/transactions.md, "Timestamps", where
 * each case is argued): the counter is one document changed only
 * by +1 steps, so a value S read means every tick C <= S had already
 * been handed out when the read ran, and its committer had written all
 * its intents before taking C; a reader at S therefore meets, for any
 * commit C <= S, the intent (resolved by the record) or the rolled-
 * forward body.  A tick returned after the read is > S (the counter only
 * grows), which is all T6 needs (C > the versions read).  No clock
 * document yet: 0 (nothing committed; untouched documents are version
 * 0).  Same fault point as a tick, so the points a transaction passes
 * keep their order. */
static int clock_read(dtx__exec_t *ex, int64_t *ts) {
  json_t *d = NULL;
  int rc = dtx__kit_point("txn.clock", "reading the clock");
  if (rc == 0)
    rc = dtx__kit_get(ex, DTX__TXN_CLOCK, "clock", &d);
  if (rc == DTX_ENOTFOUND) {
    *ts = 0;
    return 0;
  }
  if (rc == 0) {
    json_t *v = json_object_get(d, "ts");
    if (!json_is_integer(v) || json_integer_value(v) < 0)
      rc = dtx__err(DTX_ESTATE, "txn: the clock document %s/clock holds no "
                                "integer ts >= 0",
                    DTX__TXN_CLOCK);
    else
      *ts = json_integer_value(v);
  }
  json_decref(d);
  return rc;
}

/* ---- begin, free, abort ----------------------------------------------------- */

int dtx_txn_begin(dtx_store_t *st, const dtx_txn_opts_t *opts,
                  dtx_txn_t **out) {
  dtx__call_t c;
  *out = NULL;
  int rc = dtx_txn_opts_check(opts);
  if (rc)
    return rc;
  dtx__call_begin(&c, budget_of(opts));
  dtx_txn_t *t = calloc(1, sizeof *t);
  if (!t)
    return dtx__call_end(&c, DTX_ENOMEM);
  t->st = st;
  t->isolation = opts ? opts->isolation : DTX_TXN_SNAPSHOT;
  rc = dtx__exec_init(&t->ex, st, NULL,
                      opts && opts->lease_ms ? opts->lease_ms
                                             : DTX__TXN_LEASE_MS,
                      budget_of(opts));
  char oid[25];
  dtx__id_new(oid);
  if (opts && opts->id) {
    snprintf(t->id, sizeof t->id, "%s", opts->id);
    t->caller_id = 1;
  } else {
    snprintf(t->id, sizeof t->id, "t%s", oid);
  }
  /* The record's owner names this attempt, not only the process:
   * commit_2pc takes a record of its id for its own (a lost reply) only
   * when the owner and start_ts are its own, and two attempts of one id
   * in one process -- doctxd's workers serving a resend, a library's
   * threads -- share host:pid and often the snapshot.  The second then
   * prewrote under the first's record, took its intents for its own and
   * committed a mix of both scripts (docs/transactions.md, "Outcome"). */
  dtx__exec_rename(&t->ex, "%.100s#%s", t->ex.owner, oid);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__txn_pattern);
  /* Taken before the tick: S was handed out after begin_ms, so any
   * version above S was written after it (T11). */
  t->begin_ms = dtx__now_ms();
  t->max_age_ms =
      opts && opts->max_age_ms ? opts->max_age_ms : DTX__TXN_MAX_AGE_MS;
  if (rc == 0)
    rc = clock_read(&t->ex, &t->start_ts); /* S: read, not ticked */
  if (rc) {
    dtx_txn_free(t);
    return dtx__call_end(&c, rc);
  }
  *out = t;
  return dtx__call_end(&c, 0);
}

const char *dtx_txn_id(const dtx_txn_t *t) { return t ? t->id : NULL; }

static void key_free(dtx__txn_key_t *k) {
  free(k->coll);
  json_decref(k->id);
  json_decref(k->stored_body);
  json_decref(k->view);
  json_decref(k->next);
  json_decref(k->written);
}

void dtx_txn_free(dtx_txn_t *t) {
  if (!t)
    return;
  for (size_t i = 0; i < t->nkeys; i++)
    key_free(&t->keys[i]);
  free(t->keys);
  json_decref(t->finds);
  free(t);
}

int dtx_txn_abort(dtx_txn_t *t) {
  if (t)
    t->done = 1; /* nothing was stored: writes are buffered (T1) */
  return 0;
}

static int usable(dtx_txn_t *t) {
  if (!t)
    return dtx__err(DTX_EINVAL, "txn: no transaction");
  if (t->done)
    return dtx__err(DTX_ESTATE, "txn %s: already committed or aborted",
                    t->id);
  return 0;
}

/* ---- the key table ---------------------------------------------------------- */

dtx__txn_key_t *dtx__txn_key_find(dtx_txn_t *t, const char *coll,
                                  const json_t *id) {
  for (size_t i = 0; i < t->nkeys; i++)
    if (strcmp(t->keys[i].coll, coll) == 0 &&
        dtx__value_cmp(t->keys[i].id, id) == 0)
      return &t->keys[i];
  return NULL;
}

static int key_add(dtx_txn_t *t, const char *coll, const json_t *id,
                   dtx__txn_key_t **out) {
  if (t->nkeys >= DTX__TXN_MAX_KEYS)
    return dtx__err(DTX_ELIMIT, "txn %s: more than %d documents in one "
                                "transaction",
                    t->id, DTX__TXN_MAX_KEYS);
  if (t->nkeys == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 8;
    dtx__txn_key_t *k = realloc(t->keys, cap * sizeof *k);
    if (!k)
      return DTX_ENOMEM;
    t->keys = k;
    t->cap = cap;
  }
  dtx__txn_key_t *k = &t->keys[t->nkeys];
  memset(k, 0, sizeof *k);
  k->coll = strdup(coll);
  k->id = json_deep_copy(id);
  if (!k->coll || !k->id) {
    key_free(k);
    return DTX_ENOMEM;
  }
  t->nkeys++;
  *out = k;
  return 0;
}

/* ---- reading at the snapshot -------------------------------------------------- */

/* Fills k from the stored document d (NULL: none), which holds no
 * foreign intent: its version and the view at the snapshot. */
static int key_view(dtx_txn_t *t, dtx__txn_key_t *k, const json_t *d) {
  json_decref(k->stored_body);
  json_decref(k->view);
  k->stored_body = k->view = NULL;
  k->stored = d != NULL;
  k->has_v = 0;
  k->v = 0;
  k->latest = 1;
  if (!d)
    return 0;
  const json_t *m = dtx__txn_meta(d);
  const json_t *jv = json_object_get(m, "v");
  if (json_object_get(d, DTX__TXN_FIELD) && !m)
    return dtx__err(DTX_ESTATE, "txn %s: %s document's %s is not an object",
                    t->id, k->coll, DTX__TXN_FIELD);
  if (jv) {
    if (!json_is_integer(jv))
      return dtx__err(DTX_ESTATE, "txn %s: %s document's %s.v is not an "
                                  "integer",
                      t->id, k->coll, DTX__TXN_FIELD);
    k->has_v = 1;
    k->v = json_integer_value(jv);
  }
  if (!(k->stored_body = dtx__txn_body(d)))
    return DTX_ENOMEM;
  int del = json_is_true(json_object_get(m, "del"));
  if (k->v <= t->start_ts ||
      dtx__txn_break() == DTX__TXN_BREAK_SNAPSHOT /* test-only */) {
    k->view = del ? NULL : json_incref(k->stored_body);
    return 0;
  }
  k->latest = 0;
  const json_t *p = json_object_get(m, "p");
  const json_t *pv = json_object_get(p, "v");
  if (json_is_integer(pv) && json_integer_value(pv) <= t->start_ts) {
    const json_t *pd = json_object_get(p, "doc");
    k->view = json_is_object(pd) ? json_deep_copy(pd) : NULL;
    return 0;
  }
  return dtx__err(DTX_ECONFLICT, "txn %s: snapshot too old: %s document "
                                 "was rewritten at %lld and %lld, after the "
                                 "snapshot %lld",
                  t->id, k->coll, (long long)k->v,
                  json_is_integer(pv) ? (long long)json_integer_value(pv)
                                      : 0LL,
                  (long long)t->start_ts);
}

/* The stored document of (coll, id) with no foreign intent left on it
 * (resolved, or waited for within the deadline); *out NULL: none. */
int dtx__txn_read_clean(dtx__exec_t *ex, const char *self, const char *coll,
                        const json_t *id, json_t **out) {
  dtx__contend_t ct = {0};
  *out = NULL;
  for (;;) {
    json_t *q = json_pack("{s:O}", "_id", id), *arr = NULL;
    int rc = dtx__kit_point("txn.read", "reading a document");
    if (rc == 0)
      rc = q ? dtx__kit_find_n(ex, coll, q, NULL, 1, &arr) : DTX_ENOMEM;
    json_decref(q);
    if (rc)
      return rc;
    json_t *d = json_incref(json_array_get(arr, 0));
    json_decref(arr);
    const json_t *w = json_object_get(dtx__txn_meta(d), "w");
    const char *wid = dtx__str(w, "id");
    if (!w || (self && wid && strcmp(wid, self) == 0)) {
      *out = d;
      return 0;
    }
    char holder[129];
    snprintf(holder, sizeof holder, "%s", wid ? wid : "?");
    rc = dtx__txn_resolve(ex, coll, d);
    json_decref(d);
    if (rc < 0)
      return rc;
    if (rc == 1 && !dtx__kit_contend(&ct, &rc, "txn: waiting")) {
      /* Still held at the deadline: a conflict the caller may retry
       * later (exit 3), not a store that is away. */
      char *s = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY);
      rc = dtx__err(DTX_ECONFLICT, "%s %s holds the intent of transaction "
                                   "%s, pending under its lease, until the "
                                   "deadline",
                    coll, s ? s : "?", holder);
      free(s);
      return rc;
    }
  }
}

/* The key of (coll, id), read at the snapshot unless already known. */
static int key_get(dtx_txn_t *t, const char *coll, const json_t *id,
                   dtx__txn_key_t **out) {
  dtx__txn_key_t *k = dtx__txn_key_find(t, coll, id);
  if (k) {
    *out = k;
    return 0;
  }
  json_t *d = NULL;
  int rc = dtx__txn_read_clean(&t->ex, t->id, coll, id, &d);
  if (rc == 0)
    rc = key_add(t, coll, id, &k);
  /* after the read: what it found (or missed) may be a version the
   * horizon let recovery collect (T11) */
  if (rc == 0 && ((rc = key_view(t, k, d)) != 0 ||
                  (rc = dtx__txn_age_check(t)) != 0)) {
    key_free(k);
    t->nkeys--;
  }
  json_decref(d);
  if (rc == 0)
    *out = k;
  return rc;
}

/* What this transaction sees of k: its own write, else the snapshot. */
static const json_t *key_eff(const dtx__txn_key_t *k) {
  if (k->op == KEY_PUT)
    return k->next;
  if (k->op == KEY_DEL)
    return NULL;
  return k->view;
}

/* A filter's _id when it names one document ({_id: v}, v no operator
 * object), else NULL: such a find reads that document only. */
static const json_t *filter_id(const json_t *filter) {
  const json_t *id = json_object_get(filter, "_id");
  if (!id || json_is_array(id))
    return NULL;
  if (json_is_object(id)) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)id, k, v) if (k[0] == '$') return NULL;
  }
  return id;
}

static int append_key(json_t *ids, const json_t *id) {
  size_t i;
  json_t *x;
  json_array_foreach(ids, i, x) if (dtx__value_cmp(x, id) == 0) return 0;
  return json_array_append(ids, (json_t *)id) ? DTX_ENOMEM : 0;
}

/* The documents of coll matching filter at the snapshot, with the
 * transaction's own writes, at most limit (> 0).  Candidates: what the
 * filter matches among the committed bodies, every document with an
 * intent, every one rewritten after the snapshot (its previous version
 * may match), and this transaction's own writes; each is read at the
 * snapshot and matched again. */
/* Candidates of a find in coll by q, at most DTX__TXN_MAX_SCAN (more:
 * DTX_ELIMIT naming what met them); *out new, the caller's. */
int dtx__txn_candidates(dtx_txn_t *t, const char *coll, json_t *q,
                        const char *what, json_t **out) {
  *out = NULL;
  int rc = q ? dtx__kit_find_n(&t->ex, coll, q, NULL, DTX__TXN_MAX_SCAN + 1,
                               out)
             : DTX_ENOMEM;
  json_decref(q);
  if (rc == 0 && json_array_size(*out) > DTX__TXN_MAX_SCAN)
    rc = dtx__err(DTX_ELIMIT, "txn %s: %s in %s met more than %d "
                              "candidates; narrow the filter",
                  t->id, what, coll, DTX__TXN_MAX_SCAN);
  return rc;
}

static int txn_find(dtx_txn_t *t, const char *coll, const json_t *filter,
                    int64_t limit, json_t **out) {
  dtx__filter_t *f = NULL;
  json_t *empty = json_object(), *res = json_array(), *ids = json_array();
  const json_t *flt = filter ? filter : empty;
  /* A pattern's collections (this one's records and clock included)
   * change only through their protocols: a transaction's step there
   * would be exempt from their plain-write rules (docs/transactions.md,
   * "Scripts"). */
  int rc = !empty || !res || !ids ? DTX_ENOMEM
                                  : dtx__check_user_coll("txn", coll);
  if (rc == 0)
    rc = dtx__filter_compile(flt, &f);
  const json_t *one = rc ? NULL : filter_id(flt);
  if (rc == 0 && one) {
    rc = append_key(ids, one);
  } else if (rc == 0) {
    json_t *q = json_pack(
        "{s:[O,{s:{s:b}},{s:{s:I}}]}", "$or", flt, DTX__TXN_FIELD ".w",
        "$exists", 1, DTX__TXN_FIELD ".v", "$gt", (json_int_t)t->start_ts);
    json_t *arr = NULL;
    rc = dtx__txn_candidates(t, coll, q, "a find", &arr);
    size_t i;
    json_t *d;
    if (rc == 0)
      json_array_foreach(arr, i, d) if ((rc = append_key(
                                             ids, json_object_get(d, "_id"))))
          break;
    json_decref(arr);
  }
  for (size_t i = 0; rc == 0 && i < t->nkeys; i++)
    if (t->keys[i].op && strcmp(t->keys[i].coll, coll) == 0)
      rc = append_key(ids, t->keys[i].id);
  size_t i;
  json_t *id;
  if (rc == 0)
    json_array_foreach(ids, i, id) {
      dtx__txn_key_t *k = NULL;
      if ((int64_t)json_array_size(res) >= limit)
        break;
      if ((rc = key_get(t, coll, id, &k)))
        break;
      /* A read by _id is a read of that document even when it is absent
       * or does not match: serializable locks it (docs/transactions.md,
       * "Isolation"). */
      if (one)
        k->used = 1;
      const json_t *e = key_eff(k);
      if (e && dtx__filter_match(f, e) == 1) {
        k->used = 1;
        json_t *c = json_deep_copy(e);
        if (!c || json_array_append_new(res, c)) {
          rc = DTX_ENOMEM;
          break;
        }
      }
    }
  /* Serializable: a find by predicate that saw every match (fewer than
   * its limit) is validated again at commit, so a document that starts
   * to match meanwhile (a phantom) is a conflict.  One that filled its
   * limit returned some matches, which stay so under their locks. */
  if (rc == 0 && !one && t->isolation == DTX_TXN_SERIALIZABLE &&
      (int64_t)json_array_size(res) < limit) {
    if (!t->finds)
      t->finds = json_array();
    if (!t->finds || json_array_append_new(t->finds,
                                           json_pack("{s:s,s:O}", "c", coll,
                                                     "f", flt)))
      rc = DTX_ENOMEM;
  }
  dtx__filter_free(f);
  json_decref(empty);
  json_decref(ids);
  /* after the candidates were read: a tombstone the horizon let
   * recovery collect is missing from them (T11); for the finds of
   * update and delete too */
  if (rc == 0)
    rc = dtx__txn_age_check(t);
  if (rc == 0)
    *out = res;
  else
    json_decref(res);
  return rc;
}

int dtx_txn_find(dtx_txn_t *t, const char *coll, const json_t *filter,
                 int64_t limit, json_t **out) {
  dtx__call_t c;
  *out = NULL;
  int rc = usable(t);
  if (rc == 0 && (limit < 1 || limit > 1000))
    rc = dtx__err(DTX_EINVAL, "txn find: limit %lld is not in 1..1000",
                  (long long)limit);
  if (rc)
    return rc;
  dtx__call_begin(&c, t->ex.deadline_ms);
  return dtx__call_end(&c, txn_find(t, coll, filter, limit, out));
}

int dtx_txn_find_one(dtx_txn_t *t, const char *coll, const json_t *filter,
                     json_t **out) {
  json_t *arr = NULL;
  *out = NULL;
  int rc = dtx_txn_find(t, coll, filter, 1, &arr);
  if (rc == 0)
    *out = json_incref(json_array_get(arr, 0));
  json_decref(arr);
  return rc;
}

/* ---- buffered writes ----------------------------------------------------------- */

static int no_meta(const json_t *doc) {
  if (json_object_get(doc, DTX__TXN_FIELD))
    return dtx__err(DTX_EINVAL, "txn: a document may not carry %s, doctx's "
                                "transaction field (docs/transactions.md)",
                    DTX__TXN_FIELD);
  /* The roll forward lands the body as a replacement, which cannot hold
   * a top-level '$' name: committed, it would never apply, and every
   * reader of the document would fail on it. */
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)doc, k, v) if (k[0] == '$' || !k[0]) return
      dtx__err(DTX_EINVAL, "txn: field '%s' of a document it writes is empty "
                           "or starts with '$' (docs/transactions.md, "
                           "\"Scripts\")",
               k);
  return 0;
}

/* Buffers doc (stolen) as the new body of (coll, its _id), which must be
 * absent at the snapshot (DTX_EDUPKEY otherwise). */
static int put_new(dtx_txn_t *t, const char *coll, json_t *doc) {
  dtx__txn_key_t *k = NULL;
  const json_t *id = json_object_get(doc, "_id");
  int rc = no_meta(doc);
  if (rc == 0)
    rc = dtx__id_check(id);
  if (rc == 0)
    rc = key_get(t, coll, id, &k);
  if (rc == 0 && key_eff(k))
    rc = dtx__err(DTX_EDUPKEY, "txn %s: %s already holds a document of "
                               "that _id",
                  t->id, coll);
  if (rc == 0) {
    json_decref(k->next);
    k->next = doc;
    k->op = KEY_PUT;
    k->used = 1;
    return 0;
  }
  json_decref(doc);
  return rc;
}

int dtx_txn_insert(dtx_txn_t *t, const char *coll, const json_t *doc) {
  dtx__call_t c;
  int rc = usable(t);
  if (rc == 0 && !json_is_object(doc))
    rc = dtx__err(DTX_EINVAL, "txn insert: the document is not an object");
  if (rc == 0)
    rc = dtx__check_user_coll("txn", coll);
  json_t *d = NULL; /* a copy with its _id, checked as a plain insert's */
  if (rc == 0)
    rc = dtx__st_prepare_doc(coll, doc, &d);
  if (rc)
    return rc;
  dtx__call_begin(&c, t->ex.deadline_ms);
  return dtx__call_end(&c, put_new(t, coll, d));
}

int dtx_txn_update(dtx_txn_t *t, const char *coll, const json_t *filter,
                   const json_t *update, int upsert, int *matched) {
  dtx__call_t c;
  dtx__update_t *u = NULL;
  json_t *found = NULL, *next = NULL;
  if (matched)
    *matched = 0;
  int rc = usable(t);
  if (rc == 0)
    rc = dtx__check_user_coll("txn", coll);
  if (rc == 0)
    rc = dtx__update_compile(update, &u);
  if (rc) {
    dtx__update_free(u);
    return rc;
  }
  dtx__call_begin(&c, t->ex.deadline_ms);
  rc = txn_find(t, coll, filter, 1, &found);
  const json_t *d = json_array_get(found, 0);
  if (rc == 0 && d) {
    int changed = 0;
    rc = dtx__update_apply(u, d, 0, dtx__now_ms(), &next, &changed);
    if (rc == 0)
      rc = no_meta(next);
    if (rc == 0) {
      dtx__txn_key_t *k = dtx__txn_key_find(t, coll, json_object_get(d, "_id"));
      json_decref(k->next);
      k->next = next;
      next = NULL;
      k->op = KEY_PUT;
      k->used = 1;
      if (matched)
        *matched = 1;
    }
  } else if (rc == 0 && upsert) {
    rc = dtx__upsert_doc(filter, u, dtx__now_ms(), &next);
    if (rc == 0) {
      rc = put_new(t, coll, next);
      next = NULL;
    }
  }
  json_decref(next);
  json_decref(found);
  dtx__update_free(u);
  return dtx__call_end(&c, rc);
}

int dtx_txn_delete(dtx_txn_t *t, const char *coll, const json_t *filter,
                   int *deleted) {
  dtx__call_t c;
  json_t *found = NULL;
  if (deleted)
    *deleted = 0;
  int rc = usable(t);
  if (rc == 0)
    rc = dtx__check_user_coll("txn", coll);
  if (rc)
    return rc;
  dtx__call_begin(&c, t->ex.deadline_ms);
  rc = txn_find(t, coll, filter, 1, &found);
  const json_t *d = json_array_get(found, 0);
  if (rc == 0 && d) {
    dtx__txn_key_t *k = dtx__txn_key_find(t, coll, json_object_get(d, "_id"));
    json_decref(k->next);
    k->next = NULL;
    k->op = KEY_DEL;
    k->used = 1;
    if (deleted)
      *deleted = 1;
  }
  json_decref(found);
  return dtx__call_end(&c, rc);
}

int dtx_txn_commit(dtx_txn_t *t) {
  dtx__call_t c;
  int rc = usable(t);
  if (rc)
    return rc;
  dtx__call_begin(&c, t->ex.deadline_ms);
  rc = dtx__txn_age_check(t); /* T11: nothing written yet */
  if (rc == 0)
    rc = dtx__txn_commit(t);
  t->done = 1;
  return dtx__call_end(&c, rc);
}

/* ---- the runner ------------------------------------------------------------ */

int dtx_txn_run(dtx_store_t *st, const dtx_txn_opts_t *opts, dtx_txn_fn fn,
                void *arg) {
  dtx__call_t c;
  dtx__contend_t ct = {0};
  int rc = dtx_txn_opts_check(opts);
  if (rc == 0 && !fn)
    rc = dtx__err(DTX_EINVAL, "txn run: no function");
  if (rc)
    return rc;
  dtx__call_begin(&c, budget_of(opts));
  for (;;) {
    dtx_txn_t *t = NULL;
    rc = dtx_txn_begin(st, opts, &t);
    if (rc == 0) {
      rc = fn(t, arg);
      if (rc == 0)
        rc = dtx_txn_commit(t);
      else
        dtx_txn_abort(t);
    }
    dtx_txn_free(t);
    /* A caller-chosen id is spent by a commit that got as far as its
     * record: another attempt under it would meet its own record. */
    if (rc != DTX_ECONFLICT || (opts && opts->id))
      break;
    if (!dtx__kit_contend(&ct, &rc, "txn run")) {
      /* Still a conflict at the deadline: the caller may retry later
       * (exit 3), unlike an unknown outcome (exit 4). */
      rc = dtx__err(DTX_ECONFLICT, "txn run: still conflicting at the "
                                   "deadline after %d attempts",
                    ct.attempt);
      break;
    }
  }
  return dtx__call_end(&c, rc);
}
