/* close.c -- closing a ledger account (ledger.c has the state diagram and
 * the invariants; docs/ledger.md, "Closing an account").
 *
 *   transition                 function                 fault point
 *   (none) -> closed/closed    dtx_ledger_account_close ledger.account.close
 *
 * A close is an entry: {changes: [{account, value: 0, seqId: head + 1}],
 * state "closed", proc "closed"}, inserted in ONE atomic step.  It is an
 * entry, not a flag on the account, because only the seqId makes it
 * atomic with the posts: a post that read the account before a flag was
 * set would still land, while a post and a close that both derived from
 * seqIds 1..head race for head + 1 at the unique index
 * {changes.account, changes.seqId}, and exactly one inserts (L2).
 *
 *  C1 The close is judged and taken in one step: it derives the account's
 *     position from the cache (no memo), demands a posted balance of 0
 *     and no pending entry in 1..head, and inserts at head + 1.  Every
 *     entry 1..head was read (seqIds are dense) and none was pending, so
 *     all are final (posted, voided, expired: they never change again)
 *     and the balance at the close is 0 for good.  A post that took
 *     head + 1 first makes the insert fail with a duplicate key; the
 *     close derives again and judges the new balance.
 *  C2 A closed account takes no leg: the close entry is never committed
 *     (proc "closed": the committer scans proc "uncommitted" only), so
 *     the cache never passes it and every post's tail holds it (the memo
 *     stops before it, as it is not final); dtx__lg_position_post refuses
 *     (DTX_ESTATE naming the account).  A post that derived before the
 *     close needs the close's seqId, so it loses at the index and then
 *     sees the close.
 *  C3 Never reopened: the transition rules give a closed entry no move,
 *     the delete guard deletes no entry, and a plain write inserts none;
 *     what a write past them could do (a leg after the close, a close
 *     over money) the audit reports (leg_after_close, closed_not_zero). */
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

int dtx__lg_is_close(const json_t *e) { return dtx__state_is(e, LG_CLOSED); }

int dtx__lg_refuse_closed(const dtx__lg_pos_t *pos) {
  return dtx__err(DTX_ESTATE, "ledger account '%s' is closed (at %lld, seq "
                  "%lld): it takes no leg", pos->id,
                  (long long)dtx__int(pos->closed, "created"),
                  (long long)dtx__int(dtx__lg_leg(pos->closed, pos->id),
                                      "seqId"));
}

/* C1: 0 when pos's account may close now, else DTX_ESTATE naming why. */
static int may_close(const dtx__lg_pos_t *pos) {
  size_t i;
  json_t *e;
  json_array_foreach(pos->tail, i, e) {
    if (dtx__state_is(e, LG_PENDING))
      return dtx__err(DTX_ESTATE, "ledger account '%s' has a hold: pending "
                      "entry '%s' (post or void it first)", pos->id,
                      dtx__str(e, "_id") ? dtx__str(e, "_id") : "?");
  }
  if (pos->posted != 0)
    return dtx__err(DTX_ESTATE, "ledger account '%s' has balance %s: only "
                    "an account at 0 closes", pos->id,
                    dtx__wide_str(pos->posted, (char[48]){0}));
  if (pos->head == INT64_MAX)
    return dtx__err(DTX_EOVERFLOW, "account '%s' has no seqId left", pos->id);
  return 0;
}

static int close_account(dtx__exec_t *ex, const char *id, json_t **out) {
  json_t *acct = NULL;
  dtx__contend_t ct = {0};
  char eid[25];
  int rc = dtx__check_ident("account id", id);
  /* The account is read before the set-up, so closing an unknown
   * account installs nothing. */
  if (rc || (rc = dtx__lg_account(ex, id, &acct)) ||
      (rc = dtx__lg_setup(ex->st))) {
    json_decref(acct);
    return rc;
  }
  dtx__id_new(eid);
  for (;;) {
    dtx__lg_pos_t pos;
    if (!acct && (rc = dtx__lg_account(ex, id, &acct)))
      return rc;
    rc = dtx__lg_position_timed(ex, acct, &pos);
    json_decref(acct);
    acct = NULL;
    if (rc == 0 && pos.closed) { /* closed already (by us: a lost reply) */
      *out = json_incref((json_t *)pos.closed);
      dtx__lg_pos_free(&pos);
      return 0;
    }
    if (rc == 0)
      rc = may_close(&pos);
    json_t *doc = NULL;
    if (rc == 0) {
      int64_t now = dtx__now_ms();
      /* C1: every entry 1..head was read and is final, the balance 0. */
      DTX_ASSERT(pos.posted == 0 && pos.pend_debit == 0 &&
                     pos.pend_credit == 0,
                 "L10");
      /* The close is timed as a post is (time.c, T1): never before the
       * account's latest entry, whatever this process's clock says. */
      int64_t at = now > pos.head_at ? now : pos.head_at;
      doc = json_pack("{s:s,s:[{s:s,s:I,s:I}],s:s,s:s,s:I,s:I,s:I}", "_id",
                      eid, "changes", "account", id, "value", (json_int_t)0,
                      "seqId", (json_int_t)(pos.head + 1), "state", LG_CLOSED,
                      "proc", LG_CLOSED, "created", (json_int_t)now,
                      "updated", (json_int_t)now, "at", (json_int_t)at);
      const char *asset = dtx__str(pos.acct, "asset");
      if (doc && ((asset &&
                   json_object_set_new(doc, "asset", json_string(asset))) ||
                  dtx__lg_seal(doc))) { /* its one leg sealed too (L5) */
        json_decref(doc);
        doc = NULL;
      }
      rc = doc ? dtx__kit_insert(ex, "ledger.account.close",
                                 DTX_LEDGER_ENTRIES, doc)
               : DTX_ENOMEM;
    }
    dtx__lg_pos_free(&pos);
    if (rc == 0) {
      *out = doc;
      return 0;
    }
    json_decref(doc);
    /* A post (or another close) took head + 1 first, or our own insert
     * landed and its reply was lost: derive again (C1). */
    if (rc != DTX_EDUPKEY || !dtx__kit_contend(&ct, &rc, "ledger.account.close"))
      return rc;
  }
}

int dtx_ledger_account_close(dtx_store_t *st, const char *id,
                             const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *e = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = dtx__call_end(&c, close_account(&ex, id, &e));
  if (out)
    *out = e;
  else
    json_decref(e);
  return rc;
}
