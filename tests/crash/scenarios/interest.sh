# scenarios/interest.sh -- how the crash suites (faults.sh, pause.sh)
# reach each interest.* fault point (src/txn/interest/interest.c), and
# what must hold afterwards (the interface is described in
# scenarios/transfer.sh).
#
# Here: A (1000), B (2000) and L (3000; a 120-byte id, whose credit id
# carries its SHA-256: docs/scenarios.md "Credit ids") with limits, X
# (500) without; the day's run at 1% credits A 10, B 20 and L 30 from
# settlement.  The rerun is what finishes an interrupted run: check_final
# recovers, runs the day again twice, and proves: audit --settled clean,
# A 1010, B 2020, L 3030, X 500, settlement -60 -- each credit exactly
# once, and never compounded.
source "$HARNESS_ROOT/tests/lib/transfer.sh" # balance
RUN='interest run --rate-ppm 10000 --day 2026-03-01'
L=$(printf 'l%.0s' {1..120})

scenario_setup() {
  d account create A --balance 1000 >/dev/null &&
    d account create B --balance 2000 >/dev/null &&
    d account create "$L" --balance 3000 >/dev/null &&
    d account create X --balance 500 --min-balance none >/dev/null
}

scenario_cmd() {
  case "$1" in
  interest.settlement | interest.day | interest.credit) echo "$RUN" ;;
  *) echo UNKNOWN ;;
  esac
}

check_final() {
  local label=$1 got
  d recover --older-than-ms 0 >/dev/null || { bad "$label: recover failed"; return; }
  # shellcheck disable=SC2086
  { d $RUN && d $RUN; } >/dev/null || { bad "$label: the reruns failed"; return; }
  d audit --settled >/dev/null || { bad "$label: audit not clean"; return; }
  got="$(balance A) $(balance B) $(balance "$L") $(balance X) $(balance settlement)"
  [ "$got" = "1010 2020 3030 500 -60" ] && ok || bad "$label: balances A B L X settlement: $got"
}
