# tests/lib/job.sh -- what the job suites (tests/cli/job*.sh) share, on
# top of harness.sh (sourced first).
jget() { # jget JSON KEY... -> the value at that path (strings raw, others compact JSON)
  local j=$1; shift
  jq -rc 'getpath($ARGS.positional)' --args "$@" <<<"$j"
}
state() { jget "$(d job show "$1")" state; } # state ID -> the job's state
export DOCTX
