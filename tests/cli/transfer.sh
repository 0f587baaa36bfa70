#!/usr/bin/env bash
# The transfer CLI contract: idempotent ids, conflicts, bad input that
# records nothing, cancel before and after commit, async + worker --once,
# exit codes and the reasons recorded in failed transfers.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/transfer.sh"

snapshot() { { d account list; d transfer list; } | md5sum; }

new_store cli
setup_accounts || { echo "setup failed"; exit 1; }

# A synchronous transfer succeeds, moves money once, prints the document.
expect 0 "transfer" -- d transfer A B 100 --id t1
[ "$(field "$(cat "$WORK/out")" state)" = succeeded ] && ok || bad "t1 not succeeded"
[ "$(balance A)" = 900 ] && [ "$(balance B)" = 1100 ] && ok || bad "balances after t1"

# The same id and parameters again: the existing transfer, applied once.
expect 0 "idempotent retry" -- d transfer A B 100 --id t1
[ "$(balance A)" = 900 ] && [ "$(balance B)" = 1100 ] && ok || bad "retry moved money again"
[ "$(d count transfers)" = 1 ] && ok || bad "retry recorded a second transfer"
# The same id with other parameters: a conflict, nothing changes.
before=$(snapshot)
expect 3 "id conflict" -- d transfer A B 101 --id t1
grep -q "doctx: CONFLICT: " "$WORK/err" && ok || bad "conflict message: $(cat "$WORK/err")"
expect 3 "id conflict (payee)" -- d transfer A X 100 --id t1
[ "$(snapshot)" = "$before" ] && ok || bad "conflict changed the store"

# Insufficient funds: exit 1, the reason is in the document, nothing moves.
expect 1 "insufficient" -- d transfer A B 5000 --id t2
[ "$(field "$(cat "$WORK/out")" reason)" = "insufficient funds" ] && ok || bad "reason: $(cat "$WORK/out")"
[ "$(balance A)" = 900 ] && ok || bad "failed transfer moved money"
# X has no lower limit: it may go negative.
expect 0 "no-limit payer" -- d transfer X A 50 --id t3
[ "$(balance X)" = -50 ] && ok || bad "X balance $(balance X)"

# Bad input: exit 2, a clear message, nothing recorded.
before=$(snapshot)
while IFS='|' read -r label args pattern; do
  # shellcheck disable=SC2086
  expect 2 "$label" -- d transfer $args
  grep -q "$pattern" "$WORK/err" && ok || bad "$label: message '$(cat "$WORK/err")' lacks '$pattern'"
done <<'TABLE'
zero amount|A B 0|positive
negative amount|A B -5|positive
fractional amount|A B 1.5|positive
not a number|A B ten|positive
beyond int64|A B 9223372036854775808|positive
leading plus|A B +5|positive
spaces|A B 5x|positive
same account|A A 5|same account
missing payee|A NOPE 5|NOACCOUNT
missing payer|NOPE A 5|NOACCOUNT
bad id|A B 5 --id bad/id|transfer id
missing amount|A B|USAGE
unknown option|A B 5 --fast|unknown option
bad account id|A b@d 5|account id
TABLE
[ "$(snapshot)" = "$before" ] && ok || bad "bad input changed the store"
expect 2 "account bad balance" -- d account create Z --balance 1e3
expect 2 "account below min" -- d account create Z --balance 5 --min-balance 10
expect 3 "account exists" -- d account create A
expect 1 "show missing account" -- d account show NOPE
expect 1 "show missing transfer" -- d transfer show NOPE
# A limit changes through `account limit`, only where the balance meets
# it; a plain write of it is refused (docs/transfers.md).
expect 2 "limit: not a number" -- d account limit A x
expect 2 "limit: no value" -- d account limit A
expect 2 "limit: an option of create" -- d account limit A 5 --balance 1
expect 1 "limit: missing account" -- d account limit NOPE 5
expect 3 "limit above the balance" -- d account limit A 1001
grep -q "balance [0-9]* is below the new min_balance 1001" "$WORK/err" && ok || bad "limit refusal: $(cat "$WORK/err")"
expect 3 "limit by hand: refused" -- d update accounts '{"_id":"A"}' '{"$set":{"min_balance":-500}}'
grep -q "min_balance may not change" "$WORK/err" && ok || bad "plain limit refusal: $(cat "$WORK/err")"
expect 3 "limit by hand, find-and-modify: refused" -- d find-and-modify accounts '{"_id":"A"}' '{"$set":{"min_balance":null}}'
expect 2 "bad state" -- d transfer list --state nope
expect 2 "bad DOCTX_FAULT" -- env DOCTX_FAULT=nope:crash "$DOCTX" --store "$S" transfer A B 1
[ "$(snapshot)" = "$before" ] && ok || bad "errors changed the store"

# Async: recorded as initiated, completed by a worker.
expect 0 "async" -- d transfer A B 10 --id t4 --async
[ "$(state "$S" t4)" = initiated ] && ok || bad "t4 not initiated"
# Cancel before anyone claims it: failed, reason canceled, exit 0.
expect 0 "async 2" -- d transfer A B 10 --id t5 --async
expect 0 "cancel" -- d transfer cancel t5
[ "$(state "$S" t5)" = failed ] && ok || bad "t5 not failed"
[ "$(field "$(d transfer show t5)" reason)" = canceled ] && ok || bad "t5 reason"
expect 0 "worker --once" -- d worker --once
[ "$(state "$S" t4)" = succeeded ] && ok || bad "worker did not run t4"
[ "$(state "$S" t5)" = failed ] && ok || bad "worker touched canceled t5"
# Cancel after commit: exit 3, make a reverse transfer instead.
expect 3 "cancel after commit" -- d transfer cancel t4
grep -q "reverse transfer" "$WORK/err" && ok || bad "cancel message: $(cat "$WORK/err")"
expect 1 "cancel missing" -- d transfer cancel NOPE
[ "$(d transfer list --state succeeded | wc -l)" = 3 ] && ok || bad "list --state"

# Paging: --skip/--limit on both lists, in their order (accounts by id,
# transfers by creation); bad values refused.
[ "$(d account list --skip 1 --limit 1 | jq -r ._id)" = B ] &&
  ok || bad "account list --skip 1 --limit 1"
[ "$(d account list --limit 2 | wc -l)" = 2 ] && ok || bad "account list --limit 2"
[ "$(d transfer list --skip 1 --limit 2 | jq -rs 'map(._id) | join(",")')" = t2,t3 ] &&
  ok || bad "transfer list --skip 1 --limit 2: $(d transfer list --skip 1 --limit 2)"
[ "$(d transfer list --state succeeded --limit 1 | wc -l)" = 1 ] && ok || bad "list --state --limit"
expect 2 "negative --limit" -- d transfer list --limit -1
# Keyset paging: --after ID lists what follows that entry in the list's
# order (and --skip counts from there); paged to the end it gives every
# entry once, in order.  A bad ID is refused before the store opens.
[ "$(d transfer list --after t1 --limit 2 | jq -rs 'map(._id) | join(",")')" = t2,t3 ] &&
  ok || bad "transfer list --after t1 --limit 2: $(d transfer list --after t1 --limit 2)"
[ "$(d transfer list --after t1 --skip 1 --limit 1 | jq -r ._id)" = t3 ] &&
  ok || bad "transfer list --after t1 --skip 1"
[ "$(d account list --after A --limit 1 | jq -r ._id)" = B ] &&
  ok || bad "account list --after A --limit 1"
[ "$(d account list --after A0 --limit 1 | jq -r ._id)" = B ] &&
  ok || bad "account list --after A0 (no such account: a place by id)"
paged=""; after=""
while :; do
  page=$(d transfer list --limit 2 ${after:+--after "$after"} | jq -r ._id)
  [ -z "$page" ] && break
  paged="$paged $page"; after=$(tail -n 1 <<<"$page")
  [ "$(wc -l <<<"$page")" -lt 2 ] && break
done
[ "$(echo $paged)" = "$(echo $(d transfer list | jq -r ._id))" ] &&
  ok || bad "transfer list paged by --after: $paged"
expect 1 "--after an unknown transfer" -- d transfer list --after NOPE
grep -q "page after 'NOPE'" "$WORK/err" && ok || bad "unknown after: $(cat "$WORK/err")"
expect 2 "--after over the id limit" -- d transfer list --after "$(printf 'x%.0s' {1..129})"
grep -q "INVAL.*page after" "$WORK/err" && ok || bad "long after: $(cat "$WORK/err")"
expect 2 "--after not an id" -- d account list --after 'a b'
expect 2 "--after empty" -- d transfer list --after ''
expect 2 "--after on a missing store" -- "$DOCTX" --store "sqlite:$WORK/none.db" account list --after 'a b'
[ ! -e "$WORK/none.db" ] && ok || bad "a bad --after created a store"
expect 2 "bad --skip" -- d account list --skip x
expect 2 "--limit with create" -- d account create Q --limit 1

# A printed transfer: timestamps in ISO 8601 UTC; the executor's fields
# only with --verbose (the store keeps integer ms and all fields).
out=$(d transfer show t1)
jq -e 'all(.created, .updated; test("^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$"))
  and (has("owner") or has("lease_until") or has("epoch") | not)' <<<"$out" >/dev/null &&
  ok || bad "printed transfer: $out"
out=$(d transfer show t1 --verbose)
jq -e 'has("owner") and has("lease_until") and (.lease_until | endswith("Z"))
  and (.epoch | type == "number" and floor == .)' <<<"$out" >/dev/null &&
  ok || bad "printed transfer --verbose: $out"
[ "$(d find transfers '{"_id":"t1"}' | jq -r '.created | if type == "number" and floor == . then "int" else type end')" = int ] &&
  ok || bad "stored created is not integer ms"

# worker --once and recover print a JSON summary per pattern.
expect 0 "async for summary" -- d transfer A B 1 --id t6 --async
out=$(d worker --once) && ok || bad "worker --once for summary"
jq -e '.ok == true and (.patterns.transfer | .ran.succeeded == 1 and .errors.count == 0
  and (.skipped | type == "object"))' <<<"$out" >/dev/null && ok || bad "worker summary: $out"
out=$(d recover) && ok || bad "recover for summary"
# Declined transfers (insufficient funds) leave no tombstones (docs/transfers.md): nothing for recovery to skip or clear.
jq -e '.ok == true and (.patterns.transfer | (keys == ["errors", "ran", "skipped"])
  and (.skipped | has("tombstone younger than --tombstone-ttl-ms") | not)
  and (.ran | has("tombstones_cleared") | not))' <<<"$out" >/dev/null &&
  ok || bad "recover summary: $out"
[ "$(d count accounts '{"voids.0":{"$exists":true}}')" = 0 ] && ok ||
  bad "a declined transfer left a tombstone: $(d find accounts '{"voids.0":{"$exists":true}}')"

# The audit is clean and sees every account.
expect 0 "audit" -- d audit --settled
grep -q "audit: clean" "$WORK/out" && ok || bad "audit output"
expect 0 "audit json" -- d audit --json
[ "$(field "$(cat "$WORK/out")" ok)" = true ] && ok || bad "audit --json ok"
# Acknowledged transfers against the store (--acked): what the client was
# told must still be there, in that state or further along.
d transfer show t1 >"$WORK/acked"
d transfer show t4 >>"$WORK/acked"
expect 0 "audit --acked clean" -- d audit --settled --acked "$WORK/acked"
grep -q "2 acknowledged transfers checked, 0 lost" "$WORK/out" && ok ||
  bad "acked summary: $(cat "$WORK/out")"
# A transfer the store never kept, one it has in an earlier state, and one
# with other parties: three findings, exit 5.
echo '{"_id":"gone","from":"A","to":"B","amount":7,"state":"succeeded"}' >>"$WORK/acked"
d transfer show t5 | sed 's/"state":"failed"/"state":"succeeded"/' >>"$WORK/acked"
d transfer show t3 | sed 's/"amount":50/"amount":51/' >>"$WORK/acked"
expect 5 "audit --acked lost" -- d audit --acked "$WORK/acked"
for k in "acked_lost: acknowledged transfer gone" \
  "acked_regressed: transfer t5 was acknowledged succeeded but the store has it failed" \
  "acked_mismatch: acknowledged transfer t3"; do
  grep -q "$k" "$WORK/out" && ok || bad "missing finding '$k': $(cat "$WORK/out")"
done
grep -q "5 acknowledged transfers checked, 3 lost" "$WORK/out" && ok ||
  bad "acked counts: $(cat "$WORK/out")"
# An unreadable record refuses the whole file (exit 2), naming the line.
printf '%s\n' "$(d transfer show t1)" '{"_id":' >"$WORK/acked_bad"
expect 2 "audit --acked malformed" -- d audit --acked "$WORK/acked_bad"
grep -q "line 2" "$WORK/err" && ok || bad "malformed acked message: $(cat "$WORK/err")"
expect 2 "audit --acked missing file" -- d audit --acked "$WORK/nope"
# Break an invariant by hand: a plain write may not (docs/transfers.md,
# "What a plain write may change"); past the rules, the audit must say so
# (exit 5).
expect 3 "a balance changed by hand: refused" -- d update accounts '{"_id":"B"}' '{"$inc":{"balance":1}}'
grep -q "balance may not change" "$WORK/err" && ok || bad "refusal: $(cat "$WORK/err")"
d update accounts '{"_id":"B"}' '{"$inc":{"balance":1}}' --bypass-validation >/dev/null
expect 5 "audit broken" -- d audit
grep -q "conservation" "$WORK/out" && ok || bad "audit did not report conservation: $(cat "$WORK/out")"

# transfer batch: one transfer per input line, one result per line in
# input order, the most severe line's exit code; every line is checked
# before anything runs (a malformed one: exit 2 naming it, nothing ran).
new_store batch
setup_accounts || bad "batch: setup failed"
printf '%s\n' '{"from":"A","to":"B","amount":100,"id":"b1"}' '' \
  '{"from":"B","to":"A","amount":30,"id":"b2"}' \
  '{"from":"A","to":"B","amount":100,"id":"b1"}' >"$WORK/b.jsonl"
expect 0 "batch: all succeed" -- d transfer batch --file "$WORK/b.jsonl"
[ "$(jq -r '._id + ":" + .state' "$WORK/out" | tr '\n' ' ')" = "b1:succeeded b2:succeeded b1:succeeded " ] &&
  ok || bad "batch results: $(cat "$WORK/out")"
[ "$(balance A)" = 930 ] && [ "$(balance B)" = 1070 ] && ok || bad "batch balances A=$(balance A) B=$(balance B)"
[ "$(d count transfers)" = 2 ] && ok || bad "an id twice in a batch recorded twice"
# From stdin: a declined transfer is exit 1, the others still go.
printf '%s\n' '{"from":"A","to":"B","amount":5000,"id":"b3"}' \
  '{"from":"A","to":"B","amount":1,"id":"b4"}' >"$WORK/b2.jsonl"
d transfer batch <"$WORK/b2.jsonl" >"$WORK/out" 2>"$WORK/err"
[ $? = 1 ] && ok || bad "batch with a decline: exit not 1: $(cat "$WORK/err")"
[ "$(jq -r '.state + ":" + (.reason // "")' "$WORK/out" | tr '\n' ' ')" = "failed:insufficient funds succeeded: " ] &&
  ok || bad "batch decline results: $(cat "$WORK/out")"
# A missing account (2) and an id reused with other parameters (3): the
# most severe wins; errors name their input line.
printf '%s\n' '{"from":"A","to":"NOPE","amount":1}' '' \
  '{"from":"A","to":"B","amount":7,"id":"b1"}' '{"from":"B","to":"A","amount":1,"id":"b5"}' >"$WORK/b3.jsonl"
expect 3 "batch: conflict wins" -- d transfer batch --file "$WORK/b3.jsonl"
[ "$(jq -rc '[.error, .line, .state] | map(tostring) | join(":")' "$WORK/out" | tr '\n' ' ')" = \
  "NOACCOUNT:1:null CONFLICT:3:null null:null:succeeded " ] && ok || bad "batch error lines: $(cat "$WORK/out")"
jq -se 'map(select(.line == 1))[0].detail | test("NOPE")' "$WORK/out" >/dev/null &&
  ok || bad "batch: the error line's detail does not name the account: $(cat "$WORK/out")"
# Malformed input: exit 2 naming the line; nothing ran.
before=$(snapshot)
while IFS='|' read -r label line2 pattern; do
  printf '%s\n' '{"from":"A","to":"B","amount":1,"id":"never"}' "$line2" >"$WORK/bad.jsonl"
  expect 2 "batch: $label" -- d transfer batch --file "$WORK/bad.jsonl"
  grep -q "line 2: .*$pattern" "$WORK/err" && ok || bad "batch $label: message '$(cat "$WORK/err")' lacks '$pattern'"
done <<'TABLE'
not json|{"from":|
no amount|{"from":"A","to":"B"}|amount
zero amount|{"from":"A","to":"B","amount":0}|positive
text amount|{"from":"A","to":"B","amount":"5"}|amount
same account|{"from":"A","to":"A","amount":5}|same account
bad id|{"from":"A","to":"B","amount":5,"id":"bad/id"}|transfer id
unknown field|{"from":"A","to":"B","amount":5,"memo":"x"}|unknown field
not an object|[1,2]|object
TABLE
[ "$(snapshot)" = "$before" ] && ok || bad "a malformed batch changed the store"
expect 2 "batch: extra argument" -- d transfer batch x
expect 2 "batch: --file without batch" -- d transfer A B 1 --file "$WORK/b.jsonl"
expect 2 "batch: --id with batch" -- d transfer batch --id x
expect 2 "batch: missing file" -- d transfer batch --file "$WORK/nope"
expect 0 "batch: audit" -- d audit --settled

# recover and the worker set up only the patterns a store uses: a store of
# transfers gets no job, lock, ledger, order or version collections.
new_store only_transfers
d account create A --balance 1 >/dev/null && d recover >/dev/null && d worker --once >/dev/null ||
  bad "only_transfers: set-up, recover or worker failed"
same_colls=$(d dump | sed -n 's/^{"collection":"\([^"]*\)".*/\1/p' | tr '\n' ' ')
[ "$same_colls" = "accounts openings transfers " ] && ok ||
  bad "recover or worker created collections of unused patterns: $same_colls"
# A drop deletes every document without asking the delete guard: a guarded
# collection holding documents is refused (exit 3, nothing changed) unless
# validation is bypassed; an empty one drops.
expect 3 "drop accounts: refused" -- d drop accounts
grep -q "has a delete guard and holds 1 documents" "$WORK/err" && ok || bad "drop refusal: $(cat "$WORK/err")"
[ "$(d count accounts)" = 1 ] && ok || bad "the refused drop changed accounts"
expect 0 "drop accounts --bypass-validation" -- d drop accounts --bypass-validation
[ "$(d count accounts)" = 0 ] && ok || bad "the bypassed drop left accounts"
d rules accounts --delete-guard '{"balance":0}' >/dev/null
expect 0 "drop of an empty guarded collection" -- d drop accounts

# Limits: an overdraft granted, used, refused past it, and a limit the
# balance no longer meets refused; the audit is clean throughout.
new_store limits
setup_accounts || bad "limits: setup failed"
expect 0 "limit: an overdraft of 50" -- d account limit A -50
grep -q '"min_balance":-50' "$WORK/out" && ok || bad "limit output: $(cat "$WORK/out")"
expect 0 "limit: the overdraft is usable" -- d transfer A X 1050
[ "$(balance A)" = -50 ] && ok || bad "limits: A=$(balance A)"
expect 1 "limit: past the overdraft, declined" -- d transfer A X 1
expect 3 "limit: 0 is above the balance now" -- d account limit A 0
expect 0 "limit: none" -- d account limit A none
expect 0 "limit: no limit, a debit past it" -- d transfer A X 10
expect 0 "limit: back" -- d transfer X A 1060
expect 0 "limit: 0 again" -- d account limit A 0
[ "$(balance A)" = 1000 ] && ok || bad "limits: A=$(balance A) at the end"
expect 0 "limits: audit clean" -- d audit --settled
finish
