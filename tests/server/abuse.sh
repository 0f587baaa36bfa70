#!/usr/bin/env bash
# abuse.sh -- doctxd against abusive clients (docs/server.md, "Limits"):
# 500 slow connections (a slowloris, tests/server/slowloris.py) hold
# their sockets while /healthz keeps answering within 1 s, and meanwhile
# an oversized body answers 413 (with and without Content-Length), deep
# JSON 400, a flood past a token's rate 429 with Retry-After, a missing
# and a wrong token 401, a read token writing 403 -- and doctxd stays up
# throughout and still serves a real write.
# Run by ctest (SQLite: nothing here depends on the store).  Ends with
# "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
new_store httpabuse
# Each token: 2 requests a second, 30 deep: the suite's own requests fit,
# the flood's 60 do not.
serve_store "$WORK/d.log" --rate 2 --burst 30
HOSTPORT=${URL#http://}

# healthz_fast LABEL: /healthz answers 200 within 1 s.
healthz_fast() {
  local t0 ms
  t0=$(now_ms)
  CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/healthz") || :
  ms=$(($(now_ms) - t0))
  [ "$CODE" = 200 ] && [ "$ms" -lt 1000 ] && ok ||
    bad "$1: healthz $CODE after $ms ms (want 200 within 1 s)"
}

start_bg "$WORK/slow.log" python3 "$HERE/slowloris.py" "${HOSTPORT%:*}" \
  "${HOSTPORT#*:}" 500 "$WORK/slow.ready" 20
SLOW_PID=$BG_PID
end=$((SECONDS + 15))
while [ ! -e "$WORK/slow.ready" ] && alive "$SLOW_PID" && [ $SECONDS -lt $end ]; do nap 0.05; done
grep -q 'open 500' "$WORK/slow.ready" 2>/dev/null && ok ||
  bad "slowloris did not open 500 connections: $(log_tail "$WORK/slow.log")"
healthz_fast "slowloris open"
# doctxd holds them all (a socket each), not just the kernel's backlog.
req GET /metrics "$T_METRICS"
fds=$(awk '/^process_open_fds / { print $2 }' "$WORK/rb")
[ "${fds:-0}" -ge 500 ] && ok || bad "doctxd holds ${fds:-?} fds, want the 500 slow connections"

# 413: a declared length past 1 MiB (the body read and dropped, then
# refused), past 8 MiB (refused before the body is read), and a chunked
# body with no length (refused once 1 MiB is read).
head -c $((1024 * 1024 + 10)) /dev/zero | tr '\0' ' ' >"$WORK/big"
req POST /v1/c/x/insert "$T_WRITE" "@$WORK/big"
[ "$CODE" = 413 ] && grep -q TOOLARGE "$WORK/rb" && ok || bad "oversized body: $CODE $(rbody)"
: >"$WORK/rb" # the row above left a TOOLARGE in it
t0=$SECONDS
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 20 -H "Authorization: Bearer $T_WRITE" \
  -H 'Content-Length: 9437184' -H 'Expect:' --data-binary "@$WORK/big" "$URL/v1/c/x/insert") || :
# doctxd answers 413 and closes at once, while curl is still sending: the
# close may reset the connection before curl reads the answer (curl then
# says 000), as the race goes.  Either way it must not wait for the 9 MiB
# that never come: that would hold curl until --max-time.
if [ "$CODE" = 413 ] && grep -q TOOLARGE "$WORK/rb"; then ok
elif [ "$CODE" = 000 ] && [ $((SECONDS - t0)) -lt 15 ]; then ok
else bad "declared 9 MiB, answered at once: $CODE after $((SECONDS - t0)) s $(rbody)"; fi
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $T_WRITE" \
  -H 'Transfer-Encoding: chunked' --data-binary "@$WORK/big" "$URL/v1/c/x/insert") || :
[ "$CODE" = 413 ] && ok || bad "oversized chunked body: $CODE $(rbody)"

# 400: JSON nested 100 deep (the limit is 64).
deep=$(printf '[%.0s' $(seq 100))1$(printf ']%.0s' $(seq 100))
req POST /v1/c/x/insert "$T_WRITE" "{\"docs\":[{\"a\":$deep}]}"
[ "$CODE" = 400 ] && ok || bad "deep JSON: $CODE $(rbody)"
healthz_fast "after the big bodies"

# 401 and 403.
req GET /v1/accounts ""
[ "$CODE" = 401 ] && ok || bad "missing token: $CODE"
req GET /v1/accounts "wrong-0123456789abcdef"
[ "$CODE" = 401 ] && ok || bad "wrong token: $CODE"
req POST /v1/accounts "$T_READ" '{"id":"r1"}'
[ "$CODE" = 403 ] && ok || bad "read token writing: $CODE $(rbody)"

# 429: 60 requests on one keep-alive connection (one curl), past the
# flood token's 30-deep bucket.
urls=()
for _ in $(seq 60); do urls+=(-o /dev/null "$URL/v1/accounts"); done
curl -s -w '%{http_code} %header{retry-after}\n' --max-time 30 \
  -H "Authorization: Bearer $T_FLOOD" "${urls[@]}" >"$WORK/flood" 2>/dev/null || :
n429=$(grep -c '^429 [0-9]' "$WORK/flood")
n200=$(grep -c '^200 ' "$WORK/flood")
[ "$n429" -ge 20 ] && [ "$n200" -ge 25 ] && ok ||
  bad "flood: $n200 x 200 and $n429 x 429 with Retry-After (want ~30 each): $(sort "$WORK/flood" | uniq -c | tr '\n' ' ')"
# Another token is not slowed by the flood.
req POST /v1/accounts "$T_WRITE" '{"id":"after-flood","balance":5}'
[ "$CODE" = 201 ] && ok || bad "a write after the flood: $CODE $(rbody)"
healthz_fast "after the flood"

alive "$SLOW_PID" && ok || bad "the slowloris ended early: $(<"$WORK/slow.log")"
kill "$SLOW_PID" 2>/dev/null
bounded_wait "$SLOW_PID" 10 "$WORK/slow.log"
alive "$DPID" && ok || bad "doctxd died: $(log_tail "$WORK/d.log")"
healthz_fast "at the end"
stop_bg "$DPID" 15 "$WORK/d.log" && ok || bad "doctxd did not stop cleanly: $(log_tail "$WORK/d.log")"
finish
