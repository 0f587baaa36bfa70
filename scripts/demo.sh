#!/usr/bin/env bash
# demo.sh -- `make run`: a narrated tour of doctx with the doctx command.
#
# Usage: scripts/demo.sh [PATH/TO/doctx]
# Each part is one shell function listed in PARTS at the bottom; they share
# one fresh temporary store and the helpers below, so a further part (the
# transfer demo) is one more function and one more word in PARTS.
set -euo pipefail

DOCTX=${1:-build/doctx}
if [ ! -x "$DOCTX" ]; then
  echo "demo: $DOCTX is not an executable; build first (make build)" >&2
  exit 1
fi
DEMO_TMP=$(mktemp -d "${TMPDIR:-/tmp}/doctx-demo.XXXXXX")
DOCTXD_PID=
# A doctxd the service part started is killed if the demo stops early.
trap '[ -z "$DOCTXD_PID" ] || kill -9 "$DOCTXD_PID" 2>/dev/null || :; rm -rf "$DEMO_TMP"' EXIT
STORE="sqlite:$DEMO_TMP/demo.db"

say() { printf '%s\n' "$*"; }

# Quotes an argument for display only when the shell would need it.
shown() {
  if [[ $1 =~ ^[A-Za-z0-9_./:=@+-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}

# dx WANT ARGS...: shows the command line, runs it on the demo store with
# its output indented, and stops the demo if the exit code is not WANT.
dx() {
  local want=$1 line="  \$ doctx" a rc=0
  shift
  for a in "$@"; do line+=" $(shown "$a")"; done
  say "$line"
  "$DOCTX" --store "$STORE" "$@" > "$DEMO_TMP/out" 2>&1 || rc=$?
  sed 's/^/    /' "$DEMO_TMP/out"
  if [ "$rc" -ne "$want" ]; then
    say "demo: expected exit code $want, got $rc" >&2
    exit 1
  fi
  if [ "$want" -ne 0 ]; then say "    (exit code $rc)"; fi
}

part_primitive() {
  say "== The primitive: one atomic, conditional update of one document =="
  say
  say "1. Two accounts, A and B, each with a balance of 100:"
  dx 0 insert accounts '{"_id":"A","balance":100,"pending":[]}' \
                       '{"_id":"B","balance":100,"pending":[]}'
  dx 0 find accounts
  say
  say "2. Debit 30 from A, but only if A has at least 30.  The balance check"
  say "   and the debit happen as one step, so nobody can spend the same"
  say "   money in between.  --new prints the document after the update:"
  dx 0 find-and-modify accounts '{"_id":"A","balance":{"$gte":30}}' \
       '{"$inc":{"balance":-30}}' --new
  say "   Now try to take 500 from A, which has only 70.  Nothing matches"
  say "   (exit code 1), so nothing changes:"
  dx 1 find-and-modify accounts '{"_id":"A","balance":{"$gte":500}}' \
       '{"$inc":{"balance":-500}}' --new
  dx 0 find accounts '{"_id":"A"}'
  say
  say "3. An idempotent step: record transfer t1 on A only if it is not"
  say "   recorded yet.  A retry (say, after a crash) runs the same step"
  say "   again; the second time it matches nothing:"
  dx 0 find-and-modify accounts '{"_id":"A","pending":{"$ne":"t1"}}' \
       '{"$push":{"pending":"t1"}}' --new
  dx 1 find-and-modify accounts '{"_id":"A","pending":{"$ne":"t1"}}' \
       '{"$push":{"pending":"t1"}}' --new
  say "   t1 is in A's pending list exactly once:"
  dx 0 find accounts '{"_id":"A"}' --project '{"pending":1}'
  say
  say "4. A conditional state change.  Two workers both try to move"
  say "   transfer t1 from initiated to preparing; exactly one wins:"
  dx 0 insert transfers \
       '{"_id":"t1","from":"A","to":"B","amount":30,"state":"initiated"}'
  say "   worker 1:"
  dx 0 find-and-modify transfers '{"_id":"t1","state":"initiated"}' \
       '{"$set":{"state":"preparing"}}' --new
  say "   worker 2 (loses: the state is no longer initiated):"
  dx 1 find-and-modify transfers '{"_id":"t1","state":"initiated"}' \
       '{"$set":{"state":"preparing"}}' --new
  dx 0 find transfers
  say
  say "A guarded debit, an idempotent step and a conditional state change:"
  say "these three moves are all a multi-document transfer is built from."
}

part_transfers() {
  say "== Part 2: two-phase transfers, a crash mid-flight, recovery and audit"
  bash "$(dirname "$0")/demo_transfer.sh" "$DOCTX"
}

# The service: doctxd (docs/server.md) on the demo store, a transfer made
# with curl, then a drain.  It listens on a port the kernel picks (its log
# line "listening on" names it) with a 0600 token file in DEMO_TMP; every
# wait is bounded, and doctxd is gone when the part ends.
part_service() {
  say "== Part 3: the same store as a service, doctxd over HTTP/JSON"
  local doctxd log tokens token url line i auth
  doctxd=$(dirname "$DOCTX")/doctxd
  if [ ! -x "$doctxd" ] || ! command -v curl >/dev/null; then
    say "   (skipped: needs $doctxd and curl; make build, scripts/setup.sh)"
    return 0
  fi
  log=$DEMO_TMP/doctxd.log
  tokens=$DEMO_TMP/doctxd.tokens
  token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  (umask 077; printf 'demo %s admin\n' "$token" >"$tokens")
  "$doctxd" --store "$STORE" --listen 127.0.0.1:0 --tokens "$tokens" \
    --threads 2 >"$log" 2>&1 &
  DOCTXD_PID=$!
  url=
  for ((i = 0; i < 200; i++)); do # 10 s at most
    line=$(grep -m1 'listening on' "$log" 2>/dev/null || :)
    if [ -n "$line" ]; then url="http://${line##* on }"; break; fi
    kill -0 "$DOCTXD_PID" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$url" ]; then
    say "demo: doctxd did not start:" >&2
    sed 's/^/    /' "$log" >&2
    exit 1
  fi
  say "doctxd serves the demo's store at $url, with a token from a file"
  say "only its owner may read (doctxd refuses one that others can):"
  say "  \$ $(shown "$doctxd") --store $(shown "$STORE") --listen 127.0.0.1:0 --tokens doctxd.tokens"
  say "    $(tail -n 1 "$log")"
  auth="Authorization: Bearer $token"
  say
  say "Two accounts and a transfer between them, each one HTTP request"
  say "(AUTH='$auth'):"
  hx 201 -d '{"id":"alice","balance":1000}' "$url/v1/accounts"
  hx 201 -d '{"id":"bob"}' "$url/v1/accounts"
  hx 200 -d '{"id":"order-17","from":"alice","to":"bob","amount":250}' "$url/v1/transfers"
  say "The same request again (a client retrying after a lost answer) gets"
  say "the same transfer, made once:"
  hx 200 -d '{"id":"order-17","from":"alice","to":"bob","amount":250}' "$url/v1/transfers"
  hx 200 "$url/v1/accounts/bob"
  say
  say "The admin page (queues, jobs, transfers, locks, the audit) is at"
  say "$url/admin; this doctxd stops with the demo, so"
  say "open it while doctxd runs: \`make serve\` (http://127.0.0.1:8420/admin,"
  say "the token in build/doctxd.tokens).  Python and Node clients: docs/clients.md."
  say
  kill -TERM "$DOCTXD_PID" 2>/dev/null || :
  for ((i = 0; i < 200; i++)); do # SIGTERM drains; 10 s at most, then KILL
    kill -0 "$DOCTXD_PID" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$DOCTXD_PID" 2>/dev/null; then
    kill -9 "$DOCTXD_PID" 2>/dev/null || :
    wait "$DOCTXD_PID" 2>/dev/null || :
    DOCTXD_PID=
    say "demo: doctxd did not stop on SIGTERM within 10 s (killed)" >&2
    exit 1
  fi
  i=0
  wait "$DOCTXD_PID" || i=$?
  DOCTXD_PID=
  say "SIGTERM: doctxd drained and exited $i."
  [ "$i" -eq 0 ] || exit 1
}

# hx WANT [CURL ARGS...] URL: shows the curl command (with $AUTH for the
# token), runs it, shows the answer, and stops the demo unless the
# status is WANT.
hx() {
  local want=$1 line="  \$ curl -s -H \"\$AUTH\"" a code
  shift
  for a in "$@"; do line+=" $(shown "$a")"; done
  say "$line"
  code=$(curl -s --max-time 10 -o "$DEMO_TMP/out" -w '%{http_code}' \
    -H "$auth" "$@" 2>/dev/null) || :
  # the answer has no final newline: the substitution gives it one
  printf '%s\n' "$(cat "$DEMO_TMP/out")" | sed 's/^/    /'
  if [ "$code" != "$want" ]; then
    say "demo: expected HTTP $want, got $code" >&2
    exit 1
  fi
}

PARTS=(part_primitive part_transfers part_service)
for part in "${PARTS[@]}"; do
  "$part"
  say
done
