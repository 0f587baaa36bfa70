/* lgbatchlib.c -- see lgbatchlib.h. */
#include "lgbatchlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testlib.h"
#include "util/fault.h"

const char *dtx_t_lgb_uri;
int dtx_t_lgb_quick;

void dtx_t_lgb_init(int argc, char **argv) {
  static char buf[4096];
  dtx_t_lgb_uri = argc > 1 ? argv[1] : "sqlite::memory:";
  if (strncmp(dtx_t_lgb_uri, "sqlite:", 7) == 0 &&
      !strchr(dtx_t_lgb_uri, '?') &&
      strcmp(dtx_t_lgb_uri, "sqlite::memory:") != 0) {
    snprintf(buf, sizeof buf, "%s?sync=off", dtx_t_lgb_uri);
    dtx_t_lgb_uri = buf;
  }
  dtx_t_lgb_quick = getenv("DTX_QUICK") != NULL;
}

void dtx_t_lgb_drop(void) {
  dtx_store_t *st = dtx_t_lgb_open();
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ENTRIES, &(dtx_drop_opts_t){1});
  dtx_store_drop_collection_ex(st, DTX_LEDGER_ACCOUNTS, &(dtx_drop_opts_t){1});
  dtx_store_close(st);
}

dtx_store_t *dtx_t_lgb_open(void) {
  dtx_store_t *st = NULL;
  if (dtx_store_open(dtx_t_lgb_uri, &st) != 0) {
    fprintf(stderr, "open %s: %s\n", dtx_t_lgb_uri, dtx_errdetail());
    exit(1);
  }
  return st;
}

void dtx_t_lgb_account(dtx_store_t *st, const char *p, const char *name,
                       int64_t min, int none) {
  char id[64];
  dtx_ledger_limit_t l = {.min_balance = min, .no_min_balance = none};
  snprintf(id, sizeof id, "%s%s", p, name);
  if (dtx_ledger_account_create(st, id, &l, NULL) != 0) {
    fprintf(stderr, "account %s: %s\n", id, dtx_errdetail());
    exit(1);
  }
}

/* Posts p+from -> p+to of v (id p+id when id), which must succeed. */
void dtx_t_lgb_fund(dtx_store_t *st, const char *p, const char *from,
                    const char *to, int64_t v, const char *id) {
  char a[64], b[64], e[64];
  snprintf(a, sizeof a, "%s%s", p, from);
  snprintf(b, sizeof b, "%s%s", p, to);
  snprintf(e, sizeof e, "%s%s", p, id ? id : "");
  dtx_ledger_leg_t legs[2] = {{a, -v}, {b, v}};
  dtx_ledger_post_req_t r = {.id = id ? e : NULL, .legs = legs, .nlegs = 2};
  json_t *out = NULL;
  if (dtx_ledger_post(st, &r, NULL, &out) != 0) {
    fprintf(stderr, "fund %s -> %s: %s\n", a, b, dtx_errdetail());
    exit(1);
  }
  json_decref(out);
}

json_t *dtx_t_lgb_balance(dtx_store_t *st, const char *p, const char *name) {
  char id[64];
  json_t *b = NULL;
  snprintf(id, sizeof id, "%s%s", p, name);
  if (dtx_ledger_balance(st, id, DTX_LEDGER_LATEST, &b) != 0)
    return json_null();
  json_object_del(b, "account");
  return b;
}

int64_t dtx_t_lgb_bal_of(dtx_store_t *st, const char *p, const char *name) {
  json_t *b = dtx_t_lgb_balance(st, p, name);
  int64_t v = json_integer_value(json_object_get(b, "balance"));
  json_decref(b);
  return v;
}

/* The ledger's audit (the flags given) finds nothing: only the ledger's
 * findings count, other suites share the store on Redis. */
void dtx_t_lgb_audit_clean(dtx_store_t *st, const char *when) {
  json_t *rep = NULL, *f;
  size_t i, n = 0;
  int rc = dtx_audit(st, 0, &rep);
  CHECKF(rc == 0 || rc == DTX_EAUDIT, "audit after %s: %s %s", when,
         dtx_errname(rc), dtx_errdetail());
  json_array_foreach(json_object_get(rep, "findings"), i, f) {
    const char *p = json_string_value(json_object_get(f, "pattern"));
    if (p && strcmp(p, "ledger") == 0) {
      char *s = json_dumps(f, JSON_COMPACT);
      fprintf(stderr, "  finding after %s: %s\n", when, s ? s : "?");
      free(s);
      n++;
    }
  }
  CHECKF(n == 0, "audit after %s: %zu ledger findings", when, n);
  json_decref(rep);
}

/* Sets r's legs (accounts a[i] under prefix p, values v[i]). */
void dtx_t_lgb_legs_of(dtx_t_lgb_rq_t *r, const char *p, size_t n,
                       const char *const *a, const int64_t *v) {
  for (size_t i = 0; i < n; i++) {
    snprintf(r->acct[i], sizeof r->acct[i], "%s%s", p, a[i]);
    r->legs[i] = (dtx_ledger_leg_t){r->acct[i], v[i]};
  }
  r->req.legs = r->legs;
  r->req.nlegs = n;
}

void dtx_t_lgb_id_of(dtx_t_lgb_rq_t *r, const char *p, const char *fmt,
                     unsigned k, size_t i) {
  snprintf(r->id, sizeof r->id, "%s%s%u_%zu", p, fmt, k, i);
  r->req.id = r->id;
}

unsigned dtx_t_lgb_next(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 16) & 0x7fff;
}

/* The entry with what may differ between the twins removed: the time
 * fields, the prefix of the accounts and of a given id, a generated id. */
json_t *dtx_t_lgb_norm(const json_t *e, int has_id) {
  if (!e)
    return json_null();
  json_t *c = json_deep_copy(e), *l;
  size_t i;
  json_object_del(c, "created");
  json_object_del(c, "updated");
  json_object_del(c, "at"); /* the entry time (src/txn/ledger/time.c) */
  /* the legs' digest covers _id and the prefixed accounts: sealed is what
   * compares (docs/ledger.md, "The legs' digest") */
  if (json_object_get(c, "legs_sha"))
    json_object_set_new(c, "legs_sha", json_true());
  if (json_object_get(c, "expires_at"))
    json_object_set_new(c, "expires_at", json_true());
  const char *id = json_string_value(json_object_get(c, "_id"));
  if (has_id && id && strlen(id) > 2)
    json_object_set_new(c, "_id", json_string(id + 2));
  else
    json_object_del(c, "_id");
  json_array_foreach(json_object_get(c, "changes"), i, l) {
    const char *a = json_string_value(json_object_get(l, "account"));
    if (a && strlen(a) > 2)
      json_object_set_new(l, "account", json_string(a + 2));
  }
  return c;
}

dtx_store_t *dtx_t_lgb_child_store(const char *spec) {
  dtx_store_t *cs = NULL;
  setenv("DOCTX_FAULT", spec, 1);
  dtx__fault_init(NULL);
  if (dtx_store_open(dtx_t_lgb_uri, &cs) != 0)
    _exit(3);
  return cs;
}

int dtx_t_lgb_wait(int pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
