/* post.c -- posting a ledger entry, resolving a pending one, reversing a
 * posted one (ledger.c has the state diagram and the invariants L1-L7).
 *
 * A post is: check the request; read the accounts; derive each account's
 * position (position.c: next seqId, balance, pending debits and credits);
 * check every debit against its account's limit and every balance against
 * int64; insert the entry in ONE atomic step.  The unique index on
 * (changes.account, changes.seqId) is what makes the check serialisable
 * per account without a lock: an insert that succeeds holds seqId n+1 of
 * each of its accounts, and it derived its balance from exactly the
 * entries 1..n, which were all there before it (L2).  A concurrent poster
 * that took one of those seqIds first makes the insert fail with a
 * duplicate key; nothing was written, and the loser derives again from
 * the winner's entry.  So two debits that only one fits can never both
 * pass: the second to insert would need the seqId the first holds, or
 * derive from it. */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

/* ---- the request ------------------------------------------------------------------ */

int dtx_ledger_post_req_check(const dtx_ledger_post_req_t *req) {
  dtx__err_clear();
  return dtx__lg_check_req(req);
}

int dtx__lg_check_req(const dtx_ledger_post_req_t *req) {
  int rc;
  if (!req || !req->legs)
    return dtx__err(DTX_EINVAL, "an entry needs legs");
  if (req->nlegs < 2 || req->nlegs > DTX_LEDGER_MAX_LEGS)
    return dtx__err(DTX_EINVAL, "an entry has 2 to %d legs, got %zu",
                    DTX_LEDGER_MAX_LEGS, req->nlegs);
  if (req->id && (rc = dtx__check_ident("entry id", req->id)))
    return rc;
  /* One rule for every caller (doctx ledger post --timeout-ms, a
   * post-many line's "timeout_ms", C): a pending entry's timeout is
   * 1 ms .. 100 years.  0 is refused, not read as a default: "expire
   * at once" and "one hour" must not be the same request. */
  if (!req->pending && req->timeout_ms)
    return dtx__err(DTX_EINVAL, "timeout_ms %lld: only a pending entry has "
                    "a timeout", (long long)req->timeout_ms);
  if (req->pending && req->timeout_ms <= 0)
    return dtx__err(DTX_EINVAL, "timeout_ms %lld: a pending entry's timeout "
                    "must be 1 ms to 100 years (one hour is %d)",
                    (long long)req->timeout_ms, DTX_LEDGER_TIMEOUT_MS);
  if (req->timeout_ms > DTX__MAX_DELAY_MS)
    return dtx__err(DTX_EINVAL, "timeout_ms %lld: a timeout of more than "
                    "100 years", (long long)req->timeout_ms);
  DTX_ASSERT(req->timeout_ms >= 0, "L4"); /* now + it never wraps */
  if ((rc = dtx__lg_check_balancing(req)))
    return rc;
  __int128 sum = 0;
  for (size_t i = 0; i < req->nlegs; i++) {
    const dtx_ledger_leg_t *l = &req->legs[i];
    if ((rc = dtx__check_ident("account id", l->account)))
      return rc;
    for (size_t j = 0; j < i; j++)
      if (strcmp(req->legs[j].account, l->account) == 0)
        return dtx__err(DTX_EINVAL, "account '%s' appears in two legs",
                        l->account);
    if (dtx__lg_leg_kind(req, i) != DTX_LEDGER_LEG_FIXED) /* derived later */
      continue;
    if (l->value == 0)
      return dtx__err(DTX_EINVAL, "leg %zu (account '%s') has value 0", i + 1,
                      l->account);
    /* Every entry can be reversed (ledger reverse posts each leg
     * negated), and -INT64_MIN is no int64. */
    if (l->value == INT64_MIN)
      return dtx__err(DTX_EINVAL, "leg %zu (account '%s') has value "
                      "-9223372036854775808, whose reversal does not fit an "
                      "int64 (a leg is -9223372036854775807 .. "
                      "9223372036854775807)", i + 1, l->account);
    sum += l->value;
  }
  if (sum != 0)
    return dtx__err(DTX_EINVAL, "the legs sum to %s, not 0",
                    dtx__wide_str(sum, (char[48]){0}));
  if ((rc = dtx__lg_check_time(req)))
    return rc;
  return dtx__lg_check_meta(req);
}

/* Does existing entry e record the same request (legs, kind, reversal)? */
static int same_entry(const json_t *e, const dtx_ledger_post_req_t *req,
                      const char *reverses) {
  if (json_array_size(json_object_get(e, "changes")) != req->nlegs)
    return 0;
  for (size_t i = 0; i < req->nlegs; i++) {
    const json_t *leg = dtx__lg_leg(e, req->legs[i].account);
    if (!leg || (dtx__lg_leg_kind(req, i) == DTX_LEDGER_LEG_FIXED &&
                 dtx__int(leg, "value") != req->legs[i].value))
      return 0;
  }
  if (!dtx__lg_same_balancing(e, req))
    return 0;
  int was_pending = json_object_get(e, "expires_at") != NULL;
  const char *rv = dtx__str(e, "reverses");
  return was_pending == (req->pending != 0) &&
         (reverses ? rv && strcmp(rv, reverses) == 0 : !rv) &&
         dtx__lg_same_meta(e, req) && dtx__lg_same_time(e, req);
}

int dtx__lg_existing(const json_t *e, const dtx_ledger_post_req_t *req,
                    const char *reverses, json_t **out) {
  if (!same_entry(e, req, reverses))
    return dtx__err(DTX_ECONFLICT, "ledger entry '%s' exists with other legs "
                    "(or another meta or ref)",
                    dtx__str(e, "_id"));
  *out = json_incref((json_t *)e);
  return 0;
}

/* ---- deriving and checking the legs --------------------------------------------- */

/* Checks leg l against its account's position and appends the leg as
 * stored: {account, value, seqId: head + 1[, min]}.  L3: a debit must
 * leave the available balance (posted - pending debits) >= min_balance.
 * L4: whatever the pending entries become, the balance stays in int64. */
static int derive_leg(const dtx_ledger_leg_t *l, const dtx__lg_pos_t *pos,
                      json_t *changes) {
  int64_t v = l->value;
  /* A debit or credit is named by its amount, never its sign ("a debit
   * of 1", not "of -1"): |v| in unsigned arithmetic, where -INT64_MIN,
   * 2^63, fits. */
  unsigned long long amount =
      v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
  __int128 lo = pos->posted - pos->pend_debit + (v < 0 ? v : 0);
  __int128 hi = pos->posted + pos->pend_credit + (v > 0 ? v : 0);
  int64_t bal, avail;
  json_t *min = json_object_get(pos->acct, "min_balance");
  if (dtx__lg_fit(pos->posted, &bal, "the balance", l->account) ||
      dtx__lg_fit(pos->posted - pos->pend_debit, &avail, "the available balance",
                  l->account))
    return DTX_EOVERFLOW;
  if (hi > INT64_MAX || lo < INT64_MIN)
    return dtx__err(DTX_EOVERFLOW,
                    "account '%s': %s of %llu could take its balance %lld "
                    "(pending debits %lld, credits %lld) past int64",
                    l->account, v < 0 ? "a debit" : "a credit", amount,
                    (long long)bal, (long long)pos->pend_debit,
                    (long long)pos->pend_credit);
  /* lo fits (checked just above). */
  if (v < 0 && json_is_integer(min) && lo < json_integer_value(min))
    return dtx__err(DTX_EINSUFFICIENT,
                    "account '%s': a debit of %llu would leave the available "
                    "balance %lld (balance %lld, pending debits %lld) below "
                    "its min_balance %lld",
                    l->account, amount, (long long)lo,
                    (long long)bal, (long long)pos->pend_debit,
                    (long long)json_integer_value(min));
  if (pos->head == INT64_MAX)
    return dtx__err(DTX_EOVERFLOW, "account '%s' has no seqId left",
                    l->account);
  /* L3: a debit leaves the available balance at or above the limit; L4:
   * every outcome of the pending entries stays within int64; L2: the
   * leg takes the seqId after the head it read. */
  DTX_ASSERT(v > 0 || !json_is_integer(min) || lo >= json_integer_value(min),
             "L3");
  DTX_ASSERT(lo >= INT64_MIN && hi <= INT64_MAX && v != 0, "L4");
  DTX_ASSERT(pos->head >= pos->cache_seq, "L2");
  json_t *leg = json_pack("{s:s,s:I,s:I}", "account", l->account, "value",
                          (json_int_t)v, "seqId", (json_int_t)(pos->head + 1));
  if (!leg)
    return DTX_ENOMEM;
  if (v < 0 && json_is_integer(min))
    json_object_set(leg, "min", min);
  /* The upper limit (limit.c, M1), from the same position. */
  int rc = dtx__lg_check_max(l, pos, leg);
  if (rc) {
    json_decref(leg);
    return rc;
  }
  return json_array_append_new(changes, leg) ? DTX_ENOMEM : 0;
}

int dtx__lg_accounts_find(dtx__exec_t *ex, json_t *ids, json_t **map) {
  json_t *docs = NULL, *d;
  size_t i;
  *map = NULL;
  json_t *filter = ids ? json_pack("{s:{s:o}}", "_id", "$in", ids) : NULL;
  int rc = filter ? dtx__kit_find(ex, DTX_LEDGER_ACCOUNTS, filter, NULL, &docs)
                  : DTX_ENOMEM;
  json_decref(filter);
  if (rc)
    return rc;
  if (!(*map = json_object())) {
    json_decref(docs);
    return DTX_ENOMEM;
  }
  json_array_foreach(docs, i, d) {
    if (dtx__str(d, "_id"))
      json_object_set(*map, dtx__str(d, "_id"), d);
  }
  json_decref(docs);
  return 0;
}

int dtx__lg_accounts_missing(const dtx_ledger_post_req_t *req,
                             const json_t *map) {
  for (size_t i = 0; i < req->nlegs; i++)
    if (!json_object_get(map, req->legs[i].account))
      return dtx__err(DTX_ENOACCOUNT, "no ledger account '%s'",
                      req->legs[i].account);
  return 0;
}

/* The accounts of req, read in one query, as id -> document; the first
 * missing one (in leg order) is DTX_ENOACCOUNT. */
static int read_accounts(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                         json_t **map) {
  json_t *ids = json_array();
  for (size_t i = 0; ids && i < req->nlegs; i++)
    json_array_append_new(ids, json_string(req->legs[i].account));
  int rc = dtx__lg_accounts_find(ex, ids, map);
  if (rc == 0 && (rc = dtx__lg_accounts_missing(req, *map))) {
    json_decref(*map);
    *map = NULL;
  }
  return rc;
}

int dtx__lg_build(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                  const char *id, const char *reverses, const json_t *accts,
                  dtx__lg_learned_t *learned, json_t **doc) {
  json_t *changes = json_array();
  dtx__lg_pos_t *pos = calloc(req->nlegs, sizeof *pos);
  int64_t vals[DTX_LEDGER_MAX_LEGS];
  size_t npos = 0;
  /* One asset per entry, judged on the accounts read (an account's asset
   * never changes: asset.c). */
  int rc = changes && pos ? dtx__lg_same_asset(req, accts) : DTX_ENOMEM;
  int64_t head_at = 0; /* the leg accounts' latest time (time.c, T1) */
  const char *head_acct = NULL;
  *doc = NULL;
  /* Every position first: a balancing pair's amount needs both of its
   * accounts' (balancing.c); then each leg is checked as posted. */
  for (; rc == 0 && npos < req->nlegs; npos++)
    if ((rc = dtx__lg_position_post(
             ex, json_object_get(accts, req->legs[npos].account), &pos[npos])))
      break;
  if (rc == 0)
    rc = dtx__lg_balancing_amount(req, pos, vals);
  for (size_t i = 0; rc == 0 && i < req->nlegs; i++) {
    dtx_ledger_leg_t l = {req->legs[i].account, vals[i]};
    rc = derive_leg(&l, &pos[i], changes);
    if (rc == 0 && pos[i].head_at > head_at) {
      head_at = pos[i].head_at;
      head_acct = req->legs[i].account;
    }
    learned[i].memo = rc == 0 && pos[i].all_final && !req->pending;
    learned[i].bal = pos[i].posted + vals[i];
  }
  for (size_t i = 0; pos && i < npos; i++)
    dtx__lg_pos_free(&pos[i]);
  free(pos);
  if (rc) {
    json_decref(changes);
    return rc;
  }
  DTX_ASSERT(json_array_size(changes) == req->nlegs, "L1"); /* every leg */
  /* check_req bounded the timeout (DTX__MAX_DELAY_MS): no wrap. */
  int64_t now = dtx__now_ms();
  int64_t expires = now + req->timeout_ms;
  *doc = json_pack("{s:s,s:o,s:s,s:s,s:I,s:I}", "_id", id, "changes", changes,
                   "state", req->pending ? LG_PENDING : LG_POSTED, "proc",
                   LG_UNCOMMITTED, "created", (json_int_t)now, "updated",
                   (json_int_t)now);
  if (*doc && req->pending)
    json_object_set_new(*doc, "expires_at", json_integer((json_int_t)expires));
  if (*doc && reverses)
    json_object_set_new(*doc, "reverses", json_string(reverses));
  if (*doc)
    dtx__lg_set_meta(*doc, req);
  /* The entry names its asset, so the audit sees an account's asset
   * changed past the rules after it (asset.c). */
  const char *asset =
      dtx__str(json_object_get(accts, req->legs[0].account), "asset");
  if (*doc && asset &&
      json_object_set_new(*doc, "asset", json_string(asset))) {
    json_decref(*doc);
    *doc = NULL;
  }
  /* The legs are final here (seqIds, min, max): every insert of a post,
   * a batch member, a reversal or an import seals them (L5). */
  if (*doc && ((rc = dtx__lg_stamp(req, head_at, head_acct, *doc)) ||
               (rc = dtx__lg_seal(*doc)))) {
    json_decref(*doc);
    *doc = NULL;
    return rc;
  }
  return *doc ? 0 : DTX_ENOMEM;
}

void dtx__lg_posted(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                    const json_t *doc, const dtx__lg_learned_t *learned) {
  json_t *legs = json_object_get(doc, "changes");
  for (size_t i = 0; i < req->nlegs; i++) {
    const json_t *leg = json_array_get(legs, i);
    if (learned[i].memo) /* the value stored: a balancing leg's amount */
      dtx__lg_memo_posted(ex, req->legs[i].account, dtx__int(leg, "seqId"),
                          learned[i].bal, dtx__str(doc, "_id"),
                          dtx__int(leg, "value"));
  }
}

/* The entry already reversing `reverses`: returned when the request names
 * no other id, else DTX_ECONFLICT.  DTX_ENOTFOUND when there is none. */
static int reversal_of(dtx__exec_t *ex, const char *reverses,
                       const dtx_ledger_post_req_t *req, json_t **out) {
  json_t *docs = NULL, *filter = json_pack("{s:s}", "reverses", reverses);
  int rc = filter ? dtx__kit_find(ex, DTX_LEDGER_ENTRIES, filter, NULL, &docs)
                  : DTX_ENOMEM;
  json_decref(filter);
  if (rc)
    return rc;
  json_t *e = json_array_get(docs, 0);
  if (!e)
    rc = DTX_ENOTFOUND;
  else if (req->id && !dtx__str_is(e, "_id", req->id))
    rc = dtx__err(DTX_ECONFLICT, "ledger entry '%s' is already reversed by "
                  "'%s'", reverses, dtx__str(e, "_id"));
  else
    *out = json_incref(e);
  json_decref(docs);
  return rc;
}

int dtx__lg_recorded(dtx__exec_t *ex, const char *id,
                    const dtx_ledger_post_req_t *req, const char *reverses,
                    json_t **out) {
  json_t *e = NULL;
  int rc = DTX_ENOTFOUND;
  if (id && (rc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, id, &e)) !=
                DTX_ENOTFOUND) {
    if (rc == 0)
      rc = dtx__lg_existing(e, req, reverses, out);
    json_decref(e);
    return rc;
  }
  if (reverses)
    rc = reversal_of(ex, reverses, req, out);
  return rc;
}

/* Posts req (reverses: the entry it reverses, or NULL).  The loop runs
 * once per lost race (L2), within the command's deadline. */
static int post(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                const char *reverses, json_t **out) {
  const char *point = reverses ? "ledger.reverse" : "ledger.post";
  char idbuf[25];
  json_t *doc = NULL, *accts = NULL;
  int rc;
  *out = NULL;
  if ((rc = dtx__lg_check_req(req)))
    return rc;
  /* The reads come before the set-up (a read of a collection not yet
   * there finds nothing), so a post naming an unknown account installs
   * no ledger collections: bad input creates nothing. */
  if ((rc = dtx__lg_recorded(ex, req->id, req, reverses, out)) !=
      DTX_ENOTFOUND)
    return rc;
  const char *id = req->id;
  if (!id) {
    dtx__id_new(idbuf);
    id = idbuf;
  }
  dtx__contend_t ct = {0};
  dtx__lg_learned_t learned[DTX_LEDGER_MAX_LEGS];
  for (;;) {
    if ((rc = read_accounts(ex, req, &accts)) == 0 &&
        (rc = dtx__lg_setup(ex->st)) == 0) /* memoised after the first */
      rc = dtx__lg_build(ex, req, id, reverses, accts, learned, &doc);
    json_decref(accts);
    accts = NULL;
    if (rc)
      return rc;
    rc = dtx__kit_insert(ex, point, DTX_LEDGER_ENTRIES, doc);
    if (rc != DTX_EDUPKEY)
      break;
    json_decref(doc);
    doc = NULL;
    /* Which key?  Our id (another request's, or our own insert whose
     * reply was lost), the reversal index, or a seqId: then derive
     * again. */
    if ((rc = dtx__lg_recorded(ex, id, req, reverses, out)) != DTX_ENOTFOUND ||
        (rc = dtx__lg_ref_taken(ex, req, id)) != DTX_ENOTFOUND)
      return rc;
    rc = DTX_EDUPKEY;
    if (!dtx__kit_contend(&ct, &rc, point))
      return rc;
  }
  if (rc == 0) {
    /* L1 and L2 as inserted: the request's legs, each at a new seqId. */
    DTX_ASSERT(json_array_size(json_object_get(doc, "changes")) ==
                   req->nlegs,
               "L1");
    dtx__lg_posted(ex, req, doc, learned);
    *out = doc;
  } else {
    json_decref(doc);
  }
  return rc;
}

int dtx_ledger_post(dtx_store_t *st, const dtx_ledger_post_req_t *req,
                    const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *entry = NULL; /* out may be NULL: the entry is then dropped */
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = dtx__call_end(&c, post(&ex, req, NULL, &entry));
  if (out)
    *out = entry;
  else
    json_decref(entry);
  return rc;
}

/* ---- pending entries: post in full, void, expire ------------------------------- */

static int get_entry(dtx__exec_t *ex, const char *id, json_t **out) {
  int rc = dtx__check_ident("entry id", id);
  if (rc == 0 && (rc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, id, out)) ==
                     DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no ledger entry '%s'", id);
  return rc;
}

/* Resolves pending entry id to `to` (posted or voided): one conditional
 * step demanding state pending and a timeout not yet passed, so post,
 * void and expiry race for it and exactly one wins (L5).  The entry
 * already in `to` is returned as is (`ok_again`: for post-pending, and
 * void of a voided entry). */
static int resolve(dtx__exec_t *ex, const char *id, const char *to,
                   const char *point, json_t **out) {
  json_t *e = NULL, *next = NULL;
  dtx__contend_t ct = {0};
  int rc = get_entry(ex, id, &e);
  while (rc == 0) {
    if (dtx__state_is(e, to) && json_object_get(e, "amounts")) {
      /* Posted partly (hold.c): not what post-pending in full asks. */
      rc = dtx__err(DTX_ECONFLICT, "ledger entry '%s' is posted partly "
                    "(its amounts)", id);
      break;
    }
    if (dtx__state_is(e, to)) {
      *out = e;
      return 0;
    }
    if (!dtx__state_is(e, LG_PENDING)) {
      rc = dtx__err(DTX_ESTATE, "ledger entry '%s' is %s%s", id,
                    dtx__str(e, "state") ? dtx__str(e, "state") : "?",
                    dtx__state_is(e, LG_POSTED) ? "; reverse it instead" : "");
      break;
    }
    int64_t now = dtx__now_ms();
    if (dtx__int(e, "expires_at") <= now) {
      /* Past its timeout: it expires, whoever gets there first. */
      rc = dtx__lg_expire(ex, e, &next);
    } else {
      dtx__move_t m = {
          .point = point, .from = LG_PENDING, .to = to,
          .cond = json_pack("{s:{s:I}}", "expires_at", "$gt", (json_int_t)now),
          .set = json_pack("{s:I}", "resolved_at", (json_int_t)now)};
      rc = dtx__kit_move(ex, &dtx__lg_state_kind, e, &m, &next);
    }
    DTX_ASSERT(rc || !dtx__state_is(next, LG_PENDING), "L5");
    /* Resolved meanwhile (or its timeout passed between the read and the
     * step): look again, under the kit's one contention policy. */
    if (rc == DTX_ENOMATCH && dtx__kit_contend(&ct, &rc, point))
      rc = get_entry(ex, id, &next);
    json_decref(e);
    e = next;
    next = NULL;
  }
  json_decref(e);
  return rc;
}

static int pending_call(dtx_store_t *st, const char *id, const char *to,
                        const char *point, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx_ledger_entry_id_check(id); /* before the set-up */
  if (rc == 0)
    rc = dtx__lg_setup(st);
  if (rc == 0)
    rc = resolve(&ex, id, to, point, out);
  return dtx__call_end(&c, rc);
}

int dtx_ledger_post_pending(dtx_store_t *st, const char *id, json_t **out) {
  return pending_call(st, id, LG_POSTED, "ledger.pending.post", out);
}

int dtx_ledger_void(dtx_store_t *st, const char *id, json_t **out) {
  return pending_call(st, id, LG_VOIDED, "ledger.pending.void", out);
}

/* ---- reversal ---------------------------------------------------------------------------- */

static int reverse(dtx__exec_t *ex, const char *id, const char *new_id,
                   json_t **out) {
  json_t *e = NULL;
  int rc = get_entry(ex, id, &e);
  if (rc)
    return rc;
  if (!dtx__state_is(e, LG_POSTED)) {
    rc = dtx__err(DTX_ESTATE, "ledger entry '%s' is %s: only a posted entry "
                  "is reversed%s", id, dtx__str(e, "state") ? dtx__str(e, "state") : "?",
                  dtx__state_is(e, LG_PENDING) ? " (void it instead)" : "");
    json_decref(e);
    return rc;
  }
  json_t *changes = json_object_get(e, "changes");
  size_t n = json_array_size(changes);
  dtx_ledger_leg_t legs[DTX_LEDGER_MAX_LEGS];
  if (n > DTX_LEDGER_MAX_LEGS) {
    json_decref(e);
    return dtx__err(DTX_EBACKEND, "ledger entry '%s' has %zu legs", id, n);
  }
  DTX_ASSERT(dtx__state_is(e, LG_POSTED), "L5"); /* only posted is reversed */
  size_t k = 0; /* a partial post's zero amounts have no reversal leg */
  for (size_t i = 0; i < n; i++) {
    json_t *l = json_array_get(changes, i);
    int64_t v = dtx__lg_amount(e, l);
    if (v == 0)
      continue;
    legs[k].account = dtx__str(l, "account");
    if (v == INT64_MIN) { /* posted before post refused such a leg */
      json_decref(e);
      return dtx__err(DTX_EOVERFLOW, "ledger entry '%s': leg %zu (account "
                      "'%s') has value -9223372036854775808, whose reversal "
                      "does not fit an int64", id, i + 1,
                      legs[k].account ? legs[k].account : "?");
    }
    legs[k++].value = -v;
  }
  dtx_ledger_post_req_t req = {.id = new_id, .legs = legs, .nlegs = k};
  rc = post(ex, &req, id, out);
  json_decref(e);
  return rc;
}

int dtx_ledger_reverse(dtx_store_t *st, const char *id, const char *new_id,
                       const dtx_exec_opts_t *opts, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_from(&ex, st, opts);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = dtx_ledger_entry_id_check(id); /* before the set-up */
  if (rc == 0 && new_id)
    rc = dtx_ledger_entry_id_check(new_id);
  return dtx__call_end(&c, rc ? rc : reverse(&ex, id, new_id, out));
}
