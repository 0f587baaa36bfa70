/* account.c -- creating and reading the accounts that transfers move money
 * between.  An account's opening_balance is fixed at creation: money only
 * enters or leaves through it and through transfers, which is what lets
 * the audit prove conservation. */
#include <string.h>

#include "doc/doc.h"
#include "txn/txn.h"
#include "util/err.h"

int dtx__check_ident(const char *what, const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n > 128)
    return dtx__err(DTX_EINVAL, "%s must be 1 to 128 characters", what);
  for (size_t i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.' || c == ':' ||
          c == '-'))
      return dtx__err(DTX_EINVAL,
                      "%s '%s' may only contain A-Z a-z 0-9 _ . : -", what, id);
  }
  return 0;
}

int dtx_account_create(dtx_store_t *st, const char *id, int64_t balance,
                       int has_min, int64_t min_balance, json_t **out) {
  int rc;
  if (out)
    *out = NULL;
  dtx__err_clear();
  if ((rc = dtx__check_ident("account id", id)))
    return rc;
  if (has_min && balance < min_balance)
    return dtx__err(DTX_EINVAL, "balance %lld is below min_balance %lld",
                    (long long)balance, (long long)min_balance);
  if ((rc = dtx__txn_ensure_indexes(st)))
    return rc;
  json_t *doc = json_pack("{s:s,s:I,s:o,s:I,s:[],s:[]}", "_id", id, "balance",
                          (json_int_t)balance, "min_balance",
                          has_min ? json_integer(min_balance) : json_null(),
                          "opening_balance", (json_int_t)balance, "pending",
                          "voids");
  if (!doc)
    return DTX_ENOMEM;
  rc = dtx_store_insert(st, DTX_ACCOUNTS, doc, NULL);
  if (rc == DTX_EDUPKEY)
    rc = dtx__err(DTX_EDUPKEY, "account '%s' exists", id);
  if (rc == 0 && out)
    *out = json_incref(doc);
  json_decref(doc);
  return rc;
}

int dtx_account_get(dtx_store_t *st, const char *id, json_t **out) {
  json_t *docs = NULL, *filter;
  int rc;
  *out = NULL;
  dtx__err_clear();
  if ((rc = dtx__check_ident("account id", id)))
    return rc;
  if (!(filter = json_pack("{s:s}", "_id", id)))
    return DTX_ENOMEM;
  rc = dtx_store_find(st, DTX_ACCOUNTS, filter, NULL, &docs);
  json_decref(filter);
  if (rc)
    return rc;
  if (json_array_size(docs) == 0)
    rc = dtx__err(DTX_ENOACCOUNT, "no account '%s'", id);
  else
    *out = json_incref(json_array_get(docs, 0));
  json_decref(docs);
  return rc;
}

int dtx_account_list(dtx_store_t *st, json_t **out) {
  json_t *sort = json_pack("{s:i}", "_id", 1);
  dtx_find_opts_t o = {.sort = sort};
  dtx__err_clear();
  int rc = dtx_store_find(st, DTX_ACCOUNTS, NULL, &o, out);
  json_decref(sort);
  return rc;
}
