/* test_break.c -- the test-only switch that disables ONE protocol check,
 * so the anomaly workload (tests/txn/multi_elle.c) can prove that its
 * checker sees what the check prevents (docs/transactions.md, "The
 * test-only break switch").
 *
 * DTX_TXN_TEST_BREAK is read once per process, at the first use:
 *   snapshot   reads ignore the snapshot timestamp: a document's latest
 *              committed body is read whatever its version (read skew,
 *              G-single);
 *   readlock   serializable takes no lock on what it read and did not
 *              write (snapshot isolation: write skew, G2).
 * It takes effect only in a process that armed it first with
 * dtx__txn_break_arm(), an internal function that no front door calls
 * (src/cli and src/server use include/doctx.h only, tests/layers.sh): in
 * the doctx command, doctxd or a program on the public API the variable
 * is ignored, with one line on stderr, and every check stays on. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txn/multi/multi.h"

static atomic_int armed;
static int mode; /* DTX__TXN_BREAK_*, set once under `once` */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_switch(void) {
  const char *s = getenv(DTX__TXN_BREAK_ENV);
  if (!s || !*s)
    return;
  int m = strcmp(s, "snapshot") == 0   ? DTX__TXN_BREAK_SNAPSHOT
          : strcmp(s, "readlock") == 0 ? DTX__TXN_BREAK_READLOCK
                                       : -1;
  if (!atomic_load(&armed) || m < 0) {
    fprintf(stderr, "doctx: %s=%.40s ignored: %s (docs/transactions.md)\n",
            DTX__TXN_BREAK_ENV, s,
            m < 0 ? "not snapshot or readlock"
                  : "a test-only switch, armed by the test suites only");
    return;
  }
  mode = m;
}

int dtx__txn_break(void) {
  pthread_once(&once, read_switch);
  return mode;
}

int dtx__txn_break_arm(void) {
  atomic_store(&armed, 1);
  return dtx__txn_break();
}
