/* interest.c -- daily interest settlement, the last of LeanCloud's
 * scenarios (docs/scenarios.md): every account with a positive
 * balance and a limit earns floor(balance * rate_ppm / 1,000,000) for a
 * day, credited exactly once per (account, day) however often the run is
 * crashed and repeated.  It adds no protocol of its own: each credit is a
 * two-phase transfer (src/txn/transfer/) from the settlement account with
 * the deterministic id interest:DAY:ACCOUNT (interest-sha256:DAY:HEX when
 * that would pass 128 bytes: credit_id()), so transfer idempotency is
 * the once-only guarantee and the transfer audit's conservation covers
 * every credit.
 *
 *   per eligible account A (pages of accounts by _id, read first), for
 *   attempt k = 1, 2, ... (id interest:DAY:A, then interest.K:DAY:A):
 *
 *     attempt k exists? --yes--> finish it if not terminal (never
 *        | no                    recomputed): succeeded -> already;
 *        |                       failed -> attempt k+1, same amount
 *        v
 *     amount = floor(balance_read * rate / 1e6)  (k = 1; 0: nothing due)
 *        |   interest.credit
 *        v
 *     submit attempt k (settlement -> A, amount)  --CONFLICT--> a
 *        |                       concurrent run recorded it: finish that
 *        v
 *     run it (transfer.*): succeeded -> credited; failed -> attempt k+1
 *
 *   transition                    function          fault point
 *   settlement created            dtx__tx_settlement interest.settlement
 *   the day's run record inserted record_day()      interest.day
 *   (none) -> credit recorded     credit_one()      interest.credit
 *   credit recorded -> terminal   dtx_transfer_run  transfer.*
 *
 * The day's run record.  The credits are plain transfers and carry no
 * rate, so a rerun of a day with another --rate-ppm (or settlement) would
 * pay the accounts not yet credited at the new rate beside those paid at
 * the old one.  The first run of a day inserts {_id: DAY, rate_ppm,
 * settlement} into interest_days before any credit; every run compares
 * its parameters with it and refuses others (CONFLICT, nothing paid), as
 * a transfer id reused with other parameters is.  It is inserted, never
 * updated, and never deleted (delete guard), so two first runs racing
 * with different rates are told apart too: one insert wins, the other
 * reads it.  Days run before the record existed have none: their first
 * rerun records its own parameters (unjudged).
 *
 * Who counts a credit.  Each run executes its transfers under an owner of
 * its own (the caller's, or host:pid, plus a nonce), so a succeeded
 * credit names the run whose executor claimed and finished it: that run
 * counts it as credited, every other run as already there.  Two runs that
 * submit the same credit at once thus count it once between them, and
 * their totals add up to what the settlement paid (a credit finished by
 * recovery, which takes it over under its own name, is counted by no run).
 *
 * Why attempts.  A credit whose run was cut short before it committed is
 * rolled back by the transfer protocol (failed, "abandoned by its
 * executor") -- by the rerun, once its lease lapsed, or by doctx recover.
 * Its id is spent, yet the day's interest is still owed: the next
 * attempt, interest.2:DAY:A, credits the same amount.  An attempt is made
 * only when every earlier one is failed (terminal), so at most one
 * attempt per (account, day) ever succeeds; the prefix "interest.K:"
 * cannot be the start of a first attempt's id, whatever the account id
 * holds.  After MAX_ATTEMPTS failures the account is reported failed.
 * A transfer found under an attempt's id that is not a credit from the
 * settlement to the account (of the failed attempt's amount) was put
 * there by someone else, and a first attempt missing while a later one
 * exists was deleted by hand: both are refused for that account, never
 * paid, counted or recomputed (CONFLICT, after the other accounts).
 *
 * Refusals.  Any error of one account's credit that is not the store's
 * (stops_run()) -- those above, an overflowing balance, an account id the
 * transfers refuse -- refuses that account alone: the run goes on, lists
 * it in "refusals" and ends CONFLICT (or OVERFLOW) after the others, so
 * an error exit never hides credits made, and INVAL always means nothing
 * was written (every argument, and the day's record, are checked before
 * the first write).
 *
 * Which balance.  The balance an account's interest is computed from is
 * the one read BEFORE its credit exists: the account is read, then the
 * transfer looked up; a credit recorded between the two is found and
 * never recomputed.  So a rerun never compounds on the same day's credit,
 * and a crashed-then-rerun run credits exactly what an uninterrupted run
 * does (given no other transfers meanwhile: each account's amount is
 * fixed by its own balance when its credit is first recorded).
 *
 * Invariants (DTX_ASSERT checks N1 in every build; transfer idempotency
 * gives N2):
 *  N1 0 <= amount <= balance (rate <= 1,000,000 ppm), computed exactly
 *     in int64 (no intermediate product can overflow);
 *  N2 at most one credit per (account, day) succeeds: attempt k+1 is
 *      submitted only when attempt k has failed, and each attempt's id
 *      is unique (transfer idempotency). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/kit/kit.h"
#include "txn/transfer/transfer.h"
#include "util/assert.h"
#include "util/err.h"
#include "util/sha256.h"

#define PAGE 200
#define SETTLEMENT "settlement"
#define MAX_ATTEMPTS 5
#define DAYS "interest_days" /* the days' run records */
#define MAX_LISTED 20 /* refusals listed in a run's summary */

extern const dtx__pattern_t dtx__interest_pattern;

/* YYYY-MM-DD, a date of the proleptic Gregorian calendar, year >= 1. */
static int check_day(const char *day) {
  static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int ok = day && strlen(day) == 10 && day[4] == '-' && day[7] == '-';
  for (int i = 0; ok && i < 10; i++)
    ok = i == 4 || i == 7 || (day[i] >= '0' && day[i] <= '9');
  if (ok) {
    int y = (day[0] - '0') * 1000 + (day[1] - '0') * 100 +
            (day[2] - '0') * 10 + (day[3] - '0');
    int m = (day[5] - '0') * 10 + (day[6] - '0');
    int d = (day[8] - '0') * 10 + (day[9] - '0');
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    ok = y >= 1 && m >= 1 && m <= 12 && d >= 1 &&
         d <= mdays[m - 1] + (m == 2 && leap);
  }
  return ok ? 0 : dtx__err(DTX_EINVAL, "interest day '%s': expected a real "
                           "calendar date YYYY-MM-DD", day ? day : "(null)");
}

/* floor(b * r / 1e6) for 0 <= b, 0 <= r <= 1e6, without a wider type:
 * (b / 1e6) * r <= b, and (b % 1e6) * r < 1e12. */
static int64_t interest_of(int64_t b, int64_t r) {
  DTX_ASSERT(b >= 0 && r >= 0 && r <= DTX_INTEREST_MAX_PPM, "N1");
  int64_t q = b / 1000000, m = b % 1000000;
  int64_t v = q * r + m * r / 1000000;
  DTX_ASSERT(v >= 0 && v <= b, "N1");
  return v;
}

/* The settlement account, created on first use with no limit; one that
 * exists with a limit would run dry mid-day: refused. */
typedef struct run {
  dtx__exec_t ex; /* its owner: the run's own, with a nonce */
  const dtx_interest_req_t *req;
  const char *settle;
  dtx_exec_opts_t opts; /* the caller's, with the run's owner */
  int64_t accounts, credited, already, pending, skipped, zero, failed, total;
  int64_t refused; /* accounts not credited for a reason of their own */
  int first;        /* the first one's error */
  char why[512]; /* its detail: later accounts' calls overwrite the thread's */
  json_t *refusals; /* the first MAX_LISTED: {account, error, detail} */
} run_t;

/* Records that account acc is not credited (rc, with this thread's
 * detail); the run goes on with the others and says so at its end. */
static void refuse(run_t *r, const char *acc, int rc) {
  const char *d = dtx_errdetail();
  if (!r->refused++) {
    r->first = rc;
    snprintf(r->why, sizeof r->why, "%s", d && *d ? d : dtx_strerror(rc));
  }
  if (json_array_size(r->refusals) < MAX_LISTED)
    json_array_append_new(r->refusals,
                          json_pack("{s:s,s:s,s:s}", "account", acc, "error",
                                    dtx_errname(rc), "detail",
                                    d && *d ? d : dtx_strerror(rc)));
  dtx__err_clear();
}

/* Errors that are the store's, not one account's: they stop the run
 * (exit 4, run it again); any other error of an account's credit is that
 * account's alone (refuse). */
static int stops_run(int rc) {
  return rc == DTX_ENOMEM || rc == DTX_EBUSY || rc == DTX_EUNAVAILABLE ||
         rc == DTX_EBACKEND || rc == DTX_EFAULT || rc == DTX_ELIMIT;
}

/* The transfer id of attempt k: interest:DAY:ACCOUNT for k = 1,
 * interest.K:DAY:ACCOUNT after (a prefix no first attempt can have,
 * whatever the account id holds).  Where that would pass the 128 bytes a
 * transfer id may have (an account id of 108 bytes or more; 106 for
 * attempts 2..5), the account id is replaced by its SHA-256 in hex:
 * interest-sha256:DAY:HEX, interest-sha256.K:DAY:HEX (at most 93 bytes;
 * the '-' after "interest" is in no other form, and two accounts share one
 * only by a SHA-256 collision).  A function of (day, k, account) alone,
 * so every run finds the same id (docs/scenarios.md "Credit ids"). */
static void credit_id(char *buf, size_t n, const run_t *r, int k,
                      const char *acc) {
  char kk[16] = "", hex[65];
  if (k > 1)
    snprintf(kk, sizeof kk, ".%d", k);
  int len = snprintf(buf, n, "interest%s:%s:%s", kk, r->req->day, acc);
  if (len >= 0 && len <= 128)
    return;
  dtx__sha256_hex(acc, strlen(acc), hex);
  len = snprintf(buf, n, "interest-sha256%s:%s:%s", kk, r->req->day, hex);
  DTX_ASSERT(len > 0 && len <= 128, "N2"); /* an id a transfer takes */
}

/* Drives an existing attempt t (stolen) to its end; 1 in *again when it
 * failed (the next attempt is due, for its amount *amount).  A succeeded
 * credit is this run's (credited) when its executor finished it: the
 * transfer names its owner, which no other run shares. */
static int finish(run_t *r, const char *tid, json_t *t, int64_t *amount,
                  int *again) {
  int rc = 0;
  *again = 0;
  if (!dtx__state_is(t, "succeeded") && !dtx__state_is(t, "failed")) {
    json_decref(t);
    t = NULL;
    rc = dtx_transfer_run(r->ex.st, tid, &r->opts, &t);
  }
  if (rc == 0) {
    *amount = dtx__int(t, "amount");
    if (dtx__state_is(t, "succeeded")) {
      if (dtx__str_is(t, "owner", r->ex.owner)) {
        r->credited++;
        r->total += *amount;
      } else {
        r->already++;
      }
    } else if (dtx__state_is(t, "failed")) {
      *again = 1;
    } else {
      r->pending++; /* held by a live executor; recovery finishes it */
    }
  }
  json_decref(t);
  return rc;
}

/* A transfer found under attempt k's id is this day's credit only if it
 * moves money from the settlement to the account, and (after a failed
 * attempt) the amount that attempt carried.  Anything else was recorded
 * under the id by someone else (`doctx transfer poor A 500000 --id
 * interest:DAY:A`, which fails): finishing it, counting it as paid, or
 * carrying its amount into the next attempt would pay the wrong sum.
 * Refused (CONFLICT) for this account alone, after the others. */
static int check_credit(run_t *r, const char *tid, const json_t *t,
                        const char *acc, int64_t amount) {
  const char *from = dtx__str(t, "from"), *to = dtx__str(t, "to");
  int64_t a = dtx__int(t, "amount");
  if (from && to && strcmp(from, r->settle) == 0 && strcmp(to, acc) == 0 &&
      a >= 1 && (amount < 0 || a == amount))
    return 0;
  return dtx__err(DTX_ECONFLICT, "interest for account '%s': transfer %s "
                  "exists but is not its credit (from '%s' to '%s', "
                  "amount %lld; expected from '%s'%s)", acc, tid,
                  from ? from : "?", to ? to : "?", (long long)a, r->settle,
                  amount < 0 ? "" : ", the amount of the failed attempt");
}

/* Attempt 1 is missing: is a later one there?  Then attempt 1 existed,
 * failed, and was deleted by hand (the transfers' delete guard lets failed
 * ones go); recording it again -- from a balance that may already hold the
 * later attempt's credit -- would pay the day twice once the account's
 * tombstone of it was cleared.  Refused (CONFLICT) for this account. */
static int later_attempt(run_t *r, const char *acc) {
  char tid[160];
  json_t *ids = json_array(), *arr = NULL;
  for (int k = 2; ids && k <= MAX_ATTEMPTS; k++) {
    credit_id(tid, sizeof tid, r, k, acc);
    json_array_append_new(ids, json_string(tid));
  }
  json_t *q = ids ? json_pack("{s:{s:o}}", "_id", "$in", ids) : NULL;
  int rc = q ? dtx__kit_find_n(&r->ex, DTX_TRANSFERS, q, NULL, 1, &arr)
             : DTX_ENOMEM;
  json_decref(q);
  if (rc == 0 && json_array_size(arr) > 0) {
    const char *later = dtx__str(json_array_get(arr, 0), "_id");
    credit_id(tid, sizeof tid, r, 1, acc);
    rc = dtx__err(DTX_ECONFLICT, "interest for account '%s': its first "
                  "credit %s is gone but %s exists (deleted by hand?): not "
                  "credited again", acc, tid, later ? later : "?");
  }
  json_decref(arr);
  return rc;
}

/* Credits account acc's interest for the day (or finds it credited).
 * An error is this account's (run_all refuses it and goes on) unless
 * stops_run() says it is the store's. */
static int credit_one(run_t *r, const char *id, int64_t bal) {
  int64_t amount = -1;
  char tid[160];
  int rc = 0, again = 1;
  for (int k = 1; rc == 0 && again && k <= MAX_ATTEMPTS; k++) {
    json_t *t = NULL;
    credit_id(tid, sizeof tid, r, k, id);
    /* Looked up after the account was read: a credit recorded since is
     * found here, and its amount is never recomputed. */
    rc = dtx_transfer_get(r->ex.st, tid, &t);
    if (rc == 0) {
      if ((rc = check_credit(r, tid, t, id, amount)) == 0)
        rc = finish(r, tid, t, &amount, &again);
      else
        json_decref(t);
      continue;
    }
    if (rc != DTX_ENOTFOUND)
      return rc;
    dtx__err_clear();
    if (amount < 0) { /* the first attempt: from the balance read */
      DTX_ASSERT(bal > 0, "N1"); /* account_one's */
      amount = interest_of(bal, r->req->rate_ppm);
      if (amount == 0) {
        r->zero++;
        return 0;
      }
      DTX_ASSERT(amount >= 1 && amount <= bal, "N1");
      if ((rc = later_attempt(r, id)))
        return rc;
      if (bal > INT64_MAX - amount)
        return dtx__err(DTX_EOVERFLOW, "interest %lld for account '%s' "
                        "would take its balance %lld past INT64_MAX",
                        (long long)amount, id, (long long)bal);
    }
    rc = dtx__kit_point("interest.credit", "recording an interest credit");
    dtx_transfer_req_t q = {.id = tid, .from = r->settle, .to = id,
                            .amount = amount};
    if (rc == 0)
      rc = dtx_transfer_submit(r->ex.st, &q, &t);
    if (rc == DTX_ECONFLICT) { /* a concurrent run, from another balance */
      dtx__err_clear();
      rc = dtx_transfer_get(r->ex.st, tid, &t);
      if (rc == 0 && (rc = check_credit(r, tid, t, id, -1))) {
        json_decref(t);
        return rc;
      }
    }
    /* Submitted by this run or a concurrent one (the same parameters
     * return the same transfer): finish() tells by who ran it. */
    if (rc == 0)
      rc = finish(r, tid, t, &amount, &again);
  }
  if (rc == 0 && again)
    r->failed++; /* MAX_ATTEMPTS attempts failed: reported, not retried */
  return rc;
}

/* One account of a page: skipped when it earns nothing, else credited;
 * an error of its own is a refusal, and the run goes on. */
static int account_one(run_t *r, const json_t *acc) {
  const char *id = dtx__str(acc, "_id");
  int64_t bal = dtx__int(acc, "balance");
  if (!id || !json_is_integer(json_object_get(acc, "balance")) ||
      !json_is_integer(json_object_get(acc, "min_balance")) || bal <= 0 ||
      strcmp(id, r->settle) == 0) {
    r->skipped++;
    return 0;
  }
  r->accounts++;
  DTX_ASSERT(bal > 0, "N1"); /* only a positive balance earns */
  int rc = credit_one(r, id, bal);
  if (rc && !stops_run(rc)) {
    refuse(r, id, rc);
    rc = 0;
  }
  return rc;
}

static int run_all(run_t *r) {
  json_t *sort = json_pack("{s:i}", "_id", 1), *last = json_string("");
  int rc = sort && last ? 0 : DTX_ENOMEM;
  while (rc == 0) {
    json_t *page = NULL, *acc;
    size_t i;
    json_t *q = json_pack("{s:{s:O}}", "_id", "$gt", last);
    rc = q ? dtx__kit_find_n(&r->ex, DTX_ACCOUNTS, q, sort, PAGE, &page)
           : DTX_ENOMEM;
    json_decref(q);
    if (rc == 0 && json_array_size(page) == 0) {
      json_decref(page);
      break;
    }
    json_array_foreach(page, i, acc) {
      if (rc == 0)
        rc = account_one(r, acc);
    }
    if (rc == 0) {
      json_decref(last);
      last = json_incref(
          json_object_get(json_array_get(page, json_array_size(page) - 1),
                          "_id"));
    }
    json_decref(page);
  }
  json_decref(sort);
  json_decref(last);
  return rc;
}

/* The day's record against this run's parameters: another rate or
 * settlement is CONFLICT (nothing credited). */
static int judge_day(const run_t *r, const json_t *day) {
  const dtx_interest_req_t *q = r->req;
  int64_t rate = dtx__int(day, "rate_ppm");
  const char *settle = dtx__str(day, "settlement");
  if (json_is_integer(json_object_get(day, "rate_ppm")) && settle &&
      rate == q->rate_ppm && strcmp(settle, r->settle) == 0)
    return 0;
  return dtx__err(DTX_ECONFLICT, "interest day %s was run at %lld ppm from "
                  "settlement '%s'; this run asks %lld ppm from '%s': a day "
                  "is paid at one rate (nothing credited)", q->day,
                  (long long)rate, settle ? settle : "?",
                  (long long)q->rate_ppm, r->settle);
}

/* Before any write (the settlement account is one): a day run with other
 * parameters is refused here, creating nothing.  record_day judges again
 * against a first run racing this one. */
static int read_day(run_t *r) {
  json_t *day = NULL;
  int rc = dtx__kit_get(&r->ex, DAYS, r->req->day, &day);
  if (rc == DTX_ENOTFOUND) {
    dtx__err_clear();
    return 0;
  }
  if (rc == 0)
    rc = judge_day(r, day);
  json_decref(day);
  return rc;
}

/* The day's run record: inserted by the day's first run, compared by
 * every later one.  Another rate or settlement is CONFLICT before any
 * credit (a lost reply of our own insert reads back our parameters). */
static int record_day(run_t *r) {
  const dtx_interest_req_t *q = r->req;
  json_t *day = NULL,
         *doc = json_pack("{s:s,s:I,s:s,s:I}", "_id", q->day, "rate_ppm",
                          (json_int_t)q->rate_ppm, "settlement", r->settle,
                          "created", (json_int_t)dtx__now_ms());
  int rc = doc ? dtx__kit_ensure(r->ex.st, &dtx__interest_pattern)
               : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__kit_insert(&r->ex, "interest.day", DAYS, doc);
  json_decref(doc);
  if (rc != DTX_EDUPKEY)
    return rc;
  if ((rc = dtx__kit_get(&r->ex, DAYS, q->day, &day)) == 0)
    rc = judge_day(r, day);
  json_decref(day);
  return rc;
}

static int check_req(const dtx_interest_req_t *req) {
  int rc = req ? check_day(req->day)
               : dtx__err(DTX_EINVAL, "interest: NULL request");
  if (rc == 0 && (req->rate_ppm < 0 || req->rate_ppm > DTX_INTEREST_MAX_PPM))
    rc = dtx__err(DTX_EINVAL, "interest rate %lld ppm: must be 0..%d",
                  (long long)req->rate_ppm, DTX_INTEREST_MAX_PPM);
  if (rc == 0)
    rc = dtx__check_ident("settlement account id",
                          req->settlement ? req->settlement : SETTLEMENT);
  return rc;
}

int dtx_interest_req_check(const dtx_interest_req_t *req) {
  dtx__err_clear();
  return check_req(req);
}

int dtx_interest_run(dtx_store_t *st, const dtx_interest_req_t *req,
                     const dtx_exec_opts_t *opts, json_t **out) {
  dtx__call_t c;
  char nonce[25];
  run_t r = {.req = req};
  if (out)
    *out = NULL;
  if (opts)
    r.opts = *opts;
  dtx__exec_from(&r.ex, st, opts);
  /* The run's own executor name (see "Who counts a credit"). */
  dtx__id_new(nonce);
  /* ':' -- the run's name is an owner like any (dtx__check_owner). */
  dtx__exec_rename(&r.ex, "%.100s:%s", r.ex.owner, nonce);
  r.opts.owner = r.ex.owner;
  dtx__call_begin(&c, r.ex.deadline_ms);
  int rc = check_req(req);
  if (rc == 0)
    r.settle = req->settlement ? req->settlement : SETTLEMENT;
  if (rc == 0 && !(r.refusals = json_array()))
    rc = DTX_ENOMEM;
  if (rc == 0)
    rc = read_day(&r);
  if (rc == 0)
    rc = dtx__tx_settlement(&r.ex, r.settle, "interest.settlement", "interest runs");
  if (rc == 0)
    rc = record_day(&r);
  int started = rc == 0;
  if (started)
    rc = run_all(&r);
  /* After the others: what was not credited, and why the first was not.
   * CONFLICT (or the first's OVERFLOW) means "the others are credited";
   * every other exit means the run did not get that far. */
  if (rc == 0 && r.refused)
    rc = dtx__err(r.first == DTX_EOVERFLOW ? DTX_EOVERFLOW : DTX_ECONFLICT,
                  "interest day %s: %lld account%s not credited (the others "
                  "are; see \"refusals\"), the first: %s", req->day,
                  (long long)r.refused, r.refused == 1 ? "" : "s", r.why);
  if (out && started)
    *out = json_pack("{s:s,s:I,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:O}",
                     "day", req->day, "rate_ppm", (json_int_t)req->rate_ppm,
                     "settlement", r.settle, "accounts",
                     (json_int_t)r.accounts, "credited",
                     (json_int_t)r.credited, "already", (json_int_t)r.already,
                     "pending", (json_int_t)r.pending, "failed",
                     (json_int_t)r.failed, "skipped", (json_int_t)r.skipped,
                     "zero", (json_int_t)r.zero, "total",
                     (json_int_t)r.total, "refused", (json_int_t)r.refused,
                     "refusals", r.refusals);
  json_decref(r.refusals);
  return dtx__call_end(&c, rc);
}

/* The day records' shape; one is never deleted (it is what keeps a day
 * at one rate), and never changed: every field is immutable (its
 * transition rule), and the validator admits no other field, so a plain
 * update of a day record can change nothing. */
static const char day_validator[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"rate_ppm\",\"settlement\",\"created\"],"
    "\"additionalProperties\":false,\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"pattern\":"
    "\"^[0-9]{4}-[0-9]{2}-[0-9]{2}$\"},"
    "\"rate_ppm\":{\"bsonType\":\"long\",\"minimum\":0,\"maximum\":1000000},"
    "\"settlement\":{\"bsonType\":\"string\",\"minLength\":1},"
    "\"created\":{\"bsonType\":\"long\"}}}}";

static const dtx__rules_def_t rules[] = {
    {DAYS, day_validator, "{\"_id\":{\"$exists\":false}}",
     "{\"immutable\":[\"rate_ppm\",\"settlement\",\"created\"]}"},
    {NULL, NULL, NULL, NULL},
};

/* The audit reads the day records (their shape, through the validator);
 * the credits are transfers, audited by the transfer pattern. */
static int audit_days(dtx__audit_t *a) {
  json_t *days = NULL;
  int rc = dtx__audit_load(a, DAYS, &days);
  if (rc == 0) {
    dtx__audit_set(a, "days", json_integer((json_int_t)json_object_size(days)));
    dtx__audit_summary(a, "%zu days run", json_object_size(days));
  }
  json_decref(days);
  return rc;
}

static const char *const points[] = {"interest.settlement", "interest.day",
                                     "interest.credit", NULL};
static const char *const collections[] = {DAYS, NULL};

/* Its credits are transfers, recovered and audited by the transfer
 * pattern; its own documents are the days' run records. */
const dtx__pattern_t dtx__interest_pattern = {
    .name = "interest",
    .collections = collections,
    .fault_points = points,
    .audit = audit_days,
    .rules = rules,
};
