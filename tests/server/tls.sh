#!/usr/bin/env bash
# tls.sh -- doctxd behind TLS, end to end (docs/server.md, "TLS"): doctxd
# has no TLS of its own, so the documented front is stunnel4 in server
# mode, and this proves that the page's stunnel.conf -- taken from the
# page itself, only its addresses and file names swapped -- works and
# refuses what it must.
#
# With a throwaway CA made here by openssl and a second, unknown one: a
# doctxd on SQLite on 127.0.0.1, and stunnel in front of it with a
# certificate the first CA signed.  Over TLS, curl --cacert gets /healthz
# and makes a transfer, and the Python client (clients/python, Python's
# default TLS context, SSL_CERT_FILE) makes another.  Refused: plain HTTP
# to the TLS port (no answer, nothing written), curl and the Python
# client trusting only the unknown CA or no private CA at all.  Every
# wait is bounded; the harness kills doctxd and stunnel at the end.
# Run by ctest; ends with "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$HERE/lib/server.sh"
source "$ROOT/tests/lib/certs.sh" # mkca, mkcert
STUNNEL=$(command -v stunnel4 || command -v stunnel) ||
  { bad "stunnel4 is not installed (scripts/setup.sh installs it)"; finish; exit 1; }
# Everything talks to 127.0.0.1: no proxy from the environment in between,
# and no CA bundle from it either (the refusals rely on the system's).
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY \
  CURL_CA_BUNDLE SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE

cd "$WORK" || exit 1

# ---- certificates: the CA the clients trust, and one they do not ---------------------
if mkca ca && mkca rogue-ca && mkcert doctxd ca; then ok; else
  bad "openssl: $(log_tail ssl.log)"; finish; exit 1
fi
chmod 600 doctxd.key

# ---- doctxd on the loopback side -----------------------------------------------------
S="sqlite:$WORK/tls.db"
serve_store doctxd.log --threads 2
DPORT=${URL##*:}

# ---- stunnel: docs/server.md's configuration -----------------------------------------
TPORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
awk '/^; \/etc\/stunnel\/doctxd.conf/ { on = 1 } on && /^```/ { exit } on' \
  "$ROOT/docs/server.md" >doc.conf
# Not root here: no setuid.  The rest is the page's, file for file.
sed -e '/^set[ug]id = /d' -e "s|^accept = 0.0.0.0:8443\$|accept = 127.0.0.1:$TPORT|" \
  -e "s|^connect = 127.0.0.1:8420\$|connect = 127.0.0.1:$DPORT|" \
  -e "s|/etc/stunnel/|$WORK/|" doc.conf >stunnel.conf
if grep -qx "accept = 127.0.0.1:$TPORT" stunnel.conf &&
   grep -qx "connect = 127.0.0.1:$DPORT" stunnel.conf &&
   grep -qx "cert = $WORK/doctxd.crt" stunnel.conf &&
   grep -qx 'foreground = yes' stunnel.conf; then ok; else
  bad "docs/server.md's stunnel configuration was not found as expected: $(<doc.conf)"
  finish; exit 1
fi
start_bg stunnel.log "$STUNNEL" stunnel.conf
SPID=$BG_PID
on_exit "stop_bg $SPID 5"
HTTPS=https://127.0.0.1:$TPORT

# tls_req CURL_ARGS... -- METHOD PATH TOKEN [BODY]: one curl over TLS (5 s at
# most); CODE the status (000 when refused), CURLRC curl's exit code.
tls_req() {
  local -a pre=()
  while [ "$1" != -- ]; do pre+=("$1"); shift; done
  shift
  local args=(-s -o "$WORK/rb" -w '%{http_code}' --max-time 5 -X "$1")
  [ -n "$3" ] && args+=(-H "Authorization: Bearer $3")
  [ $# -ge 4 ] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
  CURLRC=0
  : >"$WORK/rb"
  CODE=$(curl "${pre[@]}" "${args[@]}" "$HTTPS$2" 2>"$WORK/curl.err") || CURLRC=$?
}

up=0
for _ in $(seq 1 100); do
  tls_req --cacert ca.crt -- GET /healthz ""
  [ "$CODE" = 200 ] && { up=1; break; }
  alive "$SPID" || break
  nap 0.05
done
[ $up = 1 ] && ok || {
  bad "stunnel not up: curl $CURLRC $(<curl.err) $(log_tail stunnel.log 5)"
  finish; exit 1
}
[[ $(rbody) == *'"status":"ok"'* ]] && ok || bad "/healthz over TLS: $(rbody)"

# ---- through TLS ---------------------------------------------------------------------
tls_req --cacert ca.crt -- POST /v1/accounts "$T_WRITE" '{"id":"A","balance":100}'
[ "$CODE" = 201 ] && ok || bad "account A over TLS: $CODE $(rbody)"
tls_req --cacert ca.crt -- POST /v1/accounts "$T_WRITE" '{"id":"B"}'
[ "$CODE" = 201 ] && ok || bad "account B over TLS: $CODE $(rbody)"
tls_req --cacert ca.crt -- POST /v1/transfers "$T_WRITE" \
  '{"id":"t-curl","from":"A","to":"B","amount":40}'
[ "$CODE" = 200 ] && [[ $(rbody) == *'"state":"succeeded"'* ]] && ok ||
  bad "transfer over TLS: $CODE $(rbody)"
# the certificate's host name too (localhost may be ::1 first: curl falls back)
CODE=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --cacert ca.crt \
  "https://localhost:$TPORT/healthz" 2>/dev/null) || :
[ "$CODE" = 200 ] && ok || bad "https://localhost: $CODE"
# no token over TLS is still doctxd's 401: the proxy passes it all on
tls_req --cacert ca.crt -- GET /v1/transfers/t-curl ""
[ "$CODE" = 401 ] && ok || bad "no token over TLS: $CODE $(rbody)"

# py WANT_RC PYTHON_CODE [ENV...]: the Python client against $HTTPS
py() {
  local want=$1 code=$2 rc=0
  shift 2
  env "$@" PYTHONPATH="$ROOT/clients/python" PYTHONDONTWRITEBYTECODE=1 \
    U="$HTTPS" T="$T_WRITE" timeout 20 python3 -c "
import os
from doctx import Client, TransportError
c = Client(os.environ['U'], os.environ['T'], timeout=5, retries=0)
$code" >"$WORK/py.out" 2>&1 || rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else
    bad "python (exit $rc, want $want): $(head -c 600 "$WORK/py.out")"; fi
}
py 0 "t = c.transfer('A', 'B', 5, id='t-py')
assert t['state'] == 'succeeded', t
assert c.transfer('A', 'B', 5, id='t-py')['_id'] == 't-py'
print(c.account('B')['balance'])" SSL_CERT_FILE="$WORK/ca.crt"
[ "$(<py.out)" = 45 ] && ok || bad "python: B's balance: $(<py.out)"

# ---- refusals ------------------------------------------------------------------------
# Plain HTTP to the TLS port: stunnel wants a handshake and drops it; no
# answer, and the transfer is not made.
CODE=$(curl -s -o rb -w '%{http_code}' --max-time 5 -H "Authorization: Bearer $T_WRITE" \
  -H 'Content-Type: application/json' \
  --data-binary '{"id":"t-plain","from":"A","to":"B","amount":1}' \
  "http://127.0.0.1:$TPORT/v1/transfers" 2>/dev/null) || :
[ "$CODE" = 000 ] && ok || bad "plain HTTP to the TLS port answered $CODE: $(rbody)"
# A client that trusts only the unknown CA, or only the system's: curl
# exits 60 (the peer's certificate) and sends nothing.
tls_req --cacert rogue-ca.crt -- POST /v1/transfers "$T_WRITE" \
  '{"id":"t-rogue","from":"A","to":"B","amount":1}'
[ "$CURLRC" = 60 ] && [ "$CODE" = 000 ] && ok ||
  bad "curl trusting another CA: exit $CURLRC, code $CODE"
tls_req -- POST /v1/transfers "$T_WRITE" '{"id":"t-noca","from":"A","to":"B","amount":1}'
[ "$CURLRC" = 60 ] && [ "$CODE" = 000 ] && ok ||
  bad "curl trusting the system's CAs: exit $CURLRC, code $CODE"
# The Python client the same: a TransportError about the certificate.
refused_py="try:
    c.transfer('A', 'B', 1, id='t-py-rogue')
except TransportError as e:
    assert 'CERTIFICATE_VERIFY_FAILED' in str(e), e
    raise SystemExit(3)"
py 3 "$refused_py" SSL_CERT_FILE="$WORK/rogue-ca.crt"
py 3 "$refused_py"
# None of the refused requests reached doctxd: those transfers are not
# there, and B holds 45 (40 by curl, 5 by Python).
for id in t-plain t-rogue t-noca t-py-rogue; do
  tls_req --cacert ca.crt -- GET "/v1/transfers/$id" "$T_READ"
  [ "$CODE" = 404 ] && ok || bad "refused transfer $id: $CODE $(rbody)"
done
tls_req --cacert ca.crt -- GET /v1/accounts/B "$T_READ"
[[ $(rbody) == *'"balance":45,'* ]] && ok || bad "B after the refusals: $(rbody)"

# ---- the end: stunnel and doctxd stop on SIGTERM -------------------------------------
stop_bg "$SPID" 5 stunnel.log && ok || bad "stunnel did not stop on SIGTERM"
stop_bg "$DPID" 10 doctxd.log && ok || bad "doctxd did not drain and exit 0"
finish
