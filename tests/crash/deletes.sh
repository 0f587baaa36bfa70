#!/usr/bin/env bash
# The tamper table's second half (docs/validation.md): every
# protocol document deleted mid-flight at every fault point.  At each
# transfer.* point the process is stopped there (a pause fault) and one of
# the documents the scenario moves -- payer A, payee B, transfer t1 -- is
# deleted:
#   - through the delete guard first: refused (exit 3) while the document
#     still matters (money on an account, a transfer not failed);
#   - then with --bypass-validation; the process resumes, recovery runs,
#     and the audit must report it (exit 5).
# A document that is not there yet (t1 before its submit) or that its
# guard lets go (a failed transfer) must leave the audit clean.  So may a
# transfer record deleted while no money had moved for good: recovery
# returns what its markers held, A and B end as they began, and the
# client was not told it succeeded.  None may pass silently: the audit
# must never call a store clean that lost or made money.
#
# Scenarios come from tests/crash/scenarios/transfer.sh (how to reach each
# point).  Under DTX_QUICK (the sanitizer stage), or with DELETES_TURN=K
# (run-redis.sh: 1 on the standalone server, 2 on the cluster, so the two
# take different documents at each point), each point deletes one of the
# three documents, by turns; otherwise all three (release, SQLite).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
scaffold_without_leak_check
source "$HERE/../lib/transfer.sh"

one_row() { # POINT DOC ("accounts:A", "accounts:B", "transfers:t1")
  local p=$1 coll=${2%%:*} id=${2#*:} label="$1 delete $2" cmd pid rc log n resumed
  log=$WORK/job.$p/$coll.$id.log
  new_store "${p//./_}_${coll}_$id"
  scenario_setup || { bad "$label: setup"; return; }
  scenario_cmd_of "$p"; cmd=$CMD
  # shellcheck disable=SC2086
  DOCTX_FAULT="$p:pause" start_bg "$log" "$DOCTX" --store "$S" $cmd
  pid=$BG_PID
  if ! wait_stopped "$pid" 30; then
    bounded_wait "$pid" 30 "$log"
    bad "$label: never paused (exit $?): $(head -3 "$log")"; return
  fi
  d delete "$coll" "{\"_id\":\"$id\"}" >"$log.del" 2>&1
  rc=$?
  n=$(sed -n 's/^{"deleted":\([0-9]*\)}$/\1/p' "$log.del")
  case "$rc:$n" in
  3:) # refused by the guard: now as an operator who bypasses it
    d delete "$coll" "{\"_id\":\"$id\"}" --bypass-validation >"$log.del" 2>&1 ||
      { kill -CONT "$pid"; bad "$label: bypass delete failed: $(<"$log.del")"; return; }
    n=bypassed ;;
  0:0 | 0:1) ;; # not there yet, or its guard let it go
  *) kill -CONT "$pid"; bad "$label: delete exit $rc: $(<"$log.del")"; return ;;
  esac
  kill -CONT "$pid"
  bounded_wait "$pid" 120 "$log"
  resumed=$?
  run_bounded 120 "$log.rec" "$DOCTX" --store "$S" recover --older-than-ms 0
  d audit >"$log.audit" 2>&1
  rc=$?
  # A transfer record deleted before any money moved for good leaves
  # nothing wrong to find: recovery returns what its markers held.  That
  # is fine only if no money moved and the client was not told success.
  if [ "$n:$rc:$coll" = bypassed:0:transfers ] && [ "$(balance A):$(balance B)" = 1000:1000 ] &&
    { [ "$resumed" != 0 ] || [ "${cmd%% *}" != transfer ]; }; then
    n=harmless
  fi
  case "$n:$rc" in
  bypassed:5 | 0:0 | 1:0 | harmless:0) ok ;;
  bypassed:*) bad "$label: deleted past its guard, but the audit exits $rc: $(tail -3 "$log.audit")" ;;
  *) bad "$label: a delete the guard allowed ($n), but the audit exits $rc: $(grep FINDING "$log.audit" | head -3)" ;;
  esac
}

one_point() { # POINT
  local p=$1 doc docs="accounts:A accounts:B transfers:t1"
  load_scenario "$p" || return
  if [ -n "${DTX_QUICK:-}${DELETES_TURN:-}" ]; then
    docs=$(echo "$docs" | cut -d' ' -f$(((${#p} + ${DELETES_TURN:-0}) % 3 + 1)))
  fi
  for doc in $docs; do one_row "$p" "$doc"; done
}

FAULT_ONLY=${FAULT_ONLY:-^transfer\\.}
fault_points || exit 1
# shellcheck disable=SC2086
run_jobs "${FAULT_JOBS:-2}" one_point $POINTS
finish
