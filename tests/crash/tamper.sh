#!/usr/bin/env bash
# The tamper table (issue 8, "How it is proven"): every protocol field of
# accounts, transfers, opening records, jobs and versioned documents set
# to every wrong type.  Each row must be
# refused by the collection's validator (exit 3) and, written anyway with
# --bypass-validation, reported by the audit (exit 5).  None may pass
# silently.  The store holds a succeeded transfer t1, a transfer t2 in
# flight (its markers on A and B) and a canceled t3 (its tombstones), so
# markers and tombstones have fields to break.  Jobs in three states get
# the states of the others written over them, without the fields that go
# with those (J7: refused, and reported).  Writes the validator cannot
# see have rows of their own after the table: a committed version's
# content rewritten (its digest tells, V7), a live job out of attempts.
#
# Its second half, every protocol document deleted mid-flight at every
# fault point, is tests/crash/deletes.sh.  Opening records (the account
# registry) are protocol documents too: their rows are here.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/transfer.sh"

new_store tamper
setup_accounts || { echo "setup failed"; exit 1; }
d transfer A B 100 --id t1 >/dev/null
DOCTX_FAULT=transfer.commit:crash d transfer A B 10 --id t2 >/dev/null 2>&1
DOCTX_FAULT=transfer.mark_payee:crash d transfer A B 20 --id t3 >/dev/null 2>&1
d transfer cancel t3 >/dev/null
d job add q t '{"n":1}' --id j1 >/dev/null
# j2 succeeded with a result (queue q2, so j1 stays ready), j3 delayed:
# what each state carries (J7) has fields to contradict
d job add q2 t '{}' --id j2 >/dev/null && d job work q2 --once --exec 'echo {\"ok\":1}' >/dev/null &&
  d job add q t '{}' --id j3 --delay-ms 3600000 >/dev/null || { echo "setup: jobs"; exit 1; }
# item V at version 2, its child a carried over from version 1
d version put V '{"n":1}' --child a='{"x":1}' >/dev/null
d version put V '{"n":2}' --child b='{"x":2}' >/dev/null
expect 0 "baseline audit clean" -- d audit
[ "$(d count accounts '{"_id":"A","pending.0":{"$exists":true},"voids.0":{"$exists":true}}')" = 1 ] &&
  ok || bad "setup: A lacks a marker or a tombstone: $(d find accounts '{"_id":"A"}')"

# The documents as they were, to restore after each row.
declare -A ORIG
ORIG[accounts.A]=$(d find accounts '{"_id":"A"}')
ORIG[transfers.t1]=$(d find transfers '{"_id":"t1"}')
ORIG[openings.A]=$(d find openings '{"_id":"A"}')
ORIG[jobs.j1]=$(d find jobs '{"_id":"j1"}')
ORIG[jobs.j2]=$(d find jobs '{"_id":"j2"}')
ORIG[jobs.j3]=$(d find jobs '{"_id":"j3"}')
ORIG[version_roots.V]=$(d find version_roots '{"_id":"V"}')
ORIG[versions.V/2]=$(d find versions '{"_id":"V/2"}')
ORIG[version_children.V/1/a]=$(d find version_children '{"_id":"V/1/a"}')

row() { # COLL ID FIELD VALUE (UNSET: remove the field)
  local coll=$1 id=$2 field=$3 val=$4 upd orig=${ORIG[$1.$2]} label="$1.$3=$4"
  if [ "$val" = UNSET ]; then
    upd="{\"\$unset\":{\"$field\":\"\"}}"
  else
    upd="{\"\$set\":{\"$field\":$val}}"
  fi
  expect 3 "$label: validator" -- d update "$coll" "{\"_id\":\"$id\"}" "$upd"
  grep -q VALIDATION "$WORK/err" && ok || bad "$label: not refused as VALIDATION: $(cat "$WORK/err")"
  expect 0 "$label: bypass" -- d update "$coll" "{\"_id\":\"$id\"}" "$upd" --bypass-validation
  expect 5 "$label: audit" -- d audit
  expect 0 "$label: restore" -- d update "$coll" "{\"_id\":\"$id\"}" "$orig" --bypass-validation
}

# Under DTX_QUICK (the sanitizer stage) every other row, by turns: the
# validator and the audit walk the same code for every field, and the
# release stage runs the whole table on every backend.
turn=0
while IFS='|' read -r coll id field vals; do
  [ -n "$coll" ] || continue
  for v in $vals; do
    turn=$((turn + 1))
    [ -z "${DTX_QUICK:-}" ] || [ $((turn % 2)) -eq 0 ] || continue
    row "$coll" "$id" "$field" "$v"
  done
done <<'TABLE'
accounts|A|balance|"5" 1.5 null {} [] true UNSET
accounts|A|min_balance|0.5 "50" {} [] true UNSET
accounts|A|opening_balance|"5" 1.5 null [] UNSET
accounts|A|ceiling|"5" 1.5 null {}
accounts|A|pending|"x" {} null UNSET [1]
accounts|A|pending.0.tx|5 null
accounts|A|pending.0.op|"refund" 5
accounts|A|pending.0.amount|"10" 1.5 0 -10 null
accounts|A|pending.0.at|"x" null
accounts|A|voids|"x" null {} UNSET
accounts|A|voids.0.tx|5 null
accounts|A|voids.0.at|"x"
accounts|A|unregistered|false "x" 1
openings|A|opening_balance|"5" 1.5 null UNSET
openings|A|at|"x" UNSET
openings|A|extra|1
jobs|j1|state|"weird" 5 null UNSET
jobs|j1|queue|5 null UNSET
jobs|j1|attempts|"x" -1 1.5
jobs|j1|max_attempts|0 "3"
jobs|j1|priority|500 "x"
jobs|j1|run_at|"x" null
jobs|j1|epoch|-1 "x"
jobs|j1|fx_colls|"x" [5]
jobs|j1|state|"succeeded" "dead" "canceled"
jobs|j1|finished|5
jobs|j1|result|{"ok":1}
jobs|j2|state|"ready" "delayed" "running" "dead" "canceled"
jobs|j2|finished|null UNSET
jobs|j2|attempts|0
jobs|j2|epoch|0
jobs|j3|state|"succeeded" "running"
transfers|t1|amount|"5" 1.5 0 -5 null UNSET
transfers|t1|from|5 null UNSET
transfers|t1|to|5 [] UNSET
transfers|t1|state|"weird" 5 null UNSET
transfers|t1|reason|5 {}
transfers|t1|created|"x" UNSET
transfers|t1|owner|5
transfers|t1|lease_until|"x"
transfers|t1|epoch|"x" -1
transfers|t1|updated|"x" UNSET
version_roots|V|version|"2" UNSET
version_roots|V|next|"x"
version_roots|V|log|[5]
version_roots|V|res|[]
version_roots|V|trash|[0]
versions|V/2|root|5
versions|V/2|children|"x"
versions|V/2|dead|false
version_children|V/1/a|doc|UNSET
version_children|V/1/a|version|"1"
TABLE

# Versions: tampering the validator cannot see.  A committed version's
# child deleted (its guard refuses; past it, the audit reports the
# version missing a child), and a root moved back to an older version.
expect 3 "version child delete: guard" -- d delete version_children '{"_id":"V/1/a"}'
expect 0 "version child delete: bypass" -- d delete version_children '{"_id":"V/1/a"}' --bypass-validation
expect 5 "version child delete: audit" -- d audit
grep -q "missing_child" "$WORK/out" && ok || bad "version child delete: not reported as missing_child: $(grep FINDING "$WORK/out" | head -2)"
expect 0 "version child: restore" -- d insert version_children "${ORIG[version_children.V/1/a]}" --bypass-validation
expect 3 "version root moved back: transition rule" -- d update version_roots '{"_id":"V"}' '{"$set":{"version":1}}'
expect 0 "version root moved back: bypass" -- d update version_roots '{"_id":"V"}' '{"$set":{"version":1}}' --bypass-validation
expect 5 "version root moved back: audit" -- d audit
expect 0 "version root: restore" -- d update version_roots '{"_id":"V"}' "${ORIG[version_roots.V]}" --bypass-validation

# A live job with no attempts left (J7: two fields, so the audit's
# alone).  A plain update is refused: no move of the protocol changes a
# ready job in place (the jobs' transition rule); forced past it, the
# audit reports it.
expect 3 "job j1 out of attempts (plain)" -- d update jobs '{"_id":"j1"}' '{"$set":{"attempts":5}}'
expect 0 "job j1 out of attempts" -- d update jobs '{"_id":"j1"}' '{"$set":{"attempts":5}}' --bypass-validation
expect 5 "job j1 out of attempts: audit" -- d audit
grep -q "job_state" "$WORK/out" && ok || bad "job j1 out of attempts: not job_state: $(grep FINDING "$WORK/out" | head -2)"
expect 0 "job j1: restore" -- d update jobs '{"_id":"j1"}' "${ORIG[jobs.j1]}" --bypass-validation

# Committed history rewritten (V7): a record's root and a child's doc are
# plain objects, so the validator accepts any; their transition rule
# refuses any change (V8), and past it the digest written with each tells
# the audit (and a read) that it changed.
for w in 'versions|V/2|root|{"n":9}' 'version_children|V/1/a|doc|{"x":9}' \
  'versions|V/2|children|{"a":1}'; do
  IFS='|' read -r coll id field val <<<"$w"
  expect 3 "$coll.$field rewritten: transition rule" -- d update "$coll" "{\"_id\":\"$id\"}" "{\"\$set\":{\"$field\":$val}}"
  expect 0 "$coll.$field rewritten" -- d update "$coll" "{\"_id\":\"$id\"}" "{\"\$set\":{\"$field\":$val}}" --bypass-validation
  expect 5 "$coll.$field rewritten: audit" -- d audit
  grep -q "history_changed" "$WORK/out" && ok || bad "$coll.$field rewritten: not history_changed: $(grep FINDING "$WORK/out" | head -2)"
  expect 4 "$coll.$field rewritten: a read refuses it" -- d version get V --version 2
  expect 0 "$coll.$field: restore" -- d update "$coll" "{\"_id\":\"$id\"}" "${ORIG[$coll.$id]}" --bypass-validation
done
# ... and its digest removed with it, in the same update
expect 3 "versions.root rewritten, sum removed: transition rule" -- d update versions '{"_id":"V/2"}' '{"$set":{"root":{"n":9}},"$unset":{"sum":""}}'
expect 0 "versions.root rewritten, sum removed" -- d update versions '{"_id":"V/2"}' '{"$set":{"root":{"n":9}},"$unset":{"sum":""}}' --bypass-validation
expect 5 "versions.root rewritten, sum removed: audit" -- d audit
grep -q "history_changed" "$WORK/out" && ok || bad "sum removed: not history_changed: $(grep FINDING "$WORK/out" | head -2)"
expect 0 "versions V/2: restore" -- d update versions '{"_id":"V/2"}' "${ORIG[versions.V/2]}" --bypass-validation

# Documents the audit could not key: an account or a transfer whose _id is
# not a string.
for coll in accounts transfers openings jobs version_roots versions version_children; do
  expect 3 "$coll integer _id: validator" -- d insert "$coll" '{"_id":7}'
  expect 0 "$coll integer _id: bypass" -- d insert "$coll" '{"_id":7}' --bypass-validation
  expect 5 "$coll integer _id: audit" -- d audit
  d delete "$coll" '{"_id":7}' --bypass-validation >/dev/null
done
expect 0 "restored store audits clean" -- d audit
finish
