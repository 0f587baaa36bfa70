# scenarios/batch.sh -- how the crash suites (faults.sh, pause.sh) reach
# the batch.* fault point (src/txn/batchupdate/batchupdate.c), and what must hold
# afterwards (the interface is described in scenarios/transfer.sh).
#
# Here: items i1..i3 (n 0) and i4 outside the FILTER; batch B adds 1 to n
# of every item with a kind.  A batch has nothing for recovery to do: it
# is finished by running it again, so check_final reruns it, then proves:
# every item of the FILTER has n 1 and B's marker, i4 is untouched, and
# the audit is clean.
BATCH='batch-update items {"kind":{"$exists":true}} {"$inc":{"n":1}} --id B'

scenario_setup() {
  d insert items '{"_id":"i1","kind":"a","n":0}' '{"_id":"i2","kind":"a","n":0}' \
    '{"_id":"i3","kind":"b","n":0}' '{"_id":"i4","n":0}' >/dev/null
}

scenario_cmd() {
  case "$1" in
  batch.apply) echo "$BATCH" ;;
  *) echo UNKNOWN ;;
  esac
}

check_final() {
  local label=$1 got
  # shellcheck disable=SC2086
  d $BATCH >/dev/null || { bad "$label: the rerun failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean"; return; }
  got=$(d find items '{}' --sort '{"_id":1}' | jq -rc '[._id, .n, (._batches.B != null)] | @csv' | tr '\n' ' ')
  [ "$got" = '"i1",1,true "i2",1,true "i3",1,true "i4",0,false ' ] && ok || bad "$label: items $got"
}
