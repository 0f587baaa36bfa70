/* sync.h -- what the sync flag's files (src/txn/sync/) share: a rule
 * parsed and checked, the field names doctx keeps in masters and
 * dependents, and the one propagation step that both a change
 * (sync.c) and repair use.  Internal; the API is in doctx.h. */
#ifndef DTX_TXN_SYNC_H
#define DTX_TXN_SYNC_H

#include "txn/kit/kit.h"

#define DTX__SYNC_RULES "sync_rules"
#define DTX__SYNC_MAX_COPY 64

/* The fields doctx keeps (docs/sync.md): a master's version and last
 * change stamp, its flag, and a dependent's reflected version. */
#define DTX__SYNC_MASTER "_syncm"
#define DTX__SYNC_FLAG "_syncing"
#define DTX__SYNC_DEP "_sync"

/* A rule as stored, checked.  Strings are borrowed from doc, which the
 * rule holds a reference to (dtx__sync_rule_free releases it). */
typedef struct dtx__sync_rule {
  json_t *doc;
  const char *name, *master, *dependents, *link;
  size_t ncopy;
  const char *src[DTX__SYNC_MAX_COPY], *dst[DTX__SYNC_MAX_COPY];
  char vpath[160];  /* "_syncm.NAME.v" */
  char spath[160];  /* "_syncm.NAME.stamp" */
  char fpath[160];  /* "_syncing.NAME" */
  char fstamp[160]; /* "_syncing.NAME.stamp" */
  char dpath[160];  /* "_sync.NAME" */
} dtx__sync_rule_t;

/* rule.c: a rule's name (1..64 of [A-Za-z0-9_-]); whether path's first
 * segment is one of doctx's fields; whether two dotted paths are equal or
 * one lies inside the other. */
int dtx__sync_check_name(const char *name);
int dtx__sync_reserved(const char *path);
int dtx__sync_overlaps(const char *a, const char *b);

/* Checks doc (borrowed; a reference is taken) as a rule and fills r.
 * DTX_EINVAL naming the bad part.  Free r with dtx__sync_rule_free in
 * every case. */
int dtx__sync_rule_parse(const json_t *doc, dtx__sync_rule_t *r);
void dtx__sync_rule_free(dtx__sync_rule_t *r);

/* Loads rule name from the store (DTX_ENOTFOUND naming it when absent). */
int dtx__sync_rule_load(dtx__exec_t *ex, const char *name,
                        dtx__sync_rule_t *r);

/* The valid rules of sync_rules matching filter (borrowed, NULL: all)
 * into *out (an array of *n; free with dtx__sync_rules_free, also on an
 * error).  A stored rule that is not valid is left out (the audit
 * reports it). */
int dtx__sync_rules_all(dtx__exec_t *ex, const json_t *filter,
                        dtx__sync_rule_t **out, size_t *n);
void dtx__sync_rules_free(dtx__sync_rule_t *r, size_t n);

/* 1 when rules a and b cannot both hold (docs/sync.md "Rules"): they
 * write overlapping fields of one dependents collection, or one writes
 * another's link field, or one copies into a field the other copies from
 * (rules do not chain); why receives the reason.  0 for one rule. */
int dtx__sync_clash(const dtx__sync_rule_t *a, const dtx__sync_rule_t *b,
                    char *why, size_t n);

/* The transition rule r puts on its masters ("_syncm.NAME.v" increasing),
 * merged into what the collection holds.  check_only: reads only,
 * *missing says whether it is absent (why, when not NULL, names it);
 * otherwise installs it when missing (*missing: whether it had to). */
int dtx__sync_guard(dtx_store_t *st, const dtx__sync_rule_t *r,
                    int check_only, char *why, size_t n, int *missing);

/* The master's version under rule r (0 when it has none). */
int64_t dtx__sync_version(const dtx__sync_rule_t *r, const json_t *master);

/* Writes master (borrowed, as read after its change) into every
 * dependent of r linked to it, each write conditioned on the dependent
 * reflecting an older version than the master's (point names the fault
 * point of each write).  *written: how many dependents it changed. */
int dtx__sync_propagate(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                        const json_t *master, const char *point,
                        int64_t *written);

/* Clears master's flag of r if its stamp is still stamp; *cleared
 * (may be NULL) says whether it was. */
int dtx__sync_clear(dtx__exec_t *ex, const dtx__sync_rule_t *r,
                    const json_t *master_id, const char *stamp,
                    const char *point, int *cleared);

extern const dtx__pattern_t dtx__sync_pattern;

/* audit.c */
int dtx__sync_audit(dtx__audit_t *a);

#endif
