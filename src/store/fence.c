/* fence.c -- fenced writes: the one rule that lets a resource refuse a
 * stale lock holder (Kleppmann's fencing token), checked inside the atomic
 * step of every backend.
 *
 * A modify call (update, find_one_and_update/delete, delete) may carry a
 * fence: a lock name and a token (dtx_update_opts_t.fence_name/token).
 * The document it would change records, per lock name, the largest token
 * that has written it, in the reserved top-level field
 *
 *   _fence: {NAME: token, ...}
 *
 * On the document the call's filter matched, inside the backend's atomic
 * step (SQLite: the write transaction; Redis: the compare-and-set whose
 * version the decision was made on), dtx__modify_apply():
 *   - recorded > token: refuses with DTX_EFENCED, nothing changes;
 *   - recorded <= token or none: applies the update and records token.
 * A document the filter does not match is DTX_ENOMATCH as always, so the
 * two outcomes are told apart in the same step, never by a re-read.
 *
 * Both backends call only dtx__modify_apply() (where they applied the
 * update) and dtx__modify_upsert_doc() (where they built an upsert), so
 * the rule exists once, here.  store.c checks the arguments
 * (dtx__fence_check_args) and keeps `_fence` out of user updates
 * (dtx__fence_check_update) and of inserts unless well formed
 * (dtx__fence_check_doc): the field changes only through fenced writes,
 * and a replacement keeps it as it keeps _id.  Writes without a fence
 * are not checked against it.
 *
 * A delete does not erase the record (fence tombstones, below): the
 * backends keep a deleted document's record under its _id
 * (dtx__fence_tombstone) and give it to the next document created with
 * that _id (dtx__fence_revive), in the same atomic step, so a stale
 * holder's fenced upsert after a newer holder's fenced delete is
 * DTX_EFENCED like any stale write:
 *
 *   live {_fence: R} --delete (fenced by T, or R non-empty)--> tombstone
 *        R + {NAME: T}, invisible to reads, counts, indexes and finds
 *   tombstone R --insert / upsert of that _id--> live {_fence: max(R, own)}
 *        (a fenced upsert older than R's token: DTX_EFENCED, nothing
 *        changes)
 *   tombstone R --drop of the collection--> gone
 *
 * No timer ends a tombstone: a paused holder wakes whenever it wakes.  What
 * bounds them is one per deleted _id that carried a record (a new document
 * of the _id takes the record over), until the collection is dropped. */
#include "store/fence_int.h"

#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arguments -------------------------------------------------------------- */

int dtx__fence_name_check(const char *name) {
  return dtx__check_word("fence name", name, 128, "_.:-");
}

int dtx__fence_check_args(const char *name, int64_t token) {
  if (!name)
    return 0;
  int rc = dtx__fence_name_check(name);
  if (rc < 0)
    return rc;
  if (token < 1)
    return dtx__err(DTX_EINVAL,
                    "fence token of '%s' must be a positive integer, not %lld",
                    name, (long long)token);
  return 0;
}

/* 1 when path names _fence or a field inside it. */
static int is_fence_path(const char *path) {
  return dtx__path_covers(FENCE_FIELD, path);
}

int dtx__fence_check_update(const json_t *update) {
  const char *op, *path;
  json_t *args, *v;
  if (!json_is_object(update))
    return 0; /* the update compiler refuses it */
  json_object_foreach((json_t *)update, op, args) {
    if (op[0] != '$') { /* a replacement: its top-level fields */
      if (strcmp(op, FENCE_FIELD) == 0)
        return dtx__err(DTX_EBADUPDATE,
                        "replacement: _fence is reserved for fenced writes "
                        "(a replacement keeps it)");
      continue;
    }
    if (!json_is_object(args))
      continue;
    json_object_foreach(args, path, v) {
      int to = strcmp(op, "$rename") == 0 && json_is_string(v) &&
               is_fence_path(json_string_value(v));
      if (is_fence_path(path) || to)
        return dtx__err(DTX_EBADUPDATE,
                        "%s: _fence is reserved for fenced writes (path "
                        "'%s'); pass a fence instead",
                        op, to ? json_string_value(v) : path);
    }
  }
  return 0;
}

int dtx__fence_check_doc(const json_t *doc) {
  const json_t *f = json_object_get(doc, FENCE_FIELD);
  const char *name;
  json_t *t;
  if (!f)
    return 0;
  if (!json_is_object(f))
    return dtx__err(DTX_EINVAL, "_fence must be an object {NAME: token}");
  json_object_foreach((json_t *)f, name, t) {
    int rc = dtx__fence_name_check(name);
    if (rc < 0)
      return dtx__err_wrap(rc, "_fence");
    if (!json_is_integer(t) || json_integer_value(t) < 1)
      return dtx__err(DTX_EINVAL,
                      "_fence.%s must be a positive integer token", name);
  }
  return 0;
}

/* ---- inside the atomic step -------------------------------------------------- */

/* "orders 'T1'": the collection and the document's _id (NULL: "?"),
 * for details. */
static void who(const char *coll, const json_t *id, char *out, size_t n) {
  if (json_is_string(id)) {
    snprintf(out, n, "%s '%.100s'", coll, json_string_value(id));
  } else {
    char *t = id ? dtx__json_dump(id) : NULL;
    snprintf(out, n, "%s %.100s", coll, t ? t : "?");
    free(t);
  }
}

int dtx__fence_err_malformed(const dtx__modify_t *m, const json_t *id,
                             int named) {
  char w[160];
  who(m->coll, id, w, sizeof w);
  return dtx__err(DTX_EFENCED,
                  "%s: its _fence%s%s is not an integer token, so no "
                  "fenced write of lock '%s' is accepted",
                  w, named ? "." : "", named ? m->fence_name : "",
                  m->fence_name);
}

int dtx__fence_err_stale(const dtx__modify_t *m, const json_t *id,
                         int64_t recorded, int gone) {
  char w[160];
  who(m->coll, id, w, sizeof w);
  return dtx__err(DTX_EFENCED,
                  "%s: token %lld of lock '%s' is stale: token %lld "
                  "already wrote it%s",
                  w, (long long)m->fence_token, m->fence_name,
                  (long long)recorded, gone ? " before it was deleted" : "");
}

/* The fence test of m against f, the _fence record of doc (a stored
 * document, or a deleted one's fence tombstone: gone is 1): 0 when m may
 * write, DTX_EFENCED when a larger token (or a malformed record, which no
 * token can be judged against) holds it.  *recorded: the token on
 * record, 0 when none. */
static int judge(const dtx__modify_t *m, const json_t *f, const json_t *doc,
                 int gone, int64_t *recorded) {
  *recorded = 0;
  if (!f)
    return 0;
  const json_t *t = json_is_object(f) ? json_object_get(f, m->fence_name)
                                      : NULL;
  if (json_is_object(f) && !t)
    return 0;
  if (!json_is_integer(t))
    return dtx__fence_err_malformed(m, json_object_get(doc, "_id"),
                                    t != NULL);
  *recorded = (int64_t)json_integer_value(t);
  /* dtx__fence_check_args refused a token below 1 */
  DTX_ASSERT(m->fence_token >= 1, "fence.token");
  if (*recorded > m->fence_token)
    return dtx__fence_err_stale(m, json_object_get(doc, "_id"), *recorded,
                                gone);
  return 0;
}

static int fence_test(const dtx__modify_t *m, const json_t *before,
                      int64_t *recorded) {
  return judge(m, json_object_get(before, FENCE_FIELD), before, 0, recorded);
}

/* doc's fence record, doc's own to change (doc is a private copy the
 * caller will store): created when absent, and copied when shared -- an
 * updated document shares its unchanged subtrees with the one it was made
 * from (dtx__update_apply).  NULL when out of memory. */
static json_t *own_record(json_t *doc) {
  json_t *f = json_object_get(doc, FENCE_FIELD);
  if (f && f->refcount <= 1)
    return f;
  f = f ? json_copy(f) : json_object();
  return f && json_object_set_new(doc, FENCE_FIELD, f) == 0 ? f : NULL;
}

/* Records m's token in doc. */
static int fence_record(const dtx__modify_t *m, json_t *doc) {
  json_t *f = own_record(doc);
  if (!f || json_object_set_new(f, m->fence_name,
                                json_integer((json_int_t)m->fence_token)) < 0)
    return dtx__err(DTX_ENOMEM, "recording a fence");
  return 0;
}

/* Whether a and b are the same document once each one's _fence is set
 * aside: the same other fields in the same order (dtx__upd_same), and
 * equal _fence values wherever they stand.  A replacement puts before's
 * _fence back last, so a replacement that writes back the document as it
 * was, with _fence not last, changes nothing: it is no write. */
static int same_but_fence(const json_t *a, const json_t *b) {
  void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);
  for (;;) {
    while (ia && strcmp(json_object_iter_key(ia), FENCE_FIELD) == 0)
      ia = json_object_iter_next((json_t *)a, ia);
    while (ib && strcmp(json_object_iter_key(ib), FENCE_FIELD) == 0)
      ib = json_object_iter_next((json_t *)b, ib);
    if (!ia || !ib)
      break;
    if (strcmp(json_object_iter_key(ia), json_object_iter_key(ib)) != 0 ||
        !dtx__upd_same(json_object_iter_value(ia), json_object_iter_value(ib)))
      return 0;
    ia = json_object_iter_next((json_t *)a, ia);
    ib = json_object_iter_next((json_t *)b, ib);
  }
  return !ia && !ib &&
         dtx__upd_same(json_object_get(a, FENCE_FIELD),
                       json_object_get(b, FENCE_FIELD));
}

int dtx__modify_apply(const dtx__modify_t *m, const json_t *before,
                      int64_t now, json_t **after, int *changed) {
  int64_t recorded = 0;
  int rc;
  *after = NULL;
  *changed = 1;
  if (m->fence_name && (rc = fence_test(m, before, &recorded)) < 0)
    return rc;
  if (!m->update)
    return 0; /* a delete: the test is all */
  if ((rc = dtx__update_apply(m->update, before, 0, now, after, changed)) < 0)
    return rc;
  int record = m->fence_name && recorded != m->fence_token;
  /* A replacement keeps the record, as it keeps _id: otherwise any
   * replacement would open the document to every stale token again. */
  const json_t *bf = json_object_get(before, FENCE_FIELD);
  if (bf && !json_object_get(*after, FENCE_FIELD)) {
    if (json_object_set_new(*after, FENCE_FIELD, json_deep_copy(bf)) < 0)
      goto nomem;
    *changed = !same_but_fence(before, *after);
    if (!*changed && !record) {
      /* No write: the document is what is stored, _fence where it
       * stands, not where the replacement put it back. */
      json_decref(*after);
      if (!(*after = json_deep_copy(before)))
        return dtx__err(DTX_ENOMEM, "applying an update");
    }
  }
  if (record) {
    if ((rc = fence_record(m, *after)) < 0) {
      json_decref(*after);
      *after = NULL;
      return rc;
    }
    *changed = 1;
  }
  /* The document written carries the token it was written with (a larger
   * one refused it above). */
  DTX_ASSERT(!m->fence_name ||
                 json_integer_value(json_object_get(
                     json_object_get(*after, FENCE_FIELD), m->fence_name)) ==
                     m->fence_token,
             "fence.recorded");
  return 0;
nomem:
  json_decref(*after);
  *after = NULL;
  return dtx__err(DTX_ENOMEM, "applying an update");
}

int dtx__modify_upsert_doc(const dtx__modify_t *m, int64_t now,
                           json_t **out) {
  int rc = dtx__upsert_doc(m->filter_spec, m->update, now, out);
  if (rc < 0)
    return rc;
  /* A filter on _fence seeds nothing: the record is only ever a fenced
   * write's. */
  json_object_del(*out, FENCE_FIELD);
  if (m->fence_name && (rc = fence_record(m, *out)) < 0) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}

/* ---- fence tombstones ---------------------------------------------------------- */

/* A delete must not erase the only record of the newest token: a holder
 * paused before its fenced upsert would otherwise recreate the document
 * with its stale token (docs/locks.md, "Fence tombstones").  So a
 * deleted document that carries a record, or is deleted by a fenced
 * write, leaves it under its _id: the backend keeps it in the same atomic
 * step as the delete, invisible to every read, and hands it to
 * dtx__fence_revive when that _id is created again. */
int dtx__fence_tombstone(const dtx__modify_t *m, const json_t *before,
                         json_t **rec) {
  const json_t *f = json_object_get(before, FENCE_FIELD);
  *rec = NULL;
  if (!json_is_object(f) && !m->fence_name)
    return 0;
  if (!(*rec = json_is_object(f) ? json_deep_copy(f) : json_object()))
    return dtx__err(DTX_ENOMEM, "keeping a fence record");
  if (m->fence_name &&
      json_object_set_new(*rec, m->fence_name,
                          json_integer((json_int_t)m->fence_token)) < 0) {
    json_decref(*rec);
    *rec = NULL;
    return dtx__err(DTX_ENOMEM, "keeping a fence record");
  }
  if (json_object_size(*rec) == 0) {
    json_decref(*rec);
    *rec = NULL;
  }
  /* A fenced delete keeps its own token under the _id. */
  DTX_ASSERT(!m->fence_name || *rec, "fence.tombstone");
  return 0;
}

int dtx__fence_revive(const dtx__modify_t *m, const char *coll,
                      const json_t *rec, json_t *doc) {
  if (!json_is_object(rec) || json_object_size(rec) == 0)
    return 0;
  int64_t recorded;
  int rc;
  if (m && m->fence_name) {
    dtx__modify_t j = *m;
    j.coll = coll;
    if ((rc = judge(&j, rec, doc, 1, &recorded)) < 0)
      return rc;
  }
  json_t *f = json_object_get(doc, FENCE_FIELD);
  if (f && !json_is_object(f))
    return 0; /* store.c refuses such an insert before it gets here */
  if (!(f = own_record(doc)))
    return dtx__err(DTX_ENOMEM, "reviving a fence record");
  /* Per lock name, the larger token: the new document may carry its own
   * (a fenced upsert's, a restored copy's), never a smaller one than the
   * deleted document had. */
  const char *name;
  json_t *t;
  json_object_foreach((json_t *)rec, name, t) {
    const json_t *mine = json_object_get(f, name);
    if (mine && (!json_is_integer(t) || !json_is_integer(mine) ||
                 json_integer_value(mine) >= json_integer_value(t)))
      continue;
    if (json_object_set_new(f, name, json_deep_copy(t)) < 0)
      return dtx__err(DTX_ENOMEM, "reviving a fence record");
  }
  return 0;
}
