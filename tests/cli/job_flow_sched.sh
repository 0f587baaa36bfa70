#!/usr/bin/env bash
# The job CLI contract, part two (docs/jobs.md, "Flows" and "Schedules"):
# a tree of parent and child jobs run through crashes at every flow step,
# the contract of --parent, schedules (cron and every-ms, replaced and
# removed mid-tick, missed ticks) and the proof that every tick runs
# exactly once across SIGKILLs.  tests/cli/job.sh has the first part,
# tests/cli/job_queue.sh the queue-wide ones.  Runs on SQLite, and on both
# Redis targets from run-redis.sh.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/job.sh"

# ---- flows: parent and child jobs (docs/jobs.md, "Flows") ----------------------
# A tree of depth 3 and 50 jobs in two queues: root r (on-child-fail
# hold), children c1..c7 (c6 hold, the rest fail), 6 grandchildren each.
# Some grandchildren fail once (flaky), g6.1 and g7.1 die until a marker
# file exists (then they are retried by hand: c6 waits for g6.1; c7 dies
# by g7.1 and is retried too).  Adds and the worker crash at the flow's
# steps (DOCTX_FAULT ...:crash), recovery runs between the phases.  Each
# parent runs exactly once, after every child's last run; the audit is
# clean.  One worker process, --exec that only prints.
new_store job_flow
FLOG=$WORK/flow.log
: >"$FLOG"
FCMD='j=$(cat); id=$DOCTX_JOB_ID
case $j in
*"\"die\":true"*) [ -e '"$WORK"'/fix.$id ] || { echo "$id died" >>'"$FLOG"'; exit 1; } ;;
*"\"flaky\":true"*"\"attempts\":0,"*) echo "$id flaked" >>'"$FLOG"'; exit 1 ;;
esac
[ "$id" = r ] && echo "$j" >'"$WORK"'/root.in
echo "$id ran" >>'"$FLOG"'; echo "{\"v\":\"$id\"}"'
fwork() { # [ENV...] : one worker process, bounded
  env "$@" timeout -k 5 60 "$DOCTX" --store "$S" job work "$FQ" --once --lease-ms 2000 --exec "$FCMD" >/dev/null 2>&1
}
FQ=fq
expect 0 "flow: root" -- d job add fq t --id r --on-child-fail hold
for c in 1 2 3 4 5 6 7; do
  pol=fail; [ $c = 6 ] && pol=hold
  d job add fq t "{\"c\":$c}" --id c$c --parent r --on-child-fail $pol >/dev/null || bad "add c$c"
  for g in 1 2 3 4 5 6; do
    pay="{\"g\":\"$c.$g\"}"; opts="--backoff-ms 1"
    [ $((c * g % 5)) = 0 ] && pay="{\"g\":\"$c.$g\",\"flaky\":true}"
    if [ $g = 1 ] && { [ $c = 6 ] || [ $c = 7 ]; }; then pay='{"die":true}'; opts="--max-attempts 1"; fi
    case $c.$g in
    1.1 | 2.1 | 3.1) # a crash in the add at each step, then the add again
      pt=job.flow.add; [ $c = 2 ] && pt=job.flow.attach; [ $c = 3 ] && pt=job.flow.release
      DOCTX_FAULT=$pt:crash d job add fq t "$pay" --id g$c.$g --parent c$c $opts >/dev/null 2>&1
      [ $? = 137 ] || bad "add g$c.$g: no crash at $pt"
      [ $c = 3 ] || d job add fq t "$pay" --id g$c.$g --parent c$c $opts >/dev/null || bad "add g$c.$g again" ;;
    *) d job add fq2 t "$pay" --id g$c.$g --parent c$c $opts >/dev/null || bad "add g$c.$g" ;;
    esac
  done
done
[ "$(state g3.1)" = held ] && ok || bad "g3.1 after a crash at release: $(state g3.1)"
expect 0 "flow: recover releases g3.1" -- d recover
[ "$(state g3.1)" = ready ] && [ "$(d count jobs)" = 50 ] && ok || bad "after recover: g3.1 $(state g3.1), $(d count jobs) jobs"
expect 0 "flow: audit of the tree" -- d audit
FQ=fq2; r1=$(fwork DOCTX_FAULT=job.flow.fail:crash; echo $?)
[ "$r1" = 137 ] && ok || bad "worker: no crash at job.flow.fail ($r1)"
expect 0 "flow: recover after the fail's crash" -- d recover --older-than-ms 0
[ "$(state c7)" = dead ] && ok || bad "c7 after recover: $(state c7)"
r1=$(fwork DOCTX_FAULT=job.flow.ready:crash; echo $?)
[ "$r1" = 137 ] && ok || bad "worker: no crash at job.flow.ready ($r1)"
expect 5 "flow: the audit sees the parent the crash left waiting" -- d audit --settled
grep -q "flow_stuck" "$WORK/out" && ok || bad "no flow_stuck: $(<"$WORK/out")"
expect 0 "flow: recover after the settle's crash" -- d recover --older-than-ms 0
fwork || bad "worker fq2"
FQ=fq; fwork || bad "worker fq"
[ "$(state c6)" = waiting ] && [ "$(state c7)" = dead ] && [ "$(state r)" = waiting ] && ok ||
  bad "held and failed: c6 $(state c6), c7 $(state c7), r $(state r)"
[ "$(jget "$(d job show c7)" failed_child)" = g7.1 ] && ok || bad "c7: $(d job show c7)"
expect 0 "flow: audit while held" -- d audit --settled
touch "$WORK/fix.g6.1" "$WORK/fix.g7.1"
expect 0 "flow: retry g6.1" -- d job retry g6.1
expect 0 "flow: retry g7.1" -- d job retry g7.1
expect 0 "flow: retry c7 (dead by its child)" -- d job retry c7
[ "$(jget "$(out)" state)" = waiting ] && ok || bad "c7 retried: $(out)"
FQ=fq2; fwork || bad "worker fq2 (2)"
FQ=fq; fwork || bad "worker fq (2)"
n=$(d count jobs '{"state":"succeeded"}')
[ "$n" = 50 ] && ok || bad "flow: $n of 50 succeeded: $(d job list --state waiting) $(d job list --state dead)"
# Each parent ran once, after every run of each of its children.
line() { grep -n "^$1 " "$FLOG" | tail -1 | cut -d: -f1; }
for p in r c1 c2 c3 c4 c5 c6 c7; do
  [ "$(grep -c "^$p " "$FLOG")" = 1 ] || bad "$p ran $(grep -c "^$p " "$FLOG") times"
  kids=$(jget "$(d job show $p)" children | tr -d '[]"' | tr , ' ')
  [ "$(echo $kids | wc -w)" -ge 6 ] || bad "$p children: $kids"
  for k in $kids; do
    [ "$(line $k)" -lt "$(line $p)" ] || bad "$p ran before its child $k"
  done
done
ok
[ "$(jq -c '[.children[] | select(.state == "succeeded") | .result.v] | length' "$WORK/root.in")" = 7 ] && ok ||
  bad "root's handler saw: $(<"$WORK/root.in")"
expect 0 "flow: audit after the tree" -- d audit --settled
# ---- flows: the contract of --parent ---------------------------------------------
n0=$(d count jobs)
expect 1 "flow: a missing parent" -- d job add fq t --id x1 --parent nope
expect 3 "flow: a succeeded parent" -- d job add fq t --id x2 --parent r
grep -q "STATE: job r is succeeded" "$WORK/err" && ok || bad "message: $(<"$WORK/err")"
d job add fq3 t --id busy >/dev/null
d job claim fq3 >/dev/null
expect 3 "flow: a running parent" -- d job add fq3 t --id x3 --parent busy
[ "$(d count jobs)" = $((n0 + 1)) ] && ok || bad "a refused child was recorded: $(d find jobs '{"_id":{"$in":["x1","x2","x3"]}}')"
expect 2 "flow: its own parent" -- d job add fq t --id x4 --parent x4
expect 2 "flow: a bad policy" -- d job add fq t --id x5 --on-child-fail later
expect 3 "flow: an id taken, another parent (no cycle)" -- d job add fq t --id r --parent g1.1
expect 0 "flow: the same child again" -- d job add fq2 t '{"g":"1.2"}' --id g1.2 --parent c1 --backoff-ms 1
# Plain writes make only the protocol's moves.
d job add fq4 t --id pw >/dev/null
d job add fq4 t --id pk --parent pw >/dev/null
expect 3 "flow: plain: a waiting parent to ready" -- d update jobs '{"_id":"pw"}' '{"$set":{"state":"ready"}}'
expect 3 "flow: plain: a child dropped" -- d update jobs '{"_id":"pw"}' '{"$set":{"children":["zz"]}}'
expect 3 "flow: plain: a child reparented" -- d update jobs '{"_id":"pk"}' '{"$set":{"parent":"r"}}'
expect 3 "flow: plain: a ready job to waiting" -- d update jobs '{"_id":"busy"}' '{"$set":{"state":"waiting","children":["pk"]}}'
expect 0 "flow: plain: a waiting parent canceled" -- d job cancel pw
# Forced past the rules: the audit reports the parent that ran early.
d job add fq4 t --id pe >/dev/null
d job add fq4 t --id pe1 --parent pe --delay-ms 60000 >/dev/null
d update jobs '{"_id":"pe"}' '{"$set":{"state":"ready"}}' --bypass-validation >/dev/null
FQ=fq4; fwork || bad "worker fq4"
expect 5 "flow: audit: a parent ran before its child" -- d audit
grep -q "flow_early" "$WORK/out" && ok || bad "no flow_early: $(<"$WORK/out")"
# A canceled parent may go (it is over); its live child is then reported.
d job add fq5 t --id pz >/dev/null
d job add fq5 t --id pz1 --parent pz --delay-ms 60000 >/dev/null
d job cancel pz >/dev/null
# an ended job goes once its events are in the log (a reader relays them)
expect 3 "flow: a canceled parent with events waiting" -- d delete jobs '{"_id":"pz"}'
d job events fq5 >/dev/null
expect 0 "flow: a canceled parent deleted" -- d delete jobs '{"_id":"pz"}'
expect 5 "flow: audit: a live child without its parent" -- d audit
grep -q "flow_orphan.*pz1" "$WORK/out" && ok || bad "no flow_orphan: $(<"$WORK/out")"
# ---- schedules (docs/jobs.md, "Schedules") ----------------------------------------
new_store job_sched
# Bad input: exit 2, nothing written (the library's check before the store
# opens: no store file either, on SQLite).
while IFS='|' read -r label args pattern; do
  # shellcheck disable=SC2086
  eval "expect 2 \"schedule: $label\" -- d job schedule $args"
  grep -q -- "$pattern" "$WORK/err" && ok || bad "$label: message '$(<"$WORK/err")' lacks '$pattern'"
done <<'TABLE'
bad cron field|s q t {} --cron '61 * * * *'|cron minute: 61 is out of 0..59
bad cron text|s q t {} --cron '* * * foo *'|cron month: expected
four fields|s q t {} --cron '* * * *'|day-of-week missing
step overflow|s q t {} --cron '*/4294967297 * * * *'|cron minute: step
Feb 30|s q t {} --cron '0 0 30 2 *'|does not fire within 5 years
INT64_MAX every-ms|s q t {} --every-ms 9223372036854775807|every-ms must be
past int64 every-ms|s q t {} --every-ms 9223372036854775808|--every-ms
below the least|s q t {} --every-ms 5|every-ms must be
both|s q t {} --every-ms 100 --cron '* * * * *'|one of them
neither|s q t {}|one of them
missed policy|s q t {} --every-ms 100 --missed sometimes|missed must be
bad name|s/x q t {} --every-ms 100|schedule name
bad payload|s q t {"a": --every-ms 100|PAYLOAD
TABLE
case "$S" in sqlite:*) [ ! -e "$WORK/job_sched.db" ] && ok || bad "a refused schedule created the store" ;; esac
expect 0 "cron schedule" -- d job schedule daily q t '{"k":1}' --cron '30 8 * * mon-fri'
s1=$(out)
[ "$(jget "$s1" gen)" = 1 ] && [ $(($(jget "$s1" next_at) % 60000)) = 0 ] && [ "$(jget "$s1" next_at)" -gt "$(now_ms)" ] && ok || bad "cron schedule: $s1"
expect 0 "replace" -- d job schedule daily q t '{"k":2}' --cron '0 9 * * *'
[ "$(jget "$(out)" gen)" = 2 ] && [ "$(jq '.past[0].gen' "$WORK/out")" = 1 ] && ok || bad "replace: $(out)"
expect 0 "list" -- d job schedules q
[ "$(wc -l <"$WORK/out")" = 1 ] && [ "$(jget "$(out)" payload k)" = 2 ] && ok || bad "schedules: $(out)"
# Plain writes change nothing a tick depends on (the transition rule).
expect 3 "plain update of next_at" -- d update job_schedules '{"_id":"daily"}' '{"$set":{"next_at":0}}'
expect 3 "plain insert of a schedule" -- d insert job_schedules "$(jq -c '._id="forged"' <<<"$s1")"
expect 3 "plain delete of an active one" -- d delete job_schedules '{"_id":"daily"}'
# A tick's _id is the schedule's: no other job may take one (it would
# stop the schedule at that tick).
expect 2 "job add under a tick's id" -- d job add q t --id sched:daily:2:0
d job add tq t '{}' --id j1 >/dev/null
expect 3 "plain insert of a tick's job" -- d insert jobs "$(d find jobs '{"_id":"j1"}' | jq -c '._id="sched:daily:2:0"')"
expect 3 "plain insert of a job with sched" -- d insert jobs "$(d find jobs '{"_id":"j1"}' | jq -c '._id="x9" | .sched={"name":"daily"}')"
expect 0 "unschedule" -- d job unschedule daily
[ "$(jget "$(out)" state)" = removed ] && [ "$(jget "$(out)" gen)" = 3 ] && ok || bad "unschedule: $(out)"
expect 1 "unschedule again" -- d job unschedule daily
expect 0 "list after" -- d job schedules
[ ! -s "$WORK/out" ] && ok || bad "a removed schedule is listed: $(out)"

# Missed ticks: 0.6 s with no ticker, more than --grace-ms 20 late.  run-once
# enqueues one job standing for the run; skip enqueues none and records it.
d job schedule once q2 t '{}' --every-ms 100 --grace-ms 20 >/dev/null
d job schedule skip q2 t '{}' --every-ms 100 --grace-ms 20 --missed skip >/dev/null
sleep 0.6
expect 0 "tick the missed runs" -- d job scheduler q2 --once
[ "$(jget "$(out)" ran missed)" = 1 ] && [ "$(jget "$(out)" ran skipped)" = 1 ] && ok || bad "missed: $(out)"
runs=$(d find jobs '{"sched.name":"once"}' | jq -s -c '[.[] | (.sched.last - .sched.tick) / 100 + 1] | sort')
[ "$(jq 'length <= 2 and .[-1] >= 4' <<<"$runs")" = true ] && ok || bad "run-once: one job for the missed run, got $runs"
sk=$(d job schedules q2 | jq -s -c '.[] | select(._id == "skip") | .skipped')
[ "$(jq 'length == 1 and (.[0][1] - .[0][0]) >= 300' <<<"$sk")" = true ] &&
  [ "$(d count jobs '{"sched.name":"skip"}')" -le 1 ] && ok || bad "skip: $sk, $(d count jobs '{"sched.name":"skip"}') jobs"
expect 0 "audit: ticks against runs" -- d audit

# Replaced mid-run: the old gen's jobs stand, the new gen starts after the
# change, no tick has two jobs.
d job schedule r q3 t '{"v":1}' --every-ms 100 >/dev/null
sleep 0.35; d job scheduler q3 --once >/dev/null
d job schedule r q3 t '{"v":2}' --every-ms 100 >/dev/null
sleep 0.35; d job scheduler q3 --once >/dev/null
g=$(d find jobs '{"sched.name":"r"}' | jq -s -c '[group_by(.sched.gen)[] | {g: .[0].sched.gen, lo: (map(.sched.tick) | min), hi: (map(.sched.tick) | max), v: (map(.payload.v) | unique)}]')
[ "$(jq 'length == 2 and .[0].hi < .[1].lo and .[0].v == [1] and .[1].v == [2]' <<<"$g")" = true ] && ok || bad "replace mid-run: $g"
# A ticker paused before its insert across unschedule: it enqueues the one
# tick it read (due before the removal), and nothing after it.  The last
# scheduler round above set next_at at most 100 ms ahead: 150 ms later a
# tick is due, so the ticker below has one to read (started sooner, it
# found none and never reached its pause).
sleep 0.15
DOCTX_FAULT=job.schedule.enqueue:pause start_bg "$WORK/paused.log" "$DOCTX" --store "$S" job scheduler q3 --once
p=$BG_PID
sleep 0.25
if wait_stopped "$p" 20; then
  expect 0 "unschedule while a ticker is paused" -- d job unschedule r
  stone=$(out)
  kill -CONT "$p"; bounded_wait "$p" 20 "$WORK/paused.log"
  late=$(d count jobs "{\"sched.name\":\"r\",\"sched.tick\":{\"\$gte\":$(jget "$stone" next_at)}}")
  [ "$late" -le 1 ] && ok || bad "the paused ticker enqueued $late ticks after the removal"
  n=$(d count jobs '{"sched.name":"r"}'); sleep 0.25
  d job scheduler q3 --once >/dev/null; d job work q3 --once --exec true >/dev/null
  [ "$(d count jobs '{"sched.name":"r"}')" = "$n" ] && ok || bad "a tick enqueued after unschedule"
else
  bad "the ticker never paused: $(<"$WORK/paused.log")"
fi
expect 0 "audit after the removal" -- d audit

# The long proof runs in the release stages (DTX_QUICK: the sanitizer stage samples).
if [ -z "${DTX_QUICK:-}" ]; then
# The proof (docs/jobs.md, "Schedules"): 3 schedulers and 2 workers of 2
# threads tick and run --every-ms 200 for 30 ticks; a scheduler and a
# worker are SIGKILLed mid-way and a worker restarted.  Every tick has
# exactly one job, each job's effect applied once (counters/c.n), and
# the audit checks ticks against runs.
new_store job_sched_proof
d insert counters '{"_id":"c","n":0}' >/dev/null
d job schedule p pq t '{}' --every-ms 200 >/dev/null
first=$(jget "$(d job schedules pq)" first_at)
RUN='"$DOCTX" job effect "$DOCTX_JOB_ID" "$DOCTX_JOB_EPOCH" k counters "{\"_id\":\"c\"}" "{\"\$inc\":{\"n\":1}}" >/dev/null'
pids=()
for i in 1 2 3; do start_bg "$WORK/sched$i.log" "$DOCTX" --store "$S" job scheduler pq --poll-ms 50; pids+=("$BG_PID"); done
for i in 1 2; do start_bg "$WORK/work$i.log" "$DOCTX" --store "$S" job work pq --threads 2 --lease-ms 1000 --exec "$RUN"; pids+=("$BG_PID"); done
nap 2.5
{ kill -KILL "${pids[0]}" "${pids[3]}"; wait "${pids[0]}" "${pids[3]}"; } 2>/dev/null
nap 1
start_bg "$WORK/work3.log" "$DOCTX" --store "$S" job work pq --threads 2 --lease-ms 1000 --exec "$RUN"; pids+=("$BG_PID")
end=$((SECONDS + 30))
while [ "$(jget "$(d job schedules pq)" last_tick)" -lt $((first + 29 * 200)) ] 2>/dev/null && [ $SECONDS -lt $end ]; do nap 0.2; done
d job unschedule p >/dev/null
stone=$(d find job_schedules '{"_id":"p"}')
ticks=$(( ($(jget "$stone" next_at) - first) / 200 ))
while [ "$(d count jobs '{"queue":"pq","state":{"$ne":"succeeded"}}')" != 0 ] && [ $SECONDS -lt $end ]; do nap 0.2; done
for p in "${pids[1]}" "${pids[2]}" "${pids[4]}" "${pids[5]}"; do stop_bg "$p" 10; done
jobs=$(d count jobs '{"queue":"pq","state":"succeeded"}')
n=$(jget "$(d find counters '{"_id":"c"}')" n)
[ "$ticks" -ge 30 ] && [ "$jobs" -ge "$ticks" ] && [ "$jobs" -le $((ticks + 1)) ] && [ "$n" = "$jobs" ] &&
  ok || bad "proof: $ticks ticks, $jobs jobs succeeded, effect applied $n times"
expect 0 "proof: the audit checks ticks against runs" -- d audit --settled
# ... and sees a tick without its job, and a job of no tick.
d delete jobs "{\"_id\":\"sched:p:1:$((first + 200))\"}" --bypass-validation >/dev/null
expect 5 "audit: a tick lost" -- d audit
grep -q "sched_missing.*schedule p gen 1: ticks from $((first + 200))" "$WORK/out" && ok || bad "audit: $(grep sched "$WORK/out")"
d insert jobs "$(d find jobs "{\"_id\":\"sched:p:1:$first\"}" | jq -c "._id=\"sched:p:1:$((first + 7))\" | .sched.tick=$((first + 7)) | .sched.last=$((first + 7))")" --bypass-validation >/dev/null
expect 5 "audit: a job of no tick" -- d audit
grep -q "sched_tick.*sched:p:1:$((first + 7))" "$WORK/out" && ok || bad "audit: $(grep sched "$WORK/out")"
fi

finish
