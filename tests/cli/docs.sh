#!/usr/bin/env bash
# docs.sh -- the README tells the truth about the doctx command:
#   1. the quick start's commands, run on a fresh store, print what the
#      README shows (volatile fields -- times, the executor's name --
#      compared by shape);
#   2. the README's command list (between <!-- cli --> markers) names the
#      same commands as `doctx --help`, and for each command the same
#      options as `doctx CMD --help`; the CLI section mentions only options
#      that exist, and every global option;
#   3. the README's exit-code table is the one `doctx --help` prints
#      (both come from src/cli/util.c's table).
#
# Run by ctest with $DOCTX set; ends with "N passed, N failed".
set -u
DOCTX=${DOCTX:?set DOCTX to the doctx binary}
. "$(dirname "$0")/../lib/readme.sh"
source "$(dirname "$0")/../lib/harness.sh" # WORK, removed on exit
TMP=$WORK
PASS=0
FAIL=0
check() { # DESCRIPTION RESULT(0/1) [DETAIL]
  if [ "$2" -eq 0 ]; then PASS=$((PASS + 1)); else
    FAIL=$((FAIL + 1))
    echo "FAIL: $1" >&2
    [ -n "${3:-}" ] && printf '%s\n' "$3" | sed 's/^/      /' >&2
  fi
  return 0
}

# ---- 1. the quick start ----------------------------------------------------------
# Times, the lease and the executor's name differ from run to run.
volatile() {
  sed -E 's/"(created|updated|lease_until)":("[^"]*"|[0-9]+)/"\1":T/g;
          s/"owner":"[^"]*"/"owner":O/g'
}
block quickstart >"$TMP/qs"
check "the README has a quick start block" "$([ -s "$TMP/qs" ]; echo $?)"
mkdir "$TMP/qsdir"
ncmd=0
: >"$TMP/want"
: >"$TMP/got"
while IFS= read -r line; do
  if [[ $line == '$ doctx '* ]]; then
    ncmd=$((ncmd + 1))
    printf '%s\n' "$line" >>"$TMP/want"
    printf '%s\n' "$line" >>"$TMP/got"
    read -ra args <<<"${line#\$ doctx }"
    (cd "$TMP/qsdir" && env -u DOCTX_STORE timeout 60 "$DOCTX" "${args[@]}") \
      >>"$TMP/got" 2>&1
  else
    printf '%s\n' "$line" >>"$TMP/want"
  fi
done <"$TMP/qs"
check "the quick start runs five commands (found $ncmd)" "$([ "$ncmd" -eq 5 ]; echo $?)"
volatile <"$TMP/want" >"$TMP/want.n"
volatile <"$TMP/got" >"$TMP/got.n"
check "the quick start prints what the README shows" \
  "$(cmp -s "$TMP/want.n" "$TMP/got.n"; echo $?)" "$(diff "$TMP/want.n" "$TMP/got.n")"

# ---- 2. commands and options ------------------------------------------------------
"$DOCTX" --help >"$TMP/help"
help_cmds() {
  awk '/^Document commands:/ { doc = 1; next }
       /^Transaction commands/ { txn = 1; doc = 0; next }
       doc && /^  [a-z]/ { print $1 }
       doc && /^$/ { doc = 0 }
       txn { gsub(/[ ,]+/, "\n"); print; txn = 0 }' "$TMP/help" | grep . | sort -u
}
block cli >"$TMP/cli"
readme_cmds() { awk '$1 == "doctx" { print $2 }' "$TMP/cli" | sort -u; }
options() { grep -oE -- '--[a-z][a-z-]*' | grep -vxE -- '--(help|store)' | sort -u; }
check "doctx --help and the README list the same commands" \
  "$(diff <(help_cmds) <(readme_cmds) >/dev/null; echo $?)" \
  "$(diff <(help_cmds) <(readme_cmds))"
for cmd in $(help_cmds); do
  "$DOCTX" "$cmd" --help 2>&1 | options >"$TMP/h.$cmd"
  awk -v c="$cmd" '$1 == "doctx" && $2 == c' "$TMP/cli" | options >"$TMP/r.$cmd"
  check "doctx $cmd: --help and the README name the same options" \
    "$(cmp -s "$TMP/h.$cmd" "$TMP/r.$cmd"; echo $?)" \
    "$(diff "$TMP/h.$cmd" "$TMP/r.$cmd")"
done
# Global options: each one --help lists is in the README's CLI section,
# and that section names no option the command does not have.
sed -n '/^## The CLI/,/^## /p' "$README" >"$TMP/clisection"
for opt in $(sed -n '/^Options:/,/^$/p' "$TMP/help" | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
  check "the README's CLI section mentions $opt" "$(grep -q -- "$opt" "$TMP/clisection"; echo $?)"
done
cat "$TMP/help" "$TMP"/h.* | grep -oE -- '--[a-z][a-z-]*' | sort -u >"$TMP/all"
unknown=$(grep -oE -- '--[a-z][a-z-]*' "$TMP/clisection" | sort -u | comm -23 - "$TMP/all")
check "the README's CLI section names only real options: ${unknown:-none}" \
  "$([ -z "$unknown" ]; echo $?)"

# ---- 3. exit codes ----------------------------------------------------------------------
readme_exits() {
  block exit-codes | awk -F'|' '$2 ~ /^ *[0-9] *$/ {
    gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); print $2, $3 }'
}
help_exits() {
  awk '/^Exit codes:/ { on = 1; next } /^Errors are printed/ { on = 0 }
       on && /^  [0-9]  / { if (row) print row; sub(/^  /, ""); sub(/  /, " "); row = $0; next }
       on { sub(/^ +/, ""); row = row " " $0 }
       END { if (row) print row }' "$TMP/help"
}
check "the README's exit codes are doctx --help's" \
  "$(diff <(help_exits) <(readme_exits) >/dev/null; echo $?)" \
  "$(diff <(help_exits) <(readme_exits))"
check "six exit codes are documented" "$([ "$(help_exits | wc -l)" -eq 6 ]; echo $?)"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
