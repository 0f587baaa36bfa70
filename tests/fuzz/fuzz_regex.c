/* fuzz_regex.c -- libFuzzer target for $regex: patterns, $options and the
 * anchored-prefix reader the planners use.
 *
 * The input is "<pattern>\n<options>\n<subject>".  The pattern goes to PCRE2
 * through the filter compiler ({s: {$regex, $options}}); compilation must
 * succeed or fail with DTX_EBADQUERY, and a match must answer 0 or 1, or
 * report an error through dtx__filter_error, within PCRE2's limits.  The
 * prefix reader must return a prefix that every matching subject starts
 * with (that is what makes an index range safe).
 *
 * Build: clang -fsanitize=fuzzer,address,undefined ... (CMake: DTX_FUZZ=ON).
 */
#include "doc/doc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *t = (const char *)data;
  const char *nl1 = memchr(t, '\n', size);
  if (!nl1)
    return 0;
  const char *nl2 = memchr(nl1 + 1, '\n', size - (size_t)(nl1 + 1 - t));
  if (!nl2)
    return 0;
  size_t plen = (size_t)(nl1 - t), olen = (size_t)(nl2 - nl1 - 1);
  size_t slen = size - (size_t)(nl2 + 1 - t);
  char *opts = strndup(nl1 + 1, olen);
  json_t *pat = json_stringn(t, plen), *subj = json_stringn(nl2 + 1, slen);
  if (!opts || !pat || !subj || strlen(opts) != olen)
    goto out;
  json_t *spec = json_pack("{s{sOss}}", "s", "$regex", pat, "$options", opts);
  json_t *doc = json_pack("{sO}", "s", subj);
  dtx__filter_t *f = NULL;
  int rc = spec ? dtx__filter_compile(spec, &f) : -1;
  if (rc && rc != DTX_EBADQUERY && rc != DTX_ENOMEM && spec)
    abort();
  int m = 0;
  if (rc == 0) {
    m = dtx__filter_match(f, doc);
    if (m != 0 && m != 1)
      abort();
    int err = dtx__filter_error(f);
    if (err && (err != DTX_EBADQUERY || m))
      abort();
  }
  char *prefix = NULL;
  size_t n = 0;
  if (dtx__regex_prefix(t, plen, opts, &prefix, &n) == 0 && prefix && m &&
      (slen < n || memcmp(nl2 + 1, prefix, n)))
    abort(); /* a match outside the range would be missed by an index */
  free(prefix);
  dtx__filter_free(f);
  json_decref(spec);
  json_decref(doc);
out:
  free(opts);
  json_decref(pat);
  json_decref(subj);
  return 0;
}
