/* position.c -- where a ledger account stands, derived from its cache and
 * the entries after it (the reference's "last good balance plus pending
 * changes"), and the reads built on it: balance, point-in-time balance,
 * statement, list, show.
 *
 * The cache {balance, seqId} covers committed entries only (ledger.c, L7),
 * so everything up to cache.seqId is final; the entries after it are read
 * in one indexed query on {changes.account, changes.seqId}.  The store
 * gives no snapshot across documents, but entries are immutable except for
 * their state, and a state change never lowers an available balance
 * (ledger.c, L3), so a reader that sees an older state errs on the safe
 * side.  What it must not do is miss an entry: seqIds are dense (L2), so a
 * gap means the query ran past an entry inserted meanwhile, and the read
 * is made again.  A post may start later than the cache, from this
 * process's memo of final entries ("the tail memo" below). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

#define GAP_REREADS 4
#define CHUNK 256

int dtx__lg_fit(__int128 v, int64_t *out, const char *what, const char *acct) {
  if (v > INT64_MAX || v < INT64_MIN)
    return dtx__err(DTX_EOVERFLOW, "account '%s': %s does not fit in int64",
                    acct, what);
  *out = (int64_t)v;
  return 0;
}

/* ---- reading legs by seqId --------------------------------------------------------- */

typedef struct keyed {
  int64_t seq;
  json_t *e;
} keyed_t;

static int by_seq(const void *a, const void *b) {
  int64_t x = ((const keyed_t *)a)->seq, y = ((const keyed_t *)b)->seq;
  return x < y ? -1 : x > y;
}

/* Sorts docs (an array of entries) by account's seqId in place. */
static int sort_by_seq(json_t *docs, const char *account) {
  size_t n = json_array_size(docs), i;
  if (n < 2)
    return 0;
  keyed_t *k = malloc(n * sizeof *k);
  if (!k)
    return DTX_ENOMEM;
  for (i = 0; i < n; i++) {
    k[i].e = json_incref(json_array_get(docs, i));
    k[i].seq = dtx__int(dtx__lg_leg(k[i].e, account), "seqId");
  }
  qsort(k, n, sizeof *k, by_seq);
  json_array_clear(docs);
  for (i = 0; i < n; i++)
    json_array_append_new(docs, k[i].e);
  free(k);
  return 0;
}

int dtx__lg_range(dtx__exec_t *ex, const char *account, int64_t lo, int64_t hi,
                  json_t **out) {
  json_t *seq = hi >= 0 ? json_pack("{s:I,s:I}", "$gte", (json_int_t)lo,
                                    "$lte", (json_int_t)hi)
                        : json_pack("{s:I}", "$gte", (json_int_t)lo);
  json_t *filter = json_pack("{s:{s:{s:s,s:o}}}", "changes", "$elemMatch",
                             "account", account, "seqId", seq);
  int rc = filter ? dtx__kit_find(ex, DTX_LEDGER_ENTRIES, filter, NULL, out)
                  : DTX_ENOMEM;
  json_decref(filter);
  if (rc == 0 && (rc = sort_by_seq(*out, account))) {
    json_decref(*out);
    *out = NULL;
  }
  return rc;
}

/* ---- position -------------------------------------------------------------------------- */

/* The seqId the tail breaks density at, or 0 when it is dense. */
static int64_t first_gap(const json_t *tail, const char *id, int64_t from) {
  size_t i;
  json_t *e;
  json_array_foreach(tail, i, e) {
    if (dtx__int(dtx__lg_leg(e, id), "seqId") != from + (int64_t)i)
      return from + (int64_t)i;
  }
  return 0;
}

/* Will entry e's legs count (or not count) forever?  Posted, voided and
 * expired are final; only a pending entry still changes. */
static int is_final(const json_t *e) {
  return dtx__state_is(e, LG_POSTED) || dtx__state_is(e, LG_VOIDED) ||
         dtx__state_is(e, LG_EXPIRED);
}

/* ---- the tail memo ---------------------------------------------------------------------
 *
 * Deriving a position reads every entry past the cache, and the cache
 * trails the posts by as much as the committer lags (on a hot account,
 * dozens of entries).  But an entry whose state is final never changes
 * again (the legs are immutable and seqIds are never reused, L2), so the
 * posted balance at seqId n, once every entry up to n is final, is fixed.
 * The memo remembers it per (store handle, account): {n, balance at n,
 * the _id and leg value of the entry holding n (the anchor)}.  A post
 * then reads only the entries from n on, and the anchor read back must be
 * the same entry, still final, or the memo is dropped and the position is
 * derived from the cache as before.  So the memo is only ever a shortcut
 * to a sum the post would have computed from the same legs; reads
 * (balance, statement) and the committer do not use it, and the audit
 * recomputes everything from the legs.  Bounded: one direct-mapped table
 * per process (a newer key overwrites its slot), under one mutex;
 * handles are told apart by dtx__store_serial, never by pointer. */

#define MEMO_SLOTS 1024
#define MEMO_ID 64 /* longer account or entry ids are simply not memoised */

typedef struct memo {
  uint64_t store; /* dtx__store_serial; 0: an empty slot */
  int64_t seq;    /* every entry of account up to seq is final */
  int64_t value;  /* the anchor's leg value */
  __int128 bal;   /* the posted balance at seq */
  char account[MEMO_ID + 1], anchor[MEMO_ID + 1];
} memo_t;

static memo_t memos[MEMO_SLOTS];
static pthread_mutex_t memo_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t memo_slot(uint64_t store, const char *account) {
  uint64_t h = 1469598103934665603ULL ^ store;
  for (const char *p = account; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return (size_t)(h % MEMO_SLOTS);
}

static int memo_get(uint64_t store, const char *account, memo_t *out) {
  if (strlen(account) > MEMO_ID)
    return 0;
  memo_t *m = &memos[memo_slot(store, account)];
  pthread_mutex_lock(&memo_lock);
  int hit = m->store == store && strcmp(m->account, account) == 0;
  if (hit)
    *out = *m;
  pthread_mutex_unlock(&memo_lock);
  return hit;
}

/* Records that account's posted balance at seq is bal, the entry holding
 * seq being anchor with leg value. */
static void memo_put(uint64_t store, const char *account, int64_t seq,
                     __int128 bal, const char *anchor, int64_t value) {
  if (!anchor || strlen(account) > MEMO_ID || strlen(anchor) > MEMO_ID)
    return;
  DTX_ASSERT(seq >= 1, "L2"); /* a final entry's seqId */
  memo_t *m = &memos[memo_slot(store, account)];
  pthread_mutex_lock(&memo_lock);
  if (m->store != store || strcmp(m->account, account) != 0 || m->seq < seq) {
    m->store = store;
    m->seq = seq;
    m->value = value;
    m->bal = bal;
    strcpy(m->account, account);
    strcpy(m->anchor, anchor);
  }
  pthread_mutex_unlock(&memo_lock);
}

/* Advances the memo over the final entries at the head of pos's tail. */
static void memo_learn(dtx__exec_t *ex, const dtx__lg_pos_t *pos) {
  __int128 bal = pos->base_bal;
  const json_t *last = NULL;
  size_t i, n = 0;
  json_t *e;
  json_array_foreach(pos->tail, i, e) {
    if (!is_final(e))
      break;
    if (dtx__state_is(e, LG_POSTED))
      bal += dtx__lg_amount_of(e, pos->id);
    last = e;
    n++;
  }
  if (last)
    memo_put(dtx__store_serial(ex->st), pos->id, pos->base + (int64_t)n, bal,
             dtx__str(last, "_id"),
             dtx__lg_amount_of(last, pos->id));
}

void dtx__lg_memo_posted(dtx__exec_t *ex, const char *account, int64_t seq,
                         __int128 bal, const char *entry_id, int64_t value) {
  memo_put(dtx__store_serial(ex->st), account, seq, bal, entry_id, value);
}

/* ---- position -------------------------------------------------------------------------- */

void dtx__lg_pos_free(dtx__lg_pos_t *pos) {
  json_decref(pos->acct);
  json_decref(pos->tail);
  memset(pos, 0, sizeof *pos);
}

/* Reads pos's tail: the entries from seqId `from` on, dense.  With an
 * anchor (m), the first must be the memo's anchor entry, still final;
 * when it is not, 1 (and no tail) so the caller derives from the cache. */
static int read_tail(dtx__exec_t *ex, dtx__lg_pos_t *pos, int64_t from,
                     const memo_t *m, int with_base) {
  int64_t gap = 0;
  for (int round = 0; round < GAP_REREADS; round++) {
    json_decref(pos->tail);
    pos->tail = NULL;
    int rc = dtx__lg_range(ex, pos->id, from, -1, &pos->tail);
    if (rc)
      return rc;
    if (m) {
      const json_t *a = json_array_get(pos->tail, 0);
      const json_t *leg = dtx__lg_leg(a, pos->id);
      if (!a || dtx__int(leg, "seqId") != m->seq ||
          !dtx__str_is(a, "_id", m->anchor) ||
          dtx__lg_amount(a, leg) != m->value || !is_final(a)) {
        json_decref(pos->tail);
        pos->tail = NULL;
        return 1;
      }
    }
    if (!(gap = first_gap(pos->tail, pos->id, from)))
      break;
  }
  if (gap)
    return dtx__err(DTX_EBACKEND,
                    "ledger account '%s': no entry holds seqId %lld although "
                    "a later one exists (run doctx audit)",
                    pos->id, (long long)gap);
  /* The anchor (or the cache's last entry) is counted in the base's
   * balance already; its time is what the next entry's follows (time.c,
   * T1). */
  if (m || with_base) {
    pos->base_at = dtx__lg_time(json_array_get(pos->tail, 0));
    json_array_remove(pos->tail, 0);
  }
  return 0;
}

/* position()'s ways: MEMO starts from the process's memo when it is on,
 * TIMED reads the entry at the cache too, for head_at (time.c, T1): what
 * a write that takes the next seqId needs (a post, a close). */
enum { POS_MEMO = 1, POS_TIMED = 2 };

static int position(dtx__exec_t *ex, json_t *acct, dtx__lg_pos_t *pos,
                    int how) {
  int use_memo = how & POS_MEMO;
  memset(pos, 0, sizeof *pos);
  pos->acct = json_incref(acct);
  pos->id = dtx__str(acct, "_id");
  json_t *cache = json_object_get(acct, "cache");
  json_t *cs = json_object_get(cache, "seqId"), *cb = json_object_get(cache, "balance");
  if (!pos->id || !json_is_integer(cs) || !json_is_integer(cb) ||
      json_integer_value(cs) < 0)
    return dtx__err(DTX_EBACKEND, "ledger account '%s' has no valid cache",
                    pos->id ? pos->id : "?");
  pos->cache_seq = json_integer_value(cs);
  pos->cache_bal = json_integer_value(cb);
  memo_t m;
  int rc = 1;
  if (use_memo && memo_get(dtx__store_serial(ex->st), pos->id, &m) &&
      m.seq > pos->cache_seq && (rc = read_tail(ex, pos, m.seq, &m, 0)) == 0) {
    pos->base = m.seq;
    pos->base_bal = m.bal;
  }
  if (rc < 0)
    return rc;
  if (rc) { /* no memo, or the cache is as far on, or the anchor differs */
    /* A post or a close reads the entry at the cache too, for its time
     * (time.c). */
    int with_base = (how & POS_TIMED) && pos->cache_seq >= 1;
    if ((rc = read_tail(ex, pos, pos->cache_seq + 1 - with_base, NULL,
                        with_base)))
      return rc;
    pos->base = pos->cache_seq;
    pos->base_bal = pos->cache_bal;
  }
  pos->head = pos->base + (int64_t)json_array_size(pos->tail);
  if (json_array_size(pos->tail))
    pos->head_at = dtx__lg_time(
        json_array_get(pos->tail, json_array_size(pos->tail) - 1));
  else
    pos->head_at = pos->base_at;
  DTX_ASSERT(pos->base >= pos->cache_seq && pos->head >= pos->base, "L2");
  pos->posted = pos->base_bal;
  pos->all_final = 1;
  size_t i;
  json_t *e;
  json_array_foreach(pos->tail, i, e) {
    int64_t v = dtx__int(dtx__lg_leg(e, pos->id), "value");
    if (dtx__state_is(e, LG_POSTED))
      pos->posted += dtx__lg_amount_of(e, pos->id);
    else if (dtx__state_is(e, LG_PENDING) && v < 0)
      pos->pend_debit -= v;
    else if (dtx__state_is(e, LG_PENDING))
      pos->pend_credit += v;
    if (!is_final(e))
      pos->all_final = 0;
    if (!pos->closed && dtx__lg_is_close(e)) /* never final: no memo past it */
      pos->closed = e;
  }
  DTX_ASSERT(pos->pend_debit >= 0 && pos->pend_credit >= 0, "L4");
  if (use_memo)
    memo_learn(ex, pos);
  return 0;
}

int dtx__lg_position(dtx__exec_t *ex, json_t *acct, dtx__lg_pos_t *pos) {
  return position(ex, acct, pos, 0);
}

/* A closed account takes no leg (close.c): its close entry holds a seqId
 * and is never committed, so the cache never passes it and every post's
 * tail -- from the cache or from the memo, which stops before it -- holds
 * it. */
int dtx__lg_position_timed(dtx__exec_t *ex, json_t *acct,
                           dtx__lg_pos_t *pos) {
  return position(ex, acct, pos, POS_TIMED);
}

int dtx__lg_position_post(dtx__exec_t *ex, json_t *acct, dtx__lg_pos_t *pos) {
  int rc = position(ex, acct, pos, POS_MEMO | POS_TIMED);
  if (rc == 0 && pos->closed) {
    rc = dtx__lg_refuse_closed(pos);
    dtx__lg_pos_free(pos); /* a refused position is the callee's to free */
  }
  return rc;
}

/* ---- balance ------------------------------------------------------------------------------ */

/* The sum of account's posted legs with seqIds in [lo, hi]. */
static int posted_sum(dtx__exec_t *ex, const char *account, int64_t lo,
                      int64_t hi, __int128 *sum) {
  json_t *docs = NULL, *e;
  size_t i;
  *sum = 0;
  if (lo > hi)
    return 0;
  int rc = dtx__lg_range(ex, account, lo, hi, &docs);
  if (rc)
    return rc;
  json_array_foreach(docs, i, e) {
    if (dtx__state_is(e, LG_POSTED))
      *sum += dtx__lg_amount_of(e, account);
  }
  json_decref(docs);
  return 0;
}

/* The posted balance as of seqId n (0 <= n <= head) of an account whose
 * position is pos: from the cache forward over the tail when n is past
 * the cache, else from whichever end of [1, cache] is nearer. */
static int balance_at(dtx__exec_t *ex, const dtx__lg_pos_t *pos, int64_t n,
                      __int128 *bal, __int128 *pend) {
  /* From the cache on, the tail is the cache's (a read, not the memo). */
  DTX_ASSERT(pos->base == pos->cache_seq && n >= 0 && n <= pos->head, "L7");
  *pend = 0;
  if (n >= pos->cache_seq) {
    *bal = pos->cache_bal;
    for (int64_t s = pos->cache_seq + 1; s <= n; s++) {
      const json_t *e = json_array_get(pos->tail, (size_t)(s - pos->cache_seq - 1));
      int64_t v = dtx__int(dtx__lg_leg(e, pos->id), "value");
      if (dtx__state_is(e, LG_POSTED))
        *bal += dtx__lg_amount_of(e, pos->id);
      else if (dtx__state_is(e, LG_PENDING) && v < 0)
        *pend -= v;
    }
    return 0;
  }
  __int128 part;
  int rc;
  if (n <= pos->cache_seq - n) {
    rc = posted_sum(ex, pos->id, 1, n, &part);
    *bal = part;
  } else {
    rc = posted_sum(ex, pos->id, n + 1, pos->cache_seq, &part);
    *bal = (__int128)pos->cache_bal - part;
  }
  return rc; /* nothing up to the cache is pending (L6) */
}

int dtx__lg_balance(dtx__exec_t *ex, const char *account, int64_t at_seq,
                    json_t **out) {
  json_t *acct = NULL;
  dtx__lg_pos_t pos;
  int rc;
  if ((rc = dtx__check_ident("account id", account)))
    return rc;
  if (at_seq < DTX_LEDGER_LATEST)
    return dtx__err(DTX_EINVAL, "at_seq must be >= 0, got %lld",
                    (long long)at_seq);
  if ((rc = dtx__lg_account(ex, account, &acct)))
    return rc;
  rc = dtx__lg_position(ex, acct, &pos);
  json_decref(acct);
  int64_t n = at_seq == DTX_LEDGER_LATEST ? pos.head : at_seq;
  if (rc == 0 && n > pos.head)
    rc = dtx__err(DTX_EINVAL, "account '%s' has seqIds up to %lld, not %lld",
                  account, (long long)pos.head, (long long)n);
  __int128 bal = 0, pend = 0;
  if (rc == 0)
    rc = balance_at(ex, &pos, n, &bal, &pend);
  int64_t b = 0, p = 0, av = 0;
  if (rc == 0 && !(rc = dtx__lg_fit(bal, &b, "the balance", account)) &&
      !(rc = dtx__lg_fit(pend, &p, "the pending debits", account)))
    rc = dtx__lg_fit(bal - pend, &av, "the available balance", account);
  if (rc == 0)
    *out = json_pack("{s:s,s:I,s:I,s:I,s:I}", "account", account, "balance",
                     (json_int_t)b, "available", (json_int_t)av,
                     "pending_debits", (json_int_t)p, "seq", (json_int_t)n);
  if (rc == 0)
    dtx__lg_name_asset(*out, pos.acct);
  if (rc == 0 && *out && pos.closed) /* the account's state now */
    json_object_set_new(*out, "closed_at",
                        json_integer((json_int_t)dtx__int(pos.closed, "created")));
  dtx__lg_pos_free(&pos);
  return rc == 0 && !*out ? DTX_ENOMEM : rc;
}

int dtx_ledger_balance(dtx_store_t *st, const char *account, int64_t at_seq,
                       json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, dtx__lg_balance(&ex, account, at_seq, out));
}

/* ---- statement ------------------------------------------------------------------------------ */

typedef struct stmt {
  json_t *lines;
  const json_t *acct; /* its asset names each line */
  int64_t limit;
  __int128 running;
  const char *account;
} stmt_t;

/* Appends the lines of the valid legs of docs (sorted by seqId); 1 when
 * the limit is reached. */
static int add_lines(stmt_t *s, const json_t *docs, int *rc) {
  size_t i;
  json_t *e;
  json_array_foreach(docs, i, e) {
    int close = dtx__lg_is_close(e); /* the account's last line */
    if (!dtx__state_is(e, LG_POSTED) && !close)
      continue;
    const json_t *leg = dtx__lg_leg(e, s->account);
    int64_t bal;
    s->running += dtx__lg_amount(e, leg);
    if ((*rc = dtx__lg_fit(s->running, &bal, "the running balance", s->account)))
      return 1;
    json_array_append_new(
        s->lines,
        json_pack("{s:O,s:O,s:o,s:I,s:s}", "entry", json_object_get(e, "_id"),
                  "seq", json_object_get(leg, "seqId"), "value",
                  json_integer(dtx__lg_amount(e, leg)), "balance", (json_int_t)bal,
                  "state", close ? LG_CLOSED
                  : dtx__str_is(e, "proc", LG_COMMITTED)
                               ? LG_COMMITTED
                               : LG_UNCOMMITTED));
    json_t *line = json_array_get(s->lines, json_array_size(s->lines) - 1);
    if (line && close)
      json_object_set_new(line, "closed_at",
                          json_integer((json_int_t)dtx__int(e, "created")));
    dtx__lg_name_asset(line, s->acct);
    if (line) /* the entry's time (time.c) */
      json_object_set_new(line, "at", json_integer(dtx__lg_time(e)));
    if (line && json_object_get(e, "ref"))
      json_object_set(line, "ref", json_object_get(e, "ref"));
    if (line && json_object_get(e, "meta"))
      json_object_set(line, "meta", json_object_get(e, "meta"));
    if (s->limit > 0 && (int64_t)json_array_size(s->lines) >= s->limit)
      return 1;
  }
  return 0;
}

int dtx__lg_statement(dtx__exec_t *ex, const char *account, int64_t from,
                      int64_t to, int64_t limit, json_t **out) {
  json_t *acct = NULL;
  dtx__lg_pos_t pos;
  int rc;
  if ((rc = dtx__check_ident("account id", account)))
    return rc;
  if (from < 1 || limit < 0)
    return dtx__err(DTX_EINVAL, "from_seq must be >= 1 and limit >= 0, got "
                    "%lld and %lld", (long long)from, (long long)limit);
  if ((rc = dtx__lg_account(ex, account, &acct)))
    return rc;
  rc = dtx__lg_position(ex, acct, &pos);
  json_decref(acct);
  stmt_t s = {.lines = json_array(), .limit = limit, .account = account,
              .acct = rc == 0 ? pos.acct : NULL};
  __int128 pend;
  if (rc == 0 && from <= pos.head)
    rc = balance_at(ex, &pos, from - 1, &s.running, &pend);
  int full = 0;
  /* to (< 0: none) bounds the seqIds: a statement between two times
   * (time.c). */
  int64_t end = rc == 0 && to >= 0 && to < pos.head ? to : pos.head;
  int64_t cend = end < pos.cache_seq ? end : pos.cache_seq;
  /* The committed part, in chunks of seqIds... */
  for (int64_t lo = from; rc == 0 && !full && lo <= cend; lo += CHUNK) {
    json_t *docs = NULL;
    int64_t hi = lo + CHUNK - 1 < cend ? lo + CHUNK - 1 : cend;
    if ((rc = dtx__lg_range(ex, account, lo, hi, &docs)) == 0)
      full = add_lines(&s, docs, &rc);
    json_decref(docs);
  }
  /* ...then the tail already read. */
  if (rc == 0 && !full && from <= end) {
    int64_t skip = from > pos.cache_seq + 1 ? from - pos.cache_seq - 1 : 0;
    json_t *rest = json_array();
    for (size_t i = (size_t)skip;
         i < json_array_size(pos.tail) && pos.cache_seq + 1 + (int64_t)i <= end;
         i++)
      json_array_append(rest, json_array_get(pos.tail, i));
    add_lines(&s, rest, &rc);
    json_decref(rest);
  }
  dtx__lg_pos_free(&pos);
  if (rc)
    json_decref(s.lines);
  else
    *out = s.lines;
  return rc;
}

int dtx_ledger_statement(dtx_store_t *st, const char *account,
                         int64_t from_seq, int64_t limit, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, dtx__lg_statement(&ex, account, from_seq, -1, limit, out));
}

/* ---- show and list ----------------------------------------------------------------------------- */

int dtx_ledger_get(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx__check_ident("entry id", id);
  if (rc == 0 && (rc = dtx__kit_get(&ex, DTX_LEDGER_ENTRIES, id, out)) ==
                     DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no ledger entry '%s'", id);
  return dtx__call_end(&c, rc);
}

/* An account's entries hold its seqIds 1..head, one each (L2), so a page
 * of them is a range of seqIds. */
static int list_account(dtx__exec_t *ex, const char *account,
                        const dtx_page_t *page, json_t **out) {
  json_t *acct = NULL;
  int rc;
  if ((rc = dtx__check_ident("account id", account)))
    return rc;
  if ((rc = dtx__kit_page_check(page)))
    return rc;
  if ((rc = dtx__lg_account(ex, account, &acct)))
    return rc;
  json_decref(acct);
  int64_t lo = 1 + (page ? page->skip : 0);
  if (page && page->after) {
    /* Keyset paging: from the seqId after the entry's leg of account. */
    json_t *e = NULL, *leg;
    size_t i;
    int64_t seq = -1;
    if ((rc = dtx__kit_get(ex, DTX_LEDGER_ENTRIES, page->after, &e)))
      return rc == DTX_ENOTFOUND
                 ? dtx__err(DTX_ENOTFOUND, "page after '%s': no such ledger "
                            "entry", page->after)
                 : rc;
    json_array_foreach(json_object_get(e, "changes"), i, leg) {
      if (dtx__str_is(leg, "account", account) &&
          json_is_integer(json_object_get(leg, "seqId")))
        seq = dtx__int(leg, "seqId");
    }
    json_decref(e);
    if (seq < 1)
      return dtx__err(DTX_EINVAL, "page after '%s': the entry has no leg of "
                      "account '%s'", page->after, account);
    lo += seq;
  }
  int64_t hi = page && page->limit > 0 ? lo + page->limit - 1 : -1;
  return dtx__lg_range(ex, account, lo, hi, out);
}

int dtx_ledger_list(dtx_store_t *st, const char *account,
                    const dtx_page_t *page, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  if (account)
    return dtx__call_end(&c, list_account(&ex, account, page, out));
  json_t *sort = json_pack("{s:i,s:i}", "created", 1, "_id", 1);
  int rc = sort ? dtx__kit_list(st, DTX_LEDGER_ENTRIES, NULL, sort, page, out)
                : DTX_ENOMEM;
  json_decref(sort);
  return dtx__call_end(&c, rc);
}
