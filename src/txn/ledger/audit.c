/* audit.c -- the ledger's audit: every invariant of ledger.c (L1-L7) on the
 * stored entries and accounts, at any time.
 *
 * The store gives no snapshot across documents, so the audit reads the
 * entries (E1), the accounts (A), then the entries again (E3).  Entries
 * only ever change state and proc, forward; an entry equal in E1 and E3
 * held that content at the instant between the two reads.  So:
 *  - checks of one entry (L1: legs, shape) and of the committed prefix of
 *    each account (L7: everything up to cache.seqId is committed and
 *    final, the cache was read after it) are exact at any time;
 *  - checks across the entries of one account (L2 density, L3 limits, L6
 *    anchors) are made over its entries up to the first one that is not
 *    the same in E1 and E3 (all of them when none changed); an account
 *    with such an entry is counted as unsettled, its rest left to a later
 *    audit.
 * At quiescence everything is stable and the audit is exact.  With
 * DTX_AUDIT_SETTLED (after recovery) it also demands that the committer
 * has caught up: every resolved entry whose predecessors are committed is
 * committed, every cache stands at the end of its committed run, and no
 * pending entry is past its timeout.  An account's close (close.c) is an
 * entry of one leg of value 0, never committed: nothing may follow it,
 * and the account's balance there is 0 with no pending entry (L10). */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

#define finding(a, ...) dtx__audit_finding((a)->f, __VA_ARGS__)

/* One leg as the audit sees it, per account. */
typedef struct leg {
  int64_t seq, value;
  const json_t *entry; /* borrowed from E3 */
  int stable;          /* the entry is the same in E1 and E3 */
} leg_t;

typedef struct acct {
  const char *id;
  leg_t *legs;
  size_t n, cap;
  int unstable;
} acct_t;

typedef struct audit {
  dtx__audit_t *f;
  json_t *e1, *e3, *accounts;
  acct_t *accts;
  size_t naccts;
  json_t *index; /* account id -> its position in accts */
  int64_t unsettled;
  __int128 posted_sum, volume;
} audit_t;

static acct_t *acct_of(audit_t *a, const char *id) {
  json_t *i = json_object_get(a->index, id);
  return i ? &a->accts[json_integer_value(i)] : NULL;
}

static int add_leg(acct_t *ac, int64_t seq, int64_t value, const json_t *e,
                   int stable) {
  if (ac->n == ac->cap) {
    size_t ncap = ac->cap ? ac->cap * 2 : 16;
    leg_t *n = realloc(ac->legs, ncap * sizeof *n);
    if (!n)
      return DTX_ENOMEM;
    ac->legs = n;
    ac->cap = ncap;
  }
  ac->legs[ac->n++] = (leg_t){seq, value, e, stable};
  return 0;
}

static int leg_cmp(const void *x, const void *y) {
  int64_t p = ((const leg_t *)x)->seq, q = ((const leg_t *)y)->seq;
  return p < q ? -1 : p > q;
}

static int is_state(const json_t *e) {
  return dtx__state_is(e, LG_POSTED) || dtx__state_is(e, LG_PENDING) ||
         dtx__state_is(e, LG_VOIDED) || dtx__state_is(e, LG_EXPIRED);
}

/* L1 and the shape of entry e; its legs go to their accounts.  Returns
 * DTX_ENOMEM only. */
static int check_entry(audit_t *a, const char *id, const json_t *e) {
  json_t *changes = json_object_get(e, "changes"), *l;
  size_t i, n = json_array_size(changes);
  int stable = json_equal(json_object_get(a->e1, id), (json_t *)e);
  int close = dtx__lg_is_close(e);
  if (close && (!dtx__str_is(e, "proc", LG_CLOSED) || n != 1))
    finding(a, "bad_entry", "entry %s is an account's close but has proc "
            "'%s' and %zu legs (closed, 1)", id,
            dtx__str(e, "proc") ? dtx__str(e, "proc") : "?", n);
  else if (close) /* its one leg is checked below */
    ;
  else if (!is_state(e) || !(dtx__str_is(e, "proc", LG_COMMITTED) ||
                             dtx__str_is(e, "proc", LG_UNCOMMITTED)))
    finding(a, "bad_entry", "entry %s has state '%s' and proc '%s'", id,
            dtx__str(e, "state") ? dtx__str(e, "state") : "?",
            dtx__str(e, "proc") ? dtx__str(e, "proc") : "?");
  else if (dtx__state_is(e, LG_PENDING) && dtx__str_is(e, "proc", LG_COMMITTED))
    finding(a, "bad_entry", "entry %s is pending but committed", id);
  if (!json_is_array(changes) || (n < 2 && !close) ||
      n > DTX_LEDGER_MAX_LEGS) {
    finding(a, "bad_entry", "entry %s has %zu legs (2..%d)", id, n,
            DTX_LEDGER_MAX_LEGS);
    if (!json_is_array(changes))
      return 0;
  }
  __int128 sum = 0;
  json_array_foreach(changes, i, l) {
    const char *acc = dtx__str(l, "account");
    json_t *v = json_object_get(l, "value"), *s = json_object_get(l, "seqId");
    if (!acc || !json_is_integer(v) || (json_integer_value(v) == 0) != close ||
        !json_is_integer(s) || json_integer_value(s) < 1) {
      finding(a, "bad_leg", "entry %s leg %zu lacks an account, a %s "
              "integer value or a seqId >= 1", id, i + 1,
              close ? "zero (an account's close)" : "non-zero");
      continue;
    }
    for (size_t j = 0; j < i; j++)
      if (dtx__str_is(json_array_get(changes, j), "account", acc))
        finding(a, "bad_entry", "entry %s names account %s twice", id, acc);
    sum += json_integer_value(v);
    /* What the leg counts: a partial post's amount (hold.c), else its
     * value. */
    int64_t cv = dtx__state_is(e, LG_POSTED) ? dtx__lg_amount(e, l)
                                             : json_integer_value(v);
    if (dtx__state_is(e, LG_POSTED)) {
      a->posted_sum += cv;
      if (cv > 0)
        a->volume += cv;
    }
    acct_t *ac = acct_of(a, acc);
    if (!ac) {
      finding(a, "unknown_account", "entry %s has a leg on unknown account %s",
              id, acc);
      continue;
    }
    if (add_leg(ac, json_integer_value(s), cv, e, stable))
      return DTX_ENOMEM;
    if (!stable)
      ac->unstable = 1;
  }
  /* L5: the legs are the ones the entry was posted with.  A digest edited
   * or not a string is a mismatch like any edit of the legs; an entry
   * without one is judged per account (check_account). */
  json_t *sha = json_object_get(e, "legs_sha");
  if (sha) {
    char hex[65];
    int r = dtx__lg_legs_sha(e, hex);
    if (r < 0) /* out of memory; malformed legs are a finding */
      return r;
    if (r || !json_is_string(sha) || strcmp(hex, json_string_value(sha)))
      finding(a, "legs_changed", "entry %s: its legs are not the ones it "
              "was posted with (legs_sha)", id);
  }
  char wide[48];
  if (sum != 0)
    finding(a, "unbalanced_entry", "entry %s: its legs sum to %s, not 0", id,
            dtx__wide_str(sum, wide));
  /* H1 (hold.c): each amount within its leg's hold, summing to zero. */
  json_t *am = json_object_get(e, "amounts");
  if (am) {
    __int128 asum = 0;
    int fits = json_is_array(am) && json_array_size(am) == n;
    json_array_foreach(changes, i, l) {
      json_t *x = json_array_get(am, i);
      int64_t held = dtx__int(l, "value"), v = json_integer_value(x);
      fits = fits && json_is_integer(x) &&
             (held < 0 ? v >= held && v <= 0 : v <= held && v >= 0);
      asum += v;
    }
    if (!fits || asum != 0)
      finding(a, "bad_amounts", "entry %s: its amounts are not one per leg "
              "within what each holds, summing to 0", id);
  }
  /* One asset per entry (asset.c): its accounts' assets, as read, and
   * the asset the entry was posted in -- an account's asset changed past
   * the rules, every account of an entry alike, shows there. */
  const char *a0 = NULL, *acc0 = NULL, *ea = dtx__str(e, "asset");
  int changed = 0;
  json_array_foreach(changes, i, l) {
    const char *acc = dtx__str(l, "account");
    const json_t *doc = acc ? json_object_get(a->accounts, acc) : NULL;
    if (!doc)
      continue;
    const char *as = dtx__str(doc, "asset");
    if (!changed && (ea ? !as || strcmp(as, ea) : as != NULL)) {
      changed = 1; /* once per entry, and the mix is still looked for */
      finding(a, "asset_changed", "entry %s was posted in %s, but its "
              "account %s is in %s", id, ea ? ea : "no asset", acc,
              as ? as : "no asset");
    }
    if (!acc0) {
      acc0 = acc;
      a0 = as;
    } else if (a0 ? !as || strcmp(as, a0) : as != NULL) {
      finding(a, "mixed_assets", "entry %s has legs on %s (%s) and %s (%s)",
              id, acc0, a0 ? a0 : "no asset", acc, as ? as : "no asset");
      break;
    }
  }
  /* meta and ref as a post checks them (meta.c): what a write past the
   * validator could leave -- a meta over the bound, a NUL, a ref too long. */
  json_t *m = json_object_get(e, "meta"), *r = json_object_get(e, "ref");
  if ((m || r) && (r && !json_is_string(r)
                       ? 1
                       : dtx__lg_check_meta(&(dtx_ledger_post_req_t){
                             .meta = m, .ref = json_string_value(r)}) != 0))
    finding(a, "bad_meta", "entry %s: %s", id,
            r && !json_is_string(r) ? "ref is not a string" : dtx_errdetail());
  /* The entry's time (time.c) as a post writes it: an int64 in range,
   * "imported" only true, and only on a posted or reversed-free entry
   * that was never pending. */
  json_t *at = json_object_get(e, "at"), *imp = json_object_get(e, "imported");
  if ((at && (!json_is_integer(at) || json_integer_value(at) < 0 ||
              json_integer_value(at) > DTX_LEDGER_MAX_TIME_MS)) ||
      (imp && (!json_is_true(imp) || !at ||
               json_object_get(e, "expires_at"))))
    finding(a, "bad_time", "entry %s: \"at\" must be 0 .. %lld ms and "
            "\"imported\" true on an entry that has a time and was never "
            "pending", id, (long long)DTX_LEDGER_MAX_TIME_MS);
  const char *rv = dtx__str(e, "reverses");
  if (rv) {
    const json_t *o = json_object_get(a->e3, rv), *ol;
    /* The legs that moved (a partial post's zero amounts have none). */
    size_t moved = 0;
    json_array_foreach(json_object_get(o, "changes"), i, ol) {
      moved += dtx__lg_amount(o, ol) != 0;
    }
    int ok = o && dtx__state_is(o, LG_POSTED) && moved == n;
    json_array_foreach(changes, i, l) {
      const char *acc = dtx__str(l, "account");
      ok = ok && acc && dtx__lg_leg(o, acc) &&
           dtx__lg_amount_of(o, acc) == -dtx__int(l, "value");
    }
    if (!ok)
      finding(a, "bad_reversal", "entry %s does not negate the posted entry "
              "%s it reverses", id, rv);
  }
  return 0;
}

/* L2, L3, L6, L7 for one account, its legs sorted by seqId. */
static void check_account(audit_t *a, acct_t *ac, int settled) {
  const json_t *doc = json_object_get(a->accounts, ac->id);
  json_t *cache = json_object_get(doc, "cache");
  json_t *min = json_object_get(doc, "min_balance");
  json_t *max = json_object_get(doc, "max_balance");
  json_t *cs = json_object_get(cache, "seqId"), *cb = json_object_get(cache, "balance");
  if (!json_is_integer(cs) || !json_is_integer(cb) || json_integer_value(cs) < 0 ||
      !(json_is_integer(min) || json_is_null(min)) ||
      !(!max || json_is_integer(max) || json_is_null(max))) {
    finding(a, "bad_account", "account %s lacks an integer cache {balance, "
            "seqId} or an integer/null min_balance, or has a max_balance "
            "that is neither", ac->id);
    return;
  }
  /* M2 (limit.c) */
  if (json_is_integer(min) && json_is_integer(max) &&
      json_integer_value(max) < json_integer_value(min))
    finding(a, "bad_limits", "account %s max_balance %lld is below its "
            "min_balance %lld", ac->id, (long long)json_integer_value(max),
            (long long)json_integer_value(min));
  int64_t c = json_integer_value(cs), cbal = json_integer_value(cb);
  if (ac->n > 1) /* legs is NULL for an account without any */
    qsort(ac->legs, ac->n, sizeof *ac->legs, leg_cmp);
  /* L7: the committed prefix is final, so this is exact at any time. */
  __int128 upto = 0;
  for (size_t i = 0; i < ac->n && ac->legs[i].seq <= c; i++) {
    const json_t *e = ac->legs[i].entry;
    if (!dtx__str_is(e, "proc", LG_COMMITTED))
      finding(a, "cache_uncommitted", "account %s cache covers seqId %lld "
              "(entry %s) which is not committed", ac->id,
              (long long)ac->legs[i].seq, dtx__str(e, "_id"));
    if (dtx__state_is(e, LG_POSTED))
      upto += ac->legs[i].value;
  }
  DTX_ASSERT(ac->n <= ac->cap, "L2");
  if (upto != cbal)
    finding(a, "cache_mismatch", "account %s cache balance %lld at seqId %lld, "
            "but its legs up to there sum to %lld", ac->id, (long long)cbal,
            (long long)c, (long long)upto);
  /* L5: from the account's legs_sha_from (set at its creation), or from
   * its first sealed entry (an account older than the digest), every
   * entry carries its digest: one deleted past the rules shows.  Exact at
   * any time: an entry's digest is written by its insert, never after. */
  json_t *from = json_object_get(doc, LG_SHA_FROM);
  if (from && (!json_is_integer(from) || json_integer_value(from) < 1))
    finding(a, "bad_account", "account %s has a %s that is no integer >= 1",
            ac->id, LG_SHA_FROM);
  int64_t sealed = json_is_integer(from) ? json_integer_value(from)
                                         : INT64_MAX;
  for (size_t i = 0; i < ac->n; i++) {
    const json_t *e = ac->legs[i].entry;
    if (json_object_get(e, "legs_sha") && ac->legs[i].seq < sealed)
      sealed = ac->legs[i].seq;
    else if (!json_object_get(e, "legs_sha") && ac->legs[i].seq >= sealed)
      finding(a, "legs_sha_missing", "entry %s has no legs_sha, yet account "
              "%s's entries carry one from seqId %lld on", dtx__str(e, "_id"),
              ac->id, (long long)sealed);
  }
  /* An account whose entries changed between the two reads is judged up
   * to its first leg whose entry changed, and counted unsettled: the
   * entries before that one held their content at one instant between the
   * reads, and every check below runs over a prefix.  The rest is judged
   * by a later audit.  An account posted to all the time (a fee or
   * settlement account) was once never judged at all, while the audit
   * said clean (a hostile user's finding). */
  size_t judged = ac->n;
  if (ac->unstable) {
    a->unsettled++;
    for (judged = 0; judged < ac->n && ac->legs[judged].stable; judged++)
      ;
  }
  __int128 posted = 0, pend = 0, pend_cr = 0;
  int64_t run_end = 0; /* the last seqId of the committed run from 1 */
  int gap = 0;
  const json_t *closed = NULL; /* L10: the account's close, once met */
  int64_t held = 0;            /* pending entries so far */
  for (size_t i = 0; i < judged; i++) {
    const leg_t *l = &ac->legs[i];
    const json_t *e = l->entry;
    const char *eid = dtx__str(e, "_id");
    if (i > 0 && l->seq == ac->legs[i - 1].seq)
      finding(a, "duplicate_seq", "account %s seqId %lld is held by entries %s "
              "and %s", ac->id, (long long)l->seq,
              dtx__str(ac->legs[i - 1].entry, "_id"), eid);
    else if (!gap && l->seq != (int64_t)i + 1) {
      gap = 1;
      finding(a, "seq_gap", "account %s has no entry for seqId %lld (next is "
              "%lld in entry %s)", ac->id, (long long)i + 1, (long long)l->seq,
              eid);
    }
    /* T1 (time.c): a timed entry is timed no earlier than the entry
     * before it, and follows no untimed one (an entry older than entry
     * times follows no rule, but never comes after a timed one). */
    if (i > 0 && !json_object_get(e, "at") &&
        json_object_get(ac->legs[i - 1].entry, "at"))
      finding(a, "time_order", "account %s: entry %s (seqId %lld) has no "
              "time, yet entry %s before it has one", ac->id, eid,
              (long long)l->seq, dtx__str(ac->legs[i - 1].entry, "_id"));
    else if (i > 0 && json_object_get(e, "at") &&
        dtx__lg_time(e) < dtx__lg_time(ac->legs[i - 1].entry))
      finding(a, "time_order", "account %s: entry %s (seqId %lld) is timed "
              "%lld, before entry %s before it (%lld)", ac->id, eid,
              (long long)l->seq, (long long)dtx__lg_time(e),
              dtx__str(ac->legs[i - 1].entry, "_id"),
              (long long)dtx__lg_time(ac->legs[i - 1].entry));
    int committed = dtx__str_is(e, "proc", LG_COMMITTED);
    if (committed && run_end == l->seq - 1)
      run_end = l->seq;
    else if (committed && !gap)
      finding(a, "anchor", "entry %s is committed but account %s's seqId %lld "
              "before it is not", eid, ac->id, (long long)l->seq - 1);
    if (dtx__state_is(e, LG_POSTED))
      posted += l->value;
    else if (dtx__state_is(e, LG_PENDING) && l->value < 0)
      pend -= l->value;
    else if (dtx__state_is(e, LG_PENDING))
      pend_cr += l->value;
    if (posted > INT64_MAX || posted < INT64_MIN)
      finding(a, "overflow", "account %s balance leaves int64 at seqId %lld",
              ac->id, (long long)l->seq);
    /* L3: checked against the limit the leg recorded. */
    json_t *lm = json_object_get(dtx__lg_leg(e, ac->id), "min");
    if (l->value < 0 && json_is_integer(lm) &&
        (dtx__state_is(e, LG_POSTED) || dtx__state_is(e, LG_PENDING)) &&
        posted - pend < json_integer_value(lm))
      finding(a, "below_limit", "account %s available balance %lld after "
              "seqId %lld (entry %s) is below the min_balance %lld it was "
              "posted against", ac->id, (long long)(posted - pend),
              (long long)l->seq, eid, (long long)json_integer_value(lm));
    /* M1 (limit.c): against the max the leg recorded. */
    json_t *lx = json_object_get(dtx__lg_leg(e, ac->id), "max");
    if (l->value > 0 && json_is_integer(lx) &&
        (dtx__state_is(e, LG_POSTED) || dtx__state_is(e, LG_PENDING)) &&
        posted + pend_cr > json_integer_value(lx))
      finding(a, "above_limit", "account %s balance plus pending credits "
              "%s after seqId %lld (entry %s) is above the max_balance %lld "
              "it was posted against", ac->id,
              dtx__wide_str(posted + pend_cr, (char[48]){0}),
              (long long)l->seq, eid, (long long)json_integer_value(lx));
    if (settled && dtx__state_is(e, LG_PENDING) &&
        dtx__int(e, "expires_at") <= dtx__now_ms())
      finding(a, "not_expired", "entry %s is pending past its timeout", eid);
    /* L10: nothing after the close; at the close, 0 and no hold. */
    if (closed)
      finding(a, "leg_after_close", "account %s was closed by entry %s, but "
              "entry %s has a leg on it at seqId %lld", ac->id,
              dtx__str(closed, "_id"), eid, (long long)l->seq);
    held += dtx__state_is(e, LG_PENDING);
    if (!closed && dtx__lg_is_close(e)) {
      closed = e;
      if (posted != 0 || held)
        finding(a, "closed_not_zero", "account %s was closed by entry %s at "
                "balance %s with %lld pending entries", ac->id, eid,
                dtx__wide_str(posted, (char[48]){0}), (long long)held);
    }
  }
  if (ac->unstable)
    return;
  if (c > (int64_t)ac->n)
    finding(a, "cache_ahead", "account %s cache seqId %lld is past its last "
            "seqId %zu", ac->id, (long long)c, ac->n);
  if (settled && c < run_end)
    finding(a, "cache_behind", "account %s cache is at seqId %lld, its "
            "committed run ends at %lld", ac->id, (long long)c,
            (long long)run_end);
}

/* Settled: a resolved entry all of whose predecessors are committed must
 * be committed. */
static void check_committer(audit_t *a) {
  const char *id;
  json_t *e;
  json_object_foreach(a->e3, id, e) {
    if (!dtx__str_is(e, "proc", LG_UNCOMMITTED) || dtx__state_is(e, LG_PENDING))
      continue; /* committed, pending, or an account's close (never) */
    size_t i;
    json_t *l;
    int due = 1;
    json_array_foreach(json_object_get(e, "changes"), i, l) {
      acct_t *ac = dtx__str(l, "account") ? acct_of(a, dtx__str(l, "account")) : NULL;
      int64_t s = dtx__int(l, "seqId");
      if (!ac || ac->unstable || s < 1 || (size_t)s > ac->n)
        due = 0;
      else if (s > 1 && (ac->legs[s - 2].seq != s - 1 ||
                         !dtx__str_is(ac->legs[s - 2].entry, "proc",
                                      LG_COMMITTED)))
        due = 0;
    }
    if (due)
      finding(a, "not_committed", "entry %s could be committed but is not", id);
  }
}

int dtx__lg_audit(dtx__audit_t *f) {
  audit_t a = {.f = f};
  int settled = (f->flags & DTX_AUDIT_SETTLED) != 0, rc;
  if ((rc = dtx__audit_load(f, DTX_LEDGER_ENTRIES, &a.e1)) ||
      (rc = dtx__audit_load(f, DTX_LEDGER_ACCOUNTS, &a.accounts)) ||
      (rc = dtx__audit_load(f, DTX_LEDGER_ENTRIES, &a.e3))) {
    json_decref(a.e1);
    json_decref(a.accounts);
    return rc;
  }
  a.accts = calloc(json_object_size(a.accounts) + 1, sizeof *a.accts);
  if (!a.accts)
    rc = DTX_ENOMEM;
  const char *id;
  json_t *d;
  a.index = json_object();
  json_object_foreach(a.accounts, id, d) {
    if (a.accts) {
      json_object_set_new(a.index, id, json_integer((json_int_t)a.naccts));
      a.accts[a.naccts++].id = id;
    }
  }
  json_object_foreach(a.e3, id, d) {
    if (rc == 0)
      rc = check_entry(&a, id, d);
  }
  for (size_t i = 0; rc == 0 && i < a.naccts; i++)
    check_account(&a, &a.accts[i], settled);
  if (rc == 0 && settled)
    check_committer(&a);
  DTX_ASSERT(rc || a.volume >= 0, "L1"); /* a sum of positive legs */
  if (rc == 0 && a.posted_sum != 0)
    finding(&a, "conservation", "the posted legs of all entries sum to %lld, "
            "not 0", (long long)a.posted_sum);
  if (rc == 0) {
    json_t *states = json_object();
    int64_t uncommitted = 0;
    json_object_foreach(a.e3, id, d) {
      const char *s = dtx__str(d, "state");
      json_t *n = json_object_get(states, s ? s : "?");
      json_object_set_new(states, s ? s : "?",
                          json_integer(n ? json_integer_value(n) + 1 : 1));
      uncommitted += dtx__str_is(d, "proc", LG_UNCOMMITTED);
    }
    char vol[48];
    dtx__audit_set(f, "accounts", json_integer((json_int_t)a.naccts));
    dtx__audit_set(f, "entries", json_integer((json_int_t)json_object_size(a.e3)));
    dtx__audit_set(f, "states", states);
    dtx__audit_set(f, "uncommitted", json_integer((json_int_t)uncommitted));
    dtx__audit_set(f, "posted_volume", dtx__wide_json(a.volume));
    dtx__audit_unsettled(f, a.unsettled);
    dtx__audit_summary(f, "%zu accounts, %zu entries (%lld uncommitted), "
                       "posted volume %s, unsettled %lld",
                       a.naccts, json_object_size(a.e3), (long long)uncommitted,
                       dtx__wide_str(a.volume, vol), (long long)a.unsettled);
  }
  for (size_t i = 0; i < a.naccts; i++)
    free(a.accts[i].legs);
  free(a.accts);
  json_decref(a.index);
  json_decref(a.e1);
  json_decref(a.e3);
  json_decref(a.accounts);
  return rc;
}
