/* kit_int.h -- what the kit's own files share and patterns do not call:
 * the one retry loop of a conditional find-and-modify and the update a
 * claim makes.  kit.c defines them; claim.c uses them (its batched
 * claims go through the kit's step runner, dtx__kit_run in kit.h).  A
 * pattern uses the functions of kit.h instead. */
#ifndef DTX_TXN_KIT_INT_H
#define DTX_TXN_KIT_INT_H

#include "txn/kit/kit.h"

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

/* The kit's asserts on its steps' outcomes (check.c): a move of doc by m
 * (rc, out: what it returned), and a claim's item (an object) or items
 * (an array of at most max). */
void dtx__kit_move_check(const dtx__exec_t *ex, const dtx__kind_t *k,
                         const json_t *doc, const dtx__move_t *m, int rc,
                         const json_t *out);
void dtx__kit_claim_check(const dtx__exec_t *ex, const dtx__kind_t *k,
                          const dtx__claim_t *c, const json_t *items,
                          size_t max);

#endif
