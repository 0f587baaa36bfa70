#!/usr/bin/env bash
# bad_input.sh -- every kind of bad input is refused with the right exit
# code and a "doctx: ERRNAME: detail" line naming what was wrong, and
# leaves the store exactly as it was.
#
# The table (bad_input.rows, which tests/server/bad_input_http.sh sends
# to doctxd as HTTP too) is one `row` per case:
#   row EXIT ERRNAME MENTION -- ARGS...
# MENTION is a string stderr must contain ("" for none).  stdin is
# /dev/null, or the file $ROW_IN (ROW_IN=FILE row ...).  After each row
# the whole store (every collection's documents, indexes and rules) is
# dumped and compared with the dump taken before it -- which is the dump
# taken after the row before, since no row may change the store.
#
# Run by ctest with $DOCTX set to the doctx binary, against a fresh SQLite
# file; run-redis.sh runs it against Redis by setting DTX_TEST_STORE_CMD
# (tests/redis/fresh-store.sh), which hands out a new namespace.  Exits
# non-zero when any check fails and ends with "N passed, N failed".
set -u

DOCTX=${DOCTX:?set DOCTX to the doctx binary}
source "$(dirname "$0")/../lib/harness.sh" # WORK, removed on exit
TMP=$WORK
if [ -n "${DTX_TEST_STORE_CMD:-}" ]; then
  S=$($DTX_TEST_STORE_CMD bad_input) || { echo "no store"; echo "0 passed, 1 failed"; exit 1; }
else
  S="sqlite:$TMP/x.db"
fi
PASS=0
FAIL=0
NROWS=0
# The store is dumped (doctx dump) after every DUMP_EVERY rows and
# compared with the dump before them: a change is still always caught, and
# a group that changed it is named row by row.  Every row under the quick
# (ASan) run would cost minutes of dumps; the release run checks each row.
if [ -n "${DTX_QUICK:-}" ]; then DUMP_EVERY=${DUMP_EVERY:-10}; else DUMP_EVERY=${DUMP_EVERY:-1}; fi
GROUP=()

dx() { "$DOCTX" --store "$S" "$@"; }

dump() { # the whole store in one process: every row compares two of these
  dx dump || echo "dump failed"
}
# The dump the next check compares with, kept in a variable (BEFORE) so a
# check costs one doctx start and no cmp or mv.
BEFORE=
BEFORE_SET=0

fail() {
  FAIL=$((FAIL + 1))
  printf 'FAIL: %s\n' "$1" >&2
  [ -n "${2:-}" ] && printf '%s\n' "$2" | sed 's/^/      /' >&2
  return 0
}

row() {
  local code=$1 name=$2 mention=$3 rc=0 what
  shift 4 # code name mention --
  NROWS=$((NROWS + 1))
  what="doctx $*"
  if [ "$BEFORE_SET" = 0 ]; then
    dump >"$TMP/before"
    BEFORE=$(<"$TMP/before")
    BEFORE_SET=1
  fi
  # A row that names its own --store gets no other (two are refused).
  local store=(--store "$S")
  case " $* " in *" --store "* | *" --store="*) store=() ;; esac
  "$DOCTX" "${store[@]}" "$@" < "${ROW_IN:-/dev/null}" > "$TMP/out" \
    2> "$TMP/err" || rc=$?
  GROUP+=("$what")
  # The checks read the row's output with builtins: a cat and a head per
  # row were two of its six process starts (~10 ms of CPU each here), and
  # the row runs some 300 times per backend.
  local err first
  err=$(<"$TMP/err") # bash 5.2: no fork for $(<FILE)
  first=${err%%$'\n'*}
  local ok=1
  if [ "$rc" -ne "$code" ]; then
    fail "$what: exit $rc, want $code" "stderr: $err"; ok=0
  fi
  if [[ $first != "doctx: $name: "* ]]; then
    fail "$what: stderr does not start with 'doctx: $name: '" "stderr: $err"; ok=0
  fi
  if [ -n "$mention" ] && [[ $err != *"$mention"* ]]; then
    fail "$what: stderr does not mention '$mention'" "stderr: $err"; ok=0
  fi
  if [ -s "$TMP/out" ]; then
    fail "$what: printed on stdout" "stdout: $(<"$TMP/out")"; ok=0
  fi
  if [ "$ok" -eq 1 ]; then PASS=$((PASS + 1)); fi
  if [ $((NROWS % DUMP_EVERY)) -eq 0 ]; then check_store; fi
}

# Compares the store with the dump before the rows run since the last
# check: none of them may have changed it.
check_store() {
  [ "${#GROUP[@]}" -eq 0 ] && return 0
  local after
  dump >"$TMP/after"
  after=$(<"$TMP/after")
  if [ "$after" != "$BEFORE" ]; then
    printf '%s\n' "$BEFORE" >"$TMP/before"
    fail "the store changed during: $(printf '\n  %s' "${GROUP[@]}")" \
      "$(diff "$TMP/before" "$TMP/after")"
    PASS=$((PASS - 1)) # count the group as one failure, not a pass
  fi
  BEFORE=$after
  GROUP=()
}

# ---- the store every row runs against, and the table ------------------------------
# One table, two drivers: tests/cli/bad_input.rows holds the setup, the
# rows and the NOSTORE / READ cases; tests/server/bad_input_http.sh sends
# the same rows to doctxd as HTTP.
source "$(dirname "$0")/bad_input.rows"
if ! bad_input_setup; then
  echo "setup failed" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
bad_input_rows
check_store

# The cases themselves are in bad_input.rows (NOSTORE_CASES, READ_CASES).
if [ -z "${DTX_TEST_STORE_CMD:-}" ]; then
  NONE=$TMP/none.db
  for c in "${NOSTORE_CASES[@]}" "UNAVAILABLE|no store at|rules c"; do
    IFS='|' read -r name mention args <<< "$c"
    want=2; [ "$name" = UNAVAILABLE ] && want=4
    eval "set -- $args"
    rm -f "$NONE"*
    rc=0
    "$DOCTX" --store "sqlite:$NONE" "$@" < /dev/null > "$TMP/out" 2> "$TMP/err" || rc=$?
    if [ "$rc" -ne "$want" ] || [ -e "$NONE" ] ||
       [[ $(head -n 1 "$TMP/err") != "doctx: $name: "*"$mention"* ]]; then
      fail "doctx $args on a path with no store: exit $rc (want $want), file $( [ -e "$NONE" ] && echo CREATED || echo absent)" \
        "stderr: $(<"$TMP/err")"
    else
      PASS=$((PASS + 1))
    fi
  done
  S="sqlite:$TMP/second.db"
else
  S=$($DTX_TEST_STORE_CMD bad_input_second) || { fail "no second store"; S=; }
fi
if [ -n "$S" ] && dx account create A --balance 10 > /dev/null; then
  BEFORE_SET=0
  for c in "${NOSTORE_CASES[@]}" "${READ_CASES[@]}"; do
    IFS='|' read -r name mention args <<< "$c"
    eval "set -- $args"
    row 2 "$name" "$mention" -- "$@"
    check_store # each case alone: the one that set something up is named
  done
  # The batched post reads before it sets the ledger up, as the single
  # one: a batch naming only unknown accounts says so per line (stdout)
  # and installs nothing.
  printf '%s\n' '{"legs":[{"account":"X","value":-1},{"account":"Y","value":1}]}' >"$TMP/pm"
  rc=0
  "$DOCTX" --store "$S" ledger post-many --file "$TMP/pm" >"$TMP/out" 2>&1 || rc=$?
  GROUP+=("doctx ledger post-many (unknown accounts only)")
  if [ "$rc" -eq 2 ] && grep -q '"NOACCOUNT"' "$TMP/out"; then
    PASS=$((PASS + 1))
  else
    fail "ledger post-many of unknown accounts: exit $rc, want 2" "$(<"$TMP/out")"
  fi
  check_store
else
  fail "the second store: account create failed"
fi

# The table must stay big enough to mean something.
if [ "$NROWS" -lt 40 ]; then fail "only $NROWS rows in the table"; fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
