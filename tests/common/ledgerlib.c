/* ledgerlib.c -- see ledgerlib.h. */
#include "ledgerlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testlib.h"

int64_t dtx_t_mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void dtx_t_show(const char *what, const json_t *v) {
  char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
  printf("%s: %s\n", what, t ? t : "-");
  free(t);
}

int64_t dtx_t_ival(const json_t *v, const char *k) {
  return json_integer_value(json_object_get(v, k));
}

void dtx_t_lg_audit_ok(dtx_store_t *st) {
  json_t *rep = NULL, *f;
  size_t i, n = 0;
  int rc = dtx_audit(st, DTX_AUDIT_SETTLED, &rep);
  CHECKF(rc == 0 || rc == DTX_EAUDIT, "audit: %s %s", dtx_errname(rc),
         dtx_errdetail());
  json_array_foreach(json_object_get(rep, "findings"), i, f) {
    const char *p = json_string_value(json_object_get(f, "pattern"));
    if (p && strcmp(p, "ledger") == 0) {
      n++;
      dtx_t_show("finding", f);
    }
  }
  CHECKF(n == 0, "the audit found %zu ledger findings", n);
  dtx_t_show("audit ledger", json_object_get(json_object_get(rep, "patterns"), "ledger"));
  json_decref(rep);
}

int dtx_t_lg_post2(dtx_store_t *st, const char *from, const char *to,
                   int64_t v, int pending, const char *id) {
  dtx_ledger_leg_t legs[] = {{from, -v}, {to, v}};
  dtx_ledger_post_req_t req = {.id = id, .legs = legs, .nlegs = 2,
                               .pending = pending,
                               .timeout_ms = pending ? DTX_LEDGER_TIMEOUT_MS
                                                     : 0};
  json_t *e = NULL;
  int rc = dtx_ledger_post(st, &req, NULL, &e);
  json_decref(e);
  return rc;
}
