#!/usr/bin/env bash
# The transfer demo (second part of `make run`): a burst of concurrent
# transfers from several worker processes on the embedded store, one
# worker killed with SIGKILL mid-transfer, the transfers it left and who
# finished them, then recovery, the audit, and every failure explained.
#
# usage: demo_transfer.sh path/to/doctx
# DEMO_TRANSFERS (default 400) sets how many transfers are submitted;
# tests/cli/demo.sh runs a smaller one.  Progress is one line rewritten in
# place on a terminal, and one line per update otherwise (a log, a pipe);
# either way the last line is the final tally.  Every wait is bounded.
set -euo pipefail
DOCTX=${1:?usage: demo_transfer.sh path/to/doctx}
N=${DEMO_TRANSFERS:-400}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/doctx-demo-transfer.XXXXXX")
S="sqlite:$DIR/bank.db"
d() { "$DOCTX" --store "$S" "$@"; }
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$DIR"' EXIT
say() { printf '\n== %s\n' "$*"; }
if [ -t 1 ]; then EOL=$'\r'; else EOL=$'\n'; fi

# One snapshot of every transfer's state: a single find (one read of the
# store), counted here, so the numbers always add up to the total -- a
# count per state would be several reads of a store that moves between
# them.  Sets OK, KO, WAITING (initiated) and BUSY (claimed, not done).
tally() {
  local counts
  counts=$(d find transfers '{}' --project '{"state":1,"_id":0}' |
    awk -F'"' '{ n[$4]++ } END {
      printf "%d %d %d %d", n["succeeded"], n["failed"], n["initiated"],
        NR - n["succeeded"] - n["failed"] - n["initiated"] }')
  read -r OK KO WAITING BUSY <<<"$counts"
}
progress() { # [END]: one progress line, ended by END (default $EOL)
  tally
  printf '   progress: %3d succeeded, %3d failed, %3d in flight, %3d waiting %s' \
    "$OK" "$KO" "$BUSY" "$WAITING" "${1:-$EOL}"
}
stopped() { [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = T ]; }

say "Twelve accounts of 1,000 each, plus 'bank', a settlement account with no lower limit"
for i in $(seq -w 1 12); do d account create "acct$i" --balance 1000 >/dev/null; done
d account create bank --balance 0 --min-balance none
echo "opening total: 12,000"

say "Submitting $N transfers (random pairs, 1..400, some larger than the payer holds)"
for n in $(seq 1 "$N"); do
  a=$((1 + RANDOM % 12)); b=$((1 + (a + RANDOM % 11) % 12))
  [ $((n % 40)) -eq 0 ] && a=bank || a=$(printf 'acct%02d' $a)
  d transfer "$a" "$(printf 'acct%02d' $b)" $((1 + RANDOM % 400)) --id "demo-$n" --async >/dev/null
done
echo "recorded $(d count transfers '{"state":"initiated"}') transfers in state initiated"

PAUSE_AT=$(( N >= 300 ? 30 : 5 ))
say "Starting 3 worker processes (2 threads each); worker 3 will stop inside its credit step no. $PAUSE_AT"
# Workers 1 and 2 claim with a 500 ms lease, so their recovery passes
# (every second) would take over a dead worker's transfers at once;
# worker 3's claims last a minute, so what it leaves waits for the
# recovery step below, where it can be seen.
for w in 1 2; do
  "$DOCTX" --store "$S" worker --threads 2 --lease-ms 500 --owner "worker$w" >/dev/null 2>&1 &
  pids+=($!)
done
DOCTX_FAULT=transfer.credit_payee:pause:$PAUSE_AT "$DOCTX" --store "$S" worker --threads 2 \
  --lease-ms 60000 --owner worker3 >/dev/null 2>"$DIR/w3.err" &
w3=$!
pids+=($w3)

left=""
for _ in $(seq 1 600); do # at most 2 minutes
  # What worker 3 holds: the transfer it stopped in, and any its other
  # thread had claimed (its threads own as worker3#0 and worker3#1).
  if stopped "$w3"; then
    left=$(d find transfers '{"owner":{"$in":["worker3#0","worker3#1"]},"state":{"$in":["preparing","committed","rolling_back"]}}' \
      --project '{"_id":1,"state":1,"owner":1}')
    break
  fi
  progress
  if [ "$WAITING" -eq 0 ]; then break; fi
  sleep 0.2
done
progress $'\n'
if stopped "$w3"; then
  echo "worker 3 is stopped between commit and crediting the payee; killing it with SIGKILL"
  kill -9 "$w3"
  wait "$w3" 2>/dev/null || true
  echo "worker 3 is gone, leaving these transfers mid-flight (committed: the payer is"
  echo "debited, the payee not yet credited; preparing: not yet committed):"
  printf '%s\n' "${left:-(none: another worker had already taken them over)}" | sed 's/^/     /'
else
  echo "worker 3 finished before reaching its credit step no. $PAUSE_AT (nothing to kill)"
fi

nleft=0
[ -z "$left" ] || nleft=$(printf '%s\n' "$left" | wc -l)
say "The other workers drain the queue (worker 3's transfers stay as it left them)"
for _ in $(seq 1 600); do # at most 2 minutes
  progress
  if [ "$WAITING" -eq 0 ] && [ "$BUSY" -le "$nleft" ]; then break; fi
  sleep 0.2
done
progress $'\n'
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
wait 2>/dev/null || true

say "Audit before recovery (it may run at any time): what worker 3 debited and"
echo "   did not credit is money in flight, and conservation counts it"
d audit || true

say "Recovery: doctx recover finishes what worker 3 left (committed ones complete,"
echo "   preparing ones roll back)"
d recover --older-than-ms 0
if [ -n "$left" ]; then
  ids=$(printf '%s\n' "$left" | awk -F'"' '{ printf "%s\"%s\"", (NR > 1 ? "," : ""), $4 }')
  echo "worker 3's transfers now (the owner stays worker 3's when recovery completes a"
  echo "committed transfer, and becomes recover@... when it takes one over to roll back):"
  d find transfers "{\"_id\":{\"\$in\":[$ids]}}" --project '{"_id":1,"state":1,"reason":1,"owner":1}' |
    sed 's/^/     /'
fi

say "Audit after recovery: every transfer must be finished"
d audit --settled

say "Outcome"
tally
echo "$OK succeeded and $KO failed, of $N. Why each failure failed:"
d find transfers '{"state":"failed"}' --project '{"reason":1,"_id":0}' |
  awk -F'"' '{ n[$4]++ } END { for (r in n) print n[r], r }' | sort -rn |
  while read -r count reason; do
    case $reason in
    "insufficient funds") why="the payer's balance would have dropped below its min_balance; nothing moved" ;;
    "abandoned by its executor") why="its worker died before commit; recovery rolled it back, refunding the payer" ;;
    canceled) why="canceled (doctx transfer cancel) before it committed; rolled back" ;;
    "no such account") why="an account vanished after submission; rolled back" ;;
    "payee balance would overflow") why="crediting the payee would pass int64; rolled back" ;;
    *) why="(see the transfer documents: doctx transfer list --state failed)" ;;
    esac
    printf '   %4d  %s: %s\n' "$count" "$reason" "$why"
  done
echo "Money was neither lost nor made up: the balances add up to the opening total."
