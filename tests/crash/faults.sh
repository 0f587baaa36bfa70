#!/usr/bin/env bash
# Crash and error injection at every fault point (`doctx faults`): the
# process reaching the point dies there (crash) or its store step fails
# (error); then recovery and the audit must find every invariant intact,
# t1 terminal and the balances exactly matching its final state.  Looping
# over `doctx faults` means a new point is covered without editing this.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
source "$HERE/../lib/txn.sh"

points=$("$DOCTX" faults)
[ -n "$points" ] || { echo "no fault points"; exit 1; }
for p in $points; do
  # The Redis unique-claim steps are no step of a transfer, and need a
  # unique index: tests/redis/unique_crash.sh covers them.
  case "$p" in redis.*) continue ;; esac
  for action in crash error; do
    label="$p:$action"
    new_store "${p//./_}_$action"
    setup_accounts || { bad "$label: setup"; continue; }
    cmd=$(scenario_cmd "$p")
    [ "$cmd" != UNKNOWN ] || { bad "$label: no scenario reaches this point"; continue; }
    err=$WORK/err
    # shellcheck disable=SC2086
    DOCTX_FAULT="$p:$action" d $cmd >/dev/null 2>"$err"
    rc=$?
    if ! grep -q "doctx: fault: $p $action" "$err"; then
      bad "$label: fault point was not reached (rc=$rc): $(head -3 "$err")"; continue
    fi
    if [ "$action" = crash ] && [ "$rc" -ne 137 ]; then
      bad "$label: expected exit 137 after crash, got $rc"; continue
    fi
    check_final "$label"
  done
done
finish
