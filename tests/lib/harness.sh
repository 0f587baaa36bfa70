# harness.sh -- the shell harness every test suite sources.
#
# It gives a suite:
#   WORK                 a fresh temporary directory, removed on exit
#                        whatever happens (trap), with every process the
#                        suite started through start_bg killed first
#   ok / bad MSG / finish
#                        pass and fail counts, kept in a file so that jobs
#                        run in parallel subshells (run_jobs) count too;
#                        finish prints "N passed, M failed" and fails when
#                        M > 0
#   run_bounded SECS LOG CMD...
#                        runs CMD with stdout and stderr in LOG, killed
#                        after SECS (TERM, then KILL 5 s later); on a
#                        timeout prints the tail of LOG; returns CMD's
#                        status (124 on timeout)
#   start_bg LOG CMD...  starts CMD in the background (stdout and stderr
#                        appended to LOG); BG_PID is its pid, and the exit
#                        trap will not forget it
#   bounded_wait PID SECS LOG
#                        waits for the background PID, at most SECS; on a
#                        timeout prints the tail of LOG, kills it (CONT,
#                        TERM, then KILL) and returns 124; else returns its
#                        exit status
#   stop_bg PID [SECS] [LOG]
#                        SIGTERM, then bounded_wait (default 10 s): a TERM
#                        lost between fork and exec cannot hang the suite
#   wait_stopped PID SECS
#                        waits until PID is stopped (SIGSTOP, a pause fault
#                        point); 0 when it is, 1 when it exited or the time
#                        ran out
#   run_jobs N FUNC ARG...
#                        calls FUNC ARG for every ARG, at most N at a time,
#                        each in its own subshell (each sees WORK/job.ARG,
#                        its own directory); every wait is bounded by
#                        JOB_SECS (default 300)
#   log_tail LOG [N]     the last N (default 20) lines of LOG, indented
#   on_exit CMD...       also runs CMD when the suite exits (e.g. resume a
#                        server it stopped)
#   now_ms               wall-clock milliseconds, for measured waits
#   new_store NAME       sets S to a fresh store URI for one scenario:
#                        sqlite:$WORK/NAME.db, or whatever
#                        $DTX_TEST_STORE_CMD NAME prints (run-redis.sh:
#                        tests/redis/fresh-store.sh, a new namespace)
#   d ARGS...            doctx --store "$S" ARGS...
#   scaffold_without_leak_check
#                        d runs without LeakSanitizer's exit scan (the
#                        crash suites' set-up and checks)
#   field JSON KEY       a top-level field of a JSON text (strings bare)
#   scenario_file POINT  tests/crash/scenarios/PREFIX.sh for a fault point
#                        PREFIX.STEP (the pattern or layer that owns it)
#   fault_points         sets POINTS to the points of `doctx faults` that
#                        match FAULT_ONLY (fails when none) and
#                        POINT_TURN[P] to 0, 1 or 2, by turns down the
#                        whole list: under DTX_QUICK (the sanitizer stage)
#                        each point gets one action, crash (0), error (1)
#                        or pause (2)
#   load_scenario POINT  sources that file (scenario_setup, scenario_cmd,
#                        check_final); 1 when the point has none (a
#                        failure) or the file skips it (says why)
#   scenario_cmd_of POINT
#                        CMD is scenario_cmd POINT's output (no subshell)
#   fault_spec POINT ACTION
#                        FSPEC is DOCTX_FAULT arming it (at the arrival
#                        the scenario's optional scenario_arrival names)
#
# Every wait a suite makes must go through these, so a hang is a failure
# with a log tail, never a stuck CI stage.
: "${DOCTX:?DOCTX must point at the doctx binary}"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/doctx-test.XXXXXX")
HARNESS_RESULTS=$WORK/.results
HARNESS_PIDS=$WORK/.pids
: >"$HARNESS_RESULTS"
: >"$HARNESS_PIDS"
HARNESS_MAIN=$BASHPID
HARNESS_ON_EXIT=()

on_exit() { HARNESS_ON_EXIT+=("$*"); }

harness_cleanup() {
  # Only the suite's own shell cleans up, not a job subshell exiting.
  [ "$BASHPID" = "$HARNESS_MAIN" ] || return 0
  local p c
  for c in "${HARNESS_ON_EXIT[@]}"; do eval "$c"; done
  for p in $(cat "$HARNESS_PIDS" 2>/dev/null); do
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap harness_cleanup EXIT
trap 'exit 130' INT TERM

ok() { echo ok >>"$HARNESS_RESULTS"; }
bad() {
  echo "FAIL: $*" >&2
  echo "FAIL: $*" >>"$HARNESS_RESULTS"
}
# expect CODE LABEL -- command...: runs it with stdout in $WORK/out and
# stderr in $WORK/err; ok when it exits CODE, else bad with both heads.
# (contract.sh has an expect of its own that also compares stdout.)
expect() {
  local want=$1 label=$2
  shift 3
  "$@" >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [ "$rc" -eq "$want" ]; then ok; else
    bad "$label: exit $rc, want $want: $(head -c 400 "$WORK/err") $(head -c 400 "$WORK/out")"
  fi
}
# The stdout of the last expect.
out() { cat "$WORK/out"; }

finish() {
  local pass fail
  pass=$(grep -c '^ok$' "$HARNESS_RESULTS")
  fail=$(grep -c '^FAIL' "$HARNESS_RESULTS")
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }

log_tail() {
  [ -s "$1" ] || { echo "    (log $1 is empty)"; return 0; }
  tail -n "${2:-20}" "$1" | sed 's/^/    | /'
}

run_bounded() { # SECS LOG CMD...
  local secs=$1 log=$2 rc t0=$SECONDS
  shift 2
  timeout -k 5 "$secs" "$@" >"$log" 2>&1
  rc=$?
  # 124: timed out; 137 after the KILL that follows -- unless the command
  # itself died so (a crash fault point exits 137 too): tell them apart by
  # the time it took.
  if [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ $((SECONDS - t0)) -ge "$secs" ]; }; then
    echo "TIMEOUT after ${secs}s: $*" >&2
    log_tail "$log" >&2
    rc=124
  fi
  return "$rc"
}

start_bg() { # LOG CMD...
  local log=$1
  shift
  "$@" >>"$log" 2>&1 &
  BG_PID=$!
  echo "$BG_PID" >>"$HARNESS_PIDS"
}

# nap SECS: sleeps without starting a process -- read's timeout on a FIFO
# that never gets data.  The polling loops below run for the whole of a
# suite beside its work, and on a small machine a `sleep` plus an `awk` per
# turn (a process start is ~10 ms of CPU here) took a fifth of a core.
mkfifo "$WORK/.nap"
exec {HARNESS_NAP_FD}<>"$WORK/.nap"
nap() { read -r -t "$1" -u "$HARNESS_NAP_FD" _ 2>/dev/null || :; }

# proc_state PID: PROC_STATE is the state letter of PID (R, S, T, Z...),
# read from /proc with builtins only; 1 when PID is gone.
proc_state() {
  local line
  { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
  line=${line##*) } # after the command name, which may hold ") "
  PROC_STATE=${line%% *}
  [ -n "$PROC_STATE" ]
}

# 0 while PID is alive and not yet reaped-able (a zombie counts as done).
alive() { proc_state "$1" && [ "$PROC_STATE" != Z ]; }

bounded_wait() { # PID SECS LOG
  local pid=$1 secs=$2 log=${3:-} end
  end=$((SECONDS + secs))
  while alive "$pid" && [ $SECONDS -lt $end ]; do
    nap 0.05
  done
  if alive "$pid"; then
    echo "TIMEOUT: process $pid still running after ${secs}s" >&2
    [ -n "$log" ] && log_tail "$log" >&2
    kill -CONT "$pid" 2>/dev/null
    kill -TERM "$pid" 2>/dev/null
    sleep 1
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 124
  fi
  wait "$pid" 2>/dev/null
}

stop_bg() { # PID [SECS] [LOG]
  kill -TERM "$1" 2>/dev/null
  bounded_wait "$1" "${2:-10}" "${3:-}"
}

wait_stopped() { # PID SECS
  local pid=$1 end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    proc_state "$pid" || return 1
    case $PROC_STATE in T | t) return 0 ;; Z) return 1 ;; esac
    nap 0.01
  done
  return 1
}

# count_running PID...: RUNNING is how many of them are alive (builtins
# only, no subshell).
count_running() {
  local pid
  RUNNING=0
  for pid; do alive "$pid" && RUNNING=$((RUNNING + 1)); done
  return 0
}

run_jobs() { # N FUNC ARG...
  local n=$1 fn=$2 arg pid
  local -a pids=()
  shift 2
  for arg in "$@"; do
    while count_running "${pids[@]}" && [ "$RUNNING" -ge "$n" ]; do
      nap 0.05
    done
    (
      mkdir -p "$WORK/job.$arg"
      "$fn" "$arg" >"$WORK/job.$arg/out" 2>&1
    ) &
    pids+=($!)
    echo "$!" >>"$HARNESS_PIDS"
  done
  for pid in "${pids[@]}"; do
    # A job's own status means nothing (its checks counted through ok and
    # bad); only a job that had to be killed is a failure.
    bounded_wait "$pid" "${JOB_SECS:-300}"
    [ $? -ne 124 ] || bad "job $pid did not finish within ${JOB_SECS:-300}s"
  done
  # Each job's own output, in order, after the fact.
  for arg in "$@"; do
    [ -s "$WORK/job.$arg/out" ] && cat "$WORK/job.$arg/out"
  done
  return 0
}

# ---- stores and scenarios ----------------------------------------------------------

HARNESS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# new_store NAME -> $S (tests/lib/store.sh)
source "$HARNESS_ROOT/tests/lib/store.sh"

d() {
  case $1 in
  recover | worker | audit) "$DOCTX" --store "$S" "$@" ;;
  *) ASAN_OPTIONS=${HARNESS_D_ASAN-${ASAN_OPTIONS:-}} "$DOCTX" --store "$S" "$@" ;;
  esac
}

# scaffold_without_leak_check: from here on, d runs the set-up and the
# reads of a scenario without LeakSanitizer's exit scan, which costs ~90 ms
# of a ~150 ms sanitizer run.  The crash suites call it: they start doctx
# some ten times per row around the one command under test, which they run
# as "$DOCTX", and which keeps every check, as recover, worker and audit do.
# Address and UB checks stay on everywhere.
scaffold_without_leak_check() {
  HARNESS_D_ASAN=${ASAN_OPTIONS:-}
  HARNESS_D_ASAN=${HARNESS_D_ASAN//detect_leaks=1/detect_leaks=0}
}

# field JSON KEY -> the top-level KEY of JSON: strings raw, anything else
# as compact JSON (null when absent).  The scenario checks call this per
# row, so it reads doctx's own compact output with bash alone: a jq start
# costs ~4x this (jq 1.6 compiles its builtins at every start), a python
# start ~50x.  Anything the fast path does not take -- not an object, an
# escape in a string, a fraction or exponent (jq prints those its own
# way) -- goes to jq.  jq 1.6 reads numbers as doubles, exact only up to
# 2^53: read balances near int64 through a projection (lib/transfer.sh's
# balance).
field() {
  local rest=$1 k=$2 key val depth tok
  if [[ $rest != \{* || $rest == *\\* ]]; then
    jq -rc --arg k "$k" '.[$k]' <<<"$rest"
    return
  fi
  rest=${rest:1}
  while [[ $rest =~ ^\"([^\"]*)\": ]]; do
    key=${BASH_REMATCH[1]}
    rest=${rest:${#BASH_REMATCH[0]}}
    case ${rest:0:1} in
    \") # no escapes here, so the string ends at the next quote
      [[ $rest =~ ^\"([^\"]*)\" ]] || break
      val=${BASH_REMATCH[1]} ;;
    \{ | \[) # a nested value: strings and brackets, until depth 0
      val= depth=0
      while [[ $rest =~ ^(\"[^\"]*\"|[][{}]|[^][{}\"]+) ]]; do
        tok=${BASH_REMATCH[0]}
        [[ $tok == \"* || $tok != *[0-9][.eE]* ]] || break # a fraction: jq
        case $tok in \{ | \[) depth=$((depth + 1)) ;; \} | \]) depth=$((depth - 1)) ;; esac
        val+=$tok
        rest=${rest:${#tok}}
        [ "$depth" -gt 0 ] || break
      done
      [ "$depth" -eq 0 ] || break
      [ "$key" = "$k" ] && { printf '%s\n' "$val"; return 0; }
      rest=${rest#,}
      continue ;;
    *) # a number, true, false or null
      [[ $rest =~ ^[^,}]+ ]] || break
      val=${BASH_REMATCH[0]}
      [[ $val =~ ^(-?[0-9]+|true|false|null)$ ]] || break ;;
    esac
    [ "$key" = "$k" ] && { printf '%s\n' "$val"; return 0; }
    rest=${rest:${#BASH_REMATCH[0]}}
    rest=${rest#,}
  done
  # The whole object read without finding KEY: absent.  Stopped early:
  # something the fast path does not know, so jq decides.
  if [ "$rest" = "}" ]; then echo null; else jq -rc --arg k "$k" '.[$k]' <<<"$1"; fi
}

fault_points() {
  local all p i=0
  all=$("$DOCTX" faults) || return 1
  declare -gA POINT_TURN=()
  for p in $all; do POINT_TURN[$p]=$((i % 3)); i=$((i + 1)); done
  POINTS=$(grep -E -- "${FAULT_ONLY:-.}" <<<"$all")
  [ -n "$POINTS" ] || { echo "no fault points"; return 1; }
}

scenario_file() {
  echo "$HARNESS_ROOT/tests/crash/scenarios/${1%%.*}.sh"
}

# fault_spec POINT ACTION: FSPEC is the DOCTX_FAULT value arming POINT:
# the first arrival, or the one the scenario's optional scenario_arrival
# POINT names (a point whose first arrival is not the interesting one,
# e.g. the committer's bulk of a level after the claim's single commit).
fault_spec() {
  local n=1
  if declare -F scenario_arrival >/dev/null; then n=$(scenario_arrival "$1"); fi
  FSPEC="$1:$2"
  [ "$n" = 1 ] || FSPEC="$1:$2:$n"
}

# scenario_cmd_of POINT: CMD is what scenario_cmd prints, read back from a
# file: a $(...) would fork the suite's shell once per row.
scenario_cmd_of() {
  scenario_cmd "$1" >"$WORK/.cmd.$BASHPID"
  CMD=$(<"$WORK/.cmd.$BASHPID")
}

load_scenario() {
  local f why
  f=$(scenario_file "$1")
  [ -f "$f" ] || { bad "$1: no scenario file $f"; return 1; }
  unset -f scenario_skip scenario_arrival
  source "$f"
  if declare -F scenario_skip >/dev/null && why=$(scenario_skip "$1"); then
    echo "skip $1: $why"
    return 1
  fi
}
