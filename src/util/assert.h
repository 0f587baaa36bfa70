/* assert.h -- DTX_ASSERT: invariants that run, in release builds too.
 *
 * DTX_ASSERT(cond, "T3") states what a function relies on or promises --
 * a protocol invariant as its file's header numbers it (T3, J2, L6...),
 * or a contract between layers ("store.modified<=matched") -- and checks
 * it on every run: NDEBUG does not remove it (docs/testing.md,
 * "Invariants that run").  When cond is false it prints
 *   doctx: assertion failed: T3: cond (src/txn/transfer/transfer.c:334)
 * to stderr and aborts.  An abort is a crash, and crash recovery already
 * finishes or rolls back whatever a crash leaves.
 *
 * Only a doctx bug may make cond false.  What user input or a tampered
 * store can make false is an error (DTX_E*) or an audit finding, never
 * an assert.  A check costs a predicted branch: no allocation and no walk
 * of a document on a hot path.  A check that needs one runs only where
 * DTX_DEBUG is 1 (no NDEBUG: the Debug build of the sanitizer stage),
 * as the kit's shape check after every move (docs/kit.md). */
#ifndef DTX_UTIL_ASSERT_H
#define DTX_UTIL_ASSERT_H

#define DTX_ASSERT(cond, id)                                                 \
  (__builtin_expect(!!(cond), 1)                                             \
       ? (void)0                                                             \
       : dtx__assert_fail((id), #cond, __FILE__, __LINE__))

#ifdef NDEBUG
#define DTX_DEBUG 0
#else
#define DTX_DEBUG 1
#endif

/* DTX_DEBUG as the library was built (a test's own may differ). */
extern const int dtx__assert_debug;

/* Prints the failure as above and aborts. */
_Noreturn void dtx__assert_fail(const char *id, const char *cond,
                                const char *file, int line)
    __attribute__((cold));

#endif
