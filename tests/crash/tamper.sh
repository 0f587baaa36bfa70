#!/usr/bin/env bash
# The tamper table (issue 8, "How it is proven"): every protocol field of
# accounts, transfers, opening records and jobs set to every wrong type.  Each row must be
# refused by the collection's validator (exit 3) and, written anyway with
# --bypass-validation, reported by the audit (exit 5).  None may pass
# silently.  The store holds a succeeded transfer t1, a transfer t2 in
# flight (its markers on A and B) and a canceled t3 (its tombstones), so
# markers and tombstones have fields to break.
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
expect 0 "baseline audit clean" -- d audit
[ "$(d count accounts '{"_id":"A","pending.0":{"$exists":true},"voids.0":{"$exists":true}}')" = 1 ] &&
  ok || bad "setup: A lacks a marker or a tombstone: $(d find accounts '{"_id":"A"}')"

# The documents as they were, to restore after each row.
declare -A ORIG
ORIG[accounts.A]=$(d find accounts '{"_id":"A"}')
ORIG[transfers.t1]=$(d find transfers '{"_id":"t1"}')
ORIG[openings.A]=$(d find openings '{"_id":"A"}')
ORIG[jobs.j1]=$(d find jobs '{"_id":"j1"}')

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

while IFS='|' read -r coll id field vals; do
  [ -n "$coll" ] || continue
  for v in $vals; do row "$coll" "$id" "$field" "$v"; done
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
TABLE

# Documents the audit could not key: an account or a transfer whose _id is
# not a string.
for coll in accounts transfers openings jobs; do
  expect 3 "$coll integer _id: validator" -- d insert "$coll" '{"_id":7}'
  expect 0 "$coll integer _id: bypass" -- d insert "$coll" '{"_id":7}' --bypass-validation
  expect 5 "$coll integer _id: audit" -- d audit
  d delete "$coll" '{"_id":7}' --bypass-validation >/dev/null
done
expect 0 "restored store audits clean" -- d audit
finish
