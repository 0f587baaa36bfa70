#!/usr/bin/env bash
# The order CLI contract (docs/orders.md): create idempotent under its trade id (CONFLICT exit 3 when
# different), bad input exit 2 recording nothing, confirm crediting
# exactly once (again: exit 0, nothing more), cancel only while pending,
# confirm of a canceled order exit 3, the settlement account made on first
# use, a crash in the middle of the credit's transfer finished by recovery
# under a second attempt, the audit catching a credit its state does not
# allow -- and the races: 4 processes delivering the same callback at once
# (exactly one credit), cancel racing confirm (canceled with no credit, or
# success with one); several trade ids confirmed in one call, each as
# alone.  On SQLite, or on $DTX_REDIS_URI.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"

new_store order
d account create U >/dev/null || { echo "setup failed"; exit 1; }
bal() { field "$(d find accounts "{\"_id\":\"$1\"}")" balance; }
st() { field "$(d order show "$1")" state; }

# Bad input: exit 2, nothing recorded (not even the settlement account).
expect 2 "amount 0" -- d order create B1 --account U --amount 0
expect 2 "negative amount" -- d order create B1 --account U --amount -5
expect 2 "amount not an integer" -- d order create B1 --account U --amount 1.5
expect 2 "unknown account" -- d order create B1 --account NOPE --amount 5
grep -q "no account 'NOPE'" "$WORK/err" && ok || bad "unknown account message: $(<"$WORK/err")"
expect 2 "malformed trade id" -- d order create 'a:b' --account U --amount 5
expect 2 "missing --amount" -- d order create B1 --account U
[ "$(d count orders)" = 0 ] && [ "$(d count accounts)" = 1 ] && ok ||
  bad "bad input recorded something: $(d count orders) orders, $(d count accounts) accounts"

# Create; the same again returns it; anything different is CONFLICT.
expect 0 "create" -- d order create T1 --account U --amount 100
[ "$(field "$(out)" state)" = pending ] && [ "$(field "$(out)" amount)" = 100 ] && ok || bad "create output: $(out)"
[ "$(field "$(d find accounts '{"_id":"settlement"}')" min_balance)" = null ] && ok ||
  bad "settlement not created without a limit"
expect 0 "create again, same" -- d order create T1 --account U --amount 100
[ "$(field "$(out)" _id)" = T1 ] && ok || bad "repeat create output: $(out)"
expect 3 "create again, other amount" -- d order create T1 --account U --amount 101
grep -q "^doctx: CONFLICT: " "$WORK/err" && ok || bad "conflict message: $(<"$WORK/err")"
d account create V >/dev/null
expect 3 "create again, other account" -- d order create T1 --account V --amount 100

# Confirm credits once; again exits 0 and credits nothing.
expect 0 "confirm" -- d order confirm T1
[ "$(field "$(out)" state)" = success ] && [ "$(bal U)" = 100 ] && [ "$(bal settlement)" = -100 ] && ok ||
  bad "after confirm: $(out), U $(bal U)"
[ "$(field "$(d transfer show order:T1)" state)" = succeeded ] && ok || bad "transfer order:T1 not succeeded"
expect 0 "confirm again" -- d order confirm T1
[ "$(bal U)" = 100 ] && ok || bad "confirm again credited: U $(bal U)"
expect 3 "cancel after success" -- d order cancel T1
expect 1 "confirm of no such order" -- d order confirm NOPE

# Cancel: only pending; idempotent; a canceled order is never credited.
d order create C1 --account U --amount 7 >/dev/null
expect 0 "cancel" -- d order cancel C1
[ "$(field "$(out)" state)" = canceled ] && ok || bad "cancel output: $(out)"
expect 0 "cancel again" -- d order cancel C1
expect 3 "confirm of a canceled order" -- d order confirm C1
[ "$(bal U)" = 100 ] && [ "$(d count transfers '{"_id":"order:C1"}')" = 0 ] && ok || bad "canceled order credited"

# --settlement names another account, made on first use; one with a
# lower limit is refused as bad input.
expect 0 "create with --settlement" -- d order create S1 --account V --amount 30 --settlement bank
expect 0 "confirm from bank" -- d order confirm S1
[ "$(bal bank)" = -30 ] && [ "$(bal V)" = 30 ] && ok || bad "bank $(bal bank), V $(bal V)"
d account create LIM --balance 10 >/dev/null
expect 2 "settlement with a limit" -- d order create S2 --account V --amount 5 --settlement LIM
[ "$(d count orders '{"_id":"S2"}')" = 0 ] && ok || bad "S2 recorded"

# Show, list.
expect 0 "list" -- d order list
[ "$(wc -l <"$WORK/out")" = 3 ] && ok || bad "list: $(out)"
expect 0 "list --state canceled" -- d order list --state canceled
[ "$(wc -l <"$WORK/out")" = 1 ] && [ "$(field "$(out)" _id)" = C1 ] && ok || bad "list canceled: $(out)"
expect 2 "list of an unknown state" -- d order list --state nope
expect 1 "show of no such order" -- d order show NOPE
expect 3 "delete of a success order refused" -- d delete orders '{"_id":"T1"}'

# A crash in the middle of the credit's transfer: transfer recovery rolls
# it back, order recovery credits it under attempt 2, once.
d order create X1 --account U --amount 5 >/dev/null
DOCTX_FAULT=transfer.debit:crash d order confirm X1 >/dev/null 2>&1
[ $? = 137 ] && ok || bad "the crash did not happen"
expect 0 "recover after a crash mid-credit" -- d recover --older-than-ms 0
x1=$(d order show X1)
[ "$(field "$x1" state)" = success ] && [ "$(field "$x1" attempt)" = 2 ] && [ "$(bal U)" = 105 ] && ok ||
  bad "X1 after recovery: $x1, U $(bal U)"
expect 0 "audit --settled" -- d audit --settled

# A lease past int64 (--lease-ms 2^63-1) must not wrap into one that
# lapsed before it began: recovery (lease judged, no --older-than-ms)
# leaves the crashed confirm's order alone.
d account create LX >/dev/null
d order create X2 --account LX --amount 5 >/dev/null
DOCTX_FAULT=order.finish:crash d order confirm X2 --lease-ms 9223372036854775807 >/dev/null 2>&1
[ $? = 137 ] && ok || bad "the crash at order.finish did not happen"
expect 0 "recover judging a huge lease" -- d recover
[ "$(st X2)" = confirmed ] && [ "$(d find orders '{"_id":"X2"}' | jq '.lease_until > .updated')" = true ] &&
  ok || bad "X2 taken over under a live lease: $(d order show X2)"
expect 0 "recover --older-than-ms 0 finishes X2" -- d recover --older-than-ms 0
[ "$(st X2)" = success ] && [ "$(bal LX)" = 5 ] && ok || bad "X2 after recovery: $(d order show X2), LX $(bal LX)"

# The races.  4 processes deliver the same callback at once.
d order create R1 --account U --amount 10 >/dev/null
pids=()
for i in 1 2 3 4; do start_bg "$WORK/r$i.log" d order confirm R1; pids+=("$BG_PID"); done
for i in 0 1 2 3; do
  bounded_wait "${pids[$i]}" 20 "$WORK/r$((i + 1)).log"
  rc=$?
  [ $rc = 0 ] && ok || bad "concurrent confirm $((i + 1)) exited $rc: $(tail -2 "$WORK/r$((i + 1)).log")"
done
[ "$(st R1)" = success ] && [ "$(bal U)" = 115 ] &&
  [ "$(d count transfers '{"_id":{"$regex":"^order:R1"},"state":"succeeded"}')" = 1 ] && ok ||
  bad "4 callbacks: R1 $(st R1), U $(bal U)"

# Cancel racing confirm, a few times: canceled and never credited, or
# success and credited once.
want=115
for k in 1 2 3 4; do
  d order create K$k --account U --amount 1 >/dev/null
  start_bg "$WORK/k$k.cancel" d order cancel K$k; pc=$BG_PID
  start_bg "$WORK/k$k.confirm" d order confirm K$k; pf=$BG_PID
  bounded_wait "$pc" 20 "$WORK/k$k.cancel"; rc_c=$?
  bounded_wait "$pf" 20 "$WORK/k$k.confirm"; rc_f=$?
  s=$(st K$k)
  case "$s:$rc_c:$rc_f" in
  canceled:0:3) ;;
  success:3:0) want=$((want + 1)) ;;
  *) bad "K$k: $s, cancel exit $rc_c, confirm exit $rc_f" ;;
  esac
done
[ "$(bal U)" = "$want" ] && ok || bad "after the cancel races U $(bal U), want $want"
expect 0 "audit --settled after the races" -- d audit --settled

# Several trade ids at once (dtx_order_confirm_many): one line per id in
# their order, each as alone (the order, or an error line naming it), the
# exit code the most severe of theirs; credited once, an id twice too.
new_store order_many
d account create U >/dev/null
for t in M1 M2 M3; do d order create $t --account U --amount 10 >/dev/null; done
d order cancel M3 >/dev/null
expect 0 "confirm M1 M2 together" -- d order confirm M1 M2 M1
[ "$(out | wc -l)" = 3 ] && [ "$(out | jq -r .state | sort -u)" = success ] &&
  [ "$(out | jq -r ._id | tr '\n' ' ')" = "M1 M2 M1 " ] && [ "$(bal U)" = 20 ] && ok ||
  bad "confirm M1 M2 M1: $(out), U $(bal U)"
expect 3 "confirm with a canceled and an unknown id" -- d order confirm M2 M3 NOPE
[ "$(out | jq -r '.state // .error' | tr '\n' ' ')" = "success STATE NOTFOUND " ] &&
  [ "$(out | jq -r '.trade_id // empty' | tr '\n' ' ')" = "M3 NOPE " ] && [ "$(bal U)" = 20 ] && ok ||
  bad "confirm M2 M3 NOPE: $(out), U $(bal U)"
# An error line carries the call's detail, naming the order.
out | jq -se 'map(select(.trade_id == "NOPE"))[0].detail | test("NOPE")' >/dev/null &&
  ok || bad "confirm NOPE: the error line's detail does not name it: $(out)"
expect 1 "confirm of two unknown ids" -- d order confirm NOPE1 NOPE2
expect 2 "confirm without a trade id" -- d order confirm
expect 2 "show takes one trade id" -- d order show M1 M2
expect 0 "audit after confirming several" -- d audit

# The audit must fail on a credit its state does not allow.
new_store order_audit
d account create U >/dev/null
d order create P1 --account U --amount 9 >/dev/null
d order create P2 --account U --amount 9 >/dev/null
d transfer settlement U 9 --id order:P1 >/dev/null
expect 5 "audit: a pending order credited" -- d audit
grep -q "credited_uncredited" "$WORK/out" "$WORK/err" && ok || bad "finding: $(out)"
expect 3 "a pending order set success: refused (transition moves)" -- d update orders '{"_id":"P2"}' '{"$set":{"state":"success"}}'
d update orders '{"_id":"P2"}' '{"$set":{"state":"success"}}' --bypass-validation >/dev/null
expect 5 "audit: a success order never credited" -- d audit
grep -q "not_credited" "$WORK/out" "$WORK/err" && ok || bad "finding: $(out)"

# ---- another user pays for an order (docs/orders.md, "Rules, re-checks")
# create refuses a settlement with a lower limit; a plain update of the
# settlement of a pending order must not get past it: the transition rule
# refuses it, confirm checks again what create checked (an order written
# past the rules, or inserted by hand), and the audit reports it.
new_store order_payer
d account create alice >/dev/null && d account create bob --balance 1000 >/dev/null ||
  bad "payer: setup"
bobbal() { field "$(d find accounts '{"_id":"bob"}')" balance; }
expect 2 "create with bob (a limit) as settlement" -- d order create O1 --account alice --amount 100 --settlement bob
d order create O1 --account alice --amount 100 >/dev/null || bad "payer: create O1"
expect 3 "a pending order's settlement set to bob: refused" -- d update orders '{"_id":"O1"}' '{"$set":{"settlement":"bob"}}'
grep -q "settlement may not change" "$WORK/err" && ok || bad "payer: refusal message: $(<"$WORK/err")"
expect 0 "... forced past the rules" -- d update orders '{"_id":"O1"}' '{"$set":{"settlement":"bob"}}' --bypass-validation
expect 3 "confirm re-checks the settlement" -- d order confirm O1
grep -q "settlement account 'bob' has a lower limit" "$WORK/err" && ok || bad "payer: confirm message: $(<"$WORK/err")"
[ "$(bobbal)" = 1000 ] && [ "$(d count transfers)" = 0 ] && [ "$(st O1)" = pending ] && ok ||
  bad "payer: bob paid $(bobbal), O1 $(st O1)"
expect 5 "audit reports the order's payer" -- d audit
grep -q "bad_settlement.*'bob'" "$WORK/out" && ok || bad "payer: finding: $(grep FINDING "$WORK/out")"
# An order inserted by hand (no bypass: the validator admits its shape),
# confirmed in a batch beside a good one: the good one is credited, the
# bad one refused as alone, bob untouched.
d order create O2 --account alice --amount 5 >/dev/null || bad "payer: create O2"
O3='{"_id":"O3","account":"alice","amount":7,"settlement":"bob","state":"pending","transfer":"order:O3","attempt":1,"created":1,"owner":null,"lease_until":0,"epoch":0,"updated":1}'
expect 0 "an order paid by bob inserted by hand" -- d insert orders "$O3"
expect 3 "confirm O2 O3: O3 refused" -- d order confirm O2 O3
[ "$(out | jq -r '.state // .error' | tr '\n' ' ')" = "success STATE " ] && [ "$(bobbal)" = 1000 ] &&
  [ "$(field "$(d find accounts '{"_id":"alice"}')" balance)" = 5 ] && ok ||
  bad "payer: confirm O2 O3: $(out), bob $(bobbal)"

# ---- a list with a malformed trade id: a usage error, nothing confirmed
d order create G1 --account alice --amount 1 >/dev/null || bad "usage: create G1"
expect 2 "confirm GOOD BAD" -- d order confirm G1 'BAD:ID'
grep -q "BAD:ID.*nothing confirmed" "$WORK/err" && [ ! -s "$WORK/out" ] && [ "$(st G1)" = pending ] && ok ||
  bad "confirm GOOD BAD: G1 $(st G1), out $(out), err $(<"$WORK/err")"
expect 2 "confirm BAD GOOD" -- d order confirm 'x y' G1
[ "$(st G1)" = pending ] && ok || bad "confirm BAD GOOD: G1 $(st G1)"

# ---- the plain-write attack table (docs/orders.md, "Rules, re-checks").
# Every protocol field of an order in each state set, with plain commands
# (no --bypass-validation), to a wrong type, another live order's value
# and an earlier value.  Rows the rules refuse go through ONE bulk (each
# line must be VALIDATION, and nothing may change); the rows they admit,
# each on an order of its own, through a second bulk -- then recovery,
# one audit and one read, and each admitted row must leave its order
# correct or be reported by the audit.
new_store order_attack
d account create U >/dev/null && d account create LIM --min-balance 0 >/dev/null &&
  d account create settlement --min-balance none >/dev/null || bad "attack: accounts"
# orders as create writes them (amounts distinct powers of 2: the
# balance says which were credited)
doc() { # ID AMOUNT
  printf '{"_id":"%s","account":"U","amount":%s,"settlement":"settlement","state":"pending","transfer":"order:%s","attempt":1,"created":%s,"owner":null,"lease_until":0,"epoch":0,"updated":0}' \
    "$1" "$2" "$1" "$2"
}
ids=(P C F S X A1 A2 C3 F4 C5 F6 C7 D8 C9 C10 C11 X12 P9)
declare -A AMT
amt=1
for id in "${ids[@]}"; do
  AMT[$id]=$amt
  echo "{\"insertOne\":{\"document\":$(doc "$id" $amt)}}"
  amt=$((amt * 2))
done >"$WORK/setup.jsonl"
d bulk orders --file "$WORK/setup.jsonl" >/dev/null || bad "attack: insert the orders"
# C*: confirming, claimed and crashed before the credit; F*: confirmed,
# crashed before the finish; D8: crashed inside its credit after the
# transfer committed; S: success; X*: canceled.
DOCTX_FAULT=order.credit:crash d order confirm C C3 C5 C7 C9 C10 C11 >/dev/null 2>&1
[ $? = 137 ] && ok || bad "attack: the crash at order.credit did not happen"
DOCTX_FAULT=order.finish:crash d order confirm F F4 F6 >/dev/null 2>&1
[ $? = 137 ] && ok || bad "attack: the crash at order.finish did not happen"
DOCTX_FAULT=transfer.credit_payee:crash d order confirm D8 >/dev/null 2>&1
[ $? = 137 ] && ok || bad "attack: the crash at transfer.credit_payee did not happen"
d order confirm S >/dev/null && d order cancel X >/dev/null && d order cancel X12 >/dev/null ||
  bad "attack: S, X"
[ "$(d find orders '{"_id":{"$in":["C","D8","F","S","X"]}}' | jq -r '"\(._id)=\(.state)"' | sort | tr '\n' ' ')" = \
  "C=confirming D8=confirming F=confirmed S=success X=canceled " ] && ok ||
  bad "attack: set-up states: $(d find orders | jq -c '[._id, .state]' | tr '\n' ' ')"

# Refused: DOC FIELD VALUE (UNSET: $unset; DELETE: a plain delete; a
# VALUE of {"$r": DOC} is DOC replaced whole).  Another live order's value
# is taken from P, S or the settlement LIM; an earlier one is the order's
# own before its last step.
while read -r id f v; do
  [ -z "$id" ] && continue
  case "$f" in
  DELETE) echo "{\"deleteOne\":{\"filter\":{\"_id\":\"$id\"}}}" ;;
  REPLACE) echo "{\"updateOne\":{\"filter\":{\"_id\":\"$id\"},\"update\":$v}}" ;;
  *) if [ "$v" = UNSET ]; then u="{\"\$unset\":{\"$f\":\"\"}}"; else u="{\"\$set\":{\"$f\":$v}}"; fi
     echo "{\"updateOne\":{\"filter\":{\"_id\":\"$id\"},\"update\":$u}}" ;;
  esac
done >"$WORK/refused.jsonl" <<'ROWS'
P account 5
P account "S"
P account UNSET
P amount "1"
P amount 0
P amount 2
P settlement 5
P settlement "LIM"
P settlement UNSET
P created "x"
P created 2
P state 5
P state "nope"
P state "confirmed"
P state "success"
P transfer 5
P transfer "order:S"
P attempt "1"
P attempt 2
P epoch 1
P owner "mallory"
P lease_until 1
P updated 1
P _id "P2"
P DELETE
P REPLACE {"account":"U","amount":1,"settlement":"LIM","state":"pending","transfer":"order:P","attempt":1,"created":1,"owner":null,"lease_until":0,"epoch":0,"updated":0}
C account "S"
C amount 8
C settlement "LIM"
C created 8
C state "pending"
C state "canceled"
C state "success"
C attempt 0
C attempt "2"
C epoch 0
C epoch -1
C owner 5
C lease_until "x"
C updated "x"
C transfer 5
C DELETE
F amount 3
F settlement "LIM"
F state "confirming"
F state "pending"
F state "canceled"
F attempt 0
F epoch 0
F DELETE
S account "P"
S amount 1
S settlement "LIM"
S state "confirmed"
S state "pending"
S state "canceled"
S transfer "order:P"
S attempt 2
S epoch 5
S owner "mallory"
S lease_until 5
S updated 5
S DELETE
X state "pending"
X state "confirming"
X state "success"
X settlement "LIM"
X transfer "order:S"
X attempt 2
ROWS
before=$(d find orders)
d bulk orders --file "$WORK/refused.jsonl" >"$WORK/refused.out" 2>"$WORK/err"
n=$(wc -l <"$WORK/refused.jsonl")
# (_id is immutable to every update: IMMUTABLE, exit 3 too)
jq -r '.error // "applied"' "$WORK/refused.out" >"$WORK/refused.err"
paste -d '\t' "$WORK/refused.err" "$WORK/refused.jsonl" | while IFS=$'\t' read -r err row; do
  case "$err" in
  VALIDATION | IMMUTABLE) ok ;;
  *) bad "attack: admitted ($err): $row" ;;
  esac
done
[ "$(wc -l <"$WORK/refused.out")" = "$n" ] && [ "$(d find orders)" = "$before" ] && ok ||
  bad "attack: the refused rows changed something ($(wc -l <"$WORK/refused.out") results of $n)"

# Admitted: each on an order of its own, then recovery and the audit.
cat >"$WORK/admitted.jsonl" <<'ROWS'
{"updateOne":{"filter":{"_id":"A1"},"update":{"$set":{"state":"confirming"}}}}
{"updateOne":{"filter":{"_id":"A2"},"update":{"$set":{"state":"canceled"}}}}
{"updateOne":{"filter":{"_id":"C3"},"update":{"$set":{"state":"confirmed"}}}}
{"updateOne":{"filter":{"_id":"F4"},"update":{"$set":{"state":"success","owner":null}}}}
{"updateOne":{"filter":{"_id":"C5"},"update":{"$set":{"transfer":"order:S"}}}}
{"updateOne":{"filter":{"_id":"F6"},"update":{"$set":{"transfer":"order:S"}}}}
{"updateOne":{"filter":{"_id":"C7"},"update":{"$set":{"attempt":2}}}}
{"updateOne":{"filter":{"_id":"D8"},"update":{"$set":{"attempt":2,"transfer":"order:D8:2"}}}}
{"updateOne":{"filter":{"_id":"C9"},"update":{"$set":{"owner":"mallory"}}}}
{"updateOne":{"filter":{"_id":"C10"},"update":{"$inc":{"epoch":99}}}}
{"updateOne":{"filter":{"_id":"C11"},"update":{"$set":{"lease_until":0,"updated":0}}}}
{"deleteOne":{"filter":{"_id":"X12"}}}
{"insertOne":{"document":{"_id":"X12","account":"U","amount":4096,"settlement":"LIM","state":"pending","transfer":"order:X12","attempt":1,"created":1,"owner":null,"lease_until":0,"epoch":0,"updated":1}}}
{"insertOne":{"document":{"_id":"I13","account":"U","amount":1,"settlement":"settlement","state":"success","transfer":"order:I13","attempt":1,"created":1,"owner":null,"lease_until":0,"epoch":1,"updated":1}}}
{"insertOne":{"document":{"_id":"I14","account":"U","amount":1,"settlement":"settlement","state":"confirmed","transfer":"order:I14","attempt":1,"created":1,"owner":null,"lease_until":0,"epoch":1,"updated":1}}}
ROWS
expect 0 "attack: the admitted rows" -- d bulk orders --file "$WORK/admitted.jsonl"
expect 3 "attack: recover (the orders it must leave alone are errors)" -- d recover --older-than-ms 0
expect 3 "attack: confirm of X12 (paid by LIM) refused" -- d order confirm X12
expect 5 "attack: the audit reports what is wrong" -- d audit --json
finding() { # KIND ORDER-OR-ACCOUNT: the audit has it
  jq -e --arg k "$1" --arg o "$2" '[.findings[] | select(.kind == $k and (.detail | test("(order |account .)" + $o + "[ :\u0027]")))] | length > 0' \
    "$WORK/out" >/dev/null && ok || bad "attack: no $1 finding for $2: $(jq -c '[.findings[] | [.kind, .detail]]' "$WORK/out")"
}
finding not_credited C3
finding bad_order C5
finding bad_order F6
finding not_credited F6
finding bad_order C7
finding attempt_skipped D8
finding bad_settlement LIM
finding not_credited I13
finding not_credited I14
[ "$(jq '[.findings[] | select(.pattern != "order")] | length' "$WORK/out")" = 0 ] && ok ||
  bad "attack: findings outside orders: $(jq -c '[.findings[] | select(.pattern != "order")]' "$WORK/out")"
d find orders | jq -r '"\(._id) \(.state)"' | sort >"$WORK/states"
want_states="A1 success
A2 canceled
C success
C10 success
C11 success
C3 confirmed
C5 confirming
C7 confirming
C9 success
D8 confirming
F success
F4 success
F6 confirmed
I13 success
I14 confirmed
P pending
P9 pending
S success
X canceled
X12 pending"
[ "$(<"$WORK/states")" = "$want_states" ] && ok ||
  bad "attack: states: $(tr '\n' ' ' <"$WORK/states")"
# Credited exactly once: S, the orders that ended success by the
# protocol (A1, C, C9-C11), and those credited before their row (F,
# F4, F6, D8's attempt 1); nothing else.
want=0
for id in S A1 C C9 C10 C11 F F4 F6 D8; do want=$((want + AMT[$id])); done
[ "$(bal U)" = "$want" ] && ok || bad "attack: U holds $(bal U), want $want"

finish
