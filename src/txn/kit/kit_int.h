/* kit_int.h -- what the kit's own files share and patterns do not call:
 * the update a claim or a move makes and the "was it my own move" check
 * after a lost reply.  move.c defines them; claim.c uses them (its
 * batched claims are a round of the step engine, dtx__kit_run in kit.h).
 * A pattern uses the functions of kit.h instead. */
#ifndef DTX_TXN_KIT_INT_H
#define DTX_TXN_KIT_INT_H

#include "txn/kit/kit.h"

/* The update of a claim or a move: $set {<state>: to, updated: now} plus
 * set (stolen, may be NULL), and when take, owner, lease_until = now +
 * lease and $inc epoch.  NULL when out of memory. */
json_t *dtx__kit_move_update(const dtx__exec_t *ex, const dtx__kind_t *k,
                             const char *to, int take, json_t *set);

/* After a move m of item doc (borrowed) matched nothing on an attempt
 * that followed an unsure one: 0 with *out the item when it stands where
 * this executor's own move would have left it (in m->to, owned by it, at
 * the epoch the move gives), else DTX_ENOMATCH (also for unfenced moves,
 * which anyone may make). */
int dtx__kit_own_move(dtx__exec_t *ex, const dtx__kind_t *k, const json_t *doc,
                      const dtx__move_t *m, json_t **out);

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
