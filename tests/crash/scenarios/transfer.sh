# scenarios/transfer.sh -- how the crash suites (faults.sh, pause.sh) reach
# each transfer.* fault point, and what must hold afterwards.  Sourced in
# a fresh subshell per point, after tests/lib/harness.sh, with $S a fresh
# store.  The interface every scenario file provides:
#   scenario_setup        prepares the store (0 on success)
#   scenario_cmd POINT    prepares what POINT needs (without faults) and
#                         prints the doctx arguments that reach it
#   check_final LABEL     recovers and checks every invariant; ok or bad
# and, optionally, scenario_skip POINT (prints why, returns 0) for points
# another suite covers.
#
# Here: accounts A and B (1000 each) and X (no lower limit); transfer t1
# is driven to the point (at transfer.register*, account N is created; at
# transfer.account.limit, A's limit is set to 500).  check_final proves, after recovery: audit
# --settled clean, t1 terminal, balances exactly matching t1's end.
# transfer.batch.split: `transfer batch` of t1 (A->B 100) and t2 (A->B
# 5000, declined for funds), so t2 leaves the lockstep while t1 is in it;
# check_final then proves both terminal, t2 failed, balances exact.
source "$HARNESS_ROOT/tests/lib/transfer.sh"

scenario_setup() { setup_accounts; }

scenario_cmd() {
  local p=$1
  case "$p" in
  transfer.rollback.*) echo "transfer A B 5000 --id t1" ;; # insufficient funds
  transfer.claim) # a synchronous transfer is recorded already claimed
    d transfer A B 100 --id t1 --async >/dev/null
    echo "worker --once" ;;
  transfer.debit_mark.done) # the pair: A refuses the debit, B is marked
    echo "transfer A B 5000 --id t1" ;;
  transfer.batch.split) # t2 is declined: it leaves the lockstep
    local f=$WORK/batch.$BASHPID.jsonl
    printf '%s\n' '{"from":"A","to":"B","amount":100,"id":"t1"}' \
      '{"from":"A","to":"B","amount":5000,"id":"t2"}' >"$f"
    echo "transfer batch --file $f" ;;
  transfer.cancel.*)
    d transfer A B 100 --id t1 --async >/dev/null
    echo "transfer cancel t1" ;;
  transfer.recover.takeover)
    DOCTX_FAULT=transfer.commit:crash d transfer A B 100 --id t1 >/dev/null 2>&1
    echo "recover --older-than-ms 0" ;;
  transfer.recover.scan_markers | transfer.recover.repair_marker)
    # A late executor whose tombstone was already cleared: t1 failed, then
    # a debit for it lands on A (written past the rules: a plain write may
    # not move money).  Recovery must refund it.
    d transfer A B 5000 --id t1 >/dev/null
    d update accounts '{"_id":"A","pending.tx":{"$ne":"t1"}}' \
      '{"$inc":{"balance":-100},"$push":{"pending":{"tx":"t1","op":"debit","amount":100,"at":0}},"$pull":{"voids":{"tx":"t1"}}}' \
      --bypass-validation >/dev/null
    echo "recover --older-than-ms 0" ;;
  transfer.recover.clear_tombstone)
    # Tombstones come only from a rollback by someone other than the
    # executor (here a cancel of a claimed transfer whose executor died);
    # a decline leaves none.
    DOCTX_FAULT=transfer.mark_payee:crash d transfer A B 100 --id t1 >/dev/null 2>&1
    d transfer cancel t1 >/dev/null
    sleep 0.01
    echo "recover --older-than-ms 0 --tombstone-ttl-ms 1" ;;
  transfer.register | transfer.registered) echo "account create N --balance 50" ;;
  transfer.account.limit) echo "account limit A 500" ;; # A holds 1000: it fits
  transfer.*) echo "transfer A B 100 --id t1" ;;
  *) echo "UNKNOWN" ;;
  esac
}

check_final() {
  local label=$1 out st a b
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  if ! out=$(d audit --settled); then
    bad "$label: audit not clean: $out"; return
  fi
  st=$(state "$S" t1)
  a=$(balance A); b=$(balance B)
  case "$label" in
  transfer.batch.split:*) # t2 never fits: it must have failed
    local st2
    st2=$(state "$S" t2)
    [ "$st2" = failed ] || { bad "$label: t2 is $st2, not failed"; return; } ;;
  esac
  case "$st" in
  succeeded) [ "$a" = 900 ] && [ "$b" = 1100 ] || { bad "$label: succeeded but A=$a B=$b"; return; } ;;
  failed) [ "$a" = 1000 ] && [ "$b" = 1000 ] || { bad "$label: failed but A=$a B=$b"; return; } ;;
  missing) # only a crash before the transfer was recorded may leave none
    case "$label" in
    transfer.submit:*) ;;
    transfer.account.limit:*) # set or not, never half: 0 before, 500 after
      case "$(d find accounts '{"_id":"A"}' --project '{"min_balance":1,"_id":0}')" in
      '{"min_balance":0}' | '{"min_balance":500}') ;;
      *) bad "$label: A's limit: $(d find accounts '{"_id":"A"}')"; return ;;
      esac ;;
    transfer.register*:*) # account creation: N exists, registered
      [ "$(balance N)" = 50 ] && [ "$(d count openings '{"_id":"N","opening_balance":50}')" = 1 ] &&
        [ "$(d count accounts '{"unregistered":{"$exists":true}}')" = 0 ] ||
        { bad "$label: N not created and registered: $(d find accounts '{"_id":"N"}')"; return; } ;;
    *) bad "$label: t1 missing"; return ;;
    esac
    [ "$a" = 1000 ] && [ "$b" = 1000 ] || { bad "$label: nothing recorded but A=$a B=$b"; return; } ;;
  *) bad "$label: t1 is $st, not terminal"; return ;;
  esac
  ok
}
