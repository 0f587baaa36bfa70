/* registry.c -- the list of patterns, and what is derived from it: the
 * fault points `doctx faults` prints and DOCTX_FAULT may name, and each
 * pattern's set-up (indexes and collection rules), once per store.
 *
 * Adding a pattern is one line in DTX_PATTERNS below: X(name) expects a
 * `const dtx__pattern_t dtx__name_pattern` in src/txn/name/ (docs/kit.md).
 * `worker`, `recover`, `audit` and `faults` loop over dtx__patterns. */
#include "txn/kit/kit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h" /* dtx__store_catalog_gen */
#include "util/err.h"

#define DTX_PATTERNS(X) \
  X(transfer) \
  X(job) \
  X(lock) \
  X(sync) \
  X(ledger) \
  X(order) \
  X(batch) \
  X(interest) \
  X(version) \
  X(txn)

#define DECLARE(name) extern const dtx__pattern_t dtx__##name##_pattern;
DTX_PATTERNS(DECLARE)
#undef DECLARE

#define ENTRY(name) &dtx__##name##_pattern,
const dtx__pattern_t *const dtx__patterns[] = {DTX_PATTERNS(ENTRY) NULL};
#undef ENTRY

/* ---- fault points -------------------------------------------------------------- */

static const char **all_points;
static pthread_once_t points_once = PTHREAD_ONCE_INIT;

/* Every pattern's points in registry order, then the store layer's.  A
 * pattern's points must start with "NAME." -- the crash suites dispatch a
 * point to tests/crash/scenarios/NAME.sh by that prefix. */
static void join_points(void) {
  size_t n = 0, k = 0;
  const char *const *sp = dtx__fault_store_points();
  for (size_t i = 0; dtx__patterns[i]; i++)
    for (const char *const *p = dtx__patterns[i]->fault_points; p && *p; p++)
      n++;
  for (const char *const *p = sp; *p; p++)
    n++;
  all_points = calloc(n + 1, sizeof *all_points);
  if (!all_points)
    abort(); /* at start-up, before any work: nothing to save */
  for (size_t i = 0; dtx__patterns[i]; i++) {
    const char *name = dtx__patterns[i]->name;
    size_t len = strlen(name);
    for (const char *const *p = dtx__patterns[i]->fault_points; p && *p;
         p++) {
      if (strncmp(*p, name, len) != 0 || (*p)[len] != '.')
        abort(); /* a table error, caught by any test run */
      all_points[k++] = *p;
    }
  }
  for (const char *const *p = sp; *p; p++)
    all_points[k++] = *p;
}

const char *const *dtx_fault_points(void) {
  pthread_once(&points_once, join_points);
  return all_points;
}

int dtx_fault_check(void) {
  dtx__err_clear();
  return dtx__fault_init(dtx_fault_points());
}

/* ---- set-up: indexes and rules -------------------------------------------------- */

/* "URI\npattern" of every (store, pattern) this process set up, with the
 * store layer's catalog generation read before the set-up began.  Keyed
 * by URI, not by handle: a handle's address is reused after close, and
 * another handle on the same store needs nothing new.  A private
 * in-memory store is new on every open, so it is never remembered.
 * An entry holds only while the generation is unchanged: a drop of a
 * collection (or a change of its rules) through this library in this
 * process, on any handle, raises it, and the next call sets the pattern
 * up again -- else the pattern would go on writing without its indexes,
 * a unique one among them.  A drop by another process is not seen here
 * (docs/kit.md, "Set-up, and what a process remembers"). */
typedef struct ensured {
  char *key; /* never freed: a thread's memo points at it */
  uint64_t gen;
} ensured_t;
static pthread_mutex_t ensure_lock = PTHREAD_MUTEX_INITIALIZER;
static ensured_t *ensured;
static size_t nensured, capensured;

static int is_private(const char *uri) {
  return strncmp(uri, "sqlite::memory:", 15) == 0;
}

/* Parses a rule's JSON text (NULL: none -> *out NULL). */
static int rule_json(const dtx__pattern_t *p, const char *coll,
                     const char *text, json_t **out) {
  *out = NULL;
  if (!text)
    return 0;
  if (!(*out = json_loads(text, 0, NULL)))
    return dtx__err(DTX_EINVAL, "pattern %s: the rules of %s are not JSON: "
                    "%.80s", p->name, coll, text);
  return 0;
}

/* Installs d's rules unless the store holds exactly these already: a
 * change of rules costs a catalog version (on Redis every bucket's stamp
 * is raised), so a process that starts must not pay it for nothing. */
static int install_rules(dtx_store_t *st, const dtx__pattern_t *p,
                         const dtx__rules_def_t *d) {
  json_t *v = NULL, *g = NULL, *t = NULL, *cur = NULL;
  int rc = rule_json(p, d->coll, d->validator, &v);
  if (rc == 0)
    rc = rule_json(p, d->coll, d->delete_guard, &g);
  if (rc == 0)
    rc = rule_json(p, d->coll, d->transition, &t);
  if (rc == 0)
    rc = dtx_store_get_rules(st, d->coll, &cur);
  if (rc == 0) {
    json_t *cv = json_object_get(cur, "validator");
    json_t *cg = json_object_get(cur, "delete_guard");
    json_t *ct = json_object_get(cur, "transition");
    json_t *cp = json_object_get(cur, "pattern");
    int same = (v ? json_equal(v, cv) : json_is_null(cv)) &&
               (g ? json_equal(g, cg) : json_is_null(cg)) &&
               (t ? json_equal(t, ct) : json_is_null(ct)) &&
               json_is_string(cp) && strcmp(json_string_value(cp), p->name) == 0;
    if (!same) {
      /* The pattern's own collection: its rules name it, so no plain
       * change of rules takes them away (dtx_rules_opts_t). */
      dtx_collection_rules_t r = {.validator = v, .delete_guard = g,
                                  .transition = t};
      dtx_rules_opts_t o = {.bypass_validation = 1, .pattern = p->name};
      rc = dtx_store_set_rules_ex(st, d->coll, &r, &o);
    }
  }
  json_decref(v);
  json_decref(g);
  json_decref(t);
  json_decref(cur);
  return rc ? dtx__err_wrap(rc, "installing the %s rules of %s", p->name,
                            d->coll)
            : 0;
}

int dtx__kit_guard_coll(dtx_store_t *st, const char *coll,
                        const char *rule) {
  json_t *mine = json_loads(rule, 0, NULL), *cur = NULL, *e;
  int rc = mine ? dtx_store_get_rules(st, coll, &cur) : DTX_ENOMEM;
  json_t *t = json_object_get(cur, "transition"), *all = NULL;
  size_t i;
  int has = json_is_object(t) && json_equal(t, mine);
  json_array_foreach(t, i, e) has = has || json_equal(e, mine);
  if (rc == 0 && !has) {
    all = json_is_array(t) ? json_copy(t) : json_array();
    if (!all || (json_is_object(t) && json_array_append(all, t)) ||
        json_array_append(all, mine)) {
      rc = DTX_ENOMEM;
    } else {
      json_t *v = json_object_get(cur, "validator");
      json_t *g = json_object_get(cur, "delete_guard");
      dtx_collection_rules_t r = {json_is_null(v) ? NULL : v,
                                  json_is_null(g) ? NULL : g, all};
      /* A pattern's rule object: only a bypass may add or take it. */
      dtx_rules_opts_t o = {.bypass_validation = 1};
      rc = dtx_store_set_rules_ex(st, coll, &r, &o);
    }
  }
  json_decref(all);
  json_decref(cur);
  json_decref(mine);
  return rc;
}

static int create_all(dtx_store_t *st, const dtx__pattern_t *p) {
  for (const dtx__rules_def_t *d = p->rules; d && d->coll; d++) {
    int rc = install_rules(st, p, d);
    if (rc)
      return rc;
  }
  for (const dtx__index_def_t *d = p->indexes; d && d->keys; d++) {
    json_t *keys = json_loads(d->keys, 0, NULL);
    /* The pattern's own unique indexes, in its own collection. */
    dtx_index_opts_t o = {.unique = d->unique, .sparse = d->sparse,
                          .bypass_validation = 1};
    int rc = keys ? dtx_store_create_index(st, d->coll, keys, &o, NULL)
                  : dtx__err(DTX_EINVAL, "pattern %s: bad index keys %s",
                             p->name, d->keys);
    json_decref(keys);
    if (rc)
      return dtx__err_wrap(rc, "creating the %s indexes of %s", p->name,
                           d->coll);
  }
  return 0;
}

static int is_key(const char *key, const char *uri, size_t ulen,
                  const char *name) {
  return key && strncmp(key, uri, ulen) == 0 && key[ulen] == '\n' &&
         strcmp(key + ulen + 1, name) == 0;
}

int dtx__kit_once(dtx_store_t *st, const char *name,
                  int (*setup)(dtx_store_t *st, const void *arg),
                  const void *arg) {
  /* This thread's last hit, checked without the lock: every transfer
   * comes through here.  Keys are never freed, so the pointer stays
   * valid. */
  static _Thread_local const char *memo;
  static _Thread_local uint64_t memo_gen;
  /* Read before any set-up: a drop after this makes the entry old. */
  uint64_t gen = dtx__store_catalog_gen();
  const char *uri = dtx_store_uri(st);
  size_t ulen = strlen(uri), nlen = strlen(name);
  if (is_private(uri))
    return setup(st, arg);
  if (memo_gen == gen && is_key(memo, uri, ulen, name))
    return 0;
  /* Held while setting up, so no thread of this process writes an item
   * before its (possibly unique) indexes and rules exist. */
  pthread_mutex_lock(&ensure_lock);
  size_t i = 0;
  while (i < nensured && !is_key(ensured[i].key, uri, ulen, name))
    i++;
  if (i < nensured && ensured[i].gen == gen) {
    memo = ensured[i].key;
    memo_gen = gen;
    pthread_mutex_unlock(&ensure_lock);
    return 0;
  }
  int rc = setup(st, arg);
  if (rc == 0 && i < nensured) {
    ensured[i].gen = gen;
    memo = ensured[i].key;
    memo_gen = gen;
  } else if (rc == 0) {
    char *key = malloc(ulen + nlen + 2);
    if (nensured == capensured) {
      size_t ncap = capensured ? capensured * 2 : 8;
      ensured_t *n = realloc(ensured, ncap * sizeof *n);
      if (n) {
        ensured = n;
        capensured = ncap;
      }
    }
    if (key && nensured < capensured) {
      memcpy(key, uri, ulen);
      key[ulen] = '\n';
      memcpy(key + ulen + 1, name, nlen + 1);
      ensured[nensured++] = (ensured_t){key, gen};
      memo = key;
      memo_gen = gen;
    } else {
      free(key); /* not remembered: set up again next time, harmlessly */
    }
  }
  pthread_mutex_unlock(&ensure_lock);
  return rc;
}

static int setup_pattern(dtx_store_t *st, const void *p) {
  return create_all(st, p);
}

int dtx__kit_ensure(dtx_store_t *st, const dtx__pattern_t *p) {
  return dtx__kit_once(st, p->name, setup_pattern, p);
}

int dtx__kit_unused(const dtx__pattern_t *p, const json_t *names) {
  if (!names || !p->collections || !p->collections[0])
    return 0;
  for (size_t i = 0; p->collections[i]; i++) {
    size_t k;
    json_t *n;
    json_array_foreach(names, k, n) {
      const char *s = json_string_value(n);
      if (s && strcmp(s, p->collections[i]) == 0)
        return 0;
    }
  }
  return 1;
}
