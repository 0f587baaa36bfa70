#!/usr/bin/env bash
# make bench: the store, bulk, transfer and aggregate benchmarks on SQLite, then
# the Redis benchmark on a standalone server and a 3+3 Cluster; each prints
# ratios against a native baseline measured in the same run (medians of rounds:
# the machine is noisy, so compare within a run, not across runs).
#
# usage: scripts/bench.sh [BUILD_DIR]      (default: build)
# Environment:
#   BENCH_ONLY=sqlite|redis    run one part only (default: both)
#   BENCH_SCALE=F              the factor on every benchmark's default
#                              amount of work (make bench's default 0.4:
#                              a few minutes on an idle 2-core machine; 1
#                              is the amount a benchmark run by hand does,
#                              2-4 for steadier figures, 0.1 a smoke run)
#   BENCH_REDIS_TRANSFERS=N    transfers per round in the main Redis runs
#                              (8000 x BENCH_SCALE, median of 5
#                              rounds; the durability runs use half,
#                              median of 3)
#   BENCH_REDIS_JOBS=N         jobs per drain round of bench_job on Redis
#                              (300 x BENCH_SCALE; latency rounds
#                              run N/4)
#   BENCH_RESULTS=DIR          where the JSON results and the charts go
#                              (default bench/results, emptied first)
#
# Every benchmark writes its rows to DIR/<bench>[-<label>].json (machine,
# backend, sync mode, workers, ops/s, p50/p99, the native baseline and the
# ratio: bench/bench_common.h), shows a progress line on stderr while it
# runs, and at the end scripts/bench_plot.sh draws DIR/chart-*.png (doctx
# beside native per backend and sync mode) and DIR/ratios.png with
# gnuplot.
#
# The Redis part starts its own servers (tests/redis/servers.sh; a trap
# stops them on exit) and prints:
#   1. bench_redis on standalone and on the cluster, uniform and 90%-hot:
#      doctx transfers/s, p50/p99, store operations, round trips and Redis
#      commands per transfer, beside MULTI/INCRBY/INCRBY/EXEC on two keys of
#      one slot, and the ratio.
#   1b. bench_bulk on both: bulk_write in batches of 1, 16 and 64 against
#      a pipeline of as many EVALSHA of a compare-and-set script (on
#      SQLite, run in the first part: against one transaction of N UPDATEs).
#   1c. bench_job on both: no-op jobs added, claimed and completed by 1, 4
#      and 8 worker threads, against a reliable list queue (LPUSH, LMOVE
#      ready->processing, LREM) under one hash tag (on SQLite, run in the
#      first part: against a table queue claimed with UPDATE ... RETURNING);
#      and, with 8 workers, on a cluster of one master holding every slot
#      (doctx's throughput should grow with masters, not sit on one).
#   1d. bench_ledger on both: 2-leg ledger entries posted by 8 writers
#      (and one committer), uniform and 90%-hot, against MULTI / INCRBY x2 /
#      XADD / EXEC in one slot (on SQLite, in the first part: against one
#      transaction inserting the entry and updating two balance rows); and
#      balance reads 1,000 legs past the cache against GET (SELECT).
#   1e. bench_lock on both: lock acquire + fenced write + release cycles
#      against SET NX PX / SET / Lua compare-and-delete (on SQLite: one
#      plain transaction doing the same updates); then, in the same run,
#      lock hold cycles (dtx_lock_hold_start, the fenced write,
#      dtx_lock_hold_stop) against the same calls by hand (target >= 0.9).
#   1f. bench_http on both (and on SQLite, in the first part): transfers
#      over HTTP to a doctxd (16 keep-alive connections, single and the
#      batch endpoint by 64) against the same transfers through the
#      library in-process in the same run (docs/benchmarks.md).
#   1g. bench_txn on both (and on SQLite sync=normal, in the first part):
#      multi-document transactions (dtx_txn_run, snapshot) against the raw
#      single-document operations they are built on: a 2-document
#      transfer against two conditional updates, a 1-document transaction
#      against one update, read-only snapshots of 2 and 10 documents
#      against as many finds, and the transfer with 90 % of payers on one
#      account, with the transactions' abort rate (docs/benchmarks.md,
#      "Transactions").
#   1h. bench_scale on SQLite and the standalone server, in one run (so
#      one bench/results/scale.json): how cost grows with the work -- ns
#      per document of recover (10 % of transfers abandoned by a crash),
#      audit, transfer list paging to the end, an indexed find and ledger
#      balances, at 10^4 and 10^5 documents (and 10^6 with BENCH_SCALE >=
#      4), with the growth t(10N) / (10 t(N)) (docs/benchmarks.md, "How
#      cost grows with the work").  With BENCH_ONLY=sqlite, or without
#      redis-server, it runs in the first part on SQLite alone.
#   2. the store's ceiling: redis-benchmark, pipelined EVALSHA of a script
#      shaped like doctx's document compare-and-set, on the standalone
#      server and on one cluster master; and the share of it doctx uses,
#      transfers/s x round trips (or commands) per transfer / ceiling.
#   3. durability: uniform only, fewer rounds -- standalone without
#      persistence, with appendfsync everysec and always (fresh servers),
#      and the cluster without and with ?wait=1.
# Needs redis-server, redis-cli, redis-benchmark and python3; without them
# the Redis part is skipped (an error with BENCH_ONLY=redis).
set -euo pipefail
BUILD=${1:-build}
ONLY=${BENCH_ONLY:-all}
case $ONLY in
all | sqlite | redis) ;;
*) echo "bench: BENCH_ONLY must be sqlite or redis" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BENCH_SCALE=${BENCH_SCALE:-0.4}
SCALE=$BENCH_SCALE
export BENCH_RESULTS=${BENCH_RESULTS:-$ROOT/bench/results}
mkdir -p "$BENCH_RESULTS"
rm -f "$BENCH_RESULTS"/bench_*.json "$BENCH_RESULTS"/*.png \
  "$BENCH_RESULTS"/summary.tsv "$BENCH_RESULTS"/scale.json
BENCH_GIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
BENCH_NOTE="load at start: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
export BENCH_GIT BENCH_NOTE
# n x BENCH_SCALE, at least 1 (the shell's side of bench_scaled()).
scaled() { awk -v n="$1" -v f="$SCALE" 'BEGIN { v = int(n * f); print v < 1 ? 1 : v }'; }

# http_bench LABEL HTTP_URI LIB_URI: transfers over HTTP to a doctxd on
# HTTP_URI (16 keep-alive connections, single and batches of 64) against
# the same transfers through the library in-process on LIB_URI, in one
# run (bench/bench_http.c; docs/benchmarks.md, "doctxd over HTTP").
http_bench() {
  local label=$1 dir pid url="" line rc=0
  dir=$(mktemp -d)
  (umask 077 && echo "bench bench-0123456789abcdef0123 write" >"$dir/tokens")
  "$BUILD/doctxd" --store "$2" --tokens "$dir/tokens" --listen 127.0.0.1:0 \
    --rate 0 --threads 16 2>"$dir/doctxd.log" &
  pid=$!
  for _ in $(seq 200); do
    line=$(grep -m1 'listening on' "$dir/doctxd.log" || :)
    [ -n "$line" ] && { url="http://${line##* on }"; break; }
    sleep 0.05
  done
  if [ -n "$url" ]; then
    "$BUILD/bench_http" --url "$url" --token bench-0123456789abcdef0123 \
      --store "$3" --label "$label" --conns 16 --accounts 64 \
      --requests "$(scaled 6400)" --batch 64 --rounds 3 || rc=$?
  else
    echo "bench: doctxd did not start: $(tail -3 "$dir/doctxd.log")" >&2
    rc=1
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || :
  rm -rf "$dir"
  return $rc
}

# The charts, from whatever ran (called before each normal exit).
plot() {
  if command -v gnuplot >/dev/null && command -v python3 >/dev/null; then
    echo
    echo "## charts"
    bash "$ROOT/scripts/bench_plot.sh" "$BENCH_RESULTS" ||
      echo "bench: drawing the charts failed" >&2
  else
    echo "bench: gnuplot or python3 missing: no charts (scripts/setup.sh)" >&2
  fi
}

if [ "$ONLY" != redis ]; then
  echo "## bench_store: find_one_and_update \$inc vs raw SQLite UPDATE"
  "$BUILD/bench_store"
  echo
  echo "## bench_bulk: bulk_write batches of 1/16/64 vs one SQLite transaction of N UPDATEs"
  "$BUILD/bench_bulk"
  echo
  echo "## bench_transfer: two-phase transfers vs one SQLite transaction each"
  "$BUILD/bench_transfer"
  echo
  echo "## bench_aggregate: \$match/\$unwind/\$group sum over 100k ledger documents vs SQLite json_each + GROUP BY"
  "$BUILD/bench_aggregate"
  echo
  echo "## bench_job: add + claim + complete of no-op jobs vs a SQLite table queue (UPDATE ... RETURNING)"
  "$BUILD/bench_job"
  echo
  echo "## bench_ledger: 2-leg ledger posts vs one SQLite transaction (INSERT entry, UPDATE x2); balance reads"
  "$BUILD/bench_ledger"
  echo
  echo "## bench_lock: lock acquire + fenced write + release vs one plain SQLite transaction; lock hold cycles vs the same calls by hand"
  "$BUILD/bench_lock"
  echo
  echo "## bench_txn: multi-document transactions vs raw single-document operations (SQLite sync=normal)"
  "$BUILD/bench_txn"
  echo
  echo "## bench_order: order confirmations (claim, credit transfer, confirm) vs one SQLite transaction"
  for s in normal full; do
    "$BUILD/bench_order" --sync "$s" --orders "$(scaled 300)"
  done
  echo
  echo "## bench_http: transfers over HTTP (doctxd, 16 keep-alive connections) vs the library in-process"
  hdir=$(mktemp -d)
  http_bench sqlite "sqlite:$hdir/http.db?sync=normal" "sqlite:$hdir/lib.db?sync=normal"
  rm -rf "$hdir"
  # With Redis, the Redis part runs it on both stores in one run.
  if [ "$ONLY" = sqlite ] || ! command -v redis-server >/dev/null; then
    echo
    echo "## bench_scale: ns per document at 10^4 and 10^5 documents, and how it grows (SQLite)"
    "$BUILD/bench_scale"
  fi
fi
if [ "$ONLY" = sqlite ]; then
  plot
  exit 0
fi

# ---- Redis --------------------------------------------------------------------

for tool in redis-server redis-cli redis-benchmark python3; do
  if ! command -v $tool >/dev/null; then
    echo "## bench_redis: skipped ($tool not found)"
    [ "$ONLY" = redis ] && exit 2
    plot
    exit 0
  fi
done
[ -x "$BUILD/bench_redis" ] || {
  echo "bench: $BUILD/bench_redis missing (built without Redis?)" >&2
  exit 2
}
M=${BENCH_REDIS_TRANSFERS:-$(scaled 8000)}
MD=$((M / 2))

# servers.sh's exit trap waits for the servers it kills, and a killed
# process's status would stop the trap halfway under errexit (servers left
# running); failures below are checked by hand instead.
set +e
. "$ROOT/tests/redis/servers.sh"
fail=0 # servers.sh keeps its logs in $WORK when this is non-zero
echo
echo "## bench_redis: two-phase transfers vs MULTI/INCRBY/INCRBY/EXEC in one slot"
servers_up || exit 2
RESULTS=$WORK/results

# Runs bench_redis; the table goes to the terminal, RESULT lines to
# $RESULTS for the share computed at the end.
run_redis() { # LABEL URI BACKEND SYNC [bench_redis args...]
  local label=$1 uri=$2 backend=$3 sync=$4
  shift 4
  "$BUILD/bench_redis" --store "$uri" --label "$label" --transfers "$M" \
    --backend "$backend" --sync "$sync" "$@" >"$WORK/$label.out"
  local rc=$?
  grep -v '^RESULT ' "$WORK/$label.out"
  grep '^RESULT ' "$WORK/$label.out" >>"$RESULTS"
  if [ $rc != 0 ]; then
    echo "bench: bench_redis $label failed (exit $rc)" >&2
    fail=$((fail + 1))
  fi
  return $rc
}

run_redis standalone "$URI_SA" redis-standalone none --rounds 5
run_redis cluster "$URI_CL" redis-cluster none --rounds 5

echo
echo "## bench_http: transfers over HTTP (doctxd, 16 keep-alive connections) vs the library in-process"
http_bench redis-standalone "$URI_SA?ns=httpd" "$URI_SA?ns=httplib" ||
  { echo "bench: bench_http redis-standalone failed" >&2; fail=$((fail + 1)); }
http_bench redis-cluster "$URI_CL?ns=httpd" "$URI_CL?ns=httplib" ||
  { echo "bench: bench_http redis-cluster failed" >&2; fail=$((fail + 1)); }

echo
echo "## bench_bulk: bulk_write batches of 1/16/64 vs a pipeline of N EVALSHA (compare-and-set)"
# Runs a benchmark on one target as run_redis does: the table to the
# terminal, RESULT lines to $RESULTS.
run_on() { # BENCH LABEL URI [BENCH's args...]
  local out="$WORK/$1-$2.out"
  "$BUILD/$1" --store "$3" --label "$2" "${@:4}" >"$out"
  local rc=$?
  grep -v '^RESULT ' "$out"
  grep '^RESULT ' "$out" >>"$RESULTS"
  [ $rc = 0 ] || { echo "bench: $1 $2 failed (exit $rc)" >&2; fail=$((fail + 1)); }
}
run_on bench_bulk redis-standalone "$URI_SA"
run_on bench_bulk redis-cluster "$URI_CL"

echo
echo "## bench_job: add + claim + complete of no-op jobs vs LPUSH / LMOVE / LREM in one slot"
# 300 jobs per drain, not 1,000 as on SQLite: the worker's recovery pass
# (every second) reads every succeeded job on Redis, so a longer drain
# slows down as they pile up (docs/benchmarks.md, "Job queue").
JOBS_RD=${BENCH_REDIS_JOBS:-$(scaled 300)}
run_on bench_job redis-standalone "$URI_SA" --jobs "$JOBS_RD"
run_on bench_job redis-cluster "$URI_CL" --jobs "$JOBS_RD"
# The scale-out check: the same benchmark (8 workers) on a cluster of one
# master holding every slot, on a spare port of servers.sh's block (it
# found BASE..BASE+9 free), stopped afterwards.  doctx spreads jobs over
# all slots, so with three masters it should not sit on one node.
port=$((BASE + 9))
if start_server "$port" --cluster-enabled yes \
  --cluster-config-file "$WORK/$port/nodes.conf" &&
  redis-cli -p "$port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null &&
  wait_cluster_ok "$port"; then
  run_on bench_job redis-1-master "redis://127.0.0.1:$port" \
    --jobs "$JOBS_RD" --workers 8
else
  echo "bench: one-master cluster did not start" >&2
  fail=$((fail + 1))
fi
pid=$(cat "$WORK/$port/pid" 2>/dev/null)
[ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }

echo
echo "## bench_ledger: 2-leg ledger posts vs MULTI / INCRBY x2 / XADD / EXEC in one slot; balance reads"
run_on bench_ledger redis-standalone "$URI_SA"
run_on bench_ledger redis-cluster "$URI_CL"

echo
echo "## bench_lock: lock acquire + fenced write + release vs SET NX PX / SET / Lua compare-and-delete; lock hold cycles vs the same calls by hand"
run_on bench_lock redis-standalone "$URI_SA"
run_on bench_lock redis-cluster "$URI_CL"

echo
echo "## bench_txn: multi-document transactions vs raw single-document operations"
run_on bench_txn redis-standalone "$URI_SA"
run_on bench_txn redis-cluster "$URI_CL"

echo
echo "## bench_scale: ns per document at 10^4 and 10^5 documents, and how it grows"
scale_args=(--redis "$URI_SA") # a namespace of its own per population
[ "$ONLY" = redis ] && scale_args+=(--no-sqlite)
"$BUILD/bench_scale" "${scale_args[@]}" ||
  { echo "bench: bench_scale failed" >&2; fail=$((fail + 1)); }

# ---- the ceiling ----------------------------------------------------------------
# The same shape as RD_S_WRITE (src/store/redis/scripts.c) updating one
# document: GET the bucket's catalog stamp and compare, read the version
# and compare, HSET the new version and the body (an account with a
# pending marker, ~200 bytes).  The real script reads v, s and b with one
# HMGET and also keeps the index zsets (pending.tx) in step, so it is a
# little dearer: this ceiling is, if anything, high, and the share low.
# Expected and new version are equal so that every call writes.  Both keys
# carry one hash tag, chosen so that a cluster master owns it.
CEIL_LUA='local st = redis.call("GET", KEYS[2]) or "1"
if st ~= ARGV[1] then return {-1, st} end
local v = redis.call("HGET", KEYS[1], "v")
if v and v ~= ARGV[2] then return {0, v} end
redis.call("HSET", KEYS[1], "v", ARGV[3], "b", ARGV[4])
return {1}'
BODY='{"_id":"a17","balance":999999123,"min_balance":0,"opening_balance":1000000000,"pending":[{"tx":"6650c1f2a9e3b1d2c3f4a5b6","role":"payer","amount":417}],"voids":[]}'

# Prints the pipelined EVALSHA requests/s of PORT, keys tagged TAG.
ceiling() { # PORT TAG
  local port=$1 tag=$2 sha before after rps
  sha=$(redis-cli -p "$port" SCRIPT LOAD "$CEIL_LUA") || return 1
  before=$(redis-cli -p "$port" DBSIZE)
  rps=$(redis-benchmark -p "$port" -c 16 -P 32 -n 500000 -r 100000 -q \
    evalsha "$sha" 2 "{$tag}k:__rand_int__" "{$tag}m" 1 v1 v1 "$BODY" 2>&1 |
    tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 |
    cut -d' ' -f1)
  after=$(redis-cli -p "$port" DBSIZE)
  # An error reply (MOVED, NOSCRIPT) would be counted as a request too:
  # only a run that wrote documents counts.
  if [ -z "$rps" ] || [ "${after:-0}" -le "${before:-0}" ]; then
    echo "bench: redis-benchmark on $port wrote nothing" >&2
    return 1
  fi
  echo "$rps"
}

MASTER=${CL[0]}
for p in "${CL[@]}"; do
  if redis-cli -p "$p" ROLE | head -1 | grep -q '^master$'; then
    MASTER=$p
    break
  fi
done
TAG=
for i in $(seq 0 999); do
  if ! redis-cli -p "$MASTER" GET "{t$i}m" | grep -q MOVED; then
    TAG=t$i
    break
  fi
done
echo
echo "## ceiling: redis-benchmark -c 16 -P 32 -n 500000, EVALSHA of a document compare-and-set"
CEIL_SA=$(ceiling "$SA" t) || fail=$((fail + 1))
CEIL_CL=
[ -n "$TAG" ] && { CEIL_CL=$(ceiling "$MASTER" "$TAG") || fail=$((fail + 1)); }
printf 'standalone     %10s requests/s (port %s)\n' "${CEIL_SA:-?}" "$SA"
printf 'cluster master %10s requests/s (port %s, tag {%s})\n' "${CEIL_CL:-?}" \
  "${MASTER:-?}" "${TAG:-?}"
echo
echo "share of the ceiling = transfers/s x (round trips | commands) per transfer / ceiling"
echo "(cluster rows: doctx spreads over 3 masters, measured against one; all"
echo " servers and the client share this machine's $(nproc) cores)"
printf '%-12s %4s | %8s %6s %6s | %9s %9s | %9s\n' label hot doctx/s rt/t \
  cmd/t 'share rt' 'share cmd' 'native rt'
awk -v sa="${CEIL_SA:-0}" -v cl="${CEIL_CL:-0}" '
  /^RESULT / {
    delete f
    for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
    ceil = f["label"] == "standalone" ? sa : f["label"] == "cluster" ? cl : 0
    if (ceil <= 0) next
    printf "%-12s %3d%% | %8.0f %6.2f %6.2f | %8.1f%% %8.1f%% | %8.1f%%\n",
      f["label"], f["hot"], f["tps"], f["rt_per_transfer"],
      f["cmds_per_transfer"], 100 * f["tps"] * f["rt_per_transfer"] / ceil,
      100 * f["tps"] * f["cmds_per_transfer"] / ceil,
      100 * f["native_tps"] / ceil
    printf "RESULT label=%s hot=%s ceiling=%.0f share_rt=%.4f share_cmd=%.4f\n",
      f["label"], f["hot"], ceil, f["tps"] * f["rt_per_transfer"] / ceil,
      f["tps"] * f["cmds_per_transfer"] / ceil >>shares
  }' shares="$WORK/shares" "$RESULTS"

# ---- durability -----------------------------------------------------------------
echo
echo "## durability: uniform, $MD transfers, median of 3 rounds"
M=$MD
run_redis sa-no-aof "$URI_SA" redis-standalone no-aof --hot 0 --rounds 3
# Fresh standalone servers on spare ports of servers.sh's block (it found
# BASE..BASE+9 free), each stopped before the next starts.
port=$((BASE + 7))
for fsync in everysec always; do
  REDIS_EXTRA_ARGS="--appendonly yes --appendfsync $fsync" start_server "$port" ||
    { fail=$((fail + 1)); continue; }
  run_redis "sa-aof-$fsync" "redis://127.0.0.1:$port" redis-standalone \
    "aof-$fsync" --hot 0 --rounds 3
  pid=$(cat "$WORK/$port/pid")
  kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  port=$((port + 1))
done
run_redis cl-no-wait "$URI_CL" redis-cluster no-wait --hot 0 --rounds 3
run_redis cl-wait1 "$URI_CL?wait=1" redis-cluster wait=1 --hot 0 --rounds 3

echo
echo "## machine-readable"
cat "$RESULTS" "$WORK/shares" 2>/dev/null
plot
[ "$fail" = 0 ] || { echo "bench: $fail Redis step(s) failed" >&2; exit 1; }
exit 0
