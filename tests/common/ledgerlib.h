/* ledgerlib.h -- helpers shared by the ledger suites (tests/txn/ledger.c,
 * ledger_commit.c): clocks, printing, the ledger-only settled audit and a
 * 2-leg post. */
#ifndef DTX_TEST_LEDGERLIB_H
#define DTX_TEST_LEDGERLIB_H

#include <stdint.h>

#include "doctx.h"

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t dtx_t_mono_ms(void);

/* Prints "what: JSON" (v borrowed, may be NULL). */
void dtx_t_show(const char *what, const json_t *v);

/* v[k] as an integer (0 when absent). */
int64_t dtx_t_ival(const json_t *v, const char *k);

/* The settled audit finds nothing wrong with the ledger (a CHECK; the
 * other patterns' findings are not counted: the Redis suites share one
 * store). */
void dtx_t_lg_audit_ok(dtx_store_t *st);

/* Posts from -> to, value v (pending: held), entry id (NULL: generated);
 * the entry is dropped.  Returns dtx_ledger_post's rc. */
int dtx_t_lg_post2(dtx_store_t *st, const char *from, const char *to,
                   int64_t v, int pending, const char *id);

#endif
