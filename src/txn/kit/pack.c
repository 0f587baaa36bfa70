/* pack.c -- dtx__pack: the documents of a pattern's steps (filters,
 * updates, new items) built from a format, as jansson's json_pack does,
 * at half its cost.
 *
 * Every step of a transfer builds a filter and an update, and under
 * callgrind json_pack was 7.7 % of a batched transfer's instructions;
 * about half of that was json_pack checking each key and string for
 * valid UTF-8 one character at a time (the same objects built by hand
 * with the checking setters cost as much; with the unchecked ones, half).
 * dtx__pack takes json_pack's format (the subset below) and scans each
 * key and string once for bytes above 0x7f: pure ASCII -- every id
 * (dtx__check_ident), state and field name of the patterns -- goes in
 * unchecked, anything else through jansson's checking constructors, so
 * invalid UTF-8 is still refused, never stored.
 *
 * Format (json_pack's meaning; ':' ',' and white space are ignored):
 *   {...}  object of key/value pairs, keys given as s
 *   [...]  array
 *   s      const char *: a string (NULL: error); s? NULL: null
 *   o      json_t *, the reference stolen (NULL: error); o? NULL: null
 *   O      json_t *, a new reference taken (NULL: error); O? NULL: null
 *   I      json_int_t    i  int    b  int, as a boolean    n  null
 * Anything else is a program error (DTX_ASSERT: an abort, in any build).
 * On any error the result is NULL, and every o argument -- also those
 * after the failing one -- has been released: the caller gave them away
 * in every case, as the step builders assume. */
#include <stdarg.h>
#include <string.h>

#include "txn/kit/kit.h"
#include "util/assert.h"

typedef struct pk {
  const char *f;
  va_list ap;
  int err; /* a value failed: go on only to consume (and release) args */
} pk_t;

static void skip(pk_t *p) {
  while (*p->f == ' ' || *p->f == ':' || *p->f == ',' || *p->f == '\t' ||
         *p->f == '\n')
    p->f++;
}

static int ascii(const char *s) {
  for (const unsigned char *u = (const unsigned char *)s; *u; u++)
    if (*u >= 0x80)
      return 0;
  return 1;
}

static json_t *str(const char *s) {
  return ascii(s) ? json_string_nocheck(s) : json_string(s);
}

/* Is the next format character '?' (then it is consumed)? */
static int nullable(pk_t *p) {
  if (*p->f != '?')
    return 0;
  p->f++;
  return 1;
}

static json_t *value(pk_t *p);

static json_t *object(pk_t *p) {
  json_t *o = p->err ? NULL : json_object();
  if (!o)
    p->err = 1;
  for (;;) {
    skip(p);
    if (*p->f == '}') {
      p->f++;
      break;
    }
    if (*p->f != 's') { /* keys are s; "}" missing or another format */
      DTX_ASSERT(!"bad object format", "kit.pack.format");
      p->err = 1;
      break;
    }
    p->f++;
    const char *k = va_arg(p->ap, const char *);
    json_t *v = value(p);
    if (!k || !v || p->err) {
      json_decref(v);
      p->err = 1;
    } else if (ascii(k) ? json_object_set_new_nocheck(o, k, v)
                        : json_object_set_new(o, k, v)) { /* v released */
      p->err = 1;
    }
  }
  if (p->err) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static json_t *array(pk_t *p) {
  json_t *a = p->err ? NULL : json_array();
  if (!a)
    p->err = 1;
  for (;;) {
    skip(p);
    if (*p->f == ']') {
      p->f++;
      break;
    }
    if (!*p->f) {
      DTX_ASSERT(!"bad array format", "kit.pack.format");
      p->err = 1;
      break;
    }
    json_t *v = value(p);
    if (!v || p->err) {
      json_decref(v);
      p->err = 1;
    } else if (json_array_append_new(a, v)) { /* v released by it */
      p->err = 1;
    }
  }
  if (p->err) {
    json_decref(a);
    return NULL;
  }
  return a;
}

/* The next value of the format, or NULL (p->err set).  Once p->err is
 * set it still consumes its arguments, releasing an o. */
static json_t *value(pk_t *p) {
  skip(p);
  char c = *p->f ? *p->f++ : '\0';
  json_t *v = NULL;
  switch (c) {
  case '{':
    return object(p);
  case '[':
    return array(p);
  case 's': {
    const char *s = va_arg(p->ap, const char *);
    int q = nullable(p);
    if (!p->err)
      v = s ? str(s) : q ? json_null() : NULL;
    break;
  }
  case 'o': {
    json_t *j = va_arg(p->ap, json_t *);
    int q = nullable(p);
    if (p->err) {
      json_decref(j);
      return NULL;
    }
    v = j ? j : q ? json_null() : NULL;
    break;
  }
  case 'O': {
    json_t *j = va_arg(p->ap, json_t *);
    int q = nullable(p);
    if (!p->err)
      v = j ? json_incref(j) : q ? json_null() : NULL;
    break;
  }
  case 'I': {
    json_int_t i = va_arg(p->ap, json_int_t);
    if (!p->err)
      v = json_integer(i);
    break;
  }
  case 'i': {
    int i = va_arg(p->ap, int);
    if (!p->err)
      v = json_integer(i);
    break;
  }
  case 'b': {
    int b = va_arg(p->ap, int);
    if (!p->err)
      v = json_boolean(b);
    break;
  }
  case 'n':
    if (!p->err)
      v = json_null();
    break;
  default:
    DTX_ASSERT(!"unsupported format character", "kit.pack.format");
    p->f = p->f + strlen(p->f); /* the rest cannot be read: stop */
    break;
  }
  if (!v)
    p->err = 1;
  return v;
}

json_t *dtx__pack(const char *fmt, ...) {
  pk_t p = {.f = fmt};
  va_start(p.ap, fmt);
  json_t *v = value(&p);
  skip(&p);
  if (*p.f) { /* more than one value */
    DTX_ASSERT(!"trailing format", "kit.pack.format");
    p.err = 1;
  }
  va_end(p.ap);
  if (p.err) {
    json_decref(v);
    return NULL;
  }
  return v;
}
