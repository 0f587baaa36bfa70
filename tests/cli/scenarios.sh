#!/usr/bin/env bash
# LeanCloud's scenarios (docs/scenarios.md): the
# CLI contract of doctx batch-update and doctx interest run, each crashed
# mid-run and rerun twice.
#   batch-update: bad input exits 2 and writes nothing; the counts of a
#     run and a rerun; a FILTER the UPDATE leaves; _ids of mixed types; a
#     validator that refuses the marker stops the batch (exit 3) having
#     changed nothing; two runs at once update each document once; a crash
#     at the 250th and then the 40th document, then a rerun: every
#     document updated exactly once.
#   interest run: bad input (day, rate, settlement) exits 2 recording
#     nothing; leap days; who earns (a positive balance and a limit);
#     a rerun credits nothing; a settlement with a limit exits 2; a crash
#     before the 5th credit, then one inside the 3rd credit's transfer,
#     then reruns: the balances an uninterrupted run gives, the audit clean;
#     plain writes of a day record refused; account ids too long for
#     interest:DAY:ID credited under their SHA-256; an account the
#     transfers refuse listed, the others credited, exit 3.
# (tests/cli/flashsale.sh has the flash sale; scenarios/batch.sh and
# scenarios/interest.sh put every fault point through faults.sh/pause.sh.)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/transfer.sh" # balance

is() { # LABEL GOT WANT
  [ "$2" = "$3" ] && ok || bad "$1: got '$2', want '$3'"
}
counts() { jq -rc '[.matched, .modified, .already] | @csv' "$WORK/out"; }

# ---- batch-update: contract ------------------------------------------------------------
new_store batch
d insert items '{"_id":1,"kind":"a","n":0}' '{"_id":2,"kind":"a","n":0}' \
  '{"_id":"x","kind":"a","n":0}' '{"_id":{"k":1},"kind":"a","n":0}' \
  '{"_id":"y","kind":"b","n":0}' >/dev/null || { echo "setup failed"; exit 1; }
A='{"kind":"a"}'
INC='{"$inc":{"n":1}}'
expect 2 "batch: no --id" -- d batch-update items "$A" "$INC"
expect 2 "batch: bad id" -- d batch-update items "$A" "$INC" --id 'b 1'
expect 2 "batch: id too long" -- d batch-update items "$A" "$INC" --id "$(printf 'b%.0s' {1..65})"
expect 2 "batch: UPDATE touching the marker" -- d batch-update items "$A" '{"$set":{"_batches.B":1}}' --id B
expect 2 "batch: UPDATE renaming onto the marker" -- d batch-update items "$A" '{"$rename":{"n":"_batches"}}' --id B
expect 2 "batch: UPDATE unsetting the markers" -- d batch-update items "$A" '{"$unset":{"_batches":""}}' --id B
expect 2 "batch: a replacement UPDATE" -- d batch-update items "$A" '{"n":5}' --id B
expect 2 "batch: unknown update operator" -- d batch-update items "$A" '{"$incr":{"n":1}}' --id B
expect 2 "batch: unknown filter operator" -- d batch-update items '{"n":{"$gtt":0}}' "$INC" --id B
expect 2 "batch: malformed JSON" -- d batch-update items '{"kind":' "$INC" --id B
expect 2 "batch: a protocol collection" -- d batch-update transfers '{}' "$INC" --id B
expect 2 "batch: extra argument" -- d batch-update items "$A" "$INC" extra --id B
is "batch: bad input changed nothing" "$(d count items '{"$or":[{"n":{"$ne":0}},{"_batches":{"$exists":true}}]}')" 0

expect 0 "batch: run" -- d batch-update items "$A" "$INC" --id B
is "batch: run counts" "$(counts)" "4,4,0"
expect 0 "batch: rerun" -- d batch-update items "$A" "$INC" --id B
is "batch: rerun counts" "$(counts)" "4,0,4"
is "batch: each of kind a once (mixed _ids), y untouched" \
  "$(d find items '{}' --sort '{"_id":1}' | jq -rc '[.n, (._batches.B != null)] | @csv' | tr '\n' ' ')" \
  "1,true 1,true 1,true 0,false 1,true "
expect 0 "batch: another id applies again" -- d batch-update items "$A" "$INC" --id B2
is "batch: B2 counts" "$(counts)" "4,4,0"
# An UPDATE that takes documents out of its FILTER: the rerun finds none.
expect 0 "batch: leaving the filter" -- d batch-update items '{"kind":"a"}' '{"$set":{"kind":"c"}}' --id M
is "batch: leaving counts" "$(counts)" "4,4,0"
expect 0 "batch: leaving, rerun" -- d batch-update items '{"kind":"a"}' '{"$set":{"kind":"c"}}' --id M
is "batch: leaving rerun counts" "$(counts)" "0,0,0"
# The same id with another FILTER or UPDATE is another batch: refused.
expect 3 "batch: id reused with another UPDATE" -- d batch-update items '{"kind":"a"}' '{"$inc":{"n":1000}}' --id B
expect 3 "batch: id reused with another FILTER" -- d batch-update items '{}' "$INC" --id B
is "batch: a reused id changed nothing" "$(d count items '{"n":{"$gt":2}}')" 0
# A step whose reply is lost: its retry matches nothing, and the run's
# stamp in the marker says the step was its own.
DOCTX_FAULT=batch.apply:lost:2 d batch-update items '{}' "$INC" --id L >"$WORK/out" 2>/dev/null
is "batch: a lost reply counted as modified" "$(counts)" "5,5,0"
is "batch: a lost reply applied once" "$(d count items '{"_batches.L":{"$exists":true},"n":{"$in":[1,3]}}')" 5
# A validator that admits no _batches: refused (VALIDATION), nothing changed.
d insert strict '{"_id":"s1","n":0}' '{"_id":"s2","n":0}' >/dev/null
d rules strict --validator '{"$jsonSchema":{"additionalProperties":false,"properties":{"_id":{},"n":{}}}}' >/dev/null
expect 3 "batch: a validator refusing the marker" -- d batch-update strict '{}' "$INC" --id V
grep -q 'VALIDATION.*"s1"' "$WORK/err" && ok || bad "batch: VALIDATION naming s1: $(<"$WORK/err")"
is "batch: the refused batch changed nothing" "$(d count strict '{"n":0}')" 2

# ---- batch-update: two runs at once, and crashes mid-batch --------------------------
N=300
new_store batch_big
# 300 documents cross a page (200).
mapfile -t docs < <(seq -f '{"_id":"d%03g","n":0}' 1 $N) # no fork per line
d insert big "${docs[@]}" >/dev/null || { echo "setup failed"; exit 1; }
start_bg "$WORK/c1.log" d batch-update big '{}' "$INC" --id C
p1=$BG_PID
start_bg "$WORK/c2.log" d batch-update big '{}' "$INC" --id C
p2=$BG_PID
bounded_wait "$p1" 60 "$WORK/c1.log" && bounded_wait "$p2" 60 "$WORK/c2.log" && ok ||
  bad "batch: concurrent runs failed"
is "batch: concurrent runs modified each once" \
  "$(cat "$WORK/c1.log" "$WORK/c2.log" | jq -s '[.[].modified] | add')" "$N"
is "batch: concurrent runs, every n 1" "$(d count big '{"n":1}')" "$N"

DOCTX_FAULT=batch.apply:crash:250 d batch-update big '{}' "$INC" --id K >/dev/null 2>&1
is "batch: crash at the 250th document (second page)" "$?" 137
is "batch: 249 applied before the crash" "$(d count big '{"n":2}')" 249
DOCTX_FAULT=batch.apply:crash:40 d batch-update big '{}' "$INC" --id K >/dev/null 2>&1
is "batch: the rerun crashes at its 40th" "$?" 137
expect 0 "batch: the second rerun finishes" -- d batch-update big '{}' "$INC" --id K
is "batch: the second rerun's counts" "$(counts)" "$N,12,288"
is "batch: after two crashes every document updated once" "$(d count big '{"n":2,"_batches.K":{"$exists":true}}')" "$N"
expect 0 "batch: audit" -- d audit --settled

# ---- interest: contract --------------------------------------------------------------------
new_store interest
d account create A --balance 1000000 >/dev/null &&
  d account create B --balance 12345 >/dev/null &&
  d account create C --balance 0 >/dev/null &&
  d account create N --balance -50 --min-balance -100 >/dev/null &&
  d account create S --balance 99 --min-balance -1000 >/dev/null &&
  d account create X --balance 500 --min-balance none >/dev/null || { echo "setup failed"; exit 1; }
R=(--rate-ppm 1000)
expect 2 "interest: 2026-02-29 is no date" -- d interest run "${R[@]}" --day 2026-02-29
expect 2 "interest: month 13" -- d interest run "${R[@]}" --day 2026-13-01
expect 2 "interest: April 31" -- d interest run "${R[@]}" --day 2026-04-31
expect 2 "interest: day 00" -- d interest run "${R[@]}" --day 2026-01-00
expect 2 "interest: short form" -- d interest run "${R[@]}" --day 2026-1-01
expect 2 "interest: trailing text" -- d interest run "${R[@]}" --day 2026-01-011
expect 2 "interest: no day" -- d interest run "${R[@]}"
expect 2 "interest: no rate" -- d interest run --day 2026-01-01
expect 2 "interest: negative rate" -- d interest run --rate-ppm -1 --day 2026-01-01
expect 2 "interest: rate not a number" -- d interest run --rate-ppm 1.5 --day 2026-01-01
expect 2 "interest: rate past the bound" -- d interest run --rate-ppm 1000001 --day 2026-01-01
expect 2 "interest: rate past int64" -- d interest run --rate-ppm 99999999999999999999 --day 2026-01-01
expect 2 "interest: bad settlement id" -- d interest run "${R[@]}" --day 2026-01-01 --settlement 'a b'
expect 2 "interest: no subcommand" -- d interest "${R[@]}" --day 2026-01-01
is "interest: bad input recorded nothing" "$(d count accounts '{"_id":"settlement"}') $(d count transfers)" "0 0"

expect 0 "interest: 2028-02-29 is a date" -- d interest run "${R[@]}" --day 2028-02-29
is "interest: summary" "$(jq -rc '[.day,.rate_ppm,.settlement,.accounts,.credited,.already,.pending,.failed,.skipped,.zero,.total] | @csv' "$WORK/out")" \
  '"2028-02-29",1000,"settlement",3,2,0,0,0,4,1,1012'
# A 1000 -> 1001000 (+1000), B 12345 (+12), S 99 (0: rounds down);
# C (0), N (negative), X (no limit), settlement: nothing.
is "interest: balances" "$(balance A) $(balance B) $(balance C) $(balance N) $(balance S) $(balance X) $(balance settlement)" \
  "1001000 12357 0 -50 99 500 -1012"
is "interest: credit ids" "$(d find transfers '{}' --sort '{"_id":1}' | jq -r '._id' | tr '\n' ' ')" \
  "interest:2028-02-29:A interest:2028-02-29:B "
expect 0 "interest: the same day again" -- d interest run "${R[@]}" --day 2028-02-29
is "interest: rerun credits nothing" "$(jq -rc '[.credited,.already,.total] | @csv' "$WORK/out")" "0,2,0"
is "interest: rerun left the balances" "$(balance A) $(balance B) $(balance settlement)" "1001000 12357 -1012"
expect 0 "interest: the next day compounds" -- d interest run "${R[@]}" --day 2028-03-01
is "interest: next day" "$(balance A) $(balance B)" "1002001 12369"
d account create LIM --balance 0 >/dev/null
expect 2 "interest: a settlement with a limit" -- d interest run "${R[@]}" --day 2028-03-02 --settlement LIM
expect 0 "interest: another settlement, created" -- d interest run --rate-ppm 0 --day 2028-03-02 --settlement bank
is "interest: rate 0 credits nothing; bank has no limit" \
  "$(jq -rc '[.credited,.zero] | @csv' "$WORK/out") $(d find accounts '{"_id":"bank"}' | jq -c .min_balance)" "0,3 null"
expect 0 "interest: audit" -- d audit --settled

# Transfers recorded under the credit ids by someone else are not credits:
# a failed one from another account (its amount must not be paid as the
# next attempt's), a succeeded one the other way (not "already paid").
new_store interest_forged
d account create P --balance 0 >/dev/null &&
  d account create F --balance 1000000 >/dev/null &&
  d account create G --balance 1000000 >/dev/null &&
  d account create H --balance 1000000 >/dev/null || { echo "setup failed"; exit 1; }
d transfer P F 500000 --id interest:2026-06-30:F >/dev/null 2>&1
d transfer G P 7 --id interest:2026-06-30:G >/dev/null
expect 3 "interest: forged credit ids refused" -- d interest run --rate-ppm 100 --day 2026-06-30
is "interest: forged ids: F and G unpaid, H paid" \
  "$(balance F) $(balance G) $(balance H) $(balance settlement)" "1000000 999993 1000100 -100"
is "interest: forged ids: no attempt 2" "$(d count transfers '{"_id":{"$regex":"^interest\\."}}')" 0

# ---- interest: crashed, rerun twice ----------------------------------------------------
# 10 accounts k01..k10 of 1000*i + 7; at 12345 ppm each earns
# floor((1000*i + 7) * 12345 / 1e6).
new_store interest_crash
for i in 01 02 03 04 05 06 07 08 09 10; do
  d account create "k$i" --balance $((1000 * 10#$i + 7)) >/dev/null || { echo "setup failed"; exit 1; }
done
DAY=(--rate-ppm 12345 --day 2026-06-30 --lease-ms 300)
DOCTX_FAULT=interest.credit:crash:5 d interest run "${DAY[@]}" >/dev/null 2>&1
is "interest: crash before the 5th credit" "$?" 137
DOCTX_FAULT=transfer.mark_payee:crash:3 d interest run "${DAY[@]}" >/dev/null 2>&1
is "interest: the rerun crashes inside its 3rd credit" "$?" 137
expect 0 "interest: the second rerun" -- d interest run "${DAY[@]}"
# k07's credit was cut short before its payee was marked: the rerun waits
# out its lease, the transfer rolls back (failed, "abandoned"), and the
# next attempt, interest.2:2026-06-30:k07, credits the same amount.
is "interest: second rerun: the interrupted credit retried" \
  "$(jq -rc '[.accounts,.credited,.already,.pending,.failed] | @csv' "$WORK/out")" "10,4,6,0,0"
is "interest: the retried credit" \
  "$(d find transfers '{"to":"k07"}' --sort '{"_id":1}' | jq -r '"\(._id) \(.state)"' | tr '\n' ' ')" \
  "interest.2:2026-06-30:k07 succeeded interest:2026-06-30:k07 failed "
expect 0 "interest: recover" -- d recover --older-than-ms 0
expect 0 "interest: a third run" -- d interest run "${DAY[@]}"
is "interest: third run: all there" "$(jq -rc '[.credited,.already,.pending] | @csv' "$WORK/out")" "0,10,0"
want= sum=0
for i in $(seq 1 10); do
  b=$((1000 * i + 7)) c=$(((1000 * i + 7) * 12345 / 1000000))
  sum=$((sum + c))
  want+="$((b + c)) "
done
got=$(d find accounts '{"_id":{"$regex":"^k"}}' --sort '{"_id":1}' --project '{"_id":0,"balance":1}' |
  jq -r .balance | tr '\n' ' ')
is "interest: crashed and rerun twice = one uninterrupted run" "$got" "$want"
is "interest: settlement paid the sum once" "$(balance settlement)" "-$sum"
is "interest: one credit per account" "$(d count transfers '{"state":"succeeded"}') $(d count transfers)" "10 11"
expect 0 "interest: audit after crashes" -- d audit --settled
# The failed first attempt deleted by hand (its delete guard allows it)
# once recovery cleared k07's tombstone of it: a rerun must not record
# attempt 1 again from a balance that holds attempt 2's credit.
d recover --tombstone-ttl-ms 1 >/dev/null
d delete transfers '{"_id":"interest:2026-06-30:k07"}' >/dev/null
b07=$(balance k07)
expect 3 "interest: first attempt deleted, later one there: refused" -- d interest run "${DAY[@]}"
is "interest: not credited twice" "$(balance k07) $(d count transfers '{"to":"k07"}')" "$b07 1"

# ---- interest: a day rerun with another rate (attack F9) ------------------------------
# The first run of a day records its rate and settlement; a rerun with
# others is refused before anything is credited.
new_store interest_rate
d account create a --balance 1000000 >/dev/null &&
  d account create b --balance 1000000 >/dev/null || { echo "setup failed"; exit 1; }
DOCTX_FAULT=interest.credit:crash:2 d interest run --rate-ppm 100 --day 2026-01-01 >/dev/null 2>&1
is "interest rate: the run crashed after a's credit" "$?" 137
expect 3 "interest rate: the rerun at another rate refused" -- d interest run --rate-ppm 5000 --day 2026-01-01
grep -q "CONFLICT: interest day 2026-01-01 was run at 100 ppm .* asks 5000 ppm" "$WORK/err" && ok ||
  bad "interest rate: message: $(<"$WORK/err")"
is "interest rate: nothing credited at 5000" "$(balance a) $(balance b)" "1000100 1000000"
expect 3 "interest rate: another settlement refused" -- d interest run --rate-ppm 100 --day 2026-01-01 --settlement bank
is "interest rate: the refused run created no settlement account" "$(d count accounts '{"_id":"bank"}')" 0
expect 0 "interest rate: the same rate finishes the day" -- d interest run --rate-ppm 100 --day 2026-01-01
is "interest rate: one rate for the day" "$(balance a) $(balance b)" "1000100 1000100"
# Plain writes (no --bypass-validation) of the day record: a wrong type,
# another run's value, an earlier value -- each refused (its validator and
# its transition rule: every field immutable), the record unchanged.
d interest run --rate-ppm 200 --day 2026-01-02 >/dev/null
day1=$(d find interest_days '{"_id":"2026-01-01"}')
while IFS='|' read -r what op arg; do
  [ -n "$what" ] || continue
  case $op in
  update) expect 3 "interest day record: $what" -- d update interest_days '{"_id":"2026-01-01"}' "$arg" ;;
  delete) expect 3 "interest day record: $what" -- d delete interest_days '{"_id":"2026-01-01"}' ;;
  esac
done <<'TABLE'
rate of another type|update|{"$set":{"rate_ppm":"5000"}}
another day's rate|update|{"$set":{"rate_ppm":200}}
a higher rate|update|{"$inc":{"rate_ppm":1}}
another settlement|update|{"$set":{"settlement":"bank"}}
an earlier created|update|{"$set":{"created":0}}
a field of its own|update|{"$set":{"paid":true}}
no settlement|update|{"$unset":{"settlement":""}}
replaced by another day's|update|{"rate_ppm":200,"settlement":"settlement","created":0}
deleted|delete|
TABLE
is "interest day record: unchanged" "$(d find interest_days '{"_id":"2026-01-01"}')" "$day1"
# A record inserted by hand for a day not run yet: the run refuses it
# (another rate), credits nothing.
d insert interest_days '{"_id":"2026-01-09","rate_ppm":999999,"settlement":"settlement","created":0}' >/dev/null
expect 3 "interest rate: a day recorded by hand at another rate" -- d interest run --rate-ppm 100 --day 2026-01-09
is "interest rate: nothing credited on it" "$(d count transfers '{"_id":{"$regex":"2026-01-09"}}')" 0
expect 0 "interest rate: audit" -- d audit --settled

# ---- interest: long account ids, accounts that cannot be credited -------------------------
# An account id of 109..128 bytes is valid, but interest:DAY:ID would pass
# the 128 bytes of a transfer id: the credit id then carries the account
# id's SHA-256 (interest-sha256:DAY:HEX, docs/scenarios.md "Credit ids"),
# the same on every run; 108 bytes still fit.  A credit rolled back gets
# attempt 2 under interest-sha256.2:DAY:HEX.
new_store interest_long
A128=$(printf 'a%.0s' {1..128}) B109=$(printf 'b%.0s' {1..109}) C108=$(printf 'c%.0s' {1..108})
for a in "$A128" "$B109" "$C108" z; do
  d account create "$a" --balance 1000000 >/dev/null || { echo "setup failed"; exit 1; }
done
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
expect 0 "interest long ids: every account paid" -- d interest run --rate-ppm 100 --day 2026-07-01
is "interest long ids: counts" "$(jq -rc '[.accounts,.credited,.refused,.total] | @csv' "$WORK/out")" "4,4,0,400"
is "interest long ids: balances" "$(balance "$A128") $(balance "$B109") $(balance "$C108") $(balance z)" \
  "1000100 1000100 1000100 1000100"
is "interest long ids: the credit ids" \
  "$(d find transfers '{}' | jq -r '"\(.to) \(._id)"' | sort | tr '\n' ' ')" \
  "$A128 interest-sha256:2026-07-01:$(sha "$A128") $B109 interest-sha256:2026-07-01:$(sha "$B109") $C108 interest:2026-07-01:$C108 z interest:2026-07-01:z "
expect 0 "interest long ids: the rerun finds them" -- d interest run --rate-ppm 100 --day 2026-07-01
is "interest long ids: rerun counts" "$(jq -rc '[.credited,.already] | @csv' "$WORK/out")" "0,4"
DOCTX_FAULT=transfer.mark_payee:crash d interest run --rate-ppm 100 --day 2026-07-02 --lease-ms 300 >/dev/null 2>&1
is "interest long ids: crash inside the first credit" "$?" 137
expect 0 "interest long ids: the rerun" -- d interest run --rate-ppm 100 --day 2026-07-02
is "interest long ids: attempt 2 under the hashed id" \
  "$(d find transfers '{"to":"'"$A128"'","_id":{"$regex":"2026-07-02"}}' --sort '{"_id":1}' | jq -r '"\(._id) \(.state)"' | tr '\n' ' ')" \
  "interest-sha256.2:2026-07-02:$(sha "$A128") succeeded interest-sha256:2026-07-02:$(sha "$A128") failed "
is "interest long ids: paid once" "$(balance "$A128")" 1000200
expect 0 "interest long ids: audit" -- d audit --settled
# An account the transfers refuse (an id with a space, written by hand
# past the account commands and the rules -- a plain insert of an account
# is refused): not credited, the others are, exit 3 with the account
# listed -- never exit 2, which says nothing was recorded.
d insert accounts '{"_id":"y y","balance":1000000,"min_balance":0,"opening_balance":1000000,"ceiling":1000000,"pending":[],"voids":[]}' --bypass-validation >/dev/null
expect 3 "interest: an account the transfers refuse" -- d interest run --rate-ppm 100 --day 2026-07-03
is "interest: the refused one listed" \
  "$(jq -rc '[.credited,.refused,(.refusals | map([.account,.error]))] | tojson' "$WORK/out")" '[4,1,[["y y","INVAL"]]]'
grep -q '^doctx: CONFLICT: interest day 2026-07-03: 1 account not credited (the others are' "$WORK/err" && ok ||
  bad "interest: partial run message: $(<"$WORK/err")"
is "interest: z, after it, paid" "$(balance z)" 1000300

# ---- interest: two runs submit one credit at once (attack F3) -----------------------------
# Run 1 records the credit and stops before claiming it; run 2, which had
# looked it up before run 1 recorded it, submits the same credit (same
# parameters: the same transfer) and runs it to the end.  The credit is
# counted once between them: by run 2, whose executor finished it.
new_store interest_count
d account create k --balance 1000000 >/dev/null || { echo "setup failed"; exit 1; }
RUN=(interest run --rate-ppm 100 --day 2026-01-02)
start_bg "$WORK/r1.log" env DOCTX_FAULT=interest.credit:pause,transfer.claim:pause "$DOCTX" --store "$S" "${RUN[@]}"
r1=$BG_PID
wait_stopped "$r1" 20 || bad "interest count: run 1 did not stop at interest.credit"
start_bg "$WORK/r2.log" env DOCTX_FAULT=interest.credit:pause "$DOCTX" --store "$S" "${RUN[@]}"
r2=$BG_PID
wait_stopped "$r2" 20 || bad "interest count: run 2 did not stop at interest.credit"
kill -CONT "$r1" # it records the credit, then stops at transfer.claim
wait_stopped "$r1" 20 || bad "interest count: run 1 did not stop at transfer.claim"
kill -CONT "$r2"
bounded_wait "$r2" 30 "$WORK/r2.log" || bad "interest count: run 2 failed"
kill -CONT "$r1"
bounded_wait "$r1" 30 "$WORK/r1.log" || bad "interest count: run 1 failed"
sums=$(grep -h '^{' "$WORK/r1.log" "$WORK/r2.log" | jq -s -c '[(map(.credited) | add), (map(.total) | add), (map(.already) | add)]')
is "interest count: credited once, total = what was paid" "$sums $(balance settlement)" "[1,100,1] -100"

finish
