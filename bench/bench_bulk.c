/* bench_bulk.c -- dtx_store_bulk_write against the native way of sending
 * many single-row (single-key) writes at once, in the same run.
 *
 * Loads 10,000 documents {_id: i, n: 0} and times rounds of OPS
 * operations, sent as batches of B (1, 16, 64): each a bulk_write of B
 * updateOne {_id: r} {$inc: {n: 1}} (r random), built per operation as a
 * caller would.  The baselines, on the same machine and B:
 *   SQLite  a plain table (id INTEGER PRIMARY KEY, n INTEGER), WAL, the
 *           same synchronous setting: BEGIN IMMEDIATE; B x prepared
 *           UPDATE t SET n=n+1 WHERE id=?; COMMIT -- one transaction of B
 *           updates, what an application would write by hand (it checks
 *           nothing and cannot fail one row alone);
 *   Redis   one pipeline of B EVALSHA of a script shaped like doctx's
 *           document compare-and-set (compare the catalog stamp, compare
 *           the version, HSET version and a ~200-byte body; the script of
 *           scripts/bench.sh's ceiling), on keys sharing one hash tag, so
 *           on the cluster the whole pipeline goes to one master (doctx
 *           spreads its batch over three, one pipeline each).
 * Sides alternate within each round so drift hits both alike; reported:
 * the median ops/s of the rounds per side, the ratio doctx/native, and
 * doctx's gain over its own batches of 1; plus "RESULT key=value" lines
 * for scripts.  One client thread: the batch is what is measured.
 *
 * usage: bench_bulk [--store URI] [--ops N] [--rounds R] [--label L]
 *   no --store  SQLite at sync=normal and sync=full, in a new /tmp dir
 *   --store redis://...  that server or cluster (empties collection
 *               "bulkbench" first; native keys nat:{bulk}:*)
 *   --ops N     operations per round and side (a multiple of 64; default
 *               SQLite normal 12800, full 1280, Redis 6400)
 *   --rounds R  rounds (default 5)
 *   --batch B   only batches of B (1..64; gain is then against B) */
#include "bench_common.h"
#include "doctx.h"

#include <sqlite3.h>
#include <stdint.h>
#include <unistd.h>

#ifdef DTX_HAVE_REDIS
#include "bench_native.h"
#endif

#define NDOCS 10000
#define COLL "bulkbench"
static int batches[] = {1, 16, 64};
static int nb = (int)(sizeof batches / sizeof batches[0]);

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static int rnd_id(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (int)(rng_state % NDOCS);
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_bulk: %s: %s (%s)\n", what, dtx_errname(rc),
          dtx_errdetail());
  exit(1);
}

static void die_msg(const char *what, const char *msg) {
  fprintf(stderr, "bench_bulk: %s: %s\n", what, msg);
  exit(1);
}

/* ---- doctx ------------------------------------------------------------------- */

static dtx_store_t *doctx_setup(const char *uri) {
  dtx_store_t *st;
  int rc = dtx_store_open(uri, &st);
  if (rc < 0)
    die("open", rc);
  if ((rc = dtx_store_drop_collection_ex(st, COLL, &(dtx_drop_opts_t){1})) < 0)
    die("drop", rc);
  json_t *docs = json_array();
  for (int i = 0; i < NDOCS; i++)
    json_array_append_new(docs, json_pack("{s:i,s:i}", "_id", i, "n", 0));
  size_t n = 0;
  if ((rc = dtx_store_insert_many(st, COLL, docs, &n, NULL)) < 0)
    die("insert_many", rc);
  json_decref(docs);
  return st;
}

/* ops operations in batches of b. */
static void doctx_round(dtx_store_t *st, int b, int ops) {
  dtx_bulk_op_t op[64];
  dtx_bulk_result_t res[64];
  json_t *f[64], *u[64];
  for (int done = 0; done < ops; done += b) {
    if (b > ops - done)
      b = ops - done; /* the last batch of a round may be short */
    for (int i = 0; i < b; i++) {
      f[i] = json_pack("{s:i}", "_id", rnd_id());
      u[i] = json_pack("{s:{s:i}}", "$inc", "n", 1);
      op[i] = (dtx_bulk_op_t){.kind = DTX_BULK_UPDATE_ONE, .coll = COLL,
                              .filter = f[i], .update = u[i]};
    }
    int rc = dtx_store_bulk_write(st, op, (size_t)b, res);
    if (rc < 0)
      die("bulk_write", rc);
    dtx_bulk_results_clear(res, (size_t)b);
    for (int i = 0; i < b; i++) {
      json_decref(f[i]);
      json_decref(u[i]);
    }
  }
}

static int64_t doctx_total(dtx_store_t *st) {
  int64_t sum;
  int rc = bench_sum(st, COLL, "n", &sum);
  if (rc < 0)
    die("find", rc);
  return sum;
}

/* ---- native ------------------------------------------------------------------ */

typedef struct native {
  sqlite3 *db; /* SQLite */
  sqlite3_stmt *upd, *begin, *commit;
#ifdef DTX_HAVE_REDIS
  redisContext *rc; /* Redis */
  char sha[64];
#endif
} native_t;

static void sql_step(native_t *n, sqlite3_stmt *s, const char *what) {
  if (sqlite3_step(s) != SQLITE_DONE)
    die_msg(what, sqlite3_errmsg(n->db));
  sqlite3_reset(s);
}

static void sq_setup(native_t *n, const char *path, const char *sync) {
  char sql[100];
  if (sqlite3_open(path, &n->db) != SQLITE_OK)
    die_msg("native open", sqlite3_errmsg(n->db));
  snprintf(sql, sizeof sql, "PRAGMA synchronous=%s", sync);
  if (sqlite3_exec(n->db, "PRAGMA journal_mode=WAL", NULL, NULL, NULL) ||
      sqlite3_exec(n->db, sql, NULL, NULL, NULL) ||
      sqlite3_exec(n->db,
                   "CREATE TABLE t(id INTEGER PRIMARY KEY, n INTEGER);"
                   "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 "
                   "FROM c WHERE i < 9999) INSERT INTO t SELECT i, 0 FROM c",
                   NULL, NULL, NULL) ||
      sqlite3_prepare_v2(n->db, "UPDATE t SET n=n+1 WHERE id=?", -1, &n->upd,
                         NULL) ||
      sqlite3_prepare_v2(n->db, "BEGIN IMMEDIATE", -1, &n->begin, NULL) ||
      sqlite3_prepare_v2(n->db, "COMMIT", -1, &n->commit, NULL))
    die_msg("native setup", sqlite3_errmsg(n->db));
}

static void sq_round(native_t *n, int b, int ops) {
  for (int done = 0; done < ops; done += b) {
    if (b > ops - done)
      b = ops - done;
    sql_step(n, n->begin, "BEGIN");
    for (int i = 0; i < b; i++) {
      sqlite3_bind_int(n->upd, 1, rnd_id());
      sql_step(n, n->upd, "UPDATE");
    }
    sql_step(n, n->commit, "COMMIT");
  }
}

static int64_t sq_total(native_t *n) {
  sqlite3_stmt *s;
  if (sqlite3_prepare_v2(n->db, "SELECT sum(n) FROM t", -1, &s, NULL) ||
      sqlite3_step(s) != SQLITE_ROW)
    die_msg("native sum", sqlite3_errmsg(n->db));
  int64_t sum = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  return sum;
}

static void sq_close(native_t *n) {
  sqlite3_finalize(n->upd);
  sqlite3_finalize(n->begin);
  sqlite3_finalize(n->commit);
  sqlite3_close(n->db);
}

#ifdef DTX_HAVE_REDIS
/* scripts/bench.sh's ceiling script: RD_S_WRITE's shape for one document
 * (expected and new version equal, so every call writes). */
static const char *const CAS_LUA =
    "local st = redis.call('GET', KEYS[2]) or '1'\n"
    "if st ~= ARGV[1] then return {-1, st} end\n"
    "local v = redis.call('HGET', KEYS[1], 'v')\n"
    "if v and v ~= ARGV[2] then return {0, v} end\n"
    "redis.call('HSET', KEYS[1], 'v', ARGV[3], 'b', ARGV[4])\n"
    "return {1}";
static const char *const BODY =
    "{\"_id\":\"a17\",\"balance\":999999123,\"min_balance\":0,"
    "\"opening_balance\":1000000000,\"pending\":[{\"tx\":"
    "\"6650c1f2a9e3b1d2c3f4a5b6\",\"role\":\"payer\",\"amount\":417}],"
    "\"voids\":[]}";

static void rd_setup(native_t *n, const char *uri) {
  rd_uri_t u;
  char host[256], why[512];
  int port, rc = dtx__rd_uri_parse(uri, &u);
  if (rc < 0)
    die("native: URI", rc);
  if (native_find_node(&u, "bulk", host, &port, "bench_bulk") < 0)
    exit(1);
  if (!(n->rc = native_connect_to(&u, host, port, why, sizeof why)))
    die_msg("native", why);
  dtx__rd_uri_free(&u);
  redisReply *r = redisCommand(n->rc, "SCRIPT LOAD %s", CAS_LUA);
  if (!r || r->type != REDIS_REPLY_STRING)
    die_msg("native SCRIPT LOAD", r ? r->str : n->rc->errstr);
  snprintf(n->sha, sizeof n->sha, "%s", r->str);
  freeReplyObject(r);
}

static void rd_round(native_t *n, int b, int ops) {
  char key[48];
  for (int done = 0; done < ops; done += b) {
    if (b > ops - done)
      b = ops - done;
    for (int i = 0; i < b; i++) {
      snprintf(key, sizeof key, "nat:{bulk}:k%d", rnd_id());
      redisAppendCommand(n->rc, "EVALSHA %s 2 %s nat:{bulk}:m 1 v1 v1 %s",
                         n->sha, key, BODY);
    }
    for (int i = 0; i < b; i++) {
      redisReply *r = NULL;
      if (redisGetReply(n->rc, (void **)&r) != REDIS_OK)
        die_msg("native EVALSHA", n->rc->errstr);
      int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
               r->element[0]->type == REDIS_REPLY_INTEGER &&
               r->element[0]->integer == 1;
      if (!ok)
        die_msg("native EVALSHA", r && r->type == REDIS_REPLY_ERROR
                                      ? r->str
                                      : "the compare-and-set did not write");
      freeReplyObject(r);
    }
  }
}
#endif

/* ---- the run ------------------------------------------------------------------- */

typedef void (*native_round_fn)(native_t *, int, int);

/* Every batch size, rounds alternating the sides; prints the table.
 * backend and sync name the target in the results file. */
static void run(const char *label, const char *backend, const char *sync,
                dtx_store_t *st, native_t *nat, native_round_fn nround,
                int ops, int rounds) {
  double d[16], w[16], d1 = 0;
  int64_t done = 0;
  for (int bi = 0; bi < nb; bi++) {
    int b = batches[bi];
    bench_phase("%s batch %d warm-up", label, b);
    doctx_round(st, b, 64); /* warm-up */
    nround(nat, b, 64);
    done += 64;
    for (int r = 0; r < rounds; r++) {
      for (int side = 0; side < 2; side++) {
        int doctx_side = (side + r) % 2 == 0;
        bench_phase("%s batch %d round %d/%d %s", label, b, r + 1, rounds,
                    doctx_side ? "doctx" : "native");
        double t0 = now_us();
        if (doctx_side)
          doctx_round(st, b, ops);
        else
          nround(nat, b, ops);
        (doctx_side ? d : w)[r] = ops / ((now_us() - t0) / 1e6);
      }
    }
    done += (int64_t)ops * rounds;
    double dm = bench_median(d, rounds), wm = bench_median(w, rounds);
    if (bi == 0)
      d1 = dm;
    char wl[32];
    snprintf(wl, sizeof wl, "batch%d", b);
    bench_row(&(bench_row_t){
        .metric = "bulk_write", .backend = backend, .sync = sync,
        .workload = wl, .unit = "ops/s",
        .native = nround == sq_round ? "one transaction of B UPDATEs"
                                     : "pipeline of B EVALSHA (CAS)",
        .workers = 1, .rounds = rounds, .doctx = {dm, -1, -1},
        .nat = {wm, -1, -1},
        .extra = json_pack("{s:i,s:i,s:f}", "batch", b, "ops", ops, "gain",
                           dm / d1)});
    printf("%-18s %5d %12.0f %12.0f %8.3f %8.2f\n", label, b, dm, wm, dm / wm,
           dm / d1);
    printf("RESULT bench=bulk label=%s batch=%d doctx_ops=%.0f native_ops=%.0f "
           "ratio=%.4f gain=%.3f\n",
           label, b, dm, wm, dm / wm, dm / d1);
    fflush(stdout);
  }
  int64_t got = doctx_total(st);
  if (got != done) {
    fprintf(stderr, "bench_bulk: %s: doctx applied %lld updates, want %lld\n",
            label, (long long)got, (long long)done);
    exit(1);
  }
  if (nround == sq_round && sq_total(nat) != done) {
    fprintf(stderr, "bench_bulk: %s: native applied %lld, want %lld\n", label,
            (long long)sq_total(nat), (long long)done);
    exit(1);
  }
}

static void header(void) {
  printf("%-18s %5s %12s %12s %8s %8s\n", "backend", "batch", "doctx ops/s",
         "native ops/s", "ratio", "gain");
}

int main(int argc, char **argv) {
  int ops = 0, rounds = 5;
  const char *store = NULL, *label = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc)
      ops = atoi(argv[++i]);
    else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = atoi(argv[++i]);
    else if (strcmp(argv[i], "--store") == 0 && i + 1 < argc)
      store = argv[++i];
    else if (strcmp(argv[i], "--label") == 0 && i + 1 < argc)
      label = argv[++i];
    else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc) {
      batches[0] = atoi(argv[++i]);
      nb = 1;
      if (batches[0] < 1 || batches[0] > 64) {
        fprintf(stderr, "bench_bulk: --batch is 1..64\n");
        return 2;
      }
    }
    else {
      fprintf(stderr,
              "usage: %s [--store URI] [--ops N] [--rounds R] [--label L] "
              "[--batch B]\n",
              argv[0]);
      return 2;
    }
  }
  if (ops < 0 || ops % 64 || rounds < 1 || rounds > 16) {
    fprintf(stderr, "bench_bulk: --ops must be a multiple of 64, --rounds "
                    "1..16\n");
    return 2;
  }
  bench_begin("bench_bulk", label ? label : store ? "redis" : NULL, argc,
              argv);
  printf("bulk_write of B updateOne {_id: r} {$inc: {n: 1}} over %d docs vs "
         "the native batch; median of %d rounds; gain = doctx(B) / doctx(first B)\n",
         NDOCS, rounds);
  header();
  if (store && strncmp(store, "redis://", 8) == 0) {
#ifdef DTX_HAVE_REDIS
    native_t nat = {0};
    rd_setup(&nat, store);
    dtx_store_t *st = doctx_setup(store);
    label = label ? label : "redis";
    run(label, label, "none", st, &nat, rd_round,
        ops ? ops : bench_scaled(100) * 64, rounds);
    dtx_store_drop_collection_ex(st, COLL, &(dtx_drop_opts_t){1});
    dtx_store_close(st);
    redisFree(nat.rc);
    return bench_end(0);
#else
    fprintf(stderr, "bench_bulk: built without Redis\n");
    return 2;
#endif
  }
  if (store) {
    fprintf(stderr, "bench_bulk: --store takes a redis:// URI (SQLite runs "
                    "without it)\n");
    return 2;
  }
  char dir[] = "/tmp/dtxbulk.XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  static const char *const syncs[] = {"normal", "full"};
  for (int s = 0; s < 2; s++) {
    char uri[200], path[200], lab[40];
    snprintf(uri, sizeof uri, "sqlite:%s/doctx-%s.db?sync=%s", dir, syncs[s],
             syncs[s]);
    snprintf(path, sizeof path, "%s/raw-%s.db", dir, syncs[s]);
    snprintf(lab, sizeof lab, "sqlite-%s", syncs[s]);
    dtx_store_t *st = doctx_setup(uri);
    native_t nat = {0};
    sq_setup(&nat, path, syncs[s]);
    run(lab, "sqlite", syncs[s], st, &nat, sq_round,
        ops ? ops : bench_scaled(s == 0 ? 200 : 20) * 64, rounds);
    dtx_store_close(st);
    sq_close(&nat);
    static const char *const sfx[] = {"", "-wal", "-shm"};
    for (int k = 0; k < 3; k++) {
      snprintf(path, sizeof path, "%s/doctx-%s.db%s", dir, syncs[s], sfx[k]);
      unlink(path);
      snprintf(path, sizeof path, "%s/raw-%s.db%s", dir, syncs[s], sfx[k]);
      unlink(path);
    }
  }
  rmdir(dir);
  return bench_end(0);
}
