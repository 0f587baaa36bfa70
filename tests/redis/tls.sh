#!/usr/bin/env bash
# tls.sh -- doctx to a TLS-only redis-server through a stunnel4 client
# tunnel, end to end (docs/redis-tls.md): Debian 12's hiredis has no TLS,
# so the tunnel is the supported path, and this proves that the
# documented stunnel.conf works and checks what it must.
#
# With a throwaway CA made here by openssl: a redis-server with no plain
# port (--port 0 --tls-port P) and a certificate the CA signed, another
# with a certificate a second, unknown CA signed, and one stunnel4 in
# client mode (the docs' configuration: verifyChain, CAfile, checkHost)
# with a local port for each.  Through the first a transfer commits and
# the audit is clean; plain RESP to the TLS port is refused (exit 4), and
# so is the tunnel to the second server, whose certificate stunnel
# rejects (exit 4).  Needs DOCTX; starts its own servers (no
# DTX_REDIS_URI).  Every process is killed at the end by the harness.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/certs.sh" # mkca, mkcert
STUNNEL=$(command -v stunnel4 || command -v stunnel) ||
  { bad "stunnel4 is not installed (scripts/setup.sh installs it)"; finish; exit 1; }

# Four free loopback ports.
read -r TLS1 TLS2 LOC1 LOC2 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(4)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')

# ---- certificates: the CA doctx trusts, and one it does not ------------------------
cd "$WORK" || exit 1
if mkca ca && mkca rogue-ca && mkcert redis ca && mkcert rogue rogue-ca; then ok; else
  bad "openssl: $(log_tail ssl.log)"; finish; exit 1
fi

# ---- two TLS-only servers ------------------------------------------------------------
start_tls_server() { # PORT CERT
  mkdir -p "srv$1"
  start_bg "srv$1/log" redis-server --port 0 --tls-port "$1" \
    --bind 127.0.0.1 --save '' --appendonly no --dir "srv$1" \
    --tls-cert-file "$WORK/$2.crt" --tls-key-file "$WORK/$2.key" \
    --tls-ca-cert-file "$WORK/ca.crt" --tls-auth-clients no
  on_exit "stop_bg $BG_PID 5"
}
start_tls_server "$TLS1" redis
start_tls_server "$TLS2" rogue

# ---- the tunnel: docs/redis-tls.md's client configuration ---------------------------
cat >stunnel.conf <<EOF
foreground = yes
pid =
[redis]
client = yes
accept = 127.0.0.1:$LOC1
connect = 127.0.0.1:$TLS1
verifyChain = yes
CAfile = $WORK/ca.crt
checkHost = localhost
sslVersionMin = TLSv1.2
[rogue]
client = yes
accept = 127.0.0.1:$LOC2
connect = 127.0.0.1:$TLS2
verifyChain = yes
CAfile = $WORK/ca.crt
checkHost = localhost
sslVersionMin = TLSv1.2
EOF
start_bg stunnel.log "$STUNNEL" stunnel.conf
on_exit "stop_bg $BG_PID 5"

up=0
for _ in $(seq 1 100); do
  redis-cli -p "$TLS1" --tls --cacert ca.crt ping 2>/dev/null | grep -q PONG &&
    redis-cli -p "$TLS2" --tls --cacert rogue-ca.crt ping 2>/dev/null | grep -q PONG &&
    redis-cli -p "$LOC1" ping 2>/dev/null | grep -q PONG && { up=1; break; }
  nap 0.05
done
[ $up = 1 ] && ok || {
  bad "servers or tunnel not up: $(log_tail srv$TLS1/log 5) $(log_tail stunnel.log 5)"
  finish
  exit 1
}

# ---- through the tunnel --------------------------------------------------------------
S="redis://127.0.0.1:$LOC1"
expect 0 "account create A" -- timeout 30 "$DOCTX" --store "$S" account create A --balance 100
expect 0 "account create B" -- timeout 30 "$DOCTX" --store "$S" account create B
expect 0 "transfer A B 40" -- timeout 30 "$DOCTX" --store "$S" transfer A B 40 --id t1
[[ $(out) == *'"state":"succeeded"'* ]] && ok || bad "transfer: $(out)"
expect 0 "audit clean" -- timeout 30 "$DOCTX" --store "$S" audit
expect 0 "B's balance" -- timeout 30 "$DOCTX" --store "$S" account show B
[[ $(out) == *'"balance":40'* ]] && ok || bad "B: $(out)"
# the server has no plain port: 0 in its own config
r=$(redis-cli -p "$LOC1" config get port | tr -d '\r' | tail -n 1)
[ "$r" = 0 ] && ok || bad "the server's plain port is '$r', not 0"

# ---- refusals ------------------------------------------------------------------------
# fails4 LABEL URI: doctx count exits 4 with an UNAVAILABLE reason
fails4() {
  expect 4 "$1" -- timeout 30 "$DOCTX" --store "$2?timeout_ms=2000&retry_ms=0" count accounts
  grep -q 'UNAVAILABLE' "$WORK/err" && ok || bad "$1: $(head -c 300 "$WORK/err")"
}
# plain RESP straight to the TLS port: the server waits for a handshake
fails4 "plain RESP to the TLS port" "redis://127.0.0.1:$TLS1"
# a server whose certificate the CA did not sign: stunnel drops the link
fails4 "a tunnel to an unknown CA's server" "redis://127.0.0.1:$LOC2"
grep -q 'certificate verify failed\|CERT: Verification error' stunnel.log && ok ||
  bad "stunnel did not log the failed verification: $(log_tail stunnel.log 5)"

finish
