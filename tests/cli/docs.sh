#!/usr/bin/env bash
# docs.sh -- the README and docs/cli.md tell the truth about the doctx
# command:
#   1. every `$ doctx` example of README.md, then of docs/cli.md, run in
#      order on one fresh store, prints what it shows, with the exit status
#      it shows (volatile fields -- times, expiry stamps, generated ids,
#      owner names -- compared by shape);
#   2. docs/cli.md's command list (between <!-- cli --> markers) names the
#      same commands as `doctx --help`, and for each command the same
#      options as `doctx CMD --help`; the README's CLI section mentions
#      every global option, and it and docs/cli.md only options that exist;
#   3. docs/cli.md's exit-code table is the one `doctx --help` prints
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

# ---- 1. every example -------------------------------------------------------------
# Every fenced block of README.md, then docs/cli.md, holding a `$ doctx`
# line is an example; all of them run in order on one fresh SQLite store
# (./doctx.db in an empty directory, no --store), one doctx process each.
# A command's output is the block's lines up to the next `$` line; `$ cat
# FILE` writes the lines under it to FILE (input for a later example); a
# trailing `# exit N` is the exit status the example promises (else 0).
# Times, expiry stamps, generated ids and owner names differ from run to
# run and are compared by shape.
volatile() { # ISO times, ms stamps (13 digits), generated ids and nonces, owners
  sed -E 's/"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z"/T/g; s/\<1[0-9]{12}\>/T/g;
          s/"[0-9a-f]{24}"/ID/g; s/"owner":"[^"]*"/"owner":O/g'
}
example_blocks() { # FILE: its blocks holding a `$ doctx` line, each after "@@ FILE:LINE"
  awk -v f="$1" '
    /^```/ { if (on) { if (ex) for (i = 1; i <= n; i++) print b[i]; on = 0 }
             else { on = 1; ex = 0; n = 0; b[++n] = "@@ " f ":" NR + 1 }
             next }
    on { b[++n] = $0; if ($0 ~ /^\$ doctx /) ex = 1 }' "$ROOT/$1"
}
{ example_blocks README.md; example_blocks docs/cli.md; } >"$TMP/ex"
mkdir "$TMP/exdir"
: >"$TMP/want"
: >"$TMP/got"
nex=0
into=
unset DOCTX_STORE
PATH="$(cd "$(dirname "$DOCTX")" && pwd):$PATH" # the job example's handler runs doctx
DOCTX=$(cd "$(dirname "$DOCTX")" && pwd)/$(basename "$DOCTX")
cd "$TMP/exdir" || exit 1
while IFS= read -r line; do
  case $line in
  '@@ '*) into= ;;
  '$ doctx '*)
    into=
    nex=$((nex + 1))
    want_rc=0
    [[ $line =~ \#\ exit\ ([0-9]+) ]] && want_rc=${BASH_REMATCH[1]}
    rc=0
    eval "timeout 60 \"\$DOCTX\" ${line#\$ doctx }" >"$TMP/out" 2>&1 || rc=$?
    printf '%s\n' "$line" >>"$TMP/want"
    { printf '%s\n' "$line"; cat "$TMP/out"; } >>"$TMP/got"
    [ "$rc" -eq "$want_rc" ] || echo "(exit $rc where the example says $want_rc)" >>"$TMP/got"
    continue ;;
  '$ cat '*)
    into=${line#\$ cat }
    if [[ ! $into =~ ^[A-Za-z0-9._-]+$ ]]; then
      into=
      printf '%s\n' "$line" >>"$TMP/want"
      printf '%s (FILE: a plain name)\n' "$line" >>"$TMP/got"
      continue
    fi
    : >"$into" ;;
  '$ '*)
    into=
    printf '%s\n' "$line" >>"$TMP/want"
    printf '%s (an example may run only doctx, and cat FILE)\n' "$line" >>"$TMP/got"
    continue ;;
  *)
    printf '%s\n' "$line" >>"$TMP/want"
    [ -z "$into" ] && continue # a command's output: got has the real one
    printf '%s\n' "$line" >>"$into"
    printf '%s\n' "$line" >>"$TMP/got"
    continue ;;
  esac
  printf '%s\n' "$line" >>"$TMP/want"
  printf '%s\n' "$line" >>"$TMP/got"
done <"$TMP/ex"
cd "$ROOT" || exit 1
check "the README and docs/cli.md hold at least 30 examples (found $nex)" \
  "$([ "$nex" -ge 30 ]; echo $?)"
volatile <"$TMP/want" >"$TMP/want.n"
volatile <"$TMP/got" >"$TMP/got.n"
check "every example prints what it shows" \
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
block cli docs/cli.md >"$TMP/cli"
readme_cmds() { awk '$1 == "doctx" { print $2 }' "$TMP/cli" | sort -u; }
options() { grep -oE -- '--[a-z][a-z-]*' | grep -vxE -- '--(help|store)' | sort -u; }
check "doctx --help and docs/cli.md list the same commands" \
  "$(diff <(help_cmds) <(readme_cmds) >/dev/null; echo $?)" \
  "$(diff <(help_cmds) <(readme_cmds))"
for cmd in $(help_cmds); do
  "$DOCTX" "$cmd" --help 2>&1 | options >"$TMP/h.$cmd"
  awk -v c="$cmd" '$1 == "doctx" && $2 == c' "$TMP/cli" | options >"$TMP/r.$cmd"
  check "doctx $cmd: --help and docs/cli.md name the same options" \
    "$(cmp -s "$TMP/h.$cmd" "$TMP/r.$cmd"; echo $?)" \
    "$(diff "$TMP/h.$cmd" "$TMP/r.$cmd")"
done
# Global options: each one --help lists is in the README's CLI section,
# and neither that section nor docs/cli.md names an option the command
# does not have.
sed -n '/^## The CLI/,/^## /p' "$README" >"$TMP/clisection"
for opt in $(sed -n '/^Options:/,/^$/p' "$TMP/help" | grep -oE -- '--[a-z][a-z-]*' | sort -u); do
  check "the README's CLI section mentions $opt" "$(grep -q -- "$opt" "$TMP/clisection"; echo $?)"
done
cat "$TMP/help" "$TMP"/h.* | grep -oE -- '--[a-z][a-z-]*' | sort -u >"$TMP/all"
unknown=$(cat "$TMP/clisection" "$ROOT/docs/cli.md" | grep -oE -- '--[a-z][a-z-]*' |
  sort -u | comm -23 - "$TMP/all")
check "the README's CLI section and docs/cli.md name only real options: ${unknown:-none}" \
  "$([ -z "$unknown" ]; echo $?)"

# ---- 3. exit codes ----------------------------------------------------------------------
readme_exits() {
  block exit-codes docs/cli.md | awk -F'|' '$2 ~ /^ *[0-9] *$/ {
    gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); print $2, $3 }'
}
help_exits() {
  awk '/^Exit codes:/ { on = 1; next } /^Errors are printed/ { on = 0 }
       on && /^  [0-9]  / { if (row) print row; sub(/^  /, ""); sub(/  /, " "); row = $0; next }
       on { sub(/^ +/, ""); row = row " " $0 }
       END { if (row) print row }' "$TMP/help"
}
check "docs/cli.md's exit codes are doctx --help's" \
  "$(diff <(help_exits) <(readme_exits) >/dev/null; echo $?)" \
  "$(diff <(help_exits) <(readme_exits))"
check "seven exit codes are documented" "$([ "$(help_exits | wc -l)" -eq 7 ]; echo $?)"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
