#!/usr/bin/env bash
# contract.sh -- doctxd's HTTP contract (docs/server.md): every route of
# the service, every status code it sends but the drain's 503 (drain.sh)
# and the token file's refusals (tokens.sh), the security headers, the
# problem+json shape, paging cursors, a retried transfer answering the
# same, the metrics' labels, and bad input from tests/cli/bad_input.sh's
# table sent as HTTP: each refused request leaves the store exactly as it
# was (a `doctx dump` before and after).
#
# ONE doctxd serves the suite's store.  Run by ctest on SQLite ($DOCTX
# set; DOCTXD beside it), and by tests/redis/run-redis.sh's shell phase
# on a standalone server and the 3+3 cluster (the store from
# DTX_TEST_STORE_CMD).  Ends with "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
new_store httpcontract

# Every token's bucket: 150 deep, 1 a second; the suite's own
# requests (under 60 per token) stay well inside it.
serve_store "$WORK/doctxd.log" --rate 1 --burst 150 --threads 2

# ---- operations and security ----------------------------------------------
req GET /healthz ""
check healthz 200 '"status":"ok"'
hdr "healthz nosniff" "X-Content-Type-Options: nosniff"
hdr "healthz no-store" "Cache-Control: no-store"
hdr "healthz CSP" "Content-Security-Policy: default-src 'none'; frame-ancestors 'none'"
req GET /readyz ""
check readyz 200 '"status":"ready"'

refused "no token" 401 UNAUTHORIZED GET /v1/accounts ""
hdr "401 asks for a bearer token" "WWW-Authenticate: Bearer"
hdr "problem content type" "Content-Type: application/problem+json"
hdr "problem nosniff" "X-Content-Type-Options: nosniff"
refused "unknown token" 401 UNAUTHORIZED GET /v1/accounts "not-a-token-0123456789"
refused "read token writes" 403 FORBIDDEN POST /v1/accounts "$T_READ" '{"id":"x"}'
refused "write token runs admin" 403 FORBIDDEN POST /v1/admin/recover "$T_WRITE" '{}'
refused "read token scrapes metrics" 403 FORBIDDEN GET /metrics "$T_READ"
refused "metrics token reads" 403 FORBIDDEN GET /v1/accounts "$T_METRICS"
refused "unknown route" 404 NOROUTE GET /v1/nothing "$T_ADMIN"
refused "unknown method" 405 METHOD DELETE /v1/accounts "$T_ADMIN"
hdr "405 names the methods" "Allow: POST, GET"

# ---- accounts ------------------------------------------------------------------
req POST /v1/accounts "$T_WRITE" '{"id":"alice","balance":1000}'
check "account create" 201 '"_id":"alice"' '"balance":1000'
req POST /v1/accounts "$T_WRITE" '{"id":"bob"}'
check "account create (defaults)" 201 '"_id":"bob"' '"balance":0'
req POST /v1/accounts "$T_ADMIN" '{"id":"ext","min_balance":"none"}'
check "account create, no limit (admin implies write)" 201 '"min_balance":null'
refused "account exists" 409 DUPKEY POST /v1/accounts "$T_WRITE" '{"id":"alice"}'
refused "balance under limit" 400 INVAL POST /v1/accounts "$T_WRITE" '{"id":"c","balance":-1}'
refused "min_balance word" 400 INVAL POST /v1/accounts "$T_WRITE" '{"id":"c","min_balance":"low"}'
refused "account id missing" 400 INVAL POST /v1/accounts "$T_WRITE" '{"balance":5}'
req GET /v1/accounts/alice "$T_READ"
check "account get" 200 '"_id":"alice"'
refused "account missing" 404 NOACCOUNT GET /v1/accounts/nobody "$T_READ"
req GET "/v1/accounts?limit=2" "$T_READ"
check "account list page 1" 200 '"_id":"alice"' '"_id":"bob"' '"next":"'
nitems "account list page 1" accounts 2
next=$(jq -r .next "$WORK/rb")
req GET "/v1/accounts?limit=2&after=$next" "$T_READ"
check "account list page 2" 200 '"_id":"ext"' '"next":null'
refused "limit over 1000" 400 INVAL GET "/v1/accounts?limit=1001" "$T_READ"
refused "made-up cursor" 400 INVAL GET "/v1/accounts?after=bm9wZQ" "$T_READ"
# The list routes' cursor is a keyset one: base64url of "2.DIGEST.ID",
# the last entry shown (dtx_page_t.after), so following it costs the same
# at any depth.  A cursor made with the right digest but a key that is no
# id (over 128 bytes, a NUL inside) is refused before anything is read.
b64url() { base64 -w0 | tr '+/' '-_' | tr -d '='; }
fnv() { # the cursor's digest (dtx__srv_fnv) of $1
  local h=1469598103934665603 i c
  for ((i = 0; i < ${#1}; i++)); do
    printf -v c '%d' "'${1:i:1}"
    h=$(( (h ^ c) * 1099511628211 ))
  done
  printf '%016x' "$h"
}
req GET "/v1/accounts?limit=2" "$T_READ"
next=$(jq -r .next "$WORK/rb")
want_cur=$(printf '2.%s.bob' "$(fnv accounts)" | b64url)
if [ "$next" = "$want_cur" ]; then ok "keyset cursor names the last entry"
else bad "keyset cursor: $next, want $want_cur (2.$(fnv accounts).bob)"; fi
long=$(printf 'x%.0s' {1..129})
refused "keyset cursor over the id limit" 400 INVAL GET \
  "/v1/accounts?after=$(printf '2.%s.%s' "$(fnv accounts)" "$long" | b64url)" "$T_READ"
grep -q "page after" "$WORK/rb" && ok "over the limit: names page after" ||
  bad "over the limit: $(cat "$WORK/rb")"
refused "keyset cursor with a NUL" 400 INVAL GET \
  "/v1/accounts?after=$(printf '2.%s.a\0b' "$(fnv accounts)" | b64url)" "$T_READ"
refused "keyset cursor of another list" 400 INVAL GET \
  "/v1/transfers?after=$next" "$T_READ"
# ?start_after=ID: keyset paging from an id the caller names (--after).
req GET "/v1/accounts?start_after=alice&limit=1" "$T_READ"
check "account list start_after alice" 200 '"_id":"bob"' '"next":"'
nitems "account list start_after alice" accounts 1
refused "start_after over the id limit" 400 INVAL GET "/v1/accounts?start_after=$long" "$T_READ"
grep -q "page after" "$WORK/rb" && ok || bad "start_after over the limit: $(cat "$WORK/rb")"
refused "start_after with a NUL" 400 INVAL GET "/v1/accounts?start_after=a%00b" "$T_READ"
refused "start_after not an id" 400 INVAL GET "/v1/locks?start_after=a%2Fb" "$T_READ"
refused "start_after and after" 400 INVAL GET "/v1/accounts?start_after=alice&after=$next" "$T_READ"
refused "start_after an unknown transfer" 404 NOTFOUND GET "/v1/transfers?start_after=NOPE" "$T_READ"
refused "unknown query key" 400 INVAL GET "/v1/accounts?state=x" "$T_READ"

# ---- transfers -------------------------------------------------------------------
T1='{"id":"t1","from":"alice","to":"bob","amount":300}'
req POST /v1/transfers "$T_WRITE" "$T1"
check "transfer" 200 '"_id":"t1"' '"state":"succeeded"'
cp "$WORK/rb" "$WORK/t1.first"
req POST /v1/transfers "$T_WRITE" "$T1"
if [ "$CODE" = 200 ] && cmp -s "$WORK/rb" "$WORK/t1.first"; then ok; else
  bad "a retried transfer answers differently: $CODE $(rbody)"; fi
req GET /v1/accounts/alice "$T_READ"
check "a retry moved the money once" 200 '"balance":700'
refused "id reused, other amount" 409 CONFLICT POST /v1/transfers "$T_WRITE" \
  '{"id":"t1","from":"alice","to":"bob","amount":301}'
refused "missing payee" 404 NOACCOUNT POST /v1/transfers "$T_WRITE" \
  '{"from":"alice","to":"nobody","amount":1}'
refused "amount 0" 400 INVAL POST /v1/transfers "$T_WRITE" '{"from":"alice","to":"bob","amount":0}'
refused "from == to" 400 INVAL POST /v1/transfers "$T_WRITE" '{"from":"alice","to":"alice","amount":1}'
refused "amount a string" 400 INVAL POST /v1/transfers "$T_WRITE" '{"from":"alice","to":"bob","amount":"5"}'
refused "amount past int64" 400 BADJSON POST /v1/transfers "$T_WRITE" \
  '{"from":"alice","to":"bob","amount":9223372036854775808}'
refused "bad transfer id" 400 INVAL POST /v1/transfers "$T_WRITE" \
  '{"id":"a b","from":"alice","to":"bob","amount":1}'
req POST /v1/transfers "$T_WRITE" '{"id":"t2","from":"bob","to":"alice","amount":5000}'
check "declined transfer is an answer" 200 '"state":"failed"' 'insufficient'
req POST /v1/transfers "$T_WRITE" '{"id":"t3","from":"alice","to":"bob","amount":10,"async":true}'
check "async transfer" 200 '"state":"initiated"'
req POST /v1/transfers/t3/cancel "$T_WRITE"
check "cancel" 200 '"state":"failed"' '"reason":"canceled"'
refused "cancel after commit" 409 STATE POST /v1/transfers/t1/cancel "$T_WRITE"
refused "cancel unknown" 404 NOTFOUND POST /v1/transfers/zz/cancel "$T_WRITE"
req GET /v1/transfers/t1 "$T_READ"
check "transfer get" 200 '"_id":"t1"' '"amount":300'
refused "transfer get unknown" 404 NOTFOUND GET /v1/transfers/zz "$T_READ"
refused "NUL in a path parameter" 400 INVAL GET /v1/transfers/a%00b "$T_READ"
refused "bad escape in a path parameter" 400 INVAL GET /v1/transfers/a%zz "$T_READ"
req GET "/v1/transfers?state=failed&limit=1" "$T_READ"
check "transfer list by state, page 1" 200 '"_id":"t2"' '"next":"'
nitems "transfer list by state, page 1" transfers 1
next=$(jq -r .next "$WORK/rb")
req GET "/v1/transfers?state=failed&limit=1&after=$next" "$T_READ"
check "transfer list page 2" 200 '"_id":"t3"' '"next":null'
refused "a cursor of another list" 400 INVAL GET "/v1/transfers?state=succeeded&after=$next" "$T_READ"
refused "unknown state" 400 INVAL GET "/v1/transfers?state=bogus" "$T_READ"
req POST /v1/transfers/batch "$T_WRITE" \
  '{"transfers":[{"id":"b1","from":"alice","to":"bob","amount":1},{"id":"t1","from":"alice","to":"bob","amount":2},{"from":"alice","to":"nobody","amount":1}]}'
check "batch: one result per item" 200 '"_id":"b1"' '"code":"CONFLICT"' '"code":"NOACCOUNT"'
[ "$(jq '.results | length' "$WORK/rb")" = 3 ] && ok || bad "batch: $(rbody)"
refused "batch with a bad item runs none" 400 INVAL POST /v1/transfers/batch "$T_WRITE" \
  '{"transfers":[{"id":"b2","from":"alice","to":"bob","amount":1},{"from":"alice","to":"bob","amount":-1}]}'
refused "batch item's unknown field" 400 INVAL POST /v1/transfers/batch "$T_WRITE" \
  '{"transfers":[{"from":"alice","to":"bob","amount":1,"memo":"x"}]}'
refused "batch of none" 400 INVAL POST /v1/transfers/batch "$T_WRITE" '{"transfers":[]}'

# ---- documents -------------------------------------------------------------------
req POST /v1/c/items/insert "$T_WRITE" '{"docs":[{"_id":1,"n":1,"g":"a"},{"_id":2,"n":2,"g":"a"},{"_id":3,"n":3,"g":"b"}]}'
check insert 200 '"inserted":3' '"ids":[1,2,3]'
req POST /v1/c/items/find "$T_READ" '{"filter":{"n":{"$gte":1}},"sort":{"n":1},"limit":2,"projection":{"g":0}}'
check "find page 1" 200 '"docs":[{"_id":1,"n":1},{"_id":2,"n":2}]' '"next":"'
next=$(jq -r .next "$WORK/rb")
req POST /v1/c/items/find "$T_READ" "{\"filter\":{\"n\":{\"\$gte\":1}},\"sort\":{\"n\":1},\"limit\":2,\"projection\":{\"g\":0},\"after\":\"$next\"}"
check "find page 2" 200 '"docs":[{"_id":3,"n":3}]' '"next":null'
refused "find: cursor of another filter" 400 INVAL POST /v1/c/items/find "$T_READ" \
  "{\"filter\":{},\"limit\":2,\"after\":\"$next\"}"
req POST /v1/c/items/find "$T_READ"
check "find, no body" 200 '"_id":3'
req POST /v1/c/items/count "$T_READ" '{"filter":{"g":"a"}}'
check count 200 '{"count":2}'
req POST /v1/c/items/update "$T_WRITE" '{"filter":{"g":"a"},"update":{"$inc":{"n":10}},"many":true}'
check "update many" 200 '"matched":2' '"modified":2'
req POST /v1/c/items/update "$T_WRITE" '{"filter":{"_id":9},"update":{"$set":{"n":9}},"upsert":true}'
check "update upsert" 200 '"upserted":9'
req POST /v1/c/items/update "$T_WRITE" '{"filter":{"_id":1},"update":{"$set":{"t.$[x]":1}},"array_filters":[{"x":{"$gt":0}}]}'
check "update with array_filters (no array: matched, a type error)" 400 '"code":"'
req POST /v1/c/items/find-and-modify "$T_WRITE" '{"filter":{"_id":3},"update":{"$set":{"g":"c"}},"new":true}'
check find-and-modify 200 '"doc":{"_id":3,"n":3,"g":"c"}'
refused "find-and-modify: condition failed" 409 NOMATCH POST /v1/c/items/find-and-modify \
  "$T_WRITE" '{"filter":{"_id":3,"g":"zzz"},"update":{"$set":{"g":"d"}}}'
req POST /v1/c/items/indexes "$T_WRITE" '{"keys":{"g":1},"unique":true,"name":"g_u"}'
check "index create" 409 '"code":"DUPKEY"'
req POST /v1/c/items/indexes "$T_WRITE" '{"keys":{"n":1},"unique":true}'
check "index create" 200 '"name":"n_1"'
req GET /v1/c/items/indexes "$T_READ"
check "index list" 200 '"name":"n_1"'
refused "insert breaks a unique index" 409 DUPKEY POST /v1/c/items/insert "$T_WRITE" '{"docs":[{"n":3}]}'
refused "bad index keys" 400 BADINDEX POST /v1/c/items/indexes "$T_WRITE" '{"keys":{"n":5}}'
req POST /v1/c/items/bulk "$T_WRITE" '{"ops":[{"insertOne":{"document":{"_id":20,"n":20}}},{"updateOne":{"filter":{"_id":20},"update":{"$inc":{"n":1}}}},{"deleteOne":{"filter":{"_id":9}}},{"insertOne":{"document":{"_id":1}}}]}'
check "bulk: one result per op" 200 '"insertedId":20' '"modified":1' '"deleted":1' '"code":"DUPKEY"'
refused "bulk: unknown op runs none" 400 INVAL POST /v1/c/items/bulk "$T_WRITE" \
  '{"ops":[{"insertOne":{"document":{"_id":30}}},{"replaceOne":{}}]}'
refused "bulk: bad filter runs none" 400 BADQUERY POST /v1/c/items/bulk "$T_WRITE" \
  '{"ops":[{"insertOne":{"document":{"_id":30}}},{"deleteOne":{"filter":{"$bad":1}}}]}'
req POST /v1/c/items/aggregate "$T_READ" '{"pipeline":[{"$group":{"_id":"$g","total":{"$sum":"$n"}}},{"$sort":{"_id":1}}]}'
check aggregate 200 '{"_id":"a","total":23},{"_id":"c","total":3}' 
req POST /v1/c/items/delete "$T_WRITE" '{"filter":{"_id":20}}'
check delete 200 '{"deleted":1}'
req POST /v1/c/items/delete "$T_WRITE" '{"filter":{"_id":20}}'
check "delete of none" 200 '{"deleted":0}'
refused "delete without a filter" 400 BADQUERY POST /v1/c/items/delete "$T_WRITE" '{}'

# ---- bad input, as tests/cli/bad_input.sh's table sends it to the CLI --------
refused "malformed JSON" 400 BADJSON POST /v1/c/items/insert "$T_WRITE" '{"docs":[{"a":1}'
refused "trailing garbage" 400 BADJSON POST /v1/c/items/insert "$T_WRITE" '{"docs":[]} x'
refused "duplicate keys" 400 BADJSON POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{},"filter":{"_id":1},"update":{"$set":{"x":1}}}'
printf '{"docs":[{"a":"x\0y"}]}' >"$WORK/nul.json"
refused "NUL byte in the body" 400 BADJSON POST /v1/c/items/insert "$T_WRITE" "$(cat "$WORK/nul.json" | tr '\0' '\1')"
# (bash strings cannot hold NUL: the raw byte goes through curl's file)
d dump >"$WORK/before"
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' -H "Authorization: Bearer $T_WRITE" \
  --data-binary "@$WORK/nul.json" "$URL/v1/c/items/insert")
check "raw NUL byte" 400 '"code":"BADJSON"' 'NUL'
d dump >"$WORK/after"; cmp -s "$WORK/before" "$WORK/after" && ok || bad "NUL body changed the store"
deep=$(printf '%.0s[' $(seq 70))1$(printf '%.0s]' $(seq 70))
refused "nesting past 64" 400 INVAL POST /v1/c/items/insert "$T_WRITE" "{\"docs\":[{\"a\":$deep}]}"
refused "body not an object" 400 INVAL POST /v1/c/items/insert "$T_WRITE" '[{"a":1}]'
refused "unknown field, named" 400 INVAL POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{},"update":{"$set":{"x":1}},"mutli":true}'
grep -qF "'mutli'" "$WORK/rb" && ok || bad "unknown field not named: $(rbody)"
refused "field of the wrong type" 400 INVAL POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{},"update":{"$set":{"x":1}},"many":"yes"}'
refused "unknown query operator" 400 BADQUERY POST /v1/c/items/find "$T_READ" '{"filter":{"a":{"$foo":1}}}'
refused "unknown update operator" 400 BADUPDATE POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{},"update":{"$bogus":{"a":1}}}'
refused "replacement with many" 400 BADUPDATE POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{},"update":{"a":1},"many":true}'
refused "update of _id" 409 IMMUTABLE POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$set":{"_id":5}}}'
refused "\$inc past int64" 409 OVERFLOW POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$inc":{"n":9223372036854775807}}}'
refused "\$inc of a string" 409 TYPE POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{"_id":3},"update":{"$inc":{"g":1}}}'
refused "bad sort" 400 INVAL POST /v1/c/items/find "$T_READ" '{"sort":{"n":2}}'
refused "bad projection" 400 INVAL POST /v1/c/items/find "$T_READ" '{"projection":{"a":1,"b":0}}'
refused "bad pipeline stage" 400 BADQUERY POST /v1/c/items/aggregate "$T_READ" '{"pipeline":[{"$nope":{}}]}'
refused "reserved collection name" 400 INVAL POST /v1/c/_dtxcatalog/insert "$T_WRITE" '{"docs":[{"a":1}]}'
refused "array _id" 400 INVAL POST /v1/c/items/insert "$T_WRITE" '{"docs":[{"_id":[1]}]}'
refused "find limit 0" 400 INVAL POST /v1/c/items/find "$T_READ" '{"limit":0}'
refused "find skip and after" 400 INVAL POST /v1/c/items/find "$T_READ" '{"skip":1,"after":"x"}'
refused "malformed fence" 400 INVAL POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$set":{"x":1}},"fence":"nofence"}'
refused "fence token 0" 400 INVAL POST /v1/c/items/update "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$set":{"x":1}},"fence":"L:0"}'
refused "a body where none is taken" 400 INVAL GET /v1/accounts/alice "$T_READ" '{"x":1}'
refused "query where none is taken" 400 INVAL POST "/v1/c/items/count?x=1" "$T_READ" '{}'
head -c 1100000 /dev/zero | tr '\0' ' ' >"$WORK/big.json"
d dump >"$WORK/before"
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' -H "Authorization: Bearer $T_WRITE" \
  --data-binary "@$WORK/big.json" "$URL/v1/c/items/insert")
check "body over 1 MiB" 413 '"code":"TOOLARGE"'
d dump >"$WORK/after"; cmp -s "$WORK/before" "$WORK/after" && ok || bad "413 changed the store"

# ---- admin -----------------------------------------------------------------------
req POST /v1/admin/audit "$T_ADMIN" '{}'
check audit 200 '"clean":true' '"findings":[]'
req POST /v1/admin/recover "$T_ADMIN" '{}'
check recover 200 '"ok":true'
refused "recover: negative deadline" 400 INVAL POST /v1/admin/recover "$T_ADMIN" '{"deadline_ms":-1}'

# ---- rate limit: the flood token's bucket (150, 1 a second) empties ---------
# 400 requests on one connection: however slow a loaded machine makes
# them, the bucket refills by one a second, so 150 + the seconds taken
# pass and the rest are refused; then the last of five more is refused
# with its Retry-After (one refill between them at most).
urls=()
for _ in $(seq 400); do urls+=(-o /dev/null "$URL/v1/accounts/alice"); done
curl -s -w '%{http_code}\n' -H "Authorization: Bearer $T_FLOOD" \
  --max-time 120 "${urls[@]}" >"$WORK/flood" 2>/dev/null
n429=$(grep -c '^429$' "$WORK/flood")
n200=$(grep -c '^200$' "$WORK/flood")
if [ "$n429" -gt 0 ] && [ "$n200" -ge 150 ]; then ok; else
  bad "flood: $n200 x 200, $n429 x 429"; fi
urls=()
for _ in 1 2 3 4 5; do urls+=(-o "$WORK/rb" "$URL/v1/accounts/alice"); done
: >"$WORK/rh"
CODE=$(curl -s -D "$WORK/rh" -w '%{http_code}\n' -H "Authorization: Bearer $T_FLOOD" \
  --max-time 30 "${urls[@]}" 2>/dev/null | tail -1)
check "over its rate" 429 '"code":"RATELIMIT"'
hdr "429 says when" "Retry-After: "
req GET /v1/accounts/alice "$T_READ"
check "other tokens are not limited" 200 '"_id":"alice"'

# ---- metrics -----------------------------------------------------------------------
req GET /metrics "$T_METRICS"
check metrics 200 \
  'doctxd_http_requests_total{route="/v1/transfers",method="POST",code="200"}' \
  'doctxd_http_requests_total{route="/v1/accounts/{id}",method="GET",code="429"}' \
  'doctxd_http_request_duration_seconds_bucket{route="/v1/c/{coll}/find",le="0.0005"}' \
  'le="5"}' 'le="+Inf"}' 'doctxd_store_errors_total{code="DUPKEY"}' \
  'process_cpu_seconds_total ' 'process_resident_memory_bytes ' \
  'process_open_fds ' 'process_start_time_seconds '
hdr "metrics content type" "Content-Type: text/plain; version=0.0.4"
if grep -qE 'alice|"t1"|items|nobody' "$WORK/rb"; then
  bad "an id or a collection name is a metrics label: $(grep -E 'alice|t1|items' "$WORK/rb" | head -3)"
else ok; fi
req GET /metrics "$T_ADMIN"
check "admin scrapes metrics" 200 'doctxd_http_requests_total'

# The audit, once more after everything: money conserved.
req POST /v1/admin/audit "$T_ADMIN" '{"settled":true}'
check "audit at the end" 200 '"clean":true'

stop_bg "$DPID" 15 "$WORK/doctxd.log" && ok || bad "doctxd did not stop on SIGTERM"
finish
