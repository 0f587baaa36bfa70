#!/usr/bin/env bash
# The transfer demo (second part of `make run`): a burst of concurrent
# transfers from several worker processes on the embedded store, one
# worker killed with SIGKILL mid-transfer, then recovery and the audit.
set -euo pipefail
DOCTX=${1:?usage: demo_transfer.sh path/to/doctx}
DIR=$(mktemp -d)
S="sqlite:$DIR/bank.db"
d() { "$DOCTX" --store "$S" "$@"; }
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$DIR"' EXIT
say() { printf '\n== %s\n' "$*"; }
count() { d count transfers "{\"state\":\"$1\"}"; }

say "Twelve accounts of 1,000 each, plus 'bank', a settlement account with no lower limit"
for i in $(seq -w 1 12); do d account create "acct$i" --balance 1000 >/dev/null; done
d account create bank --balance 0 --min-balance none
echo "opening total: 12,000"

say "Submitting 400 transfers (random pairs, 1..400, some larger than the payer holds)"
for n in $(seq 1 400); do
  a=$((1 + RANDOM % 12)); b=$((1 + (a + RANDOM % 11) % 12))
  [ $((n % 40)) -eq 0 ] && a=bank || a=$(printf 'acct%02d' $a)
  d transfer "$a" "$(printf 'acct%02d' $b)" $((1 + RANDOM % 400)) --id "demo-$n" --async >/dev/null
done
echo "recorded $(count initiated) transfers in state initiated"

say "Starting 3 worker processes (2 threads each); worker 3 will stop inside its 30th credit step"
for w in 1 2; do "$DOCTX" --store "$S" worker --threads 2 --lease-ms 500 --owner "worker$w" >/dev/null 2>&1 & pids+=($!); done
DOCTX_FAULT=transfer.credit_payee:pause:30 "$DOCTX" --store "$S" worker --threads 2 --lease-ms 500 --owner worker3 >/dev/null 2>"$DIR/w3.err" & w3=$!; pids+=($w3)

while :; do
  ini=$(count initiated); ok=$(count succeeded); ko=$(count failed)
  printf '\r   progress: %3s succeeded, %3s failed, %3s waiting ' "$ok" "$ko" "$ini"
  if [ "$(awk '{print $3}' /proc/$w3/stat 2>/dev/null)" = T ]; then break; fi
  if [ "$ini" -eq 0 ]; then break; fi
  sleep 0.2
done
echo
if [ "$(awk '{print $3}' /proc/$w3/stat 2>/dev/null)" = T ]; then
  echo "worker 3 is stopped between commit and crediting the payee; killing it with SIGKILL"
  kill -9 "$w3"; wait "$w3" 2>/dev/null || true
  echo "worker 3 is gone; its transfer is committed but the payee is not yet credited"
fi
echo "transfers left committed (money in flight): $(count committed)"
echo "transfers left preparing: $(count preparing)"

say "The other workers drain the queue (their recovery pass also picks up the dead worker's claims)"
while [ "$(count initiated)" -gt 0 ]; do
  printf '\r   progress: %3s succeeded, %3s failed, %3s waiting ' "$(count succeeded)" "$(count failed)" "$(count initiated)"
  sleep 0.2
done
echo
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
wait 2>/dev/null || true

say "Audit before recovery (it may run at any time)"
d audit || true

say "Recovery: finish what the killed worker left behind"
d recover --older-than-ms 0

say "Audit after recovery"
d audit --settled
echo
echo "succeeded: $(count succeeded), failed: $(count failed) (insufficient funds: $(d count transfers '{"reason":"insufficient funds"}'))"
echo "Money was neither lost nor made up: the balances add up to the opening total."
