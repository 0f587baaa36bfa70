/* version.h -- internals shared by the files of the versioned-documents
 * pattern (reference solution 5).
 *
 * version.c holds the state machine (diagram, invariants), writing
 * (dtx_version_put), reading (get, history), the rules and the method
 * table; clean.c what makes a version unreachable and removes it
 * (abandon, drop, sweep), recovery and retention (gc); audit.c the audit.
 * Retry, contention, fault points and deletes come from txn/kit/kit.h. */
#ifndef DTX_TXN_VERSION_H
#define DTX_TXN_VERSION_H

#include "txn/kit/kit.h"

/* Room for "ITEM/V/KEY": 128 + 1 + 20 + 1 + 64 + NUL. */
#define VR_ID_MAX 256

extern const dtx__pattern_t dtx__version_pattern;

/* "ITEM/V" (a version record's _id) and "ITEM/W/KEY" (a child's). */
void dtx__vr_rec_id(char *buf, const char *item, int64_t v);
void dtx__vr_child_id(char *buf, const char *item, int64_t w, const char *key);

/* Whether root (borrowed) lists v among its committed versions (log), or
 * holds a reservation of v (res); 0 when root is NULL. */
int dtx__vr_in_log(const json_t *root, int64_t v);
const json_t *dtx__vr_res(const json_t *root, int64_t v);

/* The digest of a version's committed content (dtx__json_digest): for a
 * record (child 0) of its item, version, base, root and children map; for
 * a child (child 1) of its item, version, key and doc.  Written into the
 * document's "sum" when it is inserted; a version committed at or after
 * the root's "sum_from" must carry it.  0, or DTX_ENOMEM. */
int dtx__vr_sum(const json_t *doc, int child, char out[17]);

/* What doc (a record, or a child of version w, under root) says of its
 * digest: VR_SUM_OK (it matches), VR_SUM_NONE (no digest, written before
 * digests: root's sum_from is missing or after w), VR_SUM_CHANGED (it does
 * not match: the content was rewritten), VR_SUM_MISSING (none, though the
 * version was written with one: removed).  Out of memory counts as
 * VR_SUM_NONE (nothing is claimed). */
enum { VR_SUM_OK, VR_SUM_NONE, VR_SUM_CHANGED, VR_SUM_MISSING };
int dtx__vr_sum_check(const json_t *root, const json_t *doc, int child,
                      int64_t w);

/* 0 when root (borrowed) is one the protocol could have written, as far
 * as this pattern's steps rely on it (V3): its committed version is the
 * last of its log (0 with an empty log), its log ascends, and nothing in
 * it passes its counter.  Else DTX_EBACKEND naming the item: a root moved
 * by hand (its validator cannot compare its fields), on which no version
 * is reserved and nothing is swept; the audit reports it. */
int dtx__vr_root_check(const json_t *root);

/* ---- clean.c ------------------------------------------------------------- */

/* Abandons reservation v of item: it leaves res and joins trash in ONE
 * step, so it can never be committed.  cond (stolen, may be NULL): more
 * filter conditions (the owner's token, or the lapse for recovery).
 * DTX_ENOMATCH when the root did not match. */
int dtx__vr_abandon(dtx__exec_t *ex, const char *item, int64_t v,
                    json_t *cond);

/* Deletes what version v of item, never committed, wrote (its record and
 * its own children), then takes v out of trash.  *deleted (may be NULL)
 * counts the documents. */
int dtx__vr_drop(dtx__exec_t *ex, const char *item, int64_t v,
                 int64_t *deleted);

/* Deletes every record and child of item that no committed version kept
 * refers to and no reservation in flight may commit (as of one read of
 * the root), then takes what trash listed out of it. */
int dtx__vr_sweep(dtx__exec_t *ex, const char *item, int64_t *deleted);

int dtx__vr_recover(dtx__exec_t *ex, const dtx_recover_opts_t *o,
                    dtx__tally_t *t);

/* ---- audit.c ----------------------------------------------------------- */

int dtx__vr_audit(dtx__audit_t *a);

#endif
