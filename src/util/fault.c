/* fault.c -- the fault point registry and DOCTX_FAULT parsing.
 *
 * It sits in util/ because both the transaction patterns (src/txn/) and a
 * store backend (the Redis unique claims) have protocol steps, and the
 * store layer must not depend on txn/.  The table below is the single
 * list of points; a point not in it cannot be armed, and `doctx faults`
 * prints it.  Counting is per process and thread-safe, so "the N-th time"
 * is well defined under worker threads. */
#include "util/fault.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

static const char *const points[] = {
    /* transfer, forward path (transfer.c) */
    "transfer.submit",
    "transfer.claim",
    "transfer.debit",
    "transfer.mark_payee",
    "transfer.commit",
    "transfer.clear_payer",
    "transfer.credit_payee",
    "transfer.finish",
    /* transfer, rollback path (transfer.c) */
    "rollback.begin",
    "rollback.refund_payer",
    "rollback.unmark_payee",
    "rollback.finish",
    /* cancel (transfer.c) */
    "cancel.begin",
    /* recovery (recover.c) */
    "recover.takeover",
    "recover.scan_markers",
    "recover.repair_marker",
    "recover.clear_tombstone",
    /* Redis unique claims (store/redis/docs.c) */
    "redis.unique_claimed",
    "redis.unique_written",
    NULL,
};

enum { ACT_CRASH = 1, ACT_PAUSE, ACT_ERROR };
#define MAX_RULES 16

static struct rule {
  int point; /* index into points */
  int action;
  long nth;
} rules[MAX_RULES];
static int nrules;
static atomic_long hits[sizeof points / sizeof points[0]];
static atomic_int inited; /* 0 no, 1 yes */

const char *const *dtx__fault_points(void) { return points; }

static int point_index(const char *name, size_t len) {
  for (int i = 0; points[i]; i++)
    if (strlen(points[i]) == len && memcmp(points[i], name, len) == 0)
      return i;
  return -1;
}

static int parse(const char *spec) {
  char buf[1024];
  if (strlen(spec) >= sizeof buf)
    return dtx__err(DTX_EINVAL, "DOCTX_FAULT too long");
  strcpy(buf, spec);
  nrules = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    char *c1 = strchr(tok, ':');
    if (!c1)
      return dtx__err(DTX_EINVAL, "DOCTX_FAULT: '%s' is not POINT:ACTION[:N]",
                      tok);
    int p = point_index(tok, (size_t)(c1 - tok));
    if (p < 0)
      return dtx__err(DTX_EINVAL,
                      "DOCTX_FAULT: unknown fault point '%.*s' (see doctx faults)",
                      (int)(c1 - tok), tok);
    char *act = c1 + 1, *c2 = strchr(act, ':');
    long nth = 1;
    if (c2) {
      char *end;
      *c2 = '\0';
      nth = strtol(c2 + 1, &end, 10);
      if (*end || nth < 1)
        return dtx__err(DTX_EINVAL, "DOCTX_FAULT: bad count '%s'", c2 + 1);
    }
    int a = !strcmp(act, "crash")   ? ACT_CRASH
            : !strcmp(act, "pause") ? ACT_PAUSE
            : !strcmp(act, "error") ? ACT_ERROR
                                    : 0;
    if (!a)
      return dtx__err(DTX_EINVAL,
                      "DOCTX_FAULT: unknown action '%s' (crash, pause, error)",
                      act);
    if (nrules == MAX_RULES)
      return dtx__err(DTX_EINVAL, "DOCTX_FAULT: more than %d rules", MAX_RULES);
    rules[nrules++] = (struct rule){p, a, nth};
  }
  return 0;
}

int dtx__fault_init(void) {
  const char *spec = getenv("DOCTX_FAULT");
  int rc = (spec && *spec) ? parse(spec) : 0;
  if (rc)
    nrules = 0;
  atomic_store(&inited, 1);
  return rc;
}

int dtx__fault(const char *point) {
  if (!atomic_load(&inited))
    (void)dtx__fault_init(); /* the CLI validates DOCTX_FAULT up front */
  if (nrules == 0)
    return 0;
  int p = point_index(point, strlen(point));
  if (p < 0) {
    fprintf(stderr, "doctx: internal error: unregistered fault point %s\n",
            point);
    abort();
  }
  long n = atomic_fetch_add(&hits[p], 1) + 1;
  for (int i = 0; i < nrules; i++) {
    if (rules[i].point != p || rules[i].nth != n)
      continue;
    /* Say so on stderr: tests use it to prove the point was reached. */
    static const char *names[] = {"", "crash", "pause", "error"};
    fprintf(stderr, "doctx: fault: %s %s (arrival %ld)\n", point,
            names[rules[i].action], n);
    fflush(stderr);
    switch (rules[i].action) {
    case ACT_CRASH:
      _exit(137);
    case ACT_PAUSE:
      raise(SIGSTOP);
      break;
    case ACT_ERROR:
      return dtx__err(DTX_EFAULT, "injected error at fault point %s", point);
    }
  }
  return 0;
}

const char *const *dtx_fault_points(void) { return points; }
