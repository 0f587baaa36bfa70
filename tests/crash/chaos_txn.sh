#!/usr/bin/env bash
# Chaos for multi-document transactions (docs/transactions.md): 3 movers
# run `doctx txn` bank moves back to back (a payer pays 1-3 others, a
# require checks its balance) while a killer sends SIGKILL to their doctx
# processes at random every 50-250 ms, wherever they are in the protocol
# (intents written, record pending or committed, keys half rolled
# forward), and a reader sums every balance in read-only snapshot
# transactions.  Then recovery and the audit run: every snapshot sum and
# the final plain sum equal the total, the audit is clean, and no record
# is pending and no intent left.  Bounded: CHAOS_TXN_SECONDS (default 4;
# 2 under DTX_QUICK), each transaction by --deadline-ms, every wait
# through the harness.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
secs=${CHAOS_TXN_SECONDS:-4}
[ -n "${DTX_QUICK:-}" ] && secs=${CHAOS_TXN_SECONDS:-2}
N=8 OPENING=500 TOTAL=$((8 * 500))

new_store chaos_txn
docs=()
for i in $(seq 0 $((N - 1))); do docs+=("{\"_id\":\"a$i\",\"bal\":$OPENING}"); done
d insert acct "${docs[@]}" >/dev/null || { echo setup failed; exit 1; }

# sum_bal TEXT: SUM and NDOCS of every "bal" in TEXT (builtins only).
sum_bal() {
  local s=$1
  SUM=0 NDOCS=0
  while [[ $s =~ \"bal\":(-?[0-9]+) ]]; do
    SUM=$((SUM + BASH_REMATCH[1])) NDOCS=$((NDOCS + 1))
    s=${s#*"${BASH_REMATCH[0]}"}
  done
}

# mover I: moves until the time is up; each doctx's pid in WORK/mover.I.pid
# (for the killer), each exit code in WORK/mover.I.rc.
mover() {
  local end=$((SECONDS + secs)) n a p i k amt script pid rc
  while [ $SECONDS -lt $end ]; do
    n=$((2 + RANDOM % 3)) a=$((RANDOM % N)) amt=$((1 + RANDOM % 60))
    script="[{\"find_one\":\"acct\",\"filter\":{\"_id\":\"a$a\"},\"as\":\"p\"},"
    script+="{\"require\":\"p\",\"filter\":{\"bal\":{\"\$gte\":$((amt * (n - 1)))}}},"
    script+="{\"update\":\"acct\",\"filter\":{\"_id\":\"a$a\"},\"with\":{\"\$inc\":{\"bal\":-$((amt * (n - 1)))}}}"
    for ((k = 1; k < n; k++)); do
      p=$(((a + k) % N))
      script+=",{\"update\":\"acct\",\"filter\":{\"_id\":\"a$p\"},\"with\":{\"\$inc\":{\"bal\":$amt}}}"
    done
    "$DOCTX" --store "$S" txn --lease-ms 300 --deadline-ms 5000 "$script]" \
      >/dev/null 2>>"$WORK/mover.$1.err" &
    pid=$!
    echo "$pid" >"$WORK/mover.$1.pid"
    wait "$pid"
    rc=$?
    echo "$rc" >>"$WORK/mover.$1.rc"
  done
}

# reader: read-only snapshot sums; a sum that is not the total is logged.
reader() {
  local end=$((SECONDS + secs)) out
  while [ $SECONDS -lt $end ]; do
    if out=$("$DOCTX" --store "$S" txn --deadline-ms 5000 \
      '[{"find":"acct","filter":{},"limit":100,"as":"all"}]' 2>>"$WORK/reader.err"); then
      sum_bal "$out"
      echo "$SUM $NDOCS" >>"$WORK/sums"
    else
      echo "exit $?" >>"$WORK/reader.err"
    fi
  done
}

: >"$WORK/sums"
declare -a mpid
for m in 0 1 2; do
  : >"$WORK/mover.$m.rc"
  start_bg "$WORK/mover.$m.log" mover $m
  mpid[$m]=$BG_PID
done
start_bg "$WORK/reader.log" reader
rpid=$BG_PID

# The killer: a doctx of a random mover, checked by its command line (a
# pid the mover has already reaped is not a doctx any more, or another
# mover's, which is as good).
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ]; do
  printf -v t '0.%03d' $((50 + RANDOM % 200))
  nap "$t"
  pid=
  { read -r pid <"$WORK/mover.$((RANDOM % 3)).pid"; } 2>/dev/null || continue
  cmd=
  { read -r -d '' cmd <"/proc/$pid/cmdline"; } 2>/dev/null
  [ "$cmd" = "$DOCTX" ] && kill -9 "$pid" 2>/dev/null
done
for m in 0 1 2; do
  bounded_wait "${mpid[$m]}" 30 "$WORK/mover.$m.err" || bad "mover $m did not finish"
done
bounded_wait "$rpid" 30 "$WORK/reader.err" || bad "reader did not finish"

# Quiesce: recover the abandoned (leases of 300 ms), audit, count.
left=$(d count txn_records '{"state":"pending"}')/$(d count acct '{"_txn.w":{"$exists":true}}')
run_bounded 60 "$WORK/recover.log" "$DOCTX" --store "$S" recover --older-than-ms 0 ||
  bad "recover failed: $(tail -3 "$WORK/recover.log")"
if out=$(d audit --settled); then ok; else bad "audit after chaos: $out"; fi
pending=$(d count txn_records '{"state":"pending"}')
intents=$(d count acct '{"_txn.w":{"$exists":true}}')
[ "$pending" = 0 ] && [ "$intents" = 0 ] && ok || bad "after recover: $pending pending records, $intents intents"
sum_bal "$(d find acct '{}' --project '{"bal":1}')"
[ "$SUM" -eq "$TOTAL" ] && [ "$NDOCS" -eq "$N" ] && ok || bad "final balances sum to $SUM over $NDOCS accounts, want $TOTAL over $N"
while read -r s c; do
  [ "$s" -eq "$TOTAL" ] && [ "$c" -eq "$N" ] || { bad "a snapshot sum of $s over $c accounts, want $TOTAL over $N"; break; }
done <"$WORK/sums"
# Exit codes: 0 committed, 1 a require refused, 3 conflict at the
# deadline, 4 outcome unknown, 137 killed; anything else is a failure.
cat "$WORK"/mover.*.rc >"$WORK/rcs"
count_rc() { grep -c "^$1\$" "$WORK/rcs"; }
committed=$(count_rc 0) refused=$(count_rc 1) conflicts=$(count_rc 3)
unknown=$(count_rc 4) kills=$(count_rc 137)
others=$(grep -cvE '^(0|1|3|4|137)$' "$WORK/rcs")
sums=$(wc -l <"$WORK/sums")
ran=$(grep '^{' "$WORK/recover.log" | jq -c '.patterns.txn.ran' 2>/dev/null)
echo "chaos_txn: ${secs}s, $kills killed, $committed committed, $refused refused, $conflicts conflicts, $unknown unknown, $sums snapshot sums; left pending/intents $left, recover ran ${ran:-?}"
[ "$others" -eq 0 ] || bad "movers exited otherwise: $(grep -vE '^(0|1|3|4|137)$' "$WORK/rcs" | sort | uniq -c | tr '\n' ' '); $(tail -3 "$WORK"/mover.*.err)"
[ "$kills" -gt 0 ] && [ "$committed" -gt 0 ] && [ "$sums" -gt 0 ] && ok ||
  bad "chaos did not run (kills=$kills committed=$committed sums=$sums)"
finish
