# scenarios/version.sh -- the versioned documents' points (src/txn/version/)
# for faults.sh and pause.sh (the interface: scenarios/transfer.sh).
# Set-up: item I at version 1, root {"n":1,"sum":2}, children a and b
# ({"x":1} each); "sum" is the checksum of the tree (sum of the children's
# x).  The command writes version 2 ({"n":2,"sum":3}, a={"x":2}, b carried
# over), creates item J (version.root), or -- for the points of cleaning
# -- recovers after a writer crashed with version 2 reserved and its
# record written, or trims I to one version (version.gc).
# After recovery, whatever happened: audit --settled clean (root and log
# agree, every committed version's record and children exist, nothing
# uncommitted visible, no reservation or garbage left); I reads as ONE
# whole version (root n, children and checksum agree): version 1 when the
# writer crashed before its commit or its version was abandoned, version 2
# otherwise (an injected error is retried; a paused writer whose
# reservation recovery abandoned loses and writes again); and the next
# writer commits cleanly on a fresh number (never the abandoned 2).
PUT2='version put I {"n":2,"sum":3} --child a={"x":2}'

scenario_setup() {
  d version put I '{"n":1,"sum":2}' --child a='{"x":1}' --child b='{"x":1}' >/dev/null
}

scenario_cmd() {
  case "$1" in
  version.root) echo 'version put J {"n":1} --child a={"x":1}' ;;
  version.reserve | version.record | version.child | version.commit) echo "$PUT2" ;;
  version.abandon | version.mark | version.delete | version.trash)
    # shellcheck disable=SC2086
    DOCTX_FAULT=version.child:crash d $PUT2 >/dev/null 2>&1
    echo "recover --older-than-ms 0" ;;
  version.gc)
    # shellcheck disable=SC2086
    d $PUT2 >/dev/null
    echo "version gc --keep 1 --grace-ms 0" ;;
  *) echo UNKNOWN ;;
  esac
}

# Prints what is wrong with tree $1 (a `version get` line), or nothing.
vr_whole() {
  jq -r 'if .root.sum == ([.children[].x] | add) and .children.a.x == .root.n
         then empty else "mixed tree: \(tojson)" end' <<<"$1"
}

check_final() {
  local label=$1 out n v want=2 fresh=2 why
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean: $(d audit --settled 2>&1 | grep FINDING | head -3)"; return; }
  case "$label" in
  version.root:crash) want=1
    ! d version get J >/dev/null 2>&1 || { bad "$label: J visible after a crash before its commit"; return; } ;;
  version.root:*) want=1
    [ "$(d version get J | jq -c .children)" = '{"a":{"x":1}}' ] || { bad "$label: J not written"; return; } ;;
  version.reserve:crash) want=1 ;;
  version.record:crash | version.child:crash | version.commit:crash) want=1 fresh=3 ;;
  version.abandon:* | version.mark:* | version.delete:* | version.trash:*) want=1 fresh=3 ;;
  esac
  out=$(d version get I) || { bad "$label: get I failed"; return; }
  why=$(vr_whole "$out")
  n=$(jq .root.n <<<"$out")
  [ -z "$why" ] && [ "$n" = "$want" ] || { bad "$label: I is ${why:-version with n=$n, want n=$want}"; return; }
  out=$(d version put I "{\"n\":$n,\"sum\":$((n + 9))}" --child b='{"x":9}') ||
    { bad "$label: the next put failed"; return; }
  v=$(field "$out" version)
  [ "$v" -ge "$fresh" ] || { bad "$label: the next put took version $v (want >= $fresh)"; return; }
  ok
}
