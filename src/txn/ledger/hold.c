/* hold.c -- a partial post of a hold: post-pending ID --amounts posts up to
 * what each leg of a pending entry holds and releases the rest, in ONE
 * step (ledger.c has the state diagram and the invariants; docs/ledger.md,
 * "Partial post of a hold").
 *
 *   transition                 function                   fault point
 *   pending -> posted          dtx_ledger_post_partial    ledger.pending.partial
 *     (some amounts), or
 *   pending -> voided (all 0)
 *
 * The entry's legs ("changes") never change (L1): the step sets the state
 * and "amounts", the value each leg posted (aligned with changes), and
 * "post_id" when given.  A posted entry's leg counts its amount when the
 * entry has amounts, else its value (dtx__lg_amount) -- everywhere a
 * balance is summed: positions, the committer's caches, statements,
 * reversal and the audit.  Posting all of every leg is post-pending in
 * full (no amounts stored), posting 0 everywhere is a void: the outcomes
 * are the same documents, so the three can be compared (tests/cli/
 * ledger.sh, the differential).
 *
 * Invariants (the audit checks them):
 *  H1 amounts has one integer per leg, each between 0 and the leg's value
 *     (same sign, never more than held), and they sum to zero;
 *  H2 only a posted entry that was pending has amounts. */
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

int64_t dtx__lg_amount(const json_t *e, const json_t *leg) {
  json_t *am = json_object_get(e, "amounts");
  if (json_is_array(am)) {
    json_t *changes = json_object_get(e, "changes");
    size_t i;
    json_t *l;
    json_array_foreach(changes, i, l) {
      if (l == leg)
        return json_integer_value(json_array_get(am, i));
    }
  }
  return dtx__int(leg, "value");
}

int64_t dtx__lg_amount_of(const json_t *e, const char *account) {
  const json_t *leg = dtx__lg_leg(e, account);
  return leg ? dtx__lg_amount(e, leg) : 0;
}

int dtx_ledger_partial_check(const char *id, const dtx_ledger_leg_t *amounts,
                             size_t n, const char *post_id) {
  int rc;
  dtx__err_clear();
  if ((rc = dtx__check_ident("entry id", id)) ||
      (post_id && (rc = dtx__check_ident("post id", post_id))))
    return rc;
  if (n > DTX_LEDGER_MAX_LEGS || (n && !amounts))
    return dtx__err(DTX_EINVAL, "a partial post names 0 to %d legs, got %zu",
                    DTX_LEDGER_MAX_LEGS, n);
  for (size_t i = 0; i < n; i++) {
    if ((rc = dtx__check_ident("account id", amounts[i].account)))
      return rc;
    for (size_t j = 0; j < i; j++)
      if (strcmp(amounts[j].account, amounts[i].account) == 0)
        return dtx__err(DTX_EINVAL, "account '%s' appears in two amounts",
                        amounts[i].account);
  }
  return 0;
}

/* The amount per leg of pending entry e that the request asks for, into
 * *vec (a new array aligned with changes); *all: every leg posts all it
 * holds, *none: every leg posts 0.  DTX_EINVAL naming the account for an
 * amount over what its leg holds, of the other sign, for an account the
 * entry lacks, or amounts not summing to zero. */
static int amounts_of(const json_t *e, const dtx_ledger_leg_t *am, size_t n,
                      json_t **vec, int *all, int *none) {
  const char *id = dtx__str(e, "_id");
  json_t *changes = json_object_get(e, "changes"), *l;
  size_t i;
  __int128 sum = 0;
  *all = *none = 1;
  for (size_t k = 0; k < n; k++)
    if (!dtx__lg_leg(e, am[k].account))
      return dtx__err(DTX_EINVAL, "ledger entry '%s' has no leg on account "
                      "'%s'", id, am[k].account);
  if (!(*vec = json_array()))
    return DTX_ENOMEM;
  json_array_foreach(changes, i, l) {
    const char *acc = dtx__str(l, "account");
    int64_t held = dtx__int(l, "value"), a = 0;
    for (size_t k = 0; k < n; k++)
      if (acc && strcmp(am[k].account, acc) == 0)
        a = am[k].value;
    if (held < 0 ? a < held || a > 0 : a > held || a < 0) {
      json_decref(*vec);
      *vec = NULL;
      return dtx__err(DTX_EINVAL, "ledger entry '%s': account '%s' holds "
                      "%lld, so it posts 0 to %lld, not %lld", id,
                      acc ? acc : "?", (long long)held, (long long)held,
                      (long long)a);
    }
    *all = *all && a == held;
    *none = *none && a == 0;
    sum += a;
    if (json_array_append_new(*vec, json_integer((json_int_t)a))) {
      json_decref(*vec);
      return DTX_ENOMEM;
    }
  }
  if (sum != 0) {
    json_decref(*vec);
    *vec = NULL;
    return dtx__err(DTX_EINVAL, "ledger entry '%s': the amounts sum to %s, "
                    "not 0", id, dtx__wide_str(sum, (char[48]){0}));
  }
  return 0;
}

/* Is resolved entry e what this request would have made of it? */
static int same_outcome(const json_t *e, const json_t *vec, int none,
                        const char *post_id) {
  const char *pid = dtx__str(e, "post_id");
  if (post_id && (!pid || strcmp(pid, post_id) != 0))
    return 0;
  if (none)
    return dtx__state_is(e, LG_VOIDED);
  if (!dtx__state_is(e, LG_POSTED))
    return 0;
  json_t *changes = json_object_get(e, "changes"), *l;
  size_t i;
  json_array_foreach(changes, i, l) {
    if (dtx__lg_amount(e, l) != json_integer_value(json_array_get(vec, i)))
      return 0;
  }
  return 1;
}

static int partial(dtx__exec_t *ex, const char *id, const dtx_ledger_leg_t *am,
                   size_t n, const char *post_id, json_t **out) {
  json_t *e = NULL, *next = NULL, *vec = NULL;
  dtx__contend_t ct = {0};
  const char *point = "ledger.pending.partial";
  int all = 0, none = 0;
  int rc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, id, &e);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no ledger entry '%s'", id);
  /* The amounts are judged against the legs, which never change (L1). */
  if (rc == 0)
    rc = amounts_of(e, am, n, &vec, &all, &none);
  while (rc == 0) {
    if (!dtx__state_is(e, LG_PENDING)) {
      /* Resolved: by this request before (a retry), or otherwise. */
      if (same_outcome(e, vec, none, post_id)) {
        *out = e;
        e = NULL;
      } else {
        const char *pid = dtx__str(e, "post_id");
        rc = dtx__err(dtx__state_is(e, LG_EXPIRED) ? DTX_ESTATE : DTX_ECONFLICT,
                      "ledger entry '%s' is %s%s%s%s, not as this partial "
                      "post asks", id, dtx__str(e, "state") ? dtx__str(e, "state") : "?",
                      json_object_get(e, "amounts") ? " (partly)" : "",
                      pid ? " by post " : "", pid ? pid : "");
      }
      break;
    }
    int64_t now = dtx__now_ms();
    if (dtx__int(e, "expires_at") <= now) {
      rc = dtx__lg_expire(ex, e, &next);
    } else {
      /* ONE step: the state, the amounts (unless all or nothing: then it
       * is post-pending in full or a void, the same document), the post
       * id. */
      json_t *set = json_pack("{s:I}", "resolved_at", (json_int_t)now);
      if (set && !all && !none)
        json_object_set(set, "amounts", vec);
      if (set && post_id)
        json_object_set_new(set, "post_id", json_string(post_id));
      dtx__move_t m = {
          .point = point, .from = LG_PENDING, .to = none ? LG_VOIDED : LG_POSTED,
          .cond = json_pack("{s:{s:I}}", "expires_at", "$gt", (json_int_t)now),
          .set = set};
      rc = dtx__kit_move(ex, &dtx__lg_state_kind, e, &m, &next);
    }
    DTX_ASSERT(rc || !dtx__state_is(next, LG_PENDING), "L5");
    if (rc == DTX_ENOMATCH && dtx__kit_contend(&ct, &rc, point)) {
      json_decref(next);
      next = NULL;
      rc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, id, &next);
    }
    json_decref(e);
    e = next;
    next = NULL;
  }
  json_decref(e);
  json_decref(vec);
  return rc;
}

int dtx_ledger_post_partial(dtx_store_t *st, const char *id,
                            const dtx_ledger_leg_t *amounts, size_t n,
                            const char *post_id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx_ledger_partial_check(id, amounts, n, post_id);
  if (rc == 0)
    rc = dtx__lg_setup(st);
  if (rc == 0)
    rc = partial(&ex, id, amounts, n, post_id, out);
  return dtx__call_end(&c, rc);
}
