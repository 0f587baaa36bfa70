# tests/lib/job.sh -- what the job suites (tests/cli/job*.sh) share, on
# top of harness.sh (sourced first).
jget() { # jget JSON KEY... -> the value at that path (strings raw, others compact JSON)
  # One key: harness.sh's field, the same answer read with bash alone (it
  # hands to jq whatever it does not take): the job suites poll a job's
  # state this way, and a jq start costs about four doctx starts' CPU.
  if [ $# -eq 2 ]; then field "$1" "$2"; return; fi
  local j=$1; shift
  jq -rc 'getpath($ARGS.positional)' --args "$@" <<<"$j"
}
state() { jget "$(d job show "$1")" state; } # state ID -> the job's state
export DOCTX
