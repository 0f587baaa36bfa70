#!/usr/bin/env bash
# Crash and error injection at every fault point (`doctx faults`): the
# process reaching the point dies there (crash) or its store step fails
# (error); then recovery and the audit must find every invariant intact.
# Each point is dispatched by its prefix to tests/crash/scenarios/PREFIX.sh
# (the pattern that owns it), which says how to reach it and what must
# hold afterwards -- so a new point, or a new pattern with its scenario
# file, is covered without editing this.  Independent points run
# FAULT_JOBS at a time (default 2), each in a store of its own.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
scaffold_without_leak_check

one_point() { # POINT
  local p=$1 action cmd rc label err
  load_scenario "$p" || return
  for action in $(actions_at "$p"); do
    label="$p:$action"
    new_store "${p//./_}_$action"
    scenario_setup || { bad "$label: setup"; continue; }
    scenario_cmd_of "$p"; cmd=$CMD
    [ "$cmd" != UNKNOWN ] || { bad "$label: no scenario reaches this point"; continue; }
    err=$WORK/job.$p/$action.log
    # shellcheck disable=SC2086
    fault_spec "$p" "$action"
    DOCTX_FAULT="$FSPEC" run_bounded 120 "$err" "$DOCTX" --store "$S" $cmd
    rc=$?
    if [[ $(<"$err") != *"doctx: fault: $p $action"* ]]; then # no grep start per row
      bad "$label: fault point was not reached (rc=$rc): $(head -3 "$err")"; continue
    fi
    if [ "$action" = crash ] && [ "$rc" -ne 137 ]; then
      bad "$label: expected exit 137 after crash, got $rc"; continue
    fi
    check_final "$label"
  done
}

# Both actions at every point; under DTX_QUICK (the sanitizer stage, where
# a doctx start costs ~10x a release one) one action per point, by turns
# down the list: crash, error, and pause (pause.sh's third): every point
# still runs under the sanitizers, once, and the release stage runs
# everything on every backend.
actions_at() { # POINT
  if [ -z "${DTX_QUICK:-}" ]; then echo crash error
  else
    case ${POINT_TURN[$1]} in 0) echo crash ;; 1) echo error ;; esac
  fi
}

fault_points || exit 1
# shellcheck disable=SC2086
run_jobs "${FAULT_JOBS:-2}" one_point $POINTS
finish
