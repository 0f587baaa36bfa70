#!/usr/bin/env bash
# The versioned documents' CLI contract (issue 11, second half;
# docs/versions.md): put prints {"item","version"}; children not named
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
grep -q CONFLICT "$WORK/err" && ok || bad "expect-version: not CONFLICT: $(cat "$WORK/err")"
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
# A counter moved back by hand (the validator cannot compare next with
# version): a put must not take version 7 again and report success for a
# root it never stored; nor overflow past INT64_MAX.
d version put K '{"n":1}' >/dev/null && d version put K '{"n":2}' >/dev/null &&
  d update version_roots '{"_id":"K"}' '{"$set":{"next":1}}' >/dev/null || bad "K: setup"
expect 4 "put on a root whose next is below its version" -- d version put K '{"n":3}'
same "K: nothing stored" "$(d version get K | jq -c .root) $(d count versions '{"item":"K"}')" '{"n":2} 2'
d update version_roots '{"_id":"K"}' '{"$set":{"next":9223372036854775807}}' >/dev/null || bad "K: setup 2"
expect 4 "put on a root whose next is INT64_MAX" -- d version put K '{"n":3}'

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
d update versions '{"_id":"H/1"}' '{"$unset":{"sum":""}}' >/dev/null &&
  d update version_children '{"_id":"H/1/a"}' '{"$unset":{"sum":""}}' >/dev/null &&
  d update version_roots '{"_id":"H"}' '{"$unset":{"sum_from":""}}' >/dev/null || bad "H: back to no digests"
expect 0 "before digests: not judged" -- d audit --json
same "... but counted" "$(jq -c .patterns.version.undigested "$WORK/out")" 2
same "... and readable" "$(d version get H | jq -c .root)" '{"n":1}'
same "the next put" "$(d version put H '{"n":2}' --child b='{"x":2}')" '{"item":"H","version":2}'
same "... starts the digests at its version" "$(d find version_roots '{"_id":"H"}' | jq -c .sum_from)" 2
expect 0 "... audit clean" -- d audit --json
same "... the older documents still counted" "$(jq -c .patterns.version.undigested "$WORK/out")" 2
expect 0 "version 2's root rewritten" -- d update versions '{"_id":"H/2"}' '{"$set":{"root":{"n":9}}}'
expect 5 "... the audit reports it" -- d audit
grep -q "history_changed" "$WORK/out" && ok || bad "H/2 rewritten: $(grep FINDING "$WORK/out" | head -2)"
expect 4 "... a read refuses it" -- d version get H
grep -q "rewritten after it was committed" "$WORK/err" && ok || bad "H/2 read: $(cat "$WORK/err")"
finish
