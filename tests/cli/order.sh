#!/usr/bin/env bash
# The order CLI contract (issue 12, order confirmation after reference
# 003): create idempotent under its trade id (CONFLICT exit 3 when
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
grep -q "no account 'NOPE'" "$WORK/err" && ok || bad "unknown account message: $(cat "$WORK/err")"
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
grep -q "^doctx: CONFLICT: " "$WORK/err" && ok || bad "conflict message: $(cat "$WORK/err")"
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
d update orders '{"_id":"P2"}' '{"$set":{"state":"success"}}' >/dev/null
expect 5 "audit: a success order never credited" -- d audit
grep -q "not_credited" "$WORK/out" "$WORK/err" && ok || bad "finding: $(out)"

finish
