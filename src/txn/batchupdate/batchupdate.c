/* batchupdate.c -- the batch update of LeanCloud's scenarios (docs/scenarios.md):
 * one operator UPDATE applied exactly once to every document of
 * a collection matching FILTER, resumable after a crash.  Like the sync
 * flag's dependents (src/txn/sync/), each document carries its own
 * marker, written in the SAME conditional step as the update:
 *
 *   filter: {$and: [FILTER, {_batches.ID: {$exists: false}}], _id: X}
 *   update: UPDATE + {$set: {_batches.ID: STAMP}}
 *
 *            apply (UPDATE + marker, ONE atomic step)
 *   unmarked ------------------------------------------> marked(ID)
 *      |                                                (final: the
 *      | changed by someone else so it no longer        update is never
 *      v matches FILTER: left alone (not counted)       applied again)
 *
 *   transition           function       fault point
 *   unmarked -> marked   apply_one      batch.apply
 *
 * Paging.  The batch reads its next page as the first documents, in _id
 * order, that match FILTER and are UNMARKED -- not by an _id cursor.  A
 * document it marked leaves the query by its own step, so the walk needs
 * no position that a crash could lose, a rerun starts where the last
 * stopped, documents inserted or changed meanwhile are seen if they match
 * when their turn comes, and _ids of mixed types (which an _id $gt cursor
 * would skip across, comparisons being type-bracketed) are all reached.
 * A document whose step matches nothing left the query (it no longer
 * matches FILTER, or a concurrent run of the same batch marked it); a
 * page where that happened to every document contends through the kit
 * (bounded by the deadline) rather than spin.
 *
 * Invariants (DTX_ASSERT checks B2 in every build; the marker makes B1
 * hold by construction):
 *  B1 UPDATE is applied to a document at most once per batch id: only a
 *     step whose filter saw no marker applies it, and it writes the
 *     marker in the same step;
 *  B2 modified + already <= matched.
 * A retried step whose first attempt landed (its reply lost) matches
 * nothing: the marker read back carries this run's stamp, so it is
 * counted as modified.  Recovery has nothing to do: a crashed batch is
 * finished by running it again.
 *
 * The markers are what make B1 hold across runs, and they live in
 * the user's documents, where the generic document commands could take
 * one off (then the next run applies UPDATE again) or forge one (then it
 * never does).  So before a run marks anything it adds to the
 * collection's transition rules, once, a rule of scope "plain" that keeps
 * DTX_BATCH_FIELD as it is and inserts no document carrying it
 * (guard_markers): the batch's own steps still write markers, a plain
 * write may not touch them -- nor may another pattern's step that writes
 * an update its caller chose (a job's effect, a sync copy): the rule
 * exempts the batch's steps only.  docs/scenarios.md says how an operator
 * removes old markers, past the rules. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/kit/kit.h"
#include "util/assert.h"
#include "util/err.h"

#define PAGE 200

static int check_id(const char *id) {
  return dtx__check_word("batch id", id, 64, "_-");
}

/* path's first segment is the marker field. */
static int is_marker(const char *path) {
  return dtx__path_covers(DTX_BATCH_FIELD, path);
}

/* An operator update that leaves the markers alone. */
static int check_update(const char *id, const json_t *u) {
  char what[96];
  snprintf(what, sizeof what, "batch %s", id);
  return dtx__check_op_update(what, u, is_marker,
                              "documents (that would drop the markers)",
                              "the batch markers in " DTX_BATCH_FIELD);
}

/* UPDATE + $set {_batches.ID: stamp} (a new reference; NULL: no memory). */
static json_t *marked_update(const json_t *update, const char *mpath,
                             const char *stamp) {
  json_t *u = json_deep_copy(update), *set;
  if (!u)
    return NULL;
  if (!(set = json_object_get(u, "$set")))
    json_object_set_new(u, "$set", set = json_object());
  if (json_is_object(set))
    json_object_set_new(set, mpath, json_string(stamp));
  return u;
}

typedef struct batch {
  dtx__exec_t ex;
  const char *coll, *id;
  const json_t *filter; /* the user's, {} when none */
  dtx__filter_t *cf;    /* filter, compiled */
  json_t *update;       /* the user's + the marker */
  char mpath[80], stamp[48]; /* DIGEST:RUN (digest_of, dtx__id_new) */
  dtx_batch_result_t *res;
} batch_t;

/* What the batch does, as 16 hex digits: FNV-1a over coll, FILTER and
 * UPDATE as compact JSON with sorted keys.  It leads every marker the run
 * writes, so a later run of the same id can tell it is another batch. */
static int digest_of(const char *coll, const json_t *filter,
                     const json_t *update, char out[17]) {
  json_t *all = json_pack("[s,O,O]", coll, filter, update);
  int rc = all ? dtx__json_digest(all, out) : DTX_ENOMEM;
  json_decref(all);
  return rc;
}

/* {$and: [FILTER, {MARKER: {$exists: want}}]} */
static json_t *marker_filter(const batch_t *b, int want) {
  return json_pack("{s:[O,{s:{s:b}}]}", "$and", b->filter, b->mpath,
                   "$exists", want);
}

/* The step: UPDATE + marker on document doc iff it still matches FILTER
 * and is unmarked.  *progress: whether doc left the unmarked query. */
static int apply_one(batch_t *b, const json_t *doc, int *progress) {
  const json_t *id = json_object_get(doc, "_id");
  json_t *f = marker_filter(b, 0), *now = NULL;
  int matched = 0, rc;
  /* B1: the step writes this run's marker with UPDATE (DIGEST:RUN). */
  DTX_ASSERT(b->stamp[16] == ':' && b->mpath[0], "B1");
  if (f)
    json_object_set(f, "_id", (json_t *)id);
  rc = f ? dtx__kit_update(&b->ex, "batch.apply", b->coll, f,
                           json_incref(b->update), &matched)
         : DTX_ENOMEM;
  *progress = 0;
  if (rc == 0 && matched) {
    b->res->modified++;
    *progress = 1;
    return 0;
  }
  if (rc) {
    char *t = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
    rc = dtx__err_wrap(rc, "batch %s: document %s of %s", b->id,
                       t ? t : "?", b->coll);
    free(t);
    return rc;
  }
  /* Nothing matched: marked meanwhile (by us if a reply was lost), or it
   * no longer matches FILTER, or it is gone. */
  json_t *q = json_pack("{s:O}", "_id", id), *arr = NULL;
  rc = q ? dtx__kit_find_n(&b->ex, b->coll, q, NULL, 1, &arr) : DTX_ENOMEM;
  json_decref(q);
  now = json_array_get(arr, 0);
  if (rc == 0) {
    const json_t *m = json_object_get(json_object_get(now, DTX_BATCH_FIELD),
                                      b->id);
    if (m && json_is_string(m) && strcmp(json_string_value(m), b->stamp) == 0)
      b->res->modified++;
    else if (m)
      b->res->already++;
    *progress = m || !now; /* else: changed away (or back: seen again) */
    if (!m && now)
      *progress = !dtx__filter_match(b->cf, now);
  }
  json_decref(arr);
  return rc;
}

/* The plain-write rule on the markers (see the top of this file): kept
 * as they are by an update, and no document inserted with one -- a copy
 * of a marked document would be skipped by the batch's rerun as if the
 * batch had updated it. */
static const char marker_rule[] =
    "{\"pattern\":\"batch\",\"scope\":\"plain\",\"steps\":[\"batch\"],"
    "\"immutable\":[\"" DTX_BATCH_FIELD "\"],"
    "\"insert\":{\"" DTX_BATCH_FIELD "\":{\"$exists\":false}},"
    "\"why\":\"batch markers make each batch update a document once; they "
    "change only by doctx batch-update (docs/scenarios.md)\"}";

/* Adds marker_rule to coll's transition rules unless they hold it (the
 * kit's dtx__kit_guard_coll). */
static int guard_markers(batch_t *b) {
  int rc = dtx__kit_guard_coll(b->ex.st, b->coll, marker_rule);
  return rc ? dtx__err_wrap(rc, "batch %s: guarding the markers in %s",
                            b->id, b->coll)
            : 0;
}

/* The id reused for another batch (FILTER or UPDATE changed, e.g. a rerun
 * after a crash with a typo): one marked document of the id tells, by its
 * digest.  Markers without one (written before digests) are not judged.
 * Two first runs racing with different parameters are not seen. */
static int check_reuse(batch_t *b) {
  json_t *q = json_pack("{s:{s:b}}", b->mpath, "$exists", 1), *arr = NULL;
  int rc = q ? dtx__kit_find_n(&b->ex, b->coll, q, NULL, 1, &arr)
             : DTX_ENOMEM;
  json_decref(q);
  const json_t *doc = json_array_get(arr, 0);
  const char *m = json_string_value(
      json_object_get(json_object_get(doc, DTX_BATCH_FIELD), b->id));
  if (rc == 0 && m && strlen(m) > 17 && m[16] == ':' &&
      strncmp(m, b->stamp, 17) != 0) {
    char *t = json_dumps(json_object_get(doc, "_id"),
                         JSON_ENCODE_ANY | JSON_COMPACT);
    rc = dtx__err(DTX_ECONFLICT, "batch %s was run on %s with another "
                  "FILTER or UPDATE (document %s carries its marker): "
                  "give this batch another id", b->id, b->coll,
                  t ? t : "?");
    free(t);
  }
  json_decref(arr);
  return rc;
}

static int run(batch_t *b) {
  int64_t n = 0;
  json_t *q = marker_filter(b, 1), *sort = json_pack("{s:i}", "_id", 1);
  int rc = q && sort ? check_reuse(b) : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__kit_count(b->ex.st, b->coll, q, b->coll, &n);
  json_decref(q);
  b->res->already = n;
  b->res->matched = n;
  /* Markers there already (an earlier run) are guarded even when this run
   * has nothing left to mark; a collection the batch never marks is left
   * as it is (a batch over a missing one creates nothing). */
  int guarded = 0;
  if (rc == 0 && n > 0 && (rc = guard_markers(b)) == 0)
    guarded = 1;
  dtx__contend_t ct = {0};
  while (rc == 0) {
    json_t *page = NULL, *doc;
    size_t i;
    int moved = 0;
    q = marker_filter(b, 0);
    rc = q ? dtx__kit_find_n(&b->ex, b->coll, q, sort, PAGE, &page)
           : DTX_ENOMEM;
    json_decref(q);
    if (rc == 0 && json_array_size(page) == 0) {
      json_decref(page);
      break;
    }
    if (rc == 0 && !guarded && (rc = guard_markers(b)) == 0)
      guarded = 1;
    if (rc) {
      json_decref(page);
      break;
    }
    json_array_foreach(page, i, doc) {
      int progress = 0;
      b->res->matched++;
      if ((rc = apply_one(b, doc, &progress)))
        break;
      moved += progress;
    }
    json_decref(page);
    if (rc == 0 && moved == 0 &&
        !dtx__kit_contend(&ct, &rc, "a batch page whose documents keep "
                          "changing"))
      break;
  }
  json_decref(sort);
  DTX_ASSERT(b->res->modified + b->res->already <= b->res->matched, "B2");
  return rc;
}

int dtx_batch_update_check(const char *coll, const json_t *filter,
                           const json_t *update, const char *id) {
  dtx__filter_t *cf = NULL;
  dtx__err_clear();
  int rc = check_id(id);
  if (rc == 0)
    rc = dtx__check_user_coll("batch", coll);
  if (rc == 0 && filter && !json_is_object(filter))
    rc = dtx__err(DTX_EBADQUERY, "batch %s: FILTER must be an object", id);
  if (rc == 0 && filter)
    rc = dtx__filter_compile(filter, &cf);
  if (rc == 0)
    rc = check_update(id, update);
  dtx__filter_free(cf);
  return rc;
}

int dtx_batch_update(dtx_store_t *st, const char *coll, const json_t *filter,
                     const json_t *update, const char *id,
                     const dtx_exec_opts_t *opts, dtx_batch_result_t *res) {
  dtx__call_t c;
  dtx_batch_result_t none;
  batch_t b = {.coll = coll, .id = id, .res = res ? res : &none};
  json_t *empty = json_object();
  dtx__update_t *cu = NULL;
  memset(b.res, 0, sizeof *b.res);
  dtx__exec_from(&b.ex, st, opts);
  dtx__call_begin(&c, b.ex.deadline_ms);
  b.filter = filter ? filter : empty;
  int rc = empty ? check_id(id) : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__check_user_coll("batch", coll);
  if (rc == 0 && !json_is_object(b.filter))
    rc = dtx__err(DTX_EBADQUERY, "batch %s: FILTER must be an object", id);
  if (rc == 0)
    rc = dtx__filter_compile(b.filter, &b.cf);
  if (rc == 0)
    rc = check_update(id, update);
  if (rc == 0) {
    char run_id[25];
    snprintf(b.mpath, sizeof b.mpath, "%s.%s", DTX_BATCH_FIELD, id);
    dtx__id_new(run_id);
    rc = digest_of(coll, b.filter, update, b.stamp);
    snprintf(b.stamp + 16, sizeof b.stamp - 16, ":%s", run_id);
  }
  if (rc == 0) {
    if (!(b.update = marked_update(update, b.mpath, b.stamp)))
      rc = DTX_ENOMEM;
  }
  if (rc == 0 && (rc = dtx__update_compile(b.update, &cu)))
    rc = dtx__err_wrap(rc, "batch %s: UPDATE", id);
  if (rc == 0)
    rc = run(&b);
  dtx__filter_free(b.cf);
  dtx__update_free(cu);
  json_decref(b.update);
  json_decref(empty);
  return dtx__call_end(&c, rc);
}

static const char *const points[] = {"batch.apply", NULL};
static const char *const collections[] = {NULL};

/* Points only: no items, no recovery (a rerun finishes a batch), no
 * collections of its own (the markers live in the user's documents). */
const dtx__pattern_t dtx__batch_pattern = {
    .name = "batch",
    .collections = collections,
    .fault_points = points,
};
