/* page.c -- the query-string helpers of doctxd's list routes: an int64
 * query parameter, and a list's filter and page (?KEY=&after=&limit=)
 * with its answer {KEY: items, "next": cursor|null}.  Every list route
 * (accounts, transfers, jobs, locks, ledger entries, orders) pages
 * through these, so ?limit= and the cursor mean one thing everywhere
 * (docs/server.md, "Requests and answers"); the cursor itself is
 * body.c's dtx__srv_page/dtx__srv_cursor. */
#include "server/server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dtx__srv_qint(dtx__srv_ctx_t *c, const char *key, int64_t dflt,
                  int64_t *out) {
  char buf[32];
  int bad = 0;
  const char *v = dtx__srv_query(c, key, buf, sizeof buf, &bad);
  *out = dflt;
  if (bad)
    return -1;
  if (!v)
    return 0;
  char *end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (end == v || *end || errno) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "query parameter '%s' must be an int64, "
                 "got '%.20s'",
                 key, v);
    return -1;
  }
  *out = (int64_t)n;
  return 0;
}

int dtx__srv_qpage(dtx__srv_ctx_t *c, const char *after, const char *what,
                   int64_t *skip, int64_t *lim) {
  char limit[32];
  int bad = 0;
  const char *l = dtx__srv_query(c, "limit", limit, sizeof limit, &bad);
  json_t *lj = NULL;
  if (bad)
    return -1;
  if (l) {
    char *end;
    long long v = strtoll(l, &end, 10);
    if (*end || end == l || v < 1 || v > DTX__SRV_MAX_PAGE) {
      dtx__srv_bad(c, DTX_EINVAL, "limit must be an integer 1..%d, got '%.20s'",
                   DTX__SRV_MAX_PAGE, l);
      return -1;
    }
    lj = json_integer(v);
  }
  int rc = dtx__srv_page(c, lj, after, what, skip, lim);
  json_decref(lj);
  return rc;
}

int dtx__srv_list_page(dtx__srv_ctx_t *c, dtx__srv_list_t *l,
                       const char *prefix, const char *key, size_t cap) {
  char after[320];
  int bad = 0;
  int64_t skip = 0, lim;
  l->filter = NULL;
  if (cap > sizeof l->buf)
    cap = sizeof l->buf;
  if (key)
    l->filter = dtx__srv_query(c, key, l->buf, cap, &bad);
  const char *a =
      bad ? NULL : dtx__srv_query(c, "after", after, sizeof after, &bad);
  /* ?start_after=ID: keyset paging from an entry the caller names (an
   * id, not a cursor), as the CLI's --after. */
  const char *sa = bad ? NULL
                       : dtx__srv_query(c, "start_after", l->after,
                                        sizeof l->after, &bad);
  if (bad)
    return -1;
  if (a && sa) {
    dtx__srv_bad(c, DTX_EINVAL, "give after (a cursor) or start_after (an "
                 "id), not both");
    return -1;
  }
  int prc;
  if (sa && (prc = dtx_page_check(&(dtx_page_t){.after = sa}))) {
    dtx__srv_bad(c, prc, "%s", dtx_errdetail());
    return -1;
  }
  /* What the cursor is bound to: the prefix and the filter whole.  Past
   * what l->what holds, its digest stands in for it (a long filter cut to
   * its first bytes let two queries share a cursor). */
  const char *f = l->filter ? l->filter : "";
  size_t need = strlen(prefix) + (key ? strlen(key) + 1 + strlen(f) : 0) + 1;
  char *full = malloc(need);
  if (!full) {
    dtx__srv_bad(c, DTX_ENOMEM, "paging");
    return -1;
  }
  snprintf(full, need, "%s%s%s%s", prefix, key ? key : "", key ? "=" : "",
           key ? f : "");
  if (need <= sizeof l->what)
    memcpy(l->what, full, need);
  else
    snprintf(l->what, sizeof l->what, "#%016llx %.400s",
             (unsigned long long)dtx__srv_fnv(full), full);
  free(full);
  /* The limit's check and default are qpage's; the cursor is read here,
   * as it may be a keyset one. */
  if (dtx__srv_qpage(c, NULL, l->what, &skip, &lim))
    return -1;
  if (a && dtx__srv_cursor_parse(l->what, a, &skip, l->after,
                                 sizeof l->after)) {
    dtx__srv_bad(c, DTX_EINVAL,
                 "the cursor '%.100s' is not one this query returned as "
                 "\"next\"", a);
    return -1;
  }
  /* One more than the page shows says whether a next page exists. */
  l->page = (dtx_page_t){.skip = skip, .limit = lim + 1,
                         .after = (a || sa) && *l->after ? l->after : NULL};
  return 0;
}

void dtx__srv_list_answer(dtx__srv_ctx_t *c, const dtx__srv_list_t *l,
                          const char *key, int rc, json_t *items) {
  if (rc) {
    json_decref(items);
    dtx__srv_fail(c, rc, NULL);
    return;
  }
  json_t *next = json_null();
  int64_t lim = l->page.limit - 1;
  if ((int64_t)json_array_size(items) > lim) {
    json_array_remove(items, (size_t)lim);
    json_decref(next);
    /* Keyset: the next page starts after the last entry shown (a lock's
     * view names it "name"), whatever its depth. */
    const json_t *last = json_array_get(items, (size_t)lim - 1);
    const char *id = json_string_value(json_object_get(last, "_id"));
    if (!id)
      id = json_string_value(json_object_get(last, "name"));
    next = id ? dtx__srv_cursor_after(l->what, id)
              : dtx__srv_cursor(l->what, l->page.skip + lim);
    if (!next) {
      json_decref(items);
      dtx__srv_fail(c, DTX_ENOMEM, NULL);
      return;
    }
  }
  dtx__srv_json(c, 200, json_pack("{s:o,s:o}", key, items, "next", next));
}
