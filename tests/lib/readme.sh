# readme.sh -- for the suites that hold the README and its docs to the code
# (sourced): sets ROOT (the repository) and README, and `block NAME [FILE]`
# prints the lines between FILE's (default README.md; a path from ROOT,
# e.g. docs/cli.md) <!-- NAME --> and <!-- /NAME --> markers, without code
# fences.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
README="$ROOT/README.md"

block() {
  awk -v first="<!-- $1 -->" -v last="<!-- /$1 -->" '
    $0 == last { on = 0 } on && !/^```/ { print } $0 == first { on = 1 }' \
    "$ROOT/${2:-README.md}"
}
