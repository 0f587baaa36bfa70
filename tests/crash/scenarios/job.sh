# scenarios/job.sh -- how the crash suites (faults.sh, pause.sh) reach
# each job.* fault point, and what must hold afterwards (the interface is
# described in scenarios/transfer.sh).
#
# Here: job j1 of queue q, whose handler (tests/lib/job_handler.sh)
# applies one effect, $inc n of counters/j1, and fails when its payload
# says so.  check_final recovers, runs a worker until nothing is due,
# and proves: audit --settled clean; j1 terminal (or never recorded /
# purged, where the point allows it); n exactly 1 for a succeeded j1 and
# at most 1 otherwise.  Schedule points (job.schedule.*) have their
# own: check_sched.
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
add_p() {
  d insert counters '{"_id":"p","n":0}' >/dev/null
  d job add q t {} --id p --backoff-ms 1 >/dev/null
}
remote_claimed() { # [PAYLOAD [ADD-OPTIONS]]
  add_j1 "$@"
  # A lease long enough for the next process to start on a loaded
  # machine: an effect refused as late (the lease lapsed before it ran)
  # would leave a job the test completes with no effect applied.
  # check_final takes the attempt over with --older-than-ms 0 anyway.
  d job claim q --lease-ms 10000 >/dev/null
  d job effect j1 1 k1 counters '{"_id":"j1"}' '{"$inc":{"n":1}}' >/dev/null ||
    echo "remote_claimed: the effect was refused" >&2
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
    # (past the rules: a test's claim by hand, as a worker's claim)
    d find-and-modify jobs '{"_id":"j1"}' --bypass-validation \
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
  # Flows (docs/jobs.md, "Flows"): j1 a child of job p (whose handler
  # counts in counters/p).
  job.flow.add | job.flow.attach | job.flow.release)
    add_p; echo "job add q t {} --id j1 --backoff-ms 1 --parent p" ;;
  job.flow.drop) # p ran: the add is refused and the held j1 deleted
    add_p; d $WORK_Q >/dev/null; echo "job add q t {} --id j1 --backoff-ms 1 --parent p" ;;
  job.flow.ready) add_p; add_j1 '{}' "--parent p"; echo "$WORK_Q" ;;
  job.flow.fail) add_p; add_j1 '{"fail":true}' "--max-attempts 1 --parent p"; echo "$WORK_Q" ;;
  job.flow.orphan) # a refused add that died before its drop: recovery cancels j1
    add_p; d $WORK_Q >/dev/null
    DOCTX_FAULT=job.flow.drop:crash d job add q t {} --id j1 --backoff-ms 1 --parent p >/dev/null 2>&1
    echo "recover" ;;
  job.progress)
    # A remote worker's report (docs/jobs.md, "Progress"): j1 claimed at
    # epoch 1; recovery takes the attempt over afterwards.
    add_j1; d job claim q --lease-ms 300 >/dev/null
    echo 'job progress j1 1 {"done":1}' ;;
  job.cancel.request)
    # A cancel of a running job records the request (cancel.c): j1 claimed
    # at epoch 1; recovery then ends it canceled, or retries it when the
    # request was not recorded.
    add_j1; d job claim q --lease-ms 300 >/dev/null
    echo "job cancel j1" ;;
  job.cancel.end)
    # The holder's end of a canceled attempt: a remote worker's complete
    # after the request (the runner's heartbeat reaches it too).
    remote_claimed; d job cancel j1 >/dev/null
    echo 'job complete j1 1 {"done":true}' ;;
  job.unique.expire)
    # An add refused by a holder whose window has passed clears the
    # holder's key and inserts once more (unique.c); j0 holds the key.
    d job add q t --id j0 --unique-key k --unique-for-ms 1 >/dev/null
    d job complete j0 "$(field "$(d job claim q)" epoch)" >/dev/null
    sleep 0.01
    echo "job add q t {} --id j1 --backoff-ms 1 --unique-key k" ;;
  job.recover.takeover)
    add_j1
    DOCTX_FAULT=job.complete:crash d $WORK_Q >/dev/null 2>&1
    sleep 0.35 # the lease lapses
    echo "recover" ;;
  # events (docs/jobs.md, "Events"): no move relays -- a --once worker
  # relays its queue's outboxes when idle, a reader before it reads, and
  # recovery trims
  job.events.log) add_j1; echo "$WORK_Q" ;;
  job.events.pull) add_j1; d job cancel j1 >/dev/null; echo "job events q" ;;
  job.events.trim)
    add_j1; d $WORK_Q >/dev/null
    echo "recover --events-keep 1 --events-keep-ms 1" ;;
  job.recover.purge)
    # Markers go only once no write of the effect can land: the store's
    # clock past fx_until (the effect's lease end, <= 300 ms on) plus the
    # 1 s margin (docs/jobs.md, "Exactly once").
    # (under the error action: a failing j1, dead after its one attempt,
    # purged with --keep-dead-ms)
    if [ "${action:-}" = error ]; then
      add_j1 '{"fail":true}' "--max-attempts 1"; d $WORK_Q >/dev/null 2>&1; sleep 1.4
      echo "recover --tombstone-ttl-ms 1 --keep-dead-ms 1"
    else
      add_j1; d $WORK_Q >/dev/null; sleep 1.4
      echo "recover --tombstone-ttl-ms 1 --retention-ms 1"
    fi ;;
  job.queue.set)
    # A pause of q, then a resume: a crash leaves q paused or not; the
    # operator's resume again (check_final) runs j1.
    add_j1; d job pause q >/dev/null
    echo "job resume q" ;;
  job.slot.take | job.slot.release)
    # q limited to 2 running: the runner takes a slot, claims j1 under it,
    # and frees it after the outcome.  A slot left behind by a crash is
    # taken again once its job ended (or its claim's window passed); the
    # other one is free meanwhile.
    d job queue q --max-running 2 >/dev/null
    add_j1; echo "$WORK_Q" ;;
  job.rate.take)
    # q rated 5 a minute: the runner (or a remote claim) takes a unit of
    # q's window, then claims j1 under it.  A unit taken by a claimer that
    # died is lost (the window admits fewer); check_final's worker takes
    # another.
    d job queue q --rate 5/60000 >/dev/null
    add_j1; echo "$WORK_Q" ;;
  job.rate.retire | job.rate.purge)
    # A window of q long over (made so by hand): recovery marks it over,
    # then deletes it; a crash between leaves it over, for the next pass.
    d job queue q --rate 5/60000 >/dev/null
    add_j1; d $WORK_Q >/dev/null
    d update job_rates '{"_id":"q/*"}' '{"$set":{"start":1,"end":2}}' --bypass-validation >/dev/null
    echo "recover --tombstone-ttl-ms 1" ;;
  job.recover.*)
    add_j1; d $WORK_Q >/dev/null; sleep 1.4
    echo "recover --tombstone-ttl-ms 1" ;;
  # Schedules (docs/jobs.md, "Schedules"): s1 ticks every 100 ms into
  # queue sq (its jobs are not run here); a few ticks are due when the
  # command starts.
  job.schedule.add) echo "job schedule s1 sq t {} --every-ms 100" ;;
  job.schedule.enqueue | job.schedule.advance)
    d job schedule s1 sq t '{}' --every-ms 100 >/dev/null; sleep 0.25
    echo "job scheduler sq --once" ;;
  job.schedule.remove)
    d job schedule s1 sq t '{}' --every-ms 100 >/dev/null; sleep 0.25
    echo "job unschedule s1" ;;
  *) echo "UNKNOWN" ;;
  esac
}

# After a schedule's point: another ticker finishes the tick in flight
# (its job is there once, next_at moves on), and the audit finds every
# tick of s1 up to next_at with exactly one job (sched_audit.c, J8/J9);
# a removed s1 gets no tick after its tombstone's next_at.
check_sched() {
  local label=$1 out n
  d job scheduler sq --once >/dev/null || { bad "$label: scheduler failed"; return; }
  if ! out=$(d audit --settled); then
    bad "$label: audit not clean: $out"; return
  fi
  n=$(d count jobs '{"sched.name":"s1"}')
  case "$label" in
  job.schedule.add:*) ;; # its ticks, if it was added, the audit judged
  job.schedule.remove:*)
    # Removed, or still active when the error came first: either way
    # every job is a tick before next_at (the audit said so).
    d job unschedule s1 >/dev/null 2>&1
    n=$(d count jobs '{"sched.name":"s1"}'); sleep 0.25
    d job scheduler sq --once >/dev/null
    [ "$(d count jobs '{"sched.name":"s1"}')" = "$n" ] || { bad "$label: a tick enqueued after unschedule"; return; } ;;
  *) [ "$n" -ge 2 ] || { bad "$label: only $n jobs for ticks due"; return; } ;;
  esac
  ok
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
  local label=$1 out st n v
  case "$label" in job.schedule.*) check_sched "$label"; return ;; esac
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  case "$label" in job.queue.*) d job resume q >/dev/null || { bad "$label: resume failed"; return; } ;; esac
  st=$(j1_state)
  v=$(d find jobs '{"_id":"p","state":{"$in":["ready","delayed","waiting"]}}' --project '{"_id":1}')
  case "$st" in
  succeeded | dead | canceled | "") [ -z "$v" ] || d $WORK_Q >/dev/null 2>&1 ;;
  *)
    d $WORK_Q >/dev/null 2>&1 || { bad "$label: worker failed"; return; }
    st=$(j1_state) ;;
  esac
  # A flow's parent ended too (it ran after j1, or died by it).
  v=$(d find jobs '{"_id":"p"}' --project '{"_id":0,"state":1}')
  case "$v" in
  "" | *succeeded* | *dead*) ;;
  *) bad "$label: parent p is $v"; return ;;
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
    job.add:* | job.recover.purge:* | job.flow.add:* | job.flow.drop:* | \
      job.unique.expire:*) ;;
    *) bad "$label: j1 missing"; return ;;
    esac
    [ "$n" -le 1 ] || { bad "$label: effect applied $n times"; return; } ;;
  *) bad "$label: j1 is $st, not terminal"; return ;;
  esac
  ok
}
