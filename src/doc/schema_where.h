/* schema_where.h -- where a $jsonSchema compile or check is, for its
 * messages: "" at the top, then "properties.balance", "items",
 * "anyOf.1" ...  Shared by the json_t engine's schema.c and the BSON
 * engine's bschema.c, so both name a place the same way. */
#ifndef DTX_SCHEMA_WHERE_H
#define DTX_SCHEMA_WHERE_H

#include <stddef.h>

typedef struct dtx__where {
  char buf[256];
  size_t n;
} dtx__where_t;

/* Appends "." (unless empty), then prefix and s, or, when s is NULL, the
 * index i, truncating at the buffer's end; returns what dtx__where_pop
 * restores. */
size_t dtx__where_push(dtx__where_t *w, const char *prefix, const char *s,
                       size_t i);
void dtx__where_pop(dtx__where_t *w, size_t save);
/* The place, or "(top)" when empty. */
const char *dtx__where_at(const dtx__where_t *w);
/* DTX_EBADQUERY "$jsonSchema at <where>: <fmt ...>". */
int dtx__where_bad(const dtx__where_t *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
