#!/usr/bin/env bash
# run-redis.sh BUILD_DIR [PHASE...] -- the Redis backend's test run.
#
# Starts, on 127.0.0.1 and free ports, in a temporary directory, a
# standalone redis-server and a 3-master 3-replica Redis Cluster, then
# runs against each:
#   conformance   BUILD_DIR/conformance redis://...
#   shell         tests/crash/faults.sh, pause.sh, chaos.sh (DOCTX set; each
#                 scenario gets an emptied store through fresh-store.sh)
#   transfers     BUILD_DIR/txn_transfer_concurrency redis://...
# and on the cluster only:
#   migration     slots move between masters (redis-cli --cluster reshard,
#                 back and forth) while transfers and the conformance suite
#                 run: MOVED, ASK and TRYAGAIN mid-operation
#   failover      a replica takes over (CLUSTER FAILOVER, then a master is
#                 SIGKILLed) while transfers run with ?wait=1; the audit
#                 must stay clean
# PHASEs pick a subset (default: all, in this order).  Every server is
# stopped by a trap on exit, failure or interrupt.  Exit status 0 only
# when every phase passed.
set -u
BUILD=${1:?usage: run-redis.sh BUILD_DIR [PHASE...]}
BUILD=$(cd "$BUILD" && pwd)
shift
PHASES=${*:-conformance shell transfers migration failover}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
for tool in redis-server redis-cli python3; do
  command -v $tool >/dev/null || { echo "run-redis: $tool not found" >&2; exit 2; }
done
for bin in conformance doctx txn_transfer_concurrency; do
  [ -x "$BUILD/$bin" ] || { echo "run-redis: $BUILD/$bin missing" >&2; exit 2; }
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/doctx-redis.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -9 "$p" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    wait "$p" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

pass=0
fail=0
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
ok() { pass=$((pass + 1)); echo "PASS: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

# ---- servers ---------------------------------------------------------------

# A base port such that base..base+9 and their cluster bus ports (+10000)
# can all be bound now.
free_base() {
  python3 - <<'EOF'
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
for _ in range(200):
    b = random.randrange(20000, 45000)
    if all(free(p) and free(p + 10000) for p in range(b, b + 10)):
        print(b); break
EOF
}

start_server() { # PORT [extra redis-server args...]
  local port=$1
  shift
  mkdir -p "$WORK/$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$WORK/$port" --logfile "$WORK/$port/log" "$@" &
  PIDS+=($!)
  echo $! >"$WORK/$port/pid"
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  echo "run-redis: redis-server on $port did not start" >&2
  return 1
}

wait_cluster_ok() { # PORT...
  for _ in $(seq 1 200); do
    local all=1
    for p in "$@"; do
      redis-cli -p "$p" cluster info 2>/dev/null | tr -d '\r' |
        grep -q '^cluster_state:ok$' || all=0
    done
    [ $all = 1 ] && return 0
    sleep 0.1
  done
  return 1
}

BASE=$(free_base)
[ -n "$BASE" ] || { echo "run-redis: no free ports" >&2; exit 2; }
SA=$BASE
CL=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)) $((BASE + 5)) $((BASE + 6)))
start_server "$SA" || exit 2
for p in "${CL[@]}"; do
  start_server "$p" --cluster-enabled yes --cluster-node-timeout 2000 \
    --cluster-config-file "$WORK/$p/nodes.conf" || exit 2
done
addrs=()
for p in "${CL[@]}"; do addrs+=("127.0.0.1:$p"); done
redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 \
  --cluster-yes >"$WORK/create.log" 2>&1 ||
  { echo "run-redis: cluster create failed" >&2; cat "$WORK/create.log"; exit 2; }
wait_cluster_ok "${CL[@]}" || { echo "run-redis: cluster not ok" >&2; exit 2; }
URI_SA="redis://127.0.0.1:$SA"
URI_CL="redis://127.0.0.1:${CL[0]},127.0.0.1:${CL[1]}"
echo "run-redis: standalone $URI_SA, cluster $URI_CL, in $WORK"

export DOCTX="$BUILD/doctx"
export DTX_TEST_STORE_CMD="$HERE/fresh-store.sh"
flush() { DTX_REDIS_URI=$1 "$HERE/fresh-store.sh" flush >/dev/null; }

# Runs a command with its output in a log; prints the tail on failure.
run_logged() { # LABEL CMD...
  local label=$1 log
  shift
  log="$WORK/$(echo "$label" | tr -c 'A-Za-z0-9_\n' '_').log"
  if timeout "$STEP_TIMEOUT" "$@" >"$log" 2>&1; then
    ok "$label ($(tail -1 "$log"))"
  else
    bad "$label"
    tail -25 "$log" >&2
  fi
}

masters() {
  redis-cli -p "${CL[0]}" cluster nodes | tr -d '\r' |
    awk '$3 ~ /master/ && $3 !~ /fail/ { print $1, $2 }'
}

# ---- phases -------------------------------------------------------------------

phase_conformance() {
  for u in "$URI_SA" "$URI_CL"; do
    flush "$u"
    run_logged "conformance $u" "$BUILD/conformance" "$u"
  done
}

phase_shell() {
  for u in "$URI_SA" "$URI_CL"; do
    for s in faults pause chaos; do
      run_logged "$s.sh $u" env DTX_REDIS_URI="$u" \
        bash "$ROOT/tests/crash/$s.sh"
    done
  done
}

phase_transfers() {
  for u in "$URI_SA" "$URI_CL"; do
    flush "$u"
    run_logged "txn_transfer_concurrency $u" \
      "$BUILD/txn_transfer_concurrency" "$u"
  done
}

# Moves N slots from the first master to the second and back, forever.
reshard_loop() {
  local n=0
  while :; do
    set -- $(masters | head -2 | awk '{ print $1 }')
    local a=$1 b=$2
    [ $((n % 2)) = 1 ] && { local t=$a; a=$b; b=$t; }
    redis-cli --cluster reshard "127.0.0.1:${CL[0]}" --cluster-from "$a" \
      --cluster-to "$b" --cluster-slots 2000 --cluster-yes \
      --cluster-pipeline 5 >>"$WORK/reshard.log" 2>&1 || return 1
    n=$((n + 1))
    echo "$n" >"$WORK/reshards"
  done
}

phase_migration() {
  flush "$URI_CL"
  echo 0 >"$WORK/reshards"
  reshard_loop &
  local rpid=$!
  local before i=0
  # At least three rounds, and on until two reshards have completed.
  while [ $i -lt 3 ] || { [ "$(cat "$WORK/reshards")" -lt 2 ] && [ $i -lt 12 ]; }; do
    i=$((i + 1))
    before=$(cat "$WORK/reshards")
    flush "$URI_CL"
    run_logged "migration: transfers round $i (reshards so far: $before)" \
      "$BUILD/txn_transfer_concurrency" "$URI_CL"
  done
  run_logged "migration: conformance" "$BUILD/conformance" "$URI_CL" \
    crud query index concurrency
  kill "$rpid" 2>/dev/null
  wait "$rpid" 2>/dev/null
  # A reshard interrupted by the kill leaves slots migrating: fix them.
  redis-cli --cluster fix "127.0.0.1:${CL[0]}" --cluster-yes \
    >>"$WORK/reshard.log" 2>&1
  wait_cluster_ok "${CL[@]}"
  local n
  n=$(cat "$WORK/reshards")
  if [ "$n" -ge 1 ]; then
    ok "migration: $n reshards of 2000 slots ran during the workload"
  else
    bad "migration: no reshard completed"
    tail -20 "$WORK/reshard.log" >&2
  fi
}

# One replica's port, and the master it replicates.
a_replica() {
  redis-cli -p "${CL[0]}" cluster nodes | tr -d '\r' |
    awk '$3 ~ /slave/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2]; exit }'
}

phase_failover() {
  local u="$URI_CL?wait=1"
  # A graceful switch of roles under load.
  flush "$URI_CL"
  local rep
  rep=$(a_replica)
  (sleep 0.5 && redis-cli -p "$rep" cluster failover >/dev/null) &
  run_logged "failover: transfers across CLUSTER FAILOVER on $rep" \
    "$BUILD/txn_transfer_concurrency" "$u"
  wait
  wait_cluster_ok "${CL[@]}"
  # A master killed under load: its replica is promoted after the node
  # timeout, and writes acknowledged with WAIT 1 survive.  The killed node
  # is restarted once the cluster is ok again, and rejoins as a replica
  # (until then, writes to that shard wait for a replica that is gone).
  flush "$URI_CL"
  local victim vport log="$WORK/failover_kill.log"
  victim=$(masters | awk 'NR == 2 { print $2 }')
  vport=${victim%%@*}
  vport=${vport##*:}
  timeout "$STEP_TIMEOUT" "$BUILD/txn_transfer_concurrency" "$u" >"$log" 2>&1 &
  local tpid=$!
  sleep 0.5
  kill -9 "$(cat "$WORK/$vport/pid")"
  local alive=()
  for p in "${CL[@]}"; do [ "$p" = "$vport" ] || alive+=("$p"); done
  if wait_cluster_ok "${alive[@]}"; then
    ok "failover: replica of killed master $vport promoted"
  else
    bad "failover: cluster did not recover from losing $vport"
  fi
  start_server "$vport" --cluster-enabled yes --cluster-node-timeout 2000 \
    --cluster-config-file "$WORK/$vport/nodes.conf"
  if wait "$tpid"; then
    ok "failover: transfers across SIGKILL of master $vport ($(tail -1 "$log"))"
  else
    bad "failover: transfers across SIGKILL of master $vport"
    tail -25 "$log" >&2
  fi
  wait_cluster_ok "${CL[@]}" || bad "failover: $vport did not rejoin"
}

for ph in $PHASES; do
  case "$ph" in
  conformance | shell | transfers | migration | failover) "phase_$ph" ;;
  *) echo "run-redis: unknown phase $ph" >&2; exit 2 ;;
  esac
done
echo "run-redis: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
