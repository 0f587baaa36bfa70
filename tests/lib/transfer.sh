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

# One field through a projection, read without starting python: these run
# several times per crash scenario.
balance() {
  local j
  j=$(d find accounts "{\"_id\":\"$1\"}" --project '{"_id":0,"balance":1}')
  [[ $j =~ ^\{\"balance\":(-?[0-9]+)\}$ ]] && echo "${BASH_REMATCH[1]}" || echo "?$j"
}
state() { # URI-LABEL ID
  local j
  j=$(d find transfers "{\"_id\":\"$2\"}" --project '{"_id":0,"state":1}' 2>/dev/null)
  if [[ $j =~ ^\{\"state\":\"([a-z_]+)\"\}$ ]]; then echo "${BASH_REMATCH[1]}"; else echo missing; fi
}

