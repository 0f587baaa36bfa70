#!/usr/bin/env bash
# deadline.sh -- one wall-time budget per command (docs/deadlines.md),
# measured against a standalone redis-server that is stopped (SIGSTOP)
# while a command runs.  Before the budget was per command, a transfer
# with retry_ms=10000 blocked for 82 s here (each step's retries
# multiplied the store's window), and `worker --once` ran for minutes and
# then exited 0.  Now each case must end within its budget plus slack,
# exit 4 saying what it waited for, and leave its work recoverable: after
# the server resumes, recovery and a settled audit are clean.
#
# Needs DTX_REDIS_URI (a standalone server: redis://H:P) and
# DTX_REDIS_PID (its pid, to stop and resume); run by run-redis.sh's
# deadline phase.  The server is resumed on exit whatever happens.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${DTX_REDIS_URI:?DTX_REDIS_URI must name a standalone Redis store}"
: "${DTX_REDIS_PID:?DTX_REDIS_PID must be the pid of its redis-server}"
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/transfer.sh"
on_exit kill -CONT "$DTX_REDIS_PID"

RETRY=3000 TIMEOUT=500
S=$("$HERE/fresh-store.sh" deadline)
case "$S" in *\?*) S="$S&" ;; *) S="$S?" ;; esac
S="${S}retry_ms=$RETRY&timeout_ms=$TIMEOUT"
# Slack on top of a budget: one request in flight (timeout_ms) when the
# budget ends, one more for the reply that reports it, and process
# start-up and shutdown on a loaded machine.
SLACK=$((2 * TIMEOUT + 1500))
setup_accounts || { bad "setup"; finish; exit 1; }

server_stop() { kill -STOP "$DTX_REDIS_PID"; }
server_resume() { kill -CONT "$DTX_REDIS_PID"; }

# budget_case LABEL BUDGET_MS FAULT ARGS... -- starts `doctx ARGS` armed
# to pause at FAULT (after it opened the store), stops the server, resumes
# doctx, and measures how long it takes to give up: it must exit 4 within
# BUDGET_MS + SLACK with an UNAVAILABLE message.  Output in $WORK/LABEL.*.
budget_case() {
  local label=$1 budget=$2 fault=$3 pid t0 ms rc
  shift 3
  DOCTX_FAULT=$fault start_bg "$WORK/$label.log" "$DOCTX" --store "$S" "$@"
  pid=$BG_PID
  if ! wait_stopped "$pid" 30; then
    bounded_wait "$pid" 30 "$WORK/$label.log"
    bad "$label: never reached $fault: $(tail -2 "$WORK/$label.log")"
    return 1
  fi
  server_stop
  t0=$(now_ms)
  kill -CONT "$pid"
  bounded_wait "$pid" $(((budget + SLACK) / 1000 + 60)) "$WORK/$label.log"
  rc=$?
  ms=$(($(now_ms) - t0))
  server_resume
  echo "$label: exit $rc after $ms ms (budget $budget ms + slack $SLACK ms)"
  [ "$rc" -eq 4 ] && ok || bad "$label: exit $rc, expected 4: $(tail -2 "$WORK/$label.log")"
  [ "$ms" -le $((budget + SLACK)) ] && ok || bad "$label: took $ms ms, over $budget + $SLACK"
  grep -q "doctx: UNAVAILABLE: .*gave up" "$WORK/$label.log" && ok ||
    bad "$label: no UNAVAILABLE reason: $(tail -2 "$WORK/$label.log")"
}

# Everything left behind is recoverable once the server is back.
recovered() { # LABEL ID...
  local label=$1 id st
  shift
  run_bounded 60 "$WORK/$label.recover" "$DOCTX" --store "$S" recover --older-than-ms 0 ||
    { bad "$label: recover failed: $(tail -2 "$WORK/$label.recover")"; return; }
  for id in "$@"; do
    st=$(state "$S" "$id")
    case "$st" in succeeded | failed) ok ;; *) bad "$label: $id is $st after recovery" ;; esac
  done
  if out=$(d audit --settled); then ok; else bad "$label: audit: $out"; fi
}

# 1. A transfer whose store stops answering mid-way: the URI's retry_ms is
#    the budget of the whole command, not of each step.
budget_case transfer $RETRY transfer.debit:pause transfer A B 5 --id dl1
# 2. --deadline-ms is a tighter budget than the store's window.
budget_case transfer-deadline 1500 transfer.debit:pause \
  transfer A B 5 --id dl2 --deadline-ms 1500
recovered transfers dl1 dl2

# 3. worker --once that cannot reach the store: exit 4 with the reason,
#    and the transfer is left for the next worker.  The worker found dl3
#    before it paused at the claim, so its claim went to the stopped
#    server: a write whose reply never came, which the server may apply
#    once it resumes.  dl3 is then preparing under the dead worker's
#    1 s lease, which the next worker's recovery pass takes over.
d transfer A B 7 --id dl3 --async >/dev/null || bad "submit dl3"
budget_case worker-once $RETRY transfer.claim:pause worker --once --lease-ms 1000
case "$(state "$S" dl3)" in initiated | preparing) ok ;; *) bad "worker-once: dl3 is $(state "$S" dl3)" ;; esac
sleep 1.2 # the claim's lease, when it landed, has lapsed
# The next worker ends it: it runs it (initiated), or its recovery pass
# rolls back the lapsed claim (preparing: nothing was debited yet).
run_bounded 60 "$WORK/worker2.log" "$DOCTX" --store "$S" worker --once &&
  case "$(state "$S" dl3)" in succeeded | failed) true ;; *) false ;; esac && ok ||
  bad "worker-once: a second worker did not finish dl3: $(tail -2 "$WORK/worker2.log")"
grep -Eq '"(succeeded|rolled_back)":1' "$WORK/worker2.log" && ok ||
  bad "worker summary: $(<"$WORK/worker2.log")"
if out=$(d audit --settled); then ok; else bad "worker-once: audit: $out"; fi

# 4. recover itself runs under one budget.
DOCTX_FAULT=transfer.commit:crash d transfer A B 9 --id dl4 >/dev/null 2>&1
budget_case recover $RETRY transfer.recover.scan_markers:pause recover --older-than-ms 0
recovered recover dl4

# 5. A worker started while the server is stopped: it cannot open the
#    store, and says so within one request timeout.
server_stop
t0=$(now_ms)
run_bounded 60 "$WORK/closed.log" "$DOCTX" --store "$S" worker --once
rc=$?
ms=$(($(now_ms) - t0))
server_resume
[ "$rc" -eq 4 ] && [ "$ms" -le $((TIMEOUT + SLACK)) ] && ok ||
  bad "closed: exit $rc after $ms ms: $(tail -2 "$WORK/closed.log")"
finish
