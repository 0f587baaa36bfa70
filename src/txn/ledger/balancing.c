/* balancing.c -- balancing legs: `ACC:-max[=CAP]` debits as much as the
 * limits allow, up to CAP, and the `ACC:max` leg is credited the same
 * amount (docs/ledger.md, "Balancing legs").  ledger.c has the state
 * diagram and the invariants; this is no new step: the amount is derived
 * in a post's build (post.c, dtx__lg_build) from the same positions the
 * legs are checked against, and the entry is inserted by the post's own
 * step (ledger.post), so a concurrent poster that took a seqId first makes
 * the insert fail and the amount is derived again (L2).  The stored entry
 * is an ordinary one: its legs are the amounts that moved.
 *
 * The amount X, for debit account D and credit account C:
 *   room(D) = posted(D) - pending debits(D) - min_balance(D)   (the floor,
 *             holds included; no floor: to INT64_MIN)
 *   room(C) = max_balance(C) - posted(C) - pending credits(C)  (the upper
 *             limit, holds included; no max: to INT64_MAX)
 *   X = min(CAP, room(D), room(C))
 * X <= 0 moves nothing and is refused (DTX_EINSUFFICIENT naming the
 * account that has no room): an entry has no zero legs (L1). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

int dtx_ledger_leg_value_parse(const char *text, dtx_ledger_leg_t *leg,
                               int *kind) {
  dtx__err_clear();
  *kind = DTX_LEDGER_LEG_FIXED;
  leg->value = 0;
  if (!text)
    return dtx__err(DTX_EINVAL, "a leg needs a value");
  if (strcmp(text, "max") == 0) {
    *kind = DTX_LEDGER_LEG_MAX_CREDIT;
    return 0;
  }
  /* Text is a balancing leg or nothing: a number is written as a number
   * (a JSON string "-1" is no leg value). */
  if (strncmp(text, "-max", 4) != 0 || (text[4] != '\0' && text[4] != '='))
    return dtx__err(DTX_EINVAL, "a leg's value is an int64 (minor units), "
                    "or -max, -max=CAP or max, got '%.40s'", text);
  *kind = DTX_LEDGER_LEG_MAX_DEBIT;
  if (text[4] == '\0')
    return 0;
  /* The cap: an int64 > 0, nothing after it. */
  const char *num = text + 5;
  char *end = NULL;
  errno = 0;
  long long v = *num >= '0' && *num <= '9' ? strtoll(num, &end, 10) : 0;
  if (!end || *end || errno == ERANGE || v <= 0)
    return dtx__err(DTX_EINVAL, "the cap of '%.40s' must be an int64 > 0",
                    text);
  leg->value = (int64_t)v;
  return 0;
}

int dtx__lg_leg_kind(const dtx_ledger_post_req_t *req, size_t i) {
  return req->max_debit == i + 1    ? DTX_LEDGER_LEG_MAX_DEBIT
         : req->max_credit == i + 1 ? DTX_LEDGER_LEG_MAX_CREDIT
                                    : DTX_LEDGER_LEG_FIXED;
}

int dtx__lg_check_balancing(const dtx_ledger_post_req_t *req) {
  size_t d = req->max_debit, c = req->max_credit;
  if (!d && !c)
    return 0;
  if (!d || !c || d == c || d > req->nlegs || c > req->nlegs)
    return dtx__err(DTX_EINVAL, "an entry with a balancing leg has exactly "
                    "one -max leg and one max leg");
  const dtx_ledger_leg_t *ld = &req->legs[d - 1], *lc = &req->legs[c - 1];
  if (ld->value < 0)
    return dtx__err(DTX_EINVAL, "leg %zu (account '%s'): a -max leg's cap "
                    "is > 0, or 0 for none, got %lld", d, ld->account,
                    (long long)ld->value);
  if (lc->value != 0)
    return dtx__err(DTX_EINVAL, "leg %zu (account '%s'): a max leg takes "
                    "the -max leg's amount, its value must be 0, got %lld",
                    c, lc->account, (long long)lc->value);
  return 0;
}

/* The index of req's leg of kind k, or -1. */
static int leg_of(const dtx_ledger_post_req_t *req, int k) {
  size_t i = k == DTX_LEDGER_LEG_MAX_DEBIT ? req->max_debit : req->max_credit;
  return i ? (int)i - 1 : -1;
}

int dtx__lg_balancing_amount(const dtx_ledger_post_req_t *req,
                             const dtx__lg_pos_t *pos, int64_t *vals) {
  int d = leg_of(req, DTX_LEDGER_LEG_MAX_DEBIT);
  int c = leg_of(req, DTX_LEDGER_LEG_MAX_CREDIT);
  for (size_t i = 0; i < req->nlegs; i++)
    vals[i] = req->legs[i].value;
  if (d < 0)
    return 0;
  DTX_ASSERT(c >= 0 && c != d, "L1"); /* dtx__lg_check_balancing */
  const dtx__lg_pos_t *pd = &pos[d], *pc = &pos[c];
  const char *da = req->legs[d].account, *ca = req->legs[c].account;
  json_t *min = json_object_get(pd->acct, "min_balance");
  json_t *max = json_object_get(pc->acct, "max_balance");
  int64_t cap = req->legs[d].value;
  if (!json_is_integer(min) && cap == 0)
    return dtx__err(DTX_EINVAL, "account '%s' has no min_balance: its -max "
                    "leg needs a cap (-max=CAP)", da);
  /* In 128 bits: the positions are exact sums, so nothing wraps. */
  __int128 rd = pd->posted - pd->pend_debit -
                (json_is_integer(min) ? json_integer_value(min) : INT64_MIN);
  __int128 rcr = (json_is_integer(max) ? json_integer_value(max) : INT64_MAX) -
                 pc->posted - pc->pend_credit;
  __int128 x = cap > 0 ? cap : INT64_MAX;
  const char *who = NULL;
  if (rd < x)
    x = rd, who = da;
  if (rcr < x)
    x = rcr, who = ca;
  if (x <= 0)
    return dtx__err(DTX_EINSUFFICIENT,
                    "account '%s': a -max leg moves nothing (%s)", who,
                    who == da ? "its available balance is at its min_balance"
                              : "its balance plus pending credits is at its "
                                "max_balance");
  DTX_ASSERT(x <= INT64_MAX, "L4");
  vals[d] = -(int64_t)x;
  vals[c] = (int64_t)x;
  return 0;
}

int dtx__lg_same_balancing(const json_t *e, const dtx_ledger_post_req_t *req) {
  int d = leg_of(req, DTX_LEDGER_LEG_MAX_DEBIT);
  int c = leg_of(req, DTX_LEDGER_LEG_MAX_CREDIT);
  if (d < 0)
    return 1;
  int64_t vd = dtx__int(dtx__lg_leg(e, req->legs[d].account), "value");
  int64_t vc = dtx__int(dtx__lg_leg(e, req->legs[c].account), "value");
  return vd < 0 && vc == -vd &&
         (req->legs[d].value == 0 || -vd <= req->legs[d].value);
}
