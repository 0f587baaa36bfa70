/* txnlib.c -- the money patterns' shared suite helpers (txnlib.h). */
#include "txnlib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/fault.h"

const char *dtx_t_suite_uri(int argc, char **argv) {
  static char buf[4096];
  const char *uri = argc > 1 ? argv[1] : "sqlite::memory:";
  if (strncmp(uri, "sqlite:", 7) == 0 && !strchr(uri, '?') &&
      strcmp(uri, "sqlite::memory:") != 0) {
    snprintf(buf, sizeof buf, "%s?sync=off", uri);
    uri = buf;
  }
  return uri;
}

dtx_store_t *dtx_t_fresh(const char *uri) {
  dtx_store_t *st = dtx_t_open(uri);
  dtx_t_drop_transfers(st);
  return st;
}

void dtx_t_account(dtx_store_t *st, const char *id, int64_t bal) {
  dtx_account_opts_t o = {.balance = bal};
  if (dtx_account_create(st, id, &o, NULL) != 0) {
    fprintf(stderr, "account %s: %s\n", id, dtx_errdetail());
    exit(1);
  }
}

int64_t dtx_t_balance(dtx_store_t *st, const char *id) {
  json_t *a = NULL;
  if (dtx_account_get(st, id, &a) != 0)
    return -999999;
  int64_t b = json_integer_value(json_object_get(a, "balance"));
  json_decref(a);
  return b;
}

const char *dtx_t_str(const json_t *doc, const char *k) {
  const char *s = json_string_value(json_object_get(doc, k));
  return s ? s : "-";
}

void dtx_t_audit_ok(dtx_store_t *st, const char *when, unsigned flags) {
  json_t *rep = NULL;
  int rc = dtx_audit(st, flags, &rep);
  CHECKF(rc == 0 && json_is_true(json_object_get(rep, "ok")),
         "audit after %s: %s %s", when, dtx_errname(rc), dtx_errdetail());
  if (!json_is_true(json_object_get(rep, "ok"))) {
    char *s = json_dumps(rep, JSON_COMPACT);
    fprintf(stderr, "  %s\n", s ? s : "?");
    free(s);
  }
  json_decref(rep);
}

void dtx_t_crash_child(const char *uri, const char *spec,
                       void (*run)(dtx_store_t *cs, const void *items,
                                   size_t n),
                       const void *items, size_t n) {
  pid_t pid = fork();
  if (pid == 0) {
    dtx_store_t *cs = NULL;
    setenv("DOCTX_FAULT", spec, 1);
    dtx__fault_init(NULL);
    if (dtx_store_open(uri, &cs) != 0)
      _exit(3);
    run(cs, items, n);
    _exit(4); /* the crash point was not reached */
  }
  int status = 0;
  REQUIRE(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 137, "%s: status %d",
         spec, status);
}

void dtx_t_reap(const pid_t *pids, int n) {
  for (int k = 0; k < n; k++) {
    int status = 0;
    REQUIRE(pids[k] > 0 && waitpid(pids[k], &status, 0) == pids[k]);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "proc %d: %d", k,
           status);
  }
}
