#!/usr/bin/env bash
# The late executor: at every fault point the process is stopped (SIGSTOP)
# while a second process forces recovery; then it is resumed and runs to
# its end.  A final recovery and audit must be clean, and the money must
# have moved exactly once if t1 succeeded and not at all if it failed.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$HERE/../lib/txn.sh"

stopped() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }

for p in $("$DOCTX" faults); do
  # The Redis unique-claim steps are no step of a transfer, and need a
  # unique index: tests/redis/unique_crash.sh covers them.
  case "$p" in redis.*) continue ;; esac
  label="$p:pause"
  new_store "${p//./_}_pause"
  setup_accounts || { bad "$label: setup"; continue; }
  cmd=$(scenario_cmd "$p")
  # shellcheck disable=SC2086
  DOCTX_FAULT="$p:pause" "$DOCTX" --store "$S" $cmd >/dev/null 2>"$WORK/err" &
  pid=$!
  for _ in $(seq 1 500); do stopped "$pid" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.01; done
  if ! stopped "$pid"; then
    kill -CONT "$pid" 2>/dev/null; wait "$pid"; bad "$label: never paused (exit $?): $(head -3 "$WORK/err")"; continue
  fi
  d recover --older-than-ms 0 >/dev/null 2>"$WORK/rec.err" || true
  kill -CONT "$pid"
  wait "$pid"
  rc=$?
  if [ "$rc" -ge 4 ] && [ "$rc" -ne 5 ]; then
    bad "$label: resumed process exited $rc: $(tail -2 "$WORK/err")"; continue
  fi
  check_final "$label"
done
finish
