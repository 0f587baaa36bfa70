/* rules.c -- what every stored document must obey, checked in one place:
 * the nesting depth limit, a collection's validator, and its delete guard.
 *
 * Each backend calls dtx__doc_check_write() on the document it is about to
 * store (or delete), inside the atomic step that stores it, with the rules
 * of the catalog version that step is bound to.  So a write is judged by
 * the rules in force when it commits, whatever backend or process made it,
 * and the rules themselves are defined only here.
 *
 * A rule (validator or delete guard) is MongoDB's validator language: query
 * operators, compiled by the filter compiler (filter.c) unchanged, and/or
 * {"$jsonSchema": {...}} at the top level (schema.c).  Each top-level
 * condition is compiled on its own, which is the same as the whole filter
 * (top-level conditions are ANDed) and lets a refusal name the condition
 * that failed.
 *
 * A transition rule (a doctx extension; docs/validation.md, "Transition
 * rules") judges an update by the document before AND after it: fields
 * that may never change, counters that may only grow, and the moves a
 * state machine allows.  A validator sees one document; a protocol's
 * promise is often about the change (a settlement that must not move to
 * another payer, a fencing token that must not go back), so it is stated
 * here, in the same atomic step, for every writer.  A rule object may also
 * say what an inserted document may be ("insert"), and may judge only
 * PLAIN writes ("scope": "plain"): those made outside a doctx pattern's
 * own steps -- the generic document commands.  Some changes are legitimate
 * only as a step of a protocol that has checked other documents first (a
 * payee's credit marker taken off once its transfer committed); one
 * document cannot tell such a step from the same change typed by hand, so
 * the kit says which it is (dtx__rules_step_enter, around the store call
 * of each step, on the thread that makes it, naming the step), and a
 * plain rule may leave only the steps of some patterns alone ("steps":
 * a step that writes an update its caller chose, as a job's effect, is
 * a plain write to every other pattern's fields).
 *
 * The depth limit (DTX_MAX_DEPTH, MongoDB's 100 levels) applies to every
 * write, also with bypass_validation: it is what keeps every stored
 * document readable -- jansson, and so both backends' decoders, refuse
 * JSON nested deeper than 2048 levels -- and bounds every recursion over a
 * stored document. */
#include "doc/doc.h"
#include "util/assert.h"
#include "util/err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the depth limit ------------------------------------------------------- */

typedef struct seg {
  const char *key; /* NULL: an array index */
  size_t idx;
} seg_t;

/* 1 when the container v, at nesting level `level`, holds something
 * deeper than the limit; path[0..level-1) then leads to the first
 * container past it.  Never descends past the limit, so the recursion is
 * bounded whatever the input. */
static int too_deep(const json_t *v, size_t level, seg_t *path,
                    size_t *plen) {
  if (level > DTX_MAX_DEPTH) {
    *plen = level - 1;
    return 1;
  }
  if (json_is_object(v)) {
    const char *k;
    json_t *e;
    json_object_foreach((json_t *)v, k, e) {
      if (!json_is_object(e) && !json_is_array(e))
        continue;
      path[level - 1] = (seg_t){k, 0};
      if (too_deep(e, level + 1, path, plen))
        return 1;
    }
  } else {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (!json_is_object(e) && !json_is_array(e))
        continue;
      path[level - 1] = (seg_t){NULL, i};
      if (too_deep(e, level + 1, path, plen))
        return 1;
    }
  }
  return 0;
}

/* The dotted path, shortened in the middle when long. */
static void path_text(const seg_t *path, size_t n, char *out, size_t outlen) {
  char full[4096];
  size_t len = 0;
  for (size_t i = 0; i < n && len < sizeof full; i++) {
    int k = path[i].key
                ? snprintf(full + len, sizeof full - len, "%s%s", i ? "." : "",
                           path[i].key)
                : snprintf(full + len, sizeof full - len, "%s%zu",
                           i ? "." : "", path[i].idx);
    len += (size_t)k;
  }
  if (len >= sizeof full)
    len = sizeof full - 1;
  full[len] = '\0';
  if (len < outlen || outlen < 64)
    snprintf(out, outlen, "%s", full);
  else
    snprintf(out, outlen, "%.*s...%s", (int)(outlen / 2 - 4), full,
             full + len - (outlen / 2 - 4));
}

int dtx__depth_check(const json_t *v, int code, const char *what) {
  if (!json_is_object(v) && !json_is_array(v))
    return 0;
  seg_t path[DTX_MAX_DEPTH + 1];
  size_t n = 0;
  if (!too_deep(v, 1, path, &n))
    return 0;
  char p[128];
  path_text(path, n, p, sizeof p);
  return dtx__err(code,
                  "%s nests deeper than %d levels (the limit): level %d is "
                  "reached at %s",
                  what, DTX_MAX_DEPTH, DTX_MAX_DEPTH + 1, p);
}

/* ---- rules --------------------------------------------------------------------- */

/* One rule: an optional schema and the other top-level conditions. */
typedef struct part {
  dtx__schema_t *schema;
  size_t nconds;
  dtx__filter_t **conds;
  char **texts; /* each condition as compact JSON, for messages */
} part_t;

/* One move of a transition rule: the document before must match from and
 * the one after must match to. */
typedef struct move {
  dtx__filter_t *from, *to;
  char *name; /* its "name", or "#N" */
} move_t;

/* One transition rule (an object of the "transition" spec). */
typedef struct trans {
  size_t nimm, ninc, nmoves;
  char **imm;   /* dotted paths that never change */
  char **inc;   /* dotted paths whose number never decreases */
  move_t *moves; /* none: any change of state is allowed */
  int plain;     /* "scope": "plain": judges plain writes only */
  size_t nsteps; /* "steps": the patterns whose steps it does not judge */
  char **steps;  /* (none: any pattern's) */
  int noinsert;  /* "insert": false: no document may be inserted */
  dtx__filter_t *insert; /* "insert": FILTER an inserted document matches */
  char *insert_text;     /* that filter as compact JSON, for messages */
  dtx__filter_t *del;    /* "delete": FILTER a deleted document matches */
  char *del_text;        /* that filter as compact JSON, for messages */
  char *why;     /* "why": the reason a refusal gives, or NULL */
} trans_t;

/* The step running on this thread (dtx__rules_step_enter): its name,
 * "" for a step of no known pattern, NULL outside any step. */
static _Thread_local const char *step_name;

const char *dtx__rules_step_enter(const char *name) {
  const char *saved = step_name;
  step_name = name ? name : "";
  return saved;
}

void dtx__rules_step_leave(const char *saved) { step_name = saved; }

const char *dtx__rules_step_now(void) { return step_name; }

/* 1 when the running step is one t does not judge: t is of scope "plain"
 * and there is a step, of one of t's "steps" patterns when it names any
 * (a step's name starts with its pattern: "batch.apply"). */
static int step_exempt(const trans_t *t) {
  if (!t->plain || !step_name)
    return 0;
  if (!t->nsteps)
    return 1;
  for (size_t i = 0; i < t->nsteps; i++) {
    size_t n = strlen(t->steps[i]);
    if (strncmp(step_name, t->steps[i], n) == 0 &&
        (step_name[n] == '.' || step_name[n] == '\0'))
      return 1;
  }
  return 0;
}

struct dtx__rules {
  json_t *spec; /* {"validator": V|null, "delete_guard": G|null,
                   "transition": T|null} */
  part_t validator, guard;
  size_t ntrans;
  trans_t *trans;
};

static void part_free(part_t *p) {
  dtx__schema_free(p->schema);
  for (size_t i = 0; i < p->nconds; i++) {
    dtx__filter_free(p->conds[i]);
    free(p->texts[i]);
  }
  free(p->conds);
  free(p->texts);
  memset(p, 0, sizeof *p);
}

static void trans_free(trans_t *t) {
  for (size_t i = 0; i < t->nimm; i++)
    free(t->imm[i]);
  for (size_t i = 0; i < t->ninc; i++)
    free(t->inc[i]);
  for (size_t i = 0; i < t->nmoves; i++) {
    dtx__filter_free(t->moves[i].from);
    dtx__filter_free(t->moves[i].to);
    free(t->moves[i].name);
  }
  free(t->imm);
  free(t->inc);
  free(t->moves);
  dtx__filter_free(t->insert);
  free(t->insert_text);
  dtx__filter_free(t->del);
  free(t->del_text);
  free(t->why);
  for (size_t i = 0; i < t->nsteps; i++)
    free(t->steps[i]);
  free(t->steps);
}

void dtx__rules_free(dtx__rules_t *r) {
  if (!r)
    return;
  part_free(&r->validator);
  part_free(&r->guard);
  for (size_t i = 0; i < r->ntrans; i++)
    trans_free(&r->trans[i]);
  free(r->trans);
  json_decref(r->spec);
  free(r);
}

static int part_compile(const json_t *spec, const char *name, part_t *p) {
  char what[32];
  snprintf(what, sizeof what, "%s", name);
  int rc = dtx__depth_check(spec, DTX_EBADQUERY, what);
  if (rc < 0)
    return rc;
  size_t n = json_object_size(spec);
  p->conds = calloc(n + 1, sizeof *p->conds);
  p->texts = calloc(n + 1, sizeof *p->texts);
  if (!p->conds || !p->texts)
    return dtx__err(DTX_ENOMEM, "compiling the %s", name);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)spec, k, v) {
    if (strcmp(k, "$jsonSchema") == 0) {
      if ((rc = dtx__schema_compile(v, &p->schema)) < 0)
        return dtx__err_wrap(rc, "%s", name);
      continue;
    }
    json_t *one = json_object();
    if (!one || json_object_set(one, k, v) < 0) {
      json_decref(one);
      return dtx__err(DTX_ENOMEM, "compiling the %s", name);
    }
    rc = dtx__filter_compile(one, &p->conds[p->nconds]);
    p->texts[p->nconds] = rc == 0 ? dtx__json_dump(one) : NULL;
    json_decref(one);
    if (rc < 0)
      return dtx__err_wrap(rc, "%s", name);
    if (!p->texts[p->nconds]) {
      dtx__filter_free(p->conds[p->nconds]);
      return dtx__err(DTX_ENOMEM, "compiling the %s", name);
    }
    p->nconds++;
  }
  return 0;
}


/* ---- transition rules ------------------------------------------------------------ */

/* A list of dotted paths: a non-empty array of distinct valid paths. */
static int paths_compile(const json_t *v, const char *what, char ***out,
                         size_t *n) {
  if (!json_is_array(v) || !json_array_size(v))
    return dtx__err(DTX_EBADQUERY, "%s must be a non-empty array of field "
                    "paths", what);
  size_t cnt = json_array_size(v);
  if (!(*out = calloc(cnt, sizeof **out)))
    return dtx__err(DTX_ENOMEM, "compiling %s", what);
  for (size_t i = 0; i < cnt; i++) {
    const json_t *e = json_array_get(v, i);
    if (!json_is_string(e))
      return dtx__err(DTX_EBADQUERY, "%s[%zu] must be a field path string",
                      what, i);
    const char *p = json_string_value(e);
    int rc = dtx__path_check(p, DTX_EBADQUERY);
    if (rc < 0)
      return dtx__err_wrap(rc, "%s[%zu]", what, i);
    for (size_t j = 0; j < i; j++)
      if (strcmp((*out)[j], p) == 0)
        return dtx__err(DTX_EBADQUERY, "%s names '%s' twice", what, p);
    if (!((*out)[i] = strdup(p)))
      return dtx__err(DTX_ENOMEM, "compiling %s", what);
    (*n)++;
  }
  return 0;
}

static int move_compile(const json_t *m, const char *what, size_t i,
                        move_t *mv) {
  char w[96];
  snprintf(w, sizeof w, "%s.moves[%zu]", what, i);
  if (!json_is_object(m))
    return dtx__err(DTX_EBADQUERY, "%s must be an object {\"from\": FILTER, "
                    "\"to\": FILTER, \"name\": TEXT}", w);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)m, k, v) {
    if (strcmp(k, "from") && strcmp(k, "to") && strcmp(k, "name"))
      return dtx__err(DTX_EBADQUERY, "%s: unknown key '%.40s' (from, to, "
                      "name)", w, k);
  }
  const json_t *name = json_object_get(m, "name");
  if (name && (!json_is_string(name) || !json_string_length(name) ||
               json_string_length(name) > 64))
    return dtx__err(DTX_EBADQUERY, "%s.name must be a string of 1..64 "
                    "bytes", w);
  char num[24];
  snprintf(num, sizeof num, "#%zu", i + 1);
  if (!(mv->name = strdup(name ? json_string_value(name) : num)))
    return dtx__err(DTX_ENOMEM, "compiling %s", w);
  static const char *const sides[] = {"from", "to"};
  for (int s = 0; s < 2; s++) {
    const json_t *f = json_object_get(m, sides[s]);
    if (!json_is_object(f))
      return dtx__err(DTX_EBADQUERY, "%s.%s must be a filter object", w,
                      sides[s]);
    int rc = dtx__filter_compile(f, s ? &mv->to : &mv->from);
    if (rc < 0)
      return dtx__err_wrap(rc, "%s.%s", w, sides[s]);
  }
  return 0;
}

/* "steps": a non-empty array of distinct pattern names, 1..32 of
 * [a-z0-9_] (the first segment of their steps' names). */
static int steps_compile(const json_t *v, const char *what, trans_t *t) {
  size_t n = json_array_size(v);
  if (!json_is_array(v) || !n)
    return dtx__err(DTX_EBADQUERY, "%s must be a non-empty array of pattern "
                    "names", what);
  if (!(t->steps = calloc(n, sizeof *t->steps)))
    return dtx__err(DTX_ENOMEM, "compiling %s", what);
  for (size_t i = 0; i < n; i++) {
    const char *p = json_string_value(json_array_get(v, i));
    if (!p || !*p || strlen(p) > 32 ||
        strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(p))
      return dtx__err(DTX_EBADQUERY, "%s[%zu] must be a pattern name (1..32 "
                      "of [a-z0-9_])", what, i);
    for (size_t j = 0; j < i; j++)
      if (strcmp(t->steps[j], p) == 0)
        return dtx__err(DTX_EBADQUERY, "%s names '%s' twice", what, p);
    if (!(t->steps[i] = strdup(p)))
      return dtx__err(DTX_ENOMEM, "compiling %s", what);
    t->nsteps++;
  }
  return 0;
}

/* A pattern's name, as a rule names its owner ("pattern"): 1..32 of
 * [a-z0-9_], as the patterns' names and their steps' first segments. */
static int pattern_name_check(const json_t *v, const char *what) {
  const char *s = json_is_string(v) ? json_string_value(v) : NULL;
  size_t n = s ? strlen(s) : 0;
  if (!s || n < 1 || n > 32 || strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
    return dtx__err(DTX_EBADQUERY, "%s must be a pattern name (1..32 of "
                    "[a-z0-9_])", what);
  return 0;
}

static int trans_compile(const json_t *spec, size_t idx, trans_t *t) {
  char what[48];
  snprintf(what, sizeof what, "transition[%zu]", idx);
  if (!json_is_object(spec) || !json_object_size(spec))
    return dtx__err(DTX_EBADQUERY, "%s must be a non-empty object of "
                    "immutable, increasing, moves, insert, scope and why",
                    what);
  int rc = dtx__depth_check(spec, DTX_EBADQUERY, what);
  const char *k;
  json_t *v;
  char w[80];
  json_object_foreach((json_t *)spec, k, v) {
    if (rc < 0)
      break;
    snprintf(w, sizeof w, "%s.%.20s", what, k);
    if (strcmp(k, "immutable") == 0) {
      rc = paths_compile(v, w, &t->imm, &t->nimm);
    } else if (strcmp(k, "increasing") == 0) {
      rc = paths_compile(v, w, &t->inc, &t->ninc);
    } else if (strcmp(k, "moves") == 0) {
      if (!json_is_array(v) || !json_array_size(v))
        return dtx__err(DTX_EBADQUERY, "%s must be a non-empty array of "
                        "moves", w);
      size_t n = json_array_size(v);
      if (!(t->moves = calloc(n, sizeof *t->moves)))
        return dtx__err(DTX_ENOMEM, "compiling %s", w);
      for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = move_compile(json_array_get(v, i), what, i, &t->moves[i]);
        t->nmoves++;
      }
    } else if (strcmp(k, "insert") == 0) {
      if (json_is_false(v)) {
        t->noinsert = 1;
      } else if (!json_is_object(v)) {
        rc = dtx__err(DTX_EBADQUERY, "%s must be false or a filter object",
                      w);
      } else if ((rc = dtx__filter_compile(v, &t->insert)) < 0) {
        rc = dtx__err_wrap(rc, "%s", w);
      } else if (!(t->insert_text = dtx__json_dump(v))) {
        rc = dtx__err(DTX_ENOMEM, "compiling %s", w);
      }
    } else if (strcmp(k, "delete") == 0) {
      /* A rule that a pattern owns can say when one of its documents may
       * go, where the collection's delete guard is the user's to set
       * (docs/validation.md, "Transition rules"). */
      if (!json_is_object(v))
        rc = dtx__err(DTX_EBADQUERY, "%s must be a filter object", w);
      else if ((rc = dtx__filter_compile(v, &t->del)) < 0)
        rc = dtx__err_wrap(rc, "%s", w);
      else if (!(t->del_text = dtx__json_dump(v)))
        rc = dtx__err(DTX_ENOMEM, "compiling %s", w);
    } else if (strcmp(k, "scope") == 0) {
      if (json_is_string(v) && strcmp(json_string_value(v), "plain") == 0)
        t->plain = 1;
      else if (!json_is_string(v) || strcmp(json_string_value(v), "all"))
        rc = dtx__err(DTX_EBADQUERY, "%s must be \"all\" or \"plain\"", w);
    } else if (strcmp(k, "steps") == 0) {
      rc = steps_compile(v, w, t);
    } else if (strcmp(k, "pattern") == 0) {
      rc = pattern_name_check(v, w);
    } else if (strcmp(k, "why") == 0) {
      if (!json_is_string(v) || !json_string_length(v) ||
          json_string_length(v) > 200)
        rc = dtx__err(DTX_EBADQUERY, "%s must be a string of 1..200 bytes", w);
      else if (!(t->why = strdup(json_string_value(v))))
        rc = dtx__err(DTX_ENOMEM, "compiling %s", w);
    } else {
      rc = dtx__err(DTX_EBADQUERY, "%s: unknown key '%.40s' (immutable, "
                    "increasing, moves, insert, delete, scope, steps, why, "
                    "pattern)", what, k);
    }
  }
  if (rc == 0 && t->nsteps && !t->plain)
    rc = dtx__err(DTX_EBADQUERY, "%s.steps goes with \"scope\": \"plain\" "
                  "(a rule of every writer judges every step)", what);
  if (rc == 0 && !t->nimm && !t->ninc && !t->nmoves && !t->noinsert &&
      !t->insert && !t->del)
    rc = dtx__err(DTX_EBADQUERY, "%s judges nothing: give it immutable, "
                  "increasing, moves, insert or delete", what);
  return rc;
}

/* The transition spec: one rule object or a non-empty array of them. */
static int transitions_compile(const json_t *spec, dtx__rules_t *r) {
  size_t n = json_is_array(spec) ? json_array_size(spec) : 1;
  if (json_is_array(spec) && !n)
    return dtx__err(DTX_EBADQUERY, "transition must be an object or a "
                    "non-empty array of objects");
  if (!(r->trans = calloc(n, sizeof *r->trans)))
    return dtx__err(DTX_ENOMEM, "compiling the transition rule");
  for (size_t i = 0; i < n; i++) {
    r->ntrans++;
    int rc = trans_compile(json_is_array(spec) ? json_array_get(spec, i)
                                               : spec,
                           i, &r->trans[i]);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* A rule as given: NULL, null and {} mean none; anything else must be an
 * object (the transition rule may also be an array of objects).  *norm is
 * the value to store (a new reference, or NULL). */
static int part_arg(const json_t *v, const char *name, json_t **norm) {
  *norm = NULL;
  if (!v || json_is_null(v) || (json_is_object(v) && !json_object_size(v)))
    return 0;
  if (!json_is_object(v) &&
      !(json_is_array(v) && strcmp(name, "transition") == 0))
    return dtx__err(DTX_EBADQUERY, "%s must be an object", name);
  *norm = json_incref((json_t *)v);
  return 0;
}

int dtx__rules_compile(const json_t *spec, dtx__rules_t **out) {
  *out = NULL;
  if (spec && !json_is_object(spec))
    return dtx__err(DTX_EBADQUERY, "collection rules must be an object");
  json_t *v = NULL, *g = NULL, *t = NULL;
  const json_t *owner = json_object_get(spec, "pattern");
  int rc = owner && !json_is_null(owner)
               ? pattern_name_check(owner, "the rules' pattern")
               : 0;
  if (owner && json_is_null(owner))
    owner = NULL;
  if (rc == 0)
    rc = part_arg(json_object_get(spec, "validator"), "validator", &v);
  if (rc == 0)
    rc = part_arg(json_object_get(spec, "delete_guard"), "delete_guard", &g);
  if (rc == 0)
    rc = part_arg(json_object_get(spec, "transition"), "transition", &t);
  dtx__rules_t *r = NULL;
  if (rc < 0 || (!v && !g && !t))
    goto out;
  if (!(r = calloc(1, sizeof *r)) ||
      !(r->spec = json_pack("{s:O?,s:O?,s:O?}", "validator", v,
                            "delete_guard", g, "transition", t)) ||
      (owner && json_object_set(r->spec, "pattern", (json_t *)owner) < 0)) {
    rc = dtx__err(DTX_ENOMEM, "compiling collection rules");
    goto out;
  }
  if ((v && (rc = part_compile(v, "validator", &r->validator)) < 0) ||
      (g && (rc = part_compile(g, "delete_guard", &r->guard)) < 0) ||
      (t && (rc = transitions_compile(t, r)) < 0))
    goto out;
  *out = r;
  r = NULL;
out:
  dtx__rules_free(r);
  json_decref(v);
  json_decref(g);
  json_decref(t);
  return rc;
}

const json_t *dtx__rules_spec(const dtx__rules_t *r) {
  return r ? r->spec : NULL;
}

/* Whether the transition spec t (an object or an array of them) holds an
 * object equal to want. */
static int holds(const json_t *t, const json_t *want) {
  if (json_is_object(t))
    return json_equal(t, want);
  size_t i;
  json_t *e;
  json_array_foreach(t, i, e) {
    if (json_equal(e, want))
      return 1;
  }
  return 0;
}

int dtx__rules_keep_owned(const char *coll, const json_t *cur,
                          const json_t *next) {
  const json_t *owner = json_object_get(cur, "pattern");
  if (json_is_string(owner) && !json_equal(cur, next))
    return dtx__err(DTX_EVALIDATION,
                    "the rules of %s are the %s pattern's: they change "
                    "only with it, or past the rules (bypass validation)",
                    coll, json_string_value(owner));
  const json_t *t = json_object_get(cur, "transition"), *e;
  const json_t *nt = json_object_get(next, "transition");
  size_t n = json_is_array(t) ? json_array_size(t) : 1;
  for (size_t i = 0; i < n; i++) {
    e = json_is_array(t) ? json_array_get(t, i) : t;
    const json_t *p = json_object_get(e, "pattern");
    if (!json_is_string(p) || holds(nt, e))
      continue;
    return dtx__err(DTX_EVALIDATION,
                    "the rules of %s hold a transition rule of the %s "
                    "pattern (doctx rules %s shows it): a change must keep "
                    "it, or go past the rules (bypass validation)", coll,
                    json_string_value(p), coll);
  }
  return 0;
}

/* ---- the write check ----------------------------------------------------------- */

/* "accounts 'A'" or "users 7": the collection and the document's _id. */
static void doc_name(const char *coll, const json_t *doc, char *out,
                     size_t n) {
  const json_t *id = json_object_get(doc, "_id");
  if (json_is_string(id)) {
    snprintf(out, n, "%s '%.100s'", coll, json_string_value(id));
  } else if (json_is_integer(id)) {
    snprintf(out, n, "%s %lld", coll, (long long)json_integer_value(id));
  } else {
    char *t = id ? dtx__json_dump(id) : NULL;
    snprintf(out, n, "%s %.100s", coll, t ? t : "(no _id)");
    free(t);
  }
}

/* 1 when doc satisfies p, else 0 with the reason in why. */
static int part_match(const part_t *p, const json_t *doc, const char *name,
                      char *why, size_t n) {
  /* The schema first: its reasons are the more precise. */
  if (p->schema && !dtx__schema_match(p->schema, doc, why, n))
    return 0;
  for (size_t i = 0; i < p->nconds; i++)
    if (!dtx__filter_match(p->conds[i], doc)) {
      snprintf(why, n, "the %s condition %.200s is not met", name,
               p->texts[i]);
      return 0;
    }
  return 1;
}

/* The value a transition path names: object fields by name, array
 * elements by a numeric segment; NULL when it reaches nothing.  Protocol
 * fields are plain paths, so there is no fan-out over arrays here: a
 * path that would fan out names nothing, and a missing value stays
 * missing on both sides or it changed. */
static const json_t *path_value(const json_t *doc, const char *path) {
  const json_t *cur = doc;
  const char *seg = path;
  while (cur) {
    const char *dot = strchr(seg, '.');
    size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
    char key[256];
    if (n >= sizeof key)
      return NULL;
    memcpy(key, seg, n);
    key[n] = '\0';
    if (json_is_object(cur)) {
      cur = json_object_get(cur, key);
    } else if (json_is_array(cur) && n && strspn(key, "0123456789") == n &&
               n < 10) {
      cur = json_array_get(cur, (size_t)strtoul(key, NULL, 10));
    } else {
      return NULL;
    }
    if (!dot)
      return cur;
    seg = dot + 1;
  }
  return NULL;
}

/* The first rule of t that the change before -> after breaks, in why;
 * 0 when it keeps them all.  Immutable values compare exactly (type
 * included: 5 and 5.0 differ).  An increasing value that was a number
 * must stay a number no smaller; one that was not a number is the
 * validator's business.  label follows the rule's kind in the reason:
 * "" or ", plain writes" for a rule of that scope. */
static int trans_match(const trans_t *t, const json_t *before,
                       const json_t *after, const char *label, char *why,
                       size_t n) {
  for (size_t i = 0; i < t->nimm; i++) {
    const json_t *a = path_value(before, t->imm[i]);
    const json_t *b = path_value(after, t->imm[i]);
    if (a == b || (a && b && json_equal(a, b)))
      continue;
    snprintf(why, n, "%.100s may not change (transition immutable%s)",
             t->imm[i], label);
    return 0;
  }
  for (size_t i = 0; i < t->ninc; i++) {
    const json_t *a = path_value(before, t->inc[i]);
    const json_t *b = path_value(after, t->inc[i]);
    if (!json_is_number(a))
      continue;
    if (json_is_number(b) && dtx__value_cmp(b, a) >= 0)
      continue;
    char *at = dtx__json_dump(a), *bt = b ? dtx__json_dump(b) : NULL;
    snprintf(why, n, "%.100s may not decrease: %.40s -> %.40s (transition "
             "increasing%s)", t->inc[i], at ? at : "?", b ? (bt ? bt : "?")
                                                     : "missing", label);
    free(at);
    free(bt);
    return 0;
  }
  if (!t->nmoves)
    return 1;
  /* Some move must fit.  The refusal lists the moves allowed from the
   * document's state, which is what a person can act on. */
  char from[200] = "";
  size_t len = 0;
  for (size_t i = 0; i < t->nmoves; i++) {
    if (!dtx__filter_match(t->moves[i].from, before))
      continue;
    if (dtx__filter_match(t->moves[i].to, after))
      return 1;
    if (len < sizeof from)
      len += (size_t)snprintf(from + len, sizeof from - len, "%s%s",
                              len ? ", " : "", t->moves[i].name);
  }
  if (len)
    snprintf(why, n, "the change fits no allowed move (transition moves%s; "
             "allowed from this state: %s)", label, from);
  else
    snprintf(why, n, "the change fits no allowed move (transition moves%s; "
             "none is allowed from this state)", label);
  return 0;
}

/* 1 when t admits the insert of doc, else 0 with the reason in why. */
static int insert_match(const trans_t *t, const json_t *doc,
                        const char *label, char *why, size_t n) {
  if (t->noinsert) {
    snprintf(why, n, "an insert is refused (transition insert%s)", label);
    return 0;
  }
  if (!t->insert || dtx__filter_match(t->insert, doc))
    return 1;
  snprintf(why, n, "the insert condition %.200s is not met (transition "
             "insert%s)",
           t->insert_text, label);
  return 0;
}

/* 1 when t admits the delete of doc, else 0 with the reason in why. */
static int delete_match(const trans_t *t, const json_t *doc,
                        const char *label, char *why, size_t n) {
  if (!t->del || dtx__filter_match(t->del, doc))
    return 1;
  snprintf(why, n, "delete refused: the delete condition %.200s is not met "
           "(transition delete%s)", t->del_text, label);
  return 0;
}

/* Checks the change before -> after (before NULL: an insert; after
 * NULL: a delete) against every transition rule in force for this
 * writer: a rule of scope "plain" is skipped inside a pattern's step. */
static int trans_check(const dtx__rules_t *r, const char *coll,
                       const json_t *before, const json_t *after) {
  char who[160], why[400];
  for (size_t i = 0; i < r->ntrans; i++) {
    const trans_t *t = &r->trans[i];
    if (step_exempt(t))
      continue;
    const char *label = t->plain ? ", plain writes" : "";
    if (!after ? delete_match(t, before, label, why, sizeof why)
        : before ? trans_match(t, before, after, label, why, sizeof why)
                 : insert_match(t, after, label, why, sizeof why))
      continue;
    doc_name(coll, before ? before : after, who, sizeof who);
    if (t->why)
      return dtx__err(DTX_EVALIDATION, "%s: %s: %s", who, why, t->why);
    return dtx__err(DTX_EVALIDATION, "%s: %s", who, why);
  }
  return 0;
}

int dtx__doc_check_write(const dtx__rules_t *r, const char *coll,
                         const json_t *before, const json_t *after,
                         int bypass) {
  char who[160], why[400];
  if (after) {
    if (!json_is_object(after))
      return dtx__err(DTX_EINVAL, "%s: a document must be an object", coll);
    /* Its nesting, then 16 MiB, on every backend and whatever the
     * bypass, so an update ($push $each, $set of a big value) cannot grow
     * a document past what an aggregation or a reader may hold
     * (docs/semantics.md).  Every write passes here: one walk measures
     * both; only a document over a bound is walked again, by the checks
     * that name it (the depth first, as its error comes first; a walk
     * stopped at the size bound may not have seen the deepest level).
     * The name is formatted only for an error: it showed in profiles. */
    int levels;
    size_t bytes = dtx__value_bson_shape(after, DTX__DOC_MAX, &levels);
    if (bytes > DTX__DOC_MAX || levels > DTX_MAX_DEPTH) {
      if (dtx__depth_check(after, DTX_EINVAL, coll) < 0) {
        doc_name(coll, after, who, sizeof who);
        return dtx__depth_check(after, DTX_EINVAL, who);
      }
      DTX_ASSERT(bytes > DTX__DOC_MAX, "a document's levels, walked twice");
      doc_name(coll, after, who, sizeof who);
      return dtx__doc_size_check(after, who);
    }
    if (bypass || !r)
      return 0;
    if (json_object_size(json_object_get(r->spec, "validator")) &&
        !part_match(&r->validator, after, "validator", why, sizeof why)) {
      doc_name(coll, after, who, sizeof who);
      return dtx__err(DTX_EVALIDATION, "%s: %s", who, why);
    }
    return r->ntrans ? trans_check(r, coll, before, after) : 0;
  }
  if (bypass || !r || !before)
    return 0;
  if (json_object_size(json_object_get(r->spec, "delete_guard"))) {
    doc_name(coll, before, who, sizeof who);
    if (!part_match(&r->guard, before, "delete_guard", why, sizeof why))
      return dtx__err(DTX_EVALIDATION, "%s: delete refused: %s", who, why);
  }
  return r->ntrans ? trans_check(r, coll, before, NULL) : 0;
}
