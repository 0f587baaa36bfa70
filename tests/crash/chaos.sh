#!/usr/bin/env bash
# Chaos: 3 worker processes run while a killer sends SIGKILL to one of them
# at random every 100-500 ms and restarts it, and a submitter keeps sending
# async transfers.  Then everything quiesces, recovery and the audit run:
# the audit must be clean and succeeded + failed must equal submitted.
# Bounded: CHAOS_SECONDS (default 20; 8 under DTX_QUICK).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
source "$HERE/../lib/txn.sh"
secs=${CHAOS_SECONDS:-20}
[ -n "${DTX_QUICK:-}" ] && secs=${CHAOS_SECONDS:-8}

new_store chaos
for i in $(seq 0 9); do d account create "c$i" --balance 500 >/dev/null || { echo setup failed; exit 1; }; done

declare -a wpid
start_worker() { "$DOCTX" --store "$S" worker --threads 2 --lease-ms 300 --owner "w$1" >/dev/null 2>>"$WORK/worker.err" & wpid[$1]=$!; echo "${wpid[$1]}" >>"$WORK/pids"; }
cleanup() {
  for p in $(cat "$WORK/pids" 2>/dev/null) ${subpid:-}; do kill -9 "$p" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
for w in 0 1 2; do start_worker $w; done

# Submitter: async transfers with client ids, counted when acknowledged.
(
  n=0
  end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    a=$((RANDOM % 10)); b=$(((a + 1 + RANDOM % 9) % 10))
    if d transfer "c$a" "c$b" $((1 + RANDOM % 300)) --id "s$n" --async >/dev/null 2>>"$WORK/submit.err"; then
      echo "s$n" >>"$WORK/submitted"
    fi
    n=$((n + 1))
  done
) &
subpid=$!

kills=0
end=$((SECONDS + secs))
while [ $SECONDS -lt $end ]; do
  sleep "0.$((100 + RANDOM % 400))"
  w=$((RANDOM % 3))
  kill -9 "${wpid[$w]}" 2>/dev/null && kills=$((kills + 1))
  wait "${wpid[$w]}" 2>/dev/null
  start_worker $w
done
wait $subpid
for w in 0 1 2; do kill -TERM "${wpid[$w]}" 2>/dev/null; done
for w in 0 1 2; do wait "${wpid[$w]}" 2>/dev/null; done

# Quiesce: drain what is left, recover the abandoned, audit.
d worker --once --threads 2 >/dev/null || bad "final worker --once failed"
d recover --older-than-ms 0 >/dev/null || bad "recover failed"
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
