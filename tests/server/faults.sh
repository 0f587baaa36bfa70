#!/usr/bin/env bash
# faults.sh -- doctxd under load and faults (docs/server.md, "Operations"):
#   scaleout  two doctxd on one store take transfers with client ids from
#             concurrent keep-alive clients (bench_http); then the settled
#             audit, told every acknowledged transfer (--acked), is clean,
#             and each acknowledged id is in the store once, terminal;
#   kill      one of two doctxd is SIGKILLed under load; `doctx recover`,
#             then the same checks: every acknowledged transfer present,
#             succeeded + failed = acknowledged;
#   drain     SIGTERM to a doctxd under load: it exits 0, and no request
#             it acknowledged is lost;
#   pause     (standalone Redis, with DTX_REDIS_PID) the redis-server is
#             SIGSTOPped: a transfer, a find and /readyz answer 503 with
#             Retry-After within --request-timeout-ms (plus slack); after
#             SIGCONT /readyz answers 200 again, and after recovery the
#             settled audit is clean.
# Run by ctest on SQLite (scaleout, kill, drain), by tests/redis/run-redis.sh's
# shell phase on the standalone server and the 3+3 cluster, and by its
# deadline phase with FAULTS_CASES=pause.  FAULTS_CASES picks cases
# (default: scaleout kill drain, plus pause with DTX_REDIS_PID).
# Ends with "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
LOAD=${BENCH_HTTP:-${DTX_BUILD:-$(dirname "$DOCTX")}/bench_http}
CASES=${FAULTS_CASES:-scaleout kill drain${DTX_REDIS_PID:+ pause}}
[ -x "$LOAD" ] || { bad "no load client at $LOAD (build bench_http)"; finish; exit 1; }
make_tokens "$WORK/tokens"
NACC=16

# new_store_accounts NAME: $S, with accounts a0..a15: a0 holds 30, so
# most of its transfers (amount 1, every 16th) are declined ("failed"),
# the others 1000000.
new_store_accounts() {
  new_store "$1"
  local i
  for ((i = 0; i < NACC; i++)); do
    d account create "a$i" --balance $((i ? 1000000 : 30)) >/dev/null 2>&1 || return 1
  done
}

# up VAR LOG ARGS...: a doctxd on $S; its pid in VAR_PID, its URL in VAR_URL.
up() {
  local v=$1 log=$2
  shift 2
  start_doctxd "$log" --store "$S" --tokens "$WORK/tokens" --rate 0 "$@" || return 1
  printf -v "${v}_PID" %s "$DPID"
  printf -v "${v}_URL" %s "$URL"
}

# load LOG MS PREFIX URL...: bench_http for MS ms, 8 connections spread
# over the URLs, client ids PREFIX-c<conn>-<seq>; acked to $WORK/PREFIX.acked.
load_bg() {
  local log=$1 ms=$2 prefix=$3 args=() u
  shift 3
  for u in "$@"; do args+=(--url "$u"); done
  start_bg "$log" "$LOAD" "${args[@]}" --token "$T_WRITE" --conns 8 \
    --accounts $NACC --duration-ms "$ms" --prefix "$prefix" \
    --acked "$WORK/$prefix.acked"
  LOAD_PID=$BG_PID
}

# acked_ok LABEL PREFIX: the settled audit with the client's acked list is
# clean; every acked id is in the store once (ids unique, each found),
# and succeeded + failed among them = acknowledged.
acked_ok() {
  local label=$1 f=$WORK/$2.acked n
  n=$(wc -l <"$f")
  [ "$n" -gt 0 ] || { bad "$label: nothing was acknowledged: $(<"$WORK/$2.log")"; return; }
  if ! d audit --json --settled --acked "$f" >"$WORK/audit.json" 2>&1; then
    bad "$label: audit not clean: $(head -c 600 "$WORK/audit.json")"
    return
  fi
  d find transfers '{"state":{"$in":["succeeded","failed"]}}' \
    --project '{"_id":1,"state":1}' >"$WORK/terminal.jsonl" 2>&1
  if python3 - "$f" "$WORK/audit.json" "$WORK/terminal.jsonl" "$n" >"$WORK/acked.out" 2>&1 <<'EOF'
import json, sys
acked = [json.loads(l) for l in open(sys.argv[1])]
rep = json.load(open(sys.argv[2]))
term = {}
for l in open(sys.argv[3]):
    doc = json.loads(l)
    term[doc["_id"]] = doc["state"]
ids = [t["_id"] for t in acked]
assert len(ids) == int(sys.argv[4])
assert len(set(ids)) == len(ids), "an id acknowledged twice"
assert rep["ok"] and rep["acked"] == len(ids) and rep["acked_lost"] == 0, rep
missing = [i for i in ids if i not in term]
assert not missing, "not terminal or gone: %s" % missing[:5]
s = sum(1 for i in ids if term[i] == "succeeded")
f = sum(1 for i in ids if term[i] == "failed")
assert s + f == len(ids)
print("acked %d: succeeded %d failed %d" % (len(ids), s, f))
EOF
  then ok; echo "  $label: $(<"$WORK/acked.out")"; else bad "$label: $(<"$WORK/acked.out")"; fi
}

served() { # URL: how many transfers this doctxd answered 200
  URL=$1 req GET /metrics "$T_METRICS"
  grep '^doctxd_http_requests_total{route="/v1/transfers",method="POST",code="200"}' \
    "$WORK/rb" | awk '{ print $2 }'
}

# pair_load LABEL TAG MS: a store of accounts (httpTAG), doctxd A and B
# on it, and the load client sending transfers to both for MS ms; 1 (said)
# when any of them did not start.
pair_load() {
  new_store_accounts "http$2" || { bad "$1: accounts"; return 1; }
  up A "$WORK/$2.a.log" && up B "$WORK/$2.b.log" || { bad "$1: start"; return 1; }
  load_bg "$WORK/$2.log" "$3" "$2" "$A_URL" "$B_URL"
}

case_scaleout() {
  pair_load scaleout scale 1500 || return
  bounded_wait "$LOAD_PID" 30 "$WORK/scale.log" && ok || bad "scaleout: load client"
  local na nb
  na=$(served "$A_URL") nb=$(served "$B_URL")
  [ "${na:-0}" -gt 0 ] && [ "${nb:-0}" -gt 0 ] && ok ||
    bad "scaleout: both doctxd must serve: A $na, B $nb"
  grep -q ' 200:' "$WORK/scale.log" && ! grep -q 'neterr [1-9]' "$WORK/scale.log" && ok ||
    bad "scaleout: $(<"$WORK/scale.log")"
  acked_ok scaleout scale
  stop_bg "$A_PID" 15 "$WORK/scale.a.log"
  stop_bg "$B_PID" 15 "$WORK/scale.b.log"
}

case_kill() {
  pair_load kill kill 2000 || return
  nap 0.7
  kill -KILL "$A_PID"
  bounded_wait "$LOAD_PID" 30 "$WORK/kill.log" && ok || bad "kill: load client"
  echo "  kill: client: $(<"$WORK/kill.log")"
  wait "$A_PID" 2>/dev/null
  grep -q 'neterr [1-9]' "$WORK/kill.log" && ok ||
    bad "kill: the client saw no broken connection: $(<"$WORK/kill.log")"
  stop_bg "$B_PID" 15 "$WORK/kill.b.log"
  # No executor is left (A is dead, B stopped): every transfer not
  # updated for 0 ms is abandoned, as after any crash.
  d recover --older-than-ms 0 >"$WORK/recover.out" 2>&1 && ok ||
    bad "kill: recover: $(head -c 400 "$WORK/recover.out")"
  acked_ok kill kill
}

case_drain() {
  pair_load drain drain 2000 || return
  nap 0.7
  kill -TERM "$A_PID"
  bounded_wait "$A_PID" 20 "$WORK/drain.a.log"
  local rc=$?
  [ "$rc" = 0 ] && grep -q 'drained; stopped' "$WORK/drain.a.log" && ok ||
    bad "drain: exit $rc: $(log_tail "$WORK/drain.a.log")"
  bounded_wait "$LOAD_PID" 30 "$WORK/drain.log" && ok || bad "drain: load client"
  stop_bg "$B_PID" 15 "$WORK/drain.b.log"
  # The drain finished what it had acknowledged: settled with no recovery.
  acked_ok drain drain
}

case_pause() {
  : "${DTX_REDIS_PID:?pause needs DTX_REDIS_PID (a standalone redis-server)}"
  on_exit kill -CONT "$DTX_REDIS_PID"
  new_store_accounts httppause || { bad "pause: accounts"; return; }
  # The store's own window (retry 3000 + timeout 500) is longer than the
  # request's: the request timeout must govern.
  case "$S" in *\?*) S="$S&" ;; *) S="$S?" ;; esac
  S="${S}retry_ms=3000&timeout_ms=500"
  local tmo=1200 slack=1300 t0 ms c
  up A "$WORK/pause.a.log" --request-timeout-ms $tmo || { bad "pause: start"; return; }
  URL=$A_URL
  kill -STOP "$DTX_REDIS_PID"
  for c in transfer find readyz; do
    t0=$(now_ms)
    case $c in
    transfer) req POST /v1/transfers "$T_WRITE" '{"id":"p1","from":"a0","to":"a1","amount":5}' ;;
    find) req POST /v1/c/items/find "$T_READ" '{"filter":{}}' ;;
    readyz) req GET /readyz "" ;;
    esac
    ms=$(($(now_ms) - t0))
    [ "$CODE" = 503 ] && [ "$ms" -lt $((tmo + slack)) ] &&
      tr -d '\r' <"$WORK/rh" | grep -q '^Retry-After: [0-9]' && ok ||
      bad "pause: $c answered $CODE after $ms ms (want 503 with Retry-After within $tmo + $slack): $(rbody)"
  done
  req GET /healthz ""
  [ "$CODE" = 200 ] && ok || bad "pause: healthz $CODE"
  kill -CONT "$DTX_REDIS_PID"
  local end=$((SECONDS + 15))
  until req GET /readyz "" && [ "$CODE" = 200 ] || [ $SECONDS -ge $end ]; do nap 0.1; done
  [ "$CODE" = 200 ] && ok || bad "pause: readyz after SIGCONT: $CODE $(rbody)"
  req POST /v1/transfers "$T_WRITE" '{"id":"p2","from":"a0","to":"a1","amount":5}'
  [ "$CODE" = 200 ] && ok || bad "pause: a transfer after SIGCONT: $CODE $(rbody)"
  stop_bg "$A_PID" 15 "$WORK/pause.a.log"
  d recover --older-than-ms 0 >"$WORK/recover.out" 2>&1 && ok ||
    bad "pause: recover: $(head -c 400 "$WORK/recover.out")"
  d audit --settled >"$WORK/audit.out" 2>&1 && ok ||
    bad "pause: audit: $(tail -5 "$WORK/audit.out")"
}

for c in $CASES; do "case_$c"; done
finish
