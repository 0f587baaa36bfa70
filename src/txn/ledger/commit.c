/* commit.c -- the ledger's committer and expiry: the pattern's worker work
 * (claim_next, drive) and its recovery pass (ledger.c has the diagram and
 * the invariants).
 *
 * An entry is committed once it is resolved and every earlier seqId of
 * each of its accounts is committed (L6).  Checking each leg's immediate
 * predecessor is enough: that one was committed only under the same rule.
 * The committer works in rounds: a scan of the uncommitted entries, a
 * page or more (plan_round: what waits behind a hold must not hide what
 * can commit after it; docs/ledger.md, "The committer and the cache"; in
 * creation order, which is close to insertion order, and insertion order
 * is a valid commit order because an entry's predecessors were inserted
 * before it), one read of their accounts' caches, then it decides which
 * entries are committable -- counting those it will commit before them in
 * the same round -- commits them one conditional step each, level by level
 * (an entry's level is one above its highest predecessor's in the round;
 * each level is ONE bulk write through the kit's dtx__kit_move_many, and
 * no entry of a level depends on another of it), and advances each
 * account's cache once, over the whole run of committed entries, all the
 * accounts' advances in one more bulk write.  A
 * pending entry blocks its accounts' later entries until it is resolved;
 * expiry (worker and recovery) bounds how long.
 *
 * Every step is idempotent and conditional: two committers racing on one
 * entry both see it committed; a cache advances only from the seqId it
 * was read at (L7).  A committer that dies between commit and cache
 * advance leaves the cache behind, which is harmless (readers add the
 * committed entries after the cache like any other); the next round on
 * that account, or `recover --older-than-ms N` for all accounts, brings
 * it up. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

/* Uncommitted entries one round considers: at most a page that every
 * backend reads by walking an index in sort order (Redis: 1,000,
 * docs/redis.md), so a round costs its page, not the backlog. */
#define ROUND_SCAN 1000
#define RECOVER_ROUNDS 64 /* rounds in one recovery pass, at most */
/* Rounds of one recovery pass that plan nothing yet stop with pages left
 * (plan_round's MAX_PAGES), and so go on from there: a pass reaches the
 * end of the backlog (4,096 x 16 pages: 65 M waiting entries), where it
 * once stopped at the first such round, and a new `doctx recover` started
 * over from the first entry, so an entry behind 16,000 waiting ones was
 * never committed by recovery. */
#define RECOVER_WALK 4096

/* ---- expiry --------------------------------------------------------------------------- */

int dtx__lg_expire(dtx__exec_t *ex, const json_t *e, json_t **out) {
  int64_t now = dtx__now_ms();
  dtx__move_t m = {
      .point = "ledger.expire", .from = LG_PENDING, .to = LG_EXPIRED,
      .cond = json_pack("{s:{s:I}}", "expires_at", "$lte", (json_int_t)now),
      .set = json_pack("{s:I}", "resolved_at", (json_int_t)now)};
  return dtx__kit_move(ex, &dtx__lg_state_kind, e, &m, out);
}

/* Expires the pending entry whose timeout passed first: DTX_ENOMATCH when
 * none is due. */
static int expire_next(dtx__exec_t *ex, json_t **out) {
  int64_t now = dtx__now_ms();
  json_t *sort = json_pack("{s:i}", "expires_at", 1);
  int rc = dtx__kit_modify(
      ex, "ledger.expire", DTX_LEDGER_ENTRIES,
      json_pack("{s:s,s:{s:I}}", "state", LG_PENDING, "expires_at", "$lte",
                (json_int_t)now),
      json_pack("{s:{s:s,s:I,s:I}}", "$set", "state", LG_EXPIRED,
                "resolved_at", (json_int_t)now, "updated", (json_int_t)now),
      sort, out);
  json_decref(sort);
  /* L5: it left pending in this one step (its filter demanded it). */
  DTX_ASSERT(rc || (dtx__state_is(*out, LG_EXPIRED) &&
                    dtx__str_is(*out, "proc", LG_UNCOMMITTED)),
             "L5");
  return rc;
}

/* ---- caches ---------------------------------------------------------------------------- */

/* The step moving account's cache [c, b] -> [seq, nb]: conditional on the
 * cache still being [c, b] (L7). */
static void cache_step(const char *account, int64_t c, int64_t b, int64_t seq,
                       int64_t nb, json_t **filter, json_t **update) {
  DTX_ASSERT(seq > c && c >= 0, "L7"); /* a cache only moves forward */
  *filter = json_pack("{s:s,s:I,s:I}", "_id", account, "cache.seqId",
                      (json_int_t)c, "cache.balance", (json_int_t)b);
  *update = json_pack("{s:{s:{s:I,s:I},s:I}}", "$set", "cache", "balance",
                      (json_int_t)nb, "seqId", (json_int_t)seq, "updated",
                      (json_int_t)dtx__now_ms());
}

/* account's cache [c, b] -> [seq, bal] (bal: 128-bit, checked), one
 * conditional step; *matched: whether the cache was still [c, b]. */
static int cache_move(dtx__exec_t *ex, const char *account, int64_t c,
                      int64_t b, int64_t seq, __int128 bal, int *matched) {
  int64_t nb;
  json_t *filter, *update;
  int rc = dtx__lg_fit(bal, &nb, "the cached balance", account);
  *matched = 0;
  if (rc)
    return rc;
  cache_step(account, c, b, seq, nb, &filter, &update);
  return dtx__kit_update(ex, "ledger.cache", DTX_LEDGER_ACCOUNTS, filter,
                         update, matched);
}

int dtx__lg_advance(dtx__exec_t *ex, const char *account, int64_t target) {
  for (int guard = 0; guard < 64; guard++) {
    json_t *acct = NULL, *docs = NULL, *e;
    int rc = dtx__kit_get(ex, DTX_LEDGER_ACCOUNTS, account, &acct);
    if (rc)
      return rc == DTX_ENOTFOUND ? 0 : rc; /* the audit reports it */
    json_t *cache = json_object_get(acct, "cache");
    int64_t c = dtx__int(cache, "seqId"), b = dtx__int(cache, "balance");
    json_decref(acct);
    if (c >= target)
      return 0;
    if ((rc = dtx__lg_range(ex, account, c + 1, target, &docs)))
      return rc;
    /* The run of committed entries right after the cache. */
    __int128 bal = b;
    int64_t last = c;
    size_t i;
    json_array_foreach(docs, i, e) {
      const json_t *leg = dtx__lg_leg(e, account);
      if (dtx__int(leg, "seqId") != last + 1 || !dtx__str_is(e, "proc", LG_COMMITTED))
        break;
      if (dtx__state_is(e, LG_POSTED))
        bal += dtx__lg_amount(e, leg);
      last++;
    }
    json_decref(docs);
    if (last == c)
      return 0; /* the next one is not committed yet */
    DTX_ASSERT(last > c, "L7"); /* over committed entries only */
    int matched;
    if ((rc = cache_move(ex, account, c, b, last, bal, &matched)))
      return rc;
    if (matched && last >= target)
      return 0;
    /* Another committer moved it first, or more is left: look again. */
  }
  return dtx__err(DTX_ECONFLICT, "the cache of ledger account '%s' kept "
                  "changing", account);
}

/* ---- committing ------------------------------------------------------------------------ */

/* The move uncommitted -> committed (the step is the whole commit: the
 * legs are already there); conditional on the entry not being pending. */
static dtx__move_t commit_move(void) {
  return (dtx__move_t){
      .point = "ledger.commit", .from = LG_UNCOMMITTED, .to = LG_COMMITTED,
      .cond = json_pack("{s:{s:s}}", "state", "$ne", LG_PENDING),
      .set = json_pack("{s:I}", "committed_at", (json_int_t)dtx__now_ms())};
}

/* Commits entry e.  DTX_ENOMATCH: someone else committed it, or it is
 * pending after all. */
static int commit_one(dtx__exec_t *ex, const json_t *e, json_t **out) {
  dtx__move_t m = commit_move();
  return dtx__kit_move(ex, &dtx__lg_proc_kind, e, &m, out);
}

/* Is the entry holding account's seqId `seq` committed?  (One read; only
 * when the round could not tell.)  *missing (may be NULL): set when no
 * entry holds it (a gap: the error names the account). */
static int is_committed(dtx__exec_t *ex, const char *account, int64_t seq,
                        int *yes, int *missing) {
  json_t *docs = NULL;
  int rc = dtx__lg_range(ex, account, seq, seq, &docs);
  if (rc)
    return rc;
  json_t *e = json_array_get(docs, 0);
  *yes = e && dtx__str_is(e, "proc", LG_COMMITTED);
  if (!e && missing)
    *missing = 1;
  if (!e)
    rc = dtx__err(DTX_EBACKEND, "ledger account '%s': no entry holds seqId "
                  "%lld (run doctx audit)", account, (long long)seq);
  json_decref(docs);
  return rc;
}

int dtx__lg_commit(dtx__exec_t *ex, const json_t *e, int *committed) {
  json_t *next = NULL;
  size_t i;
  json_t *leg;
  int rc = 0;
  *committed = dtx__str_is(e, "proc", LG_COMMITTED);
  if (!*committed && dtx__state_is(e, LG_PENDING))
    return 0;
  DTX_ASSERT(*committed || !dtx__state_is(e, LG_PENDING), "L6");
  if (!*committed) {
    json_array_foreach(json_object_get(e, "changes"), i, leg) {
      int64_t s = dtx__int(leg, "seqId");
      int yes = 1;
      if (s > 1 && (rc = is_committed(ex, dtx__str(leg, "account"), s - 1, &yes, NULL)))
        return rc;
      if (!yes)
        return 0; /* L6: a predecessor is not committed yet */
    }
    rc = commit_one(ex, e, &next);
    json_decref(next);
    if (rc && rc != DTX_ENOMATCH)
      return rc;
    if (rc == DTX_ENOMATCH) {
      rc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, dtx__str(e, "_id"), &next);
      *committed = rc == 0 && dtx__str_is(next, "proc", LG_COMMITTED);
      json_decref(next);
      if (rc || !*committed)
        return rc;
    }
    *committed = 1;
  }
  json_array_foreach(json_object_get(e, "changes"), i, leg) {
    if ((rc = dtx__lg_advance(ex, dtx__str(leg, "account"), dtx__int(leg, "seqId"))))
      return rc;
  }
  return 0;
}

/* ---- rounds ------------------------------------------------------------------------------- */

/* "account\nseqId" */
static void seq_key(char *buf, size_t n, const char *account, int64_t seq) {
  snprintf(buf, n, "%s\n%lld", account, (long long)seq);
}

/* Is e's every predecessor committed, or committed earlier in this round?
 * unc: (account, seqId) -> 1 for every entry still uncommitted as far as
 * the round knows and not planned; planned: the same for the legs of the
 * entries planned before e in this round (they commit before it);
 * accts: account id -> account.  *missing: set when the error is that no
 * entry holds a predecessor's seqId (a gap). */
static int ready(dtx__exec_t *ex, const json_t *e, const json_t *unc,
                 const json_t *planned, const json_t *accts, int *yes,
                 int *missing) {
  size_t i;
  json_t *leg;
  char key[192];
  *yes = 0;
  json_array_foreach(json_object_get(e, "changes"), i, leg) {
    const char *a = dtx__str(leg, "account");
    int64_t s = dtx__int(leg, "seqId");
    if (!a || s <= 1)
      continue;
    seq_key(key, sizeof key, a, s - 1);
    if (json_object_get(planned, key))
      continue;
    if (json_object_get(unc, key))
      return 0;
    const json_t *acct = json_object_get(accts, a);
    if (dtx__int(json_object_get(acct, "cache"), "seqId") >= s - 1)
      continue;
    /* Behind the cache and not among the uncommitted we read: committed,
     * unless it is pending (not scanned) or the scan missed it (inserted
     * while it ran).  Ask. */
    int ok = 0, rc = is_committed(ex, a, s - 1, &ok, missing);
    if (rc || !ok)
      return rc;
  }
  *yes = 1;
  return 0;
}

/* Marks every leg of the uncommitted entries in docs (others are passed
 * over) uncommitted in unc ("account\n seqId" -> true), and appends its
 * account to ids (may be NULL) unless asked already has it (each account
 * is read once a round, whatever pages name it), recording it there. */
static void mark_uncommitted(json_t *unc, const json_t *docs, json_t *ids,
                             json_t *asked) {
  size_t i, j;
  json_t *e, *leg;
  char key[192];
  json_array_foreach(docs, i, e) {
    if (!dtx__str_is(e, "proc", LG_UNCOMMITTED))
      continue;
    json_array_foreach(json_object_get(e, "changes"), j, leg) {
      const char *a = dtx__str(leg, "account");
      if (!a)
        continue;
      seq_key(key, sizeof key, a, dtx__int(leg, "seqId"));
      json_object_set_new(unc, key, json_true());
      if (ids && !json_object_get(asked, a)) {
        json_array_append_new(ids, json_string(a));
        json_object_set_new(asked, a, json_true());
      }
    }
  }
}

/* Where a round's scan starts: the (created, _id) after which the last
 * round of this thread stopped at MAX_PAGES with pages still full, so
 * that entries queued behind unresolved holds (a hold's successors on its
 * accounts wait for it, L6) cannot hide the committable entries after
 * them from every round: the scan moves on past them, round after round,
 * and starts over from the first entry once it reaches the end.  Per
 * thread and store; only a starting point (ready() judges every entry
 * whatever was read before it), so a stale one delays, never misjudges. */
static _Thread_local struct {
  const dtx_store_t *st;
  int64_t created;
  char id[256]; /* "" when none */
} resume;

/* Pages a round reads at most, and the plan's size at which it stops
 * reading more (the round's bulk writes stay near one page). */
#define MAX_PAGES 16
#define ROUND_PLAN (scan_page / 2)

/* ROUND_SCAN and MAX_PAGES as plan_round uses them: smaller only in tests
 * (dtx__lg_scan_limits), which set them before any thread runs. */
static size_t scan_page = ROUND_SCAN;
static int scan_pages = MAX_PAGES;

void dtx__lg_scan_limits(size_t page, int pages) {
  scan_page = page ? page : ROUND_SCAN;
  scan_pages = pages > 0 ? pages : MAX_PAGES;
}

/* Whether this thread's last round stopped with pages left (resume). */
static int scan_goes_on(const dtx__exec_t *ex) {
  return resume.st == ex->st && resume.id[0];
}

/* Plans the uncommitted entries of page into order (two passes: creation
 * order is nearly insertion order; the second catches an entry that was
 * ready only after a later-created one was planned). */
static int plan_page(dtx__exec_t *ex, const json_t *page, json_t *unc,
                     json_t *planned, const json_t *accts, json_t *order,
                     char **held) {
  size_t i, j;
  json_t *e, *leg;
  char key[192];
  int rc = 0;
  for (int pass = 0; rc == 0 && pass < 2; pass++) {
    json_array_foreach(page, i, e) {
      int yes = 0, missing = 0;
      if (dtx__state_is(e, LG_PENDING) || json_object_get(e, "_planned"))
        continue;
      rc = ready(ex, e, unc, planned, accts, &yes, &missing);
      if (rc && missing) { /* only a gap: a store error still ends it */
        if (!*held)
          *held = strdup(dtx_errdetail());
        rc = 0;
        continue; /* not ready: left uncommitted */
      }
      if (rc)
        break;
      if (!yes)
        continue;
      DTX_ASSERT(!dtx__state_is(e, LG_PENDING), "L6"); /* never pending */
      json_object_set_new(e, "_planned", json_true());
      json_array_append(order, e);
      json_array_foreach(json_object_get(e, "changes"), j, leg) {
        seq_key(key, sizeof key, dtx__str(leg, "account"),
                dtx__int(leg, "seqId"));
        json_object_del(unc, key);
        json_object_set_new(planned, key, json_true());
      }
    }
  }
  return rc;
}

/* The scan's filter: uncommitted, not pending, and (from) after
 * (created, id) in the scan's order, as a range on the {proc, created,
 * _id} index's second key (the entries of the same millisecond up to id
 * are read and passed over by the match). */
static json_t *scan_filter(int from, int64_t created, const char *id) {
  json_t *f = json_pack("{s:s,s:{s:s}}", "proc", LG_UNCOMMITTED, "state",
                        "$ne", LG_PENDING);
  if (f && from &&
      (json_object_set_new(f, "created",
                           json_pack("{s:I}", "$gte", (json_int_t)created)) ||
       json_object_set_new(
           f, "$nor",
           json_pack("[{s:I,s:{s:s}}]", "created", (json_int_t)created, "_id",
                     "$lte", id)))) {
    json_decref(f);
    return NULL;
  }
  return f;
}

/* One round: *order receives the committable entries in commit order
 * (empty when none), *caches each scanned account's cache as read,
 * account id -> [seqId, balance] (for run_round's advance).  The round
 * reads pages of ROUND_SCAN in creation order, from where this thread's
 * last round left off (resume, above) or the first entry, until it has
 * planned ROUND_PLAN entries, met the end, or read MAX_PAGES.  An entry
 * whose predecessor cannot be found (a gap in its account's seqIds, which
 * the audit reports) is left out, not the whole round:
 * one broken account must not stop the commits of every other.  *held
 * (malloc'd, NULL for none) receives the first such error's detail, for
 * the caller to report; with nothing committable it is the round's
 * error as before. */
static int plan_round(dtx__exec_t *ex, json_t **order, json_t **caches,
                      char **held) {
  json_t *accts = json_object(), *unc = json_object(), *planned = json_object();
  json_t *pend = NULL, *sort = json_pack("{s:i,s:i}", "created", 1, "_id", 1);
  json_t *asked = json_object(), *page, *e;
  int from = scan_goes_on(ex);
  int64_t created = from ? resume.created : 0;
  char id[sizeof resume.id];
  snprintf(id, sizeof id, "%s", from ? resume.id : "");
  *order = json_array();
  *caches = json_object();
  *held = NULL;
  int rc = accts && unc && planned && sort && asked && *order && *caches
               ? 0
               : DTX_ENOMEM;
  resume.st = ex->st;
  resume.id[0] = 0; /* set again below when this round stops early */
  for (int n = 0; rc == 0 && n < scan_pages; n++) {
    json_t *filter = scan_filter(from, created, id), *ids = json_array();
    page = NULL;
    rc = filter && ids ? dtx__kit_find_n(ex, DTX_LEDGER_ENTRIES, filter, sort,
                                         scan_page, &page)
                       : DTX_ENOMEM;
    json_decref(filter);
    if (rc == 0 && json_array_size(page) && !pend) {
      /* The pending entries' legs count as uncommitted as well (read
       * only when there is something to commit): a successor of one then
       * waits without a read of its own, and a cache edited past one (the
       * audit's cache_uncommitted) cannot make ready() take it for
       * committed and commit its successor first (L6).  By state alone,
       * so the plan reads the {state, expires_at} index's pending
       * entries: with proc in the filter too, a walk of the {proc,
       * created, _id} index in sort order would tie with it and win, and
       * read every uncommitted entry to find the few pending ones --
       * each round, O(backlog^2) to catch up.  A pending entry is
       * uncommitted (L6); mark_uncommitted passes over any other. */
      json_t *pf = json_pack("{s:s}", "state", LG_PENDING);
      rc = pf ? dtx__kit_find_n(ex, DTX_LEDGER_ENTRIES, pf, sort, ROUND_SCAN,
                                &pend)
              : DTX_ENOMEM;
      json_decref(pf);
      if (rc == 0)
        mark_uncommitted(unc, pend, NULL, NULL);
    }
    if (rc || !json_array_size(page)) {
      json_decref(ids);
      json_decref(page);
      break; /* the end */
    }
    mark_uncommitted(unc, page, ids, asked);
    json_t *more = NULL;
    const char *aid;
    /* Only the accounts no earlier page named (ids stolen either way). */
    if (!json_array_size(ids)) {
      json_decref(ids);
      more = json_object();
      rc = more ? 0 : DTX_ENOMEM;
    } else {
      rc = dtx__lg_accounts_find(ex, ids, &more);
    }
    if (rc == 0) {
      json_object_foreach(more, aid, e) {
        json_t *cache = json_object_get(e, "cache");
        json_t *cs = json_object_get(cache, "seqId");
        json_t *cb = json_object_get(cache, "balance");
        if (json_is_integer(cs) && json_is_integer(cb))
          json_object_set_new(*caches, aid, json_pack("[O,O]", cs, cb));
        json_object_set(accts, aid, e);
      }
      rc = plan_page(ex, page, unc, planned, accts, *order, held);
    }
    json_decref(more);
    size_t got = json_array_size(page);
    e = json_array_get(page, got - 1);
    const char *last = dtx__str(e, "_id");
    /* The next page's key: none (the next round starts over) when the
     * last entry has no usable one. */
    int key = last && strlen(last) < sizeof id &&
              json_is_integer(json_object_get(e, "created"));
    if (key) {
      created = dtx__int(e, "created");
      snprintf(id, sizeof id, "%s", last);
    }
    json_decref(page);
    if (rc || got < scan_page || json_array_size(*order) >= ROUND_PLAN ||
        !key)
      break; /* the end, enough for one round, or no key to go on from */
    from = 1;
    if (n + 1 == scan_pages) { /* the next round goes on from here */
      resume.created = created;
      snprintf(resume.id, sizeof resume.id, "%s", id);
    }
  }
  json_decref(pend);
  json_decref(sort);
  json_decref(accts);
  json_decref(unc);
  json_decref(planned);
  json_decref(asked);
  if (rc == 0 && *held && json_array_size(*order) == 0)
    rc = dtx__err(DTX_EBACKEND, "%s", *held);
  if (rc) {
    free(*held);
    *held = NULL;
    json_decref(*order);
    json_decref(*caches);
    *order = *caches = NULL;
  }
  return rc;
}

/* What a round committed on one account: seqIds lo..hi whose posted
 * values sum to sum. */
typedef struct run {
  const char *acct; /* borrowed from the round's entries */
  int64_t lo, hi;
  int broken; /* not lo, lo+1, ..., hi in commit order */
  __int128 sum;
} run_t;

/* The round's runs, one per account, looked up through `index` (account
 * -> position in runs). */
typedef struct runs {
  run_t *v;
  size_t n;
  json_t *index;
} runs_t;

/* Records that committed entry e's legs are committed, in commit order. */
static void runs_add(runs_t *rs, const json_t *e) {
  size_t j;
  json_t *leg;
  json_array_foreach(json_object_get(e, "changes"), j, leg) {
    const char *acct = dtx__str(leg, "account");
    int64_t s = dtx__int(leg, "seqId");
    if (!acct)
      continue;
    json_t *k = json_object_get(rs->index, acct);
    run_t *r;
    if (!k) {
      if (json_object_set_new(rs->index, acct, json_integer((json_int_t)rs->n)))
        continue; /* no run: its cache is left behind, which is harmless */
      r = &rs->v[rs->n++];
      *r = (run_t){.acct = acct, .lo = s, .hi = s};
    } else {
      r = &rs->v[json_integer_value(k)];
      /* A round commits an account's entries in seqId order (ready()
       * wants each predecessor planned earlier or committed before, and
       * a successor's level is above its predecessor's), so anything
       * else -- a gap, a duplicate -- leaves it to dtx__lg_advance. */
      if (s != r->hi + 1)
        r->broken = 1;
      else
        r->hi = s;
    }
    if (dtx__state_is(e, LG_POSTED))
      r->sum += dtx__lg_amount(e, leg);
  }
}

/* Advances every account the round committed on to the last seqId
 * committed there.  When the round read the cache at [c, b] and itself
 * committed exactly the entries c+1..hi of the account (its run), the new
 * cache is known without reading them again: one update conditional on
 * the cache still being [c, b] -- all of them in ONE bulk write.
 * Committed entries are resolved, so their states are final and the sum
 * is exact (L7).  Anything else -- another committer moved the cache, the
 * round covers only part of the run, no cache read, an overflow to
 * report -- is dtx__lg_advance's, one account at a time. */
static int advance_all(dtx__exec_t *ex, const runs_t *rs, const json_t *caches) {
  dtx__kit_upd_t *u = calloc(rs->n ? rs->n : 1, sizeof *u);
  size_t *of = calloc(rs->n ? rs->n : 1, sizeof *of), nu = 0, i;
  char *known = calloc(rs->n ? rs->n : 1, 1);
  int rc = 0;
  if (!u || !of || !known) {
    free(u);
    free(of);
    free(known);
    return DTX_ENOMEM;
  }
  for (i = 0; i < rs->n; i++) {
    const run_t *r = &rs->v[i];
    json_t *cache = json_object_get(caches, r->acct);
    json_t *cs = json_array_get(cache, 0), *cb = json_array_get(cache, 1);
    int64_t nb;
    if (!cs || !cb || r->broken || r->lo != json_integer_value(cs) + 1 ||
        dtx__lg_fit(json_integer_value(cb) + r->sum, &nb, "", "") != 0) {
      dtx__err_clear(); /* an overflow is dtx__lg_advance's to report */
      continue;
    }
    u[nu] = (dtx__kit_upd_t){.point = "ledger.cache",
                             .coll = DTX_LEDGER_ACCOUNTS};
    cache_step(r->acct, json_integer_value(cs), json_integer_value(cb), r->hi,
               nb, &u[nu].filter, &u[nu].update);
    of[nu++] = i;
  }
  if (nu) {
    /* A failed step is reported, as the single step's was; one that did
     * not match (another committer moved the cache) is advanced below. */
    rc = dtx__kit_update_many(ex, u, nu, NULL);
    for (size_t j = 0; j < nu; j++)
      known[of[j]] = u[j].rc != 0 || u[j].matched;
  }
  for (i = 0; i < rs->n; i++) {
    if (known[i])
      continue;
    int arc = dtx__lg_advance(ex, rs->v[i].acct, rs->v[i].hi);
    if (arc && !rc)
      rc = arc;
  }
  free(u);
  free(of);
  free(known);
  return rc;
}

/* Commits the planned entries and advances each account's cache once, to
 * the last seqId committed there.  The entries go level by level, each
 * level ONE bulk write of commit steps (dtx__kit_move_many): level 0 are
 * the entries whose predecessors were committed before the round, level
 * k+1 those with a predecessor at level k.  No entry of a level depends on
 * another of the same level, so whichever part of a level lands (a crash,
 * a failed step), L6 holds; a level with a failure ends the round, as the
 * rest may depend on it (a later round).  An entry already committed
 * (the worker's claimed one) counts without a step.  *n: how many are
 * committed. */
static int run_round(dtx__exec_t *ex, json_t *order, const json_t *caches,
                     int64_t *n) {
  size_t ne = json_array_size(order), nlegs = 1, i, j, lv;
  json_t *levels = json_object(), *e, *leg;
  char key[192];
  int rc = 0;
  *n = 0;
  json_array_foreach(order, i, e)
    nlegs += json_array_size(json_object_get(e, "changes"));
  runs_t rs = {.v = calloc(nlegs, sizeof *rs.v), .index = json_object()};
  int *level = calloc(ne ? ne : 1, sizeof *level);
  const json_t **docs = calloc(ne ? ne : 1, sizeof *docs);
  dtx__move_t *m = calloc(ne ? ne : 1, sizeof *m);
  json_t **outs = calloc(ne ? ne : 1, sizeof *outs);
  int *rcs = calloc(ne ? ne : 1, sizeof *rcs);
  size_t *idx = calloc(ne ? ne : 1, sizeof *idx);
  char **why = calloc(ne ? ne : 1, sizeof *why);
  int top = 0;
  if (!rs.v || !rs.index || !levels || !level || !docs || !m || !outs ||
      !rcs || !idx || !why) {
    rc = DTX_ENOMEM;
    goto out;
  }
  /* Levels: order is a commit order, so a planned predecessor comes first. */
  json_array_foreach(order, i, e) {
    json_object_del(e, "_planned");
    int l = 0;
    json_array_foreach(json_object_get(e, "changes"), j, leg) {
      seq_key(key, sizeof key, dtx__str(leg, "account"),
              dtx__int(leg, "seqId") - 1);
      json_t *p = json_object_get(levels, key);
      if (p && json_integer_value(p) + 1 > l)
        l = (int)json_integer_value(p) + 1;
    }
    /* L6: above each predecessor planned in this round. */
    DTX_ASSERT(l >= 0 && (size_t)l <= i, "L6");
    level[i] = l;
    top = l > top ? l : top;
    json_array_foreach(json_object_get(e, "changes"), j, leg) {
      seq_key(key, sizeof key, dtx__str(leg, "account"),
              dtx__int(leg, "seqId"));
      json_object_set_new(levels, key, json_integer(l));
    }
  }
  for (lv = 0; rc == 0 && lv <= (size_t)top && ne; lv++) {
    size_t nm = 0;
    int failed = 0, first = 0;
    json_array_foreach(order, i, e) {
      if ((size_t)level[i] != lv)
        continue;
      if (dtx__str_is(e, "proc", LG_COMMITTED)) {
        runs_add(&rs, e);
        (*n)++;
        continue;
      }
      docs[nm] = e;
      m[nm] = commit_move();
      idx[nm++] = i;
    }
    if (nm)
      (void)dtx__kit_move_many(ex, &dtx__lg_proc_kind, docs, m, nm, outs, rcs,
                               why);
    for (j = 0; j < nm; j++) {
      e = json_array_get(order, idx[j]);
      if (rcs[j] == DTX_ENOMATCH) { /* committed by another committer? */
        json_t *now = NULL;
        int grc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, dtx__str(e, "_id"), &now);
        rcs[j] = grc ? grc
                     : dtx__str_is(now, "proc", LG_COMMITTED) ? 0 : DTX_ENOMATCH;
        json_decref(now);
      }
      json_decref(outs[j]);
      outs[j] = NULL;
      if (rcs[j]) {
        failed = 1;
        if (!first && rcs[j] != DTX_ENOMATCH)
          first = dtx__err(rcs[j], "ledger entry '%s': its commit failed: %s",
                           dtx__str(e, "_id"),
                           why[j] ? why[j] : dtx_strerror(rcs[j]));
      }
      /* Freed only now: the store's reason is the detail's point. */
      free(why[j]);
      why[j] = NULL;
      if (rcs[j])
        continue;
      runs_add(&rs, e);
      (*n)++;
    }
    rc = first;
    DTX_ASSERT(*n <= (int64_t)ne, "L6");
    if (failed)
      break; /* the next levels may depend on it: a later round */
  }
  if (rc == DTX_ENOMATCH)
    rc = 0;
  {
    /* The caches of what did commit advance in any case; a commit's
     * failure stays the one reported (advancing overwrites the detail). */
    char *detail = rc ? strdup(dtx_errdetail()) : NULL;
    int arc = advance_all(ex, &rs, caches);
    if (rc)
      rc = dtx__err(rc, "%s", detail ? detail : dtx_strerror(rc));
    else
      rc = arc;
    free(detail);
  }
out:
  json_decref(levels);
  json_decref(rs.index);
  free(rs.v);
  free(level);
  free(docs);
  free(m);
  free(outs);
  free(rcs);
  free(idx);
  free(why);
  return rc;
}

/* ---- worker and recovery ------------------------------------------------------------------- */

/* The worker's claim: a pending entry past its timeout, expired in this
 * one step; else the first committable entry, committed in this one step,
 * with the rest of its round for drive ("_round"). */
int dtx__lg_claim_next(dtx__exec_t *ex, json_t **item) {
  json_t *order = NULL, *caches = NULL, *first = NULL;
  char *held = NULL;
  int rc = expire_next(ex, item);
  if (rc != DTX_ENOMATCH)
    return rc;
  if ((rc = plan_round(ex, &order, &caches, &held)))
    return rc;
  free(held); /* the entries left out wait; recovery and the audit report it */
  while (json_array_size(order)) {
    json_t *e = json_incref(json_array_get(order, 0));
    json_array_remove(order, 0);
    json_object_del(e, "_planned");
    rc = commit_one(ex, e, &first);
    json_decref(e);
    if (rc != DTX_ENOMATCH)
      break;
  }
  if (rc == 0 && first) {
    json_object_set(first, "_round", order);
    json_object_set(first, "_caches", caches);
    *item = first;
  } else if (rc == 0) {
    rc = DTX_ENOMATCH;
  }
  json_decref(order);
  json_decref(caches);
  return rc;
}

int dtx__lg_drive(dtx__exec_t *ex, const json_t *item, json_t **out) {
  int rc, committed = 0;
  int64_t n = 0;
  *out = NULL;
  json_t *round = json_object_get(item, "_round");
  if (round) {
    /* The claimed entry first (committed already: idempotent), then the
     * rest of its round. */
    json_t *all = json_array(), *e = json_deep_copy(item);
    json_object_del(e, "_round");
    json_object_del(e, "_caches");
    json_array_append_new(all, e);
    json_array_extend(all, round);
    rc = run_round(ex, all, json_object_get(item, "_caches"), &n);
    json_decref(all);
  } else { /* an entry just expired: commit it if its turn has come */
    rc = dtx__lg_commit(ex, item, &committed);
  }
  /* "entries" is what the worker's summary counts under proc (the
   * pattern's count): a round's committed entries, or the one expiry
   * (whether the expired entry was committed too is "committed"). */
  *out = round ? json_pack("{s:O,s:s,s:I}", "_id", json_object_get(item, "_id"),
                           "proc", LG_COMMITTED, "entries", (json_int_t)n)
               : json_pack("{s:O,s:s,s:i,s:b}", "_id",
                           json_object_get(item, "_id"), "proc", LG_EXPIRED,
                           "entries", 1, "committed", committed);
  return rc;
}

int dtx__lg_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                    dtx__tally_t *t) {
  json_t *e = NULL, *order = NULL;
  char *held = NULL; /* the first entry a round had to leave out */
  int rc;
  /* Pending entries past their timeout: expired, at most once each. */
  while ((rc = expire_next(ex, &e)) == 0) {
    dtx__tally_ran(t, "expired", 1);
    json_decref(e);
    e = NULL;
  }
  if (rc != DTX_ENOMATCH)
    return rc;
  /* Whatever is committable: what a dead committer left, and more. */
  for (int r = 0, walk = 0; r < RECOVER_ROUNDS;) {
    int64_t n = 0;
    json_t *caches = NULL;
    char *h = NULL;
    if ((rc = plan_round(ex, &order, &caches, &h))) {
      free(held);
      return rc;
    }
    if (!held)
      held = h;
    else
      free(h);
    int more = scan_goes_on(ex);
    if (json_array_size(order) == 0) {
      json_decref(order);
      json_decref(caches);
      if (!more || ++walk > RECOVER_WALK)
        break;
      continue; /* nothing here: on past what waits (RECOVER_WALK) */
    }
    r++;
    rc = run_round(ex, order, caches, &n);
    json_decref(order);
    json_decref(caches);
    if (rc) {
      free(held);
      return rc;
    }
    dtx__tally_ran(t, "committed", n);
    if (n == 0 && !more)
      break;
  }
  /* Asked to look at everything: every cache up to its committed run. */
  if (o->older_than_ms >= 0) {
    json_t *accts = NULL, *a;
    size_t i;
    if ((rc = dtx__kit_find(ex, DTX_LEDGER_ACCOUNTS, NULL, NULL, &accts))) {
      free(held);
      return rc;
    }
    json_array_foreach(accts, i, a) {
      const char *id = dtx__str(a, "_id");
      if (!id)
        continue;
      int64_t before = dtx__int(json_object_get(a, "cache"), "seqId");
      int arc = dtx__lg_advance(ex, id, INT64_MAX);
      if (arc) {
        dtx__tally_error(t, json_object_get(a, "_id"), arc);
        continue;
      }
      json_t *now = NULL;
      if (dtx__kit_get(ex, DTX_LEDGER_ACCOUNTS, id, &now) == 0 &&
          dtx__int(json_object_get(now, "cache"), "seqId") > before)
        dtx__tally_ran(t, "caches_advanced", 1);
      json_decref(now);
    }
    json_decref(accts);
  }
  /* What the rounds committed stands; the entry they left out is this
   * pass's error, naming its account. */
  rc = held ? dtx__err(DTX_EBACKEND, "%s", held) : 0;
  free(held);
  return rc;
}
