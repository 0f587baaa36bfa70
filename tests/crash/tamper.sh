#!/usr/bin/env bash
# The tamper table (docs/validation.md): every protocol field of
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
# Then the plain-write table of the money patterns (accounts, transfers,
# opening records, ledger entries and accounts, batch markers): every
# protocol field set by a plain write, without --bypass-validation, must
# be refused (docs/transfers.md, docs/ledger.md, "What a plain write may
# change").
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
# The money patterns' documents as they were before later steps, for the
# plain-write table below: "an earlier value" of each field.  (Here, so
# the worker that runs t4 and commits the ledger runs before t2 is left
# in flight: its recovery pass must not roll t2 back.)
declare -A EARLY
EARLY[accounts.A]=$(d find accounts '{"_id":"A"}')
EARLY[accounts.B]=$(d find accounts '{"_id":"B"}')
d transfer A B 7 --id t4 --async >/dev/null
EARLY[transfers.t4]=$(d find transfers '{"_id":"t4"}')
d ledger account create L0 --min-balance none --asset USD/2 >/dev/null &&
  d ledger account create L1 --max-balance 100000 --asset USD/2 >/dev/null &&
  d ledger account create L2 --max-balance 200000 --asset USD/2 >/dev/null ||
  { echo "setup: ledger accounts"; exit 1; }
EARLY[ledger_accounts.L1]=$(d find ledger_accounts '{"_id":"L1"}')
d ledger post L0:-500 L1:500 --id e1 --ref R1 --meta '{"k":1}' >/dev/null || { echo "setup: e1"; exit 1; }
EARLY[ledger_entries.e1]=$(d find ledger_entries '{"_id":"e1"}')
d ledger post L1:-10 L2:10 --id e2 --pending --ref R2 --meta '{"k":2}' >/dev/null || { echo "setup: e2"; exit 1; }
EARLY[ledger_entries.e2]=$(d find ledger_entries '{"_id":"e2"}')
d ledger post-pending e2 >/dev/null && d ledger post L0:-20 L2:20 --id e5 >/dev/null &&
  d ledger reverse e5 --id e6 >/dev/null && d ledger post L1:-5 L2:5 --id e3 --pending >/dev/null ||
  { echo "setup: ledger entries"; exit 1; }
# LC: an account's close (docs/ledger.md, "Closing an account"): no plain
# write may reopen, move, delete or forge one.
d ledger account create L3 --asset USD/2 >/dev/null && LC=$(d ledger account close L3 | jq -r ._id) &&
  [ -n "$LC" ] || { echo "setup: ledger close"; exit 1; }
d insert items '{"_id":"i1","n":0}' '{"_id":"i2","n":0}' >/dev/null
EARLY[items.i1]=$(d find items '{"_id":"i1"}')
d batch-update items '{}' '{"$inc":{"n":1}}' --id B1 >/dev/null &&
  d batch-update items '{"_id":"i2"}' '{"$inc":{"n":1}}' --id B2 >/dev/null || { echo "setup: batch"; exit 1; }
d worker --once >/dev/null || { echo "setup: worker"; exit 1; }
[ "$(d count transfers '{"_id":"t4","state":"succeeded"}')" = 1 ] &&
  [ "$(d count ledger_entries '{"proc":"committed"}')" = 4 ] ||
  { echo "setup: t4 or the ledger's commits: $(d find transfers '{"_id":"t4"}') $(d find ledger_entries '{}')"; exit 1; }
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
# transactions (docs/transactions.md): x1 committed and applied on s1
# and s2, s3 deleted by a one-document transaction (a tombstone), x2
# crashed at its commit point with its intents on s1 and s2 (an hour's
# lease: nothing resolves it while the suite runs), x9 a fence
d insert stock '{"_id":"s1","n":5}' '{"_id":"s2","n":0}' '{"_id":"s3","n":1}' >/dev/null &&
  d txn --id x1 '[{"update":"stock","filter":{"_id":"s1"},"with":{"$inc":{"n":-2}}},{"update":"stock","filter":{"_id":"s2"},"with":{"$inc":{"n":2}}}]' >/dev/null &&
  d txn '[{"delete":"stock","filter":{"_id":"s3"}}]' >/dev/null || { echo "setup: txn"; exit 1; }
DOCTX_FAULT=txn.commit:crash d txn --id x2 --lease-ms 3600000 '[{"update":"stock","filter":{"_id":"s1"},"with":{"$inc":{"n":-1}}},{"update":"stock","filter":{"_id":"s2"},"with":{"$inc":{"n":1}}}]' >/dev/null 2>&1
d txn show x9 >/dev/null 2>&1
[ "$(d count stock '{"_txn.w.id":"x2","_txn.v":{"$gt":0}}')" = 2 ] &&
  [ "$(d count stock '{"_id":"s3","_txn.del":true}')" = 1 ] &&
  [ "$(d count txn_records '{"$or":[{"_id":"x1","state":"committed","applied":true},{"_id":"x2","state":"pending"},{"_id":"x9","fence":true}]}')" = 3 ] ||
  { echo "setup: txn states: $(d find stock '{}') $(d find txn_records '{}')"; exit 1; }
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
ORIG[ledger_entries.e5]=$(d find ledger_entries '{"_id":"e5"}')
for w in txn_records.x1 txn_records.x2 txn_records.x9 txn_clock.clock stock.s1 stock.s3; do
  ORIG[$w]=$(d find "${w%%.*}" "{\"_id\":\"${w#*.}\"}")
done

row() { # COLL ID FIELD VALUE (UNSET: remove the field)
  local coll=$1 id=$2 field=$3 val=$4 upd orig=${ORIG[$1.$2]} label="$1.$3=$4"
  if [ "$val" = UNSET ]; then
    upd="{\"\$unset\":{\"$field\":\"\"}}"
  else
    upd="{\"\$set\":{\"$field\":$val}}"
  fi
  expect 3 "$label: validator" -- d update "$coll" "{\"_id\":\"$id\"}" "$upd"
  [[ $(<"$WORK/err") == *VALIDATION* ]] && ok || bad "$label: not refused as VALIDATION: $(<"$WORK/err")"
  expect 0 "$label: bypass" -- d update "$coll" "{\"_id\":\"$id\"}" "$upd" --bypass-validation
  expect 5 "$label: audit" -- d audit
  expect 0 "$label: restore" -- d update "$coll" "{\"_id\":\"$id\"}" "$orig" --bypass-validation
}

# Which rows: all, or every other one, by turns, on each Redis target
# (TAMPER_TURN=1 or 2, run-redis.sh: the two targets share the table, the
# rules and the audit being the same code on both); every fourth under
# DTX_QUICK (the sanitizer stage, where a doctx start costs ~10x: it
# checks memory, and the validator and the audit walk the same code for
# every field).  The whole table runs on SQLite in the release stage.
case ${TAMPER_TURN:-} in '' | 1 | 2) ;; *) echo "TAMPER_TURN: 1 or 2"; exit 2 ;; esac
every=2
if [ -n "${TAMPER_TURN:-}" ]; then
  half=$((TAMPER_TURN - 1))
elif [ -n "${DTX_QUICK:-}" ]; then
  half=0 every=4
else
  half=
fi
mine() { [ -z "$half" ] || [ $(($1 % every)) -eq "$half" ]; } # TURN: run it?
turn=0
while IFS='|' read -r coll id field vals; do
  [ -n "$coll" ] || continue
  for v in $vals; do
    turn=$((turn + 1))
    mine "$turn" || continue
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
ledger_entries|e5|at|"x" -1 1.5 253402300800000 UNSET
ledger_entries|e5|imported|false "x" 1
TABLE

# Transactions (docs/transactions.md): every field of a record and of a
# document's _txn (a committed version under x2's intent, a tombstone),
# and the clock, to every wrong type -- and, where the type alone is
# right, to a value no step writes: a record's fields that do not go
# with its state, a timestamp at or above the clock's, an intent's body
# on a delete.  The user's collection has no validator: its plain-write
# rule refuses every change of _txn.  (Removing an optional field -- an
# intent, a tombstone's del -- leaves a document the steps could have
# left: the rule refuses it, the audit cannot tell.)
#
# The same promise as row() above, at a fraction of its processes: the
# plain writes go in one bulk per collection (each refused, nothing
# changed); past the rules, the rows are judged by groups, one audit
# each, a row's document named by a finding.  x1 and s1 have three
# copies each (written past the rules; the store audits clean with them),
# so a group holds up to four rows of each; rows on the clock, or that
# set a timestamp above it, go alone (the clock's finding names one
# document).  The group's documents are written whole, each its original
# with the row's change, and put back by the next group's bulk.
declare -A TXN_DOCS=([x1]="x1 xc1 xc2 xc3" [s1]="s1 sc1 sc2 sc3" [x2]=x2 [x9]=x9 [s3]=s3 [clock]=clock)
for w in txn_records.x1 stock.s1; do
  # (the copies of s1 are xc1's writes, which names them: T9)
  mapfile -t copies < <(jq -c '. as $d | $ARGS.positional[] as $c | $d | ._id = $c |
      if .keys then .keys += [range(1; 4) | {c: "stock", id: "sc\(.)", op: "put"}]
      else ._txn.by = "xc1" end' \
    --args ${TXN_DOCS[${w#*.}]#* } <<<"${ORIG[$w]}")
  ids=(${TXN_DOCS[${w#*.}]#* })
  for j in "${!ids[@]}"; do ORIG[${w%%.*}.${ids[$j]}]=${copies[$j]}; done
  d insert "${w%%.*}" "${copies[@]}" --bypass-validation >/dev/null || bad "txn: the copies of $w"
done
expect 0 "txn: the copies of x1 and s1 audit clean" -- d audit
TXN_ROWS=()
while IFS='|' read -r coll id field vals; do
  [ -n "$coll" ] || continue
  for v in $vals; do
    turn=$((turn + 1))
    mine "$turn" && TXN_ROWS+=("$coll|$id|$field|$v")
  done
done <<'TABLE'
txn_records|x1|state|"weird" 5 null {} [] true UNSET "pending" "aborted"
txn_records|x1|start_ts|"5" 1.5 null {} [] true -1 UNSET 999999999
txn_records|x1|commit_ts|"5" 1.5 null {} [] true 0 2 UNSET 999999999
txn_records|x1|keys|"x" 5 null {} true UNSET
txn_records|x1|keys.0|"x" 5 null [] true
txn_records|x1|keys.0.c|5 null {} [] true "" "a/b" UNSET
txn_records|x1|keys.0.id|"" [] UNSET
txn_records|x1|keys.0.op|"weird" 5 null {} UNSET
txn_records|x1|owner|5 1.5 {} [] true
txn_records|x1|lease_until|"5" 1.5 null {} [] true UNSET
txn_records|x1|epoch|"5" 1.5 null {} [] true -1 UNSET
txn_records|x1|updated|"5" 1.5 null {} [] true UNSET
txn_records|x1|created|"5" 1.5 null {} [] true UNSET
txn_records|x1|applied|"x" 5 null {} []
txn_records|x1|cleared|"x" 5 null true
txn_records|x1|fence|"x" 5 null true
txn_records|x2|state|"committed"
txn_records|x2|commit_ts|5
txn_records|x2|applied|true
txn_records|x2|cleared|true
txn_records|x9|state|"pending" "committed"
txn_records|x9|commit_ts|5
txn_records|x9|applied|false
txn_records|x9|fence|"x" 5 null
txn_records|x9|cleared|"x" 5 false
txn_clock|clock|ts|"5" 1.5 null {} [] true 0 1 UNSET
stock|s1|_txn|"x" 5 1.5 null [] true
stock|s1|_txn.v|"5" 1.5 null {} [] true 0 999999999 UNSET
stock|s1|_txn.t|"5" 1.5 null {} [] true UNSET
stock|s1|_txn.by|5 null {} [] true UNSET
stock|s1|_txn.p|"x" 5 null [] true UNSET
stock|s1|_txn.p.v|"5" 1.5 null {} [] true -1 999999999 UNSET
stock|s1|_txn.p.doc|"x" 5 [] true UNSET
stock|s1|_txn.w|"x" 5 null [] true
stock|s1|_txn.w.id|5 null {} [] true UNSET
stock|s1|_txn.w.ts|"5" 1.5 null {} [] true -1 999999999 UNSET
stock|s1|_txn.w.op|"weird" 5 null {} UNSET
stock|s1|_txn.w.doc|"x" 5 null [] true UNSET
stock|s3|_txn.del|"x" 5 null {} [] false
stock|s3|_txn.w|{"id":"x2","ts":1,"op":"del","doc":{"n":1}}
TABLE

txn_op() { # ID FIELD VALUE: the plain write's update, as a bulk line
  if [ "$3" = UNSET ]; then
    printf '{"updateOne":{"filter":{"_id":"%s"},"update":{"$unset":{"%s":""}}}}\n' "$1" "$2"
  else
    printf '{"updateOne":{"filter":{"_id":"%s"},"update":{"$set":{"%s":%s}}}}\n' "$1" "$2" "$3"
  fi
}
# 1. Each row as a plain write: refused, nothing changed.
for coll in txn_records txn_clock stock; do
  before=$(d find "$coll" '{}')
  : >"$WORK/txn.rows"
  for r in "${TXN_ROWS[@]}"; do
    IFS='|' read -r c id field v <<<"$r"
    [ "$c" = "$coll" ] && txn_op "$id" "$field" "$v" >>"$WORK/txn.rows"
  done
  [ -s "$WORK/txn.rows" ] || continue
  d bulk "$coll" <"$WORK/txn.rows" >"$WORK/txn.res" 2>"$WORK/txn.err"
  paste -d '\t' "$WORK/txn.rows" "$WORK/txn.res" | while IFS=$'\t' read -r line res; do
    [[ $res == '{"ok":false,"error":"VALIDATION"'* ]] && ok || bad "$coll: a plain write not refused as VALIDATION: $line -> $res $(head -c 200 "$WORK/txn.err")"
  done
  [ "$(wc -l <"$WORK/txn.res")" = "$(wc -l <"$WORK/txn.rows")" ] && [ "$(d find "$coll" '{}')" = "$before" ] && ok ||
    bad "$coll: the refused plain writes changed it, or some had no answer"
done
# 2. Past the rules, by groups: each row's document reported by the audit.
# The rows are put in groups first (GROUP, DOCOF: a document of its
# role no earlier row of the group took), then one jq writes every
# group's bulk lines: each row's document, the original with the row's
# change; each document of the group before that this one leaves, its
# original (a last group, of no rows, puts back the last one's).
declare -A G_USED=() GROUP=() DOCOF=()
g=0
for i in "${!TXN_ROWS[@]}"; do
  IFS='|' read -r coll id field v <<<"${TXN_ROWS[$i]}"
  alone=
  if [ "$coll" = txn_clock ] || [ "$v" = 999999999 ]; then
    alone=1
    [ ${#G_USED[@]} = 0 ] || { g=$((g + 1)); G_USED=(); }
  fi
  doc=
  for c in ${TXN_DOCS[$id]}; do
    [ -n "${G_USED[$c]:-}" ] || { doc=$c; break; }
  done
  [ -n "$doc" ] || { g=$((g + 1)); G_USED=(); doc=$id; }
  G_USED[$doc]=1
  GROUP[$i]=$g
  DOCOF[$i]=$doc
  [ -z "$alone" ] || { g=$((g + 1)); G_USED=(); }
done
[ ${#G_USED[@]} = 0 ] || g=$((g + 1))
declare -A BULK=()
while IFS=$'\t' read -r gi coll line; do
  BULK[$gi.$coll]+=$line$'\n'
done < <(
  {
    for k in "${!ORIG[@]}"; do
      case $k in txn_* | stock.*) printf 'O\t%s\t%s\n' "$k" "${ORIG[$k]}" ;; esac
    done
    for i in "${!TXN_ROWS[@]}"; do
      IFS='|' read -r coll id field v <<<"${TXN_ROWS[$i]}"
      printf 'R\t%s\t%s\t%s\t%s\t%s\n' "${GROUP[$i]}" "$coll" "${DOCOF[$i]}" "$field" "$v"
    done
  } | jq -rRn --argjson last "$g" '
    def p: split(".") | map(tonumber? // .);
    [inputs | split("\t")] as $in |
    ($in | map(select(.[0] == "O") | {(.[1]): (.[2] | fromjson)}) | add) as $orig |
    ($in | map(select(.[0] == "R") | {g: (.[1] | tonumber), coll: .[2],
      doc: .[3], field: .[4], val: .[5]})) as $rows |
    def line($g; $coll; $doc; $new):
      "\($g)\t\($coll)\t" + ({updateOne: {filter: {_id: $doc}, update: $new,
        bypassDocumentValidation: true}} | tojson);
    ($rows[] | . as $r | $orig["\($r.coll).\($r.doc)"] |
     (if $r.val == "UNSET" then delpaths([$r.field | p])
      else setpath($r.field | p; $r.val | fromjson) end) |
     line($r.g; $r.coll; $r.doc; .)),
    (range(1; $last + 1) as $g |
     ($rows | map(select(.g == $g) | "\(.coll).\(.doc)")) as $now |
     $rows[] | select(.g == $g - 1) | "\(.coll).\(.doc)" as $k |
     select($now | index([$k]) | not) |
     line($g; .coll; .doc; $orig[$k]))')
for ((gi = 0; gi <= g; gi++)); do
  for coll in txn_records txn_clock stock; do
    [ -n "${BULK[$gi.$coll]:-}" ] || continue
    printf '%s' "${BULK[$gi.$coll]}" | d bulk "$coll" >"$WORK/txn.res" 2>&1 ||
      bad "txn group $gi: its writes to $coll: $(head -c 300 "$WORK/txn.res")"
  done
  [ "$gi" -lt "$g" ] || break
  expect 5 "txn group $gi: audit" -- d audit
  findings=$(grep '^FINDING' "$WORK/out")
  for i in "${!TXN_ROWS[@]}"; do
    [ "${GROUP[$i]}" = "$gi" ] || continue
    doc=${DOCOF[$i]}
    [[ $findings =~ (^|[^A-Za-z0-9_])$doc([^A-Za-z0-9_]|$) ]] && ok ||
      bad "${TXN_ROWS[$i]} (on $doc): past the rules, the audit does not report it: ${findings:0:300}"
  done
done
expect 0 "txn: every document put back: audit clean" -- d audit

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

# A ledger entry's time moved before the entry it follows (docs/ledger.md,
# "Entry time"): a valid time, so only the transition rule (a time never
# changes) refuses it, and past it the audit reports the order broken.
expect 3 "ledger entry time moved back: transition rule" -- d update ledger_entries '{"_id":"e5"}' '{"$set":{"at":1}}'
expect 0 "ledger entry time moved back: bypass" -- d update ledger_entries '{"_id":"e5"}' '{"$set":{"at":1}}' --bypass-validation
expect 5 "ledger entry time moved back: audit" -- d audit
grep -q "time_order: account L0: entry e5" "$WORK/out" && ok || bad "ledger time moved back: not time_order: $(grep FINDING "$WORK/out" | head -2)"
expect 0 "ledger e5: restore" -- d update ledger_entries '{"_id":"e5"}' "${ORIG[ledger_entries.e5]}" --bypass-validation

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

# ---- plain writes: the money patterns --------------------------------------------
# docs/transfers.md and docs/ledger.md, "What a plain write may change":
# without --bypass-validation, no generic command may change a protocol
# field of an account, a transfer, an opening record, a ledger entry or a
# ledger account, insert one, or touch a batch marker.  Every protocol
# field is set to a value of the wrong type, to another live document's
# value and to an earlier value of its own (EARLY, captured before later
# steps), and removed; each as updateOne and as findOneAndUpdate, all of a
# collection's rows in one `doctx bulk` (one process: the same store calls
# as `doctx update` and `find-and-modify`, the suite stays cheap on every
# backend); then each collection through `doctx update` (by field,
# replacement, --many, --upsert), `find-and-modify`, `insert` and
# `delete` themselves.  A row must be refused (VALIDATION) and change
# nothing, or -- a delete a guard allows -- leave the audit clean.  A row
# that is not refused is run again alone and judged by the audit: the row
# fails unless the audit reports what it broke (exit 5), and the document
# is restored.
declare -A PLAIN_FIELDS=(
  [accounts]="balance min_balance opening_balance ceiling pending voids unregistered pending.0.amount pending.0.tx voids.0.tx"
  [transfers]="from to amount state reason created owner lease_until epoch updated"
  [openings]="opening_balance at"
  [ledger_entries]="changes changes.0.value changes.0.seqId changes.1.account changes.1.max state proc created updated expires_at resolved_at committed_at reverses meta meta.k ref amounts post_id at legs_sha"
  [ledger_accounts]="min_balance max_balance cache cache.balance cache.seqId created updated asset legs_sha_from"
  [items]="_batches _batches.B1"
)
# COLL: its target documents, then the documents "another live value" is
# taken from (the first whose value differs).
declare -A PLAIN_DOCS=(
  [accounts]="A B | B X A"
  [transfers]="t1 t2 t4 | t3 t2 t4 t1"
  [openings]="A | X B"
  [ledger_entries]="e1 e3 e6 $LC | e2 e3 e5 e6 e1"
  [ledger_accounts]="L1 | L2 L0"
  [items]="i1 | i2"
)

# The bulk lines of every row of COLL (label TAB line), computed by one jq
# from the collection (ALL, one document per line), the target ids, the
# ids "another live value" is taken from and the earlier documents.
plain_lines() { # COLL
  local coll=$1 k early="{}"
  for k in "${!EARLY[@]}"; do
    [ "${k%%.*}" = "$coll" ] && early=$(jq -c --arg k "${k#*.}" --argjson d "${EARLY[$k]}" '.[$k] = $d' <<<"$early")
  done
  jq -nr --argjson early "$early" --arg fields "${PLAIN_FIELDS[$coll]}" \
    --arg coll "$coll" --arg ids "${PLAIN_DOCS[$coll]%%|*}" \
    --arg oids "${PLAIN_DOCS[$coll]#*|}" '
    def at($p): getpath($p | split(".") | map(tonumber? // .));
    def wrong: if type == "string" then 7 elif type == "number" then "x"
      elif type == "array" then {} elif type == "object" then []
      elif type == "boolean" then "x" else 5 end;
    [inputs] as $all | ($all | map({(._id): .}) | add) as $by |
    ($oids | split(" ") | map(select(. != "")) | map($by[.])) as $others |
    $ids | split(" ")[] | select(. != "") | $by[.] as $cur | $cur._id as $id |
    $early[$id] as $e | $fields | split(" ")[] as $f | ($cur | at($f)) as $v |
    ([["wrong type", ($v | wrong)]]
     + ([$others[] | select(._id != $id) | at($f) | select(. != $v and . != null)][:1]
        | map(["other doc", .]))
     + (if $e != null and ($e | at($f)) != $v and ($e | at($f)) != null
        then [["earlier", ($e | at($f))]] else [] end)) as $vals |
    ($vals[] | "\($coll).\($id).\($f)=\(.[0]) [updateOne]\t" +
       ({updateOne: {filter: {_id: $id}, update: {"$set": {($f): .[1]}}}} | tojson),
     "\($coll).\($id).\($f)=\(.[0]) [findOneAndUpdate]\t" +
       ({findOneAndUpdate: {filter: {_id: $id}, update: {"$set": {($f): .[1]}}}} | tojson)),
    (if $v != null then "\($coll).\($id).\($f) removed [updateOne]\t" +
       ({updateOne: {filter: {_id: $id}, update: {"$unset": {($f): ""}}}} | tojson)
     else empty end)' <<<"$ALL"
}

# A row that was not refused in its bulk (where the rows before it may
# have changed the document): alone again on the document as it was.
# Refused then, or changing nothing, it passes; else the audit must
# report what it did.  The document is restored either way.
plain_slipped() { # COLL ID LABEL LINE SNAPSHOT
  local coll=$1 id=$2 label=$3 line=$4 orig res
  orig=$(jq -c --arg id "$id" 'select(._id == $id)' <<<"$5")
  d update "$coll" "{\"_id\":\"$id\"}" "$orig" --bypass-validation >/dev/null
  res=$(printf '%s\n' "$line" | d bulk "$coll" 2>&1)
  if [[ $res == '{"ok":false,"error":"VALIDATION"'* ]] ||
    [ "$(d find "$coll" "{\"_id\":\"$id\"}")" = "$orig" ]; then
    ok
  else
    d audit >"$WORK/slip.audit" 2>&1
    [ $? = 5 ] && ok || bad "$label: a plain write was not refused and the audit is clean: $line"
  fi
  d update "$coll" "{\"_id\":\"$id\"}" "$orig" --bypass-validation >/dev/null
}

plain_table() { # COLL
  local coll=$1 id before after label line res n=0
  before=$(d find "$coll" '{}')
  ALL=$before plain_lines "$coll" >"$WORK/plain.rows"
  cut -f2- "$WORK/plain.rows" | d bulk "$coll" >"$WORK/plain.res" 2>"$WORK/plain.err"
  [ "$(wc -l <"$WORK/plain.res")" = "$(wc -l <"$WORK/plain.rows")" ] ||
    { bad "$coll: bulk answered $(wc -l <"$WORK/plain.res") of $(wc -l <"$WORK/plain.rows") rows: $(head -c 300 "$WORK/plain.err")"; return; }
  after=$(d find "$coll" '{}')
  while IFS=$'\t' read -r label line <&3 && IFS= read -r res <&4; do
    n=$((n + 1))
    case "$res" in
    '{"ok":false,"error":"VALIDATION"'*) ok ;;
    '{"ok":true'*)
      id=${label#"$coll".}; id=${id%%.*}
      plain_slipped "$coll" "$id" "$label" "$line" "$before" ;;
    *) bad "$label: not refused as VALIDATION: $res" ;;
    esac
  done 3<"$WORK/plain.rows" 4<"$WORK/plain.res"
  [ "$n" -ge 6 ] && ok || bad "$coll: only $n plain rows"
  [ "$before" = "$after" ] || [ "$(d find "$coll" '{}')" = "$before" ] && ok ||
    bad "$coll: the refused plain writes changed it"
}

for coll in accounts transfers openings ledger_entries ledger_accounts items; do
  plain_table "$coll"
done

# Each collection through the commands themselves: a field set, a whole
# document replaced with one field changed, every document at once, an
# upsert and an insert of a new one, a find-and-modify.  Each must be
# refused as VALIDATION; the collections are compared once, at the end.
declare -A SNAP
for coll in "${!PLAIN_FIELDS[@]}"; do SNAP[$coll]=$(d find "$coll" '{}'); done
doc_of() { jq -c --arg id "$2" 'select(._id == $id)' <<<"${SNAP[$1]}"; }
plain_cmd() { # LABEL CMD...
  local label=$1
  shift
  expect 3 "$label" -- d "$@"
  [[ $(<"$WORK/err") == *VALIDATION* ]] && ok || bad "$label: not refused as VALIDATION: $(<"$WORK/err") $(<"$WORK/out")"
}
turn=0
for w in 'accounts A B' 'transfers t2 t3' 'openings A X' 'ledger_entries e3 e1' 'ledger_accounts L1 L2' 'items i1 i2'; do
  read -r coll id other <<<"$w"
  f=${PLAIN_FIELDS[$coll]%% *}
  cur=$(doc_of "$coll" "$id")
  # another document's value, or one of the wrong type when they agree
  v=$(jq -c --arg f "$f" --argjson o "$(doc_of "$coll" "$other")" \
    'if .[$f] != $o[$f] then $o[$f] elif (.[$f] | type) == "string" then 7 else "x" end' <<<"$cur")
  # the document with that value, as a replacement
  rep=$(jq -c --arg f "$f" --argjson v "$v" '.[$f] = $v' <<<"$cur")
  turn=$((turn + 1))
  if mine "$turn"; then
    plain_cmd "$coll.$id.$f: update" update "$coll" "{\"_id\":\"$id\"}" "{\"\$set\":{\"$f\":$v}}"
    plain_cmd "$coll.$id: replaced" update "$coll" "{\"_id\":\"$id\"}" "$rep"
    plain_cmd "$coll: every document" update "$coll" '{}' "{\"\$set\":{\"$f\":$v}}" --many
  fi
  if mine $((turn + 1)); then
    plain_cmd "$coll.$id.$f: find-and-modify" find-and-modify "$coll" "{\"_id\":\"$id\"}" "{\"\$set\":{\"$f\":$v}}"
    [ "$coll" = items ] && continue # the user's documents: inserts are theirs
    plain_cmd "$coll: an upsert" update "$coll" '{"_id":"new1"}' "{\"\$set\":{\"$f\":$v}}" --upsert
    plain_cmd "$coll: an insert" insert "$coll" "$(jq -c '._id = "new2"' <<<"$cur")"
  fi
done
# A transfer in flight (t2: A debited, B marked) moved by hand along the
# diagram or against it, its epoch bumped, its lease stretched; the
# markers that are its money moved by hand (a refund before the commit
# would make money; a credit without the commit too); a ledger entry
# posted, committed or given more time by hand; a batch marker forged.
while IFS='|' read -r coll id upd; do
  [ -n "$coll" ] || continue
  turn=$((turn + 1))
  mine "$turn" || continue
  plain_cmd "$coll.$id: $upd" update "$coll" "{\"_id\":\"$id\"}" "$upd"
done <<'ROWS'
transfers|t2|{"$set":{"state":"committed"}}
transfers|t2|{"$set":{"state":"rolling_back","reason":"canceled"}}
transfers|t2|{"$set":{"state":"succeeded"}}
transfers|t2|{"$set":{"state":"failed","reason":"canceled"}}
transfers|t2|{"$inc":{"epoch":1}}
transfers|t2|{"$set":{"lease_until":9223372036854775807}}
transfers|t4|{"$set":{"state":"initiated","epoch":0,"owner":null}}
accounts|A|{"$pull":{"pending":{"tx":"t2"}},"$inc":{"balance":10}}
accounts|B|{"$pull":{"pending":{"tx":"t2"}},"$inc":{"balance":10}}
accounts|B|{"$pull":{"pending":{"tx":"t2"}},"$inc":{"ceiling":-10}}
accounts|A|{"$push":{"voids":{"tx":"t9","at":1}}}
accounts|A|{"$pull":{"voids":{"tx":"t3"}}}
accounts|A|{"$set":{"min_balance":null}}
ledger_entries|e3|{"$set":{"state":"posted","resolved_at":1}}
ledger_entries|e3|{"$set":{"proc":"committed"}}
ledger_entries|e3|{"$inc":{"expires_at":1}}
ledger_accounts|L1|{"$inc":{"cache.seqId":1}}
items|i2|{"$set":{"_batches.B3":"x"}}
items|i1|{"_id":"i1","n":5}
ROWS
# An account's close reopened, moved or committed by hand.
for upd in '{"$set":{"state":"posted","proc":"uncommitted"}}' '{"$set":{"proc":"committed","committed_at":1}}' \
  '{"$set":{"changes.0.seqId":99}}' '{"$unset":{"state":""}}'; do
  turn=$((turn + 1))
  mine "$turn" || continue
  plain_cmd "ledger_entries.$LC: $upd" update ledger_entries "{\"_id\":\"$LC\"}" "$upd"
done
for coll in "${!PLAIN_FIELDS[@]}"; do
  [ "$(d find "$coll" '{}')" = "${SNAP[$coll]}" ] && ok || bad "$coll: a refused plain write changed it"
done
# A step of another pattern that writes an update its caller chose -- a
# job's effect -- is a plain write to the batch's markers: refused.
cat >"$WORK/fx.sh" <<EOF
"\$DOCTX" --store "\$DOCTX_STORE" job effect "\$DOCTX_JOB_ID" "\$DOCTX_JOB_EPOCH" k items \\
  '{"_id":"i1"}' '{"\$unset":{"_batches.B1":""}}' >"$WORK/fx.out" 2>&1
EOF
d job add fxq t '{}' --id jfx >/dev/null && d job work fxq --once --exec "bash $WORK/fx.sh" >/dev/null 2>&1
[ "$(d count items '{"_id":"i1","_batches.B1":{"$exists":true}}')" = 1 ] && ok ||
  bad "a job effect took a batch marker off: $(<"$WORK/fx.out") $(d find items '{"_id":"i1"}')"
grep -q "_batches may not change" "$WORK/fx.out" && ok || bad "job effect on a marker: $(<"$WORK/fx.out")"
# ... and the batch never applies twice: its rerun updates nothing.
expect 0 "B1 rerun" -- d batch-update items '{}' '{"$inc":{"n":1}}' --id B1
grep -q '"modified":0' "$WORK/out" && [ "$(d count items '{"n":{"$gt":2}}')" = 0 ] && ok ||
  bad "B1 rerun applied again: $(out) $(d find items '{}')"
# Deletes: what a guard refuses stays; what it lets go (an empty account
# closed, a failed transfer cleaned up) leaves the audit clean, and is
# put back (past the rules: a plain insert is refused).
for w in 'accounts A' 'accounts B' 'accounts X' 'transfers t1' 'transfers t2' 'transfers t3' \
  'transfers t4' 'openings A' 'openings X' 'ledger_entries e1' 'ledger_entries e3' \
  "ledger_entries $LC" 'ledger_accounts L0' 'ledger_accounts L2'; do
  read -r coll id <<<"$w"
  turn=$((turn + 1))
  mine "$turn" || continue
  d delete "$coll" "{\"_id\":\"$id\"}" >"$WORK/out" 2>"$WORK/err"
  case "$?:$(<"$WORK/out")" in
  3:*) grep -q "delete refused" "$WORK/err" && ok || bad "delete $coll $id: $(<"$WORK/err")" ;;
  0:'{"deleted":1}')
    expect 0 "delete $coll $id (its guard lets it go): audit clean" -- d audit
    expect 0 "delete $coll $id: restore" -- d insert "$coll" "$(doc_of "$coll" "$id")" --bypass-validation ;;
  *) bad "delete $coll $id: $(<"$WORK/err") $(<"$WORK/out")" ;;
  esac
done
expect 0 "plain writes: audit clean" -- d audit

# Documents the audit could not key: an account or a transfer whose _id is
# not a string.
for coll in accounts transfers openings jobs version_roots versions version_children txn_records txn_clock; do
  expect 3 "$coll integer _id: validator" -- d insert "$coll" '{"_id":7}'
  expect 0 "$coll integer _id: bypass" -- d insert "$coll" '{"_id":7}' --bypass-validation
  expect 5 "$coll integer _id: audit" -- d audit
  d delete "$coll" '{"_id":7}' --bypass-validation >/dev/null
done
expect 0 "restored store audits clean" -- d audit
finish
