#!/usr/bin/env bash
# lost_reply.sh -- a write whose reply is lost after the server ran it
# (src/store/redis/exec.c, write.c): the fault points redis.write_replied
# (the reply read, then dropped with the connection, as a network failure
# after the server answered) and redis.write_resend (just before the copy
# that goes again).  The rule under test (doctx.h, "Errors"): a resend that
# finds its own write reports it applied; one that finds another writer's
# version cannot tell whether its first copy ran, and must say so
# (UNAVAILABLE, exit 4: outcome unknown) -- never apply the update again on
# top, which counted an $inc twice (seen as 4001 of 4000 increments in the
# conformance suite's threads on one handle, under load).
#
# Runs against the store in DTX_REDIS_URI (run-redis.sh's shell phase, both
# targets), on a namespace of its own; every wait is bounded.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
: "${DOCTX:?DOCTX must point at the doctx binary}"
: "${DTX_REDIS_URI:?DTX_REDIS_URI must name the Redis store}"
source "$HERE/../lib/harness.sh"

S=$("$HERE/fresh-store.sh" lost_reply) || { echo "fresh-store failed"; echo "0 passed, 1 failed"; exit 1; }
C=lr

# n_is LABEL ID N -- document ID of C holds n == N.
n_is() {
  local got
  got=$(d find "$C" "{\"_id\":\"$2\"}" --project '{"_id":0,"n":1}' 2>&1)
  [ "$got" = "{\"n\":$3}" ] && ok || bad "$1: $2 holds $got, want n $3"
}

d insert "$C" '{"_id":"a","n":0}' '{"_id":"b","n":0}' '{"_id":"c","n":0}' >/dev/null ||
  bad "set-up"

# 1. A lost reply with nobody else writing: the resend finds its own
#    version and reports success, applied once.
for cmd in update find-and-modify; do
  expect 0 "$cmd, reply lost" -- env DOCTX_FAULT=redis.write_replied:lost \
    "$DOCTX" --store "$S" "$cmd" "$C" '{"_id":"a"}' '{"$inc":{"n":1}}'
done
n_is "two lost replies, resent alone" a 2
# A crash after the server ran the write: applied once, nothing more.
expect 137 "crash after the write ran" -- env DOCTX_FAULT=redis.write_replied:crash \
  "$DOCTX" --store "$S" update "$C" '{"_id":"a"}' '{"$inc":{"n":1}}'
n_is "crash after the write ran" a 3

# 2. A lost reply, then another writer, then the resend: the outcome is
#    unknown (exit 4, saying so), and the $inc is not applied twice.
#    LABEL KIND: KIND update | find-and-modify | bulk.
lost_then_rival() {
  local label=$1 kind=$2 id=$3 log="$WORK/$2.log" pid rc before
  before=$(d find "$C" "{\"_id\":\"$id\"}" --project '{"_id":0,"n":1}')
  before=${before#*:}
  before=${before%\}}
  local args=("$kind" "$C" "{\"_id\":\"$id\"}" '{"$inc":{"n":1}}')
  if [ "$kind" = bulk ]; then
    echo "{\"updateOne\":{\"filter\":{\"_id\":\"$id\"},\"update\":{\"\$inc\":{\"n\":1}}}}" >"$WORK/ops"
    args=(bulk "$C" --file "$WORK/ops")
  fi
  start_bg "$log" env DOCTX_FAULT=redis.write_replied:lost,redis.write_resend:pause \
    "$DOCTX" --store "$S" "${args[@]}"
  pid=$BG_PID
  if ! wait_stopped "$pid" 20; then
    bad "$label: the resend never paused: $(log_tail "$log")"
    kill -CONT "$pid" 2>/dev/null
    bounded_wait "$pid" 10 "$log"
    return
  fi
  d update "$C" "{\"_id\":\"$id\"}" '{"$inc":{"n":10}}' >/dev/null || bad "$label: rival"
  kill -CONT "$pid"
  bounded_wait "$pid" 30 "$log"
  rc=$?
  if [ "$kind" = bulk ]; then
    # bulk prints the operation's own error and exits 4 for a store error.
    [ "$rc" -eq 4 ] && grep -q '"error":"UNAVAILABLE".*outcome unknown' "$log" &&
      ok || bad "$label: exit $rc: $(log_tail "$log")"
  else
    [ "$rc" -eq 4 ] && grep -q 'UNAVAILABLE: .*outcome unknown' "$log" &&
      ok || bad "$label: exit $rc, want 4 naming the unknown outcome: $(log_tail "$log")"
  fi
  # The first copy ran (it was applied before the rival): 1 + 10, once.
  n_is "$label" "$id" $((before + 11))
}
lost_then_rival "update, reply lost, a rival wrote" update b
lost_then_rival "find-and-modify, reply lost, a rival wrote" find-and-modify b
lost_then_rival "bulk, reply lost, a rival wrote" bulk c

finish
