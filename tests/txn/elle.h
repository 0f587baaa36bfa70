/* elle.h -- the list-append anomaly checker (tests/txn/elle.c), as a
 * function for the tests and as the txn_elle tool.  It judges a history
 * of transactions only, never a store: docs/testing.md, "The anomaly
 * checker", describes the history format and the anomaly kinds. */
#ifndef DTX_ELLE_H
#define DTX_ELLE_H

#include <stdio.h>

#include <jansson.h>

typedef enum {
  ELLE_SNAPSHOT,    /* G0 G1a G1b G1c G-single and the order anomalies */
  ELLE_SERIALIZABLE /* the same, and G2 */
} elle_isolation_t;

enum { ELLE_CLEAN = 0, ELLE_ANOMALIES = 1, ELLE_BAD_INPUT = 2 };

/* Reads a JSON Lines history from in and checks it under iso.  Returns
 * ELLE_CLEAN or ELLE_ANOMALIES with the findings in *report (one JSON
 * object; the caller json_decref's it), or ELLE_BAD_INPUT with *report
 * NULL and a message naming the line in err. */
int elle_check(FILE *in, elle_isolation_t iso, json_t **report, char *err,
               size_t errlen);

/* The same over a history held in memory. */
int elle_check_text(const char *text, size_t len, elle_isolation_t iso,
                    json_t **report, char *err, size_t errlen);

#endif
