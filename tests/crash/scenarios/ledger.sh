# scenarios/ledger.sh -- the ledger's points (src/txn/ledger/) for faults.sh
# and pause.sh.  Set-up: ledger accounts A (min_balance 0) and B (none),
# A funded with 1000 by entry "fund"; the points that resolve or reverse
# an entry get it in the set-up ($p is the calling suite's point).
# Whatever happened (crash, injected error, pause with a recovery pass in
# between), after recovery: audit --settled clean (legs sum to zero,
# caches equal recomputation, seqIds dense and unique, every committed
# entry's predecessors committed, everything committable committed), the
# entry of the point in one of the states the point allows, A's balance
# exactly what that state implies (never applied twice: there is no half
# of one document), and the next post lands on the next seqId.  The
# committer's points get a round of three levels (entries chained on C
# and D beside A's), and D's balance must come out exact too.
# ledger.account.close closes Z (at 0): closed or not after a crash or an
# error, closed after a pause; closed, it refuses a leg.

scenario_setup() {
  d ledger account create A >/dev/null &&
    d ledger account create B --min-balance none >/dev/null &&
    d ledger post B:-1000 A:1000 --id fund >/dev/null || return
  case "${p:-}" in
  ledger.reverse) d ledger post A:-100 B:100 --id e0 >/dev/null ;;
  ledger.pending.*) d ledger post A:-100 B:100 --id p1 --pending >/dev/null ;;
  ledger.account.close) d ledger account create Z >/dev/null ;;
  ledger.expire) d ledger post A:-100 B:100 --id p1 --pending --timeout-ms 1 >/dev/null ;;
  ledger.commit | ledger.cache)
    # A round of three levels for the committer (commit.c): c1 and x1
    # beside fund (one bulk write of two once the claim took fund), c2
    # behind c1 on C and D, c3 behind c2.
    d ledger account create C --min-balance none >/dev/null &&
      d ledger account create D >/dev/null &&
      d ledger account create E --min-balance none >/dev/null &&
      d ledger account create F >/dev/null &&
      d ledger post C:-5 D:5 --id c1 >/dev/null &&
      d ledger post E:-4 F:4 --id x1 >/dev/null &&
      d ledger post C:-6 D:6 --id c2 >/dev/null &&
      d ledger post C:-7 D:7 --id c3 >/dev/null ;;
  esac
}

scenario_cmd() {
  case "$1" in
  ledger.account.create) echo 'ledger account create C' ;;
  ledger.account.limit) echo 'ledger account limit A 100' ;;
  ledger.account.close) echo 'ledger account close Z' ;;
  ledger.post) echo 'ledger post A:-100 B:100 --id e1' ;;
  ledger.reverse) echo 'ledger reverse e0 --id r1' ;;
  ledger.pending.post) echo 'ledger post-pending p1' ;;
  ledger.pending.void) echo 'ledger void p1' ;;
  ledger.pending.partial) echo 'ledger post-pending p1 --amounts A:-40,B:40 --post-id pp' ;;
  ledger.expire | ledger.commit | ledger.cache) echo 'worker --once' ;;
  *) echo UNKNOWN ;;
  esac
}

# The committer's first commit is the claim's, of one entry alone; the
# second is the first step of a level's bulk write (c1 beside x1), the
# step to stop.
scenario_arrival() {
  case "$1" in ledger.commit) echo 2 ;; *) echo 1 ;; esac
}

# The state of entry $1 ("missing" when there is none).
lg_state() {
  local doc
  doc=$(d ledger show "$1" 2>/dev/null) || { echo missing; return; }
  field "$doc" state
}

check_final() {
  local label=$1 st a want seq
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean: $(d audit --settled 2>&1 | tail -3)"; return; }
  a=$(field "$(d ledger balance A)" balance)
  case "$label" in
  ledger.post:*) st=$(lg_state e1)
    case "$st" in posted) want=900 ;; missing) want=1000 ;; *) want=bad ;; esac
    [ "$st" != missing ] || case "$label" in *:crash) ;; *) want=bad ;; esac ;;
  ledger.reverse:*) st=$(lg_state r1)
    case "$st" in posted) want=1000 ;; missing) want=900 ;; *) want=bad ;; esac
    [ "$st" != missing ] || case "$label" in *:crash) ;; *) want=bad ;; esac ;;
  ledger.pending.post:*) st=$(lg_state p1)
    case "$st" in posted) want=900 ;; pending) want=1000 ;; *) want=bad ;; esac
    [ "$st" != pending ] || case "$label" in *:crash) ;; *) want=bad ;; esac ;;
  ledger.pending.void:*) st=$(lg_state p1)
    case "$st" in voided | pending) want=1000 ;; *) want=bad ;; esac
    [ "$st" != pending ] || case "$label" in *:crash) ;; *) want=bad ;; esac ;;
  ledger.pending.partial:*) st=$(lg_state p1) # 40 of the 100 held
    case "$st" in posted) want=960 ;; pending) want=1000 ;; *) want=bad ;; esac
    [ "$st" != pending ] || case "$label" in *:crash) ;; *) want=bad ;; esac ;;
  ledger.expire:*) st=$(lg_state p1) # recovery expires what the worker did not
    case "$st" in expired) want=1000 ;; *) want=bad ;; esac ;;
  ledger.commit:* | ledger.cache:*) st=-; want=1000
    [ "$(field "$(d ledger balance D)" balance)" = 18 ] &&
      [ "$(field "$(d ledger balance F)" balance)" = 4 ] || want="1000, D 18, F 4" ;;
  ledger.account.close:*) want=1000
    if [[ $(d ledger balance Z) == *closed_at* ]]; then
      st=closed
      ! d ledger post B:-1 Z:1 >/dev/null 2>&1 || want="1000 and a closed Z refusing a leg"
    else
      st=open
      case "$label" in *:crash | *:error) ;; *) want="1000 and Z closed" ;; esac
    fi ;;
  *) st=-; want=1000 ;;
  esac
  [ "$a" = "$want" ] || { bad "$label: entry $st, A's balance $a (want $want)"; return; }
  seq=$(field "$(d ledger balance A)" seq)
  d ledger post A:-1 B:1 --id next >/dev/null || { bad "$label: the next post failed"; return; }
  [ "$(field "$(d ledger balance A)" seq)" = $((seq + 1)) ] ||
    { bad "$label: the next post did not take seqId $((seq + 1))"; return; }
  ok
}
