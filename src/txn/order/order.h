/* order.h -- internals shared by the files of the order pattern: order.c
 * (the state machine, the public order API, recovery and the method table)
 * and audit.c (the pattern's audit).  The money an order moves is a
 * transfer of the transfer pattern (txn/transfer/), so its steps, markers
 * and conservation are the transfer's. */
#ifndef DTX_TXN_ORDER_H
#define DTX_TXN_ORDER_H

#include "txn/kit.h"

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

/* audit.c */
int dtx__order_audit(dtx__audit_t *a);

#endif
