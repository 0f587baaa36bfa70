# txn.sh -- shared pieces of the transfer shell suites (sourced).
#
# Each scenario sets up two accounts A and B (1000 each) and a third, X,
# with no lower limit, in a fresh store, then drives transfer t1 so that
# the named fault point is reached.  check_final proves the invariants
# after recovery: audit --settled clean, t1 terminal, balances matching
# t1's final state exactly.
: "${DOCTX:?DOCTX must point at the doctx binary}"
: "${STORE_URI_BASE:=}"

pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
finish() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

# new_store NAME -> sets $S to a fresh store URI (tests/lib/store.sh).
. "$(dirname "${BASH_SOURCE[0]}")/store.sh"

d() { "$DOCTX" --store "$S" "$@"; }

setup_accounts() {
  d account create A --balance 1000 >/dev/null &&
    d account create B --balance 1000 >/dev/null &&
    d account create X --balance 0 --min-balance none >/dev/null
}

field() { # JSON-text key -> value (strings unquoted)
  python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print(v if not isinstance(v,str) else v)' "$1" "$2"
}

balance() { field "$(d account show "$1")" balance; }
state() { local j; j=$(d transfer show "$2" 2>/dev/null) && field "$j" state || echo missing; }

# The scenario for a point: the command that reaches it, run with $FAULT.
# Prepares whatever the point needs first (without faults).
scenario_cmd() {
  local p=$1
  case "$p" in
  transfer.*) echo "transfer A B 100 --id t1" ;;
  rollback.*) echo "transfer A B 5000 --id t1" ;; # insufficient funds
  cancel.*)
    d transfer A B 100 --id t1 --async >/dev/null
    echo "transfer cancel t1" ;;
  recover.takeover)
    DOCTX_FAULT=transfer.commit:crash d transfer A B 100 --id t1 >/dev/null 2>&1
    echo "recover --older-than-ms 0" ;;
  recover.scan_markers | recover.repair_marker)
    # A late executor whose tombstone was already cleared: t1 failed, then
    # a debit for it lands on A.  Recovery must refund it.
    d transfer A B 5000 --id t1 >/dev/null
    d update accounts '{"_id":"A","pending.tx":{"$ne":"t1"}}' \
      '{"$inc":{"balance":-100},"$push":{"pending":{"tx":"t1","op":"debit","amount":100,"at":0}},"$pull":{"voids":{"tx":"t1"}}}' >/dev/null
    echo "recover --older-than-ms 0" ;;
  recover.clear_tombstone)
    d transfer A B 5000 --id t1 >/dev/null
    sleep 0.01
    echo "recover --older-than-ms 0 --tombstone-ttl-ms 1" ;;
  *) echo "UNKNOWN" ;;
  esac
}

# check_final LABEL: recover, audit, and compare balances with t1's state.
check_final() {
  local label=$1 out st a b
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  if ! out=$(d audit --settled); then
    bad "$label: audit not clean: $out"; return
  fi
  st=$(state "$S" t1)
  a=$(balance A); b=$(balance B)
  case "$st" in
  succeeded) [ "$a" = 900 ] && [ "$b" = 1100 ] || { bad "$label: succeeded but A=$a B=$b"; return; } ;;
  failed) [ "$a" = 1000 ] && [ "$b" = 1000 ] || { bad "$label: failed but A=$a B=$b"; return; } ;;
  missing) # only a crash before the transfer was recorded may leave none
    case "$label" in transfer.submit:*) ;; *) bad "$label: t1 missing"; return ;; esac
    [ "$a" = 1000 ] && [ "$b" = 1000 ] || { bad "$label: nothing recorded but A=$a B=$b"; return; } ;;
  *) bad "$label: t1 is $st, not terminal"; return ;;
  esac
  ok
}
