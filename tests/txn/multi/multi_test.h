/* multi_test.h -- what tests/txn/multi.c shares with the files of the
 * same suite under tests/txn/multi/ (linked into txn_multi; the suite's
 * main is multi.c's). */
#ifndef DTX_TEST_TXN_MULTI_H
#define DTX_TEST_TXN_MULTI_H

#include <stdint.h>

#include "doctx.h"

extern const char *uri; /* the store under test (argv[1]) */

/* Drops every collection the suite uses (its own and the pattern's). */
void drop_all(dtx_store_t *st);
/* The integer field k of d (0 when absent). */
int64_t num(const json_t *d, const char *k);

/* The bank (bank.c). */
void test_bank(void);

#endif
