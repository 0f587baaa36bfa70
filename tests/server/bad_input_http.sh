#!/usr/bin/env bash
# bad_input_http.sh -- every row of the CLI's bad-input table
# (tests/cli/bad_input.rows, the same file tests/cli/bad_input.sh runs)
# sent to doctxd as HTTP: each row's argv becomes its route and body
# (bad_input_http.py, which states the translation and the rules for the
# rows it skips), and must answer the CLI's error NAME as problem+json
# `code`, the status of docs/server.md's table for the CLI's exit code, a
# detail holding the row's MENTION, and leave the store as it was (one
# `doctx dump` per group of rows).
#
# ONE doctxd on the suite's store.  Run by ctest on SQLite ($DOCTX set;
# DOCTXD beside it), and by tests/redis/run-redis.sh's shell phase on a
# standalone server and the 3+3 cluster.  Ends with "N passed, M failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib/harness.sh"
source "$HERE/../lib/store.sh"
source "$HERE/lib/server.sh"
TMP=$WORK
new_store badinputhttp
dx() { "$DOCTX" --store "$S" "$@"; }

# The table's `row` records each row (NUL-separated, with a copy of its
# stdin) for the translator; nothing runs here.
ROWS=$WORK/rows.bin
NIN=0
row() {
  local in=
  if [ -n "${ROW_IN:-}" ]; then
    NIN=$((NIN + 1)); in=$WORK/in.$NIN; cp "$ROW_IN" "$in"
  fi
  printf '%s\0' ROW "$1" "$2" "$3" "$in" "${DOCTX_FAULT:-}" $(($# - 4)) \
    "${@:5}" >>"$ROWS"
}

source "$HERE/../cli/bad_input.rows"
bad_input_setup || { bad "setup of the table's store"; finish; exit 1; }
: >"$ROWS"
bad_input_rows
# The cases found before the store is set up, as rows on this store (one
# doctxd; bad_input.sh runs them on a second, empty store too).
for c in "${NOSTORE_CASES[@]}" "${READ_CASES[@]}"; do
  IFS='|' read -r name mention args <<< "$c"
  eval "set -- $args"
  row 2 "$name" "$mention" -- "$@"
done

make_tokens "$WORK/tokens"
start_doctxd "$WORK/doctxd.log" --store "$S" --tokens "$WORK/tokens" \
  --rate 0 --threads 2 || { bad "doctxd start"; finish; exit 1; }

# The translator prints one "ok" / "FAIL: ..." line per check.
while IFS= read -r line; do
  case $line in
    ok) ok ;;
    FAIL:*) bad "${line#FAIL: }" ;;
    "exit 0") ;;
    exit*) bad "the translator ended with $line" ;;
    *) echo "$line" ;;
  esac
done < <(python3 "$HERE/bad_input_http.py" "$ROWS" "$URL" "$T_WRITE" \
  "$T_ADMIN" "$DOCTX" "$S" 2>&1; echo "exit $?")

stop_bg "$DPID" 15 "$WORK/doctxd.log" && ok || bad "doctxd did not stop on SIGTERM"
finish
