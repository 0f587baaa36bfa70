/* window.c -- time-bounded writes (doctx.h, "time-bounded writes"): a
 * write that carries not_before / not_after is refused when the STORE's
 * clock, read inside the write's atomic step, is outside them.
 *
 * Why the store's clock and not the caller's: the writer this exists for
 * may be paused between deciding to write and writing (a job attempt
 * taken over while it slept, docs/jobs.md "Exactly once").  A deadline it
 * checks itself is checked before the pause; a bound the store checks is
 * checked when the write lands.  SQLite reads the clock inside the write
 * transaction, while it holds the write lock, so the order of the clock
 * readings is the order of the writes; Redis reads the server's TIME
 * inside the WRITE script (scripts.c), on the node that holds the
 * document.  Both report a refusal through dtx__window_test, so the rule
 * and its message exist once, here. */
#include "store/store.h"

#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>

int dtx__window_set(dtx__modify_t *m, int64_t not_before, int64_t not_after) {
  if (not_before < 0 || not_after < 0)
    return dtx__err(DTX_EINVAL, "not_before and not_after are wall-clock ms "
                    ">= 0 (0: no bound), got %lld and %lld",
                    (long long)not_before, (long long)not_after);
  if (not_before && not_after && not_before > not_after)
    return dtx__err(DTX_EINVAL, "not_before %lld is after not_after %lld: "
                    "no write could ever be made",
                    (long long)not_before, (long long)not_after);
  m->not_before = not_before;
  m->not_after = not_after;
  return 0;
}

int dtx__window_any(const dtx__modify_t *m) {
  return m->not_before > 0 || m->not_after > 0;
}

/* 1 (late), -1 (early) or 0 (within): where now falls against m's bounds. */
static int outside(const dtx__modify_t *m, int64_t now) {
  int late = m->not_after > 0 && now > m->not_after;
  int early = m->not_before > 0 && now < m->not_before;
  DTX_ASSERT(!(late && early), "window.bounds"); /* not_before <= not_after */
  return late ? 1 : early ? -1 : 0;
}

/* The refusal both engines give; id is the _id as JSON text, NULL for a
 * document not yet created (an upsert's). */
static int refuse(const dtx__modify_t *m, const char *id, int64_t now,
                  int late) {
  return late ? dtx__err(DTX_ESTALE,
                         "%s %s: the write came at %lld by the store's "
                         "clock, %lld ms past its not_after %lld: nothing "
                         "changed",
                         m->coll, id ? id : "(new)", (long long)now,
                         (long long)(now - m->not_after),
                         (long long)m->not_after)
              : dtx__err(DTX_ESTATE,
                         "%s %s: the write came at %lld by the store's "
                         "clock, %lld ms before its not_before %lld: "
                         "nothing changed",
                         m->coll, id ? id : "(new)", (long long)now,
                         (long long)(m->not_before - now),
                         (long long)m->not_before);
}

int dtx__window_test(const dtx__modify_t *m, const json_t *doc, int64_t now) {
  int where = outside(m, now);
  if (!where)
    return 0;
  const json_t *id = json_object_get(doc, "_id");
  char *t = id ? dtx__json_dump(id) : NULL;
  int rc = refuse(m, t, now, where > 0);
  free(t);
  return rc;
}

int dtx__bwindow_test(const dtx__modify_t *m, const uint8_t *doc,
                      uint32_t len, int64_t now) {
  int where = outside(m, now);
  if (!where)
    return 0;
  /* The _id as the json_t engine prints it: through the bridge, on the
   * refusal only. */
  dtx__belem_t e;
  json_t *id = NULL;
  char *t = NULL;
  if (doc && dtx__belem_find(doc, len, "_id", 3, &e) &&
      dtx__bval_to_json(&e.v, &id) == 0)
    t = dtx__json_dump(id);
  json_decref(id);
  int rc = refuse(m, t, now, where > 0);
  free(t);
  return rc;
}
