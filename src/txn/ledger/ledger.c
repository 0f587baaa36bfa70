/* ledger.c -- the log-reconciliation ledger (reference solution 4): the
 * state machine of an entry, the ledger accounts and the pattern's method
 * table.  Posting is in post.c, balances in position.c, the committer in
 * commit.c, the audit in audit.c, the limits (max_balance) in limit.c,
 * partial posts of holds in hold.c, balancing legs in balancing.c, an
 * entry's time (set by the insert that takes its seqIds: no step of its
 * own) in time.c.
 *
 * An entry is one immutable document with all its legs, so it is never
 * half applied: there is no multi-document step at all.  Each leg takes
 * its account's next seqId; the unique index {changes.account,
 * changes.seqId} lets only one entry hold a given (account, seqId), so a
 * poster that derived its balance check from seqIds 1..n and inserted
 * n+1 has seen every leg before its own: whoever loses the race derives
 * again (post.c).
 *
 *             post                          commit (worker)
 *   (none) ---------> posted/uncommitted ------------------> posted/committed
 *     |                                                     (legs count)
 *     | post --pending
 *     v          post-pending
 *   pending/uncommitted ------> posted/uncommitted --commit--> ...
 *     |   |
 *     |   +--void--> voided/uncommitted ---commit--> voided/committed
 *     +--expire (worker, recover)--> expired/uncommitted --commit--> ...
 *
 *   transition                 function                 fault point
 *   (account)                  dtx_ledger_account_create ledger.account.create
 *   (account limit)            dtx_ledger_account_limit ledger.account.limit
 *   (insert entry)             dtx_ledger_post          ledger.post
 *   (insert reversal)          dtx_ledger_reverse       ledger.reverse
 *   pending -> posted          dtx_ledger_post_pending  ledger.pending.post
 *   pending -> voided          dtx_ledger_void          ledger.pending.void
 *   pending -> posted (partly) dtx_ledger_post_partial  ledger.pending.partial
 *     or voided (all 0)        (hold.c: "amounts")
 *   pending -> expired         dtx__lg_expire           ledger.expire
 *   uncommitted -> committed   dtx__lg_commit,          ledger.commit
 *                              run_round (a level: one bulk write)
 *   (cache advance)            dtx__lg_advance,         ledger.cache
 *                              advance_all (one bulk write)
 *   (none) -> closed/closed    dtx_ledger_account_close ledger.account.close
 *                              (close.c: the account's last seqId; never
 *                              moves, never committed)
 *
 * Invariants (DTX_ASSERT checks them where a step can, in every build;
 * dtx_audit checks the store, and entry_fits below the fields that go
 * with each state, after every move in debug builds):
 *  L1 Each entry's legs are 2..128 distinct accounts with non-zero int64
 *     values summing to zero; so all posted legs together sum to zero.
 *  L2 Each account's seqIds are 1, 2, ..., head: unique (the index) and
 *     dense (a poster takes head + 1 only after reading head; entries are
 *     never deleted -- the delete guard refuses it -- and a voided or
 *     expired entry keeps its seqIds, its legs just never count).
 *  L3 For every debit leg k that is posted or pending, the available
 *     balance through k -- posted legs up to k minus pending debits up to
 *     k -- is >= the min_balance it was checked against (recorded on the
 *     leg as "min").  Resolving an earlier pending entry never lowers it:
 *     posting moves a held debit into the balance, voiding and expiry
 *     release it, a posted credit only adds.  Likewise for every credit
 *     leg k posted or pending, the posted legs up to k plus the pending
 *     credits up to k are <= the max_balance it was checked against
 *     ("max"; limit.c): resolving never raises that sum either (posting
 *     moves a held credit into the balance, voiding releases it, a posted
 *     debit only takes away).
 *  L4 Every balance stays within int64 whatever the pending entries
 *     become: a post checks posted - pending debits + debit >= INT64_MIN
 *     and posted + pending credits + credit <= INT64_MAX at its seqId, so
 *     each later seqId's bounds contain every earlier outcome.
 *  L5 A state leaves pending at most once (post, void, a partial post
 *     and expire all demand state "pending" in their filter), and nothing
 *     else changes an entry's legs or state.  A partial post (hold.c)
 *     records what each leg posted as "amounts" (H1, H2 there).  Every
 *     insert of an entry stores "legs_sha", the SHA-256 of its legs as
 *     posted (dtx__lg_legs_sha: _id and each leg's account, value, seqId,
 *     min, max); the audit recomputes it (legs_changed), and demands it on
 *     every entry of an account from its "legs_sha_from" (set at its
 *     creation) or its first sealed entry on (legs_sha_missing), so an
 *     edit of the legs that keeps their sum is seen, committed or not.
 *  L6 An entry is committed only when resolved and every earlier seqId of
 *     each of its accounts is committed (checking each leg's predecessor
 *     suffices, by induction); commit order is insertion order's
 *     topology, so it never deadlocks: an entry's predecessors were all
 *     inserted before it.
 *  L7 cache {balance, seqId}: every entry up to seqId is committed and
 *     balance is the sum of their posted legs; it advances only over
 *     committed entries, conditioned on the seqId it advances from.
 *  L8 Only these steps change an entry or an account's protocol fields:
 *     L2, L3, L6 and L7 are about other documents, so a plain write (the
 *     generic document commands) may change none and insert nothing (the
 *     transition rules below, "scope": "plain"); the rules every writer
 *     obeys state L1 and L5-L7 as one document shows them.
 *  L9 An entry's time "at" is set by its insert and never changes; per
 *     account, times never decrease in seqId order, and an import lands
 *     only after every entry of its accounts (time.c, T1 and T2).
 *  L10 A closed account's close entry holds its last seqId: no leg after
 *     it, and its balance there is 0 with no pending entry before it
 *     (close.c checks both and takes the seqId in one insert).
 */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"
#include "util/sha256.h"

const dtx__kind_t dtx__lg_state_kind = {DTX_LEDGER_ENTRIES, "state", NULL};
const dtx__kind_t dtx__lg_proc_kind = {DTX_LEDGER_ENTRIES, "proc", NULL};

const json_t *dtx__lg_leg(const json_t *e, const char *account) {
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(e, "changes"), i, l) {
    if (dtx__str_is(l, "account", account))
      return l;
  }
  return NULL;
}

/* ---- the legs' digest (L5) ------------------------------------------------------ */

static size_t put_u32(unsigned char *p, size_t n) {
  for (int i = 0; i < 4; i++)
    p[i] = (unsigned char)(n >> (24 - 8 * i));
  return 4;
}

/* An int64 field of leg l as 9 bytes: 1 and its big-endian bytes, or 0
 * and zeros when absent; -1 when present but no integer. */
static int put_field(unsigned char *p, const json_t *l, const char *key) {
  json_t *v = json_object_get(l, key);
  if (v && !json_is_integer(v))
    return -1;
  uint64_t x = v ? (uint64_t)json_integer_value(v) : 0;
  p[0] = v != NULL;
  for (int i = 0; i < 8; i++)
    p[1 + i] = (unsigned char)(x >> (56 - 8 * i));
  return 9;
}

/* The encoding is a tag, then the _id and each leg's account as a 4-byte
 * length and its bytes, the leg count, and each leg's value, seqId, min
 * and max as put_field puts them: every field has a fixed place or a
 * stated length, so two different entries never encode alike. */
int dtx__lg_legs_sha(const json_t *e, char out[65]) {
  static const char tag[] = "doctx ledger legs 1";
  json_t *changes = json_object_get(e, "changes"), *l;
  json_t *id = json_object_get(e, "_id");
  size_t i, n = sizeof tag + 8 + json_string_length(id);
  if (!json_is_string(id) || !json_is_array(changes))
    return LG_LEGS_MALFORMED;
  json_array_foreach(changes, i, l) {
    if (!json_is_string(json_object_get(l, "account")))
      return LG_LEGS_MALFORMED;
    n += 4 + json_string_length(json_object_get(l, "account")) + 4 * 9;
  }
  unsigned char *b = malloc(n), *p = b;
  if (!b)
    return DTX_ENOMEM;
  memcpy(p, tag, sizeof tag);
  p += sizeof tag;
  p += put_u32(p, json_string_length(id));
  memcpy(p, json_string_value(id), json_string_length(id));
  p += json_string_length(id);
  p += put_u32(p, json_array_size(changes));
  int bad = 0;
  json_array_foreach(changes, i, l) {
    json_t *acc = json_object_get(l, "account");
    p += put_u32(p, json_string_length(acc));
    memcpy(p, json_string_value(acc), json_string_length(acc));
    p += json_string_length(acc);
    static const char *const keys[] = {"value", "seqId", "min", "max"};
    for (int k = 0; k < 4 && !bad; k++) {
      int w = put_field(p, l, keys[k]);
      bad = w < 0 || (k < 2 && !p[0]); /* value and seqId are required */
      p += w < 0 ? 0 : w;
    }
  }
  DTX_ASSERT(bad || (size_t)(p - b) == n, "L5");
  if (!bad)
    dtx__sha256_hex(b, n, out);
  free(b);
  return bad ? LG_LEGS_MALFORMED : 0;
}

int dtx__lg_seal(json_t *doc) {
  char hex[65];
  int rc = dtx__lg_legs_sha(doc, hex);
  DTX_ASSERT(rc != LG_LEGS_MALFORMED, "L1"); /* the insert paths build
                                                 well-formed legs */
  if (rc)
    return rc;
  return json_object_set_new(doc, "legs_sha", json_string(hex)) ? DTX_ENOMEM
                                                                 : 0;
}

/* ---- set-up: indexes and rules ------------------------------------------------ */

static const dtx__index_def_t indexes[] = {
    /* L2: one entry per (account, seqId); also how a position is read */
    {DTX_LEDGER_ENTRIES, "{\"changes.account\":1,\"changes.seqId\":1}", 1, 0},
    /* a posted entry is reversed at most once */
    {DTX_LEDGER_ENTRIES, "{\"reverses\":1}", 1, 1},
    /* the committer's and the expiry's scans: the committer's round
     * walks the first uncommitted entries in its sort order {created,
     * _id} (commit.c), which an index of exactly those fields after proc
     * serves without reading the backlog; {proc, created} (before
     * 2026-11-29) stays in older stores, unused */
    {DTX_LEDGER_ENTRIES, "{\"proc\":1,\"created\":1,\"_id\":1}", 0, 0},
    {DTX_LEDGER_ENTRIES, "{\"state\":1,\"expires_at\":1}", 0, 0},
    /* ledger entries --ref (meta.c; dtx_ledger_unique_refs adds a unique
     * one on the same key) */
    {DTX_LEDGER_ENTRIES, "{\"ref\":1}", 0, 1},
    /* `ledger list` (all accounts) pages along it from an --after's place
     * (dtx__kit_list's keyset) */
    {DTX_LEDGER_ENTRIES, "{\"created\":1,\"_id\":1}", 0, 0},
    {NULL, NULL, 0, 0},
};

/* The documents the protocol writes, and nothing else: the generic
 * document commands cannot store an entry the ledger would misread, nor
 * delete one (an entry is never deleted: a deleted entry would open a gap
 * in its accounts' seqIds).  What the validator cannot see -- a leg's
 * value edited to another non-zero integer -- the audit finds (L1). */
#define LEG_SCHEMA                                                           \
  "{\"bsonType\":\"object\",\"required\":[\"account\",\"value\",\"seqId\"]," \
  "\"additionalProperties\":false,\"properties\":{"                         \
  "\"account\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128}," \
  "\"value\":{\"bsonType\":\"long\"},"                                        \
  "\"seqId\":{\"bsonType\":\"long\",\"minimum\":1},"                        \
  "\"min\":{\"bsonType\":\"long\"},"                                   \
  "\"max\":{\"bsonType\":\"long\"}}}"

static const char entry_validator[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"changes\",\"state\",\"proc\",\"created\"],"
    "\"additionalProperties\":false,\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\"},"
    "\"changes\":{\"bsonType\":\"array\",\"minItems\":1,\"maxItems\":128,"
    "\"items\":" LEG_SCHEMA "},"
    "\"state\":{\"enum\":[\"pending\",\"posted\",\"voided\",\"expired\","
    "\"closed\"]},"
    "\"proc\":{\"enum\":[\"uncommitted\",\"committed\",\"closed\"]},"
    "\"created\":{\"bsonType\":\"long\"},"
    "\"updated\":{\"bsonType\":\"long\"},"
    "\"expires_at\":{\"bsonType\":\"long\"},"
    "\"resolved_at\":{\"bsonType\":\"long\"},"
    "\"committed_at\":{\"bsonType\":\"long\"},"
    "\"reverses\":{\"bsonType\":\"string\"},"
    "\"amounts\":{\"bsonType\":\"array\",\"maxItems\":128,"
    "\"items\":{\"bsonType\":\"long\"}},"
    "\"post_id\":{\"bsonType\":\"string\"},"
    "\"meta\":{\"bsonType\":\"object\"},"
    "\"ref\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":256},"
    /* the entry's time (time.c): 0 .. DTX_LEDGER_MAX_TIME_MS */
    "\"at\":{\"bsonType\":\"long\",\"minimum\":0,"
    "\"maximum\":253402300799999},"
    "\"imported\":{\"enum\":[true]},"
    /* the digest of its legs as posted (L5) */
    "\"legs_sha\":{\"bsonType\":\"string\",\"pattern\":\"^[0-9a-f]{64}$\"},"
    /* the asset its accounts are in (asset.c) */
    "\"asset\":{\"bsonType\":\"string\","
    "\"pattern\":\"^[A-Z0-9_]{1,16}/([0-9]|1[0-8])$\"}},"
    /* an entry: 2.. legs of non-zero value; an account's close (close.c):
     * one leg of value 0, closed and never committed */
    "\"anyOf\":[{\"properties\":{"
    "\"state\":{\"enum\":[\"pending\",\"posted\",\"voided\",\"expired\"]},"
    "\"proc\":{\"enum\":[\"uncommitted\",\"committed\"]},"
    "\"changes\":{\"minItems\":2,\"items\":{\"properties\":{"
    "\"value\":{\"not\":{\"enum\":[0]}}}}}}},"
    "{\"properties\":{\"state\":{\"enum\":[\"closed\"]},"
    "\"proc\":{\"enum\":[\"closed\"]},"
    "\"changes\":{\"maxItems\":1,\"items\":{\"properties\":{"
    "\"value\":{\"enum\":[0]}}}}}}]},"
    /* a pending entry is never committed (L6) */
    "\"$or\":[{\"proc\":\"uncommitted\"},{\"state\":{\"$ne\":\"pending\"}}]}";

static const char account_validator[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"min_balance\",\"cache\"],"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\"},"
    "\"min_balance\":{\"bsonType\":[\"long\",\"null\"]},"
    "\"max_balance\":{\"bsonType\":[\"long\",\"null\"]},"
    "\"asset\":{\"bsonType\":\"string\","
    "\"pattern\":\"^[A-Z0-9_]{1,16}/([0-9]|1[0-8])$\"},"
    "\"cache\":{\"bsonType\":\"object\",\"required\":[\"balance\",\"seqId\"],"
    "\"additionalProperties\":false,\"properties\":{"
    "\"balance\":{\"bsonType\":\"long\"},"
    "\"seqId\":{\"bsonType\":\"long\",\"minimum\":0}}},"
    "\"created\":{\"bsonType\":\"long\"},"
    "\"" LG_SHA_FROM "\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"updated\":{\"bsonType\":\"long\"}}}}";

/* Matches no document: entries and accounts are never deleted. */
static const char never[] = "{\"_id\":{\"$exists\":false}}";

/* What an update may change (docs/validation.md, "Transition rules";
 * docs/ledger.md, "What a plain write may change").  The first objects
 * hold for every writer, the protocol's steps included: an entry's legs
 * never change and its state leaves pending at most once (L1, L5); it is
 * committed once, never while pending, and a committed entry never
 * changes again (L6); a cache only moves forward (L7).  The last object
 * ("scope": "plain") is for the generic document commands: whether a
 * commit is due depends on the other entries of its accounts (L6), a
 * cache on the entries it covers (L7), a post's seqIds and limits on the
 * account's history (L2, L3), so none of these can be judged from one
 * document, and a plain write may change no protocol field nor insert an
 * entry or an account: they change through the ledger's own commands
 * (post, post-pending, void, reverse, account create, account limit);
 * only the ledger's own steps are exempt ("steps"). */
#define WHY_PLAIN(what)                                                     \
  "\"why\":\"" what " change only through doctx ledger commands "            \
  "(docs/ledger.md)\""
#define RESOLVE(name, to)                                                   \
  "{\"name\":\"" name "\",\"from\":{\"state\":\"" LG_PENDING "\"},"          \
  "\"to\":{\"state\":\"" to "\",\"proc\":\"" LG_UNCOMMITTED "\","               \
  "\"resolved_at\":{\"$exists\":true}}}"
#define COMMIT(st)                                                          \
  "{\"name\":\"commit " st "\",\"from\":{\"state\":\"" st "\",\"proc\":\""      \
  LG_UNCOMMITTED "\"},\"to\":{\"state\":\"" st "\",\"proc\":\"" LG_COMMITTED     \
  "\",\"committed_at\":{\"$exists\":true}}}"
static const char entry_moves[] =
    "[{\"immutable\":[\"changes\",\"created\",\"expires_at\",\"reverses\","
    "\"meta\",\"ref\",\"at\",\"imported\",\"asset\",\"legs_sha\"],"
    "\"insert\":{\"$or\":[{\"proc\":\"" LG_UNCOMMITTED "\",\"state\":{\"$in\":"
    "[\"" LG_POSTED "\",\"" LG_PENDING "\"]}},{\"proc\":\"" LG_CLOSED "\","
    "\"state\":\"" LG_CLOSED "\"}]},"
    "\"moves\":[" RESOLVE("post", LG_POSTED) "," RESOLVE("void", LG_VOIDED) ","
    RESOLVE("expire", LG_EXPIRED) "," COMMIT(LG_POSTED) "," COMMIT(LG_VOIDED)
    "," COMMIT(LG_EXPIRED) "]},"
    "{\"scope\":\"plain\",\"steps\":[\"ledger\"],\"insert\":false,"
    "\"immutable\":[\"changes\",\"state\",\"proc\",\"created\",\"updated\","
    "\"expires_at\",\"resolved_at\",\"committed_at\",\"reverses\",\"meta\","
    "\"ref\",\"amounts\",\"post_id\",\"at\",\"imported\",\"legs_sha\"],"
    WHY_PLAIN("ledger entries") "}]";
#undef RESOLVE
#undef COMMIT
static const char account_moves[] =
    "[{\"immutable\":[\"created\",\"asset\",\"" LG_SHA_FROM "\"],"
    "\"increasing\":[\"cache.seqId\"],"
    "\"insert\":{\"cache.seqId\":0,\"cache.balance\":0}},"
    "{\"scope\":\"plain\",\"steps\":[\"ledger\"],\"insert\":false,"
    "\"immutable\":[\"min_balance\",\"max_balance\",\"cache\",\"created\","
    "\"updated\",\"asset\",\"" LG_SHA_FROM "\"],"
    WHY_PLAIN("ledger accounts") "}]";
#undef WHY_PLAIN

/* The shape of an entry (kit.h, dtx__shape_def_t): the stamps each move
 * leaves (L5, L6).  A pending entry has its timeout and was neither
 * resolved nor committed; a voided or expired one was pending, and was
 * resolved; a committed one has when. */
static int entry_fits(const json_t *e, char *why, size_t n) {
  int exp = json_is_integer(json_object_get(e, "expires_at"));
  int res = json_object_get(e, "resolved_at") != NULL;
  int com = json_object_get(e, "committed_at") != NULL;
  const char *st = dtx__str(e, "state") ? dtx__str(e, "state") : "?";
  if (dtx__state_is(e, LG_PENDING) ? !exp || res || com
      : (dtx__state_is(e, LG_VOIDED) || dtx__state_is(e, LG_EXPIRED)) &&
            (!exp || !res))
    return dtx__shape_bad(why, n, "state %s, but expires_at %s, resolved_at "
                          "%s, committed_at %s (L5)", st, exp ? "set" : "not",
                          res ? "set" : "not", com ? "set" : "not");
  if (dtx__str_is(e, "proc", LG_COMMITTED) != com)
    return dtx__shape_bad(why, n, "proc %s but committed_at %s (L6)",
                          dtx__str(e, "proc") ? dtx__str(e, "proc") : "?",
                          com ? "set" : "not");
  if (res && !exp)
    return dtx__shape_bad(why, n, "resolved, yet never pending (L5)");
  if (dtx__state_is(e, LG_CLOSED) && (exp || res || com))
    return dtx__shape_bad(why, n, "an account's close, but expires_at %s, "
                          "resolved_at %s, committed_at %s (L10)",
                          exp ? "set" : "not", res ? "set" : "not",
                          com ? "set" : "not");
  if (json_object_get(e, "amounts") &&
      (!dtx__state_is(e, LG_POSTED) || !exp ||
       json_array_size(json_object_get(e, "amounts")) !=
           json_array_size(json_object_get(e, "changes"))))
    return dtx__shape_bad(why, n, "amounts on an entry that is not a posted "
                          "hold, or not one per leg (H2)");
  return 0;
}

static const dtx__shape_def_t shapes[] = {{DTX_LEDGER_ENTRIES, entry_fits},
                                          {NULL, NULL}};

static const dtx__rules_def_t rules[] = {
    {DTX_LEDGER_ENTRIES, entry_validator, never, entry_moves},
    {DTX_LEDGER_ACCOUNTS, account_validator, never, account_moves},
    {NULL, NULL, NULL, NULL},
};

int dtx__lg_setup(dtx_store_t *st) {
  return dtx__kit_ensure(st, &dtx__ledger_pattern);
}

/* ---- accounts ------------------------------------------------------------------ */

static json_t *limit_json(const dtx_ledger_limit_t *l) {
  return l && l->no_min_balance
             ? json_null()
             : json_integer((json_int_t)(l ? l->min_balance : 0));
}

static int account_create(dtx__exec_t *ex, const char *id,
                          const dtx_ledger_limit_t *limit, const char *asset,
                          json_t **out) {
  int rc;
  if ((rc = dtx__check_ident("account id", id)) ||
      (rc = dtx__lg_limits_check(limit, DTX_LEDGER_LIMIT_MIN |
                                 DTX_LEDGER_LIMIT_MAX)) ||
      (rc = dtx__lg_check_asset(asset)) || (rc = dtx__lg_setup(ex->st)))
    return rc;
  int64_t now = dtx__now_ms();
  /* Every entry of an account this build creates carries its digest
   * from seqId 1 on (L5). */
  json_t *doc = json_pack("{s:s,s:o,s:{s:i,s:i},s:I,s:I,s:I}", "_id", id,
                          "min_balance", limit_json(limit), "cache", "balance",
                          0, "seqId", 0, "created", (json_int_t)now, "updated",
                          (json_int_t)now, LG_SHA_FROM, (json_int_t)1);
  if (!doc)
    return DTX_ENOMEM;
  if (limit && limit->has_max_balance) /* absent: no upper limit */
    json_object_set_new(doc, "max_balance",
                        json_integer((json_int_t)limit->max_balance));
  if (asset) /* fixed from now on (asset.c) */
    json_object_set_new(doc, "asset", json_string(asset));
  rc = dtx__kit_insert(ex, "ledger.account.create", DTX_LEDGER_ACCOUNTS, doc);
  if (rc == DTX_EDUPKEY)
    rc = dtx__err(DTX_EDUPKEY, "ledger account '%s' exists", id);
  if (rc == 0 && out)
    *out = json_incref(doc);
  json_decref(doc);
  return rc;
}

int dtx_ledger_account_id_check(const char *id) {
  dtx__err_clear();
  return dtx__check_ident("account id", id);
}

int dtx_ledger_entry_id_check(const char *id) {
  dtx__err_clear();
  return dtx__check_ident("entry id", id);
}

int dtx_ledger_account_create(dtx_store_t *st, const char *id,
                              const dtx_ledger_limit_t *limit, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, account_create(&ex, id, limit, NULL, out));
}

int dtx_ledger_account_create_ex(dtx_store_t *st, const char *id,
                                 const dtx_ledger_account_opts_t *opts,
                                 json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, account_create(&ex, id, opts ? opts->limit : NULL,
                                          opts ? opts->asset : NULL, out));
}

int dtx__lg_account(dtx__exec_t *ex, const char *id, json_t **out) {
  int rc = dtx__kit_get(ex, DTX_LEDGER_ACCOUNTS, id, out);
  return rc == DTX_ENOTFOUND ? dtx__err(DTX_ENOACCOUNT, "no ledger account '%s'",
                                        id)
                             : rc;
}

int dtx_ledger_account_limit(dtx_store_t *st, const char *id,
                             const dtx_ledger_limit_t *limit, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  json_t *acct = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = dtx__lg_account_limits(&ex, id, DTX_LEDGER_LIMIT_MIN, limit,
                                  &acct);
  if (out)
    *out = acct;
  else
    json_decref(acct);
  return dtx__call_end(&c, rc);
}

/* ---- the method table ------------------------------------------------------------ */

static const char *const collections[] = {DTX_LEDGER_ACCOUNTS,
                                          DTX_LEDGER_ENTRIES, NULL};

static const char *const fault_points[] = {
    "ledger.account.create",
    "ledger.account.limit",
    "ledger.post",
    "ledger.reverse",
    "ledger.pending.post",
    "ledger.pending.void",
    "ledger.pending.partial",
    "ledger.expire",
    "ledger.commit",
    "ledger.cache",
    "ledger.account.close",
    NULL,
};

const dtx__pattern_t dtx__ledger_pattern = {
    .name = "ledger",
    .kind = &dtx__lg_proc_kind,
    .collections = collections,
    .indexes = indexes,
    .fault_points = fault_points,
    .claim_next = dtx__lg_claim_next,
    .drive = dtx__lg_drive,
    .recover = dtx__lg_recover,
    .audit = dtx__lg_audit,
    .rules = rules,
    .shapes = shapes,
    .count = "entries", /* a claim commits a round (commit.c) */
};
