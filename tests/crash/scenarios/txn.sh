# scenarios/txn.sh -- the multi-document transactions' points
# (src/txn/multi/, docs/transactions.md) for faults.sh and pause.sh (the
# interface: scenarios/transfer.sh).
# Set-up: accounts A and B (collection acct) with 10 each.  The command
# moves 5 from A to B in one transaction t1 (a record: two documents and
# an id) with a 300 ms lease; txn.commit1 moves 5 within A's own document
# (one write, no id: no record); txn.validate is a read-only serializable
# read of both; the points of cleaning (abort, clear) recover after a
# transaction that crashed at its commit point, with its intents written;
# txn.gc recovers after a finished one, with a retention of 1 ms;
# txn.gc.version and txn.gc.tombstone after t1 and the insert and delete
# of C, their versions aged past the horizon by hand.
# After recovery, whatever happened: audit --settled clean (no pending
# record, no intent left); A + B = 20; A is 5 exactly when t1 committed
# (doctx txn show t1, which is final after recovery) and 10 otherwise;
# a plain update of A and B is allowed again (no intent), and the next
# transaction commits.
MOVE='[{"find_one":"acct","filter":{"_id":"A"},"as":"a"},{"require":"a","filter":{"bal":{"$gte":5}}},{"update":"acct","filter":{"_id":"A"},"with":{"$inc":{"bal":-5}}},{"update":"acct","filter":{"_id":"B"},"with":{"$inc":{"bal":5}}}]'
SELF='[{"update":"acct","filter":{"_id":"A"},"with":{"$inc":{"bal":-5,"spent":5}}}]'
READ='[{"find_one":"acct","filter":{"_id":"A"},"as":"a"},{"find_one":"acct","filter":{"_id":"B"},"as":"b"}]'

scenario_setup() {
  d insert acct '{"_id":"A","bal":10}' >/dev/null &&
    d insert acct '{"_id":"B","bal":10}' >/dev/null
}

scenario_cmd() {
  case "$1" in
  txn.commit1) echo "txn $SELF" ;;
  txn.validate) echo "txn --isolation serializable $READ" ;;
  txn.abort | txn.clear)
    DOCTX_FAULT=txn.commit:crash d txn --id t1 --lease-ms 300 "$MOVE" >/dev/null 2>&1
    echo "recover --older-than-ms 0" ;;
  txn.gc)
    d txn --id t1 "$MOVE" >/dev/null
    echo "recover --retention-ms 1" ;;
  txn.gc.version | txn.gc.tombstone)
    # A and B keep their previous versions, C is a tombstone; all are
    # made older than the horizon by hand (a bypass write of _txn.t)
    d txn --id t1 "$MOVE" >/dev/null
    d txn '[{"insert":"acct","doc":{"_id":"C","bal":0}}]' >/dev/null
    d txn '[{"delete":"acct","filter":{"_id":"C"}}]' >/dev/null
    d update --many --bypass-validation acct '{}' '{"$set":{"_txn.t":1}}' >/dev/null
    echo "recover" ;;
  txn.*) echo "txn --id t1 --lease-ms 300 $MOVE" ;;
  *) echo UNKNOWN ;;
  esac
}

check_final() {
  local label=$1 a b out spent
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean: $(d audit --settled 2>&1 | grep -i finding | head -3)"; return; }
  a=$(field "$(d find acct '{"_id":"A"}')" bal)
  b=$(field "$(d find acct '{"_id":"B"}')" bal)
  spent=$(field "$(d find acct '{"_id":"A"}')" spent)
  [ "$spent" != null ] || spent=0
  case "$label" in
  txn.commit1:*)
    # One document: 5 left A into "spent", all or nothing.
    [ $((a + $spent)) = 10 ] && [ "$b" = 10 ] || { bad "$label: A $a spent $spent B $b"; return; } ;;
  txn.gc:*) # t1 committed before; its record may be collected (show would fence)
    [ "$a" = 5 ] && [ "$b" = 15 ] || { bad "$label: A $a B $b after t1"; return; } ;;
  txn.gc.*) # the horizon's collection (T11): the same, C's tombstone gone
    [ "$a" = 5 ] && [ "$b" = 15 ] || { bad "$label: A $a B $b after t1"; return; }
    [ -z "$(d find acct '{"_id":"C"}')" ] || { bad "$label: C's tombstone left: $(d find acct '{"_id":"C"}')"; return; } ;;
  txn.validate:*)
    [ "$a" = 10 ] && [ "$b" = 10 ] || { bad "$label: a read changed A $a B $b"; return; } ;;
  *)
    [ $((a + b)) = 20 ] || { bad "$label: money made or lost: A $a B $b"; return; }
    out=$(d txn show t1) || { bad "$label: txn show t1 failed"; return; }
    case "$(field "$out" outcome)" in
    committed) [ "$a" = 5 ] || { bad "$label: t1 committed but A $a"; return; } ;;
    aborted) [ "$a" = 10 ] || { bad "$label: t1 aborted but A $a"; return; } ;;
    *) bad "$label: t1 still unknown after recovery: $out"; return ;;
    esac ;;
  esac
  d update acct '{"_id":"B"}' '{"$inc":{"n":1}}' >/dev/null || { bad "$label: B still holds an intent"; return; }
  d txn "$MOVE" >/dev/null || { bad "$label: the next transaction failed"; return; }
  ok
}
