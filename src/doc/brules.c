/* brules.c -- what every stored document must obey, on BSON: the twin of
 * rules.c (read its header for the why of each rule), with the same
 * checks, codes and details:
 *  - the depth limit (dtx__bdepth_check);
 *  - a validator or delete guard: each top-level condition compiled on
 *    its own as a BSON filter (bfilter.h), so that a refusal names the
 *    condition, and {"$jsonSchema": ...} by bschema.c;
 *  - transition rules (immutable, increasing, moves, insert, delete,
 *    scope, steps, why, pattern), judged on the before and after bytes;
 *  - dtx__bdoc_check_write, the one check of a write.
 * The step running on this thread is rules.c's (dtx__rules_step_now): the
 * kit brackets its steps once for both engines.
 *
 * Where BSON says more than JSON:
 *  - "immutable" compares exactly, type included, as rules.c (5 and 5.0
 *    differ, so do 5 and NumberDecimal 5), but an integer by its value
 *    whatever its width (int32 5 and int64 5 are the same: a stored
 *    NumberLong that a JSON write brings back as int32 has not changed,
 *    brules.h); objects compare as json_equal does, whatever their key
 *    order;
 *  - "increasing" compares across the numeric types exactly
 *    (dtx__bval_cmp): int32 5 -> int64 6 -> Decimal128 6.5 grows. */
#include "doc/bfilter.h"
#include "doc/brules.h"
#include "util/assert.h"
#include "util/err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the depth limit ----------------------------------------------------- */

/* 1 when the container doc[0..len), at level `level`, holds something
 * deeper than the limit; path[0..*plen) then leads to the first container
 * past it (array elements' names are their indexes).  Recursion bounded by
 * the limit. */
static int too_deep(const uint8_t *doc, uint32_t len, size_t level,
                    const char **path, size_t *plen) {
  if (level > DTX_MAX_DEPTH) {
    *plen = level - 1;
    return 1;
  }
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(doc, len, &off, &e)) {
    if (e.v.type != BSON_TYPE_DOCUMENT && e.v.type != BSON_TYPE_ARRAY)
      continue;
    path[level - 1] = e.key;
    uint32_t n;
    const uint8_t *d = dtx__bval_doc(&e.v, &n);
    if (too_deep(d, n, level + 1, path, plen))
      return 1;
  }
  return 0;
}

/* The dotted path, shortened in the middle when long (rules.c's text). */
static void path_text(const char *const *path, size_t n, char *out,
                      size_t outlen) {
  char full[4096];
  size_t len = 0;
  for (size_t i = 0; i < n && len < sizeof full; i++)
    len += (size_t)snprintf(full + len, sizeof full - len, "%s%s",
                            i ? "." : "", path[i]);
  if (len >= sizeof full)
    len = sizeof full - 1;
  full[len] = '\0';
  if (len < outlen || outlen < 64)
    snprintf(out, outlen, "%s", full);
  else
    snprintf(out, outlen, "%.*s...%s", (int)(outlen / 2 - 4), full,
             full + len - (outlen / 2 - 4));
}

int dtx__bdepth_check(const uint8_t *doc, uint32_t len, int code,
                      const char *what) {
  /* Each level past the first takes at least 7 bytes (a type byte, an
   * empty name's NUL, a length and an end byte) inside the smallest
   * document's 5, so fewer than 5 + 7 * DTX_MAX_DEPTH bytes cannot reach
   * the level past the limit (test_bschema's test_depth builds the
   * smallest that does): most writes are far smaller, and skip the walk,
   * which was 3.6 % of test_rules_corpus. */
  if (len < 5 + 7 * DTX_MAX_DEPTH)
    return 0;
  const char *path[DTX_MAX_DEPTH + 1];
  size_t n = 0;
  if (!too_deep(doc, len, 1, path, &n))
    return 0;
  char p[128];
  path_text(path, n, p, sizeof p);
  return dtx__err(code,
                  "%s nests deeper than %d levels (the limit): level %d is "
                  "reached at %s",
                  what, DTX_MAX_DEPTH, DTX_MAX_DEPTH + 1, p);
}

/* ---- compiled rules ------------------------------------------------------ */

typedef struct part {
  dtx__bschema_t *schema;
  size_t nconds;
  dtx__bfilter_t **conds;
  char **texts; /* each condition as compact JSON, for messages */
} part_t;

typedef struct move {
  dtx__bfilter_t *from, *to;
  char *name;
} move_t;

typedef struct trans {
  size_t nimm, ninc, nmoves, nsteps;
  const char **imm, **inc, **steps; /* views into the spec's copy */
  move_t *moves;
  int plain, noinsert;
  dtx__bfilter_t *insert, *del;
  char *insert_text, *del_text;
  const char *why;
} trans_t;

#define FIRST_BYTES 2048

struct dtx__brules {
  int has_validator, has_guard;
  part_t validator, guard;
  size_t ntrans;
  trans_t *trans;
  dtx__arena_t arena;
  _Alignas(8) char first[FIRST_BYTES];
};

static void part_free(part_t *p) {
  dtx__bschema_free(p->schema);
  for (size_t i = 0; i < p->nconds; i++)
    dtx__bfilter_free(p->conds[i]);
}

void dtx__brules_free(dtx__brules_t *r) {
  if (!r)
    return;
  part_free(&r->validator);
  part_free(&r->guard);
  for (size_t i = 0; i < r->ntrans; i++) {
    trans_t *t = &r->trans[i];
    for (size_t j = 0; j < t->nmoves; j++) {
      dtx__bfilter_free(t->moves[j].from);
      dtx__bfilter_free(t->moves[j].to);
    }
    dtx__bfilter_free(t->insert);
    dtx__bfilter_free(t->del);
  }
  dtx__arena_free(&r->arena);
  free(r);
}

static int nomem(const char *what) {
  return dtx__err(DTX_ENOMEM, "compiling %s", what);
}

static uint32_t count_elems(const dtx__bval_t *v) {
  uint32_t len, off = 0, n = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e))
    n++;
  return n;
}

/* Compact JSON text of a document (through the bridge: the json_t
 * engine's text), in the arena; NULL when out of memory. */
static char *doc_text(dtx__arena_t *a, const uint8_t *d, uint32_t len) {
  json_t *j = NULL;
  if (dtx__bson_to_json(d, len, 0, &j))
    return NULL;
  char *t = dtx__json_dump(j);
  json_decref(j);
  char *c = t ? dtx__arena_strndup(a, t, strlen(t)) : NULL;
  free(t);
  return c;
}

/* The rules document's bytes are checked (dtx__bson_check) one level at
 * a time, in rules.c's order: a part's kind before its content.  The
 * document wraps each rule one level deeper than rules.c judges it (a
 * validator may nest 100 levels, DTX_MAX_DEPTH; a transition array holds
 * objects of as many), so a level is checked with its documents and
 * arrays emptied, and each of them later as the document it is, once its
 * kind was judged.  bson_iter_next stops at the end and at invalid bytes
 * alike, so the bytes it walked must add up to the whole; when they do
 * not, the whole check names the fault. */
static int check_bytes(const uint8_t *d, uint32_t len) {
  return dtx__bson_check(d, len, DTX_EBADQUERY, "collection rules");
}

static int check_level(const uint8_t *d, uint32_t len) {
  bson_t in, top = BSON_INITIALIZER;
  bson_iter_t it;
  size_t inner = 0; /* the emptied containers' content bytes */
  int rc = 0, ok = 1;
  if (!bson_init_static(&in, d, len) || !bson_iter_init(&it, &in))
    return check_bytes(d, len);
  while (ok && bson_iter_next(&it)) {
    const char *k = bson_iter_key(&it);
    int klen = (int)bson_iter_key_len(&it);
    const uint8_t *p = NULL;
    uint32_t n = 0;
    bson_t empty = BSON_INITIALIZER;
    if (BSON_ITER_HOLDS_DOCUMENT(&it) || BSON_ITER_HOLDS_ARRAY(&it)) {
      if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        bson_iter_document(&it, &n, &p);
        ok = bson_append_document(&top, k, klen, &empty);
      } else {
        bson_iter_array(&it, &n, &p);
        ok = bson_append_array(&top, k, klen, &empty);
      }
      ok = ok && p && n >= 5;
      inner += ok ? n - 5 : 0;
    } else {
      ok = bson_append_iter(&top, k, klen, &it);
    }
  }
  if (!ok || top.len + inner != len) {
    rc = check_bytes(d, len);
    if (rc == 0) /* the walk fell short of bytes the check accepts */
      rc = dtx__err(DTX_EBADQUERY, "collection rules could not be read");
  }
  if (rc == 0)
    rc = check_bytes(bson_get_data(&top), top.len);
  bson_destroy(&top);
  return rc;
}

/* A document or array value whose own level passed check_level, whole. */
static int check_val(const dtx__bval_t *v) {
  uint32_t len;
  const uint8_t *d = dtx__bval_doc(v, &len);
  return check_bytes(d, len);
}

/* Compiles the document value v as a filter (and its text when text is
 * not NULL). */
static int filter_of(dtx__brules_t *r, const dtx__bval_t *v,
                     dtx__bfilter_t **out, char **text) {
  uint32_t len;
  const uint8_t *d = dtx__bval_doc(v, &len);
  bson_t b;
  if (!bson_init_static(&b, d, len))
    return dtx__err(DTX_EBADQUERY, "a filter is not a valid document");
  int rc = dtx__bfilter_compile(&b, out);
  if (rc == 0 && text && !(*text = doc_text(&r->arena, d, len)))
    rc = nomem("a rule");
  return rc;
}

static int part_compile(dtx__brules_t *r, const dtx__bval_t *spec,
                        const char *name, part_t *p) {
  uint32_t len;
  const uint8_t *d = dtx__bval_doc(spec, &len);
  int rc = check_val(spec);
  if (rc == 0)
    rc = dtx__bdepth_check(d, len, DTX_EBADQUERY, name);
  if (rc < 0)
    return rc;
  uint32_t n = count_elems(spec);
  p->conds = dtx__arena_alloc(&r->arena, (n + 1) * sizeof *p->conds);
  p->texts = dtx__arena_alloc(&r->arena, (n + 1) * sizeof *p->texts);
  if (!p->conds || !p->texts)
    return dtx__err(DTX_ENOMEM, "compiling the %s", name);
  uint32_t off = 0;
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e)) {
    if (strcmp(e.key, "$jsonSchema") == 0) {
      if ((rc = dtx__bschema_compile(&e.v, &p->schema)) < 0)
        return dtx__err_wrap(rc, "%s", name);
      continue;
    }
    /* The condition alone, as a document of one element: its bytes are
     * the element's, framed. */
    uint32_t blen = 4 + 1 + e.keylen + 1 + e.v.len + 1;
    uint8_t *one = dtx__arena_alloc(&r->arena, blen);
    if (!one)
      return dtx__err(DTX_ENOMEM, "compiling the %s", name);
    uint32_t le = BSON_UINT32_TO_LE(blen);
    memcpy(one, &le, 4);
    one[4] = (uint8_t)e.v.type;
    memcpy(one + 5, e.key, e.keylen + 1);
    memcpy(one + 6 + e.keylen, e.v.data, e.v.len);
    one[blen - 1] = 0;
    dtx__bval_t doc = dtx__bval_of_doc(one, blen);
    rc = filter_of(r, &doc, &p->conds[p->nconds], &p->texts[p->nconds]);
    if (rc < 0) {
      dtx__bfilter_free(p->conds[p->nconds]);
      p->conds[p->nconds] = NULL;
      return rc == DTX_ENOMEM ? rc : dtx__err_wrap(rc, "%s", name);
    }
    p->nconds++;
  }
  return 0;
}

/* ---- transition rules ---------------------------------------------------- */

static int paths_compile(dtx__brules_t *r, const dtx__bval_t *v,
                         const char *what, const char ***out, size_t *n) {
  uint32_t cnt = v->type == BSON_TYPE_ARRAY ? count_elems(v) : 0;
  if (!cnt)
    return dtx__err(DTX_EBADQUERY, "%s must be a non-empty array of field "
                    "paths", what);
  if (!(*out = dtx__arena_alloc(&r->arena, cnt * sizeof **out)))
    return nomem(what);
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  for (size_t i = 0; dtx__belem_next(d, len, &off, &e); i++) {
    if (e.v.type != BSON_TYPE_UTF8)
      return dtx__err(DTX_EBADQUERY, "%s[%zu] must be a field path string",
                      what, i);
    uint32_t sl;
    const char *p = dtx__bval_str(&e.v, &sl);
    int rc = dtx__path_check(p, DTX_EBADQUERY);
    if (rc < 0)
      return dtx__err_wrap(rc, "%s[%zu]", what, i);
    for (size_t j = 0; j < i; j++)
      if (strcmp((*out)[j], p) == 0)
        return dtx__err(DTX_EBADQUERY, "%s names '%s' twice", what, p);
    (*out)[i] = p;
    (*n)++;
  }
  return 0;
}

static int move_compile(dtx__brules_t *r, const dtx__bval_t *m,
                        const char *what, size_t i, move_t *mv) {
  char w[96];
  snprintf(w, sizeof w, "%s.moves[%zu]", what, i);
  if (m->type != BSON_TYPE_DOCUMENT)
    return dtx__err(DTX_EBADQUERY, "%s must be an object {\"from\": FILTER, "
                    "\"to\": FILTER, \"name\": TEXT}", w);
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(m, &len);
  dtx__belem_t e, name, side;
  while (dtx__belem_next(d, len, &off, &e))
    if (strcmp(e.key, "from") && strcmp(e.key, "to") && strcmp(e.key, "name"))
      return dtx__err(DTX_EBADQUERY, "%s: unknown key '%.40s' (from, to, "
                      "name)", w, e.key);
  if (dtx__belem_find(d, len, "name", 4, &name)) {
    uint32_t nl = 0;
    const char *s = name.v.type == BSON_TYPE_UTF8
                        ? dtx__bval_str(&name.v, &nl) : NULL;
    /* rules.c measures json_string_length: the bytes, NULs included. */
    if (!s || !nl || nl > 64)
      return dtx__err(DTX_EBADQUERY, "%s.name must be a string of 1..64 "
                      "bytes", w);
    mv->name = (char *)s;
  } else {
    char num[24];
    snprintf(num, sizeof num, "#%zu", i + 1);
    if (!(mv->name = dtx__arena_strndup(&r->arena, num, strlen(num))))
      return nomem(w);
  }
  static const char *const sides[] = {"from", "to"};
  for (int s = 0; s < 2; s++) {
    if (!dtx__belem_find(d, len, sides[s], strlen(sides[s]), &side) ||
        side.v.type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADQUERY, "%s.%s must be a filter object", w,
                      sides[s]);
    int rc = filter_of(r, &side.v, s ? &mv->to : &mv->from, NULL);
    if (rc < 0)
      return dtx__err_wrap(rc, "%s.%s", w, sides[s]);
  }
  return 0;
}

static int is_pattern_name(const char *s, uint32_t n) {
  return n >= 1 && n <= 32 && strlen(s) == n &&
         strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static int steps_compile(dtx__brules_t *r, const dtx__bval_t *v,
                         const char *what, trans_t *t) {
  uint32_t n = v->type == BSON_TYPE_ARRAY ? count_elems(v) : 0;
  if (!n)
    return dtx__err(DTX_EBADQUERY, "%s must be a non-empty array of pattern "
                    "names", what);
  if (!(t->steps = dtx__arena_alloc(&r->arena, n * sizeof *t->steps)))
    return nomem(what);
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  for (size_t i = 0; dtx__belem_next(d, len, &off, &e); i++) {
    uint32_t sl = 0;
    const char *p =
        e.v.type == BSON_TYPE_UTF8 ? dtx__bval_str(&e.v, &sl) : NULL;
    if (!p || !is_pattern_name(p, sl))
      return dtx__err(DTX_EBADQUERY, "%s[%zu] must be a pattern name (1..32 "
                      "of [a-z0-9_])", what, i);
    for (size_t j = 0; j < i; j++)
      if (strcmp(t->steps[j], p) == 0)
        return dtx__err(DTX_EBADQUERY, "%s names '%s' twice", what, p);
    t->steps[i] = p;
    t->nsteps++;
  }
  return 0;
}

static int pattern_name_check(const dtx__bval_t *v, const char *what) {
  uint32_t n = 0;
  const char *s = v->type == BSON_TYPE_UTF8 ? dtx__bval_str(v, &n) : NULL;
  if (!s || !is_pattern_name(s, n))
    return dtx__err(DTX_EBADQUERY, "%s must be a pattern name (1..32 of "
                    "[a-z0-9_])", what);
  return 0;
}

static int str_is(const dtx__bval_t *v, const char *s) {
  uint32_t n;
  return v->type == BSON_TYPE_UTF8 &&
         strcmp(dtx__bval_str(v, &n), s) == 0 && n == strlen(s);
}

static int trans_key(dtx__brules_t *r, trans_t *t, const char *what,
                     const dtx__belem_t *e) {
  const char *k = e->key;
  const dtx__bval_t *v = &e->v;
  char w[80];
  snprintf(w, sizeof w, "%s.%.20s", what, k);
  if (strcmp(k, "immutable") == 0)
    return paths_compile(r, v, w, &t->imm, &t->nimm);
  if (strcmp(k, "increasing") == 0)
    return paths_compile(r, v, w, &t->inc, &t->ninc);
  if (strcmp(k, "moves") == 0) {
    uint32_t n = v->type == BSON_TYPE_ARRAY ? count_elems(v) : 0;
    if (!n)
      return dtx__err(DTX_EBADQUERY, "%s must be a non-empty array of "
                      "moves", w);
    if (!(t->moves = dtx__arena_alloc(&r->arena, n * sizeof *t->moves)))
      return nomem(w);
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(v, &len);
    dtx__belem_t m;
    for (size_t i = 0; dtx__belem_next(d, len, &off, &m); i++) {
      t->nmoves++;
      int rc = move_compile(r, &m.v, what, i, &t->moves[i]);
      if (rc < 0)
        return rc;
    }
    return 0;
  }
  if (strcmp(k, "insert") == 0) {
    if (v->type == BSON_TYPE_BOOL && !dtx__bval_bool(v)) {
      t->noinsert = 1;
      return 0;
    }
    if (v->type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADQUERY, "%s must be false or a filter object",
                      w);
    int rc = filter_of(r, v, &t->insert, &t->insert_text);
    return rc < 0 && rc != DTX_ENOMEM ? dtx__err_wrap(rc, "%s", w) : rc;
  }
  if (strcmp(k, "delete") == 0) {
    if (v->type != BSON_TYPE_DOCUMENT)
      return dtx__err(DTX_EBADQUERY, "%s must be a filter object", w);
    int rc = filter_of(r, v, &t->del, &t->del_text);
    return rc < 0 && rc != DTX_ENOMEM ? dtx__err_wrap(rc, "%s", w) : rc;
  }
  if (strcmp(k, "scope") == 0) {
    if (str_is(v, "plain"))
      t->plain = 1;
    else if (!str_is(v, "all"))
      return dtx__err(DTX_EBADQUERY, "%s must be \"all\" or \"plain\"", w);
    return 0;
  }
  if (strcmp(k, "steps") == 0)
    return steps_compile(r, v, w, t);
  if (strcmp(k, "pattern") == 0)
    return pattern_name_check(v, w);
  if (strcmp(k, "why") == 0) {
    uint32_t n = 0;
    const char *s = v->type == BSON_TYPE_UTF8 ? dtx__bval_str(v, &n) : NULL;
    if (!s || !n || n > 200)
      return dtx__err(DTX_EBADQUERY, "%s must be a string of 1..200 bytes", w);
    t->why = s;
    return 0;
  }
  return dtx__err(DTX_EBADQUERY, "%s: unknown key '%.40s' (immutable, "
                  "increasing, moves, insert, delete, scope, steps, why, "
                  "pattern)", what, k);
}

static int trans_compile(dtx__brules_t *r, const dtx__bval_t *spec,
                         size_t idx, trans_t *t) {
  char what[48];
  snprintf(what, sizeof what, "transition[%zu]", idx);
  /* (5 bytes: an empty document; its elements are not checked yet) */
  if (spec->type != BSON_TYPE_DOCUMENT || spec->len <= 5)
    return dtx__err(DTX_EBADQUERY, "%s must be a non-empty object of "
                    "immutable, increasing, moves, insert, scope and why",
                    what);
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(spec, &len);
  int rc = check_val(spec);
  if (rc == 0)
    rc = dtx__bdepth_check(d, len, DTX_EBADQUERY, what);
  dtx__belem_t e;
  while (rc == 0 && dtx__belem_next(d, len, &off, &e))
    rc = trans_key(r, t, what, &e);
  if (rc == 0 && t->nsteps && !t->plain)
    rc = dtx__err(DTX_EBADQUERY, "%s.steps goes with \"scope\": \"plain\" "
                  "(a rule of every writer judges every step)", what);
  if (rc == 0 && !t->nimm && !t->ninc && !t->nmoves && !t->noinsert &&
      !t->insert && !t->del)
    rc = dtx__err(DTX_EBADQUERY, "%s judges nothing: give it immutable, "
                  "increasing, moves, insert or delete", what);
  return rc;
}

static int transitions_compile(dtx__brules_t *r, const dtx__bval_t *spec) {
  int isarr = spec->type == BSON_TYPE_ARRAY;
  if (isarr) { /* its elements' kinds first: trans_compile */
    uint32_t alen;
    const uint8_t *ad = dtx__bval_doc(spec, &alen);
    int rc = check_level(ad, alen);
    if (rc < 0)
      return rc;
  }
  uint32_t n = isarr ? count_elems(spec) : 1;
  if (isarr && !n)
    return dtx__err(DTX_EBADQUERY, "transition must be an object or a "
                    "non-empty array of objects");
  if (!(r->trans = dtx__arena_alloc(&r->arena, n * sizeof *r->trans)))
    return dtx__err(DTX_ENOMEM, "compiling the transition rule");
  if (!isarr) {
    r->ntrans = 1;
    return trans_compile(r, spec, 0, &r->trans[0]);
  }
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(spec, &len);
  dtx__belem_t e;
  for (size_t i = 0; dtx__belem_next(d, len, &off, &e); i++) {
    r->ntrans++;
    int rc = trans_compile(r, &e.v, i, &r->trans[i]);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* A rule as given (rules.c's part_arg): missing, null and {} mean none
 * (*has 0); anything else must be a document (the transition rule may
 * also be an array of them). */
static int part_arg(const uint8_t *d, uint32_t len, const char *name,
                    dtx__belem_t *e, int *has) {
  *has = 0;
  if (!dtx__belem_find(d, len, name, strlen(name), e) ||
      e->v.type == BSON_TYPE_NULL ||
      (e->v.type == BSON_TYPE_DOCUMENT && e->v.len <= 5))
    return 0;
  if (e->v.type != BSON_TYPE_DOCUMENT &&
      !(e->v.type == BSON_TYPE_ARRAY && strcmp(name, "transition") == 0))
    return dtx__err(DTX_EBADQUERY, "%s must be an object", name);
  *has = 1;
  return 0;
}

int dtx__brules_compile(const bson_t *spec, dtx__brules_t **out) {
  *out = NULL;
  if (!spec)
    return 0;
  const uint8_t *data = bson_get_data(spec);
  int rc = check_level(data, spec->len);
  if (rc < 0)
    return rc;
  dtx__brules_t *r = malloc(sizeof *r);
  if (!r)
    return dtx__err(DTX_ENOMEM, "compiling collection rules");
  memset(r, 0, offsetof(dtx__brules_t, arena));
  dtx__arena_init(&r->arena, r->first, sizeof r->first);
  /* Every view (paths, names, why) points into this copy. */
  uint8_t *d = dtx__arena_alloc(&r->arena, spec->len);
  uint32_t len = spec->len;
  dtx__belem_t owner, v, g, t;
  int hv = 0, hg = 0, ht = 0;
  if (!d) {
    rc = dtx__err(DTX_ENOMEM, "compiling collection rules");
    goto out;
  }
  memcpy(d, data, len);
  if (dtx__belem_find(d, len, "pattern", 7, &owner) &&
      owner.v.type != BSON_TYPE_NULL)
    rc = pattern_name_check(&owner.v, "the rules' pattern");
  if (rc == 0)
    rc = part_arg(d, len, "validator", &v, &hv);
  if (rc == 0)
    rc = part_arg(d, len, "delete_guard", &g, &hg);
  if (rc == 0)
    rc = part_arg(d, len, "transition", &t, &ht);
  if (rc < 0 || (!hv && !hg && !ht))
    goto out;
  r->has_validator = hv;
  r->has_guard = hg;
  if ((hv && (rc = part_compile(r, &v.v, "validator", &r->validator)) < 0) ||
      (hg && (rc = part_compile(r, &g.v, "delete_guard", &r->guard)) < 0) ||
      (ht && (rc = transitions_compile(r, &t.v)) < 0))
    goto out;
  *out = r;
  return 0;
out:
  dtx__brules_free(r);
  return rc;
}

/* ---- the write check ----------------------------------------------------- */

/* "accounts 'A'" or "users 7": the collection and the document's _id
 * (rules.c's text; an _id JSON lacks prints as its Extended JSON). */
static void doc_name(const char *coll, const uint8_t *doc, uint32_t len,
                     char *out, size_t n) {
  dtx__belem_t id;
  if (!dtx__belem_find(doc, len, "_id", 3, &id)) {
    snprintf(out, n, "%s %.100s", coll, "(no _id)");
    return;
  }
  uint32_t sl;
  switch (id.v.type) {
  case BSON_TYPE_UTF8:
    snprintf(out, n, "%s '%.100s'", coll, dtx__bval_str(&id.v, &sl));
    return;
  case BSON_TYPE_INT32:
    snprintf(out, n, "%s %lld", coll, (long long)dtx__bval_int32(&id.v));
    return;
  case BSON_TYPE_INT64:
    snprintf(out, n, "%s %lld", coll, (long long)dtx__bval_int64(&id.v));
    return;
  default: {
    json_t *j = NULL;
    char *t = dtx__bval_to_json(&id.v, &j) == 0 ? dtx__json_dump(j) : NULL;
    json_decref(j);
    snprintf(out, n, "%s %.100s", coll, t ? t : "?");
    free(t);
  }
  }
}

static int part_match(const part_t *p, const uint8_t *doc, uint32_t len,
                      const char *name, char *why, size_t n) {
  /* The schema first: its reasons are the more precise (rules.c). */
  if (p->schema && !dtx__bschema_match(p->schema, doc, len, why, n))
    return 0;
  for (size_t i = 0; i < p->nconds; i++)
    if (!dtx__bfilter_match(p->conds[i], doc, len)) {
      snprintf(why, n, "the %s condition %.200s is not met", name,
               p->texts[i]);
      return 0;
    }
  return 1;
}

/* The value a transition path names (rules.c's path_value): document
 * fields by name, array elements by a numeric segment of at most 9
 * digits (leading zeros allowed, as strtoul reads them); type 0 when it
 * reaches nothing. */
static dtx__bval_t path_value(const uint8_t *doc, uint32_t len,
                              const char *path) {
  dtx__bval_t cur = dtx__bval_of_doc(doc, len), none = {0, 0, NULL};
  const char *seg = path;
  for (;;) {
    const char *dot = strchr(seg, '.');
    size_t n = dot ? (size_t)(dot - seg) : strlen(seg);
    dtx__belem_t e;
    uint32_t dl;
    const uint8_t *d;
    if (n >= 256)
      return none;
    if (cur.type == BSON_TYPE_DOCUMENT) {
      d = dtx__bval_doc(&cur, &dl);
      if (!dtx__belem_find(d, dl, seg, n, &e))
        return none;
    } else if (cur.type == BSON_TYPE_ARRAY && n && n < 10 &&
               strspn(seg, "0123456789") >= n) {
      size_t want = 0;
      for (size_t i = 0; i < n; i++)
        want = want * 10 + (size_t)(seg[i] - '0');
      d = dtx__bval_doc(&cur, &dl);
      uint32_t off = 0;
      size_t i = 0;
      int found = 0;
      while (!found && dtx__belem_next(d, dl, &off, &e))
        found = i++ == want;
      if (!found)
        return none;
    } else {
      return none;
    }
    cur = e.v;
    if (!dot)
      return cur;
    seg = dot + 1;
  }
}

static int same_exact(const dtx__bval_t *a, const dtx__bval_t *b);

/* Documents equal as json_equal: the same names, each with an exactly
 * equal value, in any order (the check guarantees distinct names). */
static int same_doc(const dtx__bval_t *a, const dtx__bval_t *b) {
  uint32_t la, lb, off = 0;
  const uint8_t *da = dtx__bval_doc(a, &la), *db = dtx__bval_doc(b, &lb);
  if (count_elems(a) != count_elems(b))
    return 0;
  dtx__belem_t e, f;
  while (dtx__belem_next(da, la, &off, &e))
    if (!dtx__belem_find(db, lb, e.key, e.keylen, &f) ||
        !same_exact(&e.v, &f.v))
      return 0;
  return 1;
}

static int is_int(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_INT32 || v->type == BSON_TYPE_INT64;
}

static int64_t int_of(const dtx__bval_t *v) {
  return v->type == BSON_TYPE_INT32 ? dtx__bval_int32(v) : dtx__bval_int64(v);
}

static int same_exact(const dtx__bval_t *a, const dtx__bval_t *b) {
  /* An integer by its value, whatever its width (brules.h): a stored
   * NumberLong(5) that a JSON write brings back as int32 5 is unchanged,
   * as the json_t engine, which cannot tell them apart, says. */
  if (is_int(a) && is_int(b))
    return int_of(a) == int_of(b);
  if (a->type != b->type)
    return 0;
  if (a->type == BSON_TYPE_DOCUMENT)
    return same_doc(a, b);
  if (a->type == BSON_TYPE_ARRAY) {
    uint32_t la, lb, oa = 0, ob = 0;
    const uint8_t *da = dtx__bval_doc(a, &la), *db = dtx__bval_doc(b, &lb);
    dtx__belem_t e, f;
    for (;;) {
      int ha = dtx__belem_next(da, la, &oa, &e);
      int hb = dtx__belem_next(db, lb, &ob, &f);
      if (ha != hb)
        return 0;
      if (!ha)
        return 1;
      if (!same_exact(&e.v, &f.v))
        return 0;
    }
  }
  if (a->type == BSON_TYPE_DOUBLE) {
    /* As json_equal (==: 0.0 and -0.0 are equal), and NaN stays NaN. */
    double x = dtx__bval_double(a), y = dtx__bval_double(b);
    return x == y || (isnan(x) && isnan(y));
  }
  return a->len == b->len && memcmp(a->data, b->data, a->len) == 0;
}

static char *val_text(const dtx__bval_t *v) {
  json_t *j = NULL;
  char *t = dtx__bval_to_json(v, &j) == 0 ? dtx__json_dump(j) : NULL;
  json_decref(j);
  return t;
}

static int trans_match(const trans_t *t, const uint8_t *before,
                       uint32_t blen, const uint8_t *after, uint32_t alen,
                       const char *label, char *why, size_t n) {
  for (size_t i = 0; i < t->nimm; i++) {
    dtx__bval_t a = path_value(before, blen, t->imm[i]);
    dtx__bval_t b = path_value(after, alen, t->imm[i]);
    if ((!a.type && !b.type) || (a.type && b.type && same_exact(&a, &b)))
      continue;
    snprintf(why, n, "%.100s may not change (transition immutable%s)",
             t->imm[i], label);
    return 0;
  }
  for (size_t i = 0; i < t->ninc; i++) {
    dtx__bval_t a = path_value(before, blen, t->inc[i]);
    dtx__bval_t b = path_value(after, alen, t->inc[i]);
    if (!dtx__bval_is_number(&a))
      continue;
    if (dtx__bval_is_number(&b) && dtx__bval_cmp(&b, &a) >= 0)
      continue;
    char *at = val_text(&a), *bt = b.type ? val_text(&b) : NULL;
    snprintf(why, n, "%.100s may not decrease: %.40s -> %.40s (transition "
             "increasing%s)", t->inc[i], at ? at : "?", b.type ? (bt ? bt : "?")
                                                          : "missing", label);
    free(at);
    free(bt);
    return 0;
  }
  if (!t->nmoves)
    return 1;
  char from[200] = "";
  size_t len = 0;
  for (size_t i = 0; i < t->nmoves; i++) {
    if (!dtx__bfilter_match(t->moves[i].from, before, blen))
      continue;
    if (dtx__bfilter_match(t->moves[i].to, after, alen))
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

static int insert_match(const trans_t *t, const uint8_t *doc, uint32_t len,
                        const char *label, char *why, size_t n) {
  if (t->noinsert) {
    snprintf(why, n, "an insert is refused (transition insert%s)", label);
    return 0;
  }
  if (!t->insert || dtx__bfilter_match(t->insert, doc, len))
    return 1;
  snprintf(why, n, "the insert condition %.200s is not met (transition "
           "insert%s)", t->insert_text, label);
  return 0;
}

static int delete_match(const trans_t *t, const uint8_t *doc, uint32_t len,
                        const char *label, char *why, size_t n) {
  if (!t->del || dtx__bfilter_match(t->del, doc, len))
    return 1;
  snprintf(why, n, "delete refused: the delete condition %.200s is not met "
           "(transition delete%s)", t->del_text, label);
  return 0;
}

/* rules.c's step_exempt, over the step doc.h keeps for both engines. */
static int step_exempt(const trans_t *t) {
  const char *step = dtx__rules_step_now();
  if (!t->plain || !step)
    return 0;
  if (!t->nsteps)
    return 1;
  for (size_t i = 0; i < t->nsteps; i++) {
    size_t n = strlen(t->steps[i]);
    if (strncmp(step, t->steps[i], n) == 0 &&
        (step[n] == '.' || step[n] == '\0'))
      return 1;
  }
  return 0;
}

static int trans_check(const dtx__brules_t *r, const char *coll,
                       const uint8_t *before, uint32_t blen,
                       const uint8_t *after, uint32_t alen) {
  char who[160], why[400];
  for (size_t i = 0; i < r->ntrans; i++) {
    const trans_t *t = &r->trans[i];
    if (step_exempt(t))
      continue;
    const char *label = t->plain ? ", plain writes" : "";
    if (!after ? delete_match(t, before, blen, label, why, sizeof why)
        : before ? trans_match(t, before, blen, after, alen, label, why,
                               sizeof why)
                 : insert_match(t, after, alen, label, why, sizeof why))
      continue;
    if (before)
      doc_name(coll, before, blen, who, sizeof who);
    else
      doc_name(coll, after, alen, who, sizeof who);
    if (t->why)
      return dtx__err(DTX_EVALIDATION, "%s: %s: %s", who, why, t->why);
    return dtx__err(DTX_EVALIDATION, "%s: %s", who, why);
  }
  return 0;
}

int dtx__bdoc_check_write(const dtx__brules_t *r, const char *coll,
                          const uint8_t *before, uint32_t blen,
                          const uint8_t *after, uint32_t alen, int bypass) {
  char who[160], why[400];
  if (after) {
    /* Its nesting, then its size, whatever the bypass (rules.c says
     * why).  BSON's length is the document's size as MongoDB counts it:
     * no walk for the size; the depth is one walk of the containers. */
    if (dtx__bdepth_check(after, alen, DTX_EINVAL, coll) < 0) {
      doc_name(coll, after, alen, who, sizeof who);
      return dtx__bdepth_check(after, alen, DTX_EINVAL, who);
    }
    if (alen > DTX__DOC_MAX) {
      doc_name(coll, after, alen, who, sizeof who);
      return dtx__err(DTX_ELIMIT,
                      "%s would hold more than 16 MiB (%zu bytes), the limit "
                      "of a document", who, DTX__DOC_MAX);
    }
    if (bypass || !r)
      return 0;
    if (r->has_validator && !part_match(&r->validator, after, alen,
                                        "validator", why, sizeof why)) {
      doc_name(coll, after, alen, who, sizeof who);
      return dtx__err(DTX_EVALIDATION, "%s: %s", who, why);
    }
    return r->ntrans ? trans_check(r, coll, before, blen, after, alen) : 0;
  }
  if (bypass || !r || !before)
    return 0;
  if (r->has_guard) {
    doc_name(coll, before, blen, who, sizeof who);
    if (!part_match(&r->guard, before, blen, "delete_guard", why, sizeof why))
      return dtx__err(DTX_EVALIDATION, "%s: delete refused: %s", who, why);
  }
  return r->ntrans ? trans_check(r, coll, before, blen, NULL, 0) : 0;
}
