/* conf_bulk_serial.c -- conformance: random bulk batches are explainable
 * by a serial order (dtx_store_bulk_write's promise: each operation is
 * atomic and isolated on its own, exactly as if called alone).
 *
 * Each round seeds 1..4 documents, makes some of them change behind the
 * suite's back (through a second store handle, so a backend that caches
 * what it last wrote decides on a stale state and must lose its compare-
 * and-set), then sends one batch of 2..64 random operations on them:
 * updates ($inc, $set, $unset, $push, a multikey flip), conditional
 * filters, find_one_and_update returning old or new with and without a
 * projection, find_one_and_delete, deletes, upserts, inserts of existing
 * and new ids, fenced writes with stale and fresh tokens, and ops that
 * fail at apply time ($inc of a string, the validator).  Every modifying
 * operation pushes its own marker into 'log', so every state says which
 * writes made it.
 *
 * The check, per document (every filter names one _id, so documents are
 * independent): search for a serial order of the document's operations
 * in which each one, run ALONE on the state the previous leaves (as a
 * single call on an in-memory SQLite store: the oracle), gives exactly
 * the result the batch reported -- code, matched, modified, upserted id,
 * returned document -- and the last state is the document the store
 * holds after the batch.  Operations that change nothing are placed as
 * soon as they fit (they cannot spoil a later step); writes are tried in
 * the order the final log suggests.
 *
 * A delete leaves the deleted document's fence record (a fence
 * tombstone), which the next document of that _id takes over: the oracle
 * carries it in its states (sr_set, sr_peek).
 *
 * Flavours, one per round in turn: a plain collection, one with a
 * validator, one with a unique index (no groups on Redis), one with an
 * index on a field that flips between scalar and array.  The seed is
 * printed; DTX_CONF_SEED=N replays it.  A search that runs out of its
 * budget is counted (printed), not failed: only a proven failure fails.
 *
 * It can fail: on Redis it caught a group head returning no document and
 * writes on a unique-indexed collection that fenced each other into BUSY,
 * and with ride_all treating a lost group write as applied it fails in
 * the first rounds on the standalone server and the cluster. */
/* The oracle and the second handle make single calls: never via bulk. */
#define CONF_NO_WRAP
#include "conf.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

enum { SR_MAXOPS = 64, SR_NDOC = 4, SR_FLAVOURS = 4 };

typedef struct sr_op {
  dtx_bulk_op_t op;
  dtx_update_opts_t uo;
  dtx_fam_opts_t fo;
  dtx_delete_opts_t dlo;
  int doc;    /* index of the document its filter names */
  int placed; /* in the search */
} sr_op_t;

/* A result as the single call or the batch reports it. */
typedef struct sr_out {
  int rc;
  int64_t matched, modified;
  json_t *id, *doc;
} sr_out_t;

static uint64_t sr_rnd;
static uint64_t sr_next(void) {
  sr_rnd ^= sr_rnd << 13;
  sr_rnd ^= sr_rnd >> 7;
  sr_rnd ^= sr_rnd << 17;
  return sr_rnd;
}
static int sr_pick(int n) { return (int)(sr_next() % (uint64_t)n); }

static void sr_out_clear(sr_out_t *o) {
  json_decref(o->id);
  json_decref(o->doc);
  memset(o, 0, sizeof *o);
}

static int jeq(const json_t *a, const json_t *b) {
  return (!a && !b) || (a && b && json_equal(a, b));
}

static int sr_out_eq(const sr_out_t *a, const sr_out_t *b) {
  return a->rc == b->rc && a->matched == b->matched &&
         a->modified == b->modified && jeq(a->id, b->id) &&
         jeq(a->doc, b->doc);
}

static void sr_flavour(dtx_store_t *st, const char *c, int flavour) {
  if (flavour == 1) {
    dtx_collection_rules_t r = {JQ("{'n':{'$gte':0}}"), NULL, NULL};
    CHECK_RC(dtx_store_set_rules(st, c, &r), 0);
  } else if (flavour == 2) {
    dtx_index_opts_t o = {.unique = 1};
    CHECK_RC(dtx_store_create_index(st, c, JQ("{'_id':1,'n':1}"), &o, NULL),
             0);
  } else if (flavour == 3) {
    CHECK_RC(dtx_store_create_index(st, c, JQ("{'w':1}"), NULL, NULL), 0);
  }
}

/* Runs p alone on st (collection c) as its single call. */
static void sr_single(dtx_store_t *st, const char *c, const sr_op_t *p,
                      sr_out_t *o) {
  memset(o, 0, sizeof *o);
  const dtx_bulk_op_t *op = &p->op;
  switch (op->kind) {
  case DTX_BULK_INSERT:
    o->rc = dtx_store_insert_ex(st, c, op->doc, op->insert_opts, &o->id);
    break;
  case DTX_BULK_UPDATE_ONE: {
    dtx_update_result_t r = {0};
    o->rc = dtx_store_update(st, c, op->filter, op->update, op->update_opts,
                             &r);
    if (o->rc == 0) {
      o->matched = r.matched;
      o->modified = r.modified;
      o->id = r.upserted_id;
    } else {
      json_decref(r.upserted_id);
    }
    break;
  }
  case DTX_BULK_DELETE_ONE:
    o->rc = dtx_store_delete_ex(st, c, op->filter, op->delete_opts,
                                &o->modified);
    o->matched = o->modified;
    break;
  case DTX_BULK_FIND_ONE_AND_UPDATE:
    o->rc = dtx_store_find_one_and_update(st, c, op->filter, op->update,
                                          op->fam_opts, &o->doc);
    break;
  default:
    o->rc = dtx_store_find_one_and_delete(st, c, op->filter, op->fam_opts,
                                          &o->doc);
  }
  if (o->rc != 0)
    o->matched = o->modified = 0;
}

/* The oracle: a private store where one operation runs alone on a given
 * state of its document.  A state is the document, NULL (absent), or --
 * absent, with the fence record a delete left (a fence tombstone,
 * src/store/fence.c, which the next document of that _id takes over) --
 * {SR_TOMB: record}.  Tombstones are invisible, so the oracle tracks the
 * one its store keeps for each _id (tombs: "coll/id" -> record), and
 * starts its collection again (a drop) when a state needs less of one
 * than its store holds. */
#define SR_TOMB "#tomb"
typedef struct sr_oracle {
  dtx_store_t *st;
  const char *c;
  int flavour; /* of c, to set it up again after a drop */
  int64_t evals, drops;
  json_t *tombs;
} sr_oracle_t;

static json_t *sr_get(dtx_store_t *st, const char *c, json_int_t id) {
  json_t *f = json_pack("{s:I}", "_id", id), *docs = NULL;
  int rc = dtx_store_find(st, c, f, NULL, &docs);
  json_decref(f);
  if (rc != 0 || !docs) {
    CHECKF(0, "find %lld: %s", (long long)id, dtx_errdetail());
    return NULL;
  }
  json_t *d = json_incref(json_array_get(docs, 0));
  json_decref(docs);
  return d;
}

static const json_t *sr_tomb(const json_t *s) {
  return s ? json_object_get(s, SR_TOMB) : NULL;
}

/* The record a state's document would leave when deleted (none: NULL). */
static const json_t *sr_record(const json_t *d) {
  const json_t *f = d ? json_object_get(d, "_fence") : NULL;
  return json_object_size(f) ? f : NULL;
}

static void sr_tomb_key(const sr_oracle_t *o, json_int_t id, char *k,
                        size_t n) {
  snprintf(k, n, "%s/%lld", o->c, (long long)id);
}

/* 1 when inserting d over tombstone t changes nothing of d (each token of
 * t is already in d's own record, as large). */
static int sr_covers(const json_t *d, const json_t *t) {
  const json_t *f = d ? json_object_get(d, "_fence") : NULL;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)t, k, v) {
    const json_t *mine = json_object_get(f, k);
    if (!json_is_integer(mine) || !json_is_integer(v) ||
        json_integer_value(mine) < json_integer_value(v))
      return 0;
  }
  return 1;
}

static void sr_delete(sr_oracle_t *o, json_int_t id) {
  json_t *f = json_pack("{s:I}", "_id", id);
  dtx_delete_opts_t by = {.bypass_validation = 1};
  int64_t n;
  CHECK_RC(dtx_store_delete_ex(o->st, o->c, f, &by, &n), 0);
  json_decref(f);
}

static void sr_put(sr_oracle_t *o, const json_t *d) {
  dtx_insert_opts_t by = {.bypass_validation = 1};
  int rc = dtx_store_insert_ex(o->st, o->c, d, &by, NULL);
  CHECKF(rc == 0, "oracle insert: %s", dtx_errdetail());
}

/* Brings the oracle's document id to state s. */
static void sr_set(sr_oracle_t *o, json_int_t id, const json_t *s) {
  char key[160];
  sr_tomb_key(o, id, key, sizeof key);
  const json_t *want_tomb = sr_tomb(s), *want = want_tomb ? NULL : s;
  json_t *d0 = sr_get(o->st, o->c, id);
  if (d0 && want && json_equal(d0, want)) {
    json_decref(d0);
    return;
  }
  if (d0) { /* deleted, it leaves its record */
    sr_delete(o, id);
    const json_t *r = sr_record(d0);
    if (r)
      json_object_set(o->tombs, key, (json_t *)r);
    else
      json_object_del(o->tombs, key);
    json_decref(d0);
  }
  const json_t *t0 = json_object_get(o->tombs, key);
  int fits = want ? !t0 || sr_covers(want, t0) : jeq(t0, want_tomb);
  if (!fits) { /* a tombstone is forgotten only by a drop */
    CHECK_RC(dtx_store_drop_collection(o->st, o->c), 0);
    sr_flavour(o->st, o->c, o->flavour);
    json_t *k2 = json_object();
    const char *k;
    json_t *v;
    size_t plen = strlen(o->c);
    json_object_foreach(o->tombs, k, v) {
      if (strncmp(k, o->c, plen) != 0 || k[plen] != '/')
        json_object_set(k2, k, v);
    }
    json_decref(o->tombs);
    o->tombs = k2;
    o->drops++;
    if (want_tomb) { /* a document with that record, deleted */
      json_t *d = json_pack("{s:I,s:O}", "_id", id, "_fence", want_tomb);
      sr_put(o, d);
      json_decref(d);
      sr_delete(o, id);
      json_object_set(o->tombs, key, (json_t *)want_tomb);
    }
  }
  if (want) {
    sr_put(o, want);
    json_object_del(o->tombs, key);
  }
}

/* The record the oracle's store keeps for absent id, read without
 * changing it: a document inserted over it takes the record over, and
 * deleted, leaves it again (new reference, NULL: none). */
static json_t *sr_peek(sr_oracle_t *o, json_int_t id) {
  json_t *d = json_pack("{s:I}", "_id", id);
  sr_put(o, d);
  json_decref(d);
  d = sr_get(o->st, o->c, id);
  json_t *r = json_incref((json_t *)sr_record(d));
  json_decref(d);
  sr_delete(o, id);
  return r;
}

/* Runs p alone on state s of document id; *after: the state it leaves. */
static void sr_eval(sr_oracle_t *o, json_int_t id, const json_t *s,
                    const sr_op_t *p, sr_out_t *out, json_t **after) {
  sr_set(o, id, s);
  sr_single(o->st, o->c, p, out);
  *after = sr_get(o->st, o->c, id);
  char key[160];
  sr_tomb_key(o, id, key, sizeof key);
  json_t *t = *after ? NULL : sr_peek(o, id);
  if (t) {
    json_object_set(o->tombs, key, t);
    *after = json_pack("{s:o}", SR_TOMB, t);
  } else {
    json_object_del(o->tombs, key);
  }
  o->evals++;
}

typedef struct sr_doc {
  json_int_t id;
  json_t *initial, *final;
  int idx[SR_MAXOPS]; /* its operations */
  int n;
} sr_doc_t;

typedef struct sr_search {
  sr_oracle_t *o;
  sr_op_t *ops;
  sr_out_t *seen;
  sr_doc_t *d;
  int64_t budget;
  char why[512];
} sr_search_t;

/* The position of marker m in s's log, or -1. */
static int log_pos(const json_t *s, json_int_t m) {
  json_t *log = s ? json_object_get(s, "log") : NULL;
  size_t i;
  json_t *v;
  json_array_foreach(log, i, v) {
    if (json_integer_value(v) == m)
      return (int)i;
  }
  return -1;
}

/* Logs only grow within a document's life and markers are unique: a
 * write with marker m must leave exactly the log that every observed
 * state holding m (a returned document, the final one) shows up to m. */
static int log_fits(const sr_search_t *x, const json_t *after, json_int_t m) {
  const sr_doc_t *d = x->d;
  json_t *have = after ? json_object_get(after, "log") : NULL;
  for (int k = -1; k < d->n; k++) {
    const json_t *o = k < 0 ? d->final : x->seen[d->idx[k]].doc;
    int p = log_pos(o, m);
    if (p < 0)
      continue;
    json_t *ol = json_object_get(o, "log");
    if (!have || json_array_size(have) != (size_t)p + 1)
      return 0;
    for (int i = 0; i <= p; i++)
      if (!json_equal(json_array_get(have, (size_t)i),
                      json_array_get(ol, (size_t)i)))
        return 0;
  }
  return 1;
}

/* Depth-first: places every remaining operation in some serial order
 * from state s.  1 when an order explains everything. */
static int sr_dfs(sr_search_t *x, const json_t *s, int left) {
  sr_doc_t *d = x->d;
  int placed_here[SR_MAXOPS], np = 0, found = 0;
  /* Operations that leave s unchanged and fit it: place them now. */
  int cand[SR_MAXOPS], nc = 0;
  json_t *cand_after[SR_MAXOPS];
  for (int k = 0; k < d->n; k++) {
    sr_op_t *p = &x->ops[d->idx[k]];
    if (p->placed)
      continue;
    if (--x->budget < 0) { /* out of budget: drop what this level holds */
      for (int i = 0; i < nc; i++)
        json_decref(cand_after[i]);
      goto out;
    }
    sr_out_t got;
    json_t *after;
    sr_eval(x->o, d->id, s, p, &got, &after);
    int fits = sr_out_eq(&got, &x->seen[d->idx[k]]);
    sr_out_clear(&got);
    if (fits && jeq(after, s)) {
      p->placed = 1;
      placed_here[np++] = k;
      left--;
      json_decref(after);
    } else if (fits && log_fits(x, after, d->idx[k] + 1)) {
      cand[nc] = k;
      cand_after[nc++] = after;
    } else {
      json_decref(after);
    }
  }
  if (left == 0) {
    /* A tombstone is absent to every read. */
    found = jeq(sr_tomb(s) ? NULL : s, d->final);
    if (!found)
      snprintf(x->why, sizeof x->why, "ends at %s, the store holds %s",
               s ? JS(s) : "(none)", d->final ? JS(d->final) : "(none)");
    goto out;
  }
  /* Writes: first the one the final log names next, then the ones it
   * does not name (their life ended in a delete), then the others. */
  int order[SR_MAXOPS], score[SR_MAXOPS];
  size_t have = s ? json_array_size(json_object_get(s, "log")) : 0;
  for (int i = 0; i < nc; i++) {
    int pos = log_pos(d->final, d->idx[cand[i]] + 1);
    score[i] = pos < 0 ? 1 : (size_t)pos == have ? 0 : 2;
  }
  int no = 0;
  for (int sc = 0; sc < 3; sc++)
    for (int i = 0; i < nc; i++)
      if (score[i] == sc)
        order[no++] = i;
  for (int i = 0; i < nc && !found && x->budget >= 0; i++) {
    sr_op_t *p = &x->ops[d->idx[cand[order[i]]]];
    p->placed = 1;
    found = sr_dfs(x, cand_after[order[i]], left - 1);
    p->placed = 0;
  }
  if (!found && nc == 0 && !x->why[0])
    snprintf(x->why, sizeof x->why, "no remaining operation fits state %s",
             s ? JS(s) : "(none)");
  for (int i = 0; i < nc; i++)
    json_decref(cand_after[i]);
out:
  for (int i = 0; i < np; i++)
    x->ops[d->idx[placed_here[i]]].placed = 0;
  return found;
}

static const char *const sr_updates[] = {
    "{'$inc':{'n':%d}}",   "{'$inc':{'v':1}}",   "{'$set':{'v':'s'}}",
    "{'$set':{'v':%d}}",   "{'$unset':{'v':1}}", "{'$set':{'w':[%d,7]}}",
    "{'$set':{'w':%d}}",   "{'$inc':{'n':-%d}}",
};

/* One random operation on document index di (id), marker m. */
static void sr_gen(sr_op_t *p, const char *c, json_int_t id, int m,
                   json_t **keep, int *nkeep) {
  memset(p, 0, sizeof *p);
  p->op.coll = c;
  int kind = sr_pick(100);
  char f[128], u[192], body[96];
  int cond = sr_pick(3);
  if (cond == 0)
    snprintf(f, sizeof f, "{'_id':%lld}", (long long)id);
  else
    snprintf(f, sizeof f, "{'_id':%lld,'n':{'%s':%d}}", (long long)id,
             cond == 1 ? "$gte" : "$lt", sr_pick(6));
  snprintf(body, sizeof body,
           sr_updates[sr_pick(sizeof sr_updates / sizeof sr_updates[0])],
           1 + sr_pick(3));
  /* every write pushes its marker: states say which writes made them */
  snprintf(u, sizeof u, "%.*s,'$push':{'log':%d}}", (int)strlen(body) - 1,
           body, m);
  const char *fence = sr_pick(4) == 0 ? "L" : NULL;
  int64_t token = 1 + sr_pick(4);
  if (kind < 6) {
    char d[96];
    snprintf(d, sizeof d, "{'_id':%lld,'n':1,'log':[%d]}", (long long)id, m);
    p->op.kind = DTX_BULK_INSERT;
    p->op.doc = keep[(*nkeep)++] = json_incref(JQ(d));
    return;
  }
  p->op.filter = keep[(*nkeep)++] = json_incref(JQ(f));
  if (kind < 10) {
    p->op.kind = DTX_BULK_DELETE_ONE;
    p->dlo = (dtx_delete_opts_t){.fence_name = fence, .fence_token = token};
    p->op.delete_opts = &p->dlo;
    return;
  }
  if (kind < 13) {
    p->op.kind = DTX_BULK_FIND_ONE_AND_DELETE;
    p->fo = (dtx_fam_opts_t){.fence_name = fence, .fence_token = token};
    if (sr_pick(3) == 0)
      p->fo.projection = JQ("{'n':1,'log':1}");
    p->op.fam_opts = &p->fo;
    return;
  }
  p->op.update = keep[(*nkeep)++] = json_incref(JQ(u));
  if (kind < 60) {
    p->op.kind = DTX_BULK_UPDATE_ONE;
    p->uo = (dtx_update_opts_t){.upsert = sr_pick(5) == 0,
                                .fence_name = fence,
                                .fence_token = token};
    p->op.update_opts = &p->uo;
    return;
  }
  p->op.kind = DTX_BULK_FIND_ONE_AND_UPDATE;
  p->fo = (dtx_fam_opts_t){.upsert = sr_pick(5) == 0,
                           .return_new = sr_pick(2),
                           .fence_name = fence,
                           .fence_token = token};
  if (sr_pick(3) == 0)
    p->fo.projection = JQ(sr_pick(2) ? "{'n':1,'log':1}" : "{'log':0}");
  p->op.fam_opts = &p->fo;
}

/* Its options, for the failure report ("" when none): the order search
 * cannot be followed without them (an upsert, a fence, what it returns). */
static const char *sr_opts(const sr_op_t *p, char *buf, size_t n) {
  const dtx_bulk_op_t *op = &p->op;
  int upsert = 0, ret_new = 0;
  const char *fence = NULL;
  int64_t token = 0;
  const json_t *proj = NULL;
  if (op->kind == DTX_BULK_UPDATE_ONE) {
    upsert = p->uo.upsert;
    fence = p->uo.fence_name;
    token = p->uo.fence_token;
  } else if (op->kind == DTX_BULK_DELETE_ONE) {
    fence = p->dlo.fence_name;
    token = p->dlo.fence_token;
  } else if (op->kind != DTX_BULK_INSERT) {
    upsert = p->fo.upsert;
    ret_new = p->fo.return_new;
    fence = p->fo.fence_name;
    token = p->fo.fence_token;
    proj = p->fo.projection;
  }
  char f[64] = "";
  if (fence)
    snprintf(f, sizeof f, " fence %.16s=%lld", fence, (long long)token);
  snprintf(buf, n, "%s%s%s%s%s", upsert ? " upsert" : "", ret_new ? " new" : "",
           f, proj ? " proj " : "", proj ? JS(proj) : "");
  return buf;
}

static void sr_seen(const dtx_bulk_op_t *op, dtx_bulk_result_t *r,
                    sr_out_t *o) {
  memset(o, 0, sizeof *o);
  o->rc = r->rc;
  if (r->rc == 0) {
    o->matched = r->matched;
    o->modified = r->modified;
    if (op->kind == DTX_BULK_DELETE_ONE)
      o->matched = o->modified;
  }
  /* the single find_one_and_* calls give no upserted _id */
  o->id = op->kind == DTX_BULK_FIND_ONE_AND_UPDATE ? NULL : r->id;
  o->doc = r->doc;
  if (o->id)
    r->id = NULL;
  r->doc = NULL;
}

/* One round: seed, disturb, batch, explain.  0 when explained. */
static int sr_round(dtx_store_t *st2, sr_oracle_t *orc, const char *c,
                    int round, int64_t *ops_total, int *undecided) {
  int nd = 1 + sr_pick(SR_NDOC), n = 2 + sr_pick(SR_MAXOPS - 1);
  sr_doc_t docs[SR_NDOC];
  memset(docs, 0, sizeof docs);
  for (int i = 0; i < nd; i++) {
    docs[i].id = (json_int_t)round * 10 + i;
    if (sr_pick(4) == 0)
      continue; /* absent: inserts and upserts make it */
    json_t *d = json_pack("{s:I,s:i,s:[],s:i}", "_id", docs[i].id, "n",
                          sr_pick(6), "log", "w", 0);
    if (sr_pick(3) == 0)
      json_object_set_new(d, "v", json_string("s"));
    if (sr_pick(3) == 0)
      json_object_set_new(d, "_fence", json_pack("{s:i}", "L", 2));
    CHECK_RC(dtx_store_insert(conf_st, c, d, NULL), 0);
    json_decref(d);
    /* Read back through conf_st: a backend with a cache now holds it. */
    json_t *back = sr_get(conf_st, c, docs[i].id);
    json_decref(back);
    if (sr_pick(2) == 0 && st2 != conf_st) { /* behind conf_st's back */
      json_t *f = json_pack("{s:I}", "_id", docs[i].id);
      json_t *u = json_pack("{s:{s:i},s:{s:i}}", "$inc", "n", 1, "$push",
                            "log", 1000 + i);
      CHECK_RC(dtx_store_update(st2, c, f, u, NULL, NULL), 0);
      json_decref(f);
      json_decref(u);
    }
  }
  for (int i = 0; i < nd; i++)
    docs[i].initial = sr_get(st2, c, docs[i].id);
  sr_op_t ops[SR_MAXOPS];
  json_t *keep[3 * SR_MAXOPS];
  int nkeep = 0;
  dtx_bulk_op_t bops[SR_MAXOPS];
  for (int k = 0; k < n; k++) {
    int di = sr_pick(nd);
    sr_gen(&ops[k], c, docs[di].id, k + 1, keep, &nkeep);
    ops[k].doc = di;
    docs[di].idx[docs[di].n++] = k;
    bops[k] = ops[k].op;
  }
  dtx_bulk_result_t res[SR_MAXOPS];
  (void)dtx_store_bulk_write(conf_st, bops, (size_t)n, res);
  sr_out_t seen[SR_MAXOPS];
  for (int k = 0; k < n; k++)
    sr_seen(&ops[k].op, &res[k], &seen[k]);
  int bad = 0;
  for (int i = 0; i < nd && !bad; i++) {
    docs[i].final = sr_get(st2, c, docs[i].id);
    /* the oracle's operations name its own collection */
    for (int k = 0; k < docs[i].n; k++)
      ops[docs[i].idx[k]].op.coll = orc->c;
    sr_search_t x = {orc, ops, seen, &docs[i], 20000, ""};
    if (!sr_dfs(&x, docs[i].initial, docs[i].n)) {
      if (x.budget < 0) { /* not proven either way: counted, not failed */
        (*undecided)++;
        continue;
      }
      bad = 1;
      printf("     round %d: document %lld is not explained by any serial "
             "order (%s%s)\n       started as %s\n",
             round, (long long)docs[i].id, x.why, "",
             docs[i].initial ? JS(docs[i].initial) : "(none)");
      for (int k = 0; k < docs[i].n; k++) {
        int j = docs[i].idx[k];
        char opts[256];
        printf("       #%d kind %d%s filter %s update %s -> %s m=%lld "
               "mod=%lld id=%s doc=%s\n",
               j, (int)ops[j].op.kind, sr_opts(&ops[j], opts, sizeof opts),
               ops[j].op.filter ? JS(ops[j].op.filter) : "-",
               ops[j].op.update ? JS(ops[j].op.update)
               : ops[j].op.doc  ? JS(ops[j].op.doc)
                                : "-",
               dtx_errname(seen[j].rc), (long long)seen[j].matched,
               (long long)seen[j].modified, seen[j].id ? JS(seen[j].id) : "-",
               seen[j].doc ? JS(seen[j].doc) : "-");
      }
    }
  }
  *ops_total += n;
  for (int k = 0; k < n; k++)
    sr_out_clear(&seen[k]);
  dtx_bulk_results_clear(res, (size_t)n);
  for (int k = 0; k < nkeep; k++)
    json_decref(keep[k]);
  for (int i = 0; i < nd; i++) {
    json_decref(docs[i].initial);
    json_decref(docs[i].final);
  }
  return bad;
}

void conf_test_bulk_serial(void) {
  uint64_t seed = conf_random();
  const char *env = getenv("DTX_CONF_SEED");
  if (env && *env)
    seed = strtoull(env, NULL, 0);
  printf("     seed %" PRIu64 " (DTX_CONF_SEED=%" PRIu64 " replays it)\n",
         seed, seed);
  sr_rnd = seed | 1;
  dtx_store_t *st2 = NULL;
  sr_oracle_t orc = {0};
  /* A private store (sqlite::memory:) has no second handle on it: then
   * nothing changes behind conf_st's back. */
  int priv = conf_store_is_private();
  if (priv)
    st2 = conf_st;
  else
    REQUIRE(dtx_store_open(conf_uri, &st2) == 0);
  REQUIRE(dtx_store_open("sqlite::memory:", &orc.st) == 0);
  orc.tombs = json_object();
  const int rounds = conf_quick ? 16 : 80;
  int64_t total = 0, t0 = conf_now_ms();
  int failed = 0, undecided = 0;
  const char *colls[SR_FLAVOURS];
  for (int f = 0; f < SR_FLAVOURS; f++) {
    char name[32];
    snprintf(name, sizeof name, "bulk_serial%d", f);
    colls[f] = conf_coll(name);
    sr_flavour(conf_st, colls[f], f);
    sr_flavour(orc.st, colls[f], f);
  }
  for (int r = 0; r < rounds && failed < 3; r++) {
    int flavour = r % SR_FLAVOURS;
    const char *c = colls[flavour];
    orc.c = c;
    orc.flavour = flavour;
    int bad = sr_round(st2, &orc, c, r, &total, &undecided);
    CHECKF(!bad, "round %d (flavour %d) not serializable; seed %" PRIu64, r,
           flavour, seed);
    failed += bad;
  }
  printf("     %d rounds, %lld operations, %lld oracle runs (%lld starting "
         "over), %d documents undecided (search budget), %lld ms\n",
         rounds, (long long)total, (long long)orc.evals,
         (long long)orc.drops, undecided, (long long)(conf_now_ms() - t0));
  json_decref(orc.tombs);
  dtx_store_close(orc.st);
  if (!priv)
    dtx_store_close(st2);
}
