# scenarios/fence.sh -- the store's fenced-write point (fence.write, in
# src/store/store_write.c, just before the write's atomic step) for faults.sh
# and pause.sh: a fenced $inc of one document.  After a crash or an
# injected error nothing was written and no token recorded; after a pause
# (and the resume) the write landed once and recorded its token.  A later
# write with an older token is refused with FENCED either way.
# tests/crash/kleppmann.sh pauses here too, with a second lock holder
# acting meanwhile.

scenario_setup() { d insert res '{"_id":"r","v":0}' >/dev/null; }

scenario_cmd() {
  case "$1" in
  fence.write) echo 'update res {"_id":"r"} {"$inc":{"v":1}} --fence L:5' ;;
  *) echo UNKNOWN ;;
  esac
}

check_final() {
  local label=$1 doc v rc
  d audit --settled >/dev/null || { bad "$label: audit not clean"; return; }
  doc=$(d find res '{"_id":"r"}')
  v=$(field "$doc" v)
  case "$label:$v" in
  *:crash:0 | *:error:0)
    [ "$(field "$doc" _fence)" = null ] || { bad "$label: token recorded without the write: $doc"; return; } ;;
  *:pause:1)
    [ "$(field "$doc" _fence)" = '{"L":5}' ] || { bad "$label: token not recorded: $doc"; return; } ;;
  *) bad "$label: v=$v: $doc"; return ;;
  esac
  d update res '{"_id":"r"}' '{"$set":{"v":9}}' --fence L:6 >/dev/null &&
    { d update res '{"_id":"r"}' '{"$set":{"v":7}}' --fence L:5 >/dev/null 2>&1; rc=$?; [ $rc = 3 ]; } ||
    { bad "$label: stale write not FENCED (exit ${rc:-?})"; return; }
  [ "$(field "$(d find res '{"_id":"r"}')" v)" = 9 ] || { bad "$label: stale write changed r"; return; }
  ok
}
