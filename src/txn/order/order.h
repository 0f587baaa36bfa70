/* order.h -- internals shared by the files of the order pattern: order.c
 * (the state machine, the public order API, recovery and the method table),
 * many.c (dtx_order_confirm_many: the same steps of many orders in
 * lockstep) and audit.c (the pattern's audit).  The money an order moves is a
 * transfer of the transfer pattern (txn/transfer/), so its steps, markers
 * and conservation are the transfer's. */
#ifndef DTX_TXN_ORDER_H
#define DTX_TXN_ORDER_H

#include "txn/kit/kit.h"

#define DTX__ORDERS "orders"

/* Order states, as stored in the "state" field. */
#define DTX_OS_PENDING "pending"
#define DTX_OS_CONFIRMING "confirming"
#define DTX_OS_CONFIRMED "confirmed"
#define DTX_OS_SUCCESS "success"
#define DTX_OS_CANCELED "canceled"

/* The id prefix of every transfer that credits an order: attempt 1 is
 * "order:TRADE_ID", attempt n > 1 "order:TRADE_ID:n" (trade ids hold no
 * ':', so the two never collide). */
#define DTX__ORDER_TX_PREFIX "order:"

extern const dtx__kind_t dtx__order_kind;
extern const dtx__pattern_t dtx__order_pattern;

/* Parses a transfer id made by this pattern: 1 with the trade id (into
 * trade, at least 129 bytes) and the attempt (>= 1), 0 for any other id. */
int dtx__order_tx_parse(const char *txid, char *trade, int64_t *attempt);

/* 0, or DTX_EINVAL naming the malformed trade id. */
int dtx__order_check_id(const char *id);

/* The transfer id of attempt n (>= 1) of trade into buf (see O1). */
void dtx__order_tx_id(const char *trade, int64_t attempt, char *buf,
                      size_t n);

/* The pattern's collections, indexes and rules (and the transfer
 * pattern's), installed once per store. */
int dtx__order_ensure(dtx_store_t *st);

/* *out: order id (a checked trade id), DTX_ENOTFOUND naming it. */
int dtx__order_get(dtx__exec_t *ex, const char *id, json_t **out);

/* Drives order start (borrowed) toward success from wherever it stands:
 * claims a pending order, waits for or takes over one another executor
 * holds, credits, finishes.  success is the end (0, nothing credited by
 * this call when it was there already); canceled is DTX_ESTATE.  declines:
 * how many declined credits it may retry (1 for an explicit confirm).
 * *out: the order afterwards (also on error, when it could be read). */
int dtx__order_drive(dtx__exec_t *ex, const json_t *start, int declines,
                     json_t **out);

/* How a drive of order id ends with rc (this thread's detail): for an
 * error other than DTX_ESTATE, *out is the order re-read (o, stolen, when
 * it cannot be, or rc is DTX_EUNAVAILABLE) and the detail kept; else o.
 * Returns rc. */
int dtx__order_end(dtx__exec_t *ex, const char *id, int rc, json_t *o,
                   json_t **out);

/* What create checked of order o, checked again before its credit moves
 * money (O6): its account and settlement two distinct account ids, its
 * amount a positive integer, its transfer the current attempt's, and its
 * settlement account acct (borrowed; NULL: it does not exist) without a
 * lower limit.  0, or DTX_ESTATE naming what is wrong. */
int dtx__order_recheck(const json_t *o, const json_t *acct);

/* audit.c */
int dtx__order_audit(dtx__audit_t *a);

#endif
