/* ledger_commit.c -- the ledger's committer (src/txn/ledger/commit.c)
 * through the public C API on a real store:
 *  1. the committer's levels (commit.c): a round commits the entries with
 *     no predecessor in the round in one bulk write, then their
 *     successors, and so on.  One entry of the first level is made to
 *     fail its commit for good (a field its validator refuses, set with
 *     the validator bypassed): the 16 independent entries of that level
 *     commit, the failed one and the 7 entries chained behind it on its
 *     account stay uncommitted (L6: committing one of them would commit
 *     an entry before its predecessor), and once it is repaired the next
 *     pass commits the rest and the settled audit is clean.
 *  2. committers at once: two worker processes and recovery passes while
 *     posters post, void, expire and reverse; a sampler flags any entry
 *     committed before a predecessor (L6) or a cache over an uncommitted
 *     entry (L7) at any moment; then recovery, the settled audit, sum 0;
 *  3. a failed commit's detail names the entry and the store's reason;
 *  4. a gap in one account's seqIds holds back that account only;
 *  5. caches that would overflow: DTX_EOVERFLOW naming the account, never
 *     a wrapped cache;
 *  6. a cache edited past a pending entry does not get its successor
 *     committed before it.
 *
 * usage: txn_ledger_commit STORE-URI   (the ledger collections are dropped
 * first) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "doc/doc.h"
#include "ledgerlib.h"
#include "txn/ledger/ledger.h" /* dtx__lg_scan_limits */
#include "testlib.h"
#include "util/err.h"

static const char *uri;

static dtx_store_t *open_store(void) { return dtx_t_open(uri); }

/* ---- 1. the committer's levels ----------------------------------------------- */

/* Writes update u (stolen) to document id of coll past the rules, as a
 * tampered or broken store holds it. */
static void force(dtx_store_t *st, const char *coll, const char *id,
                  json_t *u) {
  json_t *f = json_pack("{s:s}", "_id", id);
  dtx_update_result_t ur;
  CHECK_RC(dtx_store_update(st, coll, f, u,
                            &(dtx_update_opts_t){.bypass_validation = 1}, &ur),
           0);
  json_decref(f);
  json_decref(u);
}

static const char *proc_of(dtx_store_t *st, const char *id) {
  static char buf[32];
  json_t *e = NULL;
  buf[0] = 0;
  if (dtx_ledger_get(st, id, &e) == 0)
    snprintf(buf, sizeof buf, "%s",
             json_string_value(json_object_get(e, "proc")));
  json_decref(e);
  return buf;
}

static void test_commit_levels(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  char a[32], b[32], id[32];
  /* c00: HOT -> Z0; c01..c16: Xi -> Yi (independent); c17..c23: HOT ->
   * Zk, chained behind c00 on HOT.  One round plans them all (creation
   * order, then _id). */
  CHECK_RC(dtx_ledger_account_create(st, "LV-HOT", &none, NULL), 0);
  for (int i = 0; i < 24; i++) {
    snprintf(id, sizeof id, "c%02d", i);
    if (i >= 1 && i <= 16) {
      snprintf(a, sizeof a, "LV-X%d", i);
      snprintf(b, sizeof b, "LV-Y%d", i);
      CHECK_RC(dtx_ledger_account_create(st, a, &none, NULL), 0);
    } else {
      snprintf(a, sizeof a, "LV-HOT");
      snprintf(b, sizeof b, "LV-Z%d", i);
    }
    CHECK_RC(dtx_ledger_account_create(st, b, NULL, NULL), 0);
    CHECK_RC(dtx_t_lg_post2(st, a, b, 10 + i, 0, id), 0);
  }
  /* c00's commit fails for good: its validator refuses "note". */
  force(st, DTX_LEDGER_ENTRIES, "c00",
        json_pack("{s:{s:s}}", "$set", "note", "tampered"));
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  json_t *sum = NULL;
  int rc = dtx_recover(st, &ro, &sum);
  /* Reported, naming the entry. */
  CHECKF(rc != 0 && strstr(dtx_errdetail(), "'c00'"), "recover: %s %s",
         dtx_errname(rc), dtx_errdetail());
  json_decref(sum);
  CHECKF(strcmp(proc_of(st, "c00"), "uncommitted") == 0, "c00: %s",
         proc_of(st, "c00"));
  for (int i = 1; i < 24; i++) {
    snprintf(id, sizeof id, "c%02d", i);
    const char *want = i <= 16 ? "committed" : "uncommitted";
    CHECKF(strcmp(proc_of(st, id), want) == 0, "%s: %s, want %s", id,
           proc_of(st, id), want);
  }
  /* Repaired: the next pass commits the rest. */
  force(st, DTX_LEDGER_ENTRIES, "c00",
        json_pack("{s:{s:s}}", "$unset", "note", ""));
  ro.older_than_ms = 0;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  for (int i = 0; i < 24; i++) {
    snprintf(id, sizeof id, "c%02d", i);
    CHECKF(strcmp(proc_of(st, id), "committed") == 0, "%s: %s", id,
           proc_of(st, id));
  }
  json_t *bal = NULL;
  CHECK_RC(dtx_ledger_balance(st, "LV-HOT", DTX_LEDGER_LATEST, &bal), 0);
  CHECKF(dtx_t_ival(bal, "balance") == -(10 + 27 + 28 + 29 + 30 + 31 + 32 + 33) &&
             dtx_t_ival(bal, "seq") == 8,
         "LV-HOT: balance %lld seq %lld", (long long)dtx_t_ival(bal, "balance"),
         (long long)dtx_t_ival(bal, "seq"));
  json_decref(bal);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

/* ---- 2. committers at once, sampled ------------------------------------------ */

/* Two forked processes run workers (one serving with 2 threads until told
 * to stop, one looping --once passes with 2 threads) and a thread here
 * runs recovery passes, while 2 poster threads post among 3 hot accounts
 * and 6 independent pairs: plain posts, pending ones posted, voided or
 * left to expire, and reversals.  A sampler reads every entry (S1), the
 * accounts, then every entry again (S2): a committed entry of S1 whose
 * predecessor is not committed in S2 was committed before it (L6; the
 * successor is read first, so a consistent snapshot would show the
 * same); a cache covering an entry not committed in S2, or whose balance
 * differs from its posted legs up to it, breaks L7.  The non-settled
 * audit runs now and then too.  Afterwards, once the pending entries
 * have expired: recovery commits everything, the settled audit is clean
 * and the balances sum to zero. */

#define CM_HOT 3
#define CM_PAIRS 6

static atomic_int cm_stop, cm_l6, cm_l7, cm_samples, cm_audits, cm_findings,
    cm_errors, cm_sample_ms;
static int cm_quick;

static void cm_acct(char *buf, size_t n, int i) {
  if (i < CM_HOT)
    snprintf(buf, n, "CM-H%d", i);
  else
    snprintf(buf, n, "CM-%c%d", (i - CM_HOT) % 2 ? 'Y' : 'X', (i - CM_HOT) / 2);
}
#define CM_NACCTS (CM_HOT + 2 * CM_PAIRS)

static void cm_error(const char *what, int rc) {
  if (atomic_fetch_add(&cm_errors, 1) < 5)
    printf("committers: %s: %s %s\n", what, dtx_errname(rc), dtx_errdetail());
}

typedef struct cm_poster {
  int64_t until;
  unsigned seed;
  int n;
} cm_poster_t;

static void *cm_post(void *arg) {
  cm_poster_t *p = arg;
  dtx_store_t *st = open_store();
  char last[64] = "", id[64];
  int k = 0;
  unsigned tag = p->seed;
  while (dtx_t_mono_ms() < p->until) {
    int a, b, kind = (int)(rand_r(&p->seed) % 10);
    int pair = (int)(rand_r(&p->seed) % CM_PAIRS);
    switch (rand_r(&p->seed) % 3) {
    case 0: /* hot to hot */
      a = (int)(rand_r(&p->seed) % CM_HOT);
      b = (a + 1 + (int)(rand_r(&p->seed) % (CM_HOT - 1))) % CM_HOT;
      break;
    case 1: /* an independent pair */
      a = CM_HOT + 2 * pair;
      b = a + 1;
      break;
    default: /* hot to a pair's account */
      a = (int)(rand_r(&p->seed) % CM_HOT);
      b = CM_HOT + 2 * pair + (int)(rand_r(&p->seed) % 2);
    }
    char x[16], y[16];
    cm_acct(x, sizeof x, a);
    cm_acct(y, sizeof y, b);
    int64_t v = 1 + rand_r(&p->seed) % 50;
    dtx_ledger_leg_t legs[] = {{x, -v}, {y, v}};
    snprintf(id, sizeof id, "cm-%u-%d", tag, k++);
    dtx_ledger_post_req_t req = {.id = id, .legs = legs, .nlegs = 2};
    json_t *e = NULL;
    int rc;
    if (kind == 9 && last[0]) {
      rc = dtx_ledger_reverse(st, last, NULL, NULL, &e);
      last[0] = 0;
    } else {
      req.pending = kind >= 6 && kind <= 8;
      req.timeout_ms = kind == 8   ? 1 + rand_r(&p->seed) % 30
                       : req.pending ? DTX_LEDGER_TIMEOUT_MS
                                     : 0;
      rc = dtx_ledger_post(st, &req, NULL, &e);
      json_decref(e);
      e = NULL;
      if (rc == 0 && kind == 6)
        rc = dtx_ledger_post_pending(st, id, &e);
      else if (rc == 0 && kind == 7)
        rc = dtx_ledger_void(st, id, &e);
      if (rc == 0 && kind < 6)
        snprintf(last, sizeof last, "%s", id);
    }
    json_decref(e);
    if (rc == 0)
      p->n++;
    else if (!(kind == 9 && rc == DTX_ESTATE))
      cm_error("post", rc);
  }
  dtx_store_close(st);
  return NULL;
}

static void *cm_recover(void *arg) {
  (void)arg;
  dtx_store_t *st = open_store();
  for (int i = 0; !atomic_load(&cm_stop); i++) {
    dtx_recover_opts_t ro = {.older_than_ms = i % 2 ? 0 : -1};
    json_t *sum = NULL;
    int rc = dtx_recover(st, &ro, &sum);
    json_decref(sum);
    if (rc)
      cm_error("recover", rc);
    usleep(10000);
  }
  dtx_store_close(st);
  return NULL;
}

/* key "account\nseqId" -> the leg's entry, over entries (borrowed) */
static json_t *cm_index(const json_t *entries) {
  json_t *ix = json_object(), *e, *leg;
  size_t i, j;
  char key[192];
  json_array_foreach(entries, i, e) {
    json_array_foreach(json_object_get(e, "changes"), j, leg) {
      snprintf(key, sizeof key, "%s\n%lld",
               json_string_value(json_object_get(leg, "account")),
               (long long)dtx_t_ival(leg, "seqId"));
      json_object_set(ix, key, e);
    }
  }
  return ix;
}

static const json_t *cm_leg(const json_t *e, const char *a) {
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(e, "changes"), i, l) {
    const char *x = json_string_value(json_object_get(l, "account"));
    if (x && strcmp(x, a) == 0)
      return l;
  }
  return NULL;
}

static int cm_committed(const json_t *e) {
  const char *p = json_string_value(json_object_get(e, "proc"));
  return p && strcmp(p, "committed") == 0;
}

/* One sample: S1, accounts, S2 (see above). */
static void cm_sample(dtx_store_t *st) {
  json_t *s1 = NULL, *accts = NULL, *s2 = NULL, *e, *leg;
  int64_t t0 = dtx_t_mono_ms();
  size_t i, j;
  char key[192];
  /* Only this test's accounts and entries: the reads stay short. */
  json_t *ids = json_array();
  for (int k = 0; k < CM_NACCTS; k++) {
    char a[16];
    cm_acct(a, sizeof a, k);
    json_array_append_new(ids, json_string(a));
  }
  json_t *fe = json_pack("{s:{s:O}}", "changes.account", "$in", ids);
  json_t *fa = json_pack("{s:{s:o}}", "_id", "$in", ids);
  int rc = dtx_store_find(st, DTX_LEDGER_ENTRIES, fe, NULL, &s1) ||
           dtx_store_find(st, DTX_LEDGER_ACCOUNTS, fa, NULL, &accts) ||
           dtx_store_find(st, DTX_LEDGER_ENTRIES, fe, NULL, &s2);
  json_decref(fe);
  json_decref(fa);
  if (rc) {
    cm_error("sample", DTX_EBACKEND);
    goto out;
  }
  json_t *ix = cm_index(s2);
  json_array_foreach(s1, i, e) {
    if (!cm_committed(e))
      continue;
    json_array_foreach(json_object_get(e, "changes"), j, leg) {
      int64_t s = dtx_t_ival(leg, "seqId");
      const char *a = json_string_value(json_object_get(leg, "account"));
      snprintf(key, sizeof key, "%s\n%lld", a, (long long)s - 1);
      const json_t *pre = s > 1 ? json_object_get(ix, key) : NULL;
      if (s > 1 && !cm_committed(pre)) {
        if (atomic_fetch_add(&cm_l6, 1) < 5)
          printf("L6: entry %s committed (S1) before %s's seqId %lld "
                 "(entry %s, %s in S2)\n",
                 json_string_value(json_object_get(e, "_id")), a,
                 (long long)s - 1,
                 pre ? json_string_value(json_object_get(pre, "_id")) : "-",
                 pre ? json_string_value(json_object_get(pre, "proc")) : "-");
      }
    }
  }
  json_array_foreach(accts, i, e) {
    const char *a = json_string_value(json_object_get(e, "_id"));
    json_t *cache = json_object_get(e, "cache");
    int64_t c = dtx_t_ival(cache, "seqId"), bal = 0;
    for (int64_t s = 1; s <= c; s++) {
      snprintf(key, sizeof key, "%s\n%lld", a, (long long)s);
      const json_t *x = json_object_get(ix, key);
      const char *state = json_string_value(json_object_get(x, "state"));
      if (!cm_committed(x)) {
        if (atomic_fetch_add(&cm_l7, 1) < 5)
          printf("L7: %s's cache at seqId %lld covers seqId %lld, not "
                 "committed\n", a, (long long)c, (long long)s);
        break;
      }
      if (state && strcmp(state, "posted") == 0)
        bal += dtx_t_ival(cm_leg(x, a), "value");
    }
    if (bal != dtx_t_ival(cache, "balance") && atomic_fetch_add(&cm_l7, 1) < 5)
      printf("L7: %s's cache balance %lld at seqId %lld, its posted legs "
             "sum to %lld\n", a, (long long)dtx_t_ival(cache, "balance"),
             (long long)c, (long long)bal);
  }
  json_decref(ix);
  atomic_fetch_add(&cm_samples, 1);
  atomic_fetch_add(&cm_sample_ms, (int)(dtx_t_mono_ms() - t0));
out:
  json_decref(s1);
  json_decref(accts);
  json_decref(s2);
}

static void *cm_sampler(void *arg) {
  (void)arg;
  dtx_store_t *st = open_store();
  for (int i = 0; !atomic_load(&cm_stop); i++) {
    cm_sample(st);
    if (i % 4 == 3) { /* the audit at any time: no ledger finding either */
      json_t *rep = NULL, *f;
      size_t k;
      int rc = dtx_audit(st, 0, &rep);
      if (rc && rc != DTX_EAUDIT)
        cm_error("audit", rc);
      json_array_foreach(json_object_get(rep, "findings"), k, f) {
        const char *p = json_string_value(json_object_get(f, "pattern"));
        if (p && strcmp(p, "ledger") == 0 &&
            atomic_fetch_add(&cm_findings, 1) < 5)
          dtx_t_show("audit during the run", f);
      }
      json_decref(rep);
      atomic_fetch_add(&cm_audits, 1);
    }
    usleep(2000); /* leave the store to the posters and committers too */
  }
  dtx_store_close(st);
  return NULL;
}

static volatile int cm_halt;
static int64_t cm_until;

static void *cm_timer(void *arg) {
  (void)arg;
  while (dtx_t_mono_ms() < cm_until)
    usleep(20000);
  cm_halt = 1;
  return NULL;
}

/* A committer process: serving workers (which 0) or --once passes (1)
 * until `until`; exits 0, or 1 after an error. */
static void cm_committer(int which, int64_t until) {
  dtx_store_t *st = open_store();
  int rc = 0;
  if (which == 0) {
    pthread_t t;
    cm_until = until;
    pthread_create(&t, NULL, cm_timer, NULL);
    rc = dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 2, .stop = &cm_halt},
                        NULL);
    pthread_join(t, NULL);
  } else {
    while (rc == 0 && dtx_t_mono_ms() < until) {
      rc = dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 2, .once = 1},
                          NULL);
      usleep(5000);
    }
  }
  if (rc)
    printf("committer %d: %s %s\n", which, dtx_errname(rc), dtx_errdetail());
  fflush(NULL);
  dtx_store_close(st);
  _exit(rc ? 1 : 0);
}

static void test_committers(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  char a[16];
  for (int i = 0; i < CM_NACCTS; i++) {
    cm_acct(a, sizeof a, i);
    CHECK_RC(dtx_ledger_account_create(st, a, &none, NULL), 0);
  }
  int64_t until = dtx_t_mono_ms() + (cm_quick ? 800 : 2500);
  pid_t pids[2];
  fflush(NULL);
  for (int w = 0; w < 2; w++)
    if ((pids[w] = fork()) == 0)
      cm_committer(w, until);
  pthread_t pth[2], rth, sth;
  cm_poster_t ps[2] = {{until, 11, 0}, {until, 23, 0}};
  for (int i = 0; i < 2; i++)
    pthread_create(&pth[i], NULL, cm_post, &ps[i]);
  pthread_create(&rth, NULL, cm_recover, NULL);
  pthread_create(&sth, NULL, cm_sampler, NULL);
  for (int i = 0; i < 2; i++)
    pthread_join(pth[i], NULL);
  for (int w = 0; w < 2; w++) {
    int status = 0;
    CHECKF(pids[w] > 0 && waitpid(pids[w], &status, 0) == pids[w] &&
               WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "committer process %d: status %d", w, status);
  }
  atomic_store(&cm_stop, 1);
  pthread_join(rth, NULL);
  pthread_join(sth, NULL);
  cm_sample(st); /* and once at rest */
  printf("committers: %d posted, %d samples (%d ms), %d audits\n",
         ps[0].n + ps[1].n, atomic_load(&cm_samples),
         atomic_load(&cm_sample_ms), atomic_load(&cm_audits));
  CHECK(ps[0].n + ps[1].n > 0 && atomic_load(&cm_samples) > 1);
  CHECKF(atomic_load(&cm_l6) == 0, "%d entries committed before a "
         "predecessor", atomic_load(&cm_l6));
  CHECKF(atomic_load(&cm_l7) == 0, "%d caches over uncommitted or wrong",
         atomic_load(&cm_l7));
  CHECKF(atomic_load(&cm_findings) == 0, "%d audit findings during the run",
         atomic_load(&cm_findings));
  CHECKF(atomic_load(&cm_errors) == 0, "%d errors", atomic_load(&cm_errors));
  usleep(40000); /* the last pending entries' timeouts pass */
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  dtx_t_lg_audit_ok(st);
  json_t *rest = NULL;
  int64_t total = 0, unc = -1;
  CHECK_RC(dtx_store_count(st, DTX_LEDGER_ENTRIES,
                           rest = json_pack("{s:s}", "proc", "uncommitted"),
                           &unc), 0);
  json_decref(rest);
  CHECKF(unc == 0, "%lld entries left uncommitted", (long long)unc);
  for (int i = 0; i < CM_NACCTS; i++) {
    json_t *b = NULL;
    cm_acct(a, sizeof a, i);
    CHECK_RC(dtx_ledger_balance(st, a, DTX_LEDGER_LATEST, &b), 0);
    total += dtx_t_ival(b, "balance");
    json_decref(b);
  }
  CHECKF(total == 0, "balances sum to %lld", (long long)total);
  cm_sample(st);
  CHECK(atomic_load(&cm_l6) == 0 && atomic_load(&cm_l7) == 0);
  dtx_store_close(st);
}

/* ---- 3. a failed commit's detail --------------------------------------------- */

/* A round's commit that the store refuses is reported naming the entry
 * AND with the store's own reason (which rule refused it), not only the
 * error's generic words: an operator must see what to repair. */
static void test_commit_detail(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  CHECK_RC(dtx_ledger_account_create(st, "CD-S", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "CD-A", &none, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "CD-S", "CD-A", 1, 0, "cd0"), 0);
  CHECK_RC(dtx_t_lg_post2(st, "CD-S", "CD-A", 2, 0, "cd1"), 0);
  force(st, DTX_LEDGER_ENTRIES, "cd0",
        json_pack("{s:{s:s}}", "$set", "cd_note", "tampered"));
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  json_t *sum = NULL;
  int rc = dtx_recover(st, &ro, &sum);
  json_decref(sum);
  CHECKF(rc == DTX_EVALIDATION && strstr(dtx_errdetail(), "'cd0'") &&
             strstr(dtx_errdetail(), "cd_note"),
         "recover: %s %s", dtx_errname(rc), dtx_errdetail());
  CHECKF(strcmp(proc_of(st, "cd1"), "uncommitted") == 0, "cd1: %s",
         proc_of(st, "cd1"));
  force(st, DTX_LEDGER_ENTRIES, "cd0",
        json_pack("{s:{s:s}}", "$unset", "cd_note", ""));
  ro.older_than_ms = 0;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

/* ---- 4. one account's gap does not stop the committer --------------------------- */

/* An account whose seqIds have a gap (a leg's seqId edited: the audit's
 * seq_gap) holds back its own later entries -- their predecessor cannot
 * be found committed -- and is reported naming the account; the entries
 * of every other account still commit (a round that gave up on the first
 * such entry left the whole ledger uncommitted).  Repaired, the next pass
 * commits the rest. */
static void test_gap_isolated(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  const char *accts[] = {"GP-S", "GP-A", "GP-B", "GP-C"};
  for (int i = 0; i < 4; i++)
    CHECK_RC(dtx_ledger_account_create(st, accts[i], &none, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "GP-S", "GP-A", 100, 0, "gp1"), 0); /* A:1 */
  CHECK_RC(dtx_t_lg_post2(st, "GP-A", "GP-S", 10, 0, "gp2"), 0);  /* A:2 -> 9 */
  CHECK_RC(dtx_t_lg_post2(st, "GP-A", "GP-S", 20, 0, "gp3"), 0);  /* A:3 */
  CHECK_RC(dtx_t_lg_post2(st, "GP-B", "GP-C", 5, 0, "gp4"), 0);   /* independent */
  json_t *f = json_pack("{s:s}", "_id", "gp2");
  json_t *u = json_pack("{s:{s:i}}", "$set", "changes.0.seqId", 9);
  dtx_update_result_t ur;
  /* A leg never changes (the transition rule): a gap is made past it. */
  dtx_update_opts_t by = {.bypass_validation = 1};
  CHECK_RC(dtx_store_update(st, DTX_LEDGER_ENTRIES, f, u, NULL, &ur),
           DTX_EVALIDATION);
  CHECK_RC(dtx_store_update(st, DTX_LEDGER_ENTRIES, f, u, &by, &ur), 0);
  json_decref(u);
  dtx_recover_opts_t ro = {.older_than_ms = -1};
  json_t *sum = NULL;
  int rc = dtx_recover(st, &ro, &sum);
  json_decref(sum);
  CHECKF(rc != 0 && strstr(dtx_errdetail(), "'GP-A'"), "recover: %s %s",
         dtx_errname(rc), dtx_errdetail());
  CHECKF(strcmp(proc_of(st, "gp4"), "committed") == 0, "gp4: %s",
         proc_of(st, "gp4"));
  CHECKF(strcmp(proc_of(st, "gp1"), "committed") == 0, "gp1: %s",
         proc_of(st, "gp1"));
  CHECKF(strcmp(proc_of(st, "gp2"), "uncommitted") == 0, "gp2: %s",
         proc_of(st, "gp2"));
  CHECKF(strcmp(proc_of(st, "gp3"), "uncommitted") == 0, "gp3: %s",
         proc_of(st, "gp3"));
  /* The worker too: it commits what it can, whatever the gap. */
  CHECK_RC(dtx_t_lg_post2(st, "GP-C", "GP-B", 1, 0, "gp5"), 0);
  (void)dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                       NULL);
  CHECKF(strcmp(proc_of(st, "gp5"), "committed") == 0, "gp5: %s",
         proc_of(st, "gp5"));
  u = json_pack("{s:{s:i}}", "$set", "changes.0.seqId", 2);
  CHECK_RC(dtx_store_update(st, DTX_LEDGER_ENTRIES, f, u, &by, &ur), 0);
  json_decref(u);
  json_decref(f);
  ro.older_than_ms = 0;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  CHECKF(strcmp(proc_of(st, "gp3"), "committed") == 0, "gp3: %s",
         proc_of(st, "gp3"));
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

/* ---- 5. a cache that would overflow ------------------------------------------- */

static void cache_of(dtx_store_t *st, const char *acct, int64_t *seq,
                     int64_t *bal) {
  json_t *f = json_pack("{s:s}", "_id", acct), *docs = NULL;
  *seq = *bal = -1;
  if (dtx_store_find(st, DTX_LEDGER_ACCOUNTS, f, NULL, &docs) == 0) {
    json_t *c = json_object_get(json_array_get(docs, 0), "cache");
    *seq = dtx_t_ival(c, "seqId");
    *bal = dtx_t_ival(c, "balance");
  }
  json_decref(f);
  json_decref(docs);
}

/* A cache set by hand, as a tampered or broken store would hold it: past
 * the rules (a plain write may not touch a cache, and it never goes
 * back). */
static void set_cache(dtx_store_t *st, const char *acct, int64_t seq,
                      int64_t bal) {
  force(st, DTX_LEDGER_ACCOUNTS, acct,
        json_pack("{s:{s:I,s:I}}", "$set", "cache.seqId", (json_int_t)seq,
                  "cache.balance", (json_int_t)bal));
}

/* Caches edited to just below INT64_MAX and just above INT64_MIN, with
 * committed runs that would carry them over: recovery and the worker
 * report DTX_EOVERFLOW naming the account and leave the cache as it was
 * (never wrapped); the other accounts' caches still advance; repaired,
 * the settled audit is clean.  (A pass names the first such account
 * only.) */
static void test_cache_overflow(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  const char *accts[] = {"OV-S", "OV-X", "OV-Z", "OV-Y"};
  for (int i = 0; i < 4; i++)
    CHECK_RC(dtx_ledger_account_create(st, accts[i], &none, NULL), 0);
  for (int i = 0; i < 3; i++) {
    CHECK_RC(dtx_t_lg_post2(st, "OV-S", "OV-X", 10, 0, NULL), 0);
    CHECK_RC(dtx_t_lg_post2(st, "OV-Z", "OV-S", 10, 0, NULL), 0);
  }
  CHECK_RC(dtx_t_lg_post2(st, "OV-S", "OV-Y", 5, 0, NULL), 0);
  set_cache(st, "OV-X", 0, INT64_MAX - 15); /* + 30 */
  set_cache(st, "OV-Z", 0, INT64_MIN + 15); /* - 30 */
  int64_t seq, bal;
  for (int pass = 0; pass < 2; pass++) {
    int rc;
    if (pass == 1) { /* recovery: the pass's error names an account */
      dtx_recover_opts_t ro = {.older_than_ms = 0};
      json_t *sum = NULL;
      rc = dtx_recover(st, &ro, &sum);
      json_decref(sum);
    } else { /* the worker, which commits them first */
      rc = dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                          NULL);
    }
    CHECKF(rc == DTX_EOVERFLOW && (strstr(dtx_errdetail(), "'OV-X'") ||
                                   strstr(dtx_errdetail(), "'OV-Z'")),
           "pass %d: %s %s", pass, dtx_errname(rc), dtx_errdetail());
    cache_of(st, "OV-X", &seq, &bal);
    CHECKF(seq == 0 && bal == INT64_MAX - 15, "pass %d: OV-X cache %lld %lld",
           pass, (long long)seq, (long long)bal);
    cache_of(st, "OV-Z", &seq, &bal);
    CHECKF(seq == 0 && bal == INT64_MIN + 15, "pass %d: OV-Z cache %lld %lld",
           pass, (long long)seq, (long long)bal);
    cache_of(st, "OV-Y", &seq, &bal);
    CHECKF(seq == 1 && bal == 5, "pass %d: OV-Y cache %lld %lld", pass,
           (long long)seq, (long long)bal);
  }
  set_cache(st, "OV-X", 0, 0);
  set_cache(st, "OV-Z", 0, 0);
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  cache_of(st, "OV-X", &seq, &bal);
  CHECKF(seq == 3 && bal == 30, "OV-X cache %lld %lld", (long long)seq,
         (long long)bal);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

/* ---- 6. a cache edited past a pending entry -------------------------------- */

/* A cache moved ahead over a pending entry (the audit's cache_uncommitted)
 * must not make the committer commit that entry's successor before it
 * (L6): the successor waits until the pending entry is resolved and the
 * cache repaired; then the settled audit is clean. */
static void test_cache_ahead(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  const char *accts[] = {"CA-S", "CA-A", "CA-B"};
  for (int i = 0; i < 3; i++)
    CHECK_RC(dtx_ledger_account_create(st, accts[i], &none, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "CA-S", "CA-A", 100, 0, "ca1"), 0); /* A:1 */
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  CHECK_RC(dtx_t_lg_post2(st, "CA-A", "CA-S", 10, 1, "ca2"), 0); /* A:2, pending */
  CHECK_RC(dtx_t_lg_post2(st, "CA-A", "CA-B", 5, 0, "ca3"), 0);  /* A:3 */
  set_cache(st, "CA-A", 2, 100);                        /* over ca2 */
  ro.older_than_ms = -1;
  (void)dtx_recover(st, &ro, &sum);
  json_decref(sum);
  (void)dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                       NULL);
  CHECKF(strcmp(proc_of(st, "ca3"), "uncommitted") == 0,
         "ca3: %s before the pending ca2", proc_of(st, "ca3"));
  set_cache(st, "CA-A", 1, 100);
  json_t *e = NULL;
  CHECK_RC(dtx_ledger_void(st, "ca2", &e), 0);
  json_decref(e);
  ro.older_than_ms = 0;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  CHECKF(strcmp(proc_of(st, "ca3"), "committed") == 0, "ca3: %s",
         proc_of(st, "ca3"));
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}
/* Entries queued behind holds (a pending entry's successors on its
 * accounts wait for it, L6) must not hide a committable entry behind
 * them: a round once read the first 1,000 uncommitted entries only, and
 * with 1,000 waiting behind one hold nothing else in the ledger ever
 * committed.  More than a round's page waits here, spread over many
 * holds, then one entry on other accounts: it commits, and every waiting
 * one commits once the holds are voided. */
static void test_blocked_backlog(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  enum { PAIRS = 40 };
  int nblocked = cm_quick ? 1001 : 2501; /* past one and two pages */
  char s[PAIRS][16], a[PAIRS][16], id[32];
  for (int k = 0; k < PAIRS; k++) {
    snprintf(s[k], sizeof s[k], "BL-S%d", k);
    snprintf(a[k], sizeof a[k], "BL-A%d", k);
    CHECK_RC(dtx_ledger_account_create(st, s[k], &none, NULL), 0);
    CHECK_RC(dtx_ledger_account_create(st, a[k], &none, NULL), 0);
    snprintf(id, sizeof id, "bl-h%d", k);
    CHECK_RC(dtx_t_lg_post2(st, s[k], a[k], 1, 1, id), 0);
  }
  CHECK_RC(dtx_ledger_account_create(st, "BL-X", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "BL-Y", &none, NULL), 0);
  dtx_ledger_leg_t legs[256][2];
  dtx_ledger_post_req_t reqs[256];
  dtx_ledger_result_t res[256];
  for (int i = 0; i < nblocked; i += 256) {
    int n = nblocked - i < 256 ? nblocked - i : 256;
    for (int j = 0; j < n; j++) {
      int k = (i + j) % PAIRS;
      legs[j][0] = (dtx_ledger_leg_t){s[k], -1};
      legs[j][1] = (dtx_ledger_leg_t){a[k], 1};
      reqs[j] = (dtx_ledger_post_req_t){.legs = legs[j], .nlegs = 2};
    }
    dtx_exec_opts_t eo = {.deadline_ms = 120000};
    CHECK_RC(dtx_ledger_post_many(st, reqs, (size_t)n, &eo, res), 0);
    dtx_ledger_results_clear(res, (size_t)n);
  }
  CHECK_RC(dtx_t_lg_post2(st, "BL-X", "BL-Y", 5, 0, "bl-free"), 0);
  CHECK_RC(dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                          NULL),
           0);
  CHECKF(strcmp(proc_of(st, "bl-free"), "committed") == 0,
         "bl-free behind %d waiting entries: %s", nblocked,
         proc_of(st, "bl-free"));
  /* The holds and what waits behind them, and nothing else (the earlier
   * tests leave every entry committed). */
  json_t *f = json_pack("{s:s}", "proc", "uncommitted"), *out = NULL;
  int64_t waiting = -1;
  CHECK_RC(dtx_store_count(st, DTX_LEDGER_ENTRIES, f, &waiting), 0);
  CHECKF(waiting == nblocked + PAIRS, "%lld entries uncommitted, want %d",
         (long long)waiting, nblocked + PAIRS);
  /* A recovery pass goes past a round's reach as well, in one process:
   * with pages of 10, two a round, bl-free2 waits behind 50 rounds' reach
   * (recovery once stopped at its first round that planned nothing). */
  CHECK_RC(dtx_t_lg_post2(st, "BL-X", "BL-Y", 5, 0, "bl-free2"), 0);
  dtx__lg_scan_limits(10, 2);
  json_t *sum0 = NULL;
  CHECK_RC(dtx_recover(st, &(dtx_recover_opts_t){.older_than_ms = 0}, &sum0),
           0);
  dtx__lg_scan_limits(0, 0);
  json_decref(sum0);
  CHECKF(strcmp(proc_of(st, "bl-free2"), "committed") == 0,
         "recovery: bl-free2 behind %d waiting entries: %s", nblocked,
         proc_of(st, "bl-free2"));
  for (int k = 0; k < PAIRS; k++) {
    snprintf(id, sizeof id, "bl-h%d", k);
    CHECK_RC(dtx_ledger_void(st, id, &out), 0);
    json_decref(out);
  }
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  CHECK_RC(dtx_store_count(st, DTX_LEDGER_ENTRIES, f, &waiting), 0);
  CHECKF(waiting == 0, "%lld entries uncommitted after the holds went",
         (long long)waiting);
  json_decref(f);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

/* An account posted to all the time is still judged: an edit deep in its
 * history is found by every audit while posts run (the audit judges an
 * account whose entries changed between its two reads up to its first
 * entry that did; it once skipped the whole account and said clean).  On
 * SQLite the audit's reads see one state, so only Redis can fail it. */
typedef struct bz_poster {
  int64_t until;
  int n;
} bz_poster_t;

static void *bz_post(void *arg) {
  bz_poster_t *p = arg;
  dtx_store_t *st = open_store();
  while (dtx_t_mono_ms() < p->until)
    p->n += dtx_t_lg_post2(st, "BZ-A", "BZ-B", 1, 0, NULL) == 0;
  dtx_store_close(st);
  return NULL;
}

static int64_t bz_at(dtx_store_t *st, const char *id) {
  json_t *d = NULL;
  CHECK_RC(dtx_ledger_get(st, id, &d), 0);
  int64_t at = json_integer_value(json_object_get(d, "at"));
  json_decref(d);
  return at;
}

static void test_busy_audit(void) {
  dtx_store_t *st = open_store();
  dtx_ledger_limit_t none = {.no_min_balance = 1};
  CHECK_RC(dtx_ledger_account_create(st, "BZ-A", &none, NULL), 0);
  CHECK_RC(dtx_ledger_account_create(st, "BZ-B", &none, NULL), 0);
  CHECK_RC(dtx_t_lg_post2(st, "BZ-A", "BZ-B", 1, 0, "bz-1"), 0);
  CHECK_RC(dtx_t_lg_post2(st, "BZ-A", "BZ-B", 1, 0, "bz-2"), 0);
  CHECK_RC(dtx_worker_run(st, &(dtx_worker_opts_t){.threads = 1, .once = 1},
                          NULL),
           0);
  int64_t at1 = bz_at(st, "bz-1"), at2 = bz_at(st, "bz-2");
  force(st, DTX_LEDGER_ENTRIES, "bz-1",
        json_pack("{s:{s:I}}", "$set", "at", (json_int_t)(at2 + 5000))); /* bz-2 now timed before bz-1: T1 */
  bz_poster_t p = {dtx_t_mono_ms() + (cm_quick ? 1500 : 3000), 0};
  pthread_t t;
  pthread_create(&t, NULL, bz_post, &p);
  int audits = 0, found = 0, unsettled = 0;
  while (dtx_t_mono_ms() < p.until - 100) {
    json_t *rep = NULL, *f;
    size_t k;
    int rc = dtx_audit(st, 0, &rep), hit = 0;
    CHECKF(rc == 0 || rc == DTX_EAUDIT, "audit: %s %s", dtx_errname(rc),
           dtx_errdetail());
    json_array_foreach(json_object_get(rep, "findings"), k, f) {
      const char *d = json_string_value(json_object_get(f, "detail"));
      hit |= d && strstr(d, "entry bz-2") && strstr(d, "account BZ-A");
    }
    json_t *lg = json_object_get(json_object_get(rep, "patterns"), "ledger");
    unsettled += json_integer_value(json_object_get(lg, "unsettled")) > 0;
    found += hit;
    audits++;
    json_decref(rep);
  }
  pthread_join(t, NULL);
  printf("busy audit: %d audits (%d with unsettled accounts), %d posts\n",
         audits, unsettled, p.n);
  CHECKF(audits > 0 && found == audits,
         "the edit found by %d of %d audits (%d with unsettled accounts)",
         found, audits, unsettled);
  force(st, DTX_LEDGER_ENTRIES, "bz-1",
        json_pack("{s:{s:I}}", "$set", "at", (json_int_t)at1));
  dtx_recover_opts_t ro = {.older_than_ms = 0};
  json_t *sum = NULL;
  CHECK_RC(dtx_recover(st, &ro, &sum), 0);
  json_decref(sum);
  dtx_t_lg_audit_ok(st);
  dtx_store_close(st);
}

int main(int argc, char **argv) {
  uri = argc > 1 ? argv[1] : "sqlite:/tmp/doctx_txn_ledger_commit.db";
  cm_quick = getenv("DTX_QUICK") != NULL;
  dtx_store_t *st = open_store();
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ENTRIES, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_close(st);
  TEST_RUN(test_commit_levels);
  TEST_RUN(test_committers);
  TEST_RUN(test_commit_detail);
  TEST_RUN(test_gap_isolated);
  TEST_RUN(test_cache_overflow);
  TEST_RUN(test_cache_ahead);
  TEST_RUN(test_blocked_backlog);
  TEST_RUN(test_busy_audit);
  /* Leave no ledger behind: the Redis suites share one store. */
  st = open_store();
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ENTRIES, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_close(st);
  return TEST_DONE();
}
