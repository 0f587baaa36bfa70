/* rule.c -- the sync flag's rules (docs/sync.md "Rules"): a rule checked
 * alone (dtx__sync_rule_parse), against the other rules on record
 * (dtx__sync_clash: no two rules may write one dependent field, and no
 * copied field may be another rule's source), recorded once and never
 * replaced (dtx_sync_rule_define), and the guard a rule puts on the
 * user's master collection (dtx__sync_guard: a transition rule that keeps
 * the master's version increasing, docs/validation.md "Transition
 * rules").  The protocol that uses a rule is in sync.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "txn/sync/sync.h"
#include "util/assert.h"
#include "util/err.h"

int dtx__sync_check_name(const char *name) {
  return dtx__check_word("sync rule name", name, 64, "_-");
}

int dtx__sync_reserved(const char *path) {
  static const char *const f[] = {DTX__SYNC_MASTER, DTX__SYNC_FLAG,
                                  DTX__SYNC_DEP, NULL};
  size_t n = strcspn(path, ".");
  for (int i = 0; f[i]; i++)
    if (strlen(f[i]) == n && strncmp(path, f[i], n) == 0)
      return 1;
  return 0;
}

static int check_path(const char *rule, const char *what, const char *path) {
  if (path && !dtx__utf8_ok(path, strlen(path))) /* named, not quoted */
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path is not valid "
                    "UTF-8", rule, what);
  if (!path || !*path || strlen(path) > 200)
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path '%s': must be "
                    "1..200 bytes", rule, what, path ? path : "");
  if (dtx__path_check(path, DTX_EINVAL))
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path '%s': empty "
                    "segment or a segment starting with $", rule, what, path);
  if (dtx__sync_reserved(path))
    return dtx__err(DTX_EINVAL, "sync rule %s: %s field path '%s' is one of "
                    "doctx's (%s, %s, %s)", rule, what, path, DTX__SYNC_MASTER,
                    DTX__SYNC_FLAG, DTX__SYNC_DEP);
  return 0;
}

/* 1 when path lies in a field another of doctx's patterns keeps in
 * users' documents: a fence record (src/store/fence.c), job effect
 * markers (src/txn/jobq/effect.c), batch markers (src/txn/batchupdate/batchupdate.c).
 * A copy into one forged or erased them -- a batch then skipped a
 * document, a job effect applied twice -- or, for _fence, which no update
 * may name, failed every change and left its flag for ever. */
static int others_field(const char *path) {
  static const char *const f[] = {"_fence", "dtx_fx", DTX_BATCH_FIELD, NULL};
  size_t n = strcspn(path, ".");
  for (int i = 0; f[i]; i++)
    if (strlen(f[i]) == n && strncmp(path, f[i], n) == 0)
      return 1;
  return 0;
}

int dtx__sync_overlaps(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
  return strncmp(a, b, n) == 0 && (la == lb || (la < lb ? b : a)[n] == '.');
}

/* A protocol's own collections are guarded by its rules and read by its
 * recovery: copying into them, or versioning them, is not for users. */
static int check_coll(const char *rule, const char *what, const char *coll) {
  char w[200];
  snprintf(w, sizeof w, "sync rule %s: %s", rule, what);
  return dtx__check_user_coll(w, coll);
}

static int fmt_path(char *buf, size_t n, const char *a, const char *name,
                    const char *b) {
  int k = snprintf(buf, n, "%s.%s%s", a, name, b);
  return k > 0 && (size_t)k < n ? 0 : DTX_EINVAL;
}

int dtx__sync_rule_parse(const json_t *doc, dtx__sync_rule_t *r) {
  memset(r, 0, sizeof *r);
  r->doc = json_incref((json_t *)doc);
  r->name = dtx__str(doc, "_id");
  r->master = dtx__str(doc, "master");
  r->dependents = dtx__str(doc, "dependents");
  r->link = dtx__str(doc, "link");
  int rc = dtx__sync_check_name(r->name);
  const char *n = r->name;
  if (rc == 0)
    rc = check_coll(n, "master", r->master);
  if (rc == 0)
    rc = check_coll(n, "dependents", r->dependents);
  if (rc == 0)
    rc = check_path(n, "link", r->link);
  if (rc == 0 && (strcmp(r->link, "_id") == 0 ||
                  strncmp(r->link, "_id.", 4) == 0))
    rc = dtx__err(DTX_EINVAL, "sync rule %s: the link field cannot be _id",
                  n);
  const json_t *copy = json_object_get(doc, "copy");
  if (rc == 0 && (!json_is_array(copy) || json_array_size(copy) == 0 ||
                  json_array_size(copy) > DTX__SYNC_MAX_COPY))
    rc = dtx__err(DTX_EINVAL, "sync rule %s: expected 1..%d SRC:DST pairs",
                  n, DTX__SYNC_MAX_COPY);
  for (size_t i = 0; rc == 0 && i < json_array_size(copy); i++) {
    const json_t *p = json_array_get(copy, i);
    const char *src = dtx__str(p, "src"), *dst = dtx__str(p, "dst");
    rc = check_path(n, "copied SRC", src);
    if (rc == 0)
      rc = check_path(n, "copied DST", dst);
    if (rc == 0 && (strcmp(dst, "_id") == 0 || strncmp(dst, "_id.", 4) == 0))
      rc = dtx__err(DTX_EINVAL, "sync rule %s: DST cannot be _id", n);
    if (rc == 0 && others_field(dst))
      rc = dtx__err(DTX_EINVAL, "sync rule %s: DST '%s' is a field doctx "
                    "keeps in your documents (_fence, dtx_fx, %s)", n, dst,
                    DTX_BATCH_FIELD);
    if (rc == 0 && dtx__sync_overlaps(dst, r->link))
      rc = dtx__err(DTX_EINVAL, "sync rule %s: DST '%s' overlaps the link "
                    "field '%s'", n, dst, r->link);
    for (size_t j = 0; rc == 0 && j < r->ncopy; j++)
      if (dtx__sync_overlaps(dst, r->dst[j]))
        rc = dtx__err(DTX_EINVAL, "sync rule %s: DST '%s' %s '%s' (each "
                      "dependent field is written from one SRC)", n, dst,
                      strcmp(dst, r->dst[j]) == 0 ? "given twice, as"
                                                  : "overlaps",
                      r->dst[j]);
    if (rc == 0) {
      DTX_ASSERT(r->ncopy < DTX__SYNC_MAX_COPY, "S3"); /* counted above */
      r->src[r->ncopy] = src;
      r->dst[r->ncopy++] = dst;
    }
  }
  /* A rule whose dependents are its own masters (users -> users through
   * a manager link) may not copy into a field it copies from: the copy
   * would change a master without raising its version or flag. */
  for (size_t i = 0; rc == 0 && strcmp(r->master, r->dependents) == 0 &&
                     i < r->ncopy; i++)
    for (size_t j = 0; rc == 0 && j < r->ncopy; j++)
      if (dtx__sync_overlaps(r->dst[i], r->src[j]))
        rc = dtx__err(DTX_EINVAL, "sync rule %s: DST '%s' overlaps SRC '%s' "
                      "of the same collection (a copy would change a master "
                      "behind its version)", n, r->dst[i], r->src[j]);
  if (rc == 0 && (fmt_path(r->vpath, sizeof r->vpath, DTX__SYNC_MASTER, n,
                           ".v") ||
                  fmt_path(r->spath, sizeof r->spath, DTX__SYNC_MASTER, n,
                           ".stamp") ||
                  fmt_path(r->fpath, sizeof r->fpath, DTX__SYNC_FLAG, n, "") ||
                  fmt_path(r->fstamp, sizeof r->fstamp, DTX__SYNC_FLAG, n,
                           ".stamp") ||
                  fmt_path(r->dpath, sizeof r->dpath, DTX__SYNC_DEP, n, "")))
    rc = dtx__err(DTX_EINVAL, "sync rule %s: name too long", n);
  return rc;
}

void dtx__sync_rule_free(dtx__sync_rule_t *r) {
  json_decref(r->doc);
  memset(r, 0, sizeof *r);
}

int dtx__sync_rule_load(dtx__exec_t *ex, const char *name,
                        dtx__sync_rule_t *r) {
  json_t *doc = NULL;
  memset(r, 0, sizeof *r);
  int rc = dtx__sync_check_name(name);
  if (rc == 0)
    rc = dtx__kit_get(ex, DTX__SYNC_RULES, name, &doc);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no sync rule '%s'", name);
  if (rc == 0) {
    rc = dtx__sync_rule_parse(doc, r);
    if (rc) /* changed by hand around the validator: say which */
      rc = dtx__err_wrap(rc, "stored sync rule '%s' is not valid", name);
  }
  json_decref(doc);
  return rc;
}

/* ---- rules against each other ------------------------------------------------ */

/* 1 when some path of a (na of them) overlaps some path of b; *ia, *ib
 * name the pair. */
static int any_overlap(const char *const *a, size_t na, const char *const *b,
                       size_t nb, size_t *ia, size_t *ib) {
  for (*ia = 0; *ia < na; ++*ia)
    for (*ib = 0; *ib < nb; ++*ib)
      if (dtx__sync_overlaps(a[*ia], b[*ib]))
        return 1;
  return 0;
}

/* One direction of dtx__sync_clash: what a's copies do to b. */
static int clash_one(const dtx__sync_rule_t *a, const dtx__sync_rule_t *b,
                     char *why, size_t n) {
  size_t i, j;
  if (strcmp(a->dependents, b->dependents) == 0) {
    if (any_overlap(a->dst, a->ncopy, b->dst, b->ncopy, &i, &j)) {
      snprintf(why, n, "rules %s and %s both write %s: '%s' and '%s' (one "
               "dependent field has one source)", a->name, b->name,
               a->dependents, a->dst[i], b->dst[j]);
      return 1;
    }
    if (any_overlap(a->dst, a->ncopy, &b->link, 1, &i, &j)) {
      snprintf(why, n, "rule %s writes '%s' of %s, the link field of rule "
               "%s (a copy would move dependents to another master)",
               a->name, a->dst[i], a->dependents, b->name);
      return 1;
    }
  }
  if (strcmp(a->dependents, b->master) == 0 &&
      any_overlap(a->dst, a->ncopy, b->src, b->ncopy, &i, &j)) {
    snprintf(why, n, "rule %s writes '%s' of %s, which rule %s copies from "
             "('%s'): a copy is no change of %s's master, so its dependents "
             "would not follow (rules do not chain)", a->name, a->dst[i],
             a->dependents, b->name, b->src[j], b->name);
    return 1;
  }
  return 0;
}

int dtx__sync_clash(const dtx__sync_rule_t *a, const dtx__sync_rule_t *b,
                    char *why, size_t n) {
  if (strcmp(a->name, b->name) == 0)
    return 0;
  return clash_one(a, b, why, n) || clash_one(b, a, why, n);
}

int dtx__sync_rules_all(dtx__exec_t *ex, const json_t *filter,
                        dtx__sync_rule_t **out, size_t *n) {
  json_t *docs = NULL, *doc;
  size_t i;
  *out = NULL;
  *n = 0;
  int rc = dtx__kit_find(ex, DTX__SYNC_RULES, filter, NULL, &docs);
  if (rc == DTX_ENOTFOUND) /* no collection yet: no rules */
    rc = 0;
  if (rc == 0 && json_array_size(docs) &&
      !(*out = calloc(json_array_size(docs), sizeof **out)))
    rc = DTX_ENOMEM;
  json_array_foreach(docs, i, doc) {
    if (rc)
      break;
    if (dtx__sync_rule_parse(doc, &(*out)[*n]) == 0)
      ++*n;
    else /* written by hand: the audit's bad_rule */
      dtx__sync_rule_free(&(*out)[*n]);
    dtx__err_clear();
  }
  json_decref(docs);
  return rc;
}

void dtx__sync_rules_free(dtx__sync_rule_t *r, size_t n) {
  for (size_t i = 0; i < n; i++)
    dtx__sync_rule_free(&r[i]);
  free(r);
}

/* A new rule r must not clash with any rule on record (checked before
 * anything is written; two defines racing are the audit's, which checks
 * every pair). */
static int check_clashes(dtx__exec_t *ex, const dtx__sync_rule_t *r) {
  dtx__sync_rule_t *all = NULL;
  size_t n = 0;
  char why[600];
  int rc = dtx__sync_rules_all(ex, NULL, &all, &n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (dtx__sync_clash(r, &all[i], why, sizeof why))
      rc = dtx__err(DTX_ECONFLICT, "sync rule %s: %s", r->name, why);
  dtx__sync_rules_free(all, n);
  return rc;
}

/* ---- guards on the user's collections ------------------------------------------ */

/* The transition rule r puts on its masters (new reference): the
 * version only grows and never goes away or stops being a number -- a
 * lowered one would let later changes skip dependents that reflect a
 * higher one.  The dependents' _sync.NAME gets none: lowering or removing
 * it is harmless (the next change writes it), raising it is compared with
 * the master by the audit, and removing it is how a dependent moved to
 * another master is made to take that master's next change
 * (docs/sync.md "What a plain write can do"). */
static json_t *guard_of(const dtx__sync_rule_t *r) {
  return json_pack("{s:s,s:[s]}", "pattern", "sync", "increasing", r->vpath);
}

/* Is g one of the rule objects of transition t (one object or an array
 * of them)? */
static int has_guard(const json_t *t, const json_t *g) {
  size_t i;
  json_t *e;
  if (json_is_object(t))
    return json_equal(t, g);
  json_array_foreach(t, i, e) {
    if (json_equal(e, g))
      return 1;
  }
  return 0;
}

/* Adds g to coll's transition rule unless it is there, keeping the
 * validator, the delete guard and every other transition of coll (the
 * user's own, other rules'); with check_only, *missing says whether it
 * would have. */
static int guard_coll(dtx_store_t *st, const char *coll, const json_t *g,
                      int check_only, int *missing) {
  json_t *cur = NULL, *t2 = NULL;
  int rc = dtx_store_get_rules(st, coll, &cur);
  if (rc)
    return rc;
  const json_t *t = json_object_get(cur, "transition");
  *missing = !has_guard(t, g);
  if (*missing && !check_only) {
    if (json_is_array(t)) {
      t2 = json_copy((json_t *)t);
      if (t2)
        json_array_append(t2, (json_t *)g);
    } else if (json_is_object(t)) {
      t2 = json_pack("[O,O]", t, g);
    } else {
      t2 = json_incref((json_t *)g);
    }
    dtx_collection_rules_t cr = {
        .validator = json_object_get(cur, "validator"),
        .delete_guard = json_object_get(cur, "delete_guard"),
        .transition = t2};
    dtx_rules_opts_t o = {.bypass_validation = 1};
    rc = t2 ? dtx_store_set_rules_ex(st, coll, &cr, &o) : DTX_ENOMEM;
  }
  json_decref(t2);
  json_decref(cur);
  return rc;
}

int dtx__sync_guard(dtx_store_t *st, const dtx__sync_rule_t *r,
                    int check_only, char *why, size_t n, int *missing) {
  json_t *g = guard_of(r);
  int rc = g ? guard_coll(st, r->master, g, check_only, missing)
             : DTX_ENOMEM;
  if (rc == 0 && *missing && why)
    snprintf(why, n, "%s lacks the transition rule {\"pattern\":"
             "\"sync\",\"increasing\":[\"%s\"]}", r->master, r->vpath);
  json_decref(g);
  return rc ? dtx__err_wrap(rc, "sync rule %s: the transition rule of its "
                            "masters", r->name)
            : 0;
}

/* ---- define ------------------------------------------------------------------ */

/* "a:b,c:d" -> [{src:a, dst:b}, {src:c, dst:d}] (checked by
 * dtx__sync_rule_parse afterwards). */
static int parse_copy(const char *name, const char *spec, json_t **out) {
  *out = NULL;
  if (!spec || !*spec)
    return dtx__err(DTX_EINVAL, "sync rule %s: --copy SRC:DST[,SRC:DST...] "
                    "is required", name);
  if (!dtx__utf8_ok(spec, strlen(spec))) /* named, not quoted */
    return dtx__err(DTX_EINVAL, "sync rule %s: --copy is not valid UTF-8",
                    name);
  json_t *arr = json_array();
  const char *p = spec;
  while (arr) {
    size_t len = strcspn(p, ",");
    const char *colon = memchr(p, ':', len);
    if (!colon || memchr(colon + 1, ':', len - (size_t)(colon - p) - 1) ||
        colon == p || colon + 1 == p + len) {
      json_decref(arr);
      return dtx__err(DTX_EINVAL, "sync rule %s: copy pair '%.*s': expected "
                      "SRC:DST", name, (int)len, p);
    }
    json_t *pair = json_pack("{s:s%,s:s%}", "src", p, (size_t)(colon - p),
                             "dst", colon + 1,
                             (size_t)(p + len - colon - 1));
    if (!pair || json_array_append_new(arr, pair)) {
      json_decref(arr);
      return DTX_ENOMEM;
    }
    if (!p[len])
      break;
    p += len + 1;
  }
  *out = arr;
  return arr ? 0 : DTX_ENOMEM;
}

static int same_rule(const json_t *a, const json_t *b) {
  static const char *const k[] = {"master", "dependents", "link", "copy",
                                  NULL};
  for (int i = 0; k[i]; i++)
    if (!json_equal(json_object_get(a, k[i]), json_object_get(b, k[i])))
      return 0;
  return 1;
}

/* The link index of the dependents, the flag's sparse index of the
 * masters, and the masters' guard: all idempotent, so every define may
 * make them. */
static int rule_setup(dtx_store_t *st, const dtx__sync_rule_t *r) {
  char at[200];
  int missing;
  snprintf(at, sizeof at, "%s.at", r->fpath);
  json_t *k1 = json_pack("{s:i}", r->link, 1), *k2 = json_pack("{s:i}", at, 1);
  dtx_index_opts_t sparse = {.sparse = 1};
  int rc = k1 && k2 ? dtx_store_create_index(st, r->dependents, k1, NULL, NULL)
                    : DTX_ENOMEM;
  if (rc == 0)
    rc = dtx_store_create_index(st, r->master, k2, &sparse, NULL);
  json_decref(k1);
  json_decref(k2);
  if (rc)
    return dtx__err_wrap(rc, "sync rule %s: creating its indexes", r->name);
  return dtx__sync_guard(st, r, 0, NULL, 0, &missing);
}

int dtx_sync_rule_define(dtx_store_t *st, const dtx_sync_rule_t *rule,
                         json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  dtx__sync_rule_t r = {0};
  json_t *copy = NULL, *doc = NULL, *cur = NULL;
  if (out)
    *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = rule ? dtx__sync_check_name(rule->name)
                : dtx__err(DTX_EINVAL, "sync rule: NULL");
  if (rc == 0)
    rc = parse_copy(rule->name, rule->copy, &copy);
  /* The rule's texts go into its document: a byte that is no UTF-8 is
   * INVAL here, not an out-of-memory from building it. */
  const char *const texts[] = {"master", "dependents", "link"};
  for (int i = 0; rc == 0 && i < 3; i++) {
    const char *t = i == 0 ? rule->master : i == 1 ? rule->dependents
                                                   : rule->link;
    if (t && !dtx__utf8_ok(t, strlen(t)))
      rc = dtx__err(DTX_EINVAL, "sync rule %s: %s is not valid UTF-8",
                    rule->name, texts[i]);
  }
  if (rc == 0 && !(doc = json_pack("{s:s,s:s?,s:s?,s:s?,s:O,s:I}", "_id",
                                   rule->name, "master", rule->master,
                                   "dependents", rule->dependents, "link",
                                   rule->link, "copy", copy, "created",
                                   (json_int_t)dtx__now_ms())))
    rc = DTX_ENOMEM;
  if (rc == 0)
    rc = dtx__sync_rule_parse(doc, &r);
  /* Read before anything is written: the rule on record, or (for a new
   * one) the rules it must not clash with. */
  if (rc == 0) {
    rc = dtx__kit_get(&ex, DTX__SYNC_RULES, rule->name, &cur);
    if (rc == DTX_ENOTFOUND) {
      dtx__err_clear();
      rc = check_clashes(&ex, &r);
    }
  }
  if (rc == 0 && cur && !same_rule(cur, doc))
    rc = dtx__err(DTX_ECONFLICT, "sync rule '%s' exists with another "
                  "definition (rules are never replaced; choose a new name)",
                  rule->name);
  if (rc == 0)
    rc = dtx__kit_ensure(st, &dtx__sync_pattern);
  /* Indexes and guard first: a rule on record is one any process may
   * repair through them (and a define that crashed in between makes
   * them now). */
  if (rc == 0)
    rc = rule_setup(st, &r);
  if (rc == 0 && !cur) {
    rc = dtx__kit_insert(&ex, "sync.rule", DTX__SYNC_RULES, doc);
    if (rc == 0)
      cur = json_incref(doc);
    else if (rc == DTX_EDUPKEY) /* a racing define, or a lost reply */
      rc = dtx__kit_get(&ex, DTX__SYNC_RULES, rule->name, &cur);
    if (rc == 0 && !same_rule(cur, doc))
      rc = dtx__err(DTX_ECONFLICT, "sync rule '%s' exists with another "
                    "definition (rules are never replaced; choose a new "
                    "name)", rule->name);
  }
  if (rc == 0 && out)
    *out = json_incref(cur);
  dtx__sync_rule_free(&r);
  json_decref(copy);
  json_decref(doc);
  json_decref(cur);
  return dtx__call_end(&c, rc);
}

int dtx_sync_rule_get(dtx_store_t *st, const char *name, json_t **out) {
  dtx__exec_t ex;
  dtx__call_t c;
  *out = NULL;
  dtx__exec_init(&ex, st, NULL, 0, 0);
  dtx__call_begin(&c, ex.deadline_ms);
  int rc = dtx__sync_check_name(name);
  if (rc == 0)
    rc = dtx__kit_get(&ex, DTX__SYNC_RULES, name, out);
  if (rc == DTX_ENOTFOUND)
    rc = dtx__err(DTX_ENOTFOUND, "no sync rule '%s'", name);
  return dtx__call_end(&c, rc);
}
