/* bdiff_update.h -- the BSON leg of the update tables: one row of the
 * json_t engine's update tests (tests/unit/test_update*.c) run again
 * through the BSON applier (src/doc/bupdate.h) via the json_t bridge, and
 * compared: the same result document (through the bridge), the same
 * changed flag, the same error code and detail.  Rows whose answer
 * legitimately differs are skipped with a counted, printed reason. */
#ifndef DTX_BDIFF_UPDATE_H
#define DTX_BDIFF_UPDATE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct dtx_t_bupd_row {
  const char *table; /* for messages */
  size_t index;
  const json_t *spec, *afs, *doc;
  int is_insert;
  int64_t now;
  const json_t *filter; /* the query filter (for the positional $), or NULL */
  /* the json_t engine's answer */
  int rc;
  const json_t *out;
  int changed;
  const char *detail; /* dtx_errdetail() copied right after its call */
} dtx_t_bupd_row_t;

/* Runs r through the BSON engine and CHECKs that it agrees. */
void dtx_t_bupdate_leg(const dtx_t_bupd_row_t *r);

/* The same for an upsert: filter and spec through dtx__bupsert_doc;
 * an ObjectId _id is compared as "generated" (json_t writes hex). */
void dtx_t_bupsert_leg(const char *table, size_t i, const json_t *filter,
                       const json_t *spec, int64_t now, int rc,
                       const json_t *out, const char *detail);

/* Prints rows run, agreed, and skipped per reason; 0 rows is a failure
 * (the leg was not wired). */
void dtx_t_bupdate_report(void);

#endif
