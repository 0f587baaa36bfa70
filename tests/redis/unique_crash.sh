#!/usr/bin/env bash
# unique_crash.sh -- crash, pause and error injection at the steps of the
# Redis unique-claim protocol (src/store/redis/write.c): redis.unique_claimed
# (claims taken, the document's WRITE next) and redis.unique_written (WRITE
# done, releasing the dropped keys' claims next).  tests/crash/faults.sh and
# pause.sh skip these points, since no transfer reaches them; this suite
# covers them instead.
#
# Every step is its own doctx process on one collection with a unique index
# on u, run against the store in DTX_REDIS_URI (standalone or cluster;
# new from fresh-store.sh), and asserts exact outcomes: exit codes,
# the documents, and that `find {u:V}` (an index query) returns exactly the
# document holding V.  The claim keys themselves (dtx@NS:u:*, NS the
# namespace fresh-store.sh gave this suite) are read from
# every master, to show an injected error leaves no claim behind and that
# every orphan a crash left was taken over.  Ends with "N passed, M failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${DOCTX:?DOCTX must point at the doctx binary}"
: "${DTX_REDIS_URI:?DTX_REDIS_URI must name the Redis store}"
# WORK, ok/bad/finish, and bounded waits whose processes the exit trap
# kills should a step hang.
source "$HERE/../lib/harness.sh"

S=$("$HERE/fresh-store.sh" unique_crash) || { echo "fresh-store failed"; echo "0 passed, 1 failed"; exit 1; }
case "$S" in
*ns=*) ns=${S##*ns=}; CLAIMS_MATCH="dtx@${ns%%&*}:u:*" ;;
*) CLAIMS_MATCH="dtx:u:*" ;;
esac
C=uc
d() { "$DOCTX" --store "$S" "$@"; }

# expect LABEL RC FAULT CMD... -- runs `doctx CMD` with DOCTX_FAULT=FAULT
# (none when empty); the exit code must be RC and an armed point must have
# been reached (fault.c says so on stderr).  Output: $WORK/out, $WORK/err.
expect() {
  local label=$1 want=$2 fault=$3 rc
  shift 3
  DOCTX_FAULT=$fault d "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  if [ -n "$fault" ]; then
    local point=${fault%%:*} action=${fault#*:}
    action=${action%%:*}
    if ! grep -q "doctx: fault: $point $action" "$WORK/err"; then
      bad "$label: $fault was not reached (exit $rc): $(head -2 "$WORK/err")"
      return 1
    fi
  fi
  if [ "$rc" -ne "$want" ]; then
    bad "$label: exit $rc, expected $want: $(head -2 "$WORK/err")"
    return 1
  fi
  ok
}

# finds LABEL FILTER [DOC...] -- the documents matching FILTER, by _id, must
# be exactly DOC... (compact JSON as doctx prints it; none: no match).
finds() {
  local label=$1 filter=$2 got want
  shift 2
  want=$(printf '%s\n' "$@")
  if ! got=$(d find "$C" "$filter" --sort '{"_id":1}' 2>"$WORK/ferr"); then
    bad "$label: find $filter failed: $(head -2 "$WORK/ferr")"
    return 1
  fi
  if [ "$got" != "$want" ]; then
    bad "$label: find $filter gave [$(echo $got)], expected [$(echo $want)]"
    return 1
  fi
  ok
}

# Every master's claim keys and values (hex, "key value" lines, sorted):
# the backend's own record of who holds which unique key.
masters() {
  local hosts seed
  hosts=${S#redis://}
  hosts=${hosts%%\?*}
  seed=${hosts%%,*}
  if redis-cli -h "${seed%:*}" -p "${seed##*:}" info cluster 2>/dev/null |
    tr -d '\r' | grep -q '^cluster_enabled:1$'; then
    redis-cli -h "${seed%:*}" -p "${seed##*:}" cluster nodes |
      awk '$3 ~ /master/ && $3 !~ /fail/ && NF >= 9 { split($2, a, "@"); print a[1] }'
  else
    echo "$seed"
  fi
}
CLAIMS_LUA='local out, cur = {}, "0"
local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end
repeat
  local r = redis.call("SCAN", cur, "MATCH", ARGV[1], "COUNT", 1000)
  cur = r[1]
  for _, k in ipairs(r[2]) do
    out[#out + 1] = hex(k) .. " " .. hex(redis.call("GET", k) or "")
  end
until cur == "0"
return out'
claims() {
  local m
  for m in $(masters); do
    redis-cli -h "${m%:*}" -p "${m##*:}" eval "$CLAIMS_LUA" 0 "$CLAIMS_MATCH" || echo "ERROR reading $m"
  done | grep -v '^$' | sort
}

# snapshot NAME -- documents and claims, for before/after comparisons.
snapshot() {
  d find "$C" --sort '{"_id":1}' >"$WORK/$1.docs" 2>&1
  claims >"$WORK/$1.claims"
}
same() { # LABEL A B: the two snapshots must be identical
  if cmp -s "$WORK/$2.docs" "$WORK/$3.docs" && cmp -s "$WORK/$2.claims" "$WORK/$3.claims"; then
    ok
  else
    bad "$1: store changed: $(diff "$WORK/$2.docs" "$WORK/$3.docs" | head -4 | tr '\n' ' ') claims $(wc -l <"$WORK/$2.claims") -> $(wc -l <"$WORK/$3.claims")"
  fi
}

stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }

# start_paused NAME FAULT CMD... -- starts `doctx CMD` in the background,
# armed to pause, and waits until that process (the doctx binary itself,
# not a subshell: checked by /proc/PID/comm) is stopped.  Sets PID.
start_paused() {
  local name=$1 fault=$2
  shift 2
  DOCTX_FAULT=$fault "$DOCTX" --store "$S" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" &
  PID=$!
  echo "$PID" >>"$HARNESS_PIDS"
  wait_stopped "$PID" 10
  if [ "$(cat "/proc/$PID/comm" 2>/dev/null)" != doctx ] || ! stopped "$PID"; then
    kill -CONT "$PID" 2>/dev/null
    bounded_wait "$PID" 60 "$WORK/$name.err"
    bad "$name: never paused at $fault (exit $?): $(head -2 "$WORK/$name.err")"
    return 1
  fi
  ok
}

# resume NAME RC -- SIGCONT the paused process; it must end with exit RC.
resume() {
  local rc
  kill -CONT "$PID"
  bounded_wait "$PID" 60 "$WORK/$1.err"
  rc=$?
  [ "$rc" -eq "$2" ] && ok || bad "$1: resumed writer exited $rc, expected $2: $(tail -2 "$WORK/$1.err")"
}

if ! d index "$C" '{"u":1}' --unique >/dev/null; then
  echo "cannot create the unique index"
  echo "0 passed, 1 failed"
  exit 1
fi

# a. Crash between claim and WRITE of an insert: the document never
# appears, its orphan claim is taken over by the next insert of the key.
expect "a: insert 1 crashes after its claim" 137 redis.unique_claimed:crash insert "$C" '{"_id":1,"u":5}'
finds "a: doc 1 absent" '{"_id":1}'
expect "a: insert 2 takes the orphan claim over" 0 "" insert "$C" '{"_id":2,"u":5}'
expect "a: insert 3 is a duplicate" 3 "" insert "$C" '{"_id":3,"u":5}'
finds "a: index query u=5" '{"u":5}' '{"_id":2,"u":5}'

# b. Crash between WRITE and release: doc 2 moved to 6; its stale claim on
# 5 (no document records it) is reclaimed, its claim on 6 holds.
expect "b: update 2 to 6 crashes after its write" 137 redis.unique_written:crash update "$C" '{"_id":2}' '{"$set":{"u":6}}'
finds "b: doc 2 has u 6" '{"_id":2}' '{"_id":2,"u":6}'
expect "b: insert 4 reclaims u 5" 0 "" insert "$C" '{"_id":4,"u":5}'
expect "b: insert 5 with u 6 is a duplicate" 3 "" insert "$C" '{"_id":5,"u":6}'
finds "b: index query u=6" '{"u":6}' '{"_id":2,"u":6}'
finds "b: index query u=5" '{"u":5}' '{"_id":4,"u":5}'

# c. Crash between claim and WRITE of an update: doc 2 keeps 6; the
# claim it took on 7 is an orphan another document takes over.
expect "c: update 2 to 7 crashes after its claim" 137 redis.unique_claimed:crash update "$C" '{"_id":2}' '{"$set":{"u":7}}'
finds "c: doc 2 still has u 6" '{"_id":2}' '{"_id":2,"u":6}'
expect "c: insert 6 takes u 7 over" 0 "" insert "$C" '{"_id":6,"u":7}'
expect "c: update 2 to 7 is now a duplicate" 3 "" update "$C" '{"_id":2}' '{"$set":{"u":7}}'
finds "c: index query u=7" '{"u":7}' '{"_id":6,"u":7}'
finds "c: index query u=6" '{"u":6}' '{"_id":2,"u":6}'

# d1. A writer paused between claim and WRITE: a rival fences it (bumps
# doc 4's version), takes the key and wins; the resumed writer's WRITE
# fails its compare-and-set, and its retry finds the key taken.
if start_paused d1 redis.unique_claimed:pause update "$C" '{"_id":4}' '{"$set":{"u":8}}'; then
  expect "d1: insert 7 fences the paused writer" 0 "" insert "$C" '{"_id":7,"u":8}'
  resume d1 3
  grep -q 'DUPKEY' "$WORK/d1.err" && ok || bad "d1: resumed writer did not report DUPKEY: $(tail -1 "$WORK/d1.err")"
fi
finds "d1: doc 4 still has u 5" '{"_id":4}' '{"_id":4,"u":5}'
finds "d1: index query u=8" '{"u":8}' '{"_id":7,"u":8}'
finds "d1: index query u=5" '{"u":5}' '{"_id":4,"u":5}'

# d2. A writer paused between WRITE and release: its write is visible at
# once; the claim it has not yet released is taken over, and its late
# release must not drop the new owner's claim.
if start_paused d2 redis.unique_written:pause update "$C" '{"_id":7}' '{"$set":{"u":9}}'; then
  finds "d2: paused writer's doc visible under u=9" '{"u":9}' '{"_id":7,"u":9}'
  finds "d2: and no longer under u=8" '{"u":8}'
  expect "d2: insert 8 takes the unreleased u 8 over" 0 "" insert "$C" '{"_id":8,"u":8}'
  expect "d2: insert 9 with u 9 is a duplicate" 3 "" insert "$C" '{"_id":9,"u":9}'
  resume d2 0
fi
expect "d2: the late release left insert 8's claim alone" 3 "" insert "$C" '{"_id":10,"u":8}'
finds "d2: index query u=8" '{"u":8}' '{"_id":8,"u":8}'
finds "d2: index query u=9" '{"u":9}' '{"_id":7,"u":9}'

# e1/e2. An injected error before the WRITE fails the operation with a
# store error (exit 4) and changes nothing: no document, no claim.
snapshot e1.before
expect "e1: insert 11 fails at its claim" 4 redis.unique_claimed:error insert "$C" '{"_id":11,"u":12}'
snapshot e1.after
same "e1: error before an insert's write" e1.before e1.after
expect "e1: u 12 still usable" 0 "" insert "$C" '{"_id":11,"u":12}'

snapshot e2.before
expect "e2: update 11 to 13 fails at its claim" 4 redis.unique_claimed:error update "$C" '{"_id":11}' '{"$set":{"u":13}}'
snapshot e2.after
same "e2: error before an update's write" e2.before e2.after
expect "e2: u 13 still usable" 0 "" insert "$C" '{"_id":12,"u":13}'
expect "e2: doc 11 still holds u 12" 3 "" insert "$C" '{"_id":13,"u":12}'

# e3. An error at redis.unique_written fails the release, not the write:
# the WRITE is applied and cannot be undone, and store.h forbids an error
# that changed something.  So the update succeeds, the dropped key's claim
# stays behind as an orphan, and the next writer of that key takes it.
snapshot e3.before
expect "e3: update 12 to 14, its release fails" 0 redis.unique_written:error update "$C" '{"_id":12}' '{"$set":{"u":14}}'
snapshot e3.after
finds "e3: doc 12 has u 14" '{"_id":12}' '{"_id":12,"u":14}'
[ "$(wc -l <"$WORK/e3.after.claims")" -eq $(($(wc -l <"$WORK/e3.before.claims") + 1)) ] && ok ||
  bad "e3: expected the unreleased claim on 13 beside the new one on 14"
expect "e3: u 13 still usable" 0 "" insert "$C" '{"_id":13,"u":13}'
expect "e3: u 14 is held" 3 "" insert "$C" '{"_id":14,"u":14}'
finds "e3: index query u=13" '{"u":13}' '{"_id":13,"u":13}'
finds "e3: index query u=14" '{"u":14}' '{"_id":12,"u":14}'

# f. Many processes insert one key at once: exactly one wins.
pids=()
for i in $(seq 100 107); do
  "$DOCTX" --store "$S" insert "$C" "{\"_id\":$i,\"u\":50}" >/dev/null 2>"$WORK/race.$i.err" &
  pids+=($!)
  echo "$!" >>"$HARNESS_PIDS"
done
wins=0 dups=0 others=0 i=100
for p in "${pids[@]}"; do
  bounded_wait "$p" 60 "$WORK/race.$i.err"
  case $? in 0) wins=$((wins + 1)); winner=$i ;; 3) dups=$((dups + 1)) ;; *) others=$((others + 1)) ;; esac
  i=$((i + 1))
done
[ "$wins" -eq 1 ] && [ "$dups" -eq 7 ] && ok || bad "f: 8 racing inserts: $wins won, $dups duplicate, $others other errors"
[ "$wins" -eq 1 ] && finds "f: index query u=50" '{"u":50}' "{\"_id\":$winner,\"u\":50}"

# Finally: no two documents share a u, each is found by an index query on
# its u alone, and the claims are exactly one per document (every orphan
# above was taken over, no error left one behind).
d find "$C" --sort '{"_id":1}' >"$WORK/all" 2>&1 || bad "final dump failed"
claims >"$WORK/all.claims"
if msg=$(python3 - "$WORK/all" "$WORK/all.claims" 2>&1 <<'EOF'
import collections, json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
us = collections.Counter(d.get("u") for d in docs)
dup = [u for u, n in us.items() if n != 1]
if dup or None in us:
    sys.exit("documents sharing a u (or without one): %s" % dup)
owners = []
for line in open(sys.argv[2]):
    k, _, v = line.strip().partition(" ")
    owners.append(bytes.fromhex(v).split(b"\n")[0])
if len(owners) != len(docs) or len(set(owners)) != len(owners):
    sys.exit("%d documents but %d claims (%d owners)"
             % (len(docs), len(owners), len(set(owners))))
for d in docs:
    c = (",", ":")
    print(json.dumps({"u": d["u"]}, separators=c), json.dumps(d, separators=c))
EOF
); then
  ok
  while read -r f want; do finds "final: index query $f" "$f" "$want"; done <<<"$msg"
else
  bad "final: $msg"
fi

finish
