/* fault.h -- named fault points for crash, pause and error injection.
 *
 * Every step of every protocol calls DTX_FAULTPOINT("transfer.debit") just
 * before its store operation: the transaction patterns in src/txn/ and the
 * store backends' own multi-step protocols (the Redis unique claims), so
 * the registry lives in util/, below both layers.
 * DOCTX_FAULT=POINT:ACTION[:N][,...] turns the N-th arrival (default 1) at
 * POINT into:
 *   crash  _exit(137) at once, as a SIGKILL would;
 *   pause  raise(SIGSTOP): the process waits for SIGCONT;
 *   error  the step's store operation fails with DTX_EFAULT, as a backend
 *          error would.
 * Points are listed in fault.c's table, so `doctx faults` (and the crash
 * tests that loop over it) see every point; naming an unknown point is a
 * program error caught by an assertion in debug builds and reported as
 * DTX_EINVAL when parsing DOCTX_FAULT. */
#ifndef DTX_UTIL_FAULT_H
#define DTX_UTIL_FAULT_H

/* Returns 0, or DTX_EFAULT when this arrival is to fail (after crash and
 * pause actions, which do not return / return 0 after SIGCONT). */
int dtx__fault(const char *point);
#define DTX_FAULTPOINT(name) dtx__fault(name)

/* NULL-terminated list of every point, in protocol order. */
const char *const *dtx__fault_points(void);

/* Parses DOCTX_FAULT now (it is otherwise read once, on first use);
 * DTX_EINVAL with a detail on a malformed value or unknown point. */
int dtx__fault_init(void);

#endif
