#!/usr/bin/env bash
# The lock CLI contract (issue 12): acquire/renew/release/show/list, exit 1
# when still held or the token is no longer current, tokens strictly
# increasing across release and expiry, bad input exit 2 changing
# nothing, and --fence on update/find-and-modify/delete: exit 3 FENCED
# when a newer token wrote the document, NOMATCH kept apart from FENCED.
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
grep -q "held by c1 (token 1)" "$WORK/err" && ok || bad "held message: $(cat "$WORK/err")"
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
grep -q "no longer current" "$WORK/err" && ok || bad "release message: $(cat "$WORK/err")"
expect 0 "fenced update" -- d update res '{"_id":"r"}' '{"$set":{"v":2}}' --fence L:2
expect 3 "stale fenced update" -- d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence L:1
grep -q "^doctx: FENCED: " "$WORK/err" && ok || bad "FENCED message: $(cat "$WORK/err")"
expect 3 "stale fenced find-and-modify" -- d find-and-modify res '{"_id":"r"}' '{"$set":{"v":1}}' --fence L:1
expect 3 "stale fenced delete" -- d delete res '{"_id":"r"}' --fence L:1
expect 1 "fenced find-and-modify matching nothing is NOMATCH" -- d find-and-modify res '{"_id":"nope"}' '{"$set":{"v":1}}' --fence L:1
[ "$(field "$(d find res '{"_id":"r"}')" v)" = 2 ] && ok || bad "a stale write changed r"

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

# The audit finds a lock whose token is below one a fenced write already
# used (as if the lock had been restored from an old copy).
new_store lock_audit
d lock acquire A >/dev/null && d insert res '{"_id":"r","v":0}' >/dev/null &&
  d update res '{"_id":"r"}' '{"$set":{"v":1}}' --fence A:5 >/dev/null || bad "audit set-up"
expect 5 "audit: token regressed" -- d audit
grep -q "lock_token_regressed.*lock 'A' holds token 1, below token 5 already used in a fenced write of res 'r'" "$WORK/out" &&
  ok || bad "audit finding: $(out)"
finish
