/* rate.c -- a queue's rate limit: `--rate N/MS [--rate-group PATH]`, at
 * most N claims per window of MS ms, per queue or per group key taken
 * from the job, enforced by the store across every process (docs/jobs.md,
 * "Rate limits").
 *
 * The queue's settings document (queues.c) holds rate: {n, ms[, group]}.
 * Each group (the whole queue without --rate-group) has one window
 * document of "job_rates":
 *   {_id: QUEUE/KEY, queue, group: KEY, start: ms, end: ms, ms, n,
 *    over: bool}
 * KEY is the JSON text of the job's value at the group path (null when
 * it has none), or "#" + its digest when long.  A claim round of a rated
 * queue:
 *
 *   find due jobs (the groups known full left out) --> TAKE units for
 *   them, per group, in one conditional update of its window document
 *   --> CLAIM the jobs admitted (the kit's fenced moves) --> a unit whose
 *   claim was lost to another claimer goes to the next job found of its
 *   group, in the same call (up to ROUNDS finds); else it is lost.
 *
 *   transition                    function          fault point
 *   window: n -> n + k (n+k <= N) take               job.rate.take
 *   window ended -> next window   take (restart)     job.rate.take
 *   (no document) -> window       take (insert)      job.rate.take
 *   window long over -> over      dtx__jr_recover    job.rate.retire
 *   over -> (deleted)             dtx__jr_recover    job.rate.purge
 *
 * Windows are fixed, and anchored: a group's first take starts its first
 * window at the taker's clock; each next one starts on the grid start +
 * k * ms (the first take at or after the end picks the k), so windows
 * never drift and never overlap.  Claims counted in a window are the
 * units taken while it was current by the taker's clock (wall ms): hosts
 * whose clocks differ by s ms may see a window end up to s ms apart.
 *
 * Invariants:
 *  J22 A window document's n never exceeds the rate's N (the take is one
 *      update conditioned on the window's start and on n <= N - k), and
 *      every claim of a rated queue is preceded by the take of a unit of
 *      its group's current window, a unit serving at most one landed
 *      claim: so no window admits more than N claims, whatever the
 *      number of workers and processes.  A unit is never given back: one
 *      whose claim is lost to another claimer serves the next job of its
 *      group found in the same call, or is lost (the window admits fewer
 *      -- conservative).
 *  J23 A plain write (doctx update, insert, delete, bulk) can neither
 *      lower n, move a window, nor delete a current window: only the
 *      job.* steps write them, and only a window marked over (long ended)
 *      may be deleted.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "txn/jobq/jobq.h"
#include "util/assert.h"
#include "util/deadline.h"
#include "util/err.h"

/* Finds a claim call makes (a unit lost to another claimer, a group
 * found full: find again). */
#define ROUNDS 8
/* A window ended this long ago is retired, then purged, by recovery. */
#define RETIRE_MS 60000
#define PURGE_BATCH 200

/* ---- the rules of job_rates --------------------------------------------- */

const char dtx__jr_shape[] =
    "{\"$jsonSchema\":{\"bsonType\":\"object\","
    "\"required\":[\"_id\",\"queue\",\"group\",\"start\",\"end\",\"ms\","
    "\"n\",\"over\"],"
    "\"additionalProperties\":false,"
    "\"properties\":{"
    "\"_id\":{\"bsonType\":\"string\",\"minLength\":3,\"maxLength\":400},"
    "\"queue\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":128},"
    "\"group\":{\"bsonType\":\"string\",\"minLength\":1,\"maxLength\":260},"
    "\"start\":{\"bsonType\":\"long\"},\"end\":{\"bsonType\":\"long\"},"
    "\"ms\":{\"bsonType\":\"long\",\"minimum\":1},"
    "\"n\":{\"bsonType\":\"long\",\"minimum\":0},"
    "\"over\":{\"bsonType\":\"bool\"}}}}";

/* J23: only the job.* steps write a window; n is the count of units
 * taken in the window, so a plain write may not lower or move it. */
const char dtx__jr_transition[] =
    "[{\"immutable\":[\"_id\",\"queue\",\"group\"]},"
    "{\"scope\":\"plain\",\"steps\":[\"job\"],\"insert\":false,"
    "\"immutable\":[\"start\",\"end\",\"ms\",\"n\",\"over\"],"
    "\"why\":\"a rate window's count changes only through the claims of "
    "its queue's workers (docs/jobs.md, Rate limits)\"}]";

/* Only a window long over (recovery marked it) may go. */
const char dtx__jr_delete_guard[] = "{\"over\":true}";

/* ---- the setting ------------------------------------------------------------ */

int dtx_job_rate_parse(const char *text, int64_t *n, int64_t *ms) {
  const char *slash = text ? strchr(text, '/') : NULL;
  char buf[64];
  *n = *ms = 0;
  if (!slash || slash == text || strlen(text) >= sizeof buf)
    return dtx__err(DTX_EINVAL, "a rate is N/MS (claims per window of MS "
                    "ms), got '%s'", text ? text : "(null)");
  snprintf(buf, sizeof buf, "%s", text);
  buf[slash - text] = '\0';
  const char *parts[2] = {buf, buf + (slash - text) + 1};
  int64_t v[2];
  for (int i = 0; i < 2; i++) {
    char *end = NULL;
    const char *p = parts[i];
    if (*p < '0' || *p > '9')
      return dtx__err(DTX_EINVAL, "a rate is N/MS with N and MS whole "
                      "numbers, got '%s'", text);
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (errno || *end)
      return dtx__err(DTX_EINVAL, "a rate is N/MS with N and MS whole "
                      "numbers in range, got '%s'", text);
    v[i] = x;
  }
  *n = v[0];
  *ms = v[1];
  return dtx_job_rate_check(*n, *ms, NULL);
}

int dtx_job_rate_check(int64_t n, int64_t ms, const char *group) {
  if (n < 1 || n > DTX_JOB_RATE_N_MAX)
    return dtx__err(DTX_EINVAL, "a rate's N must be from 1 to %d, got %lld",
                    DTX_JOB_RATE_N_MAX, (long long)n);
  if (ms < 1 || ms > DTX_JOB_RATE_MS_MAX)
    return dtx__err(DTX_EINVAL, "a rate's window must be from 1 to %lld ms, "
                    "got %lld", (long long)DTX_JOB_RATE_MS_MAX,
                    (long long)ms);
  if (!group)
    return 0;
  size_t len = strlen(group);
  if (len == 0 || len > 128)
    return dtx__err(DTX_EINVAL, "a rate group is a path of 1..128 "
                    "characters into the job, got '%s'", group);
  for (size_t i = 0; i < len; i++) {
    char ch = group[i];
    int word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
               (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (ch == '.' ? (i == 0 || i + 1 == len || group[i - 1] == '.')
                  : !word)
      return dtx__err(DTX_EINVAL, "a rate group is a dotted path of "
                      "[A-Za-z0-9_-] names into the job (e.g. "
                      "payload.customer), got '%s'", group);
  }
  return 0;
}

int dtx__jr_of(const json_t *settings, dtx__jr_t *r) {
  const json_t *rate = json_object_get(settings, "rate");
  memset(r, 0, sizeof *r);
  if (!json_is_object(rate))
    return 0;
  r->n = dtx__int(rate, "n");
  r->ms = dtx__int(rate, "ms");
  const char *g = dtx__str(rate, "group");
  if (g)
    snprintf(r->group, sizeof r->group, "%s", g);
  if (r->n < 1 || r->ms < 1)
    return dtx__err(DTX_ESTATE, "a rate of %lld per %lld ms (written with "
                    "--bypass-validation?)", (long long)r->n,
                    (long long)r->ms);
  return 1;
}

/* ---- groups ----------------------------------------------------------------- */

/* The group's key (the value's JSON text, or # + its digest when long)
 * and window id QUEUE/KEY. */
static int group_key(const char *queue, const dtx__jr_t *r, const json_t *v,
                     char *key, size_t keysz, char *id, size_t idsz) {
  if (!r->group[0]) {
    snprintf(key, keysz, "*");
  } else {
    json_t *null = json_null();
    char *text = dtx__json_dump(v ? v : null);
    json_decref(null);
    if (!text)
      return DTX_ENOMEM;
    if (strlen(text) <= 200) {
      snprintf(key, keysz, "%s", text);
    } else {
      char dg[17];
      int rc = dtx__json_digest(v, dg);
      if (rc) {
        free(text);
        return rc;
      }
      snprintf(key, keysz, "#%s", dg);
    }
    free(text);
  }
  snprintf(id, idsz, "%s/%s", queue, key);
  return 0;
}

/* ---- the per-process cache of windows ---------------------------------- */

#define CACHE_N 128

typedef struct win {
  const dtx_store_t *st;
  char id[400];
  json_t *val;   /* the group's value (JSON null for none) */
  int64_t start; /* the window last seen; 0: empty */
  int64_t end;
  int full; /* n reached N when last seen */
} win_t;

static win_t cache[CACHE_N];
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static win_t *win_of(const dtx_store_t *st, const char *id) {
  win_t *old = &cache[0];
  for (size_t i = 0; i < CACHE_N; i++) {
    if (cache[i].start && cache[i].st == st && strcmp(cache[i].id, id) == 0)
      return &cache[i];
    if (cache[i].end < old->end)
      old = &cache[i];
  }
  return old;
}

static void cache_put(const dtx_store_t *st, const char *id, const json_t *v,
                      int64_t start, int64_t end, int full) {
  pthread_mutex_lock(&cache_mu);
  win_t *w = win_of(st, id);
  if (!(w->st == st && strcmp(w->id, id) == 0)) {
    json_decref(w->val);
    w->val = v ? json_deep_copy(v) : json_null();
    w->st = st;
    snprintf(w->id, sizeof w->id, "%s", id);
  }
  w->start = start ? start : 1;
  w->end = end;
  w->full = full;
  pthread_mutex_unlock(&cache_mu);
}

/* The window this process last saw of id: its start (0: none). */
static int64_t cache_start(const dtx_store_t *st, const char *id,
                           int64_t now) {
  int64_t s = 0;
  pthread_mutex_lock(&cache_mu);
  win_t *w = win_of(st, id);
  if (w->start && w->st == st && strcmp(w->id, id) == 0 && now < w->end &&
      now >= w->start)
    s = w->start;
  pthread_mutex_unlock(&cache_mu);
  return s;
}

int dtx__jr_full(const dtx_store_t *st, const char *queue,
                 const dtx__jr_t *r, int64_t *until) {
  char key[260], id[400];
  *until = 0;
  if (r->group[0] || group_key(queue, r, NULL, key, sizeof key, id, sizeof id))
    return 0;
  int64_t now = dtx__now_ms();
  pthread_mutex_lock(&cache_mu);
  win_t *w = win_of(st, id);
  int full = w->start && w->st == st && strcmp(w->id, id) == 0 && w->full &&
             now < w->end && now >= w->start;
  if (full)
    *until = w->end;
  pthread_mutex_unlock(&cache_mu);
  return full;
}

json_t *dtx__jr_due(const dtx_store_t *st, const char *queue,
                    const dtx__jr_t *r, const json_t *due,
                    const json_t *tried, int keep_full) {
  json_t *f = json_deep_copy(due);
  if (!f)
    return NULL;
  json_t *and = json_array();
  if (r->group[0] && !keep_full) {
    size_t plen = strlen(queue);
    int64_t now = dtx__now_ms();
    json_t *nin = json_array();
    pthread_mutex_lock(&cache_mu);
    for (size_t i = 0; nin && i < CACHE_N; i++) {
      win_t *w = &cache[i];
      if (w->start && w->st == st && w->full && now < w->end &&
          now >= w->start && strncmp(w->id, queue, plen) == 0 &&
          w->id[plen] == '/')
        json_array_append(nin, w->val);
    }
    pthread_mutex_unlock(&cache_mu);
    if (nin && json_array_size(nin))
      json_array_append_new(
          and, json_pack("{s:{s:o}}", r->group, "$nin", nin));
    else
      json_decref(nin);
  }
  if (tried && json_array_size(tried))
    json_array_append_new(and, json_pack("{s:{s:O}}", "_id", "$nin", tried));
  if (and && json_array_size(and)) {
    json_array_append_new(and, f);
    f = json_pack("{s:o}", "$and", and);
  } else {
    json_decref(and);
  }
  return f;
}

/* ---- the take ---------------------------------------------------------------- */

/* Takes up to k units of the window of group value v: *got of them (0
 * when the window is full). */
static int take(dtx__exec_t *ex, const char *queue, const dtx__jr_t *r,
                const json_t *v, int64_t k, int64_t *got) {
  char key[260], id[400];
  int rc = group_key(queue, r, v, key, sizeof key, id, sizeof id);
  *got = 0;
  if (rc)
    return rc;
  if (k > r->n)
    k = r->n;
  int64_t now = dtx__now_ms(), guess = cache_start(ex->st, id, now);
  for (int round = 0; round < ROUNDS; round++) {
    json_t *doc = NULL;
    int64_t start = guess, want = k;
    if (!start) {
      rc = dtx__kit_get(ex, DTX_JOB_RATES, id, &doc);
      if (rc == DTX_ENOTFOUND) {
        dtx__err_clear();
        int64_t end = dtx__add_sat(now, r->ms);
        json_t *ins = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:b}", "_id",
                                id, "queue", queue, "group", key, "start",
                                (json_int_t)now, "end", (json_int_t)end, "ms",
                                (json_int_t)r->ms, "n", (json_int_t)k, "over",
                                0);
        rc = ins ? dtx__kit_insert(ex, "job.rate.take", DTX_JOB_RATES, ins)
                 : DTX_ENOMEM;
        json_decref(ins);
        if (rc == DTX_EDUPKEY) { /* another taker's first window: again */
          dtx__err_clear();
          continue;
        }
        if (rc == 0) {
          *got = k;
          cache_put(ex->st, id, v, now, end, k >= r->n);
        }
        return rc;
      }
      if (rc)
        return rc;
      start = dtx__int(doc, "start");
      int64_t end = dtx__int(doc, "end"), n = dtx__int(doc, "n");
      if (now >= end) {
        /* The window ended: the next one on its grid (J22: windows never
         * overlap, so the count starts again at 0). */
        int64_t ms = dtx__int(doc, "ms") > 0 ? dtx__int(doc, "ms") : r->ms;
        int64_t ns = end + ((now - end) / r->ms) * r->ms;
        if (ms != r->ms) /* the rate's window changed: anchored anew */
          ns = now;
        int64_t ne = dtx__add_sat(ns, r->ms);
        json_t *f = json_pack("{s:s,s:I}", "_id", id, "start",
                              (json_int_t)start);
        json_t *u = json_pack("{s:{s:I,s:I,s:I,s:I,s:b}}", "$set", "start",
                              (json_int_t)ns, "end", (json_int_t)ne, "ms",
                              (json_int_t)r->ms, "n", (json_int_t)k, "over",
                              0);
        json_decref(doc);
        int matched = 0;
        rc = f && u ? dtx__kit_update(ex, "job.rate.take", DTX_JOB_RATES, f,
                                      u, &matched)
                    : (json_decref(f), json_decref(u), DTX_ENOMEM);
        if (rc)
          return rc;
        if (matched) {
          *got = k;
          cache_put(ex->st, id, v, ns, ne, k >= r->n);
          return 0;
        }
        continue; /* another taker moved it: read again */
      }
      json_decref(doc);
      if (n >= r->n) {
        cache_put(ex->st, id, v, start, end, 1);
        return 0;
      }
      if (want > r->n - n)
        want = r->n - n;
    }
    /* J22: n + want <= N, in the window as read. */
    json_t *f = json_pack("{s:s,s:I,s:{s:I}}", "_id", id, "start",
                          (json_int_t)start, "n", "$lte",
                          (json_int_t)(r->n - want));
    json_t *u = json_pack("{s:{s:I}}", "$inc", "n", (json_int_t)want);
    dtx_fam_opts_t o = {.return_new = 1};
    json_t *after = NULL;
    rc = f && u ? dtx__kit_modify_ex(ex, "job.rate.take", DTX_JOB_RATES, f, u,
                                     &o, &after)
                : (json_decref(f), json_decref(u), DTX_ENOMEM);
    if (rc == DTX_ENOMATCH) { /* moved on, or fuller than guessed: read */
      dtx__err_clear();
      guess = 0;
      continue;
    }
    if (rc)
      return rc;
    DTX_ASSERT(dtx__int(after, "n") <= r->n, "J22");
    *got = want;
    cache_put(ex->st, id, v, start, dtx__int(after, "end"),
              dtx__int(after, "n") >= r->n);
    json_decref(after);
    return 0;
  }
  return dtx__err(DTX_EBUSY, "queue '%s': the rate window %s kept moving",
                  queue, id);
}

/* ---- admission ------------------------------------------------------------- */

/* Per group of a claim call: units in hand (taken, not yet used). */
typedef struct hand {
  char key[260];
  const json_t *val; /* borrowed from a candidate (kept alive by keep) */
  int64_t units;
  int full; /* the window had no more */
} hand_t;

typedef struct admit {
  hand_t g[DTX__CLAIM_MANY_MAX];
  size_t ng;
  json_t *keep; /* the candidates whose values g[] borrows */
} admit_t;

static hand_t *hand_of(admit_t *a, const char *key, const json_t *v) {
  for (size_t i = 0; i < a->ng; i++)
    if (strcmp(a->g[i].key, key) == 0)
      return &a->g[i];
  if (a->ng == DTX__CLAIM_MANY_MAX)
    return NULL;
  hand_t *h = &a->g[a->ng++];
  memset(h, 0, sizeof *h);
  snprintf(h->key, sizeof h->key, "%s", key);
  h->val = v;
  return h;
}

/* Keeps of cands (in order) at most cap whose groups have, or get, a
 * unit; each unit kept is taken from its group's hand (*gi: the hand of
 * each kept one).  *full: a group found full this round. */
static int admit(dtx__exec_t *ex, const char *queue, const dtx__jr_t *r,
                 admit_t *a, json_t *cands, size_t cap, size_t *gi,
                 int *full) {
  size_t n = json_array_size(cands), kept = 0;
  char key[260], id[400];
  json_t *out = json_array();
  int rc = out ? 0 : DTX_ENOMEM;
  *full = 0;
  for (size_t i = 0; rc == 0 && i < n && kept < cap; i++) {
    json_t *c = json_array_get(cands, i);
    const json_t *v = r->group[0] ? dtx__path_get(c, r->group) : NULL;
    if ((rc = group_key(queue, r, v, key, sizeof key, id, sizeof id)))
      break;
    json_array_append(a->keep, c);
    hand_t *h = hand_of(a, key, v);
    if (!h)
      continue;
    if (h->units == 0 && !h->full) {
      /* As many as this group's jobs among the rest, up to what is left
       * of cap: one take per group per round. */
      int64_t want = 0;
      for (size_t j = i; j < n && (size_t)want < cap - kept; j++) {
        const json_t *w = r->group[0] ? dtx__path_get(json_array_get(cands, j), r->group)
                                      : NULL;
        char k2[260], id2[400];
        if ((rc = group_key(queue, r, w, k2, sizeof k2, id2, sizeof id2)))
          break;
        want += strcmp(k2, key) == 0;
      }
      int64_t got = 0;
      if (rc == 0 && (rc = take(ex, queue, r, v, want, &got)) == 0) {
        h->units = got;
        if (got < want)
          h->full = 1, *full = 1;
      }
    }
    if (rc || h->units == 0)
      continue;
    h->units--;
    gi[kept++] = (size_t)(h - a->g);
    json_array_append(out, c);
  }
  if (rc == 0) {
    json_array_clear(cands);
    json_array_extend(cands, out);
  }
  json_decref(out);
  return rc;
}

/* ---- the claim ------------------------------------------------------------- */

int dtx__jr_admit_once(dtx__exec_t *ex, const char *queue,
                       const dtx__jr_t *r, json_t *cands, size_t cap) {
  admit_t *a = calloc(1, sizeof *a);
  size_t gi[DTX__CLAIM_MANY_MAX];
  int full = 0;
  if (!a || !(a->keep = json_array())) {
    free(a);
    return DTX_ENOMEM;
  }
  if (cap > DTX__CLAIM_MANY_MAX)
    cap = DTX__CLAIM_MANY_MAX;
  int rc = admit(ex, queue, r, a, cands, cap, gi, &full);
  json_decref(a->keep);
  free(a); /* units in hand now are lost (J22: conservative) */
  return rc;
}

int dtx__jr_claim(dtx__exec_t *ex, const char *queue, const dtx__jr_t *r,
                  const json_t *due, const json_t *sort, size_t max,
                  json_t **jobs) {
  admit_t *a = calloc(1, sizeof *a);
  json_t *tried = json_array(), *won = json_array();
  int rc = a && tried && won && (a->keep = json_array()) ? 0 : DTX_ENOMEM;
  int64_t until = 0;
  *jobs = NULL;
  if (rc == 0 && dtx__jr_full(ex->st, queue, r, &until))
    rc = dtx__err(DTX_ENOMATCH, "queue '%s': its rate of %lld per %lld ms "
                  "is reached until %lld", queue, (long long)r->n,
                  (long long)r->ms, (long long)until);
  int promoted = 0;
  for (int round = 0; rc == 0 && round < ROUNDS; round++) {
    size_t need = max - json_array_size(won);
    if (need == 0)
      break;
    /* Units in hand (their claims were lost): this round looks only for
     * jobs of their groups -- full or not, the units are taken -- so
     * they are used before any is lost. */
    json_t *only = r->group[0] ? json_array() : NULL;
    size_t inhand = 0;
    for (size_t i = 0; i < a->ng; i++)
      if (a->g[i].units > 0) {
        inhand += (size_t)a->g[i].units;
        if (only)
          json_array_append(only, a->g[i].val ? (json_t *)a->g[i].val
                                                 : json_null());
      }
    if (inhand && need > inhand)
      need = inhand;
    json_t *f = dtx__jr_due(ex->st, queue, r, due, tried, inhand > 0);
    json_t *cands = NULL;
    if (f && only && json_array_size(only))
      f = json_pack("{s:[o,{s:{s:O}}]}", "$and", f, r->group, "$in", only);
    json_decref(only);
    /* More than we need when a group may be full, or after a lost race:
     * the rest spread the claimers out. */
    int64_t look = r->group[0] || round ? (int64_t)need * 4 : (int64_t)need;
    rc = f ? dtx__kit_find_n(ex, DTX_JOBS, f, sort, look, &cands)
           : DTX_ENOMEM;
    json_decref(f);
    if (rc == 0 && json_array_size(cands) == 0 && !promoted) {
      int64_t moved = 0;
      promoted = 1;
      rc = dtx__job_promote(ex, queue, 100, &moved);
      if (rc == 0 && moved) {
        json_decref(cands);
        round--;
        continue;
      }
    }
    if (rc || json_array_size(cands) == 0) {
      json_decref(cands);
      break;
    }
    if (round)
      dtx__job_pick(cands, json_array_size(cands));
    size_t gi[DTX__CLAIM_MANY_MAX];
    int full = 0;
    rc = admit(ex, queue, r, a, cands, need, gi, &full);
    size_t k = json_array_size(cands);
    if (rc || k == 0) {
      json_decref(cands);
      if (rc == 0 && full)
        continue; /* those groups are left out of the next find */
      break;
    }
    const json_t *docs[DTX__CLAIM_MANY_MAX];
    dtx__move_t m[DTX__CLAIM_MANY_MAX];
    json_t *outs[DTX__CLAIM_MANY_MAX];
    int rcs[DTX__CLAIM_MANY_MAX];
    dtx__job_claim_moves(cands, k, 0, docs, m);
    int mrc = dtx__kit_move_many(ex, &dtx__job_kind, docs, m, k, outs, rcs,
                                 NULL);
    size_t lost = 0;
    for (size_t j = 0; j < k; j++) {
      if (rcs[j] == 0) {
        if (json_array_append_new(won, outs[j]))
          rc = DTX_ENOMEM; /* it runs under no one: recovery */
        continue;
      }
      json_array_append(tried, json_object_get(docs[j], "_id"));
      if (rcs[j] == DTX_ENOMATCH || rcs[j] == DTX_ESTALE) {
        /* Lost to another claimer: the unit stays in hand for the next
         * job of its group (J22). */
        a->g[gi[j]].units++;
        lost++;
      }
    }
    json_decref(cands);
    if (mrc && mrc != DTX_ESTALE && rc == 0)
      rc = mrc;
    if (rc || (!lost && !full))
      break;
  }
  json_decref(tried);
  if (a)
    json_decref(a->keep);
  free(a);
  if (json_array_size(won) > 0) {
    dtx__err_clear();
    *jobs = won;
    return 0;
  }
  json_decref(won);
  if (rc)
    return rc;
  return dtx__err(DTX_ENOMATCH, "queue '%s': no job due within its rate",
                  queue);
}

/* ---- recovery ---------------------------------------------------------------- */

int dtx__jr_recover(dtx__exec_t *ex, dtx__tally_t *t) {
  json_t *list = NULL, *d;
  size_t i;
  int64_t now = dtx__now_ms();
  json_t *f = json_pack("{s:{s:I}}", "end", "$lt",
                        (json_int_t)(now - RETIRE_MS));
  int rc = f ? dtx__kit_find_n(ex, DTX_JOB_RATES, f, NULL, PURGE_BATCH, &list)
             : DTX_ENOMEM;
  json_decref(f);
  json_array_foreach(list, i, d) {
    const json_t *id = json_object_get(d, "_id");
    const json_t *start = json_object_get(d, "start");
    if (rc || !json_is_string(id))
      break;
    if (!json_is_true(json_object_get(d, "over"))) {
      /* Conditioned on the window as read: a take that started the next
       * one meanwhile keeps it. */
      int matched = 0;
      rc = dtx__kit_update(ex, "job.rate.retire", DTX_JOB_RATES,
                           json_pack("{s:O,s:O,s:b}", "_id", id, "start",
                                     start, "over", 0),
                           json_pack("{s:{s:b}}", "$set", "over", 1),
                           &matched);
      if (rc || !matched)
        continue;
    }
    int64_t gone = 0;
    rc = dtx__kit_delete(ex, "job.rate.purge", DTX_JOB_RATES,
                         json_pack("{s:O,s:O,s:b}", "_id", id, "start", start,
                                   "over", 1),
                         &gone);
    if (rc == 0 && gone)
      dtx__tally_ran(t, "rate_windows_purged", gone);
  }
  json_decref(list);
  return rc;
}
