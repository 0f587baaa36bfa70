/* regex.c -- $regex for the filter matcher, on PCRE2 (which MongoDB uses).
 *
 * A pattern is compiled once with the options MongoDB accepts (i, m, s, x;
 * u is accepted and changes nothing, as UTF-8 mode is always on) and then
 * matched from any number of threads: the compiled code is read-only and
 * each match brings its own match data.  Every match runs under PCRE2's
 * match and depth limits, so a pathological pattern such as "(a+)+$"
 * against a long run of a's ends with an error after a bounded amount of
 * work instead of hanging the caller; the filter turns that error into a
 * failed operation (filter.c).
 *
 * dtx__regex_prefix() reads the literal prefix that every match of an
 * anchored pattern must start with ("^abc" -> "abc"), which the planners
 * use as an index range (src/store/conds.c).
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "doc/doc.h"
#include "util/err.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* A match may take at most this many backtracking steps and this much
 * backtracking memory (KiB).  Ordinary patterns use a tiny fraction; the
 * limits exist only to stop runaway backtracking within milliseconds. */
#define MATCH_LIMIT 1000000
#define DEPTH_LIMIT 4096

struct dtx__regex {
  pcre2_code *code;
  pcre2_match_context *mctx;
  int jit;
};

int dtx__regex_options(const char *options, uint32_t *flags) {
  *flags = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
  for (const char *o = options ? options : ""; *o; o++) {
    switch (*o) {
    case 'i': *flags |= PCRE2_CASELESS; break;
    case 'm': *flags |= PCRE2_MULTILINE; break;
    case 's': *flags |= PCRE2_DOTALL; break;
    case 'x': *flags |= PCRE2_EXTENDED; break;
    case 'u': break; /* UTF-8 is always on, as in MongoDB */
    default:
      return dtx__err(DTX_EBADQUERY,
                      "$options: invalid flag '%c' (allowed: i, m, s, x, u)",
                      *o);
    }
  }
  return 0;
}

int dtx__regex_compile(const char *pattern, size_t len, const char *options,
                       dtx__regex_t **out) {
  uint32_t flags;
  *out = NULL;
  int rc = dtx__regex_options(options, &flags);
  if (rc)
    return rc;
  dtx__regex_t *re = calloc(1, sizeof *re);
  if (!re)
    return dtx__err(DTX_ENOMEM, "out of memory compiling $regex");
  int ecode;
  PCRE2_SIZE eoff;
  re->code = pcre2_compile((PCRE2_SPTR)pattern, len, flags, &ecode, &eoff,
                           NULL);
  if (!re->code) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(ecode, msg, sizeof msg);
    free(re);
    return dtx__err(DTX_EBADQUERY, "$regex: invalid pattern at offset %zu: %s",
                    (size_t)eoff, (const char *)msg);
  }
  re->mctx = pcre2_match_context_create(NULL);
  if (!re->mctx) {
    dtx__regex_free(re);
    return dtx__err(DTX_ENOMEM, "out of memory compiling $regex");
  }
  pcre2_set_match_limit(re->mctx, MATCH_LIMIT);
  pcre2_set_depth_limit(re->mctx, DEPTH_LIMIT);
  /* JIT is several times faster; without it (an unsupported CPU) the
   * interpreter runs under the same limits. */
  re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
  *out = re;
  return 0;
}

void dtx__regex_free(dtx__regex_t *re) {
  if (!re)
    return;
  pcre2_match_context_free(re->mctx);
  pcre2_code_free(re->code);
  free(re);
}

int dtx__regex_match(const dtx__regex_t *re, const char *s, size_t n) {
  pcre2_match_data *md = pcre2_match_data_create(1, NULL);
  if (!md)
    return dtx__err(DTX_ENOMEM, "out of memory matching $regex");
  int r = pcre2_match(re->code, (PCRE2_SPTR)s, n, 0, 0, md, re->mctx);
  pcre2_match_data_free(md);
  if (r >= 0) /* 0: matched, the ovector was too small for the groups */
    return 1;
  switch (r) {
  case PCRE2_ERROR_NOMATCH:
    return 0;
  case PCRE2_ERROR_MATCHLIMIT:
  case PCRE2_ERROR_DEPTHLIMIT:
  case PCRE2_ERROR_HEAPLIMIT:
  case PCRE2_ERROR_JIT_STACKLIMIT:
    return dtx__err(DTX_EBADQUERY,
                    "$regex: the pattern exceeded PCRE2's backtracking limit "
                    "on a %zu-byte string; simplify it", n);
  default:
    if (r <= PCRE2_ERROR_UTF8_ERR1 && r >= PCRE2_ERROR_UTF8_ERR21)
      return 0; /* invalid UTF-8 cannot match, as in MongoDB */
    return dtx__err(DTX_EBADQUERY, "$regex: PCRE2 match error %d", r);
  }
}

/* Characters that end the literal run of a prefix. */
static int is_meta(char c) {
  return strchr("\\^$.|?*+()[]{}", c) != NULL;
}

/* The literal prefix an anchored pattern demands, as MongoDB derives its
 * index bounds: the pattern must start with ^ (or \A), the options must
 * not include i, m or x (which change what the letters or ^ mean), and
 * the prefix runs over plain characters up to the first metacharacter.  A
 * quantifier right after the run makes its last character optional, and
 * any | could make the anchor apply to one branch only, so both shorten
 * or cancel the prefix.  *prefix is malloc'd (NULL with *len 0 when there
 * is none). */
int dtx__regex_prefix(const char *pattern, size_t len, const char *options,
                      char **prefix, size_t *plen) {
  *prefix = NULL;
  *plen = 0;
  for (const char *o = options ? options : ""; *o; o++)
    if (*o == 'i' || *o == 'm' || *o == 'x')
      return 0;
  if (memchr(pattern, '|', len))
    return 0;
  size_t i;
  if (len >= 1 && pattern[0] == '^')
    i = 1;
  else if (len >= 2 && pattern[0] == '\\' && pattern[1] == 'A')
    i = 2;
  else
    return 0;
  size_t start = i;
  while (i < len && !is_meta(pattern[i]))
    i++;
  size_t n = i - start;
  if (n && i < len && strchr("?*{", pattern[i])) {
    /* "ab?": the b is optional.  In UTF mode the quantifier applies to a
     * whole character, so "é?" drops both bytes of the é: stepping back
     * one byte would leave its lead byte as a demanded prefix, and a
     * subject without the é (which matches) would fall outside the
     * index range.  Step back over continuation bytes (10xxxxxx). */
    do
      n--;
    while (n && ((unsigned char)pattern[start + n] & 0xC0) == 0x80);
  }
  if (!n)
    return 0;
  char *p = malloc(n + 1);
  if (!p)
    return dtx__err(DTX_ENOMEM, "out of memory reading a $regex prefix");
  memcpy(p, pattern + start, n);
  p[n] = '\0';
  *prefix = p;
  *plen = n;
  return 0;
}
