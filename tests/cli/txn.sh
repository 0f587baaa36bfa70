#!/usr/bin/env bash
# The multi-document transactions' CLI contract (docs/transactions.md,
# "Scripts"): doctx txn SCRIPT prints {"outcome","reads"} and exits 0
# committed, 1 aborted by a require (nothing written), 2 bad input
# (nothing written, found before the store is set up), 3 a conflict
# still unresolved at the deadline, and txn show ID tells an id's outcome
# (an unknown id is fenced: aborted, and a later commit of it refused); a
# transaction that crashed after its intents leaves documents a plain
# update or delete may not touch, plain reads see their committed bodies,
# and recovery finishes it -- also an intent a paused writer wrote after
# recovery aborted it; the audit is clean at the end.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"

new_store txn
same() { # LABEL GOT WANT
  [ "$2" = "$3" ] && ok || bad "$1: got $2, want $3"
}
MOVE='[{"find_one":"acct","filter":{"_id":"A"},"as":"a"},{"require":"a","filter":{"bal":{"$gte":5}}},{"update":"acct","filter":{"_id":"A"},"with":{"$inc":{"bal":-5}}},{"update":"acct","filter":{"_id":"B"},"with":{"$inc":{"bal":5}}}]'
bal() { field "$(d find acct "{\"_id\":\"$1\"}")" bal; }

d insert acct '{"_id":"A","bal":7}' '{"_id":"B","bal":0}' >/dev/null || bad "setup"

# ---- bad input: exit 2, nothing written (not even the clock) -------------------
for args in \
  '[' \
  '[]' \
  '{"find_one":"acct"}' \
  '[{"find_one":"acct","filter":{},"as":"a","x":1}]' \
  '[{"nope":"acct"}]' \
  '[{"find":"acct","filter":{},"as":"a","limit":0}]' \
  '[{"find":"acct","filter":{},"as":"a","limit":1001}]' \
  '[{"find_one":"acct","filter":{"bal":{"$bogus":1}},"as":"a"}]' \
  '[{"update":"acct","filter":{},"with":{"$inc":{"bal":"x"}}}]' \
  '[{"update":"acct","filter":{},"with":{"$nope":{"bal":1}}}]' \
  '[{"require":"zz","filter":{}}]' \
  '[{"insert":"bad$coll","doc":{}}]' \
  '[{"insert":"acct","doc":{"_txn":1}}]' \
  '[{"update":"acct","filter":{},"with":{"$set":{"_txn.v":1}}}]' \
  '[{"update":"acct","filter":{},"with":{"$rename":{"bal":"_txn"}}}]' \
  '[{"update":"txn_records","filter":{"_id":"t3"},"with":{"$set":{"state":"committed"}}}]' \
  '[{"insert":"txn_clock","doc":{"_id":"x","ts":1}}]' \
  '[{"delete":"jobs","filter":{}}]' \
  '[{"find":"acct","filter":{},"limit":5,"as":"r"},{"require":"r","filter":{}}]' \
  '[{"insert":"acct","doc":{"_id":"Z","$x":1}}]' \
  '[{"find":"acct","filter":{"$or":[{"_txn.w":{"$exists":true}}]},"limit":5,"as":"r"}]' \
  '[{"update":"acct","filter":{"_id":"Q","_txn":{"v":9}},"with":{"$set":{"bal":1}},"upsert":true}]'; do
  expect 2 "bad script $args" -- d txn "$args"
done
expect 2 "--lease-ms INT64_MAX" -- d txn --lease-ms 9223372036854775807 "$MOVE"
expect 2 "--deadline-ms INT64_MAX" -- d txn --deadline-ms 9223372036854775807 "$MOVE"
expect 2 "--isolation bogus" -- d txn --isolation bogus "$MOVE"
expect 2 "--id with a space" -- d txn --id 'a b' "$MOVE"
expect 2 "--id of a generated id's form" -- d txn --id t0123456789abcdef01234567 "$MOVE"
printf '[{"find_one":"acct","filter":{"_id":"A\0"},"as":"a"}]' >"$WORK/nul"
expect 2 "a NUL byte in the script" -- d txn - <"$WORK/nul"
d collections | grep -q txn_ && bad "bad input wrote the transactions' collections" || ok
same "bad input moved nothing" "$(bal A)/$(bal B)" "7/0"

# ---- committed, aborted by a require, show ------------------------------------------
same "t1 commits" "$(d txn --id t1 "$MOVE")" '{"outcome":"committed","reads":{"a":{"_id":"A","bal":7}}}'
expect 1 "a require that fails aborts" -- d txn --id t2 "$MOVE"
same "aborted prints its reads" "$(out)" '{"outcome":"aborted","reads":{"a":{"_id":"A","bal":2}}}'
same "money moved once" "$(bal A)/$(bal B)" "2/5"
same "show t1" "$(d txn show t1)" '{"id":"t1","outcome":"committed"}'
same "show t2 (no record: fenced)" "$(d txn show t2)" '{"id":"t2","outcome":"aborted"}'
# With an id, a transaction that writes nothing still writes its record:
# show answers what it answered, not a fence's "aborted".
d txn --id ro1 '[{"find_one":"acct","filter":{"_id":"A"},"as":"a"}]' >/dev/null || bad "read-only ro1"
same "show ro1 (it wrote nothing)" "$(d txn show ro1)" '{"id":"ro1","outcome":"committed"}'
d update acct '{"_id":"A"}' '{"$set":{"bal":20}}' >/dev/null
expect 3 "a fenced id does not commit" -- d txn --id t2 "$MOVE"
same "the fence moved nothing" "$(bal A)/$(bal B)" "20/5"
same "reads of a find" "$(d txn '[{"find":"acct","filter":{"bal":{"$gte":5}},"limit":10,"as":"rich"}]' | jq -c '[.reads.rich[]._id]')" '["A","B"]'
same "an insert, an upsert and a delete" \
  "$(d txn '[{"insert":"acct","doc":{"_id":"C","bal":0}},{"update":"acct","filter":{"_id":"D"},"with":{"$set":{"bal":0}},"upsert":true},{"delete":"acct","filter":{"_id":"C"}}]' | jq -r .outcome)" committed
same "D upserted, C never visible" "$(d txn '[{"find":"acct","filter":{"bal":0},"limit":10,"as":"z"}]' | jq -c '[.reads.z[]._id]')" '["D"]'

# ---- a crashed transaction: intents refuse plain writes --------------------------------
DOCTX_FAULT=txn.commit:crash d txn --id t3 --lease-ms 60000 "$MOVE" >/dev/null 2>&1
expect 3 "plain update of a document with an intent" -- d update acct '{"_id":"A"}' '{"$set":{"bal":0}}'
grep -q "transition" "$WORK/err" && ok || bad "refusal does not name the rule: $(<"$WORK/err")"
expect 3 "plain delete of a document with an intent" -- d delete acct '{"_id":"B"}'
same "plain reads see the committed bodies" "$(bal A)/$(bal B)" "20/5"
same "show t3 under its lease" "$(d txn show t3)" '{"id":"t3","outcome":"unknown"}'
expect 3 "a writer meets the live intent until its deadline" -- d txn --deadline-ms 300 "$MOVE"
grep -q CONFLICT "$WORK/err" && ok || bad "not CONFLICT: $(<"$WORK/err")"
d recover --older-than-ms 0 >/dev/null || bad "recover"
same "show t3 after recovery" "$(d txn show t3)" '{"id":"t3","outcome":"aborted"}'
d update acct '{"_id":"A"}' '{"$inc":{"n":1}}' >/dev/null && ok || bad "A still refuses a plain update"
same "after t3" "$(bal A)/$(bal B)" "20/5"
same "serializable commits alone" "$(d txn --isolation serializable "$MOVE" | jq -r .outcome)" committed
same "after it" "$(bal A)/$(bal B)" "15/10"

# ---- a late intent: a writer paused before its second prewrite ---------------------
# Recovery aborts its record and clears its keys (twice: the second pass
# marks it cleared) while it is stopped; resumed, it writes B's intent
# after all and dies at its commit timestamp.  The next recovery must
# still find and clear that intent (its sweep), so B takes plain writes.
log=$WORK/late.log
DOCTX_FAULT=txn.prewrite:pause:2,txn.clock:crash:2 start_bg "$log" "$DOCTX" --store "$S" txn --id t4 "$MOVE"
pid=$BG_PID
if wait_stopped "$pid" 30; then
  d recover --older-than-ms 0 >/dev/null && d recover --older-than-ms 0 >/dev/null || bad "recover beside the paused writer"
  kill -CONT "$pid"
  bounded_wait "$pid" 30 "$log"
  grep -q "txn.clock crash" "$log" && ok || bad "the late writer did not reach its crash: $(tail -2 "$log")"
  expect 3 "B holds the late intent" -- d update acct '{"_id":"B"}' '{"$inc":{"n":1}}'
  d recover >/dev/null || bad "recover after the late intent"
  d update acct '{"_id":"B"}' '{"$inc":{"n":1}}' >/dev/null && ok || bad "the sweep left B's late intent"
  same "t4 moved nothing" "$(bal A)/$(bal B)" "15/10"
  same "show t4" "$(d txn show t4)" '{"id":"t4","outcome":"aborted"}'
else
  bounded_wait "$pid" 30 "$log"
  bad "the writer never paused: $(tail -2 "$log")"
fi

# ---- attacks: a script may not forge another transaction's record -------------------
# t5 crashed before its commit point; a script's step on txn_records would
# pass the records' plain-write rule (its steps are txn's): committing t5
# without a commit timestamp.  A body with a top-level '$' name (a plain
# insert may hold one) could never roll forward: every reader then failed.
DOCTX_FAULT=txn.commit:crash d txn --id t5 --lease-ms 60000 "$MOVE" >/dev/null 2>&1
expect 2 "a script updating a record" -- d txn '[{"update":"txn_records","filter":{"_id":"t5"},"with":{"$set":{"state":"committed"}}}]'
same "t5 not forged" "$(d txn show t5)" '{"id":"t5","outcome":"unknown"}'
d recover --older-than-ms 0 >/dev/null || bad "recover t5"
d insert acct '{"_id":"P","$p":1}' >/dev/null || bad "plain insert of P"
expect 2 "a transaction writing a body with a '\$' name" -- d txn --id t6 '[{"update":"acct","filter":{"_id":"P"},"with":{"$inc":{"n":1}}},{"update":"acct","filter":{"_id":"B"},"with":{"$inc":{"n":1}}}]'
d update acct '{"_id":"P"}' '{"$inc":{"n":1}}' >/dev/null && ok || bad "P holds an intent"
same "reads of acct still work" "$(d txn '[{"find":"acct","filter":{},"limit":10,"as":"all"}]' | jq -r .outcome)" committed
# A plain insert into a collection no transaction wrote yet (no rule
# there) carries an intent naming t1, committed: a reader must not roll
# it forward as t1's write (t1's record does not name it), but clear it.
d insert fresh '{"_id":"X","_txn":{"w":{"id":"t1","ts":1,"op":"put","doc":{"_id":"X","bal":1000000}}}}' >/dev/null || bad "plain insert of X"
same "a forged intent is not t1's write" "$(d txn '[{"find_one":"fresh","filter":{"_id":"X"},"as":"x"}]' | jq -c .reads.x)" '{"_id":"X"}'
same "X kept no forged body" "$(d find fresh '{"_id":"X"}' | jq -c '[.bal, ._txn.by]')" '[null,null]'
# An empty top-level field name: the roll forward's update cannot name it
# (committed, it stayed an intent for good); refused before anything.
d dump >"$WORK/before.empty"
expect 2 "a document with an empty field name" -- d txn '[{"insert":"acct","doc":{"_id":"E1"}},{"insert":"acct","doc":{"":0}}]'
d dump >"$WORK/after.empty"
cmp -s "$WORK/before.empty" "$WORK/after.empty" && ok || bad "the refused script wrote"
# A null _id is an _id (as MongoDB's): written, updated and deleted by
# transactions, the audit judges its record's keys as any other.
d txn '[{"insert":"nulls","doc":{"_id":null,"n":0}},{"insert":"nulls2","doc":{"_id":1}}]' >/dev/null || bad "insert a null _id"
d txn '[{"update":"nulls","filter":{"_id":null},"with":{"$inc":{"n":5}}},{"delete":"nulls2","filter":{"_id":1}}]' >/dev/null || bad "update a null _id"
same "the null _id's body" "$(d txn '[{"find_one":"nulls","filter":{"_id":null},"as":"z"}]' | jq -c .reads.z)" '{"_id":null,"n":5}'
# A write its collection's rules refuse (here a validator) is refused
# before anything is written.  The store judged it at the roll forward,
# after the commit point: a kept the committed intent for good (readers
# and recovery failed on it) while b's write landed.
d insert vald '{"_id":"a","bal":1}' '{"_id":"b","bal":1}' >/dev/null &&
  d rules vald --validator '{"$jsonSchema":{"properties":{"bal":{"bsonType":"long"}}}}' >/dev/null || bad "vald set-up"
expect 3 "a write the validator refuses" -- d txn --id val1 '[{"update":"vald","filter":{"_id":"a"},"with":{"$set":{"bal":"x"}}},{"update":"vald","filter":{"_id":"b"},"with":{"$inc":{"bal":1}}}]'
grep -q VALIDATION "$WORK/err" && ok || bad "not VALIDATION: $(<"$WORK/err")"
same "nothing of val1 written" "$(d count txn_records '{"_id":"val1"}')/$(d find vald '{"_id":"b"}' | jq -c .bal)" "0/1"
d update vald '{"_id":"a"}' '{"$set":{"bal":2}}' >/dev/null && ok || bad "a holds an intent"
# A body 98 levels deep (a plain insert takes up to 100) does not fit in
# an intent or a previous version (three levels down): refused before
# anything is written.  It committed, and its roll forward then failed
# for good: k kept the intent, its readers and recovery failed.
deep=$(printf '{"a":%.0s' $(seq 97))1$(printf '}%.0s' $(seq 97))
d insert deepc "{\"_id\":\"k\",\"d\":$deep}" '{"_id":"o","n":0}' >/dev/null || bad "insert the deep document"
expect 2 "a write that does not fit in flight" -- d txn --id deep1 '[{"update":"deepc","filter":{"_id":"k"},"with":{"$unset":{"d":""}}},{"update":"deepc","filter":{"_id":"o"},"with":{"$inc":{"n":1}}}]'
grep -q "does not fit" "$WORK/err" && ok || bad "not named: $(<"$WORK/err")"
same "nothing of deep1 written" "$(d count txn_records '{"_id":"deep1"}')/$(d find deepc '{"_id":"o"}' | jq -c .n)" "0/0"
d update deepc '{"_id":"k"}' '{"$set":{"x":1}}' >/dev/null && ok || bad "k holds an intent"
# A unique index judges a write when it rolls forward, after the commit
# point (an intent's body is not indexed): uq1 commits, and b keeps its
# intent (its readers fail, DUPKEY) while a holds the value.  After
# recovery the settled audit says so; once the value is free, b rolls
# forward (docs/transactions.md, "Limits").
d insert uq '{"_id":"a","email":"x"}' '{"_id":"b","email":"y"}' '{"_id":"c","n":0}' >/dev/null &&
  d index uq '{"email":1}' --unique >/dev/null || bad "uq set-up"
d txn --id uq1 '[{"update":"uq","filter":{"_id":"b"},"with":{"$set":{"email":"x"}}},{"update":"uq","filter":{"_id":"c"},"with":{"$inc":{"n":1}}}]' >/dev/null || bad "uq1"
d recover >/dev/null 2>&1
expect 5 "the settled audit after a roll forward the store refuses" -- d audit --settled
grep -q "FINDING txn not_terminal: txn uq1 is committed but not rolled forward" "$WORK/out" && ok || bad "no not_terminal for uq1: $(grep FINDING "$WORK/out")"
d update uq '{"_id":"a"}' '{"$set":{"email":"z"}}' >/dev/null || bad "free the value"
d recover >/dev/null || bad "recover after the value is free"
same "b rolled forward" "$(d find uq '{"_id":"b"}' | jq -r .email)" x
d audit --settled >/dev/null && ok || bad "audit: $(d audit --settled 2>&1 | tail -3)"

# ---- the audit under tampering (--bypass-validation) ----------------------------------
# Each row on a fresh store holding t1 (A, B) and t2 (C, B) committed: the
# audit must exit 5 and name the finding; the three rows of the last one
# at once (one bad document does not stop it).
tampers=(
  'shape|txn_records|{"_id":"t1"}|{"$set":{"keys":[1,{"c":5}]}}'
  'uncommitted_version|txn_records|{"_id":"t1"}|{"$set":{"state":"aborted"}}'
  'uncommitted_version|txn_records|{"_id":"t1"}|{"$set":{"state":"pending"}}'
  'bad_version|txn_records|{"_id":"t1"}|{"$set":{"commit_ts":999999}}'
  'bad_version|acct|{"_id":"A"}|{"$set":{"_txn":"x"}}'
  'bad_version|acct|{"_id":"A"}|{"$set":{"_txn.p.v":99}}'
  'bad_version|acct|{"_id":"A"}|{"$set":{"_txn.v":99999}}'
  'clock_behind|txn_clock|{"_id":"clock"}|{"$set":{"ts":1}}'
  'clock_behind|txn_clock|{"_id":"clock"}|-'
  'bad_version|acct|{"_id":"A"}|{"$set":{"_txn.del":true}}'
  'bad_version|txn_records|{"_id":"t1"}|{"$set":{"keys":[{"c":"acct","id":"A","op":"del"},{"c":"acct","id":"B","op":"put"}]}}'
)
tamper_store() {
  new_store "tamper$1"
  d insert acct '{"_id":"A","bal":7}' '{"_id":"B","bal":0}' '{"_id":"C","bal":3}' >/dev/null &&
    d txn --id t1 "$MOVE" >/dev/null &&
    d txn --id t2 '[{"update":"acct","filter":{"_id":"C"},"with":{"$inc":{"bal":1}}},{"update":"acct","filter":{"_id":"B"},"with":{"$inc":{"bal":1}}}]' >/dev/null ||
    bad "tamper store $1"
}
tamper() { # FINDING|COLL|FILTER|UPDATE (- deletes)
  IFS='|' read -r _ c f u <<<"$1"
  if [ "$u" = - ]; then d delete --bypass-validation "$c" "$f"; else d update --bypass-validation "$c" "$f" "$u"; fi >/dev/null || bad "tamper $1"
}
n=0
for row in "${tampers[@]}"; do
  n=$((n + 1))
  tamper_store "$n"
  tamper "$row"
  expect 5 "audit after tamper $row" -- d audit
  grep -q "FINDING txn ${row%%|*}:" "$WORK/out" && ok || bad "no ${row%%|*} finding for $row: $(grep FINDING "$WORK/out")"
done
tamper_store all
tamper "${tampers[1]}"
tamper 'bad_version|acct|{"_id":"C"}|{"$set":{"_txn":"x"}}'
tamper "${tampers[7]}"
expect 5 "audit after three tampers" -- d audit
same "it reports all three" "$(grep -cE 'FINDING txn (uncommitted_version|bad_version|clock_behind):' "$WORK/out")" 3
# A tombstone is {_id, _txn}: a body written beside its del, or its del
# removed (the deleted document back as an empty body), past the rules,
# is a finding -- transactions and plain reads disagree about C.
n=0
for u in '{"$set":{"bal":1000}}' '{"$unset":{"_txn.del":""}}'; do
  n=$((n + 1))
  tamper_store "tomb$n"
  d txn --id t9 '[{"delete":"acct","filter":{"_id":"C"}}]' >/dev/null || bad "delete C"
  d update --bypass-validation acct '{"_id":"C"}' "$u" >/dev/null || bad "tamper C's tombstone: $u"
  expect 5 "audit after a tombstone's $u" -- d audit
  grep -q 'FINDING txn bad_version: acct "C"' "$WORK/out" && ok || bad "no bad_version for C after $u: $(grep FINDING "$WORK/out")"
done
# A write lost past the rules: t3 committed, crashed before its roll
# forward; A's intent removed (--bypass-validation), recovery finds
# nothing to roll forward on A and marks t3 applied: the audit tells.
tamper_store lost
DOCTX_FAULT=txn.apply:crash d txn --id t3 '[{"update":"acct","filter":{"_id":"A"},"with":{"$inc":{"bal":1}}},{"update":"acct","filter":{"_id":"B"},"with":{"$inc":{"bal":1}}}]' >/dev/null 2>&1
same "t3 committed, A holds its intent" "$(d find acct '{"_id":"A"}' | jq -r ._txn.w.id)" t3
d update --bypass-validation acct '{"_id":"A"}' '{"$unset":{"_txn.w":""}}' >/dev/null || bad "remove A's intent"
d recover >/dev/null 2>&1
expect 5 "audit after a lost write" -- d audit
grep -q 'FINDING txn lost_write: txn t3:.* acct "A"' "$WORK/out" && ok || bad "no lost_write for t3 on A: $(grep FINDING "$WORK/out")"
# A version forged past the rules, naming t1 at its commit_ts, on a
# document t1's record does not name (T9).
tamper_store forged
c1=$(d find txn_records '{"_id":"t1"}' | jq .commit_ts)
d insert --bypass-validation acct "{\"_id\":\"F\",\"bal\":9,\"_txn\":{\"v\":$c1,\"by\":\"t1\"}}" >/dev/null || bad "insert F"
expect 5 "audit after a forged version" -- d audit
grep -q 'FINDING txn bad_version: acct "F": .*does not name it' "$WORK/out" && ok || bad "no bad_version for F: $(grep FINDING "$WORK/out")"
finish
