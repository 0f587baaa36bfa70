# scenarios/sync.sh -- how the crash suites (faults.sh, pause.sh) reach
# each sync.* fault point (src/txn/sync/sync.c), and what must hold
# afterwards (the interface is described in scenarios/transfer.sh).
#
# Here: rule R copies users.name into comments.author (link: user);
# u1 "ann" has comments c1 and c2, u2 "bob" has c3.  The command renames
# u1 to "bea" (sync.repair.* first leave that change's flag behind with a
# crash mid-propagation, then repair it).  check_final defines R again
# (a no-op, or the define a crash cut short), recovers, and proves: audit
# --settled clean; no flag left; c1 and c2 carry u1's name at u1's
# version; c3 untouched; u1 renamed unless the fault struck before the
# master step (a crash at sync.master; an injected error there is
# retried).
RULE_ARGS="--master users --dependents comments --link user --copy name:author"
RENAME='sync update R u1 {"$set":{"name":"bea"}}'

scenario_setup() {
  d insert users '{"_id":"u1","name":"ann"}' '{"_id":"u2","name":"bob"}' >/dev/null &&
    d insert comments '{"_id":"c1","user":"u1","author":"ann"}' \
      '{"_id":"c2","user":"u1","author":"ann"}' \
      '{"_id":"c3","user":"u2","author":"bob"}' >/dev/null || return
  [ "${p:-}" = sync.rule ] || d sync rule R $RULE_ARGS >/dev/null
}

scenario_cmd() {
  case "$1" in
  sync.rule) echo "sync rule R $RULE_ARGS" ;;
  sync.master | sync.propagate | sync.clear) echo "$RENAME" ;;
  sync.repair.*)
    DOCTX_FAULT=sync.propagate:crash d $RENAME >/dev/null 2>&1
    echo "sync repair --older-than-ms 0" ;;
  *) echo UNKNOWN ;;
  esac
}

check_final() {
  local label=$1 want=bea why
  d sync rule R $RULE_ARGS >/dev/null || { bad "$label: rule R again"; return; }
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean: $(d audit 2>&1 | tail -3)"; return; }
  case "$label" in sync.master:crash | sync.rule:*) want=ann ;; esac
  # Users and comments in one slurp (a comment is what has "user"); jq,
  # not python: this runs for every row of every crash suite.
  why=$(jq -rs --arg want "$want" '
    (map(select(has("user") | not) | {key: ._id, value: .}) | from_entries) as $u |
    (map(select(has("user")) | {key: ._id, value: .}) | from_entries) as $c |
    $u.u1 as $u1 | ($u1._syncm.R.v // 0) as $v |
    [ (if $u1.name != $want then "u1 is \($u1.name), want \($want)" else empty end),
      ($u[] | select((._syncing // {}) | has("R")) | "flag left on \(._id)"),
      ("c1", "c2" | select($c[.].author != $u1.name or ($c[.]._sync.R // 0) != $v)
        | "\(.): \($c[.] | tojson)"),
      (if $c.c3 != {_id: "c3", user: "u2", author: "bob"} then "c3: \($c.c3 | tojson)" else empty end)
    ] | join("; ")' <(d find users) <(d find comments))
  [ -z "$why" ] && ok || bad "$label: $why"
}
