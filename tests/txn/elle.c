/* elle.c -- an anomaly checker for list-append histories, after the
 * method of Kingsbury and Alvaro's "Elle" (VLDB 2020), in our own words:
 *
 * Each transaction appends unique values to lists (keys) and reads whole
 * lists.  Because every appended value is unique per key and a read
 * returns the whole list, a read names exactly which appends it saw and
 * in which order: the history itself tells the order in which the store
 * installed the versions of each key, with no clock and no access to the
 * store.  So:
 *
 *  1. Version order.  Every read of a key by a committed transaction must
 *     be a prefix of the longest such read; a read that is not is an
 *     "incompatible-order" (two transactions saw the key's history
 *     differently: a lost or reordered append, which is what a lost append
 *     always looks like here).  The longest read gives the order of the
 *     appends it holds; an append of a committed transaction that no read
 *     saw came after all of them, in an order we cannot know.
 *  2. Dependencies between committed transactions (and transactions of
 *     unknown outcome whose appends a committed transaction read: they
 *     committed), from that order alone:
 *       ww  T1 appended an element, T2 appended the next one;
 *       wr  T2 read a list whose last element T1 appended;
 *       rw  T1 read a list, T2 appended the element just past it (T1 did
 *           not see T2's write: an anti-dependency).
 *  3. A serializable history has an acyclic graph.  A cycle's edge kinds
 *     say which isolation level it breaks (Adya): only ww: G0 (dirty
 *     writes); ww and wr: G1c (circular information flow); exactly one
 *     rw: G-single (read skew -- forbidden by snapshot isolation too); rw
 *     edges but no cycle with exactly one: G2 (write skew, allowed by
 *     snapshot isolation).  Without building every cycle, Tarjan's strongly
 *     connected components over the graph of the kinds in question find
 *     where cycles are; a breadth-first search inside one component then
 *     finds a short cycle to show.
 *  4. Anomalies that need no graph: a committed read of an aborted
 *     transaction's append (G1a), a read ending at an append that its
 *     transaction later followed with another append to the same key
 *     (G1b, an intermediate read), a value twice in one read
 *     ("duplicate-element"), a value nobody appended ("garbage-read").
 *
 * Reads of aborted transactions, and of transactions of unknown outcome
 * that nothing shows committed, prove nothing and are not used.
 *
 * Each component is reported once per kind: G0 per cycle-holding
 * component of the ww graph, G1c per component of the ww+wr graph that
 * holds a wr edge, G-single or else (serializable only) G2 per component
 * of the whole graph that holds an rw edge.  Findings print as one JSON
 * line, at most ELLE_SHOW cases per kind with the count of all. */
#include "elle.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ELLE_SHOW 10
/* Edge scans allowed to the G-single search, which tries one rw edge
 * after another; past it a component is judged by what was found. */
#define ELLE_BUDGET 50000000L

enum { OUT_COMMITTED, OUT_ABORTED, OUT_UNKNOWN };
enum { WW = 1, WR = 2, RW = 4 };
enum { OP_APPEND, OP_READ };

typedef struct {
  int kind, key;
  int64_t val;   /* append */
  int64_t *list; /* read: the values seen, NULL and len 0 for none */
  size_t len;
} op_t;

typedef struct {
  char *id;
  int outcome, live; /* live: committed, or shown committed by a read */
  long line;
  op_t *ops;
  size_t nops;
} txn_t;

typedef struct {
  int key, txn, last; /* last: the txn's final append to this key */
  int64_t val;
  long pos;      /* index in the key's version order, -1 if never read */
  size_t stamp;  /* duplicate check: the read that last saw it */
} app_t;

typedef struct { /* one read of a key by a live txn */
  int txn;
  op_t *op;
} rd_t;

typedef struct {
  char *name;
  rd_t *reads;
  size_t nreads, capreads;
  const op_t *longest; /* the version order, NULL when no read */
  int longest_txn;
  int broken; /* no trustworthy order: no edges from this key */
} key_t_;

typedef struct { /* string -> index, open addressing */
  char **str;
  int *idx;
  size_t cap, n;
} strmap_t;

typedef struct {
  int *slot; /* app index + 1, 0 empty */
  size_t cap, n;
} appmap_t;

typedef struct {
  int *from, *to, *kind, *key;
  size_t n, cap;
  size_t *start; /* CSR over from: edges of v are order[start[v]..start[v+1]) */
  size_t *order;
} edges_t;

typedef struct {
  elle_isolation_t iso;
  txn_t *txns;
  size_t ntxns, captxns;
  key_t_ *keys;
  size_t nkeys, capkeys;
  app_t *apps;
  size_t napps, capapps;
  strmap_t keymap, txnmap;
  appmap_t appmap;
  edges_t e;
  json_t *anoms; /* kind -> {"count","cases"} */
  long budget;
  int truncated;
  /* search scratch */
  size_t *vis, stamp;
  size_t *pedge, *path;
  int *queue;
} elle_t;

static const char *const kinds[] = {"G0", "G1a", "G1b", "G1c", "G-single",
                                     "G2", "incompatible-order",
                                     "duplicate-element", "garbage-read"};

static void oom(void) {
  fputs("txn_elle: out of memory\n", stderr);
  exit(2);
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) oom();
  return q;
}
#define GROW(arr, n, cap)                                                    \
  do {                                                                       \
    if ((n) == (cap)) {                                                      \
      (cap) = (cap) ? (cap) * 2 : 16;                                        \
      (arr) = xrealloc((arr), (cap) * sizeof *(arr));                        \
    }                                                                        \
  } while (0)

/* ---- maps ---------------------------------------------------------------- */

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

static uint64_t strhash(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* The index of s, or -1; with add >= 0, inserts s -> add when absent. */
static int strmap_get(strmap_t *m, const char *s, int add) {
  if (add >= 0 && 2 * (m->n + 1) > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 64;
    char **ns = calloc(ncap, sizeof *ns);
    int *ni = calloc(ncap, sizeof *ni);
    if (!ns || !ni) oom();
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->str[i]) continue;
      size_t j = strhash(m->str[i]) & (ncap - 1);
      while (ns[j]) j = (j + 1) & (ncap - 1);
      ns[j] = m->str[i];
      ni[j] = m->idx[i];
    }
    free(m->str);
    free(m->idx);
    m->str = ns;
    m->idx = ni;
    m->cap = ncap;
  }
  if (!m->cap) return -1;
  size_t j = strhash(s) & (m->cap - 1);
  for (; m->str[j]; j = (j + 1) & (m->cap - 1))
    if (!strcmp(m->str[j], s)) return m->idx[j];
  if (add < 0) return -1;
  m->str[j] = strdup(s);
  m->idx[j] = add;
  m->n++;
  return add;
}

static uint64_t apphash(int key, int64_t val) {
  return mix((uint64_t)val ^ mix((uint64_t)key + 0x9e3779b97f4a7c15ULL));
}

/* The append of val to key, or -1; with add >= 0, inserts when absent. */
static int app_find(elle_t *x, int key, int64_t val, int add) {
  appmap_t *m = &x->appmap;
  if (add >= 0 && 2 * (m->n + 1) > m->cap) {
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    int *ns = calloc(ncap, sizeof *ns);
    if (!ns) oom();
    for (size_t i = 0; i < m->cap; i++) {
      if (!m->slot[i]) continue;
      const app_t *a = &x->apps[m->slot[i] - 1];
      size_t j = apphash(a->key, a->val) & (ncap - 1);
      while (ns[j]) j = (j + 1) & (ncap - 1);
      ns[j] = m->slot[i];
    }
    free(m->slot);
    m->slot = ns;
    m->cap = ncap;
  }
  if (!m->cap) return -1;
  size_t j = apphash(key, val) & (m->cap - 1);
  for (; m->slot[j]; j = (j + 1) & (m->cap - 1)) {
    const app_t *a = &x->apps[m->slot[j] - 1];
    if (a->key == key && a->val == val) return m->slot[j] - 1;
  }
  if (add < 0) return -1;
  m->slot[j] = add + 1;
  m->n++;
  return add;
}

/* ---- parsing --------------------------------------------------------------- */

static int bad(char *err, size_t errlen, long line, const char *fmt,
               const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a ? a : "", b ? b : "");
  snprintf(err, errlen, "line %ld: %s", line, msg);
  return ELLE_BAD_INPUT;
}

static int key_id(elle_t *x, const char *name) {
  int k = strmap_get(&x->keymap, name, (int)x->nkeys);
  if ((size_t)k == x->nkeys) {
    GROW(x->keys, x->nkeys, x->capkeys);
    memset(&x->keys[k], 0, sizeof x->keys[k]);
    x->keys[k].name = strdup(name);
    x->nkeys++;
  }
  return k;
}

static int parse_op(elle_t *x, json_t *jop, size_t i, op_t *op, long line,
                    char *err, size_t errlen) {
  char where[32];
  snprintf(where, sizeof where, "op %zu", i + 1);
  if (!json_is_array(jop) || json_array_size(jop) != 3 ||
      !json_is_string(json_array_get(jop, 0)) ||
      !json_is_string(json_array_get(jop, 1)))
    return bad(err, errlen, line,
               "%s: not [\"append\", KEY, VALUE] or [\"r\", KEY, LIST]",
               where, NULL);
  const char *f = json_string_value(json_array_get(jop, 0));
  json_t *arg = json_array_get(jop, 2);
  op->key = key_id(x, json_string_value(json_array_get(jop, 1)));
  if (!strcmp(f, "append")) {
    if (!json_is_integer(arg))
      return bad(err, errlen, line, "%s: an append's value must be an integer",
                 where, NULL);
    op->kind = OP_APPEND;
    op->val = json_integer_value(arg);
    return 0;
  }
  if (strcmp(f, "r"))
    return bad(err, errlen, line,
               "%s: unknown op \"%s\" (expected \"append\" or \"r\")", where,
               f);
  op->kind = OP_READ;
  if (json_is_null(arg)) return 0;
  if (!json_is_array(arg))
    return bad(err, errlen, line, "%s: a read's value must be a list or null",
               where, NULL);
  op->len = json_array_size(arg);
  op->list = xrealloc(NULL, op->len * sizeof *op->list);
  for (size_t j = 0; j < op->len; j++) {
    json_t *v = json_array_get(arg, j);
    if (!json_is_integer(v))
      return bad(err, errlen, line,
                 "%s: a read's list must hold integers only", where, NULL);
    op->list[j] = json_integer_value(v);
  }
  return 0;
}

static int parse_line(elle_t *x, const char *buf, size_t len, long line,
                      char *err, size_t errlen) {
  json_error_t je;
  json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
  if (!j) return bad(err, errlen, line, "not JSON: %s", je.text, NULL);
  int rc = 0;
  json_t *jid = json_object_get(j, "id"), *jout = json_object_get(j, "outcome");
  json_t *jiso = json_object_get(j, "isolation"), *jops = json_object_get(j, "ops");
  const char *out = json_string_value(jout), *iso = json_string_value(jiso);
  if (!json_is_object(j))
    rc = bad(err, errlen, line, "not a JSON object", NULL, NULL);
  else if (!json_is_string(jid) || !*json_string_value(jid))
    rc = bad(err, errlen, line, "\"id\" must be a non-empty string", NULL,
             NULL);
  else if (!out || (strcmp(out, "committed") && strcmp(out, "aborted") &&
                    strcmp(out, "unknown")))
    rc = bad(err, errlen, line,
             "\"outcome\" must be \"committed\", \"aborted\" or \"unknown\"",
             NULL, NULL);
  else if (jiso && (!iso || (strcmp(iso, "snapshot") &&
                             strcmp(iso, "serializable"))))
    rc = bad(err, errlen, line,
             "\"isolation\" must be \"snapshot\" or \"serializable\"", NULL,
             NULL);
  else if (!json_is_array(jops))
    rc = bad(err, errlen, line, "\"ops\" must be a list", NULL, NULL);
  else if (strmap_get(&x->txnmap, json_string_value(jid), -1) >= 0)
    rc = bad(err, errlen, line, "transaction id \"%s\" again",
             json_string_value(jid), NULL);
  if (rc) {
    json_decref(j);
    return rc;
  }
  GROW(x->txns, x->ntxns, x->captxns);
  int t = (int)x->ntxns++;
  txn_t *tx = &x->txns[t];
  memset(tx, 0, sizeof *tx);
  tx->id = strdup(json_string_value(jid));
  strmap_get(&x->txnmap, tx->id, t);
  tx->line = line;
  tx->outcome = !strcmp(out, "committed") ? OUT_COMMITTED
                : !strcmp(out, "aborted") ? OUT_ABORTED
                                          : OUT_UNKNOWN;
  tx->nops = json_array_size(jops);
  tx->ops = calloc(tx->nops ? tx->nops : 1, sizeof *tx->ops);
  for (size_t i = 0; i < tx->nops && !rc; i++) {
    op_t *op = &tx->ops[i];
    rc = parse_op(x, json_array_get(jops, i), i, op, line, err, errlen);
    if (rc || op->kind != OP_APPEND) continue;
    int a = app_find(x, op->key, op->val, -1);
    if (a >= 0) {
      char v[32], first[64];
      snprintf(v, sizeof v, "%lld", (long long)op->val);
      snprintf(first, sizeof first, "%s, line %ld", x->txns[x->apps[a].txn].id,
               x->txns[x->apps[a].txn].line);
      char msg[160];
      snprintf(msg, sizeof msg, "value %s appended to \"%%s\" again (first by %%s)",
               v);
      rc = bad(err, errlen, line, msg, x->keys[op->key].name, first);
      continue;
    }
    GROW(x->apps, x->napps, x->capapps);
    a = (int)x->napps++;
    x->apps[a] = (app_t){.key = op->key, .txn = t, .val = op->val, .pos = -1};
    app_find(x, op->key, op->val, a);
  }
  json_decref(j);
  return rc;
}

/* ---- inference ----------------------------------------------------------- */

/* Marks each txn's final append per key. */
static void mark_last(elle_t *x) {
  for (size_t i = 0; i < x->ntxns; i++) {
    txn_t *t = &x->txns[i];
    for (size_t k = t->nops; k-- > 0;) {
      op_t *op = &t->ops[k];
      if (op->kind != OP_APPEND) continue;
      int later = 0;
      for (size_t m = k + 1; m < t->nops && !later; m++)
        later = t->ops[m].kind == OP_APPEND && t->ops[m].key == op->key;
      if (!later) x->apps[app_find(x, op->key, op->val, -1)].last = 1;
    }
  }
}

/* Live = committed, or of unknown outcome and read by a live txn (it
 * committed, then): a worklist, each live txn's reads scanned once. */
static void mark_live(elle_t *x) {
  int *work = xrealloc(NULL, (x->ntxns + 1) * sizeof *work);
  size_t nw = 0;
  for (size_t i = 0; i < x->ntxns; i++)
    if (x->txns[i].outcome == OUT_COMMITTED) {
      x->txns[i].live = 1;
      work[nw++] = (int)i;
    }
  while (nw) {
    txn_t *t = &x->txns[work[--nw]];
    for (size_t k = 0; k < t->nops; k++) {
      op_t *op = &t->ops[k];
      for (size_t m = 0; op->kind == OP_READ && m < op->len; m++) {
        int a = app_find(x, op->key, op->list[m], -1);
        if (a < 0) continue;
        txn_t *w = &x->txns[x->apps[a].txn];
        if (w->live || w->outcome != OUT_UNKNOWN) continue;
        w->live = 1;
        work[nw++] = x->apps[a].txn;
      }
    }
  }
  free(work);
}

static json_t *list_json(const op_t *op) {
  json_t *l = json_array();
  for (size_t i = 0; i < op->len; i++)
    json_array_append_new(l, json_integer(op->list[i]));
  return l;
}

static void add_case(elle_t *x, const char *kind, json_t *c) {
  json_t *k = json_object_get(x->anoms, kind);
  if (!k) {
    k = json_pack("{s:i,s:[]}", "count", 0, "cases");
    json_object_set_new(x->anoms, kind, k);
  }
  json_int_t n = json_integer_value(json_object_get(k, "count")) + 1;
  json_object_set_new(k, "count", json_integer(n));
  if (n <= ELLE_SHOW)
    json_array_append_new(json_object_get(k, "cases"), c);
  else
    json_decref(c);
}

/* Per read of a live txn: garbage, duplicates, G1a, G1b; collects the
 * reads per key for the order. */
static void check_reads(elle_t *x) {
  size_t stamp = 0;
  for (size_t i = 0; i < x->ntxns; i++) {
    txn_t *t = &x->txns[i];
    if (!t->live) continue;
    for (size_t k = 0; k < t->nops; k++) {
      op_t *op = &t->ops[k];
      if (op->kind != OP_READ) continue;
      key_t_ *key = &x->keys[op->key];
      GROW(key->reads, key->nreads, key->capreads);
      key->reads[key->nreads++] = (rd_t){.txn = (int)i, .op = op};
      stamp++;
      for (size_t m = 0; m < op->len; m++) {
        int a = app_find(x, op->key, op->list[m], -1);
        if (a < 0) {
          add_case(x, "garbage-read",
                   json_pack("{s:s,s:s,s:I}", "txn", t->id, "key", key->name,
                             "value", (json_int_t)op->list[m]));
          key->broken = 1;
          continue;
        }
        app_t *ap = &x->apps[a];
        if (ap->stamp == stamp) {
          add_case(x, "duplicate-element",
                   json_pack("{s:s,s:s,s:I,s:o}", "txn", t->id, "key",
                             key->name, "value", (json_int_t)ap->val, "read",
                             list_json(op)));
          key->broken = 1;
        }
        ap->stamp = stamp;
        txn_t *w = &x->txns[ap->txn];
        if (w->outcome == OUT_ABORTED)
          add_case(x, "G1a",
                   json_pack("{s:s,s:s,s:s,s:I}", "reader", t->id, "writer",
                             w->id, "key", key->name, "value",
                             (json_int_t)ap->val));
        else if (m + 1 == op->len && !ap->last && ap->txn != (int)i)
          add_case(x, "G1b",
                   json_pack("{s:s,s:s,s:s,s:I}", "reader", t->id, "writer",
                             w->id, "key", key->name, "value",
                             (json_int_t)ap->val));
      }
    }
  }
}

static int is_prefix(const op_t *a, const op_t *b) {
  if (a->len > b->len) return 0;
  for (size_t i = 0; i < a->len; i++)
    if (a->list[i] != b->list[i]) return 0;
  return 1;
}

/* The version order of each key: its longest read, when every read is a
 * prefix of it. */
static void infer_orders(elle_t *x) {
  for (size_t k = 0; k < x->nkeys; k++) {
    key_t_ *key = &x->keys[k];
    for (size_t r = 0; r < key->nreads; r++)
      if (!key->longest || key->reads[r].op->len > key->longest->len) {
        key->longest = key->reads[r].op;
        key->longest_txn = key->reads[r].txn;
      }
    for (size_t r = 0; key->longest && r < key->nreads; r++) {
      const op_t *op = key->reads[r].op;
      if (is_prefix(op, key->longest)) continue;
      add_case(x, "incompatible-order",
               json_pack("{s:s,s:[{s:s,s:o},{s:s,s:o}]}", "key", key->name,
                         "reads", "txn", x->txns[key->longest_txn].id, "value",
                         list_json(key->longest), "txn",
                         x->txns[key->reads[r].txn].id, "value",
                         list_json(op)));
      key->broken = 1;
      break;
    }
    if (key->broken || !key->longest) continue;
    for (size_t i = 0; i < key->longest->len; i++)
      x->apps[app_find(x, (int)k, key->longest->list[i], -1)].pos = (long)i;
  }
}

/* ---- the graph ----------------------------------------------------------- */

static void edge(elle_t *x, int from, int to, int kind, int key) {
  if (from < 0 || to < 0 || from == to || !x->txns[from].live || !x->txns[to].live) return;
  edges_t *e = &x->e;
  if (e->n == e->cap) {
    e->cap = e->cap ? e->cap * 2 : 1024;
    e->from = xrealloc(e->from, e->cap * sizeof *e->from);
    e->to = xrealloc(e->to, e->cap * sizeof *e->to);
    e->kind = xrealloc(e->kind, e->cap * sizeof *e->kind);
    e->key = xrealloc(e->key, e->cap * sizeof *e->key);
  }
  e->from[e->n] = from;
  e->to[e->n] = to;
  e->kind[e->n] = kind;
  e->key[e->n] = key;
  e->n++;
}

static int writer(elle_t *x, int key, int64_t val) {
  int a = app_find(x, key, val, -1);
  return a < 0 ? -1 : x->apps[a].txn;
}

static void build_edges(elle_t *x) {
  /* The live appends that no read saw, per key: after all the read ones,
   * in an order unknown (a CSR: ustart[k]..ustart[k+1] of unread). */
  size_t *ustart = calloc(x->nkeys + 2, sizeof *ustart);
  int *unread = xrealloc(NULL, (x->napps + 1) * sizeof *unread);
  if (!ustart) oom();
  for (size_t a = 0; a < x->napps; a++) {
    const app_t *ap = &x->apps[a];
    if (ap->pos < 0 && x->txns[ap->txn].live && !x->keys[ap->key].broken)
      ustart[ap->key + 2]++;
  }
  for (size_t k = 0; k < x->nkeys; k++) ustart[k + 2] += ustart[k + 1];
  for (size_t a = 0; a < x->napps; a++) {
    const app_t *ap = &x->apps[a];
    if (ap->pos < 0 && x->txns[ap->txn].live && !x->keys[ap->key].broken)
      unread[ustart[ap->key + 1]++] = ap->txn;
  }
  for (size_t k = 0; k < x->nkeys; k++) {
    key_t_ *key = &x->keys[k];
    if (key->broken) continue;
    const op_t *ord = key->longest;
    size_t olen = ord ? ord->len : 0;
    const int *un = unread + ustart[k], *unend = unread + ustart[k + 1];
    for (size_t i = 0; i + 1 < olen; i++)
      edge(x, writer(x, (int)k, ord->list[i]),
           writer(x, (int)k, ord->list[i + 1]), WW, (int)k);
    int lastw = olen ? writer(x, (int)k, ord->list[olen - 1]) : -1;
    for (const int *u = un; lastw >= 0 && u < unend; u++)
      edge(x, lastw, *u, WW, (int)k);
    for (size_t r = 0; r < key->nreads; r++) {
      const op_t *op = key->reads[r].op;
      int t = key->reads[r].txn;
      /* wr from the last element not the reader's own: the version it read
       * before its own appends */
      for (size_t n = op->len; n-- > 0;) {
        int w = writer(x, (int)k, op->list[n]);
        if (w == t) continue;
        edge(x, w, t, WR, (int)k);
        break;
      }
      if (op->len < olen)
        edge(x, t, writer(x, (int)k, ord->list[op->len]), RW, (int)k);
      else
        for (const int *u = un; u < unend; u++) edge(x, t, *u, RW, (int)k);
    }
  }
  free(ustart);
  free(unread);
}

/* Adjacency by source: the edges of v are order[start[v]..start[v+1]). */
static void index_edges(elle_t *x) {
  edges_t *e = &x->e;
  e->start = calloc(x->ntxns + 2, sizeof *e->start);
  e->order = xrealloc(NULL, (e->n + 1) * sizeof *e->order);
  if (!e->start) oom();
  for (size_t i = 0; i < e->n; i++) e->start[e->from[i] + 2]++;
  for (size_t v = 0; v < x->ntxns; v++) e->start[v + 2] += e->start[v + 1];
  for (size_t i = 0; i < e->n; i++) e->order[e->start[e->from[i] + 1]++] = i;
}

/* Tarjan's strongly connected components over the edges of mask, without
 * recursion (10,000 transactions in a chain would be 10,000 frames):
 * comp[v] gets v's component, size[] (ntxns entries) the sizes; returns
 * the number of components. */
static size_t tarjan(elle_t *x, int mask, int *comp, size_t *size) {
  size_t nv = x->ntxns, next = 0, ncomp = 0, sp = 0, cp = 0;
  const edges_t *e = &x->e;
  long *index = xrealloc(NULL, (nv + 1) * sizeof *index);
  long *low = xrealloc(NULL, (nv + 1) * sizeof *low);
  char *on = calloc(nv + 1, 1);
  int *stack = xrealloc(NULL, (nv + 1) * sizeof *stack);
  int *cv = xrealloc(NULL, (nv + 1) * sizeof *cv);    /* call stack: node */
  size_t *ci = xrealloc(NULL, (nv + 1) * sizeof *ci); /* and edge cursor */
  if (!on) oom();
  for (size_t v = 0; v < nv; v++) index[v] = -1;
  for (size_t s = 0; s < nv; s++) {
    if (index[s] >= 0) continue;
    index[s] = low[s] = (long)next++;
    stack[sp++] = (int)s;
    on[s] = 1;
    cv[cp] = (int)s;
    ci[cp++] = e->start[s];
    while (cp) {
      int v = cv[cp - 1];
      if (ci[cp - 1] < e->start[v + 1]) {
        size_t ed = e->order[ci[cp - 1]++];
        if (!(e->kind[ed] & mask)) continue;
        int w = e->to[ed];
        if (index[w] < 0) {
          index[w] = low[w] = (long)next++;
          stack[sp++] = w;
          on[w] = 1;
          cv[cp] = w;
          ci[cp++] = e->start[w];
        } else if (on[w] && index[w] < low[v]) {
          low[v] = index[w];
        }
        continue;
      }
      if (low[v] == index[v]) {
        size[ncomp] = 0;
        int w;
        do {
          w = stack[--sp];
          on[w] = 0;
          comp[w] = (int)ncomp;
          size[ncomp]++;
        } while (w != v);
        ncomp++;
      }
      if (--cp && low[v] < low[cv[cp - 1]]) low[cv[cp - 1]] = low[v];
    }
  }
  free(index);
  free(low);
  free(on);
  free(stack);
  free(cv);
  free(ci);
  return ncomp;
}

/* A shortest path from src to dst (src == dst: a shortest cycle through
 * it) over the edges of mask whose ends are in src's component of comp:
 * its edges go to x->path, their number is returned, 0 for none (or the
 * search budget spent). */
static size_t bfs(elle_t *x, int src, int dst, int mask, const int *comp) {
  const edges_t *e = &x->e;
  size_t head = 0, tail = 0;
  int c = comp[src];
  x->stamp++;
  x->vis[src] = x->stamp;
  x->queue[tail++] = src;
  while (head < tail) {
    int v = x->queue[head++];
    for (size_t i = e->start[v]; i < e->start[v + 1]; i++) {
      if (--x->budget < 0) {
        x->truncated = 1;
        return 0;
      }
      size_t ed = e->order[i];
      int w = e->to[ed];
      if (!(e->kind[ed] & mask) || comp[w] != c) continue;
      if (w == dst) {
        size_t n = 0;
        x->path[n++] = ed;
        for (int u = v; u != src; u = e->from[x->pedge[u]])
          x->path[n++] = x->pedge[u];
        for (size_t a = 0, b = n - 1; a < b; a++, b--) {
          size_t tmp = x->path[a];
          x->path[a] = x->path[b];
          x->path[b] = tmp;
        }
        return n;
      }
      if (x->vis[w] == x->stamp) continue;
      x->vis[w] = x->stamp;
      x->pedge[w] = ed;
      x->queue[tail++] = w;
    }
  }
  return 0;
}

/* {"cycle":[{"from","to","type","key"}...]}: first (if not SIZE_MAX),
 * then the n edges of x->path. */
static json_t *cycle_json(elle_t *x, size_t first, size_t n) {
  json_t *cyc = json_array();
  for (size_t i = first == SIZE_MAX ? 1 : 0; i <= n; i++) {
    size_t ed = i == 0 ? first : x->path[i - 1];
    int k = x->e.kind[ed];
    json_array_append_new(
        cyc, json_pack("{s:s,s:s,s:s,s:s}", "from", x->txns[x->e.from[ed]].id,
                       "to", x->txns[x->e.to[ed]].id, "type",
                       k == WW ? "ww" : k == WR ? "wr" : "rw", "key",
                       x->keys[x->e.key[ed]].name));
  }
  return json_pack("{s:o}", "cycle", cyc);
}

static void find_cycles(elle_t *x) {
  size_t nv = x->ntxns, ne = x->e.n;
  int *c1 = xrealloc(NULL, (nv + 1) * sizeof *c1);
  int *c2 = xrealloc(NULL, (nv + 1) * sizeof *c2);
  int *c3 = xrealloc(NULL, (nv + 1) * sizeof *c3);
  size_t *size = xrealloc(NULL, (nv + 1) * sizeof *size);
  size_t *first = xrealloc(NULL, (nv + 1) * sizeof *first);
  char *done = xrealloc(NULL, nv + 1);

  /* G0: a cycle of ww edges, one per component */
  size_t nc = tarjan(x, WW, c1, size);
  memset(done, 0, nc + 1);
  for (size_t v = 0; v < nv; v++) {
    int c = c1[v];
    if (size[c] < 2 || done[c]) continue;
    done[c] = 1;
    size_t n = bfs(x, (int)v, (int)v, WW, c1);
    if (n) add_case(x, "G0", cycle_json(x, SIZE_MAX, n));
  }
  /* G1c: a cycle of ww and wr edges through a wr edge */
  nc = tarjan(x, WW | WR, c2, size);
  memset(done, 0, nc + 1);
  for (size_t ed = 0; ed < ne; ed++) {
    int from = x->e.from[ed], to = x->e.to[ed], c = c2[from];
    if (x->e.kind[ed] != WR || c2[to] != c || done[c]) continue;
    done[c] = 1;
    size_t n = bfs(x, to, from, WW | WR, c2);
    if (n) add_case(x, "G1c", cycle_json(x, ed, n));
  }
  /* G-single: an rw edge closed by a path of ww and wr edges; else, under
   * serializable, G2: closed by any path */
  nc = tarjan(x, WW | WR | RW, c3, size);
  memset(done, 0, nc + 1);
  for (size_t c = 0; c < nc; c++) first[c] = SIZE_MAX;
  for (size_t ed = 0; ed < ne; ed++) {
    int from = x->e.from[ed], to = x->e.to[ed], c = c3[from];
    if (x->e.kind[ed] != RW || c3[to] != c) continue;
    if (first[c] == SIZE_MAX) first[c] = ed;
    if (done[c]) continue;
    size_t n = bfs(x, to, from, WW | WR, c2[to] == c2[from] ? c2 : c3);
    if (!n) continue;
    done[c] = 1;
    add_case(x, "G-single", cycle_json(x, ed, n));
  }
  for (size_t c = 0; x->iso == ELLE_SERIALIZABLE && c < nc; c++) {
    if (done[c] || first[c] == SIZE_MAX) continue;
    size_t ed = first[c];
    x->budget = ELLE_BUDGET; /* a G2 is known here: find a cycle to show */
    size_t n = bfs(x, x->e.to[ed], x->e.from[ed], WW | WR | RW, c3);
    add_case(x, "G2", n ? cycle_json(x, ed, n)
                        : json_pack("{s:s}", "txn", x->txns[x->e.from[ed]].id));
  }
  free(c1);
  free(c2);
  free(c3);
  free(size);
  free(first);
  free(done);
}

/* ---- the whole check --------------------------------------------------------- */

static void elle_free(elle_t *x) {
  for (size_t i = 0; i < x->ntxns; i++) {
    for (size_t k = 0; k < x->txns[i].nops; k++) free(x->txns[i].ops[k].list);
    free(x->txns[i].ops);
    free(x->txns[i].id);
  }
  free(x->txns);
  for (size_t k = 0; k < x->nkeys; k++) {
    free(x->keys[k].name);
    free(x->keys[k].reads);
  }
  free(x->keys);
  free(x->apps);
  for (strmap_t *m = &x->keymap; m; m = m == &x->keymap ? &x->txnmap : NULL) {
    for (size_t i = 0; i < m->cap; i++) free(m->str[i]);
    free(m->str);
    free(m->idx);
  }
  free(x->appmap.slot);
  free(x->e.from);
  free(x->e.to);
  free(x->e.kind);
  free(x->e.key);
  free(x->e.start);
  free(x->e.order);
  free(x->vis);
  free(x->pedge);
  free(x->queue);
  free(x->path);
  json_decref(x->anoms);
}

int elle_check(FILE *in, elle_isolation_t iso, json_t **report, char *err,
               size_t errlen) {
  elle_t x;
  memset(&x, 0, sizeof x);
  x.iso = iso;
  x.budget = ELLE_BUDGET;
  x.anoms = json_object();
  *report = NULL;
  char *buf = NULL;
  size_t cap = 0;
  ssize_t len;
  long line = 0;
  int rc = 0;
  while (!rc && (len = getline(&buf, &cap, in)) >= 0) {
    line++;
    if (strlen(buf) != (size_t)len) {
      rc = bad(err, errlen, line, "a NUL byte", NULL, NULL);
      break;
    }
    size_t i = 0;
    while (i < (size_t)len && strchr(" \t\r\n", buf[i])) i++;
    if (i == (size_t)len) continue; /* a blank line */
    rc = parse_line(&x, buf, (size_t)len, line, err, errlen);
  }
  free(buf);
  if (!rc && ferror(in))
    rc = bad(err, errlen, line + 1, "read error", NULL, NULL);
  if (rc) {
    elle_free(&x);
    return ELLE_BAD_INPUT;
  }
  mark_last(&x);
  mark_live(&x);
  check_reads(&x);
  infer_orders(&x);
  build_edges(&x);
  index_edges(&x);
  size_t nv = x.ntxns + 1;
  x.vis = calloc(nv, sizeof *x.vis);
  x.pedge = xrealloc(NULL, nv * sizeof *x.pedge);
  x.queue = xrealloc(NULL, nv * sizeof *x.queue);
  x.path = xrealloc(NULL, nv * sizeof *x.path);
  if (!x.vis) oom();
  find_cycles(&x);

  json_t *types = json_array();
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (json_object_get(x.anoms, kinds[i]))
      json_array_append_new(types, json_string(kinds[i]));
  int found = json_array_size(types) > 0;
  *report = json_pack("{s:b,s:s,s:I,s:o,s:O}", "valid", !found, "isolation",
                      iso == ELLE_SERIALIZABLE ? "serializable" : "snapshot",
                      "txns", (json_int_t)x.ntxns, "anomaly_types", types,
                      "anomalies", x.anoms);
  if (x.truncated) json_object_set_new(*report, "truncated", json_true());
  elle_free(&x);
  return found ? ELLE_ANOMALIES : ELLE_CLEAN;
}

int elle_check_text(const char *text, size_t len, elle_isolation_t iso,
                    json_t **report, char *err, size_t errlen) {
  *report = NULL;
  if (!len) text = "\n", len = 1; /* fmemopen refuses a size of 0 */
  FILE *in = fmemopen((void *)text, len, "r");
  if (!in) {
    snprintf(err, errlen, "fmemopen failed");
    return ELLE_BAD_INPUT;
  }
  int rc = elle_check(in, iso, report, err, errlen);
  fclose(in);
  return rc;
}

#ifndef DTX_ELLE_NO_MAIN
static const char usage[] =
    "usage: txn_elle [--isolation snapshot|serializable] FILE|-\n"
    "Checks a list-append history (JSON Lines) for G0, G1a, G1b, G1c and\n"
    "G-single (and G2 under serializable; snapshot is the default); prints\n"
    "one JSON line of findings.  Exit 0: none, 1: anomalies, 2: bad input.\n"
    "docs/testing.md, \"The anomaly checker\", has the format.\n";

int main(int argc, char **argv) {
  elle_isolation_t iso = ELLE_SNAPSHOT;
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    if (!strcmp(a, "--isolation") && i + 1 < argc)
      v = argv[++i];
    else if (!strncmp(a, "--isolation=", 12))
      v = a + 12;
    if (v) {
      if (!strcmp(v, "snapshot"))
        iso = ELLE_SNAPSHOT;
      else if (!strcmp(v, "serializable"))
        iso = ELLE_SERIALIZABLE;
      else {
        fprintf(stderr, "txn_elle: --isolation: \"%s\" is not snapshot or "
                        "serializable\n", v);
        return 2;
      }
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    } else if ((a[0] == '-' && a[1]) || file) {
      fprintf(stderr, "txn_elle: unexpected argument \"%s\"\n%s", a, usage);
      return 2;
    } else {
      file = a;
    }
  }
  if (!file) {
    fputs(usage, stderr);
    return 2;
  }
  FILE *in = strcmp(file, "-") ? fopen(file, "r") : stdin;
  if (!in) {
    fprintf(stderr, "txn_elle: %s: cannot open\n", file);
    return 2;
  }
  char err[768];
  json_t *rep = NULL;
  int rc = elle_check(in, iso, &rep, err, sizeof err);
  if (in != stdin) fclose(in);
  if (rc == ELLE_BAD_INPUT) {
    fprintf(stderr, "txn_elle: %s: %s\n", file, err);
    return rc;
  }
  char *s = json_dumps(rep, JSON_COMPACT);
  puts(s);
  free(s);
  json_decref(rep);
  return rc;
}
#endif
