/* time.c -- an entry's time (docs/ledger.md, "Entry time"): how doctx
 * assigns it, how an imported entry states it, and the reads by time
 * (balance as of a time, a statement between two times).
 *
 * An entry's time "at" (ms since 1970-01-01T00:00:00Z, UTC) is fixed in
 * the ONE atomic step that takes its seqIds -- the entry's insert -- and
 * never changes (immutable for every writer, ledger.c's entry_moves):
 *
 *   live entry:      at = max(now, time of each leg account's head entry)
 *   imported entry:  at = the caller's TIME, refused (DTX_ESTATE) when a
 *                    leg account's head entry is timed after it
 *
 * where "head entry" is the entry holding the seqId the leg follows, as
 * the post read it (position.c).  The insert holds seqId head + 1 of every
 * leg account or fails with a duplicate key (L2), so when it succeeds the
 * entry read at head IS the predecessor, and its time cannot have changed:
 *
 *  T1 Per account, times never decrease in seqId order: each entry's time
 *     is >= its predecessor's.  The clocks of the posting processes play
 *     no part in it (a slow clock gives the predecessor's time, never an
 *     earlier one); threads, processes and every backend rely on the same
 *     unique index as L2.
 *  T2 An import at TIME lands only when no entry of its accounts -- live
 *     or imported -- is timed after TIME: by T1 the head entry has the
 *     account's greatest time, and a concurrent post that takes the seqId
 *     first sends the import back to derive again and judge that post.
 *
 * Entries written before entry times carry no "at"; their time is their
 * "created" (the poster's clock), and T1 holds from the first timed entry
 * on.  By T1 the entries of an account timed <= T are a prefix of its
 * seqIds, so a balance as of T is the balance as of seqId n, n being how
 * many of its entries are timed <= T (one count), and a statement between
 * two times is a range of seqIds. */
#include <ctype.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/assert.h"
#include "util/err.h"

/* ---- TIME: RFC 3339 UTC or epoch ms -------------------------------------------------- */

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar. */
static int64_t days_from_epoch(int64_t y, int64_t m, int64_t d) {
  static const int before[12] = {0, 31, 59, 90, 120, 151,
                                 181, 212, 243, 273, 304, 334};
  int64_t leaps = (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400 -
                  (1969 / 4 - 1969 / 100 + 1969 / 400);
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return (y - 1970) * 365 + leaps + before[m - 1] + (m > 2 && leap) + d - 1;
}

static int digits(const char *s, int n, int64_t *out) {
  *out = 0;
  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i]))
      return 0;
    *out = *out * 10 + (s[i] - '0');
  }
  return 1;
}

static int bad_time(const char *s) {
  return dtx__err(DTX_EINVAL, "time '%.40s': a time is RFC 3339 in UTC "
                  "(2026-01-31T12:00:00Z, .fff optional) or ms since "
                  "1970-01-01T00:00:00Z, from 1970 to 9999 "
                  "(0 .. %lld)", s ? s : "(null)",
                  (long long)DTX_LEDGER_MAX_TIME_MS);
}

int dtx_ledger_time_parse(const char *s, int64_t *ms) {
  int64_t y, mo, d, h, mi, sec, frac = 0;
  size_t n = s ? strlen(s) : 0;
  dtx__err_clear();
  if (!s || !ms || n == 0)
    return bad_time(s);
  if (strspn(s, "0123456789") == n) { /* epoch ms */
    if (n > 15) /* past year 9999 well before int64 */
      return bad_time(s);
    digits(s, (int)n, &y);
    if (y > DTX_LEDGER_MAX_TIME_MS)
      return bad_time(s);
    *ms = y;
    return 0;
  }
  /* YYYY-MM-DDTHH:MM:SS[.f{1,9}](Z|+00:00) */
  if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
      s[7] != '-' || !digits(s + 8, 2, &d) || s[10] != 'T' ||
      !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) ||
      s[16] != ':' || !digits(s + 17, 2, &sec))
    return bad_time(s);
  const char *p = s + 19;
  if (*p == '.') {
    int k = 0;
    for (p++; isdigit((unsigned char)*p); p++, k++)
      if (k < 3)
        frac = frac * 10 + (*p - '0');
    if (k == 0 || k > 9)
      return bad_time(s);
    for (; k < 3; k++)
      frac *= 10;
  }
  if (strcmp(p, "Z") != 0 && strcmp(p, "+00:00") != 0)
    return bad_time(s);
  static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
      (mo == 2 && d == 29 && !leap) || h > 23 || mi > 59 || sec > 59)
    return bad_time(s);
  *ms = ((days_from_epoch(y, mo, d) * 24 + h) * 60 + mi) * 60000 +
        sec * 1000 + frac;
  DTX_ASSERT(*ms >= 0 && *ms <= DTX_LEDGER_MAX_TIME_MS, "T1");
  return 0;
}

static int check_range(const char *what, int64_t t) {
  if (t < 0 || t > DTX_LEDGER_MAX_TIME_MS)
    return dtx__err(DTX_EINVAL, "%s %lld: a time is 0 .. %lld ms since "
                    "1970-01-01T00:00:00Z (up to year 9999)", what,
                    (long long)t, (long long)DTX_LEDGER_MAX_TIME_MS);
  return 0;
}

/* ---- an entry's time ------------------------------------------------------------------ */

int64_t dtx__lg_time(const json_t *e) {
  json_t *at = json_object_get(e, "at");
  return json_is_integer(at) ? (int64_t)json_integer_value(at)
                             : dtx__int(e, "created");
}

int dtx__lg_check_time(const dtx_ledger_post_req_t *req) {
  if (!req->imported) {
    if (req->at_ms)
      return dtx__err(DTX_EINVAL, "at_ms %lld: only an imported entry states "
                      "its time (doctx assigns a live entry's)",
                      (long long)req->at_ms);
    return 0;
  }
  int rc = check_range("imported entry time", req->at_ms);
  if (rc)
    return rc;
  if (req->pending)
    return dtx__err(DTX_EINVAL, "an imported entry records settled history: "
                    "it cannot be pending");
  if (req->at_ms > dtx__now_ms())
    return dtx__err(DTX_EINVAL, "imported entry time %lld is in the future: "
                    "an import records the past", (long long)req->at_ms);
  return 0;
}

int dtx__lg_same_time(const json_t *e, const dtx_ledger_post_req_t *req) {
  int imported = json_is_true(json_object_get(e, "imported"));
  return imported == (req->imported != 0) &&
         (!imported || dtx__int(e, "at") == req->at_ms);
}

int dtx__lg_stamp(const dtx_ledger_post_req_t *req, int64_t head_at,
                  const char *head_acct, json_t *doc) {
  int64_t at;
  if (req->imported) {
    /* T2: the latest time of every leg account, read with the seqId the
     * insert takes. */
    if (head_at > req->at_ms)
      return dtx__err(DTX_ESTATE, "account '%s' has an entry timed %lld, "
                      "after the import's time %lld: an import is refused "
                      "once an account has entries after it",
                      head_acct ? head_acct : "?", (long long)head_at,
                      (long long)req->at_ms);
    at = req->at_ms;
    if (json_object_set_new(doc, "imported", json_true()))
      return DTX_ENOMEM;
  } else {
    int64_t now = dtx__now_ms();
    at = now > head_at ? now : head_at; /* T1 */
  }
  DTX_ASSERT(at >= head_at, "T1");
  return json_object_set_new(doc, "at", json_integer((json_int_t)at))
             ? DTX_ENOMEM
             : 0;
}

/* ---- reads by time ------------------------------------------------------------------------ */

/* DTX_ENOACCOUNT naming account when it does not exist. */
static int account_exists(dtx__exec_t *ex, const char *account) {
  json_t *acct = NULL;
  int rc = dtx__lg_account(ex, account, &acct);
  json_decref(acct);
  return rc;
}

/* How many of account's entries are timed <= t (t < 0: none): by T1, the
 * seqId the balance as of t stands at.  Entries without "at" are timed
 * by "created". */
static int seq_at(dtx__exec_t *ex, const char *account, int64_t t,
                  int64_t *n) {
  *n = 0;
  if (t < 0)
    return 0;
  json_t *f = json_pack(
      "{s:s,s:[{s:{s:I}},{s:{s:b},s:{s:I}}]}", "changes.account", account,
      "$or", "at", "$lte", (json_int_t)t, "at", "$exists", 0, "created",
      "$lte", (json_int_t)t);
  int rc = f ? dtx__kit_count(ex->st, DTX_LEDGER_ENTRIES, f, "ledger time", n)
             : DTX_ENOMEM;
  json_decref(f);
  return rc;
}

static int balance_time(dtx__exec_t *ex, const char *account, int64_t at,
                        json_t **out) {
  int64_t n;
  int rc = dtx__check_ident("account id", account);
  if (rc == 0)
    rc = check_range("at", at);
  if (rc == 0)
    rc = account_exists(ex, account);
  if (rc == 0)
    rc = seq_at(ex, account, at, &n);
  if (rc == 0)
    rc = dtx__lg_balance(ex, account, n, out);
  if (rc == 0 && json_object_set_new(*out, "at", json_integer((json_int_t)at)))
    rc = DTX_ENOMEM;
  return rc;
}

int dtx_ledger_balance_time(dtx_store_t *st, const char *account, int64_t at_ms,
                            json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  int rc = balance_time(&ex, account, at_ms, out);
  if (rc) {
    json_decref(*out);
    *out = NULL;
  }
  return dtx__call_end(&c, rc);
}

static int statement_time(dtx__exec_t *ex, const char *account,
                          int64_t from_seq, int64_t from_ms, int64_t to_ms,
                          int64_t limit, json_t **out) {
  int64_t lo = 0, hi = -1;
  int rc = dtx__check_ident("account id", account);
  if (rc == 0)
    rc = check_range("from", from_ms);
  if (rc == 0 && to_ms != DTX_LEDGER_NO_TIME)
    rc = check_range("to", to_ms);
  if (rc == 0 && to_ms != DTX_LEDGER_NO_TIME && to_ms < from_ms)
    rc = dtx__err(DTX_EINVAL, "from %lld is after to %lld", (long long)from_ms,
                  (long long)to_ms);
  if (rc == 0 && (from_seq < 1 || limit < 0))
    rc = dtx__err(DTX_EINVAL, "from_seq must be >= 1 and limit >= 0, got "
                  "%lld and %lld", (long long)from_seq, (long long)limit);
  if (rc == 0)
    rc = account_exists(ex, account);
  /* [from, to): the entries timed before from come first (T1). */
  if (rc == 0)
    rc = seq_at(ex, account, from_ms - 1, &lo);
  if (rc == 0 && to_ms != DTX_LEDGER_NO_TIME)
    rc = seq_at(ex, account, to_ms - 1, &hi);
  if (rc)
    return rc;
  lo = lo + 1 > from_seq ? lo + 1 : from_seq;
  if (hi >= 0 && hi < lo) /* nothing in the range */
    return (*out = json_array()) ? 0 : DTX_ENOMEM;
  return dtx__lg_statement(ex, account, lo, hi, limit, out);
}

int dtx_ledger_statement_time(dtx_store_t *st, const char *account,
                              int64_t from_seq, int64_t from_ms, int64_t to_ms,
                              int64_t limit, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, 0);
  return dtx__call_end(
      &c, statement_time(&ex, account, from_seq, from_ms, to_ms, limit, out));
}
