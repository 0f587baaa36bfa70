#!/usr/bin/env bash
# install.sh -- an install is usable from any prefix: `cmake --install
# BUILD --prefix P` into a temporary P, then the C example of docs/api.md (the
# block between <!-- example:c --> markers) is built with
# `cc $(pkg-config --cflags --libs doctx)` against P alone, run in an
# empty directory, and must print its output block
# (<!-- example:c:output -->).  The temporary prefix is removed on exit.
#
# Run by ctest with $DOCTX and $DTX_BUILD (the build directory) set; ends
# with "N passed, N failed".  Every step is bounded by timeout.
set -u
BUILD=${DTX_BUILD:?set DTX_BUILD to the build directory}
. "$(dirname "$0")/../lib/readme.sh"
source "$(dirname "$0")/../lib/harness.sh" # WORK, removed on exit
TMP=$WORK
P="$TMP/prefix"
PASS=0
FAIL=0
check() { # DESCRIPTION RESULT(0/1) [LOG FILE]
  if [ "$2" -eq 0 ]; then PASS=$((PASS + 1)); else
    FAIL=$((FAIL + 1))
    echo "FAIL: $1" >&2
    [ -n "${3:-}" ] && [ -f "$3" ] && tail -20 "$3" | sed 's/^/      /' >&2
  fi
  return 0
}
finish() {
  echo "$PASS passed, $FAIL failed"
  [ "$FAIL" -eq 0 ]
  exit
}

RC=0
timeout 120 cmake --install "$BUILD" --prefix "$P" >"$TMP/install.log" 2>&1 || RC=$?
check "cmake --install --prefix (rc=$RC)" "$RC" "$TMP/install.log"
[ "$RC" -eq 0 ] || finish
pc=$(find "$P" -name doctx.pc | head -1)
check "doctx.pc is installed ($pc)" "$([ -n "$pc" ]; echo $?)"
[ -n "$pc" ] || finish
export PKG_CONFIG_PATH
PKG_CONFIG_PATH=$(dirname "$pc")
check "doctx.pc names the prefix it was installed to" \
  "$(grep -qxF "prefix=$P" "$pc"; echo $?)" "$pc"
for f in bin/doctx include/doctx.h; do
  check "$f is installed" "$([ -e "$P/$f" ]; echo $?)"
done
RC=0
"$P/bin/doctx" --version >"$TMP/version" 2>&1 || RC=$?
check "the installed doctx runs (rc=$RC)" "$RC" "$TMP/version"

block example:c docs/api.md >"$TMP/example.c"
block example:c:output docs/api.md >"$TMP/want"
check "docs/api.md has the C example and its output" \
  "$([ -s "$TMP/example.c" ] && [ -s "$TMP/want" ]; echo $?)"
# A sanitizer build's library needs the sanitizer runtime in the program.
san=()
grep -q '^DTX_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null &&
  san=(-fsanitize=address,undefined)
RC=0
# As docs/api.md builds it (plus warnings as errors, and a sanitizer build's
# runtime).
# shellcheck disable=SC2046
(cd "$TMP" && timeout 120 cc -std=c11 -Wall -Wextra -Werror "${san[@]}" example.c \
  $(pkg-config --cflags --libs doctx) \
  -Wl,-rpath,"$(pkg-config --variable=libdir doctx)" -o example) >"$TMP/cc.log" 2>&1 || RC=$?
check "the example in docs/api.md builds with pkg-config's flags (rc=$RC)" "$RC" "$TMP/cc.log"
check "pkg-config points at the prefix ($(pkg-config --cflags doctx))" \
  "$(pkg-config --cflags doctx | grep -qF -- "-I$P/include"; echo $?)"
if [ "$RC" -eq 0 ]; then
  mkdir "$TMP/run"
  RC=0
  (cd "$TMP/run" && timeout 60 ../example) >"$TMP/got" 2>&1 || RC=$?
  check "the example runs (rc=$RC)" "$RC" "$TMP/got"
  check "the example prints the output docs/api.md shows" \
    "$(cmp -s "$TMP/want" "$TMP/got"; echo $?)" "$TMP/got"
fi
finish
