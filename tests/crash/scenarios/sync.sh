# scenarios/sync.sh -- how the crash suites (faults.sh, pause.sh) reach
# each sync.* fault point (src/txn/sync/sync.c), and what must hold
# afterwards (the interface is described in scenarios/transfer.sh).
#
# Here: rule R copies users.name into comments.author (link: user), and
# rule P copies the same users.name into posts.by (docs/sync.md "Rules
# sharing a master"); u1 "ann" has comments c1 and c2 and post p1, u2
# "bob" has c3.  The command renames u1 to "bea" through R (sync.repair.*
# first leave that change's flags behind with a crash mid-propagation,
# then repair them).  check_final defines R again (a no-op, or the define
# a crash cut short), recovers, and proves: audit --settled clean; no flag
# left; c1, c2 (R) and p1 (P) carry u1's name at u1's versions; c3
# untouched; u1 renamed unless the fault struck before the master step (a
# crash at sync.master; an injected error there is retried).
RULE_ARGS="--master users --dependents comments --link user --copy name:author"
RENAME='sync update R u1 {"$set":{"name":"bea"}}'

scenario_setup() {
  d insert users '{"_id":"u1","name":"ann"}' '{"_id":"u2","name":"bob"}' >/dev/null &&
    d insert comments '{"_id":"c1","user":"u1","author":"ann"}' \
      '{"_id":"c2","user":"u1","author":"ann"}' \
      '{"_id":"c3","user":"u2","author":"bob"}' >/dev/null &&
    d insert posts '{"_id":"p1","user":"u1","by":"ann"}' >/dev/null &&
    d sync rule P --master users --dependents posts --link user --copy name:by >/dev/null || return
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
  # Users, comments and posts in one slurp (a comment has "author", a
  # post "by"); jq, not python: this runs for every row of every crash
  # suite.
  why=$(jq -rs --arg want "$want" '
    (map(select(has("user") | not) | {key: ._id, value: .}) | from_entries) as $u |
    (map(select(has("author")) | {key: ._id, value: .}) | from_entries) as $c |
    (map(select(has("by")) | {key: ._id, value: .}) | from_entries) as $p |
    $u.u1 as $u1 | ($u1._syncm.R.v // 0) as $v | ($u1._syncm.P.v // 0) as $vp |
    [ (if $u1.name != $want then "u1 is \($u1.name), want \($want)" else empty end),
      ($u[] | select((._syncing // {}) | (has("R") or has("P"))) | "flag left on \(._id)"),
      ("c1", "c2" | select($c[.].author != $u1.name or ($c[.]._sync.R // 0) != $v)
        | "\(.): \($c[.] | tojson)"),
      (if $p.p1.by != $u1.name or ($p.p1._sync.P // 0) != $vp then "p1: \($p.p1 | tojson)" else empty end),
      (if $c.c3 != {_id: "c3", user: "u2", author: "bob"} then "c3: \($c.c3 | tojson)" else empty end)
    ] | join("; ")' <(d find users) <(d find comments) <(d find posts))
  [ -z "$why" ] && ok || bad "$label: $why"
}
