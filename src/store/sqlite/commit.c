/* commit.c -- group commit: the threads of one process share the writer
 * connection, and one COMMIT (one fsync under sync=full) covers a batch of
 * their operations.
 *
 * A write call queues its operation.  If no batch is running, the calling
 * thread becomes the leader: it takes up to BATCH_MAX queued operations,
 * opens BEGIN IMMEDIATE, runs each inside its own SAVEPOINT (ROLLBACK TO on
 * that operation's error, so each stays atomic on its own and its error
 * reaches only its caller), COMMITs once, and wakes the callers with their
 * results.  If operations queued up meanwhile, the oldest waiter becomes
 * the next leader.  A lone caller runs its own operation inline (BEGIN
 * IMMEDIATE; op; COMMIT) with no thread hand-off and no savepoint.
 *
 *   queued --leader takes it--> running --COMMIT ok--> done (op's own rc)
 *                                  |
 *                                  +--COMMIT/BEGIN fails--> done (that error,
 *                                                           results discarded)
 *
 * I1: at most one thread runs a batch (b->leading), so the writer
 *     connection has one user at a time.
 * I2: an op is marked done only after its batch's transaction ended, so a
 *     caller never sees a result that is not yet durable.
 * I3: a waiting caller's op stays queued until a leader takes it; whenever
 *     leading drops to 0 with ops queued, the head of the queue is woken.
 */
#include "store/sqlite/sqlite_int.h"

#include "util/err.h"

#include <string.h>

#define BATCH_MAX 128

static void op_set_error(sq_op_t *op, int rc) {
  op->rc = rc;
  snprintf(op->detail, sizeof op->detail, "%s", dtx_errdetail());
}

/* Marks ops[from..n) failed with rc (and the current detail), discarding
 * results of those that had succeeded or kept partial work. */
static void fail_ops(sq_op_t **ops, size_t from, size_t n, int rc) {
  char detail[sizeof ops[0]->detail];
  snprintf(detail, sizeof detail, "%s", dtx_errdetail());
  for (size_t i = from; i < n; i++) {
    if ((ops[i]->rc == 0 || ops[i]->keep_partial) && ops[i]->discard)
      ops[i]->discard(ops[i]);
    ops[i]->rc = rc;
    memcpy(ops[i]->detail, detail, sizeof detail);
  }
}

/* Runs one operation in the open transaction.  Returns 0 when the
 * transaction is still usable, or a negative code when it is lost (SQLite
 * rolled it back after an I/O error, or a savepoint statement failed). */
static int run_one(sq_wctx_t *w, sq_op_t *op, int single) {
  sq_conn_t *c = w->c;
  int rc;
  if (!single && (rc = dtx__sq_exec(c, "SAVEPOINT op")) < 0)
    return rc;
  int64_t examined0 = dtx__docs_examined;
  w->cat_changed = 0;
  w->nmk = 0;
  dtx__err_clear();
  /* A rule of scope "plain" judges the op by the thread that made it:
   * this one may be another's, inside or outside a step of its own. */
  const char *mine = dtx__rules_step_now();
  dtx__rules_step_leave(op->step);
  int r = op->run(w, op);
  dtx__rules_step_leave(mine);
  /* Documents the op kept may have made an index multikey; the flag must
   * commit with them.  (A rolled-back document may leave the flag set,
   * which only makes the planner more careful.) */
  if ((r == 0 || op->keep_partial) && (rc = dtx__sq_mk_flush(w)) < 0) {
    /* Then nothing of the op may stay: roll all of it back below. */
    if (op->discard)
      op->discard(op);
    op->keep_partial = 0;
    r = rc;
  }
  op->examined = dtx__docs_examined - examined0;
  dtx__docs_examined = examined0;
  op->rc = r;
  if (r < 0)
    op_set_error(op, r);
  if (sqlite3_get_autocommit(c->db))
    return r < 0 ? r
                 : dtx__err(DTX_EBACKEND,
                            "sqlite: transaction ended unexpectedly");
  if (single)
    return 0; /* the caller commits or rolls back the whole transaction */
  if (r < 0 && !op->keep_partial &&
      (rc = dtx__sq_exec(c, "ROLLBACK TO op")) < 0)
    return rc;
  if ((rc = dtx__sq_exec(c, "RELEASE op")) < 0)
    return rc;
  if (r < 0 && w->cat_changed && (rc = dtx__sq_cat_sync(w->b, c, &w->cat)) < 0)
    return rc;
  return 0;
}

static void run_batch(dtx__backend_t *b, sq_op_t **ops, size_t n) {
  sq_conn_t *c = b->w;
  pthread_mutex_lock(&c->mu);
  dtx__sq_cache_trim(c);
  for (size_t i = 0; i < n; i++)
    ops[i]->rc = 0;
  sq_wctx_t w = {b, c, NULL, 0, NULL, 0, 0};
  int rc = dtx__sq_begin_write(c);
  if (rc == 0) {
    w.cat = dtx__sq_cat_get(b);
    rc = dtx__sq_cat_sync(b, c, &w.cat);
  }
  if (rc < 0) {
    fail_ops(ops, 0, n, rc);
    dtx__sq_rollback(c);
    goto out;
  }
  int single = n == 1;
  for (size_t i = 0; i < n; i++) {
    if ((rc = run_one(&w, ops[i], single)) < 0) {
      /* Everything before i is gone with the transaction. */
      fail_ops(ops, 0, n, rc);
      dtx__sq_rollback(c);
      goto out;
    }
  }
  if (single && ops[0]->rc < 0 && !ops[0]->keep_partial) {
    dtx__sq_rollback(c);
    goto out;
  }
  if ((rc = dtx__sq_commit(c)) < 0) {
    fail_ops(ops, 0, n, rc);
    dtx__sq_rollback(c);
  }
out:
  dtx__sq_cat_put(w.cat);
  free(w.mk);
  pthread_mutex_unlock(&c->mu);
}

/* Takes the next batch off the queue: whole groups (the ops one caller
 * handed over together are never split between transactions), up to
 * BATCH_MAX ops, or one group alone when it is bigger -- split into
 * BATCH_MAX slices only if memory for it cannot be had (each op stays
 * atomic on its own either way).  Caller holds qmu.  *out is into (room
 * for BATCH_MAX) or a malloc'd array the caller frees. */
static size_t take_batch(dtx__backend_t *b, sq_op_t **into, sq_op_t ***out) {
  size_t n = 0;
  sq_op_t **batch = into;
  if (b->qhead->glen > BATCH_MAX &&
      (batch = malloc(b->qhead->glen * sizeof *batch)) == NULL) {
    batch = into;
    b->qhead->glen = BATCH_MAX;
    sq_op_t *rest = b->qhead;
    for (size_t k = 0; k < BATCH_MAX; k++)
      rest = rest->next;
    rest->glen = b->qhead->grp->glen_left - BATCH_MAX;
  }
  while (b->qhead && (n == 0 || n + b->qhead->glen <= BATCH_MAX)) {
    size_t k = b->qhead->glen;
    b->qhead->grp->glen_left -= k;
    for (; k > 0; k--) {
      batch[n++] = b->qhead;
      b->qhead = b->qhead->next;
    }
    if (batch != into)
      break; /* a big group goes alone */
  }
  if (!b->qhead)
    b->qtail = NULL;
  *out = batch;
  return n;
}

int dtx__sq_submit(dtx__backend_t *b, sq_op_t *op) {
  return dtx__sq_submit_many(b, &op, 1);
}

/* The caller waits on its group's head; whoever finishes the group's last
 * op wakes it (I2: only after that op's transaction ended). */
int dtx__sq_submit_many(dtx__backend_t *b, sq_op_t **ops, size_t nops) {
  sq_op_t *stack[BATCH_MAX];
  sq_op_t *op = ops[0], *last = ops[nops - 1];
  for (size_t i = 0; i < nops; i++) {
    ops[i]->done = 0;
    ops[i]->next = i + 1 < nops ? ops[i + 1] : NULL;
    ops[i]->grp = op;
    ops[i]->glen = i == 0 ? nops : 0;
    ops[i]->rc = 0;
    ops[i]->examined = 0;
    ops[i]->detail[0] = '\0';
    ops[i]->step = dtx__rules_step_now();
  }
  op->glen_left = nops;
  pthread_cond_init(&op->cv, NULL);

  pthread_mutex_lock(&b->qmu);
  if (b->qtail)
    b->qtail->next = op;
  else
    b->qhead = op;
  b->qtail = last;
  while (!last->done) {
    if (b->leading) {
      pthread_cond_wait(&op->cv, &b->qmu);
      continue;
    }
    sq_op_t **batch;
    size_t n = take_batch(b, stack, &batch);
    b->leading = 1;
    b->nbatches++;
    b->nbatched += n;
    if (n > b->maxbatch)
      b->maxbatch = n;
    pthread_mutex_unlock(&b->qmu);

    run_batch(b, batch, n);

    pthread_mutex_lock(&b->qmu);
    for (size_t i = 0; i < n; i++) {
      batch[i]->done = 1;
      int group_done = batch[i]->grp->glen_left == 0 &&
                       (i + 1 == n || batch[i + 1]->grp != batch[i]->grp);
      if (group_done && batch[i]->grp != op)
        pthread_cond_signal(&batch[i]->grp->cv);
    }
    if (batch != stack)
      free(batch);
    b->leading = 0;
    /* Our own ops may still be queued behind a full batch: then we lead
     * again; otherwise the oldest waiter takes over (I3). */
    if (last->done && b->qhead)
      pthread_cond_signal(&b->qhead->grp->cv);
  }
  pthread_mutex_unlock(&b->qmu);
  pthread_cond_destroy(&op->cv);

  for (size_t i = 0; i < nops; i++)
    dtx__docs_examined += ops[i]->examined;
  if (op->rc < 0)
    return dtx__err(op->rc, "%s", op->detail);
  dtx__err_clear();
  return 0;
}
