/* ledger.h -- internals shared by the files of the ledger pattern (log
 * reconciliation with multi-leg entries, reference solution 4).
 *
 * ledger.c holds the state machine (diagram, invariants), the accounts and
 * the method table; post.c posting, pending resolution and reversal;
 * many.c posting many entries at once (dtx_ledger_post_many); limit.c
 * the limits (the upper limit's check, the step that changes them);
 * hold.c partial posts of holds; balancing.c balancing legs (-max);
 * position.c how an account's balance and next seqId are derived from its
 * cache and the entries after it (balance, statement, list); commit.c the
 * committer (worker), expiry and recovery; audit.c the audit; meta.c an
 * entry's meta and ref; asset.c an account's asset; time.c an
 * entry's time; close.c closing an account.  Retry,
 * contention, fault points and moves come from txn/kit/kit.h. */
#ifndef DTX_TXN_LEDGER_H
#define DTX_TXN_LEDGER_H

#include "txn/kit/kit.h"

/* Entry states ("state"): whether the legs count. */
#define LG_POSTED "posted"   /* valid: the legs count */
#define LG_PENDING "pending" /* debits held against available, credits not
                                yet counted */
#define LG_VOIDED "voided"   /* a pending entry voided: the legs never count */
#define LG_EXPIRED "expired" /* a pending entry past its timeout: likewise */
/* An account's close (close.c): one leg of value 0 at the account's next
 * seqId, state and proc both "closed" -- never committed, so the
 * committer never scans it and the cache never passes it. */
#define LG_CLOSED "closed"

/* Entry commitment ("proc", as in the reference): an entry is committed
 * once it is resolved (not pending) and every earlier seqId of each of its
 * accounts is committed -- the anchor rule. */
#define LG_UNCOMMITTED "uncommitted"
#define LG_COMMITTED "committed"

/* The entries, for the kit's moves: one kind per state field. */
extern const dtx__kind_t dtx__lg_state_kind; /* {entries, "state"} */
extern const dtx__kind_t dtx__lg_proc_kind;  /* {entries, "proc"} */

/* The method table (registered in src/txn/frame/registry.c). */
extern const dtx__pattern_t dtx__ledger_pattern;

/* Indexes and rules of the pattern, once per store and process. */
int dtx__lg_setup(dtx_store_t *st);

/* The leg of entry e for account (borrowed from e), or NULL. */
const json_t *dtx__lg_leg(const json_t *e, const char *account);

/* The digest of entry e's legs as posted (L5, docs/ledger.md "The legs'
 * digest"): SHA-256 over its _id and each leg's account, value, seqId,
 * min and max, as 64 hex digits in out.  0; LG_LEGS_MALFORMED (1, not an
 * error code: the audit judges it) when e's legs are malformed (no
 * string _id or account, a value or seqId missing, or a field no
 * integer); or DTX_ENOMEM. */
#define LG_LEGS_MALFORMED 1
int dtx__lg_legs_sha(const json_t *e, char out[65]);

/* Stores the digest in doc as "legs_sha": every insert of an entry calls
 * it once doc's legs are final.  0 or DTX_ENOMEM. */
int dtx__lg_seal(json_t *doc);

/* For tests: the committer's page of uncommitted entries and the pages a
 * round reads at most (commit.c; 0: the defaults, 1,000 and 16), so that
 * a test reaches past a round's reach without 16,000 entries.  Set before
 * any thread runs the committer. */
void dtx__lg_scan_limits(size_t page, int pages);

/* An account's first seqId from which every entry carries "legs_sha"
 * (set at its creation), so a digest deleted past the rules shows. */
#define LG_SHA_FROM "legs_sha_from"

/* ---- an account's position (position.c) ------------------------------------ */

/* Where an account stands, derived from its cache and the entries after
 * it.  Sums are kept in 128 bits, so a corrupted store is reported, never
 * wrapped. */
typedef struct dtx__lg_pos {
  json_t *acct;       /* the account document (owned) */
  const char *id;     /* its _id (borrowed from acct) */
  int64_t cache_seq;  /* cache.seqId: every entry up to it is committed */
  int64_t cache_bal;  /* cache.balance: the balance at cache_seq */
  int64_t head;       /* the latest seqId (cache_seq when none after it) */
  __int128 posted;    /* the balance: cache + posted legs after it */
  __int128 pend_debit;  /* held by pending debits (>= 0) */
  __int128 pend_credit; /* promised by pending credits (>= 0) */
  int64_t base;     /* the seqId the tail starts after: cache_seq, or (posts
                       only) a later one from the memo (position.c) */
  __int128 base_bal; /* the posted balance at base */
  int all_final;     /* every tail entry is posted, voided or expired */
  int64_t base_at;   /* posts only: the time of the entry at base (0: none
                        read) */
  int64_t head_at;   /* posts only: the time of the entry at head, which
                        the next entry's time follows (time.c, T1) */
  const json_t *closed; /* the account's close entry, when the tail holds
                           one (borrowed from tail; close.c) */
  json_t *tail; /* the entries after base, by this account's seqId (owned) */
} dtx__lg_pos_t;

/* Derives acct's (borrowed; its reference is taken) position.  The
 * entries are read in one indexed query; a gap in the seqIds after the
 * cache (an entry inserted while the query ran) is read again, a gap that
 * stays is DTX_EBACKEND naming the account and the seqId. */
int dtx__lg_position(dtx__exec_t *ex, json_t *acct, dtx__lg_pos_t *pos);

/* The same, with head_at set: the time of the account's latest entry,
 * which the next entry's time follows (time.c, T1) -- a close's. */
int dtx__lg_position_timed(dtx__exec_t *ex, json_t *acct,
                           dtx__lg_pos_t *pos);

/* The same for a post: the tail may start past the cache, at this
 * process's memo of the account (position.c says why that is exact);
 * only head, posted and the pending sums are meant to be read.  A closed
 * account is DTX_ESTATE naming it (close.c), pos freed. */
int dtx__lg_position_post(dtx__exec_t *ex, json_t *acct, dtx__lg_pos_t *pos);

/* Tells the memo that posted entry entry_id, with leg `value`, holds
 * account's seqId seq, that every entry before it is final and that the
 * posted balance at seq is bal (a post, once its insert succeeded). */
void dtx__lg_memo_posted(dtx__exec_t *ex, const char *account, int64_t seq,
                         __int128 bal, const char *entry_id, int64_t value);
void dtx__lg_pos_free(dtx__lg_pos_t *pos);

/* Reads the ledger account id; DTX_ENOACCOUNT naming it when missing. */
int dtx__lg_account(dtx__exec_t *ex, const char *id, json_t **out);

/* The entries holding account's seqIds in [lo, hi] (hi < 0: no upper
 * bound), sorted by that seqId. */
int dtx__lg_range(dtx__exec_t *ex, const char *account, int64_t lo, int64_t hi,
                  json_t **out);

/* 128-bit value to int64: DTX_EOVERFLOW naming what when it does not
 * fit. */
int dtx__lg_fit(__int128 v, int64_t *out, const char *what, const char *acct);

/* ---- limits (limit.c) ------------------------------------------------------ */

/* The request's own check of limits l (may be NULL) for `which`
 * (DTX_LEDGER_LIMIT_*): DTX_EINVAL when which names none, or when it
 * names both and the max is below the min. */
int dtx__lg_limits_check(const dtx_ledger_limit_t *l, int which);

/* M1 (limit.c) for leg l against pos, at post time: a credit must leave
 * balance + pending credits <= the account's max_balance, else
 * DTX_EINSUFFICIENT naming the account; leg (as stored) then records the
 * max as "max".  Debits and accounts without a max pass. */
int dtx__lg_check_max(const dtx_ledger_leg_t *l, const dtx__lg_pos_t *pos,
                      json_t *leg);

/* The step behind dtx_ledger_account_limits (ledger.account.limit). */
int dtx__lg_account_limits(dtx__exec_t *ex, const char *id, int which,
                           const dtx_ledger_limit_t *l, json_t **out);

/* ---- partial posts (hold.c) ------------------------------------------------ */

/* What leg (borrowed from posted entry e) counts: the entry's "amounts"
 * entry for it after a partial post, else its value. */
int64_t dtx__lg_amount(const json_t *e, const json_t *leg);

/* The same by account (0 when e has no leg on it). */
int64_t dtx__lg_amount_of(const json_t *e, const char *account);

/* ---- balancing legs (balancing.c) ------------------------------------------ */

/* Leg i's kind in req (DTX_LEDGER_LEG_*). */
int dtx__lg_leg_kind(const dtx_ledger_post_req_t *req, size_t i);

/* The request's balancing pair: none, or one -max leg (cap >= 0) and one
 * max leg (value 0); DTX_EINVAL naming the leg otherwise. */
int dtx__lg_check_balancing(const dtx_ledger_post_req_t *req);

/* vals[0..nlegs): each leg's value, the balancing pair's derived from the
 * positions pos[0..nlegs) (in leg order): DTX_EINSUFFICIENT when it
 * moves nothing, DTX_EINVAL for a -max leg without a cap on an account
 * without a floor. */
int dtx__lg_balancing_amount(const dtx_ledger_post_req_t *req,
                             const dtx__lg_pos_t *pos, int64_t *vals);

/* Does stored entry e's balancing pair fit req's (same accounts, the
 * credit the debit negated, within the cap)?  1 when req has none. */
int dtx__lg_same_balancing(const json_t *e, const dtx_ledger_post_req_t *req);

/* ---- posting (post.c), shared by dtx_ledger_post and post_many (many.c) -- */

/* The request's own checks (legs, ids, timeout): DTX_EINVAL naming the
 * fault, nothing read. */
int dtx__lg_check_req(const dtx_ledger_post_req_t *req);

/* Existing entry e (borrowed) under the id req asks for: *out (a new
 * reference) when it records req again (same legs, kind and reversal: a
 * retry posts at most once), else DTX_ECONFLICT. */
int dtx__lg_existing(const json_t *e, const dtx_ledger_post_req_t *req,
                     const char *reverses, json_t **out);

/* What is already recorded for req: the entry under id (req again, or
 * DTX_ECONFLICT), or the reversal of `reverses`.  DTX_ENOTFOUND when
 * neither exists. */
int dtx__lg_recorded(dtx__exec_t *ex, const char *id,
                     const dtx_ledger_post_req_t *req, const char *reverses,
                     json_t **out);

/* The ledger accounts whose ids are in ids (an array, stolen), read in
 * one query, as *map: id -> document (a new object). */
int dtx__lg_accounts_find(dtx__exec_t *ex, json_t *ids, json_t **map);

/* DTX_ENOACCOUNT naming the first of req's accounts (in leg order) that
 * map lacks; 0 when it has them all. */
int dtx__lg_accounts_missing(const dtx_ledger_post_req_t *req,
                             const json_t *map);

/* What a post learned of one leg's account: once the entry is in, and
 * when every entry before it is final (memo), the posted balance at the
 * entry's seqId is bal -- the tail memo's next step (position.c). */
typedef struct dtx__lg_learned {
  int memo;
  __int128 bal;
} dtx__lg_learned_t;

/* One attempt of a post: derives each leg's account position (accts: id
 * -> account document, holding every account of req), checks the leg
 * against it (L3, L4: DTX_EINSUFFICIENT, DTX_EOVERFLOW naming the
 * account) and builds the entry *doc (a new reference) under id.
 * learned[0..nlegs) is filled for dtx__lg_posted. */
int dtx__lg_build(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                  const char *id, const char *reverses, const json_t *accts,
                  dtx__lg_learned_t *learned, json_t **doc);

/* After entry doc of req was inserted: tells the memo what build learned. */
void dtx__lg_posted(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                    const json_t *doc, const dtx__lg_learned_t *learned);

/* ---- metadata and references (meta.c) ------------------------------------------ */

/* The request's meta and ref (DTX_EINVAL naming the fault); part of
 * dtx__lg_check_req. */
int dtx__lg_check_meta(const dtx_ledger_post_req_t *req);

/* Does existing entry e carry req's meta and ref (a retry repeats them)? */
int dtx__lg_same_meta(const json_t *e, const dtx_ledger_post_req_t *req);

/* Sets req's meta and ref on the entry doc being built. */
void dtx__lg_set_meta(json_t *doc, const dtx_ledger_post_req_t *req);

/* After a duplicate key that was not entry id itself: DTX_EDUPKEY naming
 * the ref and the entry holding it when req's ref is another entry's and
 * refs are unique; DTX_ENOTFOUND when the key was not the ref (a seqId:
 * derive again). */
int dtx__lg_ref_taken(dtx__exec_t *ex, const dtx_ledger_post_req_t *req,
                      const char *id);

/* ---- closing an account (close.c) ------------------------------------------- */

/* Is e an account's close entry (state "closed")? */
int dtx__lg_is_close(const json_t *e);

/* DTX_ESTATE naming the account and when it closed, when pos's account is
 * closed: a post's refusal of a leg on it. */
int dtx__lg_refuse_closed(const dtx__lg_pos_t *pos);

/* ---- assets (asset.c) --------------------------------------------------------- */

/* asset (NULL: none) as CODE/SCALE: 0 or DTX_EINVAL naming it. */
int dtx__lg_check_asset(const char *asset);

/* DTX_EINVAL naming two accounts when req's legs (accts: id -> account,
 * holding each) are not all in one asset (none being one too). */
int dtx__lg_same_asset(const dtx_ledger_post_req_t *req, const json_t *accts);

/* Sets out's "asset" to acct's, when it has one. */
void dtx__lg_name_asset(json_t *out, const json_t *acct);

/* ---- entry time (time.c) --------------------------------------------------------- */

/* Entry e's time: "at", or "created" for an entry older than entry
 * times. */
int64_t dtx__lg_time(const json_t *e);

/* The request's imported and at_ms (DTX_EINVAL naming the fault); part of
 * dtx__lg_check_req. */
int dtx__lg_check_time(const dtx_ledger_post_req_t *req);

/* Does existing entry e record req's import (a retry repeats it)? */
int dtx__lg_same_time(const json_t *e, const dtx_ledger_post_req_t *req);

/* Sets the time of entry doc being built (and "imported"): head_at is the
 * greatest time of the leg accounts' head entries (head_acct: one holding
 * it).  DTX_ESTATE naming the account when req imports before it. */
int dtx__lg_stamp(const dtx_ledger_post_req_t *req, int64_t head_at,
                  const char *head_acct, json_t *doc);

/* The balance as of seqId at_seq (DTX_LEDGER_LATEST: the latest) and the
 * statement of seqIds from..to (to < 0: no bound), as dtx_ledger_balance
 * and dtx_ledger_statement (position.c). */
int dtx__lg_balance(dtx__exec_t *ex, const char *account, int64_t at_seq,
                    json_t **out);
int dtx__lg_statement(dtx__exec_t *ex, const char *account, int64_t from,
                      int64_t to, int64_t limit, json_t **out);

/* ---- the committer (commit.c) ------------------------------------------------ */

/* Commits entry e (borrowed) if it is resolved and its predecessors are
 * committed, then advances its accounts' caches.  *committed: whether it
 * is committed afterwards (by this call or another). */
int dtx__lg_commit(dtx__exec_t *ex, const json_t *e, int *committed);

/* Advances account's cache over its committed entries up to seqId target
 * (or as far as they are committed). */
int dtx__lg_advance(dtx__exec_t *ex, const char *account, int64_t target);

/* Expires pending entry e if its timeout passed: DTX_ENOMATCH when it was
 * not due or was resolved meanwhile.  *out: the entry afterwards. */
int dtx__lg_expire(dtx__exec_t *ex, const json_t *e, json_t **out);

int dtx__lg_claim_next(dtx__exec_t *ex, json_t **item);
int dtx__lg_drive(dtx__exec_t *ex, const json_t *item, json_t **out);
int dtx__lg_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                    dtx__tally_t *t);

/* ---- the audit (audit.c) ---------------------------------------------------- */

int dtx__lg_audit(dtx__audit_t *a);

#endif
