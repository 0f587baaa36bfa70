#!/usr/bin/env bash
# attack.sh -- the hostile test of doctxd's findings, each check asserting
# what doctxd promises (docs/server.md): F1 bad bytes are 400, never 500;
# F2 no wait outlives --request-timeout-ms, and the drain counts busy
# workers; F3 bypass_validation is the admin scope's; F5/F8 what
# libmicrohttpd answers and the per-IP limit are documented; F6 request
# smuggling framings are refused and closed; F7 no password in the
# start-up error; and the low ones (HEAD, the Bearer scheme's case, a
# repeated or percent-encoded query key, 415, the 403 detail).
# SQLite (the findings are the dispatcher's and the glue's).  About 8 s.
# F4 (aggregation's memory bound) is the library's: reported as pending
# until that fix is in (then it counts).
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/store.sh"
source "$HERE/lib/server.sh"
new_store attack
make_tokens "$WORK/tokens"
start_doctxd "$WORK/d.log" --store "$S" --tokens "$WORK/tokens" --rate 0 \
  --threads 2 --request-timeout-ms 1500 --drain-ms 1000 ||
  { bad "doctxd start"; finish; exit 1; }
HOSTPORT=${URL#http://}
PORT=${HOSTPORT#*:}

# want LABEL CODE: the last req answered CODE.
want() {
  [ "$CODE" = "$2" ] && ok || bad "$1: got $CODE, want $2: $(head -c 300 "$WORK/rb")"
}

# F1: bad input whose detail echoes bytes that are not UTF-8 (or cuts a
# UTF-8 character with %.100s) answers 500 NOMEM, not 400.
req GET '/v1/accounts/%ff' "$T_READ"; want "F1 GET /v1/accounts/%ff" 400
req GET '/v1/accounts?limit=%ff' "$T_READ"; want "F1 ?limit=%ff" 400
req GET "/v1/accounts?after=$(printf 'A%.0s' {1..99})%C3%A9" "$T_READ"
want "F1 a cursor cut inside a UTF-8 character" 400
req POST '/v1/c/%ff/count' "$T_READ" '{}'; want "F1 POST /v1/c/%ff/count" 400
req GET '/v1/transfers/%ff' "$T_READ"; want "F1 GET /v1/transfers/%ff (library NOMEM)" 400
req GET '/v1/accounts?after=%c3' "$T_READ"; want "F1 a query value cut inside a UTF-8 character" 400
req GET '/v1/accounts?%ff=1' "$T_READ"; want "F1 a query key that is not UTF-8" 400
req POST /v1/accounts "$T_WRITE" "{\"$(printf 'k%.0s' {1..99})é\":1}"
want "F1 an unknown field cut inside a UTF-8 character" 400

# F3: the admin scope is not needed to bypass validation: a write token
# rewrites a balance (money made up) and deletes a lock.
req POST /v1/accounts "$T_WRITE" '{"id":"alice","balance":10}'
req POST /v1/c/accounts/update "$T_WRITE" \
  '{"filter":{"_id":"alice"},"update":{"$set":{"balance":1000000}},"bypass_validation":true}'
want "F3 a write token sets a balance with bypass_validation" 403
grep -q 'admin scope' "$WORK/rb" && ok || bad "F3 the 403 names the scope: $(rbody)"
req POST /v1/c/accounts/bulk "$T_WRITE" \
  '{"ops":[{"deleteOne":{"filter":{"_id":"alice"},"bypassDocumentValidation":true}}]}'
want "F3 a write token's bulk op with bypassDocumentValidation" 403
req POST /v1/c/free/insert "$T_ADMIN" '{"docs":[{"_id":1}],"bypass_validation":true}'
want "F3 an admin token may bypass" 200
req GET /v1/accounts/alice "$T_READ"
grep -q '"balance":10[,}]' "$WORK/rb" && ok || bad "F3 alice's balance changed: $(rbody)"

# F4: aggregation has no memory bound: 20 doubling $concat stages make a
# 32 MiB string from 31 bytes (26 stages: 2 GiB; 30: 32 GiB -> OOM).  A
# read token, a 1 KB body.
req POST /v1/c/re/insert "$T_WRITE" "{\"docs\":[{\"_id\":1,\"s\":\"$(printf 'a%.0s' {1..31})\"}]}"
body=$(python3 -c '
import json
st=[{"$project":{"s":{"$concat":["$s","$s"]}}} for _ in range(20)]
st.append({"$count":"n"}); print(json.dumps({"pipeline":st}))')
# The strings of up to 8 MiB it builds before the refusal cost ~0.2 s
# of CPU, mostly page faults of fresh memory, which on a 2-core machine
# at a CI's load (~12) has overrun this server's --request-timeout-ms
# (1.5 s, for F2): a 503 UNAVAILABLE says "retry it", and a read is
# retried, as a client would, at most twice more.
for try in 1 2 3; do
  req POST /v1/c/re/aggregate "$T_READ" "$body"
  [ "$CODE" = 503 ] || break
done
# The library bounds a document at 16 MiB, in an aggregation as in a
# write (docs/semantics.md, "Size limits"): LIMIT, 409 as the CLI's exit 3.
want "F4 a 20-stage doubling pipeline (a 32 MiB string) is refused" 409
grep -q '"code":"LIMIT"' "$WORK/rb" && ok || bad "F4: not LIMIT: $(rbody)"

# F5: MHD's own answers (400 malformed, 414, 431) carry none of the
# headers every response promises (no-store, nosniff, CSP), and HTML.
# libmicrohttpd 0.9.75 has no hook to add headers to its own answers:
# docs/server.md's "Limits" says which they are; doctxd's own answer to a
# long target it did read carries the headers.
curl -s -D "$WORK/h414" -o /dev/null "$URL/healthz?$(printf 'a%.0s' {1..70000})"
grep -q '^HTTP/1.1 414' "$WORK/h414" && ok || bad "F5 414 from libmicrohttpd: $(head -1 "$WORK/h414")"
grep -q 'Answers that come from libmicrohttpd' "$HERE/../../docs/server.md" && ok ||
  bad "F5 docs/server.md does not list libmicrohttpd's own answers"
curl -s -D "$WORK/h400" -o /dev/null "$URL/healthz?$(printf 'a%.0s' {1..20000})"
grep -qi '^X-Content-Type-Options: nosniff' "$WORK/h400" && ok ||
  bad "F5 doctxd's answer to a 20 KB target: no nosniff"

# F6: Content-Length twice with different values is served with the
# first (RFC 9112: a 400), and CL with Transfer-Encoding leaves the
# connection open (RFC 9112: close it) -- request smuggling behind a
# proxy that reads the other one.
out=$(python3 - "$PORT" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
s.sendall(b"POST /v1/c/sm/count HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
          b"Content-Length: 40\r\n\r\n{}")
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b: break
        out += b
except OSError:
    pass
print(out.split(b"\r\n")[0].decode())
EOF
)
case $out in *" 400 "*) ok ;; *) bad "F6 two Content-Lengths: '$out', want 400" ;; esac
# Content-Length with Transfer-Encoding: 400, and the connection closed
# (the read ends, the smuggled second request is not answered).
out=$(python3 - "$PORT" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=3)
s.sendall(b"POST /v1/c/sm/count HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
          b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b: break
        out += b
except OSError:
    out += b" TIMEOUT"
print(out.split(b"\r\n")[0].decode(), out.count(b"HTTP/1.1 "), b"TIMEOUT" in out)
EOF
)
case $out in *" 400 "*" 1 False") ok ;; *) bad "F6 CL with TE: '$out', want one 400 and a close" ;; esac

# F7: the startup error prints the store URI with its password.
for uri in 'redis://app:S3cretPw@127.0.0.1:1' 'redis://127.0.0.1:1?password=S3cretPw'; do
  "$DOCTXD" --store "$uri" --listen 127.0.0.1:0 --tokens "$WORK/tokens" 2>"$WORK/f7" && :
  grep -q S3cretPw "$WORK/f7" && bad "F7 password in doctxd's stderr: $(head -1 "$WORK/f7")" || ok
done

# F8: per-IP connection limit -- 128 idle sockets from the health
# checker's address (behind a proxy: everyone's) shut /healthz out.
# That is the limit, documented (docs/server.md, "Limits"): the check is
# that the docs say so, and that below --per-ip /healthz answers beside
# 120 idle sockets.
grep -q 'per-ip.*proxy\|proxy.*per-ip' "$HERE/../../docs/server.md" && ok ||
  bad "F8 docs/server.md does not say --per-ip counts a proxy's clients as one"
python3 - "$PORT" "$WORK/held" <<'EOF' &
import socket, sys, time
ss = []
for i in range(120):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n"); ss.append(s)
    except OSError:
        break
open(sys.argv[2], "w").write(str(len(ss)))
time.sleep(4)
EOF
HOLD=$!
end=$((SECONDS + 5)); while [ ! -s "$WORK/held" ] && [ $SECONDS -lt $end ]; do nap 0.05; done
nap 0.3
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$URL/healthz") || :
[ "$CODE" = 200 ] && ok || bad "F8 /healthz from the same address beside 120 idle sockets: $CODE"
kill "$HOLD" 2>/dev/null; wait "$HOLD" 2>/dev/null

# The low ones.
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 5 -I "$URL/healthz") || :
want "HEAD /healthz" 200
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 5 -I "$URL/readyz") || :
want "HEAD /readyz" 200
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 5 -I \
  -H "Authorization: Bearer $T_READ" "$URL/v1/accounts/alice") || :
want "HEAD /v1/accounts/alice" 200
! grep -q "{" "$WORK/rb" && ok || bad "HEAD answered a body"
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 5 \
  -H "Authorization: bearer $T_READ" "$URL/v1/accounts/alice") || :
want "the Bearer scheme in lower case" 200
req GET '/v1/accounts?limit=1&limit=1000' "$T_READ"; want "a repeated query key" 400
req GET '/v1/accounts?li%6dit=1' "$T_READ"; want "a percent-encoded query key" 400
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $T_WRITE" \
  -H 'Content-Type: text/plain' --data-binary '{"id":"carol"}' "$URL/v1/accounts") || :
want "a text/plain body" 415
req GET /v1/accounts/carol "$T_READ"; want "the text/plain body wrote nothing" 404
req POST /v1/admin/audit "$T_WRITE" '{}'; want "a write token on an admin route" 403
grep -q 'this token' "$WORK/rb" && ! grep -q writer "$WORK/rb" && ok ||
  bad "the 403 names the token: $(rbody)"

# F2: a lock acquire's wait_ms is not bounded by --request-timeout-ms: the
# client gets 503 at the timeout, the worker keeps waiting in the library.
# --threads such requests (one write token, far under any rate limit)
# starve every other token; only /healthz and /metrics answer.
req POST /v1/locks/wedge/acquire "$T_WRITE" '{"ttl_ms":600000,"owner":"holder"}'
want "F2 hold the lock" 200  # last: it wedges this doctxd for good
WAITERS=()
for i in 1 2; do
  curl -s -o /dev/null --max-time 5 -H "Authorization: Bearer $T_WRITE" \
    -H 'Content-Type: application/json' \
    -d '{"ttl_ms":1000,"owner":"w","wait_ms":9223372036854775807}' \
    "$URL/v1/locks/wedge/acquire" &
  WAITERS+=($!)
done
nap 2
req GET /v1/accounts "$T_READ"; want "F2 another token's read while two waits hold both workers" 200
wait "${WAITERS[@]}"

# F2's drain: two waits hold both workers past --drain-ms; the drain
# waits for them (not only for open requests) and says how many it left.
req POST /v1/locks/wedge2/acquire "$T_WRITE" '{"ttl_ms":600000,"owner":"holder"}'
for i in 1 2; do
  curl -s -o /dev/null --max-time 5 -H "Authorization: Bearer $T_WRITE" \
    -H 'Content-Type: application/json' \
    -d '{"ttl_ms":1000,"owner":"w","wait_ms":1400}' "$URL/v1/locks/wedge2/acquire" &
  WAITERS+=($!)
done
nap 0.3
kill -TERM "$DPID"
bounded_wait "$DPID" 10 "$WORK/d.log"
grep -q 'drained; stopped' "$WORK/d.log" && ok ||
  grep -q 'still running after --drain-ms ([1-9] workers in the library)' "$WORK/d.log" && ok ||
  bad "F2 the drain's log: $(tail -2 "$WORK/d.log")"
wait "${WAITERS[@]}" 2>/dev/null

finish
