#!/usr/bin/env bash
# The versioned documents' CLI contract
# (docs/versions.md): put prints {"item","version"}; children not named
# carry over and --remove-child drops one; get prints the whole tree of
# the committed version or of --version N; history one line per committed
# version kept; --expect-version N exits 3 when the item is not at N; bad
# input exits 2 and changes nothing; lost replies of the reserve and the
# commit are recognised as the writer's own; a crashed writer's version never
# becomes visible, not even after a later writer commits, and recovery
# removes it; racing puts all land on distinct versions; gc keeps the last
# N (never inside the grace) and keeps carried-over children alive; the
# collection rules refuse hand deletes of live documents.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"

new_store version
same() { # LABEL GOT WANT
  [ "$2" = "$3" ] && ok || bad "$1: got $2, want $3"
}

# ---- put, get, carry-over, history ---------------------------------------------
same "put v1" "$(d version put I '{"n":1}' --child a='{"x":1}' --child b='{"x":1}')" '{"item":"I","version":1}'
same "put v2" "$(d version put I '{"n":2}' --child a='{"x":2}')" '{"item":"I","version":2}'
same "get: b carried over" "$(d version get I)" \
  '{"item":"I","version":2,"root":{"n":2},"children":{"a":{"x":2},"b":{"x":1}}}'
same "get --version 1" "$(d version get I --version 1)" \
  '{"item":"I","version":1,"root":{"n":1},"children":{"a":{"x":1},"b":{"x":1}}}'
same "put v3 --remove-child b" "$(d version put I '{"n":3}' --remove-child b --child c='{"x":3}')" '{"item":"I","version":3}'
same "get v3" "$(d version get I | jq -c .children)" '{"a":{"x":2},"c":{"x":3}}'
same "history" "$(d version history I | jq -c '[.version, .children, (.committed > 0)]' | tr -d '\n')" \
  '[1,["a","b"],true][2,["a","b"],true][3,["a","c"],true]'

# ---- --expect-version -------------------------------------------------------------
expect 3 "--expect-version 2 at version 3" -- d version put I '{"n":9}' --expect-version 2
grep -q CONFLICT "$WORK/err" && ok || bad "expect-version: not CONFLICT: $(<"$WORK/err")"
same "put --expect-version 3" "$(d version put I '{"n":4}' --expect-version 3)" '{"item":"I","version":4}'
same "new item --expect-version 0" "$(d version put J '{"n":1}' --expect-version 0)" '{"item":"J","version":1}'

# ---- bad input: exit 2 (or 1 for a missing thing), nothing changed ------------------
before=$(d find version_roots; d count versions; d count version_children)
expect 2 "malformed ROOT" -- d version put I '{"n":' 
expect 2 "malformed child DOC" -- d version put I '{}' --child a='{x'
expect 2 "child DOC not an object" -- d version put I '{}' --child a='[1]'
expect 2 "ROOT not an object" -- d version put I '5'
expect 2 "bad KEY" -- d version put I '{}' --child a.b='{}'
expect 2 "empty KEY" -- d version put I '{}' --child ='{}'
expect 2 "--child without =" -- d version put I '{}' --child a
expect 2 "duplicate child key" -- d version put I '{}' --child a='{}' --child a='{"y":1}'
expect 2 "key set and removed" -- d version put I '{}' --child a='{}' --remove-child a
expect 2 "missing ITEM" -- d version put
expect 2 "missing ROOT" -- d version put I
expect 2 "bad item id" -- d version put 'I/x' '{}'
expect 2 "negative --expect-version" -- d version put I '{}' --expect-version -1
expect 2 "unknown option" -- d version put I '{}' --force
expect 2 "--version on put" -- d version put I '{}' --version 1
expect 2 "--keep 0" -- d version gc --keep 0
expect 2 "get --version 0" -- d version get I --version 0
DEEP=$(printf '{"a":%.0s' {1..100})1$(printf '}%.0s' {1..100})
expect 2 "ROOT nested too deep" -- d version put I "$DEEP"
expect 2 "child DOC nested too deep" -- d version put I '{}' --child a="$DEEP"
expect 1 "remove a child that is not there" -- d version put I '{}' --remove-child zz
expect 1 "remove a child of an item that does not exist" -- d version put nope '{}' --remove-child a
expect 3 "a version expected of an item that does not exist" -- d version put nope '{}' --expect-version 1
expect 1 "get of a missing item" -- d version get nope
expect 1 "get of a version never committed" -- d version get I --version 99
expect 1 "history of a missing item" -- d version history nope
same "bad input changed nothing" "$(d find version_roots; d count versions; d count version_children)" "$before"

# ---- a crashed writer: never visible, cleaned by recovery -----------------------------
expect 137 "crash before the commit" -- env DOCTX_FAULT=version.commit:crash "$DOCTX" --store "$S" version put I '{"n":5}' --child a='{"x":5}'
same "a later writer takes a fresh number" "$(d version put I '{"n":6}')" '{"item":"I","version":6}'
same "get: the later version, without the crashed writer's child" "$(d version get I | jq -c '[.version, .children.a]')" '[6,{"x":2}]'
expect 1 "the crashed version is not readable" -- d version get I --version 5
same "history does not list it" "$(d version history I | jq -c .version | tr '\n' ' ')" "1 2 3 4 6 "
expect 0 "audit (a reservation in flight is no finding)" -- d audit
expect 5 "audit --settled reports the reservation" -- d audit --settled
expect 0 "recover abandons it" -- d recover --older-than-ms 0
same "its record and child are gone" "$(d count versions '{"version":5}'):$(d count version_children '{"version":5}')" "0:0"
expect 0 "audit --settled clean" -- d audit --settled

# ---- lost replies: the reserve and the commit applied, their replies lost ---------------
same "reserve and commit replies lost" "$(DOCTX_FAULT=version.reserve:lost,version.commit:lost d version put I '{"n":7}')" '{"item":"I","version":7}'
same "... and the tree is that version's" "$(d version get I | jq -c '[.version, .root.n]')" '[7,7]'

# ---- racing writers --------------------------------------------------------------------
pids=()
for k in 1 2 3 4; do
  start_bg "$WORK/race.$k" "$DOCTX" --store "$S" version put R "{\"w\":$k}" --child "k$k={\"w\":$k}"
  pids+=("$BG_PID")
done
for k in 1 2 3 4; do bounded_wait "${pids[$((k - 1))]}" 60 "$WORK/race.$k" || bad "race writer $k: exit $?"; done
same "racing puts: four distinct versions" "$(cat "$WORK"/race.* | jq -c .version | sort -u | wc -l)" 4
same "racing puts: every child carried into the last" "$(d version get R | jq -c '.children | keys')" '["k1","k2","k3","k4"]'
expect 0 "racing puts: audit clean" -- d audit --settled

# ---- retention ----------------------------------------------------------------------------
same "gc inside the grace removes nothing" "$(d version gc --keep 1 | jq -c .removed)" 0
same "gc --keep 2 --grace-ms 0" "$(d version gc --keep 2 --grace-ms 0 | jq -c '[.removed]')" '[6]'
same "history after gc" "$(d version history I | jq -c .version | tr '\n' ' ')" "6 7 "
expect 1 "a removed version is not readable" -- d version get I --version 4
same "a carried-over child outlives the version that wrote it" "$(d version get I | jq -c .children)" '{"a":{"x":2},"c":{"x":3}}'
expect 0 "audit --settled after gc" -- d audit --settled

# ---- collection rules -------------------------------------------------------------------
expect 3 "delete of a live child refused" -- d delete version_children '{"_id":"I/2/a"}'
expect 3 "delete of a root refused" -- d delete version_roots '{"_id":"I"}'
expect 3 "a record's root set to a string refused" -- d update versions '{"_id":"I/7"}' '{"$set":{"root":"x"}}'
# A counter moved back by hand is refused by the root's transition rule
# (V8); forced past it (the validator cannot compare next with version),
# a put must not take version 7 again and report success for a root it
# never stored; nor overflow past INT64_MAX.
d version put K '{"n":1}' >/dev/null && d version put K '{"n":2}' >/dev/null || bad "K: setup"
expect 3 "a root's next moved back: refused" -- d update version_roots '{"_id":"K"}' '{"$set":{"next":1}}'
d update version_roots '{"_id":"K"}' '{"$set":{"next":1}}' --bypass-validation >/dev/null || bad "K: setup 1"
expect 4 "put on a root whose next is below its version" -- d version put K '{"n":3}'
same "K: nothing stored" "$(d version get K | jq -c .root) $(d count versions '{"item":"K"}')" '{"n":2} 2'
d update version_roots '{"_id":"K"}' '{"$set":{"next":9223372036854775807}}' --bypass-validation >/dev/null || bad "K: setup 2"
expect 4 "put on a root whose next is INT64_MAX" -- d version put K '{"n":3}'
# ... and the audit names the root every put, gc and recovery refuse.
expect 5 "audit: a root whose next is INT64_MAX" -- d audit --json
jq -e '[.findings[] | select(.kind == "root_next" and (.detail | test("item .K.")))] | length == 1' "$WORK/out" >/dev/null &&
  ok || bad "no root_next finding for K: $(jq -c '[.findings[] | [.kind, .detail]]' "$WORK/out")"
# A plain write may not take next where no number follows it (the
# validator bounds it so next + 1 is a number a put can use): exit 3,
# nothing changed, the item writable; one below the bound is numbers
# skipped, and the put there says no number is left (exit 3).
d version put N '{"r":1}' >/dev/null || bad "N: setup"
expect 3 "a root's next raised to INT64_MAX: refused" -- d update version_roots '{"_id":"N"}' '{"$set":{"next":9223372036854775807}}'
grep -q "VALIDATION" "$WORK/err" && ok || bad "N: message: $(<"$WORK/err")"
same "N: next unchanged" "$(d find version_roots '{"_id":"N"}' | jq -c .next)" 1
same "N: the next put" "$(d version put N '{"r":2}')" '{"item":"N","version":2}'
expect 0 "a root's next raised to INT64_MAX - 1: numbers skipped" -- d update version_roots '{"_id":"N"}' '{"$set":{"next":9223372036854775806}}'
expect 3 "N: no number left for a put" -- d version put N '{"r":3}'
grep -q "OVERFLOW" "$WORK/err" && ok || bad "N: overflow message: $(<"$WORK/err")"
expect 5 "audit: a root whose next is INT64_MAX - 1" -- d audit --json
jq -e '[.findings[] | select(.kind == "root_next" and (.detail | test("item .N.")))] | length == 1' "$WORK/out" >/dev/null &&
  ok || bad "no root_next finding for N: $(jq -c '[.findings[] | [.kind, .detail]]' "$WORK/out")"
same "N: nothing stored" "$(d version get N | jq -c .root) $(d count versions '{"item":"N"}')" '{"r":2} 2'

# ---- committed history and its digests (V7; attack N6a) -----------------------------------
# (tests/crash/tamper.sh rewrites a record's root, a child's doc and a
# children map: history_changed, and a read refuses them.)  Here: a store
# written before digests is not judged, but counted, and the next put
# starts its digests.
new_store version_digest
# Reals, -0.0, unicode, escapes, int64 bounds, key order: the digest of a
# document read back from the store is the one written.
F='{"b":1.5,"a":[1,2.0,-0.0,0.1,1e300],"c":{"z":"\u00e9\"\\","y":null},"m":-9223372036854775808,"M":9223372036854775807}'
same "odd values put" "$(d version put F "$F" --child c="$F")" '{"item":"F","version":1}'
same "... read back (no history_changed)" "$(d version get F | jq -c '.root == .children.c')" true
expect 0 "... audit clean" -- d audit
d version put H '{"n":1}' --child a='{"x":1}' >/dev/null || bad "H: setup"
d update versions '{"_id":"H/1"}' '{"$unset":{"sum":""}}' --bypass-validation >/dev/null &&
  d update version_children '{"_id":"H/1/a"}' '{"$unset":{"sum":""}}' --bypass-validation >/dev/null &&
  d update version_roots '{"_id":"H"}' '{"$unset":{"sum_from":""}}' --bypass-validation >/dev/null ||
  bad "H: back to no digests"
expect 0 "before digests: not judged" -- d audit --json
same "... but counted" "$(jq -c .patterns.version.undigested "$WORK/out")" 2
same "... and readable" "$(d version get H | jq -c .root)" '{"n":1}'
same "the next put" "$(d version put H '{"n":2}' --child b='{"x":2}')" '{"item":"H","version":2}'
same "... starts the digests at its version" "$(d find version_roots '{"_id":"H"}' | jq -c .sum_from)" 2
expect 0 "... audit clean" -- d audit --json
same "... the older documents still counted" "$(jq -c .patterns.version.undigested "$WORK/out")" 2
expect 3 "version 2's root rewritten: refused (V8)" -- d update versions '{"_id":"H/2"}' '{"$set":{"root":{"n":9}}}'
expect 0 "version 2's root rewritten past the rules" -- d update versions '{"_id":"H/2"}' '{"$set":{"root":{"n":9}}}' --bypass-validation
expect 5 "... the audit reports it" -- d audit
grep -q "history_changed" "$WORK/out" && ok || bad "H/2 rewritten: $(grep FINDING "$WORK/out" | head -2)"
expect 4 "... a read refuses it" -- d version get H
grep -q "rewritten after it was committed" "$WORK/err" && ok || bad "H/2 read: $(<"$WORK/err")"

# ---- plain writes cannot remove a committed child (V8; docs/versions.md,
# "What a plain write can do") --------------------------------------------------------
# Only the protocol's sweep marks a document dead (after the root said it
# is unreachable); the rules keep "dead" as it is, and the delete guard
# demands it.
new_store version_guard
d version put G '{"n":1}' --child a='{"x":1}' --child b='{"x":1}' >/dev/null &&
  d version put G '{"n":2}' --child b='{"x":2}' >/dev/null || bad "G: setup"
expect 3 "a committed child marked dead: refused" -- d update version_children '{"_id":"G/1/a"}' '{"$set":{"dead":true}}'
grep -q "dead may not change" "$WORK/err" && ok || bad "G: refusal: $(<"$WORK/err")"
expect 3 "... then deleted: refused" -- d delete version_children '{"_id":"G/1/a"}'
expect 3 "a committed record marked dead: refused" -- d update versions '{"_id":"G/2"}' '{"$set":{"dead":true}}'
same "get: whole" "$(d version get G | jq -c .children)" '{"a":{"x":1},"b":{"x":2}}'
same "gc still removes what is unreachable" "$(d version gc --keep 1 --grace-ms 0 | jq -c '[.removed, .deleted]')" '[1,2]'
same "... and keeps the carried-over child" "$(d version get G | jq -c .children)" '{"a":{"x":1},"b":{"x":2}}'
# A child inserted by hand, dead, under the id the next version will
# write: the writer must not take it for its own lost insert (and commit
# a child a plain delete could then remove).
expect 0 "a dead child inserted by hand for version 3" -- d insert version_children '{"_id":"G/3/a","item":"G","version":3,"key":"a","doc":{"x":3},"dead":true}'
expect 4 "the put of version 3 does not commit it" -- d version put G '{"n":3}' --child a='{"x":3}'
grep -q "taken by a document it did not write" "$WORK/err" && ok || bad "G/3: message: $(<"$WORK/err")"
same "... G is still at version 2, the forged child gone" "$(d version get G | jq -c .version) $(d count version_children '{"version":3}')" "2 0"
same "the next put commits" "$(d version put G '{"n":4}' --child a='{"x":4}')" '{"item":"G","version":4}'
expect 0 "audit --settled clean" -- d audit --settled
# Past the rules, the audit reports a committed child marked dead or gone.
d update version_children '{"_id":"G/2/b"}' '{"$set":{"dead":true}}' --bypass-validation >/dev/null || bad "G: bypass"
expect 5 "a committed child marked dead by bypass: reported" -- d audit
grep -q "dead_reachable" "$WORK/out" && ok || bad "G: not dead_reachable: $(grep FINDING "$WORK/out")"
expect 0 "... and then a plain delete takes it (its guard is met)" -- d delete version_children '{"_id":"G/2/b"}'
expect 5 "a committed child gone: reported" -- d audit
grep -q "missing_child" "$WORK/out" && ok || bad "G: not missing_child: $(grep FINDING "$WORK/out")"
expect 4 "... and a read refuses the version" -- d version get G

# ---- the plain-write attack table -----------------------------------------------------
# Every protocol field of a root, a record and a child set with plain
# commands (no --bypass-validation) to a wrong type, another live
# document's value and an earlier value.  The rows the rules refuse go
# through one bulk per collection (each line VALIDATION, nothing
# changed); the rows they admit, each on an item of its own, through
# another, then recovery, one audit and the reads: each admitted row
# leaves its item correct, or the audit reports it.
new_store version_attack
d version put V '{"n":1}' --child a='{"x":1}' >/dev/null &&
  d version put V '{"n":2}' --child b='{"x":2}' >/dev/null || bad "attack: V"
expect 137 "attack: W's writer crashes before its commit" -- env DOCTX_FAULT=version.commit:crash "$DOCTX" --store "$S" version put W '{"n":1}' --child c='{"x":1}'
for x in X1 X2 X5 X6 X7 X8 X9 X11; do d version put $x '{"n":1}' --child a='{"x":1}' >/dev/null || bad "attack: $x"; done
for x in X3 X4; do
  d version put $x '{"n":1}' --child a='{"x":1}' >/dev/null && d version put $x '{"n":2}' --child b='{"x":2}' >/dev/null || bad "attack: $x"
done
expect 137 "attack: X5's second writer crashes" -- env DOCTX_FAULT=version.commit:crash "$DOCTX" --store "$S" version put X5 '{"n":2}' --child a='{"x":2}'
rows() { # COLL: the refused rows of COLL from stdin -> bulk lines
  while read -r id f v; do
    [ -z "$id" ] && continue
    case "$f" in
    DELETE) echo "{\"deleteOne\":{\"filter\":{\"_id\":\"$id\"}}}" ;;
    REPLACE) echo "{\"updateOne\":{\"filter\":{\"_id\":\"$id\"},\"update\":$v}}" ;;
    *) if [ "$v" = UNSET ]; then u="{\"\$unset\":{\"$f\":\"\"}}"; else u="{\"\$set\":{\"$f\":$v}}"; fi
       echo "{\"updateOne\":{\"filter\":{\"_id\":\"$id\"},\"update\":$u}}" ;;
    esac
  done
}
refused() { # COLL FILE
  local before n
  before=$(d find "$1")
  n=$(wc -l <"$2")
  d bulk "$1" --file "$2" >"$WORK/refused.out" 2>"$WORK/err"
  jq -r '.error // "applied"' "$WORK/refused.out" >"$WORK/refused.err"
  paste -d '\t' "$WORK/refused.err" "$2" | while IFS=$'\t' read -r err row; do
    case "$err" in
    VALIDATION | IMMUTABLE) ok ;;
    *) bad "attack: $1: admitted ($err): $row" ;;
    esac
  done
  [ "$(wc -l <"$WORK/refused.out")" = "$n" ] && [ "$(d find "$1")" = "$before" ] && ok ||
    bad "attack: $1: the refused rows changed something"
}
rows >"$WORK/roots.jsonl" <<'ROWS'
V version "2"
V version 1
V version 0
V version UNSET
V next "x"
V next 1
V next -1
V res []
V res UNSET
V log [5]
V log UNSET
V trash [0]
V updated "x"
V sum_from 0
V sum_from "x"
V sum_from UNSET
V _id "V2"
V DELETE
W next 0
W DELETE
W REPLACE {"version":0,"next":0,"res":{},"log":[],"trash":[],"updated":0}
ROWS
refused version_roots "$WORK/roots.jsonl"
rows >"$WORK/records.jsonl" <<'ROWS'
V/2 item "W"
V/2 item 5
V/2 version 1
V/2 version "2"
V/2 base 0
V/2 root {"n":9}
V/2 root 5
V/2 children {"a":1}
V/2 children {"a":2,"b":2}
V/2 owner "mallory"
V/2 created 1
V/2 sum "0000000000000000"
V/2 sum UNSET
V/2 dead true
V/2 DELETE
V/2 REPLACE {"item":"V","version":2,"base":1,"root":{"n":9},"children":{"a":1,"b":2},"created":1}
V/1 dead true
V/1 DELETE
W/1 dead true
W/1 DELETE
ROWS
refused versions "$WORK/records.jsonl"
rows >"$WORK/children.jsonl" <<'ROWS'
V/1/a item "W"
V/1/a version 2
V/1/a version "1"
V/1/a key "b"
V/1/a doc {"x":9}
V/1/a doc 5
V/1/a sum "0000000000000000"
V/1/a sum UNSET
V/1/a dead true
V/1/a dead false
V/1/a DELETE
V/1/a REPLACE {"item":"V","version":1,"key":"a","doc":{"x":9}}
V/2/b dead true
V/2/b DELETE
W/1/c dead true
W/1/c DELETE
ROWS
refused version_children "$WORK/children.jsonl"

# Admitted rows: on roots, what the rules cannot judge (the validator
# cannot compare fields, the transition rule only keeps the counters from
# going back); a record inserted by hand for X11's next version.
cat >"$WORK/admitted.jsonl" <<'ROWS'
{"updateOne":{"filter":{"_id":"X1"},"update":{"$set":{"version":5,"next":5}}}}
{"updateOne":{"filter":{"_id":"X2"},"update":{"$set":{"next":100}}}}
{"updateOne":{"filter":{"_id":"X3"},"update":{"$pop":{"log":1}}}}
{"updateOne":{"filter":{"_id":"X4"},"update":{"$pop":{"log":-1}}}}
{"updateOne":{"filter":{"_id":"X5"},"update":{"$unset":{"res.2":""}}}}
{"updateOne":{"filter":{"_id":"X6"},"update":{"$set":{"res.99":{"owner":"mallory","token":"t","until":0,"at":0}}}}}
{"updateOne":{"filter":{"_id":"X7"},"update":{"$addToSet":{"trash":1}}}}
{"updateOne":{"filter":{"_id":"X8"},"update":{"$set":{"version":3,"next":3},"$push":{"log":{"v":3,"at":0}}}}}
{"updateOne":{"filter":{"_id":"X9"},"update":{"$set":{"sum_from":5}}}}
{"insertOne":{"document":{"_id":"X12","version":3,"next":3,"res":{},"log":[{"v":3,"at":0}],"trash":[],"updated":0}}}
ROWS
expect 0 "attack: the admitted root rows" -- d bulk version_roots --file "$WORK/admitted.jsonl"
expect 0 "attack: a record inserted by hand for X11's version 2" -- d insert versions '{"_id":"X11/2","item":"X11","version":2,"base":1,"root":{"n":666},"children":{},"created":1}'
expect 4 "attack: X11's put does not commit it" -- d version put X11 '{"n":2}'
expect 4 "attack: recover (the damaged roots are errors, nothing swept)" -- d recover --older-than-ms 0
expect 5 "attack: the audit reports what is wrong" -- d audit --json
vfinding() { # KIND ITEM
  jq -e --arg k "$1" --arg o "$2" '[.findings[] | select(.kind == $k and (.detail | test("[ \u0027]" + $o + "[/\u0027 ]")))] | length > 0' \
    "$WORK/out" >/dev/null && ok || bad "attack: no $1 finding for $2: $(jq -c '[.findings[] | [.kind, .detail]]' "$WORK/out")"
}
vfinding root_version X1
vfinding root_version X3
vfinding missing_record X8
vfinding missing_record X12
[ "$(jq -c '[.findings[] | .detail | capture("(?<i>X[0-9]+)").i] | unique' "$WORK/out")" = '["X1","X12","X3","X8"]' ] && ok ||
  bad "attack: findings beyond X1 X3 X8 X12: $(jq -c '[.findings[] | [.kind, .detail]]' "$WORK/out")"
# The items the admitted rows left correct read as they should, and take
# the next put; the damaged ones refuse it, and lost nothing.
same "X2: next 100 taken" "$(d version put X2 '{"n":2}')" '{"item":"X2","version":101}'
same "X4: version 1 trimmed as gc would, 2 whole" "$(d version get X4 | jq -c '[.version, .children]') $(d count versions '{"item":"X4"}')" '[2,{"a":{"x":1},"b":{"x":2}}] 1'
same "X5: the unreserved writer's version removed" "$(d version get X5 | jq -c .root) $(d count version_children '{"item":"X5"}')" '{"n":1} 1'
for x in X6 X7 X9; do
  same "$x: whole" "$(d version get $x | jq -c '[.version, .children]')" '[1,{"a":{"x":1}}]'
done
same "X11: the forged record gone, the next put commits" "$(d version put X11 '{"n":3}' | jq -c .version) $(d version get X11 | jq -c .root)" '3 {"n":3}'
expect 4 "X1: a put on its damaged root refused" -- d version put X1 '{"n":9}'
same "X3: both versions' documents kept" "$(d count versions '{"item":"X3"}'):$(d count version_children '{"item":"X3"}')" "2:2"
finish
