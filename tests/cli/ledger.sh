#!/usr/bin/env bash
# The ledger CLI contract (docs/ledger.md): accounts and limits, posting with
# dense per-account seqIds, the exit codes (funds refused 1 naming the
# account and recording nothing; bad legs or an unknown account 2; a
# conflicting id reuse, voiding a posted entry, posting a voided or expired
# one 3; post-pending of a posted entry 0), idempotent ids, pending entries
# and expiry, balances (--at-seq), statements with the running balance,
# reversal, int64 overflow refused, and the audit finding tampering.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"

new_store ledger
# j FILTER: jq over the last output's JSON, compact (strings raw); lines
# FILTER: the same over its JSON lines as one array.  (jq, not python: a
# python start costs over a second of wall time on a loaded machine.)
j() { jq -rc "$1" <"$WORK/out"; }
lines() { jq -rcs "$1" <"$WORK/out"; }
entries() { d count ledger_entries; }
# legs_sha ID LEG...: the digest an entry's insert stores (docs/ledger.md,
# "The legs' digest"), each LEG account:value:seqId[:min|-[:max|-]], built
# here from the documented encoding, not from the C code: an entry written
# past the rules that stands for a live one carries it.
be() { local v=$1 k=$2 s; for ((s = 8 * (k - 1); s >= 0; s -= 8)); do printf "\\x$(printf %02x $(((v >> s) & 255)))"; done; }
leg_field() { if [ -z "$1" ] || [ "$1" = - ]; then printf '\x00'; be 0 8; else printf '\x01'; be "$1" 8; fi; }
legs_sha() {
  local id=$1 leg acc v s mn mx
  shift
  { printf 'doctx ledger legs 1\x00'; be ${#id} 4; printf %s "$id"; be $# 4
    for leg; do
      IFS=: read -r acc v s mn mx <<<"$leg"
      be ${#acc} 4; printf %s "$acc"
      leg_field "$v"; leg_field "$s"; leg_field "$mn"; leg_field "$mx"
    done; } | sha256sum | cut -d' ' -f1
}

# Accounts: min_balance 0 by default, a number, or none.
expect 0 "account create" -- d ledger account create A
[ "$(j '[.min_balance, .cache]')" = '[0,{"balance":0,"seqId":0}]' ] && ok || bad "account: $(out)"
expect 0 "account create none" -- d ledger account create B --min-balance none
[ "$(j .min_balance)" = null ] && ok || bad "account none: $(out)"
expect 0 "account create -50" -- d ledger account create C --min-balance -50
expect 3 "account exists" -- d ledger account create A
expect 2 "account create bad limit" -- d ledger account create Z --min-balance x
expect 1 "limit of no such account" -- d ledger account limit Z 5

# Funds: A holds nothing, so a debit is refused (exit 1, A named), nothing
# recorded.
expect 1 "debit refused for funds" -- d ledger post A:-5 B:5
grep -q "INSUFFICIENT: account 'A'" "$WORK/err" && ok || bad "funds message: $(<"$WORK/err")"
[ "$(entries)" = 0 ] && ok || bad "a refused post recorded something"

# Bad legs: exit 2, nothing recorded.
expect 2 "legs not summing to zero" -- d ledger post A:5 B:-4
expect 2 "zero value" -- d ledger post A:0 B:0
expect 2 "non-integer value" -- d ledger post A:1.5 B:-1.5
expect 2 "unknown account" -- d ledger post A:5 Q:-5
grep -q "'Q'" "$WORK/err" && ok || bad "unknown account not named: $(<"$WORK/err")"
expect 2 "repeated account" -- d ledger post A:5 A:-5
expect 2 "one leg" -- d ledger post A:5
expect 2 "no colon" -- d ledger post A5 B-5
[ "$(entries)" = 0 ] && ok || bad "bad input recorded something"

# Posting: a 3-leg entry, seqIds from 1, dense per account.
expect 0 "post 3 legs" -- d ledger post B:-1000 A:700 C:300 --id fund
[ "$(j '[[.changes[] | [.account, .value, .seqId]], .state]')" = \
  '[[["B",-1000,1],["A",700,1],["C",300,1]],"posted"]' ] && ok || bad "entry: $(out)"
expect 0 "post again" -- d ledger post A:-200 B:200 --id e2
[ "$(j '[.changes[].seqId]')" = "[2,2]" ] && ok || bad "seqIds: $(out)"

# Idempotency: same id and legs -> the existing entry; other legs -> 3.
expect 0 "same id, same legs" -- d ledger post A:-200 B:200 --id e2
[ "$(j ._id)" = e2 ] && [ "$(entries)" = 2 ] && ok || bad "idempotent post: $(out)"
expect 3 "same id, other legs" -- d ledger post A:-201 B:201 --id e2
grep -q "CONFLICT" "$WORK/err" && ok || bad "conflict message: $(<"$WORK/err")"

# Balance and the exact field set; seq is the latest seqId.
expect 0 "balance" -- d ledger balance A
[ "$(j '[keys, .balance, .available, .pending_debits, .seq]')" = \
  '[["account","available","balance","pending_debits","seq"],500,500,0,2]' ] && ok || bad "balance: $(out)"
expect 0 "balance at seq 1" -- d ledger balance A --at-seq 1
[ "$(j '[.balance, .seq]')" = "[700,1]" ] && ok || bad "balance --at-seq: $(out)"
expect 2 "balance past the latest seq" -- d ledger balance A --at-seq 9
expect 1 "balance of no such account" -- d ledger balance Q

# The limit check is on the available balance; C may go to -50.
expect 0 "debit into C's negative limit" -- d ledger post C:-350 B:350
expect 1 "past C's limit" -- d ledger post C:-1 B:1

# Pending entries: the debit is held against available, not moved.
expect 0 "pending" -- d ledger post A:-100 B:100 --id p1 --pending
[ "$(j .state)" = pending ] && ok || bad "pending: $(out)"
expect 0 "balance with a pending debit" -- d ledger balance A
[ "$(j '[.balance, .available, .pending_debits]')" = "[500,400,100]" ] && ok || bad "held: $(out)"
expect 1 "a debit only the held money would cover" -- d ledger post A:-450 B:450
expect 0 "post-pending" -- d ledger post-pending p1
[ "$(j .state)" = posted ] && ok || bad "post-pending: $(out)"
expect 0 "post-pending of a posted entry" -- d ledger post-pending p1
expect 3 "void of a posted entry" -- d ledger void p1
expect 0 "pending p2" -- d ledger post A:-50 B:50 --id p2 --pending
expect 0 "void" -- d ledger void p2
[ "$(j .state)" = voided ] && ok || bad "void: $(out)"
expect 3 "post-pending of a voided entry" -- d ledger post-pending p2
expect 0 "pending p3 with a short timeout" -- d ledger post A:-50 B:50 --id p3 --pending --timeout-ms 1
sleep 0.05
expect 3 "post-pending past the timeout" -- d ledger post-pending p3
expect 0 "show p3" -- d ledger show p3
[ "$(j .state)" = expired ] && ok || bad "expired: $(out)"
expect 2 "--timeout-ms without --pending" -- d ledger post A:-1 B:1 --timeout-ms 5
expect 1 "void of no such entry" -- d ledger void nope
expect 0 "balance after the pending outcomes" -- d ledger balance A
[ "$(j '[.balance, .available, .seq]')" = "[400,400,5]" ] && ok || bad "after pending: $(out)"

# Statement: one line per valid leg, running balance, uncommitted included,
# --from-seq inclusive, --limit.
expect 0 "statement" -- d ledger statement A
[ "$(lines '[.[] | [.entry, .seq, .value, .balance, .state]]')" = \
  '[["fund",1,700,700,"uncommitted"],["e2",2,-200,500,"uncommitted"],["p1",3,-100,400,"uncommitted"]]' ] &&
  ok || bad "statement: $(out)"
[ "$(lines '.[0] | keys')" = '["at","balance","entry","seq","state","value"]' ] && ok || bad "statement fields: $(out)"
expect 0 "statement --from-seq 2 --limit 1" -- d ledger statement A --from-seq 2 --limit 1
[ "$(lines '[.[] | [.entry, .balance]]')" = '[["e2",500]]' ] && ok || bad "statement from: $(out)"

# The committer: worker commits in per-account seqId order and moves the
# caches; the statement says committed; the audit is clean.  Its summary
# counts the entries it committed (one claim commits a round of them).
uncommitted=$(d count ledger_entries '{"proc":"uncommitted"}')
expect 0 "worker" -- d worker --once
[ "$uncommitted" -ge 3 ] && [ "$(j .patterns.ledger.ran.committed)" = "$uncommitted" ] &&
  ok || bad "worker's count of $uncommitted entries: $(out)"
expect 0 "statement committed" -- d ledger statement A
[ "$(lines '[.[].state] | unique')" = '["committed"]' ] && ok || bad "committed: $(out)"
expect 0 "account cache" -- d find ledger_accounts '{"_id":"A"}'
[ "$(j .cache)" = '{"balance":400,"seqId":5}' ] && ok || bad "cache: $(out)"
expect 0 "audit" -- d audit --settled

# Limits change later: above the balance, later debits are refused,
# history untouched.
expect 0 "limit above the balance" -- d ledger account limit A 1000
expect 1 "debit under the raised limit" -- d ledger post A:-1 B:1
expect 0 "balance unchanged" -- d ledger balance A
[ "$(j '[.balance, .seq]')" = "[400,5]" ] && ok || bad "history touched: $(out)"
expect 0 "audit after the limit change" -- d audit --settled
expect 0 "limit none" -- d ledger account limit A none
expect 0 "debit below zero with no limit" -- d ledger post A:-500 B:500 --id e9
expect 0 "limit back to 0" -- d ledger account limit A 0

# Reversal: a new entry with the negated legs; the original untouched.
expect 0 "reverse" -- d ledger reverse e9 --id r9
[ "$(j '[.reverses, [.changes[] | [.account, .value]]]')" = \
  '["e9",[["A",500],["B",-500]]]' ] && ok || bad "reversal: $(out)"
expect 0 "reverse again returns it" -- d ledger reverse e9
[ "$(j ._id)" = r9 ] && ok || bad "reverse again: $(out)"
expect 3 "reverse again under another id" -- d ledger reverse e9 --id r10
expect 3 "reverse of a voided entry" -- d ledger reverse p2
expect 0 "show e9" -- d ledger show e9
[ "$(j .state)" = posted ] && ok || bad "original changed: $(out)"

# int64: a balance must stay representable.
d ledger account create X --min-balance none >/dev/null
d ledger account create Y --min-balance none >/dev/null
expect 0 "post INT64_MAX" -- d ledger post X:-9223372036854775807 Y:9223372036854775807
expect 3 "overflow refused" -- d ledger post X:-1 Y:1
grep -q "OVERFLOW: account 'Y'" "$WORK/err" && ok || bad "overflow message: $(<"$WORK/err")"
expect 2 "value past int64" -- d ledger post X:-9223372036854775808 Y:9223372036854775808

# show and list.
expect 1 "show of no such entry" -- d ledger show nope
expect 0 "list --account A" -- d ledger list --account A
[ "$(lines '[.[]._id]')" = '["fund","e2","p1","p2","p3","e9","r9"]' ] && ok || bad "list: $(out)"
expect 0 "list --limit 2" -- d ledger list --limit 2
[ "$(lines length)" = 2 ] && ok || bad "list --limit: $(out)"
# post-many: one entry per line (stdin, or --file), each ending as `ledger
# post` would end it, in line order; one result line each; the exit code is
# the most severe line's.
d ledger account create M1 >/dev/null
d ledger account create M2 >/dev/null
d ledger account create M3 >/dev/null
d ledger post B:-40 M1:40 >/dev/null
cat >"$WORK/many" <<'EOF'
{"id":"m1","legs":[{"account":"M1","value":-30},{"account":"M2","value":30}]}
{"legs":[{"account":"M1","value":-30},{"account":"M3","value":30}]}
{"legs":[{"account":"M2","value":-5},{"account":"M3","value":4}]}
{"legs":[{"account":"M2","value":-5},{"account":"Q","value":5}]}
{"id":"m1","legs":[{"account":"M1","value":-30},{"account":"M2","value":30}]}
{"id":"m1","legs":[{"account":"M1","value":-31},{"account":"M2","value":31}]}
{"id":"m7","legs":[{"account":"M2","value":-10},{"account":"M3","value":10}],"pending":true,"timeout_ms":60000}
EOF
expect 3 "post-many: the worst line is a conflict" -- d ledger post-many --file "$WORK/many"
[ "$(lines '[.[] | if .error then [.error, .line] else [._id, .state, [.changes[].seqId]] end]')" = \
  '[["m1","posted",[2,1]],["INSUFFICIENT",2],["INVAL",3],["NOACCOUNT",4],["m1","posted",[2,1]],["CONFLICT",6],["m7","pending",[2,1]]]' ] &&
  ok || bad "post-many lines: $(out)"
grep -q "account 'M1'" "$WORK/out" && ok || bad "post-many: the refusal names no account: $(out)"
expect 0 "balance after post-many" -- d ledger balance M2
[ "$(j '[.balance, .available, .seq]')" = "[30,20,2]" ] && ok || bad "post-many balance: $(out)"
n=$(entries)
printf '%s\n' '{"legs":[{"account":"M2","value":-1},{"account":"M3","value":1}]}' >"$WORK/m0"
expect 0 "post-many from stdin" -- d ledger post-many <"$WORK/m0"
[ "$(j '[.changes[].seqId]')" = "[3,2]" ] && ok || bad "post-many stdin: $(out)"
printf '%s\n' '{"legs":[{"account":"M2","value":-1},{"account":"M3","value":1}]}' \
  '{"legs":[{"account":"M2","value":"1"},{"account":"M3","value":-1}]}' >"$WORK/mbad"
expect 2 "post-many: a malformed line posts nothing" -- d ledger post-many --file "$WORK/mbad"
grep -q "line 2" "$WORK/err" && [ "$(entries)" = $((n + 1)) ] && ok || bad "malformed: $(<"$WORK/err") $(entries)"
printf 'not json\n' >"$WORK/mbad"
expect 2 "post-many: a line that is not JSON" -- d ledger post-many --file "$WORK/mbad"
expect 2 "post-many takes no arguments" -- d ledger post-many x
# Every line refused by the library's check: each says why, and a SQLite
# path with no store stays without one (bad input creates nothing).
printf '%s\n' '{"legs":[{"account":"M2","value":-1},{"account":"M3","value":2}]}' \
  '{"legs":[{"account":"M2","value":1}]}' >"$WORK/mbad"
expect 2 "post-many: every line refused by the check" -- d ledger post-many --file "$WORK/mbad"
[ "$(j '[.line, .error]' | tr -d '\n')" = '[1,"INVAL"][2,"INVAL"]' ] && ok || bad "all refused: $(out)"
if [ -z "${DTX_TEST_STORE_CMD:-}" ]; then
  rc=0; "$DOCTX" --store "sqlite:$WORK/none.db" ledger post-many --file "$WORK/mbad" >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] && [ ! -e "$WORK/none.db" ] && ok || bad "all refused, no store: exit $rc, $(ls "$WORK" | grep none)"
fi
expect 2 "post-many: --id does not apply" -- d ledger post-many --id x --file "$WORK/m0"
printf '%s\n' '{"legs":[{"account":"M1","value":-1000},{"account":"M3","value":1000}]}' >"$WORK/m0"
expect 1 "post-many: only a refusal for funds" -- d ledger post-many --file - <"$WORK/m0"
d ledger void m7 >/dev/null
expect 0 "faults lists the ledger's points" -- d faults
grep -q "^ledger.post$" "$WORK/out" && grep -q "^ledger.commit$" "$WORK/out" && ok || bad "faults: $(out)"
d worker --once >/dev/null
expect 0 "audit before tampering" -- d audit --settled

# The upper limit (docs/ledger.md, "The upper limit"): a credit must
# leave balance + pending credits <= max_balance (exit 1 naming the
# account, nothing recorded); the leg records the max; account limit
# changes the floor, the max or both, the other kept; a max below the
# floor is refused (exit 2); a max under the balance is accepted and
# refuses credits only.
expect 0 "account create --max-balance" -- d ledger account create MX --max-balance 100
[ "$(j '[.min_balance, .max_balance]')" = '[0,100]' ] && ok || bad "max account: $(out)"
expect 2 "max below the floor at creation" -- d ledger account create MY --min-balance 10 --max-balance 5
grep -q "max_balance 5 is below min_balance 10" "$WORK/err" && ok || bad "max < min: $(<"$WORK/err")"
expect 2 "max not an int64" -- d ledger account create MY --max-balance x
expect 1 "MY not created" -- d ledger balance MY
expect 0 "credit up to 60" -- d ledger post B:-60 MX:60
[ "$(j '.changes[1].max')" = 100 ] && ok || bad "leg max: $(out)"
expect 0 "a held credit of 40" -- d ledger post B:-40 MX:40 --pending --id mxh
n=$(entries)
expect 1 "a credit over the max, the held credit counted" -- d ledger post B:-1 MX:1
grep -q "INSUFFICIENT: account 'MX': a credit of 1 would take the balance 60 plus pending credits 40 to 101, above its max_balance 100" "$WORK/err" &&
  [ "$(entries)" = "$n" ] && ok || bad "over the max: $(<"$WORK/err") $(entries)"
expect 0 "void the hold" -- d ledger void mxh
expect 0 "a credit into the room" -- d ledger post B:-40 MX:40 --id mx40
expect 0 "max lowered under the balance" -- d ledger account limit MX --max-balance 50
[ "$(j '[.min_balance, .max_balance]')" = '[0,50]' ] && ok || bad "max lowered: $(out)"
expect 1 "a credit refused under it" -- d ledger post B:-1 MX:1
expect 0 "a debit still allowed" -- d ledger post MX:-30 B:30
expect 2 "a floor above the max" -- d ledger account limit MX 60
grep -q "min_balance 60 would be above its max_balance 50" "$WORK/err" && ok || bad "min > max: $(<"$WORK/err")"
expect 2 "a max below the floor" -- d ledger account limit C --max-balance -60
expect 2 "limit without a limit" -- d ledger account limit MX
expect 1 "max of no such account" -- d ledger account limit Z --max-balance 5
expect 0 "floor and max in one step" -- d ledger account limit MX 5 --max-balance 80
[ "$(j '[.min_balance, .max_balance]')" = '[5,80]' ] && ok || bad "both: $(out)"
expect 0 "max none" -- d ledger account limit MX --max-balance none
[ "$(j '[.min_balance, .max_balance]')" = '[5,null]' ] && ok || bad "max none: $(out)"
expect 0 "a credit with no max" -- d ledger post B:-1000 MX:1000
[ "$(j '.changes[1] | has("max")')" = false ] && ok || bad "no max recorded: $(out)"
expect 0 "reversal of it (a debit of MX)" -- d ledger reverse mx40
expect 3 "a plain write of max_balance refused" -- d update ledger_accounts '{"_id":"MX"}' '{"$set":{"max_balance":5}}'
expect 0 "audit clean with the limits" -- d audit
# Past the rules: a leg's recorded max lowered, a max under the floor.
expect 0 "a leg's max lowered past the rules" -- d update ledger_entries '{"_id":"mx40"}' '{"$set":{"changes.1.max":10}}' --bypass-validation
expect 5 "audit finds the credit above its max" -- d audit
grep -q "above_limit.*MX" "$WORK/out" && ok || bad "above_limit: $(out)"
d update ledger_entries '{"_id":"mx40"}' '{"$set":{"changes.1.max":100}}' --bypass-validation >/dev/null
expect 0 "a max under the floor past the rules" -- d update ledger_accounts '{"_id":"MX"}' '{"$set":{"max_balance":1}}' --bypass-validation
expect 5 "audit finds the limits" -- d audit
grep -q "bad_limits.*MX" "$WORK/out" && ok || bad "bad_limits: $(out)"
d update ledger_accounts '{"_id":"MX"}' '{"$set":{"max_balance":null}}' --bypass-validation >/dev/null
expect 0 "audit clean again" -- d audit

# Balancing legs (docs/ledger.md, "Balancing legs"): ACCT:-max[=CAP]
# debits as much as the floor (holds included) and the max leg's
# max_balance (pending credits included) allow, up to CAP; the max leg
# takes the same; the entry records the amounts; nothing to move exit 1.
d ledger account create SW >/dev/null && d ledger account create SX --max-balance 100 >/dev/null &&
  d ledger account create SY >/dev/null && d ledger post B:-70 SW:70 >/dev/null || bad "balancing: setup"
expect 0 "a hold on SW" -- d ledger post SW:-20 SY:20 --pending --id swh
expect 0 "sweep SW: the floor and the hold" -- d ledger post SW:-max SY:max --id sw1
[ "$(j '[.changes[] | [.account, .value]]')" = '[["SW",-50],["SY",50]]' ] && ok || bad "sweep amount: $(out)"
expect 0 "the same sweep again: the entry" -- d ledger post SW:-max SY:max --id sw1
[ "$(j ._id)" = sw1 ] && ok || bad "sweep retry: $(out)"
expect 1 "nothing left to sweep" -- d ledger post SW:-max SY:max
grep -q "INSUFFICIENT: account 'SW': a -max leg moves nothing" "$WORK/err" && ok || bad "nothing to move: $(<"$WORK/err")"
expect 0 "void the hold" -- d ledger void swh
expect 0 "a capped sweep" -- d ledger post SW:-max=15 SY:max
[ "$(j '[.changes[].value]')" = '[-15,15]' ] && ok || bad "capped: $(out)"
expect 0 "a pending credit to SX" -- d ledger post B:-30 SX:30 --pending
expect 0 "a fill up to SX's max, the pending credit counted" -- d ledger post B:-max=1000 SX:max
[ "$(j '[.changes[].value]')" = '[-70,70]' ] && ok || bad "fill: $(out)"
expect 1 "SX full" -- d ledger post B:-max=5 SX:max
grep -q "account 'SX': a -max leg moves nothing" "$WORK/err" && ok || bad "SX full: $(<"$WORK/err")"
expect 0 "a pair with fixed legs" -- d ledger post SY:-max=5 SW:max B:-1 C:1
[ "$(j '[.changes[] | [.account, .value]]')" = '[["SY",-5],["SW",5],["B",-1],["C",1]]' ] && ok || bad "pair + fixed: $(out)"
n=$(entries)
expect 2 "a -max leg on an account without a floor needs a cap" -- d ledger post B:-max SY:max
expect 2 "two -max legs" -- d ledger post SW:-max SY:-max
expect 2 "a -max leg without a max leg" -- d ledger post SW:-max SY:5 B:-5
expect 2 "a cap of 0" -- d ledger post SW:-max=0 SY:max
expect 2 "a cap past int64" -- d ledger post SW:-max=9223372036854775808 SY:max
expect 2 "a bad word" -- d ledger post SW:-maxx SY:max
[ "$(entries)" = "$n" ] && ok || bad "a refused pair recorded something"
printf '%s\n' '{"legs":[{"account":"SY","value":"-max=3"},{"account":"SW","value":"max"}]}' >"$WORK/pmx"
expect 0 "post-many: a balancing pair" -- d ledger post-many --file "$WORK/pmx"
[ "$(j '[.changes[].value]')" = '[-3,3]' ] && ok || bad "post-many pair: $(out)"

# Partial post of a hold (docs/ledger.md, "Partial post of a hold"):
# each named leg posts 0..what it holds, the others 0, the rest released,
# in one step; a differential against post-pending in full and void on
# twin accounts: the same balances and the same entry but for ids and
# times.
for t in 1 2 3; do
  d ledger account create HA$t >/dev/null && d ledger account create HB$t >/dev/null &&
    d ledger post B:-100 HA$t:100 >/dev/null || bad "partial: setup $t"
done
twin() { # T: HA/HB T's balances and available
  echo "$(d ledger balance HA$1 | jq -c '[.balance, .available]') $(d ledger balance HB$1 | jq -c '[.balance, .available]')"
}
shape() { # ID: the entry without ids, accounts, times
  d ledger show "$1" | jq -c '[.state, [.changes[].value], .amounts]'
}
d ledger post HA1:-60 HB1:60 --pending --id hf1 >/dev/null && d ledger post HA2:-60 HB2:60 --pending --id hf2 >/dev/null || bad "partial: holds"
expect 0 "post-pending in full" -- d ledger post-pending hf1
expect 0 "partial: all of every leg" -- d ledger post-pending hf2 --amounts HA2:-60,HB2:60
[ "$(twin 1)" = "$(twin 2)" ] && [ "$(shape hf1)" = "$(shape hf2)" ] && ok || bad "post all != post-pending: $(twin 1) $(twin 2) $(shape hf1) $(shape hf2)"
d ledger post HA1:-30 HB1:30 --pending --id hv1 >/dev/null && d ledger post HA2:-30 HB2:30 --pending --id hv2 >/dev/null || bad "partial: holds 2"
expect 0 "void" -- d ledger void hv1
expect 0 "partial: 0 everywhere" -- d ledger post-pending hv2 --amounts HA2:0
[ "$(twin 1)" = "$(twin 2)" ] && [ "$(shape hv1)" = "$(shape hv2)" ] && [ "$(shape hv2 | jq -r '.[0]')" = voided ] && ok || bad "post 0 != void: $(twin 1) $(twin 2) $(shape hv1) $(shape hv2)"
expect 0 "a hold of 30 on HA3" -- d ledger post HA3:-30 HB3:30 --pending --id hp
expect 2 "more than held" -- d ledger post-pending hp --amounts HA3:-31,HB3:31
grep -q "account 'HA3' holds -30, so it posts 0 to -30, not -31" "$WORK/err" && ok || bad "over held: $(<"$WORK/err")"
expect 2 "the other sign" -- d ledger post-pending hp --amounts HA3:5,HB3:-5
expect 2 "not summing to zero" -- d ledger post-pending hp --amounts HA3:-10,HB3:5
expect 2 "an account the entry lacks" -- d ledger post-pending hp --amounts HA3:-10,HB1:10
expect 2 "an amount twice" -- d ledger post-pending hp --amounts HA3:-10,HA3:-10
expect 2 "a bad amount" -- d ledger post-pending hp --amounts HA3:x
expect 2 "--post-id without --amounts" -- d ledger post-pending hp --post-id q
[ "$(d ledger show hp | jq -r .state)" = pending ] && ok || bad "a refused partial post changed the hold"
expect 0 "post 10 of the 30" -- d ledger post-pending hp --amounts HA3:-10,HB3:10 --post-id pp1
[ "$(j '[.state, .amounts, .post_id]')" = '["posted",[-10,10],"pp1"]' ] && ok || bad "partial: $(out)"
[ "$(twin 3)" = '[90,90] [10,10]' ] && ok || bad "partial balances: $(twin 3)"
expect 0 "the same post again" -- d ledger post-pending hp --amounts HA3:-10,HB3:10 --post-id pp1
expect 3 "another post id" -- d ledger post-pending hp --amounts HA3:-10,HB3:10 --post-id pp2
expect 3 "other amounts" -- d ledger post-pending hp --amounts HA3:-20,HB3:20 --post-id pp1
expect 3 "post-pending in full after it" -- d ledger post-pending hp
expect 0 "statement shows the amount" -- d ledger statement HA3
[ "$(lines '.[-1].value')" = -10 ] && ok || bad "statement: $(out)"
expect 0 "reverse the partial post" -- d ledger reverse hp --id hpr
[ "$(j '[.changes[].value]')" = '[10,-10]' ] && [ "$(twin 3)" = '[100,100] [0,0]' ] && ok || bad "reverse partial: $(out) $(twin 3)"
expect 0 "the committer and the audit" -- d worker --once
expect 0 "audit settled" -- d audit --settled
expect 3 "a plain write of amounts refused" -- d update ledger_entries '{"_id":"hp"}' '{"$set":{"amounts":[-30,30]}}'
expect 0 "amounts changed past the rules" -- d update ledger_entries '{"_id":"hp"}' '{"$set":{"amounts":[-40,40]}}' --bypass-validation
expect 5 "audit finds the amounts" -- d audit
grep -q "bad_amounts.*hp" "$WORK/out" && ok || bad "bad_amounts: $(out)"
d update ledger_entries '{"_id":"hp"}' '{"$set":{"amounts":[-10,10]}}' --bypass-validation >/dev/null
expect 0 "audit clean again" -- d audit

# Tampering: entries and accounts are never deleted, and a plain write
# may change no leg and no cache (the transition rules, docs/ledger.md);
# past the rules, a changed leg or a wrong cache is found by the audit
# (exit 5).
expect 3 "delete of an entry refused" -- d delete ledger_entries '{"_id":"e2"}'
expect 3 "a leg of value 0 refused" -- d update ledger_entries '{"_id":"e2"}' '{"$set":{"changes.0.value":0}}'
expect 3 "a leg's value changed: refused" -- d update ledger_entries '{"_id":"e2"}' '{"$set":{"changes.0.value":-201}}'
grep -q "changes may not change" "$WORK/err" && ok || bad "leg: $(<"$WORK/err")"
expect 0 "a leg's value changed past the rules" -- d update ledger_entries '{"_id":"e2"}' '{"$set":{"changes.0.value":-201}}' --bypass-validation
expect 5 "audit finds the changed leg" -- d audit
grep -q "unbalanced_entry" "$WORK/out" && ok || bad "audit output: $(out)"
d update ledger_entries '{"_id":"e2"}' '{"$set":{"changes.0.value":-200}}' --bypass-validation >/dev/null
expect 3 "a cache set wrong: refused" -- d update ledger_accounts '{"_id":"B"}' '{"$inc":{"cache.balance":1}}'
grep -q "cache may not change" "$WORK/err" && ok || bad "cache: $(<"$WORK/err")"
expect 0 "a cache set wrong past the rules" -- d update ledger_accounts '{"_id":"B"}' '{"$inc":{"cache.balance":1}}' --bypass-validation
expect 5 "audit finds the cache" -- d audit
grep -q "cache_mismatch" "$WORK/out" && ok || bad "audit output: $(out)"
# post-many, hostile input (the post-many attack): every malformed shape
# exits 2 naming its line, and posts nothing -- not even the good line
# before it.
d ledger account create P0 --min-balance none >/dev/null
for i in 1 2 3 4 5 6 7; do d ledger account create P$i >/dev/null; done
pgood='{"legs":[{"account":"P0","value":-1},{"account":"P1","value":1}]}'
deep=$(printf '%*s' 3000 '' | tr ' ' '[')
n=$(entries)
bad_lines=(
  '{"legs":'
  '{"id":"x"}'
  '{"legs":{"account":"P0","value":-1}}'
  '{"legs":"P0:-1 P1:1"}'
  '{"legs":[{"account":"P0","value":"-1"},{"account":"P1","value":1}]}'
  '{"legs":[{"account":"P0","value":-1.0},{"account":"P1","value":1}]}'
  '{"legs":[{"account":"P0","value":-1e30},{"account":"P1","value":1e30}]}'
  '{"legs":[{"account":"P0","value":-9223372036854775809},{"account":"P1","value":1}]}'
  '{"legs":[{"account":"P0","value":9223372036854775808},{"account":"P1","value":-1}]}'
  '{"legs":[{"account":"P0"},{"account":"P1","value":1}]}'
  '{"legs":[{"account":"P0","value":-1,"x":1},{"account":"P1","value":1}]}'
  '{"legs":[null,{"account":"P1","value":1}]}'
  '{"legs":[{"account":"P0","value":-1},{"account":"P1","value":1}],"legs":[]}'
  '{"legs":[{"account":"P0","value":-1},{"account":"P1","value":1}],"pending":1}'
  '{"legs":[{"account":"P0","value":-1},{"account":"P1","value":1}],"id":7}'
  '{"legs":[{"account":"P0","value":-1},{"account":"P1","value":1}]} {}'
  "{\"legs\":[$deep"
  '[]'
)
for l in "${bad_lines[@]}"; do
  printf '%s\n%s\n' "$pgood" "$l" >"$WORK/pm"
  expect 2 "post-many: malformed '${l:0:40}'" -- d ledger post-many --file "$WORK/pm"
  grep -q "line 2" "$WORK/err" && [ ! -s "$WORK/out" ] && ok || bad "post-many '${l:0:40}': $(head -c 300 "$WORK/err") $(head -c 300 "$WORK/out")"
done
# A NUL byte inside a line: refused naming the line, not the rest of the
# line dropped unseen (the JSON parser stops at a NUL).
printf '%s\n%s\0{"legs":5}\n' "$pgood" "$pgood" >"$WORK/pm"
expect 2 "post-many: a NUL byte in line 2" -- d ledger post-many --file "$WORK/pm"
grep -q "line 2: a NUL byte" "$WORK/err" && [ ! -s "$WORK/out" ] && ok ||
  bad "post-many NUL: $(head -c 300 "$WORK/err") $(head -c 300 "$WORK/out")"
[ "$(entries)" = "$n" ] && ok || bad "post-many: malformed input posted $(( $(entries) - n ))"
# 129 legs: refused as a shape, before the store.
legs=$(for i in $(seq 0 128); do printf '{"account":"P%d","value":1},' $((i % 8)); done)
printf '{"legs":[%s]}\n' "${legs%,}" >"$WORK/pm"
expect 2 "post-many: 129 legs" -- d ledger post-many --file "$WORK/pm"
# Empty input, blank lines only: nothing posted, nothing printed, exit 0.
expect 0 "post-many: empty input" -- d ledger post-many </dev/null
[ ! -s "$WORK/out" ] && ok || bad "empty post-many printed: $(out)"
printf '\n  \n\t\n' >"$WORK/pm"
expect 0 "post-many: blank lines" -- d ledger post-many --file "$WORK/pm"
[ ! -s "$WORK/out" ] && [ "$(entries)" = "$n" ] && ok || bad "blank post-many: $(out)"

# Past one call's chunk (1,000 lines): 1,002 lines on 4 disjoint pairs,
# each with an id; line 1001 repeats line 1 (its entry again, not a second
# one), line 1002 reuses line 2's id with other legs (CONFLICT, exit 3).
# Each pair's seqIds follow the line order across the chunks.
for i in $(seq 1 1000); do
  a=$(( (i % 4) * 2 )); printf '{"id":"pm%d","legs":[{"account":"P%d","value":1},{"account":"P%d","value":-1}]}\n' "$i" "$a" $((a + 1))
done >"$WORK/pm"
for k in 1 3 5 7; do d ledger post P0:-2000 P$k:2000 >/dev/null; done
printf '%s\n' "$(head -1 "$WORK/pm")" \
  '{"id":"pm2","legs":[{"account":"P4","value":2},{"account":"P5","value":-2}]}' >>"$WORK/pm"
n=$(entries)
expect 3 "post-many: 1,002 lines over two calls" -- d ledger post-many --file "$WORK/pm"
[ "$(lines 'length')" = 1002 ] && [ "$(entries)" = $((n + 1000)) ] && ok ||
  bad "post-many chunks: $(lines length) lines, $(( $(entries) - n )) entries"
[ "$(lines '[.[0]._id, .[1000]._id, .[0].changes == .[1000].changes, .[1001].error, .[1001].line]')" = \
  '["pm1","pm1",true,"CONFLICT",1002]' ] && ok || bad "post-many across chunks: $(lines '[.[0], .[1000], .[1001]]')"
[ "$(lines '[.[0:1000][] | select(.changes[0].account == "P2") | .changes[0].seqId] | . == ([range(1; 251)])')" = true ] &&
  ok || bad "post-many: P2's seqIds not in line order: $(lines '[.[0:1000][] | select(.changes[0].account == "P2") | .changes[0].seqId] | .[0:5]')"
# A malformed line past the first chunk: still nothing posted.
n=$(entries)
{ head -1000 "$WORK/pm" | sed 's/"pm/"pn/'; echo '{"legs":[1,2]}'; } >"$WORK/pm2"
expect 2 "post-many: a bad line 1001 posts nothing" -- d ledger post-many --file "$WORK/pm2"
grep -q "line 1001" "$WORK/err" && [ "$(entries)" = "$n" ] && ok || bad "bad line 1001: $(<"$WORK/err") $(( $(entries) - n ))"
# int64 at the edges of one entry (post.c): a timeout past 100 years is
# refused, nothing recorded (INT64_MAX ms wrapped to a time before now:
# post-pending found the entry born expired); at 100 years it posts; an
# INT64_MIN debit refused for funds names 2^63.
expect 2 "pending with timeout INT64_MAX" -- d ledger post P0:-1 P1:1 --id ptmax --pending --timeout-ms 9223372036854775807
grep -q "more than 100 years" "$WORK/err" && ok || bad "timeout INT64_MAX: $(<"$WORK/err")"
expect 1 "nothing recorded for it" -- d ledger show ptmax
expect 0 "pending with timeout 100 years" -- d ledger post P0:-1 P1:1 --id ptmax --pending --timeout-ms 3153600000000
expect 0 "post-pending of it" -- d ledger post-pending ptmax
[ "$(j .state)" = posted ] && ok || bad "timeout 100 years: $(out)"
# A leg of INT64_MIN could never be reversed (-INT64_MIN is no int64):
# refused before anything is read, naming it (it was posted, and reverse
# then failed naming a value 0 the entry does not have).
expect 2 "an INT64_MIN leg refused" -- d ledger post P1:-9223372036854775808 P0:4611686018427387904 P2:4611686018427387904
grep -q "leg 1 (account 'P1') has value -9223372036854775808, whose reversal does not fit" "$WORK/err" && ok || bad "INT64_MIN leg: $(<"$WORK/err")"
# The audit's posted volume is exact past int64 (it was capped at
# INT64_MAX without a word): Y got 9223372036854775807 above, one more.
d ledger post X:-1 Y2:1 >/dev/null 2>&1 || d ledger account create Y2 >/dev/null
d ledger post X:-1 Y2:1 >/dev/null
vol=$(d audit | sed -n 's/^audit ledger: .*posted volume \([0-9]*\),.*/\1/p')
[ "${#vol}" -gt 19 ] || { [ "${#vol}" -eq 19 ] && [[ "$vol" > 9223372036854775807 ]]; } && ok || bad "posted volume past int64 shown as '$vol'"
# Metadata and refs (docs/ledger.md, "Metadata and references"), on a
# store of their own (unique-refs is one-way): stored with the entry,
# part of what an idempotent retry repeats, refused when bad (exit 2,
# nothing recorded), immutable to a plain write, found by ref or by a
# filter over the meta; refs unique once asked, on post, pending and
# post-many, a retry of the same id not a duplicate.
new_store ledger_meta
d ledger account create MX --min-balance none >/dev/null
d ledger account create MY >/dev/null
expect 0 "post with meta and ref" -- d ledger post MX:-5 MY:5 --id m1 --ref INV-1 --meta '{"order":"o1","n":1}'
[ "$(j '[.ref, .meta]')" = '["INV-1",{"order":"o1","n":1}]' ] && ok || bad "meta and ref: $(out)"
expect 0 "the same again" -- d ledger post MX:-5 MY:5 --id m1 --ref INV-1 --meta '{"order":"o1","n":1}'
expect 3 "the same id, another ref" -- d ledger post MX:-5 MY:5 --id m1 --ref INV-2 --meta '{"order":"o1","n":1}'
expect 3 "the same id, another meta" -- d ledger post MX:-5 MY:5 --id m1 --ref INV-1 --meta '{"order":"o2"}'
big=$(printf '%04100d' 0)
for bm in '[1]' '"x"' "{\"x\":\"$big\"}" '{"x":"a\u0000b"}' '{"x":' ; do
  expect 2 "meta $(printf %.20s "$bm") refused" -- d ledger post MX:-5 MY:5 --meta "$bm"
done
grep -q "meta has 4108 bytes serialized (at most 4096)" <(d ledger post MX:-5 MY:5 --meta "{\"x\":\"$big\"}" 2>&1) && ok || bad "meta size message"
expect 2 "empty ref refused" -- d ledger post MX:-5 MY:5 --ref ''
expect 2 "ref of 257 bytes refused" -- d ledger post MX:-5 MY:5 --ref "$(printf '%0257d' 0)"
# A ref that is not UTF-8 (it was dropped: the entry posted without it,
# exit 0, and entries --ref listed every entry).
expect 2 "a ref that is not UTF-8 refused" -- d ledger post MX:-5 MY:5 --ref $'INV\xff'
expect 2 "entries --ref that is not UTF-8" -- d ledger entries --ref $'INV\xff'
[ "$(entries)" = 1 ] && ok || bad "bad meta or ref recorded something: $(entries)"
# Not unique by default: a second entry may share the ref; unique-refs is
# then refused (exit 3), nothing changed.
expect 0 "a shared ref, not unique yet" -- d ledger post MX:-1 MY:1 --id m2 --ref INV-1 --meta '{"order":"o2","n":2}'
expect 3 "unique-refs over shared refs" -- d ledger unique-refs
expect 0 "entries --ref" -- d ledger entries --ref INV-1
[ "$(lines '[.[]._id]')" = '["m1","m2"]' ] && ok || bad "entries --ref: $(out)"
expect 0 "entries --meta-filter" -- d ledger entries --meta-filter '{"$or":[{"order":"o2"},{"n":{"$gt":5}}]}'
[ "$(lines '[.[]._id]')" = '["m2"]' ] && ok || bad "entries --meta-filter: $(out)"
expect 0 "entries --ref and --meta-filter" -- d ledger entries --ref INV-1 --meta-filter '{"n":1}'
[ "$(lines '[.[]._id]')" = '["m1"]' ] && ok || bad "entries both: $(out)"
expect 2 "entries: \$where refused" -- d ledger entries --meta-filter '{"$where":"1"}'
expect 2 "entries: a filter that is no JSON" -- d ledger entries --meta-filter '{'
# The filter's own error, named whole (it was written over itself:
# "meta filter: perator $where at meta.k").
expect 2 "entries: a field operator refused" -- d ledger entries --meta-filter '{"k":{"$where":1}}'
grep -q 'meta filter: unsupported operator \$where at meta.k$' "$WORK/err" && ok || bad "meta filter message: $(<"$WORK/err")"
expect 2 "entries: neither" -- d ledger entries
expect 0 "statement shows ref and meta" -- d ledger statement MY
[ "$(lines '[.[] | [.entry, .ref, .meta.order]]')" = '[["m1","INV-1","o1"],["m2","INV-1","o2"]]' ] && ok || bad "statement: $(out)"
# Immutable: a plain write may not change them, past the rules the
# audit names the entry.
expect 3 "a plain write of meta" -- d update ledger_entries '{"_id":"m1"}' '{"$set":{"meta.n":9}}'
expect 3 "a plain write of ref" -- d update ledger_entries '{"_id":"m1"}' '{"$set":{"ref":"INV-9"}}'
expect 0 "a meta past its bound, past the rules" -- d update ledger_entries '{"_id":"m2"}' "{\"\$set\":{\"meta.x\":\"$big\"}}" --bypass-validation
expect 5 "audit finds the meta" -- d audit
grep -q "bad_meta.*m2" "$WORK/out" && ok || bad "audit bad_meta: $(out)"
d update ledger_entries '{"_id":"m2"}' '{"$unset":{"meta.x":""}}' --bypass-validation >/dev/null
# Unique refs, on a fresh store.
new_store ledger_uref
d ledger account create MX --min-balance none >/dev/null
d ledger account create MY >/dev/null
expect 0 "unique-refs" -- d ledger unique-refs
expect 0 "unique-refs again" -- d ledger unique-refs
expect 0 "post a unique ref" -- d ledger post MX:-5 MY:5 --id u1 --ref R1
expect 0 "retry: the same id and ref" -- d ledger post MX:-5 MY:5 --id u1 --ref R1
[ "$(j ._id)" = u1 ] && ok || bad "retry: $(out)"
expect 3 "a duplicate ref" -- d ledger post MX:-5 MY:5 --id u2 --ref R1
grep -q "DUPKEY: ref 'R1' is already ledger entry 'u1''s" "$WORK/err" && ok || bad "duplicate ref message: $(<"$WORK/err")"
expect 3 "a duplicate ref, pending" -- d ledger post MX:-5 MY:5 --ref R1 --pending
printf '%s\n' '{"legs":[{"account":"MX","value":-1},{"account":"MY","value":1}],"ref":"R2"}' \
  '{"legs":[{"account":"MX","value":-1},{"account":"MY","value":1}],"ref":"R2","pending":true}' \
  '{"id":"u1","legs":[{"account":"MX","value":-5},{"account":"MY","value":5}],"ref":"R1"}' \
  '{"legs":[{"account":"MX","value":-1},{"account":"MY","value":1}],"ref":"R1"}' \
  '{"legs":[{"account":"MX","value":-1},{"account":"MY","value":1}],"meta":7}' >"$WORK/um"
expect 3 "post-many with duplicate refs" -- d ledger post-many --file "$WORK/um"
[ "$(lines '[.[] | .error // .ref]')" = '["R2","DUPKEY","R1","DUPKEY","INVAL"]' ] && ok || bad "post-many refs: $(out)"
[ "$(entries)" = 2 ] && ok || bad "duplicate refs recorded: $(entries) entries"
expect 0 "audit with refs" -- d audit

# Assets (docs/ledger.md, "Assets"): fixed at creation, CODE/SCALE; an
# entry in two assets is refused on post, pending and post-many (exit 2,
# nothing recorded); no asset is an asset of its own; balances and
# statements name it; a plain write may not change or add it, past the
# rules the audit finds the mix.
new_store ledger_asset
expect 0 "account in USD/2" -- d ledger account create AU --asset USD/2 --min-balance none
[ "$(j .asset)" = USD/2 ] && ok || bad "asset: $(out)"
d ledger account create AV --asset USD/2 >/dev/null
d ledger account create AE --asset EUR/2 >/dev/null
d ledger account create AN --min-balance none >/dev/null
d ledger account create AM >/dev/null
for bad_asset in usd/2 USD/19 USD/02 USD/ /2 ABCDEFGHIJKLMNOPQ/2 'U D/2' USD; do
  expect 2 "asset '$bad_asset' refused" -- d ledger account create AX --asset "$bad_asset"
done
expect 0 "scale 18, a 16-byte code" -- d ledger account create AY --asset ABCDEFGHIJKLMNOP/18
expect 1 "a refused asset created nothing" -- d ledger balance AX
expect 0 "post in one asset" -- d ledger post AU:-5 AV:5 --id a1
expect 0 "post with no asset at all" -- d ledger post AN:-5 AM:5
n=$(entries)
expect 2 "post in two assets" -- d ledger post AU:-5 AE:5
grep -q "the legs mix assets: account 'AU' is in USD/2, account 'AE' in EUR/2" "$WORK/err" && ok || bad "mix message: $(<"$WORK/err")"
expect 2 "an asset and none" -- d ledger post AN:-5 AV:5
expect 2 "pending in two assets" -- d ledger post AU:-5 AE:5 --pending
printf '%s\n' '{"legs":[{"account":"AU","value":-1},{"account":"AV","value":1}]}' \
  '{"legs":[{"account":"AU","value":-1},{"account":"AE","value":1}],"pending":true}' \
  '{"legs":[{"account":"AU","value":-1},{"account":"AN","value":1}]}' >"$WORK/am"
expect 2 "post-many in two assets" -- d ledger post-many --file "$WORK/am"
[ "$(lines '[.[] | .error // "ok"]')" = '["ok","INVAL","INVAL"]' ] && ok || bad "post-many assets: $(out)"
[ "$(entries)" = $((n + 1)) ] && ok || bad "mixed entries recorded: $(( $(entries) - n ))"
expect 0 "balance names the asset" -- d ledger balance AV
[ "$(j '[.asset, .balance]')" = '["USD/2",6]' ] && ok || bad "balance asset: $(out)"
expect 0 "balance of an account without one" -- d ledger balance AM
[ "$(j 'has("asset")')" = false ] && ok || bad "no asset: $(out)"
expect 0 "statement names the asset" -- d ledger statement AV
[ "$(lines '[.[].asset] | unique')" = '["USD/2"]' ] && ok || bad "statement asset: $(out)"
expect 3 "a plain write of an asset" -- d update ledger_accounts '{"_id":"AV"}' '{"$set":{"asset":"EUR/2"}}'
expect 3 "a plain write adding one" -- d update ledger_accounts '{"_id":"AM"}' '{"$set":{"asset":"EUR/2"}}'
expect 0 "an asset changed past the rules" -- d update ledger_accounts '{"_id":"AV"}' '{"$set":{"asset":"EUR/2"}}' --bypass-validation
expect 5 "audit finds the mix" -- d audit
grep -q "mixed_assets: entry a1 has legs on AU (USD/2) and AV (EUR/2)" "$WORK/out" && ok || bad "audit mixed_assets: $(out)"
grep -q "asset_changed: entry a1 was posted in USD/2, but its account AV is in EUR/2" "$WORK/out" && ok ||
  bad "audit asset_changed: $(out)"
# Every account of an entry moved to another asset alike (a rescale) is no
# mix, but the entry names the asset it was posted in.
expect 0 "the other account too, past the rules" -- d update ledger_accounts '{"_id":"AU"}' '{"$set":{"asset":"EUR/2"}}' --bypass-validation
expect 5 "audit finds the rescale" -- d audit
grep -q "asset_changed: entry a1 was posted in USD/2, but its account AU is in EUR/2" "$WORK/out" && ok ||
  bad "audit asset rescale: $(out)"
# Entry time (docs/ledger.md, "Entry time"): every entry is timed by doctx
# (never before the entry it follows on any of its accounts, whatever the
# poster's clock), imports state a past time and are refused once an
# account has a later entry, balance --at and statement --from/--to read
# by time ([from, to)), bad TIMEs are exit 2 with nothing recorded, a
# plain write may not change a time, and the audit finds one out of order.
new_store ledger_time
d ledger account create TA --min-balance none >/dev/null && d ledger account create TB >/dev/null &&
  d ledger account create TC --min-balance none >/dev/null || bad "time: accounts"
expect 0 "import at an RFC 3339 time" -- d ledger post TA:-5 TB:5 --id ti1 --imported --at 2020-01-01T00:00:00Z
[ "$(j '[.imported, .at]')" = '[true,"2020-01-01T00:00:00.000Z"]' ] && ok || bad "import: $(out)"
expect 0 "import at epoch ms, the same time" -- d ledger post TA:-6 TB:6 --id ti2 --imported --at 1577836800000
expect 0 "an import retried" -- d ledger post TA:-6 TB:6 --id ti2 --imported --at 1577836800000
expect 3 "an id reused at another time" -- d ledger post TA:-6 TB:6 --id ti2 --imported --at 1577836800001
n0=$(entries)
for bad_at in 2020-13-01T00:00:00Z 2020-02-30T00:00:00Z 2020-01-01T00:00:00+01:00 \
  2020-01-01 1969-12-31T23:59:59Z 9223372036854775807 -1 253402300800000 ''; do
  expect 2 "import time '$bad_at' refused" -- d ledger post TA:-1 TB:1 --imported --at "$bad_at"
done
expect 2 "an import in the future" -- d ledger post TA:-1 TB:1 --imported --at 9999-01-01T00:00:00Z
expect 2 "--at without --imported" -- d ledger post TA:-1 TB:1 --at 2020-01-01T00:00:00Z
expect 2 "--imported without --at" -- d ledger post TA:-1 TB:1 --imported
expect 2 "an imported pending entry" -- d ledger post TA:-1 TB:1 --imported --at 2020-01-02T00:00:00Z --pending
[ "$(entries)" = "$n0" ] && ok || bad "a refused import recorded something"
# A live entry after an entry timed in the future (written past the
# rules: another process's clock a day ahead) is timed no earlier (T1).
ahead=$(($(date +%s%3N) + 86400000))
expect 0 "an entry a day ahead" -- d insert ledger_entries \
  "{\"_id\":\"tf\",\"changes\":[{\"account\":\"TA\",\"value\":-1,\"seqId\":3},{\"account\":\"TC\",\"value\":1,\"seqId\":1}],\"state\":\"posted\",\"proc\":\"uncommitted\",\"created\":$ahead,\"updated\":$ahead,\"at\":$ahead,\"legs_sha\":\"$(legs_sha tf TA:-1:3 TC:1:1)\"}" --bypass-validation
expect 0 "a live post after it" -- d ledger post TC:-2 TB:2 --id tl1
[ "$(d count ledger_entries "{\"_id\":\"tl1\",\"at\":$ahead}")" = 1 ] && ok || bad "live time after a clock ahead: $(out)"
expect 3 "an import before a live entry" -- d ledger post TA:-1 TB:1 --imported --at 2021-01-01T00:00:00Z
grep -q "STATE: account 'TA' has an entry timed $ahead, after the import's time 1609459200000" "$WORK/err" && ok ||
  bad "import refusal: $(<"$WORK/err")"
expect 0 "a pending live entry" -- d ledger post TA:-4 TB:4 --id tp1 --pending
expect 0 "balance before any entry" -- d ledger balance TB --at 2019-12-31T23:59:59.999Z
[ "$(j '[.balance, .seq]')" = '[0,0]' ] && ok || bad "balance --at before: $(out)"
expect 0 "balance at the imports' time" -- d ledger balance TB --at 2020-01-01T00:00:00Z
[ "$(j '[.balance, .seq, .at]')" = '[11,2,1577836800000]' ] && ok || bad "balance --at: $(out)"
expect 0 "balance at the end of time: pending holds show" -- d ledger balance TA --at 9999-12-31T23:59:59.999Z
[ "$(j '[.balance, .pending_debits, .seq]')" = '[-12,4,4]' ] && ok || bad "balance --at end: $(out)"
expect 2 "balance --at and --at-seq" -- d ledger balance TB --at 0 --at-seq 1
expect 2 "balance at a bad time" -- d ledger balance TB --at yesterday
expect 0 "a leap day, ns digits dropped" -- d ledger balance TB --at 2024-02-29T12:00:00.123456789Z
[ "$(j .at)" = 1709208000123 ] && ok || bad "leap day: $(out)"
expect 2 "no leap day in 2023" -- d ledger balance TB --at 2023-02-29T00:00:00Z
expect 2 "a leap second" -- d ledger balance TB --at 2016-12-31T23:59:60Z
expect 1 "balance --at of no account" -- d ledger balance TZ --at 0
expect 0 "statement [from, to)" -- d ledger statement TB --from 2020-01-01T00:00:00Z --to "$ahead"
[ "$(lines '[.[].entry]')" = '["ti1","ti2"]' ] && ok || bad "statement by time: $(out)"
expect 0 "statement from a time on" -- d ledger statement TB --from "$ahead" --limit 5
[ "$(lines '[.[] | [.entry, .balance]]')" = '[["tl1",13]]' ] && ok || bad "statement --from: $(out)"
expect 2 "statement from after to" -- d ledger statement TB --from 2 --to 1
expect 3 "a plain write of a time" -- d update ledger_entries '{"_id":"ti2"}' '{"$set":{"at":0}}'
expect 3 "a plain write of imported" -- d update ledger_entries '{"_id":"tl1"}' '{"$set":{"imported":true}}'
expect 0 "audit: times in order" -- d audit
expect 0 "a time moved back past the rules" -- d update ledger_entries '{"_id":"tl1"}' '{"$set":{"at":5}}' --bypass-validation
expect 5 "audit: a time out of order" -- d audit
grep -q "time_order: account TB: entry tl1 (seqId 3) is timed 5, before entry ti2" "$WORK/out" && ok || bad "audit time_order: $(out)"


# Closing an account (docs/ledger.md, "Closing an account"): only at
# balance 0 with no hold (exit 3 naming why, nothing written); a closed
# account takes no leg on any path (exit 3 naming it); balance and
# statement say when; a plain write can neither change nor add a close;
# past the rules the audit finds a leg after it or a close over money.
new_store ledger_close
d ledger account create K1 >/dev/null
d ledger account create K2 --min-balance none >/dev/null
d ledger account create K3 >/dev/null
expect 1 "close of no such account" -- d ledger account close KX
d ledger post K2:-10 K1:10 --id kf >/dev/null
expect 3 "close with a balance" -- d ledger account close K1
grep -q "STATE: ledger account 'K1' has balance 10" "$WORK/err" && ok || bad "balance message: $(<"$WORK/err")"
d ledger post K2:-5 K3:5 --pending --id kh >/dev/null
expect 3 "close with a hold" -- d ledger account close K3
grep -q "ledger account 'K3' has a hold: pending entry 'kh'" "$WORK/err" && ok || bad "hold message: $(<"$WORK/err")"
[ "$(entries)" = 2 ] && ok || bad "a refused close wrote something"
d ledger void kh >/dev/null
expect 0 "close once the hold is voided" -- d ledger account close K3
d ledger post K1:-10 K2:10 >/dev/null
expect 0 "close at 0" -- d ledger account close K1
[ "$(j '[.changes, .state, .proc]')" = '[[{"account":"K1","value":0,"seqId":3}],"closed","closed"]' ] && ok || bad "close entry: $(out)"
kc=$(j ._id)
expect 0 "close again returns the close" -- d ledger account close K1
[ "$(j ._id)" = "$kc" ] && [ "$(entries)" = 5 ] && ok || bad "close again: $(out)"
n=$(entries)
expect 3 "post to a closed account" -- d ledger post K2:-1 K1:1
grep -q "STATE: ledger account 'K1' is closed" "$WORK/err" && ok || bad "closed message: $(<"$WORK/err")"
expect 3 "pending post to a closed account" -- d ledger post K2:-1 K1:1 --pending
expect 3 "reversal onto a closed account" -- d ledger reverse kf
printf '%s\n' '{"legs":[{"account":"K2","value":-1},{"account":"K1","value":1}]}' >"$WORK/kc"
expect 3 "post-many line on a closed account" -- d ledger post-many --file "$WORK/kc"
[ "$(lines '[.[].error]')" = '["STATE"]' ] && [ "$(entries)" = "$n" ] && ok || bad "closed account took a leg: $(out)"
expect 0 "balance says closed" -- d ledger balance K1
[ "$(j '[.balance, .seq, (.closed_at > 0)]')" = '[0,3,true]' ] && ok || bad "balance closed: $(out)"
expect 0 "statement ends with the close" -- d ledger statement K1
[ "$(lines '.[-1] | [.entry == "'"$kc"'", .state, .value, .balance]')" = '[true,"closed",0,0]' ] && ok || bad "statement closed: $(out)"
expect 3 "a plain update of a close" -- d update ledger_entries "{\"_id\":\"$kc\"}" '{"$set":{"state":"posted","proc":"uncommitted"}}'
expect 3 "a plain delete of a close" -- d delete ledger_entries "{\"_id\":\"$kc\"}"
expect 3 "a plain insert of a close" -- d insert ledger_entries '{"_id":"kx","changes":[{"account":"K2","value":0,"seqId":4}],"state":"closed","proc":"closed","created":1}'
expect 0 "recover" -- d recover
expect 0 "settled audit clean with closes" -- d audit --settled
expect 0 "a leg after the close, past the rules" -- d insert ledger_entries '{"_id":"kl","changes":[{"account":"K1","value":1,"seqId":4},{"account":"K2","value":-1,"seqId":4}],"state":"posted","proc":"uncommitted","created":1}' --bypass-validation
expect 0 "a close over money, past the rules" -- d insert ledger_entries '{"_id":"kz","changes":[{"account":"K2","value":0,"seqId":5}],"state":"closed","proc":"closed","created":1}' --bypass-validation
expect 5 "audit finds both" -- d audit
grep -q "leg_after_close: account K1 was closed by entry $kc, but entry kl" "$WORK/out" && ok || bad "audit leg_after_close: $(out)"
grep -q "closed_not_zero: account K2 was closed by entry kz at balance -1" "$WORK/out" && ok || bad "audit closed_not_zero: $(out)"
# A close is timed as a post is: after an entry timed a day ahead (another
# process's clock) and a live post that follows it, the close is timed no
# earlier, and the audit finds the times in order.
new_store ledger_close_time
d ledger account create KT1 --min-balance none >/dev/null && d ledger account create KT2 --min-balance none >/dev/null ||
  bad "close time: accounts"
ahead=$(($(date +%s%3N) + 86400000))
expect 0 "close time: an entry a day ahead" -- d insert ledger_entries \
  "{\"_id\":\"kta\",\"changes\":[{\"account\":\"KT1\",\"value\":-1,\"seqId\":1},{\"account\":\"KT2\",\"value\":1,\"seqId\":1}],\"state\":\"posted\",\"proc\":\"uncommitted\",\"created\":$ahead,\"updated\":$ahead,\"at\":$ahead,\"legs_sha\":\"$(legs_sha kta KT1:-1:1 KT2:1:1)\"}" --bypass-validation
expect 0 "close time: a post back to 0" -- d ledger post KT2:-1 KT1:1 --id ktb
expect 0 "close time: the worker commits both" -- d worker --once
expect 0 "close time: close" -- d ledger account close KT1
[ "$(d count ledger_entries "{\"state\":\"closed\",\"at\":{\"\$gte\":$ahead}}")" = 1 ] && ok ||
  bad "close time: the close is timed before the entry a day ahead: $(out)"
expect 0 "close time: audit" -- d audit --settled
# The legs' digest (docs/ledger.md, "The legs' digest"; L5): every insert
# path seals an entry's legs and the audit stays clean over posts, a batch,
# holds posted, partly posted and voided, a reversal, an import and a
# close; an edit of the legs past the rules -- even one keeping their sum
# at zero -- or of the digest, or the digest deleted, is a finding naming
# the entry, and one bad entry leaves every other judged.
new_store ledger_legs
d ledger account create SRC --min-balance none >/dev/null && d ledger account create C >/dev/null &&
  d ledger account create MX --max-balance 1000 >/dev/null && d ledger account create I1 --min-balance none >/dev/null &&
  d ledger account create I2 >/dev/null && d ledger account create K >/dev/null || bad "legs: accounts"
expect 0 "legs: a post" -- d ledger post SRC:-43 C:43 --id e1
[ "$(j .legs_sha)" = "$(legs_sha e1 SRC:-43:1 C:43:1)" ] && ok || bad "legs: the digest is not the documented encoding's: $(out)"
expect 0 "legs: a debit under a floor, a credit under a ceiling" -- d ledger post C:-3 MX:3 --id e2
[ "$(j .legs_sha)" = "$(legs_sha e2 C:-3:2:0 MX:3:1:-:1000)" ] && ok || bad "legs: min/max not in the digest: $(out)"
printf '%s\n' '{"id":"b1","legs":[{"account":"SRC","value":-5},{"account":"C","value":5}]}' \
  '{"id":"b2","legs":[{"account":"SRC","value":-6},{"account":"MX","value":6}]}' >"$WORK/many"
expect 0 "legs: post-many" -- d ledger post-many --file "$WORK/many"
d ledger post SRC:-10 C:10 --pending --id h1 >/dev/null && d ledger post SRC:-10 C:10 --pending --id h2 >/dev/null &&
  d ledger post SRC:-10 C:10 --pending --id h3 >/dev/null || bad "legs: holds"
expect 0 "legs: post a hold" -- d ledger post-pending h1
expect 0 "legs: post a hold partly" -- d ledger post-pending h2 --amounts SRC:-4,C:4
expect 0 "legs: void a hold" -- d ledger void h3
expect 0 "legs: reverse" -- d ledger reverse e1 --id r1
expect 0 "legs: an import" -- d ledger post I1:-7 I2:7 --id i1 --imported --at 2020-01-01T00:00:00Z
expect 0 "legs: a close" -- d ledger account close K
[ "$(d count ledger_entries '{"legs_sha":{"$exists":false}}')" = 0 ] && ok || bad "legs: an entry without its digest"
expect 0 "legs: the worker" -- d worker --once
expect 0 "legs: settled audit clean over every insert path" -- d audit --settled
expect 3 "legs: a plain write of the digest" -- d update ledger_entries '{"_id":"e2"}' '{"$unset":{"legs_sha":""}}'
expect 3 "legs: a plain write of legs_sha_from" -- d update ledger_accounts '{"_id":"C"}' '{"$set":{"legs_sha_from":9}}'
# Each row: an edit past the rules of e2, the finding it must raise (among
# others the edit may cause: L3, L7), restore.
ORIG_E2=$(d find ledger_entries '{"_id":"e2"}')
legs_row() { # NAME FINDING UPDATE
  expect 0 "legs: $1 past the rules" -- d update ledger_entries '{"_id":"e2"}' "$3" --bypass-validation
  expect 5 "legs: $1: audit" -- d audit
  grep -q "FINDING ledger $2: entry e2" "$WORK/out" && ok || bad "legs: $1: no $2 naming e2: $(grep FINDING "$WORK/out")"
  d update ledger_entries '{"_id":"e2"}' "$ORIG_E2" --bypass-validation >/dev/null || bad "legs: $1: restore"
}
legs_row "signs flipped" legs_changed '{"$set":{"changes.0.value":3,"changes.1.value":-3}}'
legs_row "values changed, the sum kept" legs_changed '{"$set":{"changes.0.value":-1000,"changes.1.value":1000}}'
legs_row "a seqId changed" legs_changed '{"$set":{"changes.1.seqId":7}}'
legs_row "a min changed" legs_changed '{"$set":{"changes.0.min":-100000}}'
legs_row "a min removed" legs_changed '{"$unset":{"changes.0.min":""}}'
legs_row "a max changed" legs_changed '{"$set":{"changes.1.max":100000}}'
legs_row "an account renamed" legs_changed '{"$set":{"changes.0.account":"I2"}}'
legs_row "the digest edited" legs_changed "{\"\$set\":{\"legs_sha\":\"$(legs_sha e2 C:-3:2:0 MX:3:1)\"}}"
legs_row "the digest deleted" legs_sha_missing '{"$unset":{"legs_sha":""}}'
# A leg field of the wrong type is a finding naming the entry, and the
# rest of the audit still runs (it once stopped it all as "out of memory").
for edit in '{"$set":{"changes.0.min":"x"}}' '{"$set":{"changes.0.seqId":{"x":1}}}' \
  '{"$set":{"changes.1.value":null}}' '{"$set":{"changes.0.account":5}}' '{"$set":{"changes":"no"}}'; do
  expect 0 "legs: $edit past the rules" -- d update ledger_entries '{"_id":"e2"}' "$edit" --bypass-validation
  expect 5 "legs: $edit: audit" -- d audit
  grep -q "FINDING ledger bad_shape: ledger_entries 'e2'" "$WORK/out" && grep -q "^audit txn: " "$WORK/out" &&
    ok || bad "legs: $edit: $(cat "$WORK/out")"
  d update ledger_entries '{"_id":"e2"}' "$ORIG_E2" --bypass-validation >/dev/null || bad "legs: $edit: restore"
done
expect 0 "legs: clean after the restores" -- d audit --settled
# The hostile user's case: an edited credit carries no min, the sum stays
# zero, and once committed the cache agrees -- still a finding, and one
# bad entry leaves the others judged (a cache set wrong is found too).
d ledger post SRC:-43 C:43 --id e9 >/dev/null || bad "legs: e9"
expect 0 "legs: e9 edited" -- d update --bypass-validation ledger_entries '{"_id":"e9"}' '{"$set":{"changes.0.value":100000,"changes.1.value":-100000}}'
expect 0 "legs: the worker commits the edit" -- d worker --once
d update ledger_accounts '{"_id":"MX"}' '{"$inc":{"cache.balance":1}}' --bypass-validation >/dev/null
expect 5 "legs: settled audit" -- d audit --settled
grep -q "FINDING ledger legs_changed: entry e9" "$WORK/out" && ok || bad "legs: e9 unseen: $(grep FINDING "$WORK/out")"
grep -q "FINDING ledger cache_mismatch: account MX" "$WORK/out" && ok || bad "legs: the other finding lost: $(grep FINDING "$WORK/out")"
# The account's marker deleted with the digest: the first sealed entry of
# the account still marks where digests start (a later one's is missing).
d update ledger_accounts '{"_id":"MX"}' '{"$inc":{"cache.balance":-1}}' --bypass-validation >/dev/null
expect 0 "legs: C's legs_sha_from deleted" -- d update ledger_accounts '{"_id":"C"}' '{"$unset":{"legs_sha_from":""}}' --bypass-validation
expect 0 "legs: b1's digest deleted" -- d update ledger_entries '{"_id":"b1"}' '{"$unset":{"legs_sha":""}}' --bypass-validation
expect 5 "legs: audit without the marker" -- d audit
grep -q "FINDING ledger legs_sha_missing: entry b1 has no legs_sha, yet account C's entries carry one from seqId 1" "$WORK/out" && ok ||
  bad "legs: b1 unseen without the marker: $(grep FINDING "$WORK/out")"
finish
