# transfer.sh -- the accounts and checks the transfer suites share
# (sourced after harness.sh): tests/cli/transfer.sh and the transfer
# scenarios of the crash suites (tests/crash/scenarios/transfer.sh).
#
# setup_accounts makes A and B (1000 each) and X (0, no lower limit).

setup_accounts() {
  d account create A --balance 1000 >/dev/null &&
    d account create B --balance 1000 >/dev/null &&
    d account create X --balance 0 --min-balance none >/dev/null
}

balance() { field "$(d account show "$1")" balance; }
state() { local j; j=$(d transfer show "$2" 2>/dev/null) && field "$j" state || echo missing; }
