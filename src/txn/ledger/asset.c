/* asset.c -- the asset of a ledger account (docs/ledger.md, "Assets"):
 * "CODE/SCALE", fixed when the account is created, and the rule that an
 * entry's legs are all in one asset.
 *
 * The asset is a field of the account written by its one insert
 * (ledger.account.create) and immutable afterwards for every writer
 * (ledger.c, account_moves), so the check a post makes against the
 * accounts it read still holds when its insert lands: no step, document
 * or fault point is added.  An account created without one (every
 * account of a store older than assets) has none, shown as no "asset"
 * field, and is the "unnamed" asset: it posts with other accounts that
 * have none, and never with one that has one. */
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/ledger/ledger.h"
#include "util/err.h"

int dtx__lg_check_asset(const char *asset) {
  const char *p = asset, *slash = asset ? strchr(asset, '/') : NULL;
  if (!asset)
    return 0;
  size_t n = slash ? (size_t)(slash - asset) : 0;
  int ok = slash && n >= 1 && n <= 16;
  for (; ok && p < slash; p++)
    ok = (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_';
  /* the scale: 0..18, no sign, no leading zero */
  const char *s = slash ? slash + 1 : NULL;
  ok = ok && s[0] >= '0' && s[0] <= '9' &&
       (s[1] == '\0' ||
        (s[0] == '1' && s[1] >= '0' && s[1] <= '8' && s[2] == '\0'));
  if (!ok)
    return dtx__err(DTX_EINVAL, "asset '%.40s': an asset is CODE/SCALE, "
                    "CODE 1..16 of [A-Z0-9_] and SCALE 0..18 (USD/2)",
                    asset);
  return 0;
}

int dtx_ledger_asset_check(const char *asset) {
  dtx__err_clear();
  return asset ? dtx__lg_check_asset(asset)
               : dtx__err(DTX_EINVAL, "no asset");
}

int dtx__lg_same_asset(const dtx_ledger_post_req_t *req, const json_t *accts) {
  const char *a0 = dtx__str(json_object_get(accts, req->legs[0].account),
                            "asset");
  for (size_t i = 1; i < req->nlegs; i++) {
    const char *a = dtx__str(json_object_get(accts, req->legs[i].account),
                             "asset");
    if (a0 ? !a || strcmp(a, a0) : a != NULL)
      return dtx__err(DTX_EINVAL, "the legs mix assets: account '%s' is in "
                      "%s, account '%s' in %s (an entry moves one asset)",
                      req->legs[0].account, a0 ? a0 : "no asset",
                      req->legs[i].account, a ? a : "no asset");
  }
  return 0;
}

void dtx__lg_name_asset(json_t *out, const json_t *acct) {
  json_t *a = json_object_get(acct, "asset");
  if (out && json_is_string(a))
    json_object_set(out, "asset", a);
}
