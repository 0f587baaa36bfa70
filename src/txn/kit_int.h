/* kit_int.h -- what the kit's own files share and patterns do not call:
 * the one retry loop of a conditional find-and-modify, the update a claim
 * makes, and the batched step runner behind dtx__kit_update_many and
 * dtx__kit_claim_many.  kit.c defines them; kit_claim.c uses them.  A
 * pattern uses the functions of kit.h instead. */
#ifndef DTX_TXN_KIT_INT_H
#define DTX_TXN_KIT_INT_H

#include "txn/kit.h"

/* find_one_and_update returning the new document, under the fault point
 * and the retry policy (kit.c's modify).  *unsure (may be NULL) is set
 * when an attempt ended in an error after which the write may have been
 * applied (a lost reply): a later "nothing matched" may then be this
 * executor's own write.  filter and update are stolen. */
int dtx__kit_modify_unsure(dtx__exec_t *ex, const char *point,
                           const char *coll, json_t *filter, json_t *update,
                           const json_t *sort, json_t **out, int *unsure);

/* The update of a claim or a move: $set {<state>: to, updated: now} plus
 * set (stolen, may be NULL), and when take, owner, lease_until = now +
 * lease and $inc epoch.  NULL when out of memory. */
json_t *dtx__kit_move_update(const dtx__exec_t *ex, const dtx__kind_t *k,
                             const char *to, int take, json_t *set);

/* One step of a batch (see dtx__kit_ops_run). */
typedef struct dtx__kit_op {
  const char *point;         /* fault point; NULL: none (a heartbeat) */
  const char *coll;
  json_t *filter, *update;   /* stolen: released by dtx__kit_ops_run */
  int modify;                /* 1: find_one_and_update returning the new
                                document (doc); 0: update_one */
  /* outputs */
  int rc;                    /* 0, or the step's error (detail below) */
  int matched;               /* a document matched (and was changed) */
  int unsure;                /* an attempt ended in an error after which
                                its write may have been applied */
  json_t *doc;               /* modify: the document after, new reference */
  char detail[300];          /* rc's detail */
} dtx__kit_op_t;

/* Runs the n steps of u together: each reaches its own fault point just
 * before it joins a round, and each round is ONE dtx_store_bulk_write of
 * the steps still pending.  A step that meets an injected error, a lost
 * reply or a transient store error goes alone into the next round under
 * the one retry policy (dtx__retry_again, per step), as dtx__kit_update
 * would retry it.  "Nothing matched" is rc 0 with matched 0, for both
 * kinds.  Every filter and update is released.  Returns 0 when every step
 * succeeded, else the first failed step's rc (each u[i].rc says which;
 * the thread's error detail is not set: u[i].detail has it). */
int dtx__kit_ops_run(dtx__exec_t *ex, dtx__kit_op_t *u, size_t n);

#endif
