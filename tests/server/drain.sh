#!/usr/bin/env bash
# drain.sh -- SIGTERM drains doctxd (docs/server.md, "Draining"): while
# slow requests run, /readyz answers 503, a new request 503 with
# Retry-After, /healthz 200; each slow request finishes with 200 and its
# write is in the store; then doctxd exits 0.  And a drain that outlasts
# --drain-ms exits 1 at the deadline instead of hanging.
# The requests are slow because the store is: a sqlite3 process holds the
# SQLite store's write lock, so every write waits in its busy timeout.
# Run by ctest (SQLite only: the lock is SQLite's).  Ends with "N passed,
# M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
DB=$WORK/drain.db
S="sqlite:$DB"

serve_store "$WORK/d.log" --threads 8
req POST /v1/c/slow/insert "$T_WRITE" '{"docs":[{"_id":0}]}' # the store exists
[ "$CODE" = 200 ] && ok || bad "first insert: $CODE $(rbody)"

hold_lock 10 && ok || bad "sqlite3 did not take the lock"
# inflight N: waits (10 s at most) until doctxd's in-flight gauge, the
# scrape itself included, reads N.
inflight() {
  local end=$((SECONDS + 10))
  until req GET /metrics "$T_METRICS" &&
    grep -q "^doctxd_inflight_requests $1\$" "$WORK/rb" || [ $SECONDS -ge $end ]; do
    nap 0.05
  done
  grep -q "^doctxd_inflight_requests $1\$" "$WORK/rb"
}
# One at a time, each inside doctxd before the next is sent: a request
# blocked in the store holds its thread, and a connection that thread had
# already accepted would wait behind it (docs/server.md, "Threads").
pids=()
for i in 1 2 3; do
  start_bg "$WORK/slow.$i" curl -s -o "$WORK/slow.$i.body" -w '%{http_code}' \
    --max-time 30 -H "Authorization: Bearer $T_WRITE" \
    --data-binary "{\"docs\":[{\"_id\":$i}]}" "$URL/v1/c/slow/insert"
  pids+=("$BG_PID")
  nap 0.3 # its thread blocked before the scrape connects, not beside it
  inflight $((i + 1)) && ok || bad "slow request $i is not in flight: $(grep inflight "$WORK/rb")"
done
kill -TERM "$DPID"
nap 0.2
req GET /readyz ""
[ "$CODE" = 503 ] && grep -q '"code":"DRAINING"' "$WORK/rb" && ok ||
  bad "readyz while draining: $CODE $(rbody)"
req GET /v1/accounts "$T_READ"
[ "$CODE" = 503 ] && ok || bad "a new request while draining: $CODE $(rbody)"
tr -d '\r' <"$WORK/rh" | grep -q '^Retry-After: 1$' && ok || bad "503 without Retry-After"
req GET /healthz ""
[ "$CODE" = 200 ] && ok || bad "healthz while draining: $CODE"
alive "$DPID" && ok || bad "doctxd stopped before its requests finished"
release_lock
for i in 1 2 3; do
  bounded_wait "${pids[$((i - 1))]}" 20 "$WORK/slow.$i"
  [ "$(<"$WORK/slow.$i")" = 200 ] && ok ||
    bad "slow request $i: $(<"$WORK/slow.$i") $(cat "$WORK/slow.$i.body" 2>/dev/null)"
done
bounded_wait "$DPID" 20 "$WORK/d.log"
rc=$?
[ "$rc" = 0 ] && ok || bad "drained doctxd exit $rc, want 0: $(log_tail "$WORK/d.log")"
grep -q 'drained; stopped' "$WORK/d.log" && ok || bad "no 'drained' line"
n=$(d count slow 2>&1)
[ "$n" = 4 ] && ok || bad "the drained writes are not all there: count $n"

# A drain past --drain-ms: exit 1 at the deadline, the request left.
serve_store "$WORK/d2.log" --drain-ms 300
hold_lock 10 && ok || bad "sqlite3 did not take the lock (2)"
start_bg "$WORK/slow.x" curl -s -o /dev/null --max-time 30 \
  -H "Authorization: Bearer $T_WRITE" --data-binary '{"docs":[{"_id":9}]}' \
  "$URL/v1/c/slow/insert"
nap 0.3
t0=$(now_ms)
kill -TERM "$DPID"
bounded_wait "$DPID" 10 "$WORK/d2.log"
rc=$?
took=$(($(now_ms) - t0))
[ "$rc" = 1 ] && [ "$took" -lt 3000 ] && ok ||
  bad "a drain past --drain-ms: exit $rc after ${took} ms, want 1 soon after 300 ms"
grep -q 'still running after --drain-ms' "$WORK/d2.log" && ok || bad "no drain-timeout line"
release_lock
finish
