/* elle_test.c -- the anomaly checker (tests/txn/elle.c) must find what a
 * history holds, and only that:
 *  - each handcrafted history of tests/txn/elle_cases/ gives exactly the
 *    anomaly kinds of its row, under each isolation level (write skew is
 *    G2 under serializable and nothing under snapshot); bad input exits 2
 *    naming its line;
 *  - a random SERIAL history of 2,000 transactions, made here by a tiny
 *    simulator that runs them one at a time on a map of lists (with
 *    aborted ones and ones of unknown outcome, applied or not), is clean;
 *    the same history with one read altered is not: a read made stale (a
 *    read skew: G-single) or a read missing an element
 *    (incompatible-order);
 *  - 10,000 transactions are checked in well under a second;
 *  - the txn_elle tool's exit codes and output, on three cases.
 *
 * usage: txn_elle_test CASES-DIR TXN_ELLE */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "elle.h"
#include "testlib.h"

static const char *cases_dir, *tool;

/* The kinds of a report as "A,B" (empty when none). */
static void kinds_of(json_t *rep, char *out, size_t n) {
  out[0] = 0;
  size_t i;
  json_t *k;
  json_array_foreach(json_object_get(rep, "anomaly_types"), i, k) {
    if (i) strncat(out, ",", n - strlen(out) - 1);
    strncat(out, json_string_value(k), n - strlen(out) - 1);
  }
}

static int check_file(const char *name, elle_isolation_t iso, json_t **rep,
                      char *err, size_t errlen) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", cases_dir, name);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "cannot open %.600s", path);
    *rep = NULL;
    return -1;
  }
  int rc = elle_check(f, iso, rep, err, errlen);
  fclose(f);
  return rc;
}

static const struct {
  const char *file;
  elle_isolation_t iso;
  int rc;
  const char *kinds; /* exactly these, in the report's order */
} cases[] = {
    {"clean.jsonl", ELLE_SNAPSHOT, 0, ""},
    {"clean.jsonl", ELLE_SERIALIZABLE, 0, ""},
    {"unknown.jsonl", ELLE_SERIALIZABLE, 0, ""},
    {"g0.jsonl", ELLE_SNAPSHOT, 1, "G0"},
    {"g0.jsonl", ELLE_SERIALIZABLE, 1, "G0"},
    {"g1a.jsonl", ELLE_SNAPSHOT, 1, "G1a"},
    /* reading t1's first append and not its second is a cycle too */
    {"g1b.jsonl", ELLE_SNAPSHOT, 1, "G1b,G-single"},
    {"g1c.jsonl", ELLE_SNAPSHOT, 1, "G1c"},
    /* t1's outcome is unknown, but t2 read its append: it committed, and
     * its reads count; t3's append nobody read: it proves nothing */
    {"g1c-unknown.jsonl", ELLE_SERIALIZABLE, 1, "G1c"},
    {"g-single.jsonl", ELLE_SNAPSHOT, 1, "G-single"},
    {"g-single.jsonl", ELLE_SERIALIZABLE, 1, "G-single"},
    {"g2-write-skew.jsonl", ELLE_SNAPSHOT, 0, ""},
    {"g2-write-skew.jsonl", ELLE_SERIALIZABLE, 1, "G2"},
    /* the same with no read after: each skipped an append nobody read */
    {"g2-unread.jsonl", ELLE_SERIALIZABLE, 1, "G2"},
    {"g2-unread.jsonl", ELLE_SNAPSHOT, 0, ""},
    {"incompatible-order.jsonl", ELLE_SNAPSHOT, 1, "incompatible-order"},
    {"lost-append.jsonl", ELLE_SNAPSHOT, 1, "incompatible-order"},
    {"duplicate-element.jsonl", ELLE_SNAPSHOT, 1, "duplicate-element"},
    {"garbage-read.jsonl", ELLE_SNAPSHOT, 1, "garbage-read"},
};

static void test_cases(void) {
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    json_t *rep;
    char err[768], got[256];
    int rc = check_file(cases[i].file, cases[i].iso, &rep, err, sizeof err);
    CHECKF(rc == cases[i].rc, "%s: exit %d, want %d (%s)", cases[i].file, rc,
           cases[i].rc, rc == 2 ? err : "");
    if (!rep) continue;
    kinds_of(rep, got, sizeof got);
    CHECKF(!strcmp(got, cases[i].kinds), "%s (%s): kinds [%s], want [%s]",
           cases[i].file,
           cases[i].iso == ELLE_SNAPSHOT ? "snapshot" : "serializable", got,
           cases[i].kinds);
    CHECK(json_is_true(json_object_get(rep, "valid")) == (cases[i].rc == 0));
    json_decref(rep);
  }
}

static void test_bad_input(void) {
  static const struct {
    const char *file, *want;
  } bads[] = {
      {"malformed-op.jsonl", "line 3: op 2: unknown op \"w\""},
      {"malformed-json.jsonl", "line 2: not JSON"},
      {"malformed-twice.jsonl", "line 3: value 1 appended to \"x\" again"},
  };
  for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
    json_t *rep;
    char err[768] = "";
    int rc = check_file(bads[i].file, ELLE_SNAPSHOT, &rep, err, sizeof err);
    CHECKF(rc == ELLE_BAD_INPUT && !rep, "%s: exit %d", bads[i].file, rc);
    CHECKF(strstr(err, bads[i].want), "%s: \"%s\"", bads[i].file, err);
  }
  static const struct {
    const char *text, *want;
  } texts[] = {
      {"[1]\n", "line 1: not a JSON object"},
      {"{\"id\":\"a\",\"outcome\":\"done\",\"ops\":[]}", "line 1: \"outcome\""},
      {"{\"id\":\"a\",\"outcome\":\"committed\",\"isolation\":\"rc\",\"ops\":[]}",
       "line 1: \"isolation\""},
      {"{\"id\":\"a\",\"outcome\":\"committed\",\"ops\":[]}\n"
       "{\"id\":\"a\",\"outcome\":\"committed\",\"ops\":[]}",
       "line 2: transaction id \"a\" again"},
      {"{\"id\":\"a\",\"outcome\":\"committed\",\"ops\":[[\"append\",\"x\",1.5]]}",
       "line 1: op 1: an append's value must be an integer"},
      {"{\"id\":\"a\",\"outcome\":\"committed\",\"ops\":[[\"r\",\"x\",[\"1\"]]]}",
       "line 1: op 1: a read's list must hold integers only"},
      {"{\"id\":\"a\",\"outcome\":\"committed\",\"ops\":[[\"r\",\"x\"]]}",
       "line 1: op 1: not"},
      {"\n\n{\"id\":\"a\",\"outcome\":\"committed\",\"ops\":{}}", "line 3:"},
      {"{\"id\":\"a\",\0\"outcome\":\"committed\",\"ops\":[]}", "line 1: a NUL"},
  };
  for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
    json_t *rep;
    char err[768] = "";
    size_t len = strlen(texts[i].text);
    if (strstr(texts[i].want, "NUL")) len += 1 + strlen(texts[i].text + len + 1);
    int rc = elle_check_text(texts[i].text, len, ELLE_SNAPSHOT, &rep, err,
                             sizeof err);
    CHECKF(rc == ELLE_BAD_INPUT, "text %zu: exit %d", i, rc);
    CHECKF(strstr(err, texts[i].want), "text %zu: \"%s\", want \"%s\"", i, err,
           texts[i].want);
  }
  json_t *rep;
  char err[64];
  CHECK(elle_check_text("", 0, ELLE_SERIALIZABLE, &rep, err, sizeof err) == 0);
  json_decref(rep);
}

/* ---- the serial simulator ---------------------------------------------------- */

static uint64_t seed;
static uint64_t rnd(void) { /* xorshift64* */
  seed ^= seed >> 12;
  seed ^= seed << 25;
  seed ^= seed >> 27;
  return seed * 2685821657736338717ULL;
}

enum { APPEND, READ };
typedef struct {
  int kind, key;
  int64_t val, *list;
  size_t len;
} sop_t;
typedef struct {
  const char *outcome;
  sop_t ops[4];
  size_t nops;
} stx_t;
typedef struct {
  int64_t *v;
  size_t n, cap;
} slist_t;

/* ntx transactions on nkeys keys, run one at a time: each reads the lists
 * as the ones before it left them (and its own appends); aborted ones and
 * half of the unknown ones leave nothing. */
static stx_t *simulate(size_t ntx, int nkeys) {
  stx_t *h = calloc(ntx, sizeof *h);
  slist_t *lists = calloc((size_t)nkeys, sizeof *lists);
  int64_t next = 1;
  for (size_t i = 0; i < ntx; i++) {
    stx_t *t = &h[i];
    unsigned r = (unsigned)(rnd() % 100);
    t->outcome = r < 85 ? "committed" : r < 93 ? "aborted" : "unknown";
    int apply = r < 85 || (r >= 93 && rnd() % 2);
    t->nops = 1 + rnd() % 4;
    size_t base[64];
    for (int k = 0; k < nkeys; k++) base[k] = lists[k].n;
    for (size_t o = 0; o < t->nops; o++) {
      sop_t *op = &t->ops[o];
      op->key = (int)(rnd() % (uint64_t)nkeys);
      slist_t *l = &lists[op->key];
      if (rnd() % 2) {
        op->kind = APPEND;
        op->val = next++;
        if (l->n == l->cap) {
          l->cap = l->cap ? 2 * l->cap : 16;
          l->v = realloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = op->val; /* undone below if not applied */
      } else {
        op->kind = READ;
        op->len = l->n;
        op->list = malloc((l->n + 1) * sizeof *op->list);
        if (l->n) memcpy(op->list, l->v, l->n * sizeof *l->v);
      }
    }
    if (!apply)
      for (int k = 0; k < nkeys; k++) lists[k].n = base[k];
  }
  for (int k = 0; k < nkeys; k++) free(lists[k].v);
  free(lists);
  return h;
}

static void free_history(stx_t *h, size_t ntx) {
  for (size_t i = 0; i < ntx; i++)
    for (size_t o = 0; o < h[i].nops; o++) free(h[i].ops[o].list);
  free(h);
}

static char *to_text(const stx_t *h, size_t ntx, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  for (size_t i = 0; i < ntx; i++) {
    fprintf(f, "{\"id\":\"t%zu\",\"outcome\":\"%s\",\"isolation\":\"serializable\","
               "\"ops\":[", i, h[i].outcome);
    for (size_t o = 0; o < h[i].nops; o++) {
      const sop_t *op = &h[i].ops[o];
      fprintf(f, "%s[\"%s\",\"k%d\",", o ? "," : "",
              op->kind == APPEND ? "append" : "r", op->key);
      if (op->kind == APPEND) {
        fprintf(f, "%lld]", (long long)op->val);
        continue;
      }
      fputc('[', f);
      for (size_t m = 0; m < op->len; m++)
        fprintf(f, "%s%lld", m ? "," : "", (long long)op->list[m]);
      fputs("]]", f);
    }
    fputs("]}\n", f);
  }
  fclose(f);
  return buf;
}

static int run(const stx_t *h, size_t ntx, elle_isolation_t iso, char *kinds,
               size_t n) {
  size_t len;
  char *text = to_text(h, ntx, &len), err[768];
  json_t *rep;
  int rc = elle_check_text(text, len, iso, &rep, err, sizeof err);
  free(text);
  if (rc == ELLE_BAD_INPUT) {
    snprintf(kinds, n, "bad input: %.400s", err);
    return rc;
  }
  kinds_of(rep, kinds, n);
  json_decref(rep);
  return rc;
}

/* The committed txn, if any, that appended val to key (serial: unique). */
static const stx_t *writer_of(const stx_t *h, size_t ntx, int key, int64_t val,
                              int *nappends) {
  for (size_t i = 0; i < ntx; i++) {
    const stx_t *t = &h[i];
    int hit = 0, n = 0;
    for (size_t o = 0; o < t->nops; o++)
      if (t->ops[o].kind == APPEND && t->ops[o].key == key) {
        n++;
        hit |= t->ops[o].val == val;
      }
    if (hit) {
      *nappends = n;
      return t;
    }
  }
  return NULL;
}

static void test_serial(void) {
  const size_t ntx = 2000;
  seed = 0x5eed2026u;
  stx_t *h = simulate(ntx, 6);
  char kinds[512];
  CHECKF(run(h, ntx, ELLE_SERIALIZABLE, kinds, sizeof kinds) == 0, "[%s]",
         kinds);
  CHECKF(run(h, ntx, ELLE_SNAPSHOT, kinds, sizeof kinds) == 0, "[%s]", kinds);

  /* A read skew: a committed T read two keys last appended by the same W
   * (W's only append to the first); T's read of the first key is made to
   * miss W's append.  T then read W's write of one key and not of the
   * other: rw T->W and wr W->T, one rw edge: G-single. */
  int done = 0;
  for (size_t i = 0; i < ntx && !done; i++) {
    stx_t *t = &h[i];
    if (strcmp(t->outcome, "committed")) continue;
    for (size_t a = 0; a < t->nops && !done; a++)
      for (size_t b = 0; b < t->nops && !done; b++) {
        sop_t *ra = &t->ops[a], *rb = &t->ops[b];
        if (ra->kind != READ || rb->kind != READ || ra->key == rb->key ||
            !ra->len || !rb->len)
          continue;
        int na, nb;
        const stx_t *wa = writer_of(h, ntx, ra->key, ra->list[ra->len - 1], &na);
        const stx_t *wb = writer_of(h, ntx, rb->key, rb->list[rb->len - 1], &nb);
        if (!wa || wa != wb || wa == t || na != 1 ||
            strcmp(wa->outcome, "committed"))
          continue;
        ra->len--;
        CHECKF(run(h, ntx, ELLE_SNAPSHOT, kinds, sizeof kinds) == 1 &&
                   !strcmp(kinds, "G-single"),
               "stale read of k%d by t%zu: [%s]", ra->key, i, kinds);
        CHECKF(run(h, ntx, ELLE_SERIALIZABLE, kinds, sizeof kinds) == 1 &&
                   !strcmp(kinds, "G-single"),
               "stale read of k%d by t%zu: [%s]", ra->key, i, kinds);
        ra->len++;
        done = 1;
      }
  }
  CHECKF(done, "no read skew to make in the generated history");

  /* A read missing its first element: no longer a prefix of the others. */
  done = 0;
  for (size_t i = ntx / 2; i < ntx && !done; i++) {
    stx_t *t = &h[i];
    for (size_t o = 0; o < t->nops && !done; o++) {
      sop_t *op = &t->ops[o];
      if (strcmp(t->outcome, "committed") || op->kind != READ || op->len < 2)
        continue;
      memmove(op->list, op->list + 1, (op->len - 1) * sizeof *op->list);
      op->len--;
      CHECKF(run(h, ntx, ELLE_SNAPSHOT, kinds, sizeof kinds) == 1 &&
                 !strcmp(kinds, "incompatible-order"),
             "t%zu's read of k%d without its first element: [%s]", i, op->key,
             kinds);
      done = 1;
    }
  }
  CHECK(done);
  free_history(h, ntx);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 10,000 transactions on 60 keys: checked in well under a second. */
static void test_speed(void) {
  const size_t ntx = 10000;
  seed = 0xfeedfaceu;
  stx_t *h = simulate(ntx, 60);
  size_t len;
  char *text = to_text(h, ntx, &len), err[768];
  json_t *rep;
  double t0 = now();
  int rc = elle_check_text(text, len, ELLE_SERIALIZABLE, &rep, err, sizeof err);
  double dt = now() - t0;
  CHECKF(rc == 0, "%s", rc == 2 ? err : "anomalies in a serial history");
  fprintf(stderr, "elle: %zu transactions (%zu bytes) checked in %.3f s\n", ntx,
          len, dt);
  CHECKF(dt < 10, "%.3f s: something went quadratic", dt); /* ASan, loaded */
  json_decref(rep);
  free(text);
  free_history(h, ntx);
}

/* The tool: exit codes, one JSON line on stdout, the line on stderr. */
static void test_tool(void) {
  static const struct {
    const char *args, *want;
    int rc;
  } rows[] = {
      {"clean.jsonl", "\"valid\":true", 0},
      {"--isolation serializable g2-write-skew.jsonl", "\"anomaly_types\":[\"G2\"]",
       1},
      {"--isolation=snapshot g2-write-skew.jsonl", "\"valid\":true", 0},
      {"malformed-op.jsonl", "malformed-op.jsonl: line 3: op 2: unknown op", 2},
      {"--isolation read-committed clean.jsonl", "--isolation", 2},
      {"", "usage:", 2},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    char cmd[2048], out[4096] = "";
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", cases_dir, tool,
             rows[i].args);
    FILE *p = popen(cmd, "r");
    REQUIRE(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    CHECKF(rc == rows[i].rc && strstr(out, rows[i].want),
           "txn_elle %s: exit %d, \"%s\"", rows[i].args, rc, out);
  }
  /* from standard input, and the lines counted there too */
  char cmd[2048], out[1024] = "";
  snprintf(cmd, sizeof cmd,
           "printf '\\n[2]\\n' | '%s' --isolation serializable - 2>&1", tool);
  FILE *p = popen(cmd, "r");
  REQUIRE(p);
  out[fread(out, 1, sizeof out - 1, p)] = 0;
  int st = pclose(p);
  CHECKF(WEXITSTATUS(st) == 2 && strstr(out, "-: line 2: not a JSON object"),
         "%s", out);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: txn_elle_test CASES-DIR TXN_ELLE\n");
    return 2;
  }
  /* absolute: the tool runs from the cases' folder */
  static char tool_path[4096];
  cases_dir = argv[1];
  tool = realpath(argv[2], tool_path) ? tool_path : argv[2];
  TEST_RUN(test_cases);
  TEST_RUN(test_bad_input);
  TEST_RUN(test_serial);
  TEST_RUN(test_speed);
  TEST_RUN(test_tool);
  return TEST_DONE();
}
