#!/usr/bin/env bash
# The sync flag's CLI contract (docs/sync.md): rule
# define/show (idempotent, CONFLICT on another definition, bad rules exit
# 2 recording nothing), update (JSON result, its flag cleared; bad UPDATE
# exit 2 and unknown rule or master exit 1, changing nothing), racing
# updates ending at the right values, a crash mid-propagation found by the
# audit and repaired (by sync repair, doctx recover and doctx worker), a
# paused late propagation that must not overwrite a newer value nor clear
# a newer change's flag, a lost master reply, the collection rules on
# sync_rules, and the audit's tamper rows (a hand-edited dependent must
# never pass as clean).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"

# A change of a rule that does not exist is refused before any write: it
# creates no collection, index or rule (a fresh store stays empty).
new_store sync_none
expect 1 "update of no such rule on an empty store" -- d sync update Q u1 '{"$set":{"name":"x"}}'
[ -z "$(d collections 2>/dev/null)" ] && ok || bad "a missing rule's update created: $(d collections)"

new_store sync
RULE=(--master users --dependents comments --link user --copy name:author,n:stats.posts)
d insert users '{"_id":"u1","name":"ann","n":0}' '{"_id":"u2","name":"bob"}' >/dev/null &&
  d insert comments '{"_id":"c1","user":"u1","author":"ann"}' \
    '{"_id":"c2","user":"u1","author":"ann"}' '{"_id":"c3","user":"u2","author":"bob"}' \
    >/dev/null || { echo "setup failed"; exit 1; }

# Checks, in one jq, that every comment of MASTER carries its name and n
# at its version and that no flag is left; prints what is wrong.  Users
# and comments arrive in one slurp (a comment is what has "user").
synced() { # MASTER
  jq -rs --arg m "$1" '
    map(select(has("user") | not)) as $users |
    ($users[] | select(._id == $m)) as $u | ($u._syncm.R.v // 0) as $v |
    [ ($users[] | select((._syncing // {}) | has("R")) | "flag left on \(._id)"),
      (.[] | select(has("user") and .user == $m)
        | select(.author != $u.name or .stats.posts != $u.n or ._sync.R != $v)
        | "\(._id): \(tojson) (master \($u | tojson))")
    ] | join("; ")' <(d find users) <(d find comments)
}
check_synced() { # LABEL MASTER
  local why
  why=$(synced "$2")
  [ -z "$why" ] && ok || bad "$1: $why"
}

# ---- rules ---------------------------------------------------------------------
expect 0 "rule" -- d sync rule R "${RULE[@]}"
jq -e '._id == "R" and .link == "user" and .copy == [{"src":"name","dst":"author"},{"src":"n","dst":"stats.posts"}]' <"$WORK/out" >/dev/null &&
  ok || bad "rule output: $(out)"
expect 0 "the same rule again" -- d sync rule R "${RULE[@]}"
expect 3 "another definition under the same name" -- d sync rule R --master users --dependents comments --link user --copy name:author
grep -q "^doctx: CONFLICT: sync rule 'R' exists with another definition" "$WORK/err" && ok || bad "conflict message: $(<"$WORK/err")"
expect 0 "show" -- d sync show R
expect 1 "show of no such rule" -- d sync show nope
[ "$(d indexes comments | grep -c '"user":1')" = 1 ] && ok || bad "no link index: $(d indexes comments)"
[ "$(d indexes users | grep -c '"_syncing.R.at":1},"unique":false,"sparse":true')" = 1 ] && ok || bad "no sparse flag index: $(d indexes users)"

# Bad rules: exit 2, the message names the problem, nothing recorded.
while IFS='|' read -r what args; do
  [ -n "$what" ] || continue
  # shellcheck disable=SC2086
  expect 2 "rule: $what" -- d sync rule X $args
  grep -q "^doctx: \(INVAL\|USAGE\): " "$WORK/err" && ok || bad "rule: $what: message: $(<"$WORK/err")"
done <<'TABLE'
duplicate DST|--master users --dependents comments --link user --copy a:b,c:b
DST inside another|--master users --dependents comments --link user --copy a:b,c:b.x
DST is the link|--master users --dependents comments --link user --copy a:user
DST inside the link|--master users --dependents comments --link user --copy a:user.x
DST is _id|--master users --dependents comments --link user --copy a:_id
no colon|--master users --dependents comments --link user --copy a
empty SRC|--master users --dependents comments --link user --copy :b
two colons|--master users --dependents comments --link user --copy a:b:c
empty pair|--master users --dependents comments --link user --copy a:b,,c:d
dollar path|--master users --dependents comments --link user --copy a:$x
empty segment|--master users --dependents comments --link user --copy a:b..c
doctx's own field|--master users --dependents comments --link user --copy _sync.R:b
DST in a fence record|--master users --dependents comments --link user --copy a:_fence
DST in job effect markers|--master users --dependents comments --link user --copy a:dtx_fx
DST in batch markers|--master users --dependents comments --link user --copy a:_batches.b1
link is _id|--master users --dependents comments --link _id --copy a:b
DST is its own SRC, one collection|--master users --dependents users --link boss --copy nick:nick
bad collection|--master us/ers --dependents comments --link user --copy a:b
a protocol's collection|--master users --dependents jobs --link user --copy a:b
unknown option|--master users --dependents comments --link user --copy a:b --bogus
missing --copy|--master users --dependents comments --link user
TABLE
expect 2 "rule: bad rule name" -- d sync rule 'x.y' "${RULE[@]}"
[ "$(d count sync_rules)" = 1 ] && ok || bad "bad rules were recorded: $(d find sync_rules)"

# ---- update ----------------------------------------------------------------------
before=$(d find users; d find comments)
for u in '{"name":"x"}' '{"$set":{"_syncm.R.v":9}}' '{"$set":{"_syncing":{}}}' \
  '{"$unset":{"_sync":""}}' '{"$rename":{"name":"_syncm"}}' '{"$bogus":{"a":1}}' \
  '{"$set":' '{}' '{"$inc":{"name":"x"}}'; do
  expect 2 "update $u" -- d sync update R u1 "$u"
done
expect 1 "update of no such rule" -- d sync update Q u1 '{"$set":{"name":"x"}}'
expect 1 "update of no such master" -- d sync update R u9 '{"$set":{"name":"x"}}'
grep -q "no master 'u9' in users" "$WORK/err" && ok || bad "no master message: $(<"$WORK/err")"
expect 2 "update: bad --lease-ms" -- d sync update R u1 '{"$set":{"name":"x"}}' --lease-ms -1
[ "$(d find users; d find comments)" = "$before" ] && ok || bad "bad updates changed something"

expect 0 "update" -- d sync update R u1 '{"$set":{"name":"anne"},"$inc":{"n":1}}'
jq -e '. == {"rule":"R","master":"u1","version":1,"dependents":2,"flag_cleared":true,"also":[]}' <"$WORK/out" >/dev/null &&
  ok || bad "update output: $(out)"
check_synced "after update" u1
[ "$(d find comments '{"_id":"c3"}')" = '{"_id":"c3","user":"u2","author":"bob"}' ] && ok || bad "c3 changed"
expect 0 "audit after update" -- d audit --settled

# A lost reply of the master step: the retry matches nothing, the stamp
# read back says it landed -- applied once, reported once.
expect 0 "update with a lost master reply" -- env DOCTX_FAULT=sync.master:lost "$DOCTX" --store "$S" sync update R u1 '{"$inc":{"n":1}}'
[ "$(field "$(out)" version)" = 2 ] && [ "$(field "$(d find users '{"_id":"u1"}')" n)" = 2 ] &&
  ok || bad "lost reply: $(out) $(d find users '{"_id":"u1"}')"
check_synced "after a lost reply" u1

# ---- racing updates ----------------------------------------------------------------
RACE_LOG=$WORK/race
mkdir -p "$RACE_LOG"
pids=()
for i in 1 2 3 4 5 6; do
  case $i in 1 | 2) upd="{\"\$set\":{\"name\":\"r$i\"},\"\$inc\":{\"n\":1}}" ;; *) upd='{"$inc":{"n":1}}' ;; esac
  start_bg "$RACE_LOG/$i" "$DOCTX" --store "$S" sync update R u1 "$upd"
  pids+=("$BG_PID")
done
for pid in "${pids[@]}"; do bounded_wait "$pid" 60 "$RACE_LOG/x" || bad "a racing update failed"; done
u1=$(d find users '{"_id":"u1"}')
jq -e '.n == 8 and ._syncm.R.v == 8 and (.name == "r1" or .name == "r2")' <<<"$u1" >/dev/null &&
  ok || bad "after the race: $u1"
check_synced "after the race" u1

# ---- a crash mid-propagation --------------------------------------------------------
expect 137 "crash after the first dependent" -- env DOCTX_FAULT=sync.propagate:crash:2 "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"carl"}}' --lease-ms 60000
[ "$(d count comments '{"author":"carl"}')" = 1 ] && [ "$(d count users '{"_syncing.R":{"$exists":true}}')" = 1 ] &&
  ok || bad "mid-propagation state: $(d find comments) $(d find users)"
expect 0 "audit: a live flag is unsettled, not a finding" -- d audit
expect 5 "audit --settled: the flag is a finding" -- d audit --settled
grep -q "stale_sync_flag\|still has its flag" "$WORK/out" "$WORK/err" && ok || bad "settled audit: $(out)"
expect 0 "repair leaves a live flag" -- d sync repair
[ "$(field "$(out)" ran)" = "{}" ] && ok || bad "repair of a live flag: $(out)"
# The flag's lease lapses (set back by hand rather than waited for).
d update users '{"_id":"u1"}' '{"$set":{"_syncing.R.until":0}}' >/dev/null
expect 5 "audit: a flag past its lease" -- d audit
grep -q "past its lease" "$WORK/out" && ok || bad "stale flag finding: $(out)"
expect 0 "repair" -- d sync repair
jq -e '.ok and .ran == {"dependents_updated":1,"repaired":1}' <"$WORK/out" >/dev/null &&
  ok || bad "repair summary: $(out)"
check_synced "after repair" u1
expect 0 "audit after repair" -- d audit --settled

# doctx recover and doctx worker repair through the pattern table too.
for how in recover worker; do
  expect 137 "$how: crash" -- env DOCTX_FAULT=sync.propagate:crash "$DOCTX" --store "$S" sync update R u1 "{\"\$set\":{\"name\":\"$how\"}}"
  case $how in
  recover) expect 0 "recover" -- d recover --older-than-ms 0 ;;
  worker) expect 0 "worker" -- d update users '{"_id":"u1"}' '{"$set":{"_syncing.R.until":0}}' &&
            expect 0 "worker --once" -- d worker --once ;;
  esac
  check_synced "after $how" u1
done

# ---- late propagations (SIGSTOP) ------------------------------------------------------
# P1 pauses before its first dependent write; P2 renames and finishes;
# P1 resumes: its older version must not overwrite P2's name, and it
# must not clear a flag (P2's is gone already; it finds none of its own).
start_bg "$WORK/p1.log" env DOCTX_FAULT=sync.propagate:pause "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"dan"}}'
p1=$BG_PID
if wait_stopped "$p1" 30; then
  expect 0 "P2 while P1 is stopped" -- d sync update R u1 '{"$set":{"name":"eve"}}'
  kill -CONT "$p1"
  bounded_wait "$p1" 60 "$WORK/p1.log" && ok || bad "P1 exited $?: $(tail -2 "$WORK/p1.log")"
  grep -q '"dependents":0,"flag_cleared":false' "$WORK/p1.log" && ok || bad "P1 wrote: $(<"$WORK/p1.log")"
  [ "$(d count comments '{"author":"eve"}')" = 2 ] && ok || bad "a late propagation overwrote eve: $(d find comments)"
  check_synced "after the late propagation" u1
else
  bad "P1 never paused: $(<"$WORK/p1.log")"
fi

# P1 and P2 both stop before propagating (P2's flag replaced P1's).  P1
# resumes and finishes: it must leave P2's flag alone.  P2 then dies:
# its flag is what leads repair to the newer name.
start_bg "$WORK/q1.log" env DOCTX_FAULT=sync.propagate:pause "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"fay"}}' --lease-ms 300
q1=$BG_PID
wait_stopped "$q1" 30 || bad "Q1 never paused"
start_bg "$WORK/q2.log" env DOCTX_FAULT=sync.propagate:pause "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"gus"}}' --lease-ms 300
q2=$BG_PID
wait_stopped "$q2" 30 || bad "Q2 never paused"
kill -CONT "$q1"
bounded_wait "$q1" 60 "$WORK/q1.log" || bad "Q1 exited $?: $(tail -2 "$WORK/q1.log")"
grep -q '"flag_cleared":false' "$WORK/q1.log" && ok || bad "Q1: $(<"$WORK/q1.log")"
[ "$(d count users '{"_id":"u1","_syncing.R":{"$exists":true}}')" = 1 ] && ok || bad "Q1 cleared Q2's flag: $(d find users '{"_id":"u1"}')"
kill -KILL "$q2"
bounded_wait "$q2" 10 "$WORK/q2.log"
sleep 0.35
expect 5 "audit: Q2's flag past its lease" -- d audit
expect 0 "repair after Q2 died" -- d sync repair
check_synced "after Q2 died" u1
[ "$(d count comments '{"author":"gus"}')" = 2 ] && ok || bad "repair did not bring gus: $(d find comments)"

# ---- rules sharing a master --------------------------------------------------------------
# R copies users.name into comments.author; P copies it, and users.mail,
# into posts.  A change through either rule that can change the name must
# reach the dependents of both (docs/sync.md "Rules sharing a master"):
# its master step flags both, each is propagated and cleared, and a change
# cut short leaves both flags for repair.
d insert posts '{"_id":"p1","user":"u1","by":"gus"}' '{"_id":"p2","user":"u1"}' \
  '{"_id":"p3","user":"u2","by":"bob"}' >/dev/null || bad "posts set-up"
expect 0 "rule P shares R's source" -- d sync rule P --master users --dependents posts --link user --copy name:by,mail:mail
# Every post of u1 carries u1's name and mail at u1's P version; no P flag.
posts_synced() { # LABEL
  local why
  why=$(jq -rs '(.[0][] | select(._id == "u1")) as $u |
    [ (if (($u._syncing // {}) | has("P")) then "flag P left on u1" else empty end),
      (.[1][] | select(.user == "u1")
        | select(.by != $u.name or .mail != $u.mail or ._sync.P != $u._syncm.P.v)
        | "\(._id): \(tojson) (u1: \($u | tojson))") ] | join("; ")' \
    <(d find users | jq -s .) <(d find posts | jq -s .))
  [ -z "$why" ] && ok || bad "$1: $why"
}
also() { jq -c '[.also[] | [.rule, .dependents, .flag_cleared]]' <"$WORK/out"; }
expect 0 "rename through P" -- d sync update P u1 '{"$set":{"name":"hal"}}'
[ "$(also)" = '[["R",2,true]]' ] && ok || bad "rename through P: $(out)"
check_synced "R's dependents after a rename through P" u1
posts_synced "P's dependents after a rename through P"
expect 0 "audit after a rename through P" -- d audit --settled
expect 0 "a field only P copies" -- d sync update P u1 '{"$set":{"mail":"h@x"}}'
[ "$(also)" = '[]' ] && ok || bad "mail through P flagged R: $(out)"
expect 0 "a field only R copies" -- d sync update R u1 '{"$inc":{"n":1}}'
[ "$(also)" = '[]' ] && ok || bad "n through R flagged P: $(out)"
expect 0 "rename through R" -- d sync update R u1 '{"$set":{"name":"ida"}}'
[ "$(also)" = '[["P",2,true]]' ] && ok || bad "rename through R: $(out)"
expect 0 "\$rename of the name away" -- d sync update R u1 '{"$rename":{"name":"nick"}}'
expect 0 "\$rename onto the name" -- d sync update R u1 '{"$rename":{"nick":"name"}}'
[ "$(also)" = '[["P",2,true]]' ] && ok || bad "\$rename onto the name: $(out)"
check_synced "R after the renames" u1
posts_synced "P after the renames"
# Cut short before any dependent: both flags stay, recovery finishes both.
expect 137 "rename through R, crash before its first dependent" -- env DOCTX_FAULT=sync.propagate:crash "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"jon"}}'
[ "$(d count users '{"_id":"u1","_syncing.R":{"$exists":true},"_syncing.P":{"$exists":true}}')" = 1 ] &&
  ok || bad "not both flags: $(d find users '{"_id":"u1"}')"
expect 0 "recover finishes both rules" -- d recover --older-than-ms 0
check_synced "R after recover" u1
posts_synced "P after recover"
# Cut short after R is done, before P's first dependent.
expect 137 "rename through R, crash after R's clear" -- env DOCTX_FAULT=sync.propagate:crash:3 "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"kim"}}'
expect 0 "sync repair finishes P" -- d sync repair --older-than-ms 0
check_synced "R after repair" u1
posts_synced "P after repair"
expect 0 "audit after the shared-master crashes" -- d audit --settled

# Rules that cannot both hold are refused (CONFLICT), nothing recorded.
while IFS='|' read -r what args; do
  [ -n "$what" ] || continue
  # shellcheck disable=SC2086
  expect 3 "rule clash: $what" -- d sync rule X $args
  grep -q "^doctx: CONFLICT: sync rule X: " "$WORK/err" && ok || bad "rule clash: $what: message: $(<"$WORK/err")"
done <<'TABLE'
two rules write one field|--master admins --dependents comments --link user --copy name:author
a DST holding another rule's|--master admins --dependents comments --link user --copy name:stats
writes another rule's link|--master admins --dependents comments --link owner --copy name:user
copies into another's source|--master teams --dependents users --link team --copy title:name
copies from another's copy|--master posts --dependents feed --link post --copy by:who
TABLE
[ "$(d count sync_rules)" = 2 ] && ok || bad "clashing rules were recorded: $(d find sync_rules)"

# ---- collection rules and tampering ------------------------------------------------------
expect 3 "sync_rules validator" -- d update sync_rules '{"_id":"R"}' '{"$set":{"copy":"x"}}'
grep -q VALIDATION "$WORK/err" && ok || bad "not VALIDATION: $(<"$WORK/err")"
expect 3 "a rule cannot be deleted" -- d delete sync_rules '{"_id":"R"}'
expect 0 "audit clean before tampering" -- d audit --settled
# TAMPER rows: COLL|ID|UPDATE -- each written by hand must make the audit
# exit 5; the document is restored after each.
while IFS='|' read -r coll id upd; do
  [ -n "$coll" ] || continue
  orig=$(d find "$coll" "{\"_id\":\"$id\"}")
  expect 0 "tamper $coll $upd" -- d update "$coll" "{\"_id\":\"$id\"}" "$upd" --bypass-validation
  expect 5 "audit after $coll $upd" -- d audit
  expect 0 "restore $coll $id" -- d update "$coll" "{\"_id\":\"$id\"}" "$orig" --bypass-validation
done <<'TABLE'
comments|c1|{"$set":{"author":"zed"}}
comments|c2|{"$unset":{"author":""}}
comments|c1|{"$set":{"stats.posts":"8"}}
comments|c1|{"$set":{"_sync.R":99}}
comments|c2|{"$set":{"_sync.R":"x"}}
users|u1|{"$set":{"name":"hal"}}
users|u1|{"$set":{"_syncing.R":{"stamp":"s","owner":"o","at":0,"until":0}}}
sync_rules|R|{"$set":{"copy":[]}}
sync_rules|R|{"$set":{"link":"_id"}}
TABLE
expect 0 "audit clean after the restores" -- d audit --settled

# ---- plain writes (no --bypass-validation) -----------------------------------------------
# Each protocol field, through the generic commands: a wrong type, another
# live document's value, an earlier value.  WANT 3: refused, the document
# unchanged (the validators and transition rules of docs/sync.md "What a
# plain write can do" -- the dependents' versions are not guarded, see
# there why).  WANT 5: taken, and `doctx audit` (not --settled)
# reports it.  WANT 0: taken, and harmless: audit --settled stays clean.
# Each taken write is undone (with --bypass-validation) before the next.
# U1V: u1's R version, which c1 reflects -- another live document's value,
# and ahead of u1's P version (R has seen more changes than P).
u1v=$(d find users '{"_id":"u1"}' | jq '._syncm.R.v')
while IFS='|' read -r want coll id op arg; do
  [ -n "$want" ] || continue
  f="{\"_id\":\"$id\"}"
  orig=$(d find "$coll" "$f")
  arg=${arg//U1V/$u1v}
  case $op in
  update) cmd=(d update "$coll" "$f" "$arg") ;;
  delete) cmd=(d delete "$coll" "$f") ;;
  esac
  if [ "$want" = 3 ]; then
    expect 3 "plain $op $coll $id $arg: refused" -- "${cmd[@]}"
    [ "$(d find "$coll" "$f")" = "$orig" ] && ok || bad "refused $op $coll $id $arg changed it"
    continue
  fi
  expect 0 "plain $op $coll $id $arg: taken" -- "${cmd[@]}"
  case $want in
  5) expect 5 "audit after plain $op $coll $id $arg" -- d audit ;;
  0) expect 0 "audit --settled after plain $op $coll $id $arg" -- d audit --settled ;;
  esac
  case $op in
  update) d update "$coll" "$f" "$orig" --bypass-validation >/dev/null ;;
  delete) d insert "$coll" "$orig" --bypass-validation >/dev/null ;;
  esac
  [ "$(d find "$coll" "$f")" = "$orig" ] || bad "could not restore $coll $id"
done <<'TABLE'
3|sync_rules|R|update|{"$set":{"master":5}}
3|sync_rules|R|update|{"$set":{"dependents":"posts"}}
3|sync_rules|R|update|{"$set":{"link":"by"}}
3|sync_rules|R|update|{"$set":{"copy":[{"src":"mail","dst":"author"}]}}
3|sync_rules|R|update|{"$set":{"created":0}}
3|sync_rules|R|update|{"$set":{"note":"x"}}
3|sync_rules|R|delete|
3|users|u1|update|{"$set":{"_syncm.R.v":"9"}}
3|users|u1|update|{"$set":{"_syncm.R.v":1}}
3|users|u1|update|{"$inc":{"_syncm.P.v":-1}}
3|users|u1|update|{"$unset":{"_syncm":""}}
3|users|u1|update|{"$set":{"_syncm":{}}}
0|users|u1|update|{"$set":{"_syncm.R.v":99999}}
0|users|u1|update|{"$set":{"_syncm.R.stamp":"x"}}
5|users|u2|update|{"$set":{"_syncm.R.v":0}}
5|users|u2|update|{"$set":{"_syncm.R":"x"}}
5|users|u1|update|{"$set":{"_syncing.R":{"stamp":"s","owner":"o","at":0,"until":0}}}
5|users|u1|update|{"$set":{"_syncing.R":{"stamp":"s","owner":"o","at":0,"until":9223372036854775807}}}
5|users|u1|update|{"$set":{"_syncing.R":"x"}}
5|users|u1|update|{"$set":{"name":"zed"}}
0|users|u1|delete|
5|comments|c1|update|{"$set":{"_sync.R":"x"}}
0|comments|c1|update|{"$set":{"_sync.R":1}}
0|comments|c1|update|{"$unset":{"_sync.R":""}}
5|comments|c1|update|{"$set":{"_sync.R":[99999999]}}
0|comments|c1|update|{"$unset":{"_sync":""}}
5|comments|c1|update|{"$set":{"_sync.R":99999999}}
5|comments|c1|update|{"$set":{"author":"bob"}}
5|comments|c1|update|{"$set":{"user":"u2"}}
0|comments|c1|delete|
0|posts|p1|update|{"$set":{"_sync.P":0}}
5|posts|p1|update|{"$set":{"_sync.P":U1V}}
TABLE

# A flag cleared by hand before its change propagated: refused it cannot
# be (the protocol's own clear is the same write), so the audit reports
# the dependents that disagree, and the next change heals them.
expect 137 "a change cut short" -- env DOCTX_FAULT=sync.propagate:crash "$DOCTX" --store "$S" sync update R u1 '{"$set":{"name":"lou"}}'
expect 0 "a plain clear of both flags" -- d update users '{"_id":"u1"}' '{"$unset":{"_syncing.R":"","_syncing.P":""}}'
expect 5 "audit: dependents disagree with a master without a flag" -- d audit
expect 0 "the next change heals them" -- d sync update R u1 '{"$set":{"name":"lou"}}'
check_synced "R healed" u1
posts_synced "P healed"
# A comment moved to another master: its R version counts u1's changes,
# so u2's would skip it; removed in the same plain update, u2's next
# change reaches it.
expect 0 "c2 moved to u2, its version removed" -- d update comments '{"_id":"c2"}' '{"$set":{"user":"u2"},"$unset":{"_sync.R":""}}'
expect 5 "audit: c2 carries u1's name" -- d audit
expect 0 "u2's next change" -- d sync update R u2 '{"$set":{"name":"bob"}}'
[ "$(d find comments '{"_id":"c2"}' | jq -r .author)" = bob ] && ok || bad "c2 not reached: $(d find comments '{"_id":"c2"}')"
expect 0 "audit after the move" -- d audit --settled
# The guards themselves: a plain change of rules may not take them away
# (dtx_rules_opts_t); past the rules, the audit says so, repair puts them
# back.
expect 3 "the users' transition rule replaced plainly" -- d rules users --transition null
grep -q "hold a transition rule of the sync pattern" "$WORK/err" && ok || bad "no pattern named: $(<"$WORK/err")"
expect 0 "the users' transition rule replaced past the rules" -- d rules users --transition null --bypass-validation
expect 5 "audit: a rule's guard is gone" -- d audit
grep -q "sync_guard" "$WORK/out" && ok || bad "no sync_guard finding: $(out)"
expect 0 "repair puts the guards back" -- d sync repair
jq -e '.ran.guards_installed == 2' <"$WORK/out" >/dev/null && ok || bad "repair summary: $(out)"
expect 3 "a guard back in force" -- d update users '{"_id":"u1"}' '{"$set":{"_syncm.R.v":1}}'
# A rule inserted by hand that clashes with R: the audit reports it.
expect 0 "a clashing rule inserted by hand" -- d insert sync_rules '{"_id":"Z","master":"admins","dependents":"comments","link":"user","copy":[{"src":"name","dst":"author"}]}'
expect 5 "audit: two rules write comments.author" -- d audit
grep -q "sync_rule_clash" "$WORK/out" && ok || bad "no sync_rule_clash finding: $(out)"
d delete sync_rules '{"_id":"Z"}' --bypass-validation >/dev/null
# One that is no valid rule (its dependents are a protocol's): left out
# of every change -- it must not stop them -- and reported.
expect 0 "an invalid rule inserted by hand" -- d insert sync_rules '{"_id":"W","master":"users","dependents":"jobs","link":"x","copy":[{"src":"name","dst":"y"}]}'
expect 0 "changes go on beside it" -- d sync update R u1 '{"$set":{"name":"max"}}'
check_synced "R beside an invalid rule" u1
posts_synced "P beside an invalid rule"
expect 5 "audit: the invalid rule" -- d audit
grep -q "bad_rule" "$WORK/out" && ok || bad "no bad_rule finding: $(out)"
d delete sync_rules '{"_id":"W"}' --bypass-validation >/dev/null
expect 0 "audit clean at the end" -- d audit --settled

finish
