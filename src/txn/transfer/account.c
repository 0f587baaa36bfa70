/* account.c -- creating and reading the accounts that transfers move money
 * between.  An account's opening_balance is fixed at creation: money only
 * enters or leaves through it and through transfers, which is what lets
 * the audit prove conservation. */
#include <string.h>

#include "doc/doc.h"
#include "txn/transfer/transfer.h"
#include "util/err.h"

static int create(dtx_store_t *st, const char *id, const dtx_account_opts_t *o,
                  json_t **out) {
  dtx_account_opts_t none = {0};
  int rc;
  if (!o)
    o = &none; /* the zero value: balance 0, min_balance 0 */
  if ((rc = dtx__check_ident("account id", id)))
    return rc;
  if (!o->no_min_balance && o->balance < o->min_balance)
    return dtx__err(DTX_EINVAL, "balance %lld is below min_balance %lld",
                    (long long)o->balance, (long long)o->min_balance);
  if ((rc = dtx__kit_ensure(st, &dtx__transfer_pattern)))
    return rc;
  /* ceiling: balance + pending markers (none yet), transfer.c I7. */
  json_t *doc = json_pack("{s:s,s:I,s:o,s:I,s:I,s:[],s:[]}", "_id", id,
                          "balance", (json_int_t)o->balance, "min_balance",
                          o->no_min_balance ? json_null()
                                            : json_integer(o->min_balance),
                          "opening_balance", (json_int_t)o->balance, "ceiling",
                          (json_int_t)o->balance, "pending", "voids");
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

int dtx_account_create(dtx_store_t *st, const char *id,
                       const dtx_account_opts_t *opts, json_t **out) {
  dtx__call_t c;
  if (out)
    *out = NULL;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c, create(st, id, opts, out));
}

int dtx_account_get(dtx_store_t *st, const char *id, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  int rc;
  *out = NULL;
  dtx__call_begin(&c, 0);
  if ((rc = dtx__check_ident("account id", id)))
    return dtx__call_end(&c, rc);
  dtx__exec_init(&ex, st, NULL, 0, 0);
  rc = dtx__kit_get(&ex, DTX_ACCOUNTS, id, out);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOACCOUNT, "no account '%s'", id);
  return dtx__call_end(&c, rc);
}

int dtx_account_list(dtx_store_t *st, const dtx_page_t *page, json_t **out) {
  dtx__call_t c;
  dtx__call_begin(&c, 0);
  return dtx__call_end(&c,
                       dtx__kit_list(st, DTX_ACCOUNTS, NULL, NULL, page, out));
}
