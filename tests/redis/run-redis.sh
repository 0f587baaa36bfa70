#!/usr/bin/env bash
# run-redis.sh BUILD_DIR [PHASE...] -- the Redis backend's test run.
#
# Starts, on 127.0.0.1 and free ports, in a temporary directory, a
# standalone redis-server and a 3-master 3-replica Redis Cluster, then
# runs against each (the two side by side, both_targets):
#   conformance   BUILD_DIR/conformance redis://..., then again with
#                 every single write through bulk_write (quick loops;
#                 with DTX_QUICK set, on the cluster only)
#   shell         tests/crash/faults.sh, pause.sh, chaos.sh, chaos_txn.sh,
#                 tests/redis/unique_crash.sh, lost_reply.sh,
#                 tests/cli/contract.sh, job.sh, job_flow_sched.sh, job_queue.sh, lock.sh, sync.sh,
#                 ledger.sh, order.sh, scenarios.sh, flashsale.sh, version.sh,
#                 txn.sh,
#                 tests/redis/acl.sh (the ACL user; on the standalone
#                 target a server of its own whose default user is off),
#                 tests/crash/kleppmann.sh, tests/server/contract.sh,
#                 bad_input_http.sh (the CLI's bad-input table as HTTP),
#                 patterns.sh, jobs.sh and faults.sh (doctxd over HTTP:
#                 scale-out, SIGKILL, drain) (DOCTX set; each scenario gets a
#                 new namespace of its own through fresh-store.sh;
#                 the crash suites run FAULT_JOBS=2 points at a time);
#                 and once tests/redis/tls.sh (its own TLS-only servers
#                 behind a stunnel4 tunnel)
#   cli           tests/cli/bad_input.sh, transfer_defects.sh,
#                 transfer_worker.sh and
#                 tests/crash/tamper.sh, plainwrite.sh and deletes.sh,
#                 likewise (the last three: half of their rows on each
#                 target; the sanitizer run of scripts/test.sh leaves
#                 this phase out)
#   transfers     BUILD_DIR/txn_transfer_concurrency, txn_kit,
#                 txn_transfer_declines, txn_transfer_batch,
#                 txn_order_batch, txn_job,
#                 txn_lock, txn_sync,
#                 txn_ledger, txn_ledger_commit, txn_ledger_batch,
#                 txn_ledger_batch_attack, txn_scenarios, txn_version,
#                 txn_multi, txn_multi_elle and txn_job_remote
#                 redis://...?ns=SUITE-RANDOM (with DTX_QUICK set, each on
#                 one of the two targets; conformance likewise splits its
#                 single calls and its bulk_write run between them)
# The shell, cli and transfers phases run as ONE pool of workers over all
# their steps on both targets, longest first ("the pool" below).
# on the standalone server only:
#   (shell)       tests/clients/run.sh, the Python and Node clients against
#                 doctxd, in the shell phase
#   deadline      tests/redis/deadline.sh: the server is SIGSTOPped while
#                 commands run; each must end within its one budget,
#                 exit 4 with the reason, and leave its work recoverable;
#                 tests/server/faults.sh's pause: doctxd answers 503
#                 within --request-timeout-ms, then recovers
#   replicas      ?wait=1 while its one replica goes away: the write that
#                 finds it fails fast, and so does the next open
# and on the cluster only:
#   migration     slots move between masters (redis-cli --cluster reshard,
#                 back and forth) while transfers and the conformance suite
#                 run: MOVED, ASK and TRYAGAIN mid-operation
#   failover      a replica takes over (CLUSTER FAILOVER, then a master is
#                 SIGKILLed) while transfers run with ?wait=1; the audit
#                 must stay clean (writes to the promoted master fail fast
#                 until the killed node rejoins as its replica)
#   loss          a master SIGKILLed under load with and without ?wait=1:
#                 what the audit finds against the client's journal of
#                 acknowledged transfers (LOSS_TRIALS, LOSS_REPORT;
#                 judged by loss-check.py)
# PHASEs pick a subset (default: all, in this order); DTX_ROOT overrides
# the repository root (default: two levels up).  Every server is
# stopped by a trap on exit, failure or interrupt.  Exit status 0 only
# when every phase passed.
set -u
BUILD=${1:?usage: run-redis.sh BUILD_DIR [PHASE...]}
BUILD=$(cd "$BUILD" && pwd)
shift
PHASES=${*:-conformance shell cli transfers deadline replicas migration failover loss}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=${DTX_ROOT:-$(cd "$HERE/../.." && pwd)} # the repository
for tool in redis-server redis-cli python3; do
  command -v $tool >/dev/null || { echo "run-redis: $tool not found" >&2; exit 2; }
done
for bin in conformance doctx doctxd txn_transfer_concurrency txn_kit txn_job acked_load; do
  [ -x "$BUILD/$bin" ] || { echo "run-redis: $BUILD/$bin missing" >&2; exit 2; }
done

. "$HERE/servers.sh"
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
# Results go to a file as well, so steps run in background subshells
# (both_targets) count like the others.
RESULTS=$WORK/results # servers.sh made WORK and removes it on exit
: >"$RESULTS"
ok() { echo "PASS: $*" | tee -a "$RESULTS"; }
bad() { echo "FAIL: $*" | tee -a "$RESULTS" >&2; }

servers_up

export DOCTX="$BUILD/doctx"
export DTX_TEST_STORE_CMD="$HERE/fresh-store.sh"
# Each crash scenario gets a namespace of its own (?ns=, fresh-store.sh),
# so independent fault points run side by side on one server, as on
# SQLite (1 would make them take turns).
export FAULT_JOBS=2
flush() { DTX_REDIS_URI=$1 "$HERE/fresh-store.sh" --all >/dev/null; }

# Runs a command with its output in a log; prints the tail on failure.
run_logged() { # LABEL CMD...
  local label=$1 log t0=$SECONDS
  shift
  log="$WORK/$(echo "$label" | tr -c 'A-Za-z0-9_\n' '_').log"
  if timeout -k 10 "$STEP_TIMEOUT" "$@" >"$log" 2>&1; then
    ok "$label ($(tail -1 "$log"); $((SECONDS - t0)) s)"
  else
    bad "$label ($((SECONDS - t0)) s)"
    tail -25 "$log" >&2
  fi
}

# Runs FN URI for the standalone server and the cluster side by side:
# they are separate servers (and each scenario has a namespace of its
# own), and most steps wait on round trips rather than CPU, so the two
# overlap well on 2 cores.  Each step is bounded by run_logged's timeout.
both_targets() { # FN
  "$1" "$URI_SA" &
  local a=$!
  "$1" "$URI_CL" &
  local b=$!
  wait "$a"
  wait "$b"
}

# Masters that serve slots: id and address, one per line.
# Counts the reasons of failed transfers in the store at URI (diagnosis).
reasons() {
  "$BUILD/doctx" --store "$1" transfer list --state failed 2>&1 |
    python3 -c 'import collections, json, sys
c = collections.Counter(json.loads(l).get("reason") for l in sys.stdin
                        if l.startswith("{"))
print("failed transfers by reason:", dict(c))' >&2
  "$BUILD/doctx" --store "$1" transfer list --state failed 2>&1 |
    grep -v 'insufficient funds' | head -5 >&2
}

masters() {
  redis-cli -p "${CL[0]}" cluster nodes | tr -d '\r' |
    awk '$3 ~ /master/ && $3 !~ /fail/ && NF >= 9 { print $1, $2 }'
}

# ---- phases -------------------------------------------------------------------

conformance_on() { # URI
  flush "$1"
  # Under DTX_QUICK (the sanitizer stage) each Redis path runs once: the
  # single-document calls on the standalone server, every write through
  # bulk_write on the cluster -- side by side, where the cluster used to
  # run both after each other while the standalone server sat idle.  The
  # release stage runs both on both.
  if [ -z "${DTX_QUICK:-}" ] || [ "$1" != "$URI_CL" ]; then
    run_logged "conformance $1" "$BUILD/conformance" "$1"
  fi
  # Every single-document write inside a bulk_write batch (conf_bulk.c).
  [ -n "${DTX_QUICK:-}" ] && [ "$1" != "$URI_CL" ] && return 0
  run_logged "conformance via bulk_write $1" env DTX_CONF_VIA_BULK=1 \
    DTX_QUICK=1 "$BUILD/conformance" "$1"
}
phase_conformance() { both_targets conformance_on; }

# ---- the pool: the shell, cli and transfers phases ------------------------
# Those phases' steps are independent: each shell scenario has a namespace
# of its own (fresh-store.sh), and so has each C suite of the transfers
# phase (txn_suite), so no step flushes a server under another.  They run
# as one pool of POOL_WORKERS workers (4; 2 under DTX_QUICK, the sanitizer
# stage, where the CPU is the limit) over one list of items, longest
# first (each item's seconds: its wall time in the release stage of
# 2026-11-28, four chains running); each worker takes the next item no
# worker has claimed (mkdir is the claim).  Before, each phase ran as fixed chains (the shell phase four,
# the others one per target) and each waited for its slowest chain: at the
# shell phase's end two chains ran for half a minute, and the transfers
# phase under the sanitizers ran 22 s on one target and 52 s on the other.
POOL_WORKERS=${POOL_WORKERS:-$([ -n "${DTX_QUICK:-}" ] && echo 2 || echo 4)}
POOL_ITEMS=()
POOL_PHASES=()
POOL_SEQ=0
pool_run() {
  [ ${#POOL_ITEMS[@]} -gt 0 ] || return 0
  local t0=$SECONDS w pids=() claims="$WORK/claims.$((POOL_SEQ += 1))" items
  mkdir -p "$claims"
  # Longest first (a stable sort: ties keep their order).
  mapfile -t items < <(printf '%s\n' "${POOL_ITEMS[@]}" | sort -s -k1,1rn)
  for w in $(seq 1 "$POOL_WORKERS"); do
    (
      n=0
      for it in "${items[@]}"; do
        n=$((n + 1))
        mkdir "$claims/$n" 2>/dev/null || continue
        ${it#* } # "SECONDS FN ARG...": no argument holds a space
      done
    ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "run-redis: phases ${POOL_PHASES[*]} (one pool of $POOL_WORKERS) took $((SECONDS - t0)) s"
  POOL_ITEMS=()
  POOL_PHASES=()
}

# sh_suite URI LABEL SCRIPT [VAR=VALUE...]: a shell suite under tests/.
sh_suite() {
  local u=$1 label=$2 script=$3
  shift 3
  run_logged "$label $u" env DTX_REDIS_URI="$u" "$@" bash "$ROOT/tests/$script"
}
# turn URI: 1 on the standalone server, 2 on the cluster (the suites that
# run half of their table on each target).
turn() { [ "$1" = "$URI_CL" ] && echo 2 || echo 1; }

# The shell phase: the crash suites (FAULT_JOBS=2 points at a time each),
# the CLI and HTTP suites, on both targets.
shell_items() {
  local u
  for u in "$URI_SA" "$URI_CL"; do
    POOL_ITEMS+=("50 sh_suite $u faults.sh crash/faults.sh"
      "31 sh_suite $u pause.sh crash/pause.sh"
      "30 sh_suite $u ledger.sh cli/ledger.sh"
      "20 sh_suite $u job.sh cli/job.sh"
      "25 sh_suite $u job_flow_sched.sh cli/job_flow_sched.sh"
      "25 sh_suite $u job_queue.sh cli/job_queue.sh"
      "18 sh_suite $u contract.sh cli/contract.sh"
      "13 sh_suite $u lock.sh cli/lock.sh"
      "12 sh_suite $u sync.sh cli/sync.sh"
      "10 sh_suite $u server/faults.sh server/faults.sh"
      "9 sh_suite $u scenarios.sh cli/scenarios.sh"
      "8 sh_suite $u server/patterns.sh server/patterns.sh"
      "6 sh_suite $u order.sh cli/order.sh"
      "6 sh_suite $u kleppmann.sh crash/kleppmann.sh"
      "6 sh_suite $u server/jobs.sh server/jobs.sh"
      "5 sh_suite $u server/contract.sh server/contract.sh"
      "5 sh_suite $u version.sh cli/version.sh"
      "3 sh_suite $u unique_crash.sh redis/unique_crash.sh"
      # every row of the CLI's bad-input table sent as HTTP (docs/server.md)
      "2 sh_suite $u server/bad_input_http.sh server/bad_input_http.sh"
      "2 sh_suite $u txn.sh cli/txn.sh"
      "1 sh_suite $u acl.sh redis/acl.sh"
      "1 sh_suite $u lost_reply.sh redis/lost_reply.sh"
      "1 sh_suite $u flashsale.sh cli/flashsale.sh")
    # 6 s of chaos per target (10 on SQLite): the workers' crash and
    # recovery paths are the same code; what is Redis's is covered by then.
    POOL_ITEMS+=("7 sh_suite $u chaos.sh crash/chaos.sh CHAOS_SECONDS=6"
      "5 sh_suite $u chaos_txn.sh crash/chaos_txn.sh")
  done
  # The Python and Node clients against doctxd (docs/clients.md): on the
  # standalone server only, the cluster adding nothing a client sees.
  POOL_ITEMS+=("10 sh_suite $URI_SA clients/run.sh clients/run.sh")
  POOL_ITEMS+=("2 tls_once") # its own TLS-only servers
}
tls_once() { run_logged "tls.sh" bash "$HERE/tls.sh"; }

# The cli phase: bad_input.sh, transfer_defects.sh, transfer_worker.sh on
# both targets; tamper.sh, plainwrite.sh and deletes.sh run half of their
# rows on each target, the other half on the other (every row on SQLite):
# the guard and the audit are the same code.
cli_items() {
  local u
  for u in "$URI_SA" "$URI_CL"; do
    POOL_ITEMS+=("9 sh_suite $u tamper.sh crash/tamper.sh TAMPER_TURN=$(turn "$u")"
      "9 sh_suite $u plainwrite.sh crash/plainwrite.sh PLAINWRITE_TURN=$(turn "$u")"
      "8 sh_suite $u bad_input.sh cli/bad_input.sh"
      "4 sh_suite $u transfer_worker.sh cli/transfer_worker.sh"
      "3 sh_suite $u deletes.sh crash/deletes.sh DELETES_TURN=$(turn "$u")"
      "2 sh_suite $u transfer_defects.sh cli/transfer_defects.sh")
  done
}

phase_deadline() {
  run_logged "deadline.sh $URI_SA" env DTX_REDIS_URI="$URI_SA" \
    DTX_REDIS_PID="$(<"$WORK/$SA/pid")" bash "$HERE/deadline.sh"
  run_logged "server/faults.sh pause $URI_SA" env DTX_REDIS_URI="$URI_SA" \
    DTX_REDIS_PID="$(<"$WORK/$SA/pid")" FAULTS_CASES=pause \
    bash "$ROOT/tests/server/faults.sh"
}

# Polls CMD... every 0.1 s for up to 10 s; 0 once it succeeds.
poll() {
  for _ in $(seq 1 100); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}
replica_connected() { redis-cli -p "$1" role 2>/dev/null | sed -n 4p | grep -q '^connected$'; }
stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }
no_replicas() {
  redis-cli -p "$SA" info replication | tr -d '\r' | grep -q '^connected_slaves:0$'
}

# ?wait=1 when the replica goes away after the open: the standalone
# server gets a replica (port SA+7, free by servers.sh's choice), writes
# wait for it and succeed; then a doctx process is paused just before a
# document write (fault point redis.unique_claimed), the replica is
# SIGKILLed, and the resumed write must fail at once with UNAVAILABLE
# naming the master and its 0 replicas -- not wait retry_ms (10 s) and
# report success -- and the next open must refuse the master too.
phase_replicas() {
  local rp=$((SA + 7)) u="$URI_SA?wait=1" log="$WORK/replicas.log" pid wd rc t0
  flush "$URI_SA"
  start_server "$rp" --replicaof 127.0.0.1 "$SA" && poll replica_connected "$rp" ||
    { bad "replicas: no replica of $SA on $rp"; return; }
  if "$DOCTX" --store "$u" index few '{"u":1}' --unique >"$log" 2>&1 &&
    "$DOCTX" --store "$u" insert few '{"_id":0,"u":0}' >>"$log" 2>&1; then
    ok "replicas: ?wait=1 writes with the replica connected"
  else
    bad "replicas: ?wait=1 writes with the replica connected"
    tail -5 "$log" >&2
  fi
  DOCTX_FAULT=redis.unique_claimed:pause "$DOCTX" --store "$u" \
    insert few '{"_id":1,"u":1}' >"$log" 2>&1 &
  pid=$!
  if ! poll stopped "$pid"; then
    bad "replicas: the writer did not pause"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return
  fi
  local rpid
  rpid=$(<"$WORK/$rp/pid")
  { kill -9 "$rpid" && wait "$rpid"; } 2>/dev/null
  poll no_replicas || bad "replicas: $SA still lists a replica"
  t0=$SECONDS
  (sleep 60 && kill -9 "$pid") 2>/dev/null &
  wd=$!
  kill -CONT "$pid"
  rc=0
  wait "$pid" || rc=$?
  kill "$wd" 2>/dev/null
  wait "$wd" 2>/dev/null
  if [ "$rc" = 4 ] && [ $((SECONDS - t0)) -lt 8 ] &&
    grep -q "?wait=1: master 127.0.0.1:$SA has 0 connected replicas, .*applied on the master only" "$log"; then
    ok "replicas: a write after the replica left failed fast ($((SECONDS - t0)) s)"
  else
    bad "replicas: a write after the replica left: exit $rc after $((SECONDS - t0)) s"
    tail -5 "$log" >&2
  fi
  rc=0
  timeout 30 "$DOCTX" --store "$u" count few >"$log" 2>&1 || rc=$?
  if [ "$rc" = 4 ] && grep -q "no write could be acknowledged" "$log"; then
    ok "replicas: the next open refuses the master"
  else
    bad "replicas: the next open: exit $rc"
    tail -5 "$log" >&2
  fi
}

# The transfers phase: the C suites, each with a namespace of its own
# (fresh-store.sh; the suites that once shared the default namespace ran
# one after the other, with a FLUSHALL before the first and before
# txn_transfer_declines).  Under DTX_QUICK (the sanitizer stage) each
# suite runs on one target, half on each (the release stage runs every
# suite on both): the pattern code is the same on both, and what differs
# -- the connection and routing code -- runs under every suite of either
# half.
txn_suite() { # URI SUITE
  local u
  u=$(DTX_REDIS_URI=$1 "$HERE/fresh-store.sh" "$2") ||
    { bad "$2 $1: no namespace"; return; }
  run_logged "$2 $1" "$BUILD/$2" "$u"
}
declare -A TXN_SECONDS=([txn_ledger]=10 [txn_ledger_batch_attack]=11
  [txn_transfer_concurrency]=8 [txn_lock]=6 [txn_job]=5 [txn_ledger_commit]=5
  [txn_transfer_declines]=4 [txn_ledger_batch]=4 [txn_order_batch]=3
  [txn_version]=3 [txn_transfer_batch]=3 [txn_kit]=2 [txn_scenarios]=0
  [txn_sync]=0 [txn_job_remote]=0 [txn_multi]=4 [txn_multi_elle]=5)
transfers_items() {
  local u s
  for u in "$URI_SA" "$URI_CL"; do
    # (txn_job_remote: the remote worker's calls, dtx_job_claim ...
    # dtx_job_fail_at)
    for s in txn_ledger txn_ledger_batch_attack txn_transfer_concurrency \
      txn_lock txn_job txn_ledger_commit txn_transfer_declines \
      txn_ledger_batch txn_order_batch txn_version txn_transfer_batch \
      txn_kit txn_scenarios txn_sync txn_job_remote txn_multi txn_multi_elle; do
      if [ -n "${DTX_QUICK:-}" ]; then
        case "$s" in
        txn_transfer_concurrency | txn_kit | txn_lock | txn_scenarios)
          [ "$u" = "$URI_SA" ] || continue ;;
        *) [ "$u" = "$URI_CL" ] || continue ;;
        esac
      fi
      POOL_ITEMS+=("${TXN_SECONDS[$s]} txn_suite $u $s")
    done
  done
}

# Moves 1000 slots from the first master to the second and back until
# $WORK/reshard.stop exists.  The running redis-cli's pid is kept in
# $WORK/reshard.pid, so the phase can stop it (a reshard left running
# would go on migrating, blocking nodes, into the next phase).
reshard_loop() {
  local n=0
  while [ ! -e "$WORK/reshard.stop" ]; do
    set -- $(masters | head -2 | awk '{ print $1 }')
    local a=$1 b=$2
    [ $((n % 2)) = 1 ] && { local t=$a; a=$b; b=$t; }
    redis-cli --cluster reshard "127.0.0.1:${CL[0]}" --cluster-from "$a" \
      --cluster-to "$b" --cluster-slots 1000 --cluster-yes \
      --cluster-pipeline 5 >>"$WORK/reshard.log" 2>&1 &
    echo $! >"$WORK/reshard.pid"
    if wait $!; then
      n=$((n + 1))
      echo "$n" >"$WORK/reshards"
    else
      sleep 0.5 # e.g. the cluster view was not settled yet
    fi
  done
}

phase_migration() {
  flush "$URI_CL"
  echo 0 >"$WORK/reshards"
  reshard_loop &
  local rpid=$!
  local before i=0
  # At least three rounds, and on until two reshards have completed.
  while [ $i -lt 3 ] || { [ "$(<"$WORK/reshards")" -lt 2 ] && [ $i -lt 12 ]; }; do
    i=$((i + 1))
    before=$(<"$WORK/reshards")
    flush "$URI_CL"
    run_logged "migration: transfers round $i (reshards so far: $before)" \
      "$BUILD/txn_transfer_concurrency" "$URI_CL"
  done
  run_logged "migration: conformance" "$BUILD/conformance" "$URI_CL" \
    crud query index concurrency
  touch "$WORK/reshard.stop"
  kill "$(<"$WORK/reshard.pid")" 2>/dev/null
  wait "$rpid" 2>/dev/null
  # A reshard interrupted by the kill leaves slots migrating: fix them.
  redis-cli --cluster fix "127.0.0.1:${CL[0]}" --cluster-yes \
    >>"$WORK/reshard.log" 2>&1
  wait_cluster_ok "${CL[@]}"
  local n
  n=$(<"$WORK/reshards")
  if [ "$n" -ge 1 ]; then
    ok "migration: $n reshards of 1000 slots ran during the workload"
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

# Gives every master that serves slots a replica: a node left as a master
# without slots (an interrupted failover) is made a replica of one that
# has none.
heal_replicas() {
  local nodes orphan spare
  nodes=$(redis-cli -p "${CL[0]}" cluster nodes | tr -d '\r')
  for spare in $(echo "$nodes" |
    awk '$3 ~ /master/ && $3 !~ /fail/ && NF < 9 { split($2, a, "[:@]"); print a[2] }'); do
    orphan=$(echo "$nodes" | awk '
      $3 ~ /slave/ && $3 !~ /fail/ { has[$4] = 1 }
      $3 ~ /master/ && $3 !~ /fail/ && NF >= 9 { m[$1] = 1 }
      END { for (i in m) if (!has[i]) { print i; exit } }')
    [ -n "$orphan" ] || break
    redis-cli -p "$spare" cluster replicate "$orphan" >/dev/null
    nodes=$(redis-cli -p "${CL[0]}" cluster nodes | tr -d '\r')
  done
}

# Waits until the node on PORT reports role master.
wait_master() {
  for _ in $(seq 1 300); do
    redis-cli -p "$1" role 2>/dev/null | head -1 | grep -q '^master$' &&
      return 0
    sleep 0.1
  done
  return 1
}

phase_failover() {
  local u="$URI_CL?wait=1"
  # A graceful switch of roles under load (lossless by itself, so no WAIT:
  # this exercises redirects, READONLY and the write pause).
  flush "$URI_CL"
  wait_replicas || bad "failover: replicas not in sync"
  local rep
  rep=$(a_replica)
  (sleep 0.5 && redis-cli -p "$rep" cluster failover >/dev/null) &
  local fpid=$!
  run_logged "failover: transfers across CLUSTER FAILOVER on $rep" \
    "$BUILD/txn_transfer_concurrency" "$URI_CL"
  wait "$fpid"
  wait_cluster_ok "${CL[@]}"
  heal_replicas
  # A master killed under load (kill_master): writes acknowledged with
  # WAIT 1 survive, so the run's own audits must stay clean.
  flush "$URI_CL"
  wait_replicas || { heal_replicas; wait_replicas; } ||
    bad "failover: replicas not in sync"
  pick_victim || { bad "failover: no master has a connected replica"; return; }
  local log="$WORK/failover_kill.log"
  # Until the killed node rejoins, its promoted replica has no replica of
  # its own, and ?wait=1 writes there fail fast (UNAVAILABLE) rather than
  # wait: the test counts those transfers apart and recovery finishes them.
  DTX_TEST_FEW_REPLICAS=1 timeout "$STEP_TIMEOUT" \
    "$BUILD/txn_transfer_concurrency" "$u" >"$log" 2>&1 &
  local tpid=$!
  sleep 0.5
  if ! kill_master; then
    bad "failover: cluster did not recover from losing $VPORT"
    kill "$tpid" 2>/dev/null
    wait "$tpid" 2>/dev/null
    return
  fi
  ok "failover: replica $HPORT of killed master $VPORT promoted"
  if wait "$tpid"; then
    ok "failover: transfers across SIGKILL of master $VPORT ($(tail -1 "$log"))"
  else
    bad "failover: transfers across SIGKILL of master $VPORT"
    tail -25 "$log" >&2
    reasons "$URI_CL"
  fi
  wait_cluster_ok "${CL[@]}" || bad "failover: $VPORT did not rejoin"
}

# Picks the victim of kill_master: a master whose replica is connected to
# it (under load a node can miss its timeout and the topology shift
# meanwhile).  Sets VID, VPORT, and HEIR, HPORT (its replica).
pick_victim() {
  local mid maddr line
  VID="" VPORT="" HEIR="" HPORT=""
  while read -r mid maddr; do
    line=$(redis-cli -p "${CL[0]}" cluster nodes | tr -d '\r' |
      awk -v m="$mid" '$3 ~ /slave/ && $3 !~ /fail/ && $4 == m {
        split($2, a, "[:@]"); print $1, a[2]; exit }')
    [ -n "$line" ] || continue
    if redis-cli -p "${line##* }" role | sed -n 4p | grep -q '^connected$'; then
      VID=$mid
      VPORT=${maddr##*:}
      VPORT=${VPORT%%@*}
      HEIR=${line%% *}
      HPORT=${line##* }
      return 0
    fi
  done < <(masters)
  return 1
}

# SIGKILLs the master picked by pick_victim; its replica is promoted after
# the node timeout.  The killed node then rejoins empty, as a replica of
# the promoted one (restarting it with its old nodes.conf and no data
# would let it serve its old slots, empty, until gossip demotes it); until
# it has synced, writes to that shard wait out WAIT.  Returns 1 when the
# cluster did not recover.
kill_master() {
  local vpid p alive=()
  vpid=$(<"$WORK/$VPORT/pid")
  { kill -9 "$vpid" && wait "$vpid"; } 2>/dev/null
  for p in "${CL[@]}"; do [ "$p" = "$VPORT" ] || alive+=("$p"); done
  wait_master "$HPORT" && wait_cluster_ok "${alive[@]}" || return 1
  for p in "${alive[@]}"; do
    redis-cli -p "$p" cluster forget "$VID" >/dev/null 2>&1
  done
  # Empty, really: a node that once was a replica kept the RDB it synced,
  # and would load it and claim the slots of its keys as a master.
  rm -rf "$WORK/$VPORT/nodes.conf" "$WORK/$VPORT/dump.rdb" \
    "$WORK/$VPORT/appendonlydir"
  start_server "$VPORT" --cluster-enabled yes --cluster-node-timeout 3000 \
    --cluster-config-file "$WORK/$VPORT/nodes.conf"
  # A node that has not yet forgotten the old one may gossip with the new
  # process first, and add-node refuses a node that knows others: reset
  # it and try again.
  local try
  for try in 1 2 3 4 5; do
    redis-cli --cluster add-node "127.0.0.1:$VPORT" "127.0.0.1:${alive[0]}" \
      --cluster-slave --cluster-master-id "$HEIR" >>"$WORK/rejoin.log" 2>&1 &&
      return 0
    redis-cli -p "$VPORT" flushall >/dev/null 2>&1
    redis-cli -p "$VPORT" cluster reset hard >/dev/null 2>&1
    for p in "${alive[@]}"; do
      redis-cli -p "$p" cluster forget "$VID" >/dev/null 2>&1
    done
    sleep 1
  done
  bad "failover: $VPORT could not rejoin as a replica of $HEIR"
  return 0
}

# What a failover loses, measured.  For each mode -- asynchronous
# replication (plain URI) and ?wait=1 -- acked_load runs transfers and
# journals every one it was told about; a master is SIGKILLed mid-run;
# then recovery, and the audit with the journal (--acked).  A separate
# recount (journal against `doctx transfer list`) must agree with the
# audit's count of lost transfers, so a loss the audit hid fails the
# phase; with ?wait=1 the audit must be clean.  LOSS_TRIALS (default 1)
# repeats the pair; each result line is also appended to $LOSS_REPORT
# when that is set.
phase_loss() {
  local t mode
  for t in $(seq 1 "${LOSS_TRIALS:-1}"); do
    for mode in async wait1; do
      loss_trial "$mode" "$t"
    done
  done
}

loss_trial() { # MODE TRIAL
  local mode=$1 t=$2 u=$URI_CL j="$WORK/acked.$1.$2"
  [ "$mode" = wait1 ] && u="$URI_CL?wait=1"
  flush "$URI_CL"
  wait_replicas || { heal_replicas; wait_replicas; } ||
    { bad "loss $mode: replicas not in sync"; return; }
  pick_victim || { bad "loss $mode: no master has a connected replica"; return; }
  : >"$j"
  "$BUILD/acked_load" "$u" "${LOSS_SECONDS:-6}" "$j" >"$j.log" 2>&1 &
  local lp=$!
  sleep 2
  if ! kill_master; then
    bad "loss $mode: cluster did not recover from losing $VPORT"
    wait "$lp"
    return
  fi
  wait "$lp" || { bad "loss $mode: load failed"; tail -5 "$j.log" >&2; return; }
  wait_cluster_ok "${CL[@]}"
  "$BUILD/doctx" --store "$URI_CL" recover --older-than-ms 0 >"$j.recover" 2>&1 ||
    { bad "loss $mode: recover failed"; tail -5 "$j.recover" >&2; return; }
  "$BUILD/doctx" --store "$URI_CL" audit --settled --json --acked "$j" \
    >"$j.audit" 2>"$j.audit.err"
  local arc=$?
  "$BUILD/doctx" --store "$URI_CL" transfer list >"$j.store" 2>&1 ||
    { bad "loss $mode: transfer list failed"; return; }
  local line
  if line=$(python3 "$HERE/loss-check.py" "$mode" "$arc" "$j" "$j.store" \
    "$j.audit" "$(tail -1 "$j.log")"); then
    ok "$line"
  else
    bad "$line"
  fi
  [ -n "${LOSS_REPORT:-}" ] && echo "$line" >>"$LOSS_REPORT"
  return 0
}

run_phase() { # PHASE
  local t0=$SECONDS
  "phase_$1"
  echo "run-redis: phase $1 took $((SECONDS - t0)) s"
}
# The standalone-only phases (deadline, replicas) and the cluster-only
# ones (migration, failover, loss) touch different servers and mostly wait
# -- on a SIGSTOPped server, a replica, node timeouts, a failover -- so
# the first group runs in the background beside the second.  Each of
# their steps is bounded on its own.
run_disruptive() { # PHASE...
  local sa_only=() p sa_pid=
  for p in "$@"; do
    case "$p" in
    deadline | replicas) sa_only+=("$p") ;;
    *)
      if [ ${#sa_only[@]} -gt 0 ] && [ -z "$sa_pid" ]; then
        ( for q in "${sa_only[@]}"; do run_phase "$q"; done ) &
        sa_pid=$!
      fi
      run_phase "$p" ;;
    esac
  done
  if [ -n "$sa_pid" ]; then
    wait "$sa_pid"
  else
    for p in "${sa_only[@]}"; do run_phase "$p"; done
  fi
}

MAIN=()
DISRUPT=()
for ph in $PHASES; do
  case "$ph" in
  conformance | shell | cli | transfers) MAIN+=("$ph") ;;
  deadline | replicas | migration | failover | loss) DISRUPT+=("$ph") ;;
  *) echo "run-redis: unknown phase $ph" >&2; exit 2 ;;
  esac
done

# Those phases stop, kill, reshard and fail over servers, so they never
# share servers with the others; they used to run after them (about 90 s
# at the stage's end, mostly waiting).  With SIDE_SERVERS=1 (the default)
# they run from the start, beside the others, on a standalone server and
# a 3+3 cluster of their own (a subshell with its own WORK, PIDS and trap;
# its results go to the same RESULTS).  SIDE_SERVERS=0: after the others,
# on the same servers, as before.
SIDE_PID=
if [ "${SIDE_SERVERS:-1}" = 1 ] && [ ${#DISRUPT[@]} -gt 0 ] && [ ${#MAIN[@]} -gt 0 ]; then
  (
    PIDS=()
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/doctx-redis.XXXXXX")
    trap cleanup EXIT # (a subshell's traps start reset)
    trap 'exit 130' INT TERM
    echo "redis: servers of their own for ${DISRUPT[*]}:"
    servers_up # exits 2 when they cannot start
    run_disruptive "${DISRUPT[@]}"
    fail=$(grep -c '^FAIL: ' "$RESULTS") # cleanup keeps the logs on failure
    exit 0
  ) &
  SIDE_PID=$!
  DISRUPT=()
  # Whatever ends this script ends the subshell too (its trap stops its
  # servers).
  trap 'kill -TERM "$SIDE_PID" 2>/dev/null; wait "$SIDE_PID" 2>/dev/null; cleanup' EXIT
fi

for ph in "${MAIN[@]}"; do
  case "$ph" in
  shell | cli | transfers) "${ph}_items"; POOL_PHASES+=("$ph") ;;
  conformance) pool_run; run_phase "$ph" ;;
  esac
done
pool_run
[ ${#DISRUPT[@]} -gt 0 ] && run_disruptive "${DISRUPT[@]}"
if [ -n "$SIDE_PID" ]; then
  wait "$SIDE_PID" || bad "the servers beside (for deadline ... loss) did not start"
fi
pass=$(grep -c '^PASS: ' "$RESULTS")
fail=$(grep -c '^FAIL: ' "$RESULTS")
echo "run-redis: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
