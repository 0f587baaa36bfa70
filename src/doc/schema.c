/* schema.c -- MongoDB's $jsonSchema validator keyword: the subset doctx
 * supports, compiled once and matched against documents.
 *
 * A collection validator (rules.c) may hold {"$jsonSchema": {...}}.  This
 * file turns that schema into an immutable tree of nodes, one per schema
 * object, and checks a document against it.  MongoDB implements JSON
 * Schema draft 4 with BSON types added; so does this file, for the
 * keywords listed in docs/validation.md:
 *   bsonType, type, required, properties, additionalProperties (true or
 *   false), enum, minimum, maximum, exclusiveMinimum, exclusiveMaximum
 *   (draft 4: booleans beside minimum/maximum), minLength, maxLength,
 *   items (one schema), minItems, maxItems, uniqueItems, anyOf, allOf,
 *   oneOf, not, pattern (PCRE2, unanchored, as JSON Schema), and
 *   title/description (ignored).
 * Every other keyword is refused when the schema is compiled, with
 * DTX_EBADQUERY naming it and where it was met, so that a validator never
 * silently checks less than its author wrote (patternProperties among
 * them).
 *
 * As in JSON Schema, a keyword constrains only values of the kind it is
 * about: minimum ignores strings, required ignores non-objects, and so on;
 * bsonType/type is how a schema demands a kind.  Types are those of
 * doctx's JSON documents: integers are int64, so they are BSON "long"
 * (and also "int" when they fit in 32 bits); reals are "double"; there is
 * no "decimal", "date" or "objectId", and naming one is refused.
 *
 * Matching allocates nothing but PCRE2's match data for `pattern`
 * (messages go to a caller's buffer) and never writes to the tree, so one compiled schema may be shared by threads.
 * On a mismatch the reason names the instance path, what was wrong, and
 * the keyword path inside the schema, e.g.
 *   min_balance is double, must be long or null
 *   ($jsonSchema properties.min_balance.bsonType)
 */
#include "doc/doc.h"
#include "doc/schema_where.h"
#include "util/err.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kinds of value, as bits: a schema's bsonType/type accepts a set. */
enum {
  T_OBJECT = 1 << 0,
  T_ARRAY = 1 << 1,
  T_STRING = 1 << 2,
  T_BOOL = 1 << 3,
  T_NULL = 1 << 4,
  T_INT = 1 << 5,    /* an integer within int32 */
  T_LONG = 1 << 6,   /* any integer (doctx stores int64) */
  T_DOUBLE = 1 << 7, /* a real */
  T_NUMBER = T_INT | T_LONG | T_DOUBLE,
};

typedef struct alias {
  const char *name;
  unsigned bits;
} alias_t;

static const alias_t bson_aliases[] = {
    {"object", T_OBJECT}, {"array", T_ARRAY}, {"string", T_STRING},
    {"bool", T_BOOL},     {"null", T_NULL},   {"int", T_INT},
    {"long", T_LONG},     {"double", T_DOUBLE}, {"number", T_NUMBER},
};

/* JSON Schema's own names; MongoDB has no "integer" (use bsonType). */
static const alias_t json_aliases[] = {
    {"object", T_OBJECT}, {"array", T_ARRAY},    {"string", T_STRING},
    {"boolean", T_BOOL},  {"null", T_NULL},      {"number", T_NUMBER},
};

#define UNSET (-1)

typedef struct sch sch_t;
struct sch {
  unsigned types;    /* accepted kinds; 0 = no bsonType/type */
  char tnames[96];   /* "long or null", for messages */
  const char *tkw;   /* "bsonType" or "type" */
  char **required;
  size_t nrequired;
  char **pnames;     /* properties */
  sch_t **props;
  size_t nprops;
  int addl;          /* additionalProperties: UNSET, 0 or 1 */
  json_t *enumv;     /* array, or NULL */
  json_t *minimum, *maximum;
  int exmin, exmax;
  int64_t minlen, maxlen, minitems, maxitems; /* UNSET when absent */
  dtx__regex_t *pattern; /* pattern, or NULL */
  char *pattern_text;    /* for messages */
  int unique;
  sch_t *items;
  sch_t **anyof, **allof, **oneof;
  size_t nany, nall, none;
  sch_t *not_;
};

struct dtx__schema {
  sch_t *root;
};

/* ---- freeing ---------------------------------------------------------------- */

static void sch_free(sch_t *s);

static void sch_list_free(sch_t **l, size_t n) {
  for (size_t i = 0; i < n; i++)
    sch_free(l[i]);
  free(l);
}

static void sch_free(sch_t *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->nrequired; i++)
    free(s->required[i]);
  free(s->required);
  for (size_t i = 0; i < s->nprops; i++)
    free(s->pnames[i]);
  free(s->pnames);
  sch_list_free(s->props, s->nprops);
  json_decref(s->enumv);
  json_decref(s->minimum);
  json_decref(s->maximum);
  dtx__regex_free(s->pattern);
  free(s->pattern_text);
  sch_free(s->items);
  sch_list_free(s->anyof, s->nany);
  sch_list_free(s->allof, s->nall);
  sch_list_free(s->oneof, s->none);
  sch_free(s->not_);
  free(s);
}

void dtx__schema_free(dtx__schema_t *s) {
  if (!s)
    return;
  sch_free(s->root);
  free(s);
}

/* ---- compiling -------------------------------------------------------------- */

static int sch_compile(const json_t *spec, dtx__where_t *w, sch_t **out);

/* bsonType/type: one alias or a non-empty array of distinct ones. */
static int compile_types(sch_t *s, const char *kw, const json_t *v,
                         dtx__where_t *w) {
  const alias_t *tab = strcmp(kw, "bsonType") == 0 ? bson_aliases : json_aliases;
  size_t ntab = tab == bson_aliases ? sizeof bson_aliases / sizeof *tab
                                    : sizeof json_aliases / sizeof *tab;
  if (s->tkw)
    return dtx__where_bad(w, "bsonType and type cannot both be given");
  s->tkw = kw;
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (!json_is_string(v) && !(json_is_array(v) && n > 0))
    return dtx__where_bad(w, "%s must be a string or a non-empty array of strings", kw);
  size_t tn = 0;
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
    const char *name = json_string_value(e);
    if (!name)
      return dtx__where_bad(w, "%s must be a string or a non-empty array of strings", kw);
    unsigned bits = 0;
    for (size_t k = 0; k < ntab; k++)
      if (strcmp(tab[k].name, name) == 0)
        bits = tab[k].bits;
    if (!bits) {
      if (strcmp(kw, "type") == 0 && strcmp(name, "integer") == 0)
        return dtx__where_bad(w, "type 'integer' is not supported (MongoDB's "
                      "$jsonSchema has none): use bsonType 'long' or 'int'");
      if (strcmp(kw, "bsonType") == 0 && strcmp(name, "decimal") == 0)
        return dtx__where_bad(w, "bsonType 'decimal' is not supported: doctx stores no "
                      "Decimal128 values (use long minor units)");
      return dtx__where_bad(w, "%s '%.40s' is not supported (supported: %s)", kw, name,
                 tab == bson_aliases
                     ? "object, array, string, bool, null, int, long, "
                       "double, number"
                     : "object, array, string, boolean, null, number");
    }
    for (size_t j = 0; j < i; j++)
      if (json_equal(json_array_get(v, j), e))
        return dtx__where_bad(w, "%s lists '%s' twice", kw, name);
    s->types |= bits;
    int k = snprintf(s->tnames + tn, sizeof s->tnames - tn, "%s%s",
                     i == 0 ? "" : i + 1 == n ? " or " : ", ", name);
    tn += (size_t)k;
    if (tn >= sizeof s->tnames)
      tn = sizeof s->tnames - 1;
  }
  return 0;
}

/* A non-negative integer argument (an integral real is accepted too, as
 * MongoDB does). */
static int nonneg(const json_t *v, const char *kw, dtx__where_t *w, int64_t *out) {
  if (json_is_integer(v) && json_integer_value(v) >= 0) {
    *out = json_integer_value(v);
    return 0;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d >= 0 && d < 9.2e18 && d == (double)(int64_t)d) {
      *out = (int64_t)d;
      return 0;
    }
  }
  return dtx__where_bad(w, "%s must be a non-negative integer", kw);
}

/* anyOf/allOf/oneOf: a non-empty array of schemas. */
static int compile_list(const json_t *v, const char *kw, dtx__where_t *w,
                        sch_t ***out, size_t *n) {
  if (!json_is_array(v) || json_array_size(v) == 0)
    return dtx__where_bad(w, "%s must be a non-empty array of schemas", kw);
  *out = calloc(json_array_size(v), sizeof **out);
  if (!*out)
    return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  for (size_t i = 0; i < json_array_size(v); i++) {
    size_t save = dtx__where_push(w, "", kw, 0);
    dtx__where_push(w, "", NULL, i);
    int rc = sch_compile(json_array_get(v, i), w, &(*out)[i]);
    dtx__where_pop(w, save);
    if (rc < 0)
      return rc;
    (*n)++;
  }
  return 0;
}

static int compile_required(sch_t *s, const json_t *v, dtx__where_t *w) {
  if (!json_is_array(v) || json_array_size(v) == 0)
    return dtx__where_bad(w, "required must be a non-empty array of field names");
  size_t n = json_array_size(v);
  if (!(s->required = calloc(n, sizeof *s->required)))
    return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  for (size_t i = 0; i < n; i++) {
    const json_t *e = json_array_get(v, i);
    if (!json_is_string(e))
      return dtx__where_bad(w, "required must be a non-empty array of field names");
    for (size_t j = 0; j < i; j++)
      if (json_equal(json_array_get(v, j), e))
        return dtx__where_bad(w, "required lists '%s' twice", json_string_value(e));
    if (!(s->required[s->nrequired++] = strdup(json_string_value(e))))
      return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  }
  return 0;
}

static int compile_props(sch_t *s, const json_t *v, dtx__where_t *w) {
  if (!json_is_object(v))
    return dtx__where_bad(w, "properties must be an object of schemas");
  size_t n = json_object_size(v);
  s->pnames = calloc(n + 1, sizeof *s->pnames);
  s->props = calloc(n + 1, sizeof *s->props);
  if (!s->pnames || !s->props)
    return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  const char *k;
  json_t *e;
  json_object_foreach((json_t *)v, k, e) {
    if (!(s->pnames[s->nprops] = strdup(k)))
      return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
    s->nprops++; /* counted now, so a failure below frees the name */
    size_t save = dtx__where_push(w, "properties.", k, 0);
    int rc = sch_compile(e, w, &s->props[s->nprops - 1]);
    dtx__where_pop(w, save);
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int compile_enum(sch_t *s, const json_t *v, dtx__where_t *w) {
  if (!json_is_array(v) || json_array_size(v) == 0)
    return dtx__where_bad(w, "enum must be a non-empty array");
  for (size_t i = 0; i < json_array_size(v); i++)
    for (size_t j = 0; j < i; j++)
      if (dtx__value_cmp(json_array_get(v, i), json_array_get(v, j)) == 0)
        return dtx__where_bad(w, "enum lists a value twice");
  if (!(s->enumv = json_deep_copy(v)))
    return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  return 0;
}

/* Keywords that are known but refused, with the reason. */
static int refuse(const char *kw, dtx__where_t *w) {
  return dtx__where_bad(w, "keyword '%.60s' is not supported (see docs/validation.md "
                "for the supported subset)",
             kw);
}

static int sch_compile(const json_t *spec, dtx__where_t *w, sch_t **out) {
  *out = NULL;
  if (!json_is_object(spec))
    return dtx__where_bad(w, "a schema must be an object");
  sch_t *s = calloc(1, sizeof *s);
  if (!s)
    return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  s->addl = UNSET;
  s->minlen = s->maxlen = s->minitems = s->maxitems = UNSET;
  const json_t *exmin = NULL, *exmax = NULL;
  const char *kw;
  json_t *v;
  int rc = 0;
  json_object_foreach((json_t *)spec, kw, v) {
    if (strcmp(kw, "bsonType") == 0 || strcmp(kw, "type") == 0) {
      rc = compile_types(s, kw, v, w);
    } else if (strcmp(kw, "required") == 0) {
      rc = compile_required(s, v, w);
    } else if (strcmp(kw, "properties") == 0) {
      rc = compile_props(s, v, w);
    } else if (strcmp(kw, "additionalProperties") == 0) {
      if (json_is_boolean(v))
        s->addl = json_is_true(v);
      else
        rc = dtx__where_bad(w, "additionalProperties must be true or false (a schema "
                    "there is not supported)");
    } else if (strcmp(kw, "enum") == 0) {
      rc = compile_enum(s, v, w);
    } else if (strcmp(kw, "minimum") == 0 || strcmp(kw, "maximum") == 0) {
      if (!json_is_number(v))
        rc = dtx__where_bad(w, "%s must be a number", kw);
      else if (kw[1] == 'i')
        s->minimum = json_incref(v);
      else
        s->maximum = json_incref(v);
    } else if (strcmp(kw, "exclusiveMinimum") == 0 ||
               strcmp(kw, "exclusiveMaximum") == 0) {
      if (!json_is_boolean(v))
        rc = dtx__where_bad(w, "%s must be true or false (JSON Schema draft 4, as "
                    "MongoDB)",
                 kw);
      else if (strcmp(kw, "exclusiveMinimum") == 0)
        exmin = v;
      else
        exmax = v;
    } else if (strcmp(kw, "pattern") == 0) {
      if (!json_is_string(v))
        rc = dtx__where_bad(w, "pattern must be a string (a regular expression)");
      else if (dtx__regex_compile(json_string_value(v), json_string_length(v),
                                  "", &s->pattern) < 0)
        rc = dtx__where_bad(w, "pattern: %s", dtx_errdetail());
      else if (!(s->pattern_text = strdup(json_string_value(v))))
        rc = dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
    } else if (strcmp(kw, "minLength") == 0) {
      rc = nonneg(v, kw, w, &s->minlen);
    } else if (strcmp(kw, "maxLength") == 0) {
      rc = nonneg(v, kw, w, &s->maxlen);
    } else if (strcmp(kw, "minItems") == 0) {
      rc = nonneg(v, kw, w, &s->minitems);
    } else if (strcmp(kw, "maxItems") == 0) {
      rc = nonneg(v, kw, w, &s->maxitems);
    } else if (strcmp(kw, "uniqueItems") == 0) {
      if (json_is_boolean(v))
        s->unique = json_is_true(v);
      else
        rc = dtx__where_bad(w, "uniqueItems must be true or false");
    } else if (strcmp(kw, "items") == 0) {
      if (json_is_array(v)) {
        rc = dtx__where_bad(w, "items must be one schema (an array of schemas is not "
                    "supported)");
      } else {
        size_t save = dtx__where_push(w, "", "items", 0);
        rc = sch_compile(v, w, &s->items);
        dtx__where_pop(w, save);
      }
    } else if (strcmp(kw, "anyOf") == 0) {
      rc = compile_list(v, kw, w, &s->anyof, &s->nany);
    } else if (strcmp(kw, "allOf") == 0) {
      rc = compile_list(v, kw, w, &s->allof, &s->nall);
    } else if (strcmp(kw, "oneOf") == 0) {
      rc = compile_list(v, kw, w, &s->oneof, &s->none);
    } else if (strcmp(kw, "not") == 0) {
      size_t save = dtx__where_push(w, "", "not", 0);
      rc = sch_compile(v, w, &s->not_);
      dtx__where_pop(w, save);
    } else if (strcmp(kw, "title") == 0 || strcmp(kw, "description") == 0) {
      if (!json_is_string(v))
        rc = dtx__where_bad(w, "%s must be a string", kw);
    } else {
      rc = refuse(kw, w);
    }
    if (rc < 0)
      break;
  }
  if (rc == 0 && exmin) {
    if (!s->minimum)
      rc = dtx__where_bad(w, "exclusiveMinimum needs minimum");
    s->exmin = json_is_true(exmin);
  }
  if (rc == 0 && exmax) {
    if (!s->maximum)
      rc = dtx__where_bad(w, "exclusiveMaximum needs maximum");
    s->exmax = json_is_true(exmax);
  }
  if (rc < 0) {
    sch_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int dtx__schema_compile(const json_t *spec, dtx__schema_t **out) {
  *out = NULL;
  dtx__schema_t *s = calloc(1, sizeof *s);
  if (!s)
    return dtx__err(DTX_ENOMEM, "compiling $jsonSchema");
  dtx__where_t w = {{0}, 0};
  int rc = sch_compile(spec, &w, &s->root);
  if (rc < 0) {
    free(s);
    return rc;
  }
  *out = s;
  return 0;
}

/* ---- matching ----------------------------------------------------------------- */

/* The instance path ("min_balance", "pending.3") and the keyword path
 * ("properties.min_balance.bsonType") of the check in progress.  quiet
 * checks (inside anyOf, oneOf, not) build neither, and write no reason. */
typedef struct mctx {
  dtx__where_t ip, kp;
  char *why;
  size_t whylen;
  int quiet;
} mctx_t;

static unsigned kind_bits(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return T_OBJECT;
  case JSON_ARRAY:
    return T_ARRAY;
  case JSON_STRING:
    return T_STRING;
  case JSON_INTEGER: {
    json_int_t i = json_integer_value(v);
    return T_LONG | (i >= INT32_MIN && i <= INT32_MAX ? T_INT : 0);
  }
  case JSON_REAL:
    return T_DOUBLE;
  case JSON_TRUE:
  case JSON_FALSE:
    return T_BOOL;
  default:
    return T_NULL;
  }
}

/* Records why v failed keyword kw of the schema: "<path> <msg>
 * ($jsonSchema <keyword path>)".  Returns 0 (no match). */
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

/* Compact text of a value for a message, cut to fit. */
static void value_text(const json_t *v, char *buf, size_t n) {
  char *t = dtx__json_dump(v);
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

static int ptr_cmp(const void *a, const void *b) {
  return dtx__value_cmp(*(const json_t *const *)a, *(const json_t *const *)b);
}

/* 1 when some two elements are equal (by value, as $eq), in O(n log n).
 * -1 when out of memory: then the caller fails closed. */
static int has_duplicates(const json_t *arr) {
  size_t n = json_array_size(arr);
  if (n < 2)
    return 0;
  const json_t **p = malloc(n * sizeof *p);
  if (!p)
    return -1;
  for (size_t i = 0; i < n; i++)
    p[i] = json_array_get(arr, i);
  qsort(p, n, sizeof *p, ptr_cmp);
  int dup = 0;
  for (size_t i = 1; i < n && !dup; i++)
    dup = dtx__value_cmp(p[i - 1], p[i]) == 0;
  free(p);
  return dup;
}

static int check(const sch_t *s, const json_t *v, mctx_t *m);

/* A sub-schema checked quietly: only whether it matches. */
static int quietly(const sch_t *s, const json_t *v, mctx_t *m) {
  int q = m->quiet;
  m->quiet = 1;
  int ok = check(s, v, m);
  m->quiet = q;
  return ok;
}

static int check_object(const sch_t *s, const json_t *v, mctx_t *m) {
  for (size_t i = 0; i < s->nrequired; i++)
    if (!json_object_get(v, s->required[i]))
      return fail(m, "required", "is missing required field '%s'",
                  s->required[i]);
  for (size_t i = 0; i < s->nprops; i++) {
    const json_t *f = json_object_get(v, s->pnames[i]);
    if (!f)
      continue;
    size_t si = m->quiet ? 0 : dtx__where_push(&m->ip, "", s->pnames[i], 0);
    size_t sk = m->quiet ? 0 : dtx__where_push(&m->kp, "properties.",
                                          s->pnames[i], 0);
    int ok = check(s->props[i], f, m);
    if (!m->quiet) {
      dtx__where_pop(&m->ip, si);
      dtx__where_pop(&m->kp, sk);
    }
    if (!ok)
      return 0;
  }
  if (s->addl == 0) {
    const char *k;
    json_t *f;
    json_object_foreach((json_t *)v, k, f) {
      size_t i = 0;
      while (i < s->nprops && strcmp(s->pnames[i], k) != 0)
        i++;
      if (i == s->nprops)
        return fail(m, "additionalProperties",
                    "has field '%.60s', which is not in properties", k);
    }
  }
  return 1;
}

static int check_array(const sch_t *s, const json_t *v, mctx_t *m) {
  int64_t n = (int64_t)json_array_size(v);
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
    for (size_t i = 0; i < json_array_size(v); i++) {
      size_t si = m->quiet ? 0 : dtx__where_push(&m->ip, "", NULL, i);
      size_t sk = m->quiet ? 0 : dtx__where_push(&m->kp, "", "items", 0);
      int ok = check(s->items, json_array_get(v, i), m);
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

static int check_number(const sch_t *s, const json_t *v, mctx_t *m) {
  char t[64];
  if (s->minimum) {
    int c = dtx__value_cmp(v, s->minimum);
    if (c < 0 || (c == 0 && s->exmin)) {
      value_text(s->minimum, t, sizeof t);
      return fail(m, s->exmin && c == 0 ? "exclusiveMinimum" : "minimum",
                  "must be %s %s", s->exmin ? ">" : ">=", t);
    }
  }
  if (s->maximum) {
    int c = dtx__value_cmp(v, s->maximum);
    if (c > 0 || (c == 0 && s->exmax)) {
      value_text(s->maximum, t, sizeof t);
      return fail(m, s->exmax && c == 0 ? "exclusiveMaximum" : "maximum",
                  "must be %s %s", s->exmax ? "<" : "<=", t);
    }
  }
  return 1;
}

static int check_string(const sch_t *s, const json_t *v, mctx_t *m) {
  if (s->pattern) {
    /* A match PCRE2 could not finish (its backtracking limits) refuses
     * the document: a validator that cannot tell must not let it in. */
    int r = dtx__regex_match(s->pattern, json_string_value(v),
                             json_string_length(v));
    if (r == 0)
      return fail(m, "pattern", "does not match /%.60s/", s->pattern_text);
    if (r < 0)
      return fail(m, "pattern", "could not be matched against /%.60s/ "
                  "within PCRE2's limits", s->pattern_text);
  }
  if (s->minlen == UNSET && s->maxlen == UNSET)
    return 1;
  int64_t n = (int64_t)utf8_chars(json_string_value(v), json_string_length(v));
  if (s->minlen != UNSET && n < s->minlen)
    return fail(m, "minLength", "is %" PRId64 " characters, shorter than %" PRId64,
                n, s->minlen);
  if (s->maxlen != UNSET && n > s->maxlen)
    return fail(m, "maxLength", "is %" PRId64 " characters, longer than %" PRId64,
                n, s->maxlen);
  return 1;
}

static int check(const sch_t *s, const json_t *v, mctx_t *m) {
  if (s->types && !(kind_bits(v) & s->types))
    return fail(m, s->tkw, "is %s, must be %s",
                dtx__value_type_name(v, DTX__TN_BSON), s->tnames);
  if (s->enumv) {
    size_t i;
    json_t *e;
    int found = 0;
    json_array_foreach(s->enumv, i, e) if (dtx__value_cmp(v, e) == 0) {
      found = 1;
      break;
    }
    if (!found) {
      char t[120];
      value_text(s->enumv, t, sizeof t);
      return fail(m, "enum", "must be one of %s", t);
    }
  }
  if (json_is_object(v) && !check_object(s, v, m))
    return 0;
  if (json_is_array(v) && !check_array(s, v, m))
    return 0;
  if (json_is_number(v) && !check_number(s, v, m))
    return 0;
  if (json_is_string(v) && !check_string(s, v, m))
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

int dtx__schema_match(const dtx__schema_t *s, const json_t *doc, char *why,
                      size_t whylen) {
  /* Almost every write passes, and a pass needs no "where": check
   * quietly first (no path is built), and only a failure is checked
   * again with the paths, to say where and why.  check is a pure
   * function of (schema, document), so both passes agree. */
  mctx_t m;
  m.ip.n = m.kp.n = 0;
  m.ip.buf[0] = m.kp.buf[0] = '\0';
  m.why = NULL;
  m.whylen = 0;
  m.quiet = 1;
  if (whylen)
    why[0] = '\0';
  if (check(s->root, doc, &m))
    return 1;
  if (!whylen)
    return 0;
  m.quiet = 0;
  m.why = why;
  m.whylen = whylen;
  return check(s->root, doc, &m);
}
