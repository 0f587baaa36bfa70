/* lgbatchlib.h -- helpers shared by the dtx_ledger_post_many suites
 * (tests/txn/ledger_batch.c and ledger_batch_attack.c): the store URI,
 * accounts under a prefix ("b.", "s.", ...), balances, the ledger-only
 * audit and requests built in place.  Each suite's main calls
 * dtx_t_lgb_init and drops the ledger with dtx_t_lgb_drop first and last
 * (the Redis suites share one store). */
#ifndef DTX_TEST_LGBATCHLIB_H
#define DTX_TEST_LGBATCHLIB_H

#include <stddef.h>
#include <stdint.h>

#include "doctx.h"

/* The store URI (set by dtx_t_lgb_init; the string is borrowed from argv or
 * a static buffer) and whether DTX_QUICK keeps loops short. */
extern const char *dtx_t_lgb_uri;
extern int dtx_t_lgb_quick;

/* Sets dtx_t_lgb_uri from argv[1] (default "sqlite::memory:"; a SQLite
 * file gets ?sync=off) and dtx_t_lgb_quick from DTX_QUICK. */
void dtx_t_lgb_init(int argc, char **argv);

/* Drops the ledger's entries and accounts collections. */
void dtx_t_lgb_drop(void);

/* In a forked child: arms DOCTX_FAULT=spec and opens its own store on
 * dtx_t_lgb_uri (the caller closes it by exiting); exits 3 when it
 * cannot. */
dtx_store_t *dtx_t_lgb_child_store(const char *spec);

/* Waits for child pid: its exit status, 128 + the signal that ended it,
 * or -1 when pid is not a child (a failed fork). */
int dtx_t_lgb_wait(int pid);

/* Opens dtx_t_lgb_uri (exits on failure); the caller closes the store. */
dtx_store_t *dtx_t_lgb_open(void);

/* Creates account p+name with that limit (exits on failure). */
void dtx_t_lgb_account(dtx_store_t *st, const char *p, const char *name,
                       int64_t min, int none);

/* Posts p+from -> p+to of v (id p+id when id), which must succeed (exits
 * otherwise); the entry is dropped. */
void dtx_t_lgb_fund(dtx_store_t *st, const char *p, const char *from,
                    const char *to, int64_t v, const char *id);

/* p+name's balance document without "account", or JSON null when it
 * cannot be read; the caller owns (decrefs) it. */
json_t *dtx_t_lgb_balance(dtx_store_t *st, const char *p, const char *name);

/* p+name's balance (0 when it cannot be read). */
int64_t dtx_t_lgb_bal_of(dtx_store_t *st, const char *p, const char *name);

/* The ledger's audit finds nothing (a CHECK naming when): only the
 * ledger's findings count, other suites share the store on Redis. */
void dtx_t_lgb_audit_clean(dtx_store_t *st, const char *when);

/* A request with its own storage for the id and legs (req points into
 * it, so copying one means re-pointing req.legs and req.id). */
#define DTX_T_LGB_MAXL 4
typedef struct dtx_t_lgb_rq {
  char id[48];
  char acct[DTX_T_LGB_MAXL][48];
  dtx_ledger_leg_t legs[DTX_T_LGB_MAXL];
  dtx_ledger_post_req_t req;
} dtx_t_lgb_rq_t;

/* Sets r's legs (accounts a[i] under prefix p, values v[i]; n at most
 * DTX_T_LGB_MAXL). */
void dtx_t_lgb_legs_of(dtx_t_lgb_rq_t *r, const char *p, size_t n,
                       const char *const *a, const int64_t *v);

/* Sets r's id to p, fmt, k "_" i (stored in r). */
void dtx_t_lgb_id_of(dtx_t_lgb_rq_t *r, const char *p, const char *fmt,
                     unsigned k, size_t i);

/* The next of a small LCG seeded by *s (0..32767). */
unsigned dtx_t_lgb_next(unsigned *s);

/* A copy of entry e with what may differ between twins removed: the time
 * fields, the 2-character prefix of the accounts and of a given id
 * (has_id), a generated id.  JSON null for NULL; the caller owns it. */
json_t *dtx_t_lgb_norm(const json_t *e, int has_id);

#endif
