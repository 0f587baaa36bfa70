#!/usr/bin/env bash
# The late executor: at every fault point the process is stopped (SIGSTOP)
# while a second process forces recovery; then it is resumed and runs to
# its end.  A final recovery and audit must be clean (the scenario's
# check_final: for a transfer, money moved exactly once if it succeeded
# and not at all if it failed).  Points are dispatched by prefix to
# tests/crash/scenarios/PREFIX.sh, FAULT_JOBS at a time, as in faults.sh.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
scaffold_without_leak_check

one_point() { # POINT
  local p=$1 cmd rc pid rargs label="$1:pause" log=$WORK/job.$1/pause.log
  load_scenario "$p" || return
  new_store "${p//./_}_pause"
  scenario_setup || { bad "$label: setup"; return; }
  scenario_cmd_of "$p"; cmd=$CMD
  [ "$cmd" != UNKNOWN ] || { bad "$label: no scenario reaches this point"; return; }
  # shellcheck disable=SC2086
  fault_spec "$p" pause
  DOCTX_FAULT="$FSPEC" start_bg "$log" "$DOCTX" --store "$S" $cmd
  pid=$BG_PID
  if ! wait_stopped "$pid" 30; then
    bounded_wait "$pid" 30 "$log"
    bad "$label: never paused (exit $?): $(head -3 "$log")"; return
  fi
  # On SQLite the stopped process may hold the write lock: a point inside
  # a write transaction does, and so may any of its other threads (a job
  # runner's heartbeat renewing a lease) at the moment SIGSTOP lands.
  # Recovery then waits for it up to its deadline (the busy timeout is
  # five minutes without one), so it gets 10 s: it ends done or BUSY
  # (exit 4), the resumed process finishes, and the final recovery and
  # audit judge.  A scenario may bound it otherwise (scenario_recover_args).
  rargs=
  case "$S" in sqlite:*) rargs="--deadline-ms 10000" ;; esac
  if declare -F scenario_recover_args >/dev/null; then rargs=$(scenario_recover_args "$p"); fi
  # The forced recovery must END, done or refused, while the late
  # executor is stopped: recovery that waits out the bound on a stopped
  # process's lock is a hang a user would meet too.
  local t0=$SECONDS
  # shellcheck disable=SC2086
  run_bounded 120 "$WORK/job.$p/recover.log" "$DOCTX" --store "$S" recover --older-than-ms 0 $rargs
  rc=$?
  kill -CONT "$pid"
  if [ "$rc" -eq 124 ]; then
    bounded_wait "$pid" 120 "$log"
    bad "$label: recovery beside the stopped process did not end within 120 s: $(tail -2 "$WORK/job.$p/recover.log")"; return
  fi
  local t1=$SECONDS
  bounded_wait "$pid" 120 "$log"
  rc=$?
  [ $((SECONDS - t0)) -lt 30 ] ||
    echo "pause.sh: $label slow: recovery $((t1 - t0)) s, the resumed process $((SECONDS - t1)) s" >&2
  if [ "$rc" -ge 4 ] && [ "$rc" -ne 5 ]; then
    bad "$label: resumed process exited $rc: $(tail -2 "$log")"; return
  fi
  check_final "$label"
}

fault_points || exit 1
# Under DTX_QUICK (the sanitizer stage) the third of the points that
# faults.sh neither crashes nor fails there: each point runs once.
if [ -n "${DTX_QUICK:-}" ]; then
  POINTS=$(for p in $POINTS; do [ "${POINT_TURN[$p]}" != 2 ] || echo "$p"; done)
fi
# shellcheck disable=SC2086
run_jobs "${FAULT_JOBS:-2}" one_point $POINTS
finish
