/* recover.c -- the recovery frame: dtx_recover runs every registered
 * pattern's recovery pass (kit.h, dtx__pattern_t.recover) under one
 * deadline and reports, per pattern, what ran, what was left alone and
 * why, and what failed:
 *   {"ok": bool, "patterns": {NAME: {"ran": {...}, "skipped": {...},
 *                                    "errors": {...}}}}
 * One pattern's failure does not stop the others' passes: their state is
 * independent, and each pass is safe to rerun. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "txn/kit/kit.h"
#include "util/err.h"

size_t dtx__pattern_count(void) {
  size_t n = 0;
  while (dtx__patterns[n])
    n++;
  return n;
}

int dtx__recover_pass(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                      dtx__tally_t *tallies) {
  /* The store's collections, once per pass: a pattern whose collections
   * do not exist has nothing to recover, and ensuring it would create
   * them (nine patterns' tables and indexes in a store that uses one).
   * Not listed (the store failed): every pass runs and meets the error. */
  json_t *names = NULL;
  int lrc = dtx__kit_colls(ex->st, &names);
  if (lrc) {
    names = NULL;
    /* The listing spent the budget: no pass will run, so its error is the
     * pass's -- never an ok over a store nothing was read from. */
    if (dtx__deadline_passed())
      dtx__tally_error(&tallies[0], NULL, lrc);
  }
  for (size_t i = 0; dtx__patterns[i]; i++) {
    const dtx__pattern_t *p = dtx__patterns[i];
    if (!p->recover || dtx__kit_unused(p, names))
      continue;
    /* One budget for the whole pass: once it is spent (a pattern gave up
     * on an unreachable store), the rest are not started -- each would
     * otherwise spend a request timeout of its own finding that out. */
    if (dtx__deadline_passed()) {
      dtx__tally_skip(&tallies[i], "not run: the command's deadline passed",
                      NULL);
      continue;
    }
    int rc = dtx__kit_ensure(ex->st, p);
    if (rc == 0)
      rc = p->recover(ex, o, &tallies[i]);
    if (rc) /* the pass itself stopped: say so beside the item errors */
      dtx__tally_error(&tallies[i], NULL, rc);
  }
  json_decref(names);
  return dtx__tally_raise(tallies);
}

int dtx__tally_raise(const dtx__tally_t *tallies) {
  for (size_t i = 0; dtx__patterns[i]; i++) {
    if (!tallies[i].first_err)
      continue;
    json_t *e = json_array_get(
        json_object_get(json_object_get(tallies[i].obj, "errors"), "first"), 0);
    const char *id = dtx__str(e, "id"), *detail = dtx__str(e, "detail");
    char head[200];
    snprintf(head, sizeof head, "%s%s%s: ", dtx__patterns[i]->name,
             id ? " " : "", id ? id : "");
    if (detail && strncmp(detail, head, strlen(head)) == 0)
      head[0] = '\0'; /* the detail names the item already */
    return dtx__err(tallies[i].first_err, "%s%s", head, detail ? detail : "");
  }
  return 0;
}

json_t *dtx__tally_report(const dtx__tally_t *tallies, int rc) {
  json_t *pats = json_object();
  for (size_t i = 0; dtx__patterns[i]; i++)
    if (tallies[i].obj)
      json_object_set(pats, dtx__patterns[i]->name, tallies[i].obj);
  return json_pack("{s:b,s:o}", "ok", rc == 0, "patterns", pats);
}

int dtx_recover(dtx_store_t *st, const dtx_recover_opts_t *opts,
                json_t **summary) {
  dtx_recover_opts_t o = {.older_than_ms = -1};
  dtx__exec_t ex;
  dtx__call_t c;
  if (summary)
    *summary = NULL;
  if (opts)
    o = *opts;
  dtx__exec_init(&ex, st, NULL, 0, o.deadline_ms);
  dtx__exec_rename(&ex, "recover@%.120s", ex.owner);
  dtx__call_begin(&c, ex.deadline_ms);
  size_t n = dtx__pattern_count();
  dtx__tally_t *t = calloc(n + 1, sizeof *t);
  int rc = t ? 0 : DTX_ENOMEM;
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = dtx__tally_init(&t[i]);
  if (rc == 0)
    rc = dtx__recover_pass(&ex, &o, t);
  if (summary && t && (rc == 0 || rc != DTX_ENOMEM))
    *summary = dtx__tally_report(t, rc);
  for (size_t i = 0; t && i < n; i++)
    dtx__tally_free(&t[i]);
  free(t);
  return dtx__call_end(&c, rc);
}
