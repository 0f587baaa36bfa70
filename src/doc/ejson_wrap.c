/* ejson_wrap.c -- the Extended JSON v2 type wrappers ({"$oid": ...},
 * {"$date": ...}, ...), canonical and relaxed, for the reader in ejson.c.
 *
 * A wrapper is recognised by its first key (dtx__ejr_is_wrapper) and must
 * then be exactly that wrapper: a wrong value type, a missing or extra
 * key, bad hex or base64, a number out of range are errors naming the
 * wrapper and the reason, at the byte where it went wrong -- never a
 * plain object, which would let {"$numberLong": 5} into a store as a
 * document nobody meant.
 *
 * Choices (docs/engine.md):
 *  - $binary: the canonical {"base64": .., "subType": ..} in either key
 *    order, and the legacy {"$binary": "<base64>", "$type": "<hex>"} (in
 *    that order only: "$type" first is the query operator, a plain key).
 *    Base64 must be padded.  Subtype 2 ("binary (old)") gets BSON's inner
 *    length, as libbson writes it.
 *  - $code must come before $scope.
 *  - $regularExpression options must be BSON's letters (i l m s u x),
 *    each at most once; they are stored sorted, as BSON requires.
 *  - $date: an ISO-8601 string (YYYY-MM-DDTHH:MM:SS, then 1 to 3 digits
 *    of milliseconds, then Z or an offset +HH:MM / +HHMM), a plain JSON
 *    integer (relaxed's legacy), or {"$numberLong": "..."}.  Dates before
 *    1970 or after 9999 only as numbers, as the spec writes them.
 *  - $numberInt / $numberLong: an optional '-' and decimal digits, no
 *    leading zeros, no '+', no spaces. */
#include "doc/bdoc.h"
#include "doc/ejson_int.h"
#include "util/assert.h"
#include "util/err.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef dtx__ejr_t rd_t;

static const char *const wrappers[] = {
    "$oid",        "$symbol",   "$numberInt",        "$numberLong",
    "$numberDouble", "$numberDecimal", "$binary",     "$code",
    "$scope",      "$timestamp", "$regularExpression", "$dbPointer",
    "$date",       "$minKey",   "$maxKey",           "$undefined",
};

int dtx__ejr_is_wrapper(const char *name, size_t len) {
  if (len < 4 || name[0] != '$')
    return 0;
  for (size_t k = 0; k < sizeof wrappers / sizeof wrappers[0]; k++)
    if (strlen(wrappers[k]) == len && !memcmp(wrappers[k], name, len))
      return 1;
  return 0;
}

static void put8(dtx__buf_t *b, uint8_t v) { dtx__buf_put(b, &v, 1); }

/* ---- small readers ---------------------------------------------------------- */

/* A string value into tmp (reset first), with its position; w names the
 * wrapper when a string is missing. */
static int str_in(rd_t *r, size_t *at, const char *w) {
  dtx__ejr_ws(r);
  if (r->i >= r->n || r->s[r->i] != '"')
    return dtx__ejr_err(r, r->i, "%s: a string expected", w);
  r->tmp.n = 0;
  int rc = dtx__ejr_string(r, &r->tmp, at);
  if (!rc && r->tmp.oom)
    return dtx__ejr_err(r, *at, "out of memory");
  return rc;
}

static int tmp_is(rd_t *r, const char *s) {
  return r->tmp.n == strlen(s) && !memcmp(r->tmp.p, s, r->tmp.n);
}

/* The end of a wrapper: '}' (a ',' means an extra key). */
static int close_wrapper(rd_t *r, const char *w) {
  dtx__ejr_ws(r);
  if (r->i < r->n && r->s[r->i] == '}') {
    r->i++;
    return 0;
  }
  if (r->i < r->n && r->s[r->i] == ',')
    return dtx__ejr_err(r, r->i, "%s takes no other key", w);
  return dtx__ejr_err(r, r->i, "'}' expected to close %s", w);
}

/* After one member of a sub-object: 1 when '}' ended it, 0 after ','. */
static int next_member(rd_t *r, const char *w, int *done) {
  dtx__ejr_ws(r);
  if (r->i < r->n && (r->s[r->i] == '}' || r->s[r->i] == ',')) {
    *done = r->s[r->i] == '}';
    r->i++;
    return 0;
  }
  return dtx__ejr_err(r, r->i, "',' or '}' expected in %s", w);
}

/* Decimal digits in tmp (optional '-', no leading zeros) as an integer
 * within [lo, hi]. */
static int tmp_int(rd_t *r, size_t at, int64_t lo, int64_t hi, int64_t *v,
                   const char *w) {
  const char *s = r->tmp.p;
  size_t n = r->tmp.n, k = 0;
  int neg = n > 0 && s[0] == '-';
  k = (size_t)neg;
  if (k >= n || (s[k] == '0' && n - k > 1))
    return dtx__ejr_err(r, at, "%s: not a decimal integer", w);
  uint64_t m = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (; k < n; k++) {
    if (s[k] < '0' || s[k] > '9')
      return dtx__ejr_err(r, at, "%s: not a decimal integer", w);
    uint64_t d = (uint64_t)(s[k] - '0');
    if (m > (lim - d) / 10)
      return dtx__ejr_err(r, at, "%s: out of range", w);
    m = m * 10 + d;
  }
  int64_t x = neg ? (int64_t)(0 - m) : (int64_t)m;
  if (x < lo || x > hi)
    return dtx__ejr_err(r, at, "%s: out of range", w);
  *v = x;
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* {"$oid": "<24 hex>"}'s string, already the next token. */
static int oid_string(rd_t *r, uint8_t oid[12], const char *w) {
  size_t at;
  int rc = str_in(r, &at, w);
  if (rc)
    return rc;
  if (r->tmp.n != 24)
    return dtx__ejr_err(r, at, "%s: an ObjectId is 24 hex digits", w);
  for (int k = 0; k < 12; k++) {
    int h = hexval(r->tmp.p[2 * k]), l = hexval(r->tmp.p[2 * k + 1]);
    if (h < 0 || l < 0)
      return dtx__ejr_err(r, at, "%s: an ObjectId is 24 hex digits", w);
    oid[k] = (uint8_t)(h << 4 | l);
  }
  return 0;
}

/* tmp's base64 (padded) decoded onto out. */
static int base64_to_out(rd_t *r, size_t at, const char *w) {
  const char *s = r->tmp.p;
  size_t n = r->tmp.n;
  if (n % 4)
    return dtx__ejr_err(r, at, "%s: base64 length not a multiple of 4", w);
  for (size_t k = 0; k < n; k += 4) {
    uint32_t acc = 0;
    int pad = 0;
    for (int j = 0; j < 4; j++) {
      char c = s[k + (size_t)j];
      int v;
      if (c >= 'A' && c <= 'Z')
        v = c - 'A';
      else if (c >= 'a' && c <= 'z')
        v = c - 'a' + 26;
      else if (c >= '0' && c <= '9')
        v = c - '0' + 52;
      else if (c == '+')
        v = 62;
      else if (c == '/')
        v = 63;
      else if (c == '=' && k + 4 == n && j >= 2 &&
               (j == 3 || s[k + 3] == '='))
        v = 0, pad++;
      else
        return dtx__ejr_err(r, at, "%s: invalid base64 at its byte %zu", w,
                            k + (size_t)j);
      if (pad && c != '=')
        return dtx__ejr_err(r, at, "%s: invalid base64 padding", w);
      acc = acc << 6 | (uint32_t)v;
    }
    uint8_t b[3] = {(uint8_t)(acc >> 16), (uint8_t)(acc >> 8), (uint8_t)acc};
    /* padding bits must be zero, so each value has one spelling */
    if ((pad == 1 && b[2]) || (pad == 2 && (b[1] || b[2])))
      return dtx__ejr_err(r, at, "%s: non-zero base64 padding bits", w);
    dtx__buf_put(&r->out, b, (size_t)(3 - pad));
  }
  return 0;
}

/* tmp as a binary subtype: 1 or 2 hex digits. */
static int subtype(rd_t *r, size_t at, int *st, const char *w) {
  if (r->tmp.n < 1 || r->tmp.n > 2)
    return dtx__ejr_err(r, at, "%s: subType is 1 or 2 hex digits", w);
  int v = 0;
  for (size_t k = 0; k < r->tmp.n; k++) {
    int h = hexval(r->tmp.p[k]);
    if (h < 0)
      return dtx__ejr_err(r, at, "%s: subType is 1 or 2 hex digits", w);
    v = v << 4 | h;
  }
  *st = v;
  return 0;
}

/* ---- dates ---------------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (March-based years,
 * so the leap day is the last of its year). */
int64_t dtx__ejd_days(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static int digits(const char *s, int n, int *v) {
  int x = 0;
  for (int k = 0; k < n; k++) {
    if (s[k] < '0' || s[k] > '9')
      return -1;
    x = x * 10 + (s[k] - '0');
  }
  *v = x;
  return 0;
}

/* tmp as an ISO-8601 date-time: milliseconds since the epoch. */
static int iso_date(rd_t *r, size_t at, int64_t *ms) {
  const char *s = r->tmp.p;
  size_t n = r->tmp.n;
  int Y, M, D, h, mi, sec, frac = 0, oh = 0, om = 0, sign = 0;
  if (n < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) ||
      s[7] != '-' || digits(s + 8, 2, &D) || s[10] != 'T' ||
      digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) ||
      s[16] != ':' || digits(s + 17, 2, &sec))
    return dtx__ejr_err(r, at, "$date: not an ISO-8601 date-time "
                               "(YYYY-MM-DDTHH:MM:SS[.mmm](Z|+HH:MM))");
  size_t k = 19;
  if (s[k] == '.') {
    int nd = 0;
    for (k++; k < n && s[k] >= '0' && s[k] <= '9' && nd < 3; k++, nd++)
      frac = frac * 10 + (s[k] - '0');
    if (nd == 0 || (k < n && s[k] >= '0' && s[k] <= '9'))
      return dtx__ejr_err(r, at, "$date: 1 to 3 digits of milliseconds");
    for (; nd < 3; nd++)
      frac *= 10;
  }
  if (k < n && s[k] == 'Z')
    k++;
  else if (k < n && (s[k] == '+' || s[k] == '-')) {
    sign = s[k] == '-' ? -1 : 1;
    if (n - k == 6 && s[k + 3] == ':' && !digits(s + k + 1, 2, &oh) &&
        !digits(s + k + 4, 2, &om))
      k += 6;
    else if (n - k == 5 && !digits(s + k + 1, 2, &oh) &&
             !digits(s + k + 3, 2, &om))
      k += 5;
    else
      return dtx__ejr_err(r, at, "$date: bad offset (+HH:MM or +HHMM)");
  } else
    return dtx__ejr_err(r, at, "$date: Z or an offset expected");
  if (k != n)
    return dtx__ejr_err(r, at, "$date: bytes after the time zone");
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  int leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
  if (M < 1 || M > 12 || D < 1 || D > mdays[M - 1] ||
      (M == 2 && D == 29 && !leap) || h > 23 || mi > 59 || sec > 59 ||
      oh > 23 || om > 59)
    return dtx__ejr_err(r, at, "$date: a field out of range");
  int64_t t = dtx__ejd_days(Y, M, D) * 86400 + h * 3600 + mi * 60 + sec;
  t -= sign * (oh * 3600 + om * 60);
  *ms = t * 1000 + frac;
  return 0;
}

/* ---- the wrappers ---------------------------------------------------------- */

/* {"$numberLong": "..."} at the cursor (for $date's canonical form). */
static int number_long_obj(rd_t *r, int64_t *v, const char *w) {
  size_t at;
  int rc;
  if ((rc = dtx__ejr_expect(r, '{', "'{' expected")) || (rc = str_in(r, &at, w)))
    return rc;
  if (!tmp_is(r, "$numberLong"))
    return dtx__ejr_err(r, at, "%s: {\"$numberLong\": \"...\"} expected", w);
  if ((rc = dtx__ejr_expect(r, ':', "':' expected")) || (rc = str_in(r, &at, w)) ||
      (rc = tmp_int(r, at, INT64_MIN, INT64_MAX, v, "$numberLong")))
    return rc;
  return close_wrapper(r, "$numberLong");
}

static int w_binary(rd_t *r, size_t type_at) {
  const char *w = "$binary";
  size_t hdr = r->out.n, at;
  int rc, st = -1, have64 = 0;
  dtx__ejr_put32(&r->out, 0);
  put8(&r->out, 0);
  dtx__ejr_ws(r);
  if (r->i < r->n && r->s[r->i] == '"') { /* legacy: "$binary", "$type" */
    if ((rc = str_in(r, &at, w)) || (rc = base64_to_out(r, at, w)))
      return rc;
    if ((rc = dtx__ejr_expect(r, ',', "legacy $binary: ',' \"$type\" "
                                      "expected")) ||
        (rc = str_in(r, &at, w)))
      return rc;
    if (!tmp_is(r, "$type"))
      return dtx__ejr_err(r, at, "legacy $binary: \"$type\" expected");
    if ((rc = dtx__ejr_expect(r, ':', "':' expected")) || (rc = str_in(r, &at, w)) ||
        (rc = subtype(r, at, &st, "$type")))
      return rc;
  } else {
    if ((rc = dtx__ejr_expect(r, '{', "$binary: '{' expected")))
      return rc;
    for (int done = 0; !done;) {
      if ((rc = str_in(r, &at, w)))
        return rc;
      int is64 = tmp_is(r, "base64");
      if (!is64 && !tmp_is(r, "subType"))
        return dtx__ejr_err(r, at, "$binary: only base64 and subType");
      if (is64 ? have64 : st >= 0)
        return dtx__ejr_err(r, at, "$binary: duplicate key");
      if ((rc = dtx__ejr_expect(r, ':', "':' expected")) || (rc = str_in(r, &at, w)))
        return rc;
      if (is64) {
        have64 = 1;
        if ((rc = base64_to_out(r, at, w)))
          return rc;
      } else if ((rc = subtype(r, at, &st, w)))
        return rc;
      if ((rc = next_member(r, w, &done)))
        return rc;
    }
    if (!have64 || st < 0)
      return dtx__ejr_err(r, r->i, "$binary: needs base64 and subType");
  }
  if (r->out.oom)
    return dtx__ejr_err(r, r->i, "out of memory");
  size_t len = r->out.n - hdr - 5;
  if (len > DTX__DOC_MAX)
    return dtx__err(DTX_ELIMIT, "$binary larger than 16 MiB at byte %zu",
                    r->i);
  if (st == BSON_SUBTYPE_BINARY_DEPRECATED) { /* inner length first */
    if (!dtx__buf_reserve(&r->out, 4))
      return dtx__ejr_err(r, r->i, "out of memory");
    memmove(r->out.p + hdr + 9, r->out.p + hdr + 5, len);
    uint32_t l32 = (uint32_t)len;
    memcpy(r->out.p + hdr + 5, &l32, 4);
    r->out.n += 4;
    len += 4;
  }
  uint32_t l32 = (uint32_t)len;
  memcpy(r->out.p + hdr, &l32, 4);
  r->out.p[hdr + 4] = (char)st;
  r->out.p[type_at] = BSON_TYPE_BINARY;
  return close_wrapper(r, w);
}

static int w_code(rd_t *r, size_t type_at) {
  const char *w = "$code";
  size_t at, start = r->out.n;
  int rc;
  dtx__ejr_put32(&r->out, 0);
  dtx__ejr_ws(r);
  if (r->i >= r->n || r->s[r->i] != '"')
    return dtx__ejr_err(r, r->i, "%s: a string expected", w);
  if ((rc = dtx__ejr_string(r, &r->out, &at)))
    return rc;
  put8(&r->out, 0);
  if (r->out.oom)
    return dtx__ejr_err(r, at, "out of memory");
  uint32_t sl = (uint32_t)(r->out.n - start - 4);
  memcpy(r->out.p + start, &sl, 4);
  dtx__ejr_ws(r);
  if (r->i < r->n && r->s[r->i] == '}') {
    r->i++;
    r->out.p[type_at] = BSON_TYPE_CODE;
    return 0;
  }
  if ((rc = dtx__ejr_expect(r, ',', "',' or '}' expected in $code")) ||
      (rc = str_in(r, &at, w)))
    return rc;
  if (!tmp_is(r, "$scope"))
    return dtx__ejr_err(r, at, "$code: only $scope may follow");
  if ((rc = dtx__ejr_expect(r, ':', "':' expected")))
    return rc;
  /* code with scope: int32 total first, so the string moves by 4 */
  size_t slen = r->out.n - start;
  if (!dtx__buf_reserve(&r->out, 4))
    return dtx__ejr_err(r, at, "out of memory");
  memmove(r->out.p + start + 4, r->out.p + start, slen);
  r->out.n += 4;
  dtx__ejr_ws(r);
  if ((rc = dtx__ejr_document(r, r->i)))
    return rc;
  uint32_t total = (uint32_t)(r->out.n - start);
  memcpy(r->out.p + start, &total, 4);
  r->out.p[type_at] = BSON_TYPE_CODEWSCOPE;
  return close_wrapper(r, "$code");
}

static int w_timestamp(rd_t *r) {
  const char *w = "$timestamp";
  int64_t t = -1, i = -1, v;
  size_t at;
  int rc;
  if ((rc = dtx__ejr_expect(r, '{', "$timestamp: '{' expected")))
    return rc;
  for (int done = 0; !done;) {
    if ((rc = str_in(r, &at, w)))
      return rc;
    int ist = tmp_is(r, "t");
    if (!ist && !tmp_is(r, "i"))
      return dtx__ejr_err(r, at, "$timestamp: only t and i");
    if ((ist ? t : i) >= 0)
      return dtx__ejr_err(r, at, "$timestamp: duplicate key");
    if ((rc = dtx__ejr_expect(r, ':', "':' expected")) ||
        (rc = dtx__ejr_integer(r, &v, &at)))
      return rc;
    if (v < 0 || v > UINT32_MAX)
      return dtx__ejr_err(r, at, "$timestamp: %s is 0..4294967295",
                          ist ? "t" : "i");
    *(ist ? &t : &i) = v;
    if ((rc = next_member(r, w, &done)))
      return rc;
  }
  if (t < 0 || i < 0)
    return dtx__ejr_err(r, r->i, "$timestamp: needs t and i");
  dtx__ejr_put64(&r->out, (uint64_t)t << 32 | (uint64_t)i);
  return 0;
}

static int w_regex(rd_t *r) {
  const char *w = "$regularExpression";
  size_t at;
  int rc, have_p = 0, have_o = 0;
  unsigned opts = 0;
  if ((rc = dtx__ejr_expect(r, '{', "$regularExpression: '{' expected")))
    return rc;
  for (int done = 0; !done;) {
    if ((rc = str_in(r, &at, w)))
      return rc;
    int isp = tmp_is(r, "pattern");
    if (!isp && !tmp_is(r, "options"))
      return dtx__ejr_err(r, at, "%s: only pattern and options", w);
    if (isp ? have_p : have_o)
      return dtx__ejr_err(r, at, "%s: duplicate key", w);
    if ((rc = dtx__ejr_expect(r, ':', "':' expected")))
      return rc;
    if (isp) {
      size_t st = r->out.n;
      have_p = 1;
      if ((rc = dtx__ejr_string(r, &r->out, &at)))
        return rc;
      if (r->out.n > st && memchr(r->out.p + st, 0, r->out.n - st))
        return dtx__ejr_err(r, at, "%s: NUL in the pattern", w);
      put8(&r->out, 0);
    } else {
      have_o = 1;
      if ((rc = str_in(r, &at, w)))
        return rc;
      for (size_t k = 0; k < r->tmp.n; k++) {
        const char *p = memchr(DTX__BREGEX_OPTS, r->tmp.p[k],
                               sizeof DTX__BREGEX_OPTS - 1);
        unsigned bit = p ? 1u << (p - DTX__BREGEX_OPTS) : 0;
        if (!bit || (opts & bit))
          return dtx__ejr_err(r, at, "%s: options are i, l, m, s, u, x, "
                                     "each at most once", w);
        opts |= bit;
      }
    }
    if ((rc = next_member(r, w, &done)))
      return rc;
  }
  if (!have_p || !have_o)
    return dtx__ejr_err(r, r->i, "%s: needs pattern and options", w);
  for (unsigned k = 0; k < sizeof DTX__BREGEX_OPTS - 1; k++)
    if (opts & 1u << k)
      put8(&r->out, (uint8_t)DTX__BREGEX_OPTS[k]);
  put8(&r->out, 0);
  return 0;
}

static int w_dbpointer(rd_t *r) {
  const char *w = "$dbPointer";
  size_t at;
  int rc, have_ref = 0, have_id = 0;
  uint8_t oid[12];
  if ((rc = dtx__ejr_expect(r, '{', "$dbPointer: '{' expected")))
    return rc;
  for (int done = 0; !done;) {
    if ((rc = str_in(r, &at, w)))
      return rc;
    int isref = tmp_is(r, "$ref");
    if (!isref && !tmp_is(r, "$id"))
      return dtx__ejr_err(r, at, "%s: only $ref and $id", w);
    if (isref ? have_ref : have_id)
      return dtx__ejr_err(r, at, "%s: duplicate key", w);
    if ((rc = dtx__ejr_expect(r, ':', "':' expected")))
      return rc;
    if (isref) {
      size_t st = r->out.n;
      have_ref = 1;
      dtx__ejr_put32(&r->out, 0);
      if ((rc = dtx__ejr_string(r, &r->out, &at)))
        return rc;
      put8(&r->out, 0);
      if (r->out.oom)
        return dtx__ejr_err(r, at, "out of memory");
      uint32_t l = (uint32_t)(r->out.n - st - 4);
      memcpy(r->out.p + st, &l, 4);
    } else {
      have_id = 1;
      if ((rc = dtx__ejr_expect(r, '{', "$dbPointer: {\"$oid\": ..} "
                                        "expected")) ||
          (rc = str_in(r, &at, w)))
        return rc;
      if (!tmp_is(r, "$oid"))
        return dtx__ejr_err(r, at, "%s: $id must be an $oid", w);
      if ((rc = dtx__ejr_expect(r, ':', "':' expected")) ||
          (rc = oid_string(r, oid, w)) || (rc = close_wrapper(r, "$oid")))
        return rc;
    }
    if ((rc = next_member(r, w, &done)))
      return rc;
  }
  if (!have_ref || !have_id)
    return dtx__ejr_err(r, r->i, "%s: needs $ref and $id", w);
  dtx__buf_put(&r->out, oid, 12);
  return 0;
}

static int w_date(rd_t *r) {
  const char *w = "$date";
  int64_t ms;
  size_t at;
  int rc;
  dtx__ejr_ws(r);
  char c = r->i < r->n ? r->s[r->i] : 0;
  if (c == '"') {
    if ((rc = str_in(r, &at, w)) || (rc = iso_date(r, at, &ms)))
      return rc;
  } else if (c == '{') {
    if ((rc = number_long_obj(r, &ms, "$date")))
      return rc;
  } else if ((rc = dtx__ejr_integer(r, &ms, &at)))
    return rc;
  dtx__ejr_put64(&r->out, (uint64_t)ms);
  return 0;
}

static int w_number_double(rd_t *r, size_t at) {
  const char *w = "$numberDouble";
  double d;
  if (tmp_is(r, "Infinity"))
    d = INFINITY;
  else if (tmp_is(r, "-Infinity"))
    d = -INFINITY;
  else if (tmp_is(r, "NaN"))
    d = NAN;
  else {
    /* JSON's number grammar, then strtod (glibc rounds correctly) */
    const char *s = r->tmp.p;
    size_t n = r->tmp.n, k = 0;
    if (k < n && s[k] == '-')
      k++;
    size_t d0 = k;
    while (k < n && s[k] >= '0' && s[k] <= '9')
      k++;
    int ok = k > d0 && !(s[d0] == '0' && k - d0 > 1);
    if (ok && k < n && s[k] == '.') {
      size_t f0 = ++k;
      while (k < n && s[k] >= '0' && s[k] <= '9')
        k++;
      ok = k > f0;
    }
    if (ok && k < n && (s[k] == 'e' || s[k] == 'E')) {
      k++;
      if (k < n && (s[k] == '+' || s[k] == '-'))
        k++;
      size_t e0 = k;
      while (k < n && s[k] >= '0' && s[k] <= '9')
        k++;
      ok = k > e0;
    }
    if (!ok || k != n)
      return dtx__ejr_err(r, at, "%s: not a number", w);
    put8(&r->tmp, 0);
    if (r->tmp.oom)
      return dtx__ejr_err(r, at, "out of memory");
    errno = 0;
    d = strtod(r->tmp.p, NULL);
    if (errno == ERANGE && isinf(d))
      return dtx__ejr_err(r, at, "%s: real number overflow", w);
  }
  uint64_t u;
  memcpy(&u, &d, 8);
  dtx__ejr_put64(&r->out, u);
  return 0;
}

int dtx__ejr_wrapper(rd_t *r, const char *name, size_t len, size_t type_at,
                     size_t at) {
  size_t vat;
  int rc = 0;
  int64_t v;
  uint8_t t;
  (void)len;
  if (!strcmp(name, "$oid")) {
    uint8_t oid[12];
    if ((rc = oid_string(r, oid, name)))
      return rc;
    dtx__buf_put(&r->out, oid, 12);
    t = BSON_TYPE_OID;
  } else if (!strcmp(name, "$symbol")) {
    size_t st = r->out.n;
    dtx__ejr_put32(&r->out, 0);
    if ((rc = dtx__ejr_string(r, &r->out, &vat)))
      return rc;
    put8(&r->out, 0);
    if (r->out.oom)
      return dtx__ejr_err(r, vat, "out of memory");
    uint32_t l = (uint32_t)(r->out.n - st - 4);
    memcpy(r->out.p + st, &l, 4);
    t = BSON_TYPE_SYMBOL;
  } else if (!strcmp(name, "$numberInt") || !strcmp(name, "$numberLong")) {
    int is32 = name[7] == 'I';
    if ((rc = str_in(r, &vat, name)) ||
        (rc = tmp_int(r, vat, is32 ? INT32_MIN : INT64_MIN,
                      is32 ? INT32_MAX : INT64_MAX, &v, name)))
      return rc;
    if (is32)
      dtx__ejr_put32(&r->out, (uint32_t)(int32_t)v);
    else
      dtx__ejr_put64(&r->out, (uint64_t)v);
    t = is32 ? BSON_TYPE_INT32 : BSON_TYPE_INT64;
  } else if (!strcmp(name, "$numberDouble")) {
    if ((rc = str_in(r, &vat, name)) || (rc = w_number_double(r, vat)))
      return rc;
    t = BSON_TYPE_DOUBLE;
  } else if (!strcmp(name, "$numberDecimal")) {
    bson_decimal128_t dec;
    if ((rc = str_in(r, &vat, name)))
      return rc;
    size_t dn = r->tmp.n;
    /* libbson's reader looks past len for "NaN"/"Inf": give it a NUL */
    put8(&r->tmp, 0);
    if (r->tmp.oom)
      return dtx__ejr_err(r, vat, "out of memory");
    if (memchr(r->tmp.p, 0, dn) || dn > 100 ||
        !bson_decimal128_from_string_w_len(r->tmp.p, (int)dn, &dec))
      return dtx__ejr_err(r, vat, "%s: not a Decimal128", name);
    dtx__ejr_put64(&r->out, dec.low);
    dtx__ejr_put64(&r->out, dec.high);
    t = BSON_TYPE_DECIMAL128;
  } else if (!strcmp(name, "$binary")) {
    return w_binary(r, type_at);
  } else if (!strcmp(name, "$code")) {
    return w_code(r, type_at);
  } else if (!strcmp(name, "$scope")) {
    return dtx__ejr_err(r, at, "$scope must follow $code");
  } else if (!strcmp(name, "$timestamp")) {
    if ((rc = w_timestamp(r)))
      return rc;
    t = BSON_TYPE_TIMESTAMP;
  } else if (!strcmp(name, "$regularExpression")) {
    if ((rc = w_regex(r)))
      return rc;
    t = BSON_TYPE_REGEX;
  } else if (!strcmp(name, "$dbPointer")) {
    if ((rc = w_dbpointer(r)))
      return rc;
    t = BSON_TYPE_DBPOINTER;
  } else if (!strcmp(name, "$date")) {
    if ((rc = w_date(r)))
      return rc;
    t = BSON_TYPE_DATE_TIME;
  } else if (!strcmp(name, "$minKey") || !strcmp(name, "$maxKey")) {
    if ((rc = dtx__ejr_integer(r, &v, &vat)))
      return rc;
    if (v != 1)
      return dtx__ejr_err(r, vat, "%s: the value must be 1", name);
    t = name[2] == 'i' ? BSON_TYPE_MINKEY : BSON_TYPE_MAXKEY;
  } else {
    DTX_ASSERT(!strcmp(name, "$undefined"), "ejson.wrapper_known");
    dtx__ejr_ws(r);
    if (r->n - r->i < 4 || memcmp(r->s + r->i, "true", 4))
      return dtx__ejr_err(r, r->i, "$undefined: the value must be true");
    r->i += 4;
    t = BSON_TYPE_UNDEFINED;
  }
  if (r->out.oom)
    return dtx__ejr_err(r, r->i, "out of memory");
  r->out.p[type_at] = t;
  return close_wrapper(r, name);
}
