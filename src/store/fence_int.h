/* fence_int.h -- what the json_t fenced write (fence.c) and its BSON twin
 * (bfence.c) share, so that the rule's refusals read the same whichever
 * engine made them; nothing else includes it. */
#ifndef DTX_FENCE_INT_H
#define DTX_FENCE_INT_H

#include "store/store.h"

#define FENCE_FIELD "_fence"

/* DTX_EFENCED for a record no token can be judged against, naming m's
 * collection and id (the document's _id, NULL when it has none): named 1
 * when _fence is an object whose m->fence_name entry is not an integer,
 * 0 when _fence itself is not an object. */
int dtx__fence_err_malformed(const dtx__modify_t *m, const json_t *id,
                             int named);

/* DTX_EFENCED for m's token below the recorded one; gone 1 when the
 * record is a deleted document's tombstone. */
int dtx__fence_err_stale(const dtx__modify_t *m, const json_t *id,
                         int64_t recorded, int gone);

#endif
