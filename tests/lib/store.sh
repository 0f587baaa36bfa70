# store.sh -- the store a shell suite runs on (sourced).  SQLite files in
# $WORK by default; under tests/redis/run-redis.sh, DTX_TEST_STORE_CMD
# (tests/redis/fresh-store.sh) hands out an emptied Redis store instead, so
# the same suite proves the same contract on every backend.
#
# The SQLite files run at sync=normal (WAL, no fsync per commit).  What
# these suites kill is a process, never the machine, and a committed
# transaction survives a process's death at every sync level: the pages are
# the kernel's once write() returned.  fsync guards only against a power
# loss, which no shell suite can stage; the conformance suite runs on a
# file at sync=full.  At full, the crash suites spent most of their wall
# time waiting for fsync (transfer's fault points: 24 s at full, 11 s at
# normal, the same CPU).

# new_store NAME -> sets $S to a fresh store URI.
#
# When that command is tests/redis/fresh-store.sh, its NAME case is done
# here, the same way (a namespace of the name's start and 32 random bits
# appended to DTX_REDIS_URI): the crash suites ask for a store per row,
# and a bash start per store was ~2 of a row's ~20 process starts.
new_store() {
  local cmd=${DTX_TEST_STORE_CMD:-}
  if [ "${cmd##*/}" = fresh-store.sh ] && [ -n "${DTX_REDIS_URI:-}" ]; then
    local base=${1//[^A-Za-z0-9_-]/_} ns
    printf -v ns '%s-%08x' "${base:0:22}" "$SRANDOM"
    case "$DTX_REDIS_URI" in
    *\?*) S="$DTX_REDIS_URI&ns=$ns" ;;
    *) S="$DTX_REDIS_URI?ns=$ns" ;;
    esac
  elif [ -n "${DTX_TEST_STORE_CMD:-}" ]; then
    S=$($DTX_TEST_STORE_CMD "$1")
  else
    S="sqlite:$WORK/$1.db?sync=normal"
  fi
}
