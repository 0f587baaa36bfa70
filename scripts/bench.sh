#!/usr/bin/env bash
# make bench: the store benchmark and the transfer benchmark, each printing
# ratios against a native SQLite baseline measured in the same run.
set -euo pipefail
BUILD=${1:-build}
echo "## bench_store: find_one_and_update \$inc vs raw SQLite UPDATE"
"$BUILD/bench_store"
echo
echo "## bench_transfer: two-phase transfers vs one SQLite transaction each"
"$BUILD/bench_transfer"
