/* fault.h -- named fault points for crash, pause and error injection.
 *
 * Every step of every protocol calls DTX_FAULTPOINT("transfer.debit") just
 * before its store operation: the transaction patterns in src/txn/ and the
 * store backends' own multi-step protocols (the Redis unique claims), so
 * the hook lives in util/, below both layers.
 * DOCTX_FAULT=POINT:ACTION[:N][,...] turns the N-th arrival (default 1) at
 * POINT into:
 *   crash  _exit(137) at once, as a SIGKILL would;
 *   pause  raise(SIGSTOP): the process waits for SIGCONT;
 *   error  the step's store operation fails with DTX_EFAULT, as a backend
 *          error would;
 *   lost   the step's store operation is applied, and then its reply is
 *          lost: the step sees DTX_EUNAVAILABLE (a Redis ?wait=N timeout
 *          or a dropped connection after the master applied the write).
 *          Only steps that call dtx__fault_lost after their operation
 *          (the kit's) can lose a reply; elsewhere it does nothing.
 * Each layer lists its points (fault.c has the store's; each pattern's
 * method table has its own) and src/txn/frame/registry.c joins the lists, so
 * `doctx faults` -- and the crash tests that loop over it -- see every
 * point.  Arming a point no list names is DTX_EINVAL (dtx_fault_check);
 * reaching an unlisted point while faults are armed is a program error
 * (abort). */
#ifndef DTX_UTIL_FAULT_H
#define DTX_UTIL_FAULT_H

/* Returns 0, or DTX_EFAULT when this arrival is to fail (after crash and
 * pause actions, which do not return / return 0 after SIGCONT). */
int dtx__fault(const char *point);
#define DTX_FAULTPOINT(name) dtx__fault(name)

/* After the store operation of the step whose point was just reached:
 * rc, or DTX_EUNAVAILABLE when that arrival is armed "lost" and the
 * operation succeeded (rc 0).  Per thread. */
int dtx__fault_lost(int rc);

/* dtx__fault for a point reached inside another step's store operation
 * (the store's points: fence.write, store.bulk_op, redis.*): *lost (may
 * be NULL) is 1 when this arrival is armed "lost", and the enclosing
 * kit step's own pending lost reply (dtx__fault_lost) is left as it was
 * -- a step armed "lost" whose write passed an inner point lost nothing
 * before. */
int dtx__fault_inner(const char *point, int *lost);
#define DTX_FAULTPOINT_INNER(name) dtx__fault_inner(name, NULL)

/* NULL-terminated list of the store layer's points (static storage). */
const char *const *dtx__fault_store_points(void);

/* Parses DOCTX_FAULT now (it is otherwise read on first use, unchecked).
 * known (NULL-terminated, static storage, may be NULL) lists every point
 * that may be named: any other is DTX_EINVAL with a detail, as is a
 * malformed value. */
int dtx__fault_init(const char *const *known);

#endif
