# scenarios/job.sh -- how the crash suites (faults.sh, pause.sh) reach
# each job.* fault point, and what must hold afterwards (the interface is
# described in scenarios/transfer.sh).
#
# Here: job j1 of queue q, whose handler (tests/lib/job_handler.sh)
# applies one effect, $inc n of counters/j1, and fails when its payload
# says so.  check_final recovers, runs a worker until nothing is due,
# and proves: audit --settled clean; j1 terminal (or never recorded /
# purged, where the point allows it); n exactly 1 for a succeeded j1 and
# at most 1 otherwise.
H=$HARNESS_ROOT/tests/lib/job_handler.sh
WORK_Q="job work q --once --lease-ms 300 --exec $H"

scenario_setup() { d insert counters '{"_id":"j1","n":0}' >/dev/null; }

add_j1() { d job add q t "${1:-{\}}" --id j1 --backoff-ms 1 ${2:-} >/dev/null; }

# A remote worker's steps (docs/jobs.md, "Remote workers"): j1 claimed by
# `job claim`, its effect applied as the handler would apply it, and its
# outcome sent by `job complete` / `job fail` -- the same fault points as
# the runner's, reached through dtx_job_claim, dtx_job_complete and
# dtx_job_fail_at.  faults.sh's error action takes this road (its
# $action, seen here through bash's dynamic scope); crash, and pause.sh,
# take the runner's.
remote() { [ "${action:-}" = error ]; }
remote_claimed() { # [PAYLOAD [ADD-OPTIONS]]
  add_j1 "$@"
  d job claim q --lease-ms 300 >/dev/null
  d job effect j1 1 k1 counters '{"_id":"j1"}' '{"$inc":{"n":1}}' >/dev/null
}

scenario_cmd() {
  local p=$1
  case "$p" in
  job.add) echo "job add q t {} --id j1 --backoff-ms 1" ;;
  job.claim) add_j1; if remote; then echo "job claim q --lease-ms 300"; else echo "$WORK_Q"; fi ;;
  job.complete)
    if remote; then remote_claimed; echo 'job complete j1 1 {"done":true}'
    else add_j1; echo "$WORK_Q"; fi ;;
  job.fail)
    if remote; then remote_claimed '{"fail":true}' "--max-attempts 2"; echo "job fail j1 1 asked-to-fail"
    else add_j1 '{"fail":true}' "--max-attempts 2"; echo "$WORK_Q"; fi ;;
  job.promote) add_j1 '{}' "--delay-ms 1"; sleep 0.01; echo "$WORK_Q" ;;
  job.effect.fence | job.effect.apply)
    # j1 running at epoch 1 under a live lease: an attempt whose worker
    # stopped, applying its effect from the shell (recovery takes it over
    # with --older-than-ms 0).
    add_j1
    d find-and-modify jobs '{"_id":"j1"}' \
      '{"$set":{"state":"running","owner":"gone","lease_until":'$(($(now_ms) + 60000))'},"$inc":{"epoch":1}}' >/dev/null
    echo 'job effect j1 1 k1 counters {"_id":"j1"} {"$inc":{"n":1}}' ;;
  job.effect.void | job.effect.repin)
    # The same, but effect k1 is pinned to counters/x, which no longer
    # matches its filter (another writer took it): the effect voids x,
    # repins to j1 and applies there.
    add_j1
    d insert counters '{"_id":"x","n":0}' >/dev/null
    # (past the rules: a pin is the job's steps' to write)
    d find-and-modify jobs '{"_id":"j1"}' --bypass-validation \
      '{"$set":{"state":"running","owner":"gone","lease_until":'$(($(now_ms) + 60000))',"fx_colls":["counters"],"fx_pins":{"k1":{"coll":"counters","id":"x"}}},"$inc":{"epoch":1}}' >/dev/null
    echo 'job effect j1 1 k1 counters {"_id":"j1"} {"$inc":{"n":1}}' ;;
  job.cancel) add_j1; echo "job cancel j1" ;;
  job.retry)
    add_j1 '{"fail":true}' "--max-attempts 1"
    d $WORK_Q >/dev/null 2>&1
    echo "job retry j1" ;;
  job.recover.takeover)
    add_j1
    DOCTX_FAULT=job.complete:crash d $WORK_Q >/dev/null 2>&1
    sleep 0.35 # the lease lapses
    echo "recover" ;;
  # events (docs/jobs.md, "Events"): the relay after a batch of the
  # runner (claimed + succeeded), after an add, and recovery's trim
  job.events.log) add_j1; echo "$WORK_Q" ;;
  job.events.pull) add_j1; echo "job cancel j1" ;;
  job.events.trim)
    add_j1; d $WORK_Q >/dev/null
    echo "recover --events-keep 1 --events-keep-ms 1" ;;
  job.recover.purge)
    # Markers go only once no write of the effect can land: the store's
    # clock past fx_until (the effect's lease end, <= 300 ms on) plus the
    # 1 s margin (docs/jobs.md, "Exactly once").
    add_j1; d $WORK_Q >/dev/null; sleep 1.4
    echo "recover --tombstone-ttl-ms 1 --retention-ms 1" ;;
  job.recover.*)
    add_j1; d $WORK_Q >/dev/null; sleep 1.4
    echo "recover --tombstone-ttl-ms 1" ;;
  *) echo "UNKNOWN" ;;
  esac
}

# j1's state ("" when there is none) and its counter, without a python
# per call: the projections print {"state":"..."} and {"n":N}.
j1_state() {
  local v
  v=$(d find jobs '{"_id":"j1"}' --project '{"_id":0,"state":1}')
  v=${v#*\"state\":\"}
  [ -n "$v" ] && echo "${v%%\"*}"
}
j1_count() {
  local v
  v=$(d find counters '{"_id":"j1"}' --project '{"_id":0,"n":1}')
  v=${v#*\"n\":}
  echo "${v%\}}"
}

check_final() {
  local label=$1 out st n
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  st=$(j1_state)
  case "$st" in
  succeeded | dead | canceled | "") ;;
  *)
    d $WORK_Q >/dev/null 2>&1 || { bad "$label: worker failed"; return; }
    st=$(j1_state) ;;
  esac
  if ! out=$(d audit --settled); then
    bad "$label: audit not clean: $out"; return
  fi
  n=$(j1_count)
  case "$st" in
  succeeded) [ "$n" = 1 ] || { bad "$label: j1 succeeded but its effect applied $n times"; return; } ;;
  dead | canceled) [ "$n" -le 1 ] || { bad "$label: j1 $st, effect applied $n times"; return; } ;;
  "")
    case "$label" in
    job.add:* | job.recover.purge:*) ;;
    *) bad "$label: j1 missing"; return ;;
    esac
    [ "$n" -le 1 ] || { bad "$label: effect applied $n times"; return; } ;;
  *) bad "$label: j1 is $st, not terminal"; return ;;
  esac
  ok
}
