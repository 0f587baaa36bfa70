/* acked_load.c -- transfer load that keeps the client's record of what it
 * was told, for the failover loss measurement in run-redis.sh.
 *
 * Threads run dtx_transfer_execute on random pairs of ACCOUNTS accounts
 * until SECONDS have passed.  Every transfer the call acknowledged (rc 0,
 * terminal state) is appended to JOURNAL as one JSON line, flushed at once:
 * the journal is exactly what a client could hold the store to.  A call
 * that failed (say DTX_EUNAVAILABLE while a replica is being promoted) is
 * not acknowledged and not journaled; recovery finishes its transfer.
 * The store is not emptied: run-redis.sh flushes it first.
 *
 * usage: acked_load URI SECONDS JOURNAL [THREADS] [ACCOUNTS]
 * Prints "acked N, errors M"; exits 1 when nothing at all was acknowledged
 * (then the measurement would mean nothing), 2 on a setup error. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctx.h"

#define BALANCE 1000000

static dtx_store_t *st;
static FILE *journal;
static pthread_mutex_t journal_lock = PTHREAD_MUTEX_INITIALIZER;
static double deadline;
static int accounts = 50;
static long acked, errors;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *load(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg * 7919u + (unsigned)time(NULL);
  while (now_s() < deadline) {
    char from[16], to[16];
    int a = rand_r(&seed) % accounts, b = rand_r(&seed) % (accounts - 1);
    if (b >= a)
      b++;
    snprintf(from, sizeof from, "a%d", a);
    snprintf(to, sizeof to, "a%d", b);
    dtx_transfer_req_t req = {.from = from, .to = to,
                              .amount = 1 + rand_r(&seed) % 100};
    json_t *tx = NULL;
    int rc = dtx_transfer_execute(st, &req, NULL, &tx);
    pthread_mutex_lock(&journal_lock);
    if (rc == 0 && tx) {
      char *line = json_dumps(tx, JSON_COMPACT);
      if (line) {
        fprintf(journal, "%s\n", line);
        fflush(journal);
        free(line);
        acked++;
      }
    } else {
      if (errors < 5)
        fprintf(stderr, "acked_load: unacknowledged: %s: %s\n",
                dtx_errname(rc), dtx_errdetail());
      errors++;
    }
    pthread_mutex_unlock(&journal_lock);
    json_decref(tx);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: acked_load URI SECONDS JOURNAL [THREADS] "
                    "[ACCOUNTS]\n");
    return 2;
  }
  double secs = atof(argv[2]);
  int threads = argc > 4 ? atoi(argv[4]) : 16;
  if (argc > 5)
    accounts = atoi(argv[5]);
  if (secs <= 0 || threads < 1 || threads > 256 || accounts < 2) {
    fprintf(stderr, "acked_load: bad SECONDS, THREADS or ACCOUNTS\n");
    return 2;
  }
  int rc = dtx_store_open(argv[1], &st);
  if (rc) {
    fprintf(stderr, "acked_load: open %s: %s\n", argv[1], dtx_errdetail());
    return 2;
  }
  for (int i = 0; i < accounts; i++) {
    char id[16];
    snprintf(id, sizeof id, "a%d", i);
    rc = dtx_account_create(st, id, &(dtx_account_opts_t){.balance = BALANCE}, NULL);
    if (rc && rc != DTX_EDUPKEY) {
      fprintf(stderr, "acked_load: account %s: %s\n", id, dtx_errdetail());
      return 2;
    }
  }
  journal = fopen(argv[3], "a");
  if (!journal) {
    perror(argv[3]);
    return 2;
  }
  deadline = now_s() + secs;
  pthread_t t[256];
  for (int i = 0; i < threads; i++)
    pthread_create(&t[i], NULL, load, (void *)(uintptr_t)i);
  for (int i = 0; i < threads; i++)
    pthread_join(t[i], NULL);
  fclose(journal);
  dtx_store_close(st);
  printf("acked %ld, errors %ld\n", acked, errors);
  return acked > 0 ? 0 : 1;
}
