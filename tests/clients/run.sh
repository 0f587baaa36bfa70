#!/usr/bin/env bash
# run.sh [python] [node] -- the clients' own suites against a real doctxd
# (docs/clients.md): clients/python/tests (pytest, Debian python3-pytest)
# and clients/node/test (node:test, Node 18+).  For each suite: a fresh
# store, one doctxd on it without a rate limit, then the suite, which
# starts the other doctxd processes it needs (a rate-limited one, a
# draining one, late ones) from the environment given here:
#   DOCTXD_URL  DOCTXD  DOCTXD_STORE  DOCTXD_TOKENS  T_ADMIN T_WRITE T_READ
#
# ctest runs it on SQLite (clients/python, clients/node); run-redis.sh's
# shell phase on the standalone server (the store from DTX_TEST_STORE_CMD).
# Each suite is bounded (120 s, then killed).  Ends with "N passed, M
# failed", one line per suite.
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/store.sh"
source "$HERE/../server/lib/server.sh"

make_tokens "$WORK/tokens"
export DOCTXD DOCTXD_TOKENS=$WORK/tokens T_ADMIN T_WRITE T_READ
# The clients talk to 127.0.0.1: a proxy from the environment must not
# stand in between.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

pytest_cmd() {
  if command -v pytest-3 >/dev/null; then echo pytest-3; else
    echo "python3 -m pytest"; fi
}

run_suite() { # NAME
  local name=$1 log=$WORK/$1.out rc t0=$SECONDS
  local -a cmd
  case $name in
  python) read -ra cmd <<<"$(pytest_cmd)"
          cmd+=(-q -p no:cacheprovider --durations=5 "$ROOT/clients/python/tests") ;;
  node) cmd=(node --test "$ROOT/clients/node/test/client.test.js") ;;
  *) bad "unknown suite '$name' (python, node)"; return ;;
  esac
  new_store "clients_$name"
  start_doctxd "$WORK/doctxd-$name.log" --store "$S" --tokens "$DOCTXD_TOKENS" \
    --rate 0 --threads 4 || { bad "$name: doctxd did not start"; return; }
  DOCTXD_URL=$URL DOCTXD_STORE=$S PYTHONPATH="$ROOT/clients/python" \
    PYTHONDONTWRITEBYTECODE=1 TMPDIR=$WORK \
    run_bounded 120 "$log" "${cmd[@]}"
  rc=$?
  stop_bg "$DPID" 10 "$WORK/doctxd-$name.log"
  if [ "$rc" -eq 0 ]; then
    ok
    echo "$name: $(grep -E '^[0-9]+ passed|^# (pass|fail) ' "$log" | tr '\n' ' ')($((SECONDS - t0)) s)"
  else
    bad "$name suite: exit $rc"
    log_tail "$log" 60 >&2
    # The failed cases last, where a caller's short tail still shows them.
    grep -E -A12 '^not ok|^ *not ok|^FAILED|^E  ' "$log" | head -60 >&2
  fi
}

for suite in ${*:-python node}; do run_suite "$suite"; done
finish
