/* fault.c -- fault point hits and DOCTX_FAULT parsing.
 *
 * It sits in util/ because both the transaction patterns (src/txn/) and a
 * store backend (the Redis unique claims) have protocol steps, and the
 * store layer must not depend on txn/.  Each layer lists its own points:
 * the store's are below, each pattern's in its method table, and
 * src/txn/frame/registry.c joins them for `doctx faults` and for the check of
 * DOCTX_FAULT (dtx_fault_check), so a point no table lists cannot be
 * armed.  Counting is per process and thread-safe, so "the N-th time" is
 * well defined under worker threads. */
#include "util/fault.h"

#include <signal.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/err.h"

/* The store layer's own points; the patterns' points are listed by their
 * method tables (src/txn/frame/registry.c joins them all for `doctx faults`). */
static const char *const store_points[] = {
    /* Redis unique claims (store/redis/write.c) */
    "redis.unique_claimed",
    "redis.unique_written",
    /* a write's reply lost after the server ran it, and its resend
     * (store/redis/exec.c; tests/redis/lost_reply.sh) */
    "redis.write_replied",
    "redis.write_resend",
    /* bulk writes (store/store.h, store/redis/bulk.c) */
    "store.bulk_op",
    "store.bulk_sent",
    /* a fenced write, before its atomic step (store/store_write.c):
     * Kleppmann's paused lock holder stops here */
    "fence.write",
    NULL,
};

enum { ACT_CRASH = 1, ACT_PAUSE, ACT_ERROR, ACT_LOST };
#define MAX_RULES 16

#define NAME_MAX_LEN 96

/* The first rule naming a point counts the arrivals there (hits); the
 * others on that point share its count, so "p:error:1,p:crash:2" means
 * the first and the second arrival at p. */
static struct rule {
  char point[NAME_MAX_LEN];
  int action;
  long nth;
  atomic_long hits;
} rules[MAX_RULES];
static int nrules;
static atomic_int inited;                /* 0 no, 1 yes */
static const char *const *known_points; /* set by a checked init */

const char *const *dtx__fault_store_points(void) { return store_points; }

static int is_known(const char *const *known, const char *name, size_t len) {
  for (size_t i = 0; known[i]; i++)
    if (strlen(known[i]) == len && memcmp(known[i], name, len) == 0)
      return 1;
  return 0;
}

static int parse(const char *spec, const char *const *known) {
  char buf[1024];
  if (strlen(spec) >= sizeof buf)
    return dtx__err(DTX_EINVAL, "DOCTX_FAULT too long");
  strcpy(buf, spec);
  nrules = 0;
  /* strtok_r below skips empty rules: "p:crash,,q:pause" or "," would
   * pass as fewer rules than were written. */
  size_t n = strlen(spec);
  if (spec[0] == ',' || spec[n - 1] == ',' || strstr(spec, ",,"))
    return dtx__err(DTX_EINVAL, "DOCTX_FAULT: an empty rule in '%.200s' "
                    "(POINT:ACTION[:N],...)", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    char *c1 = strchr(tok, ':');
    if (!c1)
      return dtx__err(DTX_EINVAL, "DOCTX_FAULT: '%s' is not POINT:ACTION[:N]",
                      tok);
    size_t plen = (size_t)(c1 - tok);
    if (plen == 0 || plen >= NAME_MAX_LEN ||
        (known && !is_known(known, tok, plen)))
      return dtx__err(DTX_EINVAL,
                      "DOCTX_FAULT: unknown fault point '%.*s' (see doctx faults)",
                      (int)plen, tok);
    char *act = c1 + 1, *c2 = strchr(act, ':');
    long nth = 1;
    if (c2) {
      char *end;
      *c2 = '\0';
      errno = 0;
      nth = strtol(c2 + 1, &end, 10);
      /* A count past 10^9 is a typo: no run arrives there. */
      if (*end || end == c2 + 1 || errno || nth < 1 || nth > 1000000000L)
        return dtx__err(DTX_EINVAL, "DOCTX_FAULT: bad count '%s' (1 to 1000000000)", c2 + 1);
    }
    int a = !strcmp(act, "crash")   ? ACT_CRASH
            : !strcmp(act, "pause") ? ACT_PAUSE
            : !strcmp(act, "error") ? ACT_ERROR
            : !strcmp(act, "lost")  ? ACT_LOST
                                    : 0;
    if (!a)
      return dtx__err(DTX_EINVAL,
                      "DOCTX_FAULT: unknown action '%s' (crash, pause, error, "
                      "lost)",
                      act);
    if (nrules == MAX_RULES)
      return dtx__err(DTX_EINVAL, "DOCTX_FAULT: more than %d rules", MAX_RULES);
    struct rule *r = &rules[nrules++];
    memcpy(r->point, tok, plen);
    r->point[plen] = '\0';
    r->action = a;
    r->nth = nth;
    atomic_store(&r->hits, 0);
  }
  return 0;
}

int dtx__fault_init(const char *const *known) {
  const char *spec = getenv("DOCTX_FAULT");
  int rc = (spec && *spec) ? parse(spec, known) : 0;
  if (rc)
    nrules = 0;
  known_points = rc ? NULL : known;
  atomic_store(&inited, 1);
  return rc;
}

/* The point whose reply is to be lost, until the step's operation ends. */
static _Thread_local const char *lose_reply;

int dtx__fault_lost(int rc) {
  const char *p = lose_reply;
  lose_reply = NULL;
  if (!p || rc != 0)
    return rc;
  return dtx__err(DTX_EUNAVAILABLE, "injected lost reply at fault point %s "
                  "(the write was applied)", p);
}

/* A point inside another step's store operation (the Redis transport's):
 * the enclosing step's pending lost reply must survive it. */
int dtx__fault_inner(const char *point, int *lost) {
  const char *outer = lose_reply;
  int rc = dtx__fault(point);
  if (lost)
    *lost = rc == 0 && lose_reply != NULL;
  lose_reply = outer;
  return rc;
}

int dtx__fault(const char *point) {
  lose_reply = NULL;
  if (!atomic_load(&inited))
    (void)dtx__fault_init(NULL); /* the CLI checks DOCTX_FAULT up front */
  if (nrules == 0)
    return 0;
  if (known_points && !is_known(known_points, point, strlen(point))) {
    fprintf(stderr, "doctx: internal error: unregistered fault point %s\n",
            point);
    abort();
  }
  int first = 0;
  while (first < nrules && strcmp(rules[first].point, point) != 0)
    first++;
  if (first == nrules)
    return 0;
  long n = atomic_fetch_add(&rules[first].hits, 1) + 1;
  for (int i = first; i < nrules; i++) {
    if (rules[i].nth != n || strcmp(rules[i].point, point) != 0)
      continue;
    /* Say so on stderr: tests use it to prove the point was reached. */
    static const char *names[] = {"", "crash", "pause", "error", "lost"};
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
    case ACT_LOST:
      lose_reply = rules[i].point; /* static storage: outlives the step */
      break;
    }
  }
  return 0;
}
