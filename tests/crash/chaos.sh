#!/usr/bin/env bash
# Chaos: 3 worker processes run while a killer sends SIGKILL to one of them
# at random every 100-500 ms and restarts it, and a submitter keeps sending
# async transfers.  Then everything quiesces, recovery and the audit run:
# the audit must be clean and succeeded + failed must equal submitted.
# Bounded: CHAOS_SECONDS (default 10; 6 under DTX_QUICK), and every wait
# through the harness (a worker that ignores SIGTERM is killed, its log
# tail printed).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
secs=${CHAOS_SECONDS:-10}
[ -n "${DTX_QUICK:-}" ] && secs=${CHAOS_SECONDS:-6}

new_store chaos
for i in $(seq 0 9); do d account create "c$i" --balance 500 >/dev/null || { echo setup failed; exit 1; }; done

declare -a wpid
start_worker() {
  start_bg "$WORK/worker.log" "$DOCTX" --store "$S" worker --threads 2 \
    --lease-ms 300 --owner "w$1"
  wpid[$1]=$BG_PID
}
for w in 0 1 2; do start_worker $w; done

# Submitter: async transfers with client ids, counted when acknowledged.
submitter() {
  local n=0 a b end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    a=$((RANDOM % 10)); b=$(((a + 1 + RANDOM % 9) % 10))
    if d transfer "c$a" "c$b" $((1 + RANDOM % 300)) --id "s$n" --async >/dev/null 2>>"$WORK/submit.err"; then
      echo "s$n" >>"$WORK/submitted"
    fi
    n=$((n + 1))
  done
}
: >"$WORK/submitted"
start_bg "$WORK/submit.log" submitter
subpid=$BG_PID

kills=0
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ]; do
  sleep "0.$((100 + RANDOM % 400))"
  w=$((RANDOM % 3))
  kill -9 "${wpid[$w]}" 2>/dev/null && kills=$((kills + 1))
  bounded_wait "${wpid[$w]}" 10 "$WORK/worker.log"
  start_worker $w
done
bounded_wait "$subpid" $((secs + 60)) "$WORK/submit.err" || bad "submitter did not finish"
for w in 0 1 2; do stop_bg "${wpid[$w]}" 10 "$WORK/worker.log"; done

# Quiesce: drain what is left, recover the abandoned, audit.
run_bounded 120 "$WORK/final-worker.log" "$DOCTX" --store "$S" worker --once --threads 2 ||
  bad "final worker --once failed: $(tail -3 "$WORK/final-worker.log")"
run_bounded 120 "$WORK/recover.log" "$DOCTX" --store "$S" recover --older-than-ms 0 ||
  bad "recover failed: $(tail -3 "$WORK/recover.log")"
if out=$(d audit --settled); then ok; else bad "audit after chaos: $out"; fi

submitted=$(wc -l <"$WORK/submitted")
succeeded=$(d count transfers '{"state":"succeeded"}')
failed=$(d count transfers '{"state":"failed"}')
total=$(d count transfers)
echo "chaos: ${secs}s, $kills worker kills, $submitted submitted, $succeeded succeeded, $failed failed"
[ "$submitted" -gt 0 ] && [ "$kills" -gt 0 ] || bad "chaos did not run (submitted=$submitted kills=$kills)"
[ $((succeeded + failed)) -eq "$submitted" ] && ok || bad "succeeded+failed=$((succeeded + failed)) != submitted=$submitted"
[ "$total" -eq "$submitted" ] && ok || bad "transfers recorded $total != submitted $submitted"
finish
