#!/usr/bin/env bash
# patterns.sh -- doctxd's lock, ledger, sync, order and version routes
# (docs/server.md, "Locks, ledger, sync, orders and versions") and the
# domain metrics: every route, its statuses (400, 401, 403, 404, 409),
# refused requests leaving the store exactly as it was (a `doctx dump`
# before and after), a lock acquire/renew/release cycle, a stale fencing
# token refused with 409 FENCED on a document write, the admin's
# force-release (and its refusal when the token moved), a retried ledger
# post answering the same, /metrics' new families (names, types, no
# id as a label), and the transaction routes (POST /v1/txn and its
# outcome: bad input, a require, a fence, a conflict, a crashed writer,
# a lost commit reply on a second doctxd).  The audit at the end is clean.
#
# ONE doctxd serves the suite's store.  Run by ctest on SQLite ($DOCTX
# set; DOCTXD beside it), and by tests/redis/run-redis.sh's shell phase
# on a standalone server and the 3+3 cluster.  Ends with "N passed, M
# failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib/server.sh"
new_store httppatterns

serve_store "$WORK/doctxd.log" --rate 0 --threads 2
# no LABEL CODE ERRNAME METHOD PATH TOKEN [BODY]: answered CODE with
# problem+json naming ERRNAME (the store is compared only by `refused`,
# a few per area, to keep the suite's processes few).
no() {
  local label=$1 want=$2 name=$3
  shift 3
  req "$@"
  check "$label" "$want" "\"code\":\"$name\"" '"type":' '"detail":'
}
jf() { jq -r "$1" "$WORK/rb"; } # a field of the last answer

# Each area has refusals checked against a dump before and after
# (`refused`); the others check the answer only (`no`).

# ---- locks ---------------------------------------------------------------------
req POST /v1/locks/L/acquire "$T_WRITE" '{"ttl_ms":60000,"owner":"w1"}'
check "lock acquire" 200 '"name":"L"' '"owner":"w1"' '"token":1' '"expires":'
refused "lock held" 409 NOMATCH POST /v1/locks/L/acquire "$T_WRITE" '{"owner":"w2"}'
grep -qF 'held by w1' "$WORK/rb" && ok || bad "held: the holder not named: $(rbody)"
no "lock: no token" 401 UNAUTHORIZED POST /v1/locks/L2/acquire "" '{}'
refused "lock: read token acquires" 403 FORBIDDEN POST /v1/locks/L2/acquire "$T_READ" '{}'
no "lock: bad name" 400 INVAL POST /v1/locks/a%20b/acquire "$T_WRITE" '{}'
no "lock: ttl 0 is the default, negative refused" 400 INVAL POST /v1/locks/L2/acquire \
  "$T_WRITE" '{"ttl_ms":-5}'
no "lock: unknown field" 400 INVAL POST /v1/locks/L2/acquire "$T_WRITE" '{"ttl":5}'
req POST /v1/locks/L2/acquire "$T_WRITE" '{}'
check "second lock" 200 '"name":"L2"'
req GET /v1/locks/L "$T_READ"
check "lock show" 200 '"token":1' '"held":true'
no "lock show unknown" 404 NOTFOUND GET /v1/locks/nolock "$T_READ"
req GET "/v1/locks?limit=1" "$T_READ"
check "lock list page 1" 200 '"name":"L"' '"next":"'
nitems "lock list page 1" locks 1
next=$(jf .next)
req GET "/v1/locks?limit=1&after=$next" "$T_READ"
check "lock list page 2" 200 '"name":"L2"' '"next":null'
no "lock list: made-up cursor" 400 INVAL GET "/v1/locks?after=bm9wZQ" "$T_READ"
req POST /v1/locks/L/renew "$T_WRITE" '{"token":1,"ttl_ms":90000}'
check "lock renew" 200 '"token":1' '"held":true'
no "renew: not the current token" 409 NOMATCH POST /v1/locks/L/renew "$T_WRITE" '{"token":7}'
no "renew: token missing" 400 INVAL POST /v1/locks/L/renew "$T_WRITE" '{}'
no "renew: token a string" 400 INVAL POST /v1/locks/L/renew "$T_WRITE" '{"token":"1"}'
no "renew: unknown lock" 404 NOTFOUND POST /v1/locks/nolock/renew "$T_WRITE" '{"token":1}'

# Fenced writes: holder 1 writes, releases; holder 2 writes; holder 1's
# stale token is refused by the document itself.
req POST /v1/c/res/insert "$T_WRITE" '{"docs":[{"_id":1,"v":0}]}'
check "fenced resource" 200 '"inserted":1'
req POST /v1/c/res/update "$T_WRITE" '{"filter":{"_id":1},"update":{"$set":{"v":1}},"fence":"L:1"}'
check "write fenced by token 1" 200 '"modified":1'
req POST /v1/locks/L/release "$T_WRITE" '{"token":1}'
check "lock release" 200 '"held":false'
no "release again" 409 NOMATCH POST /v1/locks/L/release "$T_WRITE" '{"token":1}'
req POST /v1/locks/L/acquire "$T_WRITE" '{"owner":"w2"}'
check "lock acquired again: a greater token" 200 '"token":2' '"owner":"w2"'
req POST /v1/c/res/update "$T_WRITE" '{"filter":{"_id":1},"update":{"$set":{"v":2}},"fence":"L:2"}'
check "write fenced by token 2" 200 '"modified":1'
refused "stale token 1 writes" 409 FENCED POST /v1/c/res/update "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$set":{"v":99}},"fence":"L:1"}'
no "stale token 1 find-and-modify" 409 FENCED POST /v1/c/res/find-and-modify "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$set":{"v":99}},"fence":"L:1"}'
refused "stale token 1 deletes" 409 FENCED POST /v1/c/res/delete "$T_WRITE" \
  '{"filter":{"_id":1},"fence":"L:1"}'

# Force-release (admin): the current token, or the one the page showed.
refused "force-release: write token" 403 FORBIDDEN POST /v1/admin/locks/L/release "$T_WRITE" '{}'
refused "force-release: token moved" 409 NOMATCH POST /v1/admin/locks/L/release "$T_ADMIN" '{"token":1}'
req POST /v1/admin/locks/L/release "$T_ADMIN" '{}'
check "force-release" 200 '"name":"L"' '"token":2' '"held":false'
no "force-release of a free lock" 409 NOMATCH POST /v1/admin/locks/L/release "$T_ADMIN" '{}'
no "force-release: unknown lock" 404 NOTFOUND POST /v1/admin/locks/nolock/release "$T_ADMIN"
req POST /v1/locks/L/acquire "$T_WRITE" '{"owner":"w3","ttl_ms":60000}'
check "acquired after a force-release" 200 '"token":3'
req POST /v1/c/res/update "$T_WRITE" '{"filter":{"_id":1},"update":{"$set":{"v":3}},"fence":"L:3"}'
check "the new holder writes with token 3" 200 '"modified":1'
no "the forced-out holder's token 2 is stale" 409 FENCED POST /v1/c/res/update "$T_WRITE" \
  '{"filter":{"_id":1},"update":{"$set":{"v":99}},"fence":"L:2"}'

# Semaphores: "max" on acquire, each holder its own token and fence name.
for o in s1 s2; do
  req POST /v1/locks/S/acquire "$T_WRITE" "{\"owner\":\"$o\",\"max\":2,\"ttl_ms\":60000}"
  check "semaphore acquire by $o" 200 '"max":2' "\"owner\":\"$o\"" '"slot":' '"fence":"S:'
done
refused "semaphore: all holders taken" 409 NOMATCH POST /v1/locks/S/acquire "$T_WRITE" '{"max":2}'
refused "semaphore: another max" 400 INVAL POST /v1/locks/S/acquire "$T_WRITE" '{"max":3}'
no "semaphore: max too large" 400 INVAL POST /v1/locks/S2/acquire "$T_WRITE" '{"max":101}'
no "semaphore: max a string" 400 INVAL POST /v1/locks/S2/acquire "$T_WRITE" '{"max":"2"}'
req GET /v1/locks/S "$T_READ"
check "semaphore show" 200 '"max":2' '"holders":[{' '"fence":"S:1"'
req POST /v1/locks/S/release "$T_WRITE" '{"token":2}'
check "semaphore release of one holder" 200 '"slot":1' '"held":false'
# Leader election: campaign (waits until it leads), leader.
req POST /v1/locks/E/campaign "$T_WRITE" '{"owner":"e1","ttl_ms":60000}'
check "campaign" 200 '"name":"E"' '"owner":"e1"' '"token":1'
req GET /v1/locks/E/leader "$T_READ"
check "leader" 200 '"leader":"e1"' '"term":1'
# (a waiter that gives up moves the ticket counter: `no`, not `refused`)
no "campaign while led, bounded" 409 NOMATCH POST /v1/locks/E/campaign "$T_WRITE" '{"owner":"e2","wait_ms":50}'
no "campaign: unknown field" 400 INVAL POST /v1/locks/E/campaign "$T_WRITE" '{"max":2}'
no "campaign: read token" 403 FORBIDDEN POST /v1/locks/E/campaign "$T_READ" '{}'
no "leader of a semaphore" 400 INVAL GET /v1/locks/S/leader "$T_READ"
no "leader: no campaign yet" 404 NOTFOUND GET /v1/locks/nolock/leader "$T_READ"

# ---- ledger ----------------------------------------------------------------------
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"ext","min_balance":"none"}'
check "ledger account, no limit" 201 '"_id":"ext"' '"min_balance":null'
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"cash"}'
check "ledger account" 201 '"_id":"cash"' '"min_balance":0'
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"fees"}'
check "ledger account 3" 201 '"_id":"fees"'
no "ledger account exists" 409 DUPKEY POST /v1/ledger/accounts "$T_WRITE" '{"id":"cash"}'
no "ledger account: bad id" 400 INVAL POST /v1/ledger/accounts "$T_WRITE" '{"id":"a b"}'
no "ledger account: id missing" 400 INVAL POST /v1/ledger/accounts "$T_WRITE" '{}'
refused "ledger account: read token" 403 FORBIDDEN POST /v1/ledger/accounts "$T_READ" '{"id":"z"}'
E1='{"id":"e1","legs":[{"account":"ext","value":-1000},{"account":"cash","value":1000}]}'
req POST /v1/ledger/entries "$T_WRITE" "$E1"
check "ledger post" 200 '"_id":"e1"' '"state":"posted"'
cp "$WORK/rb" "$WORK/e1.first"
req POST /v1/ledger/entries "$T_WRITE" "$E1"
if [ "$CODE" = 200 ] && cmp -s "$WORK/rb" "$WORK/e1.first"; then ok; else
  bad "a retried ledger post answers differently: $CODE $(rbody)"; fi
req GET /v1/ledger/accounts/cash/balance "$T_READ"
check "a retry posted once" 200 '"account":"cash"' '"balance":1000' '"available":1000'
refused "ledger id reused, other legs" 409 CONFLICT POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"e1","legs":[{"account":"ext","value":-1},{"account":"cash","value":1}]}'
refused "ledger: funds" 409 INSUFFICIENT POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"cash","value":-5000},{"account":"fees","value":5000}]}'
refused "ledger: unknown account" 404 NOACCOUNT POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"cash","value":-5},{"account":"nobody","value":5}]}'
no "ledger: legs do not sum to zero" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"cash","value":-5},{"account":"fees","value":4}]}'
no "ledger: one leg" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"cash","value":-5}]}'
no "ledger: a leg's value past int64" 400 BADJSON POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"cash","value":-9223372036854775809},{"account":"fees","value":5}]}'
no "ledger: timeout without pending" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"cash","value":-5},{"account":"fees","value":5}],"timeout_ms":5}'
req POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"p1","pending":true,"legs":[{"account":"cash","value":-100},{"account":"fees","value":100}]}'
check "ledger pending" 200 '"_id":"p1"' '"state":"pending"'
req GET /v1/ledger/accounts/cash/balance "$T_READ"
check "pending debit held" 200 '"balance":1000' '"available":900' '"pending_debits":100'
req POST /v1/ledger/entries/p1/post "$T_WRITE"
check "ledger post pending" 200 '"_id":"p1"' '"state":"posted"'
refused "void a posted entry" 409 STATE POST /v1/ledger/entries/p1/void "$T_WRITE"
req POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"p2","pending":true,"timeout_ms":600000,"legs":[{"account":"cash","value":-50},{"account":"fees","value":50}]}'
check "ledger pending 2" 200 '"state":"pending"'
req POST /v1/ledger/entries/p2/void "$T_WRITE"
check "ledger void" 200 '"_id":"p2"' '"state":"voided"'
no "post a voided entry" 409 STATE POST /v1/ledger/entries/p2/post "$T_WRITE"
no "void unknown" 404 NOTFOUND POST /v1/ledger/entries/nope/void "$T_WRITE"
no "void: a body where none is taken" 400 INVAL POST /v1/ledger/entries/p2/void "$T_WRITE" '{"x":1}'
req POST /v1/ledger/entries/p1/reverse "$T_WRITE" '{"id":"r1"}'
check "ledger reverse" 200 '"_id":"r1"' '"reverses":"p1"'
no "reverse again under another id" 409 CONFLICT POST /v1/ledger/entries/p1/reverse \
  "$T_WRITE" '{"id":"r2"}'
no "reverse: bad new id" 400 INVAL POST /v1/ledger/entries/p1/reverse "$T_WRITE" '{"id":"r 2"}'
req GET /v1/ledger/entries/e1 "$T_READ"
check "ledger show" 200 '"_id":"e1"' '"changes":'
no "ledger show unknown" 404 NOTFOUND GET /v1/ledger/entries/nope "$T_READ"
no "balance of unknown account" 404 NOACCOUNT GET /v1/ledger/accounts/nobody/balance "$T_READ"
req GET "/v1/ledger/accounts/cash/balance?at_seq=1" "$T_READ"
check "balance at seq 1" 200 '"balance":1000' '"seq":1'
no "balance: at_seq not a number" 400 INVAL GET "/v1/ledger/accounts/cash/balance?at_seq=x" "$T_READ"
req GET "/v1/ledger/accounts/cash/statement?limit=2" "$T_READ"
check "statement page 1" 200 '"entry":"e1"' '"entry":"p1"' '"next":"'
nitems "statement page 1" legs 2
next=$(jf .next)
req GET "/v1/ledger/accounts/cash/statement?limit=2&after=$next" "$T_READ"
check "statement page 2" 200 '"entry":"r1"' '"next":null'
no "statement: after and from_seq" 400 INVAL GET \
  "/v1/ledger/accounts/cash/statement?after=$next&from_seq=1" "$T_READ"
no "statement: a cursor of another account" 400 INVAL GET \
  "/v1/ledger/accounts/fees/statement?after=$next" "$T_READ"
req GET "/v1/ledger/entries?account=fees&limit=1" "$T_READ"
check "ledger list of an account" 200 '"entries":[' '"next":"'
nitems "ledger list of an account" entries 1
req POST /v1/ledger/entries/batch "$T_WRITE" \
  '{"entries":[{"id":"b1","legs":[{"account":"ext","value":-7},{"account":"cash","value":7}]},{"id":"b2","legs":[{"account":"fees","value":-99999},{"account":"cash","value":99999}]},{"id":"e1","legs":[{"account":"ext","value":-1000},{"account":"cash","value":1000}]}]}'
check "ledger batch: one result per entry" 200 '"_id":"b1"' '"code":"INSUFFICIENT"' '"_id":"e1"'
[ "$(jq '.results | length' "$WORK/rb")" = 3 ] && ok || bad "ledger batch: $(rbody)"
refused "ledger batch with a bad entry posts none" 400 INVAL POST /v1/ledger/entries/batch "$T_WRITE" \
  '{"entries":[{"id":"b3","legs":[{"account":"ext","value":-7},{"account":"cash","value":7}]},{"legs":[{"account":"cash","value":1}]}]}'
no "ledger batch: unknown field" 400 INVAL POST /v1/ledger/entries/batch "$T_WRITE" \
  '{"entries":[{"legs":[],"memo":"x"}]}'
no "ledger batch of none" 400 INVAL POST /v1/ledger/entries/batch "$T_WRITE" '{"entries":[]}'
req POST /v1/ledger/accounts/fees/limit "$T_WRITE" '{"min_balance":"none"}'
check "ledger limit" 200 '"_id":"fees"' '"min_balance":null'
no "ledger limit: unknown account" 404 NOACCOUNT POST /v1/ledger/accounts/nobody/limit \
  "$T_WRITE" '{"min_balance":0}'
# The upper limit (docs/ledger.md, "The upper limit"): max_balance at
# creation and on the limit route (the floor kept); a credit over it is
# 409 INSUFFICIENT naming the account; a max below the floor 400.
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"capped","max_balance":10}'
check "ledger account with a max" 201 '"_id":"capped"' '"max_balance":10'
no "ledger account: max below min" 400 INVAL POST /v1/ledger/accounts "$T_WRITE" \
  '{"id":"capped2","min_balance":5,"max_balance":1}'
no "ledger account: max not a number" 400 INVAL POST /v1/ledger/accounts "$T_WRITE" \
  '{"id":"capped2","max_balance":"lots"}'
refused "ledger: over the max" 409 INSUFFICIENT POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"ext","value":-11},{"account":"capped","value":11}]}'
case "$(jf .detail)" in *"'capped'"*"max_balance 10"*) ok ;; *) bad "over the max: $(jf .detail)" ;; esac
req POST /v1/ledger/accounts/capped/limit "$T_WRITE" '{"max_balance":20}'
check "ledger limit: the max" 200 '"max_balance":20' '"min_balance":0'
req POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"ext","value":-11},{"account":"capped","value":11}]}'
check "ledger: a credit under the raised max" 200 '"max":20'
no "ledger limit: min above the max" 400 INVAL POST /v1/ledger/accounts/capped/limit \
  "$T_WRITE" '{"min_balance":30}'
no "ledger limit: no field" 400 INVAL POST /v1/ledger/accounts/capped/limit "$T_WRITE" '{}'
req POST /v1/ledger/accounts/capped/limit "$T_WRITE" '{"min_balance":1,"max_balance":"none"}'
check "ledger limit: both" 200 '"max_balance":null' '"min_balance":1'
# Balancing legs (docs/ledger.md, "Balancing legs"): "-max[=CAP]" and
# "max" as a leg's value; the entry has the amounts that moved.
req POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"capped","value":"-max"},{"account":"fees","value":"max"}]}'
check "ledger: a balancing pair" 200 '{"account":"capped","value":-10,' '{"account":"fees","value":10,'
refused "ledger: nothing to move" 409 INSUFFICIENT POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"capped","value":"-max=3"},{"account":"fees","value":"max"}]}'
no "ledger: a bad balancing value" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"capped","value":"-max=x"},{"account":"fees","value":"max"}]}'
no "ledger: a -max leg alone" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"capped","value":"-max"},{"account":"fees","value":5}]}'
# A partial post of a hold (docs/ledger.md, "Partial post of a hold").
req POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"pp","pending":true,"legs":[{"account":"cash","value":-30},{"account":"fees","value":30}]}'
check "ledger: a hold to post partly" 200 '"state":"pending"'
no "ledger: partial over the hold" 400 INVAL POST /v1/ledger/entries/pp/post "$T_WRITE" \
  '{"amounts":[{"account":"cash","value":-31},{"account":"fees","value":31}]}'
no "ledger: a bad amount" 400 INVAL POST /v1/ledger/entries/pp/post "$T_WRITE" \
  '{"amounts":[{"account":"cash","value":"x"}]}'
req POST /v1/ledger/entries/pp/post "$T_WRITE" \
  '{"amounts":[{"account":"cash","value":-12},{"account":"fees","value":12}],"post_id":"q1"}'
check "ledger: a partial post" 200 '"amounts":[-12,12]' '"post_id":"q1"' '"state":"posted"'
req POST /v1/ledger/entries/pp/post "$T_WRITE" \
  '{"amounts":[{"account":"cash","value":-12},{"account":"fees","value":12}],"post_id":"q1"}'
check "ledger: the partial post retried" 200 '"amounts":[-12,12]'
refused "ledger: another post id" 409 CONFLICT POST /v1/ledger/entries/pp/post "$T_WRITE" \
  '{"amounts":[{"account":"cash","value":-12},{"account":"fees","value":12}],"post_id":"q2"}'
# Closing: only at 0 (409 STATE naming the balance, nothing written);
# closed, the account takes no leg (409 STATE) and its balance says when.
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"shut"}'
check "ledger account to close" 201 '"_id":"shut"'
req POST /v1/ledger/entries "$T_WRITE" '{"legs":[{"account":"ext","value":-3},{"account":"shut","value":3}]}'
check "ledger fund the account to close" 200 '"state":"posted"'
refused "ledger close with a balance" 409 STATE POST /v1/ledger/accounts/shut/close "$T_WRITE"
req POST /v1/ledger/entries "$T_WRITE" '{"legs":[{"account":"shut","value":-3},{"account":"ext","value":3}]}'
check "ledger empty the account to close" 200 '"state":"posted"'
req POST /v1/ledger/accounts/shut/close "$T_WRITE" '{"deadline_ms":5000}'
check "ledger close" 200 '"state":"closed"' '"account":"shut","value":0,"seqId":3'
refused "ledger: a leg on a closed account" 409 STATE POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"ext","value":-1},{"account":"shut","value":1}]}'
req GET /v1/ledger/accounts/shut/balance "$T_READ"
check "ledger balance of a closed account" 200 '"balance":0' '"closed_at":'
no "ledger close: unknown account" 404 NOACCOUNT POST /v1/ledger/accounts/nobody/close "$T_WRITE"
no "ledger close: unknown field" 400 INVAL POST /v1/ledger/accounts/shut/close "$T_WRITE" '{"x":1}'
refused "ledger close: read token" 403 FORBIDDEN POST /v1/ledger/accounts/shut/close "$T_READ"
# Assets: fixed at creation, named by the balance; two in one entry: 400.
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"usd1","asset":"USD/2","min_balance":"none"}'
check "ledger account in USD/2" 201 '"asset":"USD/2"'
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"usd2","asset":"USD/2"}'
check "ledger account 2 in USD/2" 201 '"asset":"USD/2"'
no "ledger account: bad asset" 400 INVAL POST /v1/ledger/accounts "$T_WRITE" '{"id":"x9","asset":"usd"}'
req POST /v1/ledger/entries "$T_WRITE" '{"legs":[{"account":"usd1","value":-4},{"account":"usd2","value":4}]}'
check "ledger post in one asset" 200 '"state":"posted"'
no "ledger post in two assets" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"usd1","value":-4},{"account":"cash","value":4}]}'
req POST /v1/ledger/entries/batch "$T_WRITE" \
  '{"entries":[{"legs":[{"account":"usd1","value":-4},{"account":"cash","value":4}],"pending":true}]}'
check "ledger batch in two assets" 200 '"code":"INVAL"'
req GET /v1/ledger/accounts/usd2/balance "$T_READ"
check "balance names the asset" 200 '"asset":"USD/2"' '"balance":4'

# Metadata and refs (docs/ledger.md, "Metadata and references"): stored
# with the entry, found by ref or a filter over the meta; unique once an
# admin asks, then a duplicate is 409 DUPKEY on a post and in a batch.
req POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"m1","legs":[{"account":"ext","value":-3},{"account":"cash","value":3}],"ref":"INV-1","meta":{"order":"o1","n":1}}'
check "ledger post with meta and ref" 200 '"ref":"INV-1"' '"meta":{"order":"o1","n":1}'
no "ledger: meta not an object" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"ext","value":-3},{"account":"cash","value":3}],"meta":[1]}'
no "ledger: ref not a string" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"legs":[{"account":"ext","value":-3},{"account":"cash","value":3}],"ref":7}'
# A writer's index may not take a name of its choosing on a pattern's
# collection: under "ref_unique" (non-unique) it made every unique-refs
# after it 400 BADINDEX for good.
refused "ledger: a writer's index named ref_unique" 409 VALIDATION POST /v1/c/ledger_entries/indexes "$T_WRITE" \
  '{"keys":{"ref":1},"sparse":true,"name":"ref_unique"}'
req POST /v1/c/ledger_entries/indexes "$T_WRITE" '{"keys":{"ref":1},"sparse":true}'
check "ledger: a writer's index under the name its keys give, the pattern's own" 200 '"name":"ref_1"'
refused "ledger unique-refs: write token" 403 FORBIDDEN POST /v1/ledger/unique-refs "$T_WRITE"
req POST /v1/ledger/unique-refs "$T_ADMIN"
check "ledger unique-refs" 200 '"unique_refs":true'
no "ledger: a duplicate unique ref" 409 DUPKEY POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"m2","legs":[{"account":"ext","value":-3},{"account":"cash","value":3}],"ref":"INV-1"}'
req POST /v1/ledger/entries/batch "$T_WRITE" \
  '{"entries":[{"legs":[{"account":"ext","value":-1},{"account":"cash","value":1}],"ref":"INV-1"},{"id":"m1","legs":[{"account":"ext","value":-3},{"account":"cash","value":3}],"ref":"INV-1","meta":{"order":"o1","n":1}}]}'
check "ledger batch: a duplicate ref refused, a retry of m1 is m1" 200 '"code":"DUPKEY"' '"_id":"m1"'
req GET "/v1/ledger/entries?ref=INV-1" "$T_READ"
check "ledger entries by ref" 200 '"_id":"m1"' '"next":null'
nitems "ledger entries by ref" entries 1
req GET "/v1/ledger/entries?meta_filter=%7B%22order%22%3A%22o1%22%7D" "$T_READ"
check "ledger entries by a meta filter" 200 '"_id":"m1"'
nitems "ledger entries by a meta filter" entries 1
no "ledger entries: a meta filter with \$where" 400 INVAL GET \
  "/v1/ledger/entries?meta_filter=%7B%22%24where%22%3A1%7D" "$T_READ"
no "ledger entries: account and ref" 400 INVAL GET "/v1/ledger/entries?account=cash&ref=INV-1" "$T_READ"
# A cursor is bound to the whole filter: two filters alike in their first
# 600 bytes do not share one (cut to 300, they did).
pad=$(printf 'x%.0s' $(seq 600))
req GET "/v1/ledger/entries?limit=1&meta_filter=%7B%22pad%22%3A%7B%22%24ne%22%3A%22${pad}A%22%7D%7D" "$T_READ"
check "ledger entries: a long meta filter, page 1" 200 '"next":"'
next=$(jf .next)
no "ledger entries: its cursor on another long filter" 400 INVAL GET \
  "/v1/ledger/entries?limit=1&after=$next&meta_filter=%7B%22pad%22%3A%7B%22%24ne%22%3A%22${pad}B%22%7D%7D" "$T_READ"
req GET "/v1/ledger/entries?limit=1&after=$next&meta_filter=%7B%22pad%22%3A%7B%22%24ne%22%3A%22${pad}A%22%7D%7D" "$T_READ"
check "ledger entries: its cursor on its own filter" 200 '"entries":['
req GET "/v1/ledger/accounts/ext/statement?from_seq=1&limit=100" "$T_READ"
check "statement shows ref and meta" 200 '"ref":"INV-1","meta":{"order":"o1","n":1}'

# Entry time (docs/ledger.md, "Entry time"): imported entries at a stated
# time, refused once an account has a later entry; balance as of a time,
# a statement between two times, paged by its cursor.
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"h1","min_balance":"none"}'
check "ledger account h1" 201 '"_id":"h1"'
req POST /v1/ledger/accounts "$T_WRITE" '{"id":"h2"}'
check "ledger account h2" 201 '"_id":"h2"'
req POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"i1","imported":true,"at":"2020-01-01T00:00:00Z","legs":[{"account":"h1","value":-5},{"account":"h2","value":5}]}'
check "ledger import at an RFC 3339 time" 200 '"imported":true' '"at":1577836800000'
req POST /v1/ledger/entries "$T_WRITE" \
  '{"id":"i2","imported":true,"at":1577836800001,"legs":[{"account":"h1","value":-6},{"account":"h2","value":6}]}'
check "ledger import at epoch ms" 200 '"at":1577836800001'
req POST /v1/ledger/entries "$T_WRITE" '{"id":"i3","legs":[{"account":"h1","value":-7},{"account":"h2","value":7}]}'
check "ledger live post after the imports" 200 '"_id":"i3"'
no "ledger import before a live entry" 409 STATE POST /v1/ledger/entries "$T_WRITE" \
  '{"imported":true,"at":"2021-01-01T00:00:00Z","legs":[{"account":"h1","value":-1},{"account":"h2","value":1}]}'
no "ledger: at without imported" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"at":"2021-01-01T00:00:00Z","legs":[{"account":"h1","value":-1},{"account":"h2","value":1}]}'
no "ledger: a bad import time" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"imported":true,"at":"2021-02-30T00:00:00Z","legs":[{"account":"h1","value":-1},{"account":"h2","value":1}]}'
no "ledger: an import time near INT64_MAX" 400 INVAL POST /v1/ledger/entries "$T_WRITE" \
  '{"imported":true,"at":9223372036854775807,"legs":[{"account":"h1","value":-1},{"account":"h2","value":1}]}'
req GET "/v1/ledger/accounts/h2/balance?at=2020-01-01T00:00:00Z" "$T_READ"
check "balance as of a time" 200 '"balance":5' '"seq":1' '"at":1577836800000'
no "balance: a bad time" 400 INVAL GET "/v1/ledger/accounts/h2/balance?at=yesterday" "$T_READ"
no "balance: at and at_seq" 400 INVAL GET "/v1/ledger/accounts/h2/balance?at=0&at_seq=1" "$T_READ"
req GET "/v1/ledger/accounts/h2/statement?from=0&to=2021-01-01T00:00:00Z&limit=1" "$T_READ"
check "statement between two times, page 1" 200 '"entry":"i1"' '"next":"'
nitems "statement between two times, page 1" legs 1
next=$(jf .next)
req GET "/v1/ledger/accounts/h2/statement?from=0&to=2021-01-01T00:00:00Z&limit=1&after=$next" "$T_READ"
check "statement between two times, page 2" 200 '"entry":"i2"' '"balance":11' '"next":null'
no "statement: from after to" 400 INVAL GET "/v1/ledger/accounts/h2/statement?from=2&to=1" "$T_READ"

# ---- sync ------------------------------------------------------------------------
req POST /v1/c/users/insert "$T_WRITE" '{"docs":[{"_id":"u1","name":"Ann"}]}'
check "sync master" 200 '"inserted":1'
req POST /v1/c/comments/insert "$T_WRITE" '{"docs":[{"_id":"c1","uid":"u1"},{"_id":"c2","uid":"u1"}]}'
check "sync dependents" 200 '"inserted":2'
RULE='{"master":"users","dependents":"comments","link":"uid","copy":"name:uname"}'
req POST /v1/sync/names/rule "$T_WRITE" "$RULE"
check "sync rule" 200 '"_id":"names"' '"link":"uid"'
req POST /v1/sync/names/rule "$T_WRITE" "$RULE"
check "sync rule again: the same" 200 '"_id":"names"'
refused "sync rule redefined" 409 CONFLICT POST /v1/sync/names/rule "$T_WRITE" \
  '{"master":"users","dependents":"comments","link":"uid","copy":"name:nick"}'
no "sync rule: option missing" 400 INVAL POST /v1/sync/other/rule "$T_WRITE" '{"master":"users"}'
no "sync rule: bad name" 400 INVAL POST /v1/sync/a%20b/rule "$T_WRITE" "$RULE"
req GET /v1/sync/names "$T_READ"
check "sync show" 200 '"_id":"names"' '"dst":"uname"'
no "sync show unknown" 404 NOTFOUND GET /v1/sync/nope "$T_READ"
req POST /v1/sync/names/update "$T_WRITE" '{"master_id":"u1","update":{"$set":{"name":"Bo"}}}'
check "sync update" 200 '"rule":"names"' '"version":1' '"dependents":2' '"flag_cleared":true'
req POST /v1/c/comments/count "$T_READ" '{"filter":{"uname":"Bo"}}'
check "sync copied" 200 '{"count":2}'
refused "sync update: unknown master" 404 NOTFOUND POST /v1/sync/names/update "$T_WRITE" \
  '{"master_id":"zz","update":{"$set":{"name":"X"}}}'
refused "sync update: touches _sync" 400 INVAL POST /v1/sync/names/update "$T_WRITE" \
  '{"master_id":"u1","update":{"$set":{"_sync":1}}}'
no "sync update: negative lease" 400 INVAL POST /v1/sync/names/update "$T_WRITE" \
  '{"master_id":"u1","update":{"$set":{"name":"X"}},"lease_ms":-1}'
no "sync repair: write token" 403 FORBIDDEN POST /v1/sync/repair "$T_WRITE" '{}'
req POST /v1/sync/repair "$T_ADMIN" '{}'
check "sync repair" 200 '"ok":true'

# ---- orders ----------------------------------------------------------------------
req POST /v1/accounts "$T_WRITE" '{"id":"shop"}'
check "order account" 201 '"_id":"shop"'
req POST /v1/orders/o1/create "$T_WRITE" '{"account":"shop","amount":50}'
check "order create" 200 '"_id":"o1"' '"state":"pending"'
cp "$WORK/rb" "$WORK/o1.first"
req POST /v1/orders/o1/create "$T_WRITE" '{"account":"shop","amount":50}'
if [ "$CODE" = 200 ] && cmp -s "$WORK/rb" "$WORK/o1.first"; then ok; else
  bad "a retried order create answers differently: $CODE $(rbody)"; fi
refused "order: trade id reused" 409 CONFLICT POST /v1/orders/o1/create "$T_WRITE" \
  '{"account":"shop","amount":51}'
no "order: amount 0" 400 INVAL POST /v1/orders/o2/create "$T_WRITE" '{"account":"shop","amount":0}'
refused "order: unknown account" 400 INVAL POST /v1/orders/o2/create "$T_WRITE" '{"account":"nobody","amount":5}'
no "order: amount missing" 400 INVAL POST /v1/orders/o2/create "$T_WRITE" '{"account":"shop"}'
req POST /v1/orders/o2/create "$T_WRITE" '{"account":"shop","amount":7}'
check "order 2" 200 '"_id":"o2"'
req POST /v1/orders/o3/create "$T_WRITE" '{"account":"shop","amount":9}'
check "order 3" 200 '"_id":"o3"'
req POST /v1/orders/o1/confirm "$T_WRITE" '{"owner":"cb"}'
check "order confirm" 200 '"_id":"o1"' '"state":"success"'
req POST /v1/orders/confirm "$T_WRITE" '{"trade_ids":["o1","o2","nope"]}'
check "order confirm of several" 200 '"_id":"o2"' '"code":"NOTFOUND"'
[ "$(jq -c '[.results[] | .status]' "$WORK/rb")" = '[200,200,404]' ] && ok ||
  bad "confirm of several: $(rbody)"
refused "order confirm: a malformed id confirms none" 400 INVAL POST /v1/orders/confirm "$T_WRITE" \
  '{"trade_ids":["o3","bad id"]}'
no "order confirm: unknown" 404 NOTFOUND POST /v1/orders/nope/confirm "$T_WRITE" '{}'
req GET /v1/accounts/shop "$T_READ"
check "credited once" 200 '"balance":57'
no "order cancel after success" 409 STATE POST /v1/orders/o1/cancel "$T_WRITE"
req POST /v1/orders/o3/cancel "$T_WRITE"
check "order cancel" 200 '"_id":"o3"' '"state":"canceled"'
refused "confirm a canceled order" 409 STATE POST /v1/orders/o3/confirm "$T_WRITE" '{}'
req GET /v1/orders/o1 "$T_READ"
check "order show" 200 '"_id":"o1"' '"amount":50'
no "order show unknown" 404 NOTFOUND GET /v1/orders/nope "$T_READ"
req GET "/v1/orders?state=success&limit=1" "$T_READ"
check "order list page 1" 200 '"_id":"o1"' '"next":"'
nitems "order list page 1" orders 1
next=$(jf .next)
req GET "/v1/orders?state=success&limit=1&after=$next" "$T_READ"
check "order list page 2" 200 '"_id":"o2"' '"next":null'
no "order list: unknown state" 400 INVAL GET "/v1/orders?state=bogus" "$T_READ"

# ---- versions --------------------------------------------------------------------
req POST /v1/versions/doc1/put "$T_WRITE" '{"root":{"t":1},"child":{"a":{"x":1},"b":{"y":2}}}'
check "version put" 200 '{"item":"doc1","version":1}'
req POST /v1/versions/doc1/put "$T_WRITE" '{"root":{"t":2},"remove_child":["b"],"expect_version":1}'
check "version put 2" 200 '{"item":"doc1","version":2}'
refused "version put: expect_version not met" 409 CONFLICT POST /v1/versions/doc1/put "$T_WRITE" \
  '{"root":{"t":3},"expect_version":1}'
refused "version put: bad child key" 400 INVAL POST /v1/versions/doc1/put "$T_WRITE" \
  '{"root":{"t":3},"child":{"bad key":{}}}'
no "version put: root missing" 400 INVAL POST /v1/versions/doc1/put "$T_WRITE" '{}'
refused "version put: remove a missing child" 404 NOTFOUND POST /v1/versions/doc1/put "$T_WRITE" \
  '{"root":{"t":3},"remove_child":["zz"],"expect_version":2}'
req GET /v1/versions/doc1 "$T_READ"
check "version get" 200 '"version":2' '"root":{"t":2}' '"children":{"a":{"x":1}}'
req GET "/v1/versions/doc1?version=1" "$T_READ"
check "version get 1" 200 '"version":1' '"b":{"y":2}'
no "version get: version 0" 400 INVAL GET "/v1/versions/doc1?version=0" "$T_READ"
no "version get unknown" 404 NOTFOUND GET /v1/versions/nodoc "$T_READ"
req GET /v1/versions/doc1/history "$T_READ"
check "version history" 200 '"versions":[{"version":1' '"version":2'
no "version gc: write token" 403 FORBIDDEN POST /v1/versions/gc "$T_WRITE" '{}'
no "version gc: keep 0" 400 INVAL POST /v1/versions/gc "$T_ADMIN" '{"keep":0}'
req POST /v1/versions/gc "$T_ADMIN" '{"keep":1,"grace_ms":0}'
check "version gc" 200 '"ok":true' '"removed":1'

# ---- job events (docs/jobs.md, "Events") ------------------------------------------
d job add evq t '{}' --id ev1 >/dev/null && d job cancel ev1 >/dev/null
req GET /v1/queues/evq/events "$T_READ"
check "job events" 200 '"events":[{"cursor":1,' '"event":"added"' '"event":"canceled"' '"cursor":2}'
req GET "/v1/queues/evq/events?after=1&limit=1" "$T_READ"
check "job events after a cursor" 200 '"events":[{"cursor":2,' '"event":"canceled"'
req GET "/v1/queues/evq/events?after=2&wait_ms=50" "$T_READ"
check "job events: a long poll, nothing new" 200 '"events":[]' '"cursor":2}'
no "job events: a negative cursor" 400 INVAL GET "/v1/queues/evq/events?after=-1" "$T_READ"
no "job events: a wait past 30 s" 400 INVAL GET "/v1/queues/evq/events?wait_ms=30001" "$T_READ"
no "job events: limit past 1000" 400 INVAL GET "/v1/queues/evq/events?limit=1001" "$T_READ"
# ---- job flows (docs/jobs.md, "Flows") ------------------------------------------
req POST /v1/queues/flowq/jobs "$T_WRITE" '{"type":"t","id":"fp","on_child_fail":"hold"}'
check "flow: parent" 201 '"_id":"fp"' '"on_child_fail":"hold"'
req POST /v1/queues/flowq/jobs "$T_WRITE" '{"type":"t","id":"fc","parent":"fp"}'
check "flow: child" 201 '"_id":"fc"' '"parent":"fp"' '"state":"ready"'
req GET /v1/jobs/fp "$T_READ"
check "flow: the parent waits" 200 '"state":"waiting"' '"children":["fc"]'
no "flow: a bad policy" 400 INVAL POST /v1/queues/flowq/jobs "$T_WRITE" '{"type":"t","on_child_fail":"x"}'
refused "flow: a missing parent" 404 NOTFOUND POST /v1/queues/flowq/jobs "$T_WRITE" '{"type":"t","id":"fx","parent":"nope"}'
req POST /v1/queues/flowq/claim "$T_WRITE" '{"owner":"w"}'
check "flow: the child claimed" 200 '"_id":"fc"'
req POST /v1/queues/flowq/jobs "$T_WRITE" '{"type":"t","id":"fg","parent":"fc"}'
check "flow: a child of a running job" 409 '"code":"STATE"'
req GET /v1/jobs/fg "$T_READ"
check "flow: nothing recorded" 404 '"code":"NOTFOUND"'

# ---- domain metrics --------------------------------------------------------------
d job add mail send '{}' >/dev/null 2>&1 && ok || bad "job add for metrics"
req POST /v1/transfers "$T_WRITE" '{"id":"tx-async","from":"shop","to":"ext","amount":1,"async":true}'
check "an async transfer for recovery" 404 '"code":"NOACCOUNT"' # ext is a ledger account
req POST /v1/accounts "$T_WRITE" '{"id":"acct2"}'
req POST /v1/transfers "$T_WRITE" '{"id":"tx-async","from":"shop","to":"acct2","amount":1,"async":true}'
check "an async transfer for recovery" 200 '"state":"initiated"'
req POST /v1/admin/recover "$T_ADMIN" '{"older_than_ms":0}'
check "recover drives it" 200 '"ok":true'
# A queue's pause (docs/jobs.md, "Pause and resume"): admin routes.
no "pause: write token" 403 FORBIDDEN POST /v1/job-queues/hq/pause "$T_WRITE" '{}'
refused "pause: bad queue" 400 INVAL POST '/v1/job-queues/a%20b/pause' "$T_ADMIN" '{}'
no "pause: a field" 400 INVAL POST /v1/job-queues/hq/pause "$T_ADMIN" '{"x":1}'
req POST /v1/queues/hq/jobs "$T_WRITE" '{"type":"t","id":"hj1"}'
req POST /v1/job-queues/hq/pause "$T_ADMIN" '{}'
check "pause" 200 '"paused":true'
req GET /v1/queues/hq/stats "$T_READ"
check "stats: paused" 200 '"paused":true' '"ready":1'
req POST /v1/queues/hq/claim "$T_WRITE" '{"n":5}'
check "claim of a paused queue" 200 '"jobs":[]'
req GET /v1/job-queues "$T_ADMIN"
check "job-queues" 200 '"queue":"hq"' '"paused":true'
no "job-queues: read token" 403 FORBIDDEN GET /v1/job-queues "$T_READ"
req POST /v1/job-queues/hq/resume "$T_ADMIN" '{}'
check "resume" 200 '"paused":false'
req POST /v1/queues/hq/claim "$T_WRITE" '{"n":5}'
check "claim after resume" 200 '"_id":"hj1"'
req POST /v1/jobs/hj1/complete "$T_WRITE" "{\"epoch\":$(jf '.jobs[0].epoch')}"
check "complete after resume" 200 '"state":"succeeded"'
# The concurrency limit (docs/jobs.md, "Queue limits").
refused "limit: 0" 400 INVAL POST /v1/job-queues/hq "$T_ADMIN" '{"max_running":0}'
no "limit: a word" 400 INVAL POST /v1/job-queues/hq "$T_ADMIN" '{"max_running":"many"}'
no "limit: nothing" 400 INVAL POST /v1/job-queues/hq "$T_ADMIN" '{}'
no "limit: write token" 403 FORBIDDEN POST /v1/job-queues/hq "$T_WRITE" '{"max_running":1}'
req POST /v1/job-queues/hq "$T_ADMIN" '{"max_running":1}'
check "limit 1" 200 '"max_running":1'
req POST /v1/queues/hq/jobs "$T_WRITE" '{"type":"t","id":"hj2"}'
req POST /v1/queues/hq/jobs "$T_WRITE" '{"type":"t","id":"hj3"}'
req POST /v1/queues/hq/claim "$T_WRITE" '{"n":5}'
check "claim under limit 1" 200 '"_id":"hj2"'
[ "$(jf '.jobs | length')" = 1 ] && ok || bad "claimed past the limit: $(<"$WORK/rb")"
e2=$(jf '.jobs[0].epoch')
req POST /v1/queues/hq/claim "$T_WRITE" '{"n":5}'
check "claim at the limit" 200 '"jobs":[]'
req POST /v1/jobs/hj2/complete "$T_WRITE" "{\"epoch\":$e2}"
req POST /v1/queues/hq/claim "$T_WRITE" '{"n":5}'
check "claim after the slot came back" 200 '"_id":"hj3"'
req POST /v1/jobs/hj3/complete "$T_WRITE" "{\"epoch\":$(jf '.jobs[0].epoch')}"
req GET /v1/queues/hq/stats "$T_READ"
check "stats: max_running" 200 '"max_running":1' '"succeeded":3'
req POST /v1/job-queues/hq2 "$T_ADMIN" '{"max_running":"none"}'
check "limit none" 200 '"max_running":null'
req POST /v1/job-queues/hq "$T_ADMIN" '{"max_running":5}'
check "limit 5 (kept for the metrics below)" 200 '"max_running":5'
# A queue's rate (docs/jobs.md, "Rate limits"): per group, each group
# its own window; bad values refused before the store.
refused "rate: 0/1000" 400 INVAL POST /v1/job-queues/hr "$T_ADMIN" '{"rate":"0/1000"}'
refused "rate: past INT64_MAX" 400 INVAL POST /v1/job-queues/hr "$T_ADMIN" '{"rate":"1/9223372036854775808"}'
no "rate: a number" 400 INVAL POST /v1/job-queues/hr "$T_ADMIN" '{"rate":5}'
refused "rate: a group alone" 400 INVAL POST /v1/job-queues/hr "$T_ADMIN" '{"rate_group":"payload.c"}'
refused "rate: a bad group" 400 INVAL POST /v1/job-queues/hr "$T_ADMIN" '{"rate":"2/1000","rate_group":"a b"}'
req POST /v1/job-queues/hr "$T_ADMIN" '{"rate":"2/60000","rate_group":"payload.c"}'
check "rate 2/60000 per payload.c" 200 '"rate":{"n":2,"ms":60000,"group":"payload.c"}'
for i in 1 2 3; do req POST /v1/queues/hr/jobs "$T_WRITE" '{"type":"t","id":"hra'$i'","payload":{"c":"a"}}'; done
req POST /v1/queues/hr/jobs "$T_WRITE" '{"type":"t","id":"hrb1","payload":{"c":"b"}}'
req POST /v1/queues/hr/claim "$T_WRITE" '{"n":5}'
check "claim under the rate" 200 '"_id":"hra1"' '"_id":"hra2"' '"_id":"hrb1"'
[ "$(jf '.jobs | length')" = 3 ] && ok || bad "claimed past the rate: $(<"$WORK/rb")"
req GET /v1/queues/hr/stats "$T_READ"
check "stats: rate" 200 '"rate":{"n":2,"ms":60000,"group":"payload.c"}'
req GET /v1/job-queues "$T_ADMIN"
check "job-queues: rate" 200 '"queue":"hr"' '"rate":{"n":2'
req POST /v1/job-queues/hr "$T_ADMIN" '{"rate":"none"}'
check "rate none" 200 '"rate":null'

# Locks held now (L2's default 30 s lease may have lapsed on a slow run).
req GET "/v1/locks?limit=1000" "$T_READ"
held=$(grep -o '"held":true' "$WORK/rb" | wc -l)
req GET /metrics "$T_METRICS"
check "metrics: domain families" 200 \
  '# TYPE doctxd_transfers gauge' 'doctxd_transfers{state="succeeded"} ' \
  'doctxd_transfers{state="initiated"} ' \
  '# TYPE doctxd_queue_jobs gauge' 'doctxd_queue_jobs{queue="mail",state="ready"} 1' \
  '# TYPE doctxd_locks_held gauge' "doctxd_locks_held $held" \
  '# TYPE doctxd_recovery_actions_total counter' \
  'doctxd_recovery_actions_total{pattern="transfer",action=' \
  'doctxd_domain_up 1' \
  'doctxd_http_requests_total{route="/v1/locks/{name}/acquire",method="POST",code="409"}'
# Never an id as a label: the lock, entry, order, item and user ids.
if grep -E '^[a-z_]+\{' "$WORK/rb" | grep -qE '"(L|L2|e1|p1|o1|doc1|u1|names|cash|shop|tx-async)"'; then
  bad "an id is a metrics label: $(grep -E '"(L|e1|o1|doc1|cash)"' "$WORK/rb" | head -3)"
else ok; fi
# Every sample's family is declared with a TYPE.
undeclared=$(awk '/^# TYPE /{t[$3]=1; next} /^#/{next}
  {n=$1; sub(/\{.*/,"",n); b=n; sub(/_(bucket|sum|count)$/,"",b); if(!(n in t)&&!(b in t)) print n}' "$WORK/rb" | sort -u)
[ -z "$undeclared" ] && ok || bad "samples without a TYPE: $undeclared"
# A queue's settings are no job state: no doctxd_queue_jobs sample of them.
grep -qE 'doctxd_queue_jobs\{[^}]*state="(max_running|paused)"' "$WORK/rb" &&
  bad "a setting as a job state: $(grep -E 'state="(max_running|paused)"' "$WORK/rb")" || ok

# ---- job schedules (docs/jobs.md, "Schedules") ------------------------------------
refused "schedule: bad cron" 400 INVAL POST /v1/job-schedules "$T_WRITE" \
  '{"name":"hs","queue":"hq","type":"t","cron":"* * 32 * *"}'
grep -qF 'day-of-month: 32' "$WORK/rb" && ok || bad "bad cron: the field not named: $(rbody)"
no "schedule: INT64_MAX every_ms" 400 INVAL POST /v1/job-schedules "$T_WRITE" \
  '{"name":"hs","queue":"hq","type":"t","every_ms":9223372036854775807}'
no "schedule: every_ms 0" 400 INVAL POST /v1/job-schedules "$T_WRITE" \
  '{"name":"hs","queue":"hq","type":"t","every_ms":0}'
no "schedule: read token" 403 FORBIDDEN POST /v1/job-schedules "$T_READ" \
  '{"name":"hs","queue":"hq","type":"t","every_ms":1000}'
req POST /v1/job-schedules "$T_WRITE" '{"name":"hs","queue":"hq","type":"t","payload":{"a":1},"cron":"*/5 * * * *","missed":"skip"}'
check "schedule" 200 '"_id":"hs"' '"gen":1' '"missed":"skip"' '"next_at":'
req GET "/v1/job-schedules?queue=hq" "$T_READ"
check "schedules" 200 '"schedules":[{' '"_id":"hs"'
req DELETE /v1/job-schedules/hs "$T_WRITE"
check "unschedule" 200 '"state":"removed"' '"gen":2'
no "unschedule again" 404 NOTFOUND DELETE /v1/job-schedules/hs "$T_WRITE"

# ---- multi-document transactions (docs/server.md, "Transactions") ------------------
# POST /v1/txn runs `doctx txn`'s script: 200 committed or aborted by a
# require, 400 bad input with nothing written (the transactions'
# collections not even made), 409 a conflict, 503 with the outcome
# unknown and the id; POST /v1/txn/{id}/outcome is `txn show` (a POST: it
# may write a fence).
req POST /v1/c/stock/insert "$T_WRITE" '{"docs":[{"_id":"w1","n":5},{"_id":"w2","n":0}]}'
check "txn: the stock" 200 '"inserted":2'
MOVE='[{"find_one":"stock","filter":{"_id":"w1"},"as":"w1"},{"require":"w1","filter":{"n":{"$gte":3}}},{"update":"stock","filter":{"_id":"w1"},"with":{"$inc":{"n":-3}}},{"update":"stock","filter":{"_id":"w2"},"with":{"$inc":{"n":3}}}]'
BACK='[{"update":"stock","filter":{"_id":"w1"},"with":{"$inc":{"n":1}}},{"update":"stock","filter":{"_id":"w2"},"with":{"$inc":{"n":-1}}}]'
same() { [ "$2" = "$3" ] && ok || bad "$1: got $2, want $3"; } # LABEL GOT WANT
stock() { d find stock '{}' | jq -sr 'sort_by(._id) | map(.n | tostring) | join("/")'; }
refused "txn: no script" 400 INVAL POST /v1/txn "$T_WRITE" '{"id":"hx"}'
grep -qF "'script' is required" "$WORK/rb" && ok || bad "no script: not named: $(rbody)"
refused "txn: malformed JSON" 400 BADJSON POST /v1/txn "$T_WRITE" '{"script":[{"find_one":"stock",'
refused "txn: a bare array body" 400 INVAL POST /v1/txn "$T_WRITE" "$MOVE"
refused "txn: an unknown step" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[{"upsert":"stock","filter":{}}]}'
grep -qF 'step 1' "$WORK/rb" && ok || bad "unknown step: the step not named: $(rbody)"
refused "txn: an unknown key in a step" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[{"insert":"stock","doc":{"_id":"x"},"upsert":true}]}'
refused "txn: INT64_MAX deadline_ms" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"deadline_ms\":9223372036854775807}"
grep -qF 'deadline_ms' "$WORK/rb" && ok || bad "deadline: not named: $(rbody)"
refused "txn: INT64_MAX lease_ms" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"lease_ms\":9223372036854775807}"
refused "txn: a step's bad operator" 400 BADQUERY POST /v1/txn "$T_WRITE" '{"script":[{"delete":"stock","filter":{"n":{"$bogus":1}}}]}'
refused "txn: an escaped NUL in a name" 400 BADJSON POST /v1/txn "$T_WRITE" '{"script":[{"insert":"st\u0000ock","doc":{}}]}'
no "txn: deadline past int64" 400 BADJSON POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"deadline_ms\":9223372036854775808}"
no "txn: a negative deadline" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"deadline_ms\":-1}"
no "txn: script a string" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":"[]"}'
no "txn: an empty script" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[]}'
no "txn: limit a string" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[{"find":"stock","filter":{},"limit":"5","as":"a"}]}'
no "txn: upsert a string" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[{"update":"stock","filter":{},"with":{"$set":{"a":1}},"upsert":"yes"}]}'
no "txn: id a number" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"id\":7}"
no "txn: a bad id" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"id\":\"a b\"}"
no "txn: an unknown isolation" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"isolation\":\"linearizable\"}"
no "txn: _txn in an insert" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[{"insert":"stock","doc":{"_id":"x","_txn":{}}}]}'
no "txn: a require of no read" 400 INVAL POST /v1/txn "$T_WRITE" '{"script":[{"require":"w9","filter":{}}]}'
no "txn: an unknown field" 400 INVAL POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"isolaton\":\"snapshot\"}"
printf '{"script":[{"insert":"stock","doc":{"_id":"x\0"}}]}' >"$WORK/nul.json"
CODE=$(curl -s -o "$WORK/rb" -w '%{http_code}' --max-time 30 -H "Authorization: Bearer $T_WRITE" \
  -H 'Content-Type: application/json' --data-binary @"$WORK/nul.json" "$URL/v1/txn") || :
check "txn: a NUL byte in the body" 400 '"code":"BADJSON"' 'NUL byte'
refused "txn: read token" 403 FORBIDDEN POST /v1/txn "$T_READ" "{\"script\":$MOVE}"
no "txn: no token" 401 UNAUTHORIZED POST /v1/txn "" "{\"script\":$MOVE}"
d collections | grep -q '^txn_' && bad "bad input made the transactions' collections" || ok
same "txn: bad input moved nothing" "$(stock)" "5/0"
req POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"id\":\"hm1\"}"
check "txn commits" 200 '{"outcome":"committed","reads":{"w1":{"_id":"w1","n":5}}}'
req POST /v1/txn "$T_WRITE" "{\"script\":$MOVE,\"isolation\":\"serializable\",\"deadline_ms\":5000,\"lease_ms\":2000}"
check "txn: a require that fails aborts (200)" 200 '{"outcome":"aborted","reads":{"w1":{"_id":"w1","n":2}}}'
same "txn: moved once" "$(stock)" "2/3"
req POST /v1/txn "$T_WRITE" '{"script":[{"find":"stock","filter":{"n":{"$gte":2}},"limit":10,"as":"s"}]}'
check "txn: a find's reads" 200 '"outcome":"committed"' '"s":[{"_id":"w1","n":2},{"_id":"w2","n":3}]'
req POST /v1/txn/hm1/outcome "$T_WRITE"
check "txn outcome: committed" 200 '{"id":"hm1","outcome":"committed"}'
req POST /v1/txn/hm2/outcome "$T_WRITE" '{}'
check "txn outcome of an unknown id: fenced" 200 '{"id":"hm2","outcome":"aborted"}'
no "txn: a fenced id does not commit" 409 CONFLICT POST /v1/txn "$T_WRITE" "{\"script\":$BACK,\"id\":\"hm2\"}"
same "txn: the fence moved nothing" "$(stock)" "2/3"
no "txn outcome: read token" 403 FORBIDDEN POST /v1/txn/hm1/outcome "$T_READ"
no "txn outcome: a bad id" 400 INVAL POST '/v1/txn/a%20b/outcome' "$T_WRITE"
no "txn outcome: a field" 400 INVAL POST /v1/txn/hm1/outcome "$T_WRITE" '{"id":"hm1"}'
no "txn outcome is no GET" 405 METHOD GET /v1/txn/hm1/outcome "$T_WRITE"
hdr "txn outcome: Allow" "Allow: POST"
# A crashed writer's intents (the CLI, with a fault point): a transaction
# meeting them is a conflict at its deadline; plain writes are refused;
# its outcome is unknown under its lease, aborted after recovery.
DOCTX_FAULT=txn.commit:crash d txn --id hm4 --lease-ms 60000 "$BACK" >/dev/null 2>&1
req POST /v1/txn/hm4/outcome "$T_WRITE"
check "txn outcome under a live lease" 200 '{"id":"hm4","outcome":"unknown"}'
no "txn: a conflict at its deadline" 409 CONFLICT POST /v1/txn "$T_WRITE" "{\"script\":$BACK,\"deadline_ms\":300}"
no "txn: a plain update of an intent's document" 409 VALIDATION POST /v1/c/stock/update "$T_WRITE" \
  '{"filter":{"_id":"w1"},"update":{"$set":{"n":0}}}'
req POST /v1/admin/recover "$T_ADMIN" '{"older_than_ms":0}'
check "txn: recover" 200 '"ok":true'
req POST /v1/txn/hm4/outcome "$T_WRITE"
check "txn outcome after recovery" 200 '{"id":"hm4","outcome":"aborted"}'
same "txn: the crashed writer moved nothing" "$(stock)" "2/3"
# A commit whose reply is lost (a second doctxd, its txn.commit armed to
# lose the reply at each of the kit's 4 attempts -- the kit retries a
# lost reply): 503 with the outcome unknown and the id; the outcome route
# tells it committed, and the stock moved once.
main_url=$URL main_pid=$DPID
lost=txn.commit:lost:1,txn.commit:lost:2,txn.commit:lost:3,txn.commit:lost:4
if DOCTX_FAULT=$lost start_doctxd "$WORK/doctxd-lost.log" --store "$S" \
  --tokens "$WORK/tokens" --rate 0 --threads 1; then
  req POST /v1/txn "$T_WRITE" "{\"script\":$BACK,\"id\":\"hm5\"}"
  check "txn: a lost commit reply" 503 '"code":"UNAVAILABLE"' '"outcome":"unknown"' '"id":"hm5"'
  hdr "txn: the 503's Retry-After" "Retry-After: 1"
  grep -q 'fault: txn.commit lost' "$WORK/doctxd-lost.log" && ok || bad "the reply was not lost: $(log_tail "$WORK/doctxd-lost.log")"
  stop_bg "$DPID" 15 "$WORK/doctxd-lost.log" && ok || bad "the second doctxd did not stop"
else
  bad "the second doctxd did not start"
fi
URL=$main_url DPID=$main_pid
req POST /v1/txn/hm5/outcome "$T_WRITE"
check "txn outcome after a lost reply" 200 '{"id":"hm5","outcome":"committed"}'
# Its intents are rolled forward by the next reader (or recovery): a
# transaction reads the committed values, and then so do plain reads.
req POST /v1/txn "$T_WRITE" '{"script":[{"find":"stock","filter":{},"limit":10,"as":"s"}]}'
check "txn: a reader sees the lost-reply commit" 200 '"s":[{"_id":"w1","n":3},{"_id":"w2","n":2}]'
same "txn: the lost-reply commit moved once" "$(stock)" "3/2"

# The audit, after everything: money, ledger, orders and locks consistent.
req POST /v1/admin/audit "$T_ADMIN" '{}'
check "audit at the end" 200 '"clean":true'

stop_bg "$DPID" 15 "$WORK/doctxd.log" && ok || bad "doctxd did not stop on SIGTERM"
finish
