#!/usr/bin/env bash
# jobs.sh -- doctxd's job-queue routes (docs/server.md, "Jobs";
# docs/jobs.md, "Remote workers"): every job route, every status it sends
# (400, 401, 403, 404, 409 -- STALE, STATE, CONFLICT), a remote worker's
# loop in curl (claim -> heartbeat -> complete, and fail), a repeated
# outcome answered again, a stale epoch after recovery's takeover refused
# with nothing changed, effects at most once, cursor paging, and the
# doctxd_jobs_total metrics.  Each refused request leaves the store
# exactly as it was (a `doctx dump` before and after).
#
# ONE doctxd serves the suite's store.  Run by ctest on SQLite ($DOCTX
# set; DOCTXD beside it), and by tests/redis/run-redis.sh's shell phase on
# a standalone server and the 3+3 cluster (the store from
# DTX_TEST_STORE_CMD).  Ends with "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
new_store httpjobs

serve_store "$WORK/doctxd.log" --threads 2

# ---- add, show, stats -----------------------------------------------------------
req POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","payload":{"to":"a"},"id":"j1","priority":5}'
check "add" 201 '"_id":"j1"' '"state":"ready"' '"priority":5'
req POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","payload":{"to":"a"},"id":"j1","priority":5}'
check "add again: the same job, 200" 200 '"_id":"j1"' '"state":"ready"'
refused "add: id reused with another payload" 409 CONFLICT \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","payload":{"to":"b"},"id":"j1"}'
refused "add: priority out of range" 400 INVAL \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","priority":500}'
refused "add: priority past int" 400 INVAL \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","priority":4294967297}'
refused "add: max_attempts 0" 400 INVAL \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","max_attempts":0}'
refused "add: no type" 400 INVAL \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"payload":1}'
refused "add: unknown field" 400 INVAL \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","queue":"x"}'
refused "add: bad queue name" 400 INVAL \
  POST /v1/queues/a%2Fb/jobs "$T_WRITE" '{"type":"send"}'
refused "add: a huge delay" 400 INVAL \
  POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","delay_ms":9223372036854775807}'
refused "add: no token" 401 UNAUTHORIZED \
  POST /v1/queues/mail/jobs "" '{"type":"send"}'
refused "add: a read token" 403 FORBIDDEN \
  POST /v1/queues/mail/jobs "$T_READ" '{"type":"send"}'
req POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","unique_key":"k1","id":"j2"}'
check "add with a unique key" 201 '"_id":"j2"'
req POST /v1/queues/mail/jobs "$T_WRITE" '{"type":"send","unique_key":"k1","id":"j3"}'
check "the key's holder answers" 200 '"_id":"j2"'

req GET /v1/jobs/j1 "$T_READ"
check "show" 200 '"_id":"j1"' '"payload":{"to":"a"}'
refused "show: unknown job" 404 NOTFOUND GET /v1/jobs/nope "$T_READ"
refused "show: no token" 401 UNAUTHORIZED GET /v1/jobs/j1 ""
req GET /v1/queues/mail/stats "$T_READ"
check "stats" 200 '"ready":2' '"total":2'
req GET /v1/queues/empty/stats "$T_READ"
check "stats of an unknown queue" 200 '"total":0'
refused "stats: a body" 400 INVAL GET /v1/queues/mail/stats "$T_READ" '{}'

# ---- list with a cursor -------------------------------------------------------------
for i in 1 2 3; do
  req POST /v1/queues/pages/jobs "$T_WRITE" "{\"type\":\"t\",\"id\":\"p$i\"}"
done
req GET '/v1/queues/pages/jobs?limit=2' "$T_READ"
check "list: first page" 200 '"_id":"p1"' '"_id":"p2"'
nitems "list: first page" jobs 2
next=$(jget 'j["next"]')
req GET "/v1/queues/pages/jobs?limit=2&after=$next" "$T_READ"
check "list: the next page" 200 '"_id":"p3"' '"next":null'
req GET "/v1/queues/pages/jobs?state=ready&limit=2&after=$next" "$T_READ"
check "list: a cursor of another state" 400 '"code":"INVAL"'
req GET '/v1/queues/pages/jobs?state=dead' "$T_READ"
check "list: by state" 200 '"jobs":[]'
refused "list: unknown state" 400 INVAL GET '/v1/queues/pages/jobs?state=bogus' "$T_READ"
refused "list: limit 0" 400 INVAL GET '/v1/queues/pages/jobs?limit=0' "$T_READ"
refused "list: unknown query key" 400 INVAL GET '/v1/queues/pages/jobs?queue=x' "$T_READ"

# ---- a remote worker: claim -> heartbeat -> complete ------------------------------
refused "claim: n 0" 400 INVAL POST /v1/queues/mail/claim "$T_WRITE" '{"n":0}'
refused "claim: n 257" 400 INVAL POST /v1/queues/mail/claim "$T_WRITE" '{"n":257}'
refused "claim: negative lease" 400 INVAL POST /v1/queues/mail/claim "$T_WRITE" '{"lease_ms":-1}'
refused "claim: bad owner" 400 INVAL POST /v1/queues/mail/claim "$T_WRITE" '{"owner":"a/b"}'
refused "claim: a read token" 403 FORBIDDEN POST /v1/queues/mail/claim "$T_READ" '{}'
req POST /v1/queues/mail/claim "$T_WRITE" '{"n":1,"lease_ms":20000,"owner":"py-1"}'
check "claim" 200 '"_id":"j1"' '"state":"running"' '"owner":"py-1"' '"epoch":1'
E=$(jget 'j["jobs"][0]["epoch"]')
req POST /v1/jobs/j1/heartbeat "$T_WRITE" "{\"epoch\":$E,\"lease_ms\":30000}"
check "heartbeat" 200 '"state":"running"' '"lease_until":'
refused "heartbeat: another epoch" 409 STALE POST /v1/jobs/j1/heartbeat "$T_WRITE" '{"epoch":7}'
refused "heartbeat: no epoch" 400 INVAL POST /v1/jobs/j1/heartbeat "$T_WRITE" '{}'
refused "heartbeat: epoch 0" 400 INVAL POST /v1/jobs/j1/heartbeat "$T_WRITE" '{"epoch":0}'
refused "heartbeat: unknown job" 404 NOTFOUND POST /v1/jobs/nope/heartbeat "$T_WRITE" '{"epoch":1}'
refused "complete: a string epoch" 400 INVAL POST /v1/jobs/j1/complete "$T_WRITE" '{"epoch":"1"}'
req POST /v1/jobs/j1/complete "$T_WRITE" "{\"epoch\":$E,\"result\":{\"sent\":true}}"
check "complete" 200 '"state":"succeeded"' '"result":{"sent":true}' '"attempts":1'
d dump >"$WORK/before" 2>&1
req POST /v1/jobs/j1/complete "$T_WRITE" "{\"epoch\":$E,\"result\":{\"sent\":true}}"
check "complete again: the same answer" 200 '"state":"succeeded"' '"attempts":1'
d dump >"$WORK/after" 2>&1
cmp -s "$WORK/before" "$WORK/after" && ok || bad "a repeated complete wrote"
refused "cancel: a succeeded job" 409 STATE POST /v1/jobs/j1/cancel "$T_WRITE"
refused "fail after complete" 409 STALE POST /v1/jobs/j1/fail "$T_WRITE" "{\"epoch\":$E,\"error\":\"x\"}"
req POST /v1/queues/mail/claim "$T_WRITE" '{"n":5}'
check "claim: the next one" 200 '"_id":"j2"'
E2=$(jget 'j["jobs"][0]["epoch"]')
req POST /v1/queues/mail/claim "$T_WRITE" '{"n":5}'
check "claim: nothing due" 200 '"jobs":[]'
req POST /v1/jobs/j2/fail "$T_WRITE" "{\"epoch\":$E2,\"error\":\"smtp down\"}"
check "fail: backoff" 200 '"state":"delayed"' '"last_error":"smtp down"' '"attempts":1'
req POST /v1/jobs/j2/fail "$T_WRITE" "{\"epoch\":$E2,\"error\":\"smtp down\"}"
check "fail again: the same answer" 200 '"state":"delayed"' '"attempts":1'
refused "fail again with another error" 409 STALE POST /v1/jobs/j2/fail "$T_WRITE" "{\"epoch\":$E2,\"error\":\"other\"}"
refused "fail: error not a string" 400 INVAL POST /v1/jobs/j2/fail "$T_WRITE" "{\"epoch\":$E2,\"error\":5}"

# ---- takeover: the old epoch is STALE and changes nothing ----------------------
req POST /v1/queues/slow/jobs "$T_WRITE" '{"type":"t","id":"s1","max_attempts":3}'
req POST /v1/queues/slow/claim "$T_WRITE" '{"lease_ms":100}'
check "claim with a short lease" 200 '"_id":"s1"'
ES=$(jget 'j["jobs"][0]["epoch"]')
nap 0.3
req POST /v1/admin/recover "$T_ADMIN" '{}'
check "recovery takes the lapsed job over" 200
req GET /v1/jobs/s1 "$T_READ"
check "taken over: a failed attempt" 200 '"state":"delayed"' '"attempts":1'
refused "complete after the takeover" 409 STALE POST /v1/jobs/s1/complete "$T_WRITE" "{\"epoch\":$ES,\"result\":1}"
refused "heartbeat after the takeover" 409 STALE POST /v1/jobs/s1/heartbeat "$T_WRITE" "{\"epoch\":$ES}"
refused "fail after the takeover" 409 STALE POST /v1/jobs/s1/fail "$T_WRITE" "{\"epoch\":$ES}"

# ---- retry and cancel by hand ------------------------------------------------------
req POST /v1/queues/once/jobs "$T_WRITE" '{"type":"t","id":"d1","max_attempts":1}'
req POST /v1/queues/once/claim "$T_WRITE" '{}'
ED=$(jget 'j["jobs"][0]["epoch"]')
req POST /v1/jobs/d1/fail "$T_WRITE" "{\"epoch\":$ED,\"error\":\"boom\"}"
check "fail: the last attempt" 200 '"state":"dead"'
refused "cancel: a dead job" 409 STATE POST /v1/jobs/d1/cancel "$T_WRITE"
req POST /v1/jobs/d1/retry "$T_WRITE"
check "retry a dead job" 200 '"state":"ready"' '"attempts":0'
refused "retry a ready job" 409 STATE POST /v1/jobs/d1/retry "$T_WRITE"
refused "retry: unknown job" 404 NOTFOUND POST /v1/jobs/nope/retry "$T_WRITE"
refused "retry: a body" 400 INVAL POST /v1/jobs/d1/retry "$T_WRITE" '{"x":1}'
req POST /v1/jobs/d1/cancel "$T_WRITE"
check "cancel" 200 '"state":"canceled"'
req POST /v1/jobs/d1/cancel "$T_WRITE"
check "cancel again: the same answer" 200 '"state":"canceled"'

# ---- effects: at most once per (job, key) ------------------------------------------
req POST /v1/c/wallets/insert "$T_WRITE" '{"docs":[{"_id":"w1","n":0}]}'
check "a target document" 200
req POST /v1/queues/fx/jobs "$T_WRITE" '{"type":"t","id":"f1"}'
req POST /v1/queues/fx/claim "$T_WRITE" '{}'
EF=$(jget 'j["jobs"][0]["epoch"]')
FX="{\"epoch\":$EF,\"key\":\"credit\",\"coll\":\"wallets\",\"filter\":{\"_id\":\"w1\"},\"update\":{\"\$inc\":{\"n\":1}}}"
req POST /v1/jobs/f1/effect "$T_WRITE" "$FX"
check "effect" 200 '"applied":true'
req POST /v1/jobs/f1/effect "$T_WRITE" "$FX"
check "effect again" 200 '"applied":false'
refused "effect: a stale epoch" 409 STALE POST /v1/jobs/f1/effect "$T_WRITE" \
  "{\"epoch\":99,\"key\":\"k2\",\"coll\":\"wallets\",\"filter\":{},\"update\":{\"\$inc\":{\"n\":1}}}"
refused "effect: no key" 400 INVAL POST /v1/jobs/f1/effect "$T_WRITE" \
  "{\"epoch\":$EF,\"coll\":\"wallets\",\"filter\":{},\"update\":{\"\$inc\":{\"n\":1}}}"
refused "effect: on a protocol collection" 400 INVAL POST /v1/jobs/f1/effect "$T_WRITE" \
  "{\"epoch\":$EF,\"key\":\"k3\",\"coll\":\"accounts\",\"filter\":{},\"update\":{\"\$inc\":{\"n\":1}}}"
refused "effect: a bad fence" 400 INVAL POST /v1/jobs/f1/effect "$T_WRITE" \
  "{\"epoch\":$EF,\"key\":\"k3\",\"coll\":\"wallets\",\"filter\":{},\"update\":{\"\$inc\":{\"n\":1}},\"fence\":\"nocolon\"}"
req POST /v1/c/wallets/find "$T_READ" '{"filter":{"_id":"w1"}}'
check "the effect applied once" 200 '"n":1'
req POST /v1/jobs/f1/complete "$T_WRITE" "{\"epoch\":$EF}"
check "complete without a result" 200 '"state":"succeeded"' '"result":null'

# ---- two claimers at once never get one job -----------------------------------
for i in $(seq 1 12); do
  req POST /v1/queues/race/jobs "$T_WRITE" "{\"type\":\"t\",\"id\":\"r$i\"}"
done
pids=()
for w in a b c; do
  curl -s --max-time 30 -H "Authorization: Bearer $T_WRITE" \
    -H 'Content-Type: application/json' --data-binary "{\"n\":4,\"owner\":\"$w\"}" \
    "$URL/v1/queues/race/claim" >"$WORK/claim.$w" &
  pids+=($!)
done
wait "${pids[@]}" # curl's own --max-time bounds each
ids=$(cat "$WORK"/claim.? | python3 -c '
import json, sys
for line in sys.stdin.read().replace("}{", "}\n{").splitlines():
    for j in json.loads(line)["jobs"]:
        print(j["_id"])')
n_all=$(echo "$ids" | grep -c .)
n_uniq=$(echo "$ids" | sort -u | grep -c .)
if [ "$n_all" = "$n_uniq" ] && [ "$n_all" -ge 1 ]; then ok; else
  bad "three claimers: $n_all jobs claimed, $n_uniq distinct"; fi

# ---- metrics, and the audit -------------------------------------------------------
req GET /metrics "$T_METRICS"
check metrics 200 'doctxd_jobs_total{queue="mail",event="added"} 2' \
  'doctxd_jobs_total{queue="mail",event="claimed"} 2' \
  'doctxd_jobs_total{queue="mail",event="completed"} 2' \
  'doctxd_jobs_total{queue="mail",event="failed"} 2' \
  'doctxd_jobs_total{queue="once",event="retried"} 1' \
  'doctxd_jobs_total{queue="once",event="canceled"} 2' \
  'doctxd_http_requests_total{route="/v1/jobs/{id}/complete",method="POST",code="409"}'
if grep -qE 'j1|"f1"|py-1' "$WORK/rb"; then
  bad "a job id or owner is a metrics label"; else ok; fi
# ---- cancel of a running job (docs/jobs.md, "Canceling a running job") -------------
req POST /v1/queues/cx/jobs "$T_WRITE" '{"type":"t","id":"cx1"}'
req POST /v1/queues/cx/claim "$T_WRITE" '{"lease_ms":20000}'
EC=$(jget 'j["jobs"][0]["epoch"]')
req POST /v1/jobs/cx1/cancel "$T_WRITE"
check "cancel a running job: requested" 200 '"state":"running"' '"cancel_requested":'
req POST /v1/jobs/cx1/cancel "$T_WRITE"
check "cancel again: the same" 200 '"state":"running"'
refused "heartbeat: canceled" 409 STATE POST /v1/jobs/cx1/heartbeat "$T_WRITE" "{\"epoch\":$EC}"
grep -qF '"job":{' "$WORK/rb" && grep -qF '"cancel_requested":' "$WORK/rb" && ok || bad "heartbeat: no job: $(rbody)"
refused "effect after the cancel" 409 STALE POST /v1/jobs/cx1/effect "$T_WRITE" "{\"epoch\":$EC,\"key\":\"k\",\"coll\":\"cxc\",\"filter\":{},\"update\":{\"\$set\":{\"a\":1}}}"
req POST /v1/jobs/cx1/complete "$T_WRITE" "{\"epoch\":$EC,\"result\":1}"
check "complete after the cancel: canceled" 200 '"state":"canceled"' '"result":null'
req POST /v1/jobs/cx1/complete "$T_WRITE" "{\"epoch\":$EC,\"result\":1}"
check "complete again: the same" 200 '"state":"canceled"'

# ---- retention of dead and canceled jobs (docs/jobs.md, "Retention") --------------
refused "recover: keep_dead_ms -1" 400 INVAL POST /v1/admin/recover "$T_ADMIN" '{"keep_dead_ms":-1}'
req POST /v1/admin/recover "$T_ADMIN" '{"keep_dead_ms":1}'
check "recover: dead and canceled jobs purged" 200 '"purged_canceled":'
req GET /v1/jobs/cx1 "$T_READ"
check "the canceled job is gone" 404

# ---- a unique key's window (docs/jobs.md, "Uniqueness") ---------------------------
req POST /v1/queues/uw/jobs "$T_WRITE" '{"type":"t","id":"uw1","unique_key":"k","unique_for_ms":60000}'
check "add with a unique window" 201 '"unique_for_ms":60000'
refused "unique_for_ms -1" 400 INVAL POST /v1/queues/uw/jobs "$T_WRITE" '{"type":"t","unique_key":"k2","unique_for_ms":-1}'
refused "unique_for_ms without a key" 400 INVAL POST /v1/queues/uw/jobs "$T_WRITE" '{"type":"t","unique_for_ms":5}'
req POST /v1/jobs/uw1/cancel "$T_WRITE"
check "canceled: the key kept" 200 '"unique_live":"uw/k"' '"unique_until":'
req POST /v1/queues/uw/jobs "$T_WRITE" '{"type":"t","id":"uw2","unique_key":"k"}'
check "add within the window: the holder" 200 '"_id":"uw1"'

# ---- progress (docs/jobs.md, "Progress") -------------------------------------------
req POST /v1/queues/prog/jobs "$T_WRITE" '{"type":"t","id":"pg1"}'
req POST /v1/queues/prog/claim "$T_WRITE" '{"lease_ms":20000}'
EP=$(jget 'j["jobs"][0]["epoch"]')
req POST /v1/jobs/pg1/progress "$T_WRITE" "{\"epoch\":$EP,\"value\":{\"pct\":40}}"
check "progress" 200 '"state":"running"' '"progress":{"pct":40}' "\"epoch\":$EP"
req GET /v1/jobs/pg1 "$T_READ"
check "progress: shown" 200 '"progress":{"pct":40}'
req GET /v1/queues/prog/jobs "$T_READ"
check "progress: listed" 200 '"progress":{"pct":40}'
refused "progress: another epoch" 409 STALE POST /v1/jobs/pg1/progress "$T_WRITE" "{\"epoch\":$((EP + 1)),\"value\":1}"
refused "progress: no value" 400 INVAL POST /v1/jobs/pg1/progress "$T_WRITE" "{\"epoch\":$EP}"
refused "progress: no epoch" 400 INVAL POST /v1/jobs/pg1/progress "$T_WRITE" '{"value":1}'
refused "progress: too big" 400 INVAL POST /v1/jobs/pg1/progress "$T_WRITE" "{\"epoch\":$EP,\"value\":\"$(printf '%05000d' 0)\"}"
refused "progress: a read token" 403 FORBIDDEN POST /v1/jobs/pg1/progress "$T_READ" "{\"epoch\":$EP,\"value\":1}"
refused "progress: unknown job" 404 NOTFOUND POST /v1/jobs/nope/progress "$T_WRITE" '{"epoch":1,"value":1}'
req POST /v1/jobs/pg1/complete "$T_WRITE" "{\"epoch\":$EP}"
refused "progress: the attempt ended" 409 STALE POST /v1/jobs/pg1/progress "$T_WRITE" "{\"epoch\":$EP,\"value\":2}"

req POST /v1/admin/audit "$T_ADMIN" '{}'
check "audit at the end" 200 '"clean":true'

stop_bg "$DPID" 15 "$WORK/doctxd.log" && ok || bad "doctxd did not stop on SIGTERM"
finish
