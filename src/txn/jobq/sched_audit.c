/* sched_audit.c -- the schedules' part of the job audit: ticks against
 * runs (sched.c J8, J9; docs/jobs.md "Schedules").
 *
 * Findings:
 *   sched_tick     a schedule's job that names no tick of its schedule and
 *                  gen: not a tick time, a gen the schedule never had, a
 *                  tick past next_at (but the one in flight at a change),
 *                  or an _id that is not "sched:NAME:GEN:TICK"
 *   sched_missing  ticks of the current gen, before next_at, with neither
 *                  a job nor a recorded skip
 *   sched_twice    a tick with two jobs (run-once ranges that overlap) or
 *                  a job and a skip
 * The schedules are read before the jobs (audit.c), so the job of every
 * tick before the next_at read was inserted before the jobs were read: a
 * live ticker makes no false sched_missing, and a job of a later tick is
 * counted unsettled.  The check covers the current gen's ticks from audit_from, and at most
 * the last AUDIT_WINDOW_MS: succeeded jobs are purged after a day by
 * default (recover.c), and an older tick's job may be gone.  Jobs of
 * earlier gens (past[]) are checked to be ticks of their gen, before its
 * next_at at the change or that tick itself (J9: the one in flight).
 * Jobs of gens older than the history kept, or of a schedule deleted as
 * a tombstone, are not judged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/err.h"

#define AUDIT_WINDOW_MS (23LL * 3600 * 1000)

typedef struct span {
  int64_t from, to; /* ticks [from, to] */
  const char *what; /* a job's _id, or "skip" */
} span_t;

static int by_from(const void *a, const void *b) {
  const span_t *x = a, *y = b;
  return x->from < y->from ? -1 : x->from > y->from;
}

/* The gen record (current or past) of gen, or 0 when the schedule has no
 * such gen in what it keeps. */
static int gen_record(const json_t *s, int64_t gen, int64_t *first,
                      int64_t *next, int64_t *until) {
  if (dtx__str_is(s, "state", "active") && dtx__int(s, "gen") == gen) {
    *first = dtx__int(s, "audit_from");
    *next = dtx__int(s, "next_at");
    *until = -1; /* still current */
    return 1;
  }
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(s, "past"), i, p) {
    if (dtx__int(p, "gen") == gen) {
      *first = dtx__int(p, "first_at");
      *next = dtx__int(p, "next_at");
      *until = dtx__int(p, "until");
      return 1;
    }
  }
  return 0;
}

/* Checks schedule s (name) against its jobs (array, borrowed). */
static void check_sched(dtx__audit_t *a, const char *name, const json_t *s,
                        const json_t *jobs, int64_t now, int64_t *checked,
                        int64_t *inflight) {
  dtx__sched_spec_t sp;
  if (dtx__sched_spec(s, &sp)) {
    dtx__audit_finding(a, "sched_tick", "schedule %s: %s", name,
                       dtx_errdetail());
    dtx__err_clear();
    return;
  }
  int active = dtx__str_is(s, "state", "active");
  int64_t gen = dtx__int(s, "gen"), next_at = dtx__int(s, "next_at");
  /* The gen whose every tick is checked: the current one, or for a
   * tombstone the gen it removed (its last past record; the skipped runs
   * it kept are that gen's). */
  int64_t cov_gen = gen;
  const json_t *past = json_object_get(s, "past");
  if (!active) {
    const json_t *lastp = json_array_get(past, json_array_size(past) - 1);
    cov_gen = lastp ? dtx__int(lastp, "gen") : -1;
  }
  size_t n = json_array_size(jobs), ns = 0, i;
  json_t *skipped = json_object_get(s, "skipped"), *j;
  span_t *spans = calloc(n + json_array_size(skipped) + 1, sizeof *spans);
  if (!spans) {
    dtx__audit_finding(a, "audit_error", "schedule %s: out of memory", name);
    return;
  }
  json_array_foreach(jobs, i, j) {
    const json_t *sc = json_object_get(j, "sched");
    const char *id = dtx__str(j, "_id");
    int64_t g = dtx__int(sc, "gen"), t = dtx__int(sc, "tick");
    int64_t last = dtx__int(sc, "last"), first, next, until;
    char want[200];
    dtx__sched_job_id(want, sizeof want, name, g, t);
    if (!id || strcmp(id, want) != 0 || last < t ||
        !dtx__sched_is_tick(&sp, t) || !dtx__sched_is_tick(&sp, last)) {
      dtx__audit_finding(a, "sched_tick", "job %s of schedule %s: not a "
                         "tick of it (gen %lld, tick %lld, last %lld)",
                         id ? id : "?", name, (long long)g, (long long)t,
                         (long long)last);
      continue;
    }
    if (!gen_record(s, g, &first, &next, &until)) {
      if (g >= gen)
        dtx__audit_finding(a, "sched_tick", "job %s: schedule %s never "
                           "had gen %lld", id, name, (long long)g);
      continue; /* an older gen than the history kept */
    }
    if (t >= next) {
      /* J9: the one tick in flight at the change, due before it; for
       * the current gen, a tick enqueued and not yet advanced past. */
      if (t == next && until >= 0 && t <= until)
        continue;
      if (until < 0 && t <= now) { /* ticked after the audit read it */
        (*inflight)++;
        continue;
      }
      dtx__audit_finding(a, "sched_tick", "job %s of schedule %s: tick "
                         "%lld is at or past its gen's next tick %lld",
                         id, name, (long long)t, (long long)next);
      continue;
    }
    if (last >= next) {
      dtx__audit_finding(a, "sched_tick", "job %s of schedule %s: stands "
                         "for ticks up to %lld, past next_at %lld", id,
                         name, (long long)last, (long long)next);
      continue;
    }
    if (g == cov_gen)
      spans[ns++] = (span_t){t, last, id};
  }
  int64_t f0 = 0, u0 = 0;
  if (cov_gen < 0 || !gen_record(s, cov_gen, &f0, &next_at, &u0)) {
    free(spans); /* a tombstone of no gen: nothing to cover */
    return;
  }
  json_array_foreach(skipped, i, j) {
    int64_t f = json_integer_value(json_array_get(j, 0));
    int64_t t = json_integer_value(json_array_get(j, 1));
    if (t < f || !dtx__sched_is_tick(&sp, f) || !dtx__sched_is_tick(&sp, t) ||
        t >= next_at)
      dtx__audit_finding(a, "sched_tick", "schedule %s: skipped run "
                         "[%lld, %lld] is not a run of its ticks before "
                         "next_at", name, (long long)f, (long long)t);
    else
      spans[ns++] = (span_t){f, t, "skip"};
  }
  qsort(spans, ns, sizeof *spans, by_from);
  /* Sweep the window: every tick in exactly one span. */
  int64_t from = f0;
  gen = cov_gen;
  if (from < now - AUDIT_WINDOW_MS)
    from = now - AUDIT_WINDOW_MS;
  int64_t cursor = dtx__sched_next(&sp, from - 1);
  const char *prev = NULL;
  for (size_t k = 0; k < ns; k++) {
    if (!prev && spans[k].from < cursor) {
      if (spans[k].to < cursor)
        continue; /* before the window */
    } else if (spans[k].from < cursor)
      dtx__audit_finding(a, "sched_twice", "schedule %s: tick %lld has "
                         "two runs (%s and %s)", name,
                         (long long)spans[k].from, prev ? prev : "?",
                         spans[k].what);
    else if (spans[k].from > cursor)
      dtx__audit_finding(a, "sched_missing", "schedule %s gen %lld: ticks "
                         "from %lld to before %lld have no job", name,
                         (long long)gen, (long long)cursor,
                         (long long)spans[k].from);
    (*checked)++;
    prev = spans[k].what;
    int64_t after = dtx__sched_next(&sp, spans[k].to);
    if (after > cursor)
      cursor = after;
  }
  if (cursor < next_at)
    dtx__audit_finding(a, "sched_missing", "schedule %s gen %lld: ticks "
                       "from %lld to before next_at %lld have no job", name,
                       (long long)gen, (long long)cursor, (long long)next_at);
  free(spans);
}

int dtx__job_sched_audit(dtx__audit_t *a, const json_t *scheds,
                         const json_t *jobs) {
  json_t *s, *j;
  const char *name, *id;
  int64_t now = dtx__now_ms(), checked = 0, inflight = 0;
  /* The jobs of each schedule, by its name. */
  json_t *by = json_object();
  json_object_foreach((json_t *)jobs, id, j) {
    const char *sn = dtx__str(json_object_get(j, "sched"), "name");
    if (!sn)
      continue;
    json_t *list = json_object_get(by, sn);
    if (!list) {
      list = json_array();
      json_object_set_new(by, sn, list);
    }
    json_array_append(list, j);
  }
  json_object_foreach((json_t *)scheds, name, s)
      check_sched(a, name, s, json_object_get(by, name), now, &checked,
                  &inflight);
  dtx__audit_set(a, "schedules",
                 json_integer((json_int_t)json_object_size(scheds)));
  dtx__audit_set(a, "schedule_runs", json_integer((json_int_t)checked));
  dtx__audit_unsettled(a, inflight);
  json_decref(by);
  return 0;
}
