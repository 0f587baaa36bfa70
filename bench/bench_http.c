/* bench_http.c -- transfers over HTTP to doctxd with keep-alive
 * connections: the load client of tests/server/faults.sh and the HTTP
 * benchmark of `make bench` (docs/benchmarks.md, "doctxd over HTTP").
 * Debian's wrk was the other choice; this client also records what it
 * was told (the acknowledged transfers), which the fault tests audit.
 *
 * usage: bench_http --url http://HOST:PORT [--url ...] --token T
 *                   [--conns N] [--accounts A] [--batch K]
 *                   [--requests N | --duration-ms D] [--prefix P]
 *                   [--acked FILE] [--store URI] [--rounds R]
 *                   [--label BACKEND]
 *
 * Load (without --store): N connections (default 16; connection i uses
 * the i-th --url, round robin), each sending POST /v1/transfers (or, with
 * --batch K, POST /v1/transfers/batch of K) one after another, until N
 * requests in all were answered or D ms passed.  With --prefix P each
 * transfer has the client id P-c<conn>-<seq> (so a retry is safe); amounts
 * are 1 from a<i> to a<i+1> (a0 is only paid from, never paid to)
 * among accounts a0..a<A-1> (default 16), which must exist.  A
 * connection that breaks (doctxd killed or draining) is reopened, every
 * 20 ms, until the end.  --acked FILE gets one line per acknowledged
 * transfer (200: its JSON document, as `doctx audit --acked` reads).
 * Prints one line:
 *   requests N ok N codes 200:N,503:N neterr N transfers N rps R p50_ms X
 * p99_ms Y
 *
 * Benchmark (--store URI): creates a0..a<A-1> (balance 10^12) in that
 * store and through the API, then, R rounds each (median), runs the same
 * transfers (uniform pairs, no client id, --requests of them) through
 * the library in-process on --conns threads, and over HTTP on --conns
 * connections, single and in batches of --batch (default 64); records
 * the rows (bench_common.h) with the library as the baseline, under
 * --label (the backend's name: sqlite, redis-standalone, ...). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "doctx.h"

#define MAX_URLS 8
#define MAX_CONNS 256

typedef struct cfg {
  struct sockaddr_in url[MAX_URLS];
  int nurl, conns, accounts, batch, rounds;
  long requests;
  int64_t duration_ms;
  const char *token, *prefix, *acked, *store, *label;
} cfg_t;

typedef struct conn {
  int fd;
  char buf[1 << 16];
  size_t have; /* bytes buffered in buf past the last response */
} conn_t;

typedef struct load {
  const cfg_t *c;
  const pair_t *pairs; /* bench mode: the transfers; NULL: a_i -> a_i+1 */
  int batch;
  long next, answered, ok, neterr, transfers;
  long codes[600];
  double *lat;
  long nlat;
  double t_end; /* now_us() deadline, 0: none */
  FILE *acked;
  pthread_mutex_t mu;
} load_t;

static int parse_url(const char *u, struct sockaddr_in *sa) {
  char host[64];
  const char *p = strncmp(u, "http://", 7) == 0 ? u + 7 : u;
  const char *colon = strchr(p, ':');
  if (!colon || (size_t)(colon - p) >= sizeof host)
    return -1;
  memcpy(host, p, (size_t)(colon - p));
  host[colon - p] = '\0';
  memset(sa, 0, sizeof *sa);
  sa->sin_family = AF_INET;
  sa->sin_port = htons((uint16_t)atoi(colon + 1));
  return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static int conn_open(conn_t *k, const struct sockaddr_in *sa) {
  int one = 1;
  k->have = 0;
  k->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (k->fd < 0)
    return -1;
  setsockopt(k->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {60, 0}; /* no test waits this long */
  setsockopt(k->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(k->fd, (const struct sockaddr *)sa, sizeof *sa)) {
    close(k->fd);
    k->fd = -1;
    return -1;
  }
  return 0;
}

static void conn_close(conn_t *k) {
  if (k->fd >= 0)
    close(k->fd);
  k->fd = -1;
  k->have = 0;
}

/* One request on k; *status, and the body (malloc'd, NUL-terminated) in
 * *out.  0, or -1 when the connection broke (closed). */
static int roundtrip(conn_t *k, const char *method, const char *path,
                     const char *token, const char *body, int *status,
                     char **out) {
  char head[512];
  size_t blen = body ? strlen(body) : 0;
  int hl = snprintf(head, sizeof head,
                    "%s %s HTTP/1.1\r\nHost: doctxd\r\n"
                    "Authorization: Bearer %s\r\n"
                    "Content-Type: application/json\r\n"
                    "Content-Length: %zu\r\n\r\n",
                    method, path, token, blen);
  *out = NULL;
  for (size_t off = 0; off < (size_t)hl + blen;) {
    const char *p = off < (size_t)hl ? head + off : body + (off - (size_t)hl);
    size_t n = off < (size_t)hl ? (size_t)hl - off : blen - (off - (size_t)hl);
    ssize_t w = send(k->fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      goto broken;
    off += (size_t)w;
  }
  char *eoh;
  while (!(eoh = memmem(k->buf, k->have, "\r\n\r\n", 4))) {
    if (k->have >= sizeof k->buf - 1)
      goto broken;
    ssize_t r = recv(k->fd, k->buf + k->have, sizeof k->buf - 1 - k->have, 0);
    if (r <= 0)
      goto broken;
    k->have += (size_t)r;
  }
  k->buf[k->have] = '\0';
  size_t hlen = (size_t)(eoh - k->buf) + 4, clen = 0;
  if (sscanf(k->buf, "HTTP/1.%*d %d", status) != 1)
    goto broken;
  int close_after = 0;
  for (char *l = strstr(k->buf, "\r\n"); l && l < eoh;
       l = strstr(l + 2, "\r\n")) {
    if (strncasecmp(l + 2, "Content-Length:", 15) == 0)
      clen = strtoul(l + 17, NULL, 10);
    else if (strncasecmp(l + 2, "Connection: close", 17) == 0)
      close_after = 1;
  }
  if (!(*out = malloc(clen + 1)))
    goto broken;
  size_t got = k->have - hlen < clen ? k->have - hlen : clen;
  memcpy(*out, k->buf + hlen, got);
  memmove(k->buf, k->buf + hlen + got, k->have - hlen - got);
  k->have -= hlen + got;
  while (got < clen) {
    ssize_t r = recv(k->fd, *out + got, clen - got, 0);
    if (r <= 0)
      goto broken;
    got += (size_t)r;
  }
  (*out)[clen] = '\0';
  if (close_after)
    conn_close(k);
  return 0;
broken:
  free(*out);
  *out = NULL;
  conn_close(k);
  return -1;
}

/* The acknowledged transfers of an answer, one line each. */
static void record(load_t *L, int batch, const char *body) {
  json_t *v = json_loads(body, 0, NULL), *res, *it;
  size_t i;
  if (!v)
    return;
  pthread_mutex_lock(&L->mu);
  if (!batch) {
    L->transfers++;
    if (L->acked) {
      char *s = json_dumps(v, JSON_COMPACT);
      if (s)
        fprintf(L->acked, "%s\n", s);
      free(s);
    }
  } else if ((res = json_object_get(v, "results"))) {
    json_array_foreach(res, i, it) {
      json_t *tx = json_object_get(it, "transfer");
      if (json_integer_value(json_object_get(it, "status")) != 200 || !tx)
        continue;
      L->transfers++;
      if (L->acked) {
        char *s = json_dumps(tx, JSON_COMPACT);
        if (s)
          fprintf(L->acked, "%s\n", s);
        free(s);
      }
    }
  }
  pthread_mutex_unlock(&L->mu);
  json_decref(v);
}

static void one_transfer(const load_t *L, int w, long seq, long i, char *out,
                         size_t n) {
  int a = L->c->accounts;
  pair_t p = {(int)(i % a), (int)((i + 1) % a), 1};
  if (L->pairs)
    p = L->pairs[i];
  else if (p.to == 0 && a > 2)
    p.to = 1; /* a0 only pays: the tests give it little, so some decline */
  if (L->c->prefix)
    snprintf(out, n,
             "{\"id\":\"%s-c%d-%ld\",\"from\":\"a%d\",\"to\":\"a%d\","
             "\"amount\":%lld}",
             L->c->prefix, w, seq, p.from, p.to, (long long)p.amount);
  else
    snprintf(out, n, "{\"from\":\"a%d\",\"to\":\"a%d\",\"amount\":%lld}",
             p.from, p.to, (long long)p.amount);
}

typedef struct warg {
  load_t *L;
  int w;
} warg_t;

static void *load_worker(void *arg) {
  warg_t *wa = arg;
  load_t *L = wa->L;
  const cfg_t *c = L->c;
  conn_t *k = malloc(sizeof *k);
  int k_batch = L->batch > 0 ? L->batch : 1;
  size_t cap = (size_t)k_batch * 160 + 64;
  char *body = malloc(cap);
  long seq = 0;
  if (!k || !body)
    goto out;
  k->fd = -1;
  for (;;) {
    if (L->t_end > 0 && now_us() >= L->t_end)
      break;
    long slot = __atomic_fetch_add(&L->next, 1, __ATOMIC_RELAXED);
    if (c->requests > 0 && slot >= c->requests)
      break;
    size_t off = 0;
    if (L->batch > 0)
      off += (size_t)snprintf(body, cap, "{\"transfers\":[");
    for (int j = 0; j < k_batch; j++) {
      if (j)
        body[off++] = ',';
      one_transfer(L, wa->w, seq++, slot * k_batch + j, body + off, cap - off);
      off += strlen(body + off);
    }
    if (L->batch > 0)
      snprintf(body + off, cap - off, "]}");
    /* (Re)connect, every 20 ms until the end: doctxd may be restarting.
     * A request whose connection broke is not retried: it is unknown. */
    while (k->fd < 0 && conn_open(k, &c->url[wa->w % c->nurl])) {
      __atomic_add_fetch(&L->neterr, 1, __ATOMIC_RELAXED);
      if (L->t_end > 0 && now_us() >= L->t_end)
        goto out;
      if (L->t_end <= 0 && L->neterr > 100000)
        goto out;
      usleep(20000);
    }
    int status = 0;
    char *resp = NULL;
    double t0 = now_us();
    if (roundtrip(k, "POST",
                  L->batch > 0 ? "/v1/transfers/batch" : "/v1/transfers",
                  c->token, body, &status, &resp)) {
      __atomic_add_fetch(&L->neterr, 1, __ATOMIC_RELAXED);
      continue;
    }
    double us = now_us() - t0;
    long li = __atomic_fetch_add(&L->answered, 1, __ATOMIC_RELAXED);
    if (li < L->nlat)
      L->lat[li] = us;
    if (status >= 100 && status < 600)
      __atomic_add_fetch(&L->codes[status], 1, __ATOMIC_RELAXED);
    if (status == 200) {
      __atomic_add_fetch(&L->ok, 1, __ATOMIC_RELAXED);
      record(L, L->batch > 0, resp);
    }
    free(resp);
  }
out:
  if (k)
    conn_close(k);
  free(k);
  free(body);
  return NULL;
}

/* Runs one load; fills *side (rps: answered requests a second; latency
 * per request). */
static void run_load(load_t *L, bench_side_t *side) {
  pthread_t th[MAX_CONNS];
  warg_t wa[MAX_CONNS];
  int n = L->c->conns, started = 0;
  L->nlat = L->c->requests > 0 ? L->c->requests : 4000000;
  L->lat = malloc(sizeof *L->lat * (size_t)L->nlat);
  double t0 = now_us();
  L->t_end = L->c->duration_ms > 0 ? t0 + (double)L->c->duration_ms * 1000 : 0;
  for (int i = 0; i < n; i++) {
    wa[i] = (warg_t){L, i};
    if (pthread_create(&th[started], NULL, load_worker, &wa[i]) == 0)
      started++;
  }
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  double el = (now_us() - t0) / 1e6;
  long m = L->answered < L->nlat ? L->answered : L->nlat;
  side->ops_s = L->answered / el;
  side->p50_us = m ? pct(L->lat, (int)m, 0.50) : -1;
  side->p99_us = m ? pct(L->lat, (int)m, 0.99) : -1;
  free(L->lat);
  L->lat = NULL;
}

static void print_load(const load_t *L, const bench_side_t *s) {
  printf("requests %ld ok %ld codes ", L->answered, L->ok);
  const char *sep = "";
  for (int i = 100; i < 600; i++)
    if (L->codes[i]) {
      printf("%s%d:%ld", sep, i, L->codes[i]);
      sep = ",";
    }
  printf("%s neterr %ld transfers %ld rps %.0f p50_ms %.2f p99_ms %.2f\n",
         *sep ? "" : "-", L->neterr, L->transfers, s->ops_s, s->p50_us / 1000,
         s->p99_us / 1000);
  fflush(stdout);
}

/* ---- the benchmark ----------------------------------------------------------
 */

typedef struct libctx {
  dtx_store_t *st;
  const pair_t *pairs;
  int batch;
} libctx_t;

static int lib_one(void *ctx, int w, int i) {
  libctx_t *x = ctx;
  double lat;
  (void)w;
  return bench_transfer_one(x->st, &x->pairs[i], &lat);
}

static int lib_many(void *ctx, int w, int i) {
  libctx_t *x = ctx;
  double lat[256];
  (void)w;
  return bench_transfer_many(x->st, &x->pairs[(size_t)i * x->batch], x->batch,
                             lat) == 0;
}

static int setup_accounts(const cfg_t *c, dtx_store_t *st) {
  conn_t *k = malloc(sizeof *k);
  char body[128], id[32];
  int rc = 0;
  if (!k || conn_open(k, &c->url[0])) {
    free(k);
    return -1;
  }
  for (int i = 0; i < c->accounts && !rc; i++) {
    int status;
    char *resp;
    snprintf(id, sizeof id, "a%d", i);
    dtx_account_opts_t ao = {.balance = 1000000000000LL};
    json_t *acc = NULL;
    int lrc = dtx_account_create(st, id, &ao, &acc);
    json_decref(acc);
    if (lrc && lrc != DTX_EDUPKEY && lrc != DTX_ECONFLICT)
      rc = -1;
    snprintf(body, sizeof body, "{\"id\":\"%s\",\"balance\":1000000000000}",
             id);
    if (k->fd < 0 && conn_open(k, &c->url[0]))
      rc = -1;
    else if (roundtrip(k, "POST", "/v1/accounts", c->token, body, &status,
                       &resp))
      rc = -1;
    else {
      if (status != 201 && status != 409)
        rc = -1;
      free(resp);
    }
  }
  conn_close(k);
  free(k);
  return rc;
}

static int bench(cfg_t *c) {
  dtx_store_t *st = NULL;
  int rc = dtx_store_open(c->store, &st);
  if (rc) {
    fprintf(stderr, "bench_http: --store: %s\n", dtx_errdetail());
    return 1;
  }
  if (setup_accounts(c, st)) {
    fprintf(stderr, "bench_http: could not create the accounts\n");
    dtx_store_close(st);
    return 1;
  }
  int n = (int)c->requests, b = c->batch > 0 ? c->batch : 64;
  n = n / b * b;
  pair_t *pairs = malloc(sizeof *pairs * (size_t)n);
  bench_pairs(pairs, n, c->accounts, 0);
  bench_side_t ls[16], hs[16], lb[16], hb[16];
  int R = c->rounds > 16 ? 16 : c->rounds, errs = 0, e;
  for (int r = 0; r < R; r++) {
    libctx_t x = {st, pairs, b};
    bench_phase("round %d/%d: library, single", r + 1, R);
    ls[r] = bench_pool_run(c->conns, n, lib_one, &x, &e);
    errs += e;
    bench_phase("round %d/%d: HTTP, single", r + 1, R);
    cfg_t hc = *c;
    hc.prefix = NULL;
    hc.duration_ms = 0;
    load_t L = {.c = &hc, .pairs = pairs, .mu = PTHREAD_MUTEX_INITIALIZER};
    run_load(&L, &hs[r]);
    errs += (int)(n - L.ok);
    bench_phase("round %d/%d: library, batches of %d", r + 1, R, b);
    lb[r] = bench_pool_run(c->conns, n / b, lib_many, &x, &e);
    errs += e;
    lb[r].ops_s *= b; /* transfers a second */
    bench_phase("round %d/%d: HTTP, batches of %d", r + 1, R, b);
    hc.requests = n / b;
    load_t LB = {
        .c = &hc, .pairs = pairs, .batch = b, .mu = PTHREAD_MUTEX_INITIALIZER};
    run_load(&LB, &hb[r]);
    hb[r].ops_s *= b;
    errs += (int)(n - LB.transfers);
  }
  bench_side_t l1 = bench_median_side(ls, R), h1 = bench_median_side(hs, R),
               l2 = bench_median_side(lb, R), h2 = bench_median_side(hb, R);
  char wl[32];
  snprintf(wl, sizeof wl, "batch%d", b);
  bench_row(&(bench_row_t){"transfer-http", c->label, "", "single",
                           "transfers/s", "the library in-process", c->conns, R,
                           h1, l1, NULL});
  bench_row(&(bench_row_t){"transfer-http", c->label, "", wl, "transfers/s",
                           "the library in-process", c->conns, R, h2, l2,
                           NULL});
  printf("doctxd over HTTP vs the library in-process: %d transfers, %d "
         "connections/threads, median of %d rounds%s\n",
         n, c->conns, R, errs ? " (SOME DID NOT SUCCEED)" : "");
  printf("  %-16s %12s %9s %9s   %12s %9s %9s  %6s\n", "", "HTTP tx/s",
         "p50 ms", "p99 ms", "library tx/s", "p50 ms", "p99 ms", "ratio");
  printf("  %-16s %12.0f %9.2f %9.2f   %12.0f %9.2f %9.2f  %6.2f\n", "single",
         h1.ops_s, h1.p50_us / 1000, h1.p99_us / 1000, l1.ops_s,
         l1.p50_us / 1000, l1.p99_us / 1000, h1.ops_s / l1.ops_s);
  printf("  %-16s %12.0f %9.2f %9.2f   %12.0f %9.2f %9.2f  %6.2f\n", wl,
         h2.ops_s, h2.p50_us / 1000, h2.p99_us / 1000, l2.ops_s,
         l2.p50_us / 1000, l2.p99_us / 1000, h2.ops_s / l2.ops_s);
  printf("  (batch latencies are per request of %d transfers)\n", b);
  free(pairs);
  dtx_store_close(st);
  return errs ? 1 : 0;
}

int main(int argc, char **argv) {
  cfg_t c = {.conns = 16, .accounts = 16, .rounds = 3, .label = "sqlite"};
  bench_begin("bench_http", "", argc, argv);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "bench_http: %s needs a value\n", a);
      return 2;
    }
    i++;
    if (strcmp(a, "--url") == 0) {
      if (c.nurl >= MAX_URLS || parse_url(v, &c.url[c.nurl++])) {
        fprintf(stderr, "bench_http: bad --url '%s'\n", v);
        return 2;
      }
    } else if (strcmp(a, "--token") == 0)
      c.token = v;
    else if (strcmp(a, "--conns") == 0)
      c.conns = atoi(v);
    else if (strcmp(a, "--accounts") == 0)
      c.accounts = atoi(v);
    else if (strcmp(a, "--batch") == 0)
      c.batch = atoi(v);
    else if (strcmp(a, "--requests") == 0)
      c.requests = atol(v);
    else if (strcmp(a, "--duration-ms") == 0)
      c.duration_ms = atoll(v);
    else if (strcmp(a, "--prefix") == 0)
      c.prefix = v;
    else if (strcmp(a, "--acked") == 0)
      c.acked = v;
    else if (strcmp(a, "--store") == 0)
      c.store = v;
    else if (strcmp(a, "--label") == 0)
      c.label = v;
    else if (strcmp(a, "--rounds") == 0)
      c.rounds = atoi(v);
    else {
      fprintf(stderr, "bench_http: unknown option '%s'\n", a);
      return 2;
    }
  }
  if (!c.nurl || !c.token || c.conns < 1 || c.conns > MAX_CONNS ||
      c.accounts < 2 || c.batch < 0 || c.batch > 256 || c.rounds < 1 ||
      (c.requests <= 0 && c.duration_ms <= 0)) {
    fprintf(stderr, "bench_http: needs --url, --token and --requests or "
                    "--duration-ms (see its header)\n");
    return 2;
  }
  if (c.store) {
    bench_label(c.label);
    return bench_end(bench(&c));
  }
  load_t L = {.c = &c, .batch = c.batch, .mu = PTHREAD_MUTEX_INITIALIZER};
  if (c.acked && !(L.acked = fopen(c.acked, "w"))) {
    fprintf(stderr, "bench_http: cannot write %s\n", c.acked);
    return 2;
  }
  bench_side_t s;
  run_load(&L, &s);
  print_load(&L, &s);
  if (L.acked)
    fclose(L.acked);
  return bench_end(0);
}
