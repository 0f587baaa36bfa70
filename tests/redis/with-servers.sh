#!/usr/bin/env bash
# with-servers.sh BUILD_DIR CMD... -- runs one suite by hand on Redis:
# starts a standalone redis-server and a 3+3 cluster on free loopback
# ports (servers.sh), then runs CMD once against each, one after the
# other, with DTX_REDIS_URI set to the target, DOCTX to BUILD_DIR/doctx
# and DTX_TEST_STORE_CMD to fresh-store.sh -- what run-redis.sh gives its
# suites.  A C suite takes the URI as an argument:
#   tests/redis/with-servers.sh build bash -c 'build/txn_job "$DTX_REDIS_URI"'
#   tests/redis/with-servers.sh build bash tests/cli/job.sh
# TARGETS=sa or TARGETS=cl runs one target only.  Each run is bounded by
# STEP_TIMEOUT (default 900 s).  Exit status 0 only when every run passed.
set -u
BUILD=${1:?usage: with-servers.sh BUILD_DIR CMD...}
BUILD=$(cd "$BUILD" && pwd)
shift
[ $# -gt 0 ] || { echo "usage: with-servers.sh BUILD_DIR CMD..." >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/servers.sh"
servers_up
export DOCTX="$BUILD/doctx" DTX_TEST_STORE_CMD="$HERE/fresh-store.sh"
fail=0
for t in ${TARGETS:-sa cl}; do
  case $t in sa) u=$URI_SA ;; cl) u=$URI_CL ;; *) echo "TARGETS: sa or cl" >&2; exit 2 ;; esac
  echo "=== $u: $*"
  if DTX_REDIS_URI=$u timeout -k 10 "${STEP_TIMEOUT:-900}" "$@"; then
    echo "=== $u: ok"
  else
    echo "=== $u: FAILED"
    fail=$((fail + 1))
  fi
done
exit $((fail > 0))
