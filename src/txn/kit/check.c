/* check.c -- what the kit asserts of its own steps' outcomes (util/
 * assert.h), and the patterns' shape checks (kit.h, dtx__shape_def_t).
 *
 * A move, a takeover and a claim are each one atomic find_one_and_update
 * whose update sets the state, and, when it takes the lease, the owner
 * and epoch + 1; its filter demands the expected state and, fenced, the
 * epoch.  So the document it returns is in the target state, owned by
 * this executor when taken, at the epoch the flags say -- by the store's
 * contract, whatever anyone else wrote.  A failure here is a doctx bug
 * (the kit's update, or a backend's), never a tamper.
 *
 * A pattern's shape check (docs/kit.md, "Shape checks") says which
 * fields go together in each state -- what one validator cannot say.  In
 * a debug build (DTX_DEBUG) the kit runs it after every move: a move that
 * takes a well-shaped document to a badly shaped one is a bug in the
 * pattern's step and aborts naming "<pattern>.shape" and why.  A
 * document that was badly shaped before the move was written so by hand
 * (bypass_validation): the audit reports it, so nothing aborts.  The
 * audit frame runs the same checks in every build (audit.c). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/kit/kit.h"
#include "txn/kit/kit_int.h"
#include "util/assert.h"
#include "util/err.h"

int dtx__shape_bad(char *why, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, n, fmt, ap);
  va_end(ap);
  return -1;
}

const dtx__shape_def_t *dtx__kit_shape_of(const dtx__pattern_t *p,
                                          const char *coll) {
  for (size_t i = 0; p || dtx__patterns[i]; i++) {
    for (const dtx__shape_def_t *s = (p ? p : dtx__patterns[i])->shapes;
         s && s->coll; s++)
      if (strcmp(s->coll, coll) == 0)
        return s;
    if (p)
      break;
  }
  return NULL;
}

/* Debug builds: doc's shape before the move held, so it holds after. */
static void shape_kept(const dtx__kind_t *k, const json_t *before,
                       const json_t *after) {
  const dtx__shape_def_t *s = dtx__kit_shape_of(NULL, k->coll);
  char why[256], was[256];
  if (!s || s->check(after, why, sizeof why) == 0 ||
      s->check(before, was, sizeof was) != 0)
    return;
  char id[160], cond[600];
  snprintf(id, sizeof id, "%s.shape", k->coll);
  snprintf(cond, sizeof cond, "%s %s: %s",
           dtx__str(after, "_id") ? dtx__str(after, "_id") : "?",
           dtx__str(after, k->state) ? dtx__str(after, k->state) : "?", why);
  dtx__assert_fail(id, cond, __FILE__, __LINE__);
}

/* The epoch of doc when it is an integer, else -1 (a tamper: not judged). */
static int64_t epoch_of(const json_t *doc) {
  const json_t *e = json_object_get(doc, "epoch");
  return json_is_integer(e) ? (int64_t)json_integer_value(e) : -1;
}

void dtx__kit_move_check(const dtx__exec_t *ex, const dtx__kind_t *k,
                         const json_t *doc, const dtx__move_t *m, int rc,
                         const json_t *out) {
  DTX_ASSERT(DTX__IS_CODE(rc), "kit.rc_is_a_code");
  DTX_ASSERT(rc == 0 ? out != NULL : out == NULL, "kit.move.out_iff_ok");
  if (rc)
    return;
  DTX_ASSERT(!m->to || dtx__str_is(out, k->state, m->to), "kit.move.to");
  DTX_ASSERT(!(m->flags & DTX__TAKE) || dtx__str_is(out, "owner", ex->owner),
             "kit.take.owner");
  /* I3, J1, O4: a fenced move keeps the epoch it was fenced on, and a
   * taken lease raises it by one -- the old owner's writes fail. */
  DTX_ASSERT(!(m->flags & DTX__FENCED) || epoch_of(out) < 0 ||
                 epoch_of(out) ==
                     epoch_of(doc) + ((m->flags & DTX__TAKE) ? 1 : 0),
             "kit.fenced.epoch");
  if (DTX_DEBUG)
    shape_kept(k, doc, out);
}

void dtx__kit_claim_check(const dtx__exec_t *ex, const dtx__kind_t *k,
                          const dtx__claim_t *c, const json_t *items,
                          size_t max) {
  int one = json_is_object(items);
  size_t n = one ? 1 : json_array_size(items);
  DTX_ASSERT(n >= 1 && n <= max, "kit.claim.count");
  for (size_t i = 0; i < n; i++) {
    const json_t *d = one ? items : json_array_get(items, i);
    /* C1: claimed under this executor's lease, in the claim's state. */
    DTX_ASSERT(dtx__str_is(d, k->state, c->to), "kit.claim.to");
    DTX_ASSERT(dtx__str_is(d, "owner", ex->owner), "kit.claim.owner");
  }
}

int dtx__kit_judge(const struct dtx__rules *r, const char *step,
                   const char *coll, const json_t *before,
                   const json_t *after) {
  const char *saved = dtx__rules_step_enter(step);
  int rc = dtx__doc_check_write(r, coll, before, after, 0);
  dtx__rules_step_leave(saved);
  return rc;
}
