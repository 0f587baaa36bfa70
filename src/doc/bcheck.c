/* bcheck.c -- the stored-body check: is this one well-formed BSON
 * document that doctx may hold? (bdoc.h, dtx__bson_check)
 *
 * Every read of a stored body pays for this check, and after it the raw
 * reader (dtx__belem_next) trusts the bytes, so it is ONE walk that checks
 * everything at once: lengths, types, UTF-8, names, duplicates, depth.
 * An earlier attempt ran bson_validate and then walked again and spent
 * 73-90% of a step there.
 *
 * The walk is iterative (a stack of DTX_MAX_DEPTH frames on the C stack),
 * allocates nothing for ordinary documents, and for duplicate names uses
 * a linear look over a document's first few names, then one hash table
 * shared by every document of the walk (keyed by the document's number
 * and the name), so a document of 100,000 names costs O(n), not O(n^2).
 *
 * Stricter than bson_validate (with its UTF-8 flags) in a few ways the
 * engine relies on: booleans are 0 or 1, arrays are named "0", "1", ...
 * in order (the path code finds element i by its position), no name
 * repeats within a document, nesting is at most DTX_MAX_DEPTH, the size at
 * most DTX__DOC_MAX, and regex options are BSON's letters in order.  NUL
 * bytes inside strings are allowed (BSON strings carry their length and
 * MongoDB allows them); inside names they cannot occur (a name ends at
 * its NUL). */
#include "doc/bdoc.h"
#include "doc/ejson_int.h"
#include "util/buf.h"
#include "util/err.h"

#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ------------------------------------------------------------------ */

size_t dtx__utf8_valid_prefix(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    /* ASCII fast path: 8 bytes at a time while no byte has its top bit */
    while (i + 8 <= n) {
      uint64_t w;
      memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ULL)
        break;
      i += 8;
    }
    if (i >= n)
      break;
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    /* The second byte's range depends on the first (Unicode's table 3-7):
     * this refuses overlong forms, surrogates and > U+10FFFF at once. */
    uint8_t lo = 0x80, hi = 0xBF;
    size_t need;
    if (c >= 0xC2 && c <= 0xDF)
      need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0)
        lo = 0xA0;
      else if (c == 0xED)
        hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0)
        lo = 0x90;
      else if (c == 0xF4)
        hi = 0x8F;
    } else
      return i;
    if (n - i <= need)
      return i;
    if (s[i + 1] < lo || s[i + 1] > hi)
      return i;
    for (size_t k = 2; k <= need; k++)
      if ((s[i + k] & 0xC0) != 0x80)
        return i;
    i += need + 1;
  }
  return n;
}

/* ---- the walk ------------------------------------------------------------------ */

#define STR_(x) #x
#define STR(x) STR_(x)
#define DEPTH_TEXT STR(DTX_MAX_DEPTH)

enum { SMALL = 8 }; /* names looked at linearly before the hash takes over */

typedef struct frame {
  uint32_t end;  /* offset of the document's trailing NUL */
  uint32_t id;   /* the document's number in this walk (hash key) */
  uint32_t n;    /* elements so far */
  uint32_t keys[SMALL]; /* offsets of its first names */
  int array;
} frame_t;

typedef struct slot {
  uint32_t id;  /* document number */
  uint32_t off; /* name offset; 0 = empty (no name starts at byte 0) */
} slot_t;

typedef struct walk {
  const uint8_t *d;
  size_t len;
  int code;
  const char *what;
  slot_t small[64]; /* the hash's first home, on the stack */
  slot_t *tab;
  size_t cap, used;
} walk_t;

static int bad(walk_t *w, size_t at, const char *reason) {
  return dtx__err(w->code, "%s is not a valid document: %s at byte %zu",
                  w->what, reason, at);
}

static uint32_t name_hash(const uint8_t *k, uint32_t id) {
  uint32_t h = 2166136261u ^ (id * 0x9E3779B1u); /* FNV-1a, seeded */
  for (; *k; k++)
    h = (h ^ *k) * 16777619u;
  return h;
}

/* Inserts (id, off) unless that document already has the name: 1 when it
 * was new, 0 for a duplicate, -1 out of memory. */
static int hash_add(walk_t *w, uint32_t id, uint32_t off) {
  if (!w->cap) { /* first use: most documents never get here */
    memset(w->small, 0, sizeof w->small);
    w->tab = w->small;
    w->cap = sizeof w->small / sizeof w->small[0];
  }
  if ((w->used + 1) * 2 > w->cap) {
    size_t ncap = w->cap * 2;
    slot_t *nt = calloc(ncap, sizeof *nt);
    if (!nt)
      return -1;
    for (size_t i = 0; i < w->cap; i++) {
      if (!w->tab[i].off)
        continue;
      size_t j = name_hash(w->d + w->tab[i].off, w->tab[i].id) & (ncap - 1);
      while (nt[j].off)
        j = (j + 1) & (ncap - 1);
      nt[j] = w->tab[i];
    }
    if (w->tab != w->small)
      free(w->tab);
    w->tab = nt;
    w->cap = ncap;
  }
  const char *k = (const char *)w->d + off;
  size_t j = name_hash(w->d + off, id) & (w->cap - 1);
  while (w->tab[j].off) {
    if (w->tab[j].id == id && !strcmp(k, (const char *)w->d + w->tab[j].off))
      return 0;
    j = (j + 1) & (w->cap - 1);
  }
  w->tab[j].id = id;
  w->tab[j].off = off;
  w->used++;
  return 1;
}

/* The name at off (klen bytes) against the frame's earlier names: 0, or
 * an error. */
static int check_name(walk_t *w, frame_t *f, uint32_t off, size_t klen) {
  const char *k = (const char *)w->d + off;
  if (f->array) {
    /* "0", "1", ... in order: names that are their index, so distinct */
    char want[24];
    size_t wl = dtx__itoa((long long)f->n, want);
    if (wl != klen || memcmp(want, k, wl))
      return bad(w, off, "array element not named by its index");
    return 0;
  }
  if (f->n < SMALL) {
    for (uint32_t i = 0; i < f->n; i++)
      if (!strcmp(k, (const char *)w->d + f->keys[i]))
        return bad(w, off, "duplicate name");
    f->keys[f->n] = off;
    return 0;
  }
  if (f->n == SMALL) /* move the first names into the hash */
    for (uint32_t i = 0; i < SMALL; i++)
      if (hash_add(w, f->id, f->keys[i]) < 0)
        return dtx__err(DTX_ENOMEM, "out of memory checking %s", w->what);
  int r = hash_add(w, f->id, off);
  if (r < 0)
    return dtx__err(DTX_ENOMEM, "out of memory checking %s", w->what);
  return r ? 0 : bad(w, off, "duplicate name");
}

static int read_i32(const uint8_t *p) {
  uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
               (uint32_t)p[3] << 24;
  return (int32_t)u;
}

/* A BSON string (int32 length counting the NUL, bytes, NUL) at v that
 * must end by lim: its total size in *sz, or an error. */
static int check_string(walk_t *w, size_t v, size_t lim, size_t *sz) {
  if (lim - v < 5)
    return bad(w, v, "string past the end of its document");
  int32_t l = read_i32(w->d + v);
  if (l < 1 || (size_t)l > lim - v - 4)
    return bad(w, v, "string length out of range");
  if (w->d[v + 4 + (size_t)l - 1] != 0)
    return bad(w, v, "string not terminated by NUL");
  size_t u = dtx__utf8_valid_prefix(w->d + v + 4, (size_t)l - 1);
  if (u != (size_t)l - 1)
    return bad(w, v + 4 + u, "invalid UTF-8 in string");
  *sz = 4 + (size_t)l;
  return 0;
}

/* A cstring at v ending by lim: its size with the NUL, or an error. */
static int check_cstring(walk_t *w, size_t v, size_t lim, size_t *sz,
                         const char *what) {
  const uint8_t *z = memchr(w->d + v, 0, lim - v);
  if (!z)
    return bad(w, v, what);
  size_t n = (size_t)(z - (w->d + v));
  size_t u = dtx__utf8_valid_prefix(w->d + v, n);
  if (u != n)
    return bad(w, v + u, "invalid UTF-8");
  *sz = n + 1;
  return 0;
}

/* Opens the embedded document at v (ending by lim) as frame f. */
static int open_doc(walk_t *w, frame_t *f, size_t v, size_t lim, int array,
                    uint32_t id) {
  if (lim - v < 5)
    return bad(w, v, "document past the end of its parent");
  int32_t l = read_i32(w->d + v);
  if (l < 5 || (size_t)l > lim - v)
    return bad(w, v, "document length out of range");
  if (w->d[v + (size_t)l - 1] != 0)
    return bad(w, v + (size_t)l - 1, "document not terminated by NUL");
  f->end = (uint32_t)(v + (size_t)l - 1);
  f->id = id;
  f->n = 0;
  f->array = array;
  return 0;
}

static int walk_doc(walk_t *w) {
  frame_t st[DTX_MAX_DEPTH];
  int top = 0;
  uint32_t ids = 0;
  int rc = open_doc(w, &st[0], 0, w->len, 0, ids++);
  if (rc)
    return rc;
  if ((size_t)st[0].end + 1 != w->len)
    return bad(w, 0, "document length does not match its bytes");
  size_t pos = 4;
  for (;;) {
    frame_t *f = &st[top];
    if (pos == f->end) { /* this document is complete */
      pos++;
      if (top-- == 0)
        return 0;
      continue;
    }
    size_t at = pos;
    uint8_t t = w->d[pos];
    if (t == 0)
      return bad(w, at, "document ends before its length");
    /* the name: a cstring before the document's terminator */
    const uint8_t *z = memchr(w->d + pos + 1, 0, f->end - (pos + 1));
    if (!z)
      return bad(w, at, "name not terminated");
    size_t klen = (size_t)(z - (w->d + pos + 1));
    size_t u = dtx__utf8_valid_prefix(w->d + pos + 1, klen);
    if (u != klen)
      return bad(w, pos + 1 + u, "invalid UTF-8 in name");
    if ((rc = check_name(w, f, (uint32_t)(pos + 1), klen)))
      return rc;
    f->n++;
    size_t v = pos + 2 + klen, lim = f->end, sz = 0, fixed = 0;
    switch (t) {
    case BSON_TYPE_DOUBLE:
    case BSON_TYPE_DATE_TIME:
    case BSON_TYPE_TIMESTAMP:
    case BSON_TYPE_INT64:
      fixed = 8;
      break;
    case BSON_TYPE_INT32:
      fixed = 4;
      break;
    case BSON_TYPE_OID:
      fixed = 12;
      break;
    case BSON_TYPE_DECIMAL128:
      fixed = 16;
      break;
    case BSON_TYPE_UNDEFINED:
    case BSON_TYPE_NULL:
    case BSON_TYPE_MINKEY:
    case BSON_TYPE_MAXKEY:
      break;
    case BSON_TYPE_BOOL:
      if (lim - v < 1)
        return bad(w, v, "value past the end of its document");
      if (w->d[v] > 1)
        return bad(w, v, "boolean neither 0 nor 1");
      fixed = 1;
      break;
    case BSON_TYPE_UTF8:
    case BSON_TYPE_CODE:
    case BSON_TYPE_SYMBOL:
      if ((rc = check_string(w, v, lim, &sz)))
        return rc;
      break;
    case BSON_TYPE_DBPOINTER:
      if ((rc = check_string(w, v, lim, &sz)))
        return rc;
      fixed = 12;
      break;
    case BSON_TYPE_BINARY: {
      if (lim - v < 5)
        return bad(w, v, "binary past the end of its document");
      int32_t l = read_i32(w->d + v);
      if (l < 0 || (size_t)l > lim - v - 5)
        return bad(w, v, "binary length out of range");
      if (w->d[v + 4] == BSON_SUBTYPE_BINARY_DEPRECATED &&
          (l < 4 || read_i32(w->d + v + 5) != l - 4))
        return bad(w, v, "binary subtype 2 with a wrong inner length");
      sz = 5 + (size_t)l;
      break;
    }
    case BSON_TYPE_REGEX: {
      size_t s2 = 0;
      if ((rc = check_cstring(w, v, lim, &sz, "regex pattern not terminated")))
        return rc;
      if ((rc = check_cstring(w, v + sz, lim, &s2,
                              "regex options not terminated")))
        return rc;
      /* BSON's letters, each once, in alphabetical order */
      const char *o = (const char *)w->d + v + sz, *allowed = DTX__BREGEX_OPTS;
      for (; *o; o++) {
        const char *p = strchr(allowed, *o);
        if (!p)
          return bad(w, v + sz, "regex options not BSON's letters in order");
        allowed = p + 1;
      }
      sz += s2;
      break;
    }
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
    case BSON_TYPE_CODEWSCOPE: {
      size_t dv = v;
      if (t == BSON_TYPE_CODEWSCOPE) {
        /* int32 total, string code, document scope: exactly total bytes */
        if (lim - v < 4 + 5 + 5)
          return bad(w, v, "code with scope past the end of its document");
        int32_t tl = read_i32(w->d + v);
        if (tl < 14 || (size_t)tl > lim - v)
          return bad(w, v, "code with scope length out of range");
        size_t ssz;
        if ((rc = check_string(w, v + 4, v + (size_t)tl, &ssz)))
          return rc;
        dv = v + 4 + ssz;
        lim = v + (size_t)tl;
        if (lim - dv < 5 || (size_t)read_i32(w->d + dv) != lim - dv)
          return bad(w, dv, "code with scope length does not match its parts");
      }
      if (top + 1 >= DTX_MAX_DEPTH)
        return bad(w, at, "nesting deeper than " DEPTH_TEXT " levels");
      if ((rc = open_doc(w, &st[top + 1], dv, lim, t == BSON_TYPE_ARRAY,
                         ids++)))
        return rc;
      top++;
      pos = dv + 4;
      continue;
    }
    default:
      return bad(w, at, "unknown type");
    }
    if (lim - v - sz < fixed)
      return bad(w, v, "value past the end of its document");
    pos = v + sz + fixed;
  }
}

int dtx__bson_check(const uint8_t *data, size_t len, int code,
                    const char *what) {
  walk_t w;
  w.d = data;
  w.len = len;
  w.code = code;
  w.what = what ? what : "the document";
  if (!data || len < 5)
    return bad(&w, 0, "shorter than 5 bytes");
  if (len > DTX__DOC_MAX)
    return bad(&w, 0, "larger than 16 MiB");
  w.tab = w.small;
  w.cap = 0;
  w.used = 0;
  int rc = walk_doc(&w);
  if (w.tab != w.small)
    free(w.tab);
  return rc;
}
