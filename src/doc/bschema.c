/* bschema.c -- $jsonSchema on BSON: the twin of schema.c (brules.h says
 * what differs).  The keyword set, the refusals, the order checks run in
 * and every message are schema.c's, so that the differential runner
 * (tests/unit/test_schema.c) finds the same answer and the same "why";
 * only what BSON can say and JSON cannot is new.
 *
 * The compiled tree lives in one arena beside a copy of the spec's bytes:
 * names, enum values and bounds are views into that copy, nothing is
 * allocated per keyword but a pattern's PCRE2 code (freed through the
 * list in the schema). */
#include "doc/bdec.h"
#include "doc/brules.h"
#include "doc/schema_where.h"
#include "util/err.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kinds of value, one bit per BSON type byte (1..19), MinKey and MaxKey
 * on bits of their own (their bytes are 0xFF and 0x7F). */
#define T_BIT(t) (1u << (unsigned)(t))
#define T_MINKEY (1u << 20)
#define T_MAXKEY (1u << 21)
#define T_NUMBER                                                         \
  (T_BIT(BSON_TYPE_INT32) | T_BIT(BSON_TYPE_INT64) |                     \
   T_BIT(BSON_TYPE_DOUBLE) | T_BIT(BSON_TYPE_DECIMAL128))

static unsigned type_bit(int t) {
  if (t == BSON_TYPE_MINKEY)
    return T_MINKEY;
  if (t == BSON_TYPE_MAXKEY)
    return T_MAXKEY;
  return t > 0 && t < 20 ? T_BIT(t) : 0;
}

/* JSON Schema's own names for "type"; MongoDB has no "integer". */
static const struct {
  const char *name;
  unsigned bits;
} json_aliases[] = {
    {"object", T_BIT(BSON_TYPE_DOCUMENT)},
    {"array", T_BIT(BSON_TYPE_ARRAY)},
    {"string", T_BIT(BSON_TYPE_UTF8)},
    {"boolean", T_BIT(BSON_TYPE_BOOL)},
    {"null", T_BIT(BSON_TYPE_NULL)},
    {"number", T_NUMBER},
};

#define UNSET (-1)

typedef struct bsch bsch_t;
struct bsch {
  unsigned types;  /* accepted kinds; 0 = no bsonType/type */
  char tnames[96]; /* "long or null", for messages */
  const char *tkw; /* "bsonType" or "type" */
  const char **required;
  size_t nrequired;
  const char **pnames; /* properties (keys inside the spec's copy) */
  bsch_t **props;
  size_t nprops;
  int addl;          /* additionalProperties: UNSET, 0 or 1 */
  dtx__bval_t enumv; /* an array, or type 0 */
  dtx__bval_t minimum, maximum; /* type 0 when absent */
  int exmin, exmax;
  int64_t minlen, maxlen, minitems, maxitems; /* UNSET when absent */
  dtx__regex_t *pattern;
  const char *pattern_text; /* NUL-terminated inside the spec's copy */
  int unique;
  bsch_t *items;
  bsch_t **anyof, **allof, **oneof;
  size_t nany, nall, none;
  bsch_t *not_;
  /* properties and required merged by name, sorted by (length, bytes),
   * for the quiet pass's single walk of a document (check_object); NULL
   * when there are more than 64 names or a name is a property twice (a
   * raw BSON spec may repeat a key): then the walk per name serves. */
  struct bname *index;
  uint32_t nindex;
};

typedef struct bname {
  const char *name;
  uint32_t len;
  int prop;     /* index into props, or -1 */
  int required; /* listed in required */
} bname_t;

typedef struct relink {
  dtx__regex_t *re;
  struct relink *next;
} relink_t;

#define FIRST_BYTES 1024

struct dtx__bschema {
  bsch_t *root;
  relink_t *rlist;
  dtx__arena_t arena;
  _Alignas(8) char first[FIRST_BYTES];
};

void dtx__bschema_free(dtx__bschema_t *s) {
  if (!s)
    return;
  for (relink_t *l = s->rlist; l; l = l->next)
    dtx__regex_free(l->re);
  dtx__arena_free(&s->arena);
  free(s);
}

static int oom(void) { return dtx__err(DTX_ENOMEM, "compiling $jsonSchema"); }

/* ---- compiling ----------------------------------------------------------- */

typedef struct comp {
  dtx__bschema_t *s;
  dtx__where_t w;
} comp_t;

static int sch_compile(comp_t *c, const dtx__bval_t *spec, bsch_t **out);

/* The string's bytes when v is a string, else NULL. */
static const char *str_of(const dtx__bval_t *v, uint32_t *n) {
  if (v->type != BSON_TYPE_UTF8)
    return NULL;
  return dtx__bval_str(v, n);
}

static uint32_t count_elems(const dtx__bval_t *arr) {
  uint32_t len, off = 0, n = 0;
  const uint8_t *d = dtx__bval_doc(arr, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e))
    n++;
  return n;
}

/* Two strings equal as schema.c's json_equal sees them (all bytes). */
static int same_str(const dtx__bval_t *a, const dtx__bval_t *b) {
  uint32_t na, nb;
  const char *sa = dtx__bval_str(a, &na), *sb = dtx__bval_str(b, &nb);
  return na == nb && memcmp(sa, sb, na) == 0;
}

/* The kinds one bsonType/type name stands for, 0 when unknown. */
static unsigned alias_bits(const char *kw, const char *name) {
  if (kw[0] == 'b') {
    int t = dtx__btype_from_alias(name);
    return t == 0 ? T_NUMBER : t < 0 ? 0 : type_bit(t);
  }
  for (size_t k = 0; k < sizeof json_aliases / sizeof *json_aliases; k++)
    if (strcmp(json_aliases[k].name, name) == 0)
      return json_aliases[k].bits;
  return 0;
}

static int compile_types(comp_t *c, bsch_t *s, const char *kw,
                         const dtx__bval_t *v) {
  dtx__where_t *w = &c->w;
  if (s->tkw)
    return dtx__where_bad(w, "bsonType and type cannot both be given");
  s->tkw = kw[0] == 'b' ? "bsonType" : "type";
  int isarr = v->type == BSON_TYPE_ARRAY;
  uint32_t n = isarr ? count_elems(v) : 1;
  if (v->type != BSON_TYPE_UTF8 && !(isarr && n > 0))
    return dtx__where_bad(w, "%s must be a string or a non-empty array of strings", kw);
  uint32_t alen = 0, off = 0;
  const uint8_t *arr = isarr ? dtx__bval_doc(v, &alen) : NULL;
  size_t tn = 0;
  for (uint32_t i = 0; i < n; i++) {
    dtx__belem_t e;
    dtx__bval_t ev = *v;
    if (isarr) {
      dtx__belem_next(arr, alen, &off, &e);
      ev = e.v;
    }
    uint32_t nlen;
    const char *name = str_of(&ev, &nlen);
    if (!name)
      return dtx__where_bad(w, "%s must be a string or a non-empty array of strings", kw);
    unsigned bits = alias_bits(kw, name);
    if (!bits) {
      if (kw[0] == 't' && strcmp(name, "integer") == 0)
        return dtx__where_bad(w, "type 'integer' is not supported (MongoDB's "
                      "$jsonSchema has none): use bsonType 'long' or 'int'");
      return dtx__where_bad(w, "%s '%.40s' is not supported (supported: %s)", kw, name,
                 kw[0] == 'b'
                     ? "double, string, object, array, binData, undefined, "
                       "objectId, bool, date, null, regex, dbPointer, "
                       "javascript, symbol, javascriptWithScope, int, "
                       "timestamp, long, decimal, minKey, maxKey, number"
                     : "object, array, string, boolean, null, number");
    }
    uint32_t o2 = 0;
    for (uint32_t j = 0; j < i; j++) {
      dtx__belem_t p;
      dtx__belem_next(arr, alen, &o2, &p);
      if (p.v.type == BSON_TYPE_UTF8 && same_str(&p.v, &ev))
        return dtx__where_bad(w, "%s lists '%s' twice", kw, name);
    }
    s->types |= bits;
    int k = snprintf(s->tnames + tn, sizeof s->tnames - tn, "%s%s",
                     i == 0 ? "" : i + 1 == n ? " or " : ", ", name);
    tn += (size_t)k;
    if (tn >= sizeof s->tnames)
      tn = sizeof s->tnames - 1;
  }
  return 0;
}

/* A non-negative integer argument: any numeric type holding an integral
 * value (schema.c takes an integer or an integral real; BSON adds int32,
 * and Decimal128 as MongoDB does). */
static int nonneg(const dtx__bval_t *v, const char *kw, dtx__where_t *w,
                  int64_t *out) {
  int64_t i = -1;
  switch (v->type) {
  case BSON_TYPE_INT32:
    i = dtx__bval_int32(v);
    break;
  case BSON_TYPE_INT64:
    i = dtx__bval_int64(v);
    break;
  case BSON_TYPE_DOUBLE: {
    double d = dtx__bval_double(v);
    if (d >= 0 && d < 9.2e18 && d == (double)(int64_t)d)
      i = (int64_t)d;
    break;
  }
  case BSON_TYPE_DECIMAL128: {
    bson_decimal128_t d = dtx__bval_dec(v), t = dtx__dec_trunc(d);
    int64_t x;
    if (dtx__dec_cmp(d, t) == 0 && dtx__dec_to_i64(t, &x) == 0)
      i = x;
    break;
  }
  default:
    break;
  }
  if (i < 0)
    return dtx__where_bad(w, "%s must be a non-negative integer", kw);
  *out = i;
  return 0;
}

/* anyOf/allOf/oneOf: a non-empty array of schemas. */
static int compile_list(comp_t *c, const dtx__bval_t *v, const char *kw,
                        bsch_t ***out, size_t *n) {
  uint32_t cnt = v->type == BSON_TYPE_ARRAY ? count_elems(v) : 0;
  if (cnt == 0)
    return dtx__where_bad(&c->w, "%s must be a non-empty array of schemas", kw);
  if (!(*out = dtx__arena_alloc(&c->s->arena, cnt * sizeof **out)))
    return oom();
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  for (size_t i = 0; dtx__belem_next(d, len, &off, &e); i++) {
    size_t save = dtx__where_push(&c->w, "", kw, 0);
    dtx__where_push(&c->w, "", NULL, i);
    int rc = sch_compile(c, &e.v, &(*out)[i]);
    dtx__where_pop(&c->w, save);
    if (rc < 0)
      return rc;
    (*n)++;
  }
  return 0;
}

static int compile_required(comp_t *c, bsch_t *s, const dtx__bval_t *v) {
  dtx__where_t *w = &c->w;
  uint32_t n = v->type == BSON_TYPE_ARRAY ? count_elems(v) : 0;
  if (n == 0)
    return dtx__where_bad(w, "required must be a non-empty array of field names");
  if (!(s->required = dtx__arena_alloc(&c->s->arena, n * sizeof *s->required)))
    return oom();
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e)) {
    uint32_t sl;
    const char *name = str_of(&e.v, &sl);
    if (!name)
      return dtx__where_bad(w, "required must be a non-empty array of field names");
    uint32_t o2 = 0;
    dtx__belem_t p;
    while (dtx__belem_next(d, len, &o2, &p) && p.v.data != e.v.data)
      if (p.v.type == BSON_TYPE_UTF8 && same_str(&p.v, &e.v))
        return dtx__where_bad(w, "required lists '%s' twice", name);
    /* BSON strings end in a NUL: the view is a C string (cut at an inner
     * NUL, as schema.c's strdup of json_string_value is). */
    s->required[s->nrequired++] = name;
  }
  return 0;
}

static int compile_props(comp_t *c, bsch_t *s, const dtx__bval_t *v) {
  if (v->type != BSON_TYPE_DOCUMENT)
    return dtx__where_bad(&c->w, "properties must be an object of schemas");
  uint32_t n = count_elems(v);
  s->pnames = dtx__arena_alloc(&c->s->arena, (n + 1) * sizeof *s->pnames);
  s->props = dtx__arena_alloc(&c->s->arena, (n + 1) * sizeof *s->props);
  if (!s->pnames || !s->props)
    return oom();
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e)) {
    s->pnames[s->nprops] = e.key;
    size_t save = dtx__where_push(&c->w, "properties.", e.key, 0);
    int rc = sch_compile(c, &e.v, &s->props[s->nprops]);
    dtx__where_pop(&c->w, save);
    if (rc < 0)
      return rc;
    s->nprops++;
  }
  return 0;
}

static int compile_enum(comp_t *c, bsch_t *s, const dtx__bval_t *v) {
  uint32_t n = v->type == BSON_TYPE_ARRAY ? count_elems(v) : 0;
  if (n == 0)
    return dtx__where_bad(&c->w, "enum must be a non-empty array");
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t e;
  /* O(n^2) as schema.c: an enum is a short list, compiled once. */
  while (dtx__belem_next(d, len, &off, &e)) {
    uint32_t o2 = 0;
    dtx__belem_t p;
    while (dtx__belem_next(d, len, &o2, &p) && p.v.data != e.v.data)
      if (dtx__bval_cmp(&p.v, &e.v) == 0)
        return dtx__where_bad(&c->w, "enum lists a value twice");
  }
  s->enumv = *v;
  return 0;
}

static int compile_pattern(comp_t *c, bsch_t *s, const dtx__bval_t *v) {
  uint32_t n;
  const char *p = str_of(v, &n);
  if (!p)
    return dtx__where_bad(&c->w, "pattern must be a string (a regular expression)");
  relink_t *l = dtx__arena_alloc(&c->s->arena, sizeof *l);
  if (!l)
    return oom();
  if (dtx__regex_compile(p, n, "", &l->re) < 0)
    return dtx__where_bad(&c->w, "pattern: %s", dtx_errdetail());
  l->next = c->s->rlist;
  c->s->rlist = l;
  s->pattern = l->re;
  s->pattern_text = p;
  return 0;
}

static int sub_schema(comp_t *c, const char *kw, const dtx__bval_t *v,
                      bsch_t **out) {
  size_t save = dtx__where_push(&c->w, "", kw, 0);
  int rc = sch_compile(c, v, out);
  dtx__where_pop(&c->w, save);
  return rc;
}

static int is_kw(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* exmin/exmax: 0 absent, 1 false, 2 true while compiling (whether they
 * were given matters: they need their bound), then 0 or 1. */
static int compile_kw(comp_t *c, bsch_t *s, const dtx__belem_t *e) {
  const char *kw = e->key;
  const dtx__bval_t *v = &e->v;
  dtx__where_t *w = &c->w;
  if (is_kw(kw, "bsonType") || is_kw(kw, "type"))
    return compile_types(c, s, kw, v);
  if (is_kw(kw, "required"))
    return compile_required(c, s, v);
  if (is_kw(kw, "properties"))
    return compile_props(c, s, v);
  if (is_kw(kw, "additionalProperties")) {
    if (v->type != BSON_TYPE_BOOL)
      return dtx__where_bad(w, "additionalProperties must be true or false (a schema "
                    "there is not supported)");
    s->addl = dtx__bval_bool(v);
    return 0;
  }
  if (is_kw(kw, "enum"))
    return compile_enum(c, s, v);
  if (is_kw(kw, "minimum") || is_kw(kw, "maximum")) {
    if (!dtx__bval_is_number(v))
      return dtx__where_bad(w, "%s must be a number", kw);
    *(kw[1] == 'i' ? &s->minimum : &s->maximum) = *v;
    return 0;
  }
  if (is_kw(kw, "exclusiveMinimum") || is_kw(kw, "exclusiveMaximum")) {
    if (v->type != BSON_TYPE_BOOL)
      return dtx__where_bad(w, "%s must be true or false (JSON Schema draft 4, as "
                    "MongoDB)",
                 kw);
    *(kw[10] == 'i' ? &s->exmin : &s->exmax) = 1 + dtx__bval_bool(v);
    return 0;
  }
  if (is_kw(kw, "pattern"))
    return compile_pattern(c, s, v);
  if (is_kw(kw, "minLength"))
    return nonneg(v, kw, w, &s->minlen);
  if (is_kw(kw, "maxLength"))
    return nonneg(v, kw, w, &s->maxlen);
  if (is_kw(kw, "minItems"))
    return nonneg(v, kw, w, &s->minitems);
  if (is_kw(kw, "maxItems"))
    return nonneg(v, kw, w, &s->maxitems);
  if (is_kw(kw, "uniqueItems")) {
    if (v->type != BSON_TYPE_BOOL)
      return dtx__where_bad(w, "uniqueItems must be true or false");
    s->unique = dtx__bval_bool(v);
    return 0;
  }
  if (is_kw(kw, "items")) {
    if (v->type == BSON_TYPE_ARRAY)
      return dtx__where_bad(w, "items must be one schema (an array of schemas is not "
                    "supported)");
    return sub_schema(c, "items", v, &s->items);
  }
  if (is_kw(kw, "anyOf"))
    return compile_list(c, v, kw, &s->anyof, &s->nany);
  if (is_kw(kw, "allOf"))
    return compile_list(c, v, kw, &s->allof, &s->nall);
  if (is_kw(kw, "oneOf"))
    return compile_list(c, v, kw, &s->oneof, &s->none);
  if (is_kw(kw, "not"))
    return sub_schema(c, "not", v, &s->not_);
  if (is_kw(kw, "title") || is_kw(kw, "description")) {
    if (v->type != BSON_TYPE_UTF8)
      return dtx__where_bad(w, "%s must be a string", kw);
    return 0;
  }
  return dtx__where_bad(w, "keyword '%.60s' is not supported (see docs/validation.md "
                "for the supported subset)",
             kw);
}

static int bname_cmp(const void *pa, const void *pb) {
  const bname_t *a = pa, *b = pb;
  if (a->len != b->len)
    return a->len < b->len ? -1 : 1;
  int r = memcmp(a->name, b->name, a->len);
  if (r)
    return r;
  /* equal names: the property first, so that a merge keeps its index */
  return (a->prop < 0) - (b->prop < 0);
}

/* The name table of an object schema (bsch_t's index).  0, or -1 when
 * out of memory; no table (index NULL) is not an error. */
static int build_index(comp_t *c, bsch_t *s) {
  size_t n = s->nprops + s->nrequired;
  if (n > 64)
    return 0;
  bname_t *t = dtx__arena_alloc(&c->s->arena, n * sizeof *t);
  if (!t)
    return -1;
  size_t k = 0;
  for (size_t i = 0; i < s->nprops; i++)
    t[k++] = (bname_t){s->pnames[i], (uint32_t)strlen(s->pnames[i]), (int)i, 0};
  for (size_t i = 0; i < s->nrequired; i++)
    t[k++] = (bname_t){s->required[i], (uint32_t)strlen(s->required[i]), -1, 1};
  qsort(t, k, sizeof *t, bname_cmp);
  size_t w = 0; /* merge a required name into its property's entry */
  for (size_t i = 0; i < k; i++) {
    if (w && t[w - 1].len == t[i].len &&
        memcmp(t[w - 1].name, t[i].name, t[i].len) == 0) {
      if (t[i].prop >= 0)
        return 0; /* a property twice: keep the walk per name */
      t[w - 1].required |= t[i].required;
      continue;
    }
    t[w++] = t[i];
  }
  s->index = t;
  s->nindex = (uint32_t)w;
  return 0;
}

static const bname_t *bname_find(const bsch_t *s, const char *key,
                                 uint32_t len) {
  size_t lo = 0, hi = s->nindex;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const bname_t *e = &s->index[mid];
    int r = e->len != len ? (e->len < len ? -1 : 1) : memcmp(e->name, key, len);
    if (r == 0)
      return e;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static int sch_compile(comp_t *c, const dtx__bval_t *spec, bsch_t **out) {
  *out = NULL;
  if (spec->type != BSON_TYPE_DOCUMENT)
    return dtx__where_bad(&c->w, "a schema must be an object");
  bsch_t *s = dtx__arena_alloc(&c->s->arena, sizeof *s);
  if (!s)
    return oom();
  s->addl = UNSET;
  s->minlen = s->maxlen = s->minitems = s->maxitems = UNSET;
  uint32_t len, off = 0;
  const uint8_t *d = dtx__bval_doc(spec, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e)) {
    int rc = compile_kw(c, s, &e);
    if (rc < 0)
      return rc;
  }
  if (s->exmin && !s->minimum.type)
    return dtx__where_bad(&c->w, "exclusiveMinimum needs minimum");
  s->exmin = s->exmin == 2;
  if (s->exmax && !s->maximum.type)
    return dtx__where_bad(&c->w, "exclusiveMaximum needs maximum");
  s->exmax = s->exmax == 2;
  if ((s->nprops || s->nrequired) && build_index(c, s) < 0)
    return oom();
  *out = s;
  return 0;
}

int dtx__bschema_compile(const dtx__bval_t *spec, dtx__bschema_t **out) {
  *out = NULL;
  dtx__bschema_t *s = malloc(sizeof *s);
  if (!s)
    return oom();
  s->root = NULL;
  s->rlist = NULL;
  dtx__arena_init(&s->arena, s->first, sizeof s->first);
  /* The operands are views: copy the spec's payload once. */
  uint8_t *copy = spec->len ? dtx__arena_alloc(&s->arena, spec->len) : NULL;
  int rc = 0;
  if (spec->len && !copy) {
    rc = oom();
  } else {
    if (spec->len)
      memcpy(copy, spec->data, spec->len);
    dtx__bval_t top = {spec->type, spec->len, copy};
    comp_t c;
    c.s = s;
    c.w.n = 0;
    c.w.buf[0] = '\0';
    rc = sch_compile(&c, &top, &s->root);
  }
  if (rc < 0) {
    dtx__bschema_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* ---- matching ------------------------------------------------------------ */

/* The instance path and the keyword path of the check in progress; quiet
 * checks (inside anyOf, oneOf, not, and the first pass) build neither. */
typedef struct mctx {
  dtx__where_t ip, kp;
  char *why;
  size_t whylen;
  int quiet;
} mctx_t;

static int fail(mctx_t *m, const char *kw, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(mctx_t *m, const char *kw, const char *fmt, ...) {
  if (m->quiet || !m->why)
    return 0;
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  size_t save = dtx__where_push(&m->kp, "", kw, 0);
  snprintf(m->why, m->whylen, "%s %s ($jsonSchema %s)",
           m->ip.n ? m->ip.buf : "document", msg, m->kp.buf);
  dtx__where_pop(&m->kp, save);
  return 0;
}

/* Compact text of a value for a message, cut to fit: the json_t engine's
 * text through the bridge, so a message reads the same in both engines;
 * a Decimal128 prints as its digits, a bound reads better so than as
 * {"$numberDecimal": ...}.  Only a failing check with a reason buffer
 * gets here. */
static void value_text(const dtx__bval_t *v, char *buf, size_t n) {
  char *t = NULL;
  if (v->type == BSON_TYPE_DECIMAL128) {
    char d[BSON_DECIMAL128_STRING];
    bson_decimal128_t x = dtx__bval_dec(v);
    bson_decimal128_to_string(&x, d);
    t = strdup(d);
  } else if (v->type == BSON_TYPE_DOUBLE && !isfinite(dtx__bval_double(v))) {
    /* Not {"$numberDouble": "NaN"}: a bound reads as a number. */
    double x = dtx__bval_double(v);
    t = strdup(isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity");
  } else {
    json_t *j = NULL;
    if (dtx__bval_to_json(v, &j) == 0)
      t = dtx__json_dump(j);
    json_decref(j);
  }
  if (!t) {
    snprintf(buf, n, "?");
    return;
  }
  if (strlen(t) >= n && n > 4)
    snprintf(buf, n, "%.*s...", (int)(n - 4), t);
  else
    snprintf(buf, n, "%s", t);
  free(t);
}

static size_t utf8_chars(const char *s, size_t len) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += ((unsigned char)s[i] & 0xC0) != 0x80;
  return n;
}

static int val_cmp(const void *a, const void *b) {
  return dtx__bval_cmp(a, b);
}

/* 1 when some two elements are equal (dtx__bval_cmp), in O(n log n); -1
 * when out of memory (the caller fails closed). */
static int has_duplicates(const dtx__bval_t *arr) {
  uint32_t n = count_elems(arr);
  if (n < 2)
    return 0;
  dtx__bval_t *p = malloc(n * sizeof *p);
  if (!p)
    return -1;
  uint32_t len, off = 0, i = 0;
  const uint8_t *d = dtx__bval_doc(arr, &len);
  dtx__belem_t e;
  while (dtx__belem_next(d, len, &off, &e))
    p[i++] = e.v;
  qsort(p, n, sizeof *p, val_cmp);
  int dup = 0;
  for (i = 1; i < n && !dup; i++)
    dup = dtx__bval_cmp(&p[i - 1], &p[i]) == 0;
  free(p);
  return dup;
}

static int check(const bsch_t *s, const dtx__bval_t *v, mctx_t *m);

static int quietly(const bsch_t *s, const dtx__bval_t *v, mctx_t *m) {
  int q = m->quiet;
  m->quiet = 1;
  int ok = check(s, v, m);
  m->quiet = q;
  return ok;
}

/* The quiet pass's object check: one walk of the document, each field
 * looked up in the name table, where the loud pass below finds each name
 * by a walk of its own (O(names x fields), 31 % of the rules corpus's
 * instructions).  A quiet check only answers yes or no, so the order of
 * the checks, which decides the loud pass's message, does not matter
 * here.  A field repeated in raw BSON is judged at its first place, as
 * dtx__belem_find finds it. */
static int check_object_quiet(const bsch_t *s, const uint8_t *d, uint32_t len,
                              mctx_t *m) {
  uint64_t seen = 0;
  size_t required = 0;
  uint32_t off = 0;
  dtx__belem_t f;
  while (dtx__belem_next(d, len, &off, &f)) {
    const bname_t *e = bname_find(s, f.key, f.keylen);
    if (!e) {
      if (s->addl == 0)
        return 0;
      continue;
    }
    uint64_t bit = (uint64_t)1 << (e - s->index);
    if (seen & bit)
      continue;
    seen |= bit;
    required += (size_t)e->required;
    if (e->prop >= 0 && !check(s->props[e->prop], &f.v, m))
      return 0;
  }
  return required == s->nrequired;
}

static int check_object(const bsch_t *s, const dtx__bval_t *v, mctx_t *m) {
  uint32_t len;
  const uint8_t *d = dtx__bval_doc(v, &len);
  dtx__belem_t f;
  if (m->quiet && s->index)
    return check_object_quiet(s, d, len, m);
  for (size_t i = 0; i < s->nrequired; i++)
    if (!dtx__belem_find(d, len, s->required[i], strlen(s->required[i]), &f))
      return fail(m, "required", "is missing required field '%s'",
                  s->required[i]);
  for (size_t i = 0; i < s->nprops; i++) {
    if (!dtx__belem_find(d, len, s->pnames[i], strlen(s->pnames[i]), &f))
      continue;
    size_t si = m->quiet ? 0 : dtx__where_push(&m->ip, "", s->pnames[i], 0);
    size_t sk = m->quiet ? 0 : dtx__where_push(&m->kp, "properties.",
                                          s->pnames[i], 0);
    int ok = check(s->props[i], &f.v, m);
    if (!m->quiet) {
      dtx__where_pop(&m->ip, si);
      dtx__where_pop(&m->kp, sk);
    }
    if (!ok)
      return 0;
  }
  if (s->addl == 0) {
    uint32_t off = 0;
    while (dtx__belem_next(d, len, &off, &f)) {
      size_t i = 0;
      while (i < s->nprops && strcmp(s->pnames[i], f.key) != 0)
        i++;
      if (i == s->nprops)
        return fail(m, "additionalProperties",
                    "has field '%.60s', which is not in properties", f.key);
    }
  }
  return 1;
}

static int check_array(const bsch_t *s, const dtx__bval_t *v, mctx_t *m) {
  int64_t n = count_elems(v);
  if (s->minitems != UNSET && n < s->minitems)
    return fail(m, "minItems", "has %" PRId64 " items, fewer than %" PRId64, n,
                s->minitems);
  if (s->maxitems != UNSET && n > s->maxitems)
    return fail(m, "maxItems", "has %" PRId64 " items, more than %" PRId64, n,
                s->maxitems);
  if (s->unique) {
    int dup = has_duplicates(v);
    if (dup)
      return fail(m, "uniqueItems", "%s",
                  dup < 0 ? "could not be checked (out of memory)"
                          : "has duplicate items");
  }
  if (s->items) {
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(v, &len);
    dtx__belem_t e;
    for (size_t i = 0; dtx__belem_next(d, len, &off, &e); i++) {
      size_t si = m->quiet ? 0 : dtx__where_push(&m->ip, "", NULL, i);
      size_t sk = m->quiet ? 0 : dtx__where_push(&m->kp, "", "items", 0);
      int ok = check(s->items, &e.v, m);
      if (!m->quiet) {
        dtx__where_pop(&m->ip, si);
        dtx__where_pop(&m->kp, sk);
      }
      if (!ok)
        return 0;
    }
  }
  return 1;
}

static int is_nan(const dtx__bval_t *v) {
  if (v->type == BSON_TYPE_DOUBLE)
    return isnan(dtx__bval_double(v));
  if (v->type == BSON_TYPE_DECIMAL128)
    return dtx__dec_is_nan(dtx__bval_dec(v));
  return 0;
}

/* Whether v is within bound (dir 1: v >= bound, or > when exclusive;
 * dir -1: v <= bound, or <).  NaN is within a bound only when the bound
 * is NaN and inclusive: MongoDB compiles minimum to $gte, and NaN $gte
 * NaN only (bfilter.h). */
static int within(const dtx__bval_t *v, const dtx__bval_t *bound, int dir,
                  int exclusive, int *equal) {
  int vn = is_nan(v), bn = is_nan(bound);
  *equal = vn && bn;
  if (vn || bn)
    return vn && bn && !exclusive;
  int c = dtx__bval_cmp(v, bound) * dir;
  *equal = c == 0;
  return c > 0 || (c == 0 && !exclusive);
}

static int check_number(const bsch_t *s, const dtx__bval_t *v, mctx_t *m) {
  char t[64];
  int eq;
  if (s->minimum.type && !within(v, &s->minimum, 1, s->exmin, &eq)) {
    if (m->quiet || !m->why)
      return 0;
    value_text(&s->minimum, t, sizeof t);
    return fail(m, s->exmin && eq ? "exclusiveMinimum" : "minimum",
                "must be %s %s", s->exmin ? ">" : ">=", t);
  }
  if (s->maximum.type && !within(v, &s->maximum, -1, s->exmax, &eq)) {
    if (m->quiet || !m->why)
      return 0;
    value_text(&s->maximum, t, sizeof t);
    return fail(m, s->exmax && eq ? "exclusiveMaximum" : "maximum",
                "must be %s %s", s->exmax ? "<" : "<=", t);
  }
  return 1;
}

static int check_string(const bsch_t *s, const dtx__bval_t *v, mctx_t *m) {
  uint32_t n;
  const char *str = dtx__bval_str(v, &n);
  if (s->pattern) {
    /* A match PCRE2 could not finish refuses the document (schema.c). */
    int r = dtx__regex_match(s->pattern, str, n);
    if (r == 0)
      return fail(m, "pattern", "does not match /%.60s/", s->pattern_text);
    if (r < 0)
      return fail(m, "pattern", "could not be matched against /%.60s/ "
                  "within PCRE2's limits", s->pattern_text);
  }
  if (s->minlen == UNSET && s->maxlen == UNSET)
    return 1;
  int64_t len = (int64_t)utf8_chars(str, n);
  if (s->minlen != UNSET && len < s->minlen)
    return fail(m, "minLength",
                "is %" PRId64 " characters, shorter than %" PRId64, len,
                s->minlen);
  if (s->maxlen != UNSET && len > s->maxlen)
    return fail(m, "maxLength",
                "is %" PRId64 " characters, longer than %" PRId64, len,
                s->maxlen);
  return 1;
}

/* The kinds v is, for bsonType/type: an integer, int32 or int64, by its
 * value (bdoc.h's dtx__bval_judged_type) as schema.c judges a JSON one --
 * "long" always, "int" too when it fits in 32 bits. */
static unsigned kind_bits(const dtx__bval_t *v) {
  bson_type_t t = dtx__bval_judged_type(v);
  if (t == BSON_TYPE_INT32)
    return T_BIT(BSON_TYPE_INT32) | T_BIT(BSON_TYPE_INT64);
  return type_bit(t);
}

static int check(const bsch_t *s, const dtx__bval_t *v, mctx_t *m) {
  if (s->types && !(kind_bits(v) & s->types))
    return fail(m, s->tkw, "is %s, must be %s",
                kind_bits(v) & T_BIT(BSON_TYPE_INT64)
                    ? "long"
                    : dtx__btype_name(v->type),
                s->tnames);
  if (s->enumv.type) {
    uint32_t len, off = 0;
    const uint8_t *d = dtx__bval_doc(&s->enumv, &len);
    dtx__belem_t e;
    int found = 0;
    while (!found && dtx__belem_next(d, len, &off, &e))
      found = dtx__bval_cmp(v, &e.v) == 0;
    if (!found) {
      if (m->quiet || !m->why)
        return 0;
      char t[120];
      value_text(&s->enumv, t, sizeof t);
      return fail(m, "enum", "must be one of %s", t);
    }
  }
  if (v->type == BSON_TYPE_DOCUMENT && !check_object(s, v, m))
    return 0;
  if (v->type == BSON_TYPE_ARRAY && !check_array(s, v, m))
    return 0;
  if (dtx__bval_is_number(v) && !check_number(s, v, m))
    return 0;
  if (v->type == BSON_TYPE_UTF8 && !check_string(s, v, m))
    return 0;
  for (size_t i = 0; i < s->nall; i++) {
    size_t sk = m->quiet ? 0 : dtx__where_push(&m->kp, "", "allOf", 0);
    if (!m->quiet)
      dtx__where_push(&m->kp, "", NULL, i);
    int ok = check(s->allof[i], v, m);
    if (!m->quiet)
      dtx__where_pop(&m->kp, sk);
    if (!ok)
      return 0;
  }
  if (s->nany) {
    size_t i = 0;
    while (i < s->nany && !quietly(s->anyof[i], v, m))
      i++;
    if (i == s->nany)
      return fail(m, "anyOf", "matches none of the %zu schemas of anyOf",
                  s->nany);
  }
  if (s->none) {
    size_t hits = 0;
    for (size_t i = 0; i < s->none; i++)
      hits += (size_t)quietly(s->oneof[i], v, m);
    if (hits != 1)
      return fail(m, "oneOf",
                  "matches %zu of the %zu schemas of oneOf, not exactly one",
                  hits, s->none);
  }
  if (s->not_ && quietly(s->not_, v, m))
    return fail(m, "not", "matches the schema of not");
  return 1;
}

int dtx__bschema_match_val(const dtx__bschema_t *s, const dtx__bval_t *v,
                           char *why, size_t whylen) {
  /* As schema.c: a quiet pass first (most writes pass and need no
   * paths), then, on a failure, a second pass that says where and why. */
  mctx_t m;
  m.ip.n = m.kp.n = 0;
  m.ip.buf[0] = m.kp.buf[0] = '\0';
  m.why = NULL;
  m.whylen = 0;
  m.quiet = 1;
  if (whylen)
    why[0] = '\0';
  if (check(s->root, v, &m))
    return 1;
  if (!whylen)
    return 0;
  m.quiet = 0;
  m.why = why;
  m.whylen = whylen;
  return check(s->root, v, &m);
}

int dtx__bschema_match(const dtx__bschema_t *s, const uint8_t *doc,
                       uint32_t len, char *why, size_t whylen) {
  dtx__bval_t v = dtx__bval_of_doc(doc, len);
  return dtx__bschema_match_val(s, &v, why, whylen);
}
