# scenarios/order.sh -- the order pattern's points (src/txn/order/) for
# faults.sh and pause.sh.  Set-up: account U, order T1 (100 to U, pending;
# its create makes the settlement account).  The confirm points are
# reached by `order confirm T1`; order.takeover by recovery of an order
# whose confirm crashed before its credit; order.retry by recovery of an
# order whose credit crashed mid-transfer (transfer recovery rolls the
# transfer back, order recovery makes attempt 2).  After recovery: audit
# --settled clean (every order credited exactly as its state says,
# conservation over the accounts), and then the callback delivered once
# more must exit 0 and leave T1 success with U credited exactly once --
# wherever the crash, error or pause was.

scenario_setup() {
  d account create U >/dev/null &&
    d order create T1 --account U --amount 100 >/dev/null
}

scenario_cmd() {
  case "$1" in
  order.create) echo 'order create T2 --account U --amount 50' ;;
  order.cancel) echo 'order cancel T1' ;;
  order.takeover)
    DOCTX_FAULT=order.credit:crash d order confirm T1 >/dev/null 2>&1
    echo 'recover --older-than-ms 0' ;;
  order.retry)
    DOCTX_FAULT=transfer.debit:crash d order confirm T1 >/dev/null 2>&1
    echo 'recover --older-than-ms 0' ;;
  order.*) echo 'order confirm T1' ;;
  *) echo UNKNOWN ;;
  esac
}

# The state of order $1 ("missing" when there is none).
order_state() {
  local doc
  doc=$(d order show "$1" 2>/dev/null) || { echo missing; return; }
  field "$doc" state
}

check_final() {
  local label=$1 st u want=100
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean: $(d audit --settled 2>&1 | tail -3)"; return; }
  case "$label" in
  order.create:*) want=0 st=$(order_state T2)
    case "$st:$label" in pending:* | missing:*:crash) ;; *) bad "$label: T2 is $st"; return ;; esac ;;
  order.cancel:*) want=0 st=$(order_state T1)
    case "$st" in pending | canceled) ;; *) bad "$label: T1 is $st"; return ;; esac ;;
  *) # the callback again: exit 0, nothing credited twice
    d order confirm T1 >/dev/null || { bad "$label: the callback again failed: $(d order show T1)"; return; }
    st=$(order_state T1)
    [ "$st" = success ] || { bad "$label: T1 is $st after the callback"; return; } ;;
  esac
  u=$(field "$(d find accounts '{"_id":"U"}')" balance)
  [ "$u" = "$want" ] && ok || bad "$label: T1 $st, U's balance $u (want $want)"
}
