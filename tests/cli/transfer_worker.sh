#!/usr/bin/env bash
# The batched transfer worker (docs/batching.md, "The transfer
# worker"): `worker --batch N` claims up to N initiated transfers in one
# round and drives them through many.c's lockstep.
#  1  mixed outcomes: 64 initiated transfers (successes, declines for
#     funds, a missing payee, a missing payer) end exactly as the
#     one-at-a-time worker (--batch 1) ends them on a twin store: every
#     transfer's state and reason, every balance; audit clean on both;
#  2  two workers racing over the same 200 transfers: each transfer is
#     claimed once (epoch 1) and driven once (the two summaries add up to
#     200), money is conserved, audit clean;
#  3  a worker that crashes mid-batch (DOCTX_FAULT at transfer.commit /
#     transfer.debit_mark.done / transfer.finish, on the 3rd transfer of
#     its batch, or at transfer.batch.split) leaves a store that recovery
#     ends: all terminal, audit clean.
# Runs on SQLite and, under tests/redis/run-redis.sh (cli phase), on both
# Redis targets.  DTX_QUICK shortens the loops.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/transfer.sh"

if [ -n "${DTX_QUICK:-}" ]; then NMIX=32 NRACE=60; else NMIX=64 NRACE=200; fi

# The initiated transfer document of id FROM TO AMOUNT, as --async records
# it (inserted directly, past the rules -- a plain insert of a transfer is
# refused: one process for a whole set, and a payee or payer that does not
# exist, which submission would refuse).
tx_doc() {
  printf '{"_id":"%s","from":"%s","to":"%s","amount":%d,"state":"initiated","reason":null,"owner":null,"lease_until":0,"epoch":0,"created":1,"updated":1}' \
    "$1" "$2" "$3" "$4"
}

# Every transfer's id, state and reason, and every account's id and
# balance, one per line, sorted: what two runs must agree on.
outcome() {
  d find transfers '{}' --project '{"state":1,"reason":1}' | sort
  d find accounts '{}' --project '{"balance":1,"pending":1}' | sort
}

audit_clean() { # LABEL
  if d audit --settled >"$WORK/audit.out" 2>&1; then ok; else
    bad "$1: audit: $(tail -3 "$WORK/audit.out")"
  fi
}

# ---- 1: mixed outcomes, batched and one at a time -------------------------------
mixed_store() { # NAME -> $S with the accounts and NMIX initiated transfers
  local i docs=() p
  new_store "$1"
  for p in 0 1 2 3 4 5 6 7; do
    d account create "P$p" --balance 1000 >/dev/null || bad "$1: account P$p"
  done
  d account create Q --balance 0 >/dev/null || bad "$1: account Q"
  for ((i = 0; i < NMIX; i++)); do
    p=$((i % 8))
    if ((i % 8 == 3)); then docs+=("$(tx_doc "m$i" "P$p" Q 5000)")   # funds
    elif ((i % 8 == 5)); then docs+=("$(tx_doc "m$i" "P$p" GONE 10)") # payee
    elif ((i % 16 == 7)); then docs+=("$(tx_doc "m$i" NOPE Q 10)")    # payer
    else docs+=("$(tx_doc "m$i" "P$p" Q $((10 + i)))"); fi
  done
  d insert transfers "${docs[@]}" --bypass-validation >/dev/null || bad "$1: insert"
}

mixed_store batched
SB=$S
run_bounded 120 "$WORK/wb.log" "$DOCTX" --store "$SB" worker --once --batch 16 ||
  bad "mixed: worker --batch 16: $(tail -3 "$WORK/wb.log")"
audit_clean "mixed batched"
outcome >"$WORK/batched.out"
mixed_store single
run_bounded 120 "$WORK/w1.log" "$DOCTX" --store "$S" worker --once --batch 1 ||
  bad "mixed: worker --batch 1: $(tail -3 "$WORK/w1.log")"
audit_clean "mixed one at a time"
outcome >"$WORK/single.out"
if cmp -s "$WORK/batched.out" "$WORK/single.out"; then ok; else
  bad "mixed: batched and one-at-a-time outcomes differ: $(diff "$WORK/batched.out" "$WORK/single.out" | head -10)"
fi
# Again with a lease so short that the batch renews it on the transfers
# still to go before their commit and before each split one's drive
# (many.c, keep_leases): the same outcomes.
mixed_store short_lease
run_bounded 120 "$WORK/ws.log" "$DOCTX" --store "$S" worker --once --batch 16 \
  --lease-ms 8 || bad "mixed: worker --lease-ms 8: $(tail -3 "$WORK/ws.log")"
audit_clean "mixed short lease"
outcome >"$WORK/short.out"
if cmp -s "$WORK/short.out" "$WORK/single.out"; then ok; else
  bad "mixed: short-lease and one-at-a-time outcomes differ: $(diff "$WORK/short.out" "$WORK/single.out" | head -10)"
fi
# Each kind of outcome is there (the comparison is not of two empty runs).
for want in '"state":"succeeded"' 'insufficient funds' 'no such account'; do
  grep -q "$want" "$WORK/batched.out" && ok || bad "mixed: no '$want' outcome"
done
n=$(grep -c '"state":"\(succeeded\|failed\)"' "$WORK/batched.out")
[ "$n" = "$NMIX" ] && ok || bad "mixed: $n of $NMIX transfers terminal"

# ---- 2: two workers race over the same transfers --------------------------------
new_store race
for a in 0 1 2 3 4 5 6 7 8 9; do
  d account create "R$a" --balance 1000 >/dev/null || bad "race: account R$a"
done
docs=()
for ((i = 0; i < NRACE; i++)); do
  a=$((i % 10)) b=$(((i + 1 + i / 10) % 10))
  [ "$a" = "$b" ] && b=$(((b + 1) % 10))
  docs+=("$(tx_doc "r$i" "R$a" "R$b" $((1 + (i * 37) % 150)))")
done
d insert transfers "${docs[@]}" --bypass-validation >/dev/null || bad "race: insert"
for w in 0 1; do
  start_bg "$WORK/race$w.log" "$DOCTX" --store "$S" worker --once --batch 16 \
    --owner "race$w"
  rpid[$w]=$BG_PID
done
for w in 0 1; do
  bounded_wait "${rpid[$w]}" 120 "$WORK/race$w.log" ||
    bad "race: worker $w: $(tail -3 "$WORK/race$w.log")"
done
# Driven once by its claimer: the workers' drives (counted by the state
# they ended in) add up to the transfers.  A worker's idle round also runs
# a recovery pass, which may finish another worker's committed transfer
# alongside it (idempotent) and counts that as "finished": not a drive.
ran=$(cat "$WORK/race0.log" "$WORK/race1.log" | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    line = line.strip()
    if line.startswith("{"):
        ran = json.loads(line)["patterns"]["transfer"]["ran"]
        n += ran.get("succeeded", 0) + ran.get("failed", 0)
print(n)')
[ "$ran" = "$NRACE" ] && ok || bad "race: the workers ran $ran transfers, not $NRACE"
# Claimed once: a claim is the only step that bumps an initiated
# transfer's epoch, and nothing took one over.
n=$(d find transfers '{"epoch":1,"state":{"$in":["succeeded","failed"]}}' --project '{"_id":1}' | wc -l)
[ "$n" = "$NRACE" ] && ok || bad "race: $n of $NRACE transfers terminal at epoch 1"
total=$(d find accounts '{}' --project '{"_id":0,"balance":1}' |
  sed 's/[^0-9-]//g' | awk '{ s += $1 } END { print s }')
[ "$total" = 10000 ] && ok || bad "race: balances add up to $total, not 10000"
audit_clean race

# ---- 3: a worker crashes mid-batch ----------------------------------------------
# transfer.batch.split:1 -- c6 leaving the lockstep -- also proves the
# worker took the batched path (one at a time never reaches it).
for point in transfer.commit:3 transfer.debit_mark.done:3 transfer.finish:3 \
  transfer.batch.split:1; do
  nth=${point#*:} point=${point%:*}
  new_store "crash_${point//./_}"
  setup_accounts || bad "crash $point: setup"
  docs=()
  for i in 0 1 2 3 4 5; do docs+=("$(tx_doc "c$i" A B $((10 + i)))"); done
  docs+=("$(tx_doc c6 A B 5000)") # declined: splits off
  d insert transfers "${docs[@]}" --bypass-validation >/dev/null || bad "crash $point: insert"
  run_bounded 60 "$WORK/crash.log" env DOCTX_FAULT="$point:crash:$nth" \
    "$DOCTX" --store "$S" worker --once --batch 16
  rc=$?
  [ "$rc" = 137 ] && ok || bad "crash $point: worker exit $rc, want 137 (the crash): $(tail -3 "$WORK/crash.log")"
  left=$(d find transfers '{"state":{"$nin":["succeeded","failed"]}}' --project '{"_id":1}' | wc -l)
  [ "$left" -gt 0 ] && ok || bad "crash $point: the crash left no transfer unfinished"
  run_bounded 60 "$WORK/rec.log" "$DOCTX" --store "$S" recover --older-than-ms 0 ||
    bad "crash $point: recover: $(tail -3 "$WORK/rec.log")"
  run_bounded 60 "$WORK/w.log" "$DOCTX" --store "$S" worker --once ||
    bad "crash $point: worker after recover: $(tail -3 "$WORK/w.log")"
  n=$(d find transfers '{"state":{"$in":["succeeded","failed"]}}' --project '{"_id":1}' | wc -l)
  [ "$n" = 7 ] && ok || bad "crash $point: $n of 7 transfers terminal"
  [ "$(state x c6)" = failed ] && ok || bad "crash $point: c6 is $(state x c6), not failed"
  audit_clean "crash $point"
done

finish
