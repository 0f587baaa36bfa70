/* test_bfence.c -- the BSON twins of the fenced write, its tombstones and
 * the time window (src/store/bfence.c, window.c) against the json_t
 * originals (fence.c, window.c), row by row.
 *
 * Every row runs the json_t function and its twin on the same inputs
 * (the BSON ones made by the bridge, dtx__bson_from_json; the update
 * compiled by both compilers) and demands the same code, the same detail,
 * the same *changed and the same result, compared after the bridge back
 * as JSON text with its key order.  Each row also states the expected
 * code, so that two engines wrong the same way still fail.  The one known
 * difference (store.h: fence.c's replacement case asks json_equal, which
 * ignores field order, where the twin compares bytes) is marked on its
 * rows, which check both answers as they are. */
#include "testlib.h"

#include "store/store.h"

#include <stdint.h>
#include <string.h>

enum { APPLY, UPSERT, TOMB, REVIVE, WINDOW };

typedef struct row {
  int kind;
  /* APPLY, TOMB: the stored document; REVIVE: the document to create;
   * UPSERT: the filter; WINDOW: the document (NULL: none) */
  const char *doc;
  const char *update; /* APPLY, UPSERT (APPLY NULL: a delete) */
  const char *rec;    /* REVIVE: the tombstone's record */
  const char *name;   /* the fence, NULL: none (REVIVE: m NULL, an insert) */
  int64_t token;
  int64_t nb, na, now; /* WINDOW: not_before, not_after, the clock */
  int rc;              /* what both must answer */
  int genid;           /* UPSERT: the _id is generated (not compared) */
  int changed;         /* APPLY without error: 1 changed, 2 unchanged, 0 either */
} row_t;

#define A(...) {.kind = APPLY, __VA_ARGS__}
#define U(...) {.kind = UPSERT, __VA_ARGS__}
#define T(...) {.kind = TOMB, __VA_ARGS__}
#define R(...) {.kind = REVIVE, __VA_ARGS__}
#define W(...) {.kind = WINDOW, __VA_ARGS__}

static const char ACCOUNT[] =
    "{'_id':'acct-7','owner':'ana','balance':1200,'min_balance':0,"
    "'pending':['t1','t2','t3','t4','t5','t6','t7','t8'],'v':41,"
    "'_fence':{'xfer:acct-7':17}}";

static const row_t rows[] = {
    /* ---- the fence test and the record ---- */
    /* no fence on the write or the document */
    A(.doc = "{'_id':1,'v':0}", .update = "{'$set':{'v':1}}"),
    /* the first fenced write records, last */
    A(.doc = "{'_id':1,'v':0}", .update = "{'$set':{'v':1}}", .name = "L",
      .token = 3),
    /* another lock's record: independent, ours goes last in it */
    A(.doc = "{'_id':1,'_fence':{'M':99},'v':0}",
      .update = "{'$set':{'v':1}}", .name = "L", .token = 1),
    /* equal, lower and higher recorded tokens */
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 3),
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 4),
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 2, .rc = DTX_EFENCED),
    /* several names: ours updated where it stands */
    A(.doc = "{'_id':'T1','_fence':{'A':1,'L':3,'Z':2},'v':0}",
      .update = "{'$inc':{'v':1}}", .name = "L", .token = 5),
    A(.doc = "{'_id':'T1','_fence':{'A':1,'L':3,'Z':2},'v':0}",
      .update = "{'$inc':{'v':1}}", .name = "L", .token = 2,
      .rc = DTX_EFENCED),
    /* tokens past int32 (the bridge writes int64) */
    A(.doc = "{'_id':1,'_fence':{'L':5000000000}}",
      .update = "{'$set':{'v':1}}", .name = "L", .token = 5000000001),
    A(.doc = "{'_id':1,'_fence':{'L':5000000000}}",
      .update = "{'$set':{'v':1}}", .name = "L", .token = 4999999999,
      .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = INT64_MAX),
    /* a record that is not an object */
    A(.doc = "{'_id':1,'_fence':5}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':[1]}", .update = NULL, .name = "L",
      .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':'L'}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':null}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    /* a token that is not an integer */
    A(.doc = "{'_id':1,'_fence':{'L':'7'}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':{'L':7.5}}", .update = NULL, .name = "L",
      .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':{'L':7.0}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':{'L':null}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':{'L':true}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9, .rc = DTX_EFENCED),
    A(.doc = "{'_id':1,'_fence':{'L':{'t':1}}}",
      .update = "{'$set':{'v':1}}", .name = "L", .token = 9,
      .rc = DTX_EFENCED),
    /* ... but another lock's malformed entry is not ours */
    A(.doc = "{'_id':1,'_fence':{'M':'x'}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9),
    /* unfenced writes are not judged, and keep even a malformed record */
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .update = "{'$inc':{'v':1}}"),
    A(.doc = "{'_id':1,'_fence':'junk','v':1}",
      .update = "{'$inc':{'v':1}}"),
    /* the _id in the detail: an object, none */
    A(.doc = "{'_id':{'a':1,'b':'x'},'_fence':{'L':3}}",
      .update = "{'$set':{'v':1}}", .name = "L", .token = 1,
      .rc = DTX_EFENCED),
    A(.doc = "{'_fence':{'L':3}}", .update = "{'$set':{'v':1}}", .name = "L",
      .token = 1, .rc = DTX_EFENCED),
    A(.doc = "{'_id':[1,2],'_fence':{'L':'x'}}", .update = NULL,
      .name = "L", .token = 1, .rc = DTX_EFENCED),

    /* ---- replacements keep the record ---- */
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'b':2}"),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'b':2}",
      .name = "L", .token = 5),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'b':2}",
      .name = "L", .token = 3),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3,'M':4}}", .update = "{'b':2}",
      .name = "M", .token = 6),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'b':2}",
      .name = "L", .token = 2, .rc = DTX_EFENCED),
    /* the same document again: no change */
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'a':1}"),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'a':1}",
      .name = "L", .token = 3),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}", .update = "{'a':1}",
      .name = "L", .token = 4),
    /* an unfenced replacement keeps a malformed record as it is */
    A(.doc = "{'_id':1,'a':1,'_fence':[3]}", .update = "{'a':2}"),
    /* a replacement that writes the document back as it was, _fence not
     * last: no write (it goes back last only when something changed) */
    A(.doc = "{'_id':1,'_fence':{'L':3},'a':1}", .update = "{'a':1}",
      .changed = 2),
    A(.doc = "{'_id':1,'a':1,'b':2,'_fence':{'L':5},'c':3}",
      .update = "{'a':1,'b':2,'c':3}", .changed = 2),
    A(.doc = "{'_id':1,'a':1,'b':2,'_fence':{'L':5},'c':3}",
      .update = "{'a':1,'b':2,'c':3}", .name = "L", .token = 5,
      .changed = 2),
    A(.doc = "{'_id':1,'a':1,'b':2,'_fence':{'L':5},'c':3}",
      .update = "{'a':1,'b':2,'c':3}", .name = "L", .token = 6,
      .changed = 1),
    A(.doc = "{'_id':1,'a':1,'b':2,'_fence':{'L':5},'c':3}",
      .update = "{'a':1,'c':3,'b':2}", .changed = 1),
    A(.doc = "{'_id':1,'a':1,'b':2,'_fence':{'L':5},'c':3}",
      .update = "{'a':1,'b':2}", .changed = 1),
    A(.doc = "{'_id':1,'a':1,'b':2,'_fence':{'L':5},'c':3}",
      .update = "{'a':1,'b':2,'c':3.0}", .changed = 1),
    /* a nested reordering: the bytes change, so the document does */
    A(.doc = "{'_id':1,'v':{'a':1,'b':2},'_fence':{'L':3}}",
      .update = "{'v':{'b':2,'a':1}}"),
    /* ... fenced with the same token: the same */
    A(.doc = "{'_id':1,'v':{'a':1,'b':2},'_fence':{'L':3}}",
      .update = "{'v':{'b':2,'a':1}}", .name = "L", .token = 3),
    /* without a record the update's own answer stands */
    A(.doc = "{'_id':1,'v':{'a':1,'b':2}}", .update = "{'v':{'b':2,'a':1}}"),
    /* an $unset of the record (store.c refuses it) is undone, last */
    A(.doc = "{'_id':1,'_fence':{'L':3},'a':1}",
      .update = "{'$unset':{'_fence':1}}"),
    A(.doc = "{'_id':1,'a':1,'_fence':{'L':3}}",
      .update = "{'$unset':{'_fence':1}}"),

    /* ---- updates that change nothing ---- */
    A(.doc = "{'_id':1,'v':1}", .update = "{'$set':{'v':1}}"),
    A(.doc = "{'_id':1,'v':1,'_fence':{'L':3}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 3),
    A(.doc = "{'_id':1,'v':1,'_fence':{'L':3}}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 9),
    A(.doc = "{'_id':1,'v':1}", .update = "{'$set':{'v':1}}", .name = "L",
      .token = 1),

    /* ---- deletes: the test alone ---- */
    A(.doc = "{'_id':1,'_fence':{'L':3}}"),
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .name = "L", .token = 3),
    A(.doc = "{'_id':1,'_fence':{'L':3}}", .name = "L", .token = 2,
      .rc = DTX_EFENCED),
    A(.doc = "{'_id':1}", .name = "L", .token = 1),

    /* ---- the update's own errors, and the test before them ---- */
    A(.doc = "{'_id':1,'v':'x','_fence':{'L':3}}",
      .update = "{'$inc':{'v':1}}", .name = "L", .token = 4,
      .rc = DTX_ETYPE),
    A(.doc = "{'_id':1,'v':'x','_fence':{'L':3}}",
      .update = "{'$inc':{'v':1}}", .name = "L", .token = 2,
      .rc = DTX_EFENCED),
    /* a _fence an update made a non-object (store.c refuses the update):
     * fence.c reports it as it reports an allocation failure */
    A(.doc = "{'_id':1}", .update = "{'$set':{'_fence':5}}", .name = "L",
      .token = 1, .rc = DTX_ENOMEM),

    /* ---- the transfer account of the benchmark ---- */
    A(.doc = ACCOUNT,
      .update = "{'$inc':{'balance':-25,'v':1},'$push':{'pending':'t9'}}",
      .name = "xfer:acct-7", .token = 18),
    A(.doc = ACCOUNT,
      .update = "{'$inc':{'balance':-25,'v':1},'$push':{'pending':'t9'}}",
      .name = "xfer:acct-7", .token = 17),
    A(.doc = ACCOUNT,
      .update = "{'$inc':{'balance':-25,'v':1},'$push':{'pending':'t9'}}",
      .name = "xfer:acct-7", .token = 16, .rc = DTX_EFENCED),

    /* ---- upserts ---- */
    U(.doc = "{'_id':1}", .update = "{'$set':{'v':1}}"),
    U(.doc = "{'_id':1}", .update = "{'$set':{'v':1}}", .name = "L",
      .token = 3),
    /* a filter naming _fence seeds nothing; the token goes last */
    U(.doc = "{'_id':1,'_fence.L':2}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 3),
    U(.doc = "{'_id':1,'_fence':{'L':9}}", .update = "{'$set':{'v':1}}"),
    U(.doc = "{'_fence':{'L':9},'_id':1,'w':2}",
      .update = "{'$set':{'v':1}}", .name = "M", .token = 4),
    U(.doc = "{'k':'a'}", .update = "{'$set':{'v':1}}", .name = "L",
      .token = 3, .genid = 1),
    U(.doc = "{'_id':2,'k':1}", .update = "{'a':1}", .name = "L",
      .token = 3),
    U(.doc = "{'_id':2}", .update = "{'$setOnInsert':{'n':0},'$inc':{'c':1}}",
      .name = "L", .token = 7),
    U(.doc = "{'$and':[{'a':1},{'a':2}]}", .update = "{'$set':{'v':1}}",
      .name = "L", .token = 3, .rc = DTX_EBADQUERY),

    /* ---- tombstones ---- */
    T(.doc = "{'_id':1,'v':1}"),
    T(.doc = "{'_id':1,'v':1}", .name = "L", .token = 4),
    T(.doc = "{'_id':1,'_fence':{'L':3,'M':1}}"),
    T(.doc = "{'_id':1,'_fence':{'L':3,'M':1}}", .name = "L", .token = 5),
    T(.doc = "{'_id':1,'_fence':{'L':3,'M':1}}", .name = "N", .token = 2),
    T(.doc = "{'_id':1,'_fence':{}}"),
    T(.doc = "{'_id':1,'_fence':{}}", .name = "L", .token = 1),
    T(.doc = "{'_id':1,'_fence':5}"),
    T(.doc = "{'_id':1,'_fence':5}", .name = "L", .token = 2),
    T(.doc = "{'_id':1,'_fence':{'L':'x'}}", .name = "L", .token = 2),

    /* ---- revivals ---- */
    /* an insert (no fence): each token it lacks or holds lower */
    R(.rec = "{}", .doc = "{'_id':1,'v':1}"),
    R(.rec = "{'L':5}", .doc = "{'_id':1,'v':1}"),
    R(.rec = "{'L':5}", .doc = "{'_id':1,'_fence':{'L':3},'v':1}"),
    R(.rec = "{'L':5}", .doc = "{'_id':1,'_fence':{'L':7},'v':1}"),
    R(.rec = "{'L':5}", .doc = "{'_id':1,'_fence':{'L':5},'v':1}"),
    R(.rec = "{'L':5,'M':2}", .doc = "{'_id':1,'_fence':{'M':9,'N':1}}"),
    R(.rec = "{'L':5000000000}", .doc = "{'_id':1,'_fence':{'L':3}}"),
    /* tokens that are not integers are never judged larger */
    R(.rec = "{'L':'x'}", .doc = "{'_id':1,'_fence':{'L':3}}"),
    R(.rec = "{'L':'x'}", .doc = "{'_id':1}"),
    R(.rec = "{'L':5}", .doc = "{'_id':1,'_fence':{'L':'y'}}"),
    R(.rec = "{'L':5.5}", .doc = "{'_id':1,'_fence':{'L':2}}"),
    /* a document whose _fence is not an object (store.c refuses it) */
    R(.rec = "{'L':5}", .doc = "{'_id':1,'_fence':5}"),
    /* a fenced upsert: judged against the record first */
    R(.rec = "{'L':5}", .doc = "{'_id':'J1','v':1,'_fence':{'L':3}}",
      .name = "L", .token = 3, .rc = DTX_EFENCED),
    R(.rec = "{'L':5}", .doc = "{'_id':'J1','v':1,'_fence':{'L':5}}",
      .name = "L", .token = 5),
    R(.rec = "{'L':5}", .doc = "{'_id':'J1','v':1,'_fence':{'L':7}}",
      .name = "L", .token = 7),
    R(.rec = "{'L':'x'}", .doc = "{'_id':'J1','_fence':{'L':7}}",
      .name = "L", .token = 7, .rc = DTX_EFENCED),
    R(.rec = "{'M':9}", .doc = "{'_id':'J1','_fence':{'L':7}}", .name = "L",
      .token = 7),
    R(.rec = "{}", .doc = "{'_id':'J1','_fence':{'L':7}}", .name = "L",
      .token = 7),

    /* ---- the time window ---- */
    W(.doc = "{'_id':'T1'}", .now = 5),
    W(.doc = "{'_id':'T1'}", .nb = 1000, .now = 999, .rc = DTX_ESTATE),
    W(.doc = "{'_id':'T1'}", .na = 1000, .now = 1001, .rc = DTX_ESTALE),
    W(.doc = "{'_id':'T1'}", .nb = 1000, .na = 2000, .now = 1500),
    W(.doc = "{'_id':'T1'}", .nb = 1000, .na = 2000, .now = 1000),
    W(.doc = "{'_id':'T1'}", .nb = 1000, .na = 2000, .now = 2000),
    W(.doc = NULL, .na = 1000, .now = 3000, .rc = DTX_ESTALE),
    W(.doc = "{'v':1}", .nb = 1000, .now = 0, .rc = DTX_ESTATE),
    W(.doc = "{'_id':{'k':[1,'a']}}", .na = 1, .now = 2, .rc = DTX_ESTALE),
    W(.doc = "{'_id':5000000000}", .na = INT64_MAX - 1, .now = INT64_MAX,
      .rc = DTX_ESTALE),
    W(.doc = "{'_id':1}", .nb = INT64_MAX, .now = 0, .rc = DTX_ESTATE),
    W(.doc = "{'_id':1}", .na = INT64_MAX, .now = INT64_MAX),
    W(.doc = "{'_id':1}", .nb = INT64_MAX, .na = INT64_MAX,
      .now = INT64_MAX),
};

/* ---- helpers ------------------------------------------------------------- */

static char *dump(const json_t *v) {
  return json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
}

/* b through the bridge as JSON text (NULL stays NULL); without its _id
 * when drop_id (a generated one: each engine makes its own). */
static char *bdump(const bson_t *b, int drop_id) {
  json_t *j = NULL;
  if (!b)
    return NULL;
  if (dtx__bson_to_json(bson_get_data(b), b->len, 0, &j) < 0)
    return strdup("(bridge failed)");
  if (drop_id)
    json_object_del(j, "_id");
  char *s = dump(j);
  json_decref(j);
  return s;
}

static char *jdump(const json_t *j, int drop_id) {
  if (!j)
    return NULL;
  json_t *c = json_deep_copy(j);
  if (drop_id)
    json_object_del(c, "_id");
  char *s = dump(c);
  json_decref(c);
  return s;
}

static int same_text(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* One engine's answer. */
typedef struct answer {
  int rc, changed;
  char *detail, *out;
} answer_t;

static void answer_set(answer_t *a, int rc) {
  a->rc = rc;
  a->detail = strdup(rc < 0 ? dtx_errdetail() : "");
}

static void answer_free(answer_t *a) {
  free(a->detail);
  free(a->out);
}

static bson_t *bridge(const json_t *j) {
  bson_t *b = bson_new();
  if (dtx__bson_from_json(j, b) < 0)
    abort();
  return b;
}

static const char *const kinds[] = {"apply", "upsert", "tombstone",
                                    "revive", "window"};

/* ---- the rows ------------------------------------------------------------ */

static void run_row(size_t i, const row_t *r) {
  json_t *doc = r->doc ? JQNEW(r->doc) : NULL;
  json_t *spec = r->update ? JQNEW(r->update) : NULL;
  json_t *rec = r->rec ? JQNEW(r->rec) : NULL;
  bson_t *bdoc = doc ? bridge(doc) : NULL, *brec = rec ? bridge(rec) : NULL;
  dtx__update_t *ju = NULL;
  dtx__bupdate_t *bu = NULL;
  answer_t j = {0}, b = {0};
  if (spec) {
    bson_t *bspec = bridge(spec);
    int jrc = dtx__update_compile(spec, &ju);
    int brc = dtx__bupdate_compile(bson_get_data(bspec), bspec->len, NULL, 0,
                                   &bu);
    bson_destroy(bspec);
    if (jrc < 0 || brc < 0) {
      CHECKF(0, "row %zu: the update does not compile (%d, %d)", i, jrc,
             brc);
      goto out;
    }
  }
  dtx__modify_t m = {.coll = "c",
                     .filter_spec = r->kind == UPSERT ? doc : NULL,
                     .update_spec = spec,
                     .update = ju,
                     .upsert = r->kind == UPSERT,
                     .fence_name = r->name,
                     .fence_token = r->token,
                     .not_before = r->nb,
                     .not_after = r->na};
  const uint8_t *dd = bdoc ? bson_get_data(bdoc) : NULL;
  uint32_t dl = bdoc ? bdoc->len : 0;
  json_t *jo = NULL;
  bson_t *bo = NULL;
  switch (r->kind) {
  case APPLY:
    answer_set(&j, dtx__modify_apply(&m, doc, 7, &jo, &j.changed));
    answer_set(&b, dtx__bmodify_apply(&m, bu, dd, dl, 7, &bo, &b.changed));
    break;
  case UPSERT:
    answer_set(&j, dtx__modify_upsert_doc(&m, 7, &jo));
    answer_set(&b, dtx__bmodify_upsert_doc(&m, bu, dd, dl, 7, &bo));
    break;
  case TOMB:
    answer_set(&j, dtx__fence_tombstone(&m, doc, &jo));
    answer_set(&b, dtx__bfence_tombstone(&m, dd, dl, &bo));
    break;
  case REVIVE: {
    /* the insert's m is NULL; the revived record belongs to coll */
    const dtx__modify_t *rm = r->name ? &m : NULL;
    json_t *mine = json_deep_copy(doc);
    answer_set(&j, dtx__fence_revive(rm, "other", rec, mine));
    answer_set(&b, dtx__bfence_revive(rm, "other", bson_get_data(brec),
                                      brec->len, dd, dl, &bo));
    /* the json_t engine changes its private copy in place; on a refusal
     * it must be untouched, as the twin makes nothing */
    if (j.rc == 0)
      jo = mine;
    else {
      CHECKF(json_equal(mine, doc), "row %zu: refused, yet changed", i);
      json_decref(mine);
    }
    break;
  }
  case WINDOW:
    answer_set(&j, dtx__window_test(&m, doc, r->now));
    answer_set(&b, dtx__bwindow_test(&m, dd, dl, r->now));
    break;
  }
  j.out = jdump(jo, r->genid);
  b.out = bdump(bo, r->genid);
  const char *k = kinds[r->kind];
  CHECKF(j.rc == r->rc && b.rc == r->rc,
         "%s row %zu: json %s (%s), bson %s (%s), want %s", k, i,
         dtx_errname(j.rc), j.detail, dtx_errname(b.rc), b.detail,
         dtx_errname(r->rc));
  CHECKF(strcmp(j.detail, b.detail) == 0, "%s row %zu: details\n  %s\n  %s",
         k, i, j.detail, b.detail);
  CHECKF(same_text(j.out, b.out), "%s row %zu: json %s, bson %s", k, i,
         j.out ? j.out : "NULL", b.out ? b.out : "NULL");
  if (jo && bo) {
    json_t *back = NULL;
    CHECK(dtx__bson_to_json(bson_get_data(bo), bo->len, 0, &back) == 0);
    if (r->genid) {
      CHECKF(json_object_get(jo, "_id") && json_object_get(back, "_id"),
             "%s row %zu: no _id generated", k, i);
      json_object_del(back, "_id");
      json_t *c = json_deep_copy(jo);
      json_object_del(c, "_id");
      CHECK(json_equal(c, back));
      json_decref(c);
    } else {
      CHECKF(json_equal(jo, back), "%s row %zu: not json_equal", k, i);
    }
    json_decref(back);
  }
  if (r->kind == APPLY)
    CHECKF(j.changed == b.changed, "%s row %zu: changed json %d, bson %d", k,
           i, j.changed, b.changed);
  if (r->kind == APPLY && r->changed && j.rc == 0)
    CHECKF(j.changed == (r->changed == 1), "%s row %zu: changed %d, want %d",
           k, i, j.changed, r->changed == 1);
  if (r->kind == APPLY && b.rc == 0 && bo)
    CHECK(dtx__bson_check(bson_get_data(bo), bo->len, DTX_ECORRUPT,
                          "result") == 0);
  if (b.rc < 0)
    CHECKF(!bo, "%s row %zu: a document on %s", k, i, dtx_errname(b.rc));
  if (r->kind == REVIVE && r->rc == DTX_EFENCED && r->rec &&
      strchr(r->rec, 'x') == NULL)
    CHECKF(strstr(b.detail, "before it was deleted") &&
               strstr(b.detail, "other 'J1'"),
           "row %zu: detail %s", i, b.detail);
  json_decref(jo);
  if (bo)
    bson_destroy(bo);
out:
  answer_free(&j);
  answer_free(&b);
  dtx__update_free(ju);
  dtx__bupdate_free(bu);
  json_decref(doc);
  json_decref(spec);
  json_decref(rec);
  if (bdoc)
    bson_destroy(bdoc);
  if (brec)
    bson_destroy(brec);
}

static void test_rows(void) {
  size_t per[5] = {0};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    run_row(i, &rows[i]);
    per[rows[i].kind]++;
  }
  printf("bfence rows: %zu apply, %zu upsert, %zu tombstone, %zu revive, "
         "%zu window\n",
         per[APPLY], per[UPSERT], per[TOMB], per[REVIVE], per[WINDOW]);
}

/* ---- int32 and int64 tokens ---------------------------------------------- */

/* The type of doc's _fence.name (0 when absent). */
static bson_type_t token_type(const bson_t *doc, const char *name) {
  dtx__bval_t v = dtx__bpath_get(bson_get_data(doc), doc->len, "_fence");
  if (v.type != BSON_TYPE_DOCUMENT)
    return BSON_TYPE_EOD;
  dtx__belem_t e;
  return dtx__belem_find(v.data, v.len, name, strlen(name), &e) ? e.v.type
                                                                : 0;
}

/* A record the bridge wrote holds an int32 for a small token; the twin
 * writes int64; either reads as the integer it is, and an equal token
 * leaves the int32 as it was (no change, no rewrite). */
static void test_token_types(void) {
  json_t *jd = JQNEW("{'_id':1,'_fence':{'L':3},'v':1}");
  json_t *js = JQNEW("{'$set':{'v':1}}");
  bson_t *d = bridge(jd), *s = bridge(js), *out = NULL;
  dtx__bupdate_t *u = NULL;
  int changed = -1;
  REQUIRE(dtx__bupdate_compile(bson_get_data(s), s->len, NULL, 0, &u) == 0);
  CHECK(token_type(d, "L") == BSON_TYPE_INT32);
  dtx__modify_t m = {.coll = "c", .fence_name = "L", .fence_token = 3};
  CHECK_RC(dtx__bmodify_apply(&m, u, bson_get_data(d), d->len, 0, &out,
                              &changed),
           0);
  CHECK(changed == 0 && out && token_type(out, "L") == BSON_TYPE_INT32);
  CHECK(out && out->len == d->len &&
        memcmp(bson_get_data(out), bson_get_data(d), d->len) == 0);
  if (out)
    bson_destroy(out);
  m.fence_token = 4;
  CHECK_RC(dtx__bmodify_apply(&m, u, bson_get_data(d), d->len, 0, &out,
                              &changed),
           0);
  CHECK(changed == 1 && out && token_type(out, "L") == BSON_TYPE_INT64);
  /* an int64 record is judged as the int32 one was */
  bson_t *again = out;
  m.fence_token = 3;
  CHECK_RC(dtx__bmodify_apply(&m, u, bson_get_data(again), again->len, 0,
                              &out, &changed),
           DTX_EFENCED);
  CHECK(out == NULL);
  m.fence_token = 4;
  CHECK_RC(dtx__bmodify_apply(&m, u, bson_get_data(again), again->len, 0,
                              &out, &changed),
           0);
  CHECK(changed == 0 && out && token_type(out, "L") == BSON_TYPE_INT64);
  if (out)
    bson_destroy(out);
  /* a new token over an int64 one: the same bytes but its 8 */
  m.fence_token = 6;
  CHECK_RC(dtx__bmodify_apply(&m, u, bson_get_data(again), again->len, 0,
                              &out, &changed),
           0);
  CHECK(changed == 1 && out && token_type(out, "L") == BSON_TYPE_INT64 &&
        out->len == again->len);
  if (out) {
    json_t *back = NULL;
    CHECK(dtx__bson_to_json(bson_get_data(out), out->len, 0, &back) == 0);
    json_t *want = JQNEW("{'_id':1,'_fence':{'L':6},'v':1}");
    CHECKF(json_equal(back, want), "%s", JS(back));
    json_decref(want);
    json_decref(back);
    bson_destroy(out);
  }
  /* a tombstone's token and a revived one keep their width */
  bson_t *rec = NULL;
  CHECK_RC(dtx__bfence_tombstone(&m, bson_get_data(d), d->len, &rec), 0);
  CHECK(rec && bson_has_field(rec, "L"));
  bson_t *doc = bson_new(), *rv = NULL;
  BSON_APPEND_INT32(doc, "_id", 2);
  CHECK_RC(dtx__bfence_revive(NULL, "c", bson_get_data(rec), rec->len,
                              bson_get_data(doc), doc->len, &rv),
           0);
  CHECK(rv && token_type(rv, "L") == BSON_TYPE_INT64);
  bson_destroy(again);
  bson_destroy(doc);
  if (rv)
    bson_destroy(rv);
  if (rec)
    bson_destroy(rec);
  bson_destroy(d);
  bson_destroy(s);
  dtx__bupdate_free(u);
  json_decref(jd);
  json_decref(js);
}

int main(void) {
  TEST_RUN(test_rows);
  TEST_RUN(test_token_types);
  return TEST_DONE();
}
