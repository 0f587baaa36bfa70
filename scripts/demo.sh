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
trap 'rm -rf "$DEMO_TMP"' EXIT
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

PARTS=(part_primitive part_transfers)
for part in "${PARTS[@]}"; do
  "$part"
  say
done
