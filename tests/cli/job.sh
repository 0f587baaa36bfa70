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

jget() { # jget JSON KEY... -> the value at that path (strings raw, others compact JSON)
  local j=$1; shift
  jq -rc 'getpath($ARGS.positional)' --args "$@" <<<"$j"
}
state() { jget "$(d job show "$1")" state; }
export DOCTX

new_store job
# ---- add ------------------------------------------------------------------
expect 0 "add" -- d job add mail send '{"to":"a"}' --id j1
[ "$(jget "$(out)" state)" = ready ] && ok || bad "j1 not ready: $(out)"
expect 0 "add again, same" -- d job add mail send '{"to":"a"}' --id j1
[ "$(d count jobs)" = 1 ] && ok || bad "an idempotent add recorded twice"
expect 3 "add again, other payload" -- d job add mail send '{"to":"b"}' --id j1
grep -q "doctx: CONFLICT: " "$WORK/err" && ok || bad "conflict message: $(cat "$WORK/err")"
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
  grep -q -- "$pattern" "$WORK/err" && ok || bad "$label: message '$(cat "$WORK/err")' lacks '$pattern'"
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
[ "$(tr '\n' ' ' <"$WORK/order")" = "high mid mid2 low " ] && ok || bad "order: $(cat "$WORK/order")"
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
grep -q "doctx: STALE: " "$WORK/err" && ok || bad "stale message: $(cat "$WORK/err")"
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
grep -q "doctx: FENCED: " "$WORK/err" && ok || bad "fenced message: $(cat "$WORK/err")"
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
grep -q "transition delete, plain writes" "$WORK/err" && ok || bad "delete message: $(cat "$WORK/err")"
expect 3 "drop of a collection with effect markers" -- d drop coupons
[ "$(d count coupons '{"claimed":true}')" = 1 ] && ok || bad "the refused delete or drop changed coupons"
expect 0 "delete of an unmarked coupon" -- d delete coupons "{\"_id\":{\"\$ne\":\"$c\"},\"claimed\":false}"
expect 0 "delete past the rules" -- d delete coupons "{\"_id\":\"$c\"}" --bypass-validation
# A conditional debit that landed, repeated by the next attempt: a repeat
# whatever FILTER says now ({"applied":false}, exit 0), never NOMATCH.
d insert wallets '{"_id":"v","balance":15}' >/dev/null
d job add q debit --id dj >/dev/null
d find-and-modify jobs '{"_id":"dj"}' '{"$set":{"state":"running","owner":"me","lease_until":9000000000000},"$inc":{"epoch":1}}' >/dev/null
expect 0 "debit" -- d job effect dj 1 debit wallets '{"_id":"v","balance":{"$gte":10}}' '{"$inc":{"balance":-10}}'
d find-and-modify jobs '{"_id":"dj"}' '{"$inc":{"epoch":1}}' >/dev/null # taken over
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
d find-and-modify jobs '{"_id":"dj"}' '{"$inc":{"epoch":1}}' >/dev/null # taken over again
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
d find-and-modify jobs '{"_id":"p1"}' \
  '{"$set":{"state":"running","owner":"w1","lease_until":'$(($(now_ms) + 1500))'},"$inc":{"epoch":1}}' >/dev/null
DOCTX_FAULT=job.effect.apply:pause start_bg "$WORK/late.log" "$DOCTX" --store "$S" \
  job effect p1 1 debit wallets '{"_id":"w"}' '{"$inc":{"balance":-10}}'
late=$BG_PID
wait_stopped "$late" 30 && ok || bad "attempt 1 never paused: $(cat "$WORK/late.log")"
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
[ $? = 3 ] && grep -q "STALE" "$WORK/late.log" && ok || bad "the late write: $(cat "$WORK/late.log")"
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
grep -q "fits no allowed move" "$WORK/err" && ok || bad "resurrect: $(cat "$WORK/err")"
d job add q t --id r1 '{"p":1}' >/dev/null
expect 3 "a payload rewritten" -- d update jobs '{"_id":"r1"}' '{"$set":{"payload":{"p":2}}}'
expect 3 "a ready job set succeeded without running" -- d update jobs '{"_id":"r1"}' \
  '{"$set":{"state":"succeeded","finished":1,"attempts":1,"epoch":1,"result":{}}}'
d find-and-modify jobs '{"_id":"r1"}' '{"$set":{"state":"running","owner":"me","lease_until":9000000000000},"$inc":{"epoch":2}}' >/dev/null
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
d find-and-modify jobs '{"_id":"pj"}' '{"$set":{"state":"running","owner":"me","lease_until":9000000000000},"$inc":{"epoch":1}}' >/dev/null
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
grep -q 'STALE' "$WORK/err" && ok || bad "heartbeat: $(cat "$WORK/err")"
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
grep -q "were trimmed; the oldest kept is $((total - 1))" "$WORK/err" && ok || bad "trim message: $(cat "$WORK/err")"
expect 0 "events: after the trim" -- d job events q --after $((total - 2))
[ "$(ev_lines "$WORK/out")" = 2 ] && ok || bad "after the trim: $(out)"
expect 0 "events: audit after the trim" -- d audit --settled
d job add q t --id e6 >/dev/null
expect 0 "events: the log goes on after the trim" -- d job events q --after "$total"
[ "$(jq -r .cursor "$WORK/out")" = $((total + 1)) ] && ok || bad "after the trim: $(out)"
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
grep -q "flow_stuck" "$WORK/out" && ok || bad "no flow_stuck: $(cat "$WORK/out")"
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
  bad "root's handler saw: $(cat "$WORK/root.in")"
expect 0 "flow: audit after the tree" -- d audit --settled
# ---- flows: the contract of --parent ---------------------------------------------
n0=$(d count jobs)
expect 1 "flow: a missing parent" -- d job add fq t --id x1 --parent nope
expect 3 "flow: a succeeded parent" -- d job add fq t --id x2 --parent r
grep -q "STATE: job r is succeeded" "$WORK/err" && ok || bad "message: $(cat "$WORK/err")"
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
grep -q "flow_early" "$WORK/out" && ok || bad "no flow_early: $(cat "$WORK/out")"
# A canceled parent may go (it is over); its live child is then reported.
d job add fq5 t --id pz >/dev/null
d job add fq5 t --id pz1 --parent pz --delay-ms 60000 >/dev/null
d job cancel pz >/dev/null
# an ended job goes once its events are in the log (a reader relays them)
expect 3 "flow: a canceled parent with events waiting" -- d delete jobs '{"_id":"pz"}'
d job events fq5 >/dev/null
expect 0 "flow: a canceled parent deleted" -- d delete jobs '{"_id":"pz"}'
expect 5 "flow: audit: a live child without its parent" -- d audit
grep -q "flow_orphan.*pz1" "$WORK/out" && ok || bad "no flow_orphan: $(cat "$WORK/out")"
# ---- schedules (docs/jobs.md, "Schedules") ----------------------------------------
new_store job_sched
# Bad input: exit 2, nothing written (the library's check before the store
# opens: no store file either, on SQLite).
while IFS='|' read -r label args pattern; do
  # shellcheck disable=SC2086
  eval "expect 2 \"schedule: $label\" -- d job schedule $args"
  grep -q -- "$pattern" "$WORK/err" && ok || bad "$label: message '$(cat "$WORK/err")' lacks '$pattern'"
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
# tick it read (due before the removal), and nothing after it.
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
  bad "the ticker never paused: $(cat "$WORK/paused.log")"
fi
expect 0 "audit after the removal" -- d audit

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

# ---- pause and resume a queue (docs/jobs.md, "Pause and resume") ------------------
new_store job_pause
expect 2 "pause: a bad queue name" -- d job pause 'no spaces'
expect 2 "resume: no queue" -- d job resume
case " $(d collections 2>/dev/null | tr '\n' ' ') " in *" job_queues "*) bad "a refused pause wrote settings" ;; *) ok ;; esac
d job add pz t --id z0 >/dev/null
expect 0 "stats: not paused" -- d job stats pz
[ "$(jget "$(out)" paused)" = false ] && ok || bad "stats: $(out)"
# A standing worker; one long job running when the pause comes finishes.
d job add pz t --id z1 '{"s":0.6}' >/dev/null
start_bg "$WORK/pz.log" "$DOCTX" --store "$S" job work pz --threads 2 --lease-ms 3000 \
  --exec 'd=$(jq -r ".payload.s // 0"); sleep "$d"; echo "{}"'
pz=$BG_PID
end=$((SECONDS + 20)) zs=
while zs=$(state z1) && [ "$zs" != running ] && [ $SECONDS -lt $end ]; do nap 0.02; done
[ "$zs" = running ] && ok || bad "z1 never ran: $(d job show z1)"
expect 0 "pause" -- d job pause pz
[ "$(jget "$(out)" paused)" = true ] && ok || bad "pause: $(out)"
for i in 1 2 3 4; do d job add pz t --id "zp$i" >/dev/null; done
end=$((SECONDS + 20))
while [ "$(state z1)" != succeeded ] && [ $SECONDS -lt $end ]; do nap 0.05; done
[ "$(state z1)" = succeeded ] && ok || bad "the running job did not finish: $(d job show z1)"
nap 0.7 # the worker's threads look more than once meanwhile
expect 0 "stats: paused" -- d job stats pz
[ "$(jget "$(out)" paused)" = true ] && [ "$(jget "$(out)" ready)" = 4 ] && [ "$(jget "$(out)" running)" = 0 ] && ok || bad "paused stats: $(out)"
expect 0 "a claim of a paused queue takes nothing" -- d job claim pz --n 5
[ ! -s "$WORK/out" ] && ok || bad "claimed from a paused queue: $(out)"
expect 0 "pause again" -- d job pause pz
expect 0 "queues" -- d job queues
[ "$(jget "$(out)" queue)" = pz ] && [ "$(jget "$(out)" paused)" = true ] && [ "$(jget "$(out)" gen)" = 2 ] && ok || bad "queues: $(out)"
# Only doctx job pause and resume write a queue's settings.
expect 3 "plain resume refused" -- d update job_queues '{"_id":"pz"}' '{"$set":{"paused":false}}'
expect 3 "plain delete refused" -- d delete job_queues '{"_id":"pz"}'
expect 3 "plain insert refused" -- d insert job_queues '{"_id":"other","paused":false,"gen":1,"updated":1}'
expect 3 "plain gen reset refused" -- d update job_queues '{"_id":"pz"}' '{"$set":{"gen":1}}'
expect 0 "resume" -- d job resume pz
[ "$(jget "$(out)" paused)" = false ] && ok || bad "resume: $(out)"
end=$((SECONDS + 20))
while [ "$(jget "$(d job stats pz)" succeeded)" != 6 ] && [ $SECONDS -lt $end ]; do nap 0.05; done
expect 0 "stats after resume" -- d job stats pz
[ "$(jget "$(out)" succeeded)" = 6 ] && [ "$(jget "$(out)" paused)" = false ] && ok || bad "after resume: $(out)"
stop_bg "$pz" 10 "$WORK/pz.log"
expect 0 "audit after pause and resume" -- d audit --settled
d update job_queues '{"_id":"pz"}' '{"$set":{"paused":"yes"}}' --bypass-validation >/dev/null
expect 5 "audit: settings forced past their rules" -- d audit
grep -q "FINDING job bad_shape: job_queues 'pz'" "$WORK/out" && ok || bad "audit: $(out)"

# ---- a queue's concurrency limit (docs/jobs.md, "Queue limits") -------------------
new_store job_limit
expect 2 "queue: --max-running 0" -- d job queue lq --max-running 0
expect 2 "queue: --max-running 257" -- d job queue lq --max-running 257
expect 2 "queue: --max-running -1" -- d job queue lq --max-running -1
expect 2 "queue: --max-running x" -- d job queue lq --max-running x
expect 2 "queue: --max-running 9223372036854775808" -- d job queue lq --max-running 9223372036854775808
expect 2 "queue: nothing to set" -- d job queue lq
expect 2 "queue: a bad name" -- d job queue 'l q' --max-running 3
[ ! -e "${S#sqlite://}" ] || case " $(d collections 2>/dev/null | tr '\n' ' ') " in *" job_queues "*) bad "a refused setting wrote one" ;; *) ok ;; esac
expect 0 "queue --max-running 3" -- d job queue lq --max-running 3
[ "$(jget "$(out)" max_running)" = 3 ] && ok || bad "queue: $(out)"
# A remote claim takes a slot too; no plain write frees it.
d job add lq t --id l0 >/dev/null
expect 0 "claim under the limit" -- d job claim lq
e0=$(jget "$(out)" epoch)
held=$(d find job_queues '{"_id":"lq"}' --project '{"_id":0,"slots":1}' | jq -r '[.slots[] | select(.job == "l0")] | length')
[ "$held" = 1 ] && ok || bad "l0 holds no slot: $(d find job_queues)"
expect 3 "plain write of a slot refused" -- d update job_queues '{"_id":"lq"}' '{"$set":{"slots":[]}}'
expect 3 "plain write of max_running refused" -- d update job_queues '{"_id":"lq"}' '{"$set":{"max_running":100}}'
# A limit raised while a claim takes a slot: the setter, paused between
# its read and its write, must not write back the slots it read (that
# freed the slot of a running job).
d job add lq t --id l00 >/dev/null
DOCTX_FAULT=job.queue.set:pause start_bg "$WORK/lqset.log" "$DOCTX" --store "$S" job queue lq --max-running 4
lset=$BG_PID
wait_stopped "$lset" 30 && ok || bad "the setter never paused: $(cat "$WORK/lqset.log")"
expect 0 "claim while the setter is paused" -- d job claim lq
e00=$(jget "$(out)" epoch)
kill -CONT "$lset"
bounded_wait "$lset" 30 "$WORK/lqset.log" && ok || bad "the setter: $(cat "$WORK/lqset.log")"
held=$(d find job_queues '{"_id":"lq"}' --project '{"_id":0,"slots":1}' | jq -r '[.slots[] | select(.job == "l0" or .job == "l00")] | length')
[ "$held" = 2 ] && ok || bad "raising the limit freed a running job's slot: $(d find job_queues)"
expect 0 "complete l00" -- d job complete l00 "$e00"
expect 0 "queue --max-running 3 again" -- d job queue lq --max-running 3
# Forced past the rules, a freed slot of a running job is the audit's.
i0=$(d find job_queues '{"_id":"lq"}' --project '{"_id":0,"slots":1}' | jq -r '.slots | map(.job) | index("l0")')
d update job_queues '{"_id":"lq"}' '{"$set":{"slots.'"$i0"'.job":null}}' --bypass-validation >/dev/null
expect 5 "audit: a running job without its slot" -- d audit
grep -q "FINDING job job_slot: job l0 of queue lq" "$WORK/out" && ok || bad "audit: $(out)"
expect 0 "complete under the limit" -- d job complete l0 "$e0"
# 8 workers in 4 processes; jobs that sleep a little; a sampler of the
# running count; one worker SIGSTOPped while it runs a job, another
# SIGKILLed; recovery gives their slots back once their leases lapse.
for i in $(seq 1 30); do d job add lq t --id "l$i" --backoff-ms 1 >/dev/null; done
lp=()
for w in 1 2 3 4; do
  start_bg "$WORK/lq$w.log" "$DOCTX" --store "$S" job work lq --threads 2 --lease-ms 800 --exec 'sleep 0.2; echo "{}"'
  lp+=("$BG_PID")
done
maxr=0 samples=0 stopped= killed= end=$((SECONDS + 60))
while [ $SECONDS -lt $end ]; do
  st=$(d job stats lq) || continue
  read -r r sc < <(jq -r '"\(.running) \(.succeeded)"' <<<"$st")
  samples=$((samples + 1))
  [ "$r" -gt "$maxr" ] && maxr=$r
  [ "$sc" = 32 ] && break
  if [ -z "$stopped" ] && [ "$sc" -ge 4 ]; then
    kill -STOP "${lp[0]}"; stopped=${lp[0]}
  fi
  if [ -z "$killed" ] && [ "$sc" -ge 9 ]; then
    kill -KILL "${lp[1]}"; killed=${lp[1]}
  fi
  if [ -n "$stopped" ] && [ "$stopped" != done ] && [ "$sc" -ge 20 ]; then
    d recover >/dev/null
    kill -CONT "$stopped"; stopped=done
  fi
  [ "$sc" -ge 9 ] && [ $((samples % 10)) = 0 ] && d recover >/dev/null
  echo "$r $sc $SECONDS" >>"$WORK/lq.samples"
done
[ -n "$stopped" ] && [ "$stopped" != done ] && kill -CONT "$stopped"
[ "$maxr" -le 3 ] && ok || bad "the sampler saw $maxr running jobs (max 3): $(tr '\n' ' ' <"$WORK/lq.samples")"
[ "$maxr" -ge 2 ] && [ "$samples" -ge 5 ] && [ "$stopped" = done ] && [ -n "$killed" ] && ok ||
  bad "the sampler saw at most $maxr running in $samples samples (stopped $stopped, killed $killed): $(tr "\n" " " <"$WORK/lq.samples")"
d recover >/dev/null
expect 0 "stats after the limited run" -- d job stats lq
[ "$(jget "$(out)" succeeded)" = 32 ] && [ "$(jget "$(out)" max_running)" = 3 ] && ok || bad "limited run: $(out)"
for pid in "${lp[@]}"; do [ "$pid" = "$killed" ] || stop_bg "$pid" 10 "$WORK/lq.log"; done
wait "$killed" 2>/dev/null
expect 0 "queue --max-running none" -- d job queue lq --max-running none
[ "$(jget "$(out)" max_running)" = null ] && ok || bad "none: $(out)"
expect 0 "audit after the limited run" -- d audit --settled

# ---- progress (docs/jobs.md, "Progress") -------------------------------------
# Fenced by the epoch in the same step: a stale attempt's report writes
# nothing; shown by show and list; never the state or the epoch; a plain
# update may not change it; bad input exits 2 before the store opens.
new_store job_progress
d job add pq t --id p1 >/dev/null
pe=$(jget "$(d job claim pq --lease-ms 60000)" epoch)
expect 0 "progress" -- d job progress p1 "$pe" '{"done":3,"of":10}'
[ "$(jget "$(out)" progress done)" = 3 ] && [ "$(jget "$(out)" state)" = running ] &&
  [ "$(jget "$(out)" epoch)" = "$pe" ] && ok || bad "progress: $(out)"
[ "$(jget "$(d job show p1)" progress of)" = 10 ] && ok || bad "show: $(d job show p1)"
[ "$(jget "$(d job list pq)" progress done)" = 3 ] && ok || bad "list: $(d job list pq)"
expect 3 "progress, a stale epoch" -- d job progress p1 $((pe + 1)) 7
grep -q 'STALE' "$WORK/err" && [ "$(jget "$(d job show p1)" progress done)" = 3 ] &&
  ok || bad "a stale progress wrote: $(d job show p1)"
expect 1 "progress, no such job" -- d job progress nope 1 7
expect 2 "progress, bad JSON" -- d job progress p1 "$pe" '{nope'
expect 2 "progress, epoch 0" -- d job progress p1 0 1
expect 2 "progress, too big" -- d job progress p1 "$pe" "\"$(printf '%05000d' 0)\""
expect 3 "progress by a plain update" -- d update jobs '{"_id":"p1"}' '{"$set":{"progress":99}}'
[ "$(jget "$(d job show p1)" progress done)" = 3 ] && ok || bad "plain progress: $(d job show p1)"
expect 0 "complete after progress" -- d job complete p1 "$pe"
expect 3 "progress after the attempt ended" -- d job progress p1 "$pe" 9
[ "$(jget "$(d job show p1)" progress done)" = 3 ] && ok || bad "late progress: $(d job show p1)"
# From an --exec handler, with the attempt's own environment.
d job add pq t --id p2 >/dev/null
expect 0 "progress from a handler" -- d job work pq --once --exec \
  '"$DOCTX" --store "$DOCTX_STORE" job progress "$DOCTX_JOB_ID" "$DOCTX_JOB_EPOCH" "{\"half\":true}" >/dev/null'
[ "$(jget "$(d job show p2)" progress half)" = true ] && [ "$(state p2)" = succeeded ] &&
  ok || bad "handler progress: $(d job show p2)"
expect 0 "audit after progress" -- d audit

# ---- cancel of a running job (docs/jobs.md, "Canceling a running job") ------
# The request ends nothing itself; the holder's next heartbeat ends the
# attempt canceled (J17): an --exec command whose group (a background
# child, one that ignores SIGTERM) is gone afterwards; a remote worker's
# heartbeat is refused (STATE), its complete ends it canceled; an effect
# after the request is refused; a dead holder's attempt is ended canceled
# by recovery; a plain update cannot take the request back.
new_store job_cancel_running
d job add cq t --id c1 >/dev/null
rm -f "$WORK/c1.pg" "$WORK/c1.bg" "$WORK/c1.ign" "$WORK/c1.term"
start_bg "$WORK/c1.log" d job work cq --once --lease-ms 900 --exec \
  "echo \$\$ >$WORK/c1.pg; trap 'echo term >$WORK/c1.term; exit 1' TERM
   sleep 30 & echo \$! >$WORK/c1.bg
   (trap '' TERM; exec sleep 30) & echo \$! >$WORK/c1.ign
   wait; wait"
WPID=$BG_PID
for _ in $(seq 100); do [ -s "$WORK/c1.ign" ] && break; nap 0.05; done
t0=$(now_ms)
expect 0 "cancel a running --exec job" -- d job cancel c1
[ "$(jget "$(out)" state)" = running ] && [ "$(jget "$(out)" cancel_requested)" != null ] &&
  ok || bad "the request ended the attempt, or was not recorded: $(out)"
bounded_wait "$WPID" 20 "$WORK/c1.log"
took=$(($(now_ms) - t0))
[ "$(state c1)" = canceled ] && ok || bad "c1 not canceled: $(d job show c1)"
grep -q '"canceled":1' "$WORK/c1.log" && ok || bad "worker summary: $(cat "$WORK/c1.log")"
[ "$took" -lt 3000 ] && ok || bad "the cancel took ${took} ms (a heartbeat is 300 ms)"
[ -s "$WORK/c1.term" ] && ok || bad "the command got no SIGTERM first"
gone=1
for p in "$(cat "$WORK/c1.pg")" "$(cat "$WORK/c1.bg")" "$(cat "$WORK/c1.ign")"; do
  for _ in $(seq 60); do alive "$p" || break; nap 0.05; done
  alive "$p" && gone=0
done
[ "$gone" = 1 ] && ok || bad "a process of the canceled command's group outlived it"
# A remote worker: heartbeat says STATE (exit 3), an effect is refused,
# complete ends the attempt canceled, never succeeded.
d insert cxc '{"_id":"x","n":0}' >/dev/null
d job add cq t --id c2 >/dev/null
ce=$(jget "$(d job claim cq --lease-ms 60000)" epoch)
expect 0 "cancel a claimed job" -- d job cancel c2
expect 0 "cancel it again: the same" -- d job cancel c2
[ "$(jget "$(out)" state)" = running ] && ok || bad "cancel again: $(out)"
expect 3 "heartbeat after the cancel" -- d job heartbeat c2 "$ce"
grep -q 'STATE.*canceled' "$WORK/err" && ok || bad "heartbeat: $(cat "$WORK/err")"
expect 3 "an effect after the cancel" -- d job effect c2 "$ce" k cxc '{"_id":"x"}' '{"$inc":{"n":1}}'
[ "$(jget "$(d find cxc '{"_id":"x"}')" n)" = 0 ] && ok || bad "the effect applied after the cancel"
expect 3 "a plain update takes the request back" -- d update jobs '{"_id":"c2"}' '{"$unset":{"cancel_requested":""}}'
expect 3 "a plain update completes it" -- d update jobs '{"_id":"c2"}' '{"$set":{"state":"succeeded","finished":1,"attempts":1}}'
expect 0 "complete after the cancel" -- d job complete c2 "$ce" '{"sent":true}'
[ "$(jget "$(out)" state)" = canceled ] && [ "$(jget "$(out)" result)" = null ] && ok || bad "complete: $(out)"
expect 0 "complete again: the same" -- d job complete c2 "$ce" '{"sent":true}'
[ "$(jget "$(out)" state)" = canceled ] && ok || bad "complete again: $(out)"
expect 3 "retry a canceled job" -- d job retry c2
# A dead holder: recovery's takeover ends it canceled, not retried.
d job add cq t --id c3 >/dev/null
d job claim cq --lease-ms 200 >/dev/null
expect 0 "cancel, its holder dead" -- d job cancel c3
nap 0.3
expect 0 "recover" -- d recover
grep -q '"taken_over_canceled":1' "$WORK/out" && [ "$(state c3)" = canceled ] &&
  ok || bad "recovery: $(out) $(d job show c3)"
d job add cq t --id c4 >/dev/null
d job complete c4 "$(jget "$(d job claim cq)" epoch)" >/dev/null
expect 3 "cancel a succeeded job" -- d job cancel c4
expect 0 "audit after the cancels" -- d audit
expect 0 "a succeeded job given a cancel request past the rules" -- d update jobs '{"_id":"c4"}' '{"$set":{"cancel_requested":1}}' --bypass-validation
expect 5 "the audit reports it" -- d audit
grep -q 'cancel_ignored' "$WORK/out" "$WORK/err" && ok || bad "audit: $(out) $(cat "$WORK/err")"

# ---- retention of dead and canceled jobs (docs/jobs.md, "Retention") --------
# --keep-dead-ms N purges dead and canceled jobs finished over N ms ago;
# younger ones, and every one without the option, are kept.
new_store job_keep_dead
d job add kq t --id kd1 --max-attempts 1 >/dev/null
d job fail kd1 "$(jget "$(d job claim kq)" epoch)" boom >/dev/null
d job add kq t --id kc1 --delay-ms 60000 >/dev/null
d job cancel kc1 >/dev/null
expect 0 "recover without --keep-dead-ms" -- d recover
[ "$(state kd1)" = dead ] && [ "$(state kc1)" = canceled ] && ok || bad "purged without the option: $(out)"
nap 0.3
d job add kq t --id kc2 >/dev/null
d job cancel kc2 >/dev/null
expect 0 "recover --keep-dead-ms 250" -- d recover --keep-dead-ms 250
grep -q '"purged_dead":1' "$WORK/out" && grep -q '"purged_canceled":1' "$WORK/out" && ok || bad "recover: $(out)"
[ "$(d count jobs '{"_id":{"$in":["kd1","kc1"]}}')" = 0 ] && ok || bad "the old dead and canceled jobs were kept"
[ "$(state kc2)" = canceled ] && ok || bad "the younger canceled job was purged"
expect 2 "--keep-dead-ms -1" -- d recover --keep-dead-ms -1
expect 0 "audit after the purge" -- d audit

# ---- a unique key's window after the job ends (docs/jobs.md, "Uniqueness") --
# --unique-for-ms N: an add within N ms of the holder's end is refused
# (prints the holder), one after it is admitted (the holder's key cleared
# by that add); recovery clears passed windows; a plain write cannot
# clear one early; N near INT64_MAX saturates.
new_store job_unique_window
# (a long window for "within", a short one for "after": load only delays)
d job add wq t --id w1 --unique-key k --unique-for-ms 60000 >/dev/null
expect 0 "end the holder" -- d job complete w1 "$(jget "$(d job claim wq)" epoch)"
[ "$(jget "$(out)" unique_live)" = wq/k ] && [ "$(jget "$(out)" unique_until)" != null ] && ok || bad "window: $(out)"
expect 0 "add within the window" -- d job add wq t --id w2 --unique-key k
[ "$(jget "$(out)" _id)" = w1 ] && [ "$(d count jobs '{"_id":"w2"}')" = 0 ] && ok || bad "admitted within the window: $(out)"
expect 3 "a plain write clears the window early" -- d update jobs '{"_id":"w1"}' '{"$unset":{"unique_live":"","unique_until":""}}'
d job add wq t --id v1 --unique-key v --unique-for-ms 300 >/dev/null
d job complete v1 "$(jget "$(d job claim wq)" epoch)" >/dev/null
nap 0.4
expect 0 "add after the window" -- d job add wq t --id w3 --unique-key v --unique-for-ms 300
[ "$(jget "$(out)" _id)" = w3 ] && [ "$(jget "$(d job show v1)" unique_live)" = null ] && ok || bad "after the window: $(out) $(d job show v1)"
expect 0 "cancel it: the window again" -- d job cancel w3
[ "$(jget "$(out)" unique_live)" = wq/v ] && ok || bad "canceled: $(out)"
nap 0.4
expect 0 "recovery clears a passed window" -- d recover
grep -q '"unique_expired":1' "$WORK/out" && [ "$(jget "$(d job show w3)" unique_live)" = null ] && ok || bad "recover: $(out)"
expect 0 "a window near INT64_MAX" -- d job add wq t --id w4 --unique-key m --unique-for-ms 9223372036854775807
d job cancel w4 >/dev/null
d job show w4 | grep -q '"unique_until":9223372036854775807[,}]' && ok || bad "saturated: $(d job show w4)"
expect 0 "add within a saturated window" -- d job add wq t --id w5 --unique-key m
[ "$(jget "$(out)" _id)" = w4 ] && ok || bad "saturated window: $(out)"
expect 2 "--unique-for-ms without a key" -- d job add wq t --unique-for-ms 5
expect 2 "--unique-for-ms 0" -- d job add wq t --unique-key z --unique-for-ms 0
[ "$(d count jobs '{"unique_key":"z"}')" = 0 ] && ok || bad "a bad add recorded"
expect 0 "audit with windows" -- d audit
finish
