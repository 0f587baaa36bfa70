#!/usr/bin/env bash
# The reproducers of the transfer defects of docs/findings.md, each as it was filed,
# with what must hold now (docs/transfers.md):
#  1  payee credit overflow: two credits in flight to a payee near INT64_MAX
#     (the second is refused at mark time: its headroom is reserved), and
#     the plain audit reports a committed transfer that cannot finish;
#  2  a min_balance that is not an int64 (0.0, "50", absent) refuses debits
#     and the audit reports it;
#  3  an account deleted mid-transfer: the delete guard refuses it, and
#     when forced (--bypass-validation) the transfer never says succeeded,
#     stays committed, the audit reports it, and restoring the account
#     lets recovery finish it;
#  7  declines leave no tombstones: the payer's document is as small after
#     many declines as before (bytes counted, not time);
#  10 exact audit totals past int64, the amount 05 refused, OVERFLOW/TYPE
#     details naming the transfer, a lost transfer (FLUSHALL) exits 4.
# Runs on SQLite and, under tests/redis/run-redis.sh (cli phase), on both
# Redis targets.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/transfer.sh"

has() { # has FILE PATTERN LABEL
  grep -q -- "$2" "$1" && ok || bad "$3: '$2' not in: $(head -c 600 "$1")"
}
MAX=9223372036854775807

# ---- defect 1: payee credit overflow -------------------------------------------
# $1: "old" to start P without a ceiling (an account stored before ceilings:
# the first step that needs one gives it one).
overflow_case() {
  local tag=$1
  new_store "overflow_$tag"
  d account create P --balance 9223372036854775797 >/dev/null &&
    d account create A --balance 100 >/dev/null &&
    d account create B --balance 100 >/dev/null || { bad "d1 $tag: setup"; return; }
  if [ "$tag" = old ]; then
    d update accounts '{"_id":"P"}' '{"$unset":{"ceiling":""}}' --bypass-validation >/dev/null ||
      { bad "d1 $tag: unset ceiling"; return; }
  fi
  DOCTX_FAULT=transfer.credit_payee:crash d transfer A P 6 --id p1 >/dev/null 2>&1
  [ "$(state "$S" p1)" = committed ] && ok || bad "d1 $tag: p1 is $(state "$S" p1), not committed"
  # p1's 6 is reserved under P's ceiling: p2's 6 does not fit beside it.
  expect 1 "d1 $tag: second credit refused" -- d transfer B P 6 --id p2
  has "$WORK/out" "payee balance would overflow" "d1 $tag: p2 reason"
  expect 0 "d1 $tag: recover" -- d recover --older-than-ms 0
  [ "$(state "$S" p1)" = succeeded ] && ok || bad "d1 $tag: p1 is $(state "$S" p1) after recover"
  [ "$(balance P)" = 9223372036854775803 ] && [ "$(balance B)" = 100 ] && [ "$(balance A)" = 94 ] &&
    ok || bad "d1 $tag: balances P=$(balance P) A=$(balance A) B=$(balance B)"
  expect 0 "d1 $tag: audit clean" -- d audit --settled
}
overflow_case new
overflow_case old

# The plain audit reports a committed transfer that recovery cannot finish
# (its credit no longer fits: P's balance raised by hand past the ceiling,
# which only a write past the rules can do).
new_store overflow_audit
d account create P --balance 9223372036854775797 >/dev/null
d account create A --balance 100 >/dev/null
DOCTX_FAULT=transfer.credit_payee:crash d transfer A P 6 --id p1 >/dev/null 2>&1
d update accounts '{"_id":"P"}' "{\"\$set\":{\"balance\":$MAX}}" --bypass-validation >/dev/null
expect 5 "d1: plain audit reports the unfinishable transfer" -- d audit
has "$WORK/out" "unfinishable.*p1" "d1: audit finding"
d recover --older-than-ms 0 >"$WORK/out" 2>&1; echo "recover rc=$?" >>"$WORK/out"

# ---- defect 2: min_balance that is not an int64 ----------------------------------
new_store minbal
setup_accounts
for v in '0.0' '"50"' '{"x":1}'; do
  expect 3 "d2: validator refuses min_balance $v" -- \
    d update accounts '{"_id":"A"}' "{\"\$set\":{\"min_balance\":$v}}"
done
for set in '{"$set":{"min_balance":0.0}}' '{"$set":{"min_balance":"50"}}' \
  '{"$unset":{"min_balance":""}}'; do
  d update accounts '{"_id":"A"}' "$set" --bypass-validation >/dev/null ||
    { bad "d2: bypass $set"; continue; }
  expect 1 "d2: debit refused after $set" -- d transfer A B 1000
  has "$WORK/out" "min_balance is not an integer" "d2: reason after $set"
  [ "$(balance A)" = 1000 ] && ok || bad "d2: A=$(balance A) after $set"
  expect 5 "d2: audit after $set" -- d audit
  has "$WORK/out" "bad_min_balance\|min_balance" "d2: audit finding after $set"
done

# ---- defect 3: an account deleted mid-transfer --------------------------------------
new_store deleted
setup_accounts
# The delete guard: an account with a pending marker cannot be deleted.
DOCTX_FAULT=transfer.commit:pause start_bg "$WORK/g1.log" "$DOCTX" --store "$S" transfer A B 30 --id g1
pid=$BG_PID
if wait_stopped "$pid" 30; then
  expect 3 "d3: delete of a payee with a marker refused" -- d delete accounts '{"_id":"B"}'
  kill -CONT "$pid"
  bounded_wait "$pid" 60 "$WORK/g1.log" && ok || bad "d3: g1 exit $?: $(tail -2 "$WORK/g1.log")"
  [ "$(balance B)" = 1030 ] && ok || bad "d3: B=$(balance B) after g1"
else
  bounded_wait "$pid" 10 "$WORK/g1.log"; bad "d3: g1 never paused"
fi
# Forced past the guard: the credit cannot land, and the transfer says so.
DOCTX_FAULT=transfer.commit:pause start_bg "$WORK/g2.log" "$DOCTX" --store "$S" transfer A B 30 --id g2
pid=$BG_PID
if wait_stopped "$pid" 30; then
  d find accounts '{"_id":"B"}' >"$WORK/B.json" # the operator's backup
  expect 0 "d3: forced delete" -- d delete accounts '{"_id":"B"}' --bypass-validation
  kill -CONT "$pid"
  bounded_wait "$pid" 60 "$WORK/g2.log"
  rc=$?
  [ "$rc" = 3 ] && ok || bad "d3: g2 exit $rc, want 3: $(tail -3 "$WORK/g2.log")"
  grep -q '"state":"succeeded"' "$WORK/g2.log" && bad "d3: g2 reported succeeded" || ok
  has "$WORK/g2.log" "g2.*payee account B is gone" "d3: g2 error"
  [ "$(state "$S" g2)" = committed ] && ok || bad "d3: g2 is $(state "$S" g2)"
  expect 5 "d3: audit reports it" -- d audit
  has "$WORK/out" "unfinishable.*g2.*B" "d3: audit finding"
  expect 3 "d3: recovery reports it" -- d recover --older-than-ms 0
  # The operator restores B (docs/transfers.md) past the rules, as it was
  # deleted: a plain insert of an account is refused (only `account
  # create` makes one); recovery then finishes g2.
  expect 3 "d3: restore B without bypass: refused" -- d insert accounts "$(<"$WORK/B.json")"
  expect 0 "d3: restore B" -- d insert accounts "$(<"$WORK/B.json")" --bypass-validation
  expect 0 "d3: recover after restore" -- d recover --older-than-ms 0
  [ "$(state "$S" g2)" = succeeded ] && [ "$(balance B)" = 1060 ] && ok ||
    bad "d3: after restore g2 $(state "$S" g2) B=$(balance B)"
  expect 0 "d3: audit clean after restore" -- d audit --settled
else
  bounded_wait "$pid" 10 "$WORK/g2.log"; bad "d3: g2 never paused"
fi

# ---- defect 10: the smaller ones ------------------------------------------------------
new_store small
setup_accounts
# The amount 05: refused like +5 (no leading zeros), nothing recorded.
expect 2 "d10: amount 05 refused" -- d transfer A B 05
has "$WORK/err" "positive" "d10: amount 05 message"
[ "$(d count transfers)" = 0 ] && ok || bad "d10: 05 recorded a transfer"
# A TYPE error in a transfer step names the transfer (the payee's balance
# made a string behind the validator's back: the credit cannot add to it).
DOCTX_FAULT=transfer.commit:pause start_bg "$WORK/ty.log" "$DOCTX" --store "$S" transfer A B 7 --id ty1
pid=$BG_PID
if wait_stopped "$pid" 30; then
  d update accounts '{"_id":"B"}' '{"$set":{"balance":"x"}}' --bypass-validation >/dev/null
  kill -CONT "$pid"
  bounded_wait "$pid" 60 "$WORK/ty.log"
  rc=$?
  [ "$rc" = 3 ] && ok || bad "d10: TYPE exit $rc: $(tail -2 "$WORK/ty.log")"
  has "$WORK/ty.log" "doctx: TYPE: .*ty1" "d10: TYPE names the transfer"
else
  bounded_wait "$pid" 10 "$WORK/ty.log"; bad "d10: ty1 never paused"
fi
# A store error that outlasts the retries (disk full, Redis OOM, a corrupt
# page; here injected) is printed with the store's detail and the
# transfer's name, by transfer and by recover alike (exit 4), and the
# document printed is the one read after the error.
new_store errdetail
setup_accounts
F=$(for i in 1 2 3 4 5 6 7 8; do printf 'transfer.credit_payee:error:%d,' "$i"; done)
F=${F%,}
expect 4 "d10: store error in transfer" -- env DOCTX_FAULT="$F" "$DOCTX" --store "$S" transfer A B 5 --id e1
has "$WORK/err" "doctx: FAULT: transfer e1: injected error at fault point transfer.credit_payee" "d10: transfer error detail"
has "$WORK/out" '"_id":"e1".*"state":"committed"' "d10: document after the error"
expect 4 "d10: store error in recover" -- env DOCTX_FAULT="$F" "$DOCTX" --store "$S" recover --older-than-ms 0
has "$WORK/err" "doctx: FAULT: transfer e1: injected error at fault point transfer.credit_payee" "d10: recover error detail"
expect 0 "d10: recover after the store error" -- d recover --older-than-ms 0
[ "$(state "$S" e1)" = succeeded ] && ok || bad "d10: e1 is $(state "$S" e1)"
# A transfer the store lost while it ran (FLUSHALL on Redis; here its
# document deleted by force) exits 4 and prints no stale document.
new_store lost
setup_accounts
DOCTX_FAULT=transfer.commit:pause start_bg "$WORK/lost.log" "$DOCTX" --store "$S" transfer A B 9 --id lost1
pid=$BG_PID
if wait_stopped "$pid" 30; then
  d delete transfers '{"_id":"lost1"}' --bypass-validation >/dev/null
  kill -CONT "$pid"
  bounded_wait "$pid" 60 "$WORK/lost.log"
  rc=$?
  [ "$rc" = 4 ] && ok || bad "d10: lost transfer exit $rc, want 4: $(tail -2 "$WORK/lost.log")"
  has "$WORK/lost.log" "lost1.*vanished" "d10: lost transfer message"
  grep -q '^{' "$WORK/lost.log" && bad "d10: printed a stale document: $(<"$WORK/lost.log")" || ok
else
  bounded_wait "$pid" 10 "$WORK/lost.log"; bad "d10: lost1 never paused"
fi
# Audit totals are exact past int64 (tampered balances and opening
# balances, with their opening records to match): printed in full, never
# wrapped.
new_store wide
setup_accounts
for a in A B; do
  d update accounts "{\"_id\":\"$a\"}" "{\"\$set\":{\"balance\":$MAX,\"opening_balance\":$MAX,\"ceiling\":$MAX}}" --bypass-validation >/dev/null
  d update openings "{\"_id\":\"$a\"}" "{\"\$set\":{\"opening_balance\":$MAX}}" --bypass-validation >/dev/null
done
expect 0 "d10: audit of wide sums" -- d audit
has "$WORK/out" "opening total 18446744073709551614, balances 18446744073709551614" "d10: exact totals"
d update accounts '{"_id":"B"}' '{"$set":{"opening_balance":-9223372036854775808}}' --bypass-validation >/dev/null
expect 5 "d10: audit of wide mismatch" -- d audit
has "$WORK/out" "conservation.*18446744073709551614" "d10: exact conservation finding"

# ---- defect 7: declines leave no tombstones -------------------------------------------
# (tests/txn/transfer_declines.c counts the bytes after 10,000 declines; this
# is the CLI's view of the same.)
new_store declines
setup_accounts
before=$(d find accounts '{"_id":"A"}' | wc -c)
for i in 1 2 3; do d transfer A B 5000 >/dev/null; done
[ "$(d find accounts '{"_id":"A"}' | wc -c)" = "$before" ] && ok ||
  bad "d7: declines grew A: $before -> $(d find accounts '{"_id":"A"}')"

# ---- brief item 7: the executor recognises its own write after a lost reply --------
# DOCTX_FAULT=POINT:lost applies the step's write and then reports it
# UNAVAILABLE, as Redis ?wait=N or a dropped connection can; the retry then
# matches nothing.  A claim whose reply was lost must be taken for the
# executor's own, not waited out and rolled back as "abandoned".
new_store lost_reply
setup_accounts
n=0
# (A synchronous transfer is recorded already claimed: transfer.claim is
# the worker's, below.)
for p in transfer.submit transfer.debit transfer.mark_payee \
  transfer.commit transfer.clear_payer transfer.credit_payee transfer.finish; do
  n=$((n + 1))
  expect 0 "item 7: lost reply at $p" -- env DOCTX_FAULT=$p:lost timeout 30 \
    "$DOCTX" --store "$S" transfer A B 1 --id "lr$n" --deadline-ms 10000
  has "$WORK/err" "fault: $p lost" "item 7: $p reached"
  [ "$(state "$S" "lr$n")" = succeeded ] && ok || bad "item 7: lr$n ($p) is $(state "$S" "lr$n")"
done
[ "$(balance A)" = $((1000 - n)) ] && [ "$(balance B)" = $((1000 + n)) ] && ok ||
  bad "item 7: A=$(balance A) B=$(balance B) after $n transfers"
# The worker's claim of a queued transfer.
d transfer A B 1 --id lrw --async >/dev/null
expect 0 "item 7: worker claim lost" -- env DOCTX_FAULT=transfer.claim:lost timeout 30 \
  "$DOCTX" --store "$S" worker --once --deadline-ms 10000
[ "$(state "$S" lrw)" = succeeded ] && ok || bad "item 7: lrw is $(state "$S" lrw)"
# Recovery's takeover of an abandoned transfer, and a cancel's.
DOCTX_FAULT=transfer.mark_payee:crash d transfer A B 1 --id lrt >/dev/null 2>&1
expect 0 "item 7: takeover lost" -- env DOCTX_FAULT=transfer.recover.takeover:lost \
  timeout 30 "$DOCTX" --store "$S" recover --older-than-ms 0
[ "$(state "$S" lrt)" = failed ] && ok || bad "item 7: lrt is $(state "$S" lrt) after one recover"
DOCTX_FAULT=transfer.mark_payee:crash d transfer A B 1 --id lrc >/dev/null 2>&1
expect 0 "item 7: cancel lost" -- env DOCTX_FAULT=transfer.cancel.begin:lost \
  timeout 30 "$DOCTX" --store "$S" transfer cancel lrc
[ "$(state "$S" lrc)" = failed ] && ok || bad "item 7: lrc is $(state "$S" lrc) after cancel"
expect 0 "item 7: audit clean" -- d audit --settled

finish
