/* kit.h -- the pattern kit: everything the multi-document patterns share.
 *
 * A pattern (transfer, job queue, sync flag, ...) is a state machine over
 * "item" documents -- a transfer, a job -- plus the other documents its
 * steps touch (accounts, targets of effects).  Every step is one atomic
 * single-document update through the public store API.  What is the same
 * in every pattern lives here, once:
 *
 *   executor     who acts (owner), for how long (lease), under which budget
 *   call frame   one deadline per public call (util/deadline.h), error
 *                detail cleared
 *   retry        ONE policy for transient store errors, bounded by the
 *                deadline
 *   steps        read by id, update, find-one-and-update, insert: each
 *                behind its fault point and the retry policy; independent
 *                updates together in one bulk write (update_many)
 *   move         the fenced state change: expected state (+ epoch) -> new
 *                state, returning the new document, DTX_ENOMATCH when the
 *                item moved on or was fenced
 *   claim        claim-next (one conditional find_one_and_update on a
 *                due filter, with a sort), claim-many (one find of up to
 *                N due items, then one bulk write of by-_id claims) and
 *                takeover of a lapsed lease, all bumping the epoch that
 *                fences the previous owner (claim.c)
 *   set-up       each pattern's indexes and collection rules (validator,
 *                delete guard) installed once per store
 *   list         paged listing
 *   summary      worker/recover tallies; the audit frame
 *   table        the per-pattern method table and the registry that
 *                `worker`, `recover`, `audit` and `faults` loop over
 *
 * A pattern file then holds only its own state machine.  docs/kit.md
 * walks through adding one.
 *
 * Item documents carry the kit's executor fields beside their own:
 *   owner        who holds the lease (string, null when none)
 *   lease_until  wall-clock ms until which the owner's claim is exclusive
 *   epoch        bumped by every claim and takeover; fenced writes carry it
 *   updated      wall-clock ms of the last state change (set by the kit)
 * and a state field (named by the pattern's dtx__kind_t).
 *
 * Conventions: functions return 0 or a negative DTX_E* code with a
 * detail (util/err.h).  json_t arguments are borrowed unless the comment
 * says "stolen" (released by the kit in every case, so callers may pass
 * json_pack(...) inline; a NULL from a failed json_pack is DTX_ENOMEM).
 * Out-parameters are new references, NULL on error. */
#ifndef DTX_TXN_KIT_H
#define DTX_TXN_KIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h> /* offsetof, for DTX__MANY_RES_CHECK */
#include <stdint.h>

#include "doctx.h"
#include "util/deadline.h"
#include "util/fault.h" /* DTX_FAULTPOINT */

/* ---- executor ------------------------------------------------------------- */

#define DTX__DEFAULT_LEASE_MS 30000
#define DTX__MAX_LEASE_MS (366LL * 24 * 3600 * 1000) /* as a lock ttl */
/* The longest delay or timeout a request may ask for (a job's delay, a
 * pending ledger entry's timeout): now + it stays far inside int64, where
 * a wrapped sum would be a time before now (an entry born expired).
 * Longer is DTX_EINVAL, not a guess at "never". */
#define DTX__MAX_DELAY_MS (100LL * 365 * 24 * 3600 * 1000)

/* One executor's identity: who claims, for how long, and the budget of
 * each command (or worker item) it runs. */
typedef struct dtx__exec {
  dtx_store_t *st;
  char owner[129];     /* 1..128 bytes and a NUL */
  int64_t lease_ms;    /* > 0 */
  int64_t deadline_ms; /* 0: soft (the store's own retry window, once) */
  int bad_owner;       /* the owner given broke dtx__check_owner: every
                          step of this executor refuses (dtx__exec_check) */
} dtx__exec_t;

/* The one rule for an executor's (worker's, lock holder's) name, on every
 * path that takes one: NULL is "none given" (host:pid); anything else is
 * 1..128 of [A-Za-z0-9_.:@#-] -- "" and "a/b" are DTX_EINVAL naming it.
 * '#' and '@' are in because the kit derives names with them (a worker's
 * threads "O#N", recovery "recover@O"), and a derived name travels
 * through the same calls (a batch of transfers of an order's worker). */
int dtx__check_owner(const char *owner);

/* owner NULL: host:pid.  lease_ms <= 0: DTX__DEFAULT_LEASE_MS; past
 * DTX__MAX_LEASE_MS: that.  deadline_ms < 0 counts as 0.  Returns
 * dtx__check_owner(owner): an executor with a bad owner is still
 * initialised (under host:pid), but every kit step it makes fails with
 * dtx__exec_check's error before touching the store, so a caller that
 * checks later (after opening its call frame, which clears the detail)
 * still writes nothing under a name the rule refuses. */
int dtx__exec_init(dtx__exec_t *ex, dtx_store_t *st, const char *owner,
                   int64_t lease_ms, int64_t deadline_ms);

/* dtx__exec_init from the public options (NULL: all defaults). */
int dtx__exec_from(dtx__exec_t *ex, dtx_store_t *st,
                   const dtx_exec_opts_t *opts);

/* 0, or the owner error of ex (DTX_EINVAL with its detail again). */
int dtx__exec_check(const dtx__exec_t *ex);

/* Renames the executor: fmt may use ex->owner (the old name) as an
 * argument, e.g. dtx__exec_rename(ex, "%.100s#%d", ex->owner, n). */
void dtx__exec_rename(dtx__exec_t *ex, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- call frame: one deadline per public call ----------------------------- */

typedef struct dtx__call {
  dtx__deadline_frame_t saved;
} dtx__call_t;

/* Opens a public call on this thread: clears the error detail and opens a
 * deadline frame of budget_ms (0: soft, see util/deadline.h).  Nested
 * calls keep the outer deadline or a tighter one. */
void dtx__call_begin(dtx__call_t *c, int64_t budget_ms);

/* Closes the frame; returns rc, so `return dtx__call_end(&c, rc);`. */
int dtx__call_end(dtx__call_t *c, int rc);

/* ---- retry policy ----------------------------------------------------------- */

/* The store errors worth another attempt: BUSY, UNAVAILABLE, BACKEND and
 * an injected FAULT.  The one retry policy (a few attempts with a short
 * backoff, never past the deadline, then DTX_EUNAVAILABLE naming the
 * step) lives in the step engine (step.c) and nowhere else: every step
 * below is retried by it, so a pattern never writes a retry loop. */
int dtx__transient(int rc);

/* ---- contention: optimistic races lost to a concurrent writer ------------ */

/* A step may lose a race instead of failing: a unique index took the key
 * it derived (a ledger seqId), or a conditional step found the document
 * moved on (a version root).  The caller then re-reads and tries again,
 * which is correct but must stay bounded.  In a frame without an armed
 * deadline (the store never had to wait) the bound is
 * DTX__CONTEND_MS. */
#define DTX__CONTEND_MS 30000

typedef struct dtx__contend {
  int attempt;
  int64_t until; /* mono ms; 0 until the first loss */
} dtx__contend_t; /* zero it before the first attempt */

/* Called after an attempt lost a race: 1 to try again (it has slept a
 * short randomised backoff that grows with the attempts, so contenders
 * spread out), 0 when the deadline has passed, with *rc set to
 * DTX_EUNAVAILABLE naming `what` and the number of races lost. */
int dtx__kit_contend(dtx__contend_t *c, int *rc, const char *what);

/* ---- waiting: for something another executor holds -------------------------- */

/* A wait that polls (a lock held by another, an item under another's
 * lease, a child process): each dtx__kit_wait sleeps w->pause ms -- no
 * longer than bound when bound > 0 (the holder's lease ends sooner), nor
 * past the deadline -- then doubles the pause while it is below cap (cap
 * 0: a fixed pause).  Returns the ms it meant to sleep.  The caller
 * decides when to stop (its own deadline check). */
typedef struct dtx__wait {
  int64_t pause; /* the next pause, ms (>= 1) */
  int64_t cap;   /* doubling stops at or past it */
} dtx__wait_t;

int64_t dtx__kit_wait(dtx__wait_t *w, int64_t bound);

/* ---- steps: every store call, through the ONE step engine (step.c) ------ */

/* A step is one store call behind its fault point (NULL: none) and the
 * retry policy: a read, an insert, a conditional update, a
 * find_one_and_update, a delete, or a bare fault point.  dtx__kit_run
 * runs any number of steps as rounds; every single step below is a round
 * of one through it.  What the engine decides, once (step.c's header):
 *  - each step reaches its fault point just before it joins a round (a
 *    crash there sends none of the round; an injected error fails that
 *    step alone; DOCTX_FAULT=POINT:lost applies a write, then reports
 *    DTX_EUNAVAILABLE);
 *  - the writes of a round run inside the rules' step mark
 *    (dtx__rules_step_enter), named by the first one's `step` or fault
 *    point, so plain-scope rules skip the pattern's own steps; reads
 *    carry no mark;
 *  - a step that failed transiently goes again alone in the next round,
 *    under the one retry policy and the call's one deadline; steps never
 *    wait on each other's failures;
 *  - a step is UNSURE once a store call of it failed transiently (its
 *    write may have landed before the reply was lost); a definite answer
 *    (success, nothing matched, a duplicate key, a refusal) is sure.
 * Several writes of a round go as ONE dtx_store_bulk_write (one write
 * transaction on SQLite, one pipeline per node on Redis), each still the
 * atomic single-document operation it is alone. */

/* The kinds beyond dtx_bulk_kind_t's writes (DTX_BULK_INSERT,
 * _UPDATE_ONE, _DELETE_ONE, _FIND_ONE_AND_UPDATE): reads, which run
 * alone, and the bare fault point. */
#define DTX__KIT_FIND 100   /* coll, filter (NULL: all), find (sort, limit) */
#define DTX__KIT_COUNT 101  /* coll, filter: the count in n */
#define DTX__KIT_COLLS 102  /* the store's collections */
#define DTX__KIT_INDEXES 103 /* coll's indexes */
#define DTX__KIT_POINT 104  /* the fault point alone, no store call */
#define DTX__KIT_FENCE_RECORDS 105 /* coll's fence tombstones' records */

#define DTX__OP_ONCE 1u /* no retry: the first attempt's outcome stands */

/* One step.  Fill the inputs (zero the rest); doc, filter and update are
 * stolen (released in every case; a NULL one where the kind needs it is
 * DTX_ENOMEM for that step alone). */
typedef struct dtx__kit_op {
  int kind;                /* a dtx_bulk_kind_t write, or DTX__KIT_* */
  const char *point;       /* its fault point (NULL: none) */
  const char *coll;
  json_t *doc;             /* INSERT: stolen */
  json_t *filter, *update; /* stolen */
  union {                  /* the kind's options (members borrowed) */
    dtx_update_opts_t upd; /* UPDATE_ONE: e.g. a fence, a time bound */
    dtx_fam_opts_t fam;    /* FIND_ONE_AND_UPDATE: e.g. return_new */
    dtx_find_opts_t find;  /* FIND: sort, limit */
  };
  const char *what;        /* names it when the deadline stops its retries
                              (NULL: point, else coll) */
  const char *step;        /* the rules' step mark (NULL: point) */
  unsigned flags;          /* DTX__OP_ONCE */
  /* outputs */
  int rc;         /* 0 or DTX_E*: as the single step returns it;
                     DTX_ENOMATCH (no detail) when a find_one_and_update
                     matched nothing; DTX_EDUPKEY as is for an insert (a
                     retry after a lost reply may meet its own insert) */
  int matched;    /* UPDATE_ONE: a document matched; others: rc == 0 */
  int unsure;     /* an attempt failed after which its write may have
                     landed (a lost reply): a later "nothing matched" may
                     be this step's own write */
  int64_t n;      /* COUNT: the count; DELETE_ONE: deleted (0 or 1) */
  json_t *out;    /* FAM: the document; reads: the array (new reference) */
  char *detail;   /* malloc'd detail of a failed step (NULL otherwise) */
} dtx__kit_op_t;

/* Runs the n steps of ops as rounds (above).  Returns 0 when every step
 * succeeded or is a find_one_and_update that matched nothing, else the
 * first failed step's rc with its detail made this thread's.  Release the
 * outputs with dtx__kit_ops_clear in every case.  A caller with an
 * outcome to act on per item reads ops[i].rc. */
int dtx__kit_run(dtx__exec_t *ex, dtx__kit_op_t *ops, size_t n);
void dtx__kit_ops_clear(dtx__kit_op_t *ops, size_t n);

/* One step alone (a round of one): its rc, with its detail this
 * thread's; *out (may be NULL: dropped) receives its document or array.
 * For the steps the wrappers below do not cover (a step name of its own,
 * DTX__OP_ONCE). */
int dtx__kit_step(dtx__exec_t *ex, dtx__kit_op_t *o, json_t **out);

/* The document of coll with _id id (a string) in *out; DTX_ENOTFOUND
 * (without a detail: callers name the missing thing) when there is none. */
int dtx__kit_get(dtx__exec_t *ex, const char *coll, const char *id,
                 json_t **out);

/* The documents of coll matching filter (borrowed, NULL: all), in sort
 * order (borrowed, NULL: the store's order). */
int dtx__kit_find(dtx__exec_t *ex, const char *coll, const json_t *filter,
                  const json_t *sort, json_t **out);

/* dtx__kit_find with a limit (> 0: at most that many, in sort order). */
int dtx__kit_find_n(dtx__exec_t *ex, const char *coll, const json_t *filter,
                    const json_t *sort, int64_t limit, json_t **out);

/* A read of a store (no executor: the audit's, a listing's), under the
 * retry policy.  kind 0 or DTX__KIT_FIND: coll's documents matching
 * filter (NULL: all) in sort order (NULL: the store's), at most limit (>
 * 0); DTX__KIT_COLLS: the store's collections; DTX__KIT_INDEXES: coll's
 * indexes; DTX__KIT_FENCE_RECORDS: what coll's deleted documents' _fence
 * said (dtx__store_fence_records).  All borrowed; *out a new array. */
typedef struct dtx__kit_read {
  int kind;
  const char *coll;
  const json_t *filter, *sort;
  int64_t limit, skip; /* skip: the first so many left out */
  const char *what; /* names it when the deadline stops it (NULL: coll) */
} dtx__kit_read_t;

int dtx__kit_read(dtx_store_t *st, const dtx__kit_read_t *q, json_t **out);

/* The store's collection names (a new array in *out), under the retry
 * policy: dtx__kit_read of DTX__KIT_COLLS. */
int dtx__kit_colls(dtx_store_t *st, json_t **out);

/* How many documents of coll match filter (borrowed, NULL: all), under
 * the retry policy; what (may be NULL) as in dtx__kit_read_t. */
int dtx__kit_count(dtx_store_t *st, const char *coll, const json_t *filter,
                   const char *what, int64_t *n);

/* A bare fault point: a protocol step with no store call of its own (the
 * moment before a nested call, a scan's start).  what NULL: reached once,
 * its injected error returned; else under the retry policy (an injected
 * error is retried, and the deadline's message names what). */
int dtx__kit_point(const char *point, const char *what);

/* One conditional update of at most one document.  filter and update are
 * stolen.  *matched (may be NULL): whether a document matched. */
int dtx__kit_update(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, json_t *update, int *matched);
/* dtx__kit_update with the store's update options (borrowed; may be NULL),
 * e.g. a fenced write (DTX_EFENCED when a larger token wrote the document;
 * nothing changed). */
int dtx__kit_update_ex(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_update_opts_t *opts, int *matched);

/* find_one_and_update returning the document after the update; sort
 * (borrowed, may be NULL) picks among several matches.  filter and update
 * are stolen.  DTX_ENOMATCH, *out NULL, when nothing matched. */
int dtx__kit_modify(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, json_t *update, const json_t *sort,
                    json_t **out);

/* dtx__kit_modify with the store's options (borrowed; e.g. upsert, a
 * fence, return_new).  DTX_EDUPKEY is returned as is: an upsert whose
 * filter did not match a document that exists (e.g. a held lock). */
int dtx__kit_modify_ex(dtx__exec_t *ex, const char *point, const char *coll,
                       json_t *filter, json_t *update,
                       const dtx_fam_opts_t *opts, json_t **out);

/* Inserts doc (borrowed).  A retry after a lost reply may find its own
 * insert: DTX_EDUPKEY is returned as is, for the caller to judge. */
int dtx__kit_insert(dtx__exec_t *ex, const char *point, const char *coll,
                    const json_t *doc);

/* Deletes at most one document matching filter (stolen).  A delete is
 * idempotent, so a retry after a lost reply is harmless (*deleted, may
 * be NULL, then says 0).  The collection's delete guard applies:
 * DTX_EVALIDATION when it refuses. */
int dtx__kit_delete(dtx__exec_t *ex, const char *point, const char *coll,
                    json_t *filter, int64_t *deleted);

/* Independent conditional updates sent together, as one round: each
 * reaches its own fault point and is retried alone; then, once every
 * update has its result, the fault point `done` (may be NULL) is reached,
 * so the crash and pause suites stop a caller that has the results but
 * has not acted on them.  Fill point, filter and update (both stolen,
 * released in every case; matched and rc are outputs). */
typedef struct dtx__kit_upd {
  const char *point;
  const char *coll;
  json_t *filter, *update; /* stolen */
  int matched;             /* out: a document matched */
  int rc;                  /* out: this update's result */
} dtx__kit_upd_t;

/* Runs the n updates of u together as above.  Returns 0 when every one
 * succeeded, else the first failed one's rc with its detail (each u[i].rc
 * says which). */
int dtx__kit_update_many(dtx__exec_t *ex, dtx__kit_upd_t *u, size_t n,
                         const char *done);

/* ---- items: fenced state changes, claim, takeover -------------------------- */

/* Where a pattern's items live. */
typedef struct dtx__kind {
  const char *coll;  /* "transfers" */
  const char *state; /* the state field, "state" */
  /* NULL, or called for every move and claim of an item (dtx__kit_move,
   * _move_many, _takeover, _claim_next, _claim_many) with the update
   * the kit built (its $set, maybe $inc and $unset), which it may amend
   * -- add to $set, $inc, $push -- so that what it records about the
   * move is written by the move's own atomic step (a pattern's outbox
   * of events, docs/kit.md).  doc: the item as the mover read it (NULL
   * for claim-next, which finds it in the same step); from, to: the
   * states (to NULL: unchanged); take: the move takes the lease (epoch
   * + 1).  0, or DTX_ENOMEM: the move is then not made. */
  int (*on_move)(const json_t *doc, const char *point, const char *from,
                 const char *to, int take, json_t *update);
} dtx__kind_t;

#define DTX__FENCED 1u /* filter on the epoch of the document given */
#define DTX__TAKE 2u   /* take the lease: owner = ex, lease_until = now +
                          ex->lease_ms, epoch + 1 */
#define DTX__LAPSED 4u /* only when the lease has lapsed (lease_until <= now) */

typedef struct dtx__move {
  const char *point; /* fault point */
  const char *from;  /* expected state; NULL: the document's state */
  const char *to;    /* new state; NULL: unchanged */
  unsigned flags;    /* DTX__FENCED | DTX__TAKE | DTX__LAPSED */
  json_t *cond;      /* more filter conditions, stolen, may be NULL */
  json_t *set;       /* more $set fields, stolen, may be NULL */
  json_t *unset;     /* fields to $unset ({"f": ""}), stolen, may be NULL:
                        a field that must be absent, not null, afterwards
                        (a sparse unique index skips only absent ones) */
  int64_t not_after; /* > 0: the store refuses the move past this time of
                        its clock (DTX_ESTALE; docs/jobs.md, "Time-bounded
                        writes"): a claim bounded by a slot's window */
} dtx__move_t;

/* The fenced state change of item doc (borrowed; its _id, state and epoch
 * are read):
 *   filter {_id, <state>: from [, epoch] [, lease_until <= now]} + cond
 *   update $set {<state>: to, updated: now [, owner, lease_until]} + set
 *          [$inc epoch] [$unset unset]
 * *out: the document after it.  DTX_ENOMATCH (*out NULL, no detail) when
 * the item is no longer as expected: it moved on, or was fenced. */
int dtx__kit_move(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                  const dtx__move_t *m, json_t **out);

/* The fenced state changes of n items at once: item i is docs[i]
 * (borrowed) moved by m[i] (its cond, set and unset stolen), every move of
 * the round in one dtx__kit_run.  rcs[i] and outs[i] (new reference) are
 * what dtx__kit_move would give for item i alone, including its check of
 * "was it my own move" after a lost reply; details (may be NULL) receives
 * each failed move's detail (malloc'd, NULL for none; the caller frees).
 * Returns 0 when every move succeeded or matched nothing, else the first
 * other error, with its detail. */
int dtx__kit_move_many(dtx__exec_t *ex, const dtx__kind_t *k,
                       const json_t *const *docs, const dtx__move_t *m,
                       size_t n, json_t **outs, int *rcs, char **details);

/* Takeover of an item whose lease lapsed: doc's state -> to, fenced by
 * doc's epoch, the lease taken (epoch + 1, so the old owner's fenced
 * writes fail).  cond (stolen, may be NULL) replaces the lapse test when
 * given -- e.g. {"updated": T} for "untouched since T", or {} to take it
 * unconditionally (a cancel).  set: more fields, stolen. */
int dtx__kit_takeover(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                      const char *point, const char *to, json_t *cond,
                      json_t *set, json_t **out);

/* Extends this executor's lease on doc (it must still own it at doc's
 * epoch): the heartbeat of a long step.  DTX_ENOMATCH when it lost it. */
int dtx__kit_renew(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                   json_t **out);

typedef struct dtx__claim {
  const char *point; /* fault point */
  const json_t *due; /* filter of claimable items, borrowed */
  const json_t *sort; /* which first (borrowed, NULL: any) */
  const char *to;    /* the state a claim moves it to */
  /* The due items are alike (any will do; the sort only bounds what a
   * round reads): claim-many picks at random among the first SPREAD x
   * max from its first round on, so racing executors do not all meet on
   * the head of the sort first. */
  int spread;
} dtx__claim_t;

/* Claim-next (claim.c): ONE find_one_and_update of the first item
 * matching c->due in c->sort order, setting <state> = to, owner,
 * lease_until, updated and epoch + 1.  *out: the claimed item.  DTX_ENOMATCH (no detail) when
 * nothing is due.  A due filter on a lapsed lease ({state: "running",
 * lease_until: {$lte: now}}) makes it a takeover-next. */
int dtx__kit_claim_next(dtx__exec_t *ex, const dtx__kind_t *k,
                        const dtx__claim_t *c, json_t **out);

#define DTX__CLAIM_MANY_MAX 256

/* Claim-many (claim.c): up to max (1..DTX__CLAIM_MANY_MAX) due items
 * in one round -- ONE find of c->due in c->sort order with a limit of max,
 * then ONE dtx_store_bulk_write of by-_id claims, one per item found:
 *   {c->due, _id, epoch: as found} -> claim-next's update
 * (state = to, owner, lease_until, updated, epoch + 1).  Each claim
 * reaches c->point as it joins the batch and is retried alone under the
 * retry policy; a claim whose reply was lost is recognised as won.
 * *out: a new array of the items won (at least one), in c->sort order.
 * Items another executor claimed first are dropped; when it lost every
 * item it found, it looks again (the kit's contention backoff, within the
 * deadline), then among 4 x max due items, picking max at random, so
 * contenders spread out (alone, an executor claims in sort order; with
 * c->spread it picks at random from the first round on).  DTX_ENOMATCH
 * (no detail) when nothing is due; another error
 * only when nothing was won.  Every item returned is under this
 * executor's lease from the claim on: the caller runs each, or renews its
 * lease (dtx__kit_renew), before lease_ms has passed. */
int dtx__kit_claim_many(dtx__exec_t *ex, const dtx__kind_t *k,
                        const dtx__claim_t *c, size_t max, json_t **out);

/* Waits while doc (borrowed) is held by another executor's live lease:
 * returns when the item's state or epoch changed, or its lease lapsed,
 * with *out the document as it is now (DTX_ENOTFOUND if it vanished).
 * Polls with a growing pause; DTX_EUNAVAILABLE naming the item and its
 * owner when the deadline comes first. */
int dtx__kit_await(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                   json_t **out);

/* ---- listing ----------------------------------------------------------------- */

/* 0, or DTX_EINVAL for a negative skip or limit, or an after that is
 * no id (dtx__check_ident) -- before anything is read. */
int dtx__kit_page_check(const dtx_page_t *page);

/* The documents of coll matching filter (borrowed, NULL: all) in sort
 * order (NULL: by _id; else {F: 1, _id: 1}, the lists' creation order),
 * paged by page (NULL: all), page->after as doctx.h says (by _id a range
 * on _id; in (F, _id) order from the entry's F).  DTX_EINVAL as
 * dtx__kit_page_check. */
int dtx__kit_list(dtx_store_t *st, const char *coll, const json_t *filter,
                  const json_t *sort, const dtx_page_t *page, json_t **out);
/* dtx__kit_list of the documents of coll in state (NULL: any), oldest
 * first (created, then _id).  states (NULL-terminated) are the states
 * there are: another is DTX_EINVAL "unknown WHAT 'STATE' (S1, S2, ...)". */
int dtx__kit_list_state(dtx_store_t *st, const char *coll,
                        const char *const *states, const char *what,
                        const char *state, const dtx_page_t *page,
                        json_t **out);

/* ---- the batch driver: the same protocol for many items at once (many.c) -- */

/* dtx_transfer_execute_many, dtx_order_confirm_many and
 * dtx_ledger_post_many (and the transfer worker's batch) drive many items
 * of one pattern together: the kit owns the items, their lanes, the split
 * queue and the results; the pattern gives a table of ROUNDS.  Each
 * round takes every item still in the LOCKSTEP (or, with keys, the ones
 * the scheduler lets go) through one step of its protocol:
 *
 *   all      the pattern's own round over them (a read of all of them, a
 *            nested batched call, a lease renewal); or
 *   build    up to `width` steps per item (dtx__kit_op_t; 0: none this
 *            round), all items' steps ONE dtx__kit_run; or
 *   move     one fenced move per item (kind), ONE dtx__kit_move_many;
 *   then, per item in index order: with DTX__ROUND_FAIL, a step that
 *   failed for good (not "nothing matched") ends the item as the
 *   pattern's alone path ends it (def->fail); the round's `done` fault
 *   point (may be NULL); then back, the pattern's verdict on the outcome.
 *
 * An item leaves the lockstep by dtx__batch_split (reaching def->split,
 * the pattern's fault point for it, may be NULL) or ends by
 * dtx__batch_end / _fail.  After the rounds, split items are driven on
 * alone by def->resume, in index order, those split with DTX__SPLIT_LAST
 * after the others.  With def->keys the rounds run in PASSES: a pass
 * takes only the items heading the queue of every key they name (an
 * account, an id), in index order, so two items of one pass never share a
 * key, and def->again decides after each pass whether another runs.
 *
 * Item structs begin with dtx__bitem_t (the kit's part) and are def->isize
 * bytes; results are the caller's array of structs laid out as
 * dtx__many_res_t. */
enum { DTX__LANE_STEP, DTX__LANE_SPLIT, DTX__LANE_DONE };
#define DTX__SPLIT_LAST 0x100 /* resume code flag: after the other splits */
#define DTX__ROUND_FAIL 1u

typedef struct dtx__bitem {
  int lane;   /* DTX__LANE_* */
  int resume; /* a split item's resume code (the pattern's) */
  size_t i;   /* its index in the call */
  size_t op;  /* private: its first step in the round */
  int nops;   /* private */
} dtx__bitem_t;

typedef struct dtx__batch dtx__batch_t;
typedef struct dtx__batch_keys dtx__batch_keys_t;

typedef struct dtx__round {
  void (*all)(dtx__batch_t *b);
  int width; /* build: the most steps of one item */
  int (*build)(dtx__batch_t *b, void *it, dtx__kit_op_t *ops);
  const dtx__kind_t *kind; /* move: the items' kind */
  /* move: fills *m (its cond, set, unset stolen) and returns the item's
   * document to move (borrowed) */
  const json_t *(*move)(dtx__batch_t *b, void *it, dtx__move_t *m);
  /* build and move rounds: the item's outcome, ops[0..nops) its steps
   * (it may take ops[j].out, leaving NULL) */
  void (*back)(dtx__batch_t *b, void *it, dtx__kit_op_t *ops);
  const char *done; /* each item's fault point once its results are in */
  unsigned flags;   /* DTX__ROUND_FAIL */
} dtx__round_t;

typedef struct dtx__batch_def {
  const char *noun;         /* "transfers": for the summary */
  const char *reqs_name;    /* "reqs": named when the call's input is NULL */
  size_t isize;             /* sizeof the item struct */
  const char *split;        /* fault point of an item leaving the lockstep */
  const dtx__round_t *rounds; /* ended by {0} */
  /* item i from the call's input b->reqs (it may end it at once) */
  int (*init)(dtx__batch_t *b, void *it, size_t i);
  /* ends it with step error rc as its alone path ends: the outcome's rc,
   * *doc (new reference, may be NULL); NULL: rc and no document */
  int (*fail)(dtx__batch_t *b, void *it, int rc, json_t **doc);
  void (*resume)(dtx__batch_t *b, void *it); /* must end it */
  void (*clear)(void *it);                   /* what the rounds left */
  /* optional: the keys of item it (dtx__batch_key for each); passes */
  int (*keys)(void *it, dtx__batch_keys_t *k);
  /* optional, with keys: after a pass, 1 to run another (b->left > 0) */
  int (*again)(dtx__batch_t *b);
} dtx__batch_def_t;

struct dtx__batch {
  dtx__exec_t *ex;
  const dtx__batch_def_t *def;
  const void *reqs; /* the call's input (the pattern's type) */
  size_t n;
  size_t left;      /* items not ended */
  size_t pass;      /* 0, 1, ... (keys) */
  void *ctx;        /* the pattern's own state for the call */
  size_t *at, k;    /* the round's items (indexes), in index order */
  /* private */
  char *items;
  char *results;
  size_t rsize;
  void *sched;
  dtx__kit_op_t *ops;
  const json_t **docs;
  dtx__move_t *m;
  json_t **outs;
  int *rcs;
  char **details;
};

/* Item i (of def->isize bytes). */
void *dtx__batch_item(const dtx__batch_t *b, size_t i);
/* 1 while it is in the lockstep. */
int dtx__batch_live(const void *it);
/* Ends it: rc, this thread's detail, doc (stolen, may be NULL). */
void dtx__batch_end(dtx__batch_t *b, void *it, int rc, json_t *doc);
/* Ends it with a step's error: detail (may be NULL: this thread's) made
 * this thread's, then def->fail. */
void dtx__batch_fail(dtx__batch_t *b, void *it, int rc, const char *detail);
/* It leaves the lockstep (def->split reached: an error there fails it),
 * to be resumed after the rounds as `resume` says. */
void dtx__batch_split(dtx__batch_t *b, void *it, int resume);
/* Ends every item not ended yet with rc and this thread's detail. */
void dtx__batch_end_rest(dtx__batch_t *b, int rc);
/* A key of an item (def->keys): kind ('a' account, 'i' id, ...) + name. */
int dtx__batch_key(dtx__batch_keys_t *k, char kind, const char *name);

/* Runs the rounds of def over the n items of reqs under ex, the outcomes
 * into results (n structs of rsize bytes, laid out as dtx__many_res_t;
 * zeroed first).  No call frame of its own: the worker's batch. */
void dtx__batch_drive(dtx__exec_t *ex, const dtx__batch_def_t *def,
                      const void *reqs, size_t n, void *ctx, void *results,
                      size_t rsize);

/* A batched public call: its whole set-up in one struct. */
typedef struct dtx__many {
  const dtx__batch_def_t *def;
  const char *fn; /* "dtx_transfer_execute_many": named in refusals */
  dtx_store_t *st;
  const void *reqs;
  size_t n;
  const dtx_exec_opts_t *opts;
  void *results;  /* the caller's n results */
  size_t rsize;   /* sizeof one */
  void *ctx;      /* the pattern's state for the call (b->ctx) */
} dtx__many_t;

/* The call: the results zeroed; a NULL st, reqs or results refused as a
 * whole (DTX_EINVAL in every result); n == 0 a no-op; else the executor
 * from opts, one call frame (one deadline), dtx__batch_drive, and the
 * return: 0 when every item's rc is 0, else the first failure's rc with
 * "K of N <noun> failed; first: #i: <detail>". */
int dtx__many_run(const dtx__many_t *call);

/* The results of a batched public call: the caller's array of structs
 * laid out as {int rc; char *detail; json_t *doc;} (the public result
 * types, each checked by DTX__MANY_RES_CHECK where it is used). */
typedef struct dtx__many_res {
  int rc;
  char *detail; /* malloc'd, NULL when rc == 0 */
  json_t *doc;  /* the item's document (owned), or NULL */
} dtx__many_res_t;

#define DTX__MANY_RES_CHECK(type, docfield)                                 \
  _Static_assert(offsetof(type, rc) == offsetof(dtx__many_res_t, rc) &&     \
                     offsetof(type, detail) ==                              \
                         offsetof(dtx__many_res_t, detail) &&               \
                     offsetof(type, docfield) ==                            \
                         offsetof(dtx__many_res_t, doc),                    \
                 #type " is laid out as {int rc; char *detail; json_t *doc;}")

/* Frees every result's detail and doc and zeroes the n results (the
 * public *_results_clear). */
void dtx__many_clear(void *results, size_t n, size_t size);

/* ---- small helpers ----------------------------------------------------------- */

/* json_pack's format ({} [] s o O I i b n, and s? o? O?) at half its cost
 * (pack.c): a new reference, or NULL on a NULL s/o/O without '?' or
 * out of memory.  o arguments are stolen in every case, also on error.
 * ASCII keys and strings go in unchecked, others are checked as
 * json_pack checks them. */
json_t *dtx__pack(const char *fmt, ...);

/* Field accessors (no allocation; NULL / 0 when absent or of another
 * type). */
const char *dtx__str(const json_t *doc, const char *key);
int64_t dtx__int(const json_t *doc, const char *key);
int dtx__str_is(const json_t *doc, const char *key, const char *value);
/* dtx__str_is(doc, "state", state) */
int dtx__state_is(const json_t *doc, const char *state);
/* doc's array at key holds the string value. */
int dtx__lists(const json_t *doc, const char *key, const char *value);

/* Checks an id given by a user: 1..128 of [A-Za-z0-9_.:-]; DTX_EINVAL
 * naming `what` otherwise. */
int dtx__check_ident(const char *what, const char *id);

/* Checks a collection a user names for a pattern to write its own
 * documents into (batch updates, sync rules, job effects): a valid name
 * (dtx__coll_check) and none of a pattern's collections, whose documents
 * change only through their protocol's steps.  DTX_EINVAL, the detail
 * "WHAT collection 'C' belongs to doctx's P pattern", otherwise. */
int dtx__check_user_coll(const char *what, const char *coll);

/* Checks an UPDATE given by a user to a pattern that adds fields of its
 * own to the same step (sync's versions, batch markers): a non-empty
 * object of update operators (a replacement would drop doctx's fields),
 * none of whose paths -- nor a $rename target -- is_reserved() claims.
 * DTX_EINVAL otherwise, the detail starting "WHAT: " and ending "doctx
 * keeps KEEPS"; replaces names what a replacement would replace.
 * Argument shapes are left to the store's compile, which names them. */
int dtx__check_op_update(const char *what, const json_t *u,
                         int (*is_reserved)(const char *path),
                         const char *replaces, const char *keeps);

/* ---- tallies: what worker and recover report, per pattern ----------------- */

/* A per-pattern summary that threads may fill at once:
 *   {"ran":     {WHAT: n, ...},
 *    "skipped": {WHY: {"count": n, "ids": [first few]}, ...},
 *    "errors":  {"count": n, "first": [{"id","error","detail"}...]}}
 * Zero it, then dtx__tally_init; dtx__tally_free releases it. */
typedef struct dtx__tally {
  json_t *obj;
  int first_err; /* the first error counted, 0 when none */
  void *lock;    /* private */
} dtx__tally_t;

int dtx__tally_init(dtx__tally_t *t);
void dtx__tally_free(dtx__tally_t *t);
void dtx__tally_ran(dtx__tally_t *t, const char *what, int64_t n);
/* id (borrowed, may be NULL) is kept among the first few of that reason. */
void dtx__tally_skip(dtx__tally_t *t, const char *why, const json_t *id);
/* Counts an error on item id (borrowed, may be NULL), with this thread's
 * error detail. */
void dtx__tally_error(dtx__tally_t *t, const json_t *id, int rc);
/* Adds src's "ran" and "errors" into dst (skips are per pass: not). */
void dtx__tally_merge(dtx__tally_t *dst, const dtx__tally_t *src);

/* ---- the audit frame ------------------------------------------------------- */

/* What a pattern's audit works with.  The report it fills is
 *   {"ok", "findings": [{"pattern","kind","detail"}...], "unsettled",
 *    "patterns": {NAME: {"summary": "one line", counts...}}}. */
typedef struct dtx__audit {
  dtx_store_t *st;
  int flags;           /* DTX_AUDIT_* */
  const json_t *acked; /* the client's acknowledged records, or NULL */
  /* private to the frame */
  const char *pattern;
  const struct dtx__pattern *pat;
  json_t *report, *part, *findings;
} dtx__audit_t;

/* Adds a finding of this pattern: kind is a token ("conservation"),
 * the detail names the documents involved. */
void dtx__audit_finding(dtx__audit_t *a, const char *kind, const char *fmt,
                        ...) __attribute__((format(printf, 3, 4)));
/* Sets key in this pattern's part of the report (value stolen). */
void dtx__audit_set(dtx__audit_t *a, const char *key, json_t *value);
/* An audit's sums are exact (__int128): a sum of tampered values can
 * pass int64, and is never wrapped or capped.  dtx__wide_str writes v's
 * decimal into buf (at least 41 bytes) and returns buf; dtx__wide_json
 * is v as a JSON integer while it fits int64, else its decimal as a
 * string (a new reference). */
const char *dtx__wide_str(__int128 v, char *buf);
json_t *dtx__wide_json(__int128 v);
/* The pattern's one-line summary, printed by `doctx audit`. */
void dtx__audit_summary(dtx__audit_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* This pattern's part of the report so far (borrowed). */
const json_t *dtx__audit_part(const dtx__audit_t *a);
/* Items that moved while the audit read them, judged by a later audit. */
void dtx__audit_unsettled(dtx__audit_t *a, int64_t n);
/* Reads every document of coll into *map, an object _id -> document.
 * Documents without a string _id are reported as a finding ("bad_id"),
 * and so is every document the pattern's validator for coll (its rules
 * table) refuses ("bad_shape", naming the field and the rule): such a
 * document stays in *map, so the pattern's own checks see it too, and
 * must not trust its field types. */
int dtx__audit_load(dtx__audit_t *a, const char *coll, json_t **map);

/* ---- the per-pattern method table ------------------------------------------ */

typedef struct dtx__index_def {
  const char *coll;
  const char *keys; /* JSON text: "{\"state\":1}"; NULL ends a list */
  int unique, sparse;
} dtx__index_def_t;

/* A collection's rules (docs/validation.md), as JSON text: the validator
 * every document the store writes there must match, and the delete guard
 * a document must match to be deleted.  NULL: none.  The kit installs them
 * with the indexes (dtx__kit_ensure), so the generic document commands
 * cannot write what the protocol would misread, and the audit checks
 * every document it loads against the same validator (dtx__audit_load),
 * so what slipped in by bypass_validation, or before the rules existed,
 * is reported. */
typedef struct dtx__rules_def {
  const char *coll;         /* NULL ends a list */
  const char *validator;    /* {"$jsonSchema": {...}, ...} or NULL */
  const char *delete_guard; /* a filter, e.g. {"state": "failed"}, or NULL */
  const char *transition;   /* what an update may change, or NULL */
} dtx__rules_def_t;

/* The kit's item fields (owner, lease_until, epoch, updated) as JSON text
 * for a $jsonSchema: paste DTX__KIT_ITEM_REQUIRED into "required" and
 * DTX__KIT_ITEM_PROPS into "properties" of an item collection's validator,
 * so the validator admits exactly what the kit writes. */
#define DTX__KIT_ITEM_REQUIRED "\"owner\",\"lease_until\",\"epoch\",\"updated\""
#define DTX__KIT_ITEM_PROPS                                                   \
  "\"owner\":{\"bsonType\":[\"string\",\"null\"]},"                              \
  "\"lease_until\":{\"bsonType\":\"long\"},"                                   \
  "\"epoch\":{\"bsonType\":\"long\",\"minimum\":0},"                             \
  "\"updated\":{\"bsonType\":\"long\"}"

/* A collection's shape check (docs/kit.md, "Shape checks"): which fields
 * go together in each state, beyond what its validator can say of one
 * field at a time.  check: 0 when doc is a document the pattern's steps
 * can leave there -- at every step, a crash's leftovers included -- else
 * -1 with why (at most n bytes, NUL-ended) naming the field and the
 * rule.  It reads any document, of any types, without failing otherwise
 * (the audit hands it what a tamper wrote). */
typedef struct dtx__shape_def {
  const char *coll; /* NULL ends a list */
  int (*check)(const json_t *doc, char *why, size_t n);
} dtx__shape_def_t;

typedef struct dtx__pattern {
  const char *name;                  /* "transfer"; fault points start
                                        with "transfer." */
  const dtx__kind_t *kind;           /* its items (worker tallies their
                                        state), or NULL */
  const char *const *collections;    /* the collections it owns, NULL-ended */
  const dtx__index_def_t *indexes;   /* ended by {NULL} */
  const char *const *fault_points;   /* in protocol order, NULL-ended */
  /* Claims the next due item (it holds the lease afterwards); DTX_ENOMATCH
   * when nothing is due.  NULL: the pattern has no work for workers. */
  int (*claim_next)(dtx__exec_t *ex, json_t **item);
  /* Drives an item claimed by claim_next to where this executor can take
   * it (usually a terminal state); *out: the item afterwards. */
  int (*drive)(dtx__exec_t *ex, const json_t *item, json_t **out);
  /* One recovery pass over what dead or stalled executors left. */
  int (*recover)(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                 dtx__tally_t *t);
  /* Checks this pattern's invariants into the frame. */
  int (*audit)(dtx__audit_t *a);
  /* The rules of its collections, ended by {NULL}; NULL: none.  (Later
   * members must keep zero-initialised tables valid.) */
  const dtx__rules_def_t *rules;
  /* Optional, the batched worker path (both or neither; the worker falls
   * back to claim_next/drive without them, or with a batch of 1).
   * claim_many: up to max (1..DTX__CLAIM_MANY_MAX) due items in one round
   * (*items: a new array of at least one, each under this executor's
   * lease); DTX_ENOMATCH when none is due.  drive_many: drives them
   * together, within one lease of the claim; per item i outs[i] (new
   * reference, may be NULL), rcs[i] and details[i] (malloc'd or NULL) are
   * what drive would have given for it alone. */
  int (*claim_many)(dtx__exec_t *ex, size_t max, json_t **items);
  void (*drive_many)(dtx__exec_t *ex, const json_t *items, json_t **outs,
                     int *rcs, char **details);
  /* Optional, its shape checks, ended by {NULL}: run after every move in
   * debug builds (an abort when a move breaks one) and by the audit on
   * every document in every build (a finding, "bad_shape"). */
  const dtx__shape_def_t *shapes;
  /* Optional, the integer field of drive's *out that says how many the
   * item did (the ledger's "entries": one claim commits a round of
   * them), which the worker's summary counts; NULL: each item is 1. */
  const char *count;
} dtx__pattern_t;

/* What a failed shape check returns: -1, with why formatted by fmt. */
int dtx__shape_bad(char *why, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* How the store will judge a step's write of coll, before -> after,
 * under rules r (doc/doc.h's dtx__rules_t): dtx__doc_check_write inside
 * the step mark `step`, so plain-scope rules skip the pattern's own steps
 * as they do when it runs.  For a protocol that checks a write before it
 * writes anything (the transactions' commit, src/txn/multi/fit.c). */
struct dtx__rules;
int dtx__kit_judge(const struct dtx__rules *r, const char *step,
                   const char *coll, const json_t *before,
                   const json_t *after);

/* The shape check of coll declared by p (NULL: by any pattern), or NULL. */
const dtx__shape_def_t *dtx__kit_shape_of(const dtx__pattern_t *p,
                                          const char *coll);

/* Every registered pattern, NULL-ended (registry.c: one line each). */
extern const dtx__pattern_t *const dtx__patterns[];

/* How many patterns are registered. */
size_t dtx__pattern_count(void);

/* ---- the frames' shared pieces (worker.c, recover.c) ------------------------ */

/* One recovery pass of every pattern; tallies[i] (initialised) receives
 * pattern i's.  Returns dtx__tally_raise(tallies). */
/* Recovery's one rule for work held under a lease: with
 * o->older_than_ms >= 0 (the operator's explicit age) it is abandoned when
 * its last change, changed_at, is at least that old; otherwise when its
 * lease, lease_until, has lapsed.  1 when abandoned, else 0. */
int dtx__kit_abandoned(const dtx_recover_opts_t *o, int64_t changed_at,
                       int64_t lease_until, int64_t now);

int dtx__recover_pass(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                      dtx__tally_t *tallies);
/* The first error any of the tallies (one per pattern) counted, with its
 * detail made this thread's again ("transfer t1: ..."); 0 when none. */
int dtx__tally_raise(const dtx__tally_t *tallies);
/* {"ok": rc == 0, "patterns": {NAME: tally...}} (new reference). */
json_t *dtx__tally_report(const dtx__tally_t *tallies, int rc);

/* The pace every worker loop keeps (worker.c, jobq/runner.c), in one place.
 * Recovery runs at most every DTX__RECOVER_EVERY_MS, one thread at a
 * time; after a round that found nothing to do, a --once loop runs one
 * forced pass and stops when a second such round finds nothing either,
 * and a standing loop runs the pass when due and sleeps, doubling its
 * pause up to DTX__IDLE_MAX_MS. */
#define DTX__RECOVER_EVERY_MS 1000
#define DTX__IDLE_MAX_MS 50

typedef struct dtx__pacer {
  pthread_mutex_t lock;
  int64_t last; /* when the last pass ran, ms */
  /* One recovery pass for this executor: how much it did (moved items). */
  int64_t (*pass)(void *arg, dtx__exec_t *ex);
  void *arg;
} dtx__pacer_t;

void dtx__pacer_init(dtx__pacer_t *p, int64_t (*pass)(void *, dtx__exec_t *),
                     void *arg);
void dtx__pacer_destroy(dtx__pacer_t *p);
/* Runs the pass when due (or when force), unless another thread is in it;
 * returns what it did (0 when it did not run). */
int64_t dtx__pacer_recover(dtx__pacer_t *p, dtx__exec_t *ex, int force);

/* One thread's idle state: zero it, or dtx__idle_busy after work. */
typedef struct dtx__idle {
  int rounds;
  int64_t pause_ms;
} dtx__idle_t;
void dtx__idle_busy(dtx__idle_t *s);
/* After a round with nothing to do: 1 when a once-loop should stop; else
 * recovers (when due) and, for a standing loop, sleeps. */
int dtx__idle_round(dtx__idle_t *s, dtx__pacer_t *p, dtx__exec_t *ex,
                    int once);
/* After a round that failed (a claim's store error): the longest idle
 * pause, DTX__IDLE_MAX_MS, so a store that is away is not hammered. */
void dtx__idle_failed(void);

/* The executor threads of a worker: fn runs on n threads (1..256), each
 * given its own dtx__thread_t; all are joined before this returns.  A
 * thread that cannot start stores DTX_ENOMEM in *fatal (which the running
 * ones watch to stop) and is returned. */
typedef struct dtx__thread {
  void *shared; /* the caller's shared state */
  int n;        /* 0..n-1, for the executor's name */
} dtx__thread_t;
int dtx__run_threads(int n, void *(*fn)(void *), void *shared,
                     atomic_int *fatal);
/* A worker thread's executor: as dtx__exec_init, named OWNER#N after
 * its thread so the workers of one process hold leases apart. */
void dtx__exec_init_thread(dtx__exec_t *ex, const dtx__thread_t *w,
                           dtx_store_t *st, const char *owner,
                           int64_t lease_ms, int64_t deadline_ms);

/* Sets p's collections up: creates its indexes and installs its rules
 * (p->rules; stored rules that differ are replaced, equal ones are left
 * untouched so no catalog version is spent), unless this process already
 * did for this store (keyed by the store's URI; private in-memory stores
 * every time).  Call it at the top of every writing API call; the worker
 * and recovery call it for every pattern the store uses (dtx__kit_unused). */
int dtx__kit_ensure(dtx_store_t *st, const dtx__pattern_t *p);
/* The memo under dtx__kit_ensure, for any set-up named name: runs
 * setup(st, arg) unless this process already did, successfully, for this
 * store's URI and name at the current catalog generation (a drop through
 * this library makes it old); a private in-memory store every time.  One
 * process-wide lock is held while setup runs, so no thread writes before
 * it is done; setup must not call dtx__kit_once.  Returns setup's rc, or
 * 0 when remembered.  name: the pattern's name, or another that none
 * takes (a transaction's guard: "txn-guard:COLL"). */
int dtx__kit_once(dtx_store_t *st, const char *name,
                  int (*setup)(dtx_store_t *st, const void *arg),
                  const void *arg);
/* The name before rules existed (same function). */
#define dtx__kit_ensure_indexes(st, p) dtx__kit_ensure((st), (p))

/* Adds the transition rule `rule` (JSON text) to a user's collection
 * coll unless its rules hold it already: after the user's own (an object
 * becomes an array of both), the validator and delete guard kept as they
 * are.  How a pattern that keeps markers in the user's documents (batch
 * markers, job effect markers) keeps plain writes off them, before it
 * writes the first one.  The rule names its pattern ("pattern": P), so a
 * plain change of the collection's rules may not take it away
 * (docs/validation.md); it is set past that check.  A change of rules
 * costs a catalog version, so it is made only when missing. */
int dtx__kit_guard_coll(dtx_store_t *st, const char *coll, const char *rule);

/* 1 when the store holds none of the collections p lists (p lists at
 * least one): p has nothing to recover or claim there, and ensuring it
 * would create them -- every pattern's tables and indexes in a store that
 * uses one.  names: the store's collections (dtx_store_list_collections),
 * borrowed; NULL (they could not be listed) counts as in use, so the pass
 * runs and meets the store's error itself. */
int dtx__kit_unused(const dtx__pattern_t *p, const json_t *names);

#endif
