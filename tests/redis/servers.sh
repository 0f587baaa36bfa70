# servers.sh -- sourced by run-redis.sh and scripts/bench.sh: starts
# redis-server processes on 127.0.0.1 and free ports, in a temporary
# directory ($WORK), and kills them all by a trap on exit, failure or
# interrupt.  REDIS_EXTRA_ARGS (optional) is passed to every server, e.g.
# "--appendonly yes --appendfsync always".
WORK=$(mktemp -d "${TMPDIR:-/tmp}/doctx-redis.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do
    kill -9 "$p" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    wait "$p" 2>/dev/null
  done
  if [ "${fail:-0}" -gt 0 ]; then
    echo "redis: logs kept in $WORK" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

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
    # Servers and their bus ports (+10000) below the ephemeral range
    # (32768 up, Linux's default): a server started mid-run (a replica, a
    # rejoining node) must not find its port taken as the source port of
    # a client connection.
    b = random.randrange(20000, 22750)
    if all(free(p) and free(p + 10000) for p in range(b, b + 10)):
        print(b); break
EOF
}

start_server() { # PORT [extra redis-server args...]
  local port=$1
  shift
  mkdir -p "$WORK/$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$WORK/$port" --logfile "$WORK/$port/log" ${REDIS_EXTRA_ARGS:-} "$@" &
  PIDS+=($!)
  echo $! >"$WORK/$port/pid"
  for _ in $(seq 1 100); do
    redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.05
  done
  echo "redis: redis-server on $port did not start" >&2
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

# Waits until the cluster lists three replicas and each is in sync.
wait_replicas() {
  for _ in $(seq 1 300); do
    local reps
    reps=$(redis-cli -p "${CL[0]}" cluster nodes 2>/dev/null | tr -d '\r' |
      awk '$3 ~ /slave/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }')
    local n=0 synced=0
    for r in $reps; do
      n=$((n + 1))
      redis-cli -p "$r" role 2>/dev/null | sed -n 4p | grep -q '^connected$' &&
        synced=$((synced + 1))
    done
    [ "$n" -ge 3 ] && [ "$synced" = "$n" ] && return 0
    sleep 0.1
  done
  return 1
}

# Starts a standalone server and a 3+3 cluster; sets SA, CL (the six
# cluster ports), URI_SA and URI_CL.  Exits 2 when they cannot start.
servers_up() {
  BASE=$(free_base)
  [ -n "$BASE" ] || { echo "redis: no free ports" >&2; exit 2; }
  SA=$BASE
  CL=($((BASE + 1)) $((BASE + 2)) $((BASE + 3)) $((BASE + 4)) $((BASE + 5)) $((BASE + 6)))
  start_server "$SA" || exit 2
  for p in "${CL[@]}"; do
    start_server "$p" --cluster-enabled yes --cluster-node-timeout 3000 \
      --cluster-config-file "$WORK/$p/nodes.conf" || exit 2
  done
  local addrs=()
  for p in "${CL[@]}"; do addrs+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 \
    --cluster-yes >"$WORK/create.log" 2>&1 ||
    { echo "redis: cluster create failed" >&2; cat "$WORK/create.log"; exit 2; }
  wait_cluster_ok "${CL[@]}" && wait_replicas ||
    { echo "redis: cluster not ok" >&2; exit 2; }
  URI_SA="redis://127.0.0.1:$SA"
  URI_CL="redis://127.0.0.1:${CL[0]},127.0.0.1:${CL[1]}"
  echo "redis: standalone $URI_SA, cluster $URI_CL, in $WORK"
}
