#!/usr/bin/env bash
# The lock CLI contract (docs/locks.md): acquire/renew/release/show/list,
# exit 1 when still held or the token is no longer current, tokens
# strictly increasing across release and expiry -- and across a lock
# deleted or dropped with --bypass-validation, which the audit reports --
# bad input exit 2 changing nothing, one rule for --owner on every
# command that takes it, a plain update that lowers a token refused
# (exit 3), and --fence on update/find-and-modify/delete: exit 3 FENCED
# when a newer token wrote the document (also after a fenced delete, by
# the fence tombstone), NOMATCH kept apart from FENCED.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"


new_store lock
d insert res '{"_id":"r","v":0}' >/dev/null || { echo "setup failed"; exit 1; }

# acquire prints exactly name, owner, token, expires; a second one exits 1
# naming the holder.
expect 0 "acquire" -- d lock acquire L --ttl-ms 30000 --owner c1
jq -e 'keys == ["expires","name","owner","token"] and .token == 1 and .owner == "c1"' <"$WORK/out" >/dev/null &&
  ok || bad "acquire output: $(out)"
expect 1 "acquire while held" -- d lock acquire L --owner c2
grep -q "held by c1 (token 1)" "$WORK/err" && ok || bad "held message: $(<"$WORK/err")"
expect 0 "show" -- d lock show L
[ "$(field "$(out)" held)" = true ] && ok || bad "show: $(out)"
expect 0 "renew" -- d lock renew L 1
# A renew may also shorten the lease: 1 ms makes it lapse at once.
expect 0 "renew to 1 ms" -- d lock renew L 1 --ttl-ms 1
expect 1 "renew of a token never issued" -- d lock renew L 7
expect 1 "show of no such lock" -- d lock show nolock

# The lease lapses: a wait gets the next token; the old token can neither
# renew nor release, and its fenced write is refused.
expect 0 "acquire after the lease lapsed (waiting)" -- d lock acquire L --owner c2 --ttl-ms 5000 --wait-ms 3000
[ "$(field "$(out)" token)" = 2 ] && ok || bad "token after expiry: $(out)"
expect 1 "renew of a lapsed, retaken token" -- d lock renew L 1
expect 1 "release of a lapsed, retaken token" -- d lock release L 1
grep -q "no longer current" "$WORK/err" && ok || bad "release message: $(<"$WORK/err")"
expect 0 "fenced update" -- d update res '{"_id":"r"}' '{"$set":{"v":2}}' --fence L:2
expect 3 "stale fenced update" -- d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence L:1
grep -q "^doctx: FENCED: " "$WORK/err" && ok || bad "FENCED message: $(<"$WORK/err")"
expect 3 "stale fenced find-and-modify" -- d find-and-modify res '{"_id":"r"}' '{"$set":{"v":1}}' --fence L:1
expect 3 "stale fenced delete" -- d delete res '{"_id":"r"}' --fence L:1
expect 1 "fenced find-and-modify matching nothing is NOMATCH" -- d find-and-modify res '{"_id":"nope"}' '{"$set":{"v":1}}' --fence L:1
[ "$(field "$(d find res '{"_id":"r"}')" v)" = 2 ] && ok || bad "a stale write changed r"
# A replacement of a fenced document that only reorders a subdocument's
# fields changes the stored bytes: it is a write (fence.c once compared
# with json_equal, which ignores order, and reported modified 0 and kept
# the old order).
d insert res '{"_id":"o","v":{"a":1,"b":2}}' >/dev/null
expect 0 "fenced write of o" -- d update res '{"_id":"o"}' '{"$set":{"x":1}}' --fence L:2
expect 0 "replacement reordering o's v" -- d update res '{"_id":"o"}' '{"v":{"b":2,"a":1},"x":1}'
[ "$(out)" = '{"matched":1,"modified":1}' ] && ok || bad "reordering replacement: $(out)"
[ "$(d find res '{"_id":"o"}')" = '{"_id":"o","v":{"b":2,"a":1},"x":1,"_fence":{"L":2}}' ] && ok ||
  bad "o after the reordering replacement: $(d find res '{"_id":"o"}')"
# ... but a replacement that writes the document back as it was is no
# write, though _fence, put back last, is not last in the stored one.
d insert res '{"_id":"p","a":1}' >/dev/null
d update res '{"_id":"p"}' '{"$set":{"b":2}}' --fence L:2 >/dev/null
d update res '{"_id":"p"}' '{"$set":{"c":3}}' >/dev/null
expect 0 "replacement writing p back as it was" -- d update res '{"_id":"p"}' '{"a":1,"b":2,"c":3}'
[ "$(out)" = '{"matched":1,"modified":0}' ] && ok || bad "p's no-op replacement: $(out)"
expect 0 "fenced replacement writing p back as it was" -- d update res '{"_id":"p"}' '{"a":1,"b":2,"c":3}' --fence L:2
[ "$(out)" = '{"matched":1,"modified":0}' ] && ok || bad "p's fenced no-op replacement: $(out)"
[ "$(d find res '{"_id":"p"}')" = '{"_id":"p","a":1,"b":2,"_fence":{"L":2},"c":3}' ] && ok ||
  bad "p after its no-op replacements: $(d find res '{"_id":"p"}')"

# Release frees it, keeps the token; twice exits 1; next acquire is 3.
expect 0 "release" -- d lock release L 2
[ "$(field "$(out)" owner)" = null ] && ok || bad "release output: $(out)"
expect 1 "release twice" -- d lock release L 2
expect 0 "acquire after release" -- d lock acquire L --owner c3
[ "$(field "$(out)" token)" = 3 ] && ok || bad "token after release: $(out)"
expect 0 "acquire another lock" -- d lock acquire M
[ "$(field "$(out)" token)" = 1 ] && ok || bad "M's first token: $(out)"
expect 0 "list" -- d lock list
[ "$(wc -l <"$WORK/out")" = 2 ] && ok || bad "list: $(out)"
expect 0 "list paged" -- d lock list --limit 1 --skip 1
[ "$(field "$(out)" name)" = M ] && ok || bad "list paged: $(out)"
first=$(d lock list --limit 1 | jq -r .name)
expect 0 "list --after" -- d lock list --after "$first"
[ "$(field "$(out)" name)" = M ] && [ "$(wc -l <"$WORK/out")" = 1 ] &&
  ok || bad "list --after $first: $(out)"
expect 2 "list --after not an id" -- d lock list --after 'a/b'

# A lock is never deleted (its token would reset).
expect 3 "delete of a lock refused" -- d delete locks '{"_id":"L"}'

# Bad input: exit 2, nothing changes.
before=$(d find locks | md5sum)
while IFS='|' read -r label args; do
  # shellcheck disable=SC2086
  expect 2 "$label" -- d lock $args
done <<'CASES'
no subcommand|
unknown subcommand|grab L
bad name|acquire a/b
ttl 0|acquire L --ttl-ms 0
ttl not a number|acquire L --ttl-ms soon
negative wait|acquire L --wait-ms -1
bad owner|acquire L --owner a/b
token not an integer|renew L x
token 0|release L 0
token negative|release L -3
token overflow|release L 99999999999999999999
missing token|release L
extra argument|show L M
option of another subcommand|release L 3 --owner x
CASES
expect 2 "long name" -- d lock acquire "$(printf "a%.0s" $(seq 129))"
expect 2 "fence not NAME:TOKEN" -- d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence L
expect 2 "fence token not an integer" -- d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence L:x
[ "$(d find locks | md5sum)" = "$before" ] && ok || bad "bad input changed the locks"

expect 0 "audit" -- d audit
grep -q "audit lock: 2 locks" "$WORK/out" && ok || bad "audit line: $(out)"

# A plain update never lowers a token.
expect 3 "plain update lowering a token" -- d update locks '{"_id":"L"}' '{"$set":{"token":1}}'
grep -q "token may not decrease: 3 -> 1" "$WORK/err" && ok || bad "transition message: $(<"$WORK/err")"

# A lock moves only through `doctx lock` (docs/locks.md, "What a plain
# write may change"): a plain write may not hand a lapsed lease to another
# owner under the old token (two holders pass the fence), hold a lock
# forever past acquire's one-year bound, take its token (or its own fence
# record) to INT64_MAX (no acquire ever again), nor insert a lock: exit 3,
# nothing changed.
new_store lock_plain
d lock acquire P --ttl-ms 1 >/dev/null && d lock acquire Q >/dev/null || bad "plain set-up"
sleep 0.01
before=$(d find locks | md5sum)
while IFS='|' read -r label args; do
  # shellcheck disable=SC2086
  expect 3 "plain: $label" -- d $args
  grep -q "VALIDATION" "$WORK/err" && ok || bad "plain: $label: message: $(<"$WORK/err")"
done <<'CASES'
another owner, the old token|update locks {"_id":"P"} {"$set":{"owner":"mallory"}}
held forever|update locks {"_id":"P"} {"$set":{"owner":"mallory","expires":9223372036854775807,"ttl":9223372036854775807}}
ttl past a year|update locks {"_id":"Q"} {"$set":{"ttl":9223372036854775807}}
lease shortened|update locks {"_id":"Q"} {"$set":{"expires":0}}
token at INT64_MAX|update locks {"_id":"Q"} {"$set":{"token":9223372036854775807}}
token raised by find-and-modify|find-and-modify locks {"_id":"Q"} {"$set":{"token":2}}
nonce|update locks {"_id":"P"} {"$set":{"nonce":"x"}}
acquired|update locks {"_id":"P"} {"$set":{"acquired":1}}
insert of a lock|insert locks {"_id":"N","owner":"m","token":1,"expires":9223372036854775807,"ttl":1,"acquired":0,"updated":0,"nonce":""}
fenced write raising the lock's own record|update locks {"_id":"Q"} {"$set":{"x":1}} --fence Q:9223372036854775807
upsert of a lock|update locks {"_id":"U"} {"$set":{"owner":"m","token":1,"expires":0,"ttl":1,"acquired":0,"updated":0,"nonce":""}} --upsert
CASES
[ "$(d find locks | md5sum)" = "$before" ] && ok || bad "a refused plain write changed the locks"
expect 0 "audit after the refused writes" -- d audit
# Forced past the rules, the audit reports what no acquire can mend.
d update locks '{"_id":"P"}' '{"$set":{"owner":"mallory","expires":9223372036854775807,"ttl":9223372036854775807}}' --bypass-validation >/dev/null &&
  d update locks '{"_id":"Q"}' '{"$set":{"token":9223372036854775807}}' --bypass-validation >/dev/null || bad "plain: bypass"
expect 5 "audit: a lease held forever, a token at its end" -- d audit
grep -q "lock_lease.*lock 'P': ttl 9223372036854775807 ms" "$WORK/out" && ok || bad "lock_lease ttl finding: $(out)"
grep -q "lock_lease.*lock 'P': its lease runs" "$WORK/out" && ok || bad "lock_lease lease finding: $(out)"
grep -q "lock_token_exhausted.*lock 'Q'" "$WORK/out" && ok || bad "lock_token_exhausted finding: $(out)"

# Tokens never go back for a name that fenced a write: 3 acquires, a
# write fenced with token 3, the lock deleted with --bypass-validation --
# the audit reports it, and the next acquire hands out 4, not 1.
new_store lock_deleted
for i in 1 2 3; do
  t=$(field "$(d lock acquire D)" token) && d lock release D "$t" >/dev/null || bad "acquire $i"
done
d insert res '{"_id":"r","v":0}' >/dev/null &&
  d update res '{"_id":"r"}' '{"$set":{"v":3}}' --fence "D:$t" >/dev/null || bad "fenced write with $t"
expect 0 "delete the lock, bypassing its guard" -- d delete locks '{"_id":"D"}' --bypass-validation
expect 5 "audit: a fenced name whose lock is gone" -- d audit
grep -q "lock_missing.*lock 'D' is gone.*its token 3 fenced a write of res 'r'" "$WORK/out" &&
  ok || bad "lock_missing finding: $(out)"
expect 0 "acquire after the delete" -- d lock acquire D
[ "$(field "$(out)" token)" = 4 ] && ok || bad "token after the delete: $(out)"
d lock release D 4 >/dev/null
expect 0 "audit after the next acquire" -- d audit
# The collection dropped too: the name's fenced writes still count.
d update res '{"_id":"r"}' '{"$set":{"v":4}}' --fence D:4 >/dev/null || bad "fenced write with 4"
expect 0 "drop locks, bypassing" -- d drop locks --bypass-validation
expect 5 "audit after the drop" -- d audit
expect 0 "acquire after the drop" -- d lock acquire D
[ "$(field "$(out)" token)" = 5 ] && ok || bad "token after the drop: $(out)"
# The resource deleted too before the drop: only its fence tombstone
# remembers token 6, and the next acquire is past it (it restarted at 1,
# and the audit said clean, before the tombstones were read).
d lock release D 5 >/dev/null
t=$(field "$(d lock acquire D)" token) && d update res '{"_id":"r"}' '{"$set":{"v":6}}' --fence "D:$t" >/dev/null || bad "fenced write with 6"
d lock release D "$t" >/dev/null
expect 0 "delete the resource" -- d delete res '{"_id":"r"}'
expect 0 "drop locks again, bypassing" -- d drop locks --bypass-validation
expect 5 "audit: a lock gone, its token only in a tombstone" -- d audit
grep -q "lock_missing.*lock 'D' is gone.*its token 6 fenced a write of a deleted document of res" "$WORK/out" &&
  ok || bad "lock_missing from a tombstone: $(out)"
expect 0 "acquire after the drop, the resource gone" -- d lock acquire D
[ "$(field "$(out)" token)" = 7 ] && ok || bad "token after the drop, the resource gone: $(out)"
d lock release D 7 >/dev/null
# The names dropped as well: the acquire starts over (no name says the
# lock was used), and the audit reports it from the tombstone.
d drop locks --bypass-validation >/dev/null && d drop lock_names --bypass-validation >/dev/null || bad "drop both"
d lock acquire D >/dev/null
expect 5 "audit: a token below a deleted document's" -- d audit
grep -q "lock_token_regressed.*lock 'D' holds token 1, below token 6 .*a deleted document of res" "$WORK/out" &&
  ok || bad "lock_token_regressed from a tombstone: $(out)"

# A fenced delete leaves the fence record behind (a fence tombstone): a
# paused holder's later fenced upsert with an older token is refused, and
# the document is not recreated.
new_store lock_tomb
d insert res '{"_id":"r","v":0}' >/dev/null || bad "tomb set-up"
expect 0 "fenced update by holder 2" -- d update res '{"_id":"r"}' '{"$set":{"v":2}}' --fence L:2
expect 0 "fenced delete by holder 2" -- d delete res '{"_id":"r"}' --fence L:2
expect 0 "the deleted document is not seen" -- d count res
[ "$(out)" = 0 ] && ok || bad "count after the fenced delete: $(out)"
expect 3 "holder 1's fenced upsert" -- d update res '{"_id":"r"}' '{"$set":{"v":1}}' --upsert --fence L:1
grep -q "token 1 of lock 'L' is stale: token 2 already wrote it before it was deleted" "$WORK/err" &&
  ok || bad "tombstone message: $(<"$WORK/err")"
expect 3 "holder 1's fenced find-and-modify upsert" -- d find-and-modify res '{"_id":"r"}' '{"$set":{"v":1}}' --upsert --fence L:1
[ "$(d count res)" = 0 ] && ok || bad "the stale upsert recreated r"
expect 0 "an insert of the _id takes the record over" -- d insert res '{"_id":"r","v":9}'
[ "$(field "$(d find res '{"_id":"r"}')" _fence)" = '{"L":2}' ] && ok || bad "record not carried: $(d find res)"

# One rule for owner names, wherever an owner is taken: exit 2, nothing
# written (a worker that refuses its owner runs nothing).
new_store lock_owner
d job add q t >/dev/null || bad "owner set-up"
before=$(d dump | md5sum)
while IFS='|' read -r label args; do
  # shellcheck disable=SC2086
  expect 2 "$label" -- d $args
  grep -q "owner" "$WORK/err" && ok || bad "$label: message: $(<"$WORK/err")"
done <<'CASES'
lock acquire, empty owner|lock acquire L --owner=
worker, owner with a slash|worker --once --owner a/b
worker, empty owner|worker --once --owner=
job work, owner with a slash|job work q --exec true --once --owner a/b
order confirm, empty owner|order confirm T1 --owner=
CASES
[ "$(d dump | md5sum)" = "$before" ] && ok || bad "a refused owner changed the store"
expect 0 "a 128-byte owner" -- d lock acquire L --owner "$(printf "o%.0s" $(seq 128))"

# The audit finds a lock whose token is below one a fenced write already
# used (as if the lock had been restored from an old copy).
new_store lock_audit
d lock acquire A >/dev/null && d insert res '{"_id":"r","v":0}' >/dev/null &&
  d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence A:5 >/dev/null || bad "audit set-up"
expect 5 "audit: token regressed" -- d audit
grep -q "lock_token_regressed.*lock 'A' holds token 1, below token 5 already used in a fenced write of res 'r'" "$WORK/out" &&
  ok || bad "audit finding: $(out)"
# lock hold (docs/locks.md "Holding a lock").  Holder 1 runs a command
# that appends "A<token>" to a fenced document every 50 ms; doctx itself
# is SIGSTOPped (its command runs on: its own process group), so no
# renewal comes; holder 2 waits for the lease to lapse, takes token 2 and
# appends "B2"; the command's next append is refused FENCED; doctx
# resumes, finds the lease lapsed by its monotonic clock, ends the
# command's group and exits 6.  The document shows the order: every A1
# before B2, none after.  Then a hold whose renewals fail (an error
# injected at lock.renew on every one of the kit's tries) kills its
# command before releasing, so the next holder's first write comes after
# the command is dead; a doctx that crashes at its renewal takes the
# command with it; and the plain outcomes: the command's status
# passed through, the lock released, a held lock (exit 1), bad input
# (exit 2), a command that does not exist (127).
new_store lock_hold
export S DOCTX WORK
d insert hlog '{"_id":"w","seq":[]}' >/dev/null || bad "hold set-up"
cat >"$WORK/appender" <<'SH'
#!/usr/bin/env bash
# appends A$DOCTX_LOCK_TOKEN fenced, every 50 ms; logs each exit status
echo $$ >"$WORK/cmd.pid"
while :; do
  "$DOCTX" --store "$S" update hlog '{"_id":"w"}' \
    "{\"\$push\":{\"seq\":\"A$DOCTX_LOCK_TOKEN\"}}" --fence "$DOCTX_LOCK_FENCE" >/dev/null 2>&1
  echo $? >>"$WORK/a.log"
  sleep 0.05
done
SH
chmod +x "$WORK/appender"
: >"$WORK/a.log"
start_bg "$WORK/hold1.log" "$DOCTX" --store "$S" lock hold L9 --ttl-ms 600 --grace-ms 500 -- "$WORK/appender"
h1=$BG_PID
for _ in $(seq 100); do [ "$(grep -c '^0$' "$WORK/a.log")" -ge 2 ] && break; nap 0.05; done
[ "$(grep -c '^0$' "$WORK/a.log")" -ge 2 ] && ok || bad "hold: the command's writes: $(cat "$WORK/a.log" "$WORK/hold1.log")"
kill -STOP "$h1"
on_exit "kill -CONT $h1 2>/dev/null"
expect 0 "hold: the next holder waits out the paused holder's lease" -- d lock acquire L9 --owner c2 --ttl-ms 30000 --wait-ms 5000
[ "$(field "$(out)" token)" = 2 ] && ok || bad "hold: next token: $(out)"
expect 0 "hold: the next holder's fenced write" -- d update hlog '{"_id":"w"}' '{"$push":{"seq":"B2"}}' --fence L9:2
n=$(wc -l <"$WORK/a.log")
for _ in $(seq 100); do [ "$(tail -n +$((n + 1)) "$WORK/a.log" | grep -c '^3$')" -ge 1 ] && break; nap 0.05; done
[ "$(tail -n +$((n + 1)) "$WORK/a.log" | grep -c '^3$')" -ge 1 ] && ok ||
  bad "hold: the paused holder's command was not refused FENCED: $(tr '\n' ' ' <"$WORK/a.log")"
kill -CONT "$h1"
bounded_wait "$h1" 10 "$WORK/hold1.log"
rc=$?
[ $rc = 6 ] && ok || bad "hold: exit $rc after the lapse, want 6: $(<"$WORK/hold1.log")"
# Resumed, the keeper finds the lease lapsed -- or, when its renewal was
# due first, the renewal refused (token 2 is held): a loss either way.
grep -Eq "STALE: lock 'L9' token 1: (lease lapsed|renew: NOMATCH: lock 'L9': token 1 is no longer current)" "$WORK/hold1.log" &&
  ok || bad "hold: message: $(<"$WORK/hold1.log")"
alive "$(<"$WORK/cmd.pid")" && bad "hold: the command outlived the loss" || ok
seq=$(d find hlog '{"_id":"w"}' | jq -c .seq)
jq -e 'index("B2") as $b | $b != null and $b > 0 and (.[:$b] | all(. == "A1")) and (.[$b+1:] | length == 0)' <<<"$seq" >/dev/null &&
  ok || bad "hold: writes out of order: $seq"
expect 3 "hold: the stale token is FENCED" -- d update hlog '{"_id":"w"}' '{"$push":{"seq":"late"}}' --fence L9:1
expect 0 "hold: the next holder is untouched" -- d lock show L9
[ "$(field "$(out)" owner):$(field "$(out)" held)" = c2:true ] && ok || bad "hold: L9 after: $(out)"

# Renewals that fail: SIGTERM, then SIGKILL (the command ignores TERM),
# exit 6, released; the next holder sees the command dead before it writes.
f=lock.renew:error:1,lock.renew:error:2,lock.renew:error:3,lock.renew:error:4
cat >"$WORK/stubborn" <<'SH'
#!/usr/bin/env bash
trap '' TERM
echo $$ >"$WORK/cmd.$DOCTX_LOCK_NAME.pid"
while :; do sleep 0.05; done
SH
chmod +x "$WORK/stubborn"
# (a 900 ms ttl, as below: with 300 a loaded sanitizer run reached its
# first renewal past the lease, and the message named the lapse instead)
expect 6 "hold: a renewal that fails" -- env DOCTX_FAULT=$f "$DOCTX" --store "$S" lock hold L8 --ttl-ms 900 --grace-ms 100 -- "$WORK/stubborn"
grep -q "STALE: lock 'L8' token 1: renew: FAULT" "$WORK/err" && grep -q "then SIGKILL" "$WORK/err" && ok || bad "hold: message: $(<"$WORK/err")"
expect 0 "hold: the next holder, after the command died" -- d lock hold L8 -- bash -c \
  'kill -0 "$(<"$WORK/cmd.L8.pid")" 2>/dev/null && exit 9; "$DOCTX" --store "$S" update hlog "{\"_id\":\"w\"}" "{\"\$push\":{\"seq\":\"C$DOCTX_LOCK_TOKEN\"}}" --fence "$DOCTX_LOCK_FENCE"'
[ "$(d find hlog '{"_id":"w"}' | jq -c '.seq[-1]')" = '"C2"' ] && ok || bad "hold: C2 missing: $(d find hlog)"
# A process that left the command's group (setsid) is still the
# command's: on a loss it is signalled and killed too, and lock hold
# exits 6 only once it is gone (it ran on with the lost token, TERM
# ignored, after doctx had exited).
cat >"$WORK/escaper" <<'SH'
#!/usr/bin/env bash
setsid "$WORK/stubborn" &
wait
SH
chmod +x "$WORK/escaper"
rm -f "$WORK/cmd.L5.pid"
# (a 900 ms ttl: the first renewal, which fails, comes after the child
# has started on a loaded machine)
expect 6 "hold: a renewal that fails, a child in its own session" -- env DOCTX_FAULT=$f "$DOCTX" --store "$S" lock hold L5 --ttl-ms 900 --grace-ms 100 -- "$WORK/escaper"
esc=$(cat "$WORK/cmd.L5.pid" 2>/dev/null)
[ -n "$esc" ] && on_exit "kill -KILL $esc 2>/dev/null"
[ -n "$esc" ] && ! alive "$esc" && ok || bad "hold: the setsid child '$esc' outlived the loss"
# doctx crashing at its renewal (fault point lock.renew): the command gets
# SIGKILL with it (the parent-death signal), TERM ignored or not.
expect 137 "hold: doctx crashes at its renewal" -- env DOCTX_FAULT=lock.renew:crash "$DOCTX" --store "$S" lock hold L6 --ttl-ms 300 -- "$WORK/stubborn"
for _ in $(seq 40); do alive "$(<"$WORK/cmd.L6.pid")" || break; nap 0.05; done
alive "$(<"$WORK/cmd.L6.pid")" && bad "hold: the command outlived a crashed doctx" || ok
expect 7 "hold: the command's status passed through" -- d lock hold L8 --owner o7 -- bash -c '[ "$DOCTX_LOCK_NAME:$DOCTX_LOCK_TOKEN:$DOCTX_LOCK_OWNER:$DOCTX_LOCK_FENCE" = L8:3:o7:L8:3 ] && exit 7'
expect 0 "hold: released when the command ended" -- d lock show L8
[ "$(field "$(out)" owner)" = null ] && ok || bad "hold: L8 not released: $(out)"
# What the command left running (here a child in its own session that
# ignores TERM) ends before the release, under the lock: TERM, then KILL
# --grace-ms later; the command's status is still passed through.  (It
# was released at once, the child writing on under the token given back.)
rm -f "$WORK/cmd.LL.pid"
expect 4 "hold: a command that leaves a process running" -- d lock hold LL --ttl-ms 30000 --grace-ms 200 -- bash -c \
  'setsid "$WORK/stubborn" & for i in $(seq 200); do [ -s "$WORK/cmd.LL.pid" ] && exit 4; sleep 0.05; done; exit 9'
left=$(cat "$WORK/cmd.LL.pid" 2>/dev/null)
[ -n "$left" ] && on_exit "kill -KILL $left 2>/dev/null"
[ -n "$left" ] && ! alive "$left" && ok || bad "hold: the leftover '$left' outlived the hold"
grep -q "left processes running: sent them SIGTERM, then SIGKILL before the release" "$WORK/err" && ok ||
  bad "hold: leftover message: $(<"$WORK/err")"
expect 0 "hold: released after the leftover ended" -- d lock show LL
[ "$(field "$(out)" held)" = false ] && ok || bad "hold: LL not released: $(out)"
expect 1 "hold: a held lock" -- d lock hold L9 -- true
expect 2 "hold: no command" -- d lock hold L7 --ttl-ms 100
expect 2 "hold: a ttl past a year" -- d lock hold L7 --ttl-ms 9223372036854775807 -- true
expect 127 "hold: a command that does not exist" -- d lock hold L7 -- "$WORK/nonexistent"
expect 0 "hold: a huge grace and wait saturate" -- d lock hold L7 --grace-ms 9223372036854775807 --wait-ms 9223372036854775807 -- true
# ---- semaphores (docs/locks.md, "Semaphores") --------------------------------
# Up to --max holders, each with its own token and its slot's fence name;
# one max per name; a holder whose slot went to a newer token is FENCED
# while the other slots' holders -- an older token among them -- write.
new_store lock_sem
for o in a b c; do
  expect 0 "semaphore: acquire by $o" -- d lock acquire S --max 3 --owner $o --ttl-ms 60000
done
jq -e 'keys == ["expires","fence","max","name","owner","slot","token"] and .token == 3 and .slot == 2 and .fence == "S:2"' <"$WORK/out" >/dev/null &&
  ok || bad "semaphore acquire output: $(out)"
expect 1 "semaphore: a 4th holder" -- d lock acquire S --max 3 --owner d
grep -q "all 3 holders are taken (tokens 1, 2, 3)" "$WORK/err" && ok || bad "semaphore held message: $(<"$WORK/err")"
before=$(d dump | md5sum)
while IFS='|' read -r label args; do
  # shellcheck disable=SC2086
  expect 2 "$label" -- d lock $args
done <<'CASES'
semaphore: another max|acquire S --max 2
semaphore: no max|acquire S
semaphore: a slot's fence name as a lock|acquire S:0
semaphore: campaign|campaign S --wait-ms 1
semaphore: leader|leader S
semaphore: max 0|acquire T --max 0
semaphore: max 101|acquire T --max 101
semaphore: max not a number|acquire T --max many
CASES
# Its slots' fence names, NAME:SLOT, are names of 128 bytes at most.
expect 2 "semaphore: name too long for its slots" -- d lock acquire "$(printf "n%.0s" $(seq 127))" --max 2
[ "$(d dump | md5sum)" = "$before" ] && ok || bad "a refused semaphore call changed the store"
expect 0 "semaphore: b's lease cut to 1 ms" -- d lock renew S 2 --ttl-ms 1
expect 0 "semaphore: the lapsed slot taken again" -- d lock acquire S --max 3 --owner e --wait-ms 3000
[ "$(field "$(out)" token):$(field "$(out)" fence)" = 4:S:1 ] && ok || bad "retaken slot: $(out)"
expect 0 "semaphore: e writes" -- d update res '{"_id":"s"}' '{"$inc":{"n":1}}' --upsert --fence S:1:4
expect 3 "semaphore: b's stale token FENCED" -- d update res '{"_id":"s"}' '{"$inc":{"n":1}}' --fence S:1:2
expect 0 "semaphore: a (token 1, older than e's) writes on its own slot" -- d update res '{"_id":"s"}' '{"$inc":{"n":1}}' --fence S:0:1
expect 1 "semaphore: b's renew refused" -- d lock renew S 2
expect 0 "semaphore: release of c" -- d lock release S 3
expect 1 "semaphore: released twice" -- d lock release S 3
expect 0 "semaphore: show" -- d lock show S
jq -e '.max == 3 and .token == 4 and ([.holders[].token] == [1,4])' <"$WORK/out" >/dev/null && ok || bad "semaphore show: $(out)"
expect 0 "semaphore: audit" -- d audit
# Its fields move only through doctx lock; past the rules, the audit tells.
while IFS='|' read -r label coll upd; do
  expect 3 "$label" -- d update "$coll" '{"_id":"S"}' "$upd"
done <<'CASES'
semaphore tamper: max raised|locks|{"$set":{"max":5}}
semaphore tamper: a slot handed over|locks|{"$set":{"slots.1.owner":"m","slots.1.expires":9223372036854775807}}
semaphore tamper: a slot's token lowered|locks|{"$set":{"slots.0.token":0}}
CASES
expect 3 "tamper: a plain lock made a semaphore" -- d update locks '{"_id":"L"}' '{"$set":{"max":3}}' --upsert
expect 3 "tamper: a slot's reservation dropped" -- d update lock_names '{"_id":"S:0"}' '{"$unset":{"slot_of":""}}'
d update locks '{"_id":"S"}' '{"$set":{"slots.0.token":9}}' --bypass-validation >/dev/null || bad "bypass set-up"
expect 5 "audit: a slot's token above the semaphore's" -- d audit
grep -q "lock_token_regressed.*semaphore 'S' holds token 4, below token 9 of its slot 0" "$WORK/out" && ok || bad "semaphore finding: $(out)"

# ---- leader election (docs/locks.md, "Leader election") ----------------------
# Three candidates; each, once it leads, renews every 100 ms while its
# renew is accepted.  The leader is SIGKILLed, then the next SIGSTOPped:
# one leader per term, terms 1, 2, 3, and the stopped leader, resumed,
# is refused (its renew, and its fenced write once term 3 wrote).
new_store lock_elect
candidate() {
  local t
  t=$(d lock campaign E --ttl-ms 600 --owner "$1" --wait-ms 15000 | jq .token) || return
  echo "$1 $t" >>"$WORK/terms"
  while d lock renew E "$t" >/dev/null 2>&1; do nap 0.1; done
  echo "$1 lost $t" >>"$WORK/terms"
}
# terms_reach N: waits (bounded) until N terms were won.
terms_reach() {
  local end=$((SECONDS + 10))
  while [ "$(grep -vc lost "$WORK/terms" 2>/dev/null)" -lt "$1" ] && [ $SECONDS -lt $end ]; do nap 0.05; done
  [ "$(grep -vc lost "$WORK/terms")" -ge "$1" ]
}
pid_of() { case $1 in c1) echo "$P1" ;; c2) echo "$P2" ;; c3) echo "$P3" ;; esac; }
: >"$WORK/terms"
start_bg "$WORK/elect.log" candidate c1; P1=$BG_PID
terms_reach 1 && ok || bad "no first leader: $(log_tail "$WORK/elect.log")"
start_bg "$WORK/elect.log" candidate c2; P2=$BG_PID
start_bg "$WORK/elect.log" candidate c3; P3=$BG_PID
expect 0 "leader" -- d lock leader E
[ "$(field "$(out)" leader):$(field "$(out)" term)" = c1:1 ] && ok || bad "leader of term 1: $(out)"
{ kill -KILL "$P1" && wait "$P1"; } 2>/dev/null
terms_reach 2 && ok || bad "no leader after the first was killed: $(<"$WORK/terms")"
second=$(awk '$2 == 2 {print $1}' "$WORK/terms")
kill -STOP "$(pid_of "$second")"
terms_reach 3 && ok || bad "no leader after the second was stopped: $(<"$WORK/terms")"
third=$(awk '$2 == 3 {print $1}' "$WORK/terms")
expect 0 "leader after two deaths" -- d lock leader E
[ "$(field "$(out)" leader):$(field "$(out)" term)" = "$third:3" ] && ok || bad "leader of term 3: $(out)"
expect 0 "term 3 writes" -- d update res '{"_id":"e"}' '{"$set":{"by":3}}' --upsert --fence E:3
kill -CONT "$(pid_of "$second")"
bounded_wait "$(pid_of "$second")" 10 "$WORK/elect.log" && ok || bad "the resumed leader went on"
grep -q "^$second lost 2$" "$WORK/terms" && ok || bad "resumed leader: $(<"$WORK/terms")"
expect 3 "the deposed leader's write FENCED" -- d update res '{"_id":"e"}' '{"$set":{"by":2}}' --fence E:2
stop_bg "$(pid_of "$third")" 10 "$WORK/elect.log"
# One leader per term, three different candidates, terms in order.
[ "$(grep -v lost "$WORK/terms" | awk '{print $2}' | tr '\n' ' ')" = "1 2 3 " ] && ok || bad "terms: $(<"$WORK/terms")"
[ "$(grep -v lost "$WORK/terms" | awk '{print $1}' | sort -u | wc -l)" = 3 ] && ok || bad "leaders: $(<"$WORK/terms")"
expect 0 "campaign of a free name" -- d lock campaign E2 --owner x --ttl-ms 60000
expect 1 "campaign with a bound" -- d lock campaign E2 --owner y --wait-ms 50
grep -q "held by x (token 1)" "$WORK/err" && ok || bad "campaign message: $(<"$WORK/err")"
expect 1 "leader of a name never campaigned for" -- d lock leader nobody
# ---- fair waiting (docs/locks.md, "Fair waiting") ----------------------------
# Waiters take tickets in the order they arrive (each started once the one
# before holds its ticket) and get the lock in that order; one SIGKILLed
# mid-wait leaves a ticket that lapses, and the others pass it.  (Four
# processes and the killed one here; tests/txn/lock.c runs 8 waiters.)
new_store lock_fair
d lock acquire F --owner h --ttl-ms 60000 >/dev/null || bad "fair set-up"
waiter() {
  local t
  t=$(d lock acquire F --owner "$1" --ttl-ms 60000 --wait-ms 15000 | jq .token) ||
    { echo "$1 failed" >>"$WORK/fair"; return 1; }
  echo "$1 $t" >>"$WORK/fair"
  d lock release F "$t" >/dev/null
}
tickets() { d find locks '{"_id":"F"}' | jq '.queue | length'; }
taken() { d find locks '{"_id":"F"}' | jq '.tickets // 0'; }
: >"$WORK/fair"
FAIR_PIDS=()
want=0
for w in w1 w2 k w3 w4; do
  if [ $w = k ]; then # doctx itself, so that the kill ends the waiter
    start_bg "$WORK/fair.log" "$DOCTX" --store "$S" lock acquire F --owner k --wait-ms 15000
    KPID=$BG_PID
  else
    start_bg "$WORK/fair.log" waiter $w
    FAIR_PIDS+=("$BG_PID")
  fi
  want=$((want + 1))
  end=$((SECONDS + 10))
  while [ "$(taken)" -lt "$want" ] && [ $SECONDS -lt $end ]; do nap 0.02; done
done
[ "$(tickets)" = 5 ] && ok || bad "fair: tickets $(tickets), want 5"
expect 1 "fair: an acquire that does not wait, with waiters ahead" -- d lock acquire F --owner x
{ kill -KILL "$KPID" && wait "$KPID"; } 2>/dev/null
expect 0 "fair: the holder releases" -- d lock release F 1
for p in "${FAIR_PIDS[@]}"; do bounded_wait "$p" 15 "$WORK/fair.log" >/dev/null || bad "fair: a waiter failed"; done
[ "$(awk '{print $1 ":" $2}' "$WORK/fair" | tr '\n' ' ')" = "w1:2 w2:3 w3:4 w4:5 " ] &&
  ok || bad "fair: order $(<"$WORK/fair")"
[ "$(tickets)" = 0 ] && ok || bad "fair: tickets left: $(d find locks '{"_id":"F"}')"
expect 0 "fair: audit" -- d audit
expect 3 "tamper: a ticket moved by hand" -- d update locks '{"_id":"F"}' '{"$set":{"tickets":0}}'
finish
