/* txnlib.h -- what the C suites of the money patterns (tests/txn/
 * transfer_batch.c, transfer_declines.c, order_batch.c) share: the store
 * URI they run on, a store emptied of transfers, accounts and their
 * balances, the audit check, and a child crashed at a fault point.
 *
 * Every helper either checks (CHECK/CHECKF of testlib.h, counted against
 * the running test) or ends the program on a set-up step that must not
 * fail (exit 1, naming it): a suite's set-up is given, not tested. */
#ifndef DTX_TXNLIB_H
#define DTX_TXNLIB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "testlib.h"

/* The store URI of a suite run as `SUITE [STORE-URI]`: argv[1], else
 * sqlite::memory:.  A SQLite file given without options runs with
 * sync=off: these suites count outcomes, not durability, and a file's
 * fsyncs would be most of their time.  Points into argv or a static
 * buffer, valid for the whole program. */
const char *dtx_t_suite_uri(int argc, char **argv);

/* dtx_t_open(uri), then the transfer pattern's collections emptied
 * (dtx_t_drop_transfers); the caller closes it. */
dtx_store_t *dtx_t_fresh(const char *uri);

/* Creates account id holding bal (no other options), or ends the program
 * (exit 1, naming the account and the error). */
void dtx_t_account(dtx_store_t *st, const char *id, int64_t bal);

/* Account id's balance, or -999999 (no balance the suites expect) when it
 * cannot be read, so a missing account fails the comparison. */
int64_t dtx_t_balance(dtx_store_t *st, const char *id);

/* doc's member k when a string, else "-" (also for a NULL doc): safe to
 * print and to strcmp. */
const char *dtx_t_str(const json_t *doc, const char *k);

/* Checks that dtx_audit(st, flags) succeeds and reports ok, naming when;
 * a report that is not ok is printed to stderr. */
void dtx_t_audit_ok(dtx_store_t *st, const char *when, unsigned flags);

/* Runs run(cs, items, n) -- a call on the n requests at items -- in a
 * forked child on its own handle cs of uri, with DOCTX_FAULT=spec armed, and checks that the child died at the point
 * (exit 137, the crash action's status): a child whose store does not
 * open exits 3, one that returns from run without crashing exits 4, and
 * either fails the check, naming spec. */
void dtx_t_crash_child(const char *uri, const char *spec,
                       void (*run)(dtx_store_t *cs, const void *items,
                                   size_t n),
                       const void *items, size_t n);

/* Waits for the n children of pids (forked by the caller) and checks that
 * each exited 0; a pid that is not a child (fork failed) or cannot be
 * waited for fails the check and stops the waiting. */
void dtx_t_reap(const pid_t *pids, int n);

#endif
