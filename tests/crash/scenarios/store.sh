# scenarios/store.sh -- the store layer's own fault points: the steps of a
# bulk write (store/store.h, store/redis/bulk.c).  Sourced per point after
# tests/lib/harness.sh, with $S a fresh store (see scenarios/transfer.sh
# for the interface).
#
# Here: eight documents {_id: i, n: 0, k: 0} with an index on k, and one
# `doctx bulk` of eight updateOne {$inc: {n: 1}, $set: {k: 1}}, one per
# document.  check_final proves, for every point and action, that each
# operation is all or nothing (n is 0 or 1, and the index finds exactly
# the documents whose k moved), and what each action must leave:
#   store.bulk_op   crash: nothing applied (SQLite: the batch's transaction
#                   is lost; Redis: no write of the batch was sent yet);
#                   error: one operation failed alone, the seven others
#                   applied; pause (recovery runs meanwhile): all applied
#   store.bulk_sent (Redis only: the batch's pipelines are out, no reply
#                   read) crash: any subset, each whole; error (every
#                   connection taken as lost, all resent): all applied,
#                   once; pause: all applied
# conformance's bulk topic proves the same inside one program.
scenario_skip() {
  case "$1" in
  store.bulk_sent)
    [ -z "${DTX_REDIS_URI:-}" ] &&
      echo "reached on Redis only (run-redis.sh's shell phase runs it)" ;;
  *) return 1 ;;
  esac
}

# SQLite: store.bulk_op is reached inside the batch's write transaction,
# so the stopped process holds the write lock and recovery can only wait
# for it (up to the 5-minute busy window) -- bound it; it exits 4 (BUSY)
# and the resumed batch then applies whole.
scenario_recover_args() {
  case "$S" in sqlite:*) echo "--deadline-ms 2000" ;; esac
}

scenario_setup() {
  local i docs=()
  for i in 0 1 2 3 4 5 6 7; do docs+=("{\"_id\":$i,\"n\":0,\"k\":0}"); done
  d index bulk '{"k":1}' >/dev/null && d insert bulk "${docs[@]}" >/dev/null
}

scenario_cmd() {
  local f i
  case "$1" in
  store.bulk_op | store.bulk_sent)
    f=$(mktemp "$WORK/bulk.XXXXXX")
    for i in 0 1 2 3 4 5 6 7; do
      echo "{\"updateOne\":{\"filter\":{\"_id\":$i},\"update\":{\"\$inc\":{\"n\":1},\"\$set\":{\"k\":1}}}}"
    done >"$f"
    echo "bulk bulk --file $f" ;;
  *) echo UNKNOWN ;;
  esac
}

check_final() {
  local label=$1 applied want
  # One read of all eight (one jq, not one per field: CI is shared).
  applied=$(d find bulk '{}' | jq -rs '
    if length == 8 and all(.[]; (.n == 0 or .n == 1) and .k == .n)
    then map(.n) | add else "bad \(tojson)" end')
  case "$applied" in [0-8]) ;; *) bad "$label: $applied"; return ;; esac
  # The index must find exactly the documents whose k moved, and no other.
  [ "$(d count bulk '{"k":1}')" = "$applied" ] && [ "$(d count bulk '{"k":0}')" = $((8 - applied)) ] ||
    { bad "$label: $applied applied, the index on k disagrees"; return; }
  case "$label" in
  store.bulk_op:crash) want=0 ;;
  store.bulk_op:error) want=7 ;;
  store.bulk_sent:crash) want=$applied ;;
  *) want=8 ;;
  esac
  [ "$applied" = "$want" ] || { bad "$label: $applied applied, want $want"; return; }
  ok
}
