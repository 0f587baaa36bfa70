#!/usr/bin/env bash
# load.sh -- doctxd's workers and request timeout (docs/server.md,
# "Threads" and "Operations"):
#   - slow requests (writes waiting on a locked SQLite store) hold
#     workers, never other connections: reads sent meanwhile on eight
#     connections doctxd had already accepted (kept alive), and on new
#     ones, answer within 1 s (before, a thread-pool thread held its slow
#     request and a connection it had accepted waited behind it);
#   - --request-timeout-ms: the slow writes answer 503 with Retry-After
#     at the timeout (plus slack), a transfer too (its library call got
#     the timeout as its deadline); after the lock goes, doctxd answers;
#   - --metrics-listen: /metrics there without a token, and 404 on the
#     main port;
#   - bad values of the new options exit 2 (INT64_MAX refused).
# Run by ctest (SQLite only: the lock is SQLite's).  Ends with "N passed,
# M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
DB=$WORK/load.db
S="sqlite:$DB"
make_tokens "$WORK/tokens"

for bad_arg in "--request-timeout-ms 9223372036854775807" "--request-timeout-ms 0" \
  "--request-timeout-ms -5" "--metrics-listen localhost:1" "--metrics-listen 127.0.0.1"; do
  # shellcheck disable=SC2086 # the option and its value are two words
  "$DOCTXD" --store "$S" --tokens "$WORK/tokens" $bad_arg >"$WORK/opt.out" 2>&1
  rc=$?
  [ "$rc" = 2 ] && ok || bad "doctxd $bad_arg: exit $rc, want 2: $(head -2 "$WORK/opt.out")"
done

TMO=2000
serve_store "$WORK/d.log" --threads 4 --rate 0 --request-timeout-ms $TMO \
  --metrics-listen 127.0.0.1:0
for a in a b; do
  req POST /v1/accounts "$T_WRITE" "{\"id\":\"$a\",\"balance\":100}"
  [ "$CODE" = 201 ] && ok || bad "account $a: $CODE $(rbody)"
done

# /metrics on its own address, without a token; not on the main port.
line=$(grep -m1 'metrics on' "$WORK/d.log")
MURL="http://${line##* on }"
CODE=$(curl -s -o "$WORK/m" -w '%{http_code}' --max-time 10 "$MURL/metrics") || :
[ "$CODE" = 200 ] && grep -q '^doctxd_http_requests_total{route="/v1/accounts",method="POST",code="201"} 2$' "$WORK/m" &&
  ok || bad "metrics on --metrics-listen: $CODE $(head -c 300 "$WORK/m")"
req GET /metrics "$T_METRICS"
[ "$CODE" = 404 ] && ok || bad "/metrics on the main port with --metrics-listen: $CODE"

# Eight keep-alive connections, each with a request answered, so doctxd
# has accepted them all before the slow writes come; the probe then reads
# once more on each when told to ($WORK/go) and prints its slowest.
cat >"$WORK/probe.py" <<'EOF'
import http.client, os, sys, time
host, port = sys.argv[1].rsplit(":", 1)
hdr = {"Authorization": "Bearer " + sys.argv[2]}
conns = [http.client.HTTPConnection(host, int(port), timeout=25) for _ in range(8)]
for c in conns:
    c.request("GET", "/v1/accounts/a", headers=hdr)
    c.getresponse().read()
open(os.path.join(sys.argv[3], "probe.ready"), "w").close()
end = time.monotonic() + 20
while not os.path.exists(os.path.join(sys.argv[3], "go")) and time.monotonic() < end:
    time.sleep(0.02)
slowest = 0
for c in conns:
    t = time.monotonic()
    c.request("GET", "/v1/accounts/a", headers=hdr)
    r = c.getresponse()
    r.read()
    slowest = max(slowest, int((time.monotonic() - t) * 1000))
    assert r.status == 200, r.status
print("slowest %d" % slowest)
EOF
start_bg "$WORK/probe.log" python3 "$WORK/probe.py" "${URL#http://}" "$T_READ" "$WORK"
PROBE_PID=$BG_PID
end=$((SECONDS + 10))
while [ ! -e "$WORK/probe.ready" ] && alive "$PROBE_PID" && [ $SECONDS -lt $end ]; do nap 0.02; done

hold_lock 15 || bad "sqlite3 did not take the lock"
# Two slow writes: they hold two of the four workers.
t0=$(now_ms)
pids=()
for i in 1 2; do
  start_bg "$WORK/slow.$i" curl -s -D "$WORK/slow.$i.h" -o "$WORK/slow.$i.body" \
    -w '%{http_code} %{time_total}' --max-time 30 -H "Authorization: Bearer $T_WRITE" \
    --data-binary "{\"docs\":[{\"_id\":$i}]}" "$URL/v1/c/slow/insert"
  pids+=("$BG_PID")
done
nap 0.3
touch "$WORK/go"
bounded_wait "$PROBE_PID" 30 "$WORK/probe.log"
slowest=$(awk '/^slowest/ { print $2 }' "$WORK/probe.log")
[ -n "$slowest" ] && [ "$slowest" -lt 1000 ] && ok ||
  bad "a read on a kept-alive connection waited behind the slow writes: $(tail -5 "$WORK/probe.log" | tr "\n" " ")"
# Twelve reads, each on a new connection: none waits behind the writes.
slowest=0
for i in $(seq 12); do
  t1=$(now_ms)
  req GET /v1/accounts/a "$T_READ"
  ms=$(($(now_ms) - t1))
  [ "$CODE" = 200 ] || bad "read $i beside the slow writes: $CODE $(rbody)"
  [ "$ms" -gt "$slowest" ] && slowest=$ms
done
[ "$slowest" -lt 4000 ] && ok || bad "a read waited $slowest ms behind the slow writes (15 s is what waiting behind them takes)"
# A transfer: its library call gets what is left of the timeout.
t1=$(now_ms)
req POST /v1/transfers "$T_WRITE" '{"id":"t1","from":"a","to":"b","amount":5}'
ms=$(($(now_ms) - t1))
[ "$CODE" = 503 ] && [ "$ms" -lt $((TMO + 5000)) ] &&
  tr -d '\r' <"$WORK/rh" | grep -q '^Retry-After: 1$' && ok ||
  bad "a transfer on the locked store: $CODE after $ms ms, want 503 with Retry-After within ~$TMO ms: $(rbody)"
for i in 1 2; do
  bounded_wait "${pids[$((i - 1))]}" 20 "$WORK/slow.$i"
  read -r code secs <"$WORK/slow.$i"
  ms=$(($(now_ms) - t0))
  [ "$code" = 503 ] && grep -q 'request-timeout-ms' "$WORK/slow.$i.body" &&
    tr -d '\r' <"$WORK/slow.$i.h" | grep -q '^Retry-After: 1$' && ok ||
    bad "slow write $i: $code in $secs s, want 503 at the request timeout: $(<"$WORK/slow.$i.body")"
done
# (the bound is loose: a loaded CI machine adds seconds; a request that
# outlived its timeout would take the lock holder's whole 15 s)
[ "$ms" -lt $((TMO + 8000)) ] && ok || bad "the slow writes answered after $ms ms, want ~$TMO"
release_lock
req POST /v1/transfers "$T_WRITE" '{"id":"t2","from":"a","to":"b","amount":5}'
[ "$CODE" = 200 ] && ok || bad "a transfer once the lock is gone: $CODE $(rbody)"
req GET /readyz ""
[ "$CODE" = 200 ] && ok || bad "readyz once the lock is gone: $CODE"
stop_bg "$DPID" 20 "$WORK/d.log" && ok || bad "doctxd stop: $(log_tail "$WORK/d.log")"
# The writes answered 503 went on in the library and finished once the
# lock went (a 503 at the timeout is an unknown outcome), and the
# transfer answered 503 left nothing half done past recovery.
d() { "$DOCTX" --store "$S" "$@"; }
d recover --older-than-ms 0 >/dev/null 2>&1 && ok || bad "recover"
d audit --settled >"$WORK/audit" 2>&1 && ok || bad "audit: $(tail -3 "$WORK/audit")"
finish
