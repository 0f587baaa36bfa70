#!/usr/bin/env bash
# The job CLI contract (docs/jobs.md): add and its idempotent --id, unique
# keys, bad input that records nothing, priorities, --exec (stdin, the
# environment, stdout as result, stderr as last_error, backoff, dead,
# retry, cancel, the lease renewed while CMD runs, the timeout kill) and
# `job effect` (applied once, exit 1 on no match, exit 3 on a stale epoch
# or a stale --fence token), and the exactly-once contract of effects
# (docs/jobs.md, "Effects: exactly once"): one document per (job, key)
# whatever FILTER matches later, a repeat is {"applied":false}, a paused
# attempt's late write is refused by the store once its lease ended, the
# audit finds every marker and carries on past a bad job, a command that
# succeeded is never run again (an unstorable result, a child left in the
# background), and plain updates make only the protocol's moves.  Runs on
# SQLite, and on both Redis targets from run-redis.sh.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/job.sh"

new_store job
# ---- add ------------------------------------------------------------------
expect 0 "add" -- d job add mail send '{"to":"a"}' --id j1
[ "$(jget "$(out)" state)" = ready ] && ok || bad "j1 not ready: $(out)"
expect 0 "add again, same" -- d job add mail send '{"to":"a"}' --id j1
[ "$(d count jobs)" = 1 ] && ok || bad "an idempotent add recorded twice"
expect 3 "add again, other payload" -- d job add mail send '{"to":"b"}' --id j1
grep -q "doctx: CONFLICT: " "$WORK/err" && ok || bad "conflict message: $(<"$WORK/err")"
expect 3 "add again, other type" -- d job add mail other '{"to":"a"}' --id j1
expect 0 "delayed" -- d job add mail send --id j2 --delay-ms 60000
[ "$(jget "$(out)" state)" = delayed ] && ok || bad "j2 not delayed: $(out)"

# ---- unique key ----------------------------------------------------------------
expect 0 "unique 1" -- d job add mail send --id u1 --unique-key k
expect 0 "unique 2" -- d job add mail send --id u2 --unique-key k
[ "$(jget "$(out)" _id)" = u1 ] && ok || bad "the holder of key k is not printed: $(out)"
[ "$(d count jobs '{"_id":"u2"}')" = 0 ] && ok || bad "a second live job holds key k"
expect 0 "unique, other queue" -- d job add other send --id u3 --unique-key k
expect 0 "cancel holder" -- d job cancel u1
[ "$(jget "$(out)" state)" = canceled ] && ok || bad "u1 not canceled: $(out)"
expect 0 "cancel again" -- d job cancel u1
expect 0 "unique, key free" -- d job add mail send --id u4 --unique-key k
[ "$(jget "$(out)" _id)" = u4 ] && ok || bad "key k not free after cancel: $(out)"

# ---- bad input: exit 2, nothing recorded -------------------------------------------
before=$(d find jobs | md5sum)
while IFS='|' read -r label args pattern; do
  # shellcheck disable=SC2086
  expect 2 "$label" -- d job $args
  grep -q -- "$pattern" "$WORK/err" && ok || bad "$label: message '$(<"$WORK/err")' lacks '$pattern'"
done <<'TABLE'
queue characters|add ma/il send|queue name
empty type|add mail  |missing argument TYPE
malformed payload|add mail send {"a":|PAYLOAD
negative delay|add mail send --delay-ms -1|--delay-ms
max attempts 0|add mail send --max-attempts 0|--max-attempts
priority 101|add mail send --priority 101|priority must be from -100 to 100
priority -101|add mail send --priority -101|priority must be from -100 to 100
priority word|add mail send --priority high|--priority
backoff 0|add mail send --backoff-ms 0|--backoff-ms
unknown option|add mail send --bogus 1|unknown option
bad state|list --state done|unknown job state
work without exec|work mail --once|--exec
effect bad epoch|effect j1 0 k c {} {"$set":{"a":1}}|epoch must be >= 1
effect bad key|effect j1 1 k/1 c {} {"$set":{"a":1}}|effect key
effect bad fence|effect j1 1 k c {} {"$set":{"a":1}} --fence L:0|positive integer
effect fence word|effect j1 1 k c {} {"$set":{"a":1}} --fence L:x|--fence
effect bad operator|effect j1 1 k c {} {"$bogus":{"a":1}}|unknown operator $bogus
effect bad filter|effect j1 1 k c {"$where":1} {"$set":{"a":1}}|$where
claim queue characters|claim ma/il|queue name
claim --n 0|claim mail --n 0|--n must be
claim --n 257|claim mail --n 257|n must be from 1 to 256
claim bad owner|claim mail --owner a/b|owner 'a/b'
claim --lease-ms 0|claim mail --lease-ms 0|--lease-ms
heartbeat no epoch|heartbeat j1|missing argument EPOCH
heartbeat epoch 0|heartbeat j1 0|EPOCH must be an integer >= 1
heartbeat epoch word|heartbeat j1 one|EPOCH must be an integer >= 1
heartbeat bad id|heartbeat j/1 1|job id
complete malformed result|complete j1 1 {"a":|RESULT
complete epoch -1|complete j1 -1 {}|EPOCH must be an integer >= 1
complete extra argument|complete j1 1 {} more|unexpected argument
fail bad id|fail j/1 1 boom|job id
fail epoch past int64|fail j1 99999999999999999999 boom|EPOCH must be an integer >= 1
unknown sub|frobnicate|expected add
TABLE
[ "$(d find jobs | md5sum)" = "$before" ] && ok || bad "bad input changed the store"
# A remote worker's bad input is refused before the store opens: none is
# created.
for args in "claim ma/il" "claim q --n 257" "heartbeat j1 0" "complete j/1 1" \
  "fail j1 0 x"; do
  # shellcheck disable=SC2086
  expect 2 "$args, no store" -- "$DOCTX" --store "sqlite:$WORK/never.db" job $args
done
[ ! -e "$WORK/never.db" ] && ok || bad "a refused remote step created a store"
case " $(d collections | tr '\n' ' ') " in *" c "*) bad "a refused effect created collection c" ;; *) ok ;; esac
expect 1 "show missing" -- d job show nope
expect 3 "retry a ready job" -- d job retry j1

# ---- priorities, stats -----------------------------------------------------------
new_store job_prio
d job add pq t --id low --priority -5 >/dev/null
d job add pq t --id mid >/dev/null
d job add pq t --id high --priority 10 >/dev/null
d job add pq t --id mid2 >/dev/null
expect 0 "stats" -- d job stats pq
[ "$(jget "$(out)" ready)" = 4 ] && [ "$(jget "$(out)" total)" = 4 ] && ok || bad "stats: $(out)"
expect 0 "work priorities" -- d job work pq --once --exec "echo \$DOCTX_JOB_ID >>$WORK/order"
[ "$(tr '\n' ' ' <"$WORK/order")" = "high mid mid2 low " ] && ok || bad "order: $(<"$WORK/order")"
[ "$(jget "$(out)" ran succeeded)" = 4 ] && ok || bad "work summary: $(out)"
expect 2 "work --batch 0" -- d job work pq --once --batch 0 --exec true
expect 2 "work --batch 257" -- d job work pq --once --batch 257 --exec true

# ---- --exec: stdin, environment, result, failure, backoff, dead, retry --------------
new_store job_exec
S_URI=$S
d job add q t '{"x":7}' --id e1 >/dev/null
expect 0 "work env" -- d job work q --once --exec \
  'x=$(jq .payload.x); echo "{\"x\":$x,\"id\":\"$DOCTX_JOB_ID\",\"epoch\":$DOCTX_JOB_EPOCH,\"store\":\"$DOCTX_STORE\"}"'
job=$(d job show e1)
[ "$(jget "$job" state)" = succeeded ] && ok || bad "e1: $job"
[ "$(jget "$job" result)" = "{\"x\":7,\"id\":\"e1\",\"epoch\":1,\"store\":\"$S_URI\"}" ] && ok || bad "e1 result: $job"
d job add q t --id f1 --max-attempts 2 --backoff-ms 60000 >/dev/null
expect 0 "work failing" -- d job work q --once --exec 'echo "it broke" >&2; exit 3'
job=$(d job show f1)
[ "$(jget "$job" state)" = delayed ] && [ "$(jget "$job" attempts)" = 1 ] && ok || bad "f1 after a failure: $job"
[ "$(jget "$job" last_error)" = "it broke" ] && ok || bad "f1 last_error: $job"
# The backoff against the failure's own time (raw ms; a loaded machine
# may take seconds between the failure and this line).
raw=$(d find jobs '{"_id":"f1"}')
wait_ms=$(( $(jget "$raw" run_at) - $(jget "$raw" updated) ))
[ "$wait_ms" -ge 47990 ] && [ "$wait_ms" -le 72000 ] && ok || bad "f1 backoff $wait_ms ms, want 48000..72000"
d job add q t --id f2 --max-attempts 1 >/dev/null
d job work q --once --exec 'exit 1' >/dev/null
[ "$(state f2)" = dead ] && ok || bad "f2 not dead after its one attempt"
expect 3 "cancel dead" -- d job cancel f2
expect 0 "retry dead" -- d job retry f2
[ "$(jget "$(out)" state)" = ready ] && [ "$(jget "$(out)" attempts)" = 0 ] && ok || bad "f2 after retry: $(out)"

# ---- the lease is renewed while CMD runs; a hung CMD is killed -------------------
d job add q t --id long >/dev/null
# CMD outlives its 1 s lease 2.5 times over; a heartbeat every 333 ms
# keeps it (with room for a loaded machine's scheduling delays).
start_bg "$WORK/long.log" "$DOCTX" --store "$S" job work q --once --lease-ms 1000 --exec 'sleep 2.5'
pid=$BG_PID
sleep 1.6
d recover >/dev/null # would take long over if its lease had lapsed
bounded_wait "$pid" 30 "$WORK/long.log" && ok || bad "long worker"
job=$(d job show long --verbose)
[ "$(jget "$job" state)" = succeeded ] && [ "$(jget "$job" epoch)" = 1 ] && ok || bad "long was taken over: $job"
d job add q t --id hang --max-attempts 1 >/dev/null
t0=$SECONDS
expect 0 "timeout" -- d job work q --once --timeout-ms 300 --exec 'sleep 30'
[ $((SECONDS - t0)) -lt 15 ] && ok || bad "the hung CMD was not killed in time"
job=$(d job show hang)
[ "$(jget "$job" state)" = dead ] && ok || bad "hang: $job"
case "$(jget "$job" last_error)" in *timeout*) ok ;; *) bad "hang last_error: $job" ;; esac

# ---- job effect ----------------------------------------------------------------------
new_store job_fx
d insert users '{"_id":"ann","friends":[]}' '{"_id":"bob","friends":[]}' >/dev/null
d job add social ADD_FRIEND '{"a":"ann","b":"bob"}' --id af >/dev/null
d job claim social --lease-ms 3600000 >/dev/null # af running at epoch 1
expect 0 "effect" -- d job effect af 1 ann users '{"_id":"ann"}' '{"$addToSet":{"friends":"bob"}}'
[ "$(out)" = '{"applied":true}' ] && ok || bad "effect: $(out)"
expect 0 "effect repeat" -- d job effect af 1 ann users '{"_id":"ann"}' '{"$addToSet":{"friends":"bob"}}'
[ "$(out)" = '{"applied":false}' ] && ok || bad "effect repeat: $(out)"
# The reply of the write that applied it lost: the call's retry finds its
# own marker (by the call's nonce) and says applied, a later call does not.
DOCTX_FAULT=job.effect.apply:lost expect 0 "effect, its reply lost" -- d job effect af 1 lost users '{"_id":"bob"}' '{"$set":{"seen":1}}'
[ "$(out)" = '{"applied":true}' ] && ok || bad "effect, its reply lost: $(out)"
expect 0 "effect repeat after a lost reply" -- d job effect af 1 lost users '{"_id":"bob"}' '{"$set":{"seen":1}}'
[ "$(out)" = '{"applied":false}' ] && ok || bad "effect repeat after a lost reply: $(out)"
expect 1 "effect no match" -- d job effect af 1 cy users '{"_id":"cy"}' '{"$addToSet":{"friends":"bob"}}'
expect 3 "effect stale epoch" -- d job effect af 2 bob users '{"_id":"bob"}' '{"$addToSet":{"friends":"ann"}}'
grep -q "doctx: STALE: " "$WORK/err" && ok || bad "stale message: $(<"$WORK/err")"
[ "$(d find users '{"_id":"bob"}' --project '{"friends":1}')" = '{"_id":"bob","friends":[]}' ] && ok || bad "a stale effect changed bob"
expect 2 "effect on markers" -- d job effect af 1 m users '{"_id":"bob"}' '{"$unset":{"dtx_fx":""}}'
expect 2 "effect renaming onto markers" -- d job effect af 1 m users '{"_id":"ann"}' '{"$rename":{"friends":"dtx_fx"}}'
# A protocol's collections change only through its steps (as batch-update).
d account create acc --balance 100 >/dev/null
expect 2 "effect on accounts" -- d job effect af 1 p accounts '{"_id":"acc"}' '{"$inc":{"balance":5}}'
expect 2 "effect on jobs" -- d job effect af 1 p jobs '{"_id":"af"}' '{"$set":{"max_attempts":99}}'
[ "$(d find accounts '{"_id":"acc"}' | jq -c '[.balance, .dtx_fx]')$(d find jobs '{"_id":"af"}' | jq -c '[.max_attempts, .fx_colls]')" = '[100,null][5,["users"]]' ] &&
  ok || bad "a refused effect changed accounts or jobs"

# A fenced effect (Kleppmann): the handler held lock L with token 1; the
# next holder (token 2) wrote bob; the first one's late effect is refused.
expect 0 "fenced effect, token 1" -- d job effect af 1 f1 users '{"_id":"bob"}' '{"$set":{"by":1}}' --fence L:1
expect 0 "fenced effect, token 2" -- d job effect af 1 f2 users '{"_id":"bob"}' '{"$set":{"by":2}}' --fence L:2
expect 3 "fenced effect, stale token 1" -- d job effect af 1 f3 users '{"_id":"bob"}' '{"$set":{"by":1}}' --fence L:1
grep -q "doctx: FENCED: " "$WORK/err" && ok || bad "fenced message: $(<"$WORK/err")"
[ "$(d find users '{"_id":"bob"}' --project '{"_id":0,"by":1}')" = '{"by":2}' ] && ok || bad "a fenced-out effect changed bob"
[ "$(d count users '{"_id":"bob","dtx_fx.key":"f3"}')" = 0 ] && ok || bad "a fenced-out effect left its marker"
expect 0 "audit" -- d audit
# A refused effect (stale epoch) writes nothing: no index, no collection.
expect 3 "stale effect on a new collection" -- d job effect af 2 k2 fresh_coll '{"_id":"x"}' '{"$set":{"a":1}}'
case " $(d collections | tr '\n' ' ') " in *" fresh_coll "*) bad "a stale effect created fresh_coll" ;; *) ok ;; esac

# ---- exactly once: one document per (job, key), over every attempt -----------------
# "Claim one coupon", then fail: every attempt runs the effect again.  It
# must claim one coupon in all (it claimed one per attempt before).
new_store job_once
d insert coupons '{"_id":"c1","claimed":false}' '{"_id":"c2","claimed":false}' '{"_id":"c3","claimed":false}' >/dev/null
cat >"$WORK/claim.sh" <<'SH'
"$DOCTX" job effect "$DOCTX_JOB_ID" "$DOCTX_JOB_EPOCH" coupon coupons '{"claimed":false}' '{"$set":{"claimed":true}}' >/dev/null || exit 2
exit 1
SH
d job add q claim --id cj --max-attempts 3 --backoff-ms 1 >/dev/null
for _ in 1 2 3; do [ "$(state cj)" = dead ] || d job work q --once --exec "sh $WORK/claim.sh" >/dev/null; done
[ "$(state cj)" = dead ] && ok || bad "cj: $(d job show cj)"
[ "$(d count coupons '{"claimed":true}')" = 1 ] && ok || bad "3 attempts claimed $(d count coupons '{"claimed":true}') coupons: $(d find coupons)"
expect 0 "audit after the coupon job" -- d audit
# The claimed coupon carries the effect's marker, its only record: a plain
# delete of it (and an insert of a fresh c1 after) would let a retry of
# cj claim c1 again.  The markers' rule refuses the delete, and the drop
# of the collection while it holds documents; past the rules it goes.
c=$(d find coupons '{"claimed":true}' | jq -r ._id)
expect 3 "delete of an effect's marked document" -- d delete coupons "{\"_id\":\"$c\"}"
grep -q "transition delete, plain writes" "$WORK/err" && ok || bad "delete message: $(<"$WORK/err")"
expect 3 "drop of a collection with effect markers" -- d drop coupons
[ "$(d count coupons '{"claimed":true}')" = 1 ] && ok || bad "the refused delete or drop changed coupons"
expect 0 "delete of an unmarked coupon" -- d delete coupons "{\"_id\":{\"\$ne\":\"$c\"},\"claimed\":false}"
expect 0 "delete past the rules" -- d delete coupons "{\"_id\":\"$c\"}" --bypass-validation
# A conditional debit that landed, repeated by the next attempt: a repeat
# whatever FILTER says now ({"applied":false}, exit 0), never NOMATCH.
d insert wallets '{"_id":"v","balance":15}' >/dev/null
d job add q debit --id dj >/dev/null
d find-and-modify jobs '{"_id":"dj"}' --bypass-validation '{"$set":{"state":"running","owner":"me","lease_until":9000000000000},"$inc":{"epoch":1}}' >/dev/null
expect 0 "debit" -- d job effect dj 1 debit wallets '{"_id":"v","balance":{"$gte":10}}' '{"$inc":{"balance":-10}}'
d find-and-modify jobs '{"_id":"dj"}' --bypass-validation '{"$inc":{"epoch":1}}' >/dev/null # taken over
expect 0 "debit repeated by the next attempt" -- d job effect dj 2 debit wallets '{"_id":"v","balance":{"$gte":10}}' '{"$inc":{"balance":-10}}'
[ "$(out)" = '{"applied":false}' ] && ok || bad "repeat: $(out)"
[ "$(d find wallets '{"_id":"v"}' --project '{"_id":0,"balance":1}')" = '{"balance":5}' ] && ok || bad "wallet: $(d find wallets)"
# Markers change only by the job's steps (effect.c F5): one taken off by
# hand -- a plain update, a batch update -- let the next attempt debit
# again with the audit clean; a forged one made an effect skip.
expect 3 "a marker taken off by update" -- d update wallets '{"_id":"v"}' '{"$unset":{"dtx_fx":""}}'
expect 3 "a marker taken off by batch-update" -- d batch-update wallets '{"_id":"v"}' '{"$pull":{"dtx_fx":{"job":"dj"}}}' --id unmark
expect 3 "a marker forged by insert" -- d insert wallets '{"_id":"v2","dtx_fx":[{"job":"dj","key":"k2"}]}'
expect 0 "a plain write of another field" -- d update wallets '{"_id":"v"}' '{"$set":{"owner":"ann"}}'
d find-and-modify jobs '{"_id":"dj"}' --bypass-validation '{"$inc":{"epoch":1}}' >/dev/null # taken over again
expect 0 "debit after the refused tampers" -- d job effect dj 3 debit wallets '{"_id":"v","balance":{"$gte":5}}' '{"$inc":{"balance":-5}}'
[ "$(out)" = '{"applied":false}' ] && [ "$(d find wallets '{"_id":"v"}' --project '{"_id":0,"balance":1}')" = '{"balance":5}' ] &&
  ok || bad "debited again: $(out) $(d find wallets)"
# The audit finds a marker wherever it is, also once no job lists its
# collection (here a job's fx_colls emptied by hand).
d update jobs '{"_id":"dj"}' '{"$set":{"fx_colls":[]}}' --bypass-validation >/dev/null
expect 5 "audit, marker in an unlisted collection" -- d audit
grep -q "orphan_marker.*wallets" "$WORK/out" && ok || bad "orphan marker not reported: $(grep FINDING "$WORK/out")"

# ---- exactly once: a paused attempt's late write ----------------------------------
# Attempt 1 passes its checks and stops before its write; its lease
# lapses, recovery takes it over, attempt 2 debits and succeeds, and the
# markers are cleared.  Attempt 1 resumes: the store refuses its write
# (its lease ended), and the wallet is debited once.
new_store job_late
d insert wallets '{"_id":"w","balance":100}' >/dev/null
d job add q t --id p1 --backoff-ms 1 >/dev/null
d find-and-modify jobs '{"_id":"p1"}' --bypass-validation \
  '{"$set":{"state":"running","owner":"w1","lease_until":'$(($(now_ms) + 1500))'},"$inc":{"epoch":1}}' >/dev/null
DOCTX_FAULT=job.effect.apply:pause start_bg "$WORK/late.log" "$DOCTX" --store "$S" \
  job effect p1 1 debit wallets '{"_id":"w"}' '{"$inc":{"balance":-10}}'
late=$BG_PID
wait_stopped "$late" 30 && ok || bad "attempt 1 never paused: $(<"$WORK/late.log")"
cat >"$WORK/debit.sh" <<'SH'
"$DOCTX" job effect "$DOCTX_JOB_ID" "$DOCTX_JOB_EPOCH" debit wallets '{"_id":"w"}' '{"$inc":{"balance":-10}}' >/dev/null && echo '{}'
SH
end=$((SECONDS + 30))
while [ "$(state p1)" != succeeded ] && [ $SECONDS -lt $end ]; do
  d recover >/dev/null # takes attempt 1 over once its lease lapsed
  d job work q --once --lease-ms 300 --exec "sh $WORK/debit.sh" >/dev/null
  [ "$(state p1)" = succeeded ] || nap 0.2
done
[ "$(state p1)" = succeeded ] && ok || bad "p1: $(d job show p1)"
# Past every bound an effect's writes carried (fx_until) and the margin.
fx=$(d find jobs '{"_id":"p1"}' --project '{"_id":0,"fx_until":1,"lease_until":1}' | jq '[.fx_until // 0, .lease_until] | max')
while [ "$(now_ms)" -le $((fx + 1100)) ]; do nap 0.1; done
d recover --tombstone-ttl-ms 1 >/dev/null
[ "$(d count wallets '{"dtx_fx.0":{"$exists":true}}')" = 0 ] && ok || bad "markers kept: $(d find wallets)"
kill -CONT "$late"
bounded_wait "$late" 30 "$WORK/late.log"
[ $? = 3 ] && grep -q "STALE" "$WORK/late.log" && ok || bad "the late write: $(<"$WORK/late.log")"
[ "$(d find wallets '{"_id":"w"}' --project '{"_id":0,"balance":1}')" = '{"balance":90}' ] && ok || bad "wallet debited twice: $(d find wallets)"
expect 0 "audit --settled after the late write" -- d audit --settled

# ---- the audit never stops at one bad job ------------------------------------------
new_store job_audit
d account create a --balance 100 >/dev/null
d job add q t --id j1 >/dev/null
expect 3 "plain update of fx_colls to no collection" -- d update jobs '{"_id":"j1"}' '{"$set":{"fx_colls":["no such coll!"]}}'
d update jobs '{"_id":"j1"}' '{"$set":{"fx_colls":["no such coll!"]}}' --bypass-validation >/dev/null
d update accounts '{"_id":"a"}' '{"$inc":{"balance":50}}' --bypass-validation >/dev/null
expect 5 "audit: a bad job and a money tamper" -- d audit
grep -q "FINDING transfer conservation" "$WORK/out" && grep -q "FINDING job .*no such coll" "$WORK/out" &&
  ok || bad "audit findings: $(cat "$WORK/out" "$WORK/err")"

# ---- plain updates make only the protocol's moves ------------------------------------
new_store job_moves
d job add q t --id s1 '{"p":1}' >/dev/null
d job work q --once --exec 'echo {}' >/dev/null
expect 3 "a succeeded job made runnable again" -- d update jobs '{"_id":"s1"}' '{"$set":{"state":"ready","finished":null,"result":null}}'
grep -q "fits no allowed move" "$WORK/err" && ok || bad "resurrect: $(<"$WORK/err")"
d job add q t --id r1 '{"p":1}' >/dev/null
expect 3 "a payload rewritten" -- d update jobs '{"_id":"r1"}' '{"$set":{"payload":{"p":2}}}'
expect 3 "a ready job set succeeded without running" -- d update jobs '{"_id":"r1"}' \
  '{"$set":{"state":"succeeded","finished":1,"attempts":1,"epoch":1,"result":{}}}'
d find-and-modify jobs '{"_id":"r1"}' --bypass-validation '{"$set":{"state":"running","owner":"me","lease_until":9000000000000},"$inc":{"epoch":2}}' >/dev/null
expect 3 "an epoch set back" -- d update jobs '{"_id":"r1"}' '{"$set":{"epoch":1}}'
d job add q t --id x1 --max-attempts 1 >/dev/null
d job work q --once --exec 'exit 1' >/dev/null
d update jobs '{"_id":"x1"}' '{"$set":{"fx_cleared":true}}' >/dev/null # recovery's forgetting
expect 3 "markers forgotten, then remembered" -- d update jobs '{"_id":"x1"}' '{"$set":{"fx_cleared":false}}'
expect 3 "retry after the markers went" -- d job retry x1
# A job's pins and effect collections change only by its steps: a pin
# forgotten (or moved) by hand made the next call claim a second coupon,
# and so did a job deleted with its markers, then added again.
d insert coupons '{"_id":"c1","claimed":false}' '{"_id":"c2","claimed":false}' >/dev/null
d job add q t --id pj >/dev/null
d find-and-modify jobs '{"_id":"pj"}' --bypass-validation '{"$set":{"state":"running","owner":"me","lease_until":9000000000000},"$inc":{"epoch":1}}' >/dev/null
expect 0 "claim a coupon" -- d job effect pj 1 c coupons '{"claimed":false}' '{"$set":{"claimed":true}}'
expect 3 "a pin forgotten by hand" -- d update jobs '{"_id":"pj"}' '{"$unset":{"fx_pins":""},"$set":{"fx_colls":[]}}'
expect 3 "a pin moved by hand" -- d update jobs '{"_id":"pj"}' '{"$set":{"fx_pins.c.id":"c2"}}'
expect 0 "claim again" -- d job effect pj 1 c coupons '{"claimed":false}' '{"$set":{"claimed":true}}'
[ "$(out)" = '{"applied":false}' ] && [ "$(d count coupons '{"claimed":true}')" = 1 ] && ok || bad "claimed twice: $(out) $(d find coupons)"
d update jobs '{"_id":"pj"}' '{"$set":{"state":"succeeded","finished":1,"attempts":1,"result":{}}}' >/dev/null
expect 3 "a job deleted with its markers" -- d delete jobs '{"_id":"pj"}'
# The moves made by hand above (r1 and pj claimed, pj succeeded) are
# allowed edges, but a plain write cannot record their events: the audit
# reports each job whose last event does not end in its state, and
# nothing else (docs/jobs.md, "Events").
expect 5 "audit after the refused moves" -- d audit
[ "$(grep -c '^FINDING' "$WORK/out")" = 2 ] && grep -q "FINDING job event_state: job r1 is running" "$WORK/out" &&
  grep -q "FINDING job event_state: job pj is succeeded" "$WORK/out" && ok || bad "audit: $(grep FINDING "$WORK/out")"

# ---- a remote worker's steps: claim -> heartbeat -> complete | fail ---------
new_store job_remote
d job add rq t --id r1 --priority 5 >/dev/null
d job add rq t --id r2 --max-attempts 1 >/dev/null
expect 0 "claim" -- d job claim rq --n 1 --lease-ms 60000 --owner sh-1
[ "$(jget "$(out)" _id)" = r1 ] && [ "$(jget "$(out)" owner)" = sh-1 ] && ok || bad "claim: $(out)"
e1=$(jget "$(out)" epoch)
expect 0 "heartbeat" -- d job heartbeat r1 "$e1" --lease-ms 90000
[ "$(jget "$(out)" state)" = running ] && ok || bad "heartbeat: $(out)"
expect 3 "heartbeat, another epoch" -- d job heartbeat r1 $((e1 + 1))
grep -q 'STALE' "$WORK/err" && ok || bad "heartbeat: $(<"$WORK/err")"
expect 0 "complete" -- d job complete r1 "$e1" '{"sent":1}'
[ "$(jget "$(out)" state)" = succeeded ] && [ "$(jget "$(out)" result sent)" = 1 ] && ok || bad "complete: $(out)"
expect 0 "complete again: the same job" -- d job complete r1 "$e1" '{"sent":1}'
[ "$(jget "$(out)" attempts)" = 1 ] && ok || bad "complete again: $(out)"
expect 3 "fail after complete" -- d job fail r1 "$e1" late
expect 1 "complete a missing job" -- d job complete nope 1
expect 0 "claim the next" -- d job claim rq --n 5
[ "$(jget "$(out)" _id)" = r2 ] && ok || bad "claim: $(out)"
e2=$(jget "$(out)" epoch)
expect 0 "claim, nothing due" -- d job claim rq
[ ! -s "$WORK/out" ] && ok || bad "an empty claim printed $(out)"
expect 0 "fail: its last attempt" -- d job fail r2 "$e2" 'it broke'
[ "$(jget "$(out)" state)" = dead ] && [ "$(jget "$(out)" last_error)" = 'it broke' ] && ok || bad "fail: $(out)"
expect 0 "audit after the remote steps" -- d audit

# ---- a command that succeeded runs once ------------------------------------------
new_store job_once_ok
# Its result nests deeper than a job may: stored as marked text.
d job add q t --id deep --backoff-ms 1 >/dev/null
deep=$(printf '%.0s[' {1..150})$(printf '%.0s]' {1..150})
expect 0 "a result nested 150 deep" -- d job work q --once --lease-ms 300 --exec "echo run >>$WORK/deep.runs; echo '$deep'"
job=$(d job show deep)
[ "$(jget "$job" state)" = succeeded ] && [ "$(wc -l <"$WORK/deep.runs")" = 1 ] && ok || bad "deep: $job, runs $(wc -l <"$WORK/deep.runs")"
[ "$(jget "$job" result truncated)" = false ] && [ "$(jget "$job" result text)" = "$deep" ] && ok || bad "deep result: $job"
# It leaves a child in the background holding its output: the attempt
# ends when it exits, and the child is killed.
d job add q t --id bgc >/dev/null
t0=$SECONDS
expect 0 "a background child" -- d job work q --once --timeout-ms 20000 --exec 'sleep 30 & echo "{\"ok\":1}"; exit 0'
[ $((SECONDS - t0)) -lt 10 ] && ok || bad "the worker waited for the background child"
job=$(d job show bgc)
[ "$(jget "$job" state)" = succeeded ] && [ "$(jget "$job" result ok)" = 1 ] && ok || bad "bgc: $job"

# ---- hostile plain writes on the new fields ---------------------
# A unique window is not cut short by deleting its holder, by hand or by
# retention (J18: the delete guard and the purges keep a job holding its
# key); a plain insert writes no progress, cancel request or window.
new_store job_attack29
d job add aq t --id k1 --unique-key k --unique-for-ms 600000 >/dev/null
d job cancel k1 >/dev/null
expect 3 "a plain delete within the window" -- d delete jobs '{"_id":"k1"}'
nap 0.02
expect 0 "recover --keep-dead-ms 1 within the window" -- d recover --keep-dead-ms 1
expect 0 "the key still held" -- d job add aq t --id k2 --unique-key k
[ "$(jget "$(out)" _id)" = k1 ] && [ "$(d count jobs '{"_id":"k2"}')" = 0 ] && ok || bad "window cut short: $(out)"
J='"queue":"aq","type":"t","payload":{},"priority":0,"rank":0,"run_at":0,"attempts":0,"max_attempts":5,"backoff_ms":1000,"fx_colls":[],"created":0,"updated":0,"owner":null,"lease_until":0,"finished":null,"state":"ready","epoch":0'
expect 3 "insert with a progress" -- d insert jobs "{\"_id\":\"p1\",$J,\"progress\":99}"
expect 3 "insert with a cancel request" -- d insert jobs "{\"_id\":\"p2\",$J,\"cancel_requested\":5}"
expect 0 "insert without" -- d insert jobs "{\"_id\":\"p3\",$J}"
[ "$(d count jobs '{"_id":{"$in":["p1","p2"]}}')" = 0 ] && ok || bad "a forged insert recorded"
expect 0 "audit" -- d audit
# A parent counts only the children that name it (J13): a dead child
# deleted and another job added under its id without --parent does not
# let the parent run on that job's success (the audit reports the link).
d job add aq t --id P --on-child-fail hold >/dev/null
d job add aq2 t --id C1 --parent P --max-attempts 1 >/dev/null
d job fail C1 "$(jget "$(d job claim aq2)" epoch)" boom >/dev/null
d job events aq2 >/dev/null # its events relayed (a job with events waiting stays)
expect 0 "delete the dead child" -- d delete jobs '{"_id":"C1"}'
d job add aq2 t --id C1 >/dev/null
expect 0 "an unrelated C1 succeeds" -- d job complete C1 "$(jget "$(d job claim aq2)" epoch)" '{"forged":1}'
d recover >/dev/null
[ "$(state P)" = waiting ] && ok || bad "the parent ran on another job's success: $(d job show P)"
expect 5 "audit reports the link" -- d audit
# Only a claim runs a job (J10, J12): a plain update into running, a
# plain epoch bump (it freed the holder's slot) and a plain insert of a
# running job are refused, in a paused queue at its limit.
new_store job_attack29_claim
d job queue lq --max-running 1 >/dev/null
d job add lq t --id L1 >/dev/null; d job add lq t --id L2 >/dev/null
d job claim lq >/dev/null; d job pause lq >/dev/null
expect 3 "a plain claim" -- d update jobs '{"_id":"L2"}' '{"$set":{"state":"running","epoch":1,"owner":"me","lease_until":9999999999999}}'
expect 3 "a plain epoch bump" -- d update jobs '{"_id":"L1"}' '{"$inc":{"epoch":1}}'
JR='"queue":"lq","type":"t","payload":{},"priority":0,"rank":0,"run_at":0,"attempts":0,"max_attempts":5,"backoff_ms":1000,"fx_colls":[],"created":0,"updated":0,"owner":"me","lease_until":9999999999999,"finished":null,"state":"running","epoch":1'
expect 3 "a plain insert of a running job" -- d insert jobs "{\"_id\":\"L3\",$JR}"
[ "$(d count jobs '{"state":"running"}')" = 1 ] && ok || bad "a job ran past the claim: $(d find jobs '{"state":"running"}')"
expect 0 "audit" -- d audit
# ---- events (docs/jobs.md, "Events") ------------------------------------------------
# Every transition of every job, once, in order per queue; a follower
# SIGKILLed and started again from its last cursor sees every event once;
# a cursor behind the trim is refused; the log and outbox refuse plain
# writes.
new_store job_events
expect 2 "events: a negative cursor" -- d job events q --after -1
expect 2 "events: --limit past 1000" -- d job events q --limit 1001
expect 2 "events: --deadline-ms without --follow" -- d job events q --deadline-ms 100
expect 2 "events: a bad queue name" -- d job events 'a/b'
ev_lines() { local n; n=$(grep -c '^{' "$1" 2>/dev/null); echo "${n:-0}"; }
ev_wait() { # FILE N SECS: until FILE holds N event lines
  local end=$((SECONDS + $3))
  while [ "$(ev_lines "$1")" -lt "$2" ] && [ $SECONDS -lt $end ]; do nap 0.05; done
  [ "$(ev_lines "$1")" -ge "$2" ]
}
# the store made first: a follower opening a new SQLite file while an add
# creates it can meet "setting WAL mode: database is locked"
expect 0 "events: an empty log" -- d job events q
start_bg "$WORK/ev1" "$DOCTX" --store "$S" job events q --follow --deadline-ms 30000
f1=$BG_PID
d job add q t --id e1 >/dev/null
d job add q t --id e3 --max-attempts 1 >/dev/null
d job add q t --id e4 >/dev/null
d job cancel e4 >/dev/null
expect 0 "events: a worker" -- d job work q --once --exec 'test "$DOCTX_JOB_ID" != e3'
ev_wait "$WORK/ev1" 8 20 && ok || bad "the follower saw $(ev_lines "$WORK/ev1") of 8 events"
kill -KILL "$f1"; wait "$f1" 2>/dev/null
# While no one follows: a stalled attempt (claimed, its lease lapsed,
# taken over) and a retry of the dead one.
d job add q t --id e5 --backoff-ms 60000 >/dev/null
d job claim q --lease-ms 1 >/dev/null
nap 0.05
d recover >/dev/null
d job retry e3 >/dev/null
last=$(grep '^{' "$WORK/ev1" | tail -1 | jq -r .cursor)
start_bg "$WORK/ev2" "$DOCTX" --store "$S" job events q --follow --after "$last" --deadline-ms 30000
f2=$BG_PID
# every event recorded: the jobs' counts (some still in outboxes: no
# move relays, the follower does)
total=$(d find jobs '{"queue":"q"}' | jq -s 'map(.ev_n) | add')
ev_wait "$WORK/ev2" $((total - last)) 20 && ok || bad "the second follower saw $(ev_lines "$WORK/ev2") of $((total - last))"
stop_bg "$f2" 10 "$WORK/ev2" && ok || bad "the follower did not stop on SIGTERM"
cat "$WORK/ev1" "$WORK/ev2" | grep '^{' >"$WORK/ev"
[ "$(jq -r .cursor "$WORK/ev" | tr '\n' ' ')" = "$(seq -s ' ' 1 "$total") " ] && ok ||
  bad "cursors seen: $(jq -r .cursor "$WORK/ev" | tr '\n' ' '), want 1..$total"
evs_of() { jq -r "select(.job == \"$1\") | .event" "$WORK/ev" | tr '\n' ' '; }
[ "$(evs_of e1)" = "added claimed succeeded " ] && ok || bad "e1: $(evs_of e1)"
[ "$(evs_of e3)" = "added claimed dead retried " ] && ok || bad "e3: $(evs_of e3)"
[ "$(evs_of e4)" = "added canceled " ] && ok || bad "e4: $(evs_of e4)"
[ "$(evs_of e5)" = "added claimed stalled " ] && ok || bad "e5: $(evs_of e5)"
[ "$(jq -r 'select(.job == "e5" and .event == "stalled") | "\(.from) \(.to) \(.epoch)"' "$WORK/ev")" = "running delayed 2" ] && ok ||
  bad "e5 stalled: $(grep '"stalled"' "$WORK/ev")"
expect 0 "events: --after, --limit" -- d job events q --after 2 --limit 2
[ "$(jq -r .cursor "$WORK/out" | tr '\n' ' ')" = "3 4 " ] && ok || bad "page: $(out)"
# plain writes cannot touch the log or the outbox
expect 3 "events: a plain delete of the log" -- d delete job_events '{"seq":1}'
expect 3 "events: a plain insert into the log" -- d insert job_events '{"_id":"q/99","queue":"q","seq":99,"job":"x","born":1,"n":1,"event":"e","at":1}'
expect 3 "events: a plain update of the log" -- d update job_events '{"seq":1}' '{"$set":{"event":"x"}}'
expect 3 "events: a plain reset of an outbox" -- d update jobs '{"_id":"e1"}' '{"$set":{"ev_sent":0}}'
expect 0 "events: audit" -- d audit --settled
# trim by count: a reader behind it is told, not moved past the gap
expect 0 "events: trim to 2" -- d recover --events-keep 2
[ "$(d count job_events)" = 2 ] && ok || bad "after the trim: $(d count job_events) entries"
expect 3 "events: a cursor behind the trim" -- d job events q
grep -q "were trimmed; the oldest kept is $((total - 1))" "$WORK/err" && ok || bad "trim message: $(<"$WORK/err")"
expect 0 "events: after the trim" -- d job events q --after $((total - 2))
[ "$(ev_lines "$WORK/out")" = 2 ] && ok || bad "after the trim: $(out)"
expect 0 "events: audit after the trim" -- d audit --settled
d job add q t --id e6 >/dev/null
expect 0 "events: the log goes on after the trim" -- d job events q --after "$total"
[ "$(jq -r .cursor "$WORK/out")" = $((total + 1)) ] && ok || bad "after the trim: $(out)"
finish
